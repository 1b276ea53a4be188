/*
 * sim.c - the deterministic simulation of delivery (sim.h, issues 20 and
 * 21) and of the timers on other clocks (clock.c).
 *
 * What is real and what is simulated.  The daemon's state (state.c,
 * delivery.c, account.c: the wheel, sessions, timers, queues, consumers,
 * windows, ready and work lists, acks, ack timeouts, coalescing holds,
 * redelivery pacing; clock.c and calendar.c: wall-clock, calendar and
 * boottime timers, steps and resumes) is the real code, on clocks the
 * simulation sets: CLOCK_MONOTONIC (bwd_state_set_clock), and
 * CLOCK_REALTIME and CLOCK_BOOTTIME (bwd_state_set_wall_clocks), which
 * start at WALL0 and 5 s ahead and move with it, but for steps of the
 * wall clock forward and back (a few ms, a few s, now and then hours)
 * and suspends (both move ahead of CLOCK_MONOTONIC, by 0.1 s to hours).
 * Around it the harness plays the two layers above it as the daemon has
 * them:
 *   - the server (server.c): a loop turn is one event, then the pump
 *     (bwd_state_fire, bwd_state_next_delivery at most BWD_DELIVER_CHUNK
 *     times, bwd_state_reap) when the server runs it: when an event
 *     activated it (a poll, a request, a connection leaving, a drain of
 *     an auto-ack member's output with fires in flight, output back
 *     below a quarter, the reaper) and after every turn with work
 *     (bwd_state_has_work); with old_pump only when activated, and the
 *     drain's activation looked at after the drain completed the fires,
 *     as before issue 20.
 *     The clock moves only between turns; the wheel's timerfd wakes the
 *     loop at bwd_state_next_deadline, up to `jitter` late (the step
 *     granularity), and due work is done before the clock moves on.
 *     clock.c's two detectors are descriptors of the loop too, ready in
 *     any order with the wheel's: the CLOCK_REALTIME timerfd, cancelled
 *     by a step or a resume, whose reading calls bwd_state_clock_step
 *     (st, false) as server.c's on_step does, at a turn of the same
 *     instant, or for a quarter of the steps (quiet: as if its re-arm
 *     had failed) up to 2 s later; and the CLOCK_BOOTTIME timerfd,
 *     armed where the state says (st->boot_next), expiring once the
 *     simulated CLOCK_BOOTTIME reaches it (at once after a suspend that
 *     passed it), which calls bwd_state_clock_step(st, true);
 *   - each connection (conn.c): unread output counted in bytes (a fire's
 *     frame as conn.c packs it, replies by size), room off at half of
 *     --max-output and back below a quarter, reading paused the same way,
 *     a fire's frame end (wire_end), and a socket that takes a random
 *     number of bytes per step into a kernel buffer of a random size,
 *     whose drain tells bwd_member_written the offset; the client reads
 *     random sizes out of the kernel buffer, frame by frame, acks what it
 *     read (single, cumulative, late, bogus: a bogus ack closes the
 *     connection once its output drained, as request.c and conn.c do),
 *     and leaves killed (fires cut off mid-frame), or after reading all.
 *     Its Schedules are one in five on another clock, as request.c
 *     makes them: a wall-clock oneshot (realtime_ns) or a boottime one
 *     (clock CLOCK_BOOTTIME), from 50 ms past to 3 s ahead, or a
 *     calendar timer of a UTC spec (every second, every 5 s, at three
 *     seconds a minute, every 2 min, hourly, or once), a jitter bound
 *     of 0 to 2 s, fixed or not, with a misfire grace or not.
 *     Its requests include the ones for fires that fail (issue 21):
 *     Release (now, or after up to 400 ms), Touch (its ack timeout
 *     again, 5 to 400 ms, or 13 h: past the hold limit), SetPolicy (a
 *     limit of 0 to 5 or kept; the default dead-letter session, another
 *     of the names, or kept), Kick (all or a key, up to a limit or
 *     not); --max-deliveries is 20, 4, 2 or 0.  Named sessions' Hellos
 *     give now and then a dead-letter session's name (NAME.dead).
 *
 * The model (struct msess, struct mfire, struct mtimer) knows what was
 * scheduled and when, so it knows which fires are owed: a oneshot's at its
 * deadline, a periodic timer's at each of d, d + p, ...; a wall-clock
 * oneshot's once the simulated wall clock reached its instant, a
 * boottime one's once CLOCK_BOOTTIME reached its deadline, a calendar
 * timer's once the wall clock reached its next elapse plus the jitter the
 * state drew.  Their lane's bound counts from where that instant is on
 * CLOCK_MONOTONIC by the clocks' offset, or from when the daemon heard
 * of the step or resume that moved it (it places them again then).  The
 * next elapse is bwd_cal_next's after the timer's base (calendar.c is
 * checked against systemd elsewhere): at first the wall clock of the
 * Schedule, then that of each fire (never before its elapse: elapses a
 * step passed coalesce into one late fire), lowered to the wall clock
 * by a step back below it (PROTOCOL.md, "Calendar timers").  It follows every
 * fire from owed to handed out (to whom, with which delivery number, its
 * frame's end) to done (an ack, or an auto-ack drain) or taken back (the
 * member left, its ack deadline passed, or a Release), and checks the
 * state against it.  For fires that fail it keeps each fire's deliveries
 * and each named session's policy, and moves fires as PROTOCOL.md ("Fires
 * that fail") says: of the fires taken back together only the oldest
 * written whole keeps its hand-out counted (the blame rule); one at its
 * limit goes to its dead-letter session's tail (NAME.dead unless set; a
 * session the state makes, which the model adopts when it appears, and
 * which outlives its linger while it holds dead letters), with its
 * history, its count from 0 (dead letters are never dead-lettered
 * again); else one counted twice or more goes to its
 * queue's tail, the others to the front; a Release puts it at the tail,
 * or after its delay among the delayed; a Touch moves its ack deadline
 * (HOLD_LIMIT past its hand-out + BWD_MAX_HOLD_NS); a Kick brings the
 * origin's queued dead letters back to its tail, counted from 0.
 * The invariants:
 *   safety, at every hand-out: the fire is owed and waiting (never early,
 *     never twice, never one that was done), to a consumer with room and
 *     credit, numbered in order, and a fire taken back goes before any
 *     other of its session, marked redelivered exactly when its frame had
 *     been written whole; fires at the tail go in the order of the turns
 *     that put them there, and a released one not before its delay; its
 *     deliveries, and a dead letter's origin, are the model's; after every
 *     turn, each member's count in flight and last delivery number are the
 *     model's, and each of its fires in flight is found in its map by its
 *     delivery number; an ack completes exactly what the model says; a timer the
 *     state calls pending (Cancel, replace, a duplicate key) is one the
 *     model has not seen fire past its lane's bound;
 *   other clocks: after every poll the model looks which of its timers on
 *     other clocks the state fired (bwd_timer_find finds it no more, or
 *     a calendar timer's elapse moved on): never one before its clock
 *     reached its instant (the clocks do not move within a poll), so
 *     never before a wall-clock instant or elapse, nor a boottime
 *     deadline, whatever step the daemon has not heard of yet; each
 *     fire once, carrying its instant (its elapse) and Fired.late set
 *     exactly when a step or resume the daemon heard of had passed it;
 *     a calendar timer's next elapse, after each fire and each step, is
 *     the model's, and its jitter within its bound (a fixed one the
 *     same for every elapse); a timer the state no longer holds is one
 *     it fired;
 *   fires that fail, at each take-back: the state's count is the blame
 *     rule's; a fire at its limit is dead-lettered (to the model's
 *     dead-letter session, with the history of its origin, deliveries,
 *     last hand-out, reason and time) and no other is; Release, Touch,
 *     SetPolicy and Kick answer as the model says (released or not, ready
 *     when, dead-lettered or not; touched, the new deadline, HOLD_LIMIT;
 *     the policy read back; how many kicked, only the origin's queued dead
 *     letters of the key, within the limit, `more` while some are left),
 *     and a request naming a delivery never sent is a BAD_REQUEST;
 *   timing, at every hand-out: a fire goes by its deadline (or its
 *     schedule, if later) plus its lane's bound, or for a coalescing
 *     session plus max(leeway, lane bound), plus the jitter; a fire due
 *     before a write of its coalescing session (a batch released by its
 *     earliest window end, a redelivery, ...) goes as soon as its lane
 *     made it (PROTOCOL.md, "Coalesced delivery"); a taken-back fire at
 *     once, or with the batch held; a fire put at the tail by the time
 *     the fires waiting before it went (a delayed one once its delay and
 *     the oneshot lane's bound passed); time in which the session had no
 *     consumer with room and credit, or waited for its uid's redelivery
 *     pace, does not count; a fire is taken back no sooner than its ack
 *     deadline (as last touched) and within the oneshot lane's bound
 *     after; a named session expires after its linger (from when its
 *     last member left or its last dead letter did), never while it
 *     holds dead letters;
 *   liveness, whenever the loop has nothing left to do at the current
 *     time (before the clock moves): no session has fires queued while a
 *     consumer of it has room and credit (unless a batch is held, which
 *     the timing above bounds), no fire is past its bound in such a
 *     session, and every fire that must have been made is queued,
 *     delayed or in flight (nothing lost);
 *   bounded work: no session with fires it could hand out waits more
 *     than a turn per session while others are served (the pump itself
 *     stops at BWD_DELIVER_CHUNK, as server.c's does); redeliveries keep
 *     to their uid's pace (--max-periodic-rate-per-uid, at least
 *     BWD_MIN_REDELIVERY_MHZ; a released fire pays it too): no more
 *     than a second's worth plus the rate times the time since the
 *     start, and time a session waits for that pace does not count
 *     against its fires.
 * And the wheel's own self-check (bw_dual_check) every 1,024 turns.
 *
 * Costs: a hand-out is matched in its key's list of waiting fires (or
 * the taken-back, tail or delayed ones), a step is O(the timers and
 * consumers it looks at; a take-back to the tail, a release or a kick
 * O(its session's fires)), a quiet check O(all fires; a session that
 * piled up more than 512 is looked at whole every 64th check), a poll
 * and a clock's move O(timers on other clocks) lookups (a calendar's
 * next-elapse search each); some 40,000 steps a second of CPU (60,000
 * before fires that fail).
 *
 * Determinism: the state's map of wall-clock timers is keyed by their
 * addresses, which differ from run to run; clock.c arms those a step
 * places again in the order of their deadlines, sessions and keys, so
 * that their fires' order, and the run, does not depend on them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calendar-internal.h"
#include "state-internal.h"
#include "sim.h"

#define MS 1000000ull
#define T0 (1000 * MS)
#define MAX_CONNS 10
#define MAX_SESS 40
/* Names a Hello may give: three sessions, and two of their dead-letter
 * sessions (the daemon makes those, and NAME.dead.dead, ... as needed). */
#define NAMES 5
#define BASE_NAMES 3
#define KEYS 24
/* Named sessions' owner; anonymous ones are the other uid's, so that two
 * uids' sessions share the pump (and each its redelivery pace). */
#define UID 1000
#define ANON_UID 1001
/* Turns the loop may take at one instant before it must be idle. */
#define IDLE_TURNS 100000u
/* Reply frames' sizes, about what conn.c packs. */
#define HELLO_REPLY 96u
#define SCHEDULE_REPLY 14u
#define CANCEL_REPLY 12u
#define ACK_REPLY 12u
#define ERROR_REPLY 90u
#define RELEASE_REPLY 20u
#define TOUCH_REPLY 16u
#define POLICY_REPLY 30u
#define KICK_REPLY 12u
/* The wall clock at the start, 2024-05-01 12:00:00 UTC, and how far
 * CLOCK_BOOTTIME is ahead of CLOCK_MONOTONIC then (an earlier suspend). */
#define WALL0 (1714564800ull * 1000000000u)
#define BOOT_OFF0 (5000 * MS)
/* clock.c's: a move of the clocks' offset smaller than this is none. */
#define BOOT_SLACK (1 * MS)

enum fstate { F_WAIT, F_FLIGHT };

/* The clock a timer waits on: monotonic (delay_ns, deadline_ns), the
 * wall clock (realtime_ns; calendar), CLOCK_BOOTTIME (Schedule.clock). */
enum clk { C_MONO, C_WALL, C_CAL, C_BOOT };

/* Calendar timers' specs (the model parses them too, for bwd_cal_next):
 * UTC only, so that no zone file of the host is read; the last has one
 * elapse, a minute after WALL0 (again after a step back below it). */
static const char *const specs[] = { "*:*:0/1 UTC", "*:*:0/5 UTC",
				     "*:*:3,17,44 UTC", "*:0/2 UTC", "hourly UTC",
				     "2024-05-01 12:01:00 UTC" };
#define NSPECS (sizeof(specs) / sizeof(specs[0]))

/* A fire the model says its session owes. */
struct mfire {
	uint64_t key, count, deadline, base, leeway, bound;
	uint32_t payload_len;
	enum fstate st;
	enum clk clk;
	uint64_t tid;              /* its timer's (struct mtimer)            */
	bool late;                 /* what Fired.late must say               */
	bool unmade;               /* owed, not fired by the state yet       */
	bool optional;             /* its timer went around its fire: the
				      state may never have made it          */
	bool handed;               /* handed out before                      */
	bool back;                 /* taken back, not handed out again       */
	bool redeliv;              /* what its next hand-out must say        */
	/* Fires that fail (PROTOCOL.md): hand-outs counted, the queue's
	 * tail it went back to (in its session's tail list, from the turn
	 * tseq: turns order such fires, one turn's not among themselves),
	 * a Release's delay (in the delayed list, not before `ready`; queued
	 * by the oneshot lane's bound after), a take-back or release that
	 * its hand-out must pay the uid's redelivery pace for, and a dead
	 * letter's origin (its session's name). */
	uint32_t deliveries;
	bool tail, delayed, paced, dead;
	uint64_t tseq, ready;
	char origin[BWP_SESSION_NAME_MAX + 1];
	uint64_t ack_by;           /* in flight: its ack deadline (Touch)    */
	bool going;                /* being taken back (take_back)           */
	uint64_t allow;            /* hand out by this (jitter included)     */
	uint64_t chain, chain_idx; /* the take-back it came back in          */
	int conn;                  /* in flight: to whom                     */
	uint64_t delivery, wire_end, handed_at;
	const struct bwd_fire *ptr; /* the state's, since handed out         */
	size_t idx;                /* in its session's f[]                   */
	/* The first write of its coalescing session after it came due: it
	 * belonged with that one, and goes once made (PROTOCOL.md); till
	 * then in the session's list of fires waiting for one (unmarked). */
	uint64_t first_go;
	struct mfire *un_next, **un_pprev;
	/* Waiting: in its session's list of its key, or of those taken back
	 * (what a hand-out is matched against). */
	struct mfire *w_next, **w_pprev;
	struct wlist *w_list;
};

struct wlist {
	struct mfire *head, **tail;
};

/* A timer the model holds pending (or a oneshot whose fire is owed, kept
 * while the state may not have fired it yet). */
struct mtimer {
	uint64_t key, deadline, since, period, leeway, bound;
	uint32_t payload_len;
	uint64_t count;
	bool owed;
	/* Timers on other clocks (clock.c): the clock, the instant on it (a
	 * calendar timer's: its elapse and the jitter the state drew), and
	 * whether a step or resume the daemon heard of passed it (its fire
	 * says late).  The model knows exactly which of them the state
	 * holds: it looks after every poll (observe).  A calendar timer's
	 * spec (specs[]), base and next elapse on the wall clock, the bound
	 * of its jitter, and the fixed one's value once seen. */
	enum clk clk;
	uint64_t id, at;
	struct mfire *owed_f;      /* owed: its fire, not made yet           */
	bool late;
	unsigned spec;
	uint64_t cbase, elapse, jmax, jfix;
	bool fixed, jfix_known;
};

struct msess {
	bool live;
	bool named;
	char name[BWP_SESSION_NAME_MAX + 1];
	uint64_t id;               /* the state's session id                 */
	struct bwd_session *ptr;
	/* Its policy (SetPolicy): the limit when set, and the dead-letter
	 * session's name ("": the default, name + ".dead"). */
	bool policy_set;
	uint32_t max_deliveries;
	char dead_letter[BWP_SESSION_NAME_MAX + 1];
	uint64_t ndead;            /* its dead letters: it does not expire   */
	uint64_t dead_clear;       /* when its last one left it              */
	struct wlist taill, delayl;
	struct mtimer *t;
	size_t nt, ct;
	size_t nclk;               /* of t, on other clocks than monotonic   */
	struct mfire **f;
	size_t nf, cf;
	size_t nwait, nback;       /* fires waiting; of them, taken back     */
	struct mfire *unmarked;
	struct wlist bykey[KEYS], backl;
	uint64_t excuse;           /* the last turn that began with no
				      consumer able to take a fire (jitter
				      included): no fire is due before it  */
	bool unable;               /* no consumer could take a fire at the
				      last turn's end                        */
	bool coalescing;
	unsigned starve;
	unsigned members;
	uint64_t detached_at;
	uint64_t chains;
};

struct mframe {
	uint64_t end, delivery;    /* delivery 0: a reply                    */
};

struct sconn {
	bool live;
	int sess;
	struct bwd_member *m;
	bool consumer, auto_ack, coalesce;
	uint32_t window;
	uint64_t ack_timeout;
	uint64_t committed, drained, readpos, kcap;
	struct mframe *fr;
	size_t fh, fn, fc;
	uint64_t *toack;           /* deliveries read and not acknowledged   */
	size_t na, ca;
	struct mfire **fl;         /* in flight, in delivery order           */
	size_t flight, cfl;
	uint64_t last_delivery;
	bool room, throttled, closing, leaving;
};

struct sim {
	struct sim_params p;
	struct bwd_options opt;
	bool opt_parsed;
	struct bwd_state *st;
	uint64_t now, jitter;
	/* The wall clock and CLOCK_BOOTTIME: now plus these (a step moves
	 * the first, a suspend both); the boottime offset the daemon last
	 * placed boottime timers by; a step it has not heard of yet, and
	 * when it will (a quiet step: later). */
	uint64_t real_off, boot_off, told_off, notice_at;
	bool step_pending;
	struct bwd_cal *cal[NSPECS];
	uint64_t tids;
	uint64_t max_output;
	uint64_t bound[2];
	enum bw_lane fine, coarse;
	struct sconn c[MAX_CONNS];
	struct msess s[MAX_SESS];
	bool want_pump, reaper, trace;
	uint64_t turn;
	uint64_t redelivered_out[2]; /* taken-back fires handed out again,
					of UID's sessions and ANON_UID's    */
	struct sim_stats stats;
	uint8_t payload[4096];
	bool failed;
	char err[768], cfg[320];
};

static const char *const names[NAMES] = { "sim0", "sim1", "sim2", "sim0.dead",
					 "sim1.dead" };

/* ---- plumbing --------------------------------------------------------- */

static uint64_t rnd(struct sim *s, uint64_t n)
{
	return n > 1 ? s->p.below(s->p.arg, n) % n : 0;
}

static bool chance(struct sim *s, unsigned pct)
{
	return rnd(s, 100) < pct;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void viol(struct sim *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void viol(struct sim *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->failed)
		return;
	s->failed = true;
	n = snprintf(s->err, sizeof(s->err), "step %" PRIu64 ", turn %" PRIu64
		     ", t=%.3f ms: ", s->stats.steps, s->turn,
		     (double)(s->now - T0) / 1e6);
	va_start(ap, fmt);
	vsnprintf(s->err + n, sizeof(s->err) - (size_t)n, fmt, ap);
	va_end(ap);
}

#define TRACE(s, ...) do {						\
	if ((s)->trace) {						\
		fprintf(stderr, "[%" PRIu64 " t=%.3f] ", (s)->stats.steps, \
			(double)((s)->now - T0) / 1e6);			\
		fprintf(stderr, __VA_ARGS__);				\
		fputc('\n', stderr);					\
	}								\
} while (0)

#define GROW(arr, n, cap) do {						\
	if ((n) == (cap)) {						\
		size_t nc_ = (cap) ? 2 * (cap) : 16;			\
		void *p_ = realloc((arr), nc_ * sizeof(*(arr)));	\
		if (!p_)						\
			abort();					\
		(arr) = p_;						\
		(cap) = nc_;						\
	}								\
} while (0)

static uint64_t sim_clock(void *arg)
{
	return ((struct sim *)arg)->now;
}

/* The clock k's timers wait on, now (C_WALL and C_CAL: the wall clock). */
static uint64_t clock_now(const struct sim *s, enum clk k)
{
	return s->now + (k == C_BOOT ? s->boot_off : k == C_MONO ? 0 : s->real_off);
}

static uint64_t sim_real(void *arg)
{
	return clock_now(arg, C_WALL);
}

static uint64_t sim_boot(void *arg)
{
	return clock_now(arg, C_BOOT);
}

/* A wall-clock instant, as seconds from WALL0 (traces and messages). */
static double wall_s(uint64_t ns)
{
	return (double)(int64_t)(ns - WALL0) / 1e9;
}

static const char *const clk_names[] = { "monotonic", "wall-clock", "calendar",
					 "boottime" };

static uint64_t output(const struct sconn *c)
{
	return c->committed - c->drained;
}

static int conn_index(const struct sim *s, const struct sconn *c)
{
	return (int)(c - s->c);
}

/* ---- the model's rules ------------------------------------------------- */

/* PROTOCOL.md, "Leeway and lanes": the leeway a timer has, and its lane:
 * the coarsest whose bound is at most it, else the finest. */
static uint64_t leeway_of(const struct sim *s, uint64_t asked, uint64_t period)
{
	if (asked != BWD_LEEWAY_DEFAULT)
		return asked;
	if (!period)
		return 0;
	return max64(period / BWD_LEEWAY_DIVISOR, s->bound[s->fine]);
}

static uint64_t bound_of(const struct sim *s, uint64_t leeway)
{
	return s->bound[s->coarse] <= leeway ? s->bound[s->coarse] : s->bound[s->fine];
}

/* Whether the session's fires may be held: every consumer asked. */
static bool coalescing(const struct sim *s, int si)
{
	unsigned n = 0, co = 0;

	for (int i = 0; i < MAX_CONNS; i++) {
		const struct sconn *c = &s->c[i];

		if (c->live && c->m && c->sess == si && c->consumer) {
			n++;
			co += c->coalesce;
		}
	}
	return n && co == n;
}

/* Whether some consumer of the session could take a fire now. */
static bool able(const struct sim *s, int si)
{
	for (int i = 0; i < MAX_CONNS; i++) {
		const struct sconn *c = &s->c[i];

		if (c->live && c->m && c->sess == si && c->consumer && c->room &&
		    c->flight < c->window)
			return true;
	}
	return false;
}

/* The time a waiting fire must be handed out by. */
/* When f was made at the latest: its lane's bound after it came due. */
static uint64_t made_by(const struct sim *s, const struct mfire *f)
{
	return add_sat(add_sat(f->base, f->bound), s->jitter);
}

static uint64_t due_by(const struct sim *s, const struct msess *ms,
		       const struct mfire *f)
{
	uint64_t due = min64(f->allow, add_sat(f->first_go, s->jitter));

	return max64(max64(due, ms->excuse), made_by(s, f));
}

static void wl_add(struct wlist *l, struct mfire *f)
{
	if (!l->tail)
		l->tail = &l->head;
	f->w_next = NULL;
	f->w_pprev = l->tail;
	*l->tail = f;
	l->tail = &f->w_next;
	f->w_list = l;
}

static void wl_del(struct mfire *f)
{
	if (!f->w_pprev)
		return;
	*f->w_pprev = f->w_next;
	if (f->w_next)
		f->w_next->w_pprev = f->w_pprev;
	else
		f->w_list->tail = f->w_pprev;
	f->w_pprev = NULL;
}

static void unmark(struct mfire *f)
{
	if (!f->un_pprev)
		return;
	*f->un_pprev = f->un_next;
	if (f->un_next)
		f->un_next->un_pprev = f->un_pprev;
	f->un_pprev = NULL;
}

/* A coalescing session wrote fires at now: those due before (and not
 * taken back) missed that write, and go as soon as they are made.  Not
 * one whose bound counts from a move of its clock the daemon has yet to
 * hear of (its base is later than now): until then the daemon's deadline
 * for it is where the clocks' old offset put it, which may be after this
 * write, so the write is not one it belonged with. */
static void session_went(struct sim *s, struct msess *ms)
{
	struct mfire **p = &ms->unmarked, *f;

	while ((f = *p)) {
		if (f->base > s->now) {
			p = &f->un_next;
			continue;
		}
		f->first_go = s->now;
		unmark(f);
	}
}

/* f joins ms's fires (new, or in flight from another session). */
static void fire_link(struct msess *ms, struct mfire *f)
{
	ms->ndead += f->dead;
	GROW(ms->f, ms->nf, ms->cf);
	f->idx = ms->nf;
	ms->f[ms->nf++] = f;
}

static struct mfire *fire_add(struct sim *s, int si, const struct mtimer *t,
			      uint64_t count, uint64_t deadline)
{
	struct msess *ms = &s->s[si];
	struct mfire *f = calloc(1, sizeof(*f));

	if (!f)
		abort();
	f->key = t->key;
	f->count = count;
	f->deadline = deadline;
	f->base = max64(deadline, t->since);
	f->leeway = t->leeway;
	f->bound = t->bound;
	f->payload_len = t->payload_len;
	f->st = F_WAIT;
	f->clk = t->clk;
	f->tid = t->id;
	f->conn = -1;
	f->first_go = UINT64_MAX;
	f->un_next = ms->unmarked;
	if (f->un_next)
		f->un_next->un_pprev = &f->un_next;
	f->un_pprev = &ms->unmarked;
	ms->unmarked = f;
	wl_add(&ms->bykey[f->key % KEYS], f);
	f->allow = add_sat(add_sat(f->base, ms->coalescing ?
				   max64(f->leeway, f->bound) : f->bound), s->jitter);
	fire_link(ms, f);
	ms->nwait++;
	TRACE(s, "owed: session %d key %" PRIu64 " count %" PRIu64 " deadline %.3f, due by %.3f",
	      si, f->key, f->count, (double)(deadline - T0) / 1e6,
	      (double)(f->allow - T0) / 1e6);
	return f;
}

/* f leaves ms's fires (to be freed, or moved to another session). */
static void fire_unlink(struct sim *s, struct msess *ms, struct mfire *f)
{
	size_t i = f->idx;

	if (f->st == F_WAIT) {
		ms->nwait--;
		ms->nback -= f->back;
	}
	if (f->dead && !--ms->ndead)
		ms->dead_clear = s->now;
	unmark(f);
	wl_del(f);
	ms->f[i] = ms->f[--ms->nf];
	ms->f[i]->idx = i;
}

static void fire_remove(struct sim *s, struct msess *ms, struct mfire *f)
{
	fire_unlink(s, ms, f);
	free(f);
}

/* The fire at c's flight[j] is done. */
static void flight_done(struct sim *s, struct sconn *c, size_t j)
{
	struct mfire *f = c->fl[j];

	memmove(c->fl + j, c->fl + j + 1, (c->flight - j - 1) * sizeof(*c->fl));
	c->flight--;
	fire_remove(s, &s->s[c->sess], f);
}

static void timer_remove(struct msess *ms, size_t i)
{
	ms->nclk -= ms->t[i].clk != C_MONO;
	ms->t[i] = ms->t[--ms->nt];
}

/* Where t's instant is on CLOCK_MONOTONIC by the clocks' offset now. */
static uint64_t mono_of(const struct sim *s, const struct mtimer *t)
{
	uint64_t off = clock_now(s, t->clk) - s->now;

	if (t->clk == C_MONO)
		return t->deadline;
	return t->at > off ? t->at - off : 0;
}

/* The fire the model owes for t (on another clock), not made yet. */
static struct mfire *owed_fire(struct msess *ms, const struct mtimer *t)
{
	(void)ms;
	return t->owed ? t->owed_f : NULL;
}

/* The daemon places t's owed fire again at from (a step or resume it
 * heard of): its lane's bound counts from then, and it comes due then
 * (its deadline_ns), so that a write of a coalescing session before
 * is not one it belonged with. */
static void rebase(struct sim *s, struct msess *ms, struct mfire *f, uint64_t from)
{
	f->first_go = UINT64_MAX;
	if (!f->un_pprev) {
		f->un_next = ms->unmarked;
		if (f->un_next)
			f->un_next->un_pprev = &f->un_next;
		f->un_pprev = &ms->unmarked;
		ms->unmarked = f;
	}
	f->base = max64(f->base, from);
	f->allow = max64(f->allow, add_sat(add_sat(f->base, ms->coalescing ?
		max64(f->leeway, f->bound) : f->bound), s->jitter));
}

static struct mtimer *timer_find(struct msess *ms, uint64_t key)
{
	for (size_t i = 0; i < ms->nt; i++)
		if (ms->t[i].key == key)
			return &ms->t[i];
	return NULL;
}

/* Every fire due by now is owed; a oneshot's timer is forgotten once the
 * state must have fired it. */
static void owe(struct sim *s)
{
	for (int si = 0; si < MAX_SESS; si++) {
		struct msess *ms = &s->s[si];

		if (!ms->live)
			continue;
		for (size_t i = 0; i < ms->nt; i++) {
			struct mtimer *t = &ms->t[i];

			/* Once its clock reached its instant; the timer goes
			 * when the state fired it (observe). */
			if (t->clk != C_MONO) {
				if (!t->owed && clock_now(s, t->clk) >= t->at) {
					/* + 1: where bwd_wall_due places it. */
					t->owed_f = fire_add(s, si, t, t->clk == C_BOOT ? 0 :
							     t->clk == C_CAL ? t->elapse : t->at,
							     mono_of(s, t) + 1);
					t->owed_f->unmade = true;
					t->owed = true;
				}
				continue;
			}
			if (t->period) {
				while (t->deadline <= s->now) {
					fire_add(s, si, t, ++t->count, t->deadline);
					t->deadline += t->period;
				}
				continue;
			}
			if (!t->owed && t->deadline <= s->now) {
				fire_add(s, si, t, 0, t->deadline);
				t->owed = true;
			}
			if (t->owed && s->now > add_sat(add_sat(max64(t->deadline, t->since),
								t->bound), s->jitter)) {
				timer_remove(ms, i);
				i--;
			}
		}
	}
}

static void session_drop(struct sim *s, int si)
{
	struct msess *ms = &s->s[si];

	while (ms->nf)
		fire_remove(s, ms, ms->f[ms->nf - 1]);
	free(ms->f);
	free(ms->t);
	memset(ms, 0, sizeof(*ms));
}

/* The state says t is still pending: its fire, if the model owes it, was
 * not made, which the model allows only within its lane's bound; drop: t
 * goes (Cancel, replace), and that fire with it. */
static void unfired(struct sim *s, int si, struct mtimer *t, bool drop,
		    const char *what)
{
	struct msess *ms = &s->s[si];
	uint64_t by = add_sat(add_sat(max64(t->deadline, t->since), t->bound), s->jitter);

	if (t->clk != C_MONO) {
		struct mfire *f = t->owed ? owed_fire(ms, t) : NULL;

		if (t->owed && !f)
			viol(s, "%s: %s key %" PRIu64 " pending, its fire owed and not found",
			     what, clk_names[t->clk], t->key);
		else if (f && s->now > made_by(s, f))
			viol(s, "%s: %s key %" PRIu64 " still pending %.3f ms past its bound",
			     what, clk_names[t->clk], t->key, (double)(s->now - made_by(s, f)) / 1e6);
		else if (f && drop) {
			fire_remove(s, ms, f);
			t->owed_f = NULL;
		}
		return;
	}
	if (t->period) {
		/* The fires of its last bound may or may not have been made. */
		for (size_t i = 0; drop && i < ms->nf; i++) {
			struct mfire *f = ms->f[i];

			if (f->key == t->key && f->st == F_WAIT && !f->handed &&
			    add_sat(add_sat(f->base, f->bound), s->jitter) >= s->now)
				f->optional = true;
		}
		return;
	}
	if (!t->owed)
		return;
	if (s->now > by)
		viol(s, "%s: key %" PRIu64 " (deadline %.3f ms, lane bound %.3f ms) still pending past its bound",
		     what, t->key, (double)(t->deadline - T0) / 1e6, (double)t->bound / 1e6);
	for (size_t i = 0; i < ms->nf; i++) {
		struct mfire *f = ms->f[i];

		if (f->key == t->key && f->count == 0 && f->deadline == t->deadline &&
		    !f->handed && f->st == F_WAIT) {
			if (drop)
				fire_remove(s, ms, f);
			return;
		}
	}
	viol(s, "%s: key %" PRIu64 " pending, but its fire was handed out", what, t->key);
}

/* The state says the key has no timer pending. */
static void gone(struct sim *s, struct msess *ms, struct mtimer *t,
		 const char *what)
{
	if (t->clk != C_MONO)
		viol(s, "%s: %s key %" PRIu64 " not pending, which the state has not fired (its clock %.3f ms before its instant)",
		     what, clk_names[t->clk], t->key,
		     (double)(int64_t)(t->at - clock_now(s, t->clk)) / 1e6);
	else if (t->period)
		viol(s, "%s: periodic key %" PRIu64 " not pending", what, t->key);
	else if (!t->owed)
		viol(s, "%s: key %" PRIu64 " not pending %.3f ms before its deadline",
		     what, t->key, (double)(t->deadline - s->now) / 1e6);
	timer_remove(ms, (size_t)(t - ms->t));
}

/* The session's consumers changed: fires wait for a batch only while
 * every consumer asked for coalescing. */
static void coalesce_update(struct sim *s, int si)
{
	struct msess *ms = &s->s[si];
	bool now = coalescing(s, si);

	for (size_t i = 0; ms->coalescing != now && i < ms->nf; i++) {
		struct mfire *f = ms->f[i];

		if (f->st != F_WAIT || f->delayed)
			continue;
		if (!now)
			f->allow = min64(f->allow, add_sat(max64(s->now,
				add_sat(f->base, f->bound)), s->jitter));
		else if (!f->handed && s->now <= made_by(s, f))
			/* It may come due from now on, and be held. */
			f->allow = max64(f->allow, add_sat(add_sat(f->base,
				max64(f->leeway, f->bound)), s->jitter));
	}
	ms->coalescing = now;
}

/* ---- fires that fail (PROTOCOL.md) ------------------------------------- */

/* A named session's delivery limit (0: none). */
static uint32_t max_deliveries(const struct sim *s, const struct msess *ms)
{
	if (!ms->named)
		return 0;
	return ms->policy_set ? ms->max_deliveries : s->opt.limits.max_deliveries;
}

/* Its dead-letter session's name; false when the default would be too
 * long (then nothing is dead-lettered). */
static bool dead_letter_name(const struct msess *ms, char out[BWP_SESSION_NAME_MAX + 1])
{
	if (*ms->dead_letter) {
		strcpy(out, ms->dead_letter);
		return true;
	}
	if (strlen(ms->name) + 5 > BWP_SESSION_NAME_MAX)
		return false;
	snprintf(out, BWP_SESSION_NAME_MAX + 1, "%s.dead", ms->name);
	return true;
}

/* The latest the fires waiting in ms go by: a fire that joins its queue's
 * tail goes after them, and at once when they have gone.  O(its fires). */
static uint64_t tail_allow(struct sim *s, struct msess *ms)
{
	uint64_t a = add_sat(s->now, s->jitter);

	for (size_t i = 0; i < ms->nf; i++)
		if (ms->f[i]->st == F_WAIT && !ms->f[i]->delayed)
			a = max64(a, due_by(s, ms, ms->f[i]));
	return a;
}

/* f, out of flight or moved, waits at ms's queue's tail. */
static void to_tail(struct sim *s, struct msess *ms, struct mfire *f,
		    uint64_t allow)
{
	f->st = F_WAIT;
	f->back = f->delayed = false;
	f->tail = true;
	f->tseq = s->turn;
	f->allow = allow;
	f->conn = -1;
	f->first_go = UINT64_MAX;
	ms->nwait++;
	wl_add(&ms->taill, f);
}

/* Fires released with a delay join their queue's tail once ready, as the
 * oneshot lane fires their timers: by the lane's bound after. */
static void ready_delayed(struct sim *s)
{
	for (int si = 0; si < MAX_SESS; si++) {
		struct msess *ms = &s->s[si];
		uint64_t allow = 0;

		for (struct mfire *f = ms->live ? ms->delayl.head : NULL; f; f = f->w_next) {
			if (!f->delayed || s->now <= add_sat(add_sat(f->ready,
				s->bound[BW_LANE_ONESHOT]), s->jitter))
				continue;
			if (!allow)
				allow = tail_allow(s, ms);
			f->delayed = false;
			f->allow = allow;
		}
	}
}

static void reconcile_linger(struct sim *s, int si, bool late);

/* The model's session of that name (the state's: one the state dropped
 * goes, one it made is added, lingering from now); -1 when none. */
static int session_named(struct sim *s, const char *name)
{
	const struct bwd_session *p = bwd_state_session(s->st, UID, name);
	int si = -1;

	for (int i = 0; i < MAX_SESS; i++) {
		if (s->s[i].live && s->s[i].named && !strcmp(s->s[i].name, name)) {
			reconcile_linger(s, i, false);
			if (s->s[i].live)
				return i;
		}
	}
	if (!p)
		return -1;
	for (int i = 0; i < MAX_SESS && si < 0; i++)
		if (!s->s[i].live)
			si = i;
	if (si < 0) {
		viol(s, "more than %d sessions", MAX_SESS);
		return -1;
	}
	s->s[si] = (struct msess){ .live = true, .named = true, .id = p->id,
				   .ptr = (struct bwd_session *)p,
				   .detached_at = s->now };
	snprintf(s->s[si].name, sizeof(s->s[si].name), "%s", name);
	TRACE(s, "session %d: %s, made by the state", si, name);
	return si;
}

/*
 * f, out of flight in session si after its hand-outs reached the limit,
 * goes to its dead-letter session's tail with its history, as the state
 * did: true; false when it has none (its name too long, or its own).
 */
static bool dead_letter(struct sim *s, int si, struct mfire *f,
			enum bwd_take_back why)
{
	struct msess *ms = &s->s[si];
	char name[BWP_SESSION_NAME_MAX + 1];
	const struct bwd_fire *p = f->ptr;
	int ti;

	if (!dead_letter_name(ms, name) || !strcmp(name, ms->name))
		return false;
	ti = session_named(s, name);
	if (ti < 0 || !p->dead) {
		viol(s, "session %s: key %" PRIu64 " taken back after %" PRIu32 " hand-outs (limit %" PRIu32 ") and not dead-lettered to %s",
		     ms->name, f->key, f->deliveries, max_deliveries(s, ms), name);
		return false;
	}
	if (strcmp(p->dead->origin, ms->name) || p->dead->deliveries != f->deliveries ||
	    p->dead->why != why || p->dead->dead_ns != s->now ||
	    p->dead->last_ns != f->handed_at || p->deliveries)
		viol(s, "session %s: key %" PRIu64 " dead-lettered with history (origin %s, %" PRIu64 " deliveries, last %.3f ms, why %u, now %" PRIu32 " deliveries), the model (%s, %" PRIu32 ", %.3f ms, %u, 0)",
		     ms->name, f->key, p->dead->origin, p->dead->deliveries,
		     (double)(p->dead->last_ns - T0) / 1e6, p->dead->why, p->deliveries,
		     ms->name, f->deliveries, (double)(f->handed_at - T0) / 1e6, why);
	TRACE(s, "dead-lettered: session %d key %" PRIu64 " after %" PRIu32 " deliveries to session %d (%s)",
	      si, f->key, f->deliveries, ti, name);
	s->stats.dead_lettered++;
	fire_unlink(s, ms, f);
	f->dead = true;
	snprintf(f->origin, sizeof(f->origin), "%s", ms->name);
	f->deliveries = 0;
	f->paced = false;
	fire_link(&s->s[ti], f);
	to_tail(s, &s->s[ti], f, tail_allow(s, &s->s[ti]));
	return true;
}

/* Whether f, out of flight, is past its session's limit. */
static bool at_limit(const struct sim *s, const struct msess *ms,
		     const struct mfire *f)
{
	uint32_t max = max_deliveries(s, ms);

	return max && f->deliveries >= max && !f->dead;
}

/*
 * The fires in flight to c marked `going` (in delivery order) go back,
 * after the state took them back for why: of those written whole, only the
 * oldest keeps its hand-out counted; then each past its limit goes to the
 * dead-letter session, each counted twice or more to the queue's tail, the
 * rest to the front in delivery order.  The state's count must be the
 * model's.
 */
static void take_back(struct sim *s, struct sconn *c, enum bwd_take_back why)
{
	int si = c->sess;
	struct msess *ms = &s->s[si];
	uint64_t chain = ++ms->chains, tallow = 0;
	bool blamed = false;
	size_t k = 0;

	for (size_t j = 0; j < c->flight; j++) {
		struct mfire *f = c->fl[j];
		bool written = f->wire_end <= c->drained;

		if (!f->going) {
			c->fl[k++] = f;
			continue;
		}
		f->going = false;
		if (written && !blamed)
			blamed = true;
		else if (f->deliveries)
			f->deliveries--;
		TRACE(s, "taken back: conn %d delivery %" PRIu64 " key %" PRIu64 ", %" PRIu32 " deliveries%s",
		      conn_index(s, c), f->delivery, f->key, f->deliveries,
		      written ? " (written whole)" : "");
		f->redeliv |= written;
		f->conn = -1;
		s->stats.redelivered++;
		if (at_limit(s, ms, f) && dead_letter(s, si, f, why))
			continue;
		if (f->ptr->dead ? !f->dead : f->dead || f->ptr->deliveries != f->deliveries)
			viol(s, "key %" PRIu64 " taken back with %" PRIu32 " deliveries (dead letter %d), the model says %" PRIu32 " (%d)",
			     f->key, f->ptr->deliveries, f->ptr->dead != NULL, f->deliveries, f->dead);
		f->paced = true;
		if (f->deliveries >= 2) {
			if (!tallow)
				tallow = tail_allow(s, ms);
			to_tail(s, ms, f, tallow);
			s->stats.to_tail++;
			continue;
		}
		f->st = F_WAIT;
		ms->nwait++;
		ms->nback++;
		f->back = true;
		f->chain = chain;
		f->chain_idx = f->delivery;
		f->first_go = UINT64_MAX;
		wl_add(&ms->backl, f);
		/* Let go already: it goes at once, or with a batch held
		 * (PROTOCOL.md), by the end of the batch's fires. */
		f->allow = add_sat(s->now, s->jitter);
		if (ms->coalescing && ms->ptr->held)
			for (size_t i = 0; i < ms->nf; i++)
				if (ms->f[i]->st == F_WAIT && !ms->f[i]->back &&
				    !ms->f[i]->tail && !ms->f[i]->delayed)
					f->allow = max64(f->allow, due_by(s, ms, ms->f[i]));
	}
	c->flight = k;
}

/* ---- the connection (conn.c's side of delivery) ------------------------ */

static void frame_push(struct sconn *c, uint64_t delivery)
{
	if (c->fh && c->fh == c->fn)
		c->fh = c->fn = 0;
	GROW(c->fr, c->fn, c->fc);
	c->fr[c->fn++] = (struct mframe){ c->committed, delivery };
}

static void conn_kill(struct sim *s, struct sconn *c);

/* A reply of len bytes; conn.c cuts off a client whose replies pass the
 * bound, and stops reading its requests at half of it. */
static void reply(struct sim *s, struct sconn *c, uint64_t len)
{
	if (output(c) + len > s->max_output) {
		conn_kill(s, c);
		return;
	}
	c->committed += len;
	frame_push(c, 0);
	if (output(c) >= s->max_output / 2)
		c->throttled = true;
}

/* The bytes of f's frame, packed as bwd_conn_deliver() packs it. */
static size_t fired_len(const struct bwd_fire *f)
{
	struct bwp_response fired;
	Bitwheel__V1__DeadLetter dead;
	size_t len = 0;

	bwd_fired_of(f, &fired, &dead);
	/* Nowhere to write: it says how many bytes it needs. */
	bwp_frame_pack_response(&fired, SIZE_MAX, NULL, 0, &len);
	return len;
}

/* The member is gone (killed, or closed once drained): conn.c's leave(). */
static void conn_kill(struct sim *s, struct sconn *c)
{
	if (!c->live)
		return;
	TRACE(s, "conn %d leaves", conn_index(s, c));
	if (c->m) {
		struct msess *ms = &s->s[c->sess];
		int si = c->sess;

		/* The state first: its take-back is what the model checks
		 * (an anonymous session's fires end with it). */
		bwd_member_detach(c->m);
		c->m = NULL;
		for (size_t j = 0; j < c->flight && ms->named; j++)
			c->fl[j]->going = true;
		take_back(s, c, BWD_TB_DISCONNECTED);
		s->want_pump = true;
		s->stats.detached++;
		ms->members--;
		coalesce_update(s, si);
		if (!ms->named)
			session_drop(s, si);
		else if (!ms->members)
			ms->detached_at = s->now;
	}
	free(c->fr);
	free(c->toack);
	free(c->fl);
	memset(c, 0, sizeof(*c));
}

/* n bytes of output went to the socket: conn.c's written(). */
static void drained(struct sim *s, struct sconn *c, uint64_t n)
{
	if (!n)
		return;
	c->drained += n;
	TRACE(s, "conn %d: %" PRIu64 " bytes written, %" PRIu64 " unread", conn_index(s, c), n, output(c));
	if (!c->m)
		return;
	/* conn.c's written() activates the pump for an auto-ack member with
	 * fires in flight: before the drain completes them, or (old_pump, as
	 * before issue 20) after, when a whole window drained leaves none. */
	if (c->auto_ack && c->m->flight && !s->p.old_pump)
		s->want_pump = true;
	bwd_member_written(c->m, c->drained);
	if (c->auto_ack) {
		while (c->flight && c->fl[0]->wire_end <= c->drained) {
			flight_done(s, c, 0);
			s->stats.auto_acked++;
		}
		if (c->m->flight && s->p.old_pump)
			s->want_pump = true;
	}
	if (c->closing) {
		if (!output(c))
			conn_kill(s, c);
		return;
	}
	if ((c->throttled || !c->room) && output(c) < s->max_output / 4) {
		TRACE(s, "conn %d: room again", conn_index(s, c));
		if (!c->room) {
			c->room = true;
			bwd_member_set_room(c->m, true);
		}
		c->throttled = false;
		s->want_pump = true;
	}
}

/* The client reads up to n bytes of what the socket holds. */
static void client_read(struct sim *s, struct sconn *c, uint64_t n)
{
	uint64_t kernel = c->drained - c->readpos;

	(void)s;
	c->readpos += min64(n, kernel);
	while (c->fh < c->fn && c->fr[c->fh].end <= c->readpos) {
		uint64_t d = c->fr[c->fh++].delivery;

		if (d && c->consumer && !c->auto_ack) {
			GROW(c->toack, c->na, c->ca);
			c->toack[c->na++] = d;
		}
	}
}

/* A bogus ack: the error reply, then close once it is written
 * (bwd_conn_close(c, true)). */
static void conn_close_flush(struct sim *s, struct sconn *c)
{
	reply(s, c, ERROR_REPLY);
	if (!c->live)
		return;
	c->closing = true;
	if (c->m && c->room) {
		c->room = false;
		bwd_member_set_room(c->m, false);
	}
	if (!output(c))
		conn_kill(s, c);
}

/* ---- the server: hand-outs, the pump, turns ---------------------------- */

static struct sconn *owner_conn(struct sim *s, const struct bwd_member *m)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (s->c[i].live && s->c[i].m == m)
			return &s->c[i];
	return NULL;
}

/* Whether the state's fire f is the model's g: a monotonic one by its
 * deadline and count, a wall-clock or calendar one by its instant (its
 * elapse) in count's place; boot: a boottime one, by its key only (its
 * deadline is where the state placed it, which steps move), matched after
 * the others. */
static bool fire_is(const struct mfire *g, const struct bwd_fire *f, bool boot)
{
	if (boot)
		return g->clk == C_BOOT && !f->wall && !f->count;
	if (g->clk == C_MONO)
		return !f->wall && g->count == f->count && g->deadline == f->deadline_ns;
	return g->clk != C_BOOT && f->wall && g->count == f->count;
}

static void hand_out(struct sim *s, struct bwd_fire *f, struct bwd_member *m)
{
	struct sconn *c = owner_conn(s, m);
	struct msess *ms;
	struct mfire *mf = NULL;
	bool anyback = false;
	size_t len;

	if (!c || m->owner != c) {
		viol(s, "a fire (key %" PRIu64 ") for a member no connection has", f->key);
		return;
	}
	ms = &s->s[c->sess];
	if (!c->consumer || !c->room || c->flight >= c->window) {
		viol(s, "key %" PRIu64 " handed to conn %d: consumer %d, room %d, %" PRIu64 " in flight of window %" PRIu32,
		     f->key, conn_index(s, c), c->consumer, c->room, c->flight, c->window);
		return;
	}
	anyback = ms->nback > 0;
	for (struct mfire *g = ms->backl.head; g && !mf; g = g->w_next)
		if (g->ptr == f)
			mf = g;
	for (struct mfire *g = ms->taill.head; g && !mf; g = g->w_next)
		if (g->ptr == f)
			mf = g;
	for (struct mfire *g = ms->delayl.head; g && !mf; g = g->w_next)
		if (g->ptr == f)
			mf = g;
	/* A calendar elapse a step back brought again is owed twice: the
	 * fire whose late flag is the state's, if one is. */
	for (struct mfire *g = ms->bykey[f->key % KEYS].head; g && (!mf || mf->late != f->late);
	     g = g->w_next)
		if (!g->handed && !g->unmade && g->key == f->key &&
		    g->payload_len == f->payload_len && fire_is(g, f, false) &&
		    (!mf || g->late == f->late))
			mf = g;
	for (struct mfire *g = ms->bykey[f->key % KEYS].head; g && !mf; g = g->w_next)
		if (!g->handed && !g->unmade && g->key == f->key &&
		    g->payload_len == f->payload_len && fire_is(g, f, true))
			mf = g;
	if (!mf) {
		viol(s, "conn %d was handed key %" PRIu64 " count %" PRIu64 " deadline %.3f ms, a fire its session does not owe now (early, twice, or done already)",
		     conn_index(s, c), f->key, f->count, (double)((int64_t)(f->deadline_ns - T0)) / 1e6);
		return;
	}
	if (anyback && !mf->back) {
		viol(s, "key %" PRIu64 " handed out before the fires taken back to the queue's front", f->key);
		return;
	}
	if (mf->tail && ms->taill.head->tseq < mf->tseq)
		viol(s, "key %" PRIu64 " handed out from the queue's tail before key %" PRIu64 ", which went there in an earlier turn",
		     f->key, ms->taill.head->key);
	if (mf->w_list == &ms->delayl && s->now < mf->ready)
		viol(s, "key %" PRIu64 " released with a delay handed out %.3f ms before it was ready",
		     f->key, (double)(mf->ready - s->now) / 1e6);
	if (f->deliveries != mf->deliveries + 1 || (f->dead != NULL) != mf->dead ||
	    (mf->dead && strcmp(f->dead->origin, mf->origin)))
		viol(s, "key %" PRIu64 " handed out as its delivery %" PRIu32 " (dead letter %d), the model says %" PRIu32 " (%d)",
		     f->key, f->deliveries, f->dead != NULL, mf->deliveries + 1, mf->dead);
	for (struct mfire *g = mf->back ? ms->backl.head : NULL; g; g = g->w_next) {
		if (g->chain == mf->chain && g->chain_idx < mf->chain_idx)
			viol(s, "fires taken back out of order: key %" PRIu64 " before key %" PRIu64,
			     mf->key, g->key);
	}
	if (f->deadline_ns > s->now || f->fired_ns > s->now || f->fired_ns < f->deadline_ns)
		viol(s, "key %" PRIu64 " early: deadline %.3f ms, fired at %.3f ms",
		     f->key, (double)(f->deadline_ns - T0) / 1e6, (double)(f->fired_ns - T0) / 1e6);
	if (bwd_fire_delivery(f) != c->last_delivery + 1)
		viol(s, "conn %d: delivery %" PRIu64 " after %" PRIu64, conn_index(s, c),
		     bwd_fire_delivery(f), c->last_delivery);
	if (mf->paced) {
		uint64_t mhz = max64(s->opt.limits.max_periodic_mhz_per_uid,
				     BWD_MIN_REDELIVERY_MHZ);

		uint64_t *n = &s->redelivered_out[!ms->named];

		if (++*n * 1000u > mhz +
		    (uint64_t)((unsigned __int128)(s->now - T0) * mhz / 1000000000u) + 1000u)
			viol(s, "%" PRIu64 " redeliveries of uid %d in %.3f ms: past its pace of %" PRIu64 " mHz",
			     *n, ms->named ? UID : ANON_UID, (double)(s->now - T0) / 1e6, mhz);
	}
	if (f->late != mf->late)
		viol(s, "%s key %" PRIu64 " handed out with late=%d, the model says %d",
		     clk_names[mf->clk], f->key, f->late, mf->late);
	s->stats.late_fires += f->late;
	if (f->redelivered != mf->redeliv)
		viol(s, "key %" PRIu64 " handed out with redelivered=%d, the model says %d (its frame %s written whole)",
		     f->key, f->redelivered, mf->redeliv, mf->redeliv ? "was" : "was never");
	if (s->now > due_by(s, ms, mf))
		viol(s, "key %" PRIu64 " count %" PRIu64 " late: deadline %.3f ms, leeway %.3f ms, lane bound %.3f ms, due by %.3f ms, handed out %.3f ms after (%s session)",
		     f->key, f->count, (double)(f->deadline_ns - T0) / 1e6,
		     (double)mf->leeway / 1e6, (double)mf->bound / 1e6,
		     (double)(due_by(s, ms, mf) - T0) / 1e6,
		     (double)(s->now - due_by(s, ms, mf)) / 1e6,
		     ms->coalescing ? "coalescing" : "non-coalescing");
	TRACE(s, "handed out: conn %d delivery %" PRIu64 " key %" PRIu64 " count %" PRIu64 ", its delivery %" PRIu32 "%s%s%s",
	      conn_index(s, c), bwd_fire_delivery(f), f->key, f->count, f->deliveries,
	      mf->back ? " (taken back, front)" : "", mf->tail ? " (tail)" : "",
	      mf->dead ? " (dead letter)" : "");
	if (s->failed)
		return;
	ms->nwait--;
	ms->nback -= mf->back;
	unmark(mf);
	wl_del(mf);
	if (ms->coalescing)
		session_went(s, ms);
	mf->st = F_FLIGHT;
	mf->conn = conn_index(s, c);
	mf->delivery = bwd_fire_delivery(f);
	mf->handed_at = s->now;
	mf->ptr = f;
	mf->back = mf->tail = mf->delayed = mf->paced = false;
	mf->handed = true;
	mf->optional = false;
	mf->deliveries++;
	mf->ack_by = c->ack_timeout ? add_sat(s->now, c->ack_timeout) : UINT64_MAX;
	c->last_delivery++;
	GROW(c->fl, c->flight, c->cfl);
	c->fl[c->flight++] = mf;
	s->stats.handed_out++;
	/* bwd_conn_deliver(). */
	len = fired_len(f);
	if (output(c) + len > s->max_output) {
		viol(s, "conn %d cut off: a %zu-byte fire does not fit its %" PRIu64 " bytes of unread output (bound %" PRIu64 ")",
		     conn_index(s, c), len, output(c), s->max_output);
		return;
	}
	c->committed += len;
	f->wire_end = c->committed;
	mf->wire_end = c->committed;
	frame_push(c, bwd_fire_delivery(f));
	if (output(c) >= s->max_output / 2) {
		TRACE(s, "conn %d: no room", conn_index(s, c));
		c->room = false;
		bwd_member_set_room(m, false);
	}
}

static void pump(struct sim *s)
{
	bool work[MAX_SESS], more, served = false;
	uint64_t got[MAX_SESS] = { 0 }, n = 0, waiting = 0;
	struct bwd_member *m;
	struct bwd_fire *f;

	s->stats.pumps++;
	more = bwd_state_fire(s->st);
	for (int si = 0; si < MAX_SESS; si++) {
		const struct msess *ms = &s->s[si];

		work[si] = ms->live && ms->ptr->queued && !ms->ptr->held &&
			!ms->ptr->paced && able(s, si);
		waiting += work[si];
	}
	/* server.c's pump: the clock does not move within a turn here, so
	 * only the count bounds it. */
	while (n < BWD_DELIVER_CHUNK && (f = bwd_state_next_delivery(s->st, &m))) {
		struct sconn *c = owner_conn(s, m);

		n++;
		if (c)
			got[c->sess]++;
		hand_out(s, f, m);
		if (s->failed)
			return;
	}
	if (bwd_state_reap(s->st))
		more = true;
	s->reaper = more;
	for (int si = 0; si < MAX_SESS; si++)
		served |= got[si] > 0;
	for (int si = 0; si < MAX_SESS; si++) {
		struct msess *ms = &s->s[si];

		/* Paced in this pump: its uid's redelivery tokens went to
		 * another of its sessions (pacing, not the pump's turns). */
		if (!work[si] || !ms->live || got[si] || !served || ms->ptr->paced) {
			ms->starve = 0;
			continue;
		}
		if (++ms->starve > waiting + 1)
			viol(s, "session %d had fires to hand out and waited %u turns while others were served",
			     si, ms->starve);
	}
}

/* The fires in flight to c that the state took back on its own (their ack
 * deadlines passed: in delivery order until a Touch moved one) go back in
 * the model too; none may go early or stay late. */
static void reconcile_flight(struct sim *s, struct sconn *c)
{
	const struct bwd_fire *g = c->m->flight_head;
	int ci = conn_index(s, c);
	bool any = false;

	for (size_t j = 0; j < c->flight; j++) {
		struct mfire *f = c->fl[j];

		if (f->ptr == g) {
			struct bwd_map_node *n = bwd_map_find(&c->m->flights, f->delivery);

			if (s->now > add_sat(add_sat(f->ack_by, s->bound[BW_LANE_ONESHOT]),
					     s->jitter))
				viol(s, "conn %d: delivery %" PRIu64 " in flight %.3f ms past its ack deadline",
				     ci, f->delivery, (double)(s->now - f->ack_by) / 1e6);
			/* What a single Ack, Release or Touch finds it by. */
			if (!n || bwd_container_of(n, struct bwd_fire, flight_node) != g ||
			    bwd_fire_delivery(g) != f->delivery)
				viol(s, "conn %d: delivery %" PRIu64 " in flight, not in the map by its number",
				     ci, f->delivery);
			g = g->next;
			continue;
		}
		if (s->now < f->ack_by)
			viol(s, "conn %d: delivery %" PRIu64 " taken back %.3f ms before its ack deadline",
			     ci, f->delivery, (double)(f->ack_by - s->now) / 1e6);
		f->going = any = true;
	}
	if (g || (c->m->flights.bucket && c->m->flights.count != c->m->flight)) {
		viol(s, "conn %d: the state's fires in flight are not the model's", ci);
		return;
	}
	if (any)
		take_back(s, c, BWD_TB_ACK_TIMEOUT);
}

/* A named session with no members expires after its linger, unless it
 * holds dead letters (then it lingers anew); late: check that it went in
 * time (not while the state's poll may be part done). */
static void reconcile_linger(struct sim *s, int si, bool late)
{
	struct msess *ms = &s->s[si];
	uint64_t linger = s->opt.limits.linger_ns;
	const struct bwd_session *p;

	if (!ms->live || !ms->named || ms->members)
		return;
	p = bwd_state_session(s->st, UID, ms->name);
	if (!p || p->id != ms->id) {
		if (ms->ndead)
			viol(s, "session %s expired with %" PRIu64 " dead letters", ms->name, ms->ndead);
		if (s->now < ms->detached_at + linger)
			viol(s, "session %s expired %.3f ms before its linger ran out",
			     ms->name, (double)(ms->detached_at + linger - s->now) / 1e6);
		session_drop(s, si);
	} else if (late && !ms->ndead &&
		   s->now > add_sat(add_sat(max64(ms->detached_at, ms->dead_clear) + linger,
					    s->bound[BW_LANE_ONESHOT]), s->jitter)) {
		viol(s, "session %s alive %.3f ms past its linger", ms->name,
		     (double)(s->now - max64(ms->detached_at, ms->dead_clear) - linger) / 1e6);
	}
}

/* ---- the other clocks (clock.c) -------------------------------------------- */

/*
 * Calendar timer i of session si waits for the first elapse after its
 * base (bwd_cal_next, which tests/check_calendar.c checks against
 * systemd): the state's timer (st_t) must wait for it too, plus a jitter
 * within its bound (a fixed one the same every time).  None left: the
 * state must have dropped it, and the model drops it (false).
 */
static bool cal_sync(struct sim *s, int si, size_t i, const struct bwd_timer *st_t,
		     const char *what)
{
	struct msess *ms = &s->s[si];
	struct mtimer *t = &ms->t[i];
	uint64_t e, j;

	if (bwd_cal_next(s->cal[t->spec], t->cbase, &e)) {
		if (st_t)
			viol(s, "%s: calendar key %" PRIu64 " ('%s') has no elapse after its base %.6f s; the state waits for %.6f s",
			     what, t->key, specs[t->spec], wall_s(t->cbase),
			     wall_s(bwd_wall_elapse(s->st, st_t)));
		timer_remove(ms, i);
		return false;
	}
	if (!st_t || bwd_wall_elapse(s->st, st_t) != e) {
		viol(s, "%s: calendar key %" PRIu64 " ('%s', base %.6f s) waits for %.6f s; calendar.c's next elapse is %.6f s",
		     what, t->key, specs[t->spec], wall_s(t->cbase),
		     st_t ? wall_s(bwd_wall_elapse(s->st, st_t)) : -1.0, wall_s(e));
		return true;
	}
	j = bwd_wall_ns(s->st, st_t) - e;
	if (j > t->jmax)
		viol(s, "%s: calendar key %" PRIu64 ": a jitter of %.3f ms, past its bound of %.3f ms",
		     what, t->key, (double)j / 1e6, (double)t->jmax / 1e6);
	else if (t->fixed && t->jfix_known && j != t->jfix)
		viol(s, "%s: calendar key %" PRIu64 ": a fixed jitter of %.3f ms, before %.3f ms",
		     what, t->key, (double)j / 1e6, (double)t->jfix / 1e6);
	t->jfix = j;
	t->jfix_known = true;
	t->elapse = e;
	t->at = e + j;
	return true;
}

/* t's fire, owed, is not (a step back moved its instant away). */
static void unowe(struct sim *s, struct msess *ms, struct mtimer *t)
{
	struct mfire *f = owed_fire(ms, t);

	if (f)
		fire_remove(s, ms, f);
	t->owed = false;
	t->owed_f = NULL;
}

/*
 * After a poll: the timers on other clocks the state fired (bwd_timer_find
 * no longer finds them, or a calendar timer's elapse moved on), each
 * never before its clock reached its instant, its fire marked late as the
 * model says; a calendar timer's base becomes the wall clock of the fire
 * (never before its elapse), and its next elapse the first after that
 * (elapses a step passed coalesce into the one fire).  The clocks do not
 * move within a poll, so the model knows them at the fire.
 */
static void observe(struct sim *s)
{
	for (int si = 0; si < MAX_SESS && !s->failed; si++) {
		struct msess *ms = &s->s[si];

		for (size_t i = 0; ms->live && ms->nclk && i < ms->nt && !s->failed; i++) {
			struct mtimer *t = &ms->t[i];
			const struct bwd_timer *st_t;
			struct mfire *f;
			uint64_t now;

			if (t->clk == C_MONO)
				continue;
			st_t = bwd_timer_find(ms->ptr, t->key);
			if (st_t && (t->clk != C_CAL || bwd_wall_elapse(s->st, st_t) == t->elapse))
				continue;
			now = clock_now(s, t->clk);
			f = t->owed ? owed_fire(ms, t) : NULL;
			if (now < t->at || !f) {
				viol(s, "%s key %" PRIu64 " fired %.3f ms before its instant (%.6f s) by its clock%s",
				     clk_names[t->clk], t->key, (double)(t->at - now) / 1e6,
				     wall_s(t->at), now < t->at ? "" : " (and the model owes no fire)");
				return;
			}
			f->late = t->late;
			f->unmade = false;
			t->owed_f = NULL;
			TRACE(s, "fired: session %d %s key %" PRIu64 " at %.6f s (instant %.6f s)%s",
			      si, clk_names[t->clk], t->key, wall_s(now), wall_s(t->at),
			      t->late ? ", late" : "");
			if (t->clk == C_WALL)
				s->stats.wall_fired++;
			else if (t->clk == C_BOOT)
				s->stats.boot_fired++;
			if (t->clk != C_CAL) {
				timer_remove(ms, i--);
				continue;
			}
			s->stats.cal_fired++;
			t->cbase = max64(now, t->elapse);
			t->late = t->owed = false;
			if (!cal_sync(s, si, i, st_t, "a calendar fire"))
				i--;
		}
	}
}

/* Every timer of clock k (C_WALL: wall-clock and calendar ones) is placed
 * again by the daemon at from (when it hears of the move): the lane's
 * bound counts from then.  Until then a step back makes the fires owed
 * before its instant owed no more: their slots may come due, and the
 * daemon checks the clock there (bwd_wall_due). */
static void clock_moved(struct sim *s, enum clk k, uint64_t from)
{
	for (int si = 0; si < MAX_SESS; si++) {
		struct msess *ms = &s->s[si];

		for (size_t i = 0; ms->live && ms->nclk && i < ms->nt; i++) {
			struct mtimer *t = &ms->t[i];
			struct mfire *f;

			if (k == C_BOOT ? t->clk != C_BOOT : t->clk != C_WALL && t->clk != C_CAL)
				continue;
			t->since = max64(t->since, from);
			if (t->owed && clock_now(s, t->clk) < t->at)
				unowe(s, ms, t);
			else if (t->owed && (f = owed_fire(ms, t)))
				rebase(s, ms, f, from);
		}
	}
}

/*
 * The CLOCK_REALTIME timerfd said the wall clock was stepped (the server's
 * on_step): every wall-clock and calendar timer placed again.  A calendar
 * timer's base comes down to the wall clock when that went back below it
 * (PROTOCOL.md, "Calendar timers"); a fire owed whose instant the clock
 * went back before is owed no more; one the clock has reached or passed
 * will say late.
 */
static void notice_step(struct sim *s)
{
	uint64_t real = clock_now(s, C_WALL);

	TRACE(s, "the wall clock was set: %.6f s", wall_s(real));
	s->step_pending = false;
	bwd_state_clock_step(s->st, false);
	s->want_pump = true;
	s->stats.step_notices++;
	clock_moved(s, C_WALL, s->now);
	for (int si = 0; si < MAX_SESS && !s->failed; si++) {
		struct msess *ms = &s->s[si];

		for (size_t i = 0; ms->live && ms->nclk && i < ms->nt; i++) {
			struct mtimer *t = &ms->t[i];
			uint64_t was = t->at;

			if (t->clk == C_CAL) {
				if (t->cbase > real)
					t->cbase = real;
				if (!cal_sync(s, si, i, bwd_timer_find(ms->ptr, t->key), "a step")) {
					i--;
					continue;
				}
			} else if (t->clk != C_WALL) {
				continue;
			}
			if (t->owed && (t->at != was || real < t->at))
				unowe(s, ms, t);
			if (t->at <= real)
				t->late = true;
		}
	}
}

/* The CLOCK_BOOTTIME timerfd expired (at a resume, or on time): when the
 * clocks' offset moved, every boottime timer placed again, one the
 * suspend passed to say late. */
static void notice_boot(struct sim *s)
{
	uint64_t boot = clock_now(s, C_BOOT);
	bool moved = s->boot_off - s->told_off > BOOT_SLACK;

	TRACE(s, "the boottime timerfd expired at %.3f ms boottime%s",
	      (double)boot / 1e6, moved ? ": after a suspend" : "");
	bwd_state_clock_step(s->st, true);
	s->want_pump = true;
	s->stats.boot_notices++;
	if (!moved)
		return;
	s->told_off = s->boot_off;
	clock_moved(s, C_BOOT, s->now);
	for (int si = 0; si < MAX_SESS; si++) {
		struct msess *ms = &s->s[si];

		for (size_t i = 0; ms->live && ms->nclk && i < ms->nt; i++)
			if (ms->t[i].clk == C_BOOT && ms->t[i].at <= boot)
				ms->t[i].late = true;
	}
}

/* The boottime timerfd: armed where the state says (st->boot_next: the
 * server's bwd_clock would arm the real one there), expired once
 * CLOCK_BOOTTIME reaches it. */
static bool boot_due(const struct sim *s)
{
	return s->st->boot_next <= clock_now(s, C_BOOT);
}

static void poll_wheel(struct sim *s)
{
	TRACE(s, "poll");
	bwd_state_poll(s->st, s->now);
	s->stats.polls++;
	s->want_pump = true;
	for (int i = 0; i < MAX_CONNS; i++)
		if (s->c[i].live && s->c[i].m && s->c[i].ack_timeout)
			reconcile_flight(s, &s->c[i]);
	for (int si = 0; si < MAX_SESS; si++)
		reconcile_linger(s, si, true);
	/* After the sessions the poll expired went. */
	observe(s);
}

static bool wheel_due(struct sim *s)
{
	uint64_t next;

	return bwd_state_next_deadline(s->st, &next) == 0 && next <= s->now;
}

static void turn_begin(struct sim *s)
{
	s->turn++;
	s->want_pump = false;
	owe(s);
	ready_delayed(s);
	/* Time without a consumer that could take a fire does not count. */
	for (int si = 0; si < MAX_SESS; si++)
		if (s->s[si].live && s->s[si].unable)
			s->s[si].excuse = add_sat(s->now, s->jitter);
}

static void turn_end(struct sim *s)
{
	const char *why;

	if (!s->failed && !s->p.old_pump && bwd_state_has_work(s->st))
		s->want_pump = true;
	if (!s->failed && s->want_pump)
		pump(s);
	s->want_pump = false;
	s->stats.turns++;
	if (s->failed)
		return;
	for (int i = 0; i < MAX_CONNS; i++) {
		struct sconn *c = &s->c[i];

		if (c->live && c->m && (c->m->flight != c->flight ||
					c->m->last_delivery != c->last_delivery))
			viol(s, "conn %d: the state has %" PRIu64 " in flight (last delivery %" PRIu64 "), the model %" PRIu64 " (%" PRIu64 ")",
			     i, c->m->flight, c->m->last_delivery, c->flight, c->last_delivery);
	}
	for (int si = 0; si < MAX_SESS; si++) {
		struct msess *ms = &s->s[si];

		if (!ms->live)
			continue;
		/* Paced: its taken-back fires wait for their uid's tokens. */
		ms->unable = !able(s, si) || ms->ptr->paced;
	}
	if (s->turn % 1024 == 0 && bwd_wheels_check(s->st, &why))
		viol(s, "the wheel's self-check: %s", why);
}

/* A turn the loop takes with no event: the wheel's timerfd, the reaper,
 * or (the rule of issue 20) work left. */
/* The CLOCK_REALTIME timerfd was cancelled by a step, and the daemon
 * reads it at this turn (a quiet step's, once its time came). */
static bool step_due(const struct sim *s)
{
	return s->step_pending && s->notice_at <= s->now;
}

static bool turn_pending(struct sim *s)
{
	return wheel_due(s) || s->reaper || step_due(s) || boot_due(s) ||
		(!s->p.old_pump && bwd_state_has_work(s->st));
}

/* A loop turn: one of the descriptors ready (the wheel's timerfd, the
 * step detector, the boottime timerfd), in any order. */
static void server_turn(struct sim *s)
{
	bool ready[3];
	unsigned n;

	turn_begin(s);
	ready[0] = step_due(s);
	ready[1] = boot_due(s);
	ready[2] = wheel_due(s);
	n = rnd(s, ready[0] + ready[1] + ready[2]);
	for (unsigned i = 0; i < 3; i++) {
		if (!ready[i] || n--)
			continue;
		if (i == 0)
			notice_step(s);
		else if (i == 1)
			notice_boot(s);
		else
			poll_wheel(s);
		break;
	}
	if (s->reaper) {
		s->reaper = false;
		s->want_pump = true;
	}
	turn_end(s);
}

/* Every turn the loop takes at this instant. */
static void idle(struct sim *s)
{
	unsigned n = 0;

	while (!s->failed && turn_pending(s)) {
		if (++n > IDLE_TURNS) {
			viol(s, "the loop still has work after %u turns at one instant", n - 1);
			return;
		}
		server_turn(s);
	}
}

/* The loop is idle at this instant: nothing may wait that could go, and
 * nothing may be lost. */
static void check_quiet(struct sim *s)
{
	s->stats.checks++;
	for (int si = 0; si < MAX_SESS && !s->failed; si++) {
		struct msess *ms = &s->s[si];
		const struct bwd_session *p = ms->ptr;
		uint64_t must = 0, may = 0, flight = 0, made = p ? p->queued + p->delayed : 0;
		bool can = ms->live && able(s, si) && !p->paced;
		/* A session that piled up fires (no consumer) costs its
		 * length: looked at whole every 64th time only. */
		bool whole = ms->nf <= 512 || s->stats.checks % 64 == 0;

		if (!ms->live)
			continue;
		for (const struct bwd_due *d = p->due_head; d; d = d->next)
			made += d->kind == BWD_DUE_TIMER;
		if (!whole) {
			may = ms->nwait;
			flight = ms->nf - ms->nwait;
		}
		for (size_t i = 0; whole && i < ms->nf; i++) {
			struct mfire *f = ms->f[i];

			if (f->st == F_FLIGHT) {
				flight++;
				continue;
			}
			may++;
			if (!f->optional && s->now > add_sat(add_sat(f->base, f->bound), s->jitter))
				must++;
			if (can && !f->optional && s->now > due_by(s, ms, f))
				viol(s, "session %d: key %" PRIu64 " count %" PRIu64 " (deadline %.3f ms) waits %.3f ms past its bound while a consumer has room and credit (state: held %d%s%.3f ms, ready %d, in the work list %d)",
				     si, f->key, f->count, (double)(f->deadline - T0) / 1e6,
				     (double)(s->now - due_by(s, ms, f)) / 1e6, p->held,
				     p->hold_armed ? ", hold armed at " : ", no hold armed; hold at ",
				     (double)((int64_t)(p->hold_ns - T0)) / 1e6, p->ready_head != NULL,
				     p->work.pprev != NULL);
		}
		if (can && p->queued && !p->held)
			viol(s, "session %d stalls: %" PRIu64 " fires queued (held %d) while a consumer has room and credit",
			     si, p->queued, p->held);
		if (made < must || made > may || p->in_flight != flight)
			viol(s, "session %d: the state has %" PRIu64 " fires waiting and %" PRIu64 " in flight; the model %" PRIu64 " to %" PRIu64 " waiting and %" PRIu64 " in flight",
			     si, made, p->in_flight, must, may, flight);
	}
}

/* ---- events -------------------------------------------------------------- */

static struct sconn *pick_conn(struct sim *s, bool member)
{
	int start = (int)rnd(s, MAX_CONNS);

	for (int i = 0; i < MAX_CONNS; i++) {
		struct sconn *c = &s->c[(start + i) % MAX_CONNS];

		if (c->live && (!member || c->m))
			return c;
	}
	return NULL;
}

/* A connection that may send a request now. */
static struct sconn *pick_client(struct sim *s)
{
	struct sconn *c = pick_conn(s, true);

	return c && !c->closing && !c->throttled && !c->leaving ? c : NULL;
}

static uint64_t pick_leeway(struct sim *s, uint64_t period)
{
	switch (rnd(s, 7)) {
	case 0:
	case 1:
		return BWD_LEEWAY_DEFAULT;
	case 2:
		return 0;
	case 3:
		return 1 + rnd(s, 3 * MS);
	case 4:
		return 5 * MS;
	case 5:
		return period ? period / 4 : 20 * MS;
	default:
		return period ? period / 2 : 100 * MS + rnd(s, 900 * MS);
	}
}

static void ev_schedule(struct sim *s, bool replace)
{
	struct sconn *c = pick_client(s);
	struct msess *ms;
	struct bwd_schedule req = { .replace = replace };
	struct bwd_calendar cal;
	struct mtimer *old, t = { 0 };
	bool replaced;
	int err;

	if (!c)
		return;
	ms = &s->s[c->sess];
	req.uid = ms->named ? UID : ANON_UID;
	req.key = rnd(s, KEYS);
	t.clk = chance(s, 20) ? (enum clk)(C_WALL + rnd(s, 3)) : C_MONO;
	if (t.clk == C_CAL) {
		static const uint64_t jitters[] = { 0, 5 * MS, 300 * MS, 2000 * MS };
		char why[192];

		/* As request.c makes it, but the jitter's seed from the
		 * choices (the fixed kind's is the host's and the key's). */
		req.leeway_ns = pick_leeway(s, 0);
		t.leeway = leeway_of(s, req.leeway_ns, 0);
		t.bound = bound_of(s, t.leeway);
		t.spec = (unsigned)rnd(s, NSPECS);
		t.cbase = clock_now(s, C_WALL);
		t.jmax = rnd(s, jitters[rnd(s, 4)] + 1);
		t.fixed = chance(s, 30);
		cal = (struct bwd_calendar){
			.spec = specs[t.spec], .base_ns = t.cbase, .jitter_ns = t.jmax,
			.fixed = t.fixed, .has_grace = chance(s, 30),
			.seed = rnd(s, UINT64_MAX),
		};
		cal.grace_ns = cal.has_grace ? rnd(s, 1000 * MS) : 0;
		err = bwd_cal_check(&cal, &req.wall_ns, why, sizeof(why));
		if (err) {
			/* The one-elapse spec, once the wall clock passed it. */
			if (err != -ENOENT)
				viol(s, "calendar '%s' refused: %s", specs[t.spec], why);
			reply(s, c, ERROR_REPLY);
			return;
		}
		req.cal = &cal;
		req.deadline_ns = bwd_wall_place(req.wall_ns, s->now, t.cbase);
	} else if (t.clk != C_MONO) {
		uint64_t now = clock_now(s, t.clk);

		req.leeway_ns = pick_leeway(s, 0);
		t.leeway = leeway_of(s, req.leeway_ns, 0);
		t.bound = bound_of(s, t.leeway);
		switch (rnd(s, 4)) {
		case 0:
			t.at = now - rnd(s, 50 * MS);
			break;
		case 1:
			t.at = now + rnd(s, 5 * MS);
			break;
		case 2:
			t.at = now + rnd(s, 300 * MS);
			break;
		default:
			t.at = now + rnd(s, 3000 * MS);
		}
		req.wall_ns = t.at;
		req.boot = t.clk == C_BOOT;
		req.deadline_ns = bwd_wall_place(t.at, s->now, now);
	} else if (chance(s, 25)) {
		static const uint64_t periods[] = { 2, 7, 20, 100, 250, 1000 };

		req.period_ns = periods[rnd(s, 6)] * MS + rnd(s, MS);
		req.leeway_ns = pick_leeway(s, req.period_ns);
		t.leeway = leeway_of(s, req.leeway_ns, req.period_ns);
		t.bound = bound_of(s, t.leeway);
		/* Periods the lane keeps without skipping (PROTOCOL.md:
		 * a fire a whole period late skips). */
		req.period_ns = max64(req.period_ns,
				      2 * (max64(t.leeway, t.bound) + s->jitter) + MS);
		req.deadline_ns = s->now + rnd(s, req.period_ns);
	} else {
		req.leeway_ns = pick_leeway(s, 0);
		t.leeway = leeway_of(s, req.leeway_ns, 0);
		t.bound = bound_of(s, t.leeway);
		switch (rnd(s, 5)) {
		case 0:
			req.deadline_ns = s->now - rnd(s, 50 * MS);
			break;
		case 1:
			req.deadline_ns = s->now + rnd(s, 5 * MS);
			break;
		case 2:
		case 3:
			req.deadline_ns = s->now + rnd(s, 300 * MS);
			break;
		default:
			req.deadline_ns = s->now + rnd(s, 3000 * MS);
		}
	}
	switch (rnd(s, 4)) {
	case 0:
		req.payload_len = 0;
		break;
	case 1:
		req.payload_len = (uint32_t)rnd(s, 17);
		break;
	case 2:
		req.payload_len = (uint32_t)rnd(s, s->opt.limits.max_payload + 1);
		break;
	default:
		req.payload_len = s->opt.limits.max_payload;
	}
	req.has_payload = req.payload_len || chance(s, 50);
	req.payload = s->payload;
	err = bwd_timer_schedule(ms->ptr, &req, &replaced);
	s->want_pump = true;
	TRACE(s, "conn %d schedules %s key %" PRIu64 " deadline %.3f (instant %.6f s%s%s) period %.3f leeway %.3f payload %" PRIu32 "%s: %d%s",
	      conn_index(s, c), clk_names[t.clk], req.key,
	      (double)((int64_t)(req.deadline_ns - T0)) / 1e6, wall_s(req.wall_ns),
	      req.cal ? ", " : "", req.cal ? req.cal->spec : "",
	      (double)req.period_ns / 1e6,
	      req.leeway_ns == BWD_LEEWAY_DEFAULT ? -1.0 : (double)req.leeway_ns / 1e6,
	      req.payload_len, replace ? " replace" : "", err, replaced ? " replaced" : "");
	old = timer_find(ms, req.key);
	if (err == BITWHEEL__V1__ERROR_CODE__DUPLICATE_KEY) {
		if (!old)
			viol(s, "Schedule: DUPLICATE_KEY for key %" PRIu64 ", which has no timer", req.key);
		else if (!old->period)
			unfired(s, c->sess, old, false, "Schedule (duplicate)");
		reply(s, c, SCHEDULE_REPLY);
		return;
	}
	if (err) {
		reply(s, c, SCHEDULE_REPLY);
		return;
	}
	if (old && replaced) {
		unfired(s, c->sess, old, true, "Schedule (replace)");
		timer_remove(ms, (size_t)(old - ms->t));
	} else if (old) {
		gone(s, ms, old, "Schedule");
	} else if (replaced) {
		viol(s, "Schedule replaced key %" PRIu64 ", which has no timer", req.key);
	}
	t.key = req.key;
	t.deadline = req.deadline_ns;
	t.since = s->now;
	t.period = req.period_ns;
	t.payload_len = req.payload_len;
	t.id = ++s->tids;
	GROW(ms->t, ms->nt, ms->ct);
	ms->t[ms->nt++] = t;
	ms->nclk += t.clk != C_MONO;
	s->stats.scheduled++;
	if (t.clk == C_CAL)
		cal_sync(s, c->sess, ms->nt - 1, bwd_timer_find(ms->ptr, t.key), "Schedule");
	reply(s, c, SCHEDULE_REPLY);
}

static void ev_cancel(struct sim *s)
{
	struct sconn *c = pick_client(s);
	struct msess *ms;
	struct mtimer *old;
	uint64_t key;
	bool pending;

	if (!c)
		return;
	ms = &s->s[c->sess];
	key = ms->nt && chance(s, 70) ? ms->t[rnd(s, ms->nt)].key : rnd(s, KEYS);
	if (bwd_timer_cancel(ms->ptr, key, &pending))
		viol(s, "Cancel of key %" PRIu64 " failed", key);
	TRACE(s, "conn %d cancels key %" PRIu64 ": pending %d", conn_index(s, c), key, pending);
	s->want_pump = true;
	old = timer_find(ms, key);
	if (pending && !old) {
		viol(s, "Cancel: key %" PRIu64 " pending, which has no timer", key);
	} else if (pending) {
		unfired(s, c->sess, old, true, "Cancel");
		timer_remove(ms, (size_t)(old - ms->t));
	} else if (old) {
		gone(s, ms, old, "Cancel");
	}
	reply(s, c, CANCEL_REPLY);
}

/* A delivery number for a request that names a fire: mostly one read and
 * not acknowledged (off the list when take), else one sent (late, or not
 * read yet), or a bad one. */
static uint64_t pick_delivery(struct sim *s, struct sconn *c, bool take)
{
	uint64_t d;

	if (c->na && chance(s, 80)) {
		size_t i = rnd(s, c->na);

		d = c->toack[i];
		if (take)
			c->toack[i] = c->toack[--c->na];
		return d;
	}
	if (c->last_delivery && !chance(s, 10))
		return 1 + rnd(s, c->last_delivery);
	return chance(s, 50) ? 0 : c->last_delivery + 1 + rnd(s, 3);
}

/* The fire in flight to c numbered d, and its place; NULL when none. */
static struct mfire *flight_find(struct sconn *c, uint64_t d, size_t *j)
{
	for (*j = 0; *j < c->flight; (*j)++)
		if (c->fl[*j]->delivery == d)
			return c->fl[*j];
	return NULL;
}

static void ev_ack(struct sim *s)
{
	struct sconn *c = pick_client(s);
	uint64_t d, expect = 0, acked;
	bool cumulative = chance(s, 40), bad;
	int ci, err;

	if (!c || !c->consumer || (c->auto_ack && !chance(s, 5)))
		return;
	ci = conn_index(s, c);
	d = pick_delivery(s, c, true);
	for (size_t j = 0; cumulative && j < c->na; j++)
		if (c->toack[j] <= d)
			c->toack[j--] = c->toack[--c->na];
	bad = d == 0 || d > c->last_delivery;
	err = bwd_member_ack(c->m, d, cumulative, &acked);
	s->want_pump = true;
	if (bad) {
		if (!err)
			viol(s, "conn %d: Ack of delivery %" PRIu64 " (last sent %" PRIu64 ") accepted",
			     ci, d, c->last_delivery);
		conn_close_flush(s, c);
		return;
	}
	if (err) {
		viol(s, "conn %d: Ack of delivery %" PRIu64 " refused", ci, d);
		return;
	}
	for (size_t j = 0; j < c->flight; j++) {
		if (cumulative ? c->fl[j]->delivery <= d : c->fl[j]->delivery == d) {
			flight_done(s, c, j--);
			expect++;
		}
	}
	TRACE(s, "conn %d: %s ack of %" PRIu64 ": %" PRIu64 " done", ci,
	      cumulative ? "cumulative" : "single", d, expect);
	if (acked != expect)
		viol(s, "conn %d: %s Ack of delivery %" PRIu64 " completed %" PRIu64 " fires, the model %" PRIu64,
		     ci, cumulative ? "a cumulative" : "an", d, acked, expect);
	s->stats.acked += expect;
	if (chance(s, 50))
		reply(s, c, ACK_REPLY);
}

/* A request naming delivery d was refused as it must be when d was never
 * sent (BAD_REQUEST, which closes once the error is written): true then. */
static bool bad_delivery(struct sim *s, struct sconn *c, uint64_t d, int err,
			 const char *what)
{
	if (d && d <= c->last_delivery)
		return false;
	if (err != BITWHEEL__V1__ERROR_CODE__BAD_REQUEST)
		viol(s, "conn %d: %s of delivery %" PRIu64 " (last sent %" PRIu64 "): error %d",
		     conn_index(s, c), what, d, c->last_delivery, err);
	conn_close_flush(s, c);
	return true;
}

/* Release (PROTOCOL.md): the fire leaves the window, at once to its
 * queue's tail or after a delay, or to the dead-letter session at its
 * limit. */
static void ev_release(struct sim *s)
{
	struct sconn *c = pick_client(s);
	struct bwd_release out;
	struct msess *ms;
	struct mfire *f;
	uint64_t d, delay;
	size_t j;
	int err;

	if (!c || !c->consumer)
		return;
	d = pick_delivery(s, c, true);
	delay = chance(s, 50) ? 0 : chance(s, 20) ? 1 + rnd(s, MS) : rnd(s, 400 * MS);
	err = bwd_member_release(c->m, d, delay, &out);
	s->want_pump = true;
	if (bad_delivery(s, c, d, err, "Release"))
		return;
	f = flight_find(c, d, &j);
	TRACE(s, "conn %d releases delivery %" PRIu64 " (delay %.3f ms): released %d, dead-lettered %d, %" PRIu64 " deliveries",
	      conn_index(s, c), d, (double)delay / 1e6, out.released, out.dead_lettered,
	      out.deliveries);
	if (err || out.released != (f != NULL)) {
		viol(s, "conn %d: Release of delivery %" PRIu64 ": error %d, released %d; the model has it %s",
		     conn_index(s, c), d, err, out.released, f ? "in flight" : "done or back");
		return;
	}
	if (f) {
		ms = &s->s[c->sess];
		memmove(c->fl + j, c->fl + j + 1, (c->flight - j - 1) * sizeof(*c->fl));
		c->flight--;
		s->stats.released++;
		if (out.deliveries != f->deliveries)
			viol(s, "conn %d: Release of key %" PRIu64 ": %" PRIu64 " deliveries, the model %" PRIu32,
			     conn_index(s, c), f->key, out.deliveries, f->deliveries);
		if (at_limit(s, ms, f) && dead_letter(s, c->sess, f, BWD_TB_RELEASED)) {
			if (!out.dead_lettered)
				viol(s, "Release of key %" PRIu64 " at its limit: not said dead-lettered", f->key);
		} else if (out.dead_lettered || out.ready_ns != s->now + delay) {
			viol(s, "Release of key %" PRIu64 ": dead-lettered %d, ready at %.3f ms; the model: not, at %.3f ms",
			     f->key, out.dead_lettered, (double)(out.ready_ns - T0) / 1e6,
			     (double)(s->now + delay - T0) / 1e6);
		} else {
			f->paced = true;
			f->conn = -1;
			if (!delay) {
				to_tail(s, ms, f, tail_allow(s, ms));
			} else {
				f->st = F_WAIT;
				f->delayed = true;
				f->ready = s->now + delay;
				s->stats.released_delayed++;
				f->allow = UINT64_MAX;
				f->first_go = UINT64_MAX;
				ms->nwait++;
				wl_add(&ms->delayl, f);
			}
		}
	}
	reply(s, c, RELEASE_REPLY);
}

/* Touch: the fire's ack deadline moves, within its hand-out's hold limit. */
static void ev_touch(struct sim *s)
{
	static const uint64_t t[] = { 0, 0, 5 * MS, 50 * MS, 400 * MS,
				      13ull * 3600 * 1000000000 };
	struct sconn *c = pick_client(s);
	struct mfire *f;
	uint64_t d, timeout = t[rnd(s, 6)], at, want;
	bool touched;
	size_t j;
	int err, expect = 0;

	if (!c || !c->consumer)
		return;
	d = c->flight && chance(s, 70) ? c->fl[rnd(s, c->flight)]->delivery :
		pick_delivery(s, c, false);
	err = bwd_member_touch(c->m, d, timeout, &touched, &at);
	if (bad_delivery(s, c, d, err, "Touch"))
		return;
	f = flight_find(c, d, &j);
	want = add_sat(s->now, timeout ? timeout : c->ack_timeout);
	if (f && c->ack_timeout && want - f->handed_at > BWD_MAX_HOLD_NS)
		expect = BITWHEEL__V1__ERROR_CODE__HOLD_LIMIT;
	TRACE(s, "conn %d touches delivery %" PRIu64 " for %.3f ms: error %d, touched %d, deadline %.3f ms",
	      conn_index(s, c), d, (double)timeout / 1e6, err, touched,
	      (double)((int64_t)(at - T0)) / 1e6);
	if (err != expect || touched != (f && !expect) ||
	    at != (!f || !c->ack_timeout ? 0 : expect ? f->handed_at + BWD_MAX_HOLD_NS : want))
		viol(s, "conn %d: Touch of delivery %" PRIu64 " (%s, ack timeout %.3f ms): error %d, touched %d, deadline %.3f ms; the model: error %d",
		     conn_index(s, c), d, f ? "in flight" : "not in flight",
		     (double)c->ack_timeout / 1e6, err, touched,
		     (double)((int64_t)(at - T0)) / 1e6, expect);
	if (f && c->ack_timeout && !expect) {
		f->ack_by = want;
		s->stats.touched++;
	}
	s->stats.hold_limited += expect != 0;
	reply(s, c, err ? ERROR_REPLY : TOUCH_REPLY);
}

/* SetPolicy: a small limit, so that fires reach it; another dead-letter
 * session now and then. */
static void ev_policy(struct sim *s)
{
	struct sconn *c = pick_client(s);
	struct msess *ms;
	char name[BWP_SESSION_NAME_MAX + 1], got[BWP_SESSION_NAME_MAX + 1];
	const char *dl = NULL;
	bool has_max = chance(s, 70);
	uint32_t max = chance(s, 15) ? 0 : (uint32_t)(1 + rnd(s, 5));
	unsigned r = (unsigned)rnd(s, 10);
	int err;

	if (!c)
		return;
	ms = &s->s[c->sess];
	if (r >= 6)
		dl = r < 8 ? "" : names[rnd(s, NAMES)];
	if (dl && !strcmp(dl, ms->name))
		dl = NULL;              /* request.c refuses its own name */
	err = bwd_session_set_policy(ms->ptr, has_max, max, dl);
	TRACE(s, "conn %d sets session %d's policy: max %d %" PRIu32 ", dead letter %s: %d",
	      conn_index(s, c), c->sess, has_max, max, dl ? dl : "(kept)", err);
	if (!ms->named) {
		if (err != BITWHEEL__V1__ERROR_CODE__BAD_REQUEST)
			viol(s, "SetPolicy of an anonymous session: error %d", err);
		reply(s, c, ERROR_REPLY);
		return;
	}
	if (err) {
		viol(s, "SetPolicy refused: error %d", err);
		return;
	}
	if (!ms->policy_set)
		ms->max_deliveries = max_deliveries(s, ms);
	if (has_max)
		ms->max_deliveries = max;
	if (dl)
		strcpy(ms->dead_letter, dl);
	ms->policy_set = true;
	s->stats.policies++;
	if (bwd_session_max_deliveries(ms->ptr) != max_deliveries(s, ms) ||
	    dead_letter_name(ms, name) != !bwd_session_dead_letter_name(ms->ptr, got) ||
	    (dead_letter_name(ms, name) && strcmp(name, got)))
		viol(s, "session %s's policy: limit %" PRIu32 ", dead letters to %s; the model: %" PRIu32 ", %s",
		     ms->name, bwd_session_max_deliveries(ms->ptr), got, max_deliveries(s, ms), name);
	reply(s, c, POLICY_REPLY);
}

/* Kick: the session's queued dead letters (of a key) come back to its
 * tail, counted from 0, up to the limit. */
static void ev_kick(struct sim *s)
{
	struct sconn *c = pick_client(s);
	struct msess *ms, *dl;
	char name[BWP_SESSION_NAME_MAX + 1];
	bool has_key = chance(s, 40), more;
	uint64_t key = rnd(s, KEYS), kicked, moved = 0, left = 0, allow;
	uint32_t limit = chance(s, 50) ? 0 : (uint32_t)(1 + rnd(s, 3));
	int ti = -1, err;

	if (!c)
		return;
	ms = &s->s[c->sess];
	if (ms->named && dead_letter_name(ms, name) && strcmp(name, ms->name))
		ti = session_named(s, name);
	err = bwd_session_kick(ms->ptr, has_key, key, limit, &kicked, &more);
	TRACE(s, "conn %d kicks session %d's dead letters (key %" PRId64 ", limit %" PRIu32 "): %" PRIu64 " kicked, more %d",
	      conn_index(s, c), c->sess, has_key ? (int64_t)key : -1, limit, kicked, more);
	if (err || (ti < 0 && kicked)) {
		viol(s, "Kick: error %d, %" PRIu64 " kicked from no dead-letter session", err, kicked);
		return;
	}
	if (ti < 0) {
		reply(s, c, KICK_REPLY);
		return;
	}
	dl = &s->s[ti];
	allow = tail_allow(s, ms);
	for (size_t i = 0; i < dl->nf; i++) {
		struct mfire *f = dl->f[i];
		bool match = f->dead && !strcmp(f->origin, ms->name) && (!has_key || f->key == key) &&
			f->st == F_WAIT;

		if (!f->dead || f->ptr->dead) {
			/* Delayed, it may not be queued in the state yet. */
			left += match && f->w_list != &dl->delayl;
			continue;
		}
		if (!match) {
			viol(s, "Kick of session %s moved key %" PRIu64 " (a dead letter %d of session %s, %s), not one of its queued dead letters",
			     ms->name, f->key, f->dead, f->dead ? f->origin : "-",
			     f->st == F_WAIT ? "waiting" : "in flight");
			return;
		}
		fire_unlink(s, dl, f);
		f->dead = f->paced = false;
		f->deliveries = 0;
		fire_link(ms, f);
		to_tail(s, ms, f, allow);
		moved++;
		i--;
	}
	s->stats.kicked += moved;
	if (moved != kicked || kicked > (limit ? limit : BWD_MAX_KICK) || (!more && left))
		viol(s, "Kick of session %s (key %" PRId64 ", limit %" PRIu32 "): %" PRIu64 " kicked, more %d; the model saw %" PRIu64 " moved, %" PRIu64 " left",
		     ms->name, has_key ? (int64_t)key : -1, limit, kicked, more, moved, left);
	reply(s, c, KICK_REPLY);
}

static void ev_attach(struct sim *s)
{
	struct sconn *c = NULL;
	struct bwd_attach a = { .uid = UID, .owner_uid = UID, .pid = 1 };
	struct bwd_member *m;
	unsigned kind = (unsigned)rnd(s, 4);
	int si = -1, name = (int)(chance(s, 20) ? BASE_NAMES + rnd(s, NAMES - BASE_NAMES) :
				  rnd(s, BASE_NAMES)), err;
	bool resumed;

	for (int i = 0; i < MAX_CONNS && !c; i++)
		if (!s->c[i].live)
			c = &s->c[i];
	if (!c)
		return;
	if (kind == 3)
		a.uid = a.owner_uid = ANON_UID;
	if (kind < 3) {
		si = session_named(s, names[name]);
		a.name = names[name];
	}
	if (si < 0) {
		for (int i = 0; i < MAX_SESS && si < 0; i++)
			if (!s->s[i].live)
				si = i;
		if (si < 0)
			return;
	}
	a.consumer = kind != 2;
	if (a.consumer) {
		uint32_t w = s->opt.limits.max_window;

		switch (rnd(s, 5)) {
		case 0:
			a.window = 1;
			break;
		case 1:
			a.window = 2 < w ? 2 : w;
			break;
		case 2:
			a.window = (uint32_t)(1 + rnd(s, 16 < w ? 16 : w));
			break;
		case 3:
			a.window = w;
			break;
		default:
			a.window = (uint32_t)(1 + rnd(s, w));
		}
		a.auto_ack = a.name ? chance(s, 30) : chance(s, 85);
		a.coalesce = chance(s, 35);
		if (chance(s, 20)) {
			static const uint64_t t[] = { 1, 20 * MS, 100 * MS, 300 * MS };

			/* request.c's floor. */
			a.ack_timeout_ns = max64(t[rnd(s, 4)], BWD_MIN_ACK_TIMEOUT_NS);
		}
	}
	a.owner = c;
	err = bwd_session_attach(s->st, &a, &m, &resumed);
	s->want_pump = true;
	if (err) {
		viol(s, "Hello refused: error %d", err);
		return;
	}
	if (!s->s[si].live) {
		if (resumed)
			viol(s, "Hello resumed a session the model does not have");
		s->s[si] = (struct msess){ .live = true, .named = a.name != NULL,
					   .id = m->session->id, .ptr = m->session };
		if (a.name)
			strcpy(s->s[si].name, a.name);
	} else if (!resumed || m->session != s->s[si].ptr) {
		viol(s, "Hello did not resume session %s", names[name]);
	}
	*c = (struct sconn){
		.live = true, .sess = si, .m = m, .consumer = a.consumer,
		.auto_ack = a.auto_ack, .coalesce = a.coalesce, .window = a.window,
		.ack_timeout = a.ack_timeout_ns, .room = true,
	};
	switch (rnd(s, 3)) {
	case 0:
		c->kcap = 1 + rnd(s, 256);
		break;
	case 1:
		c->kcap = 4096;
		break;
	default:
		c->kcap = 212992;
	}
	s->s[si].members++;
	s->stats.attached++;
	TRACE(s, "conn %d attaches to session %d (%s): consumer %d auto_ack %d coalesce %d window %" PRIu32 " ack_timeout %.3f kcap %" PRIu64,
	      conn_index(s, c), si, a.name ? a.name : "anonymous", a.consumer, a.auto_ack,
	      a.coalesce, a.window, (double)a.ack_timeout_ns / 1e6, c->kcap);
	coalesce_update(s, si);
	reply(s, c, HELLO_REPLY);
}

/* Some of c's output goes to its socket, as much as that takes. */
static void ev_drain(struct sim *s, struct sconn *c, bool all)
{
	uint64_t room = c->kcap - (c->drained - c->readpos);
	uint64_t n = min64(output(c), room);

	drained(s, c, all ? n : rnd(s, n + 1));
}

static void ev_detach(struct sim *s)
{
	struct sconn *c = pick_conn(s, true);

	if (!c)
		return;
	if (chance(s, 50)) {
		conn_kill(s, c);        /* killed, or cut off mid-frame */
		return;
	}
	c->leaving = true;              /* reads all, then closes */
}

/* A leaving client reads on, and closes once it has read everything. */
static void leaving(struct sim *s, struct sconn *c)
{
	if (!c->live || !c->leaving)
		return;
	ev_drain(s, c, true);
	if (!c->live)
		return;
	client_read(s, c, UINT64_MAX);
	if (c->readpos == c->committed)
		conn_kill(s, c);
}

/* When the loop wakes next: the wheel's deadline, where the boottime
 * timerfd expires on CLOCK_MONOTONIC, or a quiet step's notice; false:
 * none is armed. */
static bool next_wake(struct sim *s, uint64_t *next)
{
	bool armed = bwd_state_next_deadline(s->st, next) == 0;
	uint64_t b = s->st->boot_next;

	if (b != UINT64_MAX) {
		b = b > s->boot_off ? b - s->boot_off : 0;
		*next = armed ? min64(*next, b) : b;
		armed = true;
	}
	if (s->step_pending) {
		*next = armed ? min64(*next, s->notice_at) : s->notice_at;
		armed = true;
	}
	return armed;
}

/* The clock moves on by dt, the loop waking at each deadline on the way
 * (up to the jitter late) and doing all it has to. */
static void ev_advance(struct sim *s, uint64_t dt)
{
	uint64_t target = s->now + dt, next;
	unsigned n = 0;

	idle(s);
	if (s->failed)
		return;
	check_quiet(s);
	while (!s->failed && next_wake(s, &next) && next <= target) {
		uint64_t wake = min64(add_sat(next, rnd(s, s->jitter + 1)), target);

		if (++n > IDLE_TURNS) {
			viol(s, "the wheel's next deadline does not move on");
			return;
		}
		if (wake > s->now)
			s->now = wake;
		server_turn(s);
		idle(s);
	}
	if (!s->failed)
		s->now = target;
}

/* How far a step or a suspend moves a clock: mostly less than the
 * simulation's advances, now and then hours (past calendar elapses). */
static uint64_t clock_jump(struct sim *s)
{
	unsigned k = (unsigned)rnd(s, 100);

	return 1 + (k < 45 ? rnd(s, 50 * MS) : k < 92 ? rnd(s, 5000 * MS) :
		    rnd(s, 7200000 * MS));
}

/* The daemon hears of a move of the wall clock from its CLOCK_REALTIME
 * timerfd at a later turn of this instant, or (a quiet step: as if the
 * timerfd's re-arm had failed, clock.c) up to 2 s later; its wheel's
 * polls may come first, which bwd_wall_due keeps from firing early. */
static void wall_moved(struct sim *s)
{
	uint64_t at = chance(s, 25) ? s->now + 1 + rnd(s, 2000 * MS) : s->now;

	s->notice_at = s->step_pending ? min64(s->notice_at, at) : at;
	s->step_pending = true;
	clock_moved(s, C_WALL, s->notice_at);
}

/* The wall clock is stepped, forward or back (settimeofday, NTP). */
static void ev_clock_step(struct sim *s)
{
	bool back = chance(s, 50);
	uint64_t d = clock_jump(s);

	s->real_off = back ? s->real_off - d : s->real_off + d;
	TRACE(s, "the wall clock steps %s %.3f ms to %.6f s", back ? "back" : "forward",
	      (double)d / 1e6, wall_s(clock_now(s, C_WALL)));
	wall_moved(s);
	s->stats.wall_steps++;
	s->stats.wall_steps_back += back;
}

/* The host was suspended for a while and resumed: CLOCK_BOOTTIME and the
 * wall clock moved on, CLOCK_MONOTONIC did not.  The kernel tells of the
 * wall clock's jump as of a step (timerfd_resume), and the boottime
 * timerfd expires if the suspend passed it. */
static void ev_suspend(struct sim *s)
{
	uint64_t d = 100 * MS + clock_jump(s);

	s->boot_off += d;
	s->real_off += d;
	TRACE(s, "suspended for %.3f ms", (double)d / 1e6);
	wall_moved(s);
	clock_moved(s, C_BOOT, s->now);
	s->stats.suspends++;
}

int sim_step(struct sim *s)
{
	struct sconn *c;
	unsigned r;

	if (s->failed)
		return -1;
	s->stats.steps++;
	if (turn_pending(s) && chance(s, 30)) {
		server_turn(s);
		return s->failed ? -1 : 0;
	}
	r = (unsigned)rnd(s, 1030);
	if (r < 200) {
		unsigned k = (unsigned)rnd(s, 100);

		ev_advance(s, k < 60 ? rnd(s, 2 * MS) : k < 97 ? rnd(s, 150 * MS) :
			   rnd(s, 3000 * MS));
		return s->failed ? -1 : 0;
	}
	turn_begin(s);
	if (r < 330) {
		ev_schedule(s, chance(s, 25));
	} else if (r < 370) {
		ev_cancel(s);
	} else if (r < 530) {
		if ((c = pick_conn(s, false)))
			ev_drain(s, c, chance(s, 20));
	} else if (r < 680) {
		if ((c = pick_conn(s, false)))
			client_read(s, c, chance(s, 30) ? UINT64_MAX : 1 + rnd(s, 2048));
	} else if (r < 770) {
		ev_ack(s);
	} else if (r < 800) {
		ev_release(s);
	} else if (r < 815) {
		ev_touch(s);
	} else if (r < 822) {
		ev_policy(s);
	} else if (r < 835) {
		ev_kick(s);
	} else if (r < 875) {
		ev_attach(s);
	} else if (r < 895) {
		ev_detach(s);
	} else if (r >= 1020) {
		ev_suspend(s);
	} else if (r >= 1000) {
		ev_clock_step(s);
	} else {
		for (int i = 0; i < MAX_CONNS; i++)
			leaving(s, &s->c[i]);
		if ((c = pick_conn(s, false))) {
			ev_drain(s, c, true);
			if (c->live)
				client_read(s, c, UINT64_MAX);
		}
	}
	turn_end(s);
	return s->failed ? -1 : 0;
}

int sim_settle(struct sim *s)
{
	for (int round = 0; round < 64 && !s->failed; round++) {
		bool moved = false;

		turn_begin(s);
		for (int i = 0; i < MAX_CONNS; i++) {
			struct sconn *c = &s->c[i];
			uint64_t before = c->drained + c->readpos;

			if (!c->live)
				continue;
			ev_drain(s, c, true);
			if (!c->live)
				continue;
			client_read(s, c, UINT64_MAX);
			moved |= c->drained + c->readpos != before;
		}
		turn_end(s);
		idle(s);
		if (!moved)
			break;
	}
	if (!s->failed)
		check_quiet(s);
	return s->failed ? -1 : 0;
}

/* ---- set-up ---------------------------------------------------------------- */

int sim_new(const struct sim_params *p, struct sim **out)
{
	static const char *const outputs[] = { "4096", "4096", "65536" };
	/* The largest fits --max-output 4096 (twice the largest frame). */
	static const char *const payloads[] = { "64", "1024", "1780" };
	static const char *const deliveries[] = { "20", "4", "2", "0" };
	static const char *const windows[] = { "4", "64", "4096" };
	static const char *const lingers[] = { "0s", "200ms", "5s" };
	static const char *const presets[] = { "fast-precise", "standard-balanced" };
	static const char *const rates[] = { "10000", "100" };
	static const uint64_t jitters[] = { 0, 100000, 1000000 };
	struct sim *s = calloc(1, sizeof(*s));
	const char *o, *pl, *w, *l, *pr, *ra, *md;
	int err = -ENOMEM;

	if (!s)
		return -ENOMEM;
	s->p = *p;
	s->trace = getenv("BW_SIM_TRACE") != NULL;
	o = outputs[rnd(s, 3)];
	pl = payloads[rnd(s, 3)];
	w = windows[rnd(s, 3)];
	l = lingers[rnd(s, 3)];
	pr = presets[rnd(s, 2)];
	ra = rates[rnd(s, 2)];
	s->jitter = jitters[rnd(s, 3)];
	md = deliveries[rnd(s, 4)];
	{
		char *args[] = { "sim", "--max-output", (char *)o, "--max-payload",
				 (char *)pl, "--max-window", (char *)w, "--linger",
				 (char *)l, "--preset", (char *)pr, "--max-queued",
				 "100000000", "--max-timers", "1000000",
				 "--max-periodic-rate-per-uid", (char *)ra,
				 "--max-deliveries", (char *)md, NULL };

		if (bwd_options_parse(sizeof(args) / sizeof(args[0]) - 1, args, &s->opt)) {
			err = -EINVAL;
			goto fail;
		}
	}
	s->opt_parsed = true;
	snprintf(s->cfg, sizeof(s->cfg), "--max-output %s --max-payload %s --max-window %s --linger %s --preset %s --max-periodic-rate-per-uid %s --max-deliveries %s, jitter %" PRIu64 " us, %s pump",
		 o, pl, w, l, pr, ra, md, s->jitter / 1000, p->old_pump ? "old" : "has-work");
	s->max_output = s->opt.limits.max_output;
	s->bound[BW_LANE_ONESHOT] = bwd_lane_late_ns(&s->opt.wheel.oneshot);
	s->bound[BW_LANE_PERIODIC] = bwd_lane_late_ns(&s->opt.wheel.periodic);
	s->fine = s->bound[BW_LANE_PERIODIC] < s->bound[BW_LANE_ONESHOT] ?
		BW_LANE_PERIODIC : BW_LANE_ONESHOT;
	s->coarse = s->fine == BW_LANE_ONESHOT ? BW_LANE_PERIODIC : BW_LANE_ONESHOT;
	for (size_t i = 0; i < sizeof(s->payload); i++)
		s->payload[i] = (uint8_t)i;
	s->now = T0;
	s->real_off = WALL0 - T0;
	s->boot_off = s->told_off = BOOT_OFF0;
	for (size_t i = 0; i < NSPECS; i++) {
		if (bwd_cal_parse(specs[i], &s->cal[i], NULL, 0)) {
			err = -EINVAL;
			goto fail;
		}
	}
	/* Members leaving and sessions expiring are logged: thousands. */
	bwd_log_set_level(BWD_LOG_ERR - 1);
	if (bwd_state_new(&s->opt, s->now, &s->st))
		goto fail;
	bwd_state_set_clock(s->st, sim_clock, s);
	bwd_state_set_wall_clocks(s->st, sim_real, sim_boot, s);
	*out = s;
	return 0;
fail:
	sim_free(s);
	return err;
}

void sim_free(struct sim *s)
{
	if (!s)
		return;
	/* The server closes every connection before the state goes: an
	 * anonymous session ends with its member. */
	for (int i = 0; i < MAX_CONNS; i++) {
		if (s->c[i].live && s->c[i].m)
			bwd_member_detach(s->c[i].m);
		free(s->c[i].fr);
		free(s->c[i].toack);
		free(s->c[i].fl);
	}
	for (int si = 0; si < MAX_SESS; si++)
		if (s->s[si].live)
			session_drop(s, si);
	bwd_state_free(s->st);
	for (size_t i = 0; i < NSPECS; i++)
		bwd_cal_free(s->cal[i]);
	if (s->opt_parsed)
		bwd_options_free(&s->opt);
	free(s);
}

const char *sim_error(const struct sim *s)
{
	return s->failed ? s->err : NULL;
}

const char *sim_config(const struct sim *s)
{
	return s->cfg;
}

void sim_get_stats(const struct sim *s, struct sim_stats *out)
{
	*out = s->stats;
}
