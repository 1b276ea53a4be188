/*
 * gear.c - slots: circular intrusive lists, bitmaps and event ticks.
 *
 * A slot is a list head plus a count.  Lists are circular and doubly
 * linked through rec.next/rec.prev, so push-at-tail and unlink are O(1)
 * and a slot fires in arrival order.  Every change to a slot keeps the
 * gear's two bitmaps (occupied, full) and its cached next-event tick in
 * step; emptying the slot that held the cached minimum only marks the gear
 * dirty, and bw_gear_scan() recomputes it later with one rotate and one
 * count-trailing-zeros.
 *
 * Event tick of slot d in gear g: the slot sits dist = (d - digit(now)) mod
 * 64 slots ahead of the current one (1..63: the current slot is always
 * empty between polls), and comes due at the start of that slot,
 * ((now >> 6g) + dist) << 6g.
 */
#include "wheel-internal.h"

void bw_list_push(struct bw_pool *p, uint32_t *head, uint32_t idx)
{
	struct bw_rec *r = bw_rec_at(p, idx);

	if (*head == BW_NIL) {
		r->next = r->prev = idx;
		*head = idx;
	} else {
		struct bw_rec *h = bw_rec_at(p, *head);
		uint32_t tail = h->prev;

		r->next = *head;
		r->prev = tail;
		bw_rec_at(p, tail)->next = idx;
		h->prev = idx;
	}
}

void bw_list_unlink(struct bw_pool *p, uint32_t *head, uint32_t idx)
{
	struct bw_rec *r = bw_rec_at(p, idx);

	if (r->next == idx) {
		*head = BW_NIL;
		return;
	}
	bw_rec_at(p, r->prev)->next = r->next;
	bw_rec_at(p, r->next)->prev = r->prev;
	if (*head == idx)
		*head = r->next;
}

uint64_t bw_gear_event(const struct bw_wheel *w, unsigned g, unsigned d)
{
	uint64_t base = w->now >> (6 * g);
	uint64_t dist = (d - base) & (BW_SLOTS - 1);

	return (base + dist) << (6 * g);
}

uint64_t bw_gear_scan(const struct bw_wheel *w, unsigned g)
{
	const struct bw_gear *gr = &w->gear[g];
	uint64_t base = w->now >> (6 * g);
	uint64_t r = rotr64(gr->occ, (unsigned)base);

	if (!r)
		return UINT64_MAX;
	return (base + (uint64_t)__builtin_ctzll(r)) << (6 * g);
}

void bw_slot_add(struct bw_wheel *w, unsigned g, uint64_t key, uint32_t idx)
{
	struct bw_gear *gr = &w->gear[g];
	struct bw_rec *r = bw_rec_at(&w->pool, idx);
	unsigned d = (unsigned)key & (BW_SLOTS - 1);
	uint64_t ev = key << (6 * g);

	bw_list_push(&w->pool, &gr->head[d], idx);
	r->loc = (uint16_t)(g * BW_SLOTS + d);
	gr->occ |= 1ull << d;
	if (++gr->count[d] >= w->cfg.slot_cap)
		gr->full |= 1ull << d;
	if (ev < gr->next)
		gr->next = ev;
	if (ev < w->next)
		w->next = ev;
}

void bw_slot_remove(struct bw_wheel *w, unsigned g, unsigned d, uint32_t idx)
{
	struct bw_gear *gr = &w->gear[g];

	bw_list_unlink(&w->pool, &gr->head[d], idx);
	if (--gr->count[d] < w->cfg.slot_cap)
		gr->full &= ~(1ull << d);
	if (gr->count[d] == 0) {
		gr->occ &= ~(1ull << d);
		if (bw_gear_event(w, g, d) == gr->next)
			w->dirty |= 1u << g;
	}
}
