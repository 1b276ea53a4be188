/*
 * bitwheel-client.h - public interface of libbitwheel-client, the C client
 * of bitwheeld, the host-wide timer service.
 *
 * A process hands the daemon its timeouts over a Unix socket and the
 * daemon sends each one back when it comes due (a "fire").  The protocol
 * is proto/PROTOCOL.md; this library speaks it so callers don't have to.
 *
 *   #include <bitwheel-client.h>  // pkg-config --cflags --libs libbitwheel-client
 *
 *   struct bwc_client *c;
 *   struct bwc_timer t = { .key = 7, .when_ns = 1500000000,
 *                          .payload = "hi", .payload_len = 2 };
 *   struct bwc_fire f;
 *
 *   if (bwc_new(&c) != 0) ...out of memory...
 *   if (bwc_connect(c, NULL, "myprog-backup") != 0 ||
 *       bwc_schedule(c, &t, NULL) != 0 ||
 *       bwc_wait_fire(c, -1, &f) != 0)
 *           fprintf(stderr, "%s\n", bwc_errmsg(c));
 *   bwc_free(c);
 *
 * Two ways to drive a client, which may be mixed on one client object:
 *
 *   Blocking: bwc_connect, bwc_schedule, bwc_cancel, bwc_stats each send a
 *   request and wait for its reply (at most the client's timeout,
 *   bwc_set_timeout); bwc_wait_fire waits for the next fire.
 *
 *   Non-blocking, for callers with their own event loop: watch bwc_fd()
 *   for the events bwc_poll_events() asks for (level-triggered: poll,
 *   select, epoll without EPOLLET, libevent's default), pipeline requests
 *   with bwc_send_schedule / bwc_send_cancel / bwc_send_stats, which
 *   return without waiting, and call bwc_dispatch() when the fd is ready:
 *   it reads what is there and runs the reply callbacks and the fire
 *   handler (bwc_set_fire_handler).
 *
 * Callbacks run only inside bwc_dispatch(), never inside any other call.
 * Fires that arrive while a blocking call waits for its own reply, and
 * replies to non-blocking requests that arrive meanwhile, are queued in the
 * client and handed out later, in arrival order: fires by bwc_wait_fire()
 * or by bwc_dispatch() to the fire handler, replies by bwc_dispatch().  The
 * queue is bounded only by memory (about 80 bytes plus the payload per
 * fire); a caller that never takes its fires keeps them all.  If the queue
 * cannot grow, the call returns BWC_ENOMEM and the fire stays unread on the
 * socket rather than being dropped.
 *
 * Errors: every function that can fail returns 0 or a negative enum
 * bwc_error, and results come back through pointer arguments.
 * bwc_strerror() names a code; bwc_errmsg() gives the full message of the
 * last failure on a client, e.g. "cannot connect to
 * /run/bitwheel/bitwheeld.sock: No such file or directory".  When the
 * daemon refuses a request (BWC_ESERVER), bwc_server_error() gives its
 * ErrorCode (enum bwc_server_code) and the message includes the daemon's.
 * The library never exits, aborts, prints, or raises SIGPIPE in the
 * caller's process (sockets are written with send(MSG_NOSIGNAL)), and it
 * installs no signal handlers.
 *
 * Threads: a client object has no locking.  Use one client per thread, or
 * serialize every call on a client, bwc_errmsg() included (the next
 * failing call overwrites its buffer).  Distinct clients share nothing;
 * the library has no global state.
 *
 * Sessions and restarts: a client connects with a session name (a named
 * session, whose timers outlive the connection; fires due while detached
 * are queued by the daemon and delivered right after the next attach) or
 * without one (anonymous: the timers die with the connection).  A named
 * session is held by one connection at a time (BWC_SERVER_SESSION_BUSY).
 * When the connection breaks (BWC_ECLOSED, e.g. after a daemon restart),
 * bwc_reconnect() dials the same path and attaches to the same session
 * again.  Requests that were outstanding when it broke may or may not have
 * taken effect, and a daemon restarted without its journal has lost every
 * timer, so replay what you need (PROTOCOL.md, section 9):
 *
 *   while (bwc_reconnect(c) != 0)
 *           sleep(1);                      // or back off in your loop
 *   for (each timer the program still wants)
 *           bwc_schedule(c, &timer_with_replace_true, NULL);
 *
 * Schedule with .replace = true arms the key whether or not the earlier
 * attempt landed (and does not fail with DUPLICATE_KEY if the session kept
 * it), and a Cancel of a key that is already gone is harmless.
 * bwc_get_session_info() says whether the session was resumed.
 *
 * Times are nanoseconds of the host's CLOCK_MONOTONIC (absolute) or
 * nanosecond durations (relative), as in the protocol.
 *
 * Costs: a client is one socket plus buffers that grow to what it has in
 * flight (at most one frame, 64 KiB by default, of unparsed input; up to
 * 1 MiB of unwritten requests in non-blocking mode) and never shrink.  A
 * blocking request is one round trip to the daemon; a non-blocking one is
 * a pack into the output buffer, and pipelined ones share a send() (see
 * bwc_send_schedule).  Each received frame is decoded once and queued in
 * O(1); schedule and cancel replies and fires without allocating, other
 * frames with a few small allocations.
 */
#ifndef BITWHEEL_CLIENT_H
#define BITWHEEL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(BWC_BUILDING_LIBRARY) && defined(__GNUC__)
#define BWC_EXPORT __attribute__((visibility("default")))
#else
#define BWC_EXPORT
#endif

/* Where bitwheeld listens unless $BITWHEEL_SOCKET says otherwise. */
#define BWC_DEFAULT_SOCKET "/run/bitwheel/bitwheeld.sock"
/* The environment variable bwc_default_socket() reads. */
#define BWC_SOCKET_ENV "BITWHEEL_SOCKET"
/* bwc_set_timeout()'s initial value: 30 s. */
#define BWC_DEFAULT_TIMEOUT_NS 30000000000LL

/*
 * Errors: every function returns 0 or one of these.  The values are part
 * of the ABI and never change.
 */
enum bwc_error {
	BWC_OK = 0,
	BWC_EINVAL = -1,       /* a NULL or otherwise invalid argument (a bad
				  session name, a socket path too long) */
	BWC_ENOMEM = -2,       /* out of memory; the connection is intact   */
	BWC_EUNREACHABLE = -3, /* cannot connect: the socket is missing,
				  refuses connections, or is not accessible */
	BWC_ECLOSED = -4,      /* not connected: never connected, closed by
				  bwc_close, or the daemon closed the
				  connection; see bwc_reconnect()           */
	BWC_ETIMEDOUT = -5,    /* the wait ran out: no reply within the
				  client's timeout, or no fire within the
				  one given to bwc_wait_fire()              */
	BWC_EPROTO = -6,       /* the daemon broke the protocol; the client
				  closed the connection                     */
	BWC_ESERVER = -7,      /* the daemon answered with an error:
				  bwc_server_error() says which             */
	BWC_EAGAIN = -8,       /* bwc_send_*: too much output not yet
				  written; dispatch when the fd is writable
				  and retry                                 */
	BWC_EINTR = -9,        /* bwc_wait_fire: a signal arrived            */
	BWC_EBUSY = -10,       /* not allowed now: a blocking call or
				  bwc_dispatch from inside a callback, or
				  bwc_connect on a connected client         */
	BWC_ETOOBIG = -11,     /* a payload over the daemon's limit
				  (max_payload_bytes); nothing was sent     */
	BWC_EIO = -12,         /* a system call failed (socket, poll, recv);
				  the message has errno's text              */
};

/*
 * The daemon's ErrorCode values (PROTOCOL.md, section 8), which
 * bwc_server_error() and struct bwc_reply report.  A newer daemon may send
 * a code not listed here: treat it as a generic failure of the request.
 */
enum bwc_server_code {
	BWC_SERVER_UNSPECIFIED = 0,
	BWC_SERVER_BAD_FRAME = 1,
	BWC_SERVER_FRAME_TOO_LARGE = 2,
	BWC_SERVER_UNKNOWN_MESSAGE = 3,
	BWC_SERVER_BAD_REQUEST = 4,
	BWC_SERVER_BAD_VERSION = 5,
	BWC_SERVER_HELLO_REQUIRED = 6,
	BWC_SERVER_ALREADY_HELLO = 7,
	BWC_SERVER_PERMISSION_DENIED = 8,
	BWC_SERVER_SESSION_BUSY = 9,
	BWC_SERVER_TOO_MANY_CLIENTS = 10,
	BWC_SERVER_DUPLICATE_KEY = 11,
	BWC_SERVER_BAD_DEADLINE = 12,
	BWC_SERVER_PAYLOAD_TOO_LARGE = 13,
	BWC_SERVER_TOO_MANY_TIMERS = 14,
	BWC_SERVER_NO_MEMORY = 15,
	BWC_SERVER_SHUTTING_DOWN = 16,
	BWC_SERVER_INTERNAL = 17,
};

/* A static description of a bwc_error code. */
BWC_EXPORT const char *bwc_strerror(int err);
/* The protocol's name of a server code, e.g. "DUPLICATE_KEY"; "UNKNOWN"
 * for a code this library does not know. */
BWC_EXPORT const char *bwc_server_error_name(int code);
/* The library's release, e.g. "0.1.0". */
BWC_EXPORT const char *bwc_version(void);

/* $BITWHEEL_SOCKET when set and not empty, else BWC_DEFAULT_SOCKET.  The
 * string is the environment's or static: don't free it. */
BWC_EXPORT const char *bwc_default_socket(void);

/* CLOCK_MONOTONIC now, in nanoseconds: the clock of absolute deadlines. */
BWC_EXPORT uint64_t bwc_now_ns(void);

/*
 * Parse a duration: one or more <number><unit> terms, e.g. "250ms", "2s",
 * "1.5s", "1h30m".  Units: ns, us (or µs), ms, s, m, h.  The unit is
 * required ("250" alone is BWC_EINVAL).  Fractions are truncated to whole
 * nanoseconds.  BWC_EINVAL for malformed text or a sum beyond 2^64 - 1 ns.
 */
BWC_EXPORT int bwc_parse_duration(const char *text, uint64_t *out_ns);

/* ---- the client object -------------------------------------------------- */

struct bwc_client;

/* A new, unconnected client.  Only BWC_EINVAL (out NULL) or BWC_ENOMEM. */
BWC_EXPORT int bwc_new(struct bwc_client **out);
/*
 * Close the connection and free everything, including queued fires and
 * the payload of the last bwc_wait_fire().  Reply callbacks of outstanding
 * requests are not called.  NULL is a no-op.  Not from inside a callback.
 */
BWC_EXPORT void bwc_free(struct bwc_client *c);

/*
 * The message of the last call on c that failed, e.g. "daemon error
 * SESSION_BUSY: session \"backup\" is attached to another connection".
 * Never NULL; owned by c; overwritten by the next failure.
 */
BWC_EXPORT const char *bwc_errmsg(const struct bwc_client *c);
/*
 * The daemon's ErrorCode behind the last failure when it was BWC_ESERVER
 * (a request's error reply, or an error that closed the connection), and
 * BWC_SERVER_UNSPECIFIED (0) after any other failure.
 */
BWC_EXPORT int bwc_server_error(const struct bwc_client *c);

/*
 * How long blocking calls wait for a reply (bwc_connect and bwc_reconnect
 * for the socket and the Hello, bwc_schedule, bwc_cancel, bwc_stats);
 * negative: forever.  Default BWC_DEFAULT_TIMEOUT_NS.  A request that
 * times out stays outstanding: the daemon may still carry it out, and its
 * reply is discarded when it arrives.
 */
BWC_EXPORT int bwc_set_timeout(struct bwc_client *c, int64_t timeout_ns);

/*
 * Connect to the daemon at path (NULL: bwc_default_socket()) and open a
 * session: session NULL for an anonymous one, or a name of 1 to 64 bytes
 * of [A-Za-z0-9_.:@-] to create or attach to (PROTOCOL.md, section 7;
 * prefix it with your program's name, names are global).  Blocks until the
 * daemon's Hello reply.  Remembers path and session for bwc_reconnect().
 *   BWC_EINVAL        bad session name, path longer than a socket address
 *   BWC_EUNREACHABLE  connect() failed (errno's text in the message)
 *   BWC_ESERVER       the daemon refused the Hello (BAD_VERSION,
 *                     PERMISSION_DENIED, SESSION_BUSY, TOO_MANY_CLIENTS,
 *                     SHUTTING_DOWN, ...); the client is not connected
 *   BWC_EBUSY         already connected (bwc_close first)
 *   BWC_ECLOSED, BWC_ETIMEDOUT, BWC_EPROTO, BWC_EIO, BWC_ENOMEM
 * Fires the daemon had queued for a named session arrive right after the
 * Hello; they are queued in the client for bwc_wait_fire/bwc_dispatch.
 */
BWC_EXPORT int bwc_connect(struct bwc_client *c, const char *path,
			   const char *session);
/*
 * Close the current connection if any and connect again with the path and
 * session of the last bwc_connect(): the one call to reattach after the
 * daemon closed the connection or restarted.  Outstanding non-blocking
 * requests fail with BWC_ECLOSED (their callbacks run at the next
 * bwc_dispatch); fires already queued in the client stay queued.  The fd
 * changes.  Errors as bwc_connect(), and BWC_EINVAL if bwc_connect() was
 * never called.  See the top of this file for what to replay.
 */
BWC_EXPORT int bwc_reconnect(struct bwc_client *c);
/*
 * Close the connection (an anonymous session's timers die with it; a named
 * session is detached and keeps firing into its queue), after writing what
 * the socket takes of the requests not yet written.  Outstanding
 * non-blocking requests fail with BWC_ECLOSED at the next bwc_dispatch.
 * Queued fires stay.  No-op when not connected.
 */
BWC_EXPORT void bwc_close(struct bwc_client *c);

/* The daemon's limits in force (HelloReply.limits). */
struct bwc_limits {
	uint32_t max_frame_bytes;   /* largest frame body, either direction */
	uint32_t max_payload_bytes; /* largest Schedule payload            */
	uint64_t max_timers;        /* pending timers per session          */
	uint64_t max_queued;        /* fires queued for a detached session */
	uint64_t session_linger_ns; /* how long a detached session lives   */
	uint64_t max_output_bytes;  /* unread output before a disconnect   */
	uint64_t max_clients;       /* connections the daemon accepts      */
};

/* What the daemon said when this connection opened its session. */
struct bwc_session_info {
	char daemon_version[32];          /* e.g. "0.1.0", truncated to fit */
	uint64_t oneshot_resolution_ns;   /* the oneshot lane's tick        */
	uint64_t periodic_resolution_ns;  /* the periodic lane's tick       */
	struct bwc_limits limits;
	bool resumed;      /* an existing named session was attached        */
	uint64_t timers;   /* pending timers the session held at attach     */
	uint64_t queued;   /* queued fires that followed the Hello reply    */
	uint64_t dropped;  /* fires lost to the daemon's full queue while
			      the session was detached                      */
};

/* The current connection's session: BWC_ECLOSED when not connected. */
BWC_EXPORT int bwc_get_session_info(const struct bwc_client *c,
				    struct bwc_session_info *out);

/* ---- requests --------------------------------------------------------- */

/* A timer to arm.  Zero-initialise it and set what you need. */
struct bwc_timer {
	uint64_t key;          /* unique among the session's pending timers */
	bool absolute;         /* false: when_ns is a delay from when the
				  daemon reads the request; true: a
				  CLOCK_MONOTONIC deadline (a past one fires
				  at once)                                  */
	uint64_t when_ns;
	uint64_t period_ns;    /* 0: a oneshot timer; > 0: periodic, fired
				  at when, when + period, ... until
				  cancelled                                 */
	const void *payload;   /* NULL: none (Fired carries none); else
				  payload_len bytes, 0 included, handed back
				  byte for byte in every fire               */
	size_t payload_len;
	bool replace;          /* a pending key is replaced instead of
				  failing with BWC_SERVER_DUPLICATE_KEY     */
};

/* The daemon's acceptance of a timer. */
struct bwc_scheduled {
	uint64_t deadline_ns;  /* the first deadline, absolute              */
	bool replaced;         /* a pending timer with this key was replaced */
};

/* One lane's counters, from the daemon's start. */
struct bwc_lane_stats {
	uint64_t pending;      /* timers waiting now                        */
	uint64_t overflow;     /* of those, in the lane's overflow store    */
	uint64_t inserted;
	uint64_t cancelled;
	uint64_t fired;
	uint64_t lost;         /* accepted but dropped by the wheel         */
};

/* Daemon-wide counters (not the session's). */
struct bwc_stats {
	struct bwc_lane_stats oneshot;
	struct bwc_lane_stats periodic;
	uint64_t clients;      /* connections now                           */
	uint64_t sessions;     /* named sessions, attached or not           */
	uint64_t queued;       /* fires waiting in detached sessions' queues */
	uint64_t dropped;      /* fires dropped from full queues, ever       */
	uint64_t uptime_ns;
	uint64_t memory_bytes;
};

/*
 * Blocking requests.  Each waits for its reply, queueing whatever else
 * arrives meanwhile, and fails with BWC_ESERVER when the daemon refuses it
 * (bwc_server_error(): DUPLICATE_KEY, BAD_DEADLINE, TOO_MANY_TIMERS, ...),
 * BWC_ECLOSED when the connection ends first (the request may or may not
 * have taken effect), BWC_ETIMEDOUT, BWC_EPROTO, BWC_ENOMEM, BWC_EIO, and
 * BWC_EBUSY from inside a callback.
 */

/* Arm a timer.  out may be NULL.  Also BWC_EINVAL (payload NULL with a
 * length) and BWC_ETOOBIG (payload over the daemon's limit). */
BWC_EXPORT int bwc_schedule(struct bwc_client *c, const struct bwc_timer *t,
			    struct bwc_scheduled *out);
/* Disarm a timer.  *pending (may be NULL): true if it was pending and no
 * fire for it follows; false if no timer had this key, which is not an
 * error. */
BWC_EXPORT int bwc_cancel(struct bwc_client *c, uint64_t key, bool *pending);
/* The daemon's counters. */
BWC_EXPORT int bwc_stats(struct bwc_client *c, struct bwc_stats *out);

/* ---- fires -------------------------------------------------------------- */

/* A timer that came due. */
struct bwc_fire {
	uint64_t key;
	const void *payload;   /* NULL when the Schedule had none; owned by
				  the client, see bwc_wait_fire()           */
	size_t payload_len;
	uint64_t deadline_ns;  /* the deadline this fire was for            */
	uint64_t fired_ns;     /* when the daemon fired it, >= deadline_ns  */
	uint64_t fire_count;   /* periodic: 1 for the first; oneshot: 0     */
	bool late;             /* due while the daemon was not running (a
				  timer restored from its journal)          */
	bool redelivered;      /* may repeat a fire received before the
				  daemon restarted: same key, deadline_ns
				  and fire_count (PROTOCOL.md section 9)    */
};

/*
 * The next fire: the oldest queued in the client, or the next to arrive
 * within timeout_ns (negative: forever; 0: only what the socket already
 * holds).  out->payload stays valid until the next bwc_wait_fire() or
 * bwc_free() on c.  Fires queued before the connection closed are still
 * handed out after it closed.
 *   BWC_ETIMEDOUT  none within timeout_ns
 *   BWC_EINTR      a signal interrupted the wait (call again to resume)
 *   BWC_ECLOSED    none queued and not connected (or the daemon closed
 *                  the connection during the wait); also BWC_EPROTO,
 *                  BWC_ESERVER (a connection-level error), BWC_EIO,
 *                  BWC_ENOMEM, BWC_EBUSY from inside a callback
 */
BWC_EXPORT int bwc_wait_fire(struct bwc_client *c, int64_t timeout_ns,
			     struct bwc_fire *out);

/* ---- non-blocking mode ------------------------------------------------ */

/* Which request a struct bwc_reply answers. */
enum bwc_request_kind {
	BWC_REQUEST_SCHEDULE = 1,
	BWC_REQUEST_CANCEL = 2,
	BWC_REQUEST_STATS = 3,
};

/* The outcome of a non-blocking request, valid during its callback. */
struct bwc_reply {
	enum bwc_request_kind request;
	uint64_t key;          /* the key a Schedule or Cancel named        */
	int status;            /* 0; BWC_ESERVER (the daemon refused it); or
				  BWC_ECLOSED (the connection ended first:
				  it may or may not have taken effect)      */
	int server_error;      /* BWC_ESERVER: the daemon's ErrorCode       */
	const char *message;   /* BWC_ESERVER: the daemon's message; else "" */
	struct bwc_scheduled scheduled; /* BWC_REQUEST_SCHEDULE, status 0   */
	bool pending;          /* BWC_REQUEST_CANCEL, status 0              */
	const struct bwc_stats *stats;  /* BWC_REQUEST_STATS, status 0      */
};

typedef void (*bwc_reply_fn)(struct bwc_client *c,
			     const struct bwc_reply *reply, void *arg);
/* fire->payload is valid during the call only. */
typedef void (*bwc_fire_fn)(struct bwc_client *c,
			    const struct bwc_fire *fire, void *arg);

/*
 * Where bwc_dispatch() gets its fires' callback; fn NULL (the default)
 * leaves fires queued for bwc_wait_fire().
 */
BWC_EXPORT void bwc_set_fire_handler(struct bwc_client *c, bwc_fire_fn fn,
				     void *arg);

/* The connection's socket, -1 when not connected.  It changes on every
 * connect; the client owns it (don't read, write or close it). */
BWC_EXPORT int bwc_fd(const struct bwc_client *c);
/*
 * The poll(2) events to wait for on bwc_fd(): POLLIN always, and POLLOUT
 * while requests are waiting to be written.  0 when not connected.
 */
BWC_EXPORT short bwc_poll_events(const struct bwc_client *c);

/*
 * Queue a request without waiting for the reply; its callback (cb may be
 * NULL: the reply is consumed unseen) runs from a later bwc_dispatch()
 * with a struct bwc_reply.  Replies come in request order.  May be called
 * from inside callbacks.  The request is written at once when no other is
 * outstanding; behind outstanding ones it waits, with bwc_poll_events()
 * asking for POLLOUT, for the next bwc_dispatch() (or blocking call, or
 * bwc_close, or 16 KiB of requests queued), which writes all that queued
 * in one go: a pipeline costs one send() per batch rather than per
 * request.
 *   BWC_EAGAIN   over 1 MiB of requests not yet written: dispatch when
 *                the fd is writable, then retry
 *   BWC_ECLOSED, BWC_ENOMEM; bwc_send_schedule also BWC_EINVAL,
 *   BWC_ETOOBIG as bwc_schedule()
 */
BWC_EXPORT int bwc_send_schedule(struct bwc_client *c,
				 const struct bwc_timer *t, bwc_reply_fn cb,
				 void *arg);
BWC_EXPORT int bwc_send_cancel(struct bwc_client *c, uint64_t key,
			       bwc_reply_fn cb, void *arg);
BWC_EXPORT int bwc_send_stats(struct bwc_client *c, bwc_reply_fn cb,
			      void *arg);

/*
 * Write pending requests, read what the socket holds (without blocking),
 * and run the callbacks for everything received, in arrival order: reply
 * callbacks, and the fire handler for fires if one is set.  Callbacks may
 * call bwc_send_*, bwc_close, and the getters; not the blocking calls,
 * bwc_dispatch, bwc_reconnect or bwc_free (BWC_EBUSY, or undefined for
 * bwc_free).
 *   0            the connection is open (nothing may have happened)
 *   BWC_ECLOSED  not connected, or the daemon closed the connection;
 *                everything received before was delivered first, and
 *                outstanding requests' callbacks got BWC_ECLOSED
 *   BWC_EPROTO, BWC_ESERVER, BWC_EIO: the connection closed for that
 *                reason during this call (same delivery as BWC_ECLOSED)
 *   BWC_ENOMEM   a frame could not be queued, or a fire handed out;
 *                call again later
 *   BWC_EBUSY    from inside a callback
 */
BWC_EXPORT int bwc_dispatch(struct bwc_client *c);

#ifdef __cplusplus
}
#endif

#endif /* BITWHEEL_CLIENT_H */
