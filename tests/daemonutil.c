/*
 * daemonutil.c - daemons, raw connections and processes for the end-to-end
 * suites; the contract is in daemonutil.h.
 */
#define _GNU_SOURCE /* pipe2, killpg, dprintf */
#include "daemonutil.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Largest frame the helpers will pack: big enough for deliberately
 * oversized requests, small enough to be a sane buffer. */
#define DU_PACK_MAX (16u << 20)

/* ---- time ------------------------------------------------------------- */

uint64_t du_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * DU_S + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / DU_S), (long)(ns % DU_S) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void du_sleep_ms(unsigned ms)
{
	sleep_ns((uint64_t)ms * DU_MS);
}

void du_sleep_until(uint64_t t_ns)
{
	uint64_t now = du_now_ns();

	if (t_ns > now)
		sleep_ns(t_ns - now);
}

/* Milliseconds until deadline, rounded up, for poll(). */
static int ms_until(uint64_t deadline)
{
	uint64_t now = du_now_ns(), ms;

	if (now >= deadline)
		return 0;
	ms = (deadline - now + DU_MS - 1) / DU_MS;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

static uint64_t deadline_in(int timeout_ms)
{
	return du_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * DU_MS;
}

/* ---- slow daemons --------------------------------------------------- */

unsigned du_slow(void)
{
	const char *s = getenv("BW_TEST_SLOW");
	char *end;
	unsigned long v;

	if (s != NULL && *s != '\0') {
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno == 0 && *end == '\0' && v >= 1 && v <= 1000)
			return (unsigned)v;
	}
	return 1;
}

int du_scale_ms(int ms)
{
	int64_t v = (int64_t)ms * du_slow();

	return v > INT_MAX ? INT_MAX : (int)v;
}

static const char *wrapper(void)
{
	const char *w = getenv("BW_TEST_DAEMON_WRAPPER");

	return w != NULL && w[strspn(w, " \t")] != '\0' ? w : NULL;
}

bool du_wrapped(void)
{
	return wrapper() != NULL;
}

bool du_skip_if_wrapped(const char *test, const char *why)
{
	if (!du_wrapped())
		return false;
	du_note("SKIP under BW_TEST_DAEMON_WRAPPER: %s: %s", test, why);
	return true;
}

/*
 * A program of the build tree (bitwheeld, bwctl, the examples) is a
 * libtool wrapper script that puts the build's library directories on
 * LD_LIBRARY_PATH and execs dir/.libs/name.  The script costs some 0.1 s
 * of CPU a run and libtool --mode=execute under valgrind 0.5 s, over a
 * thousand runs a suite; so the suites run the binary itself, as the
 * script would: built_path() names it and the child puts
 * DU_BUILT_LIBS first on LD_LIBRARY_PATH (built_env()).  A build without
 * shared libraries has no .libs binary: the program is run as it is.
 */
#define DU_BUILT_LIBS BW_TOP_BUILDDIR "/wheel/.libs:" BW_TOP_BUILDDIR "/client/.libs"

static const char *built_path(const char *path)
{
	static struct { char *path, *binary; } seen[16];
	static size_t nseen;
	const char *top = BW_TOP_BUILDDIR "/", *base = strrchr(path, '/');
	char *binary;

	if (strncmp(path, top, strlen(top)) != 0)
		return path;
	for (size_t i = 0; i < nseen; i++)
		if (strcmp(seen[i].path, path) == 0)
			return seen[i].binary;
	ck_assert_msg(asprintf(&binary, "%.*s/.libs%s", (int)(base - path), path, base) > 0,
		      "asprintf: %s", strerror(errno));
	if (access(binary, X_OK) != 0) {
		free(binary);
		return path;
	}
	ck_assert_msg(nseen < sizeof(seen) / sizeof(seen[0]), "more built programs than %zu",
		      sizeof(seen) / sizeof(seen[0]));
	/* path may be a caller's buffer, written again for the next run. */
	seen[nseen].path = strdup(path);
	ck_assert_ptr_nonnull(seen[nseen].path);
	seen[nseen].binary = binary;
	return seen[nseen++].binary;
}

/* In the child, before exec: the build's libraries first. */
static void built_env(void)
{
	const char *old = getenv("LD_LIBRARY_PATH");
	char buf[PATH_MAX * 2];

	snprintf(buf, sizeof(buf), "%s%s%s", DU_BUILT_LIBS, old && *old ? ":" : "",
		 old ? old : "");
	setenv("LD_LIBRARY_PATH", buf, 1);
}

/*
 * argv to exec, in a malloc'd vector (whose strings point into argv, *words
 * or built_path()'s names): each program of the build tree as built_path()
 * names it, and the wrapper's words put in front of DU_DAEMON_PATH.  Runs
 * before fork: the child only execs.
 */
static const char *const *wrap_argv(const char *const *argv, char **words)
{
	const char **v;
	size_t n = 0, nw = 0, at = SIZE_MAX, k = 0;
	char *save = NULL;

	*words = NULL;
	for (n = 0; argv[n] != NULL; n++)
		if (at == SIZE_MAX && strcmp(argv[n], DU_DAEMON_PATH) == 0)
			at = n;
	if (wrapper() != NULL && at != SIZE_MAX) {
		*words = strdup(wrapper());
		ck_assert_ptr_nonnull(*words);
		/* A word and its separator take two characters at least. */
		nw = strlen(*words) / 2 + 1;
	}
	v = calloc(n + nw + 1, sizeof(*v));
	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++) {
		if (i == at && *words != NULL)
			for (char *w = strtok_r(*words, " \t", &save); w != NULL;
			     w = strtok_r(NULL, " \t", &save))
				v[k++] = w;
		v[k++] = built_path(argv[i]);
	}
	v[k] = NULL;
	return v;
}

static void wrap_free(const char *const *wrapped, char *words)
{
	free((void *)wrapped);
	free(words);
}

uint64_t du_margin_ns(void)
{
	const char *s = getenv("BW_TEST_MARGIN_MS");
	char *end;
	unsigned long v;

	if (s != NULL && *s != '\0') {
		errno = 0;
		v = strtoul(s, &end, 10);
		if (errno == 0 && *end == '\0')
			return (uint64_t)v * DU_MS * du_slow();
	}
	return DU_DEFAULT_MARGIN_MS * DU_MS * du_slow();
}

/* ---- the registry ---------------------------------------------------- */

/*
 * Shared (MAP_SHARED) between Check's runner, which maps it in the
 * unchecked setup before it forks the tests, and every test.  A slot holds
 * a scratch directory and, while it runs, the daemon's pid, which is also
 * its process group.
 */
#define DU_SLOTS 64

struct du_slot {
	pid_t pgid;
	char dir[64];
};

static struct du_slot *registry;

static struct du_slot *reg(void)
{
	void *p;

	if (registry != NULL)
		return registry;
	p = mmap(NULL, DU_SLOTS * sizeof(struct du_slot), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("daemonutil: mmap");
		abort();
	}
	registry = p;
	return registry;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) != 0 && errno != ENOENT)
		fprintf(stderr, "daemonutil: cannot remove %s: %s\n", path,
			strerror(errno));
	return 0;
}

static void rm_rf(const char *dir)
{
	if (dir[0] != '\0')
		nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* SIGKILL the group and, if it is our child, reap it (bounded). */
static void kill_group(pid_t pgid)
{
	uint64_t deadline = du_now_ns() + 2 * DU_S;

	if (pgid <= 0)
		return;
	killpg(pgid, SIGKILL);
	kill(pgid, SIGKILL);
	for (;;) {
		pid_t r = waitpid(pgid, NULL, WNOHANG);

		if (r == pgid || (r < 0 && errno == ECHILD))
			return;
		if (du_now_ns() > deadline)
			return;
		sleep_ns(DU_MS);
	}
}

static void registry_cleanup(void)
{
	struct du_slot *r = reg();

	for (int i = 0; i < DU_SLOTS; i++) {
		if (r[i].pgid > 0) {
			kill_group(r[i].pgid);
			r[i].pgid = 0;
		}
		if (r[i].dir[0] != '\0') {
			rm_rf(r[i].dir);
			r[i].dir[0] = '\0';
		}
	}
}

static int registry_add(const char *dir)
{
	struct du_slot *r = reg();

	for (int i = 0; i < DU_SLOTS; i++) {
		if (r[i].dir[0] == '\0' && r[i].pgid == 0) {
			snprintf(r[i].dir, sizeof(r[i].dir), "%s", dir);
			return i;
		}
	}
	ck_abort_msg("daemonutil: more than %d scratch directories in one test",
		     DU_SLOTS);
	return -1;
}

/* Runs in Check's runner: the registry must exist before the forks, and
 * daemons orphaned by a dead test are re-parented here (not to init), so
 * their pids cannot be reused before they are killed and reaped. */
static void runner_setup(void)
{
	reg();
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

static void runner_teardown(void)
{
	registry_cleanup();
	/* No test is running now: every child left is an orphaned daemon. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void test_setup(void)
{
	/* What an earlier test left behind when it failed or timed out. */
	registry_cleanup();
	/* Nothing here may find a daemon through the caller's environment. */
	unsetenv("BITWHEEL_SOCKET");
}

static void test_teardown(void)
{
	registry_cleanup();
}

void du_tcase(TCase *tc)
{
	tcase_add_unchecked_fixture(tc, runner_setup, runner_teardown);
	tcase_add_checked_fixture(tc, test_setup, test_teardown);
	tcase_set_timeout(tc, (double)DU_TCASE_TIMEOUT_S * du_slow());
}

/* ---- a stand-in listener ------------------------------------------------ */

/* The stand-in's answer to one request frame: 0 with *len set, or -1 to
 * close the connection. */
static int fake_answer(const du_env *req, uint8_t *out, size_t cap, size_t *len)
{
	du_env r;
	Bitwheel__V1__HelloReply hr = BITWHEEL__V1__HELLO_REPLY__INIT;
	Bitwheel__V1__StatsReply sr = BITWHEEL__V1__STATS_REPLY__INIT;

	bwp_reply_init(&r, req);
	if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_HELLO) {
		hr.has_protocol_version = 1;
		hr.protocol_version = BWP_PROTOCOL_VERSION;
		hr.daemon_version = "fake";
		r.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY;
		r.hello_reply = &hr;
	} else if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_STATS) {
		r.body_case = BITWHEEL__V1__ENVELOPE__BODY_STATS_REPLY;
		r.stats_reply = &sr;
	} else {
		return -1;
	}
	return bwp_frame_pack(&r, SIZE_MAX, out, cap, len) == 0 ? 0 : -1;
}

/* One connection, until EOF or a request it does not answer; the bytes
 * the client sent go to report. */
static void fake_serve(int fd, int report)
{
	uint8_t in[4096], out[512];
	size_t in_len = 0, fl, len;
	uint64_t total = 0;
	ssize_t n;
	du_env *env;

	while ((n = read(fd, in + in_len, sizeof(in) - in_len)) > 0) {
		total += (uint64_t)n;
		in_len += (size_t)n;
		while (bwp_frame_parse(in, in_len, BWP_DEFAULT_MAX_FRAME, &env, &fl) == 0) {
			int rc = fake_answer(env, out, sizeof(out), &len);

			bwp_frame_free(env);
			if (rc != 0 || write(fd, out, len) != (ssize_t)len)
				goto done;
			memmove(in, in + fl, in_len - fl);
			in_len -= fl;
		}
		if (in_len == sizeof(in))
			break;
	}
done:
	close(fd);
	if (write(report, &total, sizeof(total)) != sizeof(total))
		_exit(97);
}

static void fake_child(const struct du_fake *f, uid_t uid, int ready, int report)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd, fd;

	setpgid(0, 0);
	du_become(uid);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->sock);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    chmod(f->sock, 0666) != 0 || listen(lfd, 16) != 0) {
		fprintf(stderr, "fake listener as uid %ld: %s\n", (long)uid,
			strerror(errno));
		_exit(98);
	}
	if (write(ready, "", 1) != 1)
		_exit(97);
	close(ready);
	for (;;) {
		fd = accept(lfd, NULL, NULL);
		if (fd >= 0)
			fake_serve(fd, report);
	}
}

struct du_fake *du_fake_start(uid_t uid)
{
	struct du_fake *f = calloc(1, sizeof(*f));
	int ready[2], report[2];
	struct pollfd pf;
	char c;

	ck_assert_ptr_nonnull(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/bw-fake-XXXXXX");
	ck_assert_msg(mkdtemp(f->dir) != NULL, "mkdtemp: %s", strerror(errno));
	f->slot = registry_add(f->dir);
	snprintf(f->sock, sizeof(f->sock), "%s/sock", f->dir);
	ck_assert_msg(chown(f->dir, uid, (gid_t)uid) == 0 && chmod(f->dir, 0755) == 0,
		      "%s for uid %ld: %s", f->dir, (long)uid, strerror(errno));
	ck_assert(pipe2(ready, O_CLOEXEC) == 0 && pipe2(report, O_CLOEXEC) == 0);
	f->pid = fork();
	ck_assert(f->pid >= 0);
	if (f->pid == 0) {
		close(ready[0]);
		close(report[0]);
		fake_child(f, uid, ready[1], report[1]);
	}
	/* Its own group from here on, whichever of us gets there first. */
	setpgid(f->pid, f->pid);
	reg()[f->slot].pgid = f->pid;
	close(ready[1]);
	close(report[1]);
	f->report_fd = report[0];
	pf = (struct pollfd){ .fd = ready[0], .events = POLLIN };
	ck_assert_msg(poll(&pf, 1, DU_WAIT_MS) == 1 && read(ready[0], &c, 1) == 1,
		      "the fake listener as uid %ld did not start (see above)", (long)uid);
	close(ready[0]);
	return f;
}

uint64_t du_fake_next_conn(struct du_fake *f, int timeout_ms)
{
	struct pollfd pf = { .fd = f->report_fd, .events = POLLIN };
	uint64_t total;

	ck_assert_msg(poll(&pf, 1, timeout_ms) == 1 &&
		      read(f->report_fd, &total, sizeof(total)) == sizeof(total),
		      "no connection to the fake listener closed within %d ms", timeout_ms);
	return total;
}

void du_fake_free(struct du_fake *f)
{
	if (f == NULL)
		return;
	kill_group(f->pid);
	reg()[f->slot].pgid = 0;
	close(f->report_fd);
	rm_rf(f->dir);
	reg()[f->slot].dir[0] = '\0';
	free(f);
}

/* ---- files ---------------------------------------------------------------- */

char *du_read_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;

	if (fd < 0)
		return NULL;
	for (;;) {
		if (cap - len < 4096) {
			char *nb = realloc(buf, cap + 65536);

			if (nb == NULL) {
				free(buf);
				close(fd);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
			cap += 65536;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	buf[len] = '\0';
	return buf;
}

/* The last ~1500 bytes of the log, for failure messages (static buffer). */
static const char *log_tail(const struct du_daemon *d)
{
	static char tail[1600];
	char *text = du_read_file(d->log);
	size_t len;

	if (text == NULL) {
		snprintf(tail, sizeof(tail), "(no log: %s)", strerror(errno));
		return tail;
	}
	len = strlen(text);
	snprintf(tail, sizeof(tail), "%s", len > 1500 ? text + len - 1500 : text);
	free(text);
	return tail;
}

/* ---- daemons ---------------------------------------------------------- */

/*
 * The daemons this process made, whose notifications du_recv(),
 * du_proc_finish() and du_daemon_wait_exit() take while they wait: the
 * kernel queues at most net.unix.max_dgram_qlen (10) datagrams on the
 * notify socket, and a daemon's STATUS= every 5 s would fill it within a
 * minute of a test that waits on replies or a bwctl alone (under
 * valgrind, many do), after which sd_notify blocks the daemon (even its
 * STOPPING=1 after a SIGTERM: check_bwctl test_watch_reconnect hung so).
 */
#define DU_LIVE_MAX 16
static struct du_daemon *live[DU_LIVE_MAX];
static pid_t live_pid[DU_LIVE_MAX];

static void live_set(struct du_daemon *from, struct du_daemon *to)
{
	for (int i = 0; i < DU_LIVE_MAX; i++) {
		if (live[i] == from) {
			live[i] = to;
			live_pid[i] = getpid();
			return;
		}
	}
}

static void read_notes(struct du_daemon *d);

static void read_live_notes(void)
{
	for (int i = 0; i < DU_LIVE_MAX; i++)
		if (live[i] && live_pid[i] == getpid())
			read_notes(live[i]);
}

struct du_daemon *du_daemon_new(void)
{
	struct du_daemon *d = calloc(1, sizeof(*d));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	ck_assert_ptr_nonnull(d);
	snprintf(d->dir, sizeof(d->dir), "/tmp/bw-e2e-XXXXXX");
	ck_assert_msg(mkdtemp(d->dir) != NULL, "mkdtemp: %s", strerror(errno));
	d->slot = registry_add(d->dir);
	snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
	snprintf(d->notify, sizeof(d->notify), "%s/notify", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);

	d->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ck_assert_msg(d->notify_fd >= 0, "socket: %s", strerror(errno));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->notify);
	ck_assert_msg(bind(d->notify_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		      "bind %s: %s", d->notify, strerror(errno));
	live_set(NULL, d);
	return d;
}

/* Take whatever notifications have arrived into d->notes. */
static void read_notes(struct du_daemon *d)
{
	char buf[4097];
	ssize_t n;

	while ((n = recv(d->notify_fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) >= 0) {
		char *nn;

		buf[n] = '\0';
		nn = realloc(d->notes, d->notes_len + (size_t)n + 2);
		ck_assert_ptr_nonnull(nn);
		d->notes = nn;
		memcpy(d->notes + d->notes_len, buf, (size_t)n);
		d->notes_len += (size_t)n;
		/* sd_notify may or may not end a datagram with a newline. */
		if (n == 0 || buf[n - 1] != '\n')
			d->notes[d->notes_len++] = '\n';
		d->notes[d->notes_len] = '\0';
	}
}

static bool notes_have(const struct du_daemon *d, const char *what)
{
	size_t wl = strlen(what);
	bool prefix = wl > 0 && what[wl - 1] == '=';

	for (const char *p = d->notes; p != NULL && *p != '\0';) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);

		if (prefix ? ll >= wl && strncmp(p, what, wl) == 0
			   : ll == wl && strncmp(p, what, wl) == 0)
			return true;
		p = nl ? nl + 1 : NULL;
	}
	return false;
}

#define FAULT_SYNC_SO BW_TOP_BUILDDIR "/tests/.libs/faultsync.so"
#define FAKE_CLOCK_SO BW_TOP_BUILDDIR "/tests/.libs/fakeclock.so"

/* In the daemon's child before exec: a shim first in LD_PRELOAD, and ASan
 * told not to insist on coming first.  A failure to set them shows as a
 * shim that does nothing, which the tests that use it see. */
static void preload(const char *so)
{
	const char *pre = getenv("LD_PRELOAD"), *asan = getenv("ASAN_OPTIONS");
	char buf[1024];

	snprintf(buf, sizeof(buf), "%s%s%s", so, pre && *pre ? ":" : "",
		 pre ? pre : "");
	setenv("LD_PRELOAD", buf, 1);
	if (!asan || !strstr(asan, "verify_asan_link_order=0")) {
		snprintf(buf, sizeof(buf), "%s%sverify_asan_link_order=0",
			 asan ? asan : "", asan && *asan ? ":" : "");
		setenv("ASAN_OPTIONS", buf, 1);
	}
}

/* The shims' control files, in d's directory. */
static void preload_fault_sync(const struct du_daemon *d)
{
	char ctl[96];

	preload(FAULT_SYNC_SO);
	snprintf(ctl, sizeof(ctl), "%s/fdatasync", d->dir);
	setenv("BW_FAULT_FDATASYNC", ctl, 1);
	snprintf(ctl, sizeof(ctl), "%s/fdatasync.log", d->dir);
	setenv("BW_FAULT_FDATASYNC_LOG", ctl, 1);
}

static void preload_fake_clock(const struct du_daemon *d)
{
	char ctl[96];

	preload(FAKE_CLOCK_SO);
	snprintf(ctl, sizeof(ctl), "%s/clock", d->dir);
	setenv("BW_FAKECLOCK", ctl, 1);
}

void du_fake_clock(struct du_daemon *d)
{
	char path[112];
	int fd;

	ck_assert_msg(access(FAKE_CLOCK_SO, R_OK) == 0, "%s: %s (make check builds it)",
		      FAKE_CLOCK_SO, strerror(errno));
	static const char *const files[] = { "", ".step", ".resume" };

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/clock%s", d->dir, files[i]);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
		close(fd);
	}
	du_clock_step(d, 0, false);
	du_clock_suspend(d, 0, false);
	d->fake_clock = true;
}

/* Write offset_ns at byte at of d's clock file; tell: then close the
 * notice file suffix names after opening it for writing. */
static void clock_write(struct du_daemon *d, off_t at, int64_t offset_ns,
			bool tell, const char *suffix)
{
	char path[112];
	int fd;

	snprintf(path, sizeof(path), "%s/clock", d->dir);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(pwrite(fd, &offset_ns, sizeof(offset_ns), at),
			 (ssize_t)sizeof(offset_ns));
	close(fd);
	if (!tell)
		return;
	snprintf(path, sizeof(path), "%s/clock%s", d->dir, suffix);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	close(fd);
}

void du_clock_suspend(struct du_daemon *d, int64_t offset_ns, bool tell)
{
	clock_write(d, sizeof(int64_t), offset_ns, tell, ".resume");
}

void du_clock_step(struct du_daemon *d, int64_t offset_ns, bool tell)
{
	clock_write(d, 0, offset_ns, tell, ".step");
}

uint64_t du_boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t du_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void du_fault_sync_plan(struct du_daemon *d, const struct du_sync_step *plan,
			size_t n)
{
	char path[112], tmp[120];
	FILE *f;

	ck_assert_msg(access(FAULT_SYNC_SO, R_OK) == 0, "%s: %s (make check builds it)",
		      FAULT_SYNC_SO, strerror(errno));
	snprintf(path, sizeof(path), "%s/fdatasync", d->dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	ck_assert_msg(f != NULL, "%s: %s", tmp, strerror(errno));
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%u %d\n", plan[i].delay_ms, plan[i].err);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_msg(rename(tmp, path) == 0, "rename %s: %s", tmp, strerror(errno));
	/* The log starts with the plan. */
	snprintf(path, sizeof(path), "%s/fdatasync.log", d->dir);
	ck_assert_msg(unlink(path) == 0 || errno == ENOENT, "%s: %s", path, strerror(errno));
	d->fault_sync = true;
}

void du_fault_sync(struct du_daemon *d, unsigned delay_ms, int err)
{
	struct du_sync_step one = { delay_ms, err };

	du_fault_sync_plan(d, &one, 1);
}

size_t du_fault_sync_log(struct du_daemon *d, struct du_sync_call **out)
{
	struct du_sync_call c, *v = NULL;
	size_t n = 0, cap = 0;
	char path[112];
	FILE *f;

	snprintf(path, sizeof(path), "%s/fdatasync.log", d->dir);
	f = fopen(path, "r");
	while (f && fscanf(f, "%" SCNu64 " %" SCNu64 " %d", &c.begin_ns, &c.end_ns,
			   &c.err) == 3) {
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			v = realloc(v, cap * sizeof(*v));
			ck_assert_ptr_nonnull(v);
		}
		v[n++] = c;
	}
	if (f)
		fclose(f);
	*out = v;
	return n;
}

void du_daemon_spawn(struct du_daemon *d, const char *const *argv)
{
	const char *const *run;
	char *words;
	int logfd, nullfd;
	pid_t pid;

	ck_assert_msg(d->pid == 0, "daemon already running (pid %ld)", (long)d->pid);
	/* A restart must not be mistaken for the last run's READY=1. */
	read_notes(d);
	free(d->notes);
	d->notes = NULL;
	d->notes_len = 0;
	d->exited = false;
	d->status = 0;

	logfd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	ck_assert_msg(logfd >= 0, "open %s: %s", d->log, strerror(errno));
	nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_msg(nullfd >= 0, "open /dev/null: %s", strerror(errno));
	run = wrap_argv(argv, &words);

	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		sigset_t none;

		setpgid(0, 0);
		dup2(nullfd, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		setenv("NOTIFY_SOCKET", d->notify, 1);
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		unsetenv("LISTEN_FDNAMES");
		unsetenv("WATCHDOG_USEC");
		unsetenv("WATCHDOG_PID");
		unsetenv("BITWHEEL_SOCKET");
		if (d->fault_sync)
			preload_fault_sync(d);
		if (d->fake_clock)
			preload_fake_clock(d);
		built_env();
		execvp(run[0], (char *const *)run);
		dprintf(2, "daemonutil: exec %s: %s\n", run[0], strerror(errno));
		_exit(127);
	}
	wrap_free(run, words);
	/* Both sides set the group, so it is in place whichever runs first. */
	setpgid(pid, pid);
	close(logfd);
	close(nullfd);
	d->pid = pid;
	reg()[d->slot].pgid = pid;
}

static void forget_pid(struct du_daemon *d)
{
	d->pid = 0;
	reg()[d->slot].pgid = 0;
}

bool du_daemon_exited(struct du_daemon *d)
{
	int st;
	pid_t r;

	if (d->pid == 0)
		return d->exited;
	r = waitpid(d->pid, &st, WNOHANG);
	if (r == d->pid) {
		d->status = st;
		d->exited = true;
		forget_pid(d);
		return true;
	}
	return false;
}

bool du_daemon_wait_notify(struct du_daemon *d, const char *what,
			   int timeout_ms)
{
	uint64_t deadline = deadline_in(timeout_ms);

	for (;;) {
		struct pollfd p = { d->notify_fd, POLLIN, 0 };
		int left;

		read_notes(d);
		if (notes_have(d, what))
			return true;
		if (du_daemon_exited(d)) {
			read_notes(d);
			return notes_have(d, what);
		}
		left = ms_until(deadline);
		if (left == 0)
			return false;
		/* Short slices: the daemon's exit has no fd to poll. */
		poll(&p, 1, left < 20 ? left : 20);
	}
}

bool du_daemon_wait_exit(struct du_daemon *d, int timeout_ms)
{
	uint64_t deadline = deadline_in(timeout_ms);

	while (!du_daemon_exited(d)) {
		if (du_now_ns() >= deadline)
			return false;
		/* Its STOPPING=1 (and any daemon's STATUS=) must find room. */
		read_live_notes();
		sleep_ns(2 * DU_MS);
	}
	return true;
}

void du_daemon_startv(struct du_daemon *d, const char *const *extra)
{
	const char *argv[64];
	size_t n = 0;

	argv[n++] = DU_DAEMON_PATH;
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
		ck_assert_msg(n < 63, "too many daemon arguments");
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	du_daemon_spawn(d, argv);
	if (!du_daemon_wait_notify(d, "READY=1", DU_WAIT_MS))
		ck_abort_msg("bitwheeld %s READY=1 on NOTIFY_SOCKET within %d ms; log:\n%s",
			     du_daemon_exited(d) ? "exited without sending" : "did not send",
			     DU_WAIT_MS, log_tail(d));
}

void du_daemon_start(struct du_daemon *d, ...)
{
	const char *extra[48];
	size_t n = 0;
	va_list ap;

	va_start(ap, d);
	for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
		ck_assert_msg(n < 47, "too many daemon arguments");
		extra[n++] = a;
	}
	va_end(ap);
	extra[n] = NULL;
	du_daemon_startv(d, extra);
}

int du_daemon_stop(struct du_daemon *d, int sig, int timeout_ms)
{
	ck_assert_msg(d->pid > 0 || d->exited, "daemon not started");
	if (d->pid > 0 && sig != 0)
		kill(d->pid, sig);
	if (!du_daemon_wait_exit(d, timeout_ms)) {
		pid_t pid = d->pid;

		du_daemon_kill(d);
		ck_abort_msg("bitwheeld (pid %ld) did not exit within %d ms of signal %d; log:\n%s",
			     (long)pid, timeout_ms, sig, log_tail(d));
	}
	return d->status;
}

void du_daemon_kill(struct du_daemon *d)
{
	if (d->pid > 0) {
		pid_t pid = d->pid;
		int st;

		killpg(pid, SIGKILL);
		kill(pid, SIGKILL);
		if (waitpid(pid, &st, 0) == pid) {
			d->status = st;
			d->exited = true;
		}
		forget_pid(d);
	}
}

void du_daemon_free(struct du_daemon *d)
{
	if (d == NULL)
		return;
	/* valgrind writes its leak summary only when the daemon exits by
	 * itself; the exit status carries its --error-exitcode. */
	if (d->pid > 0 && du_wrapped())
		du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	du_daemon_kill(d);
	live_set(d, NULL);
	if (d->notify_fd >= 0)
		close(d->notify_fd);
	rm_rf(d->dir);
	reg()[d->slot].dir[0] = '\0';
	free(d->notes);
	free(d);
}

char *du_daemon_log(const struct du_daemon *d)
{
	char *s = du_read_file(d->log);

	ck_assert_msg(s != NULL, "read %s: %s", d->log, strerror(errno));
	return s;
}

void du_assert_exit(const struct du_daemon *d, int status, int code)
{
	if (WIFEXITED(status))
		ck_assert_msg(WEXITSTATUS(status) == code,
			      "bitwheeld exited %d, expected %d; log:\n%s",
			      WEXITSTATUS(status), code, log_tail(d));
	else
		ck_abort_msg("bitwheeld killed by signal %d, expected exit %d; log:\n%s",
			     WIFSIGNALED(status) ? WTERMSIG(status) : -1, code,
			     log_tail(d));
}

/* ---- connections ------------------------------------------------------ */

int du_try_connect(const char *path, struct du_conn **out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct du_conn *c;
	int fd, err;

	*out = NULL;
	ck_assert_msg(strlen(path) < sizeof(sa.sun_path), "path too long: %s", path);
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		err = errno;
		close(fd);
		return -err;
	}
	ck_assert_msg(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0,
		      "fcntl: %s", strerror(errno));
	c = calloc(1, sizeof(*c));
	ck_assert_ptr_nonnull(c);
	c->fd = fd;
	c->max_frame = BWP_DEFAULT_MAX_FRAME;
	*out = c;
	return 0;
}

struct du_conn *du_connect(const char *path)
{
	struct du_conn *c;
	int rc = du_try_connect(path, &c);

	ck_assert_msg(rc == 0, "connect %s: %s", path, strerror(-rc));
	return c;
}

void du_conn_free(struct du_conn *c)
{
	if (c == NULL)
		return;
	if (c->fd >= 0)
		close(c->fd);
	for (size_t i = 0; i < c->kept_len; i++)
		bwp_frame_free(c->kept[(c->kept_head + i) % c->kept_cap].env);
	free(c->kept);
	free(c->in);
	free(c);
}

int du_recv(struct du_conn *c, int timeout_ms, du_env **out)
{
	uint64_t deadline = deadline_in(timeout_ms);

	*out = NULL;
	for (;;) {
		size_t flen = 0, want;
		struct pollfd p;
		ssize_t n;
		int err, left;

		err = bwp_frame_parse(c->in ? c->in + c->in_off : NULL,
				      c->in_len - c->in_off, c->max_frame, out,
				      &flen);
		if (err == BWP_OK) {
			c->in_off += flen;
			if (c->in_off == c->in_len)
				c->in_off = c->in_len = 0;
			return DU_FRAME;
		}
		if (err != BWP_EMORE) {
			c->bad = err;
			return DU_BAD;
		}
		if (c->eof)
			return DU_EOF;

		/* At most one partial frame is left: move it to the front,
		 * then make room for the rest of it and more. */
		if (c->in_off > 0) {
			memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
			c->in_len -= c->in_off;
			c->in_off = 0;
		}
		want = c->in_len + 65536;
		if (flen > want)
			want = flen;
		if (want > c->in_cap) {
			size_t ncap = c->in_cap ? c->in_cap : 4096;
			uint8_t *nb;

			while (ncap < want)
				ncap *= 2;
			nb = realloc(c->in, ncap);
			ck_assert_ptr_nonnull(nb);
			c->in = nb;
			c->in_cap = ncap;
		}

		p.fd = c->fd;
		p.events = POLLIN;
		p.revents = 0;
		read_live_notes();
		left = ms_until(deadline);
		n = poll(&p, 1, left > 1000 ? 1000 : left);
		if (n < 0 && errno == EINTR)
			continue;
		ck_assert_msg(n >= 0, "poll: %s", strerror(errno));
		if (n == 0 && left > 1000)
			continue;
		if (n == 0)
			return DU_TIMEOUT;
		n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len,
			 MSG_DONTWAIT);
		if (n > 0) {
			c->in_len += (size_t)n;
			c->rx_ns = du_now_ns();
			c->rx_real_ns = du_realtime_ns();
		} else if (n == 0) {
			c->eof = true;
		} else if (errno == ECONNRESET) {
			/* The daemon closed with our bytes unread: its
			 * frames before that were all read already. */
			c->eof = c->reset = true;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			   errno != EINTR) {
			ck_abort_msg("recv: %s", strerror(errno));
		}
	}
}

int du_conn_send_bytes(struct du_conn *c, const void *buf, size_t len,
		       int timeout_ms)
{
	const uint8_t *p = buf;
	uint64_t deadline = deadline_in(timeout_ms);

	while (len > 0) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		struct pollfd pf = { c->fd, POLLOUT, 0 };

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (ms_until(deadline) == 0)
			return -ETIMEDOUT;
		poll(&pf, 1, ms_until(deadline));
	}
	return 0;
}

void du_buf_pack(struct du_buf *b, const du_env *env)
{
	size_t need = bwp_frame_packed_size(env), n = 0;
	int rc;

	if (b->cap - b->len < need) {
		size_t ncap = b->cap ? b->cap : 4096;
		uint8_t *nd;

		while (ncap - b->len < need)
			ncap *= 2;
		nd = realloc(b->data, ncap);
		ck_assert_ptr_nonnull(nd);
		b->data = nd;
		b->cap = ncap;
	}
	rc = bwp_frame_pack(env, DU_PACK_MAX, b->data + b->len, b->cap - b->len, &n);
	ck_assert_msg(rc == BWP_OK, "bwp_frame_pack: %s", bwp_strerror(rc));
	b->len += n;
}

void du_buf_free(struct du_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void du_send_buf(struct du_conn *c, struct du_buf *b)
{
	int rc = du_conn_send_bytes(c, b->data, b->len, DU_WAIT_MS);

	ck_assert_msg(rc == 0, "sending %zu bytes: %s", b->len, strerror(-rc));
	b->len = 0;
}

void du_send_env(struct du_conn *c, const du_env *env)
{
	struct du_buf b = { 0 };

	du_buf_pack(&b, env);
	du_send_buf(c, &b);
	du_buf_free(&b);
}

/* What du_pack_hello() asks for a named session: a consumer that needs
 * no Acks, so that every fire arrives, as the timing, session and
 * framing tests expect. */
static const struct du_hello_opts legacy_consumer = {
	.role = BITWHEEL__V1__ROLE__CONSUMER, .has_auto_ack = true, .auto_ack = true,
};

void du_pack_hello(struct du_buf *b, uint64_t id, const char *session)
{
	static const struct du_hello_opts none = { 0 };

	du_pack_hello_opts(b, id, session, session ? &legacy_consumer : &none);
}

void du_pack_hello_opts(struct du_buf *b, uint64_t id, const char *session,
			const struct du_hello_opts *o)
{
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Hello h = BITWHEEL__V1__HELLO__INIT;

	h.has_protocol_version = 1;
	h.protocol_version = BWP_PROTOCOL_VERSION;
	if (session) {
		h.has_session = 1;
		h.session.data = (uint8_t *)session;
		h.session.len = o->session_len ? o->session_len : strlen(session);
	}
	h.has_role = o->role != 0;
	h.role = (Bitwheel__V1__Role)o->role;
	h.has_window = o->has_window;
	h.window = o->window;
	h.has_ack_timeout_ns = o->ack_timeout_ns != 0;
	h.ack_timeout_ns = o->ack_timeout_ns;
	h.has_auto_ack = o->has_auto_ack;
	h.auto_ack = o->auto_ack;
	h.has_owner_uid = o->has_owner_uid;
	h.owner_uid = o->owner_uid;
	h.has_coalesce = h.coalesce = o->coalesce;
	env.has_request_id = 1;
	env.request_id = id;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	env.hello = &h;
	du_buf_pack(b, &env);
}

void du_pack_schedule(struct du_buf *b, uint64_t id, const struct du_sched *s)
{
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Schedule sc = BITWHEEL__V1__SCHEDULE__INIT;

	sc.has_key = !s->no_key;
	sc.key = s->key;
	if (s->when == DU_DELAY) {
		sc.when_case = BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS;
		sc.delay_ns = s->when_ns;
	} else if (s->when == DU_DEADLINE) {
		sc.when_case = BITWHEEL__V1__SCHEDULE__WHEN_DEADLINE_NS;
		sc.deadline_ns = s->when_ns;
	} else if (s->when == DU_REALTIME) {
		sc.when_case = BITWHEEL__V1__SCHEDULE__WHEN_REALTIME_NS;
		sc.realtime_ns = s->when_ns;
	} else if (s->when == DU_CALENDAR) {
		sc.when_case = BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR;
		sc.calendar = (char *)s->calendar;
	}
	sc.has_jitter_ns = s->jitter;
	sc.jitter_ns = s->jitter_ns;
	sc.has_jitter_fixed = sc.jitter_fixed = s->jitter_fixed;
	sc.has_misfire_grace_ns = s->grace;
	sc.misfire_grace_ns = s->grace_ns;
	sc.has_clock = s->boot;
	sc.clock = BITWHEEL__V1__CLOCK__CLOCK_BOOTTIME;
	sc.has_period_ns = s->periodic;
	sc.period_ns = s->period_ns;
	if (s->payload != NULL) {
		sc.has_payload = 1;
		sc.payload.data = (uint8_t *)s->payload;
		sc.payload.len = s->payload_len;
	}
	if (s->replace) {
		sc.has_replace = 1;
		sc.replace = 1;
	}
	sc.has_leeway_ns = s->leeway;
	sc.leeway_ns = s->leeway_ns;
	env.has_request_id = 1;
	env.request_id = id;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE;
	env.schedule = &sc;
	du_buf_pack(b, &env);
}

void du_pack_cancel(struct du_buf *b, uint64_t id, uint64_t key)
{
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Cancel cn = BITWHEEL__V1__CANCEL__INIT;

	cn.has_key = 1;
	cn.key = key;
	env.has_request_id = 1;
	env.request_id = id;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_CANCEL;
	env.cancel = &cn;
	du_buf_pack(b, &env);
}

void du_pack_stats(struct du_buf *b, uint64_t id)
{
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Stats st = BITWHEEL__V1__STATS__INIT;

	env.has_request_id = 1;
	env.request_id = id;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_STATS;
	env.stats = &st;
	du_buf_pack(b, &env);
}

#define DU_SEND_ONE(call)                                                   \
	do {                                                                \
		struct du_buf b_ = { 0 };                                   \
		call;                                                       \
		du_send_buf(c, &b_);                                        \
		du_buf_free(&b_);                                           \
	} while (0)

void du_send_hello(struct du_conn *c, uint64_t id, const char *session)
{
	DU_SEND_ONE(du_pack_hello(&b_, id, session));
}

void du_pack_ack(struct du_buf *b, bool has_id, uint64_t id, uint64_t delivery,
		 bool cumulative)
{
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Ack a = BITWHEEL__V1__ACK__INIT;

	a.has_delivery = 1;
	a.delivery = delivery;
	a.has_cumulative = cumulative;
	a.cumulative = cumulative;
	env.has_request_id = has_id;
	env.request_id = id;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_ACK;
	env.ack = &a;
	du_buf_pack(b, &env);
}

void du_send_ack(struct du_conn *c, bool has_id, uint64_t id, uint64_t delivery,
		 bool cumulative)
{
	DU_SEND_ONE(du_pack_ack(&b_, has_id, id, delivery, cumulative));
}

uint64_t du_ack(struct du_conn *c, uint64_t id, uint64_t delivery,
		bool cumulative)
{
	du_env *r;
	uint64_t acked;

	du_send_ack(c, true, id, delivery, cumulative);
	r = du_expect_reply(c, id, BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY);
	ck_assert(r->ack_reply->has_acked);
	acked = r->ack_reply->acked;
	bwp_frame_free(r);
	return acked;
}

/* A request envelope with request_id id and body case bc; the caller
 * sets the body's pointer and sends it. */
static du_env request_env(uint64_t id, int bc)
{
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;

	env.has_request_id = 1;
	env.request_id = id;
	env.body_case = bc;
	return env;
}

void du_send_release(struct du_conn *c, uint64_t id, uint64_t delivery,
		     bool has_delay, uint64_t delay_ns)
{
	du_env env = request_env(id, BITWHEEL__V1__ENVELOPE__BODY_RELEASE);
	Bitwheel__V1__Release r = BITWHEEL__V1__RELEASE__INIT;

	r.has_delivery = 1;
	r.delivery = delivery;
	r.has_delay_ns = has_delay;
	r.delay_ns = delay_ns;
	env.release = &r;
	du_send_env(c, &env);
}

void du_send_touch(struct du_conn *c, uint64_t id, uint64_t delivery,
		   uint64_t timeout_ns)
{
	du_env env = request_env(id, BITWHEEL__V1__ENVELOPE__BODY_TOUCH);
	Bitwheel__V1__Touch t = BITWHEEL__V1__TOUCH__INIT;

	t.has_delivery = 1;
	t.delivery = delivery;
	t.has_timeout_ns = timeout_ns != 0;
	t.timeout_ns = timeout_ns;
	env.touch = &t;
	du_send_env(c, &env);
}

void du_send_set_policy(struct du_conn *c, uint64_t id, bool has_max,
			uint32_t max_deliveries, const char *dead_letter)
{
	du_env env = request_env(id, BITWHEEL__V1__ENVELOPE__BODY_SET_POLICY);
	Bitwheel__V1__SetPolicy p = BITWHEEL__V1__SET_POLICY__INIT;

	p.has_max_deliveries = has_max;
	p.max_deliveries = max_deliveries;
	if (dead_letter) {
		p.has_dead_letter = 1;
		p.dead_letter.data = (uint8_t *)dead_letter;
		p.dead_letter.len = strlen(dead_letter);
	}
	env.set_policy = &p;
	du_send_env(c, &env);
}

void du_send_kick(struct du_conn *c, uint64_t id, bool has_key, uint64_t key,
		  uint32_t limit)
{
	du_env env = request_env(id, BITWHEEL__V1__ENVELOPE__BODY_KICK);
	Bitwheel__V1__Kick k = BITWHEEL__V1__KICK__INIT;

	k.has_key = has_key;
	k.key = key;
	k.has_limit = limit != 0;
	k.limit = limit;
	env.kick = &k;
	du_send_env(c, &env);
}

void du_send_schedule(struct du_conn *c, uint64_t id, const struct du_sched *s)
{
	DU_SEND_ONE(du_pack_schedule(&b_, id, s));
}

void du_send_cancel(struct du_conn *c, uint64_t id, uint64_t key)
{
	DU_SEND_ONE(du_pack_cancel(&b_, id, key));
}

void du_send_stats(struct du_conn *c, uint64_t id)
{
	DU_SEND_ONE(du_pack_stats(&b_, id));
}

const char *du_error_name(int code)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
		&bitwheel__v1__error_code__descriptor, code);

	return v != NULL ? v->name : "(unknown code)";
}

static const char *body_name(int bc)
{
	const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(
		&bitwheel__v1__envelope__descriptor, (unsigned)bc);

	return f != NULL ? f->name : "(no body)";
}

const char *du_describe(const du_env *env, char *buf, size_t len)
{
	char id[32] = "no request_id";

	if (env == NULL) {
		snprintf(buf, len, "(no frame)");
		return buf;
	}
	if (env->has_request_id)
		snprintf(id, sizeof(id), "id=%" PRIu64, env->request_id);
	switch (env->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_ERROR:
		snprintf(buf, len, "error %s (%d) %s: %s",
			 du_error_name(env->error->code), (int)env->error->code,
			 id, env->error->message ? env->error->message : "");
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_FIRED:
		snprintf(buf, len, "fired key=%" PRIu64 " deadline=%" PRIu64
			 " fired_at=%" PRIu64 " count=%" PRIu64 " %s",
			 env->fired->key, env->fired->deadline_ns,
			 env->fired->fired_at_ns, env->fired->fire_count, id);
		break;
	default:
		snprintf(buf, len, "%s %s", body_name(env->body_case), id);
	}
	return buf;
}

static const char *rc_text(int rc, const struct du_conn *c)
{
	switch (rc) {
	case DU_TIMEOUT:
		return "timed out";
	case DU_EOF:
		return c->reset ? "connection reset by the daemon"
				: "connection closed by the daemon";
	case DU_BAD:
		return bwp_strerror(c->bad);
	}
	return "frame";
}

static void keep_fire(struct du_conn *c, du_env *env)
{
	if (c->kept_len == c->kept_cap) {
		size_t ncap = c->kept_cap ? c->kept_cap * 2 : 64;
		struct du_kept *nk = malloc(ncap * sizeof(*nk));

		ck_assert_ptr_nonnull(nk);
		for (size_t i = 0; i < c->kept_len; i++)
			nk[i] = c->kept[(c->kept_head + i) % c->kept_cap];
		free(c->kept);
		c->kept = nk;
		c->kept_cap = ncap;
		c->kept_head = 0;
	}
	c->kept[(c->kept_head + c->kept_len) % c->kept_cap] =
		(struct du_kept){ env, c->rx_ns };
	c->kept_len++;
}

size_t du_kept_fires(const struct du_conn *c)
{
	return c->kept_len;
}

/* The next frame that is not a Fired (those are kept), or fail. */
static du_env *next_non_fire(struct du_conn *c, const char *awaited)
{
	uint64_t deadline = deadline_in(DU_WAIT_MS);

	for (;;) {
		du_env *env;
		int rc = du_recv(c, ms_until(deadline), &env);

		if (rc != DU_FRAME)
			ck_abort_msg("waiting for %s: %s", awaited, rc_text(rc, c));
		if (env->body_case != BITWHEEL__V1__ENVELOPE__BODY_FIRED)
			return env;
		keep_fire(c, env);
	}
}

du_env *du_expect_reply(struct du_conn *c, uint64_t id, int bc)
{
	char what[64], got[512];
	du_env *env;

	snprintf(what, sizeof(what), "%s id=%" PRIu64, body_name(bc), id);
	env = next_non_fire(c, what);
	if ((int)env->body_case != bc || !env->has_request_id ||
	    env->request_id != id) {
		du_describe(env, got, sizeof(got));
		bwp_frame_free(env);
		ck_abort_msg("expected %s, got %s", what, got);
	}
	return env;
}

void du_expect_error(struct du_conn *c, bool with_id, uint64_t id, int code)
{
	char what[96], got[512];
	du_env *env;
	bool ok;

	if (with_id)
		snprintf(what, sizeof(what), "error %s id=%" PRIu64,
			 du_error_name(code), id);
	else
		snprintf(what, sizeof(what), "error %s without request_id",
			 du_error_name(code));
	env = next_non_fire(c, what);
	ok = env->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR &&
	     env->error->has_code && (int)env->error->code == code &&
	     (with_id ? env->has_request_id && env->request_id == id
		      : !env->has_request_id);
	du_describe(env, got, sizeof(got));
	if (ok)
		ck_assert_msg(env->error->message != NULL && env->error->message[0],
			      "%s carries no message", got);
	bwp_frame_free(env);
	ck_assert_msg(ok, "expected %s, got %s", what, got);
}

du_env *du_expect_fire(struct du_conn *c, int timeout_ms, uint64_t *rx_ns)
{
	char got[512];
	du_env *env;
	int rc;

	if (c->kept_len > 0) {
		struct du_kept k = c->kept[c->kept_head];

		c->kept_head = (c->kept_head + 1) % c->kept_cap;
		c->kept_len--;
		if (rx_ns)
			*rx_ns = k.rx_ns;
		return k.env;
	}
	rc = du_recv(c, timeout_ms, &env);
	if (rc != DU_FRAME)
		ck_abort_msg("waiting %d ms for a fire: %s", timeout_ms,
			     rc_text(rc, c));
	if (env->body_case != BITWHEEL__V1__ENVELOPE__BODY_FIRED) {
		du_describe(env, got, sizeof(got));
		bwp_frame_free(env);
		ck_abort_msg("expected a fire, got %s", got);
	}
	if (rx_ns)
		*rx_ns = c->rx_ns;
	return env;
}

void du_expect_quiet(struct du_conn *c, int ms)
{
	char got[512];
	du_env *env;
	int rc;

	ck_assert_msg(c->kept_len == 0, "%zu fires arrived earlier", c->kept_len);
	rc = du_recv(c, ms, &env);
	if (rc == DU_FRAME) {
		du_describe(env, got, sizeof(got));
		bwp_frame_free(env);
		ck_abort_msg("expected nothing for %d ms, got %s", ms, got);
	}
	ck_assert_msg(rc == DU_TIMEOUT, "expected nothing for %d ms: %s", ms,
		      rc_text(rc, c));
}

void du_expect_eof(struct du_conn *c, int timeout_ms)
{
	char got[512];
	du_env *env;
	int rc;

	ck_assert_msg(c->kept_len == 0, "%zu fires arrived before", c->kept_len);
	rc = du_recv(c, timeout_ms, &env);
	if (rc == DU_FRAME) {
		du_describe(env, got, sizeof(got));
		bwp_frame_free(env);
		ck_abort_msg("expected the daemon to close the connection, got %s",
			     got);
	}
	ck_assert_msg(rc == DU_EOF, "expected the daemon to close the connection within %d ms: %s",
		      timeout_ms, rc_text(rc, c));
}

du_env *du_hello(struct du_conn *c, const char *session)
{
	du_env *r;

	du_send_hello(c, 1, session);
	r = du_expect_reply(c, 1, BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY);
	return r;
}

du_env *du_hello_opts(struct du_conn *c, const char *session,
		      const struct du_hello_opts *o)
{
	DU_SEND_ONE(du_pack_hello_opts(&b_, 1, session, o));
	return du_expect_reply(c, 1, BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY);
}

struct du_conn *du_open_opts(const struct du_daemon *d, const char *session,
			     const struct du_hello_opts *o)
{
	struct du_conn *c = du_connect(d->sock);

	bwp_frame_free(du_hello_opts(c, session, o));
	return c;
}

struct du_hello_opts du_consumer_opts(uint32_t window, uint64_t ack_timeout_ns)
{
	struct du_hello_opts o = {
		.role = BITWHEEL__V1__ROLE__CONSUMER, .has_window = window != 0,
		.window = window, .ack_timeout_ns = ack_timeout_ns,
		.has_auto_ack = true, .auto_ack = false,
	};

	return o;
}

const struct du_hello_opts du_producer_opts = { .role = BITWHEEL__V1__ROLE__PRODUCER };

struct du_conn *du_open_consumer(const struct du_daemon *d, const char *session,
				 uint32_t window, uint64_t ack_timeout_ns)
{
	struct du_hello_opts o = du_consumer_opts(window, ack_timeout_ns);

	return du_open_opts(d, session, &o);
}

struct du_conn *du_open_producer(const struct du_daemon *d, const char *session)
{
	return du_open_opts(d, session, &du_producer_opts);
}

struct du_conn *du_open(const struct du_daemon *d, const char *session)
{
	struct du_conn *c = du_connect(d->sock);

	bwp_frame_free(du_hello(c, session));
	return c;
}

du_env *du_schedule(struct du_conn *c, uint64_t id, const struct du_sched *s)
{
	du_send_schedule(c, id, s);
	return du_expect_reply(c, id, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY);
}

bool du_cancel(struct du_conn *c, uint64_t id, uint64_t key)
{
	du_env *r;
	bool pending;

	du_send_cancel(c, id, key);
	r = du_expect_reply(c, id, BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY);
	ck_assert_msg(r->cancel_reply->has_pending, "CancelReply without pending");
	pending = r->cancel_reply->pending;
	bwp_frame_free(r);
	return pending;
}

du_env *du_stats(struct du_conn *c, uint64_t id)
{
	du_send_stats(c, id);
	return du_expect_reply(c, id, BITWHEEL__V1__ENVELOPE__BODY_STATS_REPLY);
}

void du_send_list(struct du_conn *c, uint64_t id, const char *session,
		  uint32_t limit, uint64_t cursor)
{
	du_env env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__ListSessions ls = BITWHEEL__V1__LIST_SESSIONS__INIT;
	Bitwheel__V1__ListTimers lt = BITWHEEL__V1__LIST_TIMERS__INIT;

	env.has_request_id = 1;
	env.request_id = id;
	if (session) {
		lt.has_session = 1;
		lt.session.data = (uint8_t *)session;
		lt.session.len = strlen(session);
		lt.has_limit = limit != 0;
		lt.limit = limit;
		lt.has_cursor = cursor != 0;
		lt.cursor = cursor;
		env.body_case = BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS;
		env.list_timers = &lt;
	} else {
		ls.has_limit = limit != 0;
		ls.limit = limit;
		ls.has_cursor = cursor != 0;
		ls.cursor = cursor;
		env.body_case = BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS;
		env.list_sessions = &ls;
	}
	du_send_env(c, &env);
}

du_env *du_list(struct du_conn *c, uint64_t id, const char *session,
		uint32_t limit, uint64_t cursor)
{
	du_send_list(c, id, session, limit, cursor);
	return du_expect_reply(c, id, session ?
			       BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS_REPLY :
			       BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS_REPLY);
}

const Bitwheel__V1__SessionInfo *du_session_in(const du_env *e, const char *name)
{
	const Bitwheel__V1__ListSessionsReply *lr = e->list_sessions_reply;
	size_t len = strlen(name);

	for (size_t i = 0; i < lr->n_sessions; i++) {
		const Bitwheel__V1__SessionInfo *s = lr->sessions[i];

		if (s->has_name && s->name.len == len && !memcmp(s->name.data, name, len))
			return s;
	}
	return NULL;
}

du_env *du_fresh_stats(const struct du_daemon *d)
{
	struct du_conn *c = du_open(d, NULL);
	du_env *r = du_stats(c, 2);

	du_conn_free(c);
	return r;
}

void du_assert_serving(const struct du_daemon *d)
{
	bwp_frame_free(du_fresh_stats(d));
}

uint64_t du_check_fire_time(const Bitwheel__V1__Fired *f, uint64_t rx_ns,
			    uint64_t res_ns)
{
	uint64_t bound = res_ns + du_margin_ns();

	ck_assert_msg(f->has_deadline_ns && f->has_fired_at_ns,
		      "Fired key %" PRIu64 " without deadline_ns or fired_at_ns",
		      f->key);
	ck_assert_msg(f->fired_at_ns >= f->deadline_ns,
		      "key %" PRIu64 " fired early: fired_at %" PRIu64 " < deadline %" PRIu64,
		      f->key, f->fired_at_ns, f->deadline_ns);
	ck_assert_msg(rx_ns >= f->deadline_ns,
		      "key %" PRIu64 " received %" PRIu64 " ns before its deadline",
		      f->key, f->deadline_ns - rx_ns);
	ck_assert_msg(f->fired_at_ns - f->deadline_ns <= bound,
		      "key %" PRIu64 " fired %.3f ms late (bound %.3f ms)", f->key,
		      (double)(f->fired_at_ns - f->deadline_ns) / 1e6,
		      (double)bound / 1e6);
	ck_assert_msg(rx_ns - f->deadline_ns <= bound,
		      "key %" PRIu64 " received %.3f ms after its deadline (bound %.3f ms)",
		      f->key, (double)(rx_ns - f->deadline_ns) / 1e6,
		      (double)bound / 1e6);
	return rx_ns - f->deadline_ns;
}

uint64_t du_next_period(uint64_t first, uint64_t period, uint64_t fired_ns)
{
	uint64_t k = fired_ns >= first ? (fired_ns - first) / period + 1 : 1;

	return first + k * period;
}

/* ---- processes ------------------------------------------------------ */

void du_proc_start(struct du_proc *p, const char *const *argv,
		   const char *const *env)
{
	const char *const *run;
	char *words;
	int outp[2], errp[2], nullfd;

	memset(p, 0, sizeof(*p));
	run = wrap_argv(argv, &words);
	ck_assert_msg(pipe2(outp, O_CLOEXEC) == 0 && pipe2(errp, O_CLOEXEC) == 0,
		      "pipe2: %s", strerror(errno));
	nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_msg(nullfd >= 0, "open /dev/null: %s", strerror(errno));
	p->started_ns = du_now_ns();
	p->pid = fork();
	ck_assert_msg(p->pid >= 0, "fork: %s", strerror(errno));
	if (p->pid == 0) {
		sigset_t none;

		dup2(nullfd, 0);
		dup2(outp[1], 1);
		dup2(errp[1], 2);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
			const char *eq = strchr(env[i], '=');

			if (eq == NULL) {
				unsetenv(env[i]);
			} else {
				char name[256];

				snprintf(name, sizeof(name), "%.*s",
					 (int)(eq - env[i]), env[i]);
				setenv(name, eq + 1, 1);
			}
		}
		built_env();
		execvp(run[0], (char *const *)run);
		dprintf(2, "daemonutil: exec %s: %s\n", run[0], strerror(errno));
		_exit(127);
	}
	wrap_free(run, words);
	close(outp[1]);
	close(errp[1]);
	close(nullfd);
	p->out_fd = outp[0];
	p->err_fd = errp[0];
}

static void append(char **buf, size_t *len, size_t *cap, const char *data,
		   size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t ncap = (*len + n + 1) * 2;
		char *nb = realloc(*buf, ncap);

		ck_assert_ptr_nonnull(nb);
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
}

/* Read what the pipes hold, waiting at most ms; false once both are shut. */
static bool proc_pump(struct du_proc *p, int ms)
{
	struct pollfd pf[2];
	int nf = 0;
	char buf[8192];

	if (p->out_fd >= 0)
		pf[nf++] = (struct pollfd){ p->out_fd, POLLIN, 0 };
	if (p->err_fd >= 0)
		pf[nf++] = (struct pollfd){ p->err_fd, POLLIN, 0 };
	if (nf == 0)
		return false;
	if (poll(pf, (nfds_t)nf, ms) <= 0)
		return true;
	for (int i = 0; i < nf; i++) {
		bool is_out = pf[i].fd == p->out_fd;
		ssize_t n;

		if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = read(pf[i].fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(pf[i].fd);
			if (is_out)
				p->out_fd = -1;
			else
				p->err_fd = -1;
			continue;
		}
		if (is_out)
			append(&p->out, &p->out_len, &p->out_cap, buf, (size_t)n);
		else
			append(&p->err, &p->err_len, &p->err_cap, buf, (size_t)n);
	}
	return true;
}

void du_proc_finish(struct du_proc *p, int timeout_ms, struct du_result *r)
{
	uint64_t deadline = deadline_in(timeout_ms);
	int st = 0;
	bool reaped = false;

	memset(r, 0, sizeof(*r));
	r->status = -1;
	for (;;) {
		/* The daemons the process talks to go on notifying. */
		read_live_notes();
		if (!reaped && waitpid(p->pid, &st, WNOHANG) == p->pid)
			reaped = true;
		if (reaped && p->out_fd < 0 && p->err_fd < 0)
			break;
		if (ms_until(deadline) == 0) {
			r->timed_out = true;
			break;
		}
		if (!proc_pump(p, ms_until(deadline) < 20 ? ms_until(deadline) : 20) &&
		    !reaped)
			sleep_ns(2 * DU_MS);
	}
	if (!reaped) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &st, 0);
		/* Output written before the kill is still worth showing. */
		while (proc_pump(p, 0) && (p->out_fd >= 0 || p->err_fd >= 0))
			;
	}
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->err_fd >= 0)
		close(p->err_fd);
	r->elapsed_ns = du_now_ns() - p->started_ns;
	if (!r->timed_out && WIFEXITED(st))
		r->status = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		r->signal = WTERMSIG(st);
	if (p->out == NULL)
		append(&p->out, &p->out_len, &p->out_cap, "", 0);
	if (p->err == NULL)
		append(&p->err, &p->err_len, &p->err_cap, "", 0);
	r->out = p->out;
	r->err = p->err;
	memset(p, 0, sizeof(*p));
}

void du_run(const char *const *argv, const char *const *env, int timeout_ms,
	    struct du_result *r)
{
	struct du_proc p;

	du_proc_start(&p, argv, env);
	du_proc_finish(&p, timeout_ms, r);
}

void du_result_free(struct du_result *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

const char *du_result_describe(const struct du_result *r, char *buf, size_t len)
{
	char how[64];

	if (r->timed_out)
		snprintf(how, sizeof(how), "timed out");
	else if (r->signal)
		snprintf(how, sizeof(how), "killed by signal %d", r->signal);
	else
		snprintf(how, sizeof(how), "exit %d", r->status);
	snprintf(buf, len, "%s; stdout: [%.600s] stderr: [%.600s]", how,
		 r->out ? r->out : "", r->err ? r->err : "");
	return buf;
}

/* ---- small things ------------------------------------------------------ */

void du_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

bool du_have_tool(const char *name)
{
	const char *path = getenv("PATH");
	char dirs[4096], buf[PATH_MAX];

	if (path == NULL || path[0] == '\0')
		path = "/usr/local/bin:/usr/bin:/bin";
	snprintf(dirs, sizeof(dirs), "%s", path);
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d != NULL;
	     d = strtok_r(NULL, ":", &save))
		if ((size_t)snprintf(buf, sizeof(buf), "%s/%s", d, name) < sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return true;
	return false;
}

unsigned long du_raise_nofile(unsigned long n)
{
	struct rlimit rl;

	ck_assert_msg(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit: %s",
		      strerror(errno));
	if (rl.rlim_cur < n) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= n ?
				      n : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	return (unsigned long)rl.rlim_cur;
}

uint64_t du_proc_status_kb(pid_t pid, const char *field)
{
	char path[64], *text, *p;
	size_t fl = strlen(field);
	unsigned long long kb = 0;

	snprintf(path, sizeof(path), "/proc/%ld/status", (long)pid);
	text = du_read_file(path);
	ck_assert_msg(text != NULL, "%s: %s", path, strerror(errno));
	for (p = text; p != NULL; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, field, fl) == 0 && p[fl] == ':')
			break;
	ck_assert_msg(p != NULL && sscanf(p + fl + 1, " %llu kB", &kb) == 1,
		      "%s has no %s line", path, field);
	free(text);
	return kb;
}

void du_become(uid_t uid)
{
	if (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid(uid) != 0 ||
	    getuid() != uid || setuid(0) == 0) {
		fprintf(stderr, "cannot drop to uid %ld: %s\n", (long)uid, strerror(errno));
		_exit(99);
	}
}

void du_run_as(uid_t uid, const struct du_daemon *d,
	       void (*fn)(const struct du_daemon *d), int timeout_ms)
{
	pid_t pid = fork();

	ck_assert(pid >= 0);
	if (pid == 0) {
		du_become(uid);
		fn(d);
		_exit(0);
	}
	ck_assert_msg(du_wait_child(pid, timeout_ms) == 0, "the uid %ld client failed (see above)",
		      (long)uid);
}

int du_wait_child(pid_t pid, int timeout_ms)
{
	int st = du_wait_status(pid, timeout_ms);

	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

pid_t du_fork_pipe(int *fd)
{
	int pfd[2];
	pid_t pid;

	ck_assert_msg(pipe(pfd) == 0, "pipe: %s", strerror(errno));
	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	close(pfd[pid == 0 ? 0 : 1]);
	*fd = pfd[pid == 0 ? 1 : 0];
	return pid;
}

int du_wait_status(pid_t pid, int timeout_ms)
{
	uint64_t deadline = du_now_ns() + (uint64_t)timeout_ms * DU_MS;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return st;
		ck_assert_msg(r == 0, "waitpid %ld: %s", (long)pid, strerror(errno));
		if (du_now_ns() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			ck_abort_msg("child %ld did not exit within %d ms", (long)pid,
				     timeout_ms);
		}
		/* A daemon sends a STATUS= every 5 s and blocks in sd_notify
		 * once ten are unread: a child that waits on it longer (under
		 * valgrind) would wait for ever. */
		read_live_notes();
		du_sleep_ms(1);
	}
}

const char *du_status_text(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exit %d", WEXITSTATUS(status));
	else
		snprintf(buf, len, "signal %d", WTERMSIG(status));
	return buf;
}

bool du_read_full(int fd, void *buf, size_t len, int timeout_ms)
{
	uint64_t deadline = du_now_ns() + (uint64_t)timeout_ms * DU_MS;
	uint8_t *p = buf;

	while (len > 0) {
		struct pollfd pf = { fd, POLLIN, 0 };
		ssize_t n;

		if (du_now_ns() > deadline)
			return false;
		/* Short polls: the deadline is checked between them. */
		if (poll(&pf, 1, 20) <= 0)
			continue;
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}
