/*
 * clock.c - wall-clock timers: deadlines on CLOCK_REALTIME (Schedule's
 * realtime_ns) and calendar timers (Schedule's calendar) kept on the
 * monotonic wheel, and the clock steps that move them (PROTOCOL.md,
 * "Clocks" and "Calendar timers").
 *
 * The wheel counts CLOCK_MONOTONIC, which no one steps.  A wall-clock
 * timer is placed on it by the offset between the clocks when it is
 * placed: at realtime_ns - real_now after mono_now (at once when that is
 * past).  The offset changes when the wall clock is stepped (settimeofday,
 * NTP's step, an administrator, a VM resumed): the kernel tells, the way
 * systemd learns it, through a timerfd on CLOCK_REALTIME armed with
 * TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET at the end of time, whose
 * read() fails with ECANCELED after every step.  Then every wall-clock
 * timer is placed again: one whose deadline the step passed fires at once,
 * marked late; one a step back moved away waits longer.  A step the
 * daemon has not heard of yet cannot make one early either: when its slot
 * comes due, the timer fires only if CLOCK_REALTIME has reached its
 * deadline, and is placed again otherwise (bwd_wall_due).
 *
 * Near and far.  Placing every wall-clock timer again at each step cost
 * O(w log w) in the loop, some 2.5 us a timer: a host that sets its clock
 * ten times a second (a paravirtualised guest has been seen to) kept the
 * loop busy with 100,000 of them.  The kernel's answer, a base of its own
 * for CLOCK_REALTIME timers ordered by their wall-clock instants, is
 * approximated on the one wheel: a timer due within BWD_WALL_NEAR_NS
 * (2 s) is placed at its deadline and is on the state's near list; one
 * due later is placed that much earlier, at a check, where
 * bwd_wall_due's re-placement puts it at its deadline by the offset of
 * that moment (bwd_wall_arm_at, for every arming and re-arming of one).
 * A step forward by d leaves a far timer's check before its instant as
 * long as d < BWD_WALL_NEAR_NS, and every timer a step of less than that
 * passed is a near one; a step back, of any size, only brings checks
 * earlier, where each far timer is placed by the clock of that moment.
 * So a step that moved the offset forward by at most half the lead from
 * the least offset any far timer was placed by (wall_lo), or back, and
 * left no far calendar timer's base ahead of the clock (none later than
 * wall_base_hi: after a step back below it the base has to come down,
 * and with it maybe the next elapse), places only the near ones again.
 * Any other step, and a change of the time zones, places every one, and
 * the bounds start again from there.  A calendar timer found with its
 * base ahead of the clock (a step back not heard of yet) stays near
 * (keep_near) until a step brings the base down; a far timer whose
 * check finds its instant passed by a near-only step (the check was
 * overdue) fires late, as a full pass would have marked it; and a check
 * after which no step has placed timers (wall_pass) keeps the deadline
 * without reading a clock.  A check is one more wheel callback, which
 * Stats does not count as a fire (nor a move at a step as a cancel and
 * an insert).
 *
 * Calendar timers.  A calendar timer is a wall-clock timer whose instant
 * is its next elapse (calendar.c, systemd's rules) plus its jitter, and
 * which the wheel's callback re-arms like a periodic one.  Like systemd's
 * timer units it keeps a base, the wall-clock time it last fired at (at
 * first its Schedule's): the next elapse is the first after it.  So a
 * fire moves the base to the wall clock of that moment, and elapses a
 * forward step skipped coalesce into that one late fire; a step back
 * below the base brings the base down to the wall clock (systemd's
 * timer_time_change), and elapses in between come again.  The jitter
 * of an elapse is bwd_mix(seed ^ elapse) (fresh per elapse) or
 * bwd_mix(seed) (fixed) modulo jitter_ns + 1: no state but the seed,
 * which the journal keeps, so a restart draws the same.
 *
 * Boottime timers.  A timer of Schedule.clock CLOCK_BOOTTIME counts the
 * time the host spends suspended, which CLOCK_MONOTONIC, the wheel's,
 * does not.  It is kept the way a wall-clock timer is: its deadline on
 * CLOCK_BOOTTIME in the same map (a third bit, boot, says which clock),
 * placed on the wheel at deadline - (boot_now - mono_now).  That offset
 * only grows, at a suspend, and the kernel tells no one of a resume; but
 * a CLOCK_BOOTTIME timerfd (absolute) counts the suspend, so one armed at
 * the earliest boottime deadline to come expires at the resume if the
 * suspend passed it, and on time otherwise.  When it expires the offset
 * is read: moved by more than BOOT_SLACK_NS (two clock reads are never
 * quite the same), every boottime timer is placed again, as after a wall
 * clock step (one the suspend passed fires at once, marked late); the
 * timerfd is then armed at the next deadline after the clock.  A timer's
 * slot coming due checks CLOCK_BOOTTIME too (bwd_wall_due), so a resume
 * not heard of yet cannot make one early.  A periodic one steps its
 * boottime deadline by its period (bwd_boot_advance); periods a suspend
 * passed are skipped, as a monotonic timer's late periods are.
 *
 * Zone changes.  The zones a calendar's spec names are loaded once
 * (tz.c's cache).  When the local zone's file (TZ's, else
 * /etc/localtime), /etc/timezone or the tz database changes, an inotify
 * of their directories says so; a second after the last such event the
 * cache is dropped, every calendar timer's spec parsed again and its
 * next elapse placed again (bwd_state_zones_changed), as after a step.
 * A directory new to the database (TZDIR's, else /usr/share/zoneinfo) is
 * watched from then on.
 * SIGHUP does the same at once, for a change inotify could not see.
 *
 * Data: a wall-clock timer has a bit (wall) and its instant in the
 * state's map of them, keyed by the timer's address (struct bwd_wall, 56
 * bytes and malloc's header, uncharged to the budgets: bounded by the
 * timers the uid may hold), which it joins when made and leaves when
 * freed; a near one is also on the state's near list (wall_near), linked
 * through the same struct.  A calendar timer has a second bit (cal) and its struct bwd_calt
 * from that entry: the parsed spec, the spec as given and normalized, the
 * base, elapse, jitter and grace, charged to its owner's bytes (cost).
 * A fire of one keeps its instant (a calendar timer's: its elapse) in
 * place of its count (a oneshot's is 0).  Monotonic timers and fires are
 * not one byte larger.  The server owns the one timerfd (struct
 * bwd_clock).  CLOCK_REALTIME and CLOCK_BOOTTIME are read through the
 * state (bwd_state_real, bwd_state_boot): the host's, or the clocks of
 * the delivery simulation (tests/sim.c), which steps and suspends them.
 *
 * Costs: a step forward within half the checks' lead costs O(n log n)
 * for the n wall-clock timers due within BWD_WALL_NEAR_NS (a walk of the
 * near list); any other step O(w log w) for all w: wheel cancels and
 * inserts, in the order of their new deadlines, then session and key (a
 * sort, so that those it passed fire in that order and not in the map's,
 * whose keys are addresses), a resume the same for the boottime timers;
 * a far timer one more wheel callback and a map lookup at its check,
 * every arming of a wall-clock timer a map lookup (its near link); every
 * expiry of the boottime timerfd (once per boottime deadline at most) a
 * walk of the map to find the next one, a zone change O(calendar timers)
 * parses and a next-elapse search for each calendar timer; a wall-clock
 * timer's fire a map lookup and one clock_gettime(CLOCK_REALTIME) (vDSO), a
 * calendar timer's a next-elapse search too (calendar.c says its cost);
 * monotonic timers nothing beyond a bit test in the wheel's callback
 * (the boottime bit is the wall bit's companion: no byte more).
 * Periodic wall-clock timers are refused (request.c): a recurrence stated
 * in wall-clock time is the calendar's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <systemd/sd-id128.h>
#include <time.h>
#include <unistd.h>

#include "calendar-internal.h"
#include "state-internal.h"

uint64_t bwd_wall_place(uint64_t wall_ns, uint64_t mono_now, uint64_t real_now)
{
	if (wall_ns <= real_now)
		return mono_now;
	if (wall_ns - real_now > UINT64_MAX - mono_now)
		return UINT64_MAX;
	return mono_now + (wall_ns - real_now);
}

uint64_t bwd_boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The clock t's instant is on now. */
static uint64_t clock_of(const struct bwd_state *st, const struct bwd_timer *t)
{
	return t->boot ? bwd_state_boot(st) : bwd_state_real(st);
}

/* Two reads of the clocks' offset closer than this are the same: a
 * suspend is seconds at least, and the slot check keeps a timer from
 * being early by what this misses. */
#define BOOT_SLACK_NS 1000000u

static void clock_boot_arm(struct bwd_clock *c, uint64_t boot_ns);

/* The resume detector at boot_ns, when that is earlier than where it is. */
static void boot_note(struct bwd_state *st, uint64_t boot_ns)
{
	if (boot_ns >= st->boot_next)
		return;
	st->boot_next = boot_ns;
	if (st->clock)
		clock_boot_arm(st->clock, boot_ns);
}

/* A calendar timer's own. */
struct bwd_calt {
	struct bwd_cal *cal;
	uint64_t base_ns;          /* the next elapse is the first after it  */
	uint64_t elapse_ns;        /* the one waited for; UINT64_MAX: none   */
	uint64_t jitter_ns, seed, grace_ns;
	uint64_t cost;             /* charged to its owner's bytes           */
	uint64_t interval_ns;      /* struct bwd_calendar's                  */
	bool fixed, has_grace;
	const char *listed;        /* normalized, or spec when that is long  */
	char spec[];               /* as given; then the normalized form     */
};

/* A wall-clock timer's instant, in the state's map keyed by the timer's
 * address; a calendar timer's calendar; its link in the state's list of
 * near ones (near_pprev NULL: not in it), and whether it stays there
 * whatever its deadline (a calendar's base ahead of the clock). */
struct bwd_wall {
	struct bwd_map_node node;
	uint64_t wall_ns;
	struct bwd_calt *cal;
	struct bwd_wall *near_next, **near_pprev;
	uint32_t pass;             /* the state's wall_pass when placed far  */
	bool keep_near;
};

static struct bwd_wall *wall_find(const struct bwd_state *st,
				  const struct bwd_timer *t)
{
	struct bwd_map_node *n = bwd_map_find(&st->wall, (uint64_t)(uintptr_t)t);

	return n ? bwd_container_of(n, struct bwd_wall, node) : NULL;
}

/* What a calendar of this parse and spec is charged: its block, the
 * parsed spec, and their allocator headers. */
static uint64_t cal_cost(const struct bwd_cal *cal, size_t spec_len,
			 size_t norm_len)
{
	return sizeof(struct bwd_calt) + spec_len + norm_len + 2 +
		bwd_cal_bytes(cal) + 2 * 16;
}

/* The jitter of elapse e. */
static uint64_t cal_jitter(const struct bwd_calt *c, uint64_t e)
{
	if (!c->jitter_ns)
		return 0;
	return bwd_mix(c->fixed ? 0 : e, c->seed) % (c->jitter_ns + 1);
}

/* w's calendar's next elapse after its base, and w's instant: that and
 * its jitter.  false when it has none (both UINT64_MAX). */
static bool cal_place(struct bwd_wall *w)
{
	struct bwd_calt *c = w->cal;
	uint64_t e, j;

	if (bwd_cal_next(c->cal, c->base_ns, &e)) {
		c->elapse_ns = w->wall_ns = UINT64_MAX;
		return false;
	}
	j = cal_jitter(c, e);
	c->elapse_ns = e;
	w->wall_ns = e > UINT64_MAX - j ? UINT64_MAX : e + j;
	return true;
}

/* The calendar of c->spec, parsed and normalized into a new block (the
 * base and jitter from c): 0, -EINVAL, -ENOMEM. */
static int calt_new(const struct bwd_calendar *c, struct bwd_calt **out,
		    char *err, size_t errlen)
{
	char norm[BWD_CAL_TIMER_SPEC_MAX + 1];
	size_t len = strlen(c->spec), nlen;
	struct bwd_cal *cal;
	struct bwd_calt *t;
	int r;

	*out = NULL;
	if (len > BWD_CAL_TIMER_SPEC_MAX) {
		bwd_tz_seterr(err, errlen, "calendar spec of %zu bytes, longer than %u",
			      len, BWD_CAL_TIMER_SPEC_MAX);
		return -EINVAL;
	}
	r = bwd_cal_parse(c->spec, &cal, err, errlen);
	if (r)
		return r == -ENOMEM ? r : -EINVAL;
	/* A normalized form too long to list is listed as given. */
	nlen = bwd_cal_normalize(cal, norm, sizeof(norm)) ? 0 : strlen(norm);
	t = malloc(sizeof(*t) + len + nlen + 2);
	if (!t) {
		bwd_cal_free(cal);
		return -ENOMEM;
	}
	*t = (struct bwd_calt){
		.cal = cal, .base_ns = c->base_ns, .jitter_ns = c->jitter_ns,
		.seed = c->seed, .grace_ns = c->grace_ns, .fixed = c->fixed,
		.has_grace = c->has_grace, .cost = cal_cost(cal, len, nlen),
		.interval_ns = c->interval_ns,
	};
	memcpy(t->spec, c->spec, len + 1);
	memcpy(t->spec + len + 1, norm, nlen);
	t->spec[len + 1 + nlen] = '\0';
	t->listed = nlen ? t->spec + len + 1 : t->spec;
	*out = t;
	return 0;
}

static void calt_free(struct bwd_calt *c)
{
	if (c) {
		bwd_cal_free(c->cal);
		free(c);
	}
}

int bwd_cal_check(struct bwd_calendar *c, uint64_t *wall_ns, char *err,
		  size_t errlen)
{
	struct bwd_wall w = { .cal = NULL };
	int r = calt_new(c, &w.cal, err, errlen);
	uint64_t next;

	if (r)
		return r;
	c->cost = w.cal->cost;
	c->interval_ns = 0;
	r = 0;
	if (!cal_place(&w)) {
		bwd_tz_seterr(err, errlen, "calendar spec '%s' elapses no more", c->spec);
		r = -ENOENT;
	} else if (!bwd_cal_next(w.cal->cal, w.cal->elapse_ns, &next)) {
		c->interval_ns = next - w.cal->elapse_ns;
	}
	*wall_ns = w.wall_ns;
	calt_free(w.cal);
	return r;
}

/* The host's part of a fixed jitter: systemd's FixedRandomDelay= mixes in
 * the machine id so that hosts with the same timers spread apart. */
static uint64_t host_key(void)
{
	static const sd_id128_t app = SD_ID128_MAKE(6b,69,9e,1c,5d,c2,4e,3f,
						    a1,0b,77,d4,c8,39,52,e0);
	static uint64_t key;
	static bool known;
	sd_id128_t id;

	if (!known) {
		known = true;
		if (sd_id128_get_machine_app_specific(app, &id) == 0)
			key = id.qwords[0] ^ id.qwords[1];
	}
	return key;
}

uint64_t bwd_cal_seed(const struct bwd_session *s, uint64_t key, bool fixed)
{
	uint64_t seed;

	if (fixed)
		return bwd_mix(key, host_key() ^ (s->name ?
			bwd_name_hash(s->owner, s->name) : bwd_mix(s->id, s->owner)));
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
		seed = bwd_mix(key, s->state->seed ^ bwd_realtime_ns());
	return seed;
}

static void near_unlink(struct bwd_wall *w)
{
	if (!w->near_pprev)
		return;
	*w->near_pprev = w->near_next;
	if (w->near_next)
		w->near_next->near_pprev = w->near_pprev;
	w->near_pprev = NULL;
}

static void near_link(struct bwd_state *st, struct bwd_wall *w)
{
	if (w->near_pprev)
		return;
	w->near_next = st->wall_near;
	if (w->near_next)
		w->near_next->near_pprev = &w->near_next;
	w->near_pprev = &st->wall_near;
	st->wall_near = w;
}

int bwd_wall_add(struct bwd_state *st, struct bwd_timer *t, uint64_t wall_ns,
		 const struct bwd_calendar *cal)
{
	struct bwd_wall *w = malloc(sizeof(*w));
	int r;

	if (!w)
		return -ENOMEM;
	w->wall_ns = wall_ns;
	w->cal = NULL;
	w->near_pprev = NULL;
	w->pass = 0;
	w->keep_near = false;
	if (cal) {
		r = calt_new(cal, &w->cal, NULL, 0);
		if (r) {
			free(w);
			return r;
		}
		/* None left: UINT64_MAX, which a restore's end frees. */
		cal_place(w);
		bwd_acct_charge(st, t->session->acct, (int64_t)w->cal->cost);
		st->stats.bytes += w->cal->cost;
		t->cal = true;
	}
	w->node.key = (uint64_t)(uintptr_t)t;
	bwd_map_insert(&st->wall, &w->node);
	st->stats.bytes += sizeof(*w);
	t->wall = true;
	if (t->boot)
		boot_note(st, wall_ns);
	return 0;
}

void bwd_wall_remove(struct bwd_state *st, struct bwd_timer *t)
{
	struct bwd_wall *w;

	if (!t->wall || !(w = wall_find(st, t)))
		return;
	bwd_map_remove(&st->wall, &w->node);
	near_unlink(w);
	st->stats.bytes -= sizeof(*w);
	if (w->cal) {
		bwd_acct_charge(st, t->session->acct, -(int64_t)w->cal->cost);
		st->stats.bytes -= w->cal->cost;
		calt_free(w->cal);
	}
	t->wall = t->cal = t->boot = false;
	free(w);
}

uint64_t bwd_wall_ns(const struct bwd_state *st, const struct bwd_timer *t)
{
	const struct bwd_wall *w = t->wall ? wall_find(st, t) : NULL;

	return w ? w->wall_ns : 0;
}

uint64_t bwd_wall_elapse(const struct bwd_state *st, const struct bwd_timer *t)
{
	const struct bwd_wall *w = t->wall ? wall_find(st, t) : NULL;

	return !w ? 0 : w->cal ? w->cal->elapse_ns : w->wall_ns;
}

const char *bwd_cal_info(const struct bwd_state *st, const struct bwd_timer *t,
			 struct bwd_calendar *out)
{
	const struct bwd_wall *w = t->cal ? wall_find(st, t) : NULL;
	const struct bwd_calt *c = w ? w->cal : NULL;

	if (!c)
		return NULL;
	*out = (struct bwd_calendar){
		.spec = c->spec, .base_ns = c->base_ns, .jitter_ns = c->jitter_ns,
		.seed = c->seed, .grace_ns = c->grace_ns, .cost = c->cost,
		.interval_ns = c->interval_ns,
		.fixed = c->fixed, .has_grace = c->has_grace,
	};
	return c->listed;
}

void bwd_cal_record(const struct bwd_calendar *c, struct bwd_record *r)
{
	r->flags |= BWD_RECF_CAL | (c->fixed ? BWD_RECF_CAL_FIXED : 0) |
		(c->has_grace ? BWD_RECF_CAL_GRACE : 0);
	r->name = c->spec;
	r->name_len = (uint8_t)strlen(c->spec);
	r->jitter_ns = c->jitter_ns;
	r->seed = c->seed;
	r->base_ns = c->base_ns;
	r->grace_ns = c->grace_ns;
}

/* Whether w's calendar base is ahead of the wall clock (real): a step
 * back, not heard of yet when it was placed by real, came after its last
 * fire or before a restart.  Such a timer stays near, so that the next
 * step, whichever, brings its base down (place_again). */
static void base_check(struct bwd_wall *w, uint64_t real)
{
	w->keep_near = w->cal && w->cal->base_ns > real;
}

/* bwd_wall_arm_at() with t's entry w at hand. */
static uint64_t wall_arm(struct bwd_state *st, struct bwd_timer *t,
			 struct bwd_wall *w, uint64_t now_ns)
{
	/* The offset it was placed by (bwd_wall_place): no clock read. */
	int64_t off = (int64_t)(w->wall_ns - t->deadline_ns);

	if (t->deadline_ns <= now_ns || t->deadline_ns - now_ns <= BWD_WALL_NEAR_NS ||
	    t->deadline_ns == UINT64_MAX || w->keep_near) {
		near_link(st, w);
		return t->deadline_ns;
	}
	near_unlink(w);
	w->pass = st->wall_pass;
	if (off < st->wall_lo)
		st->wall_lo = off;
	if (w->cal && w->cal->base_ns > st->wall_base_hi)
		st->wall_base_hi = w->cal->base_ns;
	return t->deadline_ns - BWD_WALL_NEAR_NS;
}

uint64_t bwd_wall_arm_at(struct bwd_state *st, struct bwd_timer *t,
			 uint64_t now_ns)
{
	struct bwd_wall *w;

	if (!t->wall || t->boot || !(w = wall_find(st, t)))
		return t->deadline_ns;
	return wall_arm(st, t, w, now_ns);
}

uint64_t bwd_wall_due(struct bwd_state *st, struct bwd_timer *t,
		      uint64_t now_ns)
{
	struct bwd_wall *w = wall_find(st, t);
	uint64_t real;

	if (!w)
		return 0;
	/* A far timer's check with no step placed since it was placed:
	 * its deadline stands, without a clock read. */
	if (!t->boot && t->deadline_ns > now_ns && w->pass == st->wall_pass)
		return wall_arm(st, t, w, now_ns);
	real = clock_of(st, t);
	base_check(w, real);
	if (real >= w->wall_ns) {
		/* Reached at its check, ahead of where the old offset put it:
		 * due now, and late if a step that placed only the near
		 * timers, since this one was placed, passed it (its check was
		 * overdue then). */
		if (t->deadline_ns > now_ns) {
			t->deadline_ns = now_ns;
			if (!t->boot && w->pass != st->wall_pass &&
			    w->wall_ns <= st->wall_pass_real)
				t->late = true;
		}
		return 0;
	}
	/* Never 0 nor now: the wheel fires a re-arm at its next poll. */
	t->deadline_ns = bwd_wall_place(w->wall_ns, now_ns, real) + 1;
	return t->boot ? t->deadline_ns : wall_arm(st, t, w, now_ns);
}

uint64_t bwd_cal_advance(struct bwd_state *st, struct bwd_timer *t,
			 uint64_t now_ns)
{
	struct bwd_wall *w = wall_find(st, t);
	uint64_t real = bwd_state_real(st);

	if (!w || !w->cal)
		return 0;
	/* Fired at real (never before its elapse): the elapses up to it
	 * are this fire's, however many a step skipped. */
	w->cal->base_ns = real > w->cal->elapse_ns ? real : w->cal->elapse_ns;
	base_check(w, real);
	if (!cal_place(w))
		return 0;
	/* After now: the elapse is after real. */
	t->deadline_ns = bwd_wall_place(w->wall_ns, now_ns, real);
	return t->deadline_ns;
}

uint64_t bwd_boot_advance(struct bwd_state *st, struct bwd_timer *t,
			  uint64_t now_ns)
{
	struct bwd_wall *w = wall_find(st, t);
	uint64_t boot = bwd_state_boot(st), next,
		 off = boot - bwd_state_now(st);

	/* now_ns on CLOCK_BOOTTIME (a replayed fire's is in the past). */
	if (!w || !(next = bwd_next_period(w->wall_ns, bwd_timer_period(t), now_ns + off)))
		return 0;
	w->wall_ns = next;
	boot_note(st, next);
	t->deadline_ns = bwd_wall_place(next, now_ns, boot);
	return t->deadline_ns;
}

void bwd_cal_replayed(struct bwd_state *st, struct bwd_timer *t,
		      uint64_t elapse_ns, uint64_t base_ns)
{
	struct bwd_wall *w = wall_find(st, t);

	if (!w || !w->cal)
		return;
	w->cal->base_ns = base_ns > elapse_ns ? base_ns : elapse_ns;
	cal_place(w);
}

bool bwd_cal_restore(struct bwd_state *st, struct bwd_timer *t, uint64_t real)
{
	struct bwd_wall *w = wall_find(st, t);
	struct bwd_calt *c = w ? w->cal : NULL;

	if (!c || !cal_place(w))
		return false;
	/* Missed while the daemon was down: once, late, unless by more
	 * than the grace (then the next elapse after now). */
	if (w->wall_ns <= real && c->has_grace &&
	    real - w->wall_ns > c->grace_ns) {
		c->base_ns = real;
		return cal_place(w);
	}
	base_check(w, real);
	return true;
}

/* t, placed again, armed at mono; false when that failed (it is lost). */
static bool rearm(struct bwd_state *st, struct bwd_timer *t, uint64_t mono)
{
	if (!bwd_wheels_arm(st, t, mono)) {
		st->stats.wall_moves[t->lane]++;
		return true;
	}
	bwd_log(BWD_LOG_ERR, "no memory to place a %s timer again: it is lost",
		t->boot ? "boottime" : "wall-clock");
	LANE(t, lost, 1);
	LANE(t, pending, -1);
	bwd_timer_free(st, t);
	return false;
}

/* The order timers placed again are armed in: by their new deadline,
 * then session and key, so that those a step passed (all due now) fire
 * in that order, not in the map's (its keys are addresses). */
static int rearm_cmp(const void *a, const void *b)
{
	const struct bwd_timer *x = *(struct bwd_timer *const *)a,
			       *y = *(struct bwd_timer *const *)b;

	if (x->deadline_ns != y->deadline_ns)
		return x->deadline_ns < y->deadline_ns ? -1 : 1;
	if (x->session->id != y->session->id)
		return x->session->id < y->session->id ? -1 : 1;
	return x->node.key < y->node.key ? -1 : x->node.key > y->node.key;
}

/* t (w's), placed again by the clocks read as mono and real: out of the
 * wheel, a calendar's base never ahead of the clock (systemd's
 * timer_time_change: after a step back, the elapses after the clock
 * come again), marked late when the clock passed its instant; then into
 * v to be armed in order, or armed at once when v could not be had. */
static void place_again(struct bwd_state *st, struct bwd_timer *t,
			struct bwd_wall *w, uint64_t mono, uint64_t real,
			struct bwd_timer **v, size_t *nv, uint64_t *n)
{
	bwd_wheels_disarm(st, t);
	if (w->cal) {
		if (w->cal->base_ns > real)
			w->cal->base_ns = real;
		w->keep_near = false;
		if (!cal_place(w)) {
			LANE(t, pending, -1);
			bwd_timer_free(st, t);
			return;
		}
	}
	if (w->wall_ns <= real)
		t->late = true;
	t->deadline_ns = bwd_wall_place(w->wall_ns, mono, real);
	if (v)
		v[(*nv)++] = t;
	else
		*n += rearm(st, t, mono);
}

/* Whether a wall clock now at real, off from CLOCK_MONOTONIC, leaves
 * every far timer's check before its instant (forward by at most half
 * the lead from the least offset one was placed by; a step back only
 * brings checks earlier) and no far calendar's base ahead of the clock
 * (none later than real): then only the near ones need placing again. */
static bool near_will_do(const struct bwd_state *st, int64_t off,
			 uint64_t real)
{
	return real >= st->wall_base_hi &&
	       (st->wall_lo == INT64_MAX ||
		off - st->wall_lo <= (int64_t)(BWD_WALL_NEAR_NS / 2));
}

/* bwd_state_clock_step(); all: every wall-clock timer, whatever the step
 * (their instants changed: bwd_state_zones_changed). */
static void clock_step(struct bwd_state *st, bool boot, bool all)
{
	uint64_t mono = bwd_state_now(st), n = 0, soonest = UINT64_MAX,
		 real = boot ? bwd_state_boot(st) : bwd_state_real(st);
	int64_t off = (int64_t)(real - mono);
	bool moved = !boot, near = false;
	struct bwd_timer **v = NULL;
	size_t nv = 0, count = st->wall.count;

	/* Not in the wheel yet while restoring: placed at the restore's
	 * end. */
	if (st->restoring)
		return;
	if (boot) {
		/* Modulo 2^64: the shim's clock may go back (tests). */
		uint64_t boff = real - mono;

		moved = boff - st->boot_off + BOOT_SLACK_NS > 2 * BOOT_SLACK_NS;
		if (moved)
			st->boot_off = boff;
	} else if (++st->wall_pass, st->wall_pass_real = real,
		   !all && near_will_do(st, off, real)) {
		near = true;
		count = 0;
		for (struct bwd_wall *w = st->wall_near; w; w = w->near_next)
			count++;
	} else {
		/* Placed from here on by this offset, all of them. */
		st->wall_lo = INT64_MAX;
		st->wall_base_hi = 0;
	}
	/* Without memory for the order, the map's (the list's). */
	if (moved && count)
		v = malloc(count * sizeof(*v));
	if (near) {
		for (struct bwd_wall *w = st->wall_near, *next; w; w = next) {
			struct bwd_timer *t = (struct bwd_timer *)(uintptr_t)w->node.key;

			next = w->near_next;
			if (!t->fired)
				place_again(st, t, w, mono, real, v, &nv, &n);
		}
	}
	for (size_t b = 0; !near && b <= st->wall.mask; b++) {
		for (struct bwd_map_node *m = st->wall.bucket[b], *next; m; m = next) {
			struct bwd_wall *w = bwd_container_of(m, struct bwd_wall, node);
			struct bwd_timer *t = (struct bwd_timer *)(uintptr_t)m->key;

			next = m->next;
			/* Fired already: its fire is made. */
			if (t->fired || t->boot != boot)
				continue;
			if (boot && w->wall_ns > real && w->wall_ns < soonest)
				soonest = w->wall_ns;
			if (moved)
				place_again(st, t, w, mono, real, v, &nv, &n);
		}
	}
	if (nv)
		qsort(v, nv, sizeof(*v), rearm_cmp);
	for (size_t i = 0; i < nv; i++)
		n += rearm(st, v[i], mono);
	free(v);
	if (boot) {
		st->boot_next = UINT64_MAX;
		boot_note(st, soonest);
	}
	if (near)
		bwd_log(BWD_LOG_INFO, "the wall clock was set: %" PRIu64 " wall-clock timers due within %u s placed again",
			n, BWD_WALL_NEAR_NS / 1000000000u);
	else if (moved)
		bwd_log(BWD_LOG_INFO, boot ? "the host was suspended: %" PRIu64 " boottime timers placed again" :
			"the wall clock was set: %" PRIu64 " wall-clock timers placed again", n);
}

void bwd_state_clock_step(struct bwd_state *st, bool boot)
{
	clock_step(st, boot, false);
}

void bwd_state_zones_changed(struct bwd_state *st)
{
	char why[160];
	uint64_t n = 0;

	if (st->restoring)
		return;
	/* The old zones go: every calendar's pointer to one dangles until
	 * its spec is parsed again below, and nothing reads it between. */
	bwd_tz_cache_clear();
	for (size_t b = 0; b <= st->wall.mask; b++) {
		for (struct bwd_map_node *m = st->wall.bucket[b], *next; m; m = next) {
			struct bwd_wall *w = bwd_container_of(m, struct bwd_wall, node);
			struct bwd_timer *t = (struct bwd_timer *)(uintptr_t)m->key;
			struct bwd_calt *c = w->cal;
			struct bwd_cal *cal;
			uint64_t cost;
			size_t len;

			next = m->next;
			if (!c)
				continue;
			if (bwd_cal_parse(c->spec, &cal, why, sizeof(why))) {
				/* Its zone gone from the database, say. */
				bwd_log(BWD_LOG_ERR, "calendar timer %" PRIu64 " ('%s') dropped: %s",
					m->key, c->spec, why);
				bwd_wheels_disarm(st, t);
				LANE(t, lost, 1);
				LANE(t, pending, -1);
				bwd_timer_free(st, t);
				continue;
			}
			len = strlen(c->spec);
			cost = cal_cost(cal, len, c->listed == c->spec ? 0 : strlen(c->listed));
			bwd_acct_charge(st, t->session->acct, (int64_t)(cost - c->cost));
			st->stats.bytes += cost - c->cost;
			c->cost = cost;
			bwd_cal_free(c->cal);
			c->cal = cal;
			n++;
		}
	}
	bwd_log(BWD_LOG_NOTICE, "the time zones changed: %" PRIu64 " calendar timers read again", n);
	/* Their next elapses, placed again. */
	clock_step(st, false, true);
}

void bwd_state_clock_attach(struct bwd_state *st, struct bwd_clock *c)
{
	st->clock = c;
	st->boot_next = UINT64_MAX;
	if (c)
		bwd_state_clock_step(st, true);
}

/* ---- the step detector --------------------------------------------------- */

struct bwd_clock {
	int fd, boot_fd;           /* CLOCK_REALTIME's, CLOCK_BOOTTIME's     */
	int zone_fd;               /* the zone watcher's inotify; -1: none   */
	int local_wd;              /* its watch of the local zone's directory */
	bool rewalk;               /* a directory appeared in the tz database */
	struct event *ev, *boot_ev, *zone_ev, *settle;
	void (*on_step)(void *arg, enum bwd_clock_event what);
	void *arg;
	char local[256];           /* the local zone file's name in it       */
	bool etc;                  /* that directory is /etc (timezone too)  */
};

/* The resume detector at boot_ns (absolute CLOCK_BOOTTIME; UINT64_MAX:
 * disarmed).  A failure leaves resumes to the slots' checks: logged. */
static void clock_boot_arm(struct bwd_clock *c, uint64_t boot_ns)
{
	struct itimerspec its = { .it_value = {
		.tv_sec = (time_t)(boot_ns / 1000000000u),
		.tv_nsec = (long)(boot_ns % 1000000000u),
	} };

	if (boot_ns == UINT64_MAX)
		its.it_value = (struct timespec){ 0 };
	/* 0 would disarm it: a deadline at 0 is past, so 1 ns does. */
	else if (boot_ns == 0)
		its.it_value.tv_nsec = 1;
	if (timerfd_settime(c->boot_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		bwd_log(BWD_LOG_ERR, "timerfd_settime(CLOCK_BOOTTIME): %s; a resume is heard of when a boottime timer's slot comes due",
			strerror(errno));
}

static void on_boot(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_clock *c = arg;
	uint64_t expirations;

	(void)what;
	if (read(fd, &expirations, sizeof(expirations)) < 0)
		return;
	c->on_step(c->arg, BWD_CLOCK_RESUME);
}

/* Armed at the end of time: it never expires, it is only cancelled. */
static int clock_arm(int fd)
{
	struct itimerspec its = { .it_value = { .tv_sec = (time_t)INT64_MAX } };

	return timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET,
			       &its, NULL) < 0 ? -errno : 0;
}

static void on_clock(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_clock *c = arg;
	uint64_t expirations;

	(void)what;
	if (read(fd, &expirations, sizeof(expirations)) >= 0 || errno != ECANCELED)
		return;
	/* Armed again before the timers are placed: a step while they
	 * are is heard of too. */
	if (clock_arm(c->fd))
		bwd_log(BWD_LOG_ERR, "timerfd_settime(CLOCK_REALTIME): %s; clock steps go unnoticed until a wall-clock timer's slot comes due",
			strerror(errno));
	c->on_step(c->arg, BWD_CLOCK_STEP);
}

/* ---- the zone watcher ----------------------------------------------------- */

/* A package upgrade rewrites hundreds of zone files: the calendars are
 * read again once it has been quiet this long. */
#define ZONE_SETTLE_MS 1000
/* The most directories of the tz database watched (Debian's has ~70). */
#define ZONE_DIRS_MAX 1024

#define ZONE_EVENTS (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | \
		     IN_CREATE | IN_DELETE)

static int walk_fd, walk_dirs;

static int watch_dir(const char *path, const struct stat *sb, int type,
		     struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (type != FTW_D)
		return 0;
	if (++walk_dirs > ZONE_DIRS_MAX) {
		bwd_log(BWD_LOG_WARNING, "%s: more than %d directories; the rest are not watched for changes",
			bwd_tz_dir(), ZONE_DIRS_MAX);
		return 1;
	}
	if (inotify_add_watch(walk_fd, path, ZONE_EVENTS | IN_ONLYDIR) < 0)
		bwd_log(BWD_LOG_WARNING, "inotify_add_watch(%s): %s; its zones' changes are seen on SIGHUP",
			path, strerror(errno));
	return 0;
}

/* The local zone's file: TZ when it names one by an absolute path, else
 * /etc/localtime (tz.c's order); split into c's directory watch and
 * name.  A TZ of a zone name or a POSIX rule changes with the database
 * or never. */
static void watch_local(struct bwd_clock *c)
{
	const char *tz = getenv("TZ"), *slash;
	char dir[4096];

	if (tz && *tz == ':')
		tz++;
	if (tz && *tz != '/')
		return;
	if (!tz)
		tz = "/etc/localtime";
	slash = strrchr(tz, '/');
	if ((size_t)(slash - tz) >= sizeof(dir) || strlen(slash + 1) >= sizeof(c->local))
		return;
	memcpy(dir, tz, (size_t)(slash - tz));
	dir[slash - tz] = '\0';
	if (!*dir)
		strcpy(dir, "/");
	strcpy(c->local, slash + 1);
	c->etc = !strcmp(dir, "/etc");
	c->local_wd = inotify_add_watch(c->zone_fd, dir, ZONE_EVENTS | IN_ONLYDIR);
	if (c->local_wd < 0)
		bwd_log(BWD_LOG_WARNING, "inotify_add_watch(%s): %s; a change of the local zone is seen on SIGHUP",
			dir, strerror(errno));
}

/* Every directory of the tz database, watched.  Watching one already
 * watched is a no-op, so a walk again after a directory appeared (an
 * upgrade that renames a whole region into place) adds just the new. */
static void watch_db(struct bwd_clock *c)
{
	walk_fd = c->zone_fd;
	walk_dirs = 0;
	nftw(bwd_tz_dir(), watch_dir, 16, FTW_PHYS);
}

static void on_zone(evutil_socket_t fd, short what, void *arg)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct timeval settle = { ZONE_SETTLE_MS / 1000, ZONE_SETTLE_MS % 1000 * 1000 };
	struct bwd_clock *c = arg;
	bool changed = false;
	ssize_t n;

	(void)what;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const void *)p;

			p += sizeof(*ev) + ev->len;
			/* A lost event may have been such a directory. */
			if ((ev->mask & IN_ISDIR && ev->mask & (IN_CREATE | IN_MOVED_TO)) ||
			    ev->mask & IN_Q_OVERFLOW)
				c->rewalk = true;
			/* The local zone's directory holds other files. */
			if (ev->wd != c->local_wd || (ev->len &&
			    (!strcmp(ev->name, c->local) ||
			     (c->etc && !strcmp(ev->name, "timezone")))))
				changed = true;
		}
	}
	if (changed)
		event_add(c->settle, &settle);
}

static void on_settled(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_clock *c = arg;

	(void)fd;
	(void)what;
	if (c->rewalk) {
		c->rewalk = false;
		watch_db(c);
	}
	c->on_step(c->arg, BWD_CLOCK_ZONES);
}

/* The watcher of /etc/localtime (or TZ's file), /etc/timezone and the tz
 * database; without inotify (or its watches), zones change on SIGHUP
 * only: logged, not fatal. */
static void zone_open(struct bwd_clock *c, struct event_base *base)
{
	c->zone_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (c->zone_fd < 0) {
		bwd_log(BWD_LOG_WARNING, "inotify_init1: %s; time zone changes are seen on SIGHUP only",
			strerror(errno));
		return;
	}
	watch_local(c);
	watch_db(c);
	c->zone_ev = event_new(base, c->zone_fd, EV_READ | EV_PERSIST, on_zone, c);
	c->settle = evtimer_new(base, on_settled, c);
	if (!c->zone_ev || !c->settle || event_add(c->zone_ev, NULL))
		bwd_log(BWD_LOG_WARNING, "no memory to watch time zones; their changes are seen on SIGHUP only");
}

int bwd_clock_open(struct event_base *base,
		   void (*on_step)(void *arg, enum bwd_clock_event what),
		   void *arg, struct bwd_clock **out)
{
	struct bwd_clock *c = calloc(1, sizeof(*c));
	int err = -ENOMEM;

	if (!c)
		return -ENOMEM;
	c->boot_fd = c->zone_fd = c->local_wd = -1;
	c->on_step = on_step;
	c->arg = arg;
	c->fd = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
	if (c->fd < 0) {
		err = -errno;
		bwd_log(BWD_LOG_ERR, "timerfd_create(CLOCK_REALTIME): %s", strerror(errno));
		goto fail;
	}
	err = clock_arm(c->fd);
	if (err) {
		bwd_log(BWD_LOG_ERR, "timerfd_settime(CLOCK_REALTIME): %s", strerror(-err));
		goto fail;
	}
	c->boot_fd = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
	if (c->boot_fd < 0) {
		err = -errno;
		bwd_log(BWD_LOG_ERR, "timerfd_create(CLOCK_BOOTTIME): %s", strerror(errno));
		goto fail;
	}
	err = -ENOMEM;
	c->ev = event_new(base, c->fd, EV_READ | EV_PERSIST, on_clock, c);
	if (!c->ev || event_add(c->ev, NULL))
		goto fail;
	c->boot_ev = event_new(base, c->boot_fd, EV_READ | EV_PERSIST, on_boot, c);
	if (!c->boot_ev || event_add(c->boot_ev, NULL))
		goto fail;
	zone_open(c, base);
	*out = c;
	return 0;
fail:
	bwd_clock_free(c);
	return err;
}

void bwd_clock_free(struct bwd_clock *c)
{
	if (!c)
		return;
	if (c->ev)
		event_free(c->ev);
	if (c->boot_ev)
		event_free(c->boot_ev);
	if (c->zone_ev)
		event_free(c->zone_ev);
	if (c->settle)
		event_free(c->settle);
	if (c->fd >= 0)
		close(c->fd);
	if (c->boot_fd >= 0)
		close(c->boot_fd);
	if (c->zone_fd >= 0)
		close(c->zone_fd);
	free(c);
}
