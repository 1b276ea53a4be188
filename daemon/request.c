/*
 * request.c - what each request does, and the reply it gets.
 *
 * One function per request type turns the decoded request into a call on
 * the state (state.c) and fills in exactly one reply in the caller's
 * struct bwd_reply: its own *_reply or an Error carrying the request's id
 * (PROTOCOL.md sections 5, 6 and 9), or none for an Ack without an id.
 * Requests that break the connection's rules (no request_id, nothing
 * before Hello, a failed Hello, a non-request body, an Ack of a fire never
 * sent) also set reply->close.  While the storage is down (store.c), a
 * change to a named session whose reply would vouch for its durability
 * (Schedule, Cancel, an Ack with an id, a Hello creating the session) is
 * refused with STORAGE_UNAVAILABLE.  The listings (ListSessions,
 * ListTimers) are read-only: a page of at most BWD_LIST_MAX entries, and
 * what fits max_frame, in a block this file allocates and
 * bwd_reply_free() frees once conn.c has packed it; where the listing
 * stopped stays with the connection (struct bwd_list_cursor), the client
 * gets a token for it.  A non-root caller sees only its own uid's, and is
 * refused another's before anything is looked up.  Calendar (a calendar
 * event's next elapses, by calendar.c) is read-only too, and its reply's
 * elapses live in such a block.  Nothing here writes bytes: the connection
 * (conn.c) packs and sends what it is given.  Payloads and keys are logged
 * only at debug level.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calendar-internal.h"
#include "daemon-internal.h"
#include "duration.h"

#define PROTOCOL_NAME(code) BITWHEEL__V1__ERROR_CODE__##code

typedef Bitwheel__V1__Envelope Envelope;

/* Start a reply to a request with this id (has_id false: none). */
static void reply_init(struct bwd_reply *out, bool has_id, uint64_t id,
		       Bitwheel__V1__Envelope__BodyCase body)
{
	bitwheel__v1__envelope__init(&out->env);
	out->env.has_request_id = has_id;
	out->env.request_id = id;
	out->env.body_case = body;
	out->none = out->close = out->heavy = out->fast = false;
	out->heap = NULL;
}

/* A hot reply (ScheduleReply, CancelReply, AckReply) to the request with
 * this id: its fields go in out->resp, which conn.c packs as it is. */
static struct bwp_response *fast_reply(struct bwd_reply *out, uint64_t id,
				       Bitwheel__V1__Envelope__BodyCase body)
{
	out->resp = (struct bwp_response){
		.body_case = body, .has_request_id = true, .request_id = id,
	};
	out->fast = true;
	out->none = out->close = out->heavy = false;
	out->heap = NULL;
	return &out->resp;
}

void bwd_reply_free(struct bwd_reply *r)
{
	free(r->heap);
	r->heap = NULL;
}

static void verror(struct bwd_reply *out, bool has_id, uint64_t id,
		   Bitwheel__V1__ErrorCode code, bool close, const char *fmt,
		   va_list ap)
{
	vsnprintf(out->message, sizeof(out->message), fmt, ap);
	reply_init(out, has_id, id, BITWHEEL__V1__ENVELOPE__BODY_ERROR);
	bitwheel__v1__error__init(&out->body.error);
	out->body.error.has_code = 1;
	out->body.error.code = code;
	out->body.error.message = out->message;
	out->env.error = &out->body.error;
	out->close = close;
}

static void error(struct bwd_reply *out, bool has_id, uint64_t id,
		  Bitwheel__V1__ErrorCode code, bool close, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
static void error(struct bwd_reply *out, bool has_id, uint64_t id,
		  Bitwheel__V1__ErrorCode code, bool close, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(out, has_id, id, code, close, fmt, ap);
	va_end(ap);
}

void bwd_request_fail(struct bwd_reply *out, Bitwheel__V1__ErrorCode code,
		      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verror(out, false, 0, code, true, fmt, ap);
	va_end(ap);
}

static const char *state_error_text(int code)
{
	switch (code) {
	case PROTOCOL_NAME(PERMISSION_DENIED):
		return "only root may name another uid's namespace (owner_uid)";
	case PROTOCOL_NAME(DUPLICATE_KEY):
		return "the key is pending; set replace to replace it";
	case PROTOCOL_NAME(TOO_MANY_TIMERS):
		return "the session's pending timers and undelivered fires are at its limit (max_timers): let its consumers catch up";
	case PROTOCOL_NAME(NO_MEMORY):
		return "out of memory";
	case PROTOCOL_NAME(OVER_BUDGET):
		return "the uid is at one of its budgets";
	default:
		return "internal error";
	}
}

/* A rate in mHz as Hz, e.g. "110" or "0.5". */
static const char *hz_text(uint64_t mhz, char buf[32])
{
	if (mhz % 1000 == 0) {
		snprintf(buf, 32, "%" PRIu64, mhz / 1000);
	} else {
		char *p;

		snprintf(buf, 32, "%" PRIu64 ".%03" PRIu64, mhz / 1000, mhz % 1000);
		for (p = buf + strlen(buf) - 1; *p == '0'; p--)
			*p = '\0';
	}
	return buf;
}

/* A change to the caller's session that a reply would vouch for, while
 * the journal cannot keep it: refused (the reply says so) rather than
 * acknowledged without being durable.  Anonymous sessions are not kept. */
static bool storage_refuses(struct bwd_request_ctx *ctx, bool has_id,
			    uint64_t id, struct bwd_reply *out)
{
	const struct bwd_storage *sto = &ctx->env->storage;

	if (!sto->down || !ctx->member->session->name)
		return false;
	error(out, has_id, id, PROTOCOL_NAME(STORAGE_UNAVAILABLE), false,
	      "%s cannot be written (%s): named sessions take no changes until it can; retry later",
	      ctx->env->opt->store.dir, strerror(-sto->err));
	return true;
}

/* uid's budgets (--budgets, or the *_per_uid options); an exempt root's
 * are the defaults, which never refuse it. */
static const struct bwd_budget *budget_of(const struct bwd_state *st, uid_t uid)
{
	const struct bwd_budgets *all = bwd_state_budgets(st);
	const struct bwd_budget *b = bwd_budget_of(all, uid);

	return b ? b : &all->def;
}

static uint64_t now_of(struct bwd_request_ctx *ctx)
{
	if (!ctx->now_ns)
		ctx->now_ns = bw_now_ns();
	return ctx->now_ns;
}

/* OVER_BUDGET for the owner's share of the journal, said with figures. */
static void journal_refused(struct bwd_request_ctx *ctx, uid_t owner,
			    const struct bwd_uid_usage *u, uint64_t id, bool close,
			    const char *what, const char *which, struct bwd_reply *out)
{
	error(out, true, id, PROTOCOL_NAME(OVER_BUDGET), close,
	      "%s %s: uid %ld's named sessions added %" PRIu64 " bytes to the journal, its share of %" PRIu64 " (max_journal_per_uid); retry after the next snapshot starts a new journal",
	      what, which, (long)owner, u->journal,
	      ctx->env->opt->limits.max_journal_per_uid);
}

/* A change by choice to a named session whose owner is past its journal
 * share: refused (account.c), with the figures. */
static bool share_refuses(struct bwd_request_ctx *ctx, uint64_t id,
			  const char *what, struct bwd_reply *out)
{
	const struct bwd_session *s = ctx->member->session;
	struct bwd_uid_usage u;

	if (!bwd_session_journal_refuses(s, ctx->uid))
		return false;
	bwd_state_uid_usage(ctx->env->state, s->owner, &u);
	journal_refused(ctx, s->owner, &u, id, false, what, s->name, out);
	return true;
}

/* s's delivery policy into p (its dead-letter name into name): p. */
static Bitwheel__V1__Policy *policy_of(const struct bwd_session *s,
				       Bitwheel__V1__Policy *p,
				       char name[BWP_SESSION_NAME_MAX + 1])
{
	bitwheel__v1__policy__init(p);
	p->has_max_deliveries = p->has_explicit_ = 1;
	p->max_deliveries = bwd_session_max_deliveries(s);
	p->explicit_ = s->policy_set;
	if (!bwd_session_dead_letter_name(s, name)) {
		p->has_dead_letter = 1;
		p->dead_letter.data = (uint8_t *)name;
		p->dead_letter.len = strlen(name);
	}
	return p;
}

/* What Hello asks for, checked: 0, or the reply already says why not. */
static int hello_attach(const struct bwd_options *opt, const Envelope *req,
			char *name, struct bwd_attach *a, struct bwd_reply *out)
{
	const Bitwheel__V1__Hello *h = req->hello;
	bool named = h->has_session;

	if (!named && h->has_owner_uid) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), true,
		      "owner_uid names a namespace: it needs a session name");
		return -1;
	}
	if (named && !bwp_session_name_valid(h->session.data, h->session.len)) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), true,
		      "session names are 1 to %u bytes of A-Z a-z 0-9 _ . : @ -",
		      BWP_SESSION_NAME_MAX);
		return -1;
	}
	if (named) {
		memcpy(name, h->session.data, h->session.len);
		name[h->session.len] = '\0';
	}
	if (h->has_role && h->role != BITWHEEL__V1__ROLE__PRODUCER &&
	    h->role != BITWHEEL__V1__ROLE__CONSUMER) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), true,
		      "role %d is neither PRODUCER (1) nor CONSUMER (2)", (int)h->role);
		return -1;
	}
	a->name = named ? name : NULL;
	a->owner_uid = h->has_owner_uid ? (uid_t)h->owner_uid : a->uid;
	a->consumer = !named || (h->has_role && h->role == BITWHEEL__V1__ROLE__CONSUMER);
	if (!named && h->has_role && h->role == BITWHEEL__V1__ROLE__PRODUCER) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), true,
		      "an anonymous session's connection consumes its own fires: it cannot be a PRODUCER");
		return -1;
	}
	if (!a->consumer && (h->has_window || h->has_ack_timeout_ns || h->has_auto_ack ||
			     h->has_coalesce)) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), true,
		      "window, ack_timeout_ns, auto_ack and coalesce are for consumers; this Hello is a PRODUCER's");
		return -1;
	}
	a->window = h->has_window ? h->window :
		(BWD_DEFAULT_WINDOW < opt->limits.max_window ?
		 BWD_DEFAULT_WINDOW : opt->limits.max_window);
	if (a->consumer && (a->window == 0 || a->window > opt->limits.max_window)) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), true,
		      "window %" PRIu32 " is not within 1 to %" PRIu32 " (max_window)",
		      a->window, opt->limits.max_window);
		return -1;
	}
	if (!a->consumer)
		a->window = 0;
	a->ack_timeout_ns = h->has_ack_timeout_ns ? h->ack_timeout_ns : 0;
	if (a->ack_timeout_ns && a->ack_timeout_ns < BWD_MIN_ACK_TIMEOUT_NS)
		a->ack_timeout_ns = BWD_MIN_ACK_TIMEOUT_NS;
	a->auto_ack = a->consumer && (h->has_auto_ack ? h->auto_ack : !named);
	a->coalesce = a->consumer && h->has_coalesce && h->coalesce;
	return 0;
}

/* HelloReply.lanes: finest first. */
static void lanes_of(const struct bw_dual_config *w, struct bwd_reply *out)
{
	enum bw_lane fine = bwd_lane_finest(w);

	for (unsigned i = 0; i < 2; i++) {
		Bitwheel__V1__LaneInfo *l = &out->lane[i];
		const struct bw_config *c =
			(i == 0) == (fine == BW_LANE_ONESHOT) ? &w->oneshot : &w->periodic;

		bitwheel__v1__lane_info__init(l);
		l->has_resolution_ns = l->has_max_late_ns = 1;
		l->resolution_ns = c->resolution_ms * 1000000ull;
		l->max_late_ns = bwd_lane_late_ns(c);
		out->lane_ptr[i] = l;
	}
}

static void do_hello(struct bwd_request_ctx *ctx, const Envelope *req,
		     struct bwd_reply *out)
{
	const struct bwd_options *opt = ctx->env->opt;
	const Bitwheel__V1__Hello *h = req->hello;
	Bitwheel__V1__HelloReply *hr = &out->body.hello;
	Bitwheel__V1__Limits *lim = &out->limits;
	char name[BWP_SESSION_NAME_MAX + 1];
	struct bwd_attach a = { .uid = ctx->uid, .owner = ctx->owner,
				.pid = ctx->pid };
	const struct bwd_budget *own;
	struct bwd_session *s;
	bool resumed;
	int err;

	if (ctx->member) {
		error(out, true, req->request_id, PROTOCOL_NAME(ALREADY_HELLO), false,
		      "this connection already said Hello");
		return;
	}
	if (!h->has_protocol_version) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), true,
		      "Hello without protocol_version");
		return;
	}
	if (h->protocol_version != BWP_PROTOCOL_VERSION) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_VERSION), true,
		      "protocol version %" PRIu32 " is not spoken here; this daemon speaks %d",
		      h->protocol_version, BWP_PROTOCOL_VERSION);
		return;
	}
	if (hello_attach(opt, req, name, &a, out))
		return;
	a.no_create = ctx->env->storage.down;
	err = bwd_session_attach(ctx->env->state, &a, &ctx->member, &resumed);
	if (err == PROTOCOL_NAME(OVER_BUDGET)) {
		struct bwd_uid_usage u;

		bwd_state_uid_usage(ctx->env->state, a.owner_uid, &u);
		if (u.sessions < budget_of(ctx->env->state, a.owner_uid)->sessions)
			journal_refused(ctx, a.owner_uid, &u, req->request_id, true,
					"session", a.name, out);
		else
			error(out, true, req->request_id, err, true,
			      "session '%s': uid %ld has %" PRIu64 " named sessions; its budget is %" PRIu64 " (max_sessions_per_uid)",
			      a.name, (long)a.owner_uid, u.sessions,
			      budget_of(ctx->env->state, a.owner_uid)->sessions);
		return;
	}
	if (err == PROTOCOL_NAME(STORAGE_UNAVAILABLE)) {
		error(out, true, req->request_id, err, true,
		      "session '%s': %s cannot be written (%s), so no named session can be created until it can; retry later",
		      a.name, opt->store.dir, strerror(-ctx->env->storage.err));
		return;
	}
	if (err) {
		error(out, true, req->request_id, err, true, "session '%s' of uid %ld: %s",
		      a.name ? a.name : "(anonymous)", (long)a.owner_uid,
		      state_error_text(err));
		return;
	}
	s = ctx->member->session;
	bitwheel__v1__limits__init(lim);
	lim->has_max_frame_bytes = lim->has_max_payload_bytes = 1;
	lim->max_frame_bytes = opt->limits.max_frame;
	lim->max_payload_bytes = opt->limits.max_payload;
	lim->has_max_timers = lim->has_max_queued = lim->has_session_linger_ns = 1;
	lim->max_timers = opt->limits.max_timers;
	lim->max_queued = opt->limits.max_queued;
	lim->session_linger_ns = opt->limits.linger_ns;
	lim->has_max_output_bytes = lim->has_max_clients = lim->has_max_window = 1;
	lim->max_output_bytes = opt->limits.max_output;
	lim->max_clients = opt->limits.max_clients;
	lim->max_window = opt->limits.max_window;
	lim->has_max_clients_per_uid = lim->has_max_sessions_per_uid = 1;
	lim->has_max_timers_per_uid = lim->has_max_periodic_rate_per_uid = 1;
	/* The caller's own, which --budgets may set apart. */
	own = budget_of(ctx->env->state, ctx->uid);
	lim->max_clients_per_uid = own->clients;
	lim->max_sessions_per_uid = own->sessions;
	lim->max_timers_per_uid = own->timers;
	lim->max_periodic_rate_per_uid = own->periodic_mhz == UINT64_MAX ?
		UINT64_MAX : own->periodic_mhz / 1000;
	lim->has_max_bytes_per_uid = lim->has_max_memory_bytes = 1;
	lim->max_bytes_per_uid = own->bytes;
	lim->max_memory_bytes = opt->limits.max_memory;
	lim->has_max_journal_bytes_per_uid = lim->has_hello_timeout_ns = 1;
	lim->max_journal_bytes_per_uid = opt->limits.max_journal_per_uid;
	lim->hello_timeout_ns = opt->limits.hello_timeout_ns;
	lim->has_max_release_delay_ns = lim->has_max_hold_ns = 1;
	lim->has_default_max_deliveries = lim->has_max_kick = 1;
	lim->max_release_delay_ns = BWD_MAX_RELEASE_DELAY_NS;
	lim->max_hold_ns = BWD_MAX_HOLD_NS;
	lim->default_max_deliveries = opt->limits.max_deliveries;
	lim->max_kick = BWD_MAX_KICK;
	bitwheel__v1__hello_reply__init(hr);
	hr->has_protocol_version = 1;
	hr->protocol_version = BWP_PROTOCOL_VERSION;
	hr->daemon_version = PACKAGE_VERSION;
	hr->has_oneshot_resolution_ns = hr->has_periodic_resolution_ns = 1;
	hr->oneshot_resolution_ns = opt->wheel.oneshot.resolution_ms * 1000000ull;
	hr->periodic_resolution_ns = opt->wheel.periodic.resolution_ms * 1000000ull;
	lanes_of(&opt->wheel, out);
	hr->n_lanes = 2;
	hr->lanes = out->lane_ptr;
	hr->has_coalesce = 1;
	hr->coalesce = a.coalesce;
	hr->limits = lim;
	hr->has_resumed = hr->has_timers = hr->has_queued = hr->has_dropped = 1;
	hr->resumed = resumed;
	hr->timers = s->timers.count;
	hr->queued = s->queued;
	hr->dropped = s->dropped;
	hr->has_role = hr->has_window = hr->has_ack_timeout_ns = 1;
	hr->has_auto_ack = hr->has_consumers = 1;
	hr->role = a.consumer ? BITWHEEL__V1__ROLE__CONSUMER : BITWHEEL__V1__ROLE__PRODUCER;
	hr->window = a.window;
	hr->ack_timeout_ns = a.ack_timeout_ns;
	hr->auto_ack = a.auto_ack;
	hr->consumers = s->nconsumers;
	hr->has_owner_uid = s->name != NULL;
	hr->owner_uid = (uint32_t)s->owner;
	if (s->name)
		hr->policy = policy_of(s, &out->policy, out->policy_name);
	if (a.consumer)
		s->dropped = 0;
	reply_init(out, true, req->request_id, BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY);
	out->env.hello_reply = hr;
	if (s->name)
		bwd_log_client(BWD_LOGK_SESSION, ctx->uid, BWD_LOG_INFO,
			"pid %ld uid %ld %s session '%s' of uid %ld as a %s (%zu timers, %" PRIu64 " queued fires, %" PRIu32 " consumers)",
			(long)ctx->pid, (long)ctx->uid, resumed ? "joined" : "opened",
			s->name, (long)s->owner, a.consumer ? "consumer" : "producer",
			s->timers.count, s->queued, s->nconsumers);
}

/* A Schedule refused for bytes (the uid's, OVER_BUDGET, or the daemon's,
 * NO_MEMORY), said with the figures; false when it was something else
 * (the rate, or an allocation that failed). */
static bool bytes_refused(struct bwd_request_ctx *ctx, const struct bwd_schedule *s,
			  int err, uint64_t id, struct bwd_reply *out)
{
	const struct bwd_limits *l = &ctx->env->opt->limits;
	struct bwd_session *ss = ctx->member->session;
	const struct bwd_budget *b = budget_of(ctx->env->state, ss->owner);
	uint64_t added = bwd_timer_bytes_added(ss, s);
	struct bwd_uid_usage u;

	bwd_state_uid_usage(ctx->env->state, ss->owner, &u);
	if (err == PROTOCOL_NAME(NO_MEMORY)) {
		uint64_t held = bwd_state_held(ctx->env->state);
		uint64_t share = bwd_state_share(ctx->env->state, ss->owner);

		if (held + added > l->max_memory)
			error(out, true, id, err, false,
			      "key %" PRIu64 ": the daemon holds %" PRIu64 " bytes of timers, fires and output over all uids; %" PRIu64 " more would pass its bound of %" PRIu64 " (max_memory)",
			      s->key, held, added, l->max_memory);
		else if (u.bytes + added > share)
			error(out, true, id, err, false,
			      "key %" PRIu64 ": uid %ld holds %" PRIu64 " bytes of timers, fires and unread output; %" PRIu64 " more would pass its share of the daemon's memory, %" PRIu64 " (half of what other uids leave of max_memory)",
			      s->key, (long)ss->owner, u.bytes, added, share);
		else
			return false;
		return true;
	}
	if (u.bytes + added <= b->bytes ||
	    (bwd_timer_rate_after(ss, s) > b->periodic_mhz &&
	     bwd_timer_rate_after(ss, s) > u.periodic_mhz))
		return false;
	error(out, true, id, err, false,
	      "key %" PRIu64 ": uid %ld holds %" PRIu64 " bytes of timers, fires and unread output; %" PRIu64 " more would pass its budget of %" PRIu64 " (max_bytes_per_uid)",
	      s->key, (long)ss->owner, u.bytes, added, b->bytes);
	return true;
}

/* The shortest period a Schedule may ask: the finest lane's tick. */
static uint64_t min_period_ns(const struct bwd_options *opt)
{
	uint64_t one = opt->wheel.oneshot.resolution_ms, per = opt->wheel.periodic.resolution_ms;

	return (one < per ? one : per) * 1000000ull;
}

/*
 * A Schedule's calendar into c, and its first elapse's instant (jitter
 * added) into *wall_ns: false when it is refused (out says why).
 */
static bool calendar_of(struct bwd_request_ctx *ctx, const struct bwp_request *r,
			struct bwd_calendar *c, uint64_t *wall_ns,
			struct bwd_reply *out)
{
	char why[192];
	int err;

	if (r->has_period_ns) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_DEADLINE), false,
		      "calendar with period_ns: a calendar timer recurs by its spec");
		return false;
	}
	if (r->has_jitter_ns && r->jitter_ns > BWD_CAL_JITTER_MAX) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "jitter_ns %" PRIu64 " is over the limit of %llu (31 days)",
		      r->jitter_ns, BWD_CAL_JITTER_MAX);
		return false;
	}
	*c = (struct bwd_calendar){
		.spec = r->calendar, .base_ns = bwd_realtime_ns(),
		.jitter_ns = r->has_jitter_ns ? r->jitter_ns : 0,
		.fixed = r->has_jitter_fixed && r->jitter_fixed,
		.has_grace = r->has_misfire_grace_ns,
		.grace_ns = r->misfire_grace_ns,
	};
	c->seed = bwd_cal_seed(ctx->member->session, r->key, c->fixed);
	err = bwd_cal_check(c, wall_ns, why, sizeof(why));
	if (err) {
		error(out, true, r->request_id,
		      err == -ENOMEM ? PROTOCOL_NAME(NO_MEMORY) : PROTOCOL_NAME(BAD_CALENDAR),
		      false, "calendar: %s", err == -ENOMEM ? "no memory" : why);
		return false;
	}
	/* As a period's floor: closer elapses could not each fire. */
	if (c->interval_ns && c->interval_ns < min_period_ns(ctx->env->opt)) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_CALENDAR), false,
		      "calendar: '%s' elapses %" PRIu64 " ns apart, closer than the finest lane's tick, %" PRIu64 " ns",
		      c->spec, c->interval_ns, min_period_ns(ctx->env->opt));
		return false;
	}
	return true;
}

static void do_schedule(struct bwd_request_ctx *ctx, const struct bwp_request *r,
			struct bwd_reply *out)
{
	const struct bwd_options *opt = ctx->env->opt;
	struct bwp_response *sr;
	struct bwd_schedule s = { 0 };
	struct bwd_calendar cal;
	const char *why;
	bool replaced, is_delay;
	uint64_t now;
	int err;

	if (!r->has_key) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "Schedule without key");
		return;
	}
	if (r->when_case != BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS &&
	    r->when_case != BITWHEEL__V1__SCHEDULE__WHEN_DEADLINE_NS &&
	    r->when_case != BITWHEEL__V1__SCHEDULE__WHEN_REALTIME_NS &&
	    r->when_case != BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_DEADLINE), false,
		      "Schedule needs delay_ns, deadline_ns, realtime_ns or calendar");
		return;
	}
	if (r->when_case == BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR) {
		if (!calendar_of(ctx, r, &cal, &s.wall_ns, out))
			return;
		s.cal = &cal;
	} else if (r->has_jitter_ns || r->has_jitter_fixed ||
		   r->has_misfire_grace_ns) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "jitter_ns, jitter_fixed and misfire_grace_ns are a calendar timer's");
		return;
	}
	is_delay = r->when_case == BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS;
	/* A wall-clock instant has its own clock. */
	if (r->has_clock && (s.cal || r->when_case == BITWHEEL__V1__SCHEDULE__WHEN_REALTIME_NS)) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "clock is delay_ns' or deadline_ns': realtime_ns and calendar count on the wall clock");
		return;
	}
	if (r->has_clock && r->clock != BITWHEEL__V1__CLOCK__CLOCK_MONOTONIC &&
	    r->clock != BITWHEEL__V1__CLOCK__CLOCK_BOOTTIME) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "clock %d is neither CLOCK_MONOTONIC (0) nor CLOCK_BOOTTIME (1)", (int)r->clock);
		return;
	}
	s.boot = r->has_clock && r->clock == BITWHEEL__V1__CLOCK__CLOCK_BOOTTIME;
	if (r->when_case == BITWHEEL__V1__SCHEDULE__WHEN_REALTIME_NS) {
		/* 0 is the epoch: more likely an unset variable than 1970. */
		if (r->when_ns == 0 || r->has_period_ns) {
			error(out, true, r->request_id, PROTOCOL_NAME(BAD_DEADLINE), false,
			      r->when_ns == 0 ? "realtime_ns must be > 0 (ns since the Unix epoch, UTC)" :
			      "realtime_ns with period_ns: a wall-clock timer is a oneshot");
			return;
		}
		s.wall_ns = r->when_ns;
	}
	now = is_delay || s.wall_ns || s.boot ? now_of(ctx) : 0;
	/* The bounds bwctl checks too, before it sends (duration.c). */
	why = s.cal ? NULL :
		bwp_schedule_problem(now, is_delay, r->when_ns, r->has_period_ns, r->period_ns);
	if (why != NULL) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_DEADLINE), false, "%s", why);
		return;
	}
	/* A shorter period could not fire once a period: every poll would
	 * find it due and skip.  The same floor for root, whom the periodic
	 * rate budget spares. */
	if (r->has_period_ns && r->period_ns < min_period_ns(opt)) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_DEADLINE), false,
		      "period_ns %" PRIu64 " is shorter than the finest lane's tick, %" PRIu64 " ns",
		      r->period_ns, min_period_ns(opt));
		return;
	}
	if (s.boot) {
		/* Its deadline on CLOCK_BOOTTIME (never 0: none), placed on
		 * the wheel by the clocks' offset now (clock.c). */
		uint64_t boot = bwd_boottime_ns();

		s.wall_ns = !is_delay ? r->when_ns :
			r->when_ns > UINT64_MAX - boot ? UINT64_MAX : boot + r->when_ns;
		if (!s.wall_ns)
			s.wall_ns = 1;
		s.deadline_ns = bwd_wall_place(s.wall_ns, now, boot);
	} else {
		s.deadline_ns = is_delay ? now + r->when_ns :
			s.wall_ns ? bwd_wall_place(s.wall_ns, now, bwd_realtime_ns()) :
			r->when_ns;
	}
	if (r->has_payload && r->payload_len > opt->limits.max_payload) {
		error(out, true, r->request_id, PROTOCOL_NAME(PAYLOAD_TOO_LARGE), false,
		      "payload of %zu bytes is over the limit of %" PRIu32,
		      r->payload_len, opt->limits.max_payload);
		return;
	}
	if (storage_refuses(ctx, true, r->request_id, out))
		return;
	s.key = r->key;
	s.period_ns = r->has_period_ns ? r->period_ns : 0;
	s.has_payload = r->has_payload;
	s.payload = r->payload;
	s.payload_len = r->has_payload ? (uint32_t)r->payload_len : 0;
	s.replace = r->has_replace && r->replace;
	/* UINT64_MAX asked is as good as any leeway that large: the same lane,
	 * and it must not read back as absent. */
	s.leeway_ns = !r->has_leeway_ns ? BWD_LEEWAY_DEFAULT :
		r->leeway_ns == BWD_LEEWAY_DEFAULT ? BWD_LEEWAY_DEFAULT - 1 :
		r->leeway_ns;
	s.uid = ctx->uid;
	err = bwd_timer_schedule(ctx->member->session, &s, &replaced);
	if (err == PROTOCOL_NAME(OVER_BUDGET)) {
		struct bwd_session *ss = ctx->member->session;
		struct bwd_uid_usage u;
		char key[24];

		bwd_state_uid_usage(ctx->env->state, ss->owner, &u);
		if (ss->name && u.journal >= opt->limits.max_journal_per_uid) {
			snprintf(key, sizeof(key), "%" PRIu64, s.key);
			journal_refused(ctx, ss->owner, &u, r->request_id, false,
					"key", key, out);
			return;
		}
	}
	if (err == PROTOCOL_NAME(OVER_BUDGET) || err == PROTOCOL_NAME(NO_MEMORY)) {
		if (bytes_refused(ctx, &s, err, r->request_id, out))
			return;
	}
	if (err == PROTOCOL_NAME(OVER_BUDGET)) {
		struct bwd_session *ss = ctx->member->session;
		char rate[32], budget[32];

		error(out, true, r->request_id, err, false,
		      "key %" PRIu64 ": uid %ld's periodic timers would fire %s times a second; its budget is %s (max_periodic_rate_per_uid)",
		      s.key, (long)ss->owner,
		      hz_text(bwd_timer_rate_after(ss, &s), rate),
		      hz_text(budget_of(ctx->env->state, ss->owner)->periodic_mhz, budget));
		return;
	}
	if (err == PROTOCOL_NAME(TOO_MANY_TIMERS)) {
		struct bwd_session *ss = ctx->member->session;

		if (ss->timers.count + ss->queued + ss->in_flight < opt->limits.max_timers) {
			struct bwd_uid_usage u;

			bwd_state_uid_usage(ctx->env->state, ss->owner, &u);
			error(out, true, r->request_id, err, false,
			      "key %" PRIu64 ": uid %ld's pending timers and undelivered fires over all its sessions (%" PRIu64 ") are at its budget of %" PRIu64 " (max_timers_per_uid): cancel some or let consumers catch up",
			      s.key, (long)ss->owner, u.timers,
			      budget_of(ctx->env->state, ss->owner)->timers);
			return;
		}
	}
	if (err) {
		error(out, true, r->request_id, err, false, "key %" PRIu64 ": %s",
		      s.key, state_error_text(err));
		return;
	}
	sr = fast_reply(out, r->request_id, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY);
	sr->has_deadline_ns = sr->has_replaced = true;
	/* A boottime timer's on its own clock, as Schedule's. */
	sr->deadline_ns = s.boot ? s.wall_ns : s.deadline_ns;
	sr->replaced = replaced;
}

static void do_cancel(struct bwd_request_ctx *ctx, const struct bwp_request *r,
		      struct bwd_reply *out)
{
	struct bwp_response *cr;
	bool pending;

	if (!r->has_key) {
		error(out, true, r->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "Cancel without key");
		return;
	}
	if (storage_refuses(ctx, true, r->request_id, out))
		return;
	bwd_timer_cancel(ctx->member->session, r->key, &pending);
	cr = fast_reply(out, r->request_id, BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY);
	cr->has_pending = true;
	cr->pending = pending;
}

static void do_ack(struct bwd_request_ctx *ctx, const struct bwp_request *r,
		   struct bwd_reply *out)
{
	struct bwp_response *ar;
	uint64_t acked;

	/* An Ack without request_id asks for no word that it is durable:
	 * done in memory, its fire may come again after a crash. */
	if (r->has_request_id && storage_refuses(ctx, true, r->request_id, out))
		return;
	if (!r->has_delivery || bwd_member_ack(ctx->member, r->delivery,
					       r->has_cumulative && r->cumulative,
					       &acked)) {
		/* A client that acknowledges what it was never sent has lost
		 * track of its fires: it had better start again. */
		error(out, r->has_request_id, r->request_id, PROTOCOL_NAME(BAD_REQUEST), true,
		      "Ack of delivery %" PRIu64 ": this connection was sent %" PRIu64 " fires%s",
		      r->delivery, ctx->member->last_delivery,
		      r->has_delivery ? "" : " (and the Ack names none)");
		return;
	}
	if (!r->has_request_id) {
		reply_init(out, false, 0, BITWHEEL__V1__ENVELOPE__BODY__NOT_SET);
		out->none = true;
		return;
	}
	ar = fast_reply(out, r->request_id, BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY);
	ar->has_acked = true;
	ar->acked = acked;
}

/* ---- fires that fail --------------------------------------------------------- */

/* A Release or Touch names a delivery this connection was sent: else,
 * as for Ack, the client lost track of its fires (BAD_REQUEST closes). */
static bool delivery_known(struct bwd_request_ctx *ctx, const Envelope *req,
			   const char *what, bool has, uint64_t delivery,
			   struct bwd_reply *out)
{
	if (has && delivery && delivery <= ctx->member->last_delivery)
		return true;
	error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), true,
	      "%s of delivery %" PRIu64 ": this connection was sent %" PRIu64 " fires%s",
	      what, delivery, ctx->member->last_delivery,
	      has ? "" : " (and it names none)");
	return false;
}

static void do_release(struct bwd_request_ctx *ctx, const Envelope *req,
		       struct bwd_reply *out)
{
	const Bitwheel__V1__Release *q = req->release;
	Bitwheel__V1__ReleaseReply *rr = &out->body.release;
	struct bwd_release r;

	if (!delivery_known(ctx, req, "Release", q->has_delivery, q->delivery, out))
		return;
	if (q->delay_ns > BWD_MAX_RELEASE_DELAY_NS) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "Release delay_ns %" PRIu64 " is past the longest, %" PRIu64 " (max_release_delay_ns)",
		      q->delay_ns, (uint64_t)BWD_MAX_RELEASE_DELAY_NS);
		return;
	}
	if (storage_refuses(ctx, true, req->request_id, out) ||
	    share_refuses(ctx, req->request_id, "Release in session", out))
		return;
	bwd_member_release(ctx->member, q->delivery, q->delay_ns, &r);
	bitwheel__v1__release_reply__init(rr);
	rr->has_released = rr->has_dead_lettered = rr->has_deliveries = 1;
	rr->released = r.released;
	rr->dead_lettered = r.dead_lettered;
	rr->deliveries = r.deliveries;
	rr->has_ready_ns = r.released && !r.dead_lettered;
	rr->ready_ns = r.ready_ns;
	reply_init(out, true, req->request_id, BITWHEEL__V1__ENVELOPE__BODY_RELEASE_REPLY);
	out->env.release_reply = rr;
}

static void do_touch(struct bwd_request_ctx *ctx, const Envelope *req,
		     struct bwd_reply *out)
{
	const Bitwheel__V1__Touch *q = req->touch;
	Bitwheel__V1__TouchReply *tr = &out->body.touch;
	uint64_t at;
	bool touched;
	int rc;

	if (!delivery_known(ctx, req, "Touch", q->has_delivery, q->delivery, out))
		return;
	rc = bwd_member_touch(ctx->member, q->delivery, q->timeout_ns, &touched, &at);
	if (rc == PROTOCOL_NAME(NO_MEMORY)) {
		error(out, true, req->request_id, rc, false,
		      "Touch of delivery %" PRIu64 ": no memory for its ack deadline", q->delivery);
		return;
	}
	if (rc) {
		error(out, true, req->request_id, PROTOCOL_NAME(HOLD_LIMIT), false,
		      "Touch of delivery %" PRIu64 ": a fire may be held until %" PRIu64 " ns at most, %" PRIu64 " after its hand-out (max_hold_ns); acknowledge or release it",
		      q->delivery, at, (uint64_t)BWD_MAX_HOLD_NS);
		return;
	}
	bitwheel__v1__touch_reply__init(tr);
	tr->has_touched = 1;
	tr->touched = touched;
	tr->has_ack_deadline_ns = at != 0;
	tr->ack_deadline_ns = at;
	reply_init(out, true, req->request_id, BITWHEEL__V1__ENVELOPE__BODY_TOUCH_REPLY);
	out->env.touch_reply = tr;
}

/* Policy and Kick: what a named session has. */
static bool named_only(struct bwd_request_ctx *ctx, const Envelope *req,
		       const char *what, struct bwd_reply *out)
{
	if (ctx->member->session->name)
		return true;
	error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
	      "%s: an anonymous session has no delivery policy nor dead letters", what);
	return false;
}

static void do_set_policy(struct bwd_request_ctx *ctx, const Envelope *req,
			  struct bwd_reply *out)
{
	const Bitwheel__V1__SetPolicy *q = req->set_policy;
	Bitwheel__V1__SetPolicyReply *pr = &out->body.set_policy;
	struct bwd_session *s = ctx->member->session;
	char name[BWP_SESSION_NAME_MAX + 1] = "";
	size_t len = q->dead_letter.len;
	int err;

	if (!named_only(ctx, req, "SetPolicy", out))
		return;
	if (q->has_dead_letter && len &&
	    (!bwp_session_name_valid((const char *)q->dead_letter.data, len) ||
	     (len == strlen(s->name) && !memcmp(q->dead_letter.data, s->name, len)))) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "SetPolicy dead_letter: 1 to %u bytes of [A-Za-z0-9_.:@-], not the session's own name",
		      BWP_SESSION_NAME_MAX);
		return;
	}
	if (storage_refuses(ctx, true, req->request_id, out) ||
	    share_refuses(ctx, req->request_id, "SetPolicy of session", out))
		return;
	if (q->has_dead_letter && len)
		memcpy(name, q->dead_letter.data, len);
	err = bwd_session_set_policy(s, q->has_max_deliveries, q->max_deliveries,
				     q->has_dead_letter ? name : NULL);
	if (err) {
		error(out, true, req->request_id, err, false, "SetPolicy: %s",
		      state_error_text(err));
		return;
	}
	bitwheel__v1__set_policy_reply__init(pr);
	pr->policy = policy_of(s, &out->policy, out->policy_name);
	reply_init(out, true, req->request_id, BITWHEEL__V1__ENVELOPE__BODY_SET_POLICY_REPLY);
	out->env.set_policy_reply = pr;
}

static void do_kick(struct bwd_request_ctx *ctx, const Envelope *req,
		    struct bwd_reply *out)
{
	const Bitwheel__V1__Kick *q = req->kick;
	Bitwheel__V1__KickReply *kr = &out->body.kick;
	uint64_t kicked;
	bool more;

	if (!named_only(ctx, req, "Kick", out) ||
	    storage_refuses(ctx, true, req->request_id, out) ||
	    share_refuses(ctx, req->request_id, "Kick in session", out))
		return;
	bwd_session_kick(ctx->member->session, q->has_key, q->key, q->limit,
			 &kicked, &more);
	bitwheel__v1__kick_reply__init(kr);
	kr->has_kicked = kr->has_more = 1;
	kr->kicked = kicked;
	kr->more = more;
	reply_init(out, true, req->request_id, BITWHEEL__V1__ENVELOPE__BODY_KICK_REPLY);
	out->env.kick_reply = kr;
	out->heavy = kicked > 0;
}

/* One lane's counters over every wheel (ss: the state's figures), less
 * the callbacks and moves that only placed a wall-clock timer again, and
 * the state's own timers (oneshot lane). */
static void lane_stats(const struct bwd_state *st, enum bw_lane lane,
		       const struct bwd_state_stats *ss, Bitwheel__V1__LaneStats *ls)
{
	struct bwd_wheel_figures f;

	bwd_wheels_lane(st, lane, &f);
	bitwheel__v1__lane_stats__init(ls);
	ls->has_pending = ls->has_overflow = ls->has_inserted = 1;
	ls->has_cancelled = ls->has_fired = ls->has_lost = 1;
	ls->pending = f.pending;
	ls->overflow = f.overflow;
	ls->inserted = f.k.inserted;
	ls->cancelled = f.k.cancelled;
	ls->fired = f.k.fired;
	ls->lost = f.k.lost;
	ls->fired -= ss->wall_checks[lane];
	ls->cancelled -= ss->wall_moves[lane];
	ls->inserted -= ss->wall_moves[lane];
	if (lane == BW_LANE_ONESHOT) {
		ls->pending -= ss->own_pending;
		ls->inserted -= ss->own_inserted;
		ls->cancelled -= ss->own_cancelled;
		ls->fired -= ss->own_fired;
	}
}

/* A uid's own lane counters: overflow is the wheel's business, absent. */
static void own_lane(const struct bwd_lane_usage *l, Bitwheel__V1__LaneStats *ls)
{
	bitwheel__v1__lane_stats__init(ls);
	ls->has_pending = ls->has_inserted = ls->has_cancelled = 1;
	ls->has_fired = ls->has_lost = 1;
	ls->pending = l->pending;
	ls->inserted = l->inserted;
	ls->cancelled = l->cancelled;
	ls->fired = l->fired;
	ls->lost = l->lost;
}

/* The daemon process's figures (process.c), those that could be read. */
static void fill_process(Bitwheel__V1__Metrics *mr)
{
	struct bwd_process p;

	bwd_process_read(&p);
	mr->has_process_resident_bytes = mr->has_process_virtual_bytes =
		(p.have & BWD_PROC_MEMORY) != 0;
	mr->process_resident_bytes = p.resident_bytes;
	mr->process_virtual_bytes = p.virtual_bytes;
	mr->has_process_open_fds = (p.have & BWD_PROC_OPEN_FDS) != 0;
	mr->process_open_fds = p.open_fds;
	mr->has_process_max_fds = (p.have & BWD_PROC_MAX_FDS) != 0;
	mr->process_max_fds = p.max_fds;
	mr->has_process_cpu_ns = (p.have & BWD_PROC_CPU) != 0;
	mr->process_cpu_ns = p.cpu_ns;
	mr->has_process_start_time_ns = (p.have & BWD_PROC_START) != 0;
	mr->process_start_time_ns = p.start_time_ns;
}

/* The daemon-wide counters for monitoring, root's alone (PROTOCOL.md). */
static void fill_metrics(struct bwd_env *env, struct bwd_reply *out)
{
	static const uint64_t late_le[BWD_LATENESS_BOUNDS] = BWD_LATENESS_LE_NS;
	static const uint64_t sync_le[BWD_SYNC_BOUNDS] = BWD_SYNC_LE_NS;
	static const uint64_t sync_records_le[BWD_SYNC_RECORDS_BOUNDS] = BWD_SYNC_RECORDS_LE;
	const struct bwd_hist *one = bwd_state_lateness(env->state, BW_LANE_ONESHOT);
	const struct bwd_hist *per = bwd_state_lateness(env->state, BW_LANE_PERIODIC);
	const struct bwd_hist *wait1 = bwd_state_queue_wait(env->state, BW_LANE_ONESHOT);
	const struct bwd_hist *waitp = bwd_state_queue_wait(env->state, BW_LANE_PERIODIC);
	const struct bwd_hist *ack = bwd_state_ack_latency(env->state);
	const struct bwd_hist *dlv = bwd_state_deliveries(env->state);
	static const uint64_t dlv_le[BWD_DELIVERIES_BOUNDS] = BWD_DELIVERIES_LE;
	struct bwd_state_stats ss;
	struct bwd_metrics *m = &env->metrics;
	const struct bwd_storage *st = &env->storage;
	Bitwheel__V1__Metrics *mr = &out->metrics;

	bitwheel__v1__metrics__init(mr);
	memcpy(out->late_le, late_le, sizeof(late_le));
	mr->n_lateness_le_ns = BWD_LATENESS_BOUNDS;
	mr->lateness_le_ns = out->late_le;
	mr->n_lateness_bucket = mr->n_periodic_lateness_bucket = BWD_LATENESS_BOUNDS + 1;
	/* protobuf-c's arrays are not const; nothing writes through them. */
	mr->lateness_bucket = (uint64_t *)one->bucket;
	mr->periodic_lateness_bucket = (uint64_t *)per->bucket;
	mr->has_lateness_sum_ns = mr->has_periodic_lateness_sum_ns = 1;
	mr->lateness_sum_ns = one->sum_ns;
	mr->periodic_lateness_sum_ns = per->sum_ns;
	mr->n_queue_wait_bucket = mr->n_periodic_queue_wait_bucket =
		mr->n_ack_latency_bucket = BWD_LATENESS_BOUNDS + 1;
	mr->queue_wait_bucket = (uint64_t *)wait1->bucket;
	mr->periodic_queue_wait_bucket = (uint64_t *)waitp->bucket;
	mr->ack_latency_bucket = (uint64_t *)ack->bucket;
	mr->has_queue_wait_sum_ns = mr->has_periodic_queue_wait_sum_ns = 1;
	mr->queue_wait_sum_ns = wait1->sum_ns;
	mr->periodic_queue_wait_sum_ns = waitp->sum_ns;
	mr->has_ack_latency_sum_ns = 1;
	mr->ack_latency_sum_ns = ack->sum_ns;
	fill_process(mr);
	bwd_state_stats(env->state, &ss);
	mr->has_dead_lettered = mr->has_released = mr->has_touched = mr->has_kicked = 1;
	mr->dead_lettered = ss.dead_lettered;
	mr->released = ss.released;
	mr->touched = ss.touched;
	mr->kicked = ss.kicked;
	memcpy(out->deliveries_le, dlv_le, sizeof(dlv_le));
	mr->n_deliveries_le = BWD_DELIVERIES_BOUNDS;
	mr->deliveries_le = out->deliveries_le;
	mr->n_deliveries_bucket = BWD_DELIVERIES_BOUNDS + 1;
	mr->deliveries_bucket = (uint64_t *)dlv->bucket;
	mr->n_requests = BWD_REQUEST_KINDS;
	mr->requests = m->requests;
	mr->n_errors = BWD_ERROR_CODES;
	mr->errors = m->errors;
	mr->has_fires_delivered = 1;
	mr->fires_delivered = m->delivered;
	mr->has_fire_writes = mr->has_fires_coalesced = 1;
	mr->fire_writes = m->fire_writes;
	mr->fires_coalesced = m->fires_coalesced;
	mr->has_accepted = mr->has_refused_max_clients = 1;
	mr->accepted = m->accepted;
	mr->refused_max_clients = m->refused_clients;
	mr->has_refused_uid_budget = mr->has_refused_memory = 1;
	mr->refused_uid_budget = m->refused_uid;
	mr->refused_memory = m->refused_memory;
	mr->has_slow_consumer_disconnects = mr->has_disconnects_closed = 1;
	mr->has_disconnects_error = mr->has_disconnects_no_memory = 1;
	mr->slow_consumer_disconnects = m->disconnects[BWD_DISC_SLOW];
	mr->disconnects_closed = m->disconnects[BWD_DISC_CLOSED];
	mr->disconnects_error = m->disconnects[BWD_DISC_ERROR];
	mr->disconnects_no_memory = m->disconnects[BWD_DISC_MEMORY];
	mr->has_storage = 1;
	mr->storage = env->opt->store.dir != NULL;
	if (!mr->storage)
		return;
	mr->has_storage_down = 1;
	mr->storage_down = st->down;
	mr->has_journal_syncs = mr->has_journal_sync_ns_total = 1;
	mr->journal_syncs = st->syncs.count;
	mr->journal_sync_ns_total = st->syncs.hist.sum_ns;
	mr->has_journal_sync_ns_last = mr->has_journal_sync_ns_max = 1;
	mr->journal_sync_ns_last = st->syncs.last_ns;
	mr->journal_sync_ns_max = st->syncs.max_ns;
	memcpy(out->sync_le, sync_le, sizeof(sync_le));
	mr->n_journal_sync_le_ns = BWD_SYNC_BOUNDS;
	mr->journal_sync_le_ns = out->sync_le;
	mr->n_journal_sync_bucket = BWD_SYNC_BOUNDS + 1;
	mr->journal_sync_bucket = (uint64_t *)st->syncs.hist.bucket;
	memcpy(out->sync_records_le, sync_records_le, sizeof(sync_records_le));
	mr->n_journal_sync_records_le = BWD_SYNC_RECORDS_BOUNDS;
	mr->journal_sync_records_le = out->sync_records_le;
	mr->n_journal_sync_records_bucket = BWD_SYNC_RECORDS_BOUNDS + 1;
	mr->journal_sync_records_bucket = (uint64_t *)st->syncs.records.bucket;
	mr->has_journal_records = 1;
	mr->journal_records = st->syncs.records.sum_ns;
	mr->has_snapshots = 1;
	mr->snapshots = st->snapshots;
	mr->has_snapshot_age_ns = st->snapshots != 0;
	mr->snapshot_age_ns = bw_now_ns() - st->snapshot_ns;
	mr->has_snapshot_ns_last = mr->has_snapshot_ns_total = 1;
	mr->snapshot_ns_last = st->snapshot_last_ns;
	mr->snapshot_ns_total = st->snapshot_total_ns;
}

/*
 * Root sees the daemon's figures; anyone else its own uid's, kept by the
 * state as they change (PROTOCOL.md, Stats): only the uptime is the
 * daemon's for everyone.  Either way O(1).
 */
static void do_stats(struct bwd_request_ctx *ctx, const Envelope *req,
		     struct bwd_reply *out)
{
	struct bwd_env *env = ctx->env;
	Bitwheel__V1__StatsReply *sr = &out->body.stats;
	struct bwd_state_stats ss;
	struct bwd_uid_usage uu;
	uint64_t clients, memory;

	bwd_state_uid_usage(env->state, ctx->uid, &uu);
	if (ctx->uid == 0) {
		bwd_state_stats(env->state, &ss);
		lane_stats(env->state, BW_LANE_ONESHOT, &ss, &out->lanes[0]);
		lane_stats(env->state, BW_LANE_PERIODIC, &ss, &out->lanes[1]);
		clients = env->clients;
		memory = ss.bytes + env->buffered;
	} else {
		ss = (struct bwd_state_stats){
			.sessions = uu.sessions, .queued = uu.queued,
			.in_flight = uu.in_flight, .consumers = uu.consumers,
			.dropped = uu.dropped, .acked = uu.acked,
			.redelivered = uu.redelivered, .expired = uu.expired,
		};
		own_lane(&uu.lane[BW_LANE_ONESHOT], &out->lanes[0]);
		own_lane(&uu.lane[BW_LANE_PERIODIC], &out->lanes[1]);
		clients = uu.connections;
		memory = uu.bytes;
	}
	bitwheel__v1__stats_reply__init(sr);
	sr->oneshot = &out->lanes[0];
	sr->periodic = &out->lanes[1];
	sr->has_clients = sr->has_sessions = sr->has_queued = sr->has_dropped = 1;
	sr->clients = clients;
	sr->sessions = ss.sessions;
	sr->queued = ss.queued;
	sr->dropped = ss.dropped;
	sr->has_expired = sr->has_in_flight = sr->has_consumers = 1;
	sr->expired = ss.expired;
	sr->in_flight = ss.in_flight;
	sr->consumers = ss.consumers;
	sr->has_acked = sr->has_redelivered = 1;
	sr->acked = ss.acked;
	sr->redelivered = ss.redelivered;
	sr->has_uptime_ns = sr->has_memory_bytes = 1;
	sr->uptime_ns = bw_now_ns() - env->started_ns;
	sr->memory_bytes = memory;
	sr->has_uid_connections = sr->has_uid_sessions = 1;
	sr->has_uid_timers = sr->has_uid_periodic_rate_mhz = 1;
	sr->uid_connections = uu.connections;
	sr->uid_sessions = uu.sessions;
	sr->uid_timers = uu.timers;
	sr->uid_periodic_rate_mhz = uu.periodic_mhz;
	sr->has_uid_bytes = 1;
	sr->uid_bytes = uu.bytes;
	if (ctx->uid == 0) {
		fill_metrics(env, out);
		sr->metrics = &out->metrics;
	}
	reply_init(out, true, req->request_id, BITWHEEL__V1__ENVELOPE__BODY_STATS_REPLY);
	out->env.stats_reply = sr;
}

/* ---- introspection: ListSessions, ListTimers --------------------------- */

/*
 * A listing's page: where it starts (a cursor the client passes back must
 * continue the connection's last listing of the same thing), and how many
 * entries it may hold (the request's limit, BWD_LIST_MAX, and what fits
 * max_frame).  0, or the reply already says why not.
 */
static int list_start(struct bwd_request_ctx *ctx, const Envelope *req,
		      bool has_cursor, uint64_t cursor, uint32_t limit,
		      uint64_t what, size_t entry_max, size_t reply_max,
		      size_t *max, struct bwd_reply *out)
{
	struct bwd_list_cursor *lc = ctx->list;
	size_t fit = (ctx->env->opt->limits.max_frame - reply_max) / entry_max;

	if (has_cursor && cursor != 0 &&
	    (cursor != lc->token || lc->body != (int)req->body_case ||
	     lc->what != what)) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "cursor %" PRIu64 " does not continue this connection's last listing of the same thing: start again without one",
		      cursor);
		return -1;
	}
	if (!has_cursor || cursor == 0) {
		lc->pos = 0;
		lc->body = (int)req->body_case;
		lc->what = what;
	}
	*max = fit < BWD_LIST_MAX ? fit : BWD_LIST_MAX;
	if (limit && limit < *max)
		*max = limit;
	return 0;
}

/* A page is out: its cursor, 0 once the listing is done (and lc->pos is
 * where the next page starts). */
static uint64_t list_end(struct bwd_request_ctx *ctx, bool done,
			 struct bwd_reply *out)
{
	struct bwd_list_cursor *lc = ctx->list;

	out->heavy = true;
	if (done)
		return lc->token = 0;
	return lc->token = lc->token == UINT64_MAX ? 1 : lc->token + 1;
}

/*
 * One block for a page of max entries: the state's pointers to them, then
 * the reply's messages (info_size each) and its pointers to those, which
 * out->heap keeps until conn.c has packed it.  NULL: out says NO_MEMORY.
 */
static void *page_block(const Envelope *req, size_t max, size_t info_size,
			struct bwd_reply *out)
{
	void *block = malloc(max * (2 * sizeof(void *) + info_size));

	if (!block)
		error(out, true, req->request_id, PROTOCOL_NAME(NO_MEMORY), false,
		      "out of memory for a page of %zu entries", max);
	return block;
}

/* uid's namespace, or (any) every one, as the caller may see them: a
 * refusal comes before any lookup, so it tells nothing of others'. */
static bool may_see(struct bwd_request_ctx *ctx, const Envelope *req,
		    bool has_owner, uint32_t owner, struct bwd_reply *out)
{
	if (!has_owner || owner == (uint32_t)ctx->uid || ctx->uid == 0)
		return true;
	error(out, true, req->request_id, PROTOCOL_NAME(PERMISSION_DENIED), false,
	      "uid %ld may list only its own sessions, not uid %" PRIu32 "'s",
	      (long)ctx->uid, owner);
	return false;
}

/* A listed session's reply entry, with room for what it points to. */
struct session_entry {
	Bitwheel__V1__SessionInfo info;
	Bitwheel__V1__Policy policy;
	char dead_letter[BWP_SESSION_NAME_MAX + 1];
};

static void session_info(const struct bwd_session *s, uint64_t now,
			 uint64_t linger, struct session_entry *e)
{
	Bitwheel__V1__SessionInfo *si = &e->info;

	bitwheel__v1__session_info__init(si);
	if (s->name)
		si->policy = policy_of(s, &e->policy, e->dead_letter);
	si->has_dead_letters = si->has_delayed = si->has_dead_lettered = 1;
	si->dead_letters = s->dead_letters;
	si->delayed = s->delayed;
	si->dead_lettered = s->dead_lettered;
	si->has_name = s->name != NULL;
	si->name.data = (uint8_t *)s->name;
	si->name.len = s->name ? strlen(s->name) : 0;
	si->has_owner_uid = si->has_timers = si->has_queued = 1;
	si->owner_uid = (uint32_t)s->owner;
	si->timers = s->timers.count;
	si->queued = s->queued;
	si->has_in_flight = si->has_consumers = si->has_producers = 1;
	si->in_flight = s->in_flight;
	si->consumers = s->nconsumers;
	si->producers = s->nmembers - s->nconsumers;
	si->has_idle_ns = si->has_dropped = 1;
	si->idle_ns = !s->nmembers && now > s->detached_ns ? now - s->detached_ns : 0;
	si->dropped = s->dropped;
	si->has_expires_in_ns = s->lingering;
	si->expires_in_ns = si->idle_ns < linger ? linger - si->idle_ns : 0;
	si->has_pid = !s->name && s->members;
	si->pid = s->members ? (uint32_t)s->members->pid : 0;
}

/* Root sees every uid's sessions, anyone else its own uid's: O(the page
 * + at most BWD_LIST_WORK map slots passed over). */
static void do_list_sessions(struct bwd_request_ctx *ctx, const Envelope *req,
			     struct bwd_reply *out)
{
	const Bitwheel__V1__ListSessions *q = req->list_sessions;
	Bitwheel__V1__ListSessionsReply *r = &out->body.list_sessions;
	bool any = ctx->uid == 0 && !q->has_owner_uid;
	uid_t owner = q->has_owner_uid ? (uid_t)q->owner_uid : ctx->uid;
	const struct bwd_session **page;
	struct session_entry *info;
	Bitwheel__V1__SessionInfo **ptr;
	uint64_t now = now_of(ctx);
	size_t max, n;
	bool done;

	if (!may_see(ctx, req, q->has_owner_uid, q->owner_uid, out) ||
	    list_start(ctx, req, q->has_cursor, q->cursor, q->limit,
		       any ? UINT64_MAX : (uint64_t)owner, BWD_SESSION_ENTRY_MAX,
		       BWD_SESSIONS_REPLY_MAX, &max, out))
		return;
	if (!(page = page_block(req, max, sizeof(*info), out)))
		return;
	info = (struct session_entry *)(page + max);
	ptr = (Bitwheel__V1__SessionInfo **)(info + max);
	done = bwd_state_list_sessions(ctx->env->state, any, owner, &ctx->list->pos,
				       page, max, &n);
	bitwheel__v1__list_sessions_reply__init(r);
	for (size_t i = 0; i < n; i++) {
		session_info(page[i], now, ctx->env->opt->limits.linger_ns, &info[i]);
		ptr[i] = &info[i].info;
	}
	r->n_sessions = n;
	r->sessions = ptr;
	reply_init(out, true, req->request_id,
		   BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS_REPLY);
	out->env.list_sessions_reply = r;
	out->heap = page;
	r->has_more = 1;
	r->more = r->has_cursor = !done;
	r->cursor = list_end(ctx, done, out);
}

static void timer_info(const struct bwd_timer *t, Bitwheel__V1__TimerInfo *ti)
{
	struct bwd_calendar c;

	bitwheel__v1__timer_info__init(ti);
	ti->has_key = ti->has_deadline_ns = ti->has_period_ns = 1;
	ti->key = t->node.key;
	ti->deadline_ns = t->deadline_ns;
	ti->period_ns = bwd_timer_period(t);
	ti->has_payload_bytes = ti->has_has_payload = 1;
	ti->payload_bytes = t->payload_len;
	ti->has_payload = t->has_payload;
	ti->has_fire_count = bwd_timer_period(t) != 0;
	ti->fire_count = bwd_timer_count(t);
	ti->has_late = t->late;
	ti->late = t->late;
	ti->has_lane = 1;
	ti->lane = t->lane == BW_LANE_PERIODIC ? BITWHEEL__V1__LANE__LANE_PERIODIC :
		BITWHEEL__V1__LANE__LANE_ONESHOT;
	ti->has_deadline_realtime_ns = t->wall && !t->boot;
	ti->deadline_realtime_ns = ti->has_deadline_realtime_ns ?
		bwd_wall_ns(t->session->state, t) : 0;
	ti->has_clock = t->boot;
	ti->clock = t->boot ? BITWHEEL__V1__CLOCK__CLOCK_BOOTTIME :
		BITWHEEL__V1__CLOCK__CLOCK_MONOTONIC;
	/* Listed while the timer is: the reply is packed in this turn. */
	if (!(ti->calendar = (char *)bwd_cal_info(t->session->state, t, &c)))
		return;
	ti->has_fire_count = 1;
	ti->has_jitter_ns = ti->has_jitter_fixed = c.jitter_ns != 0;
	ti->jitter_ns = c.jitter_ns;
	ti->jitter_fixed = c.fixed;
	ti->has_misfire_grace_ns = c.has_grace;
	ti->misfire_grace_ns = c.grace_ns;
}

/* A named session's pending timers, its owner's or root's to see:
 * O(the page + at most BWD_LIST_WORK map slots passed over). */
static void do_list_timers(struct bwd_request_ctx *ctx, const Envelope *req,
			   struct bwd_reply *out)
{
	const Bitwheel__V1__ListTimers *q = req->list_timers;
	Bitwheel__V1__ListTimersReply *r = &out->body.list_timers;
	uid_t owner = q->has_owner_uid ? (uid_t)q->owner_uid : ctx->uid;
	char name[BWP_SESSION_NAME_MAX + 1];
	const struct bwd_timer **page;
	Bitwheel__V1__TimerInfo *info, **ptr;
	struct bwd_session *s;
	size_t max, n;
	bool done;

	if (!q->has_session || !bwp_session_name_valid(q->session.data, q->session.len)) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "ListTimers needs a session name: 1 to %u bytes of A-Z a-z 0-9 _ . : @ -",
		      BWP_SESSION_NAME_MAX);
		return;
	}
	if (!may_see(ctx, req, q->has_owner_uid, q->owner_uid, out))
		return;
	memcpy(name, q->session.data, q->session.len);
	name[q->session.len] = '\0';
	s = bwd_state_session(ctx->env->state, owner, name);
	if (!s) {
		error(out, true, req->request_id, PROTOCOL_NAME(UNKNOWN_SESSION), false,
		      "uid %ld has no session '%s'", (long)owner, name);
		return;
	}
	if (list_start(ctx, req, q->has_cursor, q->cursor, q->limit, s->id,
		       BWD_TIMER_ENTRY_MAX, BWD_TIMERS_REPLY_MAX, &max, out))
		return;
	if (!(page = page_block(req, max, sizeof(*info), out)))
		return;
	info = (Bitwheel__V1__TimerInfo *)(page + max);
	ptr = (Bitwheel__V1__TimerInfo **)(info + max);
	done = bwd_session_list_timers(s, &ctx->list->pos, page, max,
				       ctx->env->opt->limits.max_frame - BWD_TIMERS_REPLY_MAX,
				       &n);
	bitwheel__v1__list_timers_reply__init(r);
	for (size_t i = 0; i < n; i++) {
		timer_info(page[i], &info[i]);
		ptr[i] = &info[i];
	}
	r->n_timers = n;
	r->timers = ptr;
	r->has_total = r->has_owner_uid = 1;
	r->total = s->timers.count;
	r->owner_uid = (uint32_t)s->owner;
	r->has_now_ns = r->has_realtime_ns = 1;
	r->now_ns = bw_now_ns();
	r->realtime_ns = bwd_realtime_ns();
	reply_init(out, true, req->request_id,
		   BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS_REPLY);
	out->env.list_timers_reply = r;
	out->heap = page;
	r->has_more = 1;
	r->more = r->has_cursor = !done;
	r->cursor = list_end(ctx, done, out);
}

/* ---- Calendar ------------------------------------------------------------ */

/*
 * The next elapses of a calendar event, as systemd-analyze calendar
 * prints them (PROTOCOL.md, "Calendar"): read-only, any connection.
 * O(iterations) bwd_cal_next() calls, each bounded by systemd's 1000
 * rounds, so a reply costs at most milliseconds (bench/bwcal); the
 * reply is heavy, as a listing's page.  The normalized form and the
 * elapses live in one block that out->heap keeps until it is packed.
 */
static void do_calendar(struct bwd_request_ctx *ctx, const Envelope *req,
			struct bwd_reply *out)
{
	const Bitwheel__V1__Calendar *q = req->calendar;
	Bitwheel__V1__CalendarReply *r = &out->body.calendar;
	uint32_t n = q->iterations ? q->iterations : 1;
	uint64_t t = q->has_base_realtime_ns ? q->base_realtime_ns :
		bwd_realtime_ns();
	size_t fit, room;
	struct bwd_cal *cal;
	/* calendar.c quotes the spec first: room for it and the reason. */
	char err[2 * BWD_CAL_SPEC_MAX + 256];
	const char *why = err;
	size_t len;
	char *block;
	int rc;

	if (!q->spec) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "Calendar needs a spec");
		return;
	}
	if (n > BWD_CAL_ITERATIONS_MAX) {
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "Calendar iterations %" PRIu32 " is over the limit of %u",
		      n, BWD_CAL_ITERATIONS_MAX);
		return;
	}
	rc = bwd_cal_parse(q->spec, &cal, err, sizeof(err));
	if (rc < 0) {
		/* A long spec would push the reason out of the message:
		 * the client knows what it sent. */
		len = strlen(q->spec);
		if (strlen(err) + 16 > sizeof(out->message) && err[0] == '\'' &&
		    strncmp(err + 1, q->spec, len) == 0 &&
		    strncmp(err + 1 + len, "': ", 3) == 0)
			why = err + len + 4;
		error(out, true, req->request_id,
		      rc == -ENOMEM ? PROTOCOL_NAME(NO_MEMORY) :
		      PROTOCOL_NAME(BAD_CALENDAR), false, "calendar %s%s",
		      why == err ? "" : "spec: ", why);
		return;
	}
	room = BWD_CAL_SPEC_MAX + n * sizeof(uint64_t);
	if (!(block = malloc(room))) {
		bwd_cal_free(cal);
		error(out, true, req->request_id, PROTOCOL_NAME(NO_MEMORY), false,
		      "out of memory for %" PRIu32 " elapses", n);
		return;
	}
	bitwheel__v1__calendar_reply__init(r);
	r->normalized = block + n * sizeof(uint64_t);
	r->elapses_realtime_ns = (uint64_t *)(void *)block;
	bwd_cal_normalize(cal, r->normalized, BWD_CAL_SPEC_MAX);
	/* What fits max_frame: the envelope around the elapses takes
	 * BWD_CALENDAR_REPLY_MAX and the normalized form, each elapse 10
	 * bytes at most. */
	fit = strlen(r->normalized) + BWD_CALENDAR_REPLY_MAX;
	fit = fit < ctx->env->opt->limits.max_frame ?
		(ctx->env->opt->limits.max_frame - fit) / 10 : 0;
	if (n > fit) {
		free(block);
		bwd_cal_free(cal);
		error(out, true, req->request_id, PROTOCOL_NAME(BAD_REQUEST), false,
		      "Calendar iterations %" PRIu32 ": only %zu elapses of this spec fit the daemon's max frame of %" PRIu32 " bytes",
		      n, fit, ctx->env->opt->limits.max_frame);
		return;
	}
	r->has_base_realtime_ns = 1;
	r->base_realtime_ns = t;
	if (*bwd_tz_name(bwd_cal_zone(cal)))
		r->zone = (char *)bwd_tz_name(bwd_cal_zone(cal));
	while (r->n_elapses_realtime_ns < n &&
	       (rc = bwd_cal_next(cal, t, &t)) == 0)
		r->elapses_realtime_ns[r->n_elapses_realtime_ns++] = t;
	r->has_gave_up = rc == -EDEADLK;
	r->gave_up = rc == -EDEADLK;
	bwd_cal_free(cal);
	reply_init(out, true, req->request_id,
		   BITWHEEL__V1__ENVELOPE__BODY_CALENDAR_REPLY);
	out->env.calendar_reply = r;
	out->heap = block;
	out->heavy = true;
}

/* The rules every request meets before its own; false when it failed. */
static bool admissible(struct bwd_request_ctx *ctx, bool has_id, uint64_t id,
		       Bitwheel__V1__Envelope__BodyCase body, struct bwd_reply *out)
{
	if (!has_id && body != BITWHEEL__V1__ENVELOPE__BODY_ACK) {
		bwd_request_fail(out, PROTOCOL_NAME(BAD_REQUEST),
				 "a request without request_id");
		return false;
	}
	switch (body) {
	case BITWHEEL__V1__ENVELOPE__BODY_HELLO:
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE:
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL:
	case BITWHEEL__V1__ENVELOPE__BODY_STATS:
	case BITWHEEL__V1__ENVELOPE__BODY_ACK:
	case BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS:
	case BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS:
	case BITWHEEL__V1__ENVELOPE__BODY_RELEASE:
	case BITWHEEL__V1__ENVELOPE__BODY_TOUCH:
	case BITWHEEL__V1__ENVELOPE__BODY_SET_POLICY:
	case BITWHEEL__V1__ENVELOPE__BODY_KICK:
	case BITWHEEL__V1__ENVELOPE__BODY_CALENDAR:
		break;
	default:
		error(out, has_id, id, PROTOCOL_NAME(UNKNOWN_MESSAGE), true,
		      "body %d is not a request", (int)body);
		return false;
	}
	if (body != BITWHEEL__V1__ENVELOPE__BODY_HELLO && !ctx->member) {
		error(out, has_id, id, PROTOCOL_NAME(HELLO_REQUIRED), true,
		      "the first request must be Hello");
		return false;
	}
	return true;
}

void bwd_request_handle_fast(struct bwd_request_ctx *ctx,
			     const struct bwp_request *r, struct bwd_reply *out)
{
	/* The common case costs two tests; the rest says it the slow way. */
	if ((!r->has_request_id || !ctx->member) &&
	    !admissible(ctx, r->has_request_id, r->request_id, r->body_case, out))
		return;
	if (r->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE)
		do_schedule(ctx, r, out);
	else if (r->body_case == BITWHEEL__V1__ENVELOPE__BODY_CANCEL)
		do_cancel(ctx, r, out);
	else
		do_ack(ctx, r, out);
}

void bwd_request_handle(struct bwd_request_ctx *ctx, const Envelope *req,
			struct bwd_reply *out)
{
	struct bwp_request r;

	if (!admissible(ctx, req->has_request_id, req->request_id, req->body_case, out))
		return;
	if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_HELLO)
		do_hello(ctx, req, out);
	else if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_STATS)
		do_stats(ctx, req, out);
	else if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_LIST_SESSIONS)
		do_list_sessions(ctx, req, out);
	else if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_LIST_TIMERS)
		do_list_timers(ctx, req, out);
	else if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_RELEASE)
		do_release(ctx, req, out);
	else if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_TOUCH)
		do_touch(ctx, req, out);
	else if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_SET_POLICY)
		do_set_policy(ctx, req, out);
	else if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_KICK)
		do_kick(ctx, req, out);
	else if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_CALENDAR)
		do_calendar(ctx, req, out);
	else if (bwp_request_from_envelope(req, &r))
		bwd_request_handle_fast(ctx, &r, out);
	else
		error(out, req->has_request_id, req->request_id, PROTOCOL_NAME(INTERNAL),
		      false, "body %d has no handler", (int)req->body_case);
}
