/*
 * check.c - bw_wheel_check(): every invariant of a wheel, verified the
 * slow way.  O(records + slots); meant for tests and debugging, called
 * between operations (never from inside a poll callback).
 *
 * What holds between operations:
 *   - each slot's list is well linked both ways and ends at its tail, has
 *     count records, all with loc naming that slot (a count may pass
 *     slot_cap: re-slots are not capped); the occupied and full
 *     bits agree with the count; the slot at now's digit is empty;
 *   - each timer sits where its mode puts it: exact mode, gear 0: its slot
 *     is at or after its tick by less than max_probes; coarse gears: the
 *     slot starts at or before its tick, by less than max_probes spans;
 *     coarse mode: the slot starts at or after its tick, by less than
 *     max_probes spans;
 *   - unless marked dirty, the wheel's cached next event is the minimum
 *     of the gears' next events and the heap's;
 *   - the due list holds only timers at or before now, and the lists of a
 *     poll in progress are empty; the heap is ordered and
 *     every record knows its position;
 *   - free list plus pending records account for every record, and the
 *     pending count matches.
 */
#include "wheel-internal.h"

#define FAIL(msg)                 \
	do {                          \
		if (why)                  \
			*why = (msg);         \
		return BW_ECORRUPT;       \
	} while (0)

static bool heap_before(const struct bw_pool *p, uint32_t a, uint32_t b)
{
	const struct bw_rec *ra = bw_rec_at(p, a), *rb = bw_rec_at(p, b);

	return ra->deadline < rb->deadline ||
	       (ra->deadline == rb->deadline && (int32_t)(ra->prev - rb->prev) < 0);
}

/* Walk one list; *n gets its length, or the walk fails. */
static int check_list(const struct bw_wheel *w, const struct bw_list *l,
		      uint16_t loc, uint32_t limit, uint32_t *n,
		      const char **why)
{
	const struct bw_pool *p = &w->pool;
	uint32_t prev = BW_NIL;

	*n = 0;
	for (uint32_t idx = l->head; idx != BW_NIL; idx = bw_rec_at(p, idx)->next) {
		const struct bw_rec *r;

		if (!bw_pool_valid(p, idx))
			FAIL("list link names no record");
		r = bw_rec_at(p, idx);
		if (r->loc != loc)
			FAIL("record's loc disagrees with the list holding it");
		if (r->prev != prev)
			FAIL("list links are not symmetric");
		if (++*n > limit)
			FAIL("list longer than its bound");
		prev = idx;
	}
	if (l->tail != prev)
		FAIL("list tail is not its last record");
	return 0;
}

static int check_placement(const struct bw_wheel *w, unsigned g, unsigned d,
			   uint32_t idx, const char **why)
{
	uint64_t t = bw_tick_of(w, bw_rec_at(&w->pool, idx)->deadline);
	uint64_t ev = bw_gear_event(w, g, d);
	uint64_t reach = (uint64_t)w->cfg.max_probes * bw_pow64(g);

	if (w->cfg.precision == BW_EXACT && g > 0) {
		if (ev > t || t - ev >= reach)
			FAIL("exact coarse-gear timer outside its slot or spill range");
	} else if (ev < t || ev - t >= reach) {
		FAIL("timer before its slot or beyond its probe range");
	}
	return 0;
}

static int check_gears(const struct bw_wheel *w, uint64_t *min,
		       size_t *slotted, const char **why)
{
	for (unsigned g = 0; g < w->cfg.gears; g++) {
		const struct bw_gear *gr = &w->gear[g];
		unsigned cur = (w->now >> (6 * g)) & (BW_SLOTS - 1);
		uint64_t first = bw_gear_scan(w, g);

		for (unsigned d = 0; d < BW_SLOTS; d++) {
			const struct bw_slot *s = &w->slot[g * BW_SLOTS + d];
			uint32_t n, idx = s->list.head;
			int err = check_list(w, &s->list, (uint16_t)(g * BW_SLOTS + d),
					     w->pool.size, &n, why);

			if (err)
				return err;
			if (n != s->count)
				FAIL("slot count disagrees with its list");
			if (!!(gr->occ & (1ull << d)) != (n > 0))
				FAIL("occupied bit disagrees with slot contents");
			if (!!(gr->full & (1ull << d)) != (n >= w->cfg.slot_cap))
				FAIL("full bit disagrees with slot count");
			if (n && d == cur)
				FAIL("the current slot holds timers");
			for (uint32_t i = 0; i < n; i++) {
				err = check_placement(w, g, d, idx, why);
				if (err)
					return err;
				idx = bw_rec_at(&w->pool, idx)->next;
			}
			*slotted += n;
		}
		if (first < *min)
			*min = first;
	}
	return 0;
}

static int check_heap(const struct bw_wheel *w, const char **why)
{
	const struct bw_heap *h = &w->heap;

	if (h->n && !w->cfg.failover)
		FAIL("a plain wheel has overflowed timers");
	for (uint32_t i = 0; i < h->n; i++) {
		const struct bw_rec *r;

		if (!bw_pool_valid(&w->pool, h->pos[i]))
			FAIL("heap names no record");
		r = bw_rec_at(&w->pool, h->pos[i]);
		if (r->loc != BW_LOC_HEAP || r->next != i)
			FAIL("heap record's loc or position is wrong");
		if (i > 0 && heap_before(&w->pool, h->pos[i], h->pos[(i - 1) / 2]))
			FAIL("heap order broken");
	}
	return 0;
}

int bw_wheel_check(const struct bw_wheel *w, const char **why)
{
	const struct bw_pool *p;
	uint64_t min = UINT64_MAX;
	size_t slotted = 0, live = 0, nfree = 0;
	int err;

	if (!w)
		return BW_EINVAL;
	if (w->in_poll)
		return BW_EINPOLL;
	p = &w->pool;
	err = check_gears(w, &min, &slotted, why);
	if (err)
		return err;
	err = check_heap(w, why);
	if (err)
		return err;
	if (w->heap.n) {
		uint64_t ht = bw_tick_of(w, bw_rec_at(p, w->heap.pos[0])->deadline);

		if (ht <= w->now)
			FAIL("overflow heap holds a timer already due");
		if (ht < min)
			min = ht;
	}
	if (!w->dirty && w->next != min)
		FAIL("cached next event is wrong");
	if (w->list[BW_RIPE].head != BW_NIL || w->list[BW_RIPE].tail != BW_NIL)
		FAIL("a poll's ripe list outlived the poll");
	{
		uint32_t n, idx = w->list[BW_DUE].head;

		err = check_list(w, &w->list[BW_DUE], BW_LOC_LIST + BW_DUE, p->size,
				 &n, why);
		if (err)
			return err;
		for (uint32_t k = 0; k < n; k++) {
			if (bw_tick_of(w, bw_rec_at(p, idx)->deadline) > w->now)
				FAIL("due list holds a timer not yet due");
			idx = bw_rec_at(p, idx)->next;
		}
		slotted += n;
	}
	for (uint32_t idx = 0; idx < p->size; idx++) {
		const struct bw_rec *r;

		if (!bw_pool_valid(p, idx))
			continue;
		r = bw_rec_at(p, idx);
		if (r->gen == 0 || r->gen >= BW_GEN_LIMIT)
			FAIL("record generation out of range");
		if (r->loc == BW_LOC_FREE)
			nfree++;
		else if (r->loc == BW_LOC_FIRING)
			FAIL("a record is marked firing outside a poll");
		else
			live++;
	}
	if (live != slotted + w->heap.n)
		FAIL("a live record is in no slot, due list or heap");
	if (live != w->pending || live != p->used)
		FAIL("pending count disagrees with the records");
	for (uint32_t idx = p->free; idx != BW_NIL; idx = bw_rec_at(p, idx)->next) {
		if (!bw_pool_valid(p, idx) || bw_rec_at(p, idx)->loc != BW_LOC_FREE)
			FAIL("free list names a live or missing record");
		if (nfree-- == 0)
			FAIL("free list longer than the free records");
	}
	if (nfree)
		FAIL("a free record is missing from the free list");
	return 0;
}
