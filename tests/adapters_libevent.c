/*
 * adapters_libevent.c - libevent and bitwheel-client-libevent.h for
 * tests/check_adapters.c (tests/adapters.h).
 */
#include <check.h>
#include <stdlib.h>

#include "bitwheel-client-libevent.h"
#include "adapters.h"

struct le_loop {
	struct event_base *base;
	bool stopped;
};

static void *le_create(void)
{
	struct le_loop *l = calloc(1, sizeof(*l));

	ck_assert_ptr_nonnull(l);
	l->base = event_base_new();
	ck_assert_ptr_nonnull(l->base);
	return l;
}

static void le_destroy(void *loop)
{
	struct le_loop *l = loop;

	event_base_free(l->base);
	free(l);
}

static void le_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

static bool le_run(void *loop, int ms)
{
	struct le_loop *l = loop;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	struct event *t = evtimer_new(l->base, le_deadline, l->base);

	ck_assert_ptr_nonnull(t);
	evtimer_add(t, &tv);
	l->stopped = false;
	event_base_dispatch(l->base);
	event_free(t);
	return l->stopped;
}

static void le_stop(void *loop)
{
	struct le_loop *l = loop;

	l->stopped = true;
	event_base_loopbreak(l->base);
}

static int le_attach(void *loop, struct bwc_client *c, bwc_loop_error_fn fn,
		     void *arg, void **adapter)
{
	struct bwc_libevent *a = NULL;
	int rc = bwc_libevent_attach(c, ((struct le_loop *)loop)->base, fn,
				     arg, &a);

	*adapter = a;
	return rc;
}

static void le_update(void *a)
{
	bwc_libevent_update(a);
}

static void le_detach(void *a)
{
	bwc_libevent_detach(a);
}

static const struct bwc_loop *le_core(void *a)
{
	return &((struct bwc_libevent *)a)->loop;
}

const struct loop_ops libevent_ops = {
	"libevent", le_create, le_destroy, le_run, le_stop,
	le_attach, le_update, le_detach, le_core,
};

