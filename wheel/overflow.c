/*
 * overflow.c - the failover wheel's overflow store: an indexed binary heap.
 *
 * pos[] holds record indices in heap order, keyed by (deadline, arrival);
 * each record remembers its position in rec.next, so removing any record
 * is O(log n) without a search, and the minimum is pos[0] in O(1).
 * Arrival numbers are 32-bit and compared modulo 2^32: equal deadlines fire
 * in arrival order as long as they arrived within 2^31 inserts of each
 * other.  The position array doubles when full (the only allocation on the
 * overflow path besides the pool's chunks).
 */
#include "wheel-internal.h"

static bool heap_less(const struct bw_pool *p, uint32_t a, uint32_t b)
{
	const struct bw_rec *ra = bw_rec_at(p, a), *rb = bw_rec_at(p, b);

	if (ra->deadline != rb->deadline)
		return ra->deadline < rb->deadline;
	return (int32_t)(ra->prev - rb->prev) < 0;
}

static void heap_set(struct bw_wheel *w, uint32_t i, uint32_t idx)
{
	w->heap.pos[i] = idx;
	bw_rec_at(&w->pool, idx)->next = i;
}

static void heap_up(struct bw_wheel *w, uint32_t i, uint32_t idx)
{
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (!heap_less(&w->pool, idx, w->heap.pos[parent]))
			break;
		heap_set(w, i, w->heap.pos[parent]);
		i = parent;
	}
	heap_set(w, i, idx);
}

static void heap_down(struct bw_wheel *w, uint32_t i, uint32_t idx)
{
	struct bw_heap *h = &w->heap;

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && heap_less(&w->pool, h->pos[c + 1], h->pos[c]))
			c++;
		if (!heap_less(&w->pool, h->pos[c], idx))
			break;
		heap_set(w, i, h->pos[c]);
		i = c;
	}
	heap_set(w, i, idx);
}

int bw_heap_push(struct bw_wheel *w, uint32_t idx)
{
	struct bw_heap *h = &w->heap;
	struct bw_rec *r = bw_rec_at(&w->pool, idx);
	uint64_t tick;

	if (h->n == h->cap) {
		uint32_t ncap = h->cap ? h->cap * 2 : 64;
		uint32_t *np = bw_mem(w, h->pos, h->cap * sizeof(*np),
				      ncap * sizeof(*np));

		if (!np)
			return BW_ENOMEM;
		h->pos = np;
		h->cap = ncap;
	}
	r->loc = BW_LOC_HEAP;
	r->prev = h->arrivals++;
	heap_up(w, h->n++, idx);
	tick = bw_tick_of(w, r->deadline);
	if (tick < w->next && !w->backlog)
		w->next = tick;
	return 0;
}

void bw_heap_remove(struct bw_wheel *w, uint32_t idx)
{
	struct bw_heap *h = &w->heap;
	uint32_t i = bw_rec_at(&w->pool, idx)->next;
	uint32_t last = h->pos[--h->n];

	if (i == 0)
		w->dirty = true;
	if (i == h->n)
		return;
	if (i > 0 && heap_less(&w->pool, last, h->pos[(i - 1) / 2]))
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
