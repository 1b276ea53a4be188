/*
 * trace.c - the trace scenario: a recorded kernel timer trace, replayed.
 *
 * bench/trace-capture.sh records the kernel's timer events while a
 * workload runs; bench/trace-convert.py turns them into an operation
 * stream (its docstring defines the format: "bwstream 1", then "tick",
 * "events", "start", then one "i ID DEADLINE", "c ID" or "p NOW" a line,
 * then "end").  trace_load() reads such a stream into a struct scenario
 * like the generated ones, checking every promise the format makes, so
 * that every subject can replay it exactly:
 *
 *   - ids are 0, 1, 2, ... in the order of their inserts;
 *   - a deadline is after the last poll before its insert (it fires at a
 *     later poll, never at one already made);
 *   - a cancel names a timer inserted, not cancelled, and whose deadline
 *     is after the last poll (no subject has fired it);
 *   - polls do not go back in time.
 *
 * The whole stream is measured (no warm-up: a trace starts from nothing,
 * as the structure under test would); every operation is timed.
 *
 * A wheel has two documented ways out (bitwheel.h): a timer it had to
 * probe past a full slot may fire up to max_probes - 1 ticks late (its
 * lateness sum may exceed the model's by the probes counted times that,
 * the rest must hold), and a plain wheel refuses inserts when its slots
 * are full (then only early fires are checked).  A peer has neither.
 *
 * The model (trace_expect): a subject that promises to fire a timer at the
 * first poll at or after its deadline rounded up to its tick (every peer
 * with tick 1 ns, the wheels in BW_EXACT with theirs; libev at the first
 * poll strictly after it) fires exactly the timers that no cancel reached
 * before that poll.  For each id that poll
 * is a binary search in the polls' times, so the model costs
 * O(ids log polls) and memory for the polls' times.  What it yields
 * (fires, the sum of their ids, the sum of their lateness) is what the
 * subject's fire callbacks add up (struct fire_sink): a subject that
 * fires no timer early and no timer twice, and matches all three, fired
 * every timer at the model's poll (no early fire and the same number of
 * fires and id sum leave only the expected timers; each is at or after
 * its model poll, so equal lateness sums put each at it).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define TRACE_MAX_OPS 50000000u     /* a stream's operations, at most    */
#define TRACE_MAX_LINE 128

struct loader {
	const char *path;
	unsigned long line;
	struct scenario *sc;
	size_t cap_ops, cap_ids, cap_cancelled;
	uint8_t *cancelled;     /* per id                                    */
	uint64_t last_poll;
	bool polled;
};

static int fail(const struct loader *l, const char *what)
{
	fprintf(stderr, "bwbench: %s:%lu: %s\n", l->path, l->line, what);
	return -1;
}

/* "WORD N" or "WORD N M": the numbers, all of them, or -1. */
static int numbers(const char *s, uint64_t *v, int want)
{
	char *end;
	int n = 0;

	for (; n < want; n++) {
		while (*s == ' ')
			s++;
		if (*s < '0' || *s > '9')
			return -1;
		errno = 0;
		v[n] = strtoull(s, &end, 10);
		if (errno)
			return -1;
		s = end;
	}
	return *s == '\n' || *s == '\0' ? 0 : -1;
}

static int add_op(struct loader *l, enum op_kind k, uint32_t id, uint64_t t)
{
	struct scenario *sc = l->sc;

	if (sc->nops >= TRACE_MAX_OPS)
		return fail(l, "more operations than bwbench replays "
			       "(50,000,000)");
	if (!scenario_grow((void **)&sc->ops, &l->cap_ops, sc->nops + 1,
		  sizeof(*sc->ops)))
		return fail(l, "out of memory");
	sc->ops[sc->nops++] = (struct op){ .t = t, .id = id,
					   .kind = (uint8_t)k,
					   .bucket = (uint8_t)k };
	sc->kind_count[k]++;
	sc->bucket_count[k]++;
	return 0;
}

static int record(struct loader *l, const char *s)
{
	struct scenario *sc = l->sc;
	uint64_t v[2];

	if (s[0] == 'p' && s[1] == ' ') {
		if (numbers(s + 1, v, 1))
			return fail(l, "expected 'p NOW'");
		if (v[0] < sc->start_ns || (l->polled && v[0] < l->last_poll))
			return fail(l, "poll goes back in time");
		l->last_poll = v[0];
		l->polled = true;
		return add_op(l, OP_POLL, 0, v[0]);
	}
	if (s[0] == 'i' && s[1] == ' ') {
		uint32_t id = sc->nids;

		if (numbers(s + 1, v, 2))
			return fail(l, "expected 'i ID DEADLINE'");
		if (v[0] != id)
			return fail(l, "insert ids must be 0, 1, 2, ... in order");
		if (id == UINT32_MAX)
			return fail(l, "too many timers");
		if (v[1] <= (l->polled ? l->last_poll : sc->start_ns))
			return fail(l, "deadline not after the last poll");
		if (!scenario_grow((void **)&sc->deadline, &l->cap_ids, (size_t)id + 1,
			  sizeof(*sc->deadline)))
			return fail(l, "out of memory");
		if (l->cap_ids > l->cap_cancelled) {
			uint8_t *nc = realloc(l->cancelled, l->cap_ids);

			if (!nc)
				return fail(l, "out of memory");
			l->cancelled = nc;
			l->cap_cancelled = l->cap_ids;
		}
		sc->deadline[id] = v[1];
		l->cancelled[id] = 0;
		sc->nids++;
		return add_op(l, OP_INSERT, id, v[1]);
	}
	if (s[0] == 'c' && s[1] == ' ') {
		if (numbers(s + 1, v, 1))
			return fail(l, "expected 'c ID'");
		if (v[0] >= sc->nids || l->cancelled[v[0]])
			return fail(l, "cancel of a timer not inserted or "
				       "already cancelled");
		if (l->polled && sc->deadline[v[0]] <= l->last_poll)
			return fail(l, "cancel of a timer a poll has fired");
		l->cancelled[v[0]] = 1;
		return add_op(l, OP_CANCEL, (uint32_t)v[0], 0);
	}
	return fail(l, "unknown record");
}

/* the header's "WORD N", once, before any operation */
static int header(struct loader *l, const char *s, const char *word,
		  uint64_t *out, bool *seen)
{
	size_t n = strlen(word);

	if (strncmp(s, word, n) || s[n] != ' ')
		return 1;
	if (*seen || l->sc->nops)
		return fail(l, "header line repeated or after the operations");
	if (numbers(s + n, out, 1) || !*out)
		return fail(l, "expected a positive number");
	*seen = true;
	return 0;
}

int trace_load(const char *path, struct scenario *sc)
{
	struct loader l = { .path = path, .sc = sc };
	char buf[TRACE_MAX_LINE], desc[160] = "";
	bool seen[3] = { false, false, false }, ended = false;
	uint64_t start = 0;
	FILE *f = fopen(path, "r");
	int err = -1, r;

	memset(sc, 0, sizeof(*sc));
	if (!f) {
		fprintf(stderr, "bwbench: %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(buf, sizeof(buf), f)) {
		l.line++;
		if (!strchr(buf, '\n') && !feof(f)) {
			if (buf[0] != '#')
				goto fail_line;
			/* a long comment: skip the rest of it */
			while (fgets(buf, sizeof(buf), f) && !strchr(buf, '\n'))
				;
			continue;
		}
		if (l.line == 1) {
			if (strcmp(buf, "bwstream 1\n")) {
				fail(&l, "not a bwstream 1 file "
					 "(bench/trace-convert.py writes them)");
				goto out;
			}
			continue;
		}
		if (ended) {
			fail(&l, "text after 'end'");
			goto out;
		}
		if (buf[0] == '#') {
			if (!desc[0] && !strncmp(buf, "# trace ", 8))
				snprintf(desc, sizeof(desc), "%.*s",
					 (int)strcspn(buf + 8, "\n"), buf + 8);
			continue;
		}
		if (!strcmp(buf, "end\n") || !strcmp(buf, "end")) {
			ended = true;
			continue;
		}
		if ((r = header(&l, buf, "tick", &sc->tick_ns, &seen[0])) <= 0 ||
		    (r = header(&l, buf, "events", &sc->events, &seen[1])) <= 0 ||
		    (r = header(&l, buf, "start", &start, &seen[2])) <= 0) {
			if (r < 0)
				goto out;
			if (seen[2])
				sc->start_ns = start;
			continue;
		}
		if (!seen[0] || !seen[1] || !seen[2]) {
			fail(&l, "an operation before the tick, events and "
				 "start lines");
			goto out;
		}
		if (record(&l, buf))
			goto out;
	}
	if (!ended) {
		fail(&l, "no 'end' line (a truncated stream?)");
		goto out;
	}
	if (!sc->kind_count[OP_POLL]) {
		fail(&l, "no poll");
		goto out;
	}
	sc->name = "trace";
	sc->title = "Kernel timer trace";
	snprintf(sc->summary_buf, sizeof(sc->summary_buf),
		 "Replay of %s (bench/trace-convert.py): %" PRIu64
		 " trace events as inserts, cancels and polls every %" PRIu64
		 " us. %s.",
		 path, sc->events, sc->tick_ns / 1000,
		 desc[0] ? desc : "no description");
	sc->summary = sc->summary_buf;
	sc->nbuckets = 3;
	sc->bucket[OP_INSERT] = (struct bucket_def){ "insert", OP_INSERT, 0 };
	sc->bucket[OP_CANCEL] = (struct bucket_def){ "cancel", OP_CANCEL, 0 };
	sc->bucket[OP_POLL] = (struct bucket_def){ "poll", OP_POLL, 0 };
	{
		struct trace_expect e;

		if (trace_expect(sc, 1, false, &e)) {
			fail(&l, "out of memory");
			goto out;
		}
		sc->max_live = e.max_live;
	}
	err = 0;
	goto out;
fail_line:
	fail(&l, "line too long");
out:
	fclose(f);
	free(l.cancelled);
	if (err)
		scenario_free(sc);
	return err;
}

int trace_expect(const struct scenario *sc, uint64_t tick, bool strict,
		 struct trace_expect *e)
{
	size_t np = sc->kind_count[OP_POLL], k = 0;
	uint64_t *pt = malloc((np ? np : 1) * sizeof(*pt));
	size_t *ppos = malloc((np ? np : 1) * sizeof(*ppos));
	size_t *cpos = malloc((sc->nids ? sc->nids : 1) * sizeof(*cpos));
	int32_t *delta = calloc(sc->nops + 1, sizeof(*delta));
	int64_t live = 0;
	int err = -1;

	memset(e, 0, sizeof(*e));
	if (!pt || !ppos || !cpos || !delta)
		goto out;
	if (!tick)
		tick = 1;
	for (uint32_t i = 0; i < sc->nids; i++)
		cpos[i] = SIZE_MAX;
	for (size_t i = 0; i < sc->nops; i++) {
		const struct op *o = &sc->ops[i];

		if (o->kind == OP_POLL) {
			pt[k] = o->t;
			ppos[k++] = i;
		} else if (o->kind == OP_CANCEL) {
			cpos[o->id] = i;
		}
	}
	for (size_t i = 0; i < sc->nops; i++) {
		const struct op *o = &sc->ops[i];
		uint64_t due;
		size_t lo = 0, hi = np, end;

		if (o->kind != OP_INSERT)
			continue;
		due = strict ? o->t + 1 : (o->t + tick - 1) / tick * tick;
		while (lo < hi) {       /* the first poll at or after due */
			size_t mid = lo + (hi - lo) / 2;

			if (pt[mid] < due)
				lo = mid + 1;
			else
				hi = mid;
		}
		end = lo < np ? ppos[lo] : sc->nops;
		if (cpos[o->id] < end) {
			end = cpos[o->id];
		} else if (lo < np) {
			e->fired++;
			e->idsum += o->id;
			e->late_sum += pt[lo] - o->t;
		}
		delta[i]++;
		delta[end]--;
	}
	for (size_t i = 0; i < sc->nops; i++) {
		live += delta[i];
		if (live > (int64_t)e->max_live)
			e->max_live = (uint32_t)live;
	}
	err = 0;
out:
	free(pt);
	free(ppos);
	free(cpos);
	free(delta);
	return err;
}

int trace_check(const struct scenario *sc, const struct subject *s,
		const struct run_result *r, char *why, size_t n)
{
	struct trace_expect e;
	uint64_t tick = s->tick_ns ? s->tick_ns : 1, slack;
	const char *how = s->strict ? ", strict" : "";

	if (!r->ok) {
		snprintf(why, n, "did not run: %s", r->error);
		return -1;
	}
	if (r->early) {
		snprintf(why, n, "%" PRIu64 " fired early", r->early);
		return -1;
	}
	if (s->inexact) {
		snprintf(why, n, "never early; no exact promise to check");
		return 0;
	}
	if (r->refused && s->probe_ticks) {
		/* a plain wheel's documented BW_EFULL: its fires are not the
		 * stream's any more */
		snprintf(why, n, "never early; refused %" PRIu64 " inserts "
			 "(slots full): not compared", r->refused);
		return 0;
	}
	if (r->refused || r->cancel_missed) {
		snprintf(why, n, "%" PRIu64 " refused, %" PRIu64 " cancels "
			 "missed", r->refused, r->cancel_missed);
		return -1;
	}
	if (trace_expect(sc, tick, s->strict, &e)) {
		snprintf(why, n, "out of memory");
		return -1;
	}
	/* a probed timer may come up to probe_ticks ticks late */
	slack = r->ctr.valid ? r->ctr.probed * s->probe_ticks * tick : 0;
	if (r->fired != e.fired || r->idsum != e.idsum ||
	    r->late_sum_ns < e.late_sum || r->late_sum_ns - e.late_sum > slack) {
		snprintf(why, n, "fired %" PRIu64 " (model %" PRIu64 "), id sum %"
			 PRIu64 " (%" PRIu64 "), lateness sum %" PRIu64
			 " ns (%" PRIu64 " + at most %" PRIu64 ") at tick %"
			 PRIu64 " ns%s", r->fired, e.fired, r->idsum, e.idsum,
			 r->late_sum_ns, e.late_sum, slack, tick, how);
		return -1;
	}
	if (r->late_sum_ns != e.late_sum) {
		snprintf(why, n, "fired the model's %" PRIu64 " timers; %" PRIu64
			 " probed, %.1f ms later in all, within the probes' "
			 "bound (tick %" PRIu64 " ns)", r->fired, r->ctr.probed,
			 (double)(r->late_sum_ns - e.late_sum) / NS_PER_MS,
			 tick);
		return 0;
	}
	snprintf(why, n, "fired %" PRIu64 " timers, each at the model's poll "
		 "(tick %" PRIu64 " ns%s)", r->fired, tick, how);
	return 0;
}
