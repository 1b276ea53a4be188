/*
 * bitwheel.h - public interface of libbitwheel, a hierarchical timer wheel.
 *
 * Time is always an argument: every call takes monotonic time as unsigned
 * 64-bit nanoseconds (bw_now_ns() reads CLOCK_MONOTONIC for callers that
 * want it).  The wheel itself never reads a clock.
 *
 * Two kinds of timer share every wheel, its poll and its callbacks: a
 * handle timer, whose storage is the wheel's (bw_wheel_insert gives back
 * a bw_handle), and an intrusive timer, a struct bw_timer the caller owns
 * and embeds in its own objects (bw_timer_add: no handle, no lookup).
 *
 * Three containers share one handle type and one callback shape:
 *   struct bw_wheel  a plain wheel (cfg.failover = false): bounded, never
 *                    allocates after creation, refuses what it cannot hold;
 *                    or a failover wheel (cfg.failover = true): the same
 *                    wheel plus an ordered overflow store, so insert only
 *                    fails when memory runs out.
 *   struct bw_dual   two failover wheels, a periodic lane and a oneshot
 *                    lane, behind one poll and one next deadline.
 *
 * Every function returns 0 or a negative enum bw_error; results come back
 * through pointer arguments.  bw_strerror() names every code.
 *
 * Thread safety: none.  A wheel belongs to one thread at a time.
 *
 * ABI (libbitwheel.so.0): every export is versioned (BITWHEEL_0, the
 * script wheel/libbitwheel.map) and the BW_VERSION_* macros of
 * bitwheel-version.h, included below, name the release of this header.
 * Functions and enum values are added compatibly.  The structs a caller
 * allocates (bw_config, bw_callbacks, bw_poll_result, bw_counters,
 * bw_dual_config, bw_timer) have no reserved room: a field added to any of them,
 * or one changed, is a new SONAME (libbitwheel.so.1), never an addition
 * within this one.  The wheels themselves are opaque and grow freely.
 */
#ifndef BITWHEEL_H
#define BITWHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bitwheel-version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(BW_BUILDING_LIBRARY) && defined(__GNUC__)
#define BW_EXPORT __attribute__((visibility("default")))
#else
#define BW_EXPORT
#endif

/* Errors: every function returns 0 or one of these. */
enum bw_error {
	BW_OK = 0,
	BW_ENOMEM = -1,        /* the allocator failed                      */
	BW_EFULL = -2,         /* home slot and every probe slot are full   */
	BW_ERANGE = -3,        /* deadline beyond the wheel's range         */
	BW_ENOTFOUND = -4,     /* handle fired, cancelled, reused or bogus  */
	BW_EEMPTY = -5,        /* nothing pending                           */
	BW_EINVAL = -6,        /* a NULL or otherwise invalid argument      */
	BW_ECORRUPT = -7,      /* bw_wheel_check() found a broken invariant */
	BW_EGEARS = -10,       /* cfg.gears outside 1..BW_MAX_GEARS         */
	BW_ERESOLUTION = -11,  /* cfg.resolution_ms outside 1..BW_MAX_RESOLUTION_MS */
	BW_ESLOTCAP = -12,     /* cfg.slot_cap outside 1..BW_MAX_SLOT_CAP   */
	BW_EPROBES = -13,      /* cfg.max_probes outside 1..BW_MAX_PROBES   */
	BW_EPRECISION = -14,   /* cfg.precision not a enum bw_precision     */
	BW_EPRESET = -15,      /* unknown preset                            */
	BW_EINPOLL = -16,      /* call not allowed from inside a callback   */
	BW_EPENDING = -17,     /* intrusive timer already pending           */
};

/* A static, human-readable description of an error code. */
BW_EXPORT const char *bw_strerror(int err);

#define BW_SLOTS 64                 /* slots per gear                    */
#define BW_MAX_GEARS 8
#define BW_MAX_RESOLUTION_MS 60000u
#define BW_MAX_SLOT_CAP 65535u
#define BW_MAX_PROBES 64u

/*
 * Precision modes (see wheel/wheel.c for the full story):
 *   BW_EXACT   a timer fires at the first poll whose tick (now rounded down
 *              to the resolution) reaches its deadline rounded up to the
 *              tick, plus at most max_probes - 1 ticks of probe
 *              displacement.  A timer less than 4096 ticks ahead sits in
 *              its own tick's slot and never moves; one further ahead, in
 *              a gear of 4096-tick or coarser slots, is re-slotted into a
 *              finer gear or the tick slots when its slot comes due.
 *   BW_COARSE  the seed's no-cascading behaviour, rounded up, beyond 4096
 *              ticks: a timer fires at the first boundary of its gear's
 *              slot at or after its deadline; late by less than span *
 *              (1 + displacement), where span = 64^gear ticks.  Nearer
 *              timers fire as in BW_EXACT (span 1).
 * Neither mode ever fires a timer at a poll whose now is before its deadline.
 *
 * slot_cap bounds every slot, so that a poll never moves more than
 * slot_cap * max_probes timers of one hot deadline; beyond that a plain
 * wheel refuses (BW_EFULL) and a failover wheel overflows to its heap.
 */
enum bw_precision {
	BW_EXACT = 0,
	BW_COARSE = 1,
};

/*
 * Pluggable allocator, Lua style: (ctx, ptr, old_size, new_size).
 * new_size == 0 frees ptr and returns NULL; otherwise behaves as realloc.
 * NULL in the config means the C library's allocator.
 */
typedef void *(*bw_alloc_fn)(void *ctx, void *ptr, size_t old_size,
			     size_t new_size);

struct bw_allocator {
	bw_alloc_fn fn;
	void *ctx;
};

struct bw_config {
	unsigned gears;          /* 1..8: range is 63 * 64^(gears-1) ticks,
				    62 * 64^(gears-1) in coarse mode      */
	unsigned resolution_ms;  /* tick length, 1..60000                     */
	unsigned slot_cap;       /* timers per slot (above), 1..65535         */
	unsigned max_probes;     /* slots tried per insert, home included, 1..64 */
	enum bw_precision precision;
	bool failover;           /* add the overflow store                    */
	const struct bw_allocator *alloc; /* NULL: malloc/realloc/free        */
};

/* The seed's presets, all with 4 gears. */
enum bw_preset {
	BW_PRESET_BALANCED = 0,  /*  5 ms, cap 16, probes 8 */
	BW_PRESET_BALANCED_FAST, /*  5 ms, cap 64, probes 2 */
	BW_PRESET_BALANCED_LIGHT,/*  5 ms, cap  8, probes 16 */
	BW_PRESET_PRECISE,       /*  1 ms, cap 16, probes 8 */
	BW_PRESET_BURST,         /*  5 ms, cap 32, probes 8 */
	BW_PRESET_EXTENDED,      /* 16 ms, cap 16, probes 8 */
	BW_PRESET_COUNT
};

/* Fill *cfg with a preset (precision BW_EXACT, failover off, libc alloc). */
BW_EXPORT int bw_config_preset(enum bw_preset preset, struct bw_config *cfg);
/* The preset's name, e.g. "balanced", or NULL for an unknown preset. */
BW_EXPORT const char *bw_preset_name(enum bw_preset preset);
/* Check a config without creating anything: 0 or the BW_E* for the field. */
BW_EXPORT int bw_config_validate(const struct bw_config *cfg);

/*
 * A handle names one scheduled timer.  It stays valid while the timer is
 * pending (including across periodic re-arms) and is never 0.  Once the
 * timer fires for good, is cancelled or is dropped, the handle is dead
 * forever (an odd 31-bit generation per storage record; a record has to
 * be reused 2^30 times before a dead handle could match again).
 */
typedef uint64_t bw_handle;

/*
 * Fire callback: called once per due timer, from inside poll, with the
 * caller's data pointer.  Return 0 for a oneshot timer; return a new
 * deadline (ns) to re-arm the same timer under the same handle.  A
 * re-armed timer, and any timer inserted from a callback, never fires in
 * the poll that armed it, even when its deadline has already passed: it
 * fires at the next poll.
 */
typedef uint64_t (*bw_fire_fn)(void *data, uint64_t now_ns, void *ctx);

/*
 * Drop callback: a re-arm the wheel cannot place (on a plain wheel, its
 * slot and probes are full or it is beyond the range; on a failover wheel,
 * out of memory).  The caller gets its data back; reason is BW_EFULL,
 * BW_ERANGE or BW_ENOMEM.  May be NULL.  Nothing else is ever dropped: a
 * timer the wheel accepted fires, is cancelled or is drained.
 */
typedef void (*bw_drop_fn)(void *data, int reason, void *ctx);

struct bw_callbacks {
	bw_fire_fn fire;
	bw_drop_fn drop;
	void *ctx;
};

/* What one poll did. */
struct bw_poll_result {
	uint64_t fired;          /* fire callbacks made                   */
	uint64_t rearmed;        /* of those, re-armed                    */
	uint64_t rearm_failed;   /* re-arms refused (data went to drop)   */
};

/* Lifetime counters. */
struct bw_counters {
	uint64_t inserted;       /* accepted inserts                      */
	uint64_t cancelled;      /* successful cancels                    */
	uint64_t fired;          /* fire callbacks                        */
	uint64_t probed;         /* inserts/re-slots placed off their home slot */
	uint64_t refused;        /* inserts refused (EFULL or ERANGE)     */
	uint64_t overflowed;     /* placements that went to the overflow store */
	uint64_t lost;           /* re-arms refused: data went to drop    */
	uint64_t reslotted;      /* moves from a gear of 4096-tick or coarser
				    slots to a finer one or the tick slots */
	uint64_t overfilled;     /* re-slots into a home slot already at
				    slot_cap (re-slots never probe)      */
};

/* ---- plain and failover wheel ---------------------------------------- */

struct bw_wheel;

/*
 * Create a wheel whose clock starts at now_ns.  All slot storage is
 * allocated here; a plain wheel never allocates again.
 */
BW_EXPORT int bw_wheel_new(const struct bw_config *cfg, uint64_t now_ns,
			   struct bw_wheel **out);
/* Free the wheel.  Pending timers' data is not touched (see drain); a
 * pending intrusive timer is left as it was: bw_timer_init() it before
 * it is added to another wheel. */
BW_EXPORT void bw_wheel_free(struct bw_wheel *w);

/*
 * Schedule data to fire at deadline_ns.  A deadline at or before the
 * wheel's current tick fires at the next poll.  Plain wheel: BW_EFULL when
 * the home slot and its probes are full, or when gears * 64 * slot_cap
 * timers are already pending, BW_ERANGE beyond the range; the caller keeps
 * its data.  Failover wheel: only BW_ENOMEM.
 */
BW_EXPORT int bw_wheel_insert(struct bw_wheel *w, uint64_t deadline_ns,
			      void *data, bw_handle *out);
/*
 * Insert as a plain wheel would, even into a failover wheel: BW_EFULL or
 * BW_ERANGE where bw_wheel_insert would put the timer in the overflow
 * heap (the pool still grows: only the heap is out of reach).  For a
 * caller with overflow stores of its own - bitwheeld keeps one per user,
 * so that one user's burst at an instant never queues another user's
 * timers behind it in a shared heap.  A timer it accepts is like any
 * other: a re-arm from its fire callback may still go to the heap.
 */
BW_EXPORT int bw_wheel_try_insert(struct bw_wheel *w, uint64_t deadline_ns,
				  void *data, bw_handle *out);
/* Cancel in O(1); *data_out (may be NULL) gets the timer's data back. */
BW_EXPORT int bw_wheel_cancel(struct bw_wheel *w, bw_handle h,
			      void **data_out);
/*
 * Fire every timer due at now_ns.  A now_ns earlier than the last poll's is
 * a no-op.  The cost is bounded by the occupied slots passed and the timers
 * fired, never by the number of elapsed ticks.  res may be NULL.
 * Insert and cancel may be called from callbacks; cancelling the timer
 * whose callback is running returns BW_ENOTFOUND (its return value decides
 * its fate).  Calling poll from a callback returns BW_EINPOLL.
 */
BW_EXPORT int bw_wheel_poll(struct bw_wheel *w, uint64_t now_ns,
			    const struct bw_callbacks *cb,
			    struct bw_poll_result *res);

/*
 * Bound what one poll takes out of the overflow heap: at most max timers
 * (0, the default: every due one).  The heap is where a failover wheel
 * puts what its slots refuse, so a burst of timers due at one instant
 * lands there, and taking 200,000 of them out in one poll holds the
 * caller up for tens of milliseconds.  A poll that reaches the bound
 * leaves the heap's other due timers for later polls (each takes the next
 * max) and goes on with the slots, whose timers are not counted (slot_cap
 * bounds each slot): the leftovers come late, after slot timers due later
 * than they, never early; bw_wheel_next_deadline reports them as due now
 * until they are gone.
 * BW_EINPOLL from a callback.
 */
BW_EXPORT int bw_wheel_set_poll_limit(struct bw_wheel *w, size_t max);

/*
 * The earliest time at which a poll may have work (a timer to fire or a
 * coarse slot to re-slot).  Never later than the earliest deadline's fire
 * time.  BW_EEMPTY when nothing is pending.
 */
BW_EXPORT int bw_wheel_next_deadline(struct bw_wheel *w, uint64_t *out_ns);
/* max(0, next deadline - now_ns); BW_EEMPTY when nothing is pending. */
BW_EXPORT int bw_wheel_until_next(struct bw_wheel *w, uint64_t now_ns,
				  uint64_t *out_ns);
/* The deadline a pending timer was scheduled for. */
BW_EXPORT int bw_wheel_deadline(const struct bw_wheel *w, bw_handle h,
				uint64_t *out_ns);

BW_EXPORT size_t bw_wheel_pending(const struct bw_wheel *w);
/* Of the pending, how many live in the overflow store. */
BW_EXPORT size_t bw_wheel_overflow_pending(const struct bw_wheel *w);
BW_EXPORT void bw_wheel_counters(const struct bw_wheel *w,
				 struct bw_counters *out);
/* Bytes currently allocated by the wheel. */
BW_EXPORT size_t bw_wheel_footprint(const struct bw_wheel *w);
/*
 * The range, in ns: a plain wheel accepts every deadline up to the start
 * of its current tick plus this (the current tick is the last poll's now,
 * or the creation time, rounded down to the resolution), so a caller
 * counting from its own now should leave one tick of margin.
 */
BW_EXPORT uint64_t bw_wheel_range_ns(const struct bw_wheel *w);
BW_EXPORT const struct bw_config *bw_wheel_config(const struct bw_wheel *w);

/* Private to libbitwheel: a link of its circular lists. */
struct bw_link {
	struct bw_link *next, *prev;
};

/*
 * Intrusive timers.  A struct bw_timer is the caller's: it lives inside
 * the caller's own object, and the wheel links it into its slots as it
 * is, so adding and cancelling one touch no record pool, no handle and no
 * generation, and cancelling is an unlink.  Its fields are the wheel's:
 * the caller never reads or writes them (they are public only so that the
 * struct can be embedded; they change with the SONAME).  Size: 40 bytes
 * on LP64.
 *
 * bw_timer_init() once before first use (or after memory reuse): the
 * timer is then idle.  bw_timer_add() arms it with a deadline and data,
 * exactly as bw_wheel_insert() would (same slots, same precision, same
 * refusals, same poll); BW_EPENDING if it is pending already (cancel it
 * first).  Its poll calls the same cb->fire with its data; as for a
 * handle timer, a non-zero return re-arms it.  The timer is idle while
 * its callback runs, so the callback may free it (returning 0), or add it
 * again itself (its return value is then ignored).  bw_timer_cancel()
 * unlinks a pending timer in O(1), BW_ENOTFOUND if it is idle (fired,
 * cancelled, never added, or its callback is running).  A pending timer
 * belongs to the wheel it was added to: only that wheel may cancel it,
 * and its memory must outlive its pending time (free the wheel, or drain
 * it, before the memory goes).  bw_wheel_free() leaves pending intrusive
 * timers as they are (bw_timer_init() them before reuse);
 * bw_wheel_drain() makes them idle.
 */
struct bw_timer {
	/* Private to libbitwheel. */
	union {
		struct bw_link link;
		struct {
			uint32_t pos, arrival;
		} heap;
	} u;
	uint64_t deadline;
	void *data;
	uint32_t gen;
	uint32_t loc;
};

/* Make t idle (never fails on a non-NULL t). */
BW_EXPORT void bw_timer_init(struct bw_timer *t);
/* Arm idle timer t at deadline_ns with data: bw_wheel_insert's rules. */
BW_EXPORT int bw_timer_add(struct bw_wheel *w, struct bw_timer *t,
			   uint64_t deadline_ns, void *data);
/* bw_wheel_try_insert's rules: never the overflow heap. */
BW_EXPORT int bw_timer_try_add(struct bw_wheel *w, struct bw_timer *t,
			       uint64_t deadline_ns, void *data);
/* Unlink pending timer t from w, O(1) (O(log n) in the overflow heap). */
BW_EXPORT int bw_timer_cancel(struct bw_wheel *w, struct bw_timer *t);
/* Whether t is pending (added, not yet fired or cancelled). */
BW_EXPORT bool bw_timer_pending(const struct bw_timer *t);

/* Visitor for foreach/drain: handle, deadline and data of one timer; the
 * handle is 0 for an intrusive timer. */
typedef void (*bw_visit_fn)(bw_handle h, uint64_t deadline_ns, void *data,
			    void *ctx);
/* Visit every pending timer, in no particular order; nothing changes. */
BW_EXPORT int bw_wheel_foreach(const struct bw_wheel *w, bw_visit_fn fn,
			       void *ctx);
/* Visit and remove every pending timer (handles die, intrusive timers
 * are idle, each before its visit); counters unchanged. */
BW_EXPORT int bw_wheel_drain(struct bw_wheel *w, bw_visit_fn fn, void *ctx);

/*
 * Verify every internal invariant: slot lists against bitmaps and counts,
 * placement of each timer against the current tick, the next-fire cache,
 * the overflow store's order, the free list.  0 or BW_ECORRUPT; with a
 * non-NULL why, *why points at a static description of the first failure.
 */
BW_EXPORT int bw_wheel_check(const struct bw_wheel *w, const char **why);

/* ---- dual wheel -------------------------------------------------------- */

enum bw_lane {
	BW_LANE_ONESHOT = 0,
	BW_LANE_PERIODIC = 1,
};

struct bw_dual_config {
	struct bw_config periodic;
	struct bw_config oneshot;
};

/* The seed's dual presets. */
enum bw_dual_preset {
	BW_DUAL_STANDARD_BALANCED = 0, /* periodic 100 ms/8,  oneshot 5 ms/16 */
	BW_DUAL_FAST_PRECISE,          /* periodic 100 ms/16, oneshot 1 ms/64 */
	BW_DUAL_STANDARD_BURST,        /* periodic 100 ms/8,  oneshot 5 ms/32 */
	BW_DUAL_PRESET_COUNT
};

/* Fill *cfg with a dual preset; both lanes failover, BW_EXACT. */
BW_EXPORT int bw_dual_config_preset(enum bw_dual_preset preset,
				    struct bw_dual_config *cfg);
/* "standard-balanced", "fast-precise", "standard-burst" or NULL. */
BW_EXPORT const char *bw_dual_preset_name(enum bw_dual_preset preset);

struct bw_dual;

/* Both lanes are created as failover wheels, whatever cfg.failover says. */
BW_EXPORT int bw_dual_new(const struct bw_dual_config *cfg, uint64_t now_ns,
			  struct bw_dual **out);
BW_EXPORT void bw_dual_free(struct bw_dual *d);
BW_EXPORT int bw_dual_insert_periodic(struct bw_dual *d, uint64_t deadline_ns,
				      void *data, bw_handle *out);
BW_EXPORT int bw_dual_insert_oneshot(struct bw_dual *d, uint64_t deadline_ns,
				     void *data, bw_handle *out);
/* bw_wheel_try_insert() on the lane's wheel. */
BW_EXPORT int bw_dual_try_insert(struct bw_dual *d, enum bw_lane lane,
				 uint64_t deadline_ns, void *data,
				 bw_handle *out);
BW_EXPORT int bw_dual_cancel(struct bw_dual *d, bw_handle h, void **data_out);
/*
 * Intrusive timers in a lane: bw_timer_add(), bw_timer_try_add() and
 * bw_timer_cancel() on that lane's wheel.  A pending timer belongs to the
 * lane it was added to: cancel it with that lane (the timer does not
 * record it; another lane's wheel would unlink it from lists not its
 * own).  Its fire, re-arm and drop go through bw_dual_poll as a handle
 * timer's do.
 */
BW_EXPORT int bw_dual_timer_add(struct bw_dual *d, enum bw_lane lane,
				struct bw_timer *t, uint64_t deadline_ns,
				void *data);
BW_EXPORT int bw_dual_timer_try_add(struct bw_dual *d, enum bw_lane lane,
				    struct bw_timer *t, uint64_t deadline_ns,
				    void *data);
BW_EXPORT int bw_dual_timer_cancel(struct bw_dual *d, enum bw_lane lane,
				   struct bw_timer *t);
/* Polls both lanes; res adds up both. */
BW_EXPORT int bw_dual_poll(struct bw_dual *d, uint64_t now_ns,
			   const struct bw_callbacks *cb,
			   struct bw_poll_result *res);
/* bw_wheel_set_poll_limit() on each lane: at most max heap timers per lane
 * per poll. */
BW_EXPORT int bw_dual_set_poll_limit(struct bw_dual *d, size_t max);
BW_EXPORT int bw_dual_next_deadline(struct bw_dual *d, uint64_t *out_ns);
BW_EXPORT int bw_dual_deadline(const struct bw_dual *d, bw_handle h,
			       uint64_t *out_ns);
/* The lane a handle belongs to. */
BW_EXPORT enum bw_lane bw_dual_handle_lane(bw_handle h);
/* One lane's wheel, for introspection (counters, pending, footprint). */
BW_EXPORT struct bw_wheel *bw_dual_lane(struct bw_dual *d, enum bw_lane lane);
BW_EXPORT size_t bw_dual_pending(const struct bw_dual *d);
BW_EXPORT size_t bw_dual_footprint(const struct bw_dual *d);
/* Foreach/drain over both lanes; handles are dual handles (0 for an
 * intrusive timer). */
BW_EXPORT int bw_dual_foreach(const struct bw_dual *d, bw_visit_fn fn,
			      void *ctx);
BW_EXPORT int bw_dual_drain(struct bw_dual *d, bw_visit_fn fn, void *ctx);
BW_EXPORT int bw_dual_check(const struct bw_dual *d, const char **why);

/* ---- clock helper ------------------------------------------------------ */

/* CLOCK_MONOTONIC in nanoseconds. */
BW_EXPORT uint64_t bw_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* BITWHEEL_H */
