/*
 * check_delivery.c - protocol version 2's delivery end to end: real
 * bitwheeld processes on temporary sockets, spoken to through the raw
 * protocol (tests/daemonutil.c), judged against proto/PROTOCOL.md sections
 * 5 to 12: roles, windows, Ack/AckReply, Fired.delivery, redelivery, ack
 * timeouts and the session bounds.  Nothing is mocked.
 *
 * TCases:
 *   roles      a producer never receives a fire; many connections of one
 *              uid share a named session at once; a consumer that
 *              schedules gets no fire before its ScheduleReply; HelloReply's
 *              role, window, ack_timeout_ns, auto_ack, consumers and
 *              limits.max_window; Hellos whose role, window or ack options
 *              do not fit are BAD_REQUEST and close.
 *   names      session names with a NUL byte, or any byte outside
 *              [A-Za-z0-9_.:@-], or of 0 or 65 bytes, are BAD_REQUEST and
 *              close, and "victim\0junk" does not attach "victim".
 *   acks       Fired.delivery counts 1, 2, 3, ...; Ack of delivery 0 or
 *              past the last one sent is BAD_REQUEST and closes (the fires
 *              it held come back, marked); AckReply.acked for single,
 *              cumulative and repeated acks; an Ack without request_id
 *              gets no reply; Stats' acked, in_flight and consumers; an
 *              ack timeout redelivers to the same consumer, and an Ack of
 *              the old delivery then completes nothing; single Acks in a
 *              random order over a window of 10,000, with Touches.
 *   window     a window of 4 with 50 fires due: 4 arrive, one more per
 *              Ack, never more than 4 unacknowledged, all 50 in fire order.
 *   competing  4 consumers share 2,000 fires, each exactly once; then one
 *              stops acknowledging: its fires come back to the others,
 *              marked, after its ack timeout, and theirs flow meanwhile;
 *              strict round-robin among consumers with room; a consumer
 *              that never reads is skipped, not disconnected, and what it
 *              held comes back when it closes - marked only if its frame
 *              had started to leave (test_unwritten_unmarked: fails, a
 *              daemon bug, see its comment).
 *   crash      a consumer process SIGKILLed holding fires: a second one
 *              gets every fire the first did not acknowledge, its
 *              HelloReply before any of them.
 *   issue      the scenarios of the report that led to version 2:
 *              producers that exit right after scheduling, 8 concurrent
 *              producer processes, 4,000 fires of 1,000 bytes at one
 *              deadline (default bound, --max-output 16384, anonymous),
 *              20,000 pipelined Schedules and Cancels at --max-output
 *              4096, with and without --state-dir.
 *   bounds     --max-timers as the producers' backpressure (TOO_MANY_TIMERS
 *              while fires are undelivered, room again after an Ack);
 *              --max-queued drops periodic fires (counted in
 *              HelloReply.dropped and Stats) but never oneshot ones.
 *   periodic   a periodic timer whose consumer acknowledges slowly keeps
 *              firing, each period its own delivery.
 *   coalesce   a consumer that asked for coalescing gets 40 fires of
 *              tolerant timers (leeway 1 s) due over 200 ms together,
 *              once all are due, each within its window; root sees the
 *              write they shared in Metrics.
 *
 * Timing: real clocks; margins are generous (daemonutil.h's margin, and
 * waits of DU_WAIT_MS for anything that should come); every wait is
 * bounded, and BW_TEST_SLOW scales waits and ack timeouts.  Under
 * BW_TEST_DAEMON_WRAPPER (make check-valgrind) the bulk tests run with a
 * tenth of their counts.  Random deadlines, choices and payloads come
 * from a fixed seed, or BW_TEST_SEED; the seed is printed by each test
 * that uses it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemonutil.h"
#include "testutil.h"

#define BC(x) BITWHEEL__V1__ENVELOPE__BODY_##x
#define EC(x) BITWHEEL__V1__ERROR_CODE__##x
#define ROLE(x) BITWHEEL__V1__ROLE__##x
#define DEFAULT_SEED UINT64_C(0xde11e7e5eed)

typedef Bitwheel__V1__HelloReply hello_reply_t;
typedef Bitwheel__V1__StatsReply stats_t;
typedef Bitwheel__V1__Fired fired_t;

/* ======================================================================
 * helpers
 * ====================================================================== */

/* The fixed seed, or BW_TEST_SEED; logged so a failure can be rerun. */
static uint64_t test_seed(const char *test)
{
	uint64_t seed = tu_seed_from_env("BW_TEST_SEED", DEFAULT_SEED);

	du_note("%s: seed %#" PRIx64 " (BW_TEST_SEED)", test, seed);
	return seed;
}

/* n, or a tenth of it (at least lo) under the valgrind wrapper. */
static size_t bulk(size_t n, size_t lo)
{
	if (!du_wrapped())
		return n;
	return n / 10 > lo ? n / 10 : lo;
}

static hello_reply_t *hr_of(du_env *e)
{
	ck_assert_ptr_nonnull(e->hello_reply);
	ck_assert_ptr_nonnull(e->hello_reply->limits);
	return e->hello_reply;
}

static const struct du_hello_opts no_opts = { 0 };

/* Hello (request_id 1) that must fail with code and close the connection,
 * with no HelloReply before. */
static void expect_refused(const struct du_daemon *d, const char *session,
			   const struct du_hello_opts *o, int code)
{
	struct du_conn *c = du_connect(d->sock);
	struct du_buf b = { 0 };

	du_pack_hello_opts(&b, 1, session, o);
	du_send_buf(c, &b);
	du_buf_free(&b);
	du_expect_error(c, true, 1, code);
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
}

/*
 * The next Fired within timeout_ms (a kept one first), NULL when none
 * came; any other frame, a bad frame or the connection's end fails the
 * test.  *rx_ns (may be NULL): when it was read.
 */
static du_env *next_fire(struct du_conn *c, int timeout_ms, uint64_t *rx_ns)
{
	char desc[256];
	du_env *e;
	int rc;

	if (du_kept_fires(c) > 0)
		return du_expect_fire(c, 0, rx_ns);
	rc = du_recv(c, timeout_ms, &e);
	if (rc == DU_TIMEOUT)
		return NULL;
	ck_assert_msg(rc == DU_FRAME, "waiting for a fire: %s",
		      rc == DU_EOF ? (c->reset ? "connection reset by the daemon" :
				      "the daemon closed the connection") :
		      bwp_strerror(c->bad));
	if (e->body_case != BC(FIRED)) {
		du_describe(e, desc, sizeof(desc));
		bwp_frame_free(e);
		ck_abort_msg("expected a fire, got %s", desc);
	}
	if (rx_ns)
		*rx_ns = c->rx_ns;
	return e;
}

/* A fire that must come within DU_WAIT_MS. */
static du_env *must_fire(struct du_conn *c, uint64_t *rx_ns)
{
	du_env *e = next_fire(c, DU_WAIT_MS, rx_ns);

	ck_assert_msg(e != NULL, "no fire within %d ms", DU_WAIT_MS);
	return e;
}

static const char *stats_text(const stats_t *s, char *buf, size_t len)
{
	snprintf(buf, len, "clients=%" PRIu64 " sessions=%" PRIu64 " consumers=%" PRIu64
		 " queued=%" PRIu64 " in_flight=%" PRIu64 " acked=%" PRIu64
		 " redelivered=%" PRIu64 " dropped=%" PRIu64 " oneshot.pending=%" PRIu64
		 " periodic.pending=%" PRIu64 " periodic.fired=%" PRIu64,
		 s->clients, s->sessions, s->consumers, s->queued, s->in_flight,
		 s->acked, s->redelivered, s->dropped, s->oneshot->pending,
		 s->periodic->pending, s->periodic->fired);
	return buf;
}

typedef bool (*stats_pred)(const stats_t *s, uint64_t arg);

/* Stats on connection c (so that no probe connection counts) until pred
 * holds, within DU_WAIT_MS; the reply, which the caller frees. */
static du_env *wait_stats_on(struct du_conn *c, uint64_t *id, stats_pred pred,
			     uint64_t arg, const char *what)
{
	uint64_t deadline = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	char text[512];

	for (;;) {
		du_env *e = du_stats(c, (*id)++);

		if (pred(e->stats_reply, arg))
			return e;
		if (du_now_ns() > deadline) {
			stats_text(e->stats_reply, text, sizeof(text));
			bwp_frame_free(e);
			ck_abort_msg("stats never showed %s: %s", what, text);
		}
		bwp_frame_free(e);
		du_sleep_ms(5);
	}
}

static bool in_flight_is(const stats_t *s, uint64_t n) { return s->in_flight == n; }
static bool queued_is(const stats_t *s, uint64_t n) { return s->queued == n; }
static bool consumers_is(const stats_t *s, uint64_t n) { return s->consumers == n; }
static bool clients_is(const stats_t *s, uint64_t n) { return s->clients == n; }
static bool acked_is(const stats_t *s, uint64_t n) { return s->acked == n; }

/* Check the counters a test cares about, naming them on failure. */
static void expect_stats(du_env *e, uint64_t queued, uint64_t in_flight,
			 uint64_t consumers)
{
	char text[512];
	const stats_t *s = e->stats_reply;

	ck_assert_msg(s->queued == queued && s->in_flight == in_flight &&
		      s->consumers == consumers,
		      "expected queued=%" PRIu64 " in_flight=%" PRIu64
		      " consumers=%" PRIu64 ", got %s", queued, in_flight, consumers,
		      stats_text(s, text, sizeof(text)));
}

/* n Schedules, CHUNK at a time, each chunk's replies read before the next
 * goes (a producer's connection: replies only); every one must succeed. */
#define SCHED_CHUNK 64
static void schedule_all(struct du_conn *p, uint64_t *id, const struct du_sched *s,
			 size_t n)
{
	struct du_buf b = { 0 };

	for (size_t off = 0; off < n;) {
		size_t m = n - off < SCHED_CHUNK ? n - off : SCHED_CHUNK;
		uint64_t first = *id;

		for (size_t i = 0; i < m; i++)
			du_pack_schedule(&b, (*id)++, &s[off + i]);
		du_send_buf(p, &b);
		for (size_t i = 0; i < m; i++)
			bwp_frame_free(du_expect_reply(p, first + i, BC(SCHEDULE_REPLY)));
		off += m;
	}
	du_buf_free(&b);
}

static void schedule_one(struct du_conn *p, uint64_t id, uint64_t key,
			 enum du_when when, uint64_t when_ns)
{
	struct du_sched s = { .key = key, .when = when, .when_ns = when_ns };

	bwp_frame_free(du_schedule(p, id, &s));
}

/* Expect a Schedule to fail with code (the connection stays). */
static void schedule_refused(struct du_conn *p, uint64_t id, uint64_t key, int code)
{
	struct du_sched s = { .key = key, .when = DU_DELAY, .when_ns = 3600 * DU_S };

	du_send_schedule(p, id, &s);
	du_expect_error(p, true, id, code);
}

/* ---- several consumers read at once ------------------------------------ */

/* One consumer connection, read by pump(). */
struct sink {
	struct du_conn *c;
	uint64_t last_delivery;    /* the last Fired.delivery seen           */
	uint64_t acked_to;         /* cumulative Ack sent up to here         */
	bool ack;                  /* acknowledge what arrives               */
	bool auto_ack;             /* auto_ack consumer: never Ack           */
	size_t got;
};

/* Called for each fire: who is the sink's index. */
typedef void (*on_fire_fn)(void *ctx, int who, const fired_t *f, uint64_t rx_ns);

/* Every fire complete on the sinks now; each acknowledging sink then acks
 * cumulatively (no request_id) up to its last delivery. */
static size_t drain_sinks(struct sink *s, int n, on_fire_fn fn, void *ctx)
{
	size_t total = 0;

	for (int i = 0; i < n; i++) {
		du_env *e;
		uint64_t rx;

		while ((e = next_fire(s[i].c, 0, &rx)) != NULL) {
			const fired_t *f = e->fired;

			ck_assert_msg(f->has_delivery && f->delivery == s[i].last_delivery + 1,
				      "consumer %d: delivery %" PRIu64 " after %" PRIu64,
				      i, f->delivery, s[i].last_delivery);
			s[i].last_delivery = f->delivery;
			s[i].got++;
			total++;
			if (fn)
				fn(ctx, i, f, rx);
			bwp_frame_free(e);
		}
		if (s[i].ack && !s[i].auto_ack && s[i].last_delivery > s[i].acked_to) {
			du_send_ack(s[i].c, false, 0, s[i].last_delivery, true);
			s[i].acked_to = s[i].last_delivery;
		}
	}
	return total;
}

/* Read the sinks: what has arrived, else wait up to ms for more. */
static size_t pump(struct sink *s, int n, int ms, on_fire_fn fn, void *ctx)
{
	struct pollfd pf[16];
	size_t got = drain_sinks(s, n, fn, ctx);

	if (got || ms <= 0)
		return got;
	ck_assert(n <= 16);
	for (int i = 0; i < n; i++)
		pf[i] = (struct pollfd){ s[i].c->fd, POLLIN, 0 };
	poll(pf, (nfds_t)n, ms);
	return drain_sinks(s, n, fn, ctx);
}

/* ---- child processes ---------------------------------------------------- */

static void expect_child_ok(pid_t pid, int timeout_ms, const char *what)
{
	int st = du_wait_status(pid, timeout_ms);
	char text[32];

	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s (pid %ld): %s", what, (long)pid,
		      du_status_text(st, text, sizeof(text)));
}

static void write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(4);
		p += n;
		len -= (size_t)n;
	}
}

/*
 * Frames the daemon has written to c's socket that the test has not taken
 * yet: those parsed into c's buffer or kept, and those still in the
 * socket's receive queue, counted by peeking (nothing is consumed).
 * *partial: bytes of an incomplete frame at the end (a frame that started
 * to leave the daemon).
 */
static size_t peek_written(struct du_conn *c, size_t *partial)
{
	size_t cap = 16u << 20, have = c->in_len - c->in_off, off = 0, frames = 0;
	uint8_t *buf = malloc(cap);
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	ck_assert(have < cap);
	if (have)
		memcpy(buf, c->in + c->in_off, have);
	n = recv(c->fd, buf + have, cap - have, MSG_PEEK | MSG_DONTWAIT);
	ck_assert_msg(n >= 0 || errno == EAGAIN || errno == EWOULDBLOCK,
		      "peek: %s", strerror(errno));
	if (n > 0)
		have += (size_t)n;
	ck_assert_msg(have < cap, "more than %zu bytes unread", cap);
	for (;;) {
		size_t len;

		if (have - off < 4)
			break;
		len = (size_t)buf[off] << 24 | (size_t)buf[off + 1] << 16 |
		      (size_t)buf[off + 2] << 8 | buf[off + 3];
		if (have - off < 4 + len)
			break;
		off += 4 + len;
		frames++;
	}
	*partial = have - off;
	free(buf);
	return frames + du_kept_fires(c);
}

/* A payload that says which key it belongs to. */
static void fill_payload(uint8_t *p, size_t n, uint64_t key)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(key * 131 + i * 7 + (i >> 8));
	if (n >= sizeof(key))
		memcpy(p, &key, sizeof(key));
}

static bool payload_ok(const fired_t *f, size_t n)
{
	uint8_t want[1024];

	if (!f->has_payload || f->payload.len != n || n > sizeof(want))
		return false;
	fill_payload(want, n, f->key);
	return memcmp(want, f->payload.data, n) == 0;
}

#define NBURST 4000
#define BURST_PAYLOAD 1000

/* Pack and send Schedules [from, to) of the burst: 1,000-byte payloads,
 * all at deadline t. */
static void burst_send(struct du_conn *c, uint64_t first_id, size_t from, size_t to,
		       uint64_t t)
{
	struct du_buf b = { 0 };
	uint8_t pl[BURST_PAYLOAD];

	for (size_t k = from; k < to; k++) {
		struct du_sched s = { .key = k, .when = DU_DEADLINE, .when_ns = t,
				      .payload = pl, .payload_len = sizeof(pl) };

		fill_payload(pl, sizeof(pl), k);
		du_pack_schedule(&b, first_id + k, &s);
	}
	du_send_buf(c, &b);
	du_buf_free(&b);
}

/* ======================================================================
 * roles
 * ====================================================================== */

/* A producer schedules, a consumer of the same session gets the fires, and
 * the producer hears nothing but its replies; with only the producer
 * attached, a fire waits in the queue for the next consumer. */
START_TEST(test_producer_quiet)
{
	struct du_daemon *d = du_daemon_new();
	struct du_hello_opts co = du_consumer_opts(16, 0);
	struct du_conn *p, *c;
	uint64_t id = 2, t0;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_connect(d->sock);
	e = du_hello_opts(p, "dl-roles", &du_producer_opts);
	ck_assert_int_eq(hr_of(e)->role, ROLE(PRODUCER));
	ck_assert(hr_of(e)->has_resumed && !hr_of(e)->resumed);
	ck_assert_uint_eq(hr_of(e)->consumers, 0);
	bwp_frame_free(e);
	c = du_connect(d->sock);
	e = du_hello_opts(c, "dl-roles", &co);
	ck_assert_int_eq(hr_of(e)->role, ROLE(CONSUMER));
	ck_assert_msg(hr_of(e)->resumed, "the consumer did not join the producer's session");
	ck_assert_uint_eq(hr_of(e)->consumers, 1);
	bwp_frame_free(e);

	t0 = du_now_ns();
	for (uint64_t k = 0; k < 5; k++) {
		char pl[8];
		struct du_sched s = { .key = k, .when = DU_DEADLINE,
				      .when_ns = t0 + 20 * DU_MS + k * 10 * DU_MS,
				      .payload = pl };

		s.payload_len = (size_t)snprintf(pl, sizeof(pl), "k%" PRIu64, k);
		bwp_frame_free(du_schedule(p, id++, &s));
	}
	for (uint64_t k = 0; k < 5; k++) {
		uint64_t rx;
		char pl[8];

		e = must_fire(c, &rx);
		ck_assert_uint_eq(e->fired->key, k);
		ck_assert_uint_eq(e->fired->delivery, k + 1);
		ck_assert(!e->fired->has_redelivered || !e->fired->redelivered);
		snprintf(pl, sizeof(pl), "k%" PRIu64, k);
		ck_assert(e->fired->payload.len == strlen(pl) &&
			  memcmp(e->fired->payload.data, pl, strlen(pl)) == 0);
		du_check_fire_time(e->fired, rx, DU_MS);
		bwp_frame_free(e);
	}
	ck_assert_uint_eq(du_ack(c, 100, 5, true), 5);
	du_expect_quiet(p, du_scale_ms(100));
	du_conn_free(c);
	bwp_frame_free(wait_stats_on(p, &id, consumers_is, 0, "the consumer gone"));

	/* Only the producer attached: the fire waits in the queue. */
	schedule_one(p, id++, 99, DU_DELAY, 0);
	e = wait_stats_on(p, &id, queued_is, 1, "the fire queued");
	expect_stats(e, 1, 0, 0);
	bwp_frame_free(e);
	du_expect_quiet(p, du_scale_ms(100));

	c = du_connect(d->sock);
	e = du_hello_opts(c, "dl-roles", &co);
	ck_assert_uint_eq(hr_of(e)->queued, 1);
	ck_assert_msg(du_kept_fires(c) == 0, "a fire came before the HelloReply");
	bwp_frame_free(e);
	e = must_fire(c, NULL);
	ck_assert_uint_eq(e->fired->key, 99);
	ck_assert_uint_eq(e->fired->delivery, 1);
	ck_assert_msg(!e->fired->redelivered, "a fire that waited in the queue came marked redelivered");
	bwp_frame_free(e);
	ck_assert_uint_eq(du_ack(c, 100, 1, false), 1);
	du_expect_quiet(p, 50);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

#define NSHARED 16

struct shared_ctx {
	uint8_t seen[80];
};

static void shared_fire(void *ctx, int who, const fired_t *f, uint64_t rx)
{
	struct shared_ctx *x = ctx;

	(void)who;
	(void)rx;
	ck_assert_msg(f->key < 80 && x->seen[f->key] == 0,
		      "key %" PRIu64 " delivered twice (or unknown)", f->key);
	x->seen[f->key] = 1;
}

/* 16 connections of one uid attach to one named session at once, 8
 * producers and 8 consumers: no SESSION_BUSY, each HelloReply counts the
 * consumers so far, and the fires are shared among the consumers. */
START_TEST(test_shared_attach)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c[NSHARED];
	struct sink sinks[NSHARED / 2];
	struct shared_ctx x = { { 0 } };
	struct du_sched s[80];
	size_t got = 0, nsink = 0;
	uint64_t id = 2, until;
	char share[256] = "";
	du_env *e;

	du_daemon_start(d, NULL);
	for (int i = 0; i < NSHARED; i++) {
		struct du_hello_opts o = i % 2 ? du_consumer_opts(8, 0) : du_producer_opts;

		c[i] = du_connect(d->sock);
		e = du_hello_opts(c[i], "dl-shared", &o);
		ck_assert_msg(hr_of(e)->resumed == (i > 0), "connection %d: resumed=%d", i,
			      hr_of(e)->resumed);
		ck_assert_int_eq(hr_of(e)->role, i % 2 ? ROLE(CONSUMER) : ROLE(PRODUCER));
		ck_assert_msg(hr_of(e)->consumers == (uint64_t)(i + 1) / 2,
			      "connection %d: consumers=%" PRIu64 ", expected %d", i,
			      hr_of(e)->consumers, (i + 1) / 2);
		bwp_frame_free(e);
		if (i % 2)
			sinks[nsink++] = (struct sink){ .c = c[i], .ack = true };
	}
	e = du_stats(c[0], id++);
	ck_assert_uint_eq(e->stats_reply->sessions, 1);
	ck_assert_uint_eq(e->stats_reply->clients, NSHARED);
	expect_stats(e, 0, 0, NSHARED / 2);
	bwp_frame_free(e);

	for (uint64_t k = 0; k < 80; k++)
		s[k] = (struct du_sched){ .key = k, .when = DU_DELAY, .when_ns = 0 };
	/* From two of the producers. */
	schedule_all(c[0], &id, s, 40);
	schedule_all(c[2], &id, s + 40, 40);
	until = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	while (got < 80) {
		ck_assert_msg(du_now_ns() < until, "only %zu of 80 fires arrived", got);
		got += pump(sinks, (int)nsink, 20, shared_fire, &x);
	}
	for (size_t i = 0; i < nsink; i++) {
		size_t len = strlen(share);

		snprintf(share + len, sizeof(share) - len, " %zu", sinks[i].got);
	}
	du_note("shared session: 80 fires over 8 consumers:%s", share);
	for (int i = 0; i < NSHARED; i += 2)
		du_expect_quiet(c[i], i == 0 ? du_scale_ms(50) : 0);
	e = wait_stats_on(c[0], &id, in_flight_is, 0, "every fire acknowledged");
	ck_assert_uint_eq(e->stats_reply->acked, 80);
	bwp_frame_free(e);

	/* Consumers leaving are counted out. */
	for (int i = 1; i < 7; i += 2) {
		du_conn_free(c[i]);
		c[i] = NULL;
	}
	bwp_frame_free(wait_stats_on(c[0], &id, consumers_is, 5, "consumers=5"));
	for (int i = 0; i < NSHARED; i++)
		du_conn_free(c[i]);
	du_daemon_free(d);
}
END_TEST

#define NSELF 500

/* A consumer may schedule too, and on its own connection no fire comes
 * before its Schedule's reply (PROTOCOL.md 5.4), even one due at once. */
START_TEST(test_consumer_schedules)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_buf b = { 0 };
	bool replied[NSELF] = { false }, fired[NSELF] = { false };
	uint64_t next = 2, nfired = 0, nreplies = 0;
	char desc[256];
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_open_consumer(d, "dl-self", 4096, 0);
	for (uint64_t k = 0; k < NSELF; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY, .when_ns = 0 };

		du_pack_schedule(&b, k + 2, &s);
	}
	du_send_buf(c, &b);
	du_buf_free(&b);
	while (nreplies < NSELF || nfired < NSELF) {
		int rc = du_recv(c, DU_WAIT_MS, &e);

		ck_assert_msg(rc == DU_FRAME, "after %" PRIu64 " replies and %" PRIu64
			      " fires: rc %d", nreplies, nfired, rc);
		if (e->body_case == BC(FIRED)) {
			uint64_t k = e->fired->key;

			ck_assert_msg(k < NSELF && replied[k] && !fired[k],
				      "fire of key %" PRIu64 " before its ScheduleReply, or twice", k);
			fired[k] = true;
			nfired++;
			ck_assert_uint_eq(e->fired->delivery, nfired);
		} else {
			du_describe(e, desc, sizeof(desc));
			ck_assert_msg(e->body_case == BC(SCHEDULE_REPLY) && e->has_request_id &&
				      e->request_id == next,
				      "expected the reply to %" PRIu64 ", got %s", next, desc);
			replied[next - 2] = true;
			next++;
			nreplies++;
		}
		bwp_frame_free(e);
	}
	ck_assert_uint_eq(du_ack(c, next++, NSELF, true), NSELF);
	e = du_stats(c, next++);
	expect_stats(e, 0, 0, 1);
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* Every HelloReply field of version 2, for each kind of connection. */
START_TEST(test_hello_reply_fields)
{
	struct du_daemon *d = du_daemon_new(), *d2 = du_daemon_new();
	struct du_hello_opts o;
	struct du_conn *c[8];
	hello_reply_t *hr;
	du_env *e;
	int n = 0;

	du_daemon_start(d, "--max-window", "100", NULL);

	o = du_consumer_opts(7, 250 * DU_MS);
	c[n] = du_connect(d->sock);
	e = du_hello_opts(c[n++], "dl-fields", &o);
	hr = hr_of(e);
	ck_assert(hr->has_role && hr->has_window && hr->has_ack_timeout_ns &&
		  hr->has_auto_ack && hr->has_consumers && hr->limits->has_max_window);
	ck_assert_int_eq(hr->role, ROLE(CONSUMER));
	ck_assert_uint_eq(hr->window, 7);
	ck_assert_uint_eq(hr->ack_timeout_ns, 250 * DU_MS);
	ck_assert(!hr->auto_ack);
	ck_assert_uint_eq(hr->consumers, 1);
	ck_assert_uint_eq(hr->limits->max_window, 100);
	ck_assert_uint_eq(hr->protocol_version, 2);
	bwp_frame_free(e);

	/* A consumer that names nothing: a window within the limit, manual
	 * acks for a named session, no ack timeout. */
	o = (struct du_hello_opts){ .role = ROLE(CONSUMER) };
	c[n] = du_connect(d->sock);
	e = du_hello_opts(c[n++], "dl-fields", &o);
	hr = hr_of(e);
	ck_assert_int_eq(hr->role, ROLE(CONSUMER));
	ck_assert_msg(hr->window >= 1 && hr->window <= 100,
		      "default window %" PRIu32 " with max_window 100", hr->window);
	ck_assert_uint_eq(hr->ack_timeout_ns, 0);
	ck_assert(!hr->auto_ack);
	ck_assert_uint_eq(hr->consumers, 2);
	bwp_frame_free(e);

	/* The largest window, auto_ack. */
	o = (struct du_hello_opts){ .role = ROLE(CONSUMER), .has_window = true,
				    .window = 100, .has_auto_ack = true, .auto_ack = true };
	c[n] = du_connect(d->sock);
	e = du_hello_opts(c[n++], "dl-fields", &o);
	hr = hr_of(e);
	ck_assert_uint_eq(hr->window, 100);
	ck_assert(hr->auto_ack);
	ck_assert_uint_eq(hr->consumers, 3);
	bwp_frame_free(e);

	/* A named Hello without role is a producer's. */
	c[n] = du_connect(d->sock);
	e = du_hello_opts(c[n++], "dl-fields", &no_opts);
	hr = hr_of(e);
	ck_assert_int_eq(hr->role, ROLE(PRODUCER));
	ck_assert_uint_eq(hr->window, 0);
	ck_assert_uint_eq(hr->ack_timeout_ns, 0);
	ck_assert(!hr->auto_ack);
	ck_assert_uint_eq(hr->consumers, 3);
	ck_assert(hr->resumed);
	bwp_frame_free(e);

	/* Anonymous: a consumer, auto_ack by default ... */
	c[n] = du_connect(d->sock);
	e = du_hello_opts(c[n++], NULL, &no_opts);
	hr = hr_of(e);
	ck_assert_int_eq(hr->role, ROLE(CONSUMER));
	ck_assert(hr->auto_ack);
	ck_assert(hr->window >= 1 && hr->window <= 100);
	ck_assert_uint_eq(hr->consumers, 1);
	ck_assert(!hr->resumed);
	bwp_frame_free(e);

	/* ... or with manual acks and a window when it asks. */
	o = du_consumer_opts(5, 0);
	c[n] = du_connect(d->sock);
	e = du_hello_opts(c[n++], NULL, &o);
	hr = hr_of(e);
	ck_assert_int_eq(hr->role, ROLE(CONSUMER));
	ck_assert(!hr->auto_ack);
	ck_assert_uint_eq(hr->window, 5);
	bwp_frame_free(e);

	/* The defaults: max_window 4096, a named consumer's window 256. */
	du_daemon_start(d2, NULL);
	o = (struct du_hello_opts){ .role = ROLE(CONSUMER) };
	c[n] = du_connect(d2->sock);
	e = du_hello_opts(c[n++], "dl-fields", &o);
	hr = hr_of(e);
	ck_assert_uint_eq(hr->limits->max_window, 4096);
	ck_assert_uint_eq(hr->window, 256);
	ck_assert(!hr->auto_ack);
	ck_assert_uint_eq(hr->limits->max_timers, 65536);
	ck_assert_uint_eq(hr->limits->max_queued, 4096);
	ck_assert_uint_eq(hr->limits->max_output_bytes, 1u << 20);
	bwp_frame_free(e);

	for (int i = 0; i < n; i++)
		du_conn_free(c[i]);
	du_daemon_free(d2);
	du_daemon_free(d);
}
END_TEST

static const struct {
	const char *what;
	const char *session;
	struct du_hello_opts o;
} refused_hellos[] = {
	{ "producer with a window", "dl-x",
	  { .role = ROLE(PRODUCER), .has_window = true, .window = 4 } },
	{ "producer with an ack timeout", "dl-x",
	  { .role = ROLE(PRODUCER), .ack_timeout_ns = DU_S } },
	{ "producer with auto_ack true", "dl-x",
	  { .role = ROLE(PRODUCER), .has_auto_ack = true, .auto_ack = true } },
	{ "producer with auto_ack false", "dl-x",
	  { .role = ROLE(PRODUCER), .has_auto_ack = true, .auto_ack = false } },
	{ "named Hello without role (a producer) with a window", "dl-x",
	  { .has_window = true, .window = 4 } },
	{ "anonymous PRODUCER", NULL, { .role = ROLE(PRODUCER) } },
	{ "anonymous PRODUCER with a window", NULL,
	  { .role = ROLE(PRODUCER), .has_window = true, .window = 4 } },
	{ "consumer with window 0", "dl-x",
	  { .role = ROLE(CONSUMER), .has_window = true, .window = 0 } },
	{ "consumer with window max_window + 1", "dl-x",
	  { .role = ROLE(CONSUMER), .has_window = true, .window = 4097 } },
	{ "consumer with window 2^32 - 1", "dl-x",
	  { .role = ROLE(CONSUMER), .has_window = true, .window = UINT32_MAX } },
	{ "anonymous with window 0", NULL, { .has_window = true, .window = 0 } },
	{ "anonymous with window max_window + 1", NULL,
	  { .role = ROLE(CONSUMER), .has_window = true, .window = 4097 } },
	{ "role 3", "dl-x", { .role = 3 } },
};

/* Each Hello whose role, window or ack options do not fit: BAD_REQUEST
 * with its request_id, the connection closed, no session made. */
START_TEST(test_hello_refused)
{
	struct du_daemon *d = du_daemon_new();
	du_env *e;

	du_note("refused Hello %d: %s", _i, refused_hellos[_i].what);
	du_daemon_start(d, NULL);
	expect_refused(d, refused_hellos[_i].session, &refused_hellos[_i].o,
		       EC(BAD_REQUEST));
	e = du_fresh_stats(d);
	ck_assert_msg(e->stats_reply->sessions == 0, "%s: a session was made",
		      refused_hellos[_i].what);
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * names
 * ====================================================================== */

/* A session "victim" with a timer and a consumer; Hellos naming it with a
 * NUL and more bytes after (or before) are refused and attach nothing. */
START_TEST(test_name_nul)
{
	static const struct { const char *name; size_t len; } bad[] = {
		{ "victim\0junk", 11 },
		{ "victim\0", 7 },
		{ "\0victim", 7 },
		{ "vic\0tim", 7 },
		{ "\0", 1 },
	};
	struct du_daemon *d = du_daemon_new();
	struct du_conn *v, *p;
	uint64_t id = 2, t0;
	du_env *e;

	du_daemon_start(d, NULL);
	v = du_open_consumer(d, "victim", 16, 0);
	t0 = du_now_ns();
	schedule_one(v, id++, 1, DU_DELAY, 3600 * DU_S);
	schedule_one(v, id++, 2, DU_DEADLINE, t0 + du_scale_ms(150) * DU_MS);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct du_hello_opts o = du_consumer_opts(16, 0);

		o.session_len = bad[i].len;
		expect_refused(d, bad[i].name, &o, EC(BAD_REQUEST));
		o = du_producer_opts;
		o.session_len = bad[i].len;
		expect_refused(d, bad[i].name, &o, EC(BAD_REQUEST));
	}
	e = wait_stats_on(v, &id, clients_is, 1, "the refused connections gone");
	ck_assert_msg(e->stats_reply->sessions == 1,
		      "sessions=%" PRIu64 " after Hellos naming \"victim\\0...\"",
		      e->stats_reply->sessions);
	ck_assert_uint_eq(e->stats_reply->consumers, 1);
	bwp_frame_free(e);

	/* The victim's fire comes to the victim. */
	e = must_fire(v, NULL);
	ck_assert_uint_eq(e->fired->key, 2);
	ck_assert_uint_eq(e->fired->delivery, 1);
	bwp_frame_free(e);
	ck_assert_uint_eq(du_ack(v, id++, 1, false), 1);
	du_conn_free(v);

	p = du_connect(d->sock);
	e = du_hello_opts(p, "victim", &du_producer_opts);
	ck_assert(hr_of(e)->resumed);
	ck_assert_uint_eq(hr_of(e)->timers, 1);
	ck_assert_uint_eq(hr_of(e)->queued, 0);
	bwp_frame_free(e);
	ck_assert(du_cancel(p, id++, 1));
	e = du_stats(p, id++);
	ck_assert_uint_eq(e->stats_reply->sessions, 1);
	bwp_frame_free(e);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

static bool name_byte_ok(unsigned c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' ||
	       c == '@' || c == '-';
}

/* Every byte value in the middle of a name: the 67 allowed ones open a
 * session, each other one is BAD_REQUEST and closes; 64 bytes are fine,
 * 65 and 0 are not. */
START_TEST(test_name_bytes)
{
	struct du_daemon *d = du_daemon_new();
	char long_name[66];
	uint64_t nvalid = 0;
	du_env *e;

	du_daemon_start(d, NULL);
	for (unsigned b = 0; b < 256; b++) {
		char name[3] = { 'a', (char)b, 'z' };
		struct du_hello_opts o = du_producer_opts;

		o.session_len = 3;
		if (name_byte_ok(b)) {
			struct du_conn *c = du_connect(d->sock);

			e = du_hello_opts(c, name, &o);
			ck_assert_msg(!hr_of(e)->resumed, "byte %#x: resumed", b);
			bwp_frame_free(e);
			du_conn_free(c);
			nvalid++;
		} else {
			expect_refused(d, name, &o, EC(BAD_REQUEST));
		}
		/* The byte alone. */
		o.session_len = 1;
		if (!name_byte_ok(b))
			expect_refused(d, name + 1, &o, EC(BAD_REQUEST));
	}
	ck_assert_uint_eq(nvalid, 67);

	memset(long_name, 'q', sizeof(long_name));
	long_name[65] = '\0';
	expect_refused(d, long_name, &du_producer_opts, EC(BAD_REQUEST));
	long_name[64] = '\0';
	{
		struct du_conn *c = du_connect(d->sock);

		bwp_frame_free(du_hello_opts(c, long_name, &du_producer_opts));
		du_conn_free(c);
	}
	expect_refused(d, "", &du_producer_opts, EC(BAD_REQUEST));
	expect_refused(d, "two words", &du_producer_opts, EC(BAD_REQUEST));
	expect_refused(d, "a/b", &du_producer_opts, EC(BAD_REQUEST));
	expect_refused(d, "caf\xc3\xa9", &du_producer_opts, EC(BAD_REQUEST));
	expect_refused(d, "tab\there", &du_producer_opts, EC(BAD_REQUEST));

	e = du_fresh_stats(d);
	ck_assert_msg(e->stats_reply->sessions == nvalid + 1,
		      "sessions=%" PRIu64 ", expected %" PRIu64,
		      e->stats_reply->sessions, nvalid + 1);
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * acks
 * ====================================================================== */

/* Deliveries count 1, 2, 3, ... on each connection, across bursts, and
 * Stats' in_flight, acked and consumers follow. */
START_TEST(test_delivery_numbers)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c, *c2;
	uint64_t id = 2, t0;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "dl-numbers");
	c = du_open_consumer(d, "dl-numbers", 32, 0);
	e = du_stats(p, id++);
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->acked, 0);
	bwp_frame_free(e);

	t0 = du_now_ns();
	for (uint64_t k = 0; k < 10; k++)
		schedule_one(p, id++, 100 + k, DU_DEADLINE, t0 + 20 * DU_MS + k * 2 * DU_MS);
	for (uint64_t k = 0; k < 10; k++) {
		e = must_fire(c, NULL);
		ck_assert_uint_eq(e->fired->key, 100 + k);
		ck_assert_msg(e->fired->has_delivery && e->fired->delivery == k + 1,
			      "fire %" PRIu64 ": delivery %" PRIu64, k + 1, e->fired->delivery);
		ck_assert(!e->fired->redelivered);
		bwp_frame_free(e);
	}
	e = du_stats(p, id++);
	expect_stats(e, 0, 10, 1);
	bwp_frame_free(e);
	du_send_ack(c, false, 0, 10, true);
	du_expect_quiet(c, 50);
	e = wait_stats_on(p, &id, acked_is, 10, "acked=10");
	expect_stats(e, 0, 0, 1);
	bwp_frame_free(e);

	/* The next burst goes on counting; a second consumer counts from 1. */
	c2 = du_open_consumer(d, "dl-numbers", 32, 0);
	e = du_stats(p, id++);
	expect_stats(e, 0, 0, 2);
	bwp_frame_free(e);
	du_conn_free(c2);
	bwp_frame_free(wait_stats_on(p, &id, consumers_is, 1, "consumers=1"));
	for (uint64_t k = 0; k < 5; k++)
		schedule_one(p, id++, 200 + k, DU_DELAY, 0);
	for (uint64_t k = 0; k < 5; k++) {
		e = must_fire(c, NULL);
		ck_assert_uint_eq(e->fired->delivery, 11 + k);
		bwp_frame_free(e);
	}
	ck_assert_uint_eq(du_ack(c, id++, 15, true), 5);
	e = du_stats(c, id++);
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->acked, 15);
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* AckReply.acked for single, cumulative and repeated Acks, Acks without
 * request_id answered by nothing, and Stats all along. */
START_TEST(test_ack_replies)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "dl-acks");
	c = du_open_consumer(d, "dl-acks", 16, 0);
	for (uint64_t k = 1; k <= 10; k++)
		schedule_one(p, id++, k, DU_DELAY, 0);
	for (uint64_t k = 1; k <= 10; k++) {
		e = must_fire(c, NULL);
		ck_assert_uint_eq(e->fired->delivery, k);
		bwp_frame_free(e);
	}
	e = du_stats(c, id++);
	expect_stats(e, 0, 10, 1);
	bwp_frame_free(e);

	ck_assert_uint_eq(du_ack(c, id++, 3, false), 1);
	ck_assert_uint_eq(du_ack(c, id++, 3, false), 0);   /* again: done already */
	ck_assert_uint_eq(du_ack(c, id++, 5, true), 4);    /* 1, 2, 4, 5 */
	ck_assert_uint_eq(du_ack(c, id++, 4, false), 0);
	ck_assert_uint_eq(du_ack(c, id++, 2, true), 0);
	e = du_stats(c, id++);
	expect_stats(e, 0, 5, 1);
	ck_assert_uint_eq(e->stats_reply->acked, 5);
	bwp_frame_free(e);

	/* Without request_id: no reply, but it takes effect. */
	du_send_ack(c, false, 0, 7, false);
	du_expect_quiet(c, du_scale_ms(100));
	ck_assert_uint_eq(du_ack(c, id++, 7, false), 0);
	ck_assert_uint_eq(du_ack(c, id++, 10, false), 1);
	e = du_stats(c, id++);
	ck_assert_msg(e->stats_reply->in_flight == 3 && e->stats_reply->acked == 7,
		      "after acking 1-5, 7 and 10: in_flight=%" PRIu64 " acked=%" PRIu64,
		      e->stats_reply->in_flight, e->stats_reply->acked);
	bwp_frame_free(e);
	ck_assert_uint_eq(du_ack(c, id++, 9, true), 3);    /* 6, 8, 9 */
	du_send_ack(c, false, 0, 10, true);
	du_send_ack(c, false, 0, 10, true);
	du_expect_quiet(c, du_scale_ms(50));
	ck_assert_uint_eq(du_ack(c, id++, 10, true), 0);
	e = du_stats(p, id++);
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->acked, 10);
	ck_assert_uint_eq(e->stats_reply->redelivered, 0);
	bwp_frame_free(e);
	du_expect_quiet(p, 0);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/*
 * Single acks out of order over a whole window of 10,000 (PROTOCOL.md,
 * Ack: O(1) each, a map of the consumer's fires in flight by delivery
 * number): every fire read, then acknowledged one by one in a random
 * order, pipelined SINGLE_CHUNK at a time, each AckReply.acked 1, an Ack
 * of one done already 0 (one per chunk), a Touch of one still in flight
 * touched (one per chunk, so that the touched fires' ack deadlines are out
 * of order), Stats' in_flight counting down; at the end nothing in
 * flight, every fire acknowledged once, none redelivered.
 */
#define SINGLE_WINDOW 10000u
#define SINGLE_CHUNK 256u
START_TEST(test_single_acks_full_window)
{
	struct du_daemon *d = du_daemon_new();
	uint64_t seed = test_seed("test_single_acks_full_window"), id = 2;
	size_t n = bulk(SINGLE_WINDOW, 500), done = 0;
	uint64_t *order = malloc(n * sizeof(*order));
	struct du_sched *sc = calloc(n, sizeof(*sc));
	struct du_buf b = { 0 };
	struct du_conn *p, *c;
	struct tu_rng rng;
	char win[16];
	du_env *e;

	ck_assert_ptr_nonnull(order);
	ck_assert_ptr_nonnull(sc);
	tu_rng_seed(&rng, seed);
	snprintf(win, sizeof(win), "%u", SINGLE_WINDOW);
	du_daemon_start(d, "--max-window", win, NULL);
	p = du_open_producer(d, "dl-single");
	c = du_open_consumer(d, "dl-single", (uint32_t)n, 600 * DU_S);
	for (size_t i = 0; i < n; i++)
		sc[i] = (struct du_sched){ .key = i + 1, .when = DU_DELAY, .when_ns = 0 };
	schedule_all(p, &id, sc, n);
	for (size_t i = 0; i < n; i++) {
		e = must_fire(c, NULL);
		ck_assert_uint_eq(e->fired->delivery, i + 1);
		bwp_frame_free(e);
		order[i] = i + 1;
	}
	bwp_frame_free(wait_stats_on(p, &id, in_flight_is, n, "the whole window in flight"));
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)tu_rng_below(&rng, i + 1);
		uint64_t t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	while (done < n) {
		size_t m = n - done < SINGLE_CHUNK ? n - done : SINGLE_CHUNK;
		uint64_t first = id, again = done ? order[tu_rng_below(&rng, done)] : 0;

		for (size_t i = 0; i < m; i++)
			du_pack_ack(&b, true, id++, order[done + i], false);
		du_send_buf(c, &b);
		du_buf_free(&b);
		for (size_t i = 0; i < m; i++) {
			e = du_expect_reply(c, first + i, BC(ACK_REPLY));
			ck_assert_msg(e->ack_reply->acked == 1,
				      "single Ack of delivery %" PRIu64 " (%zu-th): acked %" PRIu64,
				      order[done + i], done + i + 1, e->ack_reply->acked);
			bwp_frame_free(e);
		}
		done += m;
		if (again)
			ck_assert_uint_eq(du_ack(c, id++, again, false), 0);
		if (done < n) {
			uint64_t touch = order[done + tu_rng_below(&rng, n - done)];

			du_send_touch(c, id, touch, 900 * DU_S);
			e = du_expect_reply(c, id++, BC(TOUCH_REPLY));
			ck_assert_msg(e->touch_reply->touched, "Touch of delivery %" PRIu64
				      " in flight: not touched", touch);
			bwp_frame_free(e);
		}
		e = du_stats(c, id++);
		ck_assert_msg(e->stats_reply->in_flight == n - done &&
			      e->stats_reply->acked == done,
			      "%zu of %zu acked: in_flight=%" PRIu64 " acked=%" PRIu64,
			      done, n, e->stats_reply->in_flight, e->stats_reply->acked);
		bwp_frame_free(e);
	}
	ck_assert_uint_eq(du_ack(c, id++, n, true), 0);
	e = du_stats(p, id++);
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->acked, n);
	ck_assert_uint_eq(e->stats_reply->redelivered, 0);
	bwp_frame_free(e);
	du_expect_quiet(c, 0);
	free(order);
	free(sc);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/*
 * An ack timeout with one consumer: the fire comes back to it, marked,
 * as a new delivery, no sooner than the timeout; an Ack of the old
 * delivery is accepted and completes nothing (AckReply.acked 0); an Ack
 * of the new one completes it, and it comes no more.
 */
START_TEST(test_ack_after_timeout)
{
	struct du_daemon *d = du_daemon_new();
	uint64_t to = (uint64_t)du_scale_ms(100) * DU_MS, id = 2, rx1, rx2, rx3;
	struct du_hello_opts o = du_consumer_opts(8, to);
	struct du_conn *p, *c;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "dl-timeout");
	c = du_connect(d->sock);
	e = du_hello_opts(c, "dl-timeout", &o);
	ck_assert_uint_eq(hr_of(e)->ack_timeout_ns, to);
	bwp_frame_free(e);
	schedule_one(p, id++, 1, DU_DELAY, 0);
	e = must_fire(c, &rx1);
	ck_assert_uint_eq(e->fired->delivery, 1);
	ck_assert(!e->fired->redelivered);
	bwp_frame_free(e);
	e = must_fire(c, &rx2);
	ck_assert_uint_eq(e->fired->key, 1);
	ck_assert_uint_eq(e->fired->delivery, 2);
	ck_assert_msg(e->fired->has_redelivered && e->fired->redelivered,
		      "a fire taken back by the ack timeout came back unmarked");
	bwp_frame_free(e);
	ck_assert_msg(rx2 - rx1 >= to / 2, "taken back %.1f ms after it came, ack timeout %.0f ms",
		      (double)(rx2 - rx1) / 1e6, (double)to / 1e6);
	du_note("ack timeout %.0f ms: the fire came again after %.1f ms", (double)to / 1e6,
		(double)(rx2 - rx1) / 1e6);
	ck_assert_uint_eq(du_ack(c, id++, 1, false), 0);
	e = du_stats(p, id++);
	expect_stats(e, 0, 1, 1);
	ck_assert_uint_eq(e->stats_reply->acked, 0);
	ck_assert_uint_eq(e->stats_reply->redelivered, 1);
	bwp_frame_free(e);
	e = must_fire(c, &rx3);
	ck_assert_uint_eq(e->fired->delivery, 3);
	ck_assert(e->fired->redelivered);
	bwp_frame_free(e);
	ck_assert_uint_eq(du_ack(c, id++, 3, true), 1);
	ck_assert_uint_eq(du_ack(c, id++, 2, false), 0);
	du_expect_quiet(c, (int)(2 * to / DU_MS));
	e = du_stats(p, id++);
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->acked, 1);
	ck_assert_uint_eq(e->stats_reply->redelivered, 2);
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

enum {
	AE_ZERO_ID, AE_ZERO_NOID, AE_PAST_ID, AE_PAST_NOID, AE_PAST_CUM,
	AE_NONE_SENT, AE_NO_DELIVERY, AE_PRODUCER, AE_COUNT
};

static const char *const ack_error_names[AE_COUNT] = {
	"Ack of delivery 0 with request_id",
	"Ack of delivery 0 without request_id",
	"Ack past the last delivery with request_id",
	"Ack past the last delivery without request_id",
	"cumulative Ack past the last delivery",
	"Ack on a consumer that was sent nothing",
	"Ack without delivery",
	"Ack from a producer",
};

/* Each bad Ack: BAD_REQUEST (with the Ack's request_id if it had one),
 * the connection closed, and the fires it held come back to the next
 * consumer marked redelivered. */
START_TEST(test_ack_errors)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c, *bad;
	bool holds = _i != AE_NONE_SENT && _i != AE_PRODUCER;
	bool with_id = _i != AE_ZERO_NOID && _i != AE_PAST_NOID;
	uint64_t id = 2;
	du_env *e;

	du_note("bad Ack %d: %s", _i, ack_error_names[_i]);
	du_daemon_start(d, NULL);
	p = du_open_producer(d, "dl-ackerr");
	c = du_open_consumer(d, "dl-ackerr", 16, 0);
	if (holds) {
		for (uint64_t k = 0; k < 3; k++)
			schedule_one(p, id++, k, DU_DELAY, 0);
		for (uint64_t k = 0; k < 3; k++) {
			e = must_fire(c, NULL);
			ck_assert_uint_eq(e->fired->delivery, k + 1);
			bwp_frame_free(e);
		}
	}
	bad = _i == AE_PRODUCER ? du_open_producer(d, "dl-ackerr") : c;
	switch (_i) {
	case AE_ZERO_ID:
		du_send_ack(bad, true, 77, 0, false);
		break;
	case AE_ZERO_NOID:
		du_send_ack(bad, false, 0, 0, true);
		break;
	case AE_PAST_ID:
	case AE_NONE_SENT:
	case AE_PRODUCER:
		du_send_ack(bad, true, 77, holds ? 4 : 1, false);
		break;
	case AE_PAST_NOID:
		du_send_ack(bad, false, 0, 4, false);
		break;
	case AE_PAST_CUM:
		du_send_ack(bad, true, 77, 4, true);
		break;
	case AE_NO_DELIVERY: {
		du_env env = BITWHEEL__V1__ENVELOPE__INIT;
		Bitwheel__V1__Ack a = BITWHEEL__V1__ACK__INIT;

		env.has_request_id = 1;
		env.request_id = 77;
		env.body_case = BC(ACK);
		env.ack = &a;
		du_send_env(bad, &env);
		break;
	}
	}
	du_expect_error(bad, with_id, 77, EC(BAD_REQUEST));
	du_expect_eof(bad, DU_WAIT_MS);
	du_conn_free(bad);
	if (bad != c)
		du_conn_free(c);
	bwp_frame_free(wait_stats_on(p, &id, consumers_is, 0, "consumers=0"));

	c = du_connect(d->sock);
	{
		struct du_hello_opts o = du_consumer_opts(16, 0);

		e = du_hello_opts(c, "dl-ackerr", &o);
	}
	ck_assert_msg(du_kept_fires(c) == 0, "a fire came before the HelloReply");
	ck_assert_uint_eq(hr_of(e)->queued, holds ? 3 : 0);
	bwp_frame_free(e);
	if (holds) {
		for (uint64_t k = 0; k < 3; k++) {
			e = must_fire(c, NULL);
			ck_assert_uint_eq(e->fired->key, k);
			ck_assert_uint_eq(e->fired->delivery, k + 1);
			ck_assert_msg(e->fired->has_redelivered && e->fired->redelivered,
				      "key %" PRIu64 ", held by the closed consumer, came back unmarked",
				      k);
			bwp_frame_free(e);
		}
		ck_assert_uint_eq(du_ack(c, 100, 3, true), 3);
	}
	e = du_stats(p, id++);
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->redelivered, holds ? 3 : 0);
	bwp_frame_free(e);
	du_expect_quiet(c, 20);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * window
 * ====================================================================== */

#define NWIN 50
#define WIN 4

/* Window 4, 50 fires due at once: 4 arrive and no more until an Ack; each
 * Ack lets exactly as many more come; never more than 4 unacknowledged;
 * all 50, in fire order, each once. */
START_TEST(test_window)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	struct tu_rng rng;
	struct du_sched s[NWIN];
	uint64_t outstanding[WIN + 1], t0, id = 2, last_fired_at = 0;
	bool seen[NWIN] = { false };
	size_t nout = 0, received = 0, max_out = 0;
	du_env *e;

	tu_rng_seed(&rng, test_seed("test_window"));
	du_daemon_start(d, NULL);
	p = du_open_producer(d, "dl-window");
	c = du_open_consumer(d, "dl-window", WIN, 0);
	t0 = du_now_ns();
	for (uint64_t k = 0; k < NWIN; k++)
		s[k] = (struct du_sched){ .key = k, .when = DU_DEADLINE,
					  .when_ns = t0 + 30 * DU_MS };
	schedule_all(p, &id, s, NWIN);

	/* A quiet period with no Ack: exactly the window arrives. */
	du_sleep_until(t0 + 30 * DU_MS + (uint64_t)du_scale_ms(250) * DU_MS);
	while ((e = next_fire(c, 0, NULL)) != NULL) {
		ck_assert_msg(received < WIN, "fire %zu arrived with a window of %d and no Ack",
			      received + 1, WIN);
		ck_assert_uint_eq(e->fired->delivery, received + 1);
		ck_assert(!seen[e->fired->key]);
		seen[e->fired->key] = true;
		ck_assert(e->fired->fired_at_ns >= last_fired_at);
		last_fired_at = e->fired->fired_at_ns;
		outstanding[nout++] = e->fired->delivery;
		received++;
		bwp_frame_free(e);
	}
	ck_assert_msg(received == WIN, "%zu fires arrived after 250 ms, window %d",
		      received, WIN);
	du_expect_quiet(c, du_scale_ms(100));
	e = du_stats(p, id++);
	expect_stats(e, NWIN - WIN, WIN, 1);
	bwp_frame_free(e);

	/* One Ack, one more fire. */
	du_send_ack(c, false, 0, 1, false);
	e = must_fire(c, NULL);
	ck_assert_uint_eq(e->fired->delivery, WIN + 1);
	ck_assert(!seen[e->fired->key]);
	seen[e->fired->key] = true;
	ck_assert(e->fired->fired_at_ns >= last_fired_at);
	last_fired_at = e->fired->fired_at_ns;
	bwp_frame_free(e);
	received++;
	du_expect_quiet(c, du_scale_ms(100));
	/* Outstanding now: 2, 3, 4, 5.  A cumulative Ack of 3 frees two. */
	ck_assert_uint_eq(du_ack(c, id++, 3, true), 2);
	for (int i = 0; i < 2; i++) {
		e = must_fire(c, NULL);
		ck_assert_uint_eq(e->fired->delivery, WIN + 2 + (uint64_t)i);
		ck_assert(!seen[e->fired->key]);
		seen[e->fired->key] = true;
		ck_assert(e->fired->fired_at_ns >= last_fired_at);
		last_fired_at = e->fired->fired_at_ns;
		bwp_frame_free(e);
		received++;
	}
	du_expect_quiet(c, du_scale_ms(100));
	nout = 0;
	for (uint64_t dl = 4; dl <= received; dl++)
		outstanding[nout++] = dl;

	/* The rest: whenever the window is full, ack one of the outstanding
	 * at random (out of order too); count them on this side. */
	while (received < NWIN) {
		if (nout == WIN) {
			size_t j = (size_t)tu_rng_below(&rng, nout);

			du_send_ack(c, false, 0, outstanding[j], false);
			outstanding[j] = outstanding[--nout];
		}
		e = must_fire(c, NULL);
		ck_assert_uint_eq(e->fired->delivery, received + 1);
		ck_assert(e->fired->key < NWIN && !seen[e->fired->key]);
		seen[e->fired->key] = true;
		ck_assert_msg(e->fired->fired_at_ns >= last_fired_at, "out of fire order");
		last_fired_at = e->fired->fired_at_ns;
		outstanding[nout++] = e->fired->delivery;
		received++;
		if (nout > max_out)
			max_out = nout;
		ck_assert_msg(nout <= WIN, "%zu fires unacknowledged, window %d", nout, WIN);
		/* Give the daemon the chance to break the window. */
		if (nout == WIN && received % 7 == 0)
			du_expect_quiet(c, 5);
		bwp_frame_free(e);
	}
	du_expect_quiet(c, du_scale_ms(50));
	ck_assert_uint_eq(du_ack(c, id++, NWIN, true), WIN);
	e = du_stats(p, id++);
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->acked, NWIN);
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * competing
 * ====================================================================== */

#define NCOMP 4
#define COMP_WINDOW 16
#define COMP_N1 2000
#define COMP_N2 1000
#define COMP_KEY2 100000u

struct comp_ctx {
	int phase;
	int stalled;               /* the consumer that stops acking         */
	size_t n1, n2;
	uint8_t *others;           /* per key index: acknowledged receipts   */
	uint64_t *stalled_rx;      /* first receipt by the stalled one, 0    */
	size_t done;               /* keys received by an acking consumer    */
	size_t stalled_recv, stalled_redelivered, others_redelivered;
	uint64_t max_late_fresh, min_gap;
};

static size_t comp_index(const struct comp_ctx *x, uint64_t key)
{
	if (key < x->n1)
		return (size_t)key;
	ck_assert_msg(key >= COMP_KEY2 && key < COMP_KEY2 + x->n2,
		      "unknown key %" PRIu64, key);
	return x->n1 + (size_t)(key - COMP_KEY2);
}

static void comp_fire(void *ctx, int who, const fired_t *f, uint64_t rx)
{
	struct comp_ctx *x = ctx;
	size_t i = comp_index(x, f->key);
	bool redelivered = f->has_redelivered && f->redelivered;

	if (x->phase == 1) {
		ck_assert_msg(f->key < x->n1, "phase 1: key %" PRIu64, f->key);
		ck_assert_msg(!redelivered, "key %" PRIu64 " redelivered to consumer %d "
			      "while every consumer acknowledged", f->key, who);
		ck_assert_msg(x->others[i] == 0, "key %" PRIu64 " delivered twice", f->key);
		x->others[i] = 1;
		x->done++;
		return;
	}
	ck_assert_msg(f->key >= COMP_KEY2, "phase 2: phase 1's key %" PRIu64 " again",
		      f->key);
	ck_assert_msg(x->others[i] == 0, "key %" PRIu64 " (%s) again after an "
		      "acknowledging consumer had it", f->key,
		      redelivered ? "redelivered" : "fresh");
	if (who == x->stalled) {
		if (!x->stalled_rx[i])
			x->stalled_rx[i] = rx;
		x->stalled_recv++;
		x->stalled_redelivered += redelivered;
		return;
	}
	x->others[i] = 1;
	x->done++;
	if (redelivered) {
		uint64_t gap;

		ck_assert_msg(x->stalled_rx[i] != 0, "key %" PRIu64 " came redelivered "
			      "to consumer %d, but the stalled consumer never had it",
			      f->key, who);
		gap = rx - x->stalled_rx[i];
		if (gap < x->min_gap)
			x->min_gap = gap;
		x->others_redelivered++;
	} else {
		ck_assert_msg(x->stalled_rx[i] == 0, "key %" PRIu64 " came unmarked to "
			      "consumer %d after the stalled consumer had it", f->key, who);
		if (rx - f->deadline_ns > x->max_late_fresh)
			x->max_late_fresh = rx - f->deadline_ns;
	}
}

/*
 * Four manual-ack consumers (window 16) share 2,000 fires: each fire
 * exactly once, none redelivered.  Then the fourth (ack timeout 200 ms)
 * stops acknowledging while 1,000 more fires come due: what it holds
 * comes back to the others marked redelivered, no sooner than its
 * timeout, and the others' fires stay on time meanwhile.
 */
START_TEST(test_competing)
{
	struct du_daemon *d = du_daemon_new();
	struct comp_ctx x = { 0 };
	struct sink sinks[NCOMP];
	struct du_conn *p;
	struct du_sched *s;
	struct tu_rng rng;
	uint64_t id = 2, t0, until, ack_to = (uint64_t)du_scale_ms(200) * DU_MS;
	uint64_t slack = du_margin_ns() + (uint64_t)du_scale_ms(100) * DU_MS;
	size_t n1 = bulk(COMP_N1, 200), n2 = bulk(COMP_N2, 100), min_share = SIZE_MAX;
	char share[128] = "";
	du_env *e;

	tu_rng_seed(&rng, test_seed("test_competing"));
	x.n1 = n1;
	x.n2 = n2;
	x.stalled = NCOMP - 1;
	x.min_gap = UINT64_MAX;
	x.others = calloc(n1 + n2, 1);
	x.stalled_rx = calloc(n1 + n2, sizeof(uint64_t));
	s = calloc(n1 + n2, sizeof(*s));
	ck_assert(x.others && x.stalled_rx && s);
	du_daemon_start(d, NULL);
	p = du_open_producer(d, "dl-compete");
	for (int i = 0; i < NCOMP; i++)
		sinks[i] = (struct sink){
			.c = du_open_consumer(d, "dl-compete", COMP_WINDOW,
					   i == x.stalled ? ack_to : 0),
			.ack = true,
		};

	/* Phase 1: random deadlines over 300 ms. */
	x.phase = 1;
	t0 = du_now_ns();
	for (size_t k = 0; k < n1; k++)
		s[k] = (struct du_sched){ .key = k, .when = DU_DEADLINE,
					  .when_ns = t0 + 100 * DU_MS +
						     tu_rng_below(&rng, 300 * DU_MS) };
	schedule_all(p, &id, s, n1);
	until = du_now_ns() + 2 * (uint64_t)DU_WAIT_MS * DU_MS;
	while (x.done < n1) {
		ck_assert_msg(du_now_ns() < until, "phase 1: %zu of %zu fires arrived",
			      x.done, n1);
		pump(sinks, NCOMP, 20, comp_fire, &x);
	}
	for (int i = 0; i < NCOMP; i++) {
		size_t len = strlen(share);

		snprintf(share + len, sizeof(share) - len, " %zu", sinks[i].got);
		if (sinks[i].got < min_share)
			min_share = sinks[i].got;
	}
	du_note("competing: %zu fires over %d consumers:%s", n1, NCOMP, share);
	ck_assert_msg(min_share > 0, "a consumer with credit got nothing:%s", share);
	e = wait_stats_on(p, &id, acked_is, n1, "every phase 1 fire acknowledged");
	expect_stats(e, 0, 0, NCOMP);
	ck_assert_uint_eq(e->stats_reply->redelivered, 0);
	bwp_frame_free(e);

	/* Phase 2: the last consumer reads but stops acknowledging. */
	x.phase = 2;
	sinks[x.stalled].ack = false;
	t0 = du_now_ns();
	for (size_t k = 0; k < n2; k++)
		s[k] = (struct du_sched){ .key = COMP_KEY2 + k, .when = DU_DEADLINE,
					  .when_ns = t0 + 50 * DU_MS + k * (300 * DU_MS / n2) };
	schedule_all(p, &id, s, n2);
	until = du_now_ns() + 2 * (uint64_t)DU_WAIT_MS * DU_MS;
	while (x.done < n1 + n2) {
		ck_assert_msg(du_now_ns() < until,
			      "phase 2: %zu of %zu fires reached an acknowledging consumer; "
			      "the stalled one received %zu", x.done - n1, n2, x.stalled_recv);
		pump(sinks, NCOMP, 20, comp_fire, &x);
	}
	du_note("competing: the stalled consumer received %zu (%zu of them redelivered); "
		"%zu came back to the others, the first %.1f ms after it had them "
		"(ack timeout %.0f ms); fresh fires at most %.1f ms late",
		x.stalled_recv, x.stalled_redelivered, x.others_redelivered,
		(double)x.min_gap / 1e6, (double)ack_to / 1e6,
		(double)x.max_late_fresh / 1e6);
	ck_assert_msg(x.stalled_recv >= COMP_WINDOW,
		      "the stalled consumer received only %zu fires", x.stalled_recv);
	for (size_t i = n1; i < n1 + n2; i++)
		ck_assert_msg(!x.stalled_rx[i] || x.others[i],
			      "key %zu, held by the stalled consumer, never came back",
			      COMP_KEY2 + i - n1);
	ck_assert_msg(x.others_redelivered > 0, "nothing came back from the stalled consumer");
	ck_assert_msg(x.min_gap >= ack_to / 2,
		      "a fire came back %.1f ms after the stalled consumer had it, "
		      "ack timeout %.0f ms", (double)x.min_gap / 1e6, (double)ack_to / 1e6);
	ck_assert_msg(x.max_late_fresh <= slack,
		      "the others' fires were held up: one came %.1f ms late (bound %.1f ms)",
		      (double)x.max_late_fresh / 1e6, (double)slack / 1e6);
	du_expect_quiet(sinks[x.stalled].c, 0);
	e = wait_stats_on(p, &id, acked_is, n1 + n2, "every fire acknowledged");
	expect_stats(e, 0, 0, NCOMP);
	ck_assert_msg(e->stats_reply->redelivered ==
		      x.others_redelivered + x.stalled_redelivered,
		      "Stats redelivered=%" PRIu64 ", the consumers saw %zu",
		      e->stats_reply->redelivered,
		      x.others_redelivered + x.stalled_redelivered);
	bwp_frame_free(e);
	for (int i = 0; i < NCOMP; i++)
		du_conn_free(sinks[i].c);
	du_conn_free(p);
	free(s);
	free(x.others);
	free(x.stalled_rx);
	du_daemon_free(d);
}
END_TEST

/* Three consumers with room and fires one at a time: each fire goes to
 * the next consumer after the one served last, in the order they
 * attached (PROTOCOL.md 8). */
START_TEST(test_round_robin)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c[3];
	uint64_t id = 2, t0;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "dl-rr");
	for (int i = 0; i < 3; i++)
		c[i] = du_open_consumer(d, "dl-rr", 32, 0);
	t0 = du_now_ns();
	for (uint64_t k = 0; k < 30; k++)
		schedule_one(p, id++, k, DU_DEADLINE, t0 + 30 * DU_MS + k * 2 * DU_MS);
	bwp_frame_free(wait_stats_on(p, &id, in_flight_is, 30, "30 fires in flight"));
	for (int i = 0; i < 3; i++) {
		for (uint64_t j = 0; j < 10; j++) {
			e = must_fire(c[i], NULL);
			ck_assert_msg(e->fired->key == (uint64_t)i + 3 * j,
				      "consumer %d (attached %s), fire %" PRIu64 ": key %" PRIu64
				      ", round-robin gives %" PRIu64, i,
				      i == 0 ? "first" : i == 1 ? "second" : "third", j + 1,
				      e->fired->key, (uint64_t)i + 3 * j);
			bwp_frame_free(e);
		}
		du_expect_quiet(c[i], 0);
		ck_assert_uint_eq(du_ack(c[i], 100, 10, true), 10);
	}
	for (int i = 0; i < 3; i++)
		du_conn_free(c[i]);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

#define NSTUCK 1000

struct stuck_ctx {
	uint8_t seen[NSTUCK];
	size_t count, redelivered;
	bool after_close;
};

static void stuck_fire(void *ctx, int who, const fired_t *f, uint64_t rx)
{
	struct stuck_ctx *x = ctx;

	(void)who;
	(void)rx;
	ck_assert_msg(f->key < NSTUCK && !x->seen[f->key], "key %" PRIu64 " twice", f->key);
	ck_assert_msg(payload_ok(f, BURST_PAYLOAD), "key %" PRIu64 ": payload damaged", f->key);
	x->seen[f->key] = 1;
	x->count++;
	if (f->has_redelivered && f->redelivered) {
		ck_assert_msg(x->after_close, "key %" PRIu64 " redelivered while the stuck "
			      "consumer was still there (no ack timeout)", f->key);
		x->redelivered++;
	}
}

/*
 * A consumer that never reads (window 4096; manual acks, or auto_ack) and
 * one that reads and acks, at --max-output 16384, and 1,000 fires of
 * 1,000 bytes due at once.  The stuck one is handed what its socket takes
 * and then fires up to half its output bound, is skipped from then on and
 * is not disconnected; the other gets all the rest.  When the stuck one
 * closes, its fires in flight come to the other.  check_marks: judge
 * which come back marked redelivered (PROTOCOL.md 8: those whose frame
 * had started to leave; one never written goes back unmarked) and, with
 * auto_ack, that exactly the fires written to its socket were done.
 */
static void stuck_run(bool stuck_auto, bool check_marks)
{
	struct du_daemon *d = du_daemon_new();
	struct stuck_ctx *x = calloc(1, sizeof(*x));
	struct du_hello_opts o = du_consumer_opts(4096, 0);
	struct du_conn *p, *a;
	struct sink b;
	uint64_t id = 2, t, until, last_rx;
	uint64_t held, done_by_a, written, partial, expect_marked;
	size_t part = 0;
	du_env *e;

	ck_assert_ptr_nonnull(x);
	du_daemon_start(d, "--max-output", "16384", NULL);
	p = du_open_producer(d, "dl-stuck");
	o.auto_ack = stuck_auto;
	a = du_open_opts(d, "dl-stuck", &o);
	b = (struct sink){ .c = du_open_consumer(d, "dl-stuck", 256, 0), .ack = true };
	t = du_now_ns() + 100 * DU_MS;
	for (size_t k = 0; k < NSTUCK; k += SCHED_CHUNK) {
		size_t to = k + SCHED_CHUNK < NSTUCK ? k + SCHED_CHUNK : NSTUCK;

		burst_send(p, id, k, to, t);
		for (size_t i = k; i < to; i++)
			bwp_frame_free(du_expect_reply(p, id + i, BC(SCHEDULE_REPLY)));
	}
	id += NSTUCK;

	/* Read the reading consumer until nothing is queued and nothing
	 * more comes for a while: the rest is the stuck one's. */
	until = du_now_ns() + 2 * (uint64_t)DU_WAIT_MS * DU_MS;
	last_rx = du_now_ns();
	for (;;) {
		ck_assert_msg(du_now_ns() < until, "the reading consumer got %zu fires, then stopped",
			      x->count);
		if (pump(&b, 1, 20, stuck_fire, x))
			last_rx = du_now_ns();
		if (du_now_ns() - last_rx < (uint64_t)du_scale_ms(200) * DU_MS)
			continue;
		e = du_stats(p, id++);
		if (e->stats_reply->queued == 0) {
			bwp_frame_free(e);
			break;
		}
		bwp_frame_free(e);
	}
	if (b.last_delivery)
		du_ack(b.c, id++, b.last_delivery, true);
	ck_assert_uint_eq(du_kept_fires(b.c), 0);
	e = du_stats(p, id++);
	expect_stats(e, 0, e->stats_reply->in_flight, 2);
	ck_assert_msg(e->stats_reply->clients == 3, "clients=%" PRIu64 ": the stuck consumer "
		      "was disconnected", e->stats_reply->clients);
	held = e->stats_reply->in_flight;
	done_by_a = e->stats_reply->acked - x->count;
	bwp_frame_free(e);
	ck_assert_msg(x->count + held + done_by_a == NSTUCK,
		      "reader %zu + held by the stuck one %" PRIu64 " + done by it %" PRIu64
		      " != %d", x->count, held, done_by_a, NSTUCK);
	ck_assert_msg(stuck_auto || done_by_a == 0, "%" PRIu64 " fires done without an Ack",
		      done_by_a);
	/* Round-robin while both had room, the reader alone after: at least
	 * half, whatever the socket buffers hold. */
	ck_assert_msg(x->count >= NSTUCK / 2,
		      "the reader got %zu of %d fires: the stuck one was not skipped",
		      x->count, NSTUCK);
	written = peek_written(a, &part);
	partial = part > 0;
	du_note("stuck consumer (%s): %" PRIu64 " fires written to its socket (and %zu bytes "
		"of one more), %" PRIu64 " in flight to it, %" PRIu64 " done by auto_ack; "
		"the reader got %zu", stuck_auto ? "auto_ack" : "manual acks", written, part,
		held, done_by_a, x->count);
	if (check_marks && stuck_auto)
		ck_assert_msg(done_by_a == written,
			      "auto_ack: %" PRIu64 " fires done, but %" PRIu64 " were written "
			      "to the socket", done_by_a, written);

	/* Its fires in flight come to the reader when it goes. */
	x->after_close = true;
	du_conn_free(a);
	until = du_now_ns() + 2 * (uint64_t)DU_WAIT_MS * DU_MS;
	while (x->count < NSTUCK - done_by_a) {
		ck_assert_msg(du_now_ns() < until, "after the stuck consumer left: %zu of %" PRIu64
			      " fires", x->count, NSTUCK - done_by_a);
		pump(&b, 1, 20, stuck_fire, x);
	}
	du_expect_quiet(b.c, du_scale_ms(50));
	e = wait_stats_on(p, &id, in_flight_is, 0, "every fire acknowledged");
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->acked, NSTUCK);
	bwp_frame_free(e);
	expect_marked = stuck_auto ? partial : written + partial;
	du_note("stuck consumer gone: %zu of its %" PRIu64 " fires came back marked "
		"redelivered; %" PRIu64 " had started to leave", x->redelivered, held,
		expect_marked);
	if (check_marks && x->redelivered != expect_marked) {
		/* The daemon's own account of the take-back, for the report. */
		char *log = du_daemon_log(d), *line = strstr(log, "a consumer left with");
		char what[320] = "(no \"a consumer left with\" line in the log)";

		if (line) {
			while (line > log && line[-1] != '\n')
				line--;
			snprintf(what, sizeof(what), "%.*s", (int)strcspn(line, "\n"), line);
		}
		free(log);
		ck_abort_msg("DAEMON BUG: %zu of the %" PRIu64 " fires taken back from the "
			     "closed consumer came marked redelivered, but only %" PRIu64
			     " had started to leave the daemon (%" PRIu64 " frames written, "
			     "%zu bytes of one more): PROTOCOL.md 8 says one never written "
			     "goes back unmarked; daemon log: %s", x->redelivered, held,
			     expect_marked, written, part, what);
	}
	du_conn_free(b.c);
	du_conn_free(p);
	free(x);
	du_daemon_free(d);
}

START_TEST(test_stuck_consumer)
{
	stuck_run(false, false);
}
END_TEST

/*
 * DAEMON BUG (found by this test, reported, not fixed here): state.c's
 * take_back() marks every fire it takes back redelivered, also those whose
 * frame never left the daemon's output buffer, which PROTOCOL.md 8 says go
 * back unmarked.  Both iterations fail until the daemon tells them apart.
 */
START_TEST(test_unwritten_unmarked)
{
	du_note("unwritten fires go back unmarked: stuck consumer with %s",
		_i ? "auto_ack" : "manual acks");
	stuck_run(_i == 1, true);
}
END_TEST

/* ======================================================================
 * crash
 * ====================================================================== */

#define NCRASH 200
#define CRASH_WINDOW 64

struct crash_report {
	uint64_t queued;           /* its HelloReply.queued                  */
	uint64_t nacked;
	uint64_t recv[CRASH_WINDOW];   /* keys, by delivery - 1              */
	uint64_t acked[CRASH_WINDOW];  /* deliveries it acknowledged         */
};

/* The first consumer, in its own process: take the window, acknowledge
 * some (each confirmed by an AckReply), report, and wait to be killed. */
static void crash_child(const struct du_daemon *d, uint64_t seed, int fd)
{
	struct crash_report r = { 0 };
	struct du_hello_opts o = du_consumer_opts(CRASH_WINDOW, 0);
	struct tu_rng rng;
	struct du_conn *c;
	uint64_t cum, s1, s2;
	du_env *e;

	tu_rng_seed(&rng, seed);
	c = du_connect(d->sock);
	e = du_hello_opts(c, "dl-crash", &o);
	r.queued = e->hello_reply->queued;
	bwp_frame_free(e);
	for (uint64_t i = 0; i < CRASH_WINDOW; i++) {
		e = du_expect_fire(c, DU_WAIT_MS, NULL);
		if (e->fired->delivery != i + 1)
			_exit(3);
		r.recv[i] = e->fired->key;
		bwp_frame_free(e);
	}
	cum = tu_rng_range(&rng, 5, 30);
	s1 = tu_rng_range(&rng, cum + 1, CRASH_WINDOW);
	do
		s2 = tu_rng_range(&rng, cum + 1, CRASH_WINDOW);
	while (s2 == s1);
	if (du_ack(c, 100, cum, true) != cum || du_ack(c, 101, s1, false) != 1 ||
	    du_ack(c, 102, s2, false) != 1)
		_exit(5);
	for (uint64_t dl = 1; dl <= cum; dl++)
		r.acked[r.nacked++] = dl;
	r.acked[r.nacked++] = s1;
	r.acked[r.nacked++] = s2;
	write_full(fd, &r, sizeof(r));
	for (;;)
		pause();
}

static bool in_flight_at_least(const stats_t *s, uint64_t n) { return s->in_flight >= n; }

/*
 * 200 fires queued; a consumer process takes its window of 64, acks some
 * (each confirmed), its window refills, and it is SIGKILLed.  A second
 * consumer gets every fire the first did not acknowledge, once each: first
 * those the first held, marked redelivered, then the rest, unmarked, in
 * fire order.  Acked by the first plus received by the second = all 200.
 */
START_TEST(test_consumer_killed)
{
	struct du_daemon *d = du_daemon_new();
	struct crash_report r;
	struct du_sched s[NCRASH];
	struct du_conn *p, *b;
	bool acked_key[NCRASH] = { false }, held_key[NCRASH] = { false };
	bool got[NCRASH] = { false };
	uint64_t id = 2, t0, seed = test_seed("test_consumer_killed"), last_key = 0;
	uint64_t held, nb = 0, nred = 0;
	char text[32];
	int fd, st;
	pid_t pid;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "dl-crash");
	t0 = du_now_ns();
	for (uint64_t k = 0; k < NCRASH; k++)
		s[k] = (struct du_sched){ .key = k, .when = DU_DEADLINE,
					  .when_ns = t0 + 20 * DU_MS + k * DU_MS };
	schedule_all(p, &id, s, NCRASH);
	bwp_frame_free(wait_stats_on(p, &id, queued_is, NCRASH, "every fire queued"));

	pid = du_fork_pipe(&fd);
	if (pid == 0) {
		crash_child(d, seed, fd);
		_exit(6);
	}
	if (!du_read_full(fd, &r, sizeof(r), DU_WAIT_MS)) {
		kill(pid, SIGKILL);
		st = du_wait_status(pid, DU_WAIT_MS);
		ck_abort_msg("the first consumer reported nothing (%s)",
			     du_status_text(st, text, sizeof(text)));
	}
	close(fd);
	ck_assert_uint_eq(r.queued, NCRASH);
	/* Its window refilled behind the acks: those fires were sent to it,
	 * and it never read them. */
	e = wait_stats_on(p, &id, in_flight_at_least, CRASH_WINDOW, "the window refilled");
	expect_stats(e, NCRASH - CRASH_WINDOW - r.nacked, CRASH_WINDOW, 1);
	bwp_frame_free(e);
	kill(pid, SIGKILL);
	st = du_wait_status(pid, DU_WAIT_MS);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

	for (uint64_t i = 0; i < r.nacked; i++)
		acked_key[r.recv[r.acked[i] - 1]] = true;
	for (uint64_t i = 0; i < CRASH_WINDOW; i++)
		if (!acked_key[r.recv[i]])
			held_key[r.recv[i]] = true;
	held = CRASH_WINDOW;
	e = wait_stats_on(p, &id, consumers_is, 0, "the killed consumer gone");
	expect_stats(e, NCRASH - r.nacked, 0, 0);
	ck_assert_uint_eq(e->stats_reply->redelivered, held);
	ck_assert_uint_eq(e->stats_reply->acked, r.nacked);
	bwp_frame_free(e);

	b = du_connect(d->sock);
	{
		struct du_hello_opts o = du_consumer_opts(256, 0);

		e = du_hello_opts(b, "dl-crash", &o);
	}
	ck_assert_msg(du_kept_fires(b) == 0, "a fire came before the HelloReply");
	ck_assert_uint_eq(hr_of(e)->queued, NCRASH - r.nacked);
	bwp_frame_free(e);
	while (nb < NCRASH - r.nacked) {
		e = must_fire(b, NULL);
		ck_assert_uint_eq(e->fired->delivery, nb + 1);
		ck_assert_msg(e->fired->key < NCRASH && !got[e->fired->key],
			      "key %" PRIu64 " twice", e->fired->key);
		ck_assert_msg(!acked_key[e->fired->key],
			      "key %" PRIu64 ", acknowledged by the killed consumer, came again",
			      e->fired->key);
		ck_assert_msg(nb == 0 || e->fired->key > last_key,
			      "key %" PRIu64 " after %" PRIu64 ": not in fire order",
			      e->fired->key, last_key);
		if (e->fired->redelivered) {
			ck_assert_msg(nred == nb, "a redelivered fire (key %" PRIu64
				      ") after %" PRIu64 " fresh ones", e->fired->key, nb - nred);
			nred++;
		} else {
			ck_assert_msg(!held_key[e->fired->key],
				      "key %" PRIu64 ", received by the killed consumer, "
				      "came back unmarked", e->fired->key);
		}
		got[e->fired->key] = true;
		last_key = e->fired->key;
		nb++;
		bwp_frame_free(e);
	}
	for (uint64_t k = 0; k < NCRASH; k++)
		ck_assert_msg(acked_key[k] != got[k], "key %" PRIu64 " %s", k,
			      got[k] ? "acknowledged by the first and received by the second"
				     : "lost: neither acknowledged by the first nor received by the second");
	ck_assert_uint_eq(nred, held);
	du_note("crash: the killed consumer acknowledged %" PRIu64 " and held %" PRIu64
		"; the second received %" PRIu64 " (%" PRIu64 " redelivered)",
		r.nacked, held, nb, nred);
	du_expect_quiet(b, du_scale_ms(50));
	ck_assert_uint_eq(du_ack(b, 100, nb, true), nb);
	e = du_stats(p, id++);
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->acked, NCRASH);
	bwp_frame_free(e);
	du_conn_free(b);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * issue
 * ====================================================================== */

#define NSEQ 40

/* (a) 40 producers, one after the other and each a process that exits
 * right after its ScheduleReply, while earlier timers come due; then a
 * consumer attaches and gets all 40, in order, each fired on time. */
/* Under ASan, every producer this test forks copies the sanitizer's
 * shadow mappings, and on 2 cores beside another suite that starved the
 * daemon past even the scaled margin (204 ms late, CI): the sanitizer
 * build checks the order and that nothing is early or lost; the lateness
 * is the plain build's (and valgrind's) to check. */
#ifdef __SANITIZE_ADDRESS__
#define SEQ_LATE_CHECKED 0
#else
#define SEQ_LATE_CHECKED 1
#endif

START_TEST(test_sequential_producers)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint64_t t0, res;
	du_env *e;

	du_daemon_start(d, NULL);
	t0 = du_now_ns();
	for (uint64_t k = 0; k < NSEQ; k++) {
		pid_t pid;

		du_sleep_until(t0 + k * 15 * DU_MS);
		pid = fork();
		ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
		if (pid == 0) {
			struct du_conn *pc = du_connect(d->sock);

			e = du_hello_opts(pc, "dl-seq", &du_producer_opts);
			if (e->hello_reply->role != ROLE(PRODUCER))
				_exit(2);
			schedule_one(pc, 2, k, DU_DEADLINE, t0 + 20 * DU_MS + k * 15 * DU_MS);
			_exit(0);
		}
		expect_child_ok(pid, DU_WAIT_MS, "producer");
	}
	c = du_connect(d->sock);
	{
		struct du_hello_opts o = du_consumer_opts(0, 0);

		e = du_hello_opts(c, "dl-seq", &o);
	}
	ck_assert_msg(du_kept_fires(c) == 0, "a fire came before the HelloReply");
	res = hr_of(e)->oneshot_resolution_ns;
	du_note("sequential producers: %" PRIu64 " fires queued, %" PRIu64
		" timers pending when the consumer attached",
		hr_of(e)->queued, hr_of(e)->timers);
	ck_assert_uint_eq(hr_of(e)->queued + hr_of(e)->timers, NSEQ);
	bwp_frame_free(e);
	for (uint64_t k = 0; k < NSEQ; k++) {
		const fired_t *f;

		e = must_fire(c, NULL);
		f = e->fired;
		ck_assert_msg(f->key == k, "fire %" PRIu64 ": key %" PRIu64, k + 1, f->key);
		ck_assert_uint_eq(f->delivery, k + 1);
		ck_assert(!f->redelivered);
		ck_assert_uint_eq(f->deadline_ns, t0 + 20 * DU_MS + k * 15 * DU_MS);
		ck_assert(f->fired_at_ns >= f->deadline_ns);
		ck_assert_msg(!SEQ_LATE_CHECKED ||
			      f->fired_at_ns - f->deadline_ns <= res + du_margin_ns(),
			      "key %" PRIu64 " fired %.1f ms late", k,
			      (double)(f->fired_at_ns - f->deadline_ns) / 1e6);
		bwp_frame_free(e);
	}
	ck_assert_uint_eq(du_ack(c, 2, NSEQ, true), NSEQ);
	du_expect_quiet(c, du_scale_ms(50));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

#define NPROD 8
#define PROD_N 250

struct once_ctx {
	uint8_t *seen;
	size_t n, count;
	uint64_t (*index)(uint64_t key);
};

static uint64_t prod_index(uint64_t key)
{
	return (key / 1000) * PROD_N + key % 1000;
}

static void once_fire(void *ctx, int who, const fired_t *f, uint64_t rx)
{
	struct once_ctx *x = ctx;
	uint64_t i = x->index(f->key);

	(void)who;
	(void)rx;
	ck_assert_msg(i < x->n, "unknown key %" PRIu64, f->key);
	ck_assert_msg(!x->seen[i], "key %" PRIu64 " delivered twice", f->key);
	ck_assert_msg(!f->redelivered, "key %" PRIu64 " redelivered", f->key);
	x->seen[i] = 1;
	x->count++;
}

/* (b) 8 producer processes schedule 250 timers each into one session at
 * once while a consumer is attached: every fire exactly once. */
START_TEST(test_concurrent_producers)
{
	struct du_daemon *d = du_daemon_new();
	uint64_t seed = test_seed("test_concurrent_producers"), until;
	size_t per = bulk(PROD_N, 25);
	uint8_t seen[NPROD * PROD_N] = { 0 };
	struct once_ctx x = { seen, NPROD * PROD_N, 0, prod_index };
	struct sink sink;
	pid_t pid[NPROD];

	du_daemon_start(d, NULL);
	sink = (struct sink){ .c = du_open_consumer(d, "dl-conc", 64, 0), .ack = true };
	for (int i = 0; i < NPROD; i++) {
		pid[i] = fork();
		ck_assert_msg(pid[i] >= 0, "fork: %s", strerror(errno));
		if (pid[i] == 0) {
			struct du_sched s[PROD_N];
			struct tu_rng rng;
			uint64_t id = 2;
			struct du_conn *pc = du_open_producer(d, "dl-conc");

			tu_rng_seed(&rng, seed ^ ((uint64_t)(i + 1) << 40));
			for (size_t k = 0; k < per; k++)
				s[k] = (struct du_sched){
					.key = (uint64_t)i * 1000 + k, .when = DU_DELAY,
					.when_ns = tu_rng_range(&rng, 10 * DU_MS, 300 * DU_MS) };
			schedule_all(pc, &id, s, per);
			_exit(0);
		}
	}
	until = du_now_ns() + 2 * (uint64_t)DU_WAIT_MS * DU_MS;
	while (x.count < NPROD * per) {
		ck_assert_msg(du_now_ns() < until, "%zu of %zu fires arrived", x.count,
			      NPROD * per);
		pump(&sink, 1, 20, once_fire, &x);
	}
	for (int i = 0; i < NPROD; i++)
		expect_child_ok(pid[i], DU_WAIT_MS, "producer");
	du_expect_quiet(sink.c, du_scale_ms(50));
	{
		uint64_t id = 1000;
		du_env *e = wait_stats_on(sink.c, &id, in_flight_is, 0, "every fire acked");

		expect_stats(e, 0, 0, 1);
		ck_assert_uint_eq(e->stats_reply->acked, NPROD * per);
		ck_assert_uint_eq(e->stats_reply->redelivered, 0);
		bwp_frame_free(e);
	}
	du_conn_free(sink.c);
	du_daemon_free(d);
}
END_TEST


static const struct {
	const char *what;
	bool anonymous;
	const char *max_output;    /* NULL: the default */
} bursts[] = {
	{ "named session, default limits", false, NULL },
	{ "named session, --max-output 16384", false, "16384" },
	{ "anonymous session (auto_ack), default limits", true, NULL },
	{ "anonymous session (auto_ack), --max-output 16384", true, "16384" },
};

static uint64_t ident(uint64_t key) { return key; }

static void burst_fire(void *ctx, int who, const fired_t *f, uint64_t rx)
{
	once_fire(ctx, who, f, rx);
	ck_assert_msg(payload_ok(f, BURST_PAYLOAD), "key %" PRIu64 ": payload damaged",
		      f->key);
}

/*
 * (c) 4,000 fires of 1,000 bytes at one deadline, to a consumer that
 * reads (and acks cumulatively) all along: no disconnect, all 4,000, each
 * once and intact; then the session can be attached again.  Named with
 * the default bound and with --max-output 16384 (where version 1 wedged),
 * and anonymous (auto_ack, the one connection scheduling too).
 */
START_TEST(test_burst)
{
	struct du_daemon *d = du_daemon_new();
	size_t n = bulk(NBURST, 400);
	uint8_t *seen = calloc(n, 1);
	struct once_ctx x = { seen, n, 0, ident };
	uint64_t t0, t, until, id = 2;
	const char *args[3] = { NULL };
	struct sink sink = { .ack = true };
	struct du_conn *p = NULL;
	du_env *e;

	ck_assert_ptr_nonnull(seen);
	du_note("burst %d: %s", _i, bursts[_i].what);
	if (bursts[_i].max_output) {
		args[0] = "--max-output";
		args[1] = bursts[_i].max_output;
	}
	du_daemon_startv(d, args);
	t0 = du_now_ns();
	t = t0 + (uint64_t)du_scale_ms(300) * DU_MS;
	if (!bursts[_i].anonymous) {
		sink.c = du_open_consumer(d, "dl-burst", 0, 0);
		p = du_open_producer(d, "dl-burst");
		for (size_t k = 0; k < n; k += SCHED_CHUNK) {
			size_t to = k + SCHED_CHUNK < n ? k + SCHED_CHUNK : n;

			burst_send(p, id, k, to, t);
			for (size_t i = k; i < to; i++)
				bwp_frame_free(du_expect_reply(p, id + i, BC(SCHEDULE_REPLY)));
		}
		id += n;
	} else {
		/* One connection schedules and consumes: read its fires
		 * while its replies come. */
		sink.c = du_connect(d->sock);
		e = du_hello_opts(sink.c, NULL, &no_opts);
		ck_assert(hr_of(e)->auto_ack);
		bwp_frame_free(e);
		sink.auto_ack = true;
		for (size_t k = 0; k < n; k += SCHED_CHUNK) {
			size_t to = k + SCHED_CHUNK < n ? k + SCHED_CHUNK : n;

			burst_send(sink.c, id, k, to, t);
			for (size_t i = k; i < to; i++) {
				e = du_expect_reply(sink.c, id + i, BC(SCHEDULE_REPLY));
				bwp_frame_free(e);
			}
			drain_sinks(&sink, 1, burst_fire, &x);
		}
		id += n;
	}
	du_note("burst: %zu Schedules of %d bytes took %.1f ms", n, BURST_PAYLOAD,
		(double)(du_now_ns() - t0) / 1e6);
	until = du_now_ns() + 3 * (uint64_t)DU_WAIT_MS * DU_MS;
	while (x.count < n) {
		ck_assert_msg(du_now_ns() < until, "%zu of %zu fires arrived", x.count, n);
		pump(&sink, 1, 20, burst_fire, &x);
	}
	du_note("burst: %zu fires in %.1f ms after their deadline", n,
		(double)(du_now_ns() - t) / 1e6);
	du_expect_quiet(sink.c, du_scale_ms(50));
	e = wait_stats_on(bursts[_i].anonymous ? sink.c : p, &id, acked_is, n,
			  "every fire acknowledged");
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->acked, n);
	bwp_frame_free(e);
	du_conn_free(sink.c);
	if (!bursts[_i].anonymous) {
		/* Attaching again works: a Hello gets its HelloReply. */
		struct du_conn *c2 = du_connect(d->sock);
		struct du_hello_opts o = du_consumer_opts(0, 0);

		e = du_hello_opts(c2, "dl-burst", &o);
		ck_assert(hr_of(e)->resumed);
		ck_assert_uint_eq(hr_of(e)->queued, 0);
		bwp_frame_free(e);
		du_expect_quiet(c2, 20);
		du_conn_free(c2);
		bwp_frame_free(du_stats(p, id++));
		du_conn_free(p);
	}
	du_assert_serving(d);
	free(seen);
	du_daemon_free(d);
}
END_TEST

#define NFAIR 20000

/* Schedules of keys from..to-1 at t, no payload, pipelined and answered. */
static void sched_at(struct du_conn *c, uint64_t *id, size_t from, size_t to,
		     uint64_t t)
{
	struct du_buf b = { 0 };

	for (size_t k = from; k < to; k += SCHED_CHUNK) {
		size_t end = k + SCHED_CHUNK < to ? k + SCHED_CHUNK : to;

		for (size_t i = k; i < end; i++) {
			struct du_sched sc = { .key = i, .when = DU_DEADLINE, .when_ns = t };

			du_pack_schedule(&b, *id + i - k, &sc);
		}
		du_send_buf(c, &b);
		for (size_t i = k; i < end; i++)
			bwp_frame_free(du_expect_reply(c, (*id)++, BC(SCHEDULE_REPLY)));
	}
	du_buf_free(&b);
}

/*
 * Issue 12: 20,000 timers of one session due at one instant.  The wheel
 * fires them a share per poll (its poll limit) and the daemon makes their
 * fires a chunk per loop turn; a Cancel of key 3n/4 and a replace of the
 * one before, sent as soon as the first fire arrives (the wheel has
 * likely fired them, and their fires are likely not made yet), behave as
 * for a fired timer (not pending, nothing replaced, the fire delivered)
 * or, if the wheel had not reached them, as for a pending one (cancelled,
 * replaced, never delivered): every other fire delivered once, and the
 * replacement pending after.  Another session's fire due 1 ms after the
 * instant comes within twice the margin.
 */
START_TEST(test_cancel_during_burst)
{
	struct du_daemon *d = du_daemon_new();
	size_t n = bulk(NFAIR, 2000);
	uint8_t *seen = calloc(n, 1);
	struct once_ctx x = { seen, n, 0, ident };
	struct sink sink = { .ack = true };
	struct du_conn *p, *v;
	struct du_buf b = { 0 };
	size_t ck = n * 3 / 4, rk = ck - 1, expect = n;
	struct du_sched rep = { .key = rk, .when = DU_DELAY,
				.when_ns = 3600 * DU_S, .replace = true };
	uint64_t t, id = 2, vid = 2, until, rx;
	bool cancelled, replaced;
	du_env *e;

	ck_assert_ptr_nonnull(seen);
	du_daemon_start(d, NULL);
	sink.c = du_open_consumer(d, "dl-fair", 0, 0);
	p = du_open_producer(d, "dl-fair");
	v = du_open_consumer(d, "dl-fair-victim", 0, 0);
	t = du_now_ns() + (uint64_t)du_scale_ms(500) * DU_MS;
	sched_at(p, &id, 0, n, t);
	sched_at(v, &vid, 0, 1, t + DU_MS);
	ck_assert_msg(du_now_ns() < t, "%zu Schedules outlasted the lead", n);
	until = du_now_ns() + 3 * (uint64_t)DU_WAIT_MS * DU_MS;
	while (!x.count) {
		ck_assert_msg(du_now_ns() < until, "no fire of the burst");
		pump(&sink, 1, 20, once_fire, &x);
	}
	du_pack_cancel(&b, id, ck);
	du_pack_schedule(&b, id + 1, &rep);
	du_send_buf(p, &b);
	du_buf_free(&b);
	e = du_expect_reply(p, id++, BC(CANCEL_REPLY));
	cancelled = e->cancel_reply->pending;
	bwp_frame_free(e);
	e = du_expect_reply(p, id++, BC(SCHEDULE_REPLY));
	replaced = e->schedule_reply->replaced;
	bwp_frame_free(e);
	du_note("key %zu %s, key %zu %s", ck,
		cancelled ? "cancelled before the wheel fired it" : "fired: not pending",
		rk, replaced ? "replaced before the wheel fired it" : "fired: nothing replaced");
	expect -= cancelled + replaced;
	e = du_expect_fire(v, DU_WAIT_MS, &rx);
	du_note("victim: %.2f ms late, %zu of the burst's fires read before",
		(double)(rx - t - DU_MS) / 1e6, x.count);
	/* Twice the margin: the wheel's own poll of the burst (its overflow
	 * heap) still comes in one go, 22 ms under ASan on a loaded 2-core
	 * machine; without the round-robin the fires' making adds to it. */
	if (!du_wrapped())
		ck_assert_msg(rx - (t + DU_MS) <= 2 * du_margin_ns(),
			      "the victim's fire came %.1f ms late", (double)(rx - t - DU_MS) / 1e6);
	bwp_frame_free(e);
	while (x.count < expect) {
		ck_assert_msg(du_now_ns() < until, "%zu of %zu fires arrived", x.count, expect);
		pump(&sink, 1, 20, once_fire, &x);
	}
	du_expect_quiet(sink.c, du_scale_ms(50));
	ck_assert_msg(seen[ck] == !cancelled, "key %zu: cancel said %s, fire %s", ck,
		      cancelled ? "pending" : "fired", seen[ck] ? "delivered" : "not delivered");
	ck_assert_msg(seen[rk] == !replaced, "key %zu: replace said %s, fire %s", rk,
		      replaced ? "replaced" : "fired", seen[rk] ? "delivered" : "not delivered");
	du_pack_cancel(&b, id, rk);
	du_send_buf(p, &b);
	du_buf_free(&b);
	e = du_expect_reply(p, id++, BC(CANCEL_REPLY));
	ck_assert_msg(e->cancel_reply->pending, "key %zu's replacement not pending", rk);
	bwp_frame_free(e);
	du_conn_free(sink.c);
	du_conn_free(p);
	du_conn_free(v);
	du_assert_serving(d);
	free(seen);
	du_daemon_free(d);
}
END_TEST

#define NPIPE 20000
#define PIPE_CHUNK 200
#define PIPE_FLIGHT 1000

/* n requests (Schedules of keys 0.. n-1 an hour away, or Cancels of them)
 * pipelined PIPE_CHUNK per write with at most PIPE_FLIGHT unanswered,
 * reading replies as they come: each answered, in order. */
static void pipeline(struct du_conn *c, uint64_t *id, size_t n, bool cancel)
{
	struct du_buf b = { 0 };
	uint64_t first = *id;
	size_t sent = 0, got = 0;
	uint64_t until = du_now_ns() + 3 * (uint64_t)DU_WAIT_MS * DU_MS;
	char desc[256];

	while (got < n) {
		bool room = sent < n && sent - got + PIPE_CHUNK <= PIPE_FLIGHT, waits;
		du_env *e;
		int rc;

		if (room) {
			size_t m = n - sent < PIPE_CHUNK ? n - sent : PIPE_CHUNK;

			for (size_t i = 0; i < m; i++) {
				struct du_sched s = { .key = sent + i, .when = DU_DELAY,
						      .when_ns = 3600 * DU_S };

				if (cancel)
					du_pack_cancel(&b, first + sent + i, sent + i);
				else
					du_pack_schedule(&b, first + sent + i, &s);
			}
			du_send_buf(c, &b);
			sent += m;
		}
		ck_assert_msg(du_now_ns() < until, "%zu of %zu replies after %d ms", got, n,
			      3 * DU_WAIT_MS);
		/* Take what has come; wait only when nothing more may go. */
		waits = !(sent < n && sent - got + PIPE_CHUNK <= PIPE_FLIGHT);
		rc = du_recv(c, waits ? DU_WAIT_MS : 0, &e);
		ck_assert_msg(rc != DU_TIMEOUT || !waits,
			      "no reply within %d ms after %zu of %zu (%zu sent)",
			      DU_WAIT_MS, got, n, sent);
		while (rc == DU_FRAME) {
			du_describe(e, desc, sizeof(desc));
			ck_assert_msg(e->has_request_id && e->request_id == first + got &&
				      e->body_case == (cancel ? BC(CANCEL_REPLY) :
							       BC(SCHEDULE_REPLY)),
				      "reply %zu of %zu: %s", got + 1, n, desc);
			if (cancel)
				ck_assert_msg(e->cancel_reply->pending,
					      "Cancel of key %zu: not pending", got);
			bwp_frame_free(e);
			got++;
			rc = du_recv(c, 0, &e);
		}
		ck_assert_msg(rc == DU_TIMEOUT, "after %zu of %zu replies: %s", got, n,
			      rc == DU_EOF ? "the daemon closed the connection" :
			      bwp_strerror(c->bad));
	}
	*id = first + n;
	du_buf_free(&b);
}

/* (d) 20,000 Schedules, then 20,000 Cancels, pipelined by one client at
 * the smallest --max-output the daemon accepts (4096; 4095 is refused),
 * without and with --state-dir: every reply comes, in order. */
START_TEST(test_pipelined_small_output)
{
	struct du_daemon *d = du_daemon_new();
	size_t n = bulk(NPIPE, 2000);
	char dir[160];
	const char *args[8] = { "--max-output", "4096", NULL };
	struct du_conn *c;
	uint64_t id = 2, t0;
	du_env *e;

	if (_i == 1) {
		snprintf(dir, sizeof(dir), "%s/state", d->dir);
		args[2] = "--state-dir";
		args[3] = dir;
		args[4] = "--fsync=never";
		args[5] = NULL;
	}
	du_note("pipelined at --max-output 4096, %s", _i ? "--state-dir, --fsync=never" :
		"no --state-dir");
	if (_i == 0) {
		/* 4096 is the smallest: one less is a usage error. */
		const char *argv[] = { DU_DAEMON_PATH, "--socket", d->sock,
				       "--max-output", "4095", NULL };
		struct du_result r;
		char desc[1500];

		du_run(argv, NULL, DU_WAIT_MS, &r);
		ck_assert_msg(r.status == 2 && strstr(r.err, "max-output"),
			      "--max-output 4095: %s",
			      du_result_describe(&r, desc, sizeof(desc)));
		du_result_free(&r);
	}
	du_daemon_startv(d, args);
	c = du_connect(d->sock);
	e = du_hello_opts(c, "dl-pipe", &du_producer_opts);
	ck_assert_uint_eq(hr_of(e)->limits->max_output_bytes, 4096);
	bwp_frame_free(e);
	t0 = du_now_ns();
	pipeline(c, &id, n, false);
	du_note("pipelined: %zu Schedules answered in %.1f ms", n,
		(double)(du_now_ns() - t0) / 1e6);
	e = du_stats(c, id++);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, n);
	bwp_frame_free(e);
	t0 = du_now_ns();
	pipeline(c, &id, n, true);
	du_note("pipelined: %zu Cancels answered in %.1f ms", n,
		(double)(du_now_ns() - t0) / 1e6);
	e = du_stats(c, id++);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 0);
	ck_assert_uint_eq(e->stats_reply->oneshot->cancelled, n);
	bwp_frame_free(e);
	du_conn_free(c);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * bounds
 * ====================================================================== */

/*
 * --max-timers 10: pending timers and undelivered fires (queued or in
 * flight to a consumer with window 2 that does not ack) share the bound;
 * at 10 a Schedule gets TOO_MANY_TIMERS (the connection stays), a
 * replace still works, and Acks and Cancels make room again.
 */
START_TEST(test_max_timers_backpressure)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, acked;
	du_env *e;

	du_daemon_start(d, "--max-timers", "10", NULL);
	p = du_connect(d->sock);
	e = du_hello_opts(p, "dl-bound", &du_producer_opts);
	ck_assert_uint_eq(hr_of(e)->limits->max_timers, 10);
	bwp_frame_free(e);
	c = du_open_consumer(d, "dl-bound", 2, 0);
	for (uint64_t k = 1; k <= 4; k++)
		schedule_one(p, id++, k, DU_DELAY, 3600 * DU_S);
	for (uint64_t k = 5; k <= 10; k++)
		schedule_one(p, id++, k, DU_DELAY, 0);
	/* 4 pending, 2 in flight, 4 queued. */
	e = wait_stats_on(p, &id, queued_is, 4, "queued=4");
	expect_stats(e, 4, 2, 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 4);
	bwp_frame_free(e);
	for (uint64_t i = 1; i <= 2; i++) {
		e = must_fire(c, NULL);
		ck_assert_uint_eq(e->fired->delivery, i);
		bwp_frame_free(e);
	}
	du_expect_quiet(c, du_scale_ms(50));

	schedule_refused(p, id++, 11, EC(TOO_MANY_TIMERS));
	schedule_refused(p, id++, 12, EC(TOO_MANY_TIMERS));
	{
		/* A replace adds nothing. */
		struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = 7200 * DU_S,
				      .replace = true };

		e = du_schedule(p, id++, &s);
		ck_assert(e->schedule_reply->replaced);
		bwp_frame_free(e);
	}
	/* A Cancel makes room for one. */
	ck_assert(du_cancel(p, id++, 2));
	schedule_one(p, id++, 11, DU_DELAY, 0);
	schedule_refused(p, id++, 12, EC(TOO_MANY_TIMERS));

	/* An Ack makes room for one: its fire is done. */
	ck_assert_uint_eq(du_ack(c, 100, 1, false), 1);
	schedule_one(p, id++, 12, DU_DELAY, 0);
	schedule_refused(p, id++, 13, EC(TOO_MANY_TIMERS));
	e = du_stats(p, id++);
	ck_assert_msg(e->stats_reply->queued + e->stats_reply->in_flight +
		      e->stats_reply->oneshot->pending == 10,
		      "queued %" PRIu64 " + in flight %" PRIu64 " + pending %" PRIu64 " != 10",
		      e->stats_reply->queued, e->stats_reply->in_flight,
		      e->stats_reply->oneshot->pending);
	bwp_frame_free(e);

	/* The consumer catches up: 8 fires in all (keys 5-12), then room for
	 * 7 more timers beside the 3 pending (1, 3, 4). */
	acked = 1;
	for (uint64_t i = 3; i <= 8; i++) {
		e = must_fire(c, NULL);
		ck_assert_uint_eq(e->fired->delivery, i);
		bwp_frame_free(e);
		acked += du_ack(c, 100 + i, i - 1, true);
	}
	acked += du_ack(c, 200, 8, true);
	ck_assert_uint_eq(acked, 8);
	for (uint64_t k = 20; k < 27; k++)
		schedule_one(p, id++, k, DU_DELAY, 3600 * DU_S);
	schedule_refused(p, id++, 27, EC(TOO_MANY_TIMERS));
	e = du_stats(p, id++);
	expect_stats(e, 0, 0, 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 10);
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

static bool dropped_over(const stats_t *s, uint64_t n) { return s->dropped > n; }

/*
 * --max-queued 3, a periodic timer every 10 ms and no consumer: the queue
 * holds 3 fires, the rest are dropped and counted (Stats grows); the
 * first consumer to attach sees HelloReply.dropped > 0 and the first three
 * fires, the next one to attach sees dropped 0.
 */
START_TEST(test_max_queued_periodic)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c1, *c2;
	struct du_hello_opts auto_consumer = {
		.role = ROLE(CONSUMER), .has_auto_ack = true, .auto_ack = true,
	};
	uint64_t id = 2, d1, d2, hello_dropped, last_count, since;
	/* Its leeway puts it in the 5 ms periodic lane. */
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = 10 * DU_MS,
			      .periodic = true, .period_ns = 10 * DU_MS,
			      .leeway = true, .leeway_ns = 5 * DU_MS };
	du_env *e;

	du_daemon_start(d, "--max-queued", "3", "--periodic-resolution", "5", NULL);
	p = du_connect(d->sock);
	e = du_hello_opts(p, "dl-dropq", &du_producer_opts);
	ck_assert_uint_eq(hr_of(e)->limits->max_queued, 3);
	bwp_frame_free(e);
	bwp_frame_free(du_schedule(p, id++, &s));
	du_sleep_ms((unsigned)du_scale_ms(200));
	e = wait_stats_on(p, &id, dropped_over, 4, "dropped > 4");
	expect_stats(e, 3, 0, 0);
	ck_assert_uint_eq(e->stats_reply->periodic->pending, 1);
	d1 = e->stats_reply->dropped;
	bwp_frame_free(e);
	du_sleep_ms((unsigned)du_scale_ms(60));
	e = du_stats(p, id++);
	expect_stats(e, 3, 0, 0);
	d2 = e->stats_reply->dropped;
	ck_assert_msg(d2 > d1, "dropped stayed at %" PRIu64 " while the timer fired", d1);
	bwp_frame_free(e);
	du_note("max_queued: %" PRIu64 " then %" PRIu64 " periodic fires dropped", d1, d2);

	/* auto_ack, so that the daemon alone decides how fast it drains. */
	c1 = du_connect(d->sock);
	e = du_hello_opts(c1, "dl-dropq", &auto_consumer);
	ck_assert_msg(du_kept_fires(c1) == 0, "a fire came before the HelloReply");
	hello_dropped = hr_of(e)->dropped;
	ck_assert_msg(hello_dropped >= d2, "HelloReply.dropped %" PRIu64 ", Stats said %" PRIu64,
		      hello_dropped, d2);
	ck_assert_uint_eq(hr_of(e)->queued, 3);
	bwp_frame_free(e);
	/* The queue kept the first three; the later ones were dropped. */
	for (uint64_t n = 1; n <= 3; n++) {
		e = must_fire(c1, NULL);
		ck_assert_msg(e->fired->fire_count == n, "queued fire %" PRIu64 ": fire_count %"
			      PRIu64, n, e->fired->fire_count);
		bwp_frame_free(e);
	}
	e = must_fire(c1, NULL);
	ck_assert_msg(e->fired->fire_count > 3 + d1,
		      "after the queue: fire_count %" PRIu64 ", %" PRIu64 " were dropped",
		      e->fired->fire_count, d1);
	last_count = e->fired->fire_count;
	bwp_frame_free(e);
	for (int i = 0; i < 5; i++) {
		e = must_fire(c1, NULL);
		ck_assert_uint_eq(e->fired->fire_count, last_count + 1);
		last_count = e->fired->fire_count;
		bwp_frame_free(e);
	}
	c2 = du_connect(d->sock);
	{
		struct du_hello_opts o = du_consumer_opts(4, 0);

		e = du_hello_opts(c2, "dl-dropq", &o);
	}
	/* Counted afresh since c1 attached: whatever was dropped meanwhile
	 * (a slow daemon may drop one while c1's first fires are still in
	 * flight), never what c1 was told of. */
	since = hr_of(e)->dropped;
	ck_assert_uint_eq(hr_of(e)->consumers, 2);
	bwp_frame_free(e);
	ck_assert(du_cancel(p, id++, 1));
	e = du_stats(p, id++);
	ck_assert_msg(e->stats_reply->dropped >= d2, "Stats.dropped went back");
	ck_assert_msg(hello_dropped + since <= e->stats_reply->dropped,
		      "the next attach: dropped=%" PRIu64 ", after %" PRIu64 " told to the first of %"
		      PRIu64 " in all: not counted afresh", since, hello_dropped,
		      e->stats_reply->dropped);
	ck_assert_uint_eq(e->stats_reply->periodic->pending, 0);
	bwp_frame_free(e);
	du_conn_free(c2);
	du_conn_free(c1);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* --max-queued 3: 8 oneshot fires due while no consumer is attached are
 * all kept (max_timers bounds them, not max_queued). */
START_TEST(test_oneshots_not_dropped)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, t0;
	du_env *e;

	du_daemon_start(d, "--max-queued", "3", NULL);
	p = du_open_producer(d, "dl-oneq");
	t0 = du_now_ns();
	for (uint64_t k = 1; k <= 8; k++)
		schedule_one(p, id++, k, DU_DEADLINE, t0 + 30 * DU_MS + k * 8 * DU_MS);
	du_conn_free(p);
	du_sleep_until(t0 + 30 * DU_MS + 64 * DU_MS + 50 * DU_MS);
	c = du_connect(d->sock);
	{
		struct du_hello_opts o = du_consumer_opts(0, 0);

		e = du_hello_opts(c, "dl-oneq", &o);
	}
	ck_assert_msg(du_kept_fires(c) == 0, "a fire came before the HelloReply");
	ck_assert_msg(hr_of(e)->queued + hr_of(e)->timers == 8,
		      "queued %" PRIu64 " + pending %" PRIu64 " != 8", hr_of(e)->queued,
		      hr_of(e)->timers);
	ck_assert_uint_eq(hr_of(e)->dropped, 0);
	bwp_frame_free(e);
	for (uint64_t k = 1; k <= 8; k++) {
		e = must_fire(c, NULL);
		ck_assert_msg(e->fired->key == k, "fire %" PRIu64 ": key %" PRIu64, k,
			      e->fired->key);
		bwp_frame_free(e);
	}
	ck_assert_uint_eq(du_ack(c, id++, 8, true), 8);
	e = du_stats(c, id++);
	ck_assert_uint_eq(e->stats_reply->dropped, 0);
	expect_stats(e, 0, 0, 1);
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * periodic
 * ====================================================================== */

/*
 * A periodic timer every 20 ms, and a consumer with window 1 that acks
 * each fire 100 ms after it came: the timer goes on firing (fire_count
 * keeps rising, each period its own delivery, none merged or lost), and
 * is still pending when cancelled; then every fire it made arrives.
 */
/*
 * Coalesced delivery (Hello.coalesce): 40 timers due 20 to 215 ms ahead,
 * each with a leeway of 1 s, whose windows all overlap.  They are held
 * until the earliest window's end (about 1 s after the first deadline,
 * less the finest lane's bound) and arrive together: none before the
 * last deadline, none after its own window (plus the margin), all 40 in
 * one write (Metrics.fires_coalesced, root only).  A producer's coalesce
 * is BAD_REQUEST.
 */
START_TEST(test_coalesce)
{
	enum { N = 40 };
	struct du_daemon *d = du_daemon_new();
	struct du_hello_opts co = { .role = ROLE(CONSUMER), .coalesce = true };
	struct du_hello_opts bad = { .role = ROLE(PRODUCER), .coalesce = true };
	struct du_conn *c;
	uint64_t deadline[N], last = 0, first_rx = 0, last_rx = 0, before = 0;
	du_env *e;

	du_daemon_start(d, NULL);
	expect_refused(d, "dl-co", &bad, EC(BAD_REQUEST));
	c = du_connect(d->sock);
	e = du_hello_opts(c, NULL, &co);
	ck_assert(hr_of(e)->has_coalesce && hr_of(e)->coalesce);
	bwp_frame_free(e);
	if (geteuid() == 0) {
		e = du_stats(c, 2);
		before = e->stats_reply->metrics->fires_coalesced;
		bwp_frame_free(e);
	}
	for (uint64_t k = 0; k < N; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY,
				      .when_ns = (20 + 5 * k) * DU_MS,
				      .leeway = true, .leeway_ns = DU_S };

		e = du_schedule(c, 10 + k, &s);
		deadline[k] = e->schedule_reply->deadline_ns;
		last = deadline[k] > last ? deadline[k] : last;
		bwp_frame_free(e);
	}
	for (int n = 0; n < N; n++) {
		uint64_t rx;

		e = du_expect_fire(c, 3000, &rx);
		ck_assert_uint_lt(e->fired->key, N);
		ck_assert_uint_eq(e->fired->deadline_ns, deadline[e->fired->key]);
		ck_assert_msg(rx >= last, "key %" PRIu64 " came %" PRIu64
			      " us before the last deadline: not held", e->fired->key,
			      (last - rx) / 1000);
		du_check_fire_time(e->fired, rx, DU_S);
		first_rx = n ? first_rx : rx;
		last_rx = rx;
		bwp_frame_free(e);
	}
	du_note("coalesce: %d fires due over %" PRIu64 " ms came within %" PRIu64
		" us of each other", N, (deadline[N - 1] - deadline[0]) / DU_MS,
		(last_rx - first_rx) / 1000);
	if (geteuid() == 0) {
		e = du_stats(c, 100);
		ck_assert_uint_ge(e->stats_reply->metrics->fires_coalesced - before, N - 1);
		bwp_frame_free(e);
	}
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_periodic_slow_ack)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, first = 0, count = 0, total, t0;
	/* Its leeway puts it in the 5 ms periodic lane. */
	struct du_sched s = { .key = 7, .when = DU_DELAY, .when_ns = 20 * DU_MS,
			      .periodic = true, .period_ns = 20 * DU_MS,
			      .leeway = true, .leeway_ns = 5 * DU_MS };
	du_env *e;

	du_daemon_start(d, "--periodic-resolution", "5", NULL);
	p = du_open_producer(d, "dl-periodic");
	c = du_open_consumer(d, "dl-periodic", 1, 0);
	e = du_schedule(p, id++, &s);
	first = e->schedule_reply->deadline_ns;
	bwp_frame_free(e);
	t0 = du_now_ns();
	while (du_now_ns() < t0 + (uint64_t)du_scale_ms(1000) * DU_MS) {
		e = must_fire(c, NULL);
		count++;
		ck_assert_msg(e->fired->fire_count == count, "fire %" PRIu64 ": fire_count %"
			      PRIu64, count, e->fired->fire_count);
		ck_assert_uint_eq(e->fired->delivery, count);
		ck_assert(e->fired->deadline_ns >= first &&
			  (e->fired->deadline_ns - first) % s.period_ns == 0);
		bwp_frame_free(e);
		du_expect_quiet(c, du_scale_ms(100));
		du_send_ack(c, false, 0, count, false);
	}
	e = du_stats(p, id++);
	du_note("periodic: %" PRIu64 " fires acknowledged slowly; the timer fired %" PRIu64
		" times, %" PRIu64 " queued", count, e->stats_reply->periodic->fired,
		e->stats_reply->queued);
	ck_assert_msg(e->stats_reply->periodic->fired >= 3 * count,
		      "the timer fired %" PRIu64 " times in a second of period 20 ms",
		      e->stats_reply->periodic->fired);
	ck_assert_uint_eq(e->stats_reply->periodic->pending, 1);
	ck_assert_uint_eq(e->stats_reply->dropped, 0);
	bwp_frame_free(e);
	ck_assert_msg(du_cancel(p, id++, 7), "the slow consumer stopped the timer");
	e = du_stats(p, id++);
	total = e->stats_reply->periodic->fired;
	bwp_frame_free(e);

	/* Everything it fired arrives, in order, once acks are prompt. */
	while (count < total) {
		e = must_fire(c, NULL);
		count++;
		ck_assert_uint_eq(e->fired->fire_count, count);
		ck_assert_uint_eq(e->fired->delivery, count);
		bwp_frame_free(e);
		du_send_ack(c, false, 0, count, false);
	}
	du_expect_quiet(c, du_scale_ms(60));
	e = wait_stats_on(p, &id, acked_is, total, "every fire acknowledged");
	expect_stats(e, 0, 0, 1);
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * liveness: a consumer that only waits gets every fire (issue 20)
 * ====================================================================== */

/*
 * Read from c until `replies` replies with ids first.. and `fires` fires
 * have come, each fire's key below `fires` and seen once; nothing is sent
 * meanwhile.  Fails naming what was missing when DU_WAIT_MS passes with
 * nothing new.
 */
static void take_all(struct du_conn *c, uint64_t first, size_t replies, size_t fires)
{
	bool *seen = calloc(fires ? fires : 1, sizeof(*seen));
	size_t got = 0, fired = 0;
	char desc[256];

	ck_assert_ptr_nonnull(seen);
	while (got < replies || fired < fires) {
		du_env *e;
		int rc = du_recv(c, DU_WAIT_MS, &e);

		ck_assert_msg(rc != DU_TIMEOUT, "stalled: %zu of %zu replies, %zu of %zu fires "
			      "after %d ms of waiting", got, replies, fired, fires, DU_WAIT_MS);
		ck_assert_msg(rc == DU_FRAME, "%zu of %zu fires: %s", fired, fires,
			      rc == DU_EOF ? "the daemon closed the connection" :
			      bwp_strerror(c->bad));
		du_describe(e, desc, sizeof(desc));
		if (e->body_case == BC(FIRED)) {
			ck_assert_msg(e->fired->key < fires && !seen[e->fired->key],
				      "unexpected %s", desc);
			seen[e->fired->key] = true;
			fired++;
		} else {
			ck_assert_msg(e->has_request_id && e->request_id == first + got &&
				      e->body_case == BC(SCHEDULE_REPLY), "reply %zu: %s",
				      got + 1, desc);
			got++;
		}
		bwp_frame_free(e);
	}
	free(seen);
}

/* The Python AsyncClient case of the issue: an anonymous client (auto-ack,
 * window 256) pipelines 1,000 Schedules due at once, then only reads.  All
 * 1,000 fires come; before the fix 256 did, then nothing until it sent a
 * request. */
START_TEST(test_waiting_anonymous)
{
	enum { N = 1000 };
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_buf b = { 0 };

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	bwp_frame_free(du_hello(c, NULL));
	for (uint64_t k = 0; k < N; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY, .when_ns = 0 };

		du_pack_schedule(&b, 2 + k, &s);
	}
	du_send_buf(c, &b);
	du_buf_free(&b);
	take_all(c, 2, N, N);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* A named auto-ack consumer of window 2 that never sends a thing, fed by a
 * producer: all 10 fires come (4 of 10 did). */
START_TEST(test_waiting_window2)
{
	enum { N = 10 };
	struct du_daemon *d = du_daemon_new();
	struct du_hello_opts o = { .role = ROLE(CONSUMER), .has_window = true, .window = 2,
				   .has_auto_ack = true, .auto_ack = true };
	struct du_conn *p, *c;
	uint64_t id = 2;

	du_daemon_start(d, NULL);
	c = du_open_opts(d, "dl-wait2", &o);
	p = du_open_producer(d, "dl-wait2");
	for (uint64_t k = 0; k < N; k++)
		schedule_one(p, id++, k, DU_DELAY, 5 * DU_MS);
	take_all(c, 0, 0, N);
	du_conn_free(p);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * timing of coalesced and leeway fires (issue 20)
 * ====================================================================== */

/*
 * Key 100 due at t with leeway `leeway`, key 101 due `gap` later with
 * none; key 100 must come within `bound` of its deadline (plus the
 * margin), and, with `before`, before key 101 is due.
 */
struct co_case {
	uint64_t leeway, gap, bound;
	bool before;
};

static void coalesce_pair(struct du_conn *co, struct du_conn *p, uint64_t *id,
			  const struct co_case *x)
{
	struct du_sched a = { .key = 100, .when = DU_DELAY, .when_ns = 30 * DU_MS,
			      .leeway = true, .leeway_ns = x->leeway };
	struct du_sched b = { .key = 101, .when = DU_DELAY, .when_ns = 30 * DU_MS + x->gap,
			      .leeway = true, .leeway_ns = 0 };
	uint64_t dl[2];
	du_env *e;

	e = du_schedule(p, (*id)++, &a);
	dl[0] = e->schedule_reply->deadline_ns;
	bwp_frame_free(e);
	e = du_schedule(p, (*id)++, &b);
	dl[1] = e->schedule_reply->deadline_ns;
	bwp_frame_free(e);
	for (int n = 0; n < 2; n++) {
		uint64_t rx, k;

		e = du_expect_fire(co, DU_WAIT_MS, &rx);
		k = e->fired->key;
		ck_assert(k == 100 || k == 101);
		ck_assert_uint_eq(e->fired->deadline_ns, dl[k - 100]);
		du_check_fire_time(e->fired, rx, k == 100 ? x->bound : 0);
		if (k == 100 && x->before)
			ck_assert_msg(rx < dl[1], "key 100 held %.3f ms, past key 101's deadline",
				      (double)(rx - dl[0]) / 1e6);
		bwp_frame_free(e);
	}
}

/*
 * PROTOCOL.md's coalescing rules on a real clock:
 * - a batch started by a fire with leeway 50 ms (the 1 ms lane) goes when
 *   a leeway-less fire comes due 20 ms later, not at its window's end;
 * - a fire with leeway 500 ms is in the 100 ms lane, which fires it up to
 *   a tick after its deadline: when a leeway-less fire went meanwhile, it
 *   goes at once (it came alone at t + 499 ms: a batch of its own);
 * - with a consumer attached that did not ask for coalescing, nothing is
 *   held: the tolerant fire comes within its lane's tick, before the
 *   other is due.
 */
START_TEST(test_coalesce_release)
{
	static const struct co_case finest = { 50 * DU_MS, 20 * DU_MS, 20 * DU_MS, false };
	static const struct co_case coarse = { 500 * DU_MS, 20 * DU_MS, 100 * DU_MS, false };
	const struct co_case plain = { 500 * DU_MS, (uint64_t)du_scale_ms(300) * DU_MS,
				       100 * DU_MS, true };
	struct du_daemon *d = du_daemon_new();
	struct du_hello_opts coo = { .role = ROLE(CONSUMER), .coalesce = true };
	struct du_conn *co, *p, *other;
	uint64_t id = 2;

	du_daemon_start(d, NULL);
	co = du_open_opts(d, "dl-corel", &coo);
	p = du_open_producer(d, "dl-corel");
	coalesce_pair(co, p, &id, &finest);
	coalesce_pair(co, p, &id, &coarse);
	/* A plain consumer holding a fire it never acknowledges, window 1:
	 * every later fire goes to co, and none may be held.  The two
	 * consumers take turns: one of keys 7 and 8 each. */
	other = du_open_consumer(d, "dl-corel", 1, 0);
	schedule_one(p, id++, 7, DU_DELAY, 0);
	schedule_one(p, id++, 8, DU_DELAY, 0);
	bwp_frame_free(must_fire(other, NULL));
	bwp_frame_free(must_fire(co, NULL));
	coalesce_pair(co, p, &id, &plain);
	du_conn_free(other);
	du_conn_free(p);
	du_conn_free(co);
	du_daemon_free(d);
}
END_TEST

/* 40 periodic timers, periods 100 ms to 1 s, leeway 5 ms (the 1 ms lane,
 * as their default leeways): each fire comes within 5 ms (plus the
 * margin) of its deadline, to a plain consumer and to a coalescing one
 * (held at most to its window's end).  Issue 20 saw such timers up to
 * 17 ms late at the daemon and 97 ms at the consumer; not reproduced here
 * (worst 3-5 ms), so this holds the promise on a real clock and tests/sim
 * on an injected one. */
START_TEST(test_small_leeway_periodic)
{
	enum { N = 40 };
	struct du_daemon *d = du_daemon_new();
	struct du_hello_opts o = { .role = ROLE(CONSUMER), .coalesce = _i == 1 };
	struct du_conn *c;
	struct tu_rng rng;
	uint64_t period[N], first[N], id = 2, t0, worst = 0, fires = 0;

	tu_rng_seed(&rng, test_seed("test_small_leeway_periodic"));
	du_daemon_start(d, NULL);
	c = du_open_opts(d, "dl-leeway5", &o);
	for (uint64_t k = 0; k < N; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY, .periodic = true,
				      .leeway = true, .leeway_ns = 5 * DU_MS };
		du_env *e;

		period[k] = (100 + tu_rng_below(&rng, 901)) * DU_MS;
		s.period_ns = period[k];
		s.when_ns = period[k];
		e = du_schedule(c, id++, &s);
		first[k] = e->schedule_reply->deadline_ns;
		bwp_frame_free(e);
	}
	t0 = du_now_ns();
	while (du_now_ns() < t0 + 1500 * DU_MS) {
		uint64_t rx, k, late;
		du_env *e = du_expect_fire(c, DU_WAIT_MS, &rx);

		k = e->fired->key;
		ck_assert_uint_lt(k, N);
		ck_assert((e->fired->deadline_ns - first[k]) % period[k] == 0);
		late = du_check_fire_time(e->fired, rx, 5 * DU_MS);
		worst = late > worst ? late : worst;
		fires++;
		bwp_frame_free(e);
	}
	du_note("leeway 5 ms%s: %" PRIu64 " fires, the latest %.3f ms after its deadline",
		o.coalesce ? ", coalescing" : "", fires, (double)worst / 1e6);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

static Suite *delivery_suite(void)
{
	Suite *s = suite_create("delivery");
	TCase *tc;

	tc = tcase_create("roles");
	du_tcase(tc);
	tcase_add_test(tc, test_producer_quiet);
	tcase_add_test(tc, test_shared_attach);
	tcase_add_test(tc, test_consumer_schedules);
	tcase_add_test(tc, test_hello_reply_fields);
	tcase_add_loop_test(tc, test_hello_refused, 0,
			    (int)(sizeof(refused_hellos) / sizeof(refused_hellos[0])));
	suite_add_tcase(s, tc);

	tc = tcase_create("names");
	du_tcase(tc);
	tcase_add_test(tc, test_name_nul);
	tcase_add_test(tc, test_name_bytes);
	suite_add_tcase(s, tc);

	tc = tcase_create("acks");
	du_tcase(tc);
	tcase_add_test(tc, test_delivery_numbers);
	tcase_add_test(tc, test_ack_replies);
	tcase_add_test(tc, test_ack_after_timeout);
	tcase_add_test(tc, test_single_acks_full_window);
	tcase_add_loop_test(tc, test_ack_errors, 0, AE_COUNT);
	suite_add_tcase(s, tc);

	tc = tcase_create("window");
	du_tcase(tc);
	tcase_add_test(tc, test_window);
	suite_add_tcase(s, tc);

	tc = tcase_create("competing");
	du_tcase(tc);
	tcase_add_test(tc, test_competing);
	tcase_add_test(tc, test_round_robin);
	tcase_add_test(tc, test_stuck_consumer);
	tcase_add_loop_test(tc, test_unwritten_unmarked, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("crash");
	du_tcase(tc);
	tcase_add_test(tc, test_consumer_killed);
	suite_add_tcase(s, tc);

	tc = tcase_create("issue");
	du_tcase(tc);
	tcase_add_test(tc, test_sequential_producers);
	tcase_add_test(tc, test_concurrent_producers);
	tcase_add_loop_test(tc, test_burst, 0, (int)(sizeof(bursts) / sizeof(bursts[0])));
	tcase_add_test(tc, test_cancel_during_burst);
	tcase_add_loop_test(tc, test_pipelined_small_output, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("bounds");
	du_tcase(tc);
	tcase_add_test(tc, test_max_timers_backpressure);
	tcase_add_test(tc, test_max_queued_periodic);
	tcase_add_test(tc, test_oneshots_not_dropped);
	suite_add_tcase(s, tc);

	tc = tcase_create("periodic");
	du_tcase(tc);
	tcase_add_test(tc, test_periodic_slow_ack);
	suite_add_tcase(s, tc);
	tc = tcase_create("coalesce");
	du_tcase(tc);
	tcase_add_test(tc, test_coalesce);
	tcase_add_test(tc, test_coalesce_release);
	tcase_add_loop_test(tc, test_small_leeway_periodic, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("liveness");
	du_tcase(tc);
	tcase_add_test(tc, test_waiting_anonymous);
	tcase_add_test(tc, test_waiting_window2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(delivery_suite());
}
