/*
 * restore.c - the state written out and read back: every named session,
 * timer and undelivered fire as records (record.c), a snapshot's body
 * (bwd_state_dump), and those records, and the journal's after them,
 * applied at start-up (bwd_state_apply, bwd_state_restore_finish).
 *
 * The same records come back through bwd_state_apply() at start-up, from
 * a snapshot (bwd_state_dump() wrote it) and the journals after it; the
 * timers go into the wheel only once the last record is read
 * (bwd_state_restore_finish), so that replaying a timer's history costs
 * map operations, not wheel ones.
 *
 * Costs: a dump is O(sessions + timers + fires); applying a record is a
 * map lookup, a SENT, DONE, RELEASE or MOVE O(its fire's distance from
 * the queue's head); the end of a restore O(the fires), to find those
 * whose Release delay is not over.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "state-internal.h"

/* ---- writing out and reading back ------------------------------------------- */

static struct bwd_record session_record(const struct bwd_session *s)
{
	return (struct bwd_record){
		.type = BWD_REC_SESSION, .sid = s->id, .seq = s->next_seq,
		.uid = (uint32_t)s->owner, .name = s->name,
		.name_len = (uint8_t)strlen(s->name),
	};
}

static struct bwd_record policy_record(const struct bwd_session *s)
{
	return (struct bwd_record){
		.type = BWD_REC_POLICY, .sid = s->id, .count = s->max_deliveries,
		.name = s->dead_letter,
		.name_len = s->dead_letter ? (uint8_t)strlen(s->dead_letter) : 0,
	};
}

void bwd_state_set_journal(struct bwd_state *st, struct bwd_journal *j)
{
	bool over = st->journal_over;

	st->journal = j;
	/* A new generation: every uid's share starts again. */
	st->journal_over = false;
	for (size_t b = 0; st->uids.bucket && b <= st->uids.mask; b++)
		for (struct bwd_map_node *n = st->uids.bucket[b]; n; n = n->next)
			bwd_container_of(n, struct bwd_uid, node)->journal = 0;
	/* Every journal names the sessions it continues, so that one read
	 * without the snapshot before it (--ignore-snapshot) still knows
	 * whose timers its records are; and the sessions whose owner was
	 * past its share hand out their fires again. */
	for (size_t b = 0; (j || over) && b <= st->sessions.mask; b++) {
		for (struct bwd_map_node *n = st->sessions.bucket[b]; n; n = n->next) {
			struct bwd_session *s =
				bwd_container_of(n, struct bwd_session, node);
			struct bwd_record r = session_record(s);

			if (over)
				bwd_work_add(s);
			if (!j)
				continue;
			bwd_state_journal(st, NULL, &r);
			if (s->policy_set) {
				r = policy_record(s);
				bwd_state_journal(st, NULL, &r);
			}
		}
	}
}

/* ready: a delayed fire's time to go again (0: none). */
static int dump_fire(const struct bwd_session *s, const struct bwd_fire *f,
		     uint64_t ready,
		     int (*emit)(void *, const struct bwd_record *), void *ctx)
{
	struct bwd_record r = {
		.type = BWD_REC_QUEUED, .sid = s->id, .key = f->key,
		.seq = f->seq, .deadline_ns = f->deadline_ns,
		.count = f->wall ? 0 : f->count, .fired_ns = f->fired_ns,
		.flags = (f->has_payload ? BWD_RECF_PAYLOAD : 0) |
			 (f->late ? BWD_RECF_LATE : 0) |
			 (f->sent ? BWD_RECF_SENT : 0) |
			 (f->redelivered ? BWD_RECF_MARKED : 0) |
			 (f->deliveries || ready ? BWD_RECF_HISTORY : 0) |
			 (f->dead ? BWD_RECF_DEAD : 0) |
			 (f->wall ? BWD_RECF_WALL : 0),
		.payload = f->payload, .payload_len = f->payload_len,
		.wall_ns = f->wall ? f->wall_ns : 0,
		.deliveries = f->deliveries, .first_ns = f->first_ns,
		.ready_ns = ready,
	};

	if (f->dead)
		bwd_dead_record(f->dead, &r);
	return emit(ctx, &r);
}

static int dump_fires(const struct bwd_session *s, const struct bwd_fire *f,
		      int (*emit)(void *, const struct bwd_record *), void *ctx)
{
	int err = 0;

	for (; f && !err; f = f->next)
		err = dump_fire(s, f, 0, emit, ctx);
	return err;
}

/* The due list: fires owed (journaled), after the queue's. */
static int dump_due(const struct bwd_session *s,
		    int (*emit)(void *, const struct bwd_record *), void *ctx)
{
	int err = 0;

	for (const struct bwd_due *d = s->due_head; d && !err; d = d->next) {
		const struct bwd_timer *t;
		struct bwd_fire f;

		if (d->kind == BWD_DUE_FIRE) {
			err = dump_fire(s, bwd_container_of(d, struct bwd_fire, due),
					0, emit, ctx);
			continue;
		}
		t = bwd_container_of(d, struct bwd_timer, due);
		f = bwd_timer_fire_of(t, t->fired_ns, 0);
		f.seq = t->seq;
		err = dump_fire(s, &f, 0, emit, ctx);
	}
	return err;
}

static int dump_session(const struct bwd_session *s,
			int (*emit)(void *, const struct bwd_record *), void *ctx)
{
	struct bwd_record r = session_record(s);
	int err = emit(ctx, &r);

	if (!err && s->policy_set) {
		r = policy_record(s);
		err = emit(ctx, &r);
	}

	for (size_t b = 0; !err && b <= s->timers.mask; b++) {
		for (struct bwd_map_node *n = s->timers.bucket[b]; n && !err; n = n->next) {
			const struct bwd_timer *t = bwd_container_of(n, struct bwd_timer, node);
			struct bwd_calendar c;

			if (t->fired)
				continue;
			r = (struct bwd_record){
				.type = BWD_REC_TIMER, .sid = s->id, .key = n->key,
				.deadline_ns = t->deadline_ns,
				.period_ns = bwd_timer_period(t),
				.count = bwd_timer_count(t), .leeway_ns = t->leeway_ns,
				.wall_ns = bwd_wall_ns(s->state, t),
				.flags = (t->has_payload ? BWD_RECF_PAYLOAD : 0) |
					 (t->late ? BWD_RECF_LATE : 0) |
					 (t->leeway_ns != BWD_LEEWAY_DEFAULT ?
					  BWD_RECF_LEEWAY : 0) |
					 (t->wall ? BWD_RECF_WALL : 0) |
					 (t->boot ? BWD_RECF_BOOT : 0),
				.payload = t->payload, .payload_len = t->payload_len,
			};
			if (bwd_cal_info(s->state, t, &c))
				bwd_cal_record(&c, &r);
			err = emit(ctx, &r);
		}
	}
	/* In flight, then queued: in flight ones go back to the front of the
	 * queue when read back, as they would if their consumers left. */
	for (const struct bwd_member *m = s->members; m && !err; m = m->next)
		err = dump_fires(s, m->flight_head, emit, ctx);
	if (!err)
		err = dump_fires(s, s->queue_head, emit, ctx);
	if (!err)
		err = dump_due(s, emit, ctx);
	for (const struct bwd_fire *f = s->delayed_head; f && !err; f = f->next)
		err = dump_fire(s, f, f->ready_ns, emit, ctx);
	return err;
}

int bwd_state_dump(const struct bwd_state *st,
		   int (*emit)(void *ctx, const struct bwd_record *r), void *ctx)
{
	int err = 0;

	for (size_t b = 0; !err && b <= st->sessions.mask; b++)
		for (struct bwd_map_node *n = st->sessions.bucket[b]; n && !err; n = n->next)
			err = dump_session(bwd_container_of(n, struct bwd_session, node),
					   emit, ctx);
	return err;
}

/* A time read back from a file whose clock runs shift ns behind ours;
 * before our clock's zero it is simply long past, and past its end never. */
static uint64_t shifted(uint64_t t, int64_t shift)
{
	uint64_t by = shift < 0 ? 0 - (uint64_t)shift : (uint64_t)shift;

	if (shift < 0)
		return t < by ? 0 : t - by;
	return t > UINT64_MAX - by ? UINT64_MAX : t + by;
}

/* The history of a dead letter read back (its origin's name in r's):
 * 0, BWD_REC_ECORRUPT for a bad name, or -ENOMEM. */
static int dead_of(const struct bwd_record *r, int64_t shift,
		   struct bwd_dead **out)
{
	struct bwd_dead *d;

	*out = NULL;
	if (!r->name_len || !bwp_session_name_valid(r->name, r->name_len))
		return BWD_REC_ECORRUPT;
	if (!(d = malloc(sizeof(*d))))
		return -ENOMEM;
	*d = (struct bwd_dead){
		.deliveries = r->dl_deliveries,
		.first_ns = shifted(r->dl_first_ns, shift),
		.last_ns = shifted(r->last_ns, shift),
		.dead_ns = shifted(r->dead_ns, shift),
		.why = r->why > BWD_TB_RESTARTED ? BWD_TB_NONE : (uint8_t)r->why,
	};
	memcpy(d->origin, r->name, r->name_len);
	d->origin[r->name_len] = '\0';
	*out = d;
	return 0;
}

/* Queue a restored fire at the tail: its seq is the newest so far.
 * wall_ns: its wall-clock deadline (clock.c), or 0. */
static void restore_fire(struct bwd_session *s, const struct bwd_record *r,
			const uint8_t *payload, uint32_t payload_len,
			bool has_payload, uint64_t wall_ns, int64_t shift)
{
	struct bwd_fire f = {
		.key = r->key, .seq = r->seq,
		.deadline_ns = shifted(r->deadline_ns, shift),
		.fired_ns = shifted(r->fired_ns, shift), .count = r->count,
		.late = r->flags & BWD_RECF_LATE, .sent = r->flags & BWD_RECF_SENT,
		.redelivered = r->flags & (BWD_RECF_SENT | BWD_RECF_MARKED),
		.lane = BWD_LANE_NONE,
		.has_payload = has_payload, .payload = payload,
		.payload_len = payload_len, .wall = wall_ns != 0,
	};
	struct bwd_fire *q;

	if (wall_ns)
		f.wall_ns = wall_ns;

	if (r->flags & BWD_RECF_HISTORY) {
		f.deliveries = r->deliveries > UINT32_MAX ? UINT32_MAX :
			(uint32_t)r->deliveries;
		f.first_ns = shifted(r->first_ns, shift);
		f.ready_ns = r->ready_ns ? shifted(r->ready_ns, shift) : 0;
	}
	q = bwd_fire_new(s->state, &f);
	/* A dead letter's history that does not read back is left behind,
	 * not the fire. */
	if (q && (r->flags & BWD_RECF_DEAD) && !dead_of(r, shift, &q->dead))
		bwd_dead_count(s, 1);
	if (q) {
		bwd_fire_enqueue(s, q);
	} else {
		s->dropped++;
		COUNT(s, dropped, 1);
	}
	if (r->seq >= s->next_seq)
		s->next_seq = r->seq + 1;
}

/* The queued fire with this seq, for SENT and DONE. */
static struct bwd_fire *find_fire(struct bwd_session *s, uint64_t seq,
				  struct bwd_fire **prev)
{
	*prev = NULL;
	for (struct bwd_fire *f = s->queue_head; f; *prev = f, f = f->next)
		if (f->seq == seq)
			return f;
	return NULL;
}

/* Unlink the queued fire f (prev before it) from s's queue. */
static void unqueue(struct bwd_session *s, struct bwd_fire *f,
		    struct bwd_fire *prev)
{
	if (prev)
		prev->next = f->next;
	else
		s->queue_head = f->next;
	if (s->queue_tail == f)
		s->queue_tail = prev;
	f->next = NULL;
	bwd_fire_count_queued(s, f, -1);
}

/* A fire went to another session (dead-lettered, or kicked back): both
 * are the same owner's, so only the sessions' counts move. */
static int apply_move(struct bwd_session *s, const struct bwd_record *r,
		      int64_t shift)
{
	struct bwd_session *to = bwd_session_by_id(s->state, r->to);
	struct bwd_fire *prev, *f = find_fire(s, r->seq, &prev);
	struct bwd_dead *d = NULL;

	if (!f || !to || to == s || to->owner != s->owner)
		return BWD_REC_ECORRUPT;
	if (!(r->flags & BWD_RECF_KICK)) {
		int err = dead_of(r, shift, &d);

		if (err)
			return err;
	}
	unqueue(s, f, prev);
	if (f->dead) {
		bwd_dead_count(s, -1);
		free(f->dead);
	}
	f->dead = d;
	if (d)
		bwd_dead_count(to, 1);
	f->seq = r->to_seq;
	f->deliveries = 0;
	f->first_ns = f->ready_ns = 0;
	f->sent = false;
	bwd_fire_count_queued(to, f, 1);
	bwd_fire_link(to, f);
	if (r->to_seq >= to->next_seq)
		to->next_seq = r->to_seq + 1;
	return 0;
}

static int apply_policy(struct bwd_session *s, const struct bwd_record *r)
{
	char *dl = NULL;

	if (r->name_len) {
		if (!bwp_session_name_valid(r->name, r->name_len))
			return BWD_REC_ECORRUPT;
		dl = strndup(r->name, r->name_len);
		if (!dl)
			return -ENOMEM;
	}
	free(s->dead_letter);
	s->dead_letter = dl;
	s->max_deliveries = r->count > UINT32_MAX ? UINT32_MAX : (uint32_t)r->count;
	s->policy_set = true;
	return 0;
}

static int apply_fired(struct bwd_session *s, const struct bwd_record *r,
		       int64_t shift)
{
	struct bwd_timer *t = bwd_timer_find(s, r->key);
	bool cal = r->flags & BWD_RECF_CAL;

	if (!t || cal != t->cal)
		return BWD_REC_ECORRUPT;
	restore_fire(s, r, t->payload, t->payload_len, t->has_payload,
		     cal ? r->wall_ns : t->boot ? 0 : bwd_wall_ns(s->state, t), shift);
	t->late = false;
	if (t->periodic)
		bwd_timer_periodic(t)->count = r->count;
	if (cal)
		bwd_cal_replayed(s->state, t, r->wall_ns, r->base_ns);
	else if (!bwd_timer_advance(t, shifted(r->fired_ns, shift)))
		bwd_timer_free(s->state, t);
	return 0;
}

static int apply_timer(struct bwd_session *s, const struct bwd_record *r,
		       int64_t shift)
{
	struct bwd_schedule req = {
		.key = r->key, .deadline_ns = shifted(r->deadline_ns, shift),
		.period_ns = r->period_ns, .payload = r->payload,
		.payload_len = r->payload_len,
		.has_payload = r->flags & BWD_RECF_PAYLOAD,
		.leeway_ns = r->flags & BWD_RECF_LEEWAY ? r->leeway_ns :
			BWD_LEEWAY_DEFAULT,
		.wall_ns = r->flags & BWD_RECF_WALL ? r->wall_ns : 0,
		.boot = (r->flags & (BWD_RECF_WALL | BWD_RECF_BOOT)) ==
			(BWD_RECF_WALL | BWD_RECF_BOOT),
	};
	struct bwd_timer *old = bwd_timer_find(s, r->key), *t;
	char spec[BWD_CAL_TIMER_SPEC_MAX + 1], why[128];
	struct bwd_calendar c;
	uint64_t wall;

	/* A boottime deadline from another boot (shift is not 0) means
	 * nothing now: it crosses the reboot as a monotonic one does, by
	 * the wall clock (store.c), from where it was placed. */
	if (req.boot && shift) {
		uint64_t mono = bw_now_ns(), boot = bwd_boottime_ns();

		req.wall_ns = req.deadline_ns > UINT64_MAX - (boot - mono) ?
			UINT64_MAX : req.deadline_ns + (boot - mono);
	}
	if (r->flags & BWD_RECF_CAL) {
		memcpy(spec, r->name, r->name_len);
		spec[r->name_len] = '\0';
		c = (struct bwd_calendar){
			.spec = spec, .base_ns = r->base_ns,
			.jitter_ns = r->jitter_ns, .seed = r->seed,
			.grace_ns = r->grace_ns,
			.fixed = r->flags & BWD_RECF_CAL_FIXED,
			.has_grace = r->flags & BWD_RECF_CAL_GRACE,
		};
		/* A zone gone from the tz database since, say: the timer
		 * is left behind, the rest of the state read on.  One with
		 * no elapse left is freed at the restore's end. */
		switch (bwd_cal_check(&c, &wall, why, sizeof(why))) {
		case 0:
		case -ENOENT:
			break;
		case -ENOMEM:
			return -ENOMEM;
		default:
			bwd_log(BWD_LOG_ERR, "session '%s': calendar timer %" PRIu64 " not restored: %s",
				s->name, r->key, why);
			return BWD_REC_ECORRUPT;
		}
		req.cal = &c;
	}
	t = bwd_timer_new(s, &req);
	if (!t)
		return -ENOMEM;
	if (t->periodic)
		bwd_timer_periodic(t)->count = r->count;
	t->late = r->flags & BWD_RECF_LATE;
	if (old)
		bwd_timer_free(s->state, old);
	bwd_timer_add(s, t);
	return 0;
}

int bwd_state_apply(struct bwd_state *st, const struct bwd_record *r,
		    int64_t shift_ns)
{
	struct bwd_session *s = r->type == BWD_REC_TRAILER ? NULL :
		bwd_session_by_id(st, r->sid);
	struct bwd_timer *t;
	struct bwd_fire *f, *prev;
	char name[BWP_SESSION_NAME_MAX + 1];

	st->restoring = true;
	if (r->type == BWD_REC_SESSION) {
		if (r->sid == 0 || r->name_len == 0 || r->name_len > BWP_SESSION_NAME_MAX)
			return BWD_REC_ECORRUPT;
		memcpy(name, r->name, r->name_len);
		name[r->name_len] = '\0';
		/* A journal starts by naming the sessions it continues. */
		if (s) {
			if (strcmp(s->name, name) || s->owner != (uid_t)r->uid)
				return BWD_REC_ECORRUPT;
			if (r->seq > s->next_seq)
				s->next_seq = r->seq;
			return 0;
		}
		if (!bwp_session_name_valid(name, r->name_len) ||
		    bwd_session_find(st, (uid_t)r->uid, name))
			return BWD_REC_ECORRUPT;
		if (bwd_session_new(st, name, (uid_t)r->uid, r->sid, &s))
			return -ENOMEM;
		s->next_seq = r->seq;
		return 0;
	}
	if (!s)
		return BWD_REC_ECORRUPT;
	switch (r->type) {
	case BWD_REC_END:
		bwd_session_free(s);
		return 0;
	case BWD_REC_TIMER:
		return apply_timer(s, r, shift_ns);
	case BWD_REC_CANCEL:
		t = bwd_timer_find(s, r->key);
		if (!t)
			return BWD_REC_ECORRUPT;
		bwd_timer_free(st, t);
		return 0;
	case BWD_REC_FIRE:
		return apply_fired(s, r, shift_ns);
	case BWD_REC_QUEUED:
		restore_fire(s, r, r->payload, r->payload_len,
			     r->flags & BWD_RECF_PAYLOAD,
			     r->flags & BWD_RECF_WALL ? r->wall_ns : 0, shift_ns);
		return 0;
	case BWD_REC_SENT:
		f = find_fire(s, r->seq, &prev);
		if (!f)
			return BWD_REC_ECORRUPT;
		f->sent = f->redelivered = true;
		f->ready_ns = 0;
		if (!(r->flags & BWD_RECF_HISTORY)) {
			/* Written before counts were: once at least. */
			f->deliveries = f->deliveries ? f->deliveries : 1;
			return 0;
		}
		f->deliveries = r->deliveries > UINT32_MAX ? UINT32_MAX :
			(uint32_t)r->deliveries;
		f->first_ns = shifted(r->fired_ns, shift_ns);
		return 0;
	case BWD_REC_RELEASE:
		f = find_fire(s, r->seq, &prev);
		if (!f)
			return BWD_REC_ECORRUPT;
		f->ready_ns = shifted(r->ready_ns, shift_ns);
		f->why = BWD_TB_RELEASED;
		return 0;
	case BWD_REC_MOVE:
		return apply_move(s, r, shift_ns);
	case BWD_REC_POLICY:
		return apply_policy(s, r);
	case BWD_REC_DONE:
		f = find_fire(s, r->seq, &prev);
		if (!f)
			return BWD_REC_ECORRUPT;
		unqueue(s, f, prev);
		bwd_fire_free(s, f);
		return 0;
	default:
		return BWD_REC_ECORRUPT;
	}
}

/* Fires read back: those handed out before were in flight, or taken
 * back, when the daemon stopped; those released with a delay that is not
 * over wait it out (O(the queue)). */
static void restore_delayed(struct bwd_session *s, uint64_t now)
{
	struct bwd_fire *f, *prev = NULL, *next;

	for (f = s->queue_head; f; f = next) {
		next = f->next;
		if (f->sent && f->why == BWD_TB_NONE)
			f->why = BWD_TB_RESTARTED;
		if (f->ready_ns <= now) {
			f->ready_ns = 0;
			prev = f;
			continue;
		}
		unqueue(s, f, prev);
		bwd_fire_delay(s, f);
	}
}

int bwd_state_restore_finish(struct bwd_state *st, uint64_t now_ns,
			     struct bwd_state_stats *restored)
{
	memset(restored, 0, sizeof(*restored));
	st->restoring = false;
	for (size_t b = 0; b <= st->sessions.mask; b++) {
		for (struct bwd_map_node *n = st->sessions.bucket[b], *next; n; n = next) {
			struct bwd_session *s = bwd_container_of(n, struct bwd_session, node);

			next = n->next;
			for (size_t tb = 0; tb <= s->timers.mask; tb++) {
				for (struct bwd_map_node *tn = s->timers.bucket[tb], *tnext;
				     tn; tn = tnext) {
					struct bwd_timer *t = bwd_container_of(tn, struct bwd_timer, node);

					tnext = tn->next;
					if (t->cal && !bwd_cal_restore(st, t, bwd_realtime_ns())) {
						bwd_log(BWD_LOG_INFO, "session '%s': calendar timer %" PRIu64 " elapses no more",
							s->name, tn->key);
						bwd_timer_free(st, t);
						continue;
					}
					/* A wall-clock timer's deadline comes
					 * from the wall clock now, whatever
					 * boot or clock the journal saw; a
					 * boottime one's from CLOCK_BOOTTIME. */
					if (t->wall) {
						uint64_t real = t->boot ? bwd_boottime_ns() :
							bwd_realtime_ns(),
							 wall = bwd_wall_ns(st, t);

						t->deadline_ns = bwd_wall_place(wall, now_ns, real);
						if (wall <= real)
							t->late = true;
					} else if (t->deadline_ns < now_ns) {
						t->late = true;
					}
					if (bwd_timer_arm(st, t)) {
						bwd_log(BWD_LOG_ERR, "session '%s': no memory to restore a timer",
							s->name);
						bwd_timer_free(st, t);
						continue;
					}
					restored->timers++;
				}
			}
			restore_delayed(s, now_ns);
			restored->queued += s->queued;
			restored->sessions++;
			bwd_session_linger(s);
		}
	}
	return 0;
}
