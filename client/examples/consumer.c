/*
 * consumer.c - take a named session's fires, blocking, and acknowledge
 * each once handled.
 *
 *   consumer SESSION [COUNT [TIMEOUT]]   e.g.  consumer myapp-jobs 3 10s
 *
 * Attaches to SESSION as a consumer and prints each fire; stops after
 * COUNT fires (default: never), or with exit 1 when none comes within
 * TIMEOUT (default: wait forever).  Fires that came due while no consumer
 * was attached wait in the session's queue and arrive first.
 *
 * Delivery is at least once: a fire is the daemon's until acknowledged,
 * and one not acknowledged (this program killed mid-way) comes again,
 * marked redelivered.  A handler that must act once drops repeats by
 * key and deadline.
 *
 * Build: cc consumer.c $(pkg-config --cflags --libs libbitwheel-client)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <bitwheel-client.h>

int main(int argc, char **argv)
{
	struct bwc_client *c;
	struct bwc_fire f;
	uint64_t count = UINT64_MAX, timeout_ns = 0, n = 0;
	int rc;

	if (argc < 2 || argc > 4 ||
	    (argc > 2 && (count = strtoull(argv[2], NULL, 10)) == 0) ||
	    (argc > 3 && bwc_parse_duration(argv[3], &timeout_ns) != 0)) {
		fprintf(stderr, "usage: %s SESSION [COUNT [TIMEOUT]]\n", argv[0]);
		return 2;
	}

	if (bwc_new(&c) != 0)
		return 1;
	bwc_set_role(c, BWC_ROLE_CONSUMER);     /* this program takes fires */
	rc = bwc_connect(c, NULL, argv[1]);
	while (rc == 0 && n < count) {
		rc = bwc_wait_fire(c, timeout_ns > 0 ? (int64_t)timeout_ns : -1, &f);
		if (rc != 0)
			break;
		/* The work goes here.  The payload is valid until the next
		 * bwc_wait_fire. */
		printf("fire key %" PRIu64 " payload \"%.*s\" late %" PRIu64 " us%s\n",
		       f.key, (int)f.payload_len,
		       f.payload != NULL ? (const char *)f.payload : "",
		       (f.fired_ns - f.deadline_ns) / 1000,
		       f.redelivered ? " (redelivered)" : "");
		fflush(stdout);
		/* Handled: the daemon forgets it.  bwc_send_ack would not
		 * wait for the reply; bwc_ack returns once the daemon holds
		 * the ack. */
		rc = bwc_ack(c, &f, false, NULL);
		n++;
	}
	if (rc != 0)
		fprintf(stderr, "%s: %s\n", argv[0], bwc_errmsg(c));
	bwc_free(c);
	return rc == 0 ? 0 : 1;
}
