/*
 * adapters_libev.c - libev and bitwheel-client-libev.h for
 * tests/check_adapters.c (tests/adapters.h).
 */
#include <check.h>
#include <stdlib.h>

#include "bitwheel-client-libev.h"
#include "adapters.h"

struct lev_loop {
	struct ev_loop *ev;
	ev_timer deadline;
	bool stopped;
};

static void *lev_create(void)
{
	struct lev_loop *l = calloc(1, sizeof(*l));

	ck_assert_ptr_nonnull(l);
	l->ev = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(l->ev);
	return l;
}

static void lev_destroy(void *loop)
{
	struct lev_loop *l = loop;

	ev_loop_destroy(l->ev);
	free(l);
}

static void lev_on_deadline(struct ev_loop *ev, ev_timer *w, int revents)
{
	(void)w;
	(void)revents;
	ev_break(ev, EVBREAK_ALL);
}

static bool lev_run(void *loop, int ms)
{
	struct lev_loop *l = loop;

	ev_timer_init(&l->deadline, lev_on_deadline, ms / 1000.0, 0.);
	ev_timer_start(l->ev, &l->deadline);
	l->stopped = false;
	ev_run(l->ev, 0);
	ev_timer_stop(l->ev, &l->deadline);
	return l->stopped;
}

static void lev_stop(void *loop)
{
	struct lev_loop *l = loop;

	l->stopped = true;
	ev_break(l->ev, EVBREAK_ALL);
}

static int lev_attach(void *loop, struct bwc_client *c, bwc_loop_error_fn fn,
		     void *arg, void **adapter)
{
	struct bwc_libev *a = NULL;
	int rc = bwc_libev_attach(c, ((struct lev_loop *)loop)->ev, fn, arg, &a);

	*adapter = a;
	return rc;
}

static void lev_update(void *a)
{
	bwc_libev_update(a);
}

static void lev_detach(void *a)
{
	bwc_libev_detach(a);
}

static const struct bwc_loop *lev_core(void *a)
{
	return &((struct bwc_libev *)a)->loop;
}

const struct loop_ops libev_ops = {
	"libev", lev_create, lev_destroy, lev_run, lev_stop,
	lev_attach, lev_update, lev_detach, lev_core,
};

