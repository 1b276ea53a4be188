/*
 * sim.h - a deterministic simulation of bitwheeld's delivery (issue 20),
 * of fires that fail (issue 21) and of timers on other clocks than
 * CLOCK_MONOTONIC (wall-clock, calendar and boottime ones, with steps of
 * the wall clock and suspends): the daemon's real state (daemon/state.c,
 * delivery.c, clock.c) on injected clocks, driven by random
 * events through simulated connections, and checked after every step
 * against a reference model (tests/sim.c says what it checks).
 *
 * The choices come from the caller (below): a seeded PRNG in
 * tests/check_sim.c and `make sim`, the input bytes in tests/fuzz_sim.c.
 * Nothing here reads the real clock or does I/O, so a run is a function
 * of its choices.
 */
#ifndef BW_SIM_H
#define BW_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sim_params {
	/* A choice in [0, n) (n >= 1). */
	uint64_t (*below)(void *arg, uint64_t n);
	void *arg;
	/* Hand out fires only when today's server would (an event activated
	 * the pump) instead of after every loop turn with work: the rule
	 * before issue 20, kept to show that the simulator finds the stall it
	 * caused. */
	bool old_pump;
};

struct sim;

struct sim_stats {
	uint64_t steps, turns, pumps, polls;
	uint64_t scheduled, handed_out, redelivered, acked, auto_acked;
	uint64_t attached, detached, checks;
	/* Fires that fail (issue 21): fires released (of them, with a
	 * delay), touched (and touches refused with HOLD_LIMIT), taken back to
	 * their queue's tail, dead-lettered, kicked back; policies set. */
	uint64_t released, released_delayed, touched, hold_limited, to_tail;
	uint64_t dead_lettered, kicked, policies;
	/* Other clocks (daemon/clock.c): wall-clock, calendar and boottime
	 * timers fired, fires handed out marked late; the wall clock's
	 * steps (of them, back), suspends, and the daemon's notices of them
	 * (its CLOCK_REALTIME and CLOCK_BOOTTIME timerfds). */
	uint64_t wall_fired, cal_fired, boot_fired, late_fires;
	uint64_t wall_steps, wall_steps_back, suspends, step_notices, boot_notices;
};

/* A simulation whose configuration (limits, wheel preset, clock jitter)
 * the first choices pick.  0 or -ENOMEM. */
int sim_new(const struct sim_params *p, struct sim **out);
void sim_free(struct sim *s);
/* One step: an event, the loop turns it causes, the checks.  0, or -1
 * when an invariant broke (sim_error says which, where and when). */
int sim_step(struct sim *s);
/* Run the simulated world until it is quiescent (every socket drained
 * and read, every fire due made and handed out where a consumer can take
 * it) and check it: what a run ends with.  0 or -1. */
int sim_settle(struct sim *s);
const char *sim_error(const struct sim *s);
/* One line: the configuration the first choices picked. */
const char *sim_config(const struct sim *s);
void sim_get_stats(const struct sim *s, struct sim_stats *out);

#endif /* BW_SIM_H */
