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
 */
#include <errno.h>
#include <stdlib.h>

#include "daemon-internal.h"

#define INITIAL_BUCKETS 8

static inline uint64_t mix(uint64_t x, uint64_t seed)
{
	x ^= seed;
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

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
	return bwd_map_next(m->bucket[mix(key, m->seed) & m->mask], key);
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
			size_t b = mix(n->key, m->seed) & nmask;

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
	b = mix(n->key, m->seed) & m->mask;
	n->next = m->bucket[b];
	m->bucket[b] = n;
	m->count++;
}

void bwd_map_remove(struct bwd_map *m, struct bwd_map_node *n)
{
	struct bwd_map_node **p = &m->bucket[mix(n->key, m->seed) & m->mask];

	while (*p != n)
		p = &(*p)->next;
	*p = n->next;
	m->count--;
}

size_t bwd_map_bytes(const struct bwd_map *m)
{
	return (m->mask + 1) * sizeof(*m->bucket);
}
