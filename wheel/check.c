/*
 * check.c - bw_wheel_check(): every invariant of a wheel, verified the
 * slow way.  O(records + slots); meant for tests and debugging, called
 * between operations (never from inside a poll callback).
 *
 * What holds between operations:
 *   - each slot's list is well linked both ways, round from its sentinel
 *     back to it, all its timers with loc naming that slot, and its spare
 *     room is slot_cap - 1 less their number (negative past slot_cap:
 *     re-slots are not capped); the occupied and full bits agree with the
 *     number; no bitmap bit names a slot the wheel does not have,
 *     and the summary names exactly the occupied words; the slot at now's
 *     position, in the ring and in each gear, is empty;
 *   - each timer sits where its mode puts it: in the ring (either mode),
 *     its slot is at or after its tick by less than max_probes ticks;
 *     exact mode, gears >= 2: the slot starts at or before its tick, by
 *     less than max_probes spans; coarse mode, gears >= 2: the slot starts
 *     at or after its tick, by less than max_probes spans;
 *   - the ring's and each gear's scan find their first occupied slot, and
 *     unless marked dirty the wheel's cached next event is the minimum of
 *     all slots' events and (without a backlog) the heap's, and even
 *     when dirty it is no later than that minimum;
 *   - the due list holds only timers at or before now, and the lists of a
 *     poll in progress are empty; the heap is ordered and
 *     every record knows its position, and holds no timer due at or
 *     before now unless the last poll stopped at its limit (a backlog);
 *   - free list plus pending records account for every record, each
 *     handle timer found in a slot, list or the heap is its pool record,
 *     and the pending count matches the timers held, handle records and
 *     intrusive timers (gen 0) alike;
 *   - the refusal window starts after now's gear-2 slot and, while it
 *     holds, names only ticks whose gear-2 home slot (in the wheel's
 *     mode) and its every probe candidate are full.
 */
#include "wheel-internal.h"

#define FAIL(msg)                 \
	do {                          \
		if (why)                  \
			*why = (msg);         \
		return BW_ECORRUPT;       \
	} while (0)

static bool heap_before(const struct bw_timer *a, const struct bw_timer *b)
{
	return a->deadline < b->deadline ||
	       (a->deadline == b->deadline &&
		(int32_t)(a->u.heap.arrival - b->u.heap.arrival) < 0);
}

/* A timer found in the wheel's structures: a handle record must be the
 * pool's record at its index; *handles counts the records. */
static int check_kind(const struct bw_wheel *w, const struct bw_timer *tm,
		      size_t *handles, const char **why)
{
	const struct bw_rec *r = (const struct bw_rec *)tm;

	if (!tm->gen)
		return 0;
	if (!bw_pool_valid(&w->pool, (uint32_t)r->h) ||
	    bw_rec_at(&w->pool, (uint32_t)r->h) != r)
		FAIL("a handle timer is not its pool record");
	++*handles;
	return 0;
}

/* What a timer of the list at loc must satisfy besides its links. */
typedef int (*check_fn)(const struct bw_wheel *w, uint32_t loc,
			const struct bw_timer *tm, const char **why);

/* Walk one list, round from its sentinel l, checking each timer with
 * each; *n gets its length, or the walk fails. */
static int check_list(const struct bw_wheel *w, const struct bw_link *l,
		      uint32_t loc, check_fn each, uint32_t *n,
		      size_t *handles, const char **why)
{
	const struct bw_link *prev = l;

	*n = 0;
	for (const struct bw_link *ln = l->next; ln != l; ln = ln->next) {
		const struct bw_timer *tm = bw_timer_of(ln);
		int err;

		if (!ln)
			FAIL("list link is NULL");
		if (tm->loc != loc)
			FAIL("timer's loc disagrees with the list holding it");
		if (ln->prev != prev)
			FAIL("list links are not symmetric");
		if (++*n > bw_pending(w))
			FAIL("list longer than the timers pending");
		err = check_kind(w, tm, handles, why);
		if (!err)
			err = each(w, loc, tm, why);
		if (err)
			return err;
		prev = ln;
	}
	if (l->prev != prev)
		FAIL("list's sentinel does not link back to its last timer");
	return 0;
}

/* The gear of slot id: 0 for the ring, else 2.. */
static unsigned slot_gear(const struct bw_wheel *w, unsigned id)
{
	return id <= w->ring_mask ? 0 : id / BW_SLOTS + 2 - BW_RING_WORDS;
}

static int check_placement(const struct bw_wheel *w, uint32_t id,
			   const struct bw_timer *tm, const char **why)
{
	unsigned g = slot_gear(w, id);
	uint64_t t = bw_tick_of(w, tm->deadline);
	uint64_t ev = bw_slot_event(w, id);
	uint64_t reach = (uint64_t)w->cfg.max_probes * bw_pow64(g);

	if (w->cfg.precision == BW_EXACT && g > 0) {
		if (ev > t || t - ev >= reach)
			FAIL("exact gear timer outside its slot or spill range");
	} else if (ev < t || ev - t >= reach) {
		FAIL("timer before its slot or beyond its probe range");
	}
	return 0;
}

static int check_due(const struct bw_wheel *w, uint32_t loc,
		     const struct bw_timer *tm, const char **why)
{
	(void)loc;
	if (bw_tick_of(w, tm->deadline) > w->now)
		FAIL("due list holds a timer not yet due");
	return 0;
}

/* Whether bitmap word k backs any slot of this wheel. */
static bool word_used(const struct bw_wheel *w, unsigned k)
{
	if (k < BW_RING_WORDS)
		return k <= w->ring_mask / 64;
	return k < bw_gear_word(w->cfg.gears);
}

/* The bitmaps against each other: no bit outside the wheel's slots, and
 * the summary names exactly the words that are not empty. */
static int check_maps(const struct bw_wheel *w, const char **why)
{
	for (unsigned k = 0; k < 2 * 64; k++) {
		bool set = w->sum[k / 64] >> (k % 64) & 1;

		if (k >= BW_MAP_WORDS) {
			if (set)
				FAIL("summary bit beyond the bitmaps");
			continue;
		}
		if (!word_used(w, k) && (w->occ[k] || w->full[k]))
			FAIL("bitmap bit for a slot the wheel does not have");
		if (set != (w->occ[k] != 0))
			FAIL("summary bit disagrees with its occupied word");
	}
	return 0;
}

/*
 * Every slot against its bitmaps, and the placement of every timer in it.
 * *min gets the earliest slot event, computed slot by slot, and the
 * scans that the next-event cache relies on must agree with it.
 */
static int check_slots(const struct bw_wheel *w, uint64_t *min,
		       size_t *slotted, size_t *handles, const char **why)
{
	size_t nslots = bw_slot_count(&w->cfg);
	uint64_t gmin[BW_MAX_GEARS];

	for (unsigned g = 0; g < BW_MAX_GEARS; g++)
		gmin[g] = UINT64_MAX;
	for (unsigned id = 0; id < nslots; id++) {
		unsigned g = slot_gear(w, id);
		uint32_t n;
		bool current;
		int err = check_list(w, &w->slot[id], id, check_placement,
				     &n, handles, why);

		if (err)
			return err;
		if ((int64_t)w->cfg.slot_cap - 1 - n != w->spare[id])
			FAIL("slot's spare room disagrees with its list");
		if (bw_map_test(w->occ, id) != (n > 0))
			FAIL("occupied bit disagrees with slot contents");
		if (bw_map_test(w->full, id) != (n >= w->cfg.slot_cap))
			FAIL("full bit disagrees with slot count");
		if (!n)
			continue;
		if (g == 0)
			current = id == (w->now & w->ring_mask);
		else
			current = id % BW_SLOTS ==
				  ((w->now >> (6 * g)) & (BW_SLOTS - 1));
		if (current)
			FAIL("the current slot holds timers");
		if (bw_slot_event(w, id) < gmin[g])
			gmin[g] = bw_slot_event(w, id);
		*slotted += n;
	}
	if (bw_ring_scan(w) != gmin[0])
		FAIL("ring scan misses its first occupied slot");
	for (unsigned g = 2; g < w->cfg.gears; g++)
		if (bw_gear_scan(w, g) != gmin[g])
			FAIL("gear scan misses its first occupied slot");
	for (unsigned g = 0; g < BW_MAX_GEARS; g++)
		if (gmin[g] < *min)
			*min = gmin[g];
	return check_maps(w, why);
}

static int check_heap(const struct bw_wheel *w, size_t *handles,
		      const char **why)
{
	const struct bw_heap *h = &w->heap;

	if (h->n && !w->cfg.failover)
		FAIL("a plain wheel has overflowed timers");
	for (uint32_t i = 0; i < h->n; i++) {
		const struct bw_timer *tm = h->pos[i];
		int err;

		if (!tm)
			FAIL("heap names no timer");
		if (tm->loc != BW_LOC_HEAP || tm->u.heap.pos != i)
			FAIL("heap timer's loc or position is wrong");
		if (i > 0 && heap_before(tm, h->pos[(i - 1) / 2]))
			FAIL("heap order broken");
		err = check_kind(w, tm, handles, why);
		if (err)
			return err;
	}
	return 0;
}

/*
 * The refusal window, while it holds (wheel.c: refuse_fast), starts after
 * now's gear-2 slot ends (so after now) and covers only ticks whose home
 * slot, as arm() finds it in the wheel's mode, is gear-2 slot 1..62
 * ahead and full, as is each of its probe candidates: exact mode's
 * max_probes - 1 slots below (not below offset 1), coarse mode's above
 * (not above offset 63).  The ticks' home slots are those of its first
 * and last tick and all between.  Only a wheel with a gear 2 has one.
 */
static int check_refusal(const struct bw_wheel *w, const char **why)
{
	unsigned word = bw_gear_word(2);
	uint64_t up = w->cfg.precision == BW_COARSE, base = w->now >> 12;
	uint64_t last = w->rf_lo + w->rf_n - 1;

	if (!w->rf_n)
		return 0;
	if (w->cfg.gears < 3)
		FAIL("a refusal window on a wheel without gear 2");
	if (w->rf_lo < (w->rf_base + 1) << 12 || last < w->rf_lo)
		FAIL("refusal window starts before now's gear-2 slot ends");
	if (base != w->rf_base || w->full[word] != w->rf_full)
		return 0;
	for (uint64_t k = ((w->rf_lo - up) >> 12) + up;
	     k <= ((last - up) >> 12) + up; k++) {
		uint64_t j = k - base, probes = w->cfg.max_probes;

		if (j < 1 || j > 62)
			FAIL("refusal window outside gear 2's slots ahead");
		for (uint64_t i = 0; i < probes && (up ? j + i < 64 : i < j); i++)
			if (!bw_map_test(w->full,
					 word * 64 + (unsigned)((up ? k + i : k - i) & 63)))
				FAIL("refusal window names a slot that takes a timer");
	}
	return 0;
}

int bw_wheel_check(const struct bw_wheel *w, const char **why)
{
	const struct bw_pool *p;
	uint64_t min = UINT64_MAX;
	size_t slotted = 0, handles = 0, live = 0, nfree = 0;
	int err;

	if (!w)
		return BW_EINVAL;
	if (w->in_poll)
		return BW_EINPOLL;
	p = &w->pool;
	err = check_slots(w, &min, &slotted, &handles, why);
	if (err)
		return err;
	err = check_heap(w, &handles, why);
	if (err)
		return err;
	err = check_refusal(w, why);
	if (err)
		return err;
	if (w->heap.n) {
		uint64_t ht = bw_tick_of(w, w->heap.pos[0]->deadline);

		if (ht <= w->now && !w->backlog)
			FAIL("overflow heap holds a timer already due");
		if (ht < min && !w->backlog)
			min = ht;
	}
	if (!w->dirty && w->next != min)
		FAIL("cached next event is wrong");
	if (w->next > min)
		FAIL("cached next event is later than the next event");
	if (w->next_slot != (w->next & w->ring_mask))
		FAIL("cached next event's ring slot is wrong");
	if (!bw_list_empty(&w->list[BW_RIPE]) ||
	    w->list[BW_RIPE].prev != &w->list[BW_RIPE])
		FAIL("a poll's ripe list outlived the poll");
	{
		uint32_t n;

		err = check_list(w, &w->list[BW_DUE], BW_LOC_LIST + BW_DUE,
				 check_due, &n, &handles, why);
		if (err)
			return err;
		slotted += n;
	}
	for (uint32_t idx = 0; idx < p->size; idx++) {
		const struct bw_rec *r;

		if (!bw_pool_valid(p, idx))
			continue;
		r = bw_rec_at(p, idx);
		if ((uint32_t)r->h != idx)
			FAIL("record's index is not its place in the pool");
		if (r->t.gen != 1 || !(r->h >> 32 & 1) ||
		    r->h >> 32 >= BW_GEN_LIMIT)
			FAIL("record generation out of range");
		if (r->t.loc == BW_LOC_FREE)
			nfree++;
		else if (r->t.loc == BW_LOC_FIRING)
			FAIL("a record is marked firing outside a poll");
		else
			live++;
	}
	if (live != handles)
		FAIL("a live record is in no slot, due list or heap");
	if (slotted + w->heap.n != bw_pending(w))
		FAIL("pending count disagrees with the timers held");
	for (const struct bw_rec *r = p->free; r;
	     r = (const struct bw_rec *)r->t.u.link.next) {
		if (!bw_pool_valid(p, (uint32_t)r->h) ||
		    bw_rec_at(p, (uint32_t)r->h) != r ||
		    r->t.loc != BW_LOC_FREE)
			FAIL("free list names a live or missing record");
		if (nfree-- == 0)
			FAIL("free list longer than the free records");
	}
	if (nfree)
		FAIL("a free record is missing from the free list");
	return 0;
}
