/*
 * check_dual.c - the dual wheel: lanes built from each dual preset (both
 * failover whatever the config says), handles that name their lane,
 * one poll firing both lanes, next deadline as the minimum of the lanes,
 * cancel across lanes, periodic re-arms on the periodic lane, foreach and
 * drain over both lanes, the callback rules (no nested poll, nothing
 * armed by a callback fires in the same dual poll, whichever lane), and
 * intrusive timers in either lane beside handle timers.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MS TU_MS
/* A start aligned to every gear boundary of both lanes. */
#define START ((uint64_t)64 * 64 * 64 * 64 * 100 * MS + 7)

static struct bw_dual *dual_new(enum bw_dual_preset p, uint64_t now)
{
	struct bw_dual_config dc;
	struct bw_dual *d = NULL;
	int rc;

	ck_assert_int_eq(bw_dual_config_preset(p, &dc), 0);
	rc = bw_dual_new(&dc, now, &d);
	ck_assert_msg(rc == 0, "bw_dual_new: %d", rc);
	ck_assert_ptr_nonnull(d);
	return d;
}

static struct bw_poll_result dpoll(struct bw_dual *d, uint64_t now,
				   struct tu_rec *rec)
{
	struct bw_callbacks cb = tu_rec_cb(rec);
	struct bw_poll_result res;
	int rc;

	memset(&res, 0xa5, sizeof(res));
	rc = bw_dual_poll(d, now, &cb, &res);
	tu_check(rc == 0, "bw_dual_poll: %d", rc);
	tu_assert_dual_healthy(d);
	return res;
}

/* Each preset's lanes: resolutions and caps, both failover, both exact. */
START_TEST(test_dual_lanes)
{
	static const unsigned one_res[] = { 5, 1, 5 };
	static const unsigned one_cap[] = { 16, 64, 32 };
	static const unsigned per_cap[] = { 8, 16, 8 };
	struct bw_dual_config dc;
	struct bw_dual *d;
	const struct bw_config *c;

	ck_assert_int_eq(bw_dual_config_preset((enum bw_dual_preset)_i, &dc), 0);
	/* A lane asked to be plain is made failover anyway. */
	dc.periodic.failover = false;
	dc.oneshot.failover = false;
	ck_assert_int_eq(bw_dual_new(&dc, START, &d), 0);
	c = bw_wheel_config(bw_dual_lane(d, BW_LANE_ONESHOT));
	ck_assert_uint_eq(c->resolution_ms, one_res[_i]);
	ck_assert_uint_eq(c->slot_cap, one_cap[_i]);
	ck_assert(c->failover);
	ck_assert_int_eq(c->precision, BW_EXACT);
	c = bw_wheel_config(bw_dual_lane(d, BW_LANE_PERIODIC));
	ck_assert_uint_eq(c->resolution_ms, 100);
	ck_assert_uint_eq(c->slot_cap, per_cap[_i]);
	ck_assert(c->failover);
	ck_assert_int_eq(c->precision, BW_EXACT);
	ck_assert_ptr_ne(bw_dual_lane(d, BW_LANE_ONESHOT),
			 bw_dual_lane(d, BW_LANE_PERIODIC));
	ck_assert_uint_eq(bw_dual_pending(d), 0);
	ck_assert_uint_ge(bw_dual_footprint(d),
			  bw_wheel_footprint(bw_dual_lane(d, BW_LANE_ONESHOT)) +
				  bw_wheel_footprint(bw_dual_lane(d, BW_LANE_PERIODIC)));
	tu_assert_dual_healthy(d);
	bw_dual_free(d);
}
END_TEST

/* Handles name their lane; each lane holds what was put in it; beyond
 * range goes to overflow on either lane. */
START_TEST(test_dual_insert_lanes)
{
	struct bw_dual *d = dual_new(BW_DUAL_STANDARD_BALANCED, START);
	struct bw_wheel *one = bw_dual_lane(d, BW_LANE_ONESHOT);
	struct bw_wheel *per = bw_dual_lane(d, BW_LANE_PERIODIC);
	bw_handle hp[20], ho[20];
	int x[40];
	uint64_t dl;
	struct bw_counters c;

	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(bw_dual_insert_periodic(d, START + (uint64_t)(i + 1) * 100 * MS,
							 &x[i], &hp[i]),
				 0);
		ck_assert_int_eq(bw_dual_insert_oneshot(d, START + (uint64_t)(i + 1) * 5 * MS,
							&x[20 + i], &ho[i]),
				 0);
		ck_assert_uint_ne(hp[i], 0);
		ck_assert_uint_ne(ho[i], 0);
		ck_assert_int_eq(bw_dual_handle_lane(hp[i]), BW_LANE_PERIODIC);
		ck_assert_int_eq(bw_dual_handle_lane(ho[i]), BW_LANE_ONESHOT);
		ck_assert_uint_ne(hp[i], ho[i]);
		ck_assert_int_eq(bw_dual_deadline(d, hp[i], &dl), 0);
		ck_assert_uint_eq(dl, START + (uint64_t)(i + 1) * 100 * MS);
		ck_assert_int_eq(bw_dual_deadline(d, ho[i], &dl), 0);
		ck_assert_uint_eq(dl, START + (uint64_t)(i + 1) * 5 * MS);
	}
	ck_assert_uint_eq(bw_wheel_pending(one), 20);
	ck_assert_uint_eq(bw_wheel_pending(per), 20);
	ck_assert_uint_eq(bw_dual_pending(d), 40);
	bw_wheel_counters(per, &c);
	ck_assert_uint_eq(c.inserted, 20);

	/* Far beyond either lane's range: accepted, overflowed. */
	ck_assert_int_eq(bw_dual_insert_periodic(d, START + bw_wheel_range_ns(per) + 10 * 100 * MS,
						 &x[0], &hp[0]),
			 0);
	ck_assert_int_eq(bw_dual_insert_oneshot(d, START + bw_wheel_range_ns(one) + 10 * 5 * MS,
						&x[0], &ho[0]),
			 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(per), 1);
	ck_assert_uint_eq(bw_wheel_overflow_pending(one), 1);
	tu_assert_dual_healthy(d);
	bw_dual_free(d);
}
END_TEST

/* One poll fires due timers of both lanes, each on its own tick. */
START_TEST(test_dual_one_poll_both_lanes)
{
	struct bw_dual *d = dual_new((enum bw_dual_preset)_i, START);
	struct tu_rec rec;
	struct bw_poll_result res;
	bw_handle hp, ho, ho2;
	int p, o, o2;
	uint64_t tp = START - 7 + 300 * MS; /* periodic tick boundary */

	tu_rec_init(&rec);
	ck_assert_int_eq(bw_dual_insert_periodic(d, tp, &p, &hp), 0);
	ck_assert_int_eq(bw_dual_insert_oneshot(d, tp - 1, &o, &ho), 0);
	ck_assert_int_eq(bw_dual_insert_oneshot(d, tp + 50 * MS, &o2, &ho2), 0);
	res = dpoll(d, tp - 1, &rec);
	ck_assert_uint_eq(res.fired, 0);
	res = dpoll(d, tp, &rec);
	ck_assert_uint_eq(res.fired, 2);
	ck_assert_uint_eq(res.rearmed, 0);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &p), 1);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &o), 1);
	ck_assert_uint_eq(bw_dual_pending(d), 1);
	res = dpoll(d, tp + 50 * MS, &rec);
	ck_assert_uint_eq(res.fired, 1);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &o2), 1);
	ck_assert_uint_eq(bw_dual_pending(d), 0);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

static void expect_next(struct bw_dual *d)
{
	uint64_t a = 0, b = 0, nd = 0;
	int ra = bw_wheel_next_deadline(bw_dual_lane(d, BW_LANE_ONESHOT), &a);
	int rb = bw_wheel_next_deadline(bw_dual_lane(d, BW_LANE_PERIODIC), &b);
	int rc = bw_dual_next_deadline(d, &nd);

	if (ra && rb) {
		ck_assert_int_eq(rc, BW_EEMPTY);
		return;
	}
	ck_assert_int_eq(rc, 0);
	if (ra)
		ck_assert_uint_eq(nd, b);
	else if (rb)
		ck_assert_uint_eq(nd, a);
	else
		ck_assert_uint_eq(nd, a < b ? a : b);
}

/* The dual's next deadline is the earlier of the lanes', through a sleep
 * loop that fires everything on its tick. */
START_TEST(test_dual_next_deadline)
{
	struct bw_dual *d = dual_new(BW_DUAL_FAST_PRECISE, START);
	struct tu_rec rec;
	bw_handle h;
	int x[6];
	uint64_t nd, now = START;
	static const uint64_t per[] = { 200, 1500, 3600000 };
	static const uint64_t one[] = { 3, 70, 250 };
	unsigned wakeups = 0;

	tu_rec_init(&rec);
	ck_assert_int_eq(bw_dual_next_deadline(d, &nd), BW_EEMPTY);
	expect_next(d);
	ck_assert_int_eq(bw_dual_insert_periodic(d, START + per[0] * MS, &x[0], &h), 0);
	expect_next(d);
	ck_assert_int_eq(bw_dual_next_deadline(d, &nd), 0);
	ck_assert_uint_le(nd, tu_ceil_tick(START + per[0] * MS, 100 * MS) *
				      100 * MS);
	for (int i = 1; i < 3; i++)
		ck_assert_int_eq(bw_dual_insert_periodic(d, START + per[i] * MS,
							 &x[i], &h),
				 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(bw_dual_insert_oneshot(d, START + one[i] * MS,
							&x[3 + i], &h),
				 0);
	expect_next(d);
	ck_assert_int_eq(bw_dual_next_deadline(d, &nd), 0);
	/* Oneshot lane, 1 ms ticks: 3 ms after START rounds up to 4 ms. */
	ck_assert_uint_le(nd, START - 7 + 4 * MS);
	while (bw_dual_pending(d) > 0) {
		size_t before = rec.nfired;

		expect_next(d);
		ck_assert_int_eq(bw_dual_next_deadline(d, &nd), 0);
		if (nd > now)
			ck_assert_uint_eq(dpoll(d, nd - 1, &rec).fired, 0);
		now = nd > now ? nd : now;
		dpoll(d, now, &rec);
		for (size_t i = before; i < rec.nfired; i++) {
			int k = (int)((int *)rec.fired[i].data - x);
			uint64_t dl = START + (k < 3 ? per[k] : one[k - 3]) * MS;
			uint64_t T = (k < 3 ? 100 : 1) * MS;

			/* On the tick: now is the tick's start. */
			ck_assert_uint_eq(now, tu_ceil_tick(dl, T) * T);
		}
		ck_assert_uint_lt(++wakeups, 60);
	}
	ck_assert_uint_eq(rec.nfired, 6);
	ck_assert_int_eq(bw_dual_next_deadline(d, &nd), BW_EEMPTY);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

START_TEST(test_dual_cancel)
{
	struct bw_dual *d = dual_new(BW_DUAL_STANDARD_BURST, START);
	struct tu_rec rec;
	struct tu_rng rng;
	bw_handle hp, ho, hq;
	int p, o, q;
	void *got;

	tu_rec_init(&rec);
	tu_rng_seed(&rng, 8);
	ck_assert_int_eq(bw_dual_insert_periodic(d, START + 500 * MS, &p, &hp), 0);
	ck_assert_int_eq(bw_dual_insert_oneshot(d, START + 50 * MS, &o, &ho), 0);
	ck_assert_int_eq(bw_dual_insert_oneshot(d, START + 60 * MS, &q, &hq), 0);
	ck_assert_int_eq(bw_dual_cancel(d, hp, &got), 0);
	ck_assert_ptr_eq(got, &p);
	ck_assert_int_eq(bw_dual_cancel(d, ho, &got), 0);
	ck_assert_ptr_eq(got, &o);
	ck_assert_int_eq(bw_dual_cancel(d, hp, &got), BW_ENOTFOUND);
	ck_assert_int_eq(bw_dual_cancel(d, ho, NULL), BW_ENOTFOUND);
	ck_assert_uint_eq(bw_wheel_pending(bw_dual_lane(d, BW_LANE_PERIODIC)), 0);
	ck_assert_uint_eq(bw_dual_pending(d), 1);
	for (int i = 0; i < 100000; i++) {
		bw_handle b = tu_rng_next(&rng);

		if (b == hq)
			continue;
		tu_check(bw_dual_cancel(d, b, NULL) == BW_ENOTFOUND,
			 "bogus handle %#" PRIx64 " cancelled something", b);
	}
	dpoll(d, START + 1000 * MS, &rec);
	ck_assert_uint_eq(rec.nfired, 1);
	ck_assert_ptr_eq(rec.fired[0].data, &q);
	ck_assert_int_eq(bw_dual_cancel(d, hq, NULL), BW_ENOTFOUND);
	tu_assert_dual_healthy(d);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

struct beat {
	uint64_t period;
	unsigned fires, max;
	uint64_t last;
};

static uint64_t beat_fire(struct tu_rec *rec, void *data, uint64_t now)
{
	struct beat *b = data;

	(void)rec;
	b->fires++;
	b->last = now;
	return b->fires < b->max ? now + b->period : 0;
}

/* A heartbeat on the periodic lane re-arms 50 times under one handle,
 * each time on its 100 ms tick, next to a oneshot that is unaffected. */
START_TEST(test_dual_periodic_rearm)
{
	struct bw_dual *d = dual_new((enum bw_dual_preset)_i, START);
	struct tu_rec rec;
	struct beat b = { .period = 100 * MS, .max = 50 };
	struct beat o = { .period = 0, .max = 1 };
	bw_handle h, ho;
	uint64_t dl, now, T = 100 * MS, t0 = START - 7;
	unsigned polls = 0;

	tu_rec_init(&rec);
	rec.on_fire = beat_fire;
	ck_assert_int_eq(bw_dual_insert_periodic(d, t0 + T, &b, &h), 0);
	ck_assert_int_eq(bw_dual_insert_oneshot(d, t0 + 2345 * MS, &o, &ho), 0);
	for (now = t0 + 10 * MS; b.fires < 50; now += 10 * MS) {
		unsigned before = b.fires;
		struct bw_poll_result res = dpoll(d, now, &rec);

		polls++;
		if (now % T == 0 && now / T >= (t0 + T) / T) {
			ck_assert_msg(b.fires == before + 1,
				      "beat %u missed its tick", before);
			ck_assert_uint_eq(b.last, now);
			if (b.fires < 50) {
				ck_assert_uint_eq(res.rearmed, 1);
				ck_assert_int_eq(bw_dual_deadline(d, h, &dl), 0);
				ck_assert_uint_eq(dl, now + T);
			}
		} else {
			ck_assert_uint_eq(b.fires, before);
		}
		ck_assert_uint_lt(polls, 1000);
	}
	ck_assert_int_eq(bw_dual_deadline(d, h, &dl), BW_ENOTFOUND);
	ck_assert_uint_eq(o.fires, 1);
	ck_assert_uint_eq(bw_dual_pending(d), 0);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

struct vlog {
	size_t n;
	bw_handle h[64];
	void *data[64];
};

static void vlog_visit(bw_handle h, uint64_t dl, void *data, void *ctx)
{
	struct vlog *v = ctx;

	(void)dl;
	ck_assert_uint_lt(v->n, 64);
	v->h[v->n] = h;
	v->data[v->n] = data;
	v->n++;
}

START_TEST(test_dual_foreach_drain)
{
	struct bw_dual *d = dual_new(BW_DUAL_STANDARD_BALANCED, START);
	struct tu_rec rec;
	struct vlog v;
	bw_handle h[20];
	int x[20];

	tu_rec_init(&rec);
	for (int i = 0; i < 20; i++) {
		int rc = i % 2 ? bw_dual_insert_periodic(d, START + (uint64_t)i * 777 * MS,
							 &x[i], &h[i])
			       : bw_dual_insert_oneshot(d, START + (uint64_t)i * 77 * MS,
							&x[i], &h[i]);
		ck_assert_int_eq(rc, 0);
	}
	for (int pass = 0; pass < 2; pass++) {
		memset(&v, 0, sizeof(v));
		if (pass == 0)
			ck_assert_int_eq(bw_dual_foreach(d, vlog_visit, &v), 0);
		else
			ck_assert_int_eq(bw_dual_drain(d, vlog_visit, &v), 0);
		ck_assert_uint_eq(v.n, 20);
		for (size_t j = 0; j < v.n; j++) {
			int i = (int)((int *)v.data[j] - x);

			ck_assert_int_ge(i, 0);
			ck_assert_int_lt(i, 20);
			ck_assert_uint_eq(v.h[j], h[i]);
		}
	}
	ck_assert_uint_eq(bw_dual_pending(d), 0);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(bw_dual_cancel(d, h[i], NULL), BW_ENOTFOUND);
	dpoll(d, START + 3600000 * MS, &rec);
	ck_assert_uint_eq(rec.nfired, 0);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

/* Callbacks that act on the dual wheel from inside its poll. */
struct dual_cb {
	struct bw_dual *d;
	int mode;
	int rc;
	int inner;
	bw_handle inner_h, victim;
	void *got;
	unsigned inner_fires;
};

static uint64_t dual_cb_fire(struct tu_rec *rec, void *data, uint64_t now)
{
	struct dual_cb *x = rec->user;
	struct bw_callbacks cb = tu_rec_cb(rec);

	if (data == &x->inner) {
		x->inner_fires++;
		return 0;
	}
	switch (x->mode) {
	case 0: /* nested poll */
		x->rc = bw_dual_poll(x->d, now + 10000 * MS, &cb, NULL);
		break;
	case 1: /* past-due insert into the periodic lane */
		x->rc = bw_dual_insert_periodic(x->d, 1, &x->inner, &x->inner_h);
		break;
	case 2: /* past-due insert into the oneshot lane */
		x->rc = bw_dual_insert_oneshot(x->d, 1, &x->inner, &x->inner_h);
		break;
	case 3: /* cancel in the other lane */
		x->rc = bw_dual_cancel(x->d, x->victim, &x->got);
		break;
	}
	x->mode = -1;
	return 0;
}

/*
 * Calling bw_dual_poll from a callback of either lane is refused with
 * BW_EINPOLL and does nothing: in particular it must not run the other
 * lane's timers early, at the nested call's later now.
 */
START_TEST(test_dual_poll_in_callback)
{
	struct bw_dual *d = dual_new(BW_DUAL_STANDARD_BALANCED, START);
	struct tu_rec rec;
	struct dual_cb x = { .d = d, .mode = 0, .rc = 1 };
	bw_handle h;
	int a, later;
	uint64_t now = START - 7 + 1000 * MS;

	tu_rec_init(&rec);
	rec.on_fire = dual_cb_fire;
	rec.user = &x;
	if (_i == 0)
		ck_assert_int_eq(bw_dual_insert_oneshot(d, now, &a, &h), 0);
	else
		ck_assert_int_eq(bw_dual_insert_periodic(d, now, &a, &h), 0);
	/* Due only at the nested call's time, in the other lane. */
	if (_i == 0)
		ck_assert_int_eq(bw_dual_insert_periodic(d, now + 5000 * MS,
							 &later, &h),
				 0);
	else
		ck_assert_int_eq(bw_dual_insert_oneshot(d, now + 5000 * MS,
							&later, &h),
				 0);
	dpoll(d, now, &rec);
	ck_assert_int_eq(x.rc, BW_EINPOLL);
	ck_assert_msg(tu_rec_fired_count(&rec, &later) == 0,
		      "the refused nested poll fired a %s-lane timer early",
		      _i ? "oneshot" : "periodic");
	ck_assert_uint_eq(bw_dual_pending(d), 1);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

/*
 * A timer inserted from a callback never fires in the poll that armed it,
 * even when it goes into the other lane with a past deadline.  Case 0: a
 * oneshot callback arms a periodic timer; case 1: the reverse.
 */
START_TEST(test_dual_insert_in_callback)
{
	struct bw_dual *d = dual_new(BW_DUAL_FAST_PRECISE, START);
	struct tu_rec rec;
	struct dual_cb x = { .d = d, .mode = _i == 0 ? 1 : 2, .rc = 1 };
	bw_handle h;
	int a;
	uint64_t now = START - 7 + 1000 * MS;

	tu_rec_init(&rec);
	rec.on_fire = dual_cb_fire;
	rec.user = &x;
	if (_i == 0)
		ck_assert_int_eq(bw_dual_insert_oneshot(d, now, &a, &h), 0);
	else
		ck_assert_int_eq(bw_dual_insert_periodic(d, now, &a, &h), 0);
	dpoll(d, now, &rec);
	ck_assert_int_eq(x.rc, 0);
	ck_assert_int_eq(bw_dual_handle_lane(x.inner_h),
			 _i == 0 ? BW_LANE_PERIODIC : BW_LANE_ONESHOT);
	ck_assert_msg(x.inner_fires == 0,
		      "a %s-lane timer armed from a callback fired in the same "
		      "dual poll", _i == 0 ? "periodic" : "oneshot");
	ck_assert_uint_eq(bw_dual_pending(d), 1);
	dpoll(d, now, &rec);
	ck_assert_uint_eq(x.inner_fires, 1);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

/* A callback in one lane cancels a timer in the other. */
START_TEST(test_dual_cancel_in_callback)
{
	struct bw_dual *d = dual_new(BW_DUAL_STANDARD_BALANCED, START);
	struct tu_rec rec;
	struct dual_cb x = { .d = d, .mode = 3, .rc = 1 };
	bw_handle h;
	int a, v;
	uint64_t now = START - 7 + 1000 * MS;

	tu_rec_init(&rec);
	rec.on_fire = dual_cb_fire;
	rec.user = &x;
	if (_i == 0) {
		ck_assert_int_eq(bw_dual_insert_oneshot(d, now, &a, &h), 0);
		ck_assert_int_eq(bw_dual_insert_periodic(d, now, &v, &x.victim),
				 0);
	} else {
		ck_assert_int_eq(bw_dual_insert_periodic(d, now, &a, &h), 0);
		ck_assert_int_eq(bw_dual_insert_oneshot(d, now + 100 * MS, &v,
							&x.victim),
				 0);
	}
	dpoll(d, now, &rec);
	ck_assert_int_eq(x.rc, 0);
	ck_assert_ptr_eq(x.got, &v);
	ck_assert_uint_eq(rec.nfired, 1);
	ck_assert_uint_eq(bw_dual_pending(d), 0);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

/* An earlier now is a no-op for both lanes. */
START_TEST(test_dual_time_backwards)
{
	struct bw_dual *d = dual_new(BW_DUAL_STANDARD_BALANCED, START);
	struct tu_rec rec;
	struct bw_poll_result res;
	bw_handle h;
	int a, b;
	uint64_t now = START - 7 + 5000 * MS;

	tu_rec_init(&rec);
	dpoll(d, now, &rec);
	ck_assert_int_eq(bw_dual_insert_oneshot(d, 1, &a, &h), 0);
	ck_assert_int_eq(bw_dual_insert_periodic(d, 1, &b, &h), 0);
	res = dpoll(d, now - 1000 * MS, &rec);
	ck_assert_uint_eq(res.fired, 0);
	res = dpoll(d, now, &rec);
	ck_assert_uint_eq(res.fired, 2);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

/* An intrusive timer of the randomized test, or a handle timer's stand-in. */
struct itimer {
	struct bw_timer t;
	bw_handle h;               /* 0: intrusive                          */
	uint64_t deadline;
	enum bw_lane lane;
	bool cancelled;
	unsigned fires;
	uint64_t fired_at;
};

static uint64_t itimer_fire(struct tu_rec *rec, void *data, uint64_t now)
{
	struct itimer *it = data;

	(void)rec;
	it->fires++;
	it->fired_at = now;
	return 0;
}

/*
 * Intrusive timers in both lanes, mixed with handle timers, some of them
 * cancelled (by their lane), polled in random steps: every timer left
 * fires once, never early, in one poll or another; a cancelled one never;
 * a second cancel, or one after the fire, is BW_ENOTFOUND; the lanes stay
 * consistent (bw_dual_check after every poll).  Seeds: a fixed one and
 * BW_TEST_SEED.
 */
START_TEST(test_dual_intrusive_random)
{
	uint64_t seed = _i ? tu_seed_from_env("BW_TEST_SEED", 99) : 23;
	enum { N = 3000 };
	struct bw_dual *d = dual_new(BW_DUAL_STANDARD_BALANCED, START);
	struct itimer *it = calloc(N, sizeof(*it));
	struct tu_rec rec;
	struct tu_rng rng;
	uint64_t now = START;

	ck_assert_ptr_nonnull(it);
	tu_rec_init(&rec);
	rec.on_fire = itimer_fire;
	tu_rng_seed(&rng, seed);
	for (int i = 0; i < N; i++) {
		struct itimer *x = &it[i];
		int rc;

		x->lane = tu_rng_below(&rng, 2) ? BW_LANE_PERIODIC : BW_LANE_ONESHOT;
		x->deadline = now + tu_rng_range(&rng, 0, 20000) * MS;
		bw_timer_init(&x->t);
		if (tu_rng_below(&rng, 4) == 0)
			rc = bw_dual_try_insert(d, x->lane, x->deadline, x, &x->h);
		else
			rc = bw_dual_timer_add(d, x->lane, &x->t, x->deadline, x);
		tu_check(rc == 0, "seed %" PRIu64 ": add %d: %d", seed, i, rc);
		if (!x->h)
			tu_check(bw_dual_timer_add(d, x->lane, &x->t, x->deadline, x) ==
				 BW_EPENDING, "seed %" PRIu64 ": added twice", seed);
		/* Cancel an earlier one now and then. */
		if (tu_rng_below(&rng, 3) == 0) {
			struct itimer *y = &it[tu_rng_below(&rng, (uint64_t)i + 1)];
			int want = y->cancelled || y->fires ? BW_ENOTFOUND : 0;

			rc = y->h ? bw_dual_cancel(d, y->h, NULL) :
				    bw_dual_timer_cancel(d, y->lane, &y->t);
			tu_check(rc == want, "seed %" PRIu64 ": cancel %d, want %d",
				 seed, rc, want);
			y->cancelled |= !y->fires;
		}
		if (tu_rng_below(&rng, 50) == 0) {
			now += tu_rng_range(&rng, 1, 500) * MS;
			dpoll(d, now, &rec);
		}
	}
	dpoll(d, now + 30000 * MS, &rec);
	ck_assert_uint_eq(bw_dual_pending(d), 0);
	for (int i = 0; i < N; i++) {
		struct itimer *x = &it[i];

		tu_check(x->fires == !x->cancelled,
			 "seed %" PRIu64 ": timer %d (lane %d, %s) fired %u times, cancelled %d",
			 seed, i, x->lane, x->h ? "handle" : "intrusive", x->fires,
			 x->cancelled);
		tu_check(!x->fires || x->fired_at >= x->deadline,
			 "seed %" PRIu64 ": timer %d early", seed, i);
		if (!x->h)
			tu_check(bw_dual_timer_cancel(d, x->lane, &x->t) == BW_ENOTFOUND &&
				 !bw_timer_pending(&x->t),
				 "seed %" PRIu64 ": timer %d still pending", seed, i);
	}
	tu_rec_free(&rec);
	bw_dual_free(d);
	free(it);
}
END_TEST

/*
 * One slot a timer (a uid's overflow store in bitwheeld): a second
 * intrusive timer due at the same tick is refused by try_add, stays idle,
 * and goes to the lane's heap with add; an intrusive periodic timer
 * re-arms from its callback's return; foreach and drain report intrusive
 * timers with handle 0 in either lane (no lane bit), and drain leaves them
 * idle; bad arguments are BW_EINVAL.
 */
START_TEST(test_dual_intrusive_lanes)
{
	struct bw_dual_config dc;
	struct bw_dual *d = NULL;
	struct bw_timer a, b, p, q;
	struct beat beat = { .period = 100 * MS, .max = 5 };
	struct tu_rec rec;
	struct vlog v = { 0 };
	int xa, xb, xq;

	ck_assert_int_eq(bw_dual_config_preset(BW_DUAL_STANDARD_BALANCED, &dc), 0);
	dc.oneshot.slot_cap = dc.periodic.slot_cap = 1;
	dc.oneshot.max_probes = dc.periodic.max_probes = 1;
	ck_assert_int_eq(bw_dual_new(&dc, START, &d), 0);
	tu_rec_init(&rec);
	bw_timer_init(&a);
	bw_timer_init(&b);
	bw_timer_init(&p);
	bw_timer_init(&q);
	ck_assert_int_eq(bw_dual_timer_try_add(d, BW_LANE_ONESHOT, &a, START + 50 * MS, &xa), 0);
	ck_assert_int_eq(bw_dual_timer_try_add(d, BW_LANE_ONESHOT, &b, START + 50 * MS, &xb),
			 BW_EFULL);
	ck_assert(!bw_timer_pending(&b));
	ck_assert_int_eq(bw_dual_timer_cancel(d, BW_LANE_ONESHOT, &b), BW_ENOTFOUND);
	ck_assert_int_eq(bw_dual_timer_add(d, BW_LANE_ONESHOT, &b, START + 50 * MS, &xb), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(bw_dual_lane(d, BW_LANE_ONESHOT)), 1);
	ck_assert_int_eq(bw_dual_timer_add(d, BW_LANE_PERIODIC, &q, START + 70 * MS, &xq), 0);
	ck_assert_int_eq(bw_dual_foreach(d, vlog_visit, &v), 0);
	ck_assert_uint_eq(v.n, 3);
	for (size_t j = 0; j < v.n; j++)
		ck_assert_uint_eq(v.h[j], 0);
	ck_assert_int_eq(bw_dual_timer_add(NULL, BW_LANE_ONESHOT, &p, START, &beat), BW_EINVAL);
	ck_assert_int_eq(bw_dual_timer_add(d, (enum bw_lane)2, &p, START, &beat), BW_EINVAL);
	ck_assert_int_eq(bw_dual_timer_try_add(d, (enum bw_lane)2, &p, START, &beat), BW_EINVAL);
	ck_assert_int_eq(bw_dual_timer_cancel(d, (enum bw_lane)2, &a), BW_EINVAL);
	ck_assert_int_eq(bw_dual_timer_cancel(NULL, BW_LANE_ONESHOT, &a), BW_EINVAL);
	memset(&v, 0, sizeof(v));
	ck_assert_int_eq(bw_dual_drain(d, vlog_visit, &v), 0);
	ck_assert_uint_eq(v.n, 3);
	for (size_t j = 0; j < v.n; j++)
		ck_assert_uint_eq(v.h[j], 0);
	ck_assert(!bw_timer_pending(&a) && !bw_timer_pending(&b) && !bw_timer_pending(&q));
	ck_assert_uint_eq(bw_dual_pending(d), 0);

	rec.on_fire = beat_fire;
	ck_assert_int_eq(bw_dual_timer_add(d, BW_LANE_PERIODIC, &p, START + 100 * MS,
					   &beat), 0);
	for (uint64_t t = START; t <= START + 1000 * MS; t += 10 * MS)
		dpoll(d, t, &rec);
	ck_assert_uint_eq(beat.fires, 5);
	ck_assert_uint_ge(beat.last, START + 500 * MS);
	ck_assert(!bw_timer_pending(&p));
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

START_TEST(test_dual_null_arguments)
{
	struct bw_dual *d = dual_new(BW_DUAL_STANDARD_BALANCED, START);
	struct tu_rec rec;
	struct bw_callbacks cb;
	bw_handle h;
	uint64_t out;
	int a;

	tu_rec_init(&rec);
	cb = tu_rec_cb(&rec);
	ck_assert_int_eq(bw_dual_new(NULL, 0, &d), BW_EINVAL);
	ck_assert_int_eq(bw_dual_insert_oneshot(NULL, 0, &a, &h), BW_EINVAL);
	ck_assert_int_eq(bw_dual_insert_periodic(NULL, 0, &a, &h), BW_EINVAL);
	ck_assert_int_eq(bw_dual_cancel(NULL, 1, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_dual_poll(NULL, 0, &cb, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_dual_poll(d, 0, NULL, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_dual_next_deadline(d, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_dual_foreach(d, NULL, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_dual_deadline(NULL, 1, &out), BW_EINVAL);
	bw_dual_free(NULL);
	tu_rec_free(&rec);
	bw_dual_free(d);
}
END_TEST

static Suite *dual_suite(void)
{
	Suite *s = suite_create("dual");
	TCase *tc;

	tc = tcase_create("lanes");
	tcase_add_loop_test(tc, test_dual_lanes, 0, BW_DUAL_PRESET_COUNT);
	tcase_add_test(tc, test_dual_insert_lanes);
	tcase_add_loop_test(tc, test_dual_one_poll_both_lanes, 0,
			    BW_DUAL_PRESET_COUNT);
	tcase_add_test(tc, test_dual_next_deadline);
	tcase_add_test(tc, test_dual_cancel);
	tcase_add_loop_test(tc, test_dual_periodic_rearm, 0,
			    BW_DUAL_PRESET_COUNT);
	tcase_add_test(tc, test_dual_foreach_drain);
	tcase_add_test(tc, test_dual_time_backwards);
	tcase_add_test(tc, test_dual_null_arguments);
	tcase_add_loop_test(tc, test_dual_intrusive_random, 0, 2);
	tcase_add_test(tc, test_dual_intrusive_lanes);
	suite_add_tcase(s, tc);

	tc = tcase_create("callbacks");
	tcase_add_loop_test(tc, test_dual_poll_in_callback, 0, 2);
	tcase_add_loop_test(tc, test_dual_insert_in_callback, 0, 2);
	tcase_add_loop_test(tc, test_dual_cancel_in_callback, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(dual_suite());
}
