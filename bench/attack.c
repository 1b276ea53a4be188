/*
 * attack.c - the victim and the attacks of attack.h.
 *
 * The victim and most attacks speak through libbitwheel-client; what no
 * well-behaved client can say (connections that never say Hello or never
 * read, frames padded with unknown fields or over the frame limit, a
 * refusal read off a raw socket) goes through raw sockets, every frame
 * packed by proto/frame.h but the deliberately padded ones.
 *
 * The delivery attacks' consumers are raw sockets too: a Hello with any
 * option (an ack timeout of 1 ns), many of them opened or closed at once,
 * every frame read and parsed (fires counted) and nothing acknowledged.
 *
 * Each child reports in one struct through a pipe and exits; a child that
 * fails to report is killed at the caller's deadline.  An attacker's
 * build-up stops at the first refusal of each kind it pushes against (or
 * at opts' caps), then it says ready by writing one byte, and its active
 * phase runs until the stop pipe's other end is closed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attack.h"
#include "bitwheel-client.h"
#include "frame.h"

#define EC(x) BITWHEEL__V1__ERROR_CODE__##x
#define MS UINT64_C(1000000)
#define S UINT64_C(1000000000)
#define HOUR (3600 * S)
/* What the victim's payload says, so that a fire of anyone else's shows. */
#define VICTIM_PAYLOAD "victim"
/* Schedules in flight per connection while filling. */
#define FILL_WINDOW 256

static const char *const names[ATK_N] = {
	"none", "memory", "cpu", "stats", "frames", "expire", "silent", "squat", "logs",
	"pipeline", "list", "redeliver", "churn", "reattach", "coalesce", "crashloop",
	"poison", "burst", "output", "share", "singleack",
};

const char *atk_name(enum atk_kind k)
{
	return (unsigned)k < ATK_N ? names[k] : NULL;
}

int atk_expected_refusal(enum atk_kind k)
{
	switch (k) {
	case ATK_MEMORY: return EC(TOO_MANY_TIMERS);
	case ATK_CPU: return EC(OVER_BUDGET);
	case ATK_STATS: return EC(TOO_MANY_CLIENTS);
	case ATK_FRAMES: return EC(BAD_FRAME);
	case ATK_EXPIRE: return EC(TOO_MANY_TIMERS);
	case ATK_SILENT: return EC(TOO_MANY_CLIENTS);
	case ATK_SQUAT: return EC(PERMISSION_DENIED);
	case ATK_LOGS: return EC(BAD_VERSION);
	case ATK_PIPELINE: return EC(TOO_MANY_CLIENTS);
	case ATK_LIST: return EC(TOO_MANY_TIMERS);
	case ATK_REDELIVER: return EC(TOO_MANY_TIMERS);
	case ATK_CHURN: return EC(TOO_MANY_TIMERS);
	case ATK_REATTACH: return EC(TOO_MANY_TIMERS);
	case ATK_COALESCE: return EC(TOO_MANY_TIMERS);
	case ATK_BURST: return EC(TOO_MANY_TIMERS);
	case ATK_OUTPUT: return EC(TOO_MANY_TIMERS);
	case ATK_SHARE: return EC(NO_MEMORY);
	case ATK_SINGLEACK: return EC(TOO_MANY_TIMERS);
	default: return 0;
	}
}

static void fmt_error(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Keep the first failure only. */
static void fmt_error(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (buf[0])
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* ---- children --------------------------------------------------------- */

static void become(uid_t uid)
{
	if (uid == 0)
		return;
	if (setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid(uid) != 0 ||
	    getuid() != uid || setuid(0) == 0) {
		fprintf(stderr, "attack: cannot drop to uid %ld: %s\n", (long)uid,
			strerror(errno));
		_exit(99);
	}
}

int atk_set_rt(int prio)
{
	struct sched_param sp = { .sched_priority = prio };

	return sched_setscheduler(0, SCHED_FIFO, &sp) == 0 ? 0 : -errno;
}

static int fork_child(uid_t uid, int nice, int rt, struct atk_child *ch)
{
	int rep[2], stop[2];

	if (pipe2(rep, O_CLOEXEC) != 0)
		return -errno;
	if (pipe2(stop, O_CLOEXEC) != 0) {
		int err = -errno;

		close(rep[0]);
		close(rep[1]);
		return err;
	}
	fflush(NULL);
	ch->pid = fork();
	if (ch->pid < 0) {
		int err = -errno;

		close(rep[0]);
		close(rep[1]);
		close(stop[0]);
		close(stop[1]);
		return err;
	}
	if (ch->pid == 0) {
		close(rep[0]);
		close(stop[1]);
		/* A peer that went away must not kill us mid-report. */
		signal(SIGPIPE, SIG_IGN);
		if (nice)
			setpriority(PRIO_PROCESS, 0, nice);
		if (rt > 0 && atk_set_rt(rt) != 0) {
			fprintf(stderr, "attack: SCHED_FIFO %d: %s\n", rt, strerror(errno));
			_exit(99);
		}
		become(uid);
		ch->report_fd = rep[1];
		ch->stop_fd = stop[0];
		return 0;
	}
	close(rep[1]);
	close(stop[0]);
	ch->report_fd = rep[0];
	ch->stop_fd = stop[1];
	return 0;
}

static void report(const struct atk_child *ch, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(ch->report_fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(98);
		p += n;
		len -= (size_t)n;
	}
	_exit(0);
}

/* Read len bytes by the deadline; then reap.  0 or -1 with err set. */
static int collect(struct atk_child *ch, int timeout_ms, void *buf, size_t len,
		   char *err, size_t errlen)
{
	uint64_t deadline = load_now_ns() + (uint64_t)timeout_ms * MS;
	size_t got = 0;
	int st, rc = 0;

	while (got < len) {
		uint64_t now = load_now_ns();
		struct pollfd p = { .fd = ch->report_fd, .events = POLLIN };
		ssize_t n;

		if (now >= deadline) {
			fmt_error(err, errlen, "no report from child %ld within %d ms",
				  (long)ch->pid, timeout_ms);
			rc = -1;
			break;
		}
		if (poll(&p, 1, (int)((deadline - now) / MS) + 1) <= 0)
			continue;
		n = read(ch->report_fd, (char *)buf + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = -1;
			break;
		}
		got += (size_t)n;
	}
	if (rc)
		kill(ch->pid, SIGKILL);
	while (waitpid(ch->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (rc && got < len)
		fmt_error(err, errlen, "child %ld ended without a report (%s %d)",
			  (long)ch->pid, WIFSIGNALED(st) ? "signal" : "exit",
			  WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	close(ch->report_fd);
	if (ch->stop_fd >= 0)
		close(ch->stop_fd);
	ch->report_fd = ch->stop_fd = -1;
	ch->pid = 0;
	return rc;
}

/* ---- the victim -------------------------------------------------------- */

struct victim {
	const struct atk_victim_opts *o;
	struct atk_victim_result *r;
	uint64_t start, n;
	uint64_t *sent;          /* per key: when its Schedule was sent     */
	uint8_t *state;          /* per key: 1 accepted, 2 fired            */
	uint64_t outstanding;    /* Schedules without a reply               */
};

/* Key k's delay: delay_ns, or one from delay_ns to delay_max_ns by a
 * fixed hash of k (splitmix64's finaliser), so that the deadlines of keys
 * scheduled in order interleave as a real program's would. */
static uint64_t victim_delay(const struct atk_victim_opts *o, uint64_t k)
{
	uint64_t x = k + UINT64_C(0x9e3779b97f4a7c15);

	if (o->delay_max_ns <= o->delay_ns)
		return o->delay_ns;
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return o->delay_ns + x % (o->delay_max_ns - o->delay_ns + 1);
}

static uint64_t victim_deadline(const struct victim *v, uint64_t k)
{
	uint64_t d = v->start + k * v->o->interval_ns + victim_delay(v->o, k);
	uint64_t g = v->o->align_ns;

	return g ? (d + g - 1) / g * g : d;
}

static void victim_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct victim *v = arg;
	uint64_t rx = bwc_now_ns();
	struct atk_victim_result *r = v->r;

	(void)c;
	if (f->key >= v->n || f->payload_len != strlen(VICTIM_PAYLOAD) ||
	    memcmp(f->payload, VICTIM_PAYLOAD, f->payload_len) != 0 ||
	    f->deadline_ns != victim_deadline(v, f->key)) {
		r->foreign++;
		fmt_error(r->error, sizeof(r->error),
			  "a fire not the victim's: key %" PRIu64 ", %zu bytes of payload",
			  f->key, f->payload_len);
		return;
	}
	if (v->state[f->key] == 2) {
		r->repeated++;
		return;
	}
	v->state[f->key] = 2;
	r->fires++;
	if (f->fired_ns < f->deadline_ns || rx < f->deadline_ns) {
		r->early++;
		fmt_error(r->error, sizeof(r->error),
			  "key %" PRIu64 " early: fired %" PRId64 " ns, received %" PRId64
			  " ns after its deadline", f->key,
			  (int64_t)(f->fired_ns - f->deadline_ns),
			  (int64_t)(rx - f->deadline_ns));
		return;
	}
	load_hist_add(&r->fired, f->fired_ns - f->deadline_ns);
	load_hist_add(&r->rx, rx - f->deadline_ns);
}

static void victim_reply(struct bwc_client *c, const struct bwc_reply *rep,
			 void *arg)
{
	struct victim *v = arg;

	(void)c;
	v->outstanding--;
	if (rep->status != 0) {
		v->r->refused++;
		fmt_error(v->r->error, sizeof(v->r->error), "Schedule of key %" PRIu64
			  " refused: %s %s", rep->key,
			  bwc_server_error_name(rep->server_error), rep->message);
		return;
	}
	load_hist_add(&v->r->rtt, bwc_now_ns() - v->sent[rep->key]);
	if (v->state[rep->key] == 0)
		v->state[rep->key] = 1;
	v->r->scheduled++;
}

/* Dispatch whatever comes until t (CLOCK_MONOTONIC): 0, or -1 when the
 * connection failed. */
static int victim_pump_until(struct bwc_client *c, struct victim *v, uint64_t t)
{
	for (;;) {
		uint64_t now = bwc_now_ns();
		struct pollfd p = { .fd = bwc_fd(c), .events = bwc_poll_events(c) };
		struct timespec ts;
		int rc;

		if (now >= t)
			return 0;
		ts.tv_sec = (time_t)((t - now) / S);
		ts.tv_nsec = (long)((t - now) % S);
		if (ppoll(&p, 1, &ts, NULL) < 0 && errno != EINTR)
			return -1;
		rc = bwc_dispatch(c);
		if (rc != 0 && rc != BWC_ENOMEM) {
			v->r->refused++;
			fmt_error(v->r->error, sizeof(v->r->error), "connection: %s",
				  bwc_errmsg(c));
			return -1;
		}
	}
}

static void victim_run(const struct atk_victim_opts *o, struct atk_victim_result *r)
{
	struct victim v = { .o = o, .r = r };
	struct bwc_session_info info;
	struct bwc_client *c = NULL;
	uint64_t end;

	v.n = o->duration_ns / o->interval_ns;
	v.sent = calloc(v.n ? v.n : 1, sizeof(*v.sent));
	v.state = calloc(v.n ? v.n : 1, 1);
	if (!v.sent || !v.state || bwc_new(&c) != 0) {
		fmt_error(r->error, sizeof(r->error), "out of memory");
		r->refused++;
		goto out;
	}
	bwc_set_role(c, BWC_ROLE_CONSUMER);
	bwc_set_ack_mode(c, BWC_ACK_AUTO);
	bwc_set_timeout(c, (int64_t)(10 * S));
	/* A lost connection is a result to report, not to ride through. */
	bwc_set_reconnect(c, false);
	bwc_set_fire_handler(c, victim_fire, &v);
	if (bwc_connect(c, o->sock, o->session) != 0) {
		r->refused++;
		fmt_error(r->error, sizeof(r->error), "Hello refused: %s", bwc_errmsg(c));
		goto out;
	}
	/* A session of its own: anything in it already is someone else's. */
	if (bwc_get_session_info(c, &info) == 0 && (info.timers || info.queued)) {
		r->foreign += info.timers + info.queued;
		fmt_error(r->error, sizeof(r->error),
			  "its new session '%s' held %" PRIu64 " timers and %" PRIu64
			  " fires", o->session, info.timers, info.queued);
	}
	v.start = bwc_now_ns() + 5 * MS;
	for (uint64_t k = 0; k < v.n; k++) {
		struct bwc_timer t = { .key = k, .absolute = true,
				       .when_ns = victim_deadline(&v, k),
				       .payload = VICTIM_PAYLOAD,
				       .payload_len = strlen(VICTIM_PAYLOAD) };

		if (victim_pump_until(c, &v, v.start + k * o->interval_ns) != 0)
			goto out;
		v.sent[k] = bwc_now_ns();
		if (bwc_send_schedule(c, &t, victim_reply, &v) != 0) {
			r->refused++;
			fmt_error(r->error, sizeof(r->error), "Schedule: %s", bwc_errmsg(c));
			goto out;
		}
		v.outstanding++;
	}
	/* The last fires, and every reply; then what never came is lost. */
	end = v.start + (v.n ? v.n - 1 : 0) * o->interval_ns + o->grace_ns +
	      (o->delay_max_ns > o->delay_ns ? o->delay_max_ns : o->delay_ns);
	while (bwc_now_ns() < end && (v.outstanding || r->fires < r->scheduled))
		if (victim_pump_until(c, &v, bwc_now_ns() + 5 * MS) != 0)
			break;
out:
	r->lost = r->scheduled - r->fires;
	if (r->lost)
		fmt_error(r->error, sizeof(r->error), "%" PRIu64 " of %" PRIu64
			  " accepted timers never fired", r->lost, r->scheduled);
	bwc_free(c);
	free(v.sent);
	free(v.state);
}

int atk_victim_start(const struct atk_victim_opts *opts, struct atk_child *out)
{
	int rc = fork_child(opts->uid, opts->nice, opts->rt, out);

	if (rc == 0 && out->pid == 0) {
		struct atk_victim_result *r = calloc(1, sizeof(*r));

		if (!r)
			_exit(97);
		victim_run(opts, r);
		report(out, r, sizeof(*r));
	}
	return rc;
}

int atk_victim_finish(struct atk_child *ch, int timeout_ms,
		      struct atk_victim_result *out)
{
	memset(out, 0, sizeof(*out));
	return collect(ch, timeout_ms, out, sizeof(*out), out->error, sizeof(out->error));
}

/* ---- raw connections ---------------------------------------------------- */

static int raw_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Write all of buf (blocking); false when the daemon closed. */
static bool raw_write(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* The ErrorCode of the first Error frame fd receives within timeout_ms
 * (other frames skipped): -1 for none (timeout, EOF, a bad frame). */
static int raw_read_error(int fd, int timeout_ms)
{
	static uint8_t buf[1 << 17];
	uint64_t deadline = load_now_ns() + (uint64_t)timeout_ms * MS;
	size_t have = 0;

	for (;;) {
		Bitwheel__V1__Envelope *env;
		size_t flen;
		int rc = bwp_frame_parse(buf, have, sizeof(buf) - BWP_HEADER_SIZE, &env, &flen);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = load_now_ns();
		ssize_t n;

		if (rc == 0) {
			int code = env->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR ?
				   (int)env->error->code : -2;

			bwp_frame_free(env);
			memmove(buf, buf + flen, have - flen);
			have -= flen;
			if (code != -2)
				return code;
			continue;
		}
		if (rc != BWP_EMORE || now >= deadline ||
		    poll(&p, 1, (int)((deadline - now) / MS) + 1) <= 0)
			return -1;
		n = recv(fd, buf + have, sizeof(buf) - have, 0);
		if (n <= 0)
			return -1;
		have += (size_t)n;
	}
}

/* Append env, packed, to *buf (grown as needed). */
static bool pack(uint8_t **buf, size_t *len, size_t *cap,
		 const Bitwheel__V1__Envelope *env)
{
	size_t need = bwp_frame_packed_size(env), got;

	if (*len + need > *cap) {
		size_t ncap = (*cap ? *cap * 2 : 4096) + need;
		uint8_t *n = realloc(*buf, ncap);

		if (!n)
			return false;
		*buf = n;
		*cap = ncap;
	}
	if (bwp_frame_pack(env, SIZE_MAX, *buf + *len, *cap - *len, &got) != 0)
		return false;
	*len += got;
	return true;
}

static bool pack_hello(uint8_t **buf, size_t *len, size_t *cap, uint32_t version)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Hello h = BITWHEEL__V1__HELLO__INIT;

	h.has_protocol_version = 1;
	h.protocol_version = version;
	env.has_request_id = 1;
	env.request_id = 1;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	env.hello = &h;
	return pack(buf, len, cap, &env);
}

static bool pack_schedule(uint8_t **buf, size_t *len, size_t *cap, uint64_t key,
			  uint64_t delay_ns, const void *payload, size_t plen)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Schedule s = BITWHEEL__V1__SCHEDULE__INIT;

	s.has_key = 1;
	s.key = key;
	s.when_case = BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS;
	s.delay_ns = delay_ns;
	s.has_payload = 1;
	s.payload.data = (uint8_t *)payload;
	s.payload.len = plen;
	env.has_request_id = 1;
	env.request_id = key + 2;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE;
	env.schedule = &s;
	return pack(buf, len, cap, &env);
}

/*
 * A Stats request (request_id 2) whose body is `fields` unknown varint
 * fields (number 100, value 1, three bytes each): nothing frame.c would
 * pack, so written by hand as check_daemon's test_padded_request does.
 * body_len = 2 (request_id) + 1 + 3 (stats tag, length) + 3 fields.
 */
static size_t padded_stats(uint8_t *buf, size_t fields)
{
	size_t inner = fields * 3, body = 2 + 1 + 3 + inner, n = 0;

	buf[n++] = (uint8_t)(body >> 24);
	buf[n++] = (uint8_t)(body >> 16);
	buf[n++] = (uint8_t)(body >> 8);
	buf[n++] = (uint8_t)body;
	buf[n++] = 0x08;                       /* request_id 2 */
	buf[n++] = 0x02;
	buf[n++] = 0x2a;                       /* stats, length in three bytes */
	buf[n++] = (uint8_t)(0x80 | (inner & 0x7f));
	buf[n++] = (uint8_t)(0x80 | ((inner >> 7) & 0x7f));
	buf[n++] = (uint8_t)(inner >> 14);
	for (size_t i = 0; i < fields; i++) {
		buf[n++] = 0xa0;               /* field 100, varint 1 */
		buf[n++] = 0x06;
		buf[n++] = 0x01;
	}
	return n;
}

/* ---- the attacker's side ------------------------------------------------ */

struct actx {
	const struct atk_attack_opts *o;
	struct atk_attack_result *r;
	struct atk_child *ch;
	struct bwc_limits lim;  /* learnt at the first connection          */
	bool have_lim;
	uint8_t *payload;       /* o->payload (or max_payload) bytes       */
	size_t payload_len;
	bool readied;           /* the ready byte was written              */
	uint8_t *buf;           /* frames packed for raw connections       */
	size_t buf_cap;
	struct crash *crash;    /* the crash-loop attacks' state           */
};

static void count_refusal(struct actx *a, int code)
{
	if (code >= 0 && code < ATK_CODES)
		a->r->refused[code]++;
}

/* Whether the caller closed the stop pipe, waiting up to ms for it. */
static bool stopping(struct actx *a, int ms)
{
	struct pollfd p = { .fd = a->ch->stop_fd, .events = POLLIN };

	return poll(&p, 1, ms) > 0;
}

/* A client connected to session (NULL: anonymous) in role, or NULL with
 * the refusal counted. */
static struct bwc_client *aconnect(struct actx *a, const char *session,
				   enum bwc_role role, int64_t owner)
{
	struct bwc_client *c;

	a->r->ops++;
	if (bwc_new(&c) != 0)
		return NULL;
	bwc_set_role(c, role);
	bwc_set_timeout(c, (int64_t)(10 * S));
	/* Attackers do what each attack says, reconnecting included. */
	bwc_set_reconnect(c, false);
	if (role == BWC_ROLE_CONSUMER)
		bwc_set_ack_mode(c, BWC_ACK_AUTO);
	if (owner >= 0)
		bwc_set_owner_uid(c, owner);
	if (bwc_connect(c, a->o->sock, session) != 0) {
		if (bwc_server_error(c))
			count_refusal(a, bwc_server_error(c));
		else if (!strstr(bwc_errmsg(c), "closed") && !strstr(bwc_errmsg(c), "reset"))
			fmt_error(a->r->error, sizeof(a->r->error), "connect: %s",
				  bwc_errmsg(c));
		bwc_free(c);
		return NULL;
	}
	if (!a->have_lim) {
		struct bwc_session_info info;

		if (bwc_get_session_info(c, &info) == 0) {
			a->lim = info.limits;
			a->have_lim = true;
		}
	}
	return c;
}

/* A refusal read off a raw connection that the daemon should refuse
 * (one past the connection budget); false if it took the connection. */
static bool probe_refused(struct actx *a, int *fd_out)
{
	int fd = raw_connect(a->o->sock), code;

	a->r->ops++;
	if (fd < 0)
		return true;
	code = raw_read_error(fd, 300);
	if (code < 0) {
		/* Nothing came: it holds a place now. */
		if (fd_out) {
			*fd_out = fd;
			return false;
		}
		close(fd);
		return false;
	}
	count_refusal(a, code);
	close(fd);
	return true;
}

struct fill {
	struct actx *a;
	uint64_t outstanding, accepted;
	bool refused;
};

static void fill_reply(struct bwc_client *c, const struct bwc_reply *rep, void *arg)
{
	struct fill *f = arg;

	(void)c;
	f->outstanding--;
	if (rep->status == 0) {
		f->accepted++;
		return;
	}
	f->refused = true;
	if (rep->status == BWC_ESERVER)
		count_refusal(f->a, rep->server_error);
}

/* Dispatch c until nothing is outstanding (or the connection ends). */
static void fill_drain(struct bwc_client *c, struct fill *f, uint64_t upto)
{
	while (f->outstanding > upto) {
		struct pollfd p = { .fd = bwc_fd(c), .events = bwc_poll_events(c) };

		if (poll(&p, 1, 10000) <= 0 || bwc_dispatch(c) != 0)
			break;
	}
}

/* What fill() schedules: its i-th timer (from 0) due at when_ns + i *
 * step_ns (a delay, or a CLOCK_MONOTONIC time when absolute), periodic
 * when period_ns is not 0, with leeway_ns (0: the daemon's default), and
 * the attacker's payload or none. */
struct fill_spec {
	uint64_t when_ns, step_ns, period_ns, leeway_ns;
	bool absolute, payload, replace;
};

static const struct fill_spec in_an_hour = { .when_ns = HOUR };

/*
 * Schedule timers key0, key0 + 1, ... on c, pipelined, until one is
 * refused or `most` were sent: how many were accepted.
 */
static uint64_t fill(struct actx *a, struct bwc_client *c, uint64_t key0,
		     uint64_t most, const struct fill_spec *sp)
{
	struct fill f = { .a = a };

	for (uint64_t i = 0; i < most && !f.refused; i++) {
		struct bwc_timer t = { .key = key0 + i, .absolute = sp->absolute,
				       .when_ns = sp->when_ns + i * sp->step_ns,
				       .period_ns = sp->period_ns, .replace = sp->replace };

		if (sp->payload) {
			t.payload = a->payload;
			t.payload_len = a->payload_len;
		}
		a->r->ops++;
		if (bwc_send_schedule_leeway(c, &t, sp->leeway_ns ? sp->leeway_ns :
					     BWC_LEEWAY_DEFAULT, fill_reply, &f) != 0)
			break;
		f.outstanding++;
		if (f.outstanding >= FILL_WINDOW)
			fill_drain(c, &f, FILL_WINDOW / 2);
	}
	fill_drain(c, &f, 0);
	a->r->timers += f.accepted;
	return f.accepted;
}

/* ATK_MEMORY: sessions filled with payload timers due in an hour, left
 * detached, until a Hello is refused (the session budget) or the caps. */
static void build_memory(struct actx *a)
{
	for (unsigned s = 0; s < a->o->max_conns && a->r->timers < a->o->max_timers; s++) {
		char name[32];
		struct bwc_client *c;

		snprintf(name, sizeof(name), "mem-%u", s);
		c = aconnect(a, name, BWC_ROLE_PRODUCER, -1);
		if (!c)
			break;
		a->r->sessions++;
		fill(a, c, 1, a->o->max_timers - a->r->timers,
		     &(struct fill_spec){ .when_ns = HOUR, .payload = true });
		bwc_free(c);
	}
}

/* ATK_CPU: 100 ms periodic timers round-robin over 16 detached sessions
 * until the periodic-rate budget refuses one. */
static void build_cpu(struct actx *a)
{
	struct bwc_client *c[16];
	unsigned n = 0;
	bool refused = false;

	for (; n < 16; n++) {
		char name[32];

		snprintf(name, sizeof(name), "cpu-%u", n);
		if (!(c[n] = aconnect(a, name, BWC_ROLE_PRODUCER, -1)))
			break;
		a->r->sessions++;
	}
	for (uint64_t k = 1; n && !refused && a->r->timers < a->o->max_timers; k++)
		for (unsigned i = 0; i < n && !refused; i++)
			refused = fill(a, c[i], k, 1, &(struct fill_spec){
				.when_ns = 100 * MS, .period_ns = 100 * MS }) == 0;
	for (unsigned i = 0; i < n; i++)
		bwc_free(c[i]);
}

struct conns {
	struct bwc_client **c;
	unsigned n, cap;
	int *raw;
	unsigned nraw, rawcap;
};

static bool conns_add(struct conns *cs, struct bwc_client *c)
{
	if (cs->n == cs->cap) {
		unsigned ncap = cs->cap ? cs->cap * 2 : 64;
		struct bwc_client **n = realloc(cs->c, ncap * sizeof(*n));

		if (!n)
			return false;
		cs->c = n;
		cs->cap = ncap;
	}
	cs->c[cs->n++] = c;
	return true;
}

static bool conns_add_raw(struct conns *cs, int fd)
{
	if (cs->nraw == cs->rawcap) {
		unsigned ncap = cs->rawcap ? cs->rawcap * 2 : 64;
		int *n = realloc(cs->raw, ncap * sizeof(*n));

		if (!n)
			return false;
		cs->raw = n;
		cs->rawcap = ncap;
	}
	cs->raw[cs->nraw++] = fd;
	return true;
}

static void conns_free(struct conns *cs)
{
	for (unsigned i = 0; i < cs->n; i++)
		bwc_free(cs->c[i]);
	for (unsigned i = 0; i < cs->nraw; i++)
		if (cs->raw[i] >= 0)
			close(cs->raw[i]);
	free(cs->c);
	free(cs->raw);
}

/* Anonymous connections that said Hello, until one is refused. */
static void hold_connections(struct actx *a, struct conns *cs)
{
	while (cs->n + cs->nraw < a->o->max_conns) {
		struct bwc_client *c = aconnect(a, NULL, BWC_ROLE_DEFAULT, -1);

		if (!c || !conns_add(cs, c)) {
			bwc_free(c);
			break;
		}
	}
	a->r->conns = cs->n + cs->nraw;
}

static void burst_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct actx *a = arg;

	(void)c;
	(void)f;
	a->r->fires++;
}

/* ATK_BURST's build-up: anonymous connections, each filled with timers
 * due in an hour until one is refused (its session's max_timers, then
 * the uid's budget: a connection that takes none), or the caps; took[i]
 * is connection i's share. */
static uint64_t *build_burst(struct actx *a, struct conns *cs)
{
	uint64_t *took = NULL;

	while (cs->n < a->o->max_conns && a->r->timers < a->o->max_timers) {
		struct bwc_client *c = aconnect(a, NULL, BWC_ROLE_DEFAULT, -1);
		uint64_t *n = realloc(took, (cs->n + 1) * sizeof(*n));
		uint64_t k;

		if (!c || !n || !conns_add(cs, c)) {
			bwc_free(c);
			free(n ? n : took);
			return NULL;
		}
		took = n;
		bwc_set_fire_handler(c, burst_fire, a);
		k = took[cs->n - 1] = fill(a, c, 0, a->o->max_timers - a->r->timers, &in_an_hour);
		if (!k)
			break;
	}
	a->r->conns = cs->n;
	return took;
}

/* Read the connections' fires until want more than base came, `until`
 * (CLOCK_MONOTONIC) or stop. */
static void burst_read(struct actx *a, struct conns *cs, uint64_t base, uint64_t want,
		       uint64_t until)
{
	struct pollfd *p = calloc(cs->n, sizeof(*p));

	while (p && a->r->fires - base < want && load_now_ns() < until && !stopping(a, 0)) {
		for (unsigned i = 0; i < cs->n; i++)
			p[i] = (struct pollfd){ .fd = bwc_fd(cs->c[i]),
						.events = (short)bwc_poll_events(cs->c[i]) };
		if (poll(p, cs->n, 10) < 0)
			break;
		for (unsigned i = 0; i < cs->n; i++)
			if (p[i].revents && bwc_dispatch(cs->c[i]) != 0) {
				fmt_error(a->r->error, sizeof(a->r->error), "burst: %s",
					  bwc_errmsg(cs->c[i]));
				free(p);
				return;
			}
	}
	free(p);
}

/* ATK_BURST's rounds: every timer of the build-up (their keys replaced)
 * due at one instant T on the grid, a lead ahead of the round's start
 * that covers its Schedules twice over; then every fire read; again. */
static void run_burst(struct actx *a, struct conns *cs, const uint64_t *took)
{
	uint64_t lead = 100 * MS * (a->o->slow ? a->o->slow : 1), budget = a->r->timers;

	do {
		uint64_t t0 = load_now_ns(),
			 t = (t0 + lead) / ATK_BURST_GRID_NS * ATK_BURST_GRID_NS + ATK_BURST_GRID_NS;
		uint64_t want = 0, base = a->r->fires;

		/* Fires come while it schedules, when the lead was short. */
		for (unsigned i = 0; i < cs->n; i++)
			want += fill(a, cs->c[i], 0, took[i], &(struct fill_spec){
				.when_ns = t, .absolute = true, .replace = true });
		if (2 * (load_now_ns() - t0) > lead)
			lead = 2 * (load_now_ns() - t0);
		burst_read(a, cs, base, want, t + 30 * S);
	} while (!stopping(a, 0));
	a->r->timers = budget;
}

static void stats_reply(struct bwc_client *c, const struct bwc_reply *rep, void *arg)
{
	unsigned *outstanding = arg;

	(void)c;
	(void)rep;
	(*outstanding)--;
}

/* ATK_STATS: the connection budget held, 4 of them flooding Stats. */
static void run_stats(struct actx *a, struct conns *cs)
{
	enum { FLOODERS = 4, DEPTH = 32 };
	unsigned outstanding[FLOODERS] = { 0 }, nf = cs->n < FLOODERS ? cs->n : FLOODERS;

	while (!stopping(a, 0)) {
		struct pollfd p[FLOODERS];

		for (unsigned i = 0; i < nf; i++) {
			while (outstanding[i] < DEPTH &&
			       bwc_send_stats(cs->c[i], stats_reply, &outstanding[i]) == 0) {
				outstanding[i]++;
				a->r->ops++;
			}
			p[i].fd = bwc_fd(cs->c[i]);
			p[i].events = bwc_poll_events(cs->c[i]);
		}
		if (poll(p, nf, 100) < 0 && errno != EINTR)
			break;
		for (unsigned i = 0; i < nf; i++)
			if (bwc_dispatch(cs->c[i]) != 0) {
				fmt_error(a->r->error, sizeof(a->r->error), "Stats flooder: %s",
					  bwc_errmsg(cs->c[i]));
				return;
			}
	}
}

/* ATK_FRAMES, one round: a Stats padded with unknown fields to the frame
 * limit, one header over the limit, and 64 small padded Stats (under the
 * bound protobuf-c is trusted with) on one connection. */
static void frames_round(struct actx *a, uint8_t *buf, size_t max_frame)
{
	uint8_t *hello = NULL;
	size_t hlen = 0, hcap = 0;

	if (!pack_hello(&hello, &hlen, &hcap, BWP_PROTOCOL_VERSION))
		return;
	for (int kind = 0; kind < 3; kind++) {
		int fd = raw_connect(a->o->sock), code;
		size_t n = 0;

		a->r->ops++;
		if (fd < 0)
			break;
		memcpy(buf, hello, hlen);
		if (kind == 0) {
			n = hlen + padded_stats(buf + hlen, (max_frame - 6) / 3);
		} else if (kind == 1) {
			uint32_t big = (uint32_t)max_frame + 1;

			n = hlen + padded_stats(buf + hlen, 8);
			buf[hlen] = (uint8_t)(big >> 24);
			buf[hlen + 1] = (uint8_t)(big >> 16);
			buf[hlen + 2] = (uint8_t)(big >> 8);
			buf[hlen + 3] = (uint8_t)big;
		} else {
			n = hlen;
			for (int i = 0; i < 64; i++)
				n += padded_stats(buf + n, 300);
		}
		if (raw_write(fd, buf, n) && kind < 2) {
			code = raw_read_error(fd, 2000);
			count_refusal(a, code);
		} else if (kind == 2) {
			/* Replies, not errors: read them and go. */
			if (raw_read_error(fd, 50) >= 0)
				fmt_error(a->r->error, sizeof(a->r->error),
					  "a small padded Stats was refused");
		}
		close(fd);
	}
	free(hello);
}

/* ATK_EXPIRE, one round: a named session filled to whatever the timer
 * budget leaves, then dropped to expire after the daemon's linger. */
static void expire_round(struct actx *a, unsigned *next)
{
	char name[32];
	struct bwc_client *c;

	snprintf(name, sizeof(name), "exp-%u", (*next)++);
	c = aconnect(a, name, BWC_ROLE_PRODUCER, -1);
	if (!c)
		return;
	a->r->sessions++;
	fill(a, c, 1, a->o->max_timers, &in_an_hour);
	bwc_free(c);
}

/* Fires a connection that never reads asks for. */
#define UNREAD_FIRES 1000
/* Connections opened between two looks for a refusal. */
#define SILENT_BATCH 16

/* Ask on fd for UNREAD_FIRES payload fires due at once, which it will
 * never read.  The daemon stops reading once its output to us is full:
 * a short write is all this connection will ever take. */
static void never_read(struct actx *a, int fd)
{
	size_t len = 0;

	if (!pack_hello(&a->buf, &len, &a->buf_cap, BWP_PROTOCOL_VERSION))
		return;
	for (uint64_t k = 0; k < UNREAD_FIRES; k++)
		if (!pack_schedule(&a->buf, &len, &a->buf_cap, k, MS, a->payload,
				   a->payload_len))
			return;
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (send(fd, a->buf, len, MSG_NOSIGNAL) < 0 && errno != EAGAIN)
		fmt_error(a->r->error, sizeof(a->r->error), "send: %s", strerror(errno));
}

/*
 * Connections in batches until the connection budget refuses some (an
 * accepted one hears nothing, a refused one its error at once); fn(a, i)
 * for each accepted one, cs->raw[i].
 */
static void open_batches(struct actx *a, struct conns *cs,
			 void (*fn)(struct actx *a, struct conns *cs, unsigned i))
{
	bool refused = false;

	while (!refused && cs->nraw < a->o->max_conns) {
		unsigned first = cs->nraw;

		for (unsigned i = 0; i < SILENT_BATCH; i++) {
			int fd = raw_connect(a->o->sock);

			a->r->ops++;
			if (fd < 0 || !conns_add_raw(cs, fd)) {
				if (fd >= 0)
					close(fd);
				refused = true;
				break;
			}
		}
		/* Refusals come at accept: give the daemon a moment. */
		usleep(200000);
		for (unsigned i = first; i < cs->nraw; i++) {
			struct pollfd p = { .fd = cs->raw[i], .events = POLLIN };

			if (poll(&p, 1, 0) > 0) {
				count_refusal(a, raw_read_error(cs->raw[i], 100));
				close(cs->raw[i]);
				cs->raw[i] = -1;
				refused = true;
			} else {
				fn(a, cs, i);
			}
		}
	}
	a->r->conns = 0;
	for (unsigned i = 0; i < cs->nraw; i++)
		a->r->conns += cs->raw[i] >= 0;
}

/* ATK_SILENT: of the connections the budget admits, every other one never
 * says anything, and the rest ask for fires they never read. */
static void silent_one(struct actx *a, struct conns *cs, unsigned i)
{
	if (i % 2 == 1)
		never_read(a, cs->raw[i]);
}

/* ATK_PIPELINE: every connection the budget admits says Hello, then
 * writes Cancels of keys it never scheduled as fast as the daemon reads
 * them, and reads the replies. */
static void pipeline_one(struct actx *a, struct conns *cs, unsigned i)
{
	uint8_t *hello = NULL;
	size_t len = 0, cap = 0;

	if (pack_hello(&hello, &len, &cap, BWP_PROTOCOL_VERSION) &&
	    !raw_write(cs->raw[i], hello, len))
		fmt_error(a->r->error, sizeof(a->r->error), "Hello: %s", strerror(errno));
	fcntl(cs->raw[i], F_SETFL, fcntl(cs->raw[i], F_GETFL) | O_NONBLOCK);
	free(hello);
}

/* The len bytes of whole frames in a->buf, written round and round to
 * every raw connection as fast as the daemon reads them, every reply read
 * and dropped, until told to stop. */
static void pump_frames(struct actx *a, struct conns *cs, size_t len)
{
	size_t *off = calloc(cs->nraw ? cs->nraw : 1, sizeof(*off));
	struct pollfd *p = calloc(cs->nraw ? cs->nraw : 1, sizeof(*p));
	static uint8_t sink[65536];

	while (off && p && len && !stopping(a, 0)) {
		for (unsigned i = 0; i < cs->nraw; i++) {
			p[i].fd = cs->raw[i];
			p[i].events = POLLIN | POLLOUT;
		}
		if (poll(p, cs->nraw, 100) <= 0)
			continue;
		for (unsigned i = 0; i < cs->nraw; i++) {
			ssize_t n;

			if (p[i].revents & POLLIN)
				while (recv(cs->raw[i], sink, sizeof(sink), 0) > 0)
					;
			if (!(p[i].revents & POLLOUT))
				continue;
			n = send(cs->raw[i], a->buf + off[i], len - off[i], MSG_NOSIGNAL);
			if (n > 0) {
				off[i] = (off[i] + (size_t)n) % len;
				a->r->ops++;
			}
		}
	}
	free(off);
	free(p);
}

static void run_pipeline(struct actx *a, struct conns *cs)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Cancel cancel = BITWHEEL__V1__CANCEL__INIT;
	size_t len = 0;

	env.has_request_id = 1;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_CANCEL;
	env.cancel = &cancel;
	cancel.has_key = 1;
	/* 60 KiB of whole frames, written round and round. */
	while (len < 60000) {
		env.request_id = 1000 + len;
		cancel.key = 1u << 20 | len;
		if (!pack(&a->buf, &len, &a->buf_cap, &env))
			break;
	}
	pump_frames(a, cs, len);
}

#define LIST_DENSE "list-dense"
#define LIST_SPARSE "list-sparse"
#define LIST_FLOODERS 4
#define LIST_KEEP 8

/* ATK_LIST's build: LIST_SPARSE filled until refused and cancelled down
 * to LIST_KEEP timers (its table keeps its size: a listing crosses it
 * nearly empty), then LIST_DENSE filled until refused; LIST_FLOODERS
 * connections said Hello. */
static void build_list(struct actx *a, struct conns *cs)
{
	struct bwc_client *c = aconnect(a, LIST_SPARSE, BWC_ROLE_PRODUCER, -1);
	uint64_t n;

	if (!c)
		return;
	a->r->sessions++;
	n = fill(a, c, 0, a->o->max_timers / 2, &in_an_hour);
	for (uint64_t k = 0; k < n; k++) {
		if (k % (n / LIST_KEEP + 1) == 0)
			continue;
		a->r->ops++;
		if (bwc_cancel(c, k, NULL) == 0)
			a->r->timers--;
	}
	bwc_free(c);
	if ((c = aconnect(a, LIST_DENSE, BWC_ROLE_PRODUCER, -1))) {
		a->r->sessions++;
		fill(a, c, 0, a->o->max_timers - a->r->timers, &in_an_hour);
		bwc_free(c);
	}
	for (unsigned i = 0; i < LIST_FLOODERS; i++) {
		int fd = raw_connect(a->o->sock);

		if (fd < 0 || !conns_add_raw(cs, fd)) {
			if (fd >= 0)
				close(fd);
			break;
		}
		pipeline_one(a, cs, cs->nraw - 1);
	}
	a->r->conns = cs->nraw;
}

/* ATK_LIST's attack: first pages of both sessions' timers and of the
 * uid's sessions, as fast as the daemon answers them. */
static void run_list(struct actx *a, struct conns *cs)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__ListTimers lt = BITWHEEL__V1__LIST_TIMERS__INIT;
	Bitwheel__V1__ListSessions ls = BITWHEEL__V1__LIST_SESSIONS__INIT;
	size_t len = 0;

	env.has_request_id = 1;
	lt.has_session = 1;
	for (unsigned i = 0; len < 4000; i++) {
		env.request_id = 1000 + i;
		if (i % 3 == 2) {
			env.body_case = BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS;
			env.list_sessions = &ls;
		} else {
			const char *name = i % 3 ? LIST_SPARSE : LIST_DENSE;

			lt.session.data = (uint8_t *)name;
			lt.session.len = strlen(name);
			env.body_case = BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS;
			env.list_timers = &lt;
		}
		if (!pack(&a->buf, &len, &a->buf_cap, &env))
			break;
	}
	pump_frames(a, cs, len);
}

/* ATK_SILENT's active phase: the silent ones the Hello deadline closes
 * are counted (HELLO_REQUIRED) and replaced. */
static void run_silent(struct actx *a, struct conns *cs)
{
	while (!stopping(a, 50)) {
		for (unsigned i = 0; i < cs->nraw; i += 2) {
			struct pollfd p = { .fd = cs->raw[i], .events = POLLIN };
			int fd = -1;

			if (cs->raw[i] < 0 || poll(&p, 1, 0) <= 0)
				continue;
			count_refusal(a, raw_read_error(cs->raw[i], 100));
			close(cs->raw[i]);
			cs->raw[i] = -1;
			if (!probe_refused(a, &fd))
				cs->raw[i] = fd;
		}
	}
}

/* ATK_SQUAT: the victim's name and a few like it in the attacker's own
 * namespace, with 32 periodic timers each firing the victim's payload
 * under the victim's keys; then, over and over, a Hello naming the
 * victim's namespace, which must be PERMISSION_DENIED. */
static void build_squat(struct actx *a, struct conns *cs)
{
	static const char *const suffix[] = { "", "-later", "-1", "-backup" };

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		char name[80];
		struct bwc_client *c;

		snprintf(name, sizeof(name), "%s%s", a->o->victim_session, suffix[i]);
		c = aconnect(a, name, BWC_ROLE_CONSUMER, -1);
		if (!c)
			continue;
		a->r->sessions++;
		for (uint64_t k = 0; k < 32; k++) {
			struct bwc_timer t = { .key = k, .when_ns = 20 * MS + k * MS,
					       .period_ns = 100 * MS,
					       .payload = VICTIM_PAYLOAD,
					       .payload_len = strlen(VICTIM_PAYLOAD) };

			a->r->ops++;
			if (bwc_schedule(c, &t, NULL) == 0)
				a->r->timers++;
			else if (bwc_server_error(c))
				count_refusal(a, bwc_server_error(c));
		}
		conns_add(cs, c);
	}
}

static void run_squat(struct actx *a, struct conns *cs)
{
	char victim_later[80];

	snprintf(victim_later, sizeof(victim_later), "%s", a->o->victim_session);
	while (!stopping(a, 20)) {
		struct bwc_client *c;

		/* Take the squatted sessions' fires (they are ours). */
		for (unsigned i = 0; i < cs->n; i++) {
			struct bwc_fire f;

			while (bwc_wait_fire(cs->c[i], 0, &f) == 0)
				;
		}
		c = aconnect(a, victim_later, BWC_ROLE_CONSUMER, (int64_t)a->o->victim_uid);
		if (c) {
			fmt_error(a->r->error, sizeof(a->r->error),
				  "attached to uid %ld's session '%s'", (long)a->o->victim_uid,
				  victim_later);
			bwc_free(c);
		}
	}
}

/* ATK_LOGS: the connection budget held but for two places; each round a
 * Hello of a wrong protocol version (a closing error), a named session
 * opened and left (a session line), and three connections where two fit
 * (a refusal line). */
static void logs_round(struct actx *a)
{
	uint8_t *hello = NULL;
	size_t hlen = 0, hcap = 0;
	int fd, extra[3];
	struct bwc_client *c;

	if (!pack_hello(&hello, &hlen, &hcap, 999))
		return;
	/* A slow daemon (valgrind, a loaded machine) may not have seen the
	 * last round's connections close: at the budget, try again a little
	 * later, for up to 5 s. */
	for (int tries = 0; tries < 250; tries++) {
		int code = -1;

		fd = raw_connect(a->o->sock);
		a->r->ops++;
		if (fd >= 0) {
			if (raw_write(fd, hello, hlen))
				code = raw_read_error(fd, 10000);
			close(fd);
		}
		count_refusal(a, code);
		if (code != EC(TOO_MANY_CLIENTS))
			break;
		usleep(20000);
	}
	free(hello);
	c = aconnect(a, "logs", BWC_ROLE_PRODUCER, -1);
	bwc_free(c);
	for (int i = 0; i < 3; i++) {
		extra[i] = -1;
		probe_refused(a, &extra[i]);
	}
	for (int i = 0; i < 3; i++)
		if (extra[i] >= 0)
			close(extra[i]);
}

/* ---- the delivery attacks ------------------------------------------------- */

/* Named sessions they fill, at most: the uid's timer budget runs out
 * first (4 at the defaults: 65,536 timers a session, 231,409 a uid). */
#define DLV_SESSIONS 16
/* The fires come due this long after the build-up starts, and that much
 * more per timer of the uid's budget: the filling done before, on an
 * unloaded machine, so that they come due at one instant. */
#define DLV_LEAD_NS (200 * MS)
#define DLV_LEAD_PER_TIMER_NS 10000u
/* Every fire of a round is to come once by this long after its deadline
 * (its batch's end, ATK_COALESCE), plus twice what the uid's redelivery
 * pace (its periodic-rate budget) takes to hand them all out, or the
 * attacker says how many did not (dlv_until): about 50 s at the
 * defaults, 13 s at check_attack's budgets, within its 30 s wait. */
#define DLV_ARRIVE_NS (5 * S)
/* ATK_CHURN: each consumer closes and reconnects this often, in turn. */
#define CHURN_NS (200 * MS)
/* ATK_REATTACH: every consumer closes and re-attaches at once this often,
 * the first time this long after the build-up. */
#define REATTACH_NS S
/* ATK_COALESCE: the deadlines of a batch spread over this much per timer
 * of the uid's budget (at least COALESCE_SPREAD_MIN_NS), each timer's
 * leeway a quarter more, so that every window overlaps every other; the
 * spread keeps each of the coarse lane's 100 ms ticks to a few thousand
 * fires at the defaults (4.6 s, 5,000 a tick), so that the wheel's poll of
 * a tick is not what the batch's release is blamed for. */
#define COALESCE_SPREAD_PER_TIMER_NS 20000u
#define COALESCE_SPREAD_MIN_NS (200 * MS)
/* Frames read from one consumer before the next one's turn. */
#define RAWC_READS 16

/* A consumer on a raw socket: it reads every frame and acknowledges
 * nothing. */
struct rawc {
	int fd;                 /* -1 while closed                          */
	unsigned session;       /* its session, in dlv.s                    */
	bool refused;           /* an Error came: the daemon closes it      */
	uint64_t last;          /* the highest Fired.delivery it read       */
	uint8_t *buf;           /* what came after the last whole frame     */
	size_t have;
};

struct dlv {
	enum atk_kind k;
	struct {
		char name[32];
		uint64_t timers;            /* accepted in the build-up     */
		struct bwc_client *producer; /* ATK_COALESCE's, kept for the
						next batches            */
	} s[DLV_SESSIONS];
	unsigned ns;
	struct rawc *c;          /* its consumers, nc of them               */
	unsigned nc;
	struct pollfd *p;        /* the stop pipe, then each consumer       */
	size_t bufcap;           /* the daemon's largest frame, and header  */
	uint32_t window;
	uint64_t budget;         /* the uid's timers                        */
	uint64_t total;          /* timers of a round, over all sessions    */
	bool hello_seen;         /* a HelloReply set r->ack_timeout_ns      */
};

/* A consumer's Hello of session, into a->buf: its length, or 0 out of
 * memory.  window 0: the daemon's; ack_timeout_ns 0: none. */
static size_t consumer_hello(struct actx *a, const char *session, uint32_t window,
			     uint64_t ack_timeout_ns, bool auto_ack, bool coalesce)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Hello h = BITWHEEL__V1__HELLO__INIT;
	size_t len = 0;

	h.has_protocol_version = 1;
	h.protocol_version = BWP_PROTOCOL_VERSION;
	h.has_session = 1;
	h.session.data = (uint8_t *)session;
	h.session.len = strlen(session);
	h.has_role = 1;
	h.role = BITWHEEL__V1__ROLE__CONSUMER;
	h.has_window = window != 0;
	h.window = window;
	h.has_ack_timeout_ns = ack_timeout_ns != 0;
	h.ack_timeout_ns = ack_timeout_ns;
	h.has_auto_ack = h.auto_ack = auto_ack;
	h.has_coalesce = h.coalesce = coalesce;
	env.has_request_id = 1;
	env.request_id = 1;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	env.hello = &h;
	return pack(&a->buf, &len, &a->buf_cap, &env) ? len : 0;
}

/* A Hello of d's kind of consumer of `session`, into a->buf. */
static size_t dlv_hello(struct actx *a, const struct dlv *d, const char *session)
{
	return consumer_hello(a, session, d->window, d->k == ATK_REDELIVER ? 1 : 0,
			      d->k == ATK_COALESCE, d->k == ATK_COALESCE);
}

/* A raw connection that said the Hello in a->buf (len bytes, 0: out of
 * memory), without waiting for its reply, non-blocking: its fd, or -1
 * with the failure said of `who`. */
static int raw_open(struct actx *a, size_t len, const char *who)
{
	int fd;

	a->r->ops++;
	if (!len || (fd = raw_connect(a->o->sock)) < 0) {
		fmt_error(a->r->error, sizeof(a->r->error), "%s: %s", who,
			  len ? strerror(errno) : "out of memory");
		return -1;
	}
	/* Refused at accept, it is closed after its Error, which the
	 * reader counts. */
	raw_write(fd, a->buf, len);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* Connect c and say Hello, without waiting: the reply is read with the
 * fires. */
static void rawc_open(struct actx *a, struct dlv *d, struct rawc *c)
{
	char who[48];

	c->have = 0;
	c->refused = false;
	c->last = 0;
	snprintf(who, sizeof(who), "consumer of %s", d->s[c->session].name);
	c->fd = raw_open(a, dlv_hello(a, d, d->s[c->session].name), who);
}

static void rawc_close(struct rawc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->have = 0;
}

/* What a raw consumer does with one frame from the daemon; it may close
 * c (the rest of what came is then dropped). */
typedef void (*rawc_frame_fn)(struct actx *a, void *arg, struct rawc *c,
			      const Bitwheel__V1__Envelope *env);

/* One frame from the daemon to a delivery attack's consumer. */
static void dlv_frame(struct actx *a, void *arg, struct rawc *c,
		      const Bitwheel__V1__Envelope *env)
{
	struct dlv *d = arg;

	switch (env->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_FIRED:
		a->r->fires++;
		a->r->redelivered += env->fired->redelivered;
		if (env->fired->delivery > c->last)
			c->last = env->fired->delivery;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY:
		if (d->k != ATK_REDELIVER)
			break;
		if (!d->hello_seen || env->hello_reply->ack_timeout_ns < a->r->ack_timeout_ns)
			a->r->ack_timeout_ns = env->hello_reply->ack_timeout_ns;
		d->hello_seen = true;
		if (env->hello_reply->ack_timeout_ns < ATK_ACK_TIMEOUT_FLOOR_NS)
			fmt_error(a->r->error, sizeof(a->r->error),
				  "an ack timeout of 1 ns was put in force as %" PRIu64 " ns",
				  env->hello_reply->ack_timeout_ns);
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_ERROR:
		count_refusal(a, (int)env->error->code);
		c->refused = true;
		break;
	default:
		break;
	}
}

/* Read what c (of session `name`, its buffer bufcap bytes) has, a few
 * reads' worth, and hand its whole frames to fn. */
static void rawc_read(struct actx *a, struct rawc *c, size_t bufcap, const char *name,
		      rawc_frame_fn fn, void *arg)
{
	for (int i = 0; i < RAWC_READS && c->fd >= 0; i++) {
		ssize_t n = recv(c->fd, c->buf + c->have, bufcap - c->have, 0);
		size_t off = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			if (!c->refused)
				fmt_error(a->r->error, sizeof(a->r->error),
					  "the daemon closed a consumer of %s (%s)",
					  name, n ? strerror(errno) : "EOF");
			rawc_close(c);
			return;
		}
		c->have += (size_t)n;
		for (;;) {
			Bitwheel__V1__Envelope *env;
			size_t flen;
			int rc = bwp_frame_parse(c->buf + off, c->have - off,
						 bufcap - BWP_HEADER_SIZE, &env, &flen);

			if (rc == BWP_EMORE)
				break;
			if (rc != 0) {
				fmt_error(a->r->error, sizeof(a->r->error),
					  "a frame to a consumer of %s: %s",
					  name, bwp_strerror(rc));
				rawc_close(c);
				return;
			}
			fn(a, arg, c, env);
			bwp_frame_free(env);
			if (c->fd < 0)
				return;
			off += flen;
		}
		memmove(c->buf, c->buf + off, c->have - off);
		c->have -= off;
	}
}

/* Read the open consumers for up to ms: whether told to stop. */
static bool dlv_read(struct actx *a, struct dlv *d, int ms)
{
	unsigned n = 1;

	d->p[0].fd = a->ch->stop_fd;
	d->p[0].events = POLLIN;
	for (unsigned i = 0; i < d->nc; i++) {
		d->p[i + 1].fd = d->c[i].fd;   /* poll skips -1 */
		d->p[i + 1].events = POLLIN;
		n++;
	}
	if (poll(d->p, n, ms) <= 0)
		return false;
	if (d->p[0].revents)
		return true;
	for (unsigned i = 0; i < d->nc; i++)
		if (d->p[i + 1].revents)
			rawc_read(a, &d->c[i], d->bufcap, d->s[d->c[i].session].name,
				  dlv_frame, d);
	return false;
}

/* Read until t (CLOCK_MONOTONIC), or until `fires` came if not 0:
 * whether told to stop. */
static bool dlv_read_until(struct actx *a, struct dlv *d, uint64_t t, uint64_t fires)
{
	for (uint64_t now; (now = load_now_ns()) < t && (!fires || a->r->fires < fires);)
		if (dlv_read(a, d, (int)((t - now) / MS) + 1))
			return true;
	return false;
}

/* Another consumer of session s; false out of memory. */
static bool dlv_add_consumer(struct actx *a, struct dlv *d, unsigned s)
{
	struct rawc *c;

	if (d->nc % 64 == 0) {
		struct rawc *nc = realloc(d->c, (d->nc + 64) * sizeof(*nc));
		struct pollfd *np = realloc(d->p, (d->nc + 65) * sizeof(*np));

		if (nc)
			d->c = nc;
		if (np)
			d->p = np;
		if (!nc || !np)
			return false;
	}
	c = &d->c[d->nc];
	*c = (struct rawc){ .fd = -1, .session = s, .buf = malloc(d->bufcap) };
	if (!c->buf)
		return false;
	d->nc++;
	rawc_open(a, d, c);
	return true;
}

static uint64_t dlv_slow(const struct actx *a)
{
	return a->o->slow ? a->o->slow : 1;
}

/* The deadlines of a round's fires: all at one instant lead from now
 * (ATK_COALESCE: spread, each with a leeway past the spread). */
static struct fill_spec dlv_spec(const struct actx *a, const struct dlv *d)
{
	struct fill_spec sp = { .absolute = true };
	uint64_t spread = d->budget * COALESCE_SPREAD_PER_TIMER_NS;

	sp.when_ns = load_now_ns() + dlv_slow(a) * (DLV_LEAD_NS + d->budget * DLV_LEAD_PER_TIMER_NS);
	if (d->k == ATK_COALESCE) {
		if (spread < COALESCE_SPREAD_MIN_NS)
			spread = COALESCE_SPREAD_MIN_NS;
		sp.step_ns = spread / (a->lim.max_timers ? a->lim.max_timers : 1);
		sp.leeway_ns = spread + spread / 4;
	}
	return sp;
}

/* When every fire of a round due as sp says should have come once. */
static uint64_t dlv_until(const struct actx *a, const struct dlv *d,
			  const struct fill_spec *sp)
{
	uint64_t rate = a->lim.max_periodic_rate_per_uid;

	return sp->when_ns + sp->leeway_ns + dlv_slow(a) *
	       (DLV_ARRIVE_NS + (rate ? 2 * d->total * S / rate : 0));
}

/*
 * The delivery attacks' build-up: named sessions filled in turn until the
 * uid's timer budget refuses, every fire due at one instant after the
 * filling; each session with as many consumers of the window as hold all
 * its fires (ATK_COALESCE: one coalescing consumer, attached first, as a
 * batch forms only while it is); ready once every fire came.
 */
static void build_delivery(struct actx *a, struct dlv *d)
{
	struct fill_spec sp;
	uint64_t until;

	if (!a->have_lim) {
		fmt_error(a->r->error, sizeof(a->r->error), "no limits from the daemon");
		return;
	}
	d->window = a->o->window ? a->o->window : a->lim.max_window;
	d->bufcap = a->lim.max_frame_bytes + BWP_HEADER_SIZE;
	d->budget = a->lim.max_timers_per_uid ? a->lim.max_timers_per_uid :
		    a->lim.max_timers;
	sp = dlv_spec(a, d);
	for (unsigned s = 0; s < DLV_SESSIONS && d->total < a->o->max_timers; s++) {
		struct bwc_client *c;
		uint64_t n;

		snprintf(d->s[s].name, sizeof(d->s[s].name), "dlv-%u", s);
		if (d->k == ATK_COALESCE && !dlv_add_consumer(a, d, s))
			break;
		if (!(c = aconnect(a, d->s[s].name, BWC_ROLE_PRODUCER, -1)))
			break;
		a->r->sessions++;
		d->ns = s + 1;
		n = fill(a, c, 0, a->o->max_timers - d->total, &sp);
		d->s[s].timers = n;
		d->total += n;
		if (d->k == ATK_COALESCE)
			d->s[s].producer = c;
		else
			bwc_free(c);
		for (uint64_t i = 0; d->k != ATK_COALESCE && i < (n + d->window - 1) / d->window; i++)
			if (!dlv_add_consumer(a, d, s))
				break;
		if (n == 0)
			break;
	}
	a->r->conns = d->nc;
	until = dlv_until(a, d, &sp);
	if (!dlv_read_until(a, d, until, d->total) && a->r->fires < d->total)
		fmt_error(a->r->error, sizeof(a->r->error),
			  "%" PRIu64 " of %" PRIu64 " fires came to the consumers by %.0f s"
			  " after their deadline", a->r->fires, d->total,
			  (double)(until - sp.when_ns) / 1e9);
}

/* ATK_REDELIVER: read every fire, acknowledge none. */
static void run_redeliver(struct actx *a, struct dlv *d)
{
	while (!dlv_read(a, d, 100))
		;
}

/* ATK_CHURN: the next consumer closes and reconnects every CHURN_NS /
 * their number. */
static void run_churn(struct actx *a, struct dlv *d)
{
	uint64_t step = CHURN_NS / (d->nc ? d->nc : 1), next = load_now_ns();

	for (unsigned i = 0; d->nc; i = (i + 1) % d->nc) {
		next += step;
		if (dlv_read_until(a, d, next, 0))
			return;
		rawc_close(&d->c[i]);
		rawc_open(a, d, &d->c[i]);
	}
	run_redeliver(a, d);
}

/* ATK_REATTACH: every consumer closes, then every one re-attaches, as
 * fast as it can, every REATTACH_NS. */
static void run_reattach(struct actx *a, struct dlv *d)
{
	for (uint64_t next = load_now_ns() + REATTACH_NS;; next += REATTACH_NS) {
		if (dlv_read_until(a, d, next, 0))
			return;
		for (unsigned i = 0; i < d->nc; i++)
			rawc_close(&d->c[i]);
		for (unsigned i = 0; i < d->nc; i++)
			rawc_open(a, d, &d->c[i]);
	}
}

/* ATK_COALESCE: once every fire of the last batches came, the same
 * sessions filled again, as in the build-up, round after round. */
static void run_coalesce(struct actx *a, struct dlv *d)
{
	uint64_t held = a->r->timers, want = a->r->fires;

	for (uint64_t round = 1;; round++) {
		struct fill_spec sp = dlv_spec(a, d);
		uint64_t until;

		for (unsigned s = 0; s < d->ns; s++)
			if (d->s[s].producer)
				want += fill(a, d->s[s].producer, round << 32, d->s[s].timers, &sp);
		until = dlv_until(a, d, &sp);
		if (dlv_read_until(a, d, until, want))
			break;
		if (a->r->fires < want) {
			fmt_error(a->r->error, sizeof(a->r->error),
				  "batch %" PRIu64 ": %" PRIu64 " fires short", round,
				  want - a->r->fires);
			break;
		}
	}
	/* Timers held when ready, not scheduled since. */
	a->r->timers = held;
	run_redeliver(a, d);
}

/* ATK_SINGLEACK: Acks packed for a consumer at a time. */
#define SINGLEACK_CHUNK 512

/* A consumer's single Acks, written as fast as the daemon reads them. */
struct acks_out {
	uint8_t *buf;
	size_t len, off, cap;
	uint64_t next;           /* the next newest first; then at random  */
};

/* The next SINGLEACK_CHUNK single Acks of c, without request_id, into o
 * (empty): the newer half of its deliveries (those above held, which it
 * keeps) newest first, then any of them at random (*rs). */
static void singleack_pack(struct acks_out *o, const struct rawc *c, uint64_t held,
			   uint64_t *rs)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Ack ack = BITWHEEL__V1__ACK__INIT;

	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	ack.has_delivery = 1;
	o->len = o->off = 0;
	for (unsigned i = 0; i < SINGLEACK_CHUNK; i++) {
		ack.delivery = o->next > held ? o->next-- :
			held + 1 + load_rand(rs) % (c->last - held);
		if (!pack(&o->buf, &o->len, &o->cap, &env))
			break;
	}
}

/* ATK_SINGLEACK: every consumer holds the older half of its fires and
 * acknowledges the newer half singly, newest first, then again and again
 * at random, until told to stop; each Ack counts in ops. */
static void run_singleack(struct actx *a, struct dlv *d)
{
	struct acks_out *o = calloc(d->nc ? d->nc : 1, sizeof(*o));
	uint64_t rs = 0x5eed5eedu;

	for (unsigned i = 0; o && i < d->nc; i++)
		o[i].next = d->c[i].last;
	d->p[0].fd = a->ch->stop_fd;
	d->p[0].events = POLLIN;
	while (o) {
		for (unsigned i = 0; i < d->nc; i++) {
			d->p[i + 1].fd = d->c[i].last > 1 ? d->c[i].fd : -1;
			d->p[i + 1].events = POLLIN | POLLOUT;
		}
		if (poll(d->p, d->nc + 1, 100) <= 0)
			continue;
		if (d->p[0].revents)
			break;
		for (unsigned i = 0; i < d->nc; i++) {
			struct rawc *c = &d->c[i];
			uint64_t held = c->last / 2;
			ssize_t n;

			if (d->p[i + 1].revents & POLLIN)
				rawc_read(a, c, d->bufcap, d->s[c->session].name, dlv_frame, d);
			if (c->fd < 0 || !(d->p[i + 1].revents & POLLOUT))
				continue;
			if (o[i].off == o[i].len)
				singleack_pack(&o[i], c, held, &rs);
			n = send(c->fd, o[i].buf + o[i].off, o[i].len - o[i].off, MSG_NOSIGNAL);
			if (n > 0) {
				o[i].off += (size_t)n;
				if (o[i].off == o[i].len)
					a->r->ops += SINGLEACK_CHUNK;
			}
		}
	}
	for (unsigned i = 0; o && i < d->nc; i++)
		free(o[i].buf);
	free(o);
}

static void dlv_free(struct dlv *d)
{
	for (unsigned i = 0; i < d->nc; i++) {
		rawc_close(&d->c[i]);
		free(d->c[i].buf);
	}
	for (unsigned s = 0; s < d->ns; s++)
		bwc_free(d->s[s].producer);
	free(d->c);
	free(d->p);
}

/* ---- the crash-loop attacks (issue 21) ----------------------------------- */

#define CRASH_SESSION "poison"
#define CRASH_DEAD CRASH_SESSION ".dead"
#define POISON_KEY (UINT64_C(1) << 62)
/* An ordinary fire due every CRASH_INTERVAL_NS (200 a second), each
 * CRASH_DELAY_NS after its Schedule. */
#define CRASH_INTERVAL_NS (5 * MS)
#define CRASH_DELAY_NS (20 * MS)
/* The consumer reconnects this long after each crash. */
#define CRASH_RESTART_NS (100 * MS)
/* An ordinary fire due this long before the stop and never acknowledged
 * is stuck: the poison fire blocked it. */
#define CRASH_STUCK_NS S

struct crash {
	enum atk_kind k;
	struct atk_crash *r;
	struct bwc_client *producer;
	struct rawc consumer;    /* fd -1 while it is "down"               */
	struct rawc watcher;     /* of CRASH_DEAD (ATK_POISON)             */
	size_t bufcap;
	uint64_t t0;             /* ordinary key k is due at t0 + k *
				    CRASH_INTERVAL_NS + CRASH_DELAY_NS     */
	uint64_t next_key;       /* the next ordinary Schedule's, from 1    */
	uint8_t *state;          /* per ordinary key: 1 accepted, 2 acked   */
	uint64_t cap;            /* keys state has room for                */
	uint64_t reopen_at;      /* the consumer's restart; 0 while up     */
	uint64_t poison_at;      /* the poison's Schedule; 0 while none is
				    out                                    */
	uint64_t last;           /* the delivery of the last ordinary fire
				    handled and not yet acknowledged       */
	bool batch;              /* a fire came on this connection         */
};

static void crash_reply(struct bwc_client *c, const struct bwc_reply *rep, void *arg)
{
	struct actx *a = arg;
	struct crash *x = a->crash;

	(void)c;
	if (rep->status != 0) {
		if (rep->status == BWC_ESERVER)
			count_refusal(a, rep->server_error);
		fmt_error(a->r->error, sizeof(a->r->error), "Schedule of key %" PRIu64 ": %s",
			  rep->key, rep->message);
		return;
	}
	if (rep->key == POISON_KEY || rep->key >= x->cap)
		return;
	x->state[rep->key] = 1;
	x->r->scheduled++;
}

/* Schedule the poison fire, due at once; false on a failure (said). */
static bool crash_poison(struct actx *a, struct crash *x)
{
	struct bwc_timer t = { .key = POISON_KEY };

	x->poison_at = load_now_ns();
	if (bwc_send_schedule(x->producer, &t, crash_reply, a) == 0)
		return true;
	fmt_error(a->r->error, sizeof(a->r->error), "the poison's Schedule: %s",
		  bwc_errmsg(x->producer));
	return false;
}

/* One cumulative Ack for the ordinary fires handled so far. */
static void crash_ack(struct actx *a, struct crash *x)
{
	Bitwheel__V1__Envelope env = BITWHEEL__V1__ENVELOPE__INIT;
	Bitwheel__V1__Ack ack = BITWHEEL__V1__ACK__INIT;
	size_t len = 0;

	if (!x->last || x->consumer.fd < 0)
		return;
	ack.has_delivery = ack.has_cumulative = ack.cumulative = 1;
	ack.delivery = x->last;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_ACK;
	env.ack = &ack;
	if (pack(&a->buf, &len, &a->buf_cap, &env))
		raw_write(x->consumer.fd, a->buf, len);
	x->last = 0;
}

/* The consumer crashes: its connection closed at once, the restart
 * CRASH_RESTART_NS later. */
static void crash_down(struct crash *x)
{
	rawc_close(&x->consumer);
	x->reopen_at = load_now_ns() + CRASH_RESTART_NS;
	x->r->restarts++;
	x->batch = false;
	x->last = 0;
}

static void crash_up(struct actx *a, struct crash *x)
{
	x->consumer.refused = false;
	x->consumer.fd = raw_open(a, consumer_hello(a, CRASH_SESSION, 0, 0, false, false),
				  "the consumer of " CRASH_SESSION);
	x->reopen_at = 0;
}

/* A frame to the consumer: every ordinary fire handled (acknowledged after
 * the read), the poison one a crash. */
static void crash_frame(struct actx *a, void *arg, struct rawc *c,
			const Bitwheel__V1__Envelope *env)
{
	struct crash *x = arg;
	const Bitwheel__V1__Fired *f = env->fired;

	if (env->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR) {
		count_refusal(a, (int)env->error->code);
		c->refused = true;
		return;
	}
	if (env->body_case != BITWHEEL__V1__ENVELOPE__BODY_FIRED)
		return;
	a->r->fires++;
	a->r->redelivered += f->redelivered;
	if (f->key == POISON_KEY) {
		/* The fires before it were handled: a handler acknowledges
		 * as it goes, then dies on this one. */
		x->r->poisoned++;
		crash_ack(a, x);
		crash_down(x);
		return;
	}
	if (f->key < x->cap && x->state[f->key] == 1) {
		x->state[f->key] = 2;
		x->r->acked++;
	}
	x->last = f->delivery;
	x->batch = true;
}

/* A frame to the watcher of CRASH_DEAD: the poison fire's arrival, and
 * the next one scheduled. */
static void crash_dead_frame(struct actx *a, void *arg, struct rawc *c,
			     const Bitwheel__V1__Envelope *env)
{
	struct crash *x = arg;
	const Bitwheel__V1__Fired *f = env->fired;
	uint64_t took;

	if (env->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR) {
		count_refusal(a, (int)env->error->code);
		c->refused = true;
		return;
	}
	if (env->body_case != BITWHEEL__V1__ENVELOPE__BODY_FIRED || f->key != POISON_KEY ||
	    !x->poison_at)
		return;
	if (!f->dead_letter) {
		fmt_error(a->r->error, sizeof(a->r->error),
			  "the poison fire came to " CRASH_DEAD " without its history");
		return;
	}
	took = load_now_ns() - x->poison_at;
	if (!x->r->dead++)
		x->r->dead_first_ns = took;
	if (took > x->r->dead_max_ns)
		x->r->dead_max_ns = took;
	x->r->dead_deliveries = f->dead_letter->deliveries;
	crash_poison(a, x);
}

/* Room in x->state for key; false out of memory (said). */
static bool crash_room(struct actx *a, struct crash *x, uint64_t key)
{
	uint64_t ncap = x->cap ? x->cap : 4096;
	uint8_t *n;

	if (key < x->cap)
		return true;
	while (ncap <= key)
		ncap *= 2;
	if (!(n = realloc(x->state, ncap))) {
		fmt_error(a->r->error, sizeof(a->r->error), "out of memory");
		return false;
	}
	memset(n + x->cap, 0, ncap - x->cap);
	x->state = n;
	x->cap = ncap;
	return true;
}

/* The build-up: the session's producer and policy, the consumer (and
 * ATK_POISON's watcher) connected. */
static bool build_crash(struct actx *a, struct crash *x)
{
	struct bwc_policy pol;

	if (!a->have_lim) {
		fmt_error(a->r->error, sizeof(a->r->error), "no limits from the daemon");
		return false;
	}
	x->bufcap = a->lim.max_frame_bytes + BWP_HEADER_SIZE;
	x->consumer = (struct rawc){ .fd = -1, .buf = malloc(x->bufcap) };
	x->watcher = (struct rawc){ .fd = -1, .buf = malloc(x->bufcap) };
	if (!x->consumer.buf || !x->watcher.buf || !crash_room(a, x, 0)) {
		fmt_error(a->r->error, sizeof(a->r->error), "out of memory");
		return false;
	}
	if (!(x->producer = aconnect(a, CRASH_SESSION, BWC_ROLE_PRODUCER, -1)))
		return false;
	a->r->sessions = 1;
	if (bwc_set_policy(x->producer, a->o->max_deliveries ? (int64_t)a->o->max_deliveries :
			   BWC_POLICY_KEEP, NULL, &pol) != 0) {
		fmt_error(a->r->error, sizeof(a->r->error), "SetPolicy: %s",
			  bwc_errmsg(x->producer));
		return false;
	}
	x->r->max_deliveries = pol.max_deliveries;
	crash_up(a, x);
	a->r->conns = 2;
	if (x->k == ATK_POISON) {
		x->watcher.fd = raw_open(a, consumer_hello(a, CRASH_DEAD, 0, 0, true, false),
					 "the watcher of " CRASH_DEAD);
		a->r->sessions++;
		a->r->conns++;
	}
	return !a->r->error[0];
}

/* Ordinary Schedules as they come due, one every CRASH_INTERVAL_NS from
 * t0; false on a failure (said). */
static bool crash_schedule(struct actx *a, struct crash *x, uint64_t now)
{
	while (x->t0 + x->next_key * CRASH_INTERVAL_NS <= now) {
		struct bwc_timer t = { .key = x->next_key, .absolute = true,
				       .when_ns = x->t0 + x->next_key * CRASH_INTERVAL_NS +
						  CRASH_DELAY_NS };
		int rc;

		if (!crash_room(a, x, t.key))
			return false;
		a->r->ops++;
		rc = bwc_send_schedule(x->producer, &t, crash_reply, a);
		if (rc == BWC_EAGAIN)
			break;
		if (rc != 0) {
			fmt_error(a->r->error, sizeof(a->r->error), "Schedule: %s",
				  bwc_errmsg(x->producer));
			return false;
		}
		x->next_key++;
	}
	return true;
}

/* The active phase: the stream of ordinary fires, the consumer crashing
 * and restarting, until told to stop. */
static void run_crash(struct actx *a, struct crash *x)
{
	uint64_t end, now;

	x->t0 = load_now_ns();
	x->next_key = 1;
	if (x->k == ATK_POISON && !crash_poison(a, x))
		return;
	for (;;) {
		struct pollfd p[4] = {
			{ .fd = a->ch->stop_fd, .events = POLLIN },
			{ .fd = bwc_fd(x->producer), .events = bwc_poll_events(x->producer) },
			{ .fd = x->consumer.fd, .events = POLLIN },
			{ .fd = x->watcher.fd, .events = POLLIN },
		};
		uint64_t wake;

		now = load_now_ns();
		if (!crash_schedule(a, x, now))
			break;
		if (x->reopen_at && now >= x->reopen_at)
			crash_up(a, x);
		wake = x->t0 + x->next_key * CRASH_INTERVAL_NS;
		if (x->reopen_at && x->reopen_at < wake)
			wake = x->reopen_at;
		if (poll(p, 4, wake > now ? (int)((wake - now) / MS) + 1 : 0) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		if (p[1].revents && bwc_dispatch(x->producer) != 0) {
			fmt_error(a->r->error, sizeof(a->r->error), "the producer: %s",
				  bwc_errmsg(x->producer));
			break;
		}
		if (p[2].revents) {
			rawc_read(a, &x->consumer, x->bufcap, CRASH_SESSION, crash_frame, x);
			crash_ack(a, x);
			if (x->k == ATK_CRASHLOOP && x->batch)
				crash_down(x);
		}
		if (p[3].revents)
			rawc_read(a, &x->watcher, x->bufcap, CRASH_DEAD, crash_dead_frame, x);
	}
	end = load_now_ns();
	x->r->active_s = (double)(end - x->t0) / 1e9;
	for (uint64_t k = 1; k < x->next_key && k < x->cap; k++)
		if (x->state[k] == 1 &&
		    x->t0 + k * CRASH_INTERVAL_NS + CRASH_DELAY_NS + CRASH_STUCK_NS < end)
			x->r->stuck++;
}

static void crash_free(struct crash *x)
{
	rawc_close(&x->consumer);
	rawc_close(&x->watcher);
	free(x->consumer.buf);
	free(x->watcher.buf);
	free(x->state);
	bwc_free(x->producer);
}

/* ---- output memory, shares ---------------------------------------------- */

/* The uid's bytes (Stats.uid_bytes) into a->r->bytes, on an anonymous
 * connection kept in cs for run_scheduling. */
static void own_bytes(struct actx *a, struct conns *cs)
{
	struct bwc_client *c = aconnect(a, NULL, BWC_ROLE_DEFAULT, -1);
	struct bwc_stats st;

	if (!c)
		return;
	if (bwc_stats(c, &st) == 0)
		a->r->bytes = st.uid_bytes;
	else
		fmt_error(a->r->error, sizeof(a->r->error), "Stats: %s", bwc_errmsg(c));
	if (!conns_add(cs, c))
		bwc_free(c);
}

/* ATK_OUTPUT's named sessions (each holds --max-timers); their consumers,
 * which never read, take all of the uid's connections but two (a
 * producer, then Stats), at least one a session. */
#define OUTPUT_SESSIONS 4
/* Its fires come due this long after the build-up starts, and that much
 * more per timer of the uid's budget: after the filling (some 5 s for
 * the default budget's 226,719 on a loaded 2-core machine), so that the
 * output comes on top of a full budget. */
#define OUTPUT_LEAD_PER_TIMER_NS 40000u
/* Its Schedules in the active phase, one this often. */
#define OUTPUT_EVERY_MS 100

/*
 * ATK_OUTPUT's build-up: consumers of the sessions in turn, of the
 * largest window, on raw sockets that never read; then each session
 * filled in turn (by a producer closed after it) with payload fires due
 * at one instant, until the uid's bytes budget refuses or the sessions
 * are full; then, once the fires had time to go out, the uid's bytes.
 */
static void build_output(struct actx *a, struct conns *cs)
{
	struct fill_spec sp = { .absolute = true, .payload = true };
	uint64_t budget = a->lim.max_timers_per_uid ? a->lim.max_timers_per_uid :
			  a->lim.max_timers;
	struct bwc_client *c;
	char name[32];
	uint64_t n;

	if (!a->have_lim) {
		fmt_error(a->r->error, sizeof(a->r->error), "no limits from the daemon");
		return;
	}
	n = a->lim.max_clients_per_uid > OUTPUT_SESSIONS + 2 ?
	    a->lim.max_clients_per_uid - 2 : OUTPUT_SESSIONS;
	for (uint64_t i = 0; i < n && i < a->o->max_conns; i++) {
		int fd;

		snprintf(name, sizeof(name), "out-%u", (unsigned)(i % OUTPUT_SESSIONS));
		fd = raw_open(a, consumer_hello(a, name, a->lim.max_window, 0, false, false),
			      name);
		if (fd < 0 || !conns_add_raw(cs, fd)) {
			if (fd >= 0)
				close(fd);
			return;
		}
	}
	a->r->conns = cs->nraw;
	sp.when_ns = load_now_ns() + (uint64_t)(a->o->slow ? a->o->slow : 1) *
		     (DLV_LEAD_NS + budget * OUTPUT_LEAD_PER_TIMER_NS);
	for (unsigned s = 0; s < OUTPUT_SESSIONS && !a->r->refused[EC(OVER_BUDGET)] &&
	     a->r->timers < a->o->max_timers; s++) {
		snprintf(name, sizeof(name), "out-%u", s);
		if (!(c = aconnect(a, name, BWC_ROLE_PRODUCER, -1)))
			return;
		a->r->sessions++;
		fill(a, c, 0, a->o->max_timers - a->r->timers, &sp);
		bwc_free(c);
	}
	/* The fires go out as far as the sockets and the budget let them. */
	usleep((useconds_t)((sp.when_ns > load_now_ns() ? sp.when_ns - load_now_ns() : 0) / 1000 +
			    (a->o->slow ? a->o->slow : 1) * 1000000u));
	own_bytes(a, cs);
}

/* ATK_SHARE: the other uids', each filling what it may before the
 * attacker does (ATK_SHARE_UID(i)). */
#define SHARE_HELPERS 3

/* What build_memory left of a uid's room, filled with timers without a
 * payload in its last session, so that the uid leaves less than one of
 * them (some 160 bytes). */
static void squeeze(struct actx *a)
{
	struct bwc_client *c;
	char name[32];

	if (!a->r->sessions)
		return;
	snprintf(name, sizeof(name), "mem-%u", (unsigned)(a->r->sessions - 1));
	if (!(c = aconnect(a, name, BWC_ROLE_PRODUCER, -1)))
		return;
	fill(a, c, 1u << 30, a->o->max_timers, &in_an_hour);
	bwc_free(c);
}

/*
 * ATK_SHARE's build-up: SHARE_HELPERS other uids in turn, each in a child
 * of its own, fill sessions with payload timers due in an hour
 * (build_memory), squeeze, and leave them detached; then the attacker
 * does, as its own uid, until refused, and reads its bytes.
 */
static void build_share(struct actx *a, struct conns *cs)
{
	for (unsigned i = 0; i < SHARE_HELPERS; i++) {
		uid_t uid = ATK_SHARE_UID(a->o->uid, i);
		pid_t pid;
		int st;

		fflush(NULL);
		pid = fork();
		if (pid < 0) {
			fmt_error(a->r->error, sizeof(a->r->error), "fork: %s", strerror(errno));
			return;
		}
		if (pid == 0) {
			become(uid);
			build_memory(a);
			squeeze(a);
			if (a->r->error[0])
				fprintf(stderr, "attack share: uid %ld: %s\n", (long)uid, a->r->error);
			_exit(a->r->error[0] || !a->r->timers ? 1 : 0);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fmt_error(a->r->error, sizeof(a->r->error),
				  "the share attack's uid %ld failed to fill its own", (long)uid);
			return;
		}
	}
	become(a->o->uid);
	build_memory(a);
	squeeze(a);
	own_bytes(a, cs);
}

/* ATK_OUTPUT's and ATK_SHARE's attack: a Schedule now and then, refused
 * while the uid holds all it may (its timers, or its bytes with the
 * output counted; its share). */
static void run_scheduling(struct actx *a, struct conns *cs)
{
	struct fill_spec sp = { .when_ns = HOUR, .payload = true };
	uint64_t key = 1u << 30;

	if (!cs->n)
		return;
	do
		fill(a, cs->c[cs->n - 1], key++, 1, &sp);
	while (!stopping(a, OUTPUT_EVERY_MS));
}

/* Tell the caller we are at our budgets (once); false if it is gone. */
static bool ready(struct actx *a)
{
	char one = 'r';

	if (a->readied)
		return true;
	a->readied = true;
	return write(a->ch->report_fd, &one, 1) == 1;
}

static void attack_run(enum atk_kind k, struct actx *a)
{
	struct conns cs = { 0 };
	struct dlv d = { .k = k };
	struct crash x = { .k = k, .r = &a->r->crash,
			   .consumer.fd = -1, .watcher.fd = -1 };
	uint64_t t0 = load_now_ns();
	unsigned next = 0;
	uint8_t *buf = NULL;
	struct bwc_client *probe = aconnect(a, NULL, BWC_ROLE_DEFAULT, -1);
	uint64_t *took = NULL;

	/* The limits, and a payload as big as they allow (or as asked). */
	bwc_free(probe);
	a->payload_len = a->o->payload ? a->o->payload :
			 a->have_lim ? a->lim.max_payload_bytes : 1024;
	a->payload = malloc(a->payload_len ? a->payload_len : 1);
	if (!a->payload)
		goto out;
	memset(a->payload, 'A', a->payload_len);
	switch (k) {
	case ATK_MEMORY:
		build_memory(a);
		break;
	case ATK_BURST:
		if (!(took = build_burst(a, &cs)))
			goto out;
		break;
	case ATK_CPU:
		build_cpu(a);
		break;
	case ATK_STATS:
		hold_connections(a, &cs);
		probe_refused(a, NULL);
		break;
	case ATK_FRAMES:
		buf = malloc((a->have_lim ? a->lim.max_frame_bytes : 65536) + 65536);
		if (!buf)
			goto out;
		frames_round(a, buf, a->have_lim ? a->lim.max_frame_bytes : 65536);
		break;
	case ATK_EXPIRE:
		expire_round(a, &next);
		break;
	case ATK_SILENT:
		open_batches(a, &cs, silent_one);
		break;
	case ATK_PIPELINE:
		open_batches(a, &cs, pipeline_one);
		break;
	case ATK_SQUAT:
		build_squat(a, &cs);
		break;
	case ATK_LOGS:
		hold_connections(a, &cs);
		probe_refused(a, NULL);
		for (int i = 0; i < 2 && cs.n; i++)
			bwc_free(cs.c[--cs.n]);
		break;
	case ATK_LIST:
		build_list(a, &cs);
		break;
	case ATK_REDELIVER:
	case ATK_CHURN:
	case ATK_REATTACH:
	case ATK_COALESCE:
	case ATK_SINGLEACK:
		build_delivery(a, &d);
		break;
	case ATK_POISON:
	case ATK_CRASHLOOP:
		a->crash = &x;
		if (!build_crash(a, &x))
			goto out;
		break;
	case ATK_OUTPUT:
		build_output(a, &cs);
		break;
	case ATK_SHARE:
		build_share(a, &cs);
		break;
	default:
		break;
	}
	a->r->ready_s = (double)(load_now_ns() - t0) / 1e9;
	if (!ready(a))
		goto out;
	switch (k) {
	case ATK_STATS:
		run_stats(a, &cs);
		break;
	/* At least one round each, even when a loaded machine let the
	 * victim finish first: the attack's refusal must be seen. */
	case ATK_FRAMES:
		do
			frames_round(a, buf, a->have_lim ? a->lim.max_frame_bytes : 65536);
		while (!stopping(a, 0));
		break;
	case ATK_EXPIRE:
		do
			expire_round(a, &next);
		while (!stopping(a, 20));
		break;
	case ATK_SILENT:
		run_silent(a, &cs);
		break;
	case ATK_PIPELINE:
		run_pipeline(a, &cs);
		break;
	case ATK_LIST:
		run_list(a, &cs);
		break;
	case ATK_SQUAT:
		run_squat(a, &cs);
		break;
	case ATK_LOGS:
		do
			logs_round(a);
		while (!stopping(a, 0));
		break;
	case ATK_REDELIVER:
		run_redeliver(a, &d);
		break;
	case ATK_CHURN:
		run_churn(a, &d);
		break;
	case ATK_REATTACH:
		run_reattach(a, &d);
		break;
	case ATK_COALESCE:
		run_coalesce(a, &d);
		break;
	case ATK_SINGLEACK:
		run_singleack(a, &d);
		break;
	case ATK_POISON:
	case ATK_CRASHLOOP:
		run_crash(a, &x);
		break;
	case ATK_BURST:
		run_burst(a, &cs, took);
		break;
	case ATK_OUTPUT:
	case ATK_SHARE:
		run_scheduling(a, &cs);
		break;
	default:
		stopping(a, -1);
		break;
	}
out:
	free(took);
	conns_free(&cs);
	dlv_free(&d);
	crash_free(&x);
	free(buf);
	free(a->buf);
	free(a->payload);
}

int atk_attack_start(enum atk_kind k, const struct atk_attack_opts *opts,
		     struct atk_child *out, int timeout_ms, char *err, size_t errlen)
{
	struct pollfd p;
	char one;
	/* The share attack's child drops to its uids itself. */
	int rc = fork_child(k == ATK_SHARE ? 0 : opts->uid, 0, 0, out);

	if (rc != 0) {
		snprintf(err, errlen, "fork: %s", strerror(-rc));
		return -1;
	}
	if (out->pid == 0) {
		struct atk_attack_result r = { 0 };
		struct actx a = { .o = opts, .r = &r, .ch = out };

		attack_run(k, &a);
		/* Ready or not, the byte comes before the report. */
		ready(&a);
		report(out, &r, sizeof(r));
	}
	p.fd = out->report_fd;
	p.events = POLLIN;
	if (poll(&p, 1, timeout_ms) == 1 && read(out->report_fd, &one, 1) == 1)
		return 0;
	err[0] = '\0';
	{
		struct atk_attack_result r = { 0 };

		collect(out, 1000, &r, sizeof(r), err, errlen);
		fmt_error(err, errlen, "the %s attacker was not ready within %d ms%s%s",
			  atk_name(k), timeout_ms, r.error[0] ? ": " : "", r.error);
	}
	return -1;
}

int atk_attack_stop(struct atk_child *ch, int timeout_ms,
		    struct atk_attack_result *out)
{
	memset(out, 0, sizeof(*out));
	close(ch->stop_fd);
	ch->stop_fd = -1;
	return collect(ch, timeout_ms, out, sizeof(*out), out->error, sizeof(out->error));
}

long atk_count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	long n = 0;
	int ch;

	if (!f)
		return -1;
	while ((ch = getc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}
