/*
 * wheels.c - the wheels that fire the state's timers: one shared dual
 * wheel, and an overflow store per uid for what its slots refuse.
 *
 * Why per uid.  A wheel slot holds slot_cap timers, and a timer whose
 * slot and probes are full goes to an overflow heap, which a poll drains
 * a POLL_CHUNK at a time in deadline order.  With one shared heap, one
 * uid's burst at an instant T filled the slots around T, and another
 * uid's timers due just after T, refused by those slots, went to the heap
 * behind the burst's 223,000: 42 ms late at p99 (issue 22).  So a
 * client's timer goes into the shared wheel only where a slot takes it
 * (bw_dual_try_insert); what the slots refuse goes to its owner's own
 * overflow store, a failover dual wheel of the shared wheel's lanes and
 * range with one timer per slot (its heap takes the rest), polled with a
 * limit of its own.  A burst then queues behind itself alone: every other
 * uid's timers are in slots or in their own, short, overflow store.  The
 * state's own timers (lingers, ack timeouts) and periodic re-arms stay in
 * the shared wheel, whose heap they alone can reach: too few to queue
 * anyone (the periodic rate budget bounds re-arms).
 *
 * Layout.  struct bwd_uid's spill is its store, NULL until a slot first
 * refuses one of its timers; a uid with one is in the state's spilling
 * list.  A client's timer is intrusive (its struct bw_timer is inside
 * struct bwd_timer: no wheel record, no handle): its spilled flag says
 * which wheel it is armed in, its lane which of that wheel's two.  The
 * state's own timers and delayed fires are handle timers.  A store stays
 * while it has timers, and a poll that finds it empty frees it (not a
 * cancel: a client that schedules and cancels into full slots
 * must not make and free 120 KiB a request), as does its uid's end.  It
 * starts at the wheels' clock (polled_ns), so that it agrees with the
 * shared wheel on what is due.  Its footprint (120 KiB with the default
 * preset) is the daemon's, in Stats' memory, not its uid's bytes: one per
 * uid at most, a constant of the memory bound (bitwheeld(8)), where a
 * charge would move a uid's bytes by 120 KiB at its first refused timer.
 * Its counters, when freed, are kept in the state's spilled[], so that
 * Stats' lane figures stay the sum of every wheel's over the daemon's
 * life.
 *
 * Costs: arming a timer is the shared wheel's insert, plus, when its
 * slots refuse it, the store's (O(log n) in its heap) - and once per
 * burst, the store's making (about 120 KiB zeroed, tens of microseconds);
 * a cancel is one wheel's; a poll and the next deadline are O(1) per uid
 * with a store, of which there are as many as uids overflowing at once.
 */
#include <stdlib.h>

#include "state-internal.h"

/* Timers a poll takes out of one uid's store's heap per lane.  Taking one
 * out of a heap of 200,000 costs microseconds (cache misses down its
 * levels): 2,048 a poll held the loop for up to 10 ms, and another uid's
 * fires due at the burst's instant came 7.5-14 ms late at p99; with 512,
 * 5.7-8.0 ms (bench/results/burst.md).  The burst itself takes some 440
 * short turns. */
#define SPILL_POLL_CHUNK 512

/* u's store, made if need be; NULL without memory. */
static struct bw_dual *spill_get(struct bwd_state *st, struct bwd_uid *u)
{
	struct bw_dual_config cfg = st->opt->wheel;
	struct bw_dual *d;

	if (u->spill)
		return u->spill;
	/* One timer a slot: the ring catches what is spread out, the heap
	 * a burst; the lanes' resolutions and range are the shared one's. */
	cfg.oneshot.slot_cap = cfg.periodic.slot_cap = 1;
	cfg.oneshot.max_probes = cfg.periodic.max_probes = 1;
	if (bw_dual_new(&cfg, st->polled_ns, &d))
		return NULL;
	bw_dual_set_poll_limit(d, SPILL_POLL_CHUNK);
	u->spill = d;
	u->spill_bytes = bw_dual_footprint(d);
	st->stats.bytes += u->spill_bytes;
	u->spill_next = st->spilling;
	if (st->spilling)
		st->spilling->spill_pprev = &u->spill_next;
	u->spill_pprev = &st->spilling;
	st->spilling = u;
	return d;
}

static void add_counters(struct bw_counters *to, const struct bw_counters *k)
{
	to->inserted += k->inserted;
	to->cancelled += k->cancelled;
	to->fired += k->fired;
	to->probed += k->probed;
	to->refused += k->refused;
	to->overflowed += k->overflowed;
	to->lost += k->lost;
	to->reslotted += k->reslotted;
	to->overfilled += k->overfilled;
}

void bwd_wheels_drop(struct bwd_state *st, struct bwd_uid *u)
{
	if (!u->spill)
		return;
	for (unsigned l = 0; l < 2; l++) {
		struct bw_counters k;

		bw_wheel_counters(bw_dual_lane(u->spill, (enum bw_lane)l), &k);
		add_counters(&st->spilled[l], &k);
	}
	bw_dual_free(u->spill);
	u->spill = NULL;
	st->stats.bytes -= u->spill_bytes;
	u->spill_bytes = 0;
	*u->spill_pprev = u->spill_next;
	if (u->spill_next)
		u->spill_next->spill_pprev = u->spill_pprev;
}

int bwd_wheels_arm(struct bwd_state *st, struct bwd_timer *t, uint64_t now_ns)
{
	enum bw_lane lane = t->lane;
	struct bw_dual *d;
	uint64_t at = t->wall ? bwd_wall_arm_at(st, t, now_ns) : t->deadline_ns;
	int err = bw_dual_timer_try_add(st->wheel, lane, &t->wt, at,
					 bwd_timer_data(t));

	t->spilled = false;
	if (err != BW_EFULL && err != BW_ERANGE)
		return err;
	d = spill_get(st, t->session->acct);
	if (!d)
		return BW_ENOMEM;
	err = bw_dual_timer_add(d, lane, &t->wt, at, bwd_timer_data(t));
	t->spilled = !err;
	return err;
}

void bwd_wheels_disarm(struct bwd_state *st, struct bwd_timer *t)
{
	bw_dual_timer_cancel(t->spilled ? t->session->acct->spill : st->wheel,
			     t->lane, &t->wt);
}

void bwd_wheels_poll(struct bwd_state *st, uint64_t now_ns, const struct bw_callbacks *cb)
{
	struct bwd_uid *u, *next;

	if (now_ns > st->polled_ns)
		st->polled_ns = now_ns;
	bw_dual_poll(st->wheel, now_ns, cb, NULL);
	for (u = st->spilling; u; u = next) {
		next = u->spill_next;
		bw_dual_poll(u->spill, now_ns, cb, NULL);
		if (!bw_dual_pending(u->spill))
			bwd_wheels_drop(st, u);
	}
}

int bwd_wheels_next_deadline(struct bwd_state *st, uint64_t *out_ns)
{
	uint64_t best = UINT64_MAX, at;

	if (!bw_dual_next_deadline(st->wheel, &at))
		best = at;
	for (struct bwd_uid *u = st->spilling; u; u = u->spill_next)
		if (!bw_dual_next_deadline(u->spill, &at) && at < best)
			best = at;
	if (best == UINT64_MAX)
		return BW_EEMPTY;
	*out_ns = best;
	return 0;
}

void bwd_wheels_lane(const struct bwd_state *st, enum bw_lane lane,
		     struct bwd_wheel_figures *out)
{
	struct bw_wheel *w = bw_dual_lane(st->wheel, lane);
	struct bw_counters k;

	bw_wheel_counters(w, &out->k);
	add_counters(&out->k, &st->spilled[lane]);
	out->pending = bw_wheel_pending(w);
	out->overflow = bw_wheel_overflow_pending(w);
	for (const struct bwd_uid *u = st->spilling; u; u = u->spill_next) {
		w = bw_dual_lane(u->spill, lane);
		bw_wheel_counters(w, &k);
		add_counters(&out->k, &k);
		out->pending += bw_wheel_pending(w);
		out->overflow += bw_wheel_pending(w);
	}
}

int bwd_wheels_check(const struct bwd_state *st, const char **why)
{
	int err = bw_dual_check(st->wheel, why);

	for (const struct bwd_uid *u = st->spilling; u && !err; u = u->spill_next)
		err = bw_dual_check(u->spill, why);
	return err;
}
