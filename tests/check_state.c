/*
 * check_state.c - the daemon's state (daemon/state.c) in process, on an
 * injected clock: how the fires the wheel fires become queued fires.
 *
 * The wheel fires a client's oneshot timer into its session's due list;
 * bwd_state_fire() makes the fires of those lists one session at a time,
 * a chunk per call (issue 12: one session's burst must not hold up
 * another's fires).  Checked exactly, with random sessions, deadlines and
 * polls (a fixed seed, then BW_TEST_SEED's, printed on failure):
 *   - per call, every session with fires due gets its turn: the counts
 *     made differ by at most one between sessions that still have some;
 *   - every timer fires once, never before its deadline, its fired_ns the
 *     poll's time (not the time its fire was made), each session's fires
 *     in the order the wheel fired them (polls in order);
 *   - a Cancel, or a replace, of a key the wheel fired and the state has
 *     not made yet behaves as for one already made: not pending, the
 *     fire still delivered, the new timer armed;
 *   - a journal and a snapshot taken while fires wait in due lists read
 *     back into the same fires and timers, nothing contradicting;
 *   - single acks over a window of 10,000 (issue 22): the steps of
 *     finding each fire in flight by its delivery number, counted in its
 *     consumer's map, O(1) a fire; the map's buckets charged to the uid
 *     while the consumer is there, and not after; fires touched to ack
 *     deadlines out of delivery order, taken back exactly when those
 *     pass, the flight's list, map, heap and cursor agreeing throughout;
 *   - leeways (issue 15): every combination of period and leeway goes to
 *     the lane the rule says and fires never early, within max(leeway,
 *     the finest lane's bound); leeways read back from the state files;
 *   - the blocks the state keeps for timers and fires (by payload size
 *     class) give every payload back as it was, whatever size took the
 *     block before;
 *   - group commit (daemon/journal.c) on a simulated sync executor and
 *     clock, against a model of what is durable: no reply early, none
 *     while the storage is down, none stalled, no lone record gathered
 *     (test_journal_sim, whose comment says how).
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon-internal.h"
#include "testutil.h"

#define MS 1000000ull
#define T0 (1000 * MS)
#define MAX_SESSIONS 6

static struct bwd_options opt;
static uint64_t seed;

static void options(void)
{
	char *args[] = { "check_state", "--max-timers", "1000000",
			 "--max-timers-per-uid", "1000000", NULL };

	ck_assert_int_eq(bwd_options_parse(sizeof(args) / sizeof(args[0]) - 1,
					   args, &opt), 0);
	bwd_log_set_level(BWD_LOG_ERR - 1);
}

static struct bwd_member *consumer_of(struct bwd_state *st, const char *name,
				      uid_t uid)
{
	struct bwd_attach a = {
		.name = name, .uid = uid, .owner_uid = uid, .consumer = true,
		.auto_ack = true, .window = 1u << 30, .owner = NULL,
	};
	struct bwd_member *m;
	bool resumed;

	ck_assert_int_eq(bwd_session_attach(st, &a, &m, &resumed), 0);
	bwd_member_set_room(m, true);
	return m;
}

static struct bwd_member *consumer(struct bwd_state *st, const char *name)
{
	return consumer_of(st, name, 1000);
}

static void schedule(struct bwd_member *m, uint64_t key, uint64_t at,
		     bool replace, bool *replaced)
{
	struct bwd_schedule req = { .key = key, .deadline_ns = at,
				    .replace = replace, .uid = 1000 };
	bool r;

	ck_assert_int_eq(bwd_timer_schedule(m->session, &req, replaced ? replaced : &r), 0);
}

/* Poll at now until the wheels have fired everything due: a burst comes
 * out of its uid's overflow store a poll limit at a time. */
static void poll_all(struct bwd_state *st, uint64_t now)
{
	uint64_t next;

	do
		bwd_state_poll(st, now);
	while (!bwd_state_next_deadline(st, &next) && next <= now);
}

/* Every fire that may go now, each checked against its session's last. */
struct seen {
	uint64_t last_fired[MAX_SESSIONS];
	uint64_t n[MAX_SESSIONS];
	uint8_t *key_seen[MAX_SESSIONS];
	size_t keys;
};

static int index_of(struct bwd_member **m, int n, const struct bwd_member *x)
{
	for (int i = 0; i < n; i++)
		if (m[i] == x)
			return i;
	ck_abort_msg("seed %" PRIu64 ": a fire for no member", seed);
	return -1;
}

static void drain(struct bwd_state *st, struct bwd_member **m, int n,
		  struct seen *sn)
{
	struct bwd_member *to;
	struct bwd_fire *f;

	while ((f = bwd_state_next_delivery(st, &to))) {
		int i = index_of(m, n, to);

		ck_assert_msg(f->deadline_ns <= f->fired_ns,
			      "seed %" PRIu64 ": key %" PRIu64 " fired early", seed, f->key);
		ck_assert_msg(f->fired_ns >= sn->last_fired[i],
			      "seed %" PRIu64 ": session %d: key %" PRIu64 " fired at %" PRIu64
			      " after one fired at %" PRIu64, seed, i, f->key, f->fired_ns,
			      sn->last_fired[i]);
		sn->last_fired[i] = f->fired_ns;
		if (sn->key_seen[i]) {
			ck_assert_msg(f->key < sn->keys && !sn->key_seen[i][f->key],
				      "seed %" PRIu64 ": session %d: key %" PRIu64 " twice",
				      seed, i, f->key);
			sn->key_seen[i][f->key] = 1;
		}
		sn->n[i]++;
		f->wire_end = 0;
		bwd_member_written(to, 1);
	}
}

/* One bwd_state_fire() call: each session with fires due gets its turn. */
static bool fire_fairly(struct bwd_state *st, struct bwd_member **m, int n)
{
	uint64_t before[MAX_SESSIONS], made[MAX_SESSIONS], lo = UINT64_MAX, hi = 0;
	bool had[MAX_SESSIONS], more;

	for (int i = 0; i < n; i++) {
		before[i] = m[i]->session->queued + m[i]->session->in_flight;
		had[i] = m[i]->session->due_head != NULL;
	}
	more = bwd_state_fire(st);
	for (int i = 0; i < n; i++) {
		made[i] = m[i]->session->queued + m[i]->session->in_flight - before[i];
		ck_assert_msg(!had[i] || made[i] > 0,
			      "seed %" PRIu64 ": session %d had fires due and got no turn",
			      seed, i);
		/* Those with some left were served all along. */
		if (had[i] && m[i]->session->due_head) {
			lo = made[i] < lo ? made[i] : lo;
			hi = made[i] > hi ? made[i] : hi;
		}
	}
	ck_assert_msg(hi == 0 || hi - lo <= 1,
		      "seed %" PRIu64 ": sessions left with fires due got %" PRIu64
		      " to %" PRIu64 " turns", seed, lo, hi);
	return more;
}

static void run_round_robin(uint64_t s)
{
	struct bwd_state *st;
	struct bwd_member *m[MAX_SESSIONS];
	struct seen sn = { 0 };
	struct tu_rng rng;
	uint64_t total[MAX_SESSIONS] = { 0 }, now = T0, pending = 0;
	int n;

	seed = s;
	tu_rng_seed(&rng, s);
	n = 2 + (int)tu_rng_below(&rng, MAX_SESSIONS - 1);
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	for (int i = 0; i < n; i++) {
		char name[16];
		/* Session 0 bursts: thousands at a few instants. */
		uint64_t k = i == 0 ? 2000 + tu_rng_below(&rng, 4000) :
				      tu_rng_below(&rng, 300);

		snprintf(name, sizeof(name), "s%d", i);
		m[i] = consumer(st, name);
		for (uint64_t j = 0; j < k; j++)
			schedule(m[i], j, T0 + MS * (1 + (i == 0 ?
				tu_rng_below(&rng, 3) * 7 : tu_rng_below(&rng, 30))),
				 false, NULL);
		total[i] = k;
		pending += k;
	}
	/* Polls of 1-4 ms, making fires only now and then, so that due
	 * lists span polls. */
	while (pending) {
		struct bwd_state_stats gs;

		now += MS * (1 + tu_rng_below(&rng, 4));
		bwd_state_poll(st, now);
		if (tu_rng_chance(&rng, 400000) || now > T0 + 40 * MS) {
			while (fire_fairly(st, m, n))
				drain(st, m, n, &sn);
			drain(st, m, n, &sn);
		}
		bwd_state_stats(st, &gs);
		pending = gs.timers + gs.queued + gs.in_flight;
		ck_assert_msg(now < T0 + 1000 * MS, "seed %" PRIu64 ": never all fired", s);
	}
	for (int i = 0; i < n; i++)
		ck_assert_msg(sn.n[i] == total[i], "seed %" PRIu64 ": session %d: %" PRIu64
			      " fires of %" PRIu64, s, i, sn.n[i], total[i]);
	bwd_state_free(st);
}

START_TEST(test_round_robin_fixed)
{
	options();
	for (uint64_t s = 1; s <= 20; s++)
		run_round_robin(s);
}
END_TEST

START_TEST(test_round_robin_env)
{
	options();
	run_round_robin(tu_seed_from_env("BW_TEST_SEED", 0x5eed));
}
END_TEST

/* The file dirfd/name, whole (caller frees). */
static uint8_t *slurp(int fd, size_t *len)
{
	off_t end = lseek(fd, 0, SEEK_END);
	uint8_t *buf = malloc((size_t)end + 1);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(pread(fd, buf, (size_t)end, 0), end);
	*len = (size_t)end;
	return buf;
}

/* A state file read back into a new state; *got: what it restored. */
static struct bwd_state *state_back(int fd, enum bwd_file_kind kind,
				    struct bwd_state_stats *got)
{
	struct bwd_state *st;
	struct bwd_replay rep;
	size_t len;
	uint8_t *buf = slurp(fd, &len);

	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	ck_assert_int_eq(bwd_store_replay(st, buf, len, "check", kind, &rep), 0);
	ck_assert_uint_eq(rep.contradictions, 0);
	ck_assert_int_eq(bwd_state_restore_finish(st, T0, got), 0);
	free(buf);
	return st;
}

/* Read a state file back into a new state: what it restored. */
static struct bwd_state_stats read_back(int fd, enum bwd_file_kind kind)
{
	struct bwd_state_stats got;

	bwd_state_free(state_back(fd, kind, &got));
	return got;
}

/* A new state journaling to generation 1 of a new directory (dir, a
 * mkdtemp template; *dirfd open on it), and its end: all of it freed and
 * removed. */
static struct bwd_state *journaled(char *dir, int *dirfd,
				   struct bwd_journal **j)
{
	struct bwd_state *st;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	*dirfd = open(dir, O_DIRECTORY | O_RDONLY);
	ck_assert_int_ge(*dirfd, 0);
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	ck_assert_int_eq(bwd_journal_open(*dirfd, 1, BWD_FSYNC_NEVER, j), 0);
	bwd_state_set_journal(st, *j);
	return st;
}

static void journaled_end(struct bwd_state *st, struct bwd_journal *j,
			  const char *dir, int dirfd)
{
	char name[32];

	bwd_state_free(st);
	bwd_journal_close(j);
	bwd_journal_name(1, name);
	ck_assert_int_eq(unlinkat(dirfd, name, 0), 0);
	close(dirfd);
	ck_assert_int_eq(rmdir(dir), 0);
}

/* st's journal (generation 1, in dirfd), or a snapshot of st: a file to
 * read back. */
static int state_file(const struct bwd_state *st, int dirfd,
		      enum bwd_file_kind kind)
{
	char name[32];
	int fd;

	if (kind == BWD_FILE_JOURNAL) {
		bwd_journal_name(1, name);
		fd = openat(dirfd, name, O_RDONLY);
	} else {
		fd = memfd_create("check_state", MFD_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(bwd_snapshot_write(st, fd, 1), 0);
	}
	ck_assert_int_ge(fd, 0);
	return fd;
}

#define NBURST 3000

/*
 * A burst of NBURST at one instant, fired by the wheel, none made yet:
 * Cancel of key 5 is not pending, a replace of key 7 replaces nothing, a
 * Schedule of key 9 is no duplicate; every fire of the burst comes, once,
 * fired at the poll's time; keys 7 and 9 are pending anew.  A snapshot
 * then, and the journal of all of it, read back the same.
 */
START_TEST(test_cancel_between_fire_and_make)
{
	char dir[] = "/tmp/check_state.XXXXXX";
	struct bwd_state *st;
	struct bwd_member *m;
	struct bwd_journal *j;
	struct bwd_state_stats gs, rs;
	struct seen sn = { 0 };
	uint64_t poll_at = T0 + 5 * MS;
	bool pending, replaced;
	int dirfd, fd;

	seed = 0;
	options();
	st = journaled(dir, &dirfd, &j);
	m = consumer(st, "burst");
	for (uint64_t k = 0; k < NBURST; k++)
		schedule(m, k, T0 + 2 * MS, false, NULL);
	poll_all(st, poll_at);
	ck_assert_ptr_nonnull(m->session->due_head);

	ck_assert_int_eq(bwd_timer_cancel(m->session, 5, &pending), 0);
	ck_assert(!pending);
	schedule(m, 7, T0 + 3600000 * MS, true, &replaced);
	ck_assert(!replaced);
	schedule(m, 9, T0 + 3600000 * MS, false, &replaced);
	ck_assert(!replaced);

	/* A snapshot now: the fired ones are fires owed, 7 and 9 timers. */
	fd = state_file(st, dirfd, BWD_FILE_SNAPSHOT);
	rs = read_back(fd, BWD_FILE_SNAPSHOT);
	close(fd);
	ck_assert_uint_eq(rs.queued, NBURST);
	ck_assert_uint_eq(rs.timers, 2);

	sn.keys = NBURST;
	sn.key_seen[0] = calloc(NBURST, 1);
	ck_assert_ptr_nonnull(sn.key_seen[0]);
	while (bwd_state_fire(st))
		;
	/* Not delivered: the queue is what the journal must say is owed. */
	bwd_state_stats(st, &gs);
	ck_assert_uint_eq(gs.queued, NBURST);
	ck_assert_uint_eq(gs.timers, 2);
	ck_assert_int_eq(bwd_journal_write(j), 0);
	fd = state_file(st, dirfd, BWD_FILE_JOURNAL);
	rs = read_back(fd, BWD_FILE_JOURNAL);
	close(fd);
	ck_assert_uint_eq(rs.queued, NBURST);
	ck_assert_uint_eq(rs.timers, 2);

	drain(st, &m, 1, &sn);
	ck_assert_uint_eq(sn.n[0], NBURST);
	ck_assert_uint_eq(sn.last_fired[0], poll_at);
	for (uint64_t k = 0; k < NBURST; k++)
		ck_assert_msg(sn.key_seen[0][k], "key %" PRIu64 " never came", k);
	bwd_state_stats(st, &gs);
	ck_assert_uint_eq(gs.timers, 2);
	ck_assert_int_eq(bwd_timer_cancel(m->session, 7, &pending), 0);
	ck_assert(pending);
	ck_assert_int_eq(bwd_timer_cancel(m->session, 9, &pending), 0);
	ck_assert(pending);

	free(sn.key_seen[0]);
	journaled_end(st, j, dir, dirfd);
}
END_TEST

/*
 * Single acks over a window of SINGLE_N, their cost counted (issue 22):
 * every fire in flight is in its consumer's map, and finding each of them
 * once walks, over all of them, the nodes before it in its bucket's chain
 * and itself: at most 2 a fire on average and 32 at worst, where the walk
 * of the flight from its oldest fire that a single ack took before cost
 * 50,005,000 for acks newest first.  Then acknowledged so, each once
 * (again: 0), nothing left in flight; the uid's bytes come back to the
 * map's buckets alone, and to 0 when the consumer leaves.
 */
#define SINGLE_N 10000u
START_TEST(test_single_acks_counted)
{
	struct bwd_attach a = {
		.name = "single", .uid = 1000, .owner_uid = 1000, .consumer = true,
		.window = SINGLE_N,
	};
	struct bwd_state *st;
	struct bwd_member *m, *to;
	struct bwd_uid_usage u;
	struct bwd_fire *f;
	uint64_t steps = 0, longest = 0, acked;
	bool resumed;

	options();
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	ck_assert_int_eq(bwd_state_conn_open(st, 1000), 0);
	ck_assert_int_eq(bwd_session_attach(st, &a, &m, &resumed), 0);
	for (uint64_t k = 0; k < SINGLE_N; k++)
		schedule(m, k, T0 + MS, false, NULL);
	/* The wheel fires a bounded number a poll. */
	for (uint64_t d = 1, polls = 0; d <= SINGLE_N;) {
		if (!(f = bwd_state_next_delivery(st, &to))) {
			ck_assert_uint_lt(polls++, SINGLE_N);
			bwd_state_poll(st, T0 + 5 * MS);
			while (bwd_state_fire(st))
				;
			continue;
		}
		ck_assert_ptr_eq(to, m);
		ck_assert_uint_eq(bwd_fire_delivery(f), d++);
	}
	ck_assert_ptr_null(bwd_state_next_delivery(st, &to));
	ck_assert_uint_eq(m->flight, SINGLE_N);
	ck_assert_uint_eq(m->flights.count, SINGLE_N);
	for (size_t b = 0; b <= m->flights.mask; b++) {
		uint64_t i = 0;

		for (const struct bwd_map_node *n = m->flights.bucket[b]; n; n = n->next)
			steps += ++i;
		longest = i > longest ? i : longest;
	}
	ck_assert_msg(steps <= 2 * SINGLE_N && longest <= 32,
		      "finding each of %u fires in flight: %" PRIu64 " steps, %" PRIu64 " at most",
		      SINGLE_N, steps, longest);
	for (uint64_t d = SINGLE_N; d > 0; d--) {
		ck_assert_int_eq(bwd_member_ack(m, d, false, &acked), 0);
		ck_assert_msg(acked == 1, "single ack of %" PRIu64 ": %" PRIu64, d, acked);
		ck_assert_int_eq(bwd_member_ack(m, d, false, &acked), 0);
		ck_assert_uint_eq(acked, 0);
	}
	ck_assert_uint_eq(m->flight, 0);
	ck_assert_uint_eq(m->flights.count, 0);
	ck_assert_ptr_null(m->flight_head);
	ck_assert_ptr_null(m->flight_tail);
	bwd_state_uid_usage(st, 1000, &u);
	ck_assert_uint_eq(u.in_flight, 0);
	ck_assert_uint_eq(u.bytes, bwd_map_bytes(&m->flights) - m->flights_base);
	bwd_member_detach(m);
	bwd_state_uid_usage(st, 1000, &u);
	ck_assert_uint_eq(u.bytes, 0);
	bwd_state_conn_close(st, 1000);
	bwd_state_free(st);
}
END_TEST

/* The injected clock of test_touched_deadlines. */
static uint64_t fake_now(void *arg)
{
	return *(const uint64_t *)arg;
}

#define FLIGHT_OK(cond) \
	ck_assert_msg(cond, "seed %" PRIu64 ": the flight is not as kept: %s", seed, #cond)

/* m's fires in flight, as delivery.c keeps them: the list in delivery
 * order, each in the map by its number; the touched ones a heap by ack
 * deadline (each knowing its place), the first untouched one the cursor. */
static void flight_consistent(const struct bwd_member *m)
{
	const struct bwd_fire *first = NULL, *prev = NULL;
	uint64_t n = 0, touched = 0;

	for (const struct bwd_fire *f = m->flight_head; f; prev = f, f = f->next, n++) {
		FLIGHT_OK(prev ? f->pprev == &prev->next : f->pprev == &m->flight_head);
		FLIGHT_OK(!prev || bwd_fire_delivery(prev) < bwd_fire_delivery(f));
		FLIGHT_OK(bwd_map_find(&m->flights, bwd_fire_delivery(f)) == &f->flight_node);
		if (f->heap_at) {
			FLIGHT_OK(f->heap_at <= m->touched);
			FLIGHT_OK(m->touch_heap[f->heap_at - 1] == f);
			touched++;
		} else if (!first) {
			first = f;
		}
	}
	FLIGHT_OK(m->flight_tail == prev);
	FLIGHT_OK(n == m->flight);
	FLIGHT_OK(m->flights.count == n);
	FLIGHT_OK(touched == m->touched);
	FLIGHT_OK(m->untouched == first);
	for (uint32_t i = 1; i < m->touched; i++)
		FLIGHT_OK(m->touch_heap[(i - 1) / 2]->ack_by_ns <= m->touch_heap[i]->ack_by_ns);
}

/*
 * Touched fires' ack deadlines, out of delivery order (issue 22: a Touch,
 * and the ack timer it moves, O(log(touched)) rather than a look at every
 * fire in flight): TOUCHED_N fires handed out at once with an ack timeout
 * of 1 s; a random half touched (some twice, some to before the others'
 * deadline), a random quarter acknowledged singly; then the clock moves
 * on in steps, the wheel polled: after each, a fire is in flight exactly
 * when its deadline has not passed (give or take the oneshot lane's bound
 * the timer may come late), and the flight's list, map, heap and cursor
 * agree.  A fixed seed, then BW_TEST_SEED's.
 */
#define TOUCHED_N 3000u
START_TEST(test_touched_deadlines)
{
	struct bwd_attach a = {
		.name = "touched", .uid = 1000, .owner_uid = 1000, .consumer = true,
		.window = TOUCHED_N, .ack_timeout_ns = 1000 * MS,
	};
	uint64_t *ack_by = calloc(TOUCHED_N + 1, sizeof(*ack_by)), now = T0, acked, at;
	uint64_t bound;
	struct bwd_state *st;
	struct bwd_member *m, *to;
	struct bwd_fire *f;
	struct tu_rng rng;
	bool resumed, touched;

	ck_assert_ptr_nonnull(ack_by);
	seed = _i ? tu_seed_from_env("BW_TEST_SEED", 2022) : 22;
	tu_rng_seed(&rng, seed);
	options();
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	bwd_state_set_clock(st, fake_now, &now);
	bound = bwd_lane_late_ns(&opt.wheel.oneshot);
	ck_assert_int_eq(bwd_session_attach(st, &a, &m, &resumed), 0);
	for (uint64_t k = 0; k < TOUCHED_N; k++)
		schedule(m, k, T0, false, NULL);
	for (uint64_t d = 1, polls = 0; d <= TOUCHED_N;) {
		if (!(f = bwd_state_next_delivery(st, &to))) {
			ck_assert_uint_lt(polls++, TOUCHED_N);
			bwd_state_poll(st, now);
			while (bwd_state_fire(st))
				;
			continue;
		}
		ack_by[d++] = f->ack_by_ns;
	}
	flight_consistent(m);
	for (uint64_t i = 0; i < TOUCHED_N; i++) {
		uint64_t d = 1 + tu_rng_below(&rng, TOUCHED_N), r = tu_rng_below(&rng, 4);

		if (!ack_by[d])
			continue;
		if (r == 0) {
			ck_assert_int_eq(bwd_member_ack(m, d, false, &acked), 0);
			ck_assert_uint_eq(acked, 1);
			ack_by[d] = 0;
		} else {
			uint64_t t = 1 + tu_rng_below(&rng, 3000 * MS);

			ck_assert_int_eq(bwd_member_touch(m, d, t, &touched, &at), 0);
			ck_assert(touched);
			ck_assert_uint_eq(at, now + t);
			ack_by[d] = at;
		}
		if (i % 256 == 0)
			flight_consistent(m);
	}
	flight_consistent(m);
	while (now < T0 + 3500 * MS) {
		now += tu_rng_below(&rng, 100 * MS);
		bwd_state_poll(st, now);
		flight_consistent(m);
		for (uint64_t d = 1; d <= TOUCHED_N; d++) {
			bool in = bwd_map_find(&m->flights, d) != NULL;

			if (!ack_by[d])
				continue;
			ck_assert_msg(in || ack_by[d] <= now,
				      "seed %" PRIu64 ": delivery %" PRIu64 " taken back %" PRIu64
				      " ns before its ack deadline", seed, d, ack_by[d] - now);
			ck_assert_msg(!in || ack_by[d] + bound > now,
				      "seed %" PRIu64 ": delivery %" PRIu64 " in flight %" PRIu64
				      " ns past its ack deadline", seed, d, now - ack_by[d]);
		}
	}
	ck_assert_uint_eq(m->flight, 0);
	ck_assert_uint_eq(m->touched, 0);
	bwd_state_free(st);
	free(ack_by);
}
END_TEST

/* A session that ends with fires waiting in its due list frees them, and
 * the uid's counts go back to nothing. */
START_TEST(test_end_with_due)
{
	struct bwd_state *st;
	struct bwd_uid_usage u;
	struct bwd_attach a = { .uid = 1000, .owner_uid = 1000 };
	struct bwd_member *m;
	bool resumed;

	options();
	for (int big = 0; big < 2; big++) {
		uint64_t n = big ? 5000 : 100;

		ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
		/* A connection keeps the uid's entry, and its counts. */
		ck_assert_int_eq(bwd_state_conn_open(st, 1000), 0);
		ck_assert_int_eq(bwd_session_attach(st, &a, &m, &resumed), 0);
		for (uint64_t k = 0; k < n; k++)
			schedule(m, k, T0 + (1 + k % 2) * MS, false, NULL);
		poll_all(st, T0 + 5 * MS);
		bwd_state_fire(st);
		bwd_member_detach(m);
		while (bwd_state_reap(st))
			;
		ck_assert(!bwd_state_fire(st));
		bwd_state_uid_usage(st, 1000, &u);
		ck_assert_uint_eq(u.timers, 0);
		ck_assert_uint_eq(u.bytes, 0);
		ck_assert_uint_eq(u.queued, 0);
		ck_assert_uint_eq(u.lane[BW_LANE_ONESHOT].pending, 0);
		ck_assert_uint_eq(u.lane[BW_LANE_ONESHOT].fired, n);
		bwd_state_conn_close(st, 1000);
		bwd_state_free(st);
	}
}
END_TEST

/*
 * Timers and fires live in blocks the state keeps once freed, by payload
 * size class (state.c, "Blocks"): every payload, 0 to 80 bytes (past the
 * largest class kept too), comes out of its fire as it went in, round
 * after round of blocks freed and taken again by payloads of other sizes
 * in their class, periodic fires (made in the callback) among them; and
 * the uid's bytes go back to 0.
 */
static uint8_t payload_byte(uint64_t key, size_t i)
{
	return (uint8_t)(key * 31 + i * 7 + 1);
}

START_TEST(test_kept_blocks_payloads)
{
	struct bwd_state *st;
	struct bwd_member *m;
	struct bwd_uid_usage u;
	struct bwd_fire *f;
	uint8_t buf[81];
	uint64_t key = 0;

	options();
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	ck_assert_int_eq(bwd_state_conn_open(st, 1000), 0);
	m = consumer(st, "blocks");
	for (int round = 0; round < 4; round++) {
		uint64_t now = T0 + (uint64_t)(round + 1) * 10 * MS, first = key;
		size_t got = 0, want = 0;
		bool replaced;

		for (size_t len = 0; len <= 80; len++, key++) {
			/* Each round the lengths go the other way: a block goes
			 * to a payload of another size in its class. */
			size_t n = round % 2 ? 80 - len : len;
			bool periodic = key % 5 == 0;
			struct bwd_schedule req = {
				.key = key, .deadline_ns = now - 5 * MS,
				.period_ns = periodic ? 1000 * MS : 0,
				.has_payload = n > 0, .payload = buf,
				.payload_len = (uint32_t)n, .uid = 1000,
				.leeway_ns = 0,
			};

			for (size_t i = 0; i < n; i++)
				buf[i] = payload_byte(key, i);
			ck_assert_int_eq(bwd_timer_schedule(m->session, &req, &replaced), 0);
			want++;
		}
		poll_all(st, now);
		while (bwd_state_fire(st))
			;
		while ((f = bwd_state_next_delivery(st, &m))) {
			size_t n = round % 2 ? 80 - (f->key - first) : f->key - first;

			ck_assert_uint_ge(f->key, first);
			ck_assert_uint_eq(f->payload_len, n);
			ck_assert(f->has_payload == (n > 0));
			for (size_t i = 0; i < n; i++)
				ck_assert_msg(f->payload[i] == payload_byte(f->key, i),
					      "round %d key %" PRIu64 ": byte %zu of %zu",
					      round, f->key, i, n);
			got++;
			f->wire_end = 0;
			bwd_member_written(m, 1);
		}
		ck_assert_uint_eq(got, want);
		/* The periodic ones stop here: their blocks are kept too. */
		for (uint64_t k = first; k < key; k++) {
			bool pending;

			ck_assert_int_eq(bwd_timer_cancel(m->session, k, &pending), 0);
			ck_assert(pending == (k % 5 == 0));
		}
	}
	bwd_state_uid_usage(st, 1000, &u);
	ck_assert_uint_eq(u.timers, 0);
	ck_assert_uint_eq(u.queued, 0);
	ck_assert_uint_eq(u.bytes, 0);
	bwd_member_detach(m);
	bwd_state_conn_close(st, 1000);
	bwd_state_free(st);
}
END_TEST

/*
 * A CalendarReply at its widest (the longest zone name bwd_tz_get()
 * takes, the longest normalized form, 1,000 elapses of 10 bytes) packs
 * within BWD_CALENDAR_REPLY_MAX + the form + 10 bytes an elapse, which
 * request.c counts on to keep it inside max_frame.
 */
static void calendar_reply_bound(Bitwheel__V1__Envelope *env)
{
	Bitwheel__V1__CalendarReply cr = BITWHEEL__V1__CALENDAR_REPLY__INIT;
	static uint64_t elapses[BWD_CAL_ITERATIONS_MAX];
	static char zone[200], norm[4096];

	memset(zone, 'Z', sizeof(zone) - 1);
	memset(norm, '*', sizeof(norm) - 1);
	for (size_t i = 0; i < BWD_CAL_ITERATIONS_MAX; i++)
		elapses[i] = UINT64_MAX;
	env->body_case = BITWHEEL__V1__ENVELOPE__BODY_CALENDAR_REPLY;
	env->calendar_reply = &cr;
	cr.zone = zone;
	cr.normalized = norm + sizeof(norm) - 1;
	cr.has_base_realtime_ns = cr.has_gave_up = cr.gave_up = 1;
	cr.base_realtime_ns = UINT64_MAX;
	ck_assert_uint_le(bitwheel__v1__envelope__get_packed_size(env),
			  BWD_CALENDAR_REPLY_MAX);
	cr.normalized = norm;
	cr.n_elapses_realtime_ns = BWD_CAL_ITERATIONS_MAX;
	cr.elapses_realtime_ns = elapses;
	ck_assert_uint_le(bitwheel__v1__envelope__get_packed_size(env),
			  BWD_CALENDAR_REPLY_MAX + strlen(norm) +
			  10 * BWD_CAL_ITERATIONS_MAX);
}

/*
 * The listing bounds (daemon-internal.h) hold: an entry with every field
 * at its widest, and a reply around it, pack within what request.c
 * counts on to keep a page inside max_frame; and the Calendar reply's.
 */
START_TEST(test_list_entry_bounds)
{
	static const uint8_t name[BWP_SESSION_NAME_MAX] = { 'a' };
	Bitwheel__V1__SessionInfo si = BITWHEEL__V1__SESSION_INFO__INIT, *sp = &si;
	Bitwheel__V1__Policy pol = BITWHEEL__V1__POLICY__INIT;
	Bitwheel__V1__TimerInfo ti = BITWHEEL__V1__TIMER_INFO__INIT, *tp = &ti;
	char spec[BWD_CAL_TIMER_SPEC_MAX + 1];
	Bitwheel__V1__ListSessionsReply sr = BITWHEEL__V1__LIST_SESSIONS_REPLY__INIT;
	Bitwheel__V1__ListTimersReply tr = BITWHEEL__V1__LIST_TIMERS_REPLY__INIT;
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	size_t one;

	si.has_name = si.has_owner_uid = si.has_timers = si.has_queued = 1;
	si.name.data = (uint8_t *)name;
	si.name.len = sizeof(name);
	si.owner_uid = UINT32_MAX;
	si.timers = si.queued = UINT64_MAX;
	si.has_in_flight = si.has_consumers = si.has_producers = 1;
	si.in_flight = UINT64_MAX;
	si.consumers = si.producers = UINT32_MAX;
	si.has_idle_ns = si.has_expires_in_ns = si.has_dropped = si.has_pid = 1;
	si.idle_ns = si.expires_in_ns = si.dropped = UINT64_MAX;
	si.pid = UINT32_MAX;
	si.policy = &pol;
	pol.has_max_deliveries = pol.has_dead_letter = pol.has_explicit_ = 1;
	pol.max_deliveries = UINT32_MAX;
	pol.dead_letter.data = (uint8_t *)name;
	pol.dead_letter.len = sizeof(name);
	pol.explicit_ = 1;
	si.has_dead_letters = si.has_delayed = si.has_dead_lettered = 1;
	si.dead_letters = si.delayed = si.dead_lettered = UINT64_MAX;
	ti.has_key = ti.has_deadline_ns = ti.has_period_ns = 1;
	ti.key = ti.deadline_ns = ti.period_ns = UINT64_MAX;
	ti.has_payload_bytes = ti.has_has_payload = ti.has_fire_count = 1;
	ti.payload_bytes = UINT32_MAX;
	ti.has_payload = 1;
	ti.fire_count = UINT64_MAX;
	ti.has_late = ti.late = ti.has_lane = 1;
	ti.lane = BITWHEEL__V1__LANE__LANE_PERIODIC;

	env.has_request_id = 1;
	env.request_id = UINT64_MAX;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS_REPLY;
	env.list_sessions_reply = &sr;
	sr.has_more = sr.more = sr.has_cursor = 1;
	sr.cursor = UINT64_MAX;
	ck_assert_uint_le(bitwheel__v1__envelope__get_packed_size(&env),
			  BWD_SESSIONS_REPLY_MAX);
	sr.n_sessions = 1;
	sr.sessions = &sp;
	one = bitwheel__v1__envelope__get_packed_size(&env);
	ck_assert_uint_le(one, BWD_SESSIONS_REPLY_MAX + BWD_SESSION_ENTRY_MAX);
	ck_assert_uint_le(bitwheel__v1__session_info__get_packed_size(&si) + 3,
			  BWD_SESSION_ENTRY_MAX);

	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS_REPLY;
	env.list_timers_reply = &tr;
	tr.has_more = tr.more = tr.has_cursor = tr.has_total = 1;
	tr.cursor = tr.total = UINT64_MAX;
	tr.has_owner_uid = tr.has_now_ns = tr.has_realtime_ns = 1;
	tr.owner_uid = UINT32_MAX;
	tr.now_ns = tr.realtime_ns = UINT64_MAX;
	ck_assert_uint_le(bitwheel__v1__envelope__get_packed_size(&env),
			  BWD_TIMERS_REPLY_MAX);
	/* Entry length prefixes: 1 byte each below 128, 2 for the reply's
	 * body up to 16 KiB, 3 beyond (counted in the reply's bound). */
	ck_assert_uint_le(bitwheel__v1__timer_info__get_packed_size(&ti) + 2,
			  BWD_TIMER_ENTRY_MAX);
	tr.n_timers = 1;
	tr.timers = &tp;
	ck_assert_uint_le(bitwheel__v1__envelope__get_packed_size(&env),
			  BWD_TIMERS_REPLY_MAX + BWD_TIMER_ENTRY_MAX);
	/* A calendar timer's (a oneshot's period, a wall-clock deadline):
	 * what BWD_CAL_ENTRY_EXTRA adds for its listed spec. */
	memset(spec, 'x', sizeof(spec) - 1);
	spec[sizeof(spec) - 1] = '\0';
	ti.period_ns = 0;
	ti.has_deadline_realtime_ns = 1;
	ti.deadline_realtime_ns = UINT64_MAX;
	ti.calendar = spec;
	ti.has_jitter_ns = ti.has_jitter_fixed = ti.has_misfire_grace_ns = 1;
	ti.jitter_ns = ti.misfire_grace_ns = UINT64_MAX;
	ti.jitter_fixed = 1;
	ck_assert_uint_le(bitwheel__v1__timer_info__get_packed_size(&ti) + 3,
			  BWD_TIMER_ENTRY_MAX + BWD_CAL_ENTRY_EXTRA(sizeof(spec) - 1));
	calendar_reply_bound(&env);
}
END_TEST

#define SCAN_NODES 300

struct scan_seen {
	unsigned count[SCAN_NODES];
	struct bwd_map_node *node;     /* the array the nodes are in        */
	unsigned visits, stop_every;   /* refuse every stop_every-th visit  */
};

static bool scan_visit(void *arg, struct bwd_map_node *n)
{
	struct scan_seen *sn = arg;

	if (sn->stop_every && ++sn->visits % sn->stop_every == 0)
		return false;
	sn->count[n - sn->node]++;
	return true;
}

/*
 * bwd_map_scan over maps whose chains are long (the map could not grow:
 * one bucket, then four) and hold keys twice: every key is handed over
 * once, however small the work bound and wherever visit refuses, resuming
 * from *pos each time; and an empty map is done at once.
 */
START_TEST(test_map_scan_long_chains)
{
	static struct bwd_map_node nodes[SCAN_NODES];
	struct bwd_map_node *bucket[4];
	struct tu_rng r;
	static const size_t works[] = { 3, 17, 40, 16384 };

	tu_rng_seed(&r, tu_seed_from_env("BW_TEST_SEED", 0x5ca9));
	for (size_t masks = 0; masks < 2; masks++) {
		struct bwd_map m = { .bucket = bucket, .mask = masks ? 3 : 0,
				     .seed = tu_rng_next(&r) };

		memset(bucket, 0, sizeof(bucket));
		/* Insert straight into the buckets: as if growing had failed.
		 * The last 20 nodes repeat earlier keys. */
		for (size_t i = 0; i < SCAN_NODES; i++) {
			nodes[i].key = i < SCAN_NODES - 20 ? tu_rng_next(&r) : nodes[i - 100].key;
			m.count = 0;
			bwd_map_insert(&m, &nodes[i]);
			ck_assert_ptr_eq(m.bucket, bucket);
		}
		for (size_t w = 0; w < sizeof(works) / sizeof(works[0]); w++) {
			for (unsigned stop = 0; stop < 8; stop += 7) {
				struct scan_seen sn = { .node = nodes, .stop_every = stop };
				uint64_t pos = 0;
				unsigned rounds = 0;

				while (!bwd_map_scan(&m, &pos, works[w], scan_visit, &sn))
					ck_assert_uint_lt(++rounds, 100000);
				for (size_t i = 0; i < SCAN_NODES - 20; i++) {
					unsigned twin = i + 100 >= SCAN_NODES - 20 &&
						i + 100 < SCAN_NODES ? sn.count[i + 100] : 0;

					ck_assert_msg(sn.count[i] + twin == 1,
						      "mask %zu work %zu stop %u: key %zu handed %u+%u times",
						      m.mask, works[w], stop, i, sn.count[i], twin);
				}
			}
		}
	}
	{
		struct bwd_map e;
		uint64_t pos = 0;
		struct scan_seen sn = { .node = nodes };

		ck_assert_int_eq(bwd_map_init(&e, 1), 0);
		ck_assert(bwd_map_scan(&e, &pos, 100, scan_visit, &sn));
		bwd_map_fini(&e);
	}
}
END_TEST

/* ---- leeway and lanes --------------------------------------------------- */

/* The configurations the model runs: the dual presets, and a periodic
 * lane whose full slots displace timers by probing (its bound is then 4
 * ticks, 400 ms). */
static const char *const lane_configs[][5] = {
	{ "-p", "standard-balanced", NULL },
	{ "-p", "fast-precise", NULL },
	{ "-p", "standard-burst", NULL },
	{ "--periodic-probes", "4", "--periodic-slot-cap", "1", NULL },
};
#define NCONFIGS (sizeof(lane_configs) / sizeof(lane_configs[0]))

static void options_with(const char *const *extra)
{
	char *args[16] = { "check_state", "--max-timers", "1000000",
			   "--max-timers-per-uid", "1000000" };
	int n = 5;

	while (*extra)
		args[n++] = (char *)*extra++;
	args[n] = NULL;
	bwd_options_free(&opt);
	ck_assert_int_eq(bwd_options_parse(n, args, &opt), 0);
	bwd_log_set_level(BWD_LOG_ERR - 1);
}

#define LW_FIRES 20      /* a periodic timer's fires before its cancel  */
#define LW_COPIES 6      /* timers per combination                      */
#define NO_LEEWAY UINT64_MAX

/* A lane's bound by the rule PROTOCOL.md states: tick times probes. */
static uint64_t bound_of(const struct bw_config *c)
{
	return (uint64_t)c->resolution_ms * MS * c->max_probes;
}

struct lw_timer {
	uint64_t period, leeway;   /* leeway: as asked, NO_LEEWAY absent   */
	uint64_t allowed;          /* the guarantee: max(leeway, finest)   */
	uint64_t lane_bound;       /* the bound of the lane it must be in  */
	uint64_t fires;
};

/*
 * Every combination of period (oneshot, small, 250 ms, an hour) and
 * leeway (0, 10 ms, 1 s, absent), LW_COPIES of each on deadlines that
 * crowd a few ticks: each goes to the lane the rule says (the uid's lane
 * counters), and each fire comes never before its deadline and within
 * max(leeway, the finest lane's bound), strictly within its lane's bound,
 * whether the clock jumps to the next deadline or polls in between.
 */
static void run_leeway(const char *const *config, uint64_t s)
{
	static const uint64_t leeways[] = { 0, 10 * MS, 1000 * MS, NO_LEEWAY };
	struct lw_timer tm[4 * 4 * LW_COPIES];
	struct bwd_state *st;
	struct bwd_member *m;
	struct tu_rng rng;
	uint64_t now = T0, fine, coarse, n = 0, live = 0;
	const struct bw_config *lanes[2];

	seed = s;
	tu_rng_seed(&rng, s);
	options_with(config);
	lanes[BW_LANE_ONESHOT] = &opt.wheel.oneshot;
	lanes[BW_LANE_PERIODIC] = &opt.wheel.periodic;
	fine = bound_of(lanes[0]) <= bound_of(lanes[1]) ? 0 : 1;
	coarse = 1 - fine;
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	ck_assert_int_eq(bwd_state_conn_open(st, 1000), 0);
	m = consumer(st, "leeway");
	for (int p = 0; p < 4; p++) {
		for (int l = 0; l < 4; l++) {
			for (int c = 0; c < LW_COPIES; c++, n++) {
				uint64_t period = p == 0 ? 0 : p == 1 ?
					MS * (3 + tu_rng_below(&rng, 20)) :
					p == 2 ? 250 * MS : 3600000 * MS;
				uint64_t eff = leeways[l] != NO_LEEWAY ? leeways[l] :
					period / 64 > bound_of(lanes[fine]) ?
					period / 64 : period ? bound_of(lanes[fine]) : 0;
				unsigned lane = bound_of(lanes[coarse]) <= eff ?
					coarse : fine;
				struct bwd_schedule req = {
					.key = n, .period_ns = period,
					.leeway_ns = leeways[l] == NO_LEEWAY ?
						BWD_LEEWAY_DEFAULT : leeways[l],
					.deadline_ns = T0 + 100 * MS * tu_rng_below(&rng, 4) +
						MS * tu_rng_below(&rng, 3),
					.uid = 1000,
				};
				struct bwd_uid_usage before, after;
				bool r;

				tm[n] = (struct lw_timer){
					.period = period, .leeway = leeways[l],
					.allowed = eff > bound_of(lanes[fine]) ?
						eff : bound_of(lanes[fine]),
					.lane_bound = bound_of(lanes[lane]),
				};
				bwd_state_uid_usage(st, 1000, &before);
				ck_assert_int_eq(bwd_timer_schedule(m->session, &req, &r), 0);
				bwd_state_uid_usage(st, 1000, &after);
				ck_assert_msg(after.lane[lane].inserted == before.lane[lane].inserted + 1,
					      "seed %" PRIu64 ": period %" PRIu64 " leeway %" PRIu64
					      " not in lane %u", s, period, leeways[l], lane);
				live++;
			}
		}
	}
	while (live) {
		struct bwd_member *to;
		struct bwd_fire *f;
		uint64_t next;

		ck_assert_int_eq(bwd_state_next_deadline(st, &next), 0);
		/* Half the polls land between events, as requests do. */
		if (next > now && tu_rng_chance(&rng, 500000))
			next = now + tu_rng_below(&rng, next - now);
		now = next > now ? next : now;
		bwd_state_poll(st, now);
		while (bwd_state_fire(st))
			;
		while ((f = bwd_state_next_delivery(st, &to))) {
			struct lw_timer *t = &tm[f->key];
			uint64_t late = f->fired_ns - f->deadline_ns;
			bool pending;

			ck_assert_msg(f->fired_ns >= f->deadline_ns,
				      "seed %" PRIu64 ": key %" PRIu64 " fired early", s, f->key);
			ck_assert_msg(late <= t->allowed && late < t->lane_bound,
				      "seed %" PRIu64 ": key %" PRIu64 " (period %" PRIu64
				      ", leeway %" PRIu64 ") %" PRIu64 " ns late, allowed %"
				      PRIu64 ", its lane's bound %" PRIu64, s, f->key,
				      t->period, t->leeway, late, t->allowed, t->lane_bound);
			t->fires++;
			if (!t->period || t->fires == LW_FIRES) {
				if (t->period) {
					ck_assert_int_eq(bwd_timer_cancel(m->session, f->key,
									  &pending), 0);
					ck_assert(pending);
				}
				live--;
			}
			bwd_member_written(to, 1);
		}
	}
	for (uint64_t k = 0; k < n; k++)
		ck_assert_uint_eq(tm[k].fires, tm[k].period ? LW_FIRES : 1);
	bwd_member_detach(m);
	bwd_state_conn_close(st, 1000);
	bwd_state_free(st);
}

START_TEST(test_leeway_lanes_fixed)
{
	for (uint64_t s = 1; s <= 3; s++)
		run_leeway(lane_configs[_i], s);
}
END_TEST

START_TEST(test_leeway_lanes_env)
{
	run_leeway(lane_configs[_i], tu_seed_from_env("BW_TEST_SEED", 0x1ee));
}
END_TEST

/*
 * Leeways survive the journal and a snapshot: each timer is back in the
 * lane it was in.  A timer without one is written as before leeways were
 * (no flag, no field), so older daemons' files and these read alike.
 */
START_TEST(test_leeway_durable)
{
	static const uint64_t leeways[] = { 0, 10 * MS, 1000 * MS, NO_LEEWAY };
	static const uint64_t periods[] = { 0, 250 * MS, 3600000 * MS };
	char dir[] = "/tmp/check_state.XXXXXX";
	struct bwd_state *st;
	struct bwd_member *m;
	struct bwd_journal *j;
	struct bwd_uid_usage live;
	int dirfd, fd;
	uint64_t key = 0;

	seed = 0;
	options_with(lane_configs[1]);
	st = journaled(dir, &dirfd, &j);
	m = consumer(st, "durable");
	for (size_t p = 0; p < 3; p++) {
		for (size_t l = 0; l < 4; l++) {
			struct bwd_schedule req = {
				.key = key++, .deadline_ns = T0 + 1000 * MS,
				.period_ns = periods[p], .uid = 1000,
				.leeway_ns = leeways[l] == NO_LEEWAY ?
					BWD_LEEWAY_DEFAULT : leeways[l],
			};
			bool r;

			ck_assert_int_eq(bwd_timer_schedule(m->session, &req, &r), 0);
		}
	}
	bwd_state_uid_usage(st, 1000, &live);
	ck_assert_uint_gt(live.lane[BW_LANE_PERIODIC].pending, 0);
	ck_assert_uint_gt(live.lane[BW_LANE_ONESHOT].pending, 0);
	ck_assert_int_eq(bwd_journal_write(j), 0);
	for (int kind = 0; kind < 2; kind++) {
		struct bwd_state *back;
		struct bwd_state_stats got;
		struct bwd_uid_usage u;

		fd = state_file(st, dirfd, (enum bwd_file_kind)kind);
		back = state_back(fd, (enum bwd_file_kind)kind, &got);
		close(fd);
		ck_assert_uint_eq(got.timers, key);
		bwd_state_uid_usage(back, 1000, &u);
		for (int lane = 0; lane < 2; lane++)
			ck_assert_uint_eq(u.lane[lane].pending, live.lane[lane].pending);
		bwd_state_free(back);
	}

	/* The record of a timer without a leeway is the old one, byte for
	 * byte in size; with one, 8 bytes more, and both parse back. */
	{
		uint8_t a[256], b[256];
		struct bwd_record r = { .type = BWD_REC_TIMER, .sid = 1, .key = 2,
					.deadline_ns = 3, .period_ns = 4, .count = 5 },
			got;
		size_t used, na, nb;

		na = bwd_record_pack(&r, a);
		ck_assert_uint_eq(na, BWD_RECORD_HEADER_SIZE + 2 + 5 * 8 + 4);
		r.flags = BWD_RECF_LEEWAY;
		r.leeway_ns = 7 * MS;
		nb = bwd_record_pack(&r, b);
		ck_assert_uint_eq(nb, na + 8);
		ck_assert_int_eq(bwd_record_parse(a, na, &got, &used), 0);
		ck_assert(!(got.flags & BWD_RECF_LEEWAY));
		ck_assert_int_eq(bwd_record_parse(b, nb, &got, &used), 0);
		ck_assert_uint_eq(got.leeway_ns, 7 * MS);
		ck_assert_uint_eq(got.count, 5);
		/* The flag on a record without the field does not hold. */
		a[BWD_RECORD_HEADER_SIZE + 1] = BWD_RECF_LEEWAY;
		ck_assert_int_ne(bwd_record_parse(a, na, &got, &used), 0);
	}
	journaled_end(st, j, dir, dirfd);
}
END_TEST

/*
 * Calendar timers' state (daemon/clock.c): what a calendar costs, bytes
 * and periodic rate, is charged to its owner and given back, its spec, jitter, seed, base and
 * grace read back from a journal and from a snapshot as they were, and
 * its record's fields parse back.
 */
/* The wall clock of test_wall_step: CLOCK_MONOTONIC (*now) plus an
 * offset (a step moves it). */
struct wall_clocks {
	uint64_t now, off;
};

static uint64_t wall_real(void *arg)
{
	const struct wall_clocks *c = arg;

	return c->now + c->off;
}

static uint64_t wall_boot(void *arg)
{
	return ((const struct wall_clocks *)arg)->now;
}

/* The oneshot lane's cancels so far: a timer a step places again is
 * taken out of the wheel first. */
static uint64_t lane_cancels(const struct bwd_state *st)
{
	struct bwd_wheel_figures f;

	bwd_wheels_lane(st, BW_LANE_ONESHOT, &f);
	return f.k.cancelled;
}

/*
 * A step of the wall clock places again only what it has to (clock.c,
 * "Near and far"): forward by a millisecond, or back, the timers due
 * within BWD_WALL_NEAR_NS; forward past half that lead in all, or back
 * below a far calendar timer's base, every one.  And every timer still
 * fires when the stepped wall clock reaches its instant, never before,
 * and within the lane's bound after.
 */
#define WALL_FAR 1000u
#define WALL_NEAR 10u
START_TEST(test_wall_step)
{
	struct bwd_attach a = {
		.uid = 1000, .owner_uid = 1000, .consumer = true,
		.window = WALL_FAR + WALL_NEAR,
	};
	struct wall_clocks c = { .now = T0, .off = 1700000000ull * 1000 * MS };
	struct bwd_schedule req = { .key = WALL_FAR + WALL_NEAR, .uid = 1000 };
	struct bwd_calendar cal;
	char why[160];
	uint64_t instant[WALL_FAR + WALL_NEAR], before, bound, got = 0;
	struct bwd_state *st;
	struct bwd_member *m, *to;
	struct bwd_fire *f;
	bool resumed, r;

	options();
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	bwd_state_set_clock(st, fake_now, &c.now);
	bwd_state_set_wall_clocks(st, wall_real, wall_boot, &c);
	bound = bwd_lane_late_ns(&opt.wheel.oneshot);
	ck_assert_int_eq(bwd_session_attach(st, &a, &m, &resumed), 0);
	for (uint64_t k = 0; k < WALL_FAR + WALL_NEAR; k++) {
		struct bwd_schedule req = { .key = k, .uid = 1000 };

		instant[k] = wall_real(&c) + (k < WALL_NEAR ? 1500 * MS + k * MS :
					     10000 * MS + k * 7 * MS);
		req.wall_ns = instant[k];
		req.deadline_ns = bwd_wall_place(instant[k], c.now, wall_real(&c));
		ck_assert_int_eq(bwd_timer_schedule(m->session, &req, &r), 0);
	}
	before = lane_cancels(st);
	c.off += MS;
	bwd_state_clock_step(st, false);
	ck_assert_uint_eq(lane_cancels(st) - before, WALL_NEAR);
	c.off += 400 * MS;
	bwd_state_clock_step(st, false);
	ck_assert_uint_eq(lane_cancels(st) - before, 2 * WALL_NEAR);
	/* 1.001 s ahead of where the far ones were placed: all of them. */
	c.off += 600 * MS;
	bwd_state_clock_step(st, false);
	ck_assert_uint_eq(lane_cancels(st) - before, 3 * WALL_NEAR + WALL_FAR);
	c.off += MS;
	bwd_state_clock_step(st, false);
	ck_assert_uint_eq(lane_cancels(st) - before, 4 * WALL_NEAR + WALL_FAR);
	c.off -= 2 * MS;
	bwd_state_clock_step(st, false);
	ck_assert_uint_eq(lane_cancels(st) - before, 5 * WALL_NEAR + WALL_FAR);
	/* A daily calendar timer, its base the clock of now (its elapse
	 * hours away): a step back below that base places every one. */
	cal = (struct bwd_calendar){ .spec = "daily UTC", .base_ns = wall_real(&c) };
	ck_assert_int_eq(bwd_cal_check(&cal, &req.wall_ns, why, sizeof(why)), 0);
	ck_assert_uint_gt(req.wall_ns - wall_real(&c), 3600000 * MS);
	req.cal = &cal;
	req.deadline_ns = bwd_wall_place(req.wall_ns, c.now, wall_real(&c));
	ck_assert_int_eq(bwd_timer_schedule(m->session, &req, &r), 0);
	c.off -= MS;
	bwd_state_clock_step(st, false);
	ck_assert_uint_eq(lane_cancels(st) - before, 6 * WALL_NEAR + 2 * WALL_FAR + 1);
	/* Small steps forward while they come due (none passes one by more
	 * than 3 ms), the daemon told of each. */
	while (got < WALL_FAR + WALL_NEAR) {
		ck_assert_uint_lt(c.now, T0 + 30000 * MS);
		c.now += MS;
		if (c.now % (97 * MS) == 0) {
			c.off += 3 * MS;
			bwd_state_clock_step(st, false);
		}
		bwd_state_poll(st, c.now);
		while (bwd_state_fire(st))
			;
		while ((f = bwd_state_next_delivery(st, &to))) {
			uint64_t real = wall_real(&c);

			ck_assert_msg(real >= instant[f->key], "key %" PRIu64 " %" PRIu64 " ns early",
				      f->key, instant[f->key] - real);
			/* A step of 3 ms may have passed it. */
			ck_assert_msg(real - instant[f->key] <= bound + 4 * MS,
				      "key %" PRIu64 " %" PRIu64 " ns late (bound %" PRIu64 ")",
				      f->key, real - instant[f->key], bound);
			got++;
		}
	}
	bwd_member_detach(m);
	bwd_state_free(st);
}
END_TEST

START_TEST(test_calendar_durable)
{
	static const char *const specs[] = { "daily UTC", "Mon..Fri 09:00 Europe/Berlin",
					     "*:0/15" };
	char dir[] = "/tmp/check_state.XXXXXX", why[160];
	struct bwd_calendar c[3];
	struct bwd_state *st;
	struct bwd_member *m;
	struct bwd_journal *j;
	struct bwd_uid_usage before, live;
	int dirfd, fd;

	seed = 0;
	options_with(lane_configs[1]);
	st = journaled(dir, &dirfd, &j);
	m = consumer(st, "cal");
	bwd_state_uid_usage(st, 1000, &before);
	for (int k = 0; k < 3; k++) {
		struct bwd_schedule req = { .key = (uint64_t)k, .uid = 1000,
					    .leeway_ns = BWD_LEEWAY_DEFAULT,
					    .cal = &c[k] };
		bool r;

		c[k] = (struct bwd_calendar){
			.spec = specs[k], .base_ns = 1796000000ull * 1000000000,
			.jitter_ns = k * 60000 * MS, .seed = 0x1234u + (unsigned)k,
			.fixed = k == 1, .has_grace = k == 2, .grace_ns = 5 * MS,
		};
		ck_assert_int_eq(bwd_cal_check(&c[k], &req.wall_ns, why, sizeof(why)), 0);
		ck_assert_uint_gt(c[k].cost, strlen(specs[k]));
		req.deadline_ns = T0 + 1000 * MS;
		ck_assert_int_eq(bwd_timer_schedule(m->session, &req, &r), 0);
		bwd_state_uid_usage(st, 1000, &live);
		ck_assert_uint_eq(live.bytes - before.bytes,
				  c[k].cost + BWD_TIMER_COST(0));
		/* Its rate: its first two elapses' distance as a period. */
		ck_assert_uint_gt(c[k].interval_ns, 0);
		ck_assert_uint_eq(live.periodic_mhz - before.periodic_mhz,
				  bwd_periodic_mhz(c[k].interval_ns));
		before = live;
	}
	ck_assert_int_eq(bwd_journal_write(j), 0);
	for (int kind = 0; kind < 2; kind++) {
		struct bwd_state *back;
		struct bwd_state_stats got;
		struct bwd_session *s;
		const struct bwd_timer *ts[3];
		struct bwd_uid_usage u;
		uint64_t pos;
		size_t n;

		fd = state_file(st, dirfd, (enum bwd_file_kind)kind);
		back = state_back(fd, (enum bwd_file_kind)kind, &got);
		close(fd);
		ck_assert_uint_eq(got.timers, 3);
		bwd_state_uid_usage(back, 1000, &u);
		ck_assert_uint_eq(u.bytes, live.bytes);
		ck_assert_uint_eq(u.periodic_mhz, live.periodic_mhz);
		s = bwd_state_session(back, 1000, "cal");
		ck_assert_ptr_nonnull(s);
		pos = 0;
		ck_assert(bwd_session_list_timers(s, &pos, ts, 3, SIZE_MAX, &n));
		ck_assert_uint_eq(n, 3);
		for (size_t i = 0; i < n; i++) {
			const struct bwd_timer *t = ts[i];
			uint64_t k = t->node.key;
			struct bwd_calendar g;

			ck_assert_uint_lt(k, 3);
			ck_assert_ptr_nonnull(bwd_cal_info(back, t, &g));
			ck_assert_str_eq(g.spec, specs[k]);
			ck_assert_uint_eq(g.jitter_ns, c[k].jitter_ns);
			ck_assert_uint_eq(g.seed, c[k].seed);
			/* Its elapses since passed: the one with a grace
			 * of 5 ms skipped to the restore's wall clock. */
			if (c[k].has_grace)
				ck_assert_uint_gt(g.base_ns, c[k].base_ns);
			else
				ck_assert_uint_eq(g.base_ns, c[k].base_ns);
			ck_assert_int_eq(g.fixed, c[k].fixed);
			ck_assert_int_eq(g.has_grace, c[k].has_grace);
			ck_assert_uint_eq(g.grace_ns, c[k].has_grace ? c[k].grace_ns : 0);
		}
		bwd_state_free(back);
	}
	/* Cancelled, they give back every byte. */
	for (int k = 0; k < 3; k++) {
		bool pending;

		ck_assert_int_eq(bwd_timer_cancel(m->session, (uint64_t)k, &pending), 0);
		ck_assert(pending);
	}
	bwd_state_uid_usage(st, 1000, &live);
	ck_assert_uint_eq(live.bytes, before.bytes - 3 * BWD_TIMER_COST(0) -
			  c[0].cost - c[1].cost - c[2].cost);
	ck_assert_uint_eq(live.periodic_mhz, 0);
	/* A FIRE record's elapse and base parse back. */
	{
		uint8_t a[512];
		struct bwd_record r = { .type = BWD_REC_FIRE, .sid = 1, .key = 2,
					.flags = BWD_RECF_CAL, .wall_ns = 11,
					.base_ns = 12 },
			got;
		size_t used, n = bwd_record_pack(&r, a);

		ck_assert_int_eq(bwd_record_parse(a, n, &got, &used), 0);
		ck_assert_uint_eq(got.wall_ns, 11);
		ck_assert_uint_eq(got.base_ns, 12);
	}
	journaled_end(st, j, dir, dirfd);
}
END_TEST

/*
 * Every record type, with every flag set, packs its u64 fields in the
 * documented order (enum field in daemon/record.c, which is the order of
 * struct bwd_record's members below) and parses each back into its own
 * member: field i holds i + 1 in every byte, so the packed words must
 * rise, and each member read back is what was written or, for a field
 * the type does not carry, 0.  Then the CRC against the standard check
 * value and a bitwise reference at every length 0..40, so that each tail
 * of the word-at-a-time CRC is covered.
 */
#define REC_U64S(X) X(sid) X(key) X(seq) X(deadline_ns) X(period_ns) \
	X(count) X(fired_ns) X(leeway_ns) X(to) X(to_seq) X(deliveries) \
	X(first_ns) X(ready_ns) X(dl_deliveries) X(dl_first_ns) X(last_ns) \
	X(why) X(dead_ns) X(wall_ns) X(jitter_ns) X(seed) X(base_ns) X(grace_ns)

START_TEST(test_record_layout)
{
	static const uint8_t payload[] = { 9, 8, 7 };
	uint8_t buf[1024];

	for (unsigned type = BWD_REC_SESSION; type < BWD_REC_TYPES; type++) {
		struct bwd_record r = { .type = (uint8_t)type, .flags = 0xff,
					.uid = 1000, .name = "nm", .name_len = 2,
					.payload = payload, .payload_len = 3 },
			got;
		uint64_t v = 0, prev = 0, carried = 0, packed;
		size_t n, used;
		const uint8_t *p = buf + BWD_RECORD_HEADER_SIZE + 2;

#define SET(m) r.m = ++v * 0x0101010101010101ull;
		REC_U64S(SET)
#undef SET
		n = bwd_record_pack(&r, buf);
		ck_assert_uint_eq(n, bwd_record_size(&r));
		ck_assert_int_eq(bwd_record_parse(buf, n, &got, &used), 0);
		ck_assert_uint_eq(used, n);
#define GOT(m) \
		ck_assert_msg(got.m == r.m || got.m == 0, "type %u: " #m, type); \
		carried += got.m != 0;
		REC_U64S(GOT)
#undef GOT
		for (packed = 0; p + 8 <= buf + n; p += 8, packed++) {
			uint64_t w;

			memcpy(&w, p, 8);
			w = le64toh(w);
			if (w % 0x0101010101010101ull || w / 0x0101010101010101ull > v)
				break;
			ck_assert_msg(w > prev, "type %u: field %" PRIu64
				      " after %" PRIu64, type, w, prev);
			prev = w;
		}
		ck_assert_msg(packed == carried, "type %u: %" PRIu64
			      " words packed, %" PRIu64 " fields parsed", type,
			      packed, carried);
	}
	ck_assert_uint_eq(bwd_crc32c("123456789", 9), 0xe3069283u);
	for (size_t len = 0; len <= 40; len++) {
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)(i * 37 + len);
		ck_assert_msg(bwd_crc32c(buf, len) == tu_crc32c(buf, len),
			      "crc32c of %zu bytes", len);
	}
}
END_TEST

/*
 * Coalescing, on an injected clock: a consumer that asked for it, and
 * timers of every kind (leeways 0, 10 ms, 1 s, absent; oneshot and
 * periodic) at random deadlines.  Each pump (a poll, the fires made,
 * every fire handed out) is one batch: every fire comes never before its
 * deadline and within max(leeway, the finest bound); and, with 200
 * tolerant timers (leeway 1 s) due within 500 ms, all 200 come in one
 * batch, where without coalescing they come in many.
 */
struct co_timer {
	uint64_t allowed;          /* max(leeway, finest bound)              */
	uint64_t fires;
};

static uint64_t run_coalesce(uint64_t s, bool coalesce, bool tolerant_only,
			     uint64_t *fires_out)
{
	static const uint64_t leeways[] = { 0, 10 * MS, 1000 * MS, NO_LEEWAY };
	enum { N = 200 };
	struct co_timer tm[N];
	struct bwd_attach a = {
		.name = "co", .uid = 1000, .owner_uid = 1000, .consumer = true,
		.auto_ack = true, .window = 1u << 30, .coalesce = coalesce,
	};
	struct bwd_state *st;
	struct bwd_member *m;
	struct tu_rng rng;
	uint64_t now = T0, fine, batches = 0, fires = 0, live = N;
	bool resumed;

	seed = s;
	tu_rng_seed(&rng, s);
	options_with(lane_configs[1]);
	fine = bound_of(&opt.wheel.oneshot);
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	ck_assert_int_eq(bwd_state_conn_open(st, 1000), 0);
	ck_assert_int_eq(bwd_session_attach(st, &a, &m, &resumed), 0);
	bwd_member_set_room(m, true);
	for (uint64_t k = 0; k < N; k++) {
		uint64_t lw = tolerant_only ? 1000 * MS : leeways[tu_rng_below(&rng, 4)];
		uint64_t period = !tolerant_only && tu_rng_chance(&rng, 300000) ?
			MS * (50 + tu_rng_below(&rng, 2000)) : 0;
		uint64_t eff = lw != NO_LEEWAY ? lw : period / 64;
		struct bwd_schedule req = {
			.key = k, .period_ns = period, .uid = 1000,
			.leeway_ns = lw == NO_LEEWAY ? BWD_LEEWAY_DEFAULT : lw,
			.deadline_ns = T0 + MS * (1 + tu_rng_below(&rng,
				tolerant_only ? 500 : 3000)),
		};
		bool r;

		tm[k] = (struct co_timer){ .allowed = eff > fine ? eff : fine };
		ck_assert_int_eq(bwd_timer_schedule(m->session, &req, &r), 0);
	}
	while (live) {
		struct bwd_member *to;
		struct bwd_fire *f;
		uint64_t next, n = 0;

		ck_assert_int_eq(bwd_state_next_deadline(st, &next), 0);
		if (next > now && tu_rng_chance(&rng, 300000))
			next = now + tu_rng_below(&rng, next - now);
		now = next > now ? next : now;
		bwd_state_poll(st, now);
		while (bwd_state_fire(st))
			;
		while ((f = bwd_state_next_delivery(st, &to))) {
			struct co_timer *t = &tm[f->key];

			ck_assert_msg(now >= f->deadline_ns, "seed %" PRIu64
				      ": key %" PRIu64 " handed out early", s, f->key);
			ck_assert_msg(now - f->deadline_ns <= t->allowed, "seed %" PRIu64
				      ": key %" PRIu64 " handed out %" PRIu64
				      " ns after its deadline, allowed %" PRIu64,
				      s, f->key, now - f->deadline_ns, t->allowed);
			if (++t->fires == (f->count ? 5 : 1)) {
				bool pending;

				if (f->count)
					ck_assert_int_eq(bwd_timer_cancel(m->session, f->key,
									  &pending), 0);
				live--;
			}
			bwd_member_written(to, 1);
			n++;
		}
		batches += n > 0;
		fires += n;
	}
	bwd_member_detach(m);
	bwd_state_conn_close(st, 1000);
	bwd_state_free(st);
	*fires_out = fires;
	return batches;
}

START_TEST(test_coalesce_windows)
{
	uint64_t s = _i ? tu_seed_from_env("BW_TEST_SEED", 0xc0a1) : 0xc0a1, fires;

	for (int c = 0; c < 2; c++)
		run_coalesce(s, c, false, &fires);
}
END_TEST

START_TEST(test_coalesce_one_batch)
{
	uint64_t fires, apart = run_coalesce(7, false, true, &fires);

	ck_assert_uint_eq(fires, 200);
	ck_assert_uint_eq(run_coalesce(7, true, true, &fires), 1);
	ck_assert_uint_eq(fires, 200);
	ck_assert_msg(apart >= 4, "without coalescing, %" PRIu64 " batches", apart);
}
END_TEST

/*
 * Uids take turns at the pump, then their sessions: uid 1000 with 20
 * sessions of 50 fires each does not make uid 2000's one session wait 20
 * hand-outs for each of its fires; it gets every other one.
 */
START_TEST(test_uids_take_turns)
{
	enum { NA = 20, FA = 50, FV = 20 };
	struct bwd_state *st;
	struct bwd_member *a[NA], *v, *to;
	struct bwd_fire *f;
	unsigned victim = 0, handed = 0;

	options();
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	for (int i = 0; i < NA; i++) {
		char name[16];

		snprintf(name, sizeof(name), "a%d", i);
		a[i] = consumer_of(st, name, 1000);
		for (uint64_t k = 0; k < FA; k++)
			schedule(a[i], k, T0 + MS, false, NULL);
	}
	v = consumer_of(st, "v", 2000);
	for (uint64_t k = 0; k < FV; k++)
		schedule(v, k, T0 + MS, false, NULL);
	bwd_state_poll(st, T0 + 2 * MS);
	while (bwd_state_fire(st))
		;
	while (handed < 2 * FV && (f = bwd_state_next_delivery(st, &to))) {
		victim += to == v;
		handed++;
		f->wire_end = 0;
		bwd_member_written(to, 1);
	}
	ck_assert_msg(victim >= FV - 1, "uid 2000 got %u of the first %u hand-outs, "
		      "against uid 1000's %d sessions", victim, handed, NA);
	bwd_state_free(st);
}
END_TEST

/*
 * One uid's burst stays in its own lane: uid 1000 arms 30,000 timers at
 * one instant T, which fill the shared wheel's slots from T on (64 each,
 * 8 probes) and overflow; uid 2000's timers due at T, refused by the same
 * full slots, and its others just after T, fire on the first poll that
 * reaches them - on the injected clock, exactly - while uid 1000's burst
 * is still being taken out, a poll limit at a time.  With one shared
 * overflow heap they waited behind the burst (issue 22).
 */
START_TEST(test_burst_own_lane)
{
	enum { NA = 30000, NB = 10 };
	const uint64_t T = T0 + 2000 * MS;
	struct bwd_wheel_figures fig;
	struct bwd_member *a, *b, *to;
	struct bwd_state *st;
	struct bwd_fire *f;
	unsigned fired_b = 0, polls = 0;
	uint64_t t, a_left;
	const char *why;

	options();
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	a = consumer_of(st, "burst", 1000);
	b = consumer_of(st, "victim", 2000);
	for (uint64_t k = 0; k < NA; k++)
		schedule(a, k, T, false, NULL);
	/* Half of uid 2000's at T itself, half a millisecond apart after. */
	for (uint64_t k = 0; k < NB; k++)
		schedule(b, k, k < NB / 2 ? T : T + (k - NB / 2 + 1) * MS / 2, false, NULL);
	bwd_wheels_lane(st, BW_LANE_ONESHOT, &fig);
	ck_assert_uint_eq(fig.pending, NA + NB);
	ck_assert_uint_ge(fig.overflow, NA - 2048);
	ck_assert_int_eq(bwd_wheels_check(st, &why), 0);
	for (t = T; fired_b < NB && t <= T + 20 * MS; t += MS) {
		bwd_state_poll(st, t);
		polls++;
		while (bwd_state_fire(st))
			;
		while ((f = bwd_state_next_delivery(st, &to))) {
			if (to == b) {
				ck_assert_uint_ge(t, f->deadline_ns);
				ck_assert_msg(t < f->deadline_ns + MS,
					      "uid 2000's fire due at T + %.1f ms came at T + %.1f ms",
					      (double)(f->deadline_ns - T) / 1e6,
					      (double)(t - T) / 1e6);
				fired_b++;
			}
			f->wire_end = 0;
			bwd_member_written(to, 1);
		}
	}
	ck_assert_uint_eq(fired_b, NB);
	bwd_wheels_lane(st, BW_LANE_ONESHOT, &fig);
	a_left = fig.pending;
	ck_assert_msg(a_left > 0, "uid 1000's burst was all taken out in %u polls: "
		      "nothing showed that uid 2000's fires overtook it", polls);
	ck_assert_int_eq(bwd_wheels_check(st, &why), 0);
	bwd_state_free(st);
}
END_TEST

/*
 * Cancels find each timer in its own lane's wheel, and in its uid's
 * overflow store when its slots were full: timers in both lanes (a
 * leeway of 0 and one of 10 s), due from 1 ms to a minute ahead (ring
 * slots, gear slots), some periodic, and a burst at one instant that
 * spills, all cancelled; then both lanes hold nothing, every wheel passes
 * its self-check, and a poll past them all fires nothing.
 */
START_TEST(test_cancel_both_lanes)
{
	enum { N = 4000, B = 20000 };
	struct bwd_wheel_figures fig[2];
	struct bwd_member *m, *to;
	struct bwd_state *st;
	struct tu_rng rng;
	const char *why = "";
	bool r, pending;

	options();
	ck_assert_int_eq(bwd_state_new(&opt, T0, &st), 0);
	m = consumer(st, "lanes");
	tu_rng_seed(&rng, 2311);
	for (uint64_t k = 0; k < N + B; k++) {
		struct bwd_schedule req = {
			.key = k, .uid = 1000,
			/* B at one instant: the burst that spills. */
			.deadline_ns = k >= N ? T0 + 500 * MS :
				T0 + tu_rng_range(&rng, 1, 60000) * MS,
			.leeway_ns = k % 2 ? 10000 * MS : 0,
			.period_ns = k % 97 == 0 ? 250 * MS : 0,
		};

		ck_assert_int_eq(bwd_timer_schedule(m->session, &req, &r), 0);
	}
	for (unsigned l = 0; l < 2; l++) {
		bwd_wheels_lane(st, (enum bw_lane)l, &fig[l]);
		ck_assert_uint_gt(fig[l].pending, 0);
	}
	ck_assert_uint_gt(fig[0].overflow + fig[1].overflow, 0);
	ck_assert_int_eq(bwd_wheels_check(st, &why), 0);
	for (uint64_t k = 0; k < N + B; k++) {
		ck_assert_int_eq(bwd_timer_cancel(m->session, k, &pending), 0);
		ck_assert(pending);
	}
	for (unsigned l = 0; l < 2; l++) {
		bwd_wheels_lane(st, (enum bw_lane)l, &fig[l]);
		ck_assert_msg(fig[l].pending == 0, "lane %u: %" PRIu64 " pending after every cancel",
			      l, (uint64_t)fig[l].pending);
	}
	ck_assert_msg(bwd_wheels_check(st, &why) == 0, "after the cancels: %s", why);
	poll_all(st, T0 + 120000 * MS);
	while (bwd_state_fire(st))
		;
	ck_assert_ptr_null(bwd_state_next_delivery(st, &to));
	bwd_state_free(st);
}
END_TEST

/* ---- group commit ------------------------------------------------------------ */

/*
 * The journal's gathering (daemon/journal.c, bwd_sync_gather): records
 * written while a sync of BWD_SYNC_GATHER_MIN records or more is in
 * flight wait for a sync of their own only while they are fewer than it
 * covers and it has run less than syncs lately take; the wait is what is
 * left of that time.  No estimate yet (no sync done), or a sync of fewer
 * records in flight: no wait.
 */
START_TEST(test_sync_gather)
{
	uint64_t w;

	/* A few records right after a big sync began: they gather. */
	ck_assert(bwd_sync_gather(10000, 150000, 3, 100, &w));
	ck_assert_uint_eq(w, 140000);
	ck_assert(bwd_sync_gather(0, 150000, 99, 100, &w));
	ck_assert_uint_eq(w, 150000);
	/* As many as it covers, or more: a sync of their own at once. */
	ck_assert(!bwd_sync_gather(10000, 150000, 100, 100, &w));
	ck_assert_uint_eq(w, 0);
	ck_assert(!bwd_sync_gather(10000, 150000, 1000, 100, &w));
	/* It has run as long as syncs take: it is late, they go. */
	ck_assert(!bwd_sync_gather(150000, 150000, 1, 100, &w));
	ck_assert_uint_eq(w, 0);
	ck_assert(!bwd_sync_gather(10000000, 150000, 1, 100, &w));
	/* The first syncs, with nothing to go by. */
	ck_assert(!bwd_sync_gather(0, 0, 1, 100, &w));
	ck_assert_uint_eq(w, 0);
	/* A light load: a sync of a few records (a request, a fire, an
	 * ack) does not hold up the next request's. */
	ck_assert(!bwd_sync_gather(10000, 150000, 1, BWD_SYNC_GATHER_MIN - 1, &w));
	ck_assert_uint_eq(w, 0);
	ck_assert(bwd_sync_gather(10000, 150000, 1, BWD_SYNC_GATHER_MIN, &w));
}
END_TEST

/*
 * Each sync counts the records it made durable (Stats' journal records
 * histogram): under --fsync=always one sync per commit, of exactly the
 * records appended since the last; a commit with nothing new syncs
 * nothing and counts nothing.
 */
START_TEST(test_sync_records_counted)
{
	static const unsigned batches[] = { 1, 3, 0, 40, 2 };
	char dir[] = "/tmp/check_state.XXXXXX", name[32];
	struct bwd_sync_stats ss = { 0 };
	struct bwd_journal *j;
	uint64_t total = 0, syncs = 0, key = 0;
	int dirfd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	dirfd = open(dir, O_DIRECTORY | O_RDONLY);
	ck_assert_int_ge(dirfd, 0);
	ck_assert_int_eq(bwd_journal_open(dirfd, 1, BWD_FSYNC_ALWAYS, &j), 0);
	bwd_journal_count_syncs(j, &ss);
	for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
		uint64_t wait_ns;
		bool covered;

		for (unsigned i = 0; i < batches[b]; i++) {
			struct bwd_record r = { .type = BWD_REC_CANCEL, .sid = 1,
						.key = ++key };
			size_t n;

			ck_assert_int_eq(bwd_journal_append(j, &r, &n), 0);
		}
		ck_assert_int_eq(bwd_journal_commit(j, true, &covered, &wait_ns), 0);
		ck_assert(!covered);
		ck_assert_uint_eq(wait_ns, 0);
		total += batches[b];
		syncs += batches[b] != 0;
		ck_assert_uint_eq(ss.count, syncs);
		ck_assert_uint_eq(ss.records.sum_ns, total);
	}
	/* 1 in le 1, 2 and 3 in le 2 and le 4, 40 in le 64. */
	ck_assert_uint_eq(ss.records.bucket[0], 1);
	ck_assert_uint_eq(ss.records.bucket[1], 1);
	ck_assert_uint_eq(ss.records.bucket[2], 1);
	ck_assert_uint_eq(ss.records.bucket[6], 1);
	bwd_journal_close(j);
	bwd_journal_name(1, name);
	ck_assert_int_eq(unlinkat(dirfd, name, 0), 0);
	close(dirfd);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* ---- group commit, simulated --------------------------------------------- */

/*
 * The journal's group commit (daemon/journal.c) on a simulated executor
 * and clock (bwd_journal_open_sim), driven as the server and the store
 * drive it (server.c serve(), store.c bwd_store_commit, on_synced,
 * snapshot_begin, the outage's retries), with the connections' marks of
 * conn.c (bwd_marks_cover/release) holding each request's output.  Random
 * turns: requests on a few connections append records and make output
 * marked at their position; each turn ends with a commit; syncs take
 * random times and finish in any order, now and then with EIO or ENOSPC;
 * the gather timer; journal generations (a snapshot's rotation, whose
 * sync in the loop may fail too, and after an error the outage's
 * recovery journal, its snapshot, and the drop of what was held past
 * BWD_HELD_DOWN_NS).  A model says what is durable: a sync's position
 * once it and every sync begun before it in its journal returned
 * success (a failure stops it there), a journal's end once a rotation's
 * sync of it returned success, everything before a recovery journal once
 * its snapshot is installed.  Checked at every step:
 *   (a) no output leaves before its position is durable in the model;
 *   (b) every output leaves within JS_LIVE_NS while the storage is up
 *       (from when it was made, or came back up): no stall;
 *   (c) nothing leaves while the storage is down, nor ever once dropped;
 *   (d) records written while no sync of BWD_SYNC_GATHER_MIN or more is
 *       in flight, with a slot free, start a sync at that commit, when
 *       output waits for them (a quarter of the requests make none, as
 *       an Ack without request_id);
 *   (e) records nothing waits for are durable within BWD_SYNC_LAZY_NS
 *       and JS_LIVE_NS of their commit while the storage is up, and all
 *       of them after a quiet spell;
 * and that the journal's durable never goes back nor passes the model's,
 * at most BWD_SYNCS_IN_FLIGHT syncs run, each covering more than the one
 * before it, the marks release whole outputs, and the records the syncs
 * count (Stats) are those the model made durable.  A few fixed seeds,
 * then BW_TEST_SEED's; the seed is in every failure's message.
 */
#define JS_CONNS 3
#define JS_STEPS 3000
#define JS_OUTS (JS_STEPS * 4)
#define JS_SYNC_MIN_NS (20 * 1000ull)
#define JS_SYNC_MAX_NS (2 * MS)
#define JS_LIVE_NS (10 * JS_SYNC_MAX_NS)
#define JS_SEC 1000000000ull

enum js_state { JS_HELD, JS_OUT, JS_DROPPED };

struct js_out {
	uint64_t pos;              /* the position it waits for            */
	uint64_t made_ns;
	size_t bytes;
	bool claims;               /* made while up: it says durable        */
	enum js_state state;
};

/* A sync the executor runs, and the model's view of it. */
struct js_sync {
	bool running;              /* begun, not yet reported              */
	bool done, ok;
	int err;
	uint64_t began_ns, end_ns;
	uint64_t upto;             /* global position at its begin         */
	uint64_t recs;             /* the journal's records by then        */
	uint64_t gathered;         /* records it covers past the last one  */
};

struct js {
	struct tu_rng rng;
	uint64_t seed, now;
	int dirfd;
	struct bwd_journal_sim ops;
	struct bwd_journal *j;     /* NULL: none (a dropped recovery)      */
	uint64_t gen, pos_base;    /* gen: the next journal's generation    */
	struct bwd_sync_stats stats;
	/* The model of the current journal: its syncs in the order begun,
	 * those not yet taken from head on (at most BWD_SYNCS_IN_FLIGHT). */
	struct js_sync sync[BWD_SYNCS_IN_FLIGHT];
	unsigned slot_of[BWD_SYNCS_IN_FLIGHT]; /* queue: slots, begin order */
	unsigned nq;
	bool broken;               /* a sync of it failed                  */
	uint64_t recs, asked_recs, last_upto, durable_recs, done_recs;
	uint64_t began;            /* syncs begun in the commit under way  */
	uint64_t durable;          /* the model's, global                  */
	uint64_t jdurable;         /* the journal's last bwd_journal_durable */
	uint64_t gather_at;        /* the gather timer, 0: not armed       */
	uint64_t owed_pos, owed_ns; /* (e): a position written, not yet
				       durable, and when (0: none)          */
	/* The store's outage. */
	bool down, recovery, child, child_ok;
	uint64_t down_ns, up_ns, retry_ns, retry_at, child_at;
	/* Connections: their marks, bytes held and covered, outputs in order. */
	struct js_conn {
		struct bwd_marks marks;
		bool holding;
		size_t held, covered;
		unsigned q[JS_OUTS];
		unsigned head, tail;
	} conn[JS_CONNS];
	struct js_out out[JS_OUTS];
	unsigned nout;
	uint64_t stat_syncs, stat_errors, stat_rotations, stat_downs, stat_drops,
		 stat_gathers;
};

#define JS_ASSERT(x, cond, fmt, ...) \
	ck_assert_msg(cond, "seed %" PRIu64 " at %" PRIu64 " ns: " fmt, \
		      (x)->seed, (x)->now, ##__VA_ARGS__)

static uint64_t js_now(void *arg)
{
	return ((struct js *)arg)->now;
}

static uint64_t js_size(const struct js *x)
{
	return x->pos_base + (x->j ? bwd_journal_size(x->j) : 0);
}

static void js_begin(void *arg, unsigned slot)
{
	struct js *x = arg;
	struct js_sync *s = &x->sync[slot];

	JS_ASSERT(x, slot < BWD_SYNCS_IN_FLIGHT && !s->running && !s->done &&
		  x->nq < BWD_SYNCS_IN_FLIGHT, "a sync begun in slot %u, in use", slot);
	memset(s, 0, sizeof(*s));
	s->running = true;
	s->began_ns = x->now;
	s->end_ns = x->now + tu_rng_range(&x->rng, JS_SYNC_MIN_NS, JS_SYNC_MAX_NS);
	s->upto = js_size(x);
	JS_ASSERT(x, s->upto > x->last_upto, "a sync that covers nothing new");
	x->last_upto = s->upto;
	s->recs = x->recs;
	s->gathered = x->recs - x->asked_recs;
	x->asked_recs = x->recs;
	if (tu_rng_chance(&x->rng, 3000))
		s->err = tu_rng_chance(&x->rng, 500000) ? -EIO : -ENOSPC;
	x->slot_of[x->nq++] = slot;
	x->began++;
	x->stat_syncs++;
}

/* A sync in the loop: it fails as a sync in flight will (the error is
 * the file's: errseq), or now and then of its own. */
static int js_loop_sync(void *arg)
{
	struct js *x = arg;

	for (unsigned i = 0; i < BWD_SYNCS_IN_FLIGHT; i++)
		if (x->sync[i].running && x->sync[i].err)
			return x->sync[i].err;
	return tu_rng_chance(&x->rng, 20000) ? -EIO : 0;
}

/* The model: what the syncs taken in order made durable. */
static void js_take(struct js *x)
{
	while (x->nq && !x->broken) {
		struct js_sync *s = &x->sync[x->slot_of[0]];

		if (!s->done)
			break;
		if (!s->ok) {
			x->broken = true;
			break;
		}
		if (s->upto > x->durable)
			x->durable = s->upto;
		x->durable_recs += s->recs - x->done_recs;
		x->done_recs = s->recs;
		s->done = false;
		memmove(x->slot_of, x->slot_of + 1, --x->nq * sizeof(x->slot_of[0]));
	}
}

/* What a connection's marks let go: whole outputs, in order. */
static void js_release(struct js *x, uint64_t upto)
{
	JS_ASSERT(x, !x->down, "output released while the storage is down");
	for (unsigned c = 0; c < JS_CONNS; c++) {
		struct js_conn *k = &x->conn[c];
		size_t n = bwd_marks_release(&k->marks, upto);

		JS_ASSERT(x, n <= k->covered, "conn %u: %zu released of %zu covered",
			  c, n, k->covered);
		k->covered -= n;
		while (n) {
			struct js_out *o;

			JS_ASSERT(x, k->head != k->tail, "conn %u: released past its output", c);
			o = &x->out[k->q[k->head++]];
			JS_ASSERT(x, o->bytes <= n, "conn %u: an output released in part", c);
			n -= o->bytes;
			JS_ASSERT(x, !o->claims || o->pos <= x->durable,
				  "conn %u: output at %" PRIu64 " released, durable %" PRIu64,
				  c, o->pos, x->durable);
			o->state = JS_OUT;
		}
		if (!k->marks.n && !k->held)
			k->holding = false;
	}
}

static void js_cover(struct js *x, uint64_t upto)
{
	for (unsigned c = 0; c < JS_CONNS; c++) {
		struct js_conn *k = &x->conn[c];

		if (!k->holding || !k->held)
			continue;
		bwd_marks_cover(&k->marks, k->held, upto);
		k->covered += k->held;
		k->held = 0;
	}
}

/* A request's reply (conn.c sink): held while the connection holds or
 * the journal owes a sync, else out at once. */
static void js_output(struct js *x, unsigned c, bool claims)
{
	struct js_conn *k = &x->conn[c];
	struct js_out *o;

	ck_assert_uint_lt(x->nout, JS_OUTS);
	o = &x->out[x->nout];
	o->pos = js_size(x);
	o->made_ns = x->now;
	o->bytes = 1 + tu_rng_below(&x->rng, 100);
	o->claims = claims;
	if (!k->holding && (!x->j || x->down || !bwd_journal_pending(x->j))) {
		JS_ASSERT(x, !claims || o->pos <= x->durable,
			  "output at %" PRIu64 " sent at once, durable %" PRIu64,
			  o->pos, x->durable);
		o->state = JS_OUT;
		x->nout++;
		return;
	}
	k->holding = true;
	k->held += o->bytes;
	o->state = JS_HELD;
	k->q[k->tail++] = x->nout++;
}

static void js_go_down(struct js *x)
{
	if (x->down)
		return;
	x->down = true;
	x->down_ns = x->now;
	x->retry_ns = JS_SEC;
	x->stat_downs++;
	if (!x->child) {
		x->retry_at = x->now + x->retry_ns;
		x->retry_ns = x->retry_ns * 2 > 10 * JS_SEC ? 10 * JS_SEC : x->retry_ns * 2;
	}
}

static void js_arm_retry(struct js *x)
{
	x->retry_at = x->now + x->retry_ns;
	x->retry_ns = x->retry_ns * 2 > 10 * JS_SEC ? 10 * JS_SEC : x->retry_ns * 2;
}

/* The current journal goes (store.c use_journal): its syncs in flight
 * are the closed journal's, whose results nobody takes. */
static void js_use(struct js *x, struct bwd_journal *next)
{
	char name[32];

	if (x->j) {
		x->pos_base += bwd_journal_size(x->j) + 1;
		bwd_journal_name(bwd_journal_generation(x->j), name);
		bwd_journal_close(x->j);
		unlinkat(x->dirfd, name, 0);
	}
	x->j = next;
	memset(x->sync, 0, sizeof(x->sync));
	x->nq = 0;
	x->broken = false;
	x->recs = x->asked_recs = x->done_recs = 0;
	x->last_upto = 0;
	x->jdurable = 0;
	x->gather_at = 0;
	if (next)
		bwd_journal_count_syncs(next, &x->stats);
}

/* store.c snapshot_begin: the next journal, the old one synced in the
 * loop first; a snapshot writer runs meanwhile.  Whether everything
 * before the new journal is durable (flushed). */
static bool js_rotate(struct js *x)
{
	struct bwd_journal *next;
	bool flushed;

	ck_assert_int_eq(bwd_journal_open_sim(x->dirfd, x->gen++, BWD_FSYNC_BATCH,
					      &x->ops, &next), 0);
	x->stat_rotations++;
	if (x->j && !bwd_journal_error(x->j, NULL)) {
		if (bwd_journal_sync(x->j)) {
			js_go_down(x);
		} else {
			x->durable = js_size(x);
			x->durable_recs += x->recs - x->done_recs;
		}
	}
	flushed = !x->down;
	x->recovery = x->down;
	js_use(x, next);
	/* Its header was synced as it was made. */
	if (flushed)
		x->durable = js_size(x);
	x->child = true;
	x->child_at = x->now + tu_rng_range(&x->rng, 50 * MS, 500 * MS);
	x->child_ok = !tu_rng_chance(&x->rng, 200000);
	return flushed;
}

/* store.c on_child. */
static void js_child(struct js *x)
{
	x->child = false;
	if (x->child_ok) {
		if (!x->down)
			return;
		if (x->recovery && x->j && !bwd_journal_error(x->j, NULL)) {
			/* The snapshot holds all before its journal. */
			x->recovery = false;
			x->down = false;
			x->up_ns = x->now;
			if (x->pos_base + BWD_FILE_HEADER_SIZE > x->durable)
				x->durable = x->pos_base + BWD_FILE_HEADER_SIZE;
			return;
		}
		x->recovery = false;
		js_arm_retry(x);
		return;
	}
	if (x->down) {
		if (x->recovery) {
			x->recovery = false;
			js_use(x, NULL);
		}
		js_arm_retry(x);
	}
}

/* store.c on_synced. */
static void js_synced(struct js *x)
{
	int err = bwd_journal_synced(x->j);
	uint64_t d = bwd_journal_durable(x->j);

	js_take(x);
	JS_ASSERT(x, d >= x->jdurable, "durable went back from %" PRIu64 " to %" PRIu64,
		  x->jdurable, d);
	x->jdurable = d;
	JS_ASSERT(x, x->pos_base + d <= x->durable || d <= BWD_FILE_HEADER_SIZE,
		  "the journal says %" PRIu64 " is durable, the model %" PRIu64,
		  x->pos_base + d, x->durable);
	JS_ASSERT(x, !err == !x->broken, "a sync's error %s", err ? "made up" : "swallowed");
	if (!x->down)
		js_release(x, x->pos_base + d);
	if (err)
		js_go_down(x);
}

/* Whether output waits for a sync (server.c, bwd_conn_waiting). */
static bool js_needed(const struct js *x)
{
	for (unsigned c = 0; c < JS_CONNS; c++)
		if (x->conn[c].holding && x->conn[c].held)
			return true;
	return false;
}

/* Whether the journal must begin a sync at this commit (d). */
static bool js_must_begin(const struct js *x, bool needed)
{
	if (!needed || !x->j || bwd_journal_error(x->j, NULL) || x->nq == BWD_SYNCS_IN_FLIGHT ||
	    js_size(x) == x->last_upto ||
	    bwd_journal_durable(x->j) == bwd_journal_size(x->j))
		return false;
	return !x->nq || x->sync[x->slot_of[x->nq - 1]].gathered < BWD_SYNC_GATHER_MIN;
}

/* The end of a turn: store.c bwd_store_commit, then server.c serve(). */
static void js_commit(struct js *x)
{
	enum bwd_commit done = BWD_COMMIT_WAIT;
	bool covered = false, must, needed = js_needed(x);
	uint64_t wait_ns = 0, upto;

	/* (e): the oldest position owed a sync, until the model has it. */
	if (x->owed_ns && (x->durable >= x->owed_pos || x->down))
		x->owed_ns = 0;
	JS_ASSERT(x, !x->owed_ns || x->now - x->owed_ns <= BWD_SYNC_LAZY_NS + JS_LIVE_NS,
		  "records at %" PRIu64 " not durable %" PRIu64 " ns after their commit",
		  x->owed_pos, x->now - x->owed_ns);
	if (!x->owed_ns && !x->down && js_size(x) > x->durable) {
		x->owed_pos = js_size(x);
		x->owed_ns = x->now;
	}
	if (x->j && !bwd_journal_error(x->j, NULL)) {
		must = js_must_begin(x, needed);
		x->began = 0;
		if (bwd_journal_commit(x->j, needed, &covered, &wait_ns))
			js_go_down(x);
		JS_ASSERT(x, !must || x->began, "records held back with no large sync in flight");
		JS_ASSERT(x, !covered || x->last_upto == js_size(x),
			  "covered, but no sync in flight covers all written");
		if (wait_ns) {
			x->stat_gathers++;
			if (!x->gather_at)
				x->gather_at = x->now + wait_ns + 1000;
		}
	}
	if (!x->down) {
		if (covered)
			done = BWD_COMMIT_SYNCING;
		else if (x->j && !bwd_journal_pending(x->j))
			done = BWD_COMMIT_DURABLE;
		if (!x->child && tu_rng_chance(&x->rng, 3000) && js_rotate(x))
			done = BWD_COMMIT_DURABLE;
	}
	upto = js_size(x);
	if (x->down)
		done = BWD_COMMIT_WAIT;
	if (done != BWD_COMMIT_WAIT)
		js_cover(x, upto);
	if (done == BWD_COMMIT_DURABLE)
		js_release(x, upto);
	if (x->down && x->now - x->down_ns > BWD_HELD_DOWN_NS) {
		/* conn.c bwd_conn_drop_held: the connection ends. */
		for (unsigned c = 0; c < JS_CONNS; c++) {
			struct js_conn *k = &x->conn[c];

			if (!k->holding)
				continue;
			while (k->head != k->tail)
				x->out[k->q[k->head++]].state = JS_DROPPED;
			memset(&k->marks, 0, sizeof(k->marks));
			k->held = k->covered = 0;
			k->holding = false;
			x->stat_drops++;
		}
	}
}

/* A turn of requests: each appends records (none that claim durability
 * while down, when only fires and acks are journaled) and replies. */
static void js_append(struct js *x, unsigned c, unsigned recs)
{
	for (unsigned r = 0; r < recs && x->j && !bwd_journal_error(x->j, NULL); r++) {
		struct bwd_record rec = { .type = BWD_REC_CANCEL, .sid = c + 1,
					  .key = x->nout };
		size_t bytes;

		ck_assert_int_eq(bwd_journal_append(x->j, &rec, &bytes), 0);
		x->recs++;
	}
}

static void js_requests(struct js *x, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned c = (unsigned)tu_rng_below(&x->rng, JS_CONNS);
		unsigned recs = (unsigned)tu_rng_below(&x->rng, 4);

		if (tu_rng_chance(&x->rng, 20000))
			recs = (unsigned)tu_rng_range(&x->rng, BWD_SYNC_GATHER_MIN,
						      4 * BWD_SYNC_GATHER_MIN);
		js_append(x, c, recs);
		/* An Ack without request_id: records, no reply. */
		if (!tu_rng_chance(&x->rng, 250000))
			js_output(x, c, !x->down);
	}
}

/* The earliest thing due: a sync's end, the gather timer, the store's. */
static uint64_t js_next_event(const struct js *x)
{
	uint64_t t = UINT64_MAX;

	for (unsigned i = 0; i < BWD_SYNCS_IN_FLIGHT; i++)
		if (x->sync[i].running && x->sync[i].end_ns < t)
			t = x->sync[i].end_ns;
	if (x->gather_at && x->gather_at < t)
		t = x->gather_at;
	if (x->child && x->child_at < t)
		t = x->child_at;
	if (x->down && x->retry_at && x->retry_at < t)
		t = x->retry_at;
	if (x->down && x->down_ns + BWD_HELD_DOWN_NS + 1 < t)
		t = x->down_ns + BWD_HELD_DOWN_NS + 1;
	return t;
}

static void js_step(struct js *x, bool quiet)
{
	uint64_t next = js_next_event(x);
	bool ended = false;

	/* Time: a little, or to the next event. */
	if (quiet || tu_rng_chance(&x->rng, 300000))
		x->now = next != UINT64_MAX ? next : x->now + 100 * 1000;
	else
		x->now += tu_rng_below(&x->rng, 200 * 1000);
	/* Syncs that ended, in the order they end, not begun. */
	for (;;) {
		struct js_sync *first = NULL;
		unsigned slot = 0;

		for (unsigned i = 0; i < BWD_SYNCS_IN_FLIGHT; i++)
			if (x->sync[i].running && x->sync[i].end_ns <= x->now &&
			    (!first || x->sync[i].end_ns < first->end_ns))
				first = &x->sync[slot = i];
		if (!first)
			break;
		first->running = false;
		first->done = true;
		first->ok = !first->err;
		x->stat_errors += !first->ok;
		bwd_journal_sim_done(x->j, slot, first->err, first->end_ns - first->began_ns);
		ended = true;
	}
	if (ended)
		js_synced(x);
	if (x->gather_at && x->gather_at <= x->now)
		x->gather_at = 0;
	if (x->child && x->child_at <= x->now)
		js_child(x);
	if (x->down && !x->child && x->retry_at && x->retry_at <= x->now) {
		x->retry_at = 0;
		js_rotate(x);
	}
	if (!quiet)
		js_requests(x, (unsigned)tu_rng_below(&x->rng, 4));
	js_commit(x);
	/* (b): nothing waits long while the storage is up. */
	for (unsigned c = 0; c < JS_CONNS && !x->down; c++) {
		struct js_conn *k = &x->conn[c];

		if (k->head != k->tail) {
			const struct js_out *o = &x->out[k->q[k->head]];
			uint64_t from = o->made_ns > x->up_ns ? o->made_ns : x->up_ns;

			JS_ASSERT(x, x->now - from <= JS_LIVE_NS,
				  "conn %u: output at %" PRIu64 " held %" PRIu64
				  " ns (durable %" PRIu64 ", written %" PRIu64 ")",
				  c, o->pos, x->now - from, x->durable, js_size(x));
		}
	}
}

static void run_journal_sim(uint64_t seed)
{
	char dir[] = "/tmp/check_state.XXXXXX";
	struct js *x = calloc(1, sizeof(*x));
	struct bwd_journal *first;

	ck_assert_ptr_nonnull(x);
	x->seed = seed;
	tu_rng_seed(&x->rng, seed);
	x->now = T0;
	x->ops = (struct bwd_journal_sim){ js_now, js_begin, js_loop_sync, x };
	ck_assert_ptr_nonnull(mkdtemp(dir));
	x->dirfd = open(dir, O_DIRECTORY | O_RDONLY);
	ck_assert_int_ge(x->dirfd, 0);
	x->gen = 1;
	ck_assert_int_eq(bwd_journal_open_sim(x->dirfd, x->gen++, BWD_FSYNC_BATCH,
					      &x->ops, &first), 0);
	js_use(x, first);
	x->durable = js_size(x);
	for (unsigned i = 0; i < JS_STEPS; i++) {
		js_step(x, false);
		/* Now and then a quiet spell: everything must go out. */
		if (i % 500 == 499) {
			/* Its last request makes no reply: (e). */
			if (!x->down)
				js_append(x, 0, 1 + (unsigned)tu_rng_below(&x->rng, 3));
			for (unsigned q = 0; q < 64 && !x->down; q++)
				js_step(x, true);
			for (unsigned c = 0; c < JS_CONNS && !x->down; c++)
				JS_ASSERT(x, x->conn[c].head == x->conn[c].tail,
					  "conn %u: output left after a quiet spell", c);
			/* (e): records without output too. */
			JS_ASSERT(x, x->down || x->durable == js_size(x),
				  "records left not durable after a quiet spell: %" PRIu64
				  " of %" PRIu64, x->durable, js_size(x));
		}
	}
	/* The records the syncs counted are those the model made durable. */
	JS_ASSERT(x, x->stats.records.sum_ns == x->durable_recs,
		  "%" PRIu64 " records counted durable, the model %" PRIu64,
		  x->stats.records.sum_ns, x->durable_recs);
	fprintf(stderr, "journal sim seed %" PRIu64 ": %u outputs, %" PRIu64 " syncs, %"
		PRIu64 " failed, %" PRIu64 " gathers, %" PRIu64 " rotations, %" PRIu64
		" outages, %" PRIu64 " drops\n", seed, x->nout, x->stat_syncs,
		x->stat_errors, x->stat_gathers, x->stat_rotations, x->stat_downs,
		x->stat_drops);
	js_use(x, NULL);
	close(x->dirfd);
	ck_assert_int_eq(rmdir(dir), 0);
	free(x);
}

START_TEST(test_journal_sim)
{
	static const uint64_t seeds[] = { 1, 2, 3, 0x5eed };

	if (_i < (int)(sizeof(seeds) / sizeof(seeds[0])))
		run_journal_sim(seeds[_i]);
	else
		run_journal_sim(tu_seed_from_env("BW_TEST_SEED", 0x6c0117));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("state");
	TCase *tc = tcase_create("fire");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_round_robin_fixed);
	tcase_add_test(tc, test_round_robin_env);
	tcase_add_test(tc, test_cancel_between_fire_and_make);
	tcase_add_test(tc, test_end_with_due);
	tcase_add_test(tc, test_kept_blocks_payloads);
	tcase_add_test(tc, test_single_acks_counted);
	tcase_add_loop_test(tc, test_touched_deadlines, 0, 2);
	tcase_add_test(tc, test_uids_take_turns);
	tcase_add_test(tc, test_burst_own_lane);
	tcase_add_test(tc, test_cancel_both_lanes);
	suite_add_tcase(s, tc);
	tc = tcase_create("introspection");
	tcase_add_test(tc, test_list_entry_bounds);
	tcase_add_test(tc, test_map_scan_long_chains);
	suite_add_tcase(s, tc);
	tc = tcase_create("leeway");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_leeway_lanes_fixed, 0, (int)NCONFIGS);
	tcase_add_loop_test(tc, test_leeway_lanes_env, 0, (int)NCONFIGS);
	tcase_add_test(tc, test_leeway_durable);
	tcase_add_test(tc, test_calendar_durable);
	tcase_add_test(tc, test_wall_step);
	tcase_add_loop_test(tc, test_coalesce_windows, 0, 2);
	tcase_add_test(tc, test_coalesce_one_batch);
	suite_add_tcase(s, tc);
	tc = tcase_create("records");
	tcase_add_test(tc, test_record_layout);
	suite_add_tcase(s, tc);
	tc = tcase_create("group commit");
	tcase_add_test(tc, test_sync_gather);
	tcase_add_test(tc, test_sync_records_counted);
	tcase_add_loop_test(tc, test_journal_sim, 0, 5);
	tcase_set_timeout(tc, 60);
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
