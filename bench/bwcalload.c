/*
 * bwcalload.c - the daemon's CPU and memory with many calendar timers
 * across a daylight-saving change (issue 24, "Performance"; driven by
 * bench/run-calendar.sh, results in bench/results/calendar.md).
 *
 * It starts bitwheeld under tests/fakeclock.c (an LD_PRELOAD shim: the
 * daemon's CLOCK_REALTIME is the host's plus an offset read from a file,
 * and a CLOCK_REALTIME timerfd's step notice comes when a second file is
 * written), with the offset set so that the daemon's wall clock reads
 * --lead seconds before --at (a DST change of the daemon's TZ, --zone),
 * and TZ=--zone, so that specs without a zone are in that zone too.  The
 * wall clock then runs for real: the window crosses the change at the
 * host's pace, and every fire in it is an ordinary one (not a step's).
 * Then, in one process over poll(2):
 *
 *   1. schedule: --timers calendar timers of mixed specs (the forms x
 *      the zones below, some with jitter, fresh or fixed) over --sessions
 *      sessions, half named (a producer connection schedules, a consumer
 *      connection takes the fires and acknowledges each batch) and half
 *      anonymous (one connection, auto-ack), --depth requests in flight
 *      per connection: Schedules/s, the daemon's CPU per Schedule
 *      (/proc/PID/schedstat), its VmRSS and charged bytes per timer;
 *   2. plain: as many realtime_ns Schedules (a day ahead) and as many
 *      delay_ns ones on fresh anonymous connections, closed afterwards:
 *      the same figures for timers without a calendar, in the same run;
 *   3. window: until --after seconds past --at, fires taken and
 *      acknowledged: the daemon's CPU per fire (its next-elapse search
 *      included), each fire's lateness by the faked wall clock against
 *      due_realtime_ns (the burst due at --at, the other elapses and the
 *      jittered timers apart), and the daemon's own (Fired.fired_ns -
 *      deadline_ns);
 *   4. steps: the faked clock stepped forward about an hour and told
 *      (every wall-clock timer re-placed; the skipped elapses coalesce
 *      into one late fire per timer), back about an hour (re-placed, none
 *      due), then forward a millisecond (only the timers due within
 *      BWD_WALL_NEAR_NS re-placed) and back a millisecond (every one):
 *      the daemon's CPU until it is idle again.  Each hour's step lands
 *      0.5 s past a multiple of 10 s, so no "*:*:0/10" elapse comes
 *      during the measures (a jittered timer's fire may).
 *
 * Checks (the exit status is 1 when one fails): no fire before its
 * due_realtime_ns by the faked wall clock; each due_realtime_ns an elapse
 * of its timer's spec (daemon/calendar.c's bwd_cal_next, built in, as in
 * bench/bwcal); per timer, fires in the window between the elapses that
 * must have come (after the Schedule's reply, by the window's end less
 * the jitter bound) and those that may have (after its send, by the end
 * of the drain); none marked late in the window; after the forward step,
 * one late fire per timer with an elapse in the skipped hour (exact for
 * the timers without jitter); no fire during the step back's measure.
 *
 * Costs: the bench shares the host's two cores with the daemon (it is
 * not pinned); its own CPU is printed.  Memory: a few arrays of --timers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bitwheel-client.h"
#include "bwload.h"
#include "calendar-internal.h"

#define NS 1000000000ull

/* The forms (systemd.time(7)) and zones, crossed: timer k has form
 * k % NFORMS weighted by form_w, zone (k / 7) % NZONES. */
static const char *const forms[] = {
	"minutely", "*:0/5", "hourly", "*-*-* 02:30:00", "Mon..Fri 09:00",
	"*-*~01 00:00", "*:*:0/10",
};
static const unsigned form_w[] = { 25, 15, 10, 10, 10, 10, 20 };
#define NFORMS (sizeof(forms) / sizeof(forms[0]))
static const char *const zones[] = {
	"", " Europe/Berlin", " UTC", " America/New_York", " Asia/Kolkata",
	" Australia/Lord_Howe",
};
#define NZONES (sizeof(zones) / sizeof(zones[0]))
#define NSPECS (NFORMS * NZONES)
#define JITTER_NS (5 * NS)

static struct {
	const char *daemon, *shim, *zone;
	uint64_t timers, at_s, lead_s, after_s;
	int sessions, depth;
} opt = {
	.timers = 100000, .lead_s = 10, .after_s = 40, .sessions = 8,
	.depth = 256, .zone = "Europe/Berlin",
};

static char dir[] = "/tmp/bwcalload.XXXXXX";
static pid_t dpid;
static int64_t offset, prev_offset;  /* faked - real CLOCK_REALTIME, ns */
static uint64_t step_mono;           /* when offset last changed        */
static int failures;

static struct bwd_cal *cals[NSPECS];
static char spec_text[NSPECS][64];
/* Per timer (index = key): */
static uint16_t *spec_of;
static uint8_t *jit_of;          /* 0 none, 1 fresh, 2 fixed           */
static uint64_t *t_send, *t_reply, *last_due;
static uint32_t *win_fires;

static struct load_hist late_burst, late_plain, late_jit, srv_late;
static uint64_t total_fires, fires, late_marked, early, bad_elapse, repeats;
static uint64_t outstanding, replies, errors;
static char first_error[200];
static char cur_kind;      /* what schedule_all sends: 'c', 'r', 'd' */

static void vsay(const char *fmt, va_list ap)
{
	fprintf(stderr, "bwcalload: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* A failed check: said, counted, and the run goes on. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
	failures++;
}

/* The run cannot go on (exit status 2). */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
	exit(2);
}

static void cleanup(void)
{
	char cmd[64];

	if (dpid > 0) {
		kill(dpid, SIGTERM);
		waitpid(dpid, NULL, 0);
		dpid = 0;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bwcalload: could not remove %s\n", dir);
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

/* The daemon's wall clock (the shim's offset on the host's).  Within 2 s
 * of a step the larger of the two offsets, so that a fire sent just before
 * a step back is not taken for an early one. */
static uint64_t wall_ns(void)
{
	int64_t o = offset;

	if (load_now_ns() - step_mono < 2 * NS && prev_offset > o)
		o = prev_offset;
	return (uint64_t)((int64_t)real_ns() + o);
}

static uint64_t self_cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * NS +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
}

/* Sets the daemon's wall clock to real + off; tell: its step notice. */
static void set_clock(int64_t off, bool tell)
{
	char path[64];
	int fd;

	prev_offset = offset;
	offset = off;
	step_mono = load_now_ns();
	snprintf(path, sizeof(path), "%s/clock", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || pwrite(fd, &off, sizeof(off), 0) != (ssize_t)sizeof(off))
		die("%s: %s", path, strerror(errno));
	close(fd);
	snprintf(path, sizeof(path), "%s/clock.step", dir);
	if (!tell && access(path, F_OK) == 0)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		die("%s: %s", path, strerror(errno));
	close(fd);
}

static void start_daemon(const char *sock)
{
	char ctl[64], log[64], *argv[16];
	int i = 0, fd;

	set_clock((int64_t)((opt.at_s - opt.lead_s) * NS) - (int64_t)real_ns(), false);
	/* The shim's CLOCK_BOOTTIME timerfd watches it (tests/fakeclock.c);
	 * this bench never suspends. */
	snprintf(log, sizeof(log), "%s/clock.resume", dir);
	fd = open(log, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		die("%s: %s", log, strerror(errno));
	close(fd);
	snprintf(ctl, sizeof(ctl), "%s/clock", dir);
	snprintf(log, sizeof(log), "%s/bitwheeld.log", dir);
	argv[i++] = (char *)opt.daemon;
	argv[i++] = (char *)"--socket";
	argv[i++] = (char *)sock;
	argv[i++] = (char *)"--max-timers-per-uid";
	argv[i++] = (char *)"100000000";
	argv[i++] = (char *)"--max-memory";
	argv[i++] = (char *)"17179869184";
	argv[i++] = (char *)"--max-bytes-per-uid";
	argv[i++] = (char *)"17179869184";
	argv[i++] = (char *)"--max-timers";
	argv[i++] = (char *)"10000000";
	argv[i] = NULL;
	dpid = fork();
	if (dpid < 0)
		die("fork: %s", strerror(errno));
	if (dpid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setenv("LD_PRELOAD", opt.shim, 1);
		setenv("BW_FAKECLOCK", ctl, 1);
		setenv("TZ", opt.zone, 1);
		execv(opt.daemon, argv);
		_exit(127);
	}
}

/* ---- connections ----------------------------------------------------- */

struct conn {
	struct bwc_client *c;
	bool sched;              /* schedules this session's keys      */
	bool consumer, manual;
	uint64_t next_key, out;  /* the next key to send; in flight     */
	struct bwc_fire last;    /* manual: the batch's last fire       */
	bool have_last;
};

static struct conn *conns;
static int nconns;

static void on_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct conn *cn = arg;
	uint64_t now = wall_ns(), k = f->key, due = f->due_realtime_ns, e;

	(void)c;
	fires++;
	total_fires++;
	if (cn->manual) {
		cn->last = *f;
		cn->have_last = true;
	}
	if (k >= opt.timers) {
		fail("fire of unknown key %" PRIu64, k);
		return;
	}
	if (now < due) {
		early++;
		fail("key %" PRIu64 " (%s) fired %" PRIu64 " ns early by the wall clock",
		     k, spec_text[spec_of[k]], due - now);
	}
	if (bwd_cal_next(cals[spec_of[k]], due - 1000, &e) != 0 || e != due) {
		bad_elapse++;
		fail("key %" PRIu64 " (%s): due %" PRIu64 " is not an elapse", k,
		     spec_text[spec_of[k]], due);
	}
	if (due <= last_due[k])
		repeats++;
	last_due[k] = due;
	if (f->late)
		late_marked++;
	win_fires[k]++;
	load_hist_add(jit_of[k] ? &late_jit : due == opt.at_s * NS ? &late_burst : &late_plain,
		      now > due ? now - due : 0);
	load_hist_add(&srv_late, f->fired_ns > f->deadline_ns ? f->fired_ns - f->deadline_ns : 0);
}

static void on_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct conn *cn = arg;

	(void)c;
	cn->out--;
	outstanding--;
	replies++;
	if (r->status != 0) {
		errors++;
		if (!first_error[0])
			snprintf(first_error, sizeof(first_error), "key %" PRIu64 ": %s",
				 r->key, r->message);
	} else if (cur_kind == 'c' && r->key < opt.timers) {
		t_reply[r->key] = wall_ns();
	}
}

static struct bwc_client *connect_one(const char *sock, const char *session,
				      enum bwc_role role)
{
	struct bwc_client *c;

	if (bwc_new(&c) != 0)
		die("out of memory");
	bwc_set_role(c, role);
	if (role == BWC_ROLE_CONSUMER) {
		bwc_set_window(c, 4096);
		if (session)
			bwc_set_ack_mode(c, BWC_ACK_MANUAL);
	}
	for (int i = 0; bwc_connect(c, sock, session) != 0; i++) {
		if (i == 100)
			die("connect %s: %s", sock, bwc_errmsg(c));
		usleep(50000);
	}
	return c;
}

/* One round: poll every connection up to timeout_ms, dispatch the ready
 * ones, acknowledge each manual consumer's batch. */
static void pump(int timeout_ms)
{
	struct pollfd pfd[64];

	for (int i = 0; i < nconns; i++) {
		pfd[i].fd = bwc_fd(conns[i].c);
		pfd[i].events = bwc_poll_events(conns[i].c);
		pfd[i].revents = 0;
	}
	if (poll(pfd, (nfds_t)nconns, timeout_ms) < 0 && errno != EINTR)
		die("poll: %s", strerror(errno));
	for (int i = 0; i < nconns; i++) {
		struct conn *cn = &conns[i];

		if (!pfd[i].revents)
			continue;
		if (bwc_dispatch(cn->c) != 0)
			die("connection %d: %s", i, bwc_errmsg(cn->c));
		if (cn->have_last) {
			cn->have_last = false;
			if (bwc_send_ack(cn->c, &cn->last, true) != 0)
				die("ack: %s", bwc_errmsg(cn->c));
		}
	}
}

/* The timer of key k: calendar (kind 'c'), realtime_ns ('r') or delay. */
static void fill_timer(struct bwc_timer *t, uint64_t k, char kind, uint64_t now)
{
	memset(t, 0, sizeof(*t));
	t->key = k;
	if (kind == 'r') {
		t->realtime_ns = now + 86400 * NS + k;
	} else if (kind == 'd') {
		t->when_ns = 86400 * NS + k;
	} else {
		t->calendar = spec_text[spec_of[k]];
		t->jitter_ns = jit_of[k] ? JITTER_NS : 0;
		t->jitter_fixed = jit_of[k] == 2;
	}
}

/* Schedules keys 0..n-1 over the connections with sched set (key k on the
 * (k % senders)-th), --depth in flight on each; returns the wall time. */
static uint64_t schedule_all(uint64_t n, char kind)
{
	uint64_t t0 = load_now_ns();
	int senders = 0;

	for (int i = 0; i < nconns; i++)
		if (conns[i].sched)
			conns[i].next_key = (uint64_t)senders++;
	replies = 0;
	cur_kind = kind;
	while (replies < n) {
		for (int i = 0; i < nconns; i++) {
			struct conn *cn = &conns[i];
			struct bwc_timer t;

			if (!cn->sched)
				continue;
			while (cn->next_key < n && cn->out < (uint64_t)opt.depth) {
				uint64_t now = wall_ns();
				int rc;

				fill_timer(&t, cn->next_key, kind, now);
				rc = bwc_send_schedule(cn->c, &t, on_reply, cn);
				if (rc == BWC_EAGAIN)
					break;
				if (rc != 0)
					die("schedule: %s", bwc_errmsg(cn->c));
				if (kind == 'c')
					t_send[cn->next_key] = now;
				cn->out++;
				outstanding++;
				cn->next_key += (uint64_t)senders;
			}
		}
		pump(100);
	}
	return load_now_ns() - t0;
}

/* Pumps until the daemon's CPU time has not moved for 300 ms (at most
 * 30 s): its CPU and the wall time since t0/cpu0. */
static void settle(uint64_t t0, int64_t cpu0, uint64_t *wall, int64_t *cpu)
{
	int64_t last = load_proc_run_ns(dpid);
	uint64_t still = load_now_ns();

	while (load_now_ns() - t0 < 30 * NS) {
		int64_t c;

		pump(20);
		c = load_proc_run_ns(dpid);
		if (c != last) {
			last = c;
			still = load_now_ns();
		} else if (load_now_ns() - still > 300000000u) {
			break;
		}
	}
	*wall = still - t0;
	*cpu = last - cpu0;
}

/* Elapses of key k's spec in (after, upto]. */
static uint64_t elapses(uint64_t k, uint64_t after, uint64_t upto)
{
	uint64_t n = 0, e = after;

	while (bwd_cal_next(cals[spec_of[k]], e, &e) == 0 && e <= upto)
		n++;
	return n;
}

static void print_hist(const char *name, const struct load_hist *h)
{
	printf("| %s | %" PRIu64 " | %.3f | %.3f | %.3f | %.3f | %.3f |\n", name,
	       h->count, load_hist_quantile(h, 0.5) / 1e6,
	       load_hist_quantile(h, 0.9) / 1e6, load_hist_quantile(h, 0.99) / 1e6,
	       load_hist_quantile(h, 0.999) / 1e6, h->max / 1e6);
}

static uint64_t parse_utc(const char *s)
{
	struct tm tm = { 0 };
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);

	if (!end || (*end && strcmp(end, "Z") != 0))
		die("--at %s: want YYYY-MM-DDTHH:MM:SSZ", s);
	return (uint64_t)timegm(&tm);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: bwcalload --daemon BITWHEELD --shim FAKECLOCK.so --at YYYY-MM-DDTHH:MM:SSZ\n"
		"       [--zone TZ] [--timers N] [--sessions N] [--depth N] [--lead S] [--after S]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "daemon", 1, 0, 'D' }, { "shim", 1, 0, 'S' }, { "at", 1, 0, 'a' },
		{ "zone", 1, 0, 'z' }, { "timers", 1, 0, 'n' },
		{ "sessions", 1, 0, 's' }, { "depth", 1, 0, 'd' },
		{ "lead", 1, 0, 'l' }, { "after", 1, 0, 'A' }, { 0, 0, 0, 0 },
	};
	char sock[64], name[64], err[200];
	const char *at_text = NULL;
	uint64_t wall, n, t0, end, stop, wsum = 0, lo_sum = 0, hi_sum = 0, bad_keys = 0;
	int64_t cpu0, cpu, rss0, rss1;
	uint64_t self0;
	struct bwc_stats st;
	unsigned wsum_w = 0;
	int c, first_plain;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'D': opt.daemon = optarg; break;
		case 'S': opt.shim = optarg; break;
		case 'a': at_text = optarg; break;
		case 'z': opt.zone = optarg; break;
		case 'n': opt.timers = strtoull(optarg, NULL, 10); break;
		case 's': opt.sessions = atoi(optarg); break;
		case 'd': opt.depth = atoi(optarg); break;
		case 'l': opt.lead_s = strtoull(optarg, NULL, 10); break;
		case 'A': opt.after_s = strtoull(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (!opt.daemon || !opt.shim || !at_text || opt.timers == 0 ||
	    opt.sessions < 2 || opt.sessions > 16 || opt.depth < 1)
		usage();
	opt.at_s = parse_utc(at_text);
	n = opt.timers;
	setenv("TZ", opt.zone, 1);  /* zoneless specs: the daemon's zone */
	for (size_t i = 0; i < NSPECS; i++) {
		snprintf(spec_text[i], sizeof(spec_text[i]), "%s%s",
			 forms[i % NFORMS], zones[i / NFORMS]);
		if (bwd_cal_parse(spec_text[i], &cals[i], err, sizeof(err)) != 0)
			die("%s: %s", spec_text[i], err);
	}
	spec_of = calloc(n, sizeof(*spec_of));
	jit_of = calloc(n, 1);
	t_send = calloc(n, sizeof(*t_send));
	t_reply = calloc(n, sizeof(*t_reply));
	last_due = calloc(n, sizeof(*last_due));
	win_fires = calloc(n, sizeof(*win_fires));
	conns = calloc(64, sizeof(*conns));
	if (!spec_of || !jit_of || !t_send || !t_reply || !last_due || !win_fires || !conns)
		die("out of memory");
	for (size_t f = 0; f < NFORMS; f++)
		wsum_w += form_w[f];
	for (uint64_t k = 0; k < n; k++) {
		/* The form by weight over k's position in a cycle of wsum_w,
		 * the zone by k / wsum_w, so each form meets every zone. */
		unsigned r = (unsigned)(k % wsum_w), f = 0;

		while (r >= form_w[f])
			r -= form_w[f++];
		spec_of[k] = (uint16_t)(f + NFORMS * ((k / wsum_w) % NZONES));
		jit_of[k] = k % 10 == 3 ? 1 : k % 20 == 7 ? 2 : 0;
	}

	if (!mkdtemp(dir))
		die("mkdtemp: %s", strerror(errno));
	atexit(cleanup);
	snprintf(sock, sizeof(sock), "%s/sock", dir);
	start_daemon(sock);

	/* Sessions: the first half named (producer + manual consumer), the
	 * rest anonymous (one auto-ack connection). */
	for (int s = 0; s < opt.sessions; s++) {
		if (s < opt.sessions / 2) {
			snprintf(name, sizeof(name), "calbench-%d", s);
			conns[nconns++] = (struct conn){
				.c = connect_one(sock, name, BWC_ROLE_PRODUCER), .sched = true };
			conns[nconns] = (struct conn){
				.c = connect_one(sock, name, BWC_ROLE_CONSUMER),
				.consumer = true, .manual = true };
		} else {
			conns[nconns] = (struct conn){
				.c = connect_one(sock, NULL, BWC_ROLE_CONSUMER),
				.sched = true, .consumer = true };
		}
		bwc_set_fire_handler(conns[nconns].c, on_fire, &conns[nconns]);
		nconns++;
	}
	self0 = self_cpu_ns();

	/* 1. calendar Schedules. */
	rss0 = (int64_t)load_proc_rss(dpid);
	cpu0 = load_proc_run_ns(dpid);
	wall = schedule_all(n, 'c');
	cpu = load_proc_run_ns(dpid) - cpu0;
	rss1 = (int64_t)load_proc_rss(dpid);
	if (errors)
		die("%" PRIu64 " calendar Schedules refused: %s", errors, first_error);
	if (bwc_stats(conns[0].c, &st) != 0)
		die("stats: %s", bwc_errmsg(conns[0].c));
	printf("# bwcalload: %" PRIu64 " calendar timers across %s (%s)\n\n", n,
	       at_text, opt.zone);
	printf("Specs: the forms {%s", forms[0]);
	for (size_t f = 1; f < NFORMS; f++)
		printf(", %s", forms[f]);
	printf("} (weights");
	for (size_t f = 0; f < NFORMS; f++)
		printf(" %u", form_w[f]);
	printf(") x the zones {local (%s)", opt.zone);
	for (size_t z = 1; z < NZONES; z++)
		printf(",%s", zones[z]);
	printf("}; a tenth with a fresh jitter of %llu s, a twentieth with a fixed one. "
	       "%d sessions (%d named: producer + manual-ack consumer; %d anonymous), "
	       "%d requests in flight per connection.  The daemon's wall clock started at %s - %" PRIu64 " s.\n\n",
	       JITTER_NS / NS, opt.sessions, opt.sessions / 2,
	       opt.sessions - opt.sessions / 2, opt.depth, at_text, opt.lead_s);
	printf("| Schedule | timers | Schedules/s | daemon CPU per Schedule (us) |\n|---|---|---|---|\n");
	printf("| calendar | %" PRIu64 " | %.0f | %.2f |\n", n, n / (wall / 1e9),
	       cpu / 1e3 / (double)n);

	/* 2. plain Schedules on fresh anonymous connections, closed after
	 * each kind (their timers go with them). */
	first_plain = nconns;
	for (int i = 0; i < first_plain; i++)
		conns[i].sched = false;
	for (int kind = 0; kind < 2; kind++) {
		uint64_t m = n / 2;

		for (int s = 0; s < opt.sessions; s++)
			conns[nconns++] = (struct conn){
				.c = connect_one(sock, NULL, BWC_ROLE_CONSUMER), .sched = true };
		cpu0 = load_proc_run_ns(dpid);
		wall = schedule_all(m, kind ? 'd' : 'r');
		cpu = load_proc_run_ns(dpid) - cpu0;
		printf("| %s | %" PRIu64 " | %.0f | %.2f |\n",
		       kind ? "delay_ns (monotonic)" : "realtime_ns (a day ahead)", m,
		       m / (wall / 1e9), cpu / 1e3 / (double)m);
		if (errors)
			die("%" PRIu64 " plain Schedules refused: %s", errors, first_error);
		for (int i = first_plain; i < nconns; i++)
			bwc_free(conns[i].c);
		nconns = first_plain;
	}
	printf("\nMemory after the calendar Schedules: VmRSS %.1f MiB, +%.1f MiB, %.0f bytes per calendar timer; "
	       "the uid's charged bytes %.0f per timer (bwc_stats.uid_bytes).\n\n",
	       rss1 / 1048576.0, (rss1 - rss0) / 1048576.0,
	       (double)(rss1 - rss0) / (double)n, (double)st.uid_bytes / (double)n);

	/* 3. the window, for real, across the change. */
	end = (opt.at_s + opt.after_s) * NS + NS / 2;
	stop = end + 400000000u;
	memset(&late_burst, 0, sizeof(late_burst));
	memset(&late_plain, 0, sizeof(late_plain));
	memset(&late_jit, 0, sizeof(late_jit));
	memset(&srv_late, 0, sizeof(srv_late));
	{
		uint64_t f0 = fires, wall_at = wall_ns();

		fires = 0;
		late_marked = 0;
		t0 = load_now_ns();
		cpu0 = load_proc_run_ns(dpid);
		while (wall_ns() < stop)
			pump(50);
		cpu = load_proc_run_ns(dpid) - cpu0;
		wall = load_now_ns() - t0;
		for (uint64_t k = 0; k < n; k++) {
			uint64_t j = jit_of[k] ? JITTER_NS : 0;
			uint64_t lo_k = end > j ? elapses(k, t_reply[k], end - j) : 0;
			uint64_t hi_k = elapses(k, t_send[k], stop);

			lo_sum += lo_k;
			hi_sum += hi_k;
			wsum += win_fires[k];
			if (win_fires[k] < lo_k || win_fires[k] > hi_k)
				bad_keys++;
		}
		if (bad_keys)
			fail("%" PRIu64 " timers fired a number of times outside their expected range",
			     bad_keys);
		if (late_marked)
			fail("%" PRIu64 " fires in the window marked late", late_marked);
		printf("Window: the daemon's wall clock from %.1f s before the change to %.1f s after it "
		       "(%.1f s of real time; %" PRIu64 " fires before it, during the Schedules).\n\n",
		       (double)((int64_t)opt.at_s * (int64_t)NS - (int64_t)wall_at) / 1e9,
		       (double)(stop - opt.at_s * NS) / 1e9, wall / 1e9, f0);
		printf("| fires in the window | since the Schedules | expected (must .. may) | timers outside | marked late | daemon CPU (ms) | per fire (us) | daemon CPU share |\n|---|---|---|---|---|---|---|---|\n");
		printf("| %" PRIu64 " | %" PRIu64 " | %" PRIu64 " .. %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %.1f | %.2f | %.1f %% |\n\n",
		       fires, wsum, lo_sum, hi_sum, bad_keys, late_marked, cpu / 1e6,
		       fires ? cpu / 1e3 / (double)fires : 0.0, 100.0 * (double)cpu / (double)wall);
		printf("Lateness (ms): by the faked wall clock at receipt - due_realtime_ns (the elapse; "
		       "a jittered timer's includes its jitter, up to %llu s), and the daemon's own "
		       "(Fired.fired_ns - deadline_ns).\n\n", JITTER_NS / NS);
		printf("| lateness | fires | p50 | p90 | p99 | p99.9 | max |\n|---|---|---|---|---|---|---|\n");
		print_hist("received, no jitter, due at the change (the burst)", &late_burst);
		print_hist("received, no jitter, other elapses", &late_plain);
		print_hist("received, jitter", &late_jit);
		print_hist("daemon (fired - placed deadline)", &srv_late);
		printf("\n");
	}

	/* 4. steps. */
	{
		static const char *const what[] = {
			"forward ~1 h", "back ~1 h", "forward 1 ms", "back 1 ms",
		};
		uint64_t expect_plain = 0, expect_jit = 0, fires_plain = 0;
		uint8_t *want = calloc(n, 1);

		if (!want)
			die("out of memory");

		printf("| clock step (told) | daemon CPU (ms) | per timer (us) | until idle (ms) | fires during | late fires |\n|---|---|---|---|---|---|\n");
		for (int i = 0; i < 4; i++) {
			uint64_t from = wall_ns(), to, lm0 = late_marked;
			int64_t off;
			uint64_t settle_wall;

			if (i < 2) {
				to = i == 0 ? from + 3600 * NS : from - 3600 * NS;
				to = to / (10 * NS) * (10 * NS) + NS / 2;
			} else {
				/* From the daemon's clock itself, which
				 * wall_ns() gives as the hour before it for
				 * 2 s after the step back. */
				to = (uint64_t)((int64_t)real_ns() + offset);
				to = i == 2 ? to + NS / 1000 : to - NS / 1000;
			}
			if (i == 0) {
				for (uint64_t k = 0; k < n; k++) {
					uint64_t e;

					/* From the timer's base, as the daemon:
					 * its last fire (the elapse; the fire
					 * came a few ms after), else its
					 * Schedule.  Not from the step's start:
					 * systemd's next elapse depends on the
					 * base in a repeated hour (autumn's
					 * 02:30 after 02:59 CEST is the next
					 * day's, after 02:00 CET today's). */
					uint64_t base = last_due[k] ? last_due[k] : t_reply[k];

					if (bwd_cal_next(cals[spec_of[k]], base, &e) == 0 && e <= to) {
						*(jit_of[k] ? &expect_jit : &expect_plain) += 1;
						want[k] = 1;
					}
				}
			}
			memset(win_fires, 0, n * sizeof(*win_fires));
			fires = 0;
			off = (int64_t)to - (int64_t)real_ns();
			t0 = load_now_ns();
			cpu0 = load_proc_run_ns(dpid);
			set_clock(off, true);
			settle(t0, cpu0, &settle_wall, &cpu);
			printf("| %s | %.1f | %.2f | %.0f | %" PRIu64 " | %" PRIu64 " |\n",
			       what[i], cpu / 1e6, cpu / 1e3 / (double)n, settle_wall / 1e6,
			       fires, late_marked - lm0);
			if (i == 0) {
				for (uint64_t k = 0; k < n; k++) {
					if (jit_of[k])
						continue;
					fires_plain += win_fires[k];
					if (win_fires[k] != want[k])
						fail("forward step: key %" PRIu64 " (%s): %u late fires, %u expected (base %" PRIu64 ", last due %" PRIu64 ", from %" PRIu64 ")",
						     k, spec_text[spec_of[k]], win_fires[k], want[k], t_send[k], last_due[k], from);
				}
				if (fires_plain != expect_plain)
					fail("forward step: %" PRIu64 " late fires of timers without jitter, "
					     "%" PRIu64 " expected", fires_plain, expect_plain);
			} else if (i == 1 && fires) {
				fail("step back: %" PRIu64 " fires during the measure", fires);
			}
		}
		printf("\nForward: timers with an elapse in the skipped hour %" PRIu64
		       " without jitter (each one late fire: %" PRIu64 " came), %" PRIu64
		       " with jitter.\n\n", expect_plain, fires_plain, expect_jit);
	}

	printf("Checks: %" PRIu64 " fires in all; early by the wall clock %" PRIu64
	       "; due_realtime_ns not an elapse of the spec %" PRIu64
	       "; an elapse fired twice %" PRIu64 "; failures %d.  "
	       "bwcalload's own CPU %.1f s (it shares the two cores).\n",
	       total_fires, early, bad_elapse, repeats, failures,
	       (self_cpu_ns() - self0) / 1e9);
	for (int i = 0; i < nconns; i++)
		bwc_free(conns[i].c);
	for (size_t i = 0; i < NSPECS; i++)
		bwd_cal_free(cals[i]);
	return failures ? 1 : 0;
}
