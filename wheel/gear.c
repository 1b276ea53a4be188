/*
 * gear.c - finding the wheel's next event.
 *
 * The wheel caches one next-event tick.  Adding a timer can only lower it,
 * which the slot operations (wheel-internal.h) and the heap do in step;
 * emptying the ring slot that held it, or taking the heap's minimum, only
 * marks it dirty, and this recomputes it, once, when the wheel next needs
 * it.  A cancel that empties a gear slot (g >= 2) knows that slot's event
 * from now's digit (bw_gear_emptied): any other slot's leaves the cache as
 * it was, and the one that held the next event has it recomputed at once.
 * Such a timer was armed at least 4096 ticks ahead, so the cancel pays
 * for the scan rarely, where every poll across the stale value would
 * have (an idle wheel's re-armed far timers: bench/, the idle scenario).
 *
 * The ring's next event is a masked ctz in now's word, or a rotate of the
 * summary, a ctz and a ctz in the word it names (bw_ring_scan); a gear's is
 * one rotate of its occupied word by now's digit and one ctz
 * (bw_gear_scan).  The gears that hold anything (the summary's second
 * word) are scanned after the ring, from the finest up, and the scan stops
 * at the first gear that cannot beat what it has: gear g's slots start at
 * multiples of 64^g and the current one is empty, so none of its events,
 * nor any coarser gear's, comes before the first multiple of 64^g after
 * now.  A busy wheel's ring usually holds something within 4096 ticks,
 * which ends the scan there: O(1), and O(gears) at worst.
 */
#include "wheel-internal.h"

uint64_t bw_next_event_scan(struct bw_wheel *w)
{
	uint64_t next = UINT64_MAX, ev;

	if (w->heap.n && !w->backlog)
		next = bw_tick_of(w, w->heap.pos[0]->deadline);
	ev = bw_ring_scan(w);
	if (ev < next)
		next = ev;
	for (uint64_t gears = w->sum[1]; gears; gears &= gears - 1) {
		unsigned g = (unsigned)__builtin_ctzll(gears) + 2;

		if (((w->now >> (6 * g)) + 1) << (6 * g) >= next)
			break;
		ev = bw_gear_scan(w, g);
		if (ev < next)
			next = ev;
	}
	w->dirty = false;
	bw_set_next(w, next);
	return next;
}

void bw_gear_emptied(struct bw_wheel *w, unsigned id)
{
	unsigned g = 2 + (id - BW_RING_MAX) / BW_SLOTS;
	uint64_t base = w->now >> (6 * g);
	/* The slot's key is the one of now's next 63 digits ending in id's
	 * (the current digit's slot is empty: insert put it in a finer
	 * gear). */
	uint64_t key = base + ((id - base) & (BW_SLOTS - 1));

	if (key << (6 * g) == w->next)
		bw_next_event_scan(w);
}
