/*
 * bench.h - the pieces of bwbench, the wheel benchmark, and how they meet.
 *
 *   scenario.c   turns a scenario name and a seed into one operation stream
 *                (insert id at deadline, cancel id, poll at now), the same
 *                for every subject
 *   runner.c     replays a stream against one subject, timing each
 *                measured operation alone
 *   timing.c     the cycle counter, its calibration and the empty-region cost
 *   simclock.c   the simulated clock the event-loop peers read, and the
 *                short-circuit of their zero-timeout backend wait
 *   stats.c      sorted samples to percentiles
 *   report.c     Markdown, CSV and JSON
 *   subjects.c   the list of subjects: our wheels and the peers
 *   subject_*.c  one subject each, behind struct subject
 *   objpool.c    the free list the peers keep their timer objects in
 *
 * Times are uint64_t nanoseconds of simulated monotonic time throughout.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull

#if defined(__clang__)
#define BENCH_NOINLINE __attribute__((noinline))
#else
#define BENCH_NOINLINE __attribute__((noinline, noclone))
#endif

#define container_of(p, type, member) \
	((type *)(void *)((char *)(p) - offsetof(type, member)))

/* ---- operation streams (scenario.c) ------------------------------------ */

enum op_kind { OP_INSERT, OP_CANCEL, OP_POLL, OP_NKINDS };

#define BUCKET_NONE 0xff       /* an operation that is run but not timed */
#define MAX_BUCKETS 16

struct op {
	uint64_t t;            /* insert: deadline; poll: now; cancel: 0    */
	uint32_t id;           /* insert, cancel: the timer's id            */
	uint8_t kind;          /* enum op_kind                              */
	uint8_t bucket;        /* sample bucket, or BUCKET_NONE             */
	uint16_t unused;
};

struct bucket_def {
	const char *name;      /* "insert", "poll gap 10^3 ms", ...         */
	enum op_kind kind;
	uint64_t gap_ms;       /* idle scenario: the gap; else 0            */
};

struct scenario {
	const char *name;      /* interleaved, trading, idle, burst         */
	const char *title;
	const char *summary;   /* one paragraph for the report              */
	struct op *ops;
	size_t nops;
	size_t nwarm;          /* ops[0 .. nwarm) run before measuring      */
	uint64_t *deadline;    /* per id                                    */
	uint32_t nids;
	uint32_t max_live;     /* most timers the stream keeps pending      */
	uint64_t start_ns;
	unsigned nbuckets;
	struct bucket_def bucket[MAX_BUCKETS];
	size_t bucket_count[MAX_BUCKETS];
	size_t kind_count[OP_NKINDS];   /* all ops of the measured phase    */
	/* the trace scenario's (trace.c); 0 for the others */
	uint64_t tick_ns;      /* its polls' period                         */
	uint64_t events;       /* kernel trace events the stream stands for */
	char summary_buf[320];
};

struct scenario_params {
	size_t warmup;         /* timed-kind operations before measuring    */
	size_t measured;       /* timed operations                          */
	uint64_t seed;
};

extern const char *const scenario_names[];
int scenario_build(const char *name, const struct scenario_params *p,
		   struct scenario *out);
void scenario_free(struct scenario *s);
/* Room for need elements of elem bytes at *p, doubling *cap: false when
 * out of memory (*p is kept). */
bool scenario_grow(void **p, size_t *cap, size_t need, size_t elem);

/* ---- the trace scenario (trace.c) -------------------------------------- */

/* Read a bwstream file (bench/trace-convert.py) into a scenario: 0, or -1
 * with the file, line and reason on standard error. */
int trace_load(const char *path, struct scenario *out);

/* What a subject that fires every timer at the first poll at or after its
 * deadline rounded up to tick ns (strict: the first poll after it) must
 * have done over the whole stream. */
struct trace_expect {
	uint64_t fired, idsum, late_sum;
	uint32_t max_live;     /* most timers pending at once               */
};
int trace_expect(const struct scenario *sc, uint64_t tick, bool strict,
		 struct trace_expect *out);

/* ---- subjects (subject_*.c, subjects.c) -------------------------------- */

/*
 * Where fire callbacks report.  Every subject's callback does the same
 * work: count, sum the ids (so nothing is optimised away), check the timer
 * was not early and add up its lateness.
 */
struct fire_sink {
	uint64_t now;          /* the poll in progress                      */
	const uint64_t *deadline;
	uint64_t fired, idsum, early;
	uint64_t late_sum, late_max;
};

static inline void bench_fired(struct fire_sink *s, uint32_t id)
{
	uint64_t d = s->deadline[id];

	s->fired++;
	s->idsum += id;
	if (d > s->now) {
		s->early++;
	} else {
		s->late_sum += s->now - d;
		if (s->now - d > s->late_max)
			s->late_max = s->now - d;
	}
}

struct subject_env {
	uint64_t *ref;         /* one word per timer id, for the subject    */
	struct fire_sink *sink;
	uint32_t nids;
	uint32_t max_live;     /* sizing hint                               */
	uint64_t start_ns;     /* the clock at creation                     */
};

/* What a subject can tell about itself after a run (wheels only). */
struct subject_counters {
	bool valid;
	uint64_t probed, overflowed, reslotted, overfilled;
	size_t footprint;
};

struct subject {
	const char *name;      /* e.g. "plain:precise64:exact", "libev"     */
	const char *family;    /* "bitwheel", "libev", ...                  */
	const char *structure; /* "hierarchical wheel", "4-heap", ...       */
	const char *lib_fn[OP_NKINDS]; /* library entry points (callgrind)  */
	const char *(*version)(void);  /* the library's, at run time; or NULL */
	const void *param;
	/* When it fires (the trace scenario checks it): at the first poll at
	 * or after the deadline rounded up to tick_ns (0: the deadline
	 * itself, as every peer); strict: at the first poll after the
	 * deadline (libev: a timer due exactly at a poll waits for the next);
	 * inexact: no such promise (a wheel in BW_COARSE, the null subject).
	 * A wheel may fire a timer it had to probe up to probe_ticks ticks
	 * later, and may refuse (plain) when its slots are full. */
	uint64_t tick_ns;
	unsigned probe_ticks;
	bool strict, inexact;
	int (*open)(const struct subject *s, const struct subject_env *env,
		    void **ctx);
	void (*close)(void *ctx);
	/* 0, or a negative code for a refused insert / unknown id */
	int (*insert)(void *ctx, uint32_t id, uint64_t deadline_ns);
	int (*cancel)(void *ctx, uint32_t id);
	int (*poll)(void *ctx, uint64_t now_ns);
	void (*counters)(void *ctx, struct subject_counters *out);
};

/* A peer configure did not find: listed, with what to install. */
struct missing_subject {
	const char *name;
	const char *hint;
};

/* subjects.c: every subject built in, and the peers that are not. */
const struct subject *const *subjects_all(size_t *n);
const struct missing_subject *subjects_missing(size_t *n);
const struct subject *subject_find(const char *name);

/*
 * subject_bitwheel.c: three templates, copied by subjects.c with a name and
 * a struct bw_subject_param for each configuration.
 */
enum bw_subject_kind {
	BWS_PLAIN, BWS_FAILOVER, BWS_DUAL,
	BWS_INTR, BWS_INTR_FAILOVER, /* intrusive timers (subject_bw_timer) */
};

struct bw_subject_param {
	enum bw_subject_kind kind;
	int preset;            /* enum bw_preset, or bw_dual_preset for dual */
	unsigned slot_cap;     /* 0: the preset's (oneshot lane for dual)    */
	int precision;         /* enum bw_precision, both lanes for dual     */
};

extern const struct subject subject_bw_wheel, subject_bw_dual,
	subject_bw_timer;

/* The peers, each in its own file; and a subject that does nothing, for
 * the harness's own cost under callgrind. */
extern const struct subject subject_rbtree, subject_libev, subject_libuv,
	subject_libevent, subject_null;

/* ---- simulated clock (simclock.c) -------------------------------------- */

/* What the event-loop peers read through clock_gettime/gettimeofday. */
void simclock_set(uint64_t ns);
uint64_t simclock_now(void);
/* Short-circuit zero-timeout epoll waits (default true). */
void simclock_short_wait(bool on);
struct simclock_stats {
	uint64_t clock_reads, waits_skipped, waits_passed;
};
void simclock_stats(struct simclock_stats *out);
/* The real CLOCK_MONOTONIC, by system call, in ns. */
uint64_t real_now_ns(void);
/* Cost of one epoll_wait(ep, ..., 0) system call on an empty epoll set,
 * median ns over n calls (for the report). */
double simclock_epoll_cost_ns(unsigned n, double ticks_per_ns);

/* ---- timing (timing.c) ------------------------------------------------- */

static inline uint64_t tsc_begin(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned lo, hi;

	__asm__ volatile("lfence\n\trdtsc\n\tlfence"
			 : "=a"(lo), "=d"(hi)::"memory");
	return (uint64_t)hi << 32 | lo;
#elif defined(__aarch64__)
	uint64_t v;

	__asm__ volatile("isb\n\tmrs %0, cntvct_el0\n\tisb" : "=r"(v)::"memory");
	return v;
#else
	return real_now_ns();
#endif
}

static inline uint64_t tsc_end(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned lo, hi, aux;

	__asm__ volatile("rdtscp\n\tlfence"
			 : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
	return (uint64_t)hi << 32 | lo;
#else
	return tsc_begin();
#endif
}

struct timing {
	double ticks_per_ns;   /* calibrated counter rate                   */
	double empty_ticks;    /* median of an empty timed region           */
	double empty_min_ticks;
	double step_ticks;     /* smallest increment the counter shows      */
	const char *source;    /* "rdtsc (lfence; rdtsc; lfence / rdtscp; lfence)" */
};

void timing_calibrate(struct timing *t, unsigned ms);
void timing_empty_region(struct timing *t, unsigned n);

/* ---- samples and statistics (stats.c) ---------------------------------- */

#define NPCT 5
extern const double pct_levels[NPCT];  /* 50, 90, 99, 99.9, 99.99 */
extern const char *const pct_names[NPCT];

struct summary {
	size_t n;
	double pct[NPCT];      /* ns                                         */
	double max, mean;      /* ns                                         */
	double tmean;          /* ns: mean of the lowest 99.9% (no outliers) */
};

/* Sorts samples (ticks, empty cost already subtracted) in place. */
void stats_summarize(uint32_t *samples, size_t n, double ticks_per_ns,
		     struct summary *out);

#define STATS_MAX_ROUNDS 15
/* Each metric the median of n rounds' (n <= STATS_MAX_ROUNDS). */
void stats_median_of(const struct summary *in, unsigned n,
		     struct summary *out);

/* ---- one subject on one scenario (runner.c) ---------------------------- */

struct run_result {
	const struct subject *subject;
	const struct scenario *scenario;
	bool ok;               /* opened and ran                            */
	char error[96];
	struct summary bucket[MAX_BUCKETS];
	uint64_t refused, refused_measured, cancel_missed;
	uint64_t fired, idsum, early, pending_end;
	uint64_t late_sum_ns;
	bool check_failed;     /* trace: trace_check's verdict and why      */
	char check[200];
	double late_mean_ms, late_max_ms;
	struct subject_counters ctr;
	double seconds;        /* wall time of the whole run                */
};

struct run_options {
	bool timed;            /* false: count-only, for callgrind          */
	const struct timing *timing;
};

void run_subject(const struct subject *s, const struct scenario *sc,
		 const struct run_options *o, struct run_result *r);

/* trace.c: whether a run of the trace scenario kept the subject's promise
 * (struct subject's tick_ns): 0 or -1, and why in why[n] either way. */
int trace_check(const struct scenario *sc, const struct subject *s,
		const struct run_result *r, char *why, size_t n);

/* The timed calls: one per operation, never inlined (callgrind names them). */
int bench_op_insert(const struct subject *s, void *ctx, uint32_t id,
		    uint64_t deadline);
int bench_op_cancel(const struct subject *s, void *ctx, uint32_t id);
int bench_op_poll(const struct subject *s, void *ctx, uint64_t now);
int bench_op_poll_gap0(const struct subject *s, void *ctx, uint64_t now);
int bench_op_poll_gap1(const struct subject *s, void *ctx, uint64_t now);
int bench_op_poll_gap2(const struct subject *s, void *ctx, uint64_t now);
int bench_op_poll_gap3(const struct subject *s, void *ctx, uint64_t now);
int bench_op_poll_gap4(const struct subject *s, void *ctx, uint64_t now);
int bench_op_poll_gap5(const struct subject *s, void *ctx, uint64_t now);
int bench_op_poll_gap6(const struct subject *s, void *ctx, uint64_t now);
int bench_op_poll_gap7(const struct subject *s, void *ctx, uint64_t now);

struct phase_counts {
	uint64_t refused;      /* inserts refused                           */
	uint64_t refused_timed;/* of those, timed ones                      */
	uint64_t missed;       /* cancels that found nothing                */
};

/* The measured-phase entry point callgrind's --toggle-collect names. */
void bench_measured_phase(const struct subject *s, void *ctx,
			  const struct scenario *sc, struct fire_sink *sink,
			  uint32_t **samples, bool timed,
			  struct phase_counts *c);

/* ---- output (report.c) ------------------------------------------------- */

struct report_meta {
	const char *mode;      /* "full", "quick" or "custom"               */
	struct scenario_params params;
	unsigned rounds;
	const struct timing *timing;
	double epoll_ns;
	bool short_wait;
	double seconds;
	const char *const *headline;   /* subjects for the design-doc tables */
	size_t nheadline;
};

/* results[scenario][subject], row-major, nsc * nsub; dir NULL: only the
 * Markdown, to standard output */
int report_write(const char *dir, const struct report_meta *m,
		 struct scenario *const *sc, size_t nsc,
		 const struct subject *const *sub, size_t nsub,
		 const struct run_result *results);

/* ---- peers' object free list (objpool.c) ------------------------------- */

/*
 * Fixed-size objects in chunks, threaded through their first word while
 * free.  init runs once per object when its chunk is made (the place for
 * ev_init, uv_timer_init, event_assign), never per insert.
 */
struct objpool_chunk {
	void *mem;
	size_t n;
};

struct objpool {
	void *free;
	size_t size;
	void (*init)(void *obj, void *arg);
	void *arg;
	struct objpool_chunk *chunk;
	size_t nchunks, cap;
	size_t per_chunk;
};

int objpool_init(struct objpool *p, size_t size, size_t prealloc,
		 void (*init)(void *obj, void *arg), void *arg);
int objpool_grow(struct objpool *p);
/* Call fn on every object ever made (for teardown). */
void objpool_each(struct objpool *p, void (*fn)(void *obj, void *arg),
		  void *arg);
void objpool_fini(struct objpool *p);

static inline void *objpool_get(struct objpool *p)
{
	void *o = p->free;

	if (!o) {
		if (objpool_grow(p))
			return NULL;
		o = p->free;
	}
	p->free = *(void **)o;
	return o;
}

static inline void objpool_put(struct objpool *p, void *o)
{
	*(void **)o = p->free;
	p->free = o;
}

#endif /* BENCH_H */
