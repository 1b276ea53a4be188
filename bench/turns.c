/*
 * turns.c - bwturns.so, an LD_PRELOAD module that times a program's event
 * loop turns: from each return of epoll_wait(2) to the next call, the
 * wall time and the thread's CPU time (CLOCK_THREAD_CPUTIME_ID).  The CPU
 * time of a turn is the work the loop did before it could wait again,
 * whatever else the machine ran meanwhile; the wall time adds the time
 * the thread was preempted.  So on a busy machine, a daemon's own stalls
 * show apart from its share of the CPU (bench/bwattack --turns).
 *
 * At exit (the daemon's SIGTERM shutdown returns from main) it writes to
 * $BWTURNS_OUT one line for its whole life:
 *   turns N max_wall_ns W max_cpu_ns C cpu_over_1ms A cpu_over_5ms B
 *   cpu_over_10ms D
 * then the same for each second of CLOCK_MONOTONIC in which turns ended,
 * for the first SECONDS seconds, so that a caller can take the figures of
 * a part of the run (bwattack: the victim's, without the build-up):
 *   second T turns N max_wall_ns W ...
 * Costs: two clock_gettime() calls a turn; SECONDS figures of 48 bytes;
 * one thread (the loop's) is assumed to call epoll_wait.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>

#define SECONDS 4096

struct figures {
	uint64_t turns, max_wall, max_cpu, over[3];
};

static int (*real_epoll_wait)(int, struct epoll_event *, int, int);
static uint64_t end_wall, end_cpu;    /* the last return, 0 before     */
static uint64_t first_second;         /* of the first turn              */
static struct figures life, second[SECONDS];
static const uint64_t over_ns[3] = { 1000000, 5000000, 10000000 };

static uint64_t now(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void add(struct figures *f, uint64_t wall, uint64_t cpu)
{
	f->turns++;
	f->max_wall = wall > f->max_wall ? wall : f->max_wall;
	f->max_cpu = cpu > f->max_cpu ? cpu : f->max_cpu;
	for (int i = 0; i < 3; i++)
		f->over[i] += cpu > over_ns[i];
}

static void print(FILE *f, const struct figures *g)
{
	fprintf(f, "turns %llu max_wall_ns %llu max_cpu_ns %llu cpu_over_1ms %llu "
		"cpu_over_5ms %llu cpu_over_10ms %llu\n", (unsigned long long)g->turns,
		(unsigned long long)g->max_wall, (unsigned long long)g->max_cpu,
		(unsigned long long)g->over[0], (unsigned long long)g->over[1],
		(unsigned long long)g->over[2]);
}

static void dump(void)
{
	const char *path = getenv("BWTURNS_OUT");
	FILE *f;

	if (!life.turns || !path || !(f = fopen(path, "w")))
		return;
	print(f, &life);
	for (uint64_t i = 0; i < SECONDS; i++) {
		if (!second[i].turns)
			continue;
		fprintf(f, "second %llu ", (unsigned long long)(first_second + i));
		print(f, &second[i]);
	}
	fclose(f);
}

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	int rc;

	if (!real_epoll_wait) {
		real_epoll_wait = (int (*)(int, struct epoll_event *, int, int))
				  dlsym(RTLD_NEXT, "epoll_wait");
		atexit(dump);
	}
	if (end_wall) {
		uint64_t t = now(CLOCK_MONOTONIC), wall = t - end_wall;
		uint64_t cpu = now(CLOCK_THREAD_CPUTIME_ID) - end_cpu;

		if (!life.turns)
			first_second = t / 1000000000u;
		add(&life, wall, cpu);
		if (t / 1000000000u - first_second < SECONDS)
			add(&second[t / 1000000000u - first_second], wall, cpu);
	}
	rc = real_epoll_wait(epfd, events, maxevents, timeout);
	end_wall = now(CLOCK_MONOTONIC);
	end_cpu = now(CLOCK_THREAD_CPUTIME_ID);
	return rc;
}
