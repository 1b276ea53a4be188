/*
 * daemonutil.h - helpers for the end-to-end suites (check_daemon,
 * check_client, check_bwctl), which start real bitwheeld processes on
 * temporary sockets and judge the service from the outside.
 *
 *   fixtures     du_tcase() gives a TCase the fixtures every e2e test needs:
 *                a registry, in memory shared with Check's runner, of the
 *                daemons and scratch directories each test made, so that
 *                whatever a failed or timed-out test leaves behind is
 *                killed (its whole process group) and removed by the next
 *                test's setup or by the runner's teardown.  Check's fork
 *                mode skips a checked teardown after a failure, and kills
 *                only the test's own process group, which a daemon leaves.
 *   daemons      du_daemon_start() runs the built daemon in a fresh
 *                directory under /tmp, in its own process group, stderr
 *                to a log file, with NOTIFY_SOCKET pointing at a datagram
 *                socket of ours; it returns once READY=1 arrives there, so
 *                no test ever sleeps to wait for a daemon.
 *   faults       du_fault_sync() puts an LD_PRELOAD shim (tests/faultsync.c)
 *                under a daemon: its fdatasync(2) slow or failing, as the
 *                test says while the daemon runs.
 *   connections  raw protocol connections: every frame is packed and
 *                parsed by proto/frame.h; du_conn_send_bytes() writes
 *                bytes as given (frames from du_buf_pack() in batches, or
 *                deliberately malformed bytes).  Receiving keeps
 *                Fired frames that arrive while a reply is awaited, so
 *                nothing is lost, and remembers when each frame was read.
 *   processes    du_run() runs a program with its output captured and a
 *                deadline (bwctl, the daemon's --help, a second daemon).
 *   children     forked clients (another uid, a process that crashes):
 *                du_fork_pipe() gives them a pipe back to the test,
 *                du_read_full() and du_wait_status() wait for them with
 *                a deadline.
 *
 * Every wait has a deadline; failures abort the test through Check with a
 * message that says what was awaited and, for daemons, the log's tail.
 *
 * Paths come from tests/local.mk: BW_TOP_BUILDDIR (abs_top_builddir, so
 * distcheck's out-of-tree build finds its own binaries).
 */
#ifndef BW_DAEMONUTIL_H
#define BW_DAEMONUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frame.h"

#ifndef BW_TOP_BUILDDIR
#error "tests/local.mk passes BW_TOP_BUILDDIR"
#endif

#define DU_DAEMON_PATH BW_TOP_BUILDDIR "/daemon/bitwheeld"
#define DU_BWCTL_PATH BW_TOP_BUILDDIR "/client/bwctl"

#define DU_MS UINT64_C(1000000)
#define DU_S UINT64_C(1000000000)

/*
 * Slow daemons (make check-valgrind, tests/local.mk):
 *   BW_TEST_DAEMON_WRAPPER  a command line, split at blanks (no quoting),
 *                           put in front of every bitwheeld a test starts
 *                           (du_daemon_spawn, and du_proc_start when
 *                           argv[0] is DU_DAEMON_PATH), wherever the daemon
 *                           stands in argv, so "prlimit ... bitwheeld"
 *                           becomes "prlimit ... valgrind ... bitwheeld".
 *                           Under it, du_daemon_free() stops a running
 *                           daemon with SIGTERM, not SIGKILL, so that
 *                           valgrind writes its leak summary, and fails the
 *                           test unless it exits 0 (valgrind's
 *                           --error-exitcode makes an error or leak show).
 *   BW_TEST_SLOW            a factor (default 1) for every wait and margin
 *                           below: DU_WAIT_MS, the READY wait, TCase
 *                           timeouts, du_margin_ns(), du_scale_ms().
 * Tests whose point is speed or lateness skip themselves under the
 * wrapper, saying why (du_skip_if_wrapped).
 */
unsigned du_slow(void);
bool du_wrapped(void);
/* ms times du_slow(), for a test's own literal waits. */
int du_scale_ms(int ms);
/* Under the wrapper: print "SKIP under BW_TEST_DAEMON_WRAPPER: test: why"
 * and return true (the test then returns). */
bool du_skip_if_wrapped(const char *test, const char *why);

/*
 * How late past "its lane's resolution" a fire may be on a shared machine
 * (make -j2 check runs two suites at once, each with its own daemon).
 * BW_TEST_MARGIN_MS overrides it for slower machines; BW_TEST_SLOW
 * multiplies either.
 */
#define DU_DEFAULT_MARGIN_MS 50
uint64_t du_margin_ns(void);

/* The bound on anything awaited that should come promptly (an int
 * expression, not a constant: BW_TEST_SLOW scales it). */
#define DU_BASE_WAIT_MS 10000
#define DU_WAIT_MS du_scale_ms(DU_BASE_WAIT_MS)
/* Every e2e TCase's timeout, in seconds, before BW_TEST_SLOW. */
#define DU_TCASE_TIMEOUT_S 60

/* ---- time ------------------------------------------------------------- */

uint64_t du_now_ns(void);
void du_sleep_ms(unsigned ms);
/* Sleep until CLOCK_MONOTONIC reaches t (no-op when it has). */
void du_sleep_until(uint64_t t_ns);

/* ---- fixtures --------------------------------------------------------- */

/* Fixtures and timeout for an e2e TCase (see the top of this file).
 * Suites run through testutil.h's tu_run_suite(). */
void du_tcase(TCase *tc);

/* ---- daemons ---------------------------------------------------------- */

struct du_daemon {
	pid_t pid;             /* 0 when not running (or reaped)           */
	int status;            /* waitpid status once it exited            */
	bool exited;
	int slot;              /* registry slot                            */
	int notify_fd;         /* our end of NOTIFY_SOCKET                 */
	char dir[64];          /* scratch directory, mode 0700             */
	char sock[96];         /* dir/sock: where --socket points          */
	char notify[96];       /* dir/notify                               */
	char log[96];          /* dir/daemon.log: stdout and stderr        */
	char *notes;           /* every notification line received so far */
	size_t notes_len;
	bool fault_sync;       /* started with tests/faultsync.c preloaded */
	bool fake_clock;       /* started with tests/fakeclock.c preloaded */
};

/* A scratch directory, a notify socket, no process yet. */
struct du_daemon *du_daemon_new(void);
/*
 * Start DU_DAEMON_PATH --socket d->sock plus the extra arguments (a NULL-
 * terminated list) and wait for READY=1.  Usable again after a stop: the
 * same directory and socket path, a new process.
 */
void du_daemon_start(struct du_daemon *d, ...) __attribute__((sentinel));
/* The same, arguments as an array (NULL-terminated). */
void du_daemon_startv(struct du_daemon *d, const char *const *extra);
/*
 * Start argv (argv[0] found through PATH) as the daemon: own process group,
 * NOTIFY_SOCKET set, output to d->log.  Does not wait for anything.
 */
void du_daemon_spawn(struct du_daemon *d, const char *const *argv);
/*
 * Wait for a notification line equal to what (e.g. "READY=1") or, when
 * what ends in '=', starting with it.  Lines received before count too.
 * false on timeout, or when the daemon exited without sending it.
 */
bool du_daemon_wait_notify(struct du_daemon *d, const char *what,
			   int timeout_ms);
/* Whether the daemon has exited, reaping it if so. */
bool du_daemon_exited(struct du_daemon *d);
/*
 * fdatasync(2) faults (tests/faultsync.c, an LD_PRELOAD shim): every
 * fdatasync of d's daemon from now on waits delay_ms, then fails with err
 * without syncing, or with err 0 syncs.  Called before a start, it also
 * makes that start and every later one of d run with the shim preloaded
 * (du_fault_sync(d, 0, 0): preloaded, no fault yet); called while the
 * daemon runs, it takes effect at its next fdatasync.  The shim reads
 * d->dir/fdatasync, which this replaces by a rename.  With a daemon built
 * with ASan the shim comes before the sanitizer's runtime in the library
 * list: ASAN_OPTIONS gets verify_asan_link_order=0 for it.
 */
void du_fault_sync(struct du_daemon *d, unsigned delay_ms, int err);
/* A plan instead (the shim's control file): the next fdatasync to begin
 * takes plan[0], the one after plan[1], ..., every one past the end
 * plan[n - 1]. */
struct du_sync_step {
	unsigned delay_ms;
	int err;
};
void du_fault_sync_plan(struct du_daemon *d, const struct du_sync_step *plan,
			size_t n);
/* Every fdatasync the shim saw d's daemons make since the last plan (or
 * du_fault_sync) was set (d->dir/fdatasync.log): when each began and returned (du_now_ns's clock) and its errno (0: it
 * synced), in the order they returned; *out to free().  Their count. */
struct du_sync_call {
	uint64_t begin_ns, end_ns;
	int err;
};
size_t du_fault_sync_log(struct du_daemon *d, struct du_sync_call **out);
/*
 * A wall clock of d's own (tests/fakeclock.c, an LD_PRELOAD shim): called
 * before a start, every later start of d runs with CLOCK_REALTIME offset
 * by what du_clock_step sets (0 at first), and its CLOCK_REALTIME timerfds
 * with TFD_TIMER_CANCEL_ON_SET report a step when du_clock_step tells.
 * du_clock_step: the daemon's wall clock is the real one + offset_ns from
 * now on; tell: its step detector hears of it (else a quiet step, which
 * it finds out by itself or not at all).  du_realtime_ns: the test's own
 * CLOCK_REALTIME (never offset).
 */
void du_fake_clock(struct du_daemon *d);
void du_clock_step(struct du_daemon *d, int64_t offset_ns, bool tell);
uint64_t du_realtime_ns(void);
/*
 * The same for CLOCK_BOOTTIME, a suspend as d sees it: its CLOCK_BOOTTIME
 * is the real one + offset_ns from now on, its CLOCK_MONOTONIC the real
 * one; tell: its CLOCK_BOOTTIME timerfd expires, as at a resume.
 * du_boottime_ns: the test's own CLOCK_BOOTTIME (never offset).
 */
void du_clock_suspend(struct du_daemon *d, int64_t offset_ns, bool tell);
uint64_t du_boottime_ns(void);
/* Wait for the process to exit by itself; false on timeout. */
bool du_daemon_wait_exit(struct du_daemon *d, int timeout_ms);
/*
 * Send sig (0: none, the signal was sent already) and wait (timeout_ms)
 * for the exit; the test fails if it does not exit in time (the daemon is
 * then killed).  Returns the wait status.  Send SIGTERM only once: the
 * daemon is free to die of a second one while it stops.
 */
int du_daemon_stop(struct du_daemon *d, int sig, int timeout_ms);
/* SIGKILL and reap; no-op when not running. */
void du_daemon_kill(struct du_daemon *d);
/* Kill if running, remove the directory, forget it.  NULL is a no-op. */
void du_daemon_free(struct du_daemon *d);
/* The log so far (stdout and stderr), NUL-terminated; free() it. */
char *du_daemon_log(const struct du_daemon *d);
/* Fail the test unless status is a normal exit with code `code`. */
void du_assert_exit(const struct du_daemon *d, int status, int code);

/* ---- raw protocol connections ------------------------------------------- */

typedef Bitwheel__V1__Envelope du_env;

struct du_conn {
	int fd;
	uint8_t *in;
	size_t in_off, in_len, in_cap;
	size_t max_frame;      /* what a frame from the daemon may be      */
	bool eof;              /* the daemon closed (or reset)             */
	bool reset;            /* ...with ECONNRESET                       */
	int bad;               /* the bwp_error of a bad frame, or 0       */
	uint64_t rx_ns;        /* when the last frame's bytes were read    */
	uint64_t rx_real_ns;   /* the same on CLOCK_REALTIME, which some
				  hosts run at a rate of its own (5,000 ppm
				  apart from CLOCK_MONOTONIC seen on one) */
	/* Fired frames put aside by du_expect_reply/du_expect_error. */
	struct du_kept { du_env *env; uint64_t rx_ns; } *kept;
	size_t kept_head, kept_len, kept_cap;
};

/* Connect to path; 0 or -errno (ECONNREFUSED, ENOENT, EACCES, ...). */
int du_try_connect(const char *path, struct du_conn **out);
/* Connect or fail the test. */
struct du_conn *du_connect(const char *path);
/* Close and free; NULL is a no-op. */
void du_conn_free(struct du_conn *c);

enum du_recv_rc {
	DU_FRAME = 0,          /* *out is a frame: bwp_frame_free() it     */
	DU_TIMEOUT = 1,        /* nothing complete within the timeout      */
	DU_EOF = 2,            /* the daemon closed the connection         */
	DU_BAD = 3,            /* bytes that are no frame (c->bad says why) */
};
/*
 * The next frame off the socket (not the kept ones), waiting at most
 * timeout_ms (0: only what has arrived).  c->rx_ns is when its last bytes
 * were read.
 */
int du_recv(struct du_conn *c, int timeout_ms, du_env **out);

/* Write all of buf; 0, -errno (EPIPE, ECONNRESET) or -ETIMEDOUT. */
int du_conn_send_bytes(struct du_conn *c, const void *buf, size_t len,
		       int timeout_ms);

/* Frames packed back to back, to be sent in one write (pipelining). */
struct du_buf {
	uint8_t *data;
	size_t len, cap;
};
void du_buf_pack(struct du_buf *b, const du_env *env);
void du_buf_free(struct du_buf *b);
/* Send b's frames (failing the test if they cannot be written) and empty b. */
void du_send_buf(struct du_conn *c, struct du_buf *b);
/* Pack and send one envelope. */
void du_send_env(struct du_conn *c, const du_env *env);

/* What a Schedule carries; zero-initialise and set what the test needs. */
enum du_when { DU_DELAY, DU_DEADLINE, DU_NO_WHEN, DU_REALTIME, DU_CALENDAR };
struct du_sched {
	uint64_t key;
	bool no_key;           /* leave the key out                        */
	enum du_when when;
	uint64_t when_ns;
	bool periodic;         /* period_ns present (even when 0)          */
	uint64_t period_ns;
	const void *payload;   /* NULL: no payload field                   */
	size_t payload_len;
	bool replace;
	bool leeway;           /* leeway_ns present                        */
	uint64_t leeway_ns;
	const char *calendar;  /* DU_CALENDAR's spec                       */
	bool jitter;           /* jitter_ns present                        */
	uint64_t jitter_ns;
	bool jitter_fixed;     /* jitter_fixed present and true            */
	bool grace;            /* misfire_grace_ns present                 */
	uint64_t grace_ns;
	bool boot;             /* clock CLOCK_BOOTTIME                     */
};

/*
 * Hello as a test wants it.  du_pack_hello() and du_hello() ask, for a
 * named session, for a consumer with auto_ack (every fire arrives, none
 * needs an Ack: the timing, session and framing tests), and nothing more
 * for an anonymous one; the delivery tests say what they want here.
 */
struct du_hello_opts {
	int role;              /* 0: absent; else a Bitwheel__V1__Role     */
	bool has_window;
	uint32_t window;
	uint64_t ack_timeout_ns; /* 0: absent                              */
	bool has_auto_ack;
	bool auto_ack;
	size_t session_len;    /* 0: strlen(session); else bytes to send   */
	bool has_owner_uid;
	uint32_t owner_uid;    /* whose namespace (root may name another)  */
	bool coalesce;         /* sent as true when set                    */
};
void du_pack_hello_opts(struct du_buf *b, uint64_t id, const char *session,
			const struct du_hello_opts *o);
du_env *du_hello_opts(struct du_conn *c, const char *session,
		      const struct du_hello_opts *o);
struct du_conn *du_open_opts(const struct du_daemon *d, const char *session,
			     const struct du_hello_opts *o);
/* A manual-ack consumer's Hello: this window (0: absent) and ack timeout
 * (0: absent): the delivery, failure and budget tests' usual consumer. */
struct du_hello_opts du_consumer_opts(uint32_t window, uint64_t ack_timeout_ns);
/* A producer's Hello: role PRODUCER and nothing else (no fire arrives). */
extern const struct du_hello_opts du_producer_opts;
/* Connect and say Hello as du_consumer_opts(window, ack_timeout_ns) or as
 * du_producer_opts; the reply is discarded. */
struct du_conn *du_open_consumer(const struct du_daemon *d, const char *session,
				 uint32_t window, uint64_t ack_timeout_ns);
struct du_conn *du_open_producer(const struct du_daemon *d, const char *session);
/* Ack delivery (has_id false: no request_id, and no reply comes). */
void du_pack_ack(struct du_buf *b, bool has_id, uint64_t id, uint64_t delivery,
		 bool cumulative);
void du_send_ack(struct du_conn *c, bool has_id, uint64_t id, uint64_t delivery,
		 bool cumulative);
/* Ack with request_id id and wait for its AckReply: the count it acked. */
uint64_t du_ack(struct du_conn *c, uint64_t id, uint64_t delivery,
		bool cumulative);

/*
 * Fires that fail (PROTOCOL.md 6, Release, Touch, SetPolicy, Kick), each
 * with request_id id; the caller awaits the reply (du_expect_reply) or
 * the error.  Release: delay_ns absent when has_delay is false.  Touch:
 * timeout_ns absent when 0.  SetPolicy: max_deliveries absent when
 * has_max is false, dead_letter absent when NULL (else its bytes, "" the
 * empty value).  Kick: key absent when has_key is false, limit absent
 * when 0.
 */
void du_send_release(struct du_conn *c, uint64_t id, uint64_t delivery,
		     bool has_delay, uint64_t delay_ns);
void du_send_touch(struct du_conn *c, uint64_t id, uint64_t delivery,
		   uint64_t timeout_ns);
void du_send_set_policy(struct du_conn *c, uint64_t id, bool has_max,
			uint32_t max_deliveries, const char *dead_letter);
void du_send_kick(struct du_conn *c, uint64_t id, bool has_key, uint64_t key,
		  uint32_t limit);

void du_pack_hello(struct du_buf *b, uint64_t id, const char *session);
void du_pack_schedule(struct du_buf *b, uint64_t id, const struct du_sched *s);
void du_pack_cancel(struct du_buf *b, uint64_t id, uint64_t key);
void du_pack_stats(struct du_buf *b, uint64_t id);
void du_send_hello(struct du_conn *c, uint64_t id, const char *session);
void du_send_schedule(struct du_conn *c, uint64_t id, const struct du_sched *s);
void du_send_cancel(struct du_conn *c, uint64_t id, uint64_t key);
void du_send_stats(struct du_conn *c, uint64_t id);

/* "error DUPLICATE_KEY (11) id=3: key 7 is pending" and the like. */
const char *du_describe(const du_env *env, char *buf, size_t len);
const char *du_error_name(int code);

/*
 * The reply to request id, of body case bc (a Bitwheel__V1__Envelope__
 * BodyCase), within DU_WAIT_MS.  Fired frames before it are kept for
 * du_expect_fire(); anything else fails the test.  free it with
 * bwp_frame_free().
 */
du_env *du_expect_reply(struct du_conn *c, uint64_t id, int bc);
/*
 * An Error with this code: with_id says whether it answers request id or
 * is connection-level (no request_id).  Fired frames before it are kept.
 */
void du_expect_error(struct du_conn *c, bool with_id, uint64_t id, int code);
/* The next Fired: a kept one first, else off the socket. *rx_ns (may be
 * NULL) is when it was read. */
du_env *du_expect_fire(struct du_conn *c, int timeout_ms, uint64_t *rx_ns);
/* Fail the test if any frame arrives within ms, or the connection ends. */
void du_expect_quiet(struct du_conn *c, int ms);
/* Fail unless the daemon closes the connection within timeout_ms, with no
 * frame before. */
void du_expect_eof(struct du_conn *c, int timeout_ms);
/* Kept fires not yet taken. */
size_t du_kept_fires(const struct du_conn *c);

/* Hello (request_id 1) and its HelloReply, which the caller frees. */
du_env *du_hello(struct du_conn *c, const char *session);
/* Connect and say Hello; the reply is discarded. */
struct du_conn *du_open(const struct du_daemon *d, const char *session);
/* Schedule and its ScheduleReply (caller frees). */
du_env *du_schedule(struct du_conn *c, uint64_t id, const struct du_sched *s);
/* Cancel; CancelReply.pending. */
bool du_cancel(struct du_conn *c, uint64_t id, uint64_t key);
/* Stats and its StatsReply (caller frees). */
du_env *du_stats(struct du_conn *c, uint64_t id);
/* ListTimers of session (NULL: ListSessions), from cursor (0: the
 * start; else a reply's cursor), at most limit entries (0: as many as
 * fit); du_list waits for its reply (caller frees). */
void du_send_list(struct du_conn *c, uint64_t id, const char *session,
		  uint32_t limit, uint64_t cursor);
du_env *du_list(struct du_conn *c, uint64_t id, const char *session,
		uint32_t limit, uint64_t cursor);
/* The SessionInfo named name in a ListSessionsReply envelope, or NULL
 * (anonymous sessions have no name and never match). */
const Bitwheel__V1__SessionInfo *du_session_in(const du_env *e, const char *name);
/*
 * The daemon still serves a new client: connect, Hello, Stats.  Returns
 * the StatsReply envelope (caller frees).
 */
du_env *du_fresh_stats(const struct du_daemon *d);
void du_assert_serving(const struct du_daemon *d);

/*
 * A fire's timing as seen from outside: fired_at_ns >= deadline_ns, the
 * receive time rx_ns >= deadline_ns, and neither later than the deadline
 * plus res_ns plus du_margin_ns().  Returns the lateness (rx - deadline).
 */
uint64_t du_check_fire_time(const Bitwheel__V1__Fired *f, uint64_t rx_ns,
			    uint64_t res_ns);

/*
 * A periodic timer's next deadline after a fire at fired_ns (PROTOCOL.md 6):
 * the first of first, first + period, first + 2 period, ... after it.  A
 * daemon that fell a whole period behind skips deadlines; fire_count still
 * counts fires.
 */
uint64_t du_next_period(uint64_t first, uint64_t period, uint64_t fired_ns);

/* ---- processes ------------------------------------------------------ */

struct du_result {
	int status;            /* exit code; -1 when killed or timed out   */
	int signal;            /* the signal that ended it, 0 if none      */
	bool timed_out;        /* killed by du_proc_finish's deadline      */
	char *out, *err;       /* all it wrote, NUL-terminated             */
	uint64_t elapsed_ns;
};

struct du_proc {
	pid_t pid;
	int out_fd, err_fd;
	uint64_t started_ns;
	char *out, *err;
	size_t out_len, out_cap, err_len, err_cap;
};

/*
 * Start argv (argv[0] a path, or a name searched in PATH) with stdin from
 * /dev/null and the output captured.  env: NULL, or a NULL-terminated list
 * of "NAME=value" to set and "NAME" to unset in the child.  The child stays
 * in the test's process group, so Check kills it with the test.
 */
void du_proc_start(struct du_proc *p, const char *const *argv,
		   const char *const *env);
/* Collect output until it exits; SIGKILL after timeout_ms. */
void du_proc_finish(struct du_proc *p, int timeout_ms, struct du_result *r);
void du_run(const char *const *argv, const char *const *env, int timeout_ms,
	    struct du_result *r);
void du_result_free(struct du_result *r);
/* "exit 3" / "killed by signal 9" / "timed out", and both outputs. */
const char *du_result_describe(const struct du_result *r, char *buf,
			       size_t len);

/* ---- small things ------------------------------------------------------ */

/* A line for the test log (stdout, flushed: a failing test exits without
 * flushing stdio). */
void du_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* In a forked child: become uid (and the gid of the same number), with no
 * supplementary groups and no way back to root, or _exit(99). */
void du_become(uid_t uid);
/* A forked child's exit code (128 + the signal if one killed it); the
 * child is killed and the test fails after timeout_ms. */
int du_wait_child(pid_t pid, int timeout_ms);
/* The same, but the raw waitpid status (WIFEXITED and the like apply). */
int du_wait_status(pid_t pid, int timeout_ms);
/* "exit 3" or "signal 9" for a waitpid status. */
const char *du_status_text(int status, char *buf, size_t len);
/* All of len bytes from fd (a pipe from a forked child) within timeout_ms;
 * false at EOF or timeout. */
bool du_read_full(int fd, void *buf, size_t len, int timeout_ms);
/* fork() with a pipe from the child to the test: in the child (0 returned)
 * *fd is the write end, in the test (the pid returned) the read end; the
 * other end is closed on each side.  Fails the test if either call fails. */
pid_t du_fork_pipe(int *fd);
/* Run fn(d) in a forked child as uid (du_become); the test fails unless
 * it exits 0 within timeout_ms. */
void du_run_as(uid_t uid, const struct du_daemon *d,
	       void (*fn)(const struct du_daemon *d), int timeout_ms);

/* ---- a stand-in listener ------------------------------------------------ */

/*
 * A process posing as bitwheeld under another uid: forked, in its own
 * process group (registered, so a failed test's is killed), it becomes
 * uid, binds sock in dir (a scratch directory it owns, mode 0755; the
 * socket 0666, so anyone may connect) and answers whoever connects: a
 * Hello with a HelloReply (protocol version 2, daemon_version "fake"), a
 * Stats with an empty StatsReply; anything else closes.  Each connection,
 * once closed, is reported: how many bytes the client had sent, which
 * says whether a client that refused the listener sent it anything.
 */
struct du_fake {
	pid_t pid;
	int slot;
	int report_fd;         /* one uint64_t per closed connection       */
	char dir[64];
	char sock[96];
};

struct du_fake *du_fake_start(uid_t uid);
/* The bytes the next connection to close had sent; the test fails if
 * none closes within timeout_ms. */
uint64_t du_fake_next_conn(struct du_fake *f, int timeout_ms);
/* Kill it, remove the directory; NULL is a no-op. */
void du_fake_free(struct du_fake *f);

/* Whether the file name exists in PATH (an executable). */
bool du_have_tool(const char *name);
/* Raise RLIMIT_NOFILE's soft limit to at least n (up to the hard limit);
 * the limit in force afterwards. */
unsigned long du_raise_nofile(unsigned long n);
/* Whole file as a string (NULL with errno set); free() it. */
char *du_read_file(const char *path);
/* A "Name:  N kB" field of /proc/pid/status (VmRSS, VmHWM, ...) in KiB;
 * fails the test when it cannot be read. */
uint64_t du_proc_status_kb(pid_t pid, const char *field);

#endif /* BW_DAEMONUTIL_H */
