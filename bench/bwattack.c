/*
 * bwattack.c - the victim's lateness while a hostile local user attacks
 * bitwheeld (issue 12; bench/run-attack.sh writes results/attack.md).
 *
 * For each attack of bench/attack.h (and a baseline with none), in one
 * run: a fresh daemon (the given binary, its budgets the defaults unless
 * --daemon-arg says otherwise), the attacker as uid 65534 built up to its
 * budgets, then the victim as uid 65533 scheduling a oneshot every
 * --interval, due --delay ahead (or from --delay to --delay-max), for
 * --duration while the attacker keeps on.  A line saying so, then one
 * Markdown table row per attack: the victim's lateness at receipt and by
 * the daemon's clock (p50, p99, max), its Schedules' reply time, anything
 * lost, early, refused or foreign, what the attacker held and was
 * refused, the fires its consumers read (the delivery attacks), the
 * daemon's CPU, RSS and log lines a second over the victim's run, and its
 * longest loop turns in the victim's run and in its whole life.  The
 * checks of tests/check_attack.c are the same code with small budgets.
 *
 * Needs root (the two uids).  Exit 0 when every attack met the target
 * (victim p99 <= --target-ms and max <= --target-max-ms at receipt,
 * nothing lost, early or refused), 1 when one did not, 2 on a usage or
 * set-up error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attack.h"
#include "bitwheel-client.h"

#define MS UINT64_C(1000000)
#define S UINT64_C(1000000000)
#define MAX_ARGS 64

struct opts {
	const char *daemon;
	const char *args[MAX_ARGS];
	size_t nargs;
	bool want[ATK_N];
	uint64_t duration_ns, interval_ns, delay_ns, delay_max_ns;
	double target_ms, target_max_ms;
	size_t payload;
	int nice, rt;
	const char *turns;      /* bwturns.so, or NULL                      */
	uint32_t max_deliveries; /* poison: SetPolicy's; 0 the default's    */
};

/* The crash-loop attacks' rows, printed in a table of their own. */
static struct crash_row {
	enum atk_kind k;
	struct atk_crash c;
	double cpu_pct;         /* the daemon's, over the victim's run     */
	double p99_ms, max_ms;  /* the victim's lateness at receipt        */
} crash_rows[ATK_N];
static int ncrash;

struct daemon {
	pid_t pid;
	char dir[64], sock[96], log[96], turns[96];
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: bwattack --daemon PATH [OPTIONS]\n"
		"  --daemon PATH       the bitwheeld to run (one per attack)\n"
		"  --daemon-arg ARG    one more daemon argument (repeatable), e.g.\n"
		"                      --daemon-arg=--max-timers-per-uid=4000\n"
		"  --attacks LIST      comma-separated, of: none");
	for (int k = 1; k < ATK_N; k++)
		fprintf(f, ",%s", atk_name((enum atk_kind)k));
	fprintf(f, " (default: all)\n"
		"  --duration SECONDS  the victim's run under each attack (10)\n"
		"  --interval MS       one victim timer every MS (20)\n"
		"  --delay MS          each due MS ahead (50)\n"
		"  --delay-max MS      ... or from --delay to MS ahead, by key\n"
		"                      (e.g. --interval 10 --delay 50 --delay-max 500,\n"
		"                      issue 20's victim)\n"
		"  --payload BYTES     the attacker's payloads (the daemon's max)\n"
		"  --target-ms MS      the victim p99 to meet (10)\n"
		"  --target-max-ms MS  ... and its max (20)\n"
		"  --nice N            the daemon's and the victim's nice value (0);\n"
		"                      e.g. -10 on a busy machine, so that the figures\n"
		"                      show the daemon's own stalls more than the\n"
		"                      other processes' share of the CPU\n"
		"  --rt PRIO           the daemon and the victim under SCHED_FIFO at\n"
		"                      PRIO (the attacker stays as it is): on a machine\n"
		"                      loaded past its cores, the figures then show the\n"
		"                      daemon's own stalls alone\n"
		"  --turns PATH        bench/.libs/bwturns.so: time the daemon's loop\n"
		"                      turns (CPU and wall time from one epoll_wait\n"
		"                      to the next) and report the longest, in the\n"
		"                      victim's run and in the daemon's life\n"
		"  --max-deliveries N  poison: the session's delivery limit (SetPolicy);\n"
		"                      default: the daemon's (20)\n");
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "daemon", required_argument, NULL, 'd' },
		{ "daemon-arg", required_argument, NULL, 'a' },
		{ "attacks", required_argument, NULL, 'k' },
		{ "duration", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' },
		{ "delay", required_argument, NULL, 'l' },
		{ "delay-max", required_argument, NULL, 'L' },
		{ "payload", required_argument, NULL, 'p' },
		{ "target-ms", required_argument, NULL, 'g' },
		{ "target-max-ms", required_argument, NULL, 'G' },
		{ "nice", required_argument, NULL, 'n' },
		{ "rt", required_argument, NULL, 'r' },
		{ "turns", required_argument, NULL, 'u' },
		{ "max-deliveries", required_argument, NULL, 'm' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool any = false;
	int ch;

	o->duration_ns = 10 * S;
	o->interval_ns = 20 * MS;
	o->delay_ns = 50 * MS;
	o->target_ms = 10;
	o->target_max_ms = 20;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'd':
			o->daemon = optarg;
			break;
		case 'a':
			if (o->nargs >= MAX_ARGS - 16)
				return -1;
			o->args[o->nargs++] = optarg;
			break;
		case 'k':
			for (char *tok = strtok(optarg, ","); tok; tok = strtok(NULL, ",")) {
				int k = 0;

				while (k < ATK_N && strcmp(tok, atk_name((enum atk_kind)k)) != 0)
					k++;
				if (k == ATK_N) {
					fprintf(stderr, "bwattack: no attack '%s'\n", tok);
					return -1;
				}
				o->want[k] = any = true;
			}
			break;
		case 't':
			o->duration_ns = (uint64_t)(atof(optarg) * 1e9);
			break;
		case 'i':
			o->interval_ns = (uint64_t)(atof(optarg) * 1e6);
			break;
		case 'l':
			o->delay_ns = (uint64_t)(atof(optarg) * 1e6);
			break;
		case 'L':
			o->delay_max_ns = (uint64_t)(atof(optarg) * 1e6);
			break;
		case 'p':
			o->payload = (size_t)strtoul(optarg, NULL, 10);
			break;
		case 'g':
			o->target_ms = atof(optarg);
			break;
		case 'G':
			o->target_max_ms = atof(optarg);
			break;
		case 'n':
			o->nice = atoi(optarg);
			break;
		case 'r':
			o->rt = atoi(optarg);
			break;
		case 'u':
			o->turns = optarg;
			break;
		case 'm': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);

			if (end == optarg || *end || v < 1 || v > UINT32_MAX) {
				fprintf(stderr, "bwattack: --max-deliveries: 1 to %u\n", UINT32_MAX);
				return -1;
			}
			o->max_deliveries = (uint32_t)v;
			break;
		}
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -1;
		}
	}
	if (!o->daemon || optind != argc || !o->interval_ns || o->duration_ns < o->interval_ns ||
	    (o->delay_max_ns && o->delay_max_ns < o->delay_ns))
		return -1;
	if (!any)
		for (int k = 0; k < ATK_N; k++)
			o->want[k] = true;
	return 0;
}

/* Whether something accepts connections at path. */
static bool listening(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* A daemon of its own in a fresh directory; 0 or -1 (said on stderr). */
static int daemon_start(const struct opts *o, enum atk_kind k, struct daemon *d)
{
	const char *argv[MAX_ARGS + 16];
	size_t n = 0;
	uint64_t deadline;

	snprintf(d->dir, sizeof(d->dir), "/tmp/bwattack.XXXXXX");
	if (!mkdtemp(d->dir) || chmod(d->dir, 0755) != 0) {
		perror("bwattack: mkdtemp");
		return -1;
	}
	snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	snprintf(d->turns, sizeof(d->turns), "%s/turns", d->dir);
	argv[n++] = o->daemon;
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	argv[n++] = "--socket-mode";
	argv[n++] = "0666";
	/* The expiry attack needs its sessions to expire while the victim
	 * runs; the others' stay (the default linger, 5 minutes). */
	if (k == ATK_EXPIRE) {
		argv[n++] = "--linger";
		argv[n++] = "500ms";
	}
	for (size_t i = 0; i < o->nargs; i++)
		argv[n++] = o->args[i];
	argv[n] = NULL;
	fflush(NULL);
	d->pid = fork();
	if (d->pid < 0)
		return -1;
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		unsetenv("NOTIFY_SOCKET");
		if (o->turns && (setenv("LD_PRELOAD", o->turns, 1) != 0 ||
				 setenv("BWTURNS_OUT", d->turns, 1) != 0))
			_exit(127);
		if (o->nice)
			setpriority(PRIO_PROCESS, 0, o->nice);
		if (o->rt > 0 && atk_set_rt(o->rt) != 0)
			_exit(126);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	deadline = load_now_ns() + 10 * S;
	while (!listening(d->sock)) {
		int st;

		if (waitpid(d->pid, &st, WNOHANG) == d->pid || load_now_ns() > deadline) {
			fprintf(stderr, "bwattack: %s did not start (see %s)\n", o->daemon, d->log);
			kill(d->pid, SIGKILL);
			d->pid = 0;
			return -1;
		}
		usleep(2000);
	}
	return 0;
}

/* bwturns.so's figures (bench/turns.c), of the daemon's life and of the
 * seconds the victim ran in. */
struct turns {
	struct turn_figures {
		unsigned long long n, max_wall, max_cpu, over[3];
	} life, run;
	bool have;
};

/* One line of bwturns.so's file, after its "second T " if any: whether it
 * was one. */
static bool turns_line(FILE *f, struct turn_figures *g)
{
	return fscanf(f, "turns %llu max_wall_ns %llu max_cpu_ns %llu cpu_over_1ms %llu "
		      "cpu_over_5ms %llu cpu_over_10ms %llu ", &g->n, &g->max_wall, &g->max_cpu,
		      &g->over[0], &g->over[1], &g->over[2]) == 6;
}

/* Stop it; whether it was still running (it did not crash).  *t gets
 * bwturns.so's figures when there are any, its run figures those of the
 * seconds from run0_ns to run1_ns (CLOCK_MONOTONIC), both included. */
static bool daemon_stop(struct daemon *d, uint64_t run0_ns, uint64_t run1_ns,
			struct turns *t)
{
	bool alive;
	int st = 0;
	FILE *f;

	alive = waitpid(d->pid, &st, WNOHANG) == 0;
	if (alive) {
		kill(d->pid, SIGTERM);
		waitpid(d->pid, &st, 0);
	}
	memset(t, 0, sizeof(*t));
	if ((f = fopen(d->turns, "r"))) {
		unsigned long long sec;
		struct turn_figures g;

		t->have = turns_line(f, &t->life);
		while (t->have && fscanf(f, "second %llu ", &sec) == 1 && turns_line(f, &g)) {
			if (sec < run0_ns / S || sec > run1_ns / S)
				continue;
			t->run.n += g.n;
			t->run.max_wall = g.max_wall > t->run.max_wall ? g.max_wall : t->run.max_wall;
			t->run.max_cpu = g.max_cpu > t->run.max_cpu ? g.max_cpu : t->run.max_cpu;
			for (int i = 0; i < 3; i++)
				t->run.over[i] += g.over[i];
		}
		fclose(f);
		unlink(d->turns);
	}
	unlink(d->sock);
	unlink(d->log);
	rmdir(d->dir);
	return alive;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

/* One row; whether the attack met the target. */
static bool run_one(const struct opts *o, enum atk_kind k)
{
	struct atk_victim_opts vo = {
		.session = "victim-later", .uid = ATK_VICTIM,
		.interval_ns = o->interval_ns, .delay_ns = o->delay_ns,
		.delay_max_ns = o->delay_max_ns, .duration_ns = o->duration_ns,
		.grace_ns = 5 * S, .nice = o->nice, .rt = o->rt,
		.align_ns = k == ATK_BURST ? ATK_BURST_GRID_NS : 0,
	};
	struct atk_attack_opts ao = {
		.uid = ATK_NOBODY, .victim_session = "victim-later",
		.victim_uid = ATK_VICTIM, .payload = o->payload,
		.max_timers = 10000000, .max_conns = 4096,
		.max_deliveries = o->max_deliveries,
	};
	struct atk_victim_result *v = calloc(1, sizeof(*v));
	struct atk_attack_result ar = { 0 };
	struct atk_child ach = { 0 }, vch;
	struct daemon d;
	char err[256] = "", refusals[512] = "";
	size_t off = 0;
	uint64_t t0, t1, p99;
	int64_t cpu0, cpu1;
	long lines0, lines1;
	uint64_t rss;
	bool ok, alive;
	struct turns turns;
	char turn_col[160] = "-", fires_col[96] = "-";

	if (!v || daemon_start(o, k, &d) != 0) {
		free(v);
		return false;
	}
	vo.sock = ao.sock = d.sock;
	if (k != ATK_NONE && atk_attack_start(k, &ao, &ach, 600000, err, sizeof(err)) != 0) {
		printf("| %s | attacker failed: %s |\n", atk_name(k), err);
		daemon_stop(&d, 0, 0, &turns);
		free(v);
		return false;
	}
	lines0 = atk_count_lines(d.log);
	cpu0 = load_proc_cpu_ns(d.pid);
	t0 = load_now_ns();
	if (atk_victim_start(&vo, &vch) != 0) {
		perror("bwattack: fork");
		exit(2);
	}
	atk_victim_finish(&vch, (int)((o->duration_ns + 5 * S) / MS) + 30000, v);
	t1 = load_now_ns();
	cpu1 = load_proc_cpu_ns(d.pid);
	lines1 = atk_count_lines(d.log);
	rss = load_proc_rss(d.pid);
	if (k != ATK_NONE)
		atk_attack_stop(&ach, 60000, &ar);
	alive = daemon_stop(&d, t0, t1, &turns);
	for (int c = 1; c < ATK_CODES; c++)
		if (ar.refused[c])
			off += (size_t)snprintf(refusals + off, sizeof(refusals) - off, "%s%s %" PRIu64,
						off ? ", " : "", bwc_server_error_name(c),
						ar.refused[c]);
	if (turns.have)
		snprintf(turn_col, sizeof(turn_col), "%.2f / %.2f (%llu, %llu, %llu); %.2f / %.2f",
			 (double)turns.run.max_cpu / 1e6, (double)turns.run.max_wall / 1e6,
			 turns.run.over[0], turns.run.over[1], turns.run.over[2],
			 (double)turns.life.max_cpu / 1e6, (double)turns.life.max_wall / 1e6);
	if (ar.fires) {
		int n = snprintf(fires_col, sizeof(fires_col), "%" PRIu64 " (%" PRIu64 ")",
				 ar.fires, ar.redelivered);

		if (ar.ack_timeout_ns)
			snprintf(fires_col + n, sizeof(fires_col) - (size_t)n,
				 ", ack timeout %g ms", ms(ar.ack_timeout_ns));
		else if (k == ATK_SINGLEACK)
			snprintf(fires_col + n, sizeof(fires_col) - (size_t)n,
				 ", %.0f single Acks/s written", (double)(ar.ops - ar.conns) /
				 ((double)(t1 - t0) / 1e9));
	}
	p99 = load_hist_quantile(&v->rx, 0.99);
	ok = alive && v->fires && v->fires == v->scheduled && !v->lost && !v->early &&
	     !v->refused && !v->foreign && !v->repeated && ms(p99) <= o->target_ms &&
	     ms(v->rx.max) <= o->target_max_ms;
	printf("| %s | %" PRIu64 "/%" PRIu64 " | %" PRIu64 "/%" PRIu64 "/%" PRIu64 "/%" PRIu64
	       " | %.2f | %.2f | %.2f | %.2f | %.2f | %" PRIu64 "/%" PRIu64 "/%" PRIu64
	       " (%.1f s) | %s | %s | %.0f %% | %s | %.0f | %.1f | %s%s |\n",
	       atk_name(k), v->fires, v->scheduled, v->lost, v->early, v->refused,
	       v->foreign + v->repeated, ms(load_hist_quantile(&v->rx, 0.5)), ms(p99),
	       ms(v->rx.max), ms(load_hist_quantile(&v->fired, 0.99)),
	       ms(load_hist_quantile(&v->rtt, 0.99)), ar.conns, ar.sessions, ar.timers,
	       ar.ready_s, k == ATK_NONE ? "-" : refusals[0] ? refusals : "**none**",
	       fires_col, cpu0 >= 0 && cpu1 >= 0 ? 100.0 * (double)(cpu1 - cpu0) / (double)(t1 - t0) : -1.0,
	       turn_col,
	       (double)rss / (1 << 20), (double)(lines1 - lines0) / ((double)(t1 - t0) / 1e9),
	       ok ? "met" : "**missed**", alive ? "" : " (daemon died)");
	if (k == ATK_POISON || k == ATK_CRASHLOOP)
		crash_rows[ncrash++] = (struct crash_row){
			.k = k, .c = ar.crash, .p99_ms = ms(p99), .max_ms = ms(v->rx.max),
			.cpu_pct = cpu0 >= 0 && cpu1 >= 0 ?
				   100.0 * (double)(cpu1 - cpu0) / (double)(t1 - t0) : -1.0,
		};
	if (v->error[0])
		fprintf(stderr, "bwattack: %s: victim: %s\n", atk_name(k), v->error);
	if (ar.error[0])
		fprintf(stderr, "bwattack: %s: attacker: %s\n", atk_name(k), ar.error);
	fflush(stdout);
	free(v);
	return ok;
}

/* The crash-loop attacks side by side (issue 21: a session under a
 * crash-looping consumer costs the daemon no more than that consumer's
 * reconnects); false when an ordinary fire was stuck or the poison never
 * reached NAME.dead. */
static bool crash_table(void)
{
	bool ok = true;

	if (!ncrash)
		return true;
	printf("\nThe crash-loop attacks: one named session, an ordinary fire due every 5 ms,"
	       " its consumer acknowledging each and restarting 100 ms after each crash (on"
	       " the poison fire, or crashloop: after its first batch).\n\n"
	       "| attack | active s | consumer restarts/s | ordinary fires acked/scheduled |"
	       " stuck (due > 1 s before the end, not acked) | poison fires received |"
	       " max_deliveries | poison to NAME.dead: times, first s, slowest s |"
	       " deliveries when dead-lettered | daemon CPU ms/s |"
	       " victim p99 / max ms |\n"
	       "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < ncrash; i++) {
		const struct crash_row *r = &crash_rows[i];
		const struct atk_crash *c = &r->c;
		double secs = c->active_s > 0 ? c->active_s : 1;

		printf("| %s | %.1f | %.1f | %" PRIu64 "/%" PRIu64 " | %" PRIu64 " | %" PRIu64
		       " | %" PRIu32 " | ", atk_name(r->k), c->active_s, (double)c->restarts / secs,
		       c->acked, c->scheduled, c->stuck, c->poisoned, c->max_deliveries);
		if (r->k == ATK_POISON)
			printf("%" PRIu64 ", %.2f, %.2f | %" PRIu64 " |", c->dead,
			       (double)c->dead_first_ns / 1e9, (double)c->dead_max_ns / 1e9,
			       c->dead_deliveries);
		else
			printf("- | - |");
		printf(" %.1f | %.2f / %.2f |\n", r->cpu_pct * 10.0, r->p99_ms, r->max_ms);
		ok &= !c->stuck && (r->k != ATK_POISON || c->dead > 0);
	}
	return ok;
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct rlimit rl;
	bool all = true;

	if (parse(argc, argv, &o) != 0) {
		usage(stderr);
		return 2;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "bwattack: needs root, to run the attacker as uid %d and the victim as uid %d\n",
			ATK_NOBODY, ATK_VICTIM);
		return 2;
	}
	/* The attackers hold hundreds of connections. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	signal(SIGPIPE, SIG_IGN);
	printf("The victim: a oneshot every %g ms, due ", ms(o.interval_ns));
	if (o.delay_max_ns > o.delay_ns)
		printf("%g to %g ms ahead (by key)", ms(o.delay_ns), ms(o.delay_max_ns));
	else
		printf("%g ms ahead", ms(o.delay_ns));
	printf(", for %g s; it and the daemon at nice %d%s%.0d.  Target: lateness at receipt"
	       " p99 <= %g ms and max <= %g ms, nothing lost, early or refused.\n\n",
	       (double)o.duration_ns / 1e9, o.nice, o.rt > 0 ? ", SCHED_FIFO " : "", o.rt,
	       o.target_ms, o.target_max_ms);
	printf("| attack | victim fires | lost/early/refused/foreign | p50 ms | p99 ms | max ms | "
	       "daemon p99 ms | Schedule reply p99 ms | attacker conns/sessions/timers (build-up) | "
	       "attacker refused | fires the attacker read (redelivered) | daemon CPU | "
	       "loop turn max CPU / wall ms in the victim's run (turns over 1/5/10 ms CPU); in the daemon's life | "
	       "daemon RSS MiB | log lines/s | target |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	fflush(stdout);
	for (int k = 0; k < ATK_N; k++)
		if (o.want[k])
			all &= run_one(&o, (enum atk_kind)k);
	all &= crash_table();
	return all ? 0 : 1;
}
