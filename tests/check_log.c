/*
 * check_log.c - the log's rate limiter (daemon/log.c), with time passed
 * in: exact bounds, no clock.
 *
 *   burst      BWD_RATELIMIT_BURST lines a second per uid, the rest held
 *              and reported by the next line after the window
 *   uids       one uid's flood does not hold back another's lines; two
 *              uids in one slot share its budget
 *   seeded     a random mix of uids and times against a simple model
 */
#include <check.h>
#include <inttypes.h>
#include <stdlib.h>

#include "daemon-internal.h"
#include "testutil.h"

#define S UINT64_C(1000000000)

START_TEST(test_burst)
{
	struct bwd_ratelimit *rl = calloc(1, sizeof(*rl));
	uint64_t held;
	uid_t who;
	unsigned passed = 0;

	ck_assert_ptr_nonnull(rl);
	for (unsigned i = 0; i < 100; i++) {
		passed += bwd_ratelimit_allow(rl, 1000, 5 * S + i * 1000, &held, &who);
		ck_assert_uint_eq(held, 0);
	}
	ck_assert_uint_eq(passed, BWD_RATELIMIT_BURST);
	/* Still inside the window, one ns before its end: held. */
	ck_assert(!bwd_ratelimit_allow(rl, 1000, 6 * S - 1, &held, &who));
	ck_assert_uint_eq(held, 0);
	/* The next window: the line goes, and says what was held. */
	ck_assert(bwd_ratelimit_allow(rl, 1000, 6 * S, &held, &who));
	ck_assert_uint_eq(held, 100 - BWD_RATELIMIT_BURST + 1);
	ck_assert_uint_eq(who, 1000);
	ck_assert(bwd_ratelimit_allow(rl, 1000, 6 * S + 1, &held, &who));
	ck_assert_uint_eq(held, 0);
	free(rl);
}
END_TEST

/* Which slot a uid's lines use: the one a fresh table fills. */
static unsigned slot_of(uid_t uid)
{
	struct bwd_ratelimit probe = { 0 };
	uint64_t held;
	uid_t who;

	bwd_ratelimit_allow(&probe, uid, 0, &held, &who);
	for (unsigned k = 0; k < BWD_RATELIMIT_SLOTS; k++)
		if (probe.slot[k].used)
			return k;
	ck_abort_msg("uid %ld filled no slot", (long)uid);
	return 0;
}

START_TEST(test_uids)
{
	struct bwd_ratelimit *rl = calloc(1, sizeof(*rl));
	unsigned flood = slot_of(65534);
	uid_t other = 1, same = 1;
	uint64_t held;
	uid_t who;

	ck_assert_ptr_nonnull(rl);
	while (slot_of(other) == flood)
		other++;
	while (same == 65534 || slot_of(same) != flood)
		same++;
	for (unsigned i = 0; i < 50; i++)
		bwd_ratelimit_allow(rl, 65534, S, &held, &who);
	/* A uid in another slot is not held back by that flood... */
	for (unsigned i = 0; i < BWD_RATELIMIT_BURST; i++)
		ck_assert(bwd_ratelimit_allow(rl, other, S + 1, &held, &who));
	/* ...one in the same slot shares its budget, so that two uids
	 * taking turns get no more than one: held, and reported as the last
	 * held once the window is over. */
	ck_assert(!bwd_ratelimit_allow(rl, same, S + 2, &held, &who));
	ck_assert(bwd_ratelimit_allow(rl, 65534, 2 * S, &held, &who));
	ck_assert_uint_eq(held, 50 - BWD_RATELIMIT_BURST + 1);
	ck_assert_uint_eq(who, same);
	free(rl);
}
END_TEST

/* The model: every line offered is let through, reported as held, or
 * still held in its slot; no slot lets through more than a burst per
 * window it opened. */
static void run_seeded(uint64_t seed)
{
	static const uid_t uids[] = { 0, 1, 1000, 1001, 65534, 123456, 7, 99 };
	enum { N = sizeof(uids) / sizeof(uids[0]) };
	struct bwd_ratelimit *rl = calloc(1, sizeof(*rl));
	uint64_t now = 0, offered = 0, passed = 0, reported = 0, pending = 0;
	uint64_t slot_passed[BWD_RATELIMIT_SLOTS] = { 0 };
	uint64_t slot_windows[BWD_RATELIMIT_SLOTS] = { 0 };
	uint64_t slot_start[BWD_RATELIMIT_SLOTS] = { 0 };
	struct tu_rng rng;

	ck_assert_ptr_nonnull(rl);
	tu_rng_seed(&rng, seed);
	for (unsigned i = 0; i < 200000; i++) {
		unsigned k = (unsigned)tu_rng_below(&rng, N), slot = slot_of(uids[k]);
		uint64_t held;
		uid_t who;
		bool ok;

		now += tu_rng_below(&rng, S / 500);
		offered++;
		ok = bwd_ratelimit_allow(rl, uids[k], now, &held, &who);
		if (rl->slot[slot].start_ns != slot_start[slot] || !slot_windows[slot]) {
			slot_windows[slot]++;
			slot_start[slot] = rl->slot[slot].start_ns;
		}
		passed += ok;
		slot_passed[slot] += ok;
		reported += held;
	}
	for (unsigned j = 0; j < BWD_RATELIMIT_SLOTS; j++) {
		pending += rl->slot[j].suppressed;
		ck_assert_msg(slot_passed[j] <= slot_windows[j] * BWD_RATELIMIT_BURST,
			      "seed %#" PRIx64 ": slot %u let %" PRIu64 " lines through in %" PRIu64
			      " windows", seed, j, slot_passed[j], slot_windows[j]);
	}
	ck_assert_msg(passed + reported + pending == offered,
		      "seed %#" PRIx64 ": %" PRIu64 " offered, %" PRIu64 " passed + %" PRIu64
		      " reported + %" PRIu64 " pending", seed, offered, passed, reported, pending);
	ck_assert_msg(passed < offered / 2, "seed %#" PRIx64 ": %" PRIu64 " of %" PRIu64
		      " lines let through: nothing was limited", seed, passed, offered);
	free(rl);
}

/* Fixed seeds, and one from BW_TEST_SEED (printed on failure). */
START_TEST(test_seeded)
{
	static const uint64_t seeds[] = { 0x10c, 0xbeef, 7 };

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
		run_seeded(seeds[i]);
	run_seeded(tu_seed_from_env("BW_TEST_SEED", 0x5eed));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc;

	tc = tcase_create("burst");
	tcase_add_test(tc, test_burst);
	suite_add_tcase(s, tc);
	tc = tcase_create("uids");
	tcase_add_test(tc, test_uids);
	suite_add_tcase(s, tc);
	tc = tcase_create("seeded");
	tcase_add_test(tc, test_seeded);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
