/*
 * delivery.c - the way from a session's queue to its consumers.
 *
 * A fire waits at its session's queue (a FIFO, taken-back fires at the
 * front) until the pump (server.c) asks bwd_state_next_delivery() for the
 * next one to write; it is then in flight to one member, numbered with its
 * next delivery number, until an Ack (bwd_member_ack), or with auto_ack
 * its frame leaving the connection's buffer (bwd_member_written), makes
 * it done, or it is taken back (the member leaves, its ack deadline
 * passes) to the queue, or given back by a Release ("Fires that fail").
 *
 * Fires in flight.  A member's are in a doubly linked list in delivery
 * order (through next and pprev, the delayed list's links, which a fire
 * in flight does not use), which cumulative acks, drains and take-backs
 * walk from its head, and, a consumer's, in a map by delivery number
 * (flights, a bwd_map whose node takes the place of the fire's due, which
 * nothing uses in flight either), where a single Ack, a Release or a
 * Touch finds its fire: delivery numbers only grow, but fires leave out
 * of order and one may stay in flight while millions pass, so no ring of
 * the window's size could index them.  The map's buckets, 8 bytes times
 * at most the next power of two of the largest flight the consumer had
 * (never more than its window), are charged to the session's owner as
 * its fires are; the fire stays 144 bytes.
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
 * Fires that fail.  A hand-out counts in the fire's deliveries; of the
 * fires a take-back returns together, only the oldest whose frame was
 * written keeps its count (take_back_chain).  Back, a fire goes to the
 * queue's front the first time, to its tail once it failed before, and
 * past its session's limit (bwd_session_max_deliveries) to the tail of
 * its dead-letter session (created if need be) with a struct bwd_dead of
 * its history; Kick brings such fires back.  A Release with a delay puts
 * the fire in the wheel (BWD_DUE_RETRY, its handle in the fire, in its
 * session's delayed list) until it joins the tail.  A Touch moves one
 * fire's ack deadline out of delivery order: a member's touched fires are
 * in a binary heap by ack deadline (touch_heap, each fire's place in it
 * in heap_at, where a delayed fire keeps its retry; grown by doubling to
 * at most the window, charged as the map), and it keeps the first
 * untouched one (untouched), whose deadline is the earliest of the
 * others', which come in delivery order; its ack timer is armed at the
 * earlier of that and the heap's top, and an ack timeout takes back the
 * untouched ones due from the first on and the touched ones due from the
 * heap, merged in delivery order.  A Touch only ever brings the timer
 * earlier.
 *
 * Monitoring.  A fire remembers when it was last handed out (handed_ns);
 * its first hand-out adds the wait since its deadline to its lane's
 * queue-wait histogram (count_handed), an Ack adds the time since the
 * hand-out of each fire it completes to the ack-latency one (count_acked;
 * auto-ack's completion on write is not an ack).  One clock read per
 * hand-out and per Ack, a binary search of BWD_LATENESS_LE_NS per fire.
 *
 * Costs: a hand-out, an ack, single or cumulative, in order or not, and a
 * drain are O(1) per fire they complete (a map insert or removal, O(1) on
 * average, with its seed the daemon's random one: a client chooses which
 * fires it acknowledges, not where they land), and O(log(touched fires))
 * more for a touched one; a Release and a Touch the same (a Touch's
 * timer, one wheel operation at most); an ack timeout O(what it takes
 * back), log(touched) for each touched one and k log k to sort k of them
 * in delivery order; the first untouched fire moves past each touched one
 * once, whoever moves it; taking back a member's fires is O(its flight);
 * a dead-lettering O(1) (a session lookup, an allocation); a Kick O(the
 * dead letters it looks at, at most BWD_MAX_KICK); a hold, a pace wait, a
 * delay, O(1) and a wheel operation.
 */
#include <errno.h>
#include <inttypes.h>
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

/* s's owner is past its journal share: no hand-out (no SENT) until the
 * next generation, whose start adds s again (account.c). */
static bool over_share(const struct bwd_session *s)
{
	return s->name && bwd_acct_journal_over(s->state, s->acct);
}

void bwd_work_add(struct bwd_session *s)
{
	if (s->queue_head && s->ready_head && !s->held && !s->paced &&
	    !over_share(s)) {
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
	uint64_t leeway, bound, end, at;

	/* Every fire asks: most sessions do not coalesce, and pay no more. */
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
	leeway = bwd_leeway(&st->opt->wheel, t->leeway_ns, bwd_timer_period(t));
	bound = bwd_lane_late_ns(&st->opt->wheel.oneshot);
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

struct bwd_fire *bwd_fire_new(struct bwd_state *st, const struct bwd_fire *f)
{
	struct bwd_fire *q = bwd_block_get(st, BWD_BLOCK_FIRE, f->payload_len);

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

void bwd_dead_record(const struct bwd_dead *d, struct bwd_record *r)
{
	r->name = d->origin;
	r->name_len = (uint8_t)strlen(d->origin);
	r->dl_deliveries = d->deliveries;
	r->dl_first_ns = d->first_ns;
	r->last_ns = d->last_ns;
	r->dead_ns = d->dead_ns;
	r->why = d->why;
}

void bwd_dead_count(struct bwd_session *s, int n)
{
	s->dead_letters += (uint64_t)(int64_t)n;
	bwd_acct_charge(s->state, s->acct, n * (int64_t)BWD_DEAD_COST);
}

/* A fire out of flight (or delayed, or from another session) joins the
 * queue's tail; its bytes are counted already. */
static void requeue_tail(struct bwd_session *s, struct bwd_fire *f)
{
	s->queued++;
	COUNT(s, queued, 1);
	bwd_fire_link(s, f);
}

void bwd_fire_free(struct bwd_session *s, struct bwd_fire *f)
{
	if (f->dead) {
		bwd_dead_count(s, -1);
		free(f->dead);
	}
	s->acct->fires--;
	bwd_acct_charge(s->state, s->acct, -(int64_t)BWD_FIRE_COST(f->payload_len));
	bwd_block_put(s->state, BWD_BLOCK_FIRE, f, f->payload_len);
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

/* m's indexes of its flight (the map's buckets, the touched heap's
 * array) grew (or went) by n bytes: charged to its session's owner, as
 * its fires are. */
static void flights_charge(struct bwd_member *m, int64_t n)
{
	struct bwd_state *st = m->session->state;

	st->stats.bytes += (uint64_t)n;
	bwd_acct_charge(st, m->session->acct, n);
}

/* The empty map's buckets are the member's own, like the member itself:
 * the daemon's, in Stats' memory, not the owner's bytes (a consumer that
 * holds nothing holds none of them); what the map grows by is charged. */
int bwd_member_flights_init(struct bwd_member *m)
{
	if (!m->consumer)
		return 0;
	if (bwd_map_init(&m->flights, m->session->state->seed))
		return -ENOMEM;
	m->session->state->stats.bytes += bwd_map_bytes(&m->flights);
	m->flights_base = bwd_map_bytes(&m->flights);
	return 0;
}

void bwd_member_flights_fini(struct bwd_member *m)
{
	if (!m->flights.bucket)
		return;
	flights_charge(m, -(int64_t)(bwd_map_bytes(&m->flights) - m->flights_base +
				     m->touch_cap * sizeof(*m->touch_heap)));
	m->session->state->stats.bytes -= m->flights_base;
	bwd_map_fini(&m->flights);
	free(m->touch_heap);
}

/* ---- touched fires: a heap by ack deadline --------------------------------- */

static void heap_set(struct bwd_member *m, uint32_t i, struct bwd_fire *f)
{
	m->touch_heap[i] = f;
	f->heap_at = i + 1;
}

static void heap_up(struct bwd_member *m, uint32_t i)
{
	struct bwd_fire *f = m->touch_heap[i];

	while (i > 0 && m->touch_heap[(i - 1) / 2]->ack_by_ns > f->ack_by_ns) {
		heap_set(m, i, m->touch_heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	heap_set(m, i, f);
}

static void heap_down(struct bwd_member *m, uint32_t i)
{
	struct bwd_fire *f = m->touch_heap[i];

	for (uint32_t c; (c = 2 * i + 1) < m->touched; i = c) {
		if (c + 1 < m->touched &&
		    m->touch_heap[c + 1]->ack_by_ns < m->touch_heap[c]->ack_by_ns)
			c++;
		if (f->ack_by_ns <= m->touch_heap[c]->ack_by_ns)
			break;
		heap_set(m, i, m->touch_heap[c]);
	}
	heap_set(m, i, f);
}

/* f, touched, moved its ack deadline: its place in the heap follows. */
static void heap_fix(struct bwd_member *m, struct bwd_fire *f)
{
	heap_up(m, (uint32_t)f->heap_at - 1);
	heap_down(m, (uint32_t)f->heap_at - 1);
}

/* f leaves the heap (untouched again, out of flight). */
static void heap_remove(struct bwd_member *m, struct bwd_fire *f)
{
	struct bwd_fire *last = m->touch_heap[--m->touched];
	uint32_t i = (uint32_t)f->heap_at - 1;

	f->heap_at = 0;
	if (last == f)
		return;
	heap_set(m, i, last);
	heap_fix(m, last);
}

/* Room in m's heap for one more fire (at most its window's: every fire
 * in flight touched); false without memory. */
static bool heap_room(struct bwd_member *m)
{
	uint32_t cap = m->touch_cap ? 2 * m->touch_cap : 8;
	struct bwd_fire **h;

	if (m->touched < m->touch_cap)
		return true;
	if (cap > m->window)
		cap = m->window;
	h = realloc(m->touch_heap, cap * sizeof(*h));
	if (!h)
		return false;
	flights_charge(m, (int64_t)((cap - m->touch_cap) * sizeof(*h)));
	m->touch_heap = h;
	m->touch_cap = cap;
	return true;
}

/* The first fire in flight from f on that is not touched; NULL: none. */
static struct bwd_fire *first_untouched(struct bwd_fire *f)
{
	while (f && f->heap_at)
		f = f->next;
	return f;
}

/* ---- the flight --------------------------------------------------------------- */

/* f, just handed out to m, joins its flight: the list's tail, and the map
 * by its delivery number (a map that grows is charged). */
static void flight_link(struct bwd_member *m, struct bwd_fire *f, uint64_t delivery)
{
	size_t was = bwd_map_bytes(&m->flights);

	f->next = NULL;
	f->pprev = m->flight_tail ? &m->flight_tail->next : &m->flight_head;
	*f->pprev = f;
	m->flight_tail = f;
	f->flight_node.key = delivery;
	f->heap_at = 0;
	bwd_map_insert(&m->flights, &f->flight_node);
	if (bwd_map_bytes(&m->flights) != was)
		flights_charge(m, (int64_t)(bwd_map_bytes(&m->flights) - was));
	m->flight++;
	if (!m->untouched)
		m->untouched = f;
}

/* f leaves m's flight list and its deadlines' order (not its map, nor
 * its count): O(log(touched)) for a touched fire, else O(1), but for the
 * touched fires the first untouched one moves past, each once. */
static void flight_cut(struct bwd_member *m, struct bwd_fire *f)
{
	if (f->heap_at)
		heap_remove(m, f);
	else if (m->untouched == f)
		m->untouched = first_untouched(f->next);
	*f->pprev = f->next;
	if (f->next)
		f->next->pprev = f->pprev;
	else
		m->flight_tail = f->pprev == &m->flight_head ? NULL :
			bwd_container_of(f->pprev, struct bwd_fire, next);
	f->next = NULL;
	f->pprev = NULL;
}

/* f leaves m's map; out of flight, its due says so again (the map's node
 * had its place). */
static void flight_forget(struct bwd_member *m, struct bwd_fire *f)
{
	bwd_map_remove(&m->flights, &f->flight_node);
	f->due = (struct bwd_due){ .kind = BWD_DUE_FIRE };
}

/* f leaves m's flight altogether: O(1) on average. */
static void flight_unlink(struct bwd_member *m, struct bwd_fire *f)
{
	flight_cut(m, f);
	flight_forget(m, f);
	m->flight--;
}

/* The fire in flight to m numbered delivery; NULL when none.  O(1) on
 * average: a map lookup. */
static struct bwd_fire *flight_find(const struct bwd_member *m, uint64_t delivery)
{
	struct bwd_map_node *n = bwd_map_find(&m->flights, delivery);

	return n ? bwd_container_of(n, struct bwd_fire, flight_node) : NULL;
}

/* f (in flight to m) is done. */
static void flight_done(struct bwd_member *m, struct bwd_fire *f)
{
	struct bwd_session *s = m->session;
	struct bwd_state *st = s->state;
	static const uint64_t le[BWD_DELIVERIES_BOUNDS] = BWD_DELIVERIES_LE;

	flight_unlink(m, f);
	bwd_state_journal_seq(s, BWD_REC_DONE, f->seq);
	bwd_hist_add(&st->deliveries, le, BWD_DELIVERIES_BOUNDS, f->deliveries);
	s->in_flight--;
	COUNT(s, in_flight, -1);
	COUNT(s, acked, 1);
	st->stats.bytes -= bwd_fire_bytes(f);
	bwd_fire_free(s, f);
}

/* ---- fires that fail ------------------------------------------------------ */

uint32_t bwd_session_max_deliveries(const struct bwd_session *s)
{
	if (!s->name)
		return 0;
	return s->policy_set ? s->max_deliveries : s->state->opt->limits.max_deliveries;
}

int bwd_session_dead_letter_name(const struct bwd_session *s,
				 char out[BWP_SESSION_NAME_MAX + 1])
{
	static const char suffix[] = ".dead";
	size_t n;

	if (!s->name)
		return -ENOENT;
	if (s->dead_letter) {
		strcpy(out, s->dead_letter);
		return 0;
	}
	n = strlen(s->name);
	if (n + sizeof(suffix) - 1 > BWP_SESSION_NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(out, s->name, n);
	memcpy(out + n, suffix, sizeof(suffix));
	return 0;
}

/* f moves from session `from` to `to`'s tail with a new seq (journaled as
 * one MOVE, so that the journal's order of its records is the order
 * things happened); its deliveries count from 0 there. */
static void move_to(struct bwd_session *from, struct bwd_session *to,
		    struct bwd_fire *f, bool kick)
{
	struct bwd_record r = {
		.type = BWD_REC_MOVE, .sid = from->id, .seq = f->seq, .to = to->id,
		.to_seq = to->next_seq, .flags = kick ? BWD_RECF_KICK : 0,
	};

	if (f->dead)
		bwd_dead_record(f->dead, &r);
	bwd_state_journal(from->state, from->acct, &r);
	f->seq = to->next_seq++;
	f->deliveries = 0;
	f->first_ns = 0;
	f->why = BWD_TB_NONE;
	f->sent = f->taken_back = false;
	requeue_tail(to, f);
}

/*
 * f, out of s's flight (its counts moved already), reached s's delivery
 * limit: it goes to the tail of s's dead-letter session (created if need
 * be, whatever the owner's session budget: one per session at most),
 * with its history.  False when it cannot (no dead-letter name, no
 * memory): it then stays with s.
 */
static bool dead_letter(struct bwd_session *s, struct bwd_fire *f, uint64_t now)
{
	char name[BWP_SESSION_NAME_MAX + 1];
	struct bwd_session *to;
	struct bwd_dead *d;

	if (bwd_session_dead_letter_name(s, name) ||
	    bwd_session_named(s->state, s->owner, name, &to) || to == s)
		return false;
	d = malloc(sizeof(*d));
	if (!d)
		return false;
	*d = (struct bwd_dead){
		.deliveries = f->deliveries, .first_ns = f->first_ns,
		.last_ns = f->handed_ns, .dead_ns = now, .why = f->why,
	};
	strcpy(d->origin, s->name);
	f->dead = d;
	bwd_dead_count(to, 1);
	s->dead_lettered++;
	s->state->stats.dead_lettered++;
	bwd_log(BWD_LOG_INFO, "session '%s' (uid %ld): key %" PRIu64 " dead-lettered to '%s' after %" PRIu32 " deliveries",
		s->name, (long)s->owner, f->key, to->name, f->deliveries);
	move_to(s, to, f, false);
	return true;
}

/* Whether f, out of flight, has had its last allowed hand-out in s (a
 * dead letter never goes on to another dead-letter session). */
static bool at_limit(const struct bwd_session *s, const struct bwd_fire *f)
{
	uint32_t max = bwd_session_max_deliveries(s);

	return max && f->deliveries >= max && !f->dead;
}

/*
 * The chain of n fires head.. (cut from m's flight list by the caller, in
 * delivery order, still in its map) goes back, for why.  Those whose frame
 * reached the socket whole are marked (the consumer may have read them);
 * one not written out cannot have been read, and its hand-out does not
 * count.  Of the written ones only the oldest keeps its hand-out counted:
 * the one its handler was most likely on when it died or stalled; the
 * others were waiting behind it, and a poison fire's crashes must not
 * drive them to the limit.  Then each fire past its limit goes to the
 * dead-letter session; each that failed before (its second counted
 * hand-out) to the queue's tail, to take its turn behind the others
 * instead of blocking them; the rest to the front, in delivery order.
 */
static void take_back_chain(struct bwd_member *m, struct bwd_fire *head,
			    uint64_t n, enum bwd_take_back why)
{
	struct bwd_session *s = m->session;
	struct bwd_fire *front = NULL, **fp = &front, *ftail = NULL, *f, *next;
	uint64_t nfront = 0, now = 0;
	bool blamed = false;

	m->flight -= n;
	s->in_flight -= n;
	COUNT(s, in_flight, -(int64_t)n);
	COUNT(s, redelivered, n);
	for (f = head; f; f = next) {
		bool written = f->wire_end <= m->drained;

		next = f->next;
		f->next = NULL;
		f->pprev = NULL;
		flight_forget(m, f);
		f->redelivered |= written;
		if (written && !blamed)
			blamed = true;
		else if (f->deliveries)
			f->deliveries--;
		f->taken_back = true;
		f->why = (uint8_t)why;
		if (at_limit(s, f)) {
			if (!now)
				now = bwd_state_now(s->state);
			if (dead_letter(s, f, now))
				continue;
		}
		if (f->deliveries >= 2) {
			requeue_tail(s, f);
			continue;
		}
		*fp = ftail = f;
		fp = &f->next;
		nfront++;
	}
	if (front)
		requeue_front(s, front, ftail, nfront);
}

/* Every fire in flight to m goes back (take_back_chain). */
void bwd_member_take_back(struct bwd_member *m, enum bwd_take_back why)
{
	struct bwd_fire *head = m->flight_head;

	if (!head)
		return;
	m->flight_head = m->flight_tail = NULL;
	m->touched = 0;
	m->untouched = NULL;
	take_back_chain(m, head, m->flight, why);
}

/*
 * m's ack timer, unarmed, at its earliest ack deadline: the first
 * untouched fire's (theirs come in delivery order) or the touched heap's
 * top, O(1).  Armed, it is never later than that deadline, but may be
 * earlier: fires acknowledged since, or a Touch that moved the earliest
 * later, leave it as it is (ack_timer_earlier), and when it fires for
 * nothing, bwd_member_ack_expired takes back nothing and arms it again.
 */
static void ack_timer_arm(struct bwd_member *m)
{
	uint64_t at;

	if (m->ack_armed || !m->flight_head || !m->ack_timeout_ns)
		return;
	at = m->untouched ? m->untouched->ack_by_ns : UINT64_MAX;
	if (m->touched && m->touch_heap[0]->ack_by_ns < at)
		at = m->touch_heap[0]->ack_by_ns;
	m->ack_at = at;
	bwd_state_own_arm(m->session->state, &m->due, at, &m->ack_handle, &m->ack_armed);
}

/* f, in flight to m, has a new ack deadline (handed out, touched): an
 * armed timer moves to it if it is earlier (then the earliest of all),
 * O(1); an unarmed one is armed. */
static void ack_timer_earlier(struct bwd_member *m, const struct bwd_fire *f)
{
	struct bwd_state *st = m->session->state;

	if (!m->ack_armed) {
		ack_timer_arm(m);
		return;
	}
	if (f->ack_by_ns >= m->ack_at)
		return;
	bwd_state_own_disarm(st, m->ack_handle, &m->ack_armed);
	m->ack_at = f->ack_by_ns;
	bwd_state_own_arm(st, &m->due, m->ack_at, &m->ack_handle, &m->ack_armed);
}

static int by_delivery(const void *a, const void *b)
{
	uint64_t x = bwd_fire_delivery(*(struct bwd_fire *const *)a),
		 y = bwd_fire_delivery(*(struct bwd_fire *const *)b);

	return x < y ? -1 : x > y;
}

/*
 * The ack timeout: what m has held past its ack deadline goes back, in
 * delivery order: the untouched fires due, a prefix of them from the
 * first, and the touched ones due, from the heap's top, put behind what
 * is left of it (its array's tail) and sorted there, the two merged.
 * O(those it takes back, times log(touched) for touched ones), and the
 * touched fires the first untouched one moves past.
 */
void bwd_member_ack_expired(struct bwd_member *m, uint64_t now_ns)
{
	struct bwd_fire *a = NULL, **ap = &a, *chain = NULL, **cp = &chain, *f, **b;
	uint64_t n = 0;
	uint32_t k = 0, i = 0;

	m->ack_armed = false;
	while ((f = m->untouched) && f->ack_by_ns <= now_ns) {
		flight_cut(m, f);
		*ap = f;
		ap = &f->next;
		n++;
	}
	while (m->touched && (f = m->touch_heap[0])->ack_by_ns <= now_ns) {
		flight_cut(m, f);
		m->touch_heap[m->touched] = f;
		k++;
	}
	/* No heap yet, nothing touched: no pointer to offset (NULL + 0 is
	 * undefined). */
	b = m->touch_heap ? m->touch_heap + m->touched : NULL;
	if (k > 1)
		qsort(b, k, sizeof(*b), by_delivery);
	while (a || i < k) {
		if (a && (i == k || bwd_fire_delivery(a) < bwd_fire_delivery(b[i]))) {
			f = a;
			a = a->next;
		} else {
			f = b[i++];
		}
		*cp = f;
		cp = &f->next;
	}
	*cp = NULL;
	n += k;
	if (n) {
		bwd_log(BWD_LOG_DEBUG, "a consumer of session '%s' held fires past their ack deadline: taken back",
			m->session->name ? m->session->name : "(anonymous)");
		take_back_chain(m, chain, n, BWD_TB_ACK_TIMEOUT);
	}
	ack_timer_arm(m);
	bwd_ready_add(m);
}

bool bwd_state_has_work(const struct bwd_state *st)
{
	return st->work.head != NULL;
}

/* Every hand-out is journaled, with its time and the count with it: the
 * count and the first hand-out survive a restart (a take-back that does
 * not count it is not journaled: a crash may count it). */
static void journal_sent(struct bwd_session *s, const struct bwd_fire *f)
{
	struct bwd_record r;

	if (!bwd_journaled(s))
		return;
	r = (struct bwd_record){
		.type = BWD_REC_SENT, .flags = BWD_RECF_HISTORY, .sid = s->id,
		.seq = f->seq, .fired_ns = f->first_ns,
		.deliveries = f->deliveries,
	};
	bwd_state_journal(s->state, s->acct, &r);
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

		if (!s->queue_head || !m || s->held || s->paced || over_share(s)) {
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
		/* Not written yet: no drain may complete it (auto_ack) before
		 * the connection says where its frame ends. */
		f->wire_end = UINT64_MAX;
		flight_link(m, f, ++m->last_delivery);
		s->in_flight++;
		COUNT(s, in_flight, 1);
		st->stats.bytes += bwd_fire_bytes(f);
		count_handed(st, f, bwd_state_now(st));
		f->ack_by_ns = !m->ack_timeout_ns ? UINT64_MAX :
			f->handed_ns > UINT64_MAX - m->ack_timeout_ns ? UINT64_MAX :
			f->handed_ns + m->ack_timeout_ns;
		if (!f->first_ns)
			f->first_ns = f->handed_ns;
		if (f->deliveries < UINT32_MAX)
			f->deliveries++;
		journal_sent(s, f);
		f->sent = true;
		ack_timer_earlier(m, f);
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
	struct bwd_fire *f;
	uint64_t n = 0, now;

	*acked = 0;
	if (delivery == 0 || delivery > m->last_delivery)
		return BITWHEEL__V1__ERROR_CODE__BAD_REQUEST;
	now = bwd_state_now(m->session->state);
	if (cumulative) {
		while ((f = m->flight_head) && bwd_fire_delivery(f) <= delivery) {
			count_acked(m->session->state, f, now);
			flight_done(m, f);
			n++;
		}
	} else if ((f = flight_find(m, delivery))) {
		count_acked(m->session->state, f, now);
		flight_done(m, f);
		n = 1;
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
		flight_done(m, f);
		any = true;
	}
	if (any)
		bwd_ready_add(m);
}

void bwd_member_set_room(struct bwd_member *m, bool room)
{
	m->room = room;
	if (room)
		bwd_ready_add(m);
}

/* ---- release, touch, kick ------------------------------------------------ */

/* f, delayed, waits in the wheel until ready_ns, in s's delayed list.
 * False without memory for its timer. */
static bool delay(struct bwd_session *s, struct bwd_fire *f)
{
	bool armed = false;

	f->due.kind = BWD_DUE_RETRY;
	bwd_state_own_arm(s->state, &f->due, f->ready_ns, &f->retry, &armed);
	if (!armed)
		return false;
	f->delayed_in = s;
	f->next = s->delayed_head;
	if (f->next)
		f->next->pprev = &f->next;
	f->pprev = &s->delayed_head;
	s->delayed_head = f;
	s->delayed++;
	return true;
}

static void undelay(struct bwd_session *s, struct bwd_fire *f)
{
	*f->pprev = f->next;
	if (f->next)
		f->next->pprev = f->pprev;
	f->next = NULL;
	f->pprev = NULL;
	f->due.kind = BWD_DUE_FIRE;
	s->delayed--;
}

void bwd_fire_ready(struct bwd_fire *f)
{
	struct bwd_session *s = f->delayed_in;

	undelay(s, f);
	requeue_tail(s, f);
}

void bwd_fire_delay(struct bwd_session *s, struct bwd_fire *f)
{
	if (!delay(s, f))
		requeue_tail(s, f);
}

void bwd_session_drop_delayed(struct bwd_session *s)
{
	struct bwd_fire *f;

	while ((f = s->delayed_head)) {
		bool armed = true;

		bwd_state_own_disarm(s->state, f->retry, &armed);
		undelay(s, f);
		s->state->stats.bytes -= bwd_fire_bytes(f);
		bwd_fire_free(s, f);
	}
}

int bwd_member_release(struct bwd_member *m, uint64_t delivery,
		       uint64_t delay_ns, struct bwd_release *out)
{
	struct bwd_session *s = m->session;
	struct bwd_fire *f;
	uint64_t now;

	memset(out, 0, sizeof(*out));
	if (delivery == 0 || delivery > m->last_delivery)
		return BITWHEEL__V1__ERROR_CODE__BAD_REQUEST;
	if (!(f = flight_find(m, delivery)))
		return 0;
	flight_unlink(m, f);
	s->in_flight--;
	COUNT(s, in_flight, -1);
	s->state->stats.released++;
	now = bwd_state_now(s->state);
	f->why = BWD_TB_RELEASED;
	f->taken_back = true;
	out->released = true;
	out->deliveries = f->deliveries;
	if (at_limit(s, f) && dead_letter(s, f, now)) {
		out->dead_lettered = true;
	} else {
		struct bwd_record r = {
			.type = BWD_REC_RELEASE, .sid = s->id, .seq = f->seq,
			.ready_ns = now + delay_ns,
		};

		f->ready_ns = out->ready_ns = r.ready_ns;
		if (s->name)
			bwd_state_journal(s->state, s->acct, &r);
		if (delay_ns)
			bwd_fire_delay(s, f);
		else
			requeue_tail(s, f);
	}
	bwd_ready_add(m);
	return 0;
}

int bwd_member_touch(struct bwd_member *m, uint64_t delivery,
		     uint64_t timeout_ns, bool *touched, uint64_t *deadline_ns)
{
	struct bwd_fire *f;
	uint64_t now, at;

	*touched = false;
	*deadline_ns = 0;
	if (delivery == 0 || delivery > m->last_delivery)
		return BITWHEEL__V1__ERROR_CODE__BAD_REQUEST;
	if (!(f = flight_find(m, delivery)))
		return 0;
	*touched = true;
	if (!m->ack_timeout_ns)
		return 0;
	now = bwd_state_now(m->session->state);
	if (!timeout_ns)
		timeout_ns = m->ack_timeout_ns;
	at = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
	if (at - f->handed_ns > BWD_MAX_HOLD_NS || at < f->handed_ns) {
		*touched = false;
		*deadline_ns = f->handed_ns + BWD_MAX_HOLD_NS;
		return BITWHEEL__V1__ERROR_CODE__HOLD_LIMIT;
	}
	if (!f->heap_at && !heap_room(m)) {
		*touched = false;
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	}
	f->ack_by_ns = *deadline_ns = at;
	if (f->heap_at) {
		heap_fix(m, f);
	} else {
		if (m->untouched == f)
			m->untouched = first_untouched(f->next);
		heap_set(m, m->touched++, f);
		heap_up(m, m->touched - 1);
	}
	m->session->state->stats.touched++;
	ack_timer_earlier(m, f);
	return 0;
}

int bwd_session_kick(struct bwd_session *s, bool has_key, uint64_t key,
		     uint32_t limit, uint64_t *kicked, bool *more)
{
	char name[BWP_SESSION_NAME_MAX + 1];
	struct bwd_session *dl;
	struct bwd_fire **pp, *f, *prev = NULL;
	uint32_t looked = 0;

	*kicked = 0;
	*more = false;
	if (!limit || limit > BWD_MAX_KICK)
		limit = BWD_MAX_KICK;
	if (bwd_session_dead_letter_name(s, name) ||
	    !(dl = bwd_session_find(s->state, s->owner, name)) || dl == s)
		return 0;
	for (pp = &dl->queue_head; (f = *pp); ) {
		if (looked++ == BWD_MAX_KICK || *kicked == limit) {
			*more = true;
			break;
		}
		if (!f->dead || strcmp(f->dead->origin, s->name) ||
		    (has_key && f->key != key)) {
			prev = f;
			pp = &f->next;
			continue;
		}
		*pp = f->next;
		if (dl->queue_tail == f)
			dl->queue_tail = prev;
		f->next = NULL;
		dl->queued--;
		COUNT(dl, queued, -1);
		bwd_dead_count(dl, -1);
		free(f->dead);
		f->dead = NULL;
		move_to(dl, s, f, true);
		(*kicked)++;
	}
	s->state->stats.kicked += *kicked;
	/* Its last dead letter gone with nobody attached: it lingers again
	 * (session_expire kept it). */
	if (*kicked && !dl->dead_letters && !dl->nmembers && !dl->lingering)
		bwd_session_linger(dl);
	return 0;
}

const struct bwd_hist *bwd_state_deliveries(const struct bwd_state *st)
{
	return &st->deliveries;
}
