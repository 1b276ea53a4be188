/*
 * bitwheel-client-libuv.h - drive a struct bwc_client from a libuv loop
 * (header-only; see bitwheel-client-loop.h for what every adapter does and
 * when to call update).
 *
 *   #include <bitwheel-client-libuv.h>
 *   // pkg-config --cflags --libs libbitwheel-client libuv
 *
 *   bwc_set_role(c, BWC_ROLE_CONSUMER);
 *   bwc_set_fire_handler(c, on_fire, NULL);    // acks with bwc_send_ack
 *   bwc_connect(c, NULL, "myprog-jobs");
 *   bwc_libuv_attach(c, uv_default_loop(), on_error, NULL, &a);
 *   uv_run(uv_default_loop(), UV_RUN_DEFAULT);
 *   bwc_libuv_detach(a);                       // closes its handles:
 *   uv_run(uv_default_loop(), UV_RUN_DEFAULT); // let the closes finish
 *   bwc_free(c);
 *
 * The adapter holds a uv_poll_t on the socket (UV_READABLE, and
 * UV_WRITABLE while requests wait to be written) and a uv_timer_t of 0 ms
 * that update() starts.  libuv binds a uv_poll_t to one descriptor for
 * good, and closing a handle takes a turn of the loop: a new socket gets a
 * new handle, the old one is closed and freed by its close callback, and
 * so is the adapter itself after bwc_libuv_detach().
 */
#ifndef BITWHEEL_CLIENT_LIBUV_H
#define BITWHEEL_CLIENT_LIBUV_H

#include <stdlib.h>

#include <uv.h>

#include <bitwheel-client-loop.h>

#ifdef __cplusplus
extern "C" {
#endif

struct bwc_libuv {
	struct bwc_loop loop;
	uv_loop_t *uv;
	uv_poll_t *poll;       /* the socket's; NULL while none is watched */
	uv_timer_t kick;       /* update()'s: one dispatch at the next turn */
};

static inline void bwc_libuv_free_handle_(uv_handle_t *h)
{
	free(h);
}

static inline void bwc_libuv_free_adapter_(uv_handle_t *h)
{
	free(h->data);
}

static inline void bwc_libuv_drop_poll_(struct bwc_libuv *a)
{
	if (a->poll == NULL)
		return;
	uv_poll_stop(a->poll);
	uv_close((uv_handle_t *)a->poll, bwc_libuv_free_handle_);
	a->poll = NULL;
}

static inline void bwc_libuv_on_poll_(uv_poll_t *h, int status, int events);
static inline void bwc_libuv_on_kick_(uv_timer_t *h);

static inline void bwc_libuv_watch_(struct bwc_libuv *a)
{
	int fd_was = a->loop.fd, rc;
	int events;

	if (!bwc_loop_sync(&a->loop))
		return;
	events = UV_READABLE | ((a->loop.events & POLLOUT) ? UV_WRITABLE : 0);
	if (a->poll != NULL && a->loop.fd >= 0 && a->loop.fd == fd_was) {
		/* Could be a new socket under the same number: stop (libuv
		 * forgets the registration) and start again. */
		uv_poll_stop(a->poll);
		if (uv_poll_start(a->poll, events, bwc_libuv_on_poll_) == 0)
			return;
	}
	bwc_libuv_drop_poll_(a);
	if (a->loop.fd < 0)
		return;
	a->poll = (uv_poll_t *)malloc(sizeof(*a->poll));
	if (a->poll == NULL)
		rc = UV_ENOMEM;
	else if ((rc = uv_poll_init(a->uv, a->poll, a->loop.fd)) != 0) {
		free(a->poll);
		a->poll = NULL;
	} else {
		a->poll->data = a;
		rc = uv_poll_start(a->poll, events, bwc_libuv_on_poll_);
	}
	if (rc != 0) {
		/* Nothing watched; the next update retries. */
		bwc_libuv_drop_poll_(a);
		a->loop.fd = -1;
		bwc_loop_report(&a->loop, rc == UV_ENOMEM ? BWC_ENOMEM : BWC_EIO);
	}
}

/* Every entry into the adapter: a dispatch from the loop, or update.
 * Detached inside, the adapter is freed by its handles' close. */
static inline void bwc_libuv_run_(struct bwc_libuv *a, bool dispatch)
{
	bwc_loop_enter(&a->loop);
	if (!dispatch || bwc_loop_dispatch(&a->loop)) {
		bwc_libuv_watch_(a);
		if (!dispatch && !a->loop.detached)
			uv_timer_start(&a->kick, bwc_libuv_on_kick_, 0, 0);
	}
	(void)bwc_loop_leave(&a->loop);
}

static inline void bwc_libuv_on_poll_(uv_poll_t *h, int status, int events)
{
	/* status < 0 (the socket failed): bwc_dispatch finds out why. */
	(void)status;
	(void)events;
	bwc_libuv_run_((struct bwc_libuv *)h->data, true);
}

static inline void bwc_libuv_on_kick_(uv_timer_t *h)
{
	bwc_libuv_run_((struct bwc_libuv *)h->data, true);
}

/*
 * Watch the client's socket as it is now and dispatch once at the loop's
 * next turn.  Call it after bwc_connect, bwc_reconnect, a blocking call
 * or bwc_send_* made outside the adapter's callbacks.
 */
static inline void bwc_libuv_update(struct bwc_libuv *a)
{
	bwc_libuv_run_(a, false);
}

/*
 * Attach c (connected or not yet: update after bwc_connect) to the loop
 * uv.  on_error (may be NULL) gets bwc_dispatch()'s failures.  0,
 * BWC_EINVAL (c, uv or out NULL), BWC_ENOMEM.
 */
static inline int bwc_libuv_attach(struct bwc_client *c, uv_loop_t *uv,
				   bwc_loop_error_fn on_error, void *arg,
				   struct bwc_libuv **out)
{
	struct bwc_libuv *a;

	if (c == NULL || uv == NULL || out == NULL)
		return BWC_EINVAL;
	a = (struct bwc_libuv *)calloc(1, sizeof(*a));
	if (a == NULL)
		return BWC_ENOMEM;
	bwc_loop_init(&a->loop, c, on_error, arg);
	a->uv = uv;
	uv_timer_init(uv, &a->kick);        /* cannot fail */
	a->kick.data = a;
	bwc_libuv_update(a);        /* fires the Hello brought are queued */
	*out = a;
	return 0;
}

/* Stop and close the adapter's handles; the adapter is freed when the
 * loop has closed them (run it once more).  NULL is a no-op. */
static inline void bwc_libuv_detach(struct bwc_libuv *a)
{
	if (a == NULL)
		return;
	bwc_libuv_drop_poll_(a);
	uv_timer_stop(&a->kick);
	(void)bwc_loop_detach(&a->loop);    /* freed by the close below */
	uv_close((uv_handle_t *)&a->kick, bwc_libuv_free_adapter_);
}

#ifdef __cplusplus
}
#endif

#endif /* BITWHEEL_CLIENT_LIBUV_H */
