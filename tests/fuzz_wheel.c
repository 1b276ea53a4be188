/*
 * fuzz_wheel.c - libFuzzer target for libbitwheel (wheel/bitwheel.h).
 *
 * The input is a small program.  Its first bytes pick the container: a
 * plain or failover struct bw_wheel built from a preset (precision mode,
 * slot_cap at most 8 unless asked, and sometimes fewer gears, a slot_cap
 * of 1-4 or fewer probes, to force probing, BW_EFULL and BW_ERANGE), or a
 * struct bw_dual from a dual preset.  The rest is a stream of operations: insert (deadline relative
 * to now, in the past, far beyond the range or near UINT64_MAX; on a
 * single wheel, by the lane bit, a handle timer or an intrusive struct
 * bw_timer of the table's), cancel
 * (of a handle issued so far, live or dead, or of a bogus handle), poll
 * (forwards by a variable amount, or backwards) and queries.  Each timer
 * carries flags that make its callback re-arm it (several ways), insert
 * or cancel other timers, or try a nested poll.
 *
 * A shadow table of every accepted timer checks, trapping on violation:
 *   - a callback never runs before its deadline (now_ns >= deadline) and
 *     gets the poll's now; a timer armed or re-armed from a callback never
 *     fires in the same poll; only pending timers fire;
 *   - every accepted timer is accounted for: fired once (oneshot),
 *     cancelled, dropped through the drop callback (failed re-arm, with a
 *     documented reason) or still pending; bw_wheel_pending() matches the
 *     table, and at the end a drain visits exactly the pending ones with
 *     their handle, deadline and data;
 *   - an intrusive timer is pending exactly while the table says so; the
 *     queries re-add a fired, cancelled or dropped one (BW_EPENDING while
 *     it is pending), and its cancel is that of a handle without the data;
 *   - cancel of a pending timer returns its data; cancel of a dead handle,
 *     of the running timer, or of a bogus handle returns BW_ENOTFOUND and
 *     changes nothing; insert errors are the documented ones (BW_ERANGE
 *     only beyond the range);
 *   - poll's result counts match the callbacks seen; a backwards poll, or
 *     one before bw_wheel_next_deadline(), fires nothing (next_deadline
 *     is asked before a poll unless its control byte has 0x40: it
 *     recomputes a dirty next-event cache, which the others poll on as
 *     the operations left it); poll from a callback returns BW_EINPOLL;
 *   - bw_wheel_check()/bw_dual_check() return 0 every 64 operations,
 *     after every poll and at the end.
 * Each input is bounded (MAX_OPS operations, MAX_TIMERS timers), so it
 * runs in milliseconds.  Built by `make fuzz` (tests/fuzz.mk).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bitwheel.h"
#include "fuzz.h"

#define MAX_OPS 4096
#define MAX_TIMERS 4096
/* The harness's clock never goes past this, so its sums cannot wrap. */
#define NOW_MAX (UINT64_C(1) << 62)


enum tstate { T_PENDING = 1, T_FIRED, T_CANCELLED, T_DROPPED, T_DRAINED };

/* Timer flags, chosen by the input at insert. */
#define F_REARM 0x01u        /* return a new deadline from the callback  */
#define F_REARM_MODE 0x06u   /* how: see rearm_deadline()                */
#define F_CB_INSERT 0x08u    /* callback inserts a timer                 */
#define F_CB_CANCEL 0x10u    /* callback cancels a timer from the table  */
#define F_CB_POLL 0x20u      /* callback tries a nested poll             */
#define F_LIMIT 0xc0u        /* re-arm limit: 1, 2, 4 or unlimited fires  */

struct timer {
	struct bw_timer bt;  /* intrusive timers' own (f.t never moves)   */
	bool intr;
	bw_handle h;
	uint64_t deadline;
	uint64_t period;
	uint32_t armed_poll; /* poll serial that armed it, 0 outside polls */
	uint32_t fires;
	uint8_t state;
	uint8_t flags;
};

enum kind { K_PLAIN, K_FAILOVER, K_DUAL };

static struct fz {
	const uint8_t *p;
	size_t n, i;
	enum kind kind;
	struct bw_wheel *w;
	struct bw_dual *d;
	uint64_t now;          /* the latest poll's now (the wheel's clock) */
	uint64_t range_ns;     /* plain wheel: guaranteed insert range       */
	uint64_t tick_ns;      /* plain wheel: resolution                    */
	uint32_t poll_serial;
	bool in_poll;
	uint64_t poll_now;
	size_t firing;         /* index of the timer whose callback runs     */
	uint64_t seen_fired, seen_rearmed, seen_dropped;
	unsigned ops;
	size_t nt, pending;
	struct timer t[MAX_TIMERS];
} f;

static uint8_t byte(void)
{
	return f.i < f.n ? f.p[f.i++] : 0;
}

static uint64_t bytes_le(unsigned nb)
{
	uint64_t v = 0;

	for (unsigned k = 0; k < nb; k++)
		v |= (uint64_t)byte() << (8 * k);
	return v;
}

/* 1-4 bytes, shifted left by 0..28 bits: nanoseconds to years. */
static uint64_t read_delta(uint8_t ctl)
{
	uint64_t v = bytes_le((ctl & 3u) + 1);

	return v << (((ctl >> 2) & 7u) * 4);
}

static void *data_of(size_t idx)
{
	return (void *)(uintptr_t)(idx + 1);
}

static size_t idx_of(void *data)
{
	uintptr_t u = (uintptr_t)data;

	REQUIRE(u >= 1 && u <= f.nt);
	return (size_t)(u - 1);
}

static size_t pending_now(void)
{
	return f.kind == K_DUAL ? bw_dual_pending(f.d) : bw_wheel_pending(f.w);
}

static void check_container(void)
{
	const char *why = NULL;
	int rc = f.kind == K_DUAL ? bw_dual_check(f.d, &why)
				  : bw_wheel_check(f.w, &why);

	REQUIRE(rc == 0);
	REQUIRE(pending_now() == f.pending);
}

static int do_insert(bool periodic_lane, uint64_t dl, void *data,
		     bw_handle *h)
{
	if (f.kind != K_DUAL)
		return bw_wheel_insert(f.w, dl, data, h);
	return periodic_lane ? bw_dual_insert_periodic(f.d, dl, data, h)
			     : bw_dual_insert_oneshot(f.d, dl, data, h);
}

static int do_cancel(bw_handle h, void **data)
{
	return f.kind == K_DUAL ? bw_dual_cancel(f.d, h, data)
				: bw_wheel_cancel(f.w, h, data);
}

static int do_deadline(bw_handle h, uint64_t *out)
{
	return f.kind == K_DUAL ? bw_dual_deadline(f.d, h, out)
				: bw_wheel_deadline(f.w, h, out);
}

static uint64_t base_now(void)
{
	return f.in_poll ? f.poll_now : f.now;
}

static uint64_t read_deadline(void)
{
	uint8_t ctl = byte();
	uint64_t delta = read_delta(ctl), now = base_now();

	switch (ctl >> 5) {
	case 5: /* in the past */
		return delta < now ? now - delta : 0;
	case 6: /* absolute, usually long past */
		return delta;
	case 7: /* at the very end of time */
		return UINT64_MAX - (delta & 0xffff);
	default:
		return now + delta;
	}
}

static void insert_op(void)
{
	uint8_t flags = byte(), pb = byte();
	uint64_t dl = read_deadline();
	bool lane = pb & 0x80;
	size_t idx = f.nt;
	bw_handle h = 0;
	uint64_t got;
	int rc;

	if (f.nt >= MAX_TIMERS)
		return;
	f.t[idx] = (struct timer){
		.deadline = dl,
		.period = ((uint64_t)(pb & 0x7f) + 1) * 250000u,
		.flags = flags,
	};
	f.nt++; /* data_of(idx) must be valid for idx_of() during insert */
	if (f.kind != K_DUAL && lane) {
		f.t[idx].intr = true;
		bw_timer_init(&f.t[idx].bt);
		rc = bw_timer_add(f.w, &f.t[idx].bt, dl, data_of(idx));
		REQUIRE(bw_timer_pending(&f.t[idx].bt) == (rc == 0));
	} else {
		rc = do_insert(lane, dl, data_of(idx), &h);
	}
	if (rc != 0) {
		f.nt--;
		if (f.kind == K_PLAIN) {
			REQUIRE(rc == BW_EFULL || rc == BW_ERANGE);
			/* range_ns is counted from the current tick's start:
			 * allow one tick. */
			if (rc == BW_ERANGE)
				REQUIRE(dl > base_now() &&
					dl - base_now() + f.tick_ns > f.range_ns);
		} else {
			REQUIRE(rc == BW_ENOMEM);
		}
		return;
	}
	f.t[idx].h = h;
	f.t[idx].state = T_PENDING;
	f.t[idx].armed_poll = f.in_poll ? f.poll_serial : 0;
	f.pending++;
	if (f.t[idx].intr)
		return;
	REQUIRE(h != 0);
	REQUIRE(do_deadline(h, &got) == 0 && got == dl);
	if (f.kind == K_DUAL)
		REQUIRE(bw_dual_handle_lane(h) ==
			(lane ? BW_LANE_PERIODIC : BW_LANE_ONESHOT));
}

/* Cancel a handle from the table; k == f.firing inside a callback. */
static void cancel_idx(size_t k)
{
	struct timer *t = &f.t[k];
	bool running = f.in_poll && k == f.firing;
	void *data = data_of(k);
	int rc = t->intr ? bw_timer_cancel(f.w, &t->bt) : do_cancel(t->h, &data);

	if (t->intr)
		REQUIRE(!bw_timer_pending(&t->bt));
	if (t->state == T_PENDING && !running) {
		REQUIRE(rc == 0);
		REQUIRE(data == data_of(k));
		t->state = T_CANCELLED;
		f.pending--;
	} else {
		REQUIRE(rc == BW_ENOTFOUND);
	}
	if (!f.in_poll)
		REQUIRE(pending_now() == f.pending);
}

static void cancel_op(void)
{
	size_t k = (size_t)bytes_le(2);

	if (f.nt)
		cancel_idx(k % f.nt);
}

static bool issued(bw_handle h)
{
	for (size_t k = 0; k < f.nt; k++)
		if (f.t[k].h == h)
			return true;
	return false;
}

/* A handle no timer was ever given: cancel must find nothing. */
static void bogus_cancel_op(void)
{
	uint8_t how = byte();
	bw_handle h;
	void *data = NULL;

	if ((how & 3) == 0 || f.nt == 0) {
		h = bytes_le(8);
	} else {
		/* Near an issued handle: one bit flipped, or off by a little. */
		h = f.t[bytes_le(2) % f.nt].h;
		if ((how & 3) == 1)
			h ^= UINT64_C(1) << (byte() & 63);
		else
			h += (uint64_t)(int8_t)byte();
	}
	if (issued(h))
		return;
	REQUIRE(do_cancel(h, &data) == BW_ENOTFOUND);
	REQUIRE(pending_now() == f.pending);
}

static uint64_t rearm_deadline(struct timer *t, uint64_t now)
{
	switch ((t->flags & F_REARM_MODE) >> 1) {
	case 0:
		return now + t->period;
	case 1: /* already past: must wait for the next poll anyway */
		return now > t->period ? now - t->period : 1;
	case 2: /* far beyond any preset's range */
		return now + (UINT64_C(1) << 50);
	default: /* drift-free: the old deadline plus the period */
		return t->deadline + t->period ? t->deadline + t->period : 1;
	}
}

static void do_poll_op(uint64_t target, bool ask);

static uint64_t on_fire(void *data, uint64_t now_ns, void *ctx)
{
	size_t k = idx_of(data), saved = f.firing;
	struct timer *t = &f.t[k];
	unsigned limit;
	uint64_t next = 0;

	REQUIRE(ctx == &f);
	REQUIRE(f.in_poll);
	REQUIRE(now_ns == f.poll_now);
	REQUIRE(t->state == T_PENDING);
	REQUIRE(now_ns >= t->deadline);           /* never early */
	REQUIRE(t->armed_poll != f.poll_serial);  /* not in its arming poll */
	f.seen_fired++;
	t->fires++;
	f.firing = k;

	if (f.ops < MAX_OPS) {
		if (t->flags & F_CB_INSERT) {
			f.ops++;
			insert_op();
			t = &f.t[k];
		}
		if ((t->flags & F_CB_CANCEL) && f.nt) {
			f.ops++;
			cancel_idx((size_t)bytes_le(2) % f.nt);
		}
		if (t->flags & F_CB_POLL) {
			struct bw_callbacks cb = { .fire = on_fire };
			int rc = f.kind == K_DUAL
				? bw_dual_poll(f.d, now_ns + 1, &cb, NULL)
				: bw_wheel_poll(f.w, now_ns + 1, &cb, NULL);

			REQUIRE(rc == BW_EINPOLL);
		}
	}
	f.firing = saved;

	limit = (t->flags & F_LIMIT) >> 6;
	limit = limit == 3 ? UINT32_MAX : 1u << limit;
	if ((t->flags & F_REARM) && t->fires < limit)
		next = rearm_deadline(t, now_ns);
	if (next) {
		t->deadline = next;
		t->armed_poll = f.poll_serial;
		f.seen_rearmed++;
	} else {
		t->state = T_FIRED;
		f.pending--;
	}
	return next;
}

static void on_drop(void *data, int reason, void *ctx)
{
	size_t k = idx_of(data);
	struct timer *t = &f.t[k];

	REQUIRE(ctx == &f);
	REQUIRE(f.in_poll);
	/* Only a timer re-armed in this poll can be dropped. */
	REQUIRE(t->state == T_PENDING && t->armed_poll == f.poll_serial &&
		t->fires > 0);
	if (f.kind == K_PLAIN)
		REQUIRE(reason == BW_EFULL || reason == BW_ERANGE);
	else
		REQUIRE(reason == BW_ENOMEM);
	t->state = T_DROPPED;
	f.pending--;
	f.seen_rearmed--;
	f.seen_dropped++;
}

/* A poll at target, after a look at next_deadline when ask (which
 * recomputes a dirty next-event cache: without it the poll works with the
 * cache as the operations before it left it). */
static void do_poll_op(uint64_t target, bool ask)
{
	struct bw_callbacks cb = { .fire = on_fire, .drop = on_drop,
				   .ctx = &f };
	struct bw_poll_result res;
	uint64_t nd = 0;
	int nrc = 0, rc;

	if (ask) {
		nrc = f.kind == K_DUAL ? bw_dual_next_deadline(f.d, &nd)
				       : bw_wheel_next_deadline(f.w, &nd);
		REQUIRE(nrc == 0 || nrc == BW_EEMPTY);
		REQUIRE((nrc == BW_EEMPTY) == (f.pending == 0));
	}

	f.poll_serial++;
	f.in_poll = true;
	f.poll_now = target;
	f.seen_fired = f.seen_rearmed = f.seen_dropped = 0;
	rc = f.kind == K_DUAL ? bw_dual_poll(f.d, target, &cb, &res)
			      : bw_wheel_poll(f.w, target, &cb, &res);
	f.in_poll = false;
	REQUIRE(rc == 0);
	REQUIRE(res.fired == f.seen_fired);
	REQUIRE(res.rearmed == f.seen_rearmed);
	REQUIRE(res.rearm_failed == f.seen_dropped);
	if (target < f.now || (ask && (nrc == BW_EEMPTY || target < nd)))
		REQUIRE(res.fired == 0);
	if (target > f.now)
		f.now = target;
	check_container();
}

static void poll_op(void)
{
	uint8_t ctl = byte();
	uint64_t delta = read_delta(ctl), target;

	if (ctl & 0x80)
		target = delta < f.now ? f.now - delta : 0;
	else
		target = delta < NOW_MAX - f.now ? f.now + delta : NOW_MAX;
	do_poll_op(target, !(ctl & 0x40));
}

/* An intrusive timer k: a pending one refuses to be added again; an idle
 * one (but the running one, whose callback's return decides) is added
 * again, as if new, with a deadline from the input. */
static void readd(size_t k)
{
	struct timer *t = &f.t[k];
	uint64_t dl = read_deadline();
	int rc = bw_timer_add(f.w, &t->bt, dl, data_of(k));

	REQUIRE(bw_timer_pending(&t->bt) == (t->state == T_PENDING || rc == 0));
	if (t->state == T_PENDING) {
		REQUIRE(rc == BW_EPENDING);
		return;
	}
	if (rc != 0) {
		REQUIRE(f.kind == K_PLAIN ? rc == BW_EFULL || rc == BW_ERANGE
					  : rc == BW_ENOMEM);
		return;
	}
	t->deadline = dl;
	t->fires = 0;
	t->state = T_PENDING;
	t->armed_poll = f.in_poll ? f.poll_serial : 0;
	f.pending++;
}

/* Queries on an issued handle (an intrusive timer: a re-add). */
static void query_op(void)
{
	uint64_t dl = 0, until = 0, nd = 0;
	int rc;

	if (f.nt) {
		size_t k = bytes_le(2) % f.nt;
		struct timer *t = &f.t[k];

		if (t->intr) {
			if (!(f.in_poll && k == f.firing))
				readd(k);
			return;
		}
		rc = do_deadline(t->h, &dl);
		if (t->state == T_PENDING)
			REQUIRE(rc == 0 && dl == t->deadline);
		else
			REQUIRE(rc == BW_ENOTFOUND);
	}
	if (f.kind != K_DUAL) {
		rc = bw_wheel_until_next(f.w, f.now, &until);
		REQUIRE(rc == (f.pending ? 0 : BW_EEMPTY));
		if (rc == 0) {
			REQUIRE(bw_wheel_next_deadline(f.w, &nd) == 0);
			REQUIRE(until == (nd > f.now ? nd - f.now : 0));
		}
	}
}

static void visit(bw_handle h, uint64_t deadline_ns, void *data, void *ctx)
{
	size_t k = idx_of(data);
	struct timer *t = &f.t[k];

	REQUIRE(ctx == &f);
	REQUIRE(t->state == T_PENDING);
	REQUIRE(t->h == h && t->deadline == deadline_ns);
	t->state = T_DRAINED;
	f.pending--;
}

/* foreach: every visit is a pending timer of the table, as it was. */
static void count_visit(bw_handle h, uint64_t deadline_ns, void *data,
			void *ctx)
{
	struct timer *t = &f.t[idx_of(data)];

	REQUIRE(ctx == &f);
	REQUIRE(t->state == T_PENDING);
	REQUIRE(t->h == h && t->deadline == deadline_ns);
	f.seen_fired++;
}

/*
 * The check and the drain walk the whole record pool (gears * 64 * slot_cap),
 * so most inputs get at most 8 per slot; tune's low nibble 0xf keeps the
 * preset's.
 */
static unsigned small_cap(unsigned cap)
{
	return cap > 8 ? 8 : cap;
}

static bool setup(void)
{
	uint8_t sel = byte(), tune = byte();
	uint64_t start = UINT64_C(1000000000000) + bytes_le(2) * 7919u;
	struct bw_config cfg;
	int rc;

	memset(&f.t, 0, sizeof(f.t[0]) * f.nt);
	f.nt = f.pending = 0;
	f.now = start;
	f.poll_serial = 0;
	f.in_poll = false;
	f.ops = 0;
	f.w = NULL;
	f.d = NULL;

	if (sel % 4 == 3) {
		struct bw_dual_config dc;

		f.kind = K_DUAL;
		REQUIRE(bw_dual_config_preset((enum bw_dual_preset)(
			(sel >> 2) % BW_DUAL_PRESET_COUNT), &dc) == 0);
		if (tune & 0x80) {
			dc.oneshot.precision = BW_COARSE;
			dc.periodic.precision = BW_COARSE;
		}
		if (tune & 0x40) {
			dc.oneshot.slot_cap = (tune & 3) + 1u;
			dc.periodic.slot_cap = ((tune >> 2) & 3) + 1u;
		} else if ((tune & 0x0f) != 0x0f) {
			dc.oneshot.slot_cap = small_cap(dc.oneshot.slot_cap);
			dc.periodic.slot_cap = small_cap(dc.periodic.slot_cap);
		}
		rc = bw_dual_new(&dc, start, &f.d);
		REQUIRE(rc == 0);
		return true;
	}
	f.kind = sel % 4 == 2 ? K_FAILOVER : K_PLAIN;
	REQUIRE(bw_config_preset((enum bw_preset)((sel >> 2) %
						  BW_PRESET_COUNT), &cfg) == 0);
	cfg.failover = f.kind == K_FAILOVER;
	cfg.precision = (tune & 0x80) ? BW_COARSE : BW_EXACT;
	if (tune & 0x40)
		cfg.slot_cap = (tune & 3) + 1u;
	else if ((tune & 0x0f) != 0x0f)
		cfg.slot_cap = small_cap(cfg.slot_cap);
	if (tune & 0x20)
		cfg.max_probes = ((tune >> 2) & 3) + 1u;
	if (tune & 0x10)
		cfg.gears = ((tune >> 2) & 3) + 1u;
	REQUIRE(bw_config_validate(&cfg) == 0);
	rc = bw_wheel_new(&cfg, start, &f.w);
	REQUIRE(rc == 0);
	f.range_ns = bw_wheel_range_ns(f.w);
	f.tick_ns = (uint64_t)cfg.resolution_ms * 1000000u;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	f.p = data;
	f.n = size;
	f.i = 0;
	if (!setup())
		return 0;

	while (f.ops < MAX_OPS && f.i < f.n) {
		uint8_t op = byte();

		f.ops++;
		switch (op % 8) {
		case 0: case 1: case 2:
			insert_op();
			break;
		case 3:
			cancel_op();
			break;
		case 4:
			bogus_cancel_op();
			break;
		case 5: case 6:
			poll_op();
			break;
		default:
			query_op();
			break;
		}
		if (f.ops % 64 == 0)
			check_container();
	}
	/* A last poll far ahead, then account for everything left. */
	do_poll_op(f.now + (UINT64_C(1) << 40), true);
	f.seen_fired = 0;
	REQUIRE((f.kind == K_DUAL ? bw_dual_foreach(f.d, count_visit, &f)
				  : bw_wheel_foreach(f.w, count_visit, &f)) == 0);
	REQUIRE(f.seen_fired == f.pending);
	REQUIRE((f.kind == K_DUAL ? bw_dual_drain(f.d, visit, &f)
				  : bw_wheel_drain(f.w, visit, &f)) == 0);
	REQUIRE(f.pending == 0);
	REQUIRE(pending_now() == 0);
	for (size_t k = 0; k < f.nt; k++)
		REQUIRE(f.t[k].state != T_PENDING);
	check_container();
	if (f.kind == K_DUAL)
		bw_dual_free(f.d);
	else
		bw_wheel_free(f.w);
	return 0;
}
