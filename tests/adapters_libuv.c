/*
 * adapters_libuv.c - libuv and bitwheel-client-libuv.h for
 * tests/check_adapters.c (tests/adapters.h).
 */
#include <check.h>
#include <stdlib.h>

#include "bitwheel-client-libuv.h"
#include "adapters.h"

struct luv_loop {
	uv_loop_t uv;
	uv_timer_t deadline;
	bool stopped;
};

static void *luv_create(void)
{
	struct luv_loop *l = calloc(1, sizeof(*l));

	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(uv_loop_init(&l->uv), 0);
	ck_assert_int_eq(uv_timer_init(&l->uv, &l->deadline), 0);
	l->deadline.data = l;
	return l;
}

static void luv_destroy(void *loop)
{
	struct luv_loop *l = loop;

	/* Let the adapter's and the deadline's closes finish. */
	uv_close((uv_handle_t *)&l->deadline, NULL);
	uv_run(&l->uv, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&l->uv), 0);
	free(l);
}

static void luv_on_deadline(uv_timer_t *t)
{
	uv_stop(t->loop);
}

static bool luv_run(void *loop, int ms)
{
	struct luv_loop *l = loop;

	uv_timer_start(&l->deadline, luv_on_deadline, (uint64_t)ms, 0);
	l->stopped = false;
	uv_run(&l->uv, UV_RUN_DEFAULT);
	uv_timer_stop(&l->deadline);
	return l->stopped;
}

static void luv_stop(void *loop)
{
	struct luv_loop *l = loop;

	l->stopped = true;
	uv_stop(&l->uv);
}

static int luv_attach(void *loop, struct bwc_client *c, bwc_loop_error_fn fn,
		     void *arg, void **adapter)
{
	struct bwc_libuv *a = NULL;
	int rc = bwc_libuv_attach(c, &((struct luv_loop *)loop)->uv, fn, arg, &a);

	*adapter = a;
	return rc;
}

static void luv_update(void *a)
{
	bwc_libuv_update(a);
}

static void luv_detach(void *a)
{
	bwc_libuv_detach(a);
}

static const struct bwc_loop *luv_core(void *a)
{
	return &((struct bwc_libuv *)a)->loop;
}

const struct loop_ops libuv_ops = {
	"libuv", luv_create, luv_destroy, luv_run, luv_stop,
	luv_attach, luv_update, luv_detach, luv_core,
};

