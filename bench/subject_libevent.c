/*
 * subject_libevent.c - libevent's timers: a binary min-heap of events.
 *
 * Each object embeds a struct event (<event2/event_struct.h>), assigned
 * once as a timer (evtimer_assign).  insert: event_add() with the relative
 * timeout deadline - now rounded up to the microsecond; outside the loop
 * libevent reads the clock (the simulated one) to make it absolute.
 * cancel: event_del().  poll: event_base_loop(EVLOOP_NONBLOCK |
 * EVLOOP_ONCE), one loop iteration: the epoll backend's epoll_wait(..., 0)
 * (answered without a system call unless --real-wait), a clock read,
 * timeout_process() moving every due timer to the active queue, then the
 * callbacks.  libevent fires a timer once its time is at or before the
 * loop's.  The base is created without locking; common timeouts are not
 * used (a program would need to know its timeouts' durations up front).
 */
#include <event2/event.h>
#include <event2/event_struct.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct leobj {
	void *pool_link;
	struct event ev;
	uint32_t id;
	struct les *owner;
};

struct les {
	struct event_base *base;
	struct objpool pool;
	uint64_t *ref;
	struct fire_sink *sink;
};

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct leobj *o = arg;
	struct les *l = o->owner;

	(void)fd;
	(void)what;
	l->ref[o->id] = 0;
	bench_fired(l->sink, o->id);
	objpool_put(&l->pool, o);
}

static void obj_init(void *obj, void *arg)
{
	struct leobj *o = obj;
	struct les *l = arg;

	evtimer_assign(&o->ev, l->base, on_timer, o);
	o->owner = l;
}

/*
 * Debian's libev.so exports libevent's API too (its emulation layer); if it
 * came first on the link line, event_add would be libev's.  local.mk links
 * libevent first; this makes sure.
 */
static bool event_add_is_libevent(void)
{
	Dl_info info;

	return dladdr((void *)(uintptr_t)event_add, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "libevent");
}

static int le_open(const struct subject *s, const struct subject_env *env,
		   void **ctx)
{
	struct les *l;
	struct event_config *cfg;

	(void)s;
	if (!event_add_is_libevent())
		return -2;
	l = calloc(1, sizeof(*l));
	cfg = event_config_new();
	if (!l || !cfg)
		goto fail;
	l->ref = env->ref;
	l->sink = env->sink;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
	event_config_require_features(cfg, 0);
	event_config_avoid_method(cfg, "select");
	event_config_avoid_method(cfg, "poll");
	l->base = event_base_new_with_config(cfg);
	if (!l->base)
		goto fail;
	if (objpool_init(&l->pool, sizeof(struct leobj), env->max_live,
			 obj_init, l))
		goto fail;
	event_config_free(cfg);
	*ctx = l;
	return 0;
fail:
	if (cfg)
		event_config_free(cfg);
	if (l && l->base)
		event_base_free(l->base);
	free(l);
	return -1;
}

static void le_close(void *ctx)
{
	struct les *l = ctx;

	event_base_free(l->base);
	objpool_fini(&l->pool);
	free(l);
}

static int le_insert(void *ctx, uint32_t id, uint64_t deadline)
{
	struct les *l = ctx;
	struct leobj *o = objpool_get(&l->pool);
	uint64_t us = (deadline - simclock_now() + 999) / 1000;
	struct timeval tv = { (time_t)(us / 1000000),
			      (suseconds_t)(us % 1000000) };

	if (!o)
		return -1;
	o->id = id;
	if (event_add(&o->ev, &tv)) {
		objpool_put(&l->pool, o);
		return -1;
	}
	l->ref[id] = (uintptr_t)o;
	return 0;
}

static int le_cancel(void *ctx, uint32_t id)
{
	struct les *l = ctx;
	struct leobj *o = (struct leobj *)(uintptr_t)l->ref[id];

	if (!o)
		return -1;
	event_del(&o->ev);
	l->ref[id] = 0;
	objpool_put(&l->pool, o);
	return 0;
}

static int le_poll(void *ctx, uint64_t now)
{
	struct les *l = ctx;

	(void)now;      /* the loop reads it from the simulated clock */
	return event_base_loop(l->base, EVLOOP_NONBLOCK | EVLOOP_ONCE) < 0;
}

const struct subject subject_libevent = {
	.name = "libevent",
	.family = "libevent",
	.version = event_get_version,
	.structure = "binary min-heap",
	.lib_fn = { "event_add", "event_del", "event_base_loop" },
	.open = le_open,
	.close = le_close,
	.insert = le_insert,
	.cancel = le_cancel,
	.poll = le_poll,
};
