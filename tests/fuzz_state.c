/*
 * fuzz_state.c - libFuzzer target for the reader of bitwheeld's state
 * files: a journal or a snapshot (daemon/record.c, store.c) read back
 * into the daemon's state (state.c), as recovery does at start-up.
 *
 * The first input byte picks the file kind (bit 1: snapshot, else
 * journal) and whether the harness first rewrites every CRC it can find
 * (bit 0), so that mutated bodies get past the checksums and into the
 * record parser and bwd_state_apply().  The rest is the file.  Then:
 *   - whatever was read is armed (bwd_state_restore_finish), written out
 *     as a snapshot (bwd_snapshot_write, into a memfd) and read back into
 *     a second state: that must succeed whole, with no record that does
 *     not fit, and hold the same sessions, timers and queued fires;
 *   - a snapshot of the second state has the same size as the first
 *     (the same records, in whatever order its maps keep them);
 * and the sanitizers catch memory errors and leaks.  Built by `make fuzz`
 * (tests/fuzz.mk).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon-internal.h"
#include "fuzz.h"

static struct bwd_options opt;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char *args[] = { "fuzz_state", "--max-queued", "8", NULL };

	(void)argc;
	(void)argv;
	if (bwd_options_parse(sizeof(args) / sizeof(args[0]) - 1, args, &opt))
		abort();
	/* Recovery logs every damaged record; the fuzzer makes thousands. */
	bwd_log_set_level(BWD_LOG_ERR - 1);
	return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static void fix_crcs(uint8_t *buf, size_t len)
{
	size_t off = BWD_FILE_HEADER_SIZE;

	if (len < BWD_FILE_HEADER_SIZE)
		return;
	put32(buf + 60, bwd_crc32c(buf, 60));
	while (len - off >= BWD_RECORD_HEADER_SIZE) {
		uint32_t n = get32(buf + off);

		if (n == 0 || n > len - off - BWD_RECORD_HEADER_SIZE)
			return;
		put32(buf + off + 4, bwd_crc32c(buf + off + BWD_RECORD_HEADER_SIZE, n));
		off += BWD_RECORD_HEADER_SIZE + n;
	}
}

/* A snapshot of st, as bytes (caller frees). */
static uint8_t *snapshot(const struct bwd_state *st, size_t *len)
{
	int fd = memfd_create("fuzz_state", MFD_CLOEXEC);
	off_t end;
	uint8_t *buf;

	REQUIRE(fd >= 0);
	REQUIRE(bwd_snapshot_write(st, fd, 7) == 0);
	end = lseek(fd, 0, SEEK_END);
	REQUIRE(end >= BWD_FILE_HEADER_SIZE);
	buf = malloc((size_t)end);
	REQUIRE(buf);
	REQUIRE(pread(fd, buf, (size_t)end, 0) == end);
	close(fd);
	*len = (size_t)end;
	return buf;
}

static struct bwd_state *state_new(void)
{
	struct bwd_state *st;

	if (bwd_state_new(&opt, bw_now_ns(), &st))
		abort();
	return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bwd_state *a, *b;
	struct bwd_replay rep;
	struct bwd_state_stats ga, gb;
	enum bwd_file_kind kind;
	uint8_t *buf, *snap, *again;
	size_t len, snap_len, again_len;
	int err;

	if (size < 1)
		return 0;
	kind = data[0] & 2 ? BWD_FILE_SNAPSHOT : BWD_FILE_JOURNAL;
	len = size - 1;
	buf = malloc(len + 1);
	REQUIRE(buf);
	memcpy(buf, data + 1, len);
	if (data[0] & 1)
		fix_crcs(buf, len);
	a = state_new();
	err = bwd_store_replay(a, buf, len, "fuzz", kind, &rep);
	REQUIRE(err == 0 || err == BWD_REC_ETORN || err == BWD_REC_ECORRUPT);
	REQUIRE(rep.stopped_at <= len);
	bwd_state_restore_finish(a, bw_now_ns(), &ga);
	free(buf);

	snap = snapshot(a, &snap_len);
	b = state_new();
	REQUIRE(bwd_store_replay(b, snap, snap_len, "again", BWD_FILE_SNAPSHOT, &rep) == 0);
	REQUIRE(rep.whole && rep.contradictions == 0);
	bwd_state_restore_finish(b, bw_now_ns(), &gb);
	REQUIRE(ga.sessions == gb.sessions && ga.timers == gb.timers &&
	      ga.queued == gb.queued);
	again = snapshot(b, &again_len);
	REQUIRE(again_len == snap_len);

	free(snap);
	free(again);
	bwd_state_free(a);
	bwd_state_free(b);
	return 0;
}
