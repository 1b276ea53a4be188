/*
 * load_bitwheel.c - bwload's bitwheeld subject: one session per worker,
 * anonymous, or named with --session (only named sessions are journaled
 * by a daemon with --state-dir, and their replies wait for the journal's
 * commit: bench/run-durable.sh), driven with libbitwheel-client's non-blocking calls (depth 1 is
 * the non-pipelined round trip: one request, wait for its reply).  Keeps
 * `depth` requests in flight: schedules of oneshot timers at an absolute
 * CLOCK_MONOTONIC deadline now + delay, and cancels of a recently
 * scheduled key; the fire handler records lateness (receive time minus
 * the deadline asked for).  After the sending window, it waits for the
 * outstanding replies and the fires still due, bounded by drain_ns.
 */
#include "bwload.h"

#include <bitwheel-client.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECENT 64

struct bwl {
	const struct load_phase *p;
	struct load_slot *s;
	struct bwc_client *c;
	uint64_t *sent_at;      /* ring of send times, replies come in order */
	unsigned head, tail;    /* pop at head, push at tail (mod depth)     */
	unsigned inflight;
	uint64_t recent[RECENT];
	unsigned nrecent;
	uint64_t next_key;
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
	load_hist_add(&w->s->srv, f->fired_ns - f->deadline_ns);
	if (now < f->deadline_ns)
		w->s->early++;
	else
		load_hist_add(&w->s->late, now - f->deadline_ns);
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

/* Wait up to timeout_ms for the socket and dispatch what arrived. */
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
	return 0;
}

int load_bitwheel_worker(const char *socket, const struct load_phase *p,
			 int id, struct load_slot *slot)
{
	struct bwl w = { .p = p, .s = slot, .rs = 0x9E3779B97F4A7C15ULL ^ (uint64_t)(id + 1) * 7919,
			 .next_key = (uint64_t)id << 40 };
	uint64_t end, last_deadline, now;
	char name[65];
	int ret = -1;

	w.sent_at = calloc((size_t)p->depth, sizeof *w.sent_at);
	if (!w.sent_at || bwc_new(&w.c) != 0) {
		snprintf(slot->error, sizeof slot->error, "out of memory");
		goto out;
	}
	bwc_set_timeout(w.c, 5000000000LL);
	/* Unique per phase, client and process: a named session lingers
	 * after its connection closes. */
	if (p->session)
		snprintf(name, sizeof name, "%.24s-%s-%d-%ld", p->session,
			 p->name, id, (long)getpid());
	if (bwc_connect(w.c, socket, p->session ? name : NULL) != 0) {
		snprintf(slot->error, sizeof slot->error, "%s", bwc_errmsg(w.c));
		goto out;
	}
	bwc_set_fire_handler(w.c, on_fire, &w);

	load_sleep_until(p->start_ns);
	slot->t_start = load_now_ns();
	end = p->start_ns + p->duration_ns;
	for (;;) {
		now = load_now_ns();
		if (now >= end || slot->sent >= p->max_requests)
			break;
		while (w.inflight < (unsigned)p->depth &&
		       slot->sent < load_allowed(p, now) &&
		       slot->sent < p->max_requests) {
			int rc = send_one(&w, now);

			if (rc < 0)
				goto out;
			if (rc > 0)
				break;
		}
		if (pump(&w, 1) != 0)
			goto out;
	}
	/* Replies still outstanding, then the fires still due. */
	last_deadline = load_now_ns() + p->max_delay_ns;
	end = last_deadline + p->drain_ns;
	while ((now = load_now_ns()) < end &&
	       (w.inflight || slot->fires + slot->cancel_hit < slot->scheduled))
		if (pump(&w, 1) != 0)
			goto out;
	if (w.inflight) {
		snprintf(slot->error, sizeof slot->error,
			 "%u replies missing after the drain", w.inflight);
		goto out;
	}
	ret = 0;
out:
	bwc_free(w.c);
	free(w.sent_at);
	return ret;
}
