/*
 * clock.c - the one place libbitwheel reads a clock, for its callers.
 */
#include <time.h>

#include "bitwheel.h"

uint64_t bw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
