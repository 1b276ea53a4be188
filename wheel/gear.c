/*
 * gear.c - finding the wheel's next event.
 *
 * The wheel caches one next-event tick.  Adding a timer can only lower it,
 * which the slot operations (wheel-internal.h) and the heap do in step;
 * emptying the slot that held it, or taking the heap's minimum, only marks
 * it dirty, and this recomputes it, once, when the wheel next needs it.
 *
 * A gear's next event is one rotate of its occupied map by now's digit
 * and one count-trailing-zeros (bw_gear_scan).  Gears are scanned from the
 * finest up, and the scan stops at the first gear that cannot beat what it
 * has: gear g's slots start at multiples of 64^g and the current one is
 * empty, so none of its events, nor any coarser gear's, comes before the
 * first multiple of 64^g after now.  When gear 0 holds anything before the
 * next multiple of 64, which a busy wheel's gear 0 usually does, that is
 * one gear scanned; an idle wheel scans every gear: O(gears) either way.
 */
#include "wheel-internal.h"

uint64_t bw_next_event_scan(struct bw_wheel *w)
{
	uint64_t next = UINT64_MAX;

	if (w->heap.n)
		next = bw_tick_of(w, bw_rec_at(&w->pool, w->heap.pos[0])->deadline);
	for (unsigned g = 0; g < w->cfg.gears; g++) {
		uint64_t ev;

		if (((w->now >> (6 * g)) + 1) << (6 * g) >= next)
			break;
		ev = bw_gear_scan(w, g);
		if (ev < next)
			next = ev;
	}
	w->dirty = false;
	w->next = next;
	return next;
}
