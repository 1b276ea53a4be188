/*
 * bwdemo - libbitwheel in one small event loop.
 *
 * A dual wheel (fast-precise preset) carries order-timeout style oneshots
 * and a heartbeat on its periodic lane; a failover wheel with deliberately
 * tiny slots takes a burst that spills into its overflow store.  The loop
 * sleeps until the earliest next deadline, polls both wheels and prints
 * every fire with its lateness, then the counters and the memory used.
 * Everything is due within two seconds.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bitwheel.h"

#define MS 1000000ull
#define BURST 8

/* A hard stop, so a misbehaving wheel makes the demo fail instead of hang. */
#define GIVE_UP_NS (5000 * MS)

struct demo_timer {
	const char *name;
	const char *where;           /* which wheel or lane holds it        */
	uint64_t deadline;           /* moved forward by each re-arm        */
	uint64_t period;
	unsigned rearms;             /* re-arms left; 0 makes it a oneshot  */
	bw_handle handle;
	struct demo_timer *cancels;  /* a dual timer this fire cancels      */
};

struct demo {
	struct bw_dual *dual;
	uint64_t start;
	unsigned fires;
	int failed;
};

static void die(const char *what, int rc)
{
	fprintf(stderr, "bwdemo: %s: %s\n", what, bw_strerror(rc));
	exit(EXIT_FAILURE);
}

static double ms(int64_t ns)
{
	return (double)ns / (double)MS;
}

static uint64_t on_fire(void *data, uint64_t now_ns, void *ctx)
{
	struct demo_timer *t = data;
	struct demo *demo = ctx;

	demo->fires++;
	/* Signed, so a fire before its deadline (a wheel bug) shows as such. */
	printf("%9.3f ms  %-9s %-17s late %7.3f ms\n",
	       ms((int64_t)(now_ns - demo->start)), t->where, t->name,
	       ms((int64_t)(now_ns - t->deadline)));

	if (t->cancels) {
		void *back = NULL;
		int rc = bw_dual_cancel(demo->dual, t->cancels->handle, &back);

		if (rc != 0 || back != t->cancels) {
			fprintf(stderr, "bwdemo: cancel %s: %s\n",
				t->cancels->name, bw_strerror(rc));
			demo->failed = 1;
		} else {
			printf("%14s%-9s %-17s cancelled\n", "",
			       t->cancels->where, t->cancels->name);
		}
	}

	if (t->rearms == 0)
		return 0;
	t->rearms--;
	t->deadline += t->period;
	return t->deadline;
}

/*
 * Lower *next to the deadline a next_deadline call stored in *deadline; an
 * empty wheel leaves it.  A pointer, because a plain value argument could
 * be read before that call has run.
 */
static void earliest(int rc, const uint64_t *deadline, uint64_t *next)
{
	if (rc == BW_EEMPTY)
		return;
	if (rc != 0)
		die("next deadline", rc);
	if (*deadline < *next)
		*next = *deadline;
}

static void sleep_until(uint64_t ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(ns / 1000000000u),
		.tv_nsec = (long)(ns % 1000000000u),
	};

	/* An early wake-up (EINTR) is harmless: the loop polls and re-sleeps. */
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static void print_counters(const char *label, const struct bw_wheel *w)
{
	struct bw_counters c;

	bw_wheel_counters(w, &c);
	printf("  %-14s %8" PRIu64 " %9" PRIu64 " %5" PRIu64 " %6" PRIu64
	       " %7" PRIu64 " %10" PRIu64 " %4" PRIu64 " %9" PRIu64 "\n",
	       label, c.inserted, c.cancelled, c.fired, c.probed, c.refused,
	       c.overflowed, c.lost, c.reslotted);
}

static int check_wheel(const char *label, int rc, const char *why)
{
	if (rc == 0)
		return 0;
	fprintf(stderr, "bwdemo: %s: %s: %s\n", label, bw_strerror(rc),
		why ? why : "");
	return 1;
}

int main(void)
{
	struct demo demo = { .start = bw_now_ns() };
	struct demo_timer order3_timeout = {
		.name = "order-3 timeout", .where = "oneshot",
		.deadline = demo.start + 900 * MS,
	};
	struct demo_timer oneshots[] = {
		{ .name = "order-1 timeout", .where = "oneshot",
		  .deadline = demo.start + 5 * MS },
		{ .name = "order-2 timeout", .where = "oneshot",
		  .deadline = demo.start + 40 * MS },
		{ .name = "order-3 filled", .where = "oneshot",
		  .deadline = demo.start + 300 * MS, .cancels = &order3_timeout },
		{ .name = "session expiry", .where = "oneshot",
		  .deadline = demo.start + 1900 * MS },
	};
	struct demo_timer heartbeat = {
		.name = "heartbeat", .where = "periodic",
		.deadline = demo.start + 250 * MS, .period = 400 * MS, .rearms = 3,
	};
	struct demo_timer burst[BURST];
	char burst_names[BURST][16];
	struct bw_dual_config dcfg;
	struct bw_config fcfg;
	struct bw_wheel *fw;
	struct bw_callbacks cb = { .fire = on_fire, .ctx = &demo };
	const char *why = NULL;
	size_t i;
	int rc;

	if ((rc = bw_dual_config_preset(BW_DUAL_FAST_PRECISE, &dcfg)) != 0)
		die("dual preset", rc);
	if ((rc = bw_dual_new(&dcfg, demo.start, &demo.dual)) != 0)
		die("dual wheel", rc);

	/* Two timers per slot, two slots per insert: the burst must spill. */
	if ((rc = bw_config_preset(BW_PRESET_BALANCED, &fcfg)) != 0)
		die("preset", rc);
	fcfg.slot_cap = 2;
	fcfg.max_probes = 2;
	fcfg.failover = true;
	if ((rc = bw_wheel_new(&fcfg, demo.start, &fw)) != 0)
		die("failover wheel", rc);

	printf("dual wheel %s: oneshot lane %u ms, periodic lane %u ms\n",
	       bw_dual_preset_name(BW_DUAL_FAST_PRECISE),
	       dcfg.oneshot.resolution_ms, dcfg.periodic.resolution_ms);
	printf("failover wheel: %s with slot cap %u, %u probes, range %.1f h\n",
	       bw_preset_name(BW_PRESET_BALANCED), fcfg.slot_cap,
	       fcfg.max_probes, ms((int64_t)bw_wheel_range_ns(fw)) / 3600e3);

	for (i = 0; i < sizeof(oneshots) / sizeof(oneshots[0]); i++) {
		rc = bw_dual_insert_oneshot(demo.dual, oneshots[i].deadline,
					    &oneshots[i], &oneshots[i].handle);
		if (rc != 0)
			die(oneshots[i].name, rc);
	}
	rc = bw_dual_insert_oneshot(demo.dual, order3_timeout.deadline,
				    &order3_timeout, &order3_timeout.handle);
	if (rc != 0)
		die(order3_timeout.name, rc);
	rc = bw_dual_insert_periodic(demo.dual, heartbeat.deadline, &heartbeat,
				     &heartbeat.handle);
	if (rc != 0)
		die(heartbeat.name, rc);

	for (i = 0; i < BURST; i++) {
		snprintf(burst_names[i], sizeof(burst_names[i]), "burst-%zu", i);
		burst[i] = (struct demo_timer){
			.name = burst_names[i], .where = "failover",
			.deadline = demo.start + 600 * MS,
		};
		rc = bw_wheel_insert(fw, burst[i].deadline, &burst[i],
				     &burst[i].handle);
		if (rc != 0)
			die(burst[i].name, rc);
	}
	printf("scheduled %zu dual timers and a burst of %d, %zu of which "
	       "went to the overflow store\n\n",
	       bw_dual_pending(demo.dual), BURST,
	       bw_wheel_overflow_pending(fw));

	for (;;) {
		uint64_t next = UINT64_MAX, t = 0, now;

		earliest(bw_dual_next_deadline(demo.dual, &t), &t, &next);
		earliest(bw_wheel_next_deadline(fw, &t), &t, &next);
		if (next == UINT64_MAX)
			break;
		if (next - demo.start > GIVE_UP_NS) {
			fprintf(stderr, "bwdemo: next deadline past the demo's end\n");
			return EXIT_FAILURE;
		}
		sleep_until(next);
		now = bw_now_ns();
		if ((rc = bw_dual_poll(demo.dual, now, &cb, NULL)) != 0)
			die("dual poll", rc);
		if ((rc = bw_wheel_poll(fw, now, &cb, NULL)) != 0)
			die("failover poll", rc);
	}

	printf("\n%u fires\n\ncounters:\n", demo.fires);
	printf("  %-14s %8s %9s %5s %6s %7s %10s %4s %9s\n", "wheel",
	       "inserted", "cancelled", "fired", "probed", "refused",
	       "overflowed", "lost", "reslotted");
	print_counters("oneshot lane", bw_dual_lane(demo.dual, BW_LANE_ONESHOT));
	print_counters("periodic lane",
		       bw_dual_lane(demo.dual, BW_LANE_PERIODIC));
	print_counters("failover", fw);
	printf("\nfootprint: dual %zu bytes, failover %zu bytes\n",
	       bw_dual_footprint(demo.dual), bw_wheel_footprint(fw));

	demo.failed |= check_wheel("dual check",
				   bw_dual_check(demo.dual, &why), why);
	demo.failed |= check_wheel("failover check", bw_wheel_check(fw, &why),
				   why);
	bw_dual_free(demo.dual);
	bw_wheel_free(fw);
	return demo.failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
