/*
 * runner.c - one subject, one scenario: replay the stream, time each op.
 *
 * The warm-up part of the stream runs untimed; then bench_measured_phase()
 * replays the rest, timing every operation that has a sample bucket on its
 * own: tsc_begin(), one call to the op's wrapper, tsc_end().  Arguments
 * are loaded and the simulated clock is set before the region opens; the
 * sample stored is the region minus the median empty region (at least 0).
 *
 * The wrappers bench_op_insert/cancel/poll (bench_op_poll_gapN for the
 * idle scenario's gap classes) are never inlined, so the timed code path
 * is the same for every subject (one call to the wrapper, one indirect
 * call to the subject's adapter) and callgrind can name them:
 * callgrind.sh collects only inside bench_measured_phase() and reads each
 * wrapper's inclusive instruction count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

BENCH_NOINLINE int bench_op_insert(const struct subject *s, void *ctx,
				   uint32_t id, uint64_t deadline)
{
	return s->insert(ctx, id, deadline);
}

BENCH_NOINLINE int bench_op_cancel(const struct subject *s, void *ctx,
				   uint32_t id)
{
	return s->cancel(ctx, id);
}

BENCH_NOINLINE int bench_op_poll(const struct subject *s, void *ctx,
				 uint64_t now)
{
	return s->poll(ctx, now);
}

/*
 * The idle scenario's polls go through one wrapper per gap class, so that
 * callgrind can tell the gaps apart; they are bench_op_poll otherwise.
 */
#define POLL_GAP(n)                                                          \
	BENCH_NOINLINE int bench_op_poll_gap##n(const struct subject *s,      \
						void *ctx, uint64_t now)     \
	{                                                                    \
		return s->poll(ctx, now);                                    \
	}
POLL_GAP(0)
POLL_GAP(1)
POLL_GAP(2)
POLL_GAP(3)
POLL_GAP(4)
POLL_GAP(5)
POLL_GAP(6)
POLL_GAP(7)

typedef int (*poll_fn)(const struct subject *, void *, uint64_t);

static const poll_fn poll_gap[8] = {
	bench_op_poll_gap0, bench_op_poll_gap1, bench_op_poll_gap2,
	bench_op_poll_gap3, bench_op_poll_gap4, bench_op_poll_gap5,
	bench_op_poll_gap6, bench_op_poll_gap7,
};

static poll_fn poll_wrapper(const struct scenario *sc, const struct op *o)
{
	if (o->bucket < 8 && sc->bucket[o->bucket].gap_ms)
		return poll_gap[o->bucket];
	return bench_op_poll;
}

static int run_op(const struct subject *s, void *ctx,
		  const struct scenario *sc, const struct op *o)
{
	switch (o->kind) {
	case OP_INSERT:
		return bench_op_insert(s, ctx, o->id, o->t);
	case OP_CANCEL:
		return bench_op_cancel(s, ctx, o->id);
	default:
		return poll_wrapper(sc, o)(s, ctx, o->t);
	}
}

static inline uint32_t clamp32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* ops[from .. to); timed: sample every op that has a bucket. */
BENCH_NOINLINE static void replay(const struct subject *s, void *ctx,
				  const struct scenario *sc, size_t from,
				  size_t to, struct fire_sink *sink,
				  uint32_t **samples, bool timed,
				  struct phase_counts *c)
{
	const struct op *o = sc->ops + from, *end = sc->ops + to;

	for (; o < end; o++) {
		uint64_t t0, t1;
		int r;

		if (o->kind == OP_POLL) {
			simclock_set(o->t);
			sink->now = o->t;
		}
		if (!timed || o->bucket == BUCKET_NONE) {
			r = run_op(s, ctx, sc, o);
		} else {
			switch (o->kind) {
			case OP_INSERT: {
				uint32_t id = o->id;
				uint64_t d = o->t;

				t0 = tsc_begin();
				r = bench_op_insert(s, ctx, id, d);
				t1 = tsc_end();
				break;
			}
			case OP_CANCEL: {
				uint32_t id = o->id;

				t0 = tsc_begin();
				r = bench_op_cancel(s, ctx, id);
				t1 = tsc_end();
				break;
			}
			default: {
				uint64_t now = o->t;
				poll_fn fn = poll_wrapper(sc, o);

				t0 = tsc_begin();
				r = fn(s, ctx, now);
				t1 = tsc_end();
				break;
			}
			}
			*samples[o->bucket]++ = clamp32(t1 - t0);
		}
		if (!r)
			continue;
		if (o->kind == OP_INSERT) {
			c->refused++;
			c->refused_timed += o->bucket != BUCKET_NONE;
		} else if (o->kind == OP_CANCEL) {
			c->missed++;
		}
	}
}

BENCH_NOINLINE void bench_measured_phase(const struct subject *s, void *ctx,
					 const struct scenario *sc,
					 struct fire_sink *sink,
					 uint32_t **samples, bool timed,
					 struct phase_counts *c)
{
	replay(s, ctx, sc, sc->nwarm, sc->nops, sink, samples, timed, c);
}

void run_subject(const struct subject *s, const struct scenario *sc,
		 const struct run_options *opt, struct run_result *r)
{
	struct fire_sink sink = { .now = sc->start_ns,
				  .deadline = sc->deadline };
	struct subject_env env;
	uint32_t *buf[MAX_BUCKETS] = { 0 }, *cur[MAX_BUCKETS];
	struct phase_counts warm = { 0 }, meas = { 0 };
	uint64_t t_start = real_now_ns(), cancels = 0;
	uint64_t *ref;
	void *ctx = NULL;
	int err;

	memset(r, 0, sizeof(*r));
	r->subject = s;
	r->scenario = sc;
	/* Every page written now, not on first use inside a timed insert
	 * (every 512th id).  explicit_bzero because the compiler turns
	 * malloc + memset(0) into calloc, which leaves the pages untouched. */
	ref = malloc((sc->nids ? sc->nids : 1) * sizeof(*ref));
	if (!ref) {
		snprintf(r->error, sizeof(r->error), "out of memory");
		return;
	}
	explicit_bzero(ref, (sc->nids ? sc->nids : 1) * sizeof(*ref));
	for (unsigned b = 0; b < sc->nbuckets && opt->timed; b++) {
		size_t n = sc->bucket_count[b] ? sc->bucket_count[b] : 1;

		buf[b] = malloc(n * sizeof(**buf));
		if (!buf[b]) {
			snprintf(r->error, sizeof(r->error), "out of memory");
			goto out;
		}
		explicit_bzero(buf[b], n * sizeof(**buf));
		cur[b] = buf[b];
	}
	env = (struct subject_env){ .ref = ref, .sink = &sink,
				    .nids = sc->nids,
				    .max_live = sc->max_live,
				    .start_ns = sc->start_ns };
	simclock_set(sc->start_ns);
	err = s->open(s, &env, &ctx);
	if (err) {
		snprintf(r->error, sizeof(r->error), "open failed (%d)", err);
		goto out;
	}
	replay(s, ctx, sc, 0, sc->nwarm, &sink, cur, false, &warm);
	bench_measured_phase(s, ctx, sc, &sink, cur, opt->timed, &meas);
	r->refused = warm.refused + meas.refused;
	r->refused_measured = meas.refused_timed;
	r->cancel_missed = warm.missed + meas.missed;
	r->fired = sink.fired;
	r->idsum = sink.idsum;
	r->early = sink.early;
	r->late_sum_ns = sink.late_sum;
	r->late_mean_ms = sink.fired ? (double)sink.late_sum /
					       (double)sink.fired / NS_PER_MS
				     : 0;
	r->late_max_ms = (double)sink.late_max / NS_PER_MS;
	if (s->counters)
		s->counters(ctx, &r->ctr);
	/* accepted - cancelled - fired: what the subject still holds */
	for (size_t i = 0; i < sc->nops; i++)
		cancels += sc->ops[i].kind == OP_CANCEL;
	r->pending_end = sc->nids - r->refused - (cancels - r->cancel_missed) -
			 r->fired;
	s->close(ctx);
	if (opt->timed) {
		for (unsigned b = 0; b < sc->nbuckets; b++) {
			size_t n = (size_t)(cur[b] - buf[b]);
			double empty = opt->timing->empty_ticks;

			for (size_t i = 0; i < n; i++)
				buf[b][i] = buf[b][i] > empty
						    ? (uint32_t)(buf[b][i] - empty)
						    : 0;
			stats_summarize(buf[b], n, opt->timing->ticks_per_ns,
					&r->bucket[b]);
		}
	}
	r->ok = true;
out:
	for (unsigned b = 0; b < MAX_BUCKETS; b++)
		free(buf[b]);
	free(ref);
	r->seconds = (double)(real_now_ns() - t_start) / NS_PER_S;
}
