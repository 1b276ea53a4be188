/*
 * request.c - what each request does, and the reply it gets.
 *
 * One function per request type turns the decoded envelope into a call on
 * the state (state.c) and packs exactly one reply: its own *_reply or an
 * Error carrying the request's id (PROTOCOL.md sections 5, 6 and 8).
 * Requests that break the connection's rules (no request_id, nothing
 * before Hello, a failed Hello, a non-request body) fail the connection:
 * an error frame, then a close.  Payloads and keys are logged only at
 * debug level.
 */
#include <inttypes.h>
#include <string.h>

#include "daemon-internal.h"

#define PROTOCOL_NAME(code) BITWHEEL__V1__ERROR_CODE__##code

typedef Bitwheel__V1__Envelope Envelope;

/* Send a reply whose body the caller filled in. */
static void reply(struct bwd_conn *c, Envelope *env)
{
	if (bwd_conn_send(c, env))
		bwd_conn_close(c, false);
}

static const char *state_error_text(int code)
{
	switch (code) {
	case PROTOCOL_NAME(PERMISSION_DENIED):
		return "the session belongs to another user";
	case PROTOCOL_NAME(SESSION_BUSY):
		return "the session is attached to another connection";
	case PROTOCOL_NAME(DUPLICATE_KEY):
		return "the key is pending; set replace to replace it";
	case PROTOCOL_NAME(TOO_MANY_TIMERS):
		return "the session holds its maximum of pending timers";
	case PROTOCOL_NAME(NO_MEMORY):
		return "out of memory";
	default:
		return "internal error";
	}
}

static void do_hello(struct bwd_conn *c, const Envelope *req)
{
	const struct bwd_options *opt = bwd_server_options(bwd_conn_server(c));
	const Bitwheel__V1__Hello *h = req->hello;
	Envelope env;
	Bitwheel__V1__HelloReply hr = BITWHEEL__V1__HELLO_REPLY__INIT;
	Bitwheel__V1__Limits lim = BITWHEEL__V1__LIMITS__INIT;
	struct bwd_session *s;
	char name[BWP_SESSION_NAME_MAX + 1];
	bool resumed;
	int err;

	if (bwd_conn_session(c)) {
		bwd_conn_error(c, req, PROTOCOL_NAME(ALREADY_HELLO), false,
			    "this connection already said Hello");
		return;
	}
	if (!h->has_protocol_version) {
		bwd_conn_error(c, req, PROTOCOL_NAME(BAD_REQUEST), true,
			      "Hello without protocol_version");
		return;
	}
	if (h->protocol_version != BWP_PROTOCOL_VERSION) {
		bwd_conn_error(c, req, PROTOCOL_NAME(BAD_VERSION), true,
			      "protocol version %" PRIu32 " is not spoken here; this daemon speaks %d",
			      h->protocol_version, BWP_PROTOCOL_VERSION);
		return;
	}
	if (h->has_session && !bwp_session_name_valid(h->session.data, h->session.len)) {
		bwd_conn_error(c, req, PROTOCOL_NAME(BAD_REQUEST), true,
			      "session names are 1 to %u bytes of A-Z a-z 0-9 _ . : @ -",
			      BWP_SESSION_NAME_MAX);
		return;
	}
	if (h->has_session) {
		memcpy(name, h->session.data, h->session.len);
		name[h->session.len] = '\0';
	}
	err = bwd_session_open(bwd_server_state(bwd_conn_server(c)),
			       h->has_session ? name : NULL,
			       bwd_conn_uid(c), c, &s, &resumed);
	if (err) {
		bwd_conn_error(c, req, err, true, "session '%s': %s",
			      h->has_session ? name : "(anonymous)",
			      state_error_text(err));
		return;
	}
	bwd_conn_set_session(c, s);
	lim.has_max_frame_bytes = lim.has_max_payload_bytes = 1;
	lim.max_frame_bytes = opt->limits.max_frame;
	lim.max_payload_bytes = opt->limits.max_payload;
	lim.has_max_timers = lim.has_max_queued = lim.has_session_linger_ns = 1;
	lim.max_timers = opt->limits.max_timers;
	lim.max_queued = opt->limits.max_queued;
	lim.session_linger_ns = opt->limits.linger_ns;
	lim.has_max_output_bytes = lim.has_max_clients = 1;
	lim.max_output_bytes = opt->limits.max_output;
	lim.max_clients = opt->limits.max_clients;
	hr.has_protocol_version = 1;
	hr.protocol_version = BWP_PROTOCOL_VERSION;
	hr.daemon_version = PACKAGE_VERSION;
	hr.has_oneshot_resolution_ns = hr.has_periodic_resolution_ns = 1;
	hr.oneshot_resolution_ns = opt->wheel.oneshot.resolution_ms * 1000000ull;
	hr.periodic_resolution_ns = opt->wheel.periodic.resolution_ms * 1000000ull;
	hr.limits = &lim;
	hr.has_resumed = hr.has_timers = hr.has_queued = hr.has_dropped = 1;
	hr.resumed = resumed;
	hr.timers = s->timers.count;
	hr.queued = s->queued;
	hr.dropped = s->dropped;
	s->dropped = 0;
	bwp_reply_init(&env, req);
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY;
	env.hello_reply = &hr;
	reply(c, &env);
	if (s->name)
		bwd_log(BWD_LOG_INFO, "uid %ld %s session '%s' (%zu timers, %" PRIu64 " queued fires)",
			(long)bwd_conn_uid(c), resumed ? "resumed" : "opened",
			s->name, s->timers.count, s->queued);
	bwd_conn_drain_queue(c);
}

/* An envelope that carries only r's request id: what error replies copy. */
static const Envelope *id_of(const struct bwp_request *r, Envelope *env)
{
	bitwheel__v1__envelope__init(env);
	env->has_request_id = r->has_request_id;
	env->request_id = r->request_id;
	return env;
}

static void do_schedule(struct bwd_conn *c, const struct bwp_request *r)
{
	const struct bwd_options *opt = bwd_server_options(bwd_conn_server(c));
	Envelope env = BITWHEEL__V1__ENVELOPE__INIT, id;
	Bitwheel__V1__ScheduleReply sr = BITWHEEL__V1__SCHEDULE_REPLY__INIT;
	struct bwd_schedule s = { 0 };
	bool replaced;
	uint64_t now;
	int err;

	if (!r->has_key) {
		bwd_conn_error(c, id_of(r, &id), PROTOCOL_NAME(BAD_REQUEST), false,
			       "Schedule without key");
		return;
	}
	switch (r->when_case) {
	case BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS:
		now = bwd_conn_now(c);
		if (r->when_ns > UINT64_MAX - now) {
			bwd_conn_error(c, id_of(r, &id), PROTOCOL_NAME(BAD_DEADLINE), false,
				    "now + delay_ns overflows 64 bits");
			return;
		}
		s.deadline_ns = now + r->when_ns;
		break;
	case BITWHEEL__V1__SCHEDULE__WHEN_DEADLINE_NS:
		s.deadline_ns = r->when_ns;
		break;
	default:
		bwd_conn_error(c, id_of(r, &id), PROTOCOL_NAME(BAD_DEADLINE), false,
			    "Schedule needs delay_ns or deadline_ns");
		return;
	}
	if (r->has_period_ns && r->period_ns == 0) {
		bwd_conn_error(c, id_of(r, &id), PROTOCOL_NAME(BAD_DEADLINE), false,
			       "period_ns must be > 0");
		return;
	}
	if (r->has_payload && r->payload_len > opt->limits.max_payload) {
		bwd_conn_error(c, id_of(r, &id), PROTOCOL_NAME(PAYLOAD_TOO_LARGE), false,
			    "payload of %zu bytes is over the limit of %" PRIu32,
			    r->payload_len, opt->limits.max_payload);
		return;
	}
	s.key = r->key;
	s.period_ns = r->has_period_ns ? r->period_ns : 0;
	s.has_payload = r->has_payload;
	s.payload = r->payload;
	s.payload_len = r->has_payload ? (uint32_t)r->payload_len : 0;
	s.replace = r->has_replace && r->replace;
	err = bwd_timer_schedule(bwd_conn_session(c), &s, &replaced);
	if (err) {
		bwd_conn_error(c, id_of(r, &id), err, false, "key %" PRIu64 ": %s",
			       s.key, state_error_text(err));
		return;
	}
	sr.has_deadline_ns = sr.has_replaced = 1;
	sr.deadline_ns = s.deadline_ns;
	sr.replaced = replaced;
	env.has_request_id = r->has_request_id;
	env.request_id = r->request_id;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY;
	env.schedule_reply = &sr;
	reply(c, &env);
}

static void do_cancel(struct bwd_conn *c, const struct bwp_request *r)
{
	Envelope env = BITWHEEL__V1__ENVELOPE__INIT, id;
	Bitwheel__V1__CancelReply cr = BITWHEEL__V1__CANCEL_REPLY__INIT;
	bool pending;

	if (!r->has_key) {
		bwd_conn_error(c, id_of(r, &id), PROTOCOL_NAME(BAD_REQUEST), false,
			       "Cancel without key");
		return;
	}
	bwd_timer_cancel(bwd_conn_session(c), r->key, &pending);
	cr.has_pending = 1;
	cr.pending = pending;
	env.has_request_id = r->has_request_id;
	env.request_id = r->request_id;
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY;
	env.cancel_reply = &cr;
	reply(c, &env);
}

static void lane_stats(struct bw_wheel *w, Bitwheel__V1__LaneStats *ls)
{
	struct bw_counters k;

	bw_wheel_counters(w, &k);
	ls->has_pending = ls->has_overflow = ls->has_inserted = 1;
	ls->has_cancelled = ls->has_fired = ls->has_lost = 1;
	ls->pending = bw_wheel_pending(w);
	ls->overflow = bw_wheel_overflow_pending(w);
	ls->inserted = k.inserted;
	ls->cancelled = k.cancelled;
	ls->fired = k.fired;
	ls->lost = k.lost;
}

static void do_stats(struct bwd_conn *c, const Envelope *req)
{
	struct bwd_server *srv = bwd_conn_server(c);
	struct bwd_state *st = bwd_server_state(srv);
	struct bw_dual *wheel = bwd_state_wheel(st);
	struct bwd_state_stats ss;
	Envelope env;
	Bitwheel__V1__StatsReply sr = BITWHEEL__V1__STATS_REPLY__INIT;
	Bitwheel__V1__LaneStats one = BITWHEEL__V1__LANE_STATS__INIT;
	Bitwheel__V1__LaneStats per = BITWHEEL__V1__LANE_STATS__INIT;

	bwd_state_stats(st, &ss);
	lane_stats(bw_dual_lane(wheel, BW_LANE_ONESHOT), &one);
	lane_stats(bw_dual_lane(wheel, BW_LANE_PERIODIC), &per);
	sr.oneshot = &one;
	sr.periodic = &per;
	sr.has_clients = sr.has_sessions = sr.has_queued = sr.has_dropped = 1;
	sr.clients = bwd_server_clients(srv);
	sr.sessions = ss.sessions;
	sr.queued = ss.queued;
	sr.dropped = ss.dropped;
	sr.has_expired = 1;
	sr.expired = ss.expired;
	sr.has_uptime_ns = sr.has_memory_bytes = 1;
	sr.uptime_ns = bw_now_ns() - bwd_server_started(srv);
	sr.memory_bytes = ss.bytes + bwd_server_buffered(srv);
	bwp_reply_init(&env, req);
	env.body_case = BITWHEEL__V1__ENVELOPE__BODY_STATS_REPLY;
	env.stats_reply = &sr;
	reply(c, &env);
}

/* The rules every request meets before its own; false when it failed. */
static bool admissible(struct bwd_conn *c, const Envelope *req)
{
	if (!req->has_request_id) {
		bwd_conn_error(c, NULL, PROTOCOL_NAME(BAD_REQUEST), true,
			      "a request without request_id");
		return false;
	}
	if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_HELLO)
		return true;
	switch (req->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE:
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL:
	case BITWHEEL__V1__ENVELOPE__BODY_STATS:
		if (!bwd_conn_session(c)) {
			bwd_conn_error(c, req, PROTOCOL_NAME(HELLO_REQUIRED), true,
				      "the first request must be Hello");
			return false;
		}
		return true;
	default:
		bwd_conn_error(c, req, PROTOCOL_NAME(UNKNOWN_MESSAGE), true,
			      "body %d is not a request", (int)req->body_case);
		return false;
	}
}

void bwd_request_handle_fast(struct bwd_conn *c, const struct bwp_request *r)
{
	Envelope id;

	/* The common case costs two tests; the rest says it the slow way. */
	if (!r->has_request_id || !bwd_conn_session(c)) {
		id_of(r, &id);
		id.body_case = r->body_case;
		if (!admissible(c, &id))
			return;
	}
	if (r->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE)
		do_schedule(c, r);
	else
		do_cancel(c, r);
}

void bwd_request_handle(struct bwd_conn *c, const Envelope *req)
{
	struct bwp_request r;

	if (!admissible(c, req))
		return;
	if (req->body_case == BITWHEEL__V1__ENVELOPE__BODY_HELLO)
		do_hello(c, req);
	else if (bwp_request_from_envelope(req, &r))
		bwd_request_handle_fast(c, &r);
	else
		do_stats(c, req);
}
