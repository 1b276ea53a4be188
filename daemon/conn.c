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
 *     (backpressure: a pipelining client is slowed, not cut off) and stops
 *     handing its member fires (they wait in the session's queue or go to
 *     other consumers); both resume below a quarter, whichever way the
 *     output drained (the buffer's writes, a send straight from the stage,
 *     a release of held output): every drain goes through written();
 *   - a frame that would push it past the bound means the client is not
 *     reading at all: it is disconnected, and its member's fires in flight
 *     go back to the session's queue.  The options keep the bound at least
 *     twice the largest fire, so a fire never does this;
 *   - while its uid holds all it may (its bytes budget or its share of
 *     max_memory: bwd_state_output_full) and it has output unread, the
 *     same pause (at_cap), until the client has read all of it: a uid
 *     whose clients do not read passes its bytes by at most a reply and a
 *     fire per connection, each added while it was under them;
 *   - output the socket did not take arms the output timeout (stall):
 *     when it has waited output_timeout_ns since then, or since the
 *     client last read some (moved_ns, kept only while armed), the
 *     connection is disconnected like one past the bound.  One timer per
 *     connection, armed at most once per timeout: nothing on the path of
 *     a write the socket takes whole.
 *
 * Work per turn of the loop is bounded, so that clients pipelining
 * requests as fast as they can (hundreds of connections, each with its
 * 64 KiB of Cancels) cannot hold up the loop, and with it everyone's
 * fires: a connection handles at most CONN_TURN_FRAMES frames per turn,
 * and all of them together at most TURN_FRAMES, or what they handle in
 * BWD_TURN_NS (a Schedule into a wheel whose overflow holds a million timers
 * costs several times a Cancel; the clock is read every TURN_CLOCK_EVERY
 * frames).  A listing's page (up to a thousand entries, some 0.5 ms) is
 * worth a connection's whole share: one per connection and turn, and the
 * clock read after it.  One with more waiting
 * stops reading (its input holds them) and waits in a queue
 * (env->more_head) that goes on from a zero timeout, that is in the next
 * turn after the loop has polled again, from its front while the turn's
 * budget lasts, and for the front one's share in any case.  One that used
 * its share goes to the back: the backlogged connections share the turns
 * round-robin.  One that the turn's budget passed over before it had any
 * goes to the front, so that a connection sending a request now and then
 * (a sparse one, as fq_codel calls them) waits a turn, not for everyone
 * else's backlog.  A turn handles about 1 ms of requests, and no more
 * than one share past it.  The turn is told by
 * libevent's cached time, which it takes once a turn.
 *
 * Requests go to request.c, which fills in a reply; this file packs it.
 * Fires come from the server's pump (bwd_conn_deliver), already in flight
 * to this connection's member: each is written with its delivery number,
 * and its frame's end offset kept for auto_ack (bwd_member_written, as
 * the output drains past it).
 *
 * Monitoring (env->metrics, O(1) each): every request read by body case,
 * every Error reply by code, every Fired frame sent (and whether it went
 * in a write of its own or staged behind another fire: the consumers'
 * wake-ups, and those saved), and every connection freed by why it ended (why: the first reason the daemon had to end it,
 * else the client's).
 *
 * With a journal, a named session's connection holds its output while
 * the journal has records that are not yet durable: frames go to a side
 * buffer (held).  When a sync in flight covers all that is written, what
 * is held is covered by it (bwd_conn_cover: held moves to covered, marked
 * with the journal's position, store.c; the marks are bwd_marks_cover and
 * bwd_marks_release, which tests/check_state.c's simulation of group
 * commit drives too); when the journal is durable up
 * to a mark, the bytes before it go to the output (bwd_conn_release),
 * while those covered by a later sync (BWD_SYNCS_IN_FLIGHT marks) or held
 * meanwhile wait for theirs.  So an acknowledgement or a fire never
 * leaves before its record, and the loop never waits for the disk.  Held
 * and covered bytes count against the output bound like any others.  When
 * the journal fails, what is held stays held until the store has written
 * a new snapshot (store.c), for BWD_HELD_DOWN_NS at most: then it is
 * dropped and the connection ends with STORAGE_UNAVAILABLE
 * (bwd_conn_drop_held); meanwhile a connection that holds nothing is
 * not made to (sink).
 *
 * Unread output is counted as it changes (count_output): the daemon's
 * total for Stats, and the uid's bytes (account.c), so that a uid whose
 * clients do not read has that much less room for timers, and no more
 * memory than its budget (at_cap above).
 *
 * A dead connection leaves its session at once (its fires in flight go
 * back to the queue for the others) and is freed by a deferred event at
 * the next turn of the loop, so that no callback finds it gone.
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

#include "calendar-internal.h"
#include "daemon-internal.h"

struct bwd_conn {
	struct bwd_conn *next, **pprev;  /* env->conns                    */
	struct bwd_env *env;
	const struct bwd_limits *lim;  /* the server's, fixed while it runs */
	struct bufferevent *bev;   /* output, and input without a socket     */
	struct event *rd;          /* with a socket: its input, read here ... */
	struct evbuffer *in;       /* ... into this; else the bufferevent's  */
	struct event *reap;
	struct event *resume;      /* output drained: take requests and fires */
	struct event *hello_late;  /* armed until the Hello                  */
	struct event *stall;       /* output waiting: the output timeout     */
	bool stall_armed;
	uint64_t moved_ns;         /* ... from the client's last read        */
	struct bwd_member *member; /* after Hello                            */
	uid_t uid;
	struct bwd_uid *acct;      /* its uid's counts (state.c)             */
	pid_t pid;
	struct evbuffer *held;     /* frames waiting for the journal's sync  */
	struct evbuffer *covered;  /* held ones syncs in flight cover        */
	struct bwd_marks marks;    /* ... and what of it waits for which     */
	struct bwd_conn *held_next, **held_pprev; /* NULL pprev: not held    */
	uint64_t committed;        /* bytes ever put in the output buffer    */
	uint64_t drained;          /* bytes ever taken out by writes         */
	uint8_t *stage;            /* STAGE_CAP bytes: frames not yet in ... */
	size_t staged;             /* ... stage_to, this many                */
	struct evbuffer *stage_to; /* the output or held                     */
	struct event *flush;       /* active while something is staged       */
	bool fire_staged;          /* a fire is among what is staged         */
	uint64_t now_ns;           /* the batch's clock; 0: unread           */
	struct bwd_list_cursor list; /* where its last listing stopped       */
	bool throttled;            /* reading paused for backpressure        */
	/* Frames left for a later turn: in env's queue, reading paused. */
	struct bwd_conn *more_next, *more_prev;
	bool deferred;
	bool closing;              /* close once the output has drained      */
	bool dead;                 /* close at the next turn, unflushed      */
	bool gone;                 /* the peer stopped reading: nothing more
				      is sent, what it sent is handled      */
	bool eof;                  /* ... and it sent all it will            */
	uint8_t why;               /* enum bwd_disconnect                    */
};

/* Frames handled per turn of the loop: by one connection, by all. */
#define CONN_TURN_FRAMES 256
#define TURN_FRAMES 1024
/* ... and the clock, against BWD_TURN_NS, read every so many. */
#define TURN_CLOCK_EVERY 16

/* Big enough for a whole pipeline's replies (~20 bytes each) or a poll's
 * worth of fires; a frame larger than this bypasses the stage. */
#define STAGE_CAP 16384u

/* What the stage, the output buffer, held and covered hold together:
 * every byte is counted into committed as it is staged or added and into
 * drained as a write or a drop takes it (written(), drop_held; the output
 * buffer's drain callback runs inside the write, not deferred), so the
 * difference is their length without asking three evbuffers, as is asked
 * after every frame. */
size_t bwd_conn_output(const struct bwd_conn *c)
{
	return (size_t)(c->committed - c->drained);
}

static void kill_conn(struct bwd_conn *c);

/* The daemon ends c for this reason, unless it already had one. */
static void end_for(struct bwd_conn *c, enum bwd_disconnect why)
{
	if (!c->dead && !c->closing && c->why == BWD_DISC_CLOSED)
		c->why = (uint8_t)why;
}

/* Out of env's queue of connections with frames for a later turn. */
static void more_unlink(struct bwd_conn *c)
{
	struct bwd_env *env = c->env;

	if (c->more_prev)
		c->more_prev->more_next = c->more_next;
	else
		env->more_head = c->more_next;
	if (c->more_next)
		c->more_next->more_prev = c->more_prev;
	else
		env->more_tail = c->more_prev;
	c->more_next = c->more_prev = NULL;
	c->deferred = false;
}

/* Unread output grew by n (shrank, n < 0): the daemon's total and the
 * uid's bytes (state.c) follow it. */
static void count_output(struct bwd_conn *c, int64_t n)
{
	c->env->buffered += (uint64_t)n;
	bwd_state_output(c->env->state, c->acct, n);
}

static bool named(const struct bwd_conn *c)
{
	return c->member && c->member->session->name;
}

/* Its uid holds all it may (its bytes budget, its share of max_memory)
 * while it has output unread: it takes no more until the client has read
 * all of it. */
static bool at_cap(const struct bwd_conn *c, size_t output)
{
	return output && bwd_state_output_full(c->env->state, c->acct);
}

/* Whether fires and requests pause for c's output.  Asked after every
 * frame sent. */
static bool high_water(const struct bwd_conn *c)
{
	size_t output = bwd_conn_output(c);

	return output >= c->lim->max_output / 2 || at_cap(c, output);
}

/* Output has room again (below a quarter of the bound, and within the
 * uid's): what waited for it may go.  From any drain, but acted on in a
 * callback of its own. */
static bool low_water(const struct bwd_conn *c)
{
	size_t output = bwd_conn_output(c);

	return output < c->lim->max_output / 4 && !at_cap(c, output);
}

/* Output given to the client: an auto-ack member's fires up to here are
 * done, and what paused for the bound may resume. */
static void written(struct bwd_conn *c, size_t n)
{
	c->drained += n;
	count_output(c, -(int64_t)n);
	if (c->stall_armed)
		c->moved_ns = bw_now_ns();
	if (c->dead || !c->member)
		return;
	/* Looked at before: the drain may complete the whole flight, and
	 * then the credit it frees is what the pump must hand out. */
	if (c->member->auto_ack && c->member->flight)
		event_active(c->env->pump, 0, 0);
	bwd_member_written(c->member, c->drained);
	if ((c->throttled || !c->member->room) && low_water(c))
		event_active(c->resume, 0, 0);
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
 * when that cannot take them: the connection dies, and its fires in
 * flight go back to the queue. */
static int flush_stage(struct bwd_conn *c)
{
	size_t n = c->staged;
	ssize_t done = -1;
	int fd;

	if (!n)
		return 0;
	c->staged = 0;
	c->fire_staged = false;
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
	end_for(c, BWD_DISC_MEMORY);
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
 * journal owes a commit; NULL without memory for the latter.  While the
 * storage is down, nothing a named session's connection is sent claims to
 * be durable (what would is refused: request.c), so only a connection
 * holding already holds on, to keep its frames in order. */
static struct evbuffer *sink(struct bwd_conn *c)
{
	const struct bwd_storage *sto = &c->env->storage;
	struct bwd_conn **head;

	if (c->held_pprev)
		return c->held;
	if (!sto->journal || sto->down || !named(c) ||
	    !bwd_journal_pending(sto->journal))
		return bufferevent_get_output(c->bev);
	if (!c->held && !(c->held = evbuffer_new()))
		return NULL;
	if (!c->covered && !(c->covered = evbuffer_new()))
		return NULL;
	head = &c->env->held;
	c->held_next = *head;
	if (c->held_next)
		c->held_next->held_pprev = &c->held_next;
	c->held_pprev = head;
	*head = c;
	return c->held;
}

void bwd_marks_cover(struct bwd_marks *m, size_t n, uint64_t upto)
{
	/* A mark per sync in flight; past them (covers left from before an
	 * outage), the last mark waits for the later position too, which is
	 * later, never early. */
	if (m->n && (m->mark[m->n - 1].upto == upto ||
		     m->n == BWD_SYNCS_IN_FLIGHT)) {
		m->mark[m->n - 1].len += n;
		m->mark[m->n - 1].upto = upto;
	} else {
		m->mark[m->n].len = n;
		m->mark[m->n++].upto = upto;
	}
}

size_t bwd_marks_release(struct bwd_marks *m, uint64_t upto)
{
	size_t n = 0;
	unsigned k = 0;

	while (k < m->n && m->mark[k].upto <= upto)
		n += m->mark[k++].len;
	m->n -= k;
	memmove(m->mark, m->mark + k, m->n * sizeof(m->mark[0]));
	return n;
}

bool bwd_conn_waiting(struct bwd_conn *head)
{
	for (struct bwd_conn *c = head; c; c = c->held_next)
		if (c->staged || evbuffer_get_length(c->held))
			return true;
	return false;
}

void bwd_conn_cover(struct bwd_conn **head, uint64_t upto)
{
	for (struct bwd_conn *c = *head, *next; c; c = next) {
		size_t n;

		next = c->held_next;
		/* While held, the stage only ever fills for the held buffer. */
		if (flush_stage(c) || !(n = evbuffer_get_length(c->held)))
			continue;
		evbuffer_add_buffer(c->covered, c->held);
		bwd_marks_cover(&c->marks, n, upto);
	}
}

void bwd_conn_release(struct bwd_conn **head, uint64_t upto)
{
	for (struct bwd_conn *c = *head, *next; c; c = next) {
		size_t n = bwd_marks_release(&c->marks, upto);
		int fd;

		next = c->held_next;
		if (n && (fd = direct_fd(c)) >= 0) {
			ssize_t w = evbuffer_write_atmost(c->covered, fd, (ssize_t)n);

			sent_direct(c, w);
			n -= w > 0 ? (size_t)w : 0;
		}
		evbuffer_remove_buffer(c->covered, bufferevent_get_output(c->bev), n);
		if (!c->marks.n && !evbuffer_get_length(c->held) && !c->staged)
			unhold(c);
	}
}

struct bwd_conn *bwd_conn_next(const struct bwd_conn *c)
{
	return c->next;
}

/* Arm the timer ev to go off ns from now. */
static void arm(struct event *ev, uint64_t ns)
{
	struct timeval tv = {
		.tv_sec = (time_t)(ns / 1000000000u),
		.tv_usec = (suseconds_t)(ns % 1000000000u / 1000u),
	};

	evtimer_add(ev, &tv);
}

/* Added to the output buffer (the socket did not take it all), or written
 * out by it. */
static void on_drain(struct evbuffer *buf, const struct evbuffer_cb_info *info,
		     void *arg)
{
	struct bwd_conn *c = arg;

	(void)buf;
	if (info->n_added && !c->stall_armed && !c->dead) {
		c->stall_armed = true;
		c->moved_ns = bw_now_ns();
		arm(c->stall, c->lim->output_timeout_ns);
	}
	if (info->n_deleted)
		written(c, info->n_deleted);
}

/* Leave the session: fires in flight go back to its queue. */
static void leave(struct bwd_conn *c)
{
	if (!c->member)
		return;
	bwd_member_detach(c->member);
	c->member = NULL;
	event_active(c->env->pump, 0, 0);
}

static void conn_free(struct bwd_conn *c)
{
	unhold(c);
	if (c->held)
		evbuffer_free(c->held);
	if (c->covered)
		evbuffer_free(c->covered);
	leave(c);
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	c->env->clients--;
	if (c->deferred)
		more_unlink(c);
	count_output(c, -(int64_t)(c->committed - c->drained));
	c->env->metrics.disconnects[c->why]++;
	bwd_state_conn_close(c->env->state, c->uid);
	event_free(c->reap);
	event_free(c->flush);
	event_free(c->resume);
	event_free(c->hello_late);
	event_free(c->stall);
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

void bwd_conn_drop_held(struct bwd_conn **head, const char *msg)
{
	for (struct bwd_conn *c = *head, *next; c; c = next) {
		size_t n = evbuffer_get_length(c->held) + evbuffer_get_length(c->covered);

		next = c->held_next;
		if (c->stage_to == c->held) {
			n += c->staged;
			c->staged = 0;
			c->fire_staged = false;
		}
		evbuffer_drain(c->held, evbuffer_get_length(c->held));
		evbuffer_drain(c->covered, evbuffer_get_length(c->covered));
		c->marks.n = 0;
		/* Gone as if written, but first out of the session: no
		 * auto_ack may count a fire that never went. */
		unhold(c);
		leave(c);
		c->drained += n;
		count_output(c, -(int64_t)n);
		bwd_conn_fail(c, BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE, msg);
	}
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
	unhold(c);
	leave(c);
	set_reading(c, false);
	bufferevent_disable(c->bev, EV_WRITE);
	event_active(c->reap, 0, 0);
}

/*
 * The peer closed the socket, or broke it: a write failed (gone), or the
 * input ended (eof too).  The requests it sent before still take effect,
 * as they did when one wakeup handled a whole read (a client may pipeline
 * its last requests and close without reading a reply): the connection
 * reads on to the end of the input, handles every whole frame in turn
 * like any other, sends nothing more, takes no fires, and dies once the
 * input has ended and no whole frame is left (handle_input()).
 */
static void handle_input(struct bwd_conn *c, bool reserved);

static void peer_gone(struct bwd_conn *c, bool eof)
{
	if (c->dead)
		return;
	if (!c->gone) {
		c->gone = true;
		bufferevent_disable(c->bev, EV_WRITE);
		if (c->member)
			bwd_member_set_room(c->member, false);
		/* Its output will never drain: backpressure would hold the
		 * input for good. */
		if (c->throttled && !eof) {
			c->throttled = false;
			if (!c->deferred)
				set_reading(c, true);
		}
	}
	if (!eof || c->eof)
		return;
	c->eof = true;
	set_reading(c, false);
	if (!c->deferred)
		handle_input(c, false);
}

void bwd_conn_close(struct bwd_conn *c, bool flush)
{
	if (!flush || bwd_conn_output(c) == 0) {
		kill_conn(c);
		return;
	}
	c->closing = true;
	set_reading(c, false);
	/* A closing connection takes no more fires; those in flight go back
	 * to the queue when it is freed. */
	if (c->member)
		bwd_member_set_room(c->member, false);
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

/* A frame is an envelope (env) or one of the hot responses (resp, when
 * not NULL: no protobuf-c message filled for it). */
static int pack(const struct bwd_conn *c, const Bitwheel__V1__Envelope *env,
		const struct bwp_response *resp, uint8_t *buf, size_t cap,
		size_t *len)
{
	if (resp)
		return bwp_frame_pack_response(resp, c->lim->max_frame, buf, cap, len);
	return bwp_frame_pack(env, c->lim->max_frame, buf, cap, len);
}

/* A frame too big for the stage goes straight into out, after the stage. */
static int send_direct(struct bwd_conn *c, struct evbuffer *out,
		       const Bitwheel__V1__Envelope *env,
		       const struct bwp_response *resp, size_t size)
{
	struct evbuffer_iovec v;
	size_t len;
	int err;

	if (flush_stage(c) ||
	    evbuffer_reserve_space(out, (ev_ssize_t)size, &v, 1) != 1)
		return -ENOMEM;
	err = pack(c, env, resp, v.iov_base, v.iov_len, &len);
	if (err) {
		bwd_log(BWD_LOG_ERR, "cannot pack a frame: %s", bwp_strerror(err));
		return -EINVAL;
	}
	v.iov_len = len;
	evbuffer_commit_space(out, &v, 1);
	c->committed += len;
	count_output(c, (int64_t)len);
	return 0;
}

/* Write one frame (pack()'s env or resp); 0, or -ENOBUFS when the output
 * bound is hit. */
static int send_env(struct bwd_conn *c, const Bitwheel__V1__Envelope *env,
		    const struct bwp_response *resp)
{
	size_t room = c->stage ? STAGE_CAP - c->staged : 0, len;
	struct evbuffer *out;
	int err;

	if (c->dead)
		return -EPIPE;
	if (c->gone)
		return 0;
	if (!c->stage && (c->stage = malloc(STAGE_CAP)))
		room = STAGE_CAP;
	/* Packed at the stage's end but not counted until it is accepted:
	 * one sizing serves the bound, the room and the write. */
	err = pack(c, env, resp, room ? c->stage + c->staged : NULL, room, &len);
	if (err && err != BWP_ENOSPC) {
		bwd_log(BWD_LOG_ERR, "cannot pack a frame: %s", bwp_strerror(err));
		return -EINVAL;
	}
	if (bwd_conn_output(c) + len > c->lim->max_output)
		return -ENOBUFS;
	out = sink(c);
	if (!out)
		return -ENOMEM;
	if (err == BWP_ENOSPC) {
		if (len > STAGE_CAP || !c->stage)
			return send_direct(c, out, env, resp, len);
		if (flush_stage(c))
			return -ENOMEM;
		pack(c, env, resp, c->stage, STAGE_CAP, &len);
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
	count_output(c, (int64_t)len);
	return 0;
}

/* Send a reply request.c filled in, and close if it says so. */
static void send_reply(struct bwd_conn *c, const struct bwd_reply *r)
{
	if (r->none)
		return;
	if (!r->fast && r->env.body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR) {
		/* Request errors may name keys: debug only.  Fatal ones never do. */
		if (r->close)
			bwd_log_client(BWD_LOGK_CLOSE, c->uid, BWD_LOG_INFO,
				       "client pid %ld uid %ld: %s; closing",
				       (long)c->pid, (long)c->uid, r->message);
		else
			bwd_log(BWD_LOG_DEBUG, "client pid %ld request %" PRIu64 ": %s",
				(long)c->pid, r->env.request_id, r->message);
		bwd_metrics_error(&c->env->metrics, (unsigned)r->body.error.code);
	}
	if (r->fast ? send_env(c, NULL, &r->resp) : send_env(c, &r->env, NULL)) {
		/* A reply that does not fit means the client is not reading. */
		end_for(c, BWD_DISC_SLOW);
		bwd_log_client(BWD_LOGK_SLOW, c->uid, BWD_LOG_WARNING,
			       "client pid %ld uid %ld is not reading: %zu bytes unread reached the output bound; disconnecting",
			       (long)c->pid, (long)c->uid, bwd_conn_output(c));
		kill_conn(c);
		return;
	}
	if (r->close) {
		end_for(c, BWD_DISC_ERROR);
		bwd_conn_close(c, true);
	}
}

void bwd_conn_fail(struct bwd_conn *c, Bitwheel__V1__ErrorCode code,
		   const char *msg)
{
	struct bwd_reply r;

	bwd_request_fail(&r, code, "%s", msg);
	send_reply(c, &r);
}

void bwd_fired_of(const struct bwd_fire *f, struct bwp_response *r,
		  Bitwheel__V1__DeadLetter *dead)
{
	*r = (struct bwp_response){
		.body_case = BITWHEEL__V1__ENVELOPE__BODY_FIRED,
		.has_key = true,
		.key = f->key,
		.has_payload = f->has_payload,
		.payload_len = f->payload_len,
		.payload = f->payload,
		.has_deadline_ns = true,
		.deadline_ns = f->deadline_ns,
		.has_fired_at_ns = true,
		.fired_at_ns = f->fired_ns,
		.has_fire_count = !f->wall && f->count != 0,
		.fire_count = f->wall ? 0 : f->count,
		.has_late = f->late,
		.late = f->late,
		.has_redelivered = f->redelivered,
		.redelivered = f->redelivered,
		.has_delivery = true,
		.delivery = bwd_fire_delivery(f),
		.has_deliveries = true,
		.deliveries = f->deliveries,
		.has_due_realtime_ns = f->wall,
		.due_realtime_ns = f->wall ? f->wall_ns : 0,
	};
	if (!f->dead)
		return;
	bitwheel__v1__dead_letter__init(dead);
	dead->has_session = 1;
	dead->session.data = (uint8_t *)f->dead->origin;
	dead->session.len = strlen(f->dead->origin);
	dead->has_deliveries = dead->has_first_handed_ns = 1;
	dead->has_last_handed_ns = dead->has_dead_lettered_ns = 1;
	dead->has_reason = 1;
	dead->deliveries = f->dead->deliveries;
	dead->first_handed_ns = f->dead->first_ns;
	dead->last_handed_ns = f->dead->last_ns;
	dead->dead_lettered_ns = f->dead->dead_ns;
	dead->reason = (Bitwheel__V1__TakeBack)f->dead->why;
	r->dead_letter = dead;
}

void bwd_conn_deliver(struct bwd_conn *c, struct bwd_fire *f)
{
	struct bwp_response fired;
	Bitwheel__V1__DeadLetter dead;

	bwd_fired_of(f, &fired, &dead);
	if (send_env(c, NULL, &fired)) {
		end_for(c, BWD_DISC_SLOW);
		bwd_log_client(BWD_LOGK_SLOW, c->uid, BWD_LOG_WARNING,
			       "client pid %ld uid %ld: a fire does not fit its output (%zu bytes unread); disconnecting",
			       (long)c->pid, (long)c->uid, bwd_conn_output(c));
		kill_conn(c);
		return;
	}
	c->env->metrics.delivered++;
	/* Staged behind another fire: they leave in one write. */
	if (c->fire_staged)
		c->env->metrics.fires_coalesced++;
	else
		c->env->metrics.fire_writes++;
	c->fire_staged = c->staged > 0;
	f->wire_end = c->committed;
	if (high_water(c))
		bwd_member_set_room(c->member, false);
}

static Bitwheel__V1__ErrorCode frame_error_code(int err)
{
	switch (err) {
	case BWP_ETOOBIG:
		return BITWHEEL__V1__ERROR_CODE__FRAME_TOO_LARGE;
	case BWP_ENOBODY:
		return BITWHEEL__V1__ERROR_CODE__UNKNOWN_MESSAGE;
	case BWP_ERANGE:
		return BITWHEEL__V1__ERROR_CODE__BAD_REQUEST;
	default:
		return BITWHEEL__V1__ERROR_CODE__BAD_FRAME;
	}
}

/*
 * Whether this turn's budget lets c handle one more frame, having handled
 * `done` in this call; reserved: the queue's front's share, whatever the
 * turn's budget.  The turn's count and clock restart when libevent's
 * cached time (taken once a turn) moved.
 */
/* A new turn of the loop starts the count over.  The loop's cached time
 * tells one: it changes only between turns, so asked once per batch. */
static void turn_begin(struct bwd_env *env)
{
	struct timeval tv;

	if (event_base_gettimeofday_cached(env->base, &tv) == 0 &&
	    (tv.tv_sec != env->turn_tv.tv_sec || tv.tv_usec != env->turn_tv.tv_usec)) {
		env->turn_tv = tv;
		env->turn_frames = 0;
		env->turn_start_ns = bw_now_ns();
	}
}

/* Whether the turn has room for one more frame of c, done of its own
 * handled in it: turn_begin() was asked in this turn. */
static bool turn_left(const struct bwd_conn *c, unsigned done, bool reserved)
{
	const struct bwd_env *env = c->env;

	if (done >= CONN_TURN_FRAMES)
		return false;
	if (reserved)
		return true;
	if (env->turn_frames >= TURN_FRAMES)
		return false;
	return env->turn_frames % TURN_CLOCK_EVERY != 0 || env->turn_frames == 0 ||
	       bw_now_ns() - env->turn_start_ns < BWD_TURN_NS;
}

static bool turn_allows(struct bwd_conn *c, unsigned done, bool reserved)
{
	turn_begin(c->env);
	return turn_left(c, done, reserved);
}

/* Frames are waiting beyond the turn's budget: go on in a later turn,
 * from the queue's front or back; one queued already keeps its place.
 * The socket stays in the loop's epoll set, its readiness ignored while
 * the connection is queued (on_sock_read, on_read): taking it out and
 * putting it back cost two epoll_ctl(2) a deferral, 6 % of the daemon's
 * samples under a pipelined load, against a callback a turn. */
static void defer_input(struct bwd_conn *c, bool front)
{
	static const struct timeval zero = { 0, 0 };
	struct bwd_env *env = c->env;

	if (c->deferred)
		return;
	c->deferred = true;
	if (front) {
		c->more_prev = NULL;
		c->more_next = env->more_head;
		if (env->more_head)
			env->more_head->more_prev = c;
		else
			env->more_tail = c;
		env->more_head = c;
	} else {
		c->more_next = NULL;
		c->more_prev = env->more_tail;
		if (env->more_tail)
			env->more_tail->more_next = c;
		else
			env->more_head = c;
		env->more_tail = c;
	}
	evtimer_add(env->more, &zero);
}

/* Handle the whole frames in the input buffer, as many as the turn's
 * budget allows (reserved: the queue's front, its share in any case). */
static void handle_input(struct bwd_conn *c, bool reserved)
{
	struct evbuffer *in = c->in;
	size_t max = c->lim->max_frame;
	struct bwd_request_ctx ctx = {
		.env = c->env, .member = c->member, .owner = c,
		.list = &c->list, .uid = c->uid, .pid = c->pid,
	};
	/* Only a Schedule may need a payload's length, and a calendar spec's
	 * (Calendar); the others are small unless padded with fields nobody
	 * reads, which cost to decode. */
	size_t slow = c->lim->max_payload + BWP_PAYLOAD_OVERHEAD +
		BWD_CAL_SPEC_MAX;
	struct bwd_reply reply;
	/* p[off, n): what is left of the input's first chunk; the frames
	 * before off are handled but drained only once, at the end. */
	const uint8_t *p = NULL;
	size_t n = 0, off = 0;
	unsigned done = 0;
	char msg[96];

	turn_begin(c->env);
	while (!c->closing && !c->dead) {
		Bitwheel__V1__Envelope *env;
		struct bwp_request req;
		size_t len;
		int err;

		if (!turn_left(c, done, reserved)) {
			if (evbuffer_get_length(in) > off)
				defer_input(c, done == 0);
			break;
		}
		err = bwp_frame_parse_request_bounded(p ? p + off : NULL, n - off,
						      max, slow, &req, &env, &len);

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
				bwd_conn_fail(c, BITWHEEL__V1__ERROR_CODE__NO_MEMORY,
					      "out of memory");
				break;
			}
			n = evbuffer_get_contiguous_space(in);
			continue;
		}
		if (err) {
			snprintf(msg, sizeof(msg), "bad frame: %s", bwp_strerror(err));
			bwd_conn_fail(c, frame_error_code(err), msg);
			break;
		}
		off += len;
		done++;
		c->env->turn_frames++;
		bwd_metrics_request(&c->env->metrics,
				    (unsigned)(env ? env->body_case : req.body_case));
		if (env) {
			bwd_request_handle(&ctx, env, &reply);
			bwp_frame_free(env);
		} else {
			bwd_request_handle_fast(&ctx, &req, &reply);
		}
		if (ctx.member && !c->member)
			event_del(c->hello_late);
		c->member = ctx.member;
		send_reply(c, &reply);
		bwd_reply_free(&reply);
		/* A listing's page is worth a connection's whole share of
		 * the turn (its next request waits for the next turn, even
		 * at the queue's front), and the clock is read before the
		 * turn's next frame. */
		if (reply.heavy) {
			done = CONN_TURN_FRAMES;
			c->env->turn_frames += TURN_CLOCK_EVERY -
				c->env->turn_frames % TURN_CLOCK_EVERY;
		}
		if (!c->closing && !c->dead && !c->gone && high_water(c)) {
			c->throttled = true;
			set_reading(c, false);
			break;
		}
	}
	if (off)
		evbuffer_drain(in, off);
	event_active(c->env->pump, 0, 0);
	if (c->eof && !c->deferred)
		kill_conn(c);
}

/* Input through the bufferevent: the fuzzer's in-memory pair. */
static void on_read(struct bufferevent *bev, void *arg)
{
	struct bwd_conn *c = arg;

	(void)bev;
	if (!c->deferred)
		handle_input(c, false);
}

/*
 * Input from the socket, read here rather than by the bufferevent, which
 * asks the kernel how much is waiting (an ioctl) before every read: one
 * recv() per wakeup instead.  The input never holds more than the largest
 * frame past what the turn's budget left unhandled, and a read takes no
 * more than that.  Nothing is read once the turn's budget is spent: the
 * connection waits at the queue's front and reads there (reserved), so
 * that hundreds of connections becoming readable at once cost a turn no
 * more than the reads of those it handles.
 */
static void read_input(struct bwd_conn *c, bool reserved)
{
	struct evbuffer *in = c->in;
	size_t room = c->lim->max_frame + BWP_HEADER_SIZE - evbuffer_get_length(in);
	struct evbuffer_iovec v;
	ssize_t n;

	if (!reserved && !turn_allows(c, 0, false)) {
		defer_input(c, true);
		return;
	}
	if (!room) {
		/* Whole frames wait for a turn's budget: no read of 0 bytes,
		 * which would look like the client's EOF. */
		handle_input(c, reserved);
		return;
	}
	if (evbuffer_reserve_space(in, (ev_ssize_t)room, &v, 1) != 1) {
		bwd_conn_fail(c, BITWHEEL__V1__ERROR_CODE__NO_MEMORY, "out of memory");
		return;
	}
	n = recv(bufferevent_getfd(c->bev), v.iov_base, room < v.iov_len ? room : v.iov_len,
		 MSG_DONTWAIT);
	if (n > 0) {
		v.iov_len = (size_t)n;
		evbuffer_commit_space(in, &v, 1);
		handle_input(c, reserved);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		/* Frames a turn's budget left may be waiting all the same. */
		handle_input(c, reserved);
		return;
	}
	if (n < 0)
		bwd_log(BWD_LOG_DEBUG, "client pid %ld: %s", (long)c->pid, strerror(errno));
	peer_gone(c, true);
}

static void on_sock_read(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_conn *c = arg;

	(void)fd;
	(void)what;
	/* Queued: it reads when the queue comes to it (defer_input). */
	if (!c->deferred)
		read_input(c, false);
}

void bwd_conn_run_deferred(struct bwd_env *env)
{
	static const struct timeval zero = { 0, 0 };
	/* Those queued now: one that defers again goes behind them. */
	struct bwd_conn *last = env->more_tail;
	bool first = true;

	while (env->more_head) {
		struct bwd_conn *c = env->more_head;
		bool was_last = c == last;

		if (!turn_allows(c, 0, first))
			break;
		more_unlink(c);
		/* Backpressure's resume (on_resume) goes on from there itself. */
		if (!c->dead && !c->closing && !c->throttled) {
			if (c->rd && !c->eof)
				read_input(c, first);
			else
				handle_input(c, first);
			first = false;
			if (!c->deferred && !c->throttled && !c->closing && !c->dead &&
			    !c->eof)
				set_reading(c, true);
		}
		if (was_last)
			break;
	}
	if (env->more_head)
		evtimer_add(env->more, &zero);
}

/* The output drained below a quarter of the bound: fires and requests
 * that paused for it go on. */
static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_conn *c = arg;

	(void)fd;
	(void)what;
	if (c->dead || c->closing || c->gone || !low_water(c))
		return;
	if (c->member && !c->member->room) {
		bwd_member_set_room(c->member, true);
		event_active(c->env->pump, 0, 0);
	}
	if (c->throttled) {
		c->throttled = false;
		set_reading(c, true);
		/* Frames may already wait in the input buffer. */
		handle_input(c, false);
	}
}

/* A connection that holds a slot without saying who it is gets no more. */
static void on_hello_late(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_conn *c = arg;

	(void)fd;
	(void)what;
	if (!c->dead && !c->closing && !c->member)
		bwd_conn_fail(c, BITWHEEL__V1__ERROR_CODE__HELLO_REQUIRED,
			      "no Hello within the hello timeout");
}

/*
 * The output timeout: what the socket did not take has waited since
 * moved_ns (its arming, or the client's last read) for output_timeout_ns.
 * A client that has read nothing of it for that long is cut off, and its
 * fires in flight go back to its session's queue.
 */
static void on_stall(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_conn *c = arg;
	uint64_t idle = bw_now_ns() - c->moved_ns;

	(void)fd;
	(void)what;
	c->stall_armed = false;
	if (c->dead || c->gone || !evbuffer_get_length(bufferevent_get_output(c->bev)))
		return;
	if (idle < c->lim->output_timeout_ns) {
		c->stall_armed = true;
		arm(c->stall, c->lim->output_timeout_ns - idle);
		return;
	}
	end_for(c, BWD_DISC_SLOW);
	bwd_log_client(BWD_LOGK_SLOW, c->uid, BWD_LOG_WARNING,
		       "client pid %ld uid %ld read none of its output (%zu bytes) for %" PRIu64 " ms (output timeout); disconnecting",
		       (long)c->pid, (long)c->uid, bwd_conn_output(c), idle / 1000000u);
	kill_conn(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct bwd_conn *c = arg;

	(void)bev;
	if (c->closing && bwd_conn_output(c) == 0)
		kill_conn(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct bwd_conn *c = arg;

	(void)bev;
	if (what & BEV_EVENT_ERROR)
		bwd_log(BWD_LOG_DEBUG, "client pid %ld: %s", (long)c->pid,
			evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	/* With a socket its input is read by read_input(): an event here is
	 * the output's. */
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		peer_gone(c, !c->rd || (what & BEV_EVENT_READING));
}

int bwd_conn_new(struct bwd_env *env, struct bufferevent *bev, uid_t uid,
		 pid_t pid, struct bwd_conn **out)
{
	struct bwd_conn *c = calloc(1, sizeof(*c));
	const struct bwd_limits *l = &env->opt->limits;

	if (!c)
		goto fail;
	c->env = env;
	c->lim = l;
	c->uid = uid;
	c->acct = bwd_state_uid(env->state, uid);
	c->pid = pid;
	c->bev = bev;
	c->reap = event_new(env->base, -1, 0, on_reap, c);
	c->flush = event_new(env->base, -1, 0, on_flush, c);
	c->resume = event_new(env->base, -1, 0, on_resume, c);
	c->hello_late = evtimer_new(env->base, on_hello_late, c);
	c->stall = evtimer_new(env->base, on_stall, c);
	if (!c->reap || !c->flush || !c->resume || !c->hello_late || !c->stall)
		goto fail;
	arm(c->hello_late, l->hello_timeout_ns);
	c->in = bufferevent_get_input(bev);
	if (bufferevent_getfd(bev) >= 0) {
		c->rd = event_new(env->base, bufferevent_getfd(bev), EV_READ | EV_PERSIST,
				  on_sock_read, c);
		if (!c->rd || !(c->in = evbuffer_new()))
			goto fail;
	}
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	if (!evbuffer_add_cb(bufferevent_get_output(c->bev), on_drain, c))
		goto fail;
	bufferevent_setwatermark(c->bev, EV_READ, 0, l->max_frame + BWP_HEADER_SIZE);
	bufferevent_enable(c->bev, EV_WRITE);
	set_reading(c, true);
	c->pprev = &env->conns;
	c->next = *c->pprev;
	if (c->next)
		c->next->pprev = &c->next;
	*c->pprev = c;
	env->clients++;
	*out = c;
	return 0;
fail:
	if (c && c->reap)
		event_free(c->reap);
	if (c && c->flush)
		event_free(c->flush);
	if (c && c->resume)
		event_free(c->resume);
	if (c && c->hello_late)
		event_free(c->hello_late);
	if (c && c->stall)
		event_free(c->stall);
	if (c && c->rd) {
		event_free(c->rd);
		if (c->in)
			evbuffer_free(c->in);
	}
	free(c);
	bufferevent_free(bev);
	return -ENOMEM;
}
