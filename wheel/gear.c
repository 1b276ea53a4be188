/*
 * gear.c - finding the wheel's next event.
 *
 * The slot operations (wheel-internal.h) only mark a gear dirty when they
 * empty the slot holding its cached next event, and the heap only when its
 * minimum leaves; this recomputes the dirty gears' caches, once, when the
 * wheel next needs its next event: bw_gear_scan() is one rotate and one
 * count-trailing-zeros per dirty gear, then one compare per gear.
 */
#include "wheel-internal.h"

uint64_t bw_next_event_scan(struct bw_wheel *w)
{
	uint32_t dirty = w->dirty;
	uint64_t next;

	if (dirty & BW_DIRTY_HEAP)
		w->heap_next = w->heap.n ?
			bw_tick_of(w, bw_rec_at(&w->pool, w->heap.pos[0])->deadline) :
			UINT64_MAX;
	for (uint32_t m = dirty & ~BW_DIRTY_HEAP; m; m &= m - 1) {
		unsigned g = (unsigned)__builtin_ctz(m);

		w->gear[g].next = bw_gear_scan(w, g);
	}
	next = w->heap_next;
	for (unsigned g = 0; g < w->cfg.gears; g++)
		if (w->gear[g].next < next)
			next = w->gear[g].next;
	w->dirty = 0;
	w->next = next;
	return next;
}
