/*
 * subject_libuv.c - libuv's timers: a binary heap of uv_timer_t.
 *
 * Each object's uv_timer_t is initialised once (uv_timer_init).  insert:
 * uv_timer_start(timeout = deadline rounded up to the ms - uv_now()), no
 * repeat; libuv counts whole milliseconds from its cached loop time, which
 * is the simulated time of the last poll.  cancel: uv_timer_stop().  poll:
 * uv_run(UV_RUN_NOWAIT), one loop iteration: uv_update_time() (a clock
 * read), the due timers and their callbacks, the idle/prepare/check/
 * closing queues; with no descriptor watched, libuv makes no poll system
 * call at all.  libuv fires a timer once the loop time reaches its ms.
 */
#include <uv.h>

#include <stdlib.h>

#include "bench.h"

struct uvobj {
	void *pool_link;
	uv_timer_t t;
	uint32_t id;
	struct uvs *owner;
};

struct uvs {
	uv_loop_t loop;
	struct objpool pool;
	uint64_t *ref;
	struct fire_sink *sink;
};

static void on_timer(uv_timer_t *t)
{
	struct uvobj *o = container_of(t, struct uvobj, t);
	struct uvs *u = o->owner;

	u->ref[o->id] = 0;
	bench_fired(u->sink, o->id);
	objpool_put(&u->pool, o);
}

static void obj_init(void *obj, void *arg)
{
	struct uvobj *o = obj;
	struct uvs *u = arg;

	uv_timer_init(&u->loop, &o->t);
	o->owner = u;
}

static void obj_close(void *obj, void *arg)
{
	struct uvobj *o = obj;

	(void)arg;
	uv_close((uv_handle_t *)&o->t, NULL);
}

static int luv_open(const struct subject *s, const struct subject_env *env,
		   void **ctx)
{
	struct uvs *u = calloc(1, sizeof(*u));

	(void)s;
	if (!u)
		return -1;
	u->ref = env->ref;
	u->sink = env->sink;
	if (uv_loop_init(&u->loop)) {
		free(u);
		return -1;
	}
	if (objpool_init(&u->pool, sizeof(struct uvobj), env->max_live,
			 obj_init, u)) {
		uv_loop_close(&u->loop);
		free(u);
		return -1;
	}
	*ctx = u;
	return 0;
}

static void luv_close(void *ctx)
{
	struct uvs *u = ctx;

	/* closing stops the active timers; the loop then has nothing left
	 * but the close callbacks, so this run returns at once */
	objpool_each(&u->pool, obj_close, NULL);
	uv_run(&u->loop, UV_RUN_DEFAULT);
	uv_loop_close(&u->loop);
	objpool_fini(&u->pool);
	free(u);
}

static int luv_insert(void *ctx, uint32_t id, uint64_t deadline)
{
	struct uvs *u = ctx;
	struct uvobj *o = objpool_get(&u->pool);
	uint64_t due_ms = (deadline + NS_PER_MS - 1) / NS_PER_MS;

	if (!o)
		return -1;
	o->id = id;
	uv_timer_start(&o->t, on_timer, due_ms - uv_now(&u->loop), 0);
	u->ref[id] = (uintptr_t)o;
	return 0;
}

static int luv_cancel(void *ctx, uint32_t id)
{
	struct uvs *u = ctx;
	struct uvobj *o = (struct uvobj *)(uintptr_t)u->ref[id];

	if (!o)
		return -1;
	uv_timer_stop(&o->t);
	u->ref[id] = 0;
	objpool_put(&u->pool, o);
	return 0;
}

static int luv_poll(void *ctx, uint64_t now)
{
	struct uvs *u = ctx;

	(void)now;      /* the loop reads it from the simulated clock */
	uv_run(&u->loop, UV_RUN_NOWAIT);
	return 0;
}

const struct subject subject_libuv = {
	.name = "libuv",
	.family = "libuv",
	.version = uv_version_string,
	.structure = "binary heap",
	.lib_fn = { "uv_timer_start", "uv_timer_stop", "uv_run" },
	.open = luv_open,
	.close = luv_close,
	.insert = luv_insert,
	.cancel = luv_cancel,
	.poll = luv_poll,
};
