/*
 * load_bitwheel.c - bwload's bitwheeld subject, driven with
 * libbitwheel-client's non-blocking calls (depth 1 is the non-pipelined
 * round trip: one request, wait for its reply).  A worker is one of:
 *
 *   own       (p->producers == 0) a session of its own, which it both
 *             schedules into and consumes: anonymous, or named with
 *             --session (only named sessions are journaled by a daemon
 *             with --state-dir, and their replies wait for the journal's
 *             commit: bench/run-durable.sh).  A named session's worker
 *             connects as a consumer (protocol 2: a named session's
 *             connection is a producer unless it says otherwise).  Keeps
 *             `depth` requests in flight: schedules of oneshot timers at
 *             an absolute CLOCK_MONOTONIC deadline now + delay, and
 *             cancels of a recently scheduled key; then waits for the
 *             outstanding replies and the fires still due, bounded by
 *             drain_ns.
 *   producer  (delivery phases, id < p->producers) schedules the same
 *             timers (no cancels) into the shared named session
 *             p->session, as a producer: it is sent no fires.
 *   consumer  (delivery phases, the other ids) attaches to that session
 *             as a consumer and takes its share of the fires until the
 *             parent sets *stop.
 *
 *   fail      (p->fail) an own named session's consumer whose fires fail
 *             once: each fire touched and released (delay 0) on its
 *             first hand-out, acknowledged on its second; cancel_pct of
 *             its Schedules are of timers due in an hour, cancelled as
 *             soon as accepted.  Queued Touches, Releases and Cancels go
 *             before new Schedules, `depth` requests in flight in all,
 *             at most the window's worth of timers scheduled and not yet
 *             acknowledged; each request's reply time is kept by kind.
 *
 * Every fire is measured in the fire handler (receive time minus the
 * deadline asked for, and the daemon's fired_at - deadline).  A
 * manual-ack consumer acknowledges as PROTOCOL.md section 8 suggests:
 * the handler keeps a copy of the last fire, and after bwc_dispatch()
 * returns, one cumulative bwc_send_ack() covers the batch.  A Schedule
 * refused with TOO_MANY_TIMERS (the session's pending timers and
 * undelivered fires at max_timers: the producer's backpressure) is
 * counted apart, not as an error, and the worker holds off new
 * requests for a millisecond.
 */
#include "bwload.h"

#include <bitwheel-client.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECENT 64
#define BACKOFF_NS 1000000

enum { W_OWN, W_PRODUCER, W_CONSUMER };

struct bwl {
	const struct load_phase *p;
	struct load_slot *s;
	struct bwc_client *c;
	int kind;               /* W_*                                       */
	bool manual;            /* a consumer that must acknowledge          */
	bool have_last;         /* last: handled, not yet acknowledged       */
	struct bwc_fire last;
	uint64_t *sent_at;      /* ring of send times, replies come in order */
	unsigned head, tail;    /* pop at head, push at tail (mod depth)     */
	unsigned inflight;
	uint64_t recent[RECENT];
	unsigned nrecent;
	uint64_t next_key;
	uint64_t backoff_until; /* no new request before (backpressure)      */
	uint64_t rs;
	int failed;
};

static void on_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct bwl *w = arg;
	uint64_t now = load_now_ns();

	(void)c;
	if (w->inflight) {
		uint64_t t = w->sent_at[w->head];

		w->head = (w->head + 1) % (unsigned)w->p->depth;
		w->inflight--;
		if (w->p->depth == 1)
			load_hist_add(&w->s->rtt, now - t);
	}
	w->s->replies++;
	w->s->t_last = now;
	if (r->status != 0) {
		if (r->status == BWC_ESERVER &&
		    r->server_error == BWC_SERVER_TOO_MANY_TIMERS) {
			w->s->refused++;
			w->backoff_until = now + BACKOFF_NS;
			return;
		}
		if (w->s->errors++ == 0)
			snprintf(w->s->error, sizeof w->s->error, "%s: %s %s",
				 r->request == BWC_REQUEST_SCHEDULE ? "schedule" : "cancel",
				 bwc_server_error_name(r->server_error), r->message);
		return;
	}
	if (r->request == BWC_REQUEST_SCHEDULE)
		w->s->scheduled++;
	else if (r->pending)
		w->s->cancel_hit++;
}

static void on_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct bwl *w = arg;
	uint64_t now = load_now_ns();

	(void)c;
	w->s->fires++;
	if (f->redelivered)
		w->s->redelivered++;
	if (!w->s->t_first_fire)
		w->s->t_first_fire = now;
	w->s->t_last_fire = now;
	if (now >= w->p->win_lo && now < w->p->win_hi)
		w->s->win_fires++;
	load_hist_add(&w->s->srv, f->fired_ns - f->deadline_ns);
	if (now < f->deadline_ns)
		w->s->early++;
	else
		load_hist_add(&w->s->late, now - f->deadline_ns);
	if (w->manual) {
		/* Only delivery and connection are read by the ack: the
		 * payload pointer going stale does not matter. */
		w->last = *f;
		w->have_last = true;
	}
}

static int send_one(struct bwl *w, uint64_t now)
{
	int rc;

	if (w->nrecent && (int)(load_rand(&w->rs) % 100) < w->p->cancel_pct) {
		uint64_t key = w->recent[load_rand(&w->rs) % w->nrecent];

		rc = bwc_send_cancel(w->c, key, on_reply, w);
	} else {
		struct bwc_timer t = { .key = w->next_key++, .absolute = true,
				       .when_ns = now + load_delay(w->p, &w->rs) };

		rc = bwc_send_schedule(w->c, &t, on_reply, w);
		if (rc == 0) {
			if (w->nrecent < RECENT)
				w->recent[w->nrecent++] = t.key;
			else
				w->recent[t.key % RECENT] = t.key;
		}
	}
	if (rc == BWC_EAGAIN)
		return 1;
	if (rc != 0) {
		snprintf(w->s->error, sizeof w->s->error, "send: %s",
			 bwc_errmsg(w->c));
		w->failed = 1;
		return -1;
	}
	w->sent_at[w->tail] = now;
	w->tail = (w->tail + 1) % (unsigned)w->p->depth;
	w->inflight++;
	w->s->sent++;
	return 0;
}

/* One cumulative Ack for every fire handled so far. */
static int ack_batch(struct bwl *w)
{
	int rc;

	if (!w->have_last)
		return 0;
	rc = bwc_send_ack(w->c, &w->last, true);
	if (rc == BWC_EAGAIN)
		return 0;       /* the next batch's ack covers this one */
	if (rc != 0) {
		snprintf(w->s->error, sizeof w->s->error, "ack: %s",
			 bwc_errmsg(w->c));
		return -1;
	}
	w->s->acks++;
	w->have_last = false;
	return 0;
}

/* Wait up to timeout_ms for the socket, dispatch what arrived, and
 * acknowledge the fires it handed out. */
static int pump(struct bwl *w, int timeout_ms)
{
	struct pollfd pfd = { .fd = bwc_fd(w->c), .events = bwc_poll_events(w->c) };
	int rc = poll(&pfd, 1, timeout_ms);

	if (rc < 0 && errno != EINTR) {
		snprintf(w->s->error, sizeof w->s->error, "poll: %s", strerror(errno));
		return -1;
	}
	if (rc > 0 && bwc_dispatch(w->c) != 0) {
		snprintf(w->s->error, sizeof w->s->error, "dispatch: %s",
			 bwc_errmsg(w->c));
		return -1;
	}
	return ack_batch(w);
}

/* Send what the depth, the pacing and the backpressure allow. */
static int send_some(struct bwl *w, uint64_t now)
{
	const struct load_phase *p = w->p;

	if (now < w->backoff_until)
		return 0;
	while (w->inflight < (unsigned)p->depth &&
	       w->s->sent < load_allowed(p, now) &&
	       w->s->sent < p->max_requests) {
		int rc = send_one(w, now);

		if (rc < 0)
			return -1;
		if (rc > 0)
			break;
	}
	return 0;
}

static int connect_worker(struct bwl *w, const char *socket, int id)
{
	const struct load_phase *p = w->p;
	struct bwc_session_info si;
	const char *session = NULL;
	char name[65];

	bwc_set_timeout(w->c, 5000000000LL);
	if (w->kind != W_OWN) {
		session = p->session;
	} else if (p->session) {
		/* Unique per phase, client and process: a named session
		 * lingers after its connection closes. */
		snprintf(name, sizeof name, "%.24s-%s-%d-%ld", p->session,
			 p->name, id, (long)getpid());
		session = name;
	}
	if (session)
		bwc_set_role(w->c, w->kind == W_PRODUCER ? BWC_ROLE_PRODUCER
							 : BWC_ROLE_CONSUMER);
	if (w->kind != W_PRODUCER) {
		if (p->ack)
			bwc_set_ack_mode(w->c, p->ack == LOAD_ACK_MANUAL ?
					 BWC_ACK_MANUAL : BWC_ACK_AUTO);
		if (p->window)
			bwc_set_window(w->c, p->window);
		/* Something for a Touch to move. */
		if (p->fail)
			bwc_set_ack_timeout(w->c, 30000000000ULL);
	}
	if (bwc_connect(w->c, socket, session) != 0 ||
	    bwc_get_session_info(w->c, &si) != 0) {
		snprintf(w->s->error, sizeof w->s->error, "%s", bwc_errmsg(w->c));
		return -1;
	}
	if (w->kind != W_PRODUCER) {
		if (si.role != BWC_ROLE_CONSUMER) {
			snprintf(w->s->error, sizeof w->s->error,
				 "the daemon took session %s's connection as a "
				 "producer", session ? session : "(anonymous)");
			return -1;
		}
		w->manual = !si.auto_ack;
		if (!p->fail)
			bwc_set_fire_handler(w->c, on_fire, w);
	}
	return 0;
}

/* ---- the fail phase ----------------------------------------------------- */

/* A request of the fail phase in flight: its reply's callback argument. */
struct freq {
	struct fail *f;
	uint64_t sent_at;
	int kind;               /* LOAD_K_*                                  */
	struct freq *next;      /* in the free list                          */
};

/* A request waiting for room in the depth: a Cancel of key, or a Touch
 * or Release of fire. */
struct fact {
	int kind;
	uint64_t key;
	struct bwc_fire fire;   /* delivery and connection are what count   */
};

struct fail {
	struct bwl *w;
	struct freq *pool, *free_list;
	struct fact *ring;      /* a ring of cap entries from head, n long  */
	unsigned head, n, cap;
	uint64_t open;          /* timers due now, scheduled and not yet
				   acknowledged: at most the window          */
	uint64_t window;
};

/* Queue a request; false out of memory. */
static bool fail_push(struct fail *f, const struct fact *a)
{
	if (f->n == f->cap) {
		unsigned ncap = f->cap ? f->cap * 2 : 1024;
		struct fact *n = malloc(ncap * sizeof(*n));

		if (!n)
			return false;
		for (unsigned i = 0; i < f->n; i++)
			n[i] = f->ring[(f->head + i) % f->cap];
		free(f->ring);
		f->ring = n;
		f->head = 0;
		f->cap = ncap;
	}
	f->ring[(f->head + f->n++) % f->cap] = *a;
	return true;
}

static void fail_error(struct fail *f, const char *what, const struct bwc_reply *r)
{
	if (f->w->s->errors++ == 0)
		snprintf(f->w->s->error, sizeof f->w->s->error, "%s: %s %s", what,
			 r ? bwc_server_error_name(r->server_error) : "", r ? r->message : "");
}

static void fail_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct freq *q = arg;
	struct fail *f = q->f;
	struct load_slot *s = f->w->s;
	uint64_t now = load_now_ns();
	static const char *const what[LOAD_KINDS] = { "schedule", "cancel", "touch", "release" };

	(void)c;
	load_hist_add(&s->kind_rtt[q->kind], now - q->sent_at);
	s->kind_replies[q->kind]++;
	s->replies++;
	s->t_last = now;
	f->w->inflight--;
	q->next = f->free_list;
	f->free_list = q;
	if (r->status != 0) {
		if (r->status == BWC_ESERVER && r->server_error == BWC_SERVER_TOO_MANY_TIMERS) {
			s->refused++;
			f->w->backoff_until = now + BACKOFF_NS;
			if (r->key % 100 >= (uint64_t)f->w->p->cancel_pct)
				f->open--;
			return;
		}
		fail_error(f, what[q->kind], r);
		return;
	}
	switch (r->request) {
	case BWC_REQUEST_SCHEDULE:
		s->scheduled++;
		/* One of the cancel_pct in a hundred due in an hour: cancel it. */
		if (r->key % 100 < (uint64_t)f->w->p->cancel_pct &&
		    !fail_push(f, &(struct fact){ .kind = LOAD_K_CANCEL, .key = r->key }))
			fail_error(f, "out of memory", NULL);
		break;
	case BWC_REQUEST_CANCEL:
		s->cancel_hit += r->pending;
		break;
	case BWC_REQUEST_TOUCH:
		if (!r->touched)
			fail_error(f, "touch: the fire was not in flight", NULL);
		break;
	case BWC_REQUEST_RELEASE:
		if (!r->released.released || r->released.dead_lettered)
			fail_error(f, "release: the fire was not put back", NULL);
		break;
	default:
		break;
	}
}

/* A fire: touched and released on its first hand-out, acknowledged on its
 * second. */
static void fail_fire(struct bwc_client *c, const struct bwc_fire *fire, void *arg)
{
	struct fail *f = arg;
	struct load_slot *s = f->w->s;
	uint64_t now = load_now_ns();

	s->fires++;
	if (fire->deliveries <= 1) {
		load_hist_add(&s->srv, fire->fired_ns - fire->deadline_ns);
		if (now < fire->deadline_ns)
			s->early++;
		else
			load_hist_add(&s->late, now - fire->deadline_ns);
		if (!fail_push(f, &(struct fact){ .kind = LOAD_K_TOUCH, .fire = *fire }) ||
		    !fail_push(f, &(struct fact){ .kind = LOAD_K_RELEASE, .fire = *fire }))
			fail_error(f, "out of memory", NULL);
		return;
	}
	if (bwc_send_ack(c, fire, false) != 0) {
		fail_error(f, "ack", NULL);
		return;
	}
	s->acks++;
	f->open--;
}

/* Send what the depth allows: queued requests first, then new Schedules
 * (until end, while fewer than the window are open); false on a failure. */
static bool fail_send(struct fail *f, uint64_t now, uint64_t end)
{
	struct bwl *w = f->w;

	while (w->inflight < (unsigned)w->p->depth && w->s->sent < w->p->max_requests) {
		struct freq *q = f->free_list;
		struct fact a;
		int rc;

		if (f->n) {
			a = f->ring[f->head];
		} else if (now < end && now >= w->backoff_until && f->open < f->window) {
			a = (struct fact){ .kind = LOAD_K_SCHEDULE, .key = w->next_key };
		} else {
			break;
		}
		q->sent_at = now;
		q->kind = a.kind;
		switch (a.kind) {
		case LOAD_K_SCHEDULE: {
			bool doomed = a.key % 100 < (uint64_t)w->p->cancel_pct;
			struct bwc_timer t = { .key = a.key, .absolute = true,
					       .when_ns = now + (doomed ? 3600000000000ULL : 0) };

			rc = bwc_send_schedule(w->c, &t, fail_reply, q);
			if (rc == 0) {
				w->next_key++;
				f->open += !doomed;
			}
			break;
		}
		case LOAD_K_CANCEL:
			rc = bwc_send_cancel(w->c, a.key, fail_reply, q);
			break;
		case LOAD_K_TOUCH:
			rc = bwc_send_touch(w->c, &a.fire, 0, fail_reply, q);
			break;
		default:
			rc = bwc_send_release(w->c, &a.fire, 0, fail_reply, q);
			break;
		}
		if (rc == BWC_EAGAIN)
			break;
		if (rc != 0) {
			snprintf(w->s->error, sizeof w->s->error, "send: %s", bwc_errmsg(w->c));
			return false;
		}
		if (a.kind != LOAD_K_SCHEDULE) {
			f->head = (f->head + 1) % f->cap;
			f->n--;
		}
		f->free_list = q->next;
		w->inflight++;
		w->s->sent++;
	}
	return true;
}

/* The fail phase's worker, connected: until the end of sending, then
 * until every timer it scheduled was acknowledged (or cancelled), bounded
 * by the drain. */
static int fail_run(struct bwl *w)
{
	const struct load_phase *p = w->p;
	struct fail f = { .w = w, .window = p->window ? p->window : 256 };
	uint64_t end, now;
	int ret = -1;

	f.pool = calloc((size_t)p->depth, sizeof(*f.pool));
	if (!f.pool) {
		snprintf(w->s->error, sizeof w->s->error, "out of memory");
		return -1;
	}
	for (int i = 0; i < p->depth; i++) {
		f.pool[i] = (struct freq){ .f = &f, .next = f.free_list };
		f.free_list = &f.pool[i];
	}
	bwc_set_fire_handler(w->c, fail_fire, &f);
	load_sleep_until(p->start_ns);
	w->s->t_start = load_now_ns();
	end = p->start_ns + p->duration_ns;
	while ((now = load_now_ns()) < end + p->drain_ns &&
	       (now < end || w->inflight || f.n || f.open)) {
		if (!fail_send(&f, now, end) || pump(w, 1) != 0 || w->s->errors)
			goto out;
	}
	if (w->inflight || f.open) {
		snprintf(w->s->error, sizeof w->s->error, "after the drain: %u replies missing, "
			 "%" PRIu64 " timers not acknowledged", w->inflight, f.open);
		goto out;
	}
	ret = 0;
out:
	/* The callbacks of requests still in flight, if any run, run now,
	 * while the pool is there. */
	bwc_free(w->c);
	w->c = NULL;
	free(f.pool);
	free(f.ring);
	return ret;
}

int load_bitwheel_worker(const char *socket, const struct load_phase *p,
			 int id, volatile int *stop, struct load_slot *slot)
{
	struct bwl w = { .p = p, .s = slot, .rs = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(id + 1) * 7919,
			 .next_key = (uint64_t)id << 40 };
	uint64_t end, last_deadline, now;
	int ret = -1;

	w.kind = p->producers <= 0 ? W_OWN : id < p->producers ? W_PRODUCER : W_CONSUMER;
	w.sent_at = calloc((size_t)p->depth, sizeof *w.sent_at);
	if (!w.sent_at || bwc_new(&w.c) != 0) {
		snprintf(slot->error, sizeof slot->error, "out of memory");
		goto out;
	}
	if (connect_worker(&w, socket, id) != 0)
		goto out;

	if (p->fail) {
		ret = fail_run(&w);
		goto out;
	}
	if (w.kind == W_CONSUMER) {
		/* Until the parent has seen every fire, or gives up. */
		while (!*stop)
			if (pump(&w, 5) != 0)
				goto out;
		ret = 0;
		goto out;
	}

	load_sleep_until(p->start_ns);
	slot->t_start = load_now_ns();
	end = p->start_ns + p->duration_ns;
	for (;;) {
		now = load_now_ns();
		if (now >= end || slot->sent >= p->max_requests)
			break;
		if (send_some(&w, now) != 0 || pump(&w, 1) != 0)
			goto out;
	}
	/* Replies still outstanding, then (own session) the fires still due. */
	last_deadline = load_now_ns() + p->max_delay_ns;
	end = last_deadline + p->drain_ns;
	while ((now = load_now_ns()) < end &&
	       (w.inflight || (w.kind == W_OWN &&
			       slot->fires + slot->cancel_hit < slot->scheduled)))
		if (pump(&w, 1) != 0)
			goto out;
	if (w.inflight) {
		snprintf(slot->error, sizeof slot->error,
			 "%u replies missing after the drain", w.inflight);
		goto out;
	}
	ret = 0;
out:
	bwc_free(w.c);          /* writes the last ack, if any, first */
	free(w.sent_at);
	return ret;
}
