/*
 * load_leeway.c - bwload --leeway: what a timer's leeway buys (issue 15),
 * measured against a running bitwheeld through libbitwheel-client.
 *
 *   lateness  one anonymous consumer arms oneshot timers in three leeway
 *             classes (0, 10 ms, 1 s: key % 3), interleaved, with delays
 *             uniform in [min, max], paced at `rate` a second for
 *             `duration`; each fire's lateness, by class, as the consumer
 *             receives it (receive time - deadline) and as the daemon
 *             fired it (fired_at - deadline).
 *   coalesce  one anonymous consumer with `timers` periodic timers of
 *             period `period`, first deadlines spread evenly over one
 *             period, leeway `leeway` (BWC_LEEWAY_DEFAULT: the daemon's,
 *             period / 64); run once without and once with Hello's
 *             coalesce, each for `duration` after one period of warm-up.
 *             Per run: fires received, the consumer's wake-ups (polls
 *             that read at least one fire), the daemon's writes that
 *             carried fires (Metrics.fire_writes: root only, and the
 *             daemon must serve nobody else meanwhile), the daemon's CPU
 *             (its main thread's run time, /proc/PID/schedstat: bitwheeld
 *             without --state-dir is one thread; utime + stime count in
 *             10 ms ticks, too coarse for a few seconds of an idle
 *             daemon), and each fire's lateness.
 *
 * Both are bounded in time: a run ends at its duration plus a drain of
 * the largest leeway, whatever arrived.
 */
#include "bwload.h"
#include "load_leeway.h"

#include <bitwheel-client.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

static const uint64_t class_leeway[LW_CLASSES] = { 0, 10 * MS, 1000 * MS };

struct lw_run {
	struct bwc_client *c;
	struct load_hist *late, *srv;   /* by class, or one                  */
	unsigned nclass;
	uint64_t fires, wakeups, errors;
	bool woke;                      /* this dispatch read a fire          */
};

static void on_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct lw_run *r = arg;
	unsigned k = (unsigned)(f->key % r->nclass);
	uint64_t now = load_now_ns();

	(void)c;
	load_hist_add(&r->late[k], now > f->deadline_ns ? now - f->deadline_ns : 0);
	load_hist_add(&r->srv[k], f->fired_ns - f->deadline_ns);
	r->fires++;
	r->woke = true;
}

static void on_reply(struct bwc_client *c, const struct bwc_reply *rep,
		     void *arg)
{
	struct lw_run *r = arg;

	(void)c;
	if (rep->status != 0)
		r->errors++;
}

static int lw_connect(const char *socket, bool coalesce, struct lw_run *r,
		      char *err, size_t errlen)
{
	if (bwc_new(&r->c) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	bwc_set_coalesce(r->c, coalesce);
	bwc_set_window(r->c, 4096);
	bwc_set_fire_handler(r->c, on_fire, r);
	if (bwc_connect(r->c, socket, NULL) != 0) {
		snprintf(err, errlen, "connect: %s", bwc_errmsg(r->c));
		bwc_free(r->c);
		r->c = NULL;
		return -1;
	}
	return 0;
}

/* Poll and dispatch until t_end; a dispatch that read a fire is a
 * wake-up.  -1 when the connection failed. */
static int lw_serve(struct lw_run *r, uint64_t t_end, char *err, size_t errlen)
{
	uint64_t now;

	while ((now = load_now_ns()) < t_end) {
		struct pollfd pfd = { .fd = bwc_fd(r->c),
				      .events = bwc_poll_events(r->c) };
		uint64_t left_ms = (t_end - now) / MS + 1;

		if (poll(&pfd, 1, left_ms > 100 ? 100 : (int)left_ms) < 0)
			continue;
		r->woke = false;
		if (bwc_dispatch(r->c) != 0) {
			snprintf(err, errlen, "dispatch: %s", bwc_errmsg(r->c));
			return -1;
		}
		r->wakeups += r->woke;
	}
	return 0;
}

static int lw_send(struct lw_run *r, const struct bwc_timer *t, uint64_t leeway,
		   char *err, size_t errlen)
{
	int rc;

	while ((rc = bwc_send_schedule_leeway(r->c, t, leeway, on_reply, r)) ==
	       BWC_EAGAIN)
		if (bwc_dispatch(r->c) != 0)
			break;
	if (rc != 0)
		snprintf(err, errlen, "schedule: %s", bwc_errmsg(r->c));
	return rc ? -1 : 0;
}

int load_leeway_lateness(const char *socket, const struct lw_lateness_opts *o,
			 struct lw_lateness *out, char *err, size_t errlen)
{
	struct lw_run r = { .late = out->late, .srv = out->srv,
			    .nclass = LW_CLASSES };
	uint64_t seed = 0x1ee3a7, start, t_end, n = 0;
	uint64_t span = o->max_delay_ns - o->min_delay_ns;

	memset(out, 0, sizeof(*out));
	if (lw_connect(socket, false, &r, err, errlen))
		return -1;
	start = load_now_ns();
	t_end = start + o->duration_ns;
	while (load_now_ns() < t_end) {
		uint64_t due = start + (uint64_t)((double)n * 1e9 / (double)o->rate);
		struct bwc_timer t = { .key = n, .absolute = true };

		if (load_now_ns() < due) {
			if (lw_serve(&r, due, err, errlen))
				goto fail;
			continue;
		}
		t.when_ns = load_now_ns() + o->min_delay_ns +
			(span ? load_rand(&seed) % (span + 1) : 0);
		if (lw_send(&r, &t, class_leeway[n % LW_CLASSES], err, errlen))
			goto fail;
		n++;
	}
	if (lw_serve(&r, load_now_ns() + o->max_delay_ns +
		     class_leeway[LW_CLASSES - 1] + 200 * MS, err, errlen))
		goto fail;
	out->scheduled = n;
	out->fires = r.fires;
	out->errors = r.errors;
	bwc_free(r.c);
	return 0;
fail:
	bwc_free(r.c);
	return -1;
}

/* The daemon's fire_writes: root only (0 and *have false otherwise). */
static uint64_t fire_writes(struct bwc_client *c, bool *have)
{
	struct bwc_metrics m;

	if (bwc_metrics(c, NULL, &m) != 0 || !m.present) {
		*have = false;
		return 0;
	}
	return m.fire_writes;
}

static int coalesce_run(const char *socket, const struct lw_coalesce_opts *o,
			bool coalesce, struct lw_coalesce_row *row, char *err,
			size_t errlen)
{
	struct lw_run r = { .late = &row->late, .srv = &row->srv, .nclass = 1 };
	uint64_t start, t0, t_end, w0 = 0, w1 = 0, f0;
	int64_t cpu0, cpu1;

	memset(row, 0, sizeof(*row));
	row->coalesce = coalesce;
	if (lw_connect(socket, coalesce, &r, err, errlen))
		return -1;
	start = load_now_ns() + 100 * MS;
	for (uint64_t k = 0; k < o->timers; k++) {
		struct bwc_timer t = {
			.key = k, .absolute = true, .period_ns = o->period_ns,
			.when_ns = start + o->period_ns * k / o->timers,
		};

		if (lw_send(&r, &t, o->leeway_ns, err, errlen))
			goto fail;
	}
	/* A period of warm-up: every timer has fired once. */
	t0 = start + o->period_ns + 50 * MS;
	if (lw_serve(&r, t0, err, errlen))
		goto fail;
	memset(&row->late, 0, sizeof(row->late));
	memset(&row->srv, 0, sizeof(row->srv));
	row->have_writes = true;
	w0 = fire_writes(r.c, &row->have_writes);
	f0 = r.fires;
	r.wakeups = 0;
	cpu0 = load_proc_run_ns(o->daemon_pid);
	t_end = load_now_ns() + o->duration_ns;
	if (lw_serve(&r, t_end, err, errlen))
		goto fail;
	cpu1 = load_proc_run_ns(o->daemon_pid);
	w1 = fire_writes(r.c, &row->have_writes);
	row->fires = r.fires - f0;
	row->wakeups = r.wakeups;
	row->writes = w1 - w0;
	row->cpu_ns = cpu0 >= 0 && cpu1 >= cpu0 ? cpu1 - cpu0 : -1;
	row->errors = r.errors;
	bwc_free(r.c);
	return 0;
fail:
	bwc_free(r.c);
	return -1;
}

int load_leeway_coalesce(const char *socket, const struct lw_coalesce_opts *o,
			 struct lw_coalesce_row out[2], char *err, size_t errlen)
{
	for (int co = 0; co < 2; co++)
		if (coalesce_run(socket, o, co, &out[co], err, errlen))
			return -1;
	return 0;
}
