/*
 * check_bwctl.c - the built client/bwctl run as a program against real
 * bitwheeld processes on temporary sockets: its commands, output formats
 * and exit codes as bwctl(1) describes them.
 *
 * TCases:
 *   schedule   --session prints the deadline and exits 0; without a
 *              session it waits and prints the fire; --every with --count;
 *              --at-monotonic, --replace, hex keys; --leeway picks the
 *              lane; DUPLICATE_KEY exits 4; --clock boottime (its
 *              deadline on CLOCK_BOOTTIME, clock=boottime in list);
 *              a daemon stopping under a waiting bwctl exits 4.
 *   cancel     exit 0 when the timer was pending, 1 when not.
 *   watch      --json lines parse (key, payload byte for byte, deadline_ns,
 *              fired_ns, late_us, fire_count) for queued and live fires;
 *              --timeout exits 1; schedule and cancel are producers that
 *              take no fire, and run beside a watch; --count's extra
 *              fires and the dropped-periodic warning.
 *   reconnect  a watch across a SIGTERM restart on a state directory
 *              prints every key (repeats marked redelivered) with nothing
 *              done to reconnect; --no-reconnect exits 4 at once;
 *              --timeout bounds the reconnecting to a daemon gone.
 *   shared     protocol 2's sessions end to end: 40 sequential schedules
 *              then one watch --count 40 gets all 40; 8 concurrent
 *              producers beside a watch: every fire exactly once; two
 *              watches of one session: disjoint sets whose union is all;
 *              a watch killed mid-stream: the next one gets every fire
 *              the first did not print, and repeats only marked ones.
 *   owner      session names per uid, as root: --owner 65534 schedules,
 *              cancels and watches (drains) uid 65534's session, which
 *              root's own of the same name does not see; uid 65534 (run
 *              through setpriv(1)) naming root's gets PERMISSION_DENIED and
 *              exit 4.  Not root: a SKIP note.
 *   stats      the table and --json agree with the daemon's own counters,
 *              the caller's uid's among them (3 connections, 2 sessions,
 *              3 timers, 1 Hz of periodic fires).
 *   metrics    bwctl metrics after known activity (20 fires, one
 *              DUPLICATE_KEY, one refusal at --max-clients, one connection
 *              closed after FRAME_TOO_LARGE, a journaled change, a
 *              snapshot, a manual consumer's 3 fires acknowledged, one of
 *              them after it was taken back and redelivered; 17 limits off
 *              their defaults): the output parses as the Prometheus text
 *              format (HELP/TYPE before samples, counters _total, the
 *              histograms cumulative with +Inf equal to _count, # EOF last;
 *              promtool accepts it when installed) and the values match:
 *              queue-wait counts are the first hand-outs, ack-latency's
 *              the acknowledged fires, each limit gauge the option's
 *              value, the process_* figures plausible; uid 65534's
 *              (through setpriv) has its own figures, the limits, and none
 *              of the daemon-wide ones.  Loaded (3,000 oneshot timers
 *              pipelined, 8 periodic ones): each lane's lateness histogram
 *              counts exactly its fired counter in one scrape, the oneshot
 *              queue wait all 3,000 and no ack latency (auto-ack), written
 *              by --output (mode 0644, no temporary left; a missing
 *              directory fails, exit 4); promtool accepts it.  --output
 *              refuses a directory that is a symbolic link, writable by
 *              group or others, or another uid's (exit 4, nothing
 *              written), takes a sticky one, and replaces a link at the
 *              file's name without writing through it.  Restored:
 *              fires read back at a restart count ack latencies but no
 *              queue wait (the new process did not make them).
 *   failures   fires that fail (issue 21): policy shown (exit 1 for no
 *              session, which looking does not create), set and reset,
 *              --json; watch --exec failing for one key: the other
 *              acknowledged, the failing one released with backoff until
 *              max 2 dead-letters it, every run given the fire in BW_* and
 *              the payload on stdin; sessions with the policy and counts;
 *              kick by key (none) and all, the fire back from delivery 1;
 *              a dead letter's watch line with its history; --exec with
 *              --ack-timeout: a command running three ack timeouts keeps
 *              its fire (touched) and is acknowledged, never redelivered.
 *   peer       a stand-in listener of uid 65534: refused, exit 5, its uid
 *              and pid and --daemon-user named, nothing sent; let through
 *              by --daemon-user (before or after the command, number or
 *              name) or $BITWHEEL_DAEMON_USER; a socket bwctl may not open
 *              is said to be a permission matter, not a daemon down.
 *   json       --json on schedule and cancel; every failure one JSON
 *              object on stderr with the usual exit status (the daemon's
 *              refusal with its code, not found, timed out, usage).
 *   usage      exit 2 for usage errors (and with --json, a JSON one), and
 *              for durations the daemon would refuse, in its words; exit
 *              3 naming the socket when the daemon is unreachable (also
 *              as JSON; at the packaged socket, the hint names the
 *              socket unit), --help for bwctl and every command, -V.
 *
 * bwctl's path comes from tests/local.mk (BW_TOP_BUILDDIR).  A small
 * strict JSON parser below checks the --json output.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bitwheel-client.h"
#include "daemonutil.h"
#include "sdcal.h"
#include "testutil.h"

#define RUN_MS DU_WAIT_MS
#define BC(x) BITWHEEL__V1__ENVELOPE__BODY_##x
#define EC(x) BITWHEEL__V1__ERROR_CODE__##x

/*
 * A raw connection attached to session as a producer (it is never sent a
 * fire), for tests that schedule faster than a bwctl per timer.
 */
static struct du_conn *raw_producer(const struct du_daemon *d, const char *session)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Hello h = BITWHEEL__V1__HELLO__INIT;
	struct du_conn *c = du_connect(d->sock);
	du_env *r;

	h.has_protocol_version = 1;
	h.protocol_version = BWP_PROTOCOL_VERSION;
	h.has_session = 1;
	h.session.data = (uint8_t *)session;
	h.session.len = strlen(session);
	h.has_role = 1;
	h.role = BITWHEEL__V1__ROLE__PRODUCER;
	env.has_request_id = 1;
	env.request_id = 1;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	env.hello = &h;
	du_send_env(c, &env);
	r = du_expect_reply(c, 1, BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY);
	ck_assert_int_eq(r->hello_reply->role, BITWHEEL__V1__ROLE__PRODUCER);
	bwp_frame_free(r);
	return c;
}

/* ---- running bwctl ------------------------------------------------------ */

/* Nothing may reach a daemon through the caller's environment. */
static const char *const clean_env[] = { "BITWHEEL_SOCKET", "BITWHEEL_DAEMON_USER", NULL };

/* bwctl [--socket sock] args... (NULL-terminated), with output captured. */
static void bwctl_argv(const char **argv, const char *sock, va_list ap)
{
	size_t n = 0;

	argv[n++] = DU_BWCTL_PATH;
	if (sock != NULL) {
		argv[n++] = "--socket";
		argv[n++] = sock;
	}
	for (const char *a; (a = va_arg(ap, const char *)) != NULL;) {
		ck_assert(n < 30);
		argv[n++] = a;
	}
	argv[n] = NULL;
}

static void bwctl(struct du_result *r, const char *sock, ...) __attribute__((sentinel));
static void bwctl(struct du_result *r, const char *sock, ...)
{
	const char *argv[32];
	va_list ap;

	va_start(ap, sock);
	bwctl_argv(argv, sock, ap);
	va_end(ap);
	du_run(argv, clean_env, RUN_MS, r);
}

static void bwctl_start(struct du_proc *p, const char *sock, ...) __attribute__((sentinel));
static void bwctl_start(struct du_proc *p, const char *sock, ...)
{
	const char *argv[32];
	va_list ap;

	va_start(ap, sock);
	bwctl_argv(argv, sock, ap);
	va_end(ap);
	du_proc_start(p, argv, clean_env);
}

#define ASSERT_EXIT(r, code, what)                                          \
	do {                                                                \
		char d_[1600];                                              \
		ck_assert_msg((r)->status == (code), "%s: expected exit %d, got %s", \
			      (what), (code), du_result_describe((r), d_, sizeof(d_))); \
	} while (0)

/* The unsigned number after "name=" in s, or fail. */
static uint64_t field_u64(const char *s, const char *name)
{
	char pat[64];
	const char *p;
	char *end;
	unsigned long long v;

	snprintf(pat, sizeof(pat), "%s=", name);
	p = strstr(s, pat);
	ck_assert_msg(p != NULL, "no %s= in: %s", name, s);
	p += strlen(pat);
	errno = 0;
	v = strtoull(p, &end, 10);
	ck_assert_msg(errno == 0 && end != p, "bad %s= in: %s", name, s);
	return v;
}

/* The n-th line of s (0-based) in buf; false if there is none. */
static bool line_n(const char *s, int n, char *buf, size_t len)
{
	for (int i = 0; i < n && s != NULL; i++) {
		s = strchr(s, '\n');
		if (s != NULL)
			s++;
	}
	if (s == NULL || *s == '\0')
		return false;
	snprintf(buf, len, "%.*s", (int)strcspn(s, "\n"), s);
	return true;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* ---- a small strict JSON parser -------------------------------------- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_OBJ, J_ARR };

struct jval {
	enum jtype t;
	bool b;
	char num[48];             /* the number's text, for exact integers */
	uint8_t *str;             /* decoded: \u00XX is the byte XX        */
	size_t len;
	bool wide;                /* a \u escape above U+00FF              */
	struct jmem {
		char *key;        /* NULL in an array                     */
		struct jval *v;
	} *mem;
	size_t nmem;
};

static void jfree(struct jval *v)
{
	if (v == NULL)
		return;
	free(v->str);
	for (size_t i = 0; i < v->nmem; i++) {
		free(v->mem[i].key);
		jfree(v->mem[i].v);
	}
	free(v->mem);
	free(v);
}

static void jws(const char **p)
{
	while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')
		(*p)++;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A string at *p (at its opening quote); NULL on a syntax error. */
static uint8_t *jstring(const char **p, size_t *len, bool *wide)
{
	const char *s = *p + 1;
	uint8_t *out = malloc(strlen(s) + 1);
	size_t n = 0;

	ck_assert_ptr_nonnull(out);
	for (;;) {
		unsigned char c = (unsigned char)*s++;

		if (c == '"')
			break;
		if (c == '\0' || c < 0x20) {
			free(out);
			return NULL;
		}
		if (c != '\\') {
			out[n++] = c;
			continue;
		}
		c = (unsigned char)*s++;
		switch (c) {
		case '"': case '\\': case '/':
			out[n++] = c;
			break;
		case 'b': out[n++] = '\b'; break;
		case 'f': out[n++] = '\f'; break;
		case 'n': out[n++] = '\n'; break;
		case 'r': out[n++] = '\r'; break;
		case 't': out[n++] = '\t'; break;
		case 'u': {
			int cp = 0;

			for (int i = 0; i < 4; i++) {
				int h = hexval(s[i]);

				if (h < 0) {
					free(out);
					return NULL;
				}
				cp = cp * 16 + h;
			}
			s += 4;
			if (cp > 0xff)
				*wide = true;
			out[n++] = (uint8_t)cp;
			break;
		}
		default:
			free(out);
			return NULL;
		}
	}
	*p = s;
	*len = n;
	return out;
}

static struct jval *jparse_value(const char **p, int depth);

/* An object, or an array (its members have no key), at *p. */
static struct jval *jparse_members(const char **p, int depth)
{
	struct jval *v = calloc(1, sizeof(*v));
	char close = **p == '[' ? ']' : '}';

	ck_assert_ptr_nonnull(v);
	v->t = close == ']' ? J_ARR : J_OBJ;
	(*p)++;
	jws(p);
	if (**p == close) {
		(*p)++;
		return v;
	}
	for (;;) {
		size_t klen;
		bool wide = false;
		uint8_t *key = NULL;
		struct jval *m;
		struct jmem *nm;

		jws(p);
		if (v->t == J_OBJ) {
			if (**p != '"' || (key = jstring(p, &klen, &wide)) == NULL)
				goto bad;
			key[klen] = '\0';
			jws(p);
			if (**p != ':') {
				free(key);
				goto bad;
			}
			(*p)++;
		}
		m = jparse_value(p, depth + 1);
		if (m == NULL) {
			free(key);
			goto bad;
		}
		nm = realloc(v->mem, (v->nmem + 1) * sizeof(*nm));
		ck_assert_ptr_nonnull(nm);
		v->mem = nm;
		v->mem[v->nmem].key = (char *)key;
		v->mem[v->nmem].v = m;
		v->nmem++;
		jws(p);
		if (**p == ',') {
			(*p)++;
			continue;
		}
		if (**p == close) {
			(*p)++;
			return v;
		}
		goto bad;
	}
bad:
	jfree(v);
	return NULL;
}

static struct jval *jparse_value(const char **p, int depth)
{
	struct jval *v;

	if (depth > 8)
		return NULL;
	jws(p);
	if (**p == '{' || **p == '[')
		return jparse_members(p, depth);
	v = calloc(1, sizeof(*v));
	ck_assert_ptr_nonnull(v);
	if (**p == '"') {
		v->t = J_STR;
		v->str = jstring(p, &v->len, &v->wide);
		if (v->str == NULL)
			goto bad;
		return v;
	}
	if (strncmp(*p, "null", 4) == 0) {
		v->t = J_NULL;
		*p += 4;
		return v;
	}
	if (strncmp(*p, "true", 4) == 0 || strncmp(*p, "false", 5) == 0) {
		v->t = J_BOOL;
		v->b = **p == 't';
		*p += v->b ? 4 : 5;
		return v;
	}
	if (**p == '-' || (**p >= '0' && **p <= '9')) {
		/* JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
		const char *s = *p;
		size_t n;

		v->t = J_NUM;
		if (*s == '-')
			s++;
		if (*s == '0')
			s++;
		else if (*s >= '1' && *s <= '9')
			while (*s >= '0' && *s <= '9')
				s++;
		else
			goto bad;
		if (*s == '.') {
			s++;
			if (!(*s >= '0' && *s <= '9'))
				goto bad;
			while (*s >= '0' && *s <= '9')
				s++;
		}
		if (*s == 'e' || *s == 'E') {
			s++;
			if (*s == '+' || *s == '-')
				s++;
			if (!(*s >= '0' && *s <= '9'))
				goto bad;
			while (*s >= '0' && *s <= '9')
				s++;
		}
		n = (size_t)(s - *p);
		if (n >= sizeof(v->num))
			goto bad;
		memcpy(v->num, *p, n);
		v->num[n] = '\0';
		*p = s;
		return v;
	}
bad:
	jfree(v);
	return NULL;
}

/* One JSON value filling the whole line, or fail the test. */
static struct jval *jparse_line(const char *line)
{
	const char *p = line;
	struct jval *v = jparse_value(&p, 0);

	ck_assert_msg(v != NULL, "not JSON: %s", line);
	jws(&p);
	ck_assert_msg(*p == '\0', "trailing text after the JSON value: %s", line);
	return v;
}

/* obj.key (dotted path for nested objects), or NULL. */
static struct jval *jget(struct jval *v, const char *path)
{
	char head[64];
	size_t n = strcspn(path, ".");

	if (v == NULL || v->t != J_OBJ || n >= sizeof(head))
		return NULL;
	memcpy(head, path, n);
	head[n] = '\0';
	for (size_t i = 0; i < v->nmem; i++)
		if (v->mem[i].key != NULL && strcmp(v->mem[i].key, head) == 0)
			return path[n] ? jget(v->mem[i].v, path + n + 1) : v->mem[i].v;
	return NULL;
}

/* An integer member, exactly. */
static uint64_t ju64(struct jval *v, const char *path)
{
	struct jval *m = jget(v, path);
	char *end;
	unsigned long long x;

	ck_assert_msg(m != NULL, "no \"%s\" in the JSON", path);
	ck_assert_msg(m->t == J_NUM && strspn(m->num, "0123456789") == strlen(m->num),
		      "\"%s\" is not an unsigned integer: %s", path, m->num);
	errno = 0;
	x = strtoull(m->num, &end, 10);
	ck_assert(errno == 0 && *end == '\0');
	return x;
}

/* A string member equal to want (NUL-free), exactly. */
static bool jstr_is(struct jval *v, const char *path, const char *want)
{
	struct jval *m = jget(v, path);

	return m != NULL && m->t == J_STR && m->len == strlen(want) &&
	       memcmp(m->str, want, m->len) == 0;
}

/*
 * --json's failure: the exit status, and stderr exactly one line, one
 * object {"error":{"code":code,"exit":status,"message":"..."}}.  Returns
 * it parsed, for more checks (jfree() it).
 */
static struct jval *json_error(const struct du_result *r, int status, const char *code,
			       const char *what)
{
	struct jval *v;

	ASSERT_EXIT(r, status, what);
	ck_assert_msg(count_lines(r->err) == 1 && r->err[strlen(r->err) - 1] == '\n',
		      "%s: stderr is not one line: %s", what, r->err);
	v = jparse_line(r->err);
	ck_assert_msg(jstr_is(v, "error.code", code) && ju64(v, "error.exit") == (uint64_t)status &&
		      jget(v, "error.message") != NULL && jget(v, "error.message")->t == J_STR,
		      "%s: want code %s exit %d: %s", what, code, status, r->err);
	return v;
}

/* ======================================================================
 * schedule
 * ====================================================================== */

START_TEST(test_schedule_session)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	uint64_t before, after, dl, at;
	char at_text[32];
	du_env *e;

	du_daemon_start(d, NULL);
	before = du_now_ns();
	bwctl(&r, d->sock, "schedule", "--session", "e2e-bwctl", "--key", "7", "--in", "2s",
	      "--payload", "hi", NULL);
	after = du_now_ns();
	ASSERT_EXIT(&r, 0, "schedule --session");
	ck_assert_msg(strncmp(r.out, "scheduled key=7 deadline=", 25) == 0, "stdout: %s", r.out);
	ck_assert_int_eq(count_lines(r.out), 1);
	dl = field_u64(r.out, "deadline");
	ck_assert_msg(dl >= before + 2 * DU_S && dl <= after + 2 * DU_S,
		      "deadline %" PRIu64 " is not now + 2s", dl);
	ck_assert(strstr(r.out, "replaced") == NULL);
	du_result_free(&r);

	/* The same key again: the daemon refuses, exit 4 naming the code. */
	bwctl(&r, d->sock, "schedule", "--session", "e2e-bwctl", "--key", "7", "--in", "1s",
	      NULL);
	ASSERT_EXIT(&r, 4, "duplicate key");
	ck_assert_msg(strstr(r.err, "DUPLICATE_KEY") != NULL, "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-bwctl", "--key", "7", "--in", "3s",
	      "--replace", NULL);
	ASSERT_EXIT(&r, 0, "--replace");
	ck_assert_msg(strstr(r.out, " replaced") != NULL, "stdout: %s", r.out);
	du_result_free(&r);

	/* An absolute deadline and a hex key; --socket after the command. */
	at = du_now_ns() + 3600 * DU_S;
	snprintf(at_text, sizeof(at_text), "%" PRIu64, at);
	bwctl(&r, NULL, "schedule", "--socket", d->sock, "--session", "e2e-bwctl", "--key",
	      "0x10", "--at-monotonic", at_text, NULL);
	ASSERT_EXIT(&r, 0, "--at-monotonic");
	ck_assert_uint_eq(field_u64(r.out, "key"), 16);
	ck_assert_uint_eq(field_u64(r.out, "deadline"), at);
	du_result_free(&r);

	/* Both timers live in the detached session. */
	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->sessions, 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->pending, 2);
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

/* Without --session bwctl waits for the fire and prints it. */
/* UTC y-m-d h:mi:s as Unix seconds, by the test's own arithmetic (days
 * from civil), not the C library's that bwctl uses. */
static int64_t utc_seconds(int y, int m, int d, int h, int mi, int sec)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return (era * 146097 + doe - 719468) * 86400 + h * 3600 + mi * 60 + sec;
}

/* schedule --at (PROTOCOL.md, "Clocks"): '@SECONDS' waited for without
 * --session and printed once the wall clock is there; ISO 8601 with an
 * offset and local time in a named zone (summer time) land on their UTC
 * instants, as ListTimers and 'bwctl list --json' show; a time a zone
 * skips, an unknown zone, the epoch, garbage and --every are refused with
 * exit 2 and a reason. */
START_TEST(test_schedule_at)
{
	struct du_daemon *d = du_daemon_new();
	static const char *const bad[][2] = {
		{ "2030-03-31 02:30 Europe/Berlin", "daylight-saving gap" },
		{ "2030-01-01 00:00 No/Such_Zone", "unknown time zone" },
		{ "@0", "epoch" },
		{ "tomorrow", "expected" },
		{ "2030-02-29 00:00", "range" },
		{ "2030-01-01T00:00+25:00", "offset" },
	};
	uint64_t target, iso, berlin;
	struct du_result r;
	struct du_conn *c;
	char at[32], want[80];
	du_env *e;

	du_daemon_start(d, NULL);
	target = du_realtime_ns() / DU_S + 2;
	snprintf(at, sizeof(at), "@%" PRIu64, target);
	bwctl(&r, d->sock, "schedule", "--key", "1", "--at", at, NULL);
	ASSERT_EXIT(&r, 0, "schedule --at @SECONDS");
	ck_assert_msg(du_realtime_ns() >= target * DU_S, "bwctl returned before %s", at);
	ck_assert_msg(strstr(r.out, "key=1") != NULL, "stdout: %s", r.out);
	du_result_free(&r);

	iso = (uint64_t)utc_seconds(2030, 1, 2, 2, 4, 5) * DU_S + 500 * DU_MS;
	bwctl(&r, d->sock, "schedule", "--session", "e2e-at", "--key", "2", "--at",
	      "2030-01-02T03:04:05.5+01:00", NULL);
	ASSERT_EXIT(&r, 0, "schedule --at ISO 8601");
	du_result_free(&r);
	berlin = (uint64_t)utc_seconds(2030, 7, 1, 10, 0, 0) * DU_S;
	bwctl(&r, d->sock, "schedule", "--session", "e2e-at", "--key", "3", "--at",
	      "2030-07-01 12:00 Europe/Berlin", NULL);
	ASSERT_EXIT(&r, 0, "schedule --at local time in a zone");
	du_result_free(&r);
	c = du_open(d, NULL);
	e = du_list(c, 2, "e2e-at", 0, 0);
	ck_assert_uint_eq(e->list_timers_reply->n_timers, 2);
	for (size_t i = 0; i < 2; i++) {
		const Bitwheel__V1__TimerInfo *ti = e->list_timers_reply->timers[i];

		ck_assert(ti->has_deadline_realtime_ns);
		ck_assert_uint_eq(ti->deadline_realtime_ns, ti->key == 2 ? iso : berlin);
	}
	bwp_frame_free(e);
	du_conn_free(c);
	bwctl(&r, d->sock, "list", "--session", "e2e-at", "--json", NULL);
	ASSERT_EXIT(&r, 0, "list --json");
	snprintf(want, sizeof(want), "\"deadline_unix_ns\":%" PRIu64 ",\"clock\":\"realtime\"", berlin);
	ck_assert_msg(strstr(r.out, want) != NULL, "no %s in: %s", want, r.out);
	du_result_free(&r);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bwctl(&r, d->sock, "schedule", "--key", "4", "--at", bad[i][0], NULL);
		ASSERT_EXIT(&r, 2, bad[i][0]);
		ck_assert_msg(strstr(r.err, bad[i][1]) != NULL, "%s: stderr: %s", bad[i][0], r.err);
		du_result_free(&r);
	}
	bwctl(&r, d->sock, "schedule", "--key", "4", "--at", at, "--every", "1s", NULL);
	ASSERT_EXIT(&r, 2, "--at with --every");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--key", "4", "--at", at, "--in", "1s", NULL);
	ASSERT_EXIT(&r, 2, "--at with --in");
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* schedule --calendar (PROTOCOL.md, "Calendar timers"): without
 * --session, '*:*:0/1 UTC' fires every second for --count fires, each
 * on a whole second of the wall clock; with --session, list shows the
 * spec normalized, 'calendar' as its period, the jitter and the grace,
 * and --json the same fields; a spec the daemon refuses is exit 4 with
 * its reason; --jitter without --calendar, and --calendar with --every
 * or --in, exit 2. */
START_TEST(test_schedule_calendar)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;

	du_daemon_start(d, NULL);
	bwctl(&r, d->sock, "schedule", "--key", "1", "--calendar", "*:*:0/1 UTC",
	      "--count", "2", "--json", NULL);
	ASSERT_EXIT(&r, 0, "schedule --calendar --count 2");
	ck_assert_msg(strstr(r.out, "\"key\":1") != NULL &&
		      strchr(strchr(r.out, '\n') + 1, '\n') != NULL, "stdout: %s", r.out);
	ck_assert_msg(strstr(r.out, "000000000}") != NULL, "no whole-second due in: %s", r.out);
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-cal", "--key", "2",
	      "--calendar", "Mon..Fri 09:00 Europe/Berlin", "--jitter", "5m",
	      "--jitter-fixed", "--misfire-grace", "1h", NULL);
	ASSERT_EXIT(&r, 0, "schedule --calendar --session");
	du_result_free(&r);
	bwctl(&r, d->sock, "list", "--session", "e2e-cal", NULL);
	ASSERT_EXIT(&r, 0, "list");
	ck_assert_msg(strstr(r.out, "calendar") != NULL &&
		      strstr(r.out, "Mon..Fri *-*-* 09:00:00 Europe/Berlin jitter=5m") != NULL &&
		      strstr(r.out, "fixed misfire-grace=1h") != NULL, "stdout: %s", r.out);
	du_result_free(&r);
	bwctl(&r, d->sock, "list", "--session", "e2e-cal", "--json", NULL);
	ASSERT_EXIT(&r, 0, "list --json");
	ck_assert_msg(strstr(r.out, "\"calendar\":\"Mon..Fri *-*-* 09:00:00 Europe/Berlin\","
			      "\"jitter_ns\":300000000000,\"jitter_fixed\":true,"
			      "\"misfire_grace_ns\":3600000000000") != NULL, "stdout: %s", r.out);
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-cal", "--key", "3",
	      "--calendar", "Mon..Fry 09:00", NULL);
	ASSERT_EXIT(&r, 4, "a bad spec");
	ck_assert_msg(strstr(r.err, "BAD_CALENDAR") != NULL && strstr(r.err, "Fry") != NULL,
		      "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--key", "3", "--in", "1s", "--jitter", "1s", NULL);
	ASSERT_EXIT(&r, 2, "--jitter without --calendar");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--key", "3", "--calendar", "daily", "--every", "1s", NULL);
	ASSERT_EXIT(&r, 2, "--calendar with --every");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--key", "3", "--calendar", "daily", "--in", "1s", NULL);
	ASSERT_EXIT(&r, 2, "--calendar with --in");
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* schedule --clock (PROTOCOL.md, "Clocks"): boottime fires, and with
 * --session prints its deadline on CLOCK_BOOTTIME; list shows
 * clock=boottime, --json "clock":"boottime"; an unknown clock, and
 * boottime with --at or --calendar, exit 2. */
START_TEST(test_schedule_clock)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	unsigned long long dl;
	uint64_t before, after;
	const char *p;

	du_daemon_start(d, NULL);
	bwctl(&r, d->sock, "schedule", "--key", "1", "--in", "100ms", "--clock",
	      "boottime", NULL);
	ASSERT_EXIT(&r, 0, "schedule --clock boottime");
	ck_assert_msg(strstr(r.out, "fired key=1") != NULL, "stdout: %s", r.out);
	du_result_free(&r);
	before = du_boottime_ns();
	bwctl(&r, d->sock, "schedule", "--session", "e2e-boot", "--key", "2",
	      "--in", "1h", "--clock", "boottime", NULL);
	after = du_boottime_ns();
	ASSERT_EXIT(&r, 0, "schedule --clock boottime --session");
	p = strstr(r.out, "deadline=");
	ck_assert_msg(p && sscanf(p, "deadline=%llu", &dl) == 1, "stdout: %s", r.out);
	ck_assert_uint_ge(dl, before + 3600 * DU_S);
	ck_assert_uint_le(dl, after + 3600 * DU_S);
	du_result_free(&r);
	bwctl(&r, d->sock, "list", "--session", "e2e-boot", NULL);
	ASSERT_EXIT(&r, 0, "list");
	ck_assert_msg(strstr(r.out, "clock=boottime") != NULL, "stdout: %s", r.out);
	du_result_free(&r);
	bwctl(&r, d->sock, "list", "--session", "e2e-boot", "--json", NULL);
	ASSERT_EXIT(&r, 0, "list --json");
	ck_assert_msg(strstr(r.out, "\"clock\":\"boottime\"") != NULL, "stdout: %s", r.out);
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--key", "3", "--in", "1s", "--clock", "realtime", NULL);
	ASSERT_EXIT(&r, 2, "--clock realtime");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--key", "3", "--calendar", "daily", "--clock",
	      "boottime", NULL);
	ASSERT_EXIT(&r, 2, "--calendar with --clock boottime");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--key", "3", "--at", "@2000000000", "--clock",
	      "boottime", NULL);
	ASSERT_EXIT(&r, 2, "--at with --clock boottime");
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_schedule_wait)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	uint64_t before, dl, after, res;
	struct du_conn *c;
	double late;
	const char *p;
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);
	res = e->hello_reply->oneshot_resolution_ns;
	bwp_frame_free(e);
	du_conn_free(c);
	before = du_now_ns();
	bwctl(&r, d->sock, "schedule", "--key", "1", "--in", "200ms", "--payload",
	      "a\"b\\c\n", NULL);
	after = du_now_ns();
	ASSERT_EXIT(&r, 0, "schedule without --session");
	ck_assert_msg(r.elapsed_ns >= 200 * DU_MS, "returned after %.1f ms",
		      (double)r.elapsed_ns / 1e6);
	ck_assert_int_eq(count_lines(r.out), 1);
	ck_assert_msg(strncmp(r.out, "fired key=1 payload=\"a\\\"b\\\\c\\n\" deadline=", 40) == 0,
		      "stdout: %s", r.out);
	dl = field_u64(r.out, "deadline");
	ck_assert(dl >= before + 200 * DU_MS && dl <= after);
	p = strstr(r.out, " late=");
	ck_assert_ptr_nonnull(p);
	late = strtod(p + 6, NULL);
	ck_assert_msg(late >= 0 && late <= (double)(res + du_margin_ns()) / 1e6,
		      "late=%.2fms", late);
	ck_assert_msg(strstr(p, "ms") != NULL, "late without its unit: %s", r.out);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/*
 * --leeway picks the lane: 1 s puts a oneshot timer in the 100 ms lane,
 * none leaves it in the 1 ms one (a connection of the test's keeps the
 * uid's counters while bwctl comes and goes).
 */
START_TEST(test_schedule_leeway)
{
	struct du_daemon *d = du_daemon_new();
	struct du_conn *c;
	struct du_result r;
	du_env *e;

	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	bwp_frame_free(du_hello(c, NULL));
	bwctl(&r, d->sock, "schedule", "--key", "1", "--in", "10ms", "--leeway", "1s", NULL);
	ASSERT_EXIT(&r, 0, "--leeway 1s");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--key", "2", "--in", "10ms", NULL);
	ASSERT_EXIT(&r, 0, "no --leeway");
	du_result_free(&r);
	e = du_stats(c, 2);
	ck_assert_uint_eq(e->stats_reply->periodic->inserted, 1);
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, 1);
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_schedule_every)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	char line[256];
	uint64_t first = 0;
	du_env *e;

	du_daemon_start(d, NULL);
	bwctl(&r, d->sock, "schedule", "--key", "2", "--in", "50ms", "--every", "100ms",
	      "--count", "3", NULL);
	ASSERT_EXIT(&r, 0, "--every --count 3");
	ck_assert_msg(count_lines(r.out) == 3, "stdout: %s", r.out);
	for (int i = 0, last = 0; i < 3; i++) {
		uint64_t dl;

		ck_assert(line_n(r.out, i, line, sizeof(line)));
		ck_assert_msg(strncmp(line, "fired key=2 deadline=", 21) == 0, "line: %s", line);
		ck_assert_uint_eq(field_u64(line, "count"), (uint64_t)i + 1);
		dl = field_u64(line, "deadline");
		if (i == 0)
			first = dl;
		/* d, d + p, d + 2p...; a daemon a whole period behind may skip
		 * one (PROTOCOL.md 6), never drift. */
		ck_assert_msg(dl >= first && (dl - first) % (100 * DU_MS) == 0 &&
			      (i == 0 || (int)((dl - first) / (100 * DU_MS)) > last),
			      "fire %d: deadline %" PRIu64 " not in d + kp after the last", i + 1, dl);
		last = (int)((dl - first) / (100 * DU_MS));
	}
	ck_assert(r.elapsed_ns >= 250 * DU_MS);
	du_result_free(&r);
	/* The anonymous session, and its periodic timer, ended with bwctl. */
	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->periodic->pending, 0);
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

static bool bwctl_waiting(const struct du_daemon *d)
{
	du_env *e = du_fresh_stats(d);
	bool yes = e->stats_reply->oneshot->pending == 1;

	bwp_frame_free(e);
	return yes;
}

/* The daemon stopping while bwctl waits: exit 4, SHUTTING_DOWN named. */
START_TEST(test_schedule_daemon_stops)
{
	struct du_daemon *d = du_daemon_new();
	struct du_proc p;
	struct du_result r;
	uint64_t deadline;

	du_daemon_start(d, NULL);
	bwctl_start(&p, d->sock, "schedule", "--key", "1", "--in", "1h", NULL);
	deadline = du_now_ns() + RUN_MS * DU_MS;
	while (!bwctl_waiting(d)) {
		ck_assert_msg(du_now_ns() < deadline, "bwctl never scheduled its timer");
		du_sleep_ms(5);
	}
	kill(d->pid, SIGTERM);
	du_proc_finish(&p, RUN_MS, &r);
	ASSERT_EXIT(&r, 4, "daemon stopped under a waiting bwctl");
	ck_assert_msg(strstr(r.err, "SHUTTING_DOWN") != NULL, "stderr: %s", r.err);
	du_result_free(&r);
	du_assert_exit(d, du_daemon_stop(d, 0, DU_WAIT_MS), 0);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * cancel
 * ====================================================================== */

START_TEST(test_cancel)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;

	du_daemon_start(d, NULL);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-cancel", "--key", "5", "--in", "1h",
	      NULL);
	ASSERT_EXIT(&r, 0, "schedule");
	du_result_free(&r);

	bwctl(&r, d->sock, "cancel", "--session", "e2e-cancel", "--key", "5", NULL);
	ASSERT_EXIT(&r, 0, "cancel of a pending timer");
	ck_assert_msg(strcmp(r.out, "cancelled key=5\n") == 0, "stdout: %s", r.out);
	du_result_free(&r);

	bwctl(&r, d->sock, "cancel", "--session", "e2e-cancel", "--key", "5", NULL);
	ASSERT_EXIT(&r, 1, "cancel again");
	ck_assert_msg(r.err[0] != '\0' && r.out[0] == '\0', "stdout [%s] stderr [%s]", r.out,
		      r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "cancel", "--session", "e2e-cancel", "--key", "99", NULL);
	ASSERT_EXIT(&r, 1, "cancel of a key never scheduled");
	du_result_free(&r);
	bwctl(&r, d->sock, "cancel", "--key", "5", NULL);
	ASSERT_EXIT(&r, 1, "cancel without a session");
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/*
 * --json on every command: schedule's reply, cancel's answer either way,
 * and each failure one JSON object on stderr with the exit status it has
 * without --json: the daemon's refusal (code and number), not found,
 * timed out, and metrics refusing --json.
 */
START_TEST(test_json)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	struct jval *v;

	du_daemon_start(d, NULL);
	bwctl(&r, d->sock, "schedule", "--json", "--session", "e2e-json", "--key", "7", "--in",
	      "1h", "--every", "2s", NULL);
	ASSERT_EXIT(&r, 0, "schedule --json");
	ck_assert_msg(count_lines(r.out) == 1 && r.err[0] == '\0', "out [%s] err [%s]", r.out,
		      r.err);
	v = jparse_line(r.out);
	ck_assert_uint_eq(ju64(v, "key"), 7);
	ck_assert(jstr_is(v, "session", "e2e-json"));
	ck_assert_uint_gt(ju64(v, "deadline_ns"), du_now_ns());
	ck_assert_uint_eq(ju64(v, "period_ns"), 2 * DU_S);
	ck_assert(jget(v, "replaced")->t == J_BOOL && !jget(v, "replaced")->b);
	jfree(v);
	du_result_free(&r);

	/* The daemon's refusal, its code by name and number. */
	bwctl(&r, d->sock, "schedule", "--session", "e2e-json", "--key", "7", "--in", "1s",
	      "--json", NULL);
	v = json_error(&r, 4, "DUPLICATE_KEY", "duplicate key");
	ck_assert_uint_eq(ju64(v, "error.server_code"), EC(DUPLICATE_KEY));
	ck_assert(r.out[0] == '\0');
	jfree(v);
	du_result_free(&r);

	bwctl(&r, d->sock, "cancel", "--session", "e2e-json", "--key", "7", "--json", NULL);
	ASSERT_EXIT(&r, 0, "cancel --json");
	v = jparse_line(r.out);
	ck_assert(ju64(v, "key") == 7 && jstr_is(v, "session", "e2e-json") &&
		  jget(v, "cancelled")->t == J_BOOL && jget(v, "cancelled")->b);
	jfree(v);
	du_result_free(&r);
	bwctl(&r, d->sock, "--json", "cancel", "--key", "7", NULL);
	jfree(json_error(&r, 1, "NOT_FOUND", "cancel --json, not pending"));
	v = jparse_line(r.out);
	ck_assert(jget(v, "session")->t == J_NULL && !jget(v, "cancelled")->b);
	jfree(v);
	du_result_free(&r);

	bwctl(&r, d->sock, "watch", "--session", "e2e-json", "--timeout", "50ms", "--json", NULL);
	jfree(json_error(&r, 1, "TIMED_OUT", "watch --json timing out"));
	du_result_free(&r);
	bwctl(&r, d->sock, "metrics", "--json", NULL);
	jfree(json_error(&r, 2, "USAGE", "metrics --json"));
	ck_assert(r.out[0] == '\0');
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * owner
 * ====================================================================== */

#define NOBODY "65534"

/*
 * --owner, as root: uid 65534's "e2e-own" is not root's "e2e-own"; root
 * schedules into it, drains its queue with watch and cancels in it, and
 * it stays 65534's (65534 is refused root's namespace: exit 4 with the
 * daemon's PERMISSION_DENIED, and the hint).
 */
/* Whether setpriv(1) can run bwctl as uid 65534 here (the build tree must
 * be readable by it); a SKIP note when not. */
static bool bwctl_runs_as_nobody(const char *test)
{
	static const char *const probe[] = {
		"setpriv", "--reuid=" NOBODY, "--regid=" NOBODY, "--clear-groups",
		DU_BWCTL_PATH, "--version", NULL,
	};
	struct du_result r;
	char what[1600];
	bool ok;

	if (!du_have_tool("setpriv")) {
		du_note("SKIP: %s's uid %s part needs setpriv(1) (util-linux)", test, NOBODY);
		return false;
	}
	du_run(probe, clean_env, RUN_MS, &r);
	ok = r.status == 0;
	if (!ok)
		du_note("SKIP: %s's uid %s part: bwctl does not run as uid %s (%s)", test,
			NOBODY, NOBODY, du_result_describe(&r, what, sizeof(what)));
	du_result_free(&r);
	return ok;
}

START_TEST(test_owner)
{
	struct du_daemon *d;
	struct du_result r;
	char what[1600];

	if (geteuid() != 0) {
		/* Check has no "skip": the test passes and says so. */
		du_note("SKIP: test_owner needs root (to name uid %s's namespace)", NOBODY);
		return;
	}
	d = du_daemon_new();
	/* bwctl running as nobody must reach the socket. */
	ck_assert(chmod(d->dir, 0755) == 0);
	du_daemon_start(d, "--socket-mode", "0666", NULL);

	/* The global form and the per-command one. */
	bwctl(&r, d->sock, "--owner", NOBODY, "schedule", "--session", "e2e-own", "--key", "5",
	      "--in", "1h", NULL);
	ASSERT_EXIT(&r, 0, "schedule --owner");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-own", "--owner", NOBODY, "--key", "8",
	      "--in", "10ms", "--payload", "stuck", NULL);
	ASSERT_EXIT(&r, 0, "schedule --owner");
	du_result_free(&r);

	/* Root's own "e2e-own" is another session: neither key is in it. */
	bwctl(&r, d->sock, "cancel", "--session", "e2e-own", "--key", "5", NULL);
	ASSERT_EXIT(&r, 1, "cancel in root's own session");
	du_result_free(&r);
	bwctl(&r, d->sock, "watch", "--session", "e2e-own", "--timeout", "200ms", NULL);
	ASSERT_EXIT(&r, 1, "watch of root's own session");
	ck_assert_msg(r.out[0] == '\0', "root's session had a fire: %s", r.out);
	du_result_free(&r);

	/* Root drains 65534's queue. */
	bwctl(&r, d->sock, "watch", "--owner", NOBODY, "--session", "e2e-own", "--count", "1",
	      "--timeout", "5s", NULL);
	ASSERT_EXIT(&r, 0, "watch --owner");
	ck_assert_msg(strncmp(r.out, "fired key=8 payload=\"stuck\" ",
			      strlen("fired key=8 payload=\"stuck\" ")) == 0 &&
		      strchr(r.out, '\n') == r.out + strlen(r.out) - 1, "stdout: %s", r.out);
	du_result_free(&r);

	/* 65534 may not name root's namespace: the daemon's refusal, exit 4,
	 * the hint.  Run through setpriv(1) when it can run bwctl as 65534
	 * (the build tree must be readable by it). */
	if (bwctl_runs_as_nobody("test_owner")) {
		static const char *const deny_argv[] = {
			"setpriv", "--reuid=" NOBODY, "--regid=" NOBODY, "--clear-groups",
			DU_BWCTL_PATH, "--socket", NULL /* d->sock */, "--owner", "0",
			"cancel", "--session", "e2e-own", "--key", "5", NULL,
		};
		const char *argv[sizeof(deny_argv) / sizeof(deny_argv[0])];

		memcpy(argv, deny_argv, sizeof(argv));
		argv[6] = d->sock;
		du_run(argv, clean_env, RUN_MS, &r);
		ASSERT_EXIT(&r, 4, "--owner 0 as uid " NOBODY);
		ck_assert_msg(strstr(r.err, "PERMISSION_DENIED") != NULL &&
			      strstr(r.err, "only root may use --owner") != NULL,
			      "stderr: %s", r.err);
		du_result_free(&r);
		/* Its own session is the one root scheduled into. */
		argv[7] = "cancel";
		argv[8] = "--session";
		argv[9] = "e2e-own";
		argv[10] = "--key";
		argv[11] = "5";
		argv[12] = NULL;
		du_run(argv, clean_env, RUN_MS, &r);
		ASSERT_EXIT(&r, 0, "cancel as uid " NOBODY " in its own session");
		ck_assert_msg(strcmp(r.out, "cancelled key=5\n") == 0, "stdout: %s", r.out);
		du_result_free(&r);
	}

	/* Gone, or still there if 65534 could not run: root cancels it in
	 * 65534's session either way, and the next cancel finds nothing. */
	bwctl(&r, d->sock, "cancel", "--owner", NOBODY, "--session", "e2e-own", "--key", "5",
	      NULL);
	ck_assert_msg(r.status == 0 || r.status == 1, "cancel --owner: %s",
		      du_result_describe(&r, what, sizeof(what)));
	du_result_free(&r);
	bwctl(&r, d->sock, "--owner", NOBODY, "cancel", "--session", "e2e-own", "--key", "5",
	      NULL);
	ASSERT_EXIT(&r, 1, "cancel --owner of a key already cancelled");
	ck_assert_msg(strstr(r.err, "of uid " NOBODY) != NULL, "stderr: %s", r.err);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * introspection
 * ====================================================================== */

/* bwctl as uid 65534 (through setpriv, which bwctl_runs_as_nobody()
 * checked), output captured. */
static void bwctl_nobody(struct du_result *r, const char *sock, ...) __attribute__((sentinel));
static void bwctl_nobody(struct du_result *r, const char *sock, ...)
{
	const char *argv[40] = {
		"setpriv", "--reuid=" NOBODY, "--regid=" NOBODY, "--clear-groups",
	};
	va_list ap;

	va_start(ap, sock);
	bwctl_argv(argv + 4, sock, ap);
	va_end(ap);
	du_run(argv, clean_env, RUN_MS, r);
}

/* The --json line of session name (NULL: an anonymous one) of uid, parsed,
 * or NULL; every line must be an object with a uid. */
static struct jval *json_session(const char *out, const char *uid, const char *name)
{
	char line[1024];

	for (int i = 0; line_n(out, i, line, sizeof(line)); i++) {
		struct jval *v = jparse_line(line);
		char u[24];

		snprintf(u, sizeof(u), "%llu", (unsigned long long)ju64(v, "uid"));
		if (strcmp(u, uid) == 0 &&
		    (name ? jstr_is(v, "session", name) : jget(v, "anonymous") != NULL))
			return v;
		jfree(v);
	}
	return NULL;
}

/* Every --json line's uid is uid. */
static void json_all_uid(const char *out, uint64_t uid)
{
	char line[1024];

	for (int i = 0; line_n(out, i, line, sizeof(line)); i++) {
		struct jval *v = jparse_line(line);

		ck_assert_msg(ju64(v, "uid") == uid, "uid %llu sees: %s",
			      (unsigned long long)uid, line);
		jfree(v);
	}
}

/*
 * bwctl sessions and bwctl list, as root and as uid 65534: a table with a
 * header, or one JSON object per line; the uid rule (65534 sees its own
 * sessions alone, and is refused root's, exit 4); root's --owner; list's
 * wall-clock deadlines, soonest first, and --limit's warning; an unknown
 * session is exit 1.
 */
START_TEST(test_sessions_list)
{
	struct du_daemon *d;
	struct du_result r;
	struct jval *v;
	struct timespec now;
	char line[1024];
	bool root = geteuid() == 0;
	char me[24], row_name[80];
	unsigned row_uid;
	unsigned long long row_timers;

	snprintf(me, sizeof(me), "%u", (unsigned)geteuid());
	d = du_daemon_new();
	ck_assert(chmod(d->dir, 0755) == 0);
	du_daemon_start(d, "--socket-mode", "0666", NULL);
	bwctl(&r, d->sock, "schedule", "--session", "intro-a", "--key", "7", "--in", "1h",
	      "--payload", "hi", NULL);
	ASSERT_EXIT(&r, 0, "schedule");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "intro-a", "--key", "8", "--in", "90s",
	      "--every", "30s", NULL);
	ASSERT_EXIT(&r, 0, "schedule");
	du_result_free(&r);
	if (root) {
		bwctl(&r, d->sock, "--owner", NOBODY, "schedule", "--session", "intro-b",
		      "--key", "1", "--in", "2h", NULL);
		ASSERT_EXIT(&r, 0, "schedule --owner");
		du_result_free(&r);
	}

	/* The table: a header, then sessions by uid (bwctl's own anonymous
	 * session among them). */
	bwctl(&r, d->sock, "sessions", NULL);
	ASSERT_EXIT(&r, 0, "sessions");
	ck_assert_msg(strncmp(r.out, "UID    SESSION ", 15) == 0, "stdout: %s", r.out);
	ck_assert_int_eq(count_lines(r.out), root ? 4 : 3);
	ck_assert(line_n(r.out, 1, line, sizeof(line)));
	ck_assert_msg(sscanf(line, "%u %79s %llu", &row_uid, row_name, &row_timers) == 3 &&
		      row_uid == geteuid() && strcmp(row_name, "intro-a") == 0 &&
		      row_timers == 2, "stdout: %s", r.out);
	ck_assert_msg(strstr(r.out, "(anonymous, pid ") != NULL, "stdout: %s", r.out);
	du_result_free(&r);

	bwctl(&r, d->sock, "sessions", "--json", NULL);
	ASSERT_EXIT(&r, 0, "sessions --json");
	ck_assert_int_eq(count_lines(r.out), root ? 3 : 2);
	v = json_session(r.out, me, "intro-a");
	ck_assert_msg(v != NULL, "stdout: %s", r.out);
	ck_assert_uint_eq(ju64(v, "timers"), 2);
	ck_assert_uint_eq(ju64(v, "producers"), 0);
	ck_assert_uint_le(ju64(v, "expires_in_ns"), 300 * DU_S);
	jfree(v);
	v = json_session(r.out, me, NULL);
	ck_assert_msg(v != NULL && ju64(v, "pid") > 0 && ju64(v, "consumers") == 1,
		      "stdout: %s", r.out);
	jfree(v);
	du_result_free(&r);

	/* list: soonest first, the deadline as wall-clock time. */
	bwctl(&r, d->sock, "list", "--session", "intro-a", NULL);
	ASSERT_EXIT(&r, 0, "list");
	ck_assert_int_eq(count_lines(r.out), 3);
	ck_assert(line_n(r.out, 1, line, sizeof(line)));
	ck_assert_msg(strncmp(line, "8 ", 2) == 0 && strstr(line, " periodic") &&
		      strstr(line, " 30.000s "), "row: %s", line);
	ck_assert(line_n(r.out, 2, line, sizeof(line)));
	ck_assert_msg(strncmp(line, "7 ", 2) == 0 && strstr(line, " 2 oneshot") &&
		      strstr(line, " 59m"), "row: %s", line);
	du_result_free(&r);
	bwctl(&r, d->sock, "list", "--session", "intro-a", "--json", NULL);
	ASSERT_EXIT(&r, 0, "list --json");
	ck_assert_int_eq(count_lines(r.out), 2);
	ck_assert(line_n(r.out, 1, line, sizeof(line)));
	v = jparse_line(line);
	clock_gettime(CLOCK_REALTIME, &now);
	ck_assert_uint_eq(ju64(v, "key"), 7);
	ck_assert_uint_eq(ju64(v, "payload_bytes"), 2);
	ck_assert_uint_eq(ju64(v, "period_ns"), 0);
	ck_assert(jstr_is(v, "lane", "oneshot"));
	ck_assert_uint_le(ju64(v, "remaining_ns"), 3600 * DU_S);
	ck_assert_uint_gt(ju64(v, "remaining_ns"), 3500 * DU_S);
	ck_assert_uint_lt(ju64(v, "deadline_unix_ns"),
			  (uint64_t)now.tv_sec * DU_S + 3601 * DU_S);
	ck_assert_uint_gt(ju64(v, "deadline_unix_ns"),
			  (uint64_t)now.tv_sec * DU_S + 3500 * DU_S);
	jfree(v);
	du_result_free(&r);

	/* --limit: the rows asked for, and a warning that there are more. */
	bwctl(&r, d->sock, "list", "--session", "intro-a", "--limit", "1", NULL);
	ASSERT_EXIT(&r, 0, "list --limit 1");
	ck_assert_int_eq(count_lines(r.out), 2);
	ck_assert_msg(strstr(r.err, "holds 2 timers") != NULL, "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "list", "--session", "intro-none", NULL);
	ASSERT_EXIT(&r, 1, "list of no such session");
	ck_assert_msg(strstr(r.err, "UNKNOWN_SESSION") != NULL, "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "list", "--session", "intro-none", "--json", NULL);
	jfree(json_error(&r, 1, "UNKNOWN_SESSION", "list --json of no such session"));
	du_result_free(&r);
	bwctl(&r, d->sock, "list", NULL);
	ASSERT_EXIT(&r, 2, "list without --session");
	du_result_free(&r);

	if (!root || !bwctl_runs_as_nobody("test_sessions_list")) {
		if (!root)
			du_note("SKIP: test_sessions_list's uid part needs root");
		du_daemon_free(d);
		return;
	}
	/* Root: one uid's sessions, and another uid's timers by --owner. */
	bwctl(&r, d->sock, "sessions", "--owner", NOBODY, "--json", NULL);
	ASSERT_EXIT(&r, 0, "sessions --owner");
	ck_assert_int_eq(count_lines(r.out), 1);
	json_all_uid(r.out, 65534);
	du_result_free(&r);
	bwctl(&r, d->sock, "--owner", NOBODY, "list", "--session", "intro-b", NULL);
	ASSERT_EXIT(&r, 0, "list --owner");
	ck_assert_int_eq(count_lines(r.out), 2);
	ck_assert(line_n(r.out, 1, line, sizeof(line)));
	ck_assert_msg(strncmp(line, "1 ", 2) == 0, "row: %s", line);
	du_result_free(&r);

	/* 65534: its own alone, root's refused. */
	bwctl_nobody(&r, d->sock, "sessions", "--json", NULL);
	ASSERT_EXIT(&r, 0, "sessions as " NOBODY);
	ck_assert_int_eq(count_lines(r.out), 2);
	json_all_uid(r.out, 65534);
	v = json_session(r.out, NOBODY, "intro-b");
	ck_assert_msg(v != NULL && ju64(v, "timers") == 1, "stdout: %s", r.out);
	jfree(v);
	du_result_free(&r);
	bwctl_nobody(&r, d->sock, "sessions", NULL);
	ASSERT_EXIT(&r, 0, "sessions as " NOBODY);
	ck_assert_msg(strstr(r.out, "intro-a") == NULL && strstr(r.out, "intro-b") != NULL,
		      "stdout: %s", r.out);
	du_result_free(&r);
	bwctl_nobody(&r, d->sock, "list", "--session", "intro-b", NULL);
	ASSERT_EXIT(&r, 0, "list as " NOBODY);
	ck_assert_int_eq(count_lines(r.out), 2);
	du_result_free(&r);
	bwctl_nobody(&r, d->sock, "--owner", "0", "list", "--session", "intro-a", NULL);
	ASSERT_EXIT(&r, 4, "list of root's as " NOBODY);
	ck_assert_msg(strstr(r.err, "PERMISSION_DENIED") != NULL, "stderr: %s", r.err);
	du_result_free(&r);
	bwctl_nobody(&r, d->sock, "sessions", "--owner", "0", "--json", NULL);
	jfree(json_error(&r, 4, "PERMISSION_DENIED", "sessions --owner 0 as " NOBODY));
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * watch
 * ====================================================================== */

/* Payloads with every kind of byte bwctl must escape. */
static const char *const watch_payloads[] = {
	"plain", "quote\" back\\slash\ttab", "caf\xc3\xa9 \x01\x7f\xff", NULL,
};

START_TEST(test_watch_json)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	char line[1024], key[8], in[16];
	uint64_t t0 = du_now_ns();

	du_daemon_start(d, NULL);
	/* Due only once all are scheduled, so that all are queued when the
	 * watch attaches. */
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "%d", i + 1);
		snprintf(in, sizeof(in), "%dms", 500 + 20 * i);
		if (watch_payloads[i] != NULL)
			bwctl(&r, d->sock, "schedule", "--session", "e2e-watch", "--key", key,
			      "--in", in, "--payload", watch_payloads[i], NULL);
		else
			bwctl(&r, d->sock, "schedule", "--session", "e2e-watch", "--key", key,
			      "--in", in, NULL);
		ASSERT_EXIT(&r, 0, "schedule");
		ck_assert_msg(strstr(r.out, "fired") == NULL, "a fire came due while scheduling: %s",
			      r.out);
		du_result_free(&r);
	}
	/* A periodic one too. */
	bwctl(&r, d->sock, "schedule", "--session", "e2e-watch", "--key", "9", "--in", "650ms",
	      "--every", "1h", NULL);
	ASSERT_EXIT(&r, 0, "schedule --every");
	ck_assert_msg(strstr(r.out, "fired") == NULL, "a fire came due while scheduling: %s",
		      r.out);
	du_result_free(&r);
	du_sleep_until(t0 + 900 * DU_MS);

	/* Queued while detached: delivered on attach, in fire order. */
	bwctl(&r, d->sock, "watch", "--session", "e2e-watch", "--count", "5", "--json", NULL);
	ASSERT_EXIT(&r, 0, "watch --count 5 --json");
	ck_assert_msg(count_lines(r.out) == 5, "stdout: %s", r.out);
	for (int i = 0; i < 5; i++) {
		struct jval *v, *pl, *lu;
		uint64_t dl, fired;
		char want_late[48];

		ck_assert(line_n(r.out, i, line, sizeof(line)));
		v = jparse_line(line);
		ck_assert_uint_eq(ju64(v, "key"), i < 4 ? (uint64_t)i + 1 : 9);
		pl = jget(v, "payload");
		ck_assert_msg(pl != NULL, "no payload member: %s", line);
		if (i < 4 && watch_payloads[i] != NULL) {
			ck_assert_msg(pl->t == J_STR && !pl->wide &&
				      pl->len == strlen(watch_payloads[i]) &&
				      memcmp(pl->str, watch_payloads[i], pl->len) == 0,
				      "payload of key %d does not come back byte for byte: %s",
				      i + 1, line);
		} else {
			ck_assert_msg(pl->t == J_NULL, "a timer without payload: %s", line);
		}
		dl = ju64(v, "deadline_ns");
		fired = ju64(v, "fired_ns");
		ck_assert(fired >= dl && dl > t0);
		lu = jget(v, "late_us");
		ck_assert_msg(lu != NULL && lu->t == J_NUM, "late_us: %s", line);
		/* late_us = fired_ns - deadline_ns in microseconds, to the ns. */
		snprintf(want_late, sizeof(want_late), "%" PRIu64 ".%03" PRIu64,
			 (fired - dl) / 1000, (fired - dl) % 1000);
		ck_assert_msg(strcmp(lu->num, want_late) == 0, "late_us %s, expected %s", lu->num,
			      want_late);
		if (i == 4)
			ck_assert_uint_eq(ju64(v, "fire_count"), 1);
		else
			ck_assert_msg(jget(v, "fire_count") == NULL, "oneshot with fire_count: %s",
				      line);
		ck_assert(jget(v, "restored") == NULL);
		jfree(v);
	}
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* watch attached before the fire: it arrives live. */
START_TEST(test_watch_live)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	struct jval *v;
	uint64_t dl;

	du_daemon_start(d, NULL);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-live", "--key", "3", "--in", "400ms",
	      "--payload", "live", NULL);
	ASSERT_EXIT(&r, 0, "schedule");
	dl = field_u64(r.out, "deadline");
	du_result_free(&r);
	bwctl(&r, d->sock, "watch", "--session", "e2e-live", "--count", "1", "--json",
	      "--timeout", "5s", NULL);
	ASSERT_EXIT(&r, 0, "watch");
	ck_assert_int_eq(count_lines(r.out), 1);
	v = jparse_line(r.out);
	ck_assert_uint_eq(ju64(v, "key"), 3);
	ck_assert_uint_eq(ju64(v, "deadline_ns"), dl);
	ck_assert(du_now_ns() >= dl);
	jfree(v);
	/* Human format of the same, for a queued fire. */
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-live", "--key", "4", "--in", "200ms",
	      NULL);
	ASSERT_EXIT(&r, 0, "schedule");
	ck_assert_msg(strstr(r.out, "fired") == NULL, "fired too soon: %s", r.out);
	du_result_free(&r);
	du_sleep_ms(300);
	bwctl(&r, d->sock, "watch", "--session", "e2e-live", "--count", "1", NULL);
	ASSERT_EXIT(&r, 0, "watch (human)");
	ck_assert_msg(strncmp(r.out, "fired key=4 deadline=", 21) == 0 &&
		      strstr(r.out, " late=") != NULL && strstr(r.out, "payload") == NULL,
		      "stdout: %s", r.out);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_watch_timeout)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;

	du_daemon_start(d, NULL);
	bwctl(&r, d->sock, "watch", "--session", "e2e-quiet", "--timeout", "200ms", NULL);
	ASSERT_EXIT(&r, 1, "watch with nothing to see");
	ck_assert(r.elapsed_ns >= 200 * DU_MS);
	ck_assert(r.out[0] == '\0');
	du_result_free(&r);

	bwctl(&r, d->sock, "schedule", "--session", "e2e-quiet", "--key", "1", "--in", "200ms",
	      NULL);
	ASSERT_EXIT(&r, 0, "schedule");
	ck_assert_msg(strstr(r.out, "fired") == NULL, "fired too soon: %s", r.out);
	du_result_free(&r);
	du_sleep_ms(300);
	bwctl(&r, d->sock, "watch", "--session", "e2e-quiet", "--count", "2", "--timeout",
	      "200ms", NULL);
	ASSERT_EXIT(&r, 1, "watch --count 2 with one fire");
	ck_assert_int_eq(count_lines(r.out), 1);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/*
 * schedule and cancel attach as producers: they print their own line
 * only, even with fires waiting in the session's queue, and take none.
 * watch --count 1 takes one; the rest stay for the next watch (one the
 * first had received past its count comes back marked).  The daemon's
 * dropped periodic fires are reported.
 */
START_TEST(test_producers_take_no_fire)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	char line[512];

	du_daemon_start(d, "--max-queued", "2", NULL);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-q", "--key", "1", "--in", "10ms",
	      "--payload", "one", NULL);
	ASSERT_EXIT(&r, 0, "schedule");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-q", "--key", "3", "--in", "20ms", NULL);
	ASSERT_EXIT(&r, 0, "schedule");
	du_result_free(&r);
	du_sleep_ms(200);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-q", "--key", "2", "--in", "1h", NULL);
	ASSERT_EXIT(&r, 0, "schedule with fires queued");
	ck_assert_msg(count_lines(r.out) == 1 && strncmp(r.out, "scheduled key=2 ", 16) == 0,
		      "stdout: %s", r.out);
	du_result_free(&r);
	bwctl(&r, d->sock, "cancel", "--session", "e2e-q", "--key", "2", NULL);
	ASSERT_EXIT(&r, 0, "cancel with fires queued");
	ck_assert_msg(strcmp(r.out, "cancelled key=2\n") == 0, "stdout: %s", r.out);
	du_result_free(&r);

	/* Both fires still queued: one per watch --count 1. */
	bwctl(&r, d->sock, "watch", "--session", "e2e-q", "--count", "1", NULL);
	ASSERT_EXIT(&r, 0, "watch --count 1");
	ck_assert_msg(count_lines(r.out) == 1 &&
		      strncmp(r.out, "fired key=1 payload=\"one\" deadline=",
			      strlen("fired key=1 payload=\"one\" deadline=")) == 0 &&
		      strstr(r.out, "redelivered") == NULL, "stdout: %s", r.out);
	ck_assert_msg(r.err[0] == '\0', "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "watch", "--session", "e2e-q", "--count", "1", "--timeout", "5s",
	      NULL);
	ASSERT_EXIT(&r, 0, "second watch --count 1");
	ck_assert_msg(count_lines(r.out) == 1 && strncmp(r.out, "fired key=3 ", 12) == 0,
		      "stdout: %s", r.out);
	du_result_free(&r);

	/* A periodic timer fires into a queue of 2 with no consumer: the
	 * rest are dropped, and the next watch says how many. */
	bwctl(&r, d->sock, "schedule", "--session", "e2e-q", "--key", "9", "--in", "10ms",
	      "--every", "100ms", NULL);
	ASSERT_EXIT(&r, 0, "schedule --every");
	du_result_free(&r);
	du_sleep_ms(800);
	bwctl(&r, d->sock, "watch", "--session", "e2e-q", "--count", "1", NULL);
	ASSERT_EXIT(&r, 0, "watch --count 1 after drops");
	ck_assert(line_n(r.out, 0, line, sizeof(line)));
	ck_assert_msg(count_lines(r.out) == 1 && strncmp(line, "fired key=9 ", 12) == 0 &&
		      field_u64(line, "count") == 1, "stdout: %s", r.out);
	ck_assert_msg(strstr(r.err, "dropped") != NULL, "no warning about dropped fires: %s",
		      r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "cancel", "--session", "e2e-q", "--key", "9", NULL);
	ASSERT_EXIT(&r, 0, "cancel the periodic timer");
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* Whether n connections are open (consumers: n consumers attached),
 * counting du_fresh_stats's own (an anonymous session's consumer). */
static bool n_open(const struct du_daemon *d, uint64_t n, bool consumers)
{
	du_env *e = du_fresh_stats(d);
	bool yes = (consumers ? e->stats_reply->consumers : e->stats_reply->clients) == n;

	bwp_frame_free(e);
	return yes;
}

static void wait_open(const struct du_daemon *d, uint64_t n, bool consumers,
		      const char *what)
{
	uint64_t deadline = du_now_ns() + RUN_MS * DU_MS;

	while (!n_open(d, n, consumers)) {
		ck_assert_msg(du_now_ns() < deadline, "%s", what);
		du_sleep_ms(5);
	}
}

/* Wait until n connections are open, counting du_fresh_stats's own. */
static void wait_clients(const struct du_daemon *d, uint64_t n, const char *what)
{
	wait_open(d, n, false, what);
}

/* A session with a watch attached takes more connections: producers
 * schedule into it while the watch runs, and the watch gets the fires. */
START_TEST(test_watch_shared)
{
	struct du_daemon *d = du_daemon_new();
	struct du_proc p;
	struct du_result r;

	du_daemon_start(d, NULL);
	bwctl_start(&p, d->sock, "watch", "--session", "e2e-shared", "--count", "2",
		    "--timeout", "10s", NULL);
	wait_clients(d, 2, "the watch never connected");
	bwctl(&r, d->sock, "schedule", "--session", "e2e-shared", "--key", "1", "--in", "10ms",
	      NULL);
	ASSERT_EXIT(&r, 0, "schedule beside a watch");
	ck_assert_msg(count_lines(r.out) == 1, "stdout: %s", r.out);
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-shared", "--key", "2", "--in", "10ms",
	      NULL);
	ASSERT_EXIT(&r, 0, "another schedule beside a watch");
	du_result_free(&r);
	du_proc_finish(&p, RUN_MS, &r);
	ASSERT_EXIT(&r, 0, "watch --count 2");
	ck_assert_msg(count_lines(r.out) == 2 && strncmp(r.out, "fired key=1 ", 12) == 0 &&
		      strstr(r.out, "\nfired key=2 ") != NULL, "stdout: %s", r.out);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * shared
 * ====================================================================== */

#define NKEYS 40

struct seen_line {
	int count;
	bool redelivered;
};

/*
 * Each line of out a fire line of a key below NKEYS, counted into seen
 * (may be NULL); returns the number of lines.  Fails on anything else.
 */
static int tally(const char *out, struct seen_line *seen)
{
	char line[512];
	int n = 0;

	while (line_n(out, n, line, sizeof(line))) {
		uint64_t k;

		ck_assert_msg(strncmp(line, "fired key=", 10) == 0, "not a fire: %s", line);
		k = field_u64(line, "key");
		ck_assert_msg(k < NKEYS, "key %" PRIu64 " out of range: %s", k, line);
		if (seen != NULL) {
			seen[k].count++;
			if (strstr(line, " redelivered") != NULL)
				seen[k].redelivered = true;
		}
		n++;
	}
	return n;
}

/*
 * The issue's first scenario: 40 bwctl schedule runs one after another,
 * key K due (20 + 15 K) ms later, many due before the last is scheduled;
 * then one bwctl watch --count 40 gets all 40, in fire order.
 */
START_TEST(test_sequential_then_watch)
{
	struct du_daemon *d = du_daemon_new();
	struct seen_line seen[NKEYS];
	struct du_result r;
	char key[16], in[16], line[512];

	memset(seen, 0, sizeof(seen));
	du_daemon_start(d, NULL);
	for (int k = 0; k < NKEYS; k++) {
		snprintf(key, sizeof(key), "%d", k);
		snprintf(in, sizeof(in), "%dms", 20 + 15 * k);
		bwctl(&r, d->sock, "schedule", "--session", "s", "--key", key, "--in", in, NULL);
		ASSERT_EXIT(&r, 0, "schedule");
		ck_assert_msg(count_lines(r.out) == 1 && strncmp(r.out, "scheduled ", 10) == 0,
			      "stdout: %s", r.out);
		du_result_free(&r);
	}
	bwctl(&r, d->sock, "watch", "--session", "s", "--count", "40", "--timeout", "20s", NULL);
	ASSERT_EXIT(&r, 0, "watch --count 40");
	ck_assert_int_eq(tally(r.out, seen), NKEYS);
	for (int k = 0; k < NKEYS; k++) {
		ck_assert_msg(seen[k].count == 1 && !seen[k].redelivered, "key %d: %d times%s", k,
			      seen[k].count, seen[k].redelivered ? ", redelivered" : "");
		/* Deadlines grow with the key: fire order is key order. */
		ck_assert(line_n(r.out, k, line, sizeof(line)));
		ck_assert_uint_eq(field_u64(line, "key"), (uint64_t)k);
	}
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

#define NPROD 8

/* 8 bwctl schedule producers at a time, 5 rounds, while a watch is
 * attached: each exits 0 having taken no fire; the watch prints every
 * fire exactly once. */
START_TEST(test_concurrent_producers)
{
	struct du_daemon *d = du_daemon_new();
	struct seen_line seen[NKEYS];
	struct du_proc w, p[NPROD];
	struct du_result r;
	char key[NPROD][16];

	memset(seen, 0, sizeof(seen));
	du_daemon_start(d, NULL);
	bwctl_start(&w, d->sock, "watch", "--session", "e2e-conc", "--count", "40",
		    "--timeout", "30s", NULL);
	wait_clients(d, 2, "the watch never connected");
	for (int round = 0; round < NKEYS / NPROD; round++) {
		for (int i = 0; i < NPROD; i++) {
			snprintf(key[i], sizeof(key[i]), "%d", round * NPROD + i);
			bwctl_start(&p[i], d->sock, "schedule", "--session", "e2e-conc", "--key",
				    key[i], "--in", "30ms", NULL);
		}
		for (int i = 0; i < NPROD; i++) {
			du_proc_finish(&p[i], RUN_MS, &r);
			ASSERT_EXIT(&r, 0, "a concurrent schedule");
			ck_assert_msg(count_lines(r.out) == 1 &&
				      strncmp(r.out, "scheduled ", 10) == 0, "stdout: %s", r.out);
			du_result_free(&r);
		}
	}
	du_proc_finish(&w, RUN_MS, &r);
	ASSERT_EXIT(&r, 0, "watch --count 40 beside the producers");
	ck_assert_int_eq(tally(r.out, seen), NKEYS);
	for (int k = 0; k < NKEYS; k++)
		ck_assert_msg(seen[k].count == 1 && !seen[k].redelivered, "key %d: %d times", k,
			      seen[k].count);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* Two watches of one session share its fires: disjoint sets, whose union
 * is every fire. */
START_TEST(test_two_watches)
{
	struct du_daemon *d = du_daemon_new();
	struct seen_line seen[2][NKEYS];
	struct du_proc w[2];
	struct du_result r[2];
	struct du_conn *prod;
	int n[2];

	memset(seen, 0, sizeof(seen));
	du_daemon_start(d, NULL);
	for (int i = 0; i < 2; i++)
		bwctl_start(&w[i], d->sock, "watch", "--session", "e2e-two", "--timeout", "3s",
			    NULL);
	wait_clients(d, 3, "the watches never connected");
	prod = raw_producer(d, "e2e-two");
	for (uint64_t k = 0; k < NKEYS; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY,
				      .when_ns = 100 * DU_MS + k * 10 * DU_MS };

		bwp_frame_free(du_schedule(prod, k + 2, &s));
	}
	for (int i = 0; i < 2; i++) {
		du_proc_finish(&w[i], RUN_MS, &r[i]);
		ASSERT_EXIT(&r[i], 0, "a watch sharing the session");
		n[i] = tally(r[i].out, seen[i]);
	}
	du_note("the two watches printed %d and %d fires", n[0], n[1]);
	ck_assert_int_eq(n[0] + n[1], NKEYS);
	for (int k = 0; k < NKEYS; k++)
		ck_assert_msg(seen[0][k].count + seen[1][k].count == 1,
			      "key %d printed %d and %d times", k, seen[0][k].count,
			      seen[1][k].count);
	du_result_free(&r[0]);
	du_result_free(&r[1]);
	du_conn_free(prod);
	du_daemon_free(d);
}
END_TEST

/*
 * bwctl watch killed (SIGKILL) while fires stream in: the next watch
 * prints every fire the first did not, and any it repeats is marked
 * redelivered (a fire is acknowledged only once its line was flushed).
 */
START_TEST(test_watch_killed)
{
	struct du_daemon *d = du_daemon_new();
	struct seen_line seen[2][NKEYS];
	struct du_proc w;
	struct du_result r[2];
	struct du_conn *prod;
	int n[2];

	memset(seen, 0, sizeof(seen));
	du_daemon_start(d, NULL);
	bwctl_start(&w, d->sock, "watch", "--session", "e2e-kill", "--window", "2", NULL);
	wait_clients(d, 2, "the watch never connected");
	prod = raw_producer(d, "e2e-kill");
	for (uint64_t k = 0; k < NKEYS; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY,
				      .when_ns = 50 * DU_MS + k * 20 * DU_MS };

		bwp_frame_free(du_schedule(prod, k + 2, &s));
	}
	/* Killed about half way through the 800 ms of fires. */
	du_proc_finish(&w, 450, &r[0]);
	ck_assert_msg(r[0].timed_out, "the first watch exited by itself");
	n[0] = tally(r[0].out, seen[0]);
	bwctl(&r[1], d->sock, "watch", "--session", "e2e-kill", "--timeout", "2s", NULL);
	n[1] = tally(r[1].out, seen[1]);
	du_note("the killed watch printed %d fires, the next %d", n[0], n[1]);
	for (int k = 0; k < NKEYS; k++) {
		ck_assert_msg(seen[0][k].count <= 1 && seen[1][k].count <= 1,
			      "key %d repeated by one watch", k);
		ck_assert_msg(seen[0][k].count + seen[1][k].count >= 1, "key %d lost", k);
		if (seen[0][k].count && seen[1][k].count)
			ck_assert_msg(seen[1][k].redelivered,
				      "key %d printed twice, the second time unmarked", k);
	}
	du_result_free(&r[0]);
	du_result_free(&r[1]);
	du_conn_free(prod);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * reconnect
 * ====================================================================== */

/* The daemon with a state directory in its scratch directory, so that a
 * restart keeps named sessions. */
static void start_with_state(struct du_daemon *d)
{
	char dir[160];

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
}

/* Keys from..to-1 into session, due delay0 + k * step from now. */
static void schedule_keys(const struct du_daemon *d, const char *session, uint64_t from,
			  uint64_t to, uint64_t delay0, uint64_t step)
{
	struct du_conn *prod = raw_producer(d, session);

	for (uint64_t k = from; k < to; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY,
				      .when_ns = delay0 + (k - from) * step };
		du_env *r = du_schedule(prod, k + 2, &s);

		ck_assert_int_eq(r->body_case, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY);
		bwp_frame_free(r);
	}
	du_conn_free(prod);
}

/*
 * A watch across a restart (SIGTERM, then the daemon again on its state
 * directory): it attaches again by itself and prints every key, those
 * due across the restart and those scheduled after it; a key printed
 * twice is marked redelivered the second time.
 */
START_TEST(test_watch_reconnect)
{
	struct du_daemon *d = du_daemon_new();
	struct seen_line seen[NKEYS];
	struct du_proc w;
	struct du_result r;
	char timeout[32];

	memset(seen, 0, sizeof(seen));
	start_with_state(d);
	/* Long enough for a restart, even of a daemon under valgrind. */
	snprintf(timeout, sizeof(timeout), "%dms", du_scale_ms(3000));
	bwctl_start(&w, d->sock, "watch", "--session", "e2e-rewatch", "--timeout", timeout,
		    NULL);
	wait_clients(d, 2, "the watch never connected");
	/* Half due over the 400 ms around the restart... */
	schedule_keys(d, "e2e-rewatch", 0, NKEYS / 2, 50 * DU_MS, 20 * DU_MS);
	du_sleep_ms(200);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	start_with_state(d);
	/* ...half scheduled after it. */
	schedule_keys(d, "e2e-rewatch", NKEYS / 2, NKEYS, 20 * DU_MS, 5 * DU_MS);
	du_proc_finish(&w, DU_WAIT_MS, &r);
	ASSERT_EXIT(&r, 0, "watch across a restart");
	tally(r.out, seen);
	for (int k = 0; k < NKEYS; k++) {
		ck_assert_msg(seen[k].count >= 1, "key %d never printed: %s", k, r.out);
		ck_assert_msg(seen[k].count == 1 || seen[k].redelivered,
			      "key %d printed twice, the second time unmarked", k);
	}
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* watch --no-reconnect exits 4 when the daemon stops, at once, as bwctl
 * did before it could reconnect. */
START_TEST(test_watch_no_reconnect)
{
	struct du_daemon *d = du_daemon_new();
	struct du_proc w;
	struct du_result r;
	char timeout[32];

	start_with_state(d);
	snprintf(timeout, sizeof(timeout), "%dms", du_scale_ms(5000));
	bwctl_start(&w, d->sock, "watch", "--session", "e2e-norewatch", "--no-reconnect",
		    "--timeout", timeout, NULL);
	wait_clients(d, 2, "the watch never connected");
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	start_with_state(d);
	du_proc_finish(&w, DU_WAIT_MS, &r);
	ASSERT_EXIT(&r, 4, "watch --no-reconnect as the daemon stops");
	ck_assert_msg(strstr(r.err, "SHUTTING_DOWN") != NULL, "stderr: %s", r.err);
	ck_assert_msg(r.elapsed_ns < (uint64_t)du_scale_ms(4000) * DU_MS,
		      "exited after %" PRIu64 " ms, at its timeout", r.elapsed_ns / DU_MS);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* A daemon that never comes back: --timeout bounds the reconnecting
 * too (exit 1 at 1 s, where the library would give up only at 60 s). */
START_TEST(test_watch_reconnect_timeout)
{
	struct du_daemon *d = du_daemon_new();
	struct du_proc w;
	struct du_result r;

	du_daemon_start(d, NULL);
	bwctl_start(&w, d->sock, "watch", "--session", "e2e-gone", "--timeout", "1s", NULL);
	/* Attached, not only connected: a daemon killed during its Hello
	 * is a failed connect, which bwctl does not retry. */
	wait_open(d, 2, true, "the watch never attached");
	du_daemon_kill(d);
	du_proc_finish(&w, DU_WAIT_MS, &r);
	ASSERT_EXIT(&r, 1, "watch with the daemon gone for good");
	ck_assert_msg(r.elapsed_ns >= DU_S &&
		      r.elapsed_ns < DU_S + (uint64_t)du_scale_ms(2000) * DU_MS,
		      "exited after %" PRIu64 " ms, not its 1 s timeout", r.elapsed_ns / DU_MS);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * stats
 * ====================================================================== */

/* The number in the given column (0-based, after the name) of the table
 * row starting with name. */
static uint64_t table_cell(const char *out, const char *name, int col)
{
	char pat[32];
	const char *p;
	unsigned long long v = 0;

	snprintf(pat, sizeof(pat), "\n%s ", name);
	p = strstr(out, pat);
	ck_assert_msg(p != NULL, "no row %s in: %s", name, out);
	p += strlen(pat);
	for (int i = 0; i <= col; i++) {
		char *end;

		errno = 0;
		v = strtoull(p, &end, 10);
		ck_assert_msg(errno == 0 && end != p, "row %s column %d unreadable", name, i);
		p = end;
	}
	return v;
}

START_TEST(test_stats)
{
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	struct du_conn *c, *c2;
	struct jval *v;
	static const char *const keys[] = {
		"daemon_version", "oneshot.pending", "oneshot.overflow", "oneshot.inserted",
		"oneshot.cancelled", "oneshot.fired", "oneshot.lost", "periodic.pending",
		"periodic.overflow", "periodic.inserted", "periodic.cancelled",
		"periodic.fired", "periodic.lost", "clients", "consumers", "sessions",
		"queued", "in_flight", "acked", "redelivered", "dropped", "expired",
		"uptime_ns", "memory_bytes", "uid", "uid_connections", "uid_sessions",
		"uid_timers", "uid_periodic_rate_mhz", "max_clients_per_uid",
		"max_sessions_per_uid", "max_timers_per_uid", "max_periodic_rate_per_uid",
		"uid_bytes", "max_bytes_per_uid", "max_memory_bytes",
	};
	char version[64];
	du_env *e;

	du_daemon_start(d, "--max-sessions-per-uid", "50", "--max-periodic-rate-per-uid", "70",
			"--max-bytes-per-uid", "1048576", NULL);
	c = du_connect(d->sock);
	e = du_hello(c, "e2e-stats");
	snprintf(version, sizeof(version), "%s", e->hello_reply->daemon_version);
	bwp_frame_free(e);
	for (uint64_t k = 1; k <= 3; k++) {
		struct du_sched s = { .key = k, .when = DU_DELAY, .when_ns = 3600 * DU_S };

		bwp_frame_free(du_schedule(c, k + 1, &s));
	}
	{
		/* Its leeway puts it in the periodic lane. */
		struct du_sched s = { .key = 9, .when = DU_DELAY, .when_ns = 3600 * DU_S,
				      .periodic = true, .period_ns = DU_S,
				      .leeway = true, .leeway_ns = DU_S };

		bwp_frame_free(du_schedule(c, 9, &s));
	}
	ck_assert(du_cancel(c, 10, 3));
	/* A second named session, with no timers. */
	c2 = du_connect(d->sock);
	bwp_frame_free(du_hello(c2, "e2e-stats-2"));

	bwctl(&r, d->sock, "stats", NULL);
	ASSERT_EXIT(&r, 0, "stats");
	ck_assert_msg(strstr(r.out, version) != NULL, "no daemon version in: %s", r.out);
	ck_assert_uint_eq(table_cell(r.out, "clients", 0), 3);
	ck_assert_uint_eq(table_cell(r.out, "sessions", 0), 2);
	/* This uid's: all of the above are the test's (bwctl's included). */
	{
		char uidline[48];

		snprintf(uidline, sizeof(uidline), "\nyour uid %u,", (unsigned)geteuid());
		ck_assert_msg(strstr(r.out, uidline) != NULL, "no \"%s\" in: %s", uidline + 1,
			      r.out);
	}
	ck_assert_uint_eq(table_cell(r.out, "uid_connections", 0), 3);
	ck_assert_uint_eq(table_cell(r.out, "uid_sessions", 0), 2);
	ck_assert_msg(strstr(r.out, "\nuid_sessions     2 of 50 (") != NULL,
		      "no budget of 50 sessions in: %s", r.out);
	ck_assert_uint_eq(table_cell(r.out, "uid_timers", 0), 3);
	ck_assert_msg(strstr(r.out, "\nuid_periodic     1.000 Hz of 70 Hz (") != NULL,
		      "periodic rate not 1 Hz: %s", r.out);
	/* Three timers and the connections' unread output: some bytes. */
	ck_assert_uint_gt(table_cell(r.out, "uid_bytes", 0), 0);
	ck_assert_msg(strstr(r.out, " of 1048576 (timers, fires and unread output)") != NULL,
		      "no bytes budget in: %s", r.out);
	ck_assert_uint_eq(table_cell(r.out, "oneshot", 0), 2);   /* pending   */
	ck_assert_uint_eq(table_cell(r.out, "oneshot", 2), 3);   /* inserted  */
	ck_assert_uint_eq(table_cell(r.out, "oneshot", 3), 1);   /* cancelled */
	ck_assert_uint_eq(table_cell(r.out, "periodic", 0), 1);
	/* The default preset's lanes: ticks of 1 and 100 ms. */
	ck_assert_msg(strstr(r.out, "      1ms ") != NULL && strstr(r.out, "    100ms ") != NULL,
		      "no lane ticks in: %s", r.out);
	ck_assert_uint_eq(table_cell(r.out, "in_flight", 0), 0);
	ck_assert_uint_eq(table_cell(r.out, "acked", 0), 0);
	ck_assert_uint_eq(table_cell(r.out, "redelivered", 0), 0);
	ck_assert_uint_eq(table_cell(r.out, "expired", 0), 0);
	(void)table_cell(r.out, "consumers", 0);
	du_result_free(&r);

	bwctl(&r, d->sock, "stats", "--json", NULL);
	ASSERT_EXIT(&r, 0, "stats --json");
	ck_assert_int_eq(count_lines(r.out), 1);
	r.out[strcspn(r.out, "\n")] = '\0';
	v = jparse_line(r.out);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		ck_assert_msg(jget(v, keys[i]) != NULL, "no %s in: %s", keys[i], r.out);
	ck_assert(jget(v, "daemon_version")->t == J_STR &&
		  strlen(version) == jget(v, "daemon_version")->len &&
		  memcmp(jget(v, "daemon_version")->str, version, strlen(version)) == 0);
	ck_assert_uint_eq(ju64(v, "oneshot.pending"), 2);
	ck_assert_uint_eq(ju64(v, "oneshot.inserted"), 3);
	ck_assert_uint_eq(ju64(v, "oneshot.cancelled"), 1);
	ck_assert_uint_eq(ju64(v, "periodic.pending"), 1);
	ck_assert_uint_eq(ju64(v, "oneshot.resolution_ns"), DU_MS);
	ck_assert_uint_eq(ju64(v, "periodic.resolution_ns"), 100 * DU_MS);
	ck_assert(ju64(v, "oneshot.max_late_ns") >= DU_MS &&
		  ju64(v, "periodic.max_late_ns") > ju64(v, "oneshot.max_late_ns"));
	ck_assert_uint_eq(ju64(v, "clients"), 3);
	ck_assert_uint_eq(ju64(v, "sessions"), 2);
	ck_assert_uint_eq(ju64(v, "uid"), geteuid());
	ck_assert_uint_eq(ju64(v, "uid_connections"), 3);
	ck_assert_uint_eq(ju64(v, "uid_sessions"), 2);
	ck_assert_uint_eq(ju64(v, "uid_timers"), 3);
	ck_assert_uint_eq(ju64(v, "uid_periodic_rate_mhz"), 1000);
	ck_assert_uint_eq(ju64(v, "max_sessions_per_uid"), 50);
	ck_assert_uint_eq(ju64(v, "max_periodic_rate_per_uid"), 70);
	ck_assert_uint_eq(ju64(v, "max_bytes_per_uid"), 1048576);
	ck_assert(ju64(v, "uid_bytes") > 0 && ju64(v, "max_memory_bytes") > 0);
	ck_assert(ju64(v, "max_clients_per_uid") > 0 && ju64(v, "max_timers_per_uid") > 0);
	ck_assert_uint_eq(ju64(v, "queued"), 0);
	ck_assert_uint_eq(ju64(v, "in_flight"), 0);
	ck_assert_uint_eq(ju64(v, "acked"), 0);
	ck_assert_uint_eq(ju64(v, "redelivered"), 0);
	ck_assert_uint_eq(ju64(v, "expired"), 0);
	ck_assert(ju64(v, "consumers") >= 1);   /* bwctl's own, at least */
	ck_assert(ju64(v, "uptime_ns") > 0 && ju64(v, "memory_bytes") > 0);
	jfree(v);
	du_result_free(&r);
	du_conn_free(c2);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * metrics
 * ====================================================================== */

/* One sample of the exposition: name{labels} value. */
struct sample {
	char name[80];
	char labels[80];
	double value;
};

struct exposition {
	struct sample s[512];
	size_t n;
};

static bool metric_name(const char *p, size_t len)
{
	if (len == 0 || !(p[0] == '_' || p[0] == ':' || (p[0] >= 'a' && p[0] <= 'z') ||
			  (p[0] >= 'A' && p[0] <= 'Z')))
		return false;
	for (size_t i = 1; i < len; i++)
		if (!(p[i] == '_' || p[i] == ':' || (p[i] >= 'a' && p[i] <= 'z') ||
		      (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9')))
			return false;
	return true;
}

/* {k="v",...}: label names valid, values quoted without escapes (ours
 * need none).  Returns the length, or 0 when malformed. */
static size_t label_set(const char *p)
{
	const char *q = p + 1;

	if (*p != '{')
		return 0;
	for (;;) {
		const char *k = q;

		while (*q && *q != '=')
			q++;
		if (!metric_name(k, (size_t)(q - k)) || q[0] != '=' || q[1] != '"')
			return 0;
		q = strchr(q + 2, '"');
		if (q == NULL)
			return 0;
		q++;
		if (*q == '}')
			return (size_t)(q + 1 - p);
		if (*q++ != ',')
			return 0;
	}
}

/*
 * Parse the Prometheus text format strictly enough to catch what a
 * scraper would refuse: every family's HELP and TYPE before its samples,
 * a family typed once, each sample of the family typed last (a histogram's
 * _bucket, _sum and _count), counters named _total, values numbers, and
 * "# EOF" last.
 */
static void parse_exposition(const char *out, struct exposition *x)
{
	char fam[80] = "", type[16] = "", typed[96][80];
	size_t ntyped = 0;
	const char *p = out;
	size_t len = strlen(out);

	ck_assert_msg(len >= 6 && strcmp(out + len - 6, "# EOF\n") == 0,
		      "output does not end with # EOF: %s", out);
	x->n = 0;
	while (p < out + len - 6) {
		const char *nl = strchr(p, '\n');
		char line[256];
		size_t ll = (size_t)(nl - p);

		ck_assert_msg(nl != NULL && ll < sizeof(line), "bad line at: %.80s", p);
		memcpy(line, p, ll);
		line[ll] = '\0';
		p = nl + 1;
		if (strncmp(line, "# TYPE ", 7) == 0) {
			char *sp = strchr(line + 7, ' ');

			ck_assert_msg(sp && metric_name(line + 7, (size_t)(sp - line - 7)) &&
				      (size_t)(sp - line - 7) < sizeof(fam), "bad TYPE: %s", line);
			*sp = '\0';
			snprintf(fam, sizeof(fam), "%.79s", line + 7);
			snprintf(type, sizeof(type), "%.15s", sp + 1);
			ck_assert_msg(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0 ||
				      strcmp(type, "histogram") == 0, "bad type: %s", type);
			if (strcmp(type, "counter") == 0)
				ck_assert_msg(strlen(fam) > 6 &&
					      strcmp(fam + strlen(fam) - 6, "_total") == 0,
					      "counter %s not _total", fam);
			ck_assert_msg(strncmp(fam, "bitwheel_", 9) == 0 ||
				      strncmp(fam, "process_", 8) == 0, "no prefix: %s", fam);
			for (size_t i = 0; i < ntyped; i++)
				ck_assert_msg(strcmp(typed[i], fam) != 0, "%s typed twice", fam);
			ck_assert(ntyped < 96);
			memcpy(typed[ntyped++], fam, sizeof(fam));
			continue;
		}
		if (strncmp(line, "# HELP ", 7) == 0) {
			char *sp = strchr(line + 7, ' ');

			ck_assert_msg(sp && metric_name(line + 7, (size_t)(sp - line - 7)) &&
				      sp[1] != '\0', "bad HELP: %s", line);
			continue;
		}
		ck_assert_msg(line[0] != '#' || strncmp(line, "# EOF", 5) != 0,
			      "# EOF before the end");
		if (line[0] == '#')
			continue;
		{
			struct sample *sm = &x->s[x->n];
			size_t nl_ = strcspn(line, "{ "), lab = 0;
			char *end;
			bool ok;

			ck_assert_msg(metric_name(line, nl_) && nl_ < sizeof(sm->name),
				      "bad sample: %s", line);
			memcpy(sm->name, line, nl_);
			sm->name[nl_] = '\0';
			if (line[nl_] == '{') {
				lab = label_set(line + nl_);
				ck_assert_msg(lab > 0 && lab < sizeof(sm->labels), "bad labels: %s",
					      line);
			}
			memcpy(sm->labels, line + nl_, lab);
			sm->labels[lab] = '\0';
			ck_assert_msg(line[nl_ + lab] == ' ', "no value: %s", line);
			errno = 0;
			sm->value = strtod(line + nl_ + lab + 1, &end);
			ck_assert_msg(errno == 0 && end != line + nl_ + lab + 1 && *end == '\0',
				      "bad value: %s", line);
			ok = strcmp(sm->name, fam) == 0;
			if (!ok && strcmp(type, "histogram") == 0) {
				size_t fl = strlen(fam);

				ok = strncmp(sm->name, fam, fl) == 0 &&
				     (strcmp(sm->name + fl, "_bucket") == 0 ||
				      strcmp(sm->name + fl, "_sum") == 0 ||
				      strcmp(sm->name + fl, "_count") == 0);
			}
			ck_assert_msg(ok, "sample %s outside its family (%s)", sm->name, fam);
			ck_assert(++x->n < sizeof(x->s) / sizeof(x->s[0]));
		}
	}
}

static double metric(const struct exposition *x, const char *name, const char *labels)
{
	for (size_t i = 0; i < x->n; i++)
		if (strcmp(x->s[i].name, name) == 0 && strcmp(x->s[i].labels, labels) == 0)
			return x->s[i].value;
	ck_abort_msg("no sample %s%s", name, labels);
	return 0;
}

static bool has_metric(const struct exposition *x, const char *name)
{
	for (size_t i = 0; i < x->n; i++)
		if (strcmp(x->s[i].name, name) == 0)
			return true;
	return false;
}

/* What a caller other than root gets: a comment saying so, its uid's
 * figures, and none of the daemon-wide counters. */
static void assert_not_root_metrics(const struct exposition *x, const char *out)
{
	static const char *const daemon_wide[] = {
		"bitwheel_fire_lateness_seconds_count", "bitwheel_requests_total",
		"bitwheel_errors_total", "bitwheel_connections_accepted_total",
		"bitwheel_journal_sync_seconds_count", "bitwheel_storage",
		"bitwheel_disconnects_total", "bitwheel_delivered_fires_total",
		"bitwheel_queue_wait_seconds_count", "bitwheel_ack_latency_seconds_count",
		"process_resident_memory_bytes", "process_open_fds",
		"process_cpu_seconds_total", "process_start_time_seconds",
	};

	ck_assert_msg(strstr(out, "# bitwheel: not root") != NULL, "%s", out);
	for (size_t i = 0; i < sizeof(daemon_wide) / sizeof(daemon_wide[0]); i++)
		ck_assert_msg(!has_metric(x, daemon_wide[i]), "%s given: %s", daemon_wide[i],
			      out);
	(void)metric(x, "bitwheel_uptime_seconds", "");
}

/* The histogram of one lane (NULL: a histogram without the label), its
 * buckets in order: bounds ascending, counts cumulative, +Inf last and
 * equal to _count.  Returns _count. */
static double check_histogram(const struct exposition *x, const char *fam, const char *lane)
{
	char bucket[96], count[96], prefix[48], inf_label[64], lane_label[48] = "";
	double last_le = -1, last = 0;
	bool inf = false;

	snprintf(bucket, sizeof(bucket), "%s_bucket", fam);
	snprintf(count, sizeof(count), "%s_count", fam);
	if (lane) {
		snprintf(prefix, sizeof(prefix), "{lane=\"%s\",le=\"", lane);
		snprintf(lane_label, sizeof(lane_label), "{lane=\"%s\"}", lane);
	} else {
		snprintf(prefix, sizeof(prefix), "{le=\"");
	}
	snprintf(inf_label, sizeof(inf_label), "%s+Inf\"}", prefix);
	for (size_t i = 0; i < x->n; i++) {
		const struct sample *sm = &x->s[i];
		double le;

		if (strcmp(sm->name, bucket) != 0 ||
		    strncmp(sm->labels, prefix, strlen(prefix)) != 0)
			continue;
		ck_assert_msg(!inf, "a bucket after +Inf");
		if (strcmp(sm->labels, inf_label) == 0) {
			inf = true;
			le = INFINITY;
		} else {
			le = strtod(sm->labels + strlen(prefix), NULL);
		}
		ck_assert_msg(le > last_le, "bounds not ascending at %s", sm->labels);
		ck_assert_msg(sm->value >= last, "buckets not cumulative at %s", sm->labels);
		last_le = le;
		last = sm->value;
	}
	ck_assert_msg(inf, "no +Inf bucket for %s %s", fam, lane ? lane : "");
	ck_assert_msg(metric(x, count, lane_label) == last, "+Inf %g != _count %g", last,
		      metric(x, count, lane_label));
	return last;
}

/* The histogram's _sum. */
static double hist_sum(const struct exposition *x, const char *fam, const char *labels)
{
	char sum[96];

	snprintf(sum, sizeof(sum), "%s_sum", fam);
	return metric(x, sum, labels);
}

/* What a scrape's delivery histograms say when `resent` hand-outs were
 * redeliveries: the queue waits count every first hand-out (delivered
 * less those), the oneshot lane's `oneshot` of them, each a wait no
 * shorter than its fire's lateness; the ack latencies count `acks` fires. */
static void check_delivery(const struct exposition *x, double oneshot, double acks,
			   double resent)
{
	double one = check_histogram(x, "bitwheel_queue_wait_seconds", "oneshot");
	double per = check_histogram(x, "bitwheel_queue_wait_seconds", "periodic");

	ck_assert_double_eq(one, oneshot);
	ck_assert_double_eq(one + per, metric(x, "bitwheel_delivered_fires_total", "") - resent);
	ck_assert(hist_sum(x, "bitwheel_queue_wait_seconds", "{lane=\"oneshot\"}") >=
		  hist_sum(x, "bitwheel_fire_lateness_seconds", "{lane=\"oneshot\"}"));
	ck_assert_double_eq(check_histogram(x, "bitwheel_ack_latency_seconds", NULL), acks);
	ck_assert(hist_sum(x, "bitwheel_ack_latency_seconds", "") <= acks * RUN_MS / 1e3);
	ck_assert(acks == 0 || hist_sum(x, "bitwheel_ack_latency_seconds", "") > 0);
}

/* The daemon process's figures: each once, labelled with the daemon, and
 * plausible for a process started between start_s and end_s (wall clock,
 * a tick's rounding aside). */
static void check_process(const struct exposition *x, double start_s, double end_s)
{
	static const char lab[] = "{daemon=\"bitwheeld\"}";
	double rss = metric(x, "process_resident_memory_bytes", lab);
	double fds = metric(x, "process_open_fds", lab);
	double started = metric(x, "process_start_time_seconds", lab);

	ck_assert_msg(rss > 0 && rss <= metric(x, "process_virtual_memory_bytes", lab),
		      "resident %g", rss);
	/* The listening socket, the wheel's timerfd, libevent's epoll, the
	 * test's connection at least. */
	ck_assert_msg(fds >= 4 && fds <= metric(x, "process_max_fds", lab), "open fds %g", fds);
	ck_assert_msg(started >= start_s - 1 && started <= end_s, "started at %.3f, not "
		      "within %.3f..%.3f", started, start_s, end_s);
	ck_assert(metric(x, "process_cpu_seconds_total", lab) > 0);
	for (size_t i = 0; i < x->n; i++)
		if (strncmp(x->s[i].name, "process_", 8) == 0)
			ck_assert_msg(strcmp(x->s[i].labels, lab) == 0, "%s%s", x->s[i].name,
				      x->s[i].labels);
}

static double realtime_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wait until c is the daemon's only connection (asking on c itself, so
 * that asking takes no place); ids from id on. */
static void wait_alone(struct du_conn *c, uint64_t id)
{
	uint64_t deadline = du_now_ns() + RUN_MS * DU_MS;

	for (;; id++) {
		du_env *e = du_stats(c, id);
		bool one = e->stats_reply->clients == 1;

		bwp_frame_free(e);
		if (one)
			return;
		ck_assert_msg(du_now_ns() < deadline, "a closed connection kept its place");
		du_sleep_ms(5);
	}
}

/* Wait until the daemon has written a snapshot (root's Stats says). */
static void wait_snapshot(struct du_conn *c, uint64_t id)
{
	uint64_t deadline = du_now_ns() + RUN_MS * DU_MS;

	for (;; id++) {
		du_env *e = du_stats(c, id);
		const Bitwheel__V1__Metrics *m = e->stats_reply->metrics;
		bool done;

		ck_assert_msg(m != NULL && m->storage, "no Metrics with storage for root");
		done = m->snapshots > 0;
		ck_assert(done == m->has_snapshot_age_ns);
		bwp_frame_free(e);
		if (done)
			return;
		ck_assert_msg(du_now_ns() < deadline, "no snapshot within --snapshot-interval 1s");
		du_sleep_ms(20);
	}
}

/* promtool(1) (Debian's prometheus) accepts the output, when it is here. */
static void promtool_accepts(const struct du_daemon *d, const char *out)
{
	char file[128], cmd[300], what[1600];
	const char *argv[] = { "sh", "-c", cmd, NULL };
	struct du_result r;
	FILE *f;

	if (!du_have_tool("promtool")) {
		du_note("SKIP: test_metrics's promtool check needs promtool (prometheus)");
		return;
	}
	snprintf(file, sizeof(file), "%s/metrics.prom", d->dir);
	f = fopen(file, "w");
	ck_assert(f != NULL && fputs(out, f) >= 0 && fclose(f) == 0);
	snprintf(cmd, sizeof(cmd), "promtool check metrics < %s", file);
	du_run(argv, clean_env, RUN_MS, &r);
	ck_assert_msg(r.status == 0, "promtool check metrics refused it: %s",
		      du_result_describe(&r, what, sizeof(what)));
	du_result_free(&r);
}

/*
 * watch --coalesce: five fires with a 500 ms leeway are held together to
 * the end of the first one's window (less the finest lane's 1 ms), where
 * without it each would come within its lane's 100 ms; the daemon counts
 * the wake-ups saved.
 */
START_TEST(test_watch_coalesce)
{
	struct du_daemon *d = du_daemon_new();
	char at[32], timeout[32], key[8];
	int ahead_ms;
	struct du_result r;
	uint64_t first, done;

	du_daemon_start(d, NULL);
	/* Five deadlines 20 ms apart, at absolute times, so that their
	 * windows overlap however long the bwctl runs take; far enough ahead
	 * that the runs and the watch's attach come before the first fire
	 * even on a loaded machine or under valgrind (at load 10, 100 ms a
	 * run: with --in 300ms the first fire went before the watch attached,
	 * and with --in the deadlines spread as far as the runs took), and the
	 * watch's timeout past them. */
	ahead_ms = 1200 + du_scale_ms(300);
	first = du_now_ns() + (uint64_t)ahead_ms * DU_MS;
	snprintf(timeout, sizeof(timeout), "%dms", ahead_ms + du_scale_ms(1000) + 10000);
	for (int k = 1; k <= 5; k++) {
		snprintf(key, sizeof(key), "%d", k);
		snprintf(at, sizeof(at), "%" PRIu64, first + (uint64_t)(k - 1) * 20 * DU_MS);
		bwctl(&r, d->sock, "schedule", "--session", "e2e-co", "--key", key,
		      "--at-monotonic", at, "--leeway", "500ms", NULL);
		ASSERT_EXIT(&r, 0, "schedule --leeway");
		ck_assert_uint_eq(field_u64(r.out, "deadline"),
				  first + (uint64_t)(k - 1) * 20 * DU_MS);
		du_result_free(&r);
	}
	bwctl(&r, d->sock, "watch", "--session", "e2e-co", "--coalesce", "--count", "5",
	      "--json", "--timeout", timeout, NULL);
	done = du_now_ns();
	ASSERT_EXIT(&r, 0, "watch --coalesce");
	ck_assert_int_eq(count_lines(r.out), 5);
	du_result_free(&r);
	ck_assert_msg(done >= first + 499 * DU_MS, "the fires came %.1f ms after the first "
		      "deadline: not held to its window's end",
		      ((double)done - (double)first) / 1e6);
	if (geteuid() == 0) {
		struct exposition x;

		bwctl(&r, d->sock, "metrics", NULL);
		ASSERT_EXIT(&r, 0, "metrics");
		parse_exposition(r.out, &x);
		ck_assert(metric(&x, "bitwheel_coalesced_fires_total", "") >= 4);
		du_result_free(&r);
	}
	du_daemon_free(d);
}
END_TEST

/* The limits test_metrics starts its daemon with, none the default: each
 * gauge's family, name label, the option's value and the gauge's; those
 * without an option (arg NULL) are the daemon's fixed values. */
static const struct {
	const char *family, *name, *arg;
	double value;
} metrics_limits[] = {
	{ "bitwheel_limit", "max_clients", "2", 2 },
	{ "bitwheel_limit", "max_timers", "5000", 5000 },
	{ "bitwheel_limit", "max_queued", "300", 300 },
	{ "bitwheel_limit", "max_window", "512", 512 },
	{ "bitwheel_limit", "max_clients_per_uid", "3", 3 },
	{ "bitwheel_limit", "max_sessions_per_uid", "9", 9 },
	{ "bitwheel_limit", "max_timers_per_uid", "7777", 7777 },
	{ "bitwheel_limit_bytes", "max_frame", "40000", 40000 },
	{ "bitwheel_limit_bytes", "max_payload", "2000", 2000 },
	{ "bitwheel_limit_bytes", "max_output", "2097152", 2 << 20 },
	{ "bitwheel_limit_bytes", "max_bytes_per_uid", "48M", 48 << 20 },
	{ "bitwheel_limit_bytes", "max_journal_per_uid", "3M", 3 << 20 },
	{ "bitwheel_limit_bytes", "max_memory", "768M", 768 << 20 },
	{ "bitwheel_limit_seconds", "linger", "7s", 7 },
	{ "bitwheel_limit_seconds", "hello_timeout", "3500ms", 3.5 },
	{ "bitwheel_limit_hertz", "max_periodic_rate_per_uid", "123", 123 },
	{ "bitwheel_limit", "max_deliveries", "7", 7 },
	{ "bitwheel_limit", "max_kick", NULL, 10000 },
	{ "bitwheel_limit_seconds", "max_release_delay", NULL, 7 * 86400 },
	{ "bitwheel_limit_seconds", "max_hold", NULL, 12 * 3600 },
};
#define METRICS_LIMITS (sizeof(metrics_limits) / sizeof(metrics_limits[0]))

/* Every limit gauge, as metrics_limits says (as root: the per-uid ones
 * are the defaults, which the test's uids have). */
static void check_limits(const struct exposition *x)
{
	size_t n = 0;

	for (size_t i = 0; i < METRICS_LIMITS; i++) {
		char label[96];

		snprintf(label, sizeof(label), "{name=\"%s\"}", metrics_limits[i].name);
		ck_assert_msg(metric(x, metrics_limits[i].family, label) ==
			      metrics_limits[i].value, "%s%s %g, not %g", metrics_limits[i].family,
			      label, metric(x, metrics_limits[i].family, label),
			      metrics_limits[i].value);
	}
	/* And no other. */
	for (size_t i = 0; i < x->n; i++)
		n += strncmp(x->s[i].name, "bitwheel_limit", 14) == 0;
	ck_assert_uint_eq(n, METRICS_LIMITS);
}

/*
 * Known activity, then bwctl metrics: N fires delivered (all within a
 * generous second, five under valgrind), one DUPLICATE_KEY, one connection
 * refused at --max-clients, one closed after FRAME_TOO_LARGE, a journaled
 * change under --state-dir, ACKED fires of a manual consumer acknowledged
 * and one not; every limit set to something else than its default.
 */
START_TEST(test_metrics)
{
	enum { N = 20, ACKED = 2, MANUAL = ACKED + 1, ONESHOT = N + MANUAL };
	static const struct du_hello_opts manual = {
		.role = BITWHEEL__V1__ROLE__CONSUMER, .has_auto_ack = true,
	};
	const char *args[2 * METRICS_LIMITS + 12];
	size_t na = 0;
	uint64_t second = 0;
	double started;
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .when = DU_DELAY };
	struct du_buf b = { 0 };
	static struct exposition x;
	struct du_result r;
	struct du_conn *c, *c2, *refused;
	char dir[128], le[64], version[96];
	double fires;
	du_env *e;

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	/* uid 65534's bwctl must reach the socket too. */
	ck_assert(chmod(d->dir, 0755) == 0);
	for (size_t i = 0; i < METRICS_LIMITS; i++) {
		/* The option the name label names: --max-clients for max_clients. */
		static char flags[METRICS_LIMITS][48];

		if (metrics_limits[i].arg == NULL)
			continue;
		snprintf(flags[i], sizeof(flags[i]), "--%s", metrics_limits[i].name);
		for (char *p = flags[i]; *p; p++)
			if (*p == '_')
				*p = '-';
		args[na++] = flags[i];
		args[na++] = metrics_limits[i].arg;
	}
	args[na++] = "--state-dir";
	args[na++] = dir;
	args[na++] = "--socket-mode";
	args[na++] = "0666";
	args[na++] = "--snapshot-interval";
	args[na++] = "1s";
	args[na++] = "--snapshot-min-interval";
	args[na++] = "0s";
	args[na] = NULL;
	started = realtime_s();
	du_daemon_startv(d, args);
	c = du_connect(d->sock);
	e = du_hello(c, NULL);                  /* anonymous: its own consumer */
	snprintf(version, sizeof(version), "{version=\"%s\"}", e->hello_reply->daemon_version);
	bwp_frame_free(e);
	s.when_ns = 20 * DU_MS;
	for (uint64_t k = 1; k <= N; k++) {
		s.key = k;
		bwp_frame_free(du_schedule(c, k + 1, &s));
	}
	s.key = 1000;
	s.when_ns = 3600 * DU_S;
	bwp_frame_free(du_schedule(c, 100, &s));
	du_pack_schedule(&b, 101, &s);
	du_send_buf(c, &b);
	du_buf_free(&b);
	du_expect_error(c, true, 101, EC(DUPLICATE_KEY));
	for (int i = 0; i < N; i++)
		bwp_frame_free(du_expect_fire(c, RUN_MS, NULL));
	/* Two fires of a periodic timer whose leeway puts it in the other
	 * lane: that lane's histogram. */
	s.key = 2000;
	s.when_ns = 10 * DU_MS;
	s.periodic = true;
	s.period_ns = 50 * DU_MS;
	s.leeway = true;
	s.leeway_ns = DU_S;
	bwp_frame_free(du_schedule(c, 102, &s));
	for (int i = 0; i < 2; i++)
		bwp_frame_free(du_expect_fire(c, RUN_MS, NULL));
	ck_assert(du_cancel(c, 103, 2000));
	s.periodic = s.leeway = false;
	s.when_ns = 3600 * DU_S;
	/* A named session's change: journaled and synced before its reply. */
	c2 = du_connect(d->sock);
	bwp_frame_free(du_hello_opts(c2, "e2e-metrics", &manual));
	s.key = 1;
	bwp_frame_free(du_schedule(c2, 2, &s));
	/* A manual consumer's fires: ACKED acknowledged by one Ack, the last
	 * taken back when c2 goes (it waits in the session's queue). */
	s.when_ns = DU_MS;
	for (uint64_t k = 0; k < MANUAL; k++) {
		s.key = 10 + k;
		bwp_frame_free(du_schedule(c2, 3 + k, &s));
	}
	for (int i = 0; i < MANUAL; i++) {
		e = du_expect_fire(c2, RUN_MS, NULL);
		if (i == ACKED - 1)
			second = e->fired->delivery;
		bwp_frame_free(e);
	}
	ck_assert_uint_eq(du_ack(c2, 10, second, true), ACKED);
	s.when_ns = 3600 * DU_S;
	refused = du_connect(d->sock);
	du_expect_error(refused, false, 0, EC(TOO_MANY_CLIENTS));
	du_expect_eof(refused, RUN_MS);
	du_conn_free(refused);
	/* A place for bwctl. */
	du_conn_free(c2);
	wait_alone(c, 200);
	/* A frame past --max-frame: FRAME_TOO_LARGE, and the daemon closes. */
	refused = du_connect(d->sock);
	ck_assert_int_eq(du_conn_send_bytes(refused, "\xff\xff\xff\xff", 4, RUN_MS), 0);
	du_expect_error(refused, false, 0, EC(FRAME_TOO_LARGE));
	du_expect_eof(refused, RUN_MS);
	du_conn_free(refused);
	wait_alone(c, 250);
	/* c2's fire not acknowledged comes again, marked, and is. */
	c2 = du_connect(d->sock);
	e = du_hello_opts(c2, "e2e-metrics", &manual);
	ck_assert_uint_eq(e->hello_reply->queued, 1);
	bwp_frame_free(e);
	e = du_expect_fire(c2, RUN_MS, NULL);
	ck_assert(e->fired->redelivered && e->fired->key == 10 + ACKED);
	ck_assert_uint_eq(du_ack(c2, 11, e->fired->delivery, false), 1);
	bwp_frame_free(e);
	du_conn_free(c2);
	wait_alone(c, 270);
	/* The change above makes a snapshot within --snapshot-interval. */
	if (geteuid() == 0)
		wait_snapshot(c, 400);

	bwctl(&r, d->sock, "sessions", NULL);
	ASSERT_EXIT(&r, 0, "sessions");
	du_result_free(&r);
	bwctl(&r, d->sock, "list", "--session", "e2e-metrics", NULL);
	ASSERT_EXIT(&r, 0, "list");
	du_result_free(&r);
	bwctl(&r, d->sock, "metrics", NULL);
	ASSERT_EXIT(&r, 0, "metrics");
	parse_exposition(r.out, &x);
	ck_assert_double_eq(metric(&x, "bitwheel_build_info", version), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_clients", ""), 2);
	ck_assert_double_eq(metric(&x, "bitwheel_sessions", ""), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_timers_inserted_total", "{lane=\"oneshot\"}"),
			    N + 2 + MANUAL);
	ck_assert_double_eq(metric(&x, "bitwheel_fires_total", "{lane=\"oneshot\"}"), ONESHOT);
	ck_assert(metric(&x, "bitwheel_uptime_seconds", "") > 0);
	ck_assert(metric(&x, "bitwheel_memory_bytes", "") > 0);
	check_limits(&x);
	if (geteuid() != 0) {
		assert_not_root_metrics(&x, r.out);
		du_note("SKIP: test_metrics's daemon-wide part needs root");
		goto done;
	}
	ck_assert_msg(strstr(r.out, "# bitwheel: not root") == NULL, "%s", r.out);
	promtool_accepts(d, r.out);
	fires = check_histogram(&x, "bitwheel_fire_lateness_seconds", "oneshot");
	ck_assert_double_eq(fires, ONESHOT);
	/* The daemon counts both as it fires: equal in any one scrape. */
	fires = check_histogram(&x, "bitwheel_fire_lateness_seconds", "periodic");
	ck_assert(fires >= 2);
	ck_assert_double_eq(fires, metric(&x, "bitwheel_fires_total", "{lane=\"periodic\"}"));
	/* Fires that came due before the Cancel may be on their way still. */
	ck_assert(metric(&x, "bitwheel_delivered_fires_total", "") >= ONESHOT + 2 + 1 &&
		  metric(&x, "bitwheel_delivered_fires_total", "") <= ONESHOT + fires + 1);
	/* Each fire's first hand-out: its queue wait (the one taken back and
	 * handed out again once); the ACKED fires of one Ack and that one of
	 * another: their ack latency. */
	check_delivery(&x, ONESHOT, ACKED + 1, 1);
	/* Every completed fire (auto-ack's too) by its hand-outs; nothing
	 * here released, touched, dead-lettered or kicked. */
	ck_assert_double_eq(metric(&x, "bitwheel_fire_deliveries_count", ""),
			    metric(&x, "bitwheel_acked_fires_total", ""));
	ck_assert_double_eq(metric(&x, "bitwheel_fire_deliveries_bucket", "{le=\"+Inf\"}"),
			    metric(&x, "bitwheel_acked_fires_total", ""));
	ck_assert_double_eq(metric(&x, "bitwheel_fire_deliveries_bucket", "{le=\"1\"}"),
			    metric(&x, "bitwheel_acked_fires_total", "") - 1);
	ck_assert_double_eq(metric(&x, "bitwheel_fires_released_total", ""), 0);
	ck_assert_double_eq(metric(&x, "bitwheel_fires_touched_total", ""), 0);
	ck_assert_double_eq(metric(&x, "bitwheel_fires_dead_lettered_total", ""), 0);
	ck_assert_double_eq(metric(&x, "bitwheel_fires_kicked_total", ""), 0);
	ck_assert_double_eq(metric(&x, "bitwheel_redelivered_fires_total", ""), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_queued_fires", ""), 0);
	ck_assert_double_eq(metric(&x, "bitwheel_acked_fires_total", ""),
			    metric(&x, "bitwheel_delivered_fires_total", "") - 1);
	ck_assert_double_eq(metric(&x, "bitwheel_requests_total", "{type=\"ack\"}"), 2);
	check_process(&x, started, realtime_s());
	snprintf(le, sizeof(le), "{lane=\"oneshot\",le=\"%s\"}",
		 du_slow() > 1 ? "5.000000000" : "1.000000000");
	ck_assert_double_eq(metric(&x, "bitwheel_fire_lateness_seconds_bucket", le), ONESHOT);
	ck_assert(metric(&x, "bitwheel_fire_lateness_seconds_sum", "{lane=\"oneshot\"}") > 0 &&
		  metric(&x, "bitwheel_fire_lateness_seconds_sum", "{lane=\"oneshot\"}") <
		  ONESHOT * 5.0);
	ck_assert_double_eq(metric(&x, "bitwheel_requests_total", "{type=\"schedule\"}"),
			    N + 4 + MANUAL);
	ck_assert(metric(&x, "bitwheel_requests_total", "{type=\"hello\"}") >= 3);
	ck_assert(metric(&x, "bitwheel_requests_total", "{type=\"stats\"}") >= 2);
	ck_assert_double_eq(metric(&x, "bitwheel_requests_total", "{type=\"cancel\"}"), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_requests_total", "{type=\"list_sessions\"}"), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_requests_total", "{type=\"list_timers\"}"), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_errors_total", "{code=\"DUPLICATE_KEY\"}"), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_errors_total", "{code=\"TOO_MANY_CLIENTS\"}"), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_errors_total", "{code=\"BAD_REQUEST\"}"), 0);
	ck_assert_double_eq(metric(&x, "bitwheel_connections_refused_total",
				   "{reason=\"max_clients\"}"), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_connections_refused_total",
				   "{reason=\"uid_budget\"}"), 0);
	ck_assert(metric(&x, "bitwheel_connections_accepted_total", "") >= 3);
	ck_assert_double_eq(metric(&x, "bitwheel_disconnects_total",
				   "{reason=\"slow_consumer\"}"), 0);
	ck_assert_double_eq(metric(&x, "bitwheel_errors_total", "{code=\"FRAME_TOO_LARGE\"}"), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_disconnects_total", "{reason=\"error\"}"), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_disconnects_total", "{reason=\"no_memory\"}"), 0);
	/* c2's (a refusal at accept is no connection). */
	ck_assert(metric(&x, "bitwheel_disconnects_total", "{reason=\"closed\"}") >= 1);
	ck_assert_double_eq(metric(&x, "bitwheel_storage", ""), 1);
	ck_assert_double_eq(metric(&x, "bitwheel_storage_down", ""), 0);
	ck_assert(check_histogram(&x, "bitwheel_journal_sync_seconds", NULL) >= 1);
	ck_assert(metric(&x, "bitwheel_journal_sync_seconds_sum", "") >=
		  metric(&x, "bitwheel_journal_sync_max_seconds", ""));
	ck_assert(metric(&x, "bitwheel_journal_sync_max_seconds", "") >=
		  metric(&x, "bitwheel_journal_sync_last_seconds", ""));
	ck_assert(metric(&x, "bitwheel_snapshots_total", "") >= 1);
	ck_assert(metric(&x, "bitwheel_snapshot_last_seconds", "") > 0);
	ck_assert(metric(&x, "bitwheel_snapshot_seconds_total", "") >=
		  metric(&x, "bitwheel_snapshot_last_seconds", ""));
	ck_assert(metric(&x, "bitwheel_snapshot_age_seconds", "") <
		  metric(&x, "bitwheel_uptime_seconds", ""));

	/* Anyone else: its own uid's figures, none of the daemon's. */
	if (bwctl_runs_as_nobody("test_metrics")) {
		const char *argv[] = {
			"setpriv", "--reuid=" NOBODY, "--regid=" NOBODY, "--clear-groups",
			DU_BWCTL_PATH, "--socket", d->sock, "metrics", NULL,
		};
		char what[1600];

		du_result_free(&r);
		wait_alone(c, 300);
		du_run(argv, clean_env, RUN_MS, &r);
		ck_assert_msg(r.status == 0, "metrics as uid " NOBODY ": %s",
			      du_result_describe(&r, what, sizeof(what)));
		parse_exposition(r.out, &x);
		assert_not_root_metrics(&x, r.out);
		ck_assert_double_eq(metric(&x, "bitwheel_uid_connections",
					   "{uid=\"" NOBODY "\"}"), 1);
		ck_assert_double_eq(metric(&x, "bitwheel_fires_total", "{lane=\"oneshot\"}"), 0);
		ck_assert_double_eq(metric(&x, "bitwheel_sessions", ""), 0);
		check_limits(&x);
	}
done:
	du_result_free(&r);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/*
 * A loaded daemon: N oneshot timers pipelined with deadlines spread over
 * SPREAD_MS and P periodic ones in the other lane (by their leeway), every
 * oneshot fire received and P periodic ones.  In one scrape, written by --output, each
 * lane's lateness histogram counts exactly the lane's fires, and promtool
 * accepts it.  --output leaves no temporary file, is readable by all, and
 * leaves the file as it was when it cannot write.
 */
START_TEST(test_metrics_loaded)
{
	enum { N = 3000, P = 8, BATCH = 500, SPREAD_MS = 200 };
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .when = DU_DELAY };
	struct du_buf b = { 0 };
	static struct exposition x;
	struct du_result r;
	struct du_conn *c;
	char file[160], bad[200], *text;
	uint64_t deadline, replies = 0, fires = 0, periodic = 0, id = 1;
	struct stat sb;
	double one, per;
	DIR *dir;
	struct dirent *de;
	du_env *e;

	if (geteuid() != 0) {
		du_note("SKIP: test_metrics_loaded needs root (daemon-wide metrics)");
		du_daemon_free(d);
		return;
	}
	du_daemon_start(d, NULL);
	c = du_connect(d->sock);
	bwp_frame_free(du_hello(c, NULL));
	for (uint64_t k = 1; k <= N + P; k++) {
		s.key = k;
		/* The periodic ones' leeway puts them in the other lane. */
		s.periodic = s.leeway = k > N;
		s.period_ns = 5 * DU_MS;
		s.leeway_ns = DU_S;
		/* A leeway puts the periodic ones in the periodic lane. */
		s.leeway = k > N;
		s.leeway_ns = DU_S;
		s.when_ns = (k * 7919 % SPREAD_MS + 1) * DU_MS;
		du_pack_schedule(&b, id++, &s);
		if (k % BATCH == 0 || k == N + P)
			du_send_buf(c, &b);
	}
	du_buf_free(&b);
	/* Replies and fires interleave; the periodic fires go on meanwhile
	 * (their lane's tick is coarser: wait for P of them too). */
	deadline = du_now_ns() + (uint64_t)du_scale_ms(SPREAD_MS + RUN_MS) * DU_MS;
	while (replies < N + P || fires < N || periodic < P) {
		int rc = du_recv(c, 100, &e);

		ck_assert_msg(du_now_ns() < deadline,
			      "%" PRIu64 " replies, %" PRIu64 " oneshot fires of %d, %"
			      PRIu64 " periodic ones", replies, fires, N, periodic);
		if (rc == DU_TIMEOUT)
			continue;
		ck_assert_int_eq(rc, DU_FRAME);
		if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY)
			replies++;
		else if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED)
			*(e->fired->key <= N ? &fires : &periodic) += 1;
		else
			ck_abort_msg("unexpected %d", e->body_case);
		bwp_frame_free(e);
	}
	du_conn_free(c);

	snprintf(file, sizeof(file), "%s/bitwheel.prom", d->dir);
	bwctl(&r, d->sock, "metrics", "--output", file, NULL);
	ASSERT_EXIT(&r, 0, "metrics --output");
	ck_assert_msg(r.out[0] == '\0', "--output printed: %s", r.out);
	du_result_free(&r);
	ck_assert(stat(file, &sb) == 0);
	ck_assert_msg((sb.st_mode & 0777) == 0644, "mode %o", (unsigned)(sb.st_mode & 0777));
	text = du_read_file(file);
	parse_exposition(text, &x);
	promtool_accepts(d, text);
	one = check_histogram(&x, "bitwheel_fire_lateness_seconds", "oneshot");
	per = check_histogram(&x, "bitwheel_fire_lateness_seconds", "periodic");
	ck_assert_double_eq(one, N);
	ck_assert_double_eq(one, metric(&x, "bitwheel_fires_total", "{lane=\"oneshot\"}"));
	ck_assert_double_eq(per, metric(&x, "bitwheel_fires_total", "{lane=\"periodic\"}"));
	ck_assert(per >= P);
	ck_assert(metric(&x, "bitwheel_delivered_fires_total", "") >= N);
	/* Every oneshot fire handed out once; auto-ack makes no Ack. */
	check_delivery(&x, N, 0, 0);
	free(text);

	/* Nothing left beside it; a directory that is not there changes
	 * nothing. */
	ck_assert((dir = opendir(d->dir)) != NULL);
	while ((de = readdir(dir)) != NULL)
		ck_assert_msg(strstr(de->d_name, ".tmp.") == NULL, "left behind: %s",
			      de->d_name);
	closedir(dir);
	snprintf(bad, sizeof(bad), "%s/missing/bitwheel.prom", d->dir);
	bwctl(&r, d->sock, "metrics", "--output", bad, NULL);
	ASSERT_EXIT(&r, 4, "metrics --output into a missing directory");
	ck_assert_msg(strstr(r.err, "missing") != NULL, "%s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "stats", "--output", file, NULL);
	ASSERT_EXIT(&r, 2, "stats --output");
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* Whether dir holds anything (a temporary file or the output). */
static bool dir_empty(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *de;
	bool empty = true;

	ck_assert_ptr_nonnull(dp);
	while ((de = readdir(dp)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = false;
	closedir(dp);
	return empty;
}

/*
 * --output's directory is trusted as the daemon trusts its own: one that
 * is a symbolic link (root would write where it points), writable by
 * others or its group, or (as root) owned by another uid is refused with
 * exit 4 naming it, and nothing is written there; a sticky one (as /tmp)
 * is fine, and a symbolic link at the file's own name is replaced, its
 * target untouched.  A name ending in '/' is a usage error.
 */
START_TEST(test_metrics_output_dir)
{
	static const struct {
		const char *sub;           /* under the daemon's directory      */
		mode_t mode;
		const char *want;          /* in stderr; NULL: accepted         */
	} dirs[] = {
		{ "open", 0777, "is writable by others (mode 0777)" },
		{ "group", 0775, "is writable by its group (mode 0775)" },
		{ "sticky", 01777, NULL },
		{ "plain", 0755, NULL },
	};
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	char dir[256], file[300], target[300], real[256];
	struct stat sb;
	char *text;

	du_daemon_start(d, NULL);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(dir, sizeof(dir), "%s/%s", d->dir, dirs[i].sub);
		ck_assert(mkdir(dir, 0700) == 0 && chmod(dir, dirs[i].mode) == 0);
		snprintf(file, sizeof(file), "%s/bitwheel.prom", dir);
		bwctl(&r, d->sock, "metrics", "--output", file, NULL);
		if (dirs[i].want) {
			ASSERT_EXIT(&r, 4, dirs[i].sub);
			ck_assert_msg(strstr(r.err, dirs[i].want) && strstr(r.err, dir),
				      "%s: %s", dirs[i].sub, r.err);
			ck_assert_msg(dir_empty(dir), "%s: written into", dirs[i].sub);
		} else {
			ASSERT_EXIT(&r, 0, dirs[i].sub);
			ck_assert(stat(file, &sb) == 0 && S_ISREG(sb.st_mode));
		}
		du_result_free(&r);
	}

	/* A symbolic link as the directory: not followed. */
	snprintf(real, sizeof(real), "%s/real", d->dir);
	ck_assert(mkdir(real, 0755) == 0);
	snprintf(dir, sizeof(dir), "%s/link", d->dir);
	ck_assert(symlink(real, dir) == 0);
	snprintf(file, sizeof(file), "%s/bitwheel.prom", dir);
	bwctl(&r, d->sock, "metrics", "--output", file, NULL);
	ASSERT_EXIT(&r, 4, "a linked directory");
	ck_assert_msg(strstr(r.err, "is a symbolic link"), "%s", r.err);
	ck_assert_msg(dir_empty(real), "written where the link points");
	du_result_free(&r);

	/* A symbolic link as the file: replaced, its target as it was. */
	snprintf(target, sizeof(target), "%s/target", d->dir);
	{
		FILE *f = fopen(target, "w");

		ck_assert_ptr_nonnull(f);
		fputs("precious\n", f);
		ck_assert(fclose(f) == 0);
	}
	snprintf(file, sizeof(file), "%s/plain/linked.prom", d->dir);
	ck_assert(symlink(target, file) == 0);
	bwctl(&r, d->sock, "metrics", "--output", file, NULL);
	ASSERT_EXIT(&r, 0, "a linked file");
	du_result_free(&r);
	ck_assert(lstat(file, &sb) == 0 && S_ISREG(sb.st_mode));
	text = du_read_file(target);
	ck_assert_str_eq(text, "precious\n");
	free(text);

	if (geteuid() == 0) {
		snprintf(dir, sizeof(dir), "%s/theirs", d->dir);
		ck_assert(mkdir(dir, 0755) == 0 && chown(dir, 65534, (gid_t)-1) == 0);
		snprintf(file, sizeof(file), "%s/bitwheel.prom", dir);
		bwctl(&r, d->sock, "metrics", "--output", file, NULL);
		ASSERT_EXIT(&r, 4, "another uid's directory");
		ck_assert_msg(strstr(r.err, "is owned by uid 65534, not by root or you (uid 0)"),
			      "%s", r.err);
		ck_assert(dir_empty(dir));
		du_result_free(&r);
	} else {
		du_note("SKIP: test_metrics_output_dir: another uid's directory needs root");
	}

	snprintf(file, sizeof(file), "%s/plain/", d->dir);
	bwctl(&r, d->sock, "metrics", "--output", file, NULL);
	ASSERT_EXIT(&r, 2, "--output DIR/");
	ck_assert_msg(strstr(r.err, "names a directory, not a file"), "%s", r.err);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/*
 * Fires read back at a restart: a named session's 2 fires, made and queued
 * with no consumer, then the daemon stopped and started again on its state
 * directory; a manual consumer gets and acknowledges them.  The new
 * process made none of them, so its queue waits count none (and its
 * lateness none), while their Ack counts 2 ack latencies.
 */
START_TEST(test_metrics_restored)
{
	enum { FIRES = 2 };
	static const struct du_hello_opts manual = {
		.role = BITWHEEL__V1__ROLE__CONSUMER, .has_auto_ack = true,
	};
	struct du_daemon *d = du_daemon_new();
	struct du_sched s = { .when = DU_DELAY, .when_ns = DU_MS };
	static struct exposition x;
	char dir[128];
	struct du_result r;
	struct du_conn *c;
	uint64_t deadline, last = 0;
	bool queued = false;
	du_env *e;

	if (geteuid() != 0) {
		du_note("SKIP: test_metrics_restored needs root (daemon-wide metrics)");
		du_daemon_free(d);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_daemon_start(d, "--state-dir", dir, NULL);
	c = raw_producer(d, "e2e-restored");
	for (uint64_t k = 1; k <= FIRES; k++) {
		s.key = k;
		bwp_frame_free(du_schedule(c, 1 + k, &s));
	}
	deadline = du_now_ns() + RUN_MS * DU_MS;
	for (uint64_t id = 10; !queued; id++) {
		e = du_stats(c, id);
		queued = e->stats_reply->queued == FIRES;
		bwp_frame_free(e);
		ck_assert_msg(queued || du_now_ns() < deadline, "the fires were not queued");
		if (!queued)
			du_sleep_ms(5);
	}
	du_conn_free(c);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	du_daemon_start(d, "--state-dir", dir, NULL);
	c = du_connect(d->sock);
	e = du_hello_opts(c, "e2e-restored", &manual);
	ck_assert_uint_eq(e->hello_reply->queued, FIRES);
	bwp_frame_free(e);
	for (int i = 0; i < FIRES; i++) {
		e = du_expect_fire(c, RUN_MS, NULL);
		last = e->fired->delivery;
		bwp_frame_free(e);
	}
	ck_assert_uint_eq(du_ack(c, 20, last, true), FIRES);
	bwctl(&r, d->sock, "metrics", NULL);
	ASSERT_EXIT(&r, 0, "metrics");
	parse_exposition(r.out, &x);
	ck_assert_double_eq(metric(&x, "bitwheel_delivered_fires_total", ""), FIRES);
	ck_assert_double_eq(check_histogram(&x, "bitwheel_fire_lateness_seconds", "oneshot"), 0);
	check_delivery(&x, 0, FIRES, FIRES);
	du_result_free(&r);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * peer
 * ====================================================================== */

#define NOBODY_UID 65534

/* bwctl refused the stand-in: exit 5, its uid and pid, the socket and the
 * way to trust it named, nothing printed on stdout, nothing sent. */
static void assert_bwctl_refused(struct du_result *r, struct du_fake *f, const char *what)
{
	char want[64];

	ASSERT_EXIT(r, 5, what);
	snprintf(want, sizeof(want), "uid %d (pid %ld)", NOBODY_UID, (long)f->pid);
	ck_assert_msg(strstr(r->err, want) != NULL && strstr(r->err, f->sock) != NULL &&
		      strstr(r->err, "--daemon-user") != NULL &&
		      strstr(r->err, "posing as bitwheeld") != NULL,
		      "%s: stderr without \"%s\", the socket or --daemon-user: %s", what,
		      want, r->err);
	ck_assert_msg(r->out[0] == '\0', "%s: stdout: %s", what, r->out);
	du_result_free(r);
	ck_assert_uint_eq(du_fake_next_conn(f, RUN_MS), 0);
}

/* bwctl stats went through to the stand-in, which answered. */
static void assert_bwctl_through(struct du_result *r, struct du_fake *f, const char *what)
{
	ASSERT_EXIT(r, 0, what);
	ck_assert_msg(strstr(r->out, "bitwheeld fake at ") != NULL, "%s: stdout: %s", what,
		      r->out);
	du_result_free(r);
	ck_assert_uint_gt(du_fake_next_conn(f, RUN_MS), 0);
}

START_TEST(test_peer)
{
	struct passwd *pw = getpwuid(NOBODY_UID);
	const char *env[] = { "BITWHEEL_SOCKET", "BITWHEEL_DAEMON_USER=" NOBODY, NULL };
	const char *argv[8] = { DU_BWCTL_PATH, "--socket", NULL, "stats", NULL };
	struct du_daemon *d;
	struct du_result r;
	struct du_fake *f;

	if (geteuid() != 0) {
		du_note("SKIP: test_peer needs root (to run a listener as uid %s)", NOBODY);
		return;
	}
	f = du_fake_start(NOBODY_UID);
	bwctl(&r, f->sock, "stats", NULL);
	assert_bwctl_refused(&r, f, "stats to uid 65534's listener");
	bwctl(&r, f->sock, "--daemon-user", NOBODY, "stats", NULL);
	assert_bwctl_through(&r, f, "--daemon-user 65534 stats");
	bwctl(&r, f->sock, "stats", "--daemon-user", pw ? pw->pw_name : NOBODY, NULL);
	assert_bwctl_through(&r, f, "stats --daemon-user nobody");
	argv[2] = f->sock;
	du_run(argv, env, RUN_MS, &r);
	assert_bwctl_through(&r, f, "BITWHEEL_DAEMON_USER=65534 bwctl stats");
	/* The option over the environment. */
	argv[3] = "--daemon-user";
	argv[4] = "65533";
	argv[5] = "stats";
	du_run(argv, env, RUN_MS, &r);
	assert_bwctl_refused(&r, f, "--daemon-user 65533 over BITWHEEL_DAEMON_USER=65534");
	bwctl(&r, f->sock, "--daemon-user", "", "stats", NULL);
	ASSERT_EXIT(&r, 2, "--daemon-user ''");
	du_result_free(&r);
	du_fake_free(f);

	/* A socket it may not open: not "is bitwheeld running?". */
	if (!bwctl_runs_as_nobody("test_peer"))
		return;
	d = du_daemon_new();
	ck_assert(chmod(d->dir, 0755) == 0);
	du_daemon_start(d, "--socket-mode", "0660", NULL);
	{
		const char *as_nobody[] = {
			"setpriv", "--reuid=" NOBODY, "--regid=" NOBODY, "--clear-groups",
			DU_BWCTL_PATH, "--socket", d->sock, "stats", NULL,
		};

		du_run(as_nobody, clean_env, RUN_MS, &r);
	}
	ASSERT_EXIT(&r, 3, "stats as uid 65534 on a 0660 root socket");
	ck_assert_msg(strstr(r.err, "lack permission on") != NULL &&
		      strstr(r.err, "usermod -aG root ") != NULL &&
		      strstr(r.err, "is bitwheeld running") == NULL,
		      "stderr: %s", r.err);
	du_result_free(&r);
	{
		const char *as_nobody[] = {
			"setpriv", "--reuid=" NOBODY, "--regid=" NOBODY, "--clear-groups",
			DU_BWCTL_PATH, "--socket", d->sock, "stats", "--json", NULL,
		};

		du_run(as_nobody, clean_env, RUN_MS, &r);
	}
	jfree(json_error(&r, 3, "NOT_PERMITTED", "stats --json as uid 65534"));
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * usage, unreachable, help
 * ====================================================================== */

static const char *const usage_cases[][12] = {
	{ NULL },
	{ "frobnicate", NULL },
	{ "schedule", "--in", "1s", NULL },
	{ "schedule", "--key", "1", NULL },
	{ "schedule", "--key", "1", "--in", "1s", "--at-monotonic", "5", NULL },
	{ "schedule", "--key", "1", "--in", "250", NULL },
	{ "schedule", "--key", "-1", "--in", "1s", NULL },
	{ "schedule", "--key", "1", "--in", "1s", "--count", "2", NULL },
	{ "schedule", "--key", "1", "--in", "1s", "--every", "0s", NULL },
	{ "schedule", "--key", "1", "--in", "1s", "--leeway", "soon", NULL },
	{ "schedule", "--key", "1", "--in", "1s", "--session", "bad name", NULL },
	{ "schedule", "--key", "1", "--in", "1s", "--session", "s", "--count", "1", NULL },
	{ "schedule", "--key", "1", "--in", "1s", "--no-such-option", NULL },
	{ "cancel", NULL },
	{ "cancel", "--key", "x", NULL },
	{ "watch", NULL },
	{ "watch", "--session", "s", "--timeout", "soon", NULL },
	{ "watch", "--session", "s", "--count", "0", NULL },
	{ "watch", "--session", "s", "--window", "0", NULL },
	{ "watch", "--session", "s", "--window", "4294967296", NULL },
	{ "watch", "--session", "s", "--ack-timeout", "30", NULL },
	{ "stats", "--bogus", NULL },
	{ "stats", "extra", NULL },
	{ "schedule", "--key", NULL },
	{ "schedule", "--key", "1", "--in", "1s", "--owner", "0", NULL },
	{ "cancel", "--key", "1", "--owner", "0", NULL },
	{ "--owner", "0", "stats", NULL },
	{ "stats", "--owner", "0", NULL },
	{ "watch", "--session", "s", "--owner", "4294967296", NULL },
	{ "watch", "--session", "s", "--owner", "no-such-user-here", NULL },
	{ "--owner", "", "watch", "--session", "s", NULL },
	{ "watch", "s", "t", NULL },
	{ "watch", "s", "--exec", "", NULL },
	{ "watch", "s", "--backoff-base", "1s", NULL },
	{ "watch", "s", "--exec", "true", "--backoff-base", "2s", "--backoff-cap", "1s", NULL },
	{ "watch", "s", "--exec", "true", "--backoff-base", "0s", NULL },
	{ "policy", NULL },
	{ "policy", "--dead-letter", "x", NULL },
	{ "policy", "s", "--max-deliveries", "0", NULL },
	{ "policy", "s", "--max-deliveries", "lots", NULL },
	{ "policy", "--session", "s", "t", NULL },
	{ "kick", NULL },
	{ "kick", "s", "--limit", "0", NULL },
	{ "kick", "s", "--key", "x", NULL },
};

/* Usage errors exit 2, even with a live daemon to talk to. */
START_TEST(test_usage_errors)
{
	struct du_daemon *d = du_daemon_new();
	const char *argv[20] = { DU_BWCTL_PATH, "--socket", d->sock };
	struct du_result r;
	char what[256] = "bwctl";
	size_t n = 3;
	du_env *e;

	du_daemon_start(d, NULL);
	for (size_t i = 0; usage_cases[_i][i] != NULL; i++) {
		argv[n++] = usage_cases[_i][i];
		strncat(what, " ", sizeof(what) - strlen(what) - 1);
		strncat(what, usage_cases[_i][i], sizeof(what) - strlen(what) - 1);
	}
	argv[n] = NULL;
	du_run(argv, clean_env, RUN_MS, &r);
	ASSERT_EXIT(&r, 2, what);
	ck_assert_msg(r.err[0] != '\0', "%s: no message", what);
	ck_assert_msg(r.out[0] == '\0', "%s: stdout [%s]", what, r.out);
	du_result_free(&r);
	/* The same with --json last: the error is JSON, whatever came first. */
	argv[n++] = "--json";
	argv[n] = NULL;
	du_run(argv, clean_env, RUN_MS, &r);
	jfree(json_error(&r, 2, "USAGE", what));
	ck_assert_msg(r.out[0] == '\0', "%s --json: stdout [%s]", what, r.out);
	du_result_free(&r);
	e = du_fresh_stats(d);
	ck_assert_uint_eq(e->stats_reply->oneshot->inserted, 0);
	ck_assert_uint_eq(e->stats_reply->sessions, 0);
	bwp_frame_free(e);
	du_daemon_free(d);
}
END_TEST

/*
 * Durations as the daemon reads them (units up to d), refused in its words:
 * too large for the parser, and what the daemon would answer BAD_DEADLINE
 * (now + --in past 2^64 - 1 ns, a period rounding to 0), before sending.
 */
START_TEST(test_durations)
{
	static const char *const bad[][5] = {
		{ "--in", "18446744073709551616ns", "is too large" },
		{ "--in", "18446744073709551615ns", "now + delay_ns overflows 64 bits" },
		{ "--in", "1s", "--every", "0.5ns", "period_ns must be > 0" },
		{ "--in", "1", "is not a duration" },
	};
	struct du_daemon *d = du_daemon_new();
	struct du_result r;
	uint64_t before;

	du_daemon_start(d, NULL);
	before = du_now_ns();
	bwctl(&r, d->sock, "schedule", "--session", "e2e-dur", "--key", "1", "--in", "2d", NULL);
	ASSERT_EXIT(&r, 0, "--in 2d");
	ck_assert_uint_ge(field_u64(r.out, "deadline"), before + 2 * 86400 * DU_S);
	du_result_free(&r);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *want = bad[i][bad[i][3] != NULL ? 4 : 2];

		bwctl(&r, d->sock, "schedule", "--session", "e2e-dur", "--key", "2", bad[i][0],
		      bad[i][1], bad[i][3] != NULL ? bad[i][2] : NULL, bad[i][3], NULL);
		ASSERT_EXIT(&r, 2, bad[i][1]);
		ck_assert_msg(strstr(r.err, want) != NULL, "%s: want \"%s\": %s", bad[i][1], want,
			      r.err);
		du_result_free(&r);
	}
	du_daemon_free(d);
}
END_TEST

/* No daemon: exit 3, and the message names the socket. */
START_TEST(test_unreachable)
{
	struct du_daemon *d = du_daemon_new();
	static const char *const cmds[][8] = {
		{ "schedule", "--key", "1", "--in", "1s", NULL },
		{ "schedule", "--key", "1", "--in", "1s", "--session", "s", NULL },
		{ "cancel", "--key", "1", "--session", "s", NULL },
		{ "watch", "--session", "s", "--timeout", "1s", NULL },
		{ "stats", NULL },
		{ "stats", "--json", NULL },
	};
	char env_sock[160];
	const char *env[] = { env_sock, NULL };

	snprintf(env_sock, sizeof(env_sock), "BITWHEEL_SOCKET=%s", d->sock);
	for (size_t c = 0; c < sizeof(cmds) / sizeof(cmds[0]); c++) {
		const char *argv[16] = { DU_BWCTL_PATH, "--socket", d->sock };
		const char *argv_env[16] = { DU_BWCTL_PATH };
		struct du_result r;
		size_t n = 3;

		for (size_t i = 0; cmds[c][i] != NULL; i++) {
			argv_env[n - 2] = cmds[c][i];
			argv[n++] = cmds[c][i];
		}
		argv[n] = NULL;
		argv_env[n - 2] = NULL;
		du_run(argv, clean_env, RUN_MS, &r);
		ASSERT_EXIT(&r, 3, cmds[c][0]);
		ck_assert_msg(strstr(r.err, d->sock) != NULL, "%s: message without the path: %s",
			      cmds[c][0], r.err);
		du_result_free(&r);

		/* --json: the same, one object on stderr. */
		argv[n] = "--json";
		argv[n + 1] = NULL;
		du_run(argv, clean_env, RUN_MS, &r);
		jfree(json_error(&r, 3, "UNREACHABLE", cmds[c][0]));
		ck_assert_msg(strstr(r.err, d->sock) != NULL, "--json without the path: %s", r.err);
		du_result_free(&r);
		argv[n] = NULL;

		/* The same through $BITWHEEL_SOCKET. */
		du_run(argv_env, env, RUN_MS, &r);
		ASSERT_EXIT(&r, 3, "via BITWHEEL_SOCKET");
		ck_assert_msg(strstr(r.err, d->sock) != NULL, "message without the path: %s",
			      r.err);
		du_result_free(&r);
	}
	du_daemon_free(d);
}
END_TEST

/* More timers than a page, due in the reverse order of their keys (the
 * daemon lists in its hash table's order): --limit shows the soonest. */
START_TEST(test_list_soonest)
{
	enum { N = 1200, SHOWN = 3 };
	struct du_daemon *d = du_daemon_new();
	struct du_buf b = { 0 };
	struct du_result r;
	struct du_conn *c;
	char line[1024], want[32];

	du_daemon_start(d, NULL);
	c = du_open_producer(d, "soon");
	for (uint64_t k = 1; k <= N; k++) {
		struct du_sched sc = { .key = k, .when = DU_DELAY,
				       .when_ns = (2 * N - k) * DU_S };

		du_pack_schedule(&b, k + 10, &sc);
	}
	du_send_buf(c, &b);
	du_buf_free(&b);
	for (uint64_t k = 1; k <= N; k++)
		bwp_frame_free(du_expect_reply(c, k + 10, BC(SCHEDULE_REPLY)));

	bwctl(&r, d->sock, "list", "--session", "soon", "--limit", "3", NULL);
	ASSERT_EXIT(&r, 0, "list --limit 3");
	ck_assert_int_eq(count_lines(r.out), 1 + SHOWN);
	for (int i = 0; i < SHOWN; i++) {
		snprintf(want, sizeof(want), "%d ", N - i);
		ck_assert(line_n(r.out, 1 + i, line, sizeof(line)));
		ck_assert_msg(strncmp(line, want, strlen(want)) == 0,
			      "row %d should be key %d, due soonest but %d: %s", i + 1, N - i, i,
			      line);
	}
	ck_assert_msg(strstr(r.err, "holds 1200 timers; these are the soonest 3") != NULL,
		      "stderr: %s", r.err);
	du_result_free(&r);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

/* Nothing at the packaged socket: the hint is the socket unit, not a
 * bitwheeld started by hand (where the service runs, there is nothing to
 * check). */
START_TEST(test_unreachable_service)
{
	const char *argv[] = { DU_BWCTL_PATH, "stats", NULL };
	struct du_result r;

	if (access(BWC_DEFAULT_SOCKET, F_OK) == 0) {
		printf("test_unreachable_service: skipped: %s exists here\n", BWC_DEFAULT_SOCKET);
		return;
	}
	du_run(argv, clean_env, RUN_MS, &r);
	ASSERT_EXIT(&r, 3, "stats at the packaged socket");
	ck_assert_msg(strstr(r.err, BWC_DEFAULT_SOCKET) != NULL &&
		      strstr(r.err, "'systemctl start bitwheeld.socket'") != NULL &&
		      strstr(r.err, "bitwheeld --socket") == NULL,
		      "the hint does not name the socket unit: %s", r.err);
	du_result_free(&r);
}
END_TEST

START_TEST(test_help)
{
	static const char *const cmds[] = { "schedule", "cancel", "watch", "stats", "policy",
					    "kick" };
	struct du_result r, s;
	char what[64];

	/* No daemon anywhere: help needs none. */
	bwctl(&r, "/nonexistent/bw.sock", "--help", NULL);
	ASSERT_EXIT(&r, 0, "bwctl --help");
	ck_assert(strncmp(r.out, "Usage: bwctl", 12) == 0);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		ck_assert_msg(strstr(r.out, cmds[i]) != NULL, "--help omits %s", cmds[i]);
	du_result_free(&r);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		snprintf(what, sizeof(what), "bwctl %s --help", cmds[i]);
		bwctl(&r, "/nonexistent/bw.sock", cmds[i], "--help", NULL);
		ASSERT_EXIT(&r, 0, what);
		ck_assert_msg(strncmp(r.out, "Usage: bwctl", 12) == 0 &&
			      strstr(r.out, cmds[i]) != NULL && strstr(r.out, "Exit status") != NULL,
			      "%s: %s", what, r.out);
		du_result_free(&r);
	}
	bwctl(&r, NULL, "--version", NULL);
	ASSERT_EXIT(&r, 0, "bwctl --version");
	ck_assert(r.out[0] != '\0');
	bwctl(&s, NULL, "-V", NULL);
	ASSERT_EXIT(&s, 0, "bwctl -V");
	ck_assert_str_eq(s.out, r.out);
	du_result_free(&s);
	du_result_free(&r);
}
END_TEST

/* ======================================================================
 * failures
 * ====================================================================== */

/* The lines of file as one string (free it), "" when there is none. */
static char *slurp(const char *file)
{
	FILE *f = fopen(file, "r");
	char *buf = calloc(1, 65536);
	size_t n = 0;

	ck_assert_ptr_nonnull(buf);
	if (f != NULL) {
		n = fread(buf, 1, 65535, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

/*
 * policy and kick, and watch --exec as the shell's worker: a policy shown
 * (none for a session that is not there, which looking does not create),
 * set and reset; a command failing for one key: the other acknowledged at
 * once, the failing one released with backoff until its second delivery
 * dead-letters it (max 2), each run with the fire in its environment and
 * the payload on stdin; sessions shows the policy and the counts; kick
 * brings it back with its deliveries from 1; a dead letter's watch line
 * carries its history.
 */
START_TEST(test_policy_kick_exec)
{
	struct du_daemon *d = du_daemon_new();
	char log[128], cmd[400], line[1024];
	struct du_result r;
	struct jval *v;
	char *got, me[24];
	bool one_a = false, one_b = false, two = false;

	du_daemon_start(d, NULL);
	snprintf(me, sizeof(me), "%u", (unsigned)geteuid());
	bwctl(&r, d->sock, "policy", "e2e-bwp", NULL);
	ASSERT_EXIT(&r, 1, "policy of no session");
	ck_assert_msg(strstr(r.err, "no session 'e2e-bwp'") != NULL, "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "sessions", "--json", NULL);
	ck_assert_msg(strstr(r.out, "e2e-bwp") == NULL, "looking created it: %s", r.out);
	du_result_free(&r);

	bwctl(&r, d->sock, "schedule", "--session", "e2e-bwp", "--key", "1", "--in", "1ms",
	      "--payload", "one", NULL);
	ASSERT_EXIT(&r, 0, "schedule 1");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-bwp", "--key", "2", "--in", "1ms",
	      "--payload", "two", NULL);
	ASSERT_EXIT(&r, 0, "schedule 2");
	du_result_free(&r);
	bwctl(&r, d->sock, "policy", "e2e-bwp", NULL);
	ASSERT_EXIT(&r, 0, "policy shown");
	ck_assert_str_eq(r.out, "policy session=e2e-bwp max_deliveries=20 "
			 "dead_letter=e2e-bwp.dead set=no (the defaults)\n");
	du_result_free(&r);
	bwctl(&r, d->sock, "policy", "--session", "e2e-bwp", "--max-deliveries", "unlimited",
	      "--dead-letter", "e2e-bwp-dl", NULL);
	ASSERT_EXIT(&r, 0, "policy unlimited");
	ck_assert_str_eq(r.out, "policy session=e2e-bwp max_deliveries=unlimited "
			 "dead_letter=e2e-bwp-dl set=yes\n");
	du_result_free(&r);
	bwctl(&r, d->sock, "policy", "e2e-bwp", "--max-deliveries", "2", "--dead-letter", "",
	      "--json", NULL);
	ASSERT_EXIT(&r, 0, "policy 2");
	v = jparse_line(r.out);
	ck_assert(jstr_is(v, "session", "e2e-bwp") && jstr_is(v, "dead_letter", "e2e-bwp.dead"));
	ck_assert_uint_eq(ju64(v, "max_deliveries"), 2);
	ck_assert(jget(v, "policy_set")->t == J_BOOL && jget(v, "policy_set")->b);
	jfree(v);
	du_result_free(&r);

	/* The worker: key 1's command fails, key 2's succeeds; each run
	 * logs what it was given. */
	snprintf(log, sizeof(log), "%s/exec.log", d->dir);
	snprintf(cmd, sizeof(cmd),
		 "echo \"$BW_SESSION $BW_KEY $BW_DELIVERIES $(cat) $BW_REDELIVERED\" >>%s; "
		 "test \"$BW_KEY\" != 1", log);
	bwctl(&r, d->sock, "watch", "e2e-bwp", "--exec", cmd, "--count", "3",
	      "--backoff-base", "1ms", "--backoff-cap", "2ms", NULL);
	ASSERT_EXIT(&r, 0, "watch --exec");
	ck_assert_msg(r.out[0] == '\0', "stdout: %s", r.out);
	ck_assert_msg(strstr(r.err, "key 1: the command exited with status 1 (delivery 1): "
			     "released, back in") != NULL &&
		      strstr(r.err, "key 1: the command exited with status 1 on delivery 2, "
			     "the session's last: the fire went to its dead-letter session") != NULL &&
		      strstr(r.err, "key 2") == NULL, "stderr: %s", r.err);
	du_result_free(&r);
	got = slurp(log);
	ck_assert_int_eq(count_lines(got), 3);
	for (int i = 0; line_n(got, i, line, sizeof(line)); i++) {
		one_a |= strcmp(line, "e2e-bwp 1 1 one 0") == 0;
		/* A release does not mark it redelivered: it was given
		 * back knowingly, and deliveries counts it. */
		one_b |= strcmp(line, "e2e-bwp 1 2 one 0") == 0;
		two |= strcmp(line, "e2e-bwp 2 1 two 0") == 0;
	}
	ck_assert_msg(one_a && one_b && two, "the commands saw: %s", got);
	free(got);

	bwctl(&r, d->sock, "sessions", "--json", NULL);
	ASSERT_EXIT(&r, 0, "sessions");
	v = json_session(r.out, me, "e2e-bwp");
	ck_assert_ptr_nonnull(v);
	ck_assert_uint_eq(ju64(v, "dead_lettered"), 1);
	ck_assert_uint_eq(ju64(v, "max_deliveries"), 2);
	jfree(v);
	v = json_session(r.out, me, "e2e-bwp.dead");
	ck_assert_msg(v != NULL, "no dead-letter session: %s", r.out);
	ck_assert_uint_eq(ju64(v, "dead_letters"), 1);
	jfree(v);
	du_result_free(&r);
	bwctl(&r, d->sock, "sessions", NULL);
	ck_assert_msg(strstr(r.out, "MAX_DELIV DEAD_LETTER_TO\n") != NULL &&
		      strstr(r.out, " 2 e2e-bwp.dead\n") != NULL, "stdout: %s", r.out);
	du_result_free(&r);

	/* Kick: none of key 9; then key 1 comes back from its first
	 * delivery. */
	bwctl(&r, d->sock, "kick", "e2e-bwp", "--key", "9", NULL);
	ASSERT_EXIT(&r, 0, "kick key 9");
	ck_assert_str_eq(r.out, "kicked 0\n");
	du_result_free(&r);
	bwctl(&r, d->sock, "kick", "--session", "e2e-bwp", "--json", NULL);
	ASSERT_EXIT(&r, 0, "kick");
	v = jparse_line(r.out);
	ck_assert_uint_eq(ju64(v, "kicked"), 1);
	jfree(v);
	du_result_free(&r);
	bwctl(&r, d->sock, "watch", "e2e-bwp", "--count", "1", "--timeout", "5s", NULL);
	ASSERT_EXIT(&r, 0, "watch after kick");
	ck_assert_msg(strncmp(r.out, "fired key=1 payload=\"one\" ", 26) == 0 &&
		      field_u64(r.out, "deliveries") == 1 &&
		      strstr(r.out, "dead_letter_of") == NULL, "stdout: %s", r.out);
	du_result_free(&r);

	/* A dead letter's line: max 1, key 3 fails once. */
	bwctl(&r, d->sock, "policy", "e2e-bwp", "--max-deliveries", "1", NULL);
	ASSERT_EXIT(&r, 0, "policy 1");
	du_result_free(&r);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-bwp", "--key", "3", "--in", "1ms",
	      NULL);
	ASSERT_EXIT(&r, 0, "schedule 3");
	du_result_free(&r);
	bwctl(&r, d->sock, "watch", "e2e-bwp", "--exec", "exit 7", "--count", "1", NULL);
	ASSERT_EXIT(&r, 0, "watch --exec exit 7");
	ck_assert_msg(strstr(r.err, "key 3: the command exited with status 7 on delivery 1") !=
		      NULL, "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "watch", "e2e-bwp.dead", "--count", "1", "--timeout", "5s", NULL);
	ASSERT_EXIT(&r, 0, "watch the dead letters");
	ck_assert_msg(strncmp(r.out, "fired key=3 ", 12) == 0 &&
		      strstr(r.out, " dead_letter_of=e2e-bwp dead_deliveries=1 ") != NULL &&
		      strstr(r.out, " reason=RELEASED\n") != NULL, "stdout: %s", r.out);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/*
 * watch --exec with an ack timeout: a command that runs three ack
 * timeouts keeps its fire (touched every half one), is acknowledged, and
 * is never redelivered; its stdout is bwctl's.
 */
START_TEST(test_exec_touch)
{
	struct du_daemon *d = du_daemon_new();
	char timeout[32], cmd[64];
	struct du_result r;
	struct jval *v;
	int ms = du_scale_ms(400);

	du_daemon_start(d, NULL);
	bwctl(&r, d->sock, "schedule", "--session", "e2e-slow", "--key", "5", "--in", "1ms",
	      NULL);
	ASSERT_EXIT(&r, 0, "schedule");
	du_result_free(&r);
	snprintf(timeout, sizeof(timeout), "%dms", ms);
	snprintf(cmd, sizeof(cmd), "sleep %d.%03d; echo done-$BW_KEY", 3 * ms / 1000,
		 3 * ms % 1000);
	bwctl(&r, d->sock, "watch", "e2e-slow", "--exec", cmd, "--ack-timeout", timeout,
	      "--count", "1", NULL);
	ASSERT_EXIT(&r, 0, "watch --exec --ack-timeout");
	ck_assert_str_eq(r.out, "done-5\n");
	ck_assert_msg(r.err[0] == '\0', "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "stats", "--json", NULL);
	v = jparse_line(r.out);
	ck_assert_uint_eq(ju64(v, "redelivered"), 0);
	ck_assert_uint_eq(ju64(v, "acked"), 1);
	jfree(v);
	du_result_free(&r);
	du_daemon_free(d);
}
END_TEST

/* ---------------------------------------------------------------------- */

/* ======================================================================
 * calendar
 * ====================================================================== */

/* Calendar events as systemd.time(7) shows them, the forms issue 24
 * names, zones with daylight saving and odd offsets, "~" from the month's
 * end, seconds fractions, and specs systemd refuses ("*-02-~1" among
 * them). */
static const char *const cal_specs[] = {
	"Sat,Thu,Mon..Wed,Sat..Sun", "Mon,Sun 12-*-* 2,1:23", "Wed *-1",
	"Wed..Sat,Tue 12-10-15 1:2:3", "monday *-12-* 17:00",
	"Mon,Fri *-*-3,1,2 *:30:45", "12,14,13,12:20,10,30", "12..14:10,20,30",
	"mon,fri *-1/2-1,3 *:30:45", "03-05 08:05:40", "Sat,Sun 12-05 08:05:40",
	"05:40:23.4200004/3.1700005", "2003-02..04-05", "hourly", "daily",
	"monthly", "weekly Pacific/Auckland", "quarterly", "semiannually",
	"yearly", "minutely", "*:2/3", "*:0/15", "*:*:0/7.5",
	"Mon..Fri *-*-* 09:00:00 Europe/Berlin", "Mon..Fri 09:00",
	"*-*-* 02:30 Europe/Berlin", "*:0/20 Europe/Berlin",
	"*-*-* 01:30 America/New_York", "daily Asia/Kathmandu",
	"Sat,Sun 10:00 Australia/Lord_Howe", "*-*-01 00:00:00 UTC",
	"*-02~01", "*-02~01 12:00 Europe/London", "Mon *-05~07/1",
	"*-02-29 12:00 UTC", "*-02-30", "2026-12-24 18:00 Europe/Berlin",
	"*-02-~1", "foo", "25:00", "*-*-* 00:00:00 Mars/Olympus", "Fri..Mon",
};

/* The elapses asked per spec, and the base times: daylight-saving
 * changes in Europe/Berlin and America/New_York, a leap day, and a plain
 * winter's day one half-second into a second. */
#define CAL_ITER 20
static const char *const cal_bases[] = {
	"@1774744800", "@1793156400", "@1803871200", "@1796187600.5",
};

/* An array member's i-th element as an unsigned integer. */
static uint64_t jarr_u64(struct jval *arr, size_t i)
{
	struct jval *m = arr->mem[i].v;

	ck_assert_msg(m->t == J_NUM && strspn(m->num, "0123456789") == strlen(m->num),
		      "element %zu is not an unsigned integer", i);
	return strtoull(m->num, NULL, 10);
}

/*
 * bwctl calendar --json for each spec from each base equals what
 * systemd-analyze calendar --iterations=20 --base-time=... prints, run
 * now: the normalized form and every elapse (to the second: it prints no
 * fractions), "never" as no elapse, a refusal as BAD_CALENDAR with exit
 * 4.  The daemon's local zone and systemd-analyze's are UTC.
 */
START_TEST(test_calendar_systemd)
{
	enum { N = sizeof(cal_specs) / sizeof(cal_specs[0]) };
	static struct sdc_result res[N];
	struct du_daemon *d;
	unsigned compared = 0, elapses = 0, refused = 0;

	if (!sdc_available()) {
		printf("check_bwctl: SKIP calendar against systemd: no %s\n", SDC_ANALYZE);
		return;
	}
	setenv("TZ", "UTC", 1);
	d = du_daemon_new();
	du_daemon_start(d, NULL);
	for (size_t b = 0; b < sizeof(cal_bases) / sizeof(cal_bases[0]); b++) {
		const char *base = cal_bases[b];
		uint64_t base_us = strtoull(base + 1, NULL, 10) * 1000000 +
			(strchr(base, '.') ? 500000 : 0);
		char iters[16];

		snprintf(iters, sizeof(iters), "%d", CAL_ITER);
		sdc_run(cal_specs, N, CAL_ITER, base_us, "UTC", res);
		for (size_t i = 0; i < N; i++) {
			const struct sdc_result *sd = &res[i];
			struct du_result r;
			struct jval *v, *arr;
			char what[256];

			snprintf(what, sizeof(what), "calendar '%s' from %s", cal_specs[i], base);
			bwctl(&r, d->sock, "calendar", "--json", "--iterations", iters,
			      "--base-time", base, cal_specs[i], NULL);
			if (sd->refused) {
				v = json_error(&r, 4, "BAD_CALENDAR", what);
				ck_assert_uint_eq(ju64(v, "error.server_code"), 22);
				jfree(v);
				du_result_free(&r);
				refused++;
				continue;
			}
			ck_assert_msg(!sd->gave_up, "%s: systemd gave up: pick another spec", what);
			ASSERT_EXIT(&r, 0, what);
			v = jparse_line(r.out);
			ck_assert_msg(jstr_is(v, "spec", cal_specs[i]) &&
				      jstr_is(v, "normalized", sd->normalized),
				      "%s: systemd's normalized form is '%s': %s", what,
				      sd->normalized, r.out);
			ck_assert_uint_eq(ju64(v, "base_realtime_ns"), base_us * 1000);
			arr = jget(v, "elapses_realtime_ns");
			ck_assert_msg(arr != NULL && arr->t == J_ARR, "%s: %s", what, r.out);
			ck_assert_msg((int)arr->nmem == sd->n, "%s: %zu elapses, systemd %d: %s",
				      what, arr->nmem, sd->n, r.out);
			ck_assert(sd->n > 0 || sd->never);
			for (size_t k = 0; k < arr->nmem; k++) {
				uint64_t t = jarr_u64(arr, k);

				ck_assert_msg((int64_t)(t / DU_S) == sd->at[k],
					      "%s #%zu: %" PRIu64 " ns, systemd %" PRId64 " s",
					      what, k + 1, t, sd->at[k]);
				ck_assert(k == 0 || t > jarr_u64(arr, k - 1));
				elapses++;
			}
			jfree(v);
			du_result_free(&r);
			compared++;
		}
	}
	printf("check_bwctl: bwctl calendar agrees with systemd-analyze calendar on "
	       "%u spec and base pairs (%u elapses) and %u refusals\n", compared,
	       elapses, refused);
	du_daemon_free(d);
}
END_TEST

/* The human output is systemd-analyze calendar's, line for line, but for
 * "From now" (read a moment apart: its last word, "left" or "ago", alone
 * is compared): in a zone with daylight saving
 * (each time then "(in UTC)" too) and in UTC, "never" included. */
START_TEST(test_calendar_text)
{
	static const char *const zones[] = { "Europe/Berlin", "UTC" };
	static const char *const specs[] = { "Mon..Fri 09:00 Europe/Berlin",
					     "*-*-* 02:30", "*-02-30", "*:0/20 UTC" };

	if (!sdc_available()) {
		printf("check_bwctl: SKIP calendar's text against systemd: no %s\n",
		       SDC_ANALYZE);
		return;
	}
	for (size_t z = 0; z < 2; z++) {
		struct du_daemon *d;
		const char *sa[16] = { "/usr/bin/env", NULL, "LC_ALL=C", "SYSTEMD_COLORS=0",
				       SDC_ANALYZE, "calendar", "--iterations=3",
				       "--base-time=@1774744800", "--" };
		const char *bw[16] = { "/usr/bin/env", NULL, DU_BWCTL_PATH, "--socket", NULL,
				       "calendar", "--iterations", "3", "--base-time",
				       "@1774744800" };
		struct du_result ra, rb;
		char tz[32], la[256], lb[256];
		int i, utc_lines = 0;

		/* The daemon's local zone is bwctl's and systemd-analyze's. */
		setenv("TZ", zones[z], 1);
		d = du_daemon_new();
		du_daemon_start(d, NULL);
		snprintf(tz, sizeof(tz), "TZ=%s", zones[z]);
		sa[1] = bw[1] = tz;
		bw[4] = d->sock;
		for (i = 0; i < 4; i++)
			sa[9 + i] = bw[10 + i] = specs[i];
		du_run(sa, clean_env, RUN_MS, &ra);
		du_run(bw, clean_env, RUN_MS, &rb);
		ASSERT_EXIT(&ra, 0, "systemd-analyze calendar");
		ASSERT_EXIT(&rb, 0, "bwctl calendar");
		ck_assert_int_eq(count_lines(ra.out), count_lines(rb.out));
		for (i = 0; line_n(ra.out, i, la, sizeof(la)); i++) {
			ck_assert(line_n(rb.out, i, lb, sizeof(lb)));
			if (strstr(la, "From now: ") != NULL) {
				ck_assert_msg(strstr(lb, "       From now: ") == lb &&
					      strcmp(strrchr(la, ' '), strrchr(lb, ' ')) == 0,
					      "%s: systemd '%s', bwctl '%s'", tz, la, lb);
				continue;
			}
			ck_assert_msg(strcmp(la, lb) == 0, "%s line %d: systemd '%s', bwctl '%s'",
				      tz, i, la, lb);
			utc_lines += strstr(la, "(in UTC): ") != NULL;
		}
		/* 3 specs with 3 elapses each: "(in UTC)" in Berlin only */
		ck_assert_int_eq(utc_lines, z == 0 ? 9 : 0);
		du_result_free(&ra);
		du_result_free(&rb);
		du_daemon_free(d);
	}
}
END_TEST

static du_env *raw_calendar(struct du_conn *c, uint64_t id, const char *spec,
			    uint32_t iterations)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Calendar q = BITWHEEL__V1__CALENDAR__INIT;
	du_env *r = NULL;

	q.spec = (char *)spec;
	q.has_iterations = iterations != 0;
	q.iterations = iterations;
	env.has_request_id = 1;
	env.request_id = id;
	env.body_case = BC(CALENDAR);
	env.calendar = &q;
	du_send_env(c, &env);
	ck_assert_int_eq(du_recv(c, RUN_MS, &r), DU_FRAME);
	ck_assert_uint_eq(r->request_id, id);
	return r;
}

/* The error r is, with code and words in its message. */
static void assert_error(du_env *r, int code, const char *words)
{
	ck_assert_int_eq(r->body_case, BC(ERROR));
	ck_assert_msg(r->error->code == (Bitwheel__V1__ErrorCode)code &&
		      strstr(r->error->message, words) != NULL,
		      "want %s with '%s': %s %s", du_error_name(code), words,
		      du_error_name(r->error->code), r->error->message);
	bwp_frame_free(r);
}

/*
 * The limits and refusals: --iterations past 1000 is bwctl's usage error
 * (exit 2), and the daemon's BAD_REQUEST; so are more elapses than a
 * reply of the daemon's --max-frame holds (the message says how many
 * would), while as many as fit are answered; a refused spec is
 * BAD_CALENDAR, exit 4, in the daemon's words; none of these close the
 * connection, on which anonymous and named producers alike may ask.
 * Without --base-time the elapses follow the daemon's now; a spec with
 * fewer elapses than asked ends early; a 4095-byte spec is read (past
 * the frame bound of other small requests), a longer one refused.
 */
START_TEST(test_calendar_limits)
{
	struct du_daemon *d = du_daemon_new();
	char spec[4200] = "*-*-* 00:00:00";
	struct du_result r;
	struct du_conn *c;
	struct jval *v, *arr;
	uint64_t before, after;
	du_env *e;

	setenv("TZ", "UTC", 1);
	du_daemon_start(d, "--max-frame", "2048", NULL);
	bwctl(&r, d->sock, "calendar", "--iterations", "1001", "daily", NULL);
	ASSERT_EXIT(&r, 2, "--iterations 1001");
	ck_assert_msg(strstr(r.err, "1 to 1000") != NULL, "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "calendar", "--iterations", "1000", "daily", NULL);
	ASSERT_EXIT(&r, 4, "1000 elapses past a 2048-byte frame");
	ck_assert_msg(strstr(r.err, "BAD_REQUEST") != NULL &&
		      strstr(r.err, "max frame of 2048") != NULL, "stderr: %s", r.err);
	du_result_free(&r);
	bwctl(&r, d->sock, "calendar", "--iterations", "10", "--base-time", "bogus", "daily",
	      NULL);
	ASSERT_EXIT(&r, 2, "--base-time bogus");
	du_result_free(&r);
	bwctl(&r, d->sock, "calendar", NULL);
	ASSERT_EXIT(&r, 2, "no spec");
	du_result_free(&r);
	bwctl(&r, d->sock, "calendar", "Mon..Fri 25:00", NULL);
	ASSERT_EXIT(&r, 4, "a refused spec");
	ck_assert_msg(strstr(r.err, "BAD_CALENDAR") != NULL &&
		      strstr(r.err, "hour out of range") != NULL, "stderr: %s", r.err);
	du_result_free(&r);

	before = du_realtime_ns();
	bwctl(&r, d->sock, "calendar", "--json", "--iterations", "3", "minutely",
	      "*-02-29 12:00 UTC", NULL);
	after = du_realtime_ns();
	ASSERT_EXIT(&r, 0, "calendar minutely, from now");
	ck_assert_int_eq(count_lines(r.out), 2);
	v = jparse_line(strtok(r.out, "\n"));
	arr = jget(v, "elapses_realtime_ns");
	ck_assert_uint_eq(arr->nmem, 3);
	ck_assert(ju64(v, "base_realtime_ns") >= before && ju64(v, "base_realtime_ns") <= after);
	ck_assert(jarr_u64(arr, 0) > ju64(v, "base_realtime_ns"));
	ck_assert(jarr_u64(arr, 0) <= ju64(v, "base_realtime_ns") + 60 * DU_S);
	ck_assert_uint_eq(jarr_u64(arr, 0) % (60 * DU_S), 0);
	ck_assert(jstr_is(v, "zone", ""));
	jfree(v);
	v = jparse_line(strtok(NULL, "\n"));
	ck_assert(jstr_is(v, "zone", "UTC"));
	ck_assert_uint_eq(jget(v, "elapses_realtime_ns")->nmem, 3);
	jfree(v);
	du_result_free(&r);

	/* The protocol: an anonymous connection, then a named producer. */
	c = du_open(d, NULL);
	assert_error(raw_calendar(c, 1, "daily", 1001), EC(BAD_REQUEST), "over the limit of 1000");
	assert_error(raw_calendar(c, 2, "daily", 1000), EC(BAD_REQUEST), "elapses of this spec fit");
	assert_error(raw_calendar(c, 3, "*:61", 1), EC(BAD_CALENDAR), "minute");
	e = raw_calendar(c, 4, "daily", 0);
	ck_assert_int_eq(e->body_case, BC(CALENDAR_REPLY));
	ck_assert_uint_eq(e->calendar_reply->n_elapses_realtime_ns, 1);
	ck_assert_str_eq(e->calendar_reply->normalized, "*-*-* 00:00:00");
	ck_assert_ptr_null(e->calendar_reply->zone);
	bwp_frame_free(e);
	/* "2026-12-24" has one elapse after now at most. */
	e = raw_calendar(c, 5, "2026-12-24 18:00 Europe/Berlin", 5);
	ck_assert_int_eq(e->body_case, BC(CALENDAR_REPLY));
	ck_assert_uint_le(e->calendar_reply->n_elapses_realtime_ns, 1);
	ck_assert_str_eq(e->calendar_reply->zone, "Europe/Berlin");
	ck_assert(!e->calendar_reply->gave_up);
	bwp_frame_free(e);
	/* A 4095-byte spec is read and answered (refused here: 1300
	 * components in its seconds field: the message leaves the spec out
	 * to say so), 4096 bytes are over the limit,
	 * and neither closes the connection (as any other request of their
	 * size would under the default payload limit). */
	while (strlen(spec) < 4095 - 3)
		strcat(spec, ",00");
	memset(spec + strlen(spec), '0', 4095 - strlen(spec));
	spec[4095] = '\0';
	du_conn_free(c);
	du_daemon_free(d);
	d = du_daemon_new();
	du_daemon_start(d, NULL);
	c = du_open_producer(d, "e2e-cal");
	assert_error(raw_calendar(c, 6, spec, 200), EC(BAD_CALENDAR),
		     "calendar spec: more than 241 components");
	strcat(spec, "0");
	assert_error(raw_calendar(c, 7, spec, 1), EC(BAD_CALENDAR), "longer than 4095 bytes");
	e = raw_calendar(c, 8, "hourly", 200);
	ck_assert_int_eq(e->body_case, BC(CALENDAR_REPLY));
	ck_assert_uint_eq(e->calendar_reply->n_elapses_realtime_ns, 200);
	bwp_frame_free(e);
	du_conn_free(c);
	du_daemon_free(d);
}
END_TEST

static Suite *bwctl_suite(void)
{
	Suite *s = suite_create("bwctl");
	TCase *tc;

	tc = tcase_create("schedule");
	du_tcase(tc);
	tcase_add_test(tc, test_schedule_session);
	tcase_add_test(tc, test_schedule_wait);
	tcase_add_test(tc, test_schedule_at);
	tcase_add_test(tc, test_schedule_calendar);
	tcase_add_test(tc, test_schedule_clock);
	tcase_add_test(tc, test_schedule_every);
	tcase_add_test(tc, test_schedule_leeway);
	tcase_add_test(tc, test_schedule_daemon_stops);
	suite_add_tcase(s, tc);

	tc = tcase_create("cancel");
	du_tcase(tc);
	tcase_add_test(tc, test_cancel);
	suite_add_tcase(s, tc);

	tc = tcase_create("json");
	du_tcase(tc);
	tcase_add_test(tc, test_json);
	suite_add_tcase(s, tc);

	tc = tcase_create("owner");
	du_tcase(tc);
	tcase_add_test(tc, test_owner);
	suite_add_tcase(s, tc);

	tc = tcase_create("introspection");
	du_tcase(tc);
	tcase_add_test(tc, test_sessions_list);
	tcase_add_test(tc, test_list_soonest);
	suite_add_tcase(s, tc);

	tc = tcase_create("watch");
	du_tcase(tc);
	tcase_add_test(tc, test_watch_json);
	tcase_add_test(tc, test_watch_live);
	tcase_add_test(tc, test_watch_coalesce);
	tcase_add_test(tc, test_watch_timeout);
	tcase_add_test(tc, test_watch_shared);
	tcase_add_test(tc, test_producers_take_no_fire);
	suite_add_tcase(s, tc);

	tc = tcase_create("reconnect");
	du_tcase(tc);
	tcase_add_test(tc, test_watch_reconnect);
	tcase_add_test(tc, test_watch_no_reconnect);
	tcase_add_test(tc, test_watch_reconnect_timeout);
	suite_add_tcase(s, tc);

	tc = tcase_create("shared");
	du_tcase(tc);
	tcase_add_test(tc, test_sequential_then_watch);
	tcase_add_test(tc, test_concurrent_producers);
	tcase_add_test(tc, test_two_watches);
	tcase_add_test(tc, test_watch_killed);
	suite_add_tcase(s, tc);

	tc = tcase_create("stats");
	du_tcase(tc);
	tcase_add_test(tc, test_stats);
	suite_add_tcase(s, tc);

	tc = tcase_create("metrics");
	du_tcase(tc);
	tcase_add_test(tc, test_metrics);
	tcase_add_test(tc, test_metrics_loaded);
	tcase_add_test(tc, test_metrics_output_dir);
	tcase_add_test(tc, test_metrics_restored);
	suite_add_tcase(s, tc);

	tc = tcase_create("failures");
	du_tcase(tc);
	tcase_add_test(tc, test_policy_kick_exec);
	tcase_add_test(tc, test_exec_touch);
	suite_add_tcase(s, tc);

	tc = tcase_create("peer");
	du_tcase(tc);
	tcase_add_test(tc, test_peer);
	suite_add_tcase(s, tc);

	tc = tcase_create("calendar");
	du_tcase(tc);
	/* test_calendar_systemd starts some 350 processes (bwctl and
	 * systemd-analyze): on a loaded machine that alone took 65 s. */
	tcase_set_timeout(tc, 3.0 * DU_TCASE_TIMEOUT_S * du_slow());
	tcase_add_test(tc, test_calendar_systemd);
	tcase_add_test(tc, test_calendar_text);
	tcase_add_test(tc, test_calendar_limits);
	suite_add_tcase(s, tc);

	tc = tcase_create("usage");
	du_tcase(tc);
	tcase_add_loop_test(tc, test_usage_errors, 0,
			    (int)(sizeof(usage_cases) / sizeof(usage_cases[0])));
	tcase_add_test(tc, test_unreachable);
	tcase_add_test(tc, test_unreachable_service);
	tcase_add_test(tc, test_durations);
	tcase_add_test(tc, test_help);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(bwctl_suite());
}
