/*
 * bitwheel-client-libevent.h - drive a struct bwc_client from a libevent
 * 2 event_base (header-only; see bitwheel-client-loop.h for what every
 * adapter does and when to call update).
 *
 *   #include <bitwheel-client-libevent.h>
 *   // pkg-config --cflags --libs libbitwheel-client libevent
 *
 *   bwc_set_role(c, BWC_ROLE_CONSUMER);
 *   bwc_set_fire_handler(c, on_fire, NULL);    // acks with bwc_send_ack
 *   bwc_connect(c, NULL, "myprog-jobs");
 *   bwc_libevent_attach(c, base, on_error, NULL, &a);
 *   event_base_dispatch(base);                 // fires arrive in on_fire
 *   bwc_libevent_detach(a);
 *   bwc_free(c);
 *
 * The adapter holds two events of the base: the socket's (EV_READ, and
 * EV_WRITE while requests wait to be written; EV_PERSIST) and a timer
 * that update() activates.  Both count as pending events, so
 * event_base_dispatch() returns only once the adapter is detached or the
 * connection is gone, or on event_base_loopbreak().
 */
#ifndef BITWHEEL_CLIENT_LIBEVENT_H
#define BITWHEEL_CLIENT_LIBEVENT_H

#include <stdlib.h>

#include <event2/event.h>

#include <bitwheel-client-loop.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bwc_libevent {
	struct bwc_loop loop;
	struct event_base *base;
	struct event *io;      /* the socket's; NULL while none is watched */
	struct event *kick;    /* update()'s: one dispatch at the next turn */
};

/* Register the socket as the client has it now. */
static inline void bwc_libevent_watch_(struct bwc_libevent *a);

/* Every entry into the adapter: a dispatch from the loop, or update. */
static inline void bwc_libevent_run_(struct bwc_libevent *a, bool dispatch)
{
	bwc_loop_enter(&a->loop);
	if (!dispatch || bwc_loop_dispatch(&a->loop)) {
		bwc_libevent_watch_(a);
		if (!dispatch && !a->loop.detached)
			event_active(a->kick, EV_TIMEOUT, 1);
	}
	if (bwc_loop_leave(&a->loop))
		free(a);                /* detached inside; events gone */
}

static inline void bwc_libevent_on_io_(evutil_socket_t fd, short what,
				       void *arg)
{
	(void)fd;
	(void)what;
	bwc_libevent_run_((struct bwc_libevent *)arg, true);
}

static inline void bwc_libevent_watch_(struct bwc_libevent *a)
{
	short what;

	if (!bwc_loop_sync(&a->loop))
		return;
	if (a->io != NULL) {
		event_free(a->io);
		a->io = NULL;
	}
	if (a->loop.fd < 0)
		return;
	what = (short)(EV_PERSIST | EV_READ |
		       ((a->loop.events & POLLOUT) ? EV_WRITE : 0));
	a->io = event_new(a->base, a->loop.fd, what, bwc_libevent_on_io_, a);
	if (a->io == NULL || event_add(a->io, NULL) != 0) {
		/* Out of memory: nothing watched; the next update retries. */
		if (a->io != NULL)
			event_free(a->io);
		a->io = NULL;
		a->loop.fd = -1;
		bwc_loop_report(&a->loop, BWC_ENOMEM);
	}
}

/*
 * Watch the client's socket as it is now and dispatch once at the loop's
 * next turn.  Call it after bwc_connect, bwc_reconnect, a blocking call
 * or bwc_send_* made outside the adapter's callbacks (inside them it is
 * not needed).
 */
static inline void bwc_libevent_update(struct bwc_libevent *a)
{
	bwc_libevent_run_(a, false);
}

/*
 * Attach c (connected or not yet: update after bwc_connect) to base.
 * on_error (may be NULL) gets bwc_dispatch()'s failures.  0, BWC_EINVAL
 * (c, base or out NULL), BWC_ENOMEM.
 */
static inline int bwc_libevent_attach(struct bwc_client *c,
				      struct event_base *base,
				      bwc_loop_error_fn on_error, void *arg,
				      struct bwc_libevent **out)
{
	struct bwc_libevent *a;

	if (c == NULL || base == NULL || out == NULL)
		return BWC_EINVAL;
	a = (struct bwc_libevent *)calloc(1, sizeof(*a));
	if (a == NULL)
		return BWC_ENOMEM;
	bwc_loop_init(&a->loop, c, on_error, arg);
	a->base = base;
	a->kick = event_new(base, -1, 0, bwc_libevent_on_io_, a);
	if (a->kick == NULL) {
		free(a);
		return BWC_ENOMEM;
	}
	bwc_libevent_update(a);     /* fires the Hello brought are queued */
	*out = a;
	return 0;
}

/* Remove the adapter's events from the base and free it (at once, or
 * once the adapter's call in progress returns, when called from a
 * callback).  NULL is a no-op. */
static inline void bwc_libevent_detach(struct bwc_libevent *a)
{
	if (a == NULL)
		return;
	if (a->io != NULL)
		event_free(a->io);
	event_free(a->kick);
	a->io = a->kick = NULL;
	if (bwc_loop_detach(&a->loop))
		free(a);
}

#ifdef __cplusplus
}
#endif

#endif /* BITWHEEL_CLIENT_LIBEVENT_H */
