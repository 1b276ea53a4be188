/*
 * testutil.c - shared helpers for the libbitwheel Check programs; see
 * testutil.h.
 */
#include "testutil.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PRNG ------------------------------------------------------------- */

void tu_rng_seed(struct tu_rng *r, uint64_t seed)
{
	r->s = seed;
}

uint64_t tu_rng_next(struct tu_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t tu_rng_below(struct tu_rng *r, uint64_t n)
{
	if (n == 0)
		return 0;
	/* Multiply-high keeps the bias far below anything a test can see. */
	return (uint64_t)(((unsigned __int128)tu_rng_next(r) * n) >> 64);
}

uint64_t tu_rng_range(struct tu_rng *r, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	if (lo == 0 && hi == UINT64_MAX)
		return tu_rng_next(r);
	return lo + tu_rng_below(r, hi - lo + 1);
}

int tu_rng_chance(struct tu_rng *r, uint32_t per_million)
{
	return tu_rng_below(r, 1000000) < per_million;
}

uint64_t tu_seed_from_env(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (s == NULL || *s == '\0')
		return dflt;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || *end != '\0') {
		fprintf(stderr, "%s=%s is not a number; using %" PRIu64 "\n",
			name, s, dflt);
		return dflt;
	}
	return v;
}

/* ---- CRC32C ---------------------------------------------------------- */

uint32_t tu_crc32c(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t crc = 0xffffffffu;

	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
	}
	return ~crc;
}

/* ---- counting allocator ---------------------------------------------- */

/*
 * Each block carries its size in a header so that frees and reallocs can
 * be checked against the old_size the wheel passes.
 */
#define TU_HDR 16

static void *tu_alloc_fn(void *ctx, void *ptr, size_t old_size,
			 size_t new_size)
{
	struct tu_alloc *ta = ctx;
	unsigned char *blk = ptr ? (unsigned char *)ptr - TU_HDR : NULL;
	size_t have = 0;

	ta->calls++;
	if (blk != NULL) {
		memcpy(&have, blk, sizeof(have));
		if (have != old_size)
			ta->size_mismatch++;
	}
	if (new_size == 0) {
		if (blk != NULL) {
			ta->frees++;
			ta->live_blocks--;
			ta->live_bytes -= have;
			free(blk);
		}
		return NULL;
	}
	if (ta->fail_after == 0) {
		ta->failures++;
		return NULL;
	}
	if (ta->fail_after > 0)
		ta->fail_after--;
	if (blk == NULL) {
		ta->mallocs++;
		blk = malloc(new_size + TU_HDR);
		if (blk == NULL)
			return NULL;
		ta->live_blocks++;
	} else {
		unsigned char *nb;

		ta->reallocs++;
		nb = realloc(blk, new_size + TU_HDR);
		if (nb == NULL)
			return NULL;
		blk = nb;
		ta->live_bytes -= have;
	}
	memcpy(blk, &new_size, sizeof(new_size));
	ta->live_bytes += new_size;
	return blk + TU_HDR;
}

void tu_alloc_init(struct tu_alloc *ta)
{
	memset(ta, 0, sizeof(*ta));
	ta->a.fn = tu_alloc_fn;
	ta->a.ctx = ta;
	ta->fail_after = -1;
}

/* ---- callback recorder ----------------------------------------------- */

static uint64_t tu_rec_fire(void *data, uint64_t now, void *ctx)
{
	struct tu_rec *rec = ctx;

	if (rec->nfired == rec->capfired) {
		rec->capfired = rec->capfired ? rec->capfired * 2 : 64;
		rec->fired = realloc(rec->fired,
				     rec->capfired * sizeof(*rec->fired));
		tu_check(rec->fired != NULL, "out of memory");
	}
	rec->fired[rec->nfired].data = data;
	rec->fired[rec->nfired].now = now;
	rec->nfired++;
	return rec->on_fire ? rec->on_fire(rec, data, now) : 0;
}

static void tu_rec_drop(void *data, int reason, void *ctx)
{
	struct tu_rec *rec = ctx;

	if (rec->ndropped == rec->capdropped) {
		rec->capdropped = rec->capdropped ? rec->capdropped * 2 : 16;
		rec->dropped = realloc(rec->dropped,
				       rec->capdropped * sizeof(*rec->dropped));
		tu_check(rec->dropped != NULL, "out of memory");
	}
	rec->dropped[rec->ndropped].data = data;
	rec->dropped[rec->ndropped].reason = reason;
	rec->ndropped++;
}

void tu_rec_init(struct tu_rec *rec)
{
	memset(rec, 0, sizeof(*rec));
}

void tu_rec_free(struct tu_rec *rec)
{
	free(rec->fired);
	free(rec->dropped);
	memset(rec, 0, sizeof(*rec));
}

void tu_rec_clear(struct tu_rec *rec)
{
	rec->nfired = 0;
	rec->ndropped = 0;
}

struct bw_callbacks tu_rec_cb(struct tu_rec *rec)
{
	struct bw_callbacks cb = {
		.fire = tu_rec_fire,
		.drop = tu_rec_drop,
		.ctx = rec,
	};
	return cb;
}

size_t tu_rec_fired_count(const struct tu_rec *rec, const void *data)
{
	size_t n = 0;

	for (size_t i = 0; i < rec->nfired; i++)
		n += rec->fired[i].data == data;
	return n;
}

size_t tu_rec_dropped_count(const struct tu_rec *rec, const void *data)
{
	size_t n = 0;

	for (size_t i = 0; i < rec->ndropped; i++)
		n += rec->dropped[i].data == data;
	return n;
}

/* ---- time ------------------------------------------------------------ */

uint64_t tu_pow64(unsigned n)
{
	uint64_t p = 1;

	while (n--) {
		if (p > UINT64_MAX / 64)
			return UINT64_MAX;
		p *= 64;
	}
	return p;
}

unsigned tu_log64(uint64_t x)
{
	unsigned g = 0;

	while (x >= 64) {
		x /= 64;
		g++;
	}
	return g;
}

/* ---- wheels ---------------------------------------------------------- */

struct bw_config tu_cfg(unsigned gears, unsigned resolution_ms,
			unsigned slot_cap, unsigned max_probes,
			enum bw_precision precision, bool failover)
{
	struct bw_config cfg;

	memset(&cfg, 0, sizeof(cfg));
	cfg.gears = gears;
	cfg.resolution_ms = resolution_ms;
	cfg.slot_cap = slot_cap;
	cfg.max_probes = max_probes;
	cfg.precision = precision;
	cfg.failover = failover;
	cfg.alloc = NULL;
	return cfg;
}

struct bw_wheel *tu_wheel_new(const struct bw_config *cfg, uint64_t now_ns)
{
	struct bw_wheel *w = NULL;
	int rc = bw_wheel_new(cfg, now_ns, &w);

	ck_assert_msg(rc == 0, "bw_wheel_new: %d (%s)", rc, bw_strerror(rc));
	ck_assert_ptr_nonnull(w);
	return w;
}

struct bw_poll_result tu_poll(struct bw_wheel *w, uint64_t now_ns,
			      struct tu_rec *rec)
{
	struct bw_callbacks cb = tu_rec_cb(rec);
	struct bw_poll_result res;
	int rc;

	memset(&res, 0xa5, sizeof(res));
	rc = bw_wheel_poll(w, now_ns, &cb, &res);
	tu_check(rc == 0, "bw_wheel_poll(%" PRIu64 "): %d (%s)", now_ns, rc,
		 bw_strerror(rc));
	return res;
}

int tu_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
