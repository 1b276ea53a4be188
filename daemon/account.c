/*
 * account.c - per-uid accounts: what each uid has in the daemon, against
 * its budgets.
 *
 * Budgets.  Each uid with anything in the daemon has a struct bwd_uid in
 * a map keyed by the uid, freed once its counts are all 0: connections
 * (counted from accept, bwd_state_conn_open, to conn_free), named
 * sessions, all sessions (what keeps s->acct valid), pending timers,
 * undelivered fires (queued or in flight), the periodic rate, the sum
 * of bwd_periodic_mhz() over its periodic timers, and its bytes: the
 * BWD_TIMER_COST of its timers, the BWD_FIRE_COST of its fires and its
 * connections' unread output (conn.c tells it, bwd_state_output).  The
 * state keeps the sum of every uid's bytes too (held), for max_memory.
 * Timers and the rate follow timer_add and free_timer; fires, enqueue_tail
 * (a new fire) and fire_free.  Admission checks them (bwd_state_conn_open,
 * a new named session in bwd_session_attach, bwd_timer_schedule) against
 * the *_per_uid limits, sparing uid 0, and the held bytes against
 * max_memory, sparing nobody; a periodic fire that would take its owner
 * past what it may hold (bwd_acct_cap) is dropped like one past
 * max_queued.
 * Shares of max_memory: a uid with budgets may hold at most half of what
 * the other uids leave of it (NO_MEMORY past that), a uid without (an
 * exempt root) all they leave; so bwd_acct_cap is the least of its bytes
 * budget, that share and max_memory itself.  Whoever comes finds at
 * least half of what is left: uids that fill theirs in turn, at budgets
 * of a quarter, stop at 1/4, 1/4, 1/4, 1/8 (7/8 in all, whatever the
 * order), k growing together at 1/(k + 1) each, and no reserve per uid
 * is needed.  One that is over its share because others grew keeps what
 * it has.  Output is held to the same cap, not refused: a connection of
 * a uid at it (bwd_state_output_full) takes no more while it has output
 * unread (conn.c), so a uid passes it by at most a reply and a fire per
 * connection.  Recovery counts through the same paths and never checks,
 * so a uid whose journal holds more than lowered budgets admit is simply
 * over them until it shrinks.  Each check is one map lookup.  The same
 * entry keeps the uid's share of every Stats figure (COUNT beside each
 * daemon-wide one; its timers' lane counters beside the wheel's), so
 * that a uid's own Stats cost O(1) too.
 * The journal share: every record of a uid's named sessions (timers,
 * cancels, fires, hand-outs, acks, releases, moves, policies, ends) adds
 * its size to the uid's count as it is appended (bwd_acct_journal), which
 * the next generation (bwd_state_set_journal) sets back to 0 for all.
 * Past max_journal_per_uid, sparing an exempt root, the uid's named
 * sessions make no record by choice until then: a Schedule, a new named
 * session, a Release, a Kick or a SetPolicy is refused (OVER_BUDGET), a
 * periodic fire is dropped like one past max_queued, and its fires are
 * not handed out (they wait in their queues; delivery.c).  What it still
 * journals is what it already holds coming to its end: one FIRE per
 * oneshot timer, a DONE or MOVE per fire in flight, a CANCEL per timer,
 * an END per session; so no uid's records pass its share by more than
 * the records of what it holds, and another uid's are never refused for
 * them.  The first uid past its share in a generation asks the store
 * for the next one (bwd_state_journal_over).
 */
#include <stdlib.h>
#include <string.h>

#include "state-internal.h"

struct bwd_uid *bwd_acct_find(const struct bwd_state *st, uid_t uid)
{
	struct bwd_map_node *n = bwd_map_find(&st->uids, (uint64_t)uid);

	return n ? bwd_container_of(n, struct bwd_uid, node) : NULL;
}

/* uid's entry, made if need be; NULL without memory. */
struct bwd_uid *bwd_acct_get(struct bwd_state *st, uid_t uid)
{
	struct bwd_uid *u = bwd_acct_find(st, uid);

	if (u)
		return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->node.key = (uint64_t)uid;
	u->lim = bwd_budget_of(st->budgets, uid);
	u->work.tail = &u->work.head;
	bwd_map_insert(&st->uids, &u->node);
	return u;
}

/* Forget u once nothing of its uid is left. */
void bwd_acct_put(struct bwd_state *st, struct bwd_uid *u)
{
	if (u->conns || u->sessions)
		return;
	bwd_map_remove(&st->uids, &u->node);
	bwd_wheels_drop(st, u);
	bwd_map_fini(&u->listed);
	free(u);
}

/* The budgets of an owner (lim, its entry's) that bind what caller does:
 * none when the owner is exempt, or the caller is root acting in another
 * uid's namespace, unless root has budgets of its own. */
const struct bwd_budget *bwd_acct_binding(const struct bwd_state *st, uid_t caller,
					  const struct bwd_budget *lim)
{
	if (caller == 0 && !bwd_budget_of(st->budgets, 0))
		return NULL;
	return lim;
}

int bwd_state_conn_open(struct bwd_state *st, uid_t uid)
{
	struct bwd_uid *u = bwd_acct_find(st, uid);
	const struct bwd_budget *lim = u ? u->lim : bwd_budget_of(st->budgets, uid);

	if (lim && (u ? u->conns : 0) >= lim->clients)
		return BITWHEEL__V1__ERROR_CODE__TOO_MANY_CLIENTS;
	u = bwd_acct_get(st, uid);
	if (!u)
		return BITWHEEL__V1__ERROR_CODE__NO_MEMORY;
	u->conns++;
	return 0;
}

void bwd_state_conn_close(struct bwd_state *st, uid_t uid)
{
	struct bwd_uid *u = bwd_acct_find(st, uid);

	if (!u || !u->conns)
		return;
	u->conns--;
	bwd_acct_put(st, u);
}

/* u's bytes change by n. */
void bwd_acct_charge(struct bwd_state *st, struct bwd_uid *u, int64_t n)
{
	u->bytes += (uint64_t)n;
	st->held += (uint64_t)n;
}

const struct bwd_budgets *bwd_state_budgets(const struct bwd_state *st)
{
	return st->budgets;
}

void bwd_state_set_budgets(struct bwd_state *st, const struct bwd_budgets *b)
{
	st->budgets = b;
	for (size_t i = 0; i <= st->uids.mask; i++)
		for (struct bwd_map_node *n = st->uids.bucket[i]; n; n = n->next) {
			struct bwd_uid *u = bwd_container_of(n, struct bwd_uid, node);

			u->lim = bwd_budget_of(b, (uid_t)n->key);
		}
}

struct bwd_uid *bwd_state_uid(struct bwd_state *st, uid_t uid)
{
	return bwd_acct_find(st, uid);
}

void bwd_state_output(struct bwd_state *st, struct bwd_uid *u, int64_t n)
{
	bwd_acct_charge(st, u, n);
}

/* What the uids other than u leave of max_memory. */
static uint64_t left_by_others(const struct bwd_state *st, const struct bwd_uid *u)
{
	uint64_t max = st->opt->limits.max_memory;
	uint64_t others = st->held - (u ? u->bytes : 0);

	return others < max ? max - others : 0;
}

uint64_t bwd_acct_cap(const struct bwd_state *st, const struct bwd_uid *u,
		      const struct bwd_budget *lim)
{
	uint64_t left = left_by_others(st, u);

	if (!lim)
		return left;
	return lim->bytes < left / 2 ? lim->bytes : left / 2;
}

uint64_t bwd_state_share(const struct bwd_state *st, uid_t uid)
{
	return left_by_others(st, bwd_acct_find(st, uid)) / 2;
}

bool bwd_state_output_full(const struct bwd_state *st, const struct bwd_uid *u)
{
	return u->bytes >= bwd_acct_cap(st, u, u->lim);
}

uint64_t bwd_state_held(const struct bwd_state *st)
{
	return st->held;
}

void bwd_state_uid_usage(const struct bwd_state *st, uid_t uid,
			 struct bwd_uid_usage *out)
{
	const struct bwd_uid *u = bwd_acct_find(st, uid);

	memset(out, 0, sizeof(*out));
	if (!u)
		return;
	out->connections = u->conns;
	out->sessions = u->named;
	out->timers = u->timers + u->fires;
	out->periodic_mhz = u->periodic_mhz;
	out->journal = u->journal;
	out->bytes = u->bytes;
	out->queued = u->queued;
	out->in_flight = u->in_flight;
	out->consumers = u->consumers;
	out->dropped = u->dropped;
	out->acked = u->acked;
	out->redelivered = u->redelivered;
	out->expired = u->expired;
	memcpy(out->lane, u->lane, sizeof(out->lane));
}

bool bwd_acct_journal_over(const struct bwd_state *st, const struct bwd_uid *u)
{
	return u->lim && u->journal >= st->opt->limits.max_journal_per_uid;
}

/* n bytes of a record of u's named sessions were appended. */
void bwd_acct_journal(struct bwd_state *st, struct bwd_uid *u, uint64_t n)
{
	u->journal += n;
	if (bwd_acct_journal_over(st, u))
		st->journal_over = true;
}

bool bwd_state_journal_over(const struct bwd_state *st)
{
	return st->journal_over;
}

uint64_t bwd_state_item_bytes(const struct bwd_state *st)
{
	return st->stats.bytes;
}

void bwd_state_set_storage_down(struct bwd_state *st, bool down)
{
	st->storage_down = down;
}

bool bwd_session_journal_refuses(const struct bwd_session *s, uid_t caller)
{
	const struct bwd_state *st = s->state;

	return s->name && bwd_acct_binding(st, caller, s->acct->lim) &&
	       s->acct->journal >= st->opt->limits.max_journal_per_uid;
}

/* A timer's lane counters in its owner's entry: the field's count by n. */
void bwd_acct_lane(const struct bwd_timer *t, size_t field, int64_t n)
{
	struct bwd_lane_usage *l =
		&t->session->acct->lane[t->lane];

	*(uint64_t *)((char *)l + field) += (uint64_t)n;
}

/*
 * Whether u may hand out one more taken-back fire at now; if not, *wait_ns
 * until it may.  A token bucket filled at u's periodic-rate budget (at
 * least BWD_MIN_REDELIVERY_MHZ), holding a second's worth: a consumer that
 * never acknowledges, or comes and goes, costs its own uid's rate, not
 * the host's loop.  Root, without a budget, is not paced.
 */
bool bwd_acct_pace(struct bwd_uid *u, uint64_t now, uint64_t *wait_ns)
{
	uint64_t rate, dt;

	if (!u->lim || u->lim->periodic_mhz == UINT64_MAX)
		return true;
	rate = u->lim->periodic_mhz > BWD_MIN_REDELIVERY_MHZ ?
		u->lim->periodic_mhz : BWD_MIN_REDELIVERY_MHZ;
	dt = now - u->pace_ns < 1000000000u ? now - u->pace_ns : 1000000000u;
	u->pace_tokens += (uint64_t)((unsigned __int128)dt * rate / 1000000000u);
	if (u->pace_tokens > rate)
		u->pace_tokens = rate;
	u->pace_ns = now;
	if (u->pace_tokens >= 1000u) {
		u->pace_tokens -= 1000u;
		return true;
	}
	*wait_ns = (uint64_t)((unsigned __int128)(1000u - u->pace_tokens) *
			      1000000000u / rate) + 1;
	return false;
}
