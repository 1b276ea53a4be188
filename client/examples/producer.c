/*
 * producer.c - schedule timers in a named session and exit.
 *
 *   producer SESSION COUNT DELAY      e.g.  producer myapp-jobs 3 2s
 *
 * Schedules COUNT oneshot timers, keys 1 to COUNT, key k due k * DELAY
 * from now, each with the payload "job-k".  The session keeps them after
 * this program exits: whichever consumer attaches to SESSION receives
 * the fires (consumer.c, libevent-consumer.c, worker.c).  A producer
 * never receives a fire itself.  The daemon's socket is $BITWHEEL_SOCKET,
 * or /run/bitwheel/bitwheeld.sock.
 *
 * Build: cc producer.c $(pkg-config --cflags --libs libbitwheel-client)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bitwheel-client.h>

int main(int argc, char **argv)
{
	struct bwc_client *c;
	uint64_t count, delay_ns;
	char *end;
	int rc;

	if (argc != 4) {
		fprintf(stderr, "usage: %s SESSION COUNT DELAY\n", argv[0]);
		return 2;
	}
	count = strtoull(argv[2], &end, 10);
	if (*end != '\0' || count == 0 ||
	    bwc_parse_duration(argv[3], &delay_ns) != 0) {
		fprintf(stderr, "%s: COUNT is a number, DELAY a duration (250ms, 2s)\n",
			argv[0]);
		return 2;
	}

	if (bwc_new(&c) != 0)
		return 1;
	/* A named session's default role is producer: nothing to set. */
	rc = bwc_connect(c, NULL, argv[1]);
	for (uint64_t k = 1; rc == 0 && k <= count; k++) {
		char payload[32];
		struct bwc_timer t = { .key = k, .when_ns = k * delay_ns };
		struct bwc_scheduled s;

		snprintf(payload, sizeof(payload), "job-%" PRIu64, k);
		t.payload = payload;
		t.payload_len = strlen(payload);
		/* .replace: running the producer again re-arms the keys
		 * instead of failing with DUPLICATE_KEY. */
		t.replace = true;
		rc = bwc_schedule(c, &t, &s);
		if (rc == 0)
			printf("scheduled key %" PRIu64 " in %" PRIu64 " ms%s\n", k,
			       k * delay_ns / 1000000, s.replaced ? " (replaced)" : "");
	}
	if (rc != 0)
		fprintf(stderr, "%s: %s\n", argv[0], bwc_errmsg(c));
	bwc_free(c);
	return rc == 0 ? 0 : 1;
}
