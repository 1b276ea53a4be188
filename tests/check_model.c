/*
 * check_model.c - model-based randomized test of libbitwheel.
 *
 * For every preset x {EXACT, COARSE} x {plain, failover}, and for the
 * fast-precise dual wheel in both modes, a million random operations
 * (inserts, bursts on one deadline, a quarter of them then stripped of
 * what the slots took, cancels of live, dead and bogus
 * handles, forward/same/backward polls with small steps and rare huge
 * jumps, callbacks that re-arm, insert, cancel and poll) run against a
 * reference model that knows only the contract:
 *   - a timer fires only while pending, once per arming, never in the poll
 *     that armed it, never before its deadline or its deadline's tick;
 *   - every timer fires by its mode's bound: EXACT by tick t + probes - 1,
 *     COARSE by t + 64^(floor(log64(delta))+1) * probes, overflowed ones on
 *     tick t, already-due ones at the next poll;
 *   - every timer is accounted for: pending (bw_*_pending agrees), fired,
 *     cancelled (with its data back), refused (plain: BW_ERANGE exactly
 *     beyond range_ns, else BW_EFULL; failover: never), or, for a re-arm
 *     the plain wheel cannot place, dropped through the drop callback;
 *   - a burst on one future deadline never takes more than
 *     slot_cap * max_probes into the wheel;
 *   - a poll before next_deadline does nothing; next_deadline is no later
 *     than the earliest bound; poll results and counters add up.  It is
 *     asked before half the polls only: it recomputes a dirty next-event
 *     cache, and the other half must work with the cache as it is;
 *   - on a single wheel (not dual) about half the timers are intrusive
 *     (struct bw_timer, bw_timer_add/bw_timer_cancel), mixed with handle
 *     timers under the same rules; their structs are reused once fired,
 *     cancelled, refused, dropped or drained (a fired one is released
 *     from inside its own callback), and cancelling an idle one, adding a
 *     pending one or cancelling one from its own callback is refused;
 *   - bw_*_check passes every few hundred operations and at the end;
 *     foreach and drain visit exactly the pending set;
 *   - with a poll limit (the failover exact cases "+limit"), a poll fires
 *     at most that many timers that went to the overflow heap per lane,
 *     and the "must have fired" bounds hold once polls at the same time
 *     have worked off what it left due (next_deadline no longer due);
 *     every poll after one that met the limit (which may end the backlog)
 *     is followed by bw_*_check at once, before next_deadline's
 *     recomputation could mend a wrong next-event cache.
 * "Must have fired" is checked with a lazy min-heap keyed by each arming's
 * bound, so a poll costs O(log n) amortized, not a scan.
 *
 * Each case runs a fixed seed, then the seed from BW_TEST_SEED (a fixed
 * default when unset); every failure message names the case and seed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#define NOPS 1000000u
#define EXTRA_OPS NOPS
#define DEFAULT_EXTRA_SEED 0x5eedb17e1ull

enum st {
	ST_NONE,
	ST_PENDING,
	ST_FIRED,
	ST_CANCELLED,
	ST_REFUSED,
	ST_DROPPED,
	ST_DRAINED,
};

static const char *st_name[] = {
	"none", "pending", "fired", "cancelled", "refused", "dropped",
	"drained",
};

/* One model timer, indexed by a serial that is its data pointer. */
struct mt {
	uint64_t deadline;
	uint64_t t;             /* ceil(deadline / lane tick)          */
	uint64_t must_ns;       /* fired by the first poll at/after it */
	uint64_t arm_cur;       /* the wheel's tick when armed         */
	bw_handle h;            /* 0 for an intrusive timer            */
	struct bw_timer *bt;    /* intrusive: its struct, else NULL    */
	uint32_t arm_seq;       /* poll count when armed               */
	uint32_t gen;           /* arming number, for lazy heap entries */
	uint32_t live_idx;
	uint32_t rearm_seq;     /* poll that last re-armed it          */
	uint8_t state, lane, rearms, overflowed, in_cb;
};

struct hent {
	uint64_t must_ns;
	uint32_t serial, gen;
};

struct lane {
	uint64_t T;             /* tick, ns                            */
	uint64_t R;             /* range, ticks (the wheel's own)      */
	unsigned G, P, cap;
	enum bw_precision prec;
	bool failover;
};

struct mcase {
	const char *name;
	int dual;               /* 0: wheel preset; 1: dual preset    */
	int preset;
	enum bw_precision prec;
	bool failover;
	size_t poll_limit;      /* bw_*_set_poll_limit; 0: none       */
};

struct model {
	const struct mcase *mc;
	uint64_t seed;
	uint64_t op;
	struct tu_rng rng;
	struct bw_wheel *w;
	struct bw_dual *d;
	struct lane lane[2];
	unsigned nlanes;
	uint64_t now;           /* last forward poll (or creation)    */
	uint32_t seq;           /* forward polls so far               */
	/* during a poll */
	int in_poll;
	uint64_t poll_now;
	uint32_t poll_seq;
	uint64_t p_fires, p_rearm_req, p_drops;
	uint64_t p_ov_fires[2]; /* fires of timers inserted into the heap */
	bool limited;           /* the last poll met the limit in a lane */
	struct bw_callbacks cb;
	/* timers */
	struct mt *tm;
	uint32_t ntm, captm;
	uint32_t *live;
	uint32_t nlive, caplive;
	struct hent *heap;
	size_t nheap, capheap;
	struct hent *defer;
	size_t ndefer, capdefer;
	bw_handle dead[256];
	unsigned ndead;
	/* intrusive timers' structs: every one made, and the idle ones */
	struct bw_timer **allbt, **idlebt;
	size_t nallbt, capallbt, nidlebt, capidlebt;
	size_t pending;
	/* expected counters, summed over lanes */
	uint64_t inserted, cancelled, fired, refused, dropped;
	uint64_t overflow_inserts;
	/* stats */
	size_t max_pending;
	uint64_t n_refused_full, n_refused_range, n_rearms;
};

/* ---- failure reporting ---------------------------------------------------- */

#define MCHECK(m, cond, fmt, ...)                                           \
	tu_check(cond, "[%s seed=%" PRIu64 " op=%" PRIu64 "] " fmt,         \
		 (m)->mc->name, (m)->seed, (m)->op, ##__VA_ARGS__)

/* ---- wheel/dual dispatch ----------------------------------------------- */

static struct bw_wheel *lane_wheel(struct model *m, unsigned lane)
{
	return m->d ? bw_dual_lane(m->d, (enum bw_lane)lane) : m->w;
}

static int m_insert(struct model *m, unsigned lane, uint64_t d, void *data,
		    bw_handle *h, struct bw_timer *bt)
{
	if (bt)
		return bw_timer_add(m->w, bt, d, data);
	if (!m->d)
		return bw_wheel_insert(m->w, d, data, h);
	return lane == BW_LANE_PERIODIC ? bw_dual_insert_periodic(m->d, d, data, h)
					: bw_dual_insert_oneshot(m->d, d, data, h);
}

static int m_cancel(struct model *m, bw_handle h, void **data)
{
	return m->d ? bw_dual_cancel(m->d, h, data) : bw_wheel_cancel(m->w, h, data);
}

static int m_poll(struct model *m, uint64_t now, struct bw_poll_result *res)
{
	return m->d ? bw_dual_poll(m->d, now, &m->cb, res)
		    : bw_wheel_poll(m->w, now, &m->cb, res);
}

static size_t m_pending(struct model *m)
{
	return m->d ? bw_dual_pending(m->d) : bw_wheel_pending(m->w);
}

static int m_next(struct model *m, uint64_t *nd)
{
	return m->d ? bw_dual_next_deadline(m->d, nd)
		    : bw_wheel_next_deadline(m->w, nd);
}

static int m_deadline(struct model *m, bw_handle h, uint64_t *out)
{
	return m->d ? bw_dual_deadline(m->d, h, out)
		    : bw_wheel_deadline(m->w, h, out);
}

static void m_healthy(struct model *m)
{
	const char *why = NULL;
	int rc = m->d ? bw_dual_check(m->d, &why) : bw_wheel_check(m->w, &why);

	MCHECK(m, rc == 0, "check: %d (%s)", rc, why ? why : "no reason");
}

static uint64_t m_overflowed(struct model *m, unsigned lane)
{
	struct bw_counters c;

	bw_wheel_counters(lane_wheel(m, lane), &c);
	return c.overflowed;
}

/* ---- model bookkeeping ------------------------------------------------- */

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return p;
	*cap = *cap ? *cap * 2 : 1024;
	while (*cap < need)
		*cap *= 2;
	p = realloc(p, *cap * elem);
	tu_check(p != NULL, "model out of memory");
	return p;
}

static uint32_t new_timer(struct model *m)
{
	size_t cap = m->captm;

	m->tm = grow(m->tm, &cap, (size_t)m->ntm + 1, sizeof(*m->tm));
	m->captm = (uint32_t)cap;
	memset(&m->tm[m->ntm], 0, sizeof(*m->tm));
	return m->ntm++;
}

static void live_add(struct model *m, uint32_t s)
{
	size_t cap = m->caplive;

	m->live = grow(m->live, &cap, (size_t)m->nlive + 1, sizeof(*m->live));
	m->caplive = (uint32_t)cap;
	m->tm[s].live_idx = m->nlive;
	m->live[m->nlive++] = s;
	m->pending++;
	if (m->pending > m->max_pending)
		m->max_pending = m->pending;
}

static void live_remove(struct model *m, uint32_t s)
{
	uint32_t i = m->tm[s].live_idx, last = m->live[--m->nlive];

	m->live[i] = last;
	m->tm[last].live_idx = i;
	m->pending--;
}

static void heap_push(struct model *m, struct hent e)
{
	size_t i;

	m->heap = grow(m->heap, &m->capheap, m->nheap + 1, sizeof(*m->heap));
	i = m->nheap++;
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (m->heap[p].must_ns <= e.must_ns)
			break;
		m->heap[i] = m->heap[p];
		i = p;
	}
	m->heap[i] = e;
}

static void heap_pop(struct model *m)
{
	struct hent e = m->heap[--m->nheap];
	size_t i = 0, n = m->nheap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && m->heap[c + 1].must_ns < m->heap[c].must_ns)
			c++;
		if (m->heap[c].must_ns >= e.must_ns)
			break;
		m->heap[i] = m->heap[c];
		i = c;
	}
	if (n > 0)
		m->heap[i] = e;
}

static int hent_live(struct model *m, const struct hent *e)
{
	const struct mt *t = &m->tm[e->serial];

	return t->gen == e->gen && t->state == ST_PENDING;
}

/* Drop stale entries off the top; the earliest live bound or UINT64_MAX. */
static uint64_t heap_min(struct model *m)
{
	while (m->nheap > 0 && !hent_live(m, &m->heap[0]))
		heap_pop(m);
	return m->nheap ? m->heap[0].must_ns : UINT64_MAX;
}

static void dead_push(struct model *m, bw_handle h)
{
	if (h)
		m->dead[m->ndead++ % 256] = h;
}

/* An idle intrusive timer's struct: a reused one or a new one. */
static struct bw_timer *bt_get(struct model *m)
{
	struct bw_timer *bt;
	size_t cap;

	if (m->nidlebt) {
		size_t i = (size_t)tu_rng_below(&m->rng, m->nidlebt);

		bt = m->idlebt[i];
		m->idlebt[i] = m->idlebt[--m->nidlebt];
		return bt;
	}
	bt = malloc(sizeof(*bt));
	tu_check(bt != NULL, "model out of memory");
	bw_timer_init(bt);
	cap = m->capallbt;
	m->allbt = grow(m->allbt, &cap, m->nallbt + 1, sizeof(*m->allbt));
	m->capallbt = cap;
	m->allbt[m->nallbt++] = bt;
	return bt;
}

/* Timer s is done with its struct (if intrusive): idle, for reuse. */
static void bt_put(struct model *m, uint32_t s)
{
	struct bw_timer *bt = m->tm[s].bt;
	size_t cap = m->capidlebt;

	if (!bt)
		return;
	MCHECK(m, !bw_timer_pending(bt), "timer %u done but still pending", s);
	m->tm[s].bt = NULL;
	m->idlebt = grow(m->idlebt, &cap, m->nidlebt + 1, sizeof(*m->idlebt));
	m->capidlebt = cap;
	m->idlebt[m->nidlebt++] = bt;
}

/* The wheel's tick in a lane: the last forward poll's, or creation's. */
static uint64_t cur_tick(struct model *m, unsigned lane)
{
	return (m->in_poll ? m->poll_now : m->now) / m->lane[lane].T;
}

/*
 * The latest time by which the arming must have fired: the first poll at
 * or after it must see it fired.
 */
static uint64_t bound_ns(const struct lane *ln, uint64_t t, uint64_t cur,
			 int overflowed)
{
	uint64_t late;

	if (t <= cur)
		return cur * ln->T;          /* due already: next poll  */
	if (overflowed)
		late = 0;
	else if (ln->prec == BW_EXACT)
		late = ln->P - 1;
	else {
		unsigned g = tu_log64(t - cur) + 1;

		if (g > ln->G - 1)
			g = ln->G - 1;
		late = tu_pow64(g) * ln->P;
	}
	if (t + late > UINT64_MAX / ln->T)
		return UINT64_MAX;
	return (t + late) * ln->T;
}

/* Arm timer s (new or re-armed) for deadline d in its lane. */
static void arm(struct model *m, uint32_t s, uint64_t d, int overflowed)
{
	struct mt *t = &m->tm[s];
	const struct lane *ln = &m->lane[t->lane];
	struct hent e;

	t->deadline = d;
	t->t = tu_ceil_tick(d, ln->T);
	t->overflowed = (uint8_t)overflowed;
	t->arm_seq = m->in_poll ? m->poll_seq : m->seq;
	t->gen++;
	t->arm_cur = cur_tick(m, t->lane);
	t->in_cb = (uint8_t)m->in_poll;
	t->must_ns = bound_ns(ln, t->t, t->arm_cur, overflowed);
	t->state = ST_PENDING;
	e.must_ns = t->must_ns;
	e.serial = s;
	e.gen = t->gen;
	if (m->in_poll) {
		/* Not due in this poll: joins the heap once it is over. */
		m->defer = grow(m->defer, &m->capdefer, m->ndefer + 1,
				sizeof(*m->defer));
		m->defer[m->ndefer++] = e;
	} else {
		heap_push(m, e);
	}
}

/* A timer's story, for failure messages. */
static const char *describe(struct model *m, uint32_t s)
{
	static char buf[256];
	const struct mt *t = &m->tm[s];

	snprintf(buf, sizeof(buf),
		 "timer %u (lane %u, %s, deadline %" PRIu64 ", tick %" PRIu64
		 ", armed at tick %" PRIu64 " (delta %" PRId64 ")%s%s, bound %"
		 PRIu64 ")", s, t->lane, st_name[t->state], t->deadline, t->t,
		 t->arm_cur, (int64_t)(t->t - t->arm_cur),
		 t->in_cb ? " in a callback" : "",
		 t->overflowed ? ", overflowed" : "", t->must_ns);
	return buf;
}

/* ---- random input ------------------------------------------------------ */

/* A deadline in the lane: past, near, mid, far, at the range edge, beyond. */
static uint64_t gen_deadline(struct model *m, unsigned lane)
{
	const struct lane *ln = &m->lane[lane];
	uint64_t cur = cur_tick(m, lane), dt, t, d;
	unsigned u = (unsigned)tu_rng_below(&m->rng, 1000);

	if (u < 50) {
		uint64_t back = tu_rng_below(&m->rng, 200);

		t = cur > back ? cur - back : 0;
		d = t * ln->T;
		d -= d ? tu_rng_below(&m->rng, d < ln->T ? d : ln->T) : 0;
		return d ? d : 1;
	}
	if (u < 620)
		dt = 1 + tu_rng_below(&m->rng, 70);
	else if (u < 850)
		dt = 1 + tu_rng_below(&m->rng, 64 * 64 * 2);
	else if (u < 950)
		dt = 1 + tu_rng_below(&m->rng, ln->R);
	else if (u < 980)
		dt = ln->R - 64 + tu_rng_below(&m->rng, 129);
	else
		dt = ln->R + 1 + tu_rng_below(&m->rng, 3 * ln->R);
	t = cur + dt;
	d = t * ln->T;
	if (tu_rng_chance(&m->rng, 700000))
		d -= tu_rng_below(&m->rng, ln->T);
	return d;
}

static unsigned gen_lane(struct model *m)
{
	return m->nlanes == 1 ? 0 : (unsigned)tu_rng_below(&m->rng, 2);
}

/* ---- operations -------------------------------------------------------- */

/*
 * Insert a fresh timer and judge the result against range and mode; the
 * caller learns whether it went into the wheel proper (not the overflow
 * store), for burst accounting.
 */
static int do_insert(struct model *m, unsigned lane, uint64_t d,
		     int *in_wheel)
{
	const struct lane *ln = &m->lane[lane];
	uint32_t s = new_timer(m);
	struct mt *t = &m->tm[s];
	uint64_t cur = cur_tick(m, lane), tt = tu_ceil_tick(d, ln->T);
	uint64_t ov0 = ln->failover ? m_overflowed(m, lane) : 0;
	bw_handle h = 0;
	int rc;

	t->lane = (uint8_t)lane;
	t->rearms = tu_rng_chance(&m->rng, 150000)
			    ? (uint8_t)(1 + tu_rng_below(&m->rng, 4))
			    : 0;
	if (!m->d && tu_rng_chance(&m->rng, 500000)) {
		t->bt = bt_get(m);
		MCHECK(m, !bw_timer_pending(t->bt), "idle struct is pending");
	}
	rc = m_insert(m, lane, d, (void *)(uintptr_t)s, &h, t->bt);
	if (ln->failover) {
		MCHECK(m, rc == 0, "failover insert refused: %d", rc);
	} else if (tt > cur && tt - cur > ln->R) {
		MCHECK(m, rc == BW_ERANGE,
		       "delta %" PRIu64 " > range %" PRIu64 ": got %d",
		       tt - cur, ln->R, rc);
	} else {
		MCHECK(m, rc == 0 || rc == BW_EFULL,
		       "delta %" PRId64 " within range %" PRIu64 ": got %d%s",
		       (int64_t)(tt - cur), ln->R, rc,
		       m->in_poll ? " (insert from a callback)" : "");
		if (rc == BW_EFULL)
			MCHECK(m, m->pending >= ln->cap,
			       "BW_EFULL with only %zu pending", m->pending);
	}
	if (rc != 0) {
		bt_put(m, s);
		t->state = ST_REFUSED;
		m->refused++;
		if (rc == BW_EFULL)
			m->n_refused_full++;
		else
			m->n_refused_range++;
		if (in_wheel)
			*in_wheel = 0;
		return rc;
	}
	MCHECK(m, t->bt ? h == 0 && bw_timer_pending(t->bt) : h != 0,
	       "handle %#" PRIx64 " of a %s timer", h,
	       t->bt ? "pending intrusive" : "handle");
	if (m->d)
		MCHECK(m, bw_dual_handle_lane(h) == (enum bw_lane)lane,
		       "handle %#" PRIx64 " names the wrong lane", h);
	t->h = h;
	m->inserted++;
	{
		int ov = ln->failover && m_overflowed(m, lane) != ov0;

		if (ov)
			m->overflow_inserts++;
		if (in_wheel)
			*in_wheel = !ov;
		arm(m, s, d, ov);
	}
	live_add(m, s);
	return 0;
}

/* Cancel pending timer s, which must succeed and hand its data back. */
static void cancel_serial(struct model *m, uint32_t s)
{
	void *got = NULL;
	int rc;

	if (m->tm[s].bt) {
		rc = bw_timer_cancel(m->w, m->tm[s].bt);
		got = (void *)(uintptr_t)s;
	} else {
		rc = m_cancel(m, m->tm[s].h, &got);
	}
	MCHECK(m, rc == 0, "cancel of pending timer %u (%s) failed: %d", s,
	       st_name[m->tm[s].state], rc);
	MCHECK(m, (uintptr_t)got == s, "cancel of %u returned data %p", s, got);
	m->tm[s].state = ST_CANCELLED;
	bt_put(m, s);
	live_remove(m, s);
	dead_push(m, m->tm[s].h);
	m->cancelled++;
}

static void do_cancel_live(struct model *m)
{
	if (m->nlive)
		cancel_serial(m, m->live[tu_rng_below(&m->rng, m->nlive)]);
}

static void do_cancel_dead(struct model *m)
{
	bw_handle h;
	void *got = NULL;
	int rc;

	if (m->nidlebt && tu_rng_chance(&m->rng, 200000)) {
		struct bw_timer *bt = m->idlebt[tu_rng_below(&m->rng, m->nidlebt)];

		rc = bw_timer_cancel(m->w, bt);
		MCHECK(m, rc == BW_ENOTFOUND, "cancel of an idle timer: %d", rc);
		return;
	}
	if (m->ndead == 0 || tu_rng_chance(&m->rng, 300000)) {
		h = tu_rng_next(&m->rng);
		if (tu_rng_chance(&m->rng, 500000))
			h &= 0x80000000ffffffffull | 0xffffull << 32;
	} else {
		h = m->dead[tu_rng_below(&m->rng, m->ndead < 256 ? m->ndead : 256)];
	}
	rc = m_cancel(m, h, &got);
	if (rc == 0) {
		/* Only legal if it really named a pending timer. */
		uint32_t s = (uint32_t)(uintptr_t)got;

		MCHECK(m, s < m->ntm && m->tm[s].state == ST_PENDING &&
				  m->tm[s].h == h,
		       "dead/bogus handle %#" PRIx64 " cancelled something", h);
		m->tm[s].state = ST_CANCELLED;
		live_remove(m, s);
		m->cancelled++;
		return;
	}
	MCHECK(m, rc == BW_ENOTFOUND, "dead handle cancel: %d", rc);
}

static void do_query(struct model *m)
{
	uint64_t dl = 0;
	uint32_t s;
	int rc;

	if (m->nlive == 0)
		return;
	s = m->live[tu_rng_below(&m->rng, m->nlive)];
	if (m->tm[s].bt) {
		rc = bw_timer_add(m->w, m->tm[s].bt, m->tm[s].deadline, NULL);
		MCHECK(m, rc == BW_EPENDING && bw_timer_pending(m->tm[s].bt),
		       "adding pending intrusive timer %u: %d", s, rc);
		return;
	}
	rc = m_deadline(m, m->tm[s].h, &dl);
	MCHECK(m, rc == 0 && dl == m->tm[s].deadline,
	       "deadline of %u: rc %d, %" PRIu64 " want %" PRIu64, s, rc, dl,
	       m->tm[s].deadline);
}

/* ---- callbacks --------------------------------------------------------- */

static uint64_t m_fire(void *data, uint64_t now, void *ctx)
{
	struct model *m = ctx;
	uint32_t s = (uint32_t)(uintptr_t)data;
	struct mt *t;
	const struct lane *ln;
	unsigned u;

	MCHECK(m, m->in_poll, "fire outside poll");
	MCHECK(m, s > 0 && s < m->ntm, "fire with bogus data %p", data);
	t = &m->tm[s];
	ln = &m->lane[t->lane];
	MCHECK(m, t->state == ST_PENDING, "fired timer %u is %s", s,
	       st_name[t->state]);
	MCHECK(m, m->poll_seq > t->arm_seq,
	       "timer %u fired in the poll that armed it", s);
	MCHECK(m, now == m->poll_now, "fire now %" PRIu64 " != poll %" PRIu64,
	       now, m->poll_now);
	MCHECK(m, now >= t->deadline,
	       "timer %u fired early: now %" PRIu64 " < %" PRIu64, s, now,
	       t->deadline);
	MCHECK(m, now / ln->T >= t->t,
	       "timer %u fired before its tick: %" PRIu64 " < %" PRIu64, s,
	       now / ln->T, t->t);
	t->state = ST_FIRED;
	live_remove(m, s);
	m->fired++;
	m->p_fires++;
	m->p_ov_fires[t->lane] += t->overflowed;

	u = (unsigned)tu_rng_below(&m->rng, 1000);
	if (u < 10) {
		int rc = t->bt ? bw_timer_cancel(m->w, t->bt)
			       : m_cancel(m, t->h, NULL);

		MCHECK(m, rc == BW_ENOTFOUND, "cancelling the firing timer: %d",
		       rc);
	} else if (u < 15) {
		struct bw_poll_result res;
		int rc = m_poll(m, now + tu_rng_below(&m->rng, 1000 * ln->T),
				&res);

		MCHECK(m, rc == BW_EINPOLL, "poll from a callback: %d", rc);
	} else if (u < 35) {
		do_cancel_live(m);
	} else if (u < 55) {
		unsigned lane = gen_lane(m);

		do_insert(m, lane, gen_deadline(m, lane), NULL);
	}

	t = &m->tm[s]; /* the insert may have moved the array */
	if (t->rearms > 0) {
		uint64_t d = gen_deadline(m, t->lane);

		t->rearms--;
		t->rearm_seq = m->poll_seq;
		m->p_rearm_req++;
		m->n_rearms++;
		/* Back to pending under the same handle, unless it is
		 * dropped (plain wheel) before the poll ends. */
		arm(m, s, d, 0);
		live_add(m, s);
		return d;
	}
	dead_push(m, t->h);
	bt_put(m, s); /* the struct may be reused before the wheel returns */
	return 0;
}

static void m_drop(void *data, int reason, void *ctx)
{
	struct model *m = ctx;
	uint32_t s = (uint32_t)(uintptr_t)data;
	struct mt *t;

	MCHECK(m, m->in_poll, "drop outside poll");
	MCHECK(m, s > 0 && s < m->ntm, "drop with bogus data %p", data);
	t = &m->tm[s];
	MCHECK(m, t->state == ST_PENDING, "dropped timer %u is %s", s,
	       st_name[t->state]);
	/* Only a re-arm can be dropped, in the poll that re-armed it. */
	MCHECK(m, t->rearm_seq == m->poll_seq && t->arm_seq == m->poll_seq,
	       "%s dropped (reason %d) but not re-armed in this poll",
	       describe(m, s), reason);
	MCHECK(m, !m->lane[t->lane].failover,
	       "failover lane dropped timer %u (reason %d)", s, reason);
	MCHECK(m, reason == BW_EFULL || reason == BW_ERANGE,
	       "drop reason %d", reason);
	if (reason == BW_ERANGE) {
		uint64_t cur = cur_tick(m, t->lane);

		MCHECK(m, t->t > cur && t->t - cur > m->lane[t->lane].R,
		       "timer %u dropped with BW_ERANGE at delta %" PRId64
		       " (range %" PRIu64 ")", s, (int64_t)(t->t - cur),
		       m->lane[t->lane].R);
	}
	t->state = ST_DROPPED;
	bt_put(m, s);
	live_remove(m, s);
	dead_push(m, t->h);
	m->dropped++;
	m->p_drops++;
}

/* ---- polls -------------------------------------------------------------- */

static uint64_t gen_step(struct model *m)
{
	const struct lane *ln = &m->lane[gen_lane(m)];
	uint64_t T = ln->T;
	unsigned u = (unsigned)tu_rng_below(&m->rng, 10000);

	/* Mostly small steps, so thousands stay pending; rare jumps across
	 * gears and, once in a few thousand polls, across the range. */
	if (u < 600)
		return 0;
	if (u < 6500)
		return tu_rng_below(&m->rng, 2 * T);
	if (u < 9750)
		return tu_rng_below(&m->rng, 64 * T);
	if (u < 9970)
		return tu_rng_below(&m->rng, 64 * 64 * T);
	if (u < 9997)
		return tu_rng_below(&m->rng, 64 * 64 * 64 * T);
	return tu_rng_below(&m->rng, ln->R * T + ln->R * T / 2);
}

/* Whether the wheel has work due by now (a poll limit's leftovers, or
 * what callbacks armed at or before their poll). */
static bool due_by(struct model *m, uint64_t now)
{
	uint64_t nd;

	return m_next(m, &nd) == 0 && nd <= now;
}

/* Every arming whose bound has passed must be gone. */
static void check_bounds(struct model *m, uint64_t now)
{
	while (heap_min(m) <= now) {
		struct hent e = m->heap[0];
		struct mt *t = &m->tm[e.serial];

		MCHECK(m, 0, "%s: not fired by %" PRIu64 " (poll at %"
		       PRIu64 ", tick %" PRIu64 ")",
		       describe(m, e.serial), e.must_ns, now,
		       now / m->lane[t->lane].T);
	}
}

static void poll_at(struct model *m, uint64_t now, int backwards)
{
	struct bw_poll_result res;
	uint64_t nd = 0, limit = heap_min(m);
	int rc, nrc = 0;
	bool asked = tu_rng_chance(&m->rng, 500000);

	/* next_deadline before half the polls: empty iff nothing pending, no
	 * later than the earliest bound, and nothing happens before it.  Its
	 * recomputation of a dirty next-event cache would mend the cache
	 * before every poll, so the other half poll on the cache as the
	 * last operations left it. */
	if (asked)
		nrc = m_next(m, &nd);
	if (asked && m->pending == 0) {
		MCHECK(m, nrc == BW_EEMPTY, "next_deadline %d with nothing "
		       "pending", nrc);
	} else if (asked) {
		MCHECK(m, nrc == 0, "next_deadline %d with %zu pending", nrc,
		       m->pending);
		MCHECK(m, nd <= (limit > m->now ? limit : m->now),
		       "next_deadline %" PRIu64 " after a bound %" PRIu64
		       " (last poll %" PRIu64 "): %s", nd, limit, m->now,
		       describe(m, m->heap[0].serial));
		if (tu_rng_chance(&m->rng, 50000)) {
			uint64_t un = 0;
			int urc = m->d ? 0 : bw_wheel_until_next(m->w, now, &un);

			if (!m->d)
				MCHECK(m, urc == 0 && un == (nd > now ? nd - now : 0),
				       "until_next %" PRIu64 " for next %" PRIu64
				       " at %" PRIu64, un, nd, now);
		}
	}

	m->in_poll = 1;
	m->poll_now = now;
	m->poll_seq = m->seq + 1;
	m->p_fires = m->p_rearm_req = m->p_drops = 0;
	m->p_ov_fires[0] = m->p_ov_fires[1] = 0;
	memset(&res, 0xa5, sizeof(res));
	rc = m_poll(m, now, &res);
	m->in_poll = 0;
	MCHECK(m, rc == 0, "poll: %d", rc);
	/* A poll after one that met the limit may end a backlog, and with
	 * it the cache's count of the slots alone: check the cache before
	 * next_deadline below recomputes it. */
	if (m->limited)
		m_healthy(m);
	m->limited = false;
	for (unsigned l = 0; l < 2 && m->mc->poll_limit; l++)
		m->limited |= m->p_ov_fires[l] == m->mc->poll_limit;
	MCHECK(m, res.fired == m->p_fires, "res.fired %" PRIu64 ", saw %" PRIu64,
	       res.fired, m->p_fires);
	MCHECK(m, res.rearmed + res.rearm_failed == m->p_rearm_req,
	       "rearmed %" PRIu64 " + failed %" PRIu64 " != %" PRIu64
	       " requested", res.rearmed, res.rearm_failed, m->p_rearm_req);
	MCHECK(m, res.rearm_failed == m->p_drops,
	       "rearm_failed %" PRIu64 " != %" PRIu64 " drops",
	       res.rearm_failed, m->p_drops);
	for (unsigned l = 0; l < 2 && m->mc->poll_limit; l++)
		MCHECK(m, m->p_ov_fires[l] <= m->mc->poll_limit,
		       "lane %u fired %" PRIu64 " overflowed timers in one poll,"
		       " limit %zu", l, m->p_ov_fires[l], m->mc->poll_limit);

	if (backwards || now < m->now) {
		MCHECK(m, m->p_fires == 0 && m->p_drops == 0,
		       "backwards poll (%" PRIu64 " < %" PRIu64 ") fired %" PRIu64,
		       now, m->now, m->p_fires);
	} else {
		if (asked && nrc == 0 && now < nd)
			MCHECK(m, m->p_fires == 0 && m->p_drops == 0,
			       "poll at %" PRIu64 " before next_deadline %" PRIu64
			       " fired %" PRIu64, now, nd, m->p_fires);
		m->now = now;
		m->seq++;
		if (!m->mc->poll_limit || !due_by(m, now))
			check_bounds(m, now);
	}
	for (size_t i = 0; i < m->ndefer; i++) {
		const struct hent *e = &m->defer[i];
		const struct mt *t = &m->tm[e->serial];
		const struct lane *ln = &m->lane[t->lane];
		uint64_t cur = m->poll_now / ln->T;

		/* A plain wheel cannot keep a re-arm beyond its range. */
		if (hent_live(m, e) && !ln->failover)
			MCHECK(m, !(t->t > cur && t->t - cur > ln->R),
			       "timer %u re-armed %" PRIu64 " ticks ahead, "
			       "beyond range %" PRIu64 ", yet kept", e->serial,
			       t->t - cur, ln->R);
		heap_push(m, *e);
	}
	m->ndefer = 0;
	MCHECK(m, m_pending(m) == m->pending, "pending %zu, model %zu",
	       m_pending(m), m->pending);
}

static void do_poll(struct model *m)
{
	int backwards = m->now > 0 && tu_rng_chance(&m->rng, 8000);

	if (backwards)
		poll_at(m, m->now - 1 - tu_rng_below(&m->rng,
						    m->now < 3 * m->lane[0].T
							    ? m->now
							    : 3 * m->lane[0].T),
			1);
	else
		poll_at(m, m->now + gen_step(m), 0);
}

/*
 * Many timers on one future deadline: probing, then refusal/overflow.  A
 * quarter of the bursts then lose every timer the slots took, so that a
 * failover wheel's overflow store holds the earliest event with no slot
 * at or before it (what a poll limit's backlog ending must see again).
 */
static void do_burst(struct model *m)
{
	unsigned lane = gen_lane(m);
	const struct lane *ln = &m->lane[lane];
	uint64_t cur = cur_tick(m, lane);
	uint64_t dt = tu_rng_chance(&m->rng, 500000)
			      ? 2 + tu_rng_below(&m->rng, 8)
			      : 64 + tu_rng_below(&m->rng, 64 * 64 * 4);
	uint64_t d = (cur + dt) * ln->T - tu_rng_below(&m->rng, ln->T);
	unsigned n = ln->cap * ln->P + (unsigned)tu_rng_below(&m->rng, ln->cap + 1);
	unsigned in = 0;
	uint32_t first = m->ntm;

	for (unsigned i = 0; i < n; i++) {
		int w = 0;

		do_insert(m, lane, d, &w);
		in += w;
		m->op++;
	}
	MCHECK(m, in <= ln->cap * ln->P,
	       "one deadline took %u timers into the wheel (cap %u x probes %u)",
	       in, ln->cap, ln->P);
	if (!tu_rng_chance(&m->rng, 250000))
		return;
	for (uint32_t s = first; s < m->ntm; s++)
		if (m->tm[s].state == ST_PENDING && !m->tm[s].overflowed)
			cancel_serial(m, s);
}

/* ---- foreach / drain ---------------------------------------------------- */

struct vctx {
	struct model *m;
	size_t n;
	int drain;
};

static void m_visit(bw_handle h, uint64_t d, void *data, void *ctx)
{
	struct vctx *v = ctx;
	struct model *m = v->m;
	uint32_t s = (uint32_t)(uintptr_t)data;

	MCHECK(m, s > 0 && s < m->ntm, "visit with bogus data %p", data);
	MCHECK(m, m->tm[s].state == ST_PENDING, "visited timer %u is %s", s,
	       st_name[m->tm[s].state]);
	MCHECK(m, m->tm[s].h == h && m->tm[s].deadline == d,
	       "visit of %u: handle %#" PRIx64 "/%#" PRIx64 " deadline %" PRIu64
	       "/%" PRIu64, s, h, m->tm[s].h, d, m->tm[s].deadline);
	v->n++;
	if (v->drain) {
		m->tm[s].state = ST_DRAINED;
		bt_put(m, s);
		live_remove(m, s);
		dead_push(m, h);
	}
}

static void do_foreach(struct model *m)
{
	struct vctx v = { m, 0, 0 };
	int rc = m->d ? bw_dual_foreach(m->d, m_visit, &v)
		      : bw_wheel_foreach(m->w, m_visit, &v);

	MCHECK(m, rc == 0, "foreach: %d", rc);
	MCHECK(m, v.n == m->pending, "foreach saw %zu of %zu", v.n, m->pending);
}

static void finish(struct model *m)
{
	struct bw_counters c, sum;
	size_t was;
	struct vctx v = { m, 0, 1 };
	int rc;

	/* What a poll limit left due goes by more polls at the same time,
	 * a bounded number of them, and then every bound holds. */
	for (unsigned i = 0; m->mc->poll_limit && due_by(m, m->now); i++) {
		MCHECK(m, i < 100000, "still due after %u polls at %" PRIu64, i,
		       m->now);
		poll_at(m, m->now, 0);
	}
	if (m->mc->poll_limit)
		check_bounds(m, m->now);
	was = m->pending;
	memset(&sum, 0, sizeof(sum));
	for (unsigned l = 0; l < m->nlanes; l++) {
		bw_wheel_counters(lane_wheel(m, l), &c);
		sum.inserted += c.inserted;
		sum.cancelled += c.cancelled;
		sum.fired += c.fired;
		sum.refused += c.refused;
		sum.overflowed += c.overflowed;
		sum.lost += c.lost;
		if (!m->lane[l].failover)
			MCHECK(m, c.overflowed == 0 &&
					  bw_wheel_overflow_pending(lane_wheel(m, l)) == 0,
			       "plain lane overflowed");
	}
	MCHECK(m, sum.inserted == m->inserted, "inserted %" PRIu64 " vs %" PRIu64,
	       sum.inserted, m->inserted);
	MCHECK(m, sum.cancelled == m->cancelled, "cancelled %" PRIu64 " vs %"
	       PRIu64, sum.cancelled, m->cancelled);
	MCHECK(m, sum.fired == m->fired, "fired %" PRIu64 " vs %" PRIu64,
	       sum.fired, m->fired);
	MCHECK(m, sum.refused == m->refused, "refused %" PRIu64 " vs %" PRIu64,
	       sum.refused, m->refused);
	MCHECK(m, sum.lost == m->dropped, "lost %" PRIu64 " vs %" PRIu64
	       " drops", sum.lost, m->dropped);
	MCHECK(m, sum.overflowed >= m->overflow_inserts, "overflowed %" PRIu64
	       " < %" PRIu64, sum.overflowed, m->overflow_inserts);

	do_foreach(m);
	m_healthy(m);
	rc = m->d ? bw_dual_drain(m->d, m_visit, &v)
		  : bw_wheel_drain(m->w, m_visit, &v);
	MCHECK(m, rc == 0, "drain: %d", rc);
	MCHECK(m, v.n == was, "drain saw %zu of %zu", v.n, was);
	MCHECK(m, m_pending(m) == 0 && m->pending == 0, "pending after drain");
	m_healthy(m);
	for (unsigned i = 0; i < 256 && i < m->ndead; i++)
		MCHECK(m, m_cancel(m, m->dead[i], NULL) == BW_ENOTFOUND,
		       "dead handle alive after drain");
	/* Nothing left to fire, however far time goes. */
	m->in_poll = 1;
	m->poll_now = m->now + 10 * m->lane[0].R * m->lane[0].T;
	m->poll_seq = m->seq + 1;
	m->p_fires = m->p_drops = 0;
	rc = m_poll(m, m->poll_now, NULL);
	m->in_poll = 0;
	MCHECK(m, rc == 0 && m->p_fires == 0 && m->p_drops == 0,
	       "poll after drain: rc %d, %" PRIu64 " fired", rc, m->p_fires);
}

/* ---- cases ----------------------------------------------------------------- */

static struct mcase cases[2 * 2 * BW_PRESET_COUNT + 2 + 3];
static unsigned ncases;

static void build_cases(void)
{
	static char names[2 * 2 * BW_PRESET_COUNT + 2 + 3][64];

	ncases = 0;
	for (int p = 0; p < BW_PRESET_COUNT; p++)
		for (int prec = 0; prec < 2; prec++)
			for (int fo = 0; fo < 2; fo++) {
				struct mcase *mc = &cases[ncases];

				snprintf(names[ncases], sizeof(names[0]),
					 "%s/%s/%s", bw_preset_name((enum bw_preset)p),
					 prec ? "coarse" : "exact",
					 fo ? "failover" : "plain");
				mc->name = names[ncases];
				mc->dual = 0;
				mc->preset = p;
				mc->prec = prec ? BW_COARSE : BW_EXACT;
				mc->failover = fo;
				ncases++;
			}
	for (int prec = 0; prec < 2; prec++) {
		struct mcase *mc = &cases[ncases];

		snprintf(names[ncases], sizeof(names[0]), "dual:%s/%s",
			 bw_dual_preset_name(BW_DUAL_FAST_PRECISE),
			 prec ? "coarse" : "exact");
		mc->name = names[ncases];
		mc->dual = 1;
		mc->preset = BW_DUAL_FAST_PRECISE;
		mc->prec = prec ? BW_COARSE : BW_EXACT;
		mc->failover = true;
		ncases++;
	}
	/* A poll limit of 3 on the failover exact wheels the daemon's lanes
	 * are made of: most bursts leave work for later polls. */
	for (int k = 0; k < 3; k++) {
		static const struct mcase limited[] = {
			{ "dual:fast-precise/exact+limit", 1,
			  BW_DUAL_FAST_PRECISE, BW_EXACT, true, 3 },
			{ "precise/exact/failover+limit", 0, BW_PRESET_PRECISE,
			  BW_EXACT, true, 3 },
			{ "burst/exact/failover+limit", 0, BW_PRESET_BURST, BW_EXACT,
			  true, 3 },
		};

		cases[ncases++] = limited[k];
	}
}

static void lane_from(struct lane *ln, const struct bw_config *cfg,
		      struct bw_wheel *w)
{
	ln->T = tu_tick_ns(cfg);
	ln->G = cfg->gears;
	ln->P = cfg->max_probes;
	ln->cap = cfg->slot_cap;
	ln->prec = cfg->precision;
	ln->failover = bw_wheel_config(w)->failover;
	/* The wheel's own promise; test_range_* in check_wheel holds it to
	 * the header's formula. */
	ln->R = bw_wheel_range_ns(w) / ln->T;
}

static void run_model(const struct mcase *mc, uint64_t seed, unsigned nops)
{
	struct model *m = calloc(1, sizeof(*m));
	uint64_t start;
	clock_t c0 = clock();
	int rc;

	m->mc = mc;
	m->seed = seed;
	tu_rng_seed(&m->rng, seed);
	start = tu_rng_chance(&m->rng, 100000) ? tu_rng_below(&m->rng, 1000)
					       : tu_rng_below(&m->rng, 1ull << 52);
	m->now = start;
	m->cb.fire = m_fire;
	m->cb.drop = m_drop;
	m->cb.ctx = m;
	if (mc->dual) {
		struct bw_dual_config dc;

		ck_assert_int_eq(bw_dual_config_preset(mc->preset, &dc), 0);
		dc.oneshot.precision = dc.periodic.precision = mc->prec;
		rc = bw_dual_new(&dc, start, &m->d);
		MCHECK(m, rc == 0, "bw_dual_new: %d", rc);
		rc = bw_dual_set_poll_limit(m->d, mc->poll_limit);
		MCHECK(m, rc == 0, "bw_dual_set_poll_limit: %d", rc);
		lane_from(&m->lane[BW_LANE_ONESHOT], &dc.oneshot,
			  bw_dual_lane(m->d, BW_LANE_ONESHOT));
		lane_from(&m->lane[BW_LANE_PERIODIC], &dc.periodic,
			  bw_dual_lane(m->d, BW_LANE_PERIODIC));
		m->nlanes = 2;
	} else {
		struct bw_config cfg;

		ck_assert_int_eq(bw_config_preset(mc->preset, &cfg), 0);
		cfg.precision = mc->prec;
		cfg.failover = mc->failover;
		rc = bw_wheel_new(&cfg, start, &m->w);
		MCHECK(m, rc == 0, "bw_wheel_new: %d", rc);
		rc = bw_wheel_set_poll_limit(m->w, mc->poll_limit);
		MCHECK(m, rc == 0, "bw_wheel_set_poll_limit: %d", rc);
		lane_from(&m->lane[0], &cfg, m->w);
		m->nlanes = 1;
	}
	new_timer(m); /* serial 0 is never used: data is never NULL */

	for (m->op = 0; m->op < nops; m->op++) {
		unsigned u = (unsigned)tu_rng_below(&m->rng, 100000);
		/* Lean on cancels and polls when the pending set grows. */
		int crowded = m->pending > 6000;

		if (u < 42000) {
			unsigned lane = gen_lane(m);

			do_insert(m, lane, gen_deadline(m, lane), NULL);
		} else if (u < (crowded ? 62000u : 46000u)) {
			do_cancel_live(m);
		} else if (u < 48000) {
			do_cancel_dead(m);
		} else if (u < 97000) {
			do_poll(m);
		} else if (u < 97030) {
			do_burst(m);
		} else if (u < 99990) {
			do_query(m);
		} else {
			do_foreach(m);
		}
		if (m->op % 256 == 0)
			m_healthy(m);
	}
	finish(m);
	if (getenv("BW_TEST_VERBOSE"))
		fprintf(stderr,
			"%-32s seed %-20" PRIu64 " ops %u fired %" PRIu64
			" rearms %" PRIu64 " cancelled %" PRIu64 " efull %"
			PRIu64 " erange %" PRIu64 " dropped %" PRIu64
			" overflow %" PRIu64 " max pending %zu  %.2fs\n",
			mc->name, seed, nops, m->fired, m->n_rearms,
			m->cancelled, m->n_refused_full, m->n_refused_range,
			m->dropped, m->overflow_inserts, m->max_pending,
			(double)(clock() - c0) / CLOCKS_PER_SEC);
	if (m->d)
		bw_dual_free(m->d);
	else
		bw_wheel_free(m->w);
	for (size_t i = 0; i < m->nallbt; i++)
		free(m->allbt[i]);
	free(m->allbt);
	free(m->idlebt);
	free(m->tm);
	free(m->live);
	free(m->heap);
	free(m->defer);
	free(m);
}

START_TEST(test_model_fixed)
{
	run_model(&cases[_i], 0x9e3779b97f4a7c15ull * (uint64_t)(_i + 1), NOPS);
}
END_TEST

START_TEST(test_model_env)
{
	uint64_t seed = tu_seed_from_env("BW_TEST_SEED", DEFAULT_EXTRA_SEED);

	run_model(&cases[_i], seed ^ (uint64_t)_i, EXTRA_OPS);
}
END_TEST

static Suite *model_suite(void)
{
	Suite *s = suite_create("model");
	TCase *tc;

	build_cases();
	tc = tcase_create("fixed-seeds");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_model_fixed, 0, (int)ncases);
	suite_add_tcase(s, tc);

	tc = tcase_create("env-seed");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_model_env, 0, (int)ncases);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(model_suite());
}
