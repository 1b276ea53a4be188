/*
 * check_examples.c - the installed example programs (client/examples/),
 * built by make check as a C developer would build them, run against
 * real bitwheeld processes on temporary sockets with bounded arguments,
 * and judged by their output and exit codes.  They find the daemon
 * through $BITWHEEL_SOCKET, as a reader's copy would.
 *
 * TCases:
 *   blocking  producer schedules keys 1 to 3 (its output names each);
 *             consumer takes them in order with their payloads and acks
 *             them, so a second consumer with a timeout gets none and
 *             exits 1 saying so; bad arguments exit 2 with a usage line.
 *   libevent  libevent-consumer takes the producer's fires on its loop,
 *             acks them (a consumer afterwards gets none), and exits 0.
 *   worker    worker does the jobs, gives back a "fail:1" job once (a
 *             retry line, then done with deliveries 2), rides through a
 *             daemon restart, does a job scheduled after it, and exits
 *             after COUNT jobs.
 */
#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bitwheel-client.h"
#include "daemonutil.h"
#include "testutil.h"

#define EX_DIR BW_TOP_BUILDDIR "/client/examples/"
#define EX_TIMEOUT_MS du_scale_ms(15000)

struct run {
	char env[160];
	const char *envp[2];
	struct du_result r;
};

/* Run an example (NULL-terminated arguments after its name) with
 * $BITWHEEL_SOCKET at d's socket; the result stays in run->r. */
static void run_example(struct run *run, const struct du_daemon *d,
			const char *name, ...)
{
	const char *argv[8];
	char path[512];
	size_t n = 0;
	va_list ap;

	snprintf(path, sizeof(path), EX_DIR "%s", name);
	argv[n++] = path;
	va_start(ap, name);
	while (n < 7 && (argv[n] = va_arg(ap, const char *)) != NULL)
		n++;
	va_end(ap);
	argv[n] = NULL;
	snprintf(run->env, sizeof(run->env), "BITWHEEL_SOCKET=%s", d->sock);
	run->envp[0] = run->env;
	run->envp[1] = NULL;
	du_run(argv, run->envp, EX_TIMEOUT_MS, &run->r);
}

static void expect_exit(const struct run *run, const char *name, int code)
{
	char buf[4096];

	ck_assert_msg(run->r.status == code, "%s: wanted exit %d, got %s", name,
		      code, du_result_describe(&run->r, buf, sizeof(buf)));
}

static void expect_line(const struct run *run, const char *name,
			const char *line)
{
	char buf[4096];

	ck_assert_msg(strstr(run->r.out, line) != NULL, "%s: no \"%s\" in %s",
		      name, line, du_result_describe(&run->r, buf, sizeof(buf)));
}

/* producer SESSION 3 50ms, checked. */
static void produce_three(const struct du_daemon *d, const char *session)
{
	struct run run;

	run_example(&run, d, "producer", session, "3", "50ms", (const char *)NULL);
	expect_exit(&run, "producer", 0);
	expect_line(&run, "producer", "scheduled key 1 in 50 ms\n");
	expect_line(&run, "producer", "scheduled key 2 in 100 ms\n");
	expect_line(&run, "producer", "scheduled key 3 in 150 ms\n");
	du_result_free(&run.r);
}

/* Nothing is left for session: a consumer with a short timeout gets no
 * fire and exits 1 (every fire was acknowledged). */
static void expect_drained(const struct du_daemon *d, const char *session)
{
	struct run run;

	run_example(&run, d, "consumer", session, "1", "300ms", (const char *)NULL);
	expect_exit(&run, "consumer (drained)", 1);
	ck_assert_msg(run.r.out[0] == '\0', "consumer (drained) got: %s", run.r.out);
	ck_assert_msg(strstr(run.r.err, "no fire within") != NULL,
		      "consumer (drained): stderr: %s", run.r.err);
	du_result_free(&run.r);
}

START_TEST(test_blocking)
{
	struct du_daemon *d = du_daemon_new();
	struct run run;
	const char *k1, *k2, *k3;

	du_daemon_start(d, (const char *)NULL);
	produce_three(d, "ex-blocking");
	run_example(&run, d, "consumer", "ex-blocking", "3", "5s", (const char *)NULL);
	expect_exit(&run, "consumer", 0);
	k1 = strstr(run.r.out, "fire key 1 payload \"job-1\"");
	k2 = strstr(run.r.out, "fire key 2 payload \"job-2\"");
	k3 = strstr(run.r.out, "fire key 3 payload \"job-3\"");
	ck_assert_msg(k1 != NULL && k2 > k1 && k3 > k2,
		      "consumer: keys 1, 2, 3 in order: %s", run.r.out);
	du_result_free(&run.r);
	expect_drained(d, "ex-blocking");

	/* Bad arguments: a usage line and exit 2. */
	run_example(&run, d, "producer", "ex-blocking", "3", "50", (const char *)NULL);
	expect_exit(&run, "producer 50", 2);
	ck_assert_ptr_nonnull(strstr(run.r.err, "DELAY a duration"));
	du_result_free(&run.r);
	run_example(&run, d, "consumer", (const char *)NULL);
	expect_exit(&run, "consumer", 2);
	ck_assert_ptr_nonnull(strstr(run.r.err, "usage:"));
	du_result_free(&run.r);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_libevent)
{
	struct du_daemon *d = du_daemon_new();
	struct run run;

	du_daemon_start(d, (const char *)NULL);
	produce_three(d, "ex-libevent");
	run_example(&run, d, "libevent-consumer", "ex-libevent", "3",
		    (const char *)NULL);
	expect_exit(&run, "libevent-consumer", 0);
	expect_line(&run, "libevent-consumer", "fire key 1 payload \"job-1\"\n");
	expect_line(&run, "libevent-consumer", "fire key 2 payload \"job-2\"\n");
	expect_line(&run, "libevent-consumer", "fire key 3 payload \"job-3\"\n");
	du_result_free(&run.r);
	expect_drained(d, "ex-libevent");
	du_daemon_free(d);
}
END_TEST

static void start_with_state(struct du_daemon *d)
{
	char dir[160];

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
}

static struct bwc_client *producer_of(const struct du_daemon *d,
				      const char *session)
{
	struct bwc_client *c = NULL;

	ck_assert_int_eq(bwc_new(&c), 0);
	ck_assert_int_eq(bwc_set_timeout(c, (int64_t)DU_WAIT_MS * (int64_t)DU_MS), 0);
	ck_assert_int_eq(bwc_connect(c, d->sock, session), 0);
	return c;
}

static void schedule(struct bwc_client *c, uint64_t key, const char *payload)
{
	struct bwc_timer t = { .key = key, .when_ns = 20 * DU_MS,
			       .payload = payload, .payload_len = strlen(payload) };
	int rc = bwc_schedule(c, &t, NULL);

	ck_assert_msg(rc == 0, "schedule %" PRIu64 ": %s", key, bwc_errmsg(c));
}

/* Wait until session has nothing pending, queued, delayed or in flight:
 * every job done and acknowledged. */
static void wait_idle(const struct du_daemon *d, const char *session)
{
	uint64_t deadline = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;
	struct bwc_client *c = producer_of(d, session);

	for (;;) {
		struct bwc_session_entry e[8];
		size_t n = 0;
		bool idle = false;

		ck_assert_int_eq(bwc_list_sessions(c, BWC_ANY_UID, e, 8, &n, NULL), 0);
		for (size_t i = 0; i < n; i++)
			if (strcmp(e[i].name, session) == 0)
				idle = e[i].timers == 0 && e[i].queued == 0 &&
				       e[i].in_flight == 0 && e[i].delayed == 0;
		if (idle)
			break;
		ck_assert_msg(du_now_ns() < deadline, "%s: jobs left by the deadline",
			      session);
		du_sleep_ms(20);
	}
	bwc_free(c);
}

START_TEST(test_worker)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *p;
	struct du_proc proc;
	struct du_result r;
	char env[160], path[512], buf[4096];
	const char *envp[] = { env, NULL };
	const char *argv[] = { path, "ex-worker", "5", NULL };

	start_with_state(d);
	p = producer_of(d, "ex-worker");
	schedule(p, 1, "job-1");
	schedule(p, 2, "job-2");
	schedule(p, 3, "job-3");
	schedule(p, 4, "fail:1");
	bwc_free(p);

	snprintf(env, sizeof(env), "BITWHEEL_SOCKET=%s", d->sock);
	snprintf(path, sizeof(path), EX_DIR "worker");
	du_proc_start(&proc, argv, envp);
	wait_idle(d, "ex-worker");

	/* Every job so far acknowledged: the restart repeats none. */
	du_daemon_stop(d, SIGTERM, DU_WAIT_MS);
	start_with_state(d);
	p = producer_of(d, "ex-worker");
	schedule(p, 5, "job-5");
	bwc_free(p);

	du_proc_finish(&proc, EX_TIMEOUT_MS, &r);
	du_result_describe(&r, buf, sizeof(buf));
	ck_assert_msg(r.status == 0 && r.err[0] == '\0', "worker: %s", buf);
	ck_assert_msg(strstr(r.out, "done key 1 deliveries 1\n") &&
		      strstr(r.out, "done key 2 deliveries 1\n") &&
		      strstr(r.out, "done key 3 deliveries 1\n") &&
		      strstr(r.out, "retry key 4 in ") &&
		      strstr(r.out, "done key 4 deliveries 2\n") &&
		      strstr(r.out, "done key 5 deliveries 1\n"),
		      "worker: %s", buf);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

static Suite *examples_suite(void)
{
	Suite *s = suite_create("examples");
	TCase *tc;

	tc = tcase_create("blocking");
	du_tcase(tc);
	tcase_add_test(tc, test_blocking);
	suite_add_tcase(s, tc);

	tc = tcase_create("libevent");
	du_tcase(tc);
	tcase_add_test(tc, test_libevent);
	suite_add_tcase(s, tc);

	tc = tcase_create("worker");
	du_tcase(tc);
	tcase_add_test(tc, test_worker);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(examples_suite());
}
