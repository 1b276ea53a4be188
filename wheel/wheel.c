/*
 * wheel.c - insert, cancel and poll on a hierarchical timer wheel.
 *
 * Time is counted in ticks of resolution_ms.  A deadline of d ns belongs to
 * tick t = ceil(d / tick); a poll at now ns processes every tick up to
 * floor(now / tick).  So a timer fires only once now >= t * tick >= d:
 * never early, whatever the gear or mode.
 *
 * The ring and the gears.  The two finest gears of a classic wheel are
 * one flat ring of 64 * 64 = 4096 one-tick slots, slot t mod 4096 for tick
 * t (64 slots on a one-gear wheel).  Above it, each gear g >= 2 has 64
 * slots spanning 64^g ticks, each gear 64 times coarser than the one
 * below:
 *
 *   level    slot span   covers ahead      at 1 ms      at 5 ms
 *   ring     1 tick      4095 ticks        4 s          20 s
 *   gear 2   4096        63 * 4096         258 s        21.5 min
 *   gear 3   262144      63 * 262144       4.6 h        22.9 h
 *
 * The wheel's clock is `now`, the last tick processed.  A timer at tick t
 * less than 4096 ticks ahead goes straight into its own slot of the ring,
 * in either mode; a later one into the lowest gear g whose slot index key
 * = t >> 6g is at most 63 slots ahead of now >> 6g, slot key mod 64.  The
 * slot at now's position - in the ring and in each gear - is always empty
 * between polls, so an occupied slot's distance ahead (1..4095 ticks in
 * the ring, 1..63 slots in a gear) is unambiguous, and its event tick -
 * when a poll must look at it - is its tick, or the start of the gear
 * slot.  Timers at or before `now` wait on a due list and fire at the next
 * poll.  The guaranteed range is 63 * 64^(G-1) ticks in exact mode (62 *
 * 64^(G-1) in coarse mode, which rounds up in the gears); a plain wheel
 * refuses anything further with BW_ERANGE.
 *
 * Timers.  Every timer is a struct bw_timer, linked by pointer into a
 * slot's list, the due or ripe list, or the heap.  The lists are circular
 * through a sentinel, a 16-byte struct bw_link of the wheel's per slot
 * and list, so that unlinking a timer touches its two neighbours and
 * nothing else, and tells by itself whether the list is now empty (its
 * two neighbours are one, the sentinel): cancel needs neither the slot's
 * head nor a count to know.  A slot's room below slot_cap is a number of
 * its own, in an array by slot id beside the sentinels.  A handle timer's is
 * the head of a pool record (wheel-internal.h), found from its handle by
 * index and generation; an intrusive timer's is the caller's own, which
 * bw_timer_add/bw_timer_cancel take directly: no pool, no handle, no
 * generation check, and cancel is an unlink.  gen tells them apart (0:
 * intrusive) where it matters: fire (a record goes back to the pool, an
 * intrusive timer is idle, and is made idle before its callback so that
 * the callback may free it), and foreach/drain (records by index, then
 * intrusive timers by walking the slots, lists and heap).
 *
 * Bitmaps.  Every slot has an occupied and a full bit, 64 to a word: the
 * ring's 64 words, then one word per gear.  A summary word has a bit per
 * ring word that is not empty.  The ring's next event is a ctz of now's
 * word masked to the slots after now, or else a rotate of the summary by
 * now's word, a ctz and a ctz of the word found; a gear's next event is
 * one rotate by now's digit and one ctz; the first free slot in probe
 * order is a 64-bit window of the full map and one ctz (exact mode's
 * backward probe in a gear: a rotate of the gear's word and one clz).
 * The summary bit is set only by a word's first slot.  The wheel caches
 * its next event, and next's ring slot beside it; emptying that slot only
 * marks the cache dirty, one compare, so the minimum is recomputed after
 * removals, once, usually from the ring alone (gear.c).  A dirty cache is
 * never later than the minimum, since removals only raise it: a poll that
 * stops short of it knows without recomputing that nothing is due.  A
 * cancel that empties a gear slot (rare: its timer was armed 4096 ticks
 * ahead or more) computes that slot's event from now's digit and
 * recomputes the cache at once if it was the cached one, and leaves it
 * alone otherwise; so a far timer cancelled and armed again between idle
 * polls costs them no scan, whatever the gap (bw_gear_emptied).
 *
 * Precision modes.  They differ only in the gears; a ring slot holds
 * timers of its own tick (or displaced to it by probing, below) in both.
 *   exact   A timer sits in the gear slot containing t and the slot's event
 *           is its start, at or before t.  When a gear slot comes due its
 *           timers are re-slotted relative to the new now: a timer whose t
 *           has arrived fires, the others drop to a finer gear or the
 *           ring.  A timer therefore fires at the first poll reaching tick
 *           t + p, where p < max_probes is its displacement by ring
 *           probing.  It moves at most once per gear it descends through
 *           (plus once per spill, below), and not at all below 4096 ticks:
 *           the poll that reaches a ring slot only fires it, so no poll
 *           pays for a burst of moves every 64 ticks, and the moves left
 *           come every 4096 ticks at most, for timers armed further ahead.
 *   coarse  The seed's no-cascading behaviour, rounded up, in the gears: a
 *           timer sits in the slot starting at or after t (key =
 *           ceil(t / 64^g)) and fires when that slot comes due: late by
 *           less than 64^g * (1 + p) ticks, with p its probe displacement.
 *           In the ring's reach it fires on tick t + p, as in exact mode:
 *           never later than the 64-tick slots it used to round up to.
 *
 * Capacity.  slot_cap bounds every slot.  A full home slot tries other
 * slots, max_probes in all: the ring (and every gear in coarse mode)
 * forward, later, which is the displacement above; exact mode's gears
 * backward, into earlier slots still ahead of now, whose re-slot puts the
 * timer right, so spilling costs no lateness.  When every candidate is
 * full, a plain wheel refuses the insert (BW_EFULL: the caller keeps its
 * data) and a failover wheel puts the timer in its overflow heap, which
 * fires each on its own tick.  The cap is what keeps poll tails short: a
 * poll that reaches a gear slot moves at most slot_cap * max_probes timers
 * per hot deadline, where an uncapped slot (a million far timers) would
 * move tens of thousands in one poll.  The records are as many as the
 * classic layout's slots could hold, gears * 64 * slot_cap, made at
 * creation: the ring's 4096 slots can hold more, and a plain wheel whose
 * records are all pending refuses the insert with BW_EFULL too.
 *
 * The refusal window.  Far deadlines that outnumber gear 2's capped slots
 * (10,000 timers up to 10 s ahead at 1 ms: most of them beyond the ring)
 * make refusal (or, failover, the heap) the common far insert, so a
 * wheel remembers what its last gear-2 refusal proved: the run of full
 * slots around the refused one, less the slots whose probes reach past
 * the run (below it in exact mode, above it in coarse mode), is a range
 * of ticks (rf_lo, rf_n) for which arm() would find no slot either, for
 * as long as gear 2's full word and now's gear-2 slot are what they were
 * (rf_full, rf_base).  That is a function of those two alone, so no
 * cancel, poll or re-slot has to invalidate anything: an insert beyond
 * the ring in the window is refused, or goes to the heap, in a few
 * compares, before any register is saved (place_far), and any other goes
 * on to arm().  The ticks are those of the slots' home ticks in the
 * wheel's mode (coarse mode rounds up: slot k holds (k - 1) * 4096 + 1 ..
 * k * 4096), and the window starts after now's gear-2 slot ends, so no
 * tick at or before now is ever in it (refuse_learn).
 *
 * Re-slots are never refused and never probe: a timer moving down goes
 * straight to its home slot, over capacity if need be (counted as
 * overfilled).  The wheel accepted it once, so refusing it now would lose
 * it, and probing it into a later ring slot would only make it late: in
 * exact mode only timers inserted straight into the ring are ever
 * displaced.
 *
 * Poll.  A poll runs in two phases.  Collect jumps the clock from event to
 * event up to now (the cached next event makes an idle stretch free),
 * re-slots gear slots as they come due and moves every due timer to a
 * ripe list - a slot whose timers are all due (a ring slot, or any slot in
 * coarse mode) is spliced over whole - leaving the clock at now.  Fire
 * then runs the callbacks in tick order.  So a callback sees a consistent
 * wheel: it may insert and cancel (a ripe timer it cancels does not fire),
 * anything it arms counts from now, and anything it arms at or before now
 * waits on the due list for the next poll - a callback can never keep a
 * poll going.  A poll limit (bw_wheel_set_poll_limit) bounds the timers
 * one poll takes out of the heap, the one store without a cap.  At the
 * limit the heap's due timers stay put (the backlog) while the clock and
 * the slots go on to now; each later poll takes the next limit's worth
 * after its slots' timers.  So a burst of 200,000 overflowed timers at one
 * deadline costs a poll per limit's worth instead of one long poll, and
 * timers due just after it, in slots, are not held up by it: the backlog
 * comes late (never early), the slots on time.  While there is a backlog
 * the next-event cache counts the slots alone, and next_deadline is now.
 *
 * Costs.  insert: a multiply by the tick's reciprocal and a shift (no
 * division), one compare against the ring's reach and one of the slot's
 * room (for more than this timer: the one that fills a slot is
 * place_far's), a few bit operations, one branch-free list push, all
 * inline and a leaf; the due list, the gears (a count-leading-zeros picks
 * one), probing and refusals are one tail call further (place_far; a
 * refusal in the window above about 19 instructions there, 50 in all, in
 * either mode): O(1), in the trading simulation (bench/callgrind.sh
 * --quick) about 55 instructions on x86-64 through a handle (the pool's
 * free list, linked by pointer, and the handle), 50 intrusive, call
 * included.  cancel: O(1), about 42 for a ring slot's timer through a
 * handle (lookup, generation check, free list), 26 intrusive, inline: an
 * unlink, the room back, and for a slot
 * it empties the occupied bit and one compare against next's slot; any
 * other place is one call further (O(log n) for an overflowed timer).
 * poll: O(1) when no event is due - the cached next event lets it jump
 * any number of ticks, and the check is inline: a multiply and a few
 * compares - otherwise O(events + timers moved or fired), never
 * O(elapsed ticks).  In the trading simulation (every timer under 4096
 * ticks ahead) a poll only fires: about 159-167 instructions a poll
 * averaged over its 1 ms polls, fires included, in either mode, and its
 * tail is the polls that fire several timers, not a re-slot burst.  The
 * overflow heap costs O(log n) per insert, cancel and fire.  Memory: the
 * ring's sentinels take 4096 * 16 bytes (64 KiB) per wheel of two gears
 * or more, the room array 4 bytes for each of the 4480 slot ids a wheel
 * can have (17.5 KiB, whatever its gears), and each handle record 48
 * bytes; an intrusive timer is 40 bytes of the caller's.  Nothing on the
 * plain wheel allocates after bw_wheel_new().
 */
#include <stdlib.h>
#include <string.h>

#include "wheel-internal.h"

/* bitwheel.h promises callers 40 bytes on LP64. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct bw_timer) == 40,
	       "struct bw_timer is not the 40 bytes bitwheel.h documents");

static void *mem_raw(const struct bw_allocator *a, void *p, size_t old_size,
		     size_t new_size)
{
	if (a->fn)
		return a->fn(a->ctx, p, old_size, new_size);
	if (new_size == 0) {
		free(p);
		return NULL;
	}
	return realloc(p, new_size);
}

void *bw_mem(struct bw_wheel *w, void *p, size_t old_size, size_t new_size)
{
	void *r = mem_raw(&w->alloc, p, old_size, new_size);

	if (new_size == 0)
		w->footprint -= old_size;
	else if (r)
		w->footprint = w->footprint - old_size + new_size;
	return r;
}

static inline unsigned min_u(unsigned a, unsigned b)
{
	return a < b ? a : b;
}

/* The highest gear with a slot starting at tick ev. */
static inline unsigned gears_at(const struct bw_wheel *w, uint64_t ev)
{
	unsigned g = ev ? (unsigned)__builtin_ctzll(ev) / 6 : BW_MAX_GEARS;

	return min_u(g, w->cfg.gears - 1);
}

/*
 * 64 bits of a bitmap from slot position pos on, wrapping at the end of
 * its level's words (words + 1 of them, a power of two): bit 0 is pos.
 */
static inline uint64_t map_window(const uint64_t *map, unsigned pos,
				  unsigned words)
{
	unsigned k = pos / 64, b = pos % 64;

	if (!b)
		return map[k];
	return map[k] >> b | map[(k + 1) & words] << (64 - b);
}

/*
 * A timer whose home slot, key in gear g (g = 0: the ring, whose keys are
 * ticks), is full: the cold half of place().  Exact mode, gear g >= 2: the
 * first slot not full of key - 1, key - 2, ... (max_probes in all, home
 * included), never the current slot, whose re-slot is past.  Any of them
 * puts the timer right: it is re-slotted at that slot's start, before its
 * tick.  The gear's free slots rotated by key put key - j at bit 64 - j,
 * so the top lim bits are the candidates and a clz finds the first.
 * Otherwise the first slot not full after key, within max_probes and
 * ahead of now: a window of the full map and one ctz.  *keyp gets the
 * slot found, or BW_EFULL comes back.
 */
static inline int
probe(const struct bw_wheel *w, unsigned g, uint64_t *keyp)
{
	uint64_t key = *keyp, ahead = key - (w->now >> (6 * g));
	uint64_t mask = g ? BW_SLOTS - 1 : w->ring_mask;
	const uint64_t *map = g ? &w->full[bw_gear_word(g)] : w->full;
	unsigned lim = w->cfg.max_probes - 1, j;
	uint64_t avail;

	if (g && w->cfg.precision == BW_EXACT) {
		/* lim < 64: max_probes <= 64 and ahead <= 63. */
		lim = min_u(lim, (unsigned)ahead - 1);
		avail = rotr64(~*map, (unsigned)key) & ~(~0ull >> lim);
		if (!avail)
			return BW_EFULL;
		key -= (unsigned)__builtin_clzll(avail) + 1;
	} else {
		avail = ~map_window(map, (unsigned)(key & mask),
				    (unsigned)(mask / 64));
		if (!avail || (j = (unsigned)__builtin_ctzll(avail)) > lim ||
		    j > mask - ahead)
			return BW_EFULL;
		key += j;
	}
	*keyp = key;
	return 0;
}

/*
 * The refusal window (above): after arm() found no gear-2 slot for tick
 * t, the run of full gear-2 slots around t's home slot (offsets from
 * now's slot, bit j of f; the run is lo..hi) gives every home slot that
 * arm() would find none for as well, while that word and now's gear-2
 * slot stay as they are: each of them full, and so is every probe
 * candidate.  Exact mode probes backward, the max_probes - 1 slots below
 * or all those down to now's next slot: lo + max_probes - 1 .. hi, or
 * 1 .. hi when the run reaches down to offset 1.  Coarse mode probes
 * forward, the max_probes - 1 slots above or all those up to offset 63:
 * lo .. hi - (max_probes - 1), or lo .. 62 when the run reaches 63.
 * t's own slot is among them (it was refused).  Offset 63 stays out, so
 * that a 3-gear wheel's window is in its range.  The ticks are a home
 * slot's: exact mode's slot k holds k * 4096 .. k * 4096 + 4095, coarse
 * mode's (k - 1) * 4096 + 1 .. k * 4096 (it rounds up).  Of coarse
 * offset 1, only its last tick can be beyond the ring's reach from a now
 * in slot base; the others stay out, because some are at or before now,
 * where refuse_fast()'s ring test (t - now, wrapped) would pass too and
 * send a due timer to the heap, the clock back to it and the ring's
 * later timers out a lap early.  So the window always starts after
 * slot base ends: after now, for as long as it holds.
 */
static __attribute__((noinline)) void
refuse_learn(struct bw_wheel *w, uint64_t t)
{
	uint64_t up = w->cfg.precision == BW_COARSE, base = w->now >> 12;
	uint64_t j = ((t - up) >> 12) + up - base, f, below, first, end;
	unsigned lo, hi, lim = w->cfg.max_probes - 1;

	if (w->cfg.gears < 3 || t - w->now <= w->ring_mask || j > 62)
		return;
	f = rotr64(w->full[bw_gear_word(2)], (unsigned)base);
	hi = (unsigned)j + (unsigned)__builtin_ctzll(~(f >> j)) - 1;
	below = (~f & ((1ull << j) - 1)) | 1;
	lo = 64 - (unsigned)__builtin_clzll(below);
	if (up) {
		hi = hi == 63 ? 62 : hi - lim;
		first = lo == 1 ? (base + 1) << 12 : ((base + lo - 1) << 12) + 1;
		end = ((base + hi) << 12) + 1;
	} else {
		hi = min_u(hi, 62);
		first = (base + (lo == 1 ? 1 : lo + lim)) << 12;
		end = (base + hi + 1) << 12;
	}
	w->rf_lo = first;
	w->rf_n = end - first;
	w->rf_base = base;
	w->rf_full = w->full[bw_gear_word(2)];
}

/* Whether tick t is in the refusal window, which still holds: no slot
 * takes it. */
static inline bool refuse_fast(const struct bw_wheel *w, uint64_t t)
{
	return t - w->rf_lo < w->rf_n && t - w->now > w->ring_mask &&
	       w->now >> 12 == w->rf_base &&
	       w->full[bw_gear_word(2)] == w->rf_full;
}

/* A timer no slot takes (err): a failover wheel's heap unless !spill
 * (bw_wheel_try_insert), or err. */
static inline int
overflow(struct bw_wheel *w, struct bw_timer *tm, int err, bool spill)
{
	if (!spill || !w->cfg.failover)
		return err;
	err = bw_heap_push(w, tm);
	if (!err)
		w->ctr.overflowed++;
	return err;
}

/* Slot id empty: its sentinel linked to itself, its room slot_cap. */
static inline void slot_reset(struct bw_wheel *w, unsigned id)
{
	bw_list_init(&w->slot[id]);
	w->spare[id] = (int32_t)w->cfg.slot_cap - 1;
}

/* Every slot and list empty (their bitmaps are the caller's). */
static void reset_lists(struct bw_wheel *w)
{
	size_t nslots = bw_slot_count(&w->cfg);

	for (size_t id = 0; id < nslots; id++)
		slot_reset(w, (unsigned)id);
	for (unsigned l = 0; l < BW_NLISTS; l++)
		bw_list_init(&w->list[l]);
}

static void list_push(struct bw_wheel *w, enum bw_list_id l,
		      struct bw_timer *tm)
{
	bw_list_push(&w->list[l], tm);
	tm->loc = BW_LOC_LIST + l;
}

/*
 * Arm timer tm for its deadline, at tick t: the due list when t has
 * been reached, else a slot, else (failover, spill) the heap; BW_ERANGE beyond
 * the range, BW_EFULL when a capped home slot and its probes are full.
 * place() inlines the common case, t within the ring's reach (and the range)
 * and its slot below the cap, into insert; the rest is this, out of line
 * in place_far(), with t already known, and in arm_far(), which takes
 * fire()'s re-arms whole (keeping the poll loop small).  There one
 * unsigned compare of t - now - 1 against the range sends both the due
 * and the out-of-range case off the common path.  Within the ring's reach
 * t's own slot takes it, in either mode; beyond, the gear comes from the
 * magnitude of t - now, and only a now not aligned to that gear's slots
 * can put t one slot too far ahead, into the next gear.
 */
static inline __attribute__((always_inline)) int
arm(struct bw_wheel *w, struct bw_timer *tm, uint64_t t, bool spill)
{
	uint64_t delta = t - w->now;
	uint64_t key = t, ev = t;
	unsigned g = 0, id;

	if (delta - 1 >= w->range) {
		if (t > w->now)
			return overflow(w, tm, BW_ERANGE, spill);
		list_push(w, BW_DUE, tm);
		return 0;
	}
	if (delta <= w->ring_mask) {
		id = (unsigned)(t & w->ring_mask);
	} else {
		/* Exact mode's key is floor(t / 64^g), coarse mode's
		 * ceil(t / 64^g) = floor((t - 1) / 64^g) + 1 (t > now >= 0). */
		uint64_t up = w->cfg.precision == BW_COARSE;

		for (g = bw_gear_of(delta);; g++) {
			key = ((t - up) >> (6 * g)) + up;
			if (key - (w->now >> (6 * g)) < BW_SLOTS)
				break;
		}
		id = bw_slot_id(w, g, key);
		ev = key << (6 * g);
	}
	if (bw_map_test(w->full, id)) {
		int err = probe(w, g, &key);

		if (err) {
			if (g == 2)
				refuse_learn(w, t);
			return overflow(w, tm, err, spill);
		}
		w->ctr.probed++;
		id = bw_slot_id(w, g, key);
		ev = key << (6 * g);
	}
	bw_slot_add(w, id, ev, tm);
	return 0;
}

static __attribute__((noinline)) int
arm_far(struct bw_wheel *w, struct bw_timer *tm, uint64_t t)
{
	return arm(w, tm, t, true);
}

/* Take timer tm out of wherever it is pending. */
static inline void unlink_timer(struct bw_wheel *w, struct bw_timer *tm)
{
	uint32_t loc = tm->loc;

	if (__builtin_expect(loc < BW_LOC_LIST, 1))
		bw_slot_remove(w, loc, tm);
	else if (loc == BW_LOC_HEAP)
		bw_heap_remove(w, tm);
	else
		bw_list_unlink(tm);
}

/* Pending: in a slot, the heap, the due list or this poll's ripe list. */
static inline bool is_pending(uint32_t loc)
{
	return loc < BW_LOC_FIRING;
}

/* The record a handle names, pending or not, or NULL (a stale
 * generation, or no such record). */
static inline struct bw_rec *lookup_any(const struct bw_wheel *w,
					bw_handle h)
{
	uint32_t idx = (uint32_t)h;
	struct bw_rec *r;

	if (__builtin_expect(idx < w->pool.fresh, 1))
		r = &w->pool.base[idx];
	else if (bw_pool_valid(&w->pool, idx))
		r = bw_rec_at(&w->pool, idx);
	else
		return NULL;
	return r->h == h ? r : NULL;
}

/* The pending record a handle names, or NULL. */
static inline struct bw_rec *lookup(const struct bw_wheel *w, bw_handle h)
{
	struct bw_rec *r = lookup_any(w, h);

	return r && is_pending(r->t.loc) ? r : NULL;
}

int bw_wheel_new(const struct bw_config *cfg, uint64_t now_ns,
		 struct bw_wheel **out)
{
	struct bw_allocator a = { NULL, NULL };
	struct bw_wheel *w;
	size_t size, nslots;
	int err;

	if (!cfg || !out)
		return BW_EINVAL;
	err = bw_config_validate(cfg);
	if (err)
		return err;
	if (cfg->alloc)
		a = *cfg->alloc;
	nslots = bw_slot_count(cfg);
	size = sizeof(*w) + nslots * sizeof(struct bw_link);
	w = mem_raw(&a, NULL, 0, size);
	if (!w)
		return BW_ENOMEM;
	memset(w, 0, size);
	w->cfg = *cfg;
	w->alloc = a;
	w->footprint = size;
	w->tick_ns = (uint64_t)cfg->resolution_ms * 1000000u;
	/* tick_ns >= 10^6, so tick_shift >= 19: tick_mul < 2^64 (above). */
	w->tick_shift = 63u - (unsigned)__builtin_clzll(w->tick_ns - 1);
#ifdef __SIZEOF_INT128__
	w->tick_mul = (uint64_t)((((unsigned __int128)1 << (64 + w->tick_shift)) +
				  w->tick_ns - 1) / w->tick_ns);
#endif
	w->tick_of_max = (1ull << 63) - w->tick_ns;
	w->now = now_ns / w->tick_ns;
	w->last_now = now_ns;
	w->range = bw_config_range_ticks(cfg);
	w->ring_mask = cfg->gears > 1 ? BW_RING_MAX - 1 : BW_SLOTS - 1;
	w->ring_reach = w->range < w->ring_mask ? w->range : w->ring_mask;
	bw_set_next(w, UINT64_MAX);
	reset_lists(w);
	/* A plain wheel's capacity: 64 * slot_cap per gear, as the gears'
	 * slots once were; the ring's 4096 slots may take more. */
	err = bw_pool_init(w, cfg->gears * BW_SLOTS * cfg->slot_cap);
	if (err)
		goto fail;
	*out = w;
	return 0;
fail:
	bw_wheel_free(w);
	return err;
}

void bw_wheel_free(struct bw_wheel *w)
{
	struct bw_allocator a;

	if (!w)
		return;
	bw_heap_fini(w);
	bw_pool_fini(w);
	a = w->alloc;
	mem_raw(&a, w, w->footprint, 0);
}

/* A handle record's handle, for *out (NULL: an intrusive timer). */
static inline void put_handle(const struct bw_timer *tm, bw_handle *out)
{
	if (out)
		*out = ((const struct bw_rec *)tm)->h;
}

/* After a placement that returned err: the counting and the handle (or
 * the record back to the pool). */
static inline __attribute__((always_inline)) int
settle(struct bw_wheel *w, struct bw_timer *tm, int err, bw_handle *out)
{
	if (err) {
		if (err != BW_ENOMEM)
			w->ctr.refused++;
		if (out)
			bw_pool_put(w, (struct bw_rec *)tm);
		return err;
	}
	w->ctr.inserted++;
	put_handle(tm, out);
	return 0;
}

/* place()'s cold half: arm() and settle(), out of line (below), so that
 * place() can end in a tail call and stay a leaf. */
static inline __attribute__((always_inline)) int
place_rest(struct bw_wheel *w, struct bw_timer *tm, uint64_t t, bool spill,
	   bw_handle *out)
{
	return settle(w, tm, arm(w, tm, t, spill), out);
}

/* place_rest() for handle records and, without the handle's tests, for
 * intrusive timers. */
static __attribute__((noinline)) int
place_slow(struct bw_wheel *w, struct bw_timer *tm, uint64_t t, bool spill,
	   bw_handle *out)
{
	return place_rest(w, tm, t, spill, out);
}

static __attribute__((noinline)) int
place_slow_timer(struct bw_wheel *w, struct bw_timer *tm, uint64_t t,
		 bool spill)
{
	return place_rest(w, tm, t, spill, NULL);
}

/* A timer in the refusal window on a failover wheel: the heap, as
 * arm() would have found after its probes. */
static __attribute__((noinline)) int
place_heap(struct bw_wheel *w, struct bw_timer *tm, bw_handle *out)
{
	return settle(w, tm, overflow(w, tm, BW_EFULL, true), out);
}

/* place()'s out-of-line half, spill constant (below): a tick in the
 * refusal window goes to the heap or is refused before any register is
 * saved, any other to place_rest(). */
static inline __attribute__((always_inline)) int
place_far_at(struct bw_wheel *w, struct bw_timer *tm, uint64_t t, bool spill,
	     bw_handle *out)
{
	if (refuse_fast(w, t)) {
		if (spill && w->cfg.failover)
			return place_heap(w, tm, out);
		w->ctr.refused++;
		/* No handle named the record yet and its link is as it was
		 * (the free list's): back on top, generation unchanged. */
		if (out)
			w->pool.free = (struct bw_rec *)tm;
		return BW_EFULL;
	}
	if (!out)
		return place_slow_timer(w, tm, t, spill);
	return place_slow(w, tm, t, spill, out);
}

static __attribute__((noinline)) int
place_far(struct bw_wheel *w, struct bw_timer *tm, uint64_t t, bw_handle *out)
{
	return place_far_at(w, tm, t, true, out);
}

static __attribute__((noinline)) int
place_far_try(struct bw_wheel *w, struct bw_timer *tm, uint64_t t,
	      bw_handle *out)
{
	return place_far_at(w, tm, t, false, out);
}

static __attribute__((noinline)) int
place_far_timer(struct bw_wheel *w, struct bw_timer *tm, uint64_t t)
{
	return place_far_at(w, tm, t, true, NULL);
}

static __attribute__((noinline)) int
place_far_timer_try(struct bw_wheel *w, struct bw_timer *tm, uint64_t t)
{
	return place_far_at(w, tm, t, false, NULL);
}

/*
 * Arm timer tm (a handle record, whose handle goes to *out, or an
 * intrusive timer, out NULL) at deadline_ns with data, and count it; with
 * !spill, refuse what no slot takes even on a failover wheel (a record
 * goes back to the pool).  Inline, the common case: t within the ring's
 * reach (and the range) and its slot with room for more than this timer;
 * the rest is place_far(), the timer that fills a slot (and sets its
 * full bit) included, so that this path has no full bit to set
 * (bw_slot_add's test folds away: 5 instructions an insert).
 */
static inline __attribute__((always_inline)) int
place(struct bw_wheel *w, struct bw_timer *tm, uint64_t deadline_ns,
      void *data, bool spill, bw_handle *out)
{
	uint64_t t;
	size_t id;

	/* First, so that the arguments need not outlive the multiply. */
	tm->deadline = deadline_ns;
	tm->data = data;
	t = bw_tick_of(w, deadline_ns);
	id = (size_t)(t & w->ring_mask);
	if (__builtin_expect(t - w->now - 1 < w->ring_reach, 1) &&
	    __builtin_expect(w->spare[id] > 0, 1)) {
		if (id >= BW_RING_MAX)
			__builtin_unreachable(); /* a ring slot: summary word 0 */
		/* The handle first: out need not outlive the slot's work. */
		put_handle(tm, out);
		bw_slot_add(w, id, t, tm);
		w->ctr.inserted++;
		return 0;
	}
	if (!out)
		return spill ? place_far_timer(w, tm, t)
			     : place_far_timer_try(w, tm, t);
	return spill ? place_far(w, tm, t, out) : place_far_try(w, tm, t, out);
}

static int insert_grow(struct bw_wheel *w, uint64_t deadline_ns, void *data,
		       bw_handle *out, bool spill);

/* A free record, O(1), then place(); growing the pool is insert_grow()'s,
 * a tail call, so that insert stays a leaf. */
static inline __attribute__((always_inline)) int
insert(struct bw_wheel *w, uint64_t deadline_ns, void *data, bw_handle *out,
       bool spill)
{
	struct bw_pool *p;
	struct bw_rec *r;

	if (!w || !out)
		return BW_EINVAL;
	p = &w->pool;
	r = p->free;
	if (__builtin_expect(!r, 0))
		return insert_grow(w, deadline_ns, data, out, spill);
	p->free = (struct bw_rec *)r->t.u.link.next;
	return place(w, &r->t, deadline_ns, data, spill, out);
}

/* No free record: more (pool.c: a failover wheel's pool grows, a plain
 * wheel's is BW_EFULL), then the insert. */
static __attribute__((noinline)) int
insert_grow(struct bw_wheel *w, uint64_t deadline_ns, void *data,
	    bw_handle *out, bool spill)
{
	int err = bw_pool_grow(w);

	if (err) {
		if (err != BW_ENOMEM)
			w->ctr.refused++;
		return err;
	}
	return insert(w, deadline_ns, data, out, spill);
}

int bw_wheel_insert(struct bw_wheel *w, uint64_t deadline_ns, void *data,
		    bw_handle *out)
{
	return insert(w, deadline_ns, data, out, true);
}

int bw_wheel_try_insert(struct bw_wheel *w, uint64_t deadline_ns, void *data,
			bw_handle *out)
{
	return insert(w, deadline_ns, data, out, false);
}

/* An intrusive timer: the caller's struct is the record, gen 0. */
static inline __attribute__((always_inline)) int
timer_add(struct bw_wheel *w, struct bw_timer *t, uint64_t deadline_ns,
	  void *data, bool spill)
{
	if (!w || !t)
		return BW_EINVAL;
	/* Idle, so initialised: its gen is 0 (nothing else writes it). */
	if (__builtin_expect(t->loc != BW_LOC_IDLE, 0))
		return is_pending(t->loc) ? BW_EPENDING : BW_EINVAL;
	return place(w, t, deadline_ns, data, spill, NULL);
}

void bw_timer_init(struct bw_timer *t)
{
	if (t)
		*t = (struct bw_timer){ .loc = BW_LOC_IDLE };
}

int bw_timer_add(struct bw_wheel *w, struct bw_timer *t, uint64_t deadline_ns,
		 void *data)
{
	return timer_add(w, t, deadline_ns, data, true);
}

int bw_timer_try_add(struct bw_wheel *w, struct bw_timer *t,
		     uint64_t deadline_ns, void *data)
{
	return timer_add(w, t, deadline_ns, data, false);
}

bool bw_timer_pending(const struct bw_timer *t)
{
	return t && is_pending(t->loc);
}

/* Take pending timer tm out, wherever it is, and count it cancelled. */
static inline __attribute__((always_inline)) void
cancel(struct bw_wheel *w, struct bw_timer *tm)
{
	unlink_timer(w, tm);
	w->ctr.cancelled++;
}

/* Done with timer tm for good: a handle record goes back to the pool, an
 * intrusive timer is idle. */
static inline void retire(struct bw_wheel *w, struct bw_timer *tm)
{
	if (tm->gen)
		bw_pool_put(w, (struct bw_rec *)tm);
	else
		tm->loc = BW_LOC_IDLE;
}

/*
 * The cancels' out-of-line halves, tail calls of theirs: a pending timer
 * anywhere but a ring slot (a gear slot, the heap, a list) out, and a
 * handle record back to the pool (its data to *data_out unless that is
 * NULL), an intrusive timer idle.  The inline halves take a ring slot's
 * timer: ring slot ids are below BW_RING_MAX on every wheel (a one-gear
 * wheel's are 0..63), every other place, pending or not, is above, so
 * the handle's half tells whether its record is pending here.
 */
static __attribute__((noinline)) int
cancel_far(struct bw_wheel *w, struct bw_rec *r, void **data_out)
{
	if (!is_pending(r->t.loc))
		return BW_ENOTFOUND;
	cancel(w, &r->t);
	if (data_out)
		*data_out = r->t.data;
	bw_pool_put(w, r);
	return 0;
}

static __attribute__((noinline)) int
timer_cancel_far(struct bw_wheel *w, struct bw_timer *t)
{
	cancel(w, t);
	t->loc = BW_LOC_IDLE;
	return 0;
}

int bw_wheel_cancel(struct bw_wheel *w, bw_handle h, void **data_out)
{
	struct bw_rec *r;

	if (!w)
		return BW_EINVAL;
	r = lookup_any(w, h);
	if (!r)
		return BW_ENOTFOUND;
	if (__builtin_expect(r->t.loc >= BW_RING_MAX, 0))
		return cancel_far(w, r, data_out);
	if (r->t.loc > w->ring_mask)
		__builtin_unreachable(); /* a one-gear wheel's ids are 0..63 */
	if (data_out)
		*data_out = r->t.data;
	cancel(w, &r->t);
	bw_pool_put(w, r);
	return 0;
}

int bw_timer_cancel(struct bw_wheel *w, struct bw_timer *t)
{
	if (!w || !t)
		return BW_EINVAL;
	/* One compare for the common case, a ring slot (above); every
	 * other place, pending or not, is above BW_RING_MAX. */
	if (__builtin_expect(t->loc >= BW_RING_MAX, 0)) {
		if (!is_pending(t->loc))
			return BW_ENOTFOUND;
		return timer_cancel_far(w, t);
	}
	if (t->loc > w->ring_mask)
		__builtin_unreachable(); /* a one-gear wheel's ids are 0..63 */
	cancel(w, t);
	t->loc = BW_LOC_IDLE;
	return 0;
}

/* Give a timer's data back to its owner through the drop callback. */
static void drop(struct bw_wheel *w, struct bw_timer *tm, int reason,
		 const struct bw_callbacks *cb)
{
	void *data = tm->data;

	w->ctr.lost++;
	retire(w, tm);
	if (cb->drop)
		cb->drop(data, reason, cb->ctx);
}

/*
 * Fire tm.  A handle record is marked firing, so that its handle cannot
 * cancel it while its callback decides its fate; an intrusive timer is
 * idle from here on, so that its callback may free it (returning 0) or
 * add it again itself (then the wheel leaves it be).
 */
static inline __attribute__((always_inline)) void
fire(struct bw_wheel *w, struct bw_timer *tm, uint64_t now_ns,
     const struct bw_callbacks *cb, struct bw_poll_result *res)
{
	bool handle = tm->gen != 0; /* tm may be gone after the callback */
	uint64_t again;
	int err;

	tm->loc = handle ? BW_LOC_FIRING : BW_LOC_IDLE;
	w->ctr.fired++;
	res->fired++;
	/* Records never move, so a handle record outlives whatever the
	 * callback does. */
	again = cb->fire(tm->data, now_ns, cb->ctx);
	if (!again) {
		if (handle)
			bw_pool_put(w, (struct bw_rec *)tm);
		return;
	}
	if (!handle && tm->loc != BW_LOC_IDLE)
		return;
	tm->deadline = again;
	err = arm_far(w, tm, bw_tick_of(w, again));
	if (err) {
		res->rearm_failed++;
		drop(w, tm, err, cb);
		return;
	}
	w->rearmed++;
	res->rearmed++;
}

/* Empty slot id, which comes due now, in its bitmaps and cache. */
static inline void slot_clear(struct bw_wheel *w, unsigned id)
{
	slot_reset(w, id);
	bw_occ_clear(w, id);
	w->full[id / 64] &= ~(1ull << (id % 64));
	w->dirty = true;
}

/*
 * Move the whole of list l (not empty) to the tail of the ripe list,
 * relabelling each record so that a callback can still cancel it; l is
 * left for the caller to reset.
 */
static inline void ripen(struct bw_wheel *w, const struct bw_link *l)
{
	for (struct bw_link *n = l->next; n != l; n = n->next)
		bw_timer_of(n)->loc = BW_LOC_LIST + BW_RIPE;
	bw_list_splice(&w->list[BW_RIPE], l);
}

/*
 * An exact mode gear slot came due, and now is its start: set aside what
 * is due and move the rest down.  now is aligned to this gear's slots, so
 * a timer t - now ahead belongs in the ring when that is under its reach,
 * else in gear bw_gear_of(t - now), home slot t >> 6g, always within 63
 * slots: no range check and no loop.  Re-slots never probe (an accepted
 * timer is not refused or made late now): a full home slot just takes one
 * more, counted as overfilled.
 */
static void reslot_slot(struct bw_wheel *w, unsigned id)
{
	struct bw_link *end = &w->slot[id], *n = end->next;

	/* The last timer still links to the sentinel, which is all the walk
	 * needs of it; no re-slot comes back to this slot (a finer gear or
	 * the ring). */
	slot_clear(w, id);
	while (n != end) {
		struct bw_timer *tm = bw_timer_of(n);
		uint64_t t = bw_tick_of(w, tm->deadline), key = t;
		unsigned g = 0, to;

		n = n->next;
		if (t <= w->now) {
			list_push(w, BW_RIPE, tm);
		} else {
			if (t - w->now > w->ring_mask) {
				g = bw_gear_of(t - w->now);
				key = t >> (6 * g);
			}
			to = bw_slot_id(w, g, key);
			if (bw_map_test(w->full, to))
				w->ctr.overfilled++;
			bw_slot_add(w, to, key << (6 * g), tm);
			w->ctr.reslotted++;
		}
	}
}

/* While the heap has a backlog, its events are no clock steps (they are
 * due already): the next-event cache counts the slots alone.  When the
 * heap counts again, its minimum joins the cache, which stays a lower
 * bound while dirty. */
static void set_backlog(struct bw_wheel *w, bool on)
{
	w->backlog = on;
	w->dirty = true;
	if (!on && w->heap.n) {
		uint64_t tick = bw_tick_of(w, w->heap.pos[0]->deadline);

		if (tick < w->next)
			bw_set_next(w, tick);
	}
}

/*
 * Move the heap's timers due by tick ev to the ripe list, at most *budget
 * of them: false when the budget ran out with one still due.
 */
static bool take_heap(struct bw_wheel *w, uint64_t ev, size_t *budget)
{
	while (w->heap.n) {
		struct bw_timer *tm = w->heap.pos[0];

		if (bw_tick_of(w, tm->deadline) > ev)
			break;
		if (*budget == 0)
			return false;
		--*budget;
		bw_heap_remove(w, tm);
		list_push(w, BW_RIPE, tm);
	}
	return true;
}

/* The two phases' bodies: inline into poll_run() for bw_wheel_poll(), and
 * out of line as bw_poll_collect_due() and bw_poll_fire() for the dual
 * wheel. */
static inline __attribute__((always_inline)) void
collect_due(struct bw_wheel *w, uint64_t target)
{
	struct bw_link *due = &w->list[BW_DUE];
	bool exact = w->cfg.precision == BW_EXACT;
	size_t budget = w->poll_limit ? w->poll_limit : SIZE_MAX;
	uint64_t ev;

	w->in_poll = true;
	if (!bw_list_empty(due)) {
		ripen(w, due);
		bw_list_init(due);
	}
	while ((ev = bw_next_event(w)) <= target) {
		unsigned id = (unsigned)(ev & w->ring_mask);

		w->now = ev;
		/* Only gears whose slots start at ev can be due: gear g's slots
		 * start at multiples of 64^g (no gear's, most ticks: one test).
		 * The coarsest go first: a timer there was armed further ahead,
		 * so most likely earlier, than the ring slot's timers of the
		 * same tick. */
		for (unsigned g = ev % bw_pow64(2) ? 0 : gears_at(w, ev); g > 1;
		     g--) {
			unsigned gid = bw_slot_id(w, g, ev >> (6 * g));

			if (!bw_map_test(w->occ, gid))
				continue;
			if (exact) {
				reslot_slot(w, gid);
			} else {
				ripen(w, &w->slot[gid]);
				slot_clear(w, gid);
			}
		}
		/* Every timer of a ring slot is due: the list moves whole. */
		if (bw_map_test(w->occ, id)) {
			ripen(w, &w->slot[id]);
			slot_clear(w, id);
		}
		if (!w->backlog && w->heap.n && !take_heap(w, ev, &budget))
			set_backlog(w, true);
	}
	/* Callbacks arm relative to the poll's tick, and whatever they arm
	 * at or before it waits for the next poll. */
	w->now = target;
	if (w->backlog && take_heap(w, target, &budget))
		set_backlog(w, false);
}

static inline __attribute__((always_inline)) void
fire_ripe(struct bw_wheel *w, uint64_t now_ns, const struct bw_callbacks *cb,
	  struct bw_poll_result *res)
{
	struct bw_link *ripe = &w->list[BW_RIPE];

	while (!bw_list_empty(ripe)) {
		struct bw_timer *tm = bw_timer_of(ripe->next);

		bw_list_unlink(tm);
		fire(w, tm, now_ns, cb, res);
	}
	w->in_poll = false;
}

void bw_poll_collect_due(struct bw_wheel *w, uint64_t target)
{
	collect_due(w, target);
}

void bw_poll_fire(struct bw_wheel *w, uint64_t now_ns,
		  const struct bw_callbacks *cb, struct bw_poll_result *res)
{
	fire_ripe(w, now_ns, cb, res);
}

/* Both phases in one frame; out of line, so that a poll with nothing due
 * stays a leaf. */
static __attribute__((noinline)) int
poll_run(struct bw_wheel *w, uint64_t target, uint64_t now_ns,
	 const struct bw_callbacks *cb, struct bw_poll_result *res)
{
	struct bw_poll_result unused;

	collect_due(w, target);
	fire_ripe(w, now_ns, cb, res ? res : &unused);
	return 0;
}

int bw_wheel_poll(struct bw_wheel *w, uint64_t now_ns,
		  const struct bw_callbacks *cb, struct bw_poll_result *res)
{
	uint64_t target;

	if (!w || !cb || !cb->fire)
		return BW_EINVAL;
	if (w->in_poll)
		return BW_EINPOLL;
	if (res)
		*res = (struct bw_poll_result){ 0 };
	if (!bw_poll_work(w, now_ns, &target))
		return 0;
	return poll_run(w, target, now_ns, cb, res);
}

int bw_wheel_set_poll_limit(struct bw_wheel *w, size_t max)
{
	if (!w)
		return BW_EINVAL;
	if (w->in_poll)
		return BW_EINPOLL;
	w->poll_limit = max;
	return 0;
}

int bw_wheel_next_deadline(struct bw_wheel *w, uint64_t *out_ns)
{
	uint64_t t;

	if (!w || !out_ns)
		return BW_EINVAL;
	if (!bw_list_empty(&w->list[BW_DUE]) || w->backlog)
		t = w->now;
	else
		t = bw_next_event(w);
	if (t == UINT64_MAX)
		return BW_EEMPTY;
	*out_ns = t > UINT64_MAX / w->tick_ns ? UINT64_MAX : t * w->tick_ns;
	return 0;
}

int bw_wheel_until_next(struct bw_wheel *w, uint64_t now_ns, uint64_t *out_ns)
{
	uint64_t next;
	int err = bw_wheel_next_deadline(w, &next);

	if (err)
		return err;
	if (!out_ns)
		return BW_EINVAL;
	*out_ns = next > now_ns ? next - now_ns : 0;
	return 0;
}

int bw_wheel_deadline(const struct bw_wheel *w, bw_handle h, uint64_t *out_ns)
{
	const struct bw_rec *r;

	if (!w || !out_ns)
		return BW_EINVAL;
	r = lookup(w, h);
	if (!r)
		return BW_ENOTFOUND;
	*out_ns = r->t.deadline;
	return 0;
}

size_t bw_wheel_pending(const struct bw_wheel *w)
{
	return w ? bw_pending(w) : 0;
}

size_t bw_wheel_overflow_pending(const struct bw_wheel *w)
{
	return w ? w->heap.n : 0;
}

void bw_wheel_counters(const struct bw_wheel *w, struct bw_counters *out)
{
	if (w && out)
		*out = w->ctr;
}

size_t bw_wheel_footprint(const struct bw_wheel *w)
{
	return w ? w->footprint : 0;
}

uint64_t bw_wheel_range_ns(const struct bw_wheel *w)
{
	if (!w)
		return 0;
	return w->range > UINT64_MAX / w->tick_ns ? UINT64_MAX
						   : w->range * w->tick_ns;
}

const struct bw_config *bw_wheel_config(const struct bw_wheel *w)
{
	return w ? &w->cfg : NULL;
}

/* Each intrusive timer of list l; drain makes each idle before its visit
 * (the visitor may free it). */
static void visit_list(struct bw_link *l, bw_visit_fn fn, void *ctx,
		       bool drain)
{
	for (struct bw_link *n = l->next, *next; n != l; n = next) {
		struct bw_timer *tm = bw_timer_of(n);

		next = n->next;
		if (tm->gen)
			continue;
		if (drain)
			tm->loc = BW_LOC_IDLE;
		fn(0, tm->deadline, tm->data, ctx);
	}
}

/*
 * Every pending timer: the handle records in index order, then the
 * intrusive timers slot by slot, list by list and in the heap.  A drain
 * takes the records out one by one, so that what is left is intrusive
 * timers alone, which it then takes out all at once.
 */
static int visit(struct bw_wheel *w, bw_visit_fn fn, void *ctx, bool drain)
{
	struct bw_pool *p = &w->pool;
	size_t nslots = bw_slot_count(&w->cfg);

	for (uint32_t idx = 0; idx < p->size; idx++) {
		struct bw_rec *r;

		if (!bw_pool_valid(p, idx))
			continue;
		r = bw_rec_at(p, idx);
		if (!is_pending(r->t.loc))
			continue;
		fn(r->h, r->t.deadline, r->t.data, ctx);
		if (drain) {
			unlink_timer(w, &r->t);
			bw_pool_put(w, r);
			w->drained++;
		}
	}
	if (drain && !bw_pending(w))
		return 0;
	for (size_t id = 0; id < nslots; id++)
		visit_list(&w->slot[id], fn, ctx, drain);
	for (unsigned l = 0; l < BW_NLISTS; l++)
		visit_list(&w->list[l], fn, ctx, drain);
	for (uint32_t i = 0; i < w->heap.n; i++) {
		struct bw_timer *tm = w->heap.pos[i];

		if (tm->gen)
			continue;
		if (drain)
			tm->loc = BW_LOC_IDLE;
		fn(0, tm->deadline, tm->data, ctx);
	}
	if (!drain)
		return 0;
	reset_lists(w);
	memset(w->occ, 0, sizeof(w->occ));
	memset(w->full, 0, sizeof(w->full));
	memset(w->sum, 0, sizeof(w->sum));
	w->heap.n = 0;
	w->drained += bw_pending(w);
	w->backlog = false;
	w->dirty = true;
	return 0;
}

int bw_wheel_foreach(const struct bw_wheel *w, bw_visit_fn fn, void *ctx)
{
	if (!w || !fn)
		return BW_EINVAL;
	/* visit() only writes when asked to remove. */
	return visit((struct bw_wheel *)w, fn, ctx, false);
}

int bw_wheel_drain(struct bw_wheel *w, bw_visit_fn fn, void *ctx)
{
	if (!w || !fn)
		return BW_EINVAL;
	if (w->in_poll)
		return BW_EINPOLL;
	return visit(w, fn, ctx, true);
}
