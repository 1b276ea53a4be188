/*
 * check_wheel.c - the plain and failover wheel against the contract in
 * bitwheel.h, one TCase per theme:
 *   capacity   slot_cap/max_probes, probing into following slots, BW_EFULL
 *              leaving no trace, every preset's hot-deadline capacity and
 *              range;
 *   handles    cancel returns data; stale, double, reused and bogus handles
 *              give BW_ENOTFOUND and touch nothing; a record's generation
 *              wraps from its last to 1, never 0 (white-box: the record
 *              is set to its last generation through wheel-internal.h,
 *              rather than reused 2^31 times);
 *   precision  EXACT fires on the deadline's tick (long timers included),
 *              COARSE on a legal gear boundary, neither ever early, past
 *              deadlines at the next poll;
 *   range      range_ns, the exact BW_ERANGE edge, failover beyond range,
 *              10^9-tick gaps, time going backwards;
 *   callbacks  oneshot and periodic fires, re-arm and insert from a
 *              callback never firing in the arming poll, cancel and poll
 *              from a callback, re-arm drops, re-slots into full slots
 *              that never drop;
 *   introspection  next deadline, until_next, deadline, pending, counters,
 *              footprint, foreach, drain, config;
 *   failover   overflow order, cancel, on-time firing, never refusing,
 *              BW_ENOMEM;
 *   allocation zero allocator calls after creation on a plain wheel, no
 *              leaks, creation failures.
 * All times are injected; nothing reads a clock or sleeps.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"
#include "wheel-internal.h"

#define T5 (5 * TU_MS)
/* A start tick aligned to every gear boundary of a 4-gear wheel. */
#define L0 ((uint64_t)64 * 64 * 64 * 16)

static uint64_t cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *tag(uintptr_t i)
{
	return (void *)(i + 1);
}

static uintptr_t untag(void *p)
{
	return (uintptr_t)p - 1;
}

/* ---- tracked timers: who fired, at which poll ------------------------- */

struct trk {
	uint64_t d, t;          /* deadline and its tick                 */
	uint64_t ins_tick;      /* wheel tick when inserted              */
	bw_handle h;
	int accepted;
	unsigned nfired;
	uint64_t prev_tick;     /* tick of the poll before the firing one */
	uint64_t fire_tick;
	uint64_t fire_now;
};

struct tracker {
	struct bw_wheel *w;
	uint64_t T;
	uint64_t last_now;      /* last forward poll                     */
	uint64_t npolls;
	struct tu_rec rec;
};

static void trk_init(struct tracker *tr, struct bw_wheel *w, uint64_t now0)
{
	tr->w = w;
	tr->T = tu_tick_ns(bw_wheel_config(w));
	tr->last_now = now0;
	tr->npolls = 0;
	tu_rec_init(&tr->rec);
}

typedef int (*insert_fn)(struct bw_wheel *, uint64_t, void *, bw_handle *);

static int trk_insert_by(struct tracker *tr, struct trk *k, uint64_t d, insert_fn fn)
{
	int rc;

	memset(k, 0, sizeof(*k));
	k->d = d;
	k->t = tu_ceil_tick(d, tr->T);
	k->ins_tick = tr->last_now / tr->T;
	rc = fn(tr->w, d, k, &k->h);
	k->accepted = rc == 0;
	if (rc == 0)
		ck_assert_uint_ne(k->h, 0);
	return rc;
}

static int trk_insert(struct tracker *tr, struct trk *k, uint64_t d)
{
	return trk_insert_by(tr, k, d, bw_wheel_insert);
}

/* Poll, attribute fires, and insist nothing fires early. */
static struct bw_poll_result trk_poll(struct tracker *tr, uint64_t now)
{
	struct bw_poll_result res;
	uint64_t prev = tr->last_now / tr->T;

	tu_rec_clear(&tr->rec);
	res = tu_poll(tr->w, now, &tr->rec);
	tu_check(res.fired == tr->rec.nfired, "res.fired %" PRIu64 " != %zu",
		 res.fired, tr->rec.nfired);
	for (size_t i = 0; i < tr->rec.nfired; i++) {
		struct trk *k = tr->rec.fired[i].data;

		tu_check(tr->rec.fired[i].now == now, "fire got now %" PRIu64
			 ", poll was %" PRIu64, tr->rec.fired[i].now, now);
		tu_check(now >= k->d,
			 "fired early: now %" PRIu64 " < deadline %" PRIu64,
			 now, k->d);
		tu_check(now / tr->T >= k->t,
			 "fired before its tick: %" PRIu64 " < %" PRIu64,
			 now / tr->T, k->t);
		k->nfired++;
		k->prev_tick = prev;
		k->fire_tick = now / tr->T;
		k->fire_now = now;
	}
	if (now >= tr->last_now)
		tr->last_now = now;
	/* The full check is O(pending): after fires, and now and then. */
	if (res.fired > 0 || tr->npolls++ % 1024 == 0)
		tu_assert_healthy(tr->w);
	return res;
}

/* ---- capacity --------------------------------------------------------- */

/*
 * Every preset's geometry on a plain and a failover wheel: range, and the
 * hot-deadline capacity slot_cap * max_probes, with probed timers firing
 * one slot (tick) later per probe step.
 */
START_TEST(test_preset_geometry)
{
	enum bw_preset p = (enum bw_preset)(_i / 2);
	bool fo = _i % 2;
	struct bw_config cfg;
	struct bw_wheel *w;
	struct tracker tr;
	struct trk *k;
	struct bw_counters c;
	uint64_t T, t, n, extra_h;
	unsigned cap, P;
	int rc;

	ck_assert_int_eq(bw_config_preset(p, &cfg), 0);
	cfg.failover = fo;
	T = tu_tick_ns(&cfg);
	cap = cfg.slot_cap;
	P = cfg.max_probes;
	w = tu_wheel_new(&cfg, L0 * T + 777);
	trk_init(&tr, w, L0 * T + 777);
	ck_assert_uint_eq(bw_wheel_range_ns(w), 63ull * 64 * 64 * 64 * T);

	n = (uint64_t)cap * P;
	k = calloc(n + 1, sizeof(*k));
	t = L0 + 3;
	for (uint64_t i = 0; i < n; i++) {
		rc = trk_insert(&tr, &k[i], t * T - 1);
		ck_assert_msg(rc == 0, "%s: insert %" PRIu64 " of %" PRIu64
			      " refused: %d", bw_preset_name(p), i, n, rc);
	}
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.inserted, n);
	ck_assert_uint_eq(c.probed, (uint64_t)cap * (P - 1));
	ck_assert_uint_eq(c.refused, 0);
	ck_assert_uint_eq(c.overflowed, 0);
	tu_assert_healthy(w);

	rc = trk_insert(&tr, &k[n], t * T - 1);
	bw_wheel_counters(w, &c);
	if (fo) {
		ck_assert_int_eq(rc, 0);
		ck_assert_uint_eq(c.overflowed, 1);
		ck_assert_uint_eq(bw_wheel_overflow_pending(w), 1);
		ck_assert_uint_eq(bw_wheel_pending(w), n + 1);
		extra_h = 1;
	} else {
		ck_assert_int_eq(rc, BW_EFULL);
		ck_assert_uint_eq(c.refused, 1);
		ck_assert_uint_eq(c.inserted, n);
		ck_assert_uint_eq(bw_wheel_pending(w), n);
		ck_assert_uint_eq(bw_wheel_overflow_pending(w), 0);
		extra_h = 0;
	}
	tu_assert_healthy(w);

	ck_assert_uint_eq(trk_poll(&tr, t * T - 1).fired, 0);
	for (unsigned s = 0; s < P; s++) {
		struct bw_poll_result res = trk_poll(&tr, (t + s) * T);
		uint64_t want = cap + (s == 0 ? extra_h : 0);

		ck_assert_msg(res.fired == want,
			      "%s%s: tick t+%u fired %" PRIu64 ", want %" PRIu64,
			      bw_preset_name(p), fo ? "+failover" : "", s,
			      res.fired, want);
	}
	for (uint64_t i = 0; i < n + extra_h; i++)
		ck_assert_uint_eq(k[i].nfired, 1);
	ck_assert_uint_eq(k[n].nfired, extra_h);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	free(k);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * Probing walks the following slots: a timer whose home slot was filled
 * by another deadline's probes lands further on and fires that much later,
 * never more than max_probes - 1 ticks late.
 */
START_TEST(test_probe_chain)
{
	struct bw_config cfg = tu_cfg(2, 5, 2, 3, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5 + 10);
	struct tracker tr;
	struct trk k[12];
	struct bw_counters c;
	uint64_t t = L0 + 5;
	/* deadline tick of each insert, and whether it must be accepted */
	static const struct { unsigned dt; int ok; unsigned fire; } plan[] = {
		{ 0, 1, 0 }, { 0, 1, 0 }, { 0, 1, 1 }, { 0, 1, 1 },
		{ 0, 1, 2 }, { 0, 1, 2 }, { 0, 0, 0 },
		{ 1, 1, 3 }, { 1, 1, 3 }, { 1, 0, 0 },
		{ 3, 1, 4 }, { 0, 0, 0 },
	};

	trk_init(&tr, w, L0 * T5 + 10);
	for (unsigned i = 0; i < 12; i++) {
		int rc = trk_insert(&tr, &k[i], (t + plan[i].dt) * T5 - 3);

		ck_assert_msg(rc == (plan[i].ok ? 0 : BW_EFULL),
			      "insert %u: %d", i, rc);
		tu_assert_healthy(w);
	}
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.inserted, 9);
	ck_assert_uint_eq(c.refused, 3);
	ck_assert_uint_eq(c.probed, 7);
	ck_assert_uint_eq(bw_wheel_pending(w), 9);

	for (uint64_t tick = L0 + 1; tick <= t + 6; tick++)
		trk_poll(&tr, tick * T5);
	for (unsigned i = 0; i < 12; i++) {
		if (!plan[i].ok) {
			ck_assert_uint_eq(k[i].nfired, 0);
			continue;
		}
		ck_assert_uint_eq(k[i].nfired, 1);
		ck_assert_msg(k[i].fire_tick == t + plan[i].fire,
			      "timer %u fired at t+%" PRId64 ", want t+%u", i,
			      (int64_t)(k[i].fire_tick - t), plan[i].fire);
	}
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

static void collect_visit(bw_handle h, uint64_t d, void *data, void *ctx)
{
	struct tu_rec *rec = ctx;
	struct bw_callbacks cb = tu_rec_cb(rec);

	/* Reuse the recorder's fire log: data and deadline. */
	cb.fire(data, d, rec);
	(void)h;
}

START_TEST(test_efull_leaves_no_trace)
{
	struct bw_config cfg = tu_cfg(1, 5, 1, 1, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct bw_counters c0, c1;
	struct tu_rec rec;
	bw_handle ha, hb = 0xdeadbeef;
	int a, b;

	tu_rec_init(&rec);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 9) * T5, &a, &ha), 0);
	bw_wheel_counters(w, &c0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 9) * T5 - 1, &b, &hb),
			 BW_EFULL);
	bw_wheel_counters(w, &c1);
	ck_assert_uint_eq(c1.inserted, c0.inserted);
	ck_assert_uint_eq(c1.refused, c0.refused + 1);
	ck_assert_uint_eq(c1.probed, c0.probed);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	tu_assert_healthy(w);

	ck_assert_int_eq(bw_wheel_foreach(w, collect_visit, &rec), 0);
	ck_assert_uint_eq(rec.nfired, 1);
	ck_assert_ptr_eq(rec.fired[0].data, &a);
	tu_rec_clear(&rec);

	/* A neighbouring slot is still free. */
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 10) * T5, &b, &hb), 0);
	tu_poll(w, (L0 + 20) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 2);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &a), 1);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &b), 1);
	ck_assert_uint_eq(rec.ndropped, 0);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * Hot deadlines in coarse gears hold slot_cap * max_probes too, and the
 * probing there must not make EXACT timers late (only gear-0 probing may)
 * nor COARSE timers later than their bound.
 */
START_TEST(test_coarse_hotspot)
{
	enum bw_precision prec = _i % 2 ? BW_COARSE : BW_EXACT;
	uint64_t delta = _i / 2 == 0 ? 64 * 10 + 5 : 64 * 64 * 5 + 7;
	struct bw_config cfg = tu_cfg(4, 5, 4, 4, prec, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5 + 1);
	struct tracker tr;
	struct trk k[17];
	uint64_t t = L0 + delta, bound;
	unsigned n = 0, g;

	trk_init(&tr, w, L0 * T5 + 1);
	while (n < 17 && trk_insert(&tr, &k[n], t * T5 - 11) == 0)
		n++;
	ck_assert_msg(n == 16, "hot coarse deadline held %u, want 16", n);
	ck_assert_int_eq(trk_insert(&tr, &k[16], t * T5 - 11), BW_EFULL);

	g = tu_log64(delta) + 1;
	bound = prec == BW_EXACT ? cfg.max_probes - 1
				 : tu_pow64(g) * cfg.max_probes;
	for (uint64_t tick = L0 + 1; tick <= t + bound + 1 &&
				     bw_wheel_pending(w) > 0; tick++)
		trk_poll(&tr, tick * T5 + 3);
	for (unsigned i = 0; i < 16; i++) {
		ck_assert_msg(k[i].nfired == 1,
			      "%s: accepted timer %u of 16 never fired (%zu of "
			      "them dropped, reason %d)",
			      prec == BW_EXACT ? "exact" : "coarse", i,
			      tr.rec.ndropped,
			      tr.rec.ndropped ? tr.rec.dropped[0].reason : 0);
		ck_assert_msg(k[i].fire_tick <= t + bound,
			      "%s timer %u late by %" PRIu64 " ticks (bound %"
			      PRIu64 ")", prec == BW_EXACT ? "exact" : "coarse",
			      i, k[i].fire_tick - t, bound);
	}
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * A refused far insert teaches the wheel which gear-2 slots refuse (the
 * refusal window), but only those: a slot whose probe still finds room
 * below it takes its timer, and a cancel that makes room is seen at once.
 * Cap 1, 2 probes: slots 5 and 6 ahead full, so 6 refuses, 5 probes to 4.
 */
START_TEST(test_refusal_window)
{
	struct bw_config cfg = tu_cfg(3, 5, 1, 2, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	uint64_t base = L0 >> 12;
	bw_handle h5, h6, h;

#define SLOT_TICK(j, off) (((base + (j)) << 12) + (off))
	ck_assert_int_eq(bw_wheel_insert(w, SLOT_TICK(5, 10) * T5, NULL, &h5), 0);
	ck_assert_int_eq(bw_wheel_insert(w, SLOT_TICK(6, 10) * T5, NULL, &h6), 0);
	ck_assert_int_eq(bw_wheel_insert(w, SLOT_TICK(6, 20) * T5, NULL, &h), BW_EFULL);
	ck_assert_int_eq(bw_wheel_insert(w, SLOT_TICK(6, 30) * T5, NULL, &h), BW_EFULL);
	ck_assert_int_eq(bw_wheel_insert(w, SLOT_TICK(5, 20) * T5, NULL, &h), 0);
	tu_assert_healthy(w);
	ck_assert_int_eq(bw_wheel_insert(w, SLOT_TICK(5, 30) * T5, NULL, &h), BW_EFULL);
	ck_assert_int_eq(bw_wheel_insert(w, SLOT_TICK(6, 40) * T5, NULL, &h), BW_EFULL);
	ck_assert_int_eq(bw_wheel_cancel(w, h6, NULL), 0);
	ck_assert_int_eq(bw_wheel_insert(w, SLOT_TICK(6, 50) * T5, NULL, &h), 0);
	ck_assert_int_eq(bw_wheel_insert(w, SLOT_TICK(6, 60) * T5, NULL, &h), BW_EFULL);
#undef SLOT_TICK
	ck_assert_uint_eq(bw_wheel_pending(w), 3);
	tu_assert_healthy(w);
	bw_wheel_free(w);
}
END_TEST

/* Insert a timer at tick, which the wheel must refuse (a failover
 * wheel: put in its heap) or take into a slot; its handle back. */
static bw_handle insert_expect(struct bw_wheel *w, uint64_t tick,
			       bool refused)
{
	size_t heaped = bw_wheel_overflow_pending(w);
	bw_handle h = 0;
	int rc = bw_wheel_insert(w, tick * T5, NULL, &h);

	if (bw_wheel_config(w)->failover) {
		ck_assert_msg(rc == 0, "tick %" PRIu64 ": %d", tick, rc);
		ck_assert_msg(bw_wheel_overflow_pending(w) == heaped + refused,
			      "tick %" PRIu64 " %s the heap", tick,
			      refused ? "did not go to" : "went to");
	} else {
		ck_assert_msg(rc == (refused ? BW_EFULL : 0),
			      "tick %" PRIu64 ": %d, want %s", tick, rc,
			      refused ? "BW_EFULL" : "0");
	}
	return h;
}

/*
 * The same in coarse mode, which rounds a far deadline up to its gear-2
 * slot's end (home slot k ahead holds ticks (k - 1) * 4096 + 1 .. k *
 * 4096 past now's slot) and probes forward.  Cap 1, 2 probes: with slots
 * 5, 6, 7 ahead full, 5 and 6 refuse and 7 probes to 8 (then 7 refuses
 * too, and 4 takes its own); with 1, 2, 3
 * full, 1 and 2 refuse, and a tick at or before now (which slot 1's
 * home ticks include) is due, never refused nor heaped.  Plain and
 * failover.
 */
START_TEST(test_refusal_window_coarse)
{
	struct bw_config cfg = tu_cfg(3, 5, 1, 2, BW_COARSE, _i == 1);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	uint64_t base = L0 >> 12;
	struct tu_rec rec;
	bw_handle h6;

#define HOME_TICK(k, off) (((base + (k) - 1) << 12) + (off))
	tu_rec_init(&rec);
	insert_expect(w, HOME_TICK(1, 4096), false);
	insert_expect(w, HOME_TICK(2, 10), false);
	insert_expect(w, HOME_TICK(3, 10), false);
	insert_expect(w, HOME_TICK(5, 10), false);
	h6 = insert_expect(w, HOME_TICK(6, 10), false);
	insert_expect(w, HOME_TICK(7, 10), false);
	insert_expect(w, HOME_TICK(6, 20), true);
	tu_assert_healthy(w);
	insert_expect(w, HOME_TICK(5, 1), true);
	insert_expect(w, HOME_TICK(6, 4096), true);
	insert_expect(w, HOME_TICK(7, 1), false);
	tu_assert_healthy(w);
	insert_expect(w, HOME_TICK(6, 30), true);
	insert_expect(w, HOME_TICK(7, 4096), true);
	insert_expect(w, HOME_TICK(4, 4096), false);
	if (!cfg.failover) {
		ck_assert_int_eq(bw_wheel_cancel(w, h6, NULL), 0);
		insert_expect(w, HOME_TICK(6, 40), false);
	}
	tu_assert_healthy(w);

	tu_poll(w, (L0 + 100) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 0);
	insert_expect(w, HOME_TICK(2, 200), true);
	insert_expect(w, HOME_TICK(1, 4096), false); /* now in the ring */
	insert_expect(w, L0 + 50, false);
	insert_expect(w, L0 + 100, false);
	tu_assert_healthy(w);
	tu_poll(w, (L0 + 101) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 2);
	tu_assert_healthy(w);
#undef HOME_TICK
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/* ---- handles ---------------------------------------------------------- */

START_TEST(test_cancel_returns_data)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct bw_counters c;
	int a, b;
	bw_handle ha, hb;
	void *got = NULL;

	tu_rec_init(&rec);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 10) * T5, &a, &ha), 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 5000) * T5, &b, &hb), 0);
	ck_assert_uint_ne(ha, hb);
	ck_assert_int_eq(bw_wheel_cancel(w, ha, &got), 0);
	ck_assert_ptr_eq(got, &a);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	tu_assert_healthy(w);
	/* data_out may be NULL. */
	ck_assert_int_eq(bw_wheel_cancel(w, hb, NULL), 0);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.cancelled, 2);
	tu_poll(w, (L0 + 10000) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 0);
	tu_assert_healthy(w);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_stale_handles)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	int a, b, c;
	bw_handle ha, hb, hc;
	void *got = &rec;
	uint64_t dl;

	tu_rec_init(&rec);
	/* Double cancel. */
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 10) * T5, &a, &ha), 0);
	ck_assert_int_eq(bw_wheel_cancel(w, ha, NULL), 0);
	ck_assert_int_eq(bw_wheel_cancel(w, ha, &got), BW_ENOTFOUND);
	ck_assert_ptr_eq(got, &rec);
	ck_assert_int_eq(bw_wheel_deadline(w, ha, &dl), BW_ENOTFOUND);

	/* The record is reused by b: a's handle must still be dead. */
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 10) * T5, &b, &hb), 0);
	ck_assert_uint_ne(ha, hb);
	ck_assert_int_eq(bw_wheel_cancel(w, ha, &got), BW_ENOTFOUND);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	ck_assert_int_eq(bw_wheel_deadline(w, hb, &dl), 0);
	ck_assert_uint_eq(dl, (L0 + 10) * T5);

	/* Fired: dead. */
	tu_poll(w, (L0 + 10) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 1);
	ck_assert_ptr_eq(rec.fired[0].data, &b);
	ck_assert_int_eq(bw_wheel_cancel(w, hb, &got), BW_ENOTFOUND);

	/* A fresh timer is untouched by all the dead handles. */
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 20) * T5, &c, &hc), 0);
	ck_assert_int_eq(bw_wheel_cancel(w, ha, NULL), BW_ENOTFOUND);
	ck_assert_int_eq(bw_wheel_cancel(w, hb, NULL), BW_ENOTFOUND);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	ck_assert_int_eq(bw_wheel_cancel(w, hc, &got), 0);
	ck_assert_ptr_eq(got, &c);
	tu_assert_healthy(w);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * A tiny wheel (64 records) churned 20000 times: records are reused over
 * and over, yet every handle ever issued is distinct and non-zero, dead
 * handles stay dead, and live timers are never disturbed.
 */
/* A record at its last generation, freed by a cancel or a fire, wraps to
 * generation 1: the handle it had is dead, the next one works, and no
 * handle ever carries generation 0 or one past the limit. */
START_TEST(test_generation_wrap)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	int a, b, c;
	bw_handle h, last;
	uint32_t idx;
	void *got;

	tu_rec_init(&rec);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 10) * T5, &a, &h), 0);
	idx = (uint32_t)h;
	ck_assert_int_eq(bw_wheel_cancel(w, h, NULL), 0);
	for (int by_fire = 0; by_fire < 2; by_fire++) {
		/* The freed record comes back first (the free list is LIFO). */
		bw_rec_at(&w->pool, idx)->h = bw_handle_make(idx, BW_GEN_LIMIT - 1);
		tu_assert_healthy(w);
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 20) * T5, &b, &last), 0);
		ck_assert_uint_eq((uint32_t)last, idx);
		ck_assert_uint_eq(last >> 32, BW_GEN_LIMIT - 1);
		tu_assert_healthy(w);
		if (by_fire) {
			tu_poll(w, (L0 + 20) * T5, &rec);
			ck_assert_uint_eq(rec.nfired, 1);
			ck_assert_ptr_eq(rec.fired[0].data, &b);
			rec.nfired = 0;
		} else {
			ck_assert_int_eq(bw_wheel_cancel(w, last, &got), 0);
			ck_assert_ptr_eq(got, &b);
		}
		ck_assert_uint_eq(bw_rec_at(&w->pool, idx)->h >> 32, 1);
		tu_assert_healthy(w);
		ck_assert_int_eq(bw_wheel_cancel(w, last, NULL), BW_ENOTFOUND);

		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 30) * T5, &c, &h), 0);
		ck_assert_uint_eq((uint32_t)h, idx);
		ck_assert_uint_eq(h >> 32, 1);
		ck_assert_int_eq(bw_wheel_cancel(w, last, NULL), BW_ENOTFOUND);
		ck_assert_uint_eq(bw_wheel_pending(w), 1);
		ck_assert_int_eq(bw_wheel_cancel(w, h, &got), 0);
		ck_assert_ptr_eq(got, &c);
		ck_assert_uint_eq(bw_rec_at(&w->pool, idx)->h >> 32, 3);
		tu_assert_healthy(w);
	}
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_handle_reuse_churn)
{
	enum { N = 20000, LIVE = 24 };
	struct bw_config cfg = tu_cfg(1, 5, 1, 1, BW_EXACT, false);
	uint64_t now = L0 * T5 + 3;
	struct bw_wheel *w = tu_wheel_new(&cfg, now);
	struct tu_rng rng;
	struct tu_rec rec;
	uint64_t *issued = calloc(N, sizeof(*issued));
	uint64_t *sorted;
	bw_handle live_h[LIVE];
	uintptr_t live_id[LIVE];
	unsigned nlive = 0, nissued = 0;
	struct bw_counters c;

	tu_rng_seed(&rng, 0xc0ffee);
	tu_rec_init(&rec);
	for (unsigned it = 0; nissued < N; it++) {
		uint64_t d = now + tu_rng_range(&rng, 1, 60) * T5;
		bw_handle h;
		void *got;
		int rc;

		if (nlive < LIVE) {
			rc = bw_wheel_insert(w, d, tag(nissued), &h);
			tu_check(rc == 0 || rc == BW_EFULL, "insert: %d", rc);
			if (rc == 0) {
				tu_check(h != 0, "handle 0");
				live_h[nlive] = h;
				live_id[nlive] = nissued;
				nlive++;
				issued[nissued++] = h;
			}
		}
		if (nlive > 0 && tu_rng_chance(&rng, 400000)) {
			unsigned j = (unsigned)tu_rng_below(&rng, nlive);

			tu_check(bw_wheel_cancel(w, live_h[j], &got) == 0,
				 "live cancel failed");
			tu_check(untag(got) == live_id[j], "cancel returned "
				 "another timer's data");
			live_h[j] = live_h[--nlive];
			live_id[j] = live_id[nlive];
		}
		if (nissued > 0) {
			/* Any handle not live must be dead. */
			uint64_t old = issued[tu_rng_below(&rng, nissued)];
			int is_live = 0;

			for (unsigned j = 0; j < nlive; j++)
				is_live |= live_h[j] == old;
			if (!is_live)
				tu_check(bw_wheel_cancel(w, old, &got) ==
						 BW_ENOTFOUND,
					 "dead handle %#" PRIx64 " cancelled",
					 old);
		}
		tu_check(bw_wheel_pending(w) == nlive, "pending %zu, want %u",
			 bw_wheel_pending(w), nlive);
		if (tu_rng_chance(&rng, 100000)) {
			now += tu_rng_below(&rng, 3 * T5);
			tu_rec_clear(&rec);
			tu_poll(w, now, &rec);
			for (size_t f = 0; f < rec.nfired; f++) {
				uintptr_t id = untag(rec.fired[f].data);
				unsigned j;

				for (j = 0; j < nlive && live_id[j] != id; j++)
					;
				tu_check(j < nlive, "fired a dead timer");
				live_h[j] = live_h[--nlive];
				live_id[j] = live_id[nlive];
			}
		}
		if (it % 512 == 0)
			tu_assert_healthy(w);
	}
	sorted = issued;
	qsort(sorted, nissued, sizeof(*sorted), cmp_u64);
	for (unsigned i = 1; i < nissued; i++)
		tu_check(sorted[i] != sorted[i - 1],
			      "handle %#" PRIx64 " issued twice", sorted[i]);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.inserted, N);
	tu_assert_healthy(w);
	free(issued);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_bogus_handles)
{
	enum { LIVE = 100 };
	/* Room for all: ~42 of them share one gear-2 slot. */
	struct bw_config cfg = tu_cfg(4, 5, 64, 8, BW_EXACT, _i == 1);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rng rng;
	struct tu_rec rec;
	bw_handle h[LIVE];
	uint64_t dl;

	tu_rng_seed(&rng, 77);
	tu_rec_init(&rec);
	for (unsigned i = 0; i < LIVE; i++)
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 1 + i * 97) * T5,
						 tag(i), &h[i]),
				 0);
	ck_assert_int_eq(bw_wheel_cancel(w, 0, NULL), BW_ENOTFOUND);
	ck_assert_int_eq(bw_wheel_deadline(w, 0, &dl), BW_ENOTFOUND);
	ck_assert_int_eq(bw_wheel_cancel(w, UINT64_MAX, NULL), BW_ENOTFOUND);
	for (unsigned i = 0; i < 200000; i++) {
		uint64_t b = tu_rng_next(&rng);
		int live = 0;

		/* Small values too: likely record indexes with bad bits. */
		if (i % 4 == 0)
			b &= 0xffff;
		for (unsigned j = 0; j < LIVE; j++)
			live |= h[j] == b;
		if (live)
			continue;
		tu_check(bw_wheel_cancel(w, b, NULL) == BW_ENOTFOUND,
			 "bogus handle %#" PRIx64 " cancelled something", b);
		tu_check(bw_wheel_deadline(w, b, &dl) == BW_ENOTFOUND,
			 "bogus handle %#" PRIx64 " has a deadline", b);
	}
	ck_assert_uint_eq(bw_wheel_pending(w), LIVE);
	tu_assert_healthy(w);
	tu_poll(w, (L0 + 1 + LIVE * 97) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, LIVE);
	for (unsigned i = 0; i < LIVE; i++)
		ck_assert_uint_eq(tu_rec_fired_count(&rec, tag(i)), 1);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/* ---- precision ---------------------------------------------------------- */

/*
 * Without contention (slot_cap above the timer count), EXACT fires every
 * timer at the first poll whose tick reaches its deadline's tick, and
 * COARSE at the first poll at or past one legal boundary: the first
 * boundary at or after the deadline's tick of a gear no more than one
 * above floor(log64(delta)).  Polls land on, just before, and at random
 * points between the deadlines, so both stepping and jumping are covered.
 */
static int coarse_fire_ok(const struct trk *k, unsigned gears)
{
	unsigned gmax;

	if (k->t <= k->ins_tick)
		return k->prev_tick < k->fire_tick || k->prev_tick == k->ins_tick;
	gmax = tu_log64(k->t - k->ins_tick) + 1;
	if (gmax > gears - 1)
		gmax = gears - 1;
	for (unsigned g = 0; g <= gmax; g++) {
		uint64_t span = tu_pow64(g);
		uint64_t f = (k->t + span - 1) / span * span;

		if (k->prev_tick < f && f <= k->fire_tick)
			return 1;
	}
	return 0;
}

static int exact_fire_ok(const struct trk *k)
{
	if (k->t <= k->ins_tick)
		return 1; /* due already: the first poll, checked by caller */
	return k->prev_tick < k->t && k->t <= k->fire_tick;
}

START_TEST(test_no_contention_random)
{
	enum { N = 400 };
	enum bw_precision prec = _i % 2 ? BW_COARSE : BW_EXACT;
	unsigned gears = _i / 2 == 0 ? 4 : 3;
	struct bw_config cfg = tu_cfg(gears, 5, 1024, 8, prec, false);
	uint64_t now = L0 * T5 + 4321;
	struct bw_wheel *w = tu_wheel_new(&cfg, now);
	/* The wheel's own promise; whether it is the header's is
	 * test_range_*'s business. */
	uint64_t R = bw_wheel_range_ns(w) / T5;
	struct tracker tr;
	struct trk *k = calloc(N, sizeof(*k));
	uint64_t *ticks = calloc(N, sizeof(*ticks));
	struct tu_rng rng;
	uint64_t maxt = 0;
	/* Deltas straddling every gear boundary, then random ones. */
	static const uint64_t edges[] = {
		0, 1, 2, 62, 63, 64, 65, 127, 128, 4095, 4096, 4097, 4159,
		262143, 262144, 262145, 16515072,
	};

	tu_rng_seed(&rng, 1000 + _i);
	trk_init(&tr, w, now);
	for (unsigned i = 0; i < N; i++) {
		uint64_t dt, d;

		if (i < sizeof(edges) / sizeof(edges[0]))
			dt = edges[i] % (R + 1);
		else if (i < 40)
			dt = 0; /* past deadlines, below */
		else
			dt = tu_rng_below(&rng, 1 + (tu_rng_chance(&rng, 500000)
							     ? 5000 : R));
		d = (L0 + dt) * T5 - tu_rng_below(&rng, T5);
		if (i >= sizeof(edges) / sizeof(edges[0]) && i < 40)
			d = tu_rng_below(&rng, L0 * T5 + 1);
		ck_assert_int_eq(trk_insert(&tr, &k[i], d), 0);
		ticks[i] = k[i].t;
		if (k[i].t > maxt)
			maxt = k[i].t;
	}
	qsort(ticks, N, sizeof(*ticks), cmp_u64);
	/* Visit each deadline tick: a poll just before, one on it, and now and
	 * then a random one in between. */
	for (unsigned i = 0; i < N; i++) {
		uint64_t t = ticks[i];

		if (t <= tr.last_now / T5)
			continue;
		if (tu_rng_chance(&rng, 300000)) {
			uint64_t lo = tr.last_now, hi = t * T5 - 1;

			trk_poll(&tr, tu_rng_range(&rng, lo, hi));
		}
		if (tu_rng_chance(&rng, 600000))
			trk_poll(&tr, t * T5 - 1);
		trk_poll(&tr, t * T5 + tu_rng_below(&rng, T5));
	}
	trk_poll(&tr, (maxt + 64ull * 64 * 64 * 2) * T5);
	for (unsigned i = 0; i < N; i++) {
		ck_assert_msg(k[i].nfired == 1, "timer %u (t=L0+%" PRIu64
			      ") fired %u times", i, k[i].t - L0, k[i].nfired);
		if (k[i].t <= k[i].ins_tick) {
			/* Due at insert: the very first poll fires it. */
			ck_assert_uint_eq(k[i].prev_tick, L0);
			continue;
		}
		if (prec == BW_EXACT)
			ck_assert_msg(exact_fire_ok(&k[i]),
				      "exact timer %u: t=L0+%" PRIu64
				      " fired at L0+%" PRIu64 " (prev poll L0+%"
				      PRIu64 ")", i, k[i].t - L0,
				      k[i].fire_tick - L0, k[i].prev_tick - L0);
		else
			ck_assert_msg(coarse_fire_ok(&k[i], gears),
				      "coarse timer %u: t=L0+%" PRIu64
				      " fired at L0+%" PRIu64 " (prev poll L0+%"
				      PRIu64 ")", i, k[i].t - L0,
				      k[i].fire_tick - L0, k[i].prev_tick - L0);
	}
	if (prec == BW_COARSE) {
		struct bw_counters c;

		bw_wheel_counters(w, &c);
		ck_assert_uint_eq(c.reslotted, 0);
	}
	free(k);
	free(ticks);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * One hour at 5 ms, EXACT: the exact tick whatever the polling pattern
 * (0 every tick, 1 one jump, 2 following next_deadline, 3 coarse steps
 * then every tick near the end, 4 random strides).
 */
START_TEST(test_long_timer_exact)
{
	struct bw_config cfg;
	uint64_t now0 = L0 * T5 + 1234567;
	struct bw_wheel *w;
	struct tracker tr;
	struct trk k;
	uint64_t d = now0 + 3600ull * 1000 * TU_MS, t;
	struct tu_rng rng;
	struct bw_counters c;

	ck_assert_int_eq(bw_config_preset(BW_PRESET_BALANCED, &cfg), 0);
	w = tu_wheel_new(&cfg, now0);
	trk_init(&tr, w, now0);
	tu_rng_seed(&rng, 99);
	ck_assert_int_eq(trk_insert(&tr, &k, d), 0);
	t = k.t;
	switch (_i) {
	case 0:
		for (uint64_t tick = L0 + 1; tick < t; tick++)
			trk_poll(&tr, tick * T5 + T5 - 1);
		break;
	case 1:
		trk_poll(&tr, t * T5 - 1);
		break;
	case 2:
		for (int n = 0; n < 1000; n++) {
			uint64_t nd;

			ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), 0);
			ck_assert_uint_le(nd, t * T5);
			if (nd >= t * T5)
				break;
			trk_poll(&tr, nd > tr.last_now ? nd : tr.last_now);
			ck_assert_msg(n < 100, "next_deadline stepping stalls");
		}
		break;
	case 3:
		while (tr.last_now / T5 + 1000 < t)
			trk_poll(&tr, tr.last_now + 1000 * T5);
		for (uint64_t tick = tr.last_now / T5 + 1; tick < t; tick++)
			trk_poll(&tr, tick * T5);
		break;
	default:
		while (tr.last_now / T5 + 70000 < t)
			trk_poll(&tr, tr.last_now + tu_rng_below(&rng, 70000 * T5));
		break;
	}
	ck_assert_uint_eq(k.nfired, 0);
	/* d is inside tick t-1: reaching it is not enough, the tick is. */
	trk_poll(&tr, d);
	ck_assert_uint_eq(k.nfired, 0);
	trk_poll(&tr, t * T5 - 1);
	ck_assert_uint_eq(k.nfired, 0);
	trk_poll(&tr, t * T5);
	ck_assert_uint_eq(k.nfired, 1);
	ck_assert_uint_eq(k.fire_tick, t);
	bw_wheel_counters(w, &c);
	ck_assert_uint_ge(c.reslotted, 1);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/* One hour at 5 ms, COARSE, polled every tick: a legal boundary, no re-slot. */
START_TEST(test_long_timer_coarse)
{
	struct bw_config cfg;
	uint64_t now0 = L0 * T5 + 1234567;
	struct bw_wheel *w;
	struct tracker tr;
	struct trk k;
	struct bw_counters c;
	uint64_t d = now0 + 3600ull * 1000 * TU_MS;

	ck_assert_int_eq(bw_config_preset(BW_PRESET_BALANCED, &cfg), 0);
	cfg.precision = BW_COARSE;
	w = tu_wheel_new(&cfg, now0);
	trk_init(&tr, w, now0);
	ck_assert_int_eq(trk_insert(&tr, &k, d), 0);
	for (uint64_t tick = L0 + 1; k.nfired == 0; tick++) {
		trk_poll(&tr, tick * T5);
		tu_check(tick <= k.t + 64ull * 64 * 64 * 8, "never fired");
	}
	ck_assert_msg(coarse_fire_ok(&k, cfg.gears),
		      "1 h coarse timer fired %" PRIu64 " ticks after its tick",
		      k.fire_tick - k.t);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.reslotted, 0);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/* Deadlines inside a tick round up: the poll one ns short never fires. */
START_TEST(test_deadline_rounding)
{
	enum bw_precision prec = _i ? BW_COARSE : BW_EXACT;
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, prec, false);
	uint64_t now0 = L0 * T5 + 100;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tracker tr;
	struct trk k[4];
	uint64_t t = L0 + 7;

	trk_init(&tr, w, now0);
	ck_assert_int_eq(trk_insert(&tr, &k[0], t * T5 - 1), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[1], t * T5), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[2], (t - 1) * T5 + 1), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[3], t * T5 + 1), 0);
	/* now >= k[2].d here, but its tick has not come. */
	trk_poll(&tr, t * T5 - 1);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(k[i].nfired, 0);
	trk_poll(&tr, t * T5);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(k[i].nfired, 1);
	ck_assert_uint_eq(k[3].nfired, 0);
	trk_poll(&tr, (t + 1) * T5 - 1);
	ck_assert_uint_eq(k[3].nfired, 0);
	trk_poll(&tr, (t + 1) * T5);
	ck_assert_uint_eq(k[3].nfired, 1);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * Deadlines at or before the current tick fire at the next poll, even one
 * at the same now; deadlines after the current tick's start but before now
 * belong to the next tick.
 */
START_TEST(test_past_deadlines)
{
	enum bw_precision prec = _i % 2 ? BW_COARSE : BW_EXACT;
	bool fo = _i / 2;
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, prec, fo);
	uint64_t now0 = L0 * T5 + 100, now1;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tracker tr;
	struct trk k[7];
	uint64_t c;

	trk_init(&tr, w, now0);
	now1 = (L0 + 50) * T5 + 777;
	trk_poll(&tr, now1);
	c = L0 + 50;
	ck_assert_int_eq(trk_insert(&tr, &k[0], 0), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[1], 1), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[2], c * T5), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[3], c * T5 - 1), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[4], now0), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[5], now1), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[6], c * T5 + 1), 0);
	trk_poll(&tr, now1);
	for (int i = 0; i < 5; i++)
		ck_assert_msg(k[i].nfired == 1, "past timer %d not fired", i);
	ck_assert_uint_eq(k[5].nfired, 0);
	ck_assert_uint_eq(k[6].nfired, 0);
	trk_poll(&tr, (c + 1) * T5);
	ck_assert_uint_eq(k[5].nfired, 1);
	ck_assert_uint_eq(k[6].nfired, 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

struct arm_at {
	struct trk self;        /* the timer whose callback arms      */
	uint64_t delta_ns;      /* re-arm / insert at now + this      */
	int insert;             /* insert a new timer instead         */
	struct trk *k;          /* the inserted timer                 */
	struct tracker *tr;
	uint64_t rearm_d;
	int rc;
};

static uint64_t arm_at_fire(struct tu_rec *rec, void *data, uint64_t now)
{
	struct arm_at *x = rec->user;

	if (data != &x->self)
		return 0;
	if (x->insert) {
		x->rc = trk_insert(x->tr, x->k, now + x->delta_ns);
		/* trk_insert took the tick from the tracker's last poll; the
		 * callback runs at this poll's. */
		x->k->ins_tick = now / x->tr->T;
		return 0;
	}
	x->rearm_d = now + x->delta_ns;
	return x->rearm_d;
}

/* After the arming poll, the tracker judges the re-armed deadline. */
static void arm_at_settle(struct arm_at *x)
{
	if (x->insert)
		return;
	x->self.d = x->rearm_d;
	x->self.t = tu_ceil_tick(x->rearm_d, x->tr->T);
	x->self.ins_tick = x->tr->last_now / x->tr->T;
}

/*
 * Arming from a callback counts from the poll's own tick, not from the
 * older tick the wheel was at when the callback's timer came due.  After
 * a 5000-tick gap, a re-arm (case 0) or an insert (case 1) 10 ticks ahead
 * in COARSE mode must land in a gear chosen for a 10-tick delta (fired by
 * the next gear-1 boundary at the latest), not in gear 2 thousands of
 * ticks late.
 */
START_TEST(test_callback_arm_coarse_delta)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_COARSE, false);
	uint64_t now0 = L0 * T5 + 1, now1 = (L0 + 5000) * T5;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tracker tr;
	struct arm_at x = { .delta_ns = 10 * T5, .insert = _i };
	struct trk k;
	uint64_t t = L0 + 5010;

	trk_init(&tr, w, now0);
	x.k = &k;
	x.tr = &tr;
	tr.rec.on_fire = arm_at_fire;
	tr.rec.user = &x;
	ck_assert_int_eq(trk_insert(&tr, &x.self, (L0 + 1) * T5), 0);
	trk_poll(&tr, now1);
	ck_assert_uint_eq(tr.rec.nfired, 1);
	arm_at_settle(&x);
	if (_i)
		ck_assert_int_eq(x.rc, 0);
	for (uint64_t tick = L0 + 5001; bw_wheel_pending(w) > 0; tick++) {
		struct bw_poll_result res = trk_poll(&tr, tick * T5);

		if (res.fired) {
			ck_assert_msg(tick <= (t + 63) / 64 * 64,
				      "armed 10 ticks ahead from a callback, "
				      "fired %" PRIu64 " ticks late",
				      tick - t);
			break;
		}
		tu_check(tick < t + 64 * 64 * 64, "never fired");
	}
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * The same staleness must not shrink the range: after a 1000-tick gap, a
 * re-arm (case 0) or insert (case 1) exactly range_ns after the poll's
 * tick is within range on a plain EXACT wheel.
 */
START_TEST(test_callback_arm_full_range)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	uint64_t now0 = L0 * T5 + 1, now1 = (L0 + 1000) * T5;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tracker tr;
	struct arm_at x = { .insert = _i };
	struct trk k;
	struct bw_poll_result res;

	trk_init(&tr, w, now0);
	x.delta_ns = bw_wheel_range_ns(w);
	x.k = &k;
	x.tr = &tr;
	tr.rec.on_fire = arm_at_fire;
	tr.rec.user = &x;
	ck_assert_int_eq(trk_insert(&tr, &x.self, (L0 + 1) * T5), 0);
	tu_rec_clear(&tr.rec);
	res = tu_poll(w, now1, &tr.rec);
	ck_assert_uint_eq(res.fired, 1);
	if (_i) {
		ck_assert_msg(x.rc == 0, "insert from a callback at the edge "
			      "of the range: %d", x.rc);
	} else {
		ck_assert_msg(res.rearmed == 1 && tr.rec.ndropped == 0,
			      "re-arm at the edge of the range dropped "
			      "(reason %d)", tr.rec.ndropped ?
			      tr.rec.dropped[0].reason : 0);
	}
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/* ---- range ------------------------------------------------------------ */

/* range_ns is 63 * 64^(gears-1) ticks (62 * in coarse mode), the header's range. */
START_TEST(test_range_ns)
{
	unsigned gears = 1 + _i / 2;
	static const unsigned res[] = { 1, 5, 16, 60000 };

	for (unsigned r = 0; r < 4; r++) {
		struct bw_config cfg = tu_cfg(gears, res[r], 1, 1,
					      _i % 2 ? BW_COARSE : BW_EXACT,
					      false);
		struct bw_wheel *w = tu_wheel_new(&cfg, 0);

		uint64_t R = tu_range_ticks(gears, cfg.precision), T = tu_tick_ns(&cfg);
		/* Too long for u64 ns: saturate rather than wrap. */
		uint64_t want = R > UINT64_MAX / T ? UINT64_MAX : R * T;

		ck_assert_msg(bw_wheel_range_ns(w) == want,
			      "gears %u, %u ms, %s: range_ns %" PRIu64
			      ", want %" PRIu64, gears, res[r],
			      _i % 2 ? "coarse" : "exact",
			      bw_wheel_range_ns(w), want);
		bw_wheel_free(w);
	}
}
END_TEST

/* The edge is exact: delta == range ticks is accepted, one tick more is not. */
START_TEST(test_range_edge)
{
	unsigned gears = 1 + _i / 2;
	enum bw_precision prec = _i % 2 ? BW_COARSE : BW_EXACT;
	struct bw_config cfg = tu_cfg(gears, 5, 4, 2, prec, false);
	uint64_t R = tu_range_ticks(gears, cfg.precision);
	uint64_t now0 = L0 * T5 + 999;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tracker tr;
	struct trk k[6];
	struct bw_counters c;
	uint64_t L;

	trk_init(&tr, w, now0);
	ck_assert_int_eq(trk_insert(&tr, &k[0], (L0 + R) * T5), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[1], (L0 + R) * T5 + 1), BW_ERANGE);
	ck_assert_int_eq(trk_insert(&tr, &k[2], UINT64_MAX), BW_ERANGE);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.refused, 2);
	ck_assert_uint_eq(c.inserted, 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);

	/* The window moves with the wheel's tick. */
	trk_poll(&tr, (L0 + 5) * T5 + 3);
	L = L0 + 5;
	ck_assert_int_eq(trk_insert(&tr, &k[3], (L + R) * T5), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[4], (L + R) * T5 + 1), BW_ERANGE);
	tu_assert_healthy(w);

	trk_poll(&tr, (L0 + R) * T5 - 1);
	ck_assert_uint_eq(k[0].nfired, 0);
	trk_poll(&tr, (L0 + R) * T5);
	if (prec == BW_EXACT) {
		ck_assert_uint_eq(k[0].nfired, 1);
		trk_poll(&tr, (L + R) * T5 - 1);
		ck_assert_uint_eq(k[3].nfired, 0);
		trk_poll(&tr, (L + R) * T5);
		ck_assert_uint_eq(k[3].nfired, 1);
	} else {
		uint64_t span = tu_pow64(gears - 1);

		trk_poll(&tr, (L + R + span * cfg.max_probes) * T5);
		ck_assert_uint_eq(k[0].nfired, 1);
		ck_assert_uint_eq(k[3].nfired, 1);
	}
	ck_assert_uint_eq(k[1].nfired + k[2].nfired + k[4].nfired, 0);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * A failover wheel takes deadlines far beyond its range into the overflow
 * store and fires them on their exact tick, in both modes, whether polled
 * in strides or in one jump.
 */
START_TEST(test_failover_beyond_range)
{
	enum { N = 40 };
	enum bw_precision prec = _i % 2 ? BW_COARSE : BW_EXACT;
	struct bw_config cfg = tu_cfg(2, 5, 4, 2, prec, true);
	uint64_t R = tu_range_ticks(2, cfg.precision);
	uint64_t now0 = L0 * T5 + 5;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tracker tr;
	struct trk k[N];
	struct bw_counters c;
	struct tu_rng rng;
	uint64_t maxt = 0;

	tu_rng_seed(&rng, 5 + _i);
	trk_init(&tr, w, now0);
	for (unsigned i = 0; i < N; i++) {
		uint64_t dt = R + 1 + tu_rng_below(&rng, i < N / 2 ? 3 * R
								 : 1000 * R);
		ck_assert_int_eq(trk_insert(&tr, &k[i],
					    (L0 + dt) * T5 - tu_rng_below(&rng, T5)),
				 0);
		if (k[i].t > maxt)
			maxt = k[i].t;
	}
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.overflowed, N);
	ck_assert_uint_eq(c.refused, 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), N);
	ck_assert_uint_eq(bw_wheel_pending(w), N);
	tu_assert_healthy(w);

	if (_i / 2 == 0) {
		/* Strides of up to a third of the range, and a poll right
		 * before and on each deadline tick. */
		while (tr.last_now / T5 < maxt) {
			uint64_t next = UINT64_MAX;

			for (unsigned i = 0; i < N; i++)
				if (k[i].t > tr.last_now / T5 && k[i].t < next)
					next = k[i].t;
			while (tr.last_now / T5 + R / 3 < next)
				trk_poll(&tr, tr.last_now +
						      tu_rng_below(&rng, R / 3 * T5));
			trk_poll(&tr, next * T5 - 1);
			trk_poll(&tr, next * T5);
		}
		for (unsigned i = 0; i < N; i++) {
			ck_assert_uint_eq(k[i].nfired, 1);
			ck_assert_msg(k[i].fire_tick == k[i].t,
				      "overflow timer %u late by %" PRIu64, i,
				      k[i].fire_tick - k[i].t);
		}
	} else {
		trk_poll(&tr, maxt * T5 - 1);
		for (unsigned i = 0; i < N; i++)
			ck_assert_uint_eq(k[i].nfired, k[i].t < maxt);
		trk_poll(&tr, maxt * T5);
		for (unsigned i = 0; i < N; i++)
			ck_assert_uint_eq(k[i].nfired, 1);
	}
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 0);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

#define GAP 1000000000ull

/* A 10^9-tick gap over an empty wheel costs nothing, and the wheel is
 * exact afterwards. */
START_TEST(test_gap_empty)
{
	struct bw_config cfg;
	uint64_t now0 = L0 * T5 + 1;
	struct bw_wheel *w;
	struct tracker tr;
	struct trk k;
	uint64_t t0 = cpu_ms();

	ck_assert_int_eq(bw_config_preset(BW_PRESET_BALANCED, &cfg), 0);
	cfg.precision = _i ? BW_COARSE : BW_EXACT;
	w = tu_wheel_new(&cfg, now0);
	trk_init(&tr, w, now0);
	trk_poll(&tr, (L0 + GAP) * T5 + 17);
	trk_poll(&tr, (L0 + 2 * GAP) * T5 + 17);
	ck_assert_int_eq(trk_insert(&tr, &k, (L0 + 2 * GAP + 9) * T5), 0);
	trk_poll(&tr, (L0 + 2 * GAP + 9) * T5 - 1);
	ck_assert_uint_eq(k.nfired, 0);
	trk_poll(&tr, (L0 + 2 * GAP + 9) * T5);
	ck_assert_uint_eq(k.nfired, 1);
	/* Past the range of the previous position: still refused/accepted by
	 * the new tick. */
	ck_assert_int_eq(trk_insert(&tr, &k, (L0 + 2 * GAP + 9) * T5 +
					      bw_wheel_range_ns(w)),
			 0);
	ck_assert_msg(cpu_ms() - t0 < 500, "gap polls took %" PRIu64 " ms",
		      cpu_ms() - t0);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/* Failover: overflow timers near the end of a 10^9-tick gap, plus in-range
 * timers, each on its exact tick. */
START_TEST(test_gap_failover)
{
	struct bw_config cfg;
	uint64_t now0 = L0 * T5 + 1;
	struct bw_wheel *w;
	struct tracker tr;
	struct trk k[5];
	uint64_t end = L0 + GAP, R;
	uint64_t t0 = cpu_ms();

	ck_assert_int_eq(bw_config_preset(BW_PRESET_BALANCED, &cfg), 0);
	cfg.failover = true;
	cfg.precision = _i ? BW_COARSE : BW_EXACT;
	w = tu_wheel_new(&cfg, now0);
	/* The range itself is test_range_*'s business. */
	R = bw_wheel_range_ns(w) / T5;
	trk_init(&tr, w, now0);
	ck_assert_int_eq(trk_insert(&tr, &k[0], (L0 + 5) * T5), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[1], (L0 + R) * T5), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[2], (end - 2) * T5 - 3), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[3], end * T5), 0);
	ck_assert_int_eq(trk_insert(&tr, &k[4], (end + 3) * T5 - 1), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 3);

	trk_poll(&tr, (end - 2) * T5 - 1);
	ck_assert_uint_eq(k[0].nfired + k[1].nfired, 2);
	ck_assert_uint_eq(k[2].nfired + k[3].nfired + k[4].nfired, 0);
	trk_poll(&tr, (end - 2) * T5);
	ck_assert_uint_eq(k[2].nfired, 1);
	trk_poll(&tr, end * T5 - 1);
	ck_assert_uint_eq(k[3].nfired, 0);
	trk_poll(&tr, end * T5);
	ck_assert_uint_eq(k[3].nfired, 1);
	trk_poll(&tr, (end + 2) * T5 + T5 - 1);
	ck_assert_uint_eq(k[4].nfired, 0);
	trk_poll(&tr, (end + 3) * T5);
	ck_assert_uint_eq(k[4].nfired, 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	ck_assert_msg(cpu_ms() - t0 < 500, "gap polls took %" PRIu64 " ms",
		      cpu_ms() - t0);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * Eight gears reach past 10^9 ticks: EXACT timers at the end of the gap
 * fire on their ticks; COARSE ones on a legal boundary, found by polling
 * just before and on every candidate boundary.
 */
START_TEST(test_gap_gears8)
{
	enum bw_precision prec = _i ? BW_COARSE : BW_EXACT;
	struct bw_config cfg = tu_cfg(8, 5, 4, 4, prec, false);
	uint64_t now0 = L0 * T5 + 1;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tracker tr;
	struct trk k[3];
	uint64_t end = L0 + GAP;
	uint64_t t0 = cpu_ms();

	trk_init(&tr, w, now0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(trk_insert(&tr, &k[i], (end - 1 + i) * T5), 0);
	if (prec == BW_EXACT) {
		trk_poll(&tr, (end - 1) * T5 - 1);
		for (int i = 0; i < 3; i++) {
			ck_assert_uint_eq(k[i].nfired, 0);
			trk_poll(&tr, (end - 1 + i) * T5);
			ck_assert_uint_eq(k[i].nfired, 1);
		}
	} else {
		uint64_t cand[3 * 8];
		unsigned nc = 0;

		for (int i = 0; i < 3; i++)
			for (unsigned g = 0; g < 8; g++) {
				uint64_t span = tu_pow64(g);

				cand[nc++] = (k[i].t + span - 1) / span * span;
			}
		qsort(cand, nc, sizeof(cand[0]), cmp_u64);
		for (unsigned j = 0; j < nc; j++) {
			if (cand[j] <= tr.last_now / T5)
				continue;
			trk_poll(&tr, cand[j] * T5 - 1);
			trk_poll(&tr, cand[j] * T5);
		}
		for (int i = 0; i < 3; i++) {
			ck_assert_uint_eq(k[i].nfired, 1);
			ck_assert_msg(coarse_fire_ok(&k[i], 8),
				      "coarse timer %d: t=%" PRIu64 " fired at %"
				      PRIu64, i, k[i].t, k[i].fire_tick);
		}
	}
	ck_assert_msg(cpu_ms() - t0 < 500, "gap polls took %" PRIu64 " ms",
		      cpu_ms() - t0);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/* A now before the last poll (or before creation) is a no-op. */
START_TEST(test_time_backwards)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, _i == 1);
	uint64_t now0 = L0 * T5 + 100;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tu_rec rec;
	struct bw_callbacks cb;
	struct bw_poll_result res;
	int a, b, c;
	bw_handle h;
	uint64_t now1 = (L0 + 40) * T5 + 2000, R = tu_range_ticks(4, cfg.precision);

	tu_rec_init(&rec);
	cb = tu_rec_cb(&rec);
	ck_assert_int_eq(bw_wheel_insert(w, 0, &a, &h), 0);
	ck_assert_int_eq(bw_wheel_poll(w, now0 - T5, &cb, &res), 0);
	ck_assert_uint_eq(res.fired, 0);
	ck_assert_int_eq(bw_wheel_poll(w, 0, &cb, &res), 0);
	ck_assert_uint_eq(rec.nfired, 0);

	tu_poll(w, now1, &rec);
	ck_assert_uint_eq(rec.nfired, 1);
	tu_rec_clear(&rec);
	ck_assert_int_eq(bw_wheel_insert(w, 0, &b, &h), 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 41) * T5, &c, &h), 0);
	/* Backwards to an earlier tick, and to 0. */
	res = tu_poll(w, (L0 + 10) * T5, &rec);
	ck_assert_uint_eq(res.fired, 0);
	res = tu_poll(w, 0, &rec);
	ck_assert_uint_eq(res.fired, 0);
	ck_assert_uint_eq(rec.nfired, 0);
	tu_assert_healthy(w);

	/* The tick did not move back: the range still counts from L0+40. */
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 40 + R) * T5, &c, &h), 0);
	ck_assert_int_eq(bw_wheel_cancel(w, h, NULL), 0);
	if (!cfg.failover) {
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 40 + R) * T5 + 1, &c,
						 &h),
				 BW_ERANGE);
	}
	res = tu_poll(w, now1, &rec);
	ck_assert_uint_eq(res.fired, 1);
	ck_assert_ptr_eq(rec.fired[0].data, &b);
	res = tu_poll(w, (L0 + 41) * T5, &rec);
	ck_assert_uint_eq(res.fired, 1);
	tu_assert_healthy(w);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * Backwards by less than a tick is still backwards: the header makes any
 * now before the last poll's a no-op, so a due timer must wait for a poll
 * at or after the last now (and a callback never sees time go back).
 */
START_TEST(test_time_backwards_same_tick)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, _i % 2 ? BW_COARSE : BW_EXACT,
				      false);
	uint64_t now0 = L0 * T5 + 100, now1 = (L0 + 40) * T5 + 2000;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tu_rec rec;
	struct bw_poll_result res;
	int a;
	bw_handle h;

	tu_rec_init(&rec);
	ck_assert_int_eq(bw_wheel_insert(w, 0, &a, &h), 0);
	if (_i / 2 == 0) {
		/* Before the creation time, same tick. */
		res = tu_poll(w, now0 - 1, &rec);
		ck_assert_uint_eq(res.fired, 0);
		res = tu_poll(w, now0, &rec);
	} else {
		tu_poll(w, now1, &rec);
		ck_assert_int_eq(bw_wheel_insert(w, 0, &a, &h), 0);
		res = tu_poll(w, now1 - 1, &rec);
		ck_assert_uint_eq(res.fired, 0);
		res = tu_poll(w, now1, &rec);
	}
	ck_assert_uint_eq(res.fired, 1);
	for (size_t i = 0; i < rec.nfired; i++)
		ck_assert_uint_ge(rec.fired[i].now, _i / 2 ? now1 : now0);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/* ---- callbacks -------------------------------------------------------- */

START_TEST(test_fire_args_and_results)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct bw_poll_result res;
	struct bw_counters c;
	int x[3];
	bw_handle h;
	uint64_t now = (L0 + 3) * T5 + 42;

	tu_rec_init(&rec);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 1 + i) * T5, &x[i],
						 &h),
				 0);
	res = tu_poll(w, now, &rec);
	ck_assert_uint_eq(res.fired, 3);
	ck_assert_uint_eq(res.rearmed, 0);
	ck_assert_uint_eq(res.rearm_failed, 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(tu_rec_fired_count(&rec, &x[i]), 1);
		ck_assert_uint_eq(rec.fired[i].now, now);
	}
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.fired, 3);
	ck_assert_uint_eq(c.inserted, 3);
	/* res may be NULL. */
	ck_assert_int_eq(bw_wheel_insert(w, now, &x[0], &h), 0);
	{
		struct bw_callbacks cb = tu_rec_cb(&rec);

		ck_assert_int_eq(bw_wheel_poll(w, now + T5, &cb, NULL), 0);
	}
	ck_assert_uint_eq(rec.nfired, 4);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

struct periodic {
	uint64_t period;
	unsigned fires;
	unsigned max_fires;
	uint64_t last_now;
};

static uint64_t periodic_fire(struct tu_rec *rec, void *data, uint64_t now)
{
	struct periodic *p = data;

	(void)rec;
	p->fires++;
	p->last_now = now;
	return p->fires < p->max_fires ? now + p->period : 0;
}

/* A periodic timer re-arms under its handle and fires on each period's
 * tick; its deadline follows; cancel stops it. */
START_TEST(test_periodic_rearm)
{
	enum bw_precision prec = _i % 2 ? BW_COARSE : BW_EXACT;
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, prec, _i / 2);
	uint64_t now0 = L0 * T5 + 3;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tu_rec rec;
	struct periodic p = { .period = 7 * T5 + 3, .max_fires = 1000 };
	bw_handle h;
	uint64_t next = (L0 + 4) * T5, dl;
	struct bw_counters c;
	void *got;

	tu_rec_init(&rec);
	rec.on_fire = periodic_fire;
	ck_assert_int_eq(bw_wheel_insert(w, next, &p, &h), 0);
	for (uint64_t tick = L0 + 1; p.fires < 20; tick++) {
		unsigned before = p.fires;
		struct bw_poll_result res = tu_poll(w, tick * T5, &rec);

		if (tick < tu_ceil_tick(next, T5)) {
			ck_assert_uint_eq(p.fires, before);
			continue;
		}
		/* Gear 0 throughout: even COARSE is exact here. */
		ck_assert_msg(p.fires == before + 1,
			      "period %u: tick %" PRIu64 " want %" PRIu64,
			      before, tick, tu_ceil_tick(next, T5));
		ck_assert_uint_eq(res.rearmed, 1);
		ck_assert_uint_eq(res.rearm_failed, 0);
		next = p.last_now + p.period;
		ck_assert_int_eq(bw_wheel_deadline(w, h, &dl), 0);
		ck_assert_uint_eq(dl, next);
		ck_assert_uint_eq(bw_wheel_pending(w), 1);
		tu_assert_healthy(w);
	}
	ck_assert_int_eq(bw_wheel_cancel(w, h, &got), 0);
	ck_assert_ptr_eq(got, &p);
	tu_poll(w, next + 100 * T5, &rec);
	ck_assert_uint_eq(p.fires, 20);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.fired, 20);
	ck_assert_uint_eq(c.inserted, 1);
	ck_assert_uint_eq(c.cancelled, 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

static uint64_t rearm_past(struct tu_rec *rec, void *data, uint64_t now)
{
	(void)data;
	(void)now;
	/* 1 ns: long past, yet non-zero, so it is a re-arm. */
	return rec->nfired < 3 ? 1 : 0;
}

/* A re-arm into the past never fires in the poll that armed it. */
START_TEST(test_rearm_past_next_poll)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, _i ? BW_COARSE : BW_EXACT,
				      false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct bw_poll_result res;
	int x;
	bw_handle h;
	uint64_t now = (L0 + 2) * T5;

	tu_rec_init(&rec);
	rec.on_fire = rearm_past;
	ck_assert_int_eq(bw_wheel_insert(w, now, &x, &h), 0);
	for (unsigned i = 1; i <= 3; i++) {
		res = tu_poll(w, now, &rec);
		ck_assert_uint_eq(res.fired, 1);
		ck_assert_uint_eq(rec.nfired, i);
		ck_assert_uint_eq(res.rearmed, i < 3);
		ck_assert_uint_eq(bw_wheel_pending(w), i < 3);
		tu_assert_healthy(w);
	}
	res = tu_poll(w, now, &rec);
	ck_assert_uint_eq(res.fired, 0);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

struct cb_ctx {
	struct bw_wheel *w;
	struct tu_rec *rec;
	int mode;
	bw_handle self, other[4];
	int rc_self, rc_other[4], rc_poll;
	void *got_other[4];
	int inner[4];
	bw_handle inner_h[4];
};

static uint64_t ctx_fire(struct tu_rec *rec, void *data, uint64_t now)
{
	struct cb_ctx *x = rec->user;
	struct bw_callbacks cb = tu_rec_cb(rec);
	struct bw_poll_result res;

	(void)data;
	switch (x->mode) {
	case 0: /* insert from the callback: one past, one future */
		x->mode = -1;
		x->rc_other[0] = bw_wheel_insert(x->w, 0, &x->inner[0],
						 &x->inner_h[0]);
		x->rc_other[1] = bw_wheel_insert(x->w, now + 2 * T5,
						 &x->inner[1], &x->inner_h[1]);
		/* The start of the current tick: due already. */
		x->rc_other[2] = bw_wheel_insert(x->w, now - now % T5,
						 &x->inner[2], &x->inner_h[2]);
		break;
	case 1: /* cancel a later timer and self */
		x->mode = -1;
		x->rc_other[0] = bw_wheel_cancel(x->w, x->other[0],
						 &x->got_other[0]);
		x->rc_self = bw_wheel_cancel(x->w, x->self, NULL);
		break;
	case 2: /* whichever of two same-tick timers fires first cancels the
		 * other */
		x->mode = -1;
		x->rc_other[0] = bw_wheel_cancel(x->w, x->other[0],
						 &x->got_other[0]);
		x->rc_other[1] = bw_wheel_cancel(x->w, x->other[1],
						 &x->got_other[1]);
		break;
	case 3: /* poll from the callback */
		x->rc_poll = bw_wheel_poll(x->w, now + 100 * T5, &cb, &res);
		break;
	case 4: /* cancel self, then re-arm anyway */
		x->mode = -1;
		x->rc_self = bw_wheel_cancel(x->w, x->self, NULL);
		return now + 3 * T5;
	}
	return 0;
}

START_TEST(test_insert_from_callback)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, _i ? BW_COARSE : BW_EXACT,
				      false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct cb_ctx x = { .w = w, .mode = 0 };
	struct bw_poll_result res;
	int a;
	bw_handle h;
	uint64_t now = (L0 + 1) * T5 + 9;

	tu_rec_init(&rec);
	rec.on_fire = ctx_fire;
	rec.user = &x;
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 1) * T5, &a, &h), 0);
	res = tu_poll(w, now, &rec);
	ck_assert_uint_eq(res.fired, 1);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(x.rc_other[i], 0);
		ck_assert_uint_ne(x.inner_h[i], 0);
	}
	ck_assert_uint_eq(bw_wheel_pending(w), 3);
	tu_assert_healthy(w);
	/* The past ones fire at the next poll, even at the same now. */
	res = tu_poll(w, now, &rec);
	ck_assert_uint_eq(res.fired, 2);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &x.inner[0]), 1);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &x.inner[2]), 1);
	/* The future one is an ordinary, cancellable timer. */
	ck_assert_int_eq(bw_wheel_cancel(w, x.inner_h[1], NULL), 0);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_cancel_from_callback)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, _i == 1);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct cb_ctx x = { .w = w, .mode = 1 };
	struct bw_poll_result res;
	int a, b, c;
	bw_handle hc;

	tu_rec_init(&rec);
	rec.on_fire = ctx_fire;
	rec.user = &x;
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 1) * T5, &a, &x.self), 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 6) * T5, &b, &x.other[0]),
			 0);
	res = tu_poll(w, (L0 + 2) * T5, &rec);
	ck_assert_uint_eq(res.fired, 1);
	ck_assert_int_eq(x.rc_other[0], 0);
	ck_assert_ptr_eq(x.got_other[0], &b);
	ck_assert_int_eq(x.rc_self, BW_ENOTFOUND);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	tu_assert_healthy(w);

	/* Two timers due in the same poll: the first to fire cancels the
	 * other, which then must not fire. */
	tu_rec_clear(&rec);
	memset(&x, 0, sizeof(x));
	x.w = w;
	x.mode = 2;
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 5) * T5, &a, &x.other[1]),
			 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 5) * T5, &b, &x.other[0]),
			 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 50) * T5, &c, &hc), 0);
	res = tu_poll(w, (L0 + 5) * T5, &rec);
	ck_assert_uint_eq(res.fired, 1);
	ck_assert_uint_eq(rec.nfired, 1);
	if (rec.fired[0].data == &a) {
		ck_assert_int_eq(x.rc_other[0], 0);
		ck_assert_ptr_eq(x.got_other[0], &b);
		ck_assert_int_eq(x.rc_other[1], BW_ENOTFOUND);
	} else {
		ck_assert_ptr_eq(rec.fired[0].data, &b);
		ck_assert_int_eq(x.rc_other[1], 0);
		ck_assert_ptr_eq(x.got_other[1], &a);
		ck_assert_int_eq(x.rc_other[0], BW_ENOTFOUND);
	}
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	res = tu_poll(w, (L0 + 60) * T5, &rec);
	ck_assert_uint_eq(res.fired, 1);
	ck_assert_ptr_eq(rec.fired[1].data, &c);
	tu_assert_healthy(w);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_cancel_self_then_rearm)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct cb_ctx x = { .w = w, .mode = 4 };
	struct bw_poll_result res;
	int a;

	tu_rec_init(&rec);
	rec.on_fire = ctx_fire;
	rec.user = &x;
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 1) * T5, &a, &x.self), 0);
	res = tu_poll(w, (L0 + 1) * T5, &rec);
	ck_assert_int_eq(x.rc_self, BW_ENOTFOUND);
	ck_assert_uint_eq(res.rearmed, 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	res = tu_poll(w, (L0 + 4) * T5 - 1, &rec);
	ck_assert_uint_eq(res.fired, 0);
	res = tu_poll(w, (L0 + 4) * T5, &rec);
	ck_assert_uint_eq(res.fired, 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	ck_assert_int_eq(bw_wheel_cancel(w, x.self, NULL), BW_ENOTFOUND);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_poll_from_callback)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct cb_ctx x = { .w = w, .mode = 3, .rc_poll = 1 };
	struct bw_poll_result res;
	int a[3];
	bw_handle h;

	tu_rec_init(&rec);
	rec.on_fire = ctx_fire;
	rec.user = &x;
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 1 + i) * T5, &a[i],
						 &h),
				 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 50) * T5, &a[0], &h), 0);
	res = tu_poll(w, (L0 + 3) * T5, &rec);
	ck_assert_int_eq(x.rc_poll, BW_EINPOLL);
	ck_assert_uint_eq(res.fired, 3);
	/* The refused inner poll did not advance time to L0+103. */
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	tu_assert_healthy(w);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

struct rearm_to {
	uint64_t deadline;
};

static uint64_t rearm_to_fire(struct tu_rec *rec, void *data, uint64_t now)
{
	struct rearm_to *r = data;
	uint64_t d = r->deadline;

	(void)rec;
	(void)now;
	r->deadline = 0;
	return d;
}

/*
 * Re-arms that cannot be placed on a plain wheel go to drop with the
 * reason (a full slot, or beyond range); the handle dies; the counters and
 * the poll result say so.  A NULL drop is allowed.
 */
START_TEST(test_rearm_failures)
{
	bool full = _i % 2 == 0, null_drop = _i / 2;
	struct bw_config cfg = tu_cfg(1, 5, 1, 1, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct bw_callbacks cb;
	struct bw_poll_result res;
	struct bw_counters c;
	struct rearm_to x = { 0 }, y = { 0 };
	bw_handle hx, hy;

	tu_rec_init(&rec);
	rec.on_fire = rearm_to_fire;
	cb = tu_rec_cb(&rec);
	if (null_drop)
		cb.drop = NULL;
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 1) * T5, &x, &hx), 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 10) * T5, &y, &hy), 0);
	x.deadline = full ? (L0 + 10) * T5 : (L0 + 1 + 64) * T5;
	ck_assert_int_eq(bw_wheel_poll(w, (L0 + 1) * T5, &cb, &res), 0);
	ck_assert_uint_eq(res.fired, 1);
	ck_assert_uint_eq(res.rearmed, 0);
	ck_assert_uint_eq(res.rearm_failed, 1);
	if (!null_drop) {
		ck_assert_uint_eq(rec.ndropped, 1);
		ck_assert_ptr_eq(rec.dropped[0].data, &x);
		ck_assert_int_eq(rec.dropped[0].reason,
				 full ? BW_EFULL : BW_ERANGE);
	}
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.lost, 1);
	ck_assert_uint_eq(c.fired, 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	ck_assert_int_eq(bw_wheel_cancel(w, hx, NULL), BW_ENOTFOUND);
	tu_assert_healthy(w);
	ck_assert_int_eq(bw_wheel_poll(w, (L0 + 200) * T5, &cb, &res), 0);
	ck_assert_uint_eq(res.fired, 1);
	ck_assert_uint_eq(rec.nfired, 2);
	ck_assert_ptr_eq(rec.fired[1].data, &y);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/* The same re-arms on a failover wheel are kept and fire on time. */
START_TEST(test_rearm_failover_keeps)
{
	struct bw_config cfg = tu_cfg(1, 5, 1, 1, BW_EXACT, true);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tracker tr;
	struct rearm_to x = { 0 }, y = { 0 };
	bw_handle hx, hy;
	struct bw_poll_result res;
	struct bw_counters c;
	uint64_t dl;

	trk_init(&tr, w, L0 * T5);
	tr.rec.on_fire = rearm_to_fire;
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 1) * T5, &x, &hx), 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 10) * T5, &y, &hy), 0);
	x.deadline = (L0 + 10) * T5;
	tu_rec_clear(&tr.rec);
	res = tu_poll(w, (L0 + 1) * T5, &tr.rec);
	ck_assert_uint_eq(res.rearmed, 1);
	ck_assert_uint_eq(res.rearm_failed, 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 1);
	ck_assert_int_eq(bw_wheel_deadline(w, hx, &dl), 0);
	ck_assert_uint_eq(dl, (L0 + 10) * T5);
	x.deadline = (L0 + 10 + 500) * T5 + 1; /* beyond range */
	res = tu_poll(w, (L0 + 10) * T5 - 1, &tr.rec);
	ck_assert_uint_eq(res.fired, 0);
	res = tu_poll(w, (L0 + 10) * T5, &tr.rec);
	ck_assert_uint_eq(res.fired, 2);
	ck_assert_uint_eq(res.rearmed, 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	res = tu_poll(w, (L0 + 511) * T5 - 1, &tr.rec);
	ck_assert_uint_eq(res.fired, 0);
	res = tu_poll(w, (L0 + 511) * T5, &tr.rec);
	ck_assert_uint_eq(res.fired, 1);
	ck_assert_ptr_eq(tr.rec.fired[3].data, &x);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.lost, 0);
	ck_assert_uint_ge(c.overflowed, 2);
	ck_assert_uint_eq(tr.rec.ndropped, 0);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * EXACT re-slot into a full ring slot: a 3-gear wheel with one timer per
 * slot and no probing.  A gear-2 timer's slot comes due while a filler,
 * inserted later straight into the ring, holds the ring slot of its tick.
 * An accepted timer is never dropped: it still fires on its tick, over
 * capacity in its home slot (counted as overfilled, plain or failover: a
 * re-slot never overflows), after the filler.  Offsets in the gear-2 slot
 * vary.
 */
START_TEST(test_reslot_into_full_gear)
{
	bool fo = _i;
	static const unsigned offs[] = { 5, 2000, 3990 };

	for (unsigned o = 0; o < 3; o++) {
		struct bw_config cfg = tu_cfg(3, 5, 1, 1, BW_EXACT, fo);
		uint64_t L = 4096 * 100;
		struct bw_wheel *w = tu_wheel_new(&cfg, L * T5 + 5);
		struct tu_rec rec;
		int a, fill;
		bw_handle ha, hf;
		/* a's gear-2 slot comes due at L + 8192, 4000 ticks or less
		 * before t: the filler, 4000 ahead, is in the ring by then. */
		uint64_t t = L + 8192 + offs[o];
		struct bw_counters c0, c;

		tu_rec_init(&rec);
		ck_assert_int_eq(bw_wheel_insert(w, t * T5 - 2, &a, &ha), 0);
		tu_poll(w, (t - 4000) * T5, &rec);
		ck_assert_int_eq(bw_wheel_insert(w, t * T5, &fill, &hf), 0);
		bw_wheel_counters(w, &c0);
		for (uint64_t cur = t - 3999; cur <= t; cur++) {
			/* Not before its tick... */
			ck_assert_uint_eq(tu_rec_fired_count(&rec, &a), 0);
			tu_poll(w, cur * T5, &rec);
			ck_assert_uint_eq(rec.ndropped, 0);
			if (cur % 512 == 0 || cur + 1 >= L + 8192)
				tu_assert_healthy(w);
		}
		/* ...and on it, after the filler that took its slot. */
		ck_assert_uint_eq(tu_rec_fired_count(&rec, &a), 1);
		ck_assert_uint_eq(rec.nfired, 2);
		ck_assert_ptr_eq(rec.fired[0].data, &fill);
		ck_assert_int_eq(bw_wheel_cancel(w, ha, NULL), BW_ENOTFOUND);
		bw_wheel_counters(w, &c);
		ck_assert_uint_eq(c.lost, 0);
		ck_assert_uint_eq(c.overflowed, c0.overflowed);
		ck_assert_uint_eq(c.reslotted - c0.reslotted, 1);
		ck_assert_uint_eq(c.overfilled - c0.overfilled, 1);
		ck_assert_uint_eq(bw_wheel_pending(w), 0);
		tu_rec_free(&rec);
		bw_wheel_free(w);
	}
}
END_TEST

/* Thousands of timers due over a stretch all fire in one jump. */
START_TEST(test_big_batch)
{
	enum { N = 5000 };
	/* ~107 timers per 64-tick gear-1 slot: room for all. */
	struct bw_config cfg = tu_cfg(4, 5, 256, 8, _i ? BW_COARSE : BW_EXACT,
				      false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct tu_rng rng;
	struct bw_poll_result res;
	unsigned *seen = calloc(N, sizeof(*seen));
	bw_handle h;

	tu_rng_seed(&rng, 3);
	tu_rec_init(&rec);
	for (unsigned i = 0; i < N; i++)
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 1 + tu_rng_below(&rng, 3000)) * T5,
						 tag(i), &h),
				 0);
	res = tu_poll(w, (L0 + 3000 + 64 * 64 * 8) * T5, &rec);
	ck_assert_uint_eq(res.fired, N);
	for (size_t f = 0; f < rec.nfired; f++)
		seen[untag(rec.fired[f].data)]++;
	for (unsigned i = 0; i < N; i++)
		ck_assert_uint_eq(seen[i], 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	tu_assert_healthy(w);
	free(seen);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_null_arguments)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct bw_callbacks cb;
	int a;
	bw_handle h;
	uint64_t out;

	tu_rec_init(&rec);
	cb = tu_rec_cb(&rec);
	ck_assert_int_eq(bw_wheel_insert(NULL, 0, &a, &h), BW_EINVAL);
	ck_assert_int_eq(bw_wheel_cancel(NULL, 1, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_wheel_poll(NULL, 0, &cb, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_wheel_insert(w, L0 * T5 + T5, &a, &h), 0);
	ck_assert_int_eq(bw_wheel_poll(w, L0 * T5 + T5, NULL, NULL), BW_EINVAL);
	cb.fire = NULL;
	ck_assert_int_eq(bw_wheel_poll(w, L0 * T5 + T5, &cb, NULL), BW_EINVAL);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	ck_assert_int_eq(bw_wheel_next_deadline(w, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_wheel_next_deadline(NULL, &out), BW_EINVAL);
	ck_assert_int_eq(bw_wheel_until_next(w, 0, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_wheel_deadline(w, h, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_wheel_foreach(w, NULL, NULL), BW_EINVAL);
	bw_wheel_free(NULL);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/* ---- introspection ---------------------------------------------------- */

/*
 * next_deadline is never later than the earliest fire time, a poll before
 * it does nothing, and sleeping until it reaches every timer's exact tick
 * in a handful of wakeups, not one per tick.
 */
START_TEST(test_next_deadline_loop)
{
	enum bw_precision prec = _i % 2 ? BW_COARSE : BW_EXACT;
	bool fo = _i / 2;
	struct bw_config cfg = tu_cfg(4, 5, 64, 8, prec, fo);
	uint64_t now0 = L0 * T5 + 11;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct tracker tr;
	struct trk k[7];
	uint64_t nd, until;
	uint64_t dts[] = { 1, 63, 64, 5000, 300000, 720000, 0 };
	unsigned wakeups = 0;

	dts[6] = bw_wheel_range_ns(w) / T5;
	trk_init(&tr, w, now0);
	ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), BW_EEMPTY);
	ck_assert_int_eq(bw_wheel_until_next(w, now0, &until), BW_EEMPTY);
	for (unsigned i = 0; i < 7; i++)
		ck_assert_int_eq(trk_insert(&tr, &k[i],
					    (L0 + dts[i]) * T5 - 5 * i),
				 0);
	while (bw_wheel_pending(w) > 0) {
		uint64_t earliest = UINT64_MAX;
		unsigned before = 0, after = 0;

		for (unsigned i = 0; i < 7; i++) {
			before += k[i].nfired;
			if (!k[i].nfired && k[i].t * T5 < earliest)
				earliest = k[i].t * T5;
		}
		ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), 0);
		if (prec == BW_EXACT)
			ck_assert_msg(nd <= earliest, "next %" PRIu64
				      " after earliest fire %" PRIu64, nd,
				      earliest);
		ck_assert_int_eq(bw_wheel_until_next(w, tr.last_now, &until), 0);
		ck_assert_uint_eq(until, nd > tr.last_now ? nd - tr.last_now : 0);
		ck_assert_int_eq(bw_wheel_until_next(w, nd + 5, &until), 0);
		ck_assert_uint_eq(until, 0);
		if (nd > tr.last_now) {
			struct bw_poll_result res = trk_poll(&tr, nd - 1);

			ck_assert_uint_eq(res.fired, 0);
		}
		trk_poll(&tr, nd > tr.last_now ? nd : tr.last_now);
		for (unsigned i = 0; i < 7; i++)
			after += k[i].nfired;
		wakeups++;
		ck_assert_msg(wakeups < 7 * 16, "%u wakeups for 7 timers",
			      wakeups);
		(void)before;
		(void)after;
	}
	for (unsigned i = 0; i < 7; i++) {
		ck_assert_uint_eq(k[i].nfired, 1);
		if (prec == BW_EXACT)
			ck_assert_uint_eq(k[i].fire_tick, k[i].t);
		else
			ck_assert(coarse_fire_ok(&k[i], 4));
	}
	ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), BW_EEMPTY);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/* Past-due timers make the next deadline no later than the last poll. */
START_TEST(test_next_deadline_past_due)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	uint64_t now1 = (L0 + 9) * T5 + 123;
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	int a;
	bw_handle h;
	uint64_t nd, until;

	tu_rec_init(&rec);
	tu_poll(w, now1, &rec);
	ck_assert_int_eq(bw_wheel_insert(w, 7, &a, &h), 0);
	ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), 0);
	ck_assert_uint_le(nd, now1);
	ck_assert_int_eq(bw_wheel_until_next(w, now1, &until), 0);
	ck_assert_uint_eq(until, 0);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_deadline_and_counts)
{
	struct bw_config cfg = tu_cfg(2, 5, 1, 2, BW_EXACT, true);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	bw_handle h[6];
	uint64_t dl;
	struct bw_counters c;
	int x[6];
	uint64_t R = tu_range_ticks(2, cfg.precision);

	tu_rec_init(&rec);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 0);
	/* 2 fit at L0+3 (home and one probe); the third overflows. */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 3) * T5 - i, &x[i],
						 &h[i]),
				 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + R + 9) * T5, &x[3], &h[3]),
			 0);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 100) * T5 + 1, &x[4], &h[4]),
			 0);
	ck_assert_uint_eq(bw_wheel_pending(w), 5);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 2);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(bw_wheel_deadline(w, h[i], &dl), 0);
		ck_assert_uint_eq(dl, (L0 + 3) * T5 - i);
	}
	ck_assert_int_eq(bw_wheel_deadline(w, h[3], &dl), 0);
	ck_assert_uint_eq(dl, (L0 + R + 9) * T5);
	ck_assert_int_eq(bw_wheel_cancel(w, h[3], NULL), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 1);
	tu_poll(w, (L0 + 3) * T5, &rec);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.inserted, 5);
	ck_assert_uint_eq(c.cancelled, 1);
	ck_assert_uint_eq(c.probed, 1);
	ck_assert_uint_eq(c.overflowed, 2);
	ck_assert_uint_eq(c.refused, 0);
	ck_assert_uint_eq(c.lost, 0);
	/* Home slot and overflow fire on the tick; the probed one a tick on. */
	ck_assert_uint_eq(c.fired, 2);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 0);
	tu_poll(w, (L0 + 4) * T5, &rec);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.fired, 3);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	ck_assert_int_eq(bw_wheel_deadline(w, h[0], &dl), BW_ENOTFOUND);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_config_roundtrip)
{
	struct bw_config cfg = tu_cfg(3, 7, 9, 5, BW_COARSE, true);
	struct bw_wheel *w = tu_wheel_new(&cfg, 0);
	const struct bw_config *got = bw_wheel_config(w);

	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(got->gears, 3);
	ck_assert_uint_eq(got->resolution_ms, 7);
	ck_assert_uint_eq(got->slot_cap, 9);
	ck_assert_uint_eq(got->max_probes, 5);
	ck_assert_int_eq(got->precision, BW_COARSE);
	ck_assert(got->failover);
	bw_wheel_free(w);
}
END_TEST

struct visit_log {
	size_t n;
	bw_handle h[600];
	uint64_t d[600];
	void *data[600];
};

static void log_visit(bw_handle h, uint64_t d, void *data, void *ctx)
{
	struct visit_log *v = ctx;

	ck_assert_uint_lt(v->n, 600);
	v->h[v->n] = h;
	v->d[v->n] = d;
	v->data[v->n] = data;
	v->n++;
}

/* foreach sees every pending timer (overflow included) and changes nothing;
 * drain sees and removes them all, killing their handles. */
START_TEST(test_foreach_and_drain)
{
	enum { N = 500 };
	struct bw_config cfg = tu_cfg(2, 5, 2, 2, _i % 2 ? BW_COARSE : BW_EXACT,
				      _i / 2);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rng rng;
	struct tu_rec rec;
	static struct visit_log v;
	bw_handle h[N];
	uint64_t d[N];
	int ok[N];
	unsigned nok = 0, *seen = calloc(N, sizeof(unsigned));
	struct bw_counters c0, c1;
	uint64_t R = tu_range_ticks(2, cfg.precision);

	tu_rng_seed(&rng, 11 + _i);
	tu_rec_init(&rec);
	for (unsigned i = 0; i < N; i++) {
		d[i] = (L0 + tu_rng_below(&rng, R + R / 4)) * T5 + i;
		ok[i] = bw_wheel_insert(w, d[i], tag(i), &h[i]) == 0;
		nok += ok[i];
	}
	ck_assert_uint_eq(bw_wheel_pending(w), nok);
	if (cfg.failover)
		ck_assert_uint_eq(nok, N);
	for (unsigned i = 0; i < N; i += 7)
		if (ok[i]) {
			ck_assert_int_eq(bw_wheel_cancel(w, h[i], NULL), 0);
			ok[i] = 0;
			nok--;
		}

	for (int pass = 0; pass < 2; pass++) {
		v.n = 0;
		memset(seen, 0, N * sizeof(unsigned));
		ck_assert_int_eq(bw_wheel_foreach(w, log_visit, &v), 0);
		ck_assert_uint_eq(v.n, nok);
		for (size_t j = 0; j < v.n; j++) {
			uintptr_t i = untag(v.data[j]);

			ck_assert_uint_lt(i, N);
			ck_assert(ok[i]);
			ck_assert_uint_eq(v.h[j], h[i]);
			ck_assert_uint_eq(v.d[j], d[i]);
			seen[i]++;
		}
		for (unsigned i = 0; i < N; i++)
			ck_assert_uint_eq(seen[i], ok[i] ? 1 : 0);
		ck_assert_uint_eq(bw_wheel_pending(w), nok);
		tu_assert_healthy(w);
	}

	bw_wheel_counters(w, &c0);
	v.n = 0;
	ck_assert_int_eq(bw_wheel_drain(w, log_visit, &v), 0);
	ck_assert_uint_eq(v.n, nok);
	memset(seen, 0, N * sizeof(unsigned));
	for (size_t j = 0; j < v.n; j++) {
		uintptr_t i = untag(v.data[j]);

		ck_assert(ok[i]);
		ck_assert_uint_eq(v.h[j], h[i]);
		ck_assert_uint_eq(v.d[j], d[i]);
		seen[i]++;
	}
	for (unsigned i = 0; i < N; i++)
		ck_assert_uint_eq(seen[i], ok[i] ? 1 : 0);
	bw_wheel_counters(w, &c1);
	ck_assert(memcmp(&c0, &c1, sizeof(c0)) == 0);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 0);
	tu_assert_healthy(w);
	for (unsigned i = 0; i < N; i++)
		if (ok[i])
			ck_assert_int_eq(bw_wheel_cancel(w, h[i], NULL),
					 BW_ENOTFOUND);
	{
		uint64_t nd;

		ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), BW_EEMPTY);
	}
	tu_poll(w, (L0 + 10 * R) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 0);
	/* Still a working wheel. */
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 10 * R + 2) * T5, tag(0),
					 &h[0]),
			 0);
	tu_poll(w, (L0 + 10 * R + 2) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 1);
	tu_assert_healthy(w);
	free(seen);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/* ---- failover --------------------------------------------------------- */

struct order_item {
	uint64_t d;
	unsigned seq;
};

static int cmp_order(const void *a, const void *b)
{
	const struct order_item *x = a, *y = b;

	if (x->d != y->d)
		return x->d < y->d ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Overflow timers fire in deadline order, FIFO among equal deadlines: all
 * beyond range (case 0) or pushed out of full in-range slots (case 1).
 */
START_TEST(test_overflow_order)
{
	enum { N = 300 };
	struct bw_config cfg = tu_cfg(1, 5, 1, 1, BW_EXACT, true);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rng rng;
	struct tu_rec rec;
	struct order_item want[N];
	unsigned nover = 0, pos = 0;
	uint64_t pool[16];
	bw_handle h;
	int *inwheel = calloc(N, sizeof(int));

	tu_rng_seed(&rng, 21 + _i);
	tu_rec_init(&rec);
	for (int i = 0; i < 16; i++)
		pool[i] = (_i == 0 ? L0 + 64 + tu_rng_below(&rng, 50)
				   : L0 + 1 + tu_rng_below(&rng, 20)) * T5 -
			  tu_rng_below(&rng, 3) * 1000;
	for (unsigned i = 0; i < N; i++) {
		uint64_t d = pool[tu_rng_below(&rng, 16)];
		size_t before = bw_wheel_overflow_pending(w);

		ck_assert_int_eq(bw_wheel_insert(w, d, tag(i), &h), 0);
		if (bw_wheel_overflow_pending(w) == before) {
			inwheel[i] = 1;
			continue;
		}
		want[nover].d = d;
		want[nover].seq = i;
		nover++;
	}
	if (_i == 0)
		ck_assert_uint_eq(nover, N);
	else
		ck_assert_uint_gt(nover, N / 2);
	qsort(want, nover, sizeof(want[0]), cmp_order);
	tu_poll(w, (L0 + 200) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, N);
	for (size_t f = 0; f < rec.nfired; f++) {
		unsigned i = (unsigned)untag(rec.fired[f].data);

		if (inwheel[i])
			continue;
		ck_assert_msg(want[pos].seq == i,
			      "overflow fire %u: got timer %u, want timer %u "
			      "(deadline %" PRIu64 ")",
			      pos, i, want[pos].seq, want[pos].d);
		pos++;
	}
	ck_assert_uint_eq(pos, nover);
	free(inwheel);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_overflow_cancel)
{
	struct bw_config cfg = tu_cfg(1, 5, 1, 1, BW_EXACT, true);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	bw_handle h[10];
	void *got;
	struct bw_counters c;

	tu_rec_init(&rec);
	for (unsigned i = 0; i < 10; i++)
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 5) * T5, tag(i), &h[i]),
				 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 9);
	for (unsigned i = 1; i < 10; i += 2) {
		ck_assert_int_eq(bw_wheel_cancel(w, h[i], &got), 0);
		ck_assert_uint_eq(untag(got), i);
		ck_assert_int_eq(bw_wheel_cancel(w, h[i], &got), BW_ENOTFOUND);
	}
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 4);
	ck_assert_uint_eq(bw_wheel_pending(w), 5);
	tu_assert_healthy(w);
	tu_poll(w, (L0 + 5) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 5);
	for (unsigned i = 0; i < 10; i++)
		ck_assert_uint_eq(tu_rec_fired_count(&rec, tag(i)), i % 2 == 0);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.cancelled, 5);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * A failover wheel never refuses: 20000 timers at one deadline are all
 * taken; the overflow ones fire on the tick, the rest within the probe
 * window; in COARSE mode too, at a gear-2 distance.
 */
START_TEST(test_failover_never_refuses)
{
	enum { N = 20000 };
	enum bw_precision prec = _i ? BW_COARSE : BW_EXACT;
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, prec, true);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5 + 1);
	struct tracker tr;
	struct trk *k = calloc(N, sizeof(*k));
	uint64_t t = L0 + 5000, bound;
	struct bw_counters c;

	trk_init(&tr, w, L0 * T5 + 1);
	for (unsigned i = 0; i < N; i++)
		ck_assert_int_eq(trk_insert(&tr, &k[i], t * T5), 0);
	bw_wheel_counters(w, &c);
	/* How many a coarse hot slot holds is not the point here. */
	ck_assert_uint_eq(c.overflowed, bw_wheel_overflow_pending(w));
	ck_assert_uint_le(N - c.overflowed, 16 * 8);
	ck_assert_uint_ge(N - c.overflowed, 16);
	ck_assert_uint_eq(bw_wheel_pending(w), N);
	bound = prec == BW_EXACT ? 7 : tu_pow64(tu_log64(5000) + 1) * 8;
	for (uint64_t tick = L0 + 1; tick <= t + bound &&
				     bw_wheel_pending(w) > 0; tick++)
		trk_poll(&tr, tick * T5);
	ck_assert_uint_eq(tr.rec.ndropped, 0);
	for (unsigned i = 0; i < N; i++) {
		ck_assert_uint_eq(k[i].nfired, 1);
		ck_assert_uint_le(k[i].fire_tick, t + bound);
		if (i >= N - c.overflowed)
			ck_assert_msg(k[i].fire_tick == t,
				      "overflow timer late by %" PRIu64,
				      k[i].fire_tick - t);
	}
	free(k);
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * bw_wheel_try_insert on a failover wheel: what the slots refuse is
 * refused (BW_EFULL, BW_ERANGE beyond the range) and leaves no trace - the
 * heap empty, the pending count and the invariants as before - while
 * bw_wheel_insert of the same deadline still overflows; a timer it
 * accepted fires on its tick like any other.  Both precisions.
 */
START_TEST(test_try_insert_refuses)
{
	enum bw_precision prec = _i ? BW_COARSE : BW_EXACT;
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, prec, true);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5 + 1);
	struct tracker tr;
	struct trk k[16 * 8 + 1], far;
	uint64_t t = L0 + 100;
	unsigned placed = 0;
	const char *why;
	bw_handle h;

	trk_init(&tr, w, L0 * T5 + 1);
	for (; placed < sizeof(k) / sizeof(k[0]); placed++) {
		int err = trk_insert_by(&tr, &k[placed], t * T5, bw_wheel_try_insert);

		if (err) {
			ck_assert_int_eq(err, BW_EFULL);
			break;
		}
	}
	ck_assert_uint_eq(placed, 16 * 8);
	ck_assert_uint_eq(bw_wheel_pending(w), placed);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 0);
	ck_assert_int_eq(bw_wheel_check(w, &why), 0);
	ck_assert_int_eq(trk_insert_by(&tr, &far, L0 * T5 + bw_wheel_range_ns(w) * 2,
				       bw_wheel_try_insert), BW_ERANGE);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 0);
	ck_assert_int_eq(bw_wheel_insert(w, t * T5, &k[placed], &h), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 1);
	ck_assert_int_eq(bw_wheel_cancel(w, h, NULL), 0);
	ck_assert_int_eq(bw_wheel_check(w, &why), 0);
	for (uint64_t tick = L0 + 1; tick <= t + 8 * 64 && bw_wheel_pending(w); tick++)
		trk_poll(&tr, tick * T5);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	for (unsigned i = 0; i < placed; i++) {
		ck_assert_uint_eq(k[i].nfired, 1);
		ck_assert_uint_ge(k[i].fire_tick, t);
	}
	tu_rec_free(&tr.rec);
	bw_wheel_free(w);
}
END_TEST

/* What test_poll_limit's callback sees. */
struct limit_seen {
	uint64_t d, fired, early; /* timer i's deadline is d - i % T5      */
	unsigned char *seen;    /* by timer: fires                         */
};

static uint64_t limit_fire(void *data, uint64_t now, void *ctx)
{
	struct limit_seen *ls = ctx;
	size_t i = (size_t)(uintptr_t)data - 1;

	ls->fired++;
	ls->early += ls->d - i % T5 > now;
	ls->seen[i]++;
	return 0;
}

/*
 * A burst the slots refuse lands in the overflow heap; with a poll limit
 * of 100 each poll takes at most 100 of it (plus what the slots hold:
 * cap 16 x 8 probes), next_deadline says "due" until the last is gone,
 * a cancelled one never fires, nothing fires twice or early, and the
 * wheel's invariants hold after every poll.  Without a limit one poll
 * takes them all.
 */
START_TEST(test_poll_limit)
{
	enum { N = 10000, LIMIT = 100, SLOTS = 16 * 8 };
	size_t limit = _i ? LIMIT : 0;
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, true);
	uint64_t now0 = L0 * T5, d = (L0 + 10) * T5, now = d + 100 * T5;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct limit_seen ls = { d, 0, 0, calloc(N, 1) };
	struct bw_callbacks cb = { .fire = limit_fire, .ctx = &ls };
	bw_handle h[N];
	unsigned polls = 0;
	uint64_t nd;

	ck_assert_int_eq(bw_wheel_set_poll_limit(w, limit), 0);
	for (size_t i = 0; i < N; i++)
		ck_assert_int_eq(bw_wheel_insert(w, d - i % T5,
						 (void *)(uintptr_t)(i + 1), &h[i]), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), N - SLOTS);
	while (bw_wheel_pending(w) > 0) {
		uint64_t before = ls.fired;
		struct bw_poll_result res;

		ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), 0);
		ck_assert_uint_le(nd, now);
		ck_assert_int_eq(bw_wheel_poll(w, now, &cb, &res), 0);
		ck_assert_uint_eq(res.fired, ls.fired - before);
		if (limit)
			ck_assert_uint_le(res.fired, LIMIT + SLOTS);
		tu_assert_healthy(w);
		/* Mid-backlog, a cancel still takes a timer out: the
		 * heap's last (the latest deadline the slots refused). */
		if (++polls == 3) {
			ck_assert_int_eq(bw_wheel_cancel(w, h[SLOTS], NULL), 0);
			ls.seen[SLOTS] = 1;
			ls.fired++;
			tu_assert_healthy(w);
		}
		ck_assert_uint_le(polls, N / (limit ? LIMIT : N) + 2);
	}
	ck_assert_uint_eq(ls.fired, N);
	ck_assert_uint_eq(ls.early, 0);
	for (size_t i = 0; i < N; i++)
		ck_assert_msg(ls.seen[i] == 1, "timer %zu fired %u times", i,
			      ls.seen[i]);
	if (limit)
		ck_assert_uint_ge(polls, (N - SLOTS) / LIMIT);
	else
		ck_assert_uint_le(polls, 1);
	ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), BW_EEMPTY);
	free(ls.seen);
	bw_wheel_free(w);
}
END_TEST

/*
 * The poll that ends a backlog leaves a heap timer X at tick e earlier
 * than every slot's event (the slots that refused it emptied since): the
 * next-event cache, which counted the slots alone during the backlog,
 * must count X again, so that a poll reaching e fires it (and a poll
 * before e, which trusts the cache's lower bound, does not).
 */
START_TEST(test_backlog_end_keeps_heap_next)
{
	enum { N = 1000, CAP = 16, PROBES = 8, LIMIT = 100 };
	struct bw_config cfg = tu_cfg(4, 5, CAP, PROBES, BW_EXACT, true);
	uint64_t d = L0 + 10, e = d + 20, nd;
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct tu_rec rec;
	struct bw_callbacks cb;
	bw_handle fill[CAP * PROBES], x, h;
	unsigned polls = 0;

	tu_rec_init(&rec);
	cb = tu_rec_cb(&rec);
	ck_assert_int_eq(bw_wheel_set_poll_limit(w, LIMIT), 0);
	for (unsigned i = 0; i < N; i++)
		ck_assert_int_eq(bw_wheel_insert(w, d * T5, NULL, &h), 0);
	for (unsigned i = 0; i < CAP * PROBES; i++)
		ck_assert_int_eq(bw_wheel_insert(w, (e + i / CAP) * T5, NULL,
						 &fill[i]), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), N - CAP * PROBES);
	ck_assert_int_eq(bw_wheel_insert(w, e * T5, (void *)1, &x), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), N - CAP * PROBES + 1);
	for (unsigned i = 0; i < CAP * PROBES; i++)
		ck_assert_int_eq(bw_wheel_cancel(w, fill[i], NULL), 0);
	while (bw_wheel_pending(w) > 1) {
		ck_assert_int_eq(bw_wheel_poll(w, (e - 1) * T5, &cb, NULL), 0);
		tu_assert_healthy(w);
		ck_assert_uint_le(++polls, N / LIMIT + 2);
	}
	ck_assert_uint_eq(rec.nfired, N);
	tu_assert_healthy(w);
	ck_assert_int_eq(bw_wheel_poll(w, (e - 1) * T5, &cb, NULL), 0);
	ck_assert_uint_eq(rec.nfired, N);
	ck_assert_int_eq(bw_wheel_poll(w, e * T5, &cb, NULL), 0);
	ck_assert_uint_eq(rec.nfired, N + 1);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, (void *)1), 1);
	ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), BW_EEMPTY);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_failover_enomem)
{
	struct tu_alloc ta;
	struct bw_config cfg = tu_cfg(1, 5, 1, 1, BW_EXACT, true);
	struct bw_wheel *w;
	struct tu_rec rec;
	bw_handle h;
	int a, b;
	int rc = 0;
	unsigned n = 0;

	tu_alloc_init(&ta);
	tu_rec_init(&rec);
	cfg.alloc = &ta.a;
	w = tu_wheel_new(&cfg, L0 * T5);
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 5) * T5, &a, &h), 0);
	ta.fail_after = 0;
	/* The overflow store may have room preallocated: keep going until
	 * it has to grow. */
	while (n < 100000) {
		size_t before = bw_wheel_pending(w);

		rc = bw_wheel_insert(w, (L0 + 5) * T5, &b, &h);
		if (rc != 0) {
			ck_assert_uint_eq(bw_wheel_pending(w), before);
			break;
		}
		n++;
	}
	ck_assert_int_eq(rc, BW_ENOMEM);
	tu_assert_healthy(w);
	ta.fail_after = -1;
	ck_assert_int_eq(bw_wheel_insert(w, (L0 + 5) * T5, &b, &h), 0);
	tu_poll(w, (L0 + 5) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, n + 2);
	bw_wheel_free(w);
	ck_assert_uint_eq(ta.live_blocks, 0);
	ck_assert_uint_eq(ta.size_mismatch, 0);
	tu_rec_free(&rec);
}
END_TEST

/* ---- allocation ------------------------------------------------------- */

static void no_visit(bw_handle h, uint64_t d, void *data, void *ctx)
{
	(void)h;
	(void)d;
	(void)data;
	(void)ctx;
}

struct churn {
	struct bw_wheel *w;
	uint64_t rearms;
};

static uint64_t churn_fire(struct tu_rec *rec, void *data, uint64_t now)
{
	struct churn *ch = rec->user;
	uintptr_t i = untag(data);

	/* Every third timer is periodic, some re-arm far or into the past. */
	if (i % 3 != 0)
		return 0;
	ch->rearms++;
	switch (ch->rearms % 4) {
	case 0:
		return 1;
	case 1:
		return now + 3 * TU_MS * 1000;
	case 2:
		return now + (uint64_t)3600 * 1000 * TU_MS;
	default:
		return now + 40 * TU_MS;
	}
}

/*
 * After creation a plain wheel makes no allocator calls at all: inserts,
 * refusals, cancels (live, stale, bogus), polls with re-arms, cascades and
 * drops, and every introspection call.  Its footprint never moves and
 * equals what the allocator handed out; freeing returns every block with
 * its true size.
 */
START_TEST(test_no_alloc_hot_path)
{
	enum bw_preset p = (enum bw_preset)(_i / 2);
	struct bw_config cfg;
	struct tu_alloc ta;
	struct tu_rng rng;
	struct tu_rec rec;
	struct churn ch = { 0 };
	struct bw_wheel *w;
	uint64_t calls, T, now, nd;
	size_t fp;
	bw_handle *hs = calloc(4096, sizeof(*hs));
	unsigned nh = 0;

	ck_assert_int_eq(bw_config_preset(p, &cfg), 0);
	cfg.precision = _i % 2 ? BW_COARSE : BW_EXACT;
	tu_alloc_init(&ta);
	cfg.alloc = &ta.a;
	T = tu_tick_ns(&cfg);
	now = L0 * T + 7;
	w = tu_wheel_new(&cfg, now);
	calls = ta.calls;
	fp = bw_wheel_footprint(w);
	ck_assert_uint_gt(fp, 0);
	ck_assert_uint_eq(fp, ta.live_bytes);
	tu_rng_seed(&rng, 4242 + _i);
	tu_rec_init(&rec);
	/* The recorder's own log grows with libc, not through the wheel. */
	rec.on_fire = churn_fire;
	rec.user = &ch;
	ch.w = w;
	for (unsigned op = 0; op < 200000; op++) {
		unsigned r = (unsigned)tu_rng_below(&rng, 100);
		bw_handle h;
		uint64_t dt;

		if (r < 50) {
			if (tu_rng_chance(&rng, 20000))
				dt = tu_range_ticks(4, cfg.precision) + tu_rng_below(&rng, 99);
			else if (tu_rng_chance(&rng, 100000))
				dt = tu_rng_below(&rng, tu_range_ticks(4, cfg.precision));
			else if (tu_rng_chance(&rng, 50000))
				dt = 3; /* hot spot: probing then refusal */
			else
				dt = tu_rng_below(&rng, 5000);
			if (bw_wheel_insert(w, now + dt * T, tag(op), &h) == 0)
				hs[nh++ % 4096] = h;
		} else if (r < 65) {
			bw_wheel_cancel(w, hs[tu_rng_below(&rng, 4096)], NULL);
			bw_wheel_cancel(w, tu_rng_next(&rng), NULL);
		} else if (r < 95) {
			now += tu_rng_chance(&rng, 10000)
				       ? tu_rng_below(&rng, 64ull * 64 * 64 * T)
				       : tu_rng_below(&rng, 20 * T);
			tu_rec_clear(&rec);
			tu_poll(w, now, &rec);
		} else {
			bw_wheel_next_deadline(w, &nd);
			bw_wheel_until_next(w, now, &nd);
			bw_wheel_deadline(w, hs[tu_rng_below(&rng, 4096)], &nd);
			bw_wheel_pending(w);
			bw_wheel_overflow_pending(w);
			if (tu_rng_chance(&rng, 50000)) {
				ck_assert_int_eq(bw_wheel_foreach(w, no_visit,
								  NULL),
						 0);
				tu_assert_healthy(w);
			}
		}
		tu_check(ta.calls == calls, "op %u made %" PRIu64
			 " allocator calls", op, ta.calls - calls);
		tu_check(bw_wheel_footprint(w) == fp, "op %u: footprint %zu, "
			 "was %zu", op, bw_wheel_footprint(w), fp);
	}
	{
		struct bw_counters c;

		bw_wheel_counters(w, &c);
		/* The run really exercised refusals, re-arms and cancels. */
		ck_assert_uint_gt(c.refused, 0);
		ck_assert_uint_gt(c.cancelled, 0);
		ck_assert_uint_gt(ch.rearms, 0);
		if (cfg.precision == BW_EXACT)
			ck_assert_uint_gt(c.reslotted, 0);
	}
	ck_assert_int_eq(bw_wheel_drain(w, no_visit, NULL), 0);
	ck_assert_uint_eq(ta.calls, calls);
	bw_wheel_free(w);
	ck_assert_uint_eq(ta.live_blocks, 0);
	ck_assert_uint_eq(ta.live_bytes, 0);
	ck_assert_uint_eq(ta.size_mismatch, 0);
	free(hs);
	tu_rec_free(&rec);
}
END_TEST

/* Creation that runs out of memory fails cleanly at every allocation. */
START_TEST(test_new_enomem)
{
	bool fo = _i;
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, fo);
	struct tu_alloc ta;
	struct bw_wheel *w = NULL;
	int rc = BW_ENOMEM;
	long k;

	cfg.alloc = &ta.a;
	for (k = 0; k < 1000 && rc == BW_ENOMEM; k++) {
		tu_alloc_init(&ta);
		ta.fail_after = k;
		w = NULL;
		rc = bw_wheel_new(&cfg, 0, &w);
		if (rc == BW_ENOMEM) {
			ck_assert_uint_eq(ta.live_blocks, 0);
			ck_assert_uint_eq(ta.size_mismatch, 0);
			ck_assert_uint_ge(ta.failures, 1);
		}
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_gt(k, 1); /* the first allocation did fail */
	ck_assert_ptr_nonnull(w);
	tu_assert_healthy(w);
	bw_wheel_free(w);
	ck_assert_uint_eq(ta.live_blocks, 0);
}
END_TEST

/* A failover wheel's footprint tracks its allocator as overflow grows and
 * is given back. */
START_TEST(test_footprint_tracks_allocator)
{
	struct bw_config cfg = tu_cfg(2, 5, 1, 1, BW_EXACT, true);
	struct tu_alloc ta;
	struct bw_wheel *w;
	struct tu_rec rec;
	bw_handle h;
	size_t fp0;

	tu_alloc_init(&ta);
	tu_rec_init(&rec);
	cfg.alloc = &ta.a;
	w = tu_wheel_new(&cfg, L0 * T5);
	fp0 = bw_wheel_footprint(w);
	ck_assert_uint_eq(fp0, ta.live_bytes);
	for (unsigned i = 0; i < 5000; i++) {
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 7) * T5, tag(i), &h), 0);
		ck_assert_uint_eq(bw_wheel_footprint(w), ta.live_bytes);
	}
	ck_assert_uint_gt(bw_wheel_footprint(w), fp0);
	tu_poll(w, (L0 + 7) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 5000);
	ck_assert_uint_eq(bw_wheel_footprint(w), ta.live_bytes);
	tu_assert_healthy(w);
	bw_wheel_free(w);
	ck_assert_uint_eq(ta.live_blocks, 0);
	ck_assert_uint_eq(ta.size_mismatch, 0);
	tu_rec_free(&rec);
}
END_TEST

/* ---- intrusive timers ---------------------------------------------------- */

/*
 * One intrusive timer through its whole life, exact mode, time injected:
 * idle, added (a second add refused), not fired a nanosecond before its
 * tick, fired once at it with its data, idle again (cancel refused), then
 * re-added and cancelled; beside it a handle timer in the same slot fires
 * as usual.  _i: 0 at tick starts, 1 mid-tick deadlines.
 */
START_TEST(test_timer_life)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct bw_timer t;
	struct tu_rec rec;
	struct bw_counters c;
	uint64_t d = (L0 + 100) * T5 - (_i ? T5 / 2 : 0), nd;
	int a, b;
	bw_handle h;

	tu_rec_init(&rec);
	bw_timer_init(&t);
	ck_assert(!bw_timer_pending(&t));
	ck_assert_int_eq(bw_timer_cancel(w, &t), BW_ENOTFOUND);
	ck_assert_int_eq(bw_timer_add(w, &t, d, &a), 0);
	ck_assert(bw_timer_pending(&t));
	ck_assert_int_eq(bw_timer_add(w, &t, d + T5, &a), BW_EPENDING);
	ck_assert_int_eq(bw_wheel_insert(w, d, &b, &h), 0);
	ck_assert_uint_eq(bw_wheel_pending(w), 2);
	ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), 0);
	ck_assert_uint_eq(nd, (L0 + 100) * T5);
	tu_assert_healthy(w);
	tu_poll(w, (L0 + 100) * T5 - 1, &rec);
	ck_assert_uint_eq(rec.nfired, 0);
	tu_poll(w, (L0 + 100) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 2);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &a), 1);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &b), 1);
	ck_assert(!bw_timer_pending(&t));
	ck_assert_int_eq(bw_timer_cancel(w, &t), BW_ENOTFOUND);
	tu_assert_healthy(w);
	/* A fired timer is idle: it takes a new deadline as it is. */
	ck_assert_int_eq(bw_timer_add(w, &t, (L0 + 5000) * T5, &a), 0);
	ck_assert_uint_eq(bw_wheel_pending(w), 1);
	tu_assert_healthy(w);
	ck_assert_int_eq(bw_timer_cancel(w, &t), 0);
	ck_assert(!bw_timer_pending(&t));
	ck_assert_int_eq(bw_timer_cancel(w, &t), BW_ENOTFOUND);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	tu_poll(w, (L0 + 10000) * T5, &rec);
	ck_assert_uint_eq(rec.nfired, 2);
	bw_wheel_counters(w, &c);
	ck_assert_uint_eq(c.inserted, 3);
	ck_assert_uint_eq(c.cancelled, 1);
	ck_assert_uint_eq(c.fired, 2);
	tu_assert_healthy(w);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/*
 * Intrusive timers in every place a timer can be - a ring slot, a gear
 * slot (re-slotted on the way), the due list, the overflow heap - fire on
 * their tick in exact mode (or by the documented bound in coarse mode)
 * and cancel from each; try_add refuses what only the heap would take,
 * leaving the timer idle; a plain wheel refuses beyond its range.
 * _i: bit 0 coarse, bit 1 failover.
 */
START_TEST(test_timer_places)
{
	bool coarse = _i & 1, fo = _i & 2;
	struct bw_config cfg = tu_cfg(4, 1, 2, 2, coarse ? BW_COARSE : BW_EXACT,
				      fo);
	uint64_t T = TU_MS, now0 = L0 * T;
	struct bw_wheel *w = tu_wheel_new(&cfg, now0);
	struct bw_timer t[8];
	struct tu_rec rec;
	int data[8];
	uint64_t far = now0 + 300000 * T, last;
	unsigned i;

	tu_rec_init(&rec);
	for (i = 0; i < 8; i++)
		bw_timer_init(&t[i]);
	ck_assert_int_eq(bw_timer_add(w, &t[0], now0 + 10 * T, &data[0]), 0);
	ck_assert_int_eq(bw_timer_add(w, &t[1], far, &data[1]), 0);
	ck_assert_int_eq(bw_timer_add(w, &t[2], now0 - T, &data[2]), 0);
	/* Slot cap 2, 2 probes: the 5th at one deadline has no slot. */
	for (i = 3; i < 7; i++)
		ck_assert_int_eq(bw_timer_add(w, &t[i], now0 + 20 * T, &data[i]),
				 0);
	ck_assert_int_eq(bw_timer_try_add(w, &t[7], now0 + 20 * T, &data[7]),
			 BW_EFULL);
	ck_assert(!bw_timer_pending(&t[7]));
	ck_assert_int_eq(bw_timer_add(w, &t[7], now0 + 20 * T, &data[7]),
			 fo ? 0 : BW_EFULL);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), fo ? 1 : 0);
	tu_assert_healthy(w);
	/* Cancel from the due list, a gear slot and the heap (or a probe). */
	ck_assert_int_eq(bw_timer_cancel(w, &t[2]), 0);
	ck_assert_int_eq(bw_timer_cancel(w, &t[6]), 0);
	if (fo)
		ck_assert_int_eq(bw_timer_cancel(w, &t[7]), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 0);
	tu_assert_healthy(w);
	/* t[6]'s probe slot is free again: t[7] takes it. */
	if (fo)
		ck_assert_int_eq(bw_timer_add(w, &t[7], now0 + 20 * T, &data[7]),
				 0);
	tu_poll(w, now0 + 10 * T - 1, &rec);
	ck_assert_uint_eq(rec.nfired, 0);
	tu_poll(w, now0 + 10 * T, &rec);
	ck_assert_uint_eq(rec.nfired, 1);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &data[0]), 1);
	tu_poll(w, now0 + 21 * T, &rec);
	ck_assert_uint_eq(rec.nfired, fo ? 5 : 4);
	tu_assert_healthy(w);
	for (uint64_t now = now0 + 22 * T; now < far; now += 997 * T) {
		tu_poll(w, now, &rec);
		ck_assert_uint_eq(tu_rec_fired_count(&rec, &data[1]), 0);
		tu_assert_healthy(w);
	}
	tu_poll(w, far, &rec);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &data[1]), coarse ? 0 : 1);
	last = far + (coarse ? 2 * 64 * 64 * 64 * T : 0);
	tu_poll(w, last, &rec);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &data[1]), 1);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	for (i = 0; i < 8; i++)
		ck_assert(!bw_timer_pending(&t[i]));
	if (!fo) {
		uint64_t beyond = last + T + bw_wheel_range_ns(w);

		ck_assert_int_eq(bw_timer_add(w, &t[0], beyond, &data[0]),
				 BW_ERANGE);
		ck_assert(!bw_timer_pending(&t[0]));
	}
	tu_assert_healthy(w);
	tu_rec_free(&rec);
	bw_wheel_free(w);
}
END_TEST

/* What callbacks do with their own intrusive timer: free it (returning
 * 0; ASan and valgrind catch a wheel that touches it after), re-arm it by
 * the return value, add it again themselves (the return value is then
 * ignored), or try to cancel it (refused: it is idle while it runs). */
struct self_timer {
	struct bw_timer t;
	struct bw_wheel *w;
	int mode;               /* 0 free, 1 re-arm, 2 re-add, 3 cancel */
	unsigned fired;
	int rc;
};

static uint64_t self_fire(void *data, uint64_t now, void *ctx)
{
	struct self_timer *st = data;

	(void)ctx;
	st->fired++;
	switch (st->mode) {
	case 0:
		free(st);
		return 0;
	case 1:
		return st->fired < 3 ? now + T5 : 0;
	case 2:
		st->rc = bw_timer_add(st->w, &st->t, now + 10 * T5, st);
		st->mode = 3;
		return now + T5;
	default:
		st->rc = bw_timer_cancel(st->w, &st->t);
		ck_assert(!bw_timer_pending(&st->t));
		return 0;
	}
}

START_TEST(test_timer_callbacks)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * T5);
	struct bw_callbacks cb = { self_fire, NULL, NULL };
	struct self_timer *st[4];
	uint64_t now = L0 * T5;

	for (int m = 0; m < 4; m++) {
		st[m] = calloc(1, sizeof(*st[m]));
		ck_assert_ptr_nonnull(st[m]);
		bw_timer_init(&st[m]->t);
		st[m]->w = w;
		st[m]->mode = m;
		ck_assert_int_eq(bw_timer_add(w, &st[m]->t, now + T5, st[m]), 0);
	}
	for (int k = 1; k <= 20; k++) {
		ck_assert_int_eq(bw_wheel_poll(w, now + (uint64_t)k * T5, &cb, NULL),
				 0);
		tu_assert_healthy(w);
	}
	/* st[0] freed itself; st[1] fired three times, re-armed by its
	 * return value; st[2] re-added itself 10 ticks on (its return value
	 * ignored) and then, cancelling itself, was refused; st[3] too. */
	ck_assert_uint_eq(st[1]->fired, 3);
	ck_assert_uint_eq(st[2]->fired, 2);
	ck_assert_int_eq(st[2]->rc, BW_ENOTFOUND);
	ck_assert_uint_eq(st[3]->fired, 1);
	ck_assert_int_eq(st[3]->rc, BW_ENOTFOUND);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	for (int m = 1; m < 4; m++) {
		ck_assert(!bw_timer_pending(&st[m]->t));
		free(st[m]);
	}
	bw_wheel_free(w);
}
END_TEST

/* foreach and drain see intrusive timers (handle 0) beside handle
 * timers; drain leaves them idle and reusable. */
struct seen {
	size_t handles, intrusive;
};

static void count_visit(bw_handle h, uint64_t d, void *data, void *ctx)
{
	struct seen *sn = ctx;

	(void)d;
	(void)data;
	if (h)
		sn->handles++;
	else
		sn->intrusive++;
}

START_TEST(test_timer_drain)
{
	struct bw_config cfg = tu_cfg(4, 1, 1, 1, BW_EXACT, true);
	struct bw_wheel *w = tu_wheel_new(&cfg, L0 * TU_MS);
	struct bw_timer t[6];
	struct seen sn = { 0, 0 };
	bw_handle h[3];
	int x;

	for (int i = 0; i < 6; i++) {
		bw_timer_init(&t[i]);
		/* Three in the ring (one slot: two overflow), three far. */
		ck_assert_int_eq(bw_timer_add(w, &t[i],
					      (L0 + (i < 3 ? 50 : 90000)) * TU_MS,
					      &x),
				 0);
	}
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(bw_wheel_insert(w, (L0 + 50) * TU_MS, &x, &h[i]),
				 0);
	ck_assert_uint_gt(bw_wheel_overflow_pending(w), 0);
	tu_assert_healthy(w);
	ck_assert_int_eq(bw_wheel_foreach(w, count_visit, &sn), 0);
	ck_assert_uint_eq(sn.handles, 3);
	ck_assert_uint_eq(sn.intrusive, 6);
	sn = (struct seen){ 0, 0 };
	ck_assert_int_eq(bw_wheel_drain(w, count_visit, &sn), 0);
	ck_assert_uint_eq(sn.handles, 3);
	ck_assert_uint_eq(sn.intrusive, 6);
	ck_assert_uint_eq(bw_wheel_pending(w), 0);
	ck_assert_uint_eq(bw_wheel_overflow_pending(w), 0);
	tu_assert_healthy(w);
	for (int i = 0; i < 6; i++) {
		ck_assert(!bw_timer_pending(&t[i]));
		ck_assert_int_eq(bw_timer_add(w, &t[i], (L0 + 60) * TU_MS, &x), 0);
	}
	tu_assert_healthy(w);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_timer_null_arguments)
{
	struct bw_config cfg = tu_cfg(4, 5, 16, 8, BW_EXACT, false);
	struct bw_wheel *w = tu_wheel_new(&cfg, 0);
	struct bw_timer t;

	bw_timer_init(NULL);
	bw_timer_init(&t);
	ck_assert(!bw_timer_pending(NULL));
	ck_assert_int_eq(bw_timer_add(NULL, &t, 1, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_timer_add(w, NULL, 1, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_timer_try_add(w, NULL, 1, NULL), BW_EINVAL);
	ck_assert_int_eq(bw_timer_cancel(NULL, &t), BW_EINVAL);
	ck_assert_int_eq(bw_timer_cancel(w, NULL), BW_EINVAL);
	ck_assert_str_eq(bw_strerror(BW_EPENDING), "timer already pending");
	bw_wheel_free(w);
}
END_TEST

/*
 * What a cancel gives back, through either API: the next deadline moves
 * on when the slot holding it empties (and stays when another timer
 * there remains), and a slot that was full takes a timer at home again
 * (no probe) once one of its timers is cancelled.  _i: bit 0 intrusive,
 * bit 1 a one-gear wheel (a 64-slot ring).
 */
struct cancel_env {
	struct bw_wheel *w;
	bool intr;
	struct bw_timer t[8];
	bw_handle h[8];
	int data[8];
};

static int cancel_env_add(struct cancel_env *e, unsigned i, uint64_t d)
{
	if (e->intr)
		return bw_timer_add(e->w, &e->t[i], d, &e->data[i]);
	return bw_wheel_insert(e->w, d, &e->data[i], &e->h[i]);
}

static int cancel_env_cancel(struct cancel_env *e, unsigned i)
{
	if (e->intr)
		return bw_timer_cancel(e->w, &e->t[i]);
	return bw_wheel_cancel(e->w, e->h[i], NULL);
}

static uint64_t next_of(struct bw_wheel *w)
{
	uint64_t nd = 0;

	ck_assert_int_eq(bw_wheel_next_deadline(w, &nd), 0);
	return nd;
}

START_TEST(test_cancel_gives_back)
{
	struct bw_config cfg = tu_cfg(_i & 2 ? 1 : 4, 1, 2, 2, BW_EXACT, false);
	uint64_t T = TU_MS, now0 = L0 * T;
	struct cancel_env e = { .w = tu_wheel_new(&cfg, now0), .intr = _i & 1 };
	struct bw_counters c0, c1;
	struct tu_rec rec;

	tu_rec_init(&rec);
	for (unsigned i = 0; i < 8; i++)
		bw_timer_init(&e.t[i]);
	ck_assert_int_eq(cancel_env_add(&e, 0, now0 + 10 * T), 0);
	ck_assert_int_eq(cancel_env_add(&e, 1, now0 + 20 * T), 0);
	ck_assert_int_eq(cancel_env_add(&e, 2, now0 + 20 * T), 0);
	ck_assert_int_eq(cancel_env_add(&e, 3, now0 + 30 * T), 0);
	ck_assert_uint_eq(next_of(e.w), now0 + 10 * T);
	ck_assert_int_eq(cancel_env_cancel(&e, 0), 0);
	tu_assert_healthy(e.w);
	ck_assert_uint_eq(next_of(e.w), now0 + 20 * T);
	ck_assert_int_eq(cancel_env_cancel(&e, 1), 0);
	tu_assert_healthy(e.w);
	ck_assert_uint_eq(next_of(e.w), now0 + 20 * T);
	ck_assert_int_eq(cancel_env_cancel(&e, 2), 0);
	tu_assert_healthy(e.w);
	ck_assert_uint_eq(next_of(e.w), now0 + 30 * T);
	ck_assert_int_eq(cancel_env_add(&e, 0, now0 + 5 * T), 0);
	ck_assert_uint_eq(next_of(e.w), now0 + 5 * T);
	ck_assert_int_eq(cancel_env_cancel(&e, 0), 0);
	ck_assert_uint_eq(next_of(e.w), now0 + 30 * T);
	tu_assert_healthy(e.w);

	/* Slot cap 2: the third at +40 is probed to +41. */
	ck_assert_int_eq(cancel_env_add(&e, 4, now0 + 40 * T), 0);
	ck_assert_int_eq(cancel_env_add(&e, 5, now0 + 40 * T), 0);
	bw_wheel_counters(e.w, &c0);
	ck_assert_int_eq(cancel_env_add(&e, 6, now0 + 40 * T), 0);
	bw_wheel_counters(e.w, &c1);
	ck_assert_uint_eq(c1.probed, c0.probed + 1);
	tu_assert_healthy(e.w);
	/* One cancelled, the slot takes the next at home. */
	ck_assert_int_eq(cancel_env_cancel(&e, 4), 0);
	tu_assert_healthy(e.w);
	ck_assert_int_eq(cancel_env_add(&e, 7, now0 + 40 * T), 0);
	bw_wheel_counters(e.w, &c0);
	ck_assert_uint_eq(c0.probed, c1.probed);
	tu_assert_healthy(e.w);
	tu_poll(e.w, now0 + 40 * T, &rec);
	ck_assert_uint_eq(rec.nfired, 3);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &e.data[3]), 1);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &e.data[5]), 1);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &e.data[7]), 1);
	tu_poll(e.w, now0 + 41 * T, &rec);
	ck_assert_uint_eq(rec.nfired, 4);
	ck_assert_uint_eq(tu_rec_fired_count(&rec, &e.data[6]), 1);
	ck_assert_uint_eq(bw_wheel_pending(e.w), 0);
	tu_assert_healthy(e.w);
	tu_rec_free(&rec);
	bw_wheel_free(e.w);
}
END_TEST

static Suite *wheel_suite(void)
{
	Suite *s = suite_create("wheel");
	TCase *tc;

	tc = tcase_create("capacity");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_preset_geometry, 0, 2 * BW_PRESET_COUNT);
	tcase_add_test(tc, test_probe_chain);
	tcase_add_test(tc, test_efull_leaves_no_trace);
	tcase_add_loop_test(tc, test_coarse_hotspot, 0, 4);
	tcase_add_test(tc, test_refusal_window);
	tcase_add_loop_test(tc, test_refusal_window_coarse, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("handles");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_cancel_returns_data);
	tcase_add_test(tc, test_stale_handles);
	tcase_add_test(tc, test_generation_wrap);
	tcase_add_test(tc, test_handle_reuse_churn);
	tcase_add_loop_test(tc, test_bogus_handles, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("precision");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_no_contention_random, 0, 4);
	tcase_add_loop_test(tc, test_long_timer_exact, 0, 5);
	tcase_add_test(tc, test_long_timer_coarse);
	tcase_add_loop_test(tc, test_deadline_rounding, 0, 2);
	tcase_add_loop_test(tc, test_past_deadlines, 0, 4);
	tcase_add_loop_test(tc, test_callback_arm_coarse_delta, 0, 2);
	tcase_add_loop_test(tc, test_callback_arm_full_range, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("range");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_range_ns, 0, 2 * BW_MAX_GEARS);
	tcase_add_loop_test(tc, test_range_edge, 0, 8);
	tcase_add_loop_test(tc, test_failover_beyond_range, 0, 4);
	tcase_add_loop_test(tc, test_gap_empty, 0, 2);
	tcase_add_loop_test(tc, test_gap_failover, 0, 2);
	tcase_add_loop_test(tc, test_gap_gears8, 0, 2);
	tcase_add_loop_test(tc, test_time_backwards, 0, 2);
	tcase_add_loop_test(tc, test_time_backwards_same_tick, 0, 4);
	suite_add_tcase(s, tc);

	tc = tcase_create("callbacks");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_fire_args_and_results);
	tcase_add_loop_test(tc, test_periodic_rearm, 0, 4);
	tcase_add_loop_test(tc, test_rearm_past_next_poll, 0, 2);
	tcase_add_loop_test(tc, test_insert_from_callback, 0, 2);
	tcase_add_loop_test(tc, test_cancel_from_callback, 0, 2);
	tcase_add_test(tc, test_cancel_self_then_rearm);
	tcase_add_test(tc, test_poll_from_callback);
	tcase_add_loop_test(tc, test_rearm_failures, 0, 4);
	tcase_add_test(tc, test_rearm_failover_keeps);
	tcase_add_loop_test(tc, test_reslot_into_full_gear, 0, 2);
	tcase_add_loop_test(tc, test_big_batch, 0, 2);
	tcase_add_test(tc, test_null_arguments);
	suite_add_tcase(s, tc);

	tc = tcase_create("introspection");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_next_deadline_loop, 0, 4);
	tcase_add_test(tc, test_next_deadline_past_due);
	tcase_add_test(tc, test_deadline_and_counts);
	tcase_add_test(tc, test_config_roundtrip);
	tcase_add_loop_test(tc, test_foreach_and_drain, 0, 4);
	suite_add_tcase(s, tc);

	tc = tcase_create("failover");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_overflow_order, 0, 2);
	tcase_add_test(tc, test_overflow_cancel);
	tcase_add_loop_test(tc, test_failover_never_refuses, 0, 2);
	tcase_add_loop_test(tc, test_try_insert_refuses, 0, 2);
	tcase_add_test(tc, test_failover_enomem);
	tcase_add_loop_test(tc, test_poll_limit, 0, 2);
	tcase_add_test(tc, test_backlog_end_keeps_heap_next);
	suite_add_tcase(s, tc);

	tc = tcase_create("intrusive");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_timer_life, 0, 2);
	tcase_add_loop_test(tc, test_timer_places, 0, 4);
	tcase_add_test(tc, test_timer_callbacks);
	tcase_add_test(tc, test_timer_drain);
	tcase_add_test(tc, test_timer_null_arguments);
	tcase_add_loop_test(tc, test_cancel_gives_back, 0, 4);
	suite_add_tcase(s, tc);

	tc = tcase_create("allocation");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_no_alloc_hot_path, 0,
			    2 * BW_PRESET_COUNT);
	tcase_add_loop_test(tc, test_new_enomem, 0, 2);
	tcase_add_test(tc, test_footprint_tracks_allocator);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(wheel_suite());
}
