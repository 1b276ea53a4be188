/*
 * state.c - everything bitwheeld knows: sessions, their timers, and the
 * dual wheel that fires them.
 *
 * Layout.  Named sessions sit in one map keyed by a hash of their name
 * (anonymous sessions belong to their connection alone).  Each session
 * maps its clients' keys to struct bwd_timer, which carries the payload
 * inline and the wheel handle it was scheduled under; the wheel's data
 * pointer is the bwd_timer.  A detached named session also holds a FIFO of
 * fires waiting for the next connection, bounded by max_queued (the oldest
 * goes first).
 *
 * Every change goes through a function here - open, detach, schedule,
 * cancel, fire, hand a fire to a connection, see it delivered - and each
 * change to a named session appends one record to the journal (record.c
 * lists them) as it happens.  Anonymous sessions are never journaled:
 * their timers end with their connection anyway.  A named session's fires
 * carry a sequence number, so that the journal can say which of them were
 * delivered (DONE) whatever order the queue and the connection took.
 *
 * The same records come back through bwd_state_apply() at start-up, from
 * a snapshot (bwd_state_dump() wrote it) and the journals after it; the
 * timers go into the wheel only once the last record is read
 * (bwd_state_restore_finish), so that replaying a timer's history costs
 * map operations, not wheel ones.
 *
 * Costs: schedule, cancel and each fire are O(1) on average (a map lookup,
 * a wheel operation, one record); ending a session is O(its timers + its
 * queue), spread over loop turns TEARDOWN_CHUNK timers at a time when an
 * anonymous session ends with more, so that one client leaving 100,000
 * timers behind does not hold up everyone else's fires; applying a DONE is O(its distance from the queue's head), which
 * is 0 when fires are delivered in order.
 */
#include <errno.h>
#include <inttypes.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "daemon-internal.h"

/* Timers cancelled per loop turn when an anonymous session ends. */
#define TEARDOWN_CHUNK 1024

struct bwd_state {
	struct bw_dual *wheel;
	struct bwd_map sessions;
	struct bwd_map by_id;      /* named sessions by id                   */
	struct bwd_journal *journal;
	struct bwd_session *ending;  /* anonymous sessions being torn down  */
	struct event *reaper;
	uint64_t next_id;
	bool restoring;            /* timers are not in the wheel yet        */
	const struct bwd_options *opt;
	struct event_base *base;
	struct bwd_sink sink;
	struct bwd_state_stats stats;
	uint64_t seed;
};

static uint64_t name_hash(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 0x100000001b3ull;
	return h;
}

static size_t timer_bytes(const struct bwd_timer *t)
{
	return sizeof(*t) + t->payload_len;
}

/* Append a record; a failure leaves the journal failed, which holds every
 * reply back and stops the daemon at the end of the turn (store.c). */
static void journal(struct bwd_state *st, const struct bwd_record *r)
{
	if (st->journal)
		bwd_journal_append(st->journal, r);
}

static void journal_seq(struct bwd_session *s, enum bwd_rec_type type,
			uint64_t seq)
{
	struct bwd_record r = { .type = type, .sid = s->id, .seq = seq };

	journal(s->state, &r);
}

static void free_timer(struct bwd_state *st, struct bwd_timer *t)
{
	bwd_map_remove(&t->session->timers, &t->node);
	st->stats.timers--;
	st->stats.bytes -= timer_bytes(t);
	free(t);
}

/* ---- fire queues --------------------------------------------------------- */

struct bwd_fire *bwd_fire_copy(const struct bwd_fire *f)
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

/* Hold at most max_queued: the oldest fires go first, and are counted. */
static void trim(struct bwd_session *s)
{
	while (s->queued > s->state->opt->limits.max_queued) {
		struct bwd_fire *f = bwd_session_dequeue(s);

		journal_seq(s, BWD_REC_DONE, f->seq);
		free(f);
		s->dropped++;
		s->state->stats.dropped++;
	}
}

static void count_in(struct bwd_session *s, const struct bwd_fire *f)
{
	s->queued++;
	s->state->stats.queued++;
	s->state->stats.bytes += sizeof(*f) + f->payload_len;
}

/* Queue a copy of f at the tail. */
static void enqueue(struct bwd_session *s, const struct bwd_fire *f)
{
	struct bwd_fire *q = bwd_fire_copy(f);

	if (!q) {
		s->dropped++;
		s->state->stats.dropped++;
		return;
	}
	if (s->queue_tail)
		s->queue_tail->next = q;
	else
		s->queue_head = q;
	s->queue_tail = q;
	count_in(s, q);
	trim(s);
}

struct bwd_fire *bwd_session_dequeue(struct bwd_session *s)
{
	struct bwd_fire *f = s->queue_head;

	if (!f)
		return NULL;
	s->queue_head = f->next;
	if (!s->queue_head)
		s->queue_tail = NULL;
	s->queued--;
	/* The caller owns it now, outside every count. */
	s->state->stats.queued--;
	s->state->stats.bytes -= sizeof(*f) + f->payload_len;
	f->next = NULL;
	return f;
}

void bwd_session_sent(struct bwd_session *s, struct bwd_fire *f,
		      uint64_t wire_end)
{
	if (!f->sent)
		journal_seq(s, BWD_REC_SENT, f->seq);
	f->sent = true;
	f->wire_end = wire_end;
	f->next = NULL;
	if (s->sent_tail)
		s->sent_tail->next = f;
	else
		s->sent_head = f;
	s->sent_tail = f;
}

void bwd_session_written(struct bwd_session *s, uint64_t drained)
{
	bool any = false;

	while (s->sent_head && s->sent_head->wire_end <= drained) {
		struct bwd_fire *f = s->sent_head;

		s->sent_head = f->next;
		journal_seq(s, BWD_REC_DONE, f->seq);
		free(f);
		any = true;
	}
	if (!s->sent_head)
		s->sent_tail = NULL;
	/* The client has these bytes now: written out at once, the DONE
	 * records leave a crash only microseconds in which to repeat a fire
	 * (PROTOCOL.md: redelivered). */
	if (any && s->state->journal)
		bwd_journal_write(s->state->journal);
}

void bwd_session_unsend(struct bwd_session *s)
{
	struct bwd_fire *chain = s->sent_head;

	s->sent_head = s->sent_tail = NULL;
	bwd_session_requeue(s, chain);
}

void bwd_session_requeue(struct bwd_session *s, struct bwd_fire *chain)
{
	struct bwd_fire *last = NULL;

	if (!chain)
		return;
	for (struct bwd_fire *f = chain; f; f = f->next) {
		count_in(s, f);
		last = f;
	}
	last->next = s->queue_head;
	s->queue_head = chain;
	if (!s->queue_tail)
		s->queue_tail = last;
	trim(s);
}

/* ---- the wheel's callbacks ----------------------------------------------- */

/* Hand a fire to the session's connection, or queue it. */
static void route(struct bwd_state *st, struct bwd_session *s,
		  const struct bwd_fire *f)
{
	if (s->conn && !s->queue_head &&
	    st->sink.deliver(s->conn, f, st->sink.ctx) == 0)
		return;
	/* Anonymous sessions have no future connection to queue for: the
	 * fire dies with the closing one, like the session's other timers
	 * (not a queue drop, which Stats.dropped counts), and the log says
	 * which. */
	if (!s->name) {
		bwd_log(BWD_LOG_DEBUG, "  undelivered: key %" PRIu64 " deadline %" PRIu64 " count %" PRIu64 " (an anonymous session's closing connection)",
			f->key, f->deadline_ns, f->count);
		return;
	}
	enqueue(s, f);
}

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

static uint64_t on_fire(void *data, uint64_t now_ns, void *ctx)
{
	struct bwd_state *st = ctx;
	struct bwd_timer *t = data;
	struct bwd_session *s = t->session;
	uint64_t next;
	struct bwd_fire f = {
		.key = t->node.key,
		.deadline_ns = t->deadline_ns,
		.fired_ns = now_ns,
		.count = t->period_ns ? ++t->count : 0,
		.late = t->late,
		.has_payload = t->has_payload,
		.payload_len = t->payload_len,
		.payload = t->payload,
	};

	t->late = false;
	if (s->ending) {
		free_timer(st, t);
		return 0;
	}
	if (s->name) {
		struct bwd_record r = {
			.type = BWD_REC_FIRE, .sid = s->id, .key = f.key,
			.deadline_ns = f.deadline_ns, .count = f.count,
			.fired_ns = now_ns,
		};

		f.seq = r.seq = s->next_seq++;
		/* route() hands it to the connection on the same condition. */
		f.sent = s->conn && !s->queue_head;
		r.flags = (f.late ? BWD_RECF_LATE : 0) | (f.sent ? BWD_RECF_SENT : 0);
		journal(st, &r);
	}
	route(st, s, &f);
	next = advance(t, now_ns);
	if (!next)
		free_timer(st, t);
	return next;
}

/* Only a failed allocation in the overflow store gets here. */
static void on_drop(void *data, int reason, void *ctx)
{
	struct bwd_timer *t = data;

	bwd_log(BWD_LOG_ERR, "timer lost by the wheel: %s", bw_strerror(reason));
	free_timer(ctx, t);
}

/* ---- state ----------------------------------------------------------------- */

static void reap(evutil_socket_t fd, short what, void *arg);

int bwd_state_new(const struct bwd_options *opt, struct event_base *base,
		  const struct bwd_sink *sink, uint64_t now_ns,
		  struct bwd_state **out)
{
	struct bwd_state *st = calloc(1, sizeof(*st));
	int err;

	if (!st)
		return -ENOMEM;
	st->opt = opt;
	st->base = base;
	st->sink = *sink;
	if (getrandom(&st->seed, sizeof(st->seed), 0) != sizeof(st->seed))
		st->seed = now_ns;
	st->next_id = 1;
	st->reaper = evtimer_new(base, reap, st);
	if (!st->reaper) {
		err = -ENOMEM;
		goto fail;
	}
	err = bwd_map_init(&st->sessions, st->seed);
	if (!err)
		err = bwd_map_init(&st->by_id, st->seed);
	if (err)
		goto fail;
	err = bw_dual_new(&opt->wheel, now_ns, &st->wheel);
	if (err) {
		bwd_log(BWD_LOG_ERR, "cannot create the wheel: %s", bw_strerror(err));
		err = -ENOMEM;
		goto fail;
	}
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
	if (st->reaper)
		event_free(st->reaper);
	if (st->sessions.bucket) {
		for (size_t b = 0; b <= st->sessions.mask; b++)
			while (st->sessions.bucket[b])
				session_free(bwd_container_of(st->sessions.bucket[b],
							  struct bwd_session, node));
		bwd_map_fini(&st->sessions);
	}
	bwd_map_fini(&st->by_id);
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

/* ---- sessions -------------------------------------------------------------- */

static void linger_expired(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_session *s = arg;

	(void)fd;
	(void)what;
	bwd_log(BWD_LOG_INFO, "session '%s' expired after its linger: %zu timers and %" PRIu64 " queued fires dropped",
		s->name, s->timers.count, s->queued);
	s->state->stats.expired++;
	journal_seq(s, BWD_REC_END, 0);
	session_free(s);
}

static struct bwd_session *session_find(struct bwd_state *st, const char *name)
{
	uint64_t h = name_hash(name);

	for (struct bwd_map_node *n = bwd_map_find(&st->sessions, h); n;
	     n = bwd_map_next(n->next, h)) {
		struct bwd_session *s = bwd_container_of(n, struct bwd_session, node);

		if (strcmp(s->name, name) == 0)
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
	s->state = st;
	s->owner = uid;
	if (bwd_map_init(&s->timers, st->seed))
		goto fail;
	if (name) {
		s->name = strdup(name);
		s->linger = evtimer_new(st->base, linger_expired, s);
		if (!s->name || !s->linger)
			goto fail;
		s->node.key = name_hash(name);
		bwd_map_insert(&st->sessions, &s->node);
		s->id = s->id_node.key = id ? id : st->next_id;
		if (s->id >= st->next_id)
			st->next_id = s->id + 1;
		bwd_map_insert(&st->by_id, &s->id_node);
		st->stats.bytes += strlen(name) + 1;
	}
	st->stats.bytes += sizeof(*s);
	*out = s;
	return 0;
fail:
	if (s->linger)
		event_free(s->linger);
	free(s->name);
	bwd_map_fini(&s->timers);
	free(s);
	return -ENOMEM;
}

/* Each pending timer's key and deadline, and each undelivered fire's:
 * debug level only, like every key the daemon logs. */
static void log_keys(const struct bwd_session *s)
{
	const struct bwd_fire *lists[] = { s->sent_head, s->queue_head };

	for (size_t b = 0; b <= s->timers.mask; b++) {
		for (struct bwd_map_node *n = s->timers.bucket[b]; n; n = n->next) {
			const struct bwd_timer *t = bwd_container_of(n, struct bwd_timer, node);

			bwd_log(BWD_LOG_DEBUG, "  pending: key %" PRIu64 " deadline %" PRIu64 " period %" PRIu64,
				n->key, t->deadline_ns, t->period_ns);
		}
	}
	for (size_t i = 0; i < 2; i++)
		for (const struct bwd_fire *f = lists[i]; f; f = f->next)
			bwd_log(BWD_LOG_DEBUG, "  undelivered: key %" PRIu64 " deadline %" PRIu64 " count %" PRIu64,
				f->key, f->deadline_ns, f->count);
}

void bwd_state_log_pending(const struct bwd_state *st, bool kept)
{
	for (size_t b = 0; b <= st->sessions.mask; b++) {
		for (struct bwd_map_node *n = st->sessions.bucket[b]; n; n = n->next) {
			const struct bwd_session *s = bwd_container_of(n, struct bwd_session, node);

			if (!s->timers.count && !s->queued)
				continue;
			bwd_log(BWD_LOG_NOTICE, "stopping: session '%s' of uid %ld has %zu timers pending and %" PRIu64 " fires queued; %s",
				s->name, (long)s->owner, s->timers.count, s->queued,
				kept ? "the journal keeps them" : "they are lost (no --state-dir)");
			log_keys(s);
		}
	}
}

static void log_cancelled(const struct bwd_session *s)
{
	if (s->name || !s->timers.count)
		return;
	bwd_log(BWD_LOG_INFO, "an anonymous session of uid %ld ended with its connection: %zu pending timers cancelled",
		(long)s->owner, s->timers.count);
	log_keys(s);
}

/* Take a timer out of the wheel, unless it is not in yet. */
static void disarm(struct bwd_state *st, struct bwd_timer *t)
{
	if (!st->restoring)
		bw_dual_cancel(st->wheel, t->handle, NULL);
}

/* End a session: cancel its timers, drop its queue, forget it. */
static void session_free(struct bwd_session *s)
{
	struct bwd_state *st = s->state;
	struct bwd_fire *f;

	if (!s->ending)
		log_cancelled(s);
	for (size_t b = 0; b <= s->timers.mask; b++) {
		while (s->timers.bucket[b]) {
			struct bwd_timer *t = bwd_container_of(s->timers.bucket[b],
							       struct bwd_timer, node);

			disarm(st, t);
			free_timer(st, t);
		}
	}
	while ((f = s->sent_head)) {
		s->sent_head = f->next;
		free(f);
	}
	while ((f = bwd_session_dequeue(s)))
		free(f);
	bwd_map_fini(&s->timers);
	if (s->name) {
		bwd_map_remove(&st->sessions, &s->node);
		bwd_map_remove(&st->by_id, &s->id_node);
		st->stats.bytes -= strlen(s->name) + 1;
		event_free(s->linger);
		free(s->name);
	}
	st->stats.bytes -= sizeof(*s);
	free(s);
}

int bwd_session_open(struct bwd_state *st, const char *name, uid_t uid,
		     struct bwd_conn *conn, struct bwd_session **out,
		     bool *resumed)
{
	struct bwd_session *s = name ? session_find(st, name) : NULL;

	*resumed = s != NULL;
	if (s) {
		if (s->owner != uid && uid != 0)
			return BITWHEEL__V1__ERROR_CODE__PERMISSION_DENIED;
		if (s->conn)
			return BITWHEEL__V1__ERROR_CODE__SESSION_BUSY;
		evtimer_del(s->linger);
	} else if (session_new(st, name, uid, 0, &s)) {
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	} else if (name) {
		struct bwd_record r = {
			.type = BWD_REC_SESSION, .sid = s->id, .uid = (uint32_t)uid,
			.name = name, .name_len = (uint8_t)strlen(name),
		};

		journal(st, &r);
	}
	s->conn = conn;
	*out = s;
	return 0;
}

static void reap(evutil_socket_t fd, short what, void *arg)
{
	static const struct timeval now = { 0, 0 };
	struct bwd_state *st = arg;
	size_t budget = TEARDOWN_CHUNK;

	(void)fd;
	(void)what;
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
			budget--;
		}
		if (!s->timers.count) {
			st->ending = s->next_ending;
			session_free(s);
		}
	}
	/* A timer, not event_active: the loop polls for I/O in between. */
	if (st->ending)
		evtimer_add(st->reaper, &now);
}

/* An anonymous session's end: at once, or a chunk of timers per turn. */
static void session_end(struct bwd_session *s)
{
	static const struct timeval now = { 0, 0 };
	struct bwd_state *st = s->state;

	if (s->timers.count <= TEARDOWN_CHUNK) {
		session_free(s);
		return;
	}
	log_cancelled(s);
	s->ending = true;
	s->next_ending = st->ending;
	st->ending = s;
	evtimer_add(st->reaper, &now);
}

void bwd_session_detach(struct bwd_session *s)
{
	s->conn = NULL;
	if (!s->name) {
		session_end(s);
		return;
	}
	bwd_server_timer_add(s->linger, s->state->opt->limits.linger_ns);
}

/* ---- timers ---------------------------------------------------------------- */

static struct bwd_timer *timer_find(struct bwd_session *s, uint64_t key)
{
	struct bwd_map_node *n = bwd_map_find(&s->timers, key);

	return n ? bwd_container_of(n, struct bwd_timer, node) : NULL;
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
		.node.key = req->key,
		.session = s,
		.deadline_ns = req->deadline_ns,
		.period_ns = req->period_ns,
		.payload_len = req->payload_len,
		.has_payload = req->has_payload,
	};
	if (req->payload_len)
		memcpy(t->payload, req->payload, req->payload_len);
	return t;
}

static void timer_add(struct bwd_session *s, struct bwd_timer *t)
{
	bwd_map_insert(&s->timers, &t->node);
	s->state->stats.timers++;
	s->state->stats.bytes += timer_bytes(t);
}

static int timer_arm(struct bwd_state *st, struct bwd_timer *t)
{
	return t->period_ns ?
		bw_dual_insert_periodic(st->wheel, t->deadline_ns, t, &t->handle) :
		bw_dual_insert_oneshot(st->wheel, t->deadline_ns, t, &t->handle);
}

int bwd_timer_schedule(struct bwd_session *s, const struct bwd_schedule *req,
		       bool *replaced)
{
	struct bwd_state *st = s->state;
	struct bwd_timer *old = timer_find(s, req->key), *t;
	int err;

	*replaced = false;
	if (old && !req->replace)
		return BITWHEEL__V1__ERROR_CODE__DUPLICATE_KEY;
	if (!old && s->timers.count >= st->opt->limits.max_timers)
		return BITWHEEL__V1__ERROR_CODE__TOO_MANY_TIMERS;
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
			.flags = req->has_payload ? BWD_RECF_PAYLOAD : 0,
			.payload = req->payload, .payload_len = req->payload_len,
		};

		journal(st, &r);
	}
	return 0;
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

		journal(s->state, &r);
	}
	return 0;
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
	if (!j)
		return;
	/* Every journal names the sessions it continues, so that one read
	 * without the snapshot before it (--ignore-snapshot) still knows
	 * whose timers its records are. */
	for (size_t b = 0; b <= st->sessions.mask; b++) {
		for (struct bwd_map_node *n = st->sessions.bucket[b]; n; n = n->next) {
			struct bwd_record r = session_record(
				bwd_container_of(n, struct bwd_session, node));

			journal(st, &r);
		}
	}
}

static int dump_fires(const struct bwd_session *s, const struct bwd_fire *f,
		      int (*emit)(void *, const struct bwd_record *), void *ctx)
{
	int err = 0;

	for (; f && !err; f = f->next) {
		struct bwd_record r = {
			.type = BWD_REC_QUEUED, .sid = s->id, .key = f->key,
			.seq = f->seq, .deadline_ns = f->deadline_ns,
			.count = f->count, .fired_ns = f->fired_ns,
			.flags = (f->has_payload ? BWD_RECF_PAYLOAD : 0) |
				 (f->late ? BWD_RECF_LATE : 0) |
				 (f->sent ? BWD_RECF_SENT : 0),
			.payload = f->payload, .payload_len = f->payload_len,
		};

		err = emit(ctx, &r);
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

			r = (struct bwd_record){
				.type = BWD_REC_TIMER, .sid = s->id, .key = n->key,
				.deadline_ns = t->deadline_ns, .period_ns = t->period_ns,
				.count = t->count,
				.flags = (t->has_payload ? BWD_RECF_PAYLOAD : 0) |
					 (t->late ? BWD_RECF_LATE : 0),
				.payload = t->payload, .payload_len = t->payload_len,
			};
			err = emit(ctx, &r);
		}
	}
	/* Written but not drained, then queued: the order they are owed in. */
	if (!err)
		err = dump_fires(s, s->sent_head, emit, ctx);
	if (!err)
		err = dump_fires(s, s->queue_head, emit, ctx);
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
	/* Without memory for it, enqueue counts it dropped, as at run time. */
	enqueue(s, &f);
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
		if (!bwp_session_name_valid(name, r->name_len) || session_find(st, name))
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
		s->queued--;
		st->stats.queued--;
		st->stats.bytes -= sizeof(*f) + f->payload_len;
		free(f);
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
			bwd_session_detach(s);
		}
	}
	return 0;
}
