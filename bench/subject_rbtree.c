/*
 * subject_rbtree.c - a red-black tree keyed by (deadline, sequence).
 *
 * The design document's BTreeMap<(u64, u32), T> baseline in C: libbsd's
 * <bsd/sys/tree.h> (the BSD kernels' RB_* macros), nodes from a free list,
 * the sequence number breaking ties between equal deadlines in arrival
 * order.  Poll takes the minimum (RB_MIN walks down the left spine) while
 * it is due; cancel is RB_REMOVE of the node the id's ref word points at.
 */
#include <bsd/sys/tree.h>

#include <stdlib.h>

#include "bench.h"

struct rbnode {
	void *pool_link;
	RB_ENTRY(rbnode) link;
	uint64_t deadline, seq;
	uint32_t id;
};

RB_HEAD(rbt, rbnode);

static inline int rb_cmp(const struct rbnode *a, const struct rbnode *b)
{
	if (a->deadline != b->deadline)
		return a->deadline < b->deadline ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* RB_GENERATE_STATIC spelled out: libbsd leaves its __unused undefined */
RB_GENERATE_INTERNAL(rbt, rbnode, link, rb_cmp,
		     __attribute__((__unused__)) static)

struct rbs {
	struct rbt root;
	struct objpool pool;
	uint64_t seq;
	uint64_t *ref;
	struct fire_sink *sink;
};

static int rb_open(const struct subject *s, const struct subject_env *env,
		   void **ctx)
{
	struct rbs *r = calloc(1, sizeof(*r));

	(void)s;
	if (!r)
		return -1;
	RB_INIT(&r->root);
	r->ref = env->ref;
	r->sink = env->sink;
	if (objpool_init(&r->pool, sizeof(struct rbnode), env->max_live,
			 NULL, NULL)) {
		free(r);
		return -1;
	}
	*ctx = r;
	return 0;
}

static void rb_close(void *ctx)
{
	struct rbs *r = ctx;

	objpool_fini(&r->pool);
	free(r);
}

static int rb_insert(void *ctx, uint32_t id, uint64_t deadline)
{
	struct rbs *r = ctx;
	struct rbnode *n = objpool_get(&r->pool);

	if (!n)
		return -1;
	n->deadline = deadline;
	n->seq = r->seq++;
	n->id = id;
	RB_INSERT(rbt, &r->root, n);
	r->ref[id] = (uintptr_t)n;
	return 0;
}

static int rb_cancel(void *ctx, uint32_t id)
{
	struct rbs *r = ctx;
	struct rbnode *n = (struct rbnode *)(uintptr_t)r->ref[id];

	if (!n)
		return -1;
	RB_REMOVE(rbt, &r->root, n);
	r->ref[id] = 0;
	objpool_put(&r->pool, n);
	return 0;
}

static int rb_poll(void *ctx, uint64_t now)
{
	struct rbs *r = ctx;
	struct rbnode *n;

	while ((n = RB_MIN(rbt, &r->root)) && n->deadline <= now) {
		RB_REMOVE(rbt, &r->root, n);
		r->ref[n->id] = 0;
		bench_fired(r->sink, n->id);
		objpool_put(&r->pool, n);
	}
	return 0;
}

const struct subject subject_rbtree = {
	.name = "rbtree",
	.family = "libbsd tree.h",
	.structure = "red-black tree (deadline, seq)",
	.lib_fn = { "rbt_RB_INSERT", "rbt_RB_REMOVE", "rbt_RB_MINMAX" },
	.open = rb_open,
	.close = rb_close,
	.insert = rb_insert,
	.cancel = rb_cancel,
	.poll = rb_poll,
};
