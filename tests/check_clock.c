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
 *   calendar calendar timers (Schedule.calendar): a "*:*:0/2 UTC" timer
 *            fires again and again, each fire's due_realtime_ns the
 *            elapse daemon/calendar.c's bwd_cal_next gives after the
 *            one before, never before it by the wall clock; a step
 *            forward past several elapses is one late fire, then the
 *            next on schedule; a step back makes none early (and the
 *            elapses after the clock come again, as systemd's do);
 *            across Europe/Berlin's daylight-saving changes a daily
 *            "02:30" skips the night that has none and does not repeat
 *            in the night that has two;
 *            jitter stays within its bound, differs between keys, and
 *            the fixed kind stays the same across a restart and a
 *            re-schedule; elapses missed while the daemon was down
 *            fire once at start, late, or are skipped past a
 *            misfire_grace_ns, whether read back from a snapshot or a
 *            journal; refusals: BAD_CALENDAR, BAD_REQUEST, BAD_DEADLINE.
 *   suspend  boottime timers (Schedule.clock CLOCK_BOOTTIME) on a daemon
 *            whose CLOCK_BOOTTIME the shim moves ahead (a suspend:
 *            du_clock_suspend) and whose boottime timerfd it expires: a
 *            timer due 10 s on fires at once after a 20 s suspend,
 *            late, a monotonic one beside it on its own time, a later
 *            boottime one stays pending; a periodic one fires once late
 *            and then keeps its phase; a boottime clock gone back
 *            unheard of makes none early; with --state-dir, a suspend
 *            while the daemon is down (SIGTERM, SIGKILL) fires the one
 *            it passed at the start; ListTimers says the clock; clock
 *            with realtime_ns or calendar is BAD_REQUEST.
 *   zones    the local zone (TZ naming a file of the test's) replaced
 *            under a daemon: a local-time calendar timer's next elapse
 *            moves to the new zone's midnight (inotify); SIGHUP reads
 *            the zones again too; a region of the tz database (TZDIR)
 *            renamed into place as a new directory, then a zone in it
 *            changed: both seen.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "calendar-internal.h"
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

/* The next fire, a monotonic timer's (key, due at due_ns), which a step
 * or a suspend must not have moved: on its own time, unmarked. */
static void expect_mono(struct du_conn *c, uint64_t key, uint64_t due_ns)
{
	uint64_t rx;
	du_env *f = expect_key(c, key, &rx);

	ck_assert(!f->fired->late);
	ck_assert(!f->fired->has_due_realtime_ns);
	ck_assert_uint_eq(f->fired->deadline_ns, due_ns);
	du_check_fire_time(f->fired, rx, 2 * DU_MS);
	bwp_frame_free(f);
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
	expect_mono(c, 2, mono.when_ns);
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

/* key's TimerInfo in a ListTimersReply. */
static const Bitwheel__V1__TimerInfo *listed(const du_env *e, uint64_t key)
{
	const Bitwheel__V1__ListTimersReply *r = e->list_timers_reply;

	for (size_t i = 0; i < r->n_timers; i++)
		if (r->timers[i]->key == key)
			return r->timers[i];
	ck_abort_msg("key %" PRIu64 " not listed", key);
	return NULL;
}

/* The wall-clock deadline of key in a ListTimersReply, or 0. */
static uint64_t listed_wall(const du_env *e, uint64_t key)
{
	const Bitwheel__V1__TimerInfo *ti = listed(e, key);

	return ti->has_deadline_realtime_ns ? ti->deadline_realtime_ns : 0;
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

/* ---- calendar timers ------------------------------------------------------ */

/* The elapse of spec after after_ns, as the daemon computes it. */
static uint64_t cal_next(const char *spec, uint64_t after_ns)
{
	struct bwd_cal *cal;
	uint64_t next;
	char err[160];

	ck_assert_msg(bwd_cal_parse(spec, &cal, err, sizeof(err)) == 0, "%s: %s", spec, err);
	ck_assert_int_eq(bwd_cal_next(cal, after_ns, &next), 0);
	bwd_cal_free(cal);
	return next;
}

static void schedule_cal(struct du_conn *c, uint64_t id, uint64_t key,
			 const char *spec, const struct du_sched *extra)
{
	struct du_sched s = extra ? *extra : (struct du_sched){ 0 };

	s.key = key;
	s.when = DU_CALENDAR;
	s.calendar = spec;
	bwp_frame_free(du_schedule(c, id, &s));
}

/* A calendar fire's checks: its due time, no count, and the daemon's wall
 * clock (off_ns) past due + jitter bound... at least past due. */
static void check_cal_fire(const du_env *f, uint64_t due, int64_t off_ns)
{
	check_wall_fire(f, due, off_ns);
	ck_assert(!f->fired->has_fire_count);
}

/* The daemon's wall clock stepped (told) to ahead_ns before elapse due:
 * key 1 fires for it, unmarked, when the wall clock reaches it and not
 * before; the clock's offset after the step. */
static int64_t step_to_before(struct du_daemon *d, struct du_conn *c,
			      uint64_t due, uint64_t ahead_ns)
{
	int64_t off = (int64_t)(due - ahead_ns) - (int64_t)du_realtime_ns();
	uint64_t told = du_now_ns(), rx;
	du_env *f;

	du_clock_step(d, off, true);
	f = expect_key(c, 1, &rx);
	ck_assert(!f->fired->late);
	check_cal_fire(f, due, off);
	ck_assert_uint_ge(rx - told, ahead_ns - 100 * DU_MS);
	bwp_frame_free(f);
	return off;
}

START_TEST(test_cal_repeats)
{
	static const char spec[] = "*:*:0/2 UTC";
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	uint64_t before, after, due, rx;
	du_env *f;

	before = fake_now(0);
	schedule_cal(c, 2, 7, spec, NULL);
	after = fake_now(0);
	due = cal_next(spec, before);
	/* An elapse between the two reads: the daemon's may be either. */
	for (int i = 0; i < 4; i++) {
		f = expect_key_in(c, 7, DU_WAIT_MS + 2000, &rx);
		if (i == 0 && due <= after && f->fired->due_realtime_ns != due)
			due = cal_next(spec, due);
		check_cal_fire(f, due, 0);
		ck_assert(!f->fired->late);
		bwp_frame_free(f);
		due = cal_next(spec, due);
	}
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_cal_step_forward)
{
	static const char spec[] = "*:0/10 UTC";      /* every 10 minutes */
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	int64_t off = 35 * 60 * (int64_t)DU_S;
	uint64_t first, next, rx, told;
	du_env *f;

	first = cal_next(spec, fake_now(0));
	schedule_cal(c, 2, 1, spec, NULL);
	du_expect_quiet(c, 200);
	/* 35 minutes on: three or four elapses passed, one late fire. */
	told = du_now_ns();
	du_clock_step(d, off, true);
	f = expect_key(c, 1, &rx);
	ck_assert(f->fired->late);
	check_cal_fire(f, first, off);
	ck_assert_uint_lt(rx - told, du_margin_ns() + 100 * DU_MS);
	bwp_frame_free(f);
	du_expect_quiet(c, 500);
	/* Then the next elapse after the clock, on time: step to a second
	 * before it. */
	next = cal_next(spec, fake_now(off));
	step_to_before(d, c, next, DU_S);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_cal_step_back)
{
	static const char spec[] = "hourly UTC";
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	uint64_t hour;
	int64_t off;

	hour = cal_next(spec, fake_now(0));
	schedule_cal(c, 2, 1, spec, NULL);
	/* To 1.5 s before the hour: it fires on it, not before. */
	off = step_to_before(d, c, hour, 1500 * DU_MS);
	/* An hour back: nothing early; the hour comes again, as systemd's
	 * timers do after a step back. */
	du_clock_step(d, off - 3600 * (int64_t)DU_S, true);
	du_expect_quiet(c, 2500);
	step_to_before(d, c, hour, 1500 * DU_MS);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* The listed instants of keys 1..n: elapse + jitter. */
static void listed_walls(struct du_conn *c, uint64_t id, const char *session,
			 uint64_t *wall, int n)
{
	du_env *l = du_list(c, id, session, 0, 0);

	for (int k = 1; k <= n; k++)
		wall[k - 1] = listed_wall(l, (uint64_t)k);
	bwp_frame_free(l);
}

/* UTC ns of y-m-d h:mi. */
static uint64_t utc_ns(int y, int m, int d, int h, int mi)
{
	return (uint64_t)((bwd_tz_days_from_civil(y, m, d) * 86400 + h * 3600 +
			   mi * 60)) * DU_S;
}

/* The next elapse the daemon lists for key 1 of session "dst". */
static uint64_t listed_next(struct du_conn *c, uint64_t id)
{
	uint64_t wall;

	listed_walls(c, id, "dst", &wall, 1);
	return wall;
}

/* Daylight saving in Europe/Berlin, 2027, a daily "02:30": the clock
 * stepped to the spring-forward night (02:00 CET becomes 03:00 CEST on
 * March 28) gives one late fire for what it skipped, and then no 02:30
 * that night: the next is March 29 (00:30 UTC).  Stepped to a second
 * before 02:30 CEST on October 31 (the night 03:00 CEST becomes 02:00
 * CET), it fires on it, and not again at the repeated 02:30 CET: the
 * next is November 1, 02:30 CET (01:30 UTC).  Each as bwd_cal_next says,
 * which check_calendar holds to systemd's. */
START_TEST(test_cal_dst)
{
	static const char spec[] = "*-*-* 02:30 Europe/Berlin";
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, "dst");
	uint64_t first, oct = utc_ns(2027, 10, 31, 0, 30);
	int64_t off;
	du_env *f;

	first = cal_next(spec, fake_now(0));
	schedule_cal(c, 2, 1, spec, NULL);
	off = (int64_t)(utc_ns(2027, 3, 28, 0, 59) + 58 * DU_S) -
		(int64_t)du_realtime_ns();
	du_clock_step(d, off, true);
	f = expect_key(c, 1, NULL);
	ck_assert(f->fired->late);
	check_cal_fire(f, first, off);
	bwp_frame_free(f);
	ck_assert_uint_eq(listed_next(c, 3), utc_ns(2027, 3, 29, 0, 30));
	ck_assert_uint_eq(listed_next(c, 4), cal_next(spec, fake_now(off)));
	/* October: the late fire for March 29, then 02:30 CEST on time. */
	off = (int64_t)(oct - DU_S) - (int64_t)du_realtime_ns();
	du_clock_step(d, off, true);
	f = expect_key(c, 1, NULL);
	ck_assert(f->fired->late);
	check_cal_fire(f, utc_ns(2027, 3, 29, 0, 30), off);
	bwp_frame_free(f);
	f = expect_key(c, 1, NULL);
	ck_assert(!f->fired->late);
	check_cal_fire(f, oct, off);
	bwp_frame_free(f);
	ck_assert_uint_eq(listed_next(c, 5), utc_ns(2027, 11, 1, 1, 30));
	ck_assert_uint_eq(cal_next(spec, oct), utc_ns(2027, 11, 1, 1, 30));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* Fires every 2 s with up to 1.5 s of jitter: never before the elapse,
 * never past it by more than the jitter (and the margin). */
START_TEST(test_cal_jitter_fires)
{
	static const char spec[] = "*:*:0/2 UTC";
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	struct du_sched x = { .jitter = true, .jitter_ns = 1500 * DU_MS };
	uint64_t prev = 0;

	schedule_cal(c, 2, 1, spec, &x);
	for (int i = 0; i < 4; i++) {
		uint64_t at, due;
		du_env *f = expect_key_in(c, 1, DU_WAIT_MS + 4000, NULL);

		at = fake_now(0);
		due = f->fired->due_realtime_ns;
		check_cal_fire(f, due, 0);
		ck_assert_uint_eq(due, cal_next(spec, due - 1));
		ck_assert_uint_gt(due, prev);
		du_note("fire %d: %.3f s after its elapse", i, (double)(at - due) / 1e9);
		ck_assert_uint_le(at - due, 1500 * DU_MS + du_margin_ns());
		prev = due;
		bwp_frame_free(f);
	}
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

#define JKEYS 6
START_TEST(test_cal_jitter_fixed)
{
	static const char spec[] = "daily UTC";
	struct du_daemon *d = du_daemon_new();
	struct du_sched fresh = { .jitter = true, .jitter_ns = 3600 * DU_S },
			fixed = fresh;
	uint64_t day, before[2 * JKEYS], after[2 * JKEYS];
	struct du_conn *c;
	char dir[160];
	du_env *l;
	bool differ = false;

	fixed.jitter_fixed = true;
	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_fake_clock(d);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	c = du_open_producer(d, "j");
	day = cal_next(spec, fake_now(0));
	for (int k = 1; k <= JKEYS; k++) {
		schedule_cal(c, (uint64_t)k + 1, (uint64_t)k, spec, &fresh);
		schedule_cal(c, (uint64_t)k + 100, (uint64_t)(k + JKEYS), spec, &fixed);
	}
	listed_walls(c, 200, "j", before, 2 * JKEYS);
	for (int i = 0; i < 2 * JKEYS; i++) {
		ck_assert_uint_ge(before[i], day);
		ck_assert_uint_le(before[i], day + 3600 * DU_S);
		differ |= i % JKEYS && before[i] != before[i - 1];
	}
	ck_assert_msg(differ, "every key drew the same jitter");
	/* The listing shows the spec normalized, and the jitter. */
	l = du_list(c, 201, "j", 0, 0);
	for (size_t i = 0; i < l->list_timers_reply->n_timers; i++) {
		const Bitwheel__V1__TimerInfo *ti = l->list_timers_reply->timers[i];

		ck_assert_str_eq(ti->calendar, "*-*-* 00:00:00 UTC");
		ck_assert(ti->has_jitter_ns);
		ck_assert_uint_eq(ti->jitter_ns, 3600 * DU_S);
		ck_assert(ti->jitter_fixed == (ti->key > JKEYS));
		ck_assert(!ti->has_misfire_grace_ns);
	}
	bwp_frame_free(l);
	du_conn_free(c);
	du_daemon_stop(d, SIGTERM, DU_WAIT_MS);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	c = du_open_producer(d, "j");
	listed_walls(c, 2, "j", after, 2 * JKEYS);
	for (int i = 0; i < 2 * JKEYS; i++)
		ck_assert_uint_eq(after[i], before[i]);
	/* Re-scheduled (replace): the fixed ones draw the same. */
	fixed.replace = true;
	for (int k = 1; k <= JKEYS; k++)
		schedule_cal(c, (uint64_t)k + 10, (uint64_t)(k + JKEYS), spec, &fixed);
	listed_walls(c, 300, "j", after, 2 * JKEYS);
	for (int i = JKEYS; i < 2 * JKEYS; i++)
		ck_assert_uint_eq(after[i], before[i]);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* Hourly timers, the daemon down (sig) while the wall clock moves on
 * three hours: key 1 (no grace) fires once, late, for the first hour it
 * missed; key 2 (a minute's grace) is skipped to the next hour; key 3 (a
 * day's grace) fires late like key 1. */
static void cal_catch_up(int sig)
{
	static const char spec[] = "hourly UTC";
	struct du_daemon *d = du_daemon_new();
	int64_t off = 3 * 3600 * (int64_t)DU_S;
	struct du_sched minute = { .grace = true, .grace_ns = 60 * DU_S },
			day = { .grace = true, .grace_ns = 86400 * DU_S };
	uint64_t missed, next, walls[3];
	bool seen[4] = { false };
	struct du_conn *c;
	char dir[160];

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_fake_clock(d);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	c = du_open_producer(d, "h");
	missed = cal_next(spec, fake_now(0));
	schedule_cal(c, 2, 1, spec, NULL);
	schedule_cal(c, 3, 2, spec, &minute);
	schedule_cal(c, 4, 3, spec, &day);
	du_conn_free(c);
	du_daemon_stop(d, sig, DU_WAIT_MS);
	du_clock_step(d, off, false);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	next = cal_next(spec, fake_now(off));
	c = du_open(d, "h");
	for (int i = 0; i < 2; i++) {
		du_env *f = du_expect_fire(c, DU_WAIT_MS, NULL);
		uint64_t k = f->fired->key;

		ck_assert_msg(k == 1 || k == 3, "key %" PRIu64 " fired", k);
		ck_assert(!seen[k]);
		seen[k] = true;
		ck_assert(f->fired->late);
		check_cal_fire(f, missed, off);
		bwp_frame_free(f);
	}
	/* One fire for the three hours missed; the next hour for all. */
	du_expect_quiet(c, 500);
	listed_walls(c, 2, "h", walls, 3);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(walls[i], next);
	du_conn_free(c);
	du_daemon_free(d);
}

START_TEST(test_cal_catch_up_sigterm)
{
	cal_catch_up(SIGTERM);
}
END_TEST

START_TEST(test_cal_catch_up_sigkill)
{
	cal_catch_up(SIGKILL);
}
END_TEST

/* Fires journaled, then the daemon killed and the wall clock an hour on:
 * the next elapse comes from the last fire's (its FIRE record), once,
 * late, then they go on every 2 s. */
START_TEST(test_cal_journal_fires)
{
	static const char spec[] = "*:*:0/2 UTC";
	struct du_daemon *d = du_daemon_new();
	int64_t off = 3600 * (int64_t)DU_S;
	uint64_t last = 0;
	struct du_conn *c;
	char dir[160];
	du_env *f;

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_fake_clock(d);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	c = du_open(d, "r");
	schedule_cal(c, 2, 1, spec, NULL);
	for (int i = 0; i < 2; i++) {
		f = expect_key_in(c, 1, DU_WAIT_MS + 2000, NULL);
		last = f->fired->due_realtime_ns;
		bwp_frame_free(f);
	}
	du_conn_free(c);
	du_daemon_stop(d, SIGKILL, DU_WAIT_MS);
	du_clock_step(d, off, false);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	c = du_open(d, "r");
	/* A fire made just before the kill may come again, redelivered. */
	while ((f = expect_key(c, 1, NULL))->fired->redelivered)
		bwp_frame_free(f);
	ck_assert(f->fired->late);
	ck_assert_uint_gt(f->fired->due_realtime_ns, last);
	ck_assert_uint_le(f->fired->due_realtime_ns, last + 4 * DU_S);
	check_cal_fire(f, f->fired->due_realtime_ns, off);
	last = f->fired->due_realtime_ns;
	bwp_frame_free(f);
	f = expect_key_in(c, 1, DU_WAIT_MS + 2000, NULL);
	ck_assert(!f->fired->late);
	ck_assert_uint_gt(f->fired->due_realtime_ns, last + 3000 * DU_S);
	check_cal_fire(f, cal_next(spec, f->fired->due_realtime_ns - 1), off);
	bwp_frame_free(f);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_cal_bad_input)
{
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	struct du_sched s = { .key = 1, .when = DU_CALENDAR };
	static const char *const bad[] = {
		"*-*-* 25:00", "daily Mars/Olympus_Mons", "Fri..Mon", "",
		"*-02-30",                      /* elapses never */
		"*:*:0/0.0001",                 /* closer than the tick */
	};
	char lng[300];
	uint64_t id = 2;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s.calendar = bad[i];
		du_send_schedule(c, id, &s);
		du_expect_error(c, true, id++, BITWHEEL__V1__ERROR_CODE__BAD_CALENDAR);
	}
	memset(lng, ' ', sizeof(lng) - 1);
	memcpy(lng, "daily", 5);
	lng[sizeof(lng) - 1] = '\0';
	s.calendar = lng;
	du_send_schedule(c, id, &s);
	du_expect_error(c, true, id++, BITWHEEL__V1__ERROR_CODE__BAD_CALENDAR);
	/* With period_ns; jitter past a month. */
	s.calendar = "daily";
	s.periodic = true;
	s.period_ns = DU_S;
	du_send_schedule(c, id, &s);
	du_expect_error(c, true, id++, BITWHEEL__V1__ERROR_CODE__BAD_DEADLINE);
	s.periodic = false;
	s.jitter = true;
	s.jitter_ns = 32 * 86400 * DU_S;
	du_send_schedule(c, id, &s);
	du_expect_error(c, true, id++, BITWHEEL__V1__ERROR_CODE__BAD_REQUEST);
	/* A calendar timer's fields without a calendar. */
	s = (struct du_sched){ .key = 1, .when = DU_DELAY, .when_ns = DU_S,
			       .grace = true, .grace_ns = DU_S };
	du_send_schedule(c, id, &s);
	du_expect_error(c, true, id++, BITWHEEL__V1__ERROR_CODE__BAD_REQUEST);
	s = (struct du_sched){ .key = 1, .when = DU_DELAY, .when_ns = DU_S,
			       .jitter_fixed = true };
	du_send_schedule(c, id, &s);
	du_expect_error(c, true, id++, BITWHEEL__V1__ERROR_CODE__BAD_REQUEST);
	/* None left a timer behind, nor closed the connection. */
	schedule_cal(c, id, 1, "*:*:0/1 UTC", NULL);
	bwp_frame_free(expect_key_in(c, 1, DU_WAIT_MS + 1000, NULL));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* How many times the log says `what`. */
static int log_count(const struct du_daemon *d, const char *what)
{
	char *log = du_daemon_log(d), *p = log;
	int n = 0;

	while ((p = strstr(p, what))) {
		n++;
		p += strlen(what);
	}
	free(log);
	return n;
}

/* ---- boottime timers ------------------------------------------------------ */

/* The daemon's CLOCK_BOOTTIME while the offset is off_ns. */
static uint64_t fake_boot(int64_t off_ns)
{
	return (uint64_t)((int64_t)du_boottime_ns() + off_ns);
}

/* A boottime timer's first fire, due at boot_ns on the daemon's
 * CLOCK_BOOTTIME (off_ns): never before it by that clock. */
static void check_boot_fire(const du_env *f, uint64_t boot_ns, int64_t off_ns)
{
	uint64_t at = fake_boot(off_ns);

	ck_assert(!f->fired->has_due_realtime_ns);
	ck_assert_msg(at >= boot_ns, "key %" PRIu64 " fired %.3f s early by CLOCK_BOOTTIME",
		      f->fired->key, (double)(boot_ns - at) / 1e9);
}

/* Schedule s; its deadline as the reply says (a boottime one's on
 * CLOCK_BOOTTIME). */
static uint64_t schedule_at(struct du_conn *c, uint64_t id, const struct du_sched *s)
{
	du_env *r = du_schedule(c, id, s);
	uint64_t due = r->schedule_reply->deadline_ns;

	bwp_frame_free(r);
	return due;
}

START_TEST(test_suspend)
{
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	struct du_sched boot = { .key = 1, .when = DU_DELAY, .when_ns = 10 * DU_S, .boot = true },
		far = { .key = 3, .when = DU_DELAY, .when_ns = 60 * DU_S, .boot = true },
		mono = { .key = 2, .when = DU_DELAY, .when_ns = 1500 * DU_MS };
	int64_t off = 20 * (int64_t)DU_S;
	uint64_t due, mono_due, rx, resumed;
	du_env *f;

	due = schedule_at(c, 2, &boot);
	ck_assert_uint_ge(due, fake_boot(0) + 9 * DU_S);
	schedule_at(c, 3, &far);
	mono_due = schedule_at(c, 4, &mono);
	/* The boottime timerfd expiring with no suspend moves nothing. */
	du_clock_suspend(d, 0, true);
	du_expect_quiet(c, 200);
	ck_assert_int_eq(log_count(d, "the host was suspended"), 0);
	/* A 20 s suspend: the boottime clock jumps, the monotonic one not. */
	resumed = du_now_ns();
	du_clock_suspend(d, off, true);
	f = expect_key(c, 1, &rx);
	ck_assert(f->fired->late);
	check_boot_fire(f, due, off);
	ck_assert_int_eq(log_count(d, "the host was suspended: 2 boottime timers placed again"), 1);
	du_note("fired %.1f ms after the resume", (double)(rx - resumed) / 1e6);
	ck_assert_uint_lt(rx - resumed, du_margin_ns() + 100 * DU_MS);
	bwp_frame_free(f);
	/* The monotonic one fires on its own time, unmarked. */
	expect_mono(c, 2, mono_due);
	/* Key 3 is still 40 s away. */
	du_expect_quiet(c, 300);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* A periodic boottime timer: the periods a suspend passed are one late
 * fire, then it keeps its period's phase on CLOCK_BOOTTIME. */
START_TEST(test_suspend_periodic)
{
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	struct du_sched p = { .key = 1, .when = DU_DELAY, .when_ns = 1 * DU_S,
			      .periodic = true, .period_ns = 1 * DU_S, .boot = true };
	int64_t off = 20 * (int64_t)DU_S + 500 * (int64_t)DU_MS;
	uint64_t due, rx;
	du_env *f;

	due = schedule_at(c, 2, &p);
	f = expect_key(c, 1, &rx);
	ck_assert(!f->fired->late);
	check_boot_fire(f, due, 0);
	bwp_frame_free(f);
	du_clock_suspend(d, off, true);
	f = expect_key(c, 1, &rx);
	ck_assert(f->fired->late);
	bwp_frame_free(f);
	/* Then the next of due + k s after the resume, on time. */
	f = expect_key(c, 1, &rx);
	ck_assert(!f->fired->late);
	check_boot_fire(f, due + 21 * DU_S, off);
	bwp_frame_free(f);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* A boottime clock that goes back, unheard of (no host's does; the shim
 * can): the timer waits for CLOCK_BOOTTIME, the check at its slot. */
START_TEST(test_suspend_never_early)
{
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	struct du_sched boot = { .key = 1, .when = DU_DELAY, .when_ns = 1 * DU_S, .boot = true };
	int64_t off = -2 * (int64_t)DU_S;
	uint64_t due, rx, start = du_now_ns();
	du_env *f;

	due = schedule_at(c, 2, &boot);
	du_clock_suspend(d, off, false);
	f = expect_key_in(c, 1, DU_WAIT_MS + 3000, &rx);
	check_boot_fire(f, due, off);
	du_note("fired %.2f s after the schedule", (double)(rx - start) / 1e9);
	ck_assert_uint_ge(rx - start, 3 * DU_S - 50 * DU_MS);
	bwp_frame_free(f);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* With --state-dir, a suspend while the daemon is down: the boottime
 * timer it passed fires at once at the start, late; a later one and a
 * monotonic one keep waiting; ListTimers says which clock. */
static void suspend_restart(int sig)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sched boot = { .key = 1, .when = DU_DELAY, .when_ns = 10 * DU_S, .boot = true },
		far = { .key = 2, .when = DU_DELAY, .when_ns = 60 * DU_S, .boot = true },
		mono = { .key = 3, .when = DU_DELAY, .when_ns = 60 * DU_S };
	int64_t off = 20 * (int64_t)DU_S;
	char dir[160];
	struct du_conn *c;
	uint64_t due, mono_due, rx, up;
	du_env *f, *l;

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_fake_clock(d);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	c = du_open_producer(d, "b");
	due = schedule_at(c, 2, &boot);
	schedule_at(c, 3, &far);
	mono_due = schedule_at(c, 4, &mono);
	l = du_list(c, 5, "b", 0, 0);
	ck_assert(listed(l, 1)->has_clock);
	ck_assert_int_eq(listed(l, 1)->clock, BITWHEEL__V1__CLOCK__CLOCK_BOOTTIME);
	ck_assert(!listed(l, 1)->has_deadline_realtime_ns);
	ck_assert(!listed(l, 3)->has_clock);
	bwp_frame_free(l);
	du_conn_free(c);
	du_daemon_stop(d, sig, DU_WAIT_MS);
	du_clock_suspend(d, off, false);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	up = du_now_ns();
	c = du_open_consumer(d, "b", 16, 0);
	f = expect_key(c, 1, &rx);
	ck_assert(f->fired->late);
	check_boot_fire(f, due, off);
	ck_assert_uint_lt(rx - up, du_margin_ns() + 500 * DU_MS);
	bwp_frame_free(f);
	du_expect_quiet(c, 300);
	l = du_list(c, 6, "b", 0, 0);
	ck_assert_int_eq(listed(l, 2)->clock, BITWHEEL__V1__CLOCK__CLOCK_BOOTTIME);
	/* 60 s from the schedule by CLOCK_BOOTTIME, 20 s of it suspended. */
	ck_assert_uint_lt(listed(l, 2)->deadline_ns, du_now_ns() + 41 * DU_S);
	/* The monotonic one has not moved. */
	ck_assert_uint_eq(listed(l, 3)->deadline_ns, mono_due);
	bwp_frame_free(l);
	du_conn_free(c);
	du_daemon_free(d);
}

START_TEST(test_suspend_restart_sigterm)
{
	suspend_restart(SIGTERM);
}
END_TEST

START_TEST(test_suspend_restart_sigkill)
{
	suspend_restart(SIGKILL);
}
END_TEST

START_TEST(test_suspend_bad_input)
{
	struct du_daemon *d = start_fake(NULL);
	struct du_conn *c = du_open(d, NULL);
	struct du_sched s = { .key = 1, .when = DU_REALTIME,
			      .when_ns = fake_now(0) + DU_S, .boot = true };

	du_send_schedule(c, 2, &s);
	du_expect_error(c, true, 2, BITWHEEL__V1__ERROR_CODE__BAD_REQUEST);
	s.when = DU_CALENDAR;
	s.calendar = "*:*:0/2 UTC";
	du_send_schedule(c, 3, &s);
	du_expect_error(c, true, 3, BITWHEEL__V1__ERROR_CODE__BAD_REQUEST);
	/* Neither left a timer behind, nor closed the connection. */
	s.when = DU_DEADLINE;
	s.when_ns = 0;
	schedule_at(c, 4, &s);
	bwp_frame_free(expect_key(c, 1, NULL));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ---- time zone changes ---------------------------------------------------- */

#define DAY_NS (86400 * DU_S)

/* The tz database's zone as the file at path, replaced at once (a
 * rename, as dpkg and timedatectl do). */
static void put_zone(const char *path, const char *zone)
{
	char src[160], tmp[200], buf[8192];
	FILE *in, *out;
	size_t n;

	snprintf(src, sizeof(src), "%s/%s", BWD_TZ_DIR, zone);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	in = fopen(src, "rb");
	ck_assert_msg(in != NULL, "%s: %s", src, strerror(errno));
	out = fopen(tmp, "wb");
	ck_assert_msg(out != NULL, "%s: %s", tmp, strerror(errno));
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
	fclose(in);
	ck_assert_int_eq(fclose(out), 0);
	ck_assert_msg(rename(tmp, path) == 0, "rename %s: %s", tmp, strerror(errno));
}

/* Key 1's wall-clock deadline in session z, once it is `mod` past a
 * UTC midnight (waiting at most DU_WAIT_MS); returned either way. */
static uint64_t wait_listed_mod(struct du_conn *c, uint64_t *id, uint64_t mod)
{
	uint64_t until = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS, w;
	du_env *l;

	for (;;) {
		l = du_list(c, (*id)++, "z", 0, 0);
		w = listed_wall(l, 1);
		bwp_frame_free(l);
		if (w % DAY_NS == mod || du_now_ns() > until)
			return w;
		du_sleep_ms(50);
	}
}

/* The local zone (TZ naming a file of the test's) changes under a
 * daemon with a local-time calendar timer: its next elapse moves to the
 * new zone's midnight, seen by inotify; then SIGHUP reads the zones
 * again too. */
START_TEST(test_zone_change)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .key = 1, .when = DU_CALENDAR,
			      .calendar = "*-*-* 00:00:00" };
	const char *said = "the time zones changed: 1 calendar timers read again";
	uint64_t id = 3, w, until;
	struct du_conn *c;
	char zone[160];

	snprintf(zone, sizeof(zone), "%s/zone", d->dir);
	put_zone(zone, "UTC");
	ck_assert_int_eq(setenv("TZ", zone, 1), 0);
	du_daemon_start(d, (const char *)NULL);
	c = du_open_producer(d, "z");
	schedule_at(c, 2, &s);
	ck_assert_uint_eq(wait_listed_mod(c, &id, 0) % DAY_NS, 0);
	/* Tokyo's midnight is 15:00 UTC (UTC+9, no daylight saving). */
	put_zone(zone, "Asia/Tokyo");
	w = wait_listed_mod(c, &id, 15 * 3600 * DU_S);
	ck_assert_msg(w % DAY_NS == 15 * 3600 * DU_S,
		      "the next elapse %.3f h past a UTC midnight, not 15 h",
		      (double)(w % DAY_NS) / 3600e9);
	ck_assert_int_eq(log_count(d, said), 1);
	ck_assert(kill(d->pid, SIGHUP) == 0);
	until = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	while (log_count(d, said) < 2 && du_now_ns() < until)
		du_sleep_ms(20);
	ck_assert_int_eq(log_count(d, said), 2);
	ck_assert_uint_eq(wait_listed_mod(c, &id, 15 * 3600 * DU_S), w);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* A region of the tz database (TZDIR, the test's) replaced by a new
 * directory renamed into place, as an upgrade may do: the rename is
 * seen, and so is a later change of a zone in the new directory, which
 * the daemon must have started to watch. */
START_TEST(test_zone_new_dir)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .key = 1, .when = DU_CALENDAR,
			      .calendar = "*-*-* 00:00:00 Test/Zone" };
	const uint64_t tokyo = 15 * 3600 * DU_S, kolkata = 18 * 3600 * DU_S + 1800 * DU_S;
	char db[160], dir[200], fresh[200], old[200], zone[240];
	uint64_t id = 3, w;
	struct du_conn *c;

	snprintf(db, sizeof(db), "%s/tzdb", d->dir);
	snprintf(dir, sizeof(dir), "%s/Test", db);
	snprintf(fresh, sizeof(fresh), "%s/Test.new", db);
	snprintf(old, sizeof(old), "%s/Test.old", db);
	ck_assert(mkdir(db, 0755) == 0 && mkdir(dir, 0755) == 0);
	snprintf(zone, sizeof(zone), "%s/Zone", dir);
	put_zone(zone, "UTC");
	ck_assert_int_eq(setenv("TZDIR", db, 1), 0);
	ck_assert_int_eq(setenv("TZ", "UTC", 1), 0);
	du_daemon_start(d, (const char *)NULL);
	c = du_open_producer(d, "z");
	schedule_at(c, 2, &s);
	ck_assert_uint_eq(wait_listed_mod(c, &id, 0) % DAY_NS, 0);
	ck_assert(mkdir(fresh, 0755) == 0);
	snprintf(zone, sizeof(zone), "%s/Zone", fresh);
	put_zone(zone, "Asia/Tokyo");
	ck_assert(rename(dir, old) == 0 && rename(fresh, dir) == 0);
	w = wait_listed_mod(c, &id, tokyo);
	ck_assert_msg(w % DAY_NS == tokyo, "after the rename: the next elapse %.3f h past "
		      "a UTC midnight, not 15 h", (double)(w % DAY_NS) / 3600e9);
	/* India's midnight is 18:30 UTC (UTC+5:30, no daylight saving). */
	snprintf(zone, sizeof(zone), "%s/Zone", dir);
	put_zone(zone, "Asia/Kolkata");
	w = wait_listed_mod(c, &id, kolkata);
	ck_assert_msg(w % DAY_NS == kolkata, "a zone of the new directory changed: the next "
		      "elapse %.3f h past a UTC midnight, not 18.5 h",
		      (double)(w % DAY_NS) / 3600e9);
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

	tc = tcase_create("calendar");
	du_tcase(tc);
	tcase_add_test(tc, test_cal_repeats);
	tcase_add_test(tc, test_cal_step_forward);
	tcase_add_test(tc, test_cal_step_back);
	tcase_add_test(tc, test_cal_dst);
	tcase_add_test(tc, test_cal_jitter_fires);
	tcase_add_test(tc, test_cal_jitter_fixed);
	tcase_add_test(tc, test_cal_catch_up_sigterm);
	tcase_add_test(tc, test_cal_catch_up_sigkill);
	tcase_add_test(tc, test_cal_journal_fires);
	tcase_add_test(tc, test_cal_bad_input);
	suite_add_tcase(s, tc);

	tc = tcase_create("suspend");
	du_tcase(tc);
	tcase_add_test(tc, test_suspend);
	tcase_add_test(tc, test_suspend_periodic);
	tcase_add_test(tc, test_suspend_never_early);
	tcase_add_test(tc, test_suspend_restart_sigterm);
	tcase_add_test(tc, test_suspend_restart_sigkill);
	tcase_add_test(tc, test_suspend_bad_input);
	suite_add_tcase(s, tc);

	tc = tcase_create("zones");
	du_tcase(tc);
	tcase_add_test(tc, test_zone_change);
	tcase_add_test(tc, test_zone_new_dir);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(clock_suite());
}
