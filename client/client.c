/*
 * client.c - libbitwheel-client: one connection to bitwheeld, driven by
 * blocking calls or by the caller's event loop.  The contract is in
 * bitwheel-client.h, the protocol in proto/PROTOCOL.md; every byte on the
 * socket goes through proto/frame.h.
 *
 * Data layout of a struct bwc_client:
 *
 *   fd          the socket, always O_NONBLOCK: blocking calls wait in
 *               ppoll(), so they mix freely with the non-blocking ones.
 *   out         packed frames: [out_off, out_len) not yet written, and
 *               before out_off those written (out_trim drops them, but
 *               while the client would resume a named session, not those
 *               from the oldest request without a reply on: they may go
 *               again).  out_base numbers out[0] among all the bytes of
 *               the connection, so a request's frame is found by its
 *               position (struct request's at, len).
 *   in          bytes read but not yet parsed: [0, in_len), at most one
 *               partial frame after a parse (the buffer grows to
 *               max_frame + 4 when a frame that large is on its way).
 *   requests    ring of struct request: the requests sent (or queued to
 *               send) and not yet answered, in send order.  The daemon
 *               answers in request order (PROTOCOL.md 5.2), so a reply
 *               always belongs to the front entry.  An Ack without
 *               request_id (bwc_send_ack) asks for no reply and has no
 *               entry: it is only bytes in out.
 *   done        ring of struct done: answered or failed non-blocking
 *               requests whose callbacks bwc_dispatch() has yet to run.
 *   fires       ring of struct fire: fires not yet handed out, their
 *               fields by value, each tagged with conn_seq, the number of
 *               the connection it came on (bumped by every dial).  Fires
 *               of one connection are a suffix of the ring, so a
 *               manual-ack consumer's connection closing drops its fires
 *               from the back (discard_fires): the daemon takes them
 *               back and delivers them again.
 *               done and fires carry a sequence number from one counter,
 *               so dispatch can merge them back into arrival order.
 *   pay         the queued fires' payloads, back to back in fire order:
 *               [pay_off, pay_len), each followed by its dead-letter
 *               history's session name, if any.  A fire's payload is copied here when
 *               it is queued (the input buffer is reused) and out again
 *               when it is handed out, into held (bwc_wait_fire's, valid
 *               until the next call) or lent (the fire handler's), which
 *               nothing else writes: pay itself moves when it grows.
 *   waiter_*    the one blocking call in progress (there is never more
 *               than one: callbacks may not make blocking calls and the
 *               object is single-threaded), besides dial's own Hello
 *               while reconnecting under it.
 *   replays, rp requests waiting for a new connection, and their frames
 *               back to back, while reconnecting: those in flight when
 *               the connection was lost that may go again, then any made
 *               meanwhile.
 *
 * Reconnecting (bitwheel-client.h, "Riding through a restart"): a named
 * session's connection lost to EOF, a reset or SHUTTING_DOWN
 * (conn_close, lost) moves the requests without a reply to replays, those
 * that are safe to send again (keep_for_replay; enum repeat says which),
 * settling the rest (BWC_EUNKNOWN), and sets down_since_ns.  Requests
 * made meanwhile join replays (submit); the next call that waits
 * (wait_io: the blocking calls, bwc_wait_fire) or bwc_dispatch runs
 * resume(): dial attempts on a backoff schedule (rc_next_ns, rc_attempts;
 * kept between calls, so a call's deadline only pauses it) until the
 * Hello is answered, then replay() puts replays back in front of
 * anything new; or the give-up time passes and everything waiting fails
 * with BWC_EGAVEUP.  Buffers and rings swap places rather than copy, so
 * neither the loss nor the return allocates.
 *
 * Replies and fires are read with bwp_frame_parse_response(): a
 * ScheduleReply, CancelReply, AckReply or Fired lands in a struct
 * bwp_response in place, and what the client keeps of it (struct answer,
 * struct fire) is plain values; only the rare bodies (errors, Hello and
 * Stats replies, or an encoding the fast path leaves to protobuf-c) are
 * envelopes.
 *
 * Roles: the settings (role, window, ack timeout, ack mode, and a named
 * session's owner uid) are kept as set and go into every Hello; what the
 * daemon answered is conn_role and conn_auto_ack, which decide what
 * bwc_wait_fire, bwc_ack and closing do.  The library does not count the
 * window: the daemon enforces it, and a manual-ack consumer's fire queue
 * is bounded by it.
 *
 * Trust: dial() reads the listener's SO_PEERCRED right after connect()
 * and, unless its uid is root, the caller's or the daemon's user's
 * (bwc_set_daemon_user), closes the socket before a byte was sent
 * (BWC_EPEER).  Every dial checks, reconnects included: the listener may
 * be another process by then.
 *
 * Invariant: done has room for every outstanding request, so failing them
 * all when the connection closes never allocates (and never loses a
 * callback to ENOMEM).  A fire is consumed from the input buffer only
 * once fires and pay have room for it, so it is never dropped for lack of
 * memory: the frame stays in the input buffer and the call reports
 * BWC_ENOMEM.
 *
 * Costs: a request is one pack straight into the output buffer (amortized
 * O(frame), allocation only when a buffer or ring grows).  It is written
 * at once when no other request is outstanding, else with the next write
 * (see submit): a pipeline costs one send() per batch, not per request.
 * A received ScheduleReply, CancelReply or Fired costs one pass over its
 * bytes, no allocation, a copy of the payload and O(1) ring work; other
 * frames one protobuf-c decode (frame.h: a few mallocs).  Rings and
 * buffers double when they grow and never shrink while the client lives.
 * Reads are batched: recv() into at least READ_CHUNK bytes, parsing every
 * complete frame, until a read comes back short (the socket is drained)
 * or READ_BATCH reads.
 */
/* ppoll(), and glibc hides it without this. */
#define _GNU_SOURCE

#include "bitwheel-client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "duration.h"
#include "frame.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

/* bwc_send_* refuse more than this much unwritten output (BWC_EAGAIN):
 * a daemon that stopped reading should not make the caller's memory grow
 * without limit. */
#define OUTPUT_LIMIT (1u << 20)
/* recv() calls per conn_read(): bounds the time one wake-up spends on a
 * daemon that keeps writing; level-triggered polling brings us back. */
#define READ_BATCH 64
/* The least each recv() offers: a deep pipeline's replies and fires
 * arrive some 10 KiB at a time, and each recv() is a system call. */
#define READ_CHUNK 16384u
/* Requests queued behind outstanding ones are written once this much is
 * waiting, even before the next bwc_dispatch (see submit). */
#define WRITE_BATCH 16384u
/* A byte buffer's first capacity. */
#define BUF_MIN 256u
/* errmsg and closed_why: the same size, so one copies into the other
 * whole. */
#define MSG_MAX 512

/* The public server codes are the protocol's numbers, so a reply's code
 * is handed through unchanged. */
_Static_assert((int)BWC_SERVER_BAD_FRAME ==
		       (int)BITWHEEL__V1__ERROR_CODE__BAD_FRAME,
	       "server code mismatch");
_Static_assert((int)BWC_SERVER_SESSION_BUSY ==
		       (int)BITWHEEL__V1__ERROR_CODE__SESSION_BUSY,
	       "server code mismatch");
_Static_assert((int)BWC_SERVER_INTERNAL ==
		       (int)BITWHEEL__V1__ERROR_CODE__INTERNAL,
	       "server code mismatch");
_Static_assert((int)BWC_SERVER_STORAGE_UNAVAILABLE ==
		       (int)BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE,
	       "server code mismatch");
_Static_assert((int)BWC_SERVER_UNKNOWN_SESSION ==
		       (int)BITWHEEL__V1__ERROR_CODE__UNKNOWN_SESSION,
	       "server code mismatch");
_Static_assert((int)BWC_SERVER_HOLD_LIMIT ==
		       (int)BITWHEEL__V1__ERROR_CODE__HOLD_LIMIT,
	       "server code mismatch");
_Static_assert((int)BWC_SERVER_BAD_CALENDAR ==
		       (int)BITWHEEL__V1__ERROR_CODE__BAD_CALENDAR,
	       "server code mismatch");
/* The take-back reasons are the protocol's TakeBack numbers. */
_Static_assert((int)BWC_TAKE_BACK_DISCONNECTED ==
		       (int)BITWHEEL__V1__TAKE_BACK__DISCONNECTED &&
		       (int)BWC_TAKE_BACK_RESTARTED ==
			       (int)BITWHEEL__V1__TAKE_BACK__RESTARTED,
	       "take-back mismatch");
/* And the roles are the protocol's Role numbers. */
_Static_assert((int)BWC_ROLE_PRODUCER == (int)BITWHEEL__V1__ROLE__PRODUCER &&
		       (int)BWC_ROLE_CONSUMER ==
			       (int)BITWHEEL__V1__ROLE__CONSUMER,
	       "role mismatch");

/* ---- a growable FIFO of fixed-size items -------------------------------- */

struct ring {
	unsigned char *buf;
	size_t size;            /* bytes per item */
	size_t cap, head, len;  /* in items; cap 0 or a power of two */
};

/* A mask, not %: a division per access showed in the client's profile. */
static void *ring_at(const struct ring *r, size_t i)
{
	return r->buf + ((r->head + i) & (r->cap - 1)) * r->size;
}

/* Room for extra more items; the only place a ring allocates. */
static int ring_reserve(struct ring *r, size_t extra)
{
	unsigned char *nbuf;
	size_t ncap, i;

	if (r->cap - r->len >= extra)
		return 0;
	ncap = r->cap ? r->cap : 16;
	while (ncap - r->len < extra) {
		if (ncap > SIZE_MAX / 2 / r->size)
			return BWC_ENOMEM;
		ncap *= 2;
	}
	nbuf = malloc(ncap * r->size);
	if (nbuf == NULL)
		return BWC_ENOMEM;
	/* Unwrap while copying, so the grown ring starts at 0. */
	for (i = 0; i < r->len; i++)
		memcpy(nbuf + i * r->size, ring_at(r, i), r->size);
	free(r->buf);
	r->buf = nbuf;
	r->cap = ncap;
	r->head = 0;
	return 0;
}

/* Callers reserve first. */
static void ring_push(struct ring *r, const void *item)
{
	memcpy(ring_at(r, r->len), item, r->size);
	r->len++;
}

static void ring_pop(struct ring *r, void *item)
{
	memcpy(item, ring_at(r, 0), r->size);
	r->head = (r->head + 1) & (r->cap - 1);
	r->len--;
}

/* The newest item, or NULL. */
static void *ring_back(const struct ring *r)
{
	return r->len ? ring_at(r, r->len - 1) : NULL;
}

/*
 * Room for need bytes in *buf, which holds *cap: capacities double from
 * BUF_MIN, contents are kept.  The only place a byte buffer allocates.
 */
static int buf_reserve(uint8_t **buf, size_t *cap, size_t need)
{
	size_t ncap = *cap ? *cap : BUF_MIN;
	uint8_t *nbuf;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return BWC_ENOMEM;
		ncap *= 2;
	}
	nbuf = realloc(*buf, ncap);
	if (nbuf == NULL)
		return BWC_ENOMEM;
	*buf = nbuf;
	*cap = ncap;
	return 0;
}

/* ---- the client ------------------------------------------------------- */

/* Whether a request without a reply may be sent again on a new
 * connection (see resume). */
enum repeat {
	REPEAT_UNSENT,   /* only if it never reached the daemon: a Schedule
			    without replace */
	REPEAT_ALWAYS,   /* the same done twice: Cancel, Stats, a Schedule
			    with replace, a listing's first page */
	REPEAT_NEVER,    /* a listing's later page, whose cursor belongs to
			    the old connection: fails BWC_ECLOSED, and the
			    listing starts over (list_all) */
};

/* A request on the wire, awaiting its reply. */
struct request {
	uint64_t id;
	uint64_t key;
	enum bwc_request_kind kind;
	Bitwheel__V1__Envelope__BodyCase reply_case;
	bwc_reply_fn cb;
	void *arg;
	bool waiter;     /* a blocking call waits for this reply */
	bool abandoned;  /* ...and gave up: discard the reply */
	enum repeat repeat;
	/* Its frame: at out_base + at in out while connected (kept until
	 * the reply when the client would resume; see out_trim), at rp + at
	 * while waiting in replays. */
	uint64_t at;
	size_t len;
};

/* What a reply said, from its arrival until it is handed out. */
struct answer {
	struct bwc_scheduled scheduled;  /* a ScheduleReply's fields */
	bool pending;                    /* a CancelReply's */
	uint64_t acked;                  /* an AckReply's */
	/* Any other body (Error, HelloReply, StatsReply), owned; NULL for the
	 * two above, which are read without allocating (frame.h). */
	Bitwheel__V1__Envelope *env;
};

/* A non-blocking request's outcome, awaiting bwc_dispatch(). */
struct done {
	uint64_t seq;
	struct request req;
	int status;                     /* 0, BWC_ESERVER or BWC_ECLOSED */
	struct answer ans;              /* all zero for BWC_ECLOSED */
};

/* A fire not yet handed out.  f.payload is NULL: a payload's bytes wait in
 * the client's payload queue, in fire order, each followed by the
 * dead-letter session's name of a dead letter (dl_len bytes, no NUL). */
struct fire {
	uint64_t seq;
	struct bwc_fire f;
	bool has_payload;
	size_t dl_len;
};

struct bwc_client {
	int fd;
	char *path;                 /* from bwc_connect, for bwc_reconnect */
	char *session;              /* NULL: anonymous */
	int64_t timeout_ns;
	/* Settings for the next Hello, as set (0: not set, not sent). */
	enum bwc_role role;
	uint32_t window;
	uint64_t ack_timeout_ns;
	enum bwc_ack_mode ack_mode;
	bool coalesce;
	int64_t owner_uid;          /* -1: the caller's own (not sent) */
	char *daemon_user;          /* bwc_set_daemon_user's; NULL: env or
				       default */
	/* The connection: its number (fires carry it), and its role and ack
	 * mode as the daemon took them. */
	uint64_t conn_seq;
	enum bwc_role conn_role;
	bool conn_auto_ack;
	uint64_t next_id;
	uint64_t next_seq;
	size_t max_frame;
	size_t max_payload;
	struct bwc_session_info info;

	uint8_t *out;
	size_t out_off, out_len, out_cap;
	uint8_t *in;
	size_t in_len, in_cap, in_need;

	struct ring requests;
	struct ring done;
	struct ring fires;
	uint8_t *pay;               /* queued fires' payloads: [pay_off, pay_len) */
	size_t pay_off, pay_len, pay_cap;
	uint8_t *held;              /* the last bwc_wait_fire's payload */
	size_t held_cap;
	uint8_t *lent;              /* the fire handler's, during its call */
	size_t lent_cap;

	bool waiter_done;
	int waiter_status;
	struct answer waiter_ans;

	bwc_fire_fn on_fire;
	void *on_fire_arg;
	bool in_callback;

	int close_status;           /* why fd went to -1, for the waiter */
	char closed_why[MSG_MAX];   /* ...and in words, for later calls */

	/* Reconnecting by itself (see resume). */
	bool reconnect;             /* bwc_set_reconnect's */
	uint64_t rc_initial_ns, rc_max_ns, rc_give_up_ns;
	bool dialing;               /* inside dial: no resuming from there */
	uint64_t down_since_ns;     /* the connection was lost; 0: not
				       reconnecting */
	uint64_t rc_next_ns;        /* the next attempt, CLOCK_MONOTONIC */
	unsigned rc_attempts;       /* attempts since the loss */
	uint64_t rng;               /* jitter's xorshift64 state */
	char lost_why[MSG_MAX];     /* how the connection was lost */
	uint64_t out_base;          /* out[0]'s position among all bytes
				       queued on the connection */
	struct ring replays;        /* requests to send again, in order */
	uint8_t *rp;                /* ...their frames: [0, rp_len) */
	size_t rp_len, rp_cap;
	int server_error;
	char errmsg[MSG_MAX];
};

/* ---- error reporting ---------------------------------------------------- */

const char *bwc_strerror(int err)
{
	switch (err) {
	case BWC_OK: return "success";
	case BWC_EINVAL: return "invalid argument";
	case BWC_ENOMEM: return "out of memory";
	case BWC_EUNREACHABLE: return "cannot connect to the daemon";
	case BWC_ECLOSED: return "not connected to the daemon";
	case BWC_ETIMEDOUT: return "timed out";
	case BWC_EPROTO: return "protocol error from the daemon";
	case BWC_ESERVER: return "the daemon refused the request";
	case BWC_EAGAIN: return "output buffer full, try again";
	case BWC_EINTR: return "interrupted by a signal";
	case BWC_EBUSY: return "not allowed now";
	case BWC_ETOOBIG: return "payload over the daemon's limit";
	case BWC_EIO: return "system call failed";
	case BWC_ESTALE: return "the fire came on an earlier connection; the "
		"daemon took it back and will deliver it again, marked "
		"redelivered";
	case BWC_EROLE: return "not allowed in this connection's role";
	case BWC_EPEER: return "the socket's listener is not trusted to be "
		"the daemon";
	case BWC_EUNKNOWN: return "the connection ended before the reply: "
		"the request may or may not have taken effect";
	case BWC_EANONYMOUS: return "the daemon ended the connection of an "
		"anonymous session, which cannot be resumed";
	case BWC_EGAVEUP: return "gave up reconnecting to the daemon";
	default: return "unknown error";
	}
}

const char *bwc_server_error_name(int code)
{
	/* Indexed by the protocol's numbers, which the asserts above tie to
	 * the public enum. */
	static const char *const names[] = {
		"ERROR_CODE_UNSPECIFIED", "BAD_FRAME", "FRAME_TOO_LARGE",
		"UNKNOWN_MESSAGE", "BAD_REQUEST", "BAD_VERSION",
		"HELLO_REQUIRED", "ALREADY_HELLO", "PERMISSION_DENIED",
		"SESSION_BUSY", "TOO_MANY_CLIENTS", "DUPLICATE_KEY",
		"BAD_DEADLINE", "PAYLOAD_TOO_LARGE", "TOO_MANY_TIMERS",
		"NO_MEMORY", "SHUTTING_DOWN", "INTERNAL", "OVER_BUDGET",
		"STORAGE_UNAVAILABLE", "UNKNOWN_SESSION", "HOLD_LIMIT",
		"BAD_CALENDAR",
	};

	if (code < 0 || (size_t)code >= sizeof(names) / sizeof(names[0]))
		return "UNKNOWN";
	return names[code];
}

const char *bwc_take_back_name(int reason)
{
	static const char *const names[] = {
		"TAKE_BACK_UNSPECIFIED", "DISCONNECTED", "ACK_TIMEOUT",
		"RELEASED", "RESTARTED",
	};

	if (reason < 0 || (size_t)reason >= sizeof(names) / sizeof(names[0]))
		return "UNKNOWN";
	return names[reason];
}

const char *bwc_version(void)
{
	return PACKAGE_VERSION;
}

__attribute__((format(printf, 3, 0)))
static int vfail(struct bwc_client *c, int code, const char *fmt, va_list ap)
{
	vsnprintf(c->errmsg, sizeof(c->errmsg), fmt, ap);
	c->server_error = BWC_SERVER_UNSPECIFIED;
	return code;
}

__attribute__((format(printf, 3, 4)))
static int fail(struct bwc_client *c, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(c, code, fmt, ap);
	va_end(ap);
	return code;
}

/* An Error from the daemon, with or without a request_id. */
static int fail_server(struct bwc_client *c, const Bitwheel__V1__Error *err,
		       const char *context)
{
	int code = err->has_code ? (int)err->code : 0;
	const char *name = bwc_server_error_name(code);
	char unknown[24];

	/* A newer daemon's code: the number is all the caller can look up. */
	if (strcmp(name, "UNKNOWN") == 0) {
		snprintf(unknown, sizeof(unknown), "UNKNOWN(%d)", code);
		name = unknown;
	}
	fail(c, BWC_ESERVER, "%sdaemon error %s: %s", context, name,
	     err->message && *err->message ? err->message : "(no message)");
	c->server_error = code;
	return BWC_ESERVER;
}

const char *bwc_errmsg(const struct bwc_client *c)
{
	if (c == NULL)
		return "no client (NULL)";
	return c->errmsg[0] ? c->errmsg : "no error";
}

int bwc_server_error(const struct bwc_client *c)
{
	return c ? c->server_error : BWC_SERVER_UNSPECIFIED;
}

/* A call that needs a connection, made without one: say why it ended,
 * since the call that saw it end may have been long ago. */
static int not_connected(struct bwc_client *c)
{
	/* An anonymous session lost, or reconnecting given up: the same
	 * code as the call that saw it, until a new connect. */
	int code = c->close_status == BWC_EANONYMOUS ||
		   c->close_status == BWC_EGAVEUP ? c->close_status
						   : BWC_ECLOSED;

	if (c->path == NULL)
		return fail(c, BWC_ECLOSED,
			    "not connected (call bwc_connect first)");
	if (c->closed_why[0])
		return fail(c, code, "not connected to %s (%s)",
			    c->path, c->closed_why);
	return fail(c, code, "not connected to %s", c->path);
}

/* ---- small helpers ---------------------------------------------------- */

const char *bwc_default_socket(void)
{
	const char *env = getenv(BWC_SOCKET_ENV);

	return env && *env ? env : BWC_DEFAULT_SOCKET;
}

uint64_t bwc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bwc_parse_duration(const char *text, uint64_t *out_ns)
{
	return bwp_parse_duration(text, out_ns) ? BWC_EINVAL : 0;
}

/* For messages: "30s", "0.250s". */
static const char *seconds(int64_t ns, char *buf, size_t len)
{
	if (ns % 1000000000 == 0)
		snprintf(buf, len, "%llds", (long long)(ns / 1000000000));
	else
		snprintf(buf, len, "%.3fs", (double)ns / 1e9);
	return buf;
}

/* ---- connection teardown ---------------------------------------------- */

/*
 * A manual-ack consumer's connection is closing: the fires it received
 * and the caller has not taken are the daemon's again (it delivers them
 * anew, marked), and the caller could not acknowledge them anyway.  They
 * are the back of the queue (see the top), their payloads the back of
 * pay.
 */
static void discard_fires(struct bwc_client *c)
{
	struct fire *f;

	while ((f = ring_back(&c->fires)) != NULL &&
	       f->f.connection == c->conn_seq) {
		c->pay_len -= f->f.payload_len + f->dl_len;
		c->fires.len--;
	}
	if (c->pay_off == c->pay_len)
		c->pay_off = c->pay_len = 0;
}

/* Whether the client resumes a connection lost with status (see
 * resume): the daemon's doing, EOF or a reset or its SHUTTING_DOWN, and
 * not while dialing. */
static bool resumable(const struct bwc_client *c, int status, bool lost)
{
	return lost && c->reconnect && !c->dialing &&
	       (status == BWC_ECLOSED ||
		(status == BWC_ESERVER &&
		 c->server_error == BWC_SERVER_SHUTTING_DOWN));
}

/* Frames of requests are kept in out until their replies while the
 * client would send them again (see out_trim). */
static bool retaining(const struct bwc_client *c)
{
	return c->reconnect && c->session != NULL;
}

/* A request's end without its reply: the blocking waiter learns status,
 * a non-blocking one's callback gets it at the next dispatch. */
static void settle(struct bwc_client *c, const struct request *req, int status)
{
	struct done d;

	if (req->waiter) {
		if (!req->abandoned) {
			c->waiter_done = true;
			c->waiter_status = status;
		}
		return;
	}
	d.seq = c->next_seq++;
	d.req = *req;
	d.status = status;
	d.ans = (struct answer){ .env = NULL };
	ring_push(&c->done, &d);   /* room reserved at submit */
}

uint64_t bwc_backoff(uint64_t deliveries, uint64_t base_ns, uint64_t cap_ns,
		     uint64_t random)
{
	uint64_t d = base_ns < cap_ns ? base_ns : cap_ns;

	/* Doubling stops at the cap: O(log(cap / base)) steps at most. */
	for (uint64_t i = 1; i < deliveries && d < cap_ns; i++)
		d = d > cap_ns / 2 ? cap_ns : d * 2;
	/* Less a random part of up to half: d scaled into [0.5, 1]. */
	return d - random % (d / 2 + 1);
}

/* Back off: the wait before the next attempt, twice the last up to
 * rc_max_ns, less a random part of up to half. */
static uint64_t backoff(struct bwc_client *c)
{
	c->rng ^= c->rng << 13;
	c->rng ^= c->rng >> 7;
	c->rng ^= c->rng << 17;
	return bwc_backoff((uint64_t)c->rc_attempts + 1, c->rc_initial_ns,
			   c->rc_max_ns, c->rng);
}

/*
 * The session will be resumed: the requests without a reply that may be
 * sent again go to replays, their frames to rp, in order; the others are
 * settled.  A frame written whole may have been carried out unless the
 * daemon said SHUTTING_DOWN (clean), after which it reads nothing.  Acks
 * (and Releases and Touches) are never sent again (delivery numbers are
 * per connection): bwc_ack's completes nothing, a Release or Touch
 * reports nothing done, and those without reply are dropped with the rest of
 * out.  Swapping buffers and rings, and moving items down within them,
 * allocates nothing (the invariant at the top); replays and rp are empty
 * here, since they empty into the connection as soon as it is back.
 */
static void keep_for_replay(struct bwc_client *c, bool clean)
{
	uint64_t written = c->out_base + c->out_off;
	struct ring spare = c->replays;
	uint8_t *buf = c->rp;
	size_t cap = c->rp_cap;
	struct request req;

	c->replays = c->requests;
	c->requests = spare;
	c->rp = c->out;
	c->rp_cap = c->out_cap;
	c->rp_len = 0;
	c->out = buf;
	c->out_cap = cap;
	for (size_t n = c->replays.len; n > 0; n--) {
		bool maybe;

		ring_pop(&c->replays, &req);
		/* Written whole: the daemon may have carried it out. */
		maybe = !clean && req.at + req.len <= written;
		if (req.abandoned)
			continue;   /* nobody waits, as for any timed out */
		/* Delivery numbers are the old connection's: the daemon
		 * took the fire back with it, released or touched or not. */
		if (req.kind == BWC_REQUEST_ACK ||
		    req.kind == BWC_REQUEST_RELEASE ||
		    req.kind == BWC_REQUEST_TOUCH) {
			settle(c, &req, 0);
			continue;
		}
		if (req.repeat == REPEAT_NEVER || req.at < c->out_base) {
			settle(c, &req, maybe && req.repeat != REPEAT_ALWAYS ?
					       BWC_EUNKNOWN : BWC_ECLOSED);
			continue;
		}
		if (maybe && req.repeat == REPEAT_UNSENT) {
			settle(c, &req, BWC_EUNKNOWN);
			continue;
		}
		memmove(c->rp + c->rp_len, c->rp + (req.at - c->out_base),
			req.len);
		req.at = c->rp_len;
		c->rp_len += req.len;
		ring_push(&c->replays, &req);
	}
}

/*
 * Drop the connection and settle every outstanding request with status
 * (non-blocking ones with BWC_ECLOSED), or keep them to send again when
 * the session will be resumed (lost: the daemon ended it; see
 * resumable).  The caller sets the message; queued fires survive, unless
 * they are a manual-ack consumer's (discard_fires).
 */
static void conn_close(struct bwc_client *c, int status, bool lost)
{
	struct request req;
	bool resume = resumable(c, status, lost) && c->session != NULL;

	if (c->fd >= 0)
		close(c->fd);
	if (c->conn_role == BWC_ROLE_CONSUMER && !c->conn_auto_ack)
		discard_fires(c);
	c->fd = -1;
	if (resumable(c, status, lost) && c->session == NULL) {
		size_t len = strlen(c->errmsg);

		snprintf(c->errmsg + len, sizeof(c->errmsg) - len,
			 "; an anonymous session's timers end with its "
			 "connection, so it cannot be resumed (a named session "
			 "rides through a restart)");
		status = BWC_EANONYMOUS;
	}
	c->close_status = status;
	if (resume) {
		keep_for_replay(c, status == BWC_ESERVER);
		memcpy(c->lost_why, c->errmsg, sizeof(c->lost_why));
		c->down_since_ns = bwc_now_ns();
		c->rc_attempts = 0;
		c->rc_next_ns = c->down_since_ns + backoff(c);
	}
	while (c->requests.len > 0) {
		ring_pop(&c->requests, &req);
		settle(c, &req, req.waiter ? status : BWC_ECLOSED);
	}
	c->out_off = c->out_len = 0;
	c->out_base = 0;
	c->in_len = c->in_need = 0;
	memset(&c->info, 0, sizeof(c->info));
}

/* conn_close with a message, for the reasons that are the daemon's doing
 * (or the system's).  Returns the status the connection closed with. */
__attribute__((format(printf, 3, 4)))
static int conn_fail(struct bwc_client *c, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(c, status, fmt, ap);
	va_end(ap);
	conn_close(c, status, true);
	memcpy(c->closed_why, c->errmsg, sizeof(c->closed_why));
	return c->close_status;
}

/* ---- receiving ---------------------------------------------------------- */

static const char *body_name(Bitwheel__V1__Envelope__BodyCase bc)
{
	switch (bc) {
	case BITWHEEL__V1__ENVELOPE__BODY_HELLO: return "hello";
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE: return "schedule";
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL: return "cancel";
	case BITWHEEL__V1__ENVELOPE__BODY_STATS: return "stats";
	case BITWHEEL__V1__ENVELOPE__BODY_ERROR: return "error";
	case BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY: return "hello_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY: return "schedule_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY: return "cancel_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_STATS_REPLY: return "stats_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_FIRED: return "fired";
	case BITWHEEL__V1__ENVELOPE__BODY_ACK: return "ack";
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY: return "ack_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS: return "list_sessions";
	case BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS: return "list_timers";
	case BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS_REPLY:
		return "list_sessions_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS_REPLY:
		return "list_timers_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_RELEASE: return "release";
	case BITWHEEL__V1__ENVELOPE__BODY_TOUCH: return "touch";
	case BITWHEEL__V1__ENVELOPE__BODY_SET_POLICY: return "set_policy";
	case BITWHEEL__V1__ENVELOPE__BODY_KICK: return "kick";
	case BITWHEEL__V1__ENVELOPE__BODY_RELEASE_REPLY: return "release_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_TOUCH_REPLY: return "touch_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_SET_POLICY_REPLY:
		return "set_policy_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_KICK_REPLY: return "kick_reply";
	case BITWHEEL__V1__ENVELOPE__BODY_CALENDAR: return "calendar";
	case BITWHEEL__V1__ENVELOPE__BODY_CALENDAR_REPLY: return "calendar_reply";
	default: return "unknown";
	}
}

/* A reply: it answers the oldest outstanding request or breaks the
 * protocol.  m says which and, for the hot bodies, what; env holds any
 * other body, and is taken. */
static int take_reply(struct bwc_client *c, const struct bwp_response *m,
		      Bitwheel__V1__Envelope *env)
{
	struct answer ans = {
		.scheduled = { .deadline_ns = m->deadline_ns,
			       .replaced = m->replaced },
		.pending = m->pending,
		.acked = m->acked,
		.env = env,
	};
	struct request *front;
	struct request req;
	struct done d;
	bool is_error = m->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR;

	if (c->requests.len == 0) {
		conn_fail(c, BWC_EPROTO,
			  "protocol error: %s reply (request_id %llu) with no "
			  "request outstanding", body_name(m->body_case),
			  (unsigned long long)m->request_id);
		goto fail;
	}
	front = ring_at(&c->requests, 0);
	if (m->request_id != front->id ||
	    (!is_error && m->body_case != front->reply_case)) {
		conn_fail(c, BWC_EPROTO,
			  "protocol error: expected the reply to request %llu, "
			  "got %s with request_id %llu",
			  (unsigned long long)front->id,
			  body_name(m->body_case),
			  (unsigned long long)m->request_id);
		goto fail;
	}
	/* The daemon is stopping and refuses what it reads from now on: this
	 * request and any after it had no effect, and go again once the
	 * session is back, as after its last words (PROTOCOL.md 9). */
	if (is_error && env->error->has_code &&
	    env->error->code == BITWHEEL__V1__ERROR_CODE__SHUTTING_DOWN &&
	    retaining(c) && !c->dialing) {
		int rc = fail_server(c, env->error,
				     "connection closed by the daemon: ");

		bwp_frame_free(env);
		conn_close(c, rc, true);
		memcpy(c->closed_why, c->errmsg, sizeof(c->closed_why));
		return c->close_status;
	}
	ring_pop(&c->requests, &req);

	if (req.waiter) {
		if (req.abandoned) {
			bwp_frame_free(env);
			return 0;
		}
		c->waiter_done = true;
		c->waiter_status = 0;
		c->waiter_ans = ans;
		return 0;
	}
	d.seq = c->next_seq++;
	d.req = req;
	d.status = is_error ? BWC_ESERVER : 0;
	d.ans = ans;
	ring_push(&c->done, &d);   /* room reserved at submit */
	return 0;

fail:
	bwp_frame_free(env);
	return BWC_EPROTO;
}

/*
 * Room to queue one more fire, with a payload of n bytes.  conn_parse asks
 * before it consumes the frame, so a fire is never dropped for lack of
 * memory.  The payload queue is compacted only when the bytes already
 * handed out are at least half of it, so each byte moves O(1) times.
 */
static int fire_room(struct bwc_client *c, size_t n)
{
	if (c->pay_off > 0 && c->pay_len + n > c->pay_cap &&
	    c->pay_off >= c->pay_len - c->pay_off) {
		memmove(c->pay, c->pay + c->pay_off, c->pay_len - c->pay_off);
		c->pay_len -= c->pay_off;
		c->pay_off = 0;
	}
	if (ring_reserve(&c->fires, 1) != 0 ||
	    buf_reserve(&c->pay, &c->pay_cap, c->pay_len + n) != 0)
		return BWC_ENOMEM;
	return 0;
}

/* The bytes a dead letter's history adds to the payload queue. */
static size_t dl_bytes(const Bitwheel__V1__DeadLetter *dl)
{
	return dl != NULL && dl->has_session ? dl->session.len : 0;
}

/* Queue the fire m, its payload copied (and dl, a dead letter's history,
 * or NULL): the input buffer it points into is reused by the next read.
 * fire_room() came first. */
static void fire_push(struct bwc_client *c, const struct bwp_response *m,
		      const Bitwheel__V1__DeadLetter *dl)
{
	struct fire f = {
		.seq = c->next_seq++,
		.f = {
			.key = m->key,
			.payload_len = m->payload_len,
			.deadline_ns = m->deadline_ns,
			.fired_ns = m->fired_at_ns,
			.fire_count = m->fire_count,
			.late = m->late,
			.redelivered = m->redelivered,
			.delivery = m->delivery,
			.connection = c->conn_seq,
			.deliveries = m->deliveries,
			.due_realtime_ns = m->due_realtime_ns,
		},
		.has_payload = m->has_payload,
		.dl_len = dl_bytes(dl),
	};

	if (m->payload_len > 0) {
		memcpy(c->pay + c->pay_len, m->payload, m->payload_len);
		c->pay_len += m->payload_len;
	}
	if (dl != NULL) {
		struct bwc_dead_letter *d = &f.f.dead_letter;

		d->present = true;
		d->deliveries = dl->deliveries;
		d->first_handed_ns = dl->first_handed_ns;
		d->last_handed_ns = dl->last_handed_ns;
		d->dead_lettered_ns = dl->dead_lettered_ns;
		d->reason = (enum bwc_take_back)dl->reason;
		if (f.dl_len > 0)
			memcpy(c->pay + c->pay_len, dl->session.data, f.dl_len);
		c->pay_len += f.dl_len;
	}
	ring_push(&c->fires, &f);
}

/* One frame: m says which (body and request_id) and holds the hot
 * bodies' fields; env holds any other body, and is taken; dl is a fire's
 * dead-letter history (NULL: none).  Returns nonzero only if it closed
 * the connection. */
static int take_frame(struct bwc_client *c, const struct bwp_response *m,
		      Bitwheel__V1__Envelope *env,
		      const Bitwheel__V1__DeadLetter *dl)
{
	int rc;

	switch (m->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_FIRED:
		fire_push(c, m, dl);
		return 0;
	case BITWHEEL__V1__ENVELOPE__BODY_ERROR:
		if (m->has_request_id)
			return take_reply(c, m, env);
		/* Connection-level: the last frame before the daemon closes
		 * (PROTOCOL.md 5.8), so close now and keep its words. */
		rc = fail_server(c, env->error,
				 "connection closed by the daemon: ");
		bwp_frame_free(env);
		conn_close(c, rc, true);
		memcpy(c->closed_why, c->errmsg, sizeof(c->closed_why));
		return c->close_status;
	case BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_STATS_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_RELEASE_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_TOUCH_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_SET_POLICY_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_KICK_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_CALENDAR_REPLY:
		if (!m->has_request_id) {
			conn_fail(c, BWC_EPROTO,
				  "protocol error: %s without a request_id",
				  body_name(m->body_case));
			bwp_frame_free(env);
			return BWC_EPROTO;
		}
		return take_reply(c, m, env);
	default:
		conn_fail(c, BWC_EPROTO,
			  "protocol error: the daemon sent a %s request",
			  body_name(m->body_case));
		bwp_frame_free(env);
		return BWC_EPROTO;
	}
}

/*
 * The version 2 fields of a body protobuf-c decoded, into m, whatever
 * bwp_response_from_envelope() filled: Fired.delivery and an AckReply.
 * Returns whether m now holds all of an AckReply (which is then taken
 * like the other hot bodies, from m).
 */
static bool response_v2(const Bitwheel__V1__Envelope *env,
			struct bwp_response *m)
{
	switch (env->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_FIRED:
		m->has_delivery = env->fired->has_delivery;
		m->delivery = env->fired->delivery;
		return false;
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
		m->body_case = env->body_case;
		m->has_request_id = env->has_request_id;
		m->request_id = env->request_id;
		m->has_acked = env->ack_reply->has_acked;
		m->acked = env->ack_reply->acked;
		return true;
	default:
		return false;
	}
}

/* Every complete frame in the input buffer. */
static int conn_parse(struct bwc_client *c)
{
	struct bwp_response m;
	Bitwheel__V1__Envelope *env;
	const Bitwheel__V1__DeadLetter *dl;
	size_t off = 0, flen;
	bool hot;
	int rc = 0;

	c->in_need = 0;
	while (c->fd >= 0) {
		rc = bwp_frame_parse_response(c->in + off, c->in_len - off,
					      c->max_frame, &m, &env, &flen);
		if (rc == BWP_EMORE) {
			/* Relative to in + off, which the memmove below makes
			 * the start of the buffer. */
			c->in_need = flen;
			rc = 0;
			break;
		}
		if (rc != BWP_OK)
			return conn_fail(c, BWC_EPROTO,
					 "protocol error: bad frame from the "
					 "daemon: %s", bwp_strerror(rc));
		/* A hot body protobuf-c read (an encoding the fast path left
		 * to it) is taken like the fast path's, from m. */
		hot = env == NULL || bwp_response_from_envelope(env, &m);
		if (env != NULL && response_v2(env, &m))
			hot = true;
		/* A dead letter's history comes only through protobuf-c. */
		dl = env != NULL &&
		     env->body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED ?
			     env->fired->dead_letter : NULL;
		if (m.body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED &&
		    fire_room(c, m.payload_len + dl_bytes(dl)) != 0) {
			bwp_frame_free(env);
			rc = fail(c, BWC_ENOMEM,
				  "out of memory queueing a received frame");
			break;
		}
		off += flen;
		rc = take_frame(c, &m, hot ? NULL : env, dl);
		if (hot)
			bwp_frame_free(env);
		if (rc != 0)
			return rc;   /* closed: the buffer is gone */
	}
	if (c->fd >= 0 && off > 0) {
		memmove(c->in, c->in + off, c->in_len - off);
		c->in_len -= off;
	}
	return rc;
}

/*
 * Read what the socket holds, without blocking, and parse it.  0 also when
 * the connection closed (the caller sees fd < 0 and close_status), or a
 * negative code when the connection is intact but the read could not
 * proceed (BWC_ENOMEM).
 */
static int conn_read(struct bwc_client *c)
{
	int i, rc;

	for (i = 0; i < READ_BATCH && c->fd >= 0; i++) {
		size_t want = c->in_len + READ_CHUNK, room;
		ssize_t n;

		if (c->in_need > want)
			want = c->in_need;
		if (buf_reserve(&c->in, &c->in_cap, want) != 0)
			return fail(c, BWC_ENOMEM,
				    "out of memory reading from the daemon");
		room = c->in_cap - c->in_len;
		n = recv(c->fd, c->in + c->in_len, room, MSG_DONTWAIT);
		if (n > 0) {
			c->in_len += (size_t)n;
			rc = conn_parse(c);
			if (rc == BWC_ENOMEM)
				return rc;
			/* Less than offered: the socket had no more, and
			 * another recv() would only say EAGAIN. */
			if ((size_t)n < room)
				return 0;
			continue;
		}
		if (n == 0) {
			conn_fail(c, BWC_ECLOSED,
				  "connection to %s closed by the daemon",
				  c->path);
			return 0;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		if (errno == ECONNRESET)
			conn_fail(c, BWC_ECLOSED,
				  "connection to %s reset by the daemon",
				  c->path);
		else
			conn_fail(c, BWC_EIO, "recv from %s: %s", c->path,
				  strerror(errno));
		return 0;
	}
	return 0;
}

/* ---- sending ------------------------------------------------------------ */

/*
 * Drop from out the bytes that are written and no longer needed: all of
 * them, or while the client would resume the session, those before the
 * oldest request without a reply (its frame may have to go again).
 * Moved only when what goes is at least what stays, so each byte moves
 * O(1) times.
 */
static void out_trim(struct bwc_client *c)
{
	size_t cut = c->out_off;

	if (retaining(c) && c->requests.len > 0) {
		const struct request *r = ring_at(&c->requests, 0);

		if (r->at >= c->out_base && r->at - c->out_base < cut)
			cut = (size_t)(r->at - c->out_base);
	}
	if (cut == 0 || (cut < c->out_len && cut < c->out_len - cut))
		return;
	memmove(c->out, c->out + cut, c->out_len - cut);
	c->out_len -= cut;
	c->out_off -= cut;
	c->out_base += cut;
}

/* Write what the socket takes now.  Failures close the connection, after
 * reading what the daemon said last (its error frame, if any). */
static void conn_flush(struct bwc_client *c)
{
	while (c->fd >= 0 && c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n >= 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		if (errno == EPIPE || errno == ECONNRESET) {
			int err = errno;

			/* The daemon closed.  Whatever it wrote before is
			 * still ours to read, and says why. */
			conn_read(c);
			if (c->fd >= 0)
				conn_fail(c, BWC_ECLOSED,
					  "connection to %s closed by the "
					  "daemon (send: %s)", c->path,
					  strerror(err));
			return;
		}
		conn_fail(c, BWC_EIO, "send to %s: %s", c->path,
			  strerror(errno));
		return;
	}
	out_trim(c);
}

/*
 * Pack env at the end of *buf (holding *len of *cap bytes); *n its size.
 */
static int pack(struct bwc_client *c, Bitwheel__V1__Envelope *env,
		uint8_t **buf, size_t *len, size_t *cap, size_t *n)
{
	int rc;

	/* Room for a request without payload, so that it packs at once; a
	 * bigger one says its size and packs again. */
	if (buf_reserve(buf, cap, *len + BWP_PAYLOAD_OVERHEAD) != 0)
		goto nomem;
	rc = bwp_frame_pack(env, c->max_frame, *buf + *len, *cap - *len, n);
	if (rc == BWP_ENOSPC) {
		if (buf_reserve(buf, cap, *len + *n) != 0)
			goto nomem;
		rc = bwp_frame_pack(env, c->max_frame, *buf + *len,
				    *cap - *len, n);
	}
	if (rc == BWP_ETOOBIG)
		return fail(c, BWC_ETOOBIG,
			    "request of %zu bytes over the daemon's frame "
			    "limit of %zu", *n, c->max_frame);
	if (rc != BWP_OK)
		return fail(c, BWC_EINVAL, "cannot pack the request: %s",
			    bwp_strerror(rc));
	return 0;

nomem:
	return fail(c, BWC_ENOMEM, "out of memory queueing a request");
}

/*
 * Pack env as the next request and queue it.  req describes it; its id is
 * assigned here.  req NULL: a request that asks for no reply (an Ack
 * without request_id), packed without an id and not queued for a reply.
 * Nothing is queued on failure.  While the client reconnects, the request
 * waits in replays, behind those to be sent again, for the connection.
 *
 * The request is written at once only when no other is outstanding: a
 * lone request must not wait.  Behind outstanding ones a reply is due, and
 * whatever takes it (bwc_dispatch, a blocking call's wait_io) writes all
 * that queued meanwhile in one send(): a pipeline then costs a system call
 * per batch instead of one per request.  WRITE_BATCH bounds the wait.  A
 * request without reply sent from a callback waits too: bwc_dispatch
 * writes what its callbacks sent when they are done, so a fire handler
 * acknowledging each fire costs one send() per dispatch.
 */
static int submit(struct bwc_client *c, Bitwheel__V1__Envelope *env,
		  struct request *req)
{
	bool write_now, later = c->fd < 0 && c->down_since_ns != 0 &&
				req != NULL;
	size_t n;
	int rc;

	if (c->fd < 0 && !later)
		return not_connected(c);
	/* done must be able to take every outstanding request should the
	 * connection close (see the invariant at the top). */
	if (req != NULL &&
	    (ring_reserve(later ? &c->replays : &c->requests, 1) != 0 ||
	     ring_reserve(&c->done, c->requests.len + c->replays.len + 1) != 0))
		return fail(c, BWC_ENOMEM, "out of memory queueing a request");

	env->has_request_id = req != NULL;
	env->request_id = req != NULL ? c->next_id : 0;
	if (later) {
		rc = pack(c, env, &c->rp, &c->rp_len, &c->rp_cap, &n);
		if (rc != 0)
			return rc;
		req->id = c->next_id++;
		req->at = c->rp_len;
		req->len = n;
		c->rp_len += n;
		ring_push(&c->replays, req);
		return 0;
	}

	out_trim(c);
	rc = pack(c, env, &c->out, &c->out_len, &c->out_cap, &n);
	if (rc != 0)
		return rc;
	write_now = (c->requests.len == 0 && (req != NULL || !c->in_callback)) ||
		    c->out_len + n - c->out_off >= WRITE_BATCH;
	if (req != NULL) {
		req->id = c->next_id++;
		req->at = c->out_base + c->out_len;
		req->len = n;
		ring_push(&c->requests, req);
	}
	c->out_len += n;
	if (write_now)
		conn_flush(c);
	return 0;
}

/* ---- waiting ---------------------------------------------------------- */

enum wait_for { WAIT_REPLY, WAIT_FIRE };

static int resume(struct bwc_client *c, uint64_t deadline,
		  bool interruptible);

/* Whether the client is between a lost connection and its return, and
 * may go on (not from inside dial, whose wait must not dial). */
static bool reconnecting(const struct bwc_client *c)
{
	return c->down_since_ns != 0 && !c->dialing;
}

/*
 * Move bytes both ways until the waiter's reply is in (WAIT_REPLY), a fire
 * is queued (WAIT_FIRE), the connection is gone (and could not be
 * resumed), or timeout_ns (negative: none) passes.  The socket is always
 * looked at once, so a zero timeout still picks up what is already there.
 */
static int wait_io(struct bwc_client *c, enum wait_for what,
		   int64_t timeout_ns, bool interruptible)
{
	uint64_t deadline = UINT64_MAX;
	bool polled = false;

	if (timeout_ns >= 0) {
		uint64_t now = bwc_now_ns();

		deadline = (uint64_t)timeout_ns > UINT64_MAX - now ?
				   UINT64_MAX : now + (uint64_t)timeout_ns;
	}

	for (;;) {
		struct pollfd pfd;
		struct timespec ts, *tsp = NULL;
		int n;

		if (what == WAIT_REPLY && c->waiter_done)
			return 0;
		if (what == WAIT_FIRE && c->fires.len > 0)
			return 0;
		if (c->fd < 0 && reconnecting(c)) {
			int rc = resume(c, deadline, interruptible);

			if (rc != 0)
				return rc;
			polled = false;
			continue;
		}
		if (c->fd < 0)
			return c->close_status;
		conn_flush(c);
		if (c->fd < 0)
			continue;

		if (timeout_ns >= 0) {
			uint64_t now = bwc_now_ns();
			uint64_t left = now < deadline ? deadline - now : 0;

			if (left == 0 && polled)
				return BWC_ETIMEDOUT;
			ts.tv_sec = (time_t)(left / 1000000000u);
			ts.tv_nsec = (long)(left % 1000000000u);
			tsp = &ts;
		}
		pfd.fd = c->fd;
		pfd.events = POLLIN;
		if (c->out_off < c->out_len)
			pfd.events |= POLLOUT;
		pfd.revents = 0;
		n = ppoll(&pfd, 1, tsp, NULL);
		polled = true;
		if (n < 0) {
			if (errno == EINTR) {
				if (interruptible)
					return BWC_EINTR;
				continue;
			}
			return fail(c, BWC_EIO, "poll: %s", strerror(errno));
		}
		/* Someone closed our fd: without this, ppoll would report it
		 * at once forever and the wait would spin.  The number may
		 * belong to someone else by now, so it is not closed again. */
		if (pfd.revents & POLLNVAL) {
			c->fd = -1;
			return conn_fail(c, BWC_EIO, "the socket to %s was "
					 "closed outside the library", c->path);
		}
		if (pfd.revents & (POLLIN | POLLHUP | POLLERR)) {
			int rc = conn_read(c);

			if (rc != 0)
				return rc;
		}
	}
}

/* A blocking call's reply is no longer wanted: the request stays on the
 * wire, and its reply will be thrown away. */
static void abandon(struct bwc_client *c, uint64_t id)
{
	size_t i;

	for (i = 0; i < c->requests.len; i++) {
		struct request *r = ring_at(&c->requests, i);

		if (r->id == id)
			r->abandoned = true;
	}
	for (i = 0; i < c->replays.len; i++) {
		struct request *r = ring_at(&c->replays, i);

		if (r->id == id)
			r->abandoned = true;
	}
}

static const char *kind_name(enum bwc_request_kind kind)
{
	switch (kind) {
	case BWC_REQUEST_SCHEDULE: return "schedule";
	case BWC_REQUEST_CANCEL: return "cancel";
	case BWC_REQUEST_STATS: return "stats";
	case BWC_REQUEST_ACK: return "ack";
	case BWC_REQUEST_RELEASE: return "release";
	case BWC_REQUEST_TOUCH: return "touch";
	case BWC_REQUEST_SET_POLICY: return "set_policy";
	case BWC_REQUEST_KICK: return "kick";
	default: return "request";
	}
}

/* The words for BWC_EUNKNOWN: which request, which key, and why. */
static void unknown_outcome(const struct bwc_client *c,
			    const struct request *req, char *buf, size_t len)
{
	snprintf(buf, len, "%s of key %llu: the connection ended after it "
		 "was sent and before its reply (%.200s), so it may or may "
		 "not have taken effect; schedule it again with replace to "
		 "be sure", kind_name(req->kind),
		 (unsigned long long)req->key, c->lost_why);
}

/*
 * Send a request and wait for its reply.  On 0, *ans is the daemon's
 * answer (never an error); the caller frees ans->env.
 */
static int call(struct bwc_client *c, Bitwheel__V1__Envelope *env,
		struct request *req, struct answer *ans)
{
	char tbuf[32];
	int rc;

	*ans = (struct answer){ .env = NULL };
	if (c->in_callback)
		return fail(c, BWC_EBUSY,
			    "blocking call from inside a bwc_dispatch callback");
	req->cb = NULL;
	req->arg = NULL;
	req->waiter = true;
	req->abandoned = false;
	c->waiter_done = false;
	c->waiter_ans = (struct answer){ .env = NULL };
	rc = submit(c, env, req);
	if (rc != 0)
		return rc;

	rc = wait_io(c, WAIT_REPLY, c->timeout_ns, false);
	if (rc == BWC_ETIMEDOUT) {
		abandon(c, req->id);
		if (reconnecting(c))
			return fail(c, BWC_ETIMEDOUT,
				    "no reply from the daemon at %s within %s: "
				    "still reconnecting (%u attempts; the "
				    "connection ended: %.200s)", c->path,
				    seconds(c->timeout_ns, tbuf, sizeof(tbuf)),
				    c->rc_attempts, c->lost_why);
		return fail(c, BWC_ETIMEDOUT,
			    "no reply from the daemon at %s within %s",
			    c->path, seconds(c->timeout_ns, tbuf, sizeof(tbuf)));
	}
	if (rc != 0 && !c->waiter_done) {
		abandon(c, req->id);
		return rc;
	}
	if (c->waiter_status == BWC_EUNKNOWN) {
		char msg[MSG_MAX];

		unknown_outcome(c, req, msg, sizeof(msg));
		return fail(c, BWC_EUNKNOWN, "%s", msg);
	}
	if (c->waiter_status != 0)
		return c->waiter_status;   /* the closer set the message */

	*ans = c->waiter_ans;
	c->waiter_ans.env = NULL;
	if (ans->env != NULL &&
	    ans->env->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR) {
		rc = fail_server(c, ans->env->error, "");
		bwp_frame_free(ans->env);
		ans->env = NULL;
		return rc;
	}
	return 0;
}

/* ---- lifecycle ---------------------------------------------------------- */

int bwc_new(struct bwc_client **out)
{
	struct bwc_client *c;

	if (out == NULL)
		return BWC_EINVAL;
	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return BWC_ENOMEM;
	c->fd = -1;
	c->timeout_ns = BWC_DEFAULT_TIMEOUT_NS;
	c->owner_uid = -1;
	c->close_status = BWC_ECLOSED;
	c->max_frame = BWP_DEFAULT_MAX_FRAME;
	c->max_payload = BWP_DEFAULT_MAX_PAYLOAD;
	c->requests.size = sizeof(struct request);
	c->replays.size = sizeof(struct request);
	c->done.size = sizeof(struct done);
	c->fires.size = sizeof(struct fire);
	c->reconnect = true;
	c->rc_initial_ns = BWC_DEFAULT_RECONNECT_INITIAL_NS;
	c->rc_max_ns = BWC_DEFAULT_RECONNECT_MAX_NS;
	c->rc_give_up_ns = BWC_DEFAULT_RECONNECT_GIVE_UP_NS;
	/* Jitter only: clients started together should not stay in step. */
	c->rng = (uint64_t)(uintptr_t)c ^ bwc_now_ns() ^
		 ((uint64_t)getpid() << 32);
	if (c->rng == 0)
		c->rng = 1;
	*out = c;
	return 0;
}

void bwc_free(struct bwc_client *c)
{
	struct done d;

	if (c == NULL)
		return;
	bwc_close(c);
	while (c->done.len > 0) {
		ring_pop(&c->done, &d);
		bwp_frame_free(d.ans.env);
	}
	bwp_frame_free(c->waiter_ans.env);
	free(c->requests.buf);
	free(c->replays.buf);
	free(c->rp);
	free(c->done.buf);
	free(c->fires.buf);
	free(c->pay);
	free(c->held);
	free(c->lent);
	free(c->in);
	free(c->out);
	free(c->path);
	free(c->session);
	free(c->daemon_user);
	free(c);
}

int bwc_set_timeout(struct bwc_client *c, int64_t timeout_ns)
{
	if (c == NULL)
		return BWC_EINVAL;
	c->timeout_ns = timeout_ns < 0 ? -1 : timeout_ns;
	return 0;
}

/* Reconnecting is over, and what waited to be sent again fails with
 * status. */
static void stop_reconnecting(struct bwc_client *c, int status)
{
	struct request req;

	while (c->replays.len > 0) {
		ring_pop(&c->replays, &req);
		settle(c, &req, status);
	}
	c->rp_len = 0;
	c->down_since_ns = 0;
}

int bwc_set_reconnect(struct bwc_client *c, bool enable)
{
	if (c == NULL)
		return BWC_EINVAL;
	c->reconnect = enable;
	if (!enable && c->down_since_ns != 0) {
		stop_reconnecting(c, BWC_ECLOSED);
		c->close_status = BWC_ECLOSED;
		memcpy(c->closed_why, c->lost_why, sizeof(c->closed_why));
	}
	/* Bytes kept for requests that would have gone again are dropped by
	 * the next out_trim. */
	return 0;
}

int bwc_set_reconnect_backoff(struct bwc_client *c, uint64_t initial_ns,
			      uint64_t max_ns, uint64_t give_up_ns)
{
	if (c == NULL)
		return BWC_EINVAL;
	if (initial_ns == 0 || initial_ns > max_ns || give_up_ns == 0)
		return fail(c, BWC_EINVAL,
			    "reconnect backoff: initial %llu ns, max %llu ns, "
			    "give up %llu ns: it needs 0 < initial <= max and a "
			    "give-up above 0", (unsigned long long)initial_ns,
			    (unsigned long long)max_ns,
			    (unsigned long long)give_up_ns);
	c->rc_initial_ns = initial_ns;
	c->rc_max_ns = max_ns;
	c->rc_give_up_ns = give_up_ns;
	return 0;
}

int bwc_set_role(struct bwc_client *c, enum bwc_role role)
{
	if (c == NULL)
		return BWC_EINVAL;
	if (role != BWC_ROLE_DEFAULT && role != BWC_ROLE_PRODUCER &&
	    role != BWC_ROLE_CONSUMER)
		return fail(c, BWC_EINVAL, "unknown role %d", (int)role);
	c->role = role;
	return 0;
}

int bwc_set_window(struct bwc_client *c, uint32_t window)
{
	if (c == NULL)
		return BWC_EINVAL;
	c->window = window;
	return 0;
}

int bwc_set_ack_timeout(struct bwc_client *c, uint64_t ns)
{
	if (c == NULL)
		return BWC_EINVAL;
	c->ack_timeout_ns = ns;
	return 0;
}

int bwc_set_ack_mode(struct bwc_client *c, enum bwc_ack_mode mode)
{
	if (c == NULL)
		return BWC_EINVAL;
	if (mode != BWC_ACK_DEFAULT && mode != BWC_ACK_MANUAL &&
	    mode != BWC_ACK_AUTO)
		return fail(c, BWC_EINVAL, "unknown ack mode %d", (int)mode);
	c->ack_mode = mode;
	return 0;
}

int bwc_set_coalesce(struct bwc_client *c, bool coalesce)
{
	if (c == NULL)
		return BWC_EINVAL;
	c->coalesce = coalesce;
	return 0;
}

int bwc_set_owner_uid(struct bwc_client *c, int64_t uid)
{
	if (c == NULL)
		return BWC_EINVAL;
	if (uid > (int64_t)UINT32_MAX)
		return fail(c, BWC_EINVAL,
			    "owner uid %" PRId64 " out of range: 0 to %" PRIu32
			    ", or negative for the caller's own", uid,
			    UINT32_MAX);
	c->owner_uid = uid < 0 ? -1 : uid;
	return 0;
}

/* A uid written as a decimal number (what bwc_set_daemon_user takes
 * besides names): false for anything else, and for (uid_t)-1. */
static bool parse_uid(const char *s, uid_t *out)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v >= UINT32_MAX)
		return false;
	*out = (uid_t)v;
	return true;
}

int bwc_set_daemon_user(struct bwc_client *c, const char *user)
{
	char *copy = NULL;

	if (c == NULL)
		return BWC_EINVAL;
	if (user != NULL && *user == '\0')
		return fail(c, BWC_EINVAL,
			    "empty daemon user: a user name or uid, or NULL "
			    "for $%s or \"%s\"", BWC_DAEMON_USER_ENV,
			    BWC_DEFAULT_DAEMON_USER);
	if (user != NULL && (copy = strdup(user)) == NULL)
		return fail(c, BWC_ENOMEM, "out of memory");
	free(c->daemon_user);
	c->daemon_user = copy;
	return 0;
}

/* The daemon's user as configured: the setter's, the environment's, or
 * the default. */
static const char *daemon_user(const struct bwc_client *c)
{
	const char *env;

	if (c->daemon_user != NULL)
		return c->daemon_user;
	env = getenv(BWC_DAEMON_USER_ENV);
	return env != NULL && *env != '\0' ? env : BWC_DEFAULT_DAEMON_USER;
}

/* user's uid: a number as is, a name through getpwnam_r (reentrant: the
 * library has no global state).  false when no user has the name or the
 * lookup fails: such a user trusts nobody more. */
static bool user_uid(const char *user, uid_t *out)
{
	struct passwd pw, *res = NULL;
	size_t len = 1024;
	char *buf = NULL, *nbuf;
	int rc = 0;

	if (parse_uid(user, out))
		return true;
	/* Grow the buffer while glibc asks for more, to a sane bound. */
	do {
		nbuf = realloc(buf, len);
		if (nbuf == NULL)
			break;
		buf = nbuf;
		rc = getpwnam_r(user, &pw, buf, len, &res);
		len *= 2;
	} while (rc == ERANGE && len <= (1u << 20));
	if (res != NULL)
		*out = pw.pw_uid;
	free(buf);
	return res != NULL;
}

/*
 * Before a byte goes out on fd: is its listener root, ourselves, or the
 * daemon's user (see bwc_set_daemon_user)?  The name is looked up only
 * for a listener that is neither of the first two, so the usual connect
 * costs one getsockopt.  BWC_EPEER (or BWC_EIO) with the message set.
 */
static int check_peer(struct bwc_client *c, int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	const char *user;
	uid_t du;
	char known[32];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
		return fail(c, BWC_EIO, "cannot read the credentials of %s's "
			    "listener (SO_PEERCRED): %s", c->path,
			    strerror(errno));
	if (cr.uid == 0 || cr.uid == geteuid())
		return 0;
	user = daemon_user(c);
	if (user_uid(user, &du)) {
		if (du == cr.uid)
			return 0;
		snprintf(known, sizeof(known), "uid %u", (unsigned)du);
	} else {
		snprintf(known, sizeof(known), "no such user");
	}
	return fail(c, BWC_EPEER,
		    "refusing %s: its listener is uid %u (pid %ld), which is "
		    "not root, not you (uid %u), and not the daemon's user "
		    "\"%.64s\" (%s); if that is bitwheeld, name its user with "
		    "$%s or bwc_set_daemon_user() (bwctl --daemon-user)",
		    c->path, (unsigned)cr.uid, (long)cr.pid,
		    (unsigned)geteuid(), user, known, BWC_DAEMON_USER_ENV);
}

/* The role a Hello with the current settings asks for, defaults applied
 * (PROTOCOL.md, Hello). */
static enum bwc_role role_asked(const struct bwc_client *c,
				const char *session)
{
	if (c->role != BWC_ROLE_DEFAULT)
		return c->role;
	return session != NULL ? BWC_ROLE_PRODUCER : BWC_ROLE_CONSUMER;
}

/* A producer needs a named session: nobody else could take its fires;
 * and an owner uid names whose namespace a session name is in, so it
 * needs one too (the daemon would refuse it, BAD_REQUEST). */
static int check_role(struct bwc_client *c, const char *session)
{
	if (session == NULL && c->role == BWC_ROLE_PRODUCER)
		return fail(c, BWC_EINVAL,
			    "a producer needs a named session: an anonymous "
			    "session's fires go to its own connection only "
			    "(give a session name, or leave the role "
			    "BWC_ROLE_DEFAULT)");
	if (session == NULL && c->owner_uid >= 0)
		return fail(c, BWC_EINVAL,
			    "an owner uid (%" PRId64 ") needs a named session: "
			    "it says whose namespace the name is in, and an "
			    "anonymous session has no name (give a session "
			    "name, or bwc_set_owner_uid(c, -1))", c->owner_uid);
	return 0;
}

void bwc_close(struct bwc_client *c)
{
	if (c == NULL)
		return;
	/* Requests still queued behind outstanding ones (see submit) get
	 * what the socket takes now, as they would have, written at once. */
	if (c->fd >= 0)
		conn_flush(c);
	if (c->fd >= 0) {
		conn_close(c, BWC_ECLOSED, false);
		snprintf(c->closed_why, sizeof(c->closed_why),
			 "closed by bwc_close");
	} else if (c->down_since_ns != 0) {
		c->close_status = BWC_ECLOSED;
		snprintf(c->closed_why, sizeof(c->closed_why),
			 "closed by bwc_close while reconnecting");
	}
	/* A close by the caller ends any reconnecting. */
	stop_reconnecting(c, BWC_ECLOSED);
}

static void copy_limits(struct bwc_client *c, const Bitwheel__V1__Limits *l)
{
	struct bwc_limits *out = &c->info.limits;

	out->max_frame_bytes = l->has_max_frame_bytes ? l->max_frame_bytes : 0;
	out->max_payload_bytes =
		l->has_max_payload_bytes ? l->max_payload_bytes : 0;
	out->max_timers = l->max_timers;
	out->max_queued = l->max_queued;
	out->session_linger_ns = l->session_linger_ns;
	out->max_output_bytes = l->max_output_bytes;
	out->max_clients = l->max_clients;
	out->max_window = l->max_window;
	out->max_clients_per_uid = l->max_clients_per_uid;
	out->max_sessions_per_uid = l->max_sessions_per_uid;
	out->max_timers_per_uid = l->max_timers_per_uid;
	out->max_periodic_rate_per_uid = l->max_periodic_rate_per_uid;
	out->max_bytes_per_uid = l->max_bytes_per_uid;
	out->max_memory_bytes = l->max_memory_bytes;
	out->max_journal_bytes_per_uid = l->max_journal_bytes_per_uid;
	out->hello_timeout_ns = l->hello_timeout_ns;
	out->max_release_delay_ns = l->max_release_delay_ns;
	out->max_hold_ns = l->max_hold_ns;
	out->default_max_deliveries = l->default_max_deliveries;
	out->max_kick = l->max_kick;
	/* A limit the daemon leaves out keeps the protocol's default. */
	if (out->max_frame_bytes > 0)
		c->max_frame = out->max_frame_bytes;
	if (l->has_max_payload_bytes)
		c->max_payload = out->max_payload_bytes;
}

/* A named session's delivery policy, from the daemon's; NULL (none
 * sent, or an anonymous session): all 0. */
static void copy_policy(const Bitwheel__V1__Policy *p, struct bwc_policy *out)
{
	memset(out, 0, sizeof(*out));
	if (p == NULL)
		return;
	out->max_deliveries = p->max_deliveries;
	out->is_explicit = p->explicit_;
	/* Names are at most 64 bytes; a longer one breaks the protocol,
	 * and is cut rather than trusted. */
	if (p->has_dead_letter) {
		size_t len = p->dead_letter.len < sizeof(out->dead_letter) - 1 ?
			     p->dead_letter.len : sizeof(out->dead_letter) - 1;

		out->has_dead_letter = true;
		memcpy(out->dead_letter, p->dead_letter.data, len);
	}
}

/* Open the socket at c->path and say Hello with c->session (dial). */
static int dial_once(struct bwc_client *c)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Hello hello = BITWHEEL__V1__HELLO__INIT;
	struct answer ans = { .env = NULL };
	const Bitwheel__V1__HelloReply *hr;
	struct request req = { .kind = 0 };
	struct sockaddr_un sa;
	struct timeval tv = { 0, 0 };
	int fd, flags, rc;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, c->path, strlen(c->path) + 1);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(c, BWC_EIO, "socket: %s", strerror(errno));
	/* connect() on a Unix socket blocks only while the daemon's listen
	 * backlog is full; SO_SNDTIMEO bounds that wait (Linux honours it
	 * for connect). */
	if (c->timeout_ns >= 0) {
		tv.tv_sec = (time_t)(c->timeout_ns / 1000000000);
		tv.tv_usec = (suseconds_t)(c->timeout_ns % 1000000000 / 1000);
		if (tv.tv_sec == 0 && tv.tv_usec == 0)
			tv.tv_usec = 1;
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = errno;
		close(fd);
		if (rc == EAGAIN || rc == EINPROGRESS)
			return fail(c, BWC_EUNREACHABLE,
				    "cannot connect to %s: the daemon is not "
				    "accepting connections", c->path);
		return fail(c, BWC_EUNREACHABLE, "cannot connect to %s: %s",
			    c->path, strerror(rc));
	}
	if ((rc = check_peer(c, fd)) != 0) {
		close(fd);
		return rc;
	}
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		rc = errno;
		close(fd);
		return fail(c, BWC_EIO, "fcntl on %s: %s", c->path,
			    strerror(rc));
	}

	c->fd = fd;
	c->closed_why[0] = '\0';
	c->max_frame = BWP_DEFAULT_MAX_FRAME;
	c->max_payload = BWP_DEFAULT_MAX_PAYLOAD;
	memset(&c->info, 0, sizeof(c->info));
	/* A new connection: fires from now on carry its number.  Its role
	 * and ack mode as asked, until the reply says what was granted. */
	c->conn_seq++;
	c->conn_role = role_asked(c, c->session);
	c->conn_auto_ack = c->conn_role == BWC_ROLE_CONSUMER &&
			   (c->ack_mode == BWC_ACK_AUTO ||
			    (c->ack_mode == BWC_ACK_DEFAULT && !c->session));

	hello.has_protocol_version = 1;
	hello.protocol_version = BWP_PROTOCOL_VERSION;
	if (c->session) {
		hello.has_session = 1;
		hello.session.data = (uint8_t *)c->session;
		hello.session.len = strlen(c->session);
		/* Another uid's namespace (root only); absent: our own. */
		if (c->owner_uid >= 0) {
			hello.has_owner_uid = 1;
			hello.owner_uid = (uint32_t)c->owner_uid;
		}
	}
	/* Only what was set, so the daemon's defaults apply otherwise; the
	 * consumer options only for a consumer (a producer's are
	 * BAD_REQUEST). */
	if (c->role != BWC_ROLE_DEFAULT) {
		hello.has_role = 1;
		hello.role = (Bitwheel__V1__Role)c->role;
	}
	if (c->conn_role == BWC_ROLE_CONSUMER) {
		if (c->window > 0) {
			hello.has_window = 1;
			hello.window = c->window;
		}
		if (c->ack_timeout_ns > 0) {
			hello.has_ack_timeout_ns = 1;
			hello.ack_timeout_ns = c->ack_timeout_ns;
		}
		if (c->ack_mode != BWC_ACK_DEFAULT) {
			hello.has_auto_ack = 1;
			hello.auto_ack = c->ack_mode == BWC_ACK_AUTO;
		}
		if (c->coalesce) {
			hello.has_coalesce = 1;
			hello.coalesce = 1;
		}
	}
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	env.hello = &hello;
	req.reply_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY;
	rc = call(c, &env, &req, &ans);
	if (rc != 0)
		goto fail;

	hr = ans.env->hello_reply;
	if (hr->protocol_version != BWP_PROTOCOL_VERSION) {
		rc = fail(c, BWC_EPROTO,
			  "protocol error: the daemon at %s answered Hello "
			  "with protocol version %u, not %u", c->path,
			  hr->protocol_version, BWP_PROTOCOL_VERSION);
		goto fail;
	}
	snprintf(c->info.daemon_version, sizeof(c->info.daemon_version),
		 "%s", hr->daemon_version ? hr->daemon_version : "");
	c->info.oneshot_resolution_ns = hr->oneshot_resolution_ns;
	c->info.periodic_resolution_ns = hr->periodic_resolution_ns;
	for (size_t i = 0; i < hr->n_lanes && i < BWC_MAX_LANES; i++) {
		c->info.lanes[c->info.nlanes].resolution_ns = hr->lanes[i]->resolution_ns;
		c->info.lanes[c->info.nlanes++].max_late_ns = hr->lanes[i]->max_late_ns;
	}
	if (hr->limits != NULL)
		copy_limits(c, hr->limits);
	c->info.resumed = hr->resumed;
	c->info.timers = hr->timers;
	c->info.queued = hr->queued;
	c->info.dropped = hr->dropped;
	/* What the daemon granted; one that leaves the role out has taken
	 * the Hello's (a version 2 daemon always says). */
	if (hr->has_role && (hr->role == BITWHEEL__V1__ROLE__PRODUCER ||
			     hr->role == BITWHEEL__V1__ROLE__CONSUMER))
		c->conn_role = (enum bwc_role)hr->role;
	if (c->conn_role == BWC_ROLE_CONSUMER && hr->has_auto_ack)
		c->conn_auto_ack = hr->auto_ack;
	if (c->conn_role != BWC_ROLE_CONSUMER)
		c->conn_auto_ack = false;
	c->info.role = c->conn_role;
	c->info.window = hr->window;
	c->info.ack_timeout_ns = hr->ack_timeout_ns;
	c->info.auto_ack = c->conn_auto_ack;
	c->info.coalesce = hr->coalesce;
	c->info.consumers = hr->consumers;
	c->info.owner_uid = hr->owner_uid;
	copy_policy(hr->policy, &c->info.policy);
	bwp_frame_free(ans.env);
	return 0;

fail:
	bwp_frame_free(ans.env);
	/* A failed Hello closes the connection on the daemon's side too;
	 * the message set above stays. */
	if (c->fd >= 0) {
		conn_close(c, BWC_ECLOSED, false);
		memcpy(c->closed_why, c->errmsg, sizeof(c->closed_why));
	}
	return rc;
}

/* dial_once, marked: a connection lost during the Hello is the Hello's
 * failure, never one to resume (no dialing from inside a dial). */
static int dial(struct bwc_client *c)
{
	int rc;

	c->dialing = true;
	rc = dial_once(c);
	c->dialing = false;
	return rc;
}

/* Whether a failed attempt to resume is worth another: the daemon is
 * away, stopping, or short of something for now. */
static bool worth_retrying(const struct bwc_client *c, int rc)
{
	if (rc == BWC_EUNREACHABLE || rc == BWC_ECLOSED || rc == BWC_ETIMEDOUT)
		return true;
	if (rc != BWC_ESERVER)
		return false;
	switch (c->server_error) {
	case BWC_SERVER_SHUTTING_DOWN:
	case BWC_SERVER_TOO_MANY_CLIENTS:
	case BWC_SERVER_NO_MEMORY:
	case BWC_SERVER_STORAGE_UNAVAILABLE:
	case BWC_SERVER_INTERNAL:
		return true;
	default:
		return false;
	}
}

/* Reconnecting ends with rc: what waited fails with it, and so do later
 * calls until a new connect (not_connected). */
static int give_up(struct bwc_client *c, int rc)
{
	char last[MSG_MAX], tbuf[32];
	int server = c->server_error;

	memcpy(last, c->errmsg, sizeof(last));
	if (rc == BWC_EGAVEUP)
		fail(c, rc, "gave up reconnecting to %s after %s and %u "
		     "attempts (the connection ended: %.160s); the last "
		     "attempt: %.200s", c->path,
		     seconds((int64_t)(bwc_now_ns() - c->down_since_ns), tbuf,
			     sizeof(tbuf)), c->rc_attempts, c->lost_why, last);
	else
		fail(c, rc, "cannot reconnect to %s (the connection ended: "
		     "%.160s): %.240s", c->path, c->lost_why, last);
	c->server_error = rc == BWC_ESERVER ? server : BWC_SERVER_UNSPECIFIED;
	c->close_status = rc;
	memcpy(c->closed_why, c->errmsg, sizeof(c->closed_why));
	stop_reconnecting(c, rc);
	return rc;
}

/* The connection is back: the requests that waited go out first, in
 * order, as packed (request ids are the client's own: the daemon does
 * not mind old ones).  The Hello was the only request, answered, so out
 * holds only its written bytes and requests is empty: the buffers and
 * rings trade places again, allocating nothing. */
static void replay(struct bwc_client *c)
{
	struct ring spare = c->requests;
	uint8_t *buf = c->out;
	size_t cap = c->out_cap;

	c->out_base += c->out_len;
	c->requests = c->replays;
	c->replays = spare;
	c->out = c->rp;
	c->out_cap = c->rp_cap;
	c->out_len = c->rp_len;
	c->out_off = 0;
	c->rp = buf;
	c->rp_cap = cap;
	c->rp_len = 0;
	for (size_t i = 0; i < c->requests.len; i++)
		((struct request *)ring_at(&c->requests, i))->at += c->out_base;
	conn_flush(c);
}

/*
 * Reconnecting (the top of bitwheel-client.h): attempts at rc_next_ns,
 * backing off, until the session is back (0), deadline passes
 * (BWC_ETIMEDOUT: the state stays for the next call), give-up time
 * passes (BWC_EGAVEUP), or an attempt fails in a way that waiting does
 * not cure (its error).  Each attempt's Hello waits the client's timeout
 * at most, cut at the deadline and at the give-up time.
 */
static int resume(struct bwc_client *c, uint64_t deadline, bool interruptible)
{
	uint64_t give_up_at = c->rc_give_up_ns > UINT64_MAX - c->down_since_ns ?
			      UINT64_MAX : c->down_since_ns + c->rc_give_up_ns;
	int64_t timeout = c->timeout_ns;
	int rc;

	for (;;) {
		uint64_t now = bwc_now_ns(), wait;
		uint64_t at = c->rc_next_ns < give_up_at ? c->rc_next_ns
							 : give_up_at;

		if (now >= give_up_at && c->rc_attempts > 0)
			return give_up(c, BWC_EGAVEUP);
		if (now < at) {
			struct timespec ts;
			uint64_t until = at < deadline ? at : deadline;

			if (deadline <= now)
				return BWC_ETIMEDOUT;
			ts.tv_sec = (time_t)(until / 1000000000u);
			ts.tv_nsec = (long)(until % 1000000000u);
			if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
					    NULL) == EINTR && interruptible)
				return BWC_EINTR;
			continue;
		}
		if (deadline <= now)
			return BWC_ETIMEDOUT;
		wait = give_up_at > now ? give_up_at - now : 0;
		if (deadline - now < wait)
			wait = deadline - now;
		if (timeout >= 0 && (uint64_t)timeout < wait)
			wait = (uint64_t)timeout;
		if (wait < 1000000)
			wait = 1000000;     /* the last attempt gets a chance */
		c->timeout_ns = wait > INT64_MAX ? -1 : (int64_t)wait;
		c->rc_attempts++;
		rc = dial(c);
		c->timeout_ns = timeout;
		/* The Hello's answer was dial's, not the caller's. */
		c->waiter_done = false;
		c->waiter_status = 0;
		if (rc == 0)
			break;
		if (!worth_retrying(c, rc))
			return give_up(c, rc);
		c->rc_next_ns = bwc_now_ns() + backoff(c);
		if (rc == BWC_ETIMEDOUT && bwc_now_ns() >= deadline)
			return BWC_ETIMEDOUT;
	}
	c->down_since_ns = 0;
	replay(c);
	return 0;
}

int bwc_connect(struct bwc_client *c, const char *path, const char *session)
{
	struct sockaddr_un sa;
	char *npath = NULL, *nsession = NULL;
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	if (c->in_callback)
		return fail(c, BWC_EBUSY,
			    "bwc_connect from inside a bwc_dispatch callback");
	if (c->fd >= 0)
		return fail(c, BWC_EBUSY, "already connected to %s", c->path);
	if (path == NULL)
		path = bwc_default_socket();
	if (*path == '\0' || strlen(path) >= sizeof(sa.sun_path))
		return fail(c, BWC_EINVAL,
			    "socket path of %zu bytes: it must be 1 to %zu",
			    strlen(path), sizeof(sa.sun_path) - 1);
	if (session != NULL && !bwp_session_name_valid(session, strlen(session)))
		return fail(c, BWC_EINVAL,
			    "invalid session name \"%.80s\": 1 to %u bytes of "
			    "A-Z a-z 0-9 _ . : @ -", session,
			    BWP_SESSION_NAME_MAX);
	if ((rc = check_role(c, session)) != 0)
		return rc;

	npath = strdup(path);
	if (npath == NULL)
		goto nomem;
	if (session != NULL) {
		nsession = strdup(session);
		if (nsession == NULL)
			goto nomem;
	}
	free(c->path);
	free(c->session);
	c->path = npath;
	c->session = nsession;
	/* A connect of the caller's ends any reconnecting. */
	stop_reconnecting(c, BWC_ECLOSED);
	rc = dial(c);
	return rc;

nomem:
	free(npath);
	free(nsession);
	return fail(c, BWC_ENOMEM, "out of memory");
}

int bwc_reconnect(struct bwc_client *c)
{
	if (c == NULL)
		return BWC_EINVAL;
	if (c->in_callback)
		return fail(c, BWC_EBUSY,
			    "bwc_reconnect from inside a bwc_dispatch callback");
	if (c->path == NULL)
		return fail(c, BWC_EINVAL,
			    "bwc_reconnect before any bwc_connect");
	bwc_close(c);
	/* The role or owner may have been set since bwc_connect. */
	if (check_role(c, c->session) != 0)
		return BWC_EINVAL;
	return dial(c);
}

int bwc_get_session_info(const struct bwc_client *c,
			 struct bwc_session_info *out)
{
	if (c == NULL || out == NULL)
		return BWC_EINVAL;
	if (c->fd < 0)
		return BWC_ECLOSED;
	*out = c->info;
	return 0;
}

int bwc_fd(const struct bwc_client *c)
{
	return c ? c->fd : -1;
}

short bwc_poll_events(const struct bwc_client *c)
{
	if (c == NULL || c->fd < 0)
		return 0;
	return (short)(POLLIN | (c->out_off < c->out_len ? POLLOUT : 0));
}

void bwc_set_fire_handler(struct bwc_client *c, bwc_fire_fn fn, void *arg)
{
	if (c == NULL)
		return;
	c->on_fire = fn;
	c->on_fire_arg = arg;
}

/* ---- requests ----------------------------------------------------------- */

/* Fill a Schedule in caller storage; payload is referenced, not copied. */
static int build_schedule(struct bwc_client *c, const struct bwc_timer *t,
			  uint64_t leeway_ns, Bitwheel__V1__Envelope *env,
			  Bitwheel__V1__Schedule *s, struct request *req)
{
	if (t == NULL || (t->payload == NULL && t->payload_len > 0))
		return fail(c, BWC_EINVAL,
			    t ? "payload NULL with a length" : "timer NULL");
	if (t->payload != NULL && t->payload_len > c->max_payload)
		return fail(c, BWC_ETOOBIG,
			    "payload of %zu bytes over the daemon's limit of "
			    "%zu", t->payload_len, c->max_payload);

	if (t->realtime_ns > 0 && (t->absolute || t->when_ns || t->period_ns))
		return fail(c, BWC_EINVAL,
			    "realtime_ns with when_ns, absolute or period_ns: a wall-clock timer is a oneshot at one instant");
	if (t->calendar != NULL &&
	    (t->absolute || t->when_ns || t->period_ns || t->realtime_ns))
		return fail(c, BWC_EINVAL,
			    "calendar with when_ns, absolute, period_ns or realtime_ns: a calendar timer recurs by its spec");
	if (t->clock != BWC_CLOCK_MONOTONIC &&
	    (t->clock != BWC_CLOCK_BOOTTIME || t->realtime_ns || t->calendar))
		return fail(c, BWC_EINVAL, t->clock != BWC_CLOCK_BOOTTIME ?
			    "clock is neither BWC_CLOCK_MONOTONIC nor BWC_CLOCK_BOOTTIME" :
			    "clock with realtime_ns or calendar: those count on the wall clock");
	if (t->calendar == NULL &&
	    (t->jitter_ns || t->jitter_fixed || t->has_misfire_grace))
		return fail(c, BWC_EINVAL,
			    "jitter_ns, jitter_fixed and misfire_grace_ns are a calendar timer's");

	bitwheel__v1__schedule__init(s);
	s->has_key = 1;
	s->key = t->key;
	if (t->calendar != NULL) {
		/* protobuf-c's string is non-const, but packing only reads. */
		s->when_case = BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR;
		s->calendar = (char *)t->calendar;
		s->has_jitter_ns = t->jitter_ns > 0;
		s->jitter_ns = t->jitter_ns;
		s->has_jitter_fixed = s->jitter_fixed = t->jitter_fixed;
		s->has_misfire_grace_ns = t->has_misfire_grace;
		s->misfire_grace_ns = t->misfire_grace_ns;
	} else if (t->realtime_ns > 0) {
		s->when_case = BITWHEEL__V1__SCHEDULE__WHEN_REALTIME_NS;
		s->realtime_ns = t->realtime_ns;
	} else if (t->absolute) {
		s->when_case = BITWHEEL__V1__SCHEDULE__WHEN_DEADLINE_NS;
		s->deadline_ns = t->when_ns;
	} else {
		s->when_case = BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS;
		s->delay_ns = t->when_ns;
	}
	if (t->period_ns > 0) {
		s->has_period_ns = 1;
		s->period_ns = t->period_ns;
	}
	/* Absent for the default, so that an older daemon reads it too. */
	s->has_clock = t->clock == BWC_CLOCK_BOOTTIME;
	s->clock = BITWHEEL__V1__CLOCK__CLOCK_BOOTTIME;
	if (t->payload != NULL) {
		s->has_payload = 1;
		/* protobuf-c's data is non-const, but packing only reads. */
		s->payload.data = (uint8_t *)t->payload;
		s->payload.len = t->payload_len;
	}
	if (t->replace) {
		s->has_replace = 1;
		s->replace = 1;
	}
	if (leeway_ns != BWC_LEEWAY_DEFAULT) {
		s->has_leeway_ns = 1;
		s->leeway_ns = leeway_ns;
	}
	env->body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE;
	env->schedule = s;

	req->kind = BWC_REQUEST_SCHEDULE;
	req->key = t->key;
	/* Repeating one with replace re-arms the same timer; one without
	 * could find its own first attempt there (DUPLICATE_KEY) or arm a
	 * key the caller has since seen fire. */
	req->repeat = t->replace ? REPEAT_ALWAYS : REPEAT_UNSENT;
	req->reply_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY;
	return 0;
}

static void build_cancel(uint64_t key, Bitwheel__V1__Envelope *env,
			 Bitwheel__V1__Cancel *cn, struct request *req)
{
	bitwheel__v1__cancel__init(cn);
	cn->has_key = 1;
	cn->key = key;
	env->body_case = BITWHEEL__V1__ENVELOPE__BODY_CANCEL;
	env->cancel = cn;
	req->kind = BWC_REQUEST_CANCEL;
	req->key = key;
	req->repeat = REPEAT_ALWAYS;
	req->reply_case = BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY;
}

static void build_stats(Bitwheel__V1__Envelope *env, Bitwheel__V1__Stats *st,
			struct request *req)
{
	bitwheel__v1__stats__init(st);
	env->body_case = BITWHEEL__V1__ENVELOPE__BODY_STATS;
	env->stats = st;
	req->kind = BWC_REQUEST_STATS;
	req->repeat = REPEAT_ALWAYS;
	req->reply_case = BITWHEEL__V1__ENVELOPE__BODY_STATS_REPLY;
}

static void copy_lane(const Bitwheel__V1__LaneStats *l,
		      struct bwc_lane_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (l == NULL)
		return;
	out->pending = l->pending;
	out->overflow = l->overflow;
	out->inserted = l->inserted;
	out->cancelled = l->cancelled;
	out->fired = l->fired;
	out->lost = l->lost;
}

/* The caller-allocated structs are ABI: their sizes never change, new
 * fields take reserved slots (bitwheel-client.h).  bwc_stats is all
 * uint64_t, the same everywhere; the others are pinned where the layout
 * is known (LP64). */
_Static_assert(sizeof(struct bwc_stats) == 384,
	       "struct bwc_stats changed size: take a reserved slot instead");
#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(struct bwc_limits) == 160,
	       "struct bwc_limits changed size: take a reserved slot instead");
_Static_assert(sizeof(struct bwc_session_info) == 512,
	       "struct bwc_session_info changed size: take a reserved slot");
#endif

static void copy_stats(const Bitwheel__V1__StatsReply *r,
		       struct bwc_stats *out)
{
	/* The reserved tail, and whatever the daemon left out, read 0. */
	memset(out, 0, sizeof(*out));
	copy_lane(r->oneshot, &out->oneshot);
	copy_lane(r->periodic, &out->periodic);
	out->clients = r->clients;
	out->sessions = r->sessions;
	out->queued = r->queued;
	out->dropped = r->dropped;
	out->uptime_ns = r->uptime_ns;
	out->memory_bytes = r->memory_bytes;
	out->expired = r->expired;
	out->in_flight = r->in_flight;
	out->consumers = r->consumers;
	out->acked = r->acked;
	out->redelivered = r->redelivered;
	out->uid_connections = r->uid_connections;
	out->uid_sessions = r->uid_sessions;
	out->uid_timers = r->uid_timers;
	out->uid_periodic_rate_mhz = r->uid_periodic_rate_mhz;
	out->uid_bytes = r->uid_bytes;
}

_Static_assert(sizeof(struct bwc_metrics) == 1024,
	       "struct bwc_metrics changed size: take a reserved slot instead");
_Static_assert(sizeof(struct bwc_histogram) == 512,
	       "struct bwc_histogram changed size: take a reserved slot instead");
_Static_assert(sizeof(struct bwc_process) == 128,
	       "struct bwc_process changed size: take a reserved slot instead");
_Static_assert(sizeof(struct bwc_policy) == 96,
	       "struct bwc_policy changed size: take a reserved slot instead");
_Static_assert(sizeof(struct bwc_released) == 56,
	       "struct bwc_released changed size: take a reserved slot instead");

/* Copy a counter array indexed by a wire number; what lies past the
 * caller's end goes to [0], "any other". */
static void copy_indexed(const uint64_t *in, size_t n_in, uint64_t *out,
			 size_t n_out)
{
	for (size_t i = 0; i < n_in; i++)
		out[i < n_out ? i : 0] += in[i];
}

/* The requests by body field: those struct bwc_metrics names outside its
 * array (the listings), then the array, anything else in [0]. */
static void copy_requests(const uint64_t *in, size_t n_in, struct bwc_metrics *out)
{
	enum { LIST_SESSIONS = 16, LIST_TIMERS = 17 };
	uint64_t rest[LIST_TIMERS + 1] = { 0 };

	copy_indexed(in, n_in, rest, LIST_TIMERS + 1);
	copy_indexed(rest, BWC_REQUEST_KINDS, out->requests, BWC_REQUEST_KINDS);
	out->list_sessions_requests = rest[LIST_SESSIONS];
	out->list_timers_requests = rest[LIST_TIMERS];
}

/* A histogram's buckets, of which ours keep `bounds`: those past them
 * fold into the last. */
static void copy_buckets(const uint64_t *in, size_t n, size_t bounds,
			 uint64_t *out, uint64_t *count)
{
	for (size_t i = 0; i < n; i++) {
		out[i < bounds ? i : bounds] += in[i];
		*count += in[i];
	}
}

/* How many of n_le bounds ours (cap) keep: those copied to le. */
static size_t copy_bounds(const uint64_t *in, size_t n_le, size_t cap,
			  uint64_t *le)
{
	size_t bounds = n_le < cap ? n_le : cap;

	memcpy(le, in, bounds * sizeof(uint64_t));
	return bounds;
}

/* Histogram id of the caller's n, if it has it and the daemon sent its
 * buckets (their bounds: n_le of le). */
static void copy_histogram(struct bwc_histogram *h, size_t n, size_t id,
			   const uint64_t *le, size_t n_le,
			   const uint64_t *bucket, size_t n_bucket,
			   uint64_t sum_ns)
{
	if (id >= n || n_le == 0 || n_bucket == 0)
		return;
	h += id;
	h->bounds = (uint32_t)copy_bounds(le, n_le, BWC_HISTOGRAM_BOUNDS,
					  h->le_ns);
	copy_buckets(bucket, n_bucket, h->bounds, h->bucket, &h->count);
	h->sum_ns = sum_ns;
}

static void copy_histograms(const Bitwheel__V1__Metrics *m,
			    struct bwc_histogram *h, size_t n)
{
	memset(h, 0, n * sizeof(*h));
	if (m == NULL)
		return;
	copy_histogram(h, n, BWC_HISTOGRAM_JOURNAL_SYNC, m->journal_sync_le_ns,
		       m->n_journal_sync_le_ns, m->journal_sync_bucket,
		       m->n_journal_sync_bucket, m->journal_sync_ns_total);
	/* Delivery's histograms have the lateness' bounds. */
	copy_histogram(h, n, BWC_HISTOGRAM_QUEUE_WAIT_ONESHOT,
		       m->lateness_le_ns, m->n_lateness_le_ns,
		       m->queue_wait_bucket, m->n_queue_wait_bucket,
		       m->queue_wait_sum_ns);
	copy_histogram(h, n, BWC_HISTOGRAM_QUEUE_WAIT_PERIODIC,
		       m->lateness_le_ns, m->n_lateness_le_ns,
		       m->periodic_queue_wait_bucket,
		       m->n_periodic_queue_wait_bucket,
		       m->periodic_queue_wait_sum_ns);
	copy_histogram(h, n, BWC_HISTOGRAM_ACK_LATENCY, m->lateness_le_ns,
		       m->n_lateness_le_ns, m->ack_latency_bucket,
		       m->n_ack_latency_bucket, m->ack_latency_sum_ns);
	/* Hand-out counts, not durations, and no sum on the wire. */
	copy_histogram(h, n, BWC_HISTOGRAM_DELIVERIES, m->deliveries_le,
		       m->n_deliveries_le, m->deliveries_bucket,
		       m->n_deliveries_bucket, 0);
	copy_histogram(h, n, BWC_HISTOGRAM_JOURNAL_SYNC_RECORDS,
		       m->journal_sync_records_le, m->n_journal_sync_records_le,
		       m->journal_sync_records_bucket,
		       m->n_journal_sync_records_bucket, m->journal_records);
}

static void copy_process(const Bitwheel__V1__Metrics *m, struct bwc_process *p)
{
	memset(p, 0, sizeof(*p));
	if (m == NULL)
		return;
	p->has_memory = m->has_process_resident_bytes &&
			m->has_process_virtual_bytes;
	p->has_open_fds = m->has_process_open_fds;
	p->has_max_fds = m->has_process_max_fds;
	p->has_cpu = m->has_process_cpu_ns;
	p->has_start_time = m->has_process_start_time_ns;
	p->present = p->has_memory || p->has_open_fds || p->has_max_fds ||
		     p->has_cpu || p->has_start_time;
	p->resident_bytes = p->has_memory ? m->process_resident_bytes : 0;
	p->virtual_bytes = p->has_memory ? m->process_virtual_bytes : 0;
	p->open_fds = m->process_open_fds;
	p->max_fds = m->process_max_fds;
	p->cpu_ns = m->process_cpu_ns;
	p->start_time_ns = m->process_start_time_ns;
}

static void copy_metrics(const Bitwheel__V1__Metrics *m,
			 struct bwc_metrics *out)
{
	size_t bounds;

	memset(out, 0, sizeof(*out));
	if (m == NULL)
		return;
	out->present = true;
	/* Bounds past ours are folded into the last bucket. */
	bounds = copy_bounds(m->lateness_le_ns, m->n_lateness_le_ns,
			     BWC_LATENESS_BOUNDS, out->lateness_le_ns);
	out->lateness_bounds = (uint32_t)bounds;
	copy_buckets(m->lateness_bucket, m->n_lateness_bucket, bounds,
		     out->lateness_bucket[0], &out->lateness_count[0]);
	copy_buckets(m->periodic_lateness_bucket, m->n_periodic_lateness_bucket,
		     bounds, out->lateness_bucket[1], &out->lateness_count[1]);
	out->lateness_sum_ns[0] = m->lateness_sum_ns;
	out->lateness_sum_ns[1] = m->periodic_lateness_sum_ns;
	copy_requests(m->requests, m->n_requests, out);
	copy_indexed(m->errors, m->n_errors, out->errors, BWC_ERROR_CODES);
	out->accepted = m->accepted;
	out->refused_max_clients = m->refused_max_clients;
	out->refused_uid_budget = m->refused_uid_budget;
	out->refused_memory = m->refused_memory;
	out->slow_consumer_disconnects = m->slow_consumer_disconnects;
	out->journal_syncs = m->journal_syncs;
	out->journal_sync_ns_total = m->journal_sync_ns_total;
	out->journal_sync_ns_last = m->journal_sync_ns_last;
	out->journal_sync_ns_max = m->journal_sync_ns_max;
	out->snapshots = m->snapshots;
	out->has_snapshot = m->has_snapshot_age_ns;
	out->snapshot_age_ns = m->snapshot_age_ns;
	out->snapshot_ns_last = m->snapshot_ns_last;
	out->snapshot_ns_total = m->snapshot_ns_total;
	out->fires_delivered = m->fires_delivered;
	out->fire_writes = m->fire_writes;
	out->fires_coalesced = m->fires_coalesced;
	out->disconnects_closed = m->disconnects_closed;
	out->disconnects_error = m->disconnects_error;
	out->disconnects_no_memory = m->disconnects_no_memory;
	out->storage = m->storage;
	out->storage_down = m->storage_down;
	out->dead_lettered = m->dead_lettered;
	out->released = m->released;
	out->touched = m->touched;
	out->kicked = m->kicked;
}

int bwc_schedule(struct bwc_client *c, const struct bwc_timer *t,
		 struct bwc_scheduled *out)
{
	return bwc_schedule_leeway(c, t, BWC_LEEWAY_DEFAULT, out);
}

int bwc_schedule_leeway(struct bwc_client *c, const struct bwc_timer *t,
			uint64_t leeway_ns, struct bwc_scheduled *out)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Schedule s;
	struct answer ans;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	rc = build_schedule(c, t, leeway_ns, &env, &s, &req);
	if (rc == 0)
		rc = call(c, &env, &req, &ans);
	if (rc != 0)
		return rc;
	/* A ScheduleReply: by value, no envelope to free. */
	if (out != NULL)
		*out = ans.scheduled;
	return 0;
}

int bwc_cancel(struct bwc_client *c, uint64_t key, bool *pending)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Cancel cn;
	struct answer ans;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	build_cancel(key, &env, &cn, &req);
	rc = call(c, &env, &req, &ans);
	if (rc != 0)
		return rc;
	/* A CancelReply: by value, no envelope to free. */
	if (pending != NULL)
		*pending = ans.pending;
	return 0;
}

int bwc_metrics_scrape(struct bwc_client *c, struct bwc_stats *stats,
		       struct bwc_metrics *out, struct bwc_histogram *h,
		       size_t n, struct bwc_process *p)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Stats st;
	struct answer ans;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL || (stats == NULL && out == NULL && n == 0 && p == NULL) ||
	    (h == NULL && n != 0))
		return c ? fail(c, BWC_EINVAL, "stats output NULL") : BWC_EINVAL;
	build_stats(&env, &st, &req);
	rc = call(c, &env, &req, &ans);
	if (rc != 0)
		return rc;
	if (stats != NULL)
		copy_stats(ans.env->stats_reply, stats);
	if (out != NULL)
		copy_metrics(ans.env->stats_reply->metrics, out);
	if (n != 0)
		copy_histograms(ans.env->stats_reply->metrics, h, n);
	if (p != NULL)
		copy_process(ans.env->stats_reply->metrics, p);
	bwp_frame_free(ans.env);
	return 0;
}

int bwc_metrics_histograms(struct bwc_client *c, struct bwc_stats *stats,
			   struct bwc_metrics *out, struct bwc_histogram *h,
			   size_t n)
{
	return bwc_metrics_scrape(c, stats, out, h, n, NULL);
}

int bwc_metrics(struct bwc_client *c, struct bwc_stats *stats,
		struct bwc_metrics *out)
{
	return bwc_metrics_histograms(c, stats, out, NULL, 0);
}

int bwc_stats(struct bwc_client *c, struct bwc_stats *out)
{
	if (c != NULL && out == NULL)
		return fail(c, BWC_EINVAL, "stats output NULL");
	return bwc_metrics(c, out, NULL);
}

/* ---- introspection ------------------------------------------------------ */

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(struct bwc_session_entry) == 344,
	       "struct bwc_session_entry changed size: take a reserved slot");
_Static_assert(sizeof(struct bwc_timer_entry) == 384,
	       "struct bwc_timer_entry changed size: take a reserved slot");
_Static_assert(sizeof(struct bwc_listing) == 104,
	       "struct bwc_listing changed size: take a reserved slot");
#endif

/* One listing, paged: what the next request asks and the entries so far. */
struct listing {
	Bitwheel__V1__Envelope__BodyCase body, reply;
	const char *session;       /* ListTimers                            */
	int64_t owner_uid;         /* BWC_ANY_UID: none asked               */
	void *out;
	size_t size, max, n;       /* entry size, room, filled              */
	struct bwc_listing info;
};

static void copy_session(const Bitwheel__V1__SessionInfo *si,
			 struct bwc_session_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->anonymous = !si->has_name;
	if (si->has_name) {
		size_t len = si->name.len < sizeof(e->name) - 1 ?
			     si->name.len : sizeof(e->name) - 1;

		memcpy(e->name, si->name.data, len);
	}
	e->owner_uid = si->owner_uid;
	e->pid = si->pid;
	e->consumers = si->consumers;
	e->producers = si->producers;
	e->timers = si->timers;
	e->queued = si->queued;
	e->in_flight = si->in_flight;
	e->dropped = si->dropped;
	e->idle_ns = si->idle_ns;
	e->expires = si->has_expires_in_ns;
	e->expires_in_ns = si->expires_in_ns;
	copy_policy(si->policy, &e->policy);
	e->dead_letters = si->dead_letters;
	e->delayed = si->delayed;
	e->dead_lettered = si->dead_lettered;
}

static void copy_timer(const Bitwheel__V1__TimerInfo *ti,
		       struct bwc_timer_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->key = ti->key;
	e->deadline_ns = ti->deadline_ns;
	e->period_ns = ti->period_ns;
	e->fire_count = ti->fire_count;
	e->payload_len = ti->payload_bytes;
	e->has_payload = ti->has_payload;
	e->late = ti->late;
	e->periodic_lane = ti->lane == BITWHEEL__V1__LANE__LANE_PERIODIC;
	e->deadline_realtime_ns = ti->deadline_realtime_ns;
	e->clock = ti->has_clock && ti->clock == BITWHEEL__V1__CLOCK__CLOCK_BOOTTIME ?
		BWC_CLOCK_BOOTTIME : BWC_CLOCK_MONOTONIC;
	if (ti->calendar) {
		/* The daemon lists at most BWC_CALENDAR_MAX bytes. */
		snprintf(e->calendar, sizeof(e->calendar), "%s", ti->calendar);
		e->jitter_ns = ti->jitter_ns;
		e->jitter_fixed = ti->jitter_fixed;
		e->has_misfire_grace = ti->has_misfire_grace_ns;
		e->misfire_grace_ns = ti->misfire_grace_ns;
	}
}

/* One page: ask from cursor (0: the start) for what room is left; take
 * what came into l, and *cursor where the next page starts (0: none). */
static int list_page(struct bwc_client *c, struct listing *l, uint64_t *cursor)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__ListSessions ls = BITWHEEL__V1__LIST_SESSIONS__INIT;
	Bitwheel__V1__ListTimers lt = BITWHEEL__V1__LIST_TIMERS__INIT;
	/* Blocking only: no callback sees its kind. */
	struct request req = { .kind = 0, .reply_case = l->reply };
	size_t room = l->max - l->n;
	uint32_t limit = room < UINT32_MAX ? (uint32_t)room : UINT32_MAX;
	struct answer ans;
	size_t got;
	bool more;
	int rc;

	env.body_case = l->body;
	req.repeat = *cursor == 0 ? REPEAT_ALWAYS : REPEAT_NEVER;
	if (l->body == BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS) {
		ls.has_owner_uid = l->owner_uid != BWC_ANY_UID;
		ls.owner_uid = (uint32_t)l->owner_uid;
		ls.has_limit = 1;
		ls.limit = limit;
		ls.has_cursor = *cursor != 0;
		ls.cursor = *cursor;
		env.list_sessions = &ls;
	} else {
		lt.has_session = 1;
		lt.session.data = (uint8_t *)l->session;
		lt.session.len = strlen(l->session);
		lt.has_owner_uid = l->owner_uid != BWC_ANY_UID;
		lt.owner_uid = (uint32_t)l->owner_uid;
		lt.has_limit = 1;
		lt.limit = limit;
		lt.has_cursor = *cursor != 0;
		lt.cursor = *cursor;
		env.list_timers = &lt;
	}
	rc = call(c, &env, &req, &ans);
	if (rc != 0)
		return rc;
	if (l->reply == BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS_REPLY) {
		const Bitwheel__V1__ListSessionsReply *r = ans.env->list_sessions_reply;

		got = r->n_sessions < room ? r->n_sessions : room;
		for (size_t i = 0; i < got; i++)
			copy_session(r->sessions[i],
				     (struct bwc_session_entry *)l->out + l->n + i);
		more = r->more || got < r->n_sessions;
		*cursor = r->more && r->has_cursor ? r->cursor : 0;
	} else {
		const Bitwheel__V1__ListTimersReply *r = ans.env->list_timers_reply;

		got = r->n_timers < room ? r->n_timers : room;
		for (size_t i = 0; i < got; i++)
			copy_timer(r->timers[i],
				   (struct bwc_timer_entry *)l->out + l->n + i);
		more = r->more || got < r->n_timers;
		*cursor = r->more && r->has_cursor ? r->cursor : 0;
		l->info.total = r->total;
		l->info.owner_uid = r->owner_uid;
		l->info.now_ns = r->now_ns;
		l->info.realtime_ns = r->realtime_ns;
	}
	bwp_frame_free(ans.env);
	l->n += got;
	l->info.more = more;
	if (more && *cursor == 0 && l->n < l->max)
		return fail(c, BWC_EPROTO,
			    "protocol error: a listing reply says more without a cursor");
	return 0;
}

/* Pages until out is full or the listing ends. */
static int list_all(struct bwc_client *c, struct listing *l, size_t *n,
		    struct bwc_listing *info)
{
	uint64_t cursor = 0;
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	if (l->out == NULL || n == NULL || l->max == 0)
		return fail(c, BWC_EINVAL, "listing: output NULL or max 0");
	if (l->owner_uid != BWC_ANY_UID &&
	    (l->owner_uid < 0 || l->owner_uid > (int64_t)UINT32_MAX))
		return fail(c, BWC_EINVAL, "listing: uid %lld is not a uid",
			    (long long)l->owner_uid);
	if (c->fd < 0 && !reconnecting(c))
		return not_connected(c);
	*n = 0;
	for (unsigned restarts = 0;;) {
		rc = list_page(c, l, &cursor);
		/* A later page's cursor was the lost connection's: the
		 * listing starts over on the new one (a few times at most:
		 * a daemon that keeps going away ends it). */
		if (rc == BWC_ECLOSED && cursor != 0 && reconnecting(c) &&
		    restarts++ < 3) {
			cursor = 0;
			l->n = 0;
			memset(&l->info, 0, sizeof(l->info));
			continue;
		}
		if (rc != 0)
			return rc;
		if (cursor == 0 || l->n >= l->max)
			break;
	}
	*n = l->n;
	if (info != NULL)
		*info = l->info;
	return 0;
}

int bwc_list_sessions(struct bwc_client *c, int64_t owner_uid,
		      struct bwc_session_entry *out, size_t max, size_t *n,
		      struct bwc_listing *listing)
{
	struct listing l = {
		.body = BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS,
		.reply = BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS_REPLY,
		.owner_uid = owner_uid, .out = out, .max = max,
	};

	return list_all(c, &l, n, listing);
}

int bwc_list_timers(struct bwc_client *c, const char *session,
		    int64_t owner_uid, struct bwc_timer_entry *out, size_t max,
		    size_t *n, struct bwc_listing *listing)
{
	struct listing l = {
		.body = BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS,
		.reply = BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS_REPLY,
		.session = session, .owner_uid = owner_uid, .out = out,
		.max = max,
	};

	if (c != NULL && (session == NULL ||
			  !bwp_session_name_valid(session, strlen(session))))
		return fail(c, BWC_EINVAL, "listing: '%s' is not a session name",
			    session ? session : "(null)");
	return list_all(c, &l, n, listing);
}

/* ---- calendar events ---------------------------------------------------- */

int bwc_calendar(struct bwc_client *c, const char *spec, uint32_t iterations,
		 uint64_t base_realtime_ns, struct bwc_calendar **out)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Calendar q = BITWHEEL__V1__CALENDAR__INIT;
	/* Blocking only: no callback sees its kind.  Read-only: asking
	 * again on a new connection is harmless. */
	struct request req = {
		.kind = 0, .repeat = REPEAT_ALWAYS,
		.reply_case = BITWHEEL__V1__ENVELOPE__BODY_CALENDAR_REPLY,
	};
	const Bitwheel__V1__CalendarReply *r;
	struct bwc_calendar *cal;
	const char *norm, *zone;
	struct answer ans;
	size_t n, nlen, zlen;
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	if (spec == NULL || out == NULL)
		return fail(c, BWC_EINVAL, "calendar: spec or output NULL");
	*out = NULL;
	if (iterations > BWC_CALENDAR_ITERATIONS_MAX)
		return fail(c, BWC_EINVAL, "calendar: %" PRIu32 " iterations, "
			    "over the limit of %d", iterations,
			    BWC_CALENDAR_ITERATIONS_MAX);
	if (c->fd < 0 && !reconnecting(c))
		return not_connected(c);
	q.spec = (char *)spec;
	q.has_iterations = iterations != 0;
	q.iterations = iterations;
	q.has_base_realtime_ns = base_realtime_ns != 0;
	q.base_realtime_ns = base_realtime_ns;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_CALENDAR;
	env.calendar = &q;
	rc = call(c, &env, &req, &ans);
	if (rc != 0)
		return rc;
	r = ans.env->calendar_reply;
	n = r->n_elapses_realtime_ns;
	norm = r->normalized ? r->normalized : "";
	zone = r->zone ? r->zone : "";
	nlen = strlen(norm);
	zlen = strlen(zone);
	if (n > (iterations ? iterations : 1)) {
		bwp_frame_free(ans.env);
		return fail(c, BWC_EPROTO, "protocol error: %zu elapses in a "
			    "calendar reply, %" PRIu32 " asked", n,
			    iterations ? iterations : 1);
	}
	/* One block: the caller frees it with bwc_calendar_free(). */
	cal = malloc(sizeof(*cal) + n * sizeof(uint64_t) + nlen + zlen + 2);
	if (cal == NULL) {
		bwp_frame_free(ans.env);
		return fail(c, BWC_ENOMEM, "out of memory for a calendar reply");
	}
	memset(cal, 0, sizeof(*cal));
	cal->elapses_realtime_ns = (uint64_t *)(cal + 1);
	if (n > 0)
		memcpy(cal->elapses_realtime_ns, r->elapses_realtime_ns,
		       n * sizeof(uint64_t));
	cal->n_elapses = n;
	cal->normalized = (char *)(cal->elapses_realtime_ns + n);
	memcpy(cal->normalized, norm, nlen + 1);
	cal->zone = cal->normalized + nlen + 1;
	memcpy(cal->zone, zone, zlen + 1);
	cal->base_realtime_ns = r->base_realtime_ns;
	cal->gave_up = r->gave_up;
	bwp_frame_free(ans.env);
	*out = cal;
	return 0;
}

void bwc_calendar_free(struct bwc_calendar *cal)
{
	free(cal);
}

/* ---- non-blocking requests ------------------------------------------ */

static int send_async(struct bwc_client *c, Bitwheel__V1__Envelope *env,
		      struct request *req, bwc_reply_fn cb, void *arg)
{
	/* Unwritten: what waits for the socket, or while reconnecting for
	 * the connection. */
	size_t unwritten = c->fd >= 0 ? c->out_len - c->out_off : c->rp_len;

	if (c->fd < 0 && !reconnecting(c))
		return not_connected(c);
	if (unwritten > OUTPUT_LIMIT)
		return fail(c, BWC_EAGAIN,
			    "%zu bytes of requests not yet written to %s",
			    unwritten, c->path);
	req->cb = cb;
	req->arg = arg;
	req->waiter = false;
	req->abandoned = false;
	return submit(c, env, req);
}

int bwc_send_schedule(struct bwc_client *c, const struct bwc_timer *t,
		      bwc_reply_fn cb, void *arg)
{
	return bwc_send_schedule_leeway(c, t, BWC_LEEWAY_DEFAULT, cb, arg);
}

int bwc_send_schedule_leeway(struct bwc_client *c, const struct bwc_timer *t,
			     uint64_t leeway_ns, bwc_reply_fn cb, void *arg)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Schedule s;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	rc = build_schedule(c, t, leeway_ns, &env, &s, &req);
	if (rc != 0)
		return rc;
	return send_async(c, &env, &req, cb, arg);
}

int bwc_send_cancel(struct bwc_client *c, uint64_t key, bwc_reply_fn cb,
		    void *arg)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Cancel cn;
	struct request req = { .kind = 0 };

	if (c == NULL)
		return BWC_EINVAL;
	build_cancel(key, &env, &cn, &req);
	return send_async(c, &env, &req, cb, arg);
}

int bwc_send_stats(struct bwc_client *c, bwc_reply_fn cb, void *arg)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Stats st;
	struct request req = { .kind = 0 };

	if (c == NULL)
		return BWC_EINVAL;
	build_stats(&env, &st, &req);
	return send_async(c, &env, &req, cb, arg);
}

/* ---- acknowledging ------------------------------------------------------ */

/* bwc_wait_fire and bwc_dispatch's words for a producer's caller. */
static int producer_has_no_fires(struct bwc_client *c, const char *what)
{
	return fail(c, BWC_EROLE,
		    "%s on a producer connection to session \"%s\", which "
		    "never receives fires: call bwc_set_role(c, "
		    "BWC_ROLE_CONSUMER) before bwc_connect (or bwc_reconnect)",
		    what, c->session ? c->session : "");
}

/* check_fire: the fire came on a lost connection, and the client
 * reconnects by itself: nothing to send. */
#define ACK_NOTHING 1

/* The checks of a request that names a fire in flight to this connection
 * (Ack, Release, Touch; what: "acknowledge", ...), by its delivery
 * number. */
static int check_fire(struct bwc_client *c, const struct bwc_fire *fire,
		      const char *what)
{
	if (fire == NULL)
		return fail(c, BWC_EINVAL, "fire NULL");
	if (fire->connection == 0 || fire->connection > c->conn_seq)
		return fail(c, BWC_EINVAL,
			    "not a fire this client handed out (connection "
			    "%llu)", (unsigned long long)fire->connection);
	/* Reconnecting by itself, the client does not trouble the caller
	 * with a fire of a lost connection: the daemon took it back, and
	 * the ack completes nothing, as after an ack timeout. */
	if (c->reconnect && (fire->connection != c->conn_seq || c->fd < 0) &&
	    (c->fd >= 0 || reconnecting(c)))
		return ACK_NOTHING;
	if (c->fd < 0)
		return not_connected(c);
	if (fire->connection != c->conn_seq)
		return fail(c, BWC_ESTALE,
			    "cannot %s the fire of key %llu: it came on an "
			    "earlier connection (%llu, this is %llu): the "
			    "daemon took it back when that one closed and will "
			    "deliver it again, marked redelivered", what,
			    (unsigned long long)fire->key,
			    (unsigned long long)fire->connection,
			    (unsigned long long)c->conn_seq);
	if (c->conn_role != BWC_ROLE_CONSUMER)
		return fail(c, BWC_EROLE,
			    "cannot %s on a producer connection, which is "
			    "never sent a fire: call bwc_set_role(c, "
			    "BWC_ROLE_CONSUMER) before bwc_connect", what);
	if (fire->delivery == 0)
		return fail(c, BWC_EINVAL,
			    "the fire of key %llu carries no delivery number "
			    "to %s", (unsigned long long)fire->key, what);
	return 0;
}

/* The checks bwc_ack and bwc_send_ack share, and the Ack, in caller
 * storage. */
static int build_ack(struct bwc_client *c, const struct bwc_fire *fire,
		     bool cumulative, Bitwheel__V1__Envelope *env,
		     Bitwheel__V1__Ack *a)
{
	int rc = check_fire(c, fire, "acknowledge");

	if (rc != 0)
		return rc;
	bitwheel__v1__ack__init(a);
	a->has_delivery = 1;
	a->delivery = fire->delivery;
	if (cumulative) {
		a->has_cumulative = 1;
		a->cumulative = 1;
	}
	env->body_case = BITWHEEL__V1__ENVELOPE__BODY_ACK;
	env->ack = a;
	return 0;
}

int bwc_ack(struct bwc_client *c, const struct bwc_fire *fire,
	    bool cumulative, uint64_t *acked)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Ack a;
	struct answer ans;
	struct request req = { .kind = BWC_REQUEST_ACK };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	if (c->in_callback)
		return fail(c, BWC_EBUSY,
			    "bwc_ack from inside a bwc_dispatch callback (use "
			    "bwc_send_ack)");
	rc = build_ack(c, fire, cumulative, &env, &a);
	if (rc == ACK_NOTHING) {
		if (acked != NULL)
			*acked = 0;
		return 0;
	}
	if (rc != 0)
		return rc;
	req.key = fire->key;
	req.reply_case = BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY;
	rc = call(c, &env, &req, &ans);
	if (rc != 0)
		return rc;
	/* An AckReply: by value (conn_parse), no envelope to free. */
	bwp_frame_free(ans.env);
	if (acked != NULL)
		*acked = ans.acked;
	return 0;
}

int bwc_send_ack(struct bwc_client *c, const struct bwc_fire *fire,
		 bool cumulative)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Ack a;
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	rc = build_ack(c, fire, cumulative, &env, &a);
	if (rc == ACK_NOTHING)
		return 0;
	if (rc != 0)
		return rc;
	if (c->out_len - c->out_off > OUTPUT_LIMIT)
		return fail(c, BWC_EAGAIN,
			    "%zu bytes of requests not yet written to %s",
			    c->out_len - c->out_off, c->path);
	/* No request_id: the daemon answers nothing. */
	return submit(c, &env, NULL);
}

/* ---- fires that fail ---------------------------------------------------- */

/* Release and Touch each name a fire of this connection's and take a
 * duration (0: absent): one message body or the other. */
union fire_op {
	Bitwheel__V1__Release release;
	Bitwheel__V1__Touch touch;
};

static int build_fire_op(struct bwc_client *c, const struct bwc_fire *fire,
			 bool touch, uint64_t ns, Bitwheel__V1__Envelope *env,
			 union fire_op *m, struct request *req)
{
	int rc = check_fire(c, fire, touch ? "touch" : "release");

	req->kind = touch ? BWC_REQUEST_TOUCH : BWC_REQUEST_RELEASE;
	req->key = fire != NULL ? fire->key : 0;
	if (rc != 0)
		return rc;
	/* Never sent again: keep_for_replay settles it by its kind. */
	req->repeat = REPEAT_NEVER;
	if (touch) {
		bitwheel__v1__touch__init(&m->touch);
		m->touch.has_delivery = 1;
		m->touch.delivery = fire->delivery;
		m->touch.has_timeout_ns = ns > 0;
		m->touch.timeout_ns = ns;
		env->body_case = BITWHEEL__V1__ENVELOPE__BODY_TOUCH;
		env->touch = &m->touch;
		req->reply_case = BITWHEEL__V1__ENVELOPE__BODY_TOUCH_REPLY;
	} else {
		bitwheel__v1__release__init(&m->release);
		m->release.has_delivery = 1;
		m->release.delivery = fire->delivery;
		m->release.has_delay_ns = ns > 0;
		m->release.delay_ns = ns;
		env->body_case = BITWHEEL__V1__ENVELOPE__BODY_RELEASE;
		env->release = &m->release;
		req->reply_case = BITWHEEL__V1__ENVELOPE__BODY_RELEASE_REPLY;
	}
	return 0;
}

/* SetPolicy and Kick concern the connection's named session. */
static int check_named(struct bwc_client *c, const char *what)
{
	if (c->path != NULL && c->session == NULL)
		return fail(c, BWC_EROLE,
			    "%s: an anonymous session has no delivery policy "
			    "nor dead letters (connect with a session name)",
			    what);
	return 0;
}

static int build_policy(struct bwc_client *c, int64_t max_deliveries,
			const char *dead_letter, Bitwheel__V1__Envelope *env,
			Bitwheel__V1__SetPolicy *sp, struct request *req)
{
	int rc = check_named(c, "bwc_set_policy");

	if (rc != 0)
		return rc;
	if (max_deliveries != BWC_POLICY_KEEP &&
	    (max_deliveries < 0 || max_deliveries > (int64_t)UINT32_MAX))
		return fail(c, BWC_EINVAL,
			    "max_deliveries %lld: 0 (unlimited) to %u, or "
			    "BWC_POLICY_KEEP", (long long)max_deliveries,
			    UINT32_MAX);
	if (dead_letter != NULL && *dead_letter != '\0' &&
	    !bwp_session_name_valid(dead_letter, strlen(dead_letter)))
		return fail(c, BWC_EINVAL,
			    "dead-letter session '%.80s' is not a session name "
			    "(1 to 64 of A-Z a-z 0-9 _ . : @ -)", dead_letter);
	bitwheel__v1__set_policy__init(sp);
	if (max_deliveries != BWC_POLICY_KEEP) {
		sp->has_max_deliveries = 1;
		sp->max_deliveries = (uint32_t)max_deliveries;
	}
	if (dead_letter != NULL) {
		sp->has_dead_letter = 1;
		sp->dead_letter.data = (uint8_t *)dead_letter;
		sp->dead_letter.len = strlen(dead_letter);
	}
	env->body_case = BITWHEEL__V1__ENVELOPE__BODY_SET_POLICY;
	env->set_policy = sp;
	req->kind = BWC_REQUEST_SET_POLICY;
	/* Setting the same policy twice is setting it once. */
	req->repeat = REPEAT_ALWAYS;
	req->reply_case = BITWHEEL__V1__ENVELOPE__BODY_SET_POLICY_REPLY;
	return 0;
}

static int build_kick(struct bwc_client *c, bool has_key, uint64_t key,
		      uint32_t limit, Bitwheel__V1__Envelope *env,
		      Bitwheel__V1__Kick *k, struct request *req)
{
	int rc = check_named(c, "bwc_kick");

	if (rc != 0)
		return rc;
	bitwheel__v1__kick__init(k);
	k->has_key = has_key;
	k->key = key;
	k->has_limit = limit > 0;
	k->limit = limit;
	env->body_case = BITWHEEL__V1__ENVELOPE__BODY_KICK;
	env->kick = k;
	req->kind = BWC_REQUEST_KICK;
	req->key = key;
	/* A repeat moves what is left to move: what the caller asked. */
	req->repeat = REPEAT_ALWAYS;
	req->reply_case = BITWHEEL__V1__ENVELOPE__BODY_KICK_REPLY;
	return 0;
}

/* The replies' fields; r NULL (the connection ended before the reply,
 * while reconnecting: the fire was taken back) reads as nothing done. */
static void copy_released(const Bitwheel__V1__ReleaseReply *r,
			  struct bwc_released *out)
{
	memset(out, 0, sizeof(*out));
	if (r == NULL)
		return;
	out->released = r->released;
	out->dead_lettered = r->dead_lettered;
	out->deliveries = r->deliveries;
	out->ready_ns = r->has_ready_ns ? r->ready_ns : 0;
}

static void copy_touched(const Bitwheel__V1__TouchReply *r, bool *touched,
			 uint64_t *deadline_ns)
{
	*touched = r != NULL && r->touched;
	*deadline_ns = r != NULL && r->has_ack_deadline_ns ? r->ack_deadline_ns
							    : 0;
}

/* A Release or Touch of a lost connection's fire while reconnecting:
 * nothing is sent, and the callback hears "nothing done" at the next
 * bwc_dispatch, as if the reply had said so. */
static int nothing_done(struct bwc_client *c, struct request *req,
			bwc_reply_fn cb, void *arg)
{
	if (ring_reserve(&c->done, c->requests.len + c->replays.len + 1) != 0)
		return fail(c, BWC_ENOMEM, "out of memory queueing a request");
	req->cb = cb;
	req->arg = arg;
	req->waiter = false;
	req->abandoned = false;
	if (cb != NULL)
		settle(c, req, 0);
	return 0;
}

int bwc_release(struct bwc_client *c, const struct bwc_fire *fire,
		uint64_t delay_ns, struct bwc_released *out)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	union fire_op r;
	struct bwc_released got;
	struct answer ans = { .env = NULL };
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	if (c->in_callback)
		return fail(c, BWC_EBUSY, "bwc_release from inside a "
			    "bwc_dispatch callback (use bwc_send_release)");
	rc = build_fire_op(c, fire, false, delay_ns, &env, &r, &req);
	if (rc == 0)
		rc = call(c, &env, &req, &ans);
	if (rc < 0)
		return rc;
	copy_released(ans.env ? ans.env->release_reply : NULL, &got);
	bwp_frame_free(ans.env);
	if (out != NULL)
		*out = got;
	return 0;
}

int bwc_send_release(struct bwc_client *c, const struct bwc_fire *fire,
		     uint64_t delay_ns, bwc_reply_fn cb, void *arg)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	union fire_op r;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	rc = build_fire_op(c, fire, false, delay_ns, &env, &r, &req);
	if (rc == ACK_NOTHING)
		return nothing_done(c, &req, cb, arg);
	if (rc != 0)
		return rc;
	return send_async(c, &env, &req, cb, arg);
}

int bwc_touch(struct bwc_client *c, const struct bwc_fire *fire,
	      uint64_t timeout_ns, bool *touched, uint64_t *ack_deadline_ns)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	union fire_op t;
	struct answer ans = { .env = NULL };
	struct request req = { .kind = 0 };
	uint64_t deadline;
	bool done;
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	if (c->in_callback)
		return fail(c, BWC_EBUSY, "bwc_touch from inside a "
			    "bwc_dispatch callback (use bwc_send_touch)");
	rc = build_fire_op(c, fire, true, timeout_ns, &env, &t, &req);
	if (rc == 0)
		rc = call(c, &env, &req, &ans);
	if (rc < 0)
		return rc;
	copy_touched(ans.env ? ans.env->touch_reply : NULL, &done, &deadline);
	bwp_frame_free(ans.env);
	if (touched != NULL)
		*touched = done;
	if (ack_deadline_ns != NULL)
		*ack_deadline_ns = deadline;
	return 0;
}

int bwc_send_touch(struct bwc_client *c, const struct bwc_fire *fire,
		   uint64_t timeout_ns, bwc_reply_fn cb, void *arg)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	union fire_op t;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	rc = build_fire_op(c, fire, true, timeout_ns, &env, &t, &req);
	if (rc == ACK_NOTHING)
		return nothing_done(c, &req, cb, arg);
	if (rc != 0)
		return rc;
	return send_async(c, &env, &req, cb, arg);
}

int bwc_set_policy(struct bwc_client *c, int64_t max_deliveries,
		   const char *dead_letter, struct bwc_policy *out)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__SetPolicy sp;
	struct answer ans;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	rc = build_policy(c, max_deliveries, dead_letter, &env, &sp, &req);
	if (rc == 0)
		rc = call(c, &env, &req, &ans);
	if (rc != 0)
		return rc;
	if (out != NULL)
		copy_policy(ans.env->set_policy_reply->policy, out);
	bwp_frame_free(ans.env);
	return 0;
}

int bwc_send_set_policy(struct bwc_client *c, int64_t max_deliveries,
			const char *dead_letter, bwc_reply_fn cb, void *arg)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__SetPolicy sp;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	rc = build_policy(c, max_deliveries, dead_letter, &env, &sp, &req);
	if (rc != 0)
		return rc;
	return send_async(c, &env, &req, cb, arg);
}

int bwc_kick(struct bwc_client *c, bool has_key, uint64_t key, uint32_t limit,
	     uint64_t *kicked, bool *more)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Kick k;
	struct answer ans;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	rc = build_kick(c, has_key, key, limit, &env, &k, &req);
	if (rc == 0)
		rc = call(c, &env, &req, &ans);
	if (rc != 0)
		return rc;
	if (kicked != NULL)
		*kicked = ans.env->kick_reply->kicked;
	if (more != NULL)
		*more = ans.env->kick_reply->more;
	bwp_frame_free(ans.env);
	return 0;
}

int bwc_send_kick(struct bwc_client *c, bool has_key, uint64_t key,
		  uint32_t limit, bwc_reply_fn cb, void *arg)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Kick k;
	struct request req = { .kind = 0 };
	int rc;

	if (c == NULL)
		return BWC_EINVAL;
	rc = build_kick(c, has_key, key, limit, &env, &k, &req);
	if (rc != 0)
		return rc;
	return send_async(c, &env, &req, cb, arg);
}

/* ---- handing out fires and replies ---------------------------------- */

/*
 * Hand out the oldest queued fire, its payload copied to *buf (grown to
 * fit; *cap is its size), and after it a dead letter's session name with
 * a NUL.  The payload queue moves as it grows, so the caller gets a
 * buffer that only its own next take overwrites.  BWC_ENOMEM leaves the
 * fire queued.
 */
static int fire_take(struct bwc_client *c, uint8_t **buf, size_t *cap,
		     struct bwc_fire *out)
{
	const struct fire *front = ring_at(&c->fires, 0);
	size_t n = front->f.payload_len, dl = front->dl_len;
	struct fire f;

	if (buf_reserve(buf, cap, n + dl + 1) != 0)
		return fail(c, BWC_ENOMEM, "out of memory handing out a fire");
	ring_pop(&c->fires, &f);
	*out = f.f;
	/* An empty payload is still a payload: keep it non-NULL so the
	 * caller can tell it from none. */
	if (f.has_payload)
		out->payload = n ? memcpy(*buf, c->pay + c->pay_off, n) : "";
	if (f.f.dead_letter.present) {
		char *name = (char *)*buf + n;

		memcpy(name, c->pay + c->pay_off + n, dl);
		name[dl] = '\0';
		out->dead_letter.session = name;
	}
	c->pay_off += n + dl;
	if (c->pay_off == c->pay_len)
		c->pay_off = c->pay_len = 0;
	return 0;
}

int bwc_wait_fire(struct bwc_client *c, int64_t timeout_ns,
		  struct bwc_fire *out)
{
	char tbuf[32];
	int rc;

	if (c == NULL || out == NULL)
		return c ? fail(c, BWC_EINVAL, "fire output NULL") : BWC_EINVAL;
	if (c->in_callback)
		return fail(c, BWC_EBUSY,
			    "bwc_wait_fire from inside a bwc_dispatch callback");
	if (c->fires.len == 0) {
		if (c->fd < 0 && !reconnecting(c))
			return not_connected(c);
		if (c->conn_role == BWC_ROLE_PRODUCER)
			return producer_has_no_fires(c, "bwc_wait_fire");
		rc = wait_io(c, WAIT_FIRE, timeout_ns < 0 ? -1 : timeout_ns,
			     true);
		if (rc == BWC_ETIMEDOUT)
			return fail(c, rc, "no fire within %s",
				    seconds(timeout_ns, tbuf, sizeof(tbuf)));
		if (rc == BWC_EINTR)
			return fail(c, rc, "interrupted by a signal while "
				    "waiting for a fire");
		if (rc != 0)
			return rc;
	}
	/* held: valid until the next bwc_wait_fire, whatever comes between. */
	return fire_take(c, &c->held, &c->held_cap, out);
}

static void deliver_reply(struct bwc_client *c, struct done *d)
{
	struct bwc_reply r;
	struct bwc_stats st;
	struct bwc_policy pol;
	const Bitwheel__V1__Envelope *env = d->ans.env;
	char msg[MSG_MAX];

	memset(&r, 0, sizeof(r));
	r.request = d->req.kind;
	r.key = d->req.key;
	r.status = d->status;
	r.message = "";
	if (d->status == BWC_EUNKNOWN) {
		unknown_outcome(c, &d->req, msg, sizeof(msg));
		r.message = msg;
	} else if (d->status == BWC_ESERVER) {
		r.server_error = env->error->has_code ? (int)env->error->code
						      : 0;
		if (env->error->message)
			r.message = env->error->message;
	} else if (d->status == 0) {
		switch (d->req.kind) {
		case BWC_REQUEST_SCHEDULE:
			r.scheduled = d->ans.scheduled;
			break;
		case BWC_REQUEST_CANCEL:
			r.pending = d->ans.pending;
			break;
		case BWC_REQUEST_STATS:
			copy_stats(env->stats_reply, &st);
			r.stats = &st;
			break;
		case BWC_REQUEST_ACK:
			/* Only bwc_ack sends one with a reply, and waits. */
			break;
		/* A Release or Touch settled while reconnecting has no
		 * envelope: nothing done. */
		case BWC_REQUEST_RELEASE:
			copy_released(env ? env->release_reply : NULL,
				      &r.released);
			break;
		case BWC_REQUEST_TOUCH:
			copy_touched(env ? env->touch_reply : NULL, &r.touched,
				     &r.ack_deadline_ns);
			break;
		case BWC_REQUEST_SET_POLICY:
			copy_policy(env->set_policy_reply->policy, &pol);
			r.policy = &pol;
			break;
		case BWC_REQUEST_KICK:
			r.kicked = env->kick_reply->kicked;
			r.more = env->kick_reply->more;
			break;
		}
	}
	d->req.cb(c, &r, d->req.arg);
}

/* Replies and (with a handler) fires, merged back into the order they
 * arrived in, then what the callbacks sent, in one write.  0 or
 * BWC_ENOMEM (a fire could not be handed out). */
static int run_callbacks(struct bwc_client *c)
{
	bool flushed = false;

	for (;;) {
		struct done *dn = c->done.len ? ring_at(&c->done, 0) : NULL;
		struct fire *fn = c->on_fire && c->fires.len ?
					  ring_at(&c->fires, 0) : NULL;

		if (dn == NULL && fn == NULL) {
			/* What the callbacks sent goes out in one write
			 * (see submit).  Should that close the connection,
			 * the requests it fails are delivered too. */
			if (flushed || c->fd < 0)
				return 0;
			conn_flush(c);
			flushed = true;
			continue;
		}
		if (dn != NULL && (fn == NULL || dn->seq < fn->seq)) {
			struct done d;

			ring_pop(&c->done, &d);
			c->in_callback = true;
			if (d.req.cb != NULL)
				deliver_reply(c, &d);
			c->in_callback = false;
			bwp_frame_free(d.ans.env);
		} else {
			struct bwc_fire bf;

			/* lent: the callbacks may read (a failed send reads
			 * the daemon's last words), moving the queue. */
			if (fire_take(c, &c->lent, &c->lent_cap, &bf) != 0)
				return BWC_ENOMEM;
			c->in_callback = true;
			c->on_fire(c, &bf, c->on_fire_arg);
			c->in_callback = false;
		}
	}
}

int bwc_dispatch(struct bwc_client *c)
{
	bool was_open;
	int rc = 0, rrc;

	if (c == NULL)
		return BWC_EINVAL;
	if (c->in_callback)
		return fail(c, BWC_EBUSY,
			    "bwc_dispatch from inside a bwc_dispatch callback");
	was_open = c->fd >= 0;
	if (was_open) {
		conn_flush(c);
		if (c->fd >= 0)
			rc = conn_read(c);   /* only BWC_ENOMEM */
	}
	if (run_callbacks(c) != 0)
		rc = BWC_ENOMEM;
	/* The connection was lost: back in place (blocking, the give-up
	 * time at most), then the fires that came after the Hello, and the
	 * callbacks of what failed if reconnecting did. */
	if (rc == 0 && c->fd < 0 && reconnecting(c)) {
		rrc = resume(c, UINT64_MAX, false);
		rc = run_callbacks(c);
		if (rrc != 0)
			return rrc;
	}

	if (rc != 0)
		return rc;
	if (c->fd < 0)
		return was_open ? c->close_status : not_connected(c);
	if (c->on_fire != NULL && c->conn_role == BWC_ROLE_PRODUCER)
		return producer_has_no_fires(c, "a fire handler is set, "
					     "but bwc_dispatch runs");
	return 0;
}
