/*
 * stats.c - from one bucket's samples to its percentiles, max and mean.
 *
 * Samples are counter ticks with the empty-region cost already taken off.
 * They are sorted whole (two 16-bit radix passes: a million samples sort
 * in a few milliseconds) and a percentile is the nearest-rank value: the
 * smallest sample with at least p% of all samples at or below it.  With
 * several rounds, each metric is the median of the rounds' values.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const double pct_levels[NPCT] = { 50, 90, 99, 99.9, 99.99 };
const char *const pct_names[NPCT] = { "p50", "p90", "p99", "p99.9",
				      "p99.99" };

static void radix_pass(const uint32_t *in, uint32_t *out, size_t n,
		       unsigned shift)
{
	static size_t count[65536];

	memset(count, 0, sizeof(count));
	for (size_t i = 0; i < n; i++)
		count[(in[i] >> shift) & 0xffff]++;
	for (size_t i = 0, sum = 0; i < 65536; i++) {
		size_t c = count[i];

		count[i] = sum;
		sum += c;
	}
	for (size_t i = 0; i < n; i++)
		out[count[(in[i] >> shift) & 0xffff]++] = in[i];
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void sort_u32(uint32_t *v, size_t n)
{
	uint32_t *tmp = n > 4096 ? malloc(n * sizeof(*tmp)) : NULL;

	if (!tmp) {
		qsort(v, n, sizeof(*v), cmp_u32);
		return;
	}
	radix_pass(v, tmp, n, 0);
	radix_pass(tmp, v, n, 16);
	free(tmp);
}

void stats_summarize(uint32_t *samples, size_t n, double ticks_per_ns,
		     struct summary *out)
{
	double sum = 0;

	memset(out, 0, sizeof(*out));
	out->n = n;
	if (!n)
		return;
	sort_u32(samples, n);
	for (size_t i = 0; i < n; i++)
		sum += samples[i];
	for (unsigned k = 0; k < NPCT; k++) {
		/* integer basis points: 99.99% of 10^6 is exactly 999900 */
		uint64_t bp = (uint64_t)llround(pct_levels[k] * 100);
		uint64_t rank = (bp * n + 9999) / 10000;
		size_t idx = rank < 1 ? 0 : (size_t)rank - 1;

		if (idx >= n)
			idx = n - 1;
		out->pct[k] = samples[idx] / ticks_per_ns;
	}
	out->max = samples[n - 1] / ticks_per_ns;
	out->mean = sum / (double)n / ticks_per_ns;
	{
		/* the mean without the top 0.1%: one preemption in a run
		 * should not move a 10 ns average */
		size_t keep = n - n / 1000;
		double tsum = 0;

		for (size_t i = 0; i < keep; i++)
			tsum += samples[i];
		out->tmean = tsum / (double)keep / ticks_per_ns;
	}
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void stats_median_of(const struct summary *in, unsigned n,
		     struct summary *out)
{
	double v[STATS_MAX_ROUNDS];

	if (n > STATS_MAX_ROUNDS)
		n = STATS_MAX_ROUNDS;
	*out = in[0];
	if (n < 2)
		return;
	for (unsigned k = 0; k < NPCT; k++) {
		for (unsigned r = 0; r < n; r++)
			v[r] = in[r].pct[k];
		out->pct[k] = median(v, n);
	}
	for (unsigned r = 0; r < n; r++)
		v[r] = in[r].max;
	out->max = median(v, n);
	for (unsigned r = 0; r < n; r++)
		v[r] = in[r].mean;
	out->mean = median(v, n);
	for (unsigned r = 0; r < n; r++)
		v[r] = in[r].tmean;
	out->tmean = median(v, n);
}
