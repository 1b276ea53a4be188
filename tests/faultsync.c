/*
 * faultsync.c - fdatasync(2) made slow or failing, for the end-to-end
 * suites: an LD_PRELOAD shim (built for make check only, never installed)
 * that tests/daemonutil.c puts under a daemon it starts (du_fault_sync).
 *
 * Control: BW_FAULT_FDATASYNC names a file read at every call, holding
 * "DELAY_MS ERRNO": the call waits DELAY_MS, then fails with ERRNO (say
 * 5, EIO) without syncing, or with ERRNO 0 does the real sync.  A file
 * that is absent, empty or unreadable means no fault, so the test turns
 * faults on and off while the daemon runs (it replaces the file by a
 * rename: a call never reads half of one).  Without BW_FAULT_FDATASYNC
 * the shim is the real call.
 *
 * fdatasync alone: the journal's syncs (daemon/journal.c), which replies
 * wait for.  The snapshot writer's fsync(2) is not touched.
 *
 * Costs: an open, a read and a close per call, and the delay; the real
 * call is the system call itself (no dlsym, so no libdl, and nothing of
 * the shim runs before it is called).  No sanitizer runtime of its own is
 * needed, but a daemon built with ASan wants its runtime first in the
 * library list: du_fault_sync sets ASAN_OPTIONS=verify_asan_link_order=0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The control file's "DELAY_MS ERRNO"; both 0 when there is none. */
static void fault(unsigned long *delay_ms, int *err)
{
	const char *path = getenv("BW_FAULT_FDATASYNC");
	char buf[64], *p;
	ssize_t n;
	int fd;

	*delay_ms = 0;
	*err = 0;
	if (!path || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	*delay_ms = strtoul(buf, &p, 10);
	*err = (int)strtol(p, NULL, 10);
}

int fdatasync(int fd)
{
	int saved = errno, err;
	unsigned long delay_ms;

	fault(&delay_ms, &err);
	errno = saved;
	if (delay_ms) {
		struct timespec ts = { (time_t)(delay_ms / 1000),
				       (long)(delay_ms % 1000) * 1000000 };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
		errno = saved;
	}
	if (err > 0) {
		errno = err;
		return -1;
	}
	return (int)syscall(SYS_fdatasync, fd);
}
