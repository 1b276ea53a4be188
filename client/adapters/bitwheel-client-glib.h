/*
 * bitwheel-client-glib.h - drive a struct bwc_client from a GLib main
 * context (header-only; see bitwheel-client-loop.h for what every adapter
 * does and when to call update).
 *
 *   #include <bitwheel-client-glib.h>
 *   // pkg-config --cflags --libs libbitwheel-client glib-2.0
 *
 *   bwc_set_role(c, BWC_ROLE_CONSUMER);
 *   bwc_set_fire_handler(c, on_fire, NULL);    // acks with bwc_send_ack
 *   bwc_connect(c, NULL, "myprog-jobs");
 *   bwc_glib_attach(c, NULL, on_error, NULL, &a);  // NULL: the default
 *   g_main_loop_run(loop);                         //   context
 *   bwc_glib_detach(a);
 *   bwc_free(c);
 *
 * The adapter is a GSource attached to the context: it polls the socket
 * (G_IO_IN, and G_IO_OUT while requests wait to be written), and is ready
 * at once after update().  GLib holds a reference to a source while it
 * dispatches it, and the adapter one while it runs, so a detach from a
 * callback frees it only once that returns.
 */
#ifndef BITWHEEL_CLIENT_GLIB_H
#define BITWHEEL_CLIENT_GLIB_H

#include <glib.h>

#include <bitwheel-client-loop.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bwc_glib {
	GSource source;        /* first: g_source_new allocates the rest   */
	struct bwc_loop loop;
	gpointer tag;          /* g_source_add_unix_fd's; NULL: none        */
	bool kick;             /* update(): dispatch at the next turn       */
};

/* Register the socket as the client has it now. */
static inline void bwc_glib_watch_(struct bwc_glib *a)
{
	if (!bwc_loop_sync(&a->loop))
		return;
	if (a->tag != NULL)
		g_source_remove_unix_fd(&a->source, a->tag);
	a->tag = NULL;
	if (a->loop.fd >= 0)
		a->tag = g_source_add_unix_fd(&a->source, a->loop.fd,
					      (GIOCondition)(G_IO_IN |
					      ((a->loop.events & POLLOUT) ?
					       G_IO_OUT : 0)));
}

/* Every entry into the adapter: a dispatch from the loop, or update. */
static inline void bwc_glib_run_(struct bwc_glib *a, bool dispatch)
{
	g_source_ref(&a->source);
	bwc_loop_enter(&a->loop);
	if (!dispatch || bwc_loop_dispatch(&a->loop)) {
		bwc_glib_watch_(a);
		if (!dispatch) {
			a->kick = true;
			g_main_context_wakeup(g_source_get_context(&a->source));
		}
	}
	(void)bwc_loop_leave(&a->loop);     /* freed by the last unref */
	g_source_unref(&a->source);
}

static inline gboolean bwc_glib_prepare_(GSource *s, gint *timeout)
{
	*timeout = -1;
	return ((struct bwc_glib *)s)->kick;
}

static inline gboolean bwc_glib_check_(GSource *s)
{
	struct bwc_glib *a = (struct bwc_glib *)s;

	return a->kick || (a->tag != NULL &&
			   g_source_query_unix_fd(s, a->tag) != 0);
}

static inline gboolean bwc_glib_dispatch_(GSource *s, GSourceFunc cb,
					  gpointer data)
{
	struct bwc_glib *a = (struct bwc_glib *)s;

	(void)cb;
	(void)data;
	a->kick = false;
	bwc_glib_run_(a, true);
	return G_SOURCE_CONTINUE;
}

static GSourceFuncs bwc_glib_funcs_ = {
	bwc_glib_prepare_, bwc_glib_check_, bwc_glib_dispatch_,
	NULL, NULL, NULL,
};

/*
 * Watch the client's socket as it is now and dispatch once at the
 * context's next turn.  Call it after bwc_connect, bwc_reconnect, a
 * blocking call or bwc_send_* made outside the adapter's callbacks.
 */
static inline void bwc_glib_update(struct bwc_glib *a)
{
	bwc_glib_run_(a, false);
}

/*
 * Attach c (connected or not yet: update after bwc_connect) to the
 * context ctx (NULL: the default context).  on_error (may be NULL) gets
 * bwc_dispatch()'s failures.  0, BWC_EINVAL (c or out NULL).
 */
static inline int bwc_glib_attach(struct bwc_client *c, GMainContext *ctx,
				  bwc_loop_error_fn on_error, void *arg,
				  struct bwc_glib **out)
{
	struct bwc_glib *a;

	if (c == NULL || out == NULL)
		return BWC_EINVAL;
	/* g_source_new aborts rather than fail. */
	a = (struct bwc_glib *)g_source_new(&bwc_glib_funcs_, sizeof(*a));
	bwc_loop_init(&a->loop, c, on_error, arg);
	a->tag = NULL;
	a->kick = false;
	g_source_set_name(&a->source, "bitwheel-client");
	g_source_attach(&a->source, ctx);
	bwc_glib_update(a);         /* fires the Hello brought are queued */
	*out = a;
	return 0;
}

/* Remove the adapter from its context and free it (at once, or once the
 * adapter's call in progress returns).  NULL is a no-op. */
static inline void bwc_glib_detach(struct bwc_glib *a)
{
	if (a == NULL)
		return;
	(void)bwc_loop_detach(&a->loop);
	g_source_destroy(&a->source);
	g_source_unref(&a->source);
}

#ifdef __cplusplus
}
#endif

#endif /* BITWHEEL_CLIENT_GLIB_H */
