/*
 * wheel-internal.h - the data layout shared by libbitwheel's modules.
 *
 * A wheel is four parts (wheel.c explains how they work together):
 *   timers    every timer is a struct bw_timer (bitwheel.h; 40 bytes on
 *             LP64): a list link (or its heap position; a free
 *             record's link.next is the free list's), deadline, data,
 *             gen and loc.  A
 *             handle timer's is the head of a 48-byte pool record (struct
 *             bw_rec: the timer plus its handle, whose generation is
 *             odd in 1..2^31-1); an
 *             intrusive timer is the caller's struct, gen 0.  Every list
 *             and the heap link timers by pointer, so both kinds share
 *             them.
 *   pool      the handle records in a chunked array, named by index; a
 *             handle is (generation << 32 | index).  Free records form a
 *             singly linked list through t.u.link.next, by pointer, so
 *             that taking one needs no index arithmetic.
 *   slots     named by a slot id, which a timer's loc holds: first the
 *             ring, one slot per tick (ids 0..ring_mask), then 64 slots
 *             for each gear g >= 2 (ids 64 * bw_gear_word(g) + digit).
 *             Each is its list's sentinel link (16 bytes, in one
 *             wheel-wide array at the wheel's end) and its room below
 *             slot_cap (spare[], 4 bytes, an array of every id a wheel
 *             can have, in the wheel).  Two bitmaps over the ids,
 *             occupied and full, as 64-bit words (word id / 64: the
 *             ring's words first, then one word per gear), and a summary
 *             of the occupied words (bit k of sum[k / 64]: word k is not
 *             empty), so that the ring's next event is two ctz away.  One
 *             cached next-event tick for the whole wheel, and its ring
 *             slot; one refusal window (ticks for which the wheel's
 *             gear 2 has no slot while its full word and now's gear-2
 *             slot hold).
 *   due       two lists of timers whose tick has already been reached
 *             (sentinel links in the wheel); the one not being fired
 *             takes new arrivals.
 *   heap      the failover wheel's overflow store, an indexed binary heap
 *             of timer pointers ordered by (deadline, arrival).
 * A timer's loc says where it is, so cancel can unlink it in O(1).
 */
#ifndef BW_WHEEL_INTERNAL_H
#define BW_WHEEL_INTERNAL_H

#include "bitwheel.h"

#define BW_GEN_LIMIT (1u << 31)      /* generations: odd, 1..2^31-1      */
#define BW_GEN_ONE (1ull << 32)      /* generation 1 in a handle          */
#define BW_CHUNK_SHIFT 12
#define BW_CHUNK (1u << BW_CHUNK_SHIFT)
#define BW_MAX_RECORDS (UINT32_MAX - 1)

/* The ring: 64 * 64 one-tick slots (gears 0 and 1 of a classic wheel),
 * or 64 on a one-gear wheel; its bitmaps take BW_RING_WORDS words at
 * most, and each coarser gear one more. */
#define BW_RING_MAX (BW_SLOTS * BW_SLOTS)
#define BW_RING_WORDS (BW_RING_MAX / 64)
#define BW_MAP_WORDS (BW_RING_WORDS + BW_MAX_GEARS - 2)

/* The wheel's lists besides the slots (struct bw_wheel.list). */
enum bw_list_id {
	BW_DUE,                /* tick reached: fires at the next poll     */
	BW_RIPE,               /* collected by this poll, about to fire    */
	BW_NLISTS
};

/* timer.loc values besides a slot id (below 64 * BW_MAP_WORDS, so below
 * BW_LOC_LIST: "in a slot" is one compare).  Every pending place is below
 * BW_LOC_FIRING, so "pending" is one compare too.  An intrusive timer
 * that is not pending is BW_LOC_IDLE (also while its callback runs: the
 * callback may free it); a handle record is BW_LOC_FIRING then, and
 * BW_LOC_FREE on the free list. */
enum bw_loc {
	BW_LOC_LIST = 0xfff0,  /* + enum bw_list_id                      */
	BW_LOC_HEAP = 0xfffc,  /* overflow heap; u.heap is its place       */
	BW_LOC_FIRING = 0xfffd,/* its callback runs now: not pending       */
	BW_LOC_IDLE = 0xfffe,  /* intrusive, not pending                   */
	BW_LOC_FREE = 0xffff,
};

/*
 * A handle timer's record: the same struct bw_timer an intrusive timer
 * is (so that every slot, list and the heap hold both kinds alike), its
 * gen 1, and the handle that names it now: its generation (odd, in the
 * high half) and its index in the pool (the low half), whole, so that an
 * insert hands it out and a cancel compares it in one move each.  An
 * intrusive timer's gen is 0: that is how fire and visit tell the kinds
 * apart.
 */
struct bw_rec {
	struct bw_timer t;
	bw_handle h;
};

struct bw_pool {
	struct bw_rec **chunk; /* chunk[i] holds records i*BW_CHUNK...     */
	struct bw_rec *base;   /* the creation-time block behind chunk[0..nbase) */
	uint32_t nchunks, nbase, chunk_cap;
	uint32_t nbase_records;/* records in the base block                */
	uint32_t fresh;        /* base records threaded so far: the rest
				  were never used and may be untouched memory */
	uint32_t size;         /* one past the highest record index        */
	struct bw_rec *free;   /* free list head, linked by t.u.link.next
				  (NULL: none)                             */
};

/*
 * A list is circular through its sentinel, a struct bw_link of the
 * wheel's (a slot or one of the wheel's lists), and each timer's u.link:
 * empty, the sentinel links to itself.
 */

struct bw_heap {
	struct bw_timer **pos; /* pos[i] = the timer at heap position i    */
	uint32_t n, cap;
	uint32_t arrivals;     /* orders equal deadlines first come, first fired */
};

struct bw_wheel {
	int32_t spare[64 * BW_MAP_WORDS]; /* by slot id: slot_cap - 1 -
					     timers held, negative once the
					     slot is full (a re-slot may
					     take it past slot_cap)       */
	struct bw_config cfg;
	struct bw_allocator alloc;
	uint64_t tick_ns;
	uint64_t tick_mul;     /* ceil(2^(64 + tick_shift) / tick_ns)      */
	unsigned tick_shift;   /* ceil(log2(tick_ns)) - 1                  */
	uint64_t tick_of_max;  /* largest deadline bw_tick_of() multiplies */
	uint64_t now;          /* current tick: every tick <= now is done
				  (but a backlog's heap timers); an arm at
				  a tick <= now joins the due list         */
	uint64_t range;        /* plain wheel accepts deltas <= range ticks */
	uint64_t ring_mask;    /* ring slots - 1: 4095, or 63 with one gear */
	uint64_t ring_reach;   /* min(range, ring_mask): the furthest tick
				  ahead that arm()'s inline case takes     */
	uint64_t rf_lo, rf_n;  /* refusal window: ticks rf_lo .. rf_lo +
				  rf_n - 1, when beyond the ring, find
				  no slot (BW_EFULL or the heap) while
				  gear 2's full word is rf_full and
				  now >> 12 is rf_base; rf_n 0: none
				  (wheel.c, the refusal window)          */
	uint64_t rf_full, rf_base;
	uint64_t next;         /* cached min event tick over slots and heap */
	uint32_t next_slot;    /* next & ring_mask: the ring slot whose
				  emptying makes next stale (bw_set_next) */
	uint64_t last_now;     /* now_ns of the last poll                  */
	bool dirty;            /* next may be too early (never too late):
				  recompute it before relying on more than
				  that nothing comes due before it         */
	bool backlog;          /* a poll met poll_limit: the heap holds
				  timers due at or before now, and next
				  counts the slots alone                   */
	size_t poll_limit;     /* most heap timers a poll takes; 0: all    */
	struct bw_link list[BW_NLISTS]; /* sentinels, by enum bw_list_id  */
	bool in_poll;
	uint64_t rearmed;      /* re-arms placed (pending, below)          */
	uint64_t drained;      /* timers bw_wheel_drain took out           */
	size_t footprint;
	struct bw_counters ctr;
	struct bw_pool pool;
	struct bw_heap heap;
	uint64_t sum[2];       /* bit k of sum[k / 64]: occ[k] != 0        */
	uint64_t occ[BW_MAP_WORDS];  /* bit id % 64 of word id / 64: slot id
					holds a timer                      */
	uint64_t full[BW_MAP_WORDS]; /* ... holds >= slot_cap timers        */
	struct bw_link slot[];  /* sentinels, bw_slot_count(cfg), by slot id */
};

/* Timers pending: not a counter of its own, so that insert, cancel and
 * fire each keep one count, not two. */
static inline size_t bw_pending(const struct bw_wheel *w)
{
	return (size_t)(w->ctr.inserted + w->rearmed - w->ctr.cancelled -
			w->ctr.fired - w->drained);
}

/* Memory, through the configured allocator, with footprint accounting. */
void *bw_mem(struct bw_wheel *w, void *p, size_t old_size, size_t new_size);

/* pool.c */
int bw_pool_init(struct bw_wheel *w, uint32_t nrecords);
void bw_pool_fini(struct bw_wheel *w);
/* More free records: the base block's next untouched ones, else a chunk
 * (failover wheels only, else BW_EFULL). */
int bw_pool_grow(struct bw_wheel *w);

static inline struct bw_rec *bw_rec_at(const struct bw_pool *p, uint32_t idx)
{
	/* The wheel's own records are one block: no chunk lookup for them. */
	if (__builtin_expect(idx < p->nbase_records, 1))
		return &p->base[idx];
	return &p->chunk[idx >> BW_CHUNK_SHIFT][idx & (BW_CHUNK - 1)];
}

/* Whether idx names an existing record (growth leaves a gap after the
 * base block's partial last chunk). */
static inline bool bw_pool_valid(const struct bw_pool *p, uint32_t idx)
{
	return idx < p->fresh ||
	       (idx >= (uint64_t)p->nbase * BW_CHUNK && idx < p->size);
}

static inline bw_handle bw_handle_make(uint32_t idx, uint32_t gen)
{
	return (uint64_t)gen << 32 | idx;
}

/* overflow.c */
int bw_heap_push(struct bw_wheel *w, struct bw_timer *t);
void bw_heap_remove(struct bw_wheel *w, struct bw_timer *t);
void bw_heap_fini(struct bw_wheel *w);

/* gear.c */
/* Recompute the wheel's next-event cache. */
uint64_t bw_next_event_scan(struct bw_wheel *w);
/* Gear slot id (not a ring slot) was emptied by a cancel: the cache is
 * recomputed if its event was the cached one. */
void bw_gear_emptied(struct bw_wheel *w, unsigned id);

/* wheel.c */
/*
 * A poll in two phases, so that a dual wheel can run both lanes' first
 * phase before any callback: collect advances the clock to now and takes
 * every due timer aside; fire then runs the callbacks with the clock
 * already at now.  Collect (bw_poll_collect, below) returns false, and
 * fire must not run, when there is nothing to fire: now is in the past,
 * or nothing is due by it (bw_poll_work); otherwise it leaves the work,
 * up to tick target, to bw_poll_collect_due.  bw_wheel_poll() runs the
 * same two phases inline.
 */
void bw_poll_collect_due(struct bw_wheel *w, uint64_t target);
void bw_poll_fire(struct bw_wheel *w, uint64_t now_ns,
		  const struct bw_callbacks *cb, struct bw_poll_result *res);

/* config.c */
uint64_t bw_config_range_ticks(const struct bw_config *cfg);

static inline uint64_t rotr64(uint64_t x, unsigned n)
{
	return (x >> (n & 63)) | (x << (-n & 63));
}

static inline uint64_t rotl64(uint64_t x, unsigned n)
{
	return (x << (n & 63)) | (x >> (-n & 63));
}

static inline uint64_t bw_pow64(unsigned g)
{
	return 1ull << (6 * g);
}

/*
 * Ticks from nanoseconds without a division, which would be the dearest
 * instruction of an insert: one multiply and one shift.  tick_mul is
 * 2^(63 + s) / tick_ns rounded up, with 2^(s-1) < tick_ns <= 2^s, and
 * tick_shift is s - 1.  For n < 2^63, n * tick_mul / 2^(63 + s) exceeds
 * n / tick_ns by less than n / 2^(63 + s) < 1 / tick_ns, too little to
 * reach the next integer: the high half of the product, shifted, is
 * floor(n / tick_ns) exactly.  Larger n (deadlines 292 years on) divide.
 */
static inline uint64_t bw_tick_div(const struct bw_wheel *w, uint64_t n)
{
#ifdef __SIZEOF_INT128__
	if (__builtin_expect(n < (1ull << 63), 1))
		return (uint64_t)(((unsigned __int128)n * w->tick_mul) >> 64) >>
		       w->tick_shift;
#endif
	return n / w->tick_ns;
}

/* The tick a poll at n ns has reached: floor(n / tick_ns). */
static inline uint64_t bw_tick_floor(const struct bw_wheel *w, uint64_t n)
{
	return bw_tick_div(w, n);
}

/* A deadline's tick, rounded up so that it never fires early:
 * floor((deadline + tick_ns - 1) / tick_ns), unless that sum wraps.  Up
 * to tick_of_max the sum is below 2^63, so the multiply needs no second
 * check. */
static inline uint64_t bw_tick_of(const struct bw_wheel *w, uint64_t deadline)
{
	if (__builtin_expect(deadline > w->tick_of_max, 0))
		return deadline / w->tick_ns + (deadline % w->tick_ns != 0);
#ifdef __SIZEOF_INT128__
	return (uint64_t)(((unsigned __int128)(deadline + w->tick_ns - 1) *
			   w->tick_mul) >> 64) >> w->tick_shift;
#else
	return bw_tick_div(w, deadline + w->tick_ns - 1);
#endif
}

/* The lowest gear able to hold a timer delta ticks ahead, delta >= 1,
 * counting from a now aligned to that gear's slots. */
static inline unsigned bw_gear_of(uint64_t delta)
{
	return (63u - (unsigned)__builtin_clzll(delta)) / 6;
}


/*
 * Slots, inline because every insert, cancel and fire goes through them.
 *
 * A slot is a list plus its spare room.  Lists are doubly linked and
 * circular through a sentinel, so that no operation branches on an end:
 * push-at-tail writes the sentinel and the old tail, unlink writes the
 * two neighbours and needs neither the list nor its slot, and tells for
 * free whether it emptied the list (the neighbours it joined are one, the
 * sentinel); a whole list moves to another's tail in O(1), and a slot
 * fires in arrival order.  Every change to a slot keeps the bitmaps
 * (occupied with its summary, full) and the wheel's cached next-event
 * tick in step; emptying the slot that held the cached minimum only marks
 * the cache dirty (the next bw_next_event() recomputes it, once, and a
 * poll that stops short of the stale value needs no recomputing).
 *
 * The slot at now's position - in the ring and in every gear - is always
 * empty between polls, so an occupied slot's distance ahead is
 * unambiguous: ring slot id is (id - now) mod ring ticks ahead, 1..ring
 * - 1, and that tick is its event; slot d of gear g is dist = (d -
 * digit(now)) mod 64 slots ahead, 1..63, and comes due at its start,
 * ((now >> 6g) + dist) << 6g.
 */

/* The bitmap word of gear g's slots, g >= 2 (gears 0 and 1 are the ring). */
static inline unsigned bw_gear_word(unsigned g)
{
	return BW_RING_WORDS + g - 2;
}

/* The slots of a wheel with cfg: its ring, then 64 per gear above 1. */
static inline size_t bw_slot_count(const struct bw_config *cfg)
{
	if (cfg->gears < 2)
		return BW_SLOTS;
	return BW_RING_MAX + (size_t)(cfg->gears - 2) * BW_SLOTS;
}

/* The slot for key, a slot's absolute index in its gear (tick >> 6g):
 * the ring for g = 0, whose keys are ticks; gear g for g >= 2. */
static inline unsigned bw_slot_id(const struct bw_wheel *w, unsigned g,
				  uint64_t key)
{
	if (g == 0)
		return (unsigned)(key & w->ring_mask);
	return bw_gear_word(g) * BW_SLOTS + (unsigned)(key & (BW_SLOTS - 1));
}

/* The timer whose u.link l is (never a sentinel): u is the timer's first
 * member, and link the union's.  Like container_of, it keeps no const. */
static inline struct bw_timer *bw_timer_of(const struct bw_link *l)
{
	return (struct bw_timer *)(uintptr_t)l;
}

static inline void bw_list_init(struct bw_link *l)
{
	l->next = l->prev = l;
}

static inline bool bw_list_empty(const struct bw_link *l)
{
	return l->next == l;
}

static inline void bw_list_push(struct bw_link *l, struct bw_timer *t)
{
	struct bw_link *tail = l->prev, *n = &t->u.link;

	/* In this order, so that GCC's SLP vectorizer does not pair n's two
	 * stores through an SSE register (three more instructions). */
	n->next = l;
	tail->next = n;
	n->prev = tail;
	l->prev = n;
}

/* Take t out of its list; true when that emptied the list. */
static inline bool bw_list_unlink(const struct bw_timer *t)
{
	struct bw_link *next = t->u.link.next, *prev = t->u.link.prev;

	prev->next = next;
	next->prev = prev;
	return next == prev;
}

/* Move every timer of from (not empty) to the tail of to; from is left
 * as it was, for the caller to reset. */
static inline void bw_list_splice(struct bw_link *to, const struct bw_link *from)
{
	struct bw_link *first = from->next, *last = from->prev, *tail = to->prev;

	tail->next = first;
	first->prev = tail;
	last->next = to;
	to->prev = last;
}

/* The event tick of occupied slot id (above). */
static inline uint64_t bw_slot_event(const struct bw_wheel *w, unsigned id)
{
	unsigned g;
	uint64_t base;

	if (id <= w->ring_mask)
		return w->now + ((id - w->now) & w->ring_mask);
	g = id / BW_SLOTS + 2 - BW_RING_WORDS;
	base = w->now >> (6 * g);
	return (base + ((id - base) & (BW_SLOTS - 1))) << (6 * g);
}

/*
 * The ring's next event, UINT64_MAX if it is empty.  The occupied bits
 * after now's in its word are this rotation's; otherwise the summary,
 * rotated so that bit 0 is the next word, names the first occupied word,
 * and a ctz the slot in it.  now's own word comes last in that order: its
 * bits before now's are a rotation (ring ticks) on.  A one-gear wheel's
 * ring is one word, and the same steps find its bits before now's a word
 * (64 ticks) on.
 */
static inline uint64_t bw_ring_scan(const struct bw_wheel *w)
{
	unsigned words = (unsigned)(w->ring_mask / 64), k, kn;
	uint64_t start = w->now & ~(uint64_t)63, m, s;

	k = (unsigned)(w->now / 64) & words;
	m = w->occ[k] & (~0ull << (w->now & 63));
	if (m)
		return start + (uint64_t)__builtin_ctzll(m);
	s = rotr64(w->sum[0], k + 1);
	if (!s)
		return UINT64_MAX;
	kn = (k + 1 + (unsigned)__builtin_ctzll(s)) & (BW_RING_WORDS - 1);
	return start + 64 * (((kn - k - 1) & words) + 1) +
	       (uint64_t)__builtin_ctzll(w->occ[kn]);
}

/*
 * Gear g's next event (g >= 2), UINT64_MAX if it is empty: one rotate of
 * its occupied word by now's digit, so that bit 0 is the current slot,
 * and one count-trailing-zeros.
 */
static inline uint64_t bw_gear_scan(const struct bw_wheel *w, unsigned g)
{
	uint64_t base = w->now >> (6 * g);
	uint64_t r = rotr64(w->occ[bw_gear_word(g)], (unsigned)base);

	if (!r)
		return UINT64_MAX;
	return (base + (uint64_t)__builtin_ctzll(r)) << (6 * g);
}

/* Bit id of a slot bitmap (occ or full). */
static inline bool bw_map_test(const uint64_t *map, unsigned id)
{
	return map[id / 64] >> (id % 64) & 1;
}

/* Slot id is empty now: its occupied bit, and its word's summary bit
 * when that was the word's last. */
static inline void bw_occ_clear(struct bw_wheel *w, unsigned id)
{
	unsigned k = id / 64;

	if (!(w->occ[k] &= rotl64(~1ull, id % 64)))
		w->sum[k / 64] &= rotl64(~1ull, k % 64);
}

/* p, as the compiler cannot see through: GCC folds a slot's address into
 * each use's addressing mode and so computes it twice where it is both
 * stored and dereferenced (three instructions more per insert). */
static inline struct bw_link *bw_opaque(struct bw_link *p)
{
	__asm__("" : "+r"(p));
	return p;
}

/* Set the next-event cache to ev. */
static inline void bw_set_next(struct bw_wheel *w, uint64_t ev)
{
	w->next = ev;
	w->next_slot = (uint32_t)(ev & w->ring_mask);
}

/* Add timer t to slot id, whose event tick is ev. */
static inline void bw_slot_add(struct bw_wheel *w, size_t id, uint64_t ev,
			       struct bw_timer *t)
{
	uint64_t *occ = &w->occ[id / 64];
	struct bw_link *l = bw_opaque(&w->slot[id]);

	/* Full from the timer that takes spare below 0.  First, so that a
	 * caller that knows the slot has room for more (place()) loses the
	 * test. */
	if (w->spare[id]-- == 0)
		w->full[id / 64] |= 1ull << (id % 64);
	bw_list_push(l, t);
	t->loc = id;
	/* The summary bit only changes with the word's first slot. */
	if (!*occ)
		w->sum[id / 4096] |= 1ull << (id / 64 % 64);
	*occ |= 1ull << (id % 64);
	/* bw_set_next(), knowing ev & ring_mask: a ring slot's tick is its
	 * id's, a gear slot's start a multiple of 4096 (gears come only
	 * with the 4096-slot ring), so the ring path needs no mask. */
	if (ev < w->next) {
		w->next = ev;
		w->next_slot = id < BW_RING_MAX ? id : 0;
	}
}

/* Take timer t out of slot id (its loc). */
static inline void bw_slot_remove(struct bw_wheel *w, unsigned id,
				  const struct bw_timer *t)
{
	bool emptied = bw_list_unlink(t);

	/* The full bit is set from slot_cap on: only that step clears it. */
	if (++w->spare[id] == 0)
		w->full[id / 64] &= ~(1ull << (id % 64));
	/* Emptied, it may have held the cached next event: for a ring slot
	 * that is the one whose position next's is (a later event at that
	 * position, in a gear or the heap, only costs a recomputation); a
	 * gear slot empties rarely, and gear.c looks at its event. */
	if (emptied) {
		bw_occ_clear(w, id);
		if (id > w->ring_mask)
			bw_gear_emptied(w, id);
		else if (w->next_slot == id)
			w->dirty = true;
	}
}

/* The tick of the wheel's next event (a slot or the heap's minimum). */
static inline uint64_t bw_next_event(struct bw_wheel *w)
{
	return __builtin_expect(w->dirty, 0) ? bw_next_event_scan(w) : w->next;
}

/* Whether a poll at now_ns has work, up to tick *target; if not, the
 * clock just moves.  Inline, because most polls find nothing due: then it
 * is a multiply and a few compares. */
static inline bool bw_poll_work(struct bw_wheel *w, uint64_t now_ns,
				uint64_t *target)
{
	/* now never passes last_now's tick, so a monotonic now_ns is all it
	 * takes for the clock to move forward. */
	if (now_ns < w->last_now)
		return false;
	w->last_now = now_ns;
	*target = bw_tick_floor(w, now_ns);
	/* A dirty cache is still a lower bound (bw_wheel_check): a poll that
	 * stops short of it has nothing to do without recomputing it. */
	if (bw_list_empty(&w->list[BW_DUE]) && !w->backlog &&
	    (*target < w->next ||
	     (w->dirty && *target < bw_next_event_scan(w)))) {
		w->now = *target;
		return false;
	}
	return true;
}

/* The first phase of a poll (above). */
static inline bool bw_poll_collect(struct bw_wheel *w, uint64_t now_ns)
{
	uint64_t target;

	if (!bw_poll_work(w, now_ns, &target))
		return false;
	bw_poll_collect_due(w, target);
	return true;
}

/* Free record r; its new generation kills every handle to it. */
static inline void bw_pool_put(struct bw_wheel *w, struct bw_rec *r)
{
	struct bw_pool *p = &w->pool;

	/* Odd generations, stepping by 2 and wrapping from 2^31 - 1 to 1
	 * (the carry into bit 63, which stays clear, dropped), are never 0
	 * and need no test to wrap. */
	r->h = (r->h + 2 * BW_GEN_ONE) & ~(1ull << 63);
	r->t.loc = BW_LOC_FREE;
	r->t.u.link.next = (struct bw_link *)p->free;
	p->free = r;
}

#endif /* BW_WHEEL_INTERNAL_H */
