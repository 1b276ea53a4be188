/*
 * snapshot.c - all of the state in one file, so the journals before it
 * can go.
 *
 * A snapshot is written by a child forked from the loop: fork() gives it
 * the state exactly as it is between two loop turns, copy-on-write, and
 * the loop goes on serving while the child walks the sessions
 * (bwd_state_dump), writes through a 1 MiB buffer into the store's
 * reserve (space allocated before it is needed, store.c: over it from its
 * start, cut at the snapshot's end) or, without one, into snapshot.tmp.<its
 * pid>, syncs it and exits.  The child dies with the daemon
 * (PR_SET_PDEATHSIG), and a new daemon makes a reserve of its own (store.c)
 * and never reuses a child's name, so that a writer left over from a
 * daemon that was killed can never write into a newer daemon's snapshot.  The parent's only costs are the fork itself (page tables:
 * measured in bench/, a few milliseconds at a million timers) and the
 * pages it writes to meanwhile.  Once the child exits 0, the parent
 * renames the file over snapshot, syncs the directory and removes the
 * journals of earlier generations (bwd_snapshot_install).  A crash at any
 * point leaves either the old snapshot and every journal after it, or the
 * new one and the journals after it.
 *
 * File: the header (record.c, kind snapshot, generation = the first
 * journal not in it), a SESSION record per named session followed by its
 * TIMER and QUEUED records, and a TRAILER counting the records before it:
 * a snapshot without its trailer is not whole.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "daemon-internal.h"

#define SNAPSHOT_BUF (1u << 20)

struct writer {
	int fd;
	uint8_t *buf;
	size_t len;
	uint64_t records;
};

static int flush(struct writer *w)
{
	size_t off = 0;

	while (off < w->len) {
		ssize_t n = write(w->fd, w->buf + off, w->len - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		off += (size_t)n;
	}
	w->len = 0;
	return 0;
}

static int emit(void *ctx, const struct bwd_record *r)
{
	struct writer *w = ctx;
	size_t n = bwd_record_room(r);
	int err;

	if (SNAPSHOT_BUF - w->len < n && (err = flush(w)))
		return err;
	if (n > SNAPSHOT_BUF) {
		uint8_t *big = malloc(n);
		struct writer one = { w->fd, big, 0, 0 };

		if (!big)
			return -ENOMEM;
		one.len = bwd_record_pack(r, big);
		err = flush(&one);
		free(big);
		if (err)
			return err;
	} else {
		w->len += bwd_record_pack(r, w->buf + w->len);
	}
	w->records++;
	return 0;
}

int bwd_snapshot_write(const struct bwd_state *st, int fd, uint64_t generation)
{
	struct bwd_file_header h = { .kind = BWD_FILE_SNAPSHOT,
				     .generation = generation };
	struct writer w = { .fd = fd };
	struct bwd_record trailer = { .type = BWD_REC_TRAILER };
	int err;

	w.buf = malloc(SNAPSHOT_BUF);
	if (!w.buf)
		return -ENOMEM;
	err = bwd_boot_id(h.boot_id);
	if (err)
		goto out;
	h.mono_ns = bw_now_ns();
	h.real_ns = bwd_realtime_ns();
	bwd_file_header_pack(&h, w.buf);
	w.len = BWD_FILE_HEADER_SIZE;
	err = bwd_state_dump(st, emit, &w);
	if (err)
		goto out;
	trailer.count = w.records;
	err = emit(&w, &trailer);
	if (!err)
		err = flush(&w);
out:
	free(w.buf);
	return err;
}

void bwd_snapshot_tmp_name(pid_t writer, char out[40])
{
	snprintf(out, 40, "snapshot.tmp.%ld", (long)writer);
}

/* The child: 0 when its file is whole and on disk.  into: the store's
 * reserve, written over from its start and cut at the snapshot's end;
 * -1: a file of the child's own. */
static int write_snapshot(const struct bwd_state *st, int dirfd, int into,
			  uint64_t generation)
{
	char name[40];
	int fd = into, err;
	off_t end;

	if (fd < 0) {
		bwd_snapshot_tmp_name(getpid(), name);
		fd = openat(dirfd, name,
			    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
	} else if (lseek(fd, 0, SEEK_SET) < 0) {
		return -errno;
	}
	err = bwd_snapshot_write(st, fd, generation);
	if (!err && into >= 0 &&
	    ((end = lseek(fd, 0, SEEK_CUR)) < 0 || ftruncate(fd, end) < 0))
		err = -errno;
	if (!err && fsync(fd) < 0)
		err = -errno;
	if (into < 0)
		close(fd);
	return err;
}

int bwd_snapshot_start(const struct bwd_state *st, int dirfd, int lockfd,
		       int into, uint64_t generation, enum bwd_log_level fail_level,
		       pid_t *pid)
{
	pid_t parent = getpid(), child = fork();

	if (child < 0)
		return -errno;
	if (child == 0) {
		int err = -ESRCH;

		/* The lock stays the daemon's alone: once the daemon is gone,
		 * a new one may start while this child is still being
		 * killed. */
		close(lockfd);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() == parent)
			err = write_snapshot(st, dirfd, into, generation);
		if (err)
			bwd_log(fail_level, "snapshot: the writer failed: %s",
				strerror(-err));
		/* Nothing of the parent's (atexit, stdio, libevent) may run. */
		_exit(err ? 1 : 0);
	}
	*pid = child;
	return 0;
}

/* journal.<hex> with a generation below `below`, for removal. */
static bool old_journal(const char *name, uint64_t below)
{
	char *end;
	uint64_t g;

	if (strncmp(name, "journal.", 8) != 0 || strlen(name) != 24)
		return false;
	errno = 0;
	g = strtoull(name + 8, &end, 16);
	return !errno && *end == '\0' && g < below;
}

static bool unfinished(const char *name, uint64_t unused)
{
	(void)unused;
	return strncmp(name, "snapshot.tmp", 12) == 0;
}

/* Remove the files of dirfd that match; the count removed. */
static int remove_matching(int dirfd, bool (*match)(const char *, uint64_t),
			   uint64_t arg)
{
	int fd = dup(dirfd), n = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		if (!match(e->d_name, arg))
			continue;
		if (unlinkat(dirfd, e->d_name, 0) == 0)
			n++;
		else
			bwd_log(BWD_LOG_WARNING, "cannot remove %s: %s", e->d_name,
				strerror(errno));
	}
	closedir(d);
	return n;
}

int bwd_snapshot_clean(int dirfd)
{
	return remove_matching(dirfd, unfinished, 0);
}

int bwd_snapshot_install(int dirfd, const char *name, uint64_t generation)
{
	int n;

	if (renameat(dirfd, name, dirfd, "snapshot") < 0 || fsync(dirfd) < 0)
		return -errno;
	/* The snapshot is on disk under its name: the journals it holds
	 * are history. */
	n = remove_matching(dirfd, old_journal, generation);
	return n < 0 ? n : 0;
}
