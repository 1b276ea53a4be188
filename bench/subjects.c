/*
 * subjects.c - the list of subjects: our wheels' configurations, the peers
 * configure found, the ones it did not, and the null subject.
 *
 * Wheels, each in BW_EXACT and BW_COARSE:
 *   plain:balanced     the Balanced preset: 5 ms, cap 16, 8 probes
 *   plain:precise      the Precise preset: 1 ms, cap 16, 8 probes
 *   plain:precise64    Precise with slot_cap 64 (the design document's
 *                      benchmark wheel, BitWheel<4, 1, 64, 8>)
 *   failover:...       the same three with the overflow store
 *   dual:fast-precise  the FastPrecise dual preset (oneshot 1 ms, cap 64)
 *   dual:std-balanced  the StandardBalanced dual preset (oneshot 5 ms, cap 16)
 *   intr:precise64     plain:precise64 through the intrusive API
 *                      (bw_timer_add/bw_timer_cancel on a struct bw_timer
 *                      per id) instead of handles
 *   intr-failover:...  the same on a failover wheel
 * Every timer in these scenarios is a oneshot, so a dual wheel's periodic
 * lane stays empty and costs only its share of each poll.
 *
 * The null subject does nothing; callgrind.sh runs it to measure what the
 * harness itself adds to every operation.
 */
#include <bitwheel.h>

#include <string.h>

#include "bench.h"

struct wheel_def {
	const char *name;
	struct bw_subject_param p;
};

static const struct wheel_def wheel_defs[] = {
	{ "plain:balanced:exact", { BWS_PLAIN, BW_PRESET_BALANCED, 0, BW_EXACT } },
	{ "plain:balanced:coarse", { BWS_PLAIN, BW_PRESET_BALANCED, 0, BW_COARSE } },
	{ "plain:precise:exact", { BWS_PLAIN, BW_PRESET_PRECISE, 0, BW_EXACT } },
	{ "plain:precise:coarse", { BWS_PLAIN, BW_PRESET_PRECISE, 0, BW_COARSE } },
	{ "plain:precise64:exact", { BWS_PLAIN, BW_PRESET_PRECISE, 64, BW_EXACT } },
	{ "plain:precise64:coarse", { BWS_PLAIN, BW_PRESET_PRECISE, 64, BW_COARSE } },
	{ "failover:balanced:exact", { BWS_FAILOVER, BW_PRESET_BALANCED, 0, BW_EXACT } },
	{ "failover:balanced:coarse", { BWS_FAILOVER, BW_PRESET_BALANCED, 0, BW_COARSE } },
	{ "failover:precise:exact", { BWS_FAILOVER, BW_PRESET_PRECISE, 0, BW_EXACT } },
	{ "failover:precise:coarse", { BWS_FAILOVER, BW_PRESET_PRECISE, 0, BW_COARSE } },
	{ "failover:precise64:exact", { BWS_FAILOVER, BW_PRESET_PRECISE, 64, BW_EXACT } },
	{ "failover:precise64:coarse", { BWS_FAILOVER, BW_PRESET_PRECISE, 64, BW_COARSE } },
	{ "dual:fast-precise:exact", { BWS_DUAL, BW_DUAL_FAST_PRECISE, 0, BW_EXACT } },
	{ "dual:fast-precise:coarse", { BWS_DUAL, BW_DUAL_FAST_PRECISE, 0, BW_COARSE } },
	{ "dual:std-balanced:exact", { BWS_DUAL, BW_DUAL_STANDARD_BALANCED, 0, BW_EXACT } },
	{ "dual:std-balanced:coarse", { BWS_DUAL, BW_DUAL_STANDARD_BALANCED, 0, BW_COARSE } },
	{ "intr:precise64:exact", { BWS_INTR, BW_PRESET_PRECISE, 64, BW_EXACT } },
	{ "intr:precise64:coarse", { BWS_INTR, BW_PRESET_PRECISE, 64, BW_COARSE } },
	{ "intr-failover:precise64:exact", { BWS_INTR_FAILOVER, BW_PRESET_PRECISE, 64, BW_EXACT } },
	{ "intr-failover:precise64:coarse", { BWS_INTR_FAILOVER, BW_PRESET_PRECISE, 64, BW_COARSE } },
};

#define NWHEELS (sizeof(wheel_defs) / sizeof(wheel_defs[0]))

static const struct subject *const peers[] = {
#ifdef BENCH_HAVE_LIBBSD
	&subject_rbtree,
#endif
#ifdef BENCH_HAVE_LIBEV
	&subject_libev,
#endif
#ifdef BENCH_HAVE_LIBUV
	&subject_libuv,
#endif
#ifdef BENCH_HAVE_LIBEVENT
	&subject_libevent,
#endif
	NULL,
};

#define NPEERS (sizeof(peers) / sizeof(peers[0]) - 1)

static const struct missing_subject missing[] = {
#ifndef BENCH_HAVE_LIBBSD
	{ "rbtree", "not built: install libbsd-dev and rerun configure" },
#endif
#ifndef BENCH_HAVE_LIBEV
	{ "libev", "not built: install libev-dev and rerun configure" },
#endif
#ifndef BENCH_HAVE_LIBUV
	{ "libuv", "not built: install libuv1-dev and rerun configure" },
#endif
#ifndef BENCH_HAVE_LIBEVENT
	{ "libevent", "not built: install libevent-dev and rerun configure" },
#endif
	{ NULL, NULL },
};

static struct subject wheels[NWHEELS];

/* What the trace scenario holds a wheel to: the preset's resolution (the
 * oneshot lane's for dual) and probe displacement (bitwheel.h: BW_EXACT). */
static void wheel_promise(struct subject *s, const struct bw_subject_param *p)
{
	struct bw_dual_config dc;
	struct bw_config c;

	if (p->kind == BWS_DUAL) {
		bw_dual_config_preset(p->preset, &dc);
		c = dc.oneshot;
	} else {
		bw_config_preset(p->preset, &c);
	}
	s->tick_ns = c.resolution_ms * NS_PER_MS;
	s->probe_ticks = c.max_probes - 1;
	s->inexact = p->precision == BW_COARSE;
}

static const struct subject *all[NWHEELS + NPEERS + 1];

const struct subject *const *subjects_all(size_t *n)
{
	if (!all[0]) {
		for (size_t i = 0; i < NWHEELS; i++) {
			const struct wheel_def *d = &wheel_defs[i];

			wheels[i] = d->p.kind == BWS_DUAL ? subject_bw_dual
				    : d->p.kind >= BWS_INTR ? subject_bw_timer
							    : subject_bw_wheel;
			wheels[i].name = d->name;
			wheels[i].param = &d->p;
			wheel_promise(&wheels[i], &d->p);
			all[i] = &wheels[i];
		}
		for (size_t i = 0; i < NPEERS; i++)
			all[NWHEELS + i] = peers[i];
	}
	*n = NWHEELS + NPEERS;
	return all;
}

const struct missing_subject *subjects_missing(size_t *n)
{
	*n = sizeof(missing) / sizeof(missing[0]) - 1;
	return missing;
}

const struct subject *subject_find(const char *name)
{
	size_t n;
	const struct subject *const *s = subjects_all(&n);

	if (!strcmp(name, subject_null.name))
		return &subject_null;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s[i]->name, name))
			return s[i];
	return NULL;
}

/* ---- the null subject ---------------------------------------------------- */

static int null_open(const struct subject *s, const struct subject_env *env,
		     void **ctx)
{
	(void)s;
	*ctx = env->ref;
	return 0;
}

static void null_close(void *ctx)
{
	(void)ctx;
}

static int null_insert(void *ctx, uint32_t id, uint64_t deadline)
{
	((uint64_t *)ctx)[id] = deadline;
	return 0;
}

static int null_cancel(void *ctx, uint32_t id)
{
	return ((uint64_t *)ctx)[id] == 0;
}

static int null_poll(void *ctx, uint64_t now)
{
	(void)ctx;
	return now == 0;
}

const struct subject subject_null = {
	.name = "null",
	.family = "none",
	.structure = "does nothing (harness floor)",
	.inexact = true,
	.lib_fn = { NULL, NULL, NULL },
	.open = null_open,
	.close = null_close,
	.insert = null_insert,
	.cancel = null_cancel,
	.poll = null_poll,
};
