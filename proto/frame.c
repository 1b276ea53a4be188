/*
 * frame.c - bitwheel protocol frames over byte buffers.  The layout, the
 * contract and the cost of each operation are in frame.h.
 */
#include "frame.h"

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

size_t bwp_frame_packed_size(const Bitwheel__V1__Envelope *env)
{
	return add_sat(BWP_HEADER_SIZE,
		       bitwheel__v1__envelope__get_packed_size(env));
}

int bwp_frame_pack(const Bitwheel__V1__Envelope *env, size_t max_frame,
		   uint8_t *buf, size_t cap, size_t *out_len)
{
	size_t body, total;

	if (env == NULL || out_len == NULL || (buf == NULL && cap > 0))
		return BWP_EINVAL;
	if (!body_present(env))
		return BWP_ENOBODY;

	body = bitwheel__v1__envelope__get_packed_size(env);
	total = add_sat(BWP_HEADER_SIZE, body);
	*out_len = total;
	if (body > body_limit(max_frame))
		return BWP_ETOOBIG;
	if (total > cap)
		return BWP_ENOSPC;

	buf[0] = (uint8_t)(body >> 24);
	buf[1] = (uint8_t)(body >> 16);
	buf[2] = (uint8_t)(body >> 8);
	buf[3] = (uint8_t)body;
	bitwheel__v1__envelope__pack(env, buf + BWP_HEADER_SIZE);
	return BWP_OK;
}

int bwp_frame_parse(const uint8_t *buf, size_t len, size_t max_frame,
		    Bitwheel__V1__Envelope **out, size_t *frame_len)
{
	Bitwheel__V1__Envelope *env = NULL;
	size_t body;
	int rc;

	if (out == NULL || frame_len == NULL || (buf == NULL && len > 0))
		return BWP_EINVAL;
	*out = NULL;

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

	/* protobuf-c returns NULL for malformed input and for a failed
	 * malloc alike; bodies are bounded by max_frame, so take it as the
	 * former. */
	env = bitwheel__v1__envelope__unpack(NULL, body, buf + BWP_HEADER_SIZE);
	if (env == NULL) {
		rc = BWP_EDECODE;
		goto fail;
	}
	if (!body_present(env)) {
		rc = BWP_ENOBODY;
		goto fail;
	}
	*out = env;
	return BWP_OK;

fail:
	bwp_frame_free(env);
	return rc;
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

bool bwp_session_name_valid(const char *name)
{
	size_t n;

	if (name == NULL)
		return false;
	/* Spelled out rather than isalnum(), whose answer depends on the
	 * locale: the daemon and every client must agree byte for byte. */
	for (n = 0; name[n] != '\0'; n++) {
		char c = name[n];

		if (n == BWP_SESSION_NAME_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || strchr("_.:@-", c) != NULL))
			return false;
	}
	return n > 0;
}
