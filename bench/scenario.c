/*
 * scenario.c - the four workloads, as operation streams built once.
 *
 * A scenario is generated before any subject runs: a list of inserts (a
 * fresh id and a deadline), cancels (an id) and polls (a time), from a
 * fixed seed.  Every subject replays the same list, so every subject sees
 * the same operations in the same order at the same simulated times.
 *
 * The generator keeps a model of which timers are live: inserted, not
 * cancelled, deadline still after the current time.  A cancel always names
 * a live timer.  No subject ever fires a timer before its deadline (each
 * poll checks), so every subject that accepted the timer still holds it;
 * a coarse wheel may hold timers longer than the model, which changes
 * nothing in the stream.
 *
 * Operations are counted toward the warm-up and measured totals only when
 * they are of the kind a scenario measures; setup operations (the
 * interleaved prefill, the idle scenario's re-arming of its far timers)
 * run untimed.
 *
 *   interleaved  10,000 timers pending at all times, deadlines uniform in
 *                now + [1 ms, 10 s] at nanosecond granularity, so each new
 *                deadline lands between existing ones.  Every 1 ms: poll;
 *                insert a replacement for each timer that came due; then
 *                cancel one random live timer and insert another.
 *   trading      the design document's simulation.  Every 1 ms: poll;
 *                with probability 0.8 insert an order timeout at now +
 *                [50, 500] ms; with probability 0.05 cancel a random live
 *                one.
 *   idle         16 timers 12,000 to 14,000 s ahead; polls after gaps of
 *                1, 10, ..., 10^7 ms in rotation.  Before each poll the far
 *                timers that the coming gap would bring within 1,500 s are
 *                re-armed (untimed), so no poll ever has work: a poll's cost
 *                should not depend on the gap.
 *   burst        every 60 ms, 10,000 inserts all due in the same 1 ms (and
 *                5 ms) tick 50 ms ahead, each followed with probability 0.05
 *                by the cancel of a random live timer; then 60 polls 1 ms
 *                apart, one of which fires the burst.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const char *const scenario_names[] = { "interleaved", "trading", "idle",
				       "burst", NULL };

#define NOPOS UINT32_MAX

struct hent {
	uint64_t d;
	uint32_t id;
};

struct gen {
	struct scenario *sc;
	size_t cap_ops, cap_ids;
	uint64_t rng[4];
	uint64_t now;
	uint32_t *live, nlive, cap_live;
	uint32_t *pos;         /* per id: index in live, or NOPOS           */
	struct hent *heap;
	size_t nheap, cap_heap;
	size_t counted, warm, total;
	bool oom;
};

/* ---- random numbers: xoshiro256** seeded by splitmix64 ----------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rnd(struct gen *g)
{
	uint64_t *s = g->rng, r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

/* uniform in [lo, hi] */
static uint64_t rnd_range(struct gen *g, uint64_t lo, uint64_t hi)
{
	unsigned __int128 m = (unsigned __int128)rnd(g) * (hi - lo + 1);

	return lo + (uint64_t)(m >> 64);
}

static bool rnd_chance(struct gen *g, double p)
{
	return (double)(rnd(g) >> 11) * 0x1p-53 < p;
}

/* ---- growing arrays ----------------------------------------------------- */

bool scenario_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap = *cap ? *cap : 1024;
	void *np;

	if (need <= *cap)
		return true;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap * elem);
	if (!np)
		return false;
	*p = np;
	*cap = ncap;
	return true;
}

/* ---- the model ---------------------------------------------------------- */

static void heap_push(struct gen *g, uint64_t d, uint32_t id)
{
	size_t i;

	if (!scenario_grow((void **)&g->heap, &g->cap_heap, g->nheap + 1,
		  sizeof(*g->heap))) {
		g->oom = true;
		return;
	}
	i = g->nheap++;
	while (i > 0 && g->heap[(i - 1) / 2].d > d) {
		g->heap[i] = g->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	g->heap[i] = (struct hent){ d, id };
}

static void heap_pop(struct gen *g)
{
	struct hent last = g->heap[--g->nheap];
	size_t i = 0, n = g->nheap;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && g->heap[c + 1].d < g->heap[c].d)
			c++;
		if (g->heap[c].d >= last.d)
			break;
		g->heap[i] = g->heap[c];
		i = c;
	}
	if (n)
		g->heap[i] = last;
}

static void live_remove(struct gen *g, uint32_t id)
{
	uint32_t p = g->pos[id], last = g->live[--g->nlive];

	g->live[p] = last;
	g->pos[last] = p;
	g->pos[id] = NOPOS;
}

/* Timers whose deadline has come may have fired: no longer cancellable. */
static void expire(struct gen *g)
{
	while (g->nheap && g->heap[0].d <= g->now) {
		uint32_t id = g->heap[0].id;

		heap_pop(g);
		if (g->pos[id] != NOPOS)
			live_remove(g, id);
	}
}

/* ---- emitting operations ------------------------------------------------ */

static bool done(const struct gen *g)
{
	return g->oom || g->counted >= g->warm + g->total;
}

/* bucket: the sample bucket if this is a measured kind of operation, or
 * BUCKET_NONE for setup work that never counts. */
static void emit(struct gen *g, enum op_kind kind, uint32_t id, uint64_t t,
		 unsigned bucket)
{
	struct scenario *sc = g->sc;
	struct op *o;

	if (done(g))
		return;
	if (!scenario_grow((void **)&sc->ops, &g->cap_ops, sc->nops + 1,
		  sizeof(*sc->ops))) {
		g->oom = true;
		return;
	}
	if (bucket != BUCKET_NONE) {
		if (g->counted == g->warm)
			sc->nwarm = sc->nops;
		if (g->counted++ < g->warm)
			bucket = BUCKET_NONE;
	}
	o = &sc->ops[sc->nops++];
	*o = (struct op){ .t = t, .id = id, .kind = (uint8_t)kind,
			  .bucket = (uint8_t)bucket };
}

static uint32_t g_insert(struct gen *g, uint64_t deadline, unsigned bucket)
{
	struct scenario *sc = g->sc;
	uint32_t id = sc->nids;

	if (done(g))
		return NOPOS;
	if (!scenario_grow((void **)&sc->deadline, &g->cap_ids, id + 1,
		  sizeof(*sc->deadline))) {
		g->oom = true;
		return NOPOS;
	}
	if (g->cap_ids > g->cap_live) {
		uint32_t *np = realloc(g->pos, g->cap_ids * sizeof(*np));

		if (!np) {
			g->oom = true;
			return NOPOS;
		}
		g->pos = np;
		np = realloc(g->live, g->cap_ids * sizeof(*np));
		if (!np) {
			g->oom = true;
			return NOPOS;
		}
		g->live = np;
		g->cap_live = (uint32_t)g->cap_ids;
	}
	sc->nids++;
	sc->deadline[id] = deadline;
	g->pos[id] = g->nlive;
	g->live[g->nlive++] = id;
	if (g->nlive > sc->max_live)
		sc->max_live = g->nlive;
	heap_push(g, deadline, id);
	emit(g, OP_INSERT, id, deadline, bucket);
	return id;
}

static void g_cancel(struct gen *g, uint32_t id, unsigned bucket)
{
	if (g->pos[id] != NOPOS)
		live_remove(g, id);
	emit(g, OP_CANCEL, id, 0, bucket);
}

static void g_cancel_random(struct gen *g, unsigned bucket)
{
	if (g->nlive)
		g_cancel(g, g->live[rnd_range(g, 0, g->nlive - 1)], bucket);
}

static void g_poll(struct gen *g, uint64_t now, unsigned bucket)
{
	g->now = now;
	expire(g);
	emit(g, OP_POLL, 0, now, bucket);
}

/* ---- the scenarios ------------------------------------------------------ */

enum { B_INSERT, B_CANCEL, B_POLL };

static void three_buckets(struct scenario *sc)
{
	sc->nbuckets = 3;
	sc->bucket[B_INSERT] = (struct bucket_def){ "insert", OP_INSERT, 0 };
	sc->bucket[B_CANCEL] = (struct bucket_def){ "cancel", OP_CANCEL, 0 };
	sc->bucket[B_POLL] = (struct bucket_def){ "poll", OP_POLL, 0 };
}

#define IL_PENDING 10000u
#define IL_HORIZON (10 * NS_PER_S)

static void gen_interleaved(struct gen *g)
{
	struct scenario *sc = g->sc;

	sc->title = "Interleaved insert";
	sc->summary =
		"10,000 timers pending at all times, deadlines uniform in "
		"now + [1 ms, 10 s] at ns granularity, so every insert lands "
		"between existing timers. Every 1 ms: poll; insert a "
		"replacement for each timer that came due; cancel one random "
		"live timer and insert another.";
	three_buckets(sc);
	for (unsigned i = 0; i < IL_PENDING; i++)
		g_insert(g, g->now + rnd_range(g, NS_PER_MS, IL_HORIZON),
			 BUCKET_NONE);
	while (!done(g)) {
		g_poll(g, g->now + NS_PER_MS, B_POLL);
		while (g->nlive < IL_PENDING && !done(g))
			g_insert(g, g->now + rnd_range(g, NS_PER_MS, IL_HORIZON),
				 B_INSERT);
		g_cancel_random(g, B_CANCEL);
		g_insert(g, g->now + rnd_range(g, NS_PER_MS, IL_HORIZON),
			 B_INSERT);
	}
}

static void gen_trading(struct gen *g)
{
	struct scenario *sc = g->sc;

	sc->title = "Realistic trading simulation";
	sc->summary =
		"Every 1 ms: poll; with probability 0.8 insert an order "
		"timeout at now + [50, 500] ms (ns granularity); with "
		"probability 0.05 cancel a random live timer. About 220 "
		"timers pending.";
	three_buckets(sc);
	while (!done(g)) {
		g_poll(g, g->now + NS_PER_MS, B_POLL);
		if (rnd_chance(g, 0.8))
			g_insert(g, g->now + rnd_range(g, 50 * NS_PER_MS,
						       500 * NS_PER_MS),
				 B_INSERT);
		if (rnd_chance(g, 0.05))
			g_cancel_random(g, B_CANCEL);
	}
}

#define IDLE_TIMERS 16u
#define IDLE_CLASSES 8u
#define IDLE_FAR (12000000ull * NS_PER_MS)
#define IDLE_SPREAD (2000000ull * NS_PER_MS)
#define IDLE_MARGIN (1500000ull * NS_PER_MS)

static const char *const idle_names[IDLE_CLASSES] = {
	"poll gap 1 ms", "poll gap 10 ms", "poll gap 10^2 ms",
	"poll gap 10^3 ms", "poll gap 10^4 ms", "poll gap 10^5 ms",
	"poll gap 10^6 ms", "poll gap 10^7 ms",
};

static void gen_idle(struct gen *g)
{
	struct scenario *sc = g->sc;
	uint32_t far[IDLE_TIMERS];
	uint64_t gap = 1;

	sc->title = "Idle gaps";
	sc->summary =
		"16 timers 12,000-14,000 s ahead (re-armed untimed whenever "
		"the next gap would bring one within 1,500 s); polls after "
		"gaps of 1 ms to 10^7 ms (2.8 h) in rotation, none of which "
		"has a timer to fire. Only polls are timed.";
	sc->nbuckets = IDLE_CLASSES;
	for (unsigned c = 0; c < IDLE_CLASSES; c++, gap *= 10)
		sc->bucket[c] = (struct bucket_def){ idle_names[c], OP_POLL,
						     gap };
	for (unsigned i = 0; i < IDLE_TIMERS; i++)
		far[i] = g_insert(g, g->now + IDLE_FAR +
					     rnd_range(g, 0, IDLE_SPREAD),
				  BUCKET_NONE);
	while (!done(g)) {
		for (unsigned c = 0; c < IDLE_CLASSES && !done(g); c++) {
			uint64_t gap_ns = sc->bucket[c].gap_ms * NS_PER_MS;

			for (unsigned i = 0; i < IDLE_TIMERS; i++) {
				if (sc->deadline[far[i]] >=
				    g->now + gap_ns + IDLE_MARGIN)
					continue;
				g_cancel(g, far[i], BUCKET_NONE);
				far[i] = g_insert(g, g->now + IDLE_FAR +
						     rnd_range(g, 0, IDLE_SPREAD),
						  BUCKET_NONE);
				if (far[i] == NOPOS)
					return;
			}
			g_poll(g, g->now + gap_ns, c);
		}
	}
}

#define BURST_SIZE 10000u
#define BURST_AHEAD (50 * NS_PER_MS)
#define BURST_POLLS 60u

static void gen_burst(struct gen *g)
{
	struct scenario *sc = g->sc;

	sc->title = "Burst";
	sc->summary =
		"Every 60 ms, 10,000 inserts due within the same 1 ms tick "
		"(now + (50, 51] ms, also inside one 5 ms tick), each followed "
		"with probability 0.05 by the cancel of a random live timer; "
		"then 60 polls 1 ms apart, one of which fires the burst.";
	three_buckets(sc);
	while (!done(g)) {
		uint64_t t = g->now;

		for (unsigned i = 0; i < BURST_SIZE && !done(g); i++) {
			g_insert(g, t + BURST_AHEAD + rnd_range(g, 1, NS_PER_MS),
				 B_INSERT);
			if (rnd_chance(g, 0.05))
				g_cancel_random(g, B_CANCEL);
		}
		for (unsigned k = 1; k <= BURST_POLLS && !done(g); k++)
			g_poll(g, t + k * NS_PER_MS, B_POLL);
	}
}

int scenario_build(const char *name, const struct scenario_params *p,
		   struct scenario *out)
{
	struct gen g = { 0 };
	uint64_t seed = p->seed;
	size_t i;

	memset(out, 0, sizeof(*out));
	g.sc = out;
	g.warm = p->warmup;
	g.total = p->measured;
	for (i = 0; i < 4; i++)
		g.rng[i] = splitmix64(&seed);
	/* a multiple of 60 ms (burst cycles) and of every tick we use */
	out->start_ns = g.now = 1000 * NS_PER_S;
	for (i = 0; scenario_names[i]; i++)
		if (!strcmp(name, scenario_names[i]))
			break;
	if (!scenario_names[i])
		return -1;
	out->name = scenario_names[i];
	switch (i) {
	case 0: gen_interleaved(&g); break;
	case 1: gen_trading(&g); break;
	case 2: gen_idle(&g); break;
	default: gen_burst(&g); break;
	}
	free(g.live);
	free(g.pos);
	free(g.heap);
	if (g.oom || !out->nops) {
		scenario_free(out);
		return -2;
	}
	if (g.counted <= g.warm)
		out->nwarm = out->nops;
	for (i = out->nwarm; i < out->nops; i++) {
		const struct op *o = &out->ops[i];

		out->kind_count[o->kind]++;
		if (o->bucket != BUCKET_NONE)
			out->bucket_count[o->bucket]++;
	}
	return 0;
}

void scenario_free(struct scenario *s)
{
	free(s->ops);
	free(s->deadline);
	s->ops = NULL;
	s->deadline = NULL;
}
