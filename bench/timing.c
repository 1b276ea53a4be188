/*
 * timing.c - the cycle counter: its rate and the cost of an empty region.
 *
 * A measured operation sits between tsc_begin() (lfence; rdtsc; lfence:
 * nothing earlier is still running, nothing later has started) and
 * tsc_end() (rdtscp; lfence: everything before has finished).  The pair
 * costs tens of cycles by itself; timing_empty_region() measures that cost
 * with nothing in between, and the runner subtracts its median from every
 * sample.  The rate comes from comparing the counter with CLOCK_MONOTONIC
 * (read by system call: clock_gettime itself belongs to simclock.c).
 * Some hosts' counters advance in steps (on this project's AMD hosts, 26
 * ticks: 10 ns); the step is measured and reported, since every
 * percentile is then a multiple of it.
 */
#include <stdlib.h>
#include <time.h>

#include "bench.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void timing_calibrate(struct timing *t, unsigned ms)
{
	uint64_t n0, n1, c0, c1;
	struct timespec req = { ms / 1000, (long)(ms % 1000) * 1000000L };

#if defined(__x86_64__) || defined(__i386__)
	t->source = "rdtsc (lfence; rdtsc; lfence ... rdtscp; lfence)";
#elif defined(__aarch64__)
	t->source = "cntvct_el0 (isb fenced)";
#else
	t->source = "clock_gettime system call (coarse: no cycle counter)";
#endif
	n0 = real_now_ns();
	c0 = tsc_begin();
	nanosleep(&req, NULL);
	c1 = tsc_end();
	n1 = real_now_ns();
	t->ticks_per_ns = (double)(c1 - c0) / (double)(n1 - n0);
	if (t->ticks_per_ns <= 0)
		t->ticks_per_ns = 1;
}

/* The counter without fences: back-to-back reads, to see its step. */
static inline uint64_t counter_raw(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
#else
	return tsc_begin();
#endif
}

/* The step the counter usually takes (26 ticks, 10 ns, on this project's
 * AMD hosts): the most frequent difference between changing reads. */
static double counter_step(void)
{
	uint64_t prev = counter_raw(), d[2000];
	size_t best = 0, run = 0;
	unsigned n = 0;

	while (n < 2000) {
		uint64_t now = counter_raw();

		if (now != prev) {
			d[n++] = now - prev;
			prev = now;
		}
	}
	qsort(d, n, sizeof(*d), cmp_u64);
	for (unsigned i = 0; i < n; i++) {
		run = i && d[i] == d[i - 1] ? run + 1 : 1;
		if (run > best) {
			best = run;
			prev = d[i];
		}
	}
	return (double)prev;
}

void timing_empty_region(struct timing *t, unsigned n)
{
	uint64_t *s = malloc(n * sizeof(*s));

	if (!s) {
		t->empty_ticks = t->empty_min_ticks = 0;
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		uint64_t a = tsc_begin();
		uint64_t b = tsc_end();

		s[i] = b - a;
	}
	qsort(s, n, sizeof(*s), cmp_u64);
	t->step_ticks = counter_step();
	t->empty_ticks = (double)s[n / 2];
	t->empty_min_ticks = (double)s[0];
	free(s);
}
