/*
 * state.c - everything bitwheeld knows: sessions, their members, their
 * timers and fires, and the dual wheel that fires them.
 *
 * Layout.  Named sessions sit in one map keyed by a hash of their owner's
 * uid and their name: each uid has a namespace of its own (anonymous
 * sessions belong to their one member alone).  Every live session, named
 * or anonymous, also sits in a map by its number (by_id: the state files'
 * sid for a named one) and in its owner's (struct bwd_uid's listed),
 * which listings walk a page at a time (bwd_state_list_sessions,
 * bwd_map_scan): root's all of them, anyone else's only its own, so a
 * user's listing never crosses other users' sessions; a session leaves
 * both when it starts to end.  Each session
 * maps its clients' keys to struct bwd_timer, which carries the payload
 * inline and the wheel handle it was scheduled under.  A timer that comes
 * due becomes a struct bwd_fire (a copy of what it must carry) at the tail
 * of its session's queue, in two steps for a oneshot (below, "Firing");
 * from there the pump moves it to one consumer's
 * in-flight list, numbered with that member's next delivery number, until
 * an Ack (or, with auto_ack, its frame leaving the connection's buffer)
 * makes it done, or the member goes away or its ack timeout runs out and
 * it goes back to the front of the queue, marked redelivered.  PROTOCOL.md
 * section 8 draws that life.
 *
 * Who gets a fire.  A session keeps its consumers that may take one now -
 * fewer fires in flight than their window, and room in their connection's
 * output - in a FIFO (ready): the pump serves its head and puts it back at
 * the tail while it still may, so consumers take turns.  Sessions with
 * queued fires and a ready consumer sit in the state's work list, served
 * the same way, one fire per turn, so that no session's burst holds up
 * another's.  Entries leave those lists lazily, when found unable.
 *
 * Firing.  The wheel's callback does for a client's oneshot timer only
 * what must happen at the instant it fires: its lane counters and
 * lateness histogram (any timer's: fired_at - deadline, a binary search of
 * BWD_LATENESS_LE_NS, so that the histogram counts what the lane's fired
 * counter does), its FIRE
 * record (so the journal keeps the order of FIRE, CANCEL and TIMER records
 * as they happened), its seq and fired_ns; it marks the timer fired and
 * links it, in place, at the tail of its session's due list, and the
 * session into the state's firing list.  bwd_state_fire(), from the pump,
 * then makes the fires - the struct bwd_fire, the queue, the per-uid
 * counts and bytes, freeing the timer - one session at a time in turn,
 * FIRE_CHUNK or BWD_TURN_NS per loop turn: one session's burst of fires
 * due at one instant costs another session's fire a turn, not the burst.
 * A fired timer stays in its session's map until made, but is a fire
 * already: timer_find() passes it by (a Cancel says it was not pending, a
 * replace or a Schedule of its key adds a new timer), a snapshot writes it
 * as QUEUED after the queue, an ended session drops it with its fires.
 * Until made it counts as a timer in the budgets and Stats' timers (the
 * sum of timers and fires the budgets bound is the same either way; the
 * lane counters, like the wheel's, count it fired).  A periodic timer's
 * fire is made in the callback, as the timer must re-arm there; it joins
 * the due list, behind the oneshots, when there are some, so a session's
 * fires keep fire order.  Its rate budget does not bound a burst (long
 * periods may share an instant): --max-timers-per-uid does, as for all
 * fires before due lists.
 *
 * Lanes.  A client's timer goes to the wheel's lane its leeway picks
 * (bwd_lane_for: the coarsest whose bound fits it; "Leeway and lanes" in
 * daemon-internal.h), chosen once in timer_new and kept in t->lane for
 * its lane counters, its lateness histogram and every re-arm; the
 * leeway itself is kept as asked, so that a TIMER record carries it only
 * when the Schedule did.  The state's own timers go to the oneshot lane.
 *
 * Coalescing.  While every consumer of a session asked for it (Hello's
 * coalesce), a client's timer that fires with nothing of the session
 * waiting starts a batch: the session is held (out of the work list)
 * and a hold timer (BWD_DUE_HOLD, in the oneshot lane) armed at the
 * earliest end of the batch's windows (deadline + leeway) less that
 * lane's bound; fires that come meanwhile join the batch, moving the
 * timer earlier if their window ends sooner, or letting the batch go at
 * once if it ends before it could.  A fire due before the session last
 * let fires go (let_go_ns) missed that write - the coarse lane fires a
 * tolerant timer up to a tick after its deadline - and goes at once.  When the timer fires the session
 * rejoins the work list and the pump hands the whole batch out in one
 * turn: one write per consumer.  O(1) per fire (one wheel insert and
 * cancel when a batch's end moves).
 *
 * Redeliveries.  A fire taken back from a consumer (its ack timeout, its
 * connection gone) is marked taken_back; when one is at the head of its
 * session's queue, handing it out takes a token from its owner's bucket,
 * filled at the uid's periodic-rate budget (pace_take).  Without one the
 * session leaves the work list and a pace timer (BWD_DUE_PACE) brings it
 * back when the bucket will have one.  So consumers that read and never
 * acknowledge, or that come and go, redeliver at their own uid's rate,
 * while the pump's per-turn bound keeps the loop's turns short for
 * everyone else.  Fires read back at a restart are not paced.
 *
 * Nothing here does I/O or knows libevent: the server pulls what is to be
 * sent (bwd_state_next_delivery), and the state's own timers - a detached
 * session's linger, a consumer's ack timeout - are entries in the same
 * wheel as the clients' timers, told apart by struct bwd_due.
 *
 * Every change goes through a function here, and each change to a named
 * session appends one record to the journal (record.c lists them) as it
 * happens: TIMER, CANCEL, FIRE (a fire is owed), SENT (first handed to a
 * consumer), DONE (acknowledged or dropped).  Anonymous sessions are never
 * journaled.  A named session's fires carry a sequence number, so that
 * the journal can say which of them were done whatever order the queue
 * and the consumers took.
 *
 * The same records come back through bwd_state_apply() at start-up, from
 * a snapshot (bwd_state_dump() wrote it) and the journals after it; the
 * timers go into the wheel only once the last record is read
 * (bwd_state_restore_finish), so that replaying a timer's history costs
 * map operations, not wheel ones.
 *
 * Costs: schedule, cancel, each fire, each hand-out and each cumulative
 * or in-order ack are O(1) on average (a map lookup, a wheel operation, a
 * list move, one record); a fire is paid in two parts, the wheel's
 * callback (a list link and, named, a record: the wheel's own cost of a
 * timer in its overflow store dominates in a burst) and its making in
 * bwd_state_fire() (an allocation, a copy, a map removal and a free,
 * about 0.2-0.3 us); a lookup of a key with fired timers waiting walks
 * past them; a single ack out of order is O(the window);
 * taking back a member's fires is O(its flight); ending a session is
 * O(its timers + its fires), spread over loop turns TEARDOWN_CHUNK timers
 * and fires at a time (or what BWD_TURN_NS allows: taking a timer out of
 * an overflow store of millions costs microseconds, and 1,024 of them
 * held the loop for 7 ms) when an anonymous session ends, or a named one
 * expires, with more, so that one client leaving 100,000 timers behind
 * does not hold up everyone else's fires (an expired session loses its
 * name at once, so a new one may take it meanwhile);
 * applying a DONE is O(its distance from the queue's head), which is 0
 * when fires are done in order; a listing's page is O(its entries + the
 * map slots it passes), at most BWD_LIST_WORK of them.
 *
 * Budgets.  Each uid with anything in the daemon has a struct bwd_uid in
 * a map keyed by the uid, freed once its counts are all 0: connections
 * (counted from accept, bwd_state_conn_open, to conn_free), named
 * sessions, all sessions (what keeps s->acct valid), pending timers,
 * undelivered fires (queued or in flight), the periodic rate, the sum
 * of bwd_periodic_mhz() over its periodic timers, and its bytes: the
 * BWD_TIMER_COST of its timers, the BWD_FIRE_COST of its fires and its
 * connections' unread output (conn.c tells it, bwd_state_output).  The
 * state keeps the sum of every uid's bytes too (held), for max_memory.
 * Timers and the rate follow timer_add and free_timer; fires, enqueue_tail
 * (a new fire) and fire_free.  Admission checks them (bwd_state_conn_open,
 * a new named session in bwd_session_attach, bwd_timer_schedule) against
 * the *_per_uid limits, sparing uid 0, and the held bytes against
 * max_memory, sparing nobody; a periodic fire that would take its owner
 * past its bytes, or the daemon past max_memory, is dropped like one past
 * max_queued.  Recovery counts through the same paths and never checks,
 * so a uid whose journal holds more than lowered budgets admit is simply
 * over them until it shrinks.  Each check is one map lookup.  The same
 * entry keeps the uid's share of every Stats figure (COUNT beside each
 * daemon-wide one; its timers' lane counters beside the wheel's), so
 * that a uid's own Stats cost O(1) too.
 * The journal share: every record of a uid's named sessions adds its size
 * to the uid's count as it is appended (journal()), which the next
 * generation (bwd_state_set_journal) sets back to 0 for all; past
 * max_journal_per_uid, a Schedule on a named session or a new named
 * session is refused (OVER_BUDGET), sparing uid 0.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "daemon-internal.h"

/* Timers cancelled per loop turn when an anonymous session ends. */
#define TEARDOWN_CHUNK 1024
/* Fires made of due lists per loop turn (bwd_state_fire). */
#define FIRE_CHUNK 1024
/* Timers a wheel poll takes out of a lane's overflow heap, where a burst
 * due at one instant lands: a few milliseconds of work.  Measured with
 * 231,409 due at once (bench/results/burst.md): unbounded, another
 * client's Schedule waited up to 50 ms for the one long poll, and 9 ms
 * with this bound; the fires due just after the instant, which the heap
 * gives after the burst's, came 55-71 ms late instead of 49 (4,096 made
 * that 90 ms; 16,384 let the Schedule wait 14 ms). */
#define POLL_CHUNK 8192
#define REAP_CLOCK_EVERY 64

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
	/* Its sessions by id while listed, for its own listings (made at
	 * its first session). */
	struct bwd_map listed;
};

/* A figure of the state's and of session s's owner's share, by n. */
#define COUNT(s, field, n) do {						\
	(s)->state->stats.field += (uint64_t)(n);			\
	(s)->acct->field += (uint64_t)(n);				\
} while (0)

/* A round-robin list of sessions, linked through one struct bwd_slink of
 * each (at offset off). */
struct bwd_slist {
	struct bwd_session *head, **tail;
};

struct bwd_state {
	struct bw_dual *wheel;
	struct bwd_map uids;       /* struct bwd_uid by uid                  */
	struct bwd_map sessions;
	struct bwd_map by_id;      /* live sessions by id: named (the state
				      files' numbers) and anonymous        */
	struct bwd_journal *journal;
	struct bwd_session *ending;  /* anonymous sessions being torn down  */
	/* Sessions that may have a fire to hand out, and those with fires
	 * to make (due lists), each served from the head. */
	struct bwd_slist work, firing;
	uint64_t next_id;
	bool restoring;            /* timers are not in the wheel yet        */
	const struct bwd_options *opt;
	const struct bwd_budgets *budgets; /* in force: opt's, or reread    */
	struct bwd_state_stats stats;
	/* Every client timer's fire, by lane: fired_at - deadline. */
	struct bwd_hist late[2];
	uint64_t held;             /* every uid's bytes                      */
	uint64_t seed;
};

static uint64_t name_hash(uid_t owner, const char *name)
{
	uint64_t h = (0xcbf29ce484222325ull ^ (uint64_t)owner) * 0x100000001b3ull;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 0x100000001b3ull;
	return h;
}

uint64_t bwd_periodic_mhz(uint64_t period_ns)
{
	return period_ns ? 1000000000000ull / period_ns : 0;
}

/* ---- leeway and lanes (daemon-internal.h) ---------------------------------- */

uint64_t bwd_lane_late_ns(const struct bw_config *lane)
{
	return (uint64_t)lane->resolution_ms * lane->max_probes * 1000000u;
}

enum bw_lane bwd_lane_finest(const struct bw_dual_config *w)
{
	return bwd_lane_late_ns(&w->periodic) < bwd_lane_late_ns(&w->oneshot) ?
		BW_LANE_PERIODIC : BW_LANE_ONESHOT;
}

static const struct bw_config *lane_config(const struct bw_dual_config *w,
					   enum bw_lane lane)
{
	return lane == BW_LANE_PERIODIC ? &w->periodic : &w->oneshot;
}

uint64_t bwd_leeway(const struct bw_dual_config *w, uint64_t asked,
		    uint64_t period_ns)
{
	uint64_t floor;

	if (asked != BWD_LEEWAY_DEFAULT)
		return asked;
	if (!period_ns)
		return 0;
	floor = bwd_lane_late_ns(lane_config(w, bwd_lane_finest(w)));
	return period_ns / BWD_LEEWAY_DIVISOR > floor ?
		period_ns / BWD_LEEWAY_DIVISOR : floor;
}

enum bw_lane bwd_lane_for(const struct bw_dual_config *w, uint64_t leeway_ns)
{
	enum bw_lane fine = bwd_lane_finest(w);
	enum bw_lane coarse = fine == BW_LANE_ONESHOT ? BW_LANE_PERIODIC :
		BW_LANE_ONESHOT;

	return bwd_lane_late_ns(lane_config(w, coarse)) <= leeway_ns ? coarse : fine;
}

static struct bwd_uid *uid_find(const struct bwd_state *st, uid_t uid)
{
	struct bwd_map_node *n = bwd_map_find(&st->uids, (uint64_t)uid);

	return n ? bwd_container_of(n, struct bwd_uid, node) : NULL;
}

/* uid's entry, made if need be; NULL without memory. */
static struct bwd_uid *uid_get(struct bwd_state *st, uid_t uid)
{
	struct bwd_uid *u = uid_find(st, uid);

	if (u)
		return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->node.key = (uint64_t)uid;
	u->lim = bwd_budget_of(st->budgets, uid);
	bwd_map_insert(&st->uids, &u->node);
	return u;
}

/* Forget u once nothing of its uid is left. */
static void uid_put(struct bwd_state *st, struct bwd_uid *u)
{
	if (u->conns || u->sessions)
		return;
	bwd_map_remove(&st->uids, &u->node);
	bwd_map_fini(&u->listed);
	free(u);
}

/* The budgets of an owner (lim, its entry's) that bind what caller does:
 * none when the owner is exempt, or the caller is root acting in another
 * uid's namespace, unless root has budgets of its own. */
static const struct bwd_budget *binding(const struct bwd_state *st, uid_t caller,
					const struct bwd_budget *lim)
{
	if (caller == 0 && !bwd_budget_of(st->budgets, 0))
		return NULL;
	return lim;
}

int bwd_state_conn_open(struct bwd_state *st, uid_t uid)
{
	struct bwd_uid *u = uid_find(st, uid);
	const struct bwd_budget *lim = u ? u->lim : bwd_budget_of(st->budgets, uid);

	if (lim && (u ? u->conns : 0) >= lim->clients)
		return BITWHEEL__V1__ERROR_CODE__TOO_MANY_CLIENTS;
	u = uid_get(st, uid);
	if (!u)
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	u->conns++;
	return 0;
}

void bwd_state_conn_close(struct bwd_state *st, uid_t uid)
{
	struct bwd_uid *u = uid_find(st, uid);

	if (!u || !u->conns)
		return;
	u->conns--;
	uid_put(st, u);
}

/* u's bytes change by n. */
static void charge(struct bwd_state *st, struct bwd_uid *u, int64_t n)
{
	u->bytes += (uint64_t)n;
	st->held += (uint64_t)n;
}

const struct bwd_budgets *bwd_state_budgets(const struct bwd_state *st)
{
	return st->budgets;
}

void bwd_state_set_budgets(struct bwd_state *st, const struct bwd_budgets *b)
{
	st->budgets = b;
	for (size_t i = 0; i <= st->uids.mask; i++)
		for (struct bwd_map_node *n = st->uids.bucket[i]; n; n = n->next) {
			struct bwd_uid *u = bwd_container_of(n, struct bwd_uid, node);

			u->lim = bwd_budget_of(b, (uid_t)n->key);
		}
}

struct bwd_uid *bwd_state_uid(struct bwd_state *st, uid_t uid)
{
	return uid_find(st, uid);
}

void bwd_state_output(struct bwd_state *st, struct bwd_uid *u, int64_t n)
{
	charge(st, u, n);
}

uint64_t bwd_state_held(const struct bwd_state *st)
{
	return st->held;
}

void bwd_state_uid_usage(const struct bwd_state *st, uid_t uid,
			 struct bwd_uid_usage *out)
{
	const struct bwd_uid *u = uid_find(st, uid);

	memset(out, 0, sizeof(*out));
	if (!u)
		return;
	out->connections = u->conns;
	out->sessions = u->named;
	out->timers = u->timers + u->fires;
	out->periodic_mhz = u->periodic_mhz;
	out->journal = u->journal;
	out->bytes = u->bytes;
	out->queued = u->queued;
	out->in_flight = u->in_flight;
	out->consumers = u->consumers;
	out->dropped = u->dropped;
	out->acked = u->acked;
	out->redelivered = u->redelivered;
	out->expired = u->expired;
	memcpy(out->lane, u->lane, sizeof(out->lane));
}

/* A timer's lane counters in its owner's entry: the field's count by n. */
static void lane_count(const struct bwd_timer *t, size_t field, int64_t n)
{
	struct bwd_lane_usage *l =
		&t->session->acct->lane[t->lane];

	*(uint64_t *)((char *)l + field) += (uint64_t)n;
}
#define LANE(t, field, n) lane_count((t), offsetof(struct bwd_lane_usage, field), (n))

static size_t timer_bytes(const struct bwd_timer *t)
{
	return sizeof(*t) + t->payload_len;
}

static size_t fire_bytes(const struct bwd_fire *f)
{
	return sizeof(*f) + f->payload_len;
}

/* Append a record of one of u's sessions (NULL: the journal's own), and
 * count it to u's share of the generation; a failure leaves the journal
 * failed, which holds every reply back until the store has the state on
 * disk again (store.c). */
static void journal(struct bwd_state *st, struct bwd_uid *u,
		    const struct bwd_record *r)
{
	if (!st->journal)
		return;
	bwd_journal_append(st->journal, r);
	if (u)
		u->journal += bwd_record_size(r);
}

static void journal_seq(struct bwd_session *s, enum bwd_rec_type type,
			uint64_t seq)
{
	struct bwd_record r = { .type = type, .sid = s->id, .seq = seq };

	if (s->name)
		journal(s->state, s->acct, &r);
}

static void free_timer(struct bwd_state *st, struct bwd_timer *t)
{
	struct bwd_uid *u = t->session->acct;

	bwd_map_remove(&t->session->timers, &t->node);
	u->timers--;
	u->periodic_mhz -= bwd_periodic_mhz(t->period_ns);
	charge(st, u, -(int64_t)BWD_TIMER_COST(t->payload_len));
	st->stats.timers--;
	st->stats.bytes -= timer_bytes(t);
	free(t);
}

/* ---- the state's own timers ------------------------------------------------ */

static void own_arm(struct bwd_state *st, struct bwd_due *d, uint64_t at,
		    bw_handle *h, bool *armed)
{
	if (bw_dual_insert_oneshot(st->wheel, at, d, h)) {
		/* Only out of memory: the linger or ack timeout is then not
		 * enforced, which loses nothing. */
		bwd_log(BWD_LOG_ERR, "no memory for an internal timer");
		return;
	}
	*armed = true;
	st->stats.own_pending++;
	st->stats.own_inserted++;
}

static void own_disarm(struct bwd_state *st, bw_handle h, bool *armed)
{
	if (!*armed)
		return;
	*armed = false;
	bw_dual_cancel(st->wheel, h, NULL);
	st->stats.own_pending--;
	st->stats.own_cancelled++;
}

/* ---- work lists -------------------------------------------------------------- */

static bool member_may_take(const struct bwd_member *m)
{
	return m->room && m->flight < m->window;
}

static struct bwd_slink *slink(struct bwd_session *s, size_t off)
{
	return (struct bwd_slink *)(void *)((char *)s + off);
}

/* s joins l's tail, unless it is in already. */
static void slist_add(struct bwd_slist *l, struct bwd_session *s, size_t off)
{
	struct bwd_slink *k = slink(s, off);

	if (k->pprev)
		return;
	k->next = NULL;
	k->pprev = l->tail;
	*l->tail = s;
	l->tail = &k->next;
}

static void slist_remove(struct bwd_slist *l, struct bwd_session *s, size_t off)
{
	struct bwd_slink *k = slink(s, off);

	if (!k->pprev)
		return;
	*k->pprev = k->next;
	if (k->next)
		slink(k->next, off)->pprev = k->pprev;
	else
		l->tail = k->pprev;
	k->pprev = NULL;
}

#define WORK offsetof(struct bwd_session, work)
#define FIRING offsetof(struct bwd_session, firing)

static void work_add(struct bwd_session *s)
{
	if (s->queue_head && s->ready_head && !s->held && !s->paced)
		slist_add(&s->state->work, s, WORK);
}

static void work_remove(struct bwd_session *s)
{
	slist_remove(&s->state->work, s, WORK);
}

/* A consumer that may take a fire joins its session's turn. */
static void ready_add(struct bwd_member *m)
{
	struct bwd_session *s = m->session;

	if (m->ready_pprev || !m->consumer || !member_may_take(m))
		return;
	m->ready_next = NULL;
	if (s->ready_tail) {
		s->ready_tail->ready_next = m;
		m->ready_pprev = &s->ready_tail->ready_next;
	} else {
		s->ready_head = m;
		m->ready_pprev = &s->ready_head;
	}
	s->ready_tail = m;
	work_add(s);
}

static void ready_remove(struct bwd_member *m)
{
	struct bwd_session *s = m->session;

	if (!m->ready_pprev)
		return;
	*m->ready_pprev = m->ready_next;
	if (m->ready_next) {
		m->ready_next->ready_pprev = m->ready_pprev;
	} else {
		/* The tail was m: the new tail is whoever points at nothing
		 * now, the member whose ready_next m->ready_pprev is, or none. */
		s->ready_tail = m->ready_pprev == &s->ready_head ? NULL :
			bwd_container_of(m->ready_pprev, struct bwd_member, ready_next);
	}
	m->ready_pprev = NULL;
}

/* ---- coalescing ------------------------------------------------------------ */

static void hold_release(struct bwd_session *s)
{
	own_disarm(s->state, s->hold_handle, &s->hold_armed);
	s->held = false;
	s->hold_ns = UINT64_MAX;
	work_add(s);
}

/* Fires are held only while every consumer asked for it. */
static void hold_check(struct bwd_session *s)
{
	if (s->held && (!s->nconsumers || s->ncoalesce != s->nconsumers))
		hold_release(s);
}

/* A batch, or a fire whose window left no time to wait, goes at now.
 * Fires due by now belonged with it: one that its lane fires later (a
 * coarse lane fires within its tick) goes at once rather than start a
 * batch of its own and wait out its window. */
static void let_go(struct bwd_session *s, uint64_t now)
{
	s->let_go_ns = now;
	if (s->held)
		hold_release(s);
}

/*
 * A client's timer of s fired at now: while s coalesces, its fire waits
 * with the others held until the earliest end of their windows (deadline
 * + leeway), less the oneshot lane's bound, as the hold timer in that
 * lane may come that much late; a window that ends sooner than that lets
 * the held go at once.  A batch starts only when nothing is waiting: fires
 * let go already (queued for want of room or credit, or still in the due
 * list) never wait for later ones.
 */
static void hold_add(struct bwd_session *s, const struct bwd_timer *t,
		     uint64_t now)
{
	struct bwd_state *st = s->state;
	uint64_t leeway = bwd_leeway(&st->opt->wheel, t->leeway_ns, t->period_ns);
	uint64_t bound = bwd_lane_late_ns(&st->opt->wheel.oneshot), end, at;

	if (!s->nconsumers || s->ncoalesce != s->nconsumers ||
	    (!s->held && (s->queue_head || s->due_head ||
			  t->deadline_ns <= s->let_go_ns)))
		return;
	end = t->deadline_ns > UINT64_MAX - leeway ? UINT64_MAX :
		t->deadline_ns + leeway;
	at = end > bound ? end - bound : 0;
	if (at <= now) {
		let_go(s, now);
		return;
	}
	if (s->held && at >= s->hold_ns)
		return;
	own_disarm(st, s->hold_handle, &s->hold_armed);
	own_arm(st, &s->hold, at, &s->hold_handle, &s->hold_armed);
	if (!s->hold_armed) {
		/* No memory for the timer: no hold. */
		hold_release(s);
		return;
	}
	s->held = true;
	s->hold_ns = at;
	work_remove(s);
}

/* ---- fire queues ----------------------------------------------------------- */

static struct bwd_fire *fire_new(const struct bwd_fire *f)
{
	struct bwd_fire *q = malloc(sizeof(*q) + f->payload_len);

	if (!q)
		return NULL;
	*q = *f;
	q->next = NULL;
	q->payload = (const uint8_t *)(q + 1);
	/* A fire without payload may have a NULL pointer: no memcpy of it. */
	if (f->payload_len)
		memcpy(q + 1, f->payload, f->payload_len);
	return q;
}

static void count_queued(struct bwd_session *s, const struct bwd_fire *f,
			 int64_t n)
{
	s->queued += (uint64_t)n;
	COUNT(s, queued, n);
	s->state->stats.bytes += (uint64_t)n * fire_bytes(f);
}

/* A new fire counts (queued, its owner's fires and bytes) ... */
static void fire_count(struct bwd_session *s, const struct bwd_fire *f)
{
	s->acct->fires++;
	charge(s->state, s->acct, (int64_t)BWD_FIRE_COST(f->payload_len));
	count_queued(s, f, 1);
}

/* ... and joins the queue's tail, at once or after a wait in the due list. */
static void fire_link(struct bwd_session *s, struct bwd_fire *f)
{
	f->next = NULL;
	if (s->queue_tail)
		s->queue_tail->next = f;
	else
		s->queue_head = f;
	s->queue_tail = f;
	work_add(s);
}

/* A new fire (of a timer, or read back) joins the queue. */
static void enqueue_tail(struct bwd_session *s, struct bwd_fire *f)
{
	fire_count(s, f);
	fire_link(s, f);
}

static struct bwd_fire *dequeue(struct bwd_session *s)
{
	struct bwd_fire *f = s->queue_head;

	if (!f)
		return NULL;
	s->queue_head = f->next;
	if (!s->queue_head)
		s->queue_tail = NULL;
	count_queued(s, f, -1);
	f->next = NULL;
	return f;
}

/* Put the chain head..tail (linked through next) back at the front. */
static void requeue_front(struct bwd_session *s, struct bwd_fire *head,
			  struct bwd_fire *tail)
{
	for (struct bwd_fire *f = head; f; f = f->next)
		count_queued(s, f, 1);
	tail->next = s->queue_head;
	s->queue_head = head;
	if (!s->queue_tail)
		s->queue_tail = tail;
	work_add(s);
}

static void fire_free(struct bwd_session *s, struct bwd_fire *f)
{
	s->acct->fires--;
	charge(s->state, s->acct, -(int64_t)BWD_FIRE_COST(f->payload_len));
	free(f);
}

/* ---- fires in flight ------------------------------------------------------- */

/* f (in flight to m, unlinked by the caller) is done. */
static void flight_done(struct bwd_member *m, struct bwd_fire *f)
{
	struct bwd_session *s = m->session;
	struct bwd_state *st = s->state;

	journal_seq(s, BWD_REC_DONE, f->seq);
	m->flight--;
	s->in_flight--;
	COUNT(s, in_flight, -1);
	COUNT(s, acked, 1);
	st->stats.bytes -= fire_bytes(f);
	fire_free(s, f);
}

/* The fires in flight to m from its head up to `last` (NULL: all) go back
 * to the front of the session's queue, in delivery order; those whose
 * frame reached the socket whole are marked, since the consumer may have
 * read them.  One not written out (or only in part) cannot have been. */
static void take_back(struct bwd_member *m, struct bwd_fire *last)
{
	struct bwd_session *s = m->session;
	struct bwd_state *st = s->state;
	struct bwd_fire *head = m->flight_head, *tail = last ? last : m->flight_tail;
	uint64_t n = 0;

	if (!head)
		return;
	m->flight_head = tail->next;
	if (!m->flight_head)
		m->flight_tail = NULL;
	tail->next = NULL;
	for (struct bwd_fire *f = head; f; f = f->next) {
		f->redelivered |= f->wire_end <= m->drained;
		f->taken_back = true;
		st->stats.bytes -= fire_bytes(f);
		n++;
	}
	m->flight -= n;
	s->in_flight -= n;
	COUNT(s, in_flight, -(int64_t)n);
	COUNT(s, redelivered, n);
	requeue_front(s, head, tail);
}

static void ack_timer_arm(struct bwd_member *m)
{
	if (m->ack_armed || !m->flight_head || !m->ack_timeout_ns)
		return;
	own_arm(m->session->state, &m->due, m->flight_head->take_back_ns,
		&m->ack_handle, &m->ack_armed);
}

/* The ack timeout: what m has held too long goes back. */
static void ack_expired(struct bwd_member *m, uint64_t now_ns)
{
	struct bwd_fire *last = NULL;

	m->ack_armed = false;
	for (struct bwd_fire *f = m->flight_head; f && f->take_back_ns <= now_ns;
	     f = f->next)
		last = f;
	if (last) {
		bwd_log(BWD_LOG_DEBUG, "a consumer of session '%s' held fires past its ack timeout: taken back",
			m->session->name ? m->session->name : "(anonymous)");
		take_back(m, last);
	}
	ack_timer_arm(m);
	ready_add(m);
}

bool bwd_state_has_work(const struct bwd_state *st)
{
	return st->work.head != NULL;
}

/* ---- redeliveries ---------------------------------------------------------- */

/*
 * Whether u may hand out one more taken-back fire at now; if not, *wait_ns
 * until it may.  A token bucket filled at u's periodic-rate budget (at
 * least BWD_MIN_REDELIVERY_MHZ), holding a second's worth: a consumer that
 * never acknowledges, or comes and goes, costs its own uid's rate, not
 * the host's loop.  Root, without a budget, is not paced.
 */
static bool pace_take(struct bwd_uid *u, uint64_t now, uint64_t *wait_ns)
{
	uint64_t rate, dt;

	if (!u->lim || u->lim->periodic_mhz == UINT64_MAX)
		return true;
	rate = u->lim->periodic_mhz > BWD_MIN_REDELIVERY_MHZ ?
		u->lim->periodic_mhz : BWD_MIN_REDELIVERY_MHZ;
	dt = now - u->pace_ns < 1000000000u ? now - u->pace_ns : 1000000000u;
	u->pace_tokens += (uint64_t)((unsigned __int128)dt * rate / 1000000000u);
	if (u->pace_tokens > rate)
		u->pace_tokens = rate;
	u->pace_ns = now;
	if (u->pace_tokens >= 1000u) {
		u->pace_tokens -= 1000u;
		return true;
	}
	*wait_ns = (uint64_t)((unsigned __int128)(1000u - u->pace_tokens) *
			      1000000000u / rate) + 1;
	return false;
}

/* s's head is a taken-back fire its owner may not hand out yet: s leaves
 * the work list until then.  False when no timer can be had (the fire
 * then goes unpaced: nothing is lost for want of memory). */
static bool pace_wait(struct bwd_session *s, uint64_t now)
{
	uint64_t wait;
	bool armed = false;

	if (pace_take(s->acct, now, &wait))
		return false;
	own_arm(s->state, &s->pace, now + wait, &s->pace_handle, &armed);
	if (!armed)
		return false;
	s->paced = true;
	work_remove(s);
	return true;
}

struct bwd_fire *bwd_state_next_delivery(struct bwd_state *st,
					 struct bwd_member **out)
{
	struct bwd_session *s;

	while ((s = st->work.head)) {
		struct bwd_member *m = s->ready_head;
		struct bwd_fire *f;

		if (!s->queue_head || !m || s->held || s->paced) {
			work_remove(s);
			continue;
		}
		if (s->queue_head->taken_back && pace_wait(s, bw_now_ns()))
			continue;
		ready_remove(m);
		if (!member_may_take(m))
			continue;
		f = dequeue(s);
		f->taken_back = false;
		f->delivery = ++m->last_delivery;
		/* Not written yet: no drain may complete it (auto_ack) before
		 * the connection says where its frame ends. */
		f->wire_end = UINT64_MAX;
		if (m->flight_tail)
			m->flight_tail->next = f;
		else
			m->flight_head = f;
		m->flight_tail = f;
		m->flight++;
		s->in_flight++;
		COUNT(s, in_flight, 1);
		st->stats.bytes += fire_bytes(f);
		if (!f->sent) {
			journal_seq(s, BWD_REC_SENT, f->seq);
			f->sent = true;
		}
		if (m->ack_timeout_ns) {
			uint64_t now = bw_now_ns();

			f->take_back_ns = now > UINT64_MAX - m->ack_timeout_ns ?
				UINT64_MAX : now + m->ack_timeout_ns;
			ack_timer_arm(m);
		}
		ready_add(m);
		/* The next turn is another session's. */
		work_remove(s);
		work_add(s);
		*out = m;
		return f;
	}
	return NULL;
}

int bwd_member_ack(struct bwd_member *m, uint64_t delivery, bool cumulative,
		   uint64_t *acked)
{
	struct bwd_fire *f, **pp;
	uint64_t n = 0;

	*acked = 0;
	if (delivery == 0 || delivery > m->last_delivery)
		return BITWHEEL__V1__ERROR_CODE__BAD_REQUEST;
	if (cumulative) {
		while ((f = m->flight_head) && f->delivery <= delivery) {
			m->flight_head = f->next;
			flight_done(m, f);
			n++;
		}
		if (!m->flight_head)
			m->flight_tail = NULL;
	} else {
		struct bwd_fire *prev = NULL;

		for (pp = &m->flight_head; (f = *pp) && f->delivery < delivery;
		     pp = &f->next)
			prev = f;
		if (f && f->delivery == delivery) {
			*pp = f->next;
			if (m->flight_tail == f)
				m->flight_tail = prev;
			flight_done(m, f);
			n = 1;
		}
	}
	*acked = n;
	if (n)
		ready_add(m);
	return 0;
}

void bwd_member_written(struct bwd_member *m, uint64_t drained)
{
	struct bwd_fire *f;
	bool any = false;

	m->drained = drained;
	if (!m->auto_ack)
		return;
	while ((f = m->flight_head) && f->wire_end <= drained) {
		m->flight_head = f->next;
		flight_done(m, f);
		any = true;
	}
	if (!m->flight_head)
		m->flight_tail = NULL;
	if (any)
		ready_add(m);
}

void bwd_member_set_room(struct bwd_member *m, bool room)
{
	m->room = room;
	if (room)
		ready_add(m);
}

/* ---- the wheel's callbacks ----------------------------------------------- */

/* The next deadline of d, d + p, d + 2p, ... after now; 0 if none fits. */
static uint64_t next_period(uint64_t deadline, uint64_t period, uint64_t now)
{
	uint64_t k = now >= deadline ? (now - deadline) / period + 1 : 1;

	if (k > (UINT64_MAX - deadline) / period)
		return 0;
	return deadline + k * period;
}

/* What a fire does to its timer: the next deadline, 0 when it is done. */
static uint64_t advance(struct bwd_timer *t, uint64_t fired_ns)
{
	uint64_t next = 0;

	if (t->period_ns)
		next = next_period(t->deadline_ns, t->period_ns, fired_ns);
	if (next)
		t->deadline_ns = next;
	return next;
}

static void session_expire(struct bwd_session *s);

/* A periodic fire past max_queued, its owner's bytes or max_memory is
 * dropped: its timer stays armed. */
static bool over_queue(const struct bwd_session *s, const struct bwd_timer *t)
{
	const struct bwd_limits *l = &s->state->opt->limits;
	const struct bwd_budget *lim = s->acct->lim;
	uint64_t cost = BWD_FIRE_COST(t->payload_len);

	return s->queued + s->in_flight >= l->max_queued ||
	       s->state->held + cost > l->max_memory ||
	       (lim && s->acct->bytes + cost > lim->bytes);
}

/* What t's fire carries, fired at fired_ns as its count-th. */
static struct bwd_fire fire_of(const struct bwd_timer *t, uint64_t fired_ns,
			       uint64_t count)
{
	return (struct bwd_fire){
		.due.kind = BWD_DUE_FIRE,
		.key = t->node.key,
		.deadline_ns = t->deadline_ns,
		.fired_ns = fired_ns,
		.count = count,
		.late = t->late,
		.has_payload = t->has_payload,
		.payload_len = t->payload_len,
		.payload = t->payload,
	};
}

/* s owes the fire f from now on: numbered and journaled (named only). */
static void journal_fire(struct bwd_session *s, struct bwd_fire *f)
{
	struct bwd_record r = {
		.type = BWD_REC_FIRE, .sid = s->id, .key = f->key,
		.deadline_ns = f->deadline_ns, .count = f->count,
		.fired_ns = f->fired_ns, .flags = f->late ? BWD_RECF_LATE : 0,
	};

	if (!s->name)
		return;
	f->seq = r.seq = s->next_seq++;
	journal(s->state, s->acct, &r);
}

static void fire_lost(struct bwd_session *s)
{
	bwd_log(BWD_LOG_ERR, "out of memory: a fire of session '%s' is lost",
		s->name ? s->name : "(anonymous)");
	s->dropped++;
	COUNT(s, dropped, 1);
}

/* d joins s's due list, and s the sessions with fires to make. */
static void due_add(struct bwd_session *s, struct bwd_due *d)
{
	d->next = NULL;
	if (s->due_tail)
		s->due_tail->next = d;
	else
		s->due_head = d;
	s->due_tail = d;
	slist_add(&s->state->firing, s, FIRING);
}

/* The wheel fired a client's oneshot timer: what costs the wheel's pace
 * only.  Its fire is owed (journaled now, so that the journal's order of
 * FIRE, CANCEL and TIMER records is the order things happened), and it
 * waits in the due list for bwd_state_fire() to make it. */
static void oneshot_fired(struct bwd_timer *t, uint64_t now_ns)
{
	struct bwd_fire f = fire_of(t, now_ns, 0);

	journal_fire(t->session, &f);
	t->seq = f.seq;
	t->fired_ns = now_ns;
	t->fired = true;
	due_add(t->session, &t->due);
}

/*
 * A periodic timer fired: its fire is made at once, as before due lists
 * existed, and waits behind the session's fired oneshots if it has any
 * (fire order).  Making it at once is bounded by the owner's periodic
 * rate only over time: timers of long periods may all come due at one
 * instant, which the per-uid timer budget bounds.
 */
static uint64_t periodic_fired(struct bwd_state *st, struct bwd_timer *t,
			       uint64_t now_ns)
{
	struct bwd_session *s = t->session;
	struct bwd_fire tmpl = fire_of(t, now_ns, ++t->count), *f;
	uint64_t next;

	t->late = false;
	if (over_queue(s, t)) {
		s->dropped++;
		COUNT(s, dropped, 1);
	} else if ((f = fire_new(&tmpl))) {
		journal_fire(s, f);
		if (s->due_head) {
			fire_count(s, f);
			due_add(s, &f->due);
		} else {
			enqueue_tail(s, f);
		}
	} else {
		fire_lost(s);
	}
	next = advance(t, now_ns);
	if (!next) {
		LANE(t, pending, -1);
		free_timer(st, t);
	}
	return next;
}

static uint64_t on_fire(void *data, uint64_t now_ns, void *ctx)
{
	struct bwd_state *st = ctx;
	struct bwd_due *d = data;

	if (d->kind == BWD_DUE_TIMER) {
		static const uint64_t le[BWD_LATENESS_BOUNDS] = BWD_LATENESS_LE_NS;
		struct bwd_timer *t = bwd_container_of(d, struct bwd_timer, due);

		LANE(t, fired, 1);
		bwd_hist_add(&st->late[t->lane],
			     le, BWD_LATENESS_BOUNDS,
			     now_ns > t->deadline_ns ? now_ns - t->deadline_ns : 0);
		if (!t->session->ending)
			hold_add(t->session, t, now_ns);
		if (t->period_ns && !t->session->ending)
			return periodic_fired(st, t, now_ns);
		LANE(t, pending, -1);
		if (t->session->ending)
			free_timer(st, t);
		else
			oneshot_fired(t, now_ns);
		return 0;
	}
	st->stats.own_pending--;
	st->stats.own_fired++;
	if (d->kind == BWD_DUE_ACK) {
		ack_expired(bwd_container_of(d, struct bwd_member, due), now_ns);
	} else if (d->kind == BWD_DUE_HOLD) {
		struct bwd_session *s = bwd_container_of(d, struct bwd_session, hold);

		s->hold_armed = false;
		let_go(s, now_ns);
	} else if (d->kind == BWD_DUE_PACE) {
		struct bwd_session *s = bwd_container_of(d, struct bwd_session, pace);

		s->paced = false;
		work_add(s);
	} else {
		struct bwd_session *s = bwd_container_of(d, struct bwd_session, linger);

		s->lingering = false;
		session_expire(s);
	}
	return 0;
}

/* The head of s's due list joins its queue: a fired timer becomes its
 * fire (numbered as journaled) and goes. */
static void due_make(struct bwd_session *s)
{
	struct bwd_due *d = s->due_head;
	struct bwd_timer *t;
	struct bwd_fire tmpl, *f;

	s->due_head = d->next;
	if (!s->due_head)
		s->due_tail = NULL;
	if (d->kind == BWD_DUE_FIRE) {
		fire_link(s, bwd_container_of(d, struct bwd_fire, due));
		return;
	}
	t = bwd_container_of(d, struct bwd_timer, due);
	tmpl = fire_of(t, t->fired_ns, 0);
	tmpl.seq = t->seq;
	if ((f = fire_new(&tmpl))) {
		enqueue_tail(s, f);
	} else {
		/* Journaled as owed: journaled as dropped too. */
		journal_seq(s, BWD_REC_DONE, t->seq);
		fire_lost(s);
	}
	free_timer(s->state, t);
}

/* A session that ends drops its due list: its fires here, its timers with
 * the rest of its map. */
static void due_drop(struct bwd_session *s)
{
	struct bwd_due *d;

	while ((d = s->due_head)) {
		s->due_head = d->next;
		if (d->kind == BWD_DUE_FIRE) {
			struct bwd_fire *f = bwd_container_of(d, struct bwd_fire, due);

			count_queued(s, f, -1);
			fire_free(s, f);
		}
	}
	s->due_tail = NULL;
	slist_remove(&s->state->firing, s, FIRING);
}

bool bwd_state_fire(struct bwd_state *st)
{
	size_t budget = FIRE_CHUNK;
	struct bwd_session *s;
	uint64_t start;

	if (!st->firing.head)
		return false;
	start = bw_now_ns();
	while (budget && (s = st->firing.head)) {
		due_make(s);
		/* The next fire made is another session's. */
		slist_remove(&st->firing, s, FIRING);
		if (s->due_head)
			slist_add(&st->firing, s, FIRING);
		if (--budget % REAP_CLOCK_EVERY == 0 &&
		    bw_now_ns() - start >= BWD_TURN_NS)
			budget = 0;
	}
	return st->firing.head != NULL;
}

/* Only a failed allocation in the overflow store gets here. */
static void on_drop(void *data, int reason, void *ctx)
{
	struct bwd_due *d = data;

	bwd_log(BWD_LOG_ERR, "timer lost by the wheel: %s", bw_strerror(reason));
	if (d->kind == BWD_DUE_TIMER) {
		struct bwd_timer *t = bwd_container_of(d, struct bwd_timer, due);

		LANE(t, lost, 1);
		LANE(t, pending, -1);
		free_timer(ctx, t);
	}
}

/* ---- state ----------------------------------------------------------------- */

int bwd_state_new(const struct bwd_options *opt, uint64_t now_ns,
		  struct bwd_state **out)
{
	struct bwd_state *st = calloc(1, sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	st->opt = opt;
	st->budgets = &opt->budgets;
	st->work.tail = &st->work.head;
	st->firing.tail = &st->firing.head;
	if (getrandom(&st->seed, sizeof(st->seed), 0) != sizeof(st->seed))
		st->seed = now_ns;
	st->next_id = 1;
	err = bwd_map_init(&st->sessions, st->seed);
	if (!err)
		err = bwd_map_init(&st->by_id, st->seed);
	if (!err)
		err = bwd_map_init(&st->uids, st->seed);
	if (err)
		goto fail;
	err = bw_dual_new(&opt->wheel, now_ns, &st->wheel);
	if (err) {
		bwd_log(BWD_LOG_ERR, "cannot create the wheel: %s", bw_strerror(err));
		err = -ENOMEM;
		goto fail;
	}
	/* A burst at one instant overflows into the lanes' heaps; a poll
	 * takes a turn's share of it, and the rest comes due again at once,
	 * after the loop has served everyone else. */
	bw_dual_set_poll_limit(st->wheel, POLL_CHUNK);
	*out = st;
	return 0;
fail:
	bwd_state_free(st);
	return err;
}

static void session_free(struct bwd_session *s);

void bwd_state_free(struct bwd_state *st)
{
	if (!st)
		return;
	while (st->ending) {
		struct bwd_session *s = st->ending;

		st->ending = s->next_ending;
		session_free(s);
	}
	if (st->sessions.bucket) {
		for (size_t b = 0; b <= st->sessions.mask; b++)
			while (st->sessions.bucket[b])
				session_free(bwd_container_of(st->sessions.bucket[b],
							  struct bwd_session, node));
		bwd_map_fini(&st->sessions);
	}
	bwd_map_fini(&st->by_id);
	/* Only connections still counted are left. */
	if (st->uids.bucket) {
		for (size_t b = 0; b <= st->uids.mask; b++)
			while (st->uids.bucket[b]) {
				struct bwd_map_node *n = st->uids.bucket[b];

				bwd_map_remove(&st->uids, n);
				bwd_map_fini(&bwd_container_of(n, struct bwd_uid, node)->listed);
				free(bwd_container_of(n, struct bwd_uid, node));
			}
		bwd_map_fini(&st->uids);
	}
	bw_dual_free(st->wheel);
	free(st);
}

void bwd_state_poll(struct bwd_state *st, uint64_t now_ns)
{
	struct bw_callbacks cb = { on_fire, on_drop, st };

	bw_dual_poll(st->wheel, now_ns, &cb, NULL);
}

int bwd_state_next_deadline(struct bwd_state *st, uint64_t *out_ns)
{
	return bw_dual_next_deadline(st->wheel, out_ns);
}

void bwd_state_stats(const struct bwd_state *st, struct bwd_state_stats *out)
{
	*out = st->stats;
	out->sessions = st->sessions.count;
	out->bytes += bw_dual_footprint(st->wheel) + bwd_map_bytes(&st->sessions);
}

struct bw_dual *bwd_state_wheel(struct bwd_state *st)
{
	return st->wheel;
}

const struct bwd_hist *bwd_state_lateness(const struct bwd_state *st,
					  unsigned lane)
{
	return &st->late[lane];
}

/* ---- sessions -------------------------------------------------------------- */

static struct bwd_session *session_find(struct bwd_state *st, uid_t owner,
					const char *name)
{
	uint64_t h = name_hash(owner, name);

	for (struct bwd_map_node *n = bwd_map_find(&st->sessions, h); n;
	     n = bwd_map_next(n->next, h)) {
		struct bwd_session *s = bwd_container_of(n, struct bwd_session, node);

		if (s->owner == owner && strcmp(s->name, name) == 0)
			return s;
	}
	return NULL;
}

static struct bwd_session *session_by_id(struct bwd_state *st, uint64_t id)
{
	struct bwd_map_node *n = bwd_map_find(&st->by_id, id);

	return n ? bwd_container_of(n, struct bwd_session, id_node) : NULL;
}

/* id 0: the next free one. */
static int session_new(struct bwd_state *st, const char *name, uid_t uid,
		       uint64_t id, struct bwd_session **out)
{
	struct bwd_session *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->acct = uid_get(st, uid);
	if (!s->acct) {
		free(s);
		return -ENOMEM;
	}
	s->acct->sessions++;
	if (!s->acct->listed.bucket && bwd_map_init(&s->acct->listed, st->seed))
		goto fail;
	s->state = st;
	s->owner = uid;
	s->linger.kind = BWD_DUE_LINGER;
	s->hold.kind = BWD_DUE_HOLD;
	s->pace.kind = BWD_DUE_PACE;
	if (bwd_map_init(&s->timers, st->seed))
		goto fail;
	if (name) {
		s->name = strdup(name);
		if (!s->name)
			goto fail;
		s->node.key = name_hash(uid, name);
		bwd_map_insert(&st->sessions, &s->node);
		st->stats.bytes += strlen(name) + 1;
		s->acct->named++;
	}
	/* Anonymous sessions take numbers too, for listings: a gap in the
	 * named ones' means nothing. */
	s->id = s->id_node.key = s->uid_node.key = id ? id : st->next_id;
	if (s->id >= st->next_id)
		st->next_id = s->id + 1;
	bwd_map_insert(&st->by_id, &s->id_node);
	bwd_map_insert(&s->acct->listed, &s->uid_node);
	s->listed = true;
	st->stats.bytes += sizeof(*s);
	*out = s;
	return 0;
fail:
	free(s->name);
	bwd_map_fini(&s->timers);
	s->acct->sessions--;
	uid_put(st, s->acct);
	free(s);
	return -ENOMEM;
}

static void log_fires(const struct bwd_fire *f, const char *what)
{
	for (; f; f = f->next)
		bwd_log(BWD_LOG_DEBUG, "  %s: key %" PRIu64 " deadline %" PRIu64 " count %" PRIu64,
			what, f->key, f->deadline_ns, f->count);
}

/* Each pending timer's key and deadline, and each undelivered fire's:
 * debug level only, like every key the daemon logs. */
static void log_keys(const struct bwd_session *s)
{
	for (size_t b = 0; b <= s->timers.mask; b++) {
		for (struct bwd_map_node *n = s->timers.bucket[b]; n; n = n->next) {
			const struct bwd_timer *t = bwd_container_of(n, struct bwd_timer, node);

			bwd_log(BWD_LOG_DEBUG, "  pending: key %" PRIu64 " deadline %" PRIu64 " period %" PRIu64,
				n->key, t->deadline_ns, t->period_ns);
		}
	}
	for (const struct bwd_member *m = s->members; m; m = m->next)
		log_fires(m->flight_head, "in flight");
	log_fires(s->queue_head, "undelivered");
}

void bwd_state_log_pending(const struct bwd_state *st, bool kept)
{
	for (size_t b = 0; b <= st->sessions.mask; b++) {
		for (struct bwd_map_node *n = st->sessions.bucket[b]; n; n = n->next) {
			const struct bwd_session *s = bwd_container_of(n, struct bwd_session, node);

			if (!s->timers.count && !s->queued && !s->in_flight)
				continue;
			bwd_log(BWD_LOG_NOTICE, "stopping: session '%s' of uid %ld has %zu timers pending and %" PRIu64 " fires undelivered; %s",
				s->name, (long)s->owner, s->timers.count,
				s->queued + s->in_flight,
				kept ? "the journal keeps them" : "they are lost (no --state-dir)");
			log_keys(s);
		}
	}
}

static void log_cancelled(const struct bwd_session *s)
{
	if (s->name || (!s->timers.count && !s->queued))
		return;
	bwd_log_client(BWD_LOGK_SESSION, s->owner, BWD_LOG_INFO,
		"an anonymous session of uid %ld ended with its connection: %zu pending timers cancelled, %" PRIu64 " undelivered fires dropped",
		(long)s->owner, s->timers.count, s->queued);
	log_keys(s);
}

/* Take a timer out of the wheel, unless it is not in yet, or no more. */
static void disarm(struct bwd_state *st, struct bwd_timer *t)
{
	if (st->restoring || t->fired)
		return;
	bw_dual_cancel(st->wheel, t->handle, NULL);
	LANE(t, cancelled, 1);
	LANE(t, pending, -1);
}

static void member_free(struct bwd_member *m)
{
	struct bwd_session *s = m->session;

	own_disarm(s->state, m->ack_handle, &m->ack_armed);
	ready_remove(m);
	*m->pprev = m->next;
	if (m->next)
		m->next->pprev = m->pprev;
	s->nmembers--;
	if (m->consumer) {
		s->nconsumers--;
		s->ncoalesce -= m->coalesce;
		COUNT(s, consumers, -1);
		hold_check(s);
	}
	s->state->stats.bytes -= sizeof(*m);
	free(m);
}

/* Out of listings (and, named, of the state files' numbers): ending. */
static void unlist(struct bwd_session *s)
{
	if (!s->listed)
		return;
	bwd_map_remove(&s->state->by_id, &s->id_node);
	bwd_map_remove(&s->acct->listed, &s->uid_node);
	s->listed = false;
}

/* Forget a named session's name and number: from now on a Hello with its
 * name creates a new session, whatever is left of this one. */
static void unname(struct bwd_session *s)
{
	struct bwd_state *st = s->state;

	bwd_map_remove(&st->sessions, &s->node);
	unlist(s);
	st->stats.bytes -= strlen(s->name) + 1;
	free(s->name);
	s->name = NULL;
	s->acct->named--;
}

/* End a session: cancel its timers, drop its fires, forget it. */
static void session_free(struct bwd_session *s)
{
	struct bwd_state *st = s->state;
	struct bwd_fire *f;

	work_remove(s);
	due_drop(s);
	own_disarm(st, s->linger_handle, &s->lingering);
	own_disarm(st, s->hold_handle, &s->hold_armed);
	own_disarm(st, s->pace_handle, &s->paced);
	for (size_t b = 0; b <= s->timers.mask; b++) {
		while (s->timers.bucket[b]) {
			struct bwd_timer *t = bwd_container_of(s->timers.bucket[b],
							       struct bwd_timer, node);

			disarm(st, t);
			free_timer(st, t);
		}
	}
	/* Members are gone by now but for the state's own teardown. */
	while (s->members) {
		struct bwd_member *m = s->members;

		take_back(m, NULL);
		member_free(m);
	}
	while ((f = dequeue(s)))
		fire_free(s, f);
	bwd_map_fini(&s->timers);
	if (s->name)
		unname(s);
	unlist(s);
	st->stats.bytes -= sizeof(*s);
	s->acct->sessions--;
	uid_put(st, s->acct);
	free(s);
}

static void session_end(struct bwd_session *s);

static void session_expire(struct bwd_session *s)
{
	bwd_log_client(BWD_LOGK_SESSION, s->owner, BWD_LOG_INFO,
		"session '%s' of uid %ld expired after its linger: %zu timers and %" PRIu64 " queued fires dropped",
		s->name, (long)s->owner, s->timers.count, s->queued);
	COUNT(s, expired, 1);
	journal_seq(s, BWD_REC_END, 0);
	unname(s);
	session_end(s);
}

static void linger_start(struct bwd_session *s)
{
	struct bwd_state *st = s->state;
	uint64_t now = bw_now_ns(), linger = st->opt->limits.linger_ns;

	s->detached_ns = now;
	own_arm(st, &s->linger, now > UINT64_MAX - linger ? UINT64_MAX : now + linger,
		&s->linger_handle, &s->lingering);
}

int bwd_session_attach(struct bwd_state *st, const struct bwd_attach *a,
		       struct bwd_member **out, bool *resumed)
{
	struct bwd_session *s;
	struct bwd_member *m;

	/* Before any lookup, so that a refusal tells nothing of what the
	 * other namespace holds. */
	if (a->owner_uid != a->uid && a->uid != 0)
		return BITWHEEL__V1__ERROR_CODE__PERMISSION_DENIED;
	s = a->name ? session_find(st, a->owner_uid, a->name) : NULL;
	*resumed = s != NULL;
	if (!s && a->name && a->no_create)
		return BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE;
	if (!s && a->name) {
		const struct bwd_uid *u = uid_find(st, a->owner_uid);
		const struct bwd_budget *lim = binding(st, a->uid, u ? u->lim :
			bwd_budget_of(st->budgets, a->owner_uid));

		if (lim && ((u ? u->named : 0) >= lim->sessions ||
			    (u && u->journal >= st->opt->limits.max_journal_per_uid)))
			return BITWHEEL__V1__ERROR_CODE__OVER_BUDGET;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	if (!s) {
		if (session_new(st, a->name, a->owner_uid, 0, &s)) {
			free(m);
			return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
		}
		if (a->name) {
			struct bwd_record r = {
				.type = BWD_REC_SESSION, .sid = s->id,
				.uid = (uint32_t)a->owner_uid, .name = a->name,
				.name_len = (uint8_t)strlen(a->name),
			};

			journal(st, s->acct, &r);
		}
	}
	own_disarm(st, s->linger_handle, &s->lingering);
	m->due.kind = BWD_DUE_ACK;
	m->session = s;
	m->owner = a->owner;
	m->consumer = a->consumer;
	m->auto_ack = a->auto_ack;
	m->coalesce = a->consumer && a->coalesce;
	m->window = a->window;
	m->pid = a->pid;
	m->ack_timeout_ns = a->ack_timeout_ns;
	m->room = true;
	m->next = s->members;
	if (m->next)
		m->next->pprev = &m->next;
	m->pprev = &s->members;
	s->members = m;
	s->nmembers++;
	st->stats.bytes += sizeof(*m);
	if (m->consumer) {
		s->nconsumers++;
		s->ncoalesce += m->coalesce;
		COUNT(s, consumers, 1);
		hold_check(s);
		ready_add(m);
	}
	*out = m;
	return 0;
}

bool bwd_state_reap(struct bwd_state *st)
{
	size_t budget = TEARDOWN_CHUNK;
	uint64_t start = bw_now_ns();

	while (st->ending && budget) {
		struct bwd_session *s = st->ending;

		while (budget && s->timers.count) {
			struct bwd_map_node *n = s->timers.bucket[s->reap_bucket];
			struct bwd_timer *t;

			if (!n) {
				s->reap_bucket++;
				continue;
			}
			t = bwd_container_of(n, struct bwd_timer, node);
			disarm(st, t);
			free_timer(st, t);
			/* A timer in a large overflow store costs microseconds
			 * to take out: the clock bounds the chunk too. */
			if (--budget % REAP_CLOCK_EVERY == 0 &&
			    bw_now_ns() - start >= BWD_TURN_NS)
				budget = 0;
		}
		for (; budget && s->queue_head; budget--)
			fire_free(s, dequeue(s));
		if (!s->timers.count && !s->queue_head) {
			st->ending = s->next_ending;
			session_free(s);
		}
	}
	return st->ending != NULL;
}

/* The end of a session with no name (left anonymous, or expired): at
 * once, or TEARDOWN_CHUNK timers and fires per turn. */
static void session_end(struct bwd_session *s)
{
	struct bwd_state *st = s->state;

	unlist(s);
	if (s->timers.count + s->queued <= TEARDOWN_CHUNK) {
		session_free(s);
		return;
	}
	due_drop(s);
	s->ending = true;
	s->next_ending = st->ending;
	st->ending = s;
}

void bwd_member_detach(struct bwd_member *m)
{
	struct bwd_session *s = m->session;

	if (m->flight_head && s->name)
		bwd_log_client(BWD_LOGK_SESSION, s->owner, BWD_LOG_INFO,
			"session '%s' of uid %ld: a consumer left with %" PRIu64 " fires unacknowledged; they go back to the queue",
			s->name, (long)s->owner, m->flight);
	take_back(m, NULL);
	member_free(m);
	if (s->nmembers)
		return;
	if (s->name) {
		linger_start(s);
		return;
	}
	log_cancelled(s);
	session_end(s);
}

/* ---- timers ---------------------------------------------------------------- */

/* The key's pending timer: one the wheel fired is a fire already, as
 * if made (Cancel says it was not pending, a replace adds a timer). */
static struct bwd_timer *timer_find(struct bwd_session *s, uint64_t key)
{
	for (struct bwd_map_node *n = bwd_map_find(&s->timers, key); n;
	     n = bwd_map_next(n->next, key)) {
		struct bwd_timer *t = bwd_container_of(n, struct bwd_timer, node);

		if (!t->fired)
			return t;
	}
	return NULL;
}

static void timer_cancel(struct bwd_state *st, struct bwd_timer *t)
{
	disarm(st, t);
	free_timer(st, t);
}

/* A timer as the request or record describes it, not yet armed. */
static struct bwd_timer *timer_new(struct bwd_session *s,
				   const struct bwd_schedule *req)
{
	struct bwd_timer *t = malloc(sizeof(*t) + req->payload_len);

	if (!t)
		return NULL;
	*t = (struct bwd_timer){
		.due.kind = BWD_DUE_TIMER,
		.node.key = req->key,
		.session = s,
		.deadline_ns = req->deadline_ns,
		.period_ns = req->period_ns,
		.leeway_ns = req->leeway_ns,
		.payload_len = req->payload_len,
		.has_payload = req->has_payload,
		.lane = bwd_lane_for(&s->state->opt->wheel,
				     bwd_leeway(&s->state->opt->wheel,
						req->leeway_ns, req->period_ns)),
	};
	if (req->payload_len)
		memcpy(t->payload, req->payload, req->payload_len);
	return t;
}

static void timer_add(struct bwd_session *s, struct bwd_timer *t)
{
	bwd_map_insert(&s->timers, &t->node);
	s->acct->timers++;
	s->acct->periodic_mhz += bwd_periodic_mhz(t->period_ns);
	charge(s->state, s->acct, (int64_t)BWD_TIMER_COST(t->payload_len));
	s->state->stats.timers++;
	s->state->stats.bytes += timer_bytes(t);
}

static int timer_arm(struct bwd_state *st, struct bwd_timer *t)
{
	int err = t->lane == BW_LANE_PERIODIC ?
		bw_dual_insert_periodic(st->wheel, t->deadline_ns, &t->due, &t->handle) :
		bw_dual_insert_oneshot(st->wheel, t->deadline_ns, &t->due, &t->handle);

	if (!err) {
		LANE(t, inserted, 1);
		LANE(t, pending, 1);
	}
	return err;
}

int bwd_timer_schedule(struct bwd_session *s, const struct bwd_schedule *req,
		       bool *replaced)
{
	struct bwd_state *st = s->state;
	struct bwd_timer *old = timer_find(s, req->key), *t;
	uint64_t added = bwd_timer_bytes_added(s, req);
	const struct bwd_budget *lim;
	int err;

	*replaced = false;
	if (old && !req->replace)
		return BITWHEEL__V1__ERROR_CODE__DUPLICATE_KEY;
	/* A oneshot timer's fire takes its place: timers and undelivered
	 * fires share the bound, so a consumer that falls behind slows its
	 * producers instead of losing fires. */
	if (!old && s->timers.count + s->queued + s->in_flight >=
		    st->opt->limits.max_timers)
		return BITWHEEL__V1__ERROR_CODE__TOO_MANY_TIMERS;
	/* The owner's budgets, over all of its sessions: a replace adds no
	 * timer, and lowers or keeps the rate of a uid already over it; root
	 * spared (binding). */
	if ((lim = binding(st, req->uid, s->acct->lim))) {
		const struct bwd_uid *u = s->acct;
		uint64_t rate = bwd_timer_rate_after(s, req);

		if (!old && u->timers + u->fires >= lim->timers)
			return BITWHEEL__V1__ERROR_CODE__TOO_MANY_TIMERS;
		if (rate > lim->periodic_mhz && rate > u->periodic_mhz)
			return BITWHEEL__V1__ERROR_CODE__OVER_BUDGET;
		if (s->name && u->journal >= st->opt->limits.max_journal_per_uid)
			return BITWHEEL__V1__ERROR_CODE__OVER_BUDGET;
		if (added && u->bytes + added > lim->bytes)
			return BITWHEEL__V1__ERROR_CODE__OVER_BUDGET;
	}
	if (added && st->held + added > st->opt->limits.max_memory)
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	t = timer_new(s, req);
	if (!t)
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	err = timer_arm(st, t);
	if (err) {
		free(t);
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	}
	/* The new timer is in: only now may the old one go. */
	if (old) {
		timer_cancel(st, old);
		*replaced = true;
	}
	timer_add(s, t);
	if (s->name) {
		struct bwd_record r = {
			.type = BWD_REC_TIMER, .sid = s->id, .key = req->key,
			.deadline_ns = req->deadline_ns, .period_ns = req->period_ns,
			.leeway_ns = req->leeway_ns,
			.flags = (req->has_payload ? BWD_RECF_PAYLOAD : 0) |
				 (req->leeway_ns != BWD_LEEWAY_DEFAULT ? BWD_RECF_LEEWAY : 0),
			.payload = req->payload, .payload_len = req->payload_len,
		};

		journal(st, s->acct, &r);
	}
	return 0;
}

uint64_t bwd_timer_rate_after(struct bwd_session *s,
			      const struct bwd_schedule *req)
{
	const struct bwd_timer *old = timer_find(s, req->key);

	return s->acct->periodic_mhz -
		(old ? bwd_periodic_mhz(old->period_ns) : 0) +
		bwd_periodic_mhz(req->period_ns);
}

uint64_t bwd_timer_bytes_added(struct bwd_session *s,
			       const struct bwd_schedule *req)
{
	const struct bwd_timer *old = timer_find(s, req->key);
	uint64_t cost = BWD_TIMER_COST(req->payload_len),
		 was = old ? BWD_TIMER_COST(old->payload_len) : 0;

	return cost > was ? cost - was : 0;
}

int bwd_timer_cancel(struct bwd_session *s, uint64_t key, bool *pending)
{
	struct bwd_timer *t = timer_find(s, key);

	*pending = t != NULL;
	if (!t)
		return 0;
	timer_cancel(s->state, t);
	if (s->name) {
		struct bwd_record r = { .type = BWD_REC_CANCEL, .sid = s->id,
					.key = key };

		journal(s->state, s->acct, &r);
	}
	return 0;
}

/* ---- listings ------------------------------------------------------------- */

struct bwd_session *bwd_state_session(struct bwd_state *st, uid_t owner,
				      const char *name)
{
	return session_find(st, owner, name);
}

/* A page being filled: what bwd_map_scan's visit adds to. */
struct list_page {
	const struct bwd_session **sessions;
	const struct bwd_timer **timers;
	size_t max, n;
	size_t node_off;           /* sessions: the node the map links       */
	const struct bwd_session *s; /* timers: theirs                       */
};

static bool add_session(void *arg, struct bwd_map_node *n)
{
	struct list_page *pg = arg;

	if (pg->n == pg->max)
		return false;
	pg->sessions[pg->n++] = (const struct bwd_session *)(const void *)
		((const char *)n - pg->node_off);
	return true;
}

/* A key's pending timer stands for the key: a fired one waiting beside
 * it (the same key, the same position) is a fire already. */
static bool add_timer(void *arg, struct bwd_map_node *n)
{
	struct list_page *pg = arg;
	const struct bwd_timer *t = timer_find((struct bwd_session *)pg->s, n->key);

	if (!t)
		return true;
	if (pg->n == pg->max)
		return false;
	pg->timers[pg->n++] = t;
	return true;
}

bool bwd_state_list_sessions(const struct bwd_state *st, bool any, uid_t owner,
			     uint64_t *pos, const struct bwd_session **out,
			     size_t max, size_t *n)
{
	struct list_page pg = { .sessions = out, .max = max,
				.node_off = offsetof(struct bwd_session, id_node) };
	const struct bwd_map *m = &st->by_id;
	bool done;

	if (!any) {
		const struct bwd_uid *u = uid_find(st, owner);

		*n = 0;
		if (!u || !u->listed.bucket)
			return true;
		m = &u->listed;
		pg.node_off = offsetof(struct bwd_session, uid_node);
	}
	done = bwd_map_scan(m, pos, BWD_LIST_WORK, add_session, &pg);
	*n = pg.n;
	return done;
}

bool bwd_session_list_timers(const struct bwd_session *s, uint64_t *pos,
			     const struct bwd_timer **out, size_t max, size_t *n)
{
	struct list_page pg = { .timers = out, .max = max, .s = s };
	bool done = bwd_map_scan(&s->timers, pos, BWD_LIST_WORK, add_timer, &pg);

	*n = pg.n;
	return done;
}

/* ---- writing out and reading back ------------------------------------------- */

static struct bwd_record session_record(const struct bwd_session *s)
{
	return (struct bwd_record){
		.type = BWD_REC_SESSION, .sid = s->id, .seq = s->next_seq,
		.uid = (uint32_t)s->owner, .name = s->name,
		.name_len = (uint8_t)strlen(s->name),
	};
}

void bwd_state_set_journal(struct bwd_state *st, struct bwd_journal *j)
{
	st->journal = j;
	/* A new generation: every uid's share starts again. */
	for (size_t b = 0; st->uids.bucket && b <= st->uids.mask; b++)
		for (struct bwd_map_node *n = st->uids.bucket[b]; n; n = n->next)
			bwd_container_of(n, struct bwd_uid, node)->journal = 0;
	if (!j)
		return;
	/* Every journal names the sessions it continues, so that one read
	 * without the snapshot before it (--ignore-snapshot) still knows
	 * whose timers its records are. */
	for (size_t b = 0; b <= st->sessions.mask; b++) {
		for (struct bwd_map_node *n = st->sessions.bucket[b]; n; n = n->next) {
			struct bwd_record r = session_record(
				bwd_container_of(n, struct bwd_session, node));

			journal(st, NULL, &r);
		}
	}
}

static int dump_fire(const struct bwd_session *s, const struct bwd_fire *f,
		     int (*emit)(void *, const struct bwd_record *), void *ctx)
{
	struct bwd_record r = {
		.type = BWD_REC_QUEUED, .sid = s->id, .key = f->key,
		.seq = f->seq, .deadline_ns = f->deadline_ns,
		.count = f->count, .fired_ns = f->fired_ns,
		.flags = (f->has_payload ? BWD_RECF_PAYLOAD : 0) |
			 (f->late ? BWD_RECF_LATE : 0) |
			 (f->sent ? BWD_RECF_SENT : 0),
		.payload = f->payload, .payload_len = f->payload_len,
	};

	return emit(ctx, &r);
}

static int dump_fires(const struct bwd_session *s, const struct bwd_fire *f,
		      int (*emit)(void *, const struct bwd_record *), void *ctx)
{
	int err = 0;

	for (; f && !err; f = f->next)
		err = dump_fire(s, f, emit, ctx);
	return err;
}

/* The due list: fires owed (journaled), after the queue's. */
static int dump_due(const struct bwd_session *s,
		    int (*emit)(void *, const struct bwd_record *), void *ctx)
{
	int err = 0;

	for (const struct bwd_due *d = s->due_head; d && !err; d = d->next) {
		const struct bwd_timer *t;
		struct bwd_fire f;

		if (d->kind == BWD_DUE_FIRE) {
			err = dump_fire(s, bwd_container_of(d, struct bwd_fire, due),
					emit, ctx);
			continue;
		}
		t = bwd_container_of(d, struct bwd_timer, due);
		f = fire_of(t, t->fired_ns, 0);
		f.seq = t->seq;
		err = dump_fire(s, &f, emit, ctx);
	}
	return err;
}

static int dump_session(const struct bwd_session *s,
			int (*emit)(void *, const struct bwd_record *), void *ctx)
{
	struct bwd_record r = session_record(s);
	int err = emit(ctx, &r);

	for (size_t b = 0; !err && b <= s->timers.mask; b++) {
		for (struct bwd_map_node *n = s->timers.bucket[b]; n && !err; n = n->next) {
			const struct bwd_timer *t = bwd_container_of(n, struct bwd_timer, node);

			if (t->fired)
				continue;
			r = (struct bwd_record){
				.type = BWD_REC_TIMER, .sid = s->id, .key = n->key,
				.deadline_ns = t->deadline_ns, .period_ns = t->period_ns,
				.count = t->count, .leeway_ns = t->leeway_ns,
				.flags = (t->has_payload ? BWD_RECF_PAYLOAD : 0) |
					 (t->late ? BWD_RECF_LATE : 0) |
					 (t->leeway_ns != BWD_LEEWAY_DEFAULT ?
					  BWD_RECF_LEEWAY : 0),
				.payload = t->payload, .payload_len = t->payload_len,
			};
			err = emit(ctx, &r);
		}
	}
	/* In flight, then queued: in flight ones go back to the front of the
	 * queue when read back, as they would if their consumers left. */
	for (const struct bwd_member *m = s->members; m && !err; m = m->next)
		err = dump_fires(s, m->flight_head, emit, ctx);
	if (!err)
		err = dump_fires(s, s->queue_head, emit, ctx);
	if (!err)
		err = dump_due(s, emit, ctx);
	return err;
}

int bwd_state_dump(const struct bwd_state *st,
		   int (*emit)(void *ctx, const struct bwd_record *r), void *ctx)
{
	int err = 0;

	for (size_t b = 0; !err && b <= st->sessions.mask; b++)
		for (struct bwd_map_node *n = st->sessions.bucket[b]; n && !err; n = n->next)
			err = dump_session(bwd_container_of(n, struct bwd_session, node),
					   emit, ctx);
	return err;
}

/* A time read back from a file whose clock runs shift ns behind ours;
 * before our clock's zero it is simply long past, and past its end never. */
static uint64_t shifted(uint64_t t, int64_t shift)
{
	uint64_t by = shift < 0 ? 0 - (uint64_t)shift : (uint64_t)shift;

	if (shift < 0)
		return t < by ? 0 : t - by;
	return t > UINT64_MAX - by ? UINT64_MAX : t + by;
}

/* Queue a restored fire at the tail: its seq is the newest so far. */
static void restore_fire(struct bwd_session *s, const struct bwd_record *r,
			const uint8_t *payload, uint32_t payload_len,
			bool has_payload, int64_t shift)
{
	struct bwd_fire f = {
		.key = r->key, .seq = r->seq,
		.deadline_ns = shifted(r->deadline_ns, shift),
		.fired_ns = shifted(r->fired_ns, shift), .count = r->count,
		.late = r->flags & BWD_RECF_LATE, .sent = r->flags & BWD_RECF_SENT,
		.redelivered = r->flags & BWD_RECF_SENT,
		.has_payload = has_payload, .payload = payload,
		.payload_len = payload_len,
	};
	struct bwd_fire *q = fire_new(&f);

	if (q) {
		enqueue_tail(s, q);
	} else {
		s->dropped++;
		COUNT(s, dropped, 1);
	}
	if (r->seq >= s->next_seq)
		s->next_seq = r->seq + 1;
}

/* The queued fire with this seq, for SENT and DONE. */
static struct bwd_fire *find_fire(struct bwd_session *s, uint64_t seq,
				  struct bwd_fire **prev)
{
	*prev = NULL;
	for (struct bwd_fire *f = s->queue_head; f; *prev = f, f = f->next)
		if (f->seq == seq)
			return f;
	return NULL;
}

static int apply_fired(struct bwd_session *s, const struct bwd_record *r,
		       int64_t shift)
{
	struct bwd_timer *t = timer_find(s, r->key);

	if (!t)
		return BWD_REC_ECORRUPT;
	restore_fire(s, r, t->payload, t->payload_len, t->has_payload, shift);
	t->late = false;
	t->count = r->count;
	if (!advance(t, shifted(r->fired_ns, shift)))
		free_timer(s->state, t);
	return 0;
}

static int apply_timer(struct bwd_session *s, const struct bwd_record *r,
		       int64_t shift)
{
	struct bwd_schedule req = {
		.key = r->key, .deadline_ns = shifted(r->deadline_ns, shift),
		.period_ns = r->period_ns, .payload = r->payload,
		.payload_len = r->payload_len,
		.has_payload = r->flags & BWD_RECF_PAYLOAD,
		.leeway_ns = r->flags & BWD_RECF_LEEWAY ? r->leeway_ns :
			BWD_LEEWAY_DEFAULT,
	};
	struct bwd_timer *old = timer_find(s, r->key), *t;

	t = timer_new(s, &req);
	if (!t)
		return -ENOMEM;
	t->count = r->count;
	t->late = r->flags & BWD_RECF_LATE;
	if (old)
		free_timer(s->state, old);
	timer_add(s, t);
	return 0;
}

int bwd_state_apply(struct bwd_state *st, const struct bwd_record *r,
		    int64_t shift_ns)
{
	struct bwd_session *s = r->type == BWD_REC_TRAILER ? NULL :
		session_by_id(st, r->sid);
	struct bwd_timer *t;
	struct bwd_fire *f, *prev;
	char name[BWP_SESSION_NAME_MAX + 1];

	st->restoring = true;
	if (r->type == BWD_REC_SESSION) {
		if (r->sid == 0 || r->name_len == 0 || r->name_len > BWP_SESSION_NAME_MAX)
			return BWD_REC_ECORRUPT;
		memcpy(name, r->name, r->name_len);
		name[r->name_len] = '\0';
		/* A journal starts by naming the sessions it continues. */
		if (s) {
			if (strcmp(s->name, name) || s->owner != (uid_t)r->uid)
				return BWD_REC_ECORRUPT;
			if (r->seq > s->next_seq)
				s->next_seq = r->seq;
			return 0;
		}
		if (!bwp_session_name_valid(name, r->name_len) ||
		    session_find(st, (uid_t)r->uid, name))
			return BWD_REC_ECORRUPT;
		if (session_new(st, name, (uid_t)r->uid, r->sid, &s))
			return -ENOMEM;
		s->next_seq = r->seq;
		return 0;
	}
	if (!s)
		return BWD_REC_ECORRUPT;
	switch (r->type) {
	case BWD_REC_END:
		session_free(s);
		return 0;
	case BWD_REC_TIMER:
		return apply_timer(s, r, shift_ns);
	case BWD_REC_CANCEL:
		t = timer_find(s, r->key);
		if (!t)
			return BWD_REC_ECORRUPT;
		free_timer(st, t);
		return 0;
	case BWD_REC_FIRE:
		return apply_fired(s, r, shift_ns);
	case BWD_REC_QUEUED:
		restore_fire(s, r, r->payload, r->payload_len,
			     r->flags & BWD_RECF_PAYLOAD, shift_ns);
		return 0;
	case BWD_REC_SENT:
		f = find_fire(s, r->seq, &prev);
		if (!f)
			return BWD_REC_ECORRUPT;
		f->sent = f->redelivered = true;
		return 0;
	case BWD_REC_DONE:
		f = find_fire(s, r->seq, &prev);
		if (!f)
			return BWD_REC_ECORRUPT;
		if (prev)
			prev->next = f->next;
		else
			s->queue_head = f->next;
		if (s->queue_tail == f)
			s->queue_tail = prev;
		count_queued(s, f, -1);
		fire_free(s, f);
		return 0;
	default:
		return BWD_REC_ECORRUPT;
	}
}

int bwd_state_restore_finish(struct bwd_state *st, uint64_t now_ns,
			     struct bwd_state_stats *restored)
{
	memset(restored, 0, sizeof(*restored));
	st->restoring = false;
	for (size_t b = 0; b <= st->sessions.mask; b++) {
		for (struct bwd_map_node *n = st->sessions.bucket[b], *next; n; n = next) {
			struct bwd_session *s = bwd_container_of(n, struct bwd_session, node);

			next = n->next;
			for (size_t tb = 0; tb <= s->timers.mask; tb++) {
				for (struct bwd_map_node *tn = s->timers.bucket[tb], *tnext;
				     tn; tn = tnext) {
					struct bwd_timer *t = bwd_container_of(tn, struct bwd_timer, node);

					tnext = tn->next;
					if (t->deadline_ns < now_ns)
						t->late = true;
					if (timer_arm(st, t)) {
						bwd_log(BWD_LOG_ERR, "session '%s': no memory to restore a timer",
							s->name);
						free_timer(st, t);
						continue;
					}
					restored->timers++;
				}
			}
			restored->queued += s->queued;
			restored->sessions++;
			linger_start(s);
		}
	}
	return 0;
}
