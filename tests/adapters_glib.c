/*
 * adapters_glib.c - a GLib main context and bitwheel-client-glib.h for
 * tests/check_adapters.c (tests/adapters.h).
 */
#include <check.h>
#include <stdlib.h>

#include "bitwheel-client-glib.h"
#include "adapters.h"

struct lg_loop {
	GMainContext *ctx;
	GMainLoop *loop;
	bool stopped;
};

static void *lg_create(void)
{
	struct lg_loop *l = calloc(1, sizeof(*l));

	ck_assert_ptr_nonnull(l);
	l->ctx = g_main_context_new();
	l->loop = g_main_loop_new(l->ctx, FALSE);
	return l;
}

static void lg_destroy(void *loop)
{
	struct lg_loop *l = loop;

	g_main_loop_unref(l->loop);
	g_main_context_unref(l->ctx);
	free(l);
}

static gboolean lg_on_deadline(gpointer loop)
{
	g_main_loop_quit(loop);
	return G_SOURCE_REMOVE;
}

static bool lg_run(void *loop, int ms)
{
	struct lg_loop *l = loop;
	GSource *t = g_timeout_source_new((guint)ms);

	g_source_set_callback(t, lg_on_deadline, l->loop, NULL);
	g_source_attach(t, l->ctx);
	l->stopped = false;
	g_main_loop_run(l->loop);
	g_source_destroy(t);
	g_source_unref(t);
	return l->stopped;
}

static void lg_stop(void *loop)
{
	struct lg_loop *l = loop;

	l->stopped = true;
	g_main_loop_quit(l->loop);
}

static int lg_attach(void *loop, struct bwc_client *c, bwc_loop_error_fn fn,
		     void *arg, void **adapter)
{
	struct bwc_glib *a = NULL;
	int rc = bwc_glib_attach(c, ((struct lg_loop *)loop)->ctx, fn, arg, &a);

	*adapter = a;
	return rc;
}

static void lg_update(void *a)
{
	bwc_glib_update(a);
}

static void lg_detach(void *a)
{
	bwc_glib_detach(a);
}

static const struct bwc_loop *lg_core(void *a)
{
	return &((struct bwc_glib *)a)->loop;
}

const struct loop_ops glib_ops = {
	"glib", lg_create, lg_destroy, lg_run, lg_stop,
	lg_attach, lg_update, lg_detach, lg_core,
};
