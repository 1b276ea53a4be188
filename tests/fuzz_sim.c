/*
 * fuzz_sim.c - libFuzzer target for the deterministic simulation of
 * delivery (tests/sim.c): the input bytes are the simulation's choices
 * (its configuration, then every event and its parameters, a byte or more
 * each, little-endian), so libFuzzer explores interleavings of schedules,
 * cancels, attaches, drains, reads, acks, detaches and clock steps, and a
 * broken invariant of the reference model is a crash (the violation on
 * stderr).  When the bytes run out the world is settled and checked
 * quiet.  Built by `make fuzz` (tests/fuzz.mk).
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "sim.h"

/* At most this many steps per input: a step may move the clock seconds,
 * and libFuzzer's inputs are short anyway. */
#define MAX_STEPS 4096

struct bytes {
	const uint8_t *p;
	size_t n, at;
};

/* The next choice below n: as many bytes as n needs; 0 once they ran out. */
static uint64_t below(void *arg, uint64_t n)
{
	struct bytes *b = arg;
	uint64_t v = 0;

	for (uint64_t left = n - 1; left; left >>= 8) {
		if (b->at == b->n)
			return 0;
		v = v << 8 | b->p[b->at++];
	}
	return v % n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bytes b = { data, size, 0 };
	struct sim_params p = { .below = below, .arg = &b };
	struct sim *s;
	int err = 0;

	REQUIRE(sim_new(&p, &s) == 0);
	for (unsigned i = 0; i < MAX_STEPS && b.at < b.n && !err; i++)
		err = sim_step(s);
	if (!err)
		err = sim_settle(s);
	if (err) {
		fprintf(stderr, "fuzz_sim (%s): %s\n", sim_config(s), sim_error(s));
		REQUIRE(0);
	}
	sim_free(s);
	return 0;
}
