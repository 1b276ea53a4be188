/*
 * bwload.h - shared declarations of bwload, the service benchmark: a load
 * generator that drives bitwheeld (through libbitwheel-client), a raw
 * Unix-socket echo server (the physical floor) and, when built with
 * hiredis, redis-server as a sorted-set delay queue and as key expiry
 * notifications, all with the same clients, depth, mix and timers.
 *
 * Layout: bwload.c (options, phases, report), load_stats.c (histograms,
 * /proc readings, clock), load_echo.c (echo server and client),
 * load_bitwheel.c (the bitwheeld client), load_redis.c (the two redis
 * subjects; only with hiredis).
 *
 * Every worker is a forked process that writes its results into a slot of
 * a MAP_SHARED region; the parent merges the slots after waiting for them.
 */
#ifndef BWLOAD_H
#define BWLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Log-linear histogram of nanosecond values: 64 sub-buckets per power of
 * two (about 1.6 % resolution) up to 2^63. */
#define LOAD_HIST_SUB_BITS 6
#define LOAD_HIST_SUB (1u << LOAD_HIST_SUB_BITS)
#define LOAD_HIST_BUCKETS ((64 - LOAD_HIST_SUB_BITS + 1) * LOAD_HIST_SUB)

struct load_hist {
	uint64_t count;
	uint64_t max;
	uint32_t n[LOAD_HIST_BUCKETS];
};

void load_hist_add(struct load_hist *h, uint64_t v);
void load_hist_merge(struct load_hist *into, const struct load_hist *from);
/* The value at quantile q (0..1): the bucket's upper bound, 0 if empty. */
uint64_t load_hist_quantile(const struct load_hist *h, double q);

/* The requests the fail phase times apart (bitwheel). */
enum { LOAD_K_SCHEDULE, LOAD_K_CANCEL, LOAD_K_TOUCH, LOAD_K_RELEASE, LOAD_KINDS };

/* What one worker (or a subject's fire consumer) measured. */
struct load_slot {
	struct load_hist rtt;   /* per request: reply time - send time */
	struct load_hist late;  /* per fire: receive time - deadline    */
	struct load_hist srv;   /* per fire, bitwheel only: the daemon's
				   Fired.fired_at_ns - deadline         */
	uint64_t sent;          /* requests sent                        */
	uint64_t replies;       /* replies received                     */
	uint64_t errors;        /* error replies and failures           */
	uint64_t scheduled;     /* schedules that were accepted         */
	uint64_t cancel_hit;    /* cancels that removed a pending timer */
	uint64_t fires;         /* fires received                       */
	uint64_t early;         /* fires received before their deadline */
	uint64_t t_start;       /* first send, CLOCK_MONOTONIC ns       */
	uint64_t t_last;        /* last reply                           */
	/* Protocol 2 (bitwheel): */
	uint64_t refused;       /* Schedules refused TOO_MANY_TIMERS: the
				   session's backpressure (not an error) */
	uint64_t acks;          /* Acks sent (cumulative, one per batch) */
	uint64_t redelivered;   /* fires marked redelivered             */
	uint64_t win_fires;     /* delivery phases: fires received in
				   the steady window [win_lo, win_hi]   */
	uint64_t t_first_fire, t_last_fire;
	uint64_t cpu_ns;        /* the worker's own utime + stime       */
	/* The fail phase: per request kind (LOAD_K_*), reply time - send
	 * time at any depth, and the replies. */
	struct load_hist kind_rtt[LOAD_KINDS];
	uint64_t kind_replies[LOAD_KINDS];
	char error[160];        /* the first failure, for the report    */
};

/* One phase of the run, handed to every worker. */
struct load_phase {
	const char *name;       /* "rtt", "pipelined", "deep", "sustained" */
	int clients;
	int depth;              /* requests in flight per client           */
	uint64_t rate;          /* total requests/s to pace at; 0: flat out */
	uint64_t duration_ns;   /* how long clients send                    */
	uint64_t max_requests;  /* per client, a bound besides the time     */
	uint64_t start_ns;      /* when every client starts sending         */
	int cancel_pct;         /* share of cancels of a recent key         */
	uint64_t min_delay_ns, max_delay_ns;
	uint64_t drain_ns;      /* how long to wait for fires after sending */
	const char *session;    /* bitwheel: NULL for an anonymous session
				   per client; else a named session per
				   client, "<session>-<phase>-<id>-<pid>",
				   or with producers > 0 the one session
				   every worker attaches to, whole        */
	int ack;                /* bitwheel consumers: LOAD_ACK_*          */
	uint32_t window;        /* bitwheel consumers: 0 the daemon's (256) */
	int producers;          /* 0: every worker has a session of its own
				   and consumes its fires; > 0 (delivery
				   phases): workers 0..producers-1 only
				   schedule into `session`, the others only
				   consume and acknowledge its fires until
				   *stop                                   */
	uint64_t win_lo, win_hi; /* delivery: the steady window (fires/s)  */
	bool fail;              /* bitwheel, the fail phase: a named session
				   per client whose consumer touches and
				   releases (delay 0) each fire on its
				   first hand-out and acknowledges it on
				   its second; cancel_pct of its Schedules
				   are of timers due in an hour, cancelled
				   once accepted                          */
};

/* How a bitwheel consumer's fires become done (Hello.auto_ack). */
enum {
	LOAD_ACK_DEFAULT = 0,   /* the daemon's: auto for an anonymous
				   session, manual for a named one         */
	LOAD_ACK_AUTO = 1,      /* done once written to the socket         */
	LOAD_ACK_MANUAL = 2,    /* bwc_send_ack(cumulative) once per batch
				   of fires handled in a dispatch          */
};

/* The subjects' workers: fill slot, return 0 or -1 (slot->error says).
 * stop: the parent's flag that ends a delivery phase's consumers. */
int load_bitwheel_worker(const char *socket, const struct load_phase *p,
			 int id, volatile int *stop, struct load_slot *slot);
int load_echo_worker(const char *socket, const struct load_phase *p, int id,
		     struct load_slot *slot);
/* The echo server: serves path until SIGTERM; never returns. */
void load_echo_serve(int listen_fd) __attribute__((noreturn));
int load_echo_listen(const char *path);
/* Bytes of one echo message, the size of a framed Schedule request. */
#define LOAD_ECHO_MSG 24

#ifdef BENCH_HAVE_HIREDIS
/* kind 'z': sorted set; 'x': key expiry. */
int load_redis_worker(const char *socket, char kind,
		      const struct load_phase *p, int id,
		      struct load_slot *slot);
/* The fire side: pops due members (z) or listens for expired events (x)
 * until *stop is set or the time bound passes. */
int load_redis_consumer(const char *socket, char kind,
			const struct load_phase *p, volatile int *stop,
			struct load_slot *slot);
/* Flush the phase's keys and set notify-keyspace-events: 0 or -1. */
int load_redis_prepare(const char *socket, char kind,
		       const struct load_phase *p, char *err, size_t errlen);
#endif

/* CLOCK_MONOTONIC in ns. */
uint64_t load_now_ns(void);
void load_sleep_until(uint64_t t_ns);
/* xorshift64*; *s must not be 0. */
uint64_t load_rand(uint64_t *s);
/* utime + stime of pid in ns (-1 unknown); VmRSS in bytes (0 unknown). */
int64_t load_proc_cpu_ns(long pid);
/* The time pid's main thread ran on a CPU, in ns (/proc/PID/schedstat):
 * precise where utime+stime count 10 ms ticks; a single-threaded
 * server's whole CPU time.  -1 unknown. */
int64_t load_proc_run_ns(long pid);
uint64_t load_proc_rss(long pid);

/* The delay of the next timer: uniform in [min, max]. */
static inline uint64_t load_delay(const struct load_phase *p, uint64_t *rs)
{
	uint64_t span = p->max_delay_ns - p->min_delay_ns;

	return p->min_delay_ns + (span ? load_rand(rs) % (span + 1) : 0);
}

/* How many requests a paced client may have sent by now (the rate is
 * shared by the clients that send: the producers of a delivery phase). */
static inline uint64_t load_allowed(const struct load_phase *p, uint64_t now)
{
	int senders = p->producers > 0 ? p->producers : p->clients;

	if (p->rate == 0)
		return UINT64_MAX;
	if (now <= p->start_ns)
		return 1;
	return 1 + (uint64_t)((double)(now - p->start_ns) *
			      ((double)p->rate / senders) / 1e9);
}

#endif /* BWLOAD_H */
