/*
 * fakeclock.c - a wall clock the test steps, for the end-to-end suites: an
 * LD_PRELOAD shim (built for make check only, never installed) that
 * tests/daemonutil.c puts under a daemon it starts (du_fake_clock).  The
 * host's clock is never touched, and a Linux time namespace cannot help:
 * it offsets CLOCK_MONOTONIC and CLOCK_BOOTTIME, never CLOCK_REALTIME.
 *
 * Control: BW_FAKECLOCK names a file of 8 bytes, a signed offset in ns
 * (host byte order) that every CLOCK_REALTIME read adds (clock_gettime of
 * CLOCK_REALTIME and CLOCK_REALTIME_COARSE, gettimeofday, time).  The shim
 * maps the file shared, so a test's pwrite(2) to it changes the clock at
 * once: a quiet step, which the daemon has not been told of.
 *
 * The step's notice: the kernel reports a step of the real clock to a
 * CLOCK_REALTIME timerfd armed with TFD_TIMER_CANCEL_ON_SET, whose read()
 * then fails with ECANCELED (daemon/clock.c).  Here timerfd_create of
 * CLOCK_REALTIME returns an inotify descriptor instead, watching
 * BW_FAKECLOCK's file + ".step" for IN_CLOSE_WRITE; timerfd_settime on it
 * does nothing; read() on it drains the events and fails with ECANCELED
 * when there were any (EAGAIN otherwise).  So a test tells the daemon of
 * a step by opening that file for writing and closing it: deterministic,
 * and through the daemon's own event loop as a real step would come.
 *
 * Suspend: the file's next 8 bytes, when it has them, are an offset
 * every CLOCK_BOOTTIME read adds (clock_gettime of CLOCK_BOOTTIME), and
 * CLOCK_MONOTONIC is left alone: raising it is a suspend of that length
 * as the daemon sees it.  The kernel's notice of a resume is a
 * CLOCK_BOOTTIME timerfd that expires (the daemon arms one at its next
 * boottime deadline, which a suspend may pass).  Here timerfd_create of
 * CLOCK_BOOTTIME returns an inotify descriptor watching BW_FAKECLOCK +
 * ".resume" the same way: timerfd_settime does nothing, and read() hands
 * out one expiration (8 bytes) when the test opened that file for
 * writing and closed it, EAGAIN otherwise.  So the stand-in expires only
 * when a test says so, never at a deadline by itself: the daemon's
 * wheel and its check at a timer's slot are what fire boottime timers
 * on time between resumes.
 *
 * Costs: other clocks and descriptors go straight to the system call (no
 * dlsym, so no libdl); the offset is one load from the mapping.  Without
 * BW_FAKECLOCK the shim is the real calls (by system call, not the vDSO).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const volatile int64_t *offset;  /* the mapped file; NULL: none  */
static bool has_boot;                   /* it has CLOCK_BOOTTIME's too   */
static int step_fd = -1;                /* the inotifies standing in     */
static int resume_fd = -1;

static void init(void)
{
	const char *path = getenv("BW_FAKECLOCK");
	int saved = errno, fd;
	void *p;

	struct stat sb;

	if (!path || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		goto out;
	/* Mapped no further than the file goes: past it is SIGBUS. */
	has_boot = fstat(fd, &sb) == 0 && sb.st_size >= 2 * (off_t)sizeof(int64_t);
	p = mmap(NULL, (has_boot ? 2 : 1) * sizeof(int64_t), PROT_READ,
		 MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		offset = p;
out:
	errno = saved;
}

/* clk's offset: CLOCK_REALTIME's or CLOCK_BOOTTIME's. */
static int64_t off(clockid_t clk)
{
	pthread_once(&once, init);
	if (!offset)
		return 0;
	if (clk == CLOCK_BOOTTIME)
		return has_boot ? offset[1] : 0;
	return offset[0];
}

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	int64_t o, ns;

	if (syscall(SYS_clock_gettime, clk, ts) < 0)
		return -1;
	if (clk != CLOCK_REALTIME && clk != CLOCK_REALTIME_COARSE &&
	    clk != CLOCK_BOOTTIME)
		return 0;
	o = off(clk);
	ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + o;
	ts->tv_sec = (time_t)(ns / 1000000000);
	ts->tv_nsec = (long)(ns % 1000000000);
	return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	struct timespec ts;

	(void)tz;
	if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *t)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (t)
		*t = ts.tv_sec;
	return ts.tv_sec;
}

int timerfd_create(int clk, int flags)
{
	const char *path = getenv("BW_FAKECLOCK");
	char step[512];
	int fd;

	if ((clk != CLOCK_REALTIME && clk != CLOCK_BOOTTIME) || !path)
		return (int)syscall(SYS_timerfd_create, clk, flags);
	snprintf(step, sizeof(step), "%s%s", path,
		 clk == CLOCK_BOOTTIME ? ".resume" : ".step");
	fd = inotify_init1((flags & TFD_NONBLOCK ? IN_NONBLOCK : 0) |
			   (flags & TFD_CLOEXEC ? IN_CLOEXEC : 0));
	if (fd < 0)
		return -1;
	if (inotify_add_watch(fd, step, IN_CLOSE_WRITE) < 0) {
		close(fd);
		return -1;
	}
	*(clk == CLOCK_BOOTTIME ? &resume_fd : &step_fd) = fd;
	return fd;
}

int timerfd_settime(int fd, int flags, const struct itimerspec *new_value,
		    struct itimerspec *old_value)
{
	if (fd >= 0 && (fd == step_fd || fd == resume_fd))
		return 0;
	return (int)syscall(SYS_timerfd_settime, fd, flags, new_value, old_value);
}

ssize_t read(int fd, void *buf, size_t count)
{
	char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	uint64_t one = 1;

	if (fd < 0 || (fd != step_fd && fd != resume_fd))
		return syscall(SYS_read, fd, buf, count);
	n = syscall(SYS_read, fd, ev, sizeof(ev));
	if (n > 0 && fd == resume_fd && count >= sizeof(one)) {
		memcpy(buf, &one, sizeof(one));
		return sizeof(one);
	}
	if (n > 0)
		errno = ECANCELED;
	return -1;
}
