/*
 * worker.c - a long-running consumer that rides through daemon restarts
 * and retries the jobs it fails, with backoff.
 *
 *   worker SESSION [COUNT]      e.g.  worker myapp-jobs
 *
 * Each fire is a job.  A payload "fail:N" fails its first N deliveries
 * (standing in for a database that is down); the worker gives such a
 * fire back with bwc_release and a delay from bwc_backoff (100 ms, 200
 * ms, ... 5 s), and the daemon hands it out again after the delay, its
 * deliveries counted.  Any other job succeeds and is acknowledged.  After
 * the session's max_deliveries (20 by default) a job goes to the
 * dead-letter session SESSION.dead instead (bwctl kick moves it back).
 * Stops after COUNT jobs done (default: never) or on SIGINT/SIGTERM.
 *
 * Restarts: the library reattaches by itself when the daemon ends the
 * connection (crash, upgrade, restart), inside the next bwc_wait_fire,
 * and jobs in flight and not yet acknowledged come again, marked
 * redelivered: the worker needs no code for it.  Only when the daemon
 * stays away longer than the give-up time (60 s by default) does a call
 * return BWC_EGAVEUP; the worker then keeps trying with bwc_reconnect.
 *
 * Build: cc worker.c $(pkg-config --cflags --libs libbitwheel-client)
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bitwheel-client.h>

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* The job itself: 0 done, -1 failed (try again later). */
static int handle(const struct bwc_fire *f)
{
	unsigned long fails;

	if (f->payload_len > 5 && memcmp(f->payload, "fail:", 5) == 0) {
		char n[16] = "";

		memcpy(n, (const char *)f->payload + 5,
		       f->payload_len - 5 < sizeof(n) - 1 ? f->payload_len - 5
							   : sizeof(n) - 1);
		fails = strtoul(n, NULL, 10);
		if (f->deliveries <= fails)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct bwc_client *c;
	struct bwc_fire f;
	uint64_t count = UINT64_MAX, done = 0;
	int rc;

	if (argc < 2 || argc > 3 ||
	    (argc > 2 && (count = strtoull(argv[2], NULL, 10)) == 0)) {
		fprintf(stderr, "usage: %s SESSION [COUNT]\n", argv[0]);
		return 2;
	}
	/* No SA_RESTART: a signal ends bwc_wait_fire with BWC_EINTR. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	srandom((unsigned)getpid());

	if (bwc_new(&c) != 0)
		return 1;
	bwc_set_role(c, BWC_ROLE_CONSUMER);
	/* A fire held 30 s without an ack is taken back and goes to another
	 * worker: bound the time one job may take (or bwc_touch it). */
	bwc_set_ack_timeout(c, 30000000000ULL);
	rc = bwc_connect(c, NULL, argv[1]);
	if (rc != 0) {
		fprintf(stderr, "worker: %s\n", bwc_errmsg(c));
		bwc_free(c);
		return 1;
	}
	while (!stopping && done < count) {
		rc = bwc_wait_fire(c, -1, &f);
		if (rc == BWC_EINTR)
			continue;
		if (rc == BWC_EGAVEUP) {
			/* The daemon has been away for the give-up time. */
			fprintf(stderr, "worker: %s; retrying\n", bwc_errmsg(c));
			while (!stopping && bwc_reconnect(c) != 0)
				sleep(1);
			continue;
		}
		if (rc != 0)
			break;
		if (handle(&f) == 0) {
			printf("done key %" PRIu64 " deliveries %" PRIu64 "%s\n",
			       f.key, f.deliveries,
			       f.redelivered ? " (redelivered)" : "");
			rc = bwc_send_ack(c, &f, false);
			done++;
		} else {
			uint64_t delay = bwc_backoff(f.deliveries, 100000000,
						     5000000000ULL,
						     (uint64_t)random() << 32 |
						     (uint64_t)random());

			printf("retry key %" PRIu64 " in %" PRIu64 " ms\n", f.key,
			       delay / 1000000);
			/* Blocking: this program never calls bwc_dispatch,
			 * where a bwc_send_release's reply would go. */
			rc = bwc_release(c, &f, delay, NULL);
		}
		fflush(stdout);
		if (rc != 0)
			break;
	}
	if (rc != 0 && rc != BWC_EINTR)
		fprintf(stderr, "worker: %s\n", bwc_errmsg(c));
	bwc_free(c);            /* writes the acks not yet written */
	return rc == 0 || rc == BWC_EINTR ? 0 : 1;
}
