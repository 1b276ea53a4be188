/*
 * check_daemon.c - bitwheeld end to end: real daemon processes on
 * temporary sockets, spoken to through the raw protocol (every frame packed
 * and parsed by proto/frame.h, through tests/daemonutil.c), judged against
 * proto/PROTOCOL.md and bitwheeld(8).  Nothing is mocked.
 *
 * TCases:
 *   fire        oneshot timers with delay_ns and deadline_ns never fire
 *               early (fired_at_ns and the receive time are >= the
 *               deadline) and are late by at most the lane's resolution
 *               plus a margin; past deadlines fire at once; payloads and
 *               keys come back byte for byte; a 250 ms periodic timer
 *               without a leeway fires in the 1 ms lane, on time; every
 *               combination of period and leeway in its lane, within
 *               max(leeway, the finest lane's bound).
 *   cancel      Cancel (pending true/false, no Fired after a successful
 *               reply, also racing the fire), DUPLICATE_KEY, replace,
 *               periodic timers (d, d+p, d+2p; fire_count), 10,000
 *               pipelined requests answered in order.
 *   sessions    named sessions: detach, fires queued while detached and
 *               delivered in order after the HelloReply; shared sessions;
 *               linger expiry; max_queued for periodic fires; anonymous
 *               sessions' timers die with the connection.
 *   uid         session names are per uid: another uid's same name is
 *               another session, naming root's namespace is
 *               PERMISSION_DENIED, root can reach anyone's with owner_uid;
 *               needs root, else a printed SKIP.
 *   systemd     socket activation through systemd-socket-activate,
 *               READY=1 / STATUS= / STOPPING=1 and watchdog pings on
 *               NOTIFY_SOCKET.
 *   malformed   bad, truncated and oversized frames and requests, each
 *               answered with its error code (closing or not as the
 *               protocol says), after which the daemon serves a new client.
 *   limits      --max-clients, a slow consumer cut off while another
 *               client's fires stay on time and its named session keeps
 *               the undelivered fires, 1,000 concurrent clients.
 *   shutdown    SIGTERM: replies in flight are flushed, then SHUTTING_DOWN
 *               and a close; exit status 0 and a log line; SIGINT alike.
 *   faults      a client SIGKILLed mid-frame (its named session keeps its
 *               timer), 50 connections that never send, a client that
 *               dribbles its frames a byte at a time while another is
 *               served promptly, running out of descriptors (accepting
 *               pauses, no spinning, service resumes), 10,000 concurrent
 *               connections, a client that never reads while 100,000 of
 *               its fires come due (cut off, RSS bounded, another client
 *               on time), the daemon SIGKILLed and restarted without
 *               --state-dir (what is lost).
 *   startup     a live daemon on the path, a stale socket, a file that is
 *               no socket, --help/--version, usage errors (exit 2), the
 *               socket's mode, the log lines' form by where stderr goes
 *               (a file, journald, a terminal).
 *   paths       the socket's directory is trusted only as sshd's
 *               StrictModes would: writable by group or others (not
 *               sticky) or of another uid, refused naming it; a sticky
 *               one serves; a live listener at the path (even with a full
 *               backlog) refuses the daemon at once; a stale socket of
 *               another uid is left alone; a symbolic link at the path is
 *               refused and its target keeps its mode; the socket gets
 *               exactly --socket-mode whatever the umask, and the group
 *               --socket-group names.
 *
 * Timing: real clocks, bounds of "resolution + margin" (daemonutil.h:
 * 50 ms unless BW_TEST_MARGIN_MS says otherwise); nothing asserts speed.
 * make check-valgrind runs every daemon under valgrind with waits and
 * margins scaled (BW_TEST_SLOW); the few tests about speed, memory or
 * descriptor limits skip themselves there, saying why.
 * Random delays, keys and payloads come from a fixed seed, or BW_TEST_SEED.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <pty.h>
#include <unistd.h>

#include "daemonutil.h"
#include "testutil.h"

#define BC(x) BITWHEEL__V1__ENVELOPE__BODY_##x
#define EC(x) BITWHEEL__V1__ERROR_CODE__##x
#define DEFAULT_SEED UINT64_C(0xb17e2e5eed)

/* The fixed seed, or BW_TEST_SEED; logged so a failure can be rerun. */
static uint64_t test_seed(void)
{
	uint64_t seed = tu_seed_from_env("BW_TEST_SEED", DEFAULT_SEED);

	du_note("seed %#" PRIx64 " (BW_TEST_SEED)", seed);
	return seed;
}

static Bitwheel__V1__HelloReply *hr_of(du_env *e)
{
	ck_assert_ptr_nonnull(e->hello_reply);
	ck_assert_ptr_nonnull(e->hello_reply->limits);
	return e->hello_reply;
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static void send_raw(struct du_conn *c, const void *buf, size_t len)
{
	int rc = du_conn_send_bytes(c, buf, len, DU_WAIT_MS);

	ck_assert_msg(rc == 0, "send: %s", strerror(-rc));
}

/* Wait until a fresh client's Stats satisfies pred (polled), or fail. */
typedef bool (*stats_pred)(const Bitwheel__V1__StatsReply *s, uint64_t arg);

static du_env *wait_stats(const struct du_daemon *d, stats_pred pred,
			  uint64_t arg, const char *what)
{
	uint64_t deadline = du_now_ns() + DU_WAIT_MS * DU_MS;

	for (;;) {
		du_env *e = du_fresh_stats(d);

		if (pred(e->stats_reply, arg))
			return e;
		if (du_now_ns() > deadline) {
			const Bitwheel__V1__StatsReply *s = e->stats_reply;

			ck_abort_msg("stats never showed %s: clients=%" PRIu64
				     " sessions=%" PRIu64 " queued=%" PRIu64
				     " dropped=%" PRIu64 " oneshot.pending=%" PRIu64,
				     what, s->clients, s->sessions, s->queued,
				     s->dropped, s->oneshot->pending);
		}
		bwp_frame_free(e);
		du_sleep_ms(10);
	}
}

/* One connection open: the one asking. */
static bool only_me(const Bitwheel__V1__StatsReply *s, uint64_t arg)
{
	(void)arg;
	return s->clients == 1;
}

/* ======================================================================
 * fire
 * ====================================================================== */

static const struct {
	const char *args[3];
	uint64_t res_ms;  /* bitwheeld(8): the oneshot lane of the preset */
} fire_cfgs[] = {
	{ { NULL }, 1 },                               /* fast-precise */
	{ { "--preset", "standard-balanced", NULL }, 5 },
	{ { "--oneshot-resolution", "20", NULL }, 20 },
};

#define NFIRE 30

/*
 * NFIRE oneshot timers, random delays of 5..255 ms, half as delay_ns and
 * half as deadline_ns, random keys and payloads; each fires once, never
 * early, within the resolution plus the margin, in fire order.
 */
START_TEST(test_fire_timing)
{
	struct du_daemon *d = du_daemon_new();
	struct tu_rng rng;
	struct {
		uint64_t key, when, deadline;
		bool absolute, fired;
		uint8_t payload[16];
	} t[NFIRE];
	struct du_buf b = { 0 };
	struct du_conn *c;
	du_env *e;
	uint64_t res, t0, t1, last_fired_at = 0;

	tu_rng_seed(&rng, test_seed() ^ (uint64_t)_i);
	du_daemon_startv(d, fire_cfgs[_i].args);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	res = hr_of(e)->oneshot_resolution_ns;
	ck_assert_msg(res == fire_cfgs[_i].res_ms * DU_MS,
		      "oneshot_resolution_ns %" PRIu64 ", bitwheeld(8) says %" PRIu64 " ms",
		      res, fire_cfgs[_i].res_ms);
	ck_assert_uint_eq(hr_of(e)->periodic_resolution_ns, 100 * DU_MS);
	ck_assert(hr_of(e)->has_resumed && !hr_of(e)->resumed);
	bwp_frame_free(e);

	t0 = du_now_ns();
	for (int i = 0; i < NFIRE; i++) {
		struct du_sched s = { 0 };
		uint64_t delay = 5 * DU_MS + tu_rng_below(&rng, 250 * DU_MS);

		t[i].key = (tu_rng_next(&rng) << 8) | (uint64_t)i;
		t[i].absolute = i % 2 == 1;
		t[i].fired = false;
		for (size_t j = 0; j < sizeof(t[i].payload); j++)
			t[i].payload[j] = (uint8_t)tu_rng_next(&rng);
		s.key = t[i].key;
		s.when = t[i].absolute ? DU_DEADLINE : DU_DELAY;
		s.when_ns = t[i].absolute ? t0 + delay : delay;
		s.payload = t[i].payload;
		s.payload_len = sizeof(t[i].payload);
		t[i].when = s.when_ns;
		du_pack_schedule(&b, (uint64_t)i + 2, &s);
	}
	du_send_buf(c, &b);
	du_buf_free(&b);
	for (int i = 0; i < NFIRE; i++) {
		Bitwheel__V1__ScheduleReply *sr;

		e = du_expect_reply(c, (uint64_t)i + 2, BC(SCHEDULE_REPLY));
		t1 = du_now_ns();
		sr = e->schedule_reply;
		ck_assert(sr->has_deadline_ns && sr->has_replaced && !sr->replaced);
		if (t[i].absolute)
			ck_assert_uint_eq(sr->deadline_ns, t[i].when);
		else
			ck_assert_msg(sr->deadline_ns >= t0 + t[i].when &&
				      sr->deadline_ns <= t1 + t[i].when,
				      "deadline %" PRIu64 " is not now + delay (%" PRIu64
				      " .. %" PRIu64 ")", sr->deadline_ns,
				      t0 + t[i].when, t1 + t[i].when);
		t[i].deadline = sr->deadline_ns;
		bwp_frame_free(e);
	}

	for (int n = 0; n < NFIRE; n++) {
		uint64_t rx;
		Bitwheel__V1__Fired *f;
		int i;

		e = du_expect_fire(c, 2000, &rx);
		f = e->fired;
		for (i = 0; i < NFIRE && t[i].key != f->key; i++)
			;
		ck_assert_msg(i < NFIRE, "fire for unknown key %" PRIu64, f->key);
		ck_assert_msg(!t[i].fired, "key %" PRIu64 " fired twice", f->key);
		t[i].fired = true;
		ck_assert_uint_eq(f->deadline_ns, t[i].deadline);
		ck_assert(f->has_payload && f->payload.len == sizeof(t[i].payload));
		ck_assert(memcmp(f->payload.data, t[i].payload, f->payload.len) == 0);
		ck_assert_msg(!f->has_fire_count, "a oneshot fire carries fire_count");
		ck_assert_msg(!f->has_late || !f->late, "late set without a journal");
		du_check_fire_time(f, rx, res);
		/* PROTOCOL.md 5.6: fires arrive in the order they fired. */
		ck_assert_msg(f->fired_at_ns >= last_fired_at,
			      "fires out of order: fired_at %" PRIu64 " after %" PRIu64,
			      f->fired_at_ns, last_fired_at);
		last_fired_at = f->fired_at_ns;
		bwp_frame_free(e);
	}
	du_expect_quiet(c, 100);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* Deadlines in the past (and delay 0) fire at once, with their deadline. */
START_TEST(test_fire_past_deadline)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint64_t now, res, want[4];
	struct du_sched s[4] = {
		{ .key = 1, .when = DU_DEADLINE },
		{ .key = 2, .when = DU_DEADLINE, .when_ns = 0 },
		{ .key = 3, .when = DU_DELAY, .when_ns = 0 },
		{ .key = 4, .when = DU_DEADLINE },
	};
	struct du_buf b = { 0 };
	du_env *e;
	bool seen[4] = { false };

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	res = hr_of(e)->oneshot_resolution_ns;
	bwp_frame_free(e);

	now = du_now_ns();
	s[0].when_ns = now - DU_S;
	s[3].when_ns = now;
	for (int i = 0; i < 4; i++)
		du_pack_schedule(&b, (uint64_t)i + 2, &s[i]);
	du_send_buf(c, &b);
	du_buf_free(&b);
	for (int i = 0; i < 4; i++) {
		e = du_expect_reply(c, (uint64_t)i + 2, BC(SCHEDULE_REPLY));
		want[i] = e->schedule_reply->deadline_ns;
		if (s[i].when == DU_DEADLINE)
			ck_assert_uint_eq(want[i], s[i].when_ns);
		bwp_frame_free(e);
	}
	for (int n = 0; n < 4; n++) {
		uint64_t rx;
		Bitwheel__V1__Fired *f;

		e = du_expect_fire(c, 2000, &rx);
		f = e->fired;
		ck_assert(f->key >= 1 && f->key <= 4 && !seen[f->key - 1]);
		seen[f->key - 1] = true;
		ck_assert_uint_eq(f->deadline_ns, want[f->key - 1]);
		ck_assert(f->fired_at_ns >= f->deadline_ns);
		/* "At once": within the resolution plus the margin of when it
		 * was asked for, however old the deadline. */
		ck_assert_msg(rx - now <= res + du_margin_ns(),
			      "key %" PRIu64 " with a past deadline arrived after %.3f ms",
			      f->key, (double)(rx - now) / 1e6);
		ck_assert(!f->has_payload);
		bwp_frame_free(e);
	}
	du_expect_quiet(c, 50);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* Keys at both ends of the range; payload absent, empty, and at the limit. */
START_TEST(test_fire_payload)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint8_t big[1024];
	struct du_sched s[3] = {
		{ .key = 0, .when = DU_DELAY, .when_ns = DU_MS, .payload = "", .payload_len = 0 },
		{ .key = UINT64_MAX, .when = DU_DELAY, .when_ns = 2 * DU_MS },
		{ .key = 77, .when = DU_DELAY, .when_ns = 3 * DU_MS, .payload = big,
		  .payload_len = sizeof(big) },
	};
	bool seen[3] = { false };
	du_env *e;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + 3);
	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	ck_assert_uint_eq(hr_of(e)->limits->max_payload_bytes, sizeof(big));
	bwp_frame_free(e);
	for (int i = 0; i < 3; i++)
		bwp_frame_free(du_schedule(c, (uint64_t)i + 2, &s[i]));
	for (int n = 0; n < 3; n++) {
		Bitwheel__V1__Fired *f;
		int i;

		e = du_expect_fire(c, 2000, NULL);
		f = e->fired;
		ck_assert(f->has_key);
		i = f->key == 0 ? 0 : f->key == UINT64_MAX ? 1 : 2;
		ck_assert_uint_eq(f->key, s[i].key);
		ck_assert(!seen[i]);
		seen[i] = true;
		if (s[i].payload == NULL) {
			ck_assert_msg(!f->has_payload, "a payload appeared from nowhere");
		} else {
			ck_assert_msg(f->has_payload, "key %" PRIu64 ": payload lost", f->key);
			ck_assert_uint_eq(f->payload.len, s[i].payload_len);
			ck_assert(f->payload.len == 0 ||
				  memcmp(f->payload.data, s[i].payload, f->payload.len) == 0);
		}
		bwp_frame_free(e);
	}
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * cancel, duplicate keys, replace, periodic, pipelining
 * ====================================================================== */

START_TEST(test_cancel)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_sched s = { .when = DU_DELAY, .when_ns = 150 * DU_MS };
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_open(d, NULL);
	s.key = 1;
	bwp_frame_free(du_schedule(c, 2, &s));
	s.key = 2;
	bwp_frame_free(du_schedule(c, 3, &s));
	ck_assert_msg(du_cancel(c, 4, 1), "a pending timer cancelled with pending=false");
	ck_assert_msg(!du_cancel(c, 5, 1), "cancelled twice, pending both times");
	ck_assert_msg(!du_cancel(c, 6, 99), "never-scheduled key reported pending");

	e = du_expect_fire(c, 2000, NULL);
	ck_assert_msg(e->fired->key == 2, "key %" PRIu64 " fired after its cancel",
		      e->fired->key);
	bwp_frame_free(e);
	du_expect_quiet(c, 150);
	ck_assert_msg(!du_cancel(c, 7, 2), "a fired oneshot is still pending");

	e = du_stats(c, 8);
	ck_assert_uint_eq(e->stats_reply->oneshot->cancelled, 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->fired, 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, 2);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 0);
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

#define NRACE 300

/*
 * NRACE timers due 100 us apart, all cancelled (pipelined) halfway through
 * their span, so cancels and fires race: a key whose CancelReply says
 * pending=true must never fire; one that says false fired, and its Fired
 * came first.
 */
START_TEST(test_cancel_race)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_buf b = { 0 };
	int fired[NRACE] = { 0 }, replied[NRACE] = { 0 };
	bool pending[NRACE];
	uint64_t t;
	int ntrue = 0;

	du_daemon_start(d, NULL);
	c = du_open(d, NULL);
	t = du_now_ns() + 60 * DU_MS;
	for (int i = 0; i < NRACE; i++) {
		struct du_sched s = { .key = (uint64_t)i, .when = DU_DEADLINE,
				      .when_ns = t + (uint64_t)i * 100000 };

		du_pack_schedule(&b, (uint64_t)i + 2, &s);
	}
	du_send_buf(c, &b);
	for (int i = 0; i < NRACE; i++)
		bwp_frame_free(du_expect_reply(c, (uint64_t)i + 2, BC(SCHEDULE_REPLY)));
	for (int i = 0; i < NRACE; i++)
		du_pack_cancel(&b, 1000 + (uint64_t)i, (uint64_t)i);
	du_sleep_until(t + NRACE / 2 * (uint64_t)100000);
	du_send_buf(c, &b);
	du_buf_free(&b);

	for (int got = 0; got < NRACE;) {
		du_env *e;
		int rc = du_recv(c, DU_WAIT_MS, &e);
		char desc[256];

		ck_assert_msg(rc == DU_FRAME, "waiting for cancel replies: rc %d", rc);
		if (e->body_case == BC(FIRED)) {
			uint64_t k = e->fired->key;

			ck_assert(k < NRACE);
			ck_assert_msg(!replied[k], "key %" PRIu64 " fired after its CancelReply", k);
			fired[k]++;
		} else {
			uint64_t k;

			ck_assert_msg(e->body_case == BC(CANCEL_REPLY), "unexpected %s",
				      du_describe(e, desc, sizeof(desc)));
			k = e->request_id - 1000;
			ck_assert_msg(k == (uint64_t)got, "cancel reply %" PRIu64 " out of order",
				      e->request_id);
			replied[k] = 1;
			pending[k] = e->cancel_reply->pending;
			got++;
		}
		bwp_frame_free(e);
	}
	/* Anything still on its way would come within a tick or two. */
	for (;;) {
		du_env *e;
		int rc = du_recv(c, 200, &e);

		if (rc == DU_TIMEOUT)
			break;
		ck_assert_msg(rc == DU_FRAME && e->body_case == BC(FIRED),
			      "unexpected frame or close after the replies (rc %d)", rc);
		ck_assert_msg(false, "key %" PRIu64 " fired after its CancelReply",
			      e->fired->key);
	}
	for (int i = 0; i < NRACE; i++) {
		if (pending[i]) {
			ntrue++;
			ck_assert_msg(fired[i] == 0, "key %d: cancelled (pending) yet fired", i);
		} else {
			ck_assert_msg(fired[i] == 1, "key %d: not pending at cancel, fired %d times",
				      i, fired[i]);
		}
	}
	du_note("cancel race: %d of %d cancelled before firing", ntrue, NRACE);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_duplicate_key)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_sched a = { .key = 5, .when = DU_DELAY, .when_ns = 200 * DU_MS,
			      .payload = "A", .payload_len = 1 };
	struct du_sched b = { .key = 5, .when = DU_DELAY, .when_ns = 20 * DU_MS,
			      .payload = "B", .payload_len = 1 };
	du_env *e;
	uint64_t deadline;

	du_daemon_start(d, NULL);
	c = du_open(d, "e2e-dup");
	e = du_schedule(c, 2, &a);
	deadline = e->schedule_reply->deadline_ns;
	bwp_frame_free(e);
	du_send_schedule(c, 3, &b);
	du_expect_error(c, true, 3, EC(DUPLICATE_KEY));
	/* Still open, the first timer untouched: it fires at its own time
	 * with its own payload, and the refused one never does. */
	e = du_stats(c, 4);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, 1);
	bwp_frame_free(e);
	e = du_expect_fire(c, 2000, NULL);
	ck_assert_uint_eq(e->fired->key, 5);
	ck_assert_uint_eq(e->fired->deadline_ns, deadline);
	ck_assert(e->fired->payload.len == 1 && e->fired->payload.data[0] == 'A');
	bwp_frame_free(e);
	du_expect_quiet(c, 100);
	/* Fired, the key is free again. */
	bwp_frame_free(du_schedule(c, 5, &b));
	e = du_expect_fire(c, 2000, NULL);
	ck_assert(e->fired->payload.len == 1 && e->fired->payload.data[0] == 'B');
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* Take one fire of key with payload p, checking its count. */
static void expect_fire_payload(struct du_conn *c, uint64_t key, const char *p,
				uint64_t count)
{
	du_env *e = du_expect_fire(c, 2000, NULL);
	Bitwheel__V1__Fired *f = e->fired;

	ck_assert_uint_eq(f->key, key);
	ck_assert_msg(f->payload.len == strlen(p) &&
		      memcmp(f->payload.data, p, f->payload.len) == 0,
		      "key %" PRIu64 ": payload '%.*s', expected '%s'", key,
		      (int)f->payload.len, (const char *)f->payload.data, p);
	if (count)
		ck_assert_msg(f->has_fire_count && f->fire_count == count,
			      "fire_count %" PRIu64 ", expected %" PRIu64,
			      f->fire_count, count);
	bwp_frame_free(e);
}

START_TEST(test_replace)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_sched s = { .key = 5, .when = DU_DELAY, .when_ns = 100 * DU_MS,
			      .payload = "old", .payload_len = 3 };
	du_env *e;
	uint64_t new_deadline;

	du_daemon_start(d, NULL);
	c = du_open(d, NULL);
	e = du_schedule(c, 2, &s);
	ck_assert(!e->schedule_reply->replaced);
	bwp_frame_free(e);

	s.when_ns = 200 * DU_MS;
	s.payload = "new";
	s.replace = true;
	e = du_schedule(c, 3, &s);
	ck_assert_msg(e->schedule_reply->replaced, "replace of a pending key: replaced=false");
	new_deadline = e->schedule_reply->deadline_ns;
	bwp_frame_free(e);

	/* replace on a key that is not pending: an ordinary Schedule. */
	s.key = 6;
	s.when_ns = 50 * DU_MS;
	s.payload = "fresh";
	s.payload_len = 5;
	e = du_schedule(c, 4, &s);
	ck_assert(!e->schedule_reply->replaced);
	bwp_frame_free(e);

	expect_fire_payload(c, 6, "fresh", 0);
	e = du_expect_fire(c, 2000, NULL);
	ck_assert_uint_eq(e->fired->key, 5);
	ck_assert_msg(e->fired->payload.len == 3 &&
		      memcmp(e->fired->payload.data, "new", 3) == 0,
		      "the replaced timer's payload fired");
	ck_assert_uint_eq(e->fired->deadline_ns, new_deadline);
	bwp_frame_free(e);
	du_expect_quiet(c, 150);

	/* A oneshot replaced by a periodic one (the other lane), then that
	 * one by another periodic: fire_count starts again at 1, and after
	 * the reply only the new timer fires. */
	s = (struct du_sched){ .key = 8, .when = DU_DELAY, .when_ns = 3600 * DU_S,
			       .payload = "one", .payload_len = 3 };
	bwp_frame_free(du_schedule(c, 5, &s));
	s = (struct du_sched){ .key = 8, .when = DU_DELAY, .when_ns = 10 * DU_MS,
			       .periodic = true, .period_ns = 100 * DU_MS,
			       .payload = "p1", .payload_len = 2, .replace = true };
	e = du_schedule(c, 6, &s);
	ck_assert(e->schedule_reply->replaced);
	bwp_frame_free(e);
	expect_fire_payload(c, 8, "p1", 1);
	expect_fire_payload(c, 8, "p1", 2);
	s.payload = "p2";
	e = du_schedule(c, 7, &s);
	ck_assert(e->schedule_reply->replaced);
	bwp_frame_free(e);
	/* Fires of p1 sent before the reply are allowed (kept ones). */
	while (du_kept_fires(c) > 0) {
		e = du_expect_fire(c, 0, NULL);
		ck_assert(e->fired->payload.len == 2 &&
			  memcmp(e->fired->payload.data, "p1", 2) == 0);
		bwp_frame_free(e);
	}
	expect_fire_payload(c, 8, "p2", 1);
	expect_fire_payload(c, 8, "p2", 2);
	ck_assert(du_cancel(c, 8, 8));
	while (du_kept_fires(c) > 0)
		bwp_frame_free(du_expect_fire(c, 0, NULL));
	du_expect_quiet(c, 250);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Every combination of period (oneshot, 30 ms, 120 ms) and leeway (0,
 * 10 ms, 1 s, absent) on a real clock: each timer in the lane the rule
 * says (Stats' lane counters: the periodic lane, 100 ms, once its leeway
 * reaches that lane's bound, HelloReply.lanes[1]), and each fire never
 * early and late by at most max(leeway, the finest lane's bound) plus the
 * margin; periodic ones for three fires, then cancelled.
 */
START_TEST(test_leeway_matrix)
{
	static const uint64_t periods[] = { 0, 30 * DU_MS, 120 * DU_MS };
	static const uint64_t leeways[] = { 0, 10 * DU_MS, DU_S, UINT64_MAX };
	enum { N = 12 };
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint64_t allowed[N], period[N], fires[N] = { 0 }, fine, coarse, want[2] = { 0 };
	unsigned live = N;
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	fine = hr_of(e)->lanes[0]->max_late_ns;
	coarse = hr_of(e)->lanes[1]->max_late_ns;
	bwp_frame_free(e);
	for (unsigned k = 0; k < N; k++) {
		uint64_t lw = leeways[k % 4], p = periods[k / 4];
		uint64_t eff = lw != UINT64_MAX ? lw : p / 64 > fine ? p / 64 : p ? fine : 0;
		struct du_sched s = { .key = k, .when = DU_DELAY,
				      .when_ns = (20 + k) * DU_MS,
				      .periodic = p != 0, .period_ns = p,
				      .leeway = lw != UINT64_MAX, .leeway_ns = lw };

		period[k] = p;
		allowed[k] = eff > fine ? eff : fine;
		want[eff >= coarse]++;
		bwp_frame_free(du_schedule(c, 2 + k, &s));
	}
	e = du_stats(c, 100);
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, want[0]);
	ck_assert_uint_eq(e->stats_reply->periodic->inserted, want[1]);
	bwp_frame_free(e);
	while (live) {
		uint64_t rx, k;

		e = du_expect_fire(c, 3000, &rx);
		k = e->fired->key;
		ck_assert_uint_lt(k, N);
		du_check_fire_time(e->fired, rx, allowed[k]);
		bwp_frame_free(e);
		if (++fires[k] == (period[k] ? 3 : 1)) {
			live--;
			if (period[k])
				ck_assert(du_cancel(c, 200 + k, k));
		}
	}
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/*
 * Issue 15's example, `bwctl schedule --in 250ms --every 250ms`: without
 * a leeway a 250 ms periodic timer's is 250 / 64 ms, which puts it in
 * the finest lane (it came 20-70 ms late from the 100 ms lane).  Over 20
 * periods each fire is never early and within the finest lane's bound
 * plus the margin; the daemon's own lateness (fired_at_ns) has a median
 * within the bound plus 2 ms, which the 100 ms lane (p50 54 ms) cannot
 * meet.  Lateness is the point, so not under the wrapper.
 */
START_TEST(test_periodic_on_time)
{
	struct du_daemon *d;
	struct du_conn *c;
	struct du_sched s = { .key = 9, .when = DU_DELAY, .when_ns = 250 * DU_MS,
			      .periodic = true, .period_ns = 250 * DU_MS };
	uint64_t fine, late[20], first;
	du_env *e;

	if (du_skip_if_wrapped("test_periodic_on_time", "its point is lateness"))
		return;
	d = du_daemon_new();
	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	ck_assert_uint_eq(hr_of(e)->n_lanes, 2);
	fine = hr_of(e)->lanes[0]->max_late_ns;
	ck_assert_uint_le(fine, hr_of(e)->lanes[1]->max_late_ns);
	bwp_frame_free(e);
	e = du_schedule(c, 2, &s);
	first = e->schedule_reply->deadline_ns;
	bwp_frame_free(e);
	for (int n = 0; n < 20; n++) {
		uint64_t rx;

		e = du_expect_fire(c, 2000, &rx);
		ck_assert_uint_eq(e->fired->fire_count, (uint64_t)n + 1);
		ck_assert_msg(e->fired->deadline_ns == first + (uint64_t)n * s.period_ns,
			      "fire %d: deadline %" PRIu64 ", a period skipped", n + 1,
			      e->fired->deadline_ns);
		du_check_fire_time(e->fired, rx, fine);
		late[n] = e->fired->fired_at_ns - e->fired->deadline_ns;
		bwp_frame_free(e);
	}
	qsort(late, 20, sizeof(late[0]), cmp_u64);
	du_note("periodic 250 ms, 20 fires: daemon lateness median %" PRIu64 " us, max %"
		PRIu64 " us", late[10] / 1000, late[19] / 1000);
	ck_assert_msg(late[10] <= fine + 2 * DU_MS,
		      "median lateness %" PRIu64 " us over the finest lane's %" PRIu64 " us + 2 ms",
		      late[10] / 1000, fine / 1000);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* Periodic: deadlines d, d+p, d+2p... (the next one after each fire, so
 * a daemon that fell a period behind skips, as PROTOCOL.md 6 says),
 * counts 1, 2, 3..., never early, within the periodic lane's resolution
 * (a leeway of 100 ms puts it there); cancel stops it. */
START_TEST(test_periodic)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_sched s = { .key = 7, .when = DU_DELAY, .when_ns = 30 * DU_MS,
			      .periodic = true, .period_ns = 120 * DU_MS,
			      .payload = "tick", .payload_len = 4,
			      .leeway = true, .leeway_ns = 100 * DU_MS };
	du_env *e;
	uint64_t res, first;

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	res = hr_of(e)->periodic_resolution_ns;
	bwp_frame_free(e);
	e = du_schedule(c, 2, &s);
	first = e->schedule_reply->deadline_ns;
	bwp_frame_free(e);

	/* The same again with an absolute first deadline. */
	s.key = 8;
	s.when = DU_DEADLINE;
	s.when_ns = first + 60 * DU_MS;
	s.payload = NULL;
	e = du_schedule(c, 3, &s);
	ck_assert_uint_eq(e->schedule_reply->deadline_ns, first + 60 * DU_MS);
	bwp_frame_free(e);

	for (uint64_t n[2] = { 0, 0 }, prev[2] = { 0, 0 }; n[0] < 4 || n[1] < 4;) {
		uint64_t rx, want;
		Bitwheel__V1__Fired *f;
		int k;

		e = du_expect_fire(c, 2000, &rx);
		f = e->fired;
		ck_assert(f->key == 7 || f->key == 8);
		k = f->key == 7 ? 0 : 1;
		ck_assert_msg(f->has_fire_count && f->fire_count == n[k] + 1,
			      "key %" PRIu64 ": fire_count %" PRIu64 ", expected %" PRIu64,
			      f->key, f->fire_count, n[k] + 1);
		want = first + (uint64_t)k * 60 * DU_MS;
		if (n[k] > 0)
			want = du_next_period(want, s.period_ns, prev[k]);
		ck_assert_msg(f->deadline_ns == want,
			      "key %" PRIu64 " fire %" PRIu64 ": deadline %" PRIu64
			      ", expected %" PRIu64, f->key, n[k] + 1, f->deadline_ns, want);
		prev[k] = f->fired_at_ns;
		ck_assert(k == 1 || (f->has_payload && f->payload.len == 4));
		ck_assert(k == 0 || !f->has_payload);
		du_check_fire_time(f, rx, res);
		n[k]++;
		bwp_frame_free(e);
	}
	ck_assert(du_cancel(c, 4, 7));
	ck_assert(du_cancel(c, 5, 8));
	while (du_kept_fires(c) > 0)
		bwp_frame_free(du_expect_fire(c, 0, NULL));
	du_expect_quiet(c, 300);
	ck_assert(!du_cancel(c, 6, 7));
	e = du_stats(c, 7);
	ck_assert_uint_eq(e->stats_reply->periodic->pending, 0);
	ck_assert_uint_eq(e->stats_reply->periodic->cancelled, 2);
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

#define NCLOSE 4000

/*
 * A client that pipelines its last requests and closes at once: the turn's
 * budget (256 frames of a connection) leaves most of them for later turns,
 * by which time the daemon reads the client's EOF, and every one still
 * takes effect, as it did when a wakeup handled a whole read.
 */
START_TEST(test_pipelined_then_close)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_buf b = { 0 };
	uint64_t pending = 0;

	du_daemon_start(d, NULL);
	c = du_open(d, "pipelined-close");
	for (uint64_t k = 0; k < NCLOSE; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY, .when_ns = 3600 * DU_S };

		du_pack_schedule(&b, k + 2, &s);
	}
	du_send_buf(c, &b);
	du_buf_free(&b);
	du_conn_free(c);
	for (int waited = 0; pending != NCLOSE; waited += 20) {
		du_env *st = du_fresh_stats(d);

		pending = st->stats_reply->oneshot->pending;
		bwp_frame_free(st);
		ck_assert_msg(pending <= NCLOSE && waited < DU_WAIT_MS,
			      "%" PRIu64 " of %d pipelined Schedules took effect", pending, NCLOSE);
		if (pending != NCLOSE)
			du_sleep_ms(20);
	}
	du_daemon_free(d);
}
END_TEST

#define NPIPE 10000

/*
 * 10,000 Schedules (every tenth followed by a Cancel of it, a few due at
 * once) and a final Stats, all sent before reading anything: every reply
 * in request order with its request_id, and no fire before its reply.
 */
START_TEST(test_pipelined)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_buf b = { 0 };
	/* What request id i was: its body case and key. */
	int *kind = calloc(2 * NPIPE + 8, sizeof(int));
	uint64_t *key = calloc(2 * NPIPE + 8, sizeof(uint64_t));
	bool *replied = calloc(NPIPE, sizeof(bool));
	uint64_t id = 2, expect_id = 2, nfires = 0, nnow = 0;
	char desc[256];

	ck_assert(kind != NULL && key != NULL && replied != NULL);
	du_daemon_start(d, NULL);
	c = du_open(d, NULL);
	for (uint64_t k = 0; k < NPIPE; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY,
				      .when_ns = k % 100 == 3 ? 0 : 3600 * DU_S };

		nnow += k % 100 == 3;
		kind[id] = BC(SCHEDULE_REPLY);
		key[id] = k;
		du_pack_schedule(&b, id++, &s);
		if (k % 10 == 0) {
			kind[id] = BC(CANCEL_REPLY);
			key[id] = k;
			du_pack_cancel(&b, id++, k);
		}
	}
	kind[id] = BC(STATS_REPLY);
	du_pack_stats(&b, id++);
	du_send_buf(c, &b);
	du_buf_free(&b);

	while (expect_id < id) {
		du_env *e;
		int rc = du_recv(c, DU_WAIT_MS, &e);

		ck_assert_msg(rc == DU_FRAME, "after %" PRIu64 " replies: rc %d",
			      expect_id - 2, rc);
		if (e->body_case == BC(FIRED)) {
			ck_assert_msg(e->fired->key < NPIPE && replied[e->fired->key],
				      "fire of key %" PRIu64 " before its ScheduleReply",
				      e->fired->key);
			nfires++;
			bwp_frame_free(e);
			continue;
		}
		du_describe(e, desc, sizeof(desc));
		ck_assert_msg(e->has_request_id && e->request_id == expect_id &&
			      (int)e->body_case == kind[expect_id],
			      "expected the %s reply to %" PRIu64 ", got %s",
			      kind[expect_id] == BC(SCHEDULE_REPLY) ? "schedule" :
			      kind[expect_id] == BC(CANCEL_REPLY) ? "cancel" : "stats",
			      expect_id, desc);
		if (kind[expect_id] == BC(STATS_REPLY)) {
			ck_assert_uint_eq(e->stats_reply->oneshot->inserted, NPIPE);
			ck_assert_uint_eq(e->stats_reply->oneshot->cancelled, NPIPE / 10);
		} else if (kind[expect_id] == BC(CANCEL_REPLY)) {
			ck_assert_msg(e->cancel_reply->pending,
				      "cancel of key %" PRIu64 " right after its schedule: not pending",
				      key[expect_id]);
		} else {
			replied[key[expect_id]] = true;
		}
		expect_id++;
		bwp_frame_free(e);
	}
	/* The keys due at once that were not cancelled. */
	while (nfires < nnow) {
		du_env *e = du_expect_fire(c, 2000, NULL);

		ck_assert(e->fired->key % 100 == 3);
		nfires++;
		bwp_frame_free(e);
	}
	du_expect_quiet(c, 50);
	du_conn_free(c);
	free(kind);
	free(key);
	free(replied);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * sessions
 * ====================================================================== */

/* Fires due while detached are queued and follow the HelloReply, in
 * order (PROTOCOL.md 5.6, 5.7); a request sent right behind the Hello is
 * answered meanwhile. */
START_TEST(test_session_resume)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *a, *b;
	struct du_buf buf = { 0 };
	uint64_t t0, deadline[5];
	Bitwheel__V1__HelloReply *hr;
	du_env *e;

	du_daemon_start(d, NULL);
	a = du_connect(d->sock);
	e = du_hello(a, "e2e-resume");
	hr = hr_of(e);
	ck_assert(hr->has_resumed && !hr->resumed);
	ck_assert_uint_eq(hr->timers, 0);
	ck_assert_uint_eq(hr->queued, 0);
	bwp_frame_free(e);
	t0 = du_now_ns();
	for (int i = 0; i < 5; i++) {
		char p[8];
		struct du_sched s = { .key = (uint64_t)i + 1, .when = DU_DEADLINE,
				      .when_ns = t0 + 40 * DU_MS + (uint64_t)i * 15 * DU_MS,
				      .payload = p };

		s.payload_len = (size_t)snprintf(p, sizeof(p), "p%d", i + 1);
		deadline[i] = s.when_ns;
		bwp_frame_free(du_schedule(a, (uint64_t)i + 2, &s));
	}
	{
		struct du_sched s = { .key = 100, .when = DU_DELAY, .when_ns = 3600 * DU_S };

		bwp_frame_free(du_schedule(a, 10, &s));
	}
	du_conn_free(a);

	/* All five come due while nobody is attached. */
	du_sleep_until(deadline[4] + 100 * DU_MS);
	e = wait_stats(d, only_me, 0, "the detached session's connection gone");
	ck_assert_uint_eq(e->stats_reply->sessions, 1);
	ck_assert_uint_eq(e->stats_reply->queued, 5);
	bwp_frame_free(e);

	b = du_connect(d->sock);
	du_pack_hello(&buf, 1, "e2e-resume");
	du_pack_stats(&buf, 2);
	du_send_buf(b, &buf);
	du_buf_free(&buf);
	{
		/* The very next frame is the HelloReply... */
		int rc = du_recv(b, DU_WAIT_MS, &e);
		char desc[256];

		ck_assert_int_eq(rc, DU_FRAME);
		ck_assert_msg(e->body_case == BC(HELLO_REPLY), "first frame: %s",
			      du_describe(e, desc, sizeof(desc)));
	}
	hr = hr_of(e);
	ck_assert_msg(hr->resumed, "reattach: resumed=false");
	ck_assert_uint_eq(hr->timers, 1);
	ck_assert_uint_eq(hr->queued, 5);
	ck_assert_uint_eq(hr->dropped, 0);
	bwp_frame_free(e);
	/* ...then the queued fires, in order, and the Stats reply. */
	bwp_frame_free(du_expect_reply(b, 2, BC(STATS_REPLY)));
	for (int i = 0; i < 5; i++) {
		char p[8];

		e = du_expect_fire(b, DU_WAIT_MS, NULL);
		ck_assert_msg(e->fired->key == (uint64_t)i + 1, "queued fire %d has key %" PRIu64,
			      i + 1, e->fired->key);
		ck_assert_uint_eq(e->fired->delivery, (uint64_t)i + 1);
		ck_assert_uint_eq(e->fired->deadline_ns, deadline[i]);
		ck_assert(e->fired->fired_at_ns >= deadline[i]);
		snprintf(p, sizeof(p), "p%d", i + 1);
		ck_assert(e->fired->payload.len == strlen(p) &&
			  memcmp(e->fired->payload.data, p, strlen(p)) == 0);
		bwp_frame_free(e);
	}
	ck_assert_msg(du_cancel(b, 3, 100), "the session lost its pending timer");
	du_expect_quiet(b, 50);
	du_conn_free(b);
	du_daemon_free(d);
}
END_TEST

#define NBIGQ 3000
#define NLIVE 10
#define BIGQ_PAYLOAD 512

/*
 * A queue far larger than the output bound (--max-output 65536), drained
 * while new fires come due and a Stats waits behind the Hello: the queued
 * fires come first, in fire order, then the new ones, and the Stats reply
 * among them (PROTOCOL.md 5.6, 5.7).
 */
START_TEST(test_session_resume_large)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *a, *b;
	struct du_buf buf = { 0 };
	uint8_t payload[BIGQ_PAYLOAD];
	uint64_t t0, last_fired_at = 0;
	size_t nqueued = 0, nlive = 0;
	bool stats_seen = false;
	du_env *e;

	du_daemon_start(d, "--max-output", "65536", "--max-queued", "10000", NULL);
	a = du_connect(d->sock);
	bwp_frame_free(du_hello(a, "e2e-bigq"));
	t0 = du_now_ns();
	for (uint64_t k = 0; k < NBIGQ; k++) {
		struct du_sched s = { .key = k, .when = DU_DEADLINE,
				      .when_ns = t0 + 300 * DU_MS + k * 10000,
				      .payload = payload, .payload_len = sizeof(payload) };

		memset(payload, (int)(k & 0xff), sizeof(payload));
		du_pack_schedule(&buf, k + 2, &s);
	}
	/* Due after the reattach, while the queue is still being sent. */
	for (uint64_t k = 0; k < NLIVE; k++) {
		struct du_sched s = { .key = 100000 + k, .when = DU_DEADLINE,
				      .when_ns = t0 + 650 * DU_MS + k * 2 * DU_MS };

		du_pack_schedule(&buf, NBIGQ + 2 + k, &s);
	}
	/* In batches, reading the replies: with a 64 KiB output bound, a
	 * client that only writes is rightly cut off. */
	for (size_t off = 0, id = 2; off < buf.len; ) {
		size_t end = off, n = 0;

		while (end < buf.len && n < 200) {
			end += 4 + ((size_t)buf.data[end] << 24 | (size_t)buf.data[end + 1] << 16 |
				    (size_t)buf.data[end + 2] << 8 | buf.data[end + 3]);
			n++;
		}
		ck_assert_int_eq(du_conn_send_bytes(a, buf.data + off, end - off, DU_WAIT_MS), 0);
		for (size_t i = 0; i < n; i++, id++)
			bwp_frame_free(du_expect_reply(a, id, BC(SCHEDULE_REPLY)));
		off = end;
	}
	buf.len = 0;
	ck_assert_msg(du_now_ns() < t0 + 300 * DU_MS,
		      "scheduling took over 300 ms: the first timers were due already");
	du_conn_free(a);

	du_sleep_until(t0 + 600 * DU_MS);
	b = du_connect(d->sock);
	du_pack_hello(&buf, 1, "e2e-bigq");
	du_pack_stats(&buf, 2);
	du_send_buf(b, &buf);
	du_buf_free(&buf);
	e = du_expect_reply(b, 1, BC(HELLO_REPLY));
	ck_assert(hr_of(e)->resumed);
	ck_assert_uint_eq(hr_of(e)->queued, NBIGQ);
	ck_assert_uint_eq(hr_of(e)->timers, NLIVE);
	bwp_frame_free(e);
	/* Read nothing until the live timers are due: the daemon must hold
	 * them behind the queue. */
	du_sleep_until(t0 + 750 * DU_MS);
	while (nqueued < NBIGQ || nlive < NLIVE || !stats_seen) {
		char desc[256];
		int rc = du_recv(b, DU_WAIT_MS, &e);

		ck_assert_msg(rc == DU_FRAME, "after %zu queued, %zu new fires: rc %d", nqueued,
			      nlive, rc);
		du_describe(e, desc, sizeof(desc));
		if (e->body_case == BC(STATS_REPLY)) {
			ck_assert_uint_eq(e->request_id, 2);
			stats_seen = true;
		} else {
			ck_assert_msg(e->body_case == BC(FIRED), "unexpected %s", desc);
			ck_assert_msg(e->fired->fired_at_ns >= last_fired_at,
				      "out of fire order: %s", desc);
			last_fired_at = e->fired->fired_at_ns;
			if (e->fired->key < NBIGQ) {
				ck_assert_msg(nlive == 0, "queued fire %s after a new one", desc);
				ck_assert(e->fired->payload.len == BIGQ_PAYLOAD &&
					  e->fired->payload.data[0] == (uint8_t)(e->fired->key & 0xff));
				nqueued++;
			} else {
				ck_assert(e->fired->key < 100000 + NLIVE);
				nlive++;
			}
		}
		bwp_frame_free(e);
	}
	du_expect_quiet(b, 50);
	du_conn_free(b);
	du_daemon_free(d);
}
END_TEST

/* Sessions are shared (PROTOCOL.md 7): a producer and two consumers of
 * one uid attach at once; the producer's timers fire to a consumer, never
 * to it, and once every member is gone the session is still there. */
START_TEST(test_session_shared)
{
	static const struct du_hello_opts consumer = { .role = BITWHEEL__V1__ROLE__CONSUMER,
						       .has_auto_ack = true, .auto_ack = true };
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c1, *c2;
	struct du_sched s = { .key = 7, .when = DU_DELAY, .when_ns = 20 * DU_MS };
	struct du_conn *got = NULL;
	du_env *e;

	du_daemon_start(d, NULL);
	c1 = du_open_opts(d, "e2e-shared", &consumer);
	p = du_connect(d->sock);
	e = du_hello_opts(p, "e2e-shared", &du_producer_opts);
	ck_assert(hr_of(e)->resumed);
	ck_assert_int_eq(hr_of(e)->role, BITWHEEL__V1__ROLE__PRODUCER);
	ck_assert_uint_eq(hr_of(e)->window, 0);
	ck_assert_uint_eq(hr_of(e)->consumers, 1);
	bwp_frame_free(e);
	c2 = du_connect(d->sock);
	e = du_hello_opts(c2, "e2e-shared", &consumer);
	ck_assert_int_eq(hr_of(e)->role, BITWHEEL__V1__ROLE__CONSUMER);
	ck_assert_uint_eq(hr_of(e)->consumers, 2);
	bwp_frame_free(e);

	bwp_frame_free(du_schedule(p, 2, &s));
	e = NULL;
	for (uint64_t deadline = du_now_ns() + DU_WAIT_MS * DU_MS; !e; ) {
		ck_assert_msg(du_now_ns() < deadline, "no consumer got the fire");
		for (got = c1; got; got = got == c1 ? c2 : NULL)
			if (du_recv(got, 10, &e) == DU_FRAME)
				break;
	}
	ck_assert_int_eq(e->body_case, BC(FIRED));
	ck_assert_uint_eq(e->fired->key, 7);
	ck_assert_uint_eq(e->fired->delivery, 1);
	bwp_frame_free(e);
	du_expect_quiet(p, 50);
	du_expect_quiet(got == c1 ? c2 : c1, 1);
	du_conn_free(c1);
	du_conn_free(c2);
	du_conn_free(p);
	p = du_connect(d->sock);
	e = du_hello_opts(p, "e2e-shared", &du_producer_opts);
	ck_assert(hr_of(e)->resumed);
	ck_assert_uint_eq(hr_of(e)->consumers, 0);
	bwp_frame_free(e);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

static bool session_gone(const Bitwheel__V1__StatsReply *s, uint64_t pending)
{
	return s->expired == 1 && s->sessions == 0 && s->oneshot->pending == pending;
}

#define NEXPIRE 20000

/*
 * A named session expiring with 20,000 timers and 2,000 queued fires is
 * torn down a chunk per loop turn, like an anonymous one: its name is
 * free at once (a Hello makes a new session), every timer and fire goes,
 * and another client's timers due meanwhile are on time.
 */
START_TEST(test_session_expire_large)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *a, *probe;
	struct du_buf b = { 0 };
	uint64_t t0, res, worst = 0;
	du_env *e;

	du_daemon_start(d, "--linger", "300ms", "--max-timers", "100000", NULL);
	a = du_open_producer(d, "e2e-expire");
	t0 = du_now_ns();
	/* In batches of 1,000, reading the replies: a pipeline bounded by
	 * what the socket buffers hold both ways. */
	for (uint64_t k = 0; k < NEXPIRE + 2000; k += 1000) {
		for (uint64_t j = k; j < k + 1000; j++) {
			struct du_sched sc = { .key = j, .when = DU_DELAY,
					       .when_ns = j < NEXPIRE ? 3600 * DU_S : DU_MS };

			du_pack_schedule(&b, j + 2, &sc);
		}
		du_send_buf(a, &b);
		for (uint64_t j = k; j < k + 1000; j++)
			bwp_frame_free(du_expect_reply(a, j + 2, BC(SCHEDULE_REPLY)));
	}
	du_buf_free(&b);
	du_conn_free(a);
	probe = du_connect(d->sock);
	e = du_hello(probe, NULL);
	res = hr_of(e)->oneshot_resolution_ns;
	bwp_frame_free(e);
	/* Due around the expiry, 300 ms after the detach. */
	for (uint64_t i = 0; i < 20; i++) {
		struct du_sched sc = { .key = i, .when = DU_DELAY,
				       .when_ns = 250 * DU_MS + i * 10 * DU_MS };

		bwp_frame_free(du_schedule(probe, i + 2, &sc));
	}
	for (int i = 0; i < 20; i++) {
		uint64_t rx, late;

		e = du_expect_fire(probe, DU_WAIT_MS, &rx);
		late = du_check_fire_time(e->fired, rx, res + du_margin_ns());
		worst = late > worst ? late : worst;
		bwp_frame_free(e);
	}
	e = wait_stats(d, session_gone, 0, "the expired session's timers all gone");
	ck_assert_uint_eq(e->stats_reply->queued, 0);
	bwp_frame_free(e);
	du_note("expire large: %d timers and 2000 fires dropped %.0f ms after they were scheduled; probe lateness at most %.3f ms",
		NEXPIRE, (double)(du_now_ns() - t0) / 1e6, (double)worst / 1e6);
	a = du_connect(d->sock);
	e = du_hello_opts(a, "e2e-expire", &du_producer_opts);
	ck_assert(!hr_of(e)->resumed && hr_of(e)->timers == 0 && hr_of(e)->queued == 0);
	bwp_frame_free(e);
	du_conn_free(a);
	du_conn_free(probe);
	du_daemon_free(d);
}
END_TEST

static bool expired_is(const Bitwheel__V1__StatsReply *s, uint64_t n)
{
	return s->has_expired && s->expired == n;
}

/* --linger 300ms: reattaching within it resumes, staying away longer
 * drops the session with its timers. */
START_TEST(test_session_linger)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *a, *keep;
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = 3600 * DU_S };
	uint64_t detached;
	du_env *e;

	du_daemon_start(d, "--linger", "300ms", NULL);
	/* Another uid than root counts "ever" from when it last had anything
	 * in the daemon: this connection keeps it there for the Stats below. */
	keep = du_connect(d->sock);
	bwp_frame_free(du_hello(keep, NULL));
	a = du_connect(d->sock);
	e = du_hello(a, "e2e-linger");
	ck_assert_uint_eq(hr_of(e)->limits->session_linger_ns, 300 * DU_MS);
	bwp_frame_free(e);
	bwp_frame_free(du_schedule(a, 2, &s));
	du_conn_free(a);
	du_sleep_ms(100);

	a = du_connect(d->sock);
	e = du_hello(a, "e2e-linger");
	ck_assert_msg(hr_of(e)->resumed && hr_of(e)->timers == 1,
		      "reattached within the linger: resumed=%d timers=%" PRIu64,
		      hr_of(e)->resumed, hr_of(e)->timers);
	bwp_frame_free(e);
	du_conn_free(a);
	detached = du_now_ns();

	/* The linger restarts at this detach: nothing expires before it. */
	du_sleep_until(detached + 150 * DU_MS);
	e = du_fresh_stats(d);
	ck_assert_msg(e->stats_reply->expired == 0 && e->stats_reply->sessions == 1,
		      "session expired %.0f ms into a 300 ms linger",
		      (double)(du_now_ns() - detached) / 1e6);
	bwp_frame_free(e);

	e = wait_stats(d, expired_is, 1, "expired=1");
	ck_assert_msg(du_now_ns() - detached >= 300 * DU_MS,
		      "session expired after %.0f ms, linger 300 ms",
		      (double)(du_now_ns() - detached) / 1e6);
	ck_assert_uint_eq(e->stats_reply->sessions, 0);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 0);
	bwp_frame_free(e);

	a = du_connect(d->sock);
	e = du_hello(a, "e2e-linger");
	ck_assert_msg(!hr_of(e)->resumed && hr_of(e)->timers == 0,
		      "an expired session came back");
	bwp_frame_free(e);
	ck_assert(!du_cancel(a, 2, 1));
	du_conn_free(a);
	du_conn_free(keep);
	du_daemon_free(d);
}
END_TEST

/* --max-queued 3: a periodic timer firing every 10 ms while no consumer
 * is attached queues 3 fires and drops the rest, counted; eight oneshot
 * fires due later, past max_queued, are all kept (PROTOCOL.md 10: a
 * oneshot fire takes its timer's place). */
START_TEST(test_session_max_queued)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sched per = { .key = 100, .when = DU_DELAY, .when_ns = 10 * DU_MS,
				.periodic = true, .period_ns = 10 * DU_MS };
	struct du_conn *a;
	uint64_t t0, dropped;
	du_env *e;

	du_daemon_start(d, "--max-queued", "3", "--periodic-resolution", "1", NULL);
	a = du_connect(d->sock);
	e = du_hello(a, "e2e-queue");
	ck_assert_uint_eq(hr_of(e)->limits->max_queued, 3);
	bwp_frame_free(e);
	t0 = du_now_ns();
	for (uint64_t k = 1; k <= 8; k++) {
		struct du_sched s = { .key = k, .when = DU_DEADLINE,
				      .when_ns = t0 + 500 * DU_MS + k * 8 * DU_MS };

		bwp_frame_free(du_schedule(a, k + 1, &s));
	}
	du_conn_free(a);
	a = du_open_producer(d, "e2e-queue");
	bwp_frame_free(du_schedule(a, 20, &per));
	du_conn_free(a);
	du_sleep_until(t0 + 500 * DU_MS + 64 * DU_MS + 200 * DU_MS);

	e = wait_stats(d, only_me, 0, "the connections gone");
	/* The periodic timer's first three fires, then the oneshot fires,
	 * kept past max_queued; the periodic ones after the third dropped. */
	ck_assert_uint_eq(e->stats_reply->queued, 11);
	dropped = e->stats_reply->dropped;
	ck_assert_msg(dropped >= 10, "dropped %" PRIu64 " periodic fires in ~200 ms", dropped);
	bwp_frame_free(e);

	/* Cancelled before a consumer attaches: a fire it dropped after the
	 * attach (every 10 ms, while the queue is past max_queued) would
	 * count against the check below. */
	a = du_open_producer(d, "e2e-queue");
	ck_assert(du_cancel(a, 2, 100));
	du_conn_free(a);
	a = du_connect(d->sock);
	e = du_hello(a, "e2e-queue");
	ck_assert(hr_of(e)->resumed);
	ck_assert_uint_ge(hr_of(e)->dropped, dropped);
	bwp_frame_free(e);
	for (int n = 0; n < 3; n++) {
		e = du_expect_fire(a, DU_WAIT_MS, NULL);
		ck_assert_uint_eq(e->fired->key, 100);
		ck_assert_uint_eq(e->fired->fire_count, (uint64_t)n + 1);
		bwp_frame_free(e);
	}
	for (uint64_t k = 1; k <= 8; k++) {
		e = du_expect_fire(a, DU_WAIT_MS, NULL);
		ck_assert_msg(e->fired->key == k, "queued fire: key %" PRIu64 ", expected %" PRIu64,
			      e->fired->key, k);
		bwp_frame_free(e);
	}
	du_conn_free(a);

	/* HelloReply.dropped counts since a consumer last attached. */
	a = du_connect(d->sock);
	e = du_hello(a, "e2e-queue");
	ck_assert_uint_eq(hr_of(e)->dropped, 0);
	bwp_frame_free(e);
	du_conn_free(a);
	du_daemon_free(d);
}
END_TEST

/* An anonymous session's timers die with its connection. */
START_TEST(test_session_anonymous_dies)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *a;
	du_env *e;

	du_daemon_start(d, NULL);
	a = du_open(d, NULL);
	for (uint64_t k = 1; k <= 3; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY, .when_ns = 100 * DU_MS };

		bwp_frame_free(du_schedule(a, k + 1, &s));
	}
	{
		struct du_sched s = { .key = 9, .when = DU_DELAY, .when_ns = 50 * DU_MS,
				      .periodic = true, .period_ns = 100 * DU_MS,
				      .leeway = true, .leeway_ns = 100 * DU_MS };

		bwp_frame_free(du_schedule(a, 9, &s));
	}
	du_conn_free(a);
	e = wait_stats(d, only_me, 0, "the anonymous connection gone");
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 0);
	ck_assert_uint_eq(e->stats_reply->periodic->pending, 0);
	ck_assert_uint_eq(e->stats_reply->oneshot->cancelled, 3);
	ck_assert_uint_eq(e->stats_reply->periodic->cancelled, 1);
	ck_assert_uint_eq(e->stats_reply->sessions, 0);
	bwp_frame_free(e);

	/* Past their deadlines nothing fired, nothing was queued. */
	du_sleep_ms(200);
	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->oneshot->fired, 0);
	ck_assert_uint_eq(e->stats_reply->queued, 0);
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * uid isolation
 * ====================================================================== */

#define NOBODY 65534

/*
 * Session names are per uid (PROTOCOL.md 7).  Root creates "e2e-orders"
 * with a pending timer; a process running as nobody that names root's
 * namespace is refused (PERMISSION_DENIED, closed), and its own
 * "e2e-orders" is a new, empty session of its own, where root's key is
 * not; root's timer still fires for root.  Root reaches nobody's session
 * with owner_uid, and it stays nobody's.
 */
START_TEST(test_uid_isolation)
{
	static const struct du_hello_opts legacy = {
		.role = BITWHEEL__V1__ROLE__CONSUMER, .has_auto_ack = true, .auto_ack = true,
	};
	struct du_daemon *d;
	struct du_conn *c;
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = 300 * DU_MS,
			      .payload = "root", .payload_len = 4 };
	struct du_hello_opts o = legacy;
	uint64_t due;
	pid_t pid;
	du_env *e;

	if (geteuid() != 0) {
		/* Check has no "skip": the test passes and says so. */
		du_note("SKIP: test_uid_isolation needs root (to run a client as uid %d)",
			NOBODY);
		return;
	}
	d = du_daemon_new();
	/* The client running as nobody must reach the socket. */
	ck_assert(chmod(d->dir, 0755) == 0);
	du_daemon_start(d, "--socket-mode", "0666", NULL);

	c = du_connect(d->sock);
	e = du_hello(c, "e2e-orders");
	ck_assert_uint_eq(hr_of(e)->owner_uid, 0);
	bwp_frame_free(e);
	e = du_schedule(c, 2, &s);
	due = e->schedule_reply->deadline_ns;
	bwp_frame_free(e);
	du_conn_free(c);

	/* The client runs as nobody in a child process.  A failed check in
	 * it reaches Check like the test's own, and its exit status fails
	 * the test as well. */
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		struct du_conn *n;

		du_become(NOBODY);
		/* Root's namespace is not nobody's to name... */
		o.has_owner_uid = true;
		o.owner_uid = 0;
		n = du_connect(d->sock);
		{
			struct du_buf b = { 0 };

			du_pack_hello_opts(&b, 1, "e2e-orders", &o);
			du_send_buf(n, &b);
			du_buf_free(&b);
		}
		du_expect_error(n, true, 1, EC(PERMISSION_DENIED));
		du_expect_eof(n, DU_WAIT_MS);
		du_conn_free(n);
		/* ...and the same name in its own is its own session: new,
		 * empty, nothing of root's to see. */
		n = du_connect(d->sock);
		e = du_hello(n, "e2e-orders");
		if (hr_of(e)->resumed || hr_of(e)->timers != 0 || hr_of(e)->queued != 0 ||
		    hr_of(e)->owner_uid != NOBODY)
			_exit(3);
		bwp_frame_free(e);
		s.key = 9;
		s.when_ns = 3600 * DU_S;
		bwp_frame_free(du_schedule(n, 2, &s));
		/* Root's key 1 is not in it. */
		if (du_cancel(n, 3, 1))
			_exit(4);
		du_conn_free(n);
		_exit(0);
	}
	ck_assert_msg(du_wait_child(pid, DU_WAIT_MS) == 0,
		      "the uid %d client failed (see above)", NOBODY);

	/* Root's timer fired into its own session's queue: nobody's session
	 * of the same name touched nothing. */
	du_sleep_until(due + 100 * DU_MS);
	c = du_connect(d->sock);
	e = du_hello(c, "e2e-orders");
	ck_assert(hr_of(e)->resumed);
	ck_assert_uint_eq(hr_of(e)->timers, 0);
	ck_assert_uint_eq(hr_of(e)->queued, 1);
	bwp_frame_free(e);
	e = du_expect_fire(c, DU_WAIT_MS, NULL);
	ck_assert(e->fired->key == 1 && e->fired->payload.len == 4);
	bwp_frame_free(e);
	du_conn_free(c);

	/* Root may name nobody's namespace, and the session stays nobody's. */
	o = legacy;
	o.has_owner_uid = true;
	o.owner_uid = NOBODY;
	c = du_connect(d->sock);
	e = du_hello_opts(c, "e2e-orders", &o);
	ck_assert_msg(hr_of(e)->resumed && hr_of(e)->timers == 1 &&
		      hr_of(e)->owner_uid == NOBODY,
		      "root could not attach to uid %d's session", NOBODY);
	bwp_frame_free(e);
	du_conn_free(c);
	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->sessions, 2);
	bwp_frame_free(e);

	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		struct du_conn *n;

		du_become(NOBODY);
		n = du_connect(d->sock);
		e = du_hello(n, "e2e-orders");
		_exit(hr_of(e)->resumed && hr_of(e)->timers == 1 ? 0 : 6);
	}
	ck_assert_msg(du_wait_child(pid, DU_WAIT_MS) == 0,
		      "the owner could not attach to its session after root did");
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * systemd: socket activation, sd_notify
 * ====================================================================== */

static void wait_for_path(const char *path)
{
	uint64_t deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	struct stat st;

	while (stat(path, &st) != 0) {
		ck_assert_msg(du_now_ns() < deadline, "%s never appeared", path);
		du_sleep_ms(5);
	}
}

/*
 * systemd-socket-activate binds the socket and starts the daemon on the
 * first connection with LISTEN_FDS; the daemon must serve on that socket
 * (its own --socket is ignored), report READY=1, and leave the socket,
 * which is systemd's, in place when it stops.
 */
START_TEST(test_socket_activation)
{
	struct du_daemon *d = du_daemon_new();
	char notify_env[160], ignored[128];
	const char *argv[12];
	struct du_conn *c, *c2;
	struct du_sched s = { .key = 3, .when = DU_DELAY, .when_ns = 20 * DU_MS };
	struct stat st;
	du_env *e;
	char *log;

	ck_assert_msg(du_have_tool("systemd-socket-activate"),
		      "systemd-socket-activate not in PATH: install the Debian package systemd");
	snprintf(notify_env, sizeof(notify_env), "NOTIFY_SOCKET=%s", d->notify);
	snprintf(ignored, sizeof(ignored), "%s/ignored.sock", d->dir);
	argv[0] = "systemd-socket-activate";
	argv[1] = "-l";
	argv[2] = d->sock;
	/* It passes on only the environment it is told to: the build's
	 * libraries too (daemonutil.c runs the daemon's .libs binary). */
	argv[3] = "-E";
	argv[4] = notify_env;
	argv[5] = "-E";
	argv[6] = "LD_LIBRARY_PATH";
	argv[7] = DU_DAEMON_PATH;
	argv[8] = "--socket";
	argv[9] = ignored;
	argv[10] = NULL;
	du_daemon_spawn(d, argv);
	wait_for_path(d->sock);

	/* The first connection starts the daemon; it waits in the backlog. */
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	bwp_frame_free(e);
	ck_assert_msg(du_daemon_wait_notify(d, "READY=1", DU_WAIT_MS),
		      "no READY=1 from the socket-activated daemon");
	e = du_schedule(c, 2, &s);
	bwp_frame_free(e);
	e = du_expect_fire(c, 2000, NULL);
	ck_assert_uint_eq(e->fired->key, 3);
	bwp_frame_free(e);

	c2 = du_open(d, "e2e-activated");
	e = du_stats(c2, 2);
	ck_assert_uint_eq(e->stats_reply->clients, 2);
	bwp_frame_free(e);
	ck_assert_msg(stat(ignored, &st) != 0 && errno == ENOENT,
		      "the socket-activated daemon bound its --socket path too");
	du_conn_free(c2);
	du_conn_free(c);

	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	ck_assert_msg(stat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode),
		      "the daemon removed the socket systemd passed it");
	log = du_daemon_log(d);
	ck_assert_msg(strstr(log, "stopping") != NULL, "log: %s", log);
	free(log);
	du_daemon_free(d);
}
END_TEST

/* READY=1 once it listens (the connection right after it works), STATUS=,
 * and STOPPING=1 on SIGTERM. */
START_TEST(test_notify)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;

	du_daemon_start(d, NULL);
	c = du_open(d, NULL);
	ck_assert_msg(du_daemon_wait_notify(d, "STATUS=", DU_WAIT_MS),
		      "no STATUS= line; got: %s", d->notes ? d->notes : "");
	ck_assert_msg(!du_daemon_wait_notify(d, "STOPPING=1", 0),
		      "STOPPING=1 before any signal");
	du_conn_free(c);
	kill(d->pid, SIGTERM);
	ck_assert_msg(du_daemon_wait_notify(d, "STOPPING=1", DU_WAIT_MS),
		      "no STOPPING=1 after SIGTERM; got: %s", d->notes ? d->notes : "");
	du_assert_exit(d, du_daemon_stop(d, 0, DU_WAIT_MS), 0);
	du_daemon_free(d);
}
END_TEST

/* WATCHDOG_USEC=200000: WATCHDOG=1 pings at about half of it. */
START_TEST(test_watchdog)
{
	struct du_daemon *d = du_daemon_new();
	const char *argv[] = { "env", "WATCHDOG_USEC=200000", DU_DAEMON_PATH,
			       "--socket", d->sock, NULL };
	uint64_t t0;

	du_daemon_spawn(d, argv);
	ck_assert(du_daemon_wait_notify(d, "READY=1", DU_WAIT_MS));
	t0 = du_now_ns();
	ck_assert_msg(du_daemon_wait_notify(d, "WATCHDOG=1", 2000),
		      "no WATCHDOG=1 within 2 s of READY=1 with a 200 ms watchdog");
	ck_assert_msg(du_now_ns() - t0 <= 200 * DU_MS + 4 * du_margin_ns(),
		      "first WATCHDOG=1 only after %.0f ms", (double)(du_now_ns() - t0) / 1e6);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * malformed, truncated, oversized
 * ====================================================================== */

/* A frame whose body is the given bytes. */
static void send_body(struct du_conn *c, const uint8_t *body, size_t len)
{
	uint8_t buf[256];

	ck_assert(len + 4 <= sizeof(buf));
	put_be32(buf, (uint32_t)len);
	memcpy(buf + 4, body, len);
	send_raw(c, buf, len + 4);
}

/* The frame parser itself agrees the bytes are what the test says. */
static void assert_parse(const uint8_t *body, size_t len, int want)
{
	uint8_t buf[256];
	du_env *e;
	size_t flen;
	int rc;

	put_be32(buf, (uint32_t)len);
	memcpy(buf + 4, body, len);
	rc = bwp_frame_parse(buf, len + 4, BWP_DEFAULT_MAX_FRAME, &e, &flen);
	ck_assert_msg(rc == want, "bwp_frame_parse of the test's bytes: %d, expected %d",
		      rc, want);
	bwp_frame_free(e);
}

START_TEST(test_zero_length)
{
	struct du_daemon *d = du_daemon_new();
	static const uint8_t zero[4] = { 0, 0, 0, 0 };
	struct du_conn *c;

	du_daemon_start(d, NULL);
	/* Before and after Hello alike. */
	for (int hello = 0; hello < 2; hello++) {
		c = du_connect(d->sock);
		if (hello)
			bwp_frame_free(du_hello(c, NULL));
		send_raw(c, zero, sizeof(zero));
		du_expect_error(c, false, 0, EC(BAD_FRAME));
		du_expect_eof(c, DU_WAIT_MS);
		du_conn_free(c);
	}
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/*
 * --max-frame 4096: a body of exactly 4096 bytes is read (and its request
 * refused for its payload, the connection staying open); a header saying
 * 4097 is refused at once, before any body is sent, and the connection
 * closes.
 */
START_TEST(test_frame_too_large)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint8_t *payload = calloc(1, 8192), hdr[4];
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = DU_S,
			      .payload = payload };
	struct du_buf b = { 0 };
	du_env *e;

	ck_assert_ptr_nonnull(payload);
	du_daemon_start(d, "--max-frame", "4096", NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	ck_assert_uint_eq(hr_of(e)->limits->max_frame_bytes, 4096);
	bwp_frame_free(e);

	/* A Schedule whose body is exactly 4096 bytes. */
	for (s.payload_len = 4096; s.payload_len > 0; s.payload_len--) {
		b.len = 0;
		du_pack_schedule(&b, 2, &s);
		if (b.len <= 4 + 4096)
			break;
	}
	ck_assert_uint_eq(b.len, 4 + 4096);
	du_send_buf(c, &b);
	du_buf_free(&b);
	du_expect_error(c, true, 2, EC(PAYLOAD_TOO_LARGE));

	put_be32(hdr, 4097);
	send_raw(c, hdr, sizeof(hdr));
	du_expect_error(c, false, 0, EC(FRAME_TOO_LARGE));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);

	/* The same before Hello, with a length no body could follow. */
	c = du_connect(d->sock);
	put_be32(hdr, 0xffffffffu);
	send_raw(c, hdr, sizeof(hdr));
	du_expect_error(c, false, 0, EC(FRAME_TOO_LARGE));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	free(payload);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* A header promising more than follows: the daemon waits (no error, no
 * close); when the client gives up and closes, the daemon lives on. */
START_TEST(test_truncated_frame)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint8_t buf[14] = { 0, 0, 0, 100, 0x08, 0x01, 0x12, 0x02, 0x08, 0x01 };
	du_env *e;

	du_daemon_start(d, NULL);
	for (int hello = 0; hello < 2; hello++) {
		c = du_connect(d->sock);
		if (hello)
			bwp_frame_free(du_hello(c, NULL));
		send_raw(c, buf, sizeof(buf));
		du_expect_quiet(c, 200);
		du_conn_free(c);
	}
	e = wait_stats(d, only_me, 0, "the truncating clients gone");
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, 0);
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_invalid_protobuf)
{
	struct du_daemon *d = du_daemon_new();
	/* hello, 5 bytes long, but one byte follows. */
	static const uint8_t body[] = { 0x12, 0x05, 0x08 };
	/* A varint that never ends. */
	static const uint8_t body2[] = { 0x08, 0xff, 0xff, 0xff };
	struct du_conn *c;

	assert_parse(body, sizeof(body), BWP_EDECODE);
	assert_parse(body2, sizeof(body2), BWP_EDECODE);
	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	send_body(c, body, sizeof(body));
	du_expect_error(c, false, 0, EC(BAD_FRAME));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	c = du_open(d, NULL);
	send_body(c, body2, sizeof(body2));
	du_expect_error(c, false, 0, EC(BAD_FRAME));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/*
 * Varints wider than their fields, which protobuf-c would cut to the
 * field's width (version 2^32 + 2 read as 2, owner_uid 2^32 + uid as uid,
 * a key past 64 bits as its low 64): BAD_REQUEST without request_id, then
 * close, before any check sees the cut value.
 */
START_TEST(test_varint_out_of_range)
{
	struct du_daemon *d = du_daemon_new();
	/* Hello, request_id 1, protocol_version 2^32 + 2. */
	static const uint8_t version[] = { 0x08, 0x01, 0x12, 0x06, 0x08, 0x82, 0x80,
					   0x80, 0x80, 0x10 };
	/* Schedule, request_id 2, key 2^64 + 2^63 + ... (ten bytes, the last
	 * 0x7f), delay 1 s. */
	static const uint8_t key[] = { 0x08, 0x02, 0x1a, 0x11, 0x08, 0xff, 0xff, 0xff,
				       0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
				       0x10, 0x80, 0x94, 0xeb, 0xdc, 0x03 };
	/* Hello, request_id 1, version 2, session "v", owner_uid 2^32 + uid. */
	uint8_t owner[32] = { 0x08, 0x01, 0x12, 0x00, 0x08, 0x02, 0x12, 0x01, 'v', 0x38 };
	uint64_t uid = (1ull << 32) + getuid();
	size_t n = 10;
	struct du_conn *c;

	for (; uid > 0x7f; uid >>= 7)
		owner[n++] = (uint8_t)(uid | 0x80);
	owner[n++] = (uint8_t)uid;
	owner[3] = (uint8_t)(n - 4);
	assert_parse(version, sizeof(version), BWP_ERANGE);
	assert_parse(key, sizeof(key), BWP_ERANGE);
	assert_parse(owner, n, BWP_ERANGE);
	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	send_body(c, version, sizeof(version));
	du_expect_error(c, false, 0, EC(BAD_REQUEST));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	c = du_connect(d->sock);
	send_body(c, owner, n);
	du_expect_error(c, false, 0, EC(BAD_REQUEST));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	c = du_open(d, NULL);
	send_body(c, key, sizeof(key));
	du_expect_error(c, false, 0, EC(BAD_REQUEST));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* An envelope without a body, or with a member this protocol lacks:
 * UNKNOWN_MESSAGE without request_id, then close. */
START_TEST(test_no_body)
{
	struct du_daemon *d = du_daemon_new();
	static const uint8_t nobody[] = { 0x08, 0x07 };           /* request_id 7 */
	static const uint8_t unknown[] = { 0x08, 0x07, 0xf2, 0x01, 0x00 }; /* + field 30 */
	struct du_conn *c;

	assert_parse(nobody, sizeof(nobody), BWP_ENOBODY);
	assert_parse(unknown, sizeof(unknown), BWP_ENOBODY);
	du_daemon_start(d, NULL);
	c = du_open(d, NULL);
	send_body(c, nobody, sizeof(nobody));
	du_expect_error(c, false, 0, EC(UNKNOWN_MESSAGE));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	c = du_connect(d->sock);
	send_body(c, unknown, sizeof(unknown));
	du_expect_error(c, false, 0, EC(UNKNOWN_MESSAGE));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* Replies and notifications sent to the daemon (loop: which body). */
START_TEST(test_reply_body)
{
	struct du_daemon *d = du_daemon_new();
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__StatsReply sr = BITWHEEL__V1__STATS_REPLY__INIT;
	Bitwheel__V1__Fired f = BITWHEEL__V1__FIRED__INIT;
	Bitwheel__V1__HelloReply hr = BITWHEEL__V1__HELLO_REPLY__INIT;
	Bitwheel__V1__Error er = BITWHEEL__V1__ERROR__INIT;
	struct du_conn *c;

	env.has_request_id = 1;
	env.request_id = 5;
	switch (_i) {
	case 0:
		env.body_case = BC(STATS_REPLY);
		env.stats_reply = &sr;
		break;
	case 1:
		f.has_key = 1;
		env.body_case = BC(FIRED);
		env.fired = &f;
		break;
	case 2:
		env.body_case = BC(HELLO_REPLY);
		env.hello_reply = &hr;
		break;
	default:
		er.has_code = 1;
		er.code = EC(INTERNAL);
		env.body_case = BC(ERROR);
		env.error = &er;
	}
	du_daemon_start(d, NULL);
	for (int hello = 0; hello < 2; hello++) {
		c = du_connect(d->sock);
		if (hello)
			bwp_frame_free(du_hello(c, NULL));
		du_send_env(c, &env);
		du_expect_error(c, true, 5, EC(UNKNOWN_MESSAGE));
		du_expect_eof(c, DU_WAIT_MS);
		du_conn_free(c);
	}
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_bad_version)
{
	struct du_daemon *d = du_daemon_new();
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Hello h = BITWHEEL__V1__HELLO__INIT;
	struct du_conn *c;

	du_daemon_start(d, NULL);
	/* 1 included: version 2's delivery is not version 1's. */
	for (uint32_t v = 0; v <= 3; v += v == 1 ? 2 : 1) {
		h.has_protocol_version = 1;
		h.protocol_version = v;
		env.has_request_id = 1;
		env.request_id = 9;
		env.body_case = BC(HELLO);
		env.hello = &h;
		c = du_connect(d->sock);
		du_send_env(c, &env);
		du_expect_error(c, true, 9, EC(BAD_VERSION));
		du_expect_eof(c, DU_WAIT_MS);
		du_conn_free(c);
	}
	/* No version at all is a missing required field. */
	h.has_protocol_version = 0;
	c = du_connect(d->sock);
	du_send_env(c, &env);
	du_expect_error(c, true, 9, EC(BAD_REQUEST));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* Any request but Hello first: HELLO_REQUIRED, close, no effect. */
START_TEST(test_hello_required)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = DU_MS };
	struct du_conn *c;
	du_env *e;

	du_daemon_start(d, NULL);
	for (int i = 0; i < 3; i++) {
		c = du_connect(d->sock);
		if (i == 0)
			du_send_schedule(c, 4, &s);
		else if (i == 1)
			du_send_cancel(c, 4, 1);
		else
			du_send_stats(c, 4);
		du_expect_error(c, true, 4, EC(HELLO_REQUIRED));
		du_expect_eof(c, DU_WAIT_MS);
		du_conn_free(c);
	}
	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, 0);
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

/* A request without request_id: BAD_REQUEST without one, close, no
 * effect; before Hello and after. */
START_TEST(test_no_request_id)
{
	struct du_daemon *d = du_daemon_new();
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Hello h = BITWHEEL__V1__HELLO__INIT;
	Bitwheel__V1__Schedule sc = BITWHEEL__V1__SCHEDULE__INIT;
	struct du_conn *c;
	du_env *e;

	du_daemon_start(d, NULL);
	h.has_protocol_version = 1;
	h.protocol_version = BWP_PROTOCOL_VERSION;
	env.body_case = BC(HELLO);
	env.hello = &h;
	c = du_connect(d->sock);
	du_send_env(c, &env);
	du_expect_error(c, false, 0, EC(BAD_REQUEST));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);

	sc.has_key = 1;
	sc.key = 1;
	sc.when_case = BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS;
	sc.delay_ns = DU_MS;
	env.body_case = BC(SCHEDULE);
	env.schedule = &sc;
	c = du_open(d, NULL);
	du_send_env(c, &env);
	du_expect_error(c, false, 0, EC(BAD_REQUEST));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, 0);
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

/* A second Hello: ALREADY_HELLO, nothing changes, the connection stays. */
START_TEST(test_second_hello)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_open(d, NULL);
	du_send_hello(c, 2, "e2e-second");
	du_expect_error(c, true, 2, EC(ALREADY_HELLO));
	du_send_hello(c, 3, NULL);
	du_expect_error(c, true, 3, EC(ALREADY_HELLO));
	e = du_stats(c, 4);
	ck_assert_msg(e->stats_reply->sessions == 0,
		      "the refused second Hello created a named session");
	bwp_frame_free(e);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* Session names: 1 to 64 bytes of [A-Za-z0-9_.:@-]. */
START_TEST(test_bad_session_name)
{
	static const char *const bad[] = { "", "has space", "a/b", "tab\there",
					   "caf\xc3\xa9", "semi;colon" };
	struct du_daemon *d = du_daemon_new();
	char name[80];
	struct du_conn *c;
	du_env *e;

	du_daemon_start(d, NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]) + 1; i++) {
		const char *n = bad[i < sizeof(bad) / sizeof(bad[0]) ? i : 0];

		if (i == sizeof(bad) / sizeof(bad[0])) {
			memset(name, 'a', 65);
			name[65] = '\0';
			n = name;
		}
		c = du_connect(d->sock);
		du_send_hello(c, 1, n);
		du_expect_error(c, true, 1, EC(BAD_REQUEST));
		du_expect_eof(c, DU_WAIT_MS);
		du_conn_free(c);
	}
	/* At the edges of the rule: 64 bytes, every allowed punctuation. */
	memset(name, 'z', 64);
	name[64] = '\0';
	c = du_connect(d->sock);
	bwp_frame_free(du_hello(c, name));
	du_conn_free(c);
	c = du_connect(d->sock);
	bwp_frame_free(du_hello(c, "A-z_0.9:x@y"));
	du_conn_free(c);
	/* owner_uid names a namespace: without a session name it is wrong. */
	{
		struct du_hello_opts o = { .has_owner_uid = true, .owner_uid = 0 };
		struct du_buf b = { 0 };

		c = du_connect(d->sock);
		du_pack_hello_opts(&b, 1, NULL, &o);
		du_send_buf(c, &b);
		du_buf_free(&b);
		du_expect_error(c, true, 1, EC(BAD_REQUEST));
		du_expect_eof(c, DU_WAIT_MS);
		du_conn_free(c);
	}
	/* The rule holds over every byte: "victim" followed by a NUL and
	 * junk is not "victim", whose owner it would otherwise reach. */
	c = du_connect(d->sock);
	bwp_frame_free(du_hello(c, "victim"));
	du_conn_free(c);
	for (size_t len = 7; len <= 11; len += 4) {
		struct du_hello_opts o = { .role = BITWHEEL__V1__ROLE__CONSUMER,
					   .session_len = len };

		c = du_connect(d->sock);
		{
			struct du_buf b = { 0 };

			du_pack_hello_opts(&b, 1, "victim\0junk", &o);
			du_send_buf(c, &b);
			du_buf_free(&b);
		}
		du_expect_error(c, true, 1, EC(BAD_REQUEST));
		du_expect_eof(c, DU_WAIT_MS);
		du_conn_free(c);
	}
	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->sessions, 3);
	ck_assert_uint_eq(e->stats_reply->consumers, 1); /* the Stats' own */
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_payload_too_large)
{
	struct du_daemon *d = du_daemon_new();
	uint8_t p[101];
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = DU_MS, .payload = p };
	struct du_conn *c;
	du_env *e;

	memset(p, 'x', sizeof(p));
	du_daemon_start(d, "--max-payload", "100", NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	ck_assert_uint_eq(hr_of(e)->limits->max_payload_bytes, 100);
	bwp_frame_free(e);
	s.payload_len = 101;
	du_send_schedule(c, 2, &s);
	du_expect_error(c, true, 2, EC(PAYLOAD_TOO_LARGE));
	s.payload_len = 100;
	bwp_frame_free(du_schedule(c, 3, &s));
	e = du_expect_fire(c, 2000, NULL);
	ck_assert_uint_eq(e->fired->payload.len, 100);
	bwp_frame_free(e);
	e = du_stats(c, 4);
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, 1);
	bwp_frame_free(e);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_max_timers)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .when = DU_DELAY, .when_ns = 3600 * DU_S };
	struct du_conn *c, *c2;
	du_env *e;

	du_daemon_start(d, "--max-timers", "3", NULL);
	c = du_connect(d->sock);
	e = du_hello(c, "e2e-max-timers");
	ck_assert_uint_eq(hr_of(e)->limits->max_timers, 3);
	bwp_frame_free(e);
	for (s.key = 1; s.key <= 3; s.key++)
		bwp_frame_free(du_schedule(c, s.key + 1, &s));
	s.key = 4;
	du_send_schedule(c, 5, &s);
	du_expect_error(c, true, 5, EC(TOO_MANY_TIMERS));
	/* A replace does not add a timer. */
	s.key = 2;
	s.replace = true;
	e = du_schedule(c, 6, &s);
	ck_assert(e->schedule_reply->replaced);
	bwp_frame_free(e);
	s.replace = false;
	ck_assert(du_cancel(c, 7, 1));
	s.key = 4;
	bwp_frame_free(du_schedule(c, 8, &s));
	s.key = 5;
	du_send_schedule(c, 9, &s);
	du_expect_error(c, true, 9, EC(TOO_MANY_TIMERS));
	/* Per session: another one has its own three. */
	c2 = du_open(d, NULL);
	for (s.key = 1; s.key <= 3; s.key++)
		bwp_frame_free(du_schedule(c2, s.key + 1, &s));
	e = du_stats(c2, 9);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 6);
	bwp_frame_free(e);
	du_conn_free(c2);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* Required Schedule/Cancel fields; errors that leave the connection open
 * and the session as it was. */
START_TEST(test_schedule_fields)
{
	struct du_daemon *d = du_daemon_new();
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Cancel cn = BITWHEEL__V1__CANCEL__INIT;
	struct du_sched s;
	struct du_conn *c;
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_open(d, NULL);
	s = (struct du_sched){ .no_key = true, .when = DU_DELAY, .when_ns = DU_MS };
	du_send_schedule(c, 2, &s);
	du_expect_error(c, true, 2, EC(BAD_REQUEST));
	s = (struct du_sched){ .key = 1, .when = DU_NO_WHEN };
	du_send_schedule(c, 3, &s);
	du_expect_error(c, true, 3, EC(BAD_DEADLINE));
	s = (struct du_sched){ .key = 1, .when = DU_DELAY, .when_ns = DU_MS,
			       .periodic = true, .period_ns = 0 };
	du_send_schedule(c, 4, &s);
	du_expect_error(c, true, 4, EC(BAD_DEADLINE));
	s = (struct du_sched){ .key = 1, .when = DU_DELAY, .when_ns = UINT64_MAX };
	du_send_schedule(c, 5, &s);
	du_expect_error(c, true, 5, EC(BAD_DEADLINE));
	/* Shorter than the finest lane's tick (1 ms), root or not. */
	s = (struct du_sched){ .key = 1, .when = DU_DELAY, .when_ns = DU_MS,
			       .periodic = true, .period_ns = DU_MS - 1 };
	du_send_schedule(c, 55, &s);
	du_expect_error(c, true, 55, EC(BAD_DEADLINE));
	env.has_request_id = 1;
	env.request_id = 6;
	env.body_case = BC(CANCEL);
	env.cancel = &cn;
	du_send_env(c, &env);
	du_expect_error(c, true, 6, EC(BAD_REQUEST));

	e = du_stats(c, 7);
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, 0);
	ck_assert_uint_eq(e->stats_reply->periodic->inserted, 0);
	bwp_frame_free(e);
	s = (struct du_sched){ .key = 1, .when = DU_DELAY, .when_ns = DU_MS };
	bwp_frame_free(du_schedule(c, 8, &s));
	e = du_expect_fire(c, 2000, NULL);
	ck_assert_uint_eq(e->fired->key, 1);
	bwp_frame_free(e);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* request_id: any value, 0 and 2^64-1 included, repeats allowed; each
 * reply carries its request's. */
START_TEST(test_request_ids)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_buf b = { 0 };

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	du_send_hello(c, 0, NULL);
	bwp_frame_free(du_expect_reply(c, 0, BC(HELLO_REPLY)));
	du_pack_stats(&b, UINT64_MAX);
	du_pack_stats(&b, 7);
	du_pack_stats(&b, 7);
	du_pack_cancel(&b, 0, 1);
	du_send_buf(c, &b);
	du_buf_free(&b);
	bwp_frame_free(du_expect_reply(c, UINT64_MAX, BC(STATS_REPLY)));
	bwp_frame_free(du_expect_reply(c, 7, BC(STATS_REPLY)));
	bwp_frame_free(du_expect_reply(c, 7, BC(STATS_REPLY)));
	bwp_frame_free(du_expect_reply(c, 0, BC(CANCEL_REPLY)));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/*
 * Fields the reader does not know are ignored (PROTOCOL.md 4,
 * "Compatibility"): a Stats envelope, packed by frame.h, with two unknown
 * fields appended to its body (field 99 varint, field 100 bytes).
 */
START_TEST(test_unknown_fields)
{
	static const uint8_t extra[] = { 0x98, 0x06, 0x01, 0xa2, 0x06, 0x02, 'h', 'i' };
	struct du_daemon *d = du_daemon_new();
	struct du_buf b = { 0 };
	struct du_conn *c;
	uint8_t *frame;
	size_t flen;
	du_env *e;

	du_pack_stats(&b, 3);
	flen = b.len + sizeof(extra);
	frame = malloc(flen);
	ck_assert_ptr_nonnull(frame);
	memcpy(frame, b.data, b.len);
	memcpy(frame + b.len, extra, sizeof(extra));
	put_be32(frame, (uint32_t)(flen - 4));
	du_buf_free(&b);
	/* Still a valid Stats request to our own parser. */
	{
		size_t n;
		int rc = bwp_frame_parse(frame, flen, BWP_DEFAULT_MAX_FRAME, &e, &n);

		ck_assert_int_eq(rc, BWP_OK);
		ck_assert(e->body_case == BC(STATS) && e->request_id == 3);
		bwp_frame_free(e);
	}
	du_daemon_start(d, NULL);
	c = du_open(d, NULL);
	send_raw(c, frame, flen);
	bwp_frame_free(du_expect_reply(c, 3, BC(STATS_REPLY)));
	free(frame);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/*
 * A Stats padded with 20,000 unknown fields (60 KB, under the frame limit)
 * is refused unread: BAD_FRAME without request_id, closed (PROTOCOL.md 3:
 * only a Schedule may need a payload's length); the daemon serves on.
 */
START_TEST(test_padded_request)
{
	enum { NFIELDS = 20000 };
	struct du_daemon *d = du_daemon_new();
	size_t body = 2 + 1 + 3 + NFIELDS * 3, n = 0;
	uint8_t *buf = malloc(BWP_HEADER_SIZE + body);
	struct du_conn *c;

	ck_assert_ptr_nonnull(buf);
	du_daemon_start(d, NULL);
	buf[n++] = (uint8_t)(body >> 24);
	buf[n++] = (uint8_t)(body >> 16);
	buf[n++] = (uint8_t)(body >> 8);
	buf[n++] = (uint8_t)body;
	buf[n++] = 0x08;                   /* request_id 1 */
	buf[n++] = 0x01;
	buf[n++] = 0x2a;                   /* stats, length in three bytes */
	buf[n++] = (uint8_t)(0x80 | ((NFIELDS * 3) & 0x7f));
	buf[n++] = (uint8_t)(0x80 | (((NFIELDS * 3) >> 7) & 0x7f));
	buf[n++] = (uint8_t)((NFIELDS * 3) >> 14);
	for (int i = 0; i < NFIELDS; i++) {
		buf[n++] = 0xa0;           /* field 100, varint 1 */
		buf[n++] = 0x06;
		buf[n++] = 0x01;
	}
	ck_assert_uint_eq(n, BWP_HEADER_SIZE + body);
	c = du_connect(d->sock);
	du_send_hello(c, 1, NULL);
	bwp_frame_free(du_expect_reply(c, 1, BC(HELLO_REPLY)));
	ck_assert_int_eq(du_conn_send_bytes(c, buf, n, DU_WAIT_MS), 0);
	du_expect_error(c, false, 0, EC(BAD_FRAME));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	du_assert_serving(d);
	free(buf);
	du_daemon_free(d);
}
END_TEST

/* Frames trickled a byte at a time, and several frames in one write. */
START_TEST(test_split_frames)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = 5 * DU_MS,
			      .payload = "split", .payload_len = 5 };
	struct du_buf b = { 0 };
	struct du_conn *c;
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	du_pack_hello(&b, 1, "e2e-split");
	du_pack_schedule(&b, 2, &s);
	du_pack_stats(&b, 3);
	for (size_t i = 0; i < b.len; i++) {
		send_raw(c, b.data + i, 1);
		du_sleep_ms(1);
	}
	du_buf_free(&b);
	bwp_frame_free(du_expect_reply(c, 1, BC(HELLO_REPLY)));
	bwp_frame_free(du_expect_reply(c, 2, BC(SCHEDULE_REPLY)));
	bwp_frame_free(du_expect_reply(c, 3, BC(STATS_REPLY)));
	e = du_expect_fire(c, 2000, NULL);
	ck_assert(e->fired->payload.len == 5);
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * limits
 * ====================================================================== */

START_TEST(test_max_clients)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c[3], *x;
	uint64_t deadline;
	du_env *e;

	du_daemon_start(d, "--max-clients", "3", "--max-clients-per-uid", "3", NULL);
	for (int i = 0; i < 3; i++) {
		c[i] = du_connect(d->sock);
		e = du_hello(c[i], NULL);
		ck_assert_uint_eq(hr_of(e)->limits->max_clients, 3);
		bwp_frame_free(e);
	}
	/* The fourth hears why before it says anything, then is closed. */
	x = du_connect(d->sock);
	du_expect_error(x, false, 0, EC(TOO_MANY_CLIENTS));
	du_expect_eof(x, DU_WAIT_MS);
	du_conn_free(x);
	for (int i = 0; i < 3; i++)
		bwp_frame_free(du_stats(c[i], 2));

	/* A place freed is a place taken. */
	du_conn_free(c[0]);
	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	for (;;) {
		x = du_connect(d->sock);
		du_send_hello(x, 1, NULL);
		ck_assert_int_eq(du_recv(x, DU_WAIT_MS, &e), DU_FRAME);
		if (e->body_case == BC(HELLO_REPLY))
			break;
		ck_assert_msg(e->body_case == BC(ERROR) &&
			      e->error->code == EC(TOO_MANY_CLIENTS) &&
			      du_now_ns() < deadline,
			      "a closed connection never freed its place");
		bwp_frame_free(e);
		du_conn_free(x);
		du_sleep_ms(5);
	}
	bwp_frame_free(e);
	e = du_stats(x, 2);
	ck_assert_uint_eq(e->stats_reply->clients, 3);
	bwp_frame_free(e);
	du_conn_free(x);
	du_conn_free(c[1]);
	du_conn_free(c[2]);
	du_daemon_free(d);
}
END_TEST

#define NSLOW 20000
#define SLOW_PAYLOAD 1024
#define NPROBE 40

static void slow_payload(uint64_t key, uint8_t *p)
{
	for (size_t j = 0; j < SLOW_PAYLOAD; j++)
		p[j] = (uint8_t)(key * 31 + j * 7);
}

/*
 * A client that stops reading while 20,000 fires with 1 KiB payloads come
 * due at once (--max-output 262144) is not disconnected: its output stops
 * at the bound and the rest of its fires wait in the session's queue
 * (PROTOCOL.md 8, "Slow readers"); a second client that reads has its
 * fires on time meanwhile; when the slow one reads again, every fire
 * comes, once.
 */
START_TEST(test_slow_consumer)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *slow, *probe;
	struct du_buf b = { 0 };
	uint8_t *p = malloc(SLOW_PAYLOAD);
	uint64_t t, res, worst = 0, received = 0, queued, dropped;
	uint64_t probe_deadline[NPROBE];
	int probe_fired = 0;
	du_env *e;
	uint8_t *seen = calloc(NSLOW, 1);

	ck_assert(p != NULL && seen != NULL);
	du_daemon_start(d, "--max-output", "262144", "--max-queued", "4096", NULL);
	slow = du_connect(d->sock);
	e = du_hello(slow, "e2e-slow");
	res = hr_of(e)->oneshot_resolution_ns;
	bwp_frame_free(e);
	probe = du_open(d, NULL);

	t = du_now_ns() + 2 * DU_S;
	/* The probe's timers are due from 100 ms before the burst to 300 ms
	 * after it. */
	for (int i = 0; i < NPROBE; i++) {
		struct du_sched s = { .key = (uint64_t)i, .when = DU_DEADLINE,
				      .when_ns = t - 100 * DU_MS + (uint64_t)i * 10 * DU_MS };

		probe_deadline[i] = s.when_ns;
		du_pack_schedule(&b, (uint64_t)i + 2, &s);
	}
	du_send_buf(probe, &b);
	for (int i = 0; i < NPROBE; i++)
		bwp_frame_free(du_expect_reply(probe, (uint64_t)i + 2, BC(SCHEDULE_REPLY)));

	/* The slow client reads its ScheduleReplies, in batches... */
	for (uint64_t k = 0; k < NSLOW; k += 500) {
		for (uint64_t j = k; j < k + 500; j++) {
			struct du_sched s = { .key = j, .when = DU_DEADLINE, .when_ns = t,
					      .payload = p, .payload_len = SLOW_PAYLOAD };

			slow_payload(j, p);
			du_pack_schedule(&b, j + 2, &s);
		}
		du_send_buf(slow, &b);
		for (uint64_t j = k; j < k + 500; j++)
			bwp_frame_free(du_expect_reply(slow, j + 2, BC(SCHEDULE_REPLY)));
	}
	du_buf_free(&b);
	ck_assert_msg(du_now_ns() < t - 150 * DU_MS,
		      "scheduling %d timers took more than 1.85 s: too slow a machine "
		      "for this test", NSLOW);
	du_note("slow consumer: %d timers scheduled %.0f ms before they fire", NSLOW,
		(double)(t - du_now_ns()) / 1e6);
	/* ...and then reads nothing while they fire. */

	while (probe_fired < NPROBE) {
		uint64_t rx, late;

		e = du_expect_fire(probe, 5000, &rx);
		ck_assert(e->fired->key < NPROBE);
		ck_assert_uint_eq(e->fired->deadline_ns, probe_deadline[e->fired->key]);
		/* Overload allows more than one tick (PROTOCOL.md 6); four
		 * margins is "on time" for this test. */
		late = du_check_fire_time(e->fired, rx, res + 3 * du_margin_ns());
		worst = late > worst ? late : worst;
		probe_fired++;
		bwp_frame_free(e);
	}
	du_note("slow consumer: the reading client's worst lateness %.3f ms",
		(double)worst / 1e6);

	/* The slow client is not cut off: what its output bound did not take
	 * waits in the session's queue... */
	e = du_fresh_stats(d);
	queued = e->stats_reply->queued;
	dropped = e->stats_reply->dropped;
	bwp_frame_free(e);
	du_note("slow consumer: while it does not read, %" PRIu64 " fires wait in the queue, %" PRIu64 " dropped",
		queued, dropped);
	ck_assert_msg(queued > 0 && dropped == 0,
		      "queued %" PRIu64 " dropped %" PRIu64 ": fires should wait, not go",
		      queued, dropped);
	/* ...and once it reads, every fire comes, once. */
	while (received < NSLOW) {
		int rc = du_recv(slow, DU_WAIT_MS, &e);
		char desc[256];

		ck_assert_msg(rc == DU_FRAME, "the slow client got %" PRIu64 " of %d fires, then rc %d",
			      received, NSLOW, rc);
		ck_assert_msg(e->body_case == BC(FIRED), "slow client got %s",
			      du_describe(e, desc, sizeof(desc)));
		ck_assert(e->fired->key < NSLOW);
		ck_assert_msg(!seen[e->fired->key], "key %" PRIu64 " delivered twice",
			      e->fired->key);
		seen[e->fired->key] = 1;
		slow_payload(e->fired->key, p);
		ck_assert_msg(e->fired->payload.len == SLOW_PAYLOAD &&
			      memcmp(e->fired->payload.data, p, SLOW_PAYLOAD) == 0,
			      "fire %" PRIu64 " (key %" PRIu64 ", delivery %" PRIu64
			      "): payload of %zu bytes is not the one scheduled",
			      received, e->fired->key, e->fired->delivery,
			      e->fired->payload.len);
		received++;
		bwp_frame_free(e);
	}
	du_expect_quiet(slow, 50);
	du_conn_free(slow);
	du_conn_free(probe);
	free(seen);
	free(p);
	du_daemon_free(d);
}
END_TEST

/* ---- introspection --------------------------------------------------- */

static void schedule_keys(struct du_conn *c, uint64_t from, uint64_t to)
{
	struct du_sched sc = { .when = DU_DELAY, .when_ns = 3600 * DU_S };

	for (uint64_t k = from; k < to; k++) {
		sc.key = k;
		du_send_schedule(c, k, &sc);
	}
	for (uint64_t k = from; k < to; k++)
		bwp_frame_free(du_expect_reply(c, k, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY));
}

/*
 * A listing paged over requests while its session's map grows tenfold
 * between them returns every timer that was there all along exactly
 * once (the cursor stands for a position in an order that growth keeps)
 * and the new ones at most once; a page holds at most 1,000; a cursor
 * that does not continue the connection's last listing (spent, or from
 * another connection) is BAD_REQUEST, and the connection goes on.
 */
START_TEST(test_list_cursor)
{
	struct du_daemon *d = du_daemon_new();
	static uint8_t seen[4000];
	struct du_conn *c, *o;
	uint64_t cursor, first, id = 10000;
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_open(d, "intro-cursor");
	schedule_keys(c, 0, 300);
	e = du_list(c, id++, "intro-cursor", 100, 0);
	ck_assert_uint_eq(e->list_timers_reply->n_timers, 100);
	ck_assert(e->list_timers_reply->more && e->list_timers_reply->has_cursor);
	first = cursor = e->list_timers_reply->cursor;
	for (size_t i = 0; i < 100; i++)
		seen[e->list_timers_reply->timers[i]->key]++;
	bwp_frame_free(e);
	/* Another connection cannot continue it. */
	o = du_open(d, "intro-cursor");
	du_send_list(o, 5, "intro-cursor", 0, cursor);
	du_expect_error(o, true, 5, BITWHEEL__V1__ERROR_CODE__BAD_REQUEST);
	du_conn_free(o);
	schedule_keys(c, 1000, 4000);
	for (bool more = true; more;) {
		const Bitwheel__V1__ListTimersReply *r;

		e = du_list(c, id++, "intro-cursor", 0, cursor);
		r = e->list_timers_reply;
		ck_assert_uint_le(r->n_timers, 1000);
		ck_assert_uint_eq(r->total, 3300);
		for (size_t i = 0; i < r->n_timers; i++)
			seen[r->timers[i]->key]++;
		more = r->more;
		ck_assert(r->has_cursor == more);
		cursor = r->cursor;
		bwp_frame_free(e);
	}
	for (unsigned k = 0; k < 4000; k++)
		ck_assert_msg(k < 300 ? seen[k] == 1 : k < 1000 ? seen[k] == 0 : seen[k] <= 1,
			      "key %u listed %u times", k, seen[k]);
	/* The first page's cursor is spent; the connection goes on. */
	du_send_list(c, id, "intro-cursor", 0, first);
	du_expect_error(c, true, id, BITWHEEL__V1__ERROR_CODE__BAD_REQUEST);
	bwp_frame_free(du_list(c, id + 1, NULL, 0, 0));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/*
 * With the smallest frames (--max-frame 320, --max-payload 64) a page
 * holds what fits: sessions with names of the longest kind one per
 * reply, timers three, and every one comes, each once.
 */
START_TEST(test_list_small_frames)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c[4];
	char name[65];
	unsigned pages = 0, found = 0, timers = 0;
	uint64_t cursor = 0;
	du_env *e;

	du_daemon_start(d, "--max-frame", "320", "--max-payload", "64", NULL);
	for (int i = 0; i < 4; i++) {
		memset(name, 'a' + i, 64);
		name[64] = '\0';
		c[i] = du_open(d, name);
	}
	schedule_keys(c[0], UINT64_MAX - 4, UINT64_MAX);
	do {
		const Bitwheel__V1__ListSessionsReply *r;

		e = du_list(c[0], 100 + pages, NULL, 0, cursor);
		r = e->list_sessions_reply;
		ck_assert_uint_le(r->n_sessions, 1);
		for (size_t i = 0; i < r->n_sessions; i++) {
			ck_assert_uint_eq(r->sessions[i]->name.len, 64);
			found++;
		}
		cursor = r->more ? r->cursor : 0;
		pages++;
		bwp_frame_free(e);
	} while (cursor);
	ck_assert_uint_eq(found, 4);
	do {
		const Bitwheel__V1__ListTimersReply *r;

		memset(name, 'a', 64);
		e = du_list(c[0], 200 + timers, name, 0, cursor);
		r = e->list_timers_reply;
		ck_assert_uint_le(r->n_timers, 3);
		timers += (unsigned)r->n_timers;
		cursor = r->more ? r->cursor : 0;
		bwp_frame_free(e);
	} while (cursor);
	ck_assert_uint_eq(timers, 4);
	for (int i = 0; i < 4; i++)
		du_conn_free(c[i]);
	du_daemon_free(d);
}
END_TEST

#define NMANY 1000

/* 1,000 clients at once, each with one timer and its fire. */
START_TEST(test_many_clients)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn **c = calloc(NMANY, sizeof(*c));
	struct pollfd *pf = calloc(NMANY, sizeof(*pf));
	int *stage = calloc(NMANY, sizeof(*stage));
	unsigned long lim = du_raise_nofile(NMANY * 2 + 100);
	uint64_t deadline, res = 0;
	int done = 0;
	du_env *e;

	ck_assert(c != NULL && pf != NULL && stage != NULL);
	ck_assert_msg(lim >= NMANY + 100, "RLIMIT_NOFILE is %lu: cannot open %d connections",
		      lim, NMANY);
	/* The daemon inherits the raised limit. */
	du_daemon_start(d, "--max-clients", "2000", "--max-clients-per-uid", "2000", NULL);
	for (int i = 0; i < NMANY; i++) {
		struct du_buf b = { 0 };
		char p[16];
		struct du_sched s = { .key = (uint64_t)i, .when = DU_DELAY,
				      .when_ns = 300 * DU_MS, .payload = p };

		s.payload_len = (size_t)snprintf(p, sizeof(p), "client-%d", i);
		c[i] = du_connect(d->sock);
		du_pack_hello(&b, 1, NULL);
		du_pack_schedule(&b, 2, &s);
		du_send_buf(c[i], &b);
		du_buf_free(&b);
	}
	deadline = du_now_ns() + 30 * DU_S;
	while (done < NMANY) {
		int n;

		for (int i = 0; i < NMANY; i++)
			pf[i] = (struct pollfd){ stage[i] < 3 ? c[i]->fd : -1, POLLIN, 0 };
		n = poll(pf, NMANY, 1000);
		ck_assert_msg(du_now_ns() < deadline, "only %d of %d clients done", done, NMANY);
		if (n <= 0)
			continue;
		for (int i = 0; i < NMANY; i++) {
			int rc = DU_TIMEOUT;

			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			while (stage[i] < 3 && (rc = du_recv(c[i], 0, &e)) == DU_FRAME) {
				char desc[256];

				du_describe(e, desc, sizeof(desc));
				if (stage[i] == 0) {
					ck_assert_msg(e->body_case == BC(HELLO_REPLY), "client %d: %s",
						      i, desc);
					res = hr_of(e)->oneshot_resolution_ns;
				} else if (stage[i] == 1) {
					ck_assert_msg(e->body_case == BC(SCHEDULE_REPLY) &&
						      e->request_id == 2, "client %d: %s", i, desc);
				} else {
					char p[16];
					int len = snprintf(p, sizeof(p), "client-%d", i);

					ck_assert_msg(e->body_case == BC(FIRED) &&
						      e->fired->key == (uint64_t)i,
						      "client %d: %s", i, desc);
					ck_assert((int)e->fired->payload.len == len &&
						  memcmp(e->fired->payload.data, p, (size_t)len) == 0);
					ck_assert(e->fired->fired_at_ns >= e->fired->deadline_ns);
					ck_assert(c[i]->rx_ns >= e->fired->deadline_ns);
					ck_assert_msg(e->fired->fired_at_ns - e->fired->deadline_ns <=
						      res + du_margin_ns(),
						      "client %d's fire %.3f ms late", i,
						      (double)(e->fired->fired_at_ns -
							       e->fired->deadline_ns) / 1e6);
					done++;
				}
				stage[i]++;
				bwp_frame_free(e);
			}
			ck_assert_msg(stage[i] == 3 || rc == DU_TIMEOUT,
				      "client %d: connection ended at stage %d (rc %d)", i,
				      stage[i], rc);
		}
	}
	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->clients, NMANY + 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->fired, NMANY);
	bwp_frame_free(e);
	for (int i = 0; i < NMANY; i++)
		du_conn_free(c[i]);
	free(c);
	free(pf);
	free(stage);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * shutdown
 * ====================================================================== */

#define NFLUSH 20000

static bool pending_at_least(const Bitwheel__V1__StatsReply *s, uint64_t n)
{
	return s->oneshot->pending >= n;
}

/*
 * 20,000 replies in flight (handled, not yet read by the client) when
 * SIGTERM comes: every one still arrives, in order, then SHUTTING_DOWN
 * without request_id, then the close.  An idle client gets SHUTTING_DOWN
 * and the close too.  Exit status 0, STOPPING=1, a log line.
 */
START_TEST(test_sigterm_flush)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *busy, *idle;
	struct du_buf b = { 0 };
	uint64_t expect_id = 2;
	du_env *e;
	char *log, desc[256];

	du_daemon_start(d, NULL);
	busy = du_open(d, NULL);
	idle = du_open(d, "e2e-idle");
	for (uint64_t k = 0; k < NFLUSH; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY, .when_ns = 3600 * DU_S };

		du_pack_schedule(&b, k + 2, &s);
	}
	du_send_buf(busy, &b);
	du_buf_free(&b);
	/* All handled: their replies sit in the daemon's buffers. */
	bwp_frame_free(wait_stats(d, pending_at_least, NFLUSH, "all timers pending"));

	ck_assert(kill(d->pid, SIGTERM) == 0);
	for (;;) {
		int rc = du_recv(busy, DU_WAIT_MS, &e);

		ck_assert_msg(rc == DU_FRAME, "after %" PRIu64 " of %d replies: %s",
			      expect_id - 2, NFLUSH,
			      rc == DU_EOF ? "closed without SHUTTING_DOWN" : "timed out");
		du_describe(e, desc, sizeof(desc));
		if (!e->has_request_id) {
			ck_assert_msg(e->body_case == BC(ERROR) &&
				      e->error->code == EC(SHUTTING_DOWN),
				      "expected SHUTTING_DOWN, got %s", desc);
			bwp_frame_free(e);
			break;
		}
		ck_assert_msg(e->body_case == BC(SCHEDULE_REPLY) && e->request_id == expect_id,
			      "expected the ScheduleReply to %" PRIu64 ", got %s", expect_id,
			      desc);
		expect_id++;
		bwp_frame_free(e);
	}
	ck_assert_msg(expect_id - 2 == NFLUSH, "%" PRIu64 " of %d replies before the close",
		      expect_id - 2, NFLUSH);
	du_expect_eof(busy, DU_WAIT_MS);
	du_expect_error(idle, false, 0, EC(SHUTTING_DOWN));
	du_expect_eof(idle, DU_WAIT_MS);
	du_conn_free(busy);
	du_conn_free(idle);

	du_assert_exit(d, du_daemon_stop(d, 0, DU_WAIT_MS), 0);
	ck_assert(du_daemon_wait_notify(d, "STOPPING=1", 0));
	log = du_daemon_log(d);
	ck_assert_msg(strstr(log, "stopping") != NULL, "no 'stopping' in the log:\n%s", log);
	free(log);
	du_daemon_free(d);
}
END_TEST

#define NLOAD 4

/* A loading client: frames packed ahead, written as the socket takes them. */
struct loader {
	struct du_conn *c;
	struct du_buf out;
	size_t *ends;           /* end offset of frame i in out            */
	size_t nframes, written;
	uint64_t next_reply;    /* the request_id the next reply must have */
	bool done;              /* saw the closing SHUTTING_DOWN           */
	bool eof;
};

/* Frames of this loader written to the socket in full. */
static size_t frames_written(const struct loader *l)
{
	size_t n = 0;

	while (n < l->nframes && l->ends[n] <= l->written)
		n++;
	return n;
}

static void loader_read(struct loader *l, int i)
{
	du_env *e;
	int rc;
	char desc[256];

	while (!l->eof && (rc = du_recv(l->c, 0, &e)) != DU_TIMEOUT) {
		if (rc == DU_EOF) {
			ck_assert_msg(l->done, "client %d: closed without SHUTTING_DOWN", i);
			l->eof = true;
			return;
		}
		ck_assert_msg(rc == DU_FRAME, "client %d: bad frame", i);
		du_describe(e, desc, sizeof(desc));
		ck_assert_msg(!l->done, "client %d: %s after the closing SHUTTING_DOWN", i, desc);
		if (e->body_case == BC(FIRED)) {
			bwp_frame_free(e);
			continue;
		}
		if (!e->has_request_id) {
			ck_assert_msg(e->body_case == BC(ERROR) &&
				      e->error->code == EC(SHUTTING_DOWN),
				      "client %d: %s", i, desc);
			l->done = true;
			bwp_frame_free(e);
			continue;
		}
		ck_assert_msg(e->request_id == l->next_reply,
			      "client %d: expected the reply to %" PRIu64 ", got %s", i,
			      l->next_reply, desc);
		/* A reply, or SHUTTING_DOWN for a request read while stopping. */
		ck_assert_msg(e->body_case == BC(SCHEDULE_REPLY) ||
			      e->body_case == BC(STATS_REPLY) ||
			      (e->body_case == BC(ERROR) &&
			       e->error->code == EC(SHUTTING_DOWN)),
			      "client %d: %s", i, desc);
		l->next_reply++;
		bwp_frame_free(e);
	}
}

/*
 * Four clients pipelining Schedules and Stats as fast as the daemon takes
 * them (fires flowing too) when SIGTERM comes.  Each gets, in order, a
 * reply (or SHUTTING_DOWN) to a prefix of the requests it had written,
 * then SHUTTING_DOWN without request_id as the last frame, then the close.
 */
START_TEST(test_sigterm_under_load)
{
	struct du_daemon *d = du_daemon_new();
	struct loader l[NLOAD];
	struct tu_rng rng;
	uint64_t t_signal, deadline;
	size_t written_at_signal[NLOAD];
	bool signalled = false;
	char *log;

	tu_rng_seed(&rng, test_seed());
	du_daemon_start(d, NULL);
	for (int i = 0; i < NLOAD; i++) {
		memset(&l[i], 0, sizeof(l[i]));
		l[i].c = du_open(d, NULL);
		l[i].nframes = 30000;
		l[i].ends = calloc(l[i].nframes, sizeof(size_t));
		ck_assert_ptr_nonnull(l[i].ends);
		for (size_t k = 0; k < l[i].nframes; k++) {
			if (k % 50 == 49) {
				du_pack_stats(&l[i].out, k + 2);
			} else {
				struct du_sched s = { .key = k, .when = DU_DELAY,
						      .when_ns = tu_rng_below(&rng, 50 * DU_MS) };

				du_pack_schedule(&l[i].out, k + 2, &s);
			}
			l[i].ends[k] = l[i].out.len;
		}
		l[i].next_reply = 2;
	}

	t_signal = du_now_ns() + 150 * DU_MS;
	deadline = du_now_ns() + 20 * DU_S;
	for (;;) {
		struct pollfd pf[NLOAD];
		bool all = true;

		for (int i = 0; i < NLOAD; i++) {
			short ev = POLLIN;

			if (!signalled && l[i].written < l[i].out.len)
				ev |= POLLOUT;
			pf[i] = (struct pollfd){ l[i].eof ? -1 : l[i].c->fd, ev, 0 };
			all = all && l[i].eof;
		}
		if (all)
			break;
		ck_assert_msg(du_now_ns() < deadline, "clients not closed 20 s into the test");
		if (!signalled && du_now_ns() >= t_signal) {
			for (int i = 0; i < NLOAD; i++)
				written_at_signal[i] = frames_written(&l[i]);
			ck_assert(kill(d->pid, SIGTERM) == 0);
			signalled = true;
			continue;
		}
		poll(pf, NLOAD, 10);
		for (int i = 0; i < NLOAD; i++) {
			if (pf[i].revents & POLLOUT) {
				ssize_t n = send(l[i].c->fd, l[i].out.data + l[i].written,
						 l[i].out.len - l[i].written,
						 MSG_NOSIGNAL | MSG_DONTWAIT);

				if (n > 0)
					l[i].written += (size_t)n;
			}
			if (pf[i].revents & (POLLIN | POLLHUP | POLLERR))
				loader_read(&l[i], i);
		}
	}
	for (int i = 0; i < NLOAD; i++) {
		uint64_t replies = l[i].next_reply - 2;

		du_note("under load: client %d wrote %zu requests before SIGTERM, got %" PRIu64
			" replies", i, written_at_signal[i], replies);
		ck_assert_msg(l[i].done, "client %d: no SHUTTING_DOWN", i);
		ck_assert_msg(replies <= frames_written(&l[i]),
			      "client %d: more replies than requests", i);
		ck_assert_msg(replies > 0, "client %d: no reply at all: no load", i);
		du_conn_free(l[i].c);
		du_buf_free(&l[i].out);
		free(l[i].ends);
	}
	du_assert_exit(d, du_daemon_stop(d, 0, DU_WAIT_MS), 0);
	log = du_daemon_log(d);
	ck_assert_msg(strstr(log, "stopping") != NULL, "no 'stopping' in the log:\n%s", log);
	free(log);
	du_daemon_free(d);
}
END_TEST

#define NSTUCK 400

static bool fired_at_least(const Bitwheel__V1__StatsReply *s, uint64_t n)
{
	return s->oneshot->fired >= n;
}

/*
 * SIGTERM with a client that never reads and has ~400 KiB of fires
 * waiting for it: the daemon cannot flush to it, and must still stop, in
 * bounded time, with status 0 (bitwheeld(8): SIGTERM exits 0).
 */
START_TEST(test_sigterm_stuck_client)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *stuck;
	struct du_buf b = { 0 };
	uint8_t payload[1000];
	uint64_t t0;
	char *log;

	memset(payload, 's', sizeof(payload));
	du_daemon_start(d, NULL);
	stuck = du_open(d, "e2e-stuck");
	for (uint64_t k = 0; k < NSTUCK; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY, .when_ns = 20 * DU_MS,
				      .payload = payload, .payload_len = sizeof(payload) };

		du_pack_schedule(&b, k + 2, &s);
	}
	du_send_buf(stuck, &b);
	du_buf_free(&b);
	bwp_frame_free(wait_stats(d, fired_at_least, NSTUCK, "all fired"));

	t0 = du_now_ns();
	ck_assert(kill(d->pid, SIGTERM) == 0);
	du_assert_exit(d, du_daemon_stop(d, 0, DU_WAIT_MS), 0);
	du_note("stuck client: the daemon stopped %.0f ms after SIGTERM",
		(double)(du_now_ns() - t0) / 1e6);
	log = du_daemon_log(d);
	ck_assert_msg(strstr(log, "stopping") != NULL, "no 'stopping' in the log:\n%s", log);
	free(log);
	/* What did reach the client parses, and ends the connection. */
	for (;;) {
		du_env *e;
		int rc = du_recv(stuck, DU_WAIT_MS, &e);

		if (rc == DU_EOF)
			break;
		ck_assert_msg(rc == DU_FRAME, "stuck client: rc %d", rc);
		bwp_frame_free(e);
	}
	du_conn_free(stuck);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * startup
 * ====================================================================== */

/* Environment for a daemon run through du_run: nothing inherited that
 * would make it talk to a service manager. */
static const char *const quiet_env[] = { "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID",
					 "WATCHDOG_USEC", "BITWHEEL_SOCKET", NULL };

START_TEST(test_second_daemon)
{
	struct du_daemon *d = du_daemon_new();
	const char *argv[] = { DU_DAEMON_PATH, "--socket", d->sock, NULL };
	struct du_result r;
	struct stat st;
	char desc[1600];

	du_daemon_start(d, NULL);
	du_run(argv, quiet_env, DU_WAIT_MS, &r);
	du_result_describe(&r, desc, sizeof(desc));
	ck_assert_msg(!r.timed_out, "a second daemon on a live path kept running: %s", desc);
	ck_assert_msg(r.status == 1, "second daemon: %s (bitwheeld(8): exit 1)", desc);
	ck_assert_msg(strstr(r.err, d->sock) != NULL,
		      "the message does not name the path %s: %s", d->sock, desc);
	du_result_free(&r);
	/* The first one still has its socket, and serves. */
	ck_assert(stat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode));
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* A socket file nobody listens on (a crashed daemon's) is replaced. */
START_TEST(test_stale_socket)
{
	struct du_daemon *d = du_daemon_new();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert(fd >= 0);
	strcpy(sa.sun_path, d->sock);
	ck_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ck_assert(listen(fd, 1) == 0);
	close(fd);
	ck_assert(stat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode));
	du_daemon_start(d, NULL);
	du_assert_serving(d);
	/* And the same after a daemon killed outright. */
	du_daemon_kill(d);
	ck_assert(stat(d->sock, &st) == 0);
	du_daemon_start(d, NULL);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_not_a_socket)
{
	struct du_daemon *d = du_daemon_new();
	const char *argv[] = { DU_DAEMON_PATH, "--socket", d->sock, NULL };
	struct du_result r;
	char desc[1600], *text;
	FILE *f = fopen(d->sock, "w");

	ck_assert(f != NULL);
	fputs("keep me", f);
	fclose(f);
	du_run(argv, quiet_env, DU_WAIT_MS, &r);
	du_result_describe(&r, desc, sizeof(desc));
	ck_assert_msg(r.status == 1, "daemon on a regular file's path: %s", desc);
	ck_assert_msg(strstr(r.err, d->sock) != NULL, "message does not name the path: %s",
		      desc);
	du_result_free(&r);
	text = du_read_file(d->sock);
	ck_assert_msg(text != NULL && strcmp(text, "keep me") == 0,
		      "the daemon touched a file that is not a socket");
	free(text);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_help_version)
{
	static const char *const flags[] = { "--socket", "--socket-mode", "--preset",
					     "--max-clients", "--max-frame", "--max-payload",
					     "--max-timers", "--max-queued", "--linger",
					     "--max-output", "--verbose", "--help", "--version" };
	const char *help[] = { DU_DAEMON_PATH, "--help", NULL };
	const char *version[] = { DU_DAEMON_PATH, "--version", NULL };
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	struct du_conn *c;
	char desc[1600], want[64];
	du_env *e;

	du_run(help, quiet_env, DU_WAIT_MS, &r);
	du_result_describe(&r, desc, sizeof(desc));
	ck_assert_msg(r.status == 0, "--help: %s", desc);
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		ck_assert_msg(strstr(r.out, flags[i]) != NULL, "--help does not mention %s: %s",
			      flags[i], desc);
	du_result_free(&r);

	/* --version names the release the daemon reports in HelloReply. */
	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	ck_assert(hr_of(e)->daemon_version && hr_of(e)->daemon_version[0]);
	snprintf(want, sizeof(want), "%s", hr_of(e)->daemon_version);
	bwp_frame_free(e);
	du_conn_free(c);
	du_run(version, quiet_env, DU_WAIT_MS, &r);
	du_result_describe(&r, desc, sizeof(desc));
	ck_assert_msg(r.status == 0 && strstr(r.out, want) != NULL,
		      "--version (daemon_version %s): %s", want, desc);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

static const char *const bad_args[][5] = {
	{ "--no-such-flag", NULL },
	{ "--max-clients", "0", NULL },
	{ "--max-clients", "lots", NULL },
	{ "--max-frame", "100", NULL },
	{ "--max-frame", "1000", "--max-payload", "1000", NULL },
	{ "--max-output", "-5", NULL },
	{ "--linger", "5", NULL },
	{ "--preset", "no-such-preset", NULL },
	{ "--socket-mode", "999", NULL },
	{ "--oneshot-resolution", "0", NULL },
	{ "stray-argument", NULL },
	{ "--linger", NULL },
	{ "-x", NULL },
	{ "--verbose=1", NULL },
};

/* Usage errors: exit 2 with one line of message then coreutils' "Try
 * 'bitwheeld --help'." line, and no socket made. */
START_TEST(test_bad_flags)
{
	struct du_daemon *d = du_daemon_new();
	const char *argv[10] = { DU_DAEMON_PATH, "--socket", d->sock };
	struct du_result r;
	struct stat st;
	char desc[1600];
	size_t n = 3;

	for (size_t i = 0; bad_args[_i][i] != NULL; i++)
		argv[n++] = bad_args[_i][i];
	argv[n] = NULL;
	du_run(argv, quiet_env, 5000, &r);
	du_result_describe(&r, desc, sizeof(desc));
	ck_assert_msg(r.status == 2, "bitwheeld %s %s: %s", bad_args[_i][0],
		      bad_args[_i][1] ? bad_args[_i][1] : "", desc);
	ck_assert_msg(strncmp(r.err, "bitwheeld: ", 11) == 0 &&
		      strchr(r.err, '\n') != NULL &&
		      strcmp(strchr(r.err, '\n') + 1, "Try 'bitwheeld --help'.\n") == 0,
		      "not one line then Try: %s", desc);
	ck_assert_msg(stat(d->sock, &st) != 0, "a usage error left a socket");
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/*
 * Durations are read by the one parser bwctl and the client library use
 * too: "1.5s" and "1h30m" are accepted, and a bad one says which way it is
 * bad (no unit, too long for the clock, under the option's least).
 */
START_TEST(test_duration_flags)
{
	static const char *const bad[][3] = {
		{ "--linger", "5", "is not a duration" },
		{ "--linger", "99999999999999999h", "is too large" },
		{ "--linger", "213504d", "is too large" },
		{ "--hello-timeout", "0.5ms", "under the least allowed, 1ms" },
		{ "--output-timeout", "0.5ms", "under the least allowed, 1ms" },
		{ "--snapshot-interval", "1s2", "is not a duration" },
	};
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	struct du_conn *c;
	char desc[1600];
	du_env *e;

	du_daemon_start(d, "--linger", "1.5s", "--hello-timeout", "1m30s", "--snapshot-interval",
			"1d", NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	ck_assert_uint_eq(hr_of(e)->limits->session_linger_ns, 1500 * DU_MS);
	bwp_frame_free(e);
	du_conn_free(c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *argv[] = { DU_DAEMON_PATH, "--socket", d->sock, bad[i][0], bad[i][1],
				       NULL };

		du_run(argv, quiet_env, 5000, &r);
		du_result_describe(&r, desc, sizeof(desc));
		ck_assert_msg(r.status == 2 && strstr(r.err, bad[i][2]) != NULL &&
				      strstr(r.err, bad[i][0]) != NULL,
			      "bitwheeld %s %s: want exit 2 and \"%s\": %s", bad[i][0], bad[i][1],
			      bad[i][2], desc);
		du_result_free(&r);
	}
	du_daemon_free(d);
}
END_TEST

/*
 * The log's lines by where stderr goes (log.c): into a file (or a pipe)
 * "<5>bitwheeld: ready: ..."; to journald, which JOURNAL_STREAM naming
 * stderr's device and inode tells, "<5>ready: ..." (journald tags the
 * entry itself); to a terminal, a pty here, "bitwheeld: ready: ...".
 */
START_TEST(test_log_form)
{
	struct du_daemon *d = du_daemon_new();
	const char *argv[] = { DU_DAEMON_PATH, "--socket", d->sock, NULL };
	char js[64], tty[4096] = "", *log;
	size_t got = 0;
	struct stat st;
	int master, slave, fd;
	uint64_t until;
	pid_t pid;

	du_daemon_start(d, NULL);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	log = du_daemon_log(d);
	ck_assert_msg(strstr(log, "<5>bitwheeld: ready: ") != NULL, "into a file:\n%s", log);
	free(log);

	/* The same file, named by JOURNAL_STREAM as journald names its
	 * stream; the daemon inherits our environment. */
	fd = open(d->log, O_WRONLY | O_TRUNC);
	ck_assert(fd >= 0 && fstat(fd, &st) == 0);
	close(fd);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	ck_assert(setenv("JOURNAL_STREAM", js, 1) == 0);
	du_daemon_start(d, NULL);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	unsetenv("JOURNAL_STREAM");
	log = du_daemon_log(d);
	ck_assert_msg(strstr(log, "<5>ready: ") != NULL && strstr(log, "bitwheeld: ready") == NULL,
		      "to journald:\n%s", log);
	free(log);

	/* A terminal: read the pty until the ready line, then SIGTERM. */
	ck_assert(openpty(&master, &slave, NULL, NULL, NULL) == 0);
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		dup2(slave, 1);
		dup2(slave, 2);
		unsetenv("NOTIFY_SOCKET");
		unsetenv("JOURNAL_STREAM");
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(slave);
	until = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	while (strstr(tty, "ready: ") == NULL && got < sizeof(tty) - 1 && du_now_ns() < until) {
		struct pollfd p = { .fd = master, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = read(master, tty + got, sizeof(tty) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		tty[got] = '\0';
	}
	kill(pid, SIGTERM);
	ck_assert_int_eq(du_wait_child(pid, DU_WAIT_MS), 0);
	close(master);
	ck_assert_msg(strstr(tty, "bitwheeld: ready: ") != NULL && strchr(tty, '<') == NULL,
		      "on a terminal:\n%s", tty);
	du_daemon_free(d);
}
END_TEST

/* The socket's mode: 0660 by default, --socket-mode otherwise. */
START_TEST(test_socket_mode)
{
	struct du_daemon *d = du_daemon_new();
	struct stat st;

	du_daemon_start(d, NULL);
	ck_assert(stat(d->sock, &st) == 0);
	ck_assert_msg((st.st_mode & 0777) == 0660, "default socket mode %o, not 0660",
		      (unsigned)(st.st_mode & 0777));
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	du_daemon_start(d, "--socket-mode", "0600", NULL);
	ck_assert(stat(d->sock, &st) == 0);
	ck_assert_msg((st.st_mode & 0777) == 0600, "--socket-mode 0600 gave %o",
		      (unsigned)(st.st_mode & 0777));
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ---------------------------------------------------------------------- */

/*
 * SIGINT stops the daemon as SIGTERM does (a Ctrl-C in a terminal): a log
 * line, the socket file removed, exit status 0.
 */
START_TEST(test_sigint)
{
	struct du_daemon *d = du_daemon_new();
	struct stat st;
	char *log;

	du_daemon_start(d, NULL);
	du_assert_serving(d);
	du_assert_exit(d, du_daemon_stop(d, SIGINT, DU_WAIT_MS), 0);
	ck_assert_msg(stat(d->sock, &st) != 0 && errno == ENOENT,
		      "the socket is left after SIGINT");
	log = du_daemon_log(d);
	ck_assert_msg(strstr(log, "Interrupt: stopping") != NULL, "log:\n%s", log);
	free(log);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * faults
 * ====================================================================== */

#define FAULT_SESSION "e2e-fault"

/*
 * A client SIGKILLed in the middle of a frame, after a Hello (named
 * session) and one Schedule: _i 0 wrote 3 bytes of a 4-byte header, _i 1
 * a header and half the body of a second Schedule.  The daemon lives on,
 * and the session keeps its one timer (not the half-sent one).
 */
START_TEST(test_killed_mid_frame)
{
	struct du_daemon *d = du_daemon_new();
	struct pollfd p;
	struct du_conn *c;
	int fd, st;
	char ok;
	pid_t pid;
	du_env *e;

	du_daemon_start(d, NULL);
	pid = du_fork_pipe(&fd);
	if (pid == 0) {
		struct du_sched s = { .key = 7, .when = DU_DELAY, .when_ns = 3600 * DU_S };
		struct du_buf b = { 0 };
		struct du_conn *k;

		k = du_connect(d->sock);
		bwp_frame_free(du_hello(k, FAULT_SESSION));
		bwp_frame_free(du_schedule(k, 2, &s));
		s.key = 8;
		du_pack_schedule(&b, 3, &s);
		send_raw(k, b.data, _i == 0 ? 3 : 4 + (b.len - 4) / 2);
		if (write(fd, "k", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	p = (struct pollfd){ fd, POLLIN, 0 };
	ck_assert_msg(poll(&p, 1, DU_WAIT_MS) == 1 && read(fd, &ok, 1) == 1,
		      "the child never got to the middle of its frame");
	close(fd);
	kill(pid, SIGKILL);
	ck_assert(waitpid(pid, &st, 0) == pid);
	ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %#x", st);

	du_assert_serving(d);
	e = wait_stats(d, only_me, 0, "the killed client's connection gone");
	ck_assert_uint_eq(e->stats_reply->sessions, 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 1);
	bwp_frame_free(e);

	c = du_connect(d->sock);
	e = du_hello(c, FAULT_SESSION);
	ck_assert_msg(hr_of(e)->has_resumed && hr_of(e)->resumed, "reattach: resumed=false");
	ck_assert_uint_eq(hr_of(e)->timers, 1);
	bwp_frame_free(e);
	ck_assert_msg(!du_cancel(c, 2, 8), "the half-sent Schedule took effect");
	ck_assert_msg(du_cancel(c, 3, 7), "the session lost its timer");
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

#define NSILENT 50

static bool clients_at_least(const Bitwheel__V1__StatsReply *s, uint64_t n)
{
	return s->clients >= n;
}

/*
 * --hello-timeout 200ms: a connection that says nothing is told
 * HELLO_REQUIRED (without request_id) and closed once the time is up,
 * not before; one that said Hello is left alone.
 */
START_TEST(test_hello_timeout)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *silent, *talker;
	uint64_t t0;

	du_daemon_start(d, "--hello-timeout", "200ms", NULL);
	t0 = du_now_ns();
	silent = du_connect(d->sock);
	talker = du_open(d, NULL);
	du_expect_quiet(silent, 100);
	du_expect_error(silent, false, 0, EC(HELLO_REQUIRED));
	ck_assert_msg(du_now_ns() - t0 >= 190 * DU_MS,
		      "closed %.0f ms after connecting, timeout 200 ms",
		      (double)(du_now_ns() - t0) / 1e6);
	du_expect_eof(silent, DU_WAIT_MS);
	du_sleep_until(t0 + 400 * DU_MS);
	bwp_frame_free(du_stats(talker, 2));
	du_conn_free(silent);
	du_conn_free(talker);
	du_daemon_free(d);
}
END_TEST

/* NSILENT connections that never send a byte take nothing from others. */
START_TEST(test_silent_clients)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c[NSILENT];
	du_env *e;

	du_daemon_start(d, NULL);
	for (int i = 0; i < NSILENT; i++)
		c[i] = du_connect(d->sock);
	e = wait_stats(d, clients_at_least, NSILENT + 1, "the silent clients");
	du_note("silent clients: stats clients=%" PRIu64, e->stats_reply->clients);
	bwp_frame_free(e);
	du_assert_serving(d);
	for (int i = 0; i < NSILENT; i++)
		du_expect_quiet(c[i], 0);
	for (int i = 0; i < NSILENT; i++)
		du_conn_free(c[i]);
	bwp_frame_free(wait_stats(d, only_me, 0, "the silent clients gone"));
	du_daemon_free(d);
}
END_TEST

#define DRIBBLE_MS 20
#define DRIBBLE_RTT_MS 200

/*
 * A Hello and a Schedule sent one byte every DRIBBLE_MS: no reply before
 * the Hello's last byte, then both replies, correct; another client's
 * Stats, asked after every byte, comes back within DRIBBLE_RTT_MS.
 */
START_TEST(test_dribbling_client)
{
	struct du_daemon *d = du_daemon_new();
	static const char payload[] = "dribbled";
	struct du_sched s = { .key = 42, .when = DU_DELAY, .when_ns = 3600 * DU_S,
			      .payload = payload, .payload_len = sizeof(payload) - 1 };
	struct du_buf b = { 0 };
	struct du_conn *slow, *other;
	uint64_t worst = 0, t0;
	size_t hello_len;
	du_env *e;

	du_daemon_start(d, NULL);
	other = du_open(d, NULL);
	slow = du_connect(d->sock);
	du_pack_hello(&b, 1, "e2e-dribble");
	hello_len = b.len;
	du_pack_schedule(&b, 2, &s);
	t0 = du_now_ns();
	for (size_t i = 0; i < b.len; i++) {
		uint64_t t = du_now_ns(), rtt;

		send_raw(slow, b.data + i, 1);
		e = du_stats(other, (uint64_t)i + 2);
		rtt = du_now_ns() - t;
		bwp_frame_free(e);
		ck_assert_msg(rtt < DRIBBLE_RTT_MS * DU_MS,
			      "Stats took %.1f ms while byte %zu of %zu dribbled in",
			      (double)rtt / 1e6, i, b.len);
		if (rtt > worst)
			worst = rtt;
		if (i + 1 < hello_len)
			du_expect_quiet(slow, 0);
		du_sleep_until(t + DRIBBLE_MS * DU_MS);
	}
	du_note("dribbled %zu bytes in %.0f ms; worst Stats round trip %.1f ms", b.len,
		(double)(du_now_ns() - t0) / 1e6, (double)worst / 1e6);
	du_buf_free(&b);

	e = du_expect_reply(slow, 1, BC(HELLO_REPLY));
	ck_assert(hr_of(e)->has_resumed && !hr_of(e)->resumed);
	bwp_frame_free(e);
	e = du_expect_reply(slow, 2, BC(SCHEDULE_REPLY));
	ck_assert_ptr_nonnull(e->schedule_reply);
	ck_assert(e->schedule_reply->has_deadline_ns &&
		  e->schedule_reply->deadline_ns > t0 + 3500 * DU_S);
	bwp_frame_free(e);
	e = du_stats(slow, 3);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 1);
	bwp_frame_free(e);
	ck_assert(du_cancel(slow, 4, 42));
	du_conn_free(slow);
	du_conn_free(other);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

#define FD_LIMIT 32
#define FD_MAX_CONNS 64
#define FD_FREE 4

/* utime + stime of pid, in clock ticks. */
static uint64_t cpu_ticks(pid_t pid)
{
	char path[64], *s, *p;
	unsigned long long ut = 0, st = 0;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	s = du_read_file(path);
	ck_assert_msg(s != NULL, "%s: %s", path, strerror(errno));
	p = strrchr(s, ')');
	ck_assert_msg(p != NULL && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
					  &ut, &st) == 2, "%s: cannot parse", path);
	free(s);
	return ut + st;
}

/*
 * The daemon under RLIMIT_NOFILE FD_LIMIT (through prlimit(1)): connections
 * until one is not accepted; the log says accepting pauses, the daemon does
 * not spin meanwhile, and once FD_FREE connections close the waiting one is
 * served.
 */
START_TEST(test_out_of_fds)
{
	struct du_daemon *d;
	struct du_conn *c[FD_MAX_CONNS + 1];
	char lim[32];
	const char *argv[8];
	uint64_t deadline, t0, ticks, ns;
	double cpu;
	char *log = NULL;
	int n;
	du_env *e;

	if (!du_have_tool("prlimit")) {
		du_note("SKIP: test_out_of_fds needs prlimit(1) (util-linux)");
		return;
	}
	if (du_skip_if_wrapped("test_out_of_fds",
			       "valgrind keeps descriptors of its own under the limit "
			       "and closes accepted ones above it: the daemon never "
			       "sees EMFILE as the test sets it up"))
		return;
	d = du_daemon_new();
	snprintf(lim, sizeof(lim), "--nofile=%d:%d", FD_LIMIT, FD_LIMIT);
	argv[0] = "prlimit";
	argv[1] = lim;
	argv[2] = DU_DAEMON_PATH;
	argv[3] = "--socket";
	argv[4] = d->sock;
	argv[5] = NULL;
	du_daemon_spawn(d, argv);
	ck_assert_msg(du_daemon_wait_notify(d, "READY=1", DU_WAIT_MS),
		      "no READY=1 under prlimit %s", lim);

	for (n = 0; n <= FD_MAX_CONNS; n++) {
		int rc;

		c[n] = du_connect(d->sock);
		du_send_hello(c[n], 1, NULL);
		rc = du_recv(c[n], 500, &e);
		if (rc == DU_TIMEOUT)
			break;
		ck_assert_msg(rc == DU_FRAME && e->body_case == BC(HELLO_REPLY),
			      "connection %d: rc %d", n, rc);
		bwp_frame_free(e);
	}
	ck_assert_msg(n >= FD_FREE && n < FD_MAX_CONNS,
		      "%d connections accepted under RLIMIT_NOFILE %d", n, FD_LIMIT);
	du_note("out of fds after %d connections", n);

	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	for (;;) {
		log = du_daemon_log(d);
		if (strstr(log, "pausing new connections"))
			break;
		ck_assert_msg(du_now_ns() < deadline, "no 'pausing new connections' in the log:\n%s",
			      log);
		free(log);
		du_sleep_ms(20);
	}
	free(log);

	/* Still out of descriptors: the daemon waits, it does not spin. */
	t0 = du_now_ns();
	ticks = cpu_ticks(d->pid);
	du_sleep_ms(1000);
	ticks = cpu_ticks(d->pid) - ticks;
	ns = du_now_ns() - t0;
	cpu = (double)ticks / (double)sysconf(_SC_CLK_TCK) / ((double)ns / 1e9);
	du_note("daemon CPU while out of fds: %.1f%% of a core", cpu * 100);
	ck_assert_msg(cpu < 0.5, "the daemon used %.0f%% of a core while out of fds",
		      cpu * 100);
	ck_assert(!du_daemon_exited(d));

	/* Room again: the waiting connection is taken and answered. */
	for (int i = 0; i < FD_FREE; i++)
		du_conn_free(c[i]);
	e = du_expect_reply(c[n], 1, BC(HELLO_REPLY));
	bwp_frame_free(e);
	du_assert_serving(d);
	for (int i = FD_FREE; i <= n; i++)
		du_conn_free(c[i]);
	du_daemon_free(d);
}
END_TEST

/*
 * 10,000 connections at once: the daemon under --max-clients 10100 and a
 * RLIMIT_NOFILE raised by the test (inherited by the daemon).  Every
 * connection says Hello, then schedules one timer, the 10,000 deadlines
 * spread over one second; every fire comes back on its own connection,
 * with its own key, never early (as stamped and as received), and at most
 * the resolution plus three margins late as the daemon stamps it (10,000
 * connections on a shared 2-core machine are the overload PROTOCOL.md 6
 * allows more than a tick for; test_slow_consumer uses the same bound).
 * Frames are read with a small buffer per connection (du_recv's 64 KiB
 * one would be 640 MiB here).
 */
#define NBIG 10000
#define BIG_SPREAD_MS 1000
#define BIG_LEAD_MS 2000

struct big_conn {
	struct du_conn *c;
	uint8_t buf[512];
	size_t len;
	int stage;            /* replies and fires read: 0..3       */
	uint64_t rx_ns;
};

/* One frame of b's, reading only what has arrived: DU_FRAME, DU_TIMEOUT
 * (nothing complete yet), DU_EOF or DU_BAD. */
static int big_next(struct big_conn *b, du_env **out)
{
	for (;;) {
		size_t flen = 0;
		int err = bwp_frame_parse(b->buf, b->len, BWP_DEFAULT_MAX_FRAME, out, &flen);
		ssize_t n;

		if (err == BWP_OK) {
			memmove(b->buf, b->buf + flen, b->len - flen);
			b->len -= flen;
			return DU_FRAME;
		}
		if (err != BWP_EMORE || flen > sizeof(b->buf))
			return DU_BAD;
		n = recv(b->c->fd, b->buf + b->len, sizeof(b->buf) - b->len, MSG_DONTWAIT);
		if (n > 0) {
			b->len += (size_t)n;
			b->rx_ns = du_now_ns();
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return DU_EOF;
		return DU_TIMEOUT;
	}
}

/* "p50 0.412 p99 1.300 max 2.100 ms" of n values, sorted in place. */
static const char *percentiles(uint64_t *v, size_t n, char *buf, size_t len)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	snprintf(buf, len, "p50 %.3f p99 %.3f max %.3f ms", (double)v[n / 2] / 1e6,
		 (double)v[n - 1 - n / 100] / 1e6, (double)v[n - 1] / 1e6);
	return buf;
}

/* Poll every connection still short of stage `until` and hand its frames
 * to step() until all are there or the deadline passes. */
static void big_pump(struct big_conn *b, struct pollfd *pf, int until,
		     uint64_t deadline, const char *what,
		     void (*step)(struct big_conn *b, int i, du_env *e, void *arg),
		     void *arg)
{
	for (;;) {
		int left = 0, n;

		for (int i = 0; i < NBIG; i++) {
			pf[i] = (struct pollfd){ b[i].stage < until ? b[i].c->fd : -1,
						 POLLIN, 0 };
			left += b[i].stage < until;
		}
		if (left == 0)
			return;
		ck_assert_msg(du_now_ns() < deadline, "%s: %d of %d connections not done",
			      what, left, NBIG);
		n = poll(pf, NBIG, 200);
		ck_assert_msg(n >= 0 || errno == EINTR, "poll: %s", strerror(errno));
		for (int i = 0; i < NBIG && n > 0; i++) {
			du_env *e;
			int rc = DU_TIMEOUT;

			if (pf[i].revents == 0)
				continue;
			while (b[i].stage < until && (rc = big_next(&b[i], &e)) == DU_FRAME) {
				step(b, i, e, arg);
				bwp_frame_free(e);
			}
			ck_assert_msg(b[i].stage >= until || rc == DU_TIMEOUT,
				      "%s: connection %d %s at stage %d", what, i,
				      rc == DU_EOF ? "closed by the daemon" : "got a bad frame",
				      b[i].stage);
		}
	}
}

/* Under ASan a daemon serving 10,000 connections ran its wheel 150-760 ms
 * late on a 2-core machine (even with margins scaled by 4): the sanitizer
 * build checks this test's memory safety and order, never early, every
 * fire; its lateness is the plain build's to check. */
#ifdef __SANITIZE_ADDRESS__
#define BIG_LATE_CHECKED 0
#else
#define BIG_LATE_CHECKED 1
#endif

struct big_run {
	uint64_t res, t0;
	uint64_t *late_fired, *late_rx;
	size_t nfired;
};

static void big_step(struct big_conn *b, int i, du_env *e, void *arg)
{
	struct big_run *r = arg;
	char desc[256];

	du_describe(e, desc, sizeof(desc));
	switch (b[i].stage) {
	case 0:
		ck_assert_msg(e->body_case == BC(HELLO_REPLY), "connection %d: %s", i, desc);
		r->res = hr_of(e)->oneshot_resolution_ns;
		break;
	case 1:
		ck_assert_msg(e->body_case == BC(SCHEDULE_REPLY) && e->request_id == 2,
			      "connection %d: %s", i, desc);
		break;
	default: {
		const Bitwheel__V1__Fired *f = e->fired;
		uint64_t want = r->t0 + (uint64_t)(i % BIG_SPREAD_MS) * DU_MS;

		ck_assert_msg(e->body_case == BC(FIRED) && f->key == (uint64_t)i,
			      "connection %d: %s", i, desc);
		ck_assert_uint_eq(f->deadline_ns, want);
		ck_assert_msg(f->fired_at_ns >= f->deadline_ns && b[i].rx_ns >= f->deadline_ns,
			      "connection %d's fire early: fired_at %" PRIu64 " rx %" PRIu64
			      " deadline %" PRIu64, i, f->fired_at_ns, b[i].rx_ns,
			      f->deadline_ns);
		ck_assert_msg(!BIG_LATE_CHECKED ||
			      f->fired_at_ns - f->deadline_ns <= r->res + 3 * du_margin_ns(),
			      "connection %d's fire %.3f ms late", i,
			      (double)(f->fired_at_ns - f->deadline_ns) / 1e6);
		r->late_fired[r->nfired] = f->fired_at_ns - f->deadline_ns;
		r->late_rx[r->nfired] = b[i].rx_ns - f->deadline_ns;
		r->nfired++;
	}
	}
	b[i].stage++;
}

START_TEST(test_ten_thousand_clients)
{
	struct du_daemon *d;
	struct big_conn *b;
	struct pollfd *pf;
	struct big_run r = { 0 };
	struct du_buf hello = { 0 }, sb = { 0 };
	unsigned long lim;
	uint64_t t, t_conn, t_hello, t_sched;
	char p1[96], p2[96];
	du_env *e;

	if (du_skip_if_wrapped("test_ten_thousand_clients",
			       "10,000 connections would take the valgrind run past its "
			       "time budget; test_many_clients (1,000) runs under it"))
		return;
	lim = du_raise_nofile(NBIG + 1000);
	if (lim < NBIG + 200) {
		du_note("SKIP: test_ten_thousand_clients: RLIMIT_NOFILE's hard limit allows "
			"%lu descriptors, %d are needed (raise it: ulimit -Hn %d)",
			lim, NBIG + 200, NBIG + 1000);
		return;
	}
	b = calloc(NBIG, sizeof(*b));
	pf = calloc(NBIG, sizeof(*pf));
	r.late_fired = calloc(NBIG, sizeof(uint64_t));
	r.late_rx = calloc(NBIG, sizeof(uint64_t));
	ck_assert(b && pf && r.late_fired && r.late_rx);
	d = du_daemon_new();
	/* The daemon inherits the raised limit: 10,000 connections and its
	 * own few descriptors fit. */
	du_daemon_start(d, "--max-clients", "10100", "--max-clients-per-uid", "10100", NULL);

	t = du_now_ns();
	du_pack_hello(&hello, 1, NULL);
	for (int i = 0; i < NBIG; i++) {
		b[i].c = du_connect(d->sock);
		send_raw(b[i].c, hello.data, hello.len);
	}
	t_conn = du_now_ns() - t;
	big_pump(b, pf, 1, du_now_ns() + 3 * (uint64_t)DU_WAIT_MS * DU_MS,
		 "HelloReply", big_step, &r);
	t_hello = du_now_ns() - t;

	/* Deadlines fixed after everyone is in, BIG_LEAD_MS ahead: sending
	 * 10,000 Schedules takes a fraction of that. */
	t = du_now_ns();
	r.t0 = t + BIG_LEAD_MS * DU_MS;
	for (int i = 0; i < NBIG; i++) {
		struct du_sched s = { .key = (uint64_t)i, .when = DU_DEADLINE,
				      .when_ns = r.t0 + (uint64_t)(i % BIG_SPREAD_MS) * DU_MS };

		du_pack_schedule(&sb, 2, &s);
		send_raw(b[i].c, sb.data, sb.len);
		sb.len = 0;
	}
	t_sched = du_now_ns() - t;
	big_pump(b, pf, 3, r.t0 + 3 * (uint64_t)DU_WAIT_MS * DU_MS,
		 "fires", big_step, &r);
	ck_assert_uint_eq(r.nfired, NBIG);
	du_note("10,000 clients: connected and sent Hello in %.0f ms, all HelloReplies "
		"by %.0f ms; 10,000 Schedules sent in %.0f ms, %.0f ms before the first "
		"deadline", (double)t_conn / 1e6, (double)t_hello / 1e6,
		(double)t_sched / 1e6, (double)((int64_t)(r.t0 - t - t_sched)) / 1e6);
	du_note("10,000 clients: fire lateness as stamped by the daemon %s; as received %s",
		percentiles(r.late_fired, NBIG, p1, sizeof(p1)),
		percentiles(r.late_rx, NBIG, p2, sizeof(p2)));

	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->clients, NBIG + 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->fired, NBIG);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 0);
	bwp_frame_free(e);
	for (int i = 0; i < NBIG; i++)
		du_conn_free(b[i].c);
	bwp_frame_free(wait_stats(d, only_me, 0, "the 10,000 clients gone"));
	du_buf_free(&hello);
	du_buf_free(&sb);
	free(b);
	free(pf);
	free(r.late_fired);
	free(r.late_rx);
	du_daemon_free(d);
}
END_TEST

/*
 * A client that never reads while 100,000 of its fires come due within one
 * second, each with a 100-byte payload: ~12 MiB of frames if the daemon
 * buffered them.  Loop: _i 0 an anonymous session and 100,000 oneshot
 * timers, 1 the same in a named session, 2 a named session with 1,000
 * periodic timers of 10 ms (--periodic-resolution 1).  The client is not
 * cut off (PROTOCOL.md 8, "Slow readers"): its output stops at the bound
 * and its fires wait in the session's queue; the daemon's resident memory
 * grows by less than max_output plus UNREAD_SLACK_KB (a oneshot fire takes
 * the memory its timer gave back); another client's oneshot fires due in
 * the same second arrive within the resolution plus the margin; every fire
 * is accounted for at any instant (fired = acked + queued + in flight +
 * dropped), periodic fires stop queueing at max_queued (dropped and
 * counted), oneshot fires are never dropped, and when the client reads at
 * last it gets every oneshot fire, once.  100,000 fires
 * in a second, with make -j2 running another suite beside this one, is the
 * overload of test_slow_consumer: the probe's bound is its resolution plus
 * three margins (measured alone: at most 12 ms late).
 *
 * A oneshot timer's memory is freed as it fires and its fire takes about
 * as much, so there RSS barely moves (the counts are what tell); periodic
 * timers keep theirs, so _i 2 is where a daemon that buffered or queued
 * without bound would grow by ~12 MiB.
 * The slack is what the output bound does not cover and is still bounded:
 * the named session's queue (4096 fires, ~1 MiB here), libevent's buffer
 * chains, the allocator's rounding and free lists.
 */
#define NUNREAD 100000
#define UNREAD_PAYLOAD 100
#define UNREAD_WINDOW_MS 1000
#define UNREAD_MAX_OUTPUT 1048576
#define UNREAD_MAX_QUEUED 4096
#define UNREAD_SLACK_KB 4096
#define UNREAD_LEAD_MS 4000
#define UNREAD_PERIODIC 1000
#define UNREAD_PERIOD_MS 10
#define NUPROBE 50

static void unread_payload(uint64_t key, uint8_t *p)
{
	for (size_t j = 0; j < UNREAD_PAYLOAD; j++)
		p[j] = (uint8_t)(key * 131 + j);
}

/* Every oneshot timer fired, and made into its fire: a fired timer waits
 * in its session's due list, counted in uid_timers, until the pump makes
 * its fire (a chunk a turn), so the counts add up only then.  The test's
 * clients are all root's. */
static bool oneshot_idle(const Bitwheel__V1__StatsReply *s, uint64_t arg)
{
	(void)arg;
	return s->oneshot->pending == 0 && s->uid_timers == s->queued + s->in_flight;
}

static bool periodic_fired(const Bitwheel__V1__StatsReply *s, uint64_t n)
{
	return s->periodic->fired >= n;
}

/* Reset VmHWM to VmRSS (Linux 4.0+); false when not allowed. */
static bool reset_hwm(pid_t pid)
{
	char path[64];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%ld/clear_refs", (long)pid);
	f = fopen(path, "w");
	if (f == NULL)
		return false;
	ok = fputs("5", f) >= 0;
	return fclose(f) == 0 && ok;
}

START_TEST(test_unread_fires)
{
	const bool periodic = _i == 2, named = _i >= 1;
	const char *kind = periodic ? "named, periodic" : named ? "named" : "anonymous";
	const uint64_t ntimers = periodic ? UNREAD_PERIODIC : NUNREAD;
	struct du_daemon *d;
	struct du_conn *slow, *probe;
	struct du_buf b = { 0 };
	uint8_t p[UNREAD_PAYLOAD];
	uint8_t *seen = calloc(NUNREAD, 1);
	uint64_t t, res, late[NUPROBE], rss0, rss_max, hwm, growth, bound, frame;
	uint64_t received = 0, queued = 0, dropped = 0, fired = NUNREAD, t_sched;
	bool hwm_ok;
	char pct[96];
	du_env *e;

	ck_assert_ptr_nonnull(seen);
	if (du_skip_if_wrapped("test_unread_fires",
			       "the RSS measured would be valgrind's, and its timing "
			       "assumes a native daemon; test_slow_consumer runs the "
			       "same cut-off under valgrind")) {
		free(seen);
		return;
	}
	d = du_daemon_new();
	du_daemon_start(d, "--max-timers", "200000", "--max-output", "1048576",
			"--max-queued", "4096", "--periodic-resolution", "1",
			"--max-periodic-rate-per-uid", "1000000", NULL);
	slow = du_connect(d->sock);
	e = du_hello(slow, named ? "e2e-unread" : NULL);
	res = hr_of(e)->oneshot_resolution_ns;
	ck_assert_uint_eq(hr_of(e)->limits->max_output_bytes, UNREAD_MAX_OUTPUT);
	bwp_frame_free(e);
	probe = du_open(d, NULL);

	/* What one of the fires weighs on the wire: the test means nothing
	 * unless buffering them all would break the bound. */
	{
		du_env env = BITWHEEL__V1__ENVELOPE__INIT;
		Bitwheel__V1__Fired f = BITWHEEL__V1__FIRED__INIT;

		f.has_key = f.has_deadline_ns = f.has_fired_at_ns = f.has_fire_count = 1;
		f.has_payload = 1;
		f.key = NUNREAD - 1;
		f.deadline_ns = f.fired_at_ns = du_now_ns() + 3600 * DU_S;
		f.fire_count = 1;
		f.payload.data = p;
		f.payload.len = UNREAD_PAYLOAD;
		env.body_case = BC(FIRED);
		env.fired = &f;
		frame = bwp_frame_packed_size(&env);
	}
	bound = UNREAD_MAX_OUTPUT / 1024 + UNREAD_SLACK_KB;
	ck_assert_msg(frame * NUNREAD / 1024 > 2 * bound,
		      "%d fires of %" PRIu64 " bytes do not exceed twice the bound %" PRIu64
		      " KiB: the test could not fail", NUNREAD, frame, bound);

	t = du_now_ns() + UNREAD_LEAD_MS * DU_MS;
	for (int i = 0; i < NUPROBE; i++) {
		struct du_sched s = { .key = (uint64_t)i, .when = DU_DEADLINE,
				      .when_ns = t + (uint64_t)i * UNREAD_WINDOW_MS * DU_MS / NUPROBE };

		du_pack_schedule(&b, (uint64_t)i + 2, &s);
	}
	du_send_buf(probe, &b);
	for (int i = 0; i < NUPROBE; i++)
		bwp_frame_free(du_expect_reply(probe, (uint64_t)i + 2, BC(SCHEDULE_REPLY)));

	/* The replies are read while scheduling, in batches; the fires, never. */
	t_sched = du_now_ns();
	for (uint64_t k = 0; k < ntimers; k += 1000) {
		for (uint64_t j = k; j < k + 1000; j++) {
			struct du_sched s = { .key = j, .when = DU_DEADLINE,
					      .when_ns = t + j * UNREAD_WINDOW_MS * DU_MS / NUNREAD,
					      .payload = p, .payload_len = UNREAD_PAYLOAD };

			if (periodic) {
				s.when_ns = t + (j % UNREAD_PERIOD_MS) * DU_MS;
				s.periodic = true;
				s.period_ns = UNREAD_PERIOD_MS * DU_MS;
			}
			unread_payload(j, p);
			du_pack_schedule(&b, j + 2, &s);
		}
		du_send_buf(slow, &b);
		for (uint64_t j = k; j < k + 1000; j++)
			bwp_frame_free(du_expect_reply(slow, j + 2, BC(SCHEDULE_REPLY)));
	}
	du_buf_free(&b);
	t_sched = du_now_ns() - t_sched;
	ck_assert_msg(du_now_ns() + 100 * DU_MS < t,
		      "scheduling %d timers took %.0f ms, past the %d ms lead: too slow a "
		      "machine for this test", NUNREAD, (double)t_sched / 1e6, UNREAD_LEAD_MS);
	ck_assert_uint_eq(du_kept_fires(slow), 0);

	/* Baseline: the daemon holding 100,000 timers and their payloads. */
	rss0 = rss_max = du_proc_status_kb(d->pid, "VmRSS");
	hwm_ok = reset_hwm(d->pid);

	for (int n = 0; n < NUPROBE; n++) {
		uint64_t rx, rss;

		e = du_expect_fire(probe, du_scale_ms(UNREAD_LEAD_MS + 2 * UNREAD_WINDOW_MS), &rx);
		ck_assert(e->fired->key < NUPROBE);
		late[n] = du_check_fire_time(e->fired, rx, res + 2 * du_margin_ns());
		bwp_frame_free(e);
		rss = du_proc_status_kb(d->pid, "VmRSS");
		rss_max = rss > rss_max ? rss : rss_max;
	}
	du_note("unread fires (%s): probe lateness over %d fires %s (bound %.3f ms)",
		kind, NUPROBE, percentiles(late, NUPROBE, pct, sizeof(pct)),
		(double)(res + 3 * du_margin_ns()) / 1e6);

	du_conn_free(probe);

	/* Every fire has come due (and been made); the periodic timers go
	 * on, and the counts hold at any instant. */
	if (periodic)
		e = wait_stats(d, periodic_fired, NUNREAD, "100,000 periodic fires");
	else
		e = wait_stats(d, oneshot_idle, 0, "no oneshot timer pending");
	ck_assert_uint_eq(e->stats_reply->sessions, named ? 1 : 0);
	queued = e->stats_reply->queued + e->stats_reply->in_flight;
	dropped = e->stats_reply->dropped;
	fired = e->stats_reply->oneshot->fired + e->stats_reply->periodic->fired;
	ck_assert_msg(e->stats_reply->acked + queued + dropped == fired,
		      "%" PRIu64 " fires: %" PRIu64 " done + %" PRIu64 " queued or in flight + %"
		      PRIu64 " dropped; %" PRId64 " unaccounted for", fired,
		      e->stats_reply->acked, queued, dropped,
		      (int64_t)(fired - (e->stats_reply->acked + queued + dropped)));
	if (periodic)
		ck_assert_msg(queued <= UNREAD_MAX_QUEUED && dropped > 0,
			      "periodic: %" PRIu64 " undelivered (max_queued %d), %" PRIu64 " dropped",
			      queued, UNREAD_MAX_QUEUED, dropped);
	else
		ck_assert_msg(dropped == 0 && queued > 0,
			      "oneshot: %" PRIu64 " dropped (never, for oneshot fires), %" PRIu64
			      " waiting", dropped, queued);
	received = fired - e->stats_reply->acked;
	bwp_frame_free(e);

	hwm = du_proc_status_kb(d->pid, "VmHWM");
	{
		uint64_t rss = du_proc_status_kb(d->pid, "VmRSS");

		rss_max = rss > rss_max ? rss : rss_max;
	}
	/* Without a reset, VmHWM includes the scheduling's peak: use samples. */
	growth = (hwm_ok ? (hwm > rss_max ? hwm : rss_max) : rss_max) - rss0;
	du_note("unread fires (%s): %" PRIu64 " timers scheduled in %.0f ms; daemon RSS %" PRIu64
		" KiB before, peak %" PRIu64 " KiB (%s), growth %" PRIu64 " KiB, bound %"
		PRIu64 " KiB (max_output %d KiB + slack %d KiB); unbuffered the fires "
		"would be %" PRIu64 " KiB", kind, ntimers, (double)t_sched / 1e6, rss0,
		rss0 + growth, hwm_ok ? "VmHWM after a reset" : "sampled VmRSS", growth,
		bound, UNREAD_MAX_OUTPUT / 1024, UNREAD_SLACK_KB, frame * NUNREAD / 1024);
	du_note("unread fires (%s): of %" PRIu64 " fires, %" PRIu64 " waited in the queue "
		"or in flight, %" PRIu64 " dropped, the rest in the socket", kind, fired,
		received, dropped);
#ifdef __SANITIZE_ADDRESS__
	/* ASan holds freed memory in quarantine (256 MiB by default), so every
	 * fire dropped adds to RSS: the bound is a plain build's. */
	du_note("unread fires (%s): RSS bound not asserted under AddressSanitizer", kind);
#else
	ck_assert_msg(growth <= bound, "the daemon's RSS grew by %" PRIu64 " KiB while a "
		      "client did not read, bound %" PRIu64 " KiB", growth, bound);
#endif

	/* The client reads at last: every oneshot fire, once. */
	for (received = 0; !periodic && received < NUNREAD; received++) {
		int rc = du_recv(slow, DU_WAIT_MS, &e);
		char desc[256];

		ck_assert_msg(rc == DU_FRAME, "the client that did not read got %" PRIu64
			      " of %d fires, then rc %d", received, NUNREAD, rc);
		ck_assert_msg(e->body_case == BC(FIRED), "the unread client got %s",
			      du_describe(e, desc, sizeof(desc)));
		ck_assert(e->fired->key < NUNREAD && !seen[e->fired->key]);
		ck_assert_uint_eq(e->fired->payload.len, UNREAD_PAYLOAD);
		seen[e->fired->key] = 1;
		bwp_frame_free(e);
	}
	du_conn_free(slow);
	du_assert_serving(d);
	free(seen);
	du_daemon_free(d);
}
END_TEST

/*
 * SIGKILL, then a restart on the same path without --state-dir: a client
 * with an anonymous connection (one timer) and a named session (two) sees
 * both connections end (EOF or ECONNRESET, no frame), cannot connect while
 * the daemon is down, and after the restart says Hello to the same name:
 * resumed=false, timers=0.  Nothing pending survives, and a timer due
 * after the crash never fires.  (check_client test_reconnect_restart runs
 * the same through the library's bwc_reconnect().)
 */
START_TEST(test_sigkill_restart)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = 3600 * DU_S };
	struct du_conn *anon, *named, *c;
	uint64_t due, res;
	int rc;
	du_env *e;

	du_daemon_start(d, NULL);
	anon = du_open(d, NULL);
	bwp_frame_free(du_schedule(anon, 2, &s));
	named = du_connect(d->sock);
	e = du_hello(named, "e2e-crash");
	res = hr_of(e)->oneshot_resolution_ns;
	bwp_frame_free(e);
	bwp_frame_free(du_schedule(named, 2, &s));
	s.key = 2;
	s.when_ns = (uint64_t)du_scale_ms(1000) * DU_MS;
	e = du_schedule(named, 3, &s);
	due = e->schedule_reply->deadline_ns;
	bwp_frame_free(e);
	e = du_stats(named, 4);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 3);
	bwp_frame_free(e);

	du_daemon_kill(d);
	ck_assert_msg(WIFSIGNALED(d->status) && WTERMSIG(d->status) == SIGKILL,
		      "daemon status %#x", d->status);
	du_expect_eof(anon, DU_WAIT_MS);
	du_expect_eof(named, DU_WAIT_MS);
	du_note("SIGKILL: the anonymous connection saw %s, the named one %s",
		anon->reset ? "ECONNRESET" : "EOF", named->reset ? "ECONNRESET" : "EOF");
	rc = du_conn_send_bytes(named, "x", 1, DU_WAIT_MS);
	ck_assert_msg(rc == -EPIPE || rc == -ECONNRESET, "writing to the dead daemon: %s",
		      rc ? strerror(-rc) : "success");
	du_conn_free(anon);
	du_conn_free(named);
	rc = du_try_connect(d->sock, &c);
	ck_assert_msg(rc == -ECONNREFUSED || rc == -ENOENT,
		      "connect while the daemon is down: %s", rc ? strerror(-rc) : "success");
	du_conn_free(c);

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	e = du_hello(c, "e2e-crash");
	ck_assert_msg(hr_of(e)->has_resumed && !hr_of(e)->resumed,
		      "a daemon restarted without --state-dir resumed the session");
	ck_assert_uint_eq(hr_of(e)->timers, 0);
	ck_assert_uint_eq(hr_of(e)->queued, 0);
	bwp_frame_free(e);
	ck_assert_msg(!du_cancel(c, 2, 1), "key 1 survived the SIGKILL");
	e = du_stats(c, 3);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 0);
	ck_assert_uint_eq(e->stats_reply->sessions, 1);
	bwp_frame_free(e);
	/* Key 2's deadline passes with nothing fired. */
	du_expect_quiet(c, (int)((due + res + du_margin_ns() - du_now_ns()) / DU_MS) + 1);
	du_note("SIGKILL and restart without --state-dir: 3 pending timers (1 anonymous, "
		"2 in session e2e-crash) lost; the session came back new (resumed=false, "
		"timers=0), key 2 never fired");
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/*
 * A Schedule's header and half its body, then shutdown(SHUT_WR): the
 * daemon closes the connection (no frame, no hang on the half frame),
 * the session keeps its timer from before and not the half-sent one.
 */
START_TEST(test_truncated_then_eof)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .key = 7, .when = DU_DELAY, .when_ns = 3600 * DU_S };
	struct du_buf b = { 0 };
	struct du_conn *c;
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_open(d, "e2e-halfclose");
	bwp_frame_free(du_schedule(c, 2, &s));
	s.key = 8;
	du_pack_schedule(&b, 3, &s);
	send_raw(c, b.data, 4 + (b.len - 4) / 2);
	du_buf_free(&b);
	ck_assert(shutdown(c->fd, SHUT_WR) == 0);
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	e = wait_stats(d, only_me, 0, "the half-closed connection gone");
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 1);
	bwp_frame_free(e);
	c = du_connect(d->sock);
	e = du_hello(c, "e2e-halfclose");
	ck_assert(hr_of(e)->resumed);
	ck_assert_uint_eq(hr_of(e)->timers, 1);
	bwp_frame_free(e);
	ck_assert_msg(!du_cancel(c, 2, 8), "the half-sent Schedule took effect");
	ck_assert(du_cancel(c, 3, 7));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * paths
 * ====================================================================== */

/* Start a daemon on --socket sock that must refuse: exit 1 within the
 * wait (a hang fails here).  Its log, which the caller frees. */
static char *socket_refused(struct du_daemon *d, const char *sock,
			    const char *mode)
{
	const char *argv[] = { DU_DAEMON_PATH, "--socket", sock, "--socket-mode",
			       mode ? mode : "0660", NULL };
	char *log;

	du_daemon_spawn(d, argv);
	ck_assert_msg(du_daemon_wait_exit(d, DU_WAIT_MS),
		      "the daemon did not exit within %d ms on %s", DU_WAIT_MS, sock);
	log = du_daemon_log(d);
	ck_assert_msg(WIFEXITED(d->status) && WEXITSTATUS(d->status) == 1,
		      "status 0x%x, not exit 1; log: %s", (unsigned)d->status, log);
	return log;
}

static void expect_socket_refused(struct du_daemon *d, const char *sock,
				  const char *want)
{
	char *log = socket_refused(d, sock, NULL);

	ck_assert_msg(strstr(log, want) != NULL, "no \"%s\" in the log: %s", want, log);
	free(log);
}

/* A directory others may write (not sticky) is refused; sticky serves. */
START_TEST(test_socket_dir_writable)
{
	struct du_daemon *d = du_daemon_new();
	char dir[160], sock[200], want[300];
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/pub", d->dir);
	snprintf(sock, sizeof(sock), "%s/sock", dir);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	snprintf(want, sizeof(want), "%s: writable by others (mode 0777)", dir);
	expect_socket_refused(d, sock, want);
	ck_assert_int_eq(chmod(dir, 0775), 0);
	snprintf(want, sizeof(want), "%s: writable by its group (mode 0775)", dir);
	expect_socket_refused(d, sock, want);
	ck_assert_msg(lstat(sock, &st) != 0, "a refused daemon made %s", sock);
	/* Sticky, as /tmp: nobody else may rename or remove our socket. */
	ck_assert_int_eq(chmod(dir, 01777), 0);
	{
		const char *extra[] = { "--socket", sock, NULL };
		struct du_conn *c;
		du_env *e;

		du_daemon_startv(d, extra);
		c = du_connect(sock);
		e = du_hello(c, NULL);
		bwp_frame_free(e);
		du_conn_free(c);
	}
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	du_daemon_free(d);
}
END_TEST

/* A directory of another uid is refused, naming it. */
START_TEST(test_socket_dir_other_owner)
{
	struct du_daemon *d;
	char dir[160], sock[200], want[300];

	if (geteuid() != 0) {
		du_note("SKIP: test_socket_dir_other_owner needs root (to chown to uid %d)",
			NOBODY);
		return;
	}
	d = du_daemon_new();
	snprintf(dir, sizeof(dir), "%s/theirs", d->dir);
	snprintf(sock, sizeof(sock), "%s/sock", dir);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	ck_assert_int_eq(chown(dir, NOBODY, NOBODY), 0);
	snprintf(want, sizeof(want), "%s: owned by uid %d, not by the daemon's uid %u or root",
		 dir, NOBODY, (unsigned)geteuid());
	expect_socket_refused(d, sock, want);
	du_daemon_free(d);
}
END_TEST

/* Something of the test's own listens at the path: the daemon refuses at
 * once, even when that listener's backlog is full (a blocking probe would
 * hang there), and leaves the socket alone. */
START_TEST(test_live_listener)
{
	struct du_daemon *d = du_daemon_new();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int l = socket(AF_UNIX, SOCK_STREAM, 0), c[4];
	char want[200];
	struct stat st;

	ck_assert(l >= 0);
	strcpy(sa.sun_path, d->sock);
	ck_assert(bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ck_assert(listen(l, 8) == 0);
	snprintf(want, sizeof(want), "another bitwheeld (or something else) listens on %s",
		 d->sock);
	expect_socket_refused(d, d->sock, want);
	ck_assert(lstat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode));
	/* Full: listen(0) takes one connection, the next gets EAGAIN. */
	ck_assert(listen(l, 0) == 0);
	for (int i = 0; i < 4; i++) {
		c[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ck_assert(c[i] >= 0);
		(void)connect(c[i], (struct sockaddr *)&sa, sizeof(sa));
	}
	expect_socket_refused(d, d->sock, want);
	ck_assert(lstat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode));
	for (int i = 0; i < 4; i++)
		close(c[i]);
	close(l);
	du_daemon_free(d);
}
END_TEST

/* A stale socket (nobody listens) of another uid is not ours to remove. */
START_TEST(test_stale_socket_other_owner)
{
	struct du_daemon *d;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char want[300];
	struct stat st;
	int fd;

	if (geteuid() != 0) {
		du_note("SKIP: test_stale_socket_other_owner needs root (to chown to uid %d)",
			NOBODY);
		return;
	}
	d = du_daemon_new();
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert(fd >= 0);
	strcpy(sa.sun_path, d->sock);
	ck_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	ck_assert_int_eq(lchown(d->sock, NOBODY, NOBODY), 0);
	snprintf(want, sizeof(want), "%s: a stale socket of uid %d", d->sock, NOBODY);
	expect_socket_refused(d, d->sock, want);
	ck_assert(lstat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == NOBODY);
	du_daemon_free(d);
}
END_TEST

/* A symbolic link at the path (to a file of ours, and dangling): refused;
 * nothing is chmodded or created through it.  Then the socket gets exactly
 * --socket-mode, whatever the umask the daemon started with. */
START_TEST(test_socket_symlink_trap)
{
	static const struct { mode_t umask; const char *mode; unsigned want; } cases[] = {
		{ 0, "0640", 0640 }, { 0077, "0666", 0666 }, { 0022, "0600", 0600 },
	};
	struct du_daemon *d = du_daemon_new();
	char target[160], dangling[160], *log;
	struct stat st;
	int fd;

	snprintf(target, sizeof(target), "%s/target", d->dir);
	snprintf(dangling, sizeof(dangling), "%s/nothing", d->dir);
	fd = open(target, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert(fd >= 0);
	close(fd);
	ck_assert_int_eq(chmod(target, 0600), 0);
	ck_assert_int_eq(symlink(target, d->sock), 0);
	log = socket_refused(d, d->sock, "0666");
	ck_assert_msg(strstr(log, "is not a socket (a symbolic link)"), "log: %s", log);
	free(log);
	ck_assert(stat(target, &st) == 0 && S_ISREG(st.st_mode));
	ck_assert_msg((st.st_mode & 07777) == 0600, "the target's mode became %o",
		      (unsigned)(st.st_mode & 07777));
	ck_assert(unlink(d->sock) == 0);
	ck_assert_int_eq(symlink(dangling, d->sock), 0);
	log = socket_refused(d, d->sock, "0666");
	free(log);
	ck_assert_msg(lstat(dangling, &st) != 0, "the daemon created %s", dangling);
	ck_assert(unlink(d->sock) == 0);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		mode_t old = umask(cases[i].umask);

		du_daemon_start(d, "--socket-mode", cases[i].mode, (const char *)NULL);
		umask(old);
		ck_assert(lstat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode));
		ck_assert_msg((st.st_mode & 07777) == cases[i].want,
			      "--socket-mode %s under umask %03o gave %o", cases[i].mode,
			      (unsigned)cases[i].umask, (unsigned)(st.st_mode & 07777));
		du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	}
	du_daemon_free(d);
}
END_TEST

/* --socket-group: the socket it creates belongs to the group, by name or
 * number, with --socket-mode; an unknown group is a usage error; a group
 * the daemon's user may not give files to (not root, not a member) stops
 * it before it listens. */
START_TEST(test_socket_group)
{
	struct group *gr = getgrnam("nogroup");
	struct du_daemon *d = du_daemon_new();
	const char *argv[] = { DU_DAEMON_PATH, "--socket", d->sock, "--socket-group",
			       "no-such-group.bw", NULL };
	char gid[16], *log;
	struct stat st;

	if (gr == NULL || gr->gr_gid == getegid()) {
		du_daemon_free(d);
		du_note("SKIP: test_socket_group needs a group 'nogroup' other than ours");
		return;
	}
	snprintf(gid, sizeof(gid), "%u", (unsigned)gr->gr_gid);
	du_daemon_spawn(d, argv);
	ck_assert(du_daemon_wait_exit(d, DU_WAIT_MS));
	log = du_daemon_log(d);
	ck_assert_msg(WIFEXITED(d->status) && WEXITSTATUS(d->status) == 2 &&
		      strstr(log, "--socket-group: no group 'no-such-group.bw'") != NULL,
		      "status 0x%x; log: %s", (unsigned)d->status, log);
	free(log);
	ck_assert_msg(lstat(d->sock, &st) != 0, "a socket was left at %s", d->sock);

	if (geteuid() != 0) {
		argv[4] = gid;
		du_daemon_spawn(d, argv);
		ck_assert(du_daemon_wait_exit(d, DU_WAIT_MS));
		log = du_daemon_log(d);
		ck_assert_msg(WIFEXITED(d->status) && WEXITSTATUS(d->status) == 1 &&
			      strstr(log, "cannot give") != NULL,
			      "status 0x%x; log: %s", (unsigned)d->status, log);
		free(log);
		ck_assert_msg(lstat(d->sock, &st) != 0, "a socket was left at %s", d->sock);
		du_daemon_free(d);
		return;
	}
	for (int i = 0; i < 2; i++) {
		du_daemon_start(d, "--socket-group", i ? gid : "nogroup", "--socket-mode", "0660",
				(const char *)NULL);
		ck_assert(lstat(d->sock, &st) == 0 && S_ISSOCK(st.st_mode));
		ck_assert_msg(st.st_gid == gr->gr_gid && (st.st_mode & 07777) == 0660,
			      "--socket-group %s gave group %u mode %o", i ? gid : "nogroup",
			      (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777));
		du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	}
	du_daemon_free(d);
}
END_TEST

static Suite *daemon_suite(void)
{
	Suite *s = suite_create("daemon");
	TCase *tc;

	tc = tcase_create("fire");
	du_tcase(tc);
	tcase_add_loop_test(tc, test_fire_timing, 0,
			    (int)(sizeof(fire_cfgs) / sizeof(fire_cfgs[0])));
	tcase_add_test(tc, test_fire_past_deadline);
	tcase_add_test(tc, test_fire_payload);
	tcase_add_test(tc, test_periodic_on_time);
	tcase_add_test(tc, test_leeway_matrix);
	suite_add_tcase(s, tc);

	tc = tcase_create("cancel");
	du_tcase(tc);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_cancel_race);
	tcase_add_test(tc, test_duplicate_key);
	tcase_add_test(tc, test_replace);
	tcase_add_test(tc, test_periodic);
	tcase_add_test(tc, test_pipelined);
	tcase_add_test(tc, test_pipelined_then_close);
	suite_add_tcase(s, tc);

	tc = tcase_create("sessions");
	du_tcase(tc);
	tcase_add_test(tc, test_session_resume);
	tcase_add_test(tc, test_session_resume_large);
	tcase_add_test(tc, test_session_shared);
	tcase_add_test(tc, test_session_linger);
	tcase_add_test(tc, test_session_expire_large);
	tcase_add_test(tc, test_session_max_queued);
	tcase_add_test(tc, test_session_anonymous_dies);
	suite_add_tcase(s, tc);

	tc = tcase_create("uid");
	du_tcase(tc);
	tcase_add_test(tc, test_uid_isolation);
	suite_add_tcase(s, tc);

	tc = tcase_create("systemd");
	du_tcase(tc);
	tcase_add_test(tc, test_socket_activation);
	tcase_add_test(tc, test_notify);
	tcase_add_test(tc, test_watchdog);
	suite_add_tcase(s, tc);

	tc = tcase_create("malformed");
	du_tcase(tc);
	tcase_add_test(tc, test_zero_length);
	tcase_add_test(tc, test_frame_too_large);
	tcase_add_test(tc, test_truncated_frame);
	tcase_add_test(tc, test_invalid_protobuf);
	tcase_add_test(tc, test_varint_out_of_range);
	tcase_add_test(tc, test_no_body);
	tcase_add_loop_test(tc, test_reply_body, 0, 4);
	tcase_add_test(tc, test_bad_version);
	tcase_add_test(tc, test_hello_required);
	tcase_add_test(tc, test_no_request_id);
	tcase_add_test(tc, test_second_hello);
	tcase_add_test(tc, test_bad_session_name);
	tcase_add_test(tc, test_payload_too_large);
	tcase_add_test(tc, test_max_timers);
	tcase_add_test(tc, test_schedule_fields);
	tcase_add_test(tc, test_request_ids);
	tcase_add_test(tc, test_unknown_fields);
	tcase_add_test(tc, test_split_frames);
	tcase_add_test(tc, test_padded_request);
	tcase_add_test(tc, test_truncated_then_eof);
	suite_add_tcase(s, tc);

	tc = tcase_create("introspection");
	du_tcase(tc);
	tcase_add_test(tc, test_list_cursor);
	tcase_add_test(tc, test_list_small_frames);
	suite_add_tcase(s, tc);

	tc = tcase_create("limits");
	du_tcase(tc);
	tcase_add_test(tc, test_max_clients);
	tcase_add_test(tc, test_slow_consumer);
	tcase_add_test(tc, test_many_clients);
	suite_add_tcase(s, tc);

	tc = tcase_create("shutdown");
	du_tcase(tc);
	tcase_add_test(tc, test_sigterm_flush);
	tcase_add_test(tc, test_sigterm_under_load);
	tcase_add_test(tc, test_sigterm_stuck_client);
	tcase_add_test(tc, test_sigint);
	suite_add_tcase(s, tc);

	tc = tcase_create("faults");
	du_tcase(tc);
	tcase_add_loop_test(tc, test_killed_mid_frame, 0, 2);
	tcase_add_test(tc, test_silent_clients);
	tcase_add_test(tc, test_hello_timeout);
	tcase_add_test(tc, test_dribbling_client);
	tcase_add_test(tc, test_out_of_fds);
	tcase_add_test(tc, test_ten_thousand_clients);
	tcase_add_loop_test(tc, test_unread_fires, 0, 3);
	tcase_add_test(tc, test_sigkill_restart);
	suite_add_tcase(s, tc);

	tc = tcase_create("startup");
	du_tcase(tc);
	tcase_add_test(tc, test_second_daemon);
	tcase_add_test(tc, test_stale_socket);
	tcase_add_test(tc, test_not_a_socket);
	tcase_add_test(tc, test_help_version);
	tcase_add_test(tc, test_duration_flags);
	tcase_add_loop_test(tc, test_bad_flags, 0,
			    (int)(sizeof(bad_args) / sizeof(bad_args[0])));
	tcase_add_test(tc, test_socket_mode);
	tcase_add_test(tc, test_log_form);
	suite_add_tcase(s, tc);

	tc = tcase_create("paths");
	du_tcase(tc);
	tcase_add_test(tc, test_socket_dir_writable);
	tcase_add_test(tc, test_socket_dir_other_owner);
	tcase_add_test(tc, test_live_listener);
	tcase_add_test(tc, test_stale_socket_other_owner);
	tcase_add_test(tc, test_socket_symlink_trap);
	tcase_add_test(tc, test_socket_group);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(daemon_suite());
}
