/*
 * subject_bitwheel.c - libbitwheel's plain, failover and dual wheels, and
 * the intrusive API on a plain or failover wheel.
 *
 * The timer's data pointer carries its id, and the handle goes into the
 * id's ref word; a refused insert leaves 0 there, which no live handle
 * ever is, so its later cancel is an ordinary BW_ENOTFOUND.  Time goes in
 * as it is: the wheel never reads a clock.
 */
#include <bitwheel.h>

#include <stdlib.h>

#include "bench.h"

struct bws {
	struct bw_wheel *w;
	struct bw_dual *d;
	struct bw_timer *timer;  /* intrusive: one per id, the caller's own */
	uint64_t *ref;
	struct bw_callbacks cb;
};

static uint64_t on_fire(void *data, uint64_t now_ns, void *ctx)
{
	(void)now_ns;
	bench_fired(ctx, (uint32_t)(uintptr_t)data);
	return 0;
}

static struct bws *bws_new(const struct subject_env *env)
{
	struct bws *b = calloc(1, sizeof(*b));

	if (b) {
		b->ref = env->ref;
		b->cb = (struct bw_callbacks){ .fire = on_fire,
					       .ctx = env->sink };
	}
	return b;
}

static void fill_counters(struct subject_counters *out,
			  const struct bw_wheel *w)
{
	struct bw_counters c;

	bw_wheel_counters(w, &c);
	out->valid = true;
	out->probed += c.probed;
	out->overflowed += c.overflowed;
	out->reslotted += c.reslotted;
	out->overfilled += c.overfilled;
	out->footprint += bw_wheel_footprint(w);
}

/* ---- plain and failover ------------------------------------------------ */

static int wheel_open(const struct subject *s, const struct subject_env *env,
		      void **ctx)
{
	const struct bw_subject_param *p = s->param;
	struct bw_config cfg;
	struct bws *b;
	int err = bw_config_preset((enum bw_preset)p->preset, &cfg);

	if (err)
		return err;
	if (p->slot_cap)
		cfg.slot_cap = p->slot_cap;
	cfg.precision = (enum bw_precision)p->precision;
	cfg.failover = p->kind == BWS_FAILOVER || p->kind == BWS_INTR_FAILOVER;
	b = bws_new(env);
	if (!b)
		return BW_ENOMEM;
	if (p->kind >= BWS_INTR) {
		b->timer = calloc(env->nids, sizeof(*b->timer));
		if (!b->timer) {
			free(b);
			return BW_ENOMEM;
		}
		for (uint32_t id = 0; id < env->nids; id++)
			bw_timer_init(&b->timer[id]);
	}
	err = bw_wheel_new(&cfg, env->start_ns, &b->w);
	if (err) {
		free(b->timer);
		free(b);
		return err;
	}
	*ctx = b;
	return 0;
}

static void wheel_close(void *ctx)
{
	struct bws *b = ctx;

	bw_wheel_free(b->w);
	free(b->timer);
	free(b);
}

static int wheel_insert(void *ctx, uint32_t id, uint64_t deadline)
{
	struct bws *b = ctx;
	bw_handle h = 0;
	int err = bw_wheel_insert(b->w, deadline, (void *)(uintptr_t)id, &h);

	b->ref[id] = h;
	return err;
}

static int wheel_cancel(void *ctx, uint32_t id)
{
	struct bws *b = ctx;

	return bw_wheel_cancel(b->w, b->ref[id], NULL);
}

static int wheel_poll(void *ctx, uint64_t now)
{
	struct bws *b = ctx;

	return bw_wheel_poll(b->w, now, &b->cb, NULL);
}

static void wheel_counters(void *ctx, struct subject_counters *out)
{
	struct bws *b = ctx;

	fill_counters(out, b->w);
}

const struct subject subject_bw_wheel = {
	.family = "bitwheel",
	.structure = "hierarchical timer wheel",
	.lib_fn = { "bw_wheel_insert", "bw_wheel_cancel", "bw_wheel_poll" },
	.open = wheel_open,
	.close = wheel_close,
	.insert = wheel_insert,
	.cancel = wheel_cancel,
	.poll = wheel_poll,
	.counters = wheel_counters,
};

/* ---- intrusive: a struct bw_timer per id, no handle ---------------------- */

static int timer_insert(void *ctx, uint32_t id, uint64_t deadline)
{
	struct bws *b = ctx;

	return bw_timer_add(b->w, &b->timer[id], deadline,
			    (void *)(uintptr_t)id);
}

static int timer_cancel(void *ctx, uint32_t id)
{
	struct bws *b = ctx;

	return bw_timer_cancel(b->w, &b->timer[id]);
}

const struct subject subject_bw_timer = {
	.family = "bitwheel",
	.structure = "hierarchical timer wheel, intrusive timers",
	.lib_fn = { "bw_timer_add", "bw_timer_cancel", "bw_wheel_poll" },
	.open = wheel_open,
	.close = wheel_close,
	.insert = timer_insert,
	.cancel = timer_cancel,
	.poll = wheel_poll,
	.counters = wheel_counters,
};

/* ---- dual: every timer here is a oneshot ---------------------------------- */

static int dual_open(const struct subject *s, const struct subject_env *env,
		     void **ctx)
{
	const struct bw_subject_param *p = s->param;
	struct bw_dual_config cfg;
	struct bws *b;
	int err = bw_dual_config_preset((enum bw_dual_preset)p->preset, &cfg);

	if (err)
		return err;
	if (p->slot_cap)
		cfg.oneshot.slot_cap = p->slot_cap;
	cfg.oneshot.precision = cfg.periodic.precision =
		(enum bw_precision)p->precision;
	b = bws_new(env);
	if (!b)
		return BW_ENOMEM;
	err = bw_dual_new(&cfg, env->start_ns, &b->d);
	if (err) {
		free(b);
		return err;
	}
	*ctx = b;
	return 0;
}

static void dual_close(void *ctx)
{
	struct bws *b = ctx;

	bw_dual_free(b->d);
	free(b);
}

static int dual_insert(void *ctx, uint32_t id, uint64_t deadline)
{
	struct bws *b = ctx;
	bw_handle h = 0;
	int err = bw_dual_insert_oneshot(b->d, deadline, (void *)(uintptr_t)id,
					 &h);

	b->ref[id] = h;
	return err;
}

static int dual_cancel(void *ctx, uint32_t id)
{
	struct bws *b = ctx;

	return bw_dual_cancel(b->d, b->ref[id], NULL);
}

static int dual_poll(void *ctx, uint64_t now)
{
	struct bws *b = ctx;

	return bw_dual_poll(b->d, now, &b->cb, NULL);
}

static void dual_counters(void *ctx, struct subject_counters *out)
{
	struct bws *b = ctx;

	fill_counters(out, bw_dual_lane(b->d, BW_LANE_ONESHOT));
	fill_counters(out, bw_dual_lane(b->d, BW_LANE_PERIODIC));
}

const struct subject subject_bw_dual = {
	.family = "bitwheel",
	.structure = "two hierarchical timer wheels",
	.lib_fn = { "bw_dual_insert_oneshot", "bw_dual_cancel",
		    "bw_dual_poll" },
	.open = dual_open,
	.close = dual_close,
	.insert = dual_insert,
	.cancel = dual_cancel,
	.poll = dual_poll,
	.counters = dual_counters,
};
