/*
 * process.c - the daemon process's own figures, for monitoring: what
 * Prometheus' standard process_* metrics say of a process (bitwheeld(8),
 * MONITORING), read when root's Stats asks, never kept.
 *
 * Where each comes from: resident and virtual memory from
 * /proc/self/statm (pages); open descriptors by counting
 * /proc/self/fd's entries (less the one reading it); the descriptor
 * limit from getrlimit(RLIMIT_NOFILE); CPU time, user and system, every
 * thread's, from getrusage(RUSAGE_SELF) (a snapshot writer is a child:
 * not in it); the start time from /proc/self/stat's starttime (clock
 * ticks since boot) and CLOCK_BOOTTIME read with CLOCK_REALTIME, so no
 * read of the host-wide /proc/stat.  A figure that cannot be read is
 * left out (its bit in `have` clear), the rest still given.
 *
 * Costs: three small /proc reads and two system calls, plus O(open
 * descriptors) for the count (at most --max-clients and a few): tens of
 * microseconds, once per root Stats.
 */
#define _GNU_SOURCE /* O_CLOEXEC in opendir's, clock ids */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "daemon-internal.h"

/* A small /proc file's text, NUL-terminated; 0 or -1. */
static int read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static uint64_t ns_of(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

static void memory(struct bwd_process *p)
{
	char buf[256];
	unsigned long long size, resident;
	long page = sysconf(_SC_PAGESIZE);

	if (page <= 0 || read_small("/proc/self/statm", buf, sizeof(buf)) ||
	    sscanf(buf, "%llu %llu", &size, &resident) != 2)
		return;
	p->virtual_bytes = size * (uint64_t)page;
	p->resident_bytes = resident * (uint64_t)page;
	p->have |= BWD_PROC_MEMORY;
}

static void fds(struct bwd_process *p)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	uint64_t n = 0;
	struct rlimit rl;

	if (d) {
		while ((e = readdir(d)))
			n += e->d_name[0] != '.';
		closedir(d);
		/* The directory's own descriptor is not the daemon's. */
		p->open_fds = n ? n - 1 : 0;
		p->have |= BWD_PROC_OPEN_FDS;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		p->max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX :
			(uint64_t)rl.rlim_cur;
		p->have |= BWD_PROC_MAX_FDS;
	}
}

static void cpu(struct bwd_process *p)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return;
	p->cpu_ns = ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
		1000000000u + ((uint64_t)ru.ru_utime.tv_usec +
			       (uint64_t)ru.ru_stime.tv_usec) * 1000u;
	p->have |= BWD_PROC_CPU;
}

/* starttime is field 22; the name before it (field 2, in parentheses)
 * may hold spaces and ')', so fields are counted from its last ')'. */
static void start_time(struct bwd_process *p)
{
	char buf[1024], *s;
	unsigned long long ticks;
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec boot, real;
	uint64_t since_boot, started;

	if (hz <= 0 || read_small("/proc/self/stat", buf, sizeof(buf)) ||
	    !(s = strrchr(buf, ')')) ||
	    sscanf(s + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u "
		   "%*u %*d %*d %*d %*d %*d %*d %llu", &ticks) != 1 ||
	    clock_gettime(CLOCK_BOOTTIME, &boot) != 0 ||
	    clock_gettime(CLOCK_REALTIME, &real) != 0)
		return;
	since_boot = ns_of(&boot);
	started = ticks * (1000000000u / (uint64_t)hz);
	if (started > since_boot)
		started = since_boot;
	p->start_time_ns = ns_of(&real) - (since_boot - started);
	p->have |= BWD_PROC_START;
}

/* At most one reading a second: counting the descriptors walks
 * /proc/self/fd, O(connections), and root's Stats must stay cheap however
 * often it is asked (tests poll it; with 10,000 connections the walks held
 * the loop for hundreds of milliseconds under ASan). */
#define READ_EVERY_NS 1000000000u

void bwd_process_read(struct bwd_process *out)
{
	static struct bwd_process last;
	static uint64_t last_ns;
	uint64_t now = bw_now_ns();

	if (!last_ns || now - last_ns >= READ_EVERY_NS) {
		memset(&last, 0, sizeof(last));
		memory(&last);
		fds(&last);
		cpu(&last);
		start_time(&last);
		last_ns = now;
	}
	*out = last;
}
