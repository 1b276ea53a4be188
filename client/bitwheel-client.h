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
 *   bwc_set_role(c, BWC_ROLE_CONSUMER);   // this program takes the fires
 *   if (bwc_connect(c, NULL, "myprog-backup") != 0 ||
 *       bwc_schedule(c, &t, NULL) != 0 ||
 *       bwc_wait_fire(c, -1, &f) != 0 ||
 *       bwc_ack(c, &f, true, NULL) != 0)   // handled: the daemon forgets it
 *           fprintf(stderr, "%s\n", bwc_errmsg(c));
 *   bwc_free(c);
 *
 * Sessions, roles and acknowledgement (protocol version 2): a client
 * connects with a session name (a named session, whose timers outlive
 * the connection: fires due while no consumer is attached wait in the
 * session's queue) or without one (anonymous: the timers die with the
 * connection).  Names are per uid: each uid has a namespace of its own,
 * so two users' "orders" are two sessions, and nobody can see, attach to
 * or squat on another user's.  A process works in its own uid's namespace;
 * root may reach another uid's session (e.g. to drain a stuck user's
 * queue) with bwc_set_owner_uid(), and the session stays that uid's.  A
 * named session is shared: any number of connections (of its uid, or
 * root) may be attached at once, each in one of two roles, chosen with
 * bwc_set_role() before bwc_connect():
 *
 *   producer  schedules, cancels, asks for stats, and never receives a
 *             fire, so a program that only schedules cannot lose one by
 *             not reading.  The default for a named session.
 *   consumer  may do the same and also receives the session's fires, each
 *             fire going to exactly one of the session's consumers
 *             (round-robin among those with room).  The default, and the
 *             only role, for an anonymous session.
 *
 * A consumer has a window (bwc_set_window, default 256): the most fires
 * in flight to it at once, received but not acknowledged.  In a named
 * session a consumer acknowledges each fire once it has handled it, with
 * bwc_ack() (blocking: returns once the daemon holds the acknowledgement
 * as durably as its --fsync makes it) or bwc_send_ack() (non-blocking, no
 * reply).  Cumulative acks cover every fire up to the one named, so one
 * ack per batch is enough.  A fire not yet acknowledged when its
 * connection ends, or held longer than the ack timeout
 * (bwc_set_ack_timeout), is taken back by the daemon and delivered again,
 * to this or another consumer, with bwc_fire.redelivered set.  The
 * guarantee: a fire of a named session is lost only once it has been
 * acknowledged; until then it is pending, queued or in flight, whatever
 * happens to the consumer.  The price is at-least-once: a handler that
 * must act exactly once drops repeats by key, deadline_ns and fire_count.
 *
 * Auto-ack (bwc_set_ack_mode(c, BWC_ACK_AUTO), the default for an
 * anonymous session) makes each fire done as soon as the daemon has
 * written it to the socket: no acks, version 1's at-most-once delivery (a
 * fire written to a connection that then breaks is lost).
 *
 *   struct bwc_fire f;                     // a consumer, manual acks
 *
 *   bwc_set_role(c, BWC_ROLE_CONSUMER);
 *   bwc_connect(c, NULL, "myprog-backup");
 *   while (bwc_wait_fire(c, -1, &f) == 0) {
 *           handle(&f);                    // durably, then:
 *           bwc_send_ack(c, &f, true);
 *   }
 *
 * Two ways to drive a client, which may be mixed on one client object:
 *
 *   Blocking: bwc_connect, bwc_schedule, bwc_cancel, bwc_stats, bwc_ack
 *   (and bwc_release, bwc_touch, bwc_set_policy, bwc_kick: "fires that
 *   fail", at the end of this file) each send a request and wait for its
 *   reply (at most the client's
 *   timeout, bwc_set_timeout); bwc_wait_fire waits for the next fire.
 *
 *   Non-blocking, for callers with their own event loop: watch bwc_fd()
 *   for the events bwc_poll_events() asks for (level-triggered: poll,
 *   select, epoll without EPOLLET, libevent's default), pipeline requests
 *   with bwc_send_schedule / bwc_send_cancel / bwc_send_stats /
 *   bwc_send_ack, which return without waiting, and call bwc_dispatch()
 *   when the fd is ready: it reads what is there and runs the reply
 *   callbacks and the fire handler (bwc_set_fire_handler).  A consumer's
 *   fire handler acknowledges nothing by itself (no hidden ack): the
 *   idiom is to handle each fire in the handler, keep a copy of the last
 *   one, and after bwc_dispatch() returns call bwc_send_ack(c, &last,
 *   true) once for the batch (bwc_send_ack from inside the handler works
 *   too, and costs no extra send(): acks sent from callbacks go out
 *   together when bwc_dispatch ends).
 *
 * Callbacks run only inside bwc_dispatch(), never inside any other call.
 * Fires that arrive while a blocking call waits for its own reply, and
 * replies to non-blocking requests that arrive meanwhile, are queued in the
 * client and handed out later, in arrival order: fires by bwc_wait_fire()
 * or by bwc_dispatch() to the fire handler, replies by bwc_dispatch().  The
 * queue is bounded by the window for a manual-ack consumer, otherwise only
 * by memory (about 100 bytes plus the payload per fire); a caller that
 * never takes its fires keeps them all.  If the queue cannot grow, the
 * call returns BWC_ENOMEM and the fire stays unread on the socket rather
 * than being dropped.
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
 * Riding through a restart: a named session outlives its connection (and,
 * with the daemon's --state-dir, the daemon), so by default the library
 * reattaches by itself when the daemon ends the connection: on EOF or a
 * reset (a crash, an upgrade, a slow-consumer cut), or on the
 * SHUTTING_DOWN error a daemon sends when it stops.  It dials the same
 * path again with bounded exponential backoff (bwc_set_reconnect_backoff:
 * the first attempt 50 ms after the loss, each wait twice the last up to
 * 2 s, each with random jitter down to half, so that many clients do not
 * come back in step; refused connections, a missing socket, a Hello
 * that gets no answer and one refused for now (SHUTTING_DOWN,
 * TOO_MANY_CLIENTS, NO_MEMORY, STORAGE_UNAVAILABLE, INTERNAL) are
 * retried) and sends the same Hello: session, owner uid, role, window,
 * ack timeout, ack mode, coalescing.  The next call that waits for the
 * daemon (a blocking call, bwc_wait_fire, bwc_dispatch) does the
 * reconnecting and then goes on as if nothing had happened, and
 * non-blocking requests made meanwhile wait for the new connection, so a
 * program that only makes calls does not see the restart:
 *
 *   - requests without a reply are sent again on the new connection, in
 *     their order, where that is safe: one never written whole to the
 *     socket, or any at all when the daemon said SHUTTING_DOWN (it reads
 *     nothing more once it says it, and answers what it read first), and
 *     otherwise Cancel, Stats, a listing's first page (a listing cut
 *     after it starts over) and a Schedule with .replace = true, which
 *     mean the same done twice (the reply then describes the repeat: a
 *     Cancel whose first attempt landed says *pending false, a replace
 *     whose first attempt landed says replaced).  Any other Schedule
 *     (written, and the daemon crashed or was killed before answering)
 *     fails with BWC_EUNKNOWN, naming its key: it may have landed;
 *   - a consumer's fires that were received but not handed to the caller
 *     are dropped (manual acks: the daemon takes every unacknowledged fire
 *     back and delivers it again, marked redelivered; auto-ack fires stay
 *     queued, being done already);
 *   - acks of fires from the old connection are not sent on the new one
 *     (delivery numbers are per connection): bwc_ack and bwc_send_ack
 *     return 0 and complete nothing (*acked 0), as for a fire the ack
 *     timeout took back; the fire comes again, marked redelivered;
 *   - the fd changes (bwc_fd): an event loop watches the new one after
 *     each bwc_dispatch, which reconnects inside (blocking, at most the
 *     give-up time) when it finds the connection gone;
 *   - blocking calls count the reconnecting in their timeout, and a
 *     bwc_wait_fire in the timeout it was given: one that runs out
 *     returns BWC_ETIMEDOUT and the next call picks the backoff up where
 *     it was.
 *
 * If the daemon does not take the session back within the give-up time
 * (60 s by default, counted from the loss), the call returns BWC_EGAVEUP,
 * requests still waiting fail with it, and the client stays closed until
 * bwc_reconnect.  A refusal that waiting cannot cure (BWC_EPEER, a Hello
 * refused with PERMISSION_DENIED, BAD_VERSION, BAD_REQUEST, OVER_BUDGET;
 * BWC_EPROTO) ends the reconnecting at once with that error.  An
 * anonymous session cannot come back (its timers ended with its
 * connection): its calls get BWC_EANONYMOUS instead.  A daemon restarted
 * without --state-dir has lost every timer; bwc_get_session_info's
 * resumed then reads false.
 *
 * bwc_set_reconnect(c, false) turns all this off, and the library behaves
 * as it did before it could reconnect: the call that finds the connection
 * ended returns BWC_ECLOSED (EOF, reset) or BWC_ESERVER with
 * bwc_server_error() BWC_SERVER_SHUTTING_DOWN (a daemon that stops
 * cleanly), later calls BWC_ECLOSED, and the caller reconnects with
 * bwc_reconnect(), which dials the same path and session once with the
 * same settings.  What happens to fires on the way is as above, except
 * that acks of the old connection's fires are refused with BWC_ESTALE
 * (bwc_fire.connection says which connection a fire came on).  Requests
 * outstanding when the connection broke may or may not have taken
 * effect, so replay what you need (PROTOCOL.md, section 8):
 *
 *   bwc_set_reconnect(c, false);
 *   ...
 *   rc = bwc_schedule(c, &t, NULL);
 *   if (rc == BWC_ECLOSED ||
 *       (rc == BWC_ESERVER &&
 *        bwc_server_error(c) == BWC_SERVER_SHUTTING_DOWN)) {
 *           while (bwc_reconnect(c) != 0)
 *                   sleep(1);              // or back off in your loop
 *           for (each timer the program still wants)
 *                   bwc_schedule(c, &timer_with_replace_true, NULL);
 *   }
 *
 * Schedule with .replace = true arms the key whether or not the earlier
 * attempt landed (and does not fail with DUPLICATE_KEY if the session kept
 * it), and a Cancel of a key that is already gone is harmless.
 *
 * Times are nanoseconds of the host's CLOCK_MONOTONIC (absolute) or
 * nanosecond durations (relative), as in the protocol.
 *
 * ABI (libbitwheel-client.so.2): every export is versioned
 * (BITWHEEL_CLIENT_2, the script client/libbitwheel-client.map); the
 * BWC_VERSION_* macros of bitwheel-client-version.h, included below, name
 * the release of these headers, bwc_version() the library's at run time.
 * Functions and enum values are added compatibly.  Structs grow by one of
 * three rules, each stated at the struct:
 *  - filled by the library into the caller's storage: a fixed size for
 *    good, with a reserved tail that later fields take in order, read as
 *    0 from an older library or daemon (struct bwc_session_info with its
 *    struct bwc_limits and struct bwc_policy, struct bwc_stats, struct
 *    bwc_metrics, struct bwc_histogram, struct bwc_process, struct
 *    bwc_released, and the listings' entries);
 *  - handed out by the library by pointer only (struct bwc_reply, struct
 *    bwc_calendar): grows at its tail;
 *  - the rest (struct bwc_timer, which the caller zero-initialises, and
 *    struct bwc_scheduled, struct bwc_fire with its struct
 *    bwc_dead_letter, struct bwc_lane_stats): a field added or changed is
 *    a new SONAME once SONAME 2 is released (no release has shipped it
 *    yet, see client/libbitwheel-client.map).  Before that, struct
 *    bwc_fire took deliveries, dead_letter and due_realtime_ns, struct
 *    bwc_timer realtime_ns, calendar, jitter_ns, jitter_fixed,
 *    has_misfire_grace, misfire_grace_ns and clock, and struct
 *    bwc_session_entry and struct bwc_timer_entry (calendar, jitter,
 *    grace, clock) grew.
 *
 * Costs: a client is one socket plus buffers that grow to what it has in
 * flight (at most one frame, 64 KiB by default, of unparsed input; up to
 * 1 MiB of unwritten requests in non-blocking mode; for a named session
 * that reconnects by itself, the frames of the requests awaiting their
 * replies, kept to send again) and never shrink.  A
 * blocking request is one round trip to the daemon; a non-blocking one is
 * a pack into the output buffer, and pipelined ones share a send() (see
 * bwc_send_schedule).  Each received frame is decoded once and queued in
 * O(1); schedule, cancel and ack replies and fires without allocating,
 * other frames with a few small allocations.
 */
#ifndef BITWHEEL_CLIENT_H
#define BITWHEEL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bitwheel-client-version.h"

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
/* The environment variable that names the daemon's user when
 * bwc_set_daemon_user() did not, and the name used when neither does
 * (bitwheeld.service's DynamicUser=, named after the unit). */
#define BWC_DAEMON_USER_ENV "BITWHEEL_DAEMON_USER"
#define BWC_DEFAULT_DAEMON_USER "bitwheeld"
/* bwc_set_timeout()'s initial value: 30 s. */
#define BWC_DEFAULT_TIMEOUT_NS 30000000000LL

/*
 * Errors: every function returns 0 or one of these.  The values are part
 * of the ABI and never change.
 */
enum bwc_error {
	BWC_OK = 0,
	BWC_EINVAL = -1,       /* a NULL or otherwise invalid argument (a bad
				  session name, a socket path too long, an
				  owner uid without a session name)         */
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
	BWC_ESTALE = -13,      /* bwc_ack/bwc_send_ack: the fire came on an
				  earlier connection; the daemon took it
				  back and will deliver it again, marked
				  redelivered                               */
	BWC_EROLE = -14,       /* not for this connection's role: waiting
				  for fires or acknowledging on a producer
				  (bwc_set_role(c, BWC_ROLE_CONSUMER)), or a
				  producer without a session name           */
	BWC_EPEER = -15,       /* connect: the process listening on the
				  socket is not one this client trusts to
				  be bitwheeld (see bwc_set_daemon_user);
				  nothing was sent to it                    */
	BWC_EUNKNOWN = -16,    /* unknown outcome: the connection ended
				  after the request was written and before
				  its reply, and the request was not safe
				  to repeat (a Schedule without replace):
				  it may or may not have taken effect; the
				  message names the key (see "Riding
				  through a restart" above)                 */
	BWC_EANONYMOUS = -17,  /* the daemon ended an anonymous session's
				  connection (it stopped, restarted or
				  crashed): the session's timers ended with
				  it, so it cannot be resumed; bwc_reconnect
				  starts a new one                          */
	BWC_EGAVEUP = -18,     /* reconnecting gave up: the daemon did not
				  take the session back within the give-up
				  time (bwc_set_reconnect_backoff); the
				  message has the last attempt's error      */
};

/*
 * The daemon's ErrorCode values (PROTOCOL.md, section 9), which
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
	BWC_SERVER_PERMISSION_DENIED = 8, /* a caller other than root named
					     another uid's namespace: at
					     Hello (bwc_set_owner_uid; the
					     connection is closed), or in a
					     listing (it stays open)        */
	BWC_SERVER_SESSION_BUSY = 9,      /* version 1 only: never sent now */
	BWC_SERVER_TOO_MANY_CLIENTS = 10,
	BWC_SERVER_DUPLICATE_KEY = 11,
	BWC_SERVER_BAD_DEADLINE = 12,
	BWC_SERVER_PAYLOAD_TOO_LARGE = 13,
	BWC_SERVER_TOO_MANY_TIMERS = 14,
	BWC_SERVER_NO_MEMORY = 15,
	BWC_SERVER_SHUTTING_DOWN = 16,
	BWC_SERVER_INTERNAL = 17,
	BWC_SERVER_OVER_BUDGET = 18,      /* the caller's uid is at a budget:
					     named sessions (Hello, which
					     closes) or periodic fire rate
					     (Schedule)                     */
	BWC_SERVER_STORAGE_UNAVAILABLE = 19, /* the daemon cannot write its
					     state directory: a change to a
					     named session was refused;
					     retry later                    */
	BWC_SERVER_UNKNOWN_SESSION = 20,  /* bwc_list_timers: no such
					     session in the namespace       */
	BWC_SERVER_HOLD_LIMIT = 21,       /* bwc_touch: the new ack deadline
					     would pass the fire's hand-out
					     + limits.max_hold_ns (12 h by
					     default); the fire keeps its
					     deadline: acknowledge or
					     release it                     */
	BWC_SERVER_BAD_CALENDAR = 22,     /* a calendar spec the daemon
					     refuses (its syntax, an unknown
					     time zone): the message says
					     which                          */
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
 * "1.5s", "1h30m", "2d".  Units: ns, us (or µs), ms, s, m, h, d.  The unit is
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
 * DUPLICATE_KEY: key 7 is pending".
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
 * for the socket and the Hello, bwc_schedule, bwc_cancel, bwc_stats),
 * reconnecting included; negative: forever.  Default
 * BWC_DEFAULT_TIMEOUT_NS.  A request that times out stays outstanding:
 * the daemon may still carry it out, and its reply is discarded when it
 * arrives (if the connection ends meanwhile it is not sent again).
 */
BWC_EXPORT int bwc_set_timeout(struct bwc_client *c, int64_t timeout_ns);

/*
 * Reconnecting by itself when the daemon ends a named session's
 * connection (see "Riding through a restart" at the top): true, the
 * default, or false for the library's behaviour before it could: the call
 * that finds the connection ended fails (BWC_ECLOSED, or BWC_ESERVER with
 * SHUTTING_DOWN), and bwc_reconnect() is the caller's to call.  Takes
 * effect at once; turning it off while reconnecting fails what waits to
 * be sent again with BWC_ECLOSED.
 */
BWC_EXPORT int bwc_set_reconnect(struct bwc_client *c, bool enable);

/* bwc_set_reconnect_backoff()'s initial values. */
#define BWC_DEFAULT_RECONNECT_INITIAL_NS 50000000LL    /* 50 ms */
#define BWC_DEFAULT_RECONNECT_MAX_NS 2000000000LL      /* 2 s   */
#define BWC_DEFAULT_RECONNECT_GIVE_UP_NS 60000000000LL /* 60 s  */
/* give_up_ns: never give up. */
#define BWC_RECONNECT_FOREVER UINT64_MAX
/*
 * The reconnecting's pace: the first attempt initial_ns after the loss,
 * then each wait twice the one before, at most max_ns, each shortened by
 * a random part of up to half (jitter); no attempt is started once
 * give_up_ns have passed since the loss (a Hello still in progress then
 * is cut short), and the call returns BWC_EGAVEUP.  BWC_EINVAL unless 0 <
 * initial_ns <= max_ns and give_up_ns > 0.
 */
BWC_EXPORT int bwc_set_reconnect_backoff(struct bwc_client *c,
					 uint64_t initial_ns, uint64_t max_ns,
					 uint64_t give_up_ns);

/* ---- what the connection is (set before bwc_connect) ------------------ */

/*
 * These settings are sent in the Hello of the next bwc_connect() or
 * bwc_reconnect() and remembered for every later one; changing them while
 * connected changes nothing until then.  Each is sent only when set (not
 * its DEFAULT / 0 / -1), so the daemon's defaults apply otherwise; the
 * consumer options (window, ack timeout, ack mode) only for a consumer,
 * and are ignored for a producer; the owner uid only with a session name.
 * bwc_get_session_info() says what is in force.
 */

/* A connection's role in its session (see the top of this file). */
enum bwc_role {
	BWC_ROLE_DEFAULT = 0,   /* named session: producer; anonymous: consumer */
	BWC_ROLE_PRODUCER = 1,  /* schedules, never receives fires; named
				   sessions only (an anonymous producer is
				   BWC_EINVAL at bwc_connect)              */
	BWC_ROLE_CONSUMER = 2,  /* also receives the session's fires      */
};

/* How a consumer's fires become done. */
enum bwc_ack_mode {
	BWC_ACK_DEFAULT = 0,    /* named session: manual; anonymous: auto    */
	BWC_ACK_MANUAL = 1,     /* bwc_ack / bwc_send_ack: at least once     */
	BWC_ACK_AUTO = 2,       /* done once written to the socket: at most
				   once, and nothing to acknowledge          */
};

/* BWC_EINVAL for a value outside the enum. */
BWC_EXPORT int bwc_set_role(struct bwc_client *c, enum bwc_role role);
/* Consumers: the most fires in flight (received, unacknowledged) at once,
 * 1 to the daemon's limits.max_window (4096 by default; more is refused
 * by the daemon at connect, BWC_ESERVER BAD_REQUEST); 0: the daemon's
 * default, 256. */
BWC_EXPORT int bwc_set_window(struct bwc_client *c, uint32_t window);
/* Consumers: a fire held this long without an ack is taken back and
 * delivered again (to this or another consumer), marked redelivered; an
 * ack of it afterwards completes nothing.  0: never (the default). */
BWC_EXPORT int bwc_set_ack_timeout(struct bwc_client *c, uint64_t ns);
/* Consumers: BWC_EINVAL for a value outside the enum. */
BWC_EXPORT int bwc_set_ack_mode(struct bwc_client *c, enum bwc_ack_mode mode);
/*
 * Consumers: true lets the daemon hold the session's fires within their
 * leeways (bwc_schedule_leeway) and send those whose windows overlap
 * together, at the latest moment within every one's window, so that a
 * process with many tolerant timers wakes once instead of many times
 * (PROTOCOL.md, "Coalesced delivery").  Never early, never later than a
 * fire's leeway allows; fires of timers without leeway (a oneshot's
 * default) are not held.  It holds while every consumer attached to the
 * session asked for it.  Default false.
 */
BWC_EXPORT int bwc_set_coalesce(struct bwc_client *c, bool coalesce);
/*
 * Named sessions: the uid whose namespace the session name is in
 * (PROTOCOL.md, section 7).  Negative (e.g. -1, the default): the
 * caller's own, and nothing is sent.  Only root may name another uid: it
 * then creates or attaches to that uid's session, which stays that uid's
 * (bwc_session_info.owner_uid says whose); anyone else naming a uid not
 * its own gets BWC_ESERVER with BWC_SERVER_PERMISSION_DENIED at connect.
 * BWC_EINVAL for a uid above UINT32_MAX; an owner set for an anonymous
 * session (session NULL) is BWC_EINVAL at bwc_connect/bwc_reconnect.
 */
BWC_EXPORT int bwc_set_owner_uid(struct bwc_client *c, int64_t uid);

/*
 * Who may be listening.  A socket path proves nothing about the process
 * behind it: anyone who could create the socket (or its directory) first
 * can pose as the daemon, take every timer and payload sent to it, and
 * answer with invented fires.  So every connect and reconnect reads the
 * listener's credentials (SO_PEERCRED: the process that called listen())
 * before sending a byte, and talks only to a listener whose uid is
 *   - root: socket activation (bitwheeld.socket) makes systemd, PID 1,
 *     the listener, and root could read the caller's timers anyway;
 *   - the caller's effective uid: a user trusts a daemon of its own
 *     (tests, a per-user daemon);
 *   - the daemon's user, named here by user name or decimal uid; NULL
 *     (the default) means $BITWHEEL_DAEMON_USER when set and not empty,
 *     else "bitwheeld" (the unit's DynamicUser=, which nss-systemd
 *     resolves while the service runs).  A name is looked up at each
 *     connect (getpwnam_r), only when the listener is neither of the
 *     above; a name no user has trusts nobody more.
 * Anyone else: BWC_EPEER, with a message naming the socket, the
 * listener's uid and pid, and this setting.  The string is copied.
 * BWC_EINVAL for an empty string; BWC_ENOMEM.  Takes effect at the next
 * bwc_connect or bwc_reconnect.
 */
BWC_EXPORT int bwc_set_daemon_user(struct bwc_client *c, const char *user);

/*
 * Connect to the daemon at path (NULL: bwc_default_socket()) and open a
 * session: session NULL for an anonymous one, or a name of 1 to 64 bytes
 * of [A-Za-z0-9_.:@-] to create or attach to in the caller's uid's
 * namespace, or the owner uid's (PROTOCOL.md, section 7; names are per
 * uid, so only the caller's own programs share its namespace: prefix a
 * name with your program's to keep them apart), in the role and with the
 * options set above.  Blocks until the daemon's Hello reply.  Remembers
 * path and session for bwc_reconnect().
 *   BWC_EINVAL        bad session name, path longer than a socket address,
 *                     BWC_ROLE_PRODUCER or an owner uid without a session
 *                     name
 *   BWC_EUNREACHABLE  connect() failed (errno's text in the message)
 *   BWC_EPEER         the listener is not trusted (bwc_set_daemon_user);
 *                     the client is not connected
 *   BWC_ESERVER       the daemon refused the Hello (BAD_VERSION,
 *                     BAD_REQUEST for a window over its max_window,
 *                     PERMISSION_DENIED for an owner uid not the caller's
 *                     from a caller other than root, TOO_MANY_CLIENTS,
 *                     SHUTTING_DOWN, ...); the client is not connected
 *   BWC_EBUSY         already connected (bwc_close first)
 *   BWC_ECLOSED, BWC_ETIMEDOUT, BWC_EPROTO, BWC_EIO, BWC_ENOMEM
 * A consumer receives the fires waiting in the session's queue right after
 * the Hello, as many as its window allows; they are queued in the client
 * for bwc_wait_fire/bwc_dispatch.  Each connection gets a new number,
 * bwc_fire.connection of the fires that come on it.  The first connect is
 * tried once: reconnecting by itself starts only once a session was
 * attached; a bwc_connect ends any reconnecting in progress.
 */
BWC_EXPORT int bwc_connect(struct bwc_client *c, const char *path,
			   const char *session);
/*
 * Close the current connection if any and connect again with the path and
 * session of the last bwc_connect(), and the current settings: the one
 * call to reattach after the daemon closed the connection or restarted.
 * Outstanding non-blocking requests fail with BWC_ECLOSED (their callbacks
 * run at the next bwc_dispatch).  Fires queued in the client: a
 * manual-ack consumer's are discarded (the daemon delivers them again,
 * marked redelivered), others stay queued.  The fd changes, and so does
 * the connection number: fires handed out before can no longer be
 * acknowledged (BWC_ESTALE, or nothing sent with reconnecting on).
 * Errors as bwc_connect(), and BWC_EINVAL if bwc_connect() was never
 * called.  One attempt, at once: the way back after BWC_EGAVEUP or
 * BWC_EANONYMOUS, or for a caller that turned reconnecting off (see the
 * top of this file for what to replay).
 */
BWC_EXPORT int bwc_reconnect(struct bwc_client *c);
/*
 * Close the connection (an anonymous session's timers die with it; a named
 * session keeps its timers, firing into its queue for its consumers),
 * after writing what the socket takes of the requests (and acks) not yet
 * written.  Outstanding non-blocking requests fail with BWC_ECLOSED at the
 * next bwc_dispatch.  Queued fires stay, except a manual-ack consumer's,
 * which are discarded: the daemon takes them back with every fire not
 * acknowledged and delivers them again, marked redelivered.  No-op when
 * not connected.
 */
BWC_EXPORT void bwc_close(struct bwc_client *c);

/*
 * The daemon's limits in force (HelloReply.limits).  Like struct
 * bwc_session_info, which holds it, of a fixed size from libbitwheel-client
 * 2:0:0 on: limits added later take the reserved slots (see struct
 * bwc_stats), and read 0 from a library or daemon that does not know them.
 */
struct bwc_limits {
	uint32_t max_frame_bytes;   /* largest frame body, either direction */
	uint32_t max_payload_bytes; /* largest Schedule payload            */
	uint64_t max_timers;        /* pending timers plus undelivered
				       fires per session: Schedule's
				       backpressure (TOO_MANY_TIMERS)      */
	uint64_t max_queued;        /* undelivered periodic fires per
				       session; more are dropped, counted  */
	uint64_t session_linger_ns; /* how long a session with no
				       connection lives                    */
	uint64_t max_output_bytes;  /* unread output per connection: at
				       half, fires wait (PROTOCOL.md 8)    */
	uint64_t max_clients;       /* connections the daemon accepts      */
	uint32_t max_window;        /* the largest consumer window         */
	/* The caller's uid's budgets (bitwheeld(8)), what struct bwc_stats'
	 * uid_* figures are measured against; root is exempt unless the
	 * daemon's --budgets file names it; 0 from a daemon without them: */
	uint64_t max_clients_per_uid;   /* connections, before Hello too   */
	uint64_t max_sessions_per_uid;  /* named sessions                  */
	uint64_t max_timers_per_uid;    /* pending timers plus undelivered
					   fires over all its sessions     */
	uint64_t max_periodic_rate_per_uid; /* periodic fires a second: the
					   sum of 1/period, in Hz          */
	uint64_t max_bytes_per_uid;     /* bytes of its timers, fires and
					   unread output                   */
	uint64_t max_memory_bytes;      /* the same over every uid, root
					   included (NO_MEMORY past it)    */
	/* 0 from a daemon that does not send them: */
	uint64_t max_journal_bytes_per_uid; /* bytes one uid's named
					   sessions may add to a journal
					   generation (OVER_BUDGET past it) */
	uint64_t hello_timeout_ns;      /* a connection's time to say Hello */
	/* Fires that fail (PROTOCOL.md section 8); 0 from a daemon without
	 * them: */
	uint64_t max_release_delay_ns;  /* the longest bwc_release delay
					   (7 days by default)             */
	uint64_t max_hold_ns;           /* how long after its hand-out
					   bwc_touch may hold a fire (12 h;
					   HOLD_LIMIT past it)             */
	uint32_t default_max_deliveries; /* a named session's max_deliveries
					   until bwc_set_policy sets one
					   (20; 0: unlimited)              */
	uint32_t max_kick;              /* fires one bwc_kick moves (and
					   dead letters it looks at)       */
	uint64_t reserved[2];           /* 0                               */
};

/*
 * One lane of the daemon's wheel (PROTOCOL.md, "Leeway and lanes"): a
 * timer goes to the coarsest lane whose max_late_ns is at most its leeway
 * (bwc_schedule_leeway), the finest when none is.
 */
struct bwc_lane_info {
	uint64_t resolution_ns;  /* its tick                                */
	uint64_t max_late_ns;    /* the most a fire in it comes late,
				    scheduling delay aside                 */
};
#define BWC_MAX_LANES 4

/*
 * A named session's delivery policy (PROTOCOL.md, "Fires that fail"): a
 * fire taken back or released after its max_deliveries-th hand-out goes
 * to the dead-letter session instead of back to the queue.  Of a fixed
 * size for good (96 bytes), inside struct bwc_session_info and struct
 * bwc_session_entry: fields added later take the reserved slots.
 */
struct bwc_policy {
	uint32_t max_deliveries;  /* 0: unlimited (fires come back forever) */
	bool is_explicit;         /* bwc_set_policy set it; false: the
				     daemon's defaults (limits'
				     default_max_deliveries, NAME.dead)    */
	bool has_dead_letter;     /* false: no dead-letter session (the
				     default name NAME.dead would pass 64
				     bytes): nothing is dead-lettered      */
	char dead_letter[72];     /* its name, NUL-terminated, at most 64
				     bytes; in the session's namespace     */
	uint64_t reserved[2];     /* 0                                     */
};

/* What the daemon said when this connection opened its session. */
struct bwc_session_info {
	char daemon_version[32];          /* e.g. "0.1.0", truncated to fit */
	uint64_t oneshot_resolution_ns;   /* the oneshot lane's tick        */
	uint64_t periodic_resolution_ns;  /* the periodic lane's tick       */
	struct bwc_limits limits;
	bool resumed;      /* an existing named session was attached        */
	uint64_t timers;   /* pending timers the session held at attach     */
	uint64_t queued;   /* fires waiting in the session's queue at attach:
			      a consumer receives them, or its share, as its
			      window allows                                 */
	uint64_t dropped;  /* periodic fires the session dropped at its
			      max_queued since a consumer last attached     */
	enum bwc_role role;      /* this connection's role as the daemon took
				    it: BWC_ROLE_PRODUCER or _CONSUMER      */
	uint32_t window;         /* consumers: the window in force; 0 for a
				    producer                                */
	uint64_t ack_timeout_ns; /* consumers: the ack timeout, 0 for none  */
	bool auto_ack;           /* consumers: BWC_ACK_AUTO in force        */
	uint64_t consumers;      /* consumer connections attached to the
				    session at attach, this one included    */
	uint32_t owner_uid;      /* named sessions: the uid whose namespace
				    the session is in (the caller's, or the
				    one bwc_set_owner_uid named); 0 for an
				    anonymous session                       */
	uint32_t nlanes;         /* lanes below, finest first; 0 from a
				    daemon without leeways                  */
	struct bwc_lane_info lanes[BWC_MAX_LANES];
	bool coalesce;           /* consumers: coalesced delivery in force
				    (bwc_set_coalesce)                      */
	struct bwc_policy policy; /* named sessions: the delivery policy at
				    attach (all 0 from a daemon without
				    one, and for an anonymous session)     */
	uint64_t reserved[8];    /* room to grow (see struct bwc_stats): 0  */
};

/* The current connection's session: BWC_ECLOSED when not connected. */
BWC_EXPORT int bwc_get_session_info(const struct bwc_client *c,
				    struct bwc_session_info *out);

/* ---- requests --------------------------------------------------------- */

/* A timer to arm.  Zero-initialise it and set what you need. */
/* A timer's clock (struct bwc_timer, struct bwc_timer_entry). */
enum bwc_clock {
	BWC_CLOCK_MONOTONIC = 0,
	BWC_CLOCK_BOOTTIME = 1,
};

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
	uint64_t realtime_ns;  /* > 0: a wall-clock timer instead: it fires
				  when CLOCK_REALTIME reaches this instant
				  (ns since the epoch, UTC), whatever steps
				  the clock takes meanwhile (PROTOCOL.md,
				  "Clocks"); when_ns, absolute and
				  period_ns must then be 0 (BWC_EINVAL)    */
	/* Non-NULL: a calendar timer instead (PROTOCOL.md, "Calendar
	 * timers"): it fires at every elapse of this systemd.time(7)
	 * calendar event ("Mon..Fri 09:00", "*:0/15", "daily UTC"), at most
	 * BWC_CALENDAR_MAX bytes, times in the trailing zone if one is named,
	 * else the daemon's local zone; when_ns, absolute, period_ns and
	 * realtime_ns must then be 0 (BWC_EINVAL).  The rest are a
	 * calendar timer's alone (else BWC_EINVAL): */
	const char *calendar;
	uint64_t jitter_ns;    /* > 0: a random delay in [0, jitter_ns] added
				  to each elapse (RandomizedDelaySec=)    */
	bool jitter_fixed;     /* the delay is the same for every elapse,
				  per host, session and key
				  (FixedRandomDelay=)                      */
	bool has_misfire_grace; /* an elapse missed while the daemon was
				  down fires at start only if missed by at
				  most misfire_grace_ns (false: always,
				  once, late)                               */
	uint64_t misfire_grace_ns;
	/* The clock when_ns counts on (a delay) or is a point on
	 * (absolute), period_ns too: BWC_CLOCK_MONOTONIC (0, the default)
	 * stops while the host is suspended, BWC_CLOCK_BOOTTIME counts the
	 * suspend (a timer it passed fires at the resume, late).  Not with
	 * realtime_ns or calendar (BWC_EINVAL).  PROTOCOL.md, "Clocks". */
	enum bwc_clock clock;
};

/* The longest calendar spec a timer may have (PROTOCOL.md). */
#define BWC_CALENDAR_MAX 255

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

/*
 * The daemon's counters: daemon-wide for root, the caller's own uid's
 * for anyone else (PROTOCOL.md, Stats), not the session's; then the
 * caller's own uid's against its per-uid budgets (bitwheeld(8), "Security
 * and limits"; root is counted, but exempt unless the daemon's --budgets
 * file names it).
 *
 * The struct has a fixed size, 384 bytes, for good (as struct
 * bwc_session_info and struct bwc_limits do): the caller allocates it, so
 * a library writing a longer one than the program was built with would
 * overrun the program's memory.  Counters added later take the
 * reserved slots at the tail, in order, so programs built
 * against this header keep working with later libraries, and programs
 * built against a later header read a counter this library (or the
 * daemon) does not know as 0.  The library zeroes the reserved slots.
 */
struct bwc_stats {
	struct bwc_lane_stats oneshot;
	struct bwc_lane_stats periodic;
	uint64_t clients;      /* connections now                           */
	uint64_t sessions;     /* named sessions, attached or not           */
	uint64_t queued;       /* fires waiting in sessions' queues now (not
				  in flight)                                */
	uint64_t dropped;      /* periodic fires dropped at a session's
				  max_queued, ever                          */
	uint64_t uptime_ns;
	uint64_t memory_bytes;
	uint64_t expired;      /* named sessions dropped after their linger */
	uint64_t in_flight;    /* fires sent to consumers, not yet done     */
	uint64_t consumers;    /* consumer connections now                  */
	uint64_t acked;        /* fires done by an ack or auto-ack, ever    */
	uint64_t redelivered;  /* fires taken back to be sent again, ever   */
	/* The caller's uid (0 from a daemon that does not count per uid): */
	uint64_t uid_connections; /* its connections now, this one included,
				     against --max-clients-per-uid         */
	uint64_t uid_sessions;    /* its named sessions, attached or not,
				     against --max-sessions-per-uid        */
	uint64_t uid_timers;      /* its pending timers plus undelivered
				     fires, all its sessions, against
				     --max-timers-per-uid                  */
	uint64_t uid_periodic_rate_mhz; /* the sum over its periodic timers
				     of 1/period, in millihertz, against
				     --max-periodic-rate-per-uid           */
	uint64_t uid_bytes;       /* its timers', fires' and unread output's
				     bytes, against --max-bytes-per-uid     */
	uint64_t reserved[20];    /* see above: 0                          */
};

/*
 * Blocking requests.  Each waits for its reply, queueing whatever else
 * arrives meanwhile, and fails with BWC_ESERVER when the daemon refuses it
 * (bwc_server_error(): DUPLICATE_KEY, BAD_DEADLINE, TOO_MANY_TIMERS, ...),
 * BWC_ECLOSED when the connection ends first (the request may or may not
 * have taken effect), BWC_ETIMEDOUT, BWC_EPROTO, BWC_ENOMEM, BWC_EIO, and
 * BWC_EBUSY from inside a callback.  Any role may make them.
 */

/* Arm a timer.  out may be NULL.  Also BWC_EINVAL (payload NULL with a
 * length) and BWC_ETOOBIG (payload over the daemon's limit). */
BWC_EXPORT int bwc_schedule(struct bwc_client *c, const struct bwc_timer *t,
			    struct bwc_scheduled *out);
/*
 * bwc_schedule() with a leeway: how late each fire may come, which picks
 * the timer's lane (struct bwc_lane_info).  BWC_LEEWAY_DEFAULT: the daemon's
 * default, what bwc_schedule() asks (0 for a oneshot timer, period / 64
 * for a periodic one).  The guarantee: a fire never comes before its
 * deadline, and late by at most max(leeway, the finest lane's
 * max_late_ns) plus scheduling delay on an unloaded host.  A daemon
 * before leeways ignores it (bwc_session_info.nlanes is 0 from one).
 */
#define BWC_LEEWAY_DEFAULT UINT64_MAX
BWC_EXPORT int bwc_schedule_leeway(struct bwc_client *c,
				   const struct bwc_timer *t,
				   uint64_t leeway_ns,
				   struct bwc_scheduled *out);
/* Disarm a timer.  *pending (may be NULL): true if it was pending and no
 * fire for it follows; false if no timer had this key, which is not an
 * error. */
BWC_EXPORT int bwc_cancel(struct bwc_client *c, uint64_t key, bool *pending);
/* The daemon's counters. */
BWC_EXPORT int bwc_stats(struct bwc_client *c, struct bwc_stats *out);

/*
 * The daemon-wide counters for monitoring (PROTOCOL.md, Stats; what
 * `bwctl metrics` prints), which the daemon sends to root alone: `present`
 * is false for anyone else (and from a daemon without them), and the rest
 * reads 0.  Like struct bwc_stats, of a fixed size for good (1024 bytes):
 * counters added later take the reserved slots, in order; arrays indexed
 * by a wire number end where the struct says, and the library adds what a
 * daemon sends past their end to slot 0 ("any other").
 */
#define BWC_LATENESS_BOUNDS 16  /* room for the daemon's bucket bounds   */
#define BWC_REQUEST_KINDS 16    /* Envelope body field numbers           */
#define BWC_ERROR_CODES 32      /* enum bwc_server_code values           */
struct bwc_metrics {
	bool present;
	bool storage;              /* the daemon has a state directory      */
	bool storage_down;         /* ... and cannot write it now           */
	bool has_snapshot;         /* snapshot_age_ns is meaningful         */
	uint32_t lateness_bounds;  /* bounds in lateness_le_ns, <= 16       */
	/* Fire lateness (fired_at - deadline of every fire of a client's
	 * timer, as the daemon fired it), by lane ([0] oneshot, [1]
	 * periodic): bucket upper bounds, ascending, and the fires in each
	 * bucket, not cumulative: lateness_bucket[lane][lateness_bounds] is
	 * over the last bound.  Their sum is lateness_count[lane], which is
	 * the lane's fired counter in struct bwc_stats. */
	uint64_t lateness_le_ns[BWC_LATENESS_BOUNDS];
	uint64_t lateness_bucket[2][BWC_LATENESS_BOUNDS + 1];
	uint64_t lateness_count[2];
	uint64_t lateness_sum_ns[2];
	uint64_t requests[BWC_REQUEST_KINDS]; /* by Envelope body field:
				     2 Hello, 3 Schedule, 4 Cancel, 5 Stats,
				     12 Ack; [0] any other but these two:  */
	uint64_t errors[BWC_ERROR_CODES]; /* error replies by ErrorCode     */
	uint64_t accepted;         /* connections accepted                  */
	uint64_t refused_max_clients; /* refused at accept: --max-clients   */
	uint64_t refused_uid_budget;  /* ... the uid's connection budget    */
	uint64_t refused_memory;      /* ... --max-memory                   */
	uint64_t slow_consumer_disconnects; /* output bound reached         */
	uint64_t journal_syncs;    /* fdatasync of the journal              */
	uint64_t journal_sync_ns_total, journal_sync_ns_last,
		 journal_sync_ns_max;
	uint64_t snapshots;        /* snapshots written since the start     */
	uint64_t snapshot_age_ns;  /* age of the last one's state           */
	uint64_t fires_delivered;  /* Fired frames sent, redeliveries too   */
	/* Connections ended, besides slow_consumer_disconnects: closed by
	 * the client (or its socket broke), by the daemon after a fatal
	 * error reply, for want of memory for their output. */
	uint64_t disconnects_closed, disconnects_error, disconnects_no_memory;
	/* Snapshots' writing time, fork to installed: the last, and all. */
	uint64_t snapshot_ns_last, snapshot_ns_total;
	/* Writes that carried fires to connections (their wake-ups), and
	 * fires that went in a write with an earlier one: wake-ups saved. */
	uint64_t fire_writes, fires_coalesced;
	/* Introspection requests (body fields 16 and 17, past requests[]). */
	uint64_t list_sessions_requests, list_timers_requests;
	/* Fires that fail (PROTOCOL.md section 8): fires sent to a
	 * dead-letter session, given back by Release, touched by Touch,
	 * moved back by Kick (the requests themselves: requests[14] Release,
	 * [15] Touch; SetPolicy and Kick, body fields 20 and 21, count in
	 * requests[0]).  The last reserved slots: counters after these need
	 * a struct of their own. */
	uint64_t dead_lettered, released, touched, kicked;
};

/* bwc_stats and bwc_metrics from one Stats request; stats may be NULL. */
BWC_EXPORT int bwc_metrics(struct bwc_client *c, struct bwc_stats *stats,
			   struct bwc_metrics *out);

/*
 * The daemon's other histograms of durations, root's alone like struct
 * bwc_metrics, each of a fixed size for good (512 bytes): bucket upper
 * bounds, ascending, and the observations in each bucket, not cumulative
 * (bucket[bounds] is over the last bound); count is their sum, sum_ns
 * the durations'.  Bounds past BWC_HISTOGRAM_BOUNDS fold into the last
 * bucket.  bounds 0: the daemon keeps none (journal syncs without a state
 * directory; not root).
 */
enum bwc_histogram_id {
	BWC_HISTOGRAM_JOURNAL_SYNC,  /* journal syncs (fdatasync)           */
	/* Queue wait, by lane: each fire's first hand-out to a consumer
	 * minus its deadline, for the fires the daemon process made (not
	 * those it read back at a restart); count is the fires handed out
	 * a first time. */
	BWC_HISTOGRAM_QUEUE_WAIT_ONESHOT,
	BWC_HISTOGRAM_QUEUE_WAIT_PERIODIC,
	/* Ack latency: an Ack's arrival minus the last hand-out of each fire
	 * it completed; count is the fires completed by Acks (auto-ack's
	 * completion on write is not one). */
	BWC_HISTOGRAM_ACK_LATENCY,
	/* Deliveries: acknowledged fires by the hand-outs they took (their
	 * deliveries at the Ack; auto-ack's completions on write too).  Not
	 * a duration: le_ns holds hand-out counts, and sum_ns reads 0 (the
	 * daemon sends no sum). */
	BWC_HISTOGRAM_DELIVERIES,
	/* Journal syncs by the records each made durable.  Not a duration
	 * either: le_ns holds record counts, and sum_ns the records of all
	 * the syncs. */
	BWC_HISTOGRAM_JOURNAL_SYNC_RECORDS,
	BWC_HISTOGRAMS               /* how many this header knows          */
};
#define BWC_HISTOGRAM_BOUNDS 24
struct bwc_histogram {
	uint32_t bounds;           /* in le_ns, <= BWC_HISTOGRAM_BOUNDS     */
	uint64_t le_ns[BWC_HISTOGRAM_BOUNDS];
	uint64_t bucket[BWC_HISTOGRAM_BOUNDS + 1];
	uint64_t count;
	uint64_t sum_ns;
	uint64_t reserved[12];     /* 0                                     */
};

/* bwc_metrics(), and from the same Stats request the histograms h[0] to
 * h[n - 1], indexed by enum bwc_histogram_id (any past BWC_HISTOGRAMS
 * read 0): one request for a whole scrape.  h may be NULL if n is 0. */
BWC_EXPORT int bwc_metrics_histograms(struct bwc_client *c,
				      struct bwc_stats *stats,
				      struct bwc_metrics *out,
				      struct bwc_histogram *h, size_t n);

/*
 * The daemon process's own figures, read by the daemon from /proc/self as
 * it answers (what Prometheus' process_* metrics say of a process), root's
 * alone like struct bwc_metrics: `present` is false for anyone else and
 * from a daemon that does not send them, and a figure the daemon could not read has
 * its has_* false and reads 0.  Of a fixed size for good (128 bytes), as
 * struct bwc_stats: figures added later take the reserved slots, in order.
 */
struct bwc_process {
	bool present;
	bool has_memory, has_open_fds, has_max_fds, has_cpu, has_start_time;
	uint64_t resident_bytes;   /* resident set                          */
	uint64_t virtual_bytes;    /* virtual memory                        */
	uint64_t open_fds;         /* open file descriptors                 */
	uint64_t max_fds;          /* their limit (RLIMIT_NOFILE's soft
				      limit); UINT64_MAX: none              */
	uint64_t cpu_ns;           /* CPU time, user and system             */
	uint64_t start_time_ns;    /* its start, CLOCK_REALTIME (ns since
				      the epoch)                            */
	uint64_t reserved[9];      /* 0                                     */
};

/* bwc_metrics_histograms(), and from the same Stats request the daemon
 * process's figures (p may be NULL): a whole scrape, `bwctl metrics`. */
BWC_EXPORT int bwc_metrics_scrape(struct bwc_client *c,
				  struct bwc_stats *stats,
				  struct bwc_metrics *out,
				  struct bwc_histogram *h, size_t n,
				  struct bwc_process *p);

/* ---- introspection ------------------------------------------------------ */

/*
 * Who holds what in the daemon (PROTOCOL.md, ListSessions and
 * ListTimers): root sees every uid's sessions and may list any session's
 * timers; anyone else sees only its own uid's.  Both calls are blocking
 * and read-only, work on a connection of any role (anonymous included),
 * and fill the caller's array: up to max entries (max >= 1), *n of them,
 * fetched page by page (the daemon sends at most 1,000 entries per reply,
 * fewer when its frames are small).  The listing is not a snapshot: what
 * changes meanwhile may or may not be in it, but an entry that exists
 * throughout is there once.  Errors as bwc_schedule, and:
 *   BWC_EINVAL   out or n NULL, max 0, a bad session name, a uid above
 *                UINT32_MAX
 *   BWC_ESERVER  PERMISSION_DENIED (another uid's, and the caller is not
 *                root), UNKNOWN_SESSION (bwc_list_timers: no such named
 *                session), UNKNOWN_MESSAGE (a daemon that predates them:
 *                it closes the connection)
 *
 * The entry structs have a fixed size for good, as struct bwc_stats: the
 * caller allocates arrays of them, so fields added later take the
 * reserved slots, which the library zeroes.  (struct bwc_session_entry
 * grew once, before libbitwheel-client.so.2 was released, for the
 * delivery policy: a dead-letter session's name does not fit its
 * reserved slots.)
 */
#define BWC_ANY_UID (-1)       /* owner_uid: every uid the caller may see */

struct bwc_session_entry {
	char name[80];         /* NUL-terminated, at most 64 bytes; "" for
				  an anonymous session                      */
	bool anonymous;
	uint32_t owner_uid;    /* its namespace; anonymous: its client's    */
	uint32_t pid;          /* anonymous: its client's pid; else 0       */
	uint32_t consumers;    /* connections attached as consumers         */
	uint32_t producers;    /* ... and as producers                      */
	uint64_t timers;       /* pending timers                            */
	uint64_t queued;       /* fires waiting in its queue                */
	uint64_t in_flight;    /* fires sent to consumers, not yet done     */
	uint64_t dropped;      /* periodic fires dropped at max_queued since
				  a consumer last attached                  */
	uint64_t idle_ns;      /* no connection attached: since the last one
				  left (or the daemon restored it); else 0  */
	bool expires;          /* no connection attached: it expires ...    */
	uint64_t expires_in_ns;/* ... this long from now, unless one does   */
	/* Fires that fail (PROTOCOL.md section 8); 0 from a daemon without
	 * them: */
	struct bwc_policy policy; /* named sessions: the delivery policy  */
	uint64_t dead_letters; /* fires in it that another session
				  dead-lettered (kept until consumed or
				  kicked: it does not expire meanwhile)     */
	uint64_t delayed;      /* released fires waiting out their delay    */
	uint64_t dead_lettered;/* fires it sent to its dead-letter session
				  since the daemon started                  */
	uint64_t reserved[8];  /* 0                                         */
};

struct bwc_timer_entry {
	uint64_t key;
	uint64_t deadline_ns;  /* the next deadline, CLOCK_MONOTONIC (struct
				  bwc_listing turns it into wall-clock time) */
	uint64_t period_ns;    /* 0: oneshot                                */
	uint64_t fire_count;   /* periodic: fires so far                    */
	uint32_t payload_len;
	bool has_payload;      /* false: scheduled without a payload        */
	bool late;             /* due while the daemon was not running      */
	bool periodic_lane;    /* waits in the periodic lane (else oneshot) */
	uint64_t deadline_realtime_ns; /* a wall-clock timer: its instant
				  (UTC ns; a calendar timer's next elapse
				  with its jitter); 0: a monotonic timer    */
	/* A calendar timer: its spec normalized ("" for another), jitter and
	 * misfire grace, as struct bwc_timer has them. */
	char calendar[BWC_CALENDAR_MAX + 1];
	uint64_t jitter_ns;
	bool jitter_fixed;
	bool has_misfire_grace;
	uint64_t misfire_grace_ns;
	enum bwc_clock clock;  /* its clock (a reserved slot's first half);
				  a wall-clock timer's: BWC_CLOCK_MONOTONIC,
				  its deadline_ns being where it waits    */
	uint64_t reserved[6];  /* 0                                         */
};

/* What a listing said besides its entries. */
struct bwc_listing {
	bool more;             /* max was reached with entries left          */
	uint64_t total;        /* timers: the session's pending timers       */
	uint32_t owner_uid;    /* timers: the session's namespace            */
	/* timers: the daemon's CLOCK_MONOTONIC and CLOCK_REALTIME read
	 * together as it answered (the last page): a deadline is
	 * realtime_ns + (deadline_ns - now_ns) in wall-clock time. */
	uint64_t now_ns;
	uint64_t realtime_ns;
	uint64_t reserved[8];  /* 0                                         */
};

/* Sessions: owner_uid BWC_ANY_UID for all the caller may see (root:
 * every uid's, including anonymous sessions; anyone else: its own), or
 * one uid's.  listing may be NULL. */
BWC_EXPORT int bwc_list_sessions(struct bwc_client *c, int64_t owner_uid,
				 struct bwc_session_entry *out, size_t max,
				 size_t *n, struct bwc_listing *listing);
/* The pending timers of the named session in owner_uid's namespace
 * (BWC_ANY_UID: the caller's own).  listing may be NULL. */
BWC_EXPORT int bwc_list_timers(struct bwc_client *c, const char *session,
			       int64_t owner_uid, struct bwc_timer_entry *out,
			       size_t max, size_t *n,
			       struct bwc_listing *listing);

/* ---- calendar events ---------------------------------------------------- */

/*
 * The next elapses of a systemd.time(7) calendar event, as the daemon
 * computes them for calendar timers (PROTOCOL.md, "Calendar"): what
 * systemd-analyze calendar prints.  Blocking and read-only, on a
 * connection of any role (anonymous included).  iterations: the elapses
 * wanted, 0 for 1, at most BWC_CALENDAR_ITERATIONS_MAX; base_realtime_ns:
 * the first elapse is the first strictly after this instant (UTC ns since
 * the epoch), 0 for the daemon's wall clock now.  A spec without a zone
 * is in the daemon's local zone.  On 0, *out is the answer, one block the
 * caller frees with bwc_calendar_free().  Errors as bwc_schedule, and:
 *   BWC_EINVAL   spec or out NULL, iterations over the limit
 *   BWC_ESERVER  BAD_CALENDAR (the spec is refused: its syntax, an unknown
 *                zone; the message says which), BAD_REQUEST (more elapses
 *                than the daemon's frames hold), UNKNOWN_MESSAGE (a daemon
 *                that predates it: it closes the connection)
 *
 * The library allocates struct bwc_calendar: it grows at its tail (the
 * ABI rules above).
 */
#define BWC_CALENDAR_ITERATIONS_MAX 1000

struct bwc_calendar {
	char *normalized;      /* the spec in systemd's normalized form      */
	char *zone;            /* the zone it names ("UTC", "Europe/Berlin");
				  "": none, the daemon's local zone         */
	uint64_t base_realtime_ns; /* the instant the elapses follow        */
	uint64_t *elapses_realtime_ns; /* UTC ns, ascending                 */
	size_t n_elapses;      /* fewer than asked: the spec has no more
				  (before 2200), or the search gave up      */
	bool gave_up;          /* the daemon's search gave up (systemd's
				  bound of 1000 rounds), as systemd's does  */
};

BWC_EXPORT int bwc_calendar(struct bwc_client *c, const char *spec,
			    uint32_t iterations, uint64_t base_realtime_ns,
			    struct bwc_calendar **out);
BWC_EXPORT void bwc_calendar_free(struct bwc_calendar *cal);

/* ---- fires -------------------------------------------------------------- */

/* Why a fire in flight went back to its session the last time
 * (PROTOCOL.md, "Fires that fail"): the protocol's TakeBack numbers. */
enum bwc_take_back {
	BWC_TAKE_BACK_NONE = 0,         /* never taken back                  */
	BWC_TAKE_BACK_DISCONNECTED = 1, /* its consumer's connection ended   */
	BWC_TAKE_BACK_ACK_TIMEOUT = 2,  /* held past its ack deadline        */
	BWC_TAKE_BACK_RELEASED = 3,     /* its consumer released it          */
	BWC_TAKE_BACK_RESTARTED = 4,    /* in flight when the daemon stopped */
};
/* The protocol's name of a reason, e.g. "ACK_TIMEOUT"; "UNKNOWN" for one
 * this library does not know. */
BWC_EXPORT const char *bwc_take_back_name(int reason);

/* A dead letter's history in the session that dead-lettered it. */
struct bwc_dead_letter {
	bool present;          /* false: the fire is no dead letter, and the
				  rest is 0 / NULL                          */
	const char *session;   /* the session that dead-lettered it,
				  NUL-terminated ("" from a daemon that did not say);
				  owned by the client and valid as long as
				  the fire's payload                        */
	uint64_t deliveries;   /* its hand-outs there                       */
	uint64_t first_handed_ns, last_handed_ns; /* its first and last
				  hand-out there (CLOCK_MONOTONIC)          */
	uint64_t dead_lettered_ns; /* when it was dead-lettered              */
	enum bwc_take_back reason; /* why it was taken back the last time   */
};

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
	bool redelivered;      /* sent to a consumer before and not
				  acknowledged (it went away, its ack
				  timeout ran out, or the daemon
				  restarted): may repeat a fire handled
				  before, with the same key, deadline_ns
				  and fire_count (PROTOCOL.md section 8)    */
	uint64_t delivery;     /* the daemon's number for it on its
				  connection (Fired.delivery), what an ack
				  names                                     */
	uint64_t connection;   /* which connection of this client object it
				  came on: the library counts connects, so
				  bwc_ack can refuse a fire of an earlier
				  one (BWC_ESTALE)                          */
	uint64_t deliveries;   /* how many times it has been handed out in
				  its session, this time included: 1 the
				  first time (0 from a daemon that does not
				  count); what bwc_backoff() reads          */
	struct bwc_dead_letter dead_letter; /* a fire another session
				  dead-lettered (present): its history
				  there                                     */
	uint64_t due_realtime_ns; /* a wall-clock timer's fire: the instant
				  it was due at (UTC ns), as scheduled; 0
				  for a monotonic timer's.  late is then
				  also set when a step of the wall clock
				  passed it                                 */
};

/*
 * The next fire: the oldest queued in the client, or the next to arrive
 * within timeout_ns (negative: forever; 0: only what the socket already
 * holds).  out->payload stays valid until the next bwc_wait_fire() or
 * bwc_free() on c.  An auto-ack consumer's fires queued before the
 * connection closed are still handed out after it closed (a manual-ack
 * consumer's are discarded at the close: they come again).  A manual-ack
 * consumer gets no more than its window until it acknowledges.
 *   BWC_ETIMEDOUT  none within timeout_ns
 *   BWC_EINTR      a signal interrupted the wait (call again to resume)
 *   BWC_EROLE      the connection is a producer, which never receives a
 *                  fire: bwc_set_role(c, BWC_ROLE_CONSUMER) before
 *                  bwc_connect
 *   BWC_ECLOSED    none queued and not connected (or the daemon closed
 *                  the connection during the wait, and the client does
 *                  not reconnect by itself); also BWC_EPROTO,
 *                  BWC_ESERVER (a connection-level error), BWC_EIO,
 *                  BWC_ENOMEM, BWC_EBUSY from inside a callback,
 *                  BWC_EGAVEUP, BWC_EANONYMOUS
 * Reconnecting after the daemon ended the connection happens inside the
 * wait, within timeout_ns.
 */
BWC_EXPORT int bwc_wait_fire(struct bwc_client *c, int64_t timeout_ns,
			     struct bwc_fire *out);

/*
 * Acknowledge fire (one this client handed out, by bwc_wait_fire or the
 * fire handler; only its delivery and connection are read, so a copy
 * made after its payload went stale will do): the daemon is done with
 * it, or with cumulative, with every fire in flight to this connection
 * up to it (one ack per batch of fires handled in order).  Done fires are
 * never delivered again and free the window for more.
 *
 * bwc_ack blocks for the daemon's reply, which comes once the ack is as
 * durable as the daemon's --fsync makes it: after it, a daemon crash
 * never delivers those fires again.  *acked (may be NULL) gets how many
 * fires it completed: 0 when they were done already (acknowledged
 * before, or taken back by the ack timeout).  Errors as bwc_schedule.
 *
 * bwc_send_ack returns at once: the ack, which gets no reply, is queued
 * and written with other pending requests, as bwc_send_schedule's are
 * (acks sent from a callback all go out when bwc_dispatch ends).  A
 * daemon crash just after may deliver those fires again, marked.  Also
 * BWC_EAGAIN as bwc_send_schedule.
 *
 * Both:
 *   BWC_ESTALE   the fire came on an earlier connection: the daemon took
 *                it back when that one closed and will deliver it again,
 *                marked redelivered (only with bwc_set_reconnect(c,
 *                false): reconnecting by itself, or about to, the client
 *                sends nothing and returns 0, *acked 0, and so does
 *                bwc_ack when the connection ends before its reply)
 *   BWC_EROLE    the connection is a producer (it was never sent a fire)
 *   BWC_EINVAL   fire NULL, or without a delivery number
 *   BWC_ECLOSED  not connected
 * An auto-ack consumer's ack is sent all the same and completes nothing.
 */
BWC_EXPORT int bwc_ack(struct bwc_client *c, const struct bwc_fire *fire,
		       bool cumulative, uint64_t *acked);
BWC_EXPORT int bwc_send_ack(struct bwc_client *c, const struct bwc_fire *fire,
			    bool cumulative);

/* What a Release did (bwc_release, "fires that fail" below): caller
 * storage, of a fixed size for good (56 bytes), as struct bwc_stats. */
struct bwc_released {
	bool released;         /* false: the fire is not in flight to this
				  connection (acknowledged, released or taken
				  back already): nothing was done           */
	bool dead_lettered;    /* it went to the dead-letter session (its
				  deliveries reached the limit), not back   */
	uint64_t deliveries;   /* its hand-outs so far                      */
	uint64_t ready_ns;     /* when it may be handed out again
				  (CLOCK_MONOTONIC); 0 when dead-lettered   */
	uint64_t reserved[4];  /* 0                                         */
};

/* ---- non-blocking mode ------------------------------------------------ */

/* Which request a struct bwc_reply answers. */
enum bwc_request_kind {
	BWC_REQUEST_SCHEDULE = 1,
	BWC_REQUEST_CANCEL = 2,
	BWC_REQUEST_STATS = 3,
	BWC_REQUEST_ACK = 4,   /* bwc_ack's, which is blocking: no callback
				  sees this kind today                      */
	BWC_REQUEST_RELEASE = 5,
	BWC_REQUEST_TOUCH = 6,
	BWC_REQUEST_SET_POLICY = 7,
	BWC_REQUEST_KICK = 8,
};

/* The outcome of a non-blocking request, valid during its callback. */
struct bwc_reply {
	enum bwc_request_kind request;
	uint64_t key;          /* the key a Schedule or Cancel named        */
	int status;            /* 0; BWC_ESERVER (the daemon refused it);
				  BWC_EUNKNOWN (the connection ended after
				  it was sent, and it was not safe to send
				  again: it may or may not have taken
				  effect); BWC_EGAVEUP (it waited to be sent
				  again, and reconnecting gave up); or
				  BWC_ECLOSED (the connection ended first,
				  and the client does not reconnect by
				  itself (bwc_set_reconnect, an anonymous
				  session) or was closed: it may or may not
				  have taken effect)                        */
	int server_error;      /* BWC_ESERVER: the daemon's ErrorCode       */
	const char *message;   /* BWC_ESERVER: the daemon's message;
				  BWC_EUNKNOWN: the library's, naming the
				  key; else ""                              */
	struct bwc_scheduled scheduled; /* BWC_REQUEST_SCHEDULE, status 0   */
	bool pending;          /* BWC_REQUEST_CANCEL, status 0              */
	const struct bwc_stats *stats;  /* BWC_REQUEST_STATS, status 0      */
	/* BWC_REQUEST_RELEASE, status 0 (key: the fire's): */
	struct bwc_released released;
	/* BWC_REQUEST_TOUCH, status 0 (key: the fire's): */
	bool touched;
	uint64_t ack_deadline_ns;
	/* BWC_REQUEST_SET_POLICY, status 0: */
	const struct bwc_policy *policy;
	/* BWC_REQUEST_KICK, status 0 (key: the one asked, if any): */
	uint64_t kicked;
	bool more;
};

typedef void (*bwc_reply_fn)(struct bwc_client *c,
			     const struct bwc_reply *reply, void *arg);
/* fire->payload is valid during the call only. */
typedef void (*bwc_fire_fn)(struct bwc_client *c,
			    const struct bwc_fire *fire, void *arg);

/*
 * Where bwc_dispatch() gets its fires' callback; fn NULL (the default)
 * leaves fires queued for bwc_wait_fire().  The handler acknowledges
 * nothing: a manual-ack consumer calls bwc_send_ack (see the top of this
 * file).
 */
BWC_EXPORT void bwc_set_fire_handler(struct bwc_client *c, bwc_fire_fn fn,
				     void *arg);

/* The connection's socket, -1 when not connected.  It changes on every
 * connect, reconnecting by itself included; the client owns it (don't
 * read, write or close it). */
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
/* bwc_send_schedule() with a leeway, as bwc_schedule_leeway(). */
BWC_EXPORT int bwc_send_schedule_leeway(struct bwc_client *c,
					const struct bwc_timer *t,
					uint64_t leeway_ns, bwc_reply_fn cb,
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
 *   0            the connection is open (nothing may have happened); it
 *                may be a new one, reconnected inside this call after
 *                the daemon ended the last (see "Riding through a
 *                restart" at the top): watch bwc_fd() again
 *   BWC_ECLOSED  not connected, or the daemon closed the connection;
 *                everything received before was delivered first, and
 *                outstanding requests' callbacks got BWC_ECLOSED
 *   BWC_EGAVEUP, BWC_EANONYMOUS: the daemon ended the connection and
 *                reconnecting gave up, or could not be (same delivery
 *                as BWC_ECLOSED, requests waiting failing with
 *                BWC_EGAVEUP)
 *   BWC_EPROTO, BWC_ESERVER, BWC_EIO: the connection closed for that
 *                reason during this call (same delivery as BWC_ECLOSED)
 *   BWC_ENOMEM   a frame could not be queued, or a fire handed out;
 *                call again later
 *   BWC_EROLE    a fire handler is set but the connection is a producer,
 *                which never receives fires (everything else was done,
 *                and the connection is open): bwc_set_role(c,
 *                BWC_ROLE_CONSUMER) and reconnect, or unset the handler
 *   BWC_EBUSY    from inside a callback
 * A manual-ack consumer's fires not yet handed to the handler when the
 * connection closes are discarded, not delivered: they come again.
 * Reconnecting blocks this call, the give-up time at most; an event loop
 * that must never block turns it off (bwc_set_reconnect) and calls
 * bwc_reconnect when it sees fit.
 */
BWC_EXPORT int bwc_dispatch(struct bwc_client *c);

/* ---- fires that fail ---------------------------------------------------- */

/*
 * A handler that cannot process a fire (PROTOCOL.md, "Fires that fail").
 * Each fire counts its hand-outs (bwc_fire.deliveries); a named session's
 * policy (bwc_set_policy) bounds them: a fire taken back or released
 * after its max_deliveries-th hand-out (20 by default) goes to the
 * session's dead-letter session (NAME.dead by default), an ordinary
 * session whose consumers see bwc_fire.dead_letter, and bwc_kick moves
 * dead letters back.  A consumer that fails for a passing reason releases
 * the fire with a delay from bwc_backoff(), and one that needs longer
 * than its ack timeout touches it:
 *
 *   while (bwc_wait_fire(c, -1, &f) == 0) {
 *           if (handle(&f) == 0)
 *                   bwc_send_ack(c, &f, false);
 *           else                           // 1 s, 2 s, 4 s ... 5 min
 *                   bwc_send_release(c, &f, bwc_backoff(f.deliveries,
 *                                    1000000000, 300000000000,
 *                                    random64()), NULL, NULL);
 *   }
 *
 * bwc_release and bwc_touch name a fire as bwc_ack does (only its
 * delivery and connection are read) and refuse the same way: BWC_ESTALE
 * for a fire of an earlier connection (with reconnecting on, or about
 * to, nothing is sent and the call returns 0 with released/touched
 * false: the daemon took the fire back with the connection), BWC_EROLE
 * on a producer, BWC_EINVAL for a fire without a delivery number,
 * BWC_ECLOSED.  The connection ending before the reply (the daemon took
 * the fire back either way) gives the same 0 and false when reconnecting.
 * All four requests: errors as bwc_schedule, and BWC_ESERVER with
 * UNKNOWN_MESSAGE from a daemon that predates them (it closes the
 * connection).  The bwc_send_* forms return at once, as bwc_send_schedule,
 * their callback's struct bwc_reply carrying the outcome.
 */

/*
 * Give fire back: it leaves this connection's window and, after delay_ns
 * (0: at once), joins the session's queue at the tail, the same fire
 * (key, payload, deadline_ns, fire_count) with its deliveries counted on
 * (a release does not mark it redelivered: the handler gave it back
 * knowingly); or, when its deliveries reached the session's
 * max_deliveries, it goes to the dead-letter session.  It is no timer meanwhile: bwc_cancel of
 * its key does not stop it (struct bwc_session_entry.delayed counts it).
 * A named session's Release is journaled: the reply comes once the
 * daemon holds it, and the delay survives a restart.  out may be NULL.
 *   BWC_ESERVER  BAD_REQUEST: delay_ns over limits.max_release_delay_ns
 *                (7 days by default), or a delivery this connection was
 *                never sent (which closes the connection)
 * An auto-ack consumer's fires are done once written: released false.
 */
BWC_EXPORT int bwc_release(struct bwc_client *c, const struct bwc_fire *fire,
			   uint64_t delay_ns, struct bwc_released *out);
BWC_EXPORT int bwc_send_release(struct bwc_client *c,
				const struct bwc_fire *fire, uint64_t delay_ns,
				bwc_reply_fn cb, void *arg);

/*
 * More time for fire: its ack deadline becomes now + timeout_ns (0: the
 * connection's ack timeout).  *touched (may be NULL): false when the fire
 * is not in flight to this connection.  *ack_deadline_ns (may be NULL):
 * its deadline now, CLOCK_MONOTONIC; 0 when the connection has no ack
 * timeout (its fires are never taken back for their time, and a touch
 * changes nothing).  Not journaled.
 *   BWC_ESERVER  HOLD_LIMIT: the deadline would pass the fire's hand-out
 *                + limits.max_hold_ns (12 h by default); the connection
 *                stays open and the fire keeps its deadline
 */
BWC_EXPORT int bwc_touch(struct bwc_client *c, const struct bwc_fire *fire,
			 uint64_t timeout_ns, bool *touched,
			 uint64_t *ack_deadline_ns);
BWC_EXPORT int bwc_send_touch(struct bwc_client *c,
			      const struct bwc_fire *fire, uint64_t timeout_ns,
			      bwc_reply_fn cb, void *arg);

/* bwc_set_policy's max_deliveries: keep what the session has. */
#define BWC_POLICY_KEEP (-1)
/*
 * Set the delivery policy of the connection's named session (any member
 * may, producer or consumer); journaled.  max_deliveries: hand-outs
 * without an ack after which a fire is dead-lettered, 1 to UINT32_MAX, 0
 * for unlimited, or BWC_POLICY_KEEP.  dead_letter: the dead-letter
 * session's name (a session name, in the same namespace, not this
 * session's), "" for the default (NAME.dead), NULL to keep it.  With both
 * kept, nothing changes and out gets the policy in force.  out (may be
 * NULL): the policy now.
 *   BWC_EINVAL   max_deliveries out of range, dead_letter not a session
 *                name
 *   BWC_EROLE    an anonymous session, which has no policy
 *   BWC_ESERVER  BAD_REQUEST (the dead-letter name is this session's),
 *                STORAGE_UNAVAILABLE
 */
BWC_EXPORT int bwc_set_policy(struct bwc_client *c, int64_t max_deliveries,
			      const char *dead_letter, struct bwc_policy *out);
BWC_EXPORT int bwc_send_set_policy(struct bwc_client *c,
				   int64_t max_deliveries,
				   const char *dead_letter, bwc_reply_fn cb,
				   void *arg);

/*
 * Move fires this connection's named session dead-lettered back from its
 * dead-letter session to its queue's tail, their deliveries counted from
 * 0 again: those of key only when has_key, at most limit (0:
 * limits.max_kick, 10,000).  *kicked (may be NULL): how many moved;
 * *more (may be NULL): true when it stopped at a limit and more may be
 * there (kick again).  Dead letters in flight to a consumer of the
 * dead-letter session stay with it.  Sent again after a reconnect (the
 * reply then counts the repeat's).  BWC_EROLE for an anonymous session.
 */
BWC_EXPORT int bwc_kick(struct bwc_client *c, bool has_key, uint64_t key,
			uint32_t limit, uint64_t *kicked, bool *more);
BWC_EXPORT int bwc_send_kick(struct bwc_client *c, bool has_key, uint64_t key,
			     uint32_t limit, bwc_reply_fn cb, void *arg);

/*
 * A release delay for a fire handed out `deliveries` times: exponential
 * backoff, min(cap_ns, base_ns * 2^(deliveries - 1)), scaled by a factor
 * in [0.5, 1] that `random` (any 64 random bits: the caller's generator,
 * so the library keeps no state) picks, so that many consumers failing
 * together do not come back in step (PROTOCOL.md, Release).  deliveries 0
 * counts as 1; base_ns above cap_ns is cap_ns.  Pure: no client, no
 * error.  The library's reconnecting backs off the same way.
 */
BWC_EXPORT uint64_t bwc_backoff(uint64_t deliveries, uint64_t base_ns,
				uint64_t cap_ns, uint64_t random);

#ifdef __cplusplus
}
#endif

#endif /* BITWHEEL_CLIENT_H */
