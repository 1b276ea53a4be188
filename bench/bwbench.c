/*
 * bwbench.c - the wheel benchmark's command line.
 *
 *   bwbench [--quick] [--scenario LIST] [--subject LIST] [--out DIR] ...
 *
 * Builds each scenario's operation stream once, replays it against every
 * selected subject in turn, and writes wheel.md, wheel.csv and wheel.json
 * into --out (or the Markdown to standard output).  --count-only runs the
 * same streams untimed and prints how many operations of each kind the
 * measured phase holds: callgrind.sh divides instruction counts by them.
 * bench/README.md describes the scenarios, the subjects and the method.
 */
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define FULL_WARMUP 100000
#define FULL_MEASURED 1000000
#define QUICK_WARMUP 10000
#define QUICK_MEASURED 100000

static const char *const default_headline[] = {
	"plain:precise64:exact", "plain:precise64:coarse",
	"failover:precise64:exact", "dual:fast-precise:exact",
	"rbtree", "libev", "libuv", "libevent",
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bwbench [options]\n"
		"  --quick            %d warm-up + %d measured ops (CI size)\n"
		"  --warmup N         warm-up operations (default %d)\n"
		"  --ops N            measured operations (default %d)\n"
		"  --seed N           random seed (default 1)\n"
		"  --rounds N         run every subject N times, interleaved; "
		"report the median\n"
		"                     of each metric (default 3, --quick 1)\n"
		"  --scenario LIST    comma-separated: interleaved,trading,idle,"
		"burst,trace\n"
		"                     (default all; trace only with --trace)\n"
		"  --trace FILE       the trace scenario's stream "
		"(bench/trace-convert.py)\n"
		"  --subject LIST     comma-separated names or globs "
		"(e.g. 'plain:*,libev'); default all\n"
		"  --headline LIST    subjects of the design-document tables\n"
		"  --out DIR          write wheel.md, wheel.csv, wheel.json there\n"
		"  --real-wait        let the event loops' epoll_wait(..., 0) "
		"enter the kernel\n"
		"  --count-only       untimed; print op counts (callgrind.sh)\n"
		"  --list             list subjects and scenarios\n",
		QUICK_WARMUP, QUICK_MEASURED, FULL_WARMUP, FULL_MEASURED);
}

static bool in_list(const char *list, const char *name)
{
	char *copy, *tok, *save = NULL;
	bool hit = false;

	if (!list)
		return true;
	copy = strdup(list);
	for (tok = strtok_r(copy, ",", &save); tok && !hit;
	     tok = strtok_r(NULL, ",", &save))
		hit = fnmatch(tok, name, 0) == 0;
	free(copy);
	return hit;
}

static void list_subjects(void)
{
	size_t n, nm;
	const struct subject *const *s = subjects_all(&n);
	const struct missing_subject *m = subjects_missing(&nm);

	for (size_t i = 0; i < n; i++)
		printf("%-28s %-14s %s; calls %s/%s/%s\n", s[i]->name,
		       s[i]->family, s[i]->structure, s[i]->lib_fn[0],
		       s[i]->lib_fn[1], s[i]->lib_fn[2]);
	printf("%-28s %-14s %s\n", subject_null.name, subject_null.family,
	       subject_null.structure);
	for (size_t i = 0; i < nm; i++)
		printf("%-28s %s\n", m[i].name, m[i].hint);
	printf("scenarios:");
	for (size_t i = 0; scenario_names[i]; i++)
		printf(" %s", scenario_names[i]);
	printf(" trace (--trace FILE)\n");
}

/*
 * The trace scenario: every round of subject j must have kept its promise
 * (trace_check); the verdict goes into the report's row r.  1 on failure.
 */
static int check_trace(const struct scenario *s, const struct subject *sub,
		       const struct run_result *round_res, unsigned rounds,
		       size_t nsel, size_t j, struct run_result *r)
{
	for (unsigned k = 0; k < rounds; k++) {
		const struct run_result *o = &round_res[k * nsel + j];

		r->check_failed = trace_check(s, sub, o, r->check,
					      sizeof(r->check)) != 0;
		if (r->check_failed) {
			fprintf(stderr, "bwbench: trace: %s round %u: "
					"DISAGREES: %s\n",
				sub->name, k + 1, r->check);
			return 1;
		}
	}
	fprintf(stderr, "bwbench: trace: %s: %s\n", sub->name, r->check);
	return 0;
}

static size_t split(char *list, const char **out, size_t max)
{
	size_t n = 0;
	char *save = NULL;

	for (char *t = strtok_r(list, ",", &save); t && n < max;
	     t = strtok_r(NULL, ",", &save))
		out[n++] = t;
	return n;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "ops", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "rounds", required_argument, NULL, 'R' },
		{ "scenario", required_argument, NULL, 'S' },
		{ "subject", required_argument, NULL, 'j' },
		{ "headline", required_argument, NULL, 'H' },
		{ "out", required_argument, NULL, 'o' },
		{ "real-wait", no_argument, NULL, 'r' },
		{ "count-only", no_argument, NULL, 'c' },
		{ "list", no_argument, NULL, 'l' },
		{ "trace", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct scenario_params p = { FULL_WARMUP, FULL_MEASURED, 1 };
	const char *scen_list = NULL, *subj_list = NULL, *out = NULL;
	const char *trace_path = NULL;
	size_t nnames = 0;
	int status = 0, disagree = 0;
	const char *mode = "full", *headline[32];
	char *headline_arg = NULL;
	size_t nheadline = 0;
	bool count_only = false, real_wait = false, custom = false;
	struct timing timing = { 0 };
	const struct subject *sel[64];
	struct scenario *sc[8];
	struct run_result *res;
	size_t nall, nsel = 0, nsc = 0;
	unsigned rounds = 3;
	bool rounds_set = false;
	struct run_result *round_res;
	const struct subject *const *all = subjects_all(&nall);
	uint64_t t0 = real_now_ns();
	int c;

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 'q':
			p.warmup = QUICK_WARMUP;
			p.measured = QUICK_MEASURED;
			mode = "quick";
			break;
		case 'w':
			p.warmup = strtoull(optarg, NULL, 0);
			custom = true;
			break;
		case 'n':
			p.measured = strtoull(optarg, NULL, 0);
			custom = true;
			break;
		case 's':
			p.seed = strtoull(optarg, NULL, 0);
			break;
		case 'R':
			rounds = (unsigned)strtoul(optarg, NULL, 0);
			rounds_set = true;
			break;
		case 'S': scen_list = optarg; break;
		case 'j': subj_list = optarg; break;
		case 'H': headline_arg = optarg; break;
		case 'o': out = optarg; break;
		case 't': trace_path = optarg; break;
		case 'r': real_wait = true; break;
		case 'c': count_only = true; break;
		case 'l': list_subjects(); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (custom)
		mode = "custom";
	if (!rounds_set && (count_only || !strcmp(mode, "quick")))
		rounds = 1;
	if (rounds < 1 || rounds > STATS_MAX_ROUNDS) {
		fprintf(stderr, "bwbench: --rounds must be 1..%d\n",
			STATS_MAX_ROUNDS);
		return 2;
	}
	if (out && mkdir(out, 0777) && errno != EEXIST) {
		fprintf(stderr, "bwbench: cannot create %s\n", out);
		return 1;
	}
	if (p.measured == 0) {
		fprintf(stderr, "bwbench: --ops must be positive\n");
		return 2;
	}
	simclock_short_wait(!real_wait);
	if (headline_arg) {
		nheadline = split(headline_arg, headline, 32);
	} else {
		nheadline = sizeof(default_headline) / sizeof(*default_headline);
		memcpy(headline, default_headline, sizeof(default_headline));
	}

	if (subj_list && in_list(subj_list, subject_null.name))
		sel[nsel++] = &subject_null;
	for (size_t i = 0; i < nall && nsel < 64; i++)
		if (in_list(subj_list, all[i]->name))
			sel[nsel++] = all[i];
	if (!nsel) {
		fprintf(stderr, "bwbench: no subject matches '%s' "
				"(--list shows them)\n", subj_list);
		return 2;
	}
	{
		size_t nm;
		const struct missing_subject *m = subjects_missing(&nm);

		for (size_t i = 0; i < nm; i++)
			if (in_list(subj_list, m[i].name))
				fprintf(stderr, "bwbench: %s %s\n", m[i].name,
					m[i].hint);
	}

	if (!count_only) {
		timing_calibrate(&timing, strcmp(mode, "full") ? 50 : 200);
		timing_empty_region(&timing, 200000);
	}
	res = calloc(8 * nsel, sizeof(*res));
	round_res = calloc((size_t)rounds * nsel, sizeof(*round_res));
	if (!res || !round_res)
		return 1;
	while (scenario_names[nnames])
		nnames++;
	if (scen_list && in_list(scen_list, "trace") && !trace_path) {
		fprintf(stderr, "bwbench: the trace scenario needs --trace\n");
		status = 2;
		goto out;
	}
	/* the generated scenarios, then the trace (scenario_names[nnames]
	 * is NULL) */
	for (size_t i = 0; i <= nnames; i++) {
		struct run_options ro = { !count_only, &timing };
		const char *name = i < nnames ? scenario_names[i] : "trace";
		struct scenario *s;

		if (!in_list(scen_list, name) || (i == nnames && !trace_path))
			continue;
		s = calloc(1, sizeof(*s));
		if (!s || (i < nnames ? scenario_build(name, &p, s)
				      : trace_load(trace_path, s))) {
			fprintf(stderr, "bwbench: cannot build %s\n", name);
			free(s);
			status = 1;
			goto out;
		}
		sc[nsc] = s;
		/* rounds go round-robin over the subjects, so that a noisy
		 * stretch of the machine's time hits different subjects in
		 * different rounds; each metric is then the rounds' median */
		for (unsigned k = 0; k < rounds; k++) {
			for (size_t j = 0; j < nsel; j++) {
				struct run_result *r = &round_res[k * nsel + j];

				run_subject(sel[j], s, &ro, r);
				fprintf(stderr, "%-12s %-28s round %u %6.2f s%s%s\n",
					s->name, sel[j]->name, k + 1,
					r->seconds, r->ok ? "" : "  FAILED: ",
					r->ok ? "" : r->error);
			}
		}
		for (size_t j = 0; j < nsel; j++) {
			struct run_result *r = &res[nsc * nsel + j];
			struct summary in[STATS_MAX_ROUNDS];

			*r = round_res[j];
			for (unsigned k = 1; k < rounds; k++) {
				const struct run_result *o = &round_res[k * nsel + j];

				r->ok = r->ok && o->ok;
				r->seconds += o->seconds;
			}
			for (unsigned b = 0; b < s->nbuckets && r->ok; b++) {
				for (unsigned k = 0; k < rounds; k++)
					in[k] = round_res[k * nsel + j].bucket[b];
				stats_median_of(in, rounds, &r->bucket[b]);
			}
			if (r->ok && r->early)
				fprintf(stderr, "bwbench: %s fired %llu timers "
						"early in %s\n",
					sel[j]->name,
					(unsigned long long)r->early, s->name);
			if (s->events)
				disagree |= check_trace(s, sel[j], round_res,
							rounds, nsel, j, r);
			if (count_only) {
				printf("counts scenario=%s subject=%s "
				       "insert=%zu cancel=%zu poll=%zu "
				       "refused=%llu fired=%llu",
				       s->name, sel[j]->name,
				       s->kind_count[OP_INSERT],
				       s->kind_count[OP_CANCEL],
				       s->kind_count[OP_POLL],
				       (unsigned long long)r->refused,
				       (unsigned long long)r->fired);
				if (s->events)
					printf(" events=%llu idsum=%llu "
					       "late_sum_ns=%llu",
					       (unsigned long long)s->events,
					       (unsigned long long)r->idsum,
					       (unsigned long long)r->late_sum_ns);
				for (unsigned b = 0; b < s->nbuckets; b++)
					if (s->bucket[b].gap_ms)
						printf(" gap%u=%zu", b,
						       s->bucket_count[b]);
				printf("\n");
			}
		}
		/* the stream is not needed for the report */
		scenario_free(s);
		nsc++;
	}
	if (!nsc) {
		fprintf(stderr, "bwbench: no scenario matches '%s'\n",
			scen_list);
		status = 2;
		goto out;
	}
	if (!count_only) {
		struct simclock_stats st;
		struct report_meta m = {
			.mode = mode, .params = p, .rounds = rounds,
			.timing = &timing,
			.short_wait = !real_wait,
			.headline = headline, .nheadline = nheadline,
		};

		m.epoll_ns = simclock_epoll_cost_ns(20000, timing.ticks_per_ns) -
			     timing.empty_ticks / timing.ticks_per_ns;
		m.seconds = (double)(real_now_ns() - t0) / NS_PER_S;
		simclock_stats(&st);
		fprintf(stderr, "simulated clock: %llu reads; waits: %llu "
				"short-circuited, %llu passed\n",
			(unsigned long long)st.clock_reads,
			(unsigned long long)st.waits_skipped,
			(unsigned long long)st.waits_passed);
		if (report_write(out, &m, sc, nsc, sel,
				 nsel, res)) {
			fprintf(stderr, "bwbench: cannot write the report\n");
			status = 1;
			goto out;
		}
	}
	if (disagree) {
		fprintf(stderr, "bwbench: the trace replay FAILED: a subject "
				"did not fire as it promises (above)\n");
		status = 1;
	}
out:
	for (size_t i = 0; i < nsc; i++)
		free(sc[i]);
	free(res);
	free(round_res);
	return status;
}
