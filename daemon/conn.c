/*
 * conn.c - one client connection: frames in, frames out, and its bounds.
 *
 * A connection is a libevent bufferevent plus the session it attached with
 * Hello.  Input: every complete frame in the input buffer is parsed
 * (proto/frame.c owns the bytes) and handled in one wakeup; the input
 * never holds more than one frame past the maximum, because reading stops
 * at that watermark.  Output: replies and fires are packed straight into
 * the output evbuffer and libevent writes them in one go when the loop
 * turns, so requests that arrive together are answered by one write.
 *
 * Bounds on output, max_output bytes of unread output per connection:
 *   - at half of it the daemon stops reading this client's requests
 *     (backpressure: a pipelining client is slowed, not cut off) and
 *     resumes below a quarter;
 *   - a frame that would push it past the bound means the client is not
 *     reading at all: it is disconnected.  Its named session keeps the
 *     unsent fire queued; an anonymous session ends with the connection.
 *
 * Fires of a named session stay the session's until they have left the
 * output buffer: each one written keeps a copy in the session
 * (bwd_session_sent), with the output offset its frame ends at, until the
 * buffer drains past it (bwd_session_written).  When the connection
 * breaks, those still unwritten go back to the front of the session's
 * queue, in order, for its next connection (PROTOCOL.md section 9).
 *
 * With a journal, a named session's connection holds its output while
 * the journal has records that are not yet durable: frames go to a side
 * buffer (held) that the end of the loop turn appends to the output once
 * the journal's commit is done (bwd_conn_release), so an acknowledgement
 * or a fire never leaves before its record.  Held bytes count against the
 * output bound like any others.
 *
 * Closing never happens in the middle of a wheel poll or of request
 * handling: a dead connection is only marked, and freed by a deferred
 * event at the next turn of the loop.
 */
#include <errno.h>
#include <inttypes.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-internal.h"

struct bwd_conn {
	struct bwd_conn *next, **pprev;  /* the server's list             */
	struct bwd_server *srv;
	struct bufferevent *bev;
	struct event *reap;
	struct bwd_session *session;
	uid_t uid;
	pid_t pid;
	struct evbuffer *held;     /* frames waiting for the journal's commit */
	struct bwd_conn *held_next, **held_pprev; /* NULL pprev: not held    */
	uint64_t committed;        /* bytes ever put in the output buffer    */
	uint64_t drained;          /* bytes ever taken out by writes         */
	bool throttled;            /* reading paused for backpressure        */
	bool closing;              /* close once the output has drained      */
	bool dead;                 /* close at the next turn, unflushed      */
};

static const struct bwd_limits *limits(const struct bwd_conn *c)
{
	return &bwd_server_options(c->srv)->limits;
}

size_t bwd_conn_output(const struct bwd_conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev)) +
	       (c->held ? evbuffer_get_length(c->held) : 0);
}

static void unhold(struct bwd_conn *c)
{
	if (!c->held_pprev)
		return;
	*c->held_pprev = c->held_next;
	if (c->held_next)
		c->held_next->held_pprev = c->held_pprev;
	c->held_pprev = NULL;
}

/* Where the next frame goes: the output, or the held buffer while the
 * journal owes a commit; NULL without memory for the latter. */
static struct evbuffer *sink(struct bwd_conn *c)
{
	struct bwd_journal *j = bwd_server_journal(c->srv);
	struct bwd_conn **head;

	if (c->held_pprev)
		return c->held;
	if (!j || !c->session || !c->session->name || !bwd_journal_pending(j))
		return bufferevent_get_output(c->bev);
	if (!c->held && !(c->held = evbuffer_new()))
		return NULL;
	head = bwd_server_held(c->srv);
	c->held_next = *head;
	if (c->held_next)
		c->held_next->held_pprev = &c->held_next;
	c->held_pprev = head;
	*head = c;
	return c->held;
}

void bwd_conn_release(struct bwd_conn **head)
{
	while (*head) {
		struct bwd_conn *c = *head;

		unhold(c);
		evbuffer_add_buffer(bufferevent_get_output(c->bev), c->held);
	}
}

uid_t bwd_conn_uid(const struct bwd_conn *c)
{
	return c->uid;
}

struct bwd_session *bwd_conn_session(const struct bwd_conn *c)
{
	return c->session;
}

void bwd_conn_set_session(struct bwd_conn *c, struct bwd_session *s)
{
	c->session = s;
}

struct bwd_server *bwd_conn_server(const struct bwd_conn *c)
{
	return c->srv;
}

struct bwd_conn *bwd_conn_next(const struct bwd_conn *c)
{
	return c->next;
}

static bool named(const struct bwd_conn *c)
{
	return c->session && c->session->name;
}

/* Written out: those fires are the client's now. */
static void on_drain(struct evbuffer *buf, const struct evbuffer_cb_info *info,
		     void *arg)
{
	struct bwd_conn *c = arg;

	(void)buf;
	if (!info->n_deleted)
		return;
	c->drained += info->n_deleted;
	if (named(c))
		bwd_session_written(c->session, c->drained);
}

static void conn_free(struct bwd_conn *c)
{
	unhold(c);
	if (c->held)
		evbuffer_free(c->held);
	if (named(c))
		bwd_session_unsend(c->session);
	if (c->session)
		bwd_session_detach(c->session);
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	bwd_server_conn_gone(c->srv);
	event_free(c->reap);
	/* libevent may finish freeing the bufferevent later: it must not call
	 * back into a connection that is gone by then. */
	evbuffer_remove_cb(bufferevent_get_output(c->bev), on_drain, c);
	bufferevent_free(c->bev);
	free(c);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_free(arg);
}

/* Free at the next turn of the loop, whatever is left unsent. */
static void kill_conn(struct bwd_conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	/* A named session is free for its client's next connection at once,
	 * even one whose Hello is read in this same turn of the loop.  An
	 * anonymous one ends, cancelling its timers, so that waits for the
	 * reap: this may run inside a poll, firing one of those timers. */
	unhold(c);
	if (named(c)) {
		bwd_session_unsend(c->session);
		bwd_session_detach(c->session);
		c->session = NULL;
	}
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	event_active(c->reap, 0, 0);
}

void bwd_conn_close(struct bwd_conn *c, bool flush)
{
	if (!flush || bwd_conn_output(c) == 0) {
		kill_conn(c);
		return;
	}
	c->closing = true;
	bufferevent_disable(c->bev, EV_READ);
	/* on_write then runs once the last byte is out. */
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
}

int bwd_conn_send(struct bwd_conn *c, const Bitwheel__V1__Envelope *env)
{
	size_t size = bwp_frame_packed_size(env), len;
	struct evbuffer *out;
	struct evbuffer_iovec v;
	int err;

	if (c->dead)
		return -EPIPE;
	if (bwd_conn_output(c) + size > limits(c)->max_output)
		return -ENOBUFS;
	out = sink(c);
	if (!out || evbuffer_reserve_space(out, (ev_ssize_t)size, &v, 1) != 1)
		return -ENOMEM;
	err = bwp_frame_pack(env, limits(c)->max_frame, v.iov_base, v.iov_len, &len);
	if (err) {
		bwd_log(BWD_LOG_ERR, "cannot pack a frame: %s", bwp_strerror(err));
		return -EINVAL;
	}
	v.iov_len = len;
	evbuffer_commit_space(out, &v, 1);
	c->committed += len;
	return 0;
}

void bwd_conn_error(struct bwd_conn *c, const Bitwheel__V1__Envelope *req,
		    Bitwheel__V1__ErrorCode code, bool fatal, const char *fmt, ...)
{
	Bitwheel__V1__Envelope env;
	Bitwheel__V1__Error err;
	char msg[256];
	va_list ap;
	int sent;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Request errors may name keys: debug only.  Fatal ones never do. */
	if (fatal)
		bwd_log(BWD_LOG_INFO, "client pid %ld uid %ld: %s; closing",
			(long)c->pid, (long)c->uid, msg);
	else
		bwd_log(BWD_LOG_DEBUG, "client pid %ld request %" PRIu64 ": %s",
			(long)c->pid, req ? req->request_id : 0, msg);
	bwp_error_init(&env, &err, req, code, msg);
	sent = bwd_conn_send(c, &env);
	/* An error reply that does not fit means the client is not reading. */
	if (fatal || sent)
		bwd_conn_close(c, fatal);
}

/* Write one fire; 0, or nonzero when it does not fit. */
static int send_fire(struct bwd_conn *c, const struct bwd_fire *f)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Fired fired = BITWHEEL__V1__FIRED__INIT;

	fired.has_key = 1;
	fired.key = f->key;
	fired.has_payload = f->has_payload;
	fired.payload.len = f->payload_len;
	fired.payload.data = (uint8_t *)f->payload;
	fired.has_deadline_ns = 1;
	fired.deadline_ns = f->deadline_ns;
	fired.has_fired_at_ns = 1;
	fired.fired_at_ns = f->fired_ns;
	fired.has_fire_count = f->count != 0;
	fired.fire_count = f->count;
	fired.has_late = f->late;
	fired.late = f->late;
	fired.has_redelivered = f->redelivered;
	fired.redelivered = f->redelivered;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_FIRED;
	env.fired = &fired;
	return bwd_conn_send(c, &env);
}

int bwd_conn_deliver(struct bwd_conn *c, const struct bwd_fire *f, void *ctx)
{
	struct bwd_fire *copy;

	(void)ctx;
	if (c->closing || c->dead)
		return -1;
	/* Without memory for the copy the fire still goes out, untracked. */
	copy = named(c) ? bwd_fire_copy(f) : NULL;
	if (send_fire(c, f) == 0) {
		if (copy)
			bwd_session_sent(c->session, copy, c->committed);
		return 0;
	}
	free(copy);
	bwd_log(BWD_LOG_WARNING, "client pid %ld uid %ld is not reading: %zu bytes unread reached the output bound; disconnecting",
		(long)c->pid, (long)c->uid, bwd_conn_output(c));
	kill_conn(c);
	return -1;
}

void bwd_conn_drain_queue(struct bwd_conn *c)
{
	struct bwd_fire *f;

	if (!c->session || c->closing || c->dead)
		return;
	while (bwd_conn_output(c) < limits(c)->max_output / 2 &&
	       (f = bwd_session_dequeue(c->session))) {
		if (send_fire(c, f)) {
			bwd_session_requeue(c->session, f);
			return;
		}
		bwd_session_sent(c->session, f, c->committed);
	}
}

static Bitwheel__V1__ErrorCode frame_error_code(int err)
{
	switch (err) {
	case BWP_ETOOBIG:
		return BITWHEEL__V1__ERROR_CODE__FRAME_TOO_LARGE;
	case BWP_ENOBODY:
		return BITWHEEL__V1__ERROR_CODE__UNKNOWN_MESSAGE;
	default:
		return BITWHEEL__V1__ERROR_CODE__BAD_FRAME;
	}
}

/* Parse the frame at the head of the input, if it is all there. */
static int next_frame(struct bwd_conn *c, Bitwheel__V1__Envelope **env,
		      size_t *frame_len)
{
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t have = evbuffer_get_length(in), want = BWP_HEADER_SIZE;
	size_t max = limits(c)->max_frame;
	int err;

	if (have < want)
		return BWP_EMORE;
	/* The header alone says how much to wait for, or that it's too big. */
	err = bwp_frame_parse(evbuffer_pullup(in, (ev_ssize_t)want), want, max,
			      env, frame_len);
	if (err != BWP_EMORE || have < *frame_len)
		return err;
	want = *frame_len;
	return bwp_frame_parse(evbuffer_pullup(in, (ev_ssize_t)want), want, max,
			       env, frame_len);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct bwd_conn *c = arg;

	while (!c->closing && !c->dead) {
		Bitwheel__V1__Envelope *env;
		size_t len;
		int err = next_frame(c, &env, &len);

		if (err == BWP_EMORE)
			break;
		if (err) {
			bwd_conn_error(c, NULL, frame_error_code(err), true,
			       "bad frame: %s", bwp_strerror(err));
			break;
		}
		evbuffer_drain(bufferevent_get_input(bev), len);
		bwd_request_handle(c, env);
		bwp_frame_free(env);
		if (!c->closing && !c->dead &&
		    bwd_conn_output(c) >= limits(c)->max_output / 2) {
			c->throttled = true;
			bufferevent_disable(bev, EV_READ);
			break;
		}
	}
	bwd_server_rearm(c->srv);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct bwd_conn *c = arg;

	if (c->closing) {
		if (bwd_conn_output(c) == 0)
			kill_conn(c);
		return;
	}
	bwd_conn_drain_queue(c);
	if (c->throttled && bwd_conn_output(c) < limits(c)->max_output / 2) {
		c->throttled = false;
		bufferevent_enable(bev, EV_READ);
		/* Frames may already wait in the input buffer. */
		on_read(bev, c);
	}
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct bwd_conn *c = arg;

	(void)bev;
	if (what & BEV_EVENT_ERROR)
		bwd_log(BWD_LOG_DEBUG, "client pid %ld: %s", (long)c->pid,
			evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		kill_conn(c);
}

int bwd_conn_new(struct bwd_server *srv, struct bufferevent *bev, uid_t uid,
		 pid_t pid, struct bwd_conn **out)
{
	struct event_base *base = bwd_server_base(srv);
	struct bwd_conn *c = calloc(1, sizeof(*c));
	const struct bwd_limits *l = &bwd_server_options(srv)->limits;

	if (!c)
		goto fail;
	c->srv = srv;
	c->uid = uid;
	c->pid = pid;
	c->bev = bev;
	c->reap = event_new(base, -1, 0, on_reap, c);
	if (!c->reap)
		goto fail;
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	if (!evbuffer_add_cb(bufferevent_get_output(c->bev), on_drain, c))
		goto fail;
	bufferevent_setwatermark(c->bev, EV_READ, 0, l->max_frame + BWP_HEADER_SIZE);
	bufferevent_setwatermark(c->bev, EV_WRITE, l->max_output / 4, 0);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
	c->pprev = bwd_server_conns(srv);
	c->next = *c->pprev;
	if (c->next)
		c->next->pprev = &c->next;
	*c->pprev = c;
	*out = c;
	return 0;
fail:
	if (c && c->reap)
		event_free(c->reap);
	free(c);
	bufferevent_free(bev);
	return -ENOMEM;
}
