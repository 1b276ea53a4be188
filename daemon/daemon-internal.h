/*
 * daemon-internal.h - bitwheeld's modules and the data they share.
 *
 *   options.c   command line and defaults          -> struct bwd_options
 *   budgets.c   the budget file: per-uid overrides of the per-uid budgets
 *   log.c       leveled logging to stderr (journald reads the <N> prefix)
 *   map.c       intrusive chained hash map keyed by u64
 *   state.c     sessions, their members (connections' places), timers,
 *               and the dual wheel: everything the daemon knows, changed
 *               only through bwd_state_* / bwd_session_* / bwd_member_*,
 *               each change of a named session told to the journal.  No
 *               I/O and no libevent.  Its parts, over state-internal.h:
 *   delivery.c  queues, consumers' windows and fires in flight, acks,
 *               take-backs, coalescing, redelivery pacing: what is to be
 *               sent is pulled from it (bwd_state_next_delivery)
 *   account.c   per-uid accounts and budgets
 *   restore.c   the state written out (dump) and read back (apply)
 *   record.c    the bytes of the state files: headers and records, CRC32C
 *   journal.c   the append-only journal file: append, group commit, rotate
 *   snapshot.c  a snapshot written by a forked child, then installed
 *   store.c     the state directory: lock, recovery at start, when to
 *               commit and when to snapshot, and serving on while it
 *               cannot be written
 *   listen.c    the listening socket: systemd's, or one we bind
 *   process.c   the daemon process's own figures (memory, descriptors,
 *               CPU, start time) for monitoring, read from /proc/self
 *   request.c   what each request does to the state, and its reply
 *   conn.c      one client connection: frames in, frames out, bounds;
 *               counts what it sees in struct bwd_metrics (requests,
 *               error replies, fires sent, disconnects by reason)
 *   server.c    the libevent loop: accept, timers, signals, sd_notify, and
 *               the pump that hands fires to connections
 *   bitwheeld.c main()
 *
 * Layers, each calling only those below it: server -> conn -> request ->
 * state -> journal/record -> wheel; store (recovery, commits) sits beside
 * server, over state.  What a lower layer needs from a higher one is data
 * (struct bwd_env), never a call.
 */
#ifndef BWD_DAEMON_INTERNAL_H
#define BWD_DAEMON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/types.h>

#include "bitwheel.h"
#include "frame.h"

struct event_base;
struct event;
struct bufferevent;

/* ---- options.c ---------------------------------------------------------- */

struct bwd_limits {
	uint32_t max_clients;
	uint32_t max_frame;
	uint32_t max_payload;
	uint64_t max_timers;       /* per session                            */
	uint64_t max_queued;       /* per detached named session             */
	uint64_t linger_ns;
	uint64_t max_output;       /* unread bytes per connection            */
	uint32_t max_window;       /* largest consumer window                */
	uint32_t max_deliveries;   /* a named session's default limit; 0: none */
	uint64_t hello_timeout_ns; /* a connection's time to say Hello       */
	uint64_t output_timeout_ns; /* ... and to read some of its output    */
	/* Per-uid budgets (state.c), root exempt. */
	uint32_t max_clients_per_uid;   /* connections, before Hello too    */
	uint64_t max_sessions_per_uid;  /* named sessions                   */
	uint64_t max_timers_per_uid;    /* pending timers + undelivered fires */
	uint64_t max_periodic_mhz_per_uid; /* sum of 1/period, milli-hertz  */
	uint64_t max_bytes_per_uid;     /* timers, fires and unread output  */
	uint64_t max_journal_per_uid;   /* bytes its named sessions add to
					   one journal generation           */
	/* Daemon-wide: the same bytes over every uid, root too (NO_MEMORY). */
	uint64_t max_memory;
};

/*
 * What one timer or fire is charged against the bytes budgets: its struct
 * (a timer's holds its wheel link, struct bw_timer) and payload, and for
 * a timer its share of the map's buckets (up to 16) and the allocator's
 * header (16); for a fire the allocator's header.  A timer is charged no
 * less than its oneshot fire would be, so that a fire taking its timer's
 * place never adds.
 */
#define BWD_TIMER_EXTRA 32u
#define BWD_FIRE_EXTRA 16u
#define BWD_FIRE_COST(payload_len) \
	((uint64_t)sizeof(struct bwd_fire) + (payload_len) + BWD_FIRE_EXTRA)
#define BWD_TIMER_COST(payload_len) \
	((uint64_t)sizeof(struct bwd_timer) + BWD_TIMER_EXTRA > BWD_FIRE_COST(0) ? \
	 (uint64_t)sizeof(struct bwd_timer) + (payload_len) + BWD_TIMER_EXTRA : \
	 BWD_FIRE_COST(payload_len))
/* A dead letter's history, charged on top of its fire. */
#define BWD_DEAD_COST ((uint64_t)sizeof(struct bwd_dead) + BWD_FIRE_EXTRA)

/* One uid's budgets: the *_per_uid limits, or its rule in --budgets.
 * UINT64_MAX: unlimited. */
struct bwd_budget {
	uint64_t clients, sessions, timers, periodic_mhz, bytes;
};
struct bwd_budget_entry {
	uid_t uid;
	unsigned line;             /* the rule it came from                  */
	struct bwd_budget budget;
};
struct bwd_budgets {
	const char *path;          /* --budgets; NULL: none                  */
	struct bwd_budget def;     /* every uid's but those below            */
	struct bwd_budget_entry *entry; /* sorted by uid                     */
	size_t n;
};

/* A consumer's window when its Hello names none (PROTOCOL.md). */
#define BWD_DEFAULT_WINDOW 256u
/* The shortest ack timeout: a shorter one asked for is raised to it, so
 * that a consumer cannot have its whole window taken back and handed out
 * again at every tick (PROTOCOL.md). */
#define BWD_MIN_ACK_TIMEOUT_NS 100000000u
/* The slowest a uid's redeliveries are paced (in mHz), whatever its
 * periodic-rate budget (state.c, "Redeliveries"). */
#define BWD_MIN_REDELIVERY_MHZ 100000u

/* Fires that fail (PROTOCOL.md): --max-deliveries' default (RabbitMQ's
 * for quorum queues, PROTOCOL.md says why), the longest Release delay,
 * the longest a Touch holds a fire after its hand-out (SQS's visibility
 * bound), and the fires one Kick moves or looks at. */
#define BWD_DEFAULT_MAX_DELIVERIES 20u
#define BWD_MAX_RELEASE_DELAY_NS (7ull * 86400 * 1000000000)
#define BWD_MAX_HOLD_NS (12ull * 3600 * 1000000000)
#define BWD_MAX_KICK 10000u
/* Acknowledged fires by their deliveries (delivery.c). */
#define BWD_DELIVERIES_BOUNDS 8
#define BWD_DELIVERIES_LE { 1, 2, 3, 5, 10, 20, 50, 100 }

/* When a journal write counts as done (--fsync). */
enum bwd_fsync { BWD_FSYNC_NEVER, BWD_FSYNC_BATCH, BWD_FSYNC_ALWAYS };

struct bwd_store_options {
	const char *dir;           /* NULL: nothing is kept on disk          */
	enum bwd_fsync fsync;
	uint64_t journal_max;      /* bytes of journal that start a snapshot */
	double snapshot_growth;    /* ... once past this times the last one */
	uint64_t snapshot_min_interval_ns; /* the shortest time between them */
	uint64_t snapshot_interval_ns; /* and the longest, if anything changed */
	bool ignore_snapshot;      /* recover from the journals alone        */
};

struct bwd_options {
	const char *socket_path;
	unsigned socket_mode;
	gid_t socket_gid;          /* --socket-group; (gid_t)-1: unchanged  */
	struct bw_dual_config wheel;
	const char *preset_name;
	struct bwd_limits limits;
	struct bwd_store_options store;
	struct bwd_budgets budgets;
	bool verbose;
};

/* 0 to run, 1 when --help/--version printed, -1 on a usage error. */
int bwd_options_parse(int argc, char **argv, struct bwd_options *out);
/* "4096", "64K", "16M", "1G" (powers of 1024) -> bytes; 0 or -EINVAL. */
int bwd_parse_size(const char *s, uint64_t *out);
/* What bwd_options_parse() allocated. */
void bwd_options_free(struct bwd_options *o);

/* ---- budgets.c ---------------------------------------------------------- */

/* out's defaults from l's *_per_uid limits (no file). */
void bwd_budgets_defaults(const struct bwd_limits *l, struct bwd_budgets *out);
/* Read the budget file at path into out (empty), over the defaults of
 * l's *_per_uid limits.  0, or -1 with the file and line on stderr. */
int bwd_budgets_load(const char *path, const struct bwd_limits *l,
		     struct bwd_budgets *out);
/* uid's budget; NULL for root unless a rule names uid 0 (exempt). */
const struct bwd_budget *bwd_budget_of(const struct bwd_budgets *b, uid_t uid);
void bwd_budgets_free(struct bwd_budgets *b);

/* ---- log.c -------------------------------------------------------------- */

enum bwd_log_level { BWD_LOG_ERR = 3, BWD_LOG_WARNING = 4, BWD_LOG_NOTICE = 5,
		     BWD_LOG_INFO = 6, BWD_LOG_DEBUG = 7 };

/* Show messages up to this level (default BWD_LOG_INFO). */
void bwd_log_set_level(enum bwd_log_level max);
void bwd_log(enum bwd_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* "regular file", "FIFO", "symbolic link", "device", ...: for messages. */
const char *bwd_mode_name(mode_t m);

/* What a client can make the daemon log, each kind limited on its own. */
enum bwd_log_kind {
	BWD_LOGK_CLOSE,            /* closed for breaking the protocol       */
	BWD_LOGK_SLOW,             /* not reading its output                 */
	BWD_LOGK_SESSION,          /* sessions joined, left, expired         */
	BWD_LOGK_REFUSED,          /* connections refused at a limit         */
	BWD_LOGK_KINDS
};
/* bwd_log for a line uid's client caused: at most BWD_RATELIMIT_BURST of
 * a kind per uid and second, then one line saying how many were held. */
void bwd_log_client(enum bwd_log_kind kind, uid_t uid, enum bwd_log_level level,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define BWD_RATELIMIT_SLOTS 64
#define BWD_RATELIMIT_BURST 10u
#define BWD_RATELIMIT_WINDOW_NS 1000000000ull

struct bwd_ratelimit_slot {
	uid_t uid;                 /* the last held back (or let through)    */
	bool used;
	uint32_t lines;            /* let through in this window             */
	uint64_t start_ns;         /* the window's start                     */
	uint64_t suppressed;       /* held back in it                        */
};
struct bwd_ratelimit {
	struct bwd_ratelimit_slot slot[BWD_RATELIMIT_SLOTS];
};
/*
 * Whether a line for uid may go at now_ns.  *held: lines held back in the
 * window of uid's slot that just ended (to report before this one), and
 * *held_uid the last of them was for; 0 when none.
 */
bool bwd_ratelimit_allow(struct bwd_ratelimit *rl, uid_t uid, uint64_t now_ns,
			 uint64_t *held, uid_t *held_uid);

/* ---- map.c -------------------------------------------------------------- */

struct bwd_map_node {
	struct bwd_map_node *next;
	uint64_t key;
};

struct bwd_map {
	struct bwd_map_node **bucket;
	size_t mask;               /* buckets - 1, a power of two minus one  */
	size_t count;
	uint64_t seed;
};

/* splitmix64's finalizer of x ^ seed: the maps' hash, the jitter's draw. */
static inline uint64_t bwd_mix(uint64_t x, uint64_t seed)
{
	x ^= seed;
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

int bwd_map_init(struct bwd_map *m, uint64_t seed);
void bwd_map_fini(struct bwd_map *m);
/* The first node with this key; bwd_map_next() walks the rest. */
struct bwd_map_node *bwd_map_find(const struct bwd_map *m, uint64_t key);
struct bwd_map_node *bwd_map_next(struct bwd_map_node *n, uint64_t key);
/* Insert; without memory to grow, chains just get longer. */
void bwd_map_insert(struct bwd_map *m, struct bwd_map_node *n);
void bwd_map_remove(struct bwd_map *m, struct bwd_map_node *n);
size_t bwd_map_bytes(const struct bwd_map *m);
/*
 * Walk the map in its own order (map.c) from position *pos on, handing
 * visit each node, at most `work` chain nodes and buckets looked at: true
 * once past the last; false when visit refused a node (*pos is its
 * position, to resume at it) or the work ran out (*pos is where to
 * resume).  Nodes sharing a key are handed over once, as one.
 */
bool bwd_map_scan(const struct bwd_map *m, uint64_t *pos, size_t work,
		  bool (*visit)(void *arg, struct bwd_map_node *n), void *arg);

#define bwd_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- state.c ------------------------------------------------------------ */

/* What the wheel's data pointer leads to for the state's own timers (a
 * session's linger, a consumer's ack timeout; a client's timer is told by
 * its data's low bit, bwd_timer_data).  A timer the wheel fired
 * (BWD_DUE_TIMER), or a periodic fire made behind them (BWD_DUE_FIRE),
 * waits in its session's due list (next) for its turn to join the queue. */
enum bwd_due_kind { BWD_DUE_TIMER, BWD_DUE_LINGER, BWD_DUE_ACK, BWD_DUE_FIRE,
		    BWD_DUE_HOLD, BWD_DUE_PACE, BWD_DUE_RETRY };
struct bwd_due {
	enum bwd_due_kind kind;
	struct bwd_due *next;
};

/* Why a fire in flight went back (TakeBack in the protocol). */
enum bwd_take_back { BWD_TB_NONE, BWD_TB_DISCONNECTED, BWD_TB_ACK_TIMEOUT,
		     BWD_TB_RELEASED, BWD_TB_RESTARTED };

/* A dead letter's history in the session that dead-lettered it. */
struct bwd_dead {
	/* That session's name: Kick matches it, and a session of the name
	 * made after it ended may kick its letters back. */
	char origin[BWP_SESSION_NAME_MAX + 1];
	uint64_t deliveries;
	uint64_t first_ns, last_ns; /* its first and last hand-out there     */
	uint64_t dead_ns;          /* when it was dead-lettered              */
	uint8_t why;               /* enum bwd_take_back: the last take-back */
};

/*
 * A fire: queued in its session, in flight to one member (in its list
 * through next and pprev, and in its map through flight_node), or delayed
 * (a Release's delay: in the wheel, in its session's delayed list through
 * next and pprev).  160 bytes with its allocator's header, as a timer:
 * a oneshot fire taking its timer's place never adds.
 */
struct bwd_fire {
	union {
		struct bwd_due due; /* BWD_DUE_FIRE: in its session's due list;
				      BWD_DUE_RETRY: delayed, in the wheel;
				      BWD_DUE_FIRE out of flight            */
		/* In flight (in no due list nor the wheel): in its member's
		 * map, keyed by its delivery number. */
		struct bwd_map_node flight_node;
	};
	struct bwd_fire *next;
	struct bwd_fire **pprev;   /* in flight or delayed: its link there  */
	uint64_t key;
	uint64_t deadline_ns;
	uint64_t fired_ns;
	union {
		uint64_t count;    /* periodic: fire number; 0 for oneshot   */
		uint64_t wall_ns;  /* wall: its timer's instant, UTC ns      */
	};
	uint64_t seq;              /* the session's fire number (journal)    */
	union {
		bw_handle retry;   /* delayed: its timer                     */
		uint64_t heap_at;  /* in flight: touched, its place (from 1)
				      in its member's touched heap; 0: not  */
	};
	uint64_t handed_ns;        /* in flight: when it was handed out      */
	union {
		uint64_t ack_by_ns; /* in flight: when its ack timeout takes
				      it back (UINT64_MAX: never); Touch
				      moves it                               */
		struct bwd_session *delayed_in; /* delayed: whose            */
	};
	union {
		uint64_t wire_end; /* conn.c: output offset its frame ends at */
		uint64_t ready_ns; /* delayed (and read back): when it may go */
	};
	uint64_t first_ns;         /* its first hand-out in this session     */
	struct bwd_dead *dead;     /* a dead letter: where from; else NULL   */
	uint32_t deliveries;       /* hand-outs in this session              */
	uint8_t why;               /* enum bwd_take_back: the last take-back */
	bool late;
	bool sent;                 /* journaled as handed to a consumer      */
	bool redelivered;          /* handed out before, not acknowledged    */
	bool taken_back;           /* from a consumer: its next hand-out is
				      paced by its owner's redelivery rate  */
	bool has_payload;
	uint8_t lane;              /* its timer's (enum bw_lane), for the
				      queue-wait histogram; BWD_LANE_NONE:
				      read back at a restart, not counted   */
	/* A wall-clock timer's fire (a oneshot, whose count would be 0):
	 * wall_ns holds its instant (Fired.due_realtime_ns) in count's
	 * place, so that a fire stays no larger than its timer. */
	bool wall;
	uint32_t payload_len;
	const uint8_t *payload;    /* the bytes that follow                  */
};
#define BWD_LANE_NONE 0xffu

/* In flight: its member's number for it (Fired.delivery). */
static inline uint64_t bwd_fire_delivery(const struct bwd_fire *f)
{
	return f->flight_node.key;
}

struct bwd_timer {
	struct bwd_map_node node;  /* keyed by the client's key              */
	struct bwd_session *session;
	/* Armed: in the wheel, through its own link (bw_dual_timer_add in
	 * its lane, the wheel's data bwd_timer_data(t)), so that arming and
	 * cancelling touch no record pool and no handle.  Fired (a oneshot
	 * the wheel let go, which is never armed again): its place in the
	 * session's due list (due, BWD_DUE_TIMER), when, and its fire's seq
	 * (journaled).  These share the link's room, which keeps the
	 * struct small (with them apart it took 16 bytes more). */
	union {
		struct bw_timer wt;
		struct {
			struct bwd_due due;
			uint64_t fired_ns;
			uint64_t seq;
		};
	};
	uint64_t deadline_ns;      /* the deadline it waits for now          */
	uint64_t leeway_ns;        /* as the Schedule said; BWD_LEEWAY_DEFAULT:
				      absent (bwd_leeway says what it is)   */
	uint32_t payload_len;
	bool has_payload;
	bool late;                 /* restored past its deadline, or a wall-
				      clock step passed it (clock.c)       */
	/* A oneshot the wheel fired, in its session's due list: a fire
	 * already (journaled, not found by its key), not yet made. */
	bool fired : 1;
	/* Armed in its owner's overflow store (wheels.c); a bit, so that the
	 * timer's size, which the budgets count, stays as it was. */
	bool spilled : 1;
	/* A wall-clock timer: its instant is in the state's map of them
	 * (clock.c), so that monotonic timers pay nothing for it. */
	bool wall : 1;
	/* A calendar timer (a wall-clock one too): its spec and next
	 * elapse hang off its entry in that map (clock.c). */
	bool cal : 1;
	/* A CLOCK_BOOTTIME timer (wall set too): its instant in that map is
	 * its deadline on CLOCK_BOOTTIME (clock.c). */
	bool boot : 1;
	/* A struct bwd_periodic follows the payload (bwd_timer_periodic),
	 * which other timers, oneshots above all, go without: the struct
	 * is 88 bytes, a 96-byte block of malloc's, where with its fields
	 * inside 104 took 112. */
	bool periodic : 1;
	uint8_t lane;              /* enum bw_lane: the one bwd_lane_for picks */
	uint8_t payload[];
};

/* What only a periodic timer has, 8-byte aligned after its payload.  A
 * calendar timer counts no fires: its fires carry their elapse instead. */
struct bwd_periodic {
	uint64_t period_ns;
	uint64_t count;            /* fires so far                           */
};

/* The bytes a timer's block holds past the struct: its payload, and if it
 * is periodic its struct bwd_periodic. */
static inline size_t bwd_timer_tail(bool periodic, uint32_t payload_len)
{
	return periodic ? ((payload_len + 7u) & ~(size_t)7u) +
			  sizeof(struct bwd_periodic) : payload_len;
}

static inline struct bwd_periodic *bwd_timer_periodic(const struct bwd_timer *t)
{
	return (struct bwd_periodic *)(void *)((uintptr_t)(t + 1) +
		((t->payload_len + 7u) & ~(size_t)7u));
}

/* 0: not periodic (a oneshot, a calendar timer). */
static inline uint64_t bwd_timer_period(const struct bwd_timer *t)
{
	return t->periodic ? bwd_timer_periodic(t)->period_ns : 0;
}

/* A periodic timer's fires so far; 0 for any other (a oneshot's fire
 * counts 0). */
static inline uint64_t bwd_timer_count(const struct bwd_timer *t)
{
	return t->periodic ? bwd_timer_periodic(t)->count : 0;
}

/*
 * The wheel's data for a client's timer: the timer's address with its low
 * bit set.  Every other data the wheels carry is a struct bwd_due, whose
 * kind says what it is; a timer's due shares the room of the link it is
 * armed by (above), so the data tells it apart by that bit (structs are
 * 8-byte aligned), and bwd_timer_of_data takes it back.
 */
static inline void *bwd_timer_data(struct bwd_timer *t)
{
	return (void *)((uintptr_t)t | 1u);
}

static inline struct bwd_timer *bwd_timer_of_data(void *data)
{
	return (uintptr_t)data & 1u ?
	       (struct bwd_timer *)((uintptr_t)data & ~(uintptr_t)1u) : NULL;
}

struct bwd_member;
struct bwd_uid;

/* A session's place in one of the state's round-robin lists. */
struct bwd_slink {
	struct bwd_session *next, **pprev;  /* NULL pprev: out               */
};

struct bwd_session {
	struct bwd_map_node node;  /* keyed by (owner, name)'s hash (named)  */
	struct bwd_map_node id_node; /* keyed by id, while listed            */
	struct bwd_map_node uid_node; /* the same in its owner's listed map  */
	char *name;                /* NULL: anonymous                        */
	uid_t owner;
	struct bwd_uid *acct;      /* owner's budgets' use (state.c)         */
	struct bwd_map timers;
	/* Fires waiting for a consumer, oldest first (taken-back ones at
	 * the front). */
	struct bwd_fire *queue_head, *queue_tail;
	uint64_t queued;
	uint64_t in_flight;        /* fires in flight to its members         */
	uint64_t dropped;          /* since a consumer last attached         */
	/* Every member, and the consumers that may take a fire now (credit
	 * and room), served round-robin from the head. */
	struct bwd_member *members;
	struct bwd_member *ready_head, *ready_tail;
	uint32_t nmembers, nconsumers;
	/* In the state's list of sessions with fires to hand out. */
	struct bwd_slink work;
	/* What the wheel fired and the state has not made into queued
	 * fires yet, in fire order, and the link in the state's list of
	 * sessions with such (bwd_state_fire). */
	struct bwd_due *due_head, *due_tail;
	struct bwd_slink firing;
	struct bwd_due linger;     /* BWD_DUE_LINGER: armed with no members  */
	bw_handle linger_handle;
	bool lingering;
	/* Coalescing (state.c): while every consumer asked for it, fires are
	 * held until hold_ns, when the hold timer lets them go together. */
	uint32_t ncoalesce;        /* consumers that asked                   */
	bool held;
	bool hold_armed;
	uint64_t hold_ns;
	uint64_t let_go_ns;        /* when a batch (or an unheld fire) last
				      went                                   */
	struct bwd_due hold;       /* BWD_DUE_HOLD                           */
	bw_handle hold_handle;
	/* Redelivery pacing (state.c): a taken-back fire at the queue's head
	 * waits, out of the work list, for its owner's rate to allow it. */
	bool paced;
	/* Fires that fail (delivery.c): the policy (named sessions), the
	 * fires released with a delay, and the dead letters it holds (it
	 * does not expire while it does) and has sent. */
	bool policy_set;           /* a SetPolicy set it: journaled          */
	uint32_t max_deliveries;   /* 0: unlimited                           */
	char *dead_letter;         /* NULL: the default, name + ".dead"      */
	struct bwd_fire *delayed_head;
	uint64_t delayed;
	uint64_t dead_letters;
	uint64_t dead_lettered;
	struct bwd_due pace;       /* BWD_DUE_PACE                           */
	bw_handle pace_handle;
	struct bwd_state *state;
	uint64_t id;               /* its number: in the state files (named),
				      id_node's key                          */
	bool listed;               /* in by_id and its owner's (not ending) */
	uint64_t detached_ns;      /* when its last member left (or it was
				      restored)                              */
	uint64_t next_seq;         /* named: the next fire's seq             */
	/* Anonymous, ended with many timers: cancelled a chunk per turn. */
	bool ending;
	size_t reap_bucket;        /* timers' buckets before it are empty    */
	struct bwd_session *next_ending;
};

/* A connection's place in a session. */
struct bwd_member {
	struct bwd_due due;        /* BWD_DUE_ACK: its ack timeout's timer   */
	struct bwd_session *session;
	void *owner;               /* the connection, for the pump           */
	struct bwd_member *next, **pprev;          /* session->members      */
	struct bwd_member *ready_next, **ready_pprev; /* NULL pprev: out     */
	/* In flight to it, in delivery order, and by delivery number (a
	 * consumer's; what its buckets grow by charged to the session's
	 * owner). */
	struct bwd_fire *flight_head, *flight_tail;
	struct bwd_map flights;
	size_t flights_base;       /* its empty buckets' bytes, not charged  */
	uint64_t flight;
	uint64_t last_delivery;    /* the number of the last fire sent       */
	uint64_t drained;          /* its connection's output written so far */
	uint64_t ack_timeout_ns;   /* 0: none                                */
	bw_handle ack_handle;
	uint32_t window;
	pid_t pid;                 /* its connection's peer                  */
	bool consumer;
	bool auto_ack;
	bool coalesce;             /* asked for coalesced delivery           */
	bool room;                 /* its connection's output takes fires    */
	bool ack_armed;
	/* Its touched fires in flight (their ack deadlines out of delivery
	 * order), a binary heap by ack deadline of `touched` (its array,
	 * charged as the map, grows to touch_cap), and the first fire in
	 * flight, in delivery order, not touched (the earliest ack deadline
	 * of the others); NULL: none.  ack_at: when its ack timer is armed
	 * for. */
	struct bwd_fire **touch_heap;
	uint32_t touched, touch_cap;
	struct bwd_fire *untouched;
	uint64_t ack_at;
};

struct bwd_state_stats {
	uint64_t sessions;         /* named                                  */
	uint64_t queued;           /* fires waiting in session queues        */
	uint64_t in_flight;        /* fires in flight to consumers           */
	uint64_t consumers;        /* consumer members                       */
	uint64_t dropped;          /* periodic fires dropped, ever           */
	uint64_t acked;            /* fires done, ever                       */
	uint64_t redelivered;      /* fires taken back, ever                 */
	uint64_t expired;          /* sessions dropped after their linger    */
	/* Fires that fail: dead-lettered, released, touched, kicked back. */
	uint64_t dead_lettered, released, touched, kicked;
	uint64_t timers;           /* pending, all sessions                  */
	uint64_t bytes;            /* timers, fires, sessions, maps          */
	/* The state's own timers in the oneshot lane (lingers, ack
	 * timeouts, coalescing holds), which the lane's counters include and
	 * Stats does not. */
	uint64_t own_pending, own_inserted, own_fired, own_cancelled;
	/* Per lane, what the lane's counters include and Stats does not:
	 * wheel callbacks that only placed a wall-clock timer again (its
	 * check ahead of its instant, a step not heard of yet: fired), and
	 * the moves of wall-clock timers at a step (cancelled, inserted). */
	uint64_t wall_checks[2], wall_moves[2];
};

struct bwd_state;

int bwd_state_new(const struct bwd_options *opt, uint64_t now_ns,
		  struct bwd_state **out);
void bwd_state_free(struct bwd_state *st);
/* The clock the state reads (ack timeouts, lingers, turn budgets):
 * bw_now_ns by default (now NULL); a simulation's (tests/sim.c). */
void bwd_state_set_clock(struct bwd_state *st, uint64_t (*now)(void *arg),
			 void *arg);
/* CLOCK_REALTIME and CLOCK_BOOTTIME as clock.c reads them (wall-clock,
 * calendar and boottime timers): the host's by default (NULL); a
 * simulation's (tests/sim.c), set before any such timer, after
 * bwd_state_set_clock. */
void bwd_state_set_wall_clocks(struct bwd_state *st, uint64_t (*real)(void *arg),
			       uint64_t (*boot)(void *arg), void *arg);
/* Fire every due timer: a client's oneshot into its session's due list
 * (journaled, at the wheel's pace), a periodic one into its session's
 * queue (or due list, behind the oneshots); the server then makes fires
 * (bwd_state_fire), pumps (bwd_state_next_delivery) and re-arms its timer
 * from next_deadline. */
void bwd_state_poll(struct bwd_state *st, uint64_t now_ns);
/* Make queued fires of what sessions' due lists hold, one per session in
 * turn, at most FIRE_CHUNK or BWD_TURN_NS of them; true while some remain
 * (call again at the next turn, after polling for I/O). */
bool bwd_state_fire(struct bwd_state *st);
/* BW_EEMPTY when nothing is pending. */
int bwd_state_next_deadline(struct bwd_state *st, uint64_t *out_ns);
void bwd_state_stats(const struct bwd_state *st, struct bwd_state_stats *out);
/* One lane's figures over every wheel (wheels.c): the shared wheel's
 * and every uid's overflow store's, freed ones' counters included;
 * overflow counts the shared heap and everything in the stores. */
struct bwd_wheel_figures {
	struct bw_counters k;
	uint64_t pending, overflow;
};
void bwd_wheels_lane(const struct bwd_state *st, enum bw_lane lane,
		     struct bwd_wheel_figures *out);
/* bw_dual_check() on every wheel; its error, *why saying what broke. */
int bwd_wheels_check(const struct bwd_state *st, const char **why);
/* The lane's (BW_LANE_*) fire lateness, fired_at - deadline of every
 * client timer's fire, by BWD_LATENESS_LE_NS: its count is the lane's
 * fired counter in Stats. */
const struct bwd_hist *bwd_state_lateness(const struct bwd_state *st,
					  unsigned lane);
/* Delivery's (delivery.c).  The lane's queue wait, by BWD_LATENESS_LE_NS:
 * a fire's first hand-out to a consumer minus its deadline (the lateness,
 * the coalescing hold, the wait for a consumer with room, redelivery
 * pacing: all of it), for the fires this process made (not those read
 * back at a restart). */
const struct bwd_hist *bwd_state_queue_wait(const struct bwd_state *st,
					    unsigned lane);
/* Ack latency, by BWD_LATENESS_LE_NS: an Ack's arrival minus the
 * acknowledged fire's last hand-out, for every fire an Ack completed (a
 * manual consumer's; auto-ack's completion on write is not an ack the
 * consumer made, and is not counted). */
const struct bwd_hist *bwd_state_ack_latency(const struct bwd_state *st);
/*
 * The next fire to write, round-robin over sessions with queued fires and,
 * within one, over its consumers with credit and room: the fire is now in
 * flight to *m (numbered, journaled), and the caller writes it to
 * (*m)->owner and sets its wire_end.  NULL when nothing is to be sent.
 */
struct bwd_fire *bwd_state_next_delivery(struct bwd_state *st,
					 struct bwd_member **m);
/* How long one kind of work may hold a turn of the loop (requests, the
 * teardown of ended sessions, handing out fires), so that everyone's
 * fires stay on time. */
#define BWD_TURN_NS 1000000u
/* Fires the pump hands out in one turn at most (and no more than
 * BWD_TURN_NS of them): a session's burst, redeliveries or released batch
 * go on in the next turn, after the loop has polled. */
#define BWD_DELIVER_CHUNK 1024u
/* Whether a session has a fire that may go to one of its consumers now
 * (or had one: entries leave the work list lazily, at the next pump). */
bool bwd_state_has_work(const struct bwd_state *st);

/* Free a chunk of the timers and fires of sessions that ended with many
 * (at most TEARDOWN_CHUNK, or BWD_TURN_NS of work); true while some remain
 * (call again at the next turn). */
bool bwd_state_reap(struct bwd_state *st);

/*
 * Per-uid budgets.  The state counts, for every uid with something in the
 * daemon, its connections (every accepted one, before Hello too), its
 * named sessions, its pending timers and undelivered fires over all of its
 * sessions (anonymous too), its periodic rate: the sum over its periodic
 * timers of 1/period in milli-hertz (bwd_periodic_mhz), and its bytes:
 * BWD_TIMER_COST / BWD_FIRE_COST of those timers and fires plus the unread
 * output of its connections (bwd_state_output).  Each is checked at
 * admission against opt->limits' *_per_uid; uid 0 is counted but never
 * refused; recovery counts and never refuses.  The sum of every uid's
 * bytes is checked against max_memory, for uid 0 too, and a uid with
 * budgets against its share of it (bwd_state_share).
 */
struct bwd_lane_usage {
	uint64_t pending, inserted, fired, cancelled, lost;
};
struct bwd_uid_usage {
	uint64_t connections, sessions, timers, periodic_mhz, bytes;
	/* struct bwd_state_stats' figures for the sessions the uid owns
	 * (cumulative ones since it last had nothing in the daemon), and its
	 * clients' timers in each lane (indexed by enum bw_lane). */
	uint64_t queued, in_flight, consumers, dropped, acked, redelivered,
		 expired;
	struct bwd_lane_usage lane[2];
	uint64_t journal;          /* bytes added to the current journal     */
};
/* A connection of uid was accepted: 0, or TOO_MANY_CLIENTS when uid is at
 * its budget (nothing counted), NO_MEMORY. */
int bwd_state_conn_open(struct bwd_state *st, uid_t uid);
/* One that bwd_state_conn_open() counted is gone. */
void bwd_state_conn_close(struct bwd_state *st, uid_t uid);
void bwd_state_uid_usage(const struct bwd_state *st, uid_t uid,
			 struct bwd_uid_usage *out);
/* The budgets in force (opt->budgets at first), and a new set of them:
 * every uid's entry follows at once (O(uids)); a uid over its new
 * budgets keeps what it has, as after a recovery.  b must outlive its
 * use. */
const struct bwd_budgets *bwd_state_budgets(const struct bwd_state *st);
void bwd_state_set_budgets(struct bwd_state *st, const struct bwd_budgets *b);
/* The entry of a uid with a connection open (bwd_state_conn_open), valid
 * until that connection's bwd_state_conn_close. */
struct bwd_uid *bwd_state_uid(struct bwd_state *st, uid_t uid);
/* Unread output of one of u's connections grew (or shrank, n < 0). */
void bwd_state_output(struct bwd_state *st, struct bwd_uid *u, int64_t n);
/* Every uid's bytes: what max_memory bounds. */
uint64_t bwd_state_held(const struct bwd_state *st);
/* A uid's share of max_memory: half of what the other uids leave of it
 * (account.c).  A uid with budgets may hold at most its bytes budget and
 * its share (NO_MEMORY past the share). */
uint64_t bwd_state_share(const struct bwd_state *st, uid_t uid);
/* Whether u holds all it may (its budget, its share, or the last of
 * max_memory): then its connections take no more output while they have
 * some unread (conn.c). */
bool bwd_state_output_full(const struct bwd_state *st, const struct bwd_uid *u);
/* Whether a uid passed its journal share (max_journal_per_uid) in this
 * journal generation: the store then wants the next one (store.c). */
bool bwd_state_journal_over(const struct bwd_state *st);
/* Whether s's owner is past its journal share for what caller asks of s:
 * a change by choice (Release, Kick, SetPolicy) is then OVER_BUDGET. */
bool bwd_session_journal_refuses(const struct bwd_session *s, uid_t caller);
/* The store cannot write (or can again): while it cannot, a named
 * session's periodic timer adds a fire to an empty queue only, so that
 * the state the outage ends with stays within the reserve (store.c). */
void bwd_state_set_storage_down(struct bwd_state *st, bool down);
/* Stats' bytes without the wheel's and the maps' own memory: the
 * timers', fires' (payloads included), sessions' and members'. */
uint64_t bwd_state_item_bytes(const struct bwd_state *st);
/* 10^12 / period_ns: a periodic timer's share of the rate, in mHz. */
uint64_t bwd_periodic_mhz(uint64_t period_ns);

/* What a connection asks of its session at Hello. */
struct bwd_attach {
	const char *name;          /* NULL: a new anonymous session          */
	uid_t uid;                 /* the caller's                           */
	uid_t owner_uid;           /* whose namespace name is in             */
	bool consumer;
	bool auto_ack;
	bool coalesce;             /* consumers: hold fires within leeways   */
	uint32_t window;
	uint64_t ack_timeout_ns;   /* 0: none                                */
	void *owner;               /* handed back with its fires             */
	pid_t pid;                 /* the caller's, for listings             */
	bool no_create;            /* a new named session could not be
				      journaled: refuse to create one        */
};
/*
 * Attach a connection to the named session (created if need be) or to a
 * new anonymous one.  0, or a protocol error code (Bitwheel__V1__
 * ErrorCode) as a positive int: OVER_BUDGET when a new named session would
 * take the owner past max_sessions_per_uid or find its journal share
 * (max_journal_per_uid) used up (unless uid or owner is 0),
 * STORAGE_UNAVAILABLE when one would be created despite a->no_create.
 * *resumed: the session existed.
 */
int bwd_session_attach(struct bwd_state *st, const struct bwd_attach *a,
		       struct bwd_member **out, bool *resumed);
/* The connection is gone: its fires in flight go back to the queue
 * (delivery.c says where), marked redelivered; an anonymous session ends,
 * a named one with no members left starts to linger. */
void bwd_member_detach(struct bwd_member *m);

/*
 * Fires that fail (delivery.c, PROTOCOL.md "Fires that fail").  Release:
 * the fire in flight to m numbered delivery goes back now (the queue's
 * tail) or after delay_ns, or to the dead-letter session at its limit;
 * 0 (out->released false when no such fire is in flight), or BAD_REQUEST
 * for a number never sent.  Touch: its ack deadline becomes now +
 * timeout_ns (0: m's ack timeout); HOLD_LIMIT past its hand-out +
 * BWD_MAX_HOLD_NS (*deadline_ns says until when it may be held), NO_MEMORY
 * when its first Touch finds no room in m's heap of touched fires.  Kick:
 * up to limit (0 or past BWD_MAX_KICK: that) of the fires s dead-lettered
 * (of key, if has_key) come back to its queue's tail; *more when it
 * stopped before the dead-letter queue's end.  SetPolicy: has_max sets
 * max_deliveries (0: unlimited); dead_letter NULL keeps, "" the default;
 * BAD_REQUEST for an anonymous session.
 */
struct bwd_release {
	bool released, dead_lettered;
	uint64_t deliveries, ready_ns;
};
int bwd_member_release(struct bwd_member *m, uint64_t delivery,
		       uint64_t delay_ns, struct bwd_release *out);
int bwd_member_touch(struct bwd_member *m, uint64_t delivery,
		     uint64_t timeout_ns, bool *touched, uint64_t *deadline_ns);
int bwd_session_kick(struct bwd_session *s, bool has_key, uint64_t key,
		     uint32_t limit, uint64_t *kicked, bool *more);
int bwd_session_set_policy(struct bwd_session *s, bool has_max, uint32_t max,
			   const char *dead_letter);
/* s's limit in force (0: unlimited; anonymous sessions have none), and
 * its dead-letter session's name: 0, or -ENOENT (anonymous),
 * -ENAMETOOLONG (the default would pass BWP_SESSION_NAME_MAX). */
uint32_t bwd_session_max_deliveries(const struct bwd_session *s);
int bwd_session_dead_letter_name(const struct bwd_session *s,
				 char out[BWP_SESSION_NAME_MAX + 1]);
/* Acknowledged fires by their deliveries, by BWD_DELIVERIES_LE. */
const struct bwd_hist *bwd_state_deliveries(const struct bwd_state *st);
/*
 * Acknowledge delivery (and, cumulative, every earlier one in flight).
 * 0 with *acked the fires it completed, or BAD_REQUEST for a number this
 * member was never sent.
 */
int bwd_member_ack(struct bwd_member *m, uint64_t delivery, bool cumulative,
		   uint64_t *acked);
/* Whether the connection's output takes more fires (flow control). */
void bwd_member_set_room(struct bwd_member *m, bool room);
/* The connection's output has drained to offset `drained`: the fires
 * whose frames end before it have reached the socket (an auto-ack
 * member's are done; another's are marked if they are taken back). */
void bwd_member_written(struct bwd_member *m, uint64_t drained);

/*
 * Leeway and lanes (PROTOCOL.md, "Leeway and lanes").  A lane's bound is
 * the most a fire in it comes late, scheduling delay aside: its tick
 * times its probe limit (exact precision: a timer fires on its deadline's
 * tick, or up to max_probes - 1 ticks later when probing displaced it).
 * A timer goes to the coarsest lane whose bound is at most its leeway,
 * the finest when neither is.  Absent, a oneshot timer's leeway is 0 and
 * a periodic one's its period / BWD_LEEWAY_DIVISOR, never below the
 * finest lane's bound.
 */
#define BWD_LEEWAY_DEFAULT UINT64_MAX
#define BWD_LEEWAY_DIVISOR 64u
uint64_t bwd_lane_late_ns(const struct bw_config *lane);
/* The lane whose bound is the smaller (the oneshot lane on a tie). */
enum bw_lane bwd_lane_finest(const struct bw_dual_config *w);
/* The leeway a timer has: asked (BWD_LEEWAY_DEFAULT: absent) for period. */
uint64_t bwd_leeway(const struct bw_dual_config *w, uint64_t asked,
		    uint64_t period_ns);
/* The lane a timer with this leeway goes to. */
enum bw_lane bwd_lane_for(const struct bw_dual_config *w, uint64_t leeway_ns);

/*
 * A calendar timer as a Schedule or a TIMER record gives it (clock.c,
 * PROTOCOL.md "Calendar timers"): its spec as given, and what picks its
 * next elapse and the jitter added to it.
 */
#define BWD_CAL_TIMER_SPEC_MAX 255u    /* a spec's bytes: a record's name */
/* The largest jitter_ns a Schedule may ask: a month. */
#define BWD_CAL_JITTER_MAX (31ull * 86400 * 1000000000)
struct bwd_calendar {
	const char *spec;          /* NUL-terminated, <= BWD_CAL_TIMER_SPEC_MAX */
	uint64_t base_ns;          /* its last fire's wall-clock time (or the
				      Schedule's): the next elapse is the
				      first after it                         */
	uint64_t jitter_ns;        /* 0: none                                */
	uint64_t seed;             /* the jitter's                           */
	uint64_t grace_ns;         /* with has_grace: misfire_grace_ns       */
	uint64_t cost;             /* bwd_cal_check's: what it is charged   */
	uint64_t interval_ns;      /* bwd_cal_check's: its first two elapses'
				      distance (0: one elapse), its rate in
				      the periodic budget as a period's     */
	bool fixed, has_grace;
};

struct bwd_schedule {
	uint64_t key;
	uint64_t deadline_ns;
	uint64_t wall_ns;          /* a wall-clock timer's (clock.c); 0: none;
				      with boot its CLOCK_BOOTTIME deadline */
	const struct bwd_calendar *cal; /* a calendar timer's; NULL: none    */
	uint64_t period_ns;        /* 0: oneshot                             */
	uint64_t leeway_ns;        /* BWD_LEEWAY_DEFAULT: absent             */
	const uint8_t *payload;
	uint32_t payload_len;
	bool has_payload;
	bool replace;
	bool boot;                 /* Schedule.clock CLOCK_BOOTTIME          */
	uid_t uid;                 /* the caller's: 0 is exempt from budgets */
};

/*
 * 0 or a protocol error code; *replaced says whether a timer was replaced.
 * TOO_MANY_TIMERS: the session's max_timers, or its owner's
 * max_timers_per_uid; OVER_BUDGET: the owner's periodic rate would pass
 * max_periodic_mhz_per_uid, or its bytes max_bytes_per_uid (rate checked
 * first), or (a named session) its journal bytes are at
 * max_journal_per_uid; NO_MEMORY: every uid's bytes would pass max_memory, or the
 * owner's its share of it (bwd_state_share), or an allocation failed.  The per-uid budgets spare a caller or owner uid 0;
 * max_memory spares nobody.  A replace is charged what it adds.
 */
int bwd_timer_schedule(struct bwd_session *s, const struct bwd_schedule *req,
		       bool *replaced);
/* The session owner's periodic rate (mHz) were req scheduled in s. */
uint64_t bwd_timer_rate_after(struct bwd_session *s,
			      const struct bwd_schedule *req);
/* The bytes req would add to its owner's (0 if none: a replace by no
 * more). */
uint64_t bwd_timer_bytes_added(struct bwd_session *s,
			       const struct bwd_schedule *req);
/* 0 (*pending says whether it was), or a protocol error code. */
int bwd_timer_cancel(struct bwd_session *s, uint64_t key, bool *pending);

/*
 * Listings (ListSessions, ListTimers), a page at a time: the sessions, or
 * a session's pending timers, in their map's order (bwd_map_scan) from
 * position *pos on (0: the start), at most max of them into out (*n) and
 * at most BWD_LIST_WORK map nodes and buckets looked at.  True when the
 * listing is complete; false when *pos is where the next page starts.
 * Timers: at most `bytes` of entries too, BWD_TIMER_ENTRY_MAX each and
 * a calendar timer's BWD_CAL_ENTRY_EXTRA more (the first whatever it
 * takes).  Sessions: every live one (anonymous too, not those ending), or with
 * !any only owner's, from the owner's own map: what it costs, and what a
 * page says, does not depend on other uids' sessions.
 */
#define BWD_LIST_WORK 16384u
bool bwd_state_list_sessions(const struct bwd_state *st, bool any, uid_t owner,
			     uint64_t *pos, const struct bwd_session **out,
			     size_t max, size_t *n);
bool bwd_session_list_timers(const struct bwd_session *s, uint64_t *pos,
			     const struct bwd_timer **out, size_t max,
			     size_t bytes, size_t *n);
/* The named session (owner, name); NULL when there is none. */
struct bwd_session *bwd_state_session(struct bwd_state *st, uid_t owner,
				      const char *name);

struct bwd_journal;
struct bwd_record;

/* From now on, every change to a named session is appended to j (NULL:
 * none), which starts with a SESSION record for each named session. */
void bwd_state_set_journal(struct bwd_state *st, struct bwd_journal *j);
/* Hand every named session, timer and undelivered fire to emit, as
 * records (a snapshot's body); stops at emit's first nonzero return. */
int bwd_state_dump(const struct bwd_state *st,
		   int (*emit)(void *ctx, const struct bwd_record *r), void *ctx);
/*
 * Recovery: apply one record read back from a state file whose clock runs
 * shift_ns ahead of ours (0 within one boot).  0, or BWD_REC_ECORRUPT when
 * it contradicts the state (the caller logs and goes on); -ENOMEM.
 */
int bwd_state_apply(struct bwd_state *st, const struct bwd_record *r,
		    int64_t shift_ns);
/* After the last record: arm the restored timers (those already due are
 * marked late), start the sessions' lingers.  Counts what was restored. */
int bwd_state_restore_finish(struct bwd_state *st, uint64_t now_ns,
			     struct bwd_state_stats *restored);

/* ---- record.c ----------------------------------------------------------- */

enum bwd_rec_type {
	BWD_REC_SESSION = 1,       /* sid, seq (next fire), uid, name        */
	BWD_REC_END,               /* sid: the session expired               */
	BWD_REC_TIMER,             /* sid, key, deadline, period, count,
				      [leeway,] payload: scheduled
				      (replacing the key)                    */
	BWD_REC_CANCEL,            /* sid, key                               */
	BWD_REC_FIRE,              /* sid, key, seq, deadline, count, fired:
				      the timer fired; the fire is owed      */
	BWD_REC_QUEUED,            /* the same with the payload: a fire owed
				      (snapshots)                            */
	BWD_REC_SENT,              /* sid, seq: handed to a connection       */
	BWD_REC_DONE,              /* sid, seq: delivered, or dropped        */
	BWD_REC_TRAILER,           /* count: records before it (snapshots)   */
	BWD_REC_MOVE,              /* sid, seq, to, to_seq, dl_deliveries,
				      dl_first, last, why, dead, name (the
				      origin's, a dead-lettering's): the fire
				      went to
				      session `to` as its fire to_seq (dead-
				      lettered with that history, or with
				      BWD_RECF_KICK kicked back)             */
	BWD_REC_RELEASE,           /* sid, seq, ready: released, to be handed
				      out again from ready on                */
	BWD_REC_POLICY,            /* sid, count (max_deliveries), name (the
				      dead-letter session; empty: default)  */
	BWD_REC_TYPES
};

/* Record flags. */
#define BWD_RECF_PAYLOAD 0x01u /* TIMER/QUEUED: has_payload              */
#define BWD_RECF_LATE 0x02u    /* FIRE/QUEUED: the fire was late         */
#define BWD_RECF_SENT 0x04u    /* FIRE/QUEUED: handed to a connection    */
#define BWD_RECF_LEEWAY 0x08u  /* TIMER: carries leeway_ns (after the
				  other u64s); without it, the default   */
#define BWD_RECF_HISTORY 0x10u /* SENT: carries deliveries and fired (its
				  first hand-out); QUEUED: deliveries,
				  first, ready                           */
#define BWD_RECF_DEAD 0x20u    /* QUEUED: a dead letter: dl_deliveries,
				  dl_first, last, why, dead, name (its
				  origin's)                              */
#define BWD_RECF_KICK 0x40u    /* MOVE: a kick, not a dead-lettering     */
#define BWD_RECF_WALL 0x40u    /* TIMER/QUEUED: carries wall_ns (clock.c),
				  after the other u64s                   */
#define BWD_RECF_MARKED 0x80u  /* QUEUED: redelivered, though not SENT
				  under this seq (moved since)           */
#define BWD_RECF_BOOT 0x04u    /* TIMER with WALL: wall_ns is a deadline
				  on CLOCK_BOOTTIME (clock.c)           */
#define BWD_RECF_CAL 0x10u     /* TIMER: a calendar timer: its spec (name),
				  jitter, seed and base; FIRE: a calendar
				  timer's fire: wall_ns (the elapse) and
				  base (the wall clock it fired at)     */
#define BWD_RECF_CAL_FIXED 0x20u /* TIMER with CAL: jitter_fixed         */
#define BWD_RECF_CAL_GRACE 0x80u /* TIMER with CAL: carries grace_ns     */

struct bwd_record {
	uint8_t type;
	uint8_t flags;
	uint8_t name_len;
	uint32_t uid;
	uint64_t sid, key, seq, deadline_ns, period_ns, count, fired_ns;
	uint64_t leeway_ns;        /* TIMER with BWD_RECF_LEEWAY             */
	uint64_t wall_ns;          /* TIMER/QUEUED with BWD_RECF_WALL, FIRE
				      with BWD_RECF_CAL                    */
	/* TIMER with BWD_RECF_CAL (grace_ns with BWD_RECF_CAL_GRACE);
	 * base_ns FIRE's with it too. */
	uint64_t jitter_ns, seed, base_ns, grace_ns;
	/* Fires that fail: MOVE, RELEASE, and QUEUED's history. */
	uint64_t to, to_seq, deliveries, first_ns, ready_ns, dl_deliveries,
		 dl_first_ns, last_ns, why, dead_ns;
	const char *name;          /* not NUL-terminated                     */
	const uint8_t *payload;
	uint32_t payload_len;
};

enum bwd_file_kind { BWD_FILE_JOURNAL, BWD_FILE_SNAPSHOT };

struct bwd_file_header {
	enum bwd_file_kind kind;
	uint64_t generation;
	uint8_t boot_id[16];
	uint64_t mono_ns, real_ns;
};

#define BWD_FILE_HEADER_SIZE 64
#define BWD_RECORD_HEADER_SIZE 8
/* A body's bound: the largest payload the options allow, and the rest
 * (a calendar TIMER's: 11 u64s and a 255-byte spec, 350 bytes). */
#define BWD_RECORD_MAX ((16u << 20) + 512u)
/* Parse results besides 0. */
#define BWD_REC_ETORN 1        /* the bytes end inside it               */
#define BWD_REC_ECORRUPT 2     /* a checksum or layout that does not hold */

uint32_t bwd_crc32c(const void *data, size_t len);
void bwd_file_header_pack(const struct bwd_file_header *h,
			  uint8_t out[BWD_FILE_HEADER_SIZE]);
int bwd_file_header_parse(const uint8_t *buf, size_t len,
			  struct bwd_file_header *h);
/* Bytes r takes packed, header included. */
size_t bwd_record_size(const struct bwd_record *r);
/* The largest record of a type, its payload aside. */
size_t bwd_record_bound(enum bwd_rec_type type);
/* Room enough to pack r, without counting its fields: as many u64s as a
 * field mask has bits, the uid, the name and the payload. */
static inline size_t bwd_record_room(const struct bwd_record *r)
{
	return BWD_RECORD_HEADER_SIZE + 2 + 32 * 8 + 4 + 1 + r->name_len + 4 +
	       (size_t)r->payload_len;
}
/* Pack r into out (bwd_record_size bytes); returns that size. */
size_t bwd_record_pack(const struct bwd_record *r, uint8_t *out);
/* The record at buf: 0 and *used, or BWD_REC_ETORN / BWD_REC_ECORRUPT.
 * r's name and payload point into buf. */
int bwd_record_parse(const uint8_t *buf, size_t len, struct bwd_record *r,
		     size_t *used);
const char *bwd_record_strerror(int err);

/* ---- journal.c ---------------------------------------------------------- */

/* CLOCK_REALTIME in ns: how a deadline crosses a reboot. */
uint64_t bwd_realtime_ns(void);
/* The kernel's boot_id (16 bytes); 0 or -errno. */
int bwd_boot_id(uint8_t out[16]);
/* "journal.0000000000000007" */
void bwd_journal_name(uint64_t generation, char out[32]);

/*
 * A histogram of durations, for monitoring: the values in each bucket
 * (not cumulative; the last is over the last bound) and their sum.  The
 * bounds are its keeper's static table (BWD_LATENESS_LE_NS,
 * BWD_SYNC_LE_NS), ascending, at most BWD_HIST_BOUNDS; adding a value is
 * a binary search, at most 5 compares.
 */
#define BWD_HIST_BOUNDS 16
struct bwd_hist {
	uint64_t bucket[BWD_HIST_BOUNDS + 1];
	uint64_t sum_ns;
};
static inline void bwd_hist_add(struct bwd_hist *h, const uint64_t *le,
				unsigned n, uint64_t v)
{
	unsigned lo = 0, hi = n;

	/* The first bound >= v: Prometheus' buckets count v <= le. */
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (le[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	h->bucket[lo]++;
	h->sum_ns += v;
}

/* Fire lateness (state.c): 100 us to 10 s. */
#define BWD_LATENESS_BOUNDS 16
#define BWD_LATENESS_LE_NS { 100000, 250000, 500000, 1000000, 2500000,     \
		5000000, 10000000, 25000000, 50000000, 100000000, 250000000,  \
		500000000, 1000000000, 2500000000, 5000000000, 10000000000 }
/* Add now_ns - from_ns (0 when now_ns is not past it) to h, by
 * BWD_LATENESS_LE_NS: fire lateness, queue wait, ack latency. */
static inline void bwd_hist_since(struct bwd_hist *h, uint64_t from_ns,
				  uint64_t now_ns)
{
	static const uint64_t le[BWD_LATENESS_BOUNDS] = BWD_LATENESS_LE_NS;

	bwd_hist_add(h, le, BWD_LATENESS_BOUNDS,
		     now_ns > from_ns ? now_ns - from_ns : 0);
}
/* Journal syncs (journal.c): 10 us to 1 s. */
#define BWD_SYNC_BOUNDS 16
#define BWD_SYNC_LE_NS { 10000, 25000, 50000, 100000, 250000, 500000,      \
		1000000, 2500000, 5000000, 10000000, 25000000, 50000000,      \
		100000000, 250000000, 500000000, 1000000000 }

/* The records a journal sync made durable (journal.c): 1 to 32768. */
#define BWD_SYNC_RECORDS_BOUNDS 16
#define BWD_SYNC_RECORDS_LE { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, \
		2048, 4096, 8192, 16384, 32768 }

/* Journal syncs (fdatasync) from the daemon's start, over every journal
 * generation: journal.c adds each as the loop learns it is done. */
struct bwd_sync_stats {
	uint64_t count;
	uint64_t last_ns, max_ns;
	struct bwd_hist hist;      /* by BWD_SYNC_LE_NS; sum_ns: the total */
	/* By BWD_SYNC_RECORDS_LE, the records each made durable; sum_ns:
	 * all of them (a count, not a time). */
	struct bwd_hist records;
};

/* Create journal.<generation> in the directory dirfd, header written and
 * synced.  0 or -errno. */
int bwd_journal_open(int dirfd, uint64_t generation, enum bwd_fsync policy,
		     struct bwd_journal **out);
void bwd_journal_close(struct bwd_journal *j);
/* Add a record to the next commit; *bytes: its size.  0 or -errno; after
 * a failure the journal stays failed. */
int bwd_journal_append(struct bwd_journal *j, const struct bwd_record *r,
		       size_t *bytes);
/* write(2) what was appended, without waiting for the disk. */
int bwd_journal_write(struct bwd_journal *j);
/* Write what was appended and make it durable now, in the caller. */
int bwd_journal_sync(struct bwd_journal *j);
/* --fsync=batch: fdatasyncs that may run at once (journal.c). */
#define BWD_SYNCS_IN_FLIGHT 2
/*
 * The end of a loop turn: write what was appended (one write); with
 * --fsync=batch start a sync thread on it unless BWD_SYNCS_IN_FLIGHT are
 * or the records are gathering while one is, or nothing waits for them
 * (needed false) and the first of them was written less than
 * BWD_SYNC_LAZY_NS ago (*covered: a sync in flight, begun now or before,
 * covers everything written so far; *wait_ns, not 0: commit again that
 * much later at the latest, when the gathering or the wait ends),
 * otherwise make it durable now (always: one fdatasync for the whole
 * turn).  0 or -errno.
 */
int bwd_journal_commit(struct bwd_journal *j, bool needed, bool *covered,
		       uint64_t *wait_ns);
/* How long records nothing waits for (journal.c) may wait for a sync
 * something waits for, before they get one of their own. */
#define BWD_SYNC_LAZY_NS (5 * 1000000ull)
/* Whether `waiting` records written while a sync of `in_flight` records
 * that began age_ns ago runs should gather (wait) before a sync of their
 * own, when syncs lately take some est_ns (journal.c): true, and *wait_ns
 * how much longer at most, while it covers BWD_SYNC_GATHER_MIN or more,
 * they are fewer than it covers and it has run less than est_ns. */
#define BWD_SYNC_GATHER_MIN 16
bool bwd_sync_gather(uint64_t age_ns, uint64_t est_ns, uint64_t waiting,
		     uint64_t in_flight, uint64_t *wait_ns);
/* batch: the eventfd that becomes readable when a sync is done (-1
 * otherwise); then bwd_journal_synced() takes its result.  0 or -errno. */
int bwd_journal_event_fd(const struct bwd_journal *j);
int bwd_journal_synced(struct bwd_journal *j);
/* Bytes of the file known to be durable (what bwd_journal_synced took). */
uint64_t bwd_journal_durable(const struct bwd_journal *j);
/* Add the journal's syncs to *s from now on (NULL: stop). */
void bwd_journal_count_syncs(struct bwd_journal *j, struct bwd_sync_stats *s);
/* Whether some appended record is not yet durable (acks must wait). */
bool bwd_journal_pending(const struct bwd_journal *j);
/* 0, or the -errno that failed the journal (for good); *what (may be
 * NULL) the call that failed: "write", "fdatasync", ... */
int bwd_journal_error(const struct bwd_journal *j, const char **what);
uint64_t bwd_journal_generation(const struct bwd_journal *j);
/* Bytes in the file. */
uint64_t bwd_journal_size(const struct bwd_journal *j);
/*
 * Tests only (tests/check_state.c's group commit simulation): a journal
 * whose clock is now(arg) and whose syncs the test runs.  --fsync=batch
 * starts no threads: begin(arg, slot) says that slot was given a sync of
 * the file as written (bwd_journal_size) when it is called, and the test
 * reports it done when and as it chooses with bwd_journal_sim_done (err:
 * 0 or -errno; ns: how long it took), in any order; the eventfd and
 * bwd_journal_synced() then work as with the threads.  A sync in the loop
 * (--fsync=always, a rotation's, close's) is sync(arg): 0 or -errno.
 * Creating the file (its header, its name) still syncs for real.
 */
struct bwd_journal_sim {
	uint64_t (*now)(void *arg);
	void (*begin)(void *arg, unsigned slot);
	int (*sync)(void *arg);
	void *arg;
};
int bwd_journal_open_sim(int dirfd, uint64_t generation, enum bwd_fsync policy,
			 const struct bwd_journal_sim *sim, struct bwd_journal **out);
void bwd_journal_sim_done(struct bwd_journal *j, unsigned slot, int err,
			  uint64_t ns);

/* ---- snapshot.c --------------------------------------------------------- */

/* Write a whole snapshot of st (header, records, trailer) to fd. */
int bwd_snapshot_write(const struct bwd_state *st, int fd, uint64_t generation);
/*
 * Fork a child that writes the state as it is now into the file `into`
 * (written from its start and cut to the snapshot's size; -1: to
 * snapshot.tmp.<its pid> in dirfd), header generation `generation`,
 * synced; *pid is the child, which does not keep lockfd and dies with
 * the daemon, and logs its failure at fail_level.  The parent goes on at
 * once.  0 or -errno.
 */
int bwd_snapshot_start(const struct bwd_state *st, int dirfd, int lockfd,
		       int into, uint64_t generation, enum bwd_log_level fail_level,
		       pid_t *pid);
/* The name the writer `writer` writes to without a file to write into. */
void bwd_snapshot_tmp_name(pid_t writer, char out[40]);
/* The writer succeeded: rename its file (name) over snapshot, sync the
 * directory, and remove the journals it makes redundant. */
int bwd_snapshot_install(int dirfd, const char *name, uint64_t generation);
/* Remove every unfinished snapshot; the count, or -errno. */
int bwd_snapshot_clean(int dirfd);

/* ---- store.c ------------------------------------------------------------ */

struct bwd_store;

/* What the connections and requests read of the store, kept up to date by
 * it as it changes (the server hands it bwd_env's). */
struct bwd_storage {
	struct bwd_journal *journal; /* the current one; NULL while none    */
	struct bwd_sync_stats syncs;
	/* Snapshots installed since the start, and when the last one's
	 * state was taken (CLOCK_MONOTONIC; 0: none yet): Stats' age. */
	uint64_t snapshots;
	uint64_t snapshot_ns;
	/* Their writing's time, fork to install: the last one's, and all. */
	uint64_t snapshot_last_ns, snapshot_total_ns;
	/* The journal cannot be written: changes of named sessions that
	 * must be durable are refused (STORAGE_UNAVAILABLE) until a new
	 * snapshot and journal are on disk; err is why (-errno). */
	bool down;
	int err;
	uint64_t down_ns;          /* since when (CLOCK_MONOTONIC)           */
};
/* Output held when the storage went down waits this long for the snapshot
 * that ends the outage; then it is dropped and its connections end with
 * STORAGE_UNAVAILABLE (bwd_conn_drop_held), so that no client waits for
 * an answer for as long as the outage lasts. */
#define BWD_HELD_DOWN_NS (5 * 1000000000ull)

/*
 * Open the state directory (created if missing, locked against a second
 * daemon), recover what it holds into st, and start a new journal (when
 * that cannot be written, start with pub->down, retrying in the
 * background).  durable(arg, upto) is called from the loop whenever a
 * sync that bwd_store_commit() started is done while the storage is up:
 * output marked with a position up to upto may go.  Errors are logged;
 * -errno.
 */
int bwd_store_open(const struct bwd_store_options *opt, struct bwd_state *st,
		   struct event_base *base, void (*durable)(void *arg, uint64_t upto),
		   void *arg,
		   struct bwd_storage *pub, struct bwd_store **out);
void bwd_store_free(struct bwd_store *s);

/* What a commit did for the output held so far. */
enum bwd_commit {
	BWD_COMMIT_WAIT,           /* syncs in flight: it waits for the next */
	BWD_COMMIT_SYNCING,        /* a sync in flight covers it             */
	BWD_COMMIT_DURABLE,        /* already durable: it may go             */
};
/* The end of a loop turn: write what the turn appended and see to its
 * sync (needed: some output waits for it, bwd_conn_waiting); may start a
 * snapshot.  A journal that cannot be written or synced takes the
 * storage down (logged once): then WAIT, until it is back.  *upto: the
 * position of all written so far, across journals, which the output
 * held until now waits for (durable() says when it is reached). */
enum bwd_commit bwd_store_commit(struct bwd_store *s, bool needed, uint64_t *upto);

/* What replaying one file found. */
struct bwd_replay {
	uint64_t generation;       /* from its header                        */
	uint64_t records;          /* applied                                */
	uint64_t contradictions;   /* records that did not fit, skipped      */
	size_t stopped_at;         /* offset reading stopped at              */
	bool whole;                /* a snapshot with its trailer            */
};
/*
 * Apply the file in buf (named `name` in messages) to st: 0 when read to
 * its end (a snapshot: to its trailer), else BWD_REC_ETORN/ECORRUPT (what
 * came before it is applied; the reason is logged), or -ENOMEM.
 */
int bwd_store_replay(struct bwd_state *st, const uint8_t *buf, size_t len,
		     const char *name, enum bwd_file_kind kind,
		     struct bwd_replay *out);
/* Log what is pending, per named session, as the daemon stops: counts at
 * notice level, keys at debug level.  kept: whether a journal has them. */
void bwd_state_log_pending(const struct bwd_state *st, bool kept);

struct bwd_server;

/* ---- listen.c ----------------------------------------------------------- */

/* The listening fd: systemd's if it passed one, else bound at path with
 * mode and group gid ((gid_t)-1: the daemon's). */
int bwd_listen_open(const char *path, unsigned mode, gid_t gid, int *fd_out,
		    bool *activated);

/* ---- process.c ---------------------------------------------------------- */

/* The daemon process's figures, as Prometheus' process_* metrics give a
 * process's; `have` says which could be read (BWD_PROC_*). */
#define BWD_PROC_MEMORY   0x01u    /* resident_bytes, virtual_bytes      */
#define BWD_PROC_OPEN_FDS 0x02u
#define BWD_PROC_MAX_FDS  0x04u
#define BWD_PROC_CPU      0x08u
#define BWD_PROC_START    0x10u
struct bwd_process {
	unsigned have;
	uint64_t resident_bytes, virtual_bytes;
	uint64_t open_fds;
	uint64_t max_fds;          /* RLIMIT_NOFILE's soft limit; UINT64_MAX:
				      none                                   */
	uint64_t cpu_ns;           /* user and system, every thread          */
	uint64_t start_time_ns;    /* CLOCK_REALTIME                         */
};
/* Read them now (process.c says from where, and what it costs). */
void bwd_process_read(struct bwd_process *out);

/* ---- shared by request, conn and server -------------------------------- */

struct bwd_conn;

/* The server's state that the layers below it read and keep: data, so
 * that nothing below the server ever calls up into it. */
/*
 * Daemon-wide counters for monitoring (Stats to root, bwctl metrics),
 * each kept O(1) where the thing happens: requests by Envelope body field
 * number, error replies by ErrorCode, fires handed to connections and
 * connections ended by reason by conn.c, connections accepted and refused
 * by server.c.  Fire lateness, queue wait and ack latency are the state's
 * (bwd_state_lateness, bwd_state_queue_wait, bwd_state_ack_latency), journal
 * syncs and snapshots the store's (struct bwd_storage).
 */
#define BWD_REQUEST_KINDS 27           /* Envelope body field numbers  */
#define BWD_ERROR_CODES 32             /* ErrorCode values             */
/* Why a connection ended: the first reason the daemon had, else the
 * client's (it closed, or its socket broke). */
enum bwd_disconnect {
	BWD_DISC_CLOSED,                /* by the client                  */
	BWD_DISC_ERROR,                 /* after a fatal Error reply      */
	BWD_DISC_SLOW,                  /* its output bound reached       */
	BWD_DISC_MEMORY,                /* no memory for its output       */
	BWD_DISC_REASONS
};
struct bwd_metrics {
	uint64_t requests[BWD_REQUEST_KINDS];   /* [0]: any other         */
	uint64_t errors[BWD_ERROR_CODES];       /* [0]: any other         */
	uint64_t delivered;                     /* Fired frames sent      */
	/* Writes that carried fires, and fires that went in one with an
	 * earlier fire (wake-ups saved): conn.c, at each fire's frame. */
	uint64_t fire_writes, fires_coalesced;
	uint64_t accepted;
	uint64_t refused_clients;               /* at --max-clients       */
	uint64_t refused_uid;                   /* a per-uid budget       */
	uint64_t refused_memory;                /* at --max-memory        */
	uint64_t disconnects[BWD_DISC_REASONS];
};

static inline void bwd_metrics_request(struct bwd_metrics *m, unsigned body)
{
	m->requests[body < BWD_REQUEST_KINDS ? body : 0]++;
}
static inline void bwd_metrics_error(struct bwd_metrics *m, unsigned code)
{
	m->errors[code < BWD_ERROR_CODES ? code : 0]++;
}

struct bwd_env {
	const struct bwd_options *opt;
	struct event_base *base;
	struct bwd_state *state;
	struct bwd_storage storage;    /* all 0 without --state-dir         */
	/* Active it after changing the state: the server then hands out
	 * fires, cancels a chunk of ended sessions and re-arms its timer. */
	struct event *pump;
	struct bwd_conn *conns;        /* every connection (conn.c keeps it) */
	struct bwd_conn *held;         /* those holding output for a sync    */
	uint64_t clients;
	/* Output put out by every connection and not yet written to its
	 * socket (what dead ones dropped counts until they are freed), kept
	 * as it changes so that Stats costs O(1). */
	uint64_t buffered;
	uint64_t started_ns;
	struct bwd_metrics metrics;
	bool stopping;
	/* Requests handled in this turn of the loop, the turn known by
	 * libevent's cached time (conn.c bounds both), and the connections
	 * with requests left for later turns, in the order they go on: a
	 * zero timeout (more) runs bwd_conn_run_deferred() in the next turn. */
	struct event *more;
	struct bwd_conn *more_head, *more_tail;
	struct timeval turn_tv;
	unsigned turn_frames;
	uint64_t turn_start_ns;        /* CLOCK_MONOTONIC at its first      */
};

/* ---- request.c ---------------------------------------------------------- */

/*
 * Where a connection's last listing (ListSessions, ListTimers) stopped,
 * kept by the connection between pages: the client gets a token for it,
 * never the map position itself (a position tells the maps' seed).
 */
struct bwd_list_cursor {
	uint64_t token;                /* the last reply's cursor; 0: none   */
	uint64_t pos;                  /* where the next page starts         */
	int body;                      /* the listing's request body case    */
	uint64_t what;                 /* ListTimers: the session's id;
					  ListSessions: the uid listed, or
					  UINT64_MAX for every uid's        */
};

/* One request's connection, as request.c sees it. */
struct bwd_request_ctx {
	struct bwd_env *env;
	struct bwd_member *member;     /* NULL before Hello; set by it       */
	void *owner;                   /* the connection, for Hello          */
	struct bwd_list_cursor *list;  /* the connection's                   */
	uid_t uid;
	pid_t pid;
	uint64_t now_ns;               /* 0: not read yet in this batch      */
};

/*
 * A listing reply's bounds: entries per reply, and what one entry and the
 * rest of the reply take packed at most (tests/check_daemon checks them),
 * so that a page never passes max_frame (PROTOCOL.md, ListSessions).
 */
#define BWD_LIST_MAX 1000u
#define BWD_SESSION_ENTRY_MAX 288u
#define BWD_SESSIONS_REPLY_MAX 32u
#define BWD_TIMER_ENTRY_MAX 64u
#define BWD_TIMERS_REPLY_MAX 80u
/* What a calendar timer's entry adds, its listed spec len bytes long:
 * calendar, jitter_ns, jitter_fixed, misfire_grace_ns, and a byte more of
 * the entry's length prefix.  A page of timers holds at most max_frame
 * of them (bwd_session_list_timers' bytes), and always one. */
#define BWD_CAL_ENTRY_EXTRA(len) ((len) + 28u)
/* Calendar: the elapses one request may ask for, and what its reply
 * takes packed besides the normalized form and 10 bytes an elapse (zone
 * name, base, gave_up, tags and lengths; tests/check_state checks it). */
#define BWD_CAL_ITERATIONS_MAX 1000u
#define BWD_CALENDAR_REPLY_MAX 256u

/* A reply in caller storage: env, whose body points into the rest. */
struct bwd_reply {
	Bitwheel__V1__Envelope env;
	union {
		Bitwheel__V1__Error error;
		Bitwheel__V1__HelloReply hello;
		Bitwheel__V1__ScheduleReply schedule;
		Bitwheel__V1__CancelReply cancel;
		Bitwheel__V1__StatsReply stats;
		Bitwheel__V1__AckReply ack;
		Bitwheel__V1__ListSessionsReply list_sessions;
		Bitwheel__V1__ListTimersReply list_timers;
		Bitwheel__V1__ReleaseReply release;
		Bitwheel__V1__TouchReply touch;
		Bitwheel__V1__SetPolicyReply set_policy;
		Bitwheel__V1__KickReply kick;
		Bitwheel__V1__CalendarReply calendar;
	} body;
	Bitwheel__V1__Limits limits;
	Bitwheel__V1__LaneStats lanes[2];
	Bitwheel__V1__LaneInfo lane[2], *lane_ptr[2]; /* HelloReply.lanes  */
	Bitwheel__V1__Metrics metrics;
	Bitwheel__V1__Policy policy;   /* HelloReply's, SetPolicyReply's     */
	char policy_name[BWP_SESSION_NAME_MAX + 1];
	uint64_t late_le[BWD_LATENESS_BOUNDS];
	uint64_t deliveries_le[BWD_DELIVERIES_BOUNDS];
	uint64_t sync_le[BWD_SYNC_BOUNDS];
	uint64_t sync_records_le[BWD_SYNC_RECORDS_BOUNDS];
	char message[256];
	/* fast: the reply is resp (a hot reply, no protobuf-c message
	 * filled), not env. */
	bool fast;
	struct bwp_response resp;
	bool none;                     /* nothing to send (an Ack without id) */
	bool close;                    /* close once it is written           */
	bool heavy;                    /* a listing's page: O(its entries)   */
	void *heap;                    /* a listing's entries: bwd_reply_free */
};

/* Act on one request and fill in its reply. */
void bwd_request_handle(struct bwd_request_ctx *ctx,
			const Bitwheel__V1__Envelope *req, struct bwd_reply *out);
/* The same for a request read by bwp_frame_parse_request(). */
void bwd_request_handle_fast(struct bwd_request_ctx *ctx,
			     const struct bwp_request *r, struct bwd_reply *out);
/* What a reply holds beyond itself, once it is packed. */
void bwd_reply_free(struct bwd_reply *r);
/* A connection-level error (no request_id) that closes the connection. */
void bwd_request_fail(struct bwd_reply *out, Bitwheel__V1__ErrorCode code,
		      const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- conn.c ------------------------------------------------------------- */

/* A connection over bev, which it owns from now on, even on failure; its
 * uid was counted by bwd_state_conn_open(). */
int bwd_conn_new(struct bwd_env *env, struct bufferevent *bev, uid_t uid,
		 pid_t pid, struct bwd_conn **out);
/* Close after the output drains (graceful) or at once. */
void bwd_conn_close(struct bwd_conn *c, bool flush);
/* Send a connection-level error and close once it is written. */
void bwd_conn_fail(struct bwd_conn *c, Bitwheel__V1__ErrorCode code,
		   const char *msg);
/* The Fired frame's fields of f, for bwp_frame_pack_response (dead: room
 * for a dead letter's history, which r then points to). */
void bwd_fired_of(const struct bwd_fire *f, struct bwp_response *r,
		  Bitwheel__V1__DeadLetter *dead);
/* Write a fire that is now in flight to the connection's member. */
void bwd_conn_deliver(struct bwd_conn *c, struct bwd_fire *f);
/* A held connection's covered output (conn.c): so many bytes each, in
 * order, waiting for a journal position, at most one per sync in flight.
 * Cover adds n bytes that wait for upto; release says how many bytes from
 * the front no longer wait once the journal is durable up to upto. */
struct bwd_marks {
	struct {
		size_t len;
		uint64_t upto;
	} mark[BWD_SYNCS_IN_FLIGHT];
	unsigned n;
};
void bwd_marks_cover(struct bwd_marks *m, size_t n, uint64_t upto);
size_t bwd_marks_release(struct bwd_marks *m, uint64_t upto);
/* Whether a connection in the list (head: env->held) holds output that no
 * sync has been asked for yet (bwd_store_commit's needed). */
bool bwd_conn_waiting(struct bwd_conn *head);
/* A sync of the journal began: what the connections in the list (head:
 * env->held) hold waits for the journal's position upto (store.c). */
void bwd_conn_cover(struct bwd_conn **head, uint64_t upto);
/* The journal is durable up to upto: what waited for no more goes out; a
 * connection leaves the list once it holds nothing more. */
void bwd_conn_release(struct bwd_conn **head, uint64_t upto);
/* The storage stayed down past BWD_HELD_DOWN_NS: what the connections in
 * the list hold is dropped, unsent, and each ends with a connection-level
 * STORAGE_UNAVAILABLE (msg); their fires in flight go back to the queue. */
void bwd_conn_drop_held(struct bwd_conn **head, const char *msg);
/* Unread output, all of it: the buffer, held, covered, staged. */
size_t bwd_conn_output(const struct bwd_conn *c);
/* env->more's callback: the deferred connections go on, in turn, while
 * the turn's budget lasts. */
void bwd_conn_run_deferred(struct bwd_env *env);
/* The next connection in env->conns. */
struct bwd_conn *bwd_conn_next(const struct bwd_conn *c);

/* ---- clock.c: wall-clock timers and clock steps ------------------------- */

/* Where a wall-clock deadline goes on CLOCK_MONOTONIC, the clocks read as
 * mono_now and real_now: mono_now when it is past (fires at once). */
uint64_t bwd_wall_place(uint64_t wall_ns, uint64_t mono_now, uint64_t real_now);
/* A wall-clock timer's instant (UTC ns); 0 for a monotonic timer. */
uint64_t bwd_wall_ns(const struct bwd_state *st, const struct bwd_timer *t);
/* CLOCK_BOOTTIME in ns. */
uint64_t bwd_boottime_ns(void);
/* The wall clock was stepped (boot: the boottime timerfd expired, maybe
 * at a resume): every armed wall-clock (boottime) timer placed again by
 * the clocks' offset now, marked late when the step passed it; a
 * boottime one only when the offset moved.  Then the boottime timerfd
 * is armed at the next boottime deadline. */
void bwd_state_clock_step(struct bwd_state *st, bool boot);
/* The time zones changed (the local one, or the tz database): the zone
 * cache is dropped, every calendar timer's spec parsed again (one whose
 * zone is gone is dropped, logged and counted lost; not journaled, so a
 * restart drops it again) and its next elapse placed. */
void bwd_state_zones_changed(struct bwd_state *st);
/* The step, resume and zone detectors in base's loop: a CLOCK_REALTIME
 * timerfd with TFD_TIMER_CANCEL_ON_SET (BWD_CLOCK_STEP after every
 * step), a CLOCK_BOOTTIME one (BWD_CLOCK_RESUME when it expires), and an
 * inotify of the local zone's file (TZ's, else /etc/localtime),
 * /etc/timezone and every directory of the tz database (BWD_CLOCK_ZONES
 * once they have been quiet for a second; without inotify, logged, only
 * SIGHUP tells).  0, or a negative errno (logged). */
enum bwd_clock_event { BWD_CLOCK_STEP, BWD_CLOCK_RESUME, BWD_CLOCK_ZONES };
struct bwd_clock;
int bwd_clock_open(struct event_base *base,
		   void (*on_step)(void *arg, enum bwd_clock_event what),
		   void *arg, struct bwd_clock **out);
/* st arms c's boottime timerfd from now on (NULL: no more). */
void bwd_state_clock_attach(struct bwd_state *st, struct bwd_clock *c);
void bwd_clock_free(struct bwd_clock *c);
/*
 * Calendar timers (clock.c).  bwd_cal_check: a Schedule's calendar c
 * (spec, base_ns, jitter, seed, grace) parsed and its first elapse after
 * base_ns found: *wall_ns its instant (jitter added), c->cost the bytes
 * the timer's calendar will be charged; 0, -EINVAL (err says what is
 * wrong), -ENOENT (no elapse after base_ns: err says so), -ENOMEM.
 * bwd_cal_seed: the jitter's seed of key in s: fixed, a function of the
 * host (its machine id), s's owner and name (anonymous: its number) and
 * the key; else a random one.  bwd_cal_info: t's calendar into out (NULL
 * for a timer without one), and the form a listing shows (normalized,
 * or as given when that is longer than BWD_CAL_TIMER_SPEC_MAX).
 */
int bwd_cal_check(struct bwd_calendar *c, uint64_t *wall_ns, char *err,
		  size_t errlen);
uint64_t bwd_cal_seed(const struct bwd_session *s, uint64_t key, bool fixed);
const char *bwd_cal_info(const struct bwd_state *st, const struct bwd_timer *t,
			 struct bwd_calendar *out);

/* ---- server.c ----------------------------------------------------------- */

/* The whole daemon: listen, serve until a signal, stop. */
int bwd_server_run(const struct bwd_options *opt);
/* A server with its state and loop but no socket, signals or systemd
 * notification: the fuzzer feeds it connections of its own. */
int bwd_server_new(const struct bwd_options *opt, struct bwd_server **out);
void bwd_server_free(struct bwd_server *srv);
/* Serve a client over bev (taken over, even on failure). */
int bwd_server_attach(struct bwd_server *srv, struct bufferevent *bev,
		      uid_t uid, pid_t pid);
struct bwd_env *bwd_server_env(struct bwd_server *srv);

#endif /* BWD_DAEMON_INTERNAL_H */
