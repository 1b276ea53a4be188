/*
 * state.c - everything bitwheeld knows: sessions, their members, their
 * timers and fires, and the dual wheel that fires them.
 *
 * The state is four files over one internal header, state-internal.h
 * (struct bwd_state and what the files share):
 *   state.c     sessions, timers, the wheel and its callbacks (firing),
 *               listings
 *   delivery.c  the way from a session's queue to its consumers: queues,
 *               windows, the pump's hand-out, acks, take-backs, ack
 *               timeouts, coalescing holds, redelivery pacing
 *   account.c   per-uid accounts: budgets, usage, the redelivery bucket
 *   restore.c   writing the state out (snapshots) and reading it back
 * Each calls the others only through the functions that header names;
 * the rest of the daemon sees daemon-internal.h alone.
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
 * inline and its own link in the wheel (an intrusive struct bw_timer:
 * no wheel record, no handle; wheels.c).  A timer that comes
 * due becomes a struct bwd_fire (a copy of what it must carry) at the tail
 * of its session's queue, in two steps for a oneshot (below, "Firing");
 * from there the pump moves it to one consumer's
 * in-flight list, numbered with that member's next delivery number, until
 * an Ack (or, with auto_ack, its frame leaving the connection's buffer)
 * makes it done, or the member goes away or its ack timeout runs out and
 * it goes back to the front of the queue, marked redelivered.  PROTOCOL.md
 * section 8 draws that life.
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
 * Every change goes through a function here, and each change to a named
 * session appends one record to the journal (record.c lists them) as it
 * happens: TIMER, CANCEL, FIRE (a fire is owed), SENT (first handed to a
 * consumer), DONE (acknowledged or dropped).  Anonymous sessions are never
 * journaled.  A named session's fires carry a sequence number, so that
 * the journal can say which of them were done whatever order the queue
 * and the consumers took.
 *
 * Nothing here does I/O or knows libevent: the server pulls what is to be
 * sent (bwd_state_next_delivery), and the state's own timers - a detached
 * session's linger, a consumer's ack timeout - are entries in the same
 * wheel as the clients' timers, told apart by the data's low bit (a
 * client's timer, bwd_timer_data) and else by struct bwd_due's kind.
 *
 * Costs: schedule, cancel, each fire, each hand-out and each fire an ack
 * completes (single or cumulative, in delivery order or not) are O(1) on
 * average (a map lookup, a wheel operation, a list move, one record); a
 * fire is paid in two parts, the wheel's callback (a list link and,
 * named with a journal, a record: the wheel's own cost of a timer in its
 * overflow store dominates in a burst) and its making in
 * bwd_state_fire() (a kept block filled from the timer in place, a map
 * removal, the timer's block kept and the fire queued: some 300
 * instructions under bwload's deliver1, callgrind, "Blocks" below; no
 * record is built for a session without a journal); a
 * lookup of a key with fired timers waiting walks past them; taking back
 * a member's fires is O(its flight); ending a session is
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
 * Blocks.  Timers and fires come and go by the million a second, a fire
 * made as its timer goes: their memory comes from bwd_block_get, which
 * keeps up to SPARE_MAX freed blocks of each kind in lists by the size
 * of what follows the struct (the payload, and a periodic timer's struct
 * bwd_periodic): 8 bytes a class, up to 64, the allocator's own rounding,
 * so a block is no bigger than malloc's; a pointer pop instead of
 * malloc's 120-190 instructions and free's 110 (callgrind), whose
 * thread cache holds 7 of a size where a burst frees hundreds.  What
 * the lists hold is the allocator's, not counted in Stats' bytes (at
 * most 2 x 1,024 blocks of up to 208 bytes).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "state-internal.h"

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

uint64_t bwd_name_hash(uid_t owner, const char *name)
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


/* ---- blocks ---------------------------------------------------------------- */

/* Blocks kept of each kind: a burst's worth, so that a fire's making
 * reuses its timer's neighbour's memory and a delivered fire the next
 * fire's.  Under AddressSanitizer none, so that a use after free is
 * still seen (valgrind, which sees a block's overrun, runs with them). */
#define SPARE_MAX 1024u
#if defined(__SANITIZE_ADDRESS__)          /* gcc */
#define SPARE_KEEP false
#elif defined(__has_feature)               /* clang (the fuzz targets) */
#if __has_feature(address_sanitizer)
#define SPARE_KEEP false
#endif
#endif
#ifndef SPARE_KEEP
#define SPARE_KEEP true
#endif

static size_t block_base(enum bwd_block kind)
{
	return kind == BWD_BLOCK_TIMER ? sizeof(struct bwd_timer) :
		sizeof(struct bwd_fire);
}

/* The class of a tail of len bytes (a block holds 8 per class, the
 * allocator's own rounding: no bigger than malloc's of the exact size),
 * or BWD_SPARE_CLASSES: none kept. */
static size_t spare_class(size_t len)
{
	return len <= 8 * (BWD_SPARE_CLASSES - 1) ? (len + 7) / 8 :
		BWD_SPARE_CLASSES;
}

void *bwd_block_get(struct bwd_state *st, enum bwd_block kind, size_t tail)
{
	size_t c = spare_class(tail);
	void *p;

	if (c == BWD_SPARE_CLASSES)
		return malloc(block_base(kind) + tail);
	if ((p = st->spare[kind][c])) {
		st->spare[kind][c] = *(void **)p;
		st->nspare[kind]--;
		return p;
	}
	return malloc(block_base(kind) + 8 * c);
}

void bwd_block_put(struct bwd_state *st, enum bwd_block kind, void *p,
		   size_t tail)
{
	size_t c = spare_class(tail);

	if (!SPARE_KEEP || c == BWD_SPARE_CLASSES ||
	    st->nspare[kind] >= SPARE_MAX) {
		free(p);
		return;
	}
	*(void **)p = st->spare[kind][c];
	st->spare[kind][c] = p;
	st->nspare[kind]++;
}

static void spare_free(struct bwd_state *st)
{
	for (size_t k = 0; k < 2; k++)
		for (size_t c = 0; c < BWD_SPARE_CLASSES; c++)
			while (st->spare[k][c]) {
				void *p = st->spare[k][c];

				st->spare[k][c] = *(void **)p;
				free(p);
			}
}

static size_t timer_bytes(const struct bwd_timer *t)
{
	return sizeof(*t) + bwd_timer_tail(t->periodic, t->payload_len);
}

static inline void timer_put(struct bwd_state *st, struct bwd_timer *t)
{
	bwd_block_put(st, BWD_BLOCK_TIMER, t,
		      bwd_timer_tail(t->periodic, t->payload_len));
}

size_t bwd_fire_bytes(const struct bwd_fire *f)
{
	return sizeof(*f) + f->payload_len;
}

/* Append a record of one of u's sessions (NULL: the journal's own), and
 * count it to u's share of the generation; a failure leaves the journal
 * failed, which holds every reply back until the store has the state on
 * disk again (store.c). */
void bwd_state_journal(struct bwd_state *st, struct bwd_uid *u,
		       const struct bwd_record *r)
{
	size_t n;

	if (st->journal && bwd_journal_append(st->journal, r, &n) == 0 && u)
		bwd_acct_journal(st, u, n);
}

void bwd_state_journal_seq(struct bwd_session *s, enum bwd_rec_type type,
			   uint64_t seq)
{
	struct bwd_record r;

	if (!bwd_journaled(s))
		return;
	r = (struct bwd_record){ .type = type, .sid = s->id, .seq = seq };
	bwd_state_journal(s->state, s->acct, &r);
}

/* What t (or req) adds to its owner's periodic rate: a calendar timer's
 * as if periodic with its first two elapses' distance. */
static uint64_t timer_mhz(const struct bwd_timer *t)
{
	struct bwd_calendar c;

	if (t->cal && bwd_cal_info(t->session->state, t, &c))
		return bwd_periodic_mhz(c.interval_ns);
	return bwd_periodic_mhz(bwd_timer_period(t));
}

static uint64_t req_mhz(const struct bwd_schedule *req)
{
	return bwd_periodic_mhz(req->cal ? req->cal->interval_ns : req->period_ns);
}

void bwd_timer_free(struct bwd_state *st, struct bwd_timer *t)
{
	struct bwd_uid *u = t->session->acct;

	u->periodic_mhz -= timer_mhz(t);
	bwd_wall_remove(st, t);
	bwd_map_remove(&t->session->timers, &t->node);
	u->timers--;
	bwd_acct_charge(st, u, -(int64_t)BWD_TIMER_COST(t->payload_len));
	st->stats.timers--;
	st->stats.bytes -= timer_bytes(t);
	timer_put(st, t);
}

/* ---- the state's own timers ------------------------------------------------ */

void bwd_state_own_arm(struct bwd_state *st, struct bwd_due *d, uint64_t at,
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

void bwd_state_own_disarm(struct bwd_state *st, bw_handle h, bool *armed)
{
	if (!*armed)
		return;
	*armed = false;
	bw_dual_cancel(st->wheel, h, NULL);
	st->stats.own_pending--;
	st->stats.own_cancelled++;
}

#define FIRING offsetof(struct bwd_session, firing)

/* ---- the wheel's callbacks ----------------------------------------------- */

uint64_t bwd_next_period(uint64_t deadline, uint64_t period, uint64_t now)
{
	uint64_t k = now >= deadline ? (now - deadline) / period + 1 : 1;

	if (k > (UINT64_MAX - deadline) / period)
		return 0;
	return deadline + k * period;
}

/* What a fire does to its timer: the next deadline, 0 when it is done. */
uint64_t bwd_timer_advance(struct bwd_timer *t, uint64_t fired_ns)
{
	uint64_t next = 0, period = bwd_timer_period(t);

	if (t->cal)
		return bwd_cal_advance(t->session->state, t, fired_ns);
	if (t->boot && period)
		return bwd_boot_advance(t->session->state, t, fired_ns);
	if (period)
		next = bwd_next_period(t->deadline_ns, period, fired_ns);
	if (next)
		t->deadline_ns = next;
	return next;
}

static void session_expire(struct bwd_session *s);

/* A periodic fire past max_queued, or past what its owner may hold (its
 * bytes, its share of max_memory: bwd_acct_cap) is dropped: its timer
 * stays armed. */
static bool over_queue(const struct bwd_session *s, const struct bwd_timer *t)
{
	const struct bwd_limits *l = &s->state->opt->limits;
	const struct bwd_budget *lim = s->acct->lim;
	uint64_t cost = BWD_FIRE_COST(t->payload_len);

	return s->queued + s->in_flight >= l->max_queued ||
	       s->acct->bytes + cost > bwd_acct_cap(s->state, s->acct, lim);
}

/* What t's fire carries, fired at fired_ns as its count-th, written in
 * f (restrict: the compiler builds it in place, not in a copy). */
static void fire_fill(struct bwd_fire *restrict f,
		      const struct bwd_timer *restrict t, uint64_t fired_ns,
		      uint64_t count)
{
	*f = (struct bwd_fire){
		.due.kind = BWD_DUE_FIRE,
		.key = t->node.key,
		.deadline_ns = t->deadline_ns,
		.fired_ns = fired_ns,
		.count = count,
		.late = t->late,
		.lane = t->lane,
		.wall = t->wall && !t->boot,
		.has_payload = t->has_payload,
		.payload_len = t->payload_len,
		.payload = t->payload,
	};
	if (f->wall)
		f->wall_ns = bwd_wall_elapse(t->session->state, t);
}

struct bwd_fire bwd_timer_fire_of(const struct bwd_timer *t, uint64_t fired_ns,
				  uint64_t count)
{
	struct bwd_fire f;

	fire_fill(&f, t, fired_ns, count);
	return f;
}

/* t's fire in a block of its own, its payload copied (bwd_fire_new's
 * result without a template in between: a fire is made as often as a
 * request is served); NULL without memory. */
static struct bwd_fire *fire_make(struct bwd_state *st,
				  const struct bwd_timer *t, uint64_t fired_ns,
				  uint64_t count)
{
	struct bwd_fire *f = bwd_block_get(st, BWD_BLOCK_FIRE, t->payload_len);

	if (!f)
		return NULL;
	fire_fill(f, t, fired_ns, count);
	f->payload = (const uint8_t *)(f + 1);
	if (t->payload_len)
		memcpy(f + 1, t->payload, t->payload_len);
	return f;
}

/* s owes the fire f (of a calendar timer: cal) from now on: numbered and
 * journaled (named only). */
static void journal_fire(struct bwd_session *s, struct bwd_fire *f, bool cal)
{
	struct bwd_record r;

	if (!s->name)
		return;
	f->seq = s->next_seq++;
	/* The record is built only when it is written: without a journal
	 * a fire would pay its 100-odd bytes of zeroing. */
	if (!bwd_journaled(s))
		return;
	r = (struct bwd_record){
		.type = BWD_REC_FIRE, .sid = s->id, .key = f->key,
		.seq = f->seq,
		.deadline_ns = f->deadline_ns, .count = f->wall ? 0 : f->count,
		.fired_ns = f->fired_ns, .flags = f->late ? BWD_RECF_LATE : 0,
	};
	/* Its elapse, and the wall clock it came at: the next elapse is
	 * the first after both (clock.c). */
	if (cal) {
		r.flags |= BWD_RECF_CAL;
		r.wall_ns = f->wall_ns;
		r.base_ns = bwd_state_real(s->state);
	}
	bwd_state_journal(s->state, s->acct, &r);
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
	bwd_slist_add(&s->state->firing, s, FIRING);
}

/* The wheel fired a client's oneshot timer: what costs the wheel's pace
 * only.  Its fire is owed (journaled now, so that the journal's order of
 * FIRE, CANCEL and TIMER records is the order things happened), and it
 * waits in the due list for bwd_state_fire() to make it. */
static void oneshot_fired(struct bwd_timer *t, uint64_t now_ns)
{
	struct bwd_session *s = t->session;

	t->seq = 0;
	if (bwd_journaled(s)) {
		struct bwd_fire f = bwd_timer_fire_of(t, now_ns, 0);

		journal_fire(s, &f, false);
		t->seq = f.seq;
	} else if (s->name) {
		/* Numbered as journal_fire does, with no record to build. */
		t->seq = s->next_seq++;
	}
	t->fired_ns = now_ns;
	t->fired = true;
	t->due.kind = BWD_DUE_TIMER;
	due_add(s, &t->due);
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
	uint64_t count = t->periodic ? ++bwd_timer_periodic(t)->count : 0, next;
	struct bwd_fire *f;

	/* Past its owner's journal share, what it cannot record is not
	 * owed either (account.c); while the storage is down, nothing is
	 * recorded, and one fire waiting is owed enough (store.c). */
	if (over_queue(s, t) ||
	    (s->name && (bwd_acct_journal_over(st, s->acct) ||
			 (st->storage_down && s->queue_head)))) {
		s->dropped++;
		COUNT(s, dropped, 1);
	} else if ((f = fire_make(st, t, now_ns, count))) {
		journal_fire(s, f, t->cal);
		if (s->due_head) {
			bwd_fire_count(s, f);
			due_add(s, &f->due);
		} else {
			bwd_fire_enqueue(s, f);
		}
	} else {
		fire_lost(s);
	}
	/* The fire (made above) carried it; the next ones are on time. */
	t->late = false;
	next = bwd_timer_advance(t, now_ns);
	if (!next) {
		LANE(t, pending, -1);
		bwd_timer_free(st, t);
	}
	return next;
}

static uint64_t on_fire(void *data, uint64_t now_ns, void *ctx)
{
	struct bwd_state *st = ctx;
	struct bwd_timer *t = bwd_timer_of_data(data);
	struct bwd_due *d = data;

	if (t) {
		uint64_t again;

		/* Never early by the wall clock (clock.c). */
		if (t->wall && !t->session->ending &&
		    (again = bwd_wall_due(st, t, now_ns))) {
			st->stats.wall_checks[t->lane]++;
			return again;
		}
		LANE(t, fired, 1);
		bwd_hist_since(&st->late[t->lane], t->deadline_ns, now_ns);
		if (!t->session->ending)
			bwd_hold_add(t->session, t, now_ns);
		if ((t->periodic || t->cal) && !t->session->ending) {
			again = periodic_fired(st, t, now_ns);
			return again && t->cal ? bwd_wall_arm_at(st, t, now_ns) : again;
		}
		LANE(t, pending, -1);
		if (t->session->ending)
			bwd_timer_free(st, t);
		else
			oneshot_fired(t, now_ns);
		return 0;
	}
	st->stats.own_pending--;
	st->stats.own_fired++;
	if (d->kind == BWD_DUE_ACK) {
		bwd_member_ack_expired(bwd_container_of(d, struct bwd_member, due), now_ns);
	} else if (d->kind == BWD_DUE_HOLD) {
		struct bwd_session *s = bwd_container_of(d, struct bwd_session, hold);

		s->hold_armed = false;
		bwd_hold_let_go(s, now_ns);
	} else if (d->kind == BWD_DUE_RETRY) {
		bwd_fire_ready(bwd_container_of(d, struct bwd_fire, due));
	} else if (d->kind == BWD_DUE_PACE) {
		struct bwd_session *s = bwd_container_of(d, struct bwd_session, pace);

		s->paced = false;
		bwd_work_add(s);
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
	struct bwd_fire *f;

	s->due_head = d->next;
	if (!s->due_head)
		s->due_tail = NULL;
	if (d->kind == BWD_DUE_FIRE) {
		bwd_fire_link(s, bwd_container_of(d, struct bwd_fire, due));
		return;
	}
	t = bwd_container_of(d, struct bwd_timer, due);
	if ((f = fire_make(s->state, t, t->fired_ns, 0))) {
		f->seq = t->seq;
		bwd_fire_enqueue(s, f);
	} else {
		/* Journaled as owed: journaled as dropped too. */
		bwd_state_journal_seq(s, BWD_REC_DONE, t->seq);
		fire_lost(s);
	}
	bwd_timer_free(s->state, t);
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

			bwd_fire_count_queued(s, f, -1);
			bwd_fire_free(s, f);
		}
	}
	s->due_tail = NULL;
	bwd_slist_remove(&s->state->firing, s, FIRING);
}

bool bwd_state_fire(struct bwd_state *st)
{
	size_t budget = FIRE_CHUNK;
	struct bwd_session *s;
	uint64_t start;

	if (!st->firing.head)
		return false;
	start = bwd_state_now(st);
	while (budget && (s = st->firing.head)) {
		due_make(s);
		/* The next fire made is another session's. */
		bwd_slist_remove(&st->firing, s, FIRING);
		if (s->due_head)
			bwd_slist_add(&st->firing, s, FIRING);
		if (--budget % REAP_CLOCK_EVERY == 0 &&
		    bwd_state_now(st) - start >= BWD_TURN_NS)
			budget = 0;
	}
	return st->firing.head != NULL;
}

/* Only a failed allocation in the overflow store gets here. */
static void on_drop(void *data, int reason, void *ctx)
{
	struct bwd_timer *t = bwd_timer_of_data(data);

	bwd_log(BWD_LOG_ERR, "timer lost by the wheel: %s", bw_strerror(reason));
	if (t) {
		LANE(t, lost, 1);
		LANE(t, pending, -1);
		bwd_timer_free(ctx, t);
	}
}

/* ---- state ----------------------------------------------------------------- */

static uint64_t real_clock(void *arg)
{
	(void)arg;
	return bw_now_ns();
}

void bwd_state_set_clock(struct bwd_state *st, uint64_t (*now)(void *arg),
			 void *arg)
{
	st->now = now ? now : real_clock;
	st->now_arg = arg;
}

static uint64_t host_real(void *arg)
{
	(void)arg;
	return bwd_realtime_ns();
}

static uint64_t host_boot(void *arg)
{
	(void)arg;
	return bwd_boottime_ns();
}

void bwd_state_set_wall_clocks(struct bwd_state *st, uint64_t (*real)(void *arg),
			       uint64_t (*boot)(void *arg), void *arg)
{
	st->real = real ? real : host_real;
	st->boot = boot ? boot : host_boot;
	st->wall_arg = arg;
	/* The offset boottime timers were placed by: none are yet. */
	st->boot_off = bwd_state_boot(st) - bwd_state_now(st);
}

int bwd_state_new(const struct bwd_options *opt, uint64_t now_ns,
		  struct bwd_state **out)
{
	struct bwd_state *st = calloc(1, sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	st->opt = opt;
	st->budgets = &opt->budgets;
	st->now = real_clock;
	st->real = host_real;
	st->boot = host_boot;
	st->work.tail = &st->work.head;
	st->firing.tail = &st->firing.head;
	st->polled_ns = now_ns;
	if (getrandom(&st->seed, sizeof(st->seed), 0) != sizeof(st->seed))
		st->seed = now_ns;
	st->next_id = 1;
	err = bwd_map_init(&st->sessions, st->seed);
	if (!err)
		err = bwd_map_init(&st->by_id, st->seed);
	if (!err)
		err = bwd_map_init(&st->uids, st->seed);
	if (!err)
		err = bwd_map_init(&st->wall, st->seed);
	st->boot_off = bwd_state_boot(st) - bwd_state_now(st);
	st->boot_next = UINT64_MAX;
	st->wall_lo = INT64_MAX;
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

void bwd_state_free(struct bwd_state *st)
{
	if (!st)
		return;
	while (st->ending) {
		struct bwd_session *s = st->ending;

		st->ending = s->next_ending;
		bwd_session_free(s);
	}
	if (st->sessions.bucket) {
		for (size_t b = 0; b <= st->sessions.mask; b++)
			while (st->sessions.bucket[b])
				bwd_session_free(bwd_container_of(st->sessions.bucket[b],
							  struct bwd_session, node));
		bwd_map_fini(&st->sessions);
	}
	bwd_map_fini(&st->by_id);
	/* Emptied with the sessions' timers. */
	bwd_map_fini(&st->wall);
	/* Only connections still counted are left. */
	if (st->uids.bucket) {
		for (size_t b = 0; b <= st->uids.mask; b++)
			while (st->uids.bucket[b]) {
				struct bwd_map_node *n = st->uids.bucket[b];

				bwd_map_remove(&st->uids, n);
				bwd_wheels_drop(st, bwd_container_of(n, struct bwd_uid, node));
				bwd_map_fini(&bwd_container_of(n, struct bwd_uid, node)->listed);
				free(bwd_container_of(n, struct bwd_uid, node));
			}
		bwd_map_fini(&st->uids);
	}
	bw_dual_free(st->wheel);
	spare_free(st);
	free(st);
}

void bwd_state_poll(struct bwd_state *st, uint64_t now_ns)
{
	struct bw_callbacks cb = { on_fire, on_drop, st };

	bwd_wheels_poll(st, now_ns, &cb);
}

int bwd_state_next_deadline(struct bwd_state *st, uint64_t *out_ns)
{
	return bwd_wheels_next_deadline(st, out_ns);
}

void bwd_state_stats(const struct bwd_state *st, struct bwd_state_stats *out)
{
	*out = st->stats;
	out->sessions = st->sessions.count;
	out->bytes += bw_dual_footprint(st->wheel) + bwd_map_bytes(&st->sessions);
}

const struct bwd_hist *bwd_state_lateness(const struct bwd_state *st,
					  unsigned lane)
{
	return &st->late[lane];
}

/* ---- sessions -------------------------------------------------------------- */

struct bwd_session *bwd_session_find(struct bwd_state *st, uid_t owner,
				     const char *name)
{
	uint64_t h = bwd_name_hash(owner, name);

	for (struct bwd_map_node *n = bwd_map_find(&st->sessions, h); n;
	     n = bwd_map_next(n->next, h)) {
		struct bwd_session *s = bwd_container_of(n, struct bwd_session, node);

		if (s->owner == owner && strcmp(s->name, name) == 0)
			return s;
	}
	return NULL;
}

struct bwd_session *bwd_session_by_id(struct bwd_state *st, uint64_t id)
{
	struct bwd_map_node *n = bwd_map_find(&st->by_id, id);

	return n ? bwd_container_of(n, struct bwd_session, id_node) : NULL;
}

/* id 0: the next free one. */
int bwd_session_new(struct bwd_state *st, const char *name, uid_t uid,
		    uint64_t id, struct bwd_session **out)
{
	struct bwd_session *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->acct = bwd_acct_get(st, uid);
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
		s->node.key = bwd_name_hash(uid, name);
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
	bwd_acct_put(st, s->acct);
	free(s);
	return -ENOMEM;
}

static void log_fires(const struct bwd_fire *f, const char *what)
{
	for (; f; f = f->next)
		bwd_log(BWD_LOG_DEBUG, "  %s: key %" PRIu64 " deadline %" PRIu64 " count %" PRIu64,
			what, f->key, f->deadline_ns, f->wall ? 0 : f->count);
}

/* Each pending timer's key and deadline, and each undelivered fire's:
 * debug level only, like every key the daemon logs. */
static void log_keys(const struct bwd_session *s)
{
	for (size_t b = 0; b <= s->timers.mask; b++) {
		for (struct bwd_map_node *n = s->timers.bucket[b]; n; n = n->next) {
			const struct bwd_timer *t = bwd_container_of(n, struct bwd_timer, node);

			bwd_log(BWD_LOG_DEBUG, "  pending: key %" PRIu64 " deadline %" PRIu64 " period %" PRIu64,
				n->key, t->deadline_ns, bwd_timer_period(t));
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
	bwd_wheels_disarm(st, t);
	LANE(t, cancelled, 1);
	LANE(t, pending, -1);
}

static void member_free(struct bwd_member *m)
{
	struct bwd_session *s = m->session;

	bwd_state_own_disarm(s->state, m->ack_handle, &m->ack_armed);
	bwd_ready_remove(m);
	*m->pprev = m->next;
	if (m->next)
		m->next->pprev = m->pprev;
	s->nmembers--;
	if (m->consumer) {
		s->nconsumers--;
		s->ncoalesce -= m->coalesce;
		COUNT(s, consumers, -1);
		bwd_hold_check(s);
	}
	bwd_member_flights_fini(m);
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
void bwd_session_free(struct bwd_session *s)
{
	struct bwd_state *st = s->state;
	struct bwd_fire *f;

	bwd_work_remove(s);
	due_drop(s);
	bwd_state_own_disarm(st, s->linger_handle, &s->lingering);
	bwd_state_own_disarm(st, s->hold_handle, &s->hold_armed);
	bwd_state_own_disarm(st, s->pace_handle, &s->paced);
	for (size_t b = 0; b <= s->timers.mask; b++) {
		while (s->timers.bucket[b]) {
			struct bwd_timer *t = bwd_container_of(s->timers.bucket[b],
							       struct bwd_timer, node);

			disarm(st, t);
			bwd_timer_free(st, t);
		}
	}
	/* Members are gone by now but for the state's own teardown. */
	while (s->members) {
		struct bwd_member *m = s->members;

		bwd_member_take_back(m, BWD_TB_DISCONNECTED);
		member_free(m);
	}
	while ((f = bwd_fire_dequeue(s)))
		bwd_fire_free(s, f);
	bwd_session_drop_delayed(s);
	if (s->dead_letter)
		st->stats.bytes -= strlen(s->dead_letter) + 1;
	free(s->dead_letter);
	bwd_map_fini(&s->timers);
	if (s->name)
		unname(s);
	unlist(s);
	st->stats.bytes -= sizeof(*s);
	s->acct->sessions--;
	bwd_acct_put(st, s->acct);
	free(s);
}

static void session_end(struct bwd_session *s);

static void session_expire(struct bwd_session *s)
{
	/* Kept while it holds dead letters; a Kick that takes its last one
	 * lingers it again (re-armed here, it would wake the loop every
	 * linger, at once with --linger 0). */
	if (s->dead_letters)
		return;
	bwd_log_client(BWD_LOGK_SESSION, s->owner, BWD_LOG_INFO,
		"session '%s' of uid %ld expired after its linger: %zu timers and %" PRIu64 " queued fires dropped",
		s->name, (long)s->owner, s->timers.count, s->queued);
	COUNT(s, expired, 1);
	bwd_state_journal_seq(s, BWD_REC_END, 0);
	unname(s);
	session_end(s);
}

void bwd_session_linger(struct bwd_session *s)
{
	struct bwd_state *st = s->state;
	uint64_t now = bwd_state_now(st), linger = st->opt->limits.linger_ns;

	s->detached_ns = now;
	bwd_state_own_arm(st, &s->linger, now > UINT64_MAX - linger ? UINT64_MAX : now + linger,
		&s->linger_handle, &s->lingering);
}

int bwd_session_named(struct bwd_state *st, uid_t owner, const char *name,
		      struct bwd_session **out)
{
	struct bwd_record r = {
		.type = BWD_REC_SESSION, .uid = (uint32_t)owner, .name = name,
		.name_len = (uint8_t)strlen(name),
	};
	int err;

	if ((*out = bwd_session_find(st, owner, name)))
		return 0;
	if ((err = bwd_session_new(st, name, owner, 0, out)))
		return err;
	r.sid = (*out)->id;
	bwd_state_journal(st, (*out)->acct, &r);
	/* Created with nobody attached (a dead-letter session): it lingers. */
	bwd_session_linger(*out);
	return 0;
}

int bwd_session_set_policy(struct bwd_session *s, bool has_max, uint32_t max,
			   const char *dead_letter)
{
	struct bwd_record r = { .type = BWD_REC_POLICY, .sid = s->id };
	char *dl = NULL;

	if (!s->name)
		return BITWHEEL__V1__ERROR_CODE__BAD_REQUEST;
	if (dead_letter && *dead_letter && !(dl = strdup(dead_letter)))
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	if (!s->policy_set)
		s->max_deliveries = bwd_session_max_deliveries(s);
	if (has_max)
		s->max_deliveries = max;
	if (dead_letter) {
		if (s->dead_letter)
			s->state->stats.bytes -= strlen(s->dead_letter) + 1;
		free(s->dead_letter);
		s->dead_letter = dl;
		if (dl)
			s->state->stats.bytes += strlen(dl) + 1;
	}
	s->policy_set = true;
	r.count = s->max_deliveries;
	r.name = s->dead_letter;
	r.name_len = s->dead_letter ? (uint8_t)strlen(s->dead_letter) : 0;
	bwd_state_journal(s->state, s->acct, &r);
	return 0;
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
	s = a->name ? bwd_session_find(st, a->owner_uid, a->name) : NULL;
	*resumed = s != NULL;
	if (!s && a->name && a->no_create)
		return BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE;
	if (!s && a->name) {
		const struct bwd_uid *u = bwd_acct_find(st, a->owner_uid);
		const struct bwd_budget *lim = bwd_acct_binding(st, a->uid, u ? u->lim :
			bwd_budget_of(st->budgets, a->owner_uid));

		if (lim && ((u ? u->named : 0) >= lim->sessions ||
			    (u && u->journal >= st->opt->limits.max_journal_per_uid)))
			return BITWHEEL__V1__ERROR_CODE__OVER_BUDGET;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	if (!s && (a->name ? bwd_session_named(st, a->owner_uid, a->name, &s) :
		   bwd_session_new(st, NULL, a->owner_uid, 0, &s))) {
		free(m);
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	}
	bwd_state_own_disarm(st, s->linger_handle, &s->lingering);
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
		bwd_hold_check(s);
		bwd_ready_add(m);
	}
	if (bwd_member_flights_init(m)) {
		bwd_member_detach(m);
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	}
	*out = m;
	return 0;
}

bool bwd_state_reap(struct bwd_state *st)
{
	size_t budget = TEARDOWN_CHUNK;
	uint64_t start = bwd_state_now(st);

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
			bwd_timer_free(st, t);
			/* A timer in a large overflow store costs microseconds
			 * to take out: the clock bounds the chunk too. */
			if (--budget % REAP_CLOCK_EVERY == 0 &&
			    bwd_state_now(st) - start >= BWD_TURN_NS)
				budget = 0;
		}
		for (; budget && s->queue_head; budget--)
			bwd_fire_free(s, bwd_fire_dequeue(s));
		if (!s->timers.count && !s->queue_head) {
			st->ending = s->next_ending;
			bwd_session_free(s);
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
		bwd_session_free(s);
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
	bwd_member_take_back(m, BWD_TB_DISCONNECTED);
	member_free(m);
	if (s->nmembers)
		return;
	if (s->name) {
		bwd_session_linger(s);
		return;
	}
	log_cancelled(s);
	session_end(s);
}

/* ---- timers ---------------------------------------------------------------- */

/* The key's pending timer: one the wheel fired is a fire already, as
 * if made (Cancel says it was not pending, a replace adds a timer). */
struct bwd_timer *bwd_timer_find(struct bwd_session *s, uint64_t key)
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
	bwd_timer_free(st, t);
}

/* A timer as the request or record describes it, not yet armed. */
struct bwd_timer *bwd_timer_new(struct bwd_session *s,
				const struct bwd_schedule *req)
{
	bool periodic = req->period_ns != 0;
	struct bwd_timer *t = bwd_block_get(s->state, BWD_BLOCK_TIMER,
					    bwd_timer_tail(periodic, req->payload_len));

	if (!t)
		return NULL;
	*t = (struct bwd_timer){
		.node.key = req->key,
		.session = s,
		.deadline_ns = req->deadline_ns,
		.leeway_ns = req->leeway_ns,
		.payload_len = req->payload_len,
		.has_payload = req->has_payload,
		.boot = req->boot,
		.periodic = periodic,
		.lane = bwd_lane_for(&s->state->opt->wheel,
				     bwd_leeway(&s->state->opt->wheel,
						req->leeway_ns, req->period_ns)),
	};
	bw_timer_init(&t->wt);
	if (req->payload_len)
		memcpy(t->payload, req->payload, req->payload_len);
	if (periodic)
		*bwd_timer_periodic(t) = (struct bwd_periodic){ .period_ns = req->period_ns };
	if ((req->wall_ns || req->cal) &&
	    bwd_wall_add(s->state, t, req->wall_ns, req->cal)) {
		timer_put(s->state, t);
		return NULL;
	}
	return t;
}

void bwd_timer_add(struct bwd_session *s, struct bwd_timer *t)
{
	bwd_map_insert(&s->timers, &t->node);
	s->acct->timers++;
	s->acct->periodic_mhz += timer_mhz(t);
	bwd_acct_charge(s->state, s->acct, (int64_t)BWD_TIMER_COST(t->payload_len));
	s->state->stats.timers++;
	s->state->stats.bytes += timer_bytes(t);
}

int bwd_timer_arm(struct bwd_state *st, struct bwd_timer *t)
{
	int err = bwd_wheels_arm(st, t, t->wall ? bwd_state_now(st) : 0);

	if (!err) {
		LANE(t, inserted, 1);
		LANE(t, pending, 1);
	}
	return err;
}

/* bwd_timer_rate_after and bwd_timer_bytes_added with the key's pending
 * timer (old, or NULL) already found: a Schedule looks its key up once,
 * the one lookup that walks the map (a missed cache line or two). */
static uint64_t rate_after(const struct bwd_session *s,
			   const struct bwd_timer *old,
			   const struct bwd_schedule *req)
{
	return s->acct->periodic_mhz - (old ? timer_mhz(old) : 0) +
		req_mhz(req);
}

static uint64_t bytes_added(const struct bwd_timer *old,
			    const struct bwd_schedule *req)
{
	struct bwd_calendar c;
	uint64_t cost = BWD_TIMER_COST(req->payload_len) +
			(req->cal ? req->cal->cost : 0),
		 was = !old ? 0 : BWD_TIMER_COST(old->payload_len) +
			(bwd_cal_info(old->session->state, old, &c) ? c.cost : 0);

	return cost > was ? cost - was : 0;
}

int bwd_timer_schedule(struct bwd_session *s, const struct bwd_schedule *req,
		       bool *replaced)
{
	struct bwd_state *st = s->state;
	struct bwd_timer *old = bwd_timer_find(s, req->key), *t;
	uint64_t added = bytes_added(old, req);
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
	if ((lim = bwd_acct_binding(st, req->uid, s->acct->lim))) {
		const struct bwd_uid *u = s->acct;
		uint64_t rate = rate_after(s, old, req);

		if (!old && u->timers + u->fires >= lim->timers)
			return BITWHEEL__V1__ERROR_CODE__TOO_MANY_TIMERS;
		if (rate > lim->periodic_mhz && rate > u->periodic_mhz)
			return BITWHEEL__V1__ERROR_CODE__OVER_BUDGET;
		if (s->name && u->journal >= st->opt->limits.max_journal_per_uid)
			return BITWHEEL__V1__ERROR_CODE__OVER_BUDGET;
		if (added && u->bytes + added > lim->bytes)
			return BITWHEEL__V1__ERROR_CODE__OVER_BUDGET;
	}
	/* max_memory, and the uid's share of it (account.c). */
	if (added && s->acct->bytes + added > bwd_acct_cap(st, s->acct, lim))
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	t = bwd_timer_new(s, req);
	if (!t)
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	err = bwd_timer_arm(st, t);
	if (err) {
		bwd_wall_remove(st, t);
		timer_put(st, t);
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	}
	/* The new timer is in: only now may the old one go. */
	if (old) {
		timer_cancel(st, old);
		*replaced = true;
	}
	bwd_timer_add(s, t);
	/* Built only when written (journal_fire says why). */
	if (bwd_journaled(s)) {
		struct bwd_record r = {
			.type = BWD_REC_TIMER, .sid = s->id, .key = req->key,
			.deadline_ns = req->deadline_ns, .period_ns = req->period_ns,
			.leeway_ns = req->leeway_ns, .wall_ns = req->wall_ns,
			.flags = (req->has_payload ? BWD_RECF_PAYLOAD : 0) |
				 (req->leeway_ns != BWD_LEEWAY_DEFAULT ? BWD_RECF_LEEWAY : 0) |
				 (req->wall_ns ? BWD_RECF_WALL : 0) |
				 (req->boot ? BWD_RECF_BOOT : 0),
			.payload = req->payload, .payload_len = req->payload_len,
		};

		if (req->cal)
			bwd_cal_record(req->cal, &r);
		bwd_state_journal(st, s->acct, &r);
	}
	return 0;
}

uint64_t bwd_timer_rate_after(struct bwd_session *s,
			      const struct bwd_schedule *req)
{
	return rate_after(s, bwd_timer_find(s, req->key), req);
}

uint64_t bwd_timer_bytes_added(struct bwd_session *s,
			       const struct bwd_schedule *req)
{
	return bytes_added(bwd_timer_find(s, req->key), req);
}

int bwd_timer_cancel(struct bwd_session *s, uint64_t key, bool *pending)
{
	struct bwd_timer *t = bwd_timer_find(s, key);

	*pending = t != NULL;
	if (!t)
		return 0;
	timer_cancel(s->state, t);
	if (bwd_journaled(s)) {
		struct bwd_record r = { .type = BWD_REC_CANCEL, .sid = s->id,
					.key = key };

		bwd_state_journal(s->state, s->acct, &r);
	}
	return 0;
}

/* ---- listings ------------------------------------------------------------- */

struct bwd_session *bwd_state_session(struct bwd_state *st, uid_t owner,
				      const char *name)
{
	return bwd_session_find(st, owner, name);
}

/* A page being filled: what bwd_map_scan's visit adds to. */
struct list_page {
	const struct bwd_session **sessions;
	const struct bwd_timer **timers;
	size_t max, n;
	size_t bytes;              /* timers: the entries' bound left        */
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
	const struct bwd_timer *t = bwd_timer_find((struct bwd_session *)pg->s, n->key);
	struct bwd_calendar c;
	const char *listed;
	size_t cost = BWD_TIMER_ENTRY_MAX;

	if (!t)
		return true;
	if (t->cal && (listed = bwd_cal_info(pg->s->state, t, &c)))
		cost += BWD_CAL_ENTRY_EXTRA(strlen(listed));
	if (pg->n == pg->max || (pg->n && cost > pg->bytes))
		return false;
	pg->bytes = cost > pg->bytes ? 0 : pg->bytes - cost;
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
		const struct bwd_uid *u = bwd_acct_find(st, owner);

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
			     const struct bwd_timer **out, size_t max,
			     size_t bytes, size_t *n)
{
	struct list_page pg = { .timers = out, .max = max, .s = s,
				.bytes = bytes };
	bool done = bwd_map_scan(&s->timers, pos, BWD_LIST_WORK, add_timer, &pg);

	*n = pg.n;
	return done;
}
