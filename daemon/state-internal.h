/*
 * state-internal.h - what the state's files share (state.c says how the
 * state is split): struct bwd_state, the per-uid entry, the round-robin
 * session lists, and the functions each file offers the others.  Only
 * state.c, delivery.c, account.c and restore.c include it.
 */
#ifndef BWD_STATE_INTERNAL_H
#define BWD_STATE_INTERNAL_H

#include <stddef.h>

#include "daemon-internal.h"

/* A round-robin list of sessions, linked through one struct bwd_slink of
 * each (at offset off). */
struct bwd_slist {
	struct bwd_session *head, **tail;
};

/* The uids with sessions that may hand out a fire, served round-robin. */
struct bwd_ulist {
	struct bwd_uid *head, **tail;
};

/* One uid's use of the daemon (see "Budgets" above). */
struct bwd_uid {
	struct bwd_map_node node;  /* keyed by the uid                       */
	const struct bwd_budget *lim; /* its budgets; NULL: exempt (root)    */
	uint64_t conns;            /* accepted connections                   */
	uint64_t named;            /* named sessions                         */
	uint64_t sessions;         /* every session, anonymous and ending too */
	uint64_t timers;           /* pending timers                         */
	uint64_t fires;            /* undelivered fires: queued, in flight   */
	uint64_t periodic_mhz;     /* sum of 1/period over periodic timers   */
	uint64_t bytes;            /* its timers' and fires' costs, output   */
	/* Its share of struct bwd_state_stats (COUNT), and of each lane's
	 * counters (lane_count): what Stats shows it. */
	uint64_t queued, in_flight, consumers, dropped, acked, redelivered,
		 expired;
	struct bwd_lane_usage lane[2];
	uint64_t journal;          /* bytes its named sessions added to the
				      current journal generation            */
	/* Redelivery pacing: a token bucket, in milli-fires, as of pace_ns. */
	uint64_t pace_tokens, pace_ns;
	/* Its sessions in the state's work (delivery.c), and its place in
	 * the state's list of uids with such: in it while that is not empty. */
	struct bwd_slist work;
	struct bwd_uid *work_next, **work_pprev;
	/* Its sessions by id while listed, for its own listings (made at
	 * its first session). */
	struct bwd_map listed;
	/* Its overflow store (wheels.c): NULL, or a wheel with the timers
	 * the shared wheel's slots refused, of spill_bytes, and its place in
	 * the state's spilling list. */
	struct bw_dual *spill;
	size_t spill_bytes;
	struct bwd_uid *spill_next, **spill_pprev;
};

/* A figure of the state's and of session s's owner's share, by n. */
#define COUNT(s, field, n) do {						\
	(s)->state->stats.field += (uint64_t)(n);			\
	(s)->acct->field += (uint64_t)(n);				\
} while (0)

/* Size classes of 8 bytes whose freed blocks state.c keeps: 0 to 8 *
 * (BWD_SPARE_CLASSES - 1) bytes after the struct. */
#define BWD_SPARE_CLASSES 9

enum bwd_block { BWD_BLOCK_TIMER, BWD_BLOCK_FIRE };

struct bwd_state {
	struct bw_dual *wheel;     /* shared: what its slots take (wheels.c) */
	struct bwd_uid *spilling;  /* uids with an overflow store            */
	struct bw_counters spilled[2]; /* freed stores' counters, by lane    */
	uint64_t polled_ns;        /* the wheels' clock: their last poll     */
	struct bwd_map uids;       /* struct bwd_uid by uid                  */
	struct bwd_map sessions;
	struct bwd_map by_id;      /* live sessions by id: named (the state
				      files' numbers) and anonymous        */
	struct bwd_journal *journal;
	bool journal_over;         /* a uid passed its share in this generation */
	bool storage_down;         /* the store cannot write (store.c)       */
	struct bwd_session *ending;  /* anonymous sessions being torn down  */
	/* Uids with sessions that may have a fire to hand out (each uid's
	 * own list holds them), and sessions with fires to make (due
	 * lists), each served from the head. */
	struct bwd_ulist work;
	struct bwd_slist firing;
	struct bwd_map wall;       /* wall-clock timers' instants (clock.c) */
	/* Those placed at their instant (clock.c, "Near and far"); of those
	 * placed at a check since a step last placed them all, the least
	 * offset of CLOCK_REALTIME from CLOCK_MONOTONIC one was placed by,
	 * and the latest base of a calendar one. */
	struct bwd_wall *wall_near;
	int64_t wall_lo;
	uint64_t wall_base_hi;
	uint32_t wall_pass;        /* steps that placed timers again         */
	uint64_t wall_pass_real;   /* CLOCK_REALTIME at the last of them     */
	/* Boottime timers (clock.c): CLOCK_BOOTTIME - CLOCK_MONOTONIC when
	 * they were placed, where the resume detector is armed (UINT64_MAX:
	 * nowhere), and the detector (NULL: none yet). */
	uint64_t boot_off, boot_next;
	struct bwd_clock *clock;
	uint64_t next_id;
	bool restoring;            /* timers are not in the wheel yet        */
	const struct bwd_options *opt;
	const struct bwd_budgets *budgets; /* in force: opt's, or reread    */
	struct bwd_state_stats stats;
	/* Every client timer's fire, by lane: fired_at - deadline. */
	struct bwd_hist late[2];
	/* Delivery's (delivery.c, "Monitoring"): each fire's first hand-out
	 * - deadline, by lane; an Ack's arrival - its fire's hand-out. */
	struct bwd_hist wait[2], ack;
	struct bwd_hist deliveries; /* acknowledged fires' deliveries        */
	uint64_t held;             /* every uid's bytes                      */
	uint64_t seed;
	uint64_t (*now)(void *arg); /* the clock: bw_now_ns, or a test's     */
	void *now_arg;
	/* CLOCK_REALTIME and CLOCK_BOOTTIME as clock.c reads them: the
	 * host's, or a simulation's (bwd_state_set_wall_clocks). */
	uint64_t (*real)(void *arg), (*boot)(void *arg);
	void *wall_arg;
	/* Freed timers' and fires' blocks kept for the next ones (state.c,
	 * "Blocks"), by kind and payload size class, linked through their
	 * first word; nspare: how many of each kind. */
	void *spare[2][BWD_SPARE_CLASSES];
	uint32_t nspare[2];
};

/* Whether s's changes go to a journal: a named session's, with one (an
 * in-memory daemon has none), so that its records need be built. */
static inline bool bwd_journaled(const struct bwd_session *s)
{
	return s->name && s->state->journal;
}

static inline uint64_t bwd_state_now(const struct bwd_state *st)
{
	return st->now(st->now_arg);
}

static inline uint64_t bwd_state_real(const struct bwd_state *st)
{
	return st->real(st->wall_arg);
}

static inline uint64_t bwd_state_boot(const struct bwd_state *st)
{
	return st->boot(st->wall_arg);
}

static inline struct bwd_slink *bwd_slink_at(struct bwd_session *s, size_t off)
{
	return (struct bwd_slink *)(void *)((char *)s + off);
}

/* s joins l's tail, unless it is in already. */
static inline void bwd_slist_add(struct bwd_slist *l, struct bwd_session *s, size_t off)
{
	struct bwd_slink *k = bwd_slink_at(s, off);

	if (k->pprev)
		return;
	k->next = NULL;
	k->pprev = l->tail;
	*l->tail = s;
	l->tail = &k->next;
}

static inline void bwd_slist_remove(struct bwd_slist *l, struct bwd_session *s, size_t off)
{
	struct bwd_slink *k = bwd_slink_at(s, off);

	if (!k->pprev)
		return;
	*k->pprev = k->next;
	if (k->next)
		bwd_slink_at(k->next, off)->pprev = k->pprev;
	else
		l->tail = k->pprev;
	k->pprev = NULL;
}

/* ---- wheels.c: the shared wheel and each uid's overflow store ----------- */

/* Put t, whose deadline and lane are set, in the shared wheel, or where
 * its slots refuse it, in its owner's store; a wheel's error.  now_ns:
 * CLOCK_MONOTONIC now, which places a wall-clock timer near or far
 * (bwd_wall_arm_at; unread for another). */
int bwd_wheels_arm(struct bwd_state *st, struct bwd_timer *t, uint64_t now_ns);
void bwd_wheels_disarm(struct bwd_state *st, struct bwd_timer *t);
void bwd_wheels_poll(struct bwd_state *st, uint64_t now_ns, const struct bw_callbacks *cb);
int bwd_wheels_next_deadline(struct bwd_state *st, uint64_t *out_ns);
/* Free u's store, whatever it holds (its uid is ending, or it is empty). */
void bwd_wheels_drop(struct bwd_state *st, struct bwd_uid *u);

/* ---- clock.c: wall-clock timers ----------------------------------------- */

/* t becomes a wall-clock timer of instant wall_ns, or with cal a
 * calendar timer, whose instant is its next elapse after cal->base_ns and
 * its jitter, and whose calendar is charged to its owner (0, -ENOMEM, or
 * -EINVAL for a spec that does not parse: a record's); or stops being
 * one (nothing for a monotonic timer). */
int bwd_wall_add(struct bwd_state *st, struct bwd_timer *t, uint64_t wall_ns,
		 const struct bwd_calendar *cal);
void bwd_wall_remove(struct bwd_state *st, struct bwd_timer *t);
/* The wheel fired wall-clock timer t at now_ns: 0 when its clock reached
 * its instant (it fires; its deadline no later than now_ns), else where
 * the wheel is to hold it again (bwd_wall_arm_at of t->deadline_ns, which
 * is placed anew by the clocks' offset now, unless this was the check of
 * a far timer and no step has placed timers since). */
uint64_t bwd_wall_due(struct bwd_state *st, struct bwd_timer *t,
		      uint64_t now_ns);
/* How long before its instant a wall-clock timer is placed exactly. */
#define BWD_WALL_NEAR_NS 2000000000u
/* Where the wheel holds timer t (of deadline t->deadline_ns) at now_ns:
 * its deadline, or for a wall-clock or calendar timer due later than
 * BWD_WALL_NEAR_NS from now, its check that far before (clock.c). */
uint64_t bwd_wall_arm_at(struct bwd_state *st, struct bwd_timer *t,
			 uint64_t now_ns);
/* The instant a fire of t is due at (Fired.due_realtime_ns): a calendar
 * timer's elapse, without its jitter; another's instant. */
uint64_t bwd_wall_elapse(const struct bwd_state *st, const struct bwd_timer *t);
/* Periodic boottime timer t fired at now_ns: its boottime deadline the
 * next of its period after CLOCK_BOOTTIME, placed on the wheel: returned
 * (0: none fits in 64 bits). */
uint64_t bwd_boot_advance(struct bwd_state *st, struct bwd_timer *t,
			  uint64_t now_ns);
/* The next deadline of d, d + p, d + 2p, ... after now; 0 if none fits. */
uint64_t bwd_next_period(uint64_t deadline, uint64_t period, uint64_t now);
/* Calendar timer t fired: its base becomes the wall clock (or the elapse,
 * if later), its instant the next elapse after it, and its deadline that
 * placed on the wheel from now_ns: returned; 0 when it has no more. */
uint64_t bwd_cal_advance(struct bwd_state *st, struct bwd_timer *t,
			 uint64_t now_ns);
/* A TIMER record carries calendar c: its flags, spec, jitter, seed,
 * base and grace. */
void bwd_cal_record(const struct bwd_calendar *c, struct bwd_record *r);
/* A calendar timer's fire replayed from the journal: its base and elapse
 * as that FIRE record says. */
void bwd_cal_replayed(struct bwd_state *st, struct bwd_timer *t,
		      uint64_t elapse_ns, uint64_t base_ns);
/* Restored calendar timer t at the restore's end, the wall clock at
 * real: its next elapse after its base; when that passed, it fires at
 * once, late, or (missed by more than its grace) waits for the next
 * elapse after real.  false: it has no elapse left (free it). */
bool bwd_cal_restore(struct bwd_state *st, struct bwd_timer *t, uint64_t real);

/* The hash of a session's (owner, name): its place in the sessions' map,
 * a fixed jitter's seed. */
uint64_t bwd_name_hash(uid_t owner, const char *name);

/* ---- account.c: per-uid accounts ----------------------------------------- */

/* uid's entry: NULL when it has none (find), or no memory (get). */
struct bwd_uid *bwd_acct_find(const struct bwd_state *st, uid_t uid);
struct bwd_uid *bwd_acct_get(struct bwd_state *st, uid_t uid);
/* Forget u once nothing of its uid is left. */
void bwd_acct_put(struct bwd_state *st, struct bwd_uid *u);
/* The budgets of an owner (lim) that bind what caller does; NULL: none. */
const struct bwd_budget *bwd_acct_binding(const struct bwd_state *st, uid_t caller,
					  const struct bwd_budget *lim);
/* u's bytes change by n (and the state's total). */
void bwd_acct_charge(struct bwd_state *st, struct bwd_uid *u, int64_t n);
/* The most u may hold under lim (bwd_acct_binding's; NULL: none binds):
 * its bytes budget and its share of max_memory (account.c). */
uint64_t bwd_acct_cap(const struct bwd_state *st, const struct bwd_uid *u,
		      const struct bwd_budget *lim);
void bwd_acct_lane(const struct bwd_timer *t, size_t field, int64_t n);
/* A timer's lane counters in its owner's entry: the field's count by n. */
#define LANE(t, field, n) bwd_acct_lane((t), offsetof(struct bwd_lane_usage, field), (n))
/* Whether u may hand out one more taken-back fire at now; else *wait_ns
 * until it may (its redelivery bucket). */
bool bwd_acct_pace(struct bwd_uid *u, uint64_t now, uint64_t *wait_ns);
/* Whether u is past its journal share (never an exempt root); the bytes
 * of a record of u's named sessions, appended. */
bool bwd_acct_journal_over(const struct bwd_state *st, const struct bwd_uid *u);
void bwd_acct_journal(struct bwd_state *st, struct bwd_uid *u, uint64_t n);

/* ---- state.c: sessions, timers, the wheel ------------------------------- */

/* The memory of a timer (BWD_BLOCK_TIMER) or a fire (BWD_BLOCK_FIRE)
 * with tail bytes after it (its payload; a timer's: bwd_timer_tail): a
 * kept one, or malloc's; NULL without memory.  bwd_block_put gives it
 * back (kept, or freed). */
void *bwd_block_get(struct bwd_state *st, enum bwd_block kind, size_t tail);
void bwd_block_put(struct bwd_state *st, enum bwd_block kind, void *p,
		   size_t tail);
/* What a fire in flight adds to Stats' bytes. */
size_t bwd_fire_bytes(const struct bwd_fire *f);
/* Append a record of u's session (u NULL: the journal's own); journal_seq
 * a SENT or DONE of s's fire seq (named sessions alone). */
void bwd_state_journal(struct bwd_state *st, struct bwd_uid *u,
		       const struct bwd_record *r);
void bwd_state_journal_seq(struct bwd_session *s, enum bwd_rec_type type,
			   uint64_t seq);
/* The state's own timers (lingers, ack timeouts, holds, paces), in the
 * oneshot lane; *armed says whether one is in the wheel. */
void bwd_state_own_arm(struct bwd_state *st, struct bwd_due *d, uint64_t at,
		       bw_handle *h, bool *armed);
void bwd_state_own_disarm(struct bwd_state *st, bw_handle h, bool *armed);
struct bwd_session *bwd_session_find(struct bwd_state *st, uid_t owner,
				     const char *name);
struct bwd_session *bwd_session_by_id(struct bwd_state *st, uint64_t id);
int bwd_session_new(struct bwd_state *st, const char *name, uid_t uid,
		    uint64_t id, struct bwd_session **out);
/* The named session, created (journaled, lingering) if need be, with no
 * budget checked: 0 or -ENOMEM. */
int bwd_session_named(struct bwd_state *st, uid_t owner, const char *name,
		      struct bwd_session **out);
void bwd_session_free(struct bwd_session *s);
/* A named session with no members starts its linger. */
void bwd_session_linger(struct bwd_session *s);
/* A pending timer by key (fired ones waiting to be made are passed by). */
struct bwd_timer *bwd_timer_find(struct bwd_session *s, uint64_t key);
struct bwd_timer *bwd_timer_new(struct bwd_session *s,
				const struct bwd_schedule *req);
void bwd_timer_add(struct bwd_session *s, struct bwd_timer *t);
int bwd_timer_arm(struct bwd_state *st, struct bwd_timer *t);
void bwd_timer_free(struct bwd_state *st, struct bwd_timer *t);
/* What a fire at fired_ns does to t: its next deadline, 0 when done. */
uint64_t bwd_timer_advance(struct bwd_timer *t, uint64_t fired_ns);
/* The fire t makes at fired_ns, its count-th. */
struct bwd_fire bwd_timer_fire_of(const struct bwd_timer *t, uint64_t fired_ns,
				  uint64_t count);

/* ---- delivery.c: queues, consumers, hand-out ---------------------------- */

/* s joins the work list if it has a fire that may go (lazy removal). */
void bwd_work_add(struct bwd_session *s);
void bwd_work_remove(struct bwd_session *s);
/* m joins its session's ready consumers if it may take a fire. */
void bwd_ready_add(struct bwd_member *m);
void bwd_ready_remove(struct bwd_member *m);
/* Coalescing: release a hold that no longer has every consumer asking;
 * a client's timer fired at now (it may start, join or end a batch); a
 * batch goes at now. */
void bwd_hold_check(struct bwd_session *s);
void bwd_hold_add(struct bwd_session *s, const struct bwd_timer *t,
		  uint64_t now);
void bwd_hold_let_go(struct bwd_session *s, uint64_t now);
/* A dead letter's history, n of them (-1: one freed), held by s: its
 * count, and its bytes charged to s's owner like the fire's. */
void bwd_dead_count(struct bwd_session *s, int n);
/* A dead letter's history into a MOVE or QUEUED record. */
void bwd_dead_record(const struct bwd_dead *d, struct bwd_record *r);
/* A copy of f with its payload, in one block; NULL without memory. */
struct bwd_fire *bwd_fire_new(struct bwd_state *st, const struct bwd_fire *f);
/* A new fire counts (fire_count) and joins the queue (fire_link); both
 * at once: fire_enqueue.  count_queued: s's queued figures by n. */
void bwd_fire_count(struct bwd_session *s, const struct bwd_fire *f);
void bwd_fire_link(struct bwd_session *s, struct bwd_fire *f);
void bwd_fire_enqueue(struct bwd_session *s, struct bwd_fire *f);
void bwd_fire_count_queued(struct bwd_session *s, const struct bwd_fire *f,
			   int64_t n);
struct bwd_fire *bwd_fire_dequeue(struct bwd_session *s);
void bwd_fire_free(struct bwd_session *s, struct bwd_fire *f);
/* m's fires in flight go back, for why. */
void bwd_member_take_back(struct bwd_member *m, enum bwd_take_back why);
/* A delayed fire's time came: it joins its session's queue.  f, out of
 * any list, waits until f->ready_ns (at once without memory for its
 * timer).  A session's delayed fires are freed with it. */
void bwd_fire_ready(struct bwd_fire *f);
void bwd_fire_delay(struct bwd_session *s, struct bwd_fire *f);
void bwd_session_drop_delayed(struct bwd_session *s);
/* A consumer's map of its fires in flight by delivery number, made at
 * its attach (-ENOMEM) and freed with it, its buckets charged to its
 * session's owner; nothing for a producer. */
int bwd_member_flights_init(struct bwd_member *m);
void bwd_member_flights_fini(struct bwd_member *m);
/* m's ack timeout ran out at now. */
void bwd_member_ack_expired(struct bwd_member *m, uint64_t now_ns);

#endif
