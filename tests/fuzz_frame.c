/*
 * fuzz_frame.c - libFuzzer target for the wire framing (proto/frame.h).
 *
 * The first input byte picks max_frame; the rest is read as one byte
 * stream, frame by frame, with bwp_frame_parse(), the way the daemon and
 * the client consume a connection (a bad frame is skipped here instead of
 * closing).  Trapping on any inconsistency:
 *   - every result is a documented one, with the documented frame_len
 *     (BWP_EMORE asks for more than is there: the header, then the whole
 *     frame; BWP_ETOOBIG only beyond max_frame; 0 and the decode errors
 *     name a frame inside the buffer), and *out is set only on success;
 *   - a frame that parses also reports BWP_EMORE on every shorter prefix;
 *   - each parsed envelope packs again: bwp_frame_packed_size() agrees
 *     with bwp_frame_pack(), a buffer one byte short gives BWP_ENOSPC with
 *     the needed size, and the packed frame parses back (or, per frame.h's
 *     caveat about re-packed unknown fields, fails to decode) with the same
 *     body case and request id, and packs again to the same bytes;
 *   - an error reply built with bwp_error_init() for the envelope round
 *     trips with the request id copied;
 *   - a Hello's session name gets bwp_session_name_valid()'s documented
 *     verdict;
 *   - bwp_frame_parse_request() and bwp_frame_parse_response(), the
 *     daemon's and the client's fast paths (Schedule, Cancel, Ack;
 *     ScheduleReply, CancelReply, AckReply, Fired), agree with protobuf-c
 *     on every frame: the same result and frame length; when one reads the
 *     frame itself (at most one does), protobuf-c accepted it too and
 *     decoded the same fields (payload bytes included, pointing into the
 *     frame), another body's fields staying absent, and so do the
 *     conversions of protobuf-c's envelope; when it falls back, the
 *     envelope is protobuf-c's;
 *   - frame.c's own writers (the same hot messages) give protobuf-c's
 *     bytes for every envelope that decodes to one of them.
 * Memory errors and leaks are the sanitizers' (bwp_frame_free() after
 * each envelope).  Built by `make fuzz` (tests/fuzz.mk).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "fuzz.h"

/* How many frames one input may carry, so each input stays fast. */
#define MAX_FRAMES 1024

static const size_t max_frames[8] = {
	1, 8, 32, 128, 512, 4096, BWP_DEFAULT_MAX_FRAME, SIZE_MAX,
};

static bool session_ok(const uint8_t *s, size_t n)
{
	if (n < 1 || n > BWP_SESSION_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = (char)s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || (c && strchr("_.:@-", c))))
			return false;
	}
	return true;
}

/* Pack env with the given limit; 0 and a malloc'd frame, or the error. */
static int pack_fresh(const Bitwheel__V1__Envelope *env, size_t max_frame,
		      uint8_t **out, size_t *len)
{
	size_t size = bwp_frame_packed_size(env), got = 0;
	uint8_t *buf;
	int rc;

	*out = NULL;
	REQUIRE(size > BWP_HEADER_SIZE);
	/* One byte short: the size comes back with ENOSPC (or ETOOBIG). */
	buf = malloc(size);
	REQUIRE(buf);
	rc = bwp_frame_pack(env, max_frame, buf, size - 1, &got);
	REQUIRE(rc == BWP_ENOSPC || rc == BWP_ETOOBIG);
	REQUIRE(got == size);
	rc = bwp_frame_pack(env, max_frame, buf, size, &got);
	if (rc == BWP_ETOOBIG) {
		REQUIRE(got == size && size - BWP_HEADER_SIZE > max_frame);
		free(buf);
		return rc;
	}
	REQUIRE(rc == 0);
	REQUIRE(got == size);
	REQUIRE(size - BWP_HEADER_SIZE <= max_frame);
	REQUIRE(((size_t)buf[0] << 24 | (size_t)buf[1] << 16 |
		 (size_t)buf[2] << 8 | buf[3]) == size - BWP_HEADER_SIZE);
	*out = buf;
	*len = size;
	return 0;
}

static void check_error_reply(const Bitwheel__V1__Envelope *req,
			      size_t max_frame)
{
	Bitwheel__V1__Envelope env, *back = NULL;
	Bitwheel__V1__Error err;
	uint8_t *buf;
	size_t len, fl;

	bwp_error_init(&env, &err, req, BITWHEEL__V1__ERROR_CODE__BAD_REQUEST,
		       "fuzz");
	REQUIRE(env.body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR);
	REQUIRE(env.has_request_id == req->has_request_id);
	if (pack_fresh(&env, max_frame, &buf, &len) != 0)
		return;
	REQUIRE(bwp_frame_parse(buf, len, max_frame, &back, &fl) == 0);
	REQUIRE(fl == len && back);
	REQUIRE(back->body_case == BITWHEEL__V1__ENVELOPE__BODY_ERROR);
	REQUIRE(back->has_request_id == req->has_request_id);
	if (req->has_request_id)
		REQUIRE(back->request_id == req->request_id);
	REQUIRE(back->error->has_code &&
		back->error->code == BITWHEEL__V1__ERROR_CODE__BAD_REQUEST);
	REQUIRE(back->error->message &&
		strcmp(back->error->message, "fuzz") == 0);
	bwp_frame_free(back);
	free(buf);
}

/* bwp_frame_pack() writes env's body as protobuf-c does, header aside. */
static void check_same_bytes(const Bitwheel__V1__Envelope *env)
{
	size_t body = bitwheel__v1__envelope__get_packed_size(env), got = 0;
	uint8_t *ref = malloc(body), *buf = malloc(BWP_HEADER_SIZE + body);

	REQUIRE(ref && buf);
	REQUIRE(bitwheel__v1__envelope__pack(env, ref) == body);
	REQUIRE(bwp_frame_packed_size(env) == BWP_HEADER_SIZE + body);
	REQUIRE(bwp_frame_pack(env, SIZE_MAX, buf, BWP_HEADER_SIZE + body,
			       &got) == 0);
	REQUIRE(got == BWP_HEADER_SIZE + body);
	REQUIRE(memcmp(buf + BWP_HEADER_SIZE, ref, body) == 0);
	free(buf);
	free(ref);
}

static void check_envelope(const Bitwheel__V1__Envelope *env,
			   size_t max_frame)
{
	Bitwheel__V1__Envelope *back = NULL, *again = NULL;
	uint8_t *buf, *buf2;
	size_t len, len2, fl;
	int rc;

	REQUIRE(env->body_case != BITWHEEL__V1__ENVELOPE__BODY__NOT_SET);
	REQUIRE(env->hello != NULL); /* any member of the body union */
	if (env->body_case == BITWHEEL__V1__ENVELOPE__BODY_HELLO &&
	    env->hello->has_session)
		REQUIRE(bwp_session_name_valid(env->hello->session.data,
					       env->hello->session.len) ==
			session_ok(env->hello->session.data,
				   env->hello->session.len));
	check_same_bytes(env);

	if (pack_fresh(env, max_frame, &buf, &len) == 0) {
		rc = bwp_frame_parse(buf, len, max_frame, &back, &fl);
		/* frame.h: re-packed unknown fields may not read back. */
		REQUIRE(rc == 0 || rc == BWP_EDECODE);
		REQUIRE(fl == len);
		if (rc == 0) {
			REQUIRE(back->body_case == env->body_case);
			REQUIRE(back->has_request_id == env->has_request_id);
			if (env->has_request_id)
				REQUIRE(back->request_id == env->request_id);
			/* Packing what came back gives the same bytes. */
			REQUIRE(pack_fresh(back, max_frame, &buf2, &len2) == 0);
			REQUIRE(len2 == len && memcmp(buf, buf2, len) == 0);
			REQUIRE(bwp_frame_parse(buf2, len2, max_frame, &again,
						&fl) == 0);
			REQUIRE(again->body_case == env->body_case);
			bwp_frame_free(again);
			free(buf2);
			bwp_frame_free(back);
		} else {
			REQUIRE(back == NULL);
		}
		free(buf);
	}
	check_error_reply(env, max_frame);
}

/* The fast path's r says field for field what protobuf-c decoded into e. */
static void same_request(const struct bwp_request *r,
			 const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__Schedule *sc = e->schedule;

	REQUIRE(r->body_case == e->body_case);
	REQUIRE(r->has_request_id == !!e->has_request_id);
	REQUIRE(!e->has_request_id || r->request_id == e->request_id);
	if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_CANCEL) {
		REQUIRE(r->has_key == !!e->cancel->has_key);
		REQUIRE(!e->cancel->has_key || r->key == e->cancel->key);
		REQUIRE(!r->has_delivery && !r->has_cumulative);
		return;
	}
	if (e->body_case == BITWHEEL__V1__ENVELOPE__BODY_ACK) {
		const Bitwheel__V1__Ack *a = e->ack;

		REQUIRE(r->has_delivery == !!a->has_delivery);
		REQUIRE(!a->has_delivery || r->delivery == a->delivery);
		REQUIRE(r->has_cumulative == !!a->has_cumulative);
		REQUIRE(!a->has_cumulative || r->cumulative == !!a->cumulative);
		REQUIRE(!r->has_key && !r->has_payload && !r->has_period_ns);
		REQUIRE(r->when_case == BITWHEEL__V1__SCHEDULE__WHEN__NOT_SET);
		return;
	}
	REQUIRE(e->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE);
	REQUIRE(!r->has_delivery && !r->has_cumulative);
	REQUIRE(r->has_key == !!sc->has_key);
	REQUIRE(!sc->has_key || r->key == sc->key);
	REQUIRE(r->when_case == sc->when_case);
	REQUIRE(sc->when_case != BITWHEEL__V1__SCHEDULE__WHEN_DELAY_NS ||
		r->when_ns == sc->delay_ns);
	REQUIRE(sc->when_case != BITWHEEL__V1__SCHEDULE__WHEN_DEADLINE_NS ||
		r->when_ns == sc->deadline_ns);
	REQUIRE(sc->when_case != BITWHEEL__V1__SCHEDULE__WHEN_REALTIME_NS ||
		r->when_ns == sc->realtime_ns);
	/* A calendar timer's fields, which protobuf-c alone reads. */
	REQUIRE(sc->when_case == BITWHEEL__V1__SCHEDULE__WHEN_CALENDAR ?
		r->calendar == sc->calendar && r->when_ns == 0 :
		r->calendar == NULL);
	REQUIRE(r->has_jitter_ns == !!sc->has_jitter_ns);
	REQUIRE(!sc->has_jitter_ns || r->jitter_ns == sc->jitter_ns);
	REQUIRE(r->has_jitter_fixed == !!sc->has_jitter_fixed);
	REQUIRE(!sc->has_jitter_fixed || r->jitter_fixed == !!sc->jitter_fixed);
	REQUIRE(r->has_misfire_grace_ns == !!sc->has_misfire_grace_ns);
	REQUIRE(!sc->has_misfire_grace_ns ||
		r->misfire_grace_ns == sc->misfire_grace_ns);
	REQUIRE(r->has_clock == !!sc->has_clock);
	REQUIRE(!sc->has_clock || r->clock == sc->clock);
	REQUIRE(r->has_period_ns == !!sc->has_period_ns);
	REQUIRE(!sc->has_period_ns || r->period_ns == sc->period_ns);
	REQUIRE(r->has_payload == !!sc->has_payload);
	REQUIRE(r->payload_len == sc->payload.len);
	REQUIRE((r->payload == NULL) == (sc->payload.data == NULL));
	REQUIRE(!r->payload_len ||
		memcmp(r->payload, sc->payload.data, r->payload_len) == 0);
	REQUIRE(r->has_replace == !!sc->has_replace);
	REQUIRE(!sc->has_replace || r->replace == !!sc->replace);
}

/* The fast path's r says field for field what protobuf-c decoded into e. */
static void same_response(const struct bwp_response *r,
			  const Bitwheel__V1__Envelope *e)
{
	const Bitwheel__V1__ScheduleReply *sr = e->schedule_reply;
	const Bitwheel__V1__CancelReply *cr = e->cancel_reply;
	const Bitwheel__V1__AckReply *ar = e->ack_reply;
	const Bitwheel__V1__Fired *f = e->fired;

	REQUIRE(r->body_case == e->body_case);
	REQUIRE(r->has_request_id == !!e->has_request_id);
	REQUIRE(!e->has_request_id || r->request_id == e->request_id);
	switch (e->body_case) {
	case BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY:
		REQUIRE(r->has_deadline_ns == !!sr->has_deadline_ns);
		REQUIRE(!sr->has_deadline_ns || r->deadline_ns == sr->deadline_ns);
		REQUIRE(r->has_replaced == !!sr->has_replaced);
		REQUIRE(!sr->has_replaced || r->replaced == !!sr->replaced);
		REQUIRE(!r->has_pending && !r->has_key && !r->has_payload);
		REQUIRE(!r->has_acked && !r->has_delivery);
		return;
	case BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY:
		REQUIRE(r->has_pending == !!cr->has_pending);
		REQUIRE(!cr->has_pending || r->pending == !!cr->pending);
		REQUIRE(!r->has_deadline_ns && !r->has_key && !r->has_payload);
		REQUIRE(!r->has_acked && !r->has_delivery);
		return;
	case BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY:
		REQUIRE(r->has_acked == !!ar->has_acked);
		REQUIRE(!ar->has_acked || r->acked == ar->acked);
		REQUIRE(!r->has_deadline_ns && !r->has_key && !r->has_payload);
		REQUIRE(!r->has_pending && !r->has_delivery);
		return;
	default:
		REQUIRE(e->body_case == BITWHEEL__V1__ENVELOPE__BODY_FIRED);
	}
	REQUIRE(r->has_key == !!f->has_key);
	REQUIRE(!f->has_key || r->key == f->key);
	REQUIRE(r->has_payload == !!f->has_payload);
	REQUIRE(r->payload_len == f->payload.len);
	REQUIRE((r->payload == NULL) == (f->payload.data == NULL));
	REQUIRE(!r->payload_len ||
		memcmp(r->payload, f->payload.data, r->payload_len) == 0);
	REQUIRE(r->has_deadline_ns == !!f->has_deadline_ns);
	REQUIRE(!f->has_deadline_ns || r->deadline_ns == f->deadline_ns);
	REQUIRE(r->has_fired_at_ns == !!f->has_fired_at_ns);
	REQUIRE(!f->has_fired_at_ns || r->fired_at_ns == f->fired_at_ns);
	REQUIRE(r->has_fire_count == !!f->has_fire_count);
	REQUIRE(!f->has_fire_count || r->fire_count == f->fire_count);
	REQUIRE(r->has_late == !!f->has_late);
	REQUIRE(!f->has_late || r->late == !!f->late);
	REQUIRE(r->has_redelivered == !!f->has_redelivered);
	REQUIRE(!f->has_redelivered || r->redelivered == !!f->redelivered);
	REQUIRE(r->has_delivery == !!f->has_delivery);
	REQUIRE(!f->has_delivery || r->delivery == f->delivery);
	REQUIRE(!r->has_replaced && !r->has_pending && !r->has_acked);
}

/* A payload a fast path read lies inside the frame p[0, fl). */
static void inside(const uint8_t *payload, size_t len, const uint8_t *p,
		   size_t fl)
{
	REQUIRE(!len || (payload >= p + BWP_HEADER_SIZE && payload + len <= p + fl));
}

/* The fast parsers on p[0, left) against bwp_frame_parse()'s verdict rc,
 * fl and env (NULL unless rc is 0). */
static void check_fast(const uint8_t *p, size_t left, size_t max_frame,
		       int rc, size_t fl, const Bitwheel__V1__Envelope *env)
{
	Bitwheel__V1__Envelope *slow = (Bitwheel__V1__Envelope *)1;
	Bitwheel__V1__Envelope *slow2 = (Bitwheel__V1__Envelope *)1;
	struct bwp_request r;
	struct bwp_response q;
	size_t fl2 = 0, fl3 = 0;
	int rc2 = bwp_frame_parse_request(p, left, max_frame, &r, &slow, &fl2);
	int rc3 = bwp_frame_parse_response(p, left, max_frame, &q, &slow2, &fl3);

	REQUIRE(rc2 == rc && rc3 == rc);
	REQUIRE(fl2 == fl && fl3 == fl);
	if (rc != 0) {
		REQUIRE(slow == NULL && slow2 == NULL);
		return;
	}
	REQUIRE(slow != NULL || slow2 != NULL);
	if (slow) {
		REQUIRE(slow->body_case == env->body_case);
		REQUIRE(slow->has_request_id == env->has_request_id);
		bwp_frame_free(slow);
	} else {
		same_request(&r, env);
		inside(r.payload, r.payload_len, p, fl);
	}
	if (slow2) {
		REQUIRE(slow2->body_case == env->body_case);
		REQUIRE(slow2->has_request_id == env->has_request_id);
		bwp_frame_free(slow2);
	} else {
		same_response(&q, env);
		inside(q.payload, q.payload_len, p, fl);
	}
	if (bwp_request_from_envelope(env, &r))
		same_request(&r, env);
	if (bwp_response_from_envelope(env, &q))
		same_response(&q, env);
	REQUIRE(q.body_case == env->body_case);
	REQUIRE(q.has_request_id == !!env->has_request_id);
	REQUIRE(q.request_id == env->request_id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t max_frame, off = 1, frames = 0;

	if (size < 1)
		return 0;
	max_frame = max_frames[data[0] & 7];

	while (off < size && frames++ < MAX_FRAMES) {
		const uint8_t *p = data + off;
		size_t left = size - off, fl = 0, hdr;
		Bitwheel__V1__Envelope *env = (Bitwheel__V1__Envelope *)1;
		int rc = bwp_frame_parse(p, left, max_frame, &env, &fl);

		hdr = left >= BWP_HEADER_SIZE
			? ((size_t)p[0] << 24 | (size_t)p[1] << 16 |
			   (size_t)p[2] << 8 | p[3])
			: 0;
		if (rc != 0)
			REQUIRE(env == NULL);
		check_fast(p, left, max_frame, rc, fl, rc == 0 ? env : NULL);
		switch (rc) {
		case 0:
			REQUIRE(env != NULL);
			REQUIRE(fl == BWP_HEADER_SIZE + hdr && fl <= left);
			REQUIRE(hdr >= 1 && hdr <= max_frame);
			/* Every prefix is incomplete. */
			for (size_t cut = 0; cut < fl; cut += 1 + cut / 4) {
				Bitwheel__V1__Envelope *e2 = NULL;
				size_t fl2 = 0;

				REQUIRE(bwp_frame_parse(p, cut, max_frame, &e2,
							&fl2) == BWP_EMORE);
				REQUIRE(e2 == NULL);
				REQUIRE(fl2 == (cut < BWP_HEADER_SIZE
						? BWP_HEADER_SIZE : fl));
			}
			check_envelope(env, max_frame);
			bwp_frame_free(env);
			off += fl;
			break;
		case BWP_EMORE:
			REQUIRE(fl > left);
			REQUIRE(fl == (left < BWP_HEADER_SIZE
				       ? BWP_HEADER_SIZE
				       : BWP_HEADER_SIZE + hdr));
			return 0;
		case BWP_EZERO:
			REQUIRE(left >= BWP_HEADER_SIZE && hdr == 0);
			REQUIRE(fl == BWP_HEADER_SIZE);
			off += fl;
			break;
		case BWP_ETOOBIG:
			REQUIRE(left >= BWP_HEADER_SIZE && hdr > max_frame);
			REQUIRE(fl == BWP_HEADER_SIZE + hdr);
			/* The body is not waited for: skip the header only. */
			off += BWP_HEADER_SIZE;
			break;
		case BWP_EDECODE:
		case BWP_ENOBODY:
		case BWP_ERANGE:
			REQUIRE(hdr >= 1 && hdr <= max_frame);
			REQUIRE(fl == BWP_HEADER_SIZE + hdr && fl <= left);
			off += fl;
			break;
		default:
			__builtin_trap();
		}
	}
	return 0;
}
