/*
 * check_durable.c - what bitwheeld --state-dir keeps across a restart and a
 * crash, on real daemons (tests/daemonutil.c) stopped with SIGTERM or
 * killed with SIGKILL and started again on the same state directory.
 *
 * TCases:
 *   restart   timers of a named session survive SIGTERM and SIGKILL: one
 *             due during the downtime fires right after recovery marked
 *             late, one due after it fires on time unmarked, a periodic
 *             one that missed periods fires once and resumes, cancelled
 *             and anonymous timers stay gone; queued fires survive; a
 *             journal written during "another boot" moves deadlines by
 *             the wall clock (a boottime timer's too); without
 *             --state-dir the log says nothing is kept; a second daemon
 *             on the same directory is refused;
 *             fires in flight to a consumer when a snapshot is written
 *             come again after a restart from it, marked redelivered.
 *   sync      with every fdatasync slowed to 400 ms (tests/faultsync.c
 *             preloaded), a named Schedule's reply and a fire leave only
 *             once the sync of their record has finished (batch and
 *             always); an anonymous session's reply does not wait.  With
 *             syncs of random length overlapping (batch: two in flight),
 *             no reply comes before a sync that began after its request
 *             returned (the shim's log); a failure of either of two
 *             syncs in flight fails exactly what it covers.
 *   files     the torn tail (the journal cut at every byte of its last
 *             record), a corrupt snapshot (exit 1 naming it) and
 *             --ignore-snapshot; the room after a journal's records is
 *             written zeros, no extent of it left unwritten (FIEMAP,
 *             where the file system tells), so that a sync into it is a
 *             pure data overwrite (daemon/journal.c).
 *   shutdown  SIGTERM under load, without --state-dir: every timer the
 *             daemon acknowledged either fired to the client or is named in
 *             the shutdown log (keys at debug level, -v).
 *   crash     rounds of pipelined schedules and cancels on three named
 *             sessions, each connection a consumer that acknowledges every
 *             fire as it reads it, the daemon SIGKILLed at a random moment
 *             of each: every acknowledged, uncancelled timer is handled
 *             exactly once (per period for periodic ones) but for repeats
 *             marked redelivered, and no cancelled one fires; wall-clock
 *             oneshots (Schedule.realtime_ns) alike, never before their
 *             instant by the wall clock, and calendar timers (every
 *             second) fire each elapse at most once unmarked, in order,
 *             never before it.
 *   paths     the state directory is trusted only as sshd's StrictModes
 *             would: another uid's directory, a group- or world-writable
 *             one, a symbolic link named lock (its target never created),
 *             a FIFO named snapshot (refused at once, no hang), a
 *             directory named like a journal, a journal of another uid
 *             or group-writable: each refused with exit 1 naming the path;
 *             a directory reached through a symbolic link of ours in a
 *             private directory serves, one in a public directory not.
 *
 * The state files' layout (daemon/record.c) is read here from its
 * description, with a CRC32C of the test's own, so the test checks the
 * format rather than sharing its code.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemonutil.h"
#include "testutil.h"

#define DEFAULT_SEED UINT64_C(0xd0ab1e)
#define FILE_HEADER 64
#define RECORD_HEADER 8
#define ONESHOT_RES DU_MS
#define PERIODIC_RES (100 * DU_MS)

static uint64_t test_seed(void)
{
	uint64_t seed = tu_seed_from_env("BW_TEST_SEED", DEFAULT_SEED);

	du_note("seed %#" PRIx64 " (BW_TEST_SEED)", seed);
	return seed;
}

/* ---- the state directory ------------------------------------------------- */

static void state_path(const struct du_daemon *d, const char *file, char *out,
		       size_t len)
{
	snprintf(out, len, "%s/state%s%s", d->dir, file ? "/" : "", file ? file : "");
}

static void start_durable(struct du_daemon *d, const char *extra)
{
	char dir[160];

	state_path(d, NULL, dir, sizeof(dir));
	du_daemon_start(d, "--state-dir", dir, extra, (const char *)NULL);
}

static uint8_t *read_whole(const char *path, size_t *len)
{
	struct stat sb;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(fstat(fd, &sb), 0);
	buf = malloc((size_t)sb.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(read(fd, buf, (size_t)sb.st_size), sb.st_size);
	close(fd);
	*len = (size_t)sb.st_size;
	return buf;
}

static void write_whole(const char *path, const uint8_t *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void clear_state(const struct du_daemon *d)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s/state' && mkdir -m 0700 '%s/state'",
		 d->dir, d->dir);
	ck_assert_int_eq(system(cmd), 0);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Offsets of every record in a journal; checks each one's CRC. */
static size_t record_offsets(const uint8_t *buf, size_t len, size_t *off,
			     size_t max)
{
	size_t n = 0, at = FILE_HEADER;

	ck_assert_uint_ge(len, FILE_HEADER);
	ck_assert_uint_eq(le32(buf + 60), tu_crc32c(buf, 60));
	while (at < len) {
		uint32_t body = le32(buf + at);

		/* The room allocated ahead, zeros to the end: no records. */
		if (body == 0) {
			for (size_t i = at; i < len; i++)
				ck_assert_msg(!buf[i], "byte %zu of the room after the records is not 0", i);
			break;
		}

		ck_assert_uint_le(at + RECORD_HEADER + body, len);
		ck_assert_uint_eq(le32(buf + at + 4), tu_crc32c(buf + at + RECORD_HEADER, body));
		ck_assert_uint_lt(n, max);
		off[n++] = at;
		at += RECORD_HEADER + body;
	}
	return n;
}

/* Bytes of path allocated but never written (fallocate's unwritten
 * extents), once its dirty pages are on disk; -1 when the file system
 * cannot say (no FIEMAP, as on tmpfs). */
static long long unwritten_bytes(const char *path)
{
	enum { EXTENTS = 256 };
	struct fiemap *f = calloc(1, sizeof(*f) + EXTENTS * sizeof(struct fiemap_extent));
	long long n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_ptr_nonnull(f);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	f->fm_length = FIEMAP_MAX_OFFSET;
	f->fm_flags = FIEMAP_FLAG_SYNC;
	f->fm_extent_count = EXTENTS;
	if (ioctl(fd, FS_IOC_FIEMAP, f) < 0) {
		du_note("FIEMAP on %s: %s", path, strerror(errno));
		n = -1;
	} else {
		ck_assert_uint_lt(f->fm_mapped_extents, EXTENTS);
		for (unsigned i = 0; i < f->fm_mapped_extents; i++)
			if (f->fm_extents[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN)
				n += (long long)f->fm_extents[i].fe_length;
	}
	close(fd);
	free(f);
	return n;
}

/* The end of a daemon log, short enough for a Check message. */
static const char *tail(const char *log)
{
	size_t n = strlen(log);

	return n > 2000 ? log + n - 2000 : log;
}

/* ---- protocol helpers ---------------------------------------------------- */

static uint64_t schedule_at(struct du_conn *c, uint64_t id, uint64_t key,
			    uint64_t deadline, uint64_t period)
{
	struct du_sched s = { .key = key, .when = DU_DEADLINE, .when_ns = deadline,
			      .periodic = period != 0, .period_ns = period,
			      .payload = "p", .payload_len = 1 };
	du_env *r = du_schedule(c, id, &s);
	uint64_t got = r->schedule_reply->deadline_ns;

	bwp_frame_free(r);
	return got;
}

static uint64_t hello_timers(struct du_conn *c, const char *session, bool *resumed,
			     uint64_t *queued)
{
	du_env *r = du_hello(c, session);
	uint64_t n = r->hello_reply->timers;

	if (resumed)
		*resumed = r->hello_reply->resumed;
	if (queued)
		*queued = r->hello_reply->queued;
	bwp_frame_free(r);
	return n;
}

/* The next fire, which must be for `key`; returns it (caller frees). */
static du_env *expect_key(struct du_conn *c, uint64_t key, int timeout_ms,
			  uint64_t *rx)
{
	du_env *f = du_expect_fire(c, timeout_ms, rx);

	ck_assert_msg(f->fired->key == key, "fire for key %" PRIu64 ", expected %" PRIu64,
		      f->fired->key, key);
	ck_assert_uint_ge(f->fired->fired_at_ns, f->fired->deadline_ns);
	ck_assert_uint_ge(*rx, f->fired->deadline_ns);
	return f;
}

/* ---- restart ------------------------------------------------------------- */

/*
 * Keys in session "s": 1 due during the downtime, 2 due 2 s after the
 * restart, 3 periodic (300 ms) from before the stop, 4 cancelled; key 5 in
 * an anonymous session.  stop: how the daemon goes down.
 */
/*
 * The journal's sync is part of a fire's lateness (a fire waits for its
 * record), and under make -j2 another suite's syncs can hold the disk for
 * hundreds of milliseconds: the tests that time fires against their
 * resolution plus the margin journal with --fsync=never, which keeps
 * everything across a SIGKILL just the same (the kernel has it).
 */
#define NEVER "--fsync=never"

static void restart_keeps(int sig)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c, *anon;
	uint64_t t0, d1, d2, d3, rx, restarted, n, queued;
	bool resumed;
	du_env *f;

	start_durable(d, NEVER);
	c = du_open(d, "s");
	anon = du_open(d, NULL);
	t0 = du_now_ns();
	d1 = schedule_at(c, 2, 1, t0 + 600 * DU_MS, 0);
	d3 = schedule_at(c, 3, 3, t0 + 200 * DU_MS, 300 * DU_MS);
	schedule_at(c, 4, 4, t0 + 500 * DU_MS, 0);
	ck_assert(du_cancel(c, 5, 4));
	schedule_at(anon, 2, 5, t0 + 400 * DU_MS, 0);
	/* The periodic timer fires once before the stop. */
	f = expect_key(c, 3, DU_WAIT_MS, &rx);
	ck_assert_uint_eq(f->fired->fire_count, 1);
	bwp_frame_free(f);
	du_conn_free(c);
	du_conn_free(anon);
	if (sig == SIGKILL)
		du_daemon_kill(d);
	else
		du_assert_exit(d, du_daemon_stop(d, sig, DU_WAIT_MS), 0);
	/* Down long enough for key 1 and two periods of key 3 to pass. */
	du_sleep_until(t0 + 1300 * DU_MS);
	start_durable(d, NEVER);
	restarted = du_now_ns();
	d2 = restarted + 2 * DU_S;
	c = du_connect(d->sock);
	/* Keys 1 and 3, unless the first poll after recovery fired them
	 * into the session's queue already. */
	n = hello_timers(c, "s", &resumed, &queued);
	ck_assert(resumed);
	ck_assert_uint_ge(n, 1);
	ck_assert_uint_ge(n + queued, 2);
	d2 = schedule_at(c, 2, 2, d2, 0);
	/* Key 1 and the periodic key 3 were due while the daemon was down:
	 * both fire at once, marked late; key 3 fires once for the periods
	 * it missed. */
	for (int i = 0; i < 2; i++) {
		f = du_expect_fire(c, DU_WAIT_MS, &rx);
		/* The first fire of key 3 may come again: the daemon can die
		 * between writing it to the socket and journaling that it did
		 * (PROTOCOL.md: redelivered). */
		if (f->fired->redelivered) {
			ck_assert_uint_eq(f->fired->key, 3);
			ck_assert_uint_eq(f->fired->fire_count, 1);
			bwp_frame_free(f);
			i--;
			continue;
		}
		ck_assert_msg(f->fired->late, "key %" PRIu64 " count %" PRIu64 " deadline %" PRIu64 " (restart %" PRIu64 ") not late%s",
			      f->fired->key, f->fired->fire_count, f->fired->deadline_ns,
			      restarted, f->fired->redelivered ? ", redelivered" : "");
		ck_assert_uint_le(rx, restarted + PERIODIC_RES + du_margin_ns() + 500 * DU_MS);
		if (f->fired->key == 1) {
			ck_assert_uint_eq(f->fired->deadline_ns, d1);
		} else {
			ck_assert_uint_eq(f->fired->key, 3);
			ck_assert_uint_eq(f->fired->fire_count, 2);
			ck_assert_uint_lt(f->fired->deadline_ns, restarted);
		}
		bwp_frame_free(f);
	}
	/* Key 3 resumes on its period, on time. */
	f = expect_key(c, 3, DU_WAIT_MS, &rx);
	ck_assert(!f->fired->late);
	ck_assert_uint_eq(f->fired->fire_count, 3);
	ck_assert_uint_eq((f->fired->deadline_ns - d3) % (300 * DU_MS), 0);
	du_check_fire_time(f->fired, rx, PERIODIC_RES);
	bwp_frame_free(f);
	ck_assert(du_cancel(c, 6, 3));
	/* Key 2, scheduled after the restart, on time; keys 4 and 5 never. */
	f = expect_key(c, 2, DU_WAIT_MS, &rx);
	ck_assert(!f->fired->late);
	du_check_fire_time(f->fired, rx, ONESHOT_RES);
	bwp_frame_free(f);
	du_expect_quiet(c, 300);
	du_note("%s: late fires %.1f ms after the restart",
		sig == SIGKILL ? "SIGKILL" : "SIGTERM", (double)(rx - restarted) / 1e6);
	du_conn_free(c);
	du_daemon_free(d);
}

/* Their point is when fires come, which a daemon under valgrind cannot
 * keep to; the recovery they exercise runs under it in the other tests. */
static bool skip_timing(const char *test)
{
	return du_skip_if_wrapped(test, "it times fires against a downtime of a few hundred ms");
}

/*
 * Listings after a restart: the restored session is listed with its
 * timers (keys and deadlines as scheduled), no connection, idle since the
 * restart and expiring within its linger; a new anonymous session beside
 * it has a number of its own (listed too, with its pid).
 */
START_TEST(test_restart_listed)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint64_t deadline[3], restarted;
	bool seen[3] = { false };
	du_env *e;
	const Bitwheel__V1__SessionInfo *kept = NULL, *anon = NULL;

	start_durable(d, NEVER);
	c = du_open(d, "kept");
	for (uint64_t k = 0; k < 3; k++)
		deadline[k] = schedule_at(c, 2 + k, 10 + k, du_now_ns() + (3600 + k) * DU_S, 0);
	du_conn_free(c);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	start_durable(d, NEVER);
	restarted = du_now_ns();
	c = du_open(d, NULL);
	e = du_list(c, 2, NULL, 0, 0);
	ck_assert(!e->list_sessions_reply->more);
	ck_assert_uint_eq(e->list_sessions_reply->n_sessions, 2);
	for (size_t i = 0; i < 2; i++) {
		const Bitwheel__V1__SessionInfo *si = e->list_sessions_reply->sessions[i];

		if (si->has_name)
			kept = si;
		else
			anon = si;
	}
	ck_assert(kept && anon);
	ck_assert(kept->name.len == 4 && memcmp(kept->name.data, "kept", 4) == 0);
	ck_assert_uint_eq(kept->timers, 3);
	ck_assert_uint_eq(kept->consumers + kept->producers, 0);
	ck_assert(kept->has_expires_in_ns);
	ck_assert_uint_le(kept->idle_ns, du_now_ns() - restarted + DU_S);
	ck_assert_uint_le(kept->expires_in_ns, 300 * DU_S);
	ck_assert_uint_eq(anon->pid, (uint32_t)getpid());
	ck_assert_uint_eq(anon->consumers, 1);
	bwp_frame_free(e);
	e = du_list(c, 3, "kept", 0, 0);
	ck_assert_uint_eq(e->list_timers_reply->n_timers, 3);
	for (size_t i = 0; i < 3; i++) {
		const Bitwheel__V1__TimerInfo *t = e->list_timers_reply->timers[i];

		ck_assert(t->key >= 10 && t->key < 13 && !seen[t->key - 10]);
		seen[t->key - 10] = true;
		ck_assert_uint_eq(t->deadline_ns, deadline[t->key - 10]);
		ck_assert(!t->late);
	}
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_restart_sigterm)
{
	if (skip_timing("test_restart_sigterm"))
		return;
	restart_keeps(SIGTERM);
}
END_TEST

START_TEST(test_restart_sigkill)
{
	if (skip_timing("test_restart_sigkill"))
		return;
	restart_keeps(SIGKILL);
}
END_TEST

/* A timer due 2 s after a restart, scheduled before it, fires on time:
 * with --fsync=always every record waits for the disk, so the bound is the
 * overload one (three margins). */
START_TEST(test_restart_within_deadline)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint64_t deadline, rx, restarted;
	du_env *f;

	if (skip_timing("test_restart_within_deadline"))
		return;
	start_durable(d, "--fsync=always");
	c = du_open(d, "w");
	deadline = schedule_at(c, 2, 9, du_now_ns() + 2500 * DU_MS, 0);
	du_conn_free(c);
	du_daemon_kill(d);
	start_durable(d, "--fsync=always");
	restarted = du_now_ns();
	ck_assert_uint_lt(restarted + 1500 * DU_MS, deadline);
	c = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(c, "w", NULL, NULL), 1);
	f = expect_key(c, 9, DU_WAIT_MS, &rx);
	ck_assert(!f->fired->late);
	ck_assert(!f->fired->redelivered);
	ck_assert_uint_eq(f->fired->deadline_ns, deadline);
	du_note("fired %.2f ms after its deadline, restart %.1f s before it",
		(double)du_check_fire_time(f->fired, rx, ONESHOT_RES + 2 * du_margin_ns()) / 1e6,
		(double)(deadline - restarted) / 1e9);
	bwp_frame_free(f);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* Fires queued for a detached session survive, in order, unrepeated. */
START_TEST(test_restart_keeps_queue)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	uint64_t t0, queued, rx;

	if (skip_timing("test_restart_keeps_queue"))
		return;
	start_durable(d, NULL);
	/* A producer: no fire goes to it, so all 20 queue however long the
	 * Schedules take (an auto-ack consumer here took the fires that came
	 * due before it left, on a loaded machine). */
	c = du_open_producer(d, "q");
	t0 = du_now_ns();
	for (uint64_t k = 1; k <= 20; k++)
		schedule_at(c, 1 + k, k, t0 + (50 + k) * DU_MS, 0);
	du_conn_free(c);
	/* Every fire queued (however slow a loaded machine makes the
	 * daemon), then one Schedule's reply: it leaves only once the
	 * journal is durable up to it, the 20 FIRE records before it too. */
	c = du_open(d, "q-sync");
	for (int waited = 0;; waited += 10) {
		du_env *st = du_stats(c, 1);

		queued = st->stats_reply->queued;
		bwp_frame_free(st);
		if (queued == 20)
			break;
		ck_assert_msg(waited < DU_WAIT_MS, "%" PRIu64 " of 20 fires queued after %d ms",
			      queued, DU_WAIT_MS);
		du_sleep_ms(10);
	}
	schedule_at(c, 2, 1, t0 + 3600 * DU_S, 0);
	du_conn_free(c);
	du_daemon_kill(d);
	start_durable(d, NULL);
	c = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(c, "q", NULL, &queued), 0);
	ck_assert_uint_eq(queued, 20);
	for (uint64_t k = 1; k <= 20; k++) {
		du_env *f = expect_key(c, k, DU_WAIT_MS, &rx);

		/* Fired on time before the crash, never sent: not late, not
		 * a possible repeat. */
		ck_assert(!f->fired->late);
		ck_assert(!f->fired->redelivered);
		bwp_frame_free(f);
	}
	du_expect_quiet(c, 200);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* A journal from another boot: deadlines move by the wall clock; a
 * boottime timer's (whose CLOCK_BOOTTIME deadline means nothing in
 * another boot) the same, from where it was placed. */
START_TEST(test_restart_other_boot)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	char path[200];
	uint8_t *buf;
	size_t len;
	uint64_t deadline, boot_placed, rx, shift = 1500 * DU_MS;
	struct du_sched boot = { .key = 2, .when = DU_DEADLINE, .boot = true };
	du_env *f;

	if (skip_timing("test_restart_other_boot"))
		return;
	start_durable(d, NULL);
	c = du_open(d, "b");
	deadline = schedule_at(c, 2, 1, du_now_ns() + 500 * DU_MS, 0);
	boot_placed = du_now_ns() + 1500 * DU_MS;
	boot.when_ns = boot_placed + (du_boottime_ns() - du_now_ns());
	bwp_frame_free(du_schedule(c, 3, &boot));
	du_conn_free(c);
	du_daemon_kill(d);
	/* Another boot_id, and a monotonic clock that read 1.5 s less at
	 * the same wall time: the deadline is 1.5 s later in wall time. */
	state_path(d, "journal.0000000000000000", path, sizeof(path));
	buf = read_whole(path, &len);
	memset(buf + 16, 0x5a, 16);
	put64(buf + 32, le64(buf + 32) - shift);
	{
		uint32_t crc = tu_crc32c(buf, 60);

		for (int i = 0; i < 4; i++)
			buf[60 + i] = (uint8_t)(crc >> (8 * i));
	}
	write_whole(path, buf, len);
	free(buf);
	start_durable(d, NULL);
	c = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(c, "b", NULL, NULL), 2);
	f = expect_key(c, 1, DU_WAIT_MS, &rx);
	ck_assert(!f->fired->late);
	/* Converted through the wall clock, which moves a little on its own
	 * between the two readings. */
	ck_assert_uint_ge(f->fired->deadline_ns + 20 * DU_MS, deadline + shift);
	ck_assert_uint_le(f->fired->deadline_ns, deadline + shift + 20 * DU_MS);
	ck_assert_uint_ge(rx + 20 * DU_MS, deadline + shift);
	du_note("deadline moved by %.3f ms (expected %.3f)",
		(double)(f->fired->deadline_ns - deadline) / 1e6, (double)shift / 1e6);
	bwp_frame_free(f);
	f = expect_key(c, 2, DU_WAIT_MS, &rx);
	ck_assert(!f->fired->late);
	ck_assert_uint_ge(f->fired->deadline_ns + 20 * DU_MS, boot_placed + shift);
	ck_assert_uint_le(f->fired->deadline_ns, boot_placed + shift + 20 * DU_MS);
	bwp_frame_free(f);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_no_state_dir_says_so)
{
	struct du_daemon *d = du_daemon_new();
	char *log;

	du_daemon_start(d, (const char *)NULL);
	log = du_daemon_log(d);
	ck_assert_msg(strstr(log, "no --state-dir"), "log: %s", tail(log));
	free(log);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_state_dir_locked)
{
	struct du_daemon *a = du_daemon_new(), *b = du_daemon_new();
	char dir[160], *log;
	const char *argv[] = { DU_DAEMON_PATH, "--socket", b->sock, "--state-dir",
			       dir, NULL };
	int status;

	start_durable(a, NULL);
	state_path(a, NULL, dir, sizeof(dir));
	du_daemon_spawn(b, argv);
	ck_assert(du_daemon_wait_exit(b, DU_WAIT_MS));
	status = b->status;
	du_assert_exit(b, status, 1);
	log = du_daemon_log(b);
	ck_assert_msg(strstr(log, "in use by another bitwheeld"), "log: %s", tail(log));
	free(log);
	du_assert_serving(a);
	du_daemon_free(b);
	du_daemon_free(a);
}
END_TEST

/* ---- sync ---------------------------------------------------------------- */

/* Each fdatasync's time in the sync tests (tests/faultsync.c): scaled
 * so that a slow daemon's anonymous reply still comes within it, but no
 * more than 2 s, which valgrind's daemon takes a few ms of. */
static uint64_t slow_sync_ns(void)
{
	int ms = du_scale_ms(400);

	return (uint64_t)(ms < 2000 ? ms : 2000) * DU_MS;
}

/*
 * A reply or fire of a named session leaves once the sync covering its
 * record has finished, not when it starts: every fdatasync made to take
 * 400 ms (tests/faultsync.c), the ScheduleReply comes 400 ms or more after
 * the Schedule was sent, and a fire whose record was made while that sync
 * ran waits for the next one, 400 ms or more after it fired.  Under
 * --fsync=batch an anonymous session's Schedule sent after the named one
 * is answered first (its reply waits for nothing); under always the loop
 * itself waits for each sync.
 */
static void reply_after_sync(const char *policy)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c, *anon;
	struct du_sched s;
	uint64_t t0, rx_named, rx_anon = 0, rx_fire, slow = slow_sync_ns();
	du_env *e;

	du_fault_sync(d, 0, 0);
	start_durable(d, policy);
	c = du_open(d, "slow");
	anon = du_open(d, NULL);
	du_fault_sync(d, (unsigned)(slow / DU_MS), 0);
	t0 = du_now_ns();
	s = (struct du_sched){ .key = 1, .when = DU_DEADLINE, .when_ns = t0 + slow / 4 };
	du_send_schedule(c, 2, &s);
	s = (struct du_sched){ .key = 2, .when = DU_DELAY, .when_ns = 3600 * DU_S };
	du_send_schedule(anon, 2, &s);
	bwp_frame_free(du_expect_reply(anon, 2, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY));
	rx_anon = anon->rx_ns;
	bwp_frame_free(du_expect_reply(c, 2, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY));
	rx_named = c->rx_ns;
	e = du_expect_fire(c, DU_WAIT_MS, &rx_fire);
	ck_assert_uint_eq(e->fired->key, 1);
	du_note("%s, fdatasync %.0f ms: named reply %.1f ms after its Schedule, anonymous %.1f ms; fire %.1f ms after it fired",
		policy, slow / 1e6, (rx_named - t0) / 1e6, (rx_anon - t0) / 1e6,
		(rx_fire - e->fired->fired_at_ns) / 1e6);
	ck_assert_msg(rx_named >= t0 + slow,
		      "%s: the reply to a named Schedule came %.1f ms after it, before the %.0f ms fdatasync of its record could finish",
		      policy, (rx_named - t0) / 1e6, slow / 1e6);
	ck_assert_msg(rx_fire >= e->fired->fired_at_ns + slow,
		      "%s: a fire came %.1f ms after it fired, before the %.0f ms fdatasync of its record could finish",
		      policy, (rx_fire - e->fired->fired_at_ns) / 1e6, slow / 1e6);
	if (!strcmp(policy, "--fsync=batch"))
		ck_assert_msg(rx_anon < rx_named,
			      "an anonymous session's reply waited for a named session's sync");
	bwp_frame_free(e);
	/* Stopping syncs the journal: at full speed. */
	du_fault_sync(d, 0, 0);
	du_conn_free(anon);
	du_conn_free(c);
	du_daemon_free(d);
}

START_TEST(test_reply_after_sync_batch)
{
	reply_after_sync("--fsync=batch");
}
END_TEST

START_TEST(test_reply_after_sync_always)
{
	reply_after_sync("--fsync=always");
}
END_TEST

/*
 * Group commit under both policies: 16 named Schedules sent in one write
 * are read in one loop turn and made durable by one fdatasync (each made
 * to take 400 ms), so every reply comes once that sync is done and the
 * last within two of them, not sixteen (a sync per record, as always did
 * once).
 */
static void sync_per_turn(const char *policy)
{
	enum { N = 16 };
	struct du_daemon *d = du_daemon_new();
	struct du_buf b = { 0 };
	struct du_conn *c;
	uint64_t t0, first = UINT64_MAX, last = 0, slow = slow_sync_ns();

	du_fault_sync(d, 0, 0);
	start_durable(d, policy);
	c = du_open(d, "turn");
	du_fault_sync(d, (unsigned)(slow / DU_MS), 0);
	for (unsigned i = 0; i < N; i++) {
		struct du_sched s = { .key = i + 1, .when = DU_DELAY,
				      .when_ns = 3600 * DU_S };

		du_pack_schedule(&b, i + 1, &s);
	}
	t0 = du_now_ns();
	du_send_buf(c, &b);
	for (unsigned i = 0; i < N; i++) {
		bwp_frame_free(du_expect_reply(c, i + 1,
					       BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY));
		if (c->rx_ns < first)
			first = c->rx_ns;
		last = c->rx_ns;
	}
	du_note("%s, fdatasync %.0f ms: %d pipelined named Schedules answered %.1f..%.1f ms after they were sent",
		policy, slow / 1e6, N, (first - t0) / 1e6, (last - t0) / 1e6);
	ck_assert_msg(first >= t0 + slow,
		      "%s: a reply came %.1f ms after its Schedule, before the %.0f ms fdatasync of its record could finish",
		      policy, (first - t0) / 1e6, slow / 1e6);
	ck_assert_msg(last < t0 + 3 * slow,
		      "%s: the last of %d pipelined replies came %.1f ms after them: more than two %.0f ms syncs, not one per loop turn",
		      policy, N, (last - t0) / 1e6, slow / 1e6);
	du_buf_free(&b);
	du_fault_sync(d, 0, 0);
	du_conn_free(c);
	du_daemon_free(d);
}

START_TEST(test_sync_per_turn_batch)
{
	sync_per_turn("--fsync=batch");
}
END_TEST

START_TEST(test_sync_per_turn_always)
{
	sync_per_turn("--fsync=always");
}
END_TEST

/* Whether some sync of the log began after t and returned, having synced,
 * by rx: one that may have made durable what was sent at t. */
static bool synced_between(const struct du_sync_call *log, size_t n,
			   uint64_t t, uint64_t rx)
{
	for (size_t i = 0; i < n; i++)
		if (!log[i].err && log[i].begin_ns >= t && log[i].end_ns <= rx)
			return true;
	return false;
}

/*
 * Two syncs in flight (--fsync=batch): named Schedules sent every 15 ms,
 * in turn on two connections, while each fdatasync takes a time drawn
 * from 5..150 ms (the shim's plan, seeded; both scaled by BW_TEST_SLOW,
 * or under valgrind the gap outlasts every sync), so that syncs overlap and a
 * later one often returns first.  Every reply comes after a sync that
 * began after its Schedule was sent had returned (the shim's log): no
 * reply is let go by a sync that began before its record was written,
 * or before its own sync is done, whichever sync finishes first; and
 * the syncs did overlap.
 */
START_TEST(test_sync_overlap)
{
	enum { N = 40, STEPS = 64 };
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c[2];
	struct du_sync_step plan[STEPS];
	struct du_sync_call *log;
	struct tu_rng rng;
	uint64_t sent[N + 1] = { 0 }, rx[N + 1] = { 0 }, next, end;
	uint64_t gap = (uint64_t)du_scale_ms(15) * DU_MS;
	unsigned got = 0, n_sent = 0;
	bool overlap = false;
	size_t n;

	tu_rng_seed(&rng, test_seed());
	for (unsigned i = 0; i < STEPS; i++)
		plan[i] = (struct du_sync_step){ (unsigned)du_scale_ms((int)tu_rng_range(&rng, 5, 150)), 0 };
	plan[STEPS - 1].delay_ms = 0;
	du_fault_sync(d, 0, 0);
	start_durable(d, "--fsync=batch");
	c[0] = du_open(d, "overlap-a");
	c[1] = du_open(d, "overlap-b");
	du_fault_sync_plan(d, plan, STEPS);
	next = du_now_ns();
	end = next + (uint64_t)DU_WAIT_MS * DU_MS + N * gap;
	while (got < N) {
		struct pollfd p[2] = { { c[0]->fd, POLLIN, 0 }, { c[1]->fd, POLLIN, 0 } };
		uint64_t now = du_now_ns();

		ck_assert_msg(now < end, "%u of %d replies after %.0f ms", got, N,
			      (now - (end - (uint64_t)DU_WAIT_MS * DU_MS - N * gap)) / 1e6);
		if (n_sent < N && now >= next) {
			struct du_sched s = { .key = n_sent + 1, .when = DU_DELAY,
					      .when_ns = 3600 * DU_S };

			n_sent++;
			sent[n_sent] = du_now_ns();
			du_send_schedule(c[n_sent % 2], n_sent, &s);
			next += gap;
			continue;
		}
		poll(p, 2, n_sent < N ? (int)((next - now) / DU_MS) + 1 : 100);
		for (unsigned k = 0; k < 2; k++) {
			char what[256];
			du_env *e;

			while (du_recv(c[k], 0, &e) == DU_FRAME) {
				ck_assert_msg(e->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY &&
					      e->request_id >= 1 && e->request_id <= n_sent &&
					      !rx[e->request_id],
					      "unexpected %s", du_describe(e, what, sizeof(what)));
				rx[e->request_id] = c[k]->rx_ns;
				got++;
				bwp_frame_free(e);
			}
		}
	}
	n = du_fault_sync_log(d, &log);
	for (unsigned i = 1; i <= N; i++)
		ck_assert_msg(synced_between(log, n, sent[i], rx[i]),
			      "the reply to Schedule %u came %.1f ms after it, before any sync that began after it had returned (%zu syncs logged)",
			      i, (rx[i] - sent[i]) / 1e6, n);
	for (size_t i = 0; i < n && !overlap; i++)
		for (size_t j = 0; j < n && !overlap; j++)
			overlap = i != j && log[i].begin_ns < log[j].begin_ns &&
				  log[j].begin_ns < log[i].end_ns;
	du_note("%d named Schedules every %.0f ms, syncs of 5..150 ms: %zu syncs, replies after %.1f..%.1f ms",
		N, gap / 1e6, n, (rx[1] - sent[1]) / 1e6, (rx[N] - sent[N]) / 1e6);
	ck_assert_msg(overlap, "no two of %zu syncs were in flight at once", n);
	free(log);
	du_fault_sync(d, 0, 0);
	du_conn_free(c[1]);
	du_conn_free(c[0]);
	du_daemon_free(d);
}
END_TEST

/*
 * A failure in either of two syncs in flight fails exactly what it
 * covers.  A named Schedule on one connection starts sync 1 (300 ms), one
 * on another 100 ms later sync 2 (50 ms: it returns first); every sync
 * after them fails, so that the storage stays down.  When sync 1 fails,
 * sync 2's success does not count (an earlier failure leaves what it
 * covered unknown): neither reply comes, and both connections end with
 * STORAGE_UNAVAILABLE once the outage has lasted BWD_HELD_DOWN_NS.  When
 * sync 2 fails, sync 1's success, though it returns later, still lets
 * the first reply go, after it returned; the second connection ends.
 */
static void sync_error_in_flight(bool first_fails)
{
	struct du_daemon *d = du_daemon_new();
	struct du_sync_step plan[3] = {
		{ (unsigned)du_scale_ms(300), first_fails ? EIO : 0 },
		{ (unsigned)du_scale_ms(50), first_fails ? 0 : EIO },
		{ 0, EIO },
	};
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = 3600 * DU_S };
	struct du_sync_call *log;
	struct du_conn *a, *b;
	uint64_t t0;
	size_t n;

	du_fault_sync(d, 0, 0);
	start_durable(d, "--fsync=batch");
	a = du_open(d, "first");
	b = du_open(d, "second");
	du_fault_sync_plan(d, plan, 3);
	t0 = du_now_ns();
	du_send_schedule(a, 2, &s);
	du_sleep_ms(du_scale_ms(100));
	s.key = 2;
	du_send_schedule(b, 2, &s);
	if (first_fails) {
		du_expect_error(a, false, 0, BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE);
	} else {
		bwp_frame_free(du_expect_reply(a, 2, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY));
		n = du_fault_sync_log(d, &log);
		ck_assert_uint_ge(n, 2);
		/* Sorted by return: sync 2 (failed) first, then sync 1. */
		ck_assert_int_eq(log[0].err, EIO);
		ck_assert_int_eq(log[1].err, 0);
		ck_assert_msg(a->rx_ns >= log[1].end_ns,
			      "the reply came %.1f ms before the sync that covered it returned",
			      (log[1].end_ns - a->rx_ns) / 1e6);
		du_note("sync 2 failed at %.1f ms, sync 1 returned at %.1f ms, its reply at %.1f ms",
			(log[0].end_ns - t0) / 1e6, (log[1].end_ns - t0) / 1e6,
			(a->rx_ns - t0) / 1e6);
		free(log);
	}
	du_expect_error(b, false, 0, BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE);
	du_fault_sync(d, 0, 0);
	du_conn_free(b);
	du_conn_free(a);
	du_daemon_free(d);
}

START_TEST(test_sync_error_first_of_two)
{
	sync_error_in_flight(true);
}
END_TEST

START_TEST(test_sync_error_second_of_two)
{
	sync_error_in_flight(false);
}
END_TEST

/*
 * Group commit gathers (--fsync=batch, daemon/journal.c): a few records
 * written just after a big sync began wait before a sync of their own,
 * and not for all of it.  Eight syncs of T (100 ms, scaled) teach the
 * daemon what a sync takes (a moving average: some 0.66 T by then); then
 * 32 named Schedules in one write start sync A, made to take 4 T (a load:
 * BWD_SYNC_GATHER_MIN records or more), and one on another connection
 * T/10 later is a thirty-second of A: its
 * sync begins once A has run about as long as syncs take (0.66 T, checked
 * at over T/3 after A began), not at once (a sync of one record, then
 * another...), and before A is done (A is late, and the lone record need
 * not wait for the rest of it); its reply comes after its own sync
 * returned.
 */
START_TEST(test_sync_gather)
{
	enum { TRAIN = 8, N = 32, TRIES = 3 };
	struct du_daemon *d;
	struct du_sync_step plan[TRAIN + 2];
	struct du_sync_call *log = NULL, *a = NULL, *b = NULL;
	struct du_buf buf = { 0 };
	struct du_conn *c, *lone;
	unsigned t_ms = (unsigned)du_scale_ms(100), tries = 0, split;
	uint64_t t = (uint64_t)t_ms * DU_MS, t0, sent_lone, key = 0;
	size_t n;

	/* Valgrind's daemon takes more than a turn (BWD_TURN_NS) over the
	 * burst, which then never makes one sync. */
	if (du_skip_if_wrapped("test_sync_gather", "the burst spans several turns"))
		return;
	for (unsigned i = 0; i < TRAIN; i++)
		plan[i] = (struct du_sync_step){ t_ms, 0 };
	plan[TRAIN] = (struct du_sync_step){ 4 * t_ms, 0 };
	plan[TRAIN + 1] = (struct du_sync_step){ 0, 0 };
	d = du_daemon_new();
	du_fault_sync(d, 0, 0);
	start_durable(d, "--fsync=batch");
	c = du_open(d, "gather-a");
	lone = du_open(d, "gather-b");
	/* The burst must be read in one turn to make one sync; a preempted
	 * turn splits it, and the round is run again, a bounded number of
	 * times. */
	do {
		ck_assert_msg(tries++ < TRIES, "the burst of %d made more than one sync in each of %d rounds",
			      N, TRIES);
		free(log);
		a = b = NULL;
		du_buf_free(&buf);
		du_fault_sync_plan(d, plan, TRAIN + 2);
		for (unsigned i = 0; i < TRAIN; i++) {
			struct du_sched s = { .key = ++key, .when = DU_DELAY, .when_ns = 3600 * DU_S };

			du_send_schedule(c, key, &s);
			bwp_frame_free(du_expect_reply(c, key, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY));
		}
		for (unsigned i = 0; i < N; i++) {
			struct du_sched s = { .key = ++key, .when = DU_DELAY, .when_ns = 3600 * DU_S };

			du_pack_schedule(&buf, key, &s);
		}
		t0 = du_now_ns();
		du_send_buf(c, &buf);
		du_sleep_ms(t_ms / 10);
		{
			struct du_sched s = { .key = ++key, .when = DU_DELAY, .when_ns = 3600 * DU_S };

			sent_lone = du_now_ns();
			du_send_schedule(lone, key, &s);
		}
		bwp_frame_free(du_expect_reply(lone, key, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY));
		for (unsigned i = 0; i < N; i++)
			bwp_frame_free(du_expect_reply(c, key - N + i,
						       BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY));
		n = du_fault_sync_log(d, &log);
		/* A: the first sync to begin after the burst; B: the next. */
		split = 0;
		for (size_t i = 0; i < n; i++) {
			if (log[i].begin_ns >= t0 && log[i].begin_ns < sent_lone)
				split++;
			if (log[i].begin_ns >= t0 && (!a || log[i].begin_ns < a->begin_ns))
				a = &log[i];
		}
		if (split > 1)
			du_note("test_sync_gather: round %u: the burst made %u syncs: again", tries, split);
	} while (split > 1);
	ck_assert_ptr_nonnull(a);
	for (size_t i = 0; i < n; i++)
		if (log[i].begin_ns > a->begin_ns && (!b || log[i].begin_ns < b->begin_ns))
			b = &log[i];
	ck_assert_ptr_nonnull(b);
	du_note("syncs of %u ms, then one of %u ms: the lone record's sync began %.1f ms after it (the lone Schedule %.1f ms after it), A returned after %.1f ms, the lone reply after %.1f ms",
		t_ms, 4 * t_ms, (b->begin_ns - a->begin_ns) / 1e6,
		(sent_lone - a->begin_ns) / 1e6, (a->end_ns - a->begin_ns) / 1e6,
		(lone->rx_ns - a->begin_ns) / 1e6);
	ck_assert_msg(b->begin_ns >= a->begin_ns + t / 3,
		      "a sync of one record began %.1f ms after a sync of %d in flight, which syncs of %u ms had taught to gather for",
		      (b->begin_ns - a->begin_ns) / 1e6, N, t_ms);
	ck_assert_msg(b->begin_ns < a->end_ns,
		      "the lone record's sync began only once the late sync of %d was done (%.1f ms)",
		      N, (a->end_ns - a->begin_ns) / 1e6);
	ck_assert_msg(lone->rx_ns >= b->end_ns,
		      "the lone reply came %.1f ms before its sync returned",
		      (b->end_ns - lone->rx_ns) / 1e6);
	free(log);
	du_buf_free(&buf);
	du_fault_sync(d, 0, 0);
	du_conn_free(lone);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ---- files --------------------------------------------------------------- */

/* Where test_torn_tail cuts after cut, in a last record from first to
 * len: at every byte; under the wrapper (valgrind), whose daemons take
 * seconds to start, at every byte of the header and the last two of the
 * body only, the same paths through recovery. */
static size_t next_cut(size_t cut, size_t first, size_t len)
{
	if (!du_wrapped() || cut < first + RECORD_HEADER || cut + 2 >= len)
		return cut + 1;
	return len - 1;
}

/* Truncate the journal at every byte of its last record: recovery keeps
 * the records before it, names the offset, and serves.  Before that, the
 * journal as the kill left it, zeros of its room after the records. */
START_TEST(test_torn_tail)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	char path[200];
	size_t len, end, off[64], n;
	unsigned cuts = 0;
	uint8_t *journal;
	uint64_t far = du_now_ns() + 3600 * DU_S;

	start_durable(d, NULL);
	c = du_open(d, "t");
	for (uint64_t k = 1; k <= 5; k++)
		schedule_at(c, 1 + k, k, far + k, 0);
	du_conn_free(c);
	du_daemon_kill(d);
	state_path(d, "journal.0000000000000000", path, sizeof(path));
	journal = read_whole(path, &len);
	/* SESSION, then TIMER 1..5 */
	n = record_offsets(journal, len, off, 64);
	ck_assert_uint_eq(n, 6);
	/* As the kill left it, with the room allocated after the records
	 * (journal.c): the end, not a torn record. */
	end = off[n - 1] + RECORD_HEADER + le32(journal + off[n - 1]);
	du_note("journal: %zu bytes of records, %zu of room after them", end, len - end);
	ck_assert_uint_gt(len, end);
	{
		long long unwritten = unwritten_bytes(path);

		ck_assert_msg(unwritten <= 0,
			      "%lld bytes of the journal's room are unwritten extents", unwritten);
	}
	start_durable(d, NULL);
	c = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(c, "t", NULL, NULL), 5);
	{
		char *log = du_daemon_log(d);

		ck_assert_msg(!strstr(log, "torn") && !strstr(log, "corrupt"),
			      "the room after the records read as a record: %s", tail(log));
		free(log);
	}
	du_conn_free(c);
	du_daemon_kill(d);
	len = end;
	for (size_t cut = off[n - 1]; cut <= len; cut = next_cut(cut, off[n - 1], len)) {
		char *log, want[96];
		size_t seen;
		bool resumed;

		cuts++;
		clear_state(d);
		write_whole(path, journal, cut);
		log = du_daemon_log(d);
		seen = strlen(log);
		free(log);
		start_durable(d, NULL);
		c = du_connect(d->sock);
		ck_assert_uint_eq(hello_timers(c, "t", &resumed, NULL), cut == len ? 5 : 4);
		ck_assert(resumed);
		/* This start's lines only: the log file is appended to. */
		log = du_daemon_log(d);
		ck_assert_uint_ge(strlen(log), seen);
		snprintf(want, sizeof(want), "record at offset %zu is torn", off[n - 1]);
		if (cut > off[n - 1] && cut < len)
			ck_assert_msg(strstr(log + seen, want), "cut at %zu: log: %s", cut,
				      tail(log));
		else
			ck_assert_msg(!strstr(log + seen, "torn"), "cut at %zu: log: %s", cut,
				      tail(log));
		free(log);
		if (cut == off[n - 1] + 3) {
			/* Exactly the keys before the torn one. */
			for (uint64_t k = 1; k <= 5; k++)
				ck_assert(du_cancel(c, 10 + k, k) == (k < 5));
		}
		du_conn_free(c);
		du_daemon_kill(d);
	}
	du_note("journal of %zu bytes cut at %u of the %zu offsets of its last record",
		len, cuts, len - off[n - 1] + 1);
	free(journal);
	du_daemon_free(d);
}
END_TEST

/* Wait for the snapshot a recovery writes. */
static void wait_snapshot(const struct du_daemon *d)
{
	char path[200];
	struct stat sb;

	state_path(d, "snapshot", path, sizeof(path));
	for (int i = 0; i < DU_WAIT_MS / 10; i++) {
		if (stat(path, &sb) == 0)
			return;
		du_sleep_ms(10);
	}
	ck_abort_msg("no snapshot in %s after %d ms", path, DU_WAIT_MS);
}

START_TEST(test_corrupt_snapshot)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	char path[200], dir[160], *log;
	uint8_t *buf;
	size_t len;
	uint64_t far = du_now_ns() + 3600 * DU_S;
	const char *argv[] = { DU_DAEMON_PATH, "--socket", d->sock, "--state-dir",
			       dir, NULL };

	state_path(d, NULL, dir, sizeof(dir));
	start_durable(d, NULL);
	c = du_open(d, "x");
	schedule_at(c, 2, 1, far, 0);
	du_conn_free(c);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	/* The restart replays the journal into a snapshot. */
	start_durable(d, NULL);
	wait_snapshot(d);
	c = du_open(d, "x");
	schedule_at(c, 2, 2, far, 0);
	du_conn_free(c);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);

	state_path(d, "snapshot", path, sizeof(path));
	buf = read_whole(path, &len);
	buf[FILE_HEADER + RECORD_HEADER + 3] ^= 0x40;
	write_whole(path, buf, len);
	free(buf);
	du_daemon_spawn(d, argv);
	ck_assert(du_daemon_wait_exit(d, DU_WAIT_MS));
	du_assert_exit(d, d->status, 1);
	log = du_daemon_log(d);
	ck_assert_msg(strstr(log, "/snapshot is damaged") && strstr(log, "--ignore-snapshot"),
		      "log: %s", tail(log));
	free(log);

	/* From the journal after the snapshot alone: key 2, not key 1. */
	start_durable(d, "--ignore-snapshot");
	c = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(c, "x", NULL, NULL), 1);
	ck_assert(!du_cancel(c, 3, 1));
	ck_assert(du_cancel(c, 4, 2));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ---- shutdown ------------------------------------------------------------ */

/*
 * Two clients, one named session and one anonymous, pipeline schedules
 * (deadlines 0..2 s ahead) until SIGTERM comes at a random moment; each
 * reads to the end.  Every key whose ScheduleReply came back either fired
 * or is in the log: "pending" (a timer) or "undelivered" (a queued fire).
 */
START_TEST(test_sigterm_reports_pending)
{
	enum { KEYS = 4000 };
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c[2];
	bool *acked[2], *fired[2];
	uint64_t seed = test_seed(), sent[2] = { 0, 0 }, reported = 0, got = 0, n_acked = 0;
	struct tu_rng rng;
	uint64_t stop_at;
	char *log;

	tu_rng_seed(&rng, seed);
	du_daemon_start(d, "-v", (const char *)NULL);
	c[0] = du_open(d, "shut");
	c[1] = du_open(d, NULL);
	for (int i = 0; i < 2; i++) {
		acked[i] = calloc(KEYS, sizeof(bool));
		fired[i] = calloc(KEYS, sizeof(bool));
		ck_assert(acked[i] && fired[i]);
	}
	stop_at = du_now_ns() + tu_rng_range(&rng, 100, 400) * DU_MS;
	while (du_now_ns() < stop_at && sent[0] < KEYS) {
		for (int i = 0; i < 2; i++) {
			struct du_buf b = { 0 };

			for (int k = 0; k < 20 && sent[i] < KEYS; k++, sent[i]++) {
				struct du_sched sc = { .key = sent[i], .when = DU_DELAY,
						       .when_ns = tu_rng_range(&rng, 0, 2000) * DU_MS };

				du_pack_schedule(&b, 1 + sent[i], &sc);
			}
			du_send_buf(c[i], &b);
			du_buf_free(&b);
		}
		du_sleep_ms(5);
	}
	ck_assert_int_eq(kill(d->pid, SIGTERM), 0);
	for (int i = 0; i < 2; i++) {
		du_env *e;

		while (du_recv(c[i], DU_WAIT_MS, &e) == DU_FRAME) {
			if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY) {
				ck_assert_uint_ge(e->request_id, 1);
				acked[i][e->request_id - 1] = true;
			} else if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED) {
				ck_assert_uint_lt(e->fired->key, KEYS);
				fired[i][e->fired->key] = true;
			}
			bwp_frame_free(e);
		}
	}
	du_assert_exit(d, du_daemon_stop(d, 0, DU_WAIT_MS), 0);
	log = du_daemon_log(d);
	for (int i = 0; i < 2; i++) {
		for (uint64_t k = 0; k < KEYS; k++) {
			char pending[64], undelivered[64];

			if (!acked[i][k])
				continue;
			n_acked++;
			if (fired[i][k]) {
				got++;
				continue;
			}
			snprintf(pending, sizeof(pending), "pending: key %" PRIu64 " ", k);
			snprintf(undelivered, sizeof(undelivered), "undelivered: key %" PRIu64 " ", k);
			ck_assert_msg(strstr(log, pending) || strstr(log, undelivered),
				      "%s session: key %" PRIu64 " acknowledged, neither fired nor in the shutdown log: %s",
				      i ? "anonymous" : "named", k, tail(log));
			reported++;
		}
	}
	ck_assert_msg(strstr(log, "stopping: session 'shut'") || reported == 0 || got == n_acked,
		      "no notice for the named session: %s", tail(log));
	du_note("SIGTERM under load: %" PRIu64 " acknowledged timers, %" PRIu64 " fired, %" PRIu64 " named in the shutdown log",
		n_acked, got, reported);
	ck_assert_uint_gt(reported, 0);
	free(log);
	for (int i = 0; i < 2; i++) {
		du_conn_free(c[i]);
		free(acked[i]);
		free(fired[i]);
	}
	du_daemon_free(d);
}
END_TEST

/*
 * Session names are per uid, in the journal too: "ns" of uid 0 and "ns"
 * of uid 65534 (created by root through owner_uid) each keep their own
 * timer across a SIGKILL.
 */
START_TEST(test_restart_namespaces)
{
	static const struct du_hello_opts other = {
		.role = BITWHEEL__V1__ROLE__PRODUCER, .has_owner_uid = true,
		.owner_uid = 65534,
	};
	struct du_daemon *d;
	struct du_conn *c;
	du_env *e;

	if (geteuid() != 0) {
		du_note("SKIP: test_restart_namespaces needs root (to name uid 65534's namespace)");
		return;
	}
	d = du_daemon_new();
	start_durable(d, "--fsync=never");
	c = du_open(d, "ns");
	schedule_at(c, 2, 1, du_now_ns() + 3600 * DU_S, 0);
	du_conn_free(c);
	c = du_open_opts(d, "ns", &other);
	schedule_at(c, 2, 2, du_now_ns() + 3600 * DU_S, 0);
	schedule_at(c, 3, 3, du_now_ns() + 3600 * DU_S, 0);
	du_conn_free(c);
	du_daemon_kill(d);
	start_durable(d, "--fsync=never");
	c = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(c, "ns", NULL, NULL), 1);
	ck_assert(du_cancel(c, 3, 1));
	du_conn_free(c);
	c = du_connect(d->sock);
	e = du_hello_opts(c, "ns", &other);
	ck_assert(e->hello_reply->resumed);
	ck_assert_uint_eq(e->hello_reply->owner_uid, 65534);
	ck_assert_uint_eq(e->hello_reply->timers, 2);
	bwp_frame_free(e);
	ck_assert(!du_cancel(c, 4, 1));
	ck_assert(du_cancel(c, 5, 2));
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

#define NACKS 50
#define NACKED 25

/*
 * Acknowledgements are journaled (PROTOCOL.md 8): a consumer acknowledges
 * half of 50 fires - 20 with one cumulative Ack, 5 one by one - each
 * with a request_id, so that its AckReply means durable; the daemon is
 * SIGKILLed and restarted; the next consumer gets exactly the other 25,
 * each marked redelivered (they had been in flight), and none of the
 * acknowledged ones.  Once more after a second SIGKILL with nothing
 * acknowledged: the same 25, and only they.
 */
START_TEST(test_acks_survive_crash)
{
	static const struct du_hello_opts consumer = { .role = BITWHEEL__V1__ROLE__CONSUMER,
						       .has_window = true, .window = NACKS };
	struct du_daemon *d = du_daemon_new();
	struct du_conn *p, *c;
	uint64_t key_of[NACKS + 1], queued, t0;
	bool acked[NACKS] = { false };
	du_env *e;

	start_durable(d, "--fsync=never");
	p = du_open_producer(d, "acks");
	c = du_open_opts(d, "acks", &consumer);
	t0 = du_now_ns();
	for (uint64_t k = 0; k < NACKS; k++)
		schedule_at(p, 2 + k, k, t0 + 20 * DU_MS, 0);
	for (uint64_t n = 1; n <= NACKS; n++) {
		du_env *f = du_expect_fire(c, DU_WAIT_MS, NULL);

		ck_assert_uint_eq(f->fired->delivery, n);
		ck_assert(!f->fired->redelivered);
		key_of[n] = f->fired->key;
		bwp_frame_free(f);
	}
	ck_assert_uint_eq(du_ack(c, 100, 20, true), 20);
	for (uint64_t n = 21; n <= NACKED; n++)
		ck_assert_uint_eq(du_ack(c, 100 + n, n, false), 1);
	for (uint64_t n = 1; n <= NACKED; n++)
		acked[key_of[n]] = true;
	du_conn_free(c);
	du_conn_free(p);

	for (int round = 0; round < 2; round++) {
		bool seen[NACKS] = { false };

		du_daemon_kill(d);
		start_durable(d, "--fsync=never");
		c = du_connect(d->sock);
		e = du_hello_opts(c, "acks", &consumer);
		queued = e->hello_reply->queued;
		ck_assert_uint_eq(e->hello_reply->timers, 0);
		bwp_frame_free(e);
		ck_assert_uint_eq(queued, NACKS - NACKED);
		for (int n = 0; n < NACKS - NACKED; n++) {
			du_env *f = du_expect_fire(c, DU_WAIT_MS, NULL);
			uint64_t k = f->fired->key;

			ck_assert_msg(k < NACKS && !acked[k],
				      "round %d: key %" PRIu64 " came back after its Ack was answered",
				      round, k);
			ck_assert_msg(!seen[k], "round %d: key %" PRIu64 " twice", round, k);
			ck_assert_msg(f->fired->redelivered, "round %d: key %" PRIu64
				      " had been in flight: it must come marked", round, k);
			seen[k] = true;
			bwp_frame_free(f);
		}
		du_expect_quiet(c, 100);
		/* Not acknowledged: the next round gets them again. */
		du_conn_free(c);
	}
	du_daemon_free(d);
}
END_TEST

#define NFLIGHT 10
#define NFLIGHT_ACKED 3

/* The generation a state file's header names (after its 8-byte magic);
 * false when the file is not there (yet). */
static bool file_generation(const struct du_daemon *d, const char *file,
			    uint64_t *gen)
{
	char path[200];
	uint8_t *buf;
	size_t len;

	state_path(d, file, path, sizeof(path));
	if (access(path, F_OK) != 0)
		return false;
	buf = read_whole(path, &len);
	ck_assert_uint_ge(len, FILE_HEADER);
	*gen = le64(buf + 8);
	free(buf);
	return true;
}

/* The lowest and highest generation of the journals in d's state
 * directory (UINT64_MAX and 0 without any). */
static void journal_range(const struct du_daemon *d, uint64_t *lo, uint64_t *hi)
{
	char dir[160];
	DIR *dp;
	struct dirent *e;

	state_path(d, NULL, dir, sizeof(dir));
	dp = opendir(dir);
	ck_assert_msg(dp != NULL, "%s: %s", dir, strerror(errno));
	*lo = UINT64_MAX;
	*hi = 0;
	while ((e = readdir(dp)) != NULL) {
		uint64_t g;

		if (strncmp(e->d_name, "journal.", 8) != 0)
			continue;
		g = strtoull(e->d_name + 8, NULL, 16);
		*lo = g < *lo ? g : *lo;
		*hi = g > *hi ? g : *hi;
	}
	closedir(dp);
}

/*
 * A snapshot holds the fires in flight: a consumer is sent 10 fires and
 * acknowledges 3 (with request_id, so durably); a snapshot is then
 * written while the other 7 are in flight to it (--snapshot-interval 1s),
 * and the journals that held their records are removed by it.  After a
 * SIGKILL and a restart from that snapshot, the 7 come again, marked
 * redelivered, and none of the 3.
 */
START_TEST(test_snapshot_in_flight)
{
	struct du_daemon *d = du_daemon_new();
	const struct du_hello_opts consumer = du_consumer_opts(NFLIGHT, 0);
	struct du_conn *p, *c;
	uint64_t key_of[NFLIGHT + 1], t0, lo, hi, top, snap = 0, id = 100;
	bool acked[NFLIGHT] = { false }, seen[NFLIGHT] = { false };
	char dir[160];
	du_env *e;

	state_path(d, NULL, dir, sizeof(dir));
	du_daemon_start(d, "--state-dir", dir, "--snapshot-interval", "1s",
			"--snapshot-min-interval", "0s", "-v", (const char *)NULL);
	p = du_open_producer(d, "flight");
	c = du_open_opts(d, "flight", &consumer);
	t0 = du_now_ns();
	for (uint64_t k = 0; k < NFLIGHT; k++)
		schedule_at(p, 2 + k, k, t0 + 20 * DU_MS, 0);
	for (uint64_t n = 1; n <= NFLIGHT; n++) {
		du_env *f = du_expect_fire(c, DU_WAIT_MS, NULL);

		ck_assert_uint_eq(f->fired->delivery, n);
		key_of[n] = f->fired->key;
		bwp_frame_free(f);
	}
	for (uint64_t n = 1; n <= NFLIGHT_ACKED; n++) {
		ck_assert_uint_eq(du_ack(c, id++, n, false), 1);
		acked[key_of[n]] = true;
	}
	/* Everything so far is in journal hi or before it; a change makes
	 * the next snapshot due, and one of a later generation began after
	 * all of the above. */
	journal_range(d, &lo, &hi);
	schedule_at(p, id++, 100, t0 + 3600 * DU_S, 0);
	for (uint64_t end = du_now_ns() + (uint64_t)DU_WAIT_MS * DU_MS;;) {
		if (file_generation(d, "snapshot", &snap) && snap > hi) {
			/* Renamed into place first, the journals it holds
			 * removed after. */
			journal_range(d, &lo, &top);
			if (lo >= snap)
				break;
		}
		if (du_now_ns() >= end) {
			char *log = du_daemon_log(d);

			ck_abort_msg("no snapshot after journal %" PRIu64 " within %d ms (snapshot %" PRIu64 "); log: %s",
				     hi, DU_WAIT_MS, snap, tail(log));
		}
		/* A loop turn, in which a due snapshot starts. */
		bwp_frame_free(du_stats(p, id++));
		du_sleep_ms(50);
	}
	du_note("snapshot before journal %" PRIu64 " written with %d fires in flight",
		snap, NFLIGHT - NFLIGHT_ACKED);
	du_daemon_kill(d);
	du_conn_free(c);
	du_conn_free(p);

	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
	c = du_connect(d->sock);
	e = du_hello_opts(c, "flight", &consumer);
	ck_assert_msg(e->hello_reply->queued == NFLIGHT - NFLIGHT_ACKED,
		      "restarted from a snapshot written with %d fires in flight: %" PRIu64 " queued",
		      NFLIGHT - NFLIGHT_ACKED, e->hello_reply->queued);
	ck_assert_uint_eq(e->hello_reply->timers, 1);
	bwp_frame_free(e);
	for (int n = 0; n < NFLIGHT - NFLIGHT_ACKED; n++) {
		du_env *f = du_expect_fire(c, DU_WAIT_MS, NULL);
		uint64_t k = f->fired->key;

		ck_assert_msg(k < NFLIGHT && !acked[k] && !seen[k],
			      "key %" PRIu64 ": acknowledged, repeated or unknown", k);
		ck_assert_msg(f->fired->redelivered, "key %" PRIu64 " had been in flight: it must come marked", k);
		seen[k] = true;
		bwp_frame_free(f);
	}
	du_expect_quiet(c, 100);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ---- crash --------------------------------------------------------------- */

#define SESSIONS 3
#define ROUNDS 5
#define MAX_TIMERS 20000

enum tstate { T_SENT, T_ACKED, T_REFUSED, T_CANCEL_SENT, T_CANCELLED };

/* The kinds a crash round schedules: oneshot and periodic on
 * CLOCK_MONOTONIC, a oneshot at a wall-clock instant, a calendar timer. */
enum tkind { K_MONO, K_WALL, K_CAL };

struct ctimer {
	uint64_t key, deadline, period, cancel_rx;
	uint64_t sent;             /* K_CAL: when its Schedule left          */
	uint64_t last_due;         /* K_CAL: the last unmarked elapse fired   */
	enum tstate st;
	enum tkind kind;
	unsigned fires, marked;    /* copies received, of them redelivered */
	uint64_t last_count;
	bool cancel_pending;
};

struct crash {
	struct du_daemon *d;
	struct du_conn *c[SESSIONS];
	struct ctimer t[SESSIONS][MAX_TIMERS];
	size_t n[SESSIONS];
	/* request id -> timer index; cancels have bit 62 set */
	uint64_t next_id;
	struct tu_rng rng;
	/* the last delivery received on each session's connection, and the
	 * last acknowledged: everything received is acknowledged at once */
	uint64_t delivered[SESSIONS], acked[SESSIONS];
	uint64_t fires, redelivered, late, cal_fires;
	uint64_t worst;            /* unmarked fires' latest, in the daemon  */
	/* CLOCK_REALTIME - CLOCK_MONOTONIC at the start, which places the
	 * wall-clock timers' instants; their fires' arrivals are read on
	 * the wall clock itself, which need not keep the monotonic one's
	 * rate. */
	int64_t real_off;
	size_t cals[SESSIONS];     /* calendar timers scheduled              */
	/* periodic counts seen, per timer: a small bitmap of counts */
	uint64_t *counts[SESSIONS];
};

#define CANCEL_BIT (UINT64_C(1) << 62)
/* Fires queue while a session waits for its connection across a restart:
 * room for all of them, so that none is dropped (HelloReply.dropped is
 * checked), however slow the daemon (valgrind) comes back. */
#define CRASH_QUEUE "--max-queued=1000000"
#define COUNTS 64
/* Calendar timers per session: each fires every second to the end. */
#define CAL_TIMERS 3

static struct ctimer *by_key(struct crash *x, int s, uint64_t key)
{
	return key < x->n[s] ? &x->t[s][key] : NULL;
}

static void on_frame(struct crash *x, int s, du_env *e, uint64_t rx,
		     uint64_t rx_real)
{
	struct ctimer *t;
	uint64_t idx;

	if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED) {
		const Bitwheel__V1__Fired *f = e->fired;
		uint64_t *bits;

		t = by_key(x, s, f->key);
		ck_assert_msg(t, "session %d: fire for unknown key %" PRIu64, s, f->key);
		ck_assert_uint_eq(f->delivery, x->delivered[s] + 1);
		x->delivered[s] = f->delivery;
		ck_assert_msg(t->st != T_REFUSED, "a refused timer fired");
		/* A fire that happened before the Cancel may still be on its way
		 * behind the reply (PROTOCOL.md 5.5): none fired after it. */
		ck_assert_msg(!(t->st == T_CANCELLED && t->cancel_pending &&
				f->fired_at_ns > t->cancel_rx),
			      "key %" PRIu64 " fired %.3f ms after its cancel was acknowledged",
			      f->key, (double)(f->fired_at_ns - t->cancel_rx) / 1e6);
		ck_assert_uint_ge(f->fired_at_ns, f->deadline_ns);
		ck_assert_uint_ge(rx, f->deadline_ns);
		if (t->kind != K_MONO)
			ck_assert_msg(f->has_due_realtime_ns && rx_real >= f->due_realtime_ns,
				      "key %" PRIu64 " arrived %.3f ms before its wall-clock instant",
				      f->key, ((double)f->due_realtime_ns - (double)rx_real) / 1e6);
		x->fires++;
		x->redelivered += f->redelivered;
		x->late += f->late;
		/* The overload bound of check_daemon's test_slow_consumer, three
		 * margins: a restart (recovery, the snapshot's fork) comes every
		 * few hundred milliseconds here, beside another suite. */
		if (!f->late && !f->redelivered) {
			uint64_t late = f->fired_at_ns - f->deadline_ns;

			ck_assert_msg(late <= (t->period ? PERIODIC_RES : ONESHOT_RES) +
					      3 * du_margin_ns(),
				      "key %" PRIu64 " fired %.3f ms late, unmarked", f->key,
				      (double)late / 1e6);
			if (late > x->worst)
				x->worst = late;
		}
		if (t->kind == K_CAL) {
			/* "*:*:0/1": whole seconds, each at most once unmarked,
			 * in order; missed ones (downtime) coalesce, so gaps
			 * are allowed. */
			ck_assert_uint_eq(f->due_realtime_ns % 1000000000u, 0);
			x->cal_fires++;
			if (!f->redelivered) {
				ck_assert_msg(f->due_realtime_ns > t->last_due,
					      "calendar key %" PRIu64 ": elapse %" PRIu64
					      " after %" PRIu64 ", unmarked", f->key,
					      f->due_realtime_ns, t->last_due);
				t->last_due = f->due_realtime_ns;
			}
			t->fires++;
			return;
		}
		if (!t->period) {
			t->fires++;
			t->marked += f->redelivered;
			ck_assert_msg(t->fires - t->marked <= 1,
				      "key %" PRIu64 " fired twice, unmarked", f->key);
			return;
		}
		ck_assert_uint_ge(f->fire_count, 1);
		ck_assert_uint_lt(f->fire_count, COUNTS);
		ck_assert_uint_eq((f->deadline_ns - t->deadline) % t->period, 0);
		bits = &x->counts[s][f->key];
		ck_assert_msg(f->redelivered || !(*bits & (UINT64_C(1) << f->fire_count)),
			      "periodic key %" PRIu64 " fire %" PRIu64 " twice, unmarked",
			      f->key, f->fire_count);
		*bits |= UINT64_C(1) << f->fire_count;
		return;
	}
	ck_assert(e->has_request_id);
	idx = e->request_id & ~CANCEL_BIT;
	t = by_key(x, s, idx);
	ck_assert(t);
	if (e->request_id & CANCEL_BIT) {
		ck_assert_int_eq(e->body_case, BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY);
		t->st = T_CANCELLED;
		t->cancel_pending = e->cancel_reply->pending;
		t->cancel_rx = rx;
		return;
	}
	if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR) {
		t->st = T_REFUSED;
		return;
	}
	ck_assert_int_eq(e->body_case, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY);
	t->deadline = e->schedule_reply->deadline_ns;
	if (t->st == T_SENT)
		t->st = T_ACKED;
}

/* Everything that has arrived; until EOF when the daemon is gone. */
static void pump(struct crash *x, int timeout_ms)
{
	for (int s = 0; s < SESSIONS; s++) {
		du_env *e;
		int rc;

		while (x->c[s] && (rc = du_recv(x->c[s], timeout_ms, &e)) == DU_FRAME) {
			on_frame(x, s, e, x->c[s]->rx_ns, x->c[s]->rx_real_ns);
			bwp_frame_free(e);
			timeout_ms = 0;
		}
		/* Handled: one cumulative Ack for the lot, without a reply. */
		if (x->c[s] && x->delivered[s] > x->acked[s]) {
			du_send_ack(x->c[s], false, 0, x->delivered[s], true);
			x->acked[s] = x->delivered[s];
		}
	}
}

static void open_sessions(struct crash *x)
{
	for (int s = 0; s < SESSIONS; s++) {
		char name[16];
		du_env *r;

		static const struct du_hello_opts consumer = {
			.role = BITWHEEL__V1__ROLE__CONSUMER, .has_window = true,
			.window = 4096,
		};
		struct du_buf b = { 0 };

		snprintf(name, sizeof(name), "crash%d", s);
		x->c[s] = du_connect(x->d->sock);
		x->delivered[s] = x->acked[s] = 0;
		du_pack_hello_opts(&b, CANCEL_BIT | (CANCEL_BIT >> 1), name, &consumer);
		du_send_buf(x->c[s], &b);
		du_buf_free(&b);
		r = du_expect_reply(x->c[s], CANCEL_BIT | (CANCEL_BIT >> 1),
				    BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY);
		ck_assert_uint_eq(r->hello_reply->dropped, 0);
		bwp_frame_free(r);
	}
}

/* One batch per session: a few schedules and a cancel or two. */
static void send_batch(struct crash *x, uint64_t now)
{
	for (int s = 0; s < SESSIONS; s++) {
		struct du_buf b = { 0 };

		for (int i = 0; i < 8 && x->n[s] < MAX_TIMERS; i++) {
			struct ctimer *t = &x->t[s][x->n[s]];
			struct du_sched sc = { .key = x->n[s], .when = DU_DEADLINE };

			*t = (struct ctimer){ .key = x->n[s], .st = T_SENT };
			sc.when_ns = t->deadline = now + tu_rng_range(&x->rng, 20, 1200) * DU_MS;
			if (x->cals[s] < CAL_TIMERS && tu_rng_chance(&x->rng, 2000)) {
				t->kind = K_CAL;
				t->sent = now;
				sc.when = DU_CALENDAR;
				sc.calendar = "*:*:0/1";
				sc.leeway = true;  /* the oneshots' lane and bound */
				x->cals[s]++;
			} else if (tu_rng_chance(&x->rng, 100000)) {
				t->kind = K_WALL;
				sc.when = DU_REALTIME;
				sc.when_ns = (uint64_t)((int64_t)t->deadline + x->real_off);
			} else if (tu_rng_chance(&x->rng, 50000)) {
				sc.periodic = true;
				sc.period_ns = t->period = tu_rng_range(&x->rng, 2, 4) * 100 * DU_MS;
			}
			du_pack_schedule(&b, x->n[s], &sc);
			x->n[s]++;
		}
		for (int i = 0; i < 2; i++) {
			uint64_t k = tu_rng_below(&x->rng, x->n[s]);
			struct ctimer *t = &x->t[s][k];

			if (t->st != T_ACKED)
				continue;
			t->st = T_CANCEL_SENT;
			du_pack_cancel(&b, CANCEL_BIT | k, k);
		}
		if (du_conn_send_bytes(x->c[s], b.data, b.len, DU_WAIT_MS) == 0)
			b.len = 0;
		du_buf_free(&b);
	}
}

/* Periodic and calendar timers that are still armed get cancelled at the
 * end. */
static void cancel_periodic(struct crash *x)
{
	for (int s = 0; s < SESSIONS; s++) {
		for (size_t k = 0; k < x->n[s]; k++) {
			struct ctimer *t = &x->t[s][k];

			if ((t->period || t->kind == K_CAL) &&
			    (t->st == T_ACKED || t->st == T_SENT)) {
				t->st = T_CANCEL_SENT;
				du_send_cancel(x->c[s], CANCEL_BIT | k, k);
			}
		}
	}
}

/* Acknowledged oneshot timers not yet fired. */
static size_t unfired(const struct crash *x)
{
	size_t n = 0;

	for (int s = 0; s < SESSIONS; s++)
		for (size_t k = 0; k < x->n[s]; k++)
			n += x->t[s][k].st == T_ACKED && !x->t[s][k].period &&
			     x->t[s][k].kind != K_CAL && !x->t[s][k].fires;
	return n;
}

START_TEST(test_crash_rounds)
{
	struct crash *x = calloc(1, sizeof(*x));
	uint64_t seed = test_seed(), end, acked = 0, cancelled = 0, unknown = 0;

	ck_assert_ptr_nonnull(x);
	tu_rng_seed(&x->rng, seed);
	x->real_off = (int64_t)du_realtime_ns() - (int64_t)du_now_ns();
	for (int s = 0; s < SESSIONS; s++) {
		x->counts[s] = calloc(MAX_TIMERS, sizeof(uint64_t));
		ck_assert_ptr_nonnull(x->counts[s]);
	}
	x->d = du_daemon_new();
	start_durable(x->d, CRASH_QUEUE);
	open_sessions(x);
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t kill_at = du_now_ns() + tu_rng_range(&x->rng, 100, 600) * DU_MS;

		while (du_now_ns() < kill_at) {
			send_batch(x, du_now_ns());
			pump(x, 2);
		}
		du_daemon_kill(x->d);
		/* What the daemon wrote before it died is still in the
		 * sockets: read to the end. */
		for (int s = 0; s < SESSIONS; s++) {
			du_env *e;

			while (du_recv(x->c[s], DU_WAIT_MS, &e) == DU_FRAME) {
				on_frame(x, s, e, x->c[s]->rx_ns, x->c[s]->rx_real_ns);
				bwp_frame_free(e);
			}
			du_conn_free(x->c[s]);
			x->c[s] = NULL;
		}
		du_sleep_ms((unsigned)tu_rng_range(&x->rng, 0, 300));
		start_durable(x->d, CRASH_QUEUE);
		open_sessions(x);
	}
	cancel_periodic(x);
	/* The last deadlines are 1.2 s away; a slowed daemon gets longer. */
	end = du_now_ns() + (uint64_t)du_scale_ms(1500) * DU_MS;
	while (du_now_ns() < end && unfired(x))
		pump(x, 50);
	pump(x, 100);
	for (int s = 0; s < SESSIONS; s++) {
		for (size_t k = 0; k < x->n[s]; k++) {
			struct ctimer *t = &x->t[s][k];

			if (t->kind == K_CAL) {
				/* Pending for two seconds or more: an elapse
				 * came, on time or caught up after a restart. */
				ck_assert_msg(t->st != T_CANCELLED || !t->cancel_pending ||
					      t->fires >= 1 ||
					      t->cancel_rx < t->sent + (uint64_t)du_scale_ms(2000) * DU_MS,
					      "session %d calendar key %zu: pending %.0f ms, never fired",
					      s, k, (double)(t->cancel_rx - t->sent) / 1e6);
			} else if (t->st == T_ACKED && !t->period) {
				acked++;
				ck_assert_msg(t->fires >= 1, "session %d key %zu: acknowledged, never fired (deadline %" PRIu64 ")",
					      s, k, t->deadline);
			} else if (t->st == T_CANCELLED && t->cancel_pending) {
				cancelled++;
				ck_assert_msg(t->fires == 0, "session %d key %zu: cancelled yet fired", s, k);
			} else if (t->st == T_CANCELLED && !t->period) {
				/* Not pending any more: its fire came before the
				 * reply, on the same connection or from the queue. */
				ck_assert_msg(t->fires >= 1, "session %d key %zu: cancel found it gone, but it never fired",
					      s, k);
			} else if (t->st == T_SENT || t->st == T_CANCEL_SENT) {
				/* The reply was lost with the daemon: either way,
				 * at most once (checked as fires came). */
				unknown++;
			}
			if (t->period && t->st == T_CANCELLED) {
				/* Counts 1..max, none missing. */
				uint64_t bits = x->counts[s][k];

				ck_assert_msg((bits & (bits + 2)) == 0 || bits == 0,
					      "periodic key %zu: fire counts %#" PRIx64 " have a gap",
					      k, bits);
			}
		}
	}
	du_note("%d rounds of SIGKILL: %" PRIu64 " acknowledged oneshot timers all fired, none twice unmarked; %" PRIu64 " cancelled never fired, %" PRIu64 " unanswered at a kill; %" PRIu64 " fires (%" PRIu64 " late, %" PRIu64 " marked redelivered, %" PRIu64 " of calendar timers), the latest unmarked %.2f ms after its deadline",
		ROUNDS, acked, cancelled, unknown, x->fires, x->late, x->redelivered,
		x->cal_fires, (double)x->worst / 1e6);
	ck_assert_uint_gt(acked, 100);
	for (int s = 0; s < SESSIONS; s++) {
		du_conn_free(x->c[s]);
		free(x->counts[s]);
	}
	du_daemon_free(x->d);
	free(x);
}
END_TEST

/* ---- paths --------------------------------------------------------------- */

#define NOBODY 65534

/* Run a daemon on dir that must refuse it: exit 1 within the wait (a
 * hang fails here); its log, which the caller frees. */
static char *refused(struct du_daemon *d, const char *dir)
{
	const char *argv[] = { DU_DAEMON_PATH, "--socket", d->sock, "--state-dir",
			       dir, NULL };
	uint64_t t0 = du_now_ns();
	char *log;

	du_daemon_spawn(d, argv);
	ck_assert_msg(du_daemon_wait_exit(d, DU_WAIT_MS),
		      "the daemon did not exit within %d ms (hung on %s?)", DU_WAIT_MS, dir);
	log = du_daemon_log(d);
	ck_assert_msg(WIFEXITED(d->status) && WEXITSTATUS(d->status) == 1,
		      "status 0x%x, not exit 1; log: %s", (unsigned)d->status, tail(log));
	du_note("refused in %.1f ms", (double)(du_now_ns() - t0) / 1e6);
	return log;
}

static void expect_refused(struct du_daemon *d, const char *dir, const char *want)
{
	char *log = refused(d, dir);
	struct stat st;

	ck_assert_msg(strstr(log, want) != NULL, "no \"%s\" in the log: %s", want,
		      tail(log));
	ck_assert_msg(stat(d->sock, &st) != 0, "a refused daemon left its socket");
	free(log);
}

static bool need_root(const char *test)
{
	if (geteuid() == 0)
		return true;
	du_note("SKIP: %s needs root (to chown to uid %d)", test, NOBODY);
	return false;
}

/* A state directory of another uid is refused, naming it and the fix. */
START_TEST(test_state_dir_other_owner)
{
	struct du_daemon *d;
	char dir[160], want[400];

	if (!need_root("test_state_dir_other_owner"))
		return;
	d = du_daemon_new();
	clear_state(d);
	state_path(d, NULL, dir, sizeof(dir));
	ck_assert_int_eq(chown(dir, NOBODY, NOBODY), 0);
	snprintf(want, sizeof(want),
		 "%s: owned by uid %d, not by the daemon's uid %u or root; chown it or choose another --state-dir",
		 dir, NOBODY, (unsigned)geteuid());
	expect_refused(d, dir, want);
	du_daemon_free(d);
}
END_TEST

/* Group- or world-writable: refused; 0700 again: serves. */
START_TEST(test_state_dir_writable)
{
	static const struct { mode_t mode; const char *who; } cases[] = {
		{ 0770, "writable by its group (mode 0770)" },
		{ 0707, "writable by others (mode 0707)" },
		{ 01777, "writable by others (mode 1777)" },
	};
	struct du_daemon *d = du_daemon_new();
	char dir[160];

	clear_state(d);
	state_path(d, NULL, dir, sizeof(dir));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(chmod(dir, cases[i].mode), 0);
		expect_refused(d, dir, cases[i].who);
	}
	ck_assert_int_eq(chmod(dir, 0700), 0);
	start_durable(d, NULL);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* A symbolic link named lock is refused, and what it points to is never
 * created. */
START_TEST(test_lock_symlink)
{
	struct du_daemon *d = du_daemon_new();
	char dir[160], lock[200], target[200];
	struct stat st;

	clear_state(d);
	state_path(d, NULL, dir, sizeof(dir));
	state_path(d, "lock", lock, sizeof(lock));
	snprintf(target, sizeof(target), "%s/planted", d->dir);
	ck_assert_int_eq(symlink(target, lock), 0);
	expect_refused(d, dir, "/lock: a symbolic link, not a regular file; remove it");
	ck_assert_msg(lstat(target, &st) != 0 && errno == ENOENT,
		      "the daemon created %s through the link", target);
	du_daemon_free(d);
}
END_TEST

/* A FIFO named snapshot is refused at once, not read (which would hang);
 * so is a directory named like a journal. */
START_TEST(test_snapshot_fifo)
{
	struct du_daemon *d = du_daemon_new();
	char dir[160], path[200];

	clear_state(d);
	state_path(d, NULL, dir, sizeof(dir));
	state_path(d, "snapshot", path, sizeof(path));
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	expect_refused(d, dir, "/snapshot: a FIFO, not a regular file; remove it");
	/* --ignore-snapshot does not read it, and refuses it all the same. */
	clear_state(d);
	state_path(d, "journal.0000000000000000", path, sizeof(path));
	ck_assert_int_eq(mkdir(path, 0700), 0);
	expect_refused(d, dir, "/journal.0000000000000000: a directory, not a regular file");
	du_daemon_free(d);
}
END_TEST

/* A journal (valid CRCs and all) owned by another uid is refused: whoever
 * wrote it could plant any session. */
START_TEST(test_journal_other_owner)
{
	struct du_daemon *d;
	char dir[160], path[200], want[300];
	struct du_conn *c;

	if (!need_root("test_journal_other_owner"))
		return;
	d = du_daemon_new();
	start_durable(d, NULL);
	c = du_open(d, "paths");
	schedule_at(c, 2, 1, du_now_ns() + 3600 * DU_S, 0);
	du_conn_free(c);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	state_path(d, NULL, dir, sizeof(dir));
	state_path(d, "journal.0000000000000000", path, sizeof(path));
	ck_assert_msg(chown(path, NOBODY, NOBODY) == 0, "%s: %s", path, strerror(errno));
	snprintf(want, sizeof(want), "%s: owned by uid %d, not by the daemon's uid %u or root",
		 path, NOBODY, (unsigned)geteuid());
	expect_refused(d, dir, want);
	/* Group-writable, though ours: refused too. */
	ck_assert_int_eq(chown(path, 0, 0), 0);
	ck_assert_int_eq(chmod(path, 0620), 0);
	expect_refused(d, dir, "journal.0000000000000000: writable by its group (mode 0620)");
	ck_assert_int_eq(chmod(path, 0600), 0);
	start_durable(d, NULL);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* A state directory reached through a symbolic link (systemd's
 * DynamicUser= makes /var/lib/bitwheel one) is used when root or we own
 * the link in a directory nobody else may write; not in one others may. */
START_TEST(test_state_dir_symlink)
{
	struct du_daemon *d = du_daemon_new();
	char real[160], link[160], pub[160], publink[200];

	clear_state(d);
	state_path(d, NULL, real, sizeof(real));
	snprintf(link, sizeof(link), "%s/state-link", d->dir);
	ck_assert_int_eq(symlink(real, link), 0);
	{
		const char *extra[] = { "--state-dir", link, NULL };

		du_daemon_startv(d, extra);
	}
	du_assert_serving(d);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	snprintf(pub, sizeof(pub), "%s/pub", d->dir);
	ck_assert_int_eq(mkdir(pub, 0700), 0);
	ck_assert_int_eq(chmod(pub, 0777), 0);
	snprintf(publink, sizeof(publink), "%s/state-link", pub);
	ck_assert_int_eq(symlink(real, publink), 0);
	expect_refused(d, publink, "which others may write (mode 0777)");
	du_daemon_free(d);
}
END_TEST

static Suite *durable_suite(void)
{
	Suite *s = suite_create("durable");
	TCase *tc;

	tc = tcase_create("restart");
	du_tcase(tc);
	tcase_add_test(tc, test_restart_sigterm);
	tcase_add_test(tc, test_restart_sigkill);
	tcase_add_test(tc, test_restart_within_deadline);
	tcase_add_test(tc, test_restart_keeps_queue);
	tcase_add_test(tc, test_acks_survive_crash);
	tcase_add_test(tc, test_snapshot_in_flight);
	tcase_add_test(tc, test_restart_namespaces);
	tcase_add_test(tc, test_restart_other_boot);
	tcase_add_test(tc, test_no_state_dir_says_so);
	tcase_add_test(tc, test_state_dir_locked);
	suite_add_tcase(s, tc);

	tc = tcase_create("introspection");
	du_tcase(tc);
	tcase_add_test(tc, test_restart_listed);
	suite_add_tcase(s, tc);

	tc = tcase_create("sync");
	du_tcase(tc);
	tcase_add_test(tc, test_reply_after_sync_batch);
	tcase_add_test(tc, test_reply_after_sync_always);
	tcase_add_test(tc, test_sync_per_turn_batch);
	tcase_add_test(tc, test_sync_per_turn_always);
	tcase_add_test(tc, test_sync_overlap);
	tcase_add_test(tc, test_sync_error_first_of_two);
	tcase_add_test(tc, test_sync_error_second_of_two);
	tcase_add_test(tc, test_sync_gather);
	suite_add_tcase(s, tc);

	tc = tcase_create("files");
	du_tcase(tc);
	tcase_add_test(tc, test_torn_tail);
	tcase_add_test(tc, test_corrupt_snapshot);
	suite_add_tcase(s, tc);

	tc = tcase_create("shutdown");
	du_tcase(tc);
	tcase_add_test(tc, test_sigterm_reports_pending);
	suite_add_tcase(s, tc);

	tc = tcase_create("crash");
	du_tcase(tc);
	tcase_add_test(tc, test_crash_rounds);
	suite_add_tcase(s, tc);

	tc = tcase_create("paths");
	du_tcase(tc);
	tcase_add_test(tc, test_state_dir_other_owner);
	tcase_add_test(tc, test_state_dir_writable);
	tcase_add_test(tc, test_lock_symlink);
	tcase_add_test(tc, test_snapshot_fifo);
	tcase_add_test(tc, test_journal_other_owner);
	tcase_add_test(tc, test_state_dir_symlink);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(durable_suite());
}
