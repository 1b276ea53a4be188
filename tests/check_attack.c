/*
 * check_attack.c - a hostile local user against real daemons (issues 12,
 * 20, 21 and 22): each attack of bench/attack.h runs as uid 65534 with the
 * daemon's budgets set small, while a victim as uid 65533, in a named
 * session of its own, schedules a oneshot every 20 ms, due 50 to 150 ms
 * ahead.  For each (and for a baseline with no attacker):
 *
 *   the attacker   was told the documented refusal at its budget
 *                  (atk_expected_refusal) and met no other failure; the
 *                  delivery attacks' consumers (4 sessions of 1,000
 *                  fires due at once, 2 consumers of window 500 each, or
 *                  one coalescing consumer) got every fire of the
 *                  build-up and of every coalesced batch, and the daemon
 *                  closed none of them; a consumer's ack timeout of 1 ns
 *                  was raised to PROTOCOL.md's floor of 100 ms, and fires
 *                  taken back (the ack timeout, a consumer gone) came
 *                  again marked redelivered; the single-ack flood's
 *                  consumers (issue 22, built as the delivery attacks')
 *                  wrote single Acks and had no fire taken back; under
 *                  the crash-loop attacks (issue 21), a consumer
 *                  restarted 10 times a second, every ordinary fire of
 *                  its session came and was acknowledged (none stuck),
 *                  and the poison fire reached the dead-letter session
 *                  after exactly the session's max_deliveries
 *                  (MAX_DELIVERIES) hand-outs; under the output attack,
 *                  its consumers not reading, its uid's bytes (output
 *                  counted) passed its budget by a frame per connection
 *                  at most; under the share attack (three more uids,
 *                  65532 to 65530, at their bytes budgets first), it
 *                  got its share of --max-memory, half of what they
 *                  left, no more
 *   the victim     its Hello and every Schedule accepted; every timer
 *                  fired once, none early, none lost, none of anyone
 *                  else's; p99 lateness at receipt under LATE_P99_MS
 *                  (scaled by BW_TEST_SLOW)
 *   the daemon     serves a new client afterwards; its RSS grew by less
 *                  than the timer budget's bytes can explain (not under
 *                  the valgrind wrapper or ASan, whose quarantine keeps
 *                  what churn frees: 150 MB for the pipeline attack's
 *                  7 MB); its log took at most
 *                  LOG_LINES_PER_S lines a second while the victim ran
 *
 * The bound is generous (a shared 2-core machine, ASan, valgrind): the
 * real lateness figures come from bench/run-attack.sh, against the
 * issues' target of p99 <= 10 ms (and max <= 20 ms, issue 20), at the
 * default budgets (the delivery attacks there: 4 sessions of up to 65,536
 * fires, 56 consumers of window 4,096).  Needs root (to run the two
 * uids); without it each test passes saying SKIP.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attack.h"
#include "daemonutil.h"
#include "testutil.h"

#define EC(x) BITWHEEL__V1__ERROR_CODE__##x

/* The victim: its session, cadence and run. */
#define VICTIM_SESSION "victim-later"
#define VICTIM_INTERVAL_MS 20
#define VICTIM_DELAY_MS 50
#define VICTIM_DELAY_MAX_MS 150
#define VICTIM_RUN_MS 1500
/* Bounds (before BW_TEST_SLOW). */
#define LATE_P99_MS 200
#define LOG_LINES_PER_S 100
/* The budgets, small (bitwheeld(8) "Security and limits"). */
#define TIMERS_PER_UID 4000
#define PAYLOAD 1024
/* The delivery attacks' consumer window: two per session of 1,000. */
#define WINDOW 500
/* The output attack's bytes budget, under what its timer budget holds. */
#define OUTPUT_BYTES "4M"
#define OUTPUT_BYTES_N (4u << 20)
/* The share attack's --max-memory: the attacker, fourth, gets an eighth. */
#define SHARE_MEMORY "16M"
#define SHARE_MEMORY_N (16u << 20)
/* The poison attack's delivery limit: its fire goes round to it in about
 * half a second (10 restarts a second), three times in the victim's run. */
#define MAX_DELIVERIES 5

#ifdef __SANITIZE_ADDRESS__
#define RSS_MEANS_LITTLE 1
#else
#define RSS_MEANS_LITTLE 0
#endif

static const char *const budgets[] = {
	"--socket-mode", "0666",
	"--max-clients", "64",                  /* 16 per uid */
	"--max-sessions-per-uid", "8",
	"--max-timers", "1000",
	"--max-timers-per-uid", "4000",
	"--max-periodic-rate-per-uid", "1000",
	"--max-output", "65536",
	"--hello-timeout", "1s",
	NULL,
};

/* ATK_BURST's budget: a burst at one instant worth the name, whose
 * overflow outlasts the shared wheel's poll limit many times over (at the
 * default budgets, bench/run-attack.sh's burst is 226,719 timers). */
#define BURST_TIMERS 200000

static void start_daemon(struct du_daemon *d, enum atk_kind k)
{
	const char *argv[32];
	char burst[32];
	size_t n = 0;

	for (const char *const *a = budgets; *a; a++)
		argv[n++] = *a;
	if (k == ATK_BURST) {
		snprintf(burst, sizeof(burst), "%d", BURST_TIMERS / du_slow());
		argv[n++] = "--max-timers";
		argv[n++] = "65536";
		argv[n++] = "--max-timers-per-uid";
		argv[n++] = burst;
	}
	argv[n++] = "--linger";
	/* ATK_EXPIRE's sessions expire while the victim runs; the others'
	 * stay for the whole test. */
	argv[n++] = k == ATK_EXPIRE ? "200ms" : "1m";
	if (k == ATK_OUTPUT) {
		/* The bytes bind before the timers, and each of its 14
		 * consumers may buffer half of the default output bound,
		 * were their output not held to the budget. */
		argv[n++] = "--max-bytes-per-uid";
		argv[n++] = OUTPUT_BYTES;
		argv[n++] = "--max-output";
		argv[n++] = "1048576";
	}
	if (k == ATK_SHARE) {
		/* Four uids at their bytes budget, a quarter each, would
		 * take all of it, were it not shared out. */
		argv[n++] = "--max-memory";
		argv[n++] = SHARE_MEMORY;
	}
	argv[n] = NULL;
	ck_assert(chmod(d->dir, 0755) == 0);
	du_daemon_startv(d, argv);
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

START_TEST(test_attack)
{
	enum atk_kind k = (enum atk_kind)_i;
	struct atk_victim_opts vo = {
		.session = VICTIM_SESSION, .uid = ATK_VICTIM,
		.interval_ns = VICTIM_INTERVAL_MS * DU_MS,
		.delay_ns = VICTIM_DELAY_MS * DU_MS,
		.delay_max_ns = VICTIM_DELAY_MAX_MS * DU_MS,
		.duration_ns = VICTIM_RUN_MS * DU_MS,
		.grace_ns = (uint64_t)du_scale_ms(2000) * DU_MS,
	};
	struct atk_attack_opts ao = {
		.uid = ATK_NOBODY, .victim_session = VICTIM_SESSION,
		.victim_uid = ATK_VICTIM, .payload = PAYLOAD,
		/* Caps far past the budgets, so that a budget not enforced
		 * fails the memory bound rather than the build-up's time. */
		.max_timers = 100000, .max_conns = 2000, .window = WINDOW,
		.slow = du_slow(), .max_deliveries = MAX_DELIVERIES,
	};
	struct atk_victim_result *v = calloc(1, sizeof(*v));
	struct atk_attack_result ar = { 0 };
	struct atk_child ach = { 0 }, vch;
	struct du_daemon *d;
	uint64_t rss0, rss1, t0, t1, p99, timers_per_uid = TIMERS_PER_UID;
	long lines0, lines1;
	char err[256] = "", refusals[256] = "";
	size_t off = 0;
	int expect = atk_expected_refusal(k);

	ck_assert_ptr_nonnull(v);
	if (k == ATK_BURST) {
		/* The victim's deadlines on the attacker's grid: each burst's
		 * instant finds one of them about every other round. */
		vo.align_ns = ATK_BURST_GRID_NS;
		timers_per_uid = BURST_TIMERS / du_slow();
		ao.max_timers = timers_per_uid + 1;
	}
	if (geteuid() != 0) {
		du_note("SKIP: attack %s needs root (to run uids %d and %d)", atk_name(k),
			ATK_NOBODY, ATK_VICTIM);
		free(v);
		return;
	}
	du_raise_nofile(8192);
	d = du_daemon_new();
	start_daemon(d, k);
	vo.sock = ao.sock = d->sock;
	rss0 = du_proc_status_kb(d->pid, "VmRSS");
	if (k != ATK_NONE)
		ck_assert_msg(atk_attack_start(k, &ao, &ach, 3 * DU_WAIT_MS, err, sizeof(err)) == 0,
			      "%s", err);
	lines0 = atk_count_lines(d->log);
	t0 = du_now_ns();
	ck_assert(atk_victim_start(&vo, &vch) == 0);
	ck_assert_msg(atk_victim_finish(&vch, VICTIM_RUN_MS + VICTIM_DELAY_MAX_MS + du_scale_ms(2000) +
					DU_WAIT_MS, v) == 0,
		      "victim under attack %s: %s", atk_name(k), v->error);
	t1 = du_now_ns();
	lines1 = atk_count_lines(d->log);
	rss1 = du_proc_status_kb(d->pid, "VmRSS");
	if (k != ATK_NONE)
		ck_assert_msg(atk_attack_stop(&ach, DU_WAIT_MS, &ar) == 0, "attacker %s: %s",
			      atk_name(k), ar.error);
	for (int c = 1; c < ATK_CODES; c++)
		if (ar.refused[c])
			off += (size_t)snprintf(refusals + off, sizeof(refusals) - off, " %s=%" PRIu64,
						du_error_name(c), ar.refused[c]);
	p99 = load_hist_quantile(&v->rx, 0.99);
	du_note("attack %-9s victim %" PRIu64 "/%" PRIu64 " fires, late at receipt p50 %.2f p99 %.2f "
		"max %.2f ms (daemon p99 %.2f ms); attacker %" PRIu64 " ops, %" PRIu64 " conns, %"
		PRIu64 " sessions, %" PRIu64 " timers, %" PRIu64 " fires (%" PRIu64 " redelivered), ready in "
		"%.2f s, refused:%s; daemon RSS %"
		PRIu64 " -> %" PRIu64 " KiB, log %ld lines in %.1f s",
		atk_name(k), v->fires, v->scheduled, ms(load_hist_quantile(&v->rx, 0.5)), ms(p99),
		ms(v->rx.max), ms(load_hist_quantile(&v->fired, 0.99)), ar.ops, ar.conns,
		ar.sessions, ar.timers, ar.fires, ar.redelivered, ar.ready_s, refusals[0] ? refusals : " none", rss0, rss1,
		lines1 - lines0, (double)(t1 - t0) / 1e9);

	/* The victim: nothing refused, lost, early, repeated or foreign. */
	ck_assert_msg(v->refused == 0 && v->lost == 0 && v->early == 0 && v->repeated == 0 &&
		      v->foreign == 0,
		      "attack %s: victim refused %" PRIu64 ", lost %" PRIu64 ", early %" PRIu64
		      ", repeated %" PRIu64 ", foreign %" PRIu64 ": %s", atk_name(k), v->refused,
		      v->lost, v->early, v->repeated, v->foreign, v->error);
	ck_assert_uint_eq(v->scheduled, VICTIM_RUN_MS / VICTIM_INTERVAL_MS);
	ck_assert_uint_eq(v->fires, v->scheduled);
	ck_assert_msg(p99 <= (uint64_t)du_scale_ms(LATE_P99_MS) * DU_MS,
		      "attack %s: victim p99 lateness %.2f ms over the bound of %d ms",
		      atk_name(k), ms(p99), du_scale_ms(LATE_P99_MS));

	/* The attacker: told no at its budget, and nothing else went wrong. */
	ck_assert_msg(!ar.error[0], "attacker %s: %s", atk_name(k), ar.error);
	ck_assert_msg(expect == 0 || ar.refused[expect] > 0,
		      "attacker %s was never refused %s (refused:%s)", atk_name(k),
		      du_error_name(expect), refusals);
	if (k == ATK_MEMORY)
		ck_assert_msg(ar.refused[EC(OVER_BUDGET)] > 0 && ar.sessions == 8,
			      "the session budget (8) did not hold: %" PRIu64 " sessions",
			      ar.sessions);
	if ((k >= ATK_REDELIVER && k <= ATK_COALESCE) || k == ATK_SINGLEACK) {
		/* The uid's 4,000 timers in sessions of 1,000, each fire read
		 * at least once (the attacker counts that it came). */
		ck_assert_msg(ar.timers == TIMERS_PER_UID && ar.fires >= ar.timers,
			      "attack %s: %" PRIu64 " timers, %" PRIu64 " fires", atk_name(k),
			      ar.timers, ar.fires);
		ck_assert_uint_eq(ar.conns, k == ATK_COALESCE ? 5 : 2 * TIMERS_PER_UID / 1000);
	}
	if (k == ATK_BURST)
		/* Its whole budget at one instant, and every fire of at least
		 * one such burst read (under valgrind a round outlasts the
		 * victim's run). */
		ck_assert_msg(ar.timers == timers_per_uid && (ar.fires >= ar.timers || du_wrapped()),
			      "attack burst: %" PRIu64 " timers of a budget of %" PRIu64
			      ", %" PRIu64 " fires", ar.timers, timers_per_uid, ar.fires);
	if (k == ATK_REDELIVER)
		ck_assert_msg(ar.ack_timeout_ns == ATK_ACK_TIMEOUT_FLOOR_NS,
			      "an ack timeout of 1 ns was put in force as %" PRIu64 " ns",
			      ar.ack_timeout_ns);
	if (k == ATK_SINGLEACK)
		ck_assert_msg(ar.ops > ar.conns && ar.redelivered == 0,
			      "attack %s: %" PRIu64 " requests of %" PRIu64 " consumers, %" PRIu64
			      " fires redelivered", atk_name(k), ar.ops, ar.conns, ar.redelivered);
	if (k == ATK_REDELIVER || k == ATK_CHURN || k == ATK_REATTACH)
		ck_assert_msg(ar.redelivered > 0, "attack %s: no fire came again redelivered "
			      "(%" PRIu64 " fires)", atk_name(k), ar.fires);
	if (k == ATK_CRASHLOOP || k == ATK_POISON) {
		const struct atk_crash *c = &ar.crash;

		du_note("attack %-9s %.1f s: %" PRIu64 " restarts, %" PRIu64 "/%" PRIu64
			" ordinary fires acked, %" PRIu64 " stuck; poison %" PRIu64 " received, %"
			PRIu64 " dead-lettered (first %.2f s, after %" PRIu64 " deliveries)",
			atk_name(k), c->active_s, c->restarts, c->acked, c->scheduled, c->stuck,
			c->poisoned, c->dead, (double)c->dead_first_ns / 1e9, c->dead_deliveries);
		ck_assert_uint_eq(c->max_deliveries, MAX_DELIVERIES);
		ck_assert_msg(c->restarts > 0 && c->scheduled > 0 && c->acked > 0 && c->stuck == 0,
			      "attack %s: %" PRIu64 " restarts, %" PRIu64 "/%" PRIu64
			      " ordinary fires acked, %" PRIu64 " stuck", atk_name(k), c->restarts,
			      c->acked, c->scheduled, c->stuck);
		if (k == ATK_POISON) {
			ck_assert_msg(c->dead > 0, "the poison fire never reached the dead-letter "
				      "session (%" PRIu64 " received)", c->poisoned);
			ck_assert_uint_eq(c->dead_deliveries, MAX_DELIVERIES);
		}
	}

	if (k == ATK_OUTPUT) {
		/* Its unread output counted and held to its budget: past it
		 * by a frame per connection at most, and each consumer's map
		 * of its fires in flight (8 bytes a bucket, the window's
		 * next power of two of them), charged as it grows. */
		du_note("attack %-9s uid bytes %" PRIu64 " with %" PRIu64
			" consumers not reading, budget %u", atk_name(k), ar.bytes, ar.conns,
			OUTPUT_BYTES_N);
		ck_assert_msg(ar.refused[EC(OVER_BUDGET)] > 0, "attack %s: never refused OVER_BUDGET",
			      atk_name(k));
		ck_assert_msg(ar.bytes > 0 &&
			      ar.bytes <= OUTPUT_BYTES_N + ar.conns * (PAYLOAD + 512 + 8 * 512),
			      "attack %s: the uid's bytes %" PRIu64 " with %" PRIu64
			      " consumers not reading, over its budget of %u by more than a frame and "
			      "a map each",
			      atk_name(k), ar.bytes, ar.conns, OUTPUT_BYTES_N);
	}

	if (k == ATK_SHARE) {
		/* Its share: half of what the three before it left. */
		du_note("attack %-9s uid bytes %" PRIu64 ", max_memory %u", atk_name(k), ar.bytes,
			SHARE_MEMORY_N);
		ck_assert_msg(ar.timers > 0 && ar.bytes <= SHARE_MEMORY_N / 8 + PAYLOAD + 256,
			      "attack %s: the fourth uid holds %" PRIu64 " bytes (%" PRIu64
			      " timers), past its share, an eighth of %u", atk_name(k), ar.bytes,
			      ar.timers, SHARE_MEMORY_N);
	}

	/* The daemon: serving, its memory within the budgets, its log bounded. */
	du_assert_serving(d);
	if (!du_wrapped() && !RSS_MEANS_LITTLE)
		ck_assert_msg(rss1 < rss0 + (4 * timers_per_uid * (PAYLOAD + 1024)) / 1024 + 64 * 1024,
			      "attack %s: daemon RSS %" PRIu64 " KiB -> %" PRIu64 " KiB",
			      atk_name(k), rss0, rss1);
	ck_assert_msg((double)(lines1 - lines0) <= LOG_LINES_PER_S * ((double)(t1 - t0) / 1e9 + 1),
		      "attack %s: %ld log lines in %.1f s", atk_name(k), lines1 - lines0,
		      (double)(t1 - t0) / 1e9);
	du_daemon_free(d);
	free(v);
}
END_TEST

static Suite *attack_suite(void)
{
	Suite *s = suite_create("attack");
	TCase *tc = tcase_create("attacks");

	du_tcase(tc);
	tcase_add_loop_test(tc, test_attack, ATK_NONE, ATK_N);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(attack_suite());
}
