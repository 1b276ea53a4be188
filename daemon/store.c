/*
 * store.c - the state directory (--state-dir): what survives a restart.
 *
 * Files, all mode 0600 in a 0700 directory:
 *   lock                  flock(2)ed by the daemon that uses the directory
 *   snapshot              every named session at one moment (snapshot.c)
 *   journal.<generation>  the changes after it, in order (journal.c); the
 *                         snapshot's header names the first generation it
 *                         does not contain
 *   reserve               space allocated for the next snapshot, which is
 *                         written into it (below)
 *   snapshot.tmp.<pid>    a snapshot being written by that child without
 *                         a reserve; removed at start-up
 *
 * Trust (as sshd's StrictModes): the directory must be owned by the
 * daemon's uid or root and writable by nobody else, or whoever can write
 * it could rename the journal away, plant a journal with valid CRCs that
 * creates another uid's session, or make the daemon (root, perhaps) create
 * or truncate a file elsewhere through a symbolic link.  So open_dir()
 * refuses, naming the path and the fix: a directory that is not one, a
 * symbolic link to one unless root or the daemon's uid owns the link and
 * nobody else can replace it, a directory of another uid or writable by
 * group or others, and any entry in it owned by another uid or (but for
 * symbolic links) writable by group or others; our own names (lock,
 * snapshot, journal.*, snapshot.tmp.*) must be regular files.  Every file
 * is then opened relative to the directory's fd with O_NOFOLLOW, reads
 * with O_NONBLOCK (a FIFO named snapshot cannot hang us), and checked
 * again on the fd it was opened as (check_file).
 *
 * Start-up (bwd_store_open): lock, read the snapshot (a bad one stops the
 * daemon, naming the file, unless --ignore-snapshot), replay each journal
 * of its generation or later in order, each up to its first torn or
 * corrupt record (logged with its offset; everything before it is kept)
 * or to the zeros of its room allocated ahead (journal.c), the end,
 * arm the timers, then open the next generation's journal and, when
 * anything was replayed, write a fresh snapshot at once; when the journal
 * cannot be created, start down (below), the files as they were.  Times in a file
 * written during another boot are carried over by the wall clock (the
 * header has both clocks); within one boot they are exact.
 *
 * Running: the server calls bwd_store_commit() at the end of every loop
 * turn (group commit): what the turn journaled is written, and a sync of
 * it starts in one of the journal's threads, or once the records have
 * gathered while another is in flight (journal.c: then the gather timer
 * makes a loop turn to commit them at the latest when the gathering
 * ends); the output held meanwhile is
 * marked with its position (journals one after another: pos_base), and
 * when a sync is done (its eventfd, on_synced) the server releases the
 * output whose position it reached.  A snapshot
 * starts at a commit (snapshot_due) when the journal has changes and
 * --snapshot-min-interval has passed since the last one began, and then
 * either --snapshot-interval has passed too or the journal has grown past
 * --journal-max and --snapshot-growth times the snapshot on disk (as
 * Redis's auto-aof-rewrite-min-size and -percentage): a client replacing
 * one key in a loop makes journal bytes, not snapshots.  A uid past its
 * journal share (account.c) stands for --journal-max: it waits for the
 * next generation, which the growth rule still paces.  Never two at once;
 * the journal moves to the next generation first, so the child's
 * snapshot and the new journal meet exactly.
 *
 * Down: a journal that fails to write or sync (ENOSPC, EDQUOT, EIO,
 * EFBIG, ...) is given up, and the daemon serves on without it
 * (pub->down, logged once): request.c refuses the changes whose replies
 * would claim durability, conn.c keeps held what already waited.  A timer
 * (on_retry: after 1 s, doubling to 10 s) tries the way back, which is
 * the snapshot's: open the next journal, fork a writer of the whole
 * state.  A try that fails removes its journal and its temporary file,
 * so the last good snapshot and journals stay as they were; the one that
 * succeeds (on_child: installed, and its journal still sound) brings the
 * storage up, and the next commit releases what was held, the snapshot
 * now holding every change it waited for.  Output held that long is not
 * held for ever: 5 s into the outage (BWD_HELD_DOWN_NS) the server drops
 * it and ends its connections with STORAGE_UNAVAILABLE (conn.c).
 *
 * The reserve: so that the snapshot that ends an outage fits however the
 * file system filled, every snapshot is written into space allocated
 * before it was needed, the file reserve, kept at a bound on the next
 * snapshot's size plus an eighth and RESERVE_SLACK (reserve_check, at each
 * commit before the journal is written, never while a writer may be
 * writing into it).  The bound (snapshot_bound) is the lesser of the files
 * the snapshot replaces, whose records made the state, and the state's
 * parts at their largest records, plus what the state may grow by while
 * the storage is down (state.c keeps a named session's periodic fires to
 * one waiting then).  The writer writes over the reserve from its start,
 * cuts it at its end and syncs it; install renames it over snapshot and a
 * new reserve is allocated, from the space the old snapshot and journals
 * gave back.  A journal that cannot be created for want of space takes
 * JOURNAL_ROOM from the reserve.  At start the daemon makes a reserve
 * file of its own, as large as the one left (which it removes), so that a
 * writer left over from a killed daemon writes into nothing of its.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon-internal.h"

/* After a failed snapshot, wait this long before the next try. */
#define SNAPSHOT_RETRY_NS (10 * 1000000000ull)
/* The reserve (see the top): what it holds beyond its bound, the room it
 * gives up for a journal that cannot be created, how soon a reserve that
 * could not grow tries again, and what a timer that fires while the
 * storage is down may add to the snapshot (its QUEUED record's history,
 * 24 bytes, over its TIMER record). */
#define RESERVE_SLACK (256u << 10)
#define JOURNAL_ROOM (64u << 10)
#define RESERVE_RETRY_NS 1000000000ull
#define FIRED_GROWTH 32u

struct bwd_store {
	const struct bwd_store_options *opt;
	struct bwd_state *state;
	struct event_base *base;
	struct event *synced;      /* the journal's "a sync is done"         */
	struct event *gather;      /* the end of a gathering (commit)        */
	void (*durable)(void *arg, uint64_t upto);
	void *arg;
	/* Positions in all journals one after another (bwd_store_commit):
	 * the journals closed so far, each counted with one byte more, so
	 * that a position in the current one is past every earlier one. */
	uint64_t pos_base;
	struct bwd_storage *pub;   /* the server's copy of what follows      */
	bool flushed;              /* a rotation made everything durable     */
	int dirfd, lockfd;
	struct bwd_journal *journal; /* NULL: none could be made            */
	uint64_t next_gen;         /* the next journal's generation          */
	struct event *sigchld;
	/* While the storage is down (pub->down): since when, the next
	 * retry's delay, and whether the journal is a retry's, which only
	 * its snapshot, once installed, makes worth keeping. */
	uint64_t down_ns;
	uint64_t retry_ns;
	struct event *retry;
	bool recovery;
	pid_t child;               /* the snapshot writer, 0: none           */
	uint64_t child_generation;
	uint64_t child_started_ns;
	uint64_t next_snapshot_ns; /* the interval's next snapshot           */
	uint64_t last_snapshot_ns; /* when the last one started              */
	uint64_t snapshot_bytes;   /* the size of the snapshot on disk       */
	uint64_t journal_base;     /* the journal's size with nothing new in it */
	uint64_t closed_bytes;     /* journals before the current one that the
				      snapshot on disk does not hold yet   */
	/* The reserve: its fd (-1: none), the bytes allocated to it, whether
	 * the writer at work writes into it, and, while it cannot grow, since
	 * when (logged once) and the next try. */
	int reservefd;
	uint64_t reserve_size;
	bool child_reserve;
	bool reserve_short;
	uint64_t reserve_retry_ns;
};

static double ms_since(uint64_t t0)
{
	return (double)(bw_now_ns() - t0) / 1e6;
}

/* ---- trust ---------------------------------------------------------------- */

static bool ours(uid_t uid)
{
	return uid == geteuid() || uid == 0;
}

/* A name the daemon creates or reads: it must be a regular file. */
static bool daemon_name(const char *name)
{
	return !strcmp(name, "lock") || !strcmp(name, "snapshot") ||
	       !strcmp(name, "reserve") ||
	       !strncmp(name, "journal.", 8) || !strncmp(name, "snapshot.tmp", 12);
}

/* Whether dir/name, as st describes it, may be used; logs why not. */
static bool check_entry(const char *dir, const char *name, const struct stat *st)
{
	if (!ours(st->st_uid)) {
		bwd_log(BWD_LOG_ERR, "%s/%s: owned by uid %u, not by the daemon's uid %u or root; remove it (or chown it, if you trust it)",
			dir, name, (unsigned)st->st_uid, (unsigned)geteuid());
		return false;
	}
	if (daemon_name(name) && !S_ISREG(st->st_mode)) {
		bwd_log(BWD_LOG_ERR, "%s/%s: a %s, not a regular file; remove it",
			dir, name, bwd_mode_name(st->st_mode));
		return false;
	}
	if (!S_ISLNK(st->st_mode) && (st->st_mode & 022)) {
		bwd_log(BWD_LOG_ERR, "%s/%s: writable by %s (mode %04o); chmod go-w it",
			dir, name, st->st_mode & 002 ? "others" : "its group",
			(unsigned)(st->st_mode & 07777));
		return false;
	}
	return true;
}

/* A state file just opened (O_NOFOLLOW) as fd: -errno when it may not be
 * used (logged).  open_err: the open's errno, when it failed. */
static int check_file(const char *dir, const char *name, int fd, int open_err)
{
	struct stat st;

	if (fd < 0) {
		if (open_err == ELOOP)
			bwd_log(BWD_LOG_ERR, "%s/%s: a symbolic link, not a regular file; remove it",
				dir, name);
		else if (open_err != ENOENT)
			bwd_log(BWD_LOG_ERR, "%s/%s: %s", dir, name, strerror(open_err));
		return -open_err;
	}
	if (fstat(fd, &st) < 0) {
		int err = errno;

		bwd_log(BWD_LOG_ERR, "%s/%s: %s", dir, name, strerror(err));
		return -err;
	}
	return check_entry(dir, name, &st) ? 0 : -EPERM;
}

/* Every entry of the directory, checked once at start-up. */
static int check_entries(const char *dir, int dirfd)
{
	int fd = dup(dirfd), err = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		bwd_log(BWD_LOG_ERR, "%s: cannot list: %s", dir, strerror(-err));
		return err;
	}
	rewinddir(d);
	while (!err && (e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			err = -errno;
			bwd_log(BWD_LOG_ERR, "%s/%s: %s", dir, e->d_name, strerror(-err));
		} else if (!check_entry(dir, e->d_name, &st)) {
			err = -EPERM;
		}
	}
	closedir(d);
	return err;
}

/* ---- recovery ---------------------------------------------------------------- */

/* The whole file, or NULL with *err (-ENOENT when it is not there; any
 * other reason is logged). */
static uint8_t *slurp(const char *dir, int dirfd, const char *name, size_t *len,
		      int *err)
{
	int fd = openat(dirfd, name,
			O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;
	uint8_t *buf = NULL;
	size_t off = 0;

	*err = check_file(dir, name, fd, errno);
	if (*err) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (fstat(fd, &sb) < 0)
		goto fail;
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		errno = ENOMEM;
		goto fail;
	}
	while (off < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)sb.st_size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				break;
			goto fail;
		}
		off += (size_t)n;
	}
	close(fd);
	*len = off;
	return buf;
fail:
	*err = -errno;
	bwd_log(BWD_LOG_ERR, "%s/%s: %s", dir, name, strerror(errno));
	close(fd);
	free(buf);
	return NULL;
}

/* How far ahead of a file's monotonic clock ours runs. */
static int64_t clock_shift(const struct bwd_file_header *h)
{
	uint8_t boot[16];

	if (bwd_boot_id(boot) == 0 && memcmp(boot, h->boot_id, 16) == 0)
		return 0;
	/* Another boot: its deadline d was wall time d - mono + real.  The
	 * difference of differences is taken modulo 2^64: a damaged header
	 * gives a wrong shift, not undefined arithmetic. */
	return (int64_t)((bw_now_ns() - bwd_realtime_ns()) -
			 (h->mono_ns - h->real_ns));
}

static bool all_zero(const uint8_t *p, size_t n)
{
	return n == 0 || (!p[0] && !memcmp(p, p + 1, n - 1));
}

int bwd_store_replay(struct bwd_state *st, const uint8_t *buf, size_t len,
		     const char *name, enum bwd_file_kind kind,
		     struct bwd_replay *out)
{
	struct bwd_file_header h;
	size_t off = BWD_FILE_HEADER_SIZE, used;
	int64_t shift;
	int err = bwd_file_header_parse(buf, len, &h);

	memset(out, 0, sizeof(*out));
	if (err || h.kind != kind) {
		bwd_log(BWD_LOG_ERR, "%s: not a bitwheeld %s (bad header)", name,
			kind == BWD_FILE_SNAPSHOT ? "snapshot" : "journal");
		return BWD_REC_ECORRUPT;
	}
	out->generation = h.generation;
	shift = clock_shift(&h);
	if (shift)
		bwd_log(BWD_LOG_NOTICE, "%s: written during another boot: its deadlines move by the wall clock (%+.3f s)",
			name, (double)shift / 1e9);
	while (off < len) {
		struct bwd_record r;

		/* A journal's room allocated ahead and not yet written
		 * (journal.c): its end.  A record's first byte is rarely 0. */
		if (kind == BWD_FILE_JOURNAL && !buf[off] && all_zero(buf + off, len - off))
			break;
		err = bwd_record_parse(buf + off, len - off, &r, &used);
		if (err) {
			out->stopped_at = off;
			bwd_log(kind == BWD_FILE_SNAPSHOT ? BWD_LOG_ERR : BWD_LOG_WARNING,
				"%s: record at offset %zu is %s; the %zu bytes from there are ignored",
				name, off, bwd_record_strerror(err), len - off);
			return err;
		}
		if (r.type == BWD_REC_TRAILER) {
			if (kind != BWD_FILE_SNAPSHOT || r.count != out->records ||
			    off + used != len) {
				out->stopped_at = off;
				bwd_log(BWD_LOG_ERR, "%s: misplaced trailer at offset %zu", name, off);
				return BWD_REC_ECORRUPT;
			}
			out->whole = true;
			return 0;
		}
		err = bwd_state_apply(st, &r, shift);
		if (err < 0)
			return err;
		/* A few examples say where; the count says how many. */
		if (err && ++out->contradictions <= 5)
			bwd_log(BWD_LOG_WARNING, "%s: record at offset %zu (type %u) does not fit the state; skipped",
				name, off, r.type);
		out->records++;
		off += used;
	}
	out->stopped_at = off;
	if (out->contradictions > 5)
		bwd_log(BWD_LOG_WARNING, "%s: %" PRIu64 " records in all did not fit the state",
			name, out->contradictions);
	if (kind == BWD_FILE_SNAPSHOT) {
		bwd_log(BWD_LOG_ERR, "%s: ends without its trailer", name);
		return BWD_REC_ETORN;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The generations of the journals in the directory, ascending. */
static int list_journals(int dirfd, uint64_t **gens, size_t *n)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	size_t cap = 0;

	*gens = NULL;
	*n = 0;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		char *end;
		uint64_t g;

		if (strncmp(e->d_name, "journal.", 8) || strlen(e->d_name) != 24)
			continue;
		g = strtoull(e->d_name + 8, &end, 16);
		if (*end)
			continue;
		if (*n == cap) {
			uint64_t *p = realloc(*gens, (cap = cap ? 2 * cap : 16) * sizeof(*p));

			if (!p) {
				closedir(d);
				return -ENOMEM;
			}
			*gens = p;
		}
		(*gens)[(*n)++] = g;
	}
	closedir(d);
	/* qsort() wants an array even for nothing to sort. */
	if (*n > 1)
		qsort(*gens, *n, sizeof(**gens), cmp_u64);
	return 0;
}

/* Snapshot, then journals; *next is the generation for the new journal,
 * *replayed whether any journal record was read. */
static int recover(struct bwd_store *s, uint64_t *next, bool *replayed)
{
	const char *dir = s->opt->dir;
	struct bwd_replay snap = { 0 }, rep;
	struct bwd_state_stats got;
	uint64_t t0 = bw_now_ns(), from = 0, records = 0, *gens;
	size_t len, n, files = 0;
	uint8_t *buf;
	int err = 0;

	*replayed = false;
	buf = s->opt->ignore_snapshot ? NULL : slurp(dir, s->dirfd, "snapshot", &len, &err);
	if (buf) {
		err = bwd_store_replay(s->state, buf, len, "snapshot", BWD_FILE_SNAPSHOT, &snap);
		free(buf);
		if (err) {
			bwd_log(BWD_LOG_ERR, "%s/snapshot is damaged; to start from the journals after it alone, losing what only the snapshot held, run with --ignore-snapshot",
				dir);
			return err < 0 ? err : -EBADMSG;
		}
		from = snap.generation;
	} else if (err && err != -ENOENT) {
		return err;
	} else if (s->opt->ignore_snapshot) {
		bwd_log(BWD_LOG_WARNING, "--ignore-snapshot: recovering from the journals alone");
	}
	err = list_journals(s->dirfd, &gens, &n);
	if (err) {
		bwd_log(BWD_LOG_ERR, "%s: cannot list: %s", dir, strerror(-err));
		return err;
	}
	*next = from;
	for (size_t i = 0; i < n; i++) {
		char name[32];

		if (gens[i] < from)
			continue;
		bwd_journal_name(gens[i], name);
		*next = gens[i] + 1;
		buf = slurp(dir, s->dirfd, name, &len, &err);
		if (!buf) {
			if (err == -ENOENT)
				bwd_log(BWD_LOG_ERR, "%s/%s: %s", dir, name, strerror(-err));
			free(gens);
			return err;
		}
		err = bwd_store_replay(s->state, buf, len, name, BWD_FILE_JOURNAL, &rep);
		free(buf);
		s->closed_bytes += len;
		if (err < 0) {
			free(gens);
			return err;
		}
		records += rep.records;
		files++;
	}
	free(gens);
	*replayed = records > 0 || s->opt->ignore_snapshot;
	bwd_state_restore_finish(s->state, bw_now_ns(), &got);
	bwd_log(BWD_LOG_NOTICE, "recovered %" PRIu64 " sessions, %" PRIu64 " timers and %" PRIu64 " undelivered fires from %s (%" PRIu64 " records) and %zu journals (%" PRIu64 " records) in %.1f ms",
		got.sessions, got.timers, got.queued,
		snap.whole ? "the snapshot" : "no snapshot", snap.records, files,
		records, ms_since(t0));
	return 0;
}

/* ---- the storage going down and coming back --------------------------------- */

/* The first retry after the storage went down, and the longest between
 * two: the delay doubles from one to the other. */
#define DOWN_RETRY_FIRST_NS 1000000000ull
#define DOWN_RETRY_MAX_NS (10 * 1000000000ull)

static void arm_retry(struct bwd_store *s)
{
	struct timeval tv = { (time_t)(s->retry_ns / 1000000000u),
			      (suseconds_t)(s->retry_ns % 1000000000u / 1000u) };

	evtimer_add(s->retry, &tv);
	s->retry_ns = s->retry_ns * 2 > DOWN_RETRY_MAX_NS ? DOWN_RETRY_MAX_NS :
		s->retry_ns * 2;
}

/* Journal generation gen failed (err, in the call what), or could not be
 * made: serve on without one.  Logged once, however often it happens
 * until the storage is back. */
static void go_down(struct bwd_store *s, uint64_t gen, int err, const char *what)
{
	if (s->pub->down)
		return;
	s->pub->down = true;
	s->pub->err = err;
	s->down_ns = s->pub->down_ns = bw_now_ns();
	bwd_state_set_storage_down(s->state, true);
	bwd_log(BWD_LOG_ERR, "%s/journal.%016" PRIx64 ": %s: %s; changes to named sessions are refused (STORAGE_UNAVAILABLE) and their pending replies wait until a new snapshot can be written there (retrying every %llu to %llu s)",
		s->opt->dir, gen, what, strerror(-err),
		DOWN_RETRY_FIRST_NS / 1000000000ull, DOWN_RETRY_MAX_NS / 1000000000ull);
	s->retry_ns = DOWN_RETRY_FIRST_NS;
	/* A snapshot writer at work reports first (on_child). */
	if (!s->child)
		arm_retry(s);
}

/* A journal failed: the storage goes down, if it is not already. */
static void journal_failed(struct bwd_store *s)
{
	const char *what;
	int err = bwd_journal_error(s->journal, &what);

	go_down(s, bwd_journal_generation(s->journal), err, what);
}

/* ---- snapshots ---------------------------------------------------------------- */

static void on_synced(evutil_socket_t fd, short what, void *arg);

/* Listen to the current journal's sync thread, if it has one. */
static int watch_journal(struct bwd_store *s)
{
	int fd = s->journal ? bwd_journal_event_fd(s->journal) : -1;

	if (s->synced)
		event_free(s->synced);
	s->synced = NULL;
	if (fd < 0)
		return 0;
	s->synced = event_new(s->base, fd, EV_READ | EV_PERSIST, on_synced, s);
	if (!s->synced || event_add(s->synced, NULL))
		return -ENOMEM;
	return 0;
}

/* From now on the state journals to j (NULL: nowhere), and everyone
 * reads it from pub.  Closing the old journal syncs it (unless it failed):
 * whatever waited for it may go. */
static int use_journal(struct bwd_store *s, struct bwd_journal *j)
{
	if (s->synced)
		event_free(s->synced);
	s->synced = NULL;
	if (s->journal) {
		s->closed_bytes += bwd_journal_size(s->journal);
		s->pos_base += bwd_journal_size(s->journal) + 1;
	}
	bwd_journal_close(s->journal);
	s->journal = s->pub->journal = j;
	bwd_journal_count_syncs(j, &s->pub->syncs);
	bwd_state_set_journal(s->state, j);
	/* It starts by naming every session: that is no change. */
	s->journal_base = j ? bwd_journal_size(j) : 0;
	return watch_journal(s);
}

/* The size of the snapshot on disk, 0 without one. */
static uint64_t snapshot_size(const struct bwd_store *s)
{
	struct stat st;

	return fstatat(s->dirfd, "snapshot", &st, AT_SYMLINK_NOFOLLOW) == 0 ?
		(uint64_t)st.st_size : 0;
}

/* ---- the reserve ---------------------------------------------------------------- */

/*
 * A bound on the next snapshot's size: the lesser of what the files it
 * replaces hold (the snapshot and the journals since, whose records made
 * every part of the state) and every part of the state at its largest
 * record (sessions with their policies, timers, fires) with the state's
 * bytes for the payloads; the wheel's own memory is no part of it.
 */
static uint64_t snapshot_bound(struct bwd_store *s)
{
	struct bwd_state_stats ss;
	uint64_t disk = s->snapshot_bytes + s->closed_bytes +
		(s->journal ? bwd_journal_size(s->journal) : 0), records, grow;

	bwd_state_stats(s->state, &ss);
	/* What it may grow by while the storage is down: each timer fired
	 * (a QUEUED record's history over its TIMER record), and a periodic
	 * fire per session (state.c). */
	grow = ss.timers * FIRED_GROWTH + ss.sessions * bwd_record_bound(BWD_REC_QUEUED);
	records = BWD_FILE_HEADER_SIZE + bwd_record_bound(BWD_REC_TRAILER) +
		ss.sessions * (bwd_record_bound(BWD_REC_SESSION) +
			       bwd_record_bound(BWD_REC_POLICY)) +
		ss.timers * bwd_record_bound(BWD_REC_TIMER) +
		(ss.queued + ss.in_flight) * bwd_record_bound(BWD_REC_QUEUED) +
		bwd_state_item_bytes(s->state);
	return (disk < records ? disk : records) + grow;
}

/* The reserve holds at least want bytes: 0, or -errno with what it held
 * before kept. */
static int reserve_grow(struct bwd_store *s, uint64_t want)
{
	int err;

	if (s->reservefd < 0) {
		s->reservefd = openat(s->dirfd, "reserve", O_RDWR | O_CREAT | O_EXCL |
				      O_NOFOLLOW | O_CLOEXEC, 0600);
		if (s->reservefd < 0)
			return -errno;
		s->reserve_size = 0;
	}
	if (want <= s->reserve_size)
		return 0;
	err = posix_fallocate(s->reservefd, 0, (off_t)want);
	if (err) {
		/* What a failed allocation got past the old size is given back. */
		if (ftruncate(s->reservefd, (off_t)s->reserve_size) < 0)
			bwd_log(BWD_LOG_DEBUG, "%s/reserve: %s", s->opt->dir, strerror(errno));
		return -err;
	}
	s->reserve_size = want;
	return 0;
}

/* Keep the reserve ahead of the next snapshot (never while a writer may
 * be writing into it): grown by an eighth and RESERVE_SLACK once its
 * bound and JOURNAL_ROOM pass it; a reserve that cannot grow is logged
 * once and tried again every RESERVE_RETRY_NS. */
static void reserve_check(struct bwd_store *s, uint64_t now)
{
	uint64_t bound, want;
	int err;

	if (s->child || now < s->reserve_retry_ns)
		return;
	bound = snapshot_bound(s);
	if (s->reservefd >= 0 && bound + JOURNAL_ROOM <= s->reserve_size)
		return;
	want = bound + bound / 8 + RESERVE_SLACK;
	err = reserve_grow(s, want);
	if (!err) {
		if (s->reserve_short)
			bwd_log(BWD_LOG_NOTICE, "%s/reserve: holds %" PRIu64 " bytes again for the next snapshot",
				s->opt->dir, s->reserve_size);
		s->reserve_short = false;
		return;
	}
	s->reserve_retry_ns = now + RESERVE_RETRY_NS;
	if (!s->reserve_short)
		bwd_log(BWD_LOG_WARNING, "%s/reserve: cannot hold %" PRIu64 " bytes (%s), only %" PRIu64 ": if the file system fills, the snapshot that ends the storage outage may not fit until space is freed there",
			s->opt->dir, want, strerror(-err), s->reserve_size);
	s->reserve_short = true;
}

/* The writer wrote its snapshot into the reserve, now the snapshot: the
 * next reserve is a new file. */
static void reserve_taken(struct bwd_store *s)
{
	close(s->reservefd);
	s->reservefd = -1;
	s->reserve_size = 0;
	s->reserve_retry_ns = 0;
	reserve_check(s, bw_now_ns());
}

/* At start: a reserve file of this daemon's own (a writer of a daemon
 * killed before may still hold the old one open), taking over the old
 * one's space, then as large as the state wants. */
static void reserve_open(struct bwd_store *s)
{
	struct stat st;
	uint64_t old = 0;
	int err;

	if (fstatat(s->dirfd, "reserve", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    unlinkat(s->dirfd, "reserve", 0) == 0)
		old = (uint64_t)st.st_size;
	err = reserve_grow(s, old);
	if (!err) {
		reserve_check(s, bw_now_ns());
		return;
	}
	s->reserve_short = true;
	s->reserve_retry_ns = bw_now_ns() + RESERVE_RETRY_NS;
	bwd_log(BWD_LOG_WARNING, "%s/reserve: cannot hold %" PRIu64 " bytes (%s): if the file system fills, the snapshot that ends the storage outage may not fit until space is freed there",
		s->opt->dir, old, strerror(-err));
}

/* Journal generation gen, made with room taken from the reserve when the
 * file system has none. */
static int journal_open(struct bwd_store *s, uint64_t gen, struct bwd_journal **out)
{
	int err = bwd_journal_open(s->dirfd, gen, s->opt->fsync, out);
	struct stat st;

	/* Its size as it is: a writer that failed may have left it longer,
	 * and only allocated bytes free anything. */
	if ((err == -ENOSPC || err == -EDQUOT) && s->reservefd >= 0 &&
	    fstat(s->reservefd, &st) == 0 &&
	    (uint64_t)st.st_blocks * 512 > JOURNAL_ROOM &&
	    ftruncate(s->reservefd, st.st_size - JOURNAL_ROOM) == 0) {
		s->reserve_size = (uint64_t)st.st_size - JOURNAL_ROOM;
		err = bwd_journal_open(s->dirfd, gen, s->opt->fsync, out);
	}
	return err;
}

/*
 * Whether to start a snapshot now: never sooner than --snapshot-min-
 * interval after the last one began, and never for a journal with no
 * change; then once --snapshot-interval has passed, or once the journal
 * is past both --journal-max and --snapshot-growth times the snapshot, so
 * that however fast the journal grows, the snapshots written cost at most
 * 1/growth of its bytes, and no more than one per min-interval.
 */
static bool snapshot_due(const struct bwd_store *s, uint64_t now)
{
	const struct bwd_store_options *o = s->opt;
	uint64_t size = bwd_journal_size(s->journal);

	if (size <= s->journal_base ||
	    now - s->last_snapshot_ns < o->snapshot_min_interval_ns)
		return false;
	if (now >= s->next_snapshot_ns)
		return true;
	/* A uid past its journal share waits for the next generation: it
	 * need not wait for --journal-max as well. */
	return (size >= o->journal_max || bwd_state_journal_over(s->state)) &&
	       (double)size >= o->snapshot_growth * (double)s->snapshot_bytes;
}

/* A recovery's journal, when its snapshot failed: nothing in it was
 * acknowledged (the storage was down all along), and an attempt every
 * few seconds must not leave a file each. */
static void drop_recovery(struct bwd_store *s)
{
	char name[32];
	uint64_t size;

	if (!s->recovery)
		return;
	s->recovery = false;
	bwd_journal_name(bwd_journal_generation(s->journal), name);
	size = bwd_journal_size(s->journal);
	use_journal(s, NULL);
	unlinkat(s->dirfd, name, 0);
	s->closed_bytes -= size;
	s->next_gen--;
}

/*
 * Move to the next journal generation and fork the writer of everything
 * before it.  0 when the writer runs; -errno when the journal could not be
 * made (the old one goes on) or the fork failed (the new one goes on).
 */
static int snapshot_begin(struct bwd_store *s)
{
	uint64_t gen = s->next_gen, t0 = bw_now_ns();
	struct bwd_journal *next;
	int err = journal_open(s, gen, &next);

	if (err) {
		bwd_log(s->pub->down ? BWD_LOG_DEBUG : BWD_LOG_ERR,
			"snapshot: cannot start journal generation %" PRIu64 ": %s",
			gen, strerror(-err));
		return err;
	}
	s->next_gen = gen + 1;
	/* What waited for the old journal may go once it is all on disk;
	 * if it cannot be, this snapshot is the way back. */
	if (s->journal && !bwd_journal_error(s->journal, NULL) &&
	    bwd_journal_sync(s->journal))
		journal_failed(s);
	s->flushed = !s->pub->down;
	s->recovery = s->pub->down;
	if (use_journal(s, next)) {
		/* Without the event, syncs would finish unseen. */
		go_down(s, gen, -ENOMEM, "watching its syncs");
		return -ENOMEM;
	}
	s->last_snapshot_ns = t0;
	/* While down, the one line at the fault says it all. */
	s->child_reserve = s->reservefd >= 0;
	err = bwd_snapshot_start(s->state, s->dirfd, s->lockfd, s->reservefd, gen,
				 s->pub->down ? BWD_LOG_DEBUG : BWD_LOG_ERR,
				 &s->child);
	if (err) {
		bwd_log(BWD_LOG_ERR, "snapshot: fork: %s", strerror(-err));
		s->child = 0;
		return err;
	}
	s->child_generation = gen;
	s->child_started_ns = t0;
	bwd_log(BWD_LOG_DEBUG, "snapshot: writer forked in %.3f ms", ms_since(t0));
	return 0;
}

/* Try to bring the storage back: a fresh snapshot of everything and a new
 * journal after it.  The next try follows a failure (on_child, or here). */
static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_store *s = arg;

	(void)fd;
	(void)what;
	if (!s->pub->down || s->child)
		return;
	if (snapshot_begin(s)) {
		drop_recovery(s);
		arm_retry(s);
	}
}

/* The snapshot that brought the storage back is installed: changes are
 * accepted again, and what waited goes out at the next commit. */
static void come_up(struct bwd_store *s)
{
	s->recovery = false;
	s->pub->down = false;
	s->pub->err = 0;
	bwd_state_set_storage_down(s->state, false);
	bwd_log(BWD_LOG_NOTICE, "%s is written again (snapshot before journal generation %" PRIu64 "): changes to named sessions are accepted again after %.1f s",
		s->opt->dir, s->child_generation, ms_since(s->down_ns) / 1e3);
}

static void on_child(evutil_socket_t sig, short what, void *arg)
{
	struct bwd_store *s = arg;
	char name[40];
	pid_t child;
	int status, err;

	(void)sig;
	(void)what;
	if (!s->child || waitpid(s->child, &status, WNOHANG) != s->child)
		return;
	child = s->child;
	s->child = 0;
	bwd_snapshot_tmp_name(child, name);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		err = bwd_snapshot_install(s->dirfd, s->child_reserve ? "reserve" : name,
					   s->child_generation);
		if (!err) {
			uint64_t took = bw_now_ns() - s->child_started_ns;

			/* The journals before its generation are gone. */
			s->closed_bytes = 0;
			s->snapshot_bytes = snapshot_size(s);
			if (s->child_reserve)
				reserve_taken(s);
			s->pub->snapshots++;
			s->pub->snapshot_ns = s->child_started_ns;
			s->pub->snapshot_last_ns = took;
			s->pub->snapshot_total_ns += took;
			bwd_log(BWD_LOG_INFO, "snapshot before journal generation %" PRIu64 " written: %" PRIu64 " bytes in %.1f ms",
				s->child_generation, s->snapshot_bytes, took / 1e6);
			if (!s->pub->down)
				return;
			/* The journal after it must have held up meanwhile;
			 * if not, what it has is on top of this snapshot. */
			if (s->recovery && !bwd_journal_error(s->journal, NULL)) {
				come_up(s);
				return;
			}
			s->recovery = false;
			arm_retry(s);
			return;
		}
		bwd_log(s->pub->down ? BWD_LOG_DEBUG : BWD_LOG_ERR,
			"snapshot: installing it: %s", strerror(-err));
	} else {
		bwd_log(s->pub->down ? BWD_LOG_DEBUG : BWD_LOG_ERR,
			"snapshot: the writer failed (status 0x%x); the journals stay",
			(unsigned)status);
	}
	if (!s->child_reserve)
		unlinkat(s->dirfd, name, 0);
	s->next_snapshot_ns = bw_now_ns() + SNAPSHOT_RETRY_NS;
	if (s->pub->down) {
		drop_recovery(s);
		arm_retry(s);
	}
}

/* The records waiting for a sync have gathered long enough (journal.c):
 * the loop turn this ends commits them. */
static void on_gather(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

static void on_synced(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_store *s = arg;
	int err = bwd_journal_synced(s->journal);

	(void)fd;
	(void)what;
	/* While down, what is held waits for the snapshot, not for syncs;
	 * a failed sync still lets go what the syncs before it made
	 * durable. */
	if (!s->pub->down)
		s->durable(s->arg, s->pos_base + bwd_journal_durable(s->journal));
	if (err)
		journal_failed(s);
}

enum bwd_commit bwd_store_commit(struct bwd_store *s, bool needed, uint64_t *upto)
{
	enum bwd_commit done = BWD_COMMIT_WAIT;
	bool covered = false;
	uint64_t now = bw_now_ns(), wait_ns = 0;

	/* The reserve grows before the journal it must answer for. */
	if (!s->pub->down)
		reserve_check(s, now);
	if (s->journal && !bwd_journal_error(s->journal, NULL) &&
	    bwd_journal_commit(s->journal, needed, &covered, &wait_ns))
		journal_failed(s);
	if (wait_ns && !evtimer_pending(s->gather, NULL)) {
		struct timeval tv = { (time_t)(wait_ns / 1000000000u),
				      (suseconds_t)(wait_ns % 1000000000u / 1000u + 1) };

		evtimer_add(s->gather, &tv);
	}
	if (s->pub->down)
		return BWD_COMMIT_WAIT;
	if (covered)
		done = BWD_COMMIT_SYNCING;
	else if (!bwd_journal_pending(s->journal))
		done = BWD_COMMIT_DURABLE;
	/* Each snapshot starts a journal: its size is the change since. */
	if (!s->child && snapshot_due(s, now)) {
		s->next_snapshot_ns = now + s->opt->snapshot_interval_ns;
		if (snapshot_begin(s))
			s->next_snapshot_ns = now + SNAPSHOT_RETRY_NS;
		else if (s->flushed)
			done = BWD_COMMIT_DURABLE;
	}
	/* All written by now: the position the held output waits for. */
	*upto = s->pos_base + (s->journal ? bwd_journal_size(s->journal) : 0);
	return s->pub->down ? BWD_COMMIT_WAIT : done;
}

/* ---- the directory ---------------------------------------------------------------- */

/* dir is a symbolic link (systemd's DynamicUser= makes /var/lib/NAME
 * one): followed only when root or the daemon's uid owns it and nobody
 * else can replace it (its directory is not writable by others, or is
 * sticky). */
static bool trusted_link(const char *dir, const struct stat *link)
{
	char buf[PATH_MAX], *parent;
	struct stat st;

	if (!ours(link->st_uid)) {
		bwd_log(BWD_LOG_ERR, "--state-dir %s: a symbolic link owned by uid %u, not by the daemon's uid %u or root; remove it or choose another --state-dir",
			dir, (unsigned)link->st_uid, (unsigned)geteuid());
		return false;
	}
	snprintf(buf, sizeof(buf), "%s", dir);
	parent = dirname(buf);
	if (stat(parent, &st) < 0) {
		bwd_log(BWD_LOG_ERR, "--state-dir %s: %s: %s", dir, parent, strerror(errno));
		return false;
	}
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
		bwd_log(BWD_LOG_ERR, "--state-dir %s: a symbolic link in %s, which others may write (mode %04o); use the directory itself or choose another --state-dir",
			dir, parent, (unsigned)(st.st_mode & 07777));
		return false;
	}
	return true;
}

static int open_dir(struct bwd_store *s)
{
	const char *dir = s->opt->dir;
	uid_t me = geteuid();
	struct stat st;
	int err, follow = O_NOFOLLOW;

	if (mkdir(dir, 0700) == 0) {
		bwd_log(BWD_LOG_INFO, "created %s", dir);
	} else if (errno != EEXIST) {
		err = -errno;
		bwd_log(BWD_LOG_ERR, "--state-dir %s: %s", dir, strerror(errno));
		return err;
	}
	if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)) {
		if (!trusted_link(dir, &st))
			return -EPERM;
		follow = 0;
	}
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | follow);
	if (s->dirfd < 0 || fstat(s->dirfd, &st) < 0) {
		err = -errno;
		bwd_log(BWD_LOG_ERR, "--state-dir %s: %s", dir,
			errno == ENOTDIR ? "not a directory" : strerror(errno));
		return err;
	}
	if (!ours(st.st_uid)) {
		bwd_log(BWD_LOG_ERR, "%s: owned by uid %u, not by the daemon's uid %u or root; chown it or choose another --state-dir",
			dir, (unsigned)st.st_uid, (unsigned)me);
		return -EPERM;
	}
	if (st.st_mode & 022) {
		bwd_log(BWD_LOG_ERR, "%s: writable by %s (mode %04o); chmod go-w it (0700 is right) or choose another --state-dir",
			dir, st.st_mode & 002 ? "others" : "its group",
			(unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	err = check_entries(dir, s->dirfd);
	if (err)
		return err;
	s->lockfd = openat(s->dirfd, "lock",
			   O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	err = check_file(dir, "lock", s->lockfd, errno);
	if (err == -ENOENT)
		bwd_log(BWD_LOG_ERR, "%s/lock: %s", dir, strerror(ENOENT));
	if (err)
		return err;
	if (flock(s->lockfd, LOCK_EX | LOCK_NB) < 0) {
		err = -errno;
		bwd_log(BWD_LOG_ERR, "%s is in use by another bitwheeld (%s/lock is locked)",
			dir, dir);
		return err;
	}
	if (bwd_snapshot_clean(s->dirfd) > 0)
		bwd_log(BWD_LOG_INFO, "%s: an unfinished snapshot, removed", dir);
	return 0;
}

int bwd_store_open(const struct bwd_store_options *opt, struct bwd_state *st,
		   struct event_base *base, void (*durable)(void *arg, uint64_t upto),
		   void *arg,
		   struct bwd_storage *pub, struct bwd_store **out)
{
	struct bwd_store *s = calloc(1, sizeof(*s));
	struct bwd_journal *next;
	uint64_t gen;
	bool replayed;
	int err;

	if (!s)
		return -ENOMEM;
	s->opt = opt;
	s->state = st;
	s->base = base;
	s->durable = durable;
	s->arg = arg;
	s->pub = pub;
	memset(pub, 0, sizeof(*pub));
	s->dirfd = s->lockfd = s->reservefd = -1;
	err = open_dir(s);
	if (err)
		goto fail;
	err = recover(s, &gen, &replayed);
	if (err)
		goto fail;
	s->sigchld = evsignal_new(base, SIGCHLD, on_child, s);
	s->retry = evtimer_new(base, on_retry, s);
	s->gather = evtimer_new(base, on_gather, s);
	if (!s->sigchld || !s->retry || !s->gather || event_add(s->sigchld, NULL)) {
		err = -ENOMEM;
		goto fail;
	}
	s->next_gen = gen;
	/* The first generation begins now: the least interval counts from it. */
	s->last_snapshot_ns = bw_now_ns();
	s->next_snapshot_ns = s->last_snapshot_ns + opt->snapshot_interval_ns;
	s->snapshot_bytes = snapshot_size(s);
	/* A full disk need not keep the daemon down: it serves what it
	 * recovered, the files it read stay as they are, and the retries
	 * write the snapshot when they can. */
	reserve_open(s);
	err = journal_open(s, gen, &next);
	if (err) {
		go_down(s, gen, err, "creating it");
		*out = s;
		return 0;
	}
	s->next_gen = gen + 1;
	if (use_journal(s, next)) {
		err = -ENOMEM;
		goto fail;
	}
	/* One file again: what was replayed goes into a snapshot now, so
	 * the next start reads it instead of the same journals. */
	if (replayed && snapshot_begin(s))
		s->next_snapshot_ns = bw_now_ns() + SNAPSHOT_RETRY_NS;
	*out = s;
	return 0;
fail:
	bwd_store_free(s);
	return err;
}

void bwd_store_free(struct bwd_store *s)
{
	if (!s)
		return;
	if (s->child) {
		/* The journals hold everything: an unfinished snapshot is
		 * only lost work. */
		char name[40];

		kill(s->child, SIGKILL);
		waitpid(s->child, NULL, 0);
		bwd_snapshot_tmp_name(s->child, name);
		if (!s->child_reserve)
			unlinkat(s->dirfd, name, 0);
	}
	if (s->reservefd >= 0)
		close(s->reservefd);
	if (s->sigchld)
		event_free(s->sigchld);
	if (s->retry)
		event_free(s->retry);
	if (s->gather)
		event_free(s->gather);
	if (s->pub)
		use_journal(s, NULL);
	if (s->lockfd >= 0)
		close(s->lockfd);
	if (s->dirfd >= 0)
		close(s->dirfd);
	free(s);
}
