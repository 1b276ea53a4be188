/*
 * dual.c - two failover wheels behind one poll: a periodic lane and a
 * oneshot lane, each with its own resolution and capacity.
 *
 * A lane's handles never use bit 63 (generations are 31 bits), so a dual
 * handle is the lane's handle with bit 63 set for the periodic lane.  An
 * intrusive timer (struct bw_timer, the caller's) carries no handle: the
 * caller names its lane when it adds and when it cancels it, and the
 * timer's own fields say where in that lane's wheel it is.  Every
 * operation costs what it costs on the lane it touches (an intrusive add
 * or cancel is the lane's bw_timer_add/bw_timer_cancel plus a bounds test
 * and a call); poll and next deadline look at both.
 */
#include <stdlib.h>
#include <string.h>

#include "wheel-internal.h"

#define LANE_BIT (1ull << 63)

struct bw_dual {
	struct bw_wheel *lane[2];
};

int bw_dual_new(const struct bw_dual_config *cfg, uint64_t now_ns,
		struct bw_dual **out)
{
	struct bw_config lane_cfg[2];
	struct bw_dual *d;
	int err;

	if (!cfg || !out)
		return BW_EINVAL;
	lane_cfg[BW_LANE_ONESHOT] = cfg->oneshot;
	lane_cfg[BW_LANE_PERIODIC] = cfg->periodic;
	d = calloc(1, sizeof(*d));
	if (!d)
		return BW_ENOMEM;
	for (unsigned i = 0; i < 2; i++) {
		lane_cfg[i].failover = true;
		err = bw_wheel_new(&lane_cfg[i], now_ns, &d->lane[i]);
		if (err)
			goto fail;
	}
	*out = d;
	return 0;
fail:
	bw_dual_free(d);
	return err;
}

void bw_dual_free(struct bw_dual *d)
{
	if (!d)
		return;
	bw_wheel_free(d->lane[0]);
	bw_wheel_free(d->lane[1]);
	free(d);
}

static int insert_lane(struct bw_dual *d, enum bw_lane lane,
		       uint64_t deadline_ns, void *data, bw_handle *out,
		       bool spill)
{
	bw_handle h;
	int err;

	if (!d || !out || (unsigned)lane > BW_LANE_PERIODIC)
		return BW_EINVAL;
	err = spill ? bw_wheel_insert(d->lane[lane], deadline_ns, data, &h) :
		      bw_wheel_try_insert(d->lane[lane], deadline_ns, data, &h);
	if (err)
		return err;
	*out = lane == BW_LANE_PERIODIC ? h | LANE_BIT : h;
	return 0;
}

int bw_dual_insert_periodic(struct bw_dual *d, uint64_t deadline_ns,
			    void *data, bw_handle *out)
{
	return insert_lane(d, BW_LANE_PERIODIC, deadline_ns, data, out, true);
}

int bw_dual_insert_oneshot(struct bw_dual *d, uint64_t deadline_ns,
			   void *data, bw_handle *out)
{
	return insert_lane(d, BW_LANE_ONESHOT, deadline_ns, data, out, true);
}

int bw_dual_try_insert(struct bw_dual *d, enum bw_lane lane,
		       uint64_t deadline_ns, void *data, bw_handle *out)
{
	return insert_lane(d, lane, deadline_ns, data, out, false);
}

int bw_dual_timer_add(struct bw_dual *d, enum bw_lane lane,
		      struct bw_timer *t, uint64_t deadline_ns, void *data)
{
	if (!d || (unsigned)lane > BW_LANE_PERIODIC)
		return BW_EINVAL;
	return bw_timer_add(d->lane[lane], t, deadline_ns, data);
}

int bw_dual_timer_try_add(struct bw_dual *d, enum bw_lane lane,
			  struct bw_timer *t, uint64_t deadline_ns, void *data)
{
	if (!d || (unsigned)lane > BW_LANE_PERIODIC)
		return BW_EINVAL;
	return bw_timer_try_add(d->lane[lane], t, deadline_ns, data);
}

int bw_dual_timer_cancel(struct bw_dual *d, enum bw_lane lane,
			 struct bw_timer *t)
{
	if (!d || (unsigned)lane > BW_LANE_PERIODIC)
		return BW_EINVAL;
	return bw_timer_cancel(d->lane[lane], t);
}

enum bw_lane bw_dual_handle_lane(bw_handle h)
{
	return h & LANE_BIT ? BW_LANE_PERIODIC : BW_LANE_ONESHOT;
}

int bw_dual_cancel(struct bw_dual *d, bw_handle h, void **data_out)
{
	if (!d)
		return BW_EINVAL;
	return bw_wheel_cancel(d->lane[bw_dual_handle_lane(h)], h & ~LANE_BIT,
			       data_out);
}

int bw_dual_deadline(const struct bw_dual *d, bw_handle h, uint64_t *out_ns)
{
	if (!d)
		return BW_EINVAL;
	return bw_wheel_deadline(d->lane[bw_dual_handle_lane(h)],
				 h & ~LANE_BIT, out_ns);
}

int bw_dual_poll(struct bw_dual *d, uint64_t now_ns,
		 const struct bw_callbacks *cb, struct bw_poll_result *res)
{
	struct bw_poll_result sum = { 0 };
	bool due[2];

	if (!d || !cb || !cb->fire)
		return BW_EINVAL;
	if (d->lane[0]->in_poll || d->lane[1]->in_poll)
		return BW_EINPOLL;
	/* Both clocks move before any callback runs, so a callback arms
	 * either lane relative to now, and never into this poll. */
	for (unsigned i = 0; i < 2; i++)
		due[i] = bw_poll_collect(d->lane[i], now_ns);
	for (unsigned i = 0; i < 2; i++)
		if (due[i])
			bw_poll_fire(d->lane[i], now_ns, cb, &sum);
	if (res)
		*res = sum;
	return 0;
}

int bw_dual_set_poll_limit(struct bw_dual *d, size_t max)
{
	if (!d)
		return BW_EINVAL;
	if (d->lane[0]->in_poll || d->lane[1]->in_poll)
		return BW_EINPOLL;
	d->lane[0]->poll_limit = d->lane[1]->poll_limit = max;
	return 0;
}

int bw_dual_next_deadline(struct bw_dual *d, uint64_t *out_ns)
{
	uint64_t t[2];
	int e0, e1;

	if (!d || !out_ns)
		return BW_EINVAL;
	e0 = bw_wheel_next_deadline(d->lane[0], &t[0]);
	e1 = bw_wheel_next_deadline(d->lane[1], &t[1]);
	if (e0 && e1)
		return BW_EEMPTY;
	if (e0)
		*out_ns = t[1];
	else if (e1)
		*out_ns = t[0];
	else
		*out_ns = t[0] < t[1] ? t[0] : t[1];
	return 0;
}

struct bw_wheel *bw_dual_lane(struct bw_dual *d, enum bw_lane lane)
{
	return d && (unsigned)lane < 2 ? d->lane[lane] : NULL;
}

size_t bw_dual_pending(const struct bw_dual *d)
{
	return d ? bw_wheel_pending(d->lane[0]) + bw_wheel_pending(d->lane[1])
		 : 0;
}

size_t bw_dual_footprint(const struct bw_dual *d)
{
	return d ? sizeof(*d) + bw_wheel_footprint(d->lane[0]) +
		   bw_wheel_footprint(d->lane[1])
		 : 0;
}

/* Forwards a lane's visit with the lane bit added to the handle (an
 * intrusive timer's stays 0: it has none). */
struct lane_visit {
	bw_visit_fn fn;
	void *ctx;
	bw_handle bit;
};

static void visit_lane(bw_handle h, uint64_t deadline_ns, void *data,
		       void *ctx)
{
	struct lane_visit *v = ctx;

	v->fn(h ? h | v->bit : 0, deadline_ns, data, v->ctx);
}

static int each_lane(struct bw_dual *d, bw_visit_fn fn, void *ctx,
		     int (*op)(struct bw_wheel *, bw_visit_fn, void *))
{
	if (!d || !fn)
		return BW_EINVAL;
	for (unsigned i = 0; i < 2; i++) {
		struct lane_visit v = { fn, ctx, i == BW_LANE_PERIODIC ? LANE_BIT : 0 };
		int err = op(d->lane[i], visit_lane, &v);

		if (err)
			return err;
	}
	return 0;
}

static int foreach_op(struct bw_wheel *w, bw_visit_fn fn, void *ctx)
{
	return bw_wheel_foreach(w, fn, ctx);
}

int bw_dual_foreach(const struct bw_dual *d, bw_visit_fn fn, void *ctx)
{
	/* each_lane() hands the lanes to foreach, which does not modify them. */
	return each_lane((struct bw_dual *)d, fn, ctx, foreach_op);
}

int bw_dual_drain(struct bw_dual *d, bw_visit_fn fn, void *ctx)
{
	return each_lane(d, fn, ctx, bw_wheel_drain);
}

int bw_dual_check(const struct bw_dual *d, const char **why)
{
	int err;

	if (!d)
		return BW_EINVAL;
	err = bw_wheel_check(d->lane[0], why);
	return err ? err : bw_wheel_check(d->lane[1], why);
}
