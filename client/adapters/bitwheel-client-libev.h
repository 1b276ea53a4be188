/*
 * bitwheel-client-libev.h - drive a struct bwc_client from a libev loop
 * (header-only; see bitwheel-client-loop.h for what every adapter does and
 * when to call update).
 *
 *   #include <bitwheel-client-libev.h>     // cc ... -lev $(pkg-config
 *                                          //   --cflags --libs libbitwheel-client)
 *   bwc_set_role(c, BWC_ROLE_CONSUMER);
 *   bwc_set_fire_handler(c, on_fire, NULL);    // acks with bwc_send_ack
 *   bwc_connect(c, NULL, "myprog-jobs");
 *   bwc_libev_attach(c, EV_DEFAULT, on_error, NULL, &a);
 *   ev_run(EV_DEFAULT, 0);
 *   bwc_libev_detach(a);
 *   bwc_free(c);
 *
 * The adapter holds an ev_io for the socket (EV_READ, and EV_WRITE while
 * requests wait to be written) and an ev_timer of 0 s that update()
 * starts.  An active ev_io keeps ev_run() running; ev_unref() on the loop
 * after attach makes it not count, as for any watcher.
 */
#ifndef BITWHEEL_CLIENT_LIBEV_H
#define BITWHEEL_CLIENT_LIBEV_H

#include <stdlib.h>

#include <ev.h>

#include <bitwheel-client-loop.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bwc_libev {
	struct bwc_loop loop;
	struct ev_loop *ev;
	ev_io io;              /* the socket's; active while one is watched */
	ev_timer kick;         /* update()'s: one dispatch at the next turn */
};

/* Register the socket as the client has it now. */
static inline void bwc_libev_watch_(struct bwc_libev *a)
{
	if (!bwc_loop_sync(&a->loop))
		return;
	ev_io_stop(a->ev, &a->io);
	if (a->loop.fd < 0)
		return;
	/* ev_io_set, not ev_io_modify: libev takes the descriptor for a new
	 * one, which it may be under the same number after a reconnect. */
	ev_io_set(&a->io, a->loop.fd,
		  EV_READ | ((a->loop.events & POLLOUT) ? EV_WRITE : 0));
	ev_io_start(a->ev, &a->io);
}

/* Every entry into the adapter: a dispatch from the loop, or update. */
static inline void bwc_libev_run_(struct bwc_libev *a, bool dispatch)
{
	bwc_loop_enter(&a->loop);
	if (!dispatch || bwc_loop_dispatch(&a->loop)) {
		bwc_libev_watch_(a);
		if (!dispatch)          /* a no-op when started already */
			ev_timer_start(a->ev, &a->kick);
	}
	if (bwc_loop_leave(&a->loop))
		free(a);                /* detached inside; watchers stopped */
}

static inline void bwc_libev_on_io_(struct ev_loop *ev, ev_io *w, int revents)
{
	(void)ev;
	(void)revents;
	bwc_libev_run_((struct bwc_libev *)w->data, true);
}

static inline void bwc_libev_on_kick_(struct ev_loop *ev, ev_timer *w,
				      int revents)
{
	(void)ev;
	(void)revents;
	bwc_libev_run_((struct bwc_libev *)w->data, true);
}

/*
 * Watch the client's socket as it is now and dispatch once at the loop's
 * next turn.  Call it after bwc_connect, bwc_reconnect, a blocking call
 * or bwc_send_* made outside the adapter's callbacks.
 */
static inline void bwc_libev_update(struct bwc_libev *a)
{
	bwc_libev_run_(a, false);
}

/*
 * Attach c (connected or not yet: update after bwc_connect) to the loop
 * ev.  on_error (may be NULL) gets bwc_dispatch()'s failures.  0,
 * BWC_EINVAL (c, ev or out NULL), BWC_ENOMEM.
 */
static inline int bwc_libev_attach(struct bwc_client *c, struct ev_loop *ev,
				   bwc_loop_error_fn on_error, void *arg,
				   struct bwc_libev **out)
{
	struct bwc_libev *a;

	if (c == NULL || ev == NULL || out == NULL)
		return BWC_EINVAL;
	a = (struct bwc_libev *)calloc(1, sizeof(*a));
	if (a == NULL)
		return BWC_ENOMEM;
	bwc_loop_init(&a->loop, c, on_error, arg);
	a->ev = ev;
	ev_io_init(&a->io, bwc_libev_on_io_, -1, EV_READ);
	a->io.data = a;
	ev_timer_init(&a->kick, bwc_libev_on_kick_, 0., 0.);
	a->kick.data = a;
	bwc_libev_update(a);        /* fires the Hello brought are queued */
	*out = a;
	return 0;
}

/* Stop the adapter's watchers and free it (at once, or once the
 * adapter's call in progress returns, when called from a callback).  NULL
 * is a no-op. */
static inline void bwc_libev_detach(struct bwc_libev *a)
{
	if (a == NULL)
		return;
	ev_io_stop(a->ev, &a->io);
	ev_timer_stop(a->ev, &a->kick);
	if (bwc_loop_detach(&a->loop))
		free(a);
}

#ifdef __cplusplus
}
#endif

#endif /* BITWHEEL_CLIENT_LIBEV_H */
