/*
 * journal.c - the append-only journal: every change to a named session,
 * one record each (record.c), in the order the daemon made them.
 *
 * Layout: journal.<generation, 16 hex digits> in the state directory, a
 * file header, then records.  Records go into a memory buffer as the loop
 * turn makes them; bwd_journal_commit() writes the buffer with one
 * write(2) at the end of the turn.  With --fsync=batch (group commit) a
 * sync thread of the journal's own then runs one fdatasync(2) for
 * everything written so far, while the loop goes on serving; when it is
 * done it says so on an eventfd (bwd_journal_event_fd) and the loop reads
 * what is durable (bwd_journal_synced).  There are BWD_SYNCS_IN_FLIGHT
 * such threads: records written while a sync runs may start the next sync
 * on another thread, so that a request waits for the sync that covers
 * it, not also for the rest of one that began before it.  The kernel
 * overlaps them (the later sync waits for the earlier's pages only, and
 * the block layer merges their cache flushes).  But each fdatasync costs
 * CPU of its own (tens of us: writeback, the device's doorbell, the
 * wake-ups), so a second sync of the few records that came in right
 * after the first began would double that cost for little: while a sync
 * covering BWD_SYNC_GATHER_MIN records or more is in flight (a load
 * under which the CPU counts), the records written since gather
 * (bwd_sync_gather) until they are as many as it covers, or it has run
 * as long as syncs lately take (est_ns, a moving average: it is late, and
 * they need not wait for the rest of it), or it is done; whichever comes
 * first starts theirs.  A lone request finds no sync in flight, or one of
 * a few records (a fire's), and starts its own at once.
 * Records nothing waits for (the commit's needed: no output is held for
 * them, as for an Ack without request_id, which PROTOCOL.md lets a crash
 * undo) start no sync: they go with the next one something waits for,
 * or get their own BWD_SYNC_LAZY_NS after the first of them was written.
 * A lone consumer's acknowledgements then no longer take the device
 * while the next request's sync wants it (one flush at a time).
 * Each sync's records are counted (bwd_sync_stats.records) as well as
 * its time, so that Stats tells how many records a sync covers.
 * A lone sync (none other in flight, fewer than BWD_SYNC_GATHER_MIN
 * records) is run by a thread bound to the CPU the loop began it on
 * (follow_loop: sched_getcpu, and a pthread_setaffinity_np only when the
 * loop has moved), so that the wake-ups of a hand-off (loop to thread,
 * thread to loop through the eventfd) are switches on one CPU, not
 * wake-ups of another, idle one.  Any other sync's thread is unbound
 * (the daemon's own mask again): under load the loop keeps its CPU busy,
 * and a thread bound there waited for it to start its sync and again to
 * report it, while the other CPU had time; bound always, pipelined and
 * deep ran at 0.74x and 0.82x of this (doc/performance.md).  The binding,
 * measured on a 2-vCPU VM (doc/performance.md): the lone round trip
 * under batch at some 50 us over always's, nearly all of it in those
 * switches (the eventfd's write to the loop's first instruction ~30 us
 * p50 either way; the extra context switches, not the IPIs, are what
 * cost there); bound, the daemon's CPU per lone request -12..-47 % and
 * the round trip's p99 -32..-68 % on a shared disk, its p50 from +5 % to
 * -32 %.  Tried and not taken: a 50 us spin in the thread after each
 * sync (the two CPUs' time went to the spin: p50 +50 % on tmpfs); Linux
 * AIO's IOCB_CMD_FDSYNC completing on the eventfd, no thread of ours (on
 * tmpfs 43 against 65 us, on the disk no better, and the kernel's worker
 * runs the sync where tests/faultsync.c cannot slow or fail it: the
 * shipped path would go untested under faults).  Each thread syncs
 * through an open file description of its own: an error of
 * writeback is reported once per description (errseq), and on a shared
 * one whichever sync looked first would take it from the other, which
 * could then claim bytes it had not made durable.  Results are taken in
 * the order the syncs began, whatever order they finish in: a later
 * sync's success says nothing of an earlier one's bytes if that one
 * failed, so a failure stops what is durable at the last sync before it.
 * --fsync=always runs one fdatasync in the loop itself at the end of the
 * turn, which waits for it: no thread hand-off for a lone request, but
 * nothing else is served meanwhile.  --fsync=never only writes, which
 * survives a crash of the daemon but not of the machine.

 * Replies wait for this: while bwd_journal_pending() is true, connections
 * of named sessions hold their output (conn.c), each part marked with the
 * journal's size when a sync began, until bwd_journal_durable() reaches
 * it, so no acknowledgement leaves before its record is as durable as
 * --fsync promises.
 *
 * Room ahead: before the records reach the file's end it is extended
 * PREALLOC_STEP at a time with written zeros (zero_room), while the file
 * system has PREALLOC_FREE to spare, and the records are written into
 * it at their offset.  An fdatasync of bytes that neither change the
 * file's size nor land in unwritten blocks is a pure data overwrite: no
 * inode, no extent to convert, no journal commit of the file system's.
 * fallocate(2) gives the size but leaves its extents unwritten, so each
 * sync still converted the part it covered; on ext4, a sync's p50 for
 * 200 B to 64 KiB went from 270-420 us appending and 210-340 us into
 * fallocated room to 220-240 us into zeros, and group commit's syncs
 * under load from 720-920 to 420-530 us (doc/performance.md).  The
 * zeros cost one write of PREALLOC_STEP in the loop per PREALLOC_STEP
 * of records, and their writeback rides on the next sync.  The file
 * then ends in zeros, the room not yet written, where a reader stops as
 * at its end (store.c); a journal closed in good order is cut to its
 * records.  Without the room (little space, a failed write of zeros,
 * which is cut back off) the writes extend the file as before.
 *
 * A write or sync that fails leaves the journal failed for good
 * (bwd_journal_error says why): it takes no more records, and what it held
 * back stays held, because what the kernel did with the failed bytes
 * cannot be known.  The store then goes on without it until a new
 * snapshot and a new journal can be written (store.c).
 *
 * A test can take the place of the threads and the clock (a seam for
 * tests/check_state.c's simulation of group commit, daemon-internal.h:
 * bwd_journal_open_sim): its executor is told of each sync as it begins
 * and says when and how it ended, through the same slots, eventfd and
 * bwd_journal_synced as the threads.  The daemon's journals have none
 * (sim NULL): a branch at a commit and at a sync in the loop, nothing
 * more.
 *
 * Costs: append is a copy into the buffer (amortised O(record)); commit
 * is one write per loop turn, and under always one fdatasync too; the
 * loop never waits for the disk under batch, and there are at most
 * BWD_SYNCS_IN_FLIGHT fdatasyncs in flight, each covering more than the
 * one before it; a commit that gathers asks the store for a timer (its
 * *wait_ns) to commit again when the gathering ends; a sync begun costs
 * a sched_getcpu (vDSO), and an affinity call when the loop has moved.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "daemon-internal.h"

/* Room ahead (see the top): allocated this much at a time, and only while
 * the file system has this much free besides. */
#define PREALLOC_STEP (1u << 20)
#define PREALLOC_FREE (64ull << 20)

struct bwd_journal {
	int fd;
	uint64_t generation;
	enum bwd_fsync fsync;
	uint8_t *buf;              /* appended, not yet written              */
	size_t len, cap;
	bool failed;
	int err;                   /* why it failed, -errno                  */
	const char *what;          /* the call that did                      */
	uint64_t size;             /* bytes of records in the file (written) */
	uint64_t room;             /* the file's size: records, then zeros   */
	bool prealloc;             /* room ahead may still be allocated      */
	uint64_t durable;          /* bytes known to be on disk (loop's copy) */
	uint64_t asked;            /* the newest sync began for this much    */
	uint64_t recs;             /* records written (in size)              */
	uint64_t buf_recs;         /* records in buf                         */
	uint64_t durable_recs;     /* records in durable                     */
	uint64_t asked_recs;       /* records in asked                       */
	uint64_t est_ns;           /* syncs' recent time, for gathering      */
	bool lazy;                 /* records nothing waits for are waiting  */
	uint64_t lazy_ns;          /* ... since then                         */
	/* The sync threads (batch only); mu guards stop and the slots'
	 * go, done, err and ns. */
	bool threaded;
	pthread_mutex_t mu;
	bool stop;
	int efd;                   /* the threads' "done" to the loop        */
	uint64_t seq;              /* syncs begun                            */
	cpu_set_t cpus;            /* where the threads may run unbound      */
	struct sync_slot {
		struct bwd_journal *j;
		pthread_t thread;
		pthread_cond_t cv;
		int fd;            /* its own open file description (top)    */
		bool started;      /* the thread runs                         */
		int cpu;           /* loop: the CPU it is bound to, -1: none  */
		bool busy;         /* loop: began, result not yet taken       */
		uint64_t seq;      /* loop: which sync, in order begun        */
		uint64_t upto;     /* loop: the file's size when it began     */
		uint64_t recs;     /* loop: the records written by then       */
		uint64_t from_recs; /* loop: ... and by the sync before it    */
		uint64_t began_ns; /* loop: when                              */
		bool go;           /* a sync to run                           */
		bool done;
		int err;
		uint64_t ns;       /* how long it took                        */
	} slot[BWD_SYNCS_IN_FLIGHT];
	struct bwd_sync_stats *stats; /* where syncs are counted, or NULL   */
	const struct bwd_journal_sim *sim; /* a test's executor, or NULL     */
};

/* The clock and a sync in the loop: the host's, or a test's (the top). */
static uint64_t now_ns(const struct bwd_journal *j)
{
	return j->sim ? j->sim->now(j->sim->arg) : bw_now_ns();
}

static int datasync(struct bwd_journal *j)
{
	if (j->sim)
		return j->sim->sync(j->sim->arg);
	return fdatasync(j->fd) < 0 ? -errno : 0;
}

/* A sync that made durable the records up to recs, in ns. */
static void count_sync(struct bwd_journal *j, uint64_t ns, uint64_t recs)
{
	static const uint64_t le[BWD_SYNC_BOUNDS] = BWD_SYNC_LE_NS;
	static const uint64_t rle[BWD_SYNC_RECORDS_BOUNDS] = BWD_SYNC_RECORDS_LE;
	struct bwd_sync_stats *s = j->stats;

	/* A moving average over some 8 syncs: what the next will take. */
	j->est_ns = j->est_ns ? j->est_ns - j->est_ns / 8 + ns / 8 : ns;
	recs = recs > j->durable_recs ? recs - j->durable_recs : 0;
	j->durable_recs += recs;
	if (!s)
		return;
	s->count++;
	bwd_hist_add(&s->hist, le, BWD_SYNC_BOUNDS, ns);
	bwd_hist_add(&s->records, rle, BWD_SYNC_RECORDS_BOUNDS, recs);
	s->last_ns = ns;
	if (ns > s->max_ns)
		s->max_ns = ns;
}

void bwd_journal_count_syncs(struct bwd_journal *j, struct bwd_sync_stats *s)
{
	if (j)
		j->stats = s;
}

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

/* n bytes at offset off of the file. */
static int write_at(int fd, const uint8_t *p, size_t n, uint64_t off)
{
	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* The room [from, to) written with zeros; on failure, cut back to from. */
static int zero_room(int fd, uint64_t from, uint64_t to)
{
	static const uint8_t zeros[65536];

	for (uint64_t at = from, n; at < to; at += n) {
		n = to - at < sizeof(zeros) ? to - at : sizeof(zeros);
		if (write_at(fd, zeros, (size_t)n, at)) {
			if (ftruncate(fd, (off_t)from) < 0)
				bwd_log(BWD_LOG_DEBUG, "journal: cutting a failed room: %s",
					strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* Room for what is to be written, when the file system has it to spare;
 * once it has not (or cannot), the writes extend the file. */
static void prealloc(struct bwd_journal *j)
{
	uint64_t end = j->size + j->len, to;
	struct statvfs sv;

	if (!j->prealloc || end <= j->room)
		return;
	to = (end / PREALLOC_STEP + 1) * PREALLOC_STEP;
	if (fstatvfs(j->fd, &sv) < 0 ||
	    (uint64_t)sv.f_bavail * sv.f_frsize < PREALLOC_FREE + (to - j->room) ||
	    zero_room(j->fd, j->room, to) < 0) {
		j->prealloc = false;
		return;
	}
	j->room = to;
}

/* Slot t's sync is done: tell the loop.  The eventfd is written after
 * mu is let go, so that the loop it wakes does not find mu held and
 * sleep again until it is (a switch there and back, which on a
 * paravirtualised guest costs tens of us). */
static void sync_done(struct sync_slot *t, int err, uint64_t ns)
{
	struct bwd_journal *j = t->j;
	uint64_t one = 1;

	pthread_mutex_lock(&j->mu);
	t->go = false;
	t->done = true;
	t->err = err;
	t->ns = ns;
	pthread_mutex_unlock(&j->mu);
	/* The loop drains the counter; a full one cannot happen.  If the
	 * loop has taken the result meanwhile, it had no error to miss. */
	if (write(j->efd, &one, sizeof(one)) < 0) {
		err = -errno;
		pthread_mutex_lock(&j->mu);
		if (t->done && !t->err)
			t->err = err;
		pthread_mutex_unlock(&j->mu);
	}
}

void bwd_journal_sim_done(struct bwd_journal *j, unsigned slot, int err,
			  uint64_t ns)
{
	sync_done(&j->slot[slot], err, ns);
}

/* A sync thread: one fdatasync whenever its slot is given one, then say
 * so.  A failure is the loop's to act on (bwd_journal_synced). */
static void *sync_main(void *arg)
{
	struct sync_slot *t = arg;
	struct bwd_journal *j = t->j;

	for (;;) {
		uint64_t t0;
		bool stop;
		int err = 0;

		pthread_mutex_lock(&j->mu);
		while (!j->stop && !t->go)
			pthread_cond_wait(&t->cv, &j->mu);
		stop = j->stop;
		pthread_mutex_unlock(&j->mu);
		if (stop)
			break;
		t0 = bw_now_ns();
		if (fdatasync(t->fd) < 0)
			err = -errno;
		sync_done(t, err, bw_now_ns() - t0);
	}
	return NULL;
}

static void stop_threads(struct bwd_journal *j)
{
	if (!j->threaded)
		return;
	pthread_mutex_lock(&j->mu);
	j->stop = true;
	for (unsigned i = 0; i < BWD_SYNCS_IN_FLIGHT; i++)
		pthread_cond_signal(&j->slot[i].cv);
	pthread_mutex_unlock(&j->mu);
	for (unsigned i = 0; i < BWD_SYNCS_IN_FLIGHT; i++) {
		struct sync_slot *t = &j->slot[i];

		if (t->started)
			pthread_join(t->thread, NULL);
		pthread_cond_destroy(&t->cv);
		if (t->fd >= 0)
			close(t->fd);
	}
	pthread_mutex_destroy(&j->mu);
	j->threaded = false;
}

/* The threads, each with a description of the file opened by its name
 * (a dup would share the description). */
static int start_threads(struct bwd_journal *j, int dirfd, const char *name)
{
	int err;

	if (j->fsync != BWD_FSYNC_BATCH)
		return 0;
	j->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (j->efd < 0)
		return -errno;
	if ((err = pthread_mutex_init(&j->mu, NULL)))
		return -err;
	for (unsigned i = 0; i < BWD_SYNCS_IN_FLIGHT; i++) {
		j->slot[i].j = j;
		j->slot[i].fd = -1;
		j->slot[i].cpu = -1;
		if ((err = pthread_cond_init(&j->slot[i].cv, NULL))) {
			while (i--)
				pthread_cond_destroy(&j->slot[i].cv);
			pthread_mutex_destroy(&j->mu);
			return -err;
		}
	}
	/* Unbound, a thread may go wherever the daemon could when it
	 * began; not knowing that, anywhere (the kernel keeps to the
	 * cpuset). */
	if (sched_getaffinity(0, sizeof(j->cpus), &j->cpus) < 0)
		memset(&j->cpus, 0xff, sizeof(j->cpus));
	j->threaded = true;
	/* A test's executor runs the syncs (the top). */
	for (unsigned i = 0; i < BWD_SYNCS_IN_FLIGHT && !j->sim; i++) {
		struct sync_slot *t = &j->slot[i];

		t->fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (t->fd < 0) {
			err = errno;
			break;
		}
		if ((err = pthread_create(&t->thread, NULL, sync_main, t)))
			break;
		t->started = true;
	}
	if (err)
		stop_threads(j);
	return -err;
}

int bwd_journal_open_sim(int dirfd, uint64_t generation, enum bwd_fsync policy,
			 const struct bwd_journal_sim *sim, struct bwd_journal **out)
{
	struct bwd_journal *j = calloc(1, sizeof(*j));
	struct bwd_file_header h = { .kind = BWD_FILE_JOURNAL,
				     .generation = generation };
	uint8_t hdr[BWD_FILE_HEADER_SIZE];
	char name[32];
	int err;

	if (!j)
		return -ENOMEM;
	j->fd = j->efd = -1;
	j->generation = generation;
	j->fsync = policy;
	j->sim = sim;
	err = bwd_boot_id(h.boot_id);
	if (err)
		goto fail;
	h.mono_ns = bw_now_ns();
	h.real_ns = bwd_realtime_ns();
	bwd_journal_name(generation, name);
	j->fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		       0600);
	if (j->fd < 0) {
		err = -errno;
		goto fail;
	}
	bwd_file_header_pack(&h, hdr);
	err = write_at(j->fd, hdr, sizeof(hdr), 0);
	if (err)
		goto fail;
	/* The file and its name both survive a crash before the first
	 * record is acknowledged. */
	if (fdatasync(j->fd) < 0 || fsync(dirfd) < 0) {
		err = -errno;
		goto fail;
	}
	j->size = j->room = j->durable = j->asked = sizeof(hdr);
	j->prealloc = true;
	err = start_threads(j, dirfd, name);
	if (err)
		goto fail;
	*out = j;
	return 0;
fail:
	if (j->fd >= 0) {
		close(j->fd);
		unlinkat(dirfd, name, 0);
	}
	if (j->efd >= 0)
		close(j->efd);
	free(j);
	return err;
}

int bwd_journal_open(int dirfd, uint64_t generation, enum bwd_fsync policy,
		     struct bwd_journal **out)
{
	return bwd_journal_open_sim(dirfd, generation, policy, NULL, out);
}

void bwd_journal_close(struct bwd_journal *j)
{
	if (!j)
		return;
	stop_threads(j);
	/* The room's zeros would only be read past. */
	if (!j->failed && !bwd_journal_sync(j) && j->room > j->size &&
	    ftruncate(j->fd, (off_t)j->size) < 0)
		bwd_log(BWD_LOG_DEBUG, "journal: cutting its room: %s", strerror(errno));
	if (j->efd >= 0)
		close(j->efd);
	close(j->fd);
	free(j->buf);
	free(j);
}

bool bwd_journal_pending(const struct bwd_journal *j)
{
	return j->len || j->failed || j->durable < j->size;
}

int bwd_journal_event_fd(const struct bwd_journal *j)
{
	return j->efd;
}

int bwd_journal_error(const struct bwd_journal *j, const char **what)
{
	if (what)
		*what = j->what;
	return j->failed ? j->err : 0;
}

uint64_t bwd_journal_generation(const struct bwd_journal *j)
{
	return j->generation;
}

uint64_t bwd_journal_size(const struct bwd_journal *j)
{
	return j->size + j->len;
}

/* The store logs it, once for all its journals. */
static int fail(struct bwd_journal *j, int err, const char *what)
{
	if (!j->failed) {
		j->err = err;
		j->what = what;
	}
	j->failed = true;
	return err;
}

int bwd_journal_append(struct bwd_journal *j, const struct bwd_record *r,
		       size_t *bytes)
{
	size_t n = bwd_record_room(r);

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
	n = bwd_record_pack(r, j->buf + j->len);
	j->len += n;
	j->buf_recs++;
	*bytes = n;
	return 0;
}

int bwd_journal_write(struct bwd_journal *j)
{
	int err;

	if (j->failed)
		return -EIO;
	if (!j->len)
		return 0;
	prealloc(j);
	err = write_at(j->fd, j->buf, j->len, j->size);
	if (err)
		return fail(j, err, "write");
	j->size += j->len;
	j->len = 0;
	j->recs += j->buf_recs;
	j->buf_recs = 0;
	/* A crash of the daemon alone keeps what the kernel has. */
	if (j->fsync == BWD_FSYNC_NEVER) {
		j->durable = j->size;
		j->durable_recs = j->recs;
	}
	return 0;
}

int bwd_journal_sync(struct bwd_journal *j)
{
	int err = bwd_journal_write(j);

	if (err)
		return err;
	if (j->durable < j->size) {
		uint64_t t0 = now_ns(j);

		if ((err = datasync(j)))
			return fail(j, err, "fdatasync");
		count_sync(j, now_ns(j) - t0, j->recs);
		j->durable = j->size;
	}
	return 0;
}

bool bwd_sync_gather(uint64_t age_ns, uint64_t est_ns, uint64_t waiting,
		     uint64_t in_flight, uint64_t *wait_ns)
{
	*wait_ns = 0;
	if (in_flight < BWD_SYNC_GATHER_MIN || waiting >= in_flight ||
	    age_ns >= est_ns)
		return false;
	*wait_ns = est_ns - age_ns;
	return true;
}

/* A lone sync's thread goes where the loop runs, any other anywhere the
 * loop's own mask allows (see the top). */
static void follow_loop(struct sync_slot *t, bool lone)
{
	int cpu = lone ? sched_getcpu() : -1;
	cpu_set_t set;

	if (cpu == t->cpu)
		return;
	if (cpu < 0) {
		set = t->j->cpus;
	} else {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
	}
	/* Where it cannot (a cpuset without that CPU), it syncs from
	 * wherever it is: slower by a wake-up, no less correct. */
	if (!pthread_setaffinity_np(t->thread, sizeof(set), &set))
		t->cpu = cpu;
}

int bwd_journal_commit(struct bwd_journal *j, bool needed, bool *covered,
		       uint64_t *wait_ns)
{
	struct sync_slot *t = NULL, *newest = NULL;
	uint64_t now;
	int err;

	*covered = false;
	*wait_ns = 0;
	if (!j->threaded)
		return bwd_journal_sync(j);
	err = bwd_journal_write(j);
	if (err || j->durable == j->size)
		return err;
	/* The newest sync in flight began after all was written. */
	if (j->asked == j->size) {
		*covered = true;
		return 0;
	}
	now = now_ns(j);
	/* Nothing waits for them (see the top): they go with the next sync
	 * something waits for, or on their own once they have waited. */
	if (!needed) {
		if (!j->lazy) {
			j->lazy = true;
			j->lazy_ns = now;
		}
		if (now - j->lazy_ns < BWD_SYNC_LAZY_NS) {
			*wait_ns = j->lazy_ns + BWD_SYNC_LAZY_NS - now;
			return 0;
		}
	}
	for (unsigned i = 0; i < BWD_SYNCS_IN_FLIGHT; i++) {
		struct sync_slot *u = &j->slot[i];

		if (!u->busy)
			t = u;
		else if (!newest || u->seq > newest->seq)
			newest = u;
	}
	/* All in flight: the first to finish lets the next begin. */
	if (!t)
		return 0;
	/* One in flight: the records gather for a while (see the top). */
	if (newest && bwd_sync_gather(now - newest->began_ns, j->est_ns,
				      j->recs - j->asked_recs,
				      newest->recs - newest->from_recs, wait_ns))
		return 0;
	t->busy = true;
	t->seq = ++j->seq;
	t->began_ns = now;
	t->from_recs = j->asked_recs;
	t->recs = j->asked_recs = j->recs;
	t->upto = j->asked = j->size;
	j->lazy = false;
	*covered = true;
	if (j->sim) {
		j->sim->begin(j->sim->arg, (unsigned)(t - j->slot));
		return 0;
	}
	follow_loop(t, !newest && t->recs - t->from_recs < BWD_SYNC_GATHER_MIN);
	pthread_mutex_lock(&j->mu);
	t->go = true;
	pthread_mutex_unlock(&j->mu);
	/* Signalled once mu is free, for the thread to take (sync_done). */
	pthread_cond_signal(&t->cv);
	return 0;
}

/* The slot of the oldest sync in flight, NULL if none is. */
static struct sync_slot *oldest(struct bwd_journal *j)
{
	struct sync_slot *o = NULL;

	for (unsigned i = 0; i < BWD_SYNCS_IN_FLIGHT; i++)
		if (j->slot[i].busy && (!o || j->slot[i].seq < o->seq))
			o = &j->slot[i];
	return o;
}

int bwd_journal_synced(struct bwd_journal *j)
{
	struct sync_slot *t;
	uint64_t n;
	int err = 0;

	if (read(j->efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return fail(j, -errno, "eventfd");
	/* What a failed journal held stays held, whatever syncs after. */
	if (j->failed)
		return j->err;
	pthread_mutex_lock(&j->mu);
	/* In the order begun (see the top). */
	while (!err && (t = oldest(j)) && t->done) {
		t->done = t->busy = false;
		err = t->err;
		if (!err) {
			j->durable = t->upto;
			count_sync(j, t->ns, t->recs);
		}
	}
	pthread_mutex_unlock(&j->mu);
	return err ? fail(j, err, "fdatasync") : 0;
}

uint64_t bwd_journal_durable(const struct bwd_journal *j)
{
	return j->durable;
}
