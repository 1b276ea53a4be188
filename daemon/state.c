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
 * cancel, fire - so that a journal can record each one as it happens and
 * replay them in the same order.
 *
 * Costs: schedule, cancel and each fire are O(1) on average (a map lookup
 * and a wheel operation); ending a session is O(its timers + its queue).
 */
#include <errno.h>
#include <inttypes.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "daemon-internal.h"

struct bwd_state {
	struct bw_dual *wheel;
	struct bwd_map sessions;
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
		free(bwd_session_dequeue(s));
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
	/* Anonymous sessions have no future connection to queue for. */
	if (!s->name) {
		s->dropped++;
		st->stats.dropped++;
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

static uint64_t on_fire(void *data, uint64_t now_ns, void *ctx)
{
	struct bwd_state *st = ctx;
	struct bwd_timer *t = data;
	uint64_t next = 0;
	struct bwd_fire f = {
		.key = t->node.key,
		.deadline_ns = t->deadline_ns,
		.fired_ns = now_ns,
		.count = t->period_ns ? ++t->count : 0,
		.has_payload = t->has_payload,
		.payload_len = t->payload_len,
		.payload = t->payload,
	};

	route(st, t->session, &f);
	if (t->period_ns)
		next = next_period(t->deadline_ns, t->period_ns, now_ns);
	if (!next) {
		free_timer(st, t);
		return 0;
	}
	t->deadline_ns = next;
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
	err = bwd_map_init(&st->sessions, st->seed);
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
	if (st->sessions.bucket) {
		for (size_t b = 0; b <= st->sessions.mask; b++)
			while (st->sessions.bucket[b])
				session_free(bwd_container_of(st->sessions.bucket[b],
							  struct bwd_session, node));
		bwd_map_fini(&st->sessions);
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

/* ---- sessions -------------------------------------------------------------- */

static void linger_expired(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_session *s = arg;

	(void)fd;
	(void)what;
	bwd_log(BWD_LOG_INFO, "session '%s' expired after its linger: %zu timers and %" PRIu64 " queued fires dropped",
		s->name, s->timers.count, s->queued);
	s->state->stats.expired++;
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

static int session_new(struct bwd_state *st, const char *name, uid_t uid,
		       struct bwd_session **out)
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

/* End a session: cancel its timers, drop its queue, forget it. */
static void session_free(struct bwd_session *s)
{
	struct bwd_state *st = s->state;
	struct bwd_fire *f;

	for (size_t b = 0; b <= s->timers.mask; b++) {
		while (s->timers.bucket[b]) {
			struct bwd_timer *t = bwd_container_of(s->timers.bucket[b],
							       struct bwd_timer, node);

			bw_dual_cancel(st->wheel, t->handle, NULL);
			free_timer(st, t);
		}
	}
	while ((f = bwd_session_dequeue(s)))
		free(f);
	bwd_map_fini(&s->timers);
	if (s->name) {
		bwd_map_remove(&st->sessions, &s->node);
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
	} else if (session_new(st, name, uid, &s)) {
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	}
	s->conn = conn;
	*out = s;
	return 0;
}

void bwd_session_detach(struct bwd_session *s)
{
	struct timeval tv;
	uint64_t linger = s->state->opt->limits.linger_ns;

	s->conn = NULL;
	if (!s->name) {
		session_free(s);
		return;
	}
	tv.tv_sec = (time_t)(linger / 1000000000u);
	tv.tv_usec = (suseconds_t)(linger % 1000000000u / 1000u);
	evtimer_add(s->linger, &tv);
}

/* ---- timers ---------------------------------------------------------------- */

static struct bwd_timer *timer_find(struct bwd_session *s, uint64_t key)
{
	struct bwd_map_node *n = bwd_map_find(&s->timers, key);

	return n ? bwd_container_of(n, struct bwd_timer, node) : NULL;
}

static void timer_cancel(struct bwd_state *st, struct bwd_timer *t)
{
	bw_dual_cancel(st->wheel, t->handle, NULL);
	free_timer(st, t);
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
	t = malloc(sizeof(*t) + req->payload_len);
	if (!t)
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
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
	err = req->period_ns ?
		bw_dual_insert_periodic(st->wheel, req->deadline_ns, t, &t->handle) :
		bw_dual_insert_oneshot(st->wheel, req->deadline_ns, t, &t->handle);
	if (err) {
		free(t);
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	}
	/* The new timer is in: only now may the old one go. */
	if (old) {
		timer_cancel(st, old);
		*replaced = true;
	}
	bwd_map_insert(&s->timers, &t->node);
	st->stats.timers++;
	st->stats.bytes += timer_bytes(t);
	return 0;
}

int bwd_timer_cancel(struct bwd_session *s, uint64_t key, bool *pending)
{
	struct bwd_timer *t = timer_find(s, key);

	*pending = t != NULL;
	if (t)
		timer_cancel(s->state, t);
	return 0;
}
