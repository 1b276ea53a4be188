/*
 * overflow.c - the failover wheel's overflow store: an indexed binary heap.
 *
 * pos[] holds timers in heap order, keyed by (deadline, arrival); each
 * timer remembers its position and arrival in u.heap, so removing any record
 * is O(log n) without a search, and the minimum is pos[0] in O(1).
 * Arrival numbers are 32-bit and compared modulo 2^32: equal deadlines fire
 * in arrival order as long as they arrived within 2^31 inserts of each
 * other.  The position array doubles when full (the only allocation on the
 * overflow path besides the pool's chunks).
 */
#include "wheel-internal.h"

static bool heap_less(const struct bw_timer *a, const struct bw_timer *b)
{
	if (a->deadline != b->deadline)
		return a->deadline < b->deadline;
	return (int32_t)(a->u.heap.arrival - b->u.heap.arrival) < 0;
}

static void heap_set(struct bw_wheel *w, uint32_t i, struct bw_timer *t)
{
	w->heap.pos[i] = t;
	t->u.heap.pos = i;
}

static void heap_up(struct bw_wheel *w, uint32_t i, struct bw_timer *t)
{
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (!heap_less(t, w->heap.pos[parent]))
			break;
		heap_set(w, i, w->heap.pos[parent]);
		i = parent;
	}
	heap_set(w, i, t);
}

static void heap_down(struct bw_wheel *w, uint32_t i, struct bw_timer *t)
{
	struct bw_heap *h = &w->heap;

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && heap_less(h->pos[c + 1], h->pos[c]))
			c++;
		if (!heap_less(h->pos[c], t))
			break;
		heap_set(w, i, h->pos[c]);
		i = c;
	}
	heap_set(w, i, t);
}

int bw_heap_push(struct bw_wheel *w, struct bw_timer *t)
{
	struct bw_heap *h = &w->heap;
	uint64_t tick;

	if (h->n == h->cap) {
		uint32_t ncap = h->cap ? h->cap * 2 : 64;
		struct bw_timer **np = bw_mem(w, h->pos, h->cap * sizeof(*np),
					      ncap * sizeof(*np));

		if (!np)
			return BW_ENOMEM;
		h->pos = np;
		h->cap = ncap;
	}
	t->loc = BW_LOC_HEAP;
	t->u.heap.arrival = h->arrivals++;
	heap_up(w, h->n++, t);
	tick = bw_tick_of(w, t->deadline);
	if (tick < w->next && !w->backlog)
		bw_set_next(w, tick);
	return 0;
}

void bw_heap_remove(struct bw_wheel *w, struct bw_timer *t)
{
	struct bw_heap *h = &w->heap;
	uint32_t i = t->u.heap.pos;
	struct bw_timer *last = h->pos[--h->n];

	if (i == 0)
		w->dirty = true;
	if (i == h->n)
		return;
	if (i > 0 && heap_less(last, h->pos[(i - 1) / 2]))
		heap_up(w, i, last);
	else
		heap_down(w, i, last);
}

void bw_heap_fini(struct bw_wheel *w)
{
	struct bw_heap *h = &w->heap;

	if (h->pos)
		bw_mem(w, h->pos, h->cap * sizeof(*h->pos), 0);
	h->pos = NULL;
	h->n = h->cap = 0;
}
