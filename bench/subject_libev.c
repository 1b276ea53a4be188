/*
 * subject_libev.c - libev's timers: a 4-ary heap with cached deadlines.
 *
 * insert: ev_timer_set(after = deadline - now, no repeat) and
 * ev_timer_start(); libev adds `after` to its cached monotonic time, which
 * is the simulated time of the last poll (simclock.c), the time the insert
 * happens at.  cancel: ev_timer_stop().  poll: ev_run(EVRUN_NOWAIT), one
 * loop iteration: two clock reads, the backend's epoll_wait(..., 0)
 * (answered without a system call unless --real-wait), timers_reify for
 * every due timer, then the callbacks.  libev fires a timer once its time
 * is strictly before the loop's time.  The loop uses the epoll backend.
 */
#include <ev.h>

#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

struct evobj {
	void *pool_link;
	ev_timer t;
	uint32_t id;
	struct evs *owner;
};

struct evs {
	struct ev_loop *loop;
	struct objpool pool;
	uint64_t *ref;
	struct fire_sink *sink;
};

static void on_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
	struct evobj *o = container_of(t, struct evobj, t);
	struct evs *e = o->owner;

	(void)loop;
	(void)revents;
	e->ref[o->id] = 0;
	bench_fired(e->sink, o->id);
	objpool_put(&e->pool, o);
}

static void obj_init(void *obj, void *arg)
{
	struct evobj *o = obj;

	ev_init(&o->t, on_timer);
	o->owner = arg;
}

static int lev_open(const struct subject *s, const struct subject_env *env,
		   void **ctx)
{
	struct evs *e = calloc(1, sizeof(*e));

	(void)s;
	if (!e)
		return -1;
	e->ref = env->ref;
	e->sink = env->sink;
	e->loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOENV);
	if (!e->loop)
		goto fail;
	if (objpool_init(&e->pool, sizeof(struct evobj), env->max_live,
			 obj_init, e))
		goto fail;
	*ctx = e;
	return 0;
fail:
	if (e->loop)
		ev_loop_destroy(e->loop);
	free(e);
	return -1;
}

static void lev_close(void *ctx)
{
	struct evs *e = ctx;

	ev_loop_destroy(e->loop);
	objpool_fini(&e->pool);
	free(e);
}

static int lev_insert(void *ctx, uint32_t id, uint64_t deadline)
{
	struct evs *e = ctx;
	struct evobj *o = objpool_get(&e->pool);

	if (!o)
		return -1;
	o->id = id;
	ev_timer_set(&o->t, (double)(deadline - simclock_now()) * 1e-9, 0.);
	ev_timer_start(e->loop, &o->t);
	e->ref[id] = (uintptr_t)o;
	return 0;
}

static int lev_cancel(void *ctx, uint32_t id)
{
	struct evs *e = ctx;
	struct evobj *o = (struct evobj *)(uintptr_t)e->ref[id];

	if (!o)
		return -1;
	ev_timer_stop(e->loop, &o->t);
	e->ref[id] = 0;
	objpool_put(&e->pool, o);
	return 0;
}

static int lev_poll(void *ctx, uint64_t now)
{
	struct evs *e = ctx;

	(void)now;      /* the loop reads it from the simulated clock */
	ev_run(e->loop, EVRUN_NOWAIT);
	return 0;
}

static const char *lev_version(void)
{
	static char buf[32];

	snprintf(buf, sizeof(buf), "%d.%d", ev_version_major(),
		 ev_version_minor());
	return buf;
}

const struct subject subject_libev = {
	.name = "libev",
	.family = "libev",
	.version = lev_version,
	.structure = "4-ary heap",
	.strict = true,
	.lib_fn = { "ev_timer_start", "ev_timer_stop", "ev_run" },
	.open = lev_open,
	.close = lev_close,
	.insert = lev_insert,
	.cancel = lev_cancel,
	.poll = lev_poll,
};
