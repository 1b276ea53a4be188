/*
 * frame.h - reading and writing bitwheel protocol frames (internal).
 *
 * The daemon and the client library share this module, and it is the only
 * code that turns envelopes into bytes or bytes into envelopes.  It works on
 * plain byte buffers: no sockets, no libevent, no global state.  The daemon
 * feeds it from evbuffers (pulled up to the frame_len parse asks for), the
 * client from a read buffer, a fuzzer from anything, and a journal could
 * keep the same records later.
 *
 * A frame is:
 *
 *   +--------+--------+--------+--------+------------------------------+
 *   |   body length, u32 big-endian     |  body: one serialized        |
 *   |   (1 .. max_frame)                |  bitwheel.v1.Envelope        |
 *   +--------+--------+--------+--------+------------------------------+
 *    <------- BWP_HEADER_SIZE --------->  <-------- body length ------->
 *
 * The length counts the body only.  A body is never empty, because an
 * envelope always carries a body message, so a zero length is an error.
 * proto/PROTOCOL.md is the full specification.
 *
 * Costs:
 *   bwp_frame_packed_size  one walk over the envelope's fields; no
 *                          allocation.  For the hot messages (below) a few
 *                          branches and no protobuf-c call.
 *   bwp_frame_pack         two walks (size, then write) straight into the
 *                          caller's buffer; no allocation.  When the buffer
 *                          is too small it stops after the first walk and
 *                          says how big it must be.  The hot messages
 *                          (Schedule, Cancel, Ack, ScheduleReply,
 *                          CancelReply, AckReply, Fired, with no unknown
 *                          fields) are written by frame.c itself, byte for
 *                          byte what protobuf-c would write; a small
 *                          response (a body under 128 bytes) into a
 *                          buffer with room for the largest such frame in
 *                          one walk, its size taken from where it ended.
 *   bwp_frame_parse        O(1) until the whole frame is in the buffer: it
 *                          reads the 4-byte header and no further, so a
 *                          caller may retry after every read without
 *                          quadratic cost, and an oversized frame is refused
 *                          before its body arrives.  On a complete frame,
 *                          one decoding pass that mallocs the envelope, its
 *                          body message and a copy of each string or bytes
 *                          field (the payload among them), then one walk
 *                          over the bytes that checks each varint against
 *                          its field's range (O(bytes), no allocation).
 *   bwp_frame_free         one walk, one free per allocation above.
 *   bwp_frame_parse_request
 *                          as bwp_frame_parse, but a plain Schedule,
 *                          Cancel or Ack is read in one pass into caller
 *                          storage, without malloc; anything else goes
 *                          through protobuf-c as above.
 *   bwp_frame_parse_response
 *                          the same for the client's hot frames: a plain
 *                          ScheduleReply, CancelReply, AckReply or Fired.
 *
 * Every function that can fail returns 0 or a negative enum bwp_error and
 * passes results through pointers.
 */
#ifndef BITWHEEL_PROTO_FRAME_H
#define BITWHEEL_PROTO_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bitwheel.pb-c.h"

#define BWP_PROTOCOL_VERSION BITWHEEL__V1__PROTOCOL_VERSION__PROTOCOL_VERSION

#define BWP_HEADER_SIZE 4u
/* The defaults of the daemon's configurable limits (PROTOCOL.md). */
#define BWP_DEFAULT_MAX_FRAME 65536u
#define BWP_DEFAULT_MAX_PAYLOAD 1024u
/*
 * The most an envelope adds around a Schedule's or a Fired's payload, every
 * field present at its widest (a dead letter's history with a 64-byte
 * session name included), for payloads under 256 MiB: a daemon keeps
 * max_frame >= max_payload + this, so whatever payload it accepts also fits
 * a frame both ways.
 */
#define BWP_PAYLOAD_OVERHEAD 256u
/* Hello.session: 1 to this many bytes of [A-Za-z0-9_.:@-]. */
#define BWP_SESSION_NAME_MAX 64u

enum bwp_error {
	BWP_OK = 0,
	BWP_EMORE = -1,    /* parse: the frame is not all there yet          */
	BWP_EZERO = -2,    /* parse: the header says length 0                */
	BWP_ETOOBIG = -3,  /* the body is longer than max_frame              */
	BWP_EDECODE = -4,  /* parse: the body is not a valid Envelope        */
	BWP_ENOBODY = -5,  /* the envelope has no body this code knows       */
	BWP_ENOSPC = -6,   /* pack: the output buffer is too small           */
	BWP_EINVAL = -7,   /* a NULL or otherwise invalid argument           */
	BWP_ESLOW = -8,    /* parse: longer than the bound for a frame the
			      fast reader does not take                   */
	BWP_ERANGE = -9,   /* parse: a varint out of its field's range       */
};

/* A static description of a bwp_error code. */
const char *bwp_strerror(int err);

/* Header plus body: the bytes bwp_frame_pack would write.  env != NULL. */
size_t bwp_frame_packed_size(const Bitwheel__V1__Envelope *env);

/*
 * Write env as one frame at buf.  *out_len gets the frame's size on
 * success and on BWP_ENOSPC (so the caller can grow the buffer and retry)
 * and on BWP_ETOOBIG.  Refuses, writing nothing:
 *   BWP_ENOBODY  env->body_case unset, unknown, or naming a NULL message:
 *                the peer would refuse such a frame;
 *   BWP_ETOOBIG  a body longer than max_frame (or than 32 bits can say);
 *   BWP_ENOSPC   a frame longer than cap.
 * buf may be NULL when cap is 0.
 */
int bwp_frame_pack(const Bitwheel__V1__Envelope *env, size_t max_frame,
		   uint8_t *buf, size_t cap, size_t *out_len);

/*
 * Read the frame at the start of buf[0..len).  On 0, *out is a new
 * envelope with a body set, to be released with bwp_frame_free(); on any
 * error *out is NULL.  *frame_len is set on every result but BWP_EINVAL:
 *   0, BWP_EZERO, BWP_EDECODE, BWP_ENOBODY, BWP_ERANGE
 *                 the frame's size, header included: the bytes to consume
 *                 (a stream reader may skip a bad frame, the protocol
 *                 closes the connection instead);
 *   BWP_EMORE     how many bytes buf must hold for the next call to make
 *                 progress: BWP_HEADER_SIZE until the header is complete,
 *                 then the whole frame;
 *   BWP_ETOOBIG   the size the header claims (saturated at SIZE_MAX); the
 *                 body is not waited for.
 * BWP_ENOBODY covers an envelope without a body and one whose body is a
 * message this code does not know (a newer protocol's).  BWP_ERANGE is a
 * body that decodes but has a varint its field cannot hold, which
 * protobuf-c would have cut to the field's width without a word: a uint32
 * or a sint32 of 2^32 or more, an int32 or an enum outside int32 (a
 * negative one is the ten-byte sign extension, as protobuf writes it), or
 * anything wider than 64 bits (a bool is any value within 64 bits, nonzero
 * being true, as protobuf says); unknown fields are not checked.  Bytes after the frame are left alone.
 *
 * Unknown fields inside a known message are kept and would be packed back
 * verbatim, including some protobuf-c accepts but then refuses to read (an
 * over-long zero tag): build a fresh envelope from the fields you use
 * rather than re-packing a received one.
 */
int bwp_frame_parse(const uint8_t *buf, size_t len, size_t max_frame,
		    Bitwheel__V1__Envelope **out, size_t *frame_len);

/* Release an envelope from bwp_frame_parse(); NULL is a no-op. */
void bwp_frame_free(Bitwheel__V1__Envelope *env);

/*
 * A Schedule, Cancel or Ack request, field for field what protobuf-c would
 * decode (a Schedule with a calendar, jitter or misfire grace comes
 * through protobuf-c and bwp_request_from_envelope alone) (has_* as its has_* flags; when_case as Schedule's), but flat.
 * payload points into the frame it was read from (or into the envelope it
 * was copied from), and is NULL when payload_len is 0, as protobuf-c
 * leaves it.  Cancel uses has_key and key only; Ack has_delivery,
 * delivery, has_cumulative and cumulative only.
 */
struct bwp_request {
	/* _SCHEDULE, _CANCEL or _ACK */
	Bitwheel__V1__Envelope__BodyCase body_case;
	bool has_request_id;
	bool has_delivery;
	bool has_cumulative;
	bool cumulative;
	uint64_t delivery;
	bool has_key;
	bool has_period_ns;
	bool has_payload;
	bool has_replace;
	bool replace;
	bool has_leeway_ns;
	Bitwheel__V1__Schedule__WhenCase when_case;
	uint64_t request_id;
	uint64_t key;
	uint64_t when_ns;          /* delay_ns, deadline_ns or realtime_ns,
				      per when_case                        */
	uint64_t period_ns;
	uint64_t leeway_ns;
	const uint8_t *payload;
	size_t payload_len;
	/* A calendar timer's (when_case _CALENDAR: calendar, pointing into
	 * the envelope; when_ns 0), which only protobuf-c reads. */
	const char *calendar;
	bool has_jitter_ns;
	bool has_jitter_fixed;
	bool jitter_fixed;
	bool has_misfire_grace_ns;
	uint64_t jitter_ns;
	uint64_t misfire_grace_ns;
	/* Schedule.clock: the fast path's too (CLOCK_MONOTONIC or
	 * CLOCK_BOOTTIME; another value is protobuf-c's to read). */
	bool has_clock;
	Bitwheel__V1__Clock clock;
};

/*
 * bwp_frame_parse() for a reader that wants Schedule, Cancel and Ack fast.
 * Same results, same *frame_len, and the same frames are errors.  On 0,
 * either *out is NULL and *req holds the request, whose payload points
 * into buf (valid while buf is), or *out is an envelope as
 * bwp_frame_parse() gives, for anything frame.c does not read itself
 * (another body, or an encoding it leaves to protobuf-c: see frame.c).
 */
int bwp_frame_parse_request(const uint8_t *buf, size_t len, size_t max_frame,
			    struct bwp_request *req,
			    Bitwheel__V1__Envelope **out, size_t *frame_len);

/*
 * bwp_frame_parse_request() for a reader that bounds what it pays
 * protobuf-c for: a frame the fast reader does not take (anything but a
 * plain Schedule, Cancel or Ack) whose body is longer than max_slow is
 * BWP_ESLOW, without being decoded; *frame_len is its size, as for
 * BWP_EDECODE.  Decoding costs grow with a frame's fields, and a frame of
 * tens of thousands of unknown fields would otherwise cost milliseconds.
 */
int bwp_frame_parse_request_bounded(const uint8_t *buf, size_t len,
				    size_t max_frame, size_t max_slow,
				    struct bwp_request *req,
				    Bitwheel__V1__Envelope **out,
				    size_t *frame_len);

/*
 * The request in env (from bwp_frame_parse) as a struct bwp_request, its
 * payload pointing into env; false when the body is not a Schedule,
 * Cancel or Ack.
 */
bool bwp_request_from_envelope(const Bitwheel__V1__Envelope *env,
			       struct bwp_request *req);

/*
 * What the daemon sends most: a ScheduleReply, a CancelReply, an AckReply
 * (replies) or a Fired (a notification), field for field what protobuf-c
 * would decode (has_* as its has_* flags), but flat.  Each body uses its
 * own fields: ScheduleReply deadline_ns and replaced; CancelReply pending;
 * AckReply acked; Fired key, payload, deadline_ns, fired_at_ns,
 * fire_count, late, redelivered, delivery, deliveries and due_realtime_ns (a Fired with a
 * dead_letter goes through protobuf-c); the others stay absent and zero.  payload is as in struct bwp_request.
 */
struct bwp_response {
	/* _SCHEDULE_REPLY, _CANCEL_REPLY, _ACK_REPLY or _FIRED */
	Bitwheel__V1__Envelope__BodyCase body_case;
	bool has_delivery;
	bool has_acked;
	bool has_deliveries;
	bool has_due_realtime_ns;
	uint64_t delivery;
	uint64_t acked;
	uint64_t deliveries;
	uint64_t due_realtime_ns;
	bool has_request_id;
	bool has_deadline_ns;
	bool has_replaced;
	bool replaced;
	bool has_pending;
	bool pending;
	bool has_key;
	bool has_payload;
	bool has_fired_at_ns;
	bool has_fire_count;
	bool has_late;
	bool late;
	bool has_redelivered;
	bool redelivered;
	uint64_t request_id;
	uint64_t deadline_ns;
	uint64_t key;
	uint64_t fired_at_ns;
	uint64_t fire_count;
	const uint8_t *payload;
	size_t payload_len;
	/* Fired.dead_letter: bwp_response_from_envelope's and the packer's;
	 * the fast reader leaves such a frame to protobuf-c (NULL). */
	const Bitwheel__V1__DeadLetter *dead_letter;
};

/*
 * bwp_frame_parse_request() for the other direction: a reader that wants
 * ScheduleReply, CancelReply, AckReply and Fired fast (the client).  Same
 * contract, with *resp in place of *req.
 */
int bwp_frame_parse_response(const uint8_t *buf, size_t len,
			     size_t max_frame, struct bwp_response *resp,
			     Bitwheel__V1__Envelope **out, size_t *frame_len);

/*
 * The body of env (from bwp_frame_parse) as a struct bwp_response, its
 * payload pointing into env; false when the body is none of the four.
 * body_case, has_request_id and request_id are set either way, so a
 * reader can route every frame on resp alone.
 */
bool bwp_response_from_envelope(const Bitwheel__V1__Envelope *env,
				struct bwp_response *resp);

/*
 * bwp_frame_pack() for a response in a struct bwp_response (the daemon's
 * hot replies and its fires, without a protobuf-c message to fill): the
 * bytes bwp_frame_pack() writes for the envelope that
 * bwp_response_from_envelope() reads resp from, with its contract;
 * BWP_ENOBODY for a body_case that is none of the four.  Sizing and
 * writing each take a few branches a field; a dead letter is protobuf-c's
 * to size and write.
 */
int bwp_frame_pack_response(const struct bwp_response *resp, size_t max_frame,
			    uint8_t *buf, size_t cap, size_t *out_len);

/*
 * Start a reply to req in caller storage: env is initialised and, when req
 * carries a request_id, gets the same one.  req NULL (or without an id)
 * makes a frame that answers no request.  The caller then sets the body.
 */
void bwp_reply_init(Bitwheel__V1__Envelope *env,
		    const Bitwheel__V1__Envelope *req);

/*
 * A whole error reply in caller storage (env and err, e.g. on the stack),
 * ready for bwp_frame_pack().  message may be NULL; it is referenced, not
 * copied, so it must outlive the pack.
 */
void bwp_error_init(Bitwheel__V1__Envelope *env, Bitwheel__V1__Error *err,
		    const Bitwheel__V1__Envelope *req,
		    Bitwheel__V1__ErrorCode code, const char *message);

/* Whether the len bytes at name obey Hello.session's rule (PROTOCOL.md,
 * "Hello"): every byte is checked, so a NUL anywhere makes it invalid. */
bool bwp_session_name_valid(const void *name, size_t len);

#endif /* BITWHEEL_PROTO_FRAME_H */
