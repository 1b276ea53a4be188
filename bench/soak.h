/*
 * soak.h - bwsoak's journal format and the model built from it.
 *
 * Every client process of the soak appends fixed-size records to its
 * slot's journal (one file per client slot, shared by the slot's
 * successive incarnations, O_APPEND, one write(2) per record), so that
 * what it did and saw survives its own SIGKILL.  The parent appends a
 * record when it kills a slot's process and when it drains the slot's
 * named session at the end.  Only one process writes a slot's journal at
 * a time, so the file's order is the order things happened in for that
 * slot: replies and fires in the order the connection delivered them.
 *
 * The same fold over a journal serves two readers: a restarted client
 * replays its slot's journal to learn which timers its session may still
 * hold (to cancel its periodic ones), and the parent accounts for every
 * timer at the end (soak_fold with a tally).
 *
 * Protocol 2: the named sessions are shared.  Slots come in groups of
 * four, slot % 4: 0 a producer of the group's session, 1 a producer and
 * a consumer, 2 a consumer only, 3 an anonymous session of its own (auto
 * ack, version 1's delivery).  A fire of a named session lands in
 * whichever consumer's journal took it, so the parent folds every
 * journal first, collecting named sessions' fires (struct soak_obs), and
 * then settles them against the timers of the slots that scheduled them
 * (soak_settle_fires), before soak_finish.  Each fire's copies are
 * settled together, in receipt order, with what became of each copy's
 * Release or Touch (struct soak_obs) and the group's Kicks (struct
 * soak_kick): "fires that fail", PROTOCOL.md section 8.
 */
#ifndef SOAK_H
#define SOAK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bwload.h"

/* A timer's identity: slot, incarnation, sequence.  It is the payload's
 * first 8 bytes, so a fire names the exact Schedule it came from even
 * when a key is reused by replace. */
#define SOAK_UID(slot, inc, seq) \
	(((uint64_t)(slot) << 48) | ((uint64_t)(inc) << 32) | (uint64_t)(seq))
#define SOAK_UID_SLOT(u) ((unsigned)((u) >> 48))
#define SOAK_UID_INC(u) ((unsigned)(((u) >> 32) & 0xffff))
#define SOAK_UID_SEQ(u) ((uint32_t)(u))
/* The parent's end-of-run drain of a named session. */
#define SOAK_INC_DRAIN 0xffffu

/* A slot's part (slot % 4). */
enum soak_role {
	SOAK_PRODUCER = 0,      /* schedules into its group's session       */
	SOAK_BOTH = 1,          /* schedules, consumes, acknowledges        */
	SOAK_CONSUMER = 2,      /* consumes and acknowledges only           */
	SOAK_ANON = 3,          /* an anonymous session of its own          */
};

enum soak_rec_type {
	SR_START = 1,   /* v0 pid, v1 seed                                   */
	SR_DIAL,        /* about to connect                                  */
	SR_CONN,        /* attached: v0 t before dialling, v1 resumed,
			   v2 timers, v3 queued, key: dropped                */
	SR_CONN_FAIL,   /* v0 bwc error, v1 server code                      */
	SR_SCHED,       /* intent, before sending: key, uid, v0 deadline
			   (absolute) or delay, v1 period, v2 SF_* flags     */
	SR_SCHED_OK,    /* key, uid, v0 deadline, v1 replaced                */
	SR_SCHED_ERR,   /* key, uid, v0 bwc error, v1 server code            */
	SR_CANCEL,      /* intent: key, uid (the timer the client meant)     */
	SR_CANCEL_OK,   /* key, uid, v0 pending                              */
	SR_CANCEL_ERR,  /* key, uid, v0 bwc error, v1 server code            */
	SR_FIRE,        /* key, uid (0: bad payload), v0 deadline,
			   v1 fired_at, v2 fire_count, v3 SFF_* flags        */
	SR_PAUSE,       /* stops reading                                     */
	SR_RESUME,
	SR_CLOSE,       /* closed its connection on purpose                  */
	SR_CLOSED,      /* the connection ended under it: v0 bwc error,
			   v1 server code (SHUTTING_DOWN: a restart)         */
	SR_END,         /* done, about to close (t)                          */
	SR_KILL,        /* written by the parent: SIGKILL sent at t          */
	SR_ACK,         /* a cumulative Ack of the fires journaled so far on
			   this connection: v0 delivery, v1 bwc result       */
	/* "Fires that fail" (PROTOCOL.md section 8).  A Release or a Touch
	 * is journaled right after the SR_FIRE it names (key, uid, v0 its
	 * fire_count), before it is sent; its outcome follows later. */
	SR_RELEASE,     /* intent: v1 delay, v2 the fire's delivery          */
	SR_RELEASED,    /* outcome: v1 SRL_* flags, v2 deliveries (the bwc
			   error with SRL_ERROR), v3 ready_ns                */
	SR_TOUCH,       /* intent: v1 timeout                                */
	SR_TOUCHED,     /* outcome: v1 SRL_TOUCHED or SRL_ERROR, v2 the ack
			   deadline (the bwc error with SRL_ERROR)           */
	SR_KICK,        /* intent: every key, v0 limit                       */
	SR_KICKED,      /* outcome: v0 kicked, v1 SRL_MORE or SRL_ERROR      */
	SR_POLICY,      /* written by the parent before the run: the group's
			   session's policy in force, v0 max_deliveries      */
	SR_NTYPES
};

/* SR_FIRE's v3: SFF_* flags in bits 0..7, Fired.deliveries in bits
 * 8..35, a dead letter's deliveries in its origin in bits 36..63. */
#define SFF_LATE 1u
#define SFF_REDELIVERED 2u
#define SFF_DEAD 4u             /* a dead letter, read from NAME.dead      */
#define SFF_DL_ORIGIN 8u        /* its dead_letter.session is the group's  */
#define SFF_MASK 0xffu
#define SFF_DELIVERIES(v) ((uint32_t)(((v) >> 8) & 0xfffffffu))
#define SFF_DL_DELIVERIES(v) ((uint32_t)((v) >> 36))
#define SFF_PACK(flags, deliveries, dl) \
	((uint64_t)(flags) | ((uint64_t)((deliveries) & 0xfffffffu) << 8) | \
	 ((uint64_t)((dl) & 0xfffffffu) << 36))

/* SR_RELEASED, SR_TOUCHED, SR_KICKED flags. */
#define SRL_RELEASED 1u         /* Release: released (back or dead)        */
#define SRL_DEAD 2u             /* Release: dead-lettered                  */
#define SRL_UNSENT 4u           /* the library refused it: nothing sent    */
#define SRL_ERROR 8u            /* no reply (connection ended) or refused  */
#define SRL_TOUCHED 16u         /* Touch: touched                          */
#define SRL_MORE 32u            /* Kick: more                              */

/* SR_SCHED flags. */
#define SF_PERIODIC 1u
#define SF_ABS 2u       /* v0 is an absolute deadline, else a delay      */
#define SF_REPLACE 4u
#define SF_DUP 8u       /* a key known pending, without replace: expects
			   DUPLICATE_KEY                                     */
#define SF_BURST 16u    /* sent just before a pause                       */

struct soak_rec {
	uint16_t type;
	uint16_t inc;
	uint32_t slot;
	uint64_t t;     /* CLOCK_MONOTONIC ns when written (or as stated)  */
	uint64_t key;
	uint64_t uid;
	uint64_t v[4];
};

_Static_assert(sizeof(struct soak_rec) == 64, "journal records are 64 bytes");

/* ---- the model ---------------------------------------------------------- */

enum soak_state {
	TS_INTENT = 1,  /* sent, no reply recorded (yet)                     */
	TS_LIVE,        /* acknowledged and pending                          */
	TS_MAYBE,       /* the client cannot know: reply lost with its
			   connection or its process, or a cancel/replace of
			   it whose reply was lost; may fire (once)          */
	TS_REFUSED,     /* an error reply (or the client refused to send)    */
	TS_FIRED,       /* oneshot, fired                                    */
	TS_CANCELLED,   /* a CancelReply pending=true took it                */
	TS_REPLACED,    /* a ScheduleReply replaced=true took it             */
	TS_VANISHED,    /* a reply said the key was not pending though the
			   client had seen no fire: a lost fire, unless one
			   was in flight at a connection break               */
};

struct soak_timer {
	uint64_t uid, key;
	uint64_t t_intent, when, period, deadline;
	uint64_t t_stop;        /* when the client asked it to stop          */
	uint64_t end_t;         /* no fire may be fired after this time, the
				   reply that cancelled or replaced it (one
				   fired before may still arrive after)      */
	uint64_t ack_pos, fire1_pos, last_pos;
	uint64_t last_count, last_deadline, last_fired;
	uint64_t next;          /* next uid on the same key (chain)          */
	uint64_t tail;          /* chain head only: the last uid on the key  */
	uint64_t t_cancel;      /* chain head only: last Cancel sent         */
	uint32_t conn;          /* the connection it was sent on             */
	uint32_t fires;
	uint32_t last_breaks;   /* the slot's break count at the last fire   */
	uint8_t flags;          /* SF_*                                      */
	uint8_t st;             /* enum soak_state                           */
	bool was_acked;
};

struct soak_conn {
	uint16_t inc;
	bool open, named;
	int end_kind;           /* SR_CLOSE, SR_CLOSED, SR_END, SR_KILL      */
	uint64_t dial, attach, end;
	uint64_t pause_open;    /* a pause still open when it ended (0 none) */
	uint64_t last_pause;    /* when the last pause began                 */
	uint64_t last_resume;
	uint64_t queued, fires, dropped, timers_at_attach;
	bool resumed;
};

struct soak_inc {
	struct soak_timer *t;   /* by sequence number, from 1            */
	uint32_t n, cap;
};

/* Counters and measurements over every journal (the parent's). */
struct soak_tally {
	uint64_t intents, scheduled, periodic_scheduled, refused,
		 refused_dup, refused_client, refused_other;
	uint64_t fires, oneshot_fires, periodic_fires, queued_fires,
		 delayed_fires;
	uint64_t fired_once, cancelled, replaced, cancel_sent, cancel_hit,
		 cancel_miss;
	uint64_t unknown, unknown_fired;
	uint64_t died_with_conn, inflight_excused, periodic_gaps_excused;
	/* Named sessions (manual acks): */
	uint64_t named_fires, named_redelivered, named_repeats,
		 named_handled_once, acks, ack_failures;
	/* Fires that fail: */
	uint64_t releases, released_back, released_dead, released_unknown,
		 released_not, released_again, released_again_marked,
		 lost_released, touches, touched, kicks, kicked, kicked_seen,
		 dead_letters, dead_unseen, policy_groups;
	uint32_t max_deliveries_seen;
	uint64_t excused_why[3]; /* grace window, pause cut short, unread queue */
	uint64_t lost, lost_periodic;
	uint64_t violations;
	uint64_t kills, closes, daemon_closes, conns, resumed, busy_retries,
		 pauses;
	uint64_t dropped_hello, left_pending;
	uint64_t skips;         /* periodic deadlines skipped (allowed)     */
	struct load_hist os_srv, os_recv, per_srv, per_recv;
	/* A few violations written out for the report. */
	char examples[8][240];
	unsigned nexamples;
};

/* What became of a Release of a journaled fire (struct soak_obs.rel). */
enum soak_rel {
	REL_NONE = 0,
	REL_SENT,               /* sent, outcome unknown (the connection or
				   the process ended first)                 */
	REL_BACK,               /* released: back to the queue after delay  */
	REL_DEAD,               /* released to the dead-letter session      */
	REL_NOT,                /* not sent: in flight still, acknowledged  */
	REL_GONE,               /* released = false: taken back already     */
};

/* A named session's fire as one consumer journaled it. */
struct soak_obs {
	uint64_t uid, key, d, f, cnt, recv, pos;
	uint64_t rel_ready;     /* REL_BACK: ReleaseReply.ready_ns          */
	uint64_t touch_by;      /* touched: the ack deadline TouchReply gave */
	uint32_t slot;          /* the journal it is in                     */
	uint32_t conn;          /* that slot's connection (index)           */
	uint32_t deliveries;    /* Fired.deliveries                         */
	uint32_t dl_deliveries; /* a dead letter's deliveries in its origin  */
	uint32_t rel_deliveries;/* ReleaseReply.deliveries                  */
	uint8_t flags;          /* SFF_*                                    */
	uint8_t rel;            /* enum soak_rel                            */
	bool touch_sent;
};

/* A Kick a session's member sent (every key). */
struct soak_kick {
	unsigned group;
	uint64_t t0;            /* intent, before sending                   */
	uint64_t t1;            /* its reply; UINT64_MAX: none came         */
};

struct soak_obsvec {
	struct soak_obs *v;
	size_t n, cap;
	struct soak_kick *kicks;
	size_t nkicks, capkicks;
	uint32_t max_deliveries[16]; /* by group (64 slots at most): its
				    policy, from SR_POLICY (0: unknown or
				    unlimited)                           */
};

/* A request waiting for its reply: a Schedule (uid) or a Cancel (key). */
struct soak_req {
	uint64_t key, uid;      /* uid 0: a Cancel                          */
};

struct soak_model {
	unsigned slot;
	bool named;
	unsigned group;         /* named: slot / 4, the session's slots     */
	struct soak_inc *incs;
	unsigned nincs;
	struct soak_conn *conns;
	unsigned nconns, capconns;
	uint64_t grace_ns;      /* in-flight window before a break          */
	uint64_t last_t;        /* the journal's last time                  */
	uint64_t records;
	int cur;                /* the open connection, -1 none             */
	bool dial_pending;      /* dialled, no SR_CONN recorded yet          */
	uint32_t breaks;        /* connections ended by a kill or a close    */
	struct soak_req *pend;  /* requests sent and not yet answered        */
	size_t npend, cappend;
	struct soak_tally *tally; /* NULL: replay only                      */
	struct soak_obsvec *obs;  /* named, with a tally: fires collected
				     here for soak_settle_fires             */
	size_t last_obs;        /* obs index of this journal's last fire    */
	bool has_last_obs;
	size_t kick_open;       /* kicks index + 1 of a Kick awaiting its
				   reply (0 none)                          */
	/* The drain's Kick: the fires it must then read on its connection. */
	uint64_t drain_kicked, drain_after_kick;
	bool drain_kick;
};

/*
 * Fold a slot's journal into m (zeroed by the caller, slot and named set).
 * With m->tally, every check is made and counted, and soak_finish must
 * follow.  -1 when the file cannot be read.
 */
int soak_fold(const char *path, struct soak_model *m);
/* Named sessions' fires, from every journal, against the timers of the
 * slots that scheduled them (models[i] is slot i's, n of them); before
 * soak_finish. */
void soak_settle_fires(struct soak_model *models, unsigned n,
		       struct soak_obsvec *obs, struct soak_tally *tally);
/* The end-of-run verdict on every timer of the slot. */
void soak_finish(struct soak_model *m);
struct soak_timer *soak_timer_get(struct soak_model *m, uint64_t uid);
void soak_model_free(struct soak_model *m);

#endif /* SOAK_H */
