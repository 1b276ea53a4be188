/*
 * attack.h - a hostile local user against bitwheeld and the well-behaved
 * user beside it (issue 12), as one piece of code for the end-to-end test
 * (tests/check_attack.c, which asserts generous bounds) and the benchmark
 * (bench/bwattack.c, which measures; bench/run-attack.sh).
 *
 *   victim    a forked child as its own uid, with its own named session
 *             (a consumer with auto-ack), schedules a oneshot due `delay`
 *             ahead every `interval` (absolute deadlines), takes its fires
 *             as they come and reports the lateness of each, by the
 *             daemon's clock (Fired.fired_at_ns - deadline_ns) and at
 *             receipt (receive time - deadline), with every early, lost,
 *             repeated or foreign fire and every refusal counted.
 *   attacks   a forked child as the attacker's uid builds up to its
 *             budgets (until the daemon refuses, so it needs no knowledge
 *             of them), says ready, then keeps at it until told to stop,
 *             counting the daemon's refusals by ErrorCode.
 *
 * The delivery attacks (issue 20: ATK_REDELIVER, ATK_CHURN, ATK_REATTACH,
 * ATK_COALESCE) press on the way from a session's queue to its consumers
 * rather than on the budgets: the attacker fills named sessions to its
 * timer budget with fires due at one instant (spread, for coalescing),
 * held by consumers on raw sockets that read every fire and never
 * acknowledge one (the coalescing ones auto-ack), then keeps the daemon
 * handing them out again.
 *
 * The crash-loop attacks (issue 21: ATK_POISON, and ATK_CRASHLOOP its
 * baseline) put one named session under a consumer that is restarted 10
 * times a second: ordinary fires come due continuously, the consumer (a
 * raw socket) acknowledges each, and closes at once (a crash) on the
 * poison fire (ATK_POISON) or after its first batch (ATK_CRASHLOOP),
 * reconnecting 100 ms later; a watcher of the session's dead-letter
 * session times the poison fire's way there, and each time it arrives the
 * attacker schedules the poison again, so that the loop never stops.
 *
 * The single-ack flood (issue 22: ATK_SINGLEACK) is built as the
 * delivery attacks are, then acknowledges singly what makes a consumer's
 * flight longest to search.
 *
 * Children report through a pipe, in one write of a fixed struct; every
 * wait has a deadline.  Lateness goes into bwload's log-linear histograms
 * (load_stats.c, 1.6 % resolution).  Costs: the victim holds one histogram
 * pair and a bitmap of keys; an attacker holds its connections.
 */
#ifndef BW_ATTACK_H
#define BW_ATTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bwload.h"

#define ATK_NOBODY 65534   /* the attacker's uid                      */
#define ATK_VICTIM 65533   /* the victim's uid                        */
#define ATK_CODES 32       /* ErrorCode values counted                */
/* PROTOCOL.md (Hello): an ack_timeout_ns below this is raised to it. */
#define ATK_ACK_TIMEOUT_FLOOR_NS 100000000u
/* ATK_BURST's instants are multiples of this; the victim's deadlines
 * too (atk_victim_opts.align_ns), so that bursts find them. */
#define ATK_BURST_GRID_NS 20000000u

enum atk_kind {
	ATK_NONE,     /* baseline: no attacker                                  */
	ATK_MEMORY,   /* detached named sessions of 1 KiB-payload timers, to
			 the session and timer budgets                         */
	ATK_CPU,      /* 100 ms periodic timers over 16 detached sessions, to
			 the periodic-rate budget                              */
	ATK_STATS,    /* 4 connections flooding Stats, the rest of the
			 connection budget idle                                */
	ATK_FRAMES,   /* Stats frames padded with unknown fields to the frame
			 limit, and frames over it                             */
	ATK_EXPIRE,   /* named sessions filled to the timer budget, left to
			 expire (run the daemon with a short --linger)         */
	ATK_SILENT,   /* half the connection budget never says Hello, half
			 never reads the fires it asked for                    */
	ATK_SQUAT,    /* the attacker's sessions named as the victim's, firing,
			 and Hello into the victim's namespace                 */
	ATK_LOGS,     /* everything a client can make the daemon log          */
	ATK_PIPELINE, /* the connection budget's worth of connections, each
			 writing Cancels as fast as the daemon reads them      */
	ATK_LIST,     /* a session filled to the timer budget and one thinned
			 to 8 timers in a table sized for thousands, then 4
			 connections writing ListTimers and ListSessions of
			 them as fast as the daemon reads them                 */
	ATK_REDELIVER, /* sessions filled to the timer budget, every fire due
			 at one instant, held by consumers of the largest
			 window that read and never acknowledge, with an ack
			 timeout of 1 ns (the daemon raises it to its floor):
			 every fire taken back and handed out again and again */
	ATK_CHURN,    /* the same without an ack timeout, each consumer
			 closing and reconnecting every 200 ms, in turn       */
	ATK_REATTACH, /* the same, every consumer closing at once and
			 re-attaching at once, every second                   */
	ATK_COALESCE, /* sessions filled to the timer budget with tolerant
			 timers whose windows overlap, one coalescing consumer
			 each: one batch per session, all released at one
			 instant; then again, as soon as all came             */
	ATK_CRASHLOOP, /* the baseline of ATK_POISON: the same session and
			 consumer without a poison fire, closing at once
			 after its first batch of fires (acknowledged) and
			 reconnecting 100 ms later                           */
	ATK_POISON,   /* one named session, an ordinary fire due every 5 ms
			 and one poison fire; its consumer acknowledges every
			 ordinary fire and closes at once on the poison one,
			 reconnecting 100 ms later: the poison fire goes
			 round to the delivery limit, then to NAME.dead,
			 where a watcher takes it and the attacker schedules
			 it again                                            */
	ATK_BURST,    /* issue 22: the uid's timer budget over anonymous
			 connections, all due at one instant on a 20 ms grid
			 (atk_victim_opts.align_ns: the victim's deadlines
			 on it too), the fires read; again as soon as all
			 came: the slots around the instant full, the rest
			 in the attacker's overflow store                    */
	ATK_OUTPUT,   /* output memory: the connection budget's worth of
			 consumers on raw sockets that never read, of named
			 sessions filled to the uid's bytes budget with fires
			 due at one instant, so that their unread output would
			 take the uid past its budget; then a Schedule every
			 100 ms (TOO_MANY_TIMERS at the default budgets, where
			 the timers' count binds first; OVER_BUDGET where the
			 bytes do, the output counted)                       */
	ATK_SHARE,    /* four uids against a fifth: three other uids
			 (ATK_SHARE_UID) in turn, then the attacker's, fill
			 detached sessions with payload timers due in an hour
			 as ATK_MEMORY does, until refused; then a Schedule
			 every 100 ms (NO_MEMORY: the attacker's share of
			 --max-memory, half of what the others leave)        */
	ATK_SINGLEACK, /* sessions filled to the timer budget, every fire due
			 at one instant, held by consumers of the largest
			 window without an ack timeout; each acknowledges
			 the newer half of its fires singly, newest first,
			 then single Acks of those again and again in a
			 random order (acked 0, no request_id): every Ack
			 names a fire past half a window still in flight (a
			 walk of the flight from its oldest fire reached it
			 in O(the window))                                   */
	ATK_N
};

/* ATK_SHARE's i-th other uid (0 to 2) beside the attacker's: clear of
 * ATK_VICTIM. */
#define ATK_SHARE_UID(attacker, i) ((uid_t)((attacker) - 2 - (i)))

/* "none", "memory", ...; NULL past the end. */
const char *atk_name(enum atk_kind k);
/* What the attacker must have been told at its budget: an ErrorCode
 * (0 for ATK_NONE). */
int atk_expected_refusal(enum atk_kind k);

/* A forked child and the pipes to it. */
struct atk_child {
	pid_t pid;
	int report_fd;   /* the child's report, then EOF                   */
	int stop_fd;     /* ours; closing it tells an attacker to stop     */
};

struct atk_victim_opts {
	const char *sock;
	const char *session;    /* the victim's named session              */
	uid_t uid;              /* 0: stay root (no setuid)                */
	uint64_t interval_ns;   /* one timer scheduled every interval      */
	uint64_t delay_ns;      /* each due this far ahead ...             */
	uint64_t delay_max_ns;  /* ... or, when above delay_ns, a delay
				   from delay_ns to this, by key (a fixed
				   hash: the same keys, the same delays)   */
	uint64_t duration_ns;   /* scheduling for this long                */
	uint64_t align_ns;      /* > 0: each deadline rounded up to a
				   multiple of it (ATK_BURST's grid)       */
	uint64_t grace_ns;      /* then awaiting the last fires this long  */
	int nice;               /* setpriority() before dropping to uid     */
	int rt;                 /* > 0: SCHED_FIFO at this priority, also
				   before dropping to uid (atk_set_rt)      */
};

struct atk_victim_result {
	struct load_hist fired;  /* Fired.fired_at_ns - deadline_ns        */
	struct load_hist rx;     /* receive time - deadline_ns             */
	struct load_hist rtt;    /* Schedule's reply time                  */
	uint64_t scheduled;      /* accepted                               */
	uint64_t fires;          /* own fires received, once each          */
	uint64_t early;          /* fired or received before the deadline  */
	uint64_t lost;           /* accepted, never fired within the grace */
	uint64_t repeated;       /* a key's second fire                    */
	uint64_t foreign;        /* fires of keys or payloads not its own  */
	uint64_t refused;        /* Hello or Schedule refused, or failed   */
	char error[200];         /* the first failure                      */
};

struct atk_attack_opts {
	const char *sock;
	uid_t uid;
	const char *victim_session; /* ATK_SQUAT's names                     */
	uid_t victim_uid;           /* ATK_SQUAT's owner_uid probe           */
	size_t payload;             /* bytes per timer's payload (ATK_MEMORY,
				       ATK_EXPIRE, ATK_SILENT)               */
	uint64_t max_timers;        /* give up building past this many      */
	unsigned max_conns;         /* ... or this many connections         */
	uint32_t window;            /* the delivery attacks' consumer window;
				       0: the daemon's max_window            */
	unsigned slow;              /* the delivery attacks' waits for the
				       daemon scaled by this (a test's
				       BW_TEST_SLOW under valgrind); 0: 1    */
	uint32_t max_deliveries;    /* ATK_POISON: the session's SetPolicy
				       max_deliveries; 0: the daemon's
				       default (none set)                    */
};

/* The crash-loop attacks' figures (ATK_POISON, ATK_CRASHLOOP). */
struct atk_crash {
	uint64_t scheduled;          /* ordinary timers accepted           */
	uint64_t acked;              /* of those, acknowledged (once each) */
	uint64_t stuck;              /* accepted, due over a second before
					the stop, never acknowledged       */
	uint64_t restarts;           /* the consumer's crashes             */
	uint64_t poisoned;           /* poison fires received              */
	uint64_t dead;               /* poison fires the watcher of
					NAME.dead received                 */
	uint64_t dead_first_ns;      /* the first: from its Schedule to the
					watcher                            */
	uint64_t dead_max_ns;        /* the slowest                        */
	uint64_t dead_deliveries;    /* the last one's deliveries in its
					session (Fired.dead_letter)        */
	uint32_t max_deliveries;     /* the policy the session had         */
	double active_s;             /* the active phase                   */
};

struct atk_attack_result {
	uint64_t refused[ATK_CODES]; /* daemon errors by ErrorCode         */
	uint64_t ops;                /* requests or connections attempted  */
	uint64_t conns;              /* connections held when ready        */
	uint64_t sessions;           /* named sessions made when ready     */
	uint64_t timers;             /* timers accepted when ready         */
	uint64_t fires;              /* fires its consumers read, taken
					back ones again each time          */
	uint64_t redelivered;        /* of those, marked redelivered       */
	uint64_t ack_timeout_ns;     /* ATK_REDELIVER: the ack timeout the
					daemon said it put in force for
					the 1 ns asked (the smallest of
					its consumers')                    */
	double ready_s;              /* building up took                   */
	struct atk_crash crash;      /* ATK_POISON, ATK_CRASHLOOP          */
	uint64_t bytes;              /* ATK_OUTPUT, ATK_SHARE: its uid's
					bytes (Stats.uid_bytes) when ready  */
	char error[200];             /* an unexpected failure              */
};

/* Fork the victim (as opts->uid): it connects at once and schedules for
 * duration; 0 or -errno. */
int atk_victim_start(const struct atk_victim_opts *opts, struct atk_child *out);
/* Its report; 0, or -1 with out->error saying why (it died, timed out). */
int atk_victim_finish(struct atk_child *ch, int timeout_ms,
		      struct atk_victim_result *out);

/* Fork the attacker and wait (timeout_ms) until it is at its budgets:
 * 0, or -1 with err (of errlen bytes) saying why, the child reaped. */
int atk_attack_start(enum atk_kind k, const struct atk_attack_opts *opts,
		     struct atk_child *out, int timeout_ms, char *err,
		     size_t errlen);
/* Tell it to stop and take its report: 0 or -1 as atk_victim_finish. */
int atk_attack_stop(struct atk_child *ch, int timeout_ms,
		    struct atk_attack_result *out);

/* Put the calling process under SCHED_FIFO at priority prio (> 0), so
 * that on a machine busy with other work only the daemon's own stalls
 * delay it: 0 or -errno. */
int atk_set_rt(int prio);

/* Lines in a file (a daemon's log): -1 if it cannot be read. */
long atk_count_lines(const char *path);

#endif /* BW_ATTACK_H */
