/*
 * bwload.c - the service benchmark's load generator: options, the phases,
 * the forked workers, and the report (Markdown and CSV).
 *
 *   bwload [--quick] [--socket BITWHEELD_SOCK [--daemon-pid PID]]
 *          [--redis REDIS_SOCK [--redis-pid PID]] [--out DIR]
 *          [--session NAME] [--ack manual|auto] [--window N]
 *          [--producers N] [--deliver-rate TIMERS/S] ...
 *
 * Subjects, each over the same phases, clients, depth, mix and timers:
 *   echo          a raw Unix-socket echo of 24-byte messages, served by a
 *                 process bwload forks itself: the physical floor
 *   bitwheel      bitwheeld at --socket, through libbitwheel-client; an
 *                 anonymous session per client (auto ack), or with
 *                 --session a named one (journaled under --state-dir),
 *                 connected as a consumer that acknowledges each batch
 *                 of fires (--ack manual|auto says otherwise)
 *   bitwheel-ack  bitwheeld, a named session per client, always a
 *                 manual-ack consumer: acknowledgement's cost against
 *                 bitwheel in the same run
 *   redis-zset    redis-server at --redis: a sorted-set delay queue
 *   redis-expire  redis-server at --redis: SET PX and expiry events
 * Phases:
 *   rtt           1 client, depth 1: the non-pipelined round trip
 *   single        1 client, --depth requests in flight: the issue's
 *                 reference point for the echo and redis ratios
 *   pipelined     --clients clients, --depth requests in flight each
 *   deep          1 client, --deep-depth requests in flight
 *   sustained     --clients clients, --depth, paced at --rate schedules/s
 *   deliver1      bitwheel only: --producers producers (1) schedule into
 *   deliver4      one named session (depth --depth, flat out or at
 *                 --deliver-rate, no cancels) and 1 or 4 consumers of it
 *                 take and acknowledge its fires: fires/s and lateness at
 *                 the consumers; every accepted timer must arrive once
 *   fail          bitwheel only: --clients named sessions, each with a
 *                 consumer that touches and releases (delay 0) every
 *                 fire on its first hand-out and acknowledges it on its
 *                 second, --cancel-pct of its Schedules cancelled, at
 *                 --depth: requests/s and reply time per request kind
 *                 (Schedule, Cancel, Touch, Release)
 * Every client runs --duration ms (and at most a bound of requests), then
 * waits for its replies and the fires still due, all bounded in time.
 * See bench/README.md, "The service benchmark".
 *
 * bwload --leeway --socket S [--daemon-pid PID] [--out DIR] runs instead
 * what a timer's leeway buys (load_leeway.c): lateness by leeway class
 * (0, 10 ms, 1 s) at --rate timers/s for --duration, delays --min/max-
 * delay-ms; and one consumer of --timers periodic timers (--period-ms,
 * leeway --timer-leeway-ms or the daemon's default) without and with
 * coalescing, in the same run: wake-ups and daemon writes per fire, the
 * daemon's CPU per fire.  DIR/leeway.md.
 */
#include "bwload.h"
#include "load_leeway.h"

#include <bitwheel-client.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { SUBJ_ECHO, SUBJ_BITWHEEL, SUBJ_BWACK, SUBJ_ZSET, SUBJ_EXPIRE, NSUBJ };
enum { PH_RTT, PH_SINGLE, PH_PIPE, PH_DEEP, PH_SUST, PH_DELIV1, PH_DELIV4,
       PH_FAIL, NPHASE };

static const char *const subj_name[NSUBJ] = {
	"echo", "bitwheel", "bitwheel-ack", "redis-zset", "redis-expire"
};
static const char *const subj_what[NSUBJ] = {
	"raw AF_UNIX echo of 24-byte messages (the floor)",
	"bitwheeld: Schedule (oneshot, absolute deadline) / Cancel",
	"bitwheeld, a named session per client as a consumer acking each batch",
	"redis sorted set: ZADD / ZREM; consumer: Lua ZRANGEBYSCORE+ZREM",
	"redis SET PX / DEL; subscriber on __keyevent@0__:expired",
};
static const char *const phase_name[NPHASE] = {
	"rtt", "single", "pipelined", "deep", "sustained", "deliver1", "deliver4",
	"fail"
};
static const char *const kind_name[LOAD_KINDS] = {
	"Schedule", "Cancel", "Touch", "Release"
};
static const char *const ack_name[3] = { "default", "auto", "manual" };

#define IS_BITWHEEL(s) ((s) == SUBJ_BITWHEEL || (s) == SUBJ_BWACK)
#define IS_DELIVERY(ph) ((ph) == PH_DELIV1 || (ph) == PH_DELIV4)
/* Phases of bitwheel alone, left out of the main table. */
#define IS_OWN_TABLE(ph) (IS_DELIVERY(ph) || (ph) == PH_FAIL)

struct opts {
	const char *socket, *redis, *out, *session;
	long daemon_pid, redis_pid;
	int clients, depth, deep_depth, cancel_pct, producers, ack;
	uint32_t window;
	uint64_t duration_ms, rate, min_delay_ms, max_delay_ms, drain_ms,
		 deliver_rate;
	bool quick;
	bool leeway;            /* --leeway: load_leeway.c's report instead */
	uint64_t timers, period_ms, timer_leeway_ms; /* UINT64_MAX: default */
	bool subj_on[NSUBJ], phase_on[NPHASE];
};

struct row {
	bool ran, ok;
	int clients, depth;
	int producers, consumers; /* delivery phases                      */
	int ack;                /* LOAD_ACK_* as the clients asked         */
	uint32_t window;
	uint64_t rate;
	struct load_slot sum;   /* merged: histograms and counters       */
	double rps;             /* replies / (last reply - first send)   */
	double fps;             /* delivery: fires/s in the steady window */
	int64_t cpu_ns;         /* the server's utime+stime over the phase */
	uint64_t wall_ns, rss;
	char error[200];
};

static struct row rows[NPHASE][NSUBJ];
static char echo_dir[64], echo_path[96];
static pid_t echo_pid = -1;

static void usage(FILE *f)
{
	fputs("usage: bwload [--quick] [--socket PATH] [--daemon-pid PID]\n"
	      "              [--redis PATH] [--redis-pid PID] [--out DIR]\n"
	      "              [--clients N] [--depth N] [--deep-depth N]\n"
	      "              [--duration MS] [--rate TIMERS/S] [--cancel-pct P]\n"
	      "              [--min-delay-ms N] [--max-delay-ms N]\n"
	      "              [--subject LIST] [--phase LIST] [--session NAME]\n"
	      "              [--ack manual|auto] [--window N] [--producers N]\n"
	      "              [--deliver-rate TIMERS/S] [--drain-ms MS] [--list]\n"
	      "subjects: echo, bitwheel and bitwheel-ack (need --socket),\n"
	      "redis-zset and redis-expire (need --redis and a build with hiredis)\n"
	      "phases: rtt, single, pipelined, deep, sustained (every subject);\n"
	      "deliver1, deliver4 (bitwheel only: one named session, --producers\n"
	      "  producers scheduling flat out or at --deliver-rate, 1 or 4\n"
	      "  consumers acknowledging; fires/s and lateness at the consumers);\n"
	      "fail (bitwheel only: a named session per client whose consumer\n"
	      "  touches and releases each fire once, then acknowledges it; reply\n"
	      "  time per request kind)\n"
	      "--session NAME: bitwheel clients open named sessions\n"
	      "  NAME-<phase>-<client>-<pid> as consumers instead of anonymous ones\n"
	      "--ack MODE: how bitwheel's consumers finish fires: manual (one\n"
	      "  cumulative Ack per batch) or auto; default manual for named\n"
	      "  sessions and the delivery phases, auto for anonymous sessions.\n"
	      "  bitwheel-ack always acknowledges manually\n"
	      "--window N: consumers' window (default the daemon's, 256)\n"
	      "--drain-ms MS: how long clients wait for replies and fires after\n"
	      "  sending, beyond the longest delay (300; redis-expire 2000)\n", f);
}

static bool have_hiredis(void)
{
#ifdef BENCH_HAVE_HIREDIS
	return true;
#else
	return false;
#endif
}

static int parse_list(const char *arg, const char *const *names, int n,
		      bool *on, const char *what)
{
	char *copy = strdup(arg), *save = NULL, *tok;

	if (!copy)
		return -1;
	for (int i = 0; i < n; i++)
		on[i] = false;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int i;

		for (i = 0; i < n && strcmp(tok, names[i]) != 0; i++)
			;
		if (i == n) {
			fprintf(stderr, "bwload: unknown %s '%s'\n", what, tok);
			free(copy);
			return -1;
		}
		on[i] = true;
	}
	free(copy);
	return 0;
}

static uint64_t num(const char *opt, const char *arg, uint64_t lo, uint64_t hi)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || v < lo || v > hi) {
		fprintf(stderr, "bwload: --%s: '%s' is not a number in %" PRIu64
			"..%" PRIu64 "\n", opt, arg, lo, hi);
		exit(2);
	}
	return v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "socket", required_argument, NULL, 's' },
		{ "daemon-pid", required_argument, NULL, 'P' },
		{ "redis", required_argument, NULL, 'r' },
		{ "redis-pid", required_argument, NULL, 'R' },
		{ "out", required_argument, NULL, 'o' },
		{ "clients", required_argument, NULL, 'c' },
		{ "depth", required_argument, NULL, 'd' },
		{ "deep-depth", required_argument, NULL, 'D' },
		{ "duration", required_argument, NULL, 't' },
		{ "rate", required_argument, NULL, 'a' },
		{ "cancel-pct", required_argument, NULL, 'x' },
		{ "min-delay-ms", required_argument, NULL, 'm' },
		{ "max-delay-ms", required_argument, NULL, 'M' },
		{ "subject", required_argument, NULL, 'S' },
		{ "phase", required_argument, NULL, 'H' },
		{ "session", required_argument, NULL, 'n' },
		{ "drain-ms", required_argument, NULL, 'w' },
		{ "ack", required_argument, NULL, 'k' },
		{ "window", required_argument, NULL, 'W' },
		{ "producers", required_argument, NULL, 'p' },
		{ "deliver-rate", required_argument, NULL, 'e' },
		{ "list", no_argument, NULL, 'l' },
		{ "leeway", no_argument, NULL, 'L' },
		{ "timers", required_argument, NULL, 'T' },
		{ "period-ms", required_argument, NULL, 'E' },
		{ "timer-leeway-ms", required_argument, NULL, 'Y' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool duration_set = false;
	int ch;

	*o = (struct opts){ .clients = 4, .depth = 64, .deep_depth = 256,
			    .cancel_pct = 10, .duration_ms = 2000,
			    .rate = 100000, .min_delay_ms = 1,
			    .max_delay_ms = 50, .producers = 1,
			    .timers = 10000, .period_ms = 1000,
			    .timer_leeway_ms = UINT64_MAX };
	for (int i = 0; i < NSUBJ; i++)
		o->subj_on[i] = true;
	for (int i = 0; i < NPHASE; i++)
		o->phase_on[i] = true;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'q': o->quick = true; break;
		case 'L': o->leeway = true; break;
		case 'T': o->timers = num("timers", optarg, 1, 1000000); break;
		case 'E': o->period_ms = num("period-ms", optarg, 1, 3600000); break;
		case 'Y': o->timer_leeway_ms = num("timer-leeway-ms", optarg, 0, 3600000); break;
		case 's': o->socket = optarg; break;
		case 'P': o->daemon_pid = (long)num("daemon-pid", optarg, 1, 1u << 30); break;
		case 'r': o->redis = optarg; break;
		case 'R': o->redis_pid = (long)num("redis-pid", optarg, 1, 1u << 30); break;
		case 'o': o->out = optarg; break;
		case 'w': o->drain_ms = num("drain-ms", optarg, 1, 600000); break;
		case 'n':
			if (!*optarg || strlen(optarg) > 24) {
				fprintf(stderr, "bwload: --session: 1 to 24 bytes\n");
				exit(2);
			}
			o->session = optarg;
			break;
		case 'k':
			if (strcmp(optarg, "manual") == 0)
				o->ack = LOAD_ACK_MANUAL;
			else if (strcmp(optarg, "auto") == 0)
				o->ack = LOAD_ACK_AUTO;
			else {
				fprintf(stderr, "bwload: --ack: manual or auto\n");
				exit(2);
			}
			break;
		case 'W': o->window = (uint32_t)num("window", optarg, 1, 1u << 20); break;
		case 'p': o->producers = (int)num("producers", optarg, 1, 16); break;
		case 'e': o->deliver_rate = num("deliver-rate", optarg, 1, 100000000); break;
		case 'c': o->clients = (int)num("clients", optarg, 1, 64); break;
		case 'd': o->depth = (int)num("depth", optarg, 1, 4096); break;
		case 'D': o->deep_depth = (int)num("deep-depth", optarg, 1, 4096); break;
		case 't': o->duration_ms = num("duration", optarg, 10, 600000);
			  duration_set = true; break;
		case 'a': o->rate = num("rate", optarg, 1, 100000000); break;
		case 'x': o->cancel_pct = (int)num("cancel-pct", optarg, 0, 100); break;
		case 'm': o->min_delay_ms = num("min-delay-ms", optarg, 0, 60000); break;
		case 'M': o->max_delay_ms = num("max-delay-ms", optarg, 0, 60000); break;
		case 'S':
			if (parse_list(optarg, subj_name, NSUBJ, o->subj_on, "subject"))
				exit(2);
			break;
		case 'H':
			if (parse_list(optarg, phase_name, NPHASE, o->phase_on, "phase"))
				exit(2);
			break;
		case 'l':
			for (int i = 0; i < NSUBJ; i++)
				printf("%-13s %s%s\n", subj_name[i], subj_what[i],
				       i >= SUBJ_ZSET && !have_hiredis()
				       ? " (not built: install libhiredis-dev)" : "");
			exit(0);
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc || o->max_delay_ms < o->min_delay_ms) {
		usage(stderr);
		exit(2);
	}
	if (o->quick && !duration_set)
		o->duration_ms = 300;
	if (!o->socket && (o->subj_on[SUBJ_BITWHEEL] || o->subj_on[SUBJ_BWACK])) {
		fprintf(stderr, "bwload: no --socket: bitwheel and bitwheel-ack left out\n");
		o->subj_on[SUBJ_BITWHEEL] = o->subj_on[SUBJ_BWACK] = false;
	}
	if (!have_hiredis() && (o->subj_on[SUBJ_ZSET] || o->subj_on[SUBJ_EXPIRE])) {
		if (o->redis)
			fprintf(stderr, "bwload: built without hiredis: no redis subjects (install libhiredis-dev and configure again)\n");
		o->subj_on[SUBJ_ZSET] = o->subj_on[SUBJ_EXPIRE] = false;
	} else if (!o->redis && (o->subj_on[SUBJ_ZSET] || o->subj_on[SUBJ_EXPIRE])) {
		fprintf(stderr, "bwload: no --redis: redis subjects left out\n");
		o->subj_on[SUBJ_ZSET] = o->subj_on[SUBJ_EXPIRE] = false;
	}
}

static void stop_echo(void)
{
	if (echo_pid > 0) {
		kill(echo_pid, SIGTERM);
		waitpid(echo_pid, NULL, 0);
		echo_pid = -1;
	}
	if (echo_path[0])
		unlink(echo_path);
	if (echo_dir[0])
		rmdir(echo_dir);
}

static int start_echo(void)
{
	const char *tmp = getenv("TMPDIR");
	int fd;

	snprintf(echo_dir, sizeof echo_dir, "%s/bwload.XXXXXX",
		 tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
	if (!mkdtemp(echo_dir)) {
		echo_dir[0] = '\0';
		return -1;
	}
	snprintf(echo_path, sizeof echo_path, "%s/echo.sock", echo_dir);
	fd = load_echo_listen(echo_path);
	if (fd < 0)
		return -1;
	echo_pid = fork();
	if (echo_pid == 0)
		load_echo_serve(fd);
	close(fd);
	return echo_pid > 0 ? 0 : -1;
}

/* Wait for pids until deadline; kill what is left.  Returns how many
 * exited with status 0.  Only these pids are waited for: other workers
 * of the phase may still be running. */
static int reap(pid_t *pids, int n, uint64_t deadline)
{
	int left = 0, ok = 0;

	for (int i = 0; i < n; i++)
		left += pids[i] > 0;
	while (left > 0) {
		for (int i = 0; i < n; i++) {
			int st;

			if (pids[i] <= 0 || waitpid(pids[i], &st, WNOHANG) != pids[i])
				continue;
			pids[i] = -1;
			left--;
			ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
		}
		if (left == 0)
			break;
		if (load_now_ns() >= deadline) {
			for (int i = 0; i < n; i++)
				if (pids[i] > 0) {
					kill(pids[i], SIGKILL);
					waitpid(pids[i], NULL, 0);
					pids[i] = -1;
				}
			break;
		}
		load_sleep_until(load_now_ns() + 2000000);
	}
	return ok;
}

static int run_worker(int subj, const struct opts *o, const struct load_phase *p,
		      int id, volatile int *stop, struct load_slot *slot)
{
	switch (subj) {
	case SUBJ_ECHO: return load_echo_worker(echo_path, p, id, slot);
	case SUBJ_BITWHEEL:
	case SUBJ_BWACK: return load_bitwheel_worker(o->socket, p, id, stop, slot);
#ifdef BENCH_HAVE_HIREDIS
	case SUBJ_ZSET: return load_redis_worker(o->redis, 'z', p, id, slot);
	case SUBJ_EXPIRE: return load_redis_worker(o->redis, 'x', p, id, slot);
#endif
	}
	return -1;
}

static uint64_t sum_fires(const struct load_slot *slots, int from, int to)
{
	uint64_t n = 0;

	for (int i = from; i < to; i++)
		n += ((const volatile struct load_slot *)&slots[i])->fires;
	return n;
}

static void run_one(int ph, int subj, const struct opts *o)
{
	struct row *row = &rows[ph][subj];
	struct load_phase p = {
		.name = phase_name[ph], .clients = o->clients, .depth = o->depth,
		.duration_ns = o->duration_ms * 1000000,
		.cancel_pct = o->cancel_pct,
		.min_delay_ns = o->min_delay_ms * 1000000,
		.max_delay_ns = o->max_delay_ms * 1000000,
		.drain_ns = o->drain_ms ? o->drain_ms * 1000000
			  : subj == SUBJ_EXPIRE ? 2000000000 : 300000000,
		.session = o->session, .ack = o->ack, .window = o->window,
	};
	bool redis = subj == SUBJ_ZSET || subj == SUBJ_EXPIRE;
	bool deliver = IS_DELIVERY(ph);
	long spid = subj == SUBJ_ECHO ? (long)echo_pid
		  : IS_BITWHEEL(subj) ? o->daemon_pid : o->redis_pid;
	struct load_slot *slots;
	size_t len;
	volatile int *stop;
	pid_t pids[96];
	char shared[65];
	uint64_t t0, bound, first = UINT64_MAX, last = 0;
	int64_t cpu0;
	int n, ok, senders;

	if (ph == PH_RTT)
		p.clients = 1, p.depth = 1;
	else if (ph == PH_SINGLE)
		p.clients = 1;
	else if (ph == PH_DEEP)
		p.clients = 1, p.depth = o->deep_depth;
	else if (ph == PH_SUST)  /* --rate counts schedules, the mix adds cancels */
		p.rate = o->cancel_pct < 100 ? o->rate * 100 / (uint64_t)(100 - o->cancel_pct) : o->rate;
	if (ph == PH_FAIL) {
		/* A named session per client, its consumer failing each fire
		 * once (load_bitwheel.c's fail worker). */
		p.session = o->session ? o->session : "bwload";
		p.ack = LOAD_ACK_MANUAL;
		p.fail = true;
	}
	if (subj == SUBJ_BWACK) {
		/* A named session per client, consuming with manual acks. */
		p.session = o->session ? o->session : "bwload-ack";
		p.ack = LOAD_ACK_MANUAL;
	}
	if (deliver) {
		/* One named session: producers schedule (no cancels, so every
		 * timer fires), consumers take the fires and acknowledge. */
		snprintf(shared, sizeof shared, "%.24s-%s-%ld-%" PRIu64,
			 o->session ? o->session : "bwload", phase_name[ph],
			 (long)getpid(), load_now_ns() / 1000000 % 1000000);
		p.session = shared;
		p.producers = o->producers;
		p.clients = o->producers + (ph == PH_DELIV1 ? 1 : 4);
		p.cancel_pct = 0;
		p.rate = o->deliver_rate;
	}
	p.max_requests = o->duration_ms * 5000;  /* 5 M/s per client */
	n = p.clients + (redis ? 1 : 0);
	senders = deliver ? p.producers : p.clients;
	row->ran = true;
	row->clients = p.clients;
	row->depth = p.depth;
	row->rate = p.rate;
	row->producers = p.producers;
	row->consumers = deliver ? p.clients - p.producers : 0;
	/* The ack mode in force: the daemon's default is auto for an
	 * anonymous session, manual for a named one. */
	row->ack = !IS_BITWHEEL(subj) ? LOAD_ACK_DEFAULT : p.ack ? p.ack :
		   p.session ? LOAD_ACK_MANUAL : LOAD_ACK_AUTO;
	row->window = IS_BITWHEEL(subj) ? p.window : 0;
	len = sizeof *slots * (size_t)(n + 1) + 64;
	slots = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (slots == MAP_FAILED) {
		snprintf(row->error, sizeof row->error, "mmap: %s", strerror(errno));
		return;
	}
	stop = (volatile int *)(slots + n + 1);
#ifdef BENCH_HAVE_HIREDIS
	if (redis && load_redis_prepare(o->redis, subj == SUBJ_ZSET ? 'z' : 'x',
					&p, row->error, sizeof row->error) != 0) {
		munmap(slots, len);
		return;
	}
#endif
	fflush(NULL);
	t0 = load_now_ns();
	cpu0 = load_proc_cpu_ns(spid);
	p.start_ns = t0 + 150000000;  /* time to fork and connect */
	/* The steady window of a delivery phase: producers sending and the
	 * first timers' deadlines passed (the whole sending time if the
	 * delays are as long as it). */
	p.win_lo = p.start_ns + (p.max_delay_ns < p.duration_ns / 2 ? p.max_delay_ns : 0);
	p.win_hi = p.start_ns + p.duration_ns;
	bound = p.start_ns + p.duration_ns + p.max_delay_ns + p.drain_ns + 10000000000ULL;
	if (deliver)
		bound += 10000000000ULL;  /* the consumers' drain, below */
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct rusage ru;
			int rc = -1;

			alarm((unsigned)((bound - t0) / 1000000000 + 2));
#ifdef BENCH_HAVE_HIREDIS
			if (i == p.clients)
				rc = load_redis_consumer(o->redis, subj == SUBJ_ZSET ? 'z' : 'x',
							 &p, stop, &slots[i]);
			else
#endif
				rc = run_worker(subj, o, &p, i, stop, &slots[i]);
			if (getrusage(RUSAGE_SELF, &ru) == 0)
				slots[i].cpu_ns = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
						  (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
			_exit(rc ? 1 : 0);
		}
		if (pids[i] < 0) {
			snprintf(row->error, sizeof row->error, "fork: %s", strerror(errno));
			*stop = 1;
			reap(pids, i, load_now_ns() + 5000000000ULL);
			munmap(slots, len);
			return;
		}
	}
	ok = reap(pids, senders, bound);
	if (redis) {
		/* The consumer: until every accepted timer that was not
		 * cancelled fired, or the drain ran out. */
		uint64_t want = 0, until = load_now_ns() + p.max_delay_ns + p.drain_ns;

		for (int i = 0; i < p.clients; i++)
			want += slots[i].scheduled - slots[i].cancel_hit;
		while (slots[p.clients].fires < want && load_now_ns() < until)
			load_sleep_until(load_now_ns() + 5000000);
		*stop = 1;
		ok += reap(pids + p.clients, 1, load_now_ns() + 5000000000ULL);
	} else if (deliver) {
		/* The consumers: until every accepted timer fired, or no fire
		 * came for a while (the drain, at least a second), or 10 s. */
		uint64_t want = 0, seen = 0, last_seen = 0, now = load_now_ns();
		uint64_t quiet = p.drain_ns > 1000000000 ? p.drain_ns : 1000000000;
		uint64_t until = now + p.max_delay_ns + quiet;
		uint64_t give_up = now + p.max_delay_ns + 10000000000ULL;

		for (int i = 0; i < p.producers; i++)
			want += slots[i].scheduled;
		while ((seen = sum_fires(slots, p.producers, p.clients)) < want &&
		       (now = load_now_ns()) < until && now < give_up) {
			if (seen != last_seen) {
				last_seen = seen;
				if (now + quiet > until)
					until = now + quiet;
			}
			load_sleep_until(now + 2000000);
		}
		*stop = 1;
		ok += reap(pids + p.producers, p.clients - p.producers,
			   load_now_ns() + 5000000000ULL);
	}
	row->wall_ns = load_now_ns() - t0;
	row->cpu_ns = cpu0 >= 0 ? load_proc_cpu_ns(spid) - cpu0 : -1;
	row->rss = load_proc_rss(spid);
	row->ok = ok == n;
	for (int i = 0; i < n; i++) {
		struct load_slot *s = &slots[i];

		load_hist_merge(&row->sum.rtt, &s->rtt);
		load_hist_merge(&row->sum.late, &s->late);
		load_hist_merge(&row->sum.srv, &s->srv);
		for (int k = 0; k < LOAD_KINDS; k++) {
			load_hist_merge(&row->sum.kind_rtt[k], &s->kind_rtt[k]);
			row->sum.kind_replies[k] += s->kind_replies[k];
		}
		row->sum.sent += s->sent;
		row->sum.replies += s->replies;
		row->sum.errors += s->errors;
		row->sum.scheduled += s->scheduled;
		row->sum.cancel_hit += s->cancel_hit;
		row->sum.fires += s->fires;
		row->sum.early += s->early;
		row->sum.refused += s->refused;
		row->sum.acks += s->acks;
		row->sum.redelivered += s->redelivered;
		row->sum.win_fires += s->win_fires;
		if (i < p.clients)
			row->sum.cpu_ns += s->cpu_ns;
		if (i < senders && s->t_start && s->t_start < first)
			first = s->t_start;
		if (i < senders && s->t_last > last)
			last = s->t_last;
		if (s->error[0] && !row->error[0])
			snprintf(row->error, sizeof row->error, "%s", s->error);
	}
	if (!row->ok && !row->error[0])
		snprintf(row->error, sizeof row->error, "a worker failed or ran out of time");
	row->rps = last > first ? (double)row->sum.replies * 1e9 / (double)(last - first) : 0;
	if (deliver) {
		row->fps = p.win_hi > p.win_lo ? (double)row->sum.win_fires * 1e9 /
			   (double)(p.win_hi - p.win_lo) : 0;
		/* Nobody died: every accepted timer reaches a consumer once. */
		if (row->ok && row->sum.fires != row->sum.scheduled) {
			row->ok = false;
			snprintf(row->error, sizeof row->error,
				 "%" PRIu64 " timers accepted, %" PRIu64 " fires received "
				 "(%" PRIu64 " redelivered)", row->sum.scheduled,
				 row->sum.fires, row->sum.redelivered);
		}
	}
	munmap(slots, len);
	if (deliver)
		fprintf(stderr, "bwload: %-9s %-12s %10.0f req/s %10.0f fires/s%s%s\n",
			phase_name[ph], subj_name[subj], row->rps, row->fps,
			row->error[0] ? "  ERROR: " : "", row->error);
	else
		fprintf(stderr, "bwload: %-9s %-12s %10.0f req/s%s%s\n", phase_name[ph],
			subj_name[subj], row->rps, row->error[0] ? "  ERROR: " : "", row->error);
}

/* ---- report ------------------------------------------------------------ */

static void us(FILE *f, uint64_t ns, bool have)
{
	if (have)
		fprintf(f, " %.1f |", (double)ns / 1000.0);
	else
		fputs(" - |", f);
}

static const double qs[4] = { 0.50, 0.90, 0.99, 0.999 };

static double q_us(const struct load_hist *h, double q)
{
	return (double)load_hist_quantile(h, q) / 1e3;
}

/* bitwheel against bitwheel-ack, phase by phase: what acknowledging
 * costs the requests/s and the lateness. */
static void write_ack_md(FILE *f)
{
	bool any = false;

	for (int ph = 0; ph < PH_DELIV1; ph++) {
		struct row *a = &rows[ph][SUBJ_BITWHEEL], *b = &rows[ph][SUBJ_BWACK];

		if (!a->ran || !b->ran || !a->sum.replies || !b->sum.replies)
			continue;
		if (!any)
			fprintf(f, "\n\n## Acknowledgement's cost\n\n"
				"bitwheel (acknowledgement %s) against bitwheel-ack (a named session "
				"per client, consumer, one cumulative Ack per batch of fires) in the "
				"same run.  ×: bitwheel-ack's requests/s over bitwheel's.  "
				"fires/ack: fires per Ack sent.  Times in µs.\n\n"
				"| phase | clients×depth | bitwheel req/s | bitwheel-ack req/s | × "
				"| late p50 | with acks | late p99 | with acks | acks | fires/ack "
				"| redelivered | backpressure |\n"
				"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
				ack_name[a->ack]);
		any = true;
		fprintf(f, "| %s | %d×%d | %.0f | %.0f | %.2f× | %.1f | %.1f | %.1f | %.1f "
			"| %" PRIu64 " | %.1f | %" PRIu64 " | %" PRIu64 " |\n",
			phase_name[ph], b->clients, b->depth, a->rps, b->rps,
			a->rps > 0 ? b->rps / a->rps : 0.0,
			q_us(&a->sum.late, 0.5), q_us(&b->sum.late, 0.5),
			q_us(&a->sum.late, 0.99), q_us(&b->sum.late, 0.99),
			b->sum.acks, b->sum.acks ? (double)b->sum.fires / (double)b->sum.acks : 0.0,
			b->sum.redelivered, a->sum.refused + b->sum.refused);
	}
}

/* The delivery phases: fires/s to 1 and 4 consumers of one session. */
static void write_delivery_md(FILE *f, const struct opts *o)
{
	bool any = false;

	for (int ph = PH_DELIV1; ph <= PH_DELIV4; ph++) {
		struct row *r = &rows[ph][SUBJ_BITWHEEL];
		char mode[48];

		if (!r->ran)
			continue;
		if (r->ack == LOAD_ACK_MANUAL)
			snprintf(mode, sizeof mode, "manual, window %" PRIu32,
				 r->window ? r->window : 256);
		else
			snprintf(mode, sizeof mode, "%s", ack_name[r->ack]);
		if (!any)
			fprintf(f, "\n\n## Delivery to the consumers of one named session\n\n"
				"%d producer%s (depth %d, %s) schedule oneshot timers due in "
				"%" PRIu64 "..%" PRIu64 " ms, no cancels, into one named session "
				"for %" PRIu64 " ms; 1 or 4 consumers of it take the fires "
				"(round-robin) and acknowledge them (%s).  fires/s: fires "
				"received by all consumers in the steady window (from the longest "
				"delay after the start to the end of sending) per second.  late: "
				"receive time at the consumer minus the deadline (µs); daemon: "
				"Fired.fired_at_ns minus the deadline.  Every accepted timer must "
				"reach a consumer exactly once (nobody dies: nothing is "
				"redelivered).  backpressure: Schedules refused TOO_MANY_TIMERS "
				"(the session's pending timers and undelivered fires at "
				"max_timers; the producer holds off 1 ms).  Daemon CPU per fire: "
				"its Schedule, its fire and its share of an Ack.\n\n"
				"| phase | producers×depth | consumers | ack | requests/s | fires/s "
				"| fires | late p50 | p90 | p99 | p99.9 | daemon p50 | daemon p99 "
				"| acks | fires/ack | redelivered | backpressure | daemon CPU µs/fire "
				"| CPU %% | errors |\n"
				"|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:"
				"|---:|---:|---:|---:|---:|---:|---:|\n",
				o->producers, o->producers > 1 ? "s" : "", o->depth,
				o->deliver_rate ? "paced" : "flat out", o->min_delay_ms,
				o->max_delay_ms, o->duration_ms,
				ack_name[r->ack]);
		any = true;
		fprintf(f, "| %s | %d×%d | %d | %s | %.0f | %.0f | %" PRIu64 "/%" PRIu64
			" | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %" PRIu64 " | %.1f | %" PRIu64
			" | %" PRIu64 " |", phase_name[ph], r->producers, r->depth, r->consumers,
			mode, r->rps, r->fps,
			r->sum.fires, r->sum.scheduled,
			q_us(&r->sum.late, 0.5), q_us(&r->sum.late, 0.9),
			q_us(&r->sum.late, 0.99), q_us(&r->sum.late, 0.999),
			q_us(&r->sum.srv, 0.5), q_us(&r->sum.srv, 0.99), r->sum.acks,
			r->sum.acks ? (double)r->sum.fires / (double)r->sum.acks : 0.0,
			r->sum.redelivered, r->sum.refused);
		if (r->cpu_ns >= 0 && r->sum.fires)
			fprintf(f, " %.2f | %.0f |", (double)r->cpu_ns / 1e3 / (double)r->sum.fires,
				100.0 * (double)r->cpu_ns / (double)r->wall_ns);
		else
			fputs(" - | - |", f);
		fprintf(f, " %" PRIu64 "%s |\n", r->sum.errors, r->ok ? "" : " (failed)");
	}
	if (any && o->deliver_rate)
		fprintf(f, "\nProducers paced at %" PRIu64 " timers/s in all.\n", o->deliver_rate);
}

/* The fail phase: Touch and Release beside Schedule and Cancel. */
static void write_fail_md(FILE *f, const struct opts *o)
{
	const struct row *r = &rows[PH_FAIL][SUBJ_BITWHEEL];
	uint64_t all = 0;
	double secs;

	if (!r->ran)
		return;
	secs = r->rps > 0 ? (double)r->sum.replies / r->rps : 0;
	for (int k = 0; k < LOAD_KINDS; k++)
		all += r->sum.kind_replies[k];
	fprintf(f, "\n\n## Fires that fail: Touch and Release beside Schedule and Cancel\n\n"
		"%d clients, each a named session (`%s-fail-<client>-<pid>`) and a manual-ack "
		"consumer of it (ack timeout 30 s), %d requests in flight each, for %" PRIu64
		" ms: every fire, due at once, is touched (`bwc_send_touch`, the connection's "
		"ack timeout) and released (`bwc_send_release`, delay 0: to the queue's tail) on "
		"its first hand-out and acknowledged (`bwc_send_ack`, no reply) on its second; "
		"%d%% of the Schedules are of timers due in an hour, cancelled once accepted.  "
		"Touches, Releases and Cancels go out before new Schedules; at most the "
		"window's worth of timers (%" PRIu32 ") is open per client.  Reply time: send to "
		"reply, at that depth (µs).  Daemon CPU: over the phase, per request with a "
		"reply (acks and fires included in its cost).\n\n"
		"| request | replies | requests/s | reply p50 | p90 | p99 | p99.9 |\n"
		"|---|---:|---:|---:|---:|---:|---:|\n",
		r->clients, o->session ? o->session : "bwload", r->depth, o->duration_ms,
		o->cancel_pct, o->window ? o->window : 256);
	for (int k = 0; k < LOAD_KINDS; k++) {
		const struct load_hist *h = &r->sum.kind_rtt[k];

		fprintf(f, "| %s | %" PRIu64 " | %.0f |", kind_name[k], r->sum.kind_replies[k],
			secs > 0 ? (double)r->sum.kind_replies[k] / secs : 0.0);
		for (int i = 0; i < 4; i++)
			us(f, load_hist_quantile(h, qs[i]), h->count > 0);
		fputc('\n', f);
	}
	fprintf(f, "| all | %" PRIu64 " | %.0f | | | | |\n\n", all, r->rps);
	fprintf(f, "Fires %" PRIu64 " (first hand-outs and releases' returns), acks %" PRIu64
		", cancels that hit %" PRIu64 ", backpressure %" PRIu64 ", errors %" PRIu64 "%s.",
		r->sum.fires, r->sum.acks, r->sum.cancel_hit, r->sum.refused, r->sum.errors,
		r->ok ? "" : " (failed)");
	if (r->cpu_ns >= 0 && all)
		fprintf(f, "  Daemon CPU %.2f µs per request, %.0f %% of a core.",
			(double)r->cpu_ns / 1e3 / (double)all,
			100.0 * (double)r->cpu_ns / (double)r->wall_ns);
	fputc('\n', f);
}

static void write_md(FILE *f, const struct opts *o)
{
	struct utsname u;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	uname(&u);
	fprintf(f, "# bitwheel service benchmark (bwload%s)\n\n", o->quick ? " --quick" : "");
	fprintf(f, "Host: %s %s, %ld CPUs.  Clients: %d (phases rtt, single and deep: 1), depth %d "
		"(rtt: 1, deep: %d), %" PRIu64 " ms of sending per phase; %d%% cancels of a "
		"recent key, %d%% oneshot schedules due in %" PRIu64 "..%" PRIu64 " ms; "
		"phase sustained paced at %" PRIu64 " new timers/s in total (plus the cancels).  hiredis: %s.\n\n",
		u.sysname, u.release, ncpu, o->clients, o->depth, o->deep_depth,
		o->duration_ms, o->cancel_pct, 100 - o->cancel_pct, o->min_delay_ms,
		o->max_delay_ms, o->rate, have_hiredis() ? "yes" : "no (no redis subjects)");
	fprintf(f, "bitwheel: %s, acknowledgement %s%s.  bitwheel-ack: a named session per "
		"client (`%s-<phase>-<client>-<pid>`), connected as a consumer that acknowledges "
		"its fires itself: one cumulative `bwc_send_ack` per batch of fires handled in "
		"a `bwc_dispatch` (protocol 2's at-least-once path), window %s.\n\n",
		o->session ? "a named session per client, connected as a consumer" :
		"an anonymous session per client", ack_name[o->ack ? o->ack : o->session ?
		LOAD_ACK_MANUAL : LOAD_ACK_AUTO], o->ack ? " (--ack)" : " (the daemon's default)",
		o->session ? o->session : "bwload-ack",
		o->window ? "as --window" : "the daemon's default (256)");
	fputs("Times in µs.  rtt: request round trip (send to reply), depth 1 only.  "
	      "late: fire lateness, receive time minus the deadline asked for "
	      "(CLOCK_MONOTONIC).  CPU: the server's utime+stime over the phase, per "
	      "request and as a share of one core over the phase's wall time; RSS at "
	      "the phase's end; the clients' own CPU per request (getrusage).\n\n", f);
	fputs("| phase | subject | clients×depth | requests/s | rtt p50 | p90 | p99 | p99.9 "
	      "| late p50 | p90 | p99 | p99.9 | fired | early | errors | server CPU µs/req "
	      "| CPU % | RSS MiB | clients' CPU µs/req |\n", f);
	fputs("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", f);
	for (int ph = 0; ph < NPHASE; ph++)
		for (int s = 0; s < NSUBJ; s++) {
			struct row *r = &rows[ph][s];

			if (!r->ran || IS_OWN_TABLE(ph))
				continue;
			fprintf(f, "| %s | %s | %d×%d | %.0f |", phase_name[ph], subj_name[s],
				r->clients, r->depth, r->rps);
			for (int i = 0; i < 4; i++)
				us(f, load_hist_quantile(&r->sum.rtt, qs[i]), r->sum.rtt.count > 0);
			for (int i = 0; i < 4; i++)
				us(f, load_hist_quantile(&r->sum.late, qs[i]), r->sum.late.count > 0);
			fprintf(f, " %" PRIu64 " | %" PRIu64 " | %" PRIu64 "%s |",
				r->sum.fires, r->sum.early, r->sum.errors, r->ok ? "" : " (failed)");
			if (r->cpu_ns >= 0 && r->sum.replies)
				fprintf(f, " %.2f | %.0f |", (double)r->cpu_ns / 1000.0 / (double)r->sum.replies,
					100.0 * (double)r->cpu_ns / (double)r->wall_ns);
			else
				fputs(" - | - |", f);
			if (r->rss)
				fprintf(f, " %.1f |", (double)r->rss / 1048576.0);
			else
				fputs(" - |", f);
			fprintf(f, " %.2f |\n", r->sum.replies ? (double)r->sum.cpu_ns / 1000.0 /
				(double)r->sum.replies : 0.0);
		}
	for (int ph = 0; ph < NPHASE; ph++)
		for (int s = 0; s < NSUBJ; s++)
			if (rows[ph][s].error[0])
				fprintf(f, "\n%s/%s: %s", phase_name[ph], subj_name[s], rows[ph][s].error);
	write_ack_md(f);
	write_delivery_md(f, o);
	write_fail_md(f, o);
	fputs("\n\n## Targets\n\n| target | measured | met |\n|---|---|---|\n", f);

#define R(ph, s) (&rows[ph][s])
#define HAVE(ph, s) (R(ph, s)->ran && R(ph, s)->sum.replies > 0)
	if (HAVE(PH_RTT, SUBJ_BITWHEEL) && HAVE(PH_RTT, SUBJ_ECHO)) {
		double r50 = (double)load_hist_quantile(&R(PH_RTT, SUBJ_BITWHEEL)->sum.rtt, 0.5) /
			     (double)load_hist_quantile(&R(PH_RTT, SUBJ_ECHO)->sum.rtt, 0.5);
		double r99 = (double)load_hist_quantile(&R(PH_RTT, SUBJ_BITWHEEL)->sum.rtt, 0.99) /
			     (double)load_hist_quantile(&R(PH_RTT, SUBJ_ECHO)->sum.rtt, 0.99);

		fprintf(f, "| non-pipelined schedule round trip ≤ 1.25× the echo's (p50) | %.2f× (p99: %.2f×) | %s |\n",
			r50, r99, r50 <= 1.25 ? "yes" : "no");
	}
	for (int ph = PH_SINGLE; ph <= PH_PIPE; ph++) {
		double r;

		if (!HAVE(ph, SUBJ_BITWHEEL) || !HAVE(ph, SUBJ_ECHO))
			continue;
		r = R(ph, SUBJ_BITWHEEL)->rps / R(ph, SUBJ_ECHO)->rps;
		fprintf(f, "| pipelined throughput ≥ 0.6× the echo's at depth %d, %d client%s | %.2f× |  %s |\n",
			R(ph, SUBJ_BITWHEEL)->depth, R(ph, SUBJ_BITWHEEL)->clients,
			R(ph, SUBJ_BITWHEEL)->clients > 1 ? "s" : "", r, r >= 0.6 ? "yes" : "no");
	}
	if (HAVE(PH_DEEP, SUBJ_BITWHEEL)) {
		double v = R(PH_DEEP, SUBJ_BITWHEEL)->rps;

		fprintf(f, "| ≥ 1,000,000 requests/s from one client at depth %d | %.0f/s (echo: %.0f/s) | %s |\n",
			o->deep_depth, v, HAVE(PH_DEEP, SUBJ_ECHO) ? R(PH_DEEP, SUBJ_ECHO)->rps : 0.0,
			v >= 1e6 ? "yes" : "no");
	}
	for (int ph = PH_SINGLE; ph <= PH_PIPE; ph++) {
		double r;

		if (!HAVE(ph, SUBJ_BITWHEEL) || !HAVE(ph, SUBJ_ZSET))
			continue;
		r = R(ph, SUBJ_BITWHEEL)->rps / R(ph, SUBJ_ZSET)->rps;
		fprintf(f, "| ≥ 5× redis sorted-set ZADD/ZREM throughput (%d client%s, depth %d) | %.2f× |  %s |\n",
			R(ph, SUBJ_BITWHEEL)->clients, R(ph, SUBJ_BITWHEEL)->clients > 1 ? "s" : "",
			R(ph, SUBJ_BITWHEEL)->depth, r, r >= 5 ? "yes" : "no");
	}
	if (HAVE(PH_SUST, SUBJ_BITWHEEL)) {
		struct row *r = R(PH_SUST, SUBJ_BITWHEEL);
		double p99 = (double)load_hist_quantile(&r->sum.late, 0.99) / 1e6;
		double timers = r->rps * (100 - o->cancel_pct) / 100.0;
		bool rate_ok = timers >= 0.95 * (double)o->rate;

		fprintf(f, "| fire lateness p99 ≤ 1.5 ms on the 1 ms lane at %" PRIu64 " new timers/s "
			"| p99 %.3f ms at %.0f new timers/s (%.0f requests/s) | %s |\n",
			o->rate, p99, timers, r->rps,
			p99 <= 1.5 && rate_ok && r->sum.late.count ? "yes" : "no");
	}
	fputs("\nbitwheel's fire lateness split: the daemon's own (Fired.fired_at_ns − deadline) "
	      "and as received by the client (daemon + delivery):\n\n| phase | subject | daemon p50 | daemon p99 "
	      "| received p50 (total) | received p99 (total) |\n|---|---|---:|---:|---:|---:|\n", f);
	for (int ph = 0; ph < NPHASE; ph++)
		for (int s = SUBJ_BITWHEEL; s <= SUBJ_BWACK; s++) {
			struct row *r = R(ph, s);

			if (!r->ran || !r->sum.srv.count)
				continue;
			fprintf(f, "| %s | %s | %.1f µs | %.1f µs | %.1f µs | %.1f µs |\n",
				phase_name[ph], subj_name[s],
				(double)load_hist_quantile(&r->sum.srv, 0.5) / 1e3,
				(double)load_hist_quantile(&r->sum.srv, 0.99) / 1e3,
				(double)load_hist_quantile(&r->sum.late, 0.5) / 1e3,
				(double)load_hist_quantile(&r->sum.late, 0.99) / 1e3);
		}
#undef R
#undef HAVE
}

static void write_csv(FILE *f)
{
	fputs("phase,subject,clients,depth,rate,requests,replies,requests_per_s,"
	      "rtt_p50_ns,rtt_p90_ns,rtt_p99_ns,rtt_p999_ns,"
	      "late_p50_ns,late_p90_ns,late_p99_ns,late_p999_ns,late_max_ns,"
	      "daemon_late_p50_ns,daemon_late_p99_ns,"
	      "scheduled,cancel_hits,fired,early,errors,server_cpu_ns,wall_ns,server_rss_bytes,clients_cpu_ns,ok,"
	      "ack,window,producers,consumers,fires_per_s,acks,redelivered,backpressure\n", f);
	for (int ph = 0; ph < NPHASE; ph++)
		for (int s = 0; s < NSUBJ; s++) {
			struct row *r = &rows[ph][s];

			if (!r->ran)
				continue;
			fprintf(f, "%s,%s,%d,%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.0f",
				phase_name[ph], subj_name[s], r->clients, r->depth, r->rate,
				r->sum.sent, r->sum.replies, r->rps);
			for (int i = 0; i < 4; i++)
				fprintf(f, ",%" PRIu64, r->sum.rtt.count ? load_hist_quantile(&r->sum.rtt, qs[i]) : 0);
			for (int i = 0; i < 4; i++)
				fprintf(f, ",%" PRIu64, r->sum.late.count ? load_hist_quantile(&r->sum.late, qs[i]) : 0);
			fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, r->sum.late.max,
				load_hist_quantile(&r->sum.srv, 0.5), load_hist_quantile(&r->sum.srv, 0.99));
			fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
				",%" PRIu64 ",%" PRId64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%d",
				r->sum.scheduled, r->sum.cancel_hit, r->sum.fires,
				r->sum.early, r->sum.errors, r->cpu_ns, r->wall_ns, r->rss,
				r->sum.cpu_ns, r->ok);
			fprintf(f, ",%s,%" PRIu32 ",%d,%d,%.0f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
				r->ack ? ack_name[r->ack] : "", r->window, r->producers,
				r->consumers, r->fps, r->sum.acks, r->sum.redelivered,
				r->sum.refused);
		}
}

static FILE *open_out(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "bwload: %s: %s\n", path, strerror(errno));
	return f;
}

/* ---- bwload --leeway -------------------------------------------------- */

static void ms3(FILE *f, const struct load_hist *h)
{
	fprintf(f, " %.3f | %.3f | %.3f | %.3f |", q_us(h, 0.5) / 1e3,
		q_us(h, 0.9) / 1e3, q_us(h, 0.99) / 1e3, (double)h->max / 1e6);
}

static int run_leeway(const struct opts *o, FILE *f)
{
	static const char *const cls[LW_CLASSES] = { "0", "10 ms", "1 s" };
	struct lw_lateness_opts lo = {
		.rate = o->rate, .duration_ns = o->duration_ms * 1000000ull,
		.min_delay_ns = o->min_delay_ms * 1000000ull,
		.max_delay_ns = o->max_delay_ms * 1000000ull,
	};
	struct lw_coalesce_opts co = {
		.timers = o->timers, .period_ns = o->period_ms * 1000000ull,
		.leeway_ns = o->timer_leeway_ms == UINT64_MAX ? BWC_LEEWAY_DEFAULT :
			o->timer_leeway_ms * 1000000ull,
		.duration_ns = o->duration_ms * 1000000ull,
		.daemon_pid = o->daemon_pid,
	};
	static struct lw_lateness lat;
	static struct lw_coalesce_row row[2];
	char err[200];
	struct utsname u;
	double per[2][3];

	if (!o->socket) {
		fprintf(stderr, "bwload: --leeway needs --socket\n");
		return 2;
	}
	if (load_leeway_lateness(o->socket, &lo, &lat, err, sizeof err) ||
	    load_leeway_coalesce(o->socket, &co, row, err, sizeof err)) {
		fprintf(stderr, "bwload --leeway: %s\n", err);
		return 1;
	}
	uname(&u);
	fprintf(f, "# What a leeway buys (bwload --leeway)\n\n"
		"%s %s, %ld CPUs online.  Lateness of oneshot timers by leeway class "
		"(key %% 3), %" PRIu64 " timers/s for %" PRIu64 " ms, delays %" PRIu64
		" to %" PRIu64 " ms: received (the consumer's clock at the fire "
		"handler) and the daemon's (Fired.fired_at - deadline), in ms.\n\n"
		"| leeway | fires | recv p50 | p90 | p99 | max | daemon p50 | p90 | p99 | max |\n"
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
		u.sysname, u.release, sysconf(_SC_NPROCESSORS_ONLN), lo.rate,
		o->duration_ms, o->min_delay_ms, o->max_delay_ms);
	for (int k = 0; k < LW_CLASSES; k++) {
		fprintf(f, "| %s | %" PRIu64 " |", cls[k], lat.late[k].count);
		ms3(f, &lat.late[k]);
		ms3(f, &lat.srv[k]);
		fputc('\n', f);
	}
	fprintf(f, "\n%" PRIu64 " scheduled, %" PRIu64 " fired, %" PRIu64
		" errors.\n\n## One consumer, %" PRIu64 " periodic timers\n\n"
		"Period %" PRIu64 " ms, first deadlines spread over one period, leeway %s; "
		"measured for %" PRIu64 " ms after a period of warm-up, without and with "
		"Hello.coalesce in the same run.  Wake-ups: the consumer's polls that read "
		"fires; writes: the daemon's writes that carried fires "
		"(Metrics.fire_writes, root only); CPU: the daemon's run time "
		"(/proc/PID/schedstat).  "
		"Lateness received, in ms.\n\n"
		"| coalesce | fires | wake-ups | wake-ups/fire | daemon writes | writes/fire "
		"| daemon CPU µs/fire | late p50 | p90 | p99 | max |\n"
		"|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
		lat.scheduled, lat.fires, lat.errors, co.timers, o->period_ms,
		o->timer_leeway_ms == UINT64_MAX ? "the daemon's (period / 64)" : "as given",
		o->duration_ms);
	for (int i = 0; i < 2; i++) {
		const struct lw_coalesce_row *r = &row[i];
		double fires = r->fires ? (double)r->fires : 1.0;

		per[i][0] = (double)r->wakeups / fires;
		per[i][1] = (double)r->writes / fires;
		per[i][2] = r->cpu_ns >= 0 ? (double)r->cpu_ns / 1e3 / fires : 0.0;
		fprintf(f, "| %s | %" PRIu64 " | %" PRIu64 " | %.4f |", r->coalesce ? "on" : "off",
			r->fires, r->wakeups, per[i][0]);
		if (r->have_writes)
			fprintf(f, " %" PRIu64 " | %.4f |", r->writes, per[i][1]);
		else
			fputs(" - | - |", f);
		if (r->cpu_ns >= 0)
			fprintf(f, " %.3f |", per[i][2]);
		else
			fputs(" - |", f);
		ms3(f, &r->late);
		fputc('\n', f);
	}
	fprintf(f, "\nWithout over with coalescing: wake-ups per fire %.1f×",
		per[1][0] > 0 ? per[0][0] / per[1][0] : 0.0);
	if (row[0].have_writes && per[1][1] > 0)
		fprintf(f, ", daemon writes per fire %.1f×", per[0][1] / per[1][1]);
	if (row[0].cpu_ns >= 0 && per[1][2] > 0)
		fprintf(f, ", daemon CPU per fire %.2f×", per[0][2] / per[1][2]);
	fputs(".\n", f);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	bool failed = false;

	parse_opts(argc, argv, &o);
	signal(SIGPIPE, SIG_IGN);
	if (o.leeway) {
		FILE *md = o.out ? open_out(o.out, "leeway.md") : stdout;
		int rc;

		if (!md)
			return 1;
		rc = run_leeway(&o, md);
		if (md != stdout)
			fclose(md);
		return rc;
	}
	if (o.subj_on[SUBJ_ECHO] && start_echo() != 0) {
		fprintf(stderr, "bwload: cannot start the echo server: %s\n", strerror(errno));
		stop_echo();
		return 1;
	}
	for (int ph = 0; ph < NPHASE; ph++)
		for (int s = 0; s < NSUBJ; s++) {
			if (!o.phase_on[ph] || !o.subj_on[s])
				continue;
			/* The echo has no timers: nothing to pace or to fire. */
			if (s == SUBJ_ECHO && ph == PH_SUST)
				continue;
			/* One named session's producers and consumers,
			 * or Touch and Release: bitwheel's alone. */
			if (IS_OWN_TABLE(ph) && s != SUBJ_BITWHEEL)
				continue;
			run_one(ph, s, &o);
			failed |= !rows[ph][s].ok;
		}
	stop_echo();
	if (o.out) {
		FILE *md = open_out(o.out, "service.md"), *csv = open_out(o.out, "service.csv");

		if (!md || !csv)
			return 1;
		write_md(md, &o);
		write_csv(csv);
		fclose(md);
		fclose(csv);
	} else {
		write_md(stdout, &o);
	}
	return failed ? 1 : 0;
}
