/*
 * report.c - the results as Markdown (wheel.md), CSV (wheel.csv) and JSON
 * (wheel.json).
 *
 * wheel.md has, per scenario, the design document's table format for a
 * headline set of subjects (best value of a row in bold), then every
 * subject's full row per operation with its ratio to the best peer for
 * that metric (below 1: better than every peer), then what each subject
 * did (refusals, probes, overflow, lateness).  A last section checks the
 * benchmark issue's latency targets.  The CSV has one row per scenario,
 * subject and sample bucket; plot.sh draws the charts from it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define R(i, j) (&res[(i) * nsub + (j)])

static bool is_peer(const struct subject *s)
{
	return strcmp(s->family, "bitwheel") != 0;
}

static const char *fmt_ns(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else if (v < 10)
		snprintf(buf, n, "%.1f ns", v);
	else
		snprintf(buf, n, "%.0f ns", v);
	return buf;
}

/* metric m of a summary: 0..NPCT-1 percentiles, NPCT max, NPCT+1 mean */
#define M_MAX NPCT
#define M_MEAN (NPCT + 1)
#define M_TMEAN (NPCT + 2)
#define NMETRICS (NPCT + 3)
static const char *const metric_names[NMETRICS] = {
	"p50", "p90", "p99", "p99.9", "p99.99", "max", "mean", "trimmed mean"
};

static double metric(const struct summary *s, unsigned m)
{
	if (!s->n)
		return NAN;
	if (m < NPCT)
		return s->pct[m];
	return m == M_MAX ? s->max : m == M_MEAN ? s->mean : s->tmean;
}

static double best_peer(const struct run_result *row, size_t nsub,
			const struct subject *const *sub, unsigned b,
			unsigned m)
{
	double best = NAN;

	for (size_t j = 0; j < nsub; j++) {
		double v;

		if (!is_peer(sub[j]) || !row[j].ok)
			continue;
		v = metric(&row[j].bucket[b], m);
		if (!isnan(v) && (isnan(best) || v < best))
			best = v;
	}
	return best;
}

static int find_bucket(const struct scenario *sc, enum op_kind k)
{
	for (unsigned b = 0; b < sc->nbuckets; b++)
		if (sc->bucket[b].kind == k)
			return (int)b;
	return -1;
}

static long find_subject(const struct subject *const *sub, size_t nsub,
			 const char *name)
{
	for (size_t j = 0; j < nsub; j++)
		if (!strcmp(sub[j]->name, name))
			return (long)j;
	return -1;
}

/* ---- Markdown ----------------------------------------------------------- */

static void md_header(FILE *f, const struct report_meta *m,
		      const struct subject *const *sub, size_t nsub)
{
	char date[64], host[128] = "unknown", line[256];
	time_t now = time(NULL);
	FILE *ci = fopen("/proc/cpuinfo", "r");
	size_t nmiss;
	const struct missing_subject *miss = subjects_missing(&nmiss);

	strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", gmtime(&now));
	while (ci && fgets(line, sizeof(line), ci)) {
		char *p = strchr(line, ':');

		if (!strncmp(line, "model name", 10) && p) {
			snprintf(host, sizeof(host), "%s", p + 2);
			host[strcspn(host, "\n")] = 0;
			break;
		}
	}
	if (ci)
		fclose(ci);
	fprintf(f, "# bwbench: libbitwheel against the timer structures a C "
		   "programmer would pick instead\n\n");
	fprintf(f, "- run: %s, mode **%s**: %zu warm-up then %zu measured "
		   "operations per scenario and subject, seed %llu; %u "
		   "round%s, round-robin over the subjects%s; %.0f s in all\n",
		date, m->mode, m->params.warmup, m->params.measured,
		(unsigned long long)m->params.seed, m->rounds,
		m->rounds == 1 ? "" : "s",
		m->rounds == 1 ? "" : ", every latency number the median of "
				      "the rounds' values",
		m->seconds);
	fprintf(f, "- host: %s, %ld online CPUs (shared and noisy: only "
		   "ratios within this run mean anything)\n",
		host, sysconf(_SC_NPROCESSORS_ONLN));
	fprintf(f, "- timing: each operation alone, %s at %.3f ticks/ns; the "
		   "empty region's median (%.1f ns, min %.1f ns) is "
		   "subtracted from every sample; the counter advances in "
		   "steps of %.0f ticks (%.1f ns), so every percentile is a "
		   "multiple of that: compare means for finer differences, "
		   "and callgrind.md for exact costs\n",
		m->timing->source, m->timing->ticks_per_ns,
		m->timing->empty_ticks / m->timing->ticks_per_ns,
		m->timing->empty_min_ticks / m->timing->ticks_per_ns,
		m->timing->step_ticks,
		m->timing->step_ticks / m->timing->ticks_per_ns);
	fprintf(f, "- event loops (libev, libuv, libevent) read a simulated "
		   "clock (bwbench defines clock_gettime and gettimeofday), "
		   "so they see the same times as the wheels; their backend "
		   "wait epoll_wait(..., 0) %s (one such system call costs "
		   "%.0f ns here)\n",
		m->short_wait ? "is answered without entering the kernel"
			      : "is a real system call (--real-wait)",
		m->epoll_ns);
	fprintf(f, "- subjects:");
	for (size_t j = 0; j < nsub; j++)
		if (is_peer(sub[j]))
			fprintf(f, " %s%s%s (%s);", sub[j]->name,
				sub[j]->version ? " " : "",
				sub[j]->version ? sub[j]->version() : "",
				sub[j]->structure);
	fprintf(f, " and libbitwheel's wheels: plain, failover and dual, "
		   "exact and coarse (see bench/README.md)\n");
	for (size_t i = 0; i < nmiss; i++)
		fprintf(f, "- **%s: %s**\n", miss[i].name, miss[i].hint);
	fprintf(f, "- ratios: the value over the best peer's value for the "
		   "same metric (below 1: better than every peer)\n");
	fprintf(f, "- instructions per operation: [callgrind.md]"
		   "(callgrind.md); charts: wheel-*.png\n\n");
}

/* The design document's layout: metrics down, headline subjects across. */
static void md_design_table(FILE *f, const char *first_col,
			    const struct scenario *sc,
			    const struct run_result *row,
			    const struct subject *const *sub, size_t nsub,
			    const long *cols, size_t ncols,
			    const enum op_kind *kinds, size_t nkinds,
			    const unsigned *metrics, size_t nmetrics)
{
	static const char *const kind_names[OP_NKINDS] = { "Insert", "Cancel",
							   "Poll" };
	char buf[32];

	(void)nsub;
	fprintf(f, "| %s |", first_col);
	for (size_t c = 0; c < ncols; c++)
		fprintf(f, " %s |", sub[cols[c]]->name);
	fprintf(f, "\n|---|");
	for (size_t c = 0; c < ncols; c++)
		fprintf(f, "---:|");
	fprintf(f, "\n");
	for (size_t k = 0; k < nkinds; k++) {
		int b = find_bucket(sc, kinds[k]);

		if (b < 0)
			continue;
		for (size_t mi = 0; mi < nmetrics; mi++) {
			unsigned m = metrics[mi];
			double best = NAN;

			for (size_t c = 0; c < ncols; c++) {
				double v = row[cols[c]].ok
						   ? metric(&row[cols[c]].bucket[b], m)
						   : NAN;

				if (!isnan(v) && (isnan(best) || v < best))
					best = v;
			}
			if (nkinds > 1)
				fprintf(f, "| %s %s |", kind_names[kinds[k]],
					metric_names[m]);
			else
				fprintf(f, "| %s |", metric_names[m]);
			for (size_t c = 0; c < ncols; c++) {
				double v = row[cols[c]].ok
						   ? metric(&row[cols[c]].bucket[b], m)
						   : NAN;
				bool bold = !isnan(v) && v == best;

				fprintf(f, " %s%s%s |", bold ? "**" : "",
					fmt_ns(buf, sizeof(buf), v),
					bold ? "**" : "");
			}
			fprintf(f, "\n");
		}
	}
	for (size_t c = 0; c < ncols; c++) {
		const struct run_result *r = &row[cols[c]];

		if (r->ok && r->refused)
			fprintf(f, "\n%s refused %llu inserts (%llu of them "
				   "timed: a refusal is timed like any insert).",
				sub[cols[c]]->name,
				(unsigned long long)r->refused,
				(unsigned long long)r->refused_measured);
	}
	fprintf(f, "\n\n");
}

static void md_full_table(FILE *f, const struct scenario *sc, unsigned b,
			  const struct run_result *row,
			  const struct subject *const *sub, size_t nsub)
{
	char buf[32];
	double bp50 = best_peer(row, nsub, sub, b, 0);
	double bp999 = best_peer(row, nsub, sub, b, 3);
	double bp9999 = best_peer(row, nsub, sub, b, 4);

	fprintf(f, "#### %s\n\n", sc->bucket[b].name);
	fprintf(f, "| subject | n | p50 | p90 | p99 | p99.9 | p99.99 | max | "
		   "mean | mean of lowest 99.9%% | p50 / best peer | "
		   "p99.9 / best peer | p99.99 / best peer |\n");
	fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		   "---:|---:|\n");
	for (size_t j = 0; j < nsub; j++) {
		const struct summary *s = &row[j].bucket[b];

		if (!row[j].ok) {
			fprintf(f, "| %s | failed: %s |\n", sub[j]->name,
				row[j].error);
			continue;
		}
		fprintf(f, "| %s | %zu |", sub[j]->name, s->n);
		for (unsigned m = 0; m < NMETRICS; m++)
			fprintf(f, " %s |",
				fmt_ns(buf, sizeof(buf), metric(s, m)));
		fprintf(f, " %.2f | %.2f | %.2f |\n", s->pct[0] / bp50,
			s->pct[3] / bp999, s->pct[4] / bp9999);
	}
	fprintf(f, "\n");
}

static void md_behaviour(FILE *f, const struct scenario *sc,
			 const struct run_result *row,
			 const struct subject *const *sub, size_t nsub)
{
	fprintf(f, "#### What each subject did\n\n");
	fprintf(f, "Over the whole stream (%zu operations, %u timers): inserts "
		   "refused, cancels that found nothing (their insert was "
		   "refused), timers fired, fires before the deadline (must be "
		   "0), mean and max lateness of a fire past its deadline, and "
		   "the wheels' counters.\n\n",
		sc->nops, sc->nids);
	fprintf(f, "| subject | refused | cancel missed | fired | early | "
		   "late mean | late max | probed | overflowed | reslotted | "
		   "overfilled | footprint | run time |\n");
	fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		   "---:|---:|\n");
	for (size_t j = 0; j < nsub; j++) {
		const struct run_result *r = &row[j];

		if (!r->ok)
			continue;
		fprintf(f, "| %s | %llu | %llu | %llu | %llu | %.2f ms | "
			   "%.1f ms |",
			sub[j]->name, (unsigned long long)r->refused,
			(unsigned long long)r->cancel_missed,
			(unsigned long long)r->fired,
			(unsigned long long)r->early, r->late_mean_ms,
			r->late_max_ms);
		if (r->ctr.valid)
			fprintf(f, " %llu | %llu | %llu | %llu | %.0f KiB |",
				(unsigned long long)r->ctr.probed,
				(unsigned long long)r->ctr.overflowed,
				(unsigned long long)r->ctr.reslotted,
				(unsigned long long)r->ctr.overfilled,
				r->ctr.footprint / 1024.0);
		else
			fprintf(f, " - | - | - | - | - |");
		fprintf(f, " %.2f s |\n", r->seconds);
	}
	fprintf(f, "\n");
}

/*
 * The trace scenario: mean time per operation and per kernel trace event
 * (every operation is measured: the means times the counts are the whole
 * replay, but for the 0.1 % slowest samples), and each subject's check
 * against the model (trace.c).
 */
static void md_trace(FILE *f, const struct scenario *sc,
		     const struct run_result *row,
		     const struct subject *const *sub, size_t nsub)
{
	size_t nops = 0;

	for (unsigned b = 0; b < sc->nbuckets; b++)
		nops += sc->bucket_count[b];
	fprintf(f, "### Per operation and per trace event\n\n");
	fprintf(f, "Mean ns per insert, cancel and poll (the lowest 99.9 %% "
		   "of samples: a preempted sample of a shared machine would "
		   "outweigh thousands); the replay's time so counted over its "
		   "%zu operations and over the %llu kernel timer events they "
		   "stand for; and whether the subject "
		   "fired every timer at the poll it promises (the first at or "
		   "after the deadline rounded up to its tick).\n\n",
		nops, (unsigned long long)sc->events);
	fprintf(f, "| subject | insert | cancel | poll | per op | "
		   "per trace event | fires |\n");
	fprintf(f, "|---|---:|---:|---:|---:|---:|---|\n");
	for (size_t j = 0; j < nsub; j++) {
		const struct run_result *r = &row[j];
		double total = 0;

		if (!r->ok)
			continue;
		fprintf(f, "| %s |", sub[j]->name);
		for (unsigned b = 0; b < sc->nbuckets; b++) {
			fprintf(f, " %.1f |", r->bucket[b].tmean);
			total += r->bucket[b].tmean * (double)sc->bucket_count[b];
		}
		fprintf(f, " %.1f | %.1f | %s%s |\n",
			nops ? total / (double)nops : 0,
			sc->events ? total / (double)sc->events : 0,
			r->check_failed ? "**FAILED**: " : "", r->check);
	}
	fprintf(f, "\n");
}

static void md_idle(FILE *f, const struct scenario *sc,
		    const struct run_result *row,
		    const struct subject *const *sub, size_t nsub)
{
	char buf[32];
	static const unsigned ms[] = { M_TMEAN, 0, 3 };

	for (size_t mi = 0; mi < 3; mi++) {
		unsigned m = ms[mi];

		fprintf(f, "Poll %s by gap, and the largest over the smallest "
			   "across gaps%s:\n\n",
			metric_names[m],
			m == M_TMEAN ? " (the mean of the lowest 99.9% of "
				       "samples, so that a preemption does not "
				       "count; the flatness target: at most 2. "
				       "Percentiles move in the counter's 10 ns "
				       "steps)" : "");
		fprintf(f, "| subject |");
		for (unsigned b = 0; b < sc->nbuckets; b++)
			fprintf(f, " %s |", sc->bucket[b].name + 9);
		fprintf(f, " max/min |\n|---|");
		for (unsigned b = 0; b <= sc->nbuckets; b++)
			fprintf(f, "---:|");
		fprintf(f, "\n");
		for (size_t j = 0; j < nsub; j++) {
			double lo = INFINITY, hi = 0;

			if (!row[j].ok)
				continue;
			fprintf(f, "| %s |", sub[j]->name);
			for (unsigned b = 0; b < sc->nbuckets; b++) {
				double v = metric(&row[j].bucket[b], m);

				fprintf(f, " %s |", fmt_ns(buf, sizeof(buf), v));
				if (v < lo)
					lo = v;
				if (v > hi)
					hi = v;
			}
			fprintf(f, " %.2f |\n", lo > 0 ? hi / lo : NAN);
		}
		fprintf(f, "\n");
	}
}

static double idle_flatness(const struct scenario *sc,
			    const struct run_result *r, unsigned m)
{
	double lo = INFINITY, hi = 0;

	for (unsigned b = 0; b < sc->nbuckets; b++) {
		double v = metric(&r->bucket[b], m);

		lo = v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	/* below the timer's resolution a ratio means nothing */
	if (lo < 1)
		lo = 1;
	return hi / lo;
}

static const char *mark(bool ok)
{
	return ok ? "yes" : "**no**";
}

/* The latency targets, for every wheel subject. */
static void md_targets(FILE *f, struct scenario *const *sc, size_t nsc,
		       const struct subject *const *sub, size_t nsub,
		       const struct run_result *res)
{
	long tr = -1, il = -1, idle = -1;

	for (size_t i = 0; i < nsc; i++) {
		if (!strcmp(sc[i]->name, "trading"))
			tr = (long)i;
		else if (!strcmp(sc[i]->name, "interleaved"))
			il = (long)i;
		else if (!strcmp(sc[i]->name, "idle"))
			idle = (long)i;
	}
	fprintf(f, "## Targets (latency)\n\n");
	fprintf(f, "From the benchmark issue, each a ratio to the fastest "
		   "peer for that metric in this run: insert and cancel p50 "
		   "no worse than the fastest peer (ratio at most 1); poll "
		   "p99.9 and p99.99 at most 0.5 of the fastest peer's; exact "
		   "mode's poll p99.99 within 2x of the same configuration "
		   "in coarse mode; idle poll p50 flat across gaps from 1 ms "
		   "to 10^7 ms (largest/smallest trimmed mean at most 2). Instruction "
		   "targets are in callgrind.md. A subject that refused "
		   "inserts is marked: its numbers include cheap refusals.\n\n");
	for (int pass = 0; pass < 2; pass++) {
		long si = pass == 0 ? tr : il;
		const struct run_result *row;
		int bi, bc, bp;

		if (si < 0)
			continue;
		row = R(si, 0);
		bi = find_bucket(sc[si], OP_INSERT);
		bc = find_bucket(sc[si], OP_CANCEL);
		bp = find_bucket(sc[si], OP_POLL);
		fprintf(f, "### %s\n\n", sc[si]->title);
		fprintf(f, "| subject | refused | insert p50 | cancel p50 | "
			   "poll p99.9 | poll p99.99 | exact/coarse poll "
			   "p99.99 |%s\n",
			pass == 0 && idle >= 0 ? " idle flatness (trimmed mean) |" : "");
		fprintf(f, "|---|---:|---|---|---|---|---|%s\n",
			pass == 0 && idle >= 0 ? "---|" : "");
		for (size_t j = 0; j < nsub; j++) {
			const struct run_result *r = &row[j];
			double ri, rc, r999, r9999;
			const char *name = sub[j]->name;
			const char *colon = strrchr(name, ':');

			if (is_peer(sub[j]) || !r->ok)
				continue;
			ri = r->bucket[bi].pct[0] /
			     best_peer(row, nsub, sub, (unsigned)bi, 0);
			rc = r->bucket[bc].pct[0] /
			     best_peer(row, nsub, sub, (unsigned)bc, 0);
			r999 = r->bucket[bp].pct[3] /
			       best_peer(row, nsub, sub, (unsigned)bp, 3);
			r9999 = r->bucket[bp].pct[4] /
				best_peer(row, nsub, sub, (unsigned)bp, 4);
			fprintf(f, "| %s | %llu | %.2f %s | %.2f %s | %.2f %s | "
				   "%.2f %s |",
				name, (unsigned long long)r->refused, ri,
				mark(ri <= 1), rc, mark(rc <= 1), r999,
				mark(r999 <= 0.5), r9999, mark(r9999 <= 0.5));
			if (colon && !strcmp(colon, ":exact")) {
				char twin[96];
				long k;

				snprintf(twin, sizeof(twin), "%.*s:coarse",
					 (int)(colon - name), name);
				k = find_subject(sub, nsub, twin);
				if (k >= 0 && row[k].ok) {
					double x = r->bucket[bp].pct[4] /
						   row[k].bucket[bp].pct[4];

					fprintf(f, " %.2f %s |", x,
						mark(x <= 2));
				} else {
					fprintf(f, " - |");
				}
			} else {
				fprintf(f, " - |");
			}
			if (pass == 0 && idle >= 0) {
				const struct run_result *ir = R(idle, j);

				if (ir->ok) {
					double x = idle_flatness(sc[idle], ir,
								 M_TMEAN);

					fprintf(f, " %.2f %s |", x, mark(x <= 2));
				} else {
					fprintf(f, " - |");
				}
			}
			fprintf(f, "\n");
		}
		fprintf(f, "\n");
	}
}

static int write_md(const char *path, const struct report_meta *m,
		    struct scenario *const *sc, size_t nsc,
		    const struct subject *const *sub, size_t nsub,
		    const struct run_result *res)
{
	FILE *f = fopen(path, "w");
	long cols[32];
	size_t ncols = 0;

	if (!f)
		return -1;
	for (size_t h = 0; h < m->nheadline && ncols < 32; h++) {
		long j = find_subject(sub, nsub, m->headline[h]);

		if (j >= 0)
			cols[ncols++] = j;
	}
	md_header(f, m, sub, nsub);
	for (size_t i = 0; i < nsc; i++) {
		const struct scenario *s = sc[i];
		const struct run_result *row = R(i, 0);

		fprintf(f, "## %s (%s)\n\n%s\n\n", s->title, s->name,
			s->summary);
		fprintf(f, "Measured: ");
		for (unsigned b = 0; b < s->nbuckets; b++)
			fprintf(f, "%s%zu %s", b ? ", " : "",
				s->bucket_count[b], s->bucket[b].name);
		fprintf(f, ".\n\n");
		if (!strcmp(s->name, "interleaved")) {
			static const enum op_kind k[] = { OP_INSERT };
			static const unsigned mm[] = { 0, 1, 2, 3, 4, 5, 6 };

			fprintf(f, "### Interleaved insert latency "
				   "(design document format)\n\n");
			md_design_table(f, "Percentile", s, row, sub, nsub,
					cols, ncols, k, 1, mm, 7);
		} else if (!strcmp(s->name, "idle")) {
			md_idle(f, s, row, sub, nsub);
		} else {
			static const enum op_kind k[] = { OP_INSERT, OP_POLL,
							  OP_CANCEL };
			static const unsigned mm[] = { 0, 3, 4, M_MEAN };

			fprintf(f, "### %s (design document format)\n\n",
				s->title);
			md_design_table(f, "Operation", s, row, sub, nsub, cols,
					ncols, k, 3, mm, 4);
		}
		if (strcmp(s->name, "idle")) {
			fprintf(f, "### All subjects\n\n");
			for (unsigned b = 0; b < s->nbuckets; b++)
				md_full_table(f, s, b, row, sub, nsub);
		}
		if (s->events)
			md_trace(f, s, row, sub, nsub);
		md_behaviour(f, s, row, sub, nsub);
	}
	md_targets(f, sc, nsc, sub, nsub, res);
	return fclose(f);
}

/* ---- CSV and JSON ------------------------------------------------------- */

static int write_csv(const char *path, struct scenario *const *sc,
		     size_t nsc, const struct subject *const *sub,
		     size_t nsub, const struct run_result *res)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(f, "scenario,subject,family,peer,bucket,kind,gap_ms,n,p50_ns,"
		   "p90_ns,p99_ns,p99_9_ns,p99_99_ns,max_ns,mean_ns,tmean_ns,refused,"
		   "refused_timed,cancel_missed,fired,early,late_mean_ms,"
		   "late_max_ms,probed,overflowed,reslotted,overfilled,"
		   "footprint\n");
	for (size_t i = 0; i < nsc; i++) {
		for (size_t j = 0; j < nsub; j++) {
			const struct run_result *r = R(i, j);

			if (!r->ok)
				continue;
			for (unsigned b = 0; b < sc[i]->nbuckets; b++) {
				const struct summary *s = &r->bucket[b];
				static const char *const kn[] = { "insert",
								  "cancel",
								  "poll" };

				fprintf(f, "%s,%s,%s,%d,%s,%s,%llu,%zu",
					sc[i]->name, sub[j]->name,
					sub[j]->family, is_peer(sub[j]),
					sc[i]->bucket[b].name,
					kn[sc[i]->bucket[b].kind],
					(unsigned long long)sc[i]->bucket[b].gap_ms,
					s->n);
				for (unsigned m = 0; m < NMETRICS; m++)
					fprintf(f, ",%.2f", metric(s, m));
				fprintf(f, ",%llu,%llu,%llu,%llu,%llu,%.3f,%.3f,"
					   "%llu,%llu,%llu,%llu,%zu\n",
					(unsigned long long)r->refused,
					(unsigned long long)r->refused_measured,
					(unsigned long long)r->cancel_missed,
					(unsigned long long)r->fired,
					(unsigned long long)r->early,
					r->late_mean_ms, r->late_max_ms,
					(unsigned long long)r->ctr.probed,
					(unsigned long long)r->ctr.overflowed,
					(unsigned long long)r->ctr.reslotted,
					(unsigned long long)r->ctr.overfilled,
					r->ctr.footprint);
			}
		}
	}
	return fclose(f);
}

static void json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fprintf(f, "null");
	else
		fprintf(f, "%.2f", v);
}

static int write_json(const char *path, const struct report_meta *m,
		      struct scenario *const *sc, size_t nsc,
		      const struct subject *const *sub, size_t nsub,
		      const struct run_result *res)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fprintf(f, "{\n  \"mode\": \"%s\",\n  \"rounds\": %u,\n  \"warmup\": %zu,\n  "
		   "\"measured\": %zu,\n  \"seed\": %llu,\n  "
		   "\"ticks_per_ns\": %.4f,\n  \"empty_region_ns\": %.2f,\n  "
		   "\"counter_step_ns\": %.2f,\n  \"epoll_wait_ns\": %.1f,\n  \"short_wait\": %s,\n  "
		   "\"scenarios\": [\n",
		m->mode, m->rounds, m->params.warmup, m->params.measured,
		(unsigned long long)m->params.seed, m->timing->ticks_per_ns,
		m->timing->empty_ticks / m->timing->ticks_per_ns,
		m->timing->step_ticks / m->timing->ticks_per_ns, m->epoll_ns,
		m->short_wait ? "true" : "false");
	for (size_t i = 0; i < nsc; i++) {
		fprintf(f, "    {\"name\": \"%s\", \"ops\": %zu, \"timers\": %u, "
			   "\"results\": [\n",
			sc[i]->name, sc[i]->nops, sc[i]->nids);
		for (size_t j = 0, first = 1; j < nsub; j++) {
			const struct run_result *r = R(i, j);

			if (!r->ok)
				continue;
			fprintf(f, "%s      {\"subject\": \"%s\", \"family\": "
				   "\"%s\", \"peer\": %s, \"refused\": %llu, "
				   "\"cancel_missed\": %llu, \"fired\": %llu, "
				   "\"idsum\": %llu, \"pending_end\": %llu, "
				   "\"early\": %llu, \"late_mean_ms\": ",
				first ? "" : ",\n", sub[j]->name,
				sub[j]->family, is_peer(sub[j]) ? "true" : "false",
				(unsigned long long)r->refused,
				(unsigned long long)r->cancel_missed,
				(unsigned long long)r->fired,
				(unsigned long long)r->idsum,
				(unsigned long long)r->pending_end,
				(unsigned long long)r->early);
			json_num(f, r->late_mean_ms);
			fprintf(f, ", \"buckets\": [");
			first = 0;
			for (unsigned b = 0; b < sc[i]->nbuckets; b++) {
				const struct summary *s = &r->bucket[b];

				fprintf(f, "%s{\"name\": \"%s\", \"n\": %zu",
					b ? ", " : "", sc[i]->bucket[b].name,
					s->n);
				for (unsigned mm = 0; mm < NMETRICS; mm++) {
					fprintf(f, ", \"%s_ns\": ",
						mm == M_TMEAN ? "tmean" : metric_names[mm]);
					json_num(f, metric(s, mm));
				}
				fprintf(f, "}");
			}
			fprintf(f, "]}");
		}
		fprintf(f, "\n    ]}%s\n", i + 1 < nsc ? "," : "");
	}
	fprintf(f, "  ]\n}\n");
	return fclose(f);
}

int report_write(const char *dir, const struct report_meta *m,
		 struct scenario *const *sc, size_t nsc,
		 const struct subject *const *sub, size_t nsub,
		 const struct run_result *res)
{
	char path[4096];
	int err = 0;

	if (!dir)
		return write_md("/dev/stdout", m, sc, nsc, sub, nsub, res);
	snprintf(path, sizeof(path), "%s/wheel.md", dir);
	err |= write_md(path, m, sc, nsc, sub, nsub, res);
	snprintf(path, sizeof(path), "%s/wheel.csv", dir);
	err |= write_csv(path, sc, nsc, sub, nsub, res);
	snprintf(path, sizeof(path), "%s/wheel.json", dir);
	err |= write_json(path, m, sc, nsc, sub, nsub, res);
	return err;
}
