/*
 * journal.c - the append-only journal: every change to a named session,
 * one record each (record.c), in the order the daemon made them.
 *
 * Layout: journal.<generation, 16 hex digits> in the state directory, a
 * file header, then records.  Records go into a memory buffer as the loop
 * turn makes them; bwd_journal_commit() writes the buffer with one
 * write(2) and, with --fsync=batch, makes it durable with one fdatasync(2)
 * for the whole turn (group commit).  --fsync=always commits each record
 * as it is appended; --fsync=never only writes, which survives a crash of
 * the daemon but not of the machine.
 *
 * Replies wait for this: while bwd_journal_pending() is true, connections
 * of named sessions hold their output (conn.c), so no acknowledgement
 * leaves before its record is as durable as --fsync promises.
 *
 * A write or sync that fails leaves the journal failed for good: nothing
 * it held back is ever released, and the daemon stops (store.c), because
 * what the kernel did with the failed bytes cannot be known.
 *
 * Costs: append is a copy into the buffer (amortised O(record)); commit
 * is one write and at most one fdatasync per loop turn.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon-internal.h"

struct bwd_journal {
	int fd;
	uint64_t generation;
	enum bwd_fsync fsync;
	uint8_t *buf;              /* appended, not yet written              */
	size_t len, cap;
	bool unsynced;             /* written, not yet fdatasync'ed          */
	bool failed;
	uint64_t size;             /* bytes in the file                      */
};

uint64_t bwd_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int bwd_boot_id(uint8_t out[16])
{
	char text[64];
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	size_t n = 0;

	if (!f)
		return -errno;
	if (!fgets(text, sizeof(text), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	for (const char *p = text; *p && *p != '\n' && n < 32; p++) {
		int v;

		if (*p == '-')
			continue;
		if (*p >= '0' && *p <= '9')
			v = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			v = *p - 'a' + 10;
		else
			return -EIO;
		if (n % 2 == 0)
			out[n / 2] = (uint8_t)(v << 4);
		else
			out[n / 2] |= (uint8_t)v;
		n++;
	}
	return n == 32 ? 0 : -EIO;
}

void bwd_journal_name(uint64_t generation, char out[32])
{
	snprintf(out, 32, "journal.%016" PRIx64, generation);
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int bwd_journal_open(int dirfd, uint64_t generation, enum bwd_fsync policy,
		     struct bwd_journal **out)
{
	struct bwd_journal *j = calloc(1, sizeof(*j));
	struct bwd_file_header h = { .kind = BWD_FILE_JOURNAL,
				     .generation = generation };
	uint8_t hdr[BWD_FILE_HEADER_SIZE];
	char name[32];
	int err;

	if (!j)
		return -ENOMEM;
	j->fd = -1;
	j->generation = generation;
	j->fsync = policy;
	err = bwd_boot_id(h.boot_id);
	if (err)
		goto fail;
	h.mono_ns = bw_now_ns();
	h.real_ns = bwd_realtime_ns();
	bwd_journal_name(generation, name);
	j->fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC,
		       0600);
	if (j->fd < 0) {
		err = -errno;
		goto fail;
	}
	bwd_file_header_pack(&h, hdr);
	err = write_all(j->fd, hdr, sizeof(hdr));
	if (err)
		goto fail;
	/* The file and its name both survive a crash before the first
	 * record is acknowledged. */
	if (fdatasync(j->fd) < 0 || fsync(dirfd) < 0) {
		err = -errno;
		goto fail;
	}
	j->size = sizeof(hdr);
	*out = j;
	return 0;
fail:
	if (j->fd >= 0) {
		close(j->fd);
		unlinkat(dirfd, name, 0);
	}
	free(j);
	return err;
}

void bwd_journal_close(struct bwd_journal *j)
{
	if (!j)
		return;
	if (!j->failed && bwd_journal_commit(j))
		bwd_log(BWD_LOG_ERR, "journal: last commit failed: %s", strerror(errno));
	close(j->fd);
	free(j->buf);
	free(j);
}

bool bwd_journal_pending(const struct bwd_journal *j)
{
	return j->len || j->failed || (j->unsynced && j->fsync != BWD_FSYNC_NEVER);
}

bool bwd_journal_failed(const struct bwd_journal *j)
{
	return j->failed;
}

uint64_t bwd_journal_generation(const struct bwd_journal *j)
{
	return j->generation;
}

uint64_t bwd_journal_size(const struct bwd_journal *j)
{
	return j->size + j->len;
}

static int fail(struct bwd_journal *j, int err, const char *what)
{
	if (!j->failed)
		bwd_log(BWD_LOG_ERR, "journal.%016" PRIx64 ": %s: %s", j->generation,
			what, strerror(-err));
	j->failed = true;
	return err;
}

int bwd_journal_append(struct bwd_journal *j, const struct bwd_record *r)
{
	size_t n = bwd_record_size(r);

	if (j->failed)
		return -EIO;
	if (j->cap - j->len < n) {
		size_t cap = j->cap ? j->cap : 65536;
		uint8_t *p;

		while (cap - j->len < n)
			cap *= 2;
		p = realloc(j->buf, cap);
		if (!p)
			return fail(j, -ENOMEM, "no memory for a record");
		j->buf = p;
		j->cap = cap;
	}
	j->len += bwd_record_pack(r, j->buf + j->len);
	return j->fsync == BWD_FSYNC_ALWAYS ? bwd_journal_commit(j) : 0;
}

int bwd_journal_write(struct bwd_journal *j)
{
	int err;

	if (j->failed)
		return -EIO;
	if (!j->len)
		return 0;
	err = write_all(j->fd, j->buf, j->len);
	if (err)
		return fail(j, err, "write");
	j->size += j->len;
	j->len = 0;
	j->unsynced = true;
	return 0;
}

int bwd_journal_commit(struct bwd_journal *j)
{
	int err = bwd_journal_write(j);

	if (err)
		return err;
	if (j->unsynced && j->fsync != BWD_FSYNC_NEVER) {
		if (fdatasync(j->fd) < 0)
			return fail(j, -errno, "fdatasync");
		j->unsynced = false;
	}
	return 0;
}
