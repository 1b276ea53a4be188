/*
 * fuzz_dispatch.c - libFuzzer target for bitwheeld's connection and
 * request code: the bytes a client could send, through the same code the
 * daemon runs (daemon/conn.c, request.c, state.c over a real libevent
 * loop), without a socket.
 *
 * A server from bwd_server_new() (its state and loop, no listener) is
 * handed one end of an in-memory bufferevent pair; the input goes in at
 * the other end in chunks whose size the first byte picks, so frames
 * arrive whole, split and merged, with the loop turning after each chunk.
 * The second byte picks the client's uid (root or not).  Then the wheel
 * is polled and the fires pumped, the client end is closed and the server
 * freed.  Trapping on:
 *   - any bytes from the daemon that are not a sequence of whole, valid
 *     frames, each a reply, an error or a Fired (never a request);
 * and the sanitizers catch memory errors and leaks (everything the
 * connection, its session and its timers held must be freed).
 * Built by `make fuzz` (tests/fuzz.mk).
 */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>

#include "daemon-internal.h"
#include "fuzz.h"

static struct bwd_options opt;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* Small limits, so that inputs reach them. */
	char *args[] = { "fuzz_dispatch", "--max-frame", "2048",
			 "--max-payload", "256", "--max-timers", "64",
			 "--max-queued", "8", "--linger", "1s",
			 "--max-output", "16384", NULL };

	(void)argc;
	(void)argv;
	if (bwd_options_parse(sizeof(args) / sizeof(args[0]) - 1, args, &opt))
		abort();
	bwd_log_set_level(BWD_LOG_ERR);
	return 0;
}

static void turn(struct event_base *base)
{
	for (int i = 0; i < 4; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

/* Everything the daemon wrote must be whole frames it may send. */
static void check_output(struct evbuffer *in)
{
	size_t len = evbuffer_get_length(in);
	const uint8_t *p = evbuffer_pullup(in, -1);

	while (len > 0) {
		Bitwheel__V1__Envelope *env;
		size_t flen;

		REQUIRE(bwp_frame_parse(p, len, opt.limits.max_frame, &env, &flen) == 0);
		REQUIRE(env->body_case >= BITWHEEL__V1__ENVELOPE__BODY_ERROR &&
			env->body_case != BITWHEEL__V1__ENVELOPE__BODY_ACK);
		bwp_frame_free(env);
		p += flen;
		len -= flen;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bwd_server *srv;
	struct bufferevent *pair[2];
	struct event_base *base;
	struct bwd_env *env;
	size_t chunk;
	uid_t uid;

	if (size < 2)
		return 0;
	chunk = 1 + data[0] % 64 * 4;
	uid = data[1] & 1 ? 0 : 1000;
	data += 2;
	size -= 2;
	if (bwd_server_new(&opt, &srv))
		abort();
	env = bwd_server_env(srv);
	base = env->base;
	if (bufferevent_pair_new(base, 0, pair) ||
	    bwd_server_attach(srv, pair[0], uid, 1))
		abort();
	bufferevent_enable(pair[1], EV_READ | EV_WRITE);
	for (size_t off = 0; off < size; off += chunk) {
		bufferevent_write(pair[1], data + off,
				  size - off < chunk ? size - off : chunk);
		turn(base);
	}
	bwd_state_poll(env->state, bw_now_ns());
	event_active(env->pump, 0, 0);
	turn(base);
	check_output(bufferevent_get_input(pair[1]));
	bufferevent_free(pair[1]);
	turn(base);
	bwd_server_free(srv);
	return 0;
}
