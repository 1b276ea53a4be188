/*
 * pool.c - the timer records behind every handle.
 *
 * Records live in chunks of BW_CHUNK; chunk i holds records
 * i*BW_CHUNK .. i*BW_CHUNK + BW_CHUNK - 1, so a record's index never
 * changes and a handle can name it for its whole life.  The records a wheel
 * gets at creation (gears * 64 * slot_cap, a plain wheel's capacity) come
 * in one block whose chunk pointers point into it; only a failover wheel
 * grows, one chunk at a time, when it runs out.  Free records are a stack
 * threaded through t.u.link.next by pointer: get and put are O(1), growth is O(BW_CHUNK).
 * The block is threaded onto the stack BW_CHUNK records at a time, as the
 * stack runs dry (fresh counts those threaded so far), so that a large
 * slot_cap reserves address space, not memory: a page is touched only
 * once the wheel has held that many timers.
 *
 * Each record carries the handle that names it now: its index and a
 * generation.  Putting a record back bumps the generation, which kills
 * every handle that named the old timer.
 */
#include <string.h>

#include "wheel-internal.h"

static void pool_thread(struct bw_pool *p, uint32_t first, uint32_t n)
{
	for (uint32_t i = n; i-- > 0;) {
		struct bw_rec *r = bw_rec_at(p, first + i);

		r->t = (struct bw_timer){ .gen = 1, .loc = BW_LOC_FREE };
		r->t.u.link.next = (struct bw_link *)p->free;
		r->h = bw_handle_make(first + i, 1);
		p->free = r;
	}
}

int bw_pool_init(struct bw_wheel *w, uint32_t nrecords)
{
	struct bw_pool *p = &w->pool;
	uint32_t nbase = (nrecords + BW_CHUNK - 1) / BW_CHUNK;

	memset(p, 0, sizeof(*p));
	p->base = bw_mem(w, NULL, 0, (size_t)nrecords * sizeof(*p->base));
	if (!p->base)
		goto fail;
	p->nbase_records = nrecords;
	p->chunk_cap = nbase;
	p->chunk = bw_mem(w, NULL, 0, nbase * sizeof(*p->chunk));
	if (!p->chunk)
		goto fail;
	for (uint32_t i = 0; i < nbase; i++)
		p->chunk[i] = p->base + (size_t)i * BW_CHUNK;
	p->nchunks = p->nbase = nbase;
	p->size = nrecords;
	return 0;
fail:
	bw_pool_fini(w);
	return BW_ENOMEM;
}

void bw_pool_fini(struct bw_wheel *w)
{
	struct bw_pool *p = &w->pool;

	for (uint32_t i = p->nbase; i < p->nchunks; i++)
		bw_mem(w, p->chunk[i], BW_CHUNK * sizeof(struct bw_rec), 0);
	if (p->chunk)
		bw_mem(w, p->chunk, p->chunk_cap * sizeof(*p->chunk), 0);
	if (p->base)
		bw_mem(w, p->base, (size_t)p->nbase_records * sizeof(*p->base), 0);
	memset(p, 0, sizeof(*p));
}

/* Thread the base block's next BW_CHUNK records or, once it is all in use,
 * add one chunk.  A chunk starts after the base block's last (maybe
 * partial) chunk, so indices between the two never exist: see
 * bw_pool_valid(). */
int bw_pool_grow(struct bw_wheel *w)
{
	struct bw_pool *p = &w->pool;
	uint64_t first = (uint64_t)p->nchunks * BW_CHUNK;
	struct bw_rec *c;

	if (p->fresh < p->nbase_records) {
		uint32_t n = p->nbase_records - p->fresh;

		n = n < BW_CHUNK ? n : BW_CHUNK;
		pool_thread(p, p->fresh, n);
		p->fresh += n;
		return 0;
	}
	if (!w->cfg.failover)
		return BW_EFULL;
	if (first + BW_CHUNK > BW_MAX_RECORDS)
		return BW_ENOMEM;
	if (p->nchunks == p->chunk_cap) {
		uint32_t ncap = p->chunk_cap ? p->chunk_cap * 2 : 4;
		struct bw_rec **nc = bw_mem(w, p->chunk,
					    p->chunk_cap * sizeof(*nc),
					    ncap * sizeof(*nc));
		if (!nc)
			return BW_ENOMEM;
		p->chunk = nc;
		p->chunk_cap = ncap;
	}
	c = bw_mem(w, NULL, 0, BW_CHUNK * sizeof(*c));
	if (!c)
		return BW_ENOMEM;
	p->chunk[p->nchunks++] = c;
	p->size = (uint32_t)(first + BW_CHUNK);
	pool_thread(p, (uint32_t)first, BW_CHUNK);
	return 0;
}
