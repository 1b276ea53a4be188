/*
 * record.c - the bytes of bitwheeld's state files, and nothing else.
 *
 * The journal and the snapshot (journal.c, snapshot.c) are the same thing
 * on disk: a 64-byte file header, then records back to back.  This module
 * alone packs and parses them, the way proto/frame.c alone owns the wire.
 *
 * File header (little endian):
 *    0  8  magic "BWJOURN1" or "BWSNAPS1"
 *    8  8  generation (journal: its number; snapshot: the first journal
 *          generation it does not contain)
 *   16 16  boot_id of the kernel that wrote it
 *   32  8  CLOCK_MONOTONIC ns when the file was created
 *   40  8  CLOCK_REALTIME ns at the same moment
 *   48 12  zero
 *   60  4  CRC32C of bytes 0..59
 *
 * Record:
 *    0  4  body length n (1 .. BWD_RECORD_MAX)
 *    4  4  CRC32C of the body
 *    8  n  body: type (1 byte), flags (1 byte), then the fields its type
 *          carries (field_mask[]; a TIMER's leeway only with
 *          BWD_RECF_LEEWAY, so that files written before leeways read
 *          back, and a timer without one is written as before; the same
 *          way a SENT's time and a QUEUED fire's history only with
 *          BWD_RECF_HISTORY, a dead letter's with BWD_RECF_DEAD, a
 *          wall-clock TIMER's or QUEUED fire's deadline with
 *          BWD_RECF_WALL (with BWD_RECF_BOOT a TIMER's CLOCK_BOOTTIME
 *          deadline: the same field), a calendar TIMER's spec (in the name), jitter,
 *          seed, base and grace, and a calendar FIRE's elapse and base,
 *          with BWD_RECF_CAL) in the
 *          order of enum field: u64s, a u32 uid, a name (1-byte length),
 *          a payload (4-byte length)
 *
 * A reader can tell a torn record (the file ends inside it: a crash while
 * appending) from a corrupt one (a CRC or layout that does not hold), and
 * stops at either; the offset it reports is the record's first byte.
 *
 * Costs: packing and parsing are linear in the record's size; the CRC runs
 * on the CPU's crc32 instruction when it has one (8 bytes a step).
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "daemon-internal.h"

static const char magic[2][8] = { "BWJOURN1", "BWSNAPS1" };

enum field {
	F_SID, F_KEY, F_SEQ, F_DEADLINE, F_PERIOD, F_COUNT, F_FIRED_AT,
	F_LEEWAY, F_TO, F_TO_SEQ, F_DELIVERIES, F_FIRST, F_READY,
	F_DL_DELIVERIES, F_DL_FIRST, F_LAST, F_WHY, F_DEAD, F_WALL,
	F_JITTER, F_SEED, F_BASE, F_GRACE,
	F_UID, F_NAME, F_PAYLOAD,
};

#define B(f) (1u << (f))
/* The u64s, which come first in enum field. */
#define U64_FIELDS (B(F_UID) - 1)

static const unsigned field_mask[BWD_REC_TYPES] = {
	[BWD_REC_SESSION] = B(F_SID) | B(F_SEQ) | B(F_UID) | B(F_NAME),
	[BWD_REC_END] = B(F_SID),
	[BWD_REC_TIMER] = B(F_SID) | B(F_KEY) | B(F_DEADLINE) | B(F_PERIOD) |
		B(F_COUNT) | B(F_PAYLOAD),
	[BWD_REC_CANCEL] = B(F_SID) | B(F_KEY),
	[BWD_REC_FIRE] = B(F_SID) | B(F_KEY) | B(F_SEQ) | B(F_DEADLINE) |
		B(F_COUNT) | B(F_FIRED_AT),
	[BWD_REC_QUEUED] = B(F_SID) | B(F_KEY) | B(F_SEQ) | B(F_DEADLINE) |
		B(F_COUNT) | B(F_FIRED_AT) | B(F_PAYLOAD),
	[BWD_REC_SENT] = B(F_SID) | B(F_SEQ),
	[BWD_REC_DONE] = B(F_SID) | B(F_SEQ),
	[BWD_REC_TRAILER] = B(F_COUNT),
	[BWD_REC_MOVE] = B(F_SID) | B(F_SEQ) | B(F_TO) | B(F_TO_SEQ) |
		B(F_DL_DELIVERIES) | B(F_DL_FIRST) | B(F_LAST) | B(F_WHY) |
		B(F_DEAD) | B(F_NAME),
	[BWD_REC_RELEASE] = B(F_SID) | B(F_SEQ) | B(F_READY),
	[BWD_REC_POLICY] = B(F_SID) | B(F_COUNT) | B(F_NAME),
};

/* The fields a record carries: its type's, and a TIMER's leeway when its
 * flag says so (files from before leeways have none: the default). */
static unsigned fields_of(unsigned type, unsigned flags)
{
	unsigned m = field_mask[type];

	if (type == BWD_REC_TIMER && (flags & BWD_RECF_LEEWAY))
		m |= B(F_LEEWAY);
	if ((type == BWD_REC_TIMER || type == BWD_REC_QUEUED) &&
	    (flags & BWD_RECF_WALL))
		m |= B(F_WALL);
	if (type == BWD_REC_TIMER && (flags & BWD_RECF_CAL))
		m |= B(F_JITTER) | B(F_SEED) | B(F_BASE) | B(F_NAME) |
			(flags & BWD_RECF_CAL_GRACE ? B(F_GRACE) : 0);
	if (type == BWD_REC_FIRE && (flags & BWD_RECF_CAL))
		m |= B(F_WALL) | B(F_BASE);
	if (type == BWD_REC_SENT && (flags & BWD_RECF_HISTORY))
		m |= B(F_FIRED_AT) | B(F_DELIVERIES);
	if (type == BWD_REC_QUEUED && (flags & BWD_RECF_HISTORY))
		m |= B(F_DELIVERIES) | B(F_FIRST) | B(F_READY);
	if (type == BWD_REC_QUEUED && (flags & BWD_RECF_DEAD))
		m |= B(F_DL_DELIVERIES) | B(F_DL_FIRST) | B(F_LAST) | B(F_WHY) |
			B(F_DEAD) | B(F_NAME);
	return m;
}

/* ---- CRC32C (Castagnoli) ------------------------------------------------- */

static uint32_t crc_table[256];

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t n)
{
	if (!crc_table[1])
		crc_table_init();
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
	uint64_t c = crc;

	for (; n >= 8; n -= 8, p += 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c = __builtin_ia32_crc32di(c, w);
	}
	crc = (uint32_t)c;
	/* The tail in at most three steps (a record's body is 2 bytes past
	 * a multiple of 8, or more with a payload), not a byte at a time. */
	if (n & 4) {
		uint32_t w;

		memcpy(&w, p, 4);
		crc = __builtin_ia32_crc32si(crc, w);
		p += 4;
	}
	if (n & 2) {
		uint16_t w;

		memcpy(&w, p, 2);
		crc = __builtin_ia32_crc32hi(crc, w);
		p += 2;
	}
	if (n & 1)
		crc = __builtin_ia32_crc32qi(crc, *p);
	return crc;
}
#endif

uint32_t bwd_crc32c(const void *data, size_t len)
{
	uint32_t crc = 0xffffffffu;

#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_hw(crc, data, len);
#endif
	return ~crc_soft(crc, data, len);
}

/* ---- little-endian fields -------------------------------------------------- */

/* One unaligned move each on a little-endian CPU (GCC does not merge the
 * byte loop: it was some 50 instructions a field). */
static uint8_t *put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
	return p + 8;
}

static uint8_t *put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
	return p + 4;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return le32toh(v);
}

/* ---- file header -------------------------------------------------------------- */

void bwd_file_header_pack(const struct bwd_file_header *h,
			  uint8_t out[BWD_FILE_HEADER_SIZE])
{
	uint8_t *p = out;

	memset(out, 0, BWD_FILE_HEADER_SIZE);
	memcpy(p, magic[h->kind], 8);
	p = put64(p + 8, h->generation);
	memcpy(p, h->boot_id, 16);
	p = put64(p + 16, h->mono_ns);
	put64(p, h->real_ns);
	put32(out + 60, bwd_crc32c(out, 60));
}

int bwd_file_header_parse(const uint8_t *buf, size_t len,
			  struct bwd_file_header *h)
{
	if (len < BWD_FILE_HEADER_SIZE)
		return BWD_REC_ETORN;
	if (get32(buf + 60) != bwd_crc32c(buf, 60))
		return BWD_REC_ECORRUPT;
	if (memcmp(buf, magic[BWD_FILE_JOURNAL], 8) == 0)
		h->kind = BWD_FILE_JOURNAL;
	else if (memcmp(buf, magic[BWD_FILE_SNAPSHOT], 8) == 0)
		h->kind = BWD_FILE_SNAPSHOT;
	else
		return BWD_REC_ECORRUPT;
	h->generation = get64(buf + 8);
	memcpy(h->boot_id, buf + 16, 16);
	h->mono_ns = get64(buf + 32);
	h->real_ns = get64(buf + 40);
	return 0;
}

/* ---- records ------------------------------------------------------------------- */

/* Where each u64 field lives in struct bwd_record: a table, not a switch,
 * because packing and parsing look one up per field (a call and a jump
 * through a table were some 130 instructions a journaled request). */
#define U64_AT(f, m) [f] = offsetof(struct bwd_record, m)
static const uint16_t u64_offset[F_UID] = {
	U64_AT(F_SID, sid), U64_AT(F_KEY, key), U64_AT(F_SEQ, seq),
	U64_AT(F_DEADLINE, deadline_ns), U64_AT(F_PERIOD, period_ns),
	U64_AT(F_COUNT, count), U64_AT(F_FIRED_AT, fired_ns),
	U64_AT(F_LEEWAY, leeway_ns), U64_AT(F_TO, to),
	U64_AT(F_TO_SEQ, to_seq), U64_AT(F_DELIVERIES, deliveries),
	U64_AT(F_FIRST, first_ns), U64_AT(F_READY, ready_ns),
	U64_AT(F_DL_DELIVERIES, dl_deliveries),
	U64_AT(F_DL_FIRST, dl_first_ns), U64_AT(F_LAST, last_ns),
	U64_AT(F_WHY, why), U64_AT(F_DEAD, dead_ns), U64_AT(F_WALL, wall_ns),
	U64_AT(F_JITTER, jitter_ns), U64_AT(F_SEED, seed),
	U64_AT(F_BASE, base_ns), U64_AT(F_GRACE, grace_ns),
};
#undef U64_AT

static inline uint64_t *u64_field(struct bwd_record *r, unsigned f)
{
	return (uint64_t *)((char *)r + u64_offset[f]);
}

size_t bwd_record_size(const struct bwd_record *r)
{
	unsigned m = fields_of(r->type, r->flags);
	size_t n = BWD_RECORD_HEADER_SIZE + 2 +
		   8 * (size_t)__builtin_popcount(m & U64_FIELDS);

	if (m & B(F_UID))
		n += 4;
	if (m & B(F_NAME))
		n += 1 + r->name_len;
	if (m & B(F_PAYLOAD))
		n += 4 + r->payload_len;
	return n;
}

size_t bwd_record_bound(enum bwd_rec_type type)
{
	struct bwd_record r = {
		.type = (uint8_t)type, .name_len = UINT8_MAX,
		.flags = BWD_RECF_LEEWAY | BWD_RECF_HISTORY | BWD_RECF_DEAD |
			 BWD_RECF_WALL | BWD_RECF_CAL | BWD_RECF_CAL_GRACE,
	};

	return bwd_record_size(&r);
}

size_t bwd_record_pack(const struct bwd_record *r, uint8_t *out)
{
	unsigned m = fields_of(r->type, r->flags);
	uint8_t *body = out + BWD_RECORD_HEADER_SIZE, *p = body;

	*p++ = r->type;
	*p++ = r->flags;
	/* The fields it carries only, in their order: a record has a few
	 * of the many. */
	for (unsigned b = m & U64_FIELDS; b; b &= b - 1)
		p = put64(p, *u64_field((struct bwd_record *)r,
					(unsigned)__builtin_ctz(b)));
	if (m & B(F_UID))
		p = put32(p, r->uid);
	if (m & B(F_NAME)) {
		*p++ = r->name_len;
		if (r->name_len)
			memcpy(p, r->name, r->name_len);
		p += r->name_len;
	}
	if (m & B(F_PAYLOAD)) {
		p = put32(p, r->payload_len);
		if (r->payload_len)
			memcpy(p, r->payload, r->payload_len);
		p += r->payload_len;
	}
	put32(out, (uint32_t)(p - body));
	put32(out + 4, bwd_crc32c(body, (size_t)(p - body)));
	return (size_t)(p - out);
}

/* The body's fields; the body passed its CRC, but its layout may still lie. */
static int parse_body(const uint8_t *p, size_t n, struct bwd_record *r)
{
	const uint8_t *end = p + n;
	unsigned m;

	memset(r, 0, sizeof(*r));
	if (n < 2 || p[0] == 0 || p[0] >= BWD_REC_TYPES)
		return BWD_REC_ECORRUPT;
	r->type = p[0];
	r->flags = p[1];
	p += 2;
	m = fields_of(r->type, r->flags);
	for (unsigned b = m & U64_FIELDS; b; b &= b - 1) {
		if (end - p < 8)
			return BWD_REC_ECORRUPT;
		*u64_field(r, (unsigned)__builtin_ctz(b)) = get64(p);
		p += 8;
	}
	if (m & B(F_UID)) {
		if (end - p < 4)
			return BWD_REC_ECORRUPT;
		r->uid = get32(p);
		p += 4;
	}
	if (m & B(F_NAME)) {
		if (end - p < 1 || end - p - 1 < p[0])
			return BWD_REC_ECORRUPT;
		r->name_len = p[0];
		r->name = (const char *)p + 1;
		p += 1 + r->name_len;
	}
	if (m & B(F_PAYLOAD)) {
		if (end - p < 4 || (size_t)(end - p - 4) < get32(p))
			return BWD_REC_ECORRUPT;
		r->payload_len = get32(p);
		r->payload = p + 4;
		p += 4 + r->payload_len;
	}
	return p == end ? 0 : BWD_REC_ECORRUPT;
}

int bwd_record_parse(const uint8_t *buf, size_t len, struct bwd_record *r,
		     size_t *used)
{
	uint32_t n;
	int err;

	if (len < BWD_RECORD_HEADER_SIZE)
		return BWD_REC_ETORN;
	n = get32(buf);
	if (n == 0 || n > BWD_RECORD_MAX)
		return BWD_REC_ECORRUPT;
	if (len - BWD_RECORD_HEADER_SIZE < n)
		return BWD_REC_ETORN;
	if (get32(buf + 4) != bwd_crc32c(buf + BWD_RECORD_HEADER_SIZE, n))
		return BWD_REC_ECORRUPT;
	err = parse_body(buf + BWD_RECORD_HEADER_SIZE, n, r);
	if (err)
		return err;
	*used = BWD_RECORD_HEADER_SIZE + n;
	return 0;
}

const char *bwd_record_strerror(int err)
{
	switch (err) {
	case BWD_REC_ETORN:
		return "torn (the file ends inside it)";
	case BWD_REC_ECORRUPT:
		return "corrupt (checksum or layout)";
	default:
		return strerror(-err);
	}
}
