/*
 * clock.c - wall-clock timers: deadlines on CLOCK_REALTIME (Schedule's
 * realtime_ns) kept on the monotonic wheel, and the clock steps that move
 * them (PROTOCOL.md, "Clocks").
 *
 * The wheel counts CLOCK_MONOTONIC, which no one steps.  A wall-clock
 * timer is placed on it by the offset between the clocks when it is
 * placed: at realtime_ns - real_now after mono_now (at once when that is
 * past).  The offset changes when the wall clock is stepped (settimeofday,
 * NTP's step, an administrator, a VM resumed): the kernel tells, the way
 * systemd learns it, through a timerfd on CLOCK_REALTIME armed with
 * TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET at the end of time, whose
 * read() fails with ECANCELED after every step.  Then every wall-clock
 * timer is placed again: one whose deadline the step passed fires at once,
 * marked late; one a step back moved away waits longer.  A step the
 * daemon has not heard of yet cannot make one early either: when its slot
 * comes due, the timer fires only if CLOCK_REALTIME has reached its
 * deadline, and is placed again otherwise (bwd_wall_due).
 *
 * Data: a wall-clock timer has a bit (wall) and its instant in the
 * state's map of them, keyed by the timer's address (struct bwd_wall, 24
 * bytes and malloc's header, uncharged to the budgets: bounded by the
 * timers the uid may hold), which it joins when made and leaves when
 * freed.  A fire of one keeps its instant in place of its count (a
 * oneshot's is 0).  Monotonic timers and fires are not one byte larger.
 * The server owns the one timerfd (struct bwd_clock).
 *
 * Costs: a step costs O(wall-clock timers) wheel cancels and inserts;
 * a wall-clock timer's fire a map lookup and one clock_gettime(
 * CLOCK_REALTIME) (vDSO); monotonic timers nothing beyond a bit test in
 * the wheel's callback.
 * Periodic wall-clock timers are refused (request.c): a recurrence stated
 * in wall-clock time is the calendar's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "state-internal.h"

uint64_t bwd_wall_place(uint64_t wall_ns, uint64_t mono_now, uint64_t real_now)
{
	if (wall_ns <= real_now)
		return mono_now;
	if (wall_ns - real_now > UINT64_MAX - mono_now)
		return UINT64_MAX;
	return mono_now + (wall_ns - real_now);
}

/* A wall-clock timer's instant, in the state's map keyed by the timer's
 * address. */
struct bwd_wall {
	struct bwd_map_node node;
	uint64_t wall_ns;
};

static struct bwd_wall *wall_find(const struct bwd_state *st,
				  const struct bwd_timer *t)
{
	struct bwd_map_node *n = bwd_map_find(&st->wall, (uint64_t)(uintptr_t)t);

	return n ? bwd_container_of(n, struct bwd_wall, node) : NULL;
}

int bwd_wall_add(struct bwd_state *st, struct bwd_timer *t, uint64_t wall_ns)
{
	struct bwd_wall *w = malloc(sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->node.key = (uint64_t)(uintptr_t)t;
	w->wall_ns = wall_ns;
	bwd_map_insert(&st->wall, &w->node);
	st->stats.bytes += sizeof(*w);
	t->wall = true;
	return 0;
}

void bwd_wall_remove(struct bwd_state *st, struct bwd_timer *t)
{
	struct bwd_wall *w;

	if (!t->wall || !(w = wall_find(st, t)))
		return;
	bwd_map_remove(&st->wall, &w->node);
	st->stats.bytes -= sizeof(*w);
	t->wall = false;
	free(w);
}

uint64_t bwd_wall_ns(const struct bwd_state *st, const struct bwd_timer *t)
{
	const struct bwd_wall *w = t->wall ? wall_find(st, t) : NULL;

	return w ? w->wall_ns : 0;
}

uint64_t bwd_wall_due(struct bwd_state *st, struct bwd_timer *t,
		      uint64_t now_ns)
{
	uint64_t real = bwd_realtime_ns(), wall = bwd_wall_ns(st, t);

	if (real >= wall)
		return 0;
	/* Never 0 nor now: the wheel fires a re-arm at its next poll. */
	return bwd_wall_place(wall, now_ns, real) + 1;
}

void bwd_state_clock_step(struct bwd_state *st)
{
	uint64_t mono = bwd_state_now(st), real = bwd_realtime_ns(), n = 0;

	/* Not in the wheel yet while restoring: placed at the restore's
	 * end. */
	if (st->restoring)
		return;
	for (size_t b = 0; b <= st->wall.mask; b++) {
		for (struct bwd_map_node *m = st->wall.bucket[b], *next; m; m = next) {
			struct bwd_wall *w = bwd_container_of(m, struct bwd_wall, node);
			struct bwd_timer *t = (struct bwd_timer *)(uintptr_t)m->key;

			next = m->next;
			/* Fired already: its fire is made. */
			if (t->fired)
				continue;
			bwd_wheels_disarm(st, t);
			if (w->wall_ns <= real)
				t->late = true;
			t->deadline_ns = bwd_wall_place(w->wall_ns, mono, real);
			if (bwd_wheels_arm(st, t)) {
				bwd_log(BWD_LOG_ERR, "no memory to place a wall-clock timer again: it is lost");
				LANE(t, lost, 1);
				LANE(t, pending, -1);
				bwd_timer_free(st, t);
				continue;
			}
			n++;
		}
	}
	bwd_log(BWD_LOG_INFO, "the wall clock was set: %" PRIu64 " wall-clock timers placed again", n);
}

/* ---- the step detector --------------------------------------------------- */

struct bwd_clock {
	int fd;
	struct event *ev;
	void (*on_step)(void *arg);
	void *arg;
};

/* Armed at the end of time: it never expires, it is only cancelled. */
static int clock_arm(int fd)
{
	struct itimerspec its = { .it_value = { .tv_sec = (time_t)INT64_MAX } };

	return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET,
			       &its, NULL) < 0 ? -errno : 0;
}

static void on_clock(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_clock *c = arg;
	uint64_t expirations;

	(void)what;
	if (read(fd, &expirations, sizeof(expirations)) >= 0 || errno != ECANCELED)
		return;
	/* Armed again before the timers are placed: a step while they
	 * are is heard of too. */
	if (clock_arm(c->fd))
		bwd_log(BWD_LOG_ERR, "timerfd_settime(CLOCK_REALTIME): %s; clock steps go unnoticed until a wall-clock timer's slot comes due",
			strerror(errno));
	c->on_step(c->arg);
}

int bwd_clock_open(struct event_base *base, void (*on_step)(void *arg),
		   void *arg, struct bwd_clock **out)
{
	struct bwd_clock *c = calloc(1, sizeof(*c));
	int err = -ENOMEM;

	if (!c)
		return -ENOMEM;
	c->on_step = on_step;
	c->arg = arg;
	c->fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
	if (c->fd < 0) {
		err = -errno;
		bwd_log(BWD_LOG_ERR, "timerfd_create(CLOCK_REALTIME): %s", strerror(errno));
		goto fail;
	}
	err = clock_arm(c->fd);
	if (err) {
		bwd_log(BWD_LOG_ERR, "timerfd_settime(CLOCK_REALTIME): %s", strerror(-err));
		goto fail;
	}
	err = -ENOMEM;
	c->ev = event_new(base, c->fd, EV_READ | EV_PERSIST, on_clock, c);
	if (!c->ev || event_add(c->ev, NULL))
		goto fail;
	*out = c;
	return 0;
fail:
	bwd_clock_free(c);
	return err;
}

void bwd_clock_free(struct bwd_clock *c)
{
	if (!c)
		return;
	if (c->ev)
		event_free(c->ev);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}
