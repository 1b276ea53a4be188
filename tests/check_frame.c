/*
 * check_frame.c - the protocol's frame layer (proto/frame.c) against
 * well-formed frames of every message, frames cut at every byte, and
 * malformed headers and bodies; and the duration parser and Schedule
 * bounds beside it (proto/duration.c, TCase duration).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "duration.h"
#include "frame.h"

/* ---- sample envelopes ---------------------------------------------------- */

/* Storage for one envelope and everything it points at. */
struct sample {
	Bitwheel__V1__Envelope env;
	Bitwheel__V1__Hello hello;
	Bitwheel__V1__Schedule schedule;
	Bitwheel__V1__Cancel cancel;
	Bitwheel__V1__Stats stats;
	Bitwheel__V1__Error error;
	Bitwheel__V1__HelloReply hello_reply;
	Bitwheel__V1__Limits limits;
	Bitwheel__V1__ScheduleReply schedule_reply;
	Bitwheel__V1__CancelReply cancel_reply;
	Bitwheel__V1__StatsReply stats_reply;
	Bitwheel__V1__LaneStats lanes[2];
	Bitwheel__V1__Fired fired;
	Bitwheel__V1__Ack ack;
	Bitwheel__V1__AckReply ack_reply;
};

/* NULs and high bytes inside: payloads are bytes, not strings. */
static const uint8_t payload[] = { 0x00, 0x01, 0xff, 0x00, 'p', 0x80 };
#define SESSION "backup_job-1.host:9@x"
#define BIG UINT64_MAX

static void set_id(struct sample *s, uint64_t id)
{
	s->env.has_request_id = 1;
	s->env.request_id = id;
}

static void build_hello(struct sample *s)
{
	set_id(s, 1);
	s->hello.has_protocol_version = 1;
	s->hello.protocol_version = BWP_PROTOCOL_VERSION;
	s->hello.has_session = 1;
	s->hello.session.data = (uint8_t *)SESSION;
	s->hello.session.len = strlen(SESSION);
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	s->env.hello = &s->hello;
}

static void check_hello(const Bitwheel__V1__Envelope *e)
{
	ck_assert(e->has_request_id);
	ck_assert_uint_eq(e->request_id, 1);
	ck_assert(e->hello->has_protocol_version);
	ck_assert_uint_eq(e->hello->protocol_version, BWP_PROTOCOL_VERSION);
	ck_assert(e->hello->has_session);
	ck_assert_mem_eq(e->hello->session.data, SESSION, strlen(SESSION));
	ck_assert_uint_eq(e->hello->session.len, strlen(SESSION));
}

static void build_hello_anonymous(struct sample *s)
{
	set_id(s, BIG);
	s->hello.has_protocol_version = 1;
	s->hello.protocol_version = BWP_PROTOCOL_VERSION;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	s->env.hello = &s->hello;
}

static void check_hello_anonymous(const Bitwheel__V1__Envelope *e)
{
	ck_assert_uint_eq(e->request_id, BIG);
	ck_assert_uint_eq(e->hello->protocol_version, BWP_PROTOCOL_VERSION);
	ck_assert(!e->hello->has_session);
	ck_assert(!e->hello->has_role && !e->hello->has_window);
	ck_assert(!e->hello->has_ack_timeout_ns && !e->hello->has_auto_ack);
}

/* Every consumer option, auto_ack an explicit false; a session name with
 * a NUL in it travels as bytes, whole (the daemon refuses it, not the
 * decoder). */
static void build_hello_consumer(struct sample *s)
{
	set_id(s, 2);
	s->hello.has_protocol_version = 1;
	s->hello.protocol_version = BWP_PROTOCOL_VERSION;
	s->hello.has_session = 1;
	s->hello.session.data = (uint8_t *)"victim\0junk";
	s->hello.session.len = 11;
	s->hello.has_role = 1;
	s->hello.role = BITWHEEL__V1__ROLE__CONSUMER;
	s->hello.has_window = 1;
	s->hello.window = 4096;
	s->hello.has_ack_timeout_ns = 1;
	s->hello.ack_timeout_ns = 30000000000ull;
	s->hello.has_auto_ack = 1;
	s->hello.auto_ack = 0;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	s->env.hello = &s->hello;
}

static void check_hello_consumer(const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__Hello *m = e->hello;

	ck_assert_uint_eq(e->request_id, 2);
	ck_assert(m->has_session);
	ck_assert_uint_eq(m->session.len, 11);
	ck_assert_mem_eq(m->session.data, "victim\0junk", 11);
	ck_assert(!bwp_session_name_valid(m->session.data, m->session.len));
	ck_assert(m->has_role);
	ck_assert_int_eq(m->role, BITWHEEL__V1__ROLE__CONSUMER);
	ck_assert(m->has_window);
	ck_assert_uint_eq(m->window, 4096);
	ck_assert(m->has_ack_timeout_ns);
	ck_assert_uint_eq(m->ack_timeout_ns, 30000000000ull);
	ck_assert(m->has_auto_ack && !m->auto_ack);
}

/* Key 0 must survive as present: it is a valid key. */
static void build_schedule_delay(struct sample *s)
{
	set_id(s, 2);
	s->schedule.has_key = 1;
	s->schedule.key = 0;
	s->schedule.when_case = BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS;
	s->schedule.delay_ns = 250000000;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE;
	s->env.schedule = &s->schedule;
}

static void check_schedule_delay(const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__Schedule *m = e->schedule;

	ck_assert(m->has_key);
	ck_assert_uint_eq(m->key, 0);
	ck_assert_int_eq(m->when_case, BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS);
	ck_assert_uint_eq(m->delay_ns, 250000000);
	ck_assert(!m->has_period_ns);
	ck_assert(!m->has_payload);
	ck_assert(!m->has_replace);
}

static void build_schedule_periodic(struct sample *s)
{
	set_id(s, 3);
	s->schedule.has_key = 1;
	s->schedule.key = BIG;
	s->schedule.when_case = BITWHEEL__V1__SCHEDULE__WHEN_DEADLINE_NS;
	s->schedule.deadline_ns = BIG - 1;
	s->schedule.has_period_ns = 1;
	s->schedule.period_ns = 1000000000;
	s->schedule.has_payload = 1;
	s->schedule.payload.data = (uint8_t *)payload;
	s->schedule.payload.len = sizeof(payload);
	s->schedule.has_replace = 1;
	s->schedule.replace = 1;
	s->schedule.has_leeway_ns = 1;
	s->schedule.leeway_ns = BIG - 2;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE;
	s->env.schedule = &s->schedule;
}

static void check_schedule_periodic(const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__Schedule *m = e->schedule;

	ck_assert_uint_eq(m->key, BIG);
	ck_assert_int_eq(m->when_case,
			 BITWHEEL__V1__SCHEDULE__WHEN_DEADLINE_NS);
	ck_assert_uint_eq(m->deadline_ns, BIG - 1);
	ck_assert(m->has_period_ns);
	ck_assert_uint_eq(m->period_ns, 1000000000);
	ck_assert(m->has_payload);
	ck_assert_uint_eq(m->payload.len, sizeof(payload));
	ck_assert_mem_eq(m->payload.data, payload, sizeof(payload));
	ck_assert(m->has_replace && m->replace);
	ck_assert(m->has_leeway_ns);
	ck_assert_uint_eq(m->leeway_ns, BIG - 2);
}

/* An empty payload is present, unlike an absent one. */
static void build_schedule_empty_payload(struct sample *s)
{
	set_id(s, 4);
	s->schedule.has_key = 1;
	s->schedule.key = 7;
	s->schedule.when_case = BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS;
	s->schedule.delay_ns = 0;
	s->schedule.has_payload = 1;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE;
	s->env.schedule = &s->schedule;
}

static void check_schedule_empty_payload(const Bitwheel__V1__Envelope *e)
{
	ck_assert_int_eq(e->schedule->when_case,
			 BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS);
	ck_assert_uint_eq(e->schedule->delay_ns, 0);
	ck_assert(e->schedule->has_payload);
	ck_assert_uint_eq(e->schedule->payload.len, 0);
}

static void build_cancel(struct sample *s)
{
	set_id(s, 5);
	s->cancel.has_key = 1;
	s->cancel.key = 42;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_CANCEL;
	s->env.cancel = &s->cancel;
}

static void check_cancel(const Bitwheel__V1__Envelope *e)
{
	ck_assert_uint_eq(e->request_id, 5);
	ck_assert(e->cancel->has_key);
	ck_assert_uint_eq(e->cancel->key, 42);
}

static void build_stats(struct sample *s)
{
	set_id(s, 6);
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_STATS;
	s->env.stats = &s->stats;
}

static void check_stats(const Bitwheel__V1__Envelope *e)
{
	ck_assert_uint_eq(e->request_id, 6);
	ck_assert_ptr_nonnull(e->stats);
}

static void build_error(struct sample *s)
{
	set_id(s, 7);
	s->error.has_code = 1;
	s->error.code = BITWHEEL__V1__ERROR_CODE__DUPLICATE_KEY;
	s->error.message = "key 42 is pending";
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_ERROR;
	s->env.error = &s->error;
}

static void check_error(const Bitwheel__V1__Envelope *e)
{
	ck_assert_uint_eq(e->request_id, 7);
	ck_assert(e->error->has_code);
	ck_assert_int_eq(e->error->code,
			 BITWHEEL__V1__ERROR_CODE__DUPLICATE_KEY);
	ck_assert_str_eq(e->error->message, "key 42 is pending");
}

/* A connection-level error: no request_id, no message. */
static void build_error_unsolicited(struct sample *s)
{
	s->error.has_code = 1;
	s->error.code = BITWHEEL__V1__ERROR_CODE__FRAME_TOO_LARGE;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_ERROR;
	s->env.error = &s->error;
}

static void check_error_unsolicited(const Bitwheel__V1__Envelope *e)
{
	ck_assert(!e->has_request_id);
	ck_assert_int_eq(e->error->code,
			 BITWHEEL__V1__ERROR_CODE__FRAME_TOO_LARGE);
	ck_assert_ptr_null(e->error->message);
}

static void build_hello_reply(struct sample *s)
{
	Bitwheel__V1__HelloReply *m = &s->hello_reply;
	Bitwheel__V1__Limits *l = &s->limits;

	set_id(s, 1);
	l->has_max_frame_bytes = 1;
	l->max_frame_bytes = BWP_DEFAULT_MAX_FRAME;
	l->has_max_payload_bytes = 1;
	l->max_payload_bytes = BWP_DEFAULT_MAX_PAYLOAD;
	l->has_max_timers = 1;
	l->max_timers = 100000;
	l->has_max_queued = 1;
	l->max_queued = 4096;
	l->has_session_linger_ns = 1;
	l->session_linger_ns = 600000000000ull;
	l->has_max_output_bytes = 1;
	l->max_output_bytes = 1 << 20;
	l->has_max_clients = 1;
	l->max_clients = 1024;
	l->has_max_window = 1;
	l->max_window = 4096;
	m->has_protocol_version = 1;
	m->protocol_version = BWP_PROTOCOL_VERSION;
	m->daemon_version = "0.1.0";
	m->has_oneshot_resolution_ns = 1;
	m->oneshot_resolution_ns = 5000000;
	m->has_periodic_resolution_ns = 1;
	m->periodic_resolution_ns = 100000000;
	m->limits = l;
	m->has_resumed = 1;
	m->resumed = 1;
	m->has_timers = 1;
	m->timers = 12;
	m->has_queued = 1;
	m->queued = 3;
	m->has_dropped = 1;
	m->dropped = 1;
	m->has_role = 1;
	m->role = BITWHEEL__V1__ROLE__CONSUMER;
	m->has_window = 1;
	m->window = 256;
	m->has_ack_timeout_ns = 1;
	m->ack_timeout_ns = 0;
	m->has_auto_ack = 1;
	m->auto_ack = 0;
	m->has_consumers = 1;
	m->consumers = 2;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY;
	s->env.hello_reply = m;
}

static void check_hello_reply(const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__HelloReply *m = e->hello_reply;
	const Bitwheel__V1__Limits *l = m->limits;

	ck_assert_uint_eq(m->protocol_version, BWP_PROTOCOL_VERSION);
	ck_assert_str_eq(m->daemon_version, "0.1.0");
	ck_assert_uint_eq(m->oneshot_resolution_ns, 5000000);
	ck_assert_uint_eq(m->periodic_resolution_ns, 100000000);
	ck_assert(m->resumed);
	ck_assert_uint_eq(m->timers, 12);
	ck_assert_uint_eq(m->queued, 3);
	ck_assert_uint_eq(m->dropped, 1);
	ck_assert(m->has_role);
	ck_assert_int_eq(m->role, BITWHEEL__V1__ROLE__CONSUMER);
	ck_assert(m->has_window);
	ck_assert_uint_eq(m->window, 256);
	ck_assert(m->has_ack_timeout_ns);
	ck_assert_uint_eq(m->ack_timeout_ns, 0);
	ck_assert(m->has_auto_ack && !m->auto_ack);
	ck_assert(m->has_consumers);
	ck_assert_uint_eq(m->consumers, 2);
	ck_assert_ptr_nonnull(l);
	ck_assert_uint_eq(l->max_frame_bytes, BWP_DEFAULT_MAX_FRAME);
	ck_assert_uint_eq(l->max_payload_bytes, BWP_DEFAULT_MAX_PAYLOAD);
	ck_assert_uint_eq(l->max_timers, 100000);
	ck_assert_uint_eq(l->max_queued, 4096);
	ck_assert_uint_eq(l->session_linger_ns, 600000000000ull);
	ck_assert_uint_eq(l->max_output_bytes, 1 << 20);
	ck_assert_uint_eq(l->max_clients, 1024);
	ck_assert(l->has_max_window);
	ck_assert_uint_eq(l->max_window, 4096);
}

static void build_schedule_reply(struct sample *s)
{
	set_id(s, 2);
	s->schedule_reply.has_deadline_ns = 1;
	s->schedule_reply.deadline_ns = 123456789012345ull;
	s->schedule_reply.has_replaced = 1;
	s->schedule_reply.replaced = 1;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY;
	s->env.schedule_reply = &s->schedule_reply;
}

static void check_schedule_reply(const Bitwheel__V1__Envelope *e)
{
	ck_assert_uint_eq(e->schedule_reply->deadline_ns, 123456789012345ull);
	ck_assert(e->schedule_reply->has_replaced);
	ck_assert(e->schedule_reply->replaced);
}

/* An explicit false is sent and read back as present. */
static void build_cancel_reply(struct sample *s)
{
	set_id(s, 5);
	s->cancel_reply.has_pending = 1;
	s->cancel_reply.pending = 0;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY;
	s->env.cancel_reply = &s->cancel_reply;
}

static void check_cancel_reply(const Bitwheel__V1__Envelope *e)
{
	ck_assert(e->cancel_reply->has_pending);
	ck_assert(!e->cancel_reply->pending);
}

static void fill_lane(Bitwheel__V1__LaneStats *l, uint64_t base)
{
	l->has_pending = l->has_overflow = l->has_inserted = 1;
	l->has_cancelled = l->has_fired = l->has_lost = 1;
	l->pending = base + 1;
	l->overflow = base + 2;
	l->inserted = base + 3;
	l->cancelled = base + 4;
	l->fired = base + 5;
	l->lost = base + 6;
}

static void check_lane(const Bitwheel__V1__LaneStats *l, uint64_t base)
{
	ck_assert_ptr_nonnull(l);
	ck_assert_uint_eq(l->pending, base + 1);
	ck_assert_uint_eq(l->overflow, base + 2);
	ck_assert_uint_eq(l->inserted, base + 3);
	ck_assert_uint_eq(l->cancelled, base + 4);
	ck_assert_uint_eq(l->fired, base + 5);
	ck_assert_uint_eq(l->lost, base + 6);
}

static void build_stats_reply(struct sample *s)
{
	Bitwheel__V1__StatsReply *m = &s->stats_reply;

	set_id(s, 6);
	fill_lane(&s->lanes[0], 100);
	fill_lane(&s->lanes[1], 200);
	m->oneshot = &s->lanes[0];
	m->periodic = &s->lanes[1];
	m->has_clients = m->has_sessions = m->has_queued = 1;
	m->has_dropped = m->has_uptime_ns = m->has_memory_bytes = 1;
	m->clients = 3;
	m->sessions = 2;
	m->queued = 9;
	m->dropped = 4;
	m->uptime_ns = BIG;
	m->memory_bytes = 1 << 24;
	m->has_expired = m->has_in_flight = m->has_consumers = 1;
	m->has_acked = m->has_redelivered = 1;
	m->expired = 5;
	m->in_flight = 300;
	m->consumers = 7;
	m->acked = BIG;
	m->redelivered = 0;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_STATS_REPLY;
	s->env.stats_reply = m;
}

static void check_stats_reply(const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__StatsReply *m = e->stats_reply;

	check_lane(m->oneshot, 100);
	check_lane(m->periodic, 200);
	ck_assert_uint_eq(m->clients, 3);
	ck_assert_uint_eq(m->sessions, 2);
	ck_assert_uint_eq(m->queued, 9);
	ck_assert_uint_eq(m->dropped, 4);
	ck_assert_uint_eq(m->uptime_ns, BIG);
	ck_assert_uint_eq(m->memory_bytes, 1 << 24);
	ck_assert_uint_eq(m->expired, 5);
	ck_assert_uint_eq(m->in_flight, 300);
	ck_assert_uint_eq(m->consumers, 7);
	ck_assert_uint_eq(m->acked, BIG);
	ck_assert(m->has_redelivered);
	ck_assert_uint_eq(m->redelivered, 0);
}

static void build_fired_periodic(struct sample *s)
{
	Bitwheel__V1__Fired *m = &s->fired;

	m->has_key = 1;
	m->key = 99;
	m->has_payload = 1;
	m->payload.data = (uint8_t *)payload;
	m->payload.len = sizeof(payload);
	m->has_deadline_ns = 1;
	m->deadline_ns = 5000000000ull;
	m->has_fired_at_ns = 1;
	m->fired_at_ns = 5000400000ull;
	m->has_fire_count = 1;
	m->fire_count = 17;
	m->has_late = 1;
	m->late = 1;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_FIRED;
	s->env.fired = m;
}

static void check_fired_periodic(const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__Fired *m = e->fired;

	ck_assert(!e->has_request_id);
	ck_assert_uint_eq(m->key, 99);
	ck_assert_uint_eq(m->payload.len, sizeof(payload));
	ck_assert_mem_eq(m->payload.data, payload, sizeof(payload));
	ck_assert_uint_eq(m->deadline_ns, 5000000000ull);
	ck_assert_uint_eq(m->fired_at_ns, 5000400000ull);
	ck_assert(m->has_fire_count);
	ck_assert_uint_eq(m->fire_count, 17);
	ck_assert(m->has_late && m->late);
}

static void build_fired_oneshot(struct sample *s)
{
	Bitwheel__V1__Fired *m = &s->fired;

	m->has_key = 1;
	m->key = 0;
	m->has_deadline_ns = 1;
	m->deadline_ns = 1;
	m->has_fired_at_ns = 1;
	m->fired_at_ns = 2;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_FIRED;
	s->env.fired = m;
}

static void check_fired_oneshot(const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__Fired *m = e->fired;

	ck_assert(m->has_key);
	ck_assert_uint_eq(m->key, 0);
	ck_assert(!m->has_payload);
	ck_assert(!m->has_fire_count);
	ck_assert(!m->has_late);
	ck_assert_uint_eq(m->deadline_ns, 1);
	ck_assert_uint_eq(m->fired_at_ns, 2);
}

/* A consumer's fire: redelivered, numbered for its Ack. */
static void build_fired_delivery(struct sample *s)
{
	Bitwheel__V1__Fired *m = &s->fired;

	m->has_key = 1;
	m->key = 7;
	m->has_payload = 1;
	m->payload.data = (uint8_t *)"hi";
	m->payload.len = 2;
	m->has_deadline_ns = 1;
	m->deadline_ns = 5001500000ull;
	m->has_fired_at_ns = 1;
	m->fired_at_ns = 5001503000ull;
	m->has_redelivered = 1;
	m->redelivered = 1;
	m->has_delivery = 1;
	m->delivery = BIG;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_FIRED;
	s->env.fired = m;
}

static void check_fired_delivery(const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__Fired *m = e->fired;

	ck_assert(!e->has_request_id);
	ck_assert_uint_eq(m->key, 7);
	ck_assert_uint_eq(m->payload.len, 2);
	ck_assert_mem_eq(m->payload.data, "hi", 2);
	ck_assert(!m->has_fire_count && !m->has_late);
	ck_assert(m->has_redelivered && m->redelivered);
	ck_assert(m->has_delivery);
	ck_assert_uint_eq(m->delivery, BIG);
}

/* The cheap form: no request_id, so no reply. */
static void build_ack(struct sample *s)
{
	s->ack.has_delivery = 1;
	s->ack.delivery = 1;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_ACK;
	s->env.ack = &s->ack;
}

static void check_ack(const Bitwheel__V1__Envelope *e)
{
	ck_assert(!e->has_request_id);
	ck_assert(e->ack->has_delivery);
	ck_assert_uint_eq(e->ack->delivery, 1);
	ck_assert(!e->ack->has_cumulative);
}

static void build_ack_cumulative(struct sample *s)
{
	set_id(s, 8);
	s->ack.has_delivery = 1;
	s->ack.delivery = BIG;
	s->ack.has_cumulative = 1;
	s->ack.cumulative = 1;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_ACK;
	s->env.ack = &s->ack;
}

static void check_ack_cumulative(const Bitwheel__V1__Envelope *e)
{
	ck_assert_uint_eq(e->request_id, 8);
	ck_assert_uint_eq(e->ack->delivery, BIG);
	ck_assert(e->ack->has_cumulative && e->ack->cumulative);
}

/* acked = 0 is an answer (all done already), so present. */
static void build_ack_reply(struct sample *s)
{
	set_id(s, 8);
	s->ack_reply.has_acked = 1;
	s->ack_reply.acked = 0;
	s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY;
	s->env.ack_reply = &s->ack_reply;
}

static void check_ack_reply(const Bitwheel__V1__Envelope *e)
{
	ck_assert_uint_eq(e->request_id, 8);
	ck_assert(e->ack_reply->has_acked);
	ck_assert_uint_eq(e->ack_reply->acked, 0);
}

static const struct kind {
	const char *name;
	Bitwheel__V1__Envelope__BodyCase body;
	void (*build)(struct sample *s);
	void (*check)(const Bitwheel__V1__Envelope *e);
} kinds[] = {
#define K(name, body) \
	{ #name, BITWHEEL__V1__ENVELOPE__BODY_##body, build_##name, check_##name }
	K(hello, HELLO),
	K(hello_anonymous, HELLO),
	K(hello_consumer, HELLO),
	K(schedule_delay, SCHEDULE),
	K(schedule_periodic, SCHEDULE),
	K(schedule_empty_payload, SCHEDULE),
	K(cancel, CANCEL),
	K(stats, STATS),
	K(error, ERROR),
	K(error_unsolicited, ERROR),
	K(hello_reply, HELLO_REPLY),
	K(schedule_reply, SCHEDULE_REPLY),
	K(cancel_reply, CANCEL_REPLY),
	K(stats_reply, STATS_REPLY),
	K(fired_periodic, FIRED),
	K(fired_oneshot, FIRED),
	K(fired_delivery, FIRED),
	K(ack, ACK),
	K(ack_cumulative, ACK),
	K(ack_reply, ACK_REPLY),
#undef K
};
#define N_KINDS ((int)(sizeof(kinds) / sizeof(kinds[0])))

static void sample_init(struct sample *s)
{
	bitwheel__v1__envelope__init(&s->env);
	bitwheel__v1__hello__init(&s->hello);
	bitwheel__v1__schedule__init(&s->schedule);
	bitwheel__v1__cancel__init(&s->cancel);
	bitwheel__v1__stats__init(&s->stats);
	bitwheel__v1__error__init(&s->error);
	bitwheel__v1__hello_reply__init(&s->hello_reply);
	bitwheel__v1__limits__init(&s->limits);
	bitwheel__v1__schedule_reply__init(&s->schedule_reply);
	bitwheel__v1__cancel_reply__init(&s->cancel_reply);
	bitwheel__v1__stats_reply__init(&s->stats_reply);
	bitwheel__v1__lane_stats__init(&s->lanes[0]);
	bitwheel__v1__lane_stats__init(&s->lanes[1]);
	bitwheel__v1__fired__init(&s->fired);
	bitwheel__v1__ack__init(&s->ack);
	bitwheel__v1__ack_reply__init(&s->ack_reply);
}

/*
 * Pack into a fresh buffer of exactly the frame's size, with no size limit:
 * the limit tests need frames over it.
 */
static uint8_t *pack_new(const Bitwheel__V1__Envelope *env, size_t *len)
{
	size_t want = bwp_frame_packed_size(env);
	uint8_t *buf = malloc(want);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(bwp_frame_pack(env, SIZE_MAX, buf, want, len), BWP_OK);
	ck_assert_uint_eq(*len, want);
	return buf;
}

static uint8_t *pack_kind(int i, size_t *len)
{
	struct sample s;

	sample_init(&s);
	kinds[i].build(&s);
	return pack_new(&s.env, len);
}

/* A frame around hand-written body bytes. */
static size_t frame_of(const uint8_t *body, size_t n, uint8_t *out)
{
	out[0] = (uint8_t)(n >> 24);
	out[1] = (uint8_t)(n >> 16);
	out[2] = (uint8_t)(n >> 8);
	out[3] = (uint8_t)n;
	memcpy(out + BWP_HEADER_SIZE, body, n);
	return BWP_HEADER_SIZE + n;
}

/* An envelope whose body is exactly `body` bytes, padded by its payload. */
static void sized_sample(struct sample *s, size_t body)
{
	static uint8_t pad[BWP_DEFAULT_MAX_FRAME + 1];
	uint64_t keys[] = { 0, 1u << 7, 1u << 14, 1u << 21 };
	size_t k, n;

	/* Length varints grow a byte at 128 and 16384, so some sizes are
	 * out of reach of the payload alone; the key's width fills in. */
	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		/* The fields around the payload take at most 14 bytes. */
		for (n = body > 16 ? body - 16 : 0;
		     n <= body && n <= sizeof(pad); n++) {
			sample_init(s);
			s->schedule.has_key = 1;
			s->schedule.key = keys[k];
			s->schedule.has_payload = 1;
			s->schedule.payload.data = pad;
			s->schedule.payload.len = n;
			s->env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE;
			s->env.schedule = &s->schedule;
			if (bwp_frame_packed_size(&s->env) ==
			    BWP_HEADER_SIZE + body)
				return;
		}
	}
	ck_abort_msg("no envelope of body size %zu", body);
}

/* ---- round trip ------------------------------------------------------------ */

START_TEST(test_roundtrip)
{
	size_t len, frame_len, again_len;
	uint8_t *buf, *again;
	Bitwheel__V1__Envelope *got;

	buf = pack_kind(_i, &len);
	ck_assert_int_eq(bwp_frame_parse(buf, len, BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_OK);
	ck_assert_msg(frame_len == len, "%s: frame_len %zu of %zu",
		      kinds[_i].name, frame_len, len);
	ck_assert_int_eq(got->body_case, kinds[_i].body);
	kinds[_i].check(got);

	/* Every field, present or absent, survived if the bytes do. */
	again = pack_new(got, &again_len);
	ck_assert_uint_eq(again_len, len);
	ck_assert_mem_eq(again, buf, len);

	bwp_frame_free(got);
	free(again);
	free(buf);
}
END_TEST

/* Every sample back to back in one buffer, read in order. */
START_TEST(test_stream)
{
	uint8_t stream[8192];
	size_t used = 0, off = 0, len, frame_len;
	Bitwheel__V1__Envelope *got;
	int i;

	for (i = 0; i < N_KINDS; i++) {
		uint8_t *buf = pack_kind(i, &len);

		ck_assert_uint_le(used + len, sizeof(stream));
		memcpy(stream + used, buf, len);
		used += len;
		free(buf);
	}
	for (i = 0; i < N_KINDS; i++) {
		ck_assert_int_eq(bwp_frame_parse(stream + off, used - off,
						 BWP_DEFAULT_MAX_FRAME, &got,
						 &frame_len), BWP_OK);
		ck_assert_int_eq(got->body_case, kinds[i].body);
		kinds[i].check(got);
		bwp_frame_free(got);
		off += frame_len;
	}
	ck_assert_uint_eq(off, used);
	ck_assert_int_eq(bwp_frame_parse(stream + off, 0, BWP_DEFAULT_MAX_FRAME,
					 &got, &frame_len), BWP_EMORE);
}
END_TEST

/* body_present() relies on it: a scalar member would need other code. */
START_TEST(test_body_members_are_messages)
{
	const ProtobufCMessageDescriptor *d = &bitwheel__v1__envelope__descriptor;
	unsigned i, members = 0;

	for (i = 0; i < d->n_fields; i++) {
		if (!(d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
			continue;
		ck_assert_msg(d->fields[i].type == PROTOBUF_C_TYPE_MESSAGE,
			      "body member %s is not a message",
			      d->fields[i].name);
		members++;
	}
	ck_assert_uint_eq(members, 26);
}
END_TEST

/* A newer peer's extra fields inside a known message are skipped. */
START_TEST(test_unknown_field_ignored)
{
	/* schedule { key: 5, field 15: 1 }, then envelope field 99: 1 */
	static const uint8_t body[] = {
		0x08, 0x09,
		0x1a, 0x04, 0x08, 0x05, 0x78, 0x01,
		0x98, 0x06, 0x01,
	};
	uint8_t buf[64];
	size_t len = frame_of(body, sizeof(body), buf), frame_len;
	Bitwheel__V1__Envelope *got;

	ck_assert_int_eq(bwp_frame_parse(buf, len, BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_OK);
	ck_assert_uint_eq(frame_len, len);
	ck_assert_uint_eq(got->request_id, 9);
	ck_assert_int_eq(got->body_case, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE);
	ck_assert(got->schedule->has_key);
	ck_assert_uint_eq(got->schedule->key, 5);
	bwp_frame_free(got);
}
END_TEST

/* Protobuf's rule for a oneof seen twice: the last member wins. */
START_TEST(test_body_twice_last_wins)
{
	/* hello { protocol_version: 1 }, then stats {} */
	static const uint8_t body[] = {
		0x08, 0x01, 0x12, 0x02, 0x08, 0x01, 0x2a, 0x00,
	};
	uint8_t buf[64];
	size_t len = frame_of(body, sizeof(body), buf), frame_len;
	Bitwheel__V1__Envelope *got;

	ck_assert_int_eq(bwp_frame_parse(buf, len, BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_OK);
	ck_assert_int_eq(got->body_case, BITWHEEL__V1__ENVELOPE__BODY_STATS);
	bwp_frame_free(got);
}
END_TEST

/* Worst-case Schedule and Fired around a large payload stay in budget. */
START_TEST(test_payload_overhead)
{
	static uint8_t origin[BWP_SESSION_NAME_MAX];
	Bitwheel__V1__DeadLetter dead = BITWHEEL__V1__DEAD_LETTER__INIT;
	static uint8_t big[(1u << 21) + 1];    /* a 4-byte length varint */
	struct sample s;
	size_t body;

	sample_init(&s);
	build_schedule_periodic(&s);
	s.env.request_id = BIG;
	s.schedule.deadline_ns = BIG;
	s.schedule.period_ns = BIG;
	s.schedule.payload.data = big;
	s.schedule.payload.len = sizeof(big);
	body = bwp_frame_packed_size(&s.env) - BWP_HEADER_SIZE;
	ck_assert_uint_le(body, sizeof(big) + BWP_PAYLOAD_OVERHEAD);

	sample_init(&s);
	build_fired_periodic(&s);
	s.fired.key = BIG;
	s.fired.deadline_ns = BIG;
	s.fired.fired_at_ns = BIG;
	s.fired.fire_count = BIG;
	s.fired.has_delivery = 1;
	s.fired.delivery = UINT64_MAX;
	s.fired.has_late = s.fired.has_redelivered = 1;
	s.fired.late = s.fired.redelivered = 1;
	s.fired.payload.data = big;
	s.fired.payload.len = sizeof(big);
	s.fired.has_deliveries = 1;
	s.fired.deliveries = UINT64_MAX;
	/* A dead letter's history, from a session of the longest name. */
	dead.has_session = dead.has_deliveries = dead.has_first_handed_ns = 1;
	dead.has_last_handed_ns = dead.has_dead_lettered_ns = dead.has_reason = 1;
	dead.session.data = origin;
	dead.session.len = sizeof(origin);
	dead.deliveries = dead.first_handed_ns = dead.last_handed_ns =
		dead.dead_lettered_ns = UINT64_MAX;
	dead.reason = BITWHEEL__V1__TAKE_BACK__RESTARTED;
	s.fired.dead_letter = &dead;
	body = bwp_frame_packed_size(&s.env) - BWP_HEADER_SIZE;
	ck_assert_uint_le(body, sizeof(big) + BWP_PAYLOAD_OVERHEAD);
}
END_TEST

/*
 * bwp_frame_parse_request_bounded(): a Stats padded with 2,000 unknown
 * fields (a 6,000-byte body) is refused unread past a bound of 1,000, with
 * its size, and read under one of 10,000; a plain Schedule with a 2,000-
 * byte payload is read fast whatever the bound.
 */
START_TEST(test_parse_bounded)
{
	enum { NFIELDS = 2000 };
	uint8_t *buf = malloc(16 + NFIELDS * 3 + 2100);
	Bitwheel__V1__Envelope *env;
	struct bwp_request r;
	size_t n = 0, fl, body;

	ck_assert_ptr_nonnull(buf);
	/* Stats { field 100 = 1, 2,000 times }, request_id 1. */
	body = 2 + 1 + 2 + NFIELDS * 3;
	buf[n++] = (uint8_t)(body >> 24);
	buf[n++] = (uint8_t)(body >> 16);
	buf[n++] = (uint8_t)(body >> 8);
	buf[n++] = (uint8_t)body;
	buf[n++] = 0x08;
	buf[n++] = 0x01;
	buf[n++] = 0x2a;
	buf[n++] = (uint8_t)(0x80 | ((NFIELDS * 3) & 0x7f));
	buf[n++] = (uint8_t)((NFIELDS * 3) >> 7);
	for (int i = 0; i < NFIELDS; i++) {
		buf[n++] = 0xa0;
		buf[n++] = 0x06;
		buf[n++] = 0x01;
	}
	ck_assert_uint_eq(n, body + BWP_HEADER_SIZE);
	ck_assert_int_eq(bwp_frame_parse_request_bounded(buf, n, BWP_DEFAULT_MAX_FRAME, 1000,
							 &r, &env, &fl), BWP_ESLOW);
	ck_assert_ptr_null(env);
	ck_assert_uint_eq(fl, n);
	ck_assert_int_eq(bwp_frame_parse_request_bounded(buf, n, BWP_DEFAULT_MAX_FRAME, 10000,
							 &r, &env, &fl), BWP_OK);
	ck_assert_ptr_nonnull(env);
	ck_assert_int_eq(env->body_case, BITWHEEL__V1__ENVELOPE__BODY_STATS);
	bwp_frame_free(env);

	/* Schedule { key 7, delay_ns 1, payload 2,000 bytes }, request_id 2. */
	n = 0;
	body = 2 + 3 + 2 + 2 + 3 + 2000;
	buf[n++] = 0;
	buf[n++] = 0;
	buf[n++] = (uint8_t)(body >> 8);
	buf[n++] = (uint8_t)body;
	buf[n++] = 0x08;
	buf[n++] = 0x02;
	buf[n++] = 0x1a;
	buf[n++] = (uint8_t)(0x80 | ((2 + 2 + 3 + 2000) & 0x7f));
	buf[n++] = (uint8_t)((2 + 2 + 3 + 2000) >> 7);
	buf[n++] = 0x08;
	buf[n++] = 0x07;
	buf[n++] = 0x10;
	buf[n++] = 0x01;
	buf[n++] = 0x2a;
	buf[n++] = (uint8_t)(0x80 | (2000 & 0x7f));
	buf[n++] = (uint8_t)(2000 >> 7);
	memset(buf + n, 'p', 2000);
	n += 2000;
	ck_assert_uint_eq(n, body + BWP_HEADER_SIZE);
	ck_assert_int_eq(bwp_frame_parse_request_bounded(buf, n, BWP_DEFAULT_MAX_FRAME, 100,
							 &r, &env, &fl), BWP_OK);
	ck_assert_ptr_null(env);
	ck_assert_int_eq(r.body_case, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE);
	ck_assert_uint_eq(r.key, 7);
	ck_assert_uint_eq(r.payload_len, 2000);
	ck_assert_str_eq(bwp_strerror(BWP_ESLOW),
			 "frame too long for what it holds (only a plain Schedule may carry a payload's length)");
	free(buf);
}
END_TEST

/*
 * PROTOCOL.md's examples, byte for byte: the Hello of section 3 and the
 * session of section 11.  Each one also reads back fast where it is a hot
 * frame.
 */
START_TEST(test_protocol_examples)
{
	static const uint8_t hello[] = {
		0x00, 0x00, 0x00, 0x10, 0x08, 0x01, 0x12, 0x0c, 0x08, 0x02,
		0x12, 0x06, 'b', 'a', 'c', 'k', 'u', 'p', 0x18, 0x02,
	};
	static const uint8_t schedule[] = {
		0x00, 0x00, 0x00, 0x10, 0x08, 0x02, 0x1a, 0x0c, 0x08, 0x07,
		0x10, 0x80, 0xde, 0xa0, 0xcb, 0x05, 0x2a, 0x02, 0x68, 0x69,
	};
	static const uint8_t schedule_reply[] = {
		0x00, 0x00, 0x00, 0x0a, 0x08, 0x02, 0x42, 0x06, 0x08, 0xe0,
		0xaa, 0xf3, 0xd0, 0x12,
	};
	static const uint8_t fired[] = {
		0x00, 0x00, 0x00, 0x16, 0x5a, 0x14, 0x08, 0x07, 0x12, 0x02,
		0x68, 0x69, 0x18, 0xe0, 0xaa, 0xf3, 0xd0, 0x12, 0x20, 0x98,
		0xc2, 0xf3, 0xd0, 0x12, 0x40, 0x01,
	};
	static const uint8_t ack[] = {
		0x00, 0x00, 0x00, 0x04, 0x62, 0x02, 0x08, 0x01,
	};
	struct sample s;
	struct bwp_request r;
	struct bwp_response q;
	Bitwheel__V1__Envelope *env;
	uint8_t *buf;
	size_t len, fl;

	sample_init(&s);
	set_id(&s, 1);
	s.hello.has_protocol_version = 1;
	s.hello.protocol_version = BWP_PROTOCOL_VERSION;
	s.hello.has_session = 1;
	s.hello.session.data = (uint8_t *)"backup";
	s.hello.session.len = 6;
	s.hello.has_role = 1;
	s.hello.role = BITWHEEL__V1__ROLE__CONSUMER;
	s.env.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	s.env.hello = &s.hello;
	buf = pack_new(&s.env, &len);
	ck_assert_uint_eq(len, sizeof(hello));
	ck_assert_mem_eq(buf, hello, len);
	free(buf);

	sample_init(&s);
	set_id(&s, 2);
	s.schedule.has_key = 1;
	s.schedule.key = 7;
	s.schedule.when_case = BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS;
	s.schedule.delay_ns = 1500000000;
	s.schedule.has_payload = 1;
	s.schedule.payload.data = (uint8_t *)"hi";
	s.schedule.payload.len = 2;
	s.env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE;
	s.env.schedule = &s.schedule;
	buf = pack_new(&s.env, &len);
	ck_assert_uint_eq(len, sizeof(schedule));
	ck_assert_mem_eq(buf, schedule, len);
	free(buf);

	sample_init(&s);
	set_id(&s, 2);
	s.schedule_reply.has_deadline_ns = 1;
	s.schedule_reply.deadline_ns = 5001500000ull;
	s.env.body_case = BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY;
	s.env.schedule_reply = &s.schedule_reply;
	buf = pack_new(&s.env, &len);
	ck_assert_uint_eq(len, sizeof(schedule_reply));
	ck_assert_mem_eq(buf, schedule_reply, len);
	free(buf);

	sample_init(&s);
	s.fired.has_key = 1;
	s.fired.key = 7;
	s.fired.has_payload = 1;
	s.fired.payload.data = (uint8_t *)"hi";
	s.fired.payload.len = 2;
	s.fired.has_deadline_ns = 1;
	s.fired.deadline_ns = 5001500000ull;
	s.fired.has_fired_at_ns = 1;
	s.fired.fired_at_ns = 5001503000ull;
	s.fired.has_delivery = 1;
	s.fired.delivery = 1;
	s.env.body_case = BITWHEEL__V1__ENVELOPE__BODY_FIRED;
	s.env.fired = &s.fired;
	buf = pack_new(&s.env, &len);
	ck_assert_uint_eq(len, sizeof(fired));
	ck_assert_mem_eq(buf, fired, len);
	free(buf);
	ck_assert_int_eq(bwp_frame_parse_response(fired, sizeof(fired),
						  BWP_DEFAULT_MAX_FRAME, &q,
						  &env, &fl), BWP_OK);
	ck_assert_ptr_null(env);
	ck_assert_uint_eq(fl, sizeof(fired));
	ck_assert(q.has_delivery);
	ck_assert_uint_eq(q.delivery, 1);
	ck_assert_uint_eq(q.fired_at_ns, 5001503000ull);

	sample_init(&s);
	s.ack.has_delivery = 1;
	s.ack.delivery = 1;
	s.env.body_case = BITWHEEL__V1__ENVELOPE__BODY_ACK;
	s.env.ack = &s.ack;
	buf = pack_new(&s.env, &len);
	ck_assert_uint_eq(len, sizeof(ack));
	ck_assert_mem_eq(buf, ack, len);
	free(buf);
	ck_assert_int_eq(bwp_frame_parse_request(ack, sizeof(ack),
						 BWP_DEFAULT_MAX_FRAME, &r,
						 &env, &fl), BWP_OK);
	ck_assert_ptr_null(env);
	ck_assert_uint_eq(fl, sizeof(ack));
	ck_assert_int_eq(r.body_case, BITWHEEL__V1__ENVELOPE__BODY_ACK);
	ck_assert(!r.has_request_id);
	ck_assert(r.has_delivery && !r.has_cumulative);
	ck_assert_uint_eq(r.delivery, 1);
}
END_TEST

/* ---- partial input ----------------------------------------------------------- */

/* Every proper prefix asks for more, and says how much. */
START_TEST(test_every_split_point)
{
	size_t len, cut, frame_len;
	uint8_t *buf = pack_kind(_i, &len);
	Bitwheel__V1__Envelope sentinel, *got = &sentinel;

	for (cut = 0; cut < len; cut++) {
		ck_assert_int_eq(bwp_frame_parse(buf, cut, BWP_DEFAULT_MAX_FRAME,
						 &got, &frame_len), BWP_EMORE);
		ck_assert_ptr_null(got);
		ck_assert_uint_eq(frame_len,
				  cut < BWP_HEADER_SIZE ? BWP_HEADER_SIZE : len);
	}
	ck_assert_int_eq(bwp_frame_parse(buf, len, BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_OK);
	kinds[_i].check(got);
	bwp_frame_free(got);
	free(buf);
}
END_TEST

/*
 * A reader that gets bytes in uneven dribbles, as from a socket, parses as
 * soon as the frame_len it was told has arrived, and never earlier.
 */
START_TEST(test_dribble)
{
	static const size_t chunks[] = { 1, 2, 3, 5, 8, 13, 21, 34 };
	uint8_t stream[8192], pending[8192];
	size_t used = 0, have = 0, sent = 0, want = BWP_HEADER_SIZE;
	size_t len, frame_len, c = 0;
	Bitwheel__V1__Envelope *got;
	int i, next = 0;

	for (i = 0; i < N_KINDS; i++) {
		uint8_t *buf = pack_kind(i, &len);

		memcpy(stream + used, buf, len);
		used += len;
		free(buf);
	}
	while (next < N_KINDS) {
		size_t n = chunks[c++ % (sizeof(chunks) / sizeof(chunks[0]))];
		int rc;

		if (n > used - sent)
			n = used - sent;
		memcpy(pending + have, stream + sent, n);
		have += n;
		sent += n;
		while ((rc = bwp_frame_parse(pending, have,
					     BWP_DEFAULT_MAX_FRAME, &got,
					     &frame_len)) == BWP_OK) {
			ck_assert_uint_ge(have, want);
			ck_assert_int_eq(got->body_case, kinds[next].body);
			kinds[next++].check(got);
			bwp_frame_free(got);
			memmove(pending, pending + frame_len, have - frame_len);
			have -= frame_len;
			want = BWP_HEADER_SIZE;
		}
		ck_assert_int_eq(rc, BWP_EMORE);
		ck_assert_uint_gt(frame_len, have);
		ck_assert_uint_ge(frame_len, want);
		want = frame_len;
	}
	ck_assert_uint_eq(sent, used);
	ck_assert_uint_eq(have, 0);
}
END_TEST

/* ---- header ---------------------------------------------------------------- */

START_TEST(test_zero_length)
{
	/* Followed by a valid-looking stats body, which must not matter. */
	static const uint8_t buf[] = { 0, 0, 0, 0, 0x2a, 0x00 };
	Bitwheel__V1__Envelope *got;
	size_t frame_len;

	ck_assert_int_eq(bwp_frame_parse(buf, BWP_HEADER_SIZE,
					 BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_EZERO);
	ck_assert_ptr_null(got);
	ck_assert_uint_eq(frame_len, BWP_HEADER_SIZE);
	ck_assert_int_eq(bwp_frame_parse(buf, sizeof(buf),
					 BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_EZERO);
	ck_assert_uint_eq(frame_len, BWP_HEADER_SIZE);
}
END_TEST

/* Refused from the 4 header bytes alone, before any body arrives. */
START_TEST(test_over_max_header_only)
{
	static const uint8_t just_over[] = { 0x00, 0x01, 0x00, 0x01 };
	static const uint8_t huge[] = { 0xff, 0xff, 0xff, 0xff };
	Bitwheel__V1__Envelope *got;
	size_t frame_len;

	ck_assert_int_eq(bwp_frame_parse(just_over, sizeof(just_over),
					 BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_ETOOBIG);
	ck_assert_ptr_null(got);
	ck_assert_uint_eq(frame_len,
			  BWP_HEADER_SIZE + BWP_DEFAULT_MAX_FRAME + 1);
	ck_assert_int_eq(bwp_frame_parse(huge, sizeof(huge),
					 BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_ETOOBIG);
	ck_assert_uint_eq(frame_len, BWP_HEADER_SIZE + (size_t)UINT32_MAX);
	/* A limit of 0 refuses every frame. */
	ck_assert_int_eq(bwp_frame_parse(just_over, sizeof(just_over), 0,
					 &got, &frame_len), BWP_ETOOBIG);
}
END_TEST

/* A sound header whose body has not all come yet: wait for it. */
START_TEST(test_length_beyond_data)
{
	/* Claims 10 bytes, carries a complete 2-byte stats body. */
	static const uint8_t buf[] = { 0, 0, 0, 10, 0x2a, 0x00 };
	static const uint8_t huge[] = { 0xff, 0xff, 0xff, 0xff, 0x2a, 0x00 };
	Bitwheel__V1__Envelope *got;
	size_t frame_len;

	ck_assert_int_eq(bwp_frame_parse(buf, sizeof(buf),
					 BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_EMORE);
	ck_assert_ptr_null(got);
	ck_assert_uint_eq(frame_len, BWP_HEADER_SIZE + 10);
	/* With no limit to speak of, even 4 GiB is only "more". */
	ck_assert_int_eq(bwp_frame_parse(huge, sizeof(huge), SIZE_MAX, &got,
					 &frame_len), BWP_EMORE);
	ck_assert_uint_eq(frame_len, BWP_HEADER_SIZE + (size_t)UINT32_MAX);
}
END_TEST

/* Exactly the maximum passes both ways; one byte more passes neither. */
START_TEST(test_max_boundary)
{
	static const size_t maxes[] = { 300, BWP_DEFAULT_MAX_FRAME };
	size_t i;

	for (i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++) {
		size_t max = maxes[i], len, frame_len;
		struct sample s;
		uint8_t *buf;
		Bitwheel__V1__Envelope *got;

		sized_sample(&s, max);
		buf = pack_new(&s.env, &len);
		ck_assert_uint_eq(len, BWP_HEADER_SIZE + max);
		ck_assert_int_eq(bwp_frame_pack(&s.env, max, buf, len, &len),
				 BWP_OK);
		ck_assert_int_eq(bwp_frame_parse(buf, len, max, &got,
						 &frame_len), BWP_OK);
		ck_assert_uint_eq(got->schedule->payload.len,
				  s.schedule.payload.len);
		bwp_frame_free(got);
		free(buf);

		sized_sample(&s, max + 1);
		buf = pack_new(&s.env, &len);
		ck_assert_int_eq(bwp_frame_pack(&s.env, max, buf, len, &len),
				 BWP_ETOOBIG);
		ck_assert_uint_eq(len, BWP_HEADER_SIZE + max + 1);
		ck_assert_int_eq(bwp_frame_parse(buf, len, max, &got,
						 &frame_len), BWP_ETOOBIG);
		ck_assert_ptr_null(got);
		/* The header alone is enough to know. */
		ck_assert_int_eq(bwp_frame_parse(buf, BWP_HEADER_SIZE, max,
						 &got, &frame_len),
				 BWP_ETOOBIG);
		free(buf);
	}
}
END_TEST

/* ---- body ------------------------------------------------------------------- */

static const struct bad_body {
	const char *why;
	size_t len;
	uint8_t bytes[12];
} bad_bodies[] = {
	{ "tag with no value", 1, { 0x08 } },
	{ "unterminated varint", 2, { 0x08, 0x80 } },
	{ "varint over 10 bytes", 12,
	  { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	    0x01 } },
	{ "length past the end", 3, { 0x12, 0x05, 0x08 } },
	{ "message member sent as varint", 2, { 0x10, 0x01 } },
	{ "field number 0", 2, { 0x00, 0x01 } },
	{ "wire type 7", 2, { 0x0f, 0x01 } },
	{ "garbage inside the body", 4, { 0x12, 0x02, 0xff, 0xff } },
	{ "truncated field inside the body", 4, { 0x1a, 0x02, 0x10, 0x80 } },
	{ "group wire type", 2, { 0x0b, 0x0c } },
};
#define N_BAD ((int)(sizeof(bad_bodies) / sizeof(bad_bodies[0])))

START_TEST(test_invalid_protobuf)
{
	const struct bad_body *b = &bad_bodies[_i];
	uint8_t buf[32];
	size_t len = frame_of(b->bytes, b->len, buf), frame_len;
	Bitwheel__V1__Envelope *got;

	ck_assert_msg(bwp_frame_parse(buf, len, BWP_DEFAULT_MAX_FRAME, &got,
				      &frame_len) == BWP_EDECODE,
		      "%s: not refused", b->why);
	ck_assert_ptr_null(got);
	/* The whole frame is accounted for, so a reader could skip it. */
	ck_assert_uint_eq(frame_len, len);
}
END_TEST

static const struct bad_body bodiless[] = {
	{ "request_id only", 2, { 0x08, 0x01 } },
	{ "unknown field 99 only", 5, { 0x08, 0x01, 0x98, 0x06, 0x01 } },
	{ "a newer protocol's member 30", 7,
	  { 0x08, 0x07, 0xf2, 0x01, 0x02, 0x08, 0x01 } },
};
#define N_BODILESS ((int)(sizeof(bodiless) / sizeof(bodiless[0])))

START_TEST(test_no_body)
{
	const struct bad_body *b = &bodiless[_i];
	uint8_t buf[32];
	size_t len = frame_of(b->bytes, b->len, buf), frame_len;
	Bitwheel__V1__Envelope *got;

	ck_assert_msg(bwp_frame_parse(buf, len, BWP_DEFAULT_MAX_FRAME, &got,
				      &frame_len) == BWP_ENOBODY,
		      "%s: not refused", b->why);
	ck_assert_ptr_null(got);
	ck_assert_uint_eq(frame_len, len);
}
END_TEST

/* ---- pack ------------------------------------------------------------------- */

START_TEST(test_pack_buffer_too_small)
{
	struct sample s;
	uint8_t buf[512];
	size_t want, len, cap;

	sample_init(&s);
	build_schedule_periodic(&s);
	want = bwp_frame_packed_size(&s.env);
	ck_assert_uint_lt(want + 1, sizeof(buf));

	for (cap = 0; cap < want; cap++) {
		memset(buf, 0xa5, sizeof(buf));
		len = 0;
		ck_assert_int_eq(bwp_frame_pack(&s.env, BWP_DEFAULT_MAX_FRAME,
						buf, cap, &len), BWP_ENOSPC);
		ck_assert_uint_eq(len, want);
		/* Nothing written, not even the header. */
		ck_assert_uint_eq(buf[0], 0xa5);
		ck_assert_uint_eq(buf[want], 0xa5);
	}
	ck_assert_int_eq(bwp_frame_pack(&s.env, BWP_DEFAULT_MAX_FRAME, NULL, 0,
					&len), BWP_ENOSPC);
	ck_assert_uint_eq(len, want);

	memset(buf, 0xa5, sizeof(buf));
	ck_assert_int_eq(bwp_frame_pack(&s.env, BWP_DEFAULT_MAX_FRAME, buf,
					want, &len), BWP_OK);
	ck_assert_uint_eq(len, want);
	ck_assert_uint_eq(buf[want], 0xa5);
	ck_assert_uint_eq(buf[3], want - BWP_HEADER_SIZE);
}
END_TEST

START_TEST(test_pack_no_body)
{
	struct sample s;
	uint8_t buf[64];
	size_t len;

	sample_init(&s);
	set_id(&s, 1);
	ck_assert_int_eq(bwp_frame_pack(&s.env, BWP_DEFAULT_MAX_FRAME, buf,
					sizeof(buf), &len), BWP_ENOBODY);
	/* A case whose pointer was never set. */
	s.env.body_case = BITWHEEL__V1__ENVELOPE__BODY_CANCEL;
	s.env.cancel = NULL;
	ck_assert_int_eq(bwp_frame_pack(&s.env, BWP_DEFAULT_MAX_FRAME, buf,
					sizeof(buf), &len), BWP_ENOBODY);
	/* Cases that name no member: request_id's field, and none at all. */
	s.env.body_case = (Bitwheel__V1__Envelope__BodyCase)1;
	s.env.cancel = &s.cancel;
	ck_assert_int_eq(bwp_frame_pack(&s.env, BWP_DEFAULT_MAX_FRAME, buf,
					sizeof(buf), &len), BWP_ENOBODY);
	s.env.body_case = (Bitwheel__V1__Envelope__BodyCase)99;
	ck_assert_int_eq(bwp_frame_pack(&s.env, BWP_DEFAULT_MAX_FRAME, buf,
					sizeof(buf), &len), BWP_ENOBODY);
}
END_TEST

START_TEST(test_bad_arguments)
{
	struct sample s;
	struct bwp_response resp;
	uint8_t buf[64];
	size_t len;
	Bitwheel__V1__Envelope *got;

	sample_init(&s);
	build_hello(&s);
	ck_assert_int_eq(bwp_frame_pack(NULL, BWP_DEFAULT_MAX_FRAME, buf,
					sizeof(buf), &len), BWP_EINVAL);
	ck_assert_int_eq(bwp_frame_pack(&s.env, BWP_DEFAULT_MAX_FRAME, buf,
					sizeof(buf), NULL), BWP_EINVAL);
	ck_assert_int_eq(bwp_frame_pack(&s.env, BWP_DEFAULT_MAX_FRAME, NULL,
					sizeof(buf), &len), BWP_EINVAL);
	ck_assert_int_eq(bwp_frame_parse(NULL, 4, BWP_DEFAULT_MAX_FRAME, &got,
					 &len), BWP_EINVAL);
	ck_assert_int_eq(bwp_frame_parse(buf, 4, BWP_DEFAULT_MAX_FRAME, NULL,
					 &len), BWP_EINVAL);
	ck_assert_int_eq(bwp_frame_parse(buf, 4, BWP_DEFAULT_MAX_FRAME, &got,
					 NULL), BWP_EINVAL);
	/* The fast parsers need somewhere to read into. */
	ck_assert_int_eq(bwp_frame_parse_request(buf, 4, BWP_DEFAULT_MAX_FRAME,
						 NULL, &got, &len), BWP_EINVAL);
	ck_assert_int_eq(bwp_frame_parse_response(buf, 4, BWP_DEFAULT_MAX_FRAME,
						  NULL, &got, &len), BWP_EINVAL);
	ck_assert_int_eq(bwp_frame_parse_response(buf, 4, BWP_DEFAULT_MAX_FRAME,
						  &resp, NULL, &len), BWP_EINVAL);
	/* No bytes at all is simply an early read. */
	ck_assert_int_eq(bwp_frame_parse(NULL, 0, BWP_DEFAULT_MAX_FRAME, &got,
					 &len), BWP_EMORE);
	ck_assert_int_eq(bwp_frame_parse_response(NULL, 0, BWP_DEFAULT_MAX_FRAME,
						  &resp, &got, &len), BWP_EMORE);
	bwp_frame_free(NULL);
}
END_TEST

/* ---- helpers ---------------------------------------------------------------- */

START_TEST(test_strerror)
{
	int codes[] = { BWP_OK, BWP_EMORE, BWP_EZERO, BWP_ETOOBIG, BWP_EDECODE,
			BWP_ENOBODY, BWP_ENOSPC, BWP_EINVAL, BWP_ESLOW,
			BWP_ERANGE };
	const char *unknown = bwp_strerror(-1000);
	size_t i, j, n = sizeof(codes) / sizeof(codes[0]);

	for (i = 0; i < n; i++) {
		ck_assert_ptr_nonnull(bwp_strerror(codes[i]));
		ck_assert_str_ne(bwp_strerror(codes[i]), unknown);
		for (j = 0; j < i; j++)
			ck_assert_str_ne(bwp_strerror(codes[i]),
					 bwp_strerror(codes[j]));
	}
	ck_assert_str_eq(bwp_strerror(1), unknown);
}
END_TEST

START_TEST(test_error_reply)
{
	struct sample req;
	Bitwheel__V1__Envelope env, *got;
	Bitwheel__V1__Error err;
	uint8_t buf[128];
	size_t len, frame_len;

	sample_init(&req);
	build_cancel(&req);
	bwp_error_init(&env, &err, &req.env,
		       BITWHEEL__V1__ERROR_CODE__TOO_MANY_TIMERS, "limit 10");
	ck_assert_int_eq(bwp_frame_pack(&env, BWP_DEFAULT_MAX_FRAME, buf,
					sizeof(buf), &len), BWP_OK);
	ck_assert_int_eq(bwp_frame_parse(buf, len, BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_OK);
	ck_assert(got->has_request_id);
	ck_assert_uint_eq(got->request_id, 5);
	ck_assert_int_eq(got->body_case, BITWHEEL__V1__ENVELOPE__BODY_ERROR);
	ck_assert_int_eq(got->error->code,
			 BITWHEEL__V1__ERROR_CODE__TOO_MANY_TIMERS);
	ck_assert_str_eq(got->error->message, "limit 10");
	bwp_frame_free(got);

	/* No request to answer: no request_id; no message: none sent. */
	bwp_error_init(&env, &err, NULL,
		       BITWHEEL__V1__ERROR_CODE__TOO_MANY_CLIENTS, NULL);
	ck_assert_int_eq(bwp_frame_pack(&env, BWP_DEFAULT_MAX_FRAME, buf,
					sizeof(buf), &len), BWP_OK);
	ck_assert_int_eq(bwp_frame_parse(buf, len, BWP_DEFAULT_MAX_FRAME, &got,
					 &frame_len), BWP_OK);
	ck_assert(!got->has_request_id);
	ck_assert_int_eq(got->error->code,
			 BITWHEEL__V1__ERROR_CODE__TOO_MANY_CLIENTS);
	ck_assert_ptr_null(got->error->message);
	bwp_frame_free(got);
}
END_TEST

START_TEST(test_reply_init)
{
	struct sample req;
	Bitwheel__V1__Envelope env;

	sample_init(&req);
	build_hello_anonymous(&req);
	bwp_reply_init(&env, &req.env);
	ck_assert(env.has_request_id);
	ck_assert_uint_eq(env.request_id, BIG);
	ck_assert_int_eq(env.body_case, BITWHEEL__V1__ENVELOPE__BODY__NOT_SET);

	req.env.has_request_id = 0;
	bwp_reply_init(&env, &req.env);
	ck_assert(!env.has_request_id);
}
END_TEST

START_TEST(test_session_names)
{
	static const char *good[] = {
		"a", "Z", "0", "backup", "job_1.host:9@x-y",
		"0123456789012345678901234567890123456789012345678901234567890123",
	};
	static const char *bad[] = {
		"", "has space", "slash/", "tab\t", "é", "semi;colon", "*",
		"01234567890123456789012345678901234567890123456789012345678901234",
	};
	size_t i;

	ck_assert_uint_eq(strlen(good[5]), BWP_SESSION_NAME_MAX);
	ck_assert_uint_eq(strlen(bad[7]), BWP_SESSION_NAME_MAX + 1);
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(bwp_session_name_valid(good[i], strlen(good[i])),
			      "\"%s\"", good[i]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!bwp_session_name_valid(bad[i], strlen(bad[i])),
			      "\"%s\"", bad[i]);
	ck_assert(!bwp_session_name_valid(NULL, 0));
	/* The rule holds over the whole length: a NUL anywhere breaks it,
	 * so "victim\0junk" is not "victim". */
	ck_assert(!bwp_session_name_valid("victim\0junk", 11));
	ck_assert(!bwp_session_name_valid("victim\0", 7));
	ck_assert(!bwp_session_name_valid("\0victim", 7));
	ck_assert(bwp_session_name_valid("victim\0", 6));
}
END_TEST

/* ---- the fast path against protobuf-c ------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible, so a failure names its iteration. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* n random rounds, a BW_TEST_SLOW-th of them in a slow build: under the
 * sanitizers (BW_TEST_SLOW=4, build-aux/test.sh) the fast-path tests took
 * three minutes for what the plain build checks in 14 s. */
static int rounds(int n)
{
	const char *slow = getenv("BW_TEST_SLOW");
	int f = slow ? atoi(slow) : 1;

	return f > 1 ? n / f : n;
}

/* Values at every varint width's edges, and anything. */
static uint64_t rnd_u64(void)
{
	static const uint64_t edge[] = {
		0, 1, 127, 128, 16383, 16384, UINT32_MAX, 1ull << 35,
		(1ull << 56) - 1, 1ull << 56, 1ull << 63, UINT64_MAX,
	};

	switch (rnd() % 3) {
	case 0:
		return edge[rnd() % (sizeof(edge) / sizeof(edge[0]))];
	case 1:
		return rnd() >> (rnd() % 64);
	default:
		return rnd();
	}
}

static uint8_t big_payload[BWP_DEFAULT_MAX_FRAME];

static void rnd_payload(protobuf_c_boolean *has, ProtobufCBinaryData *b)
{
	static const size_t lens[] = { 0, 1, 127, 128, 300,
				       BWP_DEFAULT_MAX_PAYLOAD,
				       BWP_DEFAULT_MAX_FRAME - 64 };

	*has = rnd() % 4 != 0;
	b->len = rnd() % 2 ? lens[rnd() % (sizeof(lens) / sizeof(lens[0]))]
			   : rnd() % 64;
	b->data = b->len ? big_payload : NULL;
	if (!*has && rnd() % 2) {
		b->len = 0;
		b->data = NULL;
	}
}

/* has_* flags and bools as protobuf-c's ints: any nonzero is true. */
static protobuf_c_boolean rnd_flag(void)
{
	return rnd() % 8 == 0 ? 2 : (protobuf_c_boolean)(rnd() % 2);
}

/* A session name: mostly valid bytes, sometimes a NUL or a space. */
static void rnd_session(protobuf_c_boolean *has, ProtobufCBinaryData *b)
{
	static const char alphabet[] = "az09_.:@- \0\xff";
	static uint8_t name[BWP_SESSION_NAME_MAX + 2];

	*has = rnd_flag();
	b->len = rnd() % sizeof(name);
	for (size_t i = 0; i < b->len; i++)
		name[i] = (uint8_t)alphabet[rnd() % (sizeof(alphabet) - 1)];
	b->data = b->len ? name : NULL;
}

/*
 * A random envelope of one of the bodies frame.c writes itself, or a
 * Hello, which it leaves to protobuf-c, with every field of version 2.
 */
static void rnd_fast_envelope(struct sample *s)
{
	static const Bitwheel__V1__Envelope__BodyCase bodies[] = {
		BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE,
		BITWHEEL__V1__ENVELOPE__BODY_CANCEL,
		BITWHEEL__V1__ENVELOPE__BODY_ACK,
		BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY,
		BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY,
		BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY,
		BITWHEEL__V1__ENVELOPE__BODY_FIRED,
		BITWHEEL__V1__ENVELOPE__BODY_HELLO,
	};
	static const Bitwheel__V1__Schedule__WhenCase whens[] = {
		BITWHEEL__V1__SCHEDULE__WHEN__NOT_SET,
		BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS,
		BITWHEEL__V1__SCHEDULE__WHEN_DEADLINE_NS,
		BITWHEEL__V1__SCHEDULE__WHEN_REALTIME_NS,
		BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR,
	};
	static char *const calendars[] = { "", "daily", "Mon..Fri 09:00 Europe/Berlin" };

	sample_init(s);
	s->env.has_request_id = rnd_flag();
	s->env.request_id = rnd_u64();
	s->env.body_case = bodies[rnd() % (sizeof(bodies) / sizeof(bodies[0]))];
	switch (s->env.body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE:
		s->schedule.has_key = rnd_flag();
		s->schedule.key = rnd_u64();
		s->schedule.when_case = whens[rnd() % (sizeof(whens) / sizeof(whens[0]))];
		s->schedule.delay_ns = rnd_u64();
		s->schedule.has_period_ns = rnd_flag();
		s->schedule.period_ns = rnd_u64();
		rnd_payload(&s->schedule.has_payload, &s->schedule.payload);
		s->schedule.has_replace = rnd_flag();
		s->schedule.replace = rnd_flag();
		s->schedule.has_leeway_ns = rnd_flag();
		s->schedule.leeway_ns = rnd_u64();
		/* A calendar timer's fields: protobuf-c writes them, the fast
		 * path must hand them over (calendar shares delay_ns' union). */
		if (s->schedule.when_case == BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR)
			s->schedule.calendar = calendars[rnd() % 3];
		s->schedule.has_jitter_ns = rnd() % 4 == 0;
		s->schedule.jitter_ns = rnd_u64();
		s->schedule.has_jitter_fixed = rnd() % 4 == 0;
		s->schedule.jitter_fixed = rnd_flag();
		s->schedule.has_misfire_grace_ns = rnd() % 4 == 0;
		s->schedule.misfire_grace_ns = rnd_u64();
		/* Both clocks, and now and then one this daemon does not
		 * know (protobuf-c's to read), negative ones included. */
		s->schedule.has_clock = rnd_flag();
		s->schedule.clock = (Bitwheel__V1__Clock)(rnd() % 8 ? (int)(rnd() % 2) :
			rnd_flag() ? 2 : -1);
		s->env.schedule = &s->schedule;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL:
		s->cancel.has_key = rnd_flag();
		s->cancel.key = rnd_u64();
		s->env.cancel = &s->cancel;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_ACK:
		s->ack.has_delivery = rnd_flag();
		s->ack.delivery = rnd_u64();
		s->ack.has_cumulative = rnd_flag();
		s->ack.cumulative = rnd_flag();
		s->env.ack = &s->ack;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
		s->ack_reply.has_acked = rnd_flag();
		s->ack_reply.acked = rnd_u64();
		s->env.ack_reply = &s->ack_reply;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_HELLO:
		s->hello.has_protocol_version = rnd_flag();
		s->hello.protocol_version = (uint32_t)rnd_u64();
		rnd_session(&s->hello.has_session, &s->hello.session);
		s->hello.has_role = rnd_flag();
		/* 3: a role this schema does not name, kept as a number. */
		s->hello.role = (Bitwheel__V1__Role)(rnd() % 4);
		s->hello.has_window = rnd_flag();
		s->hello.window = (uint32_t)rnd_u64();
		s->hello.has_ack_timeout_ns = rnd_flag();
		s->hello.ack_timeout_ns = rnd_u64();
		s->hello.has_auto_ack = rnd_flag();
		s->hello.auto_ack = rnd_flag();
		s->env.hello = &s->hello;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY:
		s->schedule_reply.has_deadline_ns = rnd_flag();
		s->schedule_reply.deadline_ns = rnd_u64();
		s->schedule_reply.has_replaced = rnd_flag();
		s->schedule_reply.replaced = rnd_flag();
		s->env.schedule_reply = &s->schedule_reply;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
		s->cancel_reply.has_pending = rnd_flag();
		s->cancel_reply.pending = rnd_flag();
		s->env.cancel_reply = &s->cancel_reply;
		break;
	default:
		s->fired.has_key = rnd_flag();
		s->fired.key = rnd_u64();
		rnd_payload(&s->fired.has_payload, &s->fired.payload);
		s->fired.has_deadline_ns = rnd_flag();
		s->fired.deadline_ns = rnd_u64();
		s->fired.has_fired_at_ns = rnd_flag();
		s->fired.fired_at_ns = rnd_u64();
		s->fired.has_fire_count = rnd_flag();
		s->fired.fire_count = rnd_u64();
		s->fired.has_late = rnd_flag();
		s->fired.late = rnd_flag();
		s->fired.has_redelivered = rnd_flag();
		s->fired.redelivered = rnd_flag();
		s->fired.has_delivery = rnd_flag();
		s->fired.delivery = rnd_u64();
		s->fired.has_deliveries = rnd_flag();
		s->fired.deliveries = rnd_u64();
		s->fired.has_due_realtime_ns = rnd_flag();
		s->fired.due_realtime_ns = rnd_u64();
		s->env.fired = &s->fired;
		break;
	}
}

/* protobuf-c's own frame of env: the reference bytes. */
static uint8_t *reference_frame(const Bitwheel__V1__Envelope *env, size_t *len)
{
	size_t body = bitwheel__v1__envelope__get_packed_size(env);
	uint8_t *buf = malloc(BWP_HEADER_SIZE + body);

	ck_assert_ptr_nonnull(buf);
	buf[0] = (uint8_t)(body >> 24);
	buf[1] = (uint8_t)(body >> 16);
	buf[2] = (uint8_t)(body >> 8);
	buf[3] = (uint8_t)body;
	ck_assert_uint_eq(bitwheel__v1__envelope__pack(env, buf + BWP_HEADER_SIZE),
			  body);
	*len = BWP_HEADER_SIZE + body;
	return buf;
}

/* r, from the fast path, says field for field what protobuf-c decoded. */
static void same_request(const struct bwp_request *r,
			 const Bitwheel__V1__Envelope *e)
{
	ck_assert_int_eq(r->body_case, e->body_case);
	ck_assert_int_eq(r->has_request_id, !!e->has_request_id);
	if (e->has_request_id)
		ck_assert_uint_eq(r->request_id, e->request_id);
	if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_CANCEL) {
		ck_assert_int_eq(r->has_key, !!e->cancel->has_key);
		if (e->cancel->has_key)
			ck_assert_uint_eq(r->key, e->cancel->key);
		ck_assert(!r->has_delivery && !r->has_cumulative);
		return;
	}
	if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_ACK) {
		ck_assert_int_eq(r->has_delivery, !!e->ack->has_delivery);
		if (e->ack->has_delivery)
			ck_assert_uint_eq(r->delivery, e->ack->delivery);
		ck_assert_int_eq(r->has_cumulative, !!e->ack->has_cumulative);
		if (e->ack->has_cumulative)
			ck_assert_int_eq(r->cumulative, !!e->ack->cumulative);
		/* Another body's fields stay absent. */
		ck_assert(!r->has_key && !r->has_payload && !r->has_period_ns);
		ck_assert_int_eq(r->when_case,
				 BITWHEEL__V1__SCHEDULE__WHEN__NOT_SET);
		return;
	}
	ck_assert_int_eq(e->body_case, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE);
	ck_assert(!r->has_delivery && !r->has_cumulative);
	ck_assert_int_eq(r->has_key, !!e->schedule->has_key);
	if (e->schedule->has_key)
		ck_assert_uint_eq(r->key, e->schedule->key);
	ck_assert_int_eq(r->when_case, e->schedule->when_case);
	if (e->schedule->when_case == BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS)
		ck_assert_uint_eq(r->when_ns, e->schedule->delay_ns);
	if (e->schedule->when_case == BITWHEEL__V1__SCHEDULE__WHEN_DEADLINE_NS)
		ck_assert_uint_eq(r->when_ns, e->schedule->deadline_ns);
	if (e->schedule->when_case == BITWHEEL__V1__SCHEDULE__WHEN_REALTIME_NS)
		ck_assert_uint_eq(r->when_ns, e->schedule->realtime_ns);
	if (e->schedule->when_case == BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR) {
		ck_assert_str_eq(r->calendar, e->schedule->calendar);
		ck_assert_uint_eq(r->when_ns, 0);
	} else {
		ck_assert_ptr_null(r->calendar);
	}
	ck_assert_int_eq(r->has_jitter_ns, !!e->schedule->has_jitter_ns);
	if (e->schedule->has_jitter_ns)
		ck_assert_uint_eq(r->jitter_ns, e->schedule->jitter_ns);
	ck_assert_int_eq(r->has_jitter_fixed, !!e->schedule->has_jitter_fixed);
	if (e->schedule->has_jitter_fixed)
		ck_assert_int_eq(r->jitter_fixed, !!e->schedule->jitter_fixed);
	ck_assert_int_eq(r->has_misfire_grace_ns, !!e->schedule->has_misfire_grace_ns);
	if (e->schedule->has_misfire_grace_ns)
		ck_assert_uint_eq(r->misfire_grace_ns, e->schedule->misfire_grace_ns);
	ck_assert_int_eq(r->has_clock, !!e->schedule->has_clock);
	if (e->schedule->has_clock)
		ck_assert_int_eq(r->clock, e->schedule->clock);
	ck_assert_int_eq(r->has_period_ns, !!e->schedule->has_period_ns);
	if (e->schedule->has_period_ns)
		ck_assert_uint_eq(r->period_ns, e->schedule->period_ns);
	ck_assert_int_eq(r->has_payload, !!e->schedule->has_payload);
	ck_assert_uint_eq(r->payload_len, e->schedule->payload.len);
	ck_assert_int_eq(r->payload == NULL, e->schedule->payload.data == NULL);
	if (r->payload_len)
		ck_assert_mem_eq(r->payload, e->schedule->payload.data,
				 r->payload_len);
	ck_assert_int_eq(r->has_replace, !!e->schedule->has_replace);
	if (e->schedule->has_replace)
		ck_assert_int_eq(r->replace, !!e->schedule->replace);
	ck_assert_int_eq(r->has_leeway_ns, !!e->schedule->has_leeway_ns);
	if (e->schedule->has_leeway_ns)
		ck_assert_uint_eq(r->leeway_ns, e->schedule->leeway_ns);
}

/* r, from the fast path, says field for field what protobuf-c decoded. */
static void same_response(const struct bwp_response *r,
			  const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__ScheduleReply *sr = e->schedule_reply;
	const Bitwheel__V1__CancelReply *cr = e->cancel_reply;
	const Bitwheel__V1__AckReply *ar = e->ack_reply;
	const Bitwheel__V1__Fired *f = e->fired;

	ck_assert_int_eq(r->body_case, e->body_case);
	ck_assert_int_eq(r->has_request_id, !!e->has_request_id);
	if (e->has_request_id)
		ck_assert_uint_eq(r->request_id, e->request_id);
	switch (e->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY:
		ck_assert_int_eq(r->has_deadline_ns, !!sr->has_deadline_ns);
		if (sr->has_deadline_ns)
			ck_assert_uint_eq(r->deadline_ns, sr->deadline_ns);
		ck_assert_int_eq(r->has_replaced, !!sr->has_replaced);
		if (sr->has_replaced)
			ck_assert_int_eq(r->replaced, !!sr->replaced);
		/* Another body's fields stay absent. */
		ck_assert(!r->has_pending && !r->has_key && !r->has_payload);
		ck_assert(!r->has_acked && !r->has_delivery);
		return;
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
		ck_assert_int_eq(r->has_pending, !!cr->has_pending);
		if (cr->has_pending)
			ck_assert_int_eq(r->pending, !!cr->pending);
		ck_assert(!r->has_deadline_ns && !r->has_key && !r->has_payload);
		ck_assert(!r->has_acked && !r->has_delivery);
		return;
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
		ck_assert_int_eq(r->has_acked, !!ar->has_acked);
		if (ar->has_acked)
			ck_assert_uint_eq(r->acked, ar->acked);
		ck_assert(!r->has_deadline_ns && !r->has_key && !r->has_payload);
		ck_assert(!r->has_pending && !r->has_delivery);
		return;
	default:
		ck_assert_int_eq(e->body_case, BITWHEEL__V1__ENVELOPE__BODY_FIRED);
	}
	ck_assert_int_eq(r->has_key, !!f->has_key);
	if (f->has_key)
		ck_assert_uint_eq(r->key, f->key);
	ck_assert_int_eq(r->has_payload, !!f->has_payload);
	ck_assert_uint_eq(r->payload_len, f->payload.len);
	ck_assert_int_eq(r->payload == NULL, f->payload.data == NULL);
	if (r->payload_len)
		ck_assert_mem_eq(r->payload, f->payload.data, r->payload_len);
	ck_assert_int_eq(r->has_deadline_ns, !!f->has_deadline_ns);
	if (f->has_deadline_ns)
		ck_assert_uint_eq(r->deadline_ns, f->deadline_ns);
	ck_assert_int_eq(r->has_fired_at_ns, !!f->has_fired_at_ns);
	if (f->has_fired_at_ns)
		ck_assert_uint_eq(r->fired_at_ns, f->fired_at_ns);
	ck_assert_int_eq(r->has_fire_count, !!f->has_fire_count);
	if (f->has_fire_count)
		ck_assert_uint_eq(r->fire_count, f->fire_count);
	ck_assert_int_eq(r->has_late, !!f->has_late);
	if (f->has_late)
		ck_assert_int_eq(r->late, !!f->late);
	ck_assert_int_eq(r->has_redelivered, !!f->has_redelivered);
	if (f->has_redelivered)
		ck_assert_int_eq(r->redelivered, !!f->redelivered);
	ck_assert_int_eq(r->has_delivery, !!f->has_delivery);
	if (f->has_delivery)
		ck_assert_uint_eq(r->delivery, f->delivery);
	ck_assert_int_eq(r->has_deliveries, !!f->has_deliveries);
	if (f->has_deliveries)
		ck_assert_uint_eq(r->deliveries, f->deliveries);
	ck_assert_int_eq(r->has_due_realtime_ns, !!f->has_due_realtime_ns);
	if (f->has_due_realtime_ns)
		ck_assert_uint_eq(r->due_realtime_ns, f->due_realtime_ns);
	ck_assert(!r->has_replaced && !r->has_pending && !r->has_acked);
}

/* Which fast path read a frame itself. */
enum taken { SLOW, FAST_REQUEST, FAST_RESPONSE };

/*
 * bwp_frame_parse_request() and bwp_frame_parse_response() on buf agree
 * with bwp_frame_parse(): the same result and frame length, and the same
 * fields; at most one of them reads the frame itself, and a payload it
 * reads points into the frame.  The conversions of protobuf-c's envelope
 * (the fallback's, for the daemon and the client) say the same.
 */
static enum taken parse_both(const uint8_t *buf, size_t len, size_t max_frame)
{
	Bitwheel__V1__Envelope *ref = NULL, *env = NULL, *env2 = NULL;
	struct bwp_request r;
	struct bwp_response q;
	size_t fl_ref = 0, fl = 0, fl2 = 0;
	int rc_ref, rc, rc2;
	enum taken taken = SLOW;

	rc_ref = bwp_frame_parse(buf, len, max_frame, &ref, &fl_ref);
	rc = bwp_frame_parse_request(buf, len, max_frame, &r, &env, &fl);
	rc2 = bwp_frame_parse_response(buf, len, max_frame, &q, &env2, &fl2);
	ck_assert_int_eq(rc, rc_ref);
	ck_assert_int_eq(rc2, rc_ref);
	ck_assert_uint_eq(fl, fl_ref);
	ck_assert_uint_eq(fl2, fl_ref);
	if (rc_ref != BWP_OK) {
		ck_assert_ptr_null(env);
		ck_assert_ptr_null(env2);
		return SLOW;
	}
	if (env == NULL) {
		same_request(&r, ref);
		if (r.payload_len)
			ck_assert(r.payload > buf && r.payload + r.payload_len <= buf + fl);
		taken = FAST_REQUEST;
	} else {
		ck_assert_int_eq(env->body_case, ref->body_case);
	}
	if (env2 == NULL) {
		ck_assert_int_eq(taken, SLOW);
		same_response(&q, ref);
		if (q.payload_len)
			ck_assert(q.payload > buf && q.payload + q.payload_len <= buf + fl);
		taken = FAST_RESPONSE;
	} else {
		ck_assert_int_eq(env2->body_case, ref->body_case);
	}
	if (bwp_request_from_envelope(ref, &r))
		same_request(&r, ref);
	if (bwp_response_from_envelope(ref, &q))
		same_response(&q, ref);
	/* Set either way, so the client can route on q alone. */
	ck_assert_int_eq(q.body_case, ref->body_case);
	ck_assert_int_eq(q.has_request_id, !!ref->has_request_id);
	ck_assert_uint_eq(q.request_id, ref->request_id);
	bwp_frame_free(env);
	bwp_frame_free(env2);
	bwp_frame_free(ref);
	return taken;
}

/* The fast path that should read a plain envelope env. */
static enum taken fast_for(const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__Schedule *m = e->schedule;

	switch (e->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE:
		/* A calendar timer's fields are protobuf-c's to read. */
		return m->when_case == BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR ||
			m->has_jitter_ns || m->has_jitter_fixed ||
			m->has_misfire_grace_ns ||
			(m->has_clock && ((int)m->clock < 0 || (int)m->clock > 1)) ?
			SLOW : FAST_REQUEST;
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL:
	case BITWHEEL__V1__ENVELOPE__BODY_ACK:
		return FAST_REQUEST;
	case BITWHEEL__V1__ENVELOPE__BODY_HELLO:
		return SLOW;
	default:
		return FAST_RESPONSE;
	}
}

START_TEST(test_fast_pack_is_protobuf_c)
{
	struct sample s;
	size_t len, ref_len, got;
	uint8_t *buf, *ref;

	for (int i = 0; i < rounds(20000); i++) {
		rnd_fast_envelope(&s);
		ref = reference_frame(&s.env, &ref_len);
		len = bwp_frame_packed_size(&s.env);
		ck_assert_msg(len == ref_len, "iteration %d: size %zu, protobuf-c %zu",
			      i, len, ref_len);
		buf = malloc(len);
		ck_assert_ptr_nonnull(buf);
		ck_assert_int_eq(bwp_frame_pack(&s.env, SIZE_MAX, buf, len, &got),
				 BWP_OK);
		ck_assert_uint_eq(got, len);
		ck_assert_msg(memcmp(buf, ref, len) == 0, "iteration %d: bytes differ", i);
		/* One byte short: the size, nothing written past the cap. */
		ck_assert_int_eq(bwp_frame_pack(&s.env, SIZE_MAX, buf, len - 1, &got),
				 BWP_ENOSPC);
		ck_assert_uint_eq(got, len);
		free(buf);
		free(ref);
	}
}
END_TEST

/* A response packed from its struct bwp_response (the daemon's replies
 * and fires) is protobuf-c's frame of the envelope, in a buffer of its
 * exact size (sized, then written) and in one with room past it (a small
 * one written in one pass); a Fired's dead letter included. */
START_TEST(test_pack_response_is_protobuf_c)
{
	struct sample s;
	Bitwheel__V1__DeadLetter dead = BITWHEEL__V1__DEAD_LETTER__INIT;
	struct bwp_response r;
	size_t len, ref_len, got;
	uint8_t *buf, *ref;
	int n = 0;

	for (int i = 0; i < rounds(20000); i++) {
		rnd_fast_envelope(&s);
		if (!bwp_response_from_envelope(&s.env, &r))
			continue;
		if (s.env.body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED &&
		    rnd() % 4 == 0) {
			rnd_session(&dead.has_session, &dead.session);
			dead.has_deliveries = rnd_flag();
			dead.deliveries = (uint32_t)rnd_u64();
			dead.has_dead_lettered_ns = rnd_flag();
			dead.dead_lettered_ns = rnd_u64();
			s.fired.dead_letter = &dead;
			ck_assert(bwp_response_from_envelope(&s.env, &r));
			ck_assert_ptr_eq(r.dead_letter, &dead);
		}
		n++;
		ref = reference_frame(&s.env, &ref_len);
		ck_assert_int_eq(bwp_frame_pack_response(&r, SIZE_MAX, NULL, 0, &len),
				 BWP_ENOSPC);
		ck_assert_msg(len == ref_len, "iteration %d: size %zu, protobuf-c %zu",
			      i, len, ref_len);
		ck_assert_uint_eq(bwp_frame_packed_size(&s.env), ref_len);
		for (size_t extra = 0; extra <= 256; extra += 256) {
			buf = malloc(len + extra);
			ck_assert_ptr_nonnull(buf);
			ck_assert_int_eq(bwp_frame_pack_response(&r, SIZE_MAX, buf,
								 len + extra, &got),
					 BWP_OK);
			ck_assert_uint_eq(got, len);
			ck_assert_msg(memcmp(buf, ref, len) == 0,
				      "iteration %d (%zu bytes spare): bytes differ",
				      i, extra);
			free(buf);
		}
		/* The bound on the body, as bwp_frame_pack's. */
		ck_assert_int_eq(bwp_frame_pack_response(&r, len - BWP_HEADER_SIZE - 1,
							 NULL, 0, &got),
				 BWP_ETOOBIG);
		free(ref);
	}
	ck_assert_int_gt(n, 0);
	r.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO;
	ck_assert_int_eq(bwp_frame_pack_response(&r, SIZE_MAX, NULL, 0, &got),
			 BWP_ENOBODY);
}
END_TEST

/* Every body both directions read fast, as protobuf-c writes it, and
 * every field of every body (a Hello's too) read back. */
START_TEST(test_fast_parse_is_protobuf_c)
{
	struct sample s;
	Bitwheel__V1__Envelope *got;
	size_t len, fl, again_len;
	uint8_t *buf, *again;
	int n[3] = { 0 };

	for (int i = 0; i < rounds(20000); i++) {
		enum taken want;

		rnd_fast_envelope(&s);
		want = fast_for(&s.env);
		buf = reference_frame(&s.env, &len);
		/* protobuf-c writes the plain encoding: always the fast path. */
		ck_assert_msg(parse_both(buf, len, SIZE_MAX) == want,
			      "iteration %d", i);
		n[want]++;
		/* Whatever was decoded, present or absent, packs to the same
		 * bytes: nothing lost or invented. */
		ck_assert_int_eq(bwp_frame_parse(buf, len, SIZE_MAX, &got, &fl),
				 BWP_OK);
		again = pack_new(got, &again_len);
		ck_assert_msg(again_len == len && memcmp(again, buf, len) == 0,
			      "iteration %d: decoded fields differ", i);
		free(again);
		bwp_frame_free(got);
		/* Cut short, every prefix waits for more, on every path. */
		if (len < 256)
			for (size_t cut = 0; cut < len; cut++)
				ck_assert_int_eq(parse_both(buf, cut, SIZE_MAX), SLOW);
		free(buf);
	}
	ck_assert_int_gt(n[FAST_REQUEST], 0);
	ck_assert_int_gt(n[FAST_RESPONSE], 0);
	ck_assert_int_gt(n[SLOW], 0);
}
END_TEST

/* Damaged frames: every path agrees on every one, and each direction
 * reads some itself and leaves some to protobuf-c. */
START_TEST(test_fast_parse_mutations)
{
	struct sample s;
	size_t len;
	uint8_t *buf;
	int fast[3] = { 0 }, slow[3] = { 0 };

	for (int i = 0; i < rounds(40000); i++) {
		enum taken want;

		rnd_fast_envelope(&s);
		want = fast_for(&s.env);
		s.schedule.payload.len %= 8;
		s.fired.payload.len %= 8;
		s.hello.session.len %= 8;
		buf = reference_frame(&s.env, &len);
		for (int m = 0, nm = 1 + (int)(rnd() % 3); m < nm; m++) {
			size_t at = BWP_HEADER_SIZE + rnd() % (len - BWP_HEADER_SIZE);

			buf[at] = rnd() % 2 ? (uint8_t)rnd() : (uint8_t)(buf[at] ^ (1u << rnd() % 8));
		}
		if (parse_both(buf, len, SIZE_MAX) != SLOW)
			fast[want]++;
		else
			slow[want]++;
		free(buf);
	}
	ck_assert_int_gt(fast[FAST_REQUEST], 0);
	ck_assert_int_gt(slow[FAST_REQUEST], 0);
	ck_assert_int_gt(fast[FAST_RESPONSE], 0);
	ck_assert_int_gt(slow[FAST_RESPONSE], 0);
}
END_TEST

static const struct odd_body {
	const char *why;
	uint8_t len;
	uint8_t bytes[24];
	int rc;             /* bwp_frame_parse's verdict       */
	enum taken fast;    /* the fast path that takes it     */
} odd_bodies[] = {
	{ "plain schedule", 8, { 0x08, 0x07, 0x1a, 0x04, 0x08, 0x01, 0x18, 0x05 }, 0, FAST_REQUEST },
	{ "plain cancel, key 0", 6, { 0x08, 0x07, 0x22, 0x02, 0x08, 0x00 }, 0, FAST_REQUEST },
	{ "empty schedule", 4, { 0x08, 0x07, 0x1a, 0x00 }, 0, FAST_REQUEST },
	{ "no request id", 4, { 0x1a, 0x02, 0x08, 0x01 }, 0, FAST_REQUEST },
	{ "over-long key varint", 7, { 0x22, 0x05, 0x08, 0x81, 0x80, 0x80, 0x00 }, 0, FAST_REQUEST },
	{ "ten-byte varint", 13, { 0x22, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
				   0xff, 0xff, 0xff, 0xff, 0x01 }, 0, FAST_REQUEST },
	{ "ten-byte varint past 64 bits", 13, { 0x22, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff,
						0xff, 0xff, 0xff, 0xff, 0xff, 0x7f },
	  BWP_ERANGE, SLOW },
	{ "eleven-byte varint", 14, { 0x22, 0x0c, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
				      0xff, 0xff, 0xff, 0xff, 0xff, 0x01 },
	  BWP_EDECODE, SLOW },
	{ "unknown envelope field", 7, { 0xf0, 0x01, 0x01, 0x22, 0x02, 0x08, 0x01 }, 0, SLOW },
	{ "unknown schedule field", 6, { 0x1a, 0x04, 0x08, 0x01, 0x78, 0x01 }, 0, SLOW },
	{ "fixed64 unknown field", 12, { 0x22, 0x0a, 0x09, 1, 2, 3, 4, 5, 6, 7, 8, 0x08 },
	  BWP_EDECODE, SLOW },
	{ "key twice", 6, { 0x22, 0x04, 0x08, 0x01, 0x08, 0x02 }, 0, SLOW },
	{ "request id twice", 8, { 0x08, 0x01, 0x08, 0x02, 0x22, 0x02, 0x08, 0x03 }, 0, SLOW },
	{ "delay and deadline", 6, { 0x1a, 0x04, 0x10, 0x01, 0x18, 0x02 }, 0, SLOW },
	{ "body twice", 8, { 0x22, 0x02, 0x08, 0x01, 0x1a, 0x02, 0x08, 0x02 }, 0, SLOW },
	{ "cancel twice", 8, { 0x22, 0x02, 0x08, 0x01, 0x22, 0x02, 0x08, 0x02 }, 0, SLOW },
	{ "bool 2", 4, { 0x1a, 0x02, 0x30, 0x02 }, 0, SLOW },
	{ "bool over-long", 5, { 0x1a, 0x03, 0x30, 0x81, 0x00 }, 0, SLOW },
	{ "key as bytes (packed)", 6, { 0x22, 0x04, 0x0a, 0x02, 0x01, 0x02 }, BWP_EDECODE, SLOW },
	{ "body as varint", 3, { 0x08, 0x01, 0x20 }, BWP_EDECODE, SLOW },
	{ "over-long tag", 7, { 0x88, 0x00, 0x01, 0x22, 0x02, 0x08, 0x01 }, 0, SLOW },
	{ "truncated key", 4, { 0x22, 0x02, 0x08, 0x80 }, BWP_EDECODE, SLOW },
	{ "sub length past the end", 4, { 0x22, 0x05, 0x08, 0x01 }, BWP_EDECODE, SLOW },
	{ "payload past the end", 5, { 0x1a, 0x03, 0x2a, 0x05, 0x01 }, BWP_EDECODE, SLOW },
	{ "six-byte length", 9, { 0x1a, 0x89, 0x80, 0x80, 0x80, 0x80, 0x00, 0x08, 0x01 },
	  BWP_EDECODE, SLOW },
	{ "schedule realtime_ns", 8, { 0x08, 0x01, 0x1a, 0x04, 0x08, 0x01, 0x40, 0x05 },
	  0, FAST_REQUEST },
	{ "schedule deadline_ns and realtime_ns", 10, { 0x08, 0x01, 0x1a, 0x06, 0x08, 0x01,
							0x18, 0x05, 0x40, 0x05 }, 0, SLOW },
	{ "plain ack", 4, { 0x62, 0x02, 0x08, 0x01 }, 0, FAST_REQUEST },
	{ "cumulative ack", 9, { 0x08, 0x09, 0x62, 0x05, 0x08, 0x80, 0x01, 0x10, 0x01 },
	  0, FAST_REQUEST },
	{ "ack, cumulative false", 6, { 0x62, 0x04, 0x08, 0x02, 0x10, 0x00 }, 0, FAST_REQUEST },
	{ "ack, cumulative first", 6, { 0x62, 0x04, 0x10, 0x01, 0x08, 0x02 }, 0, FAST_REQUEST },
	{ "empty ack", 2, { 0x62, 0x00 }, 0, FAST_REQUEST },
	{ "ack delivery twice", 6, { 0x62, 0x04, 0x08, 0x01, 0x08, 0x02 }, 0, SLOW },
	{ "ack cumulative twice", 6, { 0x62, 0x04, 0x10, 0x01, 0x10, 0x01 }, 0, SLOW },
	{ "ack cumulative 2", 4, { 0x62, 0x02, 0x10, 0x02 }, 0, SLOW },
	{ "ack, unknown field", 4, { 0x62, 0x02, 0x18, 0x01 }, 0, SLOW },
	{ "ack delivery as bytes", 5, { 0x62, 0x03, 0x0a, 0x01, 0x00 }, BWP_EDECODE, SLOW },
	{ "ack, truncated delivery", 4, { 0x62, 0x02, 0x08, 0x80 }, BWP_EDECODE, SLOW },
	{ "ack and cancel", 6, { 0x62, 0x00, 0x22, 0x02, 0x08, 0x01 }, 0, SLOW },
	{ "ack twice", 6, { 0x62, 0x02, 0x08, 0x01, 0x62, 0x00 }, 0, SLOW },
	{ "hello", 4, { 0x08, 0x01, 0x12, 0x00 }, 0, SLOW },
	{ "hello, version 2 consumer", 15, { 0x08, 0x01, 0x12, 0x0b, 0x08, 0x02, 0x18, 0x02,
					     0x20, 0x80, 0x02, 0x28, 0x00, 0x30, 0x00 },
	  0, SLOW },
	{ "stats", 4, { 0x08, 0x01, 0x2a, 0x00 }, 0, SLOW },
	{ "no body", 2, { 0x08, 0x01 }, BWP_ENOBODY, SLOW },
	{ "group", 4, { 0x22, 0x02, 0x0b, 0x0c }, BWP_EDECODE, SLOW },
	/* The daemon's side. */
	{ "plain schedule reply", 9, { 0x08, 0x07, 0x42, 0x05, 0x08, 0xe8, 0x07,
				       0x10, 0x01 }, 0, FAST_RESPONSE },
	{ "empty cancel reply", 4, { 0x08, 0x01, 0x4a, 0x00 }, 0, FAST_RESPONSE },
	{ "cancel reply pending", 6, { 0x08, 0x02, 0x4a, 0x02, 0x08, 0x01 }, 0, FAST_RESPONSE },
	{ "plain fired", 16, { 0x5a, 0x0e, 0x08, 0x05, 0x12, 0x02, 'h', 'i', 0x18, 0x07,
			       0x20, 0x08, 0x28, 0x01, 0x30, 0x00 }, 0, FAST_RESPONSE },
	{ "fired, empty payload", 6, { 0x5a, 0x04, 0x08, 0x05, 0x12, 0x00 }, 0, FAST_RESPONSE },
	{ "fired redelivered", 4, { 0x5a, 0x02, 0x38, 0x01 }, 0, FAST_RESPONSE },
	{ "fired with a request id", 6, { 0x08, 0x09, 0x5a, 0x02, 0x08, 0x01 }, 0,
	  FAST_RESPONSE },
	{ "fired due_realtime_ns", 6, { 0x5a, 0x04, 0x08, 0x01, 0x58, 0x01 }, 0,
	  FAST_RESPONSE },
	{ "unknown fired field", 6, { 0x5a, 0x04, 0x08, 0x01, 0x60, 0x01 }, 0, SLOW },
	{ "fired deliveries", 6, { 0x5a, 0x04, 0x08, 0x01, 0x48, 0x03 }, 0, FAST_RESPONSE },
	{ "fired deliveries twice", 6, { 0x5a, 0x04, 0x48, 0x01, 0x48, 0x02 }, 0, SLOW },
	{ "fired delivery", 6, { 0x5a, 0x04, 0x08, 0x01, 0x40, 0x01 }, 0, FAST_RESPONSE },
	{ "fired delivery 2^64-1", 13, { 0x5a, 0x0b, 0x40, 0xff, 0xff, 0xff, 0xff, 0xff,
					 0xff, 0xff, 0xff, 0xff, 0x01 }, 0, FAST_RESPONSE },
	{ "fired delivery twice", 6, { 0x5a, 0x04, 0x40, 0x01, 0x40, 0x02 }, 0, SLOW },
	{ "fired delivery as bytes", 5, { 0x5a, 0x03, 0x42, 0x01, 0x00 }, BWP_EDECODE, SLOW },
	{ "fired, truncated delivery", 4, { 0x5a, 0x02, 0x40, 0x80 }, BWP_EDECODE, SLOW },
	{ "plain ack reply", 6, { 0x08, 0x03, 0x6a, 0x02, 0x08, 0x05 }, 0, FAST_RESPONSE },
	{ "ack reply, acked 0", 4, { 0x6a, 0x02, 0x08, 0x00 }, 0, FAST_RESPONSE },
	{ "empty ack reply", 2, { 0x6a, 0x00 }, 0, FAST_RESPONSE },
	{ "acked twice", 6, { 0x6a, 0x04, 0x08, 0x01, 0x08, 0x01 }, 0, SLOW },
	{ "ack reply, unknown field", 4, { 0x6a, 0x02, 0x10, 0x01 }, 0, SLOW },
	{ "ack reply and fired", 6, { 0x6a, 0x00, 0x5a, 0x02, 0x40, 0x01 }, 0, SLOW },
	{ "fired key twice", 6, { 0x5a, 0x04, 0x08, 0x01, 0x08, 0x02 }, 0, SLOW },
	{ "pending 2", 4, { 0x4a, 0x02, 0x08, 0x02 }, 0, SLOW },
	{ "replaced over-long", 5, { 0x42, 0x03, 0x10, 0x81, 0x00 }, 0, SLOW },
	{ "schedule reply, unknown field", 6, { 0x42, 0x04, 0x08, 0x01, 0x18, 0x01 }, 0, SLOW },
	{ "fired payload past the end", 5, { 0x5a, 0x03, 0x12, 0x05, 0x01 }, BWP_EDECODE, SLOW },
	{ "fired, truncated key", 4, { 0x5a, 0x02, 0x08, 0x80 }, BWP_EDECODE, SLOW },
	{ "reply and fired", 6, { 0x4a, 0x00, 0x5a, 0x02, 0x08, 0x01 }, 0, SLOW },
	{ "error", 6, { 0x08, 0x01, 0x32, 0x02, 0x08, 0x04 }, 0, SLOW },
	{ "hello reply", 4, { 0x08, 0x01, 0x3a, 0x00 }, 0, SLOW },
	{ "stats reply", 4, { 0x08, 0x01, 0x52, 0x00 }, 0, SLOW },
};
#define N_ODD ((int)(sizeof(odd_bodies) / sizeof(odd_bodies[0])))

START_TEST(test_fast_parse_fallback)
{
	const struct odd_body *o = &odd_bodies[_i];
	uint8_t frame[BWP_HEADER_SIZE + sizeof(o->bytes)];
	size_t n = frame_of(o->bytes, o->len, frame), fl;
	Bitwheel__V1__Envelope *ref;
	int rc = bwp_frame_parse(frame, n, BWP_DEFAULT_MAX_FRAME, &ref, &fl);

	ck_assert_msg(rc == o->rc, "%s: protobuf-c says %d", o->why, rc);
	bwp_frame_free(ref);
	ck_assert_msg(parse_both(frame, n, BWP_DEFAULT_MAX_FRAME) == o->fast,
		      "%s: should be read by path %d", o->why, (int)o->fast);
}
END_TEST

/* ---- varint ranges ---------------------------------------------------------- */

/*
 * Varints wider than their fields, which protobuf-c would cut without a
 * word, in hand-made bodies: BWP_ERANGE on every path (parse_both), the
 * frame's length known; the same fields with values that fit, accepted.
 */
static const struct ranged_body {
	const char *why;
	uint8_t len;
	uint8_t bytes[32];
	int rc;
} ranged_bodies[] = {
	{ "hello, version 2", 6,
	  { 0x08, 0x01, 0x12, 0x02, 0x08, 0x02 },
	  0 },
	{ "hello, version 2^32 + 2", 10,
	  { 0x08, 0x01, 0x12, 0x06, 0x08, 0x82, 0x80, 0x80, 0x80, 0x10 },
	  BWP_ERANGE },
	{ "hello, version twice, the second 2^32", 12,
	  { 0x08, 0x01, 0x12, 0x08, 0x08, 0x02, 0x08, 0x80, 0x80, 0x80, 0x80, 0x10 },
	  BWP_ERANGE },
	{ "hello, owner_uid 1000", 12,
	  { 0x08, 0x01, 0x12, 0x08, 0x08, 0x02, 0x12, 0x01, 0x61, 0x38, 0xe8, 0x07 },
	  0 },
	{ "hello, owner_uid 2^32 + 1000", 15,
	  { 0x08, 0x01, 0x12, 0x0b, 0x08, 0x02, 0x12, 0x01, 0x61, 0x38, 0xe8, 0x87, 0x80, 0x80, 0x10 },
	  BWP_ERANGE },
	{ "hello, owner_uid 2^32 - 1", 12,
	  { 0x08, 0x01, 0x12, 0x08, 0x08, 0x02, 0x38, 0xff, 0xff, 0xff, 0xff, 0x0f },
	  0 },
	{ "hello, window 1 in seven bytes", 14,
	  { 0x08, 0x01, 0x12, 0x0a, 0x08, 0x02, 0x20, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 },
	  0 },
	{ "hello, role -1 (sign-extended)", 17,
	  { 0x08, 0x01, 0x12, 0x0d, 0x08, 0x02, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 },
	  0 },
	{ "hello, role 2^31", 12,
	  { 0x08, 0x01, 0x12, 0x08, 0x08, 0x02, 0x18, 0x80, 0x80, 0x80, 0x80, 0x08 },
	  BWP_ERANGE },
	{ "hello, role 2^32 + 2", 12,
	  { 0x08, 0x01, 0x12, 0x08, 0x08, 0x02, 0x18, 0x82, 0x80, 0x80, 0x80, 0x10 },
	  BWP_ERANGE },
	{ "hello, role 2^32 - 1 (-1 in five bytes)", 12,
	  { 0x08, 0x01, 0x12, 0x08, 0x08, 0x02, 0x18, 0xff, 0xff, 0xff, 0xff, 0x0f },
	  BWP_ERANGE },
	{ "hello, auto_ack 2^32 (true)", 12,
	  { 0x08, 0x01, 0x12, 0x08, 0x08, 0x02, 0x30, 0x80, 0x80, 0x80, 0x80, 0x10 },
	  0 },
	{ "hello, auto_ack past 64 bits", 17,
	  { 0x08, 0x01, 0x12, 0x0d, 0x08, 0x02, 0x30, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03 },
	  BWP_ERANGE },
	{ "hello, unknown field past 64 bits", 17,
	  { 0x08, 0x01, 0x12, 0x0d, 0x08, 0x02, 0x78, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f },
	  0 },
	{ "error, code -2^31", 15,
	  { 0x08, 0x01, 0x32, 0x0b, 0x08, 0x80, 0x80, 0x80, 0x80, 0xf8, 0xff, 0xff, 0xff, 0xff, 0x01 },
	  0 },
	{ "error, code -2^31 - 1", 15,
	  { 0x08, 0x01, 0x32, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xf7, 0xff, 0xff, 0xff, 0xff, 0x01 },
	  BWP_ERANGE },
	{ "error, code 2^31 - 1", 10,
	  { 0x08, 0x01, 0x32, 0x06, 0x08, 0xff, 0xff, 0xff, 0xff, 0x07 },
	  0 },
	{ "hello reply, limits.max_frame_bytes 2^32", 12,
	  { 0x08, 0x01, 0x3a, 0x08, 0x2a, 0x06, 0x08, 0x80, 0x80, 0x80, 0x80, 0x10 },
	  BWP_ERANGE },
	{ "hello reply, limits.max_frame_bytes 2^32 - 1", 12,
	  { 0x08, 0x01, 0x3a, 0x08, 0x2a, 0x06, 0x08, 0xff, 0xff, 0xff, 0xff, 0x0f },
	  0 },
	{ "hello reply, lanes[1].resolution_ns past 64 bits", 23,
	  { 0x08, 0x01, 0x3a, 0x13, 0x82, 0x01, 0x02, 0x08, 0x05, 0x82, 0x01, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02 },
	  BWP_ERANGE },
	{ "stats reply, packed lateness_le_ns", 22,
	  { 0x08, 0x01, 0x52, 0x12, 0x9a, 0x01, 0x0f, 0x0a, 0x0d, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0xac, 0x02 },
	  0 },
	{ "stats reply, packed lateness_le_ns past 64 bits", 22,
	  { 0x08, 0x01, 0x52, 0x12, 0x9a, 0x01, 0x0f, 0x0a, 0x0d, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0xac, 0x02 },
	  BWP_ERANGE },
	{ "stats reply, lateness_le_ns unpacked past 64 bits", 20,
	  { 0x08, 0x01, 0x52, 0x10, 0x9a, 0x01, 0x0d, 0x08, 0x01, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x03 },
	  BWP_ERANGE },
	{ "schedule, key past 64 bits", 15,
	  { 0x08, 0x01, 0x1a, 0x0b, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x40 },
	  BWP_ERANGE },
};
#define N_RANGED ((int)(sizeof(ranged_bodies) / sizeof(ranged_bodies[0])))

START_TEST(test_varint_ranges)
{
	const struct ranged_body *o = &ranged_bodies[_i];
	uint8_t frame[BWP_HEADER_SIZE + sizeof(o->bytes)];
	size_t n = frame_of(o->bytes, o->len, frame), fl = 0;
	Bitwheel__V1__Envelope *env;
	int rc = bwp_frame_parse(frame, n, BWP_DEFAULT_MAX_FRAME, &env, &fl);

	ck_assert_msg(rc == o->rc, "%s: %d (%s), not %d", o->why, rc,
		      bwp_strerror(rc), o->rc);
	ck_assert_uint_eq(fl, n);
	ck_assert(rc == BWP_OK ? env != NULL : env == NULL);
	bwp_frame_free(env);
	parse_both(frame, n, BWP_DEFAULT_MAX_FRAME);
}
END_TEST

static size_t put_var(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	for (; v > 0x7f; v >>= 7)
		p[n++] = (uint8_t)(v | 0x80);
	p[n++] = (uint8_t)v;
	return n;
}

/*
 * A frame of an envelope with request_id 1 whose body holds, depth
 * messages down, v as a varint: path[] are the field numbers from the
 * envelope's body member inward, the last the varint's.
 */
static size_t varint_frame(const unsigned *path, size_t depth, uint64_t v,
			   uint8_t *out)
{
	uint8_t in[64], wrap[64];
	size_t n = put_var(in, path[depth - 1] << 3), m;

	n += put_var(in + n, v);
	for (size_t k = depth - 1; k-- > 0;) {
		m = put_var(wrap, path[k] << 3 | 2);
		m += put_var(wrap + m, n);
		memcpy(wrap + m, in, n);
		n += m;
		memcpy(in, wrap, n);
	}
	wrap[0] = 0x08;
	wrap[1] = 0x01;
	memcpy(wrap + 2, in, n);
	return frame_of(wrap, n + 2, out);
}

/*
 * Every width of varint into a uint32 (a Hello's protocol_version, a
 * HelloReply's limits.max_window two messages down) and an enum
 * (Error.code): accepted, and read back whole, exactly when the field can
 * hold it; into a bool (Ack.cumulative), always, true when nonzero.
 * Every path agrees.
 */
START_TEST(test_varint_widths)
{
	static const unsigned version[] = { 2, 1 }, window[] = { 7, 5, 8 },
			      code[] = { 6, 1 }, cumulative[] = { 12, 2 };
	uint8_t frame[128];
	Bitwheel__V1__Envelope *env;
	size_t n, fl;
	int ok[4] = { 0 }, refused[4] = { 0 };

	for (int i = 0; i < rounds(5000); i++) {
		uint64_t v = rnd() % 4 == 0 ? (uint64_t)(int64_t)(int32_t)rnd()
					    : rnd_u64();
		bool fits[4] = {
			v <= UINT32_MAX, v <= UINT32_MAX,
			(int64_t)v >= INT32_MIN && (int64_t)v <= INT32_MAX, true,
		};

		for (int f = 0; f < 4; f++) {
			int rc;

			n = f == 0 ? varint_frame(version, 2, v, frame)
			  : f == 1 ? varint_frame(window, 3, v, frame)
			  : f == 2 ? varint_frame(code, 2, v, frame)
				   : varint_frame(cumulative, 2, v, frame);
			rc = bwp_frame_parse(frame, n, BWP_DEFAULT_MAX_FRAME, &env, &fl);
			ck_assert_msg(rc == (fits[f] ? BWP_OK : BWP_ERANGE),
				      "iteration %d, field %d, value %llu: %d", i, f,
				      (unsigned long long)v, rc);
			parse_both(frame, n, BWP_DEFAULT_MAX_FRAME);
			if (rc != BWP_OK) {
				refused[f]++;
				continue;
			}
			ok[f]++;
			switch (f) {
			case 0:
				ck_assert_uint_eq(env->hello->protocol_version, v);
				break;
			case 1:
				ck_assert_uint_eq(env->hello_reply->limits->max_window, v);
				break;
			case 2:
				ck_assert_int_eq((int32_t)env->error->code, (int64_t)v);
				break;
			default:
				ck_assert_uint_eq(env->ack->cumulative, v != 0);
			}
			bwp_frame_free(env);
		}
	}
	for (int f = 0; f < 4; f++)
		ck_assert_msg(ok[f] > 0 && (refused[f] > 0) == (f < 3),
			      "field %d: %d accepted, %d refused", f, ok[f], refused[f]);
}
END_TEST

/* ---- durations ----------------------------------------------------------- */

static const struct {
	const char *text;
	int err;
	uint64_t ns;
} durations[] = {
	{ "250ms", 0, 250000000 },
	{ "1.5s", 0, 1500000000 },
	{ "0.1s", 0, 100000000 },                  /* exact, integer arithmetic */
	{ "1h30m", 0, 5400000000000 },
	{ "2d", 0, 172800000000000 },
	{ "1.5d", 0, 129600000000000 },
	{ "1d12h", 0, 129600000000000 },
	{ "10us", 0, 10000 },
	{ "10\xc2\xb5s", 0, 10000 },
	{ "1.0000000019s", 0, 1000000001 },        /* below 1 ns: dropped */
	{ "0.5ns", 0, 0 },
	{ "18446744073709551615ns", 0, UINT64_MAX },
	{ "213503d", 0, 213503ull * 86400000000000ull },
	{ "18446744073709551616ns", -ERANGE, 0 },  /* the digits overflow */
	{ "213504d", -ERANGE, 0 },                 /* the term does */
	{ "213503d23h59m", -ERANGE, 0 },           /* the sum does */
	{ "213503.99999999999d", -ERANGE, 0 },     /* the fraction does */
	{ "5", -EINVAL, 0 },
	{ "", -EINVAL, 0 },
	{ ".s", -EINVAL, 0 },
	{ "s", -EINVAL, 0 },
	{ "1x", -EINVAL, 0 },
	{ "1s2", -EINVAL, 0 },
	{ "-1s", -EINVAL, 0 },
	{ "1 s", -EINVAL, 0 },
	{ "1D", -EINVAL, 0 },
};

START_TEST(test_parse_duration)
{
	uint64_t ns = 0;
	int err = bwp_parse_duration(durations[_i].text, &ns);

	ck_assert_msg(err == durations[_i].err, "'%s': %d, want %d", durations[_i].text, err,
		      durations[_i].err);
	if (err == 0)
		ck_assert_msg(ns == durations[_i].ns, "'%s': %llu ns, want %llu",
			      durations[_i].text, (unsigned long long)ns,
			      (unsigned long long)durations[_i].ns);
}
END_TEST

/* Overflow and bad text each have their own words; the Schedule bounds. */
START_TEST(test_duration_problems)
{
	ck_assert(strncmp(bwp_duration_problem(-ERANGE), "is too large", 12) == 0);
	ck_assert(strncmp(bwp_duration_problem(-EINVAL), "is not a duration", 17) == 0);
	ck_assert(strstr(bwp_duration_problem(-EINVAL), " d,") != NULL);

	ck_assert_ptr_null(bwp_schedule_problem(10, true, UINT64_MAX - 10, false, 0));
	ck_assert_str_eq(bwp_schedule_problem(10, true, UINT64_MAX - 9, false, 0),
			 "now + delay_ns overflows 64 bits");
	/* An absolute deadline cannot overflow, whatever now is. */
	ck_assert_ptr_null(bwp_schedule_problem(10, false, UINT64_MAX, false, 0));
	ck_assert_ptr_null(bwp_schedule_problem(0, true, 5, true, BWP_MIN_PERIOD_NS));
	ck_assert_str_eq(bwp_schedule_problem(0, true, 5, true, 0), "period_ns must be > 0");
	/* No period given: 0 is no period, not a bad one. */
	ck_assert_ptr_null(bwp_schedule_problem(0, true, 5, false, 0));
}
END_TEST

static Suite *frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *tc;

	tc = tcase_create("roundtrip");
	tcase_add_loop_test(tc, test_roundtrip, 0, N_KINDS);
	tcase_add_test(tc, test_stream);
	tcase_add_test(tc, test_body_members_are_messages);
	tcase_add_test(tc, test_unknown_field_ignored);
	tcase_add_test(tc, test_body_twice_last_wins);
	tcase_add_test(tc, test_payload_overhead);
	tcase_add_test(tc, test_protocol_examples);
	tcase_add_test(tc, test_parse_bounded);
	suite_add_tcase(s, tc);

	tc = tcase_create("partial");
	tcase_add_loop_test(tc, test_every_split_point, 0, N_KINDS);
	tcase_add_test(tc, test_dribble);
	suite_add_tcase(s, tc);

	tc = tcase_create("header");
	tcase_add_test(tc, test_zero_length);
	tcase_add_test(tc, test_over_max_header_only);
	tcase_add_test(tc, test_length_beyond_data);
	tcase_add_test(tc, test_max_boundary);
	suite_add_tcase(s, tc);

	tc = tcase_create("body");
	tcase_add_loop_test(tc, test_invalid_protobuf, 0, N_BAD);
	tcase_add_loop_test(tc, test_no_body, 0, N_BODILESS);
	suite_add_tcase(s, tc);

	tc = tcase_create("pack");
	tcase_add_test(tc, test_pack_buffer_too_small);
	tcase_add_test(tc, test_pack_no_body);
	tcase_add_test(tc, test_bad_arguments);
	suite_add_tcase(s, tc);

	tc = tcase_create("fast");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_fast_pack_is_protobuf_c);
	tcase_add_test(tc, test_pack_response_is_protobuf_c);
	tcase_add_test(tc, test_fast_parse_is_protobuf_c);
	tcase_add_test(tc, test_fast_parse_mutations);
	tcase_add_loop_test(tc, test_fast_parse_fallback, 0, N_ODD);
	suite_add_tcase(s, tc);

	tc = tcase_create("ranges");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_varint_ranges, 0, N_RANGED);
	tcase_add_test(tc, test_varint_widths);
	suite_add_tcase(s, tc);

	tc = tcase_create("helpers");
	tcase_add_test(tc, test_strerror);
	tcase_add_test(tc, test_error_reply);
	tcase_add_test(tc, test_reply_init);
	tcase_add_test(tc, test_session_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("duration");
	tcase_add_loop_test(tc, test_parse_duration, 0,
			    (int)(sizeof(durations) / sizeof(durations[0])));
	tcase_add_test(tc, test_duration_problems);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(frame_suite());
	int failed;

	/* A crash in one test must not take the others with it. */
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
