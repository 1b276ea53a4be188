/*
 * faultsync.c - fdatasync(2) made slow or failing, for the end-to-end
 * suites: an LD_PRELOAD shim (built for make check only, never installed)
 * that tests/daemonutil.c puts under a daemon it starts (du_fault_sync).
 *
 * Control: BW_FAULT_FDATASYNC names a file read at every call, holding
 * lines of "DELAY_MS ERRNO": the call waits DELAY_MS, then fails with
 * ERRNO (say 5, EIO) without syncing, or with ERRNO 0 does the real sync.
 * The first call after the file was put in place takes the first line,
 * the next the second, and so on, the last line every call past the
 * end: a plan of slow, fast and failing syncs, in the order the calls
 * begin (they may run at once, from several threads).  A file that is
 * absent, empty or unreadable means no fault, so the test turns faults
 * on and off while the daemon runs (it replaces the file by a rename: a
 * call never reads half of one, and a new file, told by its inode,
 * starts its plan from the first line).  Without BW_FAULT_FDATASYNC the
 * shim is the real call.
 *
 * Log: with BW_FAULT_FDATASYNC_LOG naming a file, each call appends
 * "BEGIN_NS END_NS ERRNO" to it (CLOCK_MONOTONIC, when it was called and
 * when it returned; ERRNO 0 for success), one write(2) per line with
 * O_APPEND, so that a test can set what it received against the syncs
 * that could have covered it.
 *
 * fdatasync alone: the journal's syncs (daemon/journal.c), which replies
 * wait for.  The snapshot writer's fsync(2) is not touched.
 *
 * Costs: an open, a read and a close per call (and an append with the
 * log), and the delay; the real
 * call is the system call itself (no dlsym, so no libdl, and nothing of
 * the shim runs before it is called).  No sanitizer runtime of its own is
 * needed, but a daemon built with ASan wants its runtime first in the
 * library list: du_fault_sync sets ASAN_OPTIONS=verify_asan_link_order=0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The plan's file, by inode, and how many calls it has had. */
static unsigned long plan_ino;
static unsigned long plan_calls;
static char plan_lock;

/* This call's line of the control file: both 0 when there is none. */
static void fault(unsigned long *delay_ms, int *err)
{
	const char *path = getenv("BW_FAULT_FDATASYNC");
	char buf[4096], *p = buf, *line;
	unsigned long k;
	struct stat st;
	ssize_t n;
	int fd;

	*delay_ms = 0;
	*err = 0;
	if (!path || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = fstat(fd, &st) < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	while (__atomic_test_and_set(&plan_lock, __ATOMIC_ACQUIRE))
		;
	if (plan_ino != (unsigned long)st.st_ino) {
		plan_ino = (unsigned long)st.st_ino;
		plan_calls = 0;
	}
	k = plan_calls++;
	__atomic_clear(&plan_lock, __ATOMIC_RELEASE);
	/* Line k, or the last. */
	for (line = p; k && (p = strchr(line, '\n')) && p[1]; k--)
		line = p + 1;
	*delay_ms = strtoul(line, &p, 10);
	*err = (int)strtol(p, NULL, 10);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void log_call(uint64_t begin, int err)
{
	const char *path = getenv("BW_FAULT_FDATASYNC_LOG");
	char line[80];
	int fd, n;

	if (!path || (fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0)
		return;
	n = snprintf(line, sizeof(line), "%" PRIu64 " %" PRIu64 " %d\n", begin,
		     now_ns(), err);
	if (write(fd, line, (size_t)n) < 0)
		n = 0;
	close(fd);
}

int fdatasync(int fd)
{
	int saved = errno, err, rc;
	unsigned long delay_ms;
	uint64_t begin = now_ns();

	fault(&delay_ms, &err);
	errno = saved;
	if (delay_ms) {
		struct timespec ts = { (time_t)(delay_ms / 1000),
				       (long)(delay_ms % 1000) * 1000000 };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	if (err > 0) {
		log_call(begin, err);
		errno = err;
		return -1;
	}
	rc = (int)syscall(SYS_fdatasync, fd);
	err = rc < 0 ? errno : 0;
	log_call(begin, err);
	errno = rc < 0 ? err : saved;
	return rc;
}
