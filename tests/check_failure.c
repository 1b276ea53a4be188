/*
 * check_failure.c - fires that fail, end to end (issue 21): real bitwheeld
 * processes on temporary sockets, spoken to through the raw protocol
 * (tests/daemonutil.c), judged against proto/PROTOCOL.md section 6
 * (Release, Touch, SetPolicy, Kick), section 8 ("Fires that fail") and
 * section 10's limits.  Nothing is mocked.
 *
 * TCases:
 *   poison        a consumer process SIGKILLs itself whenever it receives
 *                 one key and is restarted at once (window 8, 50 ordinary
 *                 fires around the poison): the poison reaches NAME.dead
 *                 after exactly max_deliveries hand-outs (the default 20,
 *                 and 3 by SetPolicy), its Fired.deliveries 1, 2, ... on
 *                 the way; every other fire is acknowledged meanwhile, each
 *                 at deliveries 1 (only the oldest is blamed); a consumer
 *                 of NAME.dead gets it with its history (session,
 *                 deliveries = max, DISCONNECTED); Kick leaves one in
 *                 flight there alone, then brings it back at deliveries 1.
 *   release       Release with delays: not before ReleaseReply.ready_ns,
 *                 deliveries counted on, not marked redelivered, Cancel
 *                 does not stop it; delay 0 (absent or explicit) goes
 *                 behind the queued fires;
 *                 releasing at the limit dead-letters it (reason
 *                 RELEASED); an acknowledged delivery answers released =
 *                 false; delivery 0 or past the last one is BAD_REQUEST and
 *                 closes; a delay past max_release_delay_ns is BAD_REQUEST
 *                 and does not (max itself is taken); a delayed fire
 *                 survives a restart with --state-dir, not back before its
 *                 delay, its deliveries kept.
 *   touch         a consumer with ack_timeout 300 ms that touches its fire
 *                 every 150 ms keeps it past 1 s while a second consumer
 *                 waits with room; once it stops, the fire goes there no
 *                 earlier than the last TouchReply's deadline; Touch past
 *                 max_hold_ns is HOLD_LIMIT and the connection stays;
 *                 without ack timeout a Touch is answered touched with no
 *                 deadline; unknown deliveries as for Release; a fire
 *                 handed out after a touched one, or after the touched
 *                 one was acknowledged, still comes back at its own ack
 *                 timeout.
 *   policy        HelloReply.policy, SetPolicyReply and SessionInfo.policy,
 *                 fields kept when absent, "" back to the default, a custom
 *                 dead-letter session used; bad names, the session's own
 *                 name and anonymous sessions are BAD_REQUEST (connection
 *                 stays); a name too long for ".dead" has no dead-letter
 *                 session and dead-letters nothing; --max-deliveries sets
 *                 the default; the policy survives a restart; 0 is
 *                 unlimited (25 take-backs, by Release and disconnects).
 *   dead letters  a dead-letter session holding dead letters outlives
 *                 --linger 200ms while its origin expires (the history
 *                 still names it, and a new session of its name kicks
 *                 them back), and expires once they are gone; dead letters survive a restart
 *                 (SIGTERM or SIGKILL) with their history unchanged and can
 *                 be kicked after it; Kick's limit, key and more; a
 *                 dead letter released 25 times stays a dead letter, never
 *                 dead-lettered again; root's Metrics count dead_lettered,
 *                 released, touched, kicked and the deliveries histogram
 *                 (whose sum is StatsReply.acked).
 *
 * Timing: real clocks, every wait bounded; delays, ack timeouts and the
 * waits around them are scaled by BW_TEST_SLOW (du_scale_ms), and margins
 * are generous.  Metrics need root (the test says so and checks nothing
 * else otherwise).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemonutil.h"
#include "testutil.h"

#define BC(x) BITWHEEL__V1__ENVELOPE__BODY_##x
#define EC(x) BITWHEEL__V1__ERROR_CODE__##x
#define ROLE(x) BITWHEEL__V1__ROLE__##x
#define TB(x) BITWHEEL__V1__TAKE_BACK__##x

typedef Bitwheel__V1__Fired fired_t;
typedef Bitwheel__V1__Policy policy_t;

#define DEFAULT_MAX 20
#define MAX_HOLD_NS (12 * 3600 * DU_S)
#define MAX_RELEASE_DELAY_NS (7 * 24 * 3600 * DU_S)

/* ======================================================================
 * helpers
 * ====================================================================== */

static uint64_t scaled_ns(int ms)
{
	return (uint64_t)du_scale_ms(ms) * DU_MS;
}

static void schedule_key(struct du_conn *p, uint64_t id, uint64_t key, uint64_t delay_ns,
			 const char *payload)
{
	struct du_sched s = { .key = key, .when = DU_DELAY, .when_ns = delay_ns,
			      .payload = payload, .payload_len = payload ? strlen(payload) : 0 };

	bwp_frame_free(du_schedule(p, id, &s));
}

/* The next fire, which must be key's, handed out for the deliveries-th
 * time in its session; the caller frees it. */
static du_env *expect_key(struct du_conn *c, uint64_t key, uint64_t deliveries,
			  uint64_t *rx_ns)
{
	du_env *e = du_expect_fire(c, DU_WAIT_MS, rx_ns);

	ck_assert_msg(e->fired->key == key && e->fired->has_deliveries &&
		      e->fired->deliveries == deliveries,
		      "expected key %" PRIu64 " at deliveries %" PRIu64 ", got key %" PRIu64
		      " at deliveries %" PRIu64 "%s", key, deliveries, e->fired->key,
		      e->fired->deliveries, e->fired->has_deliveries ? "" : " (absent)");
	return e;
}

/* Take key's fire (deliveries as given) and return its delivery number. */
static uint64_t take_key(struct du_conn *c, uint64_t key, uint64_t deliveries)
{
	du_env *e = expect_key(c, key, deliveries, NULL);
	uint64_t dl = e->fired->delivery;

	bwp_frame_free(e);
	return dl;
}

/* Schedule key on p to fire at once, with no payload, and take its first
 * hand-out on c: its delivery number. */
static uint64_t take_new(struct du_conn *p, uint64_t *id, struct du_conn *c, uint64_t key)
{
	schedule_key(p, (*id)++, key, DU_MS, NULL);
	return take_key(c, key, 1);
}

struct rel {
	bool released, dead_lettered, has_ready;
	uint64_t deliveries, ready_ns;
};

static struct rel release_ex(struct du_conn *c, uint64_t id, uint64_t delivery,
			     bool has_delay, uint64_t delay_ns)
{
	const Bitwheel__V1__ReleaseReply *rr;
	struct rel r;
	du_env *e;

	du_send_release(c, id, delivery, has_delay, delay_ns);
	e = du_expect_reply(c, id, BC(RELEASE_REPLY));
	rr = e->release_reply;
	r = (struct rel){ rr->released, rr->dead_lettered, rr->has_ready_ns,
			  rr->deliveries, rr->ready_ns };
	bwp_frame_free(e);
	return r;
}

static struct rel release(struct du_conn *c, uint64_t id, uint64_t delivery, uint64_t delay_ns)
{
	return release_ex(c, id, delivery, delay_ns != 0, delay_ns);
}

struct touch {
	bool touched, has_deadline;
	uint64_t deadline_ns;
};

static struct touch touch(struct du_conn *c, uint64_t id, uint64_t delivery, uint64_t timeout_ns)
{
	const Bitwheel__V1__TouchReply *tr;
	struct touch t;
	du_env *e;

	du_send_touch(c, id, delivery, timeout_ns);
	e = du_expect_reply(c, id, BC(TOUCH_REPLY));
	tr = e->touch_reply;
	ck_assert(tr->has_touched);
	t = (struct touch){ tr->touched, tr->has_ack_deadline_ns, tr->ack_deadline_ns };
	bwp_frame_free(e);
	return t;
}

/* A policy as the test expects it; dead_letter NULL: absent. */
static void expect_policy(const policy_t *p, uint32_t max, const char *dead_letter,
			  bool is_explicit, const char *where)
{
	ck_assert_msg(p != NULL, "%s: no policy", where);
	ck_assert_msg(p->max_deliveries == max, "%s: max_deliveries %" PRIu32 ", expected %" PRIu32,
		      where, p->max_deliveries, max);
	ck_assert_msg(p->explicit_ == is_explicit, "%s: explicit %d", where, p->explicit_);
	if (!dead_letter) {
		ck_assert_msg(!p->has_dead_letter, "%s: dead_letter '%.*s', expected none", where,
			      (int)p->dead_letter.len, (const char *)p->dead_letter.data);
		return;
	}
	ck_assert_msg(p->has_dead_letter && p->dead_letter.len == strlen(dead_letter) &&
		      !memcmp(p->dead_letter.data, dead_letter, p->dead_letter.len),
		      "%s: dead_letter '%.*s', expected '%s'", where, (int)p->dead_letter.len,
		      (const char *)p->dead_letter.data, dead_letter);
}

/* SetPolicy and its reply's policy, checked. */
static void set_policy(struct du_conn *c, uint64_t id, bool has_max, uint32_t max,
		       const char *dead_letter, uint32_t want_max, const char *want_dl)
{
	du_env *e;

	du_send_set_policy(c, id, has_max, max, dead_letter);
	e = du_expect_reply(c, id, BC(SET_POLICY_REPLY));
	expect_policy(e->set_policy_reply->policy, want_max, want_dl, true, "SetPolicyReply");
	bwp_frame_free(e);
}

static uint64_t kick(struct du_conn *c, uint64_t id, bool has_key, uint64_t key,
		     uint32_t limit, bool *more)
{
	uint64_t n;
	du_env *e;

	du_send_kick(c, id, has_key, key, limit);
	e = du_expect_reply(c, id, BC(KICK_REPLY));
	ck_assert(e->kick_reply->has_kicked && e->kick_reply->has_more);
	n = e->kick_reply->kicked;
	if (more)
		*more = e->kick_reply->more;
	bwp_frame_free(e);
	return n;
}

/* ---- sessions as ListSessions shows them -------------------------------- */

struct sinfo {
	bool found;
	uint64_t queued, in_flight, dead_letters, delayed, dead_lettered;
	uint32_t consumers;
};

/* The ListSessions entry (root: every uid's) named name; *keep (may be
 * NULL) gets the reply when it was found (du_session_in reads it). */
static struct sinfo session_info(struct du_conn *c, uint64_t id, const char *name,
				 du_env **keep)
{
	struct sinfo si = { 0 };
	du_env *e = du_list(c, id, NULL, 0, 0);
	const Bitwheel__V1__SessionInfo *s;

	ck_assert_msg(!e->list_sessions_reply->more, "more sessions than one reply holds");
	s = du_session_in(e, name);
	if (s)
		si = (struct sinfo){ true, s->queued, s->in_flight, s->dead_letters, s->delayed,
				     s->dead_lettered, s->consumers };
	if (keep && s)
		*keep = e;
	else
		bwp_frame_free(e);
	if (keep && !s)
		*keep = NULL;
	return si;
}

/* Poll ListSessions until name's queued is n (or, found false, it is
 * gone), within DU_WAIT_MS. */
static struct sinfo await_session(struct du_conn *c, uint64_t *id, const char *name,
				  bool found, uint64_t queued)
{
	uint64_t deadline = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;

	for (;;) {
		struct sinfo si = session_info(c, (*id)++, name, NULL);

		if (si.found == found && (!found || si.queued == queued))
			return si;
		ck_assert_msg(du_now_ns() < deadline,
			      "session '%s' never %s %" PRIu64 " queued (found %d, queued %" PRIu64 ")",
			      name, found ? "showed" : "went away;", queued, si.found, si.queued);
		du_sleep_ms(5);
	}
}

/* ======================================================================
 * poison
 * ====================================================================== */

#define NPOISON 51             /* fires: 50 ordinary and the poison     */
#define POISON_KEY 26          /* keys 1..NPOISON, the poison among them */
#define POISON_WINDOW 8

/* What the consumer process reports of each fire, before it acts on it
 * (the poison) or once its Ack was answered (the others). */
struct poison_rec {
	uint64_t key, deliveries;
	uint32_t redelivered, acked;
};

/*
 * The consumer: acknowledge every fire (each Ack answered, so the daemon
 * has it before anything else happens) except the poison key, on which it
 * SIGKILLs itself - a handler that crashes on one message.  It runs until
 * killed; anything unexpected exits with a code the test reports.
 */
static void poison_consumer(const struct du_daemon *d, const char *session, int fd)
{
	struct du_hello_opts o = du_consumer_opts(POISON_WINDOW, 0);
	struct du_conn *c = du_connect(d->sock);
	uint64_t id = 10;

	bwp_frame_free(du_hello_opts(c, session, &o));
	for (;;) {
		struct poison_rec r;
		du_env *e;

		if (du_kept_fires(c) == 0) {
			int rc = du_recv(c, 1000, &e);

			if (rc == DU_TIMEOUT)
				continue;
			if (rc != DU_FRAME)
				_exit(3);
			if (e->body_case != BC(FIRED))
				_exit(4);
		} else {
			e = du_expect_fire(c, 0, NULL);
		}
		r = (struct poison_rec){ e->fired->key, e->fired->deliveries,
					 e->fired->redelivered, 0 };
		if (r.key == POISON_KEY) {
			if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
				_exit(5);
			kill(getpid(), SIGKILL);
		}
		r.acked = (uint32_t)du_ack(c, id++, e->fired->delivery, false);
		bwp_frame_free(e);
		if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(5);
	}
}

static pid_t start_poison_consumer(const struct du_daemon *d, const char *session, int *fd)
{
	pid_t pid = du_fork_pipe(fd);

	if (pid == 0) {
		poison_consumer(d, session, *fd);
		_exit(6);
	}
	return pid;
}

/*
 * _i = 0: the default policy (max_deliveries 20); 1: SetPolicy 3.  51
 * fires queued, then the crash-looping consumer, restarted each time the
 * poison kills it, until the poison has been handed out max times and the
 * 50 others acknowledged; then nothing more comes.
 */
START_TEST(test_poison)
{
	static const char name[] = "fl-poison", dead[] = "fl-poison.dead";
	const uint32_t max = _i ? 3 : DEFAULT_MAX;
	struct du_daemon *d = du_daemon_new();
	bool acked[NPOISON + 1] = { false };
	size_t nacked = 0;
	uint32_t handouts = 0;
	uint64_t id = 2, t0;
	struct du_conn *p, *q, *c;
	struct sinfo si;
	char text[64];
	int fd, st;
	pid_t pid;
	du_env *e;
	bool more;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, name);
	if (_i)
		set_policy(p, id++, true, max, NULL, max, dead);
	t0 = du_now_ns();
	for (uint64_t k = 1; k <= NPOISON; k++) {
		struct du_sched s = { .key = k, .when = DU_DEADLINE,
				      .when_ns = t0 + 20 * DU_MS + k * 1000,
				      .payload = k == POISON_KEY ? "poison" : NULL,
				      .payload_len = k == POISON_KEY ? 6 : 0 };

		bwp_frame_free(du_schedule(p, id++, &s));
	}
	await_session(p, &id, name, true, NPOISON);

	pid = start_poison_consumer(d, name, &fd);
	while (handouts < max || nacked < NPOISON - 1) {
		struct poison_rec r;

		if (!du_read_full(fd, &r, sizeof(r), DU_WAIT_MS)) {
			kill(pid, SIGKILL);
			st = du_wait_status(pid, DU_WAIT_MS);
			ck_abort_msg("the consumer reported nothing for %d ms (%s): %zu of %d ordinary fires acknowledged, the poison handed out %" PRIu32 " of %" PRIu32 " times",
				     DU_WAIT_MS, du_status_text(st, text, sizeof(text)), nacked,
				     NPOISON - 1, handouts, max);
		}
		if (r.key == POISON_KEY) {
			handouts++;
			ck_assert_msg(handouts <= max, "the poison came a %" PRIu32 "th time (max_deliveries %" PRIu32 ")",
				      handouts, max);
			ck_assert_msg(r.deliveries == handouts,
				      "the poison's hand-out %" PRIu32 " says deliveries %" PRIu64,
				      handouts, r.deliveries);
			ck_assert_msg((r.redelivered != 0) == (handouts > 1),
				      "hand-out %" PRIu32 " redelivered=%" PRIu32, handouts, r.redelivered);
			st = du_wait_status(pid, DU_WAIT_MS);
			ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
				      "the consumer ended with %s", du_status_text(st, text, sizeof(text)));
			close(fd);
			pid = start_poison_consumer(d, name, &fd);
			continue;
		}
		ck_assert_msg(r.key >= 1 && r.key <= NPOISON, "key %" PRIu64, r.key);
		ck_assert_msg(!acked[r.key], "key %" PRIu64 ", acknowledged before, came again",
			      r.key);
		ck_assert_msg(r.acked == 1, "the Ack of key %" PRIu64 " completed %" PRIu32,
			      r.key, r.acked);
		/* Fires behind the poison in the dead consumer's window were
		 * never blamed for its crashes. */
		ck_assert_msg(r.deliveries == 1, "key %" PRIu64 " acknowledged at deliveries %" PRIu64,
			      r.key, r.deliveries);
		acked[r.key] = true;
		nacked++;
	}
	/* The poison is dead-lettered: the restarted consumer gets nothing. */
	{
		struct poison_rec r;

		ck_assert_msg(!du_read_full(fd, &r, sizeof(r), du_scale_ms(500)),
			      "after %" PRIu32 " hand-outs, key %" PRIu64 " came (deliveries %" PRIu64 ")",
			      max, r.key, r.deliveries);
		ck_assert_msg(waitpid(pid, &st, WNOHANG) == 0, "the last consumer ended (%s)",
			      du_status_text(st, text, sizeof(text)));
	}
	kill(pid, SIGKILL);
	du_wait_status(pid, DU_WAIT_MS);
	close(fd);
	du_note("poison, max_deliveries %" PRIu32 ": %" PRIu32 " crashes, %zu other fires acknowledged",
		max, handouts, nacked);

	si = await_session(p, &id, dead, true, 1);
	ck_assert_uint_eq(si.dead_letters, 1);
	si = await_session(p, &id, name, true, 0);
	ck_assert_uint_eq(si.in_flight, 0);
	ck_assert_uint_eq(si.dead_lettered, 1);

	/* The dead letter, with its history. */
	q = du_open_consumer(d, dead, 4, 0);
	e = expect_key(q, POISON_KEY, 1, NULL);
	{
		const fired_t *f = e->fired;
		const Bitwheel__V1__DeadLetter *dl = f->dead_letter;
		uint64_t now = du_now_ns();

		ck_assert(f->has_payload && f->payload.len == 6 && !memcmp(f->payload.data, "poison", 6));
		ck_assert_msg(dl != NULL, "a dead letter without its history");
		ck_assert_msg(dl->has_session && dl->session.len == strlen(name) &&
			      !memcmp(dl->session.data, name, dl->session.len),
			      "dead_letter.session '%.*s'", (int)dl->session.len,
			      (const char *)dl->session.data);
		ck_assert_uint_eq(dl->deliveries, max);
		ck_assert_msg(dl->has_reason && dl->reason == TB(DISCONNECTED),
			      "dead_letter.reason %d", dl->reason);
		ck_assert_msg(t0 < dl->first_handed_ns && dl->first_handed_ns < dl->last_handed_ns &&
			      dl->last_handed_ns <= dl->dead_lettered_ns && dl->dead_lettered_ns <= now,
			      "history times: first %" PRIu64 " last %" PRIu64 " dead %" PRIu64
			      " (t0 %" PRIu64 ", now %" PRIu64 ")", dl->first_handed_ns,
			      dl->last_handed_ns, dl->dead_lettered_ns, t0, now);
	}
	bwp_frame_free(e);
	/* In flight to the dead-letter consumer: Kick leaves it there. */
	ck_assert_uint_eq(kick(p, id++, true, POISON_KEY, 0, &more), 0);
	ck_assert(!more);
	du_conn_free(q);
	await_session(p, &id, dead, true, 1);
	ck_assert_uint_eq(kick(p, id++, true, POISON_KEY + 1, 0, NULL), 0);
	ck_assert_uint_eq(kick(p, id++, false, 0, 0, &more), 1);
	ck_assert(!more);
	si = await_session(p, &id, dead, true, 0);
	ck_assert_uint_eq(si.dead_letters, 0);
	await_session(p, &id, name, true, 1);

	/* Back in its session, counted from 0 again, without history. */
	c = du_open_consumer(d, name, 4, 0);
	e = expect_key(c, POISON_KEY, 1, NULL);
	ck_assert_msg(e->fired->dead_letter == NULL, "a kicked fire kept its dead-letter history");
	ck_assert_uint_eq(du_ack(c, 100, e->fired->delivery, false), 1);
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * release
 * ====================================================================== */

/* Releases with delays of 100, 300 and 50 ms (scaled): each reply's
 * ready_ns is the delay after the request, the fire never comes back
 * before it, and comes counted on; a Cancel of its key during the delay
 * does not stop it (it is no timer), and ListSessions counts it delayed. */
START_TEST(test_release_delay)
{
	static const int delays_ms[] = { 100, 300, 50 };
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, dl, rx, deadline_ns, worst = 0;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-rel");
	c = du_open_consumer(d, "fl-rel", 4, 0);
	schedule_key(p, id++, 7, 5 * DU_MS, "seven");
	e = expect_key(c, 7, 1, NULL);
	dl = e->fired->delivery;
	deadline_ns = e->fired->deadline_ns;
	bwp_frame_free(e);
	for (size_t i = 0; i < sizeof(delays_ms) / sizeof(delays_ms[0]); i++) {
		uint64_t delay = scaled_ns(delays_ms[i]), t1, t2;
		struct rel r;
		struct sinfo si;

		t1 = du_now_ns();
		r = release(c, id++, dl, delay);
		t2 = du_now_ns();
		ck_assert(r.released && !r.dead_lettered && r.has_ready);
		ck_assert_uint_eq(r.deliveries, i + 1);
		ck_assert_msg(r.ready_ns + du_margin_ns() >= t1 + delay && r.ready_ns <= t2 + delay,
			      "ready_ns %" PRIu64 " for a delay of %" PRIu64 " asked between %" PRIu64
			      " and %" PRIu64, r.ready_ns, delay, t1, t2);
		si = session_info(p, id++, "fl-rel", NULL);
		if (du_now_ns() < r.ready_ns)
			ck_assert_msg(si.delayed == 1 && si.queued == 0 && si.in_flight == 0,
				      "during the delay: delayed %" PRIu64 " queued %" PRIu64
				      " in_flight %" PRIu64, si.delayed, si.queued, si.in_flight);
		if (i == 1)
			ck_assert_msg(!du_cancel(p, id++, 7), "Cancel found a released fire pending");
		e = expect_key(c, 7, i + 2, &rx);
		ck_assert_msg(rx >= r.ready_ns, "back %" PRIu64 " ns before ready_ns",
			      r.ready_ns - rx);
		ck_assert_msg(rx <= r.ready_ns + scaled_ns(1000),
			      "back %" PRIu64 " ms after ready_ns", (rx - r.ready_ns) / DU_MS);
		worst = rx - r.ready_ns > worst ? rx - r.ready_ns : worst;
		/* Its consumer gave it back knowingly: not marked. */
		ck_assert(!e->fired->redelivered);
		ck_assert_uint_eq(e->fired->deadline_ns, deadline_ns);
		ck_assert(e->fired->payload.len == 5 && !memcmp(e->fired->payload.data, "seven", 5));
		ck_assert_uint_gt(e->fired->delivery, dl);
		dl = e->fired->delivery;
		bwp_frame_free(e);
	}
	du_note("release: back at most %.3f ms after ready_ns", (double)worst / 1e6);
	ck_assert_uint_eq(du_ack(c, id++, dl, false), 1);
	du_expect_quiet(c, du_scale_ms(100));
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* Release without delay (_i = 0: delay_ns absent; 1: 0) goes to the
 * queue's tail: behind the 4 fires queued after it. */
START_TEST(test_release_tail)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, t0;
	struct rel r;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-tail");
	t0 = du_now_ns();
	for (uint64_t k = 1; k <= 5; k++) {
		struct du_sched s = { .key = k, .when = DU_DEADLINE,
				      .when_ns = t0 + 10 * DU_MS + k * DU_MS };

		bwp_frame_free(du_schedule(p, id++, &s));
	}
	await_session(p, &id, "fl-tail", true, 5);
	c = du_open_consumer(d, "fl-tail", 1, 0);
	r = release_ex(c, id++, take_key(c, 1, 1), _i == 1, 0);
	ck_assert(r.released && !r.dead_lettered && r.has_ready);
	ck_assert_uint_eq(r.deliveries, 1);
	for (uint64_t k = 2; k <= 5; k++)
		ck_assert_uint_eq(du_ack(c, id++, take_key(c, k, 1), false), 1);
	ck_assert_uint_eq(du_ack(c, id++, take_key(c, 1, 2), false), 1);
	du_expect_quiet(c, du_scale_ms(50));
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* max_deliveries 3 by SetPolicy: the third Release dead-letters the fire
 * (no ready_ns), with reason RELEASED; nothing comes back to the session. */
START_TEST(test_release_limit)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c, *q;
	uint64_t id = 2;
	struct rel r;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-rl");
	set_policy(p, id++, true, 3, NULL, 3, "fl-rl.dead");
	c = du_open_consumer(d, "fl-rl", 4, 0);
	schedule_key(p, id++, 9, DU_MS, NULL);
	for (uint64_t n = 1; n <= 3; n++) {
		r = release(c, id++, take_key(c, 9, n), n == 2 ? scaled_ns(20) : 0);
		ck_assert(r.released);
		ck_assert_uint_eq(r.deliveries, n);
		ck_assert_msg(r.dead_lettered == (n == 3) && r.has_ready == (n < 3),
			      "release %" PRIu64 ": dead_lettered %d, ready_ns %s", n,
			      r.dead_lettered, r.has_ready ? "present" : "absent");
	}
	du_expect_quiet(c, du_scale_ms(100));
	ck_assert_uint_eq(await_session(p, &id, "fl-rl.dead", true, 1).dead_letters, 1);
	q = du_open_consumer(d, "fl-rl.dead", 4, 0);
	e = expect_key(q, 9, 1, NULL);
	ck_assert_ptr_nonnull(e->fired->dead_letter);
	ck_assert_uint_eq(e->fired->dead_letter->deliveries, 3);
	ck_assert_int_eq(e->fired->dead_letter->reason, TB(RELEASED));
	ck_assert_uint_eq(du_ack(q, id++, e->fired->delivery, false), 1);
	bwp_frame_free(e);
	ck_assert_uint_eq(await_session(p, &id, "fl-rl.dead", true, 0).dead_letters, 0);
	du_conn_free(q);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* A delivery that was sent but is done (acknowledged, or released
 * already): released = false and touched = false; the connection stays. */
START_TEST(test_release_unknown)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, dl;
	struct rel r;
	struct touch t;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-ru");
	c = du_open_consumer(d, "fl-ru", 4, scaled_ns(10000));
	dl = take_new(p, &id, c, 1);
	ck_assert_uint_eq(du_ack(c, id++, dl, false), 1);
	r = release(c, id++, dl, 0);
	ck_assert(!r.released && !r.dead_lettered && !r.has_ready);
	r = release(c, id++, dl, scaled_ns(10));
	ck_assert(!r.released && !r.dead_lettered && !r.has_ready);
	t = touch(c, id++, dl, 0);
	ck_assert(!t.touched && !t.has_deadline);
	/* Released already. */
	dl = take_new(p, &id, c, 2);
	ck_assert(release(c, id++, dl, scaled_ns(50)).released);
	ck_assert(!release(c, id++, dl, 0).released);
	ck_assert(!touch(c, id++, dl, 0).touched);
	ck_assert_uint_eq(du_ack(c, id++, take_key(c, 2, 2), false), 1);
	bwp_frame_free(du_stats(c, id++));
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

enum { RB_ZERO, RB_PAST, RB_TOUCH_ZERO, RB_TOUCH_PAST, RB_DELAY, RB_COUNT };

/*
 * Bad Releases and Touches: delivery 0 or past the last one sent is
 * BAD_REQUEST carrying the request_id and closes (the fire comes back to
 * the next consumer); a delay past max_release_delay_ns is BAD_REQUEST
 * that leaves the connection and the fire as they were, and the maximum
 * itself is taken.
 */
START_TEST(test_release_bad)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, dl;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-rb");
	c = du_connect(d->sock);
	{
		struct du_hello_opts o = { .role = ROLE(CONSUMER), .has_auto_ack = true,
					   .ack_timeout_ns = scaled_ns(10000) };

		e = du_hello_opts(c, "fl-rb", &o);
		ck_assert_uint_eq(e->hello_reply->limits->max_release_delay_ns, MAX_RELEASE_DELAY_NS);
		ck_assert_uint_eq(e->hello_reply->limits->max_hold_ns, MAX_HOLD_NS);
		ck_assert_uint_eq(e->hello_reply->limits->default_max_deliveries, DEFAULT_MAX);
		ck_assert_uint_eq(e->hello_reply->limits->max_kick, 10000);
		bwp_frame_free(e);
	}
	dl = take_new(p, &id, c, 3);
	switch (_i) {
	case RB_ZERO:
	case RB_PAST:
		du_send_release(c, 50, _i == RB_ZERO ? 0 : dl + 1, false, 0);
		break;
	case RB_TOUCH_ZERO:
	case RB_TOUCH_PAST:
		du_send_touch(c, 50, _i == RB_TOUCH_ZERO ? 0 : dl + 1, 0);
		break;
	default: {
		struct rel r;

		du_send_release(c, 50, dl, true, MAX_RELEASE_DELAY_NS + 1);
		du_expect_error(c, true, 50, EC(BAD_REQUEST));
		/* Still in flight to c, and c still served. */
		ck_assert_uint_eq(session_info(c, id++, "fl-rb", NULL).in_flight, 1);
		r = release(c, id++, dl, MAX_RELEASE_DELAY_NS);
		ck_assert(r.released && r.has_ready);
		ck_assert_uint_ge(r.ready_ns, du_now_ns() + MAX_RELEASE_DELAY_NS - DU_S);
		ck_assert_uint_eq(session_info(c, id++, "fl-rb", NULL).delayed, 1);
		du_conn_free(c);
		du_conn_free(p);
		du_daemon_free(d);
		return;
	}
	}
	du_expect_error(c, true, 50, EC(BAD_REQUEST));
	du_expect_eof(c, DU_WAIT_MS);
	du_conn_free(c);
	/* It had reached the socket: its hand-out counts. */
	c = du_open_consumer(d, "fl-rb", 4, 0);
	e = expect_key(c, 3, 2, NULL);
	ck_assert(e->fired->redelivered);
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

static void state_dir(const struct du_daemon *d, char *out, size_t len)
{
	snprintf(out, len, "%s/state", d->dir);
}

static void start_durable(struct du_daemon *d, const char *extra)
{
	char dir[160];

	state_dir(d, dir, sizeof(dir));
	du_daemon_start(d, "--state-dir", dir, extra, (const char *)NULL);
}

/*
 * --state-dir: a fire released once at once and then with a delay of 1.5 s
 * (scaled) comes back after a restart within the delay, not before its
 * ready_ns, with its deliveries kept (3 at its third hand-out).
 */
START_TEST(test_release_restart)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, rx, delay = scaled_ns(1500);
	struct rel r;
	du_env *e;

	start_durable(d, NULL);
	p = du_open_producer(d, "fl-rr");
	c = du_open_consumer(d, "fl-rr", 4, 0);
	schedule_key(p, id++, 11, DU_MS, "eleven");
	ck_assert(release(c, id++, take_key(c, 11, 1), 0).released);
	r = release(c, id++, take_key(c, 11, 2), delay);
	ck_assert(r.released && r.has_ready);
	ck_assert_uint_eq(r.deliveries, 2);
	du_conn_free(c);
	du_conn_free(p);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	start_durable(d, NULL);
	c = du_open_consumer(d, "fl-rr", 4, 0);
	ck_assert_msg(du_now_ns() < r.ready_ns,
		      "the restart took past the delay (raise BW_TEST_SLOW)");
	ck_assert_uint_eq(session_info(c, 2, "fl-rr", NULL).delayed, 1);
	e = expect_key(c, 11, 3, &rx);
	ck_assert_msg(rx >= r.ready_ns, "back %" PRIu64 " ns before ready_ns after the restart",
		      r.ready_ns - rx);
	ck_assert(e->fired->payload.len == 6 && !memcmp(e->fired->payload.data, "eleven", 6));
	ck_assert_uint_eq(du_ack(c, 3, e->fired->delivery, false), 1);
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * touch
 * ====================================================================== */

/*
 * A consumer with ack_timeout 300 ms and window 1 touches its fire every
 * 150 ms (once with an explicit 450 ms) for 1.2 s, while a second
 * consumer with room waits: nothing reaches the second.  Each TouchReply's
 * deadline is now + the timeout.  Then it stops touching: the fire goes to
 * the second consumer, not before the last deadline, marked, deliveries 2.
 */
START_TEST(test_touch_keeps)
{
	struct du_daemon *d = du_daemon_new();
	const uint64_t timeout = scaled_ns(300);
	struct du_conn *p, *a, *b;
	uint64_t id = 2, dl, last = 0, rx, started;
	int n = 0;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-touch");
	a = du_open_consumer(d, "fl-touch", 1, timeout);
	dl = take_new(p, &id, a, 5);
	started = du_now_ns();
	b = du_open_consumer(d, "fl-touch", 4, 0);
	while (du_now_ns() - started < scaled_ns(1200)) {
		uint64_t t1, t2, want = n == 3 ? timeout * 3 / 2 : timeout;
		struct touch t;

		t1 = du_now_ns();
		t = touch(a, id++, dl, n == 3 ? want : 0);
		t2 = du_now_ns();
		ck_assert_msg(t.touched && t.has_deadline, "touch %d: touched %d, deadline %s", n,
			      t.touched, t.has_deadline ? "present" : "absent");
		ck_assert_msg(t.deadline_ns + du_margin_ns() >= t1 + want &&
			      t.deadline_ns <= t2 + want,
			      "touch %d: deadline %" PRIu64 " for %" PRIu64 " asked between %" PRIu64
			      " and %" PRIu64, n, t.deadline_ns, want, t1, t2);
		last = t.deadline_ns;
		n++;
		du_expect_quiet(b, du_scale_ms(150));
		du_expect_quiet(a, 0);
	}
	du_note("touch: held for %.0f ms with %d touches", (double)(du_now_ns() - started) / 1e6, n);
	e = expect_key(b, 5, 2, &rx);
	ck_assert(e->fired->redelivered);
	ck_assert_msg(rx >= last, "taken back %" PRIu64 " ns before the last touch's deadline",
		      last - rx);
	ck_assert_uint_eq(du_ack(b, id++, e->fired->delivery, false), 1);
	bwp_frame_free(e);
	/* a's Ack comes too late: the fire is done, and it completes nothing;
	 * its Touch finds nothing. */
	ck_assert(!touch(a, id++, dl, 0).touched);
	ck_assert_uint_eq(du_ack(a, id++, dl, false), 0);
	du_conn_free(b);
	du_conn_free(a);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* Touch past the hand-out + max_hold_ns (12 h) is HOLD_LIMIT with the
 * request_id; the connection stays, and the fire with it, its deadline
 * unchanged; just under the limit is taken. */
START_TEST(test_touch_hold_limit)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, dl, t1;
	struct touch t;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-hold");
	c = du_open_consumer(d, "fl-hold", 4, scaled_ns(1000));
	dl = take_new(p, &id, c, 1);
	du_send_touch(c, 40, dl, MAX_HOLD_NS + DU_S);
	du_expect_error(c, true, 40, EC(HOLD_LIMIT));
	du_send_touch(c, 41, dl, UINT64_MAX);
	du_expect_error(c, true, 41, EC(HOLD_LIMIT));
	ck_assert_uint_eq(session_info(c, id++, "fl-hold", NULL).in_flight, 1);
	t1 = du_now_ns();
	t = touch(c, id++, dl, MAX_HOLD_NS - 60 * DU_S);
	ck_assert(t.touched && t.has_deadline);
	ck_assert_uint_ge(t.deadline_ns, t1 + MAX_HOLD_NS - 60 * DU_S - du_margin_ns());
	/* Held past its 1 s ack timeout now. */
	du_expect_quiet(c, du_scale_ms(1500));
	ck_assert_uint_eq(du_ack(c, id++, dl, false), 1);
	/* A refused Touch leaves the deadline as it was: the fire comes back
	 * at its ack timeout (on a new connection, whose ack timer no Touch
	 * has moved). */
	du_conn_free(c);
	c = du_open_consumer(d, "fl-hold", 4, scaled_ns(1000));
	dl = take_new(p, &id, c, 2);
	t1 = du_now_ns();
	du_send_touch(c, 42, dl, MAX_HOLD_NS + DU_S);
	du_expect_error(c, true, 42, EC(HOLD_LIMIT));
	ck_assert_uint_eq(du_ack(c, id++, take_key(c, 2, 2), false), 1);
	ck_assert_uint_le(du_now_ns() - t1, scaled_ns(3000));
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/*
 * A touched fire's later deadline must not hold up the ack timeout of
 * fires handed out after it: fire A touched for 1 h, fire B handed out
 * behind it and never acknowledged comes back at B's own ack timeout
 * (1 s), while A stays.  Then A is acknowledged, and a fire C handed out
 * afterwards comes back at its 1 s too.
 */
START_TEST(test_touch_then_new_fire)
{
	struct du_daemon *d = du_daemon_new();
	const uint64_t timeout = scaled_ns(1000);
	struct du_conn *p, *c;
	uint64_t id = 2, a, t1, rx;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-tnf");
	c = du_open_consumer(d, "fl-tnf", 4, timeout);
	a = take_new(p, &id, c, 1);
	ck_assert(touch(c, id++, a, 3600 * DU_S).touched);
	schedule_key(p, id++, 2, DU_MS, NULL);
	t1 = du_now_ns();
	take_key(c, 2, 1);
	e = expect_key(c, 2, 2, &rx);
	ck_assert_uint_le(rx - t1, timeout + scaled_ns(2000));
	ck_assert_uint_eq(du_ack(c, id++, e->fired->delivery, false), 1);
	bwp_frame_free(e);
	ck_assert_uint_eq(du_ack(c, id++, a, false), 1);
	schedule_key(p, id++, 3, DU_MS, NULL);
	t1 = du_now_ns();
	take_key(c, 3, 1);
	e = expect_key(c, 3, 2, &rx);
	ck_assert_uint_le(rx - t1, timeout + scaled_ns(2000));
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* Without an ack timeout a Touch is answered touched, with no deadline
 * (whatever timeout it asks); the fire stays in flight. */
START_TEST(test_touch_no_timeout)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2, dl;
	struct touch t;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-tnt");
	c = du_open_consumer(d, "fl-tnt", 4, 0);
	dl = take_new(p, &id, c, 1);
	t = touch(c, id++, dl, 0);
	ck_assert(t.touched && !t.has_deadline);
	t = touch(c, id++, dl, DU_S);
	ck_assert(t.touched && !t.has_deadline);
	ck_assert_uint_eq(session_info(c, id++, "fl-tnt", NULL).in_flight, 1);
	ck_assert_uint_eq(du_ack(c, id++, dl, false), 1);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * policy
 * ====================================================================== */

static const policy_t *listed_policy(struct du_conn *c, uint64_t id, const char *name,
				     du_env **e)
{
	const Bitwheel__V1__SessionInfo *si;

	ck_assert(session_info(c, id, name, e).found);
	si = du_session_in(*e, name);
	return si->policy;
}

/*
 * The default policy in HelloReply; SetPolicy from a consumer, then from
 * a producer; absent fields kept, "" back to the default name; what every
 * view shows; and the custom dead-letter session is where a fire goes.
 */
START_TEST(test_policy_show)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2;
	struct rel r;
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	{
		struct du_hello_opts o = { .role = ROLE(CONSUMER), .has_auto_ack = true };

		e = du_hello_opts(c, "fl-pol", &o);
	}
	expect_policy(e->hello_reply->policy, DEFAULT_MAX, "fl-pol.dead", false, "HelloReply");
	bwp_frame_free(e);
	expect_policy(listed_policy(c, id++, "fl-pol", &e), DEFAULT_MAX, "fl-pol.dead", false,
		      "SessionInfo");
	bwp_frame_free(e);
	set_policy(c, id++, true, 5, "fl-graveyard", 5, "fl-graveyard");
	p = du_connect(d->sock);
	e = du_hello_opts(p, "fl-pol", &du_producer_opts);
	expect_policy(e->hello_reply->policy, 5, "fl-graveyard", true, "HelloReply after SetPolicy");
	bwp_frame_free(e);
	set_policy(p, id++, true, 1, NULL, 1, "fl-graveyard");
	expect_policy(listed_policy(p, id++, "fl-pol", &e), 1, "fl-graveyard", true, "SessionInfo");
	bwp_frame_free(e);
	/* In force: the first release dead-letters, to fl-graveyard. */
	schedule_key(p, id++, 4, DU_MS, NULL);
	r = release(c, id++, take_key(c, 4, 1), 0);
	ck_assert(r.released && r.dead_lettered);
	ck_assert_uint_eq(await_session(p, &id, "fl-graveyard", true, 1).dead_letters, 1);
	ck_assert(!session_info(p, id++, "fl-pol.dead", NULL).found);
	ck_assert_uint_eq(kick(p, id++, false, 0, 0, NULL), 1);
	ck_assert_uint_eq(du_ack(c, id++, take_key(c, 4, 1), false), 1);
	/* Back to the default name; max kept. */
	set_policy(p, id++, false, 0, "", 1, "fl-pol.dead");
	set_policy(p, id++, true, 0, NULL, 0, "fl-pol.dead");
	expect_policy(listed_policy(p, id++, "fl-pol", &e), 0, "fl-pol.dead", true, "SessionInfo");
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* Dead-letter names SetPolicy refuses (BAD_REQUEST, connection open,
 * policy unchanged). */
static const char *const bad_dead_letters[] = {
	"fl-bad",              /* the session's own name                  */
	"with space",
	"slash/no",
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 65 */
};

START_TEST(test_policy_bad)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *a;
	uint64_t id = 2;
	du_env *e;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-bad");
	for (size_t i = 0; i < sizeof(bad_dead_letters) / sizeof(bad_dead_letters[0]); i++) {
		du_send_set_policy(p, id, true, 2, bad_dead_letters[i]);
		du_expect_error(p, true, id++, EC(BAD_REQUEST));
	}
	/* A NUL byte inside: sent by hand, since the helper takes a string. */
	{
		du_env env = BITWHEEL__V1__ENVELOPE__INIT;
		Bitwheel__V1__SetPolicy sp = BITWHEEL__V1__SET_POLICY__INIT;

		env.has_request_id = 1;
		env.request_id = id;
		env.body_case = BC(SET_POLICY);
		env.set_policy = &sp;
		sp.has_dead_letter = 1;
		sp.dead_letter.data = (uint8_t *)"ok\0junk";
		sp.dead_letter.len = 7;
		du_send_env(p, &env);
		du_expect_error(p, true, id++, EC(BAD_REQUEST));
	}
	expect_policy(listed_policy(p, id++, "fl-bad", &e), DEFAULT_MAX, "fl-bad.dead", false,
		      "after refused SetPolicies");
	bwp_frame_free(e);
	/* An anonymous session has neither policy nor dead letters. */
	a = du_open(d, NULL);
	du_send_set_policy(a, 7, true, 3, NULL);
	du_expect_error(a, true, 7, EC(BAD_REQUEST));
	du_send_kick(a, 8, false, 0, 0);
	du_expect_error(a, true, 8, EC(BAD_REQUEST));
	bwp_frame_free(du_stats(a, 9));
	du_conn_free(a);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/*
 * A 60-byte name has no room for ".dead": its policy names no dead-letter
 * session, and a fire at the limit goes back to its queue instead; naming
 * one by SetPolicy makes it dead-letter.  --max-deliveries 2 is the
 * default in force, reported in Limits.
 */
START_TEST(test_policy_long_name)
{
	static const char name[] =
		"fl-long-0123456789012345678901234567890123456789012345678901";
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint64_t id = 2, dl;
	struct rel r;
	du_env *e;

	ck_assert_uint_eq(strlen(name), 60);
	du_daemon_start(d, "--max-deliveries", "2", NULL);
	c = du_connect(d->sock);
	{
		struct du_hello_opts o = { .role = ROLE(CONSUMER), .has_auto_ack = true };

		e = du_hello_opts(c, name, &o);
	}
	ck_assert_uint_eq(e->hello_reply->limits->default_max_deliveries, 2);
	expect_policy(e->hello_reply->policy, 2, NULL, false, "HelloReply");
	bwp_frame_free(e);
	schedule_key(c, id++, 1, DU_MS, NULL);
	ck_assert(!release(c, id++, take_key(c, 1, 1), 0).dead_lettered);
	r = release(c, id++, take_key(c, 1, 2), 0);
	ck_assert(r.released && !r.dead_lettered && r.has_ready);
	dl = take_key(c, 1, 3);
	set_policy(c, id++, false, 0, "fl-long.dead", 2, "fl-long.dead");
	r = release(c, id++, dl, 0);
	ck_assert(r.released && r.dead_lettered);
	ck_assert_uint_eq(await_session(c, &id, "fl-long.dead", true, 1).dead_letters, 1);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* The policy is journaled: after a restart with --state-dir the session
 * comes back with it. */
START_TEST(test_policy_restart)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p;
	uint64_t id = 2;
	du_env *e;

	start_durable(d, NULL);
	p = du_open_producer(d, "fl-pr");
	set_policy(p, id++, true, 4, "fl-pr-dl", 4, "fl-pr-dl");
	du_conn_free(p);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	start_durable(d, NULL);
	p = du_connect(d->sock);
	e = du_hello_opts(p, "fl-pr", &du_producer_opts);
	ck_assert_msg(e->hello_reply->resumed, "the session did not survive the restart");
	expect_policy(e->hello_reply->policy, 4, "fl-pr-dl", true, "HelloReply after the restart");
	bwp_frame_free(e);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* max_deliveries 0: a fire taken back 25 times (Releases, and every fifth
 * time its consumer's disconnection) keeps coming, counted, never dead. */
START_TEST(test_policy_unlimited)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t id = 2;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-unl");
	set_policy(p, id++, true, 0, NULL, 0, "fl-unl.dead");
	c = du_open_consumer(d, "fl-unl", 4, 0);
	schedule_key(p, id++, 3, DU_MS, NULL);
	for (uint64_t n = 1; n <= 25; n++) {
		uint64_t dl = take_key(c, 3, n);

		if (n % 5 == 0) {
			du_conn_free(c);
			c = du_open_consumer(d, "fl-unl", 4, 0);
		} else {
			struct rel r = release(c, id++, dl, 0);

			ck_assert(r.released && !r.dead_lettered);
			ck_assert_uint_eq(r.deliveries, n);
		}
	}
	ck_assert_uint_eq(du_ack(c, id++, take_key(c, 3, 26), false), 1);
	ck_assert(!session_info(p, id++, "fl-unl.dead", NULL).found);
	ck_assert_uint_eq(session_info(p, id++, "fl-unl", NULL).dead_lettered, 0);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * dead letters
 * ====================================================================== */

/*
 * --linger 200ms: a session dead-letters a fire and every connection
 * leaves.  The origin expires; its dead-letter session, holding the dead
 * letter, does not (for 3 s, 15 lingers by the daemon's own clock, which
 * a slow daemon keeps too: only the margin scales).  The letter still names its origin, and
 * a new session of that name kicks it back; then the dead-letter session
 * expires too.
 */
START_TEST(test_dead_linger)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c, *l, *q;
	uint64_t id = 2, lid = 2, t0;
	du_env *e;

	du_daemon_start(d, "--linger", "200ms", NULL);
	l = du_open(d, NULL);
	c = du_open_consumer(d, "fl-dl", 4, 0);
	du_send_set_policy(c, id, true, 1, NULL);
	bwp_frame_free(du_expect_reply(c, id++, BC(SET_POLICY_REPLY)));
	schedule_key(c, id++, 8, DU_MS, "dead");
	ck_assert(release(c, id++, take_key(c, 8, 1), 0).dead_lettered);
	du_conn_free(c);
	await_session(l, &lid, "fl-dl", false, 0);
	t0 = du_now_ns();
	while (du_now_ns() - t0 < 3000 * DU_MS + scaled_ns(200)) {
		struct sinfo si = session_info(l, lid++, "fl-dl.dead", NULL);

		ck_assert_msg(si.found, "the dead-letter session expired holding its dead letter");
		ck_assert_uint_eq(si.dead_letters, 1);
		ck_assert_uint_eq(si.queued, 1);
		du_sleep_ms((unsigned)du_scale_ms(100));
	}
	q = du_open_consumer(d, "fl-dl.dead", 4, 0);
	e = expect_key(q, 8, 1, NULL);
	ck_assert_ptr_nonnull(e->fired->dead_letter);
	ck_assert_uint_eq(e->fired->dead_letter->deliveries, 1);
	ck_assert_int_eq(e->fired->dead_letter->reason, TB(RELEASED));
	ck_assert(e->fired->payload.len == 4 && !memcmp(e->fired->payload.data, "dead", 4));
	/* Its origin has ended: the history names it all the same. */
	ck_assert_msg(e->fired->dead_letter->has_session &&
		      e->fired->dead_letter->session.len == 5 &&
		      !memcmp(e->fired->dead_letter->session.data, "fl-dl", 5),
		      "the dead letter does not name its ended origin 'fl-dl'");
	bwp_frame_free(e);
	du_conn_free(q);
	await_session(l, &lid, "fl-dl.dead", true, 1);
	c = du_open_consumer(d, "fl-dl", 4, 0);
	ck_assert_uint_eq(kick(c, id++, false, 0, 0, NULL), 1);
	e = expect_key(c, 8, 1, NULL);
	ck_assert_ptr_null(e->fired->dead_letter);
	ck_assert_uint_eq(du_ack(c, id++, e->fired->delivery, false), 1);
	bwp_frame_free(e);
	du_conn_free(c);
	await_session(l, &lid, "fl-dl.dead", false, 0);
	du_conn_free(l);
	du_daemon_free(d);
}
END_TEST

/*
 * --state-dir, max_deliveries 2: a fire whose consumer disconnects twice
 * is dead-lettered; its history, seen once from the dead-letter session
 * (not acknowledged), is the same after a restart (_i = 0: SIGTERM; 1:
 * SIGKILL), and Kick brings it back after it.
 */
START_TEST(test_dead_restart)
{
	struct du_daemon *d = du_daemon_new();
	Bitwheel__V1__DeadLetter before;
	char session[16];
	struct du_conn *p, *c, *q;
	uint64_t id = 2;
	du_env *e;

	start_durable(d, NULL);
	p = du_open_producer(d, "fl-dr");
	set_policy(p, id++, true, 2, NULL, 2, "fl-dr.dead");
	schedule_key(p, id++, 12, DU_MS, "twelve");
	for (uint64_t n = 1; n <= 2; n++) {
		c = du_open_consumer(d, "fl-dr", 4, 0);
		take_key(c, 12, n);
		du_conn_free(c);
	}
	await_session(p, &id, "fl-dr.dead", true, 1);
	q = du_open_consumer(d, "fl-dr.dead", 4, 0);
	e = expect_key(q, 12, 1, NULL);
	ck_assert_ptr_nonnull(e->fired->dead_letter);
	before = *e->fired->dead_letter;
	ck_assert(before.has_session && before.session.len == 5);
	memcpy(session, before.session.data, 5);
	session[5] = '\0';
	ck_assert_str_eq(session, "fl-dr");
	ck_assert_uint_eq(before.deliveries, 2);
	ck_assert_int_eq(before.reason, TB(DISCONNECTED));
	bwp_frame_free(e);
	du_conn_free(q);
	du_conn_free(p);
	if (_i)
		du_daemon_kill(d);
	else
		du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	start_durable(d, NULL);
	q = du_open_consumer(d, "fl-dr.dead", 4, 0);
	e = du_expect_fire(q, DU_WAIT_MS, NULL);
	{
		const Bitwheel__V1__DeadLetter *dl = e->fired->dead_letter;

		ck_assert_uint_eq(e->fired->key, 12);
		ck_assert(e->fired->payload.len == 6 && !memcmp(e->fired->payload.data, "twelve", 6));
		ck_assert_msg(dl != NULL, "the dead letter lost its history in the restart");
		ck_assert(dl->has_session && dl->session.len == 5 &&
			  !memcmp(dl->session.data, "fl-dr", 5));
		ck_assert_uint_eq(dl->deliveries, before.deliveries);
		ck_assert_int_eq(dl->reason, before.reason);
		ck_assert_uint_eq(dl->first_handed_ns, before.first_handed_ns);
		ck_assert_uint_eq(dl->last_handed_ns, before.last_handed_ns);
		ck_assert_uint_eq(dl->dead_lettered_ns, before.dead_lettered_ns);
	}
	bwp_frame_free(e);
	du_conn_free(q);
	p = du_open_producer(d, "fl-dr");
	await_session(p, &id, "fl-dr.dead", true, 1);
	ck_assert_uint_eq(kick(p, id++, true, 12, 0, NULL), 1);
	c = du_open_consumer(d, "fl-dr", 4, 0);
	e = expect_key(c, 12, 1, NULL);
	ck_assert(e->fired->dead_letter == NULL);
	ck_assert_uint_eq(du_ack(c, id++, e->fired->delivery, false), 1);
	bwp_frame_free(e);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/*
 * Three fires dead-lettered (max_deliveries 1): Kick with limit 1 moves
 * one and says more; by key the one named; then the last, without more;
 * then nothing.  A dead letter released 25 times in the dead-letter
 * session (past the default limit) stays there: dead letters are never
 * dead-lettered again.  A Kick on the dead-letter session itself (whose
 * own dead-letter session does not exist) moves nothing.
 */
START_TEST(test_kick)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c, *q;
	uint64_t id = 2, dl = 0;
	bool more;

	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-k");
	set_policy(p, id++, true, 1, NULL, 1, "fl-k.dead");
	c = du_open_consumer(d, "fl-k", 1, 0);
	for (uint64_t k = 1; k <= 3; k++) {
		schedule_key(p, id++, k, DU_MS, NULL);
		ck_assert(release(c, id++, take_key(c, k, 1), 0).dead_lettered);
	}
	ck_assert_uint_eq(await_session(p, &id, "fl-k.dead", true, 3).dead_letters, 3);
	ck_assert_uint_eq(kick(p, id++, false, 0, 1, &more), 1);
	ck_assert(more);
	ck_assert_uint_eq(du_ack(c, id++, take_key(c, 1, 1), false), 1);
	ck_assert_uint_eq(kick(p, id++, true, 3, 0, &more), 1);
	ck_assert(!more);
	ck_assert_uint_eq(du_ack(c, id++, take_key(c, 3, 1), false), 1);
	ck_assert_uint_eq(kick(p, id++, true, 3, 0, NULL), 0);

	q = du_open_consumer(d, "fl-k.dead", 1, 0);
	ck_assert_uint_eq(kick(q, id++, false, 0, 0, NULL), 0);
	for (uint64_t n = 1; n <= DEFAULT_MAX + 5; n++) {
		struct rel r = release(q, id++, take_key(q, 2, n), 0);

		ck_assert_msg(r.released && !r.dead_lettered,
			      "a dead letter released %" PRIu64 " times: dead_lettered %d", n,
			      r.dead_lettered);
	}
	dl = take_key(q, 2, DEFAULT_MAX + 6);
	ck_assert(!session_info(p, id++, "fl-k.dead.dead", NULL).found);
	ck_assert_uint_eq(du_ack(q, id++, dl, false), 1);
	ck_assert_uint_eq(await_session(p, &id, "fl-k.dead", true, 0).dead_letters, 0);
	ck_assert_uint_eq(kick(p, id++, false, 0, 0, &more), 0);
	ck_assert(!more);
	du_conn_free(q);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

/* ---- metrics --------------------------------------------------------------- */

struct counts {
	uint64_t dead_lettered, released, touched, kicked;
	uint64_t by_deliveries[4];  /* acknowledged at deliveries 1, 2, 3, more */
};

static struct counts metrics_now(struct du_conn *c, uint64_t id)
{
	du_env *e = du_stats(c, id);
	const Bitwheel__V1__Metrics *m = e->stats_reply->metrics;
	struct counts k = { 0 };

	ck_assert_msg(m != NULL, "no Metrics in root's StatsReply");
	ck_assert_msg(m->n_deliveries_bucket == m->n_deliveries_le + 1 && m->n_deliveries_le >= 3,
		      "deliveries histogram: %zu bounds, %zu buckets", m->n_deliveries_le,
		      m->n_deliveries_bucket);
	k = (struct counts){ m->dead_lettered, m->released, m->touched, m->kicked, { 0 } };
	{
		uint64_t sum = 0;

		for (size_t i = 0; i < m->n_deliveries_bucket; i++)
			sum += m->deliveries_bucket[i];
		ck_assert_msg(sum == e->stats_reply->acked,
			      "the deliveries histogram holds %" PRIu64 " fires, acked says %" PRIu64,
			      sum, e->stats_reply->acked);
	}
	/* Each value 1, 2, 3 in the first bucket whose bound holds it: the
	 * test needs each in a bucket of its own. */
	for (uint64_t v = 1; v <= 3; v++) {
		size_t i = 0;

		while (i < m->n_deliveries_le && m->deliveries_le[i] < v)
			i++;
		ck_assert_msg(i < m->n_deliveries_le && (v == 3 || m->deliveries_le[i] == v),
			      "the deliveries bounds do not set %" PRIu64 " apart", v);
		k.by_deliveries[v - 1] = m->deliveries_bucket[i];
	}
	bwp_frame_free(e);
	return k;
}

/*
 * Root's Metrics count what happened, as differences from the start:
 * key 1 acknowledged at its first hand-out; key 2 released once, touched
 * twice and acknowledged at its second; key 3 released twice at
 * max_deliveries 2 (dead-lettered), kicked back and acknowledged at 1.
 */
START_TEST(test_metrics)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	struct counts k0, k1;
	uint64_t id = 2, dl;

	if (geteuid() != 0) {
		du_note("SKIP test_metrics: Metrics are root's");
		return;
	}
	du_daemon_start(d, NULL);
	p = du_open_producer(d, "fl-m");
	set_policy(p, id++, true, 2, NULL, 2, "fl-m.dead");
	c = du_open_consumer(d, "fl-m", 4, scaled_ns(10000));
	k0 = metrics_now(p, id++);
	schedule_key(p, id++, 1, DU_MS, NULL);
	ck_assert_uint_eq(du_ack(c, id++, take_key(c, 1, 1), false), 1);
	schedule_key(p, id++, 2, DU_MS, NULL);
	ck_assert(release(c, id++, take_key(c, 2, 1), 0).released);
	dl = take_key(c, 2, 2);
	ck_assert(touch(c, id++, dl, 0).touched);
	ck_assert(touch(c, id++, dl, 2 * DU_S).touched);
	ck_assert_uint_eq(du_ack(c, id++, dl, false), 1);
	schedule_key(p, id++, 3, DU_MS, NULL);
	ck_assert(!release(c, id++, take_key(c, 3, 1), 0).dead_lettered);
	ck_assert(release(c, id++, take_key(c, 3, 2), 0).dead_lettered);
	ck_assert_uint_eq(kick(p, id++, false, 0, 0, NULL), 1);
	ck_assert_uint_eq(du_ack(c, id++, take_key(c, 3, 1), false), 1);
	k1 = metrics_now(p, id++);
	ck_assert_uint_eq(k1.released - k0.released, 3);
	ck_assert_uint_eq(k1.touched - k0.touched, 2);
	ck_assert_uint_eq(k1.dead_lettered - k0.dead_lettered, 1);
	ck_assert_uint_eq(k1.kicked - k0.kicked, 1);
	ck_assert_uint_eq(k1.by_deliveries[0] - k0.by_deliveries[0], 2);
	ck_assert_uint_eq(k1.by_deliveries[1] - k0.by_deliveries[1], 1);
	ck_assert_uint_eq(k1.by_deliveries[2] - k0.by_deliveries[2], 0);
	du_conn_free(c);
	du_conn_free(p);
	du_daemon_free(d);
}
END_TEST

static Suite *failure_suite(void)
{
	Suite *s = suite_create("failure");
	TCase *tc;

	tc = tcase_create("poison");
	du_tcase(tc);
	tcase_add_loop_test(tc, test_poison, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("release");
	du_tcase(tc);
	tcase_add_test(tc, test_release_delay);
	tcase_add_loop_test(tc, test_release_tail, 0, 2);
	tcase_add_test(tc, test_release_limit);
	tcase_add_test(tc, test_release_unknown);
	tcase_add_loop_test(tc, test_release_bad, 0, RB_COUNT);
	tcase_add_test(tc, test_release_restart);
	suite_add_tcase(s, tc);

	tc = tcase_create("touch");
	du_tcase(tc);
	tcase_add_test(tc, test_touch_keeps);
	tcase_add_test(tc, test_touch_hold_limit);
	tcase_add_test(tc, test_touch_no_timeout);
	tcase_add_test(tc, test_touch_then_new_fire);
	suite_add_tcase(s, tc);

	tc = tcase_create("policy");
	du_tcase(tc);
	tcase_add_test(tc, test_policy_show);
	tcase_add_test(tc, test_policy_bad);
	tcase_add_test(tc, test_policy_long_name);
	tcase_add_test(tc, test_policy_restart);
	tcase_add_test(tc, test_policy_unlimited);
	suite_add_tcase(s, tc);

	tc = tcase_create("dead letters");
	du_tcase(tc);
	tcase_add_test(tc, test_dead_linger);
	tcase_add_loop_test(tc, test_dead_restart, 0, 2);
	tcase_add_test(tc, test_kick);
	tcase_add_test(tc, test_metrics);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(failure_suite());
}
