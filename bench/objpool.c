/*
 * objpool.c - the free list the peers take their timer objects from.
 *
 * bitwheel keeps its timer records in its own pool; a C programmer using a
 * heap or tree library keeps the timer structs it embeds somewhere too,
 * and a free list is the cheapest such place.  Objects come in chunks of
 * at least 1024, made up front for the scenario's peak (so measured
 * inserts do not allocate), and the library's one-time per-object set-up
 * (ev_init, uv_timer_init, event_assign) runs once, when the chunk is
 * made.  The first word of each object is the free-list link.
 */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int objpool_init(struct objpool *p, size_t size, size_t prealloc,
		 void (*init)(void *obj, void *arg), void *arg)
{
	memset(p, 0, sizeof(*p));
	p->size = (size + 15) & ~(size_t)15;
	p->init = init;
	p->arg = arg;
	p->per_chunk = prealloc > 1024 ? prealloc : 1024;
	return objpool_grow(p);
}

int objpool_grow(struct objpool *p)
{
	char *c;

	if (p->nchunks == p->cap) {
		size_t ncap = p->cap ? p->cap * 2 : 8;
		struct objpool_chunk *nc = realloc(p->chunk, ncap * sizeof(*nc));

		if (!nc)
			return -1;
		p->chunk = nc;
		p->cap = ncap;
	}
	/* written through now, so no page faults later in a timed insert
	 * (explicit_bzero: a plain memset after malloc becomes calloc) */
	c = malloc(p->per_chunk * p->size);
	if (!c)
		return -1;
	explicit_bzero(c, p->per_chunk * p->size);
	p->chunk[p->nchunks++] = (struct objpool_chunk){ c, p->per_chunk };
	for (size_t i = p->per_chunk; i-- > 0;) {
		void *o = c + i * p->size;

		if (p->init)
			p->init(o, p->arg);
		objpool_put(p, o);
	}
	/* later chunks are smaller: they only catch what the hint missed */
	p->per_chunk = 1024;
	return 0;
}

void objpool_each(struct objpool *p, void (*fn)(void *obj, void *arg),
		  void *arg)
{
	for (size_t k = 0; k < p->nchunks; k++)
		for (size_t i = 0; i < p->chunk[k].n; i++)
			fn((char *)p->chunk[k].mem + i * p->size, arg);
}

void objpool_fini(struct objpool *p)
{
	for (size_t k = 0; k < p->nchunks; k++)
		free(p->chunk[k].mem);
	free(p->chunk);
	memset(p, 0, sizeof(*p));
}
