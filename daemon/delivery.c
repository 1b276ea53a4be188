/*
 * delivery.c - the way from a session's queue to its consumers.
 *
 * A fire waits at its session's queue (a FIFO, taken-back fires at the
 * front) until the pump (server.c) asks bwd_state_next_delivery() for the
 * next one to write; it is then in flight to one member, in that member's
 * list in delivery order, until an Ack (bwd_member_ack), or with auto_ack
 * its frame leaving the connection's buffer (bwd_member_written), makes
 * it done, or it is taken back (the member leaves, its ack timeout runs
 * out) to the front of the queue.
 *
 * Who gets a fire.  A session keeps its consumers that may take one now -
 * fewer fires in flight than their window, and room in their connection's
 * output - in a FIFO (ready): the pump serves its head and puts it back at
 * the tail while it still may, so consumers take turns.  Sessions with
 * queued fires and a ready consumer sit in their owner uid's work list,
 * and the uids with such in the state's, both served the same way, one
 * fire at a time: the uids take turns, and within one its sessions do, so
 * that no session's burst - nor a uid's many sessions - holds up another
 * user's fires for more than a turn of the pump (BWD_DELIVER_CHUNK).
 * Entries leave those lists lazily, when found unable.
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
 * Monitoring.  A fire remembers when it was last handed out (handed_ns);
 * its first hand-out adds the wait since its deadline to its lane's
 * queue-wait histogram (count_handed), an Ack adds the time since the
 * hand-out of each fire it completes to the ack-latency one (count_acked;
 * auto-ack's completion on write is not an ack).  One clock read per
 * hand-out and per Ack, a binary search of BWD_LATENESS_LE_NS per fire.
 *
 * Costs: a hand-out, a cumulative or in-order ack and a drain are O(1)
 * per fire; a single ack out of order is O(the window); taking back a
 * member's fires is O(its flight); a hold, a pace wait, O(1) and a wheel
 * operation.
 */
#include <stdlib.h>
#include <string.h>

#include "state-internal.h"

/* ---- work lists -------------------------------------------------------------- */

static bool member_may_take(const struct bwd_member *m)
{
	return m->room && m->flight < m->window;
}

#define WORK offsetof(struct bwd_session, work)

/* u joins the state's turn at its tail, unless it is in already. */
static void uid_work_add(struct bwd_state *st, struct bwd_uid *u)
{
	if (u->work_pprev)
		return;
	u->work_next = NULL;
	u->work_pprev = st->work.tail;
	*st->work.tail = u;
	st->work.tail = &u->work_next;
}

static void uid_work_remove(struct bwd_state *st, struct bwd_uid *u)
{
	if (!u->work_pprev)
		return;
	*u->work_pprev = u->work_next;
	if (u->work_next)
		u->work_next->work_pprev = u->work_pprev;
	else
		st->work.tail = u->work_pprev;
	u->work_pprev = NULL;
}

void bwd_work_add(struct bwd_session *s)
{
	if (s->queue_head && s->ready_head && !s->held && !s->paced) {
		bwd_slist_add(&s->acct->work, s, WORK);
		uid_work_add(s->state, s->acct);
	}
}

void bwd_work_remove(struct bwd_session *s)
{
	bwd_slist_remove(&s->acct->work, s, WORK);
	if (!s->acct->work.head)
		uid_work_remove(s->state, s->acct);
}

/* A consumer that may take a fire joins its session's turn. */
void bwd_ready_add(struct bwd_member *m)
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
	bwd_work_add(s);
}

void bwd_ready_remove(struct bwd_member *m)
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
	bwd_state_own_disarm(s->state, s->hold_handle, &s->hold_armed);
	s->held = false;
	s->hold_ns = UINT64_MAX;
	bwd_work_add(s);
}

/* Fires are held only while every consumer asked for it. */
void bwd_hold_check(struct bwd_session *s)
{
	if (s->held && (!s->nconsumers || s->ncoalesce != s->nconsumers))
		hold_release(s);
}

/* A batch, or a fire whose window left no time to wait, goes at now.
 * Fires due by now belonged with it: one that its lane fires later (a
 * coarse lane fires within its tick) goes at once rather than start a
 * batch of its own and wait out its window. */
void bwd_hold_let_go(struct bwd_session *s, uint64_t now)
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
void bwd_hold_add(struct bwd_session *s, const struct bwd_timer *t,
		  uint64_t now)
{
	struct bwd_state *st = s->state;
	uint64_t leeway = bwd_leeway(&st->opt->wheel, t->leeway_ns, t->period_ns);
	uint64_t bound = bwd_lane_late_ns(&st->opt->wheel.oneshot), end, at;

	if (!s->nconsumers || s->ncoalesce != s->nconsumers)
		return;
	/* Due before the session's last write, which its lane made it
	 * miss: it goes at once, and a batch held since then with it. */
	if (t->deadline_ns <= s->let_go_ns) {
		if (s->held)
			bwd_hold_let_go(s, now);
		return;
	}
	if (!s->held && (s->queue_head || s->due_head))
		return;
	end = t->deadline_ns > UINT64_MAX - leeway ? UINT64_MAX :
		t->deadline_ns + leeway;
	at = end > bound ? end - bound : 0;
	if (at <= now) {
		bwd_hold_let_go(s, now);
		return;
	}
	if (s->held && at >= s->hold_ns)
		return;
	bwd_state_own_disarm(st, s->hold_handle, &s->hold_armed);
	bwd_state_own_arm(st, &s->hold, at, &s->hold_handle, &s->hold_armed);
	if (!s->hold_armed) {
		/* No memory for the timer: no hold. */
		hold_release(s);
		return;
	}
	s->held = true;
	s->hold_ns = at;
	bwd_work_remove(s);
}

/* ---- fire queues ----------------------------------------------------------- */

struct bwd_fire *bwd_fire_new(const struct bwd_fire *f)
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

void bwd_fire_count_queued(struct bwd_session *s, const struct bwd_fire *f,
			   int64_t n)
{
	s->queued += (uint64_t)n;
	COUNT(s, queued, n);
	s->state->stats.bytes += (uint64_t)n * bwd_fire_bytes(f);
}

/* A new fire counts (queued, its owner's fires and bytes) ... */
void bwd_fire_count(struct bwd_session *s, const struct bwd_fire *f)
{
	s->acct->fires++;
	bwd_acct_charge(s->state, s->acct, (int64_t)BWD_FIRE_COST(f->payload_len));
	bwd_fire_count_queued(s, f, 1);
}

/* ... and joins the queue's tail, at once or after a wait in the due list. */
void bwd_fire_link(struct bwd_session *s, struct bwd_fire *f)
{
	f->next = NULL;
	if (s->queue_tail)
		s->queue_tail->next = f;
	else
		s->queue_head = f;
	s->queue_tail = f;
	bwd_work_add(s);
}

/* A new fire (of a timer, or read back) joins the queue. */
void bwd_fire_enqueue(struct bwd_session *s, struct bwd_fire *f)
{
	bwd_fire_count(s, f);
	bwd_fire_link(s, f);
}

struct bwd_fire *bwd_fire_dequeue(struct bwd_session *s)
{
	struct bwd_fire *f = s->queue_head;

	if (!f)
		return NULL;
	s->queue_head = f->next;
	if (!s->queue_head)
		s->queue_tail = NULL;
	bwd_fire_count_queued(s, f, -1);
	f->next = NULL;
	return f;
}

/* Put the chain head..tail (linked through next) back at the front. */
/* Put the chain head..tail of n fires in flight (linked through next)
 * back at the front.  A fire in flight is charged the same bytes as a
 * queued one, so only the counts of fires move: O(1), however long the
 * chain (a take-back of thousands is one walk, to mark them). */
static void requeue_front(struct bwd_session *s, struct bwd_fire *head,
			  struct bwd_fire *tail, uint64_t n)
{
	s->queued += n;
	COUNT(s, queued, n);
	tail->next = s->queue_head;
	s->queue_head = head;
	if (!s->queue_tail)
		s->queue_tail = tail;
	bwd_work_add(s);
}

void bwd_fire_free(struct bwd_session *s, struct bwd_fire *f)
{
	s->acct->fires--;
	bwd_acct_charge(s->state, s->acct, -(int64_t)BWD_FIRE_COST(f->payload_len));
	free(f);
}

/* ---- fires in flight ------------------------------------------------------- */

/* f is handed out at now: its first hand-out counts its queue wait (a
 * fire read back at a restart has no lane and is not counted). */
static void count_handed(struct bwd_state *st, struct bwd_fire *f, uint64_t now)
{
	f->handed_ns = now;
	if (!f->sent && f->lane != BWD_LANE_NONE)
		bwd_hist_since(&st->wait[f->lane], f->deadline_ns, now);
}

/* An Ack that arrived at now completes f. */
static void count_acked(struct bwd_state *st, const struct bwd_fire *f,
			uint64_t now)
{
	bwd_hist_since(&st->ack, f->handed_ns, now);
}

const struct bwd_hist *bwd_state_queue_wait(const struct bwd_state *st,
					    unsigned lane)
{
	return &st->wait[lane];
}

const struct bwd_hist *bwd_state_ack_latency(const struct bwd_state *st)
{
	return &st->ack;
}

/* f (in flight to m, unlinked by the caller) is done. */
static void flight_done(struct bwd_member *m, struct bwd_fire *f)
{
	struct bwd_session *s = m->session;
	struct bwd_state *st = s->state;

	bwd_state_journal_seq(s, BWD_REC_DONE, f->seq);
	m->flight--;
	s->in_flight--;
	COUNT(s, in_flight, -1);
	COUNT(s, acked, 1);
	st->stats.bytes -= bwd_fire_bytes(f);
	bwd_fire_free(s, f);
}

/* The fires in flight to m from its head up to `last` (NULL: all) go back
 * to the front of the session's queue, in delivery order; those whose
 * frame reached the socket whole are marked, since the consumer may have
 * read them.  One not written out (or only in part) cannot have been. */
void bwd_member_take_back(struct bwd_member *m, struct bwd_fire *last)
{
	struct bwd_session *s = m->session;
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
		n++;
	}
	m->flight -= n;
	s->in_flight -= n;
	COUNT(s, in_flight, -(int64_t)n);
	COUNT(s, redelivered, n);
	requeue_front(s, head, tail, n);
}

/* When f, in flight to m (with an ack timeout), is to be taken back. */
static uint64_t take_back_at(const struct bwd_member *m, const struct bwd_fire *f)
{
	return f->handed_ns > UINT64_MAX - m->ack_timeout_ns ? UINT64_MAX :
		f->handed_ns + m->ack_timeout_ns;
}

static void ack_timer_arm(struct bwd_member *m)
{
	if (m->ack_armed || !m->flight_head || !m->ack_timeout_ns)
		return;
	bwd_state_own_arm(m->session->state, &m->due, take_back_at(m, m->flight_head),
		&m->ack_handle, &m->ack_armed);
}

/* The ack timeout: what m has held too long goes back. */
void bwd_member_ack_expired(struct bwd_member *m, uint64_t now_ns)
{
	struct bwd_fire *last = NULL;

	m->ack_armed = false;
	for (struct bwd_fire *f = m->flight_head; f && take_back_at(m, f) <= now_ns;
	     f = f->next)
		last = f;
	if (last) {
		bwd_log(BWD_LOG_DEBUG, "a consumer of session '%s' held fires past its ack timeout: taken back",
			m->session->name ? m->session->name : "(anonymous)");
		bwd_member_take_back(m, last);
	}
	ack_timer_arm(m);
	bwd_ready_add(m);
}

bool bwd_state_has_work(const struct bwd_state *st)
{
	return st->work.head != NULL;
}

/* ---- redeliveries ---------------------------------------------------------- */

/* s's head is a taken-back fire its owner may not hand out yet: s leaves
 * the work list until then.  False when no timer can be had (the fire
 * then goes unpaced: nothing is lost for want of memory). */
static bool pace_wait(struct bwd_session *s, uint64_t now)
{
	uint64_t wait;
	bool armed = false;

	if (bwd_acct_pace(s->acct, now, &wait))
		return false;
	bwd_state_own_arm(s->state, &s->pace, now + wait, &s->pace_handle, &armed);
	if (!armed)
		return false;
	s->paced = true;
	bwd_work_remove(s);
	return true;
}

struct bwd_fire *bwd_state_next_delivery(struct bwd_state *st,
					 struct bwd_member **out)
{
	struct bwd_uid *u;

	while ((u = st->work.head)) {
		struct bwd_session *s = u->work.head;
		struct bwd_member *m = s->ready_head;
		struct bwd_fire *f;

		if (!s->queue_head || !m || s->held || s->paced) {
			bwd_work_remove(s);
			continue;
		}
		if (s->queue_head->taken_back && pace_wait(s, bwd_state_now(st)))
			continue;
		bwd_ready_remove(m);
		if (!member_may_take(m))
			continue;
		f = bwd_fire_dequeue(s);
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
		st->stats.bytes += bwd_fire_bytes(f);
		count_handed(st, f, bwd_state_now(st));
		if (!f->sent) {
			bwd_state_journal_seq(s, BWD_REC_SENT, f->seq);
			f->sent = true;
		}
		ack_timer_arm(m);
		/* Whatever goes, a batch or not (a redelivery, a fire that
		 * waited for credit), is a write a tolerant fire due by now
		 * missed if its coarse lane fires it later (PROTOCOL.md). */
		if (s->ncoalesce)
			s->let_go_ns = f->handed_ns;
		bwd_ready_add(m);
		/* The next fire is another uid's, and this uid's next is
		 * another of its sessions. */
		bwd_work_remove(s);
		bwd_work_add(s);
		uid_work_remove(st, u);
		if (u->work.head)
			uid_work_add(st, u);
		*out = m;
		return f;
	}
	return NULL;
}

int bwd_member_ack(struct bwd_member *m, uint64_t delivery, bool cumulative,
		   uint64_t *acked)
{
	struct bwd_fire *f, **pp;
	uint64_t n = 0, now;

	*acked = 0;
	if (delivery == 0 || delivery > m->last_delivery)
		return BITWHEEL__V1__ERROR_CODE__BAD_REQUEST;
	now = bwd_state_now(m->session->state);
	if (cumulative) {
		while ((f = m->flight_head) && f->delivery <= delivery) {
			m->flight_head = f->next;
			count_acked(m->session->state, f, now);
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
			count_acked(m->session->state, f, now);
			flight_done(m, f);
			n = 1;
		}
	}
	*acked = n;
	if (n)
		bwd_ready_add(m);
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
		bwd_ready_add(m);
}

void bwd_member_set_room(struct bwd_member *m, bool room)
{
	m->room = room;
	if (room)
		bwd_ready_add(m);
}
