/*
 * check_clock.c - wall-clock timers (Schedule.realtime_ns, daemon/clock.c)
 * on real daemons whose CLOCK_REALTIME the test steps.
 *
 * The host's clock is never touched: each daemon runs with
 * tests/fakeclock.c preloaded (du_fake_clock), which adds an offset the
 * test writes to every CLOCK_REALTIME read, and stands an inotify
 * descriptor in for the CLOCK_REALTIME timerfd the daemon arms with
 * TFD_TIMER_CANCEL_ON_SET: du_clock_step(..., tell) makes its read() fail
 * with ECANCELED, as a real step would, or (tell false) steps quietly.
 * The daemon's CLOCK_MONOTONIC is the host's.
 *
 * TCases:
 *   steps    a step forward past a deadline fires it at once, marked late,
 *            with its due_realtime_ns, never before the (fake) wall clock
 *            reaches it, while a monotonic timer beside it fires on its
 *            monotonic deadline unmarked and a later wall-clock timer
 *            stays pending; a step back delays a timer until the wall
 *            clock reaches it again; a quiet step back (not reported)
 *            does not make it early either (the check at its slot).
 *   restart  with --state-dir, across a SIGTERM and a SIGKILL while the
 *            wall clock moves on an hour: a timer whose wall time passed
 *            during the downtime fires at once, late; one due after fires
 *            at its wall time (not at the monotonic time the journal
 *            saw); ListTimers shows their wall-clock deadlines.
 *   input    realtime_ns 0, and realtime_ns with period_ns: BAD_DEADLINE.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "daemonutil.h"
#include "testutil.h"

/* The daemon's wall clock while the offset is off_ns. */
static uint64_t fake_now(int64_t off_ns)
{
	return (uint64_t)((int64_t)du_realtime_ns() + off_ns);
}

static struct du_daemon *start_fake(const char *state_dir)
{
	struct du_daemon *d = du_daemon_new();

	du_fake_clock(d);
	du_daemon_start(d, state_dir ? "--state-dir" : NULL, state_dir, (const char *)NULL);
	return d;
}

static void schedule_wall(struct du_conn *c, uint64_t id, uint64_t key,
			  uint64_t wall_ns)
{
	struct du_sched s = { .key = key, .when = DU_REALTIME, .when_ns = wall_ns };

	bwp_frame_free(du_schedule(c, id, &s));
}

/* The next fire, which must be key's; *rx_ns when it came. */
static du_env *expect_key_in(struct du_conn *c, uint64_t key, int ms,
			     uint64_t *rx_ns)
{
	du_env *f = du_expect_fire(c, ms, rx_ns);

	ck_assert_uint_eq(f->fired->key, key);
	return f;
}

static du_env *expect_key(struct du_conn *c, uint64_t key, uint64_t *rx_ns)
{
	return expect_key_in(c, key, DU_WAIT_MS, rx_ns);
}

/* A wall-clock fire's own checks: its due time as scheduled, and the
 * daemon's wall clock (off_ns) past it when it was read. */
static void check_wall_fire(const du_env *f, uint64_t wall_ns, int64_t off_ns)
{
	uint64_t at = fake_now(off_ns);

	ck_assert(f->fired->has_due_realtime_ns);
	ck_assert_uint_eq(f->fired->due_realtime_ns, wall_ns);
	ck_assert_msg(at >= wall_ns, "key %" PRIu64 " fired %.3f s early by the wall clock",
		      f->fired->key, (double)(wall_ns - at) / 1e9);
}

START_TEST(test_step_forward)
{
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	struct du_sched mono = { .key = 2, .when = DU_DELAY, .when_ns = 1500 * DU_MS };
	uint64_t wall, later, rx, stepped;
	du_env *r, *f;

	wall = fake_now(0) + 3600 * DU_S;
	later = wall + 3600 * DU_S;
	schedule_wall(c, 2, 1, wall);
	schedule_wall(c, 3, 3, later);
	r = du_schedule(c, 4, &mono);
	mono.when_ns = r->schedule_reply->deadline_ns;
	bwp_frame_free(r);
	du_expect_quiet(c, 200);
	/* An hour and a second on: key 1's deadline is a second behind. */
	stepped = du_now_ns();
	du_clock_step(d, 3601 * (int64_t)DU_S, true);
	f = expect_key(c, 1, &rx);
	ck_assert(f->fired->late);
	check_wall_fire(f, wall, 3601 * (int64_t)DU_S);
	du_note("fired %.1f ms after the step", (double)(rx - stepped) / 1e6);
	ck_assert_uint_lt(rx - stepped, du_margin_ns() + 100 * DU_MS);
	bwp_frame_free(f);
	/* The monotonic one fires on its own time, unmarked. */
	f = expect_key(c, 2, &rx);
	ck_assert(!f->fired->late);
	ck_assert(!f->fired->has_due_realtime_ns);
	ck_assert_uint_eq(f->fired->deadline_ns, mono.when_ns);
	du_check_fire_time(f->fired, rx, 2 * DU_MS);
	bwp_frame_free(f);
	/* Key 3 is still an hour away. */
	du_expect_quiet(c, 300);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_step_back)
{
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	int64_t off = -3600 * (int64_t)DU_S;
	uint64_t wall, rx, told;
	du_env *f;

	wall = fake_now(0) + 1500 * DU_MS;
	schedule_wall(c, 2, 1, wall);
	du_clock_step(d, off, true);
	/* Without the re-placing it would fire 1.5 s on. */
	du_expect_quiet(c, 2500);
	/* The wall clock back to a second before the deadline. */
	off = (int64_t)(wall - DU_S) - (int64_t)du_realtime_ns();
	told = du_now_ns();
	du_clock_step(d, off, true);
	f = expect_key(c, 1, &rx);
	check_wall_fire(f, wall, off);
	ck_assert(!f->fired->late);
	du_note("fired %.1f ms after a step to 1 s before it",
		(double)(rx - told) / 1e6);
	ck_assert_uint_ge(rx - told, 900 * DU_MS);
	bwp_frame_free(f);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* A step the daemon was not told of: the wheel's slot comes due at the
 * old offset, and the check there places it again instead of firing. */
START_TEST(test_quiet_step_back)
{
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	int64_t off = -3600 * (int64_t)DU_S;
	uint64_t wall, rx, told;
	du_env *f;

	wall = fake_now(0) + 1000 * DU_MS;
	schedule_wall(c, 2, 1, wall);
	du_clock_step(d, off, false);
	du_expect_quiet(c, 2500);
	/* Now told of a step forward past it: at once, late. */
	told = du_now_ns();
	du_clock_step(d, 0, true);
	f = expect_key(c, 1, &rx);
	check_wall_fire(f, wall, 0);
	ck_assert(f->fired->late);
	ck_assert_uint_lt(rx - told, du_margin_ns() + 100 * DU_MS);
	bwp_frame_free(f);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* The wall-clock deadline of key in a ListTimersReply, or 0. */
static uint64_t listed_wall(const du_env *e, uint64_t key)
{
	const Bitwheel__V1__ListTimersReply *r = e->list_timers_reply;

	for (size_t i = 0; i < r->n_timers; i++)
		if (r->timers[i]->key == key)
			return r->timers[i]->has_deadline_realtime_ns ?
				r->timers[i]->deadline_realtime_ns : 0;
	ck_abort_msg("key %" PRIu64 " not listed", key);
	return 0;
}

static void restart_by_wall(int sig)
{
	struct du_daemon *d = du_daemon_new();
	int64_t off = 3600 * (int64_t)DU_S;
	char dir[160];
	struct du_conn *c;
	uint64_t passed, due, rx, up, down;
	du_env *f, *l;

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_fake_clock(d);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	c = du_open_producer(d, "w");
	passed = fake_now(0) + 60 * DU_S;
	/* Due 8 s after the wall clock's hour: the restart takes well
	 * under that, even under load. */
	due = fake_now(0) + 3600 * DU_S + 8 * DU_S;
	schedule_wall(c, 2, 1, passed);
	schedule_wall(c, 3, 2, due);
	l = du_list(c, 4, "w", 0, 0);
	ck_assert_uint_eq(listed_wall(l, 1), passed);
	ck_assert_uint_eq(listed_wall(l, 2), due);
	bwp_frame_free(l);
	du_conn_free(c);
	down = du_now_ns();
	du_daemon_stop(d, sig, DU_WAIT_MS);
	/* An hour passes by the wall clock while it is down (a suspend, a
	 * reboot, an NTP step), a few hundred ms by the monotonic one. */
	du_clock_step(d, off, false);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	up = du_now_ns();
	du_note("down and up again in %.2f s", (double)(up - down) / 1e9);
	c = du_open_consumer(d, "w", 16, 0);
	f = expect_key(c, 1, &rx);
	ck_assert(f->fired->late);
	check_wall_fire(f, passed, off);
	ck_assert_uint_lt(rx - up, du_margin_ns() + 500 * DU_MS);
	bwp_frame_free(f);
	f = expect_key_in(c, 2, DU_WAIT_MS + 8000, &rx);
	ck_assert(!f->fired->late);
	check_wall_fire(f, due, off);
	du_note("the second fired %.2f s after the restart", (double)(rx - up) / 1e9);
	bwp_frame_free(f);
	du_conn_free(c);
	du_daemon_free(d);
}

START_TEST(test_restart_sigterm)
{
	restart_by_wall(SIGTERM);
}
END_TEST

START_TEST(test_restart_sigkill)
{
	restart_by_wall(SIGKILL);
}
END_TEST

START_TEST(test_bad_input)
{
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	struct du_sched s = { .key = 1, .when = DU_REALTIME, .when_ns = 0 };

	du_send_schedule(c, 2, &s);
	du_expect_error(c, true, 2, BITWHEEL__V1__ERROR_CODE__BAD_DEADLINE);
	s.when_ns = fake_now(0) + DU_S;
	s.periodic = true;
	s.period_ns = DU_S;
	du_send_schedule(c, 3, &s);
	du_expect_error(c, true, 3, BITWHEEL__V1__ERROR_CODE__BAD_DEADLINE);
	/* Neither refusal left a timer behind, nor closed the connection. */
	s.periodic = false;
	schedule_wall(c, 4, 1, s.when_ns);
	bwp_frame_free(expect_key(c, 1, NULL));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

static Suite *clock_suite(void)
{
	Suite *s = suite_create("clock");
	TCase *tc;

	tc = tcase_create("steps");
	du_tcase(tc);
	tcase_add_test(tc, test_step_forward);
	tcase_add_test(tc, test_step_back);
	tcase_add_test(tc, test_quiet_step_back);
	suite_add_tcase(s, tc);

	tc = tcase_create("restart");
	du_tcase(tc);
	tcase_add_test(tc, test_restart_sigterm);
	tcase_add_test(tc, test_restart_sigkill);
	suite_add_tcase(s, tc);

	tc = tcase_create("input");
	du_tcase(tc);
	tcase_add_test(tc, test_bad_input);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(clock_suite());
}
