/*
 * bitwheel-client-loop.h - what the event-loop adapters of
 * libbitwheel-client share (bitwheel-client-libevent.h, -libev.h,
 * -libuv.h, -glib.h): header-only, in the manner of hiredis' adapters,
 * so that a program links only the loop it already uses.  Include an
 * adapter, not this file.
 *
 * An adapter attaches a struct bwc_client to a loop: it watches bwc_fd()
 * for the events bwc_poll_events() asks for (level-triggered), calls
 * bwc_dispatch() when the socket is ready, and after each dispatch watches
 * what the client asks for then.  The client's fire handler and reply
 * callbacks (bwc_set_fire_handler, bwc_send_*) thus run from the loop.
 * The library keeps no timer of its own for a loop to drive: requests
 * sent without waiting have no deadline, and reconnecting happens inside
 * bwc_dispatch (see bitwheel-client.h, "Riding through a restart").
 *
 * Three things the adapter cannot see, and what covers them:
 *   - a reconnect may give the new socket the old one's descriptor number,
 *     and a loop that watched the old one (epoll drops it when it closes)
 *     would wait forever: after every dispatch the adapter compares the
 *     socket's inode (fstat) too, and registers it afresh when it changed;
 *   - a blocking call (bwc_schedule, bwc_stats, ...) made outside the
 *     adapter's callbacks may queue fires in the client, which the socket
 *     no longer signals, or reconnect onto a new socket: call the
 *     adapter's update function after such calls, and after bwc_connect,
 *     bwc_reconnect and bwc_send_* outside its callbacks.  It watches
 *     the client's socket as it is now and makes the loop dispatch once
 *     at its next turn (a zero timer), which hands out what was queued;
 *   - bwc_dispatch failing: the error callback given at attach gets the
 *     code (bwc_errmsg() has the message).  When the connection is gone
 *     (BWC_ECLOSED, BWC_EGAVEUP, ...) the adapter stops watching; the
 *     program may bwc_reconnect() and call update, or detach.
 *
 * Costs per dispatch: the dispatch, one fstat(2), and a change to the
 * loop's registration only when the socket or the events changed.
 *
 * Detaching from inside a callback the adapter runs (the fire handler, a
 * reply callback, the error callback) is allowed: the adapter frees
 * itself once the call that ran it returns.  Neither the adapter nor
 * the loop owns the client: detach first, then bwc_free().
 */
#ifndef BITWHEEL_CLIENT_LOOP_H
#define BITWHEEL_CLIENT_LOOP_H

#include <poll.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <bitwheel-client.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called with bwc_dispatch()'s error code when it fails inside the loop;
 * bwc_errmsg(c) says why.  NULL at attach: errors are ignored (and a
 * lost connection just stops the watching). */
typedef void (*bwc_loop_error_fn)(struct bwc_client *c, int err, void *arg);

/* The adapter-independent state, embedded in each adapter's struct. */
struct bwc_loop {
	struct bwc_client *c;
	bwc_loop_error_fn on_error;
	void *arg;
	int fd;                /* the descriptor the loop watches; -1: none */
	ino_t ino;             /* its socket's inode                        */
	short events;          /* POLLIN / POLLOUT the loop watches for     */
	unsigned busy;         /* adapter calls in progress (nested ones
				  from callbacks included)                  */
	bool detached;         /* detach was called                         */
};

static inline void bwc_loop_init(struct bwc_loop *l, struct bwc_client *c,
				 bwc_loop_error_fn on_error, void *arg)
{
	l->c = c;
	l->on_error = on_error;
	l->arg = arg;
	l->fd = -1;
	l->ino = 0;
	l->events = 0;
	l->busy = 0;
	l->detached = false;
}

/*
 * Compare what the client asks to be watched with what the loop watches,
 * and record the former.  true: the adapter must drop its watcher (if
 * it had one, for the old descriptor) and, when l->fd >= 0, watch l->fd
 * for l->events.
 */
static inline bool bwc_loop_sync(struct bwc_loop *l)
{
	int fd = bwc_fd(l->c);
	short events = fd >= 0 ? (short)(bwc_poll_events(l->c) &
					 (POLLIN | POLLOUT)) : 0;
	ino_t ino = 0;
	struct stat st;

	if (fd >= 0 && fstat(fd, &st) == 0)
		ino = st.st_ino;
	if (fd == l->fd && ino == l->ino && events == l->events)
		return false;
	l->fd = fd;
	l->ino = ino;
	l->events = events;
	return true;
}

/*
 * Around each entry into the adapter (a loop callback, update), so that a
 * detach from a callback inside does not free the adapter under it.
 * bwc_loop_leave: true when the adapter was detached meanwhile and the
 * caller frees it now.
 */
static inline void bwc_loop_enter(struct bwc_loop *l)
{
	l->busy++;
}

static inline bool bwc_loop_leave(struct bwc_loop *l)
{
	return --l->busy == 0 && l->detached;
}

/* A failure to the error callback, unless detached. */
static inline void bwc_loop_report(struct bwc_loop *l, int err)
{
	if (l->on_error != NULL && !l->detached)
		l->on_error(l->c, err, l->arg);
}

/*
 * bwc_dispatch(), reporting a failure.  false: the adapter was detached
 * inside (by a callback), and its caller touches nothing more but
 * bwc_loop_leave; true: it goes on (bwc_loop_sync next).
 */
static inline bool bwc_loop_dispatch(struct bwc_loop *l)
{
	int rc = bwc_dispatch(l->c);

	if (rc != 0)
		bwc_loop_report(l, rc);
	return !l->detached;
}

/* At detach: true when the adapter may be freed now; false inside one of
 * its calls, whose bwc_loop_leave says when. */
static inline bool bwc_loop_detach(struct bwc_loop *l)
{
	l->detached = true;
	return l->busy == 0;
}

#ifdef __cplusplus
}
#endif

#endif /* BITWHEEL_CLIENT_LOOP_H */
