/*
 * check_budget.c - bitwheeld's per-uid budgets (bitwheeld(8) "Security and
 * limits", PROTOCOL.md sections 9 and 10), against real daemons with small
 * budgets:
 *
 *   connections  --max-clients-per-uid: uid 65534's connection past it,
 *                said Hello or not, gets TOO_MANY_CLIENTS at accept while
 *                root and uid 65533 still connect; one closing makes room
 *   sessions     --max-sessions-per-uid: a Hello creating one named session
 *                too many gets OVER_BUDGET and is closed; attaching to one
 *                that exists works, anonymous sessions do not count, and
 *                one expiring makes room
 *   timers       --max-timers-per-uid: pending timers plus undelivered
 *                fires over all of a uid's sessions; a replace still
 *                works, a cancel makes room, fires nobody took still count
 *   rate         --max-periodic-rate-per-uid: the sum of 1/period over a
 *                uid's periodic timers, across its sessions
 *   bytes        --max-bytes-per-uid: a uid's timers, fires and unread
 *                output; refused with OVER_BUDGET one byte past it and
 *                accepted at it exactly; a replace adds only its growth,
 *                a cancel makes room, a queued fire holds its payload,
 *                a periodic timer's fires past it are dropped, unread
 *                output counts, and stops at the budget
 *   memory       --max-memory: the same over every uid, root too, refused
 *                with NO_MEMORY; the daemon's RSS with a uid at its bytes
 *                budget stays under that budget plus a fixed slack, with
 *                that uid's consumers not reading too (their output
 *                counts and stops at the budget); a uid's share, half of
 *                what the others leave: four uids fill theirs and a fifth
 *                is still served; --output-timeout cuts off consumers
 *                that never read, and their fires all come to a reader
 *   file         --budgets: a uid's rule, a group's (for its members), the
 *                default for everyone else, root exempt unless a rule
 *                names it; HelloReply.limits shows the caller's own; a bad
 *                file stops the daemon naming the file and line; SIGHUP
 *                reads it again, and a bad one then changes nothing; a
 *                file others could write or own, a FIFO, a link (to
 *                /dev/zero), a device or one over 1 MiB is refused at
 *                start and on SIGHUP, at once, naming the reason, the
 *                daemon serving and its RSS unchanged
 *   root         uid 0 is counted and never refused
 *   stats        StatsReply's uid_* fields are the caller's own uid's, and
 *                HelloReply.limits carries the budgets and their defaults;
 *                a non-root caller's every figure is its own uid's: uid
 *                65534's activity is invisible to uid 65533, visible to
 *                root
 *   redelivery   a consumer of uid 65534 that never acknowledges, with
 *                the shortest ack timeout (1 ns asked, 100 ms given),
 *                gets its fires again at its periodic-rate budget, not
 *                its whole window every tick; nothing is lost meanwhile
 *   recovery     after a SIGKILL and a restart with --state-dir, the
 *                restored timers, rate and bytes count: the budget still
 *                refuses; with budgets lowered, nothing restored is
 *                dropped
 *
 * The uid tests run the clients in forked children that drop to uid 65534
 * (or 65533), so they need root; without it they pass saying SKIP.  Every
 * wait has a deadline; nothing depends on a timer firing but the one test
 * of undelivered fires, which polls Stats for them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemonutil.h"
#include "testutil.h"

#define BC(x) BITWHEEL__V1__ENVELOPE__BODY_##x
#define EC(x) BITWHEEL__V1__ERROR_CODE__##x

#define NOBODY 65534
#define OTHER 65533
#define HOUR (3600 * DU_S)

typedef Bitwheel__V1__StatsReply stats_t;

/* ---- helpers -------------------------------------------------------------- */

static bool need_root(const char *test)
{
	if (geteuid() == 0)
		return true;
	/* Check has no "skip": the test passes and says so. */
	du_note("SKIP: %s needs root (to run clients as uid %d)", test, NOBODY);
	return false;
}

/* A daemon whose socket every uid may reach, with these options. */
static void start(struct du_daemon *d, const char *const *extra)
{
	const char *argv[24] = { "--socket-mode", "0666" };
	size_t n = 2;

	for (; extra && *extra; extra++) {
		ck_assert(n < sizeof(argv) / sizeof(argv[0]) - 1);
		argv[n++] = *extra;
	}
	argv[n] = NULL;
	du_daemon_startv(d, argv);
}

static struct du_daemon *shared_daemon(const char *const *extra)
{
	struct du_daemon *d = du_daemon_new();

	ck_assert(chmod(d->dir, 0755) == 0);
	start(d, extra);
	return d;
}

/* The next frame that is not a Fired is an Error with this code (for
 * request id, or connection-level) whose message holds `has`. */
static void expect_error_msg(struct du_conn *c, bool with_id, uint64_t id,
			     int code, const char *has)
{
	char buf[512];
	du_env *e;

	for (;;) {
		int rc = du_recv(c, DU_WAIT_MS, &e);

		ck_assert_msg(rc == DU_FRAME, "awaiting error %s: %s", du_error_name(code),
			      rc == DU_TIMEOUT ? "timed out" : rc == DU_EOF ?
			      "connection closed" : "bad frame");
		if (e->body_case != BC(FIRED))
			break;
		bwp_frame_free(e);
	}
	ck_assert_msg(e->body_case == BC(ERROR) && (int)e->error->code == code &&
		      e->has_request_id == with_id && (!with_id || e->request_id == id),
		      "expected error %s (id %" PRIu64 "), got %s", du_error_name(code), id,
		      du_describe(e, buf, sizeof(buf)));
	ck_assert_msg(!has || (e->error->message && strstr(e->error->message, has)),
		      "error message '%s' lacks '%s'", e->error->message, has);
	bwp_frame_free(e);
}

/* A periodic one with its period for leeway: in the periodic lane. */
static struct du_sched timer(uint64_t key, uint64_t delay_ns, uint64_t period_ns)
{
	struct du_sched s = { .key = key, .when = DU_DELAY, .when_ns = delay_ns,
			      .periodic = period_ns != 0, .period_ns = period_ns,
			      .leeway = period_ns != 0, .leeway_ns = period_ns };

	return s;
}

/* Schedule that must succeed; whether it replaced a timer. */
static bool sched_ok(struct du_conn *c, uint64_t id, uint64_t key,
		     uint64_t delay_ns, uint64_t period_ns, bool replace)
{
	struct du_sched s = timer(key, delay_ns, period_ns);
	du_env *e;
	bool replaced;

	s.replace = replace;
	e = du_schedule(c, id, &s);
	replaced = e->schedule_reply->replaced;
	bwp_frame_free(e);
	return replaced;
}

/* Schedule (replace: of a pending key) that must fail with code, its
 * message holding `has`. */
static void sched_fail_r(struct du_conn *c, uint64_t id, uint64_t key,
			 uint64_t delay_ns, uint64_t period_ns, bool replace,
			 int code, const char *has)
{
	struct du_sched s = timer(key, delay_ns, period_ns);

	s.replace = replace;
	du_send_schedule(c, id, &s);
	expect_error_msg(c, true, id, code, has);
}

static void sched_fail(struct du_conn *c, uint64_t id, uint64_t key,
		       uint64_t delay_ns, uint64_t period_ns, int code,
		       const char *has)
{
	sched_fail_r(c, id, key, delay_ns, period_ns, false, code, has);
}

/* Stats on c (which said Hello): a copy of the reply. */
static stats_t stats(struct du_conn *c, uint64_t id)
{
	du_env *e = du_stats(c, id);
	stats_t s = *e->stats_reply;

	ck_assert(s.has_uid_connections && s.has_uid_sessions &&
		  s.has_uid_timers && s.has_uid_periodic_rate_mhz && s.has_uid_bytes);
	s.oneshot = s.periodic = NULL;
	bwp_frame_free(e);
	return s;
}

/* Poll Stats on c until the field at offset reaches want. */
#define AWAIT_STAT(c, id, field, want) do {					\
	uint64_t dl_ = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS, got_;	\
	for (;;) {								\
		got_ = stats((c), (id)).field;					\
		if (got_ == (want) || du_now_ns() > dl_)			\
			break;							\
		du_sleep_ms(5);							\
	}									\
	ck_assert_msg(got_ == (want), "Stats." #field " stayed %" PRIu64	\
		      ", awaiting %" PRIu64, got_, (uint64_t)(want));		\
} while (0)

/* ---- bytes --------------------------------------------------------------- */

#define BIG 4000u                  /* a payload, under --max-payload 4096 */
static const uint8_t zeros[4096];

/* Schedule key with a payload of len bytes (replace: a pending key); 0,
 * or the error's code, its message holding `has` (NULL: anything). */
static int sched_bytes(struct du_conn *c, uint64_t id, uint64_t key, size_t len,
		       uint64_t delay_ns, uint64_t period_ns, bool replace,
		       int code, const char *has)
{
	struct du_sched s = timer(key, delay_ns, period_ns);
	du_env *e;

	s.payload = zeros;
	s.payload_len = len;
	s.replace = replace;
	if (code) {
		du_send_schedule(c, id, &s);
		expect_error_msg(c, true, id, code, has);
		return code;
	}
	e = du_schedule(c, id, &s);
	bwp_frame_free(e);
	return 0;
}

/*
 * Fill the bytes that bound (uid_bytes, or for root alone the daemon's)
 * to exactly `budget` with one-hour timers from key on, refused with code
 * one byte before; *id is the next request id.  A timer's cost is its
 * payload plus what one without payload costs (cost0, measured by the
 * caller as Stats.uid_bytes with one such timer alone).  The next key.
 */
static uint64_t fill_exactly(struct du_conn *c, uint64_t *id, uint64_t key,
			     uint64_t cost0, uint64_t budget, int code,
			     const char *has)
{
	uint64_t used = stats(c, (*id)++).uid_bytes;

	while (budget - used - cost0 > BIG) {
		sched_bytes(c, (*id)++, key++, BIG, HOUR, 0, false, 0, NULL);
		used += cost0 + BIG;
	}
	ck_assert_uint_eq(stats(c, (*id)++).uid_bytes, used);
	sched_bytes(c, (*id)++, key, budget - used - cost0 + 1, HOUR, 0, false,
		    code, has);
	sched_bytes(c, (*id)++, key++, budget - used - cost0, HOUR, 0, false, 0, NULL);
	ck_assert_uint_eq(stats(c, (*id)++).uid_bytes, budget);
	return key;
}

static void pipe_put(int fd)
{
	ck_assert(write(fd, "x", 1) == 1);
}

static void pipe_get(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b;

	ck_assert_msg(poll(&p, 1, DU_WAIT_MS) == 1, "the other process never said go");
	ck_assert_msg(read(fd, &b, 1) == 1, "the other process is gone");
}

/* ---- connections ------------------------------------------------------- */

static void other_connects(const struct du_daemon *d)
{
	struct du_conn *c[3];

	for (int i = 0; i < 3; i++)
		c[i] = du_open(d, NULL);
	ck_assert_uint_eq(stats(c[0], 2).uid_connections, 3);
	for (int i = 0; i < 3; i++)
		du_conn_free(c[i]);
}

START_TEST(test_uid_connections)
{
	static const char *const extra[] = { "--max-clients-per-uid", "3", NULL };
	struct du_daemon *d;
	struct du_conn *root[5];
	int ready[2], go[2];
	pid_t pid;

	if (!need_root("test_uid_connections"))
		return;
	d = shared_daemon(extra);
	ck_assert(pipe(ready) == 0 && pipe(go) == 0);
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		struct du_conn *c[3], *x;

		close(ready[0]);
		close(go[1]);
		du_become(NOBODY);
		c[0] = du_open(d, NULL);
		c[1] = du_open(d, "conns");
		/* Counted from accept: one that never says Hello holds a
		 * place as well. */
		c[2] = du_connect(d->sock);
		x = du_connect(d->sock);
		expect_error_msg(x, false, 0, EC(TOO_MANY_CLIENTS),
				 "uid 65534 is at its budget of 3 connections");
		du_expect_eof(x, DU_WAIT_MS);
		du_conn_free(x);
		ck_assert_uint_eq(stats(c[0], 2).uid_connections, 3);
		pipe_put(ready[1]);
		pipe_get(go[0]);
		/* One closes: room for one more, and no more. */
		du_conn_free(c[2]);
		AWAIT_STAT(c[0], 3, uid_connections, 2);
		c[2] = du_open(d, NULL);
		x = du_connect(d->sock);
		expect_error_msg(x, false, 0, EC(TOO_MANY_CLIENTS), "max_clients_per_uid");
		du_conn_free(x);
		for (int i = 0; i < 3; i++)
			du_conn_free(c[i]);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	pipe_get(ready[0]);
	/* uid 65534 is at its budget; root (exempt) and uid 65533 are not
	 * held back by it. */
	for (int i = 0; i < 5; i++)
		root[i] = du_open(d, NULL);
	{
		stats_t s = stats(root[0], 2);

		ck_assert_uint_eq(s.uid_connections, 5);
		ck_assert_uint_eq(s.clients, 8);
	}
	du_run_as(OTHER, d, other_connects, DU_WAIT_MS);
	for (int i = 0; i < 5; i++)
		du_conn_free(root[i]);
	pipe_put(go[1]);
	ck_assert_msg(du_wait_child(pid, DU_WAIT_MS) == 0,
		      "the uid %d client failed (see above)", NOBODY);
	close(ready[0]);
	close(go[1]);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---- sessions ------------------------------------------------------------ */

static void sessions_client(const struct du_daemon *d)
{
	struct du_conn *a, *b, *x, *anon[3];
	du_env *e;

	a = du_open(d, "s-a");
	b = du_open_producer(d, "s-b");
	x = du_connect(d->sock);
	du_send_hello(x, 1, "s-c");
	expect_error_msg(x, true, 1, EC(OVER_BUDGET),
			 "uid 65534 has 2 named sessions; its budget is 2");
	du_expect_eof(x, DU_WAIT_MS);
	du_conn_free(x);
	/* An existing one still takes another connection. */
	x = du_connect(d->sock);
	e = du_hello(x, "s-a");
	ck_assert(e->hello_reply->resumed);
	bwp_frame_free(e);
	du_conn_free(x);
	/* Anonymous sessions are not named sessions. */
	for (int i = 0; i < 3; i++)
		anon[i] = du_open(d, NULL);
	{
		stats_t s = stats(anon[0], 2);

		ck_assert_uint_eq(s.uid_sessions, 2);
		ck_assert_uint_eq(s.uid_connections, 5);
	}
	/* s-b expires after its linger (--linger 200ms): room for s-c. */
	du_conn_free(b);
	AWAIT_STAT(a, 3, uid_sessions, 1);
	x = du_open(d, "s-c");
	ck_assert_uint_eq(stats(x, 2).uid_sessions, 2);
	du_conn_free(x);
	for (int i = 0; i < 3; i++)
		du_conn_free(anon[i]);
	du_conn_free(a);
}

START_TEST(test_uid_sessions)
{
	static const char *const extra[] = { "--max-sessions-per-uid", "2",
					     "--linger", "200ms", NULL };
	struct du_daemon *d;

	if (!need_root("test_uid_sessions"))
		return;
	d = shared_daemon(extra);
	du_run_as(NOBODY, d, sessions_client, DU_WAIT_MS);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---- timers -------------------------------------------------------------- */

static void timers_client(const struct du_daemon *d)
{
	struct du_conn *p1, *p2, *q, *r;
	uint64_t id = 10;

	/* Ten pending timers over two sessions. */
	p1 = du_open(d, "t-1");
	p2 = du_open(d, "t-2");
	for (uint64_t k = 1; k <= 6; k++)
		sched_ok(p1, id++, k, HOUR, 0, false);
	for (uint64_t k = 7; k <= 10; k++)
		sched_ok(p2, id++, k, HOUR, 0, false);
	sched_fail(p2, id++, 11, HOUR, 0, EC(TOO_MANY_TIMERS),
		   "uid 65534's pending timers and undelivered fires over all its sessions (10) are at its budget of 10");
	sched_fail(p1, id++, 11, HOUR, 0, EC(TOO_MANY_TIMERS), "max_timers_per_uid");
	/* A replace adds nothing. */
	ck_assert(sched_ok(p1, id++, 1, 2 * HOUR, 0, true));
	/* A cancel makes room for one. */
	ck_assert(du_cancel(p2, id++, 7));
	sched_ok(p2, id++, 11, HOUR, 0, false);
	sched_fail(p2, id++, 12, HOUR, 0, EC(TOO_MANY_TIMERS), "max_timers_per_uid");
	ck_assert_uint_eq(stats(p1, id++).uid_timers, 10);

	/* Fires nobody has taken count as the timers they were. */
	for (uint64_t k = 2; k <= 4; k++)
		ck_assert(du_cancel(p1, id++, k));
	q = du_open_producer(d, "t-q");
	for (uint64_t k = 21; k <= 23; k++)
		sched_ok(q, id++, k, 20 * DU_MS, 0, false);
	AWAIT_STAT(q, id++, queued, 3);
	ck_assert_uint_eq(stats(q, id++).uid_timers, 10);
	sched_fail(p1, id++, 30, HOUR, 0, EC(TOO_MANY_TIMERS), "max_timers_per_uid");
	/* A consumer takes them: once done, they no longer count. */
	r = du_open(d, "t-q");
	for (int i = 0; i < 3; i++)
		bwp_frame_free(du_expect_fire(r, DU_WAIT_MS, NULL));
	AWAIT_STAT(q, id++, uid_timers, 7);
	sched_ok(p1, id++, 30, HOUR, 0, false);
	du_conn_free(r);
	du_conn_free(q);
	du_conn_free(p2);
	du_conn_free(p1);
}

START_TEST(test_uid_timers)
{
	static const char *const extra[] = { "--max-timers-per-uid", "10", NULL };
	struct du_daemon *d;

	if (!need_root("test_uid_timers"))
		return;
	d = shared_daemon(extra);
	du_run_as(NOBODY, d, timers_client, DU_WAIT_MS);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---- periodic rate -------------------------------------------------------- */

static void rate_client(const struct du_daemon *d)
{
	struct du_conn *c, *a;
	uint64_t id = 10;

	/* Ten 100 ms periodic timers: 10 Hz each, 100 Hz in all, first due in
	 * an hour (the rate counts from Schedule, not from a fire). */
	c = du_open(d, "rate");
	for (uint64_t k = 1; k <= 10; k++)
		sched_ok(c, id++, k, HOUR, 100 * DU_MS, false);
	sched_fail(c, id++, 11, HOUR, 100 * DU_MS, EC(OVER_BUDGET),
		   "uid 65534's periodic timers would fire 110 times a second; its budget is 100");
	/* The uid's other sessions share it. */
	a = du_open(d, NULL);
	sched_fail(a, id++, 1, HOUR, 2 * DU_S, EC(OVER_BUDGET),
		   "would fire 100.5 times a second; its budget is 100");
	/* Oneshots are not in it; replacing at the same rate is fine, at a
	 * higher one is not. */
	sched_ok(a, id++, 2, HOUR, 0, false);
	ck_assert(sched_ok(c, id++, 1, HOUR, 100 * DU_MS, true));
	sched_fail_r(c, id++, 1, HOUR, 50 * DU_MS, true, EC(OVER_BUDGET),
		     "would fire 110 times");
	ck_assert_uint_eq(stats(c, id++).uid_periodic_rate_mhz, 100000);
	/* A cancel makes room. */
	ck_assert(du_cancel(c, id++, 2));
	ck_assert_uint_eq(stats(c, id++).uid_periodic_rate_mhz, 90000);
	sched_ok(c, id++, 11, HOUR, 100 * DU_MS, false);
	/* A oneshot replacing a periodic timer gives its share back. */
	ck_assert(sched_ok(c, id++, 3, HOUR, 0, true));
	sched_ok(a, id++, 3, HOUR, 100 * DU_MS, false);
	sched_fail(a, id++, 4, HOUR, 1000 * DU_MS, EC(OVER_BUDGET), "would fire 101 times");
	du_conn_free(a);
	/* The anonymous session's timers went with it. */
	AWAIT_STAT(c, id++, uid_periodic_rate_mhz, 90000);
	du_conn_free(c);
}

START_TEST(test_uid_rate)
{
	static const char *const extra[] = { "--max-periodic-rate-per-uid", "100", NULL };
	struct du_daemon *d;

	if (!need_root("test_uid_rate"))
		return;
	d = shared_daemon(extra);
	du_run_as(NOBODY, d, rate_client, DU_WAIT_MS);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---- bytes --------------------------------------------------------------- */

#define BYTES_BUDGET 65536u
#define REPLY_SLACK 1024u         /* more than any one reply */
#define BYTES_OUTPUT 65536u

/* Stats requests enough that their replies (40 bytes or more each) fill
 * the kernel's socket buffers (wmem_default, on either side) and then the
 * daemon's output past its half-way mark.  The daemon stops reading them
 * there, so the socket need not take them all: a send that times out
 * found the socket full, that is holding requests for replies many times
 * the output that is left to fill. */
static size_t flood_count(void)
{
	FILE *f = fopen("/proc/sys/net/core/wmem_default", "r");
	unsigned long wmem = 212992;

	if (f) {
		if (fscanf(f, "%lu", &wmem) != 1)
			wmem = 212992;
		fclose(f);
	}
	return (2 * wmem + 4 * BYTES_OUTPUT) / 40;
}

static void bytes_client(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, "b-1"), *a, *q, *r, *x;
	struct du_buf b = { 0 };
	uint64_t id = 10, cost0, key, before, with_fire, t;
	stats_t st;
	int rc;

	ck_assert_uint_eq(stats(c, id++).uid_bytes, 0);
	sched_bytes(c, id++, 1, 0, HOUR, 0, false, 0, NULL);
	cost0 = stats(c, id++).uid_bytes;
	ck_assert(cost0 > 0 && cost0 < 512);
	key = fill_exactly(c, &id, 2, cost0, BYTES_BUDGET, EC(OVER_BUDGET),
			   "its budget of 65536 (max_bytes_per_uid)");
	/* At it: nothing more, from any of the uid's sessions. */
	sched_bytes(c, id++, key, 0, HOUR, 0, false, EC(OVER_BUDGET),
		    "uid 65534 holds 65536 bytes of timers, fires and unread output");
	a = du_open(d, NULL);
	sched_bytes(a, id++, 1, 0, HOUR, 0, false, EC(OVER_BUDGET), "max_bytes_per_uid");
	/* A replace adds only what it grows by. */
	sched_bytes(c, id++, 1, 0, 2 * HOUR, 0, true, 0, NULL);
	sched_bytes(c, id++, 1, 1, 2 * HOUR, 0, true, EC(OVER_BUDGET), "1 more");
	/* A cancel makes room for as much. */
	ck_assert(du_cancel(c, id++, 2));
	ck_assert_uint_eq(stats(c, id++).uid_bytes, BYTES_BUDGET - cost0 - BIG);
	before = BYTES_BUDGET - cost0 - BIG;

	/* A fire nobody took holds its payload until it is done. */
	q = du_open_producer(d, "b-q");
	sched_bytes(q, id++, 1, BIG, 20 * DU_MS, 0, false, 0, NULL);
	AWAIT_STAT(q, id++, queued, 1);
	with_fire = stats(q, id++).uid_bytes;
	ck_assert_msg(with_fire > before + BIG && with_fire <= BYTES_BUDGET,
		      "with a fire of %u bytes queued, uid_bytes %" PRIu64 " (before %" PRIu64 ")",
		      BIG, with_fire, before);
	/* du_open's consumer acknowledges by reading (auto_ack). */
	r = du_open(d, "b-q");
	bwp_frame_free(du_expect_fire(r, DU_WAIT_MS, NULL));
	AWAIT_STAT(q, id++, uid_bytes, before);
	du_conn_free(r);

	/* A periodic timer's fires past the budget are dropped, not kept. */
	sched_bytes(q, id++, 2, BIG, 10 * DU_MS, 10 * DU_MS, false, 0, NULL);
	ck_assert_uint_eq(stats(q, id++).uid_bytes, BYTES_BUDGET);
	t = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	while ((st = stats(q, id++)).dropped < 3 && du_now_ns() < t)
		du_sleep_ms(10);
	ck_assert_msg(st.dropped >= 3, "periodic fires past the budget: %" PRIu64 " dropped",
		      st.dropped);
	ck_assert_uint_eq(st.uid_bytes, BYTES_BUDGET);
	ck_assert_uint_eq(st.queued, 0);
	ck_assert(du_cancel(q, id++, 2));

	/* Unread output counts: a connection that asks and never reads. */
	x = du_open(d, NULL);
	for (size_t i = 0, n = flood_count(); i < n; i++)
		du_pack_stats(&b, 100 + (uint64_t)i);
	rc = du_conn_send_bytes(x, b.data, b.len, du_scale_ms(100));
	ck_assert_msg(rc == 0 || rc == -ETIMEDOUT, "flooding: %s", strerror(-rc));
	du_buf_free(&b);
	/* ... up to the budget, give or take a reply: the connection takes
	 * no more output (and reads no more requests) from when its uid is
	 * at the budget until its client reads all it has, so it passes the
	 * budget by one reply at most, and it may have stopped short of it
	 * by one (this one's stats reply, unread for a moment, may be what
	 * took the uid to the budget). */
	t = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	while ((st = stats(c, id++)).uid_bytes < BYTES_BUDGET - REPLY_SLACK &&
	       du_now_ns() < t)
		du_sleep_ms(10);
	du_sleep_ms(100);
	st = stats(c, id++);
	ck_assert_msg(st.uid_bytes >= BYTES_BUDGET - REPLY_SLACK &&
		      st.uid_bytes <= BYTES_BUDGET + REPLY_SLACK,
		      "a connection not reading took uid_bytes to %" PRIu64 " (timers alone %" PRIu64 "), not to the budget of %u",
		      st.uid_bytes, before, BYTES_BUDGET);
	sched_bytes(c, id++, 2, BIG, HOUR, 0, false, EC(OVER_BUDGET), "max_bytes_per_uid");
	du_conn_free(x);
	AWAIT_STAT(c, id++, uid_bytes, before);
	sched_bytes(c, id++, 2, BIG, HOUR, 0, false, 0, NULL);

	du_conn_free(q);
	du_conn_free(a);
	du_conn_free(c);
}

START_TEST(test_uid_bytes)
{
	static const char *const extra[] = {
		"--max-bytes-per-uid", "64K", "--max-timers-per-uid", "100000",
		"--max-payload", "4096", "--max-output", "65536", NULL,
	};
	struct du_daemon *d;

	if (!need_root("test_uid_bytes"))
		return;
	d = shared_daemon(extra);
	du_run_as(NOBODY, d, bytes_client, DU_WAIT_MS);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---- memory ---------------------------------------------------------------- */

static void memory_other(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, NULL);

	sched_bytes(c, 10, 1, 0, HOUR, 0, false, EC(NO_MEMORY),
		    "its bound of 65536 (max_memory)");
	du_conn_free(c);
}

START_TEST(test_max_memory)
{
	static const char *const extra[] = {
		"--max-memory", "64K", "--max-payload", "4096", NULL,
	};
	struct du_daemon *d;
	struct du_conn *c;
	uint64_t id = 10, cost0;

	if (geteuid() != 0) {
		du_note("SKIP: test_max_memory needs root (anyone else's bytes meet their uid's budget first)");
		return;
	}
	d = shared_daemon(extra);
	c = du_open(d, "m-1");
	/* Root alone: its bytes are the daemon's, and root is not spared. */
	sched_bytes(c, id++, 1, 0, HOUR, 0, false, 0, NULL);
	cost0 = stats(c, id++).uid_bytes;
	fill_exactly(c, &id, 2, cost0, 65536, EC(NO_MEMORY),
		     "the daemon holds");
	sched_bytes(c, id++, 1, 1, HOUR, 0, true, EC(NO_MEMORY), "max_memory");
	du_run_as(NOBODY, d, memory_other, DU_WAIT_MS);
	ck_assert(du_cancel(c, id++, 2));
	sched_bytes(c, id++, 2, BIG, HOUR, 0, false, 0, NULL);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

#define RSS_BUDGET (16u << 20)
#define RSS_SLACK_KB 4096u

static void rss_attacker(const struct du_daemon *d)
{
	struct du_conn *c[4];
	/* Each run its own keys: the sessions outlive it. */
	uint64_t id = 10, key = (uint64_t)getpid() << 32;
	char name[16];
	int refused = 0;

	/* Pipelined, 64 at a time, into four named sessions left detached. */
	for (int s = 0; s < 4; s++) {
		snprintf(name, sizeof(name), "rss-%d", s);
		c[s] = du_open_producer(d, name);
	}
	for (int s = 0; !refused; s = (s + 1) % 4) {
		struct du_buf b = { 0 };
		uint64_t first = id;

		for (int i = 0; i < 64; i++) {
			struct du_sched sc = timer(key++, HOUR, 0);

			sc.payload = zeros;
			sc.payload_len = BIG;
			du_pack_schedule(&b, id++, &sc);
		}
		du_send_buf(c[s], &b);
		du_buf_free(&b);
		for (uint64_t i = first; i < id; i++) {
			du_env *e;

			ck_assert(du_recv(c[s], DU_WAIT_MS, &e) == DU_FRAME);
			if (e->body_case == BC(ERROR)) {
				ck_assert_int_eq(e->error->code, EC(OVER_BUDGET));
				refused++;
			}
			bwp_frame_free(e);
		}
	}
	ck_assert_uint_le(stats(c[0], id++).uid_bytes, RSS_BUDGET);
	ck_assert_uint_ge(stats(c[0], id++).uid_bytes, RSS_BUDGET - 64 * (BIG + 512));
	for (int s = 0; s < 4; s++)
		du_conn_free(c[s]);
}

START_TEST(test_memory_rss)
{
	static const char *const extra[] = {
		"--max-bytes-per-uid", "16M", "--max-timers-per-uid", "1000000",
		"--max-payload", "4096", NULL,
	};
	struct du_daemon *d;
	uint64_t rss0, rss, bound;

	if (!need_root("test_memory_rss") ||
	    du_skip_if_wrapped("test_memory_rss", "the RSS measured would be valgrind's"))
		return;
	d = shared_daemon(extra);
	rss0 = du_proc_status_kb(d->pid, "VmRSS");
	du_run_as(NOBODY, d, rss_attacker, DU_WAIT_MS);
	du_run_as(NOBODY, d, rss_attacker, DU_WAIT_MS);
	rss = du_proc_status_kb(d->pid, "VmRSS");
	bound = RSS_BUDGET / 1024 + RSS_SLACK_KB;
	du_note("memory: uid %d at its bytes budget of %u KiB: daemon RSS %" PRIu64
		" KiB before, %" PRIu64 " KiB after, growth %" PRIu64 " KiB, bound %" PRIu64
		" KiB (budget + %u KiB slack)", NOBODY, RSS_BUDGET / 1024, rss0, rss,
		rss - rss0, bound, RSS_SLACK_KB);
#ifdef __SANITIZE_ADDRESS__
	du_note("memory: RSS bound not asserted under AddressSanitizer (redzones, quarantine)");
#else
	ck_assert_msg(rss - rss0 <= bound, "the daemon's RSS grew by %" PRIu64
		      " KiB with one uid at a budget of %u KiB; bound %" PRIu64 " KiB",
		      rss - rss0, RSS_BUDGET / 1024, bound);
#endif
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/*
 * Unread output held to the budget: a uid fills its bytes budget with
 * fires due at once, taken by UNREAD_CONNS consumers that never read.
 * Their output counts in the uid's bytes, and a connection of a uid at
 * its budget gets no more output while it has some unread, so the
 * uid's bytes stay within the budget and a frame per connection, and the
 * daemon's peak RSS within the budget and a fixed slack (before, each
 * connection buffered up to half of --max-output on top: 8 MiB here).
 * The child measures, while its connections are open.
 */
#define UNREAD_CONNS 16
#define UNREAD_FRAME (BIG + 512u)

static uint64_t unread_rss0;

static void unread_attacker(const struct du_daemon *d)
{
	struct du_conn *c[UNREAD_CONNS], *p;
	uint64_t id = 10, key = 1, t, last = UINT64_MAX, hwm, bound;
	stats_t st;
	int refused = 0;

	for (int i = 0; i < UNREAD_CONNS; i++)
		c[i] = du_open_consumer(d, "unread", 4096, 0);
	p = du_open_producer(d, "unread");
	while (!refused) {
		struct du_buf b = { 0 };
		uint64_t first = id;

		for (int i = 0; i < 64; i++) {
			struct du_sched sc = timer(key++, 300 * DU_MS, 0);

			sc.payload = zeros;
			sc.payload_len = BIG;
			du_pack_schedule(&b, id++, &sc);
		}
		du_send_buf(p, &b);
		du_buf_free(&b);
		for (uint64_t i = first; i < id; i++) {
			du_env *e;

			ck_assert(du_recv(p, DU_WAIT_MS, &e) == DU_FRAME);
			if (e->body_case == BC(ERROR)) {
				ck_assert_int_eq(e->error->code, EC(OVER_BUDGET));
				refused++;
			}
			bwp_frame_free(e);
		}
	}
	/* Until the fires stop going out: in flight the same twice, 200 ms
	 * apart. */
	t = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	for (;;) {
		du_sleep_ms(200);
		st = stats(p, id++);
		if ((st.in_flight == last && st.in_flight > 0) || du_now_ns() > t)
			break;
		last = st.in_flight;
	}
	hwm = du_proc_status_kb(d->pid, "VmHWM");
	bound = RSS_BUDGET / 1024 + RSS_SLACK_KB;
	du_note("memory: uid %d at its bytes budget of %u KiB, %d consumers not reading: %"
		PRIu64 " fires in flight, %" PRIu64 " queued, uid_bytes %" PRIu64
		"; daemon RSS %" PRIu64 " KiB before, peak %" PRIu64 " KiB, growth %" PRIu64
		" KiB, bound %" PRIu64 " KiB (budget + %u KiB slack)", NOBODY, RSS_BUDGET / 1024,
		UNREAD_CONNS, st.in_flight, st.queued, st.uid_bytes, unread_rss0, hwm,
		hwm - unread_rss0, bound, RSS_SLACK_KB);
#ifdef __SANITIZE_ADDRESS__
	du_note("memory: RSS bound not asserted under AddressSanitizer (redzones, quarantine)");
#else
	ck_assert_msg(hwm - unread_rss0 <= bound, "the daemon's RSS peaked %" PRIu64
		      " KiB over its start with uid %d at a budget of %u KiB and %d consumers not reading; bound %"
		      PRIu64 " KiB", hwm - unread_rss0, NOBODY, RSS_BUDGET / 1024, UNREAD_CONNS, bound);
#endif
	ck_assert_msg(st.uid_bytes <= RSS_BUDGET + UNREAD_CONNS * UNREAD_FRAME,
		      "uid_bytes %" PRIu64 " with its consumers not reading: past the budget of %u"
		      " by more than a frame per connection", st.uid_bytes, RSS_BUDGET);
	for (int i = 0; i < UNREAD_CONNS; i++)
		du_conn_free(c[i]);
	du_conn_free(p);
}

START_TEST(test_memory_unread)
{
	static const char *const extra[] = {
		"--max-bytes-per-uid", "16M", "--max-timers-per-uid", "1000000",
		"--max-payload", "4096", NULL,
	};
	struct du_daemon *d;

	if (!need_root("test_memory_unread") ||
	    du_skip_if_wrapped("test_memory_unread", "the RSS measured would be valgrind's"))
		return;
	d = shared_daemon(extra);
	unread_rss0 = du_proc_status_kb(d->pid, "VmRSS");
	du_run_as(NOBODY, d, unread_attacker, DU_WAIT_MS);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/*
 * Fair shares of --max-memory: four uids each fill what the daemon lets
 * them hold (their bytes budget, a quarter of --max-memory, or their
 * share: half of what the others leave), and a fifth still schedules and
 * gets its fires.  Before, the four took all of it and the fifth got
 * NO_MEMORY.
 */
#define SHARE_MEMORY (4u << 20)
#define SHARE_VICTIM 65530
#define SHARE_FIRES 16

static void share_hog(const struct du_daemon *d)
{
	struct du_conn *c = du_open_producer(d, "hog");
	uint64_t id = 10, key = 1;
	stats_t st;
	int code = 0;

	while (!code) {
		struct du_sched s = timer(key++, HOUR, 0);
		du_env *e;

		s.payload = zeros;
		s.payload_len = BIG;
		du_send_schedule(c, id++, &s);
		ck_assert(du_recv(c, DU_WAIT_MS, &e) == DU_FRAME);
		if (e->body_case == BC(ERROR))
			code = (int)e->error->code;
		bwp_frame_free(e);
	}
	ck_assert_msg(code == EC(OVER_BUDGET) || code == EC(NO_MEMORY),
		      "a hog refused with %s", du_error_name(code));
	st = stats(c, id++);
	du_note("memory: uid %ld holds %" PRIu64 " bytes, refused with %s",
		(long)getuid(), st.uid_bytes, du_error_name(code));
	ck_assert_uint_le(st.uid_bytes, SHARE_MEMORY / 4);
	du_conn_free(c);
}

static void share_victim(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, NULL);
	uint64_t id = 10;

	for (uint64_t k = 1; k <= SHARE_FIRES; k++)
		sched_bytes(c, id++, k, BIG, 50 * DU_MS, 0, false, 0, NULL);
	for (int i = 0; i < SHARE_FIRES; i++)
		bwp_frame_free(du_expect_fire(c, DU_WAIT_MS, NULL));
	du_conn_free(c);
}

START_TEST(test_memory_share)
{
	static const char *const extra[] = {
		"--max-memory", "4M", "--max-payload", "4096",
		"--max-timers-per-uid", "100000", NULL,
	};
	struct du_daemon *d;

	if (!need_root("test_memory_share"))
		return;
	d = shared_daemon(extra);
	for (uid_t u = NOBODY; u > NOBODY - 4; u--)
		du_run_as(u, d, share_hog, DU_WAIT_MS);
	du_run_as(SHARE_VICTIM, d, share_victim, DU_WAIT_MS);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/*
 * Connections that never read are cut off after --output-timeout, and
 * the fires they held come back: STALL_READERS consumers that never read
 * take what their sockets and output hold of STALL_FIRES fires; they are
 * disconnected about a second later, and a consumer that reads then gets
 * every one of the fires, those marked redelivered among them.  Before,
 * they were never disconnected and kept their fires in flight for good.
 */
#define STALL_READERS 4
#define STALL_FIRES 2000u
#define STALL_PAYLOAD 1000u

START_TEST(test_output_timeout)
{
	static const char *const extra[] = {
		"--output-timeout", "1s", "--max-output", "65536", NULL,
	};
	struct du_daemon *d = shared_daemon(extra);
	struct du_conn *stall[STALL_READERS], *p, *r;
	static bool seen[STALL_FIRES + 1];
	uint64_t id = 10, t, got = 0, again = 0;
	stats_t st;

	for (int i = 0; i < STALL_READERS; i++)
		stall[i] = du_open_consumer(d, "stall", 4096, 0);
	p = du_open_producer(d, "stall");
	for (uint64_t k = 1; k <= STALL_FIRES; k += 100) {
		struct du_buf b = { 0 };

		for (uint64_t i = k; i < k + 100; i++) {
			struct du_sched sc = timer(i, 50 * DU_MS, 0);

			sc.payload = zeros;
			sc.payload_len = STALL_PAYLOAD;
			du_pack_schedule(&b, id++, &sc);
		}
		du_send_buf(p, &b);
		du_buf_free(&b);
		for (uint64_t i = k; i < k + 100; i++)
			bwp_frame_free(du_expect_reply(p, id - 100 + (i - k),
						       BC(SCHEDULE_REPLY)));
	}
	/* Handed to the consumers that do not read, as far as they take. */
	t = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	while ((st = stats(p, id++)).in_flight == 0 && du_now_ns() < t)
		du_sleep_ms(10);
	ck_assert_msg(st.in_flight > 0, "no fire went to the consumers");
	if (!du_wrapped())
		ck_assert_uint_eq(st.consumers, STALL_READERS);
	AWAIT_STAT(p, id++, consumers, 0);
	ck_assert_uint_eq(stats(p, id++).in_flight, 0);
	if (geteuid() == 0) {
		/* Root's Stats: counted as slow consumers. */
		du_env *e = du_fresh_stats(d);

		ck_assert_ptr_nonnull(e->stats_reply->metrics);
		ck_assert_uint_eq(e->stats_reply->metrics->slow_consumer_disconnects,
				  STALL_READERS);
		bwp_frame_free(e);
	}
	r = du_open(d, "stall");
	while (got < STALL_FIRES) {
		du_env *e = du_expect_fire(r, DU_WAIT_MS, NULL);
		uint64_t k = e->fired->key;

		ck_assert_msg(k >= 1 && k <= STALL_FIRES && !seen[k], "fire of key %" PRIu64
			      " unexpected or repeated", k);
		seen[k] = true;
		got++;
		again += e->fired->redelivered;
		bwp_frame_free(e);
	}
	du_note("output timeout: %u consumers not reading cut off; all %" PRIu64
		" fires came to a reader, %" PRIu64 " of them redelivered", STALL_READERS, got, again);
	ck_assert(again > 0);
	for (int i = 0; i < STALL_READERS; i++)
		du_conn_free(stall[i]);
	du_conn_free(r);
	du_conn_free(p);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---- the budget file ------------------------------------------------------- */

/* Schedule one-hour timers from key 1 until one is refused, which must be
 * TOO_MANY_TIMERS naming budget; HelloReply.limits must say it first. */
static void timers_until(const struct du_daemon *d, uint64_t budget)
{
	struct du_conn *c = du_connect(d->sock);
	du_env *e = du_hello(c, NULL);
	char want[64];
	uint64_t id = 10;

	ck_assert_uint_eq(e->hello_reply->limits->max_timers_per_uid, budget);
	bwp_frame_free(e);
	for (uint64_t k = 1; k <= budget; k++)
		sched_ok(c, id++, k, HOUR, 0, false);
	snprintf(want, sizeof(want), "budget of %" PRIu64 " (max_timers_per_uid)", budget);
	sched_fail(c, id++, budget + 1, HOUR, 0, EC(TOO_MANY_TIMERS), want);
	du_conn_free(c);
}

static void file_nobody(const struct du_daemon *d)
{
	struct du_conn *c = du_connect(d->sock);
	du_env *e = du_hello(c, "f-1");

	/* Its group's rule: sessions 1, timers 6; the default's bytes. */
	ck_assert_uint_eq(e->hello_reply->limits->max_sessions_per_uid, 1);
	ck_assert_uint_eq(e->hello_reply->limits->max_bytes_per_uid, 1u << 20);
	bwp_frame_free(e);
	du_conn_free(c);
	c = du_connect(d->sock);
	du_send_hello(c, 1, "f-2");
	expect_error_msg(c, true, 1, EC(OVER_BUDGET), "its budget is 1");
	du_conn_free(c);
	timers_until(d, 6);
}

static void file_other(const struct du_daemon *d)
{
	timers_until(d, 3);
}

static void file_default(const struct du_daemon *d)
{
	timers_until(d, 4);
}

/* A budget file in the daemon's scratch directory, mode 0644 whatever the
 * umask, padded with one comment line to `size` bytes when size > 0;
 * whatever was at the path (a FIFO, a link) is replaced. */
static void write_sized(const struct du_daemon *d, char *path, size_t len,
			const char *text, size_t size)
{
	FILE *f;

	snprintf(path, len, "%s/budgets", d->dir);
	ck_assert(unlink(path) == 0 || errno == ENOENT);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert(fputs(text, f) >= 0);
	if (size > 0) {
		ck_assert(size >= strlen(text) + 2);
		ck_assert(fputc('#', f) != EOF);
		for (size_t i = strlen(text) + 2; i < size; i++)
			ck_assert(fputc('x', f) != EOF);
		ck_assert(fputc('\n', f) != EOF);
	}
	ck_assert(fclose(f) == 0);
	ck_assert(chmod(path, 0644) == 0);
}

static void write_file(const struct du_daemon *d, char *path, size_t len,
		       const char *text)
{
	write_sized(d, path, len, text, 0);
}

START_TEST(test_budget_file)
{
	struct du_daemon *d;
	struct passwd *pw = getpwuid(NOBODY);
	struct group *gr = pw ? getgrgid(pw->pw_gid) : NULL;
	char path[160], text[512];
	const char *extra[] = { "--budgets", path, NULL };
	struct du_conn *c;
	uint64_t id = 10;

	if (!need_root("test_budget_file"))
		return;
	if (!gr) {
		du_note("SKIP: test_budget_file needs a user %d with a group", NOBODY);
		return;
	}
	d = du_daemon_new();
	ck_assert(chmod(d->dir, 0755) == 0);
	/* The default rule after the others: order does not matter. */
	snprintf(text, sizeof(text),
		 "# budgets for check_budget\n"
		 "group %s timers=6 sessions=1   # uid %d's primary group\n"
		 "uid %d timers=3\n"
		 "\n"
		 "default timers=4 bytes=1M\n", gr->gr_name, NOBODY, OTHER);
	write_file(d, path, sizeof(path), text);
	start(d, extra);
	du_run_as(NOBODY, d, file_nobody, DU_WAIT_MS);
	du_run_as(OTHER, d, file_other, DU_WAIT_MS);
	du_run_as(OTHER - 1, d, file_default, DU_WAIT_MS);
	/* Root is named by no rule: exempt. */
	c = du_open(d, NULL);
	for (uint64_t k = 1; k <= 10; k++)
		sched_ok(c, id++, k, HOUR, 0, false);
	du_conn_free(c);
	du_daemon_kill(d);

	/* Unless a rule names it. */
	write_file(d, path, sizeof(path),
		   "user root timers=2 sessions=unlimited periodic-rate=unlimited\n");
	start(d, extra);
	timers_until(d, 2);
	{
		du_env *e;

		c = du_connect(d->sock);
		e = du_hello(c, NULL);
		ck_assert_uint_eq(e->hello_reply->limits->max_sessions_per_uid, UINT64_MAX);
		ck_assert_uint_eq(e->hello_reply->limits->max_periodic_rate_per_uid, UINT64_MAX);
		bwp_frame_free(e);
		du_conn_free(c);
	}
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* SIGHUP, then wait until the log says `want`. */
static void hup(struct du_daemon *d, const char *want)
{
	uint64_t t = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	char *log = NULL;

	ck_assert(kill(d->pid, SIGHUP) == 0);
	for (;;) {
		free(log);
		log = du_daemon_log(d);
		if (strstr(log, want) || du_now_ns() > t)
			break;
		du_sleep_ms(10);
	}
	ck_assert_msg(strstr(log, want), "no \"%s\" in the log after SIGHUP: %s", want, log);
	free(log);
	du_assert_serving(d);
}

static void reload_3(const struct du_daemon *d)
{
	timers_until(d, 3);
}

static void reload_5(const struct du_daemon *d)
{
	timers_until(d, 5);
}

START_TEST(test_budget_reload)
{
	struct du_daemon *d;
	char path[160], text[128];
	const char *extra[] = { "--budgets", path, NULL };

	if (!need_root("test_budget_reload"))
		return;
	d = du_daemon_new();
	ck_assert(chmod(d->dir, 0755) == 0);
	snprintf(text, sizeof(text), "uid %d timers=3\n", NOBODY);
	write_file(d, path, sizeof(path), text);
	start(d, extra);
	du_run_as(NOBODY, d, reload_3, DU_WAIT_MS);
	snprintf(text, sizeof(text), "uid %d timers=5\n", NOBODY);
	write_file(d, path, sizeof(path), text);
	hup(d, "budgets read again from");
	du_run_as(NOBODY, d, reload_5, DU_WAIT_MS);
	/* A file gone bad: logged with its line, the budgets stay. */
	write_file(d, path, sizeof(path), "uid 1 timers=1\nuid 1 sessions=1\n");
	hup(d, "not read again");
	du_run_as(NOBODY, d, reload_5, DU_WAIT_MS);
	du_daemon_kill(d);
	/* Without a file, SIGHUP no longer kills the daemon. */
	start(d, NULL);
	hup(d, "SIGHUP: no --budgets file");
	du_daemon_free(d);
}
END_TEST

/* --budgets path stops d from starting (exit 2, within the wait: a FIFO
 * must not hang it), its log naming the path and saying want. */
static void refused_at_start(struct du_daemon *d, const char *path, const char *want)
{
	char sock[160], *log;
	const char *argv[] = { DU_DAEMON_PATH, "--socket", sock, "--budgets", path, NULL };

	snprintf(sock, sizeof(sock), "%s", d->sock);
	du_daemon_spawn(d, argv);
	ck_assert_msg(du_daemon_wait_exit(d, DU_WAIT_MS), "the daemon started on a bad file");
	log = du_daemon_log(d);
	ck_assert_msg(WIFEXITED(d->status) && WEXITSTATUS(d->status) == 2,
		      "status 0x%x, not exit 2; log: %s", (unsigned)d->status, log);
	ck_assert_msg(strstr(log, path) && strstr(log, want),
		      "no \"%s: ...%s\" in the log: %s", path, want, log);
	free(log);
}

/* A file that does not parse stops the daemon (exit 2) naming its line. */
static void bad_file(const char *text, const char *want)
{
	struct du_daemon *d = du_daemon_new();
	char path[160];

	write_file(d, path, sizeof(path), text);
	refused_at_start(d, path, want);
	du_daemon_free(d);
}

START_TEST(test_budget_file_bad)
{
	bad_file("default timers=4\nuid 12 bogus=1\n", ":2: unknown key 'bogus'");
	bad_file("\n\n# x\nuid 5 timers=1 timers=2\n", ":4: timers given twice");
	bad_file("uid 5 timers=1\nuid 6 timers=1\nuid 5 sessions=1\n",
		 ":3: uid 5 already has its budget (line 1)");
	bad_file("user no-such-user-here timers=1\n", ":1: no user 'no-such-user-here'");
	bad_file("group no-such-group-here timers=1\n", ":1: no group 'no-such-group-here'");
	bad_file("uid 7\n", ":1: no KEY=VALUE");
	bad_file("uid -7 timers=1\n", ":1: uid '-7' is not a number");
	bad_file("uid 7 bytes=12Q\n", ":1: bytes=12Q: not a size");
	bad_file("default timers=1\ndefault sessions=1\n", ":2: a second default rule (the first is line 1)");
	bad_file("users 7 timers=1\n", ":1: 'users' is not default, uid, user or group");
}
END_TEST

/* The budget a Hello tells the caller (this process's uid) it has. */
static void my_timers_budget(const struct du_daemon *d, uint64_t want)
{
	struct du_conn *c = du_connect(d->sock);
	du_env *e = du_hello(c, NULL);

	ck_assert_uint_eq(e->hello_reply->limits->max_timers_per_uid, want);
	bwp_frame_free(e);
	du_conn_free(c);
}

/* How bad_path() spoils a good budget file. */
enum spoil { OTHERS_WRITE, GROUP_WRITE, FIFO, LINK_DEV_ZERO, OVERSIZED, NOT_OURS };

static const struct {
	const char *want;          /* in the log                             */
} spoiled[] = {
	[OTHERS_WRITE] = { "writable by others (mode 0646), who could set every uid's budgets" },
	[GROUP_WRITE] = { "writable by its group (mode 0664)" },
	[FIFO] = { "a FIFO, not a regular file" },
	[LINK_DEV_ZERO] = { "a symbolic link; name the file itself" },
	[OVERSIZED] = { "1048577 bytes, more than a budget file may hold (1048576)" },
	[NOT_OURS] = { "owned by uid 65534, not by the daemon's uid" },
};

/* The budget file at path, made as spoil says, offering this process's
 * uid `timers` where it is a file at all. */
static void bad_path(const struct du_daemon *d, char *path, size_t len,
		     enum spoil how, unsigned timers)
{
	char text[64];

	snprintf(text, sizeof(text), "uid %u timers=%u\n", (unsigned)getuid(), timers);
	write_sized(d, path, len, text, how == OVERSIZED ? (1u << 20) + 1 : 0);
	switch (how) {
	case OTHERS_WRITE:
		ck_assert(chmod(path, 0646) == 0);
		break;
	case GROUP_WRITE:
		ck_assert(chmod(path, 0664) == 0);
		break;
	case FIFO:
		ck_assert(unlink(path) == 0 && mkfifo(path, 0644) == 0);
		break;
	case LINK_DEV_ZERO:
		ck_assert(unlink(path) == 0 && symlink("/dev/zero", path) == 0);
		break;
	case NOT_OURS:
		ck_assert(chown(path, NOBODY, (gid_t)-1) == 0);
		break;
	case OVERSIZED:
		break;
	}
}

/*
 * The budget file is trusted as the state directory is: one another user
 * could write or own, a FIFO (which must not hang start-up), a symbolic
 * link (to /dev/zero, say), a device, or a file over 1 MiB stops the
 * daemon from starting, naming the file and the reason; a file of exactly
 * 1 MiB is read.
 */
START_TEST(test_budget_file_trust)
{
	struct du_daemon *d;
	char path[160], text[64];
	const char *extra[] = { "--budgets", path, NULL };

	for (int how = OTHERS_WRITE; how <= NOT_OURS; how++) {
		if (how == NOT_OURS && geteuid() != 0) {
			du_note("SKIP: test_budget_file_trust: a file of another uid needs root");
			continue;
		}
		d = du_daemon_new();
		bad_path(d, path, sizeof(path), (enum spoil)how, 1000);
		refused_at_start(d, path, spoiled[how].want);
		du_daemon_free(d);
	}
	d = du_daemon_new();
	refused_at_start(d, "/dev/zero", "a device, not a regular file");
	du_daemon_free(d);

	d = du_daemon_new();
	snprintf(text, sizeof(text), "uid %u timers=7\n", (unsigned)getuid());
	write_sized(d, path, sizeof(path), text, 1u << 20);
	start(d, extra);
	my_timers_budget(d, 7);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/*
 * The same files on SIGHUP: each refused at once, logged with its reason,
 * the budgets in force unchanged (the others-writable one offered 1000
 * timers), the daemon serving (a FIFO used to hang it in open(2)) and its
 * RSS where it was (a link to /dev/zero used to grow it by gigabytes);
 * then a good file is read again.
 */
START_TEST(test_budget_reload_trust)
{
	struct du_daemon *d = du_daemon_new();
	char path[160], text[64];
	const char *extra[] = { "--budgets", path, NULL };
	uint64_t rss0, rss;

	snprintf(text, sizeof(text), "uid %u timers=3\n", (unsigned)getuid());
	write_file(d, path, sizeof(path), text);
	start(d, extra);
	my_timers_budget(d, 3);
	rss0 = du_proc_status_kb(d->pid, "VmRSS");
	for (int how = OTHERS_WRITE; how <= NOT_OURS; how++) {
		if (how == NOT_OURS && geteuid() != 0)
			continue;
		bad_path(d, path, sizeof(path), (enum spoil)how, 1000);
		hup(d, spoiled[how].want);
		my_timers_budget(d, 3);
	}
	rss = du_proc_status_kb(d->pid, "VmRSS");
	if (!du_wrapped())
		ck_assert_msg(rss < rss0 + 16 * 1024, "RSS %" PRIu64 " KiB, %" PRIu64 " before the bad files",
			      rss, rss0);
	snprintf(text, sizeof(text), "uid %u timers=5\n", (unsigned)getuid());
	write_file(d, path, sizeof(path), text);
	hup(d, "budgets read again from");
	my_timers_budget(d, 5);
	du_daemon_free(d);
}
END_TEST

/* ---- root ----------------------------------------------------------------- */

static void small_client(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, "small");
	uint64_t id = 10;

	for (uint64_t k = 1; k <= 10; k++)
		sched_ok(c, id++, k, HOUR, 100 * DU_MS, false);
	sched_fail(c, id++, 11, HOUR, 0, EC(TOO_MANY_TIMERS), "max_timers_per_uid");
	du_conn_free(c);
}

static const char *const all_small[] = {
	"--max-clients-per-uid", "3", "--max-sessions-per-uid", "2",
	"--max-timers-per-uid", "10", "--max-periodic-rate-per-uid", "100", NULL,
};

START_TEST(test_root_exempt)
{
	struct du_daemon *d;
	struct du_conn *c[5];
	uint64_t id = 10;
	stats_t s;

	if (!need_root("test_root_exempt"))
		return;
	d = shared_daemon(all_small);
	c[0] = du_open(d, NULL);
	c[1] = du_connect(d->sock);
	c[2] = du_open(d, "root-1");
	c[3] = du_open(d, "root-2");
	c[4] = du_open(d, "root-3");
	for (uint64_t k = 1; k <= 11; k++)
		sched_ok(c[2], id++, k, HOUR, 100 * DU_MS, false);
	for (uint64_t k = 12; k <= 22; k++)
		sched_ok(c[3], id++, k, HOUR, 0, false);
	/* Counted all the same. */
	s = stats(c[0], id++);
	ck_assert_uint_eq(s.uid_connections, 5);
	ck_assert_uint_eq(s.uid_sessions, 3);
	ck_assert_uint_eq(s.uid_timers, 22);
	ck_assert_uint_eq(s.uid_periodic_rate_mhz, 110000);
	/* And none of it is another uid's. */
	du_run_as(NOBODY, d, small_client, DU_WAIT_MS);
	for (int i = 0; i < 5; i++)
		du_conn_free(c[i]);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---- stats and limits ------------------------------------------------------ */

static void stats_client(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, "mine"), *a = du_open(d, NULL);
	stats_t s;

	sched_ok(c, 10, 1, HOUR, DU_S, false);
	sched_ok(a, 10, 2, HOUR, 0, false);
	sched_ok(a, 11, 3, HOUR, 400 * DU_MS, false);
	s = stats(a, 12);
	ck_assert_uint_eq(s.uid_connections, 2);
	ck_assert_uint_eq(s.uid_sessions, 1);
	ck_assert_uint_eq(s.uid_timers, 3);
	ck_assert_uint_eq(s.uid_periodic_rate_mhz, 3500);
	du_conn_free(a);
	du_conn_free(c);
}

START_TEST(test_uid_stats)
{
	static const char *const extra[] = { "--max-clients", "40", NULL };
	struct du_daemon *d = shared_daemon(extra);
	struct du_conn *c = du_connect(d->sock);
	du_env *e = du_hello(c, NULL);
	const Bitwheel__V1__Limits *l = e->hello_reply->limits;
	stats_t s;

	/* The budgets and their defaults, in HelloReply.limits. */
	ck_assert(l->has_max_clients_per_uid && l->has_max_sessions_per_uid &&
		  l->has_max_timers_per_uid && l->has_max_periodic_rate_per_uid);
	ck_assert_uint_eq(l->max_clients_per_uid, 10);
	ck_assert_uint_eq(l->max_sessions_per_uid, 256);
	ck_assert(l->has_max_bytes_per_uid && l->has_max_memory_bytes);
	ck_assert_uint_eq(l->max_memory_bytes, 1u << 30);
	ck_assert_uint_eq(l->max_bytes_per_uid, l->max_memory_bytes / 4);
	/* Four sessions' worth, but no more than the bytes hold at the
	 * largest payload. */
	ck_assert_uint_le(l->max_timers_per_uid, 4 * l->max_timers);
	ck_assert_uint_le(l->max_timers_per_uid * l->max_payload_bytes,
			  l->max_bytes_per_uid);
	ck_assert_uint_ge(l->max_timers_per_uid * (l->max_payload_bytes + 256),
			  l->max_bytes_per_uid);
	ck_assert_uint_eq(l->max_periodic_rate_per_uid, 10000);
	bwp_frame_free(e);
	if (geteuid() == 0)
		du_run_as(NOBODY, d, stats_client, DU_WAIT_MS);
	/* Root's Stats are root's own: one connection, nothing else. */
	s = stats(c, 2);
	ck_assert_uint_eq(s.uid_connections, 1);
	ck_assert_uint_eq(s.uid_sessions, 0);
	ck_assert_uint_eq(s.uid_timers, 0);
	ck_assert_uint_eq(s.uid_periodic_rate_mhz, 0);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* What uid 65534 did in stats_own_a, as its Stats and root's count it. */
#define OWN_SESSIONS 2

static void lane_is(const Bitwheel__V1__LaneStats *l, uint64_t pending,
		    uint64_t inserted, uint64_t cancelled, uint64_t fired)
{
	ck_assert_msg(l->pending == pending && l->inserted == inserted &&
		      l->cancelled == cancelled && l->fired == fired,
		      "lane: pending %" PRIu64 " inserted %" PRIu64 " cancelled %" PRIu64
		      " fired %" PRIu64 ", expected %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
		      l->pending, l->inserted, l->cancelled, l->fired, pending,
		      inserted, cancelled, fired);
}

static void stats_own_a(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, "a-1"), *q;
	uint64_t id = 10;
	du_env *e;
	const Bitwheel__V1__StatsReply *s;

	for (uint64_t k = 1; k <= 3; k++)
		sched_ok(c, id++, k, HOUR, 0, false);
	sched_ok(c, id++, 4, HOUR, DU_S, false);
	sched_ok(c, id++, 5, HOUR, DU_S, false);
	ck_assert(du_cancel(c, id++, 3));
	/* One fire taken by the consumer (auto_ack), one left queued. */
	sched_ok(c, id++, 6, 10 * DU_MS, 0, false);
	bwp_frame_free(du_expect_fire(c, DU_WAIT_MS, NULL));
	q = du_open_producer(d, "a-q");
	sched_ok(q, id++, 1, 10 * DU_MS, 0, false);
	AWAIT_STAT(q, id++, queued, 1);
	AWAIT_STAT(q, id++, acked, 1);
	e = du_stats(q, id++);
	s = e->stats_reply;
	ck_assert_uint_eq(s->clients, 2);
	ck_assert_uint_eq(s->sessions, OWN_SESSIONS);
	ck_assert_uint_eq(s->in_flight, 0);
	ck_assert_uint_eq(s->consumers, 1);
	ck_assert_uint_eq(s->memory_bytes, s->uid_bytes);
	lane_is(s->oneshot, 2, 5, 1, 2);
	lane_is(s->periodic, 2, 2, 0, 0);
	bwp_frame_free(e);
	du_conn_free(q);
	du_conn_free(c);
}

/* uid 65533 sees none of it: only its own, and the uptime. */
static void stats_own_b(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, NULL);
	du_env *e = du_stats(c, 2);
	const Bitwheel__V1__StatsReply *s = e->stats_reply;

	ck_assert_uint_eq(s->clients, 1);
	ck_assert_uint_eq(s->sessions, 0);
	ck_assert_uint_eq(s->queued, 0);
	ck_assert_uint_eq(s->in_flight, 0);
	ck_assert_uint_eq(s->consumers, 1);
	ck_assert_uint_eq(s->dropped + s->acked + s->redelivered + s->expired, 0);
	ck_assert_uint_eq(s->memory_bytes, s->uid_bytes);
	lane_is(s->oneshot, 0, 0, 0, 0);
	lane_is(s->periodic, 0, 0, 0, 0);
	ck_assert(s->has_uptime_ns && s->uptime_ns > 0);
	bwp_frame_free(e);
	sched_ok(c, 3, 1, HOUR, 0, false);
	e = du_stats(c, 4);
	lane_is(e->stats_reply->oneshot, 1, 1, 0, 0);
	bwp_frame_free(e);
	du_conn_free(c);
}

/* uid 65534 back, its sessions lingering: still its own figures. */
static void stats_own_again(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, NULL);
	du_env *e = du_stats(c, 2);
	const Bitwheel__V1__StatsReply *s = e->stats_reply;

	ck_assert_uint_eq(s->clients, 1);
	ck_assert_uint_eq(s->sessions, OWN_SESSIONS);
	ck_assert_uint_eq(s->queued, 1);
	ck_assert_uint_eq(s->acked, 1);
	ck_assert_uint_eq(s->consumers, 1);
	lane_is(s->oneshot, 2, 5, 1, 2);
	lane_is(s->periodic, 2, 2, 0, 0);
	bwp_frame_free(e);
	du_conn_free(c);
}

START_TEST(test_stats_own)
{
	struct du_daemon *d;
	struct du_conn *r;
	du_env *e;
	const Bitwheel__V1__StatsReply *s;

	if (!need_root("test_stats_own"))
		return;
	d = shared_daemon(NULL);
	du_run_as(NOBODY, d, stats_own_a, DU_WAIT_MS);
	du_run_as(OTHER, d, stats_own_b, DU_WAIT_MS);
	du_run_as(NOBODY, d, stats_own_again, DU_WAIT_MS);
	/* Root sees the daemon: uid 65534's sessions, timers and fires (uid
	 * 65533's anonymous timer went with its connection). */
	r = du_open(d, NULL);
	AWAIT_STAT(r, 2, clients, 1);
	e = du_stats(r, 3);
	s = e->stats_reply;
	ck_assert_uint_eq(s->sessions, OWN_SESSIONS);
	ck_assert_uint_eq(s->queued, 1);
	ck_assert_uint_eq(s->acked, 1);
	ck_assert_uint_eq(s->oneshot->pending, 2);
	ck_assert_uint_eq(s->periodic->pending, 2);
	ck_assert_uint_eq(s->oneshot->inserted, 6);
	ck_assert_uint_gt(s->memory_bytes, s->uid_bytes);
	ck_assert_uint_eq(s->uid_sessions, 0);
	ck_assert_uint_eq(s->uid_timers, 0);
	bwp_frame_free(e);
	du_conn_free(r);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---- recovery ------------------------------------------------------------ */

static void recovery_fill(const struct du_daemon *d)
{
	struct du_conn *c = du_open_producer(d, "rec");
	uint64_t id = 10;

	for (uint64_t k = 1; k <= 9; k++)
		sched_ok(c, id++, k, HOUR, 100 * DU_MS, false);
	sched_ok(c, id++, 10, HOUR, 0, false);
	du_conn_free(c);
}

static void recovery_check(const struct du_daemon *d)
{
	struct du_conn *c = du_connect(d->sock), *a;
	du_env *e = du_hello_opts(c, "rec", &du_producer_opts);
	uint64_t id = 10;
	stats_t s;

	ck_assert(e->hello_reply->resumed);
	ck_assert_uint_eq(e->hello_reply->timers, 10);
	bwp_frame_free(e);
	s = stats(c, id++);
	ck_assert_uint_eq(s.uid_timers, 10);
	ck_assert_uint_eq(s.uid_sessions, 1);
	ck_assert_uint_eq(s.uid_periodic_rate_mhz, 90000);
	a = du_open(d, NULL);
	sched_fail(a, id++, 1, HOUR, 0, EC(TOO_MANY_TIMERS), "max_timers_per_uid");
	ck_assert(du_cancel(c, id++, 10));
	sched_fail(a, id++, 1, HOUR, 50 * DU_MS, EC(OVER_BUDGET), "would fire 110 times");
	sched_ok(a, id++, 1, HOUR, 100 * DU_MS, false);
	sched_fail(c, id++, 11, HOUR, 0, EC(TOO_MANY_TIMERS), "max_timers_per_uid");
	/* The anonymous session goes with its connection. */
	du_conn_free(a);
	AWAIT_STAT(c, id++, uid_timers, 9);
	sched_ok(c, id++, 10, HOUR, 0, false);
	du_conn_free(c);
}

/* Budgets lowered below what the journal holds: all of it comes back, and
 * the uid is over until it shrinks. */
static void recovery_over(const struct du_daemon *d)
{
	struct du_conn *c = du_connect(d->sock);
	du_env *e = du_hello_opts(c, "rec", &du_producer_opts);
	uint64_t id = 10;

	ck_assert(e->hello_reply->resumed);
	ck_assert_uint_eq(e->hello_reply->timers, 10);
	bwp_frame_free(e);
	ck_assert_uint_eq(stats(c, id++).uid_timers, 10);
	sched_fail(c, id++, 11, HOUR, 0, EC(TOO_MANY_TIMERS), "max_timers_per_uid");
	ck_assert(sched_ok(c, id++, 10, 2 * HOUR, 0, true));
	ck_assert(du_cancel(c, id++, 10));
	sched_fail(c, id++, 10, HOUR, 0, EC(TOO_MANY_TIMERS), "max_timers_per_uid");
	du_conn_free(c);
}

START_TEST(test_uid_recovery)
{
	struct du_daemon *d;
	char dir[160];
	const char *args[] = { "--state-dir", dir, "--max-timers-per-uid", "10",
			       "--max-periodic-rate-per-uid", "100", NULL };

	if (!need_root("test_uid_recovery"))
		return;
	d = du_daemon_new();
	ck_assert(chmod(d->dir, 0755) == 0);
	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	start(d, args);
	du_run_as(NOBODY, d, recovery_fill, DU_WAIT_MS);
	du_daemon_kill(d);
	start(d, args);
	du_run_as(NOBODY, d, recovery_check, DU_WAIT_MS);
	du_daemon_kill(d);
	args[3] = "5";
	start(d, args);
	du_run_as(NOBODY, d, recovery_over, DU_WAIT_MS);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* A uid at its bytes budget exactly, in one named session. */
static void bytes_fill(const struct du_daemon *d)
{
	struct du_conn *c = du_open_producer(d, "rec-b");
	uint64_t id = 10, cost0;

	sched_bytes(c, id++, 1, 0, HOUR, 0, false, 0, NULL);
	cost0 = stats(c, id++).uid_bytes;
	fill_exactly(c, &id, 2, cost0, BYTES_BUDGET, EC(OVER_BUDGET), "max_bytes_per_uid");
	du_conn_free(c);
}

/* All of it back, and the budget still full. */
static void bytes_check(const struct du_daemon *d)
{
	struct du_conn *c = du_connect(d->sock);
	du_env *e = du_hello_opts(c, "rec-b", &du_producer_opts);
	uint64_t id = 10, timers = e->hello_reply->timers;

	ck_assert(e->hello_reply->resumed);
	ck_assert_uint_gt(timers, BYTES_BUDGET / (BIG + 512));
	bwp_frame_free(e);
	ck_assert_uint_eq(stats(c, id++).uid_bytes, BYTES_BUDGET);
	sched_bytes(c, id++, 1000, 0, HOUR, 0, false, EC(OVER_BUDGET),
		    "uid 65534 holds 65536 bytes");
	ck_assert(du_cancel(c, id++, 2));
	sched_bytes(c, id++, 1000, 0, HOUR, 0, false, 0, NULL);
	du_conn_free(c);
}

START_TEST(test_bytes_recovery)
{
	struct du_daemon *d;
	char dir[160];
	const char *args[] = { "--state-dir", dir, "--max-bytes-per-uid", "64K",
			       "--max-timers-per-uid", "100000", "--max-payload",
			       "4096", NULL };

	if (!need_root("test_bytes_recovery"))
		return;
	d = du_daemon_new();
	ck_assert(chmod(d->dir, 0755) == 0);
	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	start(d, args);
	du_run_as(NOBODY, d, bytes_fill, DU_WAIT_MS);
	du_daemon_kill(d);
	start(d, args);
	du_run_as(NOBODY, d, bytes_check, DU_WAIT_MS);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---- redelivery pacing ---------------------------------------------------- */

#define PACE_FIRES 300u
#define PACE_HZ 100u

/*
 * Uid 65534's consumer reads 300 fires and never acknowledges them, with
 * the shortest ack timeout there is (1 ns asked: 100 ms given).  Every
 * 100 ms its fires are taken back; handing them out again costs the uid's
 * rate (100 Hz: a second's worth at once, then 100 a second), so in 800 ms
 * (scaled by BW_TEST_SLOW) it gets at most 100 + 80 of them again (and
 * a tenth to spare), not 300 every 100 ms.  Then a
 * consumer that acknowledges gets every one of the 300: a paced session is
 * woken by its pace timer.
 */
static void pace_client(const struct du_daemon *d)
{
	struct du_hello_opts o = du_consumer_opts(PACE_FIRES, 1);
	struct du_hello_opts ao = { .role = BITWHEEL__V1__ROLE__CONSUMER, .has_auto_ack = true,
				    .auto_ack = true };
	bool seen[PACE_FIRES] = { false };
	struct du_conn *p, *c;
	uint64_t id = 10, t0, again = 0, marked = 0, most, window_ns = (uint64_t)du_scale_ms(800) * DU_MS;
	size_t got = 0;
	du_env *e;

	p = du_open_producer(d, "pace");
	c = du_connect(d->sock);
	e = du_hello_opts(c, "pace", &o);
	ck_assert_uint_eq(e->hello_reply->ack_timeout_ns, 100 * DU_MS);
	bwp_frame_free(e);
	for (uint64_t k = 0; k < PACE_FIRES; k++)
		sched_ok(p, id++, k, 0, 0, false);
	/* The window's worth (a slow reader, under valgrind, may get some of
	 * them back already, and those again and again: a taken-back fire
	 * goes to the front of the queue). */
	for (size_t n = 0; n < PACE_FIRES; n++) {
		e = du_expect_fire(c, DU_WAIT_MS, NULL);
		ck_assert_uint_lt(e->fired->key, PACE_FIRES);
		bwp_frame_free(e);
	}
	/* Every fire from here on was handed out before: the window took all
	 * 300 at once, and the stream gave those first.  Most are marked
	 * redelivered; one taken back before its frame was written whole
	 * (a slow daemon, under valgrind) is not, and is paced all the same. */
	t0 = du_now_ns();
	while (du_now_ns() < t0 + window_ns) {
		if (du_recv(c, 50, &e) != DU_FRAME)
			continue;
		ck_assert_int_eq(e->body_case, BITWHEEL__V1__ENVELOPE__BODY_FIRED);
		marked += e->fired->redelivered;
		again++;
		bwp_frame_free(e);
	}
	/* A second's worth at once, then the rate over the window, and a
	 * tenth to spare for fires handed out before the window and read in
	 * it (without the pacing: some 3,000 a second). */
	most = (PACE_HZ + PACE_HZ * (du_now_ns() - t0) / DU_S) * 11 / 10 + 10;
	du_note("pace: %" PRIu64 " fires handed out again in %" PRIu64 " ms at %u Hz "
		"(300 taken back every 100 ms; at most %" PRIu64 ")", again,
		(du_now_ns() - t0) / DU_MS, PACE_HZ, most);
	ck_assert_msg(marked > 0, "nothing was redelivered");
	ck_assert_msg(again <= most, "%" PRIu64 " redeliveries: past the uid's %u Hz (at most %"
		      PRIu64 ")", again, PACE_HZ, most);
	du_conn_free(c);
	c = du_open_opts(d, "pace", &ao);
	while (got < PACE_FIRES) {
		e = du_expect_fire(c, DU_WAIT_MS, NULL);
		ck_assert_uint_lt(e->fired->key, PACE_FIRES);
		if (!seen[e->fired->key]) {
			seen[e->fired->key] = true;
			got++;
		}
		bwp_frame_free(e);
	}
	du_conn_free(c);
	du_conn_free(p);
}

START_TEST(test_redelivery_paced)
{
	static const char *const extra[] = { "--max-periodic-rate-per-uid", "100", NULL };
	struct du_daemon *d;

	if (!need_root("test_redelivery_paced"))
		return;
	d = shared_daemon(extra);
	du_run_as(NOBODY, d, pace_client, DU_WAIT_MS * 3);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

static Suite *budget_suite(void)
{
	Suite *s = suite_create("budget");
	TCase *tc;

	tc = tcase_create("admission");
	du_tcase(tc);
	tcase_add_test(tc, test_uid_connections);
	tcase_add_test(tc, test_uid_sessions);
	tcase_add_test(tc, test_uid_timers);
	tcase_add_test(tc, test_uid_rate);
	tcase_add_test(tc, test_root_exempt);
	tcase_add_test(tc, test_uid_stats);
	tcase_add_test(tc, test_stats_own);
	tcase_add_test(tc, test_uid_bytes);
	tcase_add_test(tc, test_budget_file);
	tcase_add_test(tc, test_budget_file_bad);
	tcase_add_test(tc, test_budget_reload);
	tcase_add_test(tc, test_budget_file_trust);
	tcase_add_test(tc, test_budget_reload_trust);
	suite_add_tcase(s, tc);

	tc = tcase_create("memory");
	du_tcase(tc);
	tcase_add_test(tc, test_max_memory);
	tcase_add_test(tc, test_memory_rss);
	tcase_add_test(tc, test_memory_unread);
	tcase_add_test(tc, test_memory_share);
	tcase_add_test(tc, test_output_timeout);
	suite_add_tcase(s, tc);

	tc = tcase_create("recovery");
	du_tcase(tc);
	tcase_add_test(tc, test_uid_recovery);
	tcase_add_test(tc, test_bytes_recovery);
	suite_add_tcase(s, tc);

	tc = tcase_create("redelivery");
	du_tcase(tc);
	tcase_add_test(tc, test_redelivery_paced);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(budget_suite());
}
