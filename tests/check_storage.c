/*
 * check_storage.c - bitwheeld on a state directory that cannot be written:
 * a full file system, a file size limit or a disk whose syncs fail, on
 * real daemons.
 *
 * The fault: a small tmpfs mounted in a mount namespace of the test's own
 * (unshare(2); the mount goes with the test and its daemon, whatever
 * happens to them), filled by a file of the test's, beside the state
 * directory, and freed by removing that file.  Where mounting is not
 * permitted, RLIMIT_FSIZE set on the running daemon (prlimit(2)) below
 * its journal's size and raised again to free it: a write then fails with
 * EFBIG, which the daemon must live through (it ignores SIGXFSZ).  The
 * "fsize" tests take that way on purpose, so that both are run.
 * test_sync_eio makes every fdatasync(2) of the daemon fail with EIO, as
 * a failing disk does after a write went into the page cache
 * (tests/faultsync.c under the daemon, du_fault_sync): the writes
 * succeed, the sync that would make them durable does not.
 *
 * The daemon's reserve (store.c) ends an outage on a full file system by
 * itself; the tests that need one to last empty the reserve first
 * (fault_on_for_good), as if others had filled the file system before it
 * was made.
 *
 * TCases:
 *   storage   a journal write or sync that fails: the daemon does not
 *             exit; the reply to the Schedule it failed on is held, and
 *             5 s into the outage dropped, the connection answered
 *             STORAGE_UNAVAILABLE (no request_id) and closed; named
 *             Schedules, Cancels and the Hello of a new named session are
 *             refused with STORAGE_UNAVAILABLE, while a Hello that resumes
 *             a session, anonymous sessions and Stats work; one log line
 *             at the fault and one at recovery, STATUS= naming the fault
 *             meanwhile; tries that fail leave the files as they were;
 *             after space returns changes are accepted, and after a kill
 *             -9 and a restart every timer acknowledged before, during
 *             (the dropped reply's) and after the fault is pending.  A
 *             consumer while it is down: an Ack with request_id refused,
 *             a fire still sent to a connection that holds nothing, an Ack
 *             without request_id taken in memory, and both fires again
 *             after a kill -9.  A daemon started on a full file system
 *             takes its journal's room from its reserve and accepts
 *             changes; without one it serves (READY=1), leaves the files
 *             it recovered from as they were, and recovers once space
 *             returns.
 *   policy    a replace loop of one key with a payload writes snapshots of
 *             at most the journal's bytes / --snapshot-growth, and at most
 *             one per --snapshot-min-interval.
 *   share     a uid (65534) whose named sessions added --max-journal-per-uid
 *             bytes to the journal gets OVER_BUDGET for Schedules and new
 *             named sessions (Cancels and anonymous sessions still work)
 *             until a snapshot starts a new journal; another uid (65533)
 *             and root are unaffected.  The same uid past its share by
 *             fire records alone (FIRE, SENT, DONE of a periodic timer):
 *             its fires stop coming, Release, Kick and SetPolicy are
 *             OVER_BUDGET, an Ack is taken, and the next snapshot gives
 *             the share and the fires back.
 *   flood     the attacker (uid 65534), a named consumer whose periodic
 *             timers make fire records (FIRE, SENT, DONE) at its whole
 *             periodic rate, some 1.2 MB/s; the victim (uid 65533), a
 *             named consumer scheduling a timer every 10 ms.  Against a
 *             512 KiB share on a 6 MiB tmpfs: the victim's every request
 *             is accepted, every fire comes, the storage never goes down.
 *             With a share of 1 GiB on 3 MiB: the file system fills and
 *             the storage goes down; the victim is answered within 5 s
 *             throughout (accepted or STORAGE_UNAVAILABLE), gets every
 *             fire, and the storage comes back without anything freed;
 *             after a kill -9 every far timer it had accepted is there.
 *             Both need root and a tmpfs (skipped otherwise).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemonutil.h"
#include "testutil.h"

#define PAYLOAD 8000u          /* bigger than a page: a write needs a new one */
#define KEPT 10u               /* timers acknowledged before the fault   */
#define FSIZE_LIMIT (64u << 10) /* below the journal's KEPT payloads      */
#define FAR_NS (3600 * DU_S)   /* deadlines that do not come in a test   */

enum fault_kind { FAULT_TMPFS, FAULT_FSIZE, FAULT_EIO };

struct fault {
	enum fault_kind kind;
	char fs[96];               /* the tmpfs (the state directory's parent) */
	char state[128];           /* --state-dir                            */
	char filler[128];
	const char *fsync;         /* --fsync=POLICY; NULL: the default      */
};

/* ---- the fault ------------------------------------------------------------ */

/* A tmpfs of mib MiB at d->dir/fs in a mount namespace of the test's
 * own, the state directory in it; false when mounting is not permitted
 * here. */
static bool sized_fs(struct du_daemon *d, struct fault *f, unsigned mib)
{
	char opts[64];

	f->kind = FAULT_TMPFS;
	snprintf(f->fs, sizeof(f->fs), "%s/fs", d->dir);
	snprintf(f->state, sizeof(f->state), "%s/state", f->fs);
	snprintf(f->filler, sizeof(f->filler), "%s/filler", f->fs);
	ck_assert_int_eq(mkdir(f->fs, 0700), 0);
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    (snprintf(opts, sizeof(opts), "size=%um,mode=0700", mib),
	     mount("tmpfs", f->fs, "tmpfs", 0, opts)) < 0) {
		du_note("cannot mount a tmpfs (%s): RLIMIT_FSIZE instead", strerror(errno));
		return false;
	}
	ck_assert_int_eq(mkdir(f->state, 0700), 0);
	return true;
}

static bool small_fs(struct du_daemon *d, struct fault *f)
{
	return sized_fs(d, f, 2);
}

static void fault_setup(struct du_daemon *d, struct fault *f, enum fault_kind want)
{
	f->fsync = NULL;
	if (want == FAULT_TMPFS && small_fs(d, f))
		return;
	f->kind = want == FAULT_EIO ? FAULT_EIO : FAULT_FSIZE;
	snprintf(f->state, sizeof(f->state), "%s/state", d->dir);
	/* Preloaded from the start, failing only once fault_on says. */
	if (f->kind == FAULT_EIO)
		du_fault_sync(d, 0, 0);
}

static void set_fsize(pid_t pid, rlim_t soft)
{
	struct rlimit rl;

	ck_assert_int_eq(prlimit(pid, RLIMIT_FSIZE, NULL, &rl), 0);
	rl.rlim_cur = soft;
	ck_assert_msg(prlimit(pid, RLIMIT_FSIZE, &rl, NULL) == 0, "prlimit: %s",
		      strerror(errno));
}

/* Fill the tmpfs to the last page, or limit the daemon's file size. */
static void fault_on(struct du_daemon *d, struct fault *f)
{
	static char chunk[4096];
	uint64_t n = 0;
	int fd;

	if (f->kind == FAULT_FSIZE) {
		set_fsize(d->pid, FSIZE_LIMIT);
		return;
	}
	if (f->kind == FAULT_EIO) {
		du_fault_sync(d, 0, EIO);
		return;
	}
	fd = open(f->filler, O_WRONLY | O_CREAT | O_APPEND, 0600);
	ck_assert_msg(fd >= 0, "%s: %s", f->filler, strerror(errno));
	for (;;) {
		ssize_t w = write(fd, chunk, sizeof(chunk));

		if (w < 0) {
			ck_assert_msg(errno == ENOSPC, "filling: %s", strerror(errno));
			break;
		}
		n += (uint64_t)w;
	}
	close(fd);
	du_note("filled the tmpfs with %" PRIu64 " bytes", n);
}

/* The same with the daemon's reserve emptied first (as if others had
 * filled the file system before it was made): the outage then lasts
 * until space returns. */
static void fault_on_for_good(struct du_daemon *d, struct fault *f)
{
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s/reserve", f->state);
	fd = open(path, O_WRONLY | O_NOFOLLOW);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	close(fd);
	fault_on(d, f);
}

static void fault_off(struct du_daemon *d, struct fault *f)
{
	if (f->kind == FAULT_FSIZE)
		set_fsize(d->pid, RLIM_INFINITY);
	else if (f->kind == FAULT_EIO)
		du_fault_sync(d, 0, 0);
	else
		ck_assert_int_eq(unlink(f->filler), 0);
}

/* The daemon and its directory, the tmpfs unmounted first (in our own
 * namespace, where du_daemon_free removes the directory). */
static void fault_free(struct du_daemon *d, struct fault *f)
{
	du_daemon_kill(d);
	if (f->kind == FAULT_TMPFS && getenv("BW_TEST_SHOW_LOG")) {
		char *log = du_daemon_log(d);

		du_note("%s", log);
		free(log);
	}
	if (f->kind == FAULT_TMPFS)
		ck_assert_msg(umount2(f->fs, MNT_DETACH) == 0, "umount %s: %s",
			      f->fs, strerror(errno));
	du_daemon_free(d);
}

static void start(struct du_daemon *d, const struct fault *f)
{
	du_daemon_start(d, "--state-dir", f->state, "--max-payload", "8192", "-v",
			f->fsync, (const char *)NULL);
}

/* ---- waiting ---------------------------------------------------------------- */

/*
 * Take the daemon's notifications (STATUS= every 5 s): the kernel queues
 * at most 10 datagrams (net.unix.max_dgram_qlen), after which sd_notify
 * blocks the daemon until they are read.  du_recv() reads them as it
 * waits; the sleeps here, long under valgrind, do too.
 */
static void drain_notes(const struct du_daemon *d)
{
	du_daemon_wait_notify((struct du_daemon *)d, "READY=1", 0);
}

static void sleep_draining(const struct du_daemon *d, int ms)
{
	for (uint64_t end = du_now_ns() + (uint64_t)ms * DU_MS; du_now_ns() < end;) {
		drain_notes(d);
		du_sleep_ms(200);
	}
}

/* ---- requests --------------------------------------------------------------- */

static const uint8_t payload[PAYLOAD];

static struct du_sched far_timer(uint64_t key)
{
	return (struct du_sched){ .key = key, .when = DU_DELAY, .when_ns = FAR_NS,
				  .payload = payload, .payload_len = PAYLOAD };
}

static void schedule_ok(struct du_conn *c, uint64_t id, uint64_t key)
{
	struct du_sched s = far_timer(key);

	bwp_frame_free(du_schedule(c, id, &s));
}

static void schedule_refused(struct du_conn *c, uint64_t id, uint64_t key)
{
	struct du_sched s = far_timer(key);

	du_send_schedule(c, id, &s);
	du_expect_error(c, true, id, BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE);
}

/* Hello to session "keep": its pending timers. */
static uint64_t hello_timers(struct du_conn *c)
{
	du_env *r = du_hello(c, "keep");
	uint64_t n = r->hello_reply->timers;

	bwp_frame_free(r);
	return n;
}

/* An anonymous session still gets its fires, and Stats its answer. */
static void anonymous_works(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, NULL);
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = 20 * DU_MS };
	du_env *e;

	bwp_frame_free(du_schedule(c, 2, &s));
	e = du_expect_fire(c, DU_WAIT_MS, NULL);
	ck_assert_uint_eq(e->fired->key, 1);
	bwp_frame_free(e);
	bwp_frame_free(du_stats(c, 3));
	du_conn_free(c);
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void assert_log_count(const struct du_daemon *d, const char *what, size_t want)
{
	char *log = du_daemon_log(d);
	size_t n = count(log, what);

	ck_assert_msg(n == want, "'%s' logged %zu times, not %zu:\n%s", what, n,
		      want, log);
	free(log);
}

/* How long a reply held for the storage is seen not to come: 500 ms (more
 * under BW_TEST_SLOW), but less than the 5 s after which the daemon drops
 * what it held (BWD_HELD_DOWN_NS), whatever the slowness. */
static int held_wait_ms(void)
{
	int ms = du_scale_ms(500);

	return ms < 3000 ? ms : 3000;
}

#define DOWN_LINE "are refused (STORAGE_UNAVAILABLE)"
#define UP_LINE "changes to named sessions are accepted again"

/* Long enough for the retries (1 s doubling to 10 s) to see space again. */
static int recovery_wait_ms(void)
{
	return du_scale_ms(30000);
}

/* Every key in keys is pending in "keep" after a kill -9 and a restart. */
static void assert_kept_after_crash(struct du_daemon *d, const struct fault *f,
				    const uint64_t *keys, size_t n)
{
	struct du_conn *c;

	du_daemon_kill(d);
	start(d, f);
	c = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(c), n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(du_cancel(c, 100 + i, keys[i]), "key %" PRIu64 " lost",
			      keys[i]);
	du_conn_free(c);
}

/* ---- tests ------------------------------------------------------------------ */

/* Names and sizes of the state directory's files but the lock. */
static void listing(const char *dir, char *out, size_t len)
{
	char cmd[256];
	FILE *p;
	size_t n;

	snprintf(cmd, sizeof(cmd), "cd '%s' && stat -c '%%n %%s' * | grep -v '^lock '", dir);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	pclose(p);
}

/* The listing once it stayed the same over a pause (100 ms scaled: 2 s
 * under valgrind), at most 10 tries: a try of the storage at work creates
 * the next journal and removes it when its write fails, and that moment is
 * not the directory's state. */
static void settled_listing(const char *dir, char *out, size_t len)
{
	char again[512];

	ck_assert_uint_le(len, sizeof(again));
	listing(dir, out, len);
	for (int i = 0; i < 10; i++) {
		du_sleep_ms((unsigned)du_scale_ms(100));
		listing(dir, again, len);
		if (!strcmp(out, again))
			return;
		memcpy(out, again, len);
	}
}


static void refuses_then_recovers(enum fault_kind kind, const char *fsync)
{
	struct du_daemon *d = du_daemon_new();
	struct fault f;
	struct du_conn *held, *p, *q;
	uint64_t keys[KEPT + 2];
	char before[512], after[512];
	du_env *e;
	int rc;

	fault_setup(d, &f, kind);
	f.fsync = fsync;
	start(d, &f);
	held = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(held), 0);
	for (unsigned i = 0; i < KEPT; i++)
		schedule_ok(held, 10 + i, keys[i] = 1000 + i);
	if (f.kind == FAULT_TMPFS)
		fault_on_for_good(d, &f);
	else
		fault_on(d, &f);

	/* The write of this one fails: its reply must not come. */
	{
		struct du_sched s = far_timer(keys[KEPT] = 2000);

		du_send_schedule(held, 50, &s);
		rc = du_recv(held, held_wait_ms(), &e);
		ck_assert_msg(rc == DU_TIMEOUT, "a reply to a Schedule that cannot be journaled: %s",
			      rc == DU_FRAME ? du_describe(e, (char[160]){ 0 }, 160) : "closed");
	}
	ck_assert(!du_daemon_exited(d));

	p = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(p), KEPT + 1);
	schedule_refused(p, 2, 3000);
	du_send_cancel(p, 3, 1000);
	du_expect_error(p, true, 3, BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE);
	schedule_refused(p, 4, 3001);
	q = du_connect(d->sock);
	du_send_hello(q, 1, "new-session");
	du_expect_error(q, true, 1, BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE);
	du_conn_free(q);
	anonymous_works(d);
	bwp_frame_free(du_fresh_stats(d));
	ck_assert(!du_daemon_exited(d));
	assert_log_count(d, DOWN_LINE, 1);
	/* The one line names the call that failed, and why. */
	assert_log_count(d, f.kind == FAULT_EIO ? "fdatasync: Input/output error" :
			 f.kind == FAULT_FSIZE ? "write: File too large" :
			 "write: No space left on device", 1);
	/* Tries that fail (at 1 s and 3 s) leave the files as they were (a
	 * try may be at work at a given moment, never for long).  The tries
	 * keep the daemon's clock, however slow the daemon: only the margin
	 * after them scales. */
	settled_listing(f.state, before, sizeof(before));
	sleep_draining(d, 3000 + du_scale_ms(500));
	settled_listing(f.state, after, sizeof(after));
	ck_assert_str_eq(before, after);
	ck_assert(!du_daemon_exited(d));
	assert_log_count(d, DOWN_LINE, 1);
	/* systemctl status says so too (STATUS= every 5 s). */
	for (uint64_t t0 = du_now_ns();
	     !d->notes || !strstr(d->notes, "state directory not writable");) {
		ck_assert_msg(du_now_ns() - t0 < (uint64_t)du_scale_ms(7000) * DU_MS,
			      "no STATUS= naming the fault:\n%s", d->notes ? d->notes : "");
		sleep_draining(d, 200);
	}
	{
		char *log = du_daemon_log(d);

		ck_assert_msg(count(log, "snapshot: cannot start journal") +
			      count(log, "snapshot: the writer failed") >= 2,
			      "fewer than 2 tries logged:\n%s", log);
		free(log);
	}

	/* What was held for the storage is not held for as long as the
	 * outage lasts: the connection is answered STORAGE_UNAVAILABLE and
	 * closed (BWD_HELD_DOWN_NS, seen at a retry), its Schedule's
	 * outcome unknown to it but kept by the daemon. */
	du_expect_error(held, false, 0, BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE);
	du_expect_eof(held, DU_WAIT_MS);

	fault_off(d, &f);
	for (uint64_t t0 = du_now_ns(), id = 5;; id++) {
		struct du_sched s = far_timer(keys[KEPT + 1] = 4000);

		ck_assert_msg(du_now_ns() - t0 < (uint64_t)recovery_wait_ms() * DU_MS,
			      "still refused after space returned");
		du_send_schedule(p, id, &s);
		ck_assert_int_eq(du_recv(p, DU_WAIT_MS, &e), DU_FRAME);
		if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY) {
			bwp_frame_free(e);
			break;
		}
		ck_assert_int_eq(e->error->code, BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE);
		bwp_frame_free(e);
		sleep_draining(d, 200);
	}
	assert_log_count(d, DOWN_LINE, 1);
	assert_log_count(d, UP_LINE, 1);
	du_conn_free(held);
	du_conn_free(p);
	assert_kept_after_crash(d, &f, keys, KEPT + 2);
	fault_free(d, &f);
}

START_TEST(test_full_disk)
{
	refuses_then_recovers(FAULT_TMPFS, NULL);
}
END_TEST

START_TEST(test_fsize)
{
	refuses_then_recovers(FAULT_FSIZE, NULL);
}
END_TEST

/* The same with the journal's writes going through and its fdatasync
 * failing (EIO): the sync's error is the write's, whether the sync
 * thread (batch) or the loop (always) ran it. */
START_TEST(test_sync_eio)
{
	refuses_then_recovers(FAULT_EIO, NULL);
}
END_TEST

START_TEST(test_sync_eio_always)
{
	refuses_then_recovers(FAULT_EIO, "--fsync=always");
}
END_TEST

/* The key of the next fire on c, and its delivery number. */
static uint64_t next_fire(struct du_conn *c, uint64_t *delivery, bool *redelivered)
{
	du_env *e = du_expect_fire(c, DU_WAIT_MS, NULL);
	uint64_t key = e->fired->key;

	*delivery = e->fired->delivery;
	if (redelivered)
		*redelivered = e->fired->redelivered;
	bwp_frame_free(e);
	return key;
}

/*
 * A consumer while the storage is down: an Ack with request_id is refused
 * (its fire stays in flight), a fire that comes due still reaches a
 * connection that holds nothing, and an Ack without request_id is taken
 * in memory; after a kill -9 both fires come again: nothing the daemon
 * could not keep was reported kept.
 */
START_TEST(test_down_consumer)
{
	static const struct du_hello_opts manual = {
		.role = BITWHEEL__V1__ROLE__CONSUMER, .has_auto_ack = true,
	};
	static const struct du_hello_opts producer = {
		.role = BITWHEEL__V1__ROLE__PRODUCER,
	};
	struct du_daemon *d = du_daemon_new();
	struct fault f;
	struct du_conn *c, *p;
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = 0 };
	uint64_t delivery, got = 0;
	bool again;
	du_env *e;

	fault_setup(d, &f, FAULT_TMPFS);
	if (f.kind != FAULT_TMPFS) {
		/* A journal this small never reaches a file size limit. */
		du_note("SKIP test_down_consumer: needs a tmpfs (mount not permitted)");
		du_daemon_free(d);
		return;
	}
	start(d, &f);
	c = du_open_opts(d, "acks", &manual);
	p = du_open_opts(d, "acks", &producer);
	bwp_frame_free(du_schedule(p, 2, &s));
	ck_assert_uint_eq(next_fire(c, &delivery, NULL), 1);
	ck_assert_uint_eq(delivery, 1);
	s = (struct du_sched){ .key = 2, .when = DU_DELAY,
			       .when_ns = (uint64_t)du_scale_ms(2000) * DU_MS };
	bwp_frame_free(du_schedule(p, 3, &s));
	fault_on_for_good(d, &f);
	s = far_timer(3);
	du_send_schedule(p, 4, &s);
	ck_assert_int_eq(du_recv(p, held_wait_ms(), &e), DU_TIMEOUT);

	du_send_ack(c, true, 7, 1, false);
	du_expect_error(c, true, 7, BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE);
	ck_assert_int_eq(du_recv(c, DU_WAIT_MS, &e), DU_FRAME);
	ck_assert_msg(e->body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED &&
		      e->fired->key == 2, "%s", du_describe(e, (char[160]){ 0 }, 160));
	delivery = e->fired->delivery;
	bwp_frame_free(e);
	du_send_ack(c, false, 0, delivery, false);
	du_conn_free(c);
	du_conn_free(p);

	du_daemon_kill(d);
	fault_off(d, &f);
	start(d, &f);
	c = du_open_opts(d, "acks", &manual);
	for (int i = 0; i < 2; i++) {
		uint64_t key = next_fire(c, &delivery, &again);

		/* Key 1 was handed out before: a possible repeat. */
		ck_assert(key == 1 || key == 2);
		ck_assert(key != 1 || again);
		got |= 1u << key;
	}
	ck_assert_uint_eq(got, 6);
	du_conn_free(c);
	fault_free(d, &f);
}
END_TEST

START_TEST(test_start_full)
{
	struct du_daemon *d = du_daemon_new();
	struct fault f;
	struct du_conn *c;
	char before[512], after[512];
	uint64_t keys[KEPT + 2];
	bool up = false;

	fault_setup(d, &f, FAULT_TMPFS);
	if (f.kind != FAULT_TMPFS) {
		du_note("SKIP test_start_full: needs a tmpfs (mount not permitted)");
		du_daemon_free(d);
		return;
	}
	start(d, &f);
	c = du_connect(d->sock);
	hello_timers(c);
	for (unsigned i = 0; i < KEPT; i++)
		schedule_ok(c, 10 + i, keys[i] = 1000 + i);
	du_conn_free(c);
	du_daemon_kill(d);
	fault_on(d, &f);

	/* Its reserve is room enough to start in: a journal, and the
	 * snapshot of what it recovered. */
	start(d, &f);
	c = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(c), KEPT);
	schedule_ok(c, 2, keys[KEPT] = 3000);
	du_conn_free(c);
	assert_log_count(d, DOWN_LINE, 0);
	du_daemon_kill(d);

	/* Without it (emptied, the file system filled again), it starts
	 * down, leaving the files as they were. */
	fault_on_for_good(d, &f);
	listing(f.state, before, sizeof(before));
	start(d, &f);
	c = du_connect(d->sock);
	ck_assert_uint_eq(hello_timers(c), KEPT + 1);
	schedule_refused(c, 2, 3000);
	anonymous_works(d);
	assert_log_count(d, DOWN_LINE, 1);
	settled_listing(f.state, after, sizeof(after));
	ck_assert_str_eq(before, after);

	fault_off(d, &f);
	for (uint64_t t0 = du_now_ns(), id = 10; !up; id++) {
		struct du_sched s = far_timer(keys[KEPT + 1] = 4000);
		du_env *e;

		ck_assert_msg(du_now_ns() - t0 < (uint64_t)recovery_wait_ms() * DU_MS,
			      "still refused after space returned");
		du_send_schedule(c, id, &s);
		ck_assert_int_eq(du_recv(c, DU_WAIT_MS, &e), DU_FRAME);
		up = e->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY;
		if (!up) {
			ck_assert_int_eq(e->error->code,
					 BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE);
			sleep_draining(d, 200);
		}
		bwp_frame_free(e);
	}
	assert_log_count(d, UP_LINE, 1);
	du_conn_free(c);
	assert_kept_after_crash(d, &f, keys, KEPT + 2);
	fault_free(d, &f);
}
END_TEST

/* ---- the snapshot policy ------------------------------------------------------ */

#define BIG_TIMERS 100u         /* the state every snapshot writes out    */
#define REPLACES 2000u
#define GROWTH 2u
#define MIN_INTERVAL_S 1u

/* Every "snapshot ... written: N bytes" line of the log: how many, and
 * their bytes. */
static void snapshots_written(const struct du_daemon *d, uint64_t *n,
			      uint64_t *bytes)
{
	char *log = du_daemon_log(d);
	const char *p = log;

	*n = *bytes = 0;
	while ((p = strstr(p, " written: "))) {
		unsigned long long b;

		if (sscanf(p, " written: %llu bytes", &b) == 1) {
			(*n)++;
			*bytes += b;
		}
		p++;
	}
	free(log);
}

/* A replace loop on one key makes journal bytes, not snapshots: with the
 * state at S bytes, a snapshot waits for GROWTH x S of journal and for
 * MIN_INTERVAL_S, so the snapshots written come to at most the journal's
 * bytes / GROWTH, plus the first (S at most), plus the one at the end. */
START_TEST(test_replace_loop)
{
	struct du_daemon *d = du_daemon_new();
	char dir[160], growth[16], min[16];
	struct du_conn *big, *churn;
	struct du_buf b = { 0 };
	uint64_t t0, elapsed, n, bytes, journal, bound, state;

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	snprintf(growth, sizeof(growth), "%u", GROWTH);
	snprintf(min, sizeof(min), "%us", MIN_INTERVAL_S);
	du_daemon_start(d, "--state-dir", dir, "--max-payload", "8192",
			"--journal-max", "65536", "--snapshot-growth", growth,
			"--snapshot-min-interval", min, "--max-journal-per-uid", "64M",
			(const char *)NULL);
	big = du_open(d, "big");
	for (unsigned i = 0; i < BIG_TIMERS; i++)
		schedule_ok(big, 10 + i, i);
	churn = du_open(d, "churn");
	t0 = du_now_ns();
	for (uint64_t i = 0; i < REPLACES; i++) {
		struct du_sched s = far_timer(1);

		s.replace = true;
		du_pack_schedule(&b, 10 + i, &s);
		if (i % 50 == 49 || i + 1 == REPLACES) {
			du_send_buf(churn, &b);
			for (uint64_t k = i - i % 50; k <= i; k++)
				bwp_frame_free(du_expect_reply(churn, 10 + k,
					BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY));
		}
		/* Rounds over a few min-intervals, so that time allows
		 * snapshots and only the growth rule holds them back. */
		if (i % (REPLACES / 4) == REPLACES / 4 - 1)
			du_sleep_ms(600);
	}
	elapsed = du_now_ns() - t0;
	/* Any snapshot begun by now is written soon after. */
	sleep_draining(d, du_scale_ms(1500));
	du_buf_free(&b);
	snapshots_written(d, &n, &bytes);
	state = (BIG_TIMERS + 1) * (PAYLOAD + 64);
	journal = (BIG_TIMERS + REPLACES) * (PAYLOAD + 64);
	bound = journal / GROWTH + 2 * state;
	du_note("replace loop: %u replaces of %u bytes in %.1f s, about %" PRIu64 " journal bytes; %" PRIu64 " snapshots, %" PRIu64 " bytes (bound %" PRIu64 ")",
		REPLACES, PAYLOAD, (double)elapsed / 1e9, journal, n, bytes, bound);
	ck_assert_msg(bytes <= bound, "%" PRIu64 " bytes of snapshots for %" PRIu64 " of journal",
		      bytes, journal);
	ck_assert_msg(n <= 2 + elapsed / (MIN_INTERVAL_S * DU_S) + 1,
		      "%" PRIu64 " snapshots in %.1f s", n, (double)elapsed / 1e9);
	du_conn_free(big);
	du_conn_free(churn);
	du_daemon_free(d);
}
END_TEST

/* ---- a uid's share of the journal ------------------------------------------- */

#define NOBODY 65534
#define OTHER 65533
#define SHARE 65536u

/* The next frame is an OVER_BUDGET Error for id that names the journal
 * share. */
static void expect_share_refusal(struct du_conn *c, uint64_t id)
{
	char buf[512];
	du_env *e;

	ck_assert_int_eq(du_recv(c, DU_WAIT_MS, &e), DU_FRAME);
	ck_assert_msg(e->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR &&
		      e->error->code == BITWHEEL__V1__ERROR_CODE__OVER_BUDGET &&
		      e->request_id == id && e->error->message &&
		      strstr(e->error->message, "max_journal_per_uid") &&
		      strstr(e->error->message, "retry after the next snapshot"),
		      "%s", du_describe(e, buf, sizeof(buf)));
	bwp_frame_free(e);
}

/* Schedules of PAYLOAD bytes in session name until one is refused: how
 * many were accepted (failing past `most`). */
static unsigned fill_share(struct du_conn *c, unsigned most)
{
	for (unsigned i = 0;; i++) {
		struct du_sched s = far_timer(i);
		du_env *e;

		ck_assert_msg(i <= most, "%u Schedules of %u bytes and no refusal", i,
			      PAYLOAD);
		du_send_schedule(c, 10 + i, &s);
		ck_assert_int_eq(du_recv(c, DU_WAIT_MS, &e), DU_FRAME);
		if (e->body_case != BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY) {
			ck_assert_msg(e->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR &&
				      e->error->code == BITWHEEL__V1__ERROR_CODE__OVER_BUDGET &&
				      strstr(e->error->message, "max_journal_per_uid"),
				      "%s", du_describe(e, (char[512]){ 0 }, 512));
			bwp_frame_free(e);
			return i;
		}
		bwp_frame_free(e);
	}
}

static void nobody_over_share(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, "mine"), *x;
	unsigned n = fill_share(c, 2 * SHARE / PAYLOAD);
	struct du_sched s = far_timer(999);

	/* What it holds reached the share, and one record's less did not. */
	ck_assert_uint_ge((uint64_t)n * (PAYLOAD + 64), SHARE);
	ck_assert_uint_lt((uint64_t)(n - 1) * PAYLOAD, SHARE);
	du_send_schedule(c, 100, &s);
	expect_share_refusal(c, 100);
	/* Cancels shrink the state: still taken. */
	ck_assert(du_cancel(c, 101, 0));
	x = du_connect(d->sock);
	du_send_hello(x, 1, "another");
	expect_share_refusal(x, 1);
	du_conn_free(x);
	/* Anonymous sessions are not journaled. */
	anonymous_works(d);
	du_conn_free(c);
}

/* Still over its share (so the other uid was tried meanwhile), until the
 * next snapshot (--snapshot-interval) starts a new journal. */
static void nobody_share_returns(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, "mine");
	struct du_sched s = far_timer(999);

	du_send_schedule(c, 100, &s);
	expect_share_refusal(c, 100);
	for (uint64_t t0 = du_now_ns(), id = 200;; id++) {
		du_env *e;

		ck_assert_msg(du_now_ns() - t0 < 10 * DU_S * du_slow(),
			      "the share never came back");
		s.key = id;
		du_send_schedule(c, id, &s);
		ck_assert_int_eq(du_recv(c, DU_WAIT_MS, &e), DU_FRAME);
		if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY) {
			bwp_frame_free(e);
			break;
		}
		bwp_frame_free(e);
		sleep_draining(d, 100);
	}
	du_conn_free(c);
}

static void other_unaffected(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, "theirs");

	for (unsigned i = 0; i < SHARE / PAYLOAD / 2; i++)
		schedule_ok(c, 10 + i, i);
	du_conn_free(c);
}

START_TEST(test_journal_share)
{
	struct du_daemon *d;
	char dir[160], share[16], interval[16];
	struct du_conn *c;

	if (geteuid() != 0) {
		du_note("SKIP: test_journal_share needs root (to run clients as uid %d)",
			NOBODY);
		return;
	}
	d = du_daemon_new();
	ck_assert(chmod(d->dir, 0755) == 0);
	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	snprintf(share, sizeof(share), "%u", SHARE);
	/* Long enough for the first three steps, even under valgrind: a
	 * uid past its share makes a snapshot due, but not sooner than
	 * --snapshot-min-interval after the last (or the start). */
	snprintf(interval, sizeof(interval), "%us", 3 * du_slow());
	du_daemon_start(d, "--socket-mode", "0666", "--state-dir", dir,
			"--max-payload", "8192", "--max-journal-per-uid", share,
			"--snapshot-interval", interval, "--snapshot-min-interval", interval,
			(const char *)NULL);
	du_run_as(NOBODY, d, nobody_over_share, du_scale_ms(30000));
	du_run_as(OTHER, d, other_unaffected, du_scale_ms(30000));
	du_run_as(NOBODY, d, nobody_share_returns, du_scale_ms(30000));
	/* Root is exempt. */
	c = du_open(d, "root");
	for (unsigned i = 0; i < 2 * SHARE / PAYLOAD; i++)
		schedule_ok(c, 10 + i, i);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* The next frame on c is an OVER_BUDGET Error for id (fires put aside). */
static void expect_over_budget(struct du_conn *c, uint64_t id)
{
	du_expect_error(c, true, id, BITWHEEL__V1__ERROR_CODE__OVER_BUDGET);
}

/*
 * A uid past its share by fire records alone: its consumer (manual acks)
 * of a 1 kHz periodic timer acknowledges each fire until the fires stop
 * coming (hand-outs paused: some 126 bytes of FIRE, SENT and DONE a fire
 * against a 64 KiB share), with one fire still in flight; then Release,
 * Kick and SetPolicy are OVER_BUDGET, the Ack of that fire is taken, and
 * once the next snapshot starts a new generation the fires come again.
 */
static void nobody_fires_over_share(const struct du_daemon *d)
{
	struct du_conn *c = du_open_consumer(d, "fires", 1000, 0);
	struct du_conn *p = du_open_producer(d, "fires");
	struct du_sched s = { .key = 1, .when = DU_DELAY, .when_ns = DU_MS,
			      .periodic = true, .period_ns = DU_MS };
	uint64_t last = 0, n = 0, t0;
	du_env *e;

	bwp_frame_free(du_schedule(p, 2, &s));
	for (;;) {
		int rc = du_recv(c, du_scale_ms(300), &e);

		if (rc == DU_TIMEOUT)
			break;
		ck_assert_int_eq(rc, DU_FRAME);
		ck_assert_msg(++n < 20 * SHARE / 126, "%" PRIu64 " fires and no pause", n);
		if (last)
			du_send_ack(c, false, 0, last, false);
		last = e->fired->delivery;
		bwp_frame_free(e);
	}
	du_note("fires paused after %" PRIu64 " fires (share %u bytes)", n, SHARE);
	du_send_release(c, 10, last, false, 0);
	expect_over_budget(c, 10);
	du_send_kick(c, 11, false, 0, 0);
	expect_over_budget(c, 11);
	du_send_set_policy(c, 12, true, 5, NULL);
	expect_over_budget(c, 12);
	ck_assert_uint_eq(du_ack(c, 13, last, false), 1);
	/* The next generation (--snapshot-min-interval after the start)
	 * gives the share back. */
	t0 = du_now_ns();
	e = du_expect_fire(c, DU_WAIT_MS, NULL);
	du_note("fires again after %.1f s", (double)(du_now_ns() - t0) / 1e9);
	bwp_frame_free(e);
	du_conn_free(p);
	du_conn_free(c);
}

START_TEST(test_fire_share)
{
	struct du_daemon *d;
	char dir[160], share[16], interval[16];

	if (geteuid() != 0) {
		du_note("SKIP: test_fire_share needs root (to run clients as uid %d)",
			NOBODY);
		return;
	}
	d = du_daemon_new();
	ck_assert(chmod(d->dir, 0755) == 0);
	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	snprintf(share, sizeof(share), "%u", SHARE);
	snprintf(interval, sizeof(interval), "%us", 3 * du_slow());
	du_daemon_start(d, "--socket-mode", "0666", "--state-dir", dir,
			"--max-journal-per-uid", share,
			"--snapshot-min-interval", interval, (const char *)NULL);
	du_run_as(NOBODY, d, nobody_fires_over_share, du_scale_ms(30000));
	du_daemon_free(d);
}
END_TEST

/* ---- a file system filled by one uid's fire records ------------------------- */

#define FLOOD_TIMERS 10u        /* periodic, 1 ms each: the uid's 10 kHz   */
#define FLOOD_S 6u              /* how long the attacker floods            */
#define VICTIM_MAX 2000u        /* the victim's requests, at most          */
#define NEAR_NS (20 * DU_MS)    /* the victim's fires to come in the test  */

/* What the victim saw, sent back over a pipe. */
struct victim_result {
	unsigned sent, ok, refused, fires;
	unsigned kept;             /* its far timers acknowledged: keys[]    */
	uint64_t keys[VICTIM_MAX];
	char why[256];             /* the first thing that went wrong        */
};

/* The attacker (uid 65534): a named consumer (auto_ack) whose periodic
 * timers make fire records (FIRE, SENT, DONE) at its whole periodic
 * rate, read as they come, for FLOOD_S seconds. */
static void flood(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, "flood");
	uint64_t end;

	for (unsigned i = 0; i < FLOOD_TIMERS; i++) {
		struct du_sched s = { .key = i, .when = DU_DELAY, .when_ns = DU_MS,
				      .periodic = true, .period_ns = DU_MS };

		du_send_schedule(c, 10 + i, &s);
	}
	end = du_now_ns() + FLOOD_S * DU_S;
	while (du_now_ns() < end) {
		du_env *e;

		if (du_recv(c, 100, &e) == DU_FRAME)
			bwp_frame_free(e);
		else if (c->eof)
			break;
	}
	du_conn_free(c);
}

/* The reply to request id on c, the fires before it counted; NULL when
 * none comes within the bound. */
static du_env *victim_reply(struct du_conn *c, uint64_t id, unsigned *fires)
{
	uint64_t end = du_now_ns() + (uint64_t)du_scale_ms(5000) * DU_MS;
	du_env *e;

	while (du_now_ns() < end) {
		if (du_recv(c, 100, &e) != DU_FRAME) {
			if (c->eof)
				return NULL;
			continue;
		}
		if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED) {
			(*fires)++;
			bwp_frame_free(e);
			continue;
		}
		if (e->request_id == id)
			return e;
		bwp_frame_free(e);
	}
	return NULL;
}

/*
 * The victim (uid 65533), while the attacker floods: a named consumer
 * (auto_ack) that schedules one timer every 10 ms, alternately one due
 * in 20 ms (its fire must come) and a far one (it must be kept), each
 * answered within 5 s: accepted, or refused with STORAGE_UNAVAILABLE
 * (allowed or not by the caller).  Then its fires, all of them.
 */
static void victim_run(const struct du_daemon *d, struct victim_result *r)
{
	struct du_conn *c = du_open(d, "victim");
	uint64_t end = du_now_ns() + FLOOD_S * DU_S;
	unsigned near_ok = 0;

	for (uint64_t id = 10; du_now_ns() < end && r->sent < VICTIM_MAX; id++) {
		bool near = id % 2 == 0;
		struct du_sched s = near ?
			(struct du_sched){ .key = id, .when = DU_DELAY, .when_ns = NEAR_NS } :
			(struct du_sched){ .key = id, .when = DU_DELAY, .when_ns = FAR_NS };
		du_env *e;

		du_send_schedule(c, id, &s);
		r->sent++;
		e = victim_reply(c, id, &r->fires);
		if (!e) {
			snprintf(r->why, sizeof(r->why), "request %" PRIu64 " (%u sent, %u fires) unanswered for 5 s",
				 id, r->sent, r->fires);
			break;
		}
		if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY) {
			r->ok++;
			if (near)
				near_ok++;
			else
				r->keys[r->kept++] = id;
		} else if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR &&
			   e->error->code == BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE) {
			r->refused++;
		} else if (!r->why[0]) {
			du_describe(e, r->why, sizeof(r->why));
		}
		bwp_frame_free(e);
		du_sleep_ms(10);
	}
	for (uint64_t t0 = du_now_ns(); r->fires < near_ok &&
	     du_now_ns() - t0 < (uint64_t)DU_WAIT_MS * DU_MS;) {
		du_env *e;

		if (du_recv(c, 100, &e) != DU_FRAME)
			continue;
		if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED)
			r->fires++;
		bwp_frame_free(e);
	}
	if (r->fires != near_ok && !r->why[0])
		snprintf(r->why, sizeof(r->why), "%u fires of %u timers accepted", r->fires,
			 near_ok);
	du_conn_free(c);
}

/* Both, as their uids, at once; the daemon's notifications taken
 * meanwhile. */
static void flood_and_victim(const struct du_daemon *d, struct victim_result *r)
{
	int fd;
	pid_t attacker = fork(), victim;

	ck_assert(attacker >= 0);
	if (attacker == 0) {
		du_become(NOBODY);
		flood(d);
		_exit(0);
	}
	victim = du_fork_pipe(&fd);
	if (victim == 0) {
		memset(r, 0, sizeof(*r));
		du_become(OTHER);
		victim_run(d, r);
		_exit(write(fd, r, sizeof(*r)) == (ssize_t)sizeof(*r) ? 0 : 1);
	}
	for (uint64_t t0 = du_now_ns(); waitpid(victim, NULL, WNOHANG) == 0;) {
		ck_assert_msg(du_now_ns() - t0 < (FLOOD_S + 3) * DU_S + (uint64_t)DU_WAIT_MS * DU_MS,
			      "the victim's client did not finish");
		drain_notes(d);
		du_sleep_ms(100);
	}
	ck_assert_msg(du_read_full(fd, r, sizeof(*r), DU_WAIT_MS), "no result from the victim");
	close(fd);
	ck_assert_int_eq(du_wait_child(attacker, DU_WAIT_MS), 0);
	du_note("victim: %u requests, %u accepted, %u STORAGE_UNAVAILABLE, %u fires; %s",
		r->sent, r->ok, r->refused, r->fires, r->why[0] ? r->why : "ok");
}

static void flood_start(struct du_daemon *d, const struct fault *f, const char *share)
{
	ck_assert(chmod(d->dir, 0755) == 0);
	du_daemon_start(d, "--socket-mode", "0666", "--state-dir", f->state,
			"--max-journal-per-uid", share, "--snapshot-min-interval", "1s",
			"--max-payload", "8192", "-v", (const char *)NULL);
}

/* The mount, as root; false (skipped) otherwise. */
static bool flood_setup(struct du_daemon *d, struct fault *f, unsigned mib,
			const char *test)
{
	if (geteuid() != 0) {
		du_note("SKIP: %s needs root (to run clients as uids %d and %d)", test,
			NOBODY, OTHER);
		return false;
	}
	if (!sized_fs(d, f, mib)) {
		du_note("SKIP %s: needs a tmpfs (mount not permitted)", test);
		return false;
	}
	return true;
}

/*
 * One uid's fire records against its share, on a 6 MiB file system: the
 * attacker's periodic fires (some 1.2 MB/s of FIRE, SENT and DONE
 * records) would fill it in seconds, and --journal-max (64 MiB) never
 * starts a snapshot; its share (512 KiB) stops them instead, and a
 * snapshot gives it its next share.  The victim's every request is
 * accepted, every fire comes, and the storage never goes down.
 */
START_TEST(test_fire_flood_share)
{
	struct du_daemon *d = du_daemon_new();
	struct fault f;
	struct victim_result *r = calloc(1, sizeof(*r));

	if (!flood_setup(d, &f, 6, "test_fire_flood_share")) {
		free(r);
		du_daemon_free(d);
		return;
	}
	flood_start(d, &f, "512K");
	flood_and_victim(d, r);
	ck_assert_msg(!r->why[0], "victim: %s", r->why);
	ck_assert_uint_eq(r->ok, r->sent);
	ck_assert(!du_daemon_exited(d));
	assert_log_count(d, DOWN_LINE, 0);
	free(r);
	fault_free(d, &f);
}
END_TEST

static uint64_t *kept_keys;
static size_t kept_n;

/* After a restart: every far timer the victim had accepted is there. */
static void victim_kept(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, "victim");

	for (size_t i = 0; i < kept_n; i++)
		ck_assert_msg(du_cancel(c, 100000 + i, kept_keys[i]),
			      "key %" PRIu64 " accepted, then lost", kept_keys[i]);
	du_conn_free(c);
}

/*
 * The same flood with a share the file system cannot hold (1 GiB on
 * 3 MiB): the journal fills it and the storage goes down, for every uid.
 * The victim is answered throughout (accepted, or STORAGE_UNAVAILABLE),
 * its fires come, and the storage comes back by itself, nothing freed
 * by the test: the snapshot that ends the outage is written into the
 * reserve and removes the journal that filled the disk.  After a kill -9
 * every far timer the victim had accepted is there.
 */
START_TEST(test_fire_flood_full)
{
	struct du_daemon *d = du_daemon_new();
	struct fault f;
	struct victim_result *r = calloc(1, sizeof(*r));
	struct du_conn *c;
	char *log;

	if (du_skip_if_wrapped("test_fire_flood_full",
			       "under valgrind the attacker's fires do not fill the file system in the flood's time") ||
	    !flood_setup(d, &f, 3, "test_fire_flood_full")) {
		free(r);
		du_daemon_free(d);
		return;
	}
	flood_start(d, &f, "1G");
	c = du_open(d, "root");
	flood_and_victim(d, r);
	ck_assert_msg(!r->why[0], "victim: %s", r->why);
	ck_assert_uint_eq(r->ok + r->refused, r->sent);
	ck_assert(!du_daemon_exited(d));
	log = du_daemon_log(d);
	ck_assert_msg(count(log, DOWN_LINE) >= 1, "the file system never filled:\n%s", log);
	free(log);
	/* Up again without anything freed: a change is accepted. */
	for (uint64_t t0 = du_now_ns(), id = 10;; id++) {
		struct du_sched s = far_timer(id);
		du_env *e;

		du_send_schedule(c, id, &s);
		ck_assert_int_eq(du_recv(c, DU_WAIT_MS, &e), DU_FRAME);
		if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY) {
			bwp_frame_free(e);
			break;
		}
		ck_assert_msg(e->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR &&
			      e->error->code == BITWHEEL__V1__ERROR_CODE__STORAGE_UNAVAILABLE,
			      "%s", du_describe(e, (char[256]){ 0 }, 256));
		bwp_frame_free(e);
		if (du_now_ns() - t0 > (uint64_t)recovery_wait_ms() * DU_MS) {
			char listed[512];

			log = du_daemon_log(d);
			listing(f.state, listed, sizeof(listed));
			du_note("files:\n%s\nlog:\n%s", listed, log);
			ck_abort_msg("still down %d ms after the flood, nothing freed",
				     recovery_wait_ms());
		}
		sleep_draining(d, 200);
	}
	du_conn_free(c);
	du_daemon_kill(d);
	du_daemon_start(d, "--socket-mode", "0666", "--state-dir", f.state,
			(const char *)NULL);
	kept_keys = r->keys;
	kept_n = r->kept;
	du_run_as(OTHER, d, victim_kept, du_scale_ms(30000));
	free(r);
	fault_free(d, &f);
}
END_TEST

static Suite *storage_suite(void)
{
	Suite *s = suite_create("storage");
	TCase *tc = tcase_create("storage");

	du_tcase(tc);
	tcase_add_test(tc, test_full_disk);
	tcase_add_test(tc, test_fsize);
	tcase_add_test(tc, test_sync_eio);
	tcase_add_test(tc, test_sync_eio_always);
	tcase_add_test(tc, test_start_full);
	tcase_add_test(tc, test_down_consumer);
	suite_add_tcase(s, tc);
	tc = tcase_create("policy");
	du_tcase(tc);
	tcase_add_test(tc, test_replace_loop);
	suite_add_tcase(s, tc);
	tc = tcase_create("share");
	du_tcase(tc);
	tcase_add_test(tc, test_journal_share);
	tcase_add_test(tc, test_fire_share);
	suite_add_tcase(s, tc);
	tc = tcase_create("flood");
	du_tcase(tc);
	tcase_add_test(tc, test_fire_flood_share);
	tcase_add_test(tc, test_fire_flood_full);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(storage_suite());
}
