/*
 * map.c - an intrusive chained hash map keyed by 64-bit integers.
 *
 * Nodes live inside the objects they index (a timer, a session), so the
 * map allocates only its bucket array: 2^k pointers, doubled when the
 * count passes the bucket count, so chains stay short on average.  Keys
 * are mixed with a per-daemon random seed, so clients cannot choose keys
 * that pile into one bucket.  find, insert and remove are O(1) on average;
 * growing is O(n) and rare.  Several nodes may share a key (sessions hash
 * their names); bwd_map_next() walks them.
 *
 * A walk that stops and resumes later (bwd_map_scan, for listings paged
 * over many requests) goes in the map's own order: a key's position is
 * its mixed hash with the bits reversed, so a bucket holds one contiguous
 * range of positions whatever the bucket count, and buckets are visited
 * in reverse-binary order (Redis's SCAN).  Resuming from a position
 * therefore returns every key present all along exactly once, however the
 * map grew in between.  Within a bucket the chain's positions not yet
 * passed are sorted, up to SCAN_BATCH at a time, so a page costs O(its
 * nodes + the buckets it crosses) for chains of usual length, and a work
 * bound caps it (a chain is always read whole: one longer than the bound,
 * which only a map that could not grow has, costs a page what it costs
 * every lookup).
 * A position tells the seed: it never leaves the daemon.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-internal.h"

#define INITIAL_BUCKETS 8

int bwd_map_init(struct bwd_map *m, uint64_t seed)
{
	m->bucket = calloc(INITIAL_BUCKETS, sizeof(*m->bucket));
	if (!m->bucket)
		return -ENOMEM;
	m->mask = INITIAL_BUCKETS - 1;
	m->count = 0;
	m->seed = seed;
	return 0;
}

void bwd_map_fini(struct bwd_map *m)
{
	free(m->bucket);
	m->bucket = NULL;
	m->count = 0;
}

struct bwd_map_node *bwd_map_next(struct bwd_map_node *n, uint64_t key)
{
	while (n && n->key != key)
		n = n->next;
	return n;
}

struct bwd_map_node *bwd_map_find(const struct bwd_map *m, uint64_t key)
{
	return bwd_map_next(m->bucket[bwd_mix(key, m->seed) & m->mask], key);
}

static void grow(struct bwd_map *m)
{
	size_t nmask = m->mask * 2 + 1;
	struct bwd_map_node **nb = calloc(nmask + 1, sizeof(*nb));

	/* Without memory the map keeps working, with longer chains. */
	if (!nb)
		return;
	for (size_t i = 0; i <= m->mask; i++) {
		struct bwd_map_node *n = m->bucket[i], *next;

		for (; n; n = next) {
			size_t b = bwd_mix(n->key, m->seed) & nmask;

			next = n->next;
			n->next = nb[b];
			nb[b] = n;
		}
	}
	free(m->bucket);
	m->bucket = nb;
	m->mask = nmask;
}

void bwd_map_insert(struct bwd_map *m, struct bwd_map_node *n)
{
	size_t b;

	if (m->count > m->mask)
		grow(m);
	b = bwd_mix(n->key, m->seed) & m->mask;
	n->next = m->bucket[b];
	m->bucket[b] = n;
	m->count++;
}

void bwd_map_remove(struct bwd_map *m, struct bwd_map_node *n)
{
	struct bwd_map_node **p = &m->bucket[bwd_mix(n->key, m->seed) & m->mask];

	while (*p != n)
		p = &(*p)->next;
	*p = n->next;
	m->count--;
}

static uint64_t reverse64(uint64_t x)
{
	x = ((x >> 1) & 0x5555555555555555ull) | ((x & 0x5555555555555555ull) << 1);
	x = ((x >> 2) & 0x3333333333333333ull) | ((x & 0x3333333333333333ull) << 2);
	x = ((x >> 4) & 0x0f0f0f0f0f0f0f0full) | ((x & 0x0f0f0f0f0f0f0f0full) << 4);
	return __builtin_bswap64(x);
}

/* Chain nodes a scan sorts at once; a longer chain takes more passes. */
#define SCAN_BATCH 16

bool bwd_map_scan(const struct bwd_map *m, uint64_t *pos, size_t work,
		  bool (*visit)(void *arg, struct bwd_map_node *n), void *arg)
{
	/* The positions one bucket covers share their top bits. */
	uint64_t span = ~0ull >> __builtin_popcountll(m->mask);
	uint64_t p = *pos;

	while (work) {
		struct { uint64_t pos; struct bwd_map_node *n; } near[SCAN_BATCH];
		struct bwd_map_node *n = m->bucket[reverse64(p) & m->mask];
		size_t k = 0;
		bool more = false;     /* the chain has more than near holds */

		/* The bucket's least positions from p on, sorted, once each:
		 * the whole chain, whatever the work left, so that a chain
		 * longer than the bound still moves on. */
		for (work--; n; n = n->next, work -= work > 0) {
			uint64_t q = reverse64(bwd_mix(n->key, m->seed));
			size_t i = k;

			if (q < p)
				continue;
			while (i > 0 && near[i - 1].pos > q)
				i--;
			if (i > 0 && near[i - 1].pos == q)
				continue;
			if (i == SCAN_BATCH) {
				more = true;
				continue;
			}
			if (k == SCAN_BATCH) {
				more = true;
				k--;
			}
			memmove(&near[i + 1], &near[i], (k - i) * sizeof(near[0]));
			near[i].pos = q;
			near[i].n = n;
			k++;
		}
		for (size_t i = 0; i < k; i++) {
			if (!visit(arg, near[i].n)) {
				*pos = near[i].pos;
				return false;
			}
		}
		if (more) {
			p = near[k - 1].pos + 1;
			continue;
		}
		if ((p | span) == UINT64_MAX)
			return true;
		p = (p | span) + 1;
	}
	*pos = p;
	return false;
}

size_t bwd_map_bytes(const struct bwd_map *m)
{
	return (m->mask + 1) * sizeof(*m->bucket);
}
