/*
 * bwsoak.c - a bounded soak of bitwheeld: several client processes mix
 * timers, cancels and faults for --duration, then every timer the daemon
 * acknowledged is accounted for from the clients' journals.
 *
 *   bwsoak --socket PATH --daemon-pid PID|--daemon-pid-file FILE
 *          [--duration 5m] [--clients 8]
 *          [--rate OPS/S] [--burst N] [--kill-every MS] [--grace-ms MS]
 *          [--dir DIR] [--verbose]
 *   bwsoak --account DIR [--clients N] [--grace-ms MS]
 *
 * Client slots are forked processes on libbitwheel-client, in groups of
 * four (soak.h): three share a named session (protocol 2), one a
 * producer only, one a producer and a consumer, one a consumer only
 * (with an ack timeout of a second), each reattaching with every
 * incarnation of the slot; the fourth has an anonymous session (auto
 * ack).  Consumers of a named session journal each fire, then
 * acknowledge the batch with one cumulative Ack.  Producers schedule
 * oneshot timers (1 ms .. 2 s, the 1 ms lane) and periodic ones (50 ..
 * 500 ms, cancelled after a few fires), cancel pending timers, replace
 * them, schedule a pending key again (DUPLICATE_KEY); every slot closes
 * and reconnects, and stops reading for a while (a consumer after a
 * burst of timers due meanwhile: slow readers).  Fires that fail
 * (PROTOCOL.md section 8): before the run every even group's session
 * gets max_deliveries 3..5 (the others keep the default, 20); consumers
 * release some fires instead of acknowledging them (one in 89 every
 * time, so it is dead-lettered at the limit; one in 89 twice; any 2 % of
 * the time), with a delay of 0..200 ms; the producer-consumer kicks dead
 * letters back every few seconds; the consumer-only slot now and then
 * touches a fire and takes 1.5 s over it, past its ack timeout.  The
 * parent SIGKILLs a random client, consumers too, every --kill-every ms
 * or so and restarts it after a moment; it samples the daemon's VmRSS
 * every second, following it through --daemon-pid-file when soak.sh
 * --restart-every restarts it.
 *
 * Everything a client intends, every reply and every fire goes to its
 * slot's journal with one write(2) (soak.h), before sending for
 * intents, so a SIGKILL loses nothing recorded.  At the end the parent
 * drains every named session, kicks 3 dead letters back and takes them,
 * drains its dead-letter session, and folds each journal: every acknowledged
 * oneshot fired exactly once, or was cancelled / replaced (and did not
 * fire after the reply that said so), or was refused; periodic timers
 * fired once per period (or skipped as PROTOCOL.md allows) until they
 * were cancelled, and never after; nothing early; nothing dropped.  A
 * named session's fire may be in any of its consumers' journals, and
 * more than once, but at most one copy may lack the redelivered mark,
 * plus one per Release; a released fire comes again, not before its
 * ready time, with more deliveries; deliveries never go down but across
 * a Kick; a dead letter reached its origin's limit; a touched fire goes
 * to no one else before its new ack deadline (settle_history).  What the protocol leaves
 * open is counted apart, not hidden: a request whose reply died with its
 * process or connection is "unknown" (it may fire, once), an anonymous
 * session's timers die with its connection, and a fire already written
 * to an anonymous (auto-ack) connection that then broke may be lost
 * (PROTOCOL.md section 8) - excused only when its deadline falls in the
 * --grace-ms window before the break (or in a pause or unread queue that
 * the break cut short, or in a pause that ended within the grace before
 * it, its backlog still being read).  A named session's fire has no excuse: it is
 * redelivered until a consumer that journaled it acknowledges it.
 * Anything else missing is "lost" and fails.
 *
 * Seeds: every choice comes from a fixed seed mixed with $BW_SOAK_SEED
 * (printed); slot s, incarnation i uses seed(s, i) derived from it.
 * Exit status: 0 PASS, 1 FAIL, 2 usage or set-up error.
 * See bench/README.md, "Soak".
 */
#define _GNU_SOURCE
#include "soak.h"

#include <bitwheel-client.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS UINT64_C(1000000)
#define SEC UINT64_C(1000000000)
#define SOAK_FIXED_SEED 0x50a4b17e5eed2024ull
#define MAX_SLOTS 64
/* The consumer-only slots' ack timeout: shorter than their pauses. */
#define CONSUMER_ACK_TIMEOUT_NS SEC

struct cfg {
	const char *socket;
	const char *dir;
	long daemon_pid;
	const char *pid_file;   /* --daemon-pid-file: re-read, for restarts */
	unsigned restarts;      /* daemon pids seen after the first         */
	uint64_t duration_ns;
	int clients;
	uint64_t rate;          /* operations per second per client       */
	unsigned burst;         /* timers scheduled before a pause         */
	uint64_t kill_every_ns; /* mean time between kills                 */
	uint64_t grace_ns;
	uint64_t run_seed;
	uint64_t env_seed;
	uint64_t t_start, t_end;
	bool verbose;
	bool account_only;      /* --account DIR: fold kept journals only */
	pid_t parent;
};

static struct cfg cfg;

static uint64_t splitmix(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static uint64_t slot_seed(unsigned slot, unsigned inc)
{
	uint64_t s = splitmix(cfg.run_seed ^ splitmix(((uint64_t)slot << 20) | inc));

	return s ? s : 1;
}

/* Uniform in [lo, hi]. */
static uint64_t urand(uint64_t *rs, uint64_t lo, uint64_t hi)
{
	return hi <= lo ? lo : lo + load_rand(rs) % (hi - lo + 1);
}

/* Groups of four slots (soak.h): a producer, a producer and consumer, a
 * consumer of one named session, and an anonymous session.  A producer
 * without its partner in the group (the last slot) also consumes, so
 * that every session with timers has a consumer. */
static int slot_role(unsigned slot)
{
	int r = (int)(slot % 4);

	if (r == SOAK_PRODUCER && (int)slot + 1 >= cfg.clients)
		return SOAK_BOTH;
	return r;
}

static bool slot_named(unsigned slot)
{
	return slot_role(slot) != SOAK_ANON;
}

/* The named session of slot's group. */
static void slot_session(unsigned slot, char *buf, size_t len)
{
	snprintf(buf, len, "bwsoak.%ld.g%u", (long)cfg.parent, slot / 4);
}

static void slot_path(unsigned slot, char *buf, size_t len)
{
	snprintf(buf, len, "%s/slot%02u.journal", cfg.dir, slot);
}

/* The payload names its timer and is checkable byte for byte: the uid,
 * then a few bytes that depend on it. */
static size_t payload_make(uint64_t uid, unsigned char *buf)
{
	size_t len = 8 + (size_t)(splitmix(uid) % 57);

	for (size_t i = 0; i < 8; i++)
		buf[i] = (unsigned char)(uid >> (8 * i));
	for (size_t i = 8; i < len; i++)
		buf[i] = (unsigned char)((uid >> (8 * (i % 8))) ^ (i * 37));
	return len;
}

static uint64_t payload_uid(const void *p, size_t len)
{
	unsigned char want[80];
	uint64_t uid = 0;

	if (!p || len < 8)
		return 0;
	for (size_t i = 0; i < 8; i++)
		uid |= (uint64_t)((const unsigned char *)p)[i] << (8 * i);
	if (payload_make(uid, want) != len || memcmp(want, p, len) != 0)
		return 0;
	return uid;
}

/* ======================================================================
 * The model: folding a slot's journal.
 * ==================================================================== */

static void viol(struct soak_model *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void viol(struct soak_model *m, const char *fmt, ...)
{
	struct soak_tally *t = m->tally;
	va_list ap;

	if (!t)
		return;
	t->violations++;
	if (t->nexamples < sizeof t->examples / sizeof t->examples[0]) {
		int n = snprintf(t->examples[t->nexamples], sizeof t->examples[0],
				 "slot %u: ", m->slot);

		va_start(ap, fmt);
		vsnprintf(t->examples[t->nexamples] + n,
			  sizeof t->examples[0] - (size_t)n, fmt, ap);
		va_end(ap);
		t->nexamples++;
	}
}

/* A loss is not a protocol violation, but it is worth an example too. */
static void loss(struct soak_model *m, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void loss(struct soak_model *m, const char *fmt, ...)
{
	struct soak_tally *t = m->tally;
	va_list ap;

	if (!t || t->nexamples >= sizeof t->examples / sizeof t->examples[0])
		return;
	int n = snprintf(t->examples[t->nexamples], sizeof t->examples[0],
			 "slot %u: LOST ", m->slot);

	va_start(ap, fmt);
	vsnprintf(t->examples[t->nexamples] + n, sizeof t->examples[0] - (size_t)n,
		  fmt, ap);
	va_end(ap);
	t->nexamples++;
}

struct soak_timer *soak_timer_get(struct soak_model *m, uint64_t uid)
{
	unsigned inc = SOAK_UID_INC(uid);
	uint32_t seq = SOAK_UID_SEQ(uid);
	struct soak_timer *t;

	if (SOAK_UID_SLOT(uid) != m->slot || inc >= m->nincs || seq == 0 ||
	    seq >= m->incs[inc].n)
		return NULL;
	t = &m->incs[inc].t[seq];
	return t->uid == uid ? t : NULL;
}

static struct soak_timer *timer_new(struct soak_model *m, uint64_t uid)
{
	unsigned inc = SOAK_UID_INC(uid);
	uint32_t seq = SOAK_UID_SEQ(uid);
	struct soak_inc *in;

	if (SOAK_UID_SLOT(uid) != m->slot || seq == 0)
		return NULL;
	if (inc >= m->nincs) {
		struct soak_inc *p = realloc(m->incs, (inc + 1) * sizeof *p);

		if (!p)
			return NULL;
		memset(p + m->nincs, 0, (inc + 1 - m->nincs) * sizeof *p);
		m->incs = p;
		m->nincs = inc + 1;
	}
	in = &m->incs[inc];
	if (seq >= in->cap) {
		uint32_t cap = in->cap ? in->cap : 1024;
		struct soak_timer *p;

		while (cap <= seq)
			cap *= 2;
		p = realloc(in->t, cap * sizeof *p);
		if (!p)
			return NULL;
		memset(p + in->cap, 0, (cap - in->cap) * sizeof *p);
		in->t = p;
		in->cap = cap;
	}
	if (seq >= in->n)
		in->n = seq + 1;
	if (in->t[seq].uid == uid)
		return NULL;    /* a uid is never sent twice */
	in->t[seq].uid = uid;
	return &in->t[seq];
}

static void pend_push(struct soak_model *m, uint64_t key, uint64_t uid)
{
	if (m->npend == m->cappend) {
		size_t cap = m->cappend ? m->cappend * 2 : 256;
		struct soak_req *p = realloc(m->pend, cap * sizeof *p);

		if (!p)
			return;
		m->pend = p;
		m->cappend = cap;
	}
	m->pend[m->npend++] = (struct soak_req){ .key = key, .uid = uid };
}

/* Replies come in request order, so the match is nearly always first. */
static void pend_pop(struct soak_model *m, uint64_t key, uint64_t uid)
{
	for (size_t i = 0; i < m->npend; i++) {
		if (m->pend[i].uid != uid || (!uid && m->pend[i].key != key))
			continue;
		memmove(&m->pend[i], &m->pend[i + 1],
			(m->npend - i - 1) * sizeof m->pend[0]);
		m->npend--;
		return;
	}
}

static bool ambiguous(int st);

/*
 * The process died with these requests unanswered: each may or may not
 * have taken effect.  The Schedules themselves stay TS_INTENT (unknown);
 * what a Cancel or a replace aimed at becomes unknown as well.
 */
static void pend_orphan(struct soak_model *m)
{
	for (size_t i = 0; i < m->npend; i++) {
		struct soak_timer *head = soak_timer_get(m, m->pend[i].key);
		struct soak_timer *t = m->pend[i].uid ?
				       soak_timer_get(m, m->pend[i].uid) : NULL;

		if (!head || (t && !(t->flags & SF_REPLACE)))
			continue;
		for (struct soak_timer *it = head; it;
		     it = it->next ? soak_timer_get(m, it->next) : NULL)
			if (it != t && it->st == TS_LIVE)
				it->st = TS_MAYBE;
	}
	m->npend = 0;
}

void soak_model_free(struct soak_model *m)
{
	free(m->pend);
	m->pend = NULL;
	for (unsigned i = 0; i < m->nincs; i++)
		free(m->incs[i].t);
	free(m->incs);
	free(m->conns);
	m->incs = NULL;
	m->conns = NULL;
}

static bool ambiguous(int st)
{
	return st == TS_INTENT || st == TS_MAYBE;
}

/* The members of key's chain. */
#define CHAIN_FOR(m, head, it) \
	for (struct soak_timer *it = (head); it; \
	     it = it->next ? soak_timer_get((m), it->next) : NULL)

/*
 * A reply said the key holds nothing (pending=false, or a Schedule that
 * replaced nothing) or took the one pending timer (pending=true,
 * replaced=true).  Members still thought live are settled, unless some
 * earlier request on the key has an unknown outcome, which makes every
 * live member's fate unknown too.  Only members sent before the request
 * (t_stop, its intent): one pipelined behind it was handled after it, so
 * the reply says nothing of it (seed 11: a replace sent 0.2 ms before an
 * earlier replace's reply came was taken for replaced by that reply).
 */
static bool settles(const struct soak_timer *it, const struct soak_timer *except,
		    uint64_t t_stop)
{
	return it != except && it->t_intent <= t_stop;
}

static void settle_key(struct soak_model *m, struct soak_timer *head,
		       const struct soak_timer *except,
		       uint64_t t_reply, bool took_one, uint64_t t_stop,
		       const char *what)
{
	unsigned live = 0, amb = 0;

	CHAIN_FOR(m, head, it) {
		if (!settles(it, except, t_stop))
			continue;
		if (it->st == TS_LIVE)
			live++;
		else if (ambiguous(it->st))
			amb++;
	}
	if (took_one && live + amb == 0)
		viol(m, "%s for key %#" PRIx64 " that held no pending timer",
		     what, head->key);
	if (took_one && live > 1)
		viol(m, "key %#" PRIx64 " had %u pending timers", head->key, live);
	CHAIN_FOR(m, head, it) {
		if (!settles(it, except, t_stop))
			continue;
		if (t_reply < it->end_t)
			it->end_t = t_reply;
		if (it->st != TS_LIVE)
			continue;
		if (amb) {
			it->st = TS_MAYBE;
		} else if (took_one) {
			it->st = except ? TS_REPLACED : TS_CANCELLED;
			it->t_stop = t_stop;
		} else {
			it->st = TS_VANISHED;
			it->t_stop = t_stop;
		}
	}
}

static void conn_end(struct soak_model *m, uint64_t t, int kind)
{
	struct soak_conn *c;

	if (m->cur < 0)
		return;
	c = &m->conns[m->cur];
	c->open = false;
	c->end = t;
	c->end_kind = kind;
	m->cur = -1;
	m->breaks++;
}

static struct soak_conn *conn_new(struct soak_model *m)
{
	if (m->nconns == m->capconns) {
		unsigned cap = m->capconns ? m->capconns * 2 : 64;
		struct soak_conn *p = realloc(m->conns, cap * sizeof *p);

		if (!p)
			return NULL;
		m->conns = p;
		m->capconns = cap;
	}
	memset(&m->conns[m->nconns], 0, sizeof m->conns[0]);
	return &m->conns[m->nconns++];
}

static int in_flight(const struct soak_model *m, unsigned only, uint64_t d);

static void fold_fire(struct soak_model *m, const struct soak_rec *r,
		      uint64_t pos)
{
	struct soak_tally *ty = m->tally;
	struct soak_timer *t = r->uid ? soak_timer_get(m, r->uid) : NULL;
	struct soak_conn *c = m->cur >= 0 ? &m->conns[m->cur] : NULL;
	uint64_t d = r->v[0], f = r->v[1], cnt = r->v[2], recv = r->t;
	bool delayed = false;

	if (ty)
		ty->fires++;
	if (c) {
		c->fires++;
		if (c->fires <= c->queued) {
			delayed = true;
			if (ty)
				ty->queued_fires++;
		}
		if (f < c->attach || (c->last_resume && f < c->last_resume))
			delayed = true;
	}
	if (delayed && ty)
		ty->delayed_fires++;
	if (!t) {
		viol(m, "fire of key %#" PRIx64 " names no timer this slot sent "
		     "(payload uid %#" PRIx64 ")", r->key, r->uid);
		return;
	}
	if (t->key != r->key)
		viol(m, "fire of uid %#" PRIx64 " carries key %#" PRIx64
		     ", scheduled as %#" PRIx64, t->uid, r->key, t->key);
	if (f < d || recv < d)
		viol(m, "EARLY fire of %#" PRIx64 ": deadline %" PRIu64
		     " fired_at %" PRIu64 " received %" PRIu64, t->uid, d, f, recv);
	/* Protocol 2 delivers a fire that happened before a Cancel even
	 * after its reply (it waited in the session's queue): only a fire
	 * the daemon made after the reply is wrong. */
	if (f > t->end_t)
		viol(m, "fire of %#" PRIx64 " (deadline %" PRIu64 ", count %"
		     PRIu64 ") fired at %" PRIu64 ", after the reply at %" PRIu64
		     " that cancelled or replaced it", t->uid, d, cnt, f, t->end_t);
	if (!m->named && (int)t->conn != m->cur)
		viol(m, "fire of %#" PRIx64 " reached another connection's "
		     "anonymous session", t->uid);
	if (!(t->flags & SF_PERIODIC)) {
		if (ty) {
			ty->oneshot_fires++;
			load_hist_add(&ty->os_srv, f - d);
			if (!delayed && recv >= d)
				load_hist_add(&ty->os_recv, recv - d);
		}
		if (++t->fires > 1)
			viol(m, "DUPLICATE fire of oneshot %#" PRIx64 " (deadline %"
			     PRIu64 ", fire %u)", t->uid, d, t->fires);
		if (t->was_acked && d != t->deadline)
			viol(m, "fire of %#" PRIx64 " for deadline %" PRIu64
			     ", acknowledged %" PRIu64, t->uid, d, t->deadline);
		if ((t->flags & SF_ABS) && d != t->when)
			viol(m, "fire of %#" PRIx64 " for deadline %" PRIu64
			     ", asked %" PRIu64, t->uid, d, t->when);
		if (cnt != 0)
			viol(m, "oneshot %#" PRIx64 " fired with count %" PRIu64,
			     t->uid, cnt);
		if (t->st == TS_CANCELLED || t->st == TS_REPLACED)
			viol(m, "oneshot %#" PRIx64 " fired at %" PRIu64 ", yet a "
			     "reply at %" PRIu64 " found it pending and took it",
			     t->uid, f, t->end_t);
		if (t->fire1_pos == 0)
			t->fire1_pos = pos;
		if (t->st == TS_LIVE)
			t->st = TS_FIRED;
		t->last_pos = pos;
		return;
	}
	/* Periodic. */
	if (ty) {
		ty->periodic_fires++;
		load_hist_add(&ty->per_srv, f - d);
		if (!delayed && recv >= d)
			load_hist_add(&ty->per_recv, recv - d);
	}
	t->fires++;
	if (t->fire1_pos == 0)
		t->fire1_pos = pos;
	uint64_t d0 = t->was_acked ? t->deadline :
		      (t->flags & SF_ABS) ? t->when : 0;
	if (cnt <= t->last_count) {
		viol(m, "periodic %#" PRIx64 " fire count %" PRIu64 " after %"
		     PRIu64 " (duplicate)", t->uid, cnt, t->last_count);
		return;
	}
	if (d0 && (d < d0 || (d - d0) % t->period != 0))
		viol(m, "periodic %#" PRIx64 " fired for %" PRIu64
		     ", not in its sequence %" PRIu64 " + k*%" PRIu64,
		     t->uid, d, d0, t->period);
	uint64_t gap = cnt - t->last_count - 1;
	if (t->last_count == 0 && gap == 0 && d0 && d != d0)
		viol(m, "periodic %#" PRIx64 " first fire for %" PRIu64
		     ", first deadline %" PRIu64, t->uid, d, d0);
	if (t->last_count > 0 && gap == 0) {
		if (d <= t->last_deadline)
			viol(m, "periodic %#" PRIx64 " deadline went back", t->uid);
		else if (d <= t->last_fired)
			viol(m, "periodic %#" PRIx64 " fired again for %" PRIu64
			     ", already past when it fired at %" PRIu64
			     " (a catch-up fire, no skip)", t->uid, d, t->last_fired);
		else if (d != t->last_deadline + t->period) {
			/* PROTOCOL.md: after falling a whole period behind it
			 * fires once and moves to the first deadline after the
			 * time it fired. */
			if (d - t->period > t->last_fired)
				viol(m, "periodic %#" PRIx64 " skipped to %" PRIu64
				     " though it fired %" PRIu64 " at %" PRIu64,
				     t->uid, d, t->last_deadline, t->last_fired);
			else if (ty)
				ty->skips += (d - t->last_deadline) / t->period - 1;
		}
	}
	if (gap > 0) {
		/* Fires the daemon counted that never reached the journal:
		 * only a break in between can explain them, and only if the
		 * first and the last missing deadline were both in flight at
		 * a break. */
		unsigned only = m->named ? UINT32_MAX : t->conn;
		uint64_t first = t->last_count ? t->last_deadline + t->period : d0;

		if (m->breaks > t->last_breaks && in_flight(m, only, first) &&
		    in_flight(m, only, d - t->period)) {
			if (ty)
				ty->excused_why[in_flight(m, only, first) - 1] += gap;
			if (ty)
				ty->periodic_gaps_excused += gap;
		} else {
			if (ty)
				ty->lost_periodic += gap;
			loss(m, "periodic %#" PRIx64 ": fire count jumped %" PRIu64
			     " -> %" PRIu64 " with no break", t->uid,
			     t->last_count, cnt);
		}
	}
	t->last_count = cnt;
	t->last_deadline = d;
	t->last_fired = f;
	t->last_pos = pos;
	t->last_breaks = m->breaks;
}

static void obs_push(struct soak_obsvec *ov, const struct soak_obs *o)
{
	if (ov->n == ov->cap) {
		size_t cap = ov->cap ? ov->cap * 2 : 4096;
		struct soak_obs *p = realloc(ov->v, cap * sizeof *p);

		if (!p) {
			fprintf(stderr, "bwsoak: out of memory for fires\n");
			exit(2);
		}
		ov->v = p;
		ov->cap = cap;
	}
	ov->v[ov->n++] = *o;
}

/*
 * A named session's fire, in the journal of the consumer that took it.
 * What needs no timer is checked here; the rest once every journal is
 * folded (soak_settle_fires), since the timer's own records are in the
 * journal of the slot that scheduled it, which may be another.
 */
static void fold_fire_named(struct soak_model *m, const struct soak_rec *r,
			    uint64_t pos)
{
	struct soak_tally *ty = m->tally;
	struct soak_conn *c = m->cur >= 0 ? &m->conns[m->cur] : NULL;
	uint64_t d = r->v[0], f = r->v[1], cnt = r->v[2], recv = r->t;
	unsigned fl = (unsigned)(r->v[3] & SFF_MASK);
	uint32_t deliveries = SFF_DELIVERIES(r->v[3]);
	unsigned owner = SOAK_UID_SLOT(r->uid);
	/* Handed out before (taken back, released, dead-lettered): its
	 * wait is not the daemon's lateness. */
	bool delayed = (fl & (SFF_REDELIVERED | SFF_DEAD)) || deliveries > 1;

	if (c) {
		c->fires++;
		if (c->fires <= c->queued) {
			delayed = true;
			if (ty)
				ty->queued_fires++;
		}
		if (f < c->attach || (c->last_resume && f < c->last_resume))
			delayed = true;
	}
	if (!ty) {
		/* Replay: a fire of one of this slot's oneshots ends it. */
		struct soak_timer *t = r->uid ? soak_timer_get(m, r->uid) : NULL;

		if (t && !(t->flags & SF_PERIODIC) && t->st == TS_LIVE)
			t->st = TS_FIRED;
		return;
	}
	ty->fires++;
	ty->named_fires++;
	if (fl & SFF_REDELIVERED)
		ty->named_redelivered++;
	if (delayed)
		ty->delayed_fires++;
	if (!r->uid) {
		viol(m, "fire of key %#" PRIx64 " with a payload that names no "
		     "timer", r->key);
		return;
	}
	if (owner / 4 != m->group || owner % 4 == SOAK_ANON) {
		viol(m, "fire of %#" PRIx64 " (slot %u) reached session %u's "
		     "consumer", r->uid, owner, m->group);
		return;
	}
	if (f < d || recv < d)
		viol(m, "EARLY fire of %#" PRIx64 ": deadline %" PRIu64
		     " fired_at %" PRIu64 " received %" PRIu64, r->uid, d, f, recv);
	if (cnt == 0) {
		ty->oneshot_fires++;
		if (f >= d)
			load_hist_add(&ty->os_srv, f - d);
		if (!delayed && recv >= d)
			load_hist_add(&ty->os_recv, recv - d);
	} else {
		ty->periodic_fires++;
		if (f >= d)
			load_hist_add(&ty->per_srv, f - d);
		if (!delayed && recv >= d)
			load_hist_add(&ty->per_recv, recv - d);
	}
	if (deliveries == 0)
		viol(m, "fire of %#" PRIx64 " (count %" PRIu64 ") without "
		     "Fired.deliveries", r->uid, cnt);
	/* The drain's Kick moved dead letters back to the session, whose
	 * only consumer it is now: each comes counted from 1 again. */
	if (m->drain_kick && r->inc == SOAK_INC_DRAIN) {
		m->drain_after_kick++;
		if (deliveries != 1)
			viol(m, "fire of %#" PRIx64 " after the drain's Kick "
			     "with deliveries %" PRIu32 ", not 1", r->uid,
			     deliveries);
	}
	if (m->obs) {
		obs_push(m->obs, &(struct soak_obs){
			.uid = r->uid, .key = r->key, .d = d, .f = f, .cnt = cnt,
			.recv = recv, .pos = pos, .slot = m->slot,
			.conn = m->cur >= 0 ? (uint32_t)m->cur : UINT32_MAX,
			.deliveries = deliveries,
			.dl_deliveries = SFF_DL_DELIVERIES(r->v[3]),
			.flags = (uint8_t)fl });
		m->last_obs = m->obs->n - 1;
		m->has_last_obs = true;
	}
}

/* The fire a Release or Touch names: journaled just before it, by this
 * slot (NULL, and a violation, if not). */
static struct soak_obs *obs_last(struct soak_model *m, const struct soak_rec *r)
{
	struct soak_obs *o;

	if (!m->obs || !m->has_last_obs)
		return NULL;
	o = &m->obs->v[m->last_obs];
	if (o->uid != r->uid || o->cnt != r->v[0]) {
		viol(m, "%s of %#" PRIx64 " (count %" PRIu64 ") names no fire "
		     "just journaled", r->type == SR_RELEASE ? "Release" : "Touch",
		     r->uid, r->v[0]);
		return NULL;
	}
	return o;
}

/* The fire whose Release (touch false) or Touch this outcome answers:
 * the oldest of that fire on this connection with one sent and no
 * outcome yet, as replies come in request order (a fire taken back and
 * handed to the same connection again may have two).  Replies come
 * within the client's 5 s timeout, so the search from the end is short. */
static struct soak_obs *obs_sent(struct soak_model *m, const struct soak_rec *r,
				 bool touch)
{
	struct soak_obs *found = NULL;

	if (!m->obs)
		return NULL;
	for (size_t i = m->obs->n; i-- > 0;) {
		struct soak_obs *o = &m->obs->v[i];

		if (o->slot != m->slot || o->recv + 10 * SEC < r->t)
			break;
		if (o->uid == r->uid && o->cnt == r->v[0] &&
		    (int)o->conn == m->cur &&
		    (touch ? o->touch_sent && !o->touch_by : o->rel == REL_SENT))
			found = o;
	}
	if (!found)
		viol(m, "%s outcome for %#" PRIx64 " (count %" PRIu64 ") with "
		     "none sent", touch ? "Touch" : "Release", r->uid, r->v[0]);
	return found;
}

static void fold_failing(struct soak_model *m, const struct soak_rec *r)
{
	struct soak_tally *ty = m->tally;
	struct soak_obs *o;
	unsigned fl = (unsigned)r->v[1];

	if (!ty)
		return;         /* replay: nothing of these matters */
	switch (r->type) {
	case SR_RELEASE:
		ty->releases++;
		if ((o = obs_last(m, r)))
			o->rel = REL_SENT;
		break;
	case SR_RELEASED:
		if (fl & SRL_ERROR && !(fl & SRL_UNSENT)) {
			/* The connection ended first (the reply may come
			 * after its end was journaled): stays REL_SENT. */
			ty->released_unknown++;
			break;
		}
		if (!(o = obs_sent(m, r, false)))
			break;
		if (fl & SRL_UNSENT) {
			o->rel = REL_NOT;       /* in flight still: acked */
			ty->released_not++;
		} else if (!(fl & SRL_RELEASED)) {
			o->rel = REL_GONE;      /* taken back already */
			ty->released_not++;
		} else {
			o->rel = fl & SRL_DEAD ? REL_DEAD : REL_BACK;
			o->rel_deliveries = (uint32_t)r->v[2];
			o->rel_ready = r->v[3];
			if (fl & SRL_DEAD)
				ty->released_dead++;
			else
				ty->released_back++;
		}
		break;
	case SR_TOUCH:
		ty->touches++;
		if ((o = obs_last(m, r)))
			o->touch_sent = true;
		break;
	case SR_TOUCHED:
		if (!(fl & SRL_TOUCHED) || !(o = obs_sent(m, r, true)))
			break;
		ty->touched++;
		o->touch_by = r->v[2];
		if (r->v[2] < r->t)
			viol(m, "Touch of %#" PRIx64 " answered with an ack deadline "
			     "%" PRIu64 " already past at %" PRIu64, r->uid,
			     r->v[2], r->t);
		break;
	case SR_KICK:
		ty->kicks++;
		if (!m->obs)
			break;
		if (m->obs->nkicks == m->obs->capkicks) {
			size_t cap = m->obs->capkicks ? m->obs->capkicks * 2 : 64;
			struct soak_kick *p = realloc(m->obs->kicks, cap * sizeof *p);

			if (!p) {
				fprintf(stderr, "bwsoak: out of memory for kicks\n");
				exit(2);
			}
			m->obs->kicks = p;
			m->obs->capkicks = cap;
		}
		m->obs->kicks[m->obs->nkicks++] = (struct soak_kick){
			.group = m->group, .t0 = r->t, .t1 = UINT64_MAX };
		m->kick_open = m->obs->nkicks;
		break;
	case SR_KICKED:
		if (!m->kick_open || !m->obs)
			break;
		if (!(fl & SRL_ERROR)) {
			m->obs->kicks[m->kick_open - 1].t1 = r->t;
			ty->kicked += r->v[0];
			if (r->inc == SOAK_INC_DRAIN) {
				m->drain_kick = true;
				m->drain_kicked = r->v[0];
				m->drain_after_kick = 0;
			}
		}
		m->kick_open = 0;
		break;
	case SR_POLICY:
		ty->policy_groups++;
		if (m->obs && m->group < sizeof m->obs->max_deliveries /
		    sizeof m->obs->max_deliveries[0])
			m->obs->max_deliveries[m->group] = (uint32_t)r->v[0];
		if (r->v[0] > ty->max_deliveries_seen)
			ty->max_deliveries_seen = (uint32_t)r->v[0];
		break;
	}
}

static void fold_rec(struct soak_model *m, const struct soak_rec *r,
		     uint64_t pos)
{
	struct soak_tally *ty = m->tally;
	struct soak_timer *t, *head;
	struct soak_conn *c;

	if (r->t > m->last_t)
		m->last_t = r->t;
	switch (r->type) {
	case SR_START:
		pend_orphan(m);         /* the last process ended unnoticed */
		break;
	case SR_DIAL:
		m->dial_pending = true;
		break;
	case SR_CONN:
		conn_end(m, r->t, SR_CLOSED);   /* never: a dial follows an end */
		c = conn_new(m);
		if (!c)
			return;
		c->inc = r->inc;
		c->open = true;
		c->named = m->named;
		c->dial = r->v[0];
		c->attach = r->t;
		c->resumed = r->v[1];
		c->timers_at_attach = r->v[2];
		c->queued = r->v[3];
		c->dropped = r->key;
		m->cur = (int)(m->nconns - 1);
		m->dial_pending = false;
		if (ty) {
			ty->conns++;
			ty->resumed += c->resumed;
			ty->dropped_hello += c->dropped;
		}
		if (c->dropped)
			viol(m, "HelloReply.dropped = %" PRIu64 " on attach at %"
			     PRIu64, c->dropped, r->t);
		break;
	case SR_CONN_FAIL:
		if (ty)
			ty->busy_retries++;
		break;
	case SR_SCHED:
		t = timer_new(m, r->uid);
		if (!t) {
			viol(m, "schedule intent for uid %#" PRIx64 " twice", r->uid);
			return;
		}
		t->key = r->key;
		t->t_intent = r->t;
		t->when = r->v[0];
		t->period = r->v[1];
		t->flags = (uint8_t)r->v[2];
		t->st = TS_INTENT;
		t->conn = m->cur >= 0 ? (uint32_t)m->cur : UINT32_MAX;
		t->end_t = UINT64_MAX;
		t->last_breaks = m->breaks;
		pend_push(m, r->key, r->uid);
		if (ty)
			ty->intents++;
		if (r->key == r->uid) {
			t->tail = r->uid;
		} else if ((head = soak_timer_get(m, r->key)) != NULL) {
			struct soak_timer *tail = soak_timer_get(m, head->tail);

			if (tail)
				tail->next = r->uid;
			head->tail = r->uid;
		} else {
			viol(m, "schedule on key %#" PRIx64 " never scheduled", r->key);
		}
		break;
	case SR_SCHED_OK:
		pend_pop(m, r->key, r->uid);
		t = soak_timer_get(m, r->uid);
		if (!t || t->st != TS_INTENT) {
			viol(m, "ScheduleReply for %#" PRIx64 " with no request "
			     "waiting", r->uid);
			return;
		}
		t->was_acked = true;
		t->ack_pos = pos;
		t->deadline = r->v[0];
		t->st = TS_LIVE;
		if (ty) {
			ty->scheduled++;
			if (t->flags & SF_PERIODIC)
				ty->periodic_scheduled++;
		}
		if (t->fire1_pos) {
			viol(m, "%#" PRIx64 " fired before its ScheduleReply", t->uid);
			if (!(t->flags & SF_PERIODIC))
				t->st = TS_FIRED;
		}
		if (t->flags & SF_ABS ? t->deadline != t->when :
		    t->deadline < t->t_intent + t->when ||
		    t->deadline > r->t + t->when)
			viol(m, "%#" PRIx64 " acknowledged for %" PRIu64
			     ", asked %s %" PRIu64, t->uid, t->deadline,
			     t->flags & SF_ABS ? "at" : "in", t->when);
		head = soak_timer_get(m, t->key);
		if (head && head != t) {
			bool replaced = r->v[1];

			if (replaced && !(t->flags & SF_REPLACE))
				viol(m, "%#" PRIx64 " replaced without replace",
				     t->uid);
			settle_key(m, head, t, r->t, replaced, t->t_intent,
				   "ScheduleReply replaced=true");
		} else if (r->v[1]) {
			viol(m, "%#" PRIx64 " replaced=true on a fresh key", t->uid);
		}
		break;
	case SR_SCHED_ERR:
		pend_pop(m, r->key, r->uid);
		t = soak_timer_get(m, r->uid);
		if (!t || t->st != TS_INTENT) {
			viol(m, "schedule error for %#" PRIx64 " with no request "
			     "waiting", r->uid);
			return;
		}
		if (r->v[2]) {
			t->st = TS_REFUSED;     /* the library sent nothing */
			if (ty) {
				ty->refused++;
				ty->refused_client++;
			}
			break;
		}
		switch ((int)r->v[0]) {
		case BWC_ESERVER:
			t->st = TS_REFUSED;
			if (ty) {
				ty->refused++;
				if (r->v[1] == BWC_SERVER_DUPLICATE_KEY)
					ty->refused_dup++;
				else
					ty->refused_other++;
			}
			if (r->v[1] == BWC_SERVER_DUPLICATE_KEY &&
			    !(t->flags & SF_DUP))
				viol(m, "DUPLICATE_KEY for %#" PRIx64 " on a key "
				     "not known pending", t->uid);
			break;
		default:
			/* The connection ended first: it may have landed. */
			t->st = TS_MAYBE;
			if ((t->flags & SF_REPLACE) &&
			    (head = soak_timer_get(m, t->key)) != NULL)
				CHAIN_FOR(m, head, it)
					if (it != t && it->st == TS_LIVE)
						it->st = TS_MAYBE;
			break;
		}
		break;
	case SR_CANCEL:
		pend_push(m, r->key, 0);
		if ((head = soak_timer_get(m, r->key)) != NULL)
			head->t_cancel = r->t;
		else
			viol(m, "cancel of key %#" PRIx64 " never scheduled", r->key);
		if (ty)
			ty->cancel_sent++;
		break;
	case SR_CANCEL_OK:
		pend_pop(m, r->key, 0);
		if (!(head = soak_timer_get(m, r->key)))
			return;
		if (ty) {
			if (r->v[0])
				ty->cancel_hit++;
			else
				ty->cancel_miss++;
		}
		settle_key(m, head, NULL, r->t, r->v[0], head->t_cancel,
			   "CancelReply pending=true");
		break;
	case SR_CANCEL_ERR:
		pend_pop(m, r->key, 0);
		if (!(head = soak_timer_get(m, r->key)))
			return;
		if (r->v[2])
			break;          /* not sent */
		CHAIN_FOR(m, head, it)
			if (it->st == TS_LIVE)
				it->st = TS_MAYBE;
		break;
	case SR_FIRE:
		if (m->named)
			fold_fire_named(m, r, pos);
		else
			fold_fire(m, r, pos);
		break;
	case SR_ACK:
		if (ty && r->v[1] == 0)
			ty->acks++;
		else if (ty)
			ty->ack_failures++;
		break;
	case SR_PAUSE:
		if (m->cur >= 0)
			m->conns[m->cur].pause_open = m->conns[m->cur].last_pause = r->t;
		if (ty)
			ty->pauses++;
		break;
	case SR_RESUME:
		if (m->cur >= 0) {
			m->conns[m->cur].pause_open = 0;
			m->conns[m->cur].last_resume = r->t;
		}
		break;
	case SR_CLOSE:
		if (ty)
			ty->closes++;
		conn_end(m, r->t, SR_CLOSE);
		break;
	case SR_CLOSED:
		if (ty)
			ty->daemon_closes++;
		conn_end(m, r->t, SR_CLOSED);
		break;
	case SR_END:
		conn_end(m, r->t, SR_END);
		m->dial_pending = false;
		if (m->drain_kick && m->drain_after_kick < m->drain_kicked)
			viol(m, "the drain's Kick moved %" PRIu64 " dead letters "
			     "back, and only %" PRIu64 " came", m->drain_kicked,
			     m->drain_after_kick);
		m->drain_kick = false;
		break;
	case SR_RELEASE:
	case SR_RELEASED:
	case SR_TOUCH:
	case SR_TOUCHED:
	case SR_KICK:
	case SR_KICKED:
	case SR_POLICY:
		fold_failing(m, r);
		break;
	case SR_KILL:
		pend_orphan(m);
		if (ty)
			ty->kills++;
		if (m->cur >= 0) {
			conn_end(m, r->t, SR_KILL);
		} else if (m->dial_pending) {
			/* Killed while attaching: the daemon may have attached
			 * and written the queue to a connection the journal
			 * never saw. */
			c = conn_new(m);
			if (c) {
				c->inc = r->inc;
				c->named = m->named;
				c->end = r->t;
				c->end_kind = SR_KILL;
				c->queued = UINT64_MAX;
				m->breaks++;
			}
		}
		m->dial_pending = false;
		break;
	default:
		viol(m, "journal record %" PRIu64 " has unknown type %u", pos,
		     r->type);
		break;
	}
}

int soak_fold(const char *path, struct soak_model *m)
{
	static struct soak_rec buf[4096];
	uint64_t pos = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	m->cur = -1;
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	for (;;) {
		n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		/* A record torn by a kill can only be the file's last. */
		for (size_t i = 0; i < (size_t)n / sizeof buf[0]; i++)
			fold_rec(m, &buf[i], ++pos);
		if ((size_t)n % sizeof buf[0]) {
			off_t back = -(off_t)((size_t)n % sizeof buf[0]);

			if (lseek(fd, back, SEEK_CUR) < 0)
				break;
		}
	}
	close(fd);
	m->records = pos;
	return n < 0 ? -1 : 0;
}

/* How long after the parent records a SIGKILL its client may still own
 * an open socket (the kill, and the recording, are not instantaneous). */
#define KILL_LAG_NS (50 * MS)

/* Could a fire due at d have been written to an anonymous (auto-ack)
 * connection that then broke (and so be lost as PROTOCOL.md section 8
 * allows)?  0 no; 1 within the grace before the break; 2 in a pause the
 * break cut short; 3 in a reattach queue the client was killed before
 * reading. */
static int in_flight(const struct soak_model *m, unsigned only, uint64_t d)
{
	for (unsigned i = 0; i < m->nconns; i++) {
		const struct soak_conn *c = &m->conns[i];
		uint64_t lo;

		if (only != UINT32_MAX && i != only)
			continue;
		/* A connection the daemon ended (a restart, soak.sh
		 * --restart-every) breaks like a kill: its client read to the
		 * end, but a fire due just before may never have been written. */
		if (c->open)
			continue;
		/* A SIGKILL takes a moment to close the client's socket: the
		 * daemon may still write a fire due just after the kill was
		 * recorded into it, and the kernel drops it with the socket. */
		if (d > c->end + (c->end_kind == SR_KILL ? KILL_LAG_NS : 0))
			continue;
		lo = c->end > m->grace_ns ? c->end - m->grace_ns : 0;
		if (d >= lo)
			return 1;
		if (c->pause_open && c->pause_open < c->end &&
		    d + m->grace_ns >= c->pause_open)
			return 2;
		/* Or one that ended within the grace before the break: the
		 * client was still reading what the pause let pile up in its
		 * socket (seed 11: 1,039 fires read in the 2 ms between the
		 * resume and the kill, the next 198 lost with the socket). */
		if (c->last_resume && c->last_resume <= c->end &&
		    c->end - c->last_resume <= m->grace_ns &&
		    d + m->grace_ns >= c->last_pause)
			return 2;
		if (c->fires < c->queued) {
			/* Cut short in its queue: what came due while it was
			 * detached was on the wire. */
			uint64_t prev = i > 0 ? m->conns[i - 1].end : 0;

			if (d + m->grace_ns >= prev)
				return 3;
		}
	}
	return 0;
}

static bool excuse(struct soak_model *m, unsigned only, uint64_t d)
{
	int why = in_flight(m, only, d);

	if (why)
		m->tally->excused_why[why - 1]++;
	return why != 0;
}

/* ---- named sessions: every journal's fires against the timers ---------- */

/* A fire's copies in the order they were received (CLOCK_MONOTONIC is
 * one clock for every process). */
static int obs_cmp(const void *a, const void *b)
{
	const struct soak_obs *x = a, *y = b;

	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	if (x->cnt != y->cnt)
		return x->cnt < y->cnt ? -1 : 1;
	if (x->recv != y->recv)
		return x->recv < y->recv ? -1 : 1;
	return x->slot != y->slot ? (x->slot < y->slot ? -1 : 1) :
	       x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Whether one of group's Kicks may have moved a fire back between lo
 * (a copy's fired_at: it was handed out after) and hi (the next copy's
 * receipt). */
static bool kicked_between(const struct soak_obsvec *ov, unsigned group,
			   uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < ov->nkicks; i++) {
		const struct soak_kick *k = &ov->kicks[i];

		if (k->group == group && k->t0 < hi && k->t1 > lo)
			return true;
	}
	return false;
}

/* A Touch kept copy y (touched until y->touch_by) from being taken back:
 * no other copy x may come before then unless y's connection ended
 * first (a closed or broken connection gives its fires back at once). */
static void check_touched(struct soak_model *models, struct soak_model *m,
			  const struct soak_obs *y, const struct soak_obs *x)
{
	const struct soak_model *ym = &models[y->slot];
	const struct soak_conn *c = y->conn < ym->nconns ? &ym->conns[y->conn] : NULL;

	if (x->recv >= y->touch_by)
		return;
	if (c && !c->open && (c->end_kind == SR_CLOSED ||
			      c->end <= x->recv + (c->end_kind == SR_KILL ? 0 : KILL_LAG_NS)))
		return;
	viol(m, "fire %" PRIu64 " of %#" PRIx64 " touched by slot %u until %"
	     PRIu64 ", yet slot %u received it again at %" PRIu64
	     " (%.1f ms before) while the toucher held it", x->cnt, x->uid,
	     y->slot, y->touch_by, x->slot, x->recv,
	     (double)(y->touch_by - x->recv) / 1e6);
}

/*
 * Whether a copy's receipt orders it among the fire's hand-outs.  A
 * consumer without an ack timeout holds what it was handed until it
 * acknowledges or releases it, or its connection ends (and then reads
 * none of it), so it receives each copy before the next hand-out.  The
 * consumer-only slot's ack timeout takes back what it has not
 * acknowledged within a second, while the copy may still sit unread in
 * its socket (a pause, a slow fire): read after the next hand-out, it is
 * stale.  Unless its Release or Touch found it still in flight.
 */
static bool obs_ordered(const struct soak_obs *x)
{
	return x->slot % 4 != SOAK_CONSUMER || x->rel == REL_BACK ||
	       x->rel == REL_DEAD || x->touch_by;
}

/*
 * Every copy of one fire (uid, fire_count), in receipt order, o[0..n):
 * at most one unmarked hand-out, plus one after each Release (which
 * gives the fire back knowingly and so does not mark it); Fired.deliveries
 * never goes down except after a Kick; a released fire comes again, not
 * before its ready time, counted on; a dead letter reached its origin's
 * limit; a touched fire is not taken back before its new deadline; and a
 * fire whose last copy was released (or whose release's outcome was lost)
 * must come again, or it is lost.
 */
static void settle_history(struct soak_model *models, struct soak_model *m,
			   const struct soak_obsvec *ov, const struct soak_obs *o,
			   size_t n)
{
	struct soak_tally *ty = m->tally;
	unsigned group = SOAK_UID_SLOT(o[0].uid) / 4;
	uint32_t limit = group < sizeof ov->max_deliveries /
			 sizeof ov->max_deliveries[0] ? ov->max_deliveries[group] : 0;
	const struct soak_obs *prev = NULL, *last = NULL;
	unsigned tokens = 1, unmarked = 0, walk = 1;
	bool touched = false;

	/* Touches are rare, and a fire that always fails has hundreds of
	 * copies in a long run: the quadratic look only where one is. */
	for (size_t i = 0; i < n && !touched; i++)
		touched = o[i].touch_by != 0;
	for (size_t i = 0; i < n; i++) {
		const struct soak_obs *x = &o[i];
		bool marked = x->flags & SFF_REDELIVERED;

		if (!marked)
			unmarked++;
		if (!obs_ordered(x))
			goto counted;
		for (size_t k = 0; touched && k < i; k++)
			if (o[k].touch_by &&
			    (o[k].slot != x->slot || o[k].conn != x->conn))
				check_touched(models, m, &o[k], x);
		if (x->flags & SFF_DEAD) {
			ty->dead_letters++;
			if (!prev)
				ty->dead_unseen++;
			if (!(x->flags & SFF_DL_ORIGIN))
				viol(m, "dead letter %#" PRIx64 " (count %" PRIu64
				     ") does not name its origin session",
				     x->uid, x->cnt);
			if (limit && x->dl_deliveries < limit)
				viol(m, "dead letter %#" PRIx64 " (count %" PRIu64
				     ") after %" PRIu32 " deliveries, its session's "
				     "limit %" PRIu32, x->uid, x->cnt,
				     x->dl_deliveries, limit);
			if (prev && x->dl_deliveries < prev->deliveries &&
			    !kicked_between(ov, group, prev->f, x->recv))
				viol(m, "dead letter %#" PRIx64 " (count %" PRIu64
				     ") after %" PRIu32 " deliveries, handed out "
				     "the %" PRIu32 "th time before", x->uid,
				     x->cnt, x->dl_deliveries, prev->deliveries);
		} else if (prev) {
			bool kicked = kicked_between(ov, group, prev->f, x->recv);

			if (x->deliveries < prev->deliveries) {
				if (kicked)
					ty->kicked_seen++;
				else
					viol(m, "fire %" PRIu64 " of %#" PRIx64 ": "
					     "deliveries went down %" PRIu32 " -> %"
					     PRIu32 " with no Kick", x->cnt, x->uid,
					     prev->deliveries, x->deliveries);
			}
			if (prev->rel == REL_BACK && prev == last) {
				ty->released_again++;
				if (marked)
					ty->released_again_marked++;
				if (x->recv < prev->rel_ready)
					viol(m, "released fire %" PRIu64 " of %#"
					     PRIx64 " came again at %" PRIu64 ", "
					     "before its ready time %" PRIu64,
					     x->cnt, x->uid, x->recv, prev->rel_ready);
				if (x->deliveries <= prev->rel_deliveries && !kicked)
					viol(m, "released fire %" PRIu64 " of %#"
					     PRIx64 " came again with deliveries %"
					     PRIu32 ", released at %" PRIu32,
					     x->cnt, x->uid, x->deliveries,
					     prev->rel_deliveries);
			}
		}
		/* In hand-out order, an unmarked copy needs the first
		 * hand-out or a Release since. */
		if (!marked && walk)
			walk--;
		else if (!marked)
			viol(m, "DUPLICATE: fire %" PRIu64 " of %#" PRIx64
			     " (deadline %" PRIu64 ") received unmarked at %"
			     PRIu64 " by slot %u, after an unmarked copy and "
			     "no Release since", x->cnt, x->uid, x->d, x->recv,
			     x->slot);
		if (!(x->flags & SFF_DEAD))
			prev = x;
		last = x;
counted:
		switch (x->rel) {
		case REL_BACK:
		case REL_DEAD:
			if (x->rel_deliveries != x->deliveries)
				viol(m, "Release of fire %" PRIu64 " of %#" PRIx64
				     " says %" PRIu32 " deliveries, Fired said %"
				     PRIu32, x->cnt, x->uid, x->rel_deliveries,
				     x->deliveries);
			if (limit && (x->rel == REL_DEAD) !=
			    (x->rel_deliveries >= limit))
				viol(m, "Release of fire %" PRIu64 " of %#" PRIx64
				     " at %" PRIu32 " deliveries %s, the limit "
				     "%" PRIu32, x->cnt, x->uid, x->rel_deliveries,
				     x->rel == REL_DEAD ? "dead-lettered it" :
				     "gave it back", limit);
			/* fall through */
		case REL_SENT:
			tokens++;       /* it comes again unmarked */
			walk++;
			break;
		default:
			break;
		}
	}
	/* And in all, stale copies too. */
	if (unmarked > tokens)
		viol(m, "DUPLICATE: fire %" PRIu64 " of %#" PRIx64 " (deadline %"
		     PRIu64 ") handled %u times without the redelivered mark, "
		     "given back unmarked %u times", o[0].cnt, o[0].uid, o[0].d,
		     unmarked, tokens - 1);
	/* The last copy in hand-out order, and the last received (a stale
	 * one's Release finds it gone, and says nothing of what became of
	 * it; one received after it may be stale, a weaker check). */
	if (last && last == &o[n - 1] &&
	    (last->rel == REL_SENT || last->rel == REL_BACK ||
	     last->rel == REL_DEAD)) {
		ty->lost_released++;
		loss(m, "fire %" PRIu64 " of %#" PRIx64 " (deadline %" PRIu64
		     ") given back (release %u, deliveries %" PRIu32 ") at %"
		     PRIu64 ", never came again", last->cnt, last->uid, last->d,
		     last->rel, last->deliveries, last->recv);
	}
}

/* One fire of t (its first copy o), in fire-count order. */
static void settle_one(struct soak_model *m, struct soak_timer *t,
		       const struct soak_obs *o)
{
	struct soak_tally *ty = m->tally;
	uint64_t d = o->d, f = o->f, cnt = o->cnt;

	t->fires++;
	if (t->fire1_pos == 0)
		t->fire1_pos = o->pos;
	if (!(t->flags & SF_PERIODIC)) {
		if (cnt != 0)
			viol(m, "oneshot %#" PRIx64 " fired with count %" PRIu64,
			     t->uid, cnt);
		if (t->was_acked && d != t->deadline)
			viol(m, "fire of %#" PRIx64 " for deadline %" PRIu64
			     ", acknowledged %" PRIu64, t->uid, d, t->deadline);
		if ((t->flags & SF_ABS) && d != t->when)
			viol(m, "fire of %#" PRIx64 " for deadline %" PRIu64
			     ", asked %" PRIu64, t->uid, d, t->when);
		if (t->st == TS_CANCELLED || t->st == TS_REPLACED)
			viol(m, "oneshot %#" PRIx64 " fired at %" PRIu64 ", yet a "
			     "reply at %" PRIu64 " found it pending and took it",
			     t->uid, f, t->end_t);
		if (t->st == TS_LIVE || t->st == TS_VANISHED)
			t->st = TS_FIRED;
		return;
	}
	/* Periodic: fire counts 1, 2, 3, ..., deadlines first + k * period,
	 * a skip only after falling a whole period behind. */
	uint64_t d0 = t->was_acked ? t->deadline :
		      (t->flags & SF_ABS) ? t->when : 0;
	uint64_t gap;

	if (cnt == 0) {
		viol(m, "periodic %#" PRIx64 " fired with count 0", t->uid);
		return;
	}
	if (d0 && (d < d0 || (d - d0) % t->period != 0))
		viol(m, "periodic %#" PRIx64 " fired for %" PRIu64
		     ", not in its sequence %" PRIu64 " + k*%" PRIu64,
		     t->uid, d, d0, t->period);
	gap = cnt - t->last_count - 1;
	if (t->last_count == 0 && gap == 0 && d0 && d != d0)
		viol(m, "periodic %#" PRIx64 " first fire for %" PRIu64
		     ", first deadline %" PRIu64, t->uid, d, d0);
	if (t->last_count > 0 && gap == 0) {
		if (d <= t->last_deadline)
			viol(m, "periodic %#" PRIx64 " deadline went back", t->uid);
		else if (d <= t->last_fired)
			viol(m, "periodic %#" PRIx64 " fired again for %" PRIu64
			     ", already past when it fired at %" PRIu64
			     " (a catch-up fire, no skip)", t->uid, d, t->last_fired);
		else if (d != t->last_deadline + t->period) {
			/* A restart skips the periods it missed: the late
			 * fire (PROTOCOL.md section 8, Daemon restart). */
			if (d - t->period > t->last_fired && !(o->flags & SFF_LATE))
				viol(m, "periodic %#" PRIx64 " skipped to %" PRIu64
				     " though it fired %" PRIu64 " at %" PRIu64,
				     t->uid, d, t->last_deadline, t->last_fired);
			else
				ty->skips += (d - t->last_deadline) / t->period - 1;
		}
	}
	if (gap > 0) {
		/* A fire of a named session is acknowledged only once a
		 * consumer journaled it: a missing count is lost. */
		ty->lost_periodic += gap;
		loss(m, "periodic %#" PRIx64 ": fire count jumped %" PRIu64
		     " -> %" PRIu64 " (no consumer journaled the fires between)",
		     t->uid, t->last_count, cnt);
	}
	t->last_count = cnt;
	t->last_deadline = d;
	t->last_fired = f;
	t->last_pos = o->pos;
}

void soak_settle_fires(struct soak_model *models, unsigned n,
		       struct soak_obsvec *ov, struct soak_tally *ty)
{
	if (ov->n)
		qsort(ov->v, ov->n, sizeof ov->v[0], obs_cmp);
	for (size_t i = 0, j; i < ov->n; i = j) {
		uint64_t uid = ov->v[i].uid;
		unsigned owner = SOAK_UID_SLOT(uid);
		struct soak_model *m = owner < n && models[owner].named ?
				       &models[owner] : NULL;
		struct soak_timer *t = m ? soak_timer_get(m, uid) : NULL;

		for (j = i; j < ov->n && ov->v[j].uid == uid; j++)
			;
		if (!t) {
			viol(&models[ov->v[i].slot], "fire of key %#" PRIx64
			     " names no timer its session's producers sent (uid %#"
			     PRIx64 ")", ov->v[i].key, uid);
			continue;
		}
		for (size_t k = i, e; k < j; k = e) {
			const struct soak_obs *o = &ov->v[k];

			for (e = k; e < j && ov->v[e].cnt == o->cnt; e++) {
				const struct soak_obs *x = &ov->v[e];

				if (x->d != o->d || x->f != o->f)
					viol(m, "two copies of %#" PRIx64 "'s fire %"
					     PRIu64 " differ: deadline %" PRIu64 "/%"
					     PRIu64 ", fired_at %" PRIu64 "/%" PRIu64,
					     uid, o->cnt, o->d, x->d, o->f, x->f);
				if (x->key != t->key)
					viol(m, "fire of uid %#" PRIx64 " carries key %#"
					     PRIx64 ", scheduled as %#" PRIx64, uid,
					     x->key, t->key);
				if (x->f > t->end_t)
					viol(m, "fire of %#" PRIx64 " (count %" PRIu64
					     ") fired at %" PRIu64 ", after the reply "
					     "at %" PRIu64 " that cancelled or replaced "
					     "it", uid, x->cnt, x->f, t->end_t);
				if (t->was_acked && x->slot == m->slot &&
				    x->conn == t->conn && x->pos < t->ack_pos)
					viol(m, "%#" PRIx64 " fired before its "
					     "ScheduleReply on the connection that "
					     "scheduled it", uid);
			}
			ty->named_handled_once++;
			ty->named_repeats += (e - k) - 1;
			settle_history(models, m, ov, o, e - k);
			settle_one(m, t, o);
		}
	}
}

static void finish_oneshot(struct soak_model *m, struct soak_timer *t)
{
	struct soak_tally *ty = m->tally;
	unsigned only = m->named ? UINT32_MAX : t->conn;

	if (t->fires)
		return;
	if (!m->named && t->conn < m->nconns &&
	    !m->conns[t->conn].open && t->deadline > m->conns[t->conn].end) {
		ty->died_with_conn++;   /* documented: dies with its connection */
		return;
	}
	/* A named session's fire is redelivered until a consumer that
	 * journaled it acknowledges it: nothing to excuse. */
	if (!m->named && excuse(m, only, t->deadline)) {
		ty->inflight_excused++;
		return;
	}
	ty->lost++;
	loss(m, "oneshot %#" PRIx64 " key %#" PRIx64 " deadline %" PRIu64
	     " acknowledged, never fired (state %d)", t->uid, t->key,
	     t->deadline, t->st);
}

static void finish_periodic(struct soak_model *m, struct soak_timer *t,
			    uint64_t t_stop)
{
	struct soak_tally *ty = m->tally;
	unsigned only = m->named ? UINT32_MAX : t->conn;
	uint64_t next, p = t->period;

	if (!t->was_acked || !p)
		return;
	if (t->last_count == 0) {
		next = t->deadline;
	} else {
		next = t->last_deadline + p;
		if (t->last_fired >= next)
			next += ((t->last_fired - next) / p + 1) * p;
	}
	if (next + m->grace_ns >= t_stop)
		return;
	if (!m->named && excuse(m, only, next)) {
		ty->periodic_gaps_excused++;
		return;
	}
	ty->lost_periodic++;
	loss(m, "periodic %#" PRIx64 " (period %" PRIu64 " ms, %u fires) due "
	     "again at %" PRIu64 ", stopped at %" PRIu64 " without that fire",
	     t->uid, p / MS, t->fires, next, t_stop);
}

void soak_finish(struct soak_model *m)
{
	struct soak_tally *ty = m->tally;

	for (unsigned i = 0; i < m->nincs; i++) {
		for (uint32_t s = 1; s < m->incs[i].n; s++) {
			struct soak_timer *t = &m->incs[i].t[s];
			bool per;
			uint64_t stop;

			if (!t->uid)
				continue;
			per = t->flags & SF_PERIODIC;
			switch (t->st) {
			case TS_REFUSED:
				break;
			case TS_INTENT:
			case TS_MAYBE:
				ty->unknown++;
				if (t->fires)
					ty->unknown_fired++;
				break;
			case TS_FIRED:
				ty->fired_once++;
				break;
			case TS_CANCELLED:
			case TS_REPLACED:
				if (t->st == TS_CANCELLED)
					ty->cancelled++;
				else
					ty->replaced++;
				if (per)
					finish_periodic(m, t, t->t_stop);
				break;
			case TS_VANISHED:
				if (!per) {
					finish_oneshot(m, t);
				} else if (!m->named && t->conn < m->nconns &&
					   !m->conns[t->conn].open) {
					finish_periodic(m, t, m->conns[t->conn].end);
				} else {
					ty->lost_periodic++;
					loss(m, "periodic %#" PRIx64 " gone without "
					     "a cancel", t->uid);
				}
				break;
			case TS_LIVE:
				if (!per) {
					finish_oneshot(m, t);
					break;
				}
				if (!m->named && t->conn < m->nconns &&
				    !m->conns[t->conn].open) {
					stop = m->conns[t->conn].end;
				} else {
					ty->left_pending++;
					stop = m->last_t;
				}
				finish_periodic(m, t, stop);
				break;
			}
		}
	}
}

/* ======================================================================
 * A client process.
 * ==================================================================== */

enum { E_SENT = 1, E_LIVE, E_BUSY, E_DEAD };

struct ent {
	uint64_t key, old;      /* old: the timer a replace aims at       */
	uint64_t deadline;
	uint64_t period;
	uint64_t stop_at;       /* named periodic: cancel it then         */
	uint32_t conn;
	int32_t li;             /* index in the live list, -1 none        */
	uint16_t fires, target;
	uint8_t st;
	bool periodic;
};

struct keyvec {
	uint64_t *v;
	size_t n, cap;
};

static struct client {
	unsigned slot;
	uint16_t inc;
	bool named;
	int role;               /* SOAK_*                                  */
	bool manual;            /* a consumer that acknowledges            */
	bool have_last;         /* last: journaled, not yet acknowledged   */
	struct bwc_fire last;
	bool drain;             /* the parent's end-of-run drain: handles
				   every fire, releases none              */
	/* A slow fire (the consumer-only slot): touched, then handled for
	 * longer than the ack timeout, then acknowledged; the fires
	 * journaled before it are acknowledged first (before). */
	bool slow_pending, have_before;
	struct bwc_fire slow, before;
	uint64_t slow_uid;
	struct { uint64_t key, uid, cnt; } rel[256]; /* Releases in flight */
	unsigned nrel;
	char session[96];
	char origin[80];        /* the session a dead letter should name   */
	int fd;                 /* the journal                             */
	struct bwc_client *c;
	bool ever_connected;
	uint64_t rs;
	struct ent *e;          /* by sequence number                      */
	uint32_t ne, cape;
	uint32_t *live;         /* sequence numbers of live timers         */
	uint32_t nlive, caplive;
	struct keyvec cleanup;  /* periodic keys whose fate is unknown     */
	struct keyvec old;      /* pending oneshots of earlier incarnations */
	uint64_t fired[64];     /* keys of timers that fired               */
	unsigned nfired;
	unsigned inflight;
	uint32_t conn;
	uint64_t max_deadline;
} C;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "bwsoak[slot %u inc %u]: ", C.slot, C.inc);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	_exit(3);
}

static void rec(int type, uint64_t key, uint64_t uid, uint64_t v0,
		uint64_t v1, uint64_t v2, uint64_t v3)
{
	struct soak_rec r = { .type = (uint16_t)type, .inc = C.inc,
			      .slot = C.slot, .t = load_now_ns(), .key = key,
			      .uid = uid, .v = { v0, v1, v2, v3 } };
	ssize_t n;

	do
		n = write(C.fd, &r, sizeof r);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof r)
		die("journal write: %s", n < 0 ? strerror(errno) : "short");
}

static bool keyvec_has(const struct keyvec *kv, uint64_t k)
{
	for (size_t i = 0; i < kv->n; i++)
		if (kv->v[i] == k)
			return true;
	return false;
}

static void keyvec_add(struct keyvec *kv, uint64_t k)
{
	if (keyvec_has(kv, k))
		return;
	if (kv->n == kv->cap) {
		size_t cap = kv->cap ? kv->cap * 2 : 64;
		uint64_t *p = realloc(kv->v, cap * sizeof *p);

		if (!p)
			die("out of memory");
		kv->v = p;
		kv->cap = cap;
	}
	kv->v[kv->n++] = k;
}

static struct ent *mine(uint64_t uid)
{
	if (SOAK_UID_SLOT(uid) != C.slot || SOAK_UID_INC(uid) != C.inc)
		return NULL;
	uint32_t seq = SOAK_UID_SEQ(uid);

	return seq && seq < C.ne ? &C.e[seq] : NULL;
}

static void live_add(uint32_t seq)
{
	if (C.nlive == C.caplive) {
		uint32_t cap = C.caplive ? C.caplive * 2 : 1024;
		uint32_t *p = realloc(C.live, cap * sizeof *p);

		if (!p)
			die("out of memory");
		C.live = p;
		C.caplive = cap;
	}
	C.e[seq].li = (int32_t)C.nlive;
	C.live[C.nlive++] = seq;
}

static void live_del(struct ent *e)
{
	uint32_t last;

	if (e->li < 0)
		return;
	last = C.live[--C.nlive];
	C.live[e->li] = last;
	C.e[last].li = e->li;
	e->li = -1;
}

/* A new anonymous session: the old one's timers are gone. */
static void live_clear(void)
{
	for (uint32_t i = 0; i < C.nlive; i++) {
		C.e[C.live[i]].st = E_DEAD;
		C.e[C.live[i]].li = -1;
	}
	C.nlive = 0;
}

static uint32_t ent_new(void)
{
	if (C.ne == 0)
		C.ne = 1;       /* sequence 0 is never used */
	if (C.ne >= C.cape) {
		uint32_t cap = C.cape ? C.cape * 2 : 4096;
		struct ent *p = realloc(C.e, cap * sizeof *p);

		if (!p)
			die("out of memory");
		C.e = p;
		C.cape = cap;
	}
	memset(&C.e[C.ne], 0, sizeof C.e[0]);
	C.e[C.ne].li = -1;
	return C.ne++;
}

/* A periodic timer whose end the client can no longer see to: cancel its
 * key later (a named session keeps it). */
static void lost_track(struct ent *e)
{
	if (C.named && e->periodic)
		keyvec_add(&C.cleanup, e->key);
}

static void on_cancel(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	uint64_t uid = (uintptr_t)arg;
	struct ent *e = mine(uid);

	(void)c;
	C.inflight--;
	if (r->status == 0) {
		rec(SR_CANCEL_OK, r->key, uid, r->pending, 0, 0, 0);
		if (e)
			e->st = E_DEAD;
		return;
	}
	rec(SR_CANCEL_ERR, r->key, uid, (uint64_t)(int64_t)r->status,
	    (uint64_t)r->server_error, 0, 0);
	if (e) {
		e->st = E_DEAD;
		lost_track(e);
	} else if (C.named) {
		keyvec_add(&C.cleanup, r->key);
	}
}

static void send_cancel(uint64_t key, uint64_t uid)
{
	int rc;

	rec(SR_CANCEL, key, uid, 0, 0, 0, 0);
	rc = bwc_send_cancel(C.c, key, on_cancel, (void *)(uintptr_t)uid);
	if (rc != 0) {
		struct ent *e = mine(uid);

		/* v2 = 1: nothing was sent; try again later. */
		rec(SR_CANCEL_ERR, key, uid, (uint64_t)(int64_t)rc, 0, 1, 0);
		if (e && e->periodic) {
			e->st = E_DEAD;
			lost_track(e);
		} else if (e && e->st == E_BUSY) {
			e->st = E_LIVE;
			live_add((uint32_t)(e - C.e));
		} else if (!e && C.named) {
			keyvec_add(&C.cleanup, key);
		}
		return;
	}
	C.inflight++;
}

static void on_sched(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	uint64_t uid = (uintptr_t)arg;
	struct ent *e = mine(uid), *old = NULL;

	(void)c;
	C.inflight--;
	if (e && e->old)
		old = mine(e->old);
	if (r->status == 0) {
		rec(SR_SCHED_OK, r->key, uid, r->scheduled.deadline_ns,
		    r->scheduled.replaced, 0, 0);
		if (old)
			old->st = E_DEAD;
		if (!e)
			return;
		e->deadline = r->scheduled.deadline_ns;
		if (!e->periodic && e->deadline > C.max_deadline)
			C.max_deadline = e->deadline;
		/* A named session's fires go to any of its consumers, so a
		 * producer stops a periodic timer by the clock: after about
		 * `target` fires. */
		if (e->periodic && C.named)
			e->stop_at = e->deadline + (uint64_t)(e->target - 1) * e->period +
				     e->period / 2;
		if (e->st == E_SENT) {
			e->st = E_LIVE;
			if (C.named || e->conn == C.conn)
				live_add((uint32_t)(e - C.e));
		}
		return;
	}
	rec(SR_SCHED_ERR, r->key, uid, (uint64_t)(int64_t)r->status,
	    (uint64_t)r->server_error, 0, 0);
	if (!e)
		return;
	e->st = E_DEAD;
	if (r->status != BWC_ESERVER) {
		lost_track(e);
		if (old) {
			old->st = E_DEAD;
			lost_track(old);
		}
	} else if (old && old->st == E_BUSY) {
		/* A refused replace leaves the old timer as it was. */
		old->st = E_LIVE;
		live_add((uint32_t)(old - C.e));
	}
}

static int send_sched(uint64_t key, bool periodic, bool abs, uint64_t when,
		      uint64_t period, unsigned flags, uint16_t target,
		      uint64_t old)
{
	unsigned char pl[80];
	uint32_t seq = ent_new();
	uint64_t uid = SOAK_UID(C.slot, C.inc, seq);
	struct ent *e = &C.e[seq];
	struct bwc_timer t = { .absolute = abs, .when_ns = when,
			       .period_ns = periodic ? period : 0,
			       .payload = pl };
	int rc;

	if (!key)
		key = uid;
	t.key = key;
	t.payload_len = payload_make(uid, pl);
	t.replace = flags & SF_REPLACE;
	e->key = key;
	e->old = old;
	e->periodic = periodic;
	e->period = periodic ? period : 0;
	e->target = target;
	e->conn = C.conn;
	e->st = E_SENT;
	flags |= (periodic ? SF_PERIODIC : 0) | (abs ? SF_ABS : 0);
	rec(SR_SCHED, key, uid, when, periodic ? period : 0, flags, 0);
	rc = bwc_send_schedule(C.c, &t, on_sched, (void *)(uintptr_t)uid);
	if (rc != 0) {
		/* v2 = 1: the library refused it, nothing was sent. */
		rec(SR_SCHED_ERR, key, uid, (uint64_t)(int64_t)rc, 0, 1, 0);
		e->st = E_DEAD;
		if ((flags & SF_REPLACE) && (e = mine(old)) && e->st == E_BUSY) {
			e->st = E_LIVE;
			live_add((uint32_t)(e - C.e));
		}
		return rc;
	}
	C.inflight++;
	if (!periodic) {
		uint64_t d = abs ? when : load_now_ns() + when;

		if (d > C.max_deadline)
			C.max_deadline = d;
	}
	return 0;
}

static void on_release(struct bwc_client *c, const struct bwc_reply *r,
		       void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg % (sizeof C.rel / sizeof C.rel[0]);
	unsigned fl = 0;

	(void)c;
	if (r->status != 0)
		fl = SRL_ERROR;
	else
		fl = (r->released.released ? SRL_RELEASED : 0) |
		     (r->released.dead_lettered ? SRL_DEAD : 0);
	rec(SR_RELEASED, C.rel[i].key, C.rel[i].uid, C.rel[i].cnt, fl,
	    r->status ? (uint64_t)(int64_t)r->status : r->released.deliveries,
	    r->status ? 0 : r->released.ready_ns);
}

/*
 * A handler that fails (PROTOCOL.md section 8, "Fires that fail"): a
 * few fires fail every time (released each time, so they reach the
 * session's limit and are dead-lettered), a few fail twice and then
 * succeed, and any fire fails now and then; each is released with a
 * delay of up to 200 ms instead of being acknowledged.  In the
 * consumer-only slot an odd fire is slow: touched, then handled for
 * longer than the ack timeout (slow_work).  The choice for a fire
 * depends on the fire (uid, fire_count), not the consumer, so a failing
 * fire fails wherever it goes.
 */
static void handle_failing(const struct bwc_fire *f, uint64_t uid)
{
	uint64_t h = splitmix(uid ^ (f->fire_count * 0x9E3779B97F4A7C15ull));
	unsigned i;
	uint64_t delay;
	bool fail;
	int rc;

	if (h % 89 == 0)
		fail = true;
	else if (h % 89 == 1)
		fail = f->deliveries < 3;
	else
		fail = load_rand(&C.rs) % 100 < 2;
	if (!fail) {
		if (C.role == SOAK_CONSUMER && !C.slow_pending &&
		    load_rand(&C.rs) % 400 == 0) {
			rec(SR_TOUCH, f->key, uid, f->fire_count, 3 * SEC, 0, 0);
			C.slow = *f;
			C.slow_uid = uid;
			C.slow_pending = true;
		}
		return;
	}
	delay = h % 89 == 0 ? bwc_backoff(f->deliveries, 10 * MS, 200 * MS,
					  load_rand(&C.rs)) :
		load_rand(&C.rs) % 4 == 0 ? 0 : urand(&C.rs, 1, 200) * MS;
	i = C.nrel++;
	C.rel[i % (sizeof C.rel / sizeof C.rel[0])].key = f->key;
	C.rel[i % (sizeof C.rel / sizeof C.rel[0])].uid = uid;
	C.rel[i % (sizeof C.rel / sizeof C.rel[0])].cnt = f->fire_count;
	rec(SR_RELEASE, f->key, uid, f->fire_count, delay, f->delivery, 0);
	rc = bwc_send_release(C.c, f, delay, on_release, (void *)(uintptr_t)i);
	if (rc != 0)    /* nothing sent: still in flight, acknowledged */
		rec(SR_RELEASED, f->key, uid, f->fire_count,
		    SRL_UNSENT | SRL_ERROR, (uint64_t)(int64_t)rc, 0);
}

static void on_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	uint64_t uid = payload_uid(f->payload, f->payload_len);
	struct ent *e = uid ? mine(uid) : NULL;
	const struct bwc_dead_letter *dl = &f->dead_letter;
	unsigned fl = (f->late ? SFF_LATE : 0) |
		      (f->redelivered ? SFF_REDELIVERED : 0) |
		      (dl->present ? SFF_DEAD : 0) |
		      (dl->present && dl->session &&
		       strcmp(dl->session, C.origin) == 0 ? SFF_DL_ORIGIN : 0);

	(void)c;
	(void)arg;
	/* Journaled (handled) first; acknowledged after the dispatch. */
	rec(SR_FIRE, f->key, uid, f->deadline_ns, f->fired_ns, f->fire_count,
	    SFF_PACK(fl, f->deliveries, dl->present ? dl->deliveries : 0));
	if (C.manual) {
		if (!C.slow_pending) {
			C.before = C.last;
			C.have_before = C.have_last;
		}
		C.last = *f;
		C.have_last = true;
		if (C.named && !C.drain && uid)
			handle_failing(f, uid);
	}
	if (!e)
		return;         /* another producer's, or an earlier incarnation's */
	if (!e->periodic) {
		live_del(e);
		e->st = E_DEAD;
		C.fired[C.nfired++ % 64] = e->key;
		return;
	}
	e->fires++;
	if (!C.named && e->fires >= e->target && e->st == E_LIVE &&
	    e->conn == C.conn) {
		live_del(e);
		e->st = E_BUSY;
		send_cancel(e->key, uid);
	}
}

/* Delays of 1 ms .. 2 s, log-uniform: short timers are the 1 ms lane's
 * hard case and long ones keep the wheel's upper gears busy. */
static uint64_t oneshot_delay(void)
{
	double u = (double)(load_rand(&C.rs) >> 11) / 9007199254740992.0;

	return (uint64_t)exp(log(1e6) + u * (log(2e9) - log(1e6)));
}

static void new_oneshot(uint64_t key, unsigned flags, uint64_t old)
{
	uint64_t delay = oneshot_delay();
	bool abs = load_rand(&C.rs) & 1;

	send_sched(key, false, abs, abs ? load_now_ns() + delay : delay, 0,
		   flags, 0, old);
}

static void new_periodic(uint64_t key, unsigned flags, uint64_t old)
{
	uint64_t period = urand(&C.rs, 50, 500) * MS;
	uint64_t first = urand(&C.rs, 1, 1000) * MS;
	bool abs = load_rand(&C.rs) & 1;

	send_sched(key, true, abs, abs ? load_now_ns() + first : first, period,
		   flags, (uint16_t)urand(&C.rs, 1, 8), old);
}

static struct ent *pick_live(void)
{
	return C.nlive ? &C.e[C.live[load_rand(&C.rs) % C.nlive]] : NULL;
}

static void do_op(void)
{
	unsigned r = (unsigned)(load_rand(&C.rs) % 100);
	struct ent *e;

	if (r < 55) {
		new_oneshot(0, 0, 0);
	} else if (r < 63) {
		new_periodic(0, 0, 0);
	} else if (r < 78) {
		if (!(e = pick_live())) {
			new_oneshot(0, 0, 0);
			return;
		}
		live_del(e);
		e->st = E_BUSY;
		send_cancel(e->key, SOAK_UID(C.slot, C.inc, e - C.e));
	} else if (r < 88) {
		if (!(e = pick_live())) {
			new_periodic(0, 0, 0);
			return;
		}
		live_del(e);
		e->st = E_BUSY;
		if (load_rand(&C.rs) % 5)
			new_oneshot(e->key, SF_REPLACE, SOAK_UID(C.slot, C.inc, e - C.e));
		else
			new_periodic(e->key, SF_REPLACE, SOAK_UID(C.slot, C.inc, e - C.e));
	} else if (r < 90) {
		/* The key is pending: DUPLICATE_KEY, unless it fires first. */
		if (!(e = pick_live()) || e->periodic)
			new_oneshot(0, 0, 0);
		else
			new_oneshot(e->key, SF_DUP, 0);
	} else if (r < 95) {
		/* A key gone by now (fired) or held from an earlier
		 * incarnation: both are plain cancels to the daemon. */
		if (C.old.n) {
			size_t i = load_rand(&C.rs) % C.old.n;
			uint64_t k = C.old.v[i];

			C.old.v[i] = C.old.v[--C.old.n];
			send_cancel(k, k);
		} else if (C.nfired) {
			uint64_t k = C.fired[load_rand(&C.rs) % (C.nfired < 64 ? C.nfired : 64)];

			send_cancel(k, k);
		}
	} else {
		new_oneshot(0, 0, 0);
	}
}

static void connect_loop(void);

/* One cumulative Ack for the fires journaled since the last one. */
static void ack_handled(void)
{
	int rc;

	if (!C.have_last)
		return;
	rc = bwc_send_ack(C.c, &C.last, true);
	if (rc == BWC_EAGAIN)
		return;         /* the next batch's covers these */
	rec(SR_ACK, C.last.key, 0, C.last.delivery, (uint64_t)(int64_t)rc, 0, 0);
	C.have_last = false;
}

/*
 * The slow fire: what came before it is acknowledged, it is touched for
 * 3 s, handled for 1.5 s (longer than the slot's 1 s ack timeout, and
 * everything else waits meanwhile), then acknowledged with the rest.
 */
static void slow_work(void)
{
	bool touched = false;
	uint64_t by = 0;
	int rc;

	C.slow_pending = false;
	if (C.have_before) {
		rc = bwc_send_ack(C.c, &C.before, true);
		rec(SR_ACK, C.before.key, 0, C.before.delivery,
		    (uint64_t)(int64_t)rc, 0, 0);
		C.have_before = false;
	}
	rc = bwc_touch(C.c, &C.slow, 3 * SEC, &touched, &by);
	rec(SR_TOUCHED, C.slow.key, C.slow_uid, C.slow.fire_count,
	    rc ? SRL_ERROR : touched ? SRL_TOUCHED : 0,
	    rc ? (uint64_t)(int64_t)rc : by, 0);
	if (rc == 0 && touched)
		load_sleep_until(load_now_ns() + 1500 * MS);
	ack_handled();
}

/* Read what the socket holds and acknowledge what was journaled. */
static int dispatch(void)
{
	int rc = bwc_dispatch(C.c);

	/* What came during the Touch waits in the library: take it too. */
	while ((rc == 0 || rc == BWC_ENOMEM) && C.slow_pending) {
		slow_work();
		rc = bwc_dispatch(C.c);
	}
	if (rc == 0 || rc == BWC_ENOMEM) {
		ack_handled();
	} else {
		C.have_last = false;    /* they come again, marked */
		C.slow_pending = C.have_before = false;
	}
	return rc;
}

/* Read what is there (waiting up to timeout_ms), and reattach if the
 * connection went away under us. */
static void pump(int timeout_ms)
{
	struct pollfd pfd = { .fd = bwc_fd(C.c), .events = bwc_poll_events(C.c) };
	int rc;

	if (pfd.fd < 0) {
		/* The library closed it, a request finding it broken (a
		 * restart): journaled as a break like one dispatch finds,
		 * after the auto-ack fires it still holds from it (a
		 * manual-ack consumer's are dropped: they come again). */
		bwc_dispatch(C.c);
		rec(SR_CLOSED, 0, 0, (uint64_t)(int64_t)BWC_ECLOSED,
		    (uint64_t)bwc_server_error(C.c), 0, 0);
		if (!C.named)
			live_clear();
		connect_loop();
		return;
	}
	rc = poll(&pfd, 1, timeout_ms);
	if (rc < 0 && errno != EINTR)
		die("poll: %s", strerror(errno));
	if (rc <= 0)
		return;
	rc = dispatch();
	if (rc == 0 || rc == BWC_ENOMEM)
		return;
	rec(SR_CLOSED, 0, 0, (uint64_t)(int64_t)rc,
	    (uint64_t)bwc_server_error(C.c), 0, 0);
	if (!C.named)
		live_clear();
	connect_loop();
}

/* Wait, reading, until every reply is in (bounded). */
static void quiesce(uint64_t max_ns)
{
	uint64_t end = load_now_ns() + max_ns;

	while (C.inflight && load_now_ns() < end)
		pump(2);
}

static void connect_loop(void)
{
	uint64_t give_up = load_now_ns() + 20 * SEC;
	struct bwc_session_info si;

	for (;;) {
		uint64_t t0 = load_now_ns();
		int rc;

		rec(SR_DIAL, 0, 0, 0, 0, 0, 0);
		rc = C.ever_connected ? bwc_reconnect(C.c) :
			bwc_connect(C.c, cfg.socket, C.named ? C.session : NULL);
		if (rc == 0 && bwc_get_session_info(C.c, &si) == 0) {
			C.ever_connected = true;
			C.conn++;
			C.have_last = C.have_before = C.slow_pending = false;
			C.manual = si.role == BWC_ROLE_CONSUMER && !si.auto_ack;
			rec(SR_CONN, si.dropped, 0, t0, si.resumed, si.timers,
			    si.queued);
			/* The queue follows the Hello: take it now. */
			dispatch();
			return;
		}
		rec(SR_CONN_FAIL, 0, 0, (uint64_t)(int64_t)rc,
		    (uint64_t)bwc_server_error(C.c), 0, 0);
		if (load_now_ns() > give_up)
			die("cannot attach: %s", bwc_errmsg(C.c));
		load_sleep_until(load_now_ns() + 20 * MS);
	}
}

static void reconnect_on_purpose(void)
{
	quiesce(2 * SEC);
	dispatch();
	bwc_close(C.c);         /* writes the last ack first */
	rec(SR_CLOSE, 0, 0, 0, 0, 0, 0);
	bwc_dispatch(C.c);
	if (!C.named)
		live_clear();
	/* Detached for a while: a named session queues what comes due. */
	load_sleep_until(load_now_ns() +
			 urand(&C.rs, 0, C.named ? 1200 : 200) * MS);
	connect_loop();
}

static void pause_reading(void)
{
	uint64_t len = urand(&C.rs, 300, 2500) * MS, now = load_now_ns();

	/* A burst only where it lands on this slot's own reading: a
	 * producer is sent no fires. */
	if (cfg.burst && len > 500 * MS && (load_rand(&C.rs) & 1) &&
	    (C.role == SOAK_BOTH || C.role == SOAK_ANON)) {
		/* Enough fires due during the pause to fill the socket and
		 * leave some in the daemon's output buffer. */
		for (unsigned i = 0; i < cfg.burst; i++) {
			uint64_t d = now + urand(&C.rs, 150 * MS, len - 100 * MS);
			int rc = send_sched(0, false, true, d, 0, SF_BURST, 0, 0);

			if (rc == BWC_EAGAIN)
				pump(5);
			else if (rc != 0)
				break;
		}
		quiesce(2 * SEC);
	}
	rec(SR_PAUSE, 0, 0, len, 0, 0, 0);
	load_sleep_until(load_now_ns() + len);
	rec(SR_RESUME, 0, 0, 0, 0, 0, 0);
}

/* What the slot's earlier incarnations left in the named session. */
static void replay(const char *path)
{
	struct soak_model m = { .slot = C.slot, .named = true };

	if (soak_fold(path, &m) != 0)
		die("cannot read %s: %s", path, strerror(errno));
	for (unsigned i = 0; i < m.nincs; i++)
		for (uint32_t s = 1; s < m.incs[i].n; s++) {
			struct soak_timer *t = &m.incs[i].t[s];
			uint64_t bound;

			if (!t->uid || !(t->st == TS_LIVE || ambiguous(t->st)))
				continue;
			if (t->flags & SF_PERIODIC) {
				keyvec_add(&C.cleanup, t->key);
				continue;
			}
			bound = t->was_acked ? t->deadline :
				(t->flags & SF_ABS) ? t->when :
				t->t_intent + t->when + SEC;
			if (bound > C.max_deadline)
				C.max_deadline = bound;
			if (t->st == TS_LIVE && t->key == t->uid)
				keyvec_add(&C.old, t->key);
		}
	soak_model_free(&m);
}

/*
 * A named slot's producer never sees most of its fires (they go to any
 * consumer of the session): its periodic timers stop by the clock, and a
 * oneshot well past its deadline is taken as fired (for the choice of
 * keys only: the accounting knows from the consumers' journals).
 */
static void scan_live(uint64_t now)
{
	for (uint32_t i = C.nlive; i-- > 0;) {
		struct ent *e = &C.e[C.live[i]];

		if (e->periodic) {
			if (e->stop_at && now >= e->stop_at && e->st == E_LIVE) {
				live_del(e);
				e->st = E_BUSY;
				send_cancel(e->key, SOAK_UID(C.slot, C.inc, e - C.e));
			}
		} else if (e->deadline && now > e->deadline + 100 * MS) {
			live_del(e);
			e->st = E_DEAD;
			C.fired[C.nfired++ % 64] = e->key;
		}
	}
}

static void on_kick(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	(void)c;
	(void)arg;
	rec(SR_KICKED, 0, 0, r->status ? 0 : r->kicked,
	    r->status ? SRL_ERROR : r->more ? SRL_MORE : 0,
	    (uint64_t)(int64_t)r->status, 0);
}

/* Dead letters back to the session, every key: the fires that fail every
 * time come round again, counted from 1. */
static void send_kick(void)
{
	int rc;

	rec(SR_KICK, 0, 0, 0, 0, 0, 0);
	rc = bwc_send_kick(C.c, false, 0, 0, on_kick, NULL);
	if (rc != 0)
		rec(SR_KICKED, 0, 0, 0, SRL_ERROR | SRL_UNSENT,
		    (uint64_t)(int64_t)rc, 0);
}

static void flush_cleanup(void)
{
	struct keyvec kv = C.cleanup;

	C.cleanup = (struct keyvec){ 0 };
	for (size_t i = 0; i < kv.n; i++)
		send_cancel(kv.v[i], kv.v[i]);
	free(kv.v);
}

static void client_main(unsigned slot, unsigned inc)
{
	char path[512];
	uint64_t now, next_op, next_pause, next_reconnect, next_cleanup, next_kick;
	uint64_t next_scan = 0, interval = SEC / (cfg.rate ? cfg.rate : 1);

	C.slot = slot;
	C.inc = (uint16_t)inc;
	C.role = slot_role(slot);
	C.named = C.role != SOAK_ANON;
	C.rs = slot_seed(slot, inc);
	slot_session(slot, C.session, sizeof C.session);
	strcpy(C.origin, C.session);
	slot_path(slot, path, sizeof path);
	if (C.named && inc > 0)
		replay(path);
	C.fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (C.fd < 0)
		die("%s: %s", path, strerror(errno));
	rec(SR_START, 0, 0, (uint64_t)getpid(), C.rs, 0, 0);
	if (bwc_new(&C.c) != 0)
		die("out of memory");
	bwc_set_timeout(C.c, 5 * (int64_t)SEC);
	/* The slot reconnects itself (connect_loop) and journals each
	 * connection and each request the break left unanswered: the
	 * library's reconnecting would hide both from the accounting. */
	bwc_set_reconnect(C.c, false);
	if (C.role == SOAK_PRODUCER) {
		bwc_set_role(C.c, BWC_ROLE_PRODUCER);
	} else {
		/* Named sessions: manual acks, the default.  The consumer-only
		 * slot also lets the daemon take back what it holds for a
		 * second unacknowledged (its pauses run longer), and keeps a
		 * smaller window. */
		if (C.named)
			bwc_set_role(C.c, BWC_ROLE_CONSUMER);
		if (C.role == SOAK_CONSUMER) {
			bwc_set_window(C.c, 128);
			bwc_set_ack_timeout(C.c, CONSUMER_ACK_TIMEOUT_NS);
		}
		bwc_set_fire_handler(C.c, on_fire, NULL);
	}
	connect_loop();

	now = load_now_ns();
	if (now < cfg.t_start)
		load_sleep_until(cfg.t_start);
	now = load_now_ns();
	next_op = now;
	next_pause = now + urand(&C.rs, 4000, 20000) * MS;
	next_reconnect = now + urand(&C.rs, 3000, 15000) * MS;
	next_cleanup = now + urand(&C.rs, 0, 2000) * MS;
	next_kick = now + urand(&C.rs, 3000, 12000) * MS;
	while ((now = load_now_ns()) < cfg.t_end) {
		int wait;

		if (C.role == SOAK_BOTH && now >= next_kick) {
			send_kick();
			next_kick = now + urand(&C.rs, 3000, 12000) * MS;
		}

		if (now >= next_op) {
			if (C.role != SOAK_CONSUMER)
				do_op();
			next_op += interval / 2 + load_rand(&C.rs) % (interval + 1);
			if (next_op + 100 * MS < now)
				next_op = now;  /* fell behind: don't catch up */
		}
		if (C.named && now >= next_scan) {
			scan_live(now);
			next_scan = now + 20 * MS;
		}
		if (C.cleanup.n && now >= next_cleanup)
			flush_cleanup();
		if (now >= next_pause) {
			pause_reading();
			next_pause = load_now_ns() + urand(&C.rs, 6000, 20000) * MS;
		}
		if (now >= next_reconnect) {
			reconnect_on_purpose();
			next_reconnect = load_now_ns() + urand(&C.rs, 4000, 15000) * MS;
		}
		now = load_now_ns();
		wait = next_op > now ? (int)((next_op - now) / MS) : 0;
		pump(wait > 5 ? 5 : wait);
	}

	/* The end: stop every periodic timer, then wait out the deadlines
	 * (a consumer-only slot: every producer's, about). */
	uint64_t give_up = load_now_ns() + 60 * SEC;
	if (C.role == SOAK_CONSUMER && C.max_deadline < cfg.t_end + 3 * SEC)
		C.max_deadline = cfg.t_end + 3 * SEC;
	for (;;) {
		/* Backwards: live_del moves the last entry into the hole. */
		for (uint32_t i = C.nlive; i-- > 0;) {
			struct ent *e = &C.e[C.live[i]];

			if (!e->periodic)
				continue;
			live_del(e);
			e->st = E_BUSY;
			send_cancel(e->key, SOAK_UID(C.slot, C.inc, e - C.e));
		}
		if (C.cleanup.n)
			flush_cleanup();
		now = load_now_ns();
		if (!C.inflight && !C.cleanup.n &&
		    now >= C.max_deadline + 500 * MS)
			break;
		if (now > give_up)
			die("final drain: %u replies, %zu cancels outstanding",
			    C.inflight, C.cleanup.n);
		pump(5);
	}
	rec(SR_END, 0, 0, 0, 0, 0, 0);
	bwc_free(C.c);
	_exit(0);
}

/* ======================================================================
 * The parent.
 * ==================================================================== */

struct slot {
	pid_t pid;
	unsigned inc;
	bool named, done, failed;
	uint64_t restart_at;
	uint64_t seed0;
};

static struct slot slots[MAX_SLOTS];
static uint64_t rss_min = UINT64_MAX, rss_max, rss_last, rss_n;
static FILE *events;

static void event(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void event(const char *fmt, ...)
{
	va_list ap;
	double at = (double)((int64_t)(load_now_ns() - cfg.t_start)) / 1e9;

	if (events) {
		fprintf(events, "%9.3f ", at);
		va_start(ap, fmt);
		vfprintf(events, fmt, ap);
		va_end(ap);
		fputc('\n', events);
		fflush(events);
	}
	if (cfg.verbose) {
		printf("  %9.3f s  ", at);
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		putchar('\n');
		fflush(stdout);
	}
}

static pid_t spawn(unsigned slot)
{
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	if (events)
		fflush(events);
	pid = fork();
	if (pid < 0) {
		perror("bwsoak: fork");
		return -1;
	}
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		client_main(slot, slots[slot].inc);
	}
	slots[slot].pid = pid;
	event("start slot %u inc %u pid %ld seed %#" PRIx64, slot,
	      slots[slot].inc, (long)pid, slot_seed(slot, slots[slot].inc));
	return pid;
}

/* A record the parent writes into a slot's journal (r->slot's). */
static void journal_parent(const struct soak_rec *r)
{
	char path[512];
	int fd;

	slot_path(r->slot, path, sizeof path);
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, r, sizeof *r) != (ssize_t)sizeof *r) {
		fprintf(stderr, "bwsoak: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	close(fd);
}

static void journal_kill(unsigned slot, uint64_t t)
{
	journal_parent(&(struct soak_rec){ .type = SR_KILL,
		.inc = (uint16_t)slots[slot].inc, .slot = slot, .t = t });
}

static void sample_rss(void)
{
	uint64_t rss = load_proc_rss(cfg.daemon_pid);

	if (!rss)
		return;
	rss_last = rss;
	rss_n++;
	if (rss < rss_min)
		rss_min = rss;
	if (rss > rss_max)
		rss_max = rss;
}

/* Whether bitwheeld runs; with --daemon-pid-file, the one the file names
 * now (soak.sh --restart-every rewrites it).  *restarted: a new one. */
static bool daemon_alive(bool *restarted)
{
	*restarted = false;
	if (cfg.pid_file) {
		FILE *f = fopen(cfg.pid_file, "r");
		long pid = 0;

		if (f) {
			if (fscanf(f, "%ld", &pid) != 1)
				pid = 0;
			fclose(f);
		}
		if (pid > 0 && pid != cfg.daemon_pid) {
			*restarted = cfg.daemon_pid != 0;
			cfg.restarts += *restarted;
			cfg.daemon_pid = pid;
		}
	}
	return cfg.daemon_pid > 0 && kill((pid_t)cfg.daemon_pid, 0) == 0;
}

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* The parent's own anonymous connection, for Stats. */
static int get_stats(struct bwc_client **cp, struct bwc_stats *st)
{
	if (!*cp) {
		if (bwc_new(cp) != 0)
			return -1;
		bwc_set_timeout(*cp, 5 * (int64_t)SEC);
	}
	if (bwc_fd(*cp) < 0 && bwc_connect(*cp, cfg.socket, NULL) != 0)
		return -1;
	if (bwc_stats(*cp, st) != 0) {
		bwc_close(*cp);
		return -1;
	}
	return 0;
}

/* Read and acknowledge what comes, until 300 ms pass without any
 * (10 s at most). */
static void drain_read(void)
{
	uint64_t end = load_now_ns() + 10 * SEC, quiet = load_now_ns() + 300 * MS;

	while (load_now_ns() < end && load_now_ns() < quiet) {
		struct pollfd pfd = { .fd = bwc_fd(C.c), .events = POLLIN };

		if (pfd.fd < 0 || poll(&pfd, 1, 20) < 0)
			break;
		if (pfd.revents) {
			if (dispatch() != 0)
				break;
			quiet = load_now_ns() + 300 * MS;
		}
	}
}

/* The drain's consumer of session (the group's, or its dead-letter
 * session), journaling into slot's journal. */
static bool drain_attach(unsigned slot, const char *session)
{
	snprintf(C.session, sizeof C.session, "%s", session);
	C.ever_connected = false;
	if (bwc_new(&C.c) != 0)
		return false;
	bwc_set_timeout(C.c, 5 * (int64_t)SEC);
	bwc_set_role(C.c, BWC_ROLE_CONSUMER);
	bwc_set_fire_handler(C.c, on_fire, NULL);
	connect_loop();
	(void)slot;
	return true;
}

/* The fires the drain kicks back from each dead-letter session: some,
 * not all, so that both ends of the dead letters' way are read. */
#define DRAIN_KICK 3

/*
 * Attach each named session once more, as a consumer acknowledging what
 * it journals, and take what it queued; then kick a few of its dead
 * letters back and take them (counted from 1 again); then attach its
 * dead-letter session (NAME.dead) and take the rest, with their origin's
 * history.  slot: the group's first, whose journal gets the records.
 */
static void drain_named(unsigned slot)
{
	char path[512], dead[sizeof C.origin + 8];
	uint64_t kicked = 0;
	bool more = false;
	int rc;

	memset(&C, 0, sizeof C);
	C.slot = slot;
	C.inc = SOAK_INC_DRAIN;
	C.named = true;
	C.drain = true;
	C.role = SOAK_CONSUMER;
	slot_session(slot, C.origin, sizeof C.origin);
	snprintf(dead, sizeof dead, "%s.dead", C.origin);
	slot_path(slot, path, sizeof path);
	C.fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (C.fd < 0 || !drain_attach(slot, C.origin)) {
		fprintf(stderr, "bwsoak: drain of slot %u: cannot start\n", slot);
		return;
	}
	drain_read();
	rec(SR_KICK, 0, 0, DRAIN_KICK, 0, 0, 0);
	rc = bwc_kick(C.c, false, 0, DRAIN_KICK, &kicked, &more);
	rec(SR_KICKED, 0, 0, rc ? 0 : kicked,
	    rc ? SRL_ERROR : more ? SRL_MORE : 0, (uint64_t)(int64_t)rc, 0);
	dispatch();     /* what came during the Kick waits in the library */
	drain_read();
	rec(SR_END, 0, 0, 0, 0, 0, 0);
	bwc_free(C.c);
	if (drain_attach(slot, dead)) {
		drain_read();
		rec(SR_END, 0, 0, 0, 0, 0, 0);
		bwc_free(C.c);
	}
	close(C.fd);
	C.c = NULL;
}

/*
 * Before the run: every other group's session gets a small delivery
 * limit (3..5), so that fires that fail every time are dead-lettered
 * within a second or so; the others keep the daemon's default (20).
 * Journaled (SR_POLICY) in the group's first slot's journal.
 */
static int set_policies(uint64_t *rs)
{
	for (int i = 0; i < cfg.clients; i += 4) {
		struct bwc_client *c = NULL;
		struct bwc_policy pol;
		char name[80];
		int64_t want = (i / 4) % 2 == 0 ? (int64_t)urand(rs, 3, 5) :
			       BWC_POLICY_KEEP;

		if (!slot_named((unsigned)i))
			continue;
		slot_session((unsigned)i, name, sizeof name);
		if (bwc_new(&c) != 0)
			return -1;
		bwc_set_timeout(c, 5 * (int64_t)SEC);
		bwc_set_role(c, BWC_ROLE_PRODUCER);
		if (bwc_connect(c, cfg.socket, name) != 0 ||
		    bwc_set_policy(c, want, NULL, &pol) != 0) {
			fprintf(stderr, "bwsoak: policy of %s: %s\n", name,
				bwc_errmsg(c));
			bwc_free(c);
			return -1;
		}
		bwc_free(c);
		journal_parent(&(struct soak_rec){ .type = SR_POLICY,
			.slot = (uint32_t)i, .t = load_now_ns(),
			.v = { pol.max_deliveries } });
		printf("bwsoak: session %s: max_deliveries %" PRIu32 "%s\n", name,
		       pol.max_deliveries, pol.is_explicit ? "" : " (default)");
	}
	return 0;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static void lat_row(const char *what, const struct load_hist *h)
{
	printf("| %-44s | %9" PRIu64 " | %8.3f | %8.3f | %8.3f | %8.3f |\n",
	       what, h->count, ms(load_hist_quantile(h, 0.5)),
	       ms(load_hist_quantile(h, 0.99)), ms(load_hist_quantile(h, 0.999)),
	       ms(h->max));
}

static void row(const char *what, uint64_t n, const char *note)
{
	printf("| %-40s | %10" PRIu64 " | %s |\n", what, n, note);
}

static void usage(FILE *f)
{
	fputs("usage: bwsoak --socket PATH --daemon-pid PID|--daemon-pid-file FILE\n"
	      "              [--duration TIME]\n"
	      "              [--clients N] [--rate OPS/S] [--burst N]\n"
	      "              [--kill-every MS] [--grace-ms MS] [--dir DIR]\n"
	      "              [--verbose]\n"
	      "       bwsoak --account DIR [--clients N] [--grace-ms MS]\n"
	      "              (account again for the journals a run kept in DIR)\n"
	      "TIME: seconds, or a duration with a unit (90s, 5m); default 5m.\n"
	      "$BW_SOAK_SEED (a number) varies every random choice.\n", f);
}

static uint64_t num(const char *opt, const char *arg, uint64_t lo, uint64_t hi)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 0);
	if (errno || end == arg || *end || v < lo || v > hi) {
		fprintf(stderr, "bwsoak: --%s: '%s' is not a number in %" PRIu64
			"..%" PRIu64 "\n", opt, arg, lo, hi);
		exit(2);
	}
	return v;
}

static void parse_opts(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "daemon-pid", required_argument, NULL, 'P' },
		{ "daemon-pid-file", required_argument, NULL, 'F' },
		{ "duration", required_argument, NULL, 't' },
		{ "clients", required_argument, NULL, 'c' },
		{ "rate", required_argument, NULL, 'r' },
		{ "burst", required_argument, NULL, 'b' },
		{ "kill-every", required_argument, NULL, 'k' },
		{ "grace-ms", required_argument, NULL, 'g' },
		{ "dir", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "account", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env;
	int ch;

	cfg = (struct cfg){ .duration_ns = 300 * SEC, .clients = 8, .rate = 100,
			    .burst = 2000, .kill_every_ns = 3 * SEC,
			    .grace_ns = 250 * MS };
	while ((ch = getopt_long(argc, argv, "hv", lo, NULL)) != -1) {
		switch (ch) {
		case 's': cfg.socket = optarg; break;
		case 'P': cfg.daemon_pid = (long)num("daemon-pid", optarg, 1, 1u << 30); break;
		case 'F': cfg.pid_file = optarg; break;
		case 't':
			if (strspn(optarg, "0123456789") == strlen(optarg))
				cfg.duration_ns = num("duration", optarg, 1, 86400) * SEC;
			else if (bwc_parse_duration(optarg, &cfg.duration_ns) != 0 ||
				 cfg.duration_ns < SEC) {
				fprintf(stderr, "bwsoak: --duration: '%s' is not a "
					"duration of at least 1s\n", optarg);
				exit(2);
			}
			break;
		case 'c': cfg.clients = (int)num("clients", optarg, 1, MAX_SLOTS); break;
		case 'r': cfg.rate = num("rate", optarg, 1, 100000); break;
		case 'b': cfg.burst = (unsigned)num("burst", optarg, 0, 50000); break;
		case 'k': cfg.kill_every_ns = num("kill-every", optarg, 0, 3600000) * MS; break;
		case 'g': cfg.grace_ns = num("grace-ms", optarg, 0, 60000) * MS; break;
		case 'd': cfg.dir = optarg; break;
		case 'v': cfg.verbose = true; break;
		case 'A': cfg.dir = optarg; cfg.account_only = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc || (!cfg.socket && !cfg.account_only)) {
		usage(stderr);
		exit(2);
	}
	env = getenv("BW_SOAK_SEED");
	if (env && *env)
		cfg.env_seed = num("BW_SOAK_SEED", env, 0, UINT64_MAX);
	cfg.run_seed = splitmix(SOAK_FIXED_SEED ^ splitmix(cfg.env_seed));
}

int main(int argc, char **argv)
{
	static char dirbuf[] = "/tmp/bwsoak.XXXXXX";
	struct bwc_client *sc = NULL;
	struct bwc_stats st0 = { 0 }, st = { 0 };
	struct soak_tally *ty;
	uint64_t now, next_kill, next_rss, next_progress, progress_every,
		 hard_end, killrs, kills = 0;
	int64_t cpu0 = -1, cpu1 = -1;
	uint64_t gone_since = 0;
	unsigned nnamed = 0, failures = 0, running;
	bool daemon_died = false, have_stats = false;
	char fails[512] = "";

	parse_opts(argc, argv);
	cfg.parent = getpid();
	for (int i = 0; i < cfg.clients; i++)
		slots[i].named = slot_named((unsigned)i);
	if (cfg.account_only)
		goto account;
	if (!cfg.dir) {
		if (!mkdtemp(dirbuf)) {
			perror("bwsoak: mkdtemp");
			return 2;
		}
		cfg.dir = dirbuf;
	} else if (mkdir(cfg.dir, 0700) != 0 && errno != EEXIST) {
		fprintf(stderr, "bwsoak: %s: %s\n", cfg.dir, strerror(errno));
		return 2;
	}
	{
		char p[512];

		snprintf(p, sizeof p, "%s/events.log", cfg.dir);
		events = fopen(p, "w");
	}
	{
		bool restarted;

		if (cfg.pid_file && !daemon_alive(&restarted)) {
			fprintf(stderr, "bwsoak: %s names no running bitwheeld\n",
				cfg.pid_file);
			return 2;
		}
	}
	if (get_stats(&sc, &st0) != 0) {
		fprintf(stderr, "bwsoak: cannot reach bitwheeld at %s: %s\n",
			cfg.socket, sc ? bwc_errmsg(sc) : "out of memory");
		return 2;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	cpu0 = load_proc_cpu_ns(cfg.daemon_pid);
	killrs = slot_seed(MAX_SLOTS, 0);

	for (int i = 0; i < cfg.clients; i++) {
		slots[i].named = slot_named((unsigned)i);
		slots[i].seed0 = slot_seed((unsigned)i, 0);
		nnamed += slots[i].named;
	}
	printf("bwsoak: %.0f s against %s (daemon pid %ld), %d clients "
	       "(%u in named sessions, %u anonymous), %" PRIu64 " ops/s each, bursts of %u, "
	       "a kill every ~%.1f s\n",
	       (double)cfg.duration_ns / 1e9, cfg.socket, cfg.daemon_pid,
	       cfg.clients, nnamed, cfg.clients - nnamed, cfg.rate, cfg.burst,
	       (double)cfg.kill_every_ns / 1e9);
	printf("bwsoak: seed BW_SOAK_SEED=%" PRIu64 " -> run seed %#018" PRIx64
	       " (slot s, incarnation i: splitmix(run ^ splitmix(s<<20|i)))\n",
	       cfg.env_seed, cfg.run_seed);
	printf("bwsoak: slot seeds (P producer, B producer and consumer, C consumer, "
	       "A anonymous; named slots by fours share a session):");
	for (int i = 0; i < cfg.clients; i++)
		printf("%s %d%c=%#" PRIx64, i % 4 ? "" : "\n ", i,
		       "PBCA"[slot_role((unsigned)i)], slots[i].seed0);
	printf("\nbwsoak: journals and events.log in %s\n", cfg.dir);
	fflush(stdout);

	if (set_policies(&killrs) != 0)
		return 2;
	fflush(stdout);
	cfg.t_start = load_now_ns() + 300 * MS;
	cfg.t_end = cfg.t_start + cfg.duration_ns;
	hard_end = cfg.t_end + 120 * SEC;
	for (int i = 0; i < cfg.clients; i++)
		if (spawn((unsigned)i) < 0)
			return 2;

	next_kill = cfg.t_start + cfg.kill_every_ns;
	next_rss = cfg.t_start;
	progress_every = cfg.duration_ns >= 200 * SEC ? 30 * SEC :
			 cfg.duration_ns >= 40 * SEC ? 10 * SEC : 5 * SEC;
	next_progress = cfg.t_start + progress_every;
	for (;;) {
		int status;
		pid_t pid;

		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (int i = 0; i < cfg.clients; i++) {
				if (slots[i].pid != pid)
					continue;
				slots[i].pid = 0;
				slots[i].done = true;
				if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
					slots[i].failed = true;
					failures++;
					snprintf(fails + strlen(fails),
						 sizeof fails - strlen(fails),
						 " slot %d inc %u (%s %d)", i,
						 slots[i].inc,
						 WIFEXITED(status) ? "exit" : "signal",
						 WIFEXITED(status) ? WEXITSTATUS(status) :
						 WTERMSIG(status));
				}
				event("slot %d inc %u ended, status %#x", i,
				      slots[i].inc, status);
			}
		}
		now = load_now_ns();
		if (now >= next_rss) {
			bool restarted;

			next_rss += SEC;
			if (!daemon_alive(&restarted)) {
				/* A restart takes a moment; a death, longer. */
				if (!gone_since)
					gone_since = now;
				if (!cfg.pid_file || now - gone_since > 10 * SEC) {
					daemon_died = true;
					event("bitwheeld is gone");
					break;
				}
			} else {
				gone_since = 0;
			}
			if (restarted) {
				/* Its counters start from 0. */
				event("bitwheeld restarted: pid %ld", cfg.daemon_pid);
				st0 = (struct bwc_stats){ 0 };
				cpu0 = 0;
			}
			sample_rss();
		}
		if (now >= next_progress) {
			if (get_stats(&sc, &st) == 0)
				printf("  [%4.0f s] daemon RSS %6.2f MiB, kills %3" PRIu64
				       ", timers in %9" PRIu64 " fired %9" PRIu64
				       " pending %6" PRIu64 " queued %5" PRIu64
				       " dropped %" PRIu64 "\n",
				       (double)(now - cfg.t_start) / 1e9,
				       (double)rss_last / 1048576.0, kills,
				       st.oneshot.inserted + st.periodic.inserted -
				       st0.oneshot.inserted - st0.periodic.inserted,
				       st.oneshot.fired + st.periodic.fired -
				       st0.oneshot.fired - st0.periodic.fired,
				       st.oneshot.pending + st.periodic.pending,
				       st.queued, st.dropped);
			fflush(stdout);
			next_progress += progress_every;
		}
		if (interrupted || now > hard_end) {
			fprintf(stderr, "bwsoak: %s: stopping the clients\n",
				interrupted ? "interrupted" : "clients overran");
			for (int i = 0; i < cfg.clients; i++)
				if (slots[i].pid > 0) {
					kill(slots[i].pid, SIGKILL);
					waitpid(slots[i].pid, NULL, 0);
					slots[i].pid = 0;
				}
			if (interrupted)
				return 1;
			failures++;
			snprintf(fails + strlen(fails), sizeof fails - strlen(fails),
				 " clients overran the run by 120 s");
			break;
		}
		/* Kills stop a little before the end so that every slot's
		 * last incarnation runs the final drain. */
		if (cfg.kill_every_ns && now >= next_kill &&
		    now + 1500 * MS < cfg.t_end) {
			unsigned cand[MAX_SLOTS], n = 0;

			for (int i = 0; i < cfg.clients; i++)
				if (slots[i].pid > 0)
					cand[n++] = (unsigned)i;
			if (n) {
				unsigned s = cand[load_rand(&killrs) % n];
				uint64_t t = load_now_ns();

				int status = 0;

				kill(slots[s].pid, SIGKILL);
				waitpid(slots[s].pid, &status, 0);
				if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
					/* It had failed on its own already. */
					failures++;
					snprintf(fails + strlen(fails),
						 sizeof fails - strlen(fails),
						 " slot %u inc %u (exit %d)", s,
						 slots[s].inc, WEXITSTATUS(status));
				}
				journal_kill(s, t);
				slots[s].pid = 0;
				slots[s].restart_at = load_now_ns() +
					urand(&killrs, 50, 1500) * MS;
				kills++;
				event("kill slot %u inc %u", s, slots[s].inc);
			}
			next_kill = now + cfg.kill_every_ns / 2 +
				    load_rand(&killrs) % (cfg.kill_every_ns + 1);
		}
		running = 0;
		for (int i = 0; i < cfg.clients; i++) {
			struct slot *sl = &slots[i];

			if (!sl->done && sl->pid == 0 && now >= sl->restart_at) {
				sl->inc++;
				if (spawn((unsigned)i) < 0)
					return 2;
			}
			running += !sl->done;
		}
		if (!running)
			break;
		load_sleep_until(load_now_ns() + 20 * MS);
	}
	sample_rss();

	/* Every named session once more: whatever is still queued. */
	for (int i = 0; i < cfg.clients && !daemon_died; i += 4)
		drain_named((unsigned)i);
	/* The drains' last acks may still be on their way: let the daemon
	 * settle (queued and in flight back to 0) for a moment. */
	for (int i = 0; i < 50 && !daemon_died; i++) {
		have_stats = get_stats(&sc, &st) == 0;
		if (!have_stats || st.queued + st.in_flight == 0)
			break;
		load_sleep_until(load_now_ns() + 40 * MS);
	}
	cpu1 = load_proc_cpu_ns(cfg.daemon_pid);
	sample_rss();
account:

	ty = calloc(1, sizeof *ty);
	if (!ty)
		return 2;
	uint64_t records = 0;
	/* Every journal first (a named session's fires are in its
	 * consumers' journals, its timers in its producers'), then the named
	 * sessions' fires against their timers, then the verdicts. */
	struct soak_model *models = calloc((size_t)cfg.clients, sizeof *models);
	struct soak_obsvec obs = { 0 };

	if (!models)
		return 2;
	for (int i = 0; i < cfg.clients; i++) {
		struct soak_model *m = &models[i];
		char path[512];

		*m = (struct soak_model){ .slot = (unsigned)i, .named = slots[i].named,
					  .group = (unsigned)i / 4, .grace_ns = cfg.grace_ns,
					  .tally = ty, .obs = slots[i].named ? &obs : NULL };
		slot_path((unsigned)i, path, sizeof path);
		if (soak_fold(path, m) != 0) {
			fprintf(stderr, "bwsoak: %s: %s\n", path, strerror(errno));
			failures++;
		}
		records += m->records;
	}
	soak_settle_fires(models, (unsigned)cfg.clients, &obs, ty);
	for (int i = 0; i < cfg.clients; i++) {
		soak_finish(&models[i]);
		soak_model_free(&models[i]);
	}
	free(models);
	free(obs.v);
	free(obs.kicks);

	/* ---- report ------------------------------------------------------ */
	/* A named session's drops reach its next HelloReply.dropped, and the
	 * final drain attaches every named session: their sum is every fire
	 * dropped from a full queue.  Stats.dropped also counts an anonymous
	 * session's fires that came due while its connection was closing
	 * (daemon/state.c route()), which PROTOCOL.md does not mention; the
	 * difference is those, whose timers died with the connection. */
	uint64_t dropped = ty->dropped_hello;
	uint64_t stats_dropped = have_stats ? st.dropped - st0.dropped : 0;
	uint64_t anon_undelivered = stats_dropped > dropped ? stats_dropped - dropped : 0;
	uint64_t lanes_lost = have_stats ? st.oneshot.lost + st.periodic.lost : 0;
	uint64_t pending = have_stats ? st.oneshot.pending + st.periodic.pending : 0;
	uint64_t undone = have_stats ? st.queued + st.in_flight : 0;
	uint64_t lost = ty->lost + ty->lost_periodic + ty->lost_released;
	bool pass = !daemon_died && (have_stats || cfg.account_only) &&
		    failures == 0 && lost == 0 &&
		    ty->violations == 0 && dropped == 0 && lanes_lost == 0 &&
		    pending == 0 && ty->left_pending == 0 && undone == 0;

	printf("\n## Timers (%" PRIu64 " journal records)\n\n", records);
	printf("| %-40s | %10s | %s |\n", "what", "count", "note");
	printf("|%s|%s|%s|\n", "------------------------------------------",
	       "------------", "------");
	row("schedules sent", ty->intents, "every Schedule the clients wrote down before sending");
	row("scheduled (acknowledged)", ty->scheduled, "ScheduleReply received");
	row("  of which periodic", ty->periodic_scheduled, "");
	if (have_stats)
		row("fires the daemon made (Stats)", st.oneshot.fired +
		    st.periodic.fired - st0.oneshot.fired - st0.periodic.fired,
		    "each once; received below counts repeats too, and not the anonymous ones lost with a socket");
	row("fires received", ty->fires, "");
	row("  oneshot", ty->oneshot_fires, "");
	row("  periodic", ty->periodic_fires, "");
	row("  delivered from a session queue", ty->queued_fires, "after a reattach");
	row("named sessions' fires journaled", ty->named_fires, "by a consumer, then acknowledged");
	row("  handled (distinct fires)", ty->named_handled_once, "each acknowledged timer's fire, once");
	row("  repeats, marked redelivered", ty->named_repeats, "journaled again after a kill, close or ack timeout: allowed");
	row("  received marked redelivered", ty->named_redelivered, "");
	row("  acks sent (cumulative)", ty->acks, "one per batch, after journaling it");
	row("  acks refused", ty->ack_failures, "the connection ended first: the fires came again");
	row("fires that fail: releases sent", ty->releases, "instead of an ack, delay 0..200 ms");
	row("  released back", ty->released_back, "ReleaseReply released, not dead-lettered");
	row("  came again after a release", ty->released_again, "never before ready_ns, deliveries counted on");
	row("    of which marked redelivered", ty->released_again_marked, "taken back (written) before: the mark stays");
	row("  released to the dead-letter session", ty->released_dead, "at the session's limit");
	row("  not released (taken back already)", ty->released_not, "or not sent: acknowledged with the batch");
	row("  outcome unknown", ty->released_unknown, "the connection ended first");
	row("  LOST after a release", ty->lost_released, "given back, never came again: must be 0");
	row("dead letters read (NAME.dead)", ty->dead_letters, "each at or past its origin's limit");
	row("  with no hand-out journaled", ty->dead_unseen, "every counted hand-out unread: paused or killed consumers");
	row("kicks sent", ty->kicks, "every key, by producer-consumers and the drains");
	row("  dead letters kicked back", ty->kicked, "");
	row("  seen again, counted from 1", ty->kicked_seen, "deliveries went down across a Kick");
	row("touches (slow handler)", ty->touches, "touched for 3 s, handled for 1.5 s");
	row("  touched", ty->touched, "no other consumer got it before the new deadline");
	row("groups with a policy", ty->policy_groups, "");
	row("  largest max_deliveries", ty->max_deliveries_seen, "");
	row("oneshot fired exactly once", ty->fired_once, "");
	row("cancelled (CancelReply pending=true)", ty->cancelled, "none fired after the reply");
	row("replaced (ScheduleReply replaced=true)", ty->replaced, "none fired after the reply");
	row("cancels sent", ty->cancel_sent, "");
	row("  found nothing pending", ty->cancel_miss, "already fired, gone, or a key of a fired timer");
	row("refused", ty->refused, "an error the client saw");
	row("  DUPLICATE_KEY", ty->refused_dup, "a pending key without replace");
	row("  other daemon errors", ty->refused_other, "");
	row("  by the library (nothing sent)", ty->refused_client, "e.g. BWC_EAGAIN");
	row("unknown outcome", ty->unknown, "a reply (to it, or to a cancel/replace of it) lost with a killed client or connection");
	row("  of which fired (once)", ty->unknown_fired, "");
	row("died with an anonymous connection", ty->died_with_conn, "documented: not due before the close");
	row("in flight at a break (excused)", ty->inflight_excused, "anonymous (auto-ack) oneshots: written to a connection that then broke (why: below)");
	row("periodic gaps at a break (excused)", ty->periodic_gaps_excused, "anonymous (auto-ack): fire counts skipped across a kill/close");
	row("  excused: within the grace", ty->excused_why[0], "due within --grace-ms before the break");
	row("  excused: in a pause cut short", ty->excused_why[1], "a slow reader killed while paused: its socket's fires");
	row("  excused: in an unread queue", ty->excused_why[2], "killed before reading its reattach queue");
	row("periodic periods skipped (allowed)", ty->skips, "fell a period behind: fires once, moves on");
	row("LOST oneshot", ty->lost, "must be 0");
	row("LOST periodic fires", ty->lost_periodic, "must be 0");
	row("violations", ty->violations, "early, duplicate, after cancel, order, ...: must be 0");
	row("left pending at the end", ty->left_pending + pending, "must be 0");
	if (have_stats)
		row("left queued or in flight", undone, "Stats.queued + in_flight after the drains: must be 0");
	row("dropped from full queues", dropped, "sum of HelloReply.dropped (every named session, drain included): must be 0");
	if (have_stats)
		row("  Stats.dropped over the run", stats_dropped, "the above plus anonymous fires at a closing connection");
	row("  anonymous, undelivered at close", anon_undelivered, "timers that died with their connection: allowed");
	row("lost by the wheel (Stats lanes)", lanes_lost, "must be 0");

	printf("\n## Faults\n\n");
	printf("| %-40s | %10s | %s |\n", "what", "count", "note");
	printf("|%s|%s|%s|\n", "------------------------------------------",
	       "------------", "------");
	row("clients killed (SIGKILL)", ty->kills, "restarted after 50..1500 ms");
	row("connections", ty->conns, "");
	row("  reattached to a named session", ty->resumed, "HelloReply.resumed");
	row("  connect retries", ty->busy_retries, "a Hello that failed");
	row("closed on purpose and reconnected", ty->closes, "");
	row("closed by the daemon", ty->daemon_closes, "");
	row("pauses (slow reader)", ty->pauses, "");
	row("fires delayed by the client", ty->delayed_fires, "queued or paused: not in the receive lateness");

	printf("\n## Lateness, ms\n\n");
	printf("| %-44s | %9s | %8s | %8s | %8s | %8s |\n", "fires", "count",
	       "p50", "p99", "p99.9", "max");
	printf("|----------------------------------------------|-----------|"
	       "----------|----------|----------|----------|\n");
	lat_row("oneshot: fired_at - deadline (daemon)", &ty->os_srv);
	lat_row("oneshot: received - deadline (client)", &ty->os_recv);
	lat_row("periodic: fired_at - deadline (daemon)", &ty->per_srv);
	lat_row("periodic: received - deadline (client)", &ty->per_recv);

	printf("\n## Daemon\n\n");
	printf("RSS (VmRSS, %" PRIu64 " samples, 1/s): min %.2f MiB, max %.2f MiB, "
	       "last %.2f MiB\n", rss_n, (double)rss_min / 1048576.0,
	       (double)rss_max / 1048576.0, (double)rss_last / 1048576.0);
	if (cfg.restarts)
		printf("bitwheeld restarted %u times: CPU and Stats below are "
		       "the last one's\n", cfg.restarts);
	if (cpu0 >= 0 && cpu1 >= 0)
		printf("CPU: %.1f s over the run (%.1f %% of one core)\n",
		       (double)(cpu1 - cpu0) / 1e9,
		       100.0 * (double)(cpu1 - cpu0) /
		       (double)(load_now_ns() - cfg.t_start));
	if (have_stats)
		printf("Stats: oneshot inserted %" PRIu64 " cancelled %" PRIu64
		       " fired %" PRIu64 " lost %" PRIu64 " pending %" PRIu64
		       "; periodic inserted %" PRIu64 " cancelled %" PRIu64
		       " fired %" PRIu64 " lost %" PRIu64 " pending %" PRIu64
		       "; sessions %" PRIu64 ", queued %" PRIu64 ", in flight %" PRIu64
		       ", acked %" PRIu64 ", redelivered %" PRIu64 ", dropped %"
		       PRIu64 ", memory %.2f MiB\n",
		       st.oneshot.inserted, st.oneshot.cancelled, st.oneshot.fired,
		       st.oneshot.lost, st.oneshot.pending, st.periodic.inserted,
		       st.periodic.cancelled, st.periodic.fired, st.periodic.lost,
		       st.periodic.pending, st.sessions, st.queued, st.in_flight,
		       st.acked, st.redelivered, st.dropped,
		       (double)st.memory_bytes / 1048576.0);
	else
		printf("Stats: unavailable%s\n", daemon_died ? " (bitwheeld died)" : "");
	if (ty->nexamples) {
		printf("\nFirst problems:\n");
		for (unsigned i = 0; i < ty->nexamples; i++)
			printf("  %s\n", ty->examples[i]);
	}
	if (failures)
		printf("\nClient failures:%s\n", fails[0] ? fails : " (journal unreadable)");
	printf("\nsoak: %s %.0f s%s, seed %" PRIu64 ": scheduled=%" PRIu64
	       " fired=%" PRIu64 " cancelled=%" PRIu64 " refused=%" PRIu64
	       " unknown=%" PRIu64 " named_once=%" PRIu64 " redelivered_repeats=%" PRIu64
	       " released=%" PRIu64 " dead_letters=%" PRIu64 " kicked=%" PRIu64
	       " touched=%" PRIu64
	       " excused_anon=%" PRIu64 " lost=%" PRIu64
	       " violations=%" PRIu64 " dropped=%" PRIu64 " kills=%" PRIu64
	       " rss_max=%.2fMiB\n",
	       pass ? "PASS" : "FAIL", (double)cfg.duration_ns / 1e9,
	       cfg.account_only ? " (accounted again from journals)" : "",
	       cfg.env_seed, ty->scheduled, ty->fires,
	       ty->cancelled + ty->replaced, ty->refused, ty->unknown,
	       ty->named_handled_once, ty->named_repeats,
	       ty->releases, ty->dead_letters, ty->kicked, ty->touched,
	       ty->inflight_excused + ty->periodic_gaps_excused, lost,
	       ty->violations, dropped, ty->kills, (double)rss_max / 1048576.0);
	bwc_free(sc);
	if (events)
		fclose(events);
	free(ty);
	return pass ? 0 : 1;
}
