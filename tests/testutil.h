/*
 * testutil.h - helpers shared by the libbitwheel Check programs: a seeded
 * PRNG, a bitwise CRC32C to judge the state files by, a counting (and
 * failure-injecting) allocator, a recorder for fire and drop callbacks,
 * tick arithmetic and wheel/suite boilerplate.
 *
 * Everything here is deliberately independent of the wheel's internals so
 * the tests only ever judge the public contract in bitwheel.h.
 */
#ifndef BW_TESTUTIL_H
#define BW_TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "bitwheel.h"

#define TU_MS UINT64_C(1000000)

/* ---- PRNG (splitmix64: tiny, fast, and good enough for test input) ---- */

struct tu_rng {
	uint64_t s;
};

void tu_rng_seed(struct tu_rng *r, uint64_t seed);
uint64_t tu_rng_next(struct tu_rng *r);
/* Uniform in [0, n); n == 0 yields 0. */
uint64_t tu_rng_below(struct tu_rng *r, uint64_t n);
/* Uniform in [lo, hi] (inclusive). */
uint64_t tu_rng_range(struct tu_rng *r, uint64_t lo, uint64_t hi);
/* True with probability per_million / 1e6. */
int tu_rng_chance(struct tu_rng *r, uint32_t per_million);

/*
 * The seed named by environment variable `name` (decimal or 0x-hex), or
 * dflt when it is unset or unparsable, so that runs stay deterministic
 * unless someone asks for a different seed.
 */
uint64_t tu_seed_from_env(const char *name, uint64_t dflt);

/* ---- CRC32C, bit by bit: the state files' checksum, as a reference --- */

uint32_t tu_crc32c(const void *data, size_t len);

/* ---- counting allocator ---------------------------------------------- */

/*
 * Counts every call made through a struct bw_allocator, tracks live blocks
 * and bytes (so leaks and wrong old_size arguments show up), and can be
 * told to fail after a number of successful allocations.
 */
struct tu_alloc {
	struct bw_allocator a;     /* hand &ta->a to cfg.alloc            */
	uint64_t calls;            /* every call, frees included          */
	uint64_t mallocs;
	uint64_t reallocs;
	uint64_t frees;
	uint64_t failures;         /* injected failures returned          */
	uint64_t size_mismatch;    /* old_size differed from block's size */
	uint64_t live_blocks;
	size_t live_bytes;
	long fail_after;           /* -1: never fail; else successes left */
};

void tu_alloc_init(struct tu_alloc *ta);

/* ---- callback recorder ----------------------------------------------- */

struct tu_fire {
	void *data;
	uint64_t now;
};

struct tu_drop {
	void *data;
	int reason;
};

struct tu_rec;
/* Decides a fire's return value (0 oneshot, else the new deadline). */
typedef uint64_t (*tu_on_fire_fn)(struct tu_rec *rec, void *data,
				  uint64_t now);

struct tu_rec {
	size_t nfired, capfired;
	struct tu_fire *fired;
	size_t ndropped, capdropped;
	struct tu_drop *dropped;
	tu_on_fire_fn on_fire;     /* NULL: every timer is oneshot        */
	void *user;                /* for on_fire                         */
};

void tu_rec_init(struct tu_rec *rec);
void tu_rec_free(struct tu_rec *rec);
void tu_rec_clear(struct tu_rec *rec);
/* Callbacks that record into rec (fire, drop, ctx = rec). */
struct bw_callbacks tu_rec_cb(struct tu_rec *rec);
/* How many times data was fired / dropped. */
size_t tu_rec_fired_count(const struct tu_rec *rec, const void *data);
size_t tu_rec_dropped_count(const struct tu_rec *rec, const void *data);

/* ---- time ---------------------------------------------------------------- */

static inline uint64_t tu_tick_ns(const struct bw_config *cfg)
{
	return (uint64_t)cfg->resolution_ms * TU_MS;
}

/* ceil(deadline / tick): the tick a deadline belongs to. */
static inline uint64_t tu_ceil_tick(uint64_t ns, uint64_t tick)
{
	return ns / tick + (ns % tick != 0);
}

/* 64^n, saturating. */
uint64_t tu_pow64(unsigned n);
/* floor(log64(x)) for x >= 1. */
unsigned tu_log64(uint64_t x);
/* The wheel's range in ticks: 63 * 64^(gears-1), one top slot less in
 * coarse mode (rounding up to a slot start can cost one). */
static inline uint64_t tu_range_ticks(unsigned gears, enum bw_precision prec)
{
	return (prec == BW_COARSE && gears > 1 ? 62ull : 63ull) *
	       tu_pow64(gears - 1);
}

/* ---- wheels ---------------------------------------------------------- */

struct bw_config tu_cfg(unsigned gears, unsigned resolution_ms,
			unsigned slot_cap, unsigned max_probes,
			enum bw_precision precision, bool failover);
/* Create a wheel or fail the test. */
struct bw_wheel *tu_wheel_new(const struct bw_config *cfg, uint64_t now_ns);

/*
 * Assert without Check's per-assertion bookkeeping: a passing ck_assert
 * records its location through the fork-mode channel (a write per call),
 * which dominates loops of millions of checks.  Only failures talk to
 * Check here.
 */
#define tu_check(cond, ...)                                                 \
	do {                                                                \
		if (__builtin_expect(!(cond), 0))                           \
			ck_abort_msg(__VA_ARGS__);                          \
	} while (0)

/* Fail the current test, naming the broken invariant, if w is unhealthy. */
#define tu_assert_healthy(w)                                                \
	do {                                                                \
		const char *tu_why_ = NULL;                                 \
		int tu_rc_ = bw_wheel_check((w), &tu_why_);                 \
		tu_check(tu_rc_ == 0, "bw_wheel_check: %d (%s)", tu_rc_,    \
			 tu_why_ ? tu_why_ : "no reason");                  \
	} while (0)

#define tu_assert_dual_healthy(d)                                           \
	do {                                                                \
		const char *tu_why_ = NULL;                                 \
		int tu_rc_ = bw_dual_check((d), &tu_why_);                  \
		tu_check(tu_rc_ == 0, "bw_dual_check: %d (%s)", tu_rc_,     \
			 tu_why_ ? tu_why_ : "no reason");                  \
	} while (0)

/* A libbitwheel-client call that must return 0, or fail the test with
 * its error and message (for suites that include bitwheel-client.h). */
#define CK_BWC(c, call)                                                     \
	do {                                                                \
		int rc_ = (call);                                           \
		ck_assert_msg(rc_ == 0, "%s: %s (%d): %s", #call,           \
			      bwc_strerror(rc_), rc_, bwc_errmsg(c));       \
	} while (0)

/* Poll or fail the test; returns the poll result. */
struct bw_poll_result tu_poll(struct bw_wheel *w, uint64_t now_ns,
			      struct tu_rec *rec);

/* Run a suite in fork mode; the process's exit status. */
int tu_run_suite(Suite *s);

#endif /* BW_TESTUTIL_H */
