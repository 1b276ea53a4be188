/*
 * libevent-consumer.c - take a named session's fires on the program's own
 * libevent loop, beside whatever else the loop serves.
 *
 *   libevent-consumer SESSION [COUNT]   e.g.  libevent-consumer myapp-jobs 3
 *
 * The adapter bitwheel-client-libevent.h watches the client's socket in
 * the event_base and runs the client's fire handler from the loop; the
 * handler acknowledges with bwc_send_ack, which does not wait (the acks
 * of one dispatch leave together).  Stops after COUNT fires (default:
 * never), on SIGINT or SIGTERM, or when the connection is lost for good.
 * The library reconnects by itself when the daemon restarts (inside
 * bwc_dispatch, so the loop blocks meanwhile, at most 60 s by default);
 * a loop that must never block turns that off with bwc_set_reconnect()
 * and calls bwc_reconnect() from a timer when the error callback says
 * BWC_ECLOSED.
 *
 * Build: cc libevent-consumer.c $(pkg-config --cflags --libs
 *        libbitwheel-client libevent)
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>
#include <bitwheel-client-libevent.h>

struct app {
	struct event_base *base;
	uint64_t count, seen;
	int status;            /* the exit code */
};

/* Runs from the loop, inside the adapter's bwc_dispatch. */
static void on_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct app *app = arg;

	printf("fire key %" PRIu64 " payload \"%.*s\"%s\n", f->key,
	       (int)f->payload_len,
	       f->payload != NULL ? (const char *)f->payload : "",
	       f->redelivered ? " (redelivered)" : "");
	fflush(stdout);
	bwc_send_ack(c, f, false);
	if (++app->seen == app->count)
		event_base_loopbreak(app->base);
}

/* bwc_dispatch failed: the connection is gone (the adapter has stopped
 * watching it), or it could not be read for want of memory. */
static void on_error(struct bwc_client *c, int err, void *arg)
{
	struct app *app = arg;

	fprintf(stderr, "libevent-consumer: %s: %s\n", bwc_strerror(err),
		bwc_errmsg(c));
	app->status = 1;
	event_base_loopbreak(app->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopbreak(arg);
}

int main(int argc, char **argv)
{
	struct app app = { .count = UINT64_MAX };
	struct bwc_client *c;
	struct bwc_libevent *a = NULL;
	struct event *sigint, *sigterm;

	if (argc < 2 || argc > 3 ||
	    (argc > 2 && (app.count = strtoull(argv[2], NULL, 10)) == 0)) {
		fprintf(stderr, "usage: %s SESSION [COUNT]\n", argv[0]);
		return 2;
	}
	app.base = event_base_new();
	if (app.base == NULL || bwc_new(&c) != 0)
		return 1;
	sigint = evsignal_new(app.base, SIGINT, on_signal, app.base);
	sigterm = evsignal_new(app.base, SIGTERM, on_signal, app.base);
	event_add(sigint, NULL);
	event_add(sigterm, NULL);

	bwc_set_role(c, BWC_ROLE_CONSUMER);
	bwc_set_fire_handler(c, on_fire, &app);
	if (bwc_connect(c, NULL, argv[1]) != 0 ||
	    bwc_libevent_attach(c, app.base, on_error, &app, &a) != 0) {
		fprintf(stderr, "libevent-consumer: %s\n", bwc_errmsg(c));
		return 1;
	}
	/* The application's own events would be added here. */
	event_base_dispatch(app.base);

	bwc_libevent_detach(a);
	bwc_free(c);              /* writes what is left of the acks first */
	event_free(sigint);
	event_free(sigterm);
	event_base_free(app.base);
	return app.status;
}
