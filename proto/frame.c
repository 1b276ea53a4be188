/*
 * frame.c - bitwheel protocol frames over byte buffers.  The layout, the
 * contract and the cost of each operation are in frame.h.
 *
 * The fast path.  protobuf-c walks descriptors for every field, sizes a
 * message once to pack it and again inside the pack, and unpacks into
 * malloc'd messages with a copy of every payload: most of the daemon's
 * instructions per request.  So the messages that make up nearly all the
 * traffic are handled here directly:
 *
 *   writing   Schedule, Cancel, Ack (a client's requests), ScheduleReply,
 *             CancelReply, AckReply and Fired (the daemon's hot frames) are
 *             sized with a few branches and written as protobuf wire bytes
 *             straight into the caller's buffer.  The bytes are exactly
 *             protobuf_c_message_pack()'s: fields in ascending number
 *             (the order of protobuf-c's descriptors), a field only when
 *             its has_* flag (or its oneof case) says so, bools as one
 *             byte 0 or 1, lengths and integers as minimal varints.  An
 *             envelope or body carrying unknown fields (a re-packed
 *             received message), or any other body, goes to protobuf-c.
 *             The four responses are written from a struct bwp_response
 *             (bwp_frame_pack_response: the daemon fills one for its
 *             hot replies and every fire, no protobuf-c message), and
 *             an envelope carrying one is read into one and written so.
 *
 *   reading   bwp_frame_parse_request() reads an Envelope whose body is a
 *             Schedule, Cancel or Ack (the daemon's hot frames) into a
 *             struct bwp_request, and bwp_frame_parse_response() one whose
 *             body is a ScheduleReply, CancelReply, AckReply or Fired (the
 *             client's) into a struct bwp_response, without allocating,
 *             the payload pointing into the frame.  Both walk the envelope
 *             once (fast_envelope: the request_id and where the body
 *             lies), then the body.  They accept only the plain encoding:
 *             one-byte tags of the fields the schema gives those messages,
 *             with their own wire types; each field at most once (one
 *             body, one of delay/deadline); varints of at most ten bytes,
 *             read as protobuf-c reads them (bits past 64 dropped); length
 *             prefixes of at most five bytes that fit the enclosing
 *             message; bools as one byte 0 or 1.  Anything else - another
 *             body, no body, an unknown or repeated field, a wire-type
 *             surprise, an over-long tag, a truncated value, an odd bool -
 *             falls back to protobuf-c's full unpack of the same bytes, so
 *             whether a frame is an error, and which, is protobuf-c's
 *             decision alone, and an accepted frame decodes to the fields
 *             protobuf-c would give.
 *
 *   ranges    protobuf-c stores a varint in its field's C type without a
 *             word: a uint32 of 2^32 + 2 reads as 2, the bits of a varint
 *             past 64 are dropped.  So every body protobuf-c accepts is
 *             walked once more (check_ranges), tag by tag with the message
 *             descriptors, into nested messages and packed arrays, and a
 *             varint its field cannot hold is BWP_ERANGE: O(bytes), no
 *             allocation.  A bool is any varint of at most 64 bits,
 *             nonzero being true (protobuf's rule, which protobuf-c reads
 *             whole: nothing is cut).  The fast readers never take a
 *             varint past 64 bits: they fall back, and the walk refuses
 *             it.
 *
 * tests/check_frame.c compares both directions with protobuf-c on many
 * messages, and tests/fuzz_frame.c on every fuzz input.
 */
#include "frame.h"

#include <limits.h>
#include <string.h>

const char *bwp_strerror(int err)
{
	switch (err) {
	case BWP_OK:
		return "success";
	case BWP_EMORE:
		return "incomplete frame: more bytes needed";
	case BWP_EZERO:
		return "frame of length zero";
	case BWP_ETOOBIG:
		return "frame longer than the maximum frame size";
	case BWP_EDECODE:
		return "frame body is not a valid envelope";
	case BWP_ENOBODY:
		return "envelope carries no known message";
	case BWP_ENOSPC:
		return "output buffer too small for the frame";
	case BWP_EINVAL:
		return "invalid argument";
	case BWP_ESLOW:
		return "frame too long for what it holds (only a plain Schedule may carry a payload's length)";
	case BWP_ERANGE:
		return "a field's value out of its type's range (a uint32 of 2^32 or more, say)";
	}
	return "unknown bwp error";
}

/* The header's 32 bits bound the body whatever the configured maximum. */
static size_t body_limit(size_t max_frame)
{
	return max_frame < UINT32_MAX ? max_frame : UINT32_MAX;
}

/* Frame sizes come from untrusted headers; on 32-bit hosts they can wrap. */
static size_t add_sat(size_t a, size_t b)
{
	return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

/*
 * A hand-built envelope may name a member whose pointer is NULL, or a case
 * that is no member at all; protobuf-c would then silently pack no body.
 * Looking the member up through the descriptor keeps this right as members
 * are added.  Every member is a message (tests/check_frame.c checks that),
 * so a non-NULL pointer at its offset is what "present" means.
 */
static bool body_present(const Bitwheel__V1__Envelope *env)
{
	const ProtobufCFieldDescriptor *f;

	if (env->body_case == BITWHEEL__V1__ENVELOPE__BODY__NOT_SET)
		return false;
	f = protobuf_c_message_descriptor_get_field(
		&bitwheel__v1__envelope__descriptor, (unsigned)env->body_case);
	if (f == NULL || !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
		return false;
	return *(void *const *)((const char *)env + f->offset) != NULL;
}

/* ---- fast writing -------------------------------------------------------- */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
#define TAG(field, wt) ((uint8_t)((field) << 3 | (wt)))
/* Not a size fast_body_size() can give: protobuf-c must pack this one. */
#define SLOW SIZE_MAX

/* A varint's bytes by the index of its value's highest bit: seven bits a
 * byte.  A table, as a frame sizes some ten of them: the division's
 * multiply and shifts cost more than the load (callgrind). */
static const uint8_t varint_bytes[64] = {
	1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3,
	4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6,
	7, 7, 7, 7, 7, 7, 7, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9,
	10,
};

static inline size_t varint_size(uint64_t v)
{
	/* | 1 so that 0 takes its one byte. */
	return varint_bytes[63 ^ __builtin_clzll(v | 1)];
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static inline size_t opt_u64_size(bool has, uint64_t v)
{
	return has ? 1 + varint_size(v) : 0;
}

static inline uint8_t *put_u64(uint8_t *p, unsigned field, bool has,
			       uint64_t v)
{
	if (!has)
		return p;
	*p++ = TAG(field, WT_VARINT);
	return put_varint(p, v);
}

static inline uint8_t *put_bool(uint8_t *p, unsigned field, bool has, bool v)
{
	if (!has)
		return p;
	*p++ = TAG(field, WT_VARINT);
	*p++ = v ? 1 : 0;
	return p;
}

static inline uint8_t *put_bytes(uint8_t *p, unsigned field, bool has,
				 const ProtobufCBinaryData *b)
{
	if (!has)
		return p;
	*p++ = TAG(field, WT_LEN);
	p = put_varint(p, b->len);
	if (b->len)
		memcpy(p, b->data, b->len);
	return p + b->len;
}

static inline size_t opt_bytes_size(bool has, const ProtobufCBinaryData *b)
{
	return has ? 1 + varint_size(b->len) + b->len : 0;
}

/* The body message's own size (without its tag and length), or SLOW. */
static size_t fast_body_size(const Bitwheel__V1__Envelope *env)
{
	switch (env->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE: {
		const Bitwheel__V1__Schedule *m = env->schedule;

		/* A calendar timer's fields are rare: protobuf-c writes
		 * them (calendar shares the union with the integers). */
		if (!m || m->base.n_unknown_fields ||
		    m->when_case == BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR ||
		    m->has_jitter_ns || m->has_jitter_fixed ||
		    m->has_misfire_grace_ns)
			return SLOW;
		return opt_u64_size(m->has_key, m->key) +
		       (m->when_case != BITWHEEL__V1__SCHEDULE__WHEN__NOT_SET
			? 1 + varint_size(m->delay_ns) : 0) +
		       opt_u64_size(m->has_period_ns, m->period_ns) +
		       opt_bytes_size(m->has_payload, &m->payload) +
		       (m->has_replace ? 2 : 0) +
		       opt_u64_size(m->has_leeway_ns, m->leeway_ns) +
		       opt_u64_size(m->has_clock, (uint64_t)(int64_t)(int32_t)m->clock);
	}
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL: {
		const Bitwheel__V1__Cancel *m = env->cancel;

		if (!m || m->base.n_unknown_fields)
			return SLOW;
		return opt_u64_size(m->has_key, m->key);
	}
	case BITWHEEL__V1__ENVELOPE__BODY_ACK: {
		const Bitwheel__V1__Ack *m = env->ack;

		if (!m || m->base.n_unknown_fields)
			return SLOW;
		return opt_u64_size(m->has_delivery, m->delivery) +
		       (m->has_cumulative ? 2 : 0);
	}
	default:
		return SLOW;
	}
}

/* Write the body message's fields: fast_body_size() said it can. */
static uint8_t *fast_body_write(const Bitwheel__V1__Envelope *env, uint8_t *p)
{
	switch (env->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE: {
		const Bitwheel__V1__Schedule *m = env->schedule;

		/* delay_ns, deadline_ns and realtime_ns share the union,
		 * each a one-byte tag; in field order, as protobuf-c writes
		 * them, realtime_ns (8) comes after leeway_ns (7). */
		bool realtime = m->when_case == BITWHEEL__V1__SCHEDULE__WHEN_REALTIME_NS;

		p = put_u64(p, 1, m->has_key, m->key);
		if (m->when_case != BITWHEEL__V1__SCHEDULE__WHEN__NOT_SET && !realtime)
			p = put_u64(p, (unsigned)m->when_case, true, m->delay_ns);
		p = put_u64(p, 4, m->has_period_ns, m->period_ns);
		p = put_bytes(p, 5, m->has_payload, &m->payload);
		p = put_bool(p, 6, m->has_replace, m->replace);
		p = put_u64(p, 7, m->has_leeway_ns, m->leeway_ns);
		p = put_u64(p, 8, realtime, m->delay_ns);
		/* protobuf-c writes an enum as an int32: a negative one
		 * (no value of ours) is ten bytes. */
		return put_u64(p, 13, m->has_clock, (uint64_t)(int64_t)(int32_t)m->clock);
	}
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL:
		return put_u64(p, 1, env->cancel->has_key, env->cancel->key);
	case BITWHEEL__V1__ENVELOPE__BODY_ACK:
		p = put_u64(p, 1, env->ack->has_delivery, env->ack->delivery);
		return put_bool(p, 2, env->ack->has_cumulative,
				env->ack->cumulative);
	default:
		return p; /* not reached: fast_body_size() said SLOW */
	}
}

/* A response's body message: its own size (without its tag and length),
 * or SLOW for a body that is none of the four. */
static size_t response_body_size(const struct bwp_response *r, size_t *dead)
{
	switch (r->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY:
		return opt_u64_size(r->has_deadline_ns, r->deadline_ns) +
		       (r->has_replaced ? 2 : 0);
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
		return r->has_pending ? 2 : 0;
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
		return opt_u64_size(r->has_acked, r->acked);
	case BITWHEEL__V1__ENVELOPE__BODY_FIRED:
		/* A dead letter's history is rare: protobuf-c packs it,
		 * inside the frame written here. */
		*dead = r->dead_letter ?
			bitwheel__v1__dead_letter__get_packed_size(r->dead_letter) : 0;
		return opt_u64_size(r->has_key, r->key) +
		       (r->has_payload ? 1 + varint_size(r->payload_len) +
					 r->payload_len : 0) +
		       opt_u64_size(r->has_deadline_ns, r->deadline_ns) +
		       opt_u64_size(r->has_fired_at_ns, r->fired_at_ns) +
		       opt_u64_size(r->has_fire_count, r->fire_count) +
		       (r->has_late ? 2 : 0) + (r->has_redelivered ? 2 : 0) +
		       opt_u64_size(r->has_delivery, r->delivery) +
		       opt_u64_size(r->has_deliveries, r->deliveries) +
		       (r->dead_letter ? 1 + varint_size(*dead) + *dead : 0) +
		       opt_u64_size(r->has_due_realtime_ns, r->due_realtime_ns);
	default:
		return SLOW;
	}
}

/* Write the response's body fields (response_body_size() said it can, and
 * dead is the dead letter's size) and return their end. */
static uint8_t *response_body_write(const struct bwp_response *r, size_t dead,
				    uint8_t *p)
{
	switch (r->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY:
		p = put_u64(p, 1, r->has_deadline_ns, r->deadline_ns);
		return put_bool(p, 2, r->has_replaced, r->replaced);
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
		return put_bool(p, 1, r->has_pending, r->pending);
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
		return put_u64(p, 1, r->has_acked, r->acked);
	default: {
		ProtobufCBinaryData payload = {
			.len = r->payload_len, .data = (uint8_t *)r->payload,
		};

		p = put_u64(p, 1, r->has_key, r->key);
		p = put_bytes(p, 2, r->has_payload, &payload);
		p = put_u64(p, 3, r->has_deadline_ns, r->deadline_ns);
		p = put_u64(p, 4, r->has_fired_at_ns, r->fired_at_ns);
		p = put_u64(p, 5, r->has_fire_count, r->fire_count);
		p = put_bool(p, 6, r->has_late, r->late);
		p = put_bool(p, 7, r->has_redelivered, r->redelivered);
		p = put_u64(p, 8, r->has_delivery, r->delivery);
		p = put_u64(p, 9, r->has_deliveries, r->deliveries);
		if (r->dead_letter) {
			*p++ = TAG(10, WT_LEN);
			p = put_varint(p, dead);
			p += bitwheel__v1__dead_letter__pack(r->dead_letter, p);
		}
		return put_u64(p, 11, r->has_due_realtime_ns, r->due_realtime_ns);
	}
	}
}

/* An envelope of request_id and a body of sub bytes: its size. */
static size_t envelope_size(bool has_id, uint64_t id, size_t sub)
{
	return opt_u64_size(has_id, id) + 1 + varint_size(sub) + sub;
}

static void put_header(uint8_t *buf, size_t body)
{
	buf[0] = (uint8_t)(body >> 24);
	buf[1] = (uint8_t)(body >> 16);
	buf[2] = (uint8_t)(body >> 8);
	buf[3] = (uint8_t)body;
}

/* The header of a frame whose envelope is body bytes, and the envelope up
 * to its body message's first byte, which it returns. */
static uint8_t *put_envelope(uint8_t *buf, size_t body,
			     bool has_id, uint64_t id, unsigned body_case,
			     size_t sub)
{
	uint8_t *p = buf + BWP_HEADER_SIZE;

	put_header(buf, body);
	p = put_u64(p, 1, has_id, id);
	/* Every body member is a message: length-delimited. */
	*p++ = TAG(body_case, WT_LEN);
	return put_varint(p, sub);
}

/* The envelope's packed size and its body's, or SLOW. */
static size_t fast_size(const Bitwheel__V1__Envelope *env, size_t *sub)
{
	if (env->base.n_unknown_fields)
		return SLOW;
	*sub = fast_body_size(env);
	if (*sub == SLOW)
		return SLOW;
	return envelope_size(env->has_request_id, env->request_id, *sub);
}

/* One of the four responses, with no unknown fields anywhere but in a
 * dead letter: bwp_frame_pack_response() writes it. */
static bool plain_response(const Bitwheel__V1__Envelope *env,
			   struct bwp_response *r)
{
	const void *m;

	switch (env->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY:
		m = env->schedule_reply;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
		m = env->cancel_reply;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
		m = env->ack_reply;
		break;
	case BITWHEEL__V1__ENVELOPE__BODY_FIRED:
		m = env->fired;
		break;
	default:
		return false;
	}
	/* A NULL member is no body: bwp_frame_pack's BWP_ENOBODY. */
	if (m == NULL || ((const ProtobufCMessage *)m)->n_unknown_fields ||
	    env->base.n_unknown_fields)
		return false;
	return bwp_response_from_envelope(env, r);
}

size_t bwp_frame_packed_size(const Bitwheel__V1__Envelope *env)
{
	struct bwp_response r;
	size_t sub, body, len;

	if (plain_response(env, &r) &&
	    bwp_frame_pack_response(&r, SIZE_MAX, NULL, 0, &len) == BWP_ENOSPC)
		return len;
	body = fast_size(env, &sub);
	if (body == SLOW)
		body = bitwheel__v1__envelope__get_packed_size(env);
	return add_sat(BWP_HEADER_SIZE, body);
}

int bwp_frame_pack(const Bitwheel__V1__Envelope *env, size_t max_frame,
		   uint8_t *buf, size_t cap, size_t *out_len)
{
	struct bwp_response r;
	size_t body, total, sub = SLOW;

	if (env == NULL || out_len == NULL || (buf == NULL && cap > 0))
		return BWP_EINVAL;
	if (plain_response(env, &r))
		return bwp_frame_pack_response(&r, max_frame, buf, cap, out_len);
	/* A fast body is one whose member pointer is set: present. */
	body = fast_size(env, &sub);
	if (body == SLOW) {
		if (!body_present(env))
			return BWP_ENOBODY;
		body = bitwheel__v1__envelope__get_packed_size(env);
	}
	total = add_sat(BWP_HEADER_SIZE, body);
	*out_len = total;
	if (body > body_limit(max_frame))
		return BWP_ETOOBIG;
	if (total > cap)
		return BWP_ENOSPC;
	if (sub != SLOW)
		fast_body_write(env, put_envelope(buf, body,
						  env->has_request_id,
						  env->request_id,
						  (unsigned)env->body_case, sub));
	else {
		put_header(buf, body);
		bitwheel__v1__envelope__pack(env, buf + BWP_HEADER_SIZE);
	}
	return BWP_OK;
}

/*
 * A response whose body message cannot reach 128 bytes has a one-byte
 * length, known before it is written, so it is written in one pass
 * without sizing it first: every field at its longest (eleven bytes with
 * its tag; a Fired's nine add up to 81) and a payload under 28 bytes with
 * its two bytes of tag and length.  Its frame, the envelope's request_id
 * and the body's tag and length included, is at most this many bytes; the
 * exact size comes from where the writing ended.
 */
#define ONE_PASS_PAYLOAD 28u
#define ONE_PASS_FRAME (BWP_HEADER_SIZE + 11u + 2u + 127u)

static bool one_of_four(Bitwheel__V1__Envelope__BodyCase body)
{
	switch (body) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
	case BITWHEEL__V1__ENVELOPE__BODY_FIRED:
		return true;
	default:
		return false;
	}
}

int bwp_frame_pack_response(const struct bwp_response *r, size_t max_frame,
			    uint8_t *buf, size_t cap, size_t *out_len)
{
	size_t sub, body, total, dead = 0;
	uint8_t *p, *end;

	if (r == NULL || out_len == NULL || (buf == NULL && cap > 0))
		return BWP_EINVAL;
	if (one_of_four(r->body_case) &&
	    !r->dead_letter && r->payload_len < ONE_PASS_PAYLOAD &&
	    cap >= ONE_PASS_FRAME &&
	    body_limit(max_frame) >= ONE_PASS_FRAME - BWP_HEADER_SIZE) {
		p = put_u64(buf + BWP_HEADER_SIZE, 1, r->has_request_id,
			    r->request_id);
		*p = TAG((unsigned)r->body_case, WT_LEN);
		end = response_body_write(r, 0, p + 2);
		p[1] = (uint8_t)(end - (p + 2));
		body = (size_t)(end - buf) - BWP_HEADER_SIZE;
		put_header(buf, body);
		*out_len = body + BWP_HEADER_SIZE;
		return BWP_OK;
	}
	sub = response_body_size(r, &dead);
	if (sub == SLOW)
		return BWP_ENOBODY;
	body = envelope_size(r->has_request_id, r->request_id, sub);
	total = add_sat(BWP_HEADER_SIZE, body);
	*out_len = total;
	if (body > body_limit(max_frame))
		return BWP_ETOOBIG;
	if (total > cap)
		return BWP_ENOSPC;
	response_body_write(r, dead,
			    put_envelope(buf, body, r->has_request_id,
					 r->request_id, (unsigned)r->body_case,
					 sub));
	return BWP_OK;
}

/* The header's verdict: BWP_OK when the whole frame is in buf. */
static int parse_header(const uint8_t *buf, size_t len, size_t max_frame,
			size_t *frame_len)
{
	size_t body;

	if (len < BWP_HEADER_SIZE) {
		*frame_len = BWP_HEADER_SIZE;
		return BWP_EMORE;
	}
	body = (size_t)buf[0] << 24 | (size_t)buf[1] << 16 |
	       (size_t)buf[2] << 8 | (size_t)buf[3];
	*frame_len = add_sat(BWP_HEADER_SIZE, body);
	if (body == 0)
		return BWP_EZERO;
	if (body > body_limit(max_frame))
		return BWP_ETOOBIG;
	if (len < *frame_len)
		return BWP_EMORE;
	return BWP_OK;
}

static int check_ranges(const ProtobufCMessageDescriptor *desc,
			const uint8_t *p, const uint8_t *end);

static int unpack_body(const uint8_t *body, size_t len,
		       Bitwheel__V1__Envelope **out)
{
	Bitwheel__V1__Envelope *env;
	int rc;

	/* protobuf-c returns NULL for malformed input and for a failed
	 * malloc alike; bodies are bounded by max_frame, so take it as the
	 * former. */
	env = bitwheel__v1__envelope__unpack(NULL, len, body);
	if (env == NULL)
		return BWP_EDECODE;
	rc = body_present(env) ? check_ranges(&bitwheel__v1__envelope__descriptor,
					      body, body + len)
			       : BWP_ENOBODY;
	if (rc != BWP_OK) {
		bwp_frame_free(env);
		return rc;
	}
	*out = env;
	return BWP_OK;
}

/*
 * A fast reader: the envelope body [p, end) read into caller storage, or
 * false when it is not the plain encoding of a body the reader knows, and
 * protobuf-c must decide (out is then scratch).
 */
typedef bool fast_reader(const uint8_t *p, const uint8_t *end, void *out);

/* Every bwp_frame_parse*(): the header, then read (unless NULL) or, when
 * it declines, protobuf-c. */
static int parse_frame(const uint8_t *buf, size_t len, size_t max_frame,
		       size_t max_slow, fast_reader *read, void *fast,
		       Bitwheel__V1__Envelope **out, size_t *frame_len)
{
	int rc;

	if ((read != NULL && fast == NULL) || out == NULL ||
	    frame_len == NULL || (buf == NULL && len > 0))
		return BWP_EINVAL;
	*out = NULL;
	rc = parse_header(buf, len, max_frame, frame_len);
	if (rc != BWP_OK)
		return rc;
	if (read != NULL && read(buf + BWP_HEADER_SIZE, buf + *frame_len, fast))
		return BWP_OK;
	if (*frame_len - BWP_HEADER_SIZE > max_slow)
		return BWP_ESLOW;
	return unpack_body(buf + BWP_HEADER_SIZE, *frame_len - BWP_HEADER_SIZE,
			   out);
}

int bwp_frame_parse(const uint8_t *buf, size_t len, size_t max_frame,
		    Bitwheel__V1__Envelope **out, size_t *frame_len)
{
	return parse_frame(buf, len, max_frame, SIZE_MAX, NULL, NULL, out, frame_len);
}

/* ---- fast reading -------------------------------------------------------- */

/*
 * The continuation bits of a varint's first i bytes where they land when
 * each byte is added whole at 7 * its index (get_varint): the sum of
 * 0x80 << 7j for j < i.
 */
static const uint64_t varint_cont[10] = {
	0x0, 0x80, 0x4080, 0x204080, 0x10204080, 0x810204080,
	0x40810204080, 0x2040810204080, 0x102040810204080,
	0x8102040810204080,
};

/*
 * A varint at p of at most ten bytes and 64 bits.  NULL when it does not
 * end inside [p, end), where protobuf-c fails too (the fallback says so),
 * or has bits past 64, which protobuf-c drops but check_ranges refuses.
 * Each byte is added whole, its continuation bit with it, at a constant
 * shift (the loop is unrolled): a bounds test, a load, a shift, an add
 * and a compare a byte, where masking and a variable shift took half as
 * much again; the exit that finds the last byte takes the earlier bytes'
 * continuation bits back off at once (varint_cont, modulo 2^64, so the
 * ninth's bit 63 too).
 */
static inline const uint8_t *get_varint(const uint8_t *p, const uint8_t *end,
					uint64_t *out)
{
	size_t n = (size_t)(end - p);
	uint64_t v = 0;

	if (n && *p < 0x80) {
		*out = *p;
		return p + 1;
	}
#pragma GCC unroll 10
	for (unsigned i = 0; i < 10; i++) {
		uint64_t b;

		if (i == n)
			return NULL;
		b = p[i];
		v += b << (7 * i);
		if (b < 0x80) {
			/* The tenth byte holds bit 63 alone. */
			if (i == 9 && b > 1)
				return NULL;
			*out = v - varint_cont[i];
			return p + i + 1;
		}
	}
	return NULL;
}

/*
 * A length prefix and the bytes it announces, as protobuf-c scans them: at
 * most five bytes of prefix, at most INT_MAX, inside [p, end).  NULL
 * otherwise.
 */
static inline const uint8_t *get_len(const uint8_t *p, const uint8_t *end,
				     size_t *out)
{
	size_t v = 0;
	unsigned i;

	for (i = 0; i < 5 && p < end; i++) {
		uint8_t b = *p++;

		v |= (size_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			if (v > INT_MAX || v > (size_t)(end - p))
				return NULL;
			*out = v;
			return p;
		}
	}
	return NULL;
}

/* protobuf-c reads any nonzero varint as true; 0 and 1 are the plain
 * spellings, and the only ones taken here. */
static inline const uint8_t *get_bool(const uint8_t *p, const uint8_t *end,
				      bool *out)
{
	if (p == end || *p > 1)
		return NULL;
	*out = *p;
	return p + 1;
}

/* ---- field ranges -------------------------------------------------------- */

/*
 * A tag at p exactly as protobuf-c reads one (parse_tag_and_wiretype): at
 * most five bytes, the field number kept to 32 bits, so that the field
 * checked is the one protobuf-c filled.  NULL when protobuf-c would fail.
 */
static const uint8_t *get_tag(const uint8_t *p, const uint8_t *end,
			      uint32_t *field, unsigned *wire_type)
{
	uint32_t id = (uint32_t)(p[0] & 0x7f) >> 3;
	unsigned shift = 4;

	if ((p[0] & 0xf8) == 0)
		return NULL;
	*wire_type = p[0] & 7;
	if (p[0] & 0x80) {
		const uint8_t *q = p + 1, *stop = end - p > 5 ? p + 5 : end;

		for (;; q++, shift += 7) {
			if (q == stop)
				return NULL;
			id |= (uint32_t)(*q & 0x7f) << shift;
			if (!(*q & 0x80))
				break;
		}
		p = q;
	}
	*field = id;
	return p + 1;
}

/* Whether v (a varint of at most 64 bits) is a value of type t. */
static bool varint_fits(ProtobufCType t, uint64_t v)
{
	switch (t) {
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_SINT32:        /* zigzag: 32 bits on the wire */
		return v <= UINT32_MAX;
	case PROTOBUF_C_TYPE_INT32:         /* negative: sign-extended      */
	case PROTOBUF_C_TYPE_ENUM:
		return (int64_t)v >= INT32_MIN && (int64_t)v <= INT32_MAX;
	default:                            /* the 64-bit ones, and bool    */
		return true;
	}
}

static bool varint_type(ProtobufCType t)
{
	return t == PROTOBUF_C_TYPE_INT32 || t == PROTOBUF_C_TYPE_SINT32 ||
	       t == PROTOBUF_C_TYPE_UINT32 || t == PROTOBUF_C_TYPE_INT64 ||
	       t == PROTOBUF_C_TYPE_SINT64 || t == PROTOBUF_C_TYPE_UINT64 ||
	       t == PROTOBUF_C_TYPE_BOOL || t == PROTOBUF_C_TYPE_ENUM;
}

/*
 * The message [p, end) of type desc, which protobuf-c has decoded (so its
 * tags, lengths and wire types are sound): BWP_ERANGE at the first varint
 * of a known field, alone or in a packed array, that the field's type
 * cannot hold (get_varint refuses those past 64 bits), or BWP_OK.
 * Recursion follows the schema's nesting; each byte is read once.
 */
static int check_ranges(const ProtobufCMessageDescriptor *desc,
			const uint8_t *p, const uint8_t *end)
{
	while (p < end) {
		const ProtobufCFieldDescriptor *f;
		uint32_t id;
		unsigned wt;
		uint64_t v;
		size_t n;
		int rc;

		if (!(p = get_tag(p, end, &id, &wt)))
			return BWP_EDECODE;
		f = protobuf_c_message_descriptor_get_field(desc, id);
		switch (wt) {
		case WT_VARINT:
			if (!f) {
				while (p < end && *p++ & 0x80)
					;
			} else if (!(p = get_varint(p, end, &v)) ||
				   !varint_fits(f->type, v)) {
				return BWP_ERANGE;
			}
			break;
		case WT_LEN:
			if (!(p = get_len(p, end, &n)))
				return BWP_EDECODE;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				rc = check_ranges(f->descriptor, p, p + n);
				if (rc != BWP_OK)
					return rc;
			} else if (f && f->label == PROTOBUF_C_LABEL_REPEATED &&
				   varint_type(f->type)) {
				for (const uint8_t *q = p; q < p + n;)
					if (!(q = get_varint(q, p + n, &v)) ||
					    !varint_fits(f->type, v))
						return BWP_ERANGE;
			}
			p += n;
			break;
		case WT_I64:
		case WT_I32:
			n = wt == WT_I64 ? 8 : 4;
			if ((size_t)(end - p) < n)
				return BWP_EDECODE;
			p += n;
			break;
		default:
			return BWP_EDECODE;
		}
	}
	return BWP_OK;
}

/* Each field at most once; repeats merge or override in protobuf-c. */
#define ONCE(seen, bit) do {                          \
		if ((seen) & (1u << (bit)))           \
			return false;                 \
		(seen) |= 1u << (bit);                \
	} while (0)

static bool fast_schedule(const uint8_t *p, const uint8_t *end,
			  struct bwp_request *r)
{
	unsigned seen = 0;

	while (p < end) {
		switch (*p++) {
		case TAG(1, WT_VARINT):
			ONCE(seen, 1);
			p = get_varint(p, end, &r->key);
			r->has_key = true;
			break;
		case TAG(2, WT_VARINT):
		case TAG(3, WT_VARINT):
		case TAG(8, WT_VARINT):
			/* Two would leave the last one set: not plain. */
			ONCE(seen, 2);
			r->when_case = (Bitwheel__V1__Schedule__WhenCase)(p[-1] >> 3);
			p = get_varint(p, end, &r->when_ns);
			break;
		case TAG(4, WT_VARINT):
			ONCE(seen, 4);
			p = get_varint(p, end, &r->period_ns);
			r->has_period_ns = true;
			break;
		case TAG(5, WT_LEN):
			ONCE(seen, 5);
			p = get_len(p, end, &r->payload_len);
			if (!p)
				return false;
			r->has_payload = true;
			r->payload = r->payload_len ? p : NULL;
			p += r->payload_len;
			break;
		case TAG(6, WT_VARINT):
			ONCE(seen, 6);
			p = get_bool(p, end, &r->replace);
			r->has_replace = true;
			break;
		case TAG(7, WT_VARINT):
			ONCE(seen, 7);
			p = get_varint(p, end, &r->leeway_ns);
			r->has_leeway_ns = true;
			break;
		case TAG(13, WT_VARINT): {
			uint64_t v = 0;

			ONCE(seen, 13);
			p = get_varint(p, end, &v);
			/* Another value: protobuf-c's to read or refuse. */
			if (p && v > BITWHEEL__V1__CLOCK__CLOCK_BOOTTIME)
				return false;
			r->has_clock = true;
			r->clock = (Bitwheel__V1__Clock)v;
			break;
		}
		default:
			return false;
		}
		if (!p)
			return false;
	}
	return true;
}

static bool fast_cancel(const uint8_t *p, const uint8_t *end,
			struct bwp_request *r)
{
	bool seen = false;

	while (p < end) {
		if (*p++ != TAG(1, WT_VARINT) || seen)
			return false;
		seen = true;
		p = get_varint(p, end, &r->key);
		if (!p)
			return false;
		r->has_key = true;
	}
	return true;
}

static bool fast_ack(const uint8_t *p, const uint8_t *end,
		     struct bwp_request *r)
{
	unsigned seen = 0;

	while (p < end) {
		switch (*p++) {
		case TAG(1, WT_VARINT):
			ONCE(seen, 1);
			p = get_varint(p, end, &r->delivery);
			r->has_delivery = true;
			break;
		case TAG(2, WT_VARINT):
			ONCE(seen, 2);
			p = get_bool(p, end, &r->cumulative);
			r->has_cumulative = true;
			break;
		default:
			return false;
		}
		if (!p)
			return false;
	}
	return true;
}

static bool fast_schedule_reply(const uint8_t *p, const uint8_t *end,
				struct bwp_response *r)
{
	unsigned seen = 0;

	while (p < end) {
		switch (*p++) {
		case TAG(1, WT_VARINT):
			ONCE(seen, 1);
			p = get_varint(p, end, &r->deadline_ns);
			r->has_deadline_ns = true;
			break;
		case TAG(2, WT_VARINT):
			ONCE(seen, 2);
			p = get_bool(p, end, &r->replaced);
			r->has_replaced = true;
			break;
		default:
			return false;
		}
		if (!p)
			return false;
	}
	return true;
}

static bool fast_cancel_reply(const uint8_t *p, const uint8_t *end,
			      struct bwp_response *r)
{
	bool seen = false;

	while (p < end) {
		if (*p++ != TAG(1, WT_VARINT) || seen)
			return false;
		seen = true;
		p = get_bool(p, end, &r->pending);
		if (!p)
			return false;
		r->has_pending = true;
	}
	return true;
}

static bool fast_ack_reply(const uint8_t *p, const uint8_t *end,
			   struct bwp_response *r)
{
	bool seen = false;

	while (p < end) {
		if (*p++ != TAG(1, WT_VARINT) || seen)
			return false;
		seen = true;
		p = get_varint(p, end, &r->acked);
		if (!p)
			return false;
		r->has_acked = true;
	}
	return true;
}

static bool fast_fired(const uint8_t *p, const uint8_t *end,
		       struct bwp_response *r)
{
	unsigned seen = 0;

	while (p < end) {
		switch (*p++) {
		case TAG(1, WT_VARINT):
			ONCE(seen, 1);
			p = get_varint(p, end, &r->key);
			r->has_key = true;
			break;
		case TAG(2, WT_LEN):
			ONCE(seen, 2);
			p = get_len(p, end, &r->payload_len);
			if (!p)
				return false;
			r->has_payload = true;
			r->payload = r->payload_len ? p : NULL;
			p += r->payload_len;
			break;
		case TAG(3, WT_VARINT):
			ONCE(seen, 3);
			p = get_varint(p, end, &r->deadline_ns);
			r->has_deadline_ns = true;
			break;
		case TAG(4, WT_VARINT):
			ONCE(seen, 4);
			p = get_varint(p, end, &r->fired_at_ns);
			r->has_fired_at_ns = true;
			break;
		case TAG(5, WT_VARINT):
			ONCE(seen, 5);
			p = get_varint(p, end, &r->fire_count);
			r->has_fire_count = true;
			break;
		case TAG(6, WT_VARINT):
			ONCE(seen, 6);
			p = get_bool(p, end, &r->late);
			r->has_late = true;
			break;
		case TAG(7, WT_VARINT):
			ONCE(seen, 7);
			p = get_bool(p, end, &r->redelivered);
			r->has_redelivered = true;
			break;
		case TAG(8, WT_VARINT):
			ONCE(seen, 8);
			p = get_varint(p, end, &r->delivery);
			r->has_delivery = true;
			break;
		case TAG(9, WT_VARINT):
			ONCE(seen, 9);
			p = get_varint(p, end, &r->deliveries);
			r->has_deliveries = true;
			break;
		case TAG(11, WT_VARINT):
			ONCE(seen, 11);
			p = get_varint(p, end, &r->due_realtime_ns);
			r->has_due_realtime_ns = true;
			break;
		default:
			return false;
		}
		if (!p)
			return false;
	}
	return true;
}

/* An envelope around a body a fast reader knows, its bytes not yet read. */
struct fast_envelope {
	Bitwheel__V1__Envelope__BodyCase body_case;
	bool has_request_id;
	uint64_t request_id;
	const uint8_t *body, *body_end;
};

/*
 * Whether [p, end) is a plain envelope: at most one request_id and exactly
 * one body, whose case is among bodies (a mask of 1 << case), read into e.
 * Every body member is a message, so its tag says length-delimited.
 */
static bool fast_envelope(const uint8_t *p, const uint8_t *end,
			  uint32_t bodies, struct fast_envelope *e)
{
	unsigned seen = 0;
	size_t n;

	e->has_request_id = false;
	e->request_id = 0;
	while (p < end) {
		uint8_t tag = *p++;

		if (tag == TAG(1, WT_VARINT)) {
			ONCE(seen, 1);
			p = get_varint(p, end, &e->request_id);
			if (!p)
				return false;
			e->has_request_id = true;
		} else if ((tag & 7) == WT_LEN && (bodies >> (tag >> 3) & 1)) {
			/* A second body replaces or merges with the first.
			 * A tag byte with its top bit set (an over-long or
			 * two-byte tag) names no body in the mask. */
			ONCE(seen, 2);
			e->body_case = (Bitwheel__V1__Envelope__BodyCase)(tag >> 3);
			e->body = get_len(p, end, &n);
			if (!e->body)
				return false;
			p = e->body_end = e->body + n;
		} else {
			return false;
		}
	}
	return seen & 1u << 2;
}

#define BODY_BIT(c) (1u << BITWHEEL__V1__ENVELOPE__BODY_##c)

/* A fast_reader: a plain Schedule, Cancel or Ack envelope into a
 * bwp_request. */
static bool fast_request(const uint8_t *p, const uint8_t *end, void *out)
{
	struct bwp_request *r = out;
	struct fast_envelope e;

	if (!fast_envelope(p, end, BODY_BIT(SCHEDULE) | BODY_BIT(CANCEL) |
			   BODY_BIT(ACK), &e))
		return false;
	*r = (struct bwp_request){
		.body_case = e.body_case,
		.has_request_id = e.has_request_id,
		.request_id = e.request_id,
		.when_case = BITWHEEL__V1__SCHEDULE__WHEN__NOT_SET,
	};
	switch (e.body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE:
		return fast_schedule(e.body, e.body_end, r);
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL:
		return fast_cancel(e.body, e.body_end, r);
	default:
		return fast_ack(e.body, e.body_end, r);
	}
}

/* A fast_reader: a plain ScheduleReply, CancelReply, AckReply or Fired
 * envelope into a bwp_response. */
static bool fast_response(const uint8_t *p, const uint8_t *end, void *out)
{
	struct bwp_response *r = out;
	struct fast_envelope e;

	if (!fast_envelope(p, end, BODY_BIT(SCHEDULE_REPLY) |
			   BODY_BIT(CANCEL_REPLY) | BODY_BIT(ACK_REPLY) |
			   BODY_BIT(FIRED), &e))
		return false;
	*r = (struct bwp_response){
		.body_case = e.body_case,
		.has_request_id = e.has_request_id,
		.request_id = e.request_id,
	};
	switch (e.body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY:
		return fast_schedule_reply(e.body, e.body_end, r);
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
		return fast_cancel_reply(e.body, e.body_end, r);
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
		return fast_ack_reply(e.body, e.body_end, r);
	default:
		return fast_fired(e.body, e.body_end, r);
	}
}

int bwp_frame_parse_request(const uint8_t *buf, size_t len, size_t max_frame,
			    struct bwp_request *req,
			    Bitwheel__V1__Envelope **out, size_t *frame_len)
{
	return parse_frame(buf, len, max_frame, SIZE_MAX, fast_request, req, out,
			   frame_len);
}

int bwp_frame_parse_request_bounded(const uint8_t *buf, size_t len,
				    size_t max_frame, size_t max_slow,
				    struct bwp_request *req,
				    Bitwheel__V1__Envelope **out,
				    size_t *frame_len)
{
	return parse_frame(buf, len, max_frame, max_slow, fast_request, req, out,
			   frame_len);
}

int bwp_frame_parse_response(const uint8_t *buf, size_t len,
			     size_t max_frame, struct bwp_response *resp,
			     Bitwheel__V1__Envelope **out, size_t *frame_len)
{
	return parse_frame(buf, len, max_frame, SIZE_MAX, fast_response, resp, out,
			   frame_len);
}

bool bwp_request_from_envelope(const Bitwheel__V1__Envelope *env,
			       struct bwp_request *r)
{
	*r = (struct bwp_request){
		.body_case = env->body_case,
		.has_request_id = env->has_request_id,
		.request_id = env->request_id,
		.when_case = BITWHEEL__V1__SCHEDULE__WHEN__NOT_SET,
	};
	switch (env->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE: {
		const Bitwheel__V1__Schedule *m = env->schedule;

		r->has_key = m->has_key;
		r->key = m->key;
		r->when_case = m->when_case;
		if (m->when_case == BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR)
			r->calendar = m->calendar;
		else if (m->when_case != BITWHEEL__V1__SCHEDULE__WHEN__NOT_SET)
			r->when_ns = m->delay_ns; /* the union's one value */
		r->has_jitter_ns = m->has_jitter_ns;
		r->jitter_ns = m->jitter_ns;
		r->has_jitter_fixed = m->has_jitter_fixed;
		r->jitter_fixed = m->jitter_fixed;
		r->has_misfire_grace_ns = m->has_misfire_grace_ns;
		r->misfire_grace_ns = m->misfire_grace_ns;
		r->has_period_ns = m->has_period_ns;
		r->period_ns = m->period_ns;
		r->has_payload = m->has_payload;
		r->payload_len = m->payload.len;
		r->payload = m->payload.data;
		r->has_replace = m->has_replace;
		r->replace = m->replace;
		r->has_leeway_ns = m->has_leeway_ns;
		r->leeway_ns = m->leeway_ns;
		r->has_clock = m->has_clock;
		r->clock = m->clock;
		return true;
	}
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL:
		r->has_key = env->cancel->has_key;
		r->key = env->cancel->key;
		return true;
	case BITWHEEL__V1__ENVELOPE__BODY_ACK:
		r->has_delivery = env->ack->has_delivery;
		r->delivery = env->ack->delivery;
		r->has_cumulative = env->ack->has_cumulative;
		r->cumulative = env->ack->cumulative;
		return true;
	default:
		return false;
	}
}

bool bwp_response_from_envelope(const Bitwheel__V1__Envelope *env,
				struct bwp_response *r)
{
	*r = (struct bwp_response){
		.body_case = env->body_case,
		.has_request_id = env->has_request_id,
		.request_id = env->request_id,
	};
	switch (env->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY: {
		const Bitwheel__V1__ScheduleReply *m = env->schedule_reply;

		r->has_deadline_ns = m->has_deadline_ns;
		r->deadline_ns = m->deadline_ns;
		r->has_replaced = m->has_replaced;
		r->replaced = m->replaced;
		return true;
	}
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
		r->has_pending = env->cancel_reply->has_pending;
		r->pending = env->cancel_reply->pending;
		return true;
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
		r->has_acked = env->ack_reply->has_acked;
		r->acked = env->ack_reply->acked;
		return true;
	case BITWHEEL__V1__ENVELOPE__BODY_FIRED: {
		const Bitwheel__V1__Fired *m = env->fired;

		r->has_key = m->has_key;
		r->key = m->key;
		r->has_payload = m->has_payload;
		r->payload_len = m->payload.len;
		r->payload = m->payload.data;
		r->has_deadline_ns = m->has_deadline_ns;
		r->deadline_ns = m->deadline_ns;
		r->has_fired_at_ns = m->has_fired_at_ns;
		r->fired_at_ns = m->fired_at_ns;
		r->has_fire_count = m->has_fire_count;
		r->fire_count = m->fire_count;
		r->has_late = m->has_late;
		r->late = m->late;
		r->has_redelivered = m->has_redelivered;
		r->redelivered = m->redelivered;
		r->has_delivery = m->has_delivery;
		r->delivery = m->delivery;
		r->has_deliveries = m->has_deliveries;
		r->deliveries = m->deliveries;
		r->has_due_realtime_ns = m->has_due_realtime_ns;
		r->due_realtime_ns = m->due_realtime_ns;
		r->dead_letter = m->dead_letter;
		return true;
	}
	default:
		return false;
	}
}

void bwp_frame_free(Bitwheel__V1__Envelope *env)
{
	if (env != NULL)
		bitwheel__v1__envelope__free_unpacked(env, NULL);
}

void bwp_reply_init(Bitwheel__V1__Envelope *env,
		    const Bitwheel__V1__Envelope *req)
{
	bitwheel__v1__envelope__init(env);
	if (req != NULL && req->has_request_id) {
		env->has_request_id = 1;
		env->request_id = req->request_id;
	}
}

void bwp_error_init(Bitwheel__V1__Envelope *env, Bitwheel__V1__Error *err,
		    const Bitwheel__V1__Envelope *req,
		    Bitwheel__V1__ErrorCode code, const char *message)
{
	bitwheel__v1__error__init(err);
	err->has_code = 1;
	err->code = code;
	/* protobuf-c's string fields are char *, but packing only reads. */
	err->message = (char *)message;

	bwp_reply_init(env, req);
	env->body_case = BITWHEEL__V1__ENVELOPE__BODY_ERROR;
	env->error = err;
}

bool bwp_session_name_valid(const void *name, size_t len)
{
	const unsigned char *p = name;

	if (name == NULL || len == 0 || len > BWP_SESSION_NAME_MAX)
		return false;
	/* Spelled out rather than isalnum(), whose answer depends on the
	 * locale: the daemon and every client must agree byte for byte.
	 * memchr, not strchr, which would find a NUL in its own terminator. */
	for (size_t n = 0; n < len; n++) {
		unsigned char c = p[n];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || (c && memchr("_.:@-", c, 5))))
			return false;
	}
	return true;
}
