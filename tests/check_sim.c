/*
 * check_sim.c - the deterministic simulation of delivery (tests/sim.c,
 * issues 20 and 21): the daemon's real delivery code driven by random
 * events against a reference model, checked after every step: hand-outs,
 * acks and take-backs, fires that fail (deliveries and the blame
 * rule, dead letters, the queue's front and tail, Release now or delayed,
 * Touch and HOLD_LIMIT, SetPolicy, Kick), and wall-clock, calendar and
 * boottime timers across steps of the wall clock and suspends.
 *
 * TCases:
 *   seeds     fixed seeds, each a run of STEPS steps then settled (every
 *             socket drained and read, the loop idle, the quiet checks);
 *   found     runs of long mode that once failed, as far as their failure;
 *   env       BW_SIM_SEED's (default 1), printed on failure (with
 *             BW_SIM_OLD_PUMP set, under the pump rule before issue 20);
 *   rules     a run is a function of its seed (the same seed twice, the
 *             same figures); and the simulator finds the stall of the
 *             pump rule before issue 20 (hand out fires only when an
 *             event activated the pump): a consumer that only waits gets
 *             nothing more once its window drained by auto-ack; and the
 *             fixed seeds cover every edge of fires that fail (releases
 *             now and delayed, touches and HOLD_LIMIT, take-backs to the
 *             tail, dead letters, kicks, policies), so that the model
 *             cannot silently stop exercising one; and every edge of
 *             the other clocks (each kind fires, some late; steps forward
 *             and back; suspends).
 * A failure names the seed, the step, the simulated time and the broken
 * invariant; rerun it with BW_SIM_SEED=<seed>.
 *
 * Long mode (make sim SIM_STEPS=N [SIM_SEED=S]): BW_SIM_STEPS=N runs
 * seeds S, S+1, ... STEPS steps each until N steps are done, printing
 * each run's counts of the edges, and the steps per second.
 */
#define _GNU_SOURCE
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"
#include "testutil.h"

/* Steps per seed: some 0.2 s each. */
#define STEPS 20000u

static uint64_t below(void *arg, uint64_t n)
{
	return tu_rng_below(arg, n);
}

/* Run seed for steps (then settle); NULL when every check held, else the
 * failure, which the caller frees.  *st: the run's figures. */
static char *run(uint64_t seed, uint64_t steps, bool old_pump,
		 struct sim_stats *st)
{
	struct tu_rng rng;
	struct sim_params p = { .below = below, .arg = &rng, .old_pump = old_pump };
	struct sim *s;
	char *msg = NULL;
	int err = 0;

	tu_rng_seed(&rng, seed);
	ck_assert_int_eq(sim_new(&p, &s), 0);
	for (uint64_t i = 0; i < steps && !err; i++)
		err = sim_step(s);
	if (!err)
		err = sim_settle(s);
	if (err && asprintf(&msg, "seed %" PRIu64 " (%s): %s", seed, sim_config(s),
			    sim_error(s)) < 0)
		abort();
	sim_get_stats(s, st);
	sim_free(s);
	return msg;
}

static const uint64_t seeds[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };

/* Runs of long mode that once broke an invariant, each as far as its
 * failure, kept so that what was wrong stays found. */
static const struct found_run {
	uint64_t seed, steps;
} found_runs[] = {
	/* A calendar timer's fire made before the daemon heard of the
	 * suspend that made it due: the model held it to a write of its
	 * coalescing session that, by the daemon's clocks, came before it
	 * was due (sim.c, session_went). */
	{ 3966, 101800 },
	/* A far calendar timer placed again at its check after a step back
	 * the daemon had not heard of: its base, from before the step, was
	 * ahead of the clock, and the step's notice, which moved only the
	 * near timers, left it there (clock.c, "Near and far"). */
	{ 7015, 7000 },
};

START_TEST(test_seed_fixed)
{
	struct sim_stats st;
	char *msg = run(seeds[_i], STEPS, false, &st);

	ck_assert_msg(!msg, "%s", msg);
	ck_assert_msg(st.handed_out > 0 && st.scheduled > 0,
		      "seed %" PRIu64 ": nothing scheduled or handed out", seeds[_i]);
}
END_TEST

START_TEST(test_seed_env)
{
	uint64_t seed = tu_seed_from_env("BW_SIM_SEED", 1);
	const char *e = getenv("BW_SIM_STEPS");
	bool old = getenv("BW_SIM_OLD_PUMP") != NULL;
	uint64_t total = e ? strtoull(e, NULL, 10) : STEPS, done = 0;
	struct timespec a, b;
	double secs;

	clock_gettime(CLOCK_MONOTONIC, &a);
	while (done < total) {
		uint64_t n = total - done < 200000 ? total - done : 200000;
		struct sim_stats st;
		char *msg = run(seed, n, old, &st);

		ck_assert_msg(!msg, "%s", msg);
		done += n;
		if (e)
			printf("sim: seed %" PRIu64 ": %" PRIu64 " steps, %" PRIu64 " fires handed out, %" PRIu64 " redelivered (%" PRIu64 " to the tail), %" PRIu64 " released (%" PRIu64 " delayed), %" PRIu64 " touched (%" PRIu64 " HOLD_LIMIT), %" PRIu64 " dead-lettered, %" PRIu64 " kicked back, %" PRIu64 " policies; %" PRIu64 " wall-clock, %" PRIu64 " calendar and %" PRIu64 " boottime fires, %" PRIu64 " handed out late; %" PRIu64 " steps (%" PRIu64 " back), %" PRIu64 " suspends\n",
			       seed, n, st.handed_out, st.redelivered, st.to_tail,
			       st.released, st.released_delayed, st.touched,
			       st.hold_limited, st.dead_lettered, st.kicked,
			       st.policies, st.wall_fired, st.cal_fired, st.boot_fired,
			       st.late_fires, st.wall_steps, st.wall_steps_back,
			       st.suspends);
		seed++;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	if (e)
		printf("sim: %" PRIu64 " steps in %.1f s: %.0f steps/s\n", done, secs,
		       (double)done / secs);
}
END_TEST

START_TEST(test_found)
{
	struct sim_stats st;
	char *msg = run(found_runs[_i].seed, found_runs[_i].steps, false, &st);

	ck_assert_msg(!msg, "%s", msg);
}
END_TEST

START_TEST(test_deterministic)
{
	struct sim_stats a, b;
	char *m1 = run(11, 5000, false, &a), *m2 = run(11, 5000, false, &b);

	ck_assert_msg(!m1 && !m2, "%s", m1 ? m1 : m2);
	ck_assert_uint_eq(a.handed_out, b.handed_out);
	ck_assert_uint_eq(a.turns, b.turns);
	ck_assert_uint_eq(a.redelivered, b.redelivered);
	ck_assert_uint_eq(a.acked + a.auto_acked, b.acked + b.auto_acked);
}
END_TEST

/* The pump rule before issue 20 stalls a consumer that only waits: the
 * simulator must say so within the fixed seeds. */
START_TEST(test_finds_old_pump_stall)
{
	unsigned found = 0;

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		struct sim_stats st;
		char *msg = run(seeds[i], STEPS, true, &st);

		if (msg && strstr(msg, "stall")) {
			found++;
			free(msg);
		} else {
			ck_assert_msg(!msg, "seed %" PRIu64 ", old pump: not the stall: %s",
				      seeds[i], msg);
		}
	}
	ck_assert_msg(found > 0, "the old pump rule's stall went unnoticed in %zu seeds",
		      sizeof(seeds) / sizeof(seeds[0]));
}
END_TEST

/* The fixed seeds between them take every edge of fires that fail, and
 * of the other clocks: each kind of timer fires, some late, after steps
 * both ways and suspends. */
START_TEST(test_covers_failures)
{
	struct sim_stats sum = { 0 };

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		struct sim_stats st;
		char *msg = run(seeds[i], STEPS, false, &st);

		ck_assert_msg(!msg, "%s", msg);
		sum.released += st.released;
		sum.released_delayed += st.released_delayed;
		sum.touched += st.touched;
		sum.hold_limited += st.hold_limited;
		sum.to_tail += st.to_tail;
		sum.dead_lettered += st.dead_lettered;
		sum.kicked += st.kicked;
		sum.policies += st.policies;
		sum.wall_fired += st.wall_fired;
		sum.cal_fired += st.cal_fired;
		sum.boot_fired += st.boot_fired;
		sum.late_fires += st.late_fires;
		sum.wall_steps += st.wall_steps;
		sum.wall_steps_back += st.wall_steps_back;
		sum.suspends += st.suspends;
	}
	ck_assert_msg(sum.released > sum.released_delayed && sum.released_delayed &&
		      sum.touched && sum.hold_limited && sum.to_tail &&
		      sum.dead_lettered && sum.kicked && sum.policies,
		      "the fixed seeds miss an edge: %" PRIu64 " released (%" PRIu64 " delayed), %" PRIu64 " touched (%" PRIu64 " HOLD_LIMIT), %" PRIu64 " to the tail, %" PRIu64 " dead-lettered, %" PRIu64 " kicked, %" PRIu64 " policies",
		      sum.released, sum.released_delayed, sum.touched, sum.hold_limited,
		      sum.to_tail, sum.dead_lettered, sum.kicked, sum.policies);
	ck_assert_msg(sum.wall_fired && sum.cal_fired && sum.boot_fired && sum.late_fires &&
		      sum.wall_steps > sum.wall_steps_back && sum.wall_steps_back &&
		      sum.suspends,
		      "the fixed seeds miss an edge of the clocks: %" PRIu64 " wall-clock, %" PRIu64 " calendar, %" PRIu64 " boottime fires, %" PRIu64 " late; %" PRIu64 " steps (%" PRIu64 " back), %" PRIu64 " suspends",
		      sum.wall_fired, sum.cal_fired, sum.boot_fired, sum.late_fires,
		      sum.wall_steps, sum.wall_steps_back, sum.suspends);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sim");
	TCase *tc = tcase_create("seeds");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_seed_fixed, 0, (int)(sizeof(seeds) / sizeof(seeds[0])));
	suite_add_tcase(s, tc);
	tc = tcase_create("found");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_found, 0, (int)(sizeof(found_runs) / sizeof(found_runs[0])));
	suite_add_tcase(s, tc);
	tc = tcase_create("env");
	tcase_set_timeout(tc, getenv("BW_SIM_STEPS") ? 0 : 60);
	tcase_add_test(tc, test_seed_env);
	suite_add_tcase(s, tc);
	tc = tcase_create("rules");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_deterministic);
	tcase_add_test(tc, test_finds_old_pump_stall);
	tcase_add_test(tc, test_covers_failures);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
