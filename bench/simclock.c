/*
 * simclock.c - the clock the event-loop peers see, and their backend wait.
 *
 * libev, libuv and libevent read the clock themselves (clock_gettime,
 * gettimeofday); none of them lets a caller set it.  So bwbench defines
 * those two functions itself: a library that calls them through its PLT
 * binds to the executable's definition before libc's, and every peer
 * sees exactly the simulated time the wheels are given.  Monotonic clocks
 * (MONOTONIC, _COARSE, _RAW, BOOTTIME) return the simulated time;
 * REALTIME returns it plus a fixed offset, so libev's monotonic/realtime
 * consistency check never sees a jump.  libc's own calls do not go through
 * the PLT, and bwbench measures with the cycle counter and real_now_ns().
 *
 * A poll of an event loop ends in its backend's wait: epoll_wait(..., 0)
 * for libev and libevent (libuv skips the call when it watches no fd).
 * With no descriptors registered that system call can only return 0, and
 * the wheel's caller would make the same call in its own loop, so by
 * default the wait is answered here without entering the kernel: a poll
 * then measures the loop iteration and its timer processing.  --real-wait
 * turns this off; the report gives the system call's cost either way.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define REALTIME_OFFSET_NS (1700000000ull * NS_PER_S)

static uint64_t sim_ns = 1000 * NS_PER_S;
static bool short_wait = true;
static struct simclock_stats st;

void simclock_set(uint64_t ns)
{
	sim_ns = ns;
}

uint64_t simclock_now(void)
{
	return sim_ns;
}

void simclock_short_wait(bool on)
{
	short_wait = on;
}

void simclock_stats(struct simclock_stats *out)
{
	*out = st;
}

uint64_t real_now_ns(void)
{
	struct timespec ts;

	syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	uint64_t ns = sim_ns;

	switch (id) {
	case CLOCK_MONOTONIC:
	case CLOCK_MONOTONIC_COARSE:
	case CLOCK_MONOTONIC_RAW:
	case CLOCK_BOOTTIME:
		break;
	case CLOCK_REALTIME:
	case CLOCK_REALTIME_COARSE:
		ns += REALTIME_OFFSET_NS;
		break;
	default:
		/* CPU-time clocks and the like: the real thing */
		return (int)syscall(SYS_clock_gettime, id, ts);
	}
	st.clock_reads++;
	ts->tv_sec = (time_t)(ns / NS_PER_S);
	ts->tv_nsec = (long)(ns % NS_PER_S);
	return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	uint64_t ns = sim_ns + REALTIME_OFFSET_NS;

	(void)tz;
	st.clock_reads++;
	tv->tv_sec = (time_t)(ns / NS_PER_S);
	tv->tv_usec = (suseconds_t)(ns % NS_PER_S / 1000);
	return 0;
}

/* The kernel's sigset size: 64 signals on every Linux port we build on. */
#define KSIGSET_SIZE 8

int epoll_pwait(int epfd, struct epoll_event *ev, int maxevents, int timeout,
		const sigset_t *sigmask)
{
	if (timeout == 0 && short_wait) {
		st.waits_skipped++;
		return 0;
	}
	st.waits_passed++;
	return (int)syscall(SYS_epoll_pwait, epfd, ev, maxevents, timeout,
			    sigmask, KSIGSET_SIZE);
}

int epoll_wait(int epfd, struct epoll_event *ev, int maxevents, int timeout)
{
	return epoll_pwait(epfd, ev, maxevents, timeout, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

double simclock_epoll_cost_ns(unsigned n, double ticks_per_ns)
{
	struct epoll_event ev;
	uint64_t *s = malloc(n * sizeof(*s));
	int ep = epoll_create1(0);
	double r = 0;

	if (s && ep >= 0 && n) {
		for (unsigned i = 0; i < n; i++) {
			uint64_t a = tsc_begin();

			syscall(SYS_epoll_pwait, ep, &ev, 1, 0, NULL,
				KSIGSET_SIZE);
			s[i] = tsc_end() - a;
		}
		qsort(s, n, sizeof(*s), cmp_u64);
		r = (double)s[n / 2] / ticks_per_ns;
	}
	if (ep >= 0)
		close(ep);
	free(s);
	return r;
}
