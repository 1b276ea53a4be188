/*
 * conn.c - one client connection: frames in, frames out, and its bounds.
 *
 * A connection is a libevent bufferevent plus the session it attached with
 * Hello.  Input: every complete frame in the input buffer is parsed
 * (proto/frame.c owns the bytes) and handled in one wakeup; the input
 * never holds more than one frame past the maximum, because reading stops
 * at that watermark.  Output: replies and fires are packed straight into
 * a per-connection stage, a plain array, and moved to the output evbuffer
 * in one piece by a deferred event later in the same turn of the loop (or
 * sooner, when the stage is full or the destination changes), so requests
 * that arrive together are answered by one write.  While the output
 * buffer is empty that write is a send() straight from the stage; only
 * what the socket does not take goes to the output evbuffer, which
 * libevent writes when the socket is writable again.  So the usual batch
 * costs one system call: no copy, no write interest to add to and remove
 * from epoll, no extra wakeup.  Input frames
 * are read in place from the input buffer's first chunk and drained once
 * a batch; a Schedule's payload points into it while it is handled.
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
 * buffer (held).  When a sync of the journal begins, what is held is
 * covered by it (bwd_conn_cover: held moves to covered); when that sync is
 * done, covered goes to the output (bwd_conn_release), while frames held
 * meanwhile wait for the next sync.  So an acknowledgement or a fire never
 * leaves before its record, and the loop never waits for the disk.  Held
 * and covered bytes count against the output bound like any others.
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
#include <sys/socket.h>

#include "daemon-internal.h"

struct bwd_conn {
	struct bwd_conn *next, **pprev;  /* the server's list             */
	struct bwd_server *srv;
	const struct bwd_limits *lim;  /* the server's, fixed while it runs */
	struct bufferevent *bev;   /* output, and input without a socket     */
	struct event *rd;          /* with a socket: its input, read here ... */
	struct evbuffer *in;       /* ... into this; else the bufferevent's  */
	struct event *reap;
	struct bwd_session *session;
	uid_t uid;
	pid_t pid;
	struct evbuffer *held;     /* frames waiting for the journal's sync  */
	struct evbuffer *covered;  /* held ones the sync in flight covers    */
	struct bwd_conn *held_next, **held_pprev; /* NULL pprev: not held    */
	uint64_t committed;        /* bytes ever put in the output buffer    */
	uint64_t drained;          /* bytes ever taken out by writes         */
	uint8_t *stage;            /* STAGE_CAP bytes: frames not yet in ... */
	size_t staged;             /* ... stage_to, this many                */
	struct evbuffer *stage_to; /* the output or held                     */
	struct event *flush;       /* active while something is staged       */
	uint64_t now_ns;           /* bwd_conn_now() of this batch; 0: unread */
	bool throttled;            /* reading paused for backpressure        */
	bool closing;              /* close once the output has drained      */
	bool dead;                 /* close at the next turn, unflushed      */
};

/* Big enough for a whole pipeline's replies (~20 bytes each) or a poll's
 * worth of fires; a frame larger than this bypasses the stage. */
#define STAGE_CAP 16384u

static const struct bwd_limits *limits(const struct bwd_conn *c)
{
	return c->lim;
}

size_t bwd_conn_output(const struct bwd_conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev)) +
	       (c->held ? evbuffer_get_length(c->held) : 0) +
	       (c->covered ? evbuffer_get_length(c->covered) : 0) + c->staged;
}

uint64_t bwd_conn_now(struct bwd_conn *c)
{
	if (!c->now_ns)
		c->now_ns = bw_now_ns();
	return c->now_ns;
}

static void kill_conn(struct bwd_conn *c);

static bool named(const struct bwd_conn *c)
{
	return c->session && c->session->name;
}

/* Output given to the client: fires up to here are its own now. */
static void written(struct bwd_conn *c, size_t n)
{
	c->drained += n;
	if (named(c))
		bwd_session_written(c->session, c->drained);
}

/* Where output may skip the output buffer, -1 if it may not: only with a
 * socket (not the fuzzer's in-memory pair) and an empty buffer, so that
 * nothing is overtaken. */
static int direct_fd(struct bwd_conn *c)
{
	if (evbuffer_get_length(bufferevent_get_output(c->bev)))
		return -1;
	return bufferevent_getfd(c->bev);
}

/* After n bytes went straight to the socket (n < 0: none did). */
static void sent_direct(struct bwd_conn *c, ssize_t n)
{
	if (n <= 0)
		return;
	written(c, (size_t)n);
	/* The buffer's write callback will not see these bytes go. */
	if (c->closing && bwd_conn_output(c) == 0)
		kill_conn(c);
}

/* Move the staged frames out: straight to the socket when it takes them
 * (most batches: no evbuffer copy, no write event to enable in epoll
 * and no second wakeup to write), the rest to their evbuffer.  -ENOMEM
 * when that cannot take them: frames already counted as sent are then
 * lost, and the connection dies. */
static int flush_stage(struct bwd_conn *c)
{
	size_t n = c->staged;
	ssize_t done = -1;
	int fd;

	if (!n)
		return 0;
	c->staged = 0;
	if (c->stage_to == bufferevent_get_output(c->bev) &&
	    (fd = direct_fd(c)) >= 0) {
		/* A failure is the buffer's to find and report on its write. */
		done = send(fd, c->stage, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		sent_direct(c, done);
		if (done == (ssize_t)n)
			return 0;
	}
	if (evbuffer_add(c->stage_to, c->stage + (done > 0 ? done : 0),
			 n - (size_t)(done > 0 ? done : 0)) == 0)
		return 0;
	bwd_log(BWD_LOG_ERR, "client pid %ld: out of memory for its output; disconnecting",
		(long)c->pid);
	kill_conn(c);
	return -ENOMEM;
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
	if (!c->covered && !(c->covered = evbuffer_new()))
		return NULL;
	head = bwd_server_held(c->srv);
	c->held_next = *head;
	if (c->held_next)
		c->held_next->held_pprev = &c->held_next;
	c->held_pprev = head;
	*head = c;
	return c->held;
}

void bwd_conn_cover(struct bwd_conn **head)
{
	for (struct bwd_conn *c = *head, *next; c; c = next) {
		next = c->held_next;
		/* While held, the stage only ever fills for the held buffer. */
		if (flush_stage(c) == 0)
			evbuffer_add_buffer(c->covered, c->held);
	}
}

void bwd_conn_release(struct bwd_conn **head)
{
	for (struct bwd_conn *c = *head, *next; c; c = next) {
		int fd = direct_fd(c);

		next = c->held_next;
		if (fd >= 0 && evbuffer_get_length(c->covered))
			sent_direct(c, evbuffer_write(c->covered, fd));
		evbuffer_add_buffer(bufferevent_get_output(c->bev), c->covered);
		if (!evbuffer_get_length(c->held) && !c->staged)
			unhold(c);
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

/* Written out: those fires are the client's now. */
static void on_drain(struct evbuffer *buf, const struct evbuffer_cb_info *info,
		     void *arg)
{
	struct bwd_conn *c = arg;

	(void)buf;
	if (info->n_deleted)
		written(c, info->n_deleted);
}

static void conn_free(struct bwd_conn *c)
{
	unhold(c);
	if (c->held)
		evbuffer_free(c->held);
	if (c->covered)
		evbuffer_free(c->covered);
	if (named(c))
		bwd_session_unsend(c->session);
	if (c->session)
		bwd_session_detach(c->session);
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	bwd_server_conn_gone(c->srv);
	event_free(c->reap);
	event_free(c->flush);
	if (c->rd) {
		event_free(c->rd);
		evbuffer_free(c->in);
	}
	free(c->stage);
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

/* Start or stop taking requests from the client. */
static void set_reading(struct bwd_conn *c, bool on)
{
	if (c->rd) {
		if (on)
			event_add(c->rd, NULL);
		else
			event_del(c->rd);
	} else if (on) {
		bufferevent_enable(c->bev, EV_READ);
	} else {
		bufferevent_disable(c->bev, EV_READ);
	}
}

/* Free at the next turn of the loop, whatever is left unsent. */
static void kill_conn(struct bwd_conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	c->staged = 0; /* as unsent as the output it never reached */
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
	set_reading(c, false);
	bufferevent_disable(c->bev, EV_WRITE);
	event_active(c->reap, 0, 0);
}

void bwd_conn_close(struct bwd_conn *c, bool flush)
{
	if (!flush || bwd_conn_output(c) == 0) {
		kill_conn(c);
		return;
	}
	c->closing = true;
	set_reading(c, false);
	/* on_write then runs once the last byte is out. */
	bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_conn *c = arg;

	(void)fd;
	(void)what;
	if (!c->dead)
		flush_stage(c);
}

/* A frame too big for the stage goes straight into out, after the stage. */
static int send_direct(struct bwd_conn *c, struct evbuffer *out,
		       const Bitwheel__V1__Envelope *env, size_t size)
{
	struct evbuffer_iovec v;
	size_t len;
	int err;

	if (flush_stage(c) ||
	    evbuffer_reserve_space(out, (ev_ssize_t)size, &v, 1) != 1)
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

int bwd_conn_send(struct bwd_conn *c, const Bitwheel__V1__Envelope *env)
{
	size_t room = c->stage ? STAGE_CAP - c->staged : 0, len;
	struct evbuffer *out;
	int err;

	if (c->dead)
		return -EPIPE;
	if (!c->stage && (c->stage = malloc(STAGE_CAP)))
		room = STAGE_CAP;
	/* Packed at the stage's end but not counted until it is accepted:
	 * one sizing serves the bound, the room and the write. */
	err = bwp_frame_pack(env, limits(c)->max_frame,
			     room ? c->stage + c->staged : NULL, room, &len);
	if (err && err != BWP_ENOSPC) {
		bwd_log(BWD_LOG_ERR, "cannot pack a frame: %s", bwp_strerror(err));
		return -EINVAL;
	}
	if (bwd_conn_output(c) + len > limits(c)->max_output)
		return -ENOBUFS;
	out = sink(c);
	if (!out)
		return -ENOMEM;
	if (err == BWP_ENOSPC) {
		if (len > STAGE_CAP || !c->stage)
			return send_direct(c, out, env, len);
		if (flush_stage(c))
			return -ENOMEM;
		bwp_frame_pack(env, limits(c)->max_frame, c->stage, STAGE_CAP, &len);
	} else if (c->staged && out != c->stage_to) {
		/* The journal began to hold output: what was staged before
		 * goes to the output, this frame to the held buffer. */
		size_t before = c->staged;

		if (flush_stage(c))
			return -ENOMEM;
		memmove(c->stage, c->stage + before, len);
	}
	c->stage_to = out;
	if (!c->staged)
		event_active(c->flush, 0, 0);
	c->staged += len;
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

/* Handle every whole frame in the input buffer. */
static void handle_input(struct bwd_conn *c)
{
	struct evbuffer *in = c->in;
	size_t max = limits(c)->max_frame;
	/* p[off, n): what is left of the input's first chunk; the frames
	 * before off are handled but drained only once, at the end. */
	const uint8_t *p = NULL;
	size_t n = 0, off = 0;

	c->now_ns = 0;
	while (!c->closing && !c->dead) {
		Bitwheel__V1__Envelope *env;
		struct bwp_request req;
		size_t len;
		int err = bwp_frame_parse_request(p ? p + off : NULL, n - off,
						  max, &req, &env, &len);

		if (err == BWP_EMORE) {
			/* The frame runs past this chunk, or past the input:
			 * len says how far (the header alone says that, or
			 * that it's too big). */
			if (off) {
				evbuffer_drain(in, off);
				off = 0;
			}
			n = 0;
			if (evbuffer_get_length(in) < len)
				break;
			if (!(p = evbuffer_pullup(in, (ev_ssize_t)len))) {
				bwd_conn_error(c, NULL, BITWHEEL__V1__ERROR_CODE__NO_MEMORY,
					       true, "out of memory");
				break;
			}
			n = evbuffer_get_contiguous_space(in);
			continue;
		}
		if (err) {
			bwd_conn_error(c, NULL, frame_error_code(err), true,
			       "bad frame: %s", bwp_strerror(err));
			break;
		}
		off += len;
		if (env) {
			bwd_request_handle(c, env);
			bwp_frame_free(env);
		} else {
			bwd_request_handle_fast(c, &req);
		}
		if (!c->closing && !c->dead &&
		    bwd_conn_output(c) >= limits(c)->max_output / 2) {
			c->throttled = true;
			set_reading(c, false);
			break;
		}
	}
	if (off)
		evbuffer_drain(in, off);
	c->now_ns = 0;
	bwd_server_rearm(c->srv);
}

/* Input through the bufferevent: the fuzzer's in-memory pair. */
static void on_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	handle_input(arg);
}

/*
 * Input from the socket, read here rather than by the bufferevent, which
 * asks the kernel how much is waiting (an ioctl) before every read: one
 * recv() per wakeup instead.  The input never holds more than the largest
 * frame: whole frames are handled at once, so what is left is the start
 * of one, and a read takes no more than the rest of the largest.
 */
static void on_sock_read(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_conn *c = arg;
	struct evbuffer *in = c->in;
	size_t room = limits(c)->max_frame + BWP_HEADER_SIZE - evbuffer_get_length(in);
	struct evbuffer_iovec v;
	ssize_t n;

	(void)what;
	if (evbuffer_reserve_space(in, (ev_ssize_t)room, &v, 1) != 1) {
		bwd_conn_error(c, NULL, BITWHEEL__V1__ERROR_CODE__NO_MEMORY, true,
			       "out of memory");
		return;
	}
	n = recv(fd, v.iov_base, room < v.iov_len ? room : v.iov_len, MSG_DONTWAIT);
	if (n > 0) {
		v.iov_len = (size_t)n;
		evbuffer_commit_space(in, &v, 1);
		handle_input(c);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0)
		bwd_log(BWD_LOG_DEBUG, "client pid %ld: %s", (long)c->pid, strerror(errno));
	kill_conn(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct bwd_conn *c = arg;

	(void)bev;
	if (c->closing) {
		if (bwd_conn_output(c) == 0)
			kill_conn(c);
		return;
	}
	bwd_conn_drain_queue(c);
	if (c->throttled && bwd_conn_output(c) < limits(c)->max_output / 2) {
		c->throttled = false;
		set_reading(c, true);
		/* Frames may already wait in the input buffer. */
		handle_input(c);
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
	c->lim = l;
	c->uid = uid;
	c->pid = pid;
	c->bev = bev;
	c->reap = event_new(base, -1, 0, on_reap, c);
	c->flush = event_new(base, -1, 0, on_flush, c);
	if (!c->reap || !c->flush)
		goto fail;
	c->in = bufferevent_get_input(bev);
	if (bufferevent_getfd(bev) >= 0) {
		c->rd = event_new(base, bufferevent_getfd(bev), EV_READ | EV_PERSIST,
				  on_sock_read, c);
		if (!c->rd || !(c->in = evbuffer_new()))
			goto fail;
	}
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	if (!evbuffer_add_cb(bufferevent_get_output(c->bev), on_drain, c))
		goto fail;
	bufferevent_setwatermark(c->bev, EV_READ, 0, l->max_frame + BWP_HEADER_SIZE);
	bufferevent_setwatermark(c->bev, EV_WRITE, l->max_output / 4, 0);
	bufferevent_enable(c->bev, EV_WRITE);
	set_reading(c, true);
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
	if (c && c->flush)
		event_free(c->flush);
	if (c && c->rd) {
		event_free(c->rd);
		if (c->in)
			evbuffer_free(c->in);
	}
	free(c);
	bufferevent_free(bev);
	return -ENOMEM;
}
