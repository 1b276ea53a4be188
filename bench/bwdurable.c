/*
 * bwdurable.c - the durability benchmark's helpers (bench/run-durable.sh):
 * the parts of "how much does --state-dir cost" that bwload does not
 * measure.
 *
 *   bwdurable fill  --socket S [--sessions N] [--timers T] [--delay-ms D]
 *                   [--spread-ms W] [--depth K] [--name P]
 *       T timers (default 1,000,000) over N named sessions P-0 .. P-(N-1)
 *       (default 16), all N connections at once from one process, each
 *       with K requests in flight (default 256): oneshot timers due in
 *       D .. D+W ms (default 1 h .. 2 h), keys 0 .. T/N-1 per session.
 *       Checks every Schedule was accepted, prints the rate and the
 *       daemon's Stats, then closes (the sessions stay, detached).
 *
 *   bwdurable ready --socket S --since NS [--pid P] [--timeout-ms M]
 *                   [--expect T]
 *       Until a connection to S answers a Stats (connect, Hello, Stats,
 *       each retried every millisecond): prints the wall time since NS
 *       (CLOCK_REALTIME ns, e.g. `date +%s%N` taken before the daemon was
 *       started), the pending timers and sessions.  With --expect, exits 3
 *       if the daemon holds a different number of pending timers; with
 *       --pid, gives up as soon as process P is gone.
 *
 *   bwdurable stall --socket S --state-dir DIR [--duration-ms D]
 *                   [--rate R] [--depth K] [--name P] [--margin-ms M]
 *       For D ms (default 10 s): a probe client (anonymous session) doing
 *       back-to-back Stats round trips; a churn client (named session P)
 *       doing paced Schedule + Cancel of far timers at R requests/s
 *       (default 20,000) with up to K in flight (default 16), which grows
 *       the journal so that a small --journal-max starts snapshots.  The
 *       snapshot windows are the daemon's own word, read off the probe's
 *       Stats replies: when `snapshots` has grown between two replies,
 *       one was installed after the daemon answered the first (not
 *       before that Stats was sent) and before the second was read, and
 *       it had begun (the fork) snapshot_ns_last before it was installed;
 *       the window runs from the first Stats' send less snapshot_ns_last
 *       to the second's reply, so that it holds the real one, one round
 *       trip wider at most.  A round trip is "during" a snapshot if
 *       [send, reply] meets a window widened by M ms (default 0) before
 *       it.  Prints both clients' round-trip percentiles during and
 *       outside the windows, and the windows.  Those counters are root's
 *       alone (Stats' metrics): run it as root.  DIR must be the daemon's
 *       --state-dir (checked to be a directory).
 *
 *   bwdurable synclat --state-dir DIR [--syncs N] [--bytes B]
 *       The device's own cost of what --fsync=batch does per commit: N
 *       times (default 1,000) append B bytes (default 200, a lone
 *       Schedule's records and more) to a new file in DIR and
 *       fdatasync(2) it, one after another, as the daemon's sync thread
 *       does; prints the percentiles of each fdatasync's wall time and
 *       the process's CPU time (user + system) per sync, then removes
 *       the file.  Then the same writes into room allocated ahead with
 *       fallocate(2), its extents unwritten (as the journal did until
 *       2026-12), and into room written with zeros and synced first (as
 *       the journal does while its file system has room): a line each
 *       ("appends", "writes into fallocated room", "writes into zeroed
 *       room").  The last is the floor a lone request's round trip
 *       cannot beat.
 *
 *   bwdurable syncs --socket S
 *       One line of the daemon's journal counters, for a phase's before
 *       and after (run-durable.sh): syncs=N (fdatasyncs done), sync_ns=T
 *       (their time), records=R (journal records the syncs made durable)
 *       and requests=Q (Schedule, Cancel and Ack requests read, each of
 *       which a named session journals).  Root's alone (Stats' metrics).
 *
 * Every loop is bounded in time; a child that overruns is killed.
 */
#define _GNU_SOURCE
#include "bwload.h"

#include <bitwheel-client.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000ull

struct opts {
	const char *socket, *state_dir, *name;
	int sessions, depth;
	uint64_t timers, delay_ms, spread_ms, since, timeout_ms, duration_ms,
		 rate, margin_ms, syncs, bytes;
	int64_t expect;
	long pid;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("bwdurable: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static uint64_t num(const char *opt, const char *arg)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end) {
		fprintf(stderr, "bwdurable: --%s: '%s' is not a number\n", opt, arg);
		exit(2);
	}
	return v;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- fill ------------------------------------------------------------------- */

struct filler {
	struct bwc_client *c;
	uint64_t next, want, sent, replies, errors;
	int inflight;
	char error[200];
};

static void on_fill_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct filler *f = arg;

	(void)c;
	f->inflight--;
	f->replies++;
	if (r->status != 0 && f->errors++ == 0)
		snprintf(f->error, sizeof f->error, "key %" PRIu64 ": %s %s", r->key,
			 bwc_server_error_name(r->server_error), r->message);
}

static void print_stats(struct bwc_client *c, const char *what)
{
	struct bwc_stats st;

	if (bwc_stats(c, &st) != 0)
		die("%s: stats: %s", what, bwc_errmsg(c));
	printf("%s: pending=%" PRIu64 " overflow=%" PRIu64 " sessions=%" PRIu64
	       " fired=%" PRIu64 " memory_bytes=%" PRIu64 "\n", what,
	       st.oneshot.pending + st.periodic.pending,
	       st.oneshot.overflow + st.periodic.overflow, st.sessions,
	       st.oneshot.fired + st.periodic.fired, st.memory_bytes);
}

static int cmd_fill(const struct opts *o)
{
	int n = o->sessions;
	struct filler *f = calloc((size_t)n, sizeof *f);
	struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
	uint64_t rs = 0x2545F4914F6CDD1DULL, t0, t1, deadline, per = o->timers / (uint64_t)n;
	uint64_t replies = 0, errors = 0;
	char name[80];

	if (!f || !pfd)
		die("out of memory");
	for (int i = 0; i < n; i++) {
		if (bwc_new(&f[i].c) != 0)
			die("out of memory");
		bwc_set_timeout(f[i].c, 30000000000LL);
		snprintf(name, sizeof name, "%s-%d", o->name, i);
		if (bwc_connect(f[i].c, o->socket, name) != 0)
			die("connect %s: %s", name, bwc_errmsg(f[i].c));
		f[i].want = per + ((uint64_t)i < o->timers % (uint64_t)n ? 1 : 0);
	}
	t0 = load_now_ns();
	deadline = t0 + 600000 * MS;
	for (;;) {
		bool busy = false;

		for (int i = 0; i < n; i++) {
			struct filler *x = &f[i];

			while (x->inflight < o->depth && x->sent < x->want) {
				struct bwc_timer t = {
					.key = x->sent,
					.when_ns = o->delay_ms * MS + (o->spread_ms ?
						   load_rand(&rs) % (o->spread_ms * MS) : 0),
				};
				int rc = bwc_send_schedule(x->c, &t, on_fill_reply, x);

				if (rc == BWC_EAGAIN)
					break;
				if (rc != 0)
					die("send: %s", bwc_errmsg(x->c));
				x->sent++;
				x->inflight++;
			}
			busy |= x->replies < x->want;
			pfd[i] = (struct pollfd){ .fd = bwc_fd(x->c), .events = bwc_poll_events(x->c) };
		}
		if (!busy)
			break;
		if (load_now_ns() > deadline)
			die("fill: out of time");
		if (poll(pfd, (nfds_t)n, 1000) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		for (int i = 0; i < n; i++)
			if (pfd[i].revents && bwc_dispatch(f[i].c) != 0)
				die("dispatch: %s", bwc_errmsg(f[i].c));
	}
	t1 = load_now_ns();
	for (int i = 0; i < n; i++) {
		replies += f[i].replies;
		errors += f[i].errors;
		if (f[i].errors)
			fprintf(stderr, "bwdurable: session %d: %" PRIu64 " refused, first: %s\n",
				i, f[i].errors, f[i].error);
	}
	printf("fill: %" PRIu64 " schedules over %d named sessions (%s-0..%d), depth %d each, "
	       "in %.3f s: %.0f/s, %" PRIu64 " refused\n", replies, n, o->name, n - 1,
	       o->depth, (double)(t1 - t0) / 1e9, (double)replies * 1e9 / (double)(t1 - t0),
	       errors);
	print_stats(f[0].c, "fill");
	for (int i = 0; i < n; i++)
		bwc_free(f[i].c);
	free(f);
	free(pfd);
	return errors ? 1 : 0;
}

/* ---- ready -------------------------------------------------------------------- */

static int cmd_ready(const struct opts *o)
{
	uint64_t end = load_now_ns() + o->timeout_ms * MS;
	unsigned tries = 0;

	for (;;) {
		struct bwc_client *c;
		struct bwc_stats st;
		int rc;

		tries++;
		if (bwc_new(&c) != 0)
			die("out of memory");
		bwc_set_timeout(c, (int64_t)o->timeout_ms * (int64_t)MS);
		rc = bwc_connect(c, o->socket, NULL);
		if (rc == 0)
			rc = bwc_stats(c, &st);
		if (rc == 0) {
			uint64_t now = realtime_ns(), pending = st.oneshot.pending + st.periodic.pending;

			printf("ready: answered a Stats %.1f ms after start (%u attempts): pending=%"
			       PRIu64 " sessions=%" PRIu64 " fired=%" PRIu64 " queued=%" PRIu64 "\n",
			       o->since ? (double)(now - o->since) / 1e6 : 0.0, tries, pending,
			       st.sessions, st.oneshot.fired + st.periodic.fired, st.queued);
			bwc_free(c);
			if (o->expect >= 0 && pending != (uint64_t)o->expect) {
				fprintf(stderr, "bwdurable: ready: %" PRIu64 " timers pending, expected %"
					PRId64 "\n", pending, o->expect);
				return 3;
			}
			return 0;
		}
		bwc_free(c);
		if (o->pid > 0 && kill((pid_t)o->pid, 0) != 0 && errno == ESRCH)
			die("ready: the daemon (pid %ld) is gone", o->pid);
		if (load_now_ns() > end)
			die("ready: %s did not answer within %" PRIu64 " ms", o->socket, o->timeout_ms);
		load_sleep_until(load_now_ns() + MS);
	}
}

/* ---- stall ---------------------------------------------------------------------- */

#define MAX_SAMPLES (4u << 20)
#define MAX_WINDOWS 256

struct sample {
	uint64_t sent, rtt;
};

/* A snapshot, fork to installed, as the probe's Stats told it (above). */
struct window {
	uint64_t start, end;
};

struct samples {
	uint64_t n, errors;
	char error[200];
	int nw;                /* the probe's: snapshot windows seen        */
	struct window w[MAX_WINDOWS];
	struct sample s[];
};

static struct samples *shared_samples(void)
{
	size_t len = sizeof(struct samples) + (size_t)MAX_SAMPLES * sizeof(struct sample);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	return p;
}

static void record(struct samples *s, uint64_t sent, uint64_t now)
{
	if (s->n < MAX_SAMPLES)
		s->s[s->n++] = (struct sample){ sent, now - sent };
}

/* Back-to-back Stats on an anonymous session until end; each snapshot
 * installed meanwhile is a window (see the top). */
static int probe(const struct opts *o, uint64_t start, uint64_t end, struct samples *out)
{
	struct bwc_client *c;
	struct bwc_stats st;
	struct bwc_metrics m;
	uint64_t snapshots = 0, prev_sent = 0;
	bool first = true;

	if (bwc_new(&c) != 0 || (bwc_set_timeout(c, 30000000000LL), bwc_connect(c, o->socket, NULL)) != 0) {
		snprintf(out->error, sizeof out->error, "probe: connect: %s", c ? bwc_errmsg(c) : "ENOMEM");
		return 1;
	}
	load_sleep_until(start);
	for (uint64_t now = load_now_ns(); now < end; ) {
		uint64_t t = now;

		if (bwc_metrics(c, &st, &m) != 0) {
			snprintf(out->error, sizeof out->error, "probe: stats: %s", bwc_errmsg(c));
			out->errors++;
			break;
		}
		now = load_now_ns();
		record(out, t, now);
		if (!m.present) {
			snprintf(out->error, sizeof out->error,
				 "probe: the daemon's Stats carry no metrics (root's alone): no snapshot can be seen");
			out->errors++;
			break;
		}
		if (!first && m.snapshots > snapshots && out->nw < MAX_WINDOWS)
			out->w[out->nw++] = (struct window){
				prev_sent - m.snapshot_ns_last, now };
		first = false;
		snapshots = m.snapshots;
		prev_sent = t;
	}
	bwc_free(c);
	return out->errors ? 1 : 0;
}

struct churn {
	struct samples *out;
	uint64_t ring[4096];
	unsigned head, inflight, depth;
	uint64_t key;
};

static void on_churn_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct churn *ch = arg;
	uint64_t now = load_now_ns();

	(void)c;
	if (ch->inflight) {
		record(ch->out, ch->ring[ch->head], now);
		ch->head = (ch->head + 1) % ch->depth;
		ch->inflight--;
	}
	if (r->status != 0 && ch->out->errors++ == 0)
		snprintf(ch->out->error, sizeof ch->out->error, "churn: %s %s",
			 bwc_server_error_name(r->server_error), r->message);
}

/* Paced Schedule k / Cancel k pairs of far timers on a named session. */
static int churn(const struct opts *o, uint64_t start, uint64_t end, struct samples *out)
{
	struct churn ch = { .out = out, .depth = (unsigned)o->depth };
	struct bwc_client *c;
	char name[80];
	uint64_t sent = 0;

	snprintf(name, sizeof name, "%s-churn", o->name);
	if (bwc_new(&c) != 0 || (bwc_set_timeout(c, 30000000000LL), bwc_connect(c, o->socket, name)) != 0) {
		snprintf(out->error, sizeof out->error, "churn: connect: %s", c ? bwc_errmsg(c) : "ENOMEM");
		return 1;
	}
	load_sleep_until(start);
	for (uint64_t now = load_now_ns(); now < end || ch.inflight; now = load_now_ns()) {
		uint64_t allowed = 1 + (uint64_t)((double)(now - start) * (double)o->rate / 1e9);
		struct pollfd pfd;

		if (now > end + 30000 * MS) {
			snprintf(out->error, sizeof out->error, "churn: %u replies missing", ch.inflight);
			out->errors++;
			break;
		}
		while (now < end && ch.inflight < ch.depth && sent < allowed) {
			int rc;

			if (sent % 2 == 0) {
				struct bwc_timer t = { .key = ch.key, .when_ns = 3600000 * MS };

				rc = bwc_send_schedule(c, &t, on_churn_reply, &ch);
			} else {
				rc = bwc_send_cancel(c, ch.key++, on_churn_reply, &ch);
			}
			if (rc == BWC_EAGAIN)
				break;
			if (rc != 0) {
				snprintf(out->error, sizeof out->error, "churn: send: %s", bwc_errmsg(c));
				out->errors++;
				goto done;
			}
			ch.ring[(ch.head + ch.inflight) % ch.depth] = now;
			ch.inflight++;
			sent++;
		}
		pfd = (struct pollfd){ .fd = bwc_fd(c), .events = bwc_poll_events(c) };
		if (poll(&pfd, 1, 1) > 0 && bwc_dispatch(c) != 0) {
			snprintf(out->error, sizeof out->error, "churn: dispatch: %s", bwc_errmsg(c));
			out->errors++;
			break;
		}
	}
done:
	bwc_free(c);
	return out->errors ? 1 : 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank quantile of a sorted array. */
static uint64_t q(const uint64_t *v, size_t n, double p)
{
	size_t i;

	if (!n)
		return 0;
	i = (size_t)(p * (double)n + 0.999999);
	return v[i ? (i > n ? n - 1 : i - 1) : 0];
}

static bool during(const struct sample *s, const struct window *w, int nw, uint64_t margin)
{
	for (int i = 0; i < nw; i++)
		if (s->sent <= w[i].end && s->sent + s->rtt >= w[i].start - margin)
			return true;
	return false;
}

static void report(const char *who, const struct samples *s, const struct window *w,
		   int nw, uint64_t margin)
{
	uint64_t *in = malloc(sizeof *in * (s->n + 1)), *out = malloc(sizeof *out * (s->n + 1));
	size_t ni = 0, no = 0;

	if (!in || !out)
		die("out of memory");
	for (uint64_t i = 0; i < s->n; i++) {
		if (during(&s->s[i], w, nw, margin))
			in[ni++] = s->s[i].rtt;
		else
			out[no++] = s->s[i].rtt;
	}
	qsort(in, ni, sizeof *in, cmp_u64);
	qsort(out, no, sizeof *out, cmp_u64);
	for (int k = 0; k < 2; k++) {
		const uint64_t *v = k ? in : out;
		size_t n = k ? ni : no;

		printf("| %s | %s | %zu | %.1f | %.1f | %.1f | %.1f | %.1f |\n", who,
		       k ? "during a snapshot" : "outside", n,
		       (double)q(v, n, 0.5) / 1e3, (double)q(v, n, 0.99) / 1e3,
		       (double)q(v, n, 0.999) / 1e3, (double)q(v, n, 0.9999) / 1e3,
		       n ? (double)v[n - 1] / 1e3 : 0.0);
	}
	free(in);
	free(out);
}


static int cmd_stall(const struct opts *o)
{
	struct samples *ps = shared_samples(), *cs = shared_samples();
	int ok = 0;
	uint64_t t0 = load_now_ns(), start = t0 + 200 * MS, end = start + o->duration_ms * MS;
	uint64_t margin = o->margin_ms * MS;
	struct stat sb;
	pid_t pid[2];

	if (stat(o->state_dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
		die("%s: not a directory", o->state_dir);
	fflush(NULL);
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			die("fork: %s", strerror(errno));
		if (pid[i] == 0) {
			alarm((unsigned)(o->duration_ms / 1000 + 60));
			_exit(i == 0 ? probe(o, start, end, ps) : churn(o, start, end, cs));
		}
	}
	for (int i = 0; i < 2; i++) {
		int st;

		if (waitpid(pid[i], &st, 0) == pid[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0)
			ok++;
	}
	printf("stall: %.1f s, %d snapshot windows (fork to installed by the daemon's Stats, ms from the start: length):",
	       (double)(end - start) / 1e9, ps->nw);
	for (int i = 0; i < ps->nw; i++)
		printf(" %.0f: %.1f ms;", ((double)ps->w[i].start - (double)start) / 1e6,
		       (double)(ps->w[i].end - ps->w[i].start) / 1e6);
	printf("\nstall: a round trip counts as during a snapshot if it meets a window "
	       "(one probe round trip wider than the snapshot at most) widened by %" PRIu64 " ms before its start\n",
	       o->margin_ms);
	printf("stall: probe %" PRIu64 " Stats round trips; churn %" PRIu64
	       " Schedule/Cancel at %" PRIu64 "/s paced, depth %d, named session %s-churn\n\n",
	       ps->n, cs->n, o->rate, o->depth, o->name);
	printf("| client | when | round trips | p50 µs | p99 µs | p99.9 µs | p99.99 µs | max µs |\n"
	       "|---|---|---:|---:|---:|---:|---:|---:|\n");
	report("probe: Stats, anonymous, depth 1", ps, ps->w, ps->nw, margin);
	report("churn: Schedule/Cancel, named", cs, ps->w, ps->nw, margin);
	if (ps->error[0])
		fprintf(stderr, "bwdurable: %s\n", ps->error);
	if (cs->error[0])
		fprintf(stderr, "bwdurable: %s\n", cs->error);
	return ok == 2 && ps->nw > 0 ? 0 : 1;
}

/* ---- synclat --------------------------------------------------------------------- */

static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* How a synclat series finds the file ahead of its writes. */
enum synclat_room { ROOM_NONE, ROOM_FALLOCATED, ROOM_ZEROED };

static const char *const synclat_name[] = {
	[ROOM_NONE] = "appends",
	[ROOM_FALLOCATED] = "writes into fallocated room",
	[ROOM_ZEROED] = "writes into zeroed room",
};

/* The room a series writes into, made and synced before it is timed
 * (zeros: a zeroed buffer of len's chunks, chunk bytes). */
static int synclat_prepare(int fd, enum synclat_room room, uint64_t len,
			   const uint8_t *zeros, size_t chunk)
{
	if (room == ROOM_FALLOCATED && fallocate(fd, 0, 0, (off_t)len) < 0)
		return -1;
	for (uint64_t at = 0; room == ROOM_ZEROED && at < len; at += chunk)
		if (pwrite(fd, zeros, chunk, (off_t)at) != (ssize_t)chunk)
			return -1;
	return room == ROOM_NONE ? 0 : fdatasync(fd);
}

static void synclat_series(const struct opts *o, enum synclat_room room)
{
	char path[4096];
	uint64_t *lat = calloc(o->syncs, sizeof(*lat)), c0, end;
	uint8_t *buf = calloc(1, o->bytes);
	int fd;

	if (!lat || !buf)
		die("synclat: out of memory");
	snprintf(path, sizeof(path), "%s/synclat.%ld", o->state_dir, (long)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		die("synclat: %s: %s", path, strerror(errno));
	/* buf is all zeros: the room's and every write's bytes. */
	if (synclat_prepare(fd, room, o->syncs * o->bytes, buf, o->bytes) < 0)
		die("synclat: room for %s in %s: %s", synclat_name[room], path, strerror(errno));
	end = load_now_ns() + o->timeout_ms * MS;
	c0 = cpu_ns();
	for (uint64_t i = 0; i < o->syncs; i++) {
		uint64_t t0;

		if (pwrite(fd, buf, o->bytes, (off_t)(i * o->bytes)) != (ssize_t)o->bytes)
			die("synclat: write %s: %s", path, strerror(errno));
		t0 = load_now_ns();
		if (fdatasync(fd) < 0)
			die("synclat: fdatasync %s: %s", path, strerror(errno));
		lat[i] = load_now_ns() - t0;
		if (load_now_ns() > end)
			die("synclat: %" PRIu64 " syncs took over %" PRIu64 " ms", i + 1,
			    o->timeout_ms);
	}
	c0 = cpu_ns() - c0;
	close(fd);
	unlink(path);
	qsort(lat, o->syncs, sizeof(*lat), cmp_u64);
	printf("synclat: %" PRIu64 " fdatasyncs of %" PRIu64 "-byte %s: p50_us=%.1f p90_us=%.1f p99_us=%.1f cpu_us_per_sync=%.1f\n",
	       o->syncs, o->bytes, synclat_name[room],
	       q(lat, o->syncs, 0.5) / 1e3, q(lat, o->syncs, 0.9) / 1e3,
	       q(lat, o->syncs, 0.99) / 1e3, (double)c0 / 1e3 / (double)o->syncs);
	free(lat);
	free(buf);
}

static int cmd_synclat(const struct opts *o)
{
	synclat_series(o, ROOM_NONE);
	synclat_series(o, ROOM_FALLOCATED);
	synclat_series(o, ROOM_ZEROED);
	return 0;
}

/* ---- syncs ------------------------------------------------------------------------ */

static int cmd_syncs(const struct opts *o)
{
	struct bwc_client *c;
	struct bwc_metrics m;
	struct bwc_histogram h[BWC_HISTOGRAMS];

	if (bwc_new(&c) != 0)
		die("out of memory");
	bwc_set_timeout(c, (int64_t)o->timeout_ms * (int64_t)MS);
	if (bwc_connect(c, o->socket, NULL) != 0 ||
	    bwc_metrics_histograms(c, NULL, &m, h, BWC_HISTOGRAMS) != 0)
		die("syncs: %s", bwc_errmsg(c));
	if (!m.present)
		die("syncs: no metrics from the daemon (they are root's)");
	printf("syncs=%" PRIu64 " sync_ns=%" PRIu64 " records=%" PRIu64 " requests=%" PRIu64 "\n",
	       m.journal_syncs, m.journal_sync_ns_total,
	       h[BWC_HISTOGRAM_JOURNAL_SYNC_RECORDS].sum_ns,
	       m.requests[3] + m.requests[4] + m.requests[12]);
	bwc_free(c);
	return 0;
}

/* ---- main ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fputs("usage: bwdurable fill  --socket S [--sessions N] [--timers T] [--delay-ms D]\n"
	      "                       [--spread-ms W] [--depth K] [--name P]\n"
	      "       bwdurable ready --socket S --since REALTIME_NS [--pid P] [--timeout-ms M]\n"
	      "                       [--expect T]\n"
	      "       bwdurable stall --socket S --state-dir DIR [--duration-ms D] [--rate R]\n"
	      "                       [--depth K] [--name P] [--margin-ms M]\n"
	      "       bwdurable synclat --state-dir DIR [--syncs N] [--bytes B]\n"
	      "       bwdurable syncs --socket S\n", f);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "state-dir", required_argument, NULL, 'S' },
		{ "name", required_argument, NULL, 'n' },
		{ "sessions", required_argument, NULL, 'N' },
		{ "timers", required_argument, NULL, 'T' },
		{ "delay-ms", required_argument, NULL, 'D' },
		{ "spread-ms", required_argument, NULL, 'W' },
		{ "depth", required_argument, NULL, 'k' },
		{ "since", required_argument, NULL, 'i' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "expect", required_argument, NULL, 'e' },
		{ "pid", required_argument, NULL, 'p' },
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "rate", required_argument, NULL, 'r' },
		{ "margin-ms", required_argument, NULL, 'm' },
		{ "syncs", required_argument, NULL, 'y' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .name = "bwdurable", .sessions = 16, .depth = 0,
			  .timers = 1000000, .delay_ms = 3600000, .spread_ms = 3600000,
			  .timeout_ms = 30000, .duration_ms = 10000, .rate = 20000,
			  .margin_ms = 0, .expect = -1, .syncs = 1000, .bytes = 200 };
	const char *cmd;
	int ch;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
		usage(stdout);
		return 0;
	}
	optind = 2;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 's': o.socket = optarg; break;
		case 'S': o.state_dir = optarg; break;
		case 'n': o.name = optarg; break;
		case 'N': o.sessions = (int)num("sessions", optarg); break;
		case 'T': o.timers = num("timers", optarg); break;
		case 'D': o.delay_ms = num("delay-ms", optarg); break;
		case 'W': o.spread_ms = num("spread-ms", optarg); break;
		case 'k': o.depth = (int)num("depth", optarg); break;
		case 'i': o.since = num("since", optarg); break;
		case 't': o.timeout_ms = num("timeout-ms", optarg); break;
		case 'e': o.expect = (int64_t)num("expect", optarg); break;
		case 'p': o.pid = (long)num("pid", optarg); break;
		case 'd': o.duration_ms = num("duration-ms", optarg); break;
		case 'r': o.rate = num("rate", optarg); break;
		case 'm': o.margin_ms = num("margin-ms", optarg); break;
		case 'y': o.syncs = num("syncs", optarg); break;
		case 'b': o.bytes = num("bytes", optarg); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!strcmp(cmd, "synclat")) {
		if (!o.state_dir || optind < argc || !o.syncs || o.syncs > 10000000 ||
		    !o.bytes || o.bytes > (64u << 20)) {
			usage(stderr);
			return 2;
		}
		setvbuf(stdout, NULL, _IOLBF, 0);
		return cmd_synclat(&o);
	}
	if (!o.socket || optind < argc || o.sessions < 1 || o.sessions > 1024 ||
	    strlen(o.name) > 40) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(cmd, "fill")) {
		if (!o.depth)
			o.depth = 256;
		return cmd_fill(&o);
	}
	if (!strcmp(cmd, "ready"))
		return cmd_ready(&o);
	if (!strcmp(cmd, "syncs"))
		return cmd_syncs(&o);
	if (!strcmp(cmd, "stall")) {
		if (!o.depth)
			o.depth = 16;
		if (!o.state_dir || o.depth > 4096 || !o.rate)
			die("stall: needs --state-dir, a --depth up to 4096 and a --rate");
		return cmd_stall(&o);
	}
	usage(stderr);
	return 2;
}
