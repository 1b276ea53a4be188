/*
 * check_systemd.c - the systemd units in systemd/: the build filled in the
 * services' ExecStart, the settings the daemon and its clients rely on are
 * there (the options file and its BITWHEELD_OPTS, whose examples the
 * daemon accepts; the metrics timer's: every 15 s, root, off by default),
 * the sysusers.d entry creates the socket's group, systemd-analyze verify
 * has nothing to say about any unit, and each service's offline security
 * exposure is at most 1.2.
 *
 * The checks run on copies in a scratch directory.  "verify" insists that
 * ExecStart names an executable, and the installed paths ($(sbindir),
 * $(bindir)) need not exist during make check, so the copies of the
 * services point ExecStart at the programs in the build tree.  While the
 * daemon is not built (it came later than the units), a renamed copy of
 * /bin/true stands in: verify looks at nothing but the file's existence
 * and mode.
 *
 * Paths come from tests/local.mk:
 *   BW_TOP_SRCDIR    units and the man page (sources)
 *   BW_TOP_BUILDDIR  the generated service units and the built programs
 *   BW_SBINDIR       what the build should have put into bitwheeld's
 *                    ExecStart, BW_BINDIR into bitwheel-metrics'
 */
#define _GNU_SOURCE  /* pipe2, strchrnul */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if !defined(BW_TOP_SRCDIR) || !defined(BW_TOP_BUILDDIR) || \
	!defined(BW_SBINDIR) || !defined(BW_BINDIR)
#error "tests/local.mk passes BW_TOP_SRCDIR, BW_TOP_BUILDDIR, BW_SBINDIR and BW_BINDIR"
#endif

#define SOCKET_SRC BW_TOP_SRCDIR "/systemd/bitwheeld.socket"
#define SERVICE_GEN BW_TOP_BUILDDIR "/systemd/bitwheeld.service"
#define SYSUSERS_SRC BW_TOP_SRCDIR "/systemd/bitwheel.sysusers"
#define DEFAULT_SRC BW_TOP_SRCDIR "/systemd/bitwheeld.default"
#define MANPAGE_SRC BW_TOP_SRCDIR "/daemon/bitwheeld.8"
#define BWCTL_PAGE_SRC BW_TOP_SRCDIR "/client/bwctl.1"
#define DAEMON_BUILT BW_TOP_BUILDDIR "/daemon/bitwheeld"
#define EXEC_INSTALLED BW_SBINDIR "/bitwheeld"
#define METRICS_GEN BW_TOP_BUILDDIR "/systemd/bitwheel-metrics.service"
#define TIMER_SRC BW_TOP_SRCDIR "/systemd/bitwheel-metrics.timer"
#define BWCTL_BUILT BW_TOP_BUILDDIR "/client/bwctl"
#define BWCTL_INSTALLED BW_BINDIR "/bwctl"
/* Debian's prometheus-node-exporter reads its textfile collector there. */
#define TEXTFILE_DIR "/var/lib/prometheus/node-exporter"

/* The daemon's and the clients' compiled-in default: the socket unit must
 * listen exactly there, or nothing finds the daemon without configuration. */
#define SOCKET_PATH "/run/bitwheel/bitwheeld.sock"

/* The bar; Debian's redis-server.service scores 1.2. */
#define MAX_EXPOSURE_TENTHS 12

/* Well under the TCase timeout, so a hung tool is reported as such rather
 * than as Check's anonymous "test timeout expired". */
#define RUN_TIMEOUT_MS 30000
#define TCASE_TIMEOUT_S 60

/* ---- scratch directory, shared by every test of a TCase ---------------- */

/*
 * Built by an unchecked fixture in the runner process, before the tests
 * fork: a test that fails exits without cleaning up, and the teardown,
 * which runs in the runner, still removes the directory.  Setup cannot
 * fail a test from there, so it records why it failed and every test
 * reports that.
 */
static struct {
	char dir[PATH_MAX];
	char socket[PATH_MAX];   /* copy of the socket unit                  */
	char service[PATH_MAX];  /* generated service, ExecStart -> daemon   */
	char metrics[PATH_MAX];  /* bitwheel-metrics.service, -> built bwctl */
	char timer[PATH_MAX];    /* copy of bitwheel-metrics.timer           */
	char mandir[PATH_MAX];   /* MANPATH: man8/bitwheeld.8, man1/bwctl.1  */
	char root[PATH_MAX];     /* empty root for systemd-sysusers          */
	char daemon[PATH_MAX];   /* what the copy's ExecStart runs           */
	char err[1024];          /* setup's failure, empty when it worked    */
} fx;

static void fx_fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void fx_fail(const char *fmt, ...)
{
	va_list ap;

	if (fx.err[0] != '\0')
		return;  /* the first failure is the cause */
	va_start(ap, fmt);
	vsnprintf(fx.err, sizeof(fx.err), fmt, ap);
	va_end(ap);
}

#define assert_setup() ck_assert_msg(fx.err[0] == '\0', "setup: %s", fx.err)

/* The whole file, NUL-terminated, or NULL with errno set. */
static char *read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (f == NULL)
		return NULL;
	do {
		if (cap - len < 4096) {
			char *nb = realloc(buf, cap + 65536);

			if (nb == NULL) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
			cap += 65536;
		}
		n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0);
	if (ferror(f)) {
		free(buf);
		fclose(f);
		errno = EIO;
		return NULL;
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
}

/*
 * Explicit modes: systemd warns about unit files that are world-writable
 * or executable, and a copy of a read-only source (distcheck) would be
 * read-only too.
 */
static bool write_file(const char *path, const char *text, mode_t mode)
{
	size_t len = strlen(text);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	bool ok;

	if (fd < 0)
		return false;
	ok = fchmod(fd, mode) == 0 && write(fd, text, len) == (ssize_t)len;
	return close(fd) == 0 && ok;
}

static bool copy_file(const char *from, const char *to, mode_t mode)
{
	char *text = read_file(from);
	bool ok;

	if (text == NULL)
		return false;
	ok = write_file(to, text, mode);
	free(text);
	return ok;
}

/* Byte-exact copy, for a binary. */
static bool copy_binary(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	ssize_t n = 0;
	int in, out;
	bool ok = true;

	in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return false;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (out < 0) {
		close(in);
		return false;
	}
	while (ok && (n = read(in, buf, sizeof(buf))) > 0)
		ok = write(out, buf, (size_t)n) == n;
	ok = ok && n == 0 && fchmod(out, mode) == 0;
	close(in);
	return close(out) == 0 && ok;
}

/* "ExecStart=<installed path>" followed by the end or the arguments. */
static const char *find_execstart(const char *text, const char *installed)
{
	char key[PATH_MAX + 16];
	size_t n = (size_t)snprintf(key, sizeof(key), "ExecStart=%s", installed);

	for (const char *p = text; p != NULL && *p != '\0';) {
		if (strncmp(p, key, n) == 0 &&
		    (p[n] == '\n' || p[n] == ' ' || p[n] == '\0'))
			return p;
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

/* text with the installed program's path in ExecStart= replaced by exec. */
static char *retarget_execstart(const char *text, const char *installed,
				const char *exec)
{
	const char *hit = find_execstart(text, installed);
	size_t head, oldlen = strlen(installed), execlen = strlen(exec);
	char *out;

	if (hit == NULL)
		return NULL;
	head = (size_t)(hit - text) + strlen("ExecStart=");
	out = malloc(strlen(text) - oldlen + execlen + 1);
	if (out == NULL)
		return NULL;
	memcpy(out, text, head);
	memcpy(out + head, exec, execlen);
	strcpy(out + head + execlen, text + head + oldlen);
	return out;
}

static void fx_path(char *buf, const char *name)
{
	if ((size_t)snprintf(buf, PATH_MAX, "%s/%s", fx.dir, name) >= PATH_MAX)
		fx_fail("scratch path too long: %s/%s", fx.dir, name);
}

/* The generated unit gen, its ExecStart retargeted from installed to
 * exec, written to copy. */
static void fx_retarget(const char *gen, const char *installed,
			const char *exec, const char *copy)
{
	char *text = read_file(gen), *retargeted = NULL;

	if (text == NULL) {
		fx_fail("read %s: %s (make builds it; is it in "
			"EXTRA_tests_check_systemd_DEPENDENCIES?)",
			gen, strerror(errno));
		return;
	}
	retargeted = retarget_execstart(text, installed, exec);
	if (retargeted == NULL)
		fx_fail("%s: no \"ExecStart=%s\" line to retarget", gen,
			installed);
	else if (!write_file(copy, retargeted, 0644))
		fx_fail("write %s: %s", copy, strerror(errno));
	free(retargeted);
	free(text);
}

static void fx_setup(void)
{
	const char *tmp = getenv("TMPDIR");
	char man8[PATH_MAX], page[PATH_MAX], man1[PATH_MAX], page1[PATH_MAX];

	memset(&fx, 0, sizeof(fx));
	if (tmp == NULL || tmp[0] == '\0')
		tmp = "/tmp";
	snprintf(fx.dir, sizeof(fx.dir), "%s/bw-check-systemd-XXXXXX", tmp);
	if (mkdtemp(fx.dir) == NULL) {
		fx_fail("mkdtemp %s: %s", fx.dir, strerror(errno));
		fx.dir[0] = '\0';
		return;
	}
	fx_path(fx.socket, "bitwheeld.socket");
	fx_path(fx.service, "bitwheeld.service");
	fx_path(fx.metrics, "bitwheel-metrics.service");
	fx_path(fx.timer, "bitwheel-metrics.timer");
	fx_path(fx.mandir, "man");
	fx_path(man8, "man/man8");
	fx_path(page, "man/man8/bitwheeld.8");
	fx_path(man1, "man/man1");
	fx_path(page1, "man/man1/bwctl.1");
	fx_path(fx.root, "root");
	if (fx.err[0] != '\0')
		return;

	if (!copy_file(SOCKET_SRC, fx.socket, 0644))
		fx_fail("copy %s: %s", SOCKET_SRC, strerror(errno));
	if (!copy_file(TIMER_SRC, fx.timer, 0644))
		fx_fail("copy %s: %s", TIMER_SRC, strerror(errno));

	if (access(DAEMON_BUILT, X_OK) == 0) {
		snprintf(fx.daemon, sizeof(fx.daemon), "%s", DAEMON_BUILT);
	} else {
		fx_path(fx.daemon, "bitwheeld");
		if (!copy_binary("/bin/true", fx.daemon, 0755))
			fx_fail("copy /bin/true: %s", strerror(errno));
		fprintf(stderr, "note: %s not built; ExecStart runs a copy "
			"of /bin/true\n", DAEMON_BUILT);
	}

	fx_retarget(SERVICE_GEN, EXEC_INSTALLED, fx.daemon, fx.service);
	fx_retarget(METRICS_GEN, BWCTL_INSTALLED, BWCTL_BUILT, fx.metrics);

	if (mkdir(fx.mandir, 0755) != 0 || mkdir(man8, 0755) != 0 ||
	    !copy_file(MANPAGE_SRC, page, 0644) || mkdir(man1, 0755) != 0 ||
	    !copy_file(BWCTL_PAGE_SRC, page1, 0644))
		fx_fail("man page copy %s: %s", page, strerror(errno));
	if (mkdir(fx.root, 0755) != 0)
		fx_fail("mkdir %s: %s", fx.root, strerror(errno));
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) != 0)
		fprintf(stderr, "warning: cannot remove %s: %s\n", path,
			strerror(errno));
	return 0;
}

static void fx_teardown(void)
{
	if (fx.dir[0] != '\0')
		nftw(fx.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- running the systemd tools ----------------------------------------- */

struct run {
	int status;       /* exit code; -1 when killed or not run     */
	bool timed_out;
	char *out, *err;  /* everything written, NUL-terminated       */
};

static void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* name's full path in buf, searching PATH like execvp would. */
static bool find_tool(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096];

	if (path == NULL || path[0] == '\0')
		path = "/usr/local/bin:/usr/bin:/bin";
	snprintf(dirs, sizeof(dirs), "%s", path);
	for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d != NULL;
	     d = strtok_r(NULL, ":", &save))
		if ((size_t)snprintf(buf, len, "%s/%s", d, name) < len &&
		    access(buf, X_OK) == 0)
			return true;
	return false;
}

/*
 * The tool's path, or a failed test naming the package that has it: the
 * bare "No such file" of exec would not tell anyone what to install.
 */
static const char *need_tool(const char *name, char *buf, size_t len)
{
	if (!find_tool(name, buf, len))
		ck_abort_msg("%s not found in PATH (%s): install the Debian "
			     "package systemd", name,
			     getenv("PATH") ? getenv("PATH") : "unset");
	return buf;
}

static bool append(char **buf, size_t *len, size_t *cap, const char *data,
		   size_t n)
{
	if (*len + n + 1 > *cap) {
		size_t ncap = (*len + n + 1) * 2;
		char *nb = realloc(*buf, ncap);

		if (nb == NULL)
			return false;
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + *len, data, n);
	*len += n;
	(*buf)[*len] = '\0';
	return true;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Runs argv (argv[0] a full path) with env ("NAME=value", NULL-terminated)
 * added to ours, capturing stdout and stderr apart: a complaint may come
 * on either, and the exposure is on stdout.  Killed after RUN_TIMEOUT_MS.
 */
static void run(char *const argv[], char *const env[], struct run *r)
{
	int outp[2], errp[2];
	size_t olen = 0, ocap = 0, elen = 0, ecap = 0;
	long long deadline = now_ms() + RUN_TIMEOUT_MS;
	struct pollfd pfd[2];
	int open_fds = 2, wstatus;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	r->status = -1;
	ck_assert(append(&r->out, &olen, &ocap, "", 0));
	ck_assert(append(&r->err, &elen, &ecap, "", 0));
	ck_assert_msg(pipe2(outp, O_CLOEXEC) == 0 && pipe2(errp, O_CLOEXEC) == 0,
		      "pipe2: %s", strerror(errno));

	pid = fork();
	ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		/* A group of its own, so a timeout kills whatever the tool
		 * started too (man, a pager) instead of leaving it behind. */
		setpgid(0, 0);
		if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
		    dup2(outp[1], STDOUT_FILENO) < 0 ||
		    dup2(errp[1], STDERR_FILENO) < 0)
			_exit(126);
		for (char *const *e = env; e != NULL && *e != NULL; e++)
			putenv(*e);
		execv(argv[0], argv);
		dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);  /* either side may get there first */
	close(outp[1]);
	close(errp[1]);

	pfd[0] = (struct pollfd){ .fd = outp[0], .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = errp[0], .events = POLLIN };
	while (open_fds > 0) {
		long long left = deadline - now_ms();
		char buf[4096];
		int n;

		if (left <= 0) {
			r->timed_out = true;
			kill(-pid, SIGKILL);
			break;
		}
		n = poll(pfd, 2, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		ck_assert_msg(n >= 0, "poll: %s", strerror(errno));
		for (int i = 0; i < 2; i++) {
			ssize_t got;

			if (pfd[i].fd < 0 || pfd[i].revents == 0)
				continue;
			got = read(pfd[i].fd, buf, sizeof(buf));
			if (got > 0) {
				ck_assert(i == 0 ?
					  append(&r->out, &olen, &ocap, buf,
						 (size_t)got) :
					  append(&r->err, &elen, &ecap, buf,
						 (size_t)got));
			} else if (got == 0 || errno != EINTR) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				open_fds--;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	while (waitpid(pid, &wstatus, 0) < 0)
		ck_assert_msg(errno == EINTR, "waitpid: %s", strerror(errno));
	if (!r->timed_out && WIFEXITED(wstatus))
		r->status = WEXITSTATUS(wstatus);
}

/* A plain, complete transcript: no colours, no pager, no cut lines. */
static char env_colors[] = "SYSTEMD_COLORS=0";
static char env_pager[] = "SYSTEMD_PAGER=cat";
static char env_columns[] = "COLUMNS=200";

/* ---- unit file reading ------------------------------------------------- */

/*
 * The value systemd would use for section/key: the last assignment wins
 * for a single-valued setting, and an empty one resets a list, so the last
 * is what matters for every key checked here.  Copied into buf; NULL when
 * the key is not set.  Whitespace around "=" is ignored like systemd does;
 * continuation lines are not supported (the units use none).
 */
static const char *unit_value(const char *text, const char *section,
			      const char *key, char *buf, size_t len)
{
	bool in_section = false, found = false;
	size_t klen = strlen(key), slen = strlen(section);

	for (const char *line = text; *line != '\0';) {
		const char *end = strchrnul(line, '\n'), *p = line, *q;

		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p < end && *p == '[') {
			in_section = (size_t)(end - p) >= slen + 2 &&
				     strncmp(p + 1, section, slen) == 0 &&
				     p[slen + 1] == ']';
		} else if (in_section && p < end && *p != '#' && *p != ';' &&
			   strncmp(p, key, klen) == 0) {
			q = p + klen;
			while (q < end && (*q == ' ' || *q == '\t'))
				q++;
			if (q < end && *q == '=') {
				const char *v = q + 1, *ve = end;

				while (v < ve && (*v == ' ' || *v == '\t'))
					v++;
				while (ve > v && (ve[-1] == ' ' ||
						  ve[-1] == '\t' ||
						  ve[-1] == '\r'))
					ve--;
				snprintf(buf, len, "%.*s", (int)(ve - v), v);
				found = true;
			}
		}
		line = *end == '\0' ? end : end + 1;
	}
	return found ? buf : NULL;
}

static void assert_setting(const char *text, const char *unit,
			   const char *section, const char *key,
			   const char *want, const char *why)
{
	char buf[512];
	const char *got = unit_value(text, section, key, buf, sizeof(buf));

	ck_assert_msg(got != NULL && strcmp(got, want) == 0,
		      "%s: [%s] %s=%s, want %s=%s (%s)", unit, section, key,
		      got != NULL ? got : "(unset)", key, want, why);
}

/* ---- build ------------------------------------------------------------- */

/* The generated services and the programs they must run when installed. */
static const struct {
	const char *gen, *installed;
} generated[] = {
	{ SERVICE_GEN, EXEC_INSTALLED },
	{ METRICS_GEN, BWCTL_INSTALLED },
};

START_TEST(test_execstart_filled_in)
{
	const char *gen = generated[_i].gen;
	char *text = read_file(gen);

	ck_assert_msg(text != NULL, "read %s: %s", gen, strerror(errno));
	ck_assert_msg(find_execstart(text, generated[_i].installed) != NULL,
		      "%s: no \"ExecStart=%s\": the installed unit would not "
		      "run the installed program", gen, generated[_i].installed);
	free(text);
}
END_TEST

/* A placeholder sed missed would reach systemd as a literal path. */
START_TEST(test_no_placeholder_left)
{
	const char *gen = generated[_i].gen;
	char *text = read_file(gen);
	const char *p;

	ck_assert_msg(text != NULL, "read %s: %s", gen, strerror(errno));
	for (p = strchr(text, '@'); p != NULL; p = strchr(p + 1, '@')) {
		size_t n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyz"
					 "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");

		ck_assert_msg(n == 0 || p[1 + n] != '@',
			      "%s: unsubstituted %.*s", gen, (int)n + 2, p);
	}
	free(text);
}
END_TEST

/* ---- settings the daemon and its clients depend on ------------------------ */

START_TEST(test_socket_settings)
{
	char *text = read_file(SOCKET_SRC);

	ck_assert_msg(text != NULL, "read %s: %s", SOCKET_SRC, strerror(errno));
	assert_setting(text, "bitwheeld.socket", "Socket", "ListenStream",
		       SOCKET_PATH, "the default path of daemon and clients");
	assert_setting(text, "bitwheeld.socket", "Socket", "SocketMode",
		       "0660", "owner and client group only");
	assert_setting(text, "bitwheeld.socket", "Socket", "SocketGroup",
		       "bitwheel", "the group bitwheel.sysusers creates");
	free(text);
}
END_TEST

START_TEST(test_service_settings)
{
	char *text = read_file(SERVICE_GEN);
	char buf[512];

	ck_assert_msg(text != NULL, "read %s: %s", SERVICE_GEN,
		      strerror(errno));
	assert_setting(text, "bitwheeld.service", "Service", "Type", "notify",
		       "the daemon reports READY=1 and pings the watchdog");
	assert_setting(text, "bitwheeld.service", "Service", "Restart",
		       "on-failure", "a crash or a watchdog kill restarts it");
	assert_setting(text, "bitwheeld.service", "Unit", "Requires",
		       "bitwheeld.socket",
		       "the sandbox leaves the daemon no socket of its own");
	/* The options file: optional ("-"), and its variable on the command
	 * line, unquoted, so that systemd splits it at whitespace. */
	ck_assert_msg(unit_value(text, "Service", "EnvironmentFile", buf, sizeof(buf)) &&
		      buf[0] == '-' && strlen(buf) > 18 &&
		      strcmp(buf + strlen(buf) - 18, "/default/bitwheeld") == 0,
		      "bitwheeld.service: EnvironmentFile=%s, want -SYSCONFDIR/default/bitwheeld",
		      buf);
	ck_assert_msg(unit_value(text, "Service", "ExecStart", buf, sizeof(buf)) &&
		      strlen(buf) > 16 && strcmp(buf + strlen(buf) - 16, " $BITWHEELD_OPTS") == 0,
		      "bitwheeld.service: ExecStart=%s does not end in $BITWHEELD_OPTS", buf);
	ck_assert_msg(unit_value(text, "Service", "WatchdogSec", buf,
				 sizeof(buf)) != NULL && buf[0] != '\0' &&
		      strcmp(buf, "0") != 0 && strcmp(buf, "infinity") != 0,
		      "bitwheeld.service: no WatchdogSec=, so a wedged daemon "
		      "would never be restarted");
	/*
	 * Scored by "security", but it must stay off: in a private user
	 * namespace SO_PEERCRED reads every client but root as "nobody", and
	 * named sessions (owned by uid) would be open to all clients.
	 */
	if (unit_value(text, "Service", "PrivateUsers", buf, sizeof(buf)))
		ck_assert_msg(strcmp(buf, "no") == 0 ||
			      strcmp(buf, "false") == 0 || strcmp(buf, "0") == 0 ||
			      buf[0] == '\0',
			      "bitwheeld.service: PrivateUsers=%s breaks "
			      "SO_PEERCRED-based session ownership", buf);
	free(text);
}
END_TEST

/*
 * The options file sets BITWHEELD_OPTS once, empty, and each example in
 * its comments ("#BITWHEELD_OPTS=\"...\"") is options the daemon takes:
 * bitwheeld with them and a last --help parses them all, then exits 0.
 */
START_TEST(test_default_file)
{
	char *text = read_file(DEFAULT_SRC), *line, *save = NULL;
	int set = 0, examples = 0;
	struct stat st;

	ck_assert_msg(text != NULL, "read %s: %s", DEFAULT_SRC, strerror(errno));
	if (stat(DAEMON_BUILT, &st) != 0) {
		fprintf(stderr, "note: %s not built; the examples are not tried\n", DAEMON_BUILT);
		free(text);
		return;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *argv[16] = { DAEMON_BUILT }, *v, *end, *w, *wsave = NULL;
		size_t n = 1;
		struct run r;

		if (strncmp(line, "BITWHEELD_OPTS=", 15) == 0) {
			ck_assert_str_eq(line, "BITWHEELD_OPTS=\"\"");
			set++;
			continue;
		}
		if (strncmp(line, "#BITWHEELD_OPTS=\"", 17) != 0)
			continue;
		v = line + 17;
		end = strrchr(v, '"');
		ck_assert_msg(end != NULL && end[1] == '\0', "%s: unquoted: %s", DEFAULT_SRC, line);
		*end = '\0';
		for (w = strtok_r(v, " \t", &wsave); w; w = strtok_r(NULL, " \t", &wsave)) {
			ck_assert(n < 14);
			argv[n++] = w;
		}
		argv[n++] = "--help";
		argv[n] = NULL;
		run(argv, NULL, &r);
		ck_assert_msg(r.status == 0, "%s: example \"%s\": bitwheeld exits %d: %s",
			      DEFAULT_SRC, v, r.status, r.err);
		run_free(&r);
		examples++;
	}
	ck_assert_int_eq(set, 1);
	ck_assert_int_gt(examples, 0);
	free(text);
}
END_TEST

/*
 * The metrics pair: root (only root gets the daemon-wide counters) with no
 * capabilities, no private user namespace (the daemon's uid must read as
 * itself for bwctl to trust it), writing into Debian's textfile collector
 * directory; the timer every 15 s at 1 s accuracy, enabled through
 * timers.target, the service never on its own.
 */
START_TEST(test_metrics_settings)
{
	char *svc = read_file(METRICS_GEN), *tmr = read_file(TIMER_SRC);
	char buf[512];

	ck_assert_msg(svc != NULL && tmr != NULL, "read %s, %s: %s", METRICS_GEN,
		      TIMER_SRC, strerror(errno));
	assert_setting(svc, "bitwheel-metrics.service", "Service", "Type",
		       "oneshot", "one file written per run");
	assert_setting(svc, "bitwheel-metrics.service", "Service", "ExecStart",
		       BWCTL_INSTALLED " metrics --output ${BITWHEEL_METRICS_FILE}",
		       "bwctl writes the file atomically itself");
	assert_setting(svc, "bitwheel-metrics.service", "Service", "Environment",
		       "BITWHEEL_METRICS_FILE=" TEXTFILE_DIR "/bitwheel.prom",
		       "Debian's textfile collector directory");
	assert_setting(svc, "bitwheel-metrics.service", "Service",
		       "ReadWritePaths", "-" TEXTFILE_DIR,
		       "the only place it writes");
	assert_setting(svc, "bitwheel-metrics.service", "Service",
		       "CapabilityBoundingSet", "", "root without capabilities");
	ck_assert_msg(unit_value(svc, "Service", "User", buf, sizeof(buf)) == NULL ||
		      strcmp(buf, "root") == 0,
		      "bitwheel-metrics.service: User=%s gets no daemon-wide "
		      "metrics (root's alone)", buf);
	if (unit_value(svc, "Service", "PrivateUsers", buf, sizeof(buf)))
		ck_assert_msg(strcmp(buf, "no") == 0 || buf[0] == '\0',
			      "bitwheel-metrics.service: PrivateUsers=%s makes "
			      "the daemon's uid 'nobody', whom bwctl refuses", buf);
	ck_assert_msg(unit_value(svc, "Install", "WantedBy", buf, sizeof(buf)) == NULL,
		      "bitwheel-metrics.service: the timer runs it, not a target");
	assert_setting(tmr, "bitwheel-metrics.timer", "Timer", "OnUnitActiveSec",
		       "15s", "the period");
	assert_setting(tmr, "bitwheel-metrics.timer", "Timer", "AccuracySec",
		       "1s", "the default minute would blur the period");
	assert_setting(tmr, "bitwheel-metrics.timer", "Install", "WantedBy",
		       "timers.target", "systemctl enable --now starts it");
	free(svc);
	free(tmr);
}
END_TEST

/* The group must exist for systemd to chown the socket; ask the real
 * parser, against an empty root, what the entry creates. */
START_TEST(test_sysusers_creates_socket_group)
{
	char tool[PATH_MAX], rootarg[PATH_MAX + 16], want[160], group[128];
	char *socket_text = read_file(SOCKET_SRC);
	struct run r;

	assert_setup();
	ck_assert_msg(socket_text != NULL, "read %s: %s", SOCKET_SRC,
		      strerror(errno));
	ck_assert(unit_value(socket_text, "Socket", "SocketGroup", group,
			     sizeof(group)) != NULL);
	free(socket_text);
	snprintf(rootarg, sizeof(rootarg), "--root=%s", fx.root);
	snprintf(want, sizeof(want), "Creating group '%s'", group);

	char *argv[] = { (char *)need_tool("systemd-sysusers", tool,
					   sizeof(tool)),
			 "--dry-run", rootarg, SYSUSERS_SRC, NULL };
	char *env[] = { env_colors, NULL };

	run(argv, env, &r);
	ck_assert_msg(!r.timed_out, "systemd-sysusers timed out");
	ck_assert_msg(r.status == 0 && (strstr(r.err, want) != NULL ||
					strstr(r.out, want) != NULL),
		      "systemd-sysusers --dry-run %s: exit %d, want \"%s\"\n"
		      "stdout:\n%s\nstderr:\n%s", SYSUSERS_SRC, r.status, want,
		      r.out, r.err);
	run_free(&r);
}
END_TEST

/* ---- systemd-analyze verify ------------------------------------------- */

START_TEST(test_verify_clean)
{
	char tool[PATH_MAX], manpath[PATH_MAX + 16];
	struct run r;

	assert_setup();
	/*
	 * MANPATH holding only our pages makes verify's Documentation= check
	 * find man:bitwheeld(8) and man:bwctl(1) before they are installed.
	 * Without man(1) there is nothing to check it with, and verify would
	 * complain about the missing program rather than about the units.
	 */
	char manbuf[PATH_MAX];
	bool man = find_tool("man", manbuf, sizeof(manbuf));
	char *argv[] = { (char *)need_tool("systemd-analyze", tool,
					   sizeof(tool)),
			 "verify", man ? "--man=yes" : "--man=no",
			 fx.socket, fx.service, fx.metrics, fx.timer, NULL };
	char *env[] = { manpath, env_colors, env_pager, NULL };

	if (!man)
		fprintf(stderr, "note: man(1) missing; verify skips "
			"Documentation=\n");
	snprintf(manpath, sizeof(manpath), "MANPATH=%s", fx.mandir);
	run(argv, env, &r);
	ck_assert_msg(!r.timed_out, "systemd-analyze verify timed out");
	ck_assert_msg(r.status == 0 && r.out[0] == '\0' && r.err[0] == '\0',
		      "systemd-analyze verify %s %s %s %s: exit %d\n"
		      "stdout:\n%s\nstderr:\n%s", fx.socket, fx.service,
		      fx.metrics, fx.timer, r.status, r.out, r.err);
	run_free(&r);
}
END_TEST

/* ---- systemd-analyze security ------------------------------------------ */

/* "N.N" after "Overall exposure level for <unit>: ", in tenths, or -1. */
static int exposure_tenths(const char *out)
{
	const char *p = strstr(out, "Overall exposure level for ");
	unsigned whole, tenth;
	char dot;

	if (p == NULL || (p = strstr(p, ": ")) == NULL)
		return -1;
	if (sscanf(p + 2, "%u%c%1u", &whole, &dot, &tenth) != 3 || dot != '.')
		return -1;
	return (int)(whole * 10 + tenth);
}

/* The failing assessments ("✗" lines), to show what raised the score. */
static void failed_items(const char *out, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (const char *line = out; *line != '\0' && used + 1 < len;) {
		const char *end = strchrnul(line, '\n');

		if (strncmp(line, "\xe2\x9c\x97", 3) == 0)  /* U+2717 */
			used += (size_t)snprintf(buf + used, len - used,
						 "%.*s\n", (int)(end - line),
						 line);
		line = *end == '\0' ? end : end + 1;
	}
}

/* Each service: bitwheeld's (_i 0), bitwheel-metrics' (_i 1). */
START_TEST(test_security_exposure)
{
	char tool[PATH_MAX], items[4096];
	char *unit = _i == 0 ? fx.service : fx.metrics;
	struct run r;
	int tenths;

	assert_setup();
	char *argv[] = { (char *)need_tool("systemd-analyze", tool,
					   sizeof(tool)),
			 "security", "--offline=yes", "--no-pager", unit,
			 NULL };
	char *env[] = { env_colors, env_pager, env_columns, NULL };

	run(argv, env, &r);
	ck_assert_msg(!r.timed_out, "systemd-analyze security timed out");
	tenths = exposure_tenths(r.out);
	ck_assert_msg(r.status == 0 && tenths >= 0,
		      "systemd-analyze security --offline=yes %s: exit %d, "
		      "no exposure level\nstdout:\n%s\nstderr:\n%s",
		      unit, r.status, r.out, r.err);
	failed_items(r.out, items, sizeof(items));
	ck_assert_msg(tenths <= MAX_EXPOSURE_TENTHS,
		      "%s: exposure %d.%d, want at most %d.%d; "
		      "failing items:\n%s", unit, tenths / 10, tenths % 10,
		      MAX_EXPOSURE_TENTHS / 10, MAX_EXPOSURE_TENTHS % 10,
		      items);
	run_free(&r);
}
END_TEST

static Suite *systemd_suite(void)
{
	Suite *s = suite_create("systemd");
	TCase *tc;

	tc = tcase_create("build");
	tcase_add_loop_test(tc, test_execstart_filled_in, 0, 2);
	tcase_add_loop_test(tc, test_no_placeholder_left, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("settings");
	tcase_add_unchecked_fixture(tc, fx_setup, fx_teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_socket_settings);
	tcase_add_test(tc, test_service_settings);
	tcase_add_test(tc, test_default_file);
	tcase_add_test(tc, test_metrics_settings);
	tcase_add_test(tc, test_sysusers_creates_socket_group);
	suite_add_tcase(s, tc);

	tc = tcase_create("verify");
	tcase_add_unchecked_fixture(tc, fx_setup, fx_teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_test(tc, test_verify_clean);
	suite_add_tcase(s, tc);

	tc = tcase_create("security");
	tcase_add_unchecked_fixture(tc, fx_setup, fx_teardown);
	tcase_set_timeout(tc, TCASE_TIMEOUT_S);
	tcase_add_loop_test(tc, test_security_exposure, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(systemd_suite());
	int failed;

	/* Explicit, so CK_FORK=no in the environment cannot turn it off:
	 * only in fork mode do the TCase timeouts hold, and a test that
	 * crashes fails alone. */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
