/*
 * gear.c - finding a gear's next event.
 *
 * The slot operations themselves (wheel-internal.h) only mark a gear dirty
 * when they empty the slot holding its cached next event; this recomputes
 * it, once, when the wheel next needs it: one rotate of the occupied map by
 * now's digit, so that bit 0 is the current slot, and one count-trailing-
 * zeros.  O(1) per gear.
 */
#include "wheel-internal.h"




uint64_t bw_gear_scan(const struct bw_wheel *w, unsigned g)
{
	const struct bw_gear *gr = &w->gear[g];
	uint64_t base = w->now >> (6 * g);
	uint64_t r = rotr64(gr->occ, (unsigned)base);

	if (!r)
		return UINT64_MAX;
	return (base + (uint64_t)__builtin_ctzll(r)) << (6 * g);
}


