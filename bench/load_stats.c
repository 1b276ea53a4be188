/*
 * load_stats.c - bwload's measuring tools: the log-linear latency
 * histogram (mergeable across worker processes), the monotonic clock, a
 * small PRNG, and a server's CPU time and RSS from /proc.
 */
#include "bwload.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned bucket_of(uint64_t v)
{
	unsigned e;

	if (v < LOAD_HIST_SUB)
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	return (e - LOAD_HIST_SUB_BITS + 1) * LOAD_HIST_SUB +
	       (unsigned)((v >> (e - LOAD_HIST_SUB_BITS)) & (LOAD_HIST_SUB - 1));
}

/* The largest value that falls in bucket b. */
static uint64_t bucket_top(unsigned b)
{
	unsigned e, sub;

	if (b < LOAD_HIST_SUB)
		return b;
	e = b / LOAD_HIST_SUB + LOAD_HIST_SUB_BITS - 1;
	sub = b % LOAD_HIST_SUB;
	return ((uint64_t)(LOAD_HIST_SUB + sub) << (e - LOAD_HIST_SUB_BITS)) +
	       ((uint64_t)1 << (e - LOAD_HIST_SUB_BITS)) - 1;
}

void load_hist_add(struct load_hist *h, uint64_t v)
{
	h->n[bucket_of(v)]++;
	h->count++;
	if (v > h->max)
		h->max = v;
}

void load_hist_merge(struct load_hist *into, const struct load_hist *from)
{
	for (unsigned b = 0; b < LOAD_HIST_BUCKETS; b++)
		into->n[b] += from->n[b];
	into->count += from->count;
	if (from->max > into->max)
		into->max = from->max;
}

uint64_t load_hist_quantile(const struct load_hist *h, double q)
{
	uint64_t want, seen = 0;

	if (h->count == 0)
		return 0;
	want = (uint64_t)(q * (double)h->count);
	if (want >= h->count)
		want = h->count - 1;
	for (unsigned b = 0; b < LOAD_HIST_BUCKETS; b++) {
		seen += h->n[b];
		if (seen > want) {
			uint64_t top = bucket_top(b);

			return top < h->max ? top : h->max;
		}
	}
	return h->max;
}

uint64_t load_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void load_sleep_until(uint64_t t_ns)
{
	struct timespec ts = { .tv_sec = (time_t)(t_ns / 1000000000u),
			       .tv_nsec = (long)(t_ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

uint64_t load_rand(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

int64_t load_proc_cpu_ns(long pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f;
	size_t n;

	if (pid <= 0 || hz <= 0)
		return -1;
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: skip to the
	 * last ')'; utime and stime are fields 14 and 15, i.e. the 12th and
	 * 13th after the state field. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return -1;
	return (int64_t)((ut + st) * (1000000000ull / (unsigned long long)hz));
}

int64_t load_proc_run_ns(long pid)
{
	char path[64];
	unsigned long long ns;
	FILE *f;
	int got;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof path, "/proc/%ld/schedstat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	got = fscanf(f, "%llu", &ns);
	fclose(f);
	return got == 1 ? (int64_t)ns : -1;
}

uint64_t load_proc_rss(long pid)
{
	char path[64], line[256];
	unsigned long long kb = 0;
	FILE *f;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof path, "/proc/%ld/status", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}
