/*
 * check_client.c - libbitwheel-client against real bitwheeld processes on
 * temporary sockets (started by tests/daemonutil.c): the contract of
 * client/bitwheel-client.h, observed from a caller.
 *
 * TCases:
 *   blocking     connect and the session info it reports, schedule (delay,
 *                absolute, periodic, payloads, wall-clock, boottime),
 *                cancel, stats, wait_fire
 *                and its timeout; a request's timeout against a stopped
 *                daemon, and the late reply being discarded; fires that
 *                arrive during a blocking call are kept, in order; how
 *                long fire payloads stay valid.
 *   nonblocking  bwc_fd / bwc_poll_events / pipelined bwc_send_* /
 *                bwc_dispatch with reply callbacks and a fire handler;
 *                replies in request order; daemon errors in replies;
 *                outstanding requests failing with BWC_ECLOSED; calls that
 *                are not allowed inside callbacks; requests queued behind
 *                outstanding ones, written by bwc_dispatch or bwc_close.
 *   errors       BWC_EUNREACHABLE naming the path, BWC_ESERVER with
 *                bwc_server_error() for daemon refusals (DUPLICATE_KEY,
 *                TOO_MANY_CLIENTS, TOO_MANY_TIMERS, BAD_DEADLINE,
 *                SHUTTING_DOWN), client-side BWC_ETOOBIG and BWC_EINVAL;
 *                a second connection to a named session is welcome.
 *   consumer     protocol version 2's roles and acknowledgement: producers
 *                and consumers of one session (BWC_EROLE for what a
 *                producer cannot do, BWC_EINVAL for an anonymous one); a
 *                window of 4 never has more than 4 fires unacknowledged,
 *                counted on the client's side; bwc_ack's counts; BWC_ESTALE
 *                and redelivery after a reconnect, the old connection's
 *                queued fires discarded; a non-blocking consumer acking
 *                once per dispatch.
 *   owner        session names per uid: HelloReply.owner_uid in the
 *                session info; bwc_set_owner_uid's range, and an owner
 *                for an anonymous session being BWC_EINVAL; as root, the
 *                same name in uid 65534's namespace being another session
 *                (remembered across bwc_reconnect), and uid 65534 naming
 *                root's refused with PERMISSION_DENIED (else a SKIP note).
 *   peer         who may listen (bwc_set_daemon_user): a stand-in
 *                listener of uid 65534 is refused with BWC_EPEER, a
 *                message naming it, and nothing sent to it; accepted once
 *                its user is named (number, name, $BITWHEEL_DAEMON_USER,
 *                the setter over the environment), every reconnect
 *                checked again; a listener of the client's own uid is
 *                accepted; struct bwc_stats's fixed size and per-uid
 *                counters (2 sessions, 3 timers, 10 Hz of periodic fires);
 *                bwc_metrics_scrape: a manual fire's queue wait and ack
 *                latency, the daemon process's figures.
 *   restart      the daemon killed and restarted under a named session:
 *                what bwc_reconnect() keeps (an auto-ack consumer's fires)
 *                and what is lost.
 *   reconnect    riding through a restart with no code for it: a producer
 *                and a consumer (forked) across a SIGTERM restart on a
 *                state directory, no call failing and every acknowledged
 *                Schedule's fire arriving; a manual-ack consumer's ack of
 *                an old fire completing nothing, the fire coming again
 *                marked; an event-loop consumer (fire handler,
 *                bwc_dispatch) likewise; BWC_EGAVEUP after the give-up
 *                time (500 ms) and after; BWC_EANONYMOUS (SIGTERM and
 *                SIGKILL); BWC_EUNKNOWN
 *                naming the key of a Schedule cut off by a crash, blocking
 *                and not, while a Schedule with replace, a Cancel and an
 *                unwritten Schedule go again; requests made while
 *                reconnecting sent once the session is back;
 *                bwc_set_reconnect(c, false) keeping the old behaviour.
 *   failures     fires that fail (issue 21): bwc_backoff's bounds; a
 *                release with a delay never back before it, deliveries
 *                counted, at once, refused past max_release_delay_ns;
 *                policies set, kept, reset and refused (the defaults at
 *                Hello: 20, NAME.dead); releases reaching max 3
 *                dead-letter, the dead letter's history at the
 *                dead-letter session's consumer, kick by key and limit
 *                with deliveries from 0 again; touches keeping a slow
 *                fire past four ack timeouts, HOLD_LIMIT past
 *                max_hold_ns, BWC_ESTALE and BWC_EROLE as for bwc_ack.
 *   introspection  bwc_list_sessions and bwc_list_timers (see their
 *                tests); bwc_calendar: a spec's elapses across a
 *                daylight-saving gap, none, from now, 1,000 of them, its
 *                refusal (BAD_CALENDAR) and arguments refused before
 *                sending.
 *   fallback     a stand-in daemon's replies and fires in encodings the
 *                client's fast decoder leaves to protobuf-c.
 *   sigpipe      with SIGPIPE at its default disposition, writing to a
 *                dead daemon returns an error and the process lives.
 *
 * Timing bounds are "resolution + margin" (daemonutil.h); random parts use
 * a fixed seed or BW_TEST_SEED.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bitwheel-client.h"
#include "daemonutil.h"
#include "testutil.h"

#define DEFAULT_SEED UINT64_C(0xc11e27)

/* The fixed seed, or BW_TEST_SEED; logged so a failure can be rerun. */
static uint64_t test_seed(void)
{
	uint64_t seed = tu_seed_from_env("BW_TEST_SEED", DEFAULT_SEED);

	du_note("seed %#" PRIx64 " (BW_TEST_SEED)", seed);
	return seed;
}

static struct bwc_client *new_client(void)
{
	struct bwc_client *c = NULL;

	ck_assert_int_eq(bwc_new(&c), 0);
	ck_assert_ptr_nonnull(c);
	/* Every blocking call is bounded, well inside the TCase timeout. */
	ck_assert_int_eq(bwc_set_timeout(c, (int64_t)DU_WAIT_MS * (int64_t)DU_MS), 0);
	return c;
}

static struct bwc_client *connect_to(const struct du_daemon *d, const char *session)
{
	struct bwc_client *c = new_client();

	CK_BWC(c, bwc_connect(c, d->sock, session));
	return c;
}

/* ======================================================================
 * blocking
 * ====================================================================== */

START_TEST(test_connect_info)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_session_info info;
	struct bwc_client *c = new_client();
	struct bwc_stats st;
	struct du_conn *raw;
	du_env *e;

	du_daemon_start(d, "--preset", "standard-balanced", "--max-payload", "512",
			"--linger", "2s", "--max-timers", "77", "--max-queued", "66",
			"--max-output", "300000", "--max-clients", "55", NULL);
	/* Not connected yet: requests fail with BWC_ECLOSED. */
	ck_assert_int_eq(bwc_fd(c), -1);
	ck_assert_int_eq(bwc_poll_events(c), 0);
	ck_assert_int_eq(bwc_stats(c, &st), BWC_ECLOSED);
	ck_assert_int_eq(bwc_get_session_info(c, &info), BWC_ECLOSED);
	ck_assert_int_eq(bwc_reconnect(c), BWC_EINVAL);

	/* Settings are checked when set; a producer needs a session name. */
	ck_assert_int_eq(bwc_set_role(c, (enum bwc_role)3), BWC_EINVAL);
	ck_assert_int_eq(bwc_set_ack_mode(c, (enum bwc_ack_mode)3), BWC_EINVAL);
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_PRODUCER));
	ck_assert_int_eq(bwc_connect(c, d->sock, NULL), BWC_EINVAL);
	ck_assert_msg(strstr(bwc_errmsg(c), "named session") != NULL, "errmsg: %s",
		      bwc_errmsg(c));
	ck_assert_int_eq(bwc_fd(c), -1);
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_DEFAULT));

	CK_BWC(c, bwc_connect(c, d->sock, NULL));
	ck_assert_int_ge(bwc_fd(c), 0);
	ck_assert(bwc_poll_events(c) & POLLIN);
	CK_BWC(c, bwc_get_session_info(c, &info));
	/* Anonymous: the session's one consumer, auto-ack, the default
	 * window. */
	ck_assert_int_eq(info.role, BWC_ROLE_CONSUMER);
	ck_assert(info.auto_ack);
	ck_assert_uint_eq(info.window, 256);
	ck_assert_uint_eq(info.ack_timeout_ns, 0);
	ck_assert_uint_eq(info.consumers, 1);
	ck_assert_uint_eq(info.limits.max_window, 4096);
	/* What the daemon says in its HelloReply, as a raw client sees it. */
	raw = du_connect(d->sock);
	e = du_hello(raw, NULL);
	ck_assert_str_eq(info.daemon_version, e->hello_reply->daemon_version);
	bwp_frame_free(e);
	ck_assert_uint_eq(info.oneshot_resolution_ns, 5 * DU_MS);
	ck_assert_uint_eq(info.periodic_resolution_ns, 100 * DU_MS);
	ck_assert_uint_eq(info.limits.max_payload_bytes, 512);
	ck_assert_uint_eq(info.limits.max_frame_bytes, BWP_DEFAULT_MAX_FRAME);
	ck_assert_uint_eq(info.limits.session_linger_ns, 2 * DU_S);
	ck_assert_uint_eq(info.limits.max_timers, 77);
	ck_assert_uint_eq(info.limits.max_queued, 66);
	ck_assert_uint_eq(info.limits.max_output_bytes, 300000);
	ck_assert_uint_eq(info.limits.max_clients, 55);
	ck_assert(!info.resumed);
	ck_assert_uint_eq(info.timers, 0);
	ck_assert_uint_eq(info.queued, 0);

	ck_assert_int_eq(bwc_connect(c, d->sock, NULL), BWC_EBUSY);
	CK_BWC(c, bwc_stats(c, &st));
	ck_assert_uint_eq(st.clients, 2);
	du_conn_free(raw);
	bwc_close(c);
	ck_assert_int_eq(bwc_fd(c), -1);
	ck_assert_int_eq(bwc_get_session_info(c, &info), BWC_ECLOSED);
	ck_assert_int_eq(bwc_stats(c, &st), BWC_ECLOSED);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

static void check_fire_time(const struct bwc_fire *f, uint64_t now, uint64_t res)
{
	ck_assert_msg(f->fired_ns >= f->deadline_ns, "key %" PRIu64 " fired early", f->key);
	ck_assert_msg(now >= f->deadline_ns, "key %" PRIu64 " received before its deadline",
		      f->key);
	ck_assert_msg(now - f->deadline_ns <= res + du_margin_ns(),
		      "key %" PRIu64 " received %.3f ms late", f->key,
		      (double)(now - f->deadline_ns) / 1e6);
}

START_TEST(test_schedule_fire)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_session_info info;
	struct bwc_scheduled sc;
	struct bwc_timer t;
	struct bwc_fire f;
	struct bwc_stats st;
	uint64_t t0, first;
	bool pending;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	CK_BWC(c, bwc_get_session_info(c, &info));
	/* The lanes, finest first, each bound its tick (probes 1). */
	ck_assert_uint_eq(info.nlanes, 2);
	ck_assert_uint_eq(info.lanes[0].resolution_ns, info.oneshot_resolution_ns);
	ck_assert_uint_eq(info.lanes[0].max_late_ns, info.oneshot_resolution_ns);
	ck_assert_uint_eq(info.lanes[1].resolution_ns, info.periodic_resolution_ns);
	ck_assert_uint_eq(info.lanes[1].max_late_ns, info.periodic_resolution_ns);

	/* A delay, with a payload. */
	t = (struct bwc_timer){ .key = 42, .when_ns = 50 * DU_MS, .payload = "hello",
				.payload_len = 5 };
	t0 = bwc_now_ns();
	CK_BWC(c, bwc_schedule(c, &t, &sc));
	ck_assert(!sc.replaced);
	ck_assert(sc.deadline_ns >= t0 + t.when_ns && sc.deadline_ns <= bwc_now_ns() + t.when_ns);
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	check_fire_time(&f, bwc_now_ns(), info.oneshot_resolution_ns);
	ck_assert_uint_eq(f.key, 42);
	ck_assert_uint_eq(f.deadline_ns, sc.deadline_ns);
	/* The connection's first fire, on the client's first connection. */
	ck_assert_uint_eq(f.delivery, 1);
	ck_assert_uint_eq(f.connection, 1);
	ck_assert(!f.redelivered);
	ck_assert(f.payload != NULL && f.payload_len == 5 && memcmp(f.payload, "hello", 5) == 0);
	ck_assert_uint_eq(f.fire_count, 0);
	ck_assert(!f.late);

	/* An absolute deadline; no payload, then an empty one. */
	t = (struct bwc_timer){ .key = 43, .absolute = true, .when_ns = bwc_now_ns() + 30 * DU_MS };
	CK_BWC(c, bwc_schedule(c, &t, &sc));
	ck_assert_uint_eq(sc.deadline_ns, t.when_ns);
	t = (struct bwc_timer){ .key = 44, .when_ns = 40 * DU_MS, .payload = "", .payload_len = 0 };
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	check_fire_time(&f, bwc_now_ns(), info.oneshot_resolution_ns);
	ck_assert_uint_eq(f.key, 43);
	ck_assert_msg(f.payload == NULL, "a timer without payload fired with one");
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	ck_assert_uint_eq(f.key, 44);
	ck_assert_msg(f.payload != NULL && f.payload_len == 0,
		      "an empty payload must be non-NULL with length 0");
	ck_assert_uint_eq(f.delivery, 3);

	/* Periodic: d, d + p, d + 2p (each the next after the last fire),
	 * counted; then cancelled.  Its leeway puts it in the periodic lane. */
	t = (struct bwc_timer){ .key = 45, .when_ns = 20 * DU_MS, .period_ns = 100 * DU_MS };
	CK_BWC(c, bwc_schedule_leeway(c, &t, info.lanes[1].max_late_ns, &sc));
	first = sc.deadline_ns;
	for (uint64_t n = 1, prev = 0; n <= 3; n++) {
		CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
		check_fire_time(&f, bwc_now_ns(), info.periodic_resolution_ns);
		ck_assert_uint_eq(f.key, 45);
		ck_assert_uint_eq(f.fire_count, n);
		ck_assert_uint_eq(f.deadline_ns,
				  n == 1 ? first : du_next_period(first, t.period_ns, prev));
		prev = f.fired_ns;
	}
	CK_BWC(c, bwc_cancel(c, 45, &pending));
	ck_assert(pending);
	CK_BWC(c, bwc_cancel(c, 45, &pending));
	ck_assert(!pending);
	/* A fire sent before the cancel's reply may still be queued here. */
	while (bwc_wait_fire(c, 0, &f) == 0)
		ck_assert(f.key == 45 && f.fire_count == 4);
	ck_assert_int_eq(bwc_wait_fire(c, 250 * (int64_t)DU_MS, &f), BWC_ETIMEDOUT);

	/* Replace. */
	t = (struct bwc_timer){ .key = 46, .when_ns = 3600 * DU_S };
	CK_BWC(c, bwc_schedule(c, &t, &sc));
	t = (struct bwc_timer){ .key = 46, .when_ns = 10 * DU_MS, .replace = true,
				.payload = "r", .payload_len = 1 };
	CK_BWC(c, bwc_schedule(c, &t, &sc));
	ck_assert(sc.replaced);
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	ck_assert(f.key == 46 && f.payload_len == 1);

	CK_BWC(c, bwc_stats(c, &st));
	ck_assert_uint_eq(st.oneshot.inserted, 5);
	ck_assert_uint_eq(st.oneshot.fired, 4);
	ck_assert_uint_eq(st.oneshot.cancelled, 1);
	ck_assert_uint_eq(st.periodic.inserted, 1);
	ck_assert_uint_eq(st.periodic.cancelled, 1);
	ck_assert_uint_eq(st.periodic.fired, 3);
	ck_assert_uint_eq(st.clients, 1);
	/* memory_bytes: the daemon's for root; for anyone else their uid's
	 * bytes, of which nothing is left here. */
	ck_assert(st.uptime_ns > 0 && (st.memory_bytes > 0 || geteuid() != 0));
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* A wall-clock timer (PROTOCOL.md, "Clocks"): it fires at its instant of
 * the host's CLOCK_REALTIME with that instant in due_realtime_ns, listed
 * with it; a periodic or mixed one is refused before it is sent.
 * check_clock steps a daemon's clock; here it runs undisturbed. */
START_TEST(test_wall_clock)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c, *p;
	struct bwc_timer t;
	struct bwc_scheduled sc;
	struct bwc_fire f;
	struct bwc_timer_entry e[2];
	struct bwc_listing l;
	uint64_t wall;
	size_t n;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	wall = du_realtime_ns() + 300 * DU_MS;
	t = (struct bwc_timer){ .key = 1, .realtime_ns = wall };
	CK_BWC(c, bwc_schedule(c, &t, &sc));
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	ck_assert_msg(du_realtime_ns() >= wall, "fired before its wall-clock instant");
	ck_assert_uint_eq(f.key, 1);
	ck_assert_uint_eq(f.due_realtime_ns, wall);
	ck_assert_uint_eq(f.deadline_ns, sc.deadline_ns);
	ck_assert(!f.late);
	/* A monotonic timer's fire has none. */
	t = (struct bwc_timer){ .key = 2, .when_ns = 10 * DU_MS };
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	ck_assert_uint_eq(f.due_realtime_ns, 0);
	t = (struct bwc_timer){ .key = 3, .realtime_ns = wall, .period_ns = DU_S };
	ck_assert_int_eq(bwc_schedule(c, &t, NULL), BWC_EINVAL);
	t = (struct bwc_timer){ .key = 3, .realtime_ns = wall, .absolute = true };
	ck_assert_int_eq(bwc_schedule(c, &t, NULL), BWC_EINVAL);

	p = connect_to(d, "e2e-wall");
	t = (struct bwc_timer){ .key = 4, .realtime_ns = wall + 3600 * DU_S };
	CK_BWC(p, bwc_schedule(p, &t, NULL));
	t = (struct bwc_timer){ .key = 5, .when_ns = 3600 * DU_S };
	CK_BWC(p, bwc_schedule(p, &t, NULL));
	CK_BWC(p, bwc_list_timers(p, "e2e-wall", BWC_ANY_UID, e, 2, &n, &l));
	ck_assert_uint_eq(n, 2);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(e[i].deadline_realtime_ns,
				  e[i].key == 4 ? wall + 3600 * DU_S : 0);
	bwc_free(p);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* A boottime timer (struct bwc_timer.clock, PROTOCOL.md, "Clocks"): its
 * deadline on CLOCK_BOOTTIME, never early by that clock, listed with its
 * clock; an unknown clock, and one with realtime_ns or calendar, are
 * refused before they are sent.  check_clock suspends a daemon. */
START_TEST(test_boottime)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c, *p;
	struct bwc_timer t;
	struct bwc_scheduled sc;
	struct bwc_fire f;
	struct bwc_timer_entry e[2];
	struct bwc_listing l;
	uint64_t before;
	size_t n;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	before = du_boottime_ns();
	t = (struct bwc_timer){ .key = 1, .when_ns = 50 * DU_MS, .clock = BWC_CLOCK_BOOTTIME };
	CK_BWC(c, bwc_schedule(c, &t, &sc));
	ck_assert_uint_ge(sc.deadline_ns, before + 50 * DU_MS);
	ck_assert_uint_le(sc.deadline_ns, du_boottime_ns() + 50 * DU_MS);
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	ck_assert_uint_eq(f.key, 1);
	ck_assert_msg(du_boottime_ns() >= sc.deadline_ns, "fired before its CLOCK_BOOTTIME deadline");
	ck_assert_uint_eq(f.due_realtime_ns, 0);
	t = (struct bwc_timer){ .key = 2, .when_ns = DU_S, .clock = (enum bwc_clock)7 };
	ck_assert_int_eq(bwc_schedule(c, &t, NULL), BWC_EINVAL);
	t = (struct bwc_timer){ .key = 2, .realtime_ns = du_realtime_ns() + DU_S,
				.clock = BWC_CLOCK_BOOTTIME };
	ck_assert_int_eq(bwc_schedule(c, &t, NULL), BWC_EINVAL);
	t = (struct bwc_timer){ .key = 2, .calendar = "daily", .clock = BWC_CLOCK_BOOTTIME };
	ck_assert_int_eq(bwc_schedule(c, &t, NULL), BWC_EINVAL);

	p = connect_to(d, "e2e-boot");
	t = (struct bwc_timer){ .key = 4, .when_ns = 3600 * DU_S, .clock = BWC_CLOCK_BOOTTIME };
	CK_BWC(p, bwc_schedule(p, &t, NULL));
	t = (struct bwc_timer){ .key = 5, .when_ns = 3600 * DU_S };
	CK_BWC(p, bwc_schedule(p, &t, NULL));
	CK_BWC(p, bwc_list_timers(p, "e2e-boot", BWC_ANY_UID, e, 2, &n, &l));
	ck_assert_uint_eq(n, 2);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(e[i].clock, e[i].key == 4 ? BWC_CLOCK_BOOTTIME :
				 BWC_CLOCK_MONOTONIC);
	bwc_free(p);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_wait_fire_timeout)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_fire f;
	uint64_t t0, el;
	int rc;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	t0 = du_now_ns();
	rc = bwc_wait_fire(c, 200 * (int64_t)DU_MS, &f);
	el = du_now_ns() - t0;
	ck_assert_msg(rc == BWC_ETIMEDOUT, "wait_fire with nothing due: %d", rc);
	ck_assert_msg(el >= 200 * DU_MS, "timed out after %.1f ms of 200", (double)el / 1e6);
	ck_assert_msg(el < 5 * DU_S, "a 200 ms wait took %.1f ms", (double)el / 1e6);
	ck_assert(strlen(bwc_errmsg(c)) > 0);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_UNSPECIFIED);
	/* 0: only what is there already. */
	t0 = du_now_ns();
	ck_assert_int_eq(bwc_wait_fire(c, 0, &f), BWC_ETIMEDOUT);
	ck_assert(du_now_ns() - t0 < DU_S);
	/* The connection is still good. */
	{
		struct bwc_timer t = { .key = 1, .when_ns = DU_MS };

		CK_BWC(c, bwc_schedule(c, &t, NULL));
		CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
		ck_assert_uint_eq(f.key, 1);
	}
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/*
 * A daemon that does not answer (stopped with SIGSTOP): a blocking request
 * times out after the client's timeout; once the daemon runs again, its
 * late reply is discarded and the next request gets its own reply.
 */
START_TEST(test_request_timeout)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_stats st;
	struct bwc_timer t = { .key = 5, .when_ns = 3600 * DU_S };
	struct bwc_scheduled sc;
	uint64_t t0, el;
	bool pending;
	int rc;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	CK_BWC(c, bwc_set_timeout(c, 200 * (int64_t)DU_MS));
	ck_assert(kill(d->pid, SIGSTOP) == 0);
	t0 = du_now_ns();
	rc = bwc_schedule(c, &t, &sc);
	el = du_now_ns() - t0;
	kill(d->pid, SIGCONT);
	ck_assert_msg(rc == BWC_ETIMEDOUT, "request to a stopped daemon: %d (%s)", rc,
		      bwc_errmsg(c));
	ck_assert_msg(el >= 200 * DU_MS && el < 5 * DU_S, "timed out after %.1f ms",
		      (double)el / 1e6);
	CK_BWC(c, bwc_set_timeout(c, (int64_t)DU_WAIT_MS * (int64_t)DU_MS));
	/* The schedule stayed outstanding and took effect. */
	CK_BWC(c, bwc_stats(c, &st));
	ck_assert_uint_eq(st.oneshot.inserted, 1);
	CK_BWC(c, bwc_cancel(c, 5, &pending));
	ck_assert(pending);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

#define NDURING 20

/* Fires that arrive while a blocking call waits for its reply are queued
 * and handed out afterwards, in arrival order, without another wait. */
START_TEST(test_fires_during_blocking_call)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_stats st;
	struct bwc_fire f;
	uint64_t t0 = 0, last = 0;

	du_daemon_start(d, NULL);
	c = new_client();
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_CONSUMER));
	CK_BWC(c, bwc_connect(c, d->sock, "e2e-during"));
	for (int i = 0; i < NDURING; i++) {
		struct bwc_timer t = { .key = (uint64_t)i, .absolute = true,
				       .payload = &i, .payload_len = sizeof(i) };

		if (i == 0)
			t0 = bwc_now_ns();
		t.when_ns = t0 + 30 * DU_MS + (uint64_t)i * 2 * DU_MS;
		CK_BWC(c, bwc_schedule(c, &t, NULL));
	}
	/* All fire while nobody reads, then a blocking call reads them. */
	du_sleep_until(t0 + 30 * DU_MS + NDURING * 2 * DU_MS + 150 * DU_MS);
	CK_BWC(c, bwc_stats(c, &st));
	ck_assert_uint_eq(st.oneshot.fired, NDURING);
	for (int i = 0; i < NDURING; i++) {
		int rc = bwc_wait_fire(c, 0, &f);

		ck_assert_msg(rc == 0, "fire %d of %d lost: %s", i, NDURING, bwc_errmsg(c));
		ck_assert_msg(f.key == (uint64_t)i, "fire %d has key %" PRIu64, i, f.key);
		ck_assert(f.payload_len == sizeof(i) && memcmp(f.payload, &i, sizeof(i)) == 0);
		ck_assert(f.fired_ns >= last);
		last = f.fired_ns;
	}
	ck_assert_int_eq(bwc_wait_fire(c, 0, &f), BWC_ETIMEDOUT);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

static void on_alarm(int sig)
{
	(void)sig;
}

/* A signal during bwc_wait_fire: BWC_EINTR, and the wait can resume. */
START_TEST(test_wait_fire_eintr)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct sigaction sa;
	struct itimerval it = { { 0, 0 }, { 0, 100000 } };
	struct bwc_timer t = { .key = 8, .when_ns = 300 * DU_MS };
	struct bwc_fire f;
	int rc;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;   /* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	ck_assert(sigaction(SIGALRM, &sa, NULL) == 0);
	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	ck_assert(setitimer(ITIMER_REAL, &it, NULL) == 0);
	rc = bwc_wait_fire(c, 2 * (int64_t)DU_S, &f);
	ck_assert_msg(rc == BWC_EINTR, "wait_fire interrupted by SIGALRM: %d (%s)", rc,
		      bwc_errmsg(c));
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	ck_assert_uint_eq(f.key, 8);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

struct mixed {
	int order[8];
	int n;
};

static void mixed_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct mixed *m = arg;

	(void)c;
	ck_assert_int_eq(r->status, 0);
	m->order[m->n++] = 1;
}

static void mixed_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct mixed *m = arg;

	(void)c;
	m->order[m->n++] = 100 + (int)f->key;
}

/*
 * Both modes on one client: a fire and a non-blocking reply that arrive
 * while a blocking call waits are kept; no callback runs inside the
 * blocking call; the next bwc_dispatch runs them in arrival order.
 */
START_TEST(test_mixed_modes)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_timer t = { .key = 1, .when_ns = DU_MS };
	struct bwc_stats st;
	struct mixed m = { { 0 }, 0 };

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	bwc_set_fire_handler(c, mixed_fire, &m);
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	du_sleep_ms(50);                       /* key 1 has fired by now */
	ck_assert_int_eq(bwc_send_stats(c, mixed_reply, &m), 0);
	CK_BWC(c, bwc_stats(c, &st));          /* reads the fire, both replies */
	ck_assert_msg(m.n == 0, "a callback ran inside a blocking call");
	ck_assert_int_eq(bwc_dispatch(c), 0);
	ck_assert_int_eq(m.n, 2);
	ck_assert_msg(m.order[0] == 101 && m.order[1] == 1,
		      "callbacks out of arrival order: %d, %d", m.order[0], m.order[1]);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST


#define NBIG 300

struct big_seen {
	struct bwc_client *c;
	int fires, stats;
};

/* The payload of key k: 1000 bytes, the key's low byte then a count. */
static void big_payload(uint64_t k, uint8_t *p)
{
	for (int i = 0; i < 1000; i++)
		p[i] = (uint8_t)(k + (uint64_t)i);
}

static void big_stats(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct big_seen *b = arg;

	(void)c;
	ck_assert_int_eq(r->status, 0);
	b->stats++;
}

static void big_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct big_seen *b = arg;
	uint8_t want[1000];

	big_payload(f->key, want);
	ck_assert(f->payload_len == sizeof(want) &&
		  memcmp(f->payload, want, sizeof(want)) == 0);
	/* A request from the handler: queued behind the Stats outstanding,
	 * written by this dispatch, its reply taken by a later one. */
	ck_assert_int_eq(bwc_send_stats(c, big_stats, b), 0);
	ck_assert(memcmp(f->payload, want, sizeof(want)) == 0);
	b->fires++;
}

/*
 * Payloads outlive what they must: bwc_wait_fire's until the next
 * bwc_wait_fire, while later calls queue hundreds of big payloads behind
 * it (the client's payload queue grows and moves); the fire handler's
 * during its call, requests sent from it included.
 */
START_TEST(test_fire_payloads)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_timer t = { .key = NBIG, .payload = "first", .payload_len = 5 };
	struct big_seen b = { 0 };
	struct bwc_stats st;
	struct bwc_fire f;
	uint8_t p[1000];
	uint64_t t0, deadline;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	b.c = c;
	t0 = bwc_now_ns();
	t.absolute = true;
	t.when_ns = t0 + 20 * DU_MS;
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	for (uint64_t k = 0; k < NBIG; k++) {
		struct bwc_timer big = { .key = k, .absolute = true,
					 .when_ns = t0 + 60 * DU_MS, .payload = p,
					 .payload_len = sizeof(p) };

		big_payload(k, p);
		CK_BWC(c, bwc_schedule(c, &big, NULL));
	}
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	ck_assert_uint_eq(f.key, NBIG);
	/* Every big one fires while nobody reads; blocking calls queue them
	 * all. Asked until the daemon has fired them, not after a fixed
	 * sleep: under valgrind its hand-out of 300 KB can outlast one. */
	du_sleep_until(t0 + 60 * DU_MS + 150 * DU_MS);
	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	do {
		CK_BWC(c, bwc_stats(c, &st));
		if (st.oneshot.fired == NBIG + 1)
			break;
		du_sleep_until(du_now_ns() + 20 * DU_MS);
	} while (du_now_ns() < deadline);
	ck_assert_uint_eq(st.oneshot.fired, NBIG + 1);
	ck_assert_msg(f.payload_len == 5 && memcmp(f.payload, "first", 5) == 0,
		      "bwc_wait_fire's payload changed under later calls");

	bwc_set_fire_handler(c, big_fire, &b);
	ck_assert_int_eq(bwc_send_stats(c, big_stats, &b), 0);
	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	while (b.fires < NBIG || b.stats < NBIG + 1) {
		struct pollfd pf = { bwc_fd(c), bwc_poll_events(c), 0 };

		ck_assert_msg(du_now_ns() < deadline, "%d fires, %d stats", b.fires,
			      b.stats);
		poll(&pf, 1, 50);
		ck_assert_int_eq(bwc_dispatch(c), 0);
	}
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * nonblocking
 * ====================================================================== */

#define NNB 2000

struct nb_state {
	struct bwc_client *c;
	size_t nreplies;           /* callbacks run so far                 */
	size_t expect;             /* callbacks expected                   */
	uint64_t fired[NNB];       /* fires per key                        */
	uint64_t deadline[NNB];    /* from the ScheduleReply               */
	bool cancelled[NNB];
	size_t nfires;
	int busy_checked;          /* blocking calls tried inside callbacks */
	bool extra_stats_done;
};

struct nb_req {
	struct nb_state *st;
	size_t seq;                /* position in the send order           */
	enum bwc_request_kind kind;
	uint64_t key;
};

static void nb_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct nb_req *q = arg;
	struct nb_state *st = q->st;

	ck_assert_ptr_eq(c, st->c);
	ck_assert_msg(q->seq == st->nreplies, "reply for request %zu arrived as number %zu",
		      q->seq, st->nreplies);
	ck_assert_int_eq(r->request, q->kind);
	ck_assert_msg(r->status == 0, "request %zu: status %d (%s %s)", q->seq, r->status,
		      bwc_server_error_name(r->server_error), r->message);
	st->nreplies++;
	switch (r->request) {
	case BWC_REQUEST_SCHEDULE:
		ck_assert_uint_eq(r->key, q->key);
		st->deadline[q->key] = r->scheduled.deadline_ns;
		break;
	case BWC_REQUEST_CANCEL:
		ck_assert_uint_eq(r->key, q->key);
		ck_assert_msg(r->pending, "key %" PRIu64 " cancelled 100 ms early: not pending",
			      q->key);
		break;
	case BWC_REQUEST_STATS:
		ck_assert_ptr_nonnull(r->stats);
		if (!st->extra_stats_done) {
			/* Inside a callback: blocking calls and dispatch are
			 * refused, bwc_send_* is allowed. */
			struct bwc_stats s2;
			struct bwc_fire f;

			ck_assert_int_eq(bwc_stats(c, &s2), BWC_EBUSY);
			ck_assert_int_eq(bwc_wait_fire(c, 0, &f), BWC_EBUSY);
			ck_assert_int_eq(bwc_dispatch(c), BWC_EBUSY);
			st->busy_checked++;
			ck_assert_int_eq(r->stats->oneshot.inserted, NNB);
			ck_assert_int_eq(bwc_send_stats(c, nb_reply, q + 1), 0);
			st->expect++;
			st->extra_stats_done = true;
		}
		break;
	case BWC_REQUEST_ACK:
		ck_abort_msg("a reply to a non-blocking ack, which has none");
		break;
	default:
		ck_abort_msg("a reply of kind %d, never asked", (int)r->request);
		break;
	}
}

static void nb_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct nb_state *st = arg;
	char want[24];

	ck_assert_ptr_eq(c, st->c);
	ck_assert(f->key < NNB);
	ck_assert_msg(!st->cancelled[f->key], "cancelled key %" PRIu64 " fired", f->key);
	ck_assert_msg(st->deadline[f->key] != 0, "key %" PRIu64 " fired before its reply",
		      f->key);
	ck_assert_uint_eq(f->deadline_ns, st->deadline[f->key]);
	ck_assert(f->fired_ns >= f->deadline_ns);
	snprintf(want, sizeof(want), "k%" PRIu64, f->key);
	ck_assert(f->payload_len == strlen(want) && memcmp(f->payload, want, f->payload_len) == 0);
	st->fired[f->key]++;
	st->nfires++;
}

/*
 * 2,000 Schedules (every fourth cancelled right behind it) and a Stats,
 * pipelined without waiting; a poll loop on bwc_fd/bwc_poll_events and
 * bwc_dispatch runs the callbacks: every reply in request order, every
 * uncancelled timer fires once through the fire handler.
 */
START_TEST(test_nonblocking)
{
	struct du_daemon *d = du_daemon_new();
	struct nb_state *st = calloc(1, sizeof(*st));
	struct nb_req *reqs = calloc(NNB * 2 + 4, sizeof(*reqs));
	struct tu_rng rng;
	size_t n = 0, nuncancelled = 0;
	uint64_t deadline;

	ck_assert(st != NULL && reqs != NULL);
	tu_rng_seed(&rng, test_seed());
	du_daemon_start(d, NULL);
	st->c = connect_to(d, NULL);
	bwc_set_fire_handler(st->c, nb_fire, st);
	ck_assert_int_eq(bwc_poll_events(st->c), POLLIN);

	for (uint64_t k = 0; k < NNB; k++) {
		char p[24];
		struct bwc_timer t = { .key = k, .payload = p,
				       .when_ns = 100 * DU_MS + tu_rng_below(&rng, 200 * DU_MS) };
		int rc;

		t.payload_len = (size_t)snprintf(p, sizeof(p), "k%" PRIu64, k);
		reqs[n] = (struct nb_req){ st, n, BWC_REQUEST_SCHEDULE, k };
		while ((rc = bwc_send_schedule(st->c, &t, nb_reply, &reqs[n])) == BWC_EAGAIN) {
			struct pollfd pf = { bwc_fd(st->c), bwc_poll_events(st->c), 0 };

			ck_assert(pf.events & POLLOUT);
			poll(&pf, 1, 100);
			ck_assert_int_eq(bwc_dispatch(st->c), 0);
		}
		ck_assert_msg(rc == 0, "bwc_send_schedule: %s", bwc_errmsg(st->c));
		n++;
		if (k % 4 == 0) {
			st->cancelled[k] = true;
			reqs[n] = (struct nb_req){ st, n, BWC_REQUEST_CANCEL, k };
			ck_assert_int_eq(bwc_send_cancel(st->c, k, nb_reply, &reqs[n]), 0);
			n++;
		} else {
			nuncancelled++;
		}
	}
	reqs[n] = (struct nb_req){ st, n, BWC_REQUEST_STATS, 0 };
	ck_assert_int_eq(bwc_send_stats(st->c, nb_reply, &reqs[n]), 0);
	n++;
	/* The extra Stats sent from inside the first Stats callback. */
	reqs[n] = (struct nb_req){ st, n, BWC_REQUEST_STATS, 0 };
	st->expect = n;

	deadline = du_now_ns() + 20 * DU_S;
	while (st->nreplies < st->expect || st->nfires < nuncancelled) {
		struct pollfd pf = { bwc_fd(st->c), bwc_poll_events(st->c), 0 };

		ck_assert_msg(du_now_ns() < deadline,
			      "after 20 s: %zu of %zu replies, %zu of %zu fires", st->nreplies,
			      st->expect, st->nfires, nuncancelled);
		ck_assert(pf.events & POLLIN);
		poll(&pf, 1, 100);
		ck_assert_msg(bwc_dispatch(st->c) == 0, "bwc_dispatch: %s", bwc_errmsg(st->c));
	}
	ck_assert_int_eq(st->busy_checked, 1);
	for (uint64_t k = 0; k < NNB; k++)
		ck_assert_uint_eq(st->fired[k], st->cancelled[k] ? 0 : 1);
	/* Nothing more: the cancelled ones stay silent. */
	{
		uint64_t until = du_now_ns() + 150 * DU_MS;

		while (du_now_ns() < until) {
			struct pollfd pf = { bwc_fd(st->c), bwc_poll_events(st->c), 0 };

			poll(&pf, 1, 20);
			ck_assert_int_eq(bwc_dispatch(st->c), 0);
		}
		ck_assert_uint_eq(st->nfires, nuncancelled);
	}
	bwc_free(st->c);
	free(st);
	free(reqs);
	du_daemon_free(d);
}
END_TEST

struct err_seen {
	int status, server_error, pending, calls;
	char message[256];
};

static void err_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct err_seen *e = arg;

	(void)c;
	e->status = r->status;
	e->server_error = r->server_error;
	e->pending = r->pending;
	snprintf(e->message, sizeof(e->message), "%s", r->message ? r->message : "(null)");
	e->calls++;
}

static void dispatch_until(struct bwc_client *c, const int *calls, int want)
{
	uint64_t deadline = du_now_ns() + DU_WAIT_MS * DU_MS;

	while (*calls < want) {
		struct pollfd pf = { bwc_fd(c), bwc_poll_events(c), 0 };
		int rc;

		ck_assert_msg(du_now_ns() < deadline, "callback never ran");
		if (pf.fd >= 0)
			poll(&pf, 1, 50);
		rc = bwc_dispatch(c);
		if (*calls >= want)
			break;
		ck_assert_msg(rc == 0, "bwc_dispatch: %d (%s)", rc, bwc_errmsg(c));
	}
}

/* Daemon refusals in replies: status BWC_ESERVER and the daemon's code. */
START_TEST(test_nonblocking_errors)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_timer t = { .key = 3, .when_ns = 3600 * DU_S };
	struct err_seen a = { 0 }, b = { 0 }, x = { 0 };

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	ck_assert_int_eq(bwc_send_schedule(c, &t, err_reply, &a), 0);
	ck_assert_int_eq(bwc_send_schedule(c, &t, err_reply, &b), 0);
	ck_assert_int_eq(bwc_send_cancel(c, 99, err_reply, &x), 0);
	dispatch_until(c, &x.calls, 1);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(a.status, 0);
	ck_assert_int_eq(b.calls, 1);
	ck_assert_int_eq(b.status, BWC_ESERVER);
	ck_assert_int_eq(b.server_error, BWC_SERVER_DUPLICATE_KEY);
	ck_assert_msg(b.message[0] != '\0', "an error reply without the daemon's message");
	ck_assert_int_eq(x.status, 0);
	ck_assert(!x.pending);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* Outstanding requests when the daemon dies: their callbacks run with
 * BWC_ECLOSED, and bwc_dispatch says the connection ended. */
START_TEST(test_nonblocking_closed)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct err_seen s[3];
	uint64_t deadline;
	int rc = 0;

	memset(s, 0, sizeof(s));
	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	/* The behaviour without reconnecting (an anonymous session's, with
	 * it: test_reconnect_anonymous). */
	CK_BWC(c, bwc_set_reconnect(c, false));
	ck_assert(kill(d->pid, SIGSTOP) == 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(bwc_send_stats(c, err_reply, &s[i]), 0);
	du_daemon_kill(d);
	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	while (s[2].calls == 0) {
		struct pollfd pf = { bwc_fd(c), bwc_poll_events(c), 0 };

		ck_assert_msg(du_now_ns() < deadline, "no callback after the daemon died");
		if (pf.fd >= 0)
			poll(&pf, 1, 50);
		rc = bwc_dispatch(c);
	}
	ck_assert_msg(rc == BWC_ECLOSED, "bwc_dispatch after the daemon died: %d", rc);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(s[i].calls, 1);
		ck_assert_int_eq(s[i].status, BWC_ECLOSED);
	}
	ck_assert_int_eq(bwc_fd(c), -1);
	ck_assert_int_eq(bwc_poll_events(c), 0);
	ck_assert_int_eq(bwc_send_stats(c, err_reply, &s[0]), BWC_ECLOSED);
	ck_assert_int_eq(bwc_dispatch(c), BWC_ECLOSED);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST


#define NQUEUED 50

/* Until the daemon has read all the requests of connections that
 * closed: n timers pending in the oneshot lane (daemon-wide).  A new
 * connection to a shared session does not wait for the old one's last
 * requests. */
static void wait_pending(struct bwc_client *c, uint64_t n)
{
	uint64_t deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	struct bwc_stats st;

	for (;;) {
		CK_BWC(c, bwc_stats(c, &st));
		if (st.oneshot.pending == n)
			return;
		ck_assert_msg(du_now_ns() < deadline, "%" PRIu64 " of %" PRIu64
			      " timers pending", st.oneshot.pending, n);
		du_sleep_ms(10);
	}
}

/*
 * Writes are batched: a request goes out at once when none is
 * outstanding, and behind an outstanding one it waits (POLLOUT) for the
 * next bwc_dispatch, which writes the lot.  bwc_close writes what is
 * still queued before it closes: the session keeps every timer.
 */
START_TEST(test_batched_writes)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_session_info info;
	struct err_seen first = { 0 }, rest[NQUEUED];

	memset(rest, 0, sizeof(rest));
	du_daemon_start(d, NULL);
	c = connect_to(d, "e2e-batched");
	ck_assert_int_eq(bwc_send_stats(c, err_reply, &first), 0);
	ck_assert_int_eq(bwc_poll_events(c), POLLIN);
	for (int i = 0; i < NQUEUED; i++) {
		struct bwc_timer t = { .key = (uint64_t)i, .when_ns = 3600 * DU_S };

		ck_assert_int_eq(bwc_send_schedule(c, &t, err_reply, &rest[i]), 0);
		ck_assert(bwc_poll_events(c) & POLLOUT);
	}
	dispatch_until(c, &rest[NQUEUED - 1].calls, 1);
	ck_assert_int_eq(first.calls, 1);
	for (int i = 0; i < NQUEUED; i++)
		ck_assert_int_eq(rest[i].status, 0);
	ck_assert_int_eq(bwc_poll_events(c), POLLIN);

	/* Queued, never dispatched, then closed. */
	ck_assert_int_eq(bwc_send_stats(c, NULL, NULL), 0);
	for (int i = 0; i < NQUEUED; i++) {
		struct bwc_timer t = { .key = (uint64_t)(NQUEUED + i),
				       .when_ns = 3600 * DU_S };

		ck_assert_int_eq(bwc_send_schedule(c, &t, NULL, NULL), 0);
	}
	ck_assert(bwc_poll_events(c) & POLLOUT);
	bwc_close(c);
	CK_BWC(c, bwc_reconnect(c));
	CK_BWC(c, bwc_get_session_info(c, &info));
	ck_assert(info.resumed);
	wait_pending(c, 2 * NQUEUED);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * errors
 * ====================================================================== */

START_TEST(test_unreachable)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c = new_client();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char missing[128];
	int fd, rc;

	/* Nothing at the path. */
	snprintf(missing, sizeof(missing), "%s/no-such.sock", d->dir);
	rc = bwc_connect(c, missing, NULL);
	ck_assert_msg(rc == BWC_EUNREACHABLE, "missing socket: %d (%s)", rc, bwc_errmsg(c));
	ck_assert_msg(strstr(bwc_errmsg(c), missing) != NULL, "message without the path: %s",
		      bwc_errmsg(c));
	ck_assert_int_eq(bwc_server_error(c), 0);
	ck_assert_int_eq(bwc_fd(c), -1);

	/* A socket file nobody listens on. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	strcpy(sa.sun_path, d->sock);
	ck_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	close(fd);
	rc = bwc_connect(c, d->sock, NULL);
	ck_assert_msg(rc == BWC_EUNREACHABLE, "dead socket: %d (%s)", rc, bwc_errmsg(c));
	ck_assert(strstr(bwc_errmsg(c), d->sock) != NULL);

	/* $BITWHEEL_SOCKET when the path is NULL. */
	setenv("BITWHEEL_SOCKET", missing, 1);
	ck_assert_str_eq(bwc_default_socket(), missing);
	rc = bwc_connect(c, NULL, NULL);
	ck_assert_int_eq(rc, BWC_EUNREACHABLE);
	ck_assert(strstr(bwc_errmsg(c), missing) != NULL);
	unsetenv("BITWHEEL_SOCKET");
	ck_assert_str_eq(bwc_default_socket(), BWC_DEFAULT_SOCKET);

	/* Once the daemon runs there, the same client connects. */
	du_daemon_start(d, NULL);
	CK_BWC(c, bwc_connect(c, d->sock, NULL));
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_server_errors)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c, *c2;
	struct bwc_timer t = { .key = 1, .when_ns = 3600 * DU_S };
	struct bwc_stats st;
	struct bwc_fire f;
	char big[200];
	int rc;

	memset(big, 'b', sizeof(big));
	du_daemon_start(d, "--max-timers", "2", "--max-payload", "100", "--max-clients", "2",
			"--max-clients-per-uid", "2", NULL);
	c = connect_to(d, "e2e-errors");

	CK_BWC(c, bwc_schedule(c, &t, NULL));
	rc = bwc_schedule(c, &t, NULL);
	ck_assert_int_eq(rc, BWC_ESERVER);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_DUPLICATE_KEY);
	ck_assert_msg(strstr(bwc_errmsg(c), "DUPLICATE_KEY") != NULL, "errmsg: %s",
		      bwc_errmsg(c));
	ck_assert_str_eq(bwc_server_error_name(BWC_SERVER_DUPLICATE_KEY), "DUPLICATE_KEY");

	/* A failure of another kind resets the server code: here waiting for
	 * a fire on a producer (a named session's default). */
	ck_assert_int_eq(bwc_wait_fire(c, 0, &f), BWC_EROLE);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_UNSPECIFIED);

	t.key = 2;
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	t.key = 3;
	ck_assert_int_eq(bwc_schedule(c, &t, NULL), BWC_ESERVER);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_TOO_MANY_TIMERS);

	t = (struct bwc_timer){ .key = 4, .when_ns = UINT64_MAX, .replace = true };
	ck_assert_int_eq(bwc_schedule(c, &t, NULL), BWC_ESERVER);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_BAD_DEADLINE);

	/* Client-side refusals: nothing reaches the daemon. */
	t = (struct bwc_timer){ .key = 5, .when_ns = DU_MS, .payload = big, .payload_len = 101,
				.replace = true };
	ck_assert_int_eq(bwc_schedule(c, &t, NULL), BWC_ETOOBIG);
	t.payload = NULL;
	t.payload_len = 3;
	ck_assert_int_eq(bwc_schedule(c, &t, NULL), BWC_EINVAL);
	CK_BWC(c, bwc_stats(c, &st));
	ck_assert_uint_eq(st.oneshot.inserted, 2);

	/* Sessions are shared: a second connection attaches beside c.  Then
	 * the daemon sees it go before the limit is tried. */
	c2 = new_client();
	CK_BWC(c2, bwc_connect(c2, d->sock, "e2e-errors"));
	{
		struct bwc_session_info info;

		CK_BWC(c2, bwc_get_session_info(c2, &info));
		ck_assert(info.resumed);
		ck_assert_uint_eq(info.timers, 2);
		ck_assert_int_eq(info.role, BWC_ROLE_PRODUCER);
	}
	bwc_close(c2);
	ck_assert_int_eq(bwc_connect(c2, d->sock, "bad name!"), BWC_EINVAL);
	for (uint64_t until = du_now_ns() + DU_WAIT_MS * DU_MS;;) {
		CK_BWC(c, bwc_stats(c, &st));
		if (st.clients == 1)
			break;
		ck_assert_msg(du_now_ns() < until, "the second client never went");
		du_sleep_ms(10);
	}

	/* TOO_MANY_CLIENTS: with c and a raw connection, the limit of 2 is
	 * reached. */
	{
		struct du_conn *raw = du_open(d, NULL);

		rc = bwc_connect(c2, d->sock, NULL);
		ck_assert_msg(rc == BWC_ESERVER, "connect over the limit: %d (%s)", rc,
			      bwc_errmsg(c2));
		ck_assert_int_eq(bwc_server_error(c2), BWC_SERVER_TOO_MANY_CLIENTS);
		du_conn_free(raw);
	}
	bwc_free(c2);
	/* c is unharmed by all of it. */
	CK_BWC(c, bwc_stats(c, &st));
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* SIGTERM: a client waiting for fires learns SHUTTING_DOWN. */
START_TEST(test_shutting_down)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_fire f;
	struct bwc_stats st;
	int rc;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	/* What a caller that reconnects by hand sees (the header's recipe). */
	CK_BWC(c, bwc_set_reconnect(c, false));
	ck_assert(kill(d->pid, SIGTERM) == 0);
	rc = bwc_wait_fire(c, (int64_t)DU_WAIT_MS * (int64_t)DU_MS, &f);
	ck_assert_msg(rc == BWC_ESERVER, "wait_fire while the daemon stops: %d (%s)", rc,
		      bwc_errmsg(c));
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_SHUTTING_DOWN);
	ck_assert_int_eq(bwc_fd(c), -1);
	ck_assert_int_eq(bwc_stats(c, &st), BWC_ECLOSED);
	du_assert_exit(d, du_daemon_stop(d, 0, DU_WAIT_MS), 0);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * consumer
 * ====================================================================== */

/* A client of session in role, with a window (0: the default) and the
 * named session's default ack mode (manual for a consumer). */
static struct bwc_client *attach(const struct du_daemon *d, const char *session,
				 enum bwc_role role, uint32_t window)
{
	struct bwc_client *c = new_client();

	CK_BWC(c, bwc_set_role(c, role));
	CK_BWC(c, bwc_set_window(c, window));
	CK_BWC(c, bwc_connect(c, d->sock, session));
	return c;
}

static void role_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	(void)c;
	(void)f;
	(*(int *)arg)++;
}

/*
 * A producer and a consumer of one named session: the producer schedules,
 * the consumer receives and acknowledges; what a producer cannot do is
 * BWC_EROLE, with a message naming the fix.
 */
START_TEST(test_roles)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *p, *k;
	struct bwc_session_info info;
	struct bwc_timer t = { .key = 1, .when_ns = 20 * DU_MS };
	struct bwc_fire f, fake = { .key = 1, .delivery = 1, .connection = 1 };
	struct bwc_stats st;
	uint64_t acked = 99;
	int calls = 0, rc;

	du_daemon_start(d, NULL);
	p = connect_to(d, "e2e-roles");                 /* the default */
	CK_BWC(p, bwc_get_session_info(p, &info));
	ck_assert_int_eq(info.role, BWC_ROLE_PRODUCER);
	ck_assert_uint_eq(info.window, 0);
	ck_assert(!info.auto_ack);
	ck_assert_uint_eq(info.consumers, 0);

	rc = bwc_wait_fire(p, 0, &f);
	ck_assert_msg(rc == BWC_EROLE, "wait_fire on a producer: %d (%s)", rc, bwc_errmsg(p));
	ck_assert_msg(strstr(bwc_errmsg(p), "bwc_set_role") != NULL, "errmsg: %s",
		      bwc_errmsg(p));
	ck_assert_int_eq(bwc_ack(p, &fake, true, NULL), BWC_EROLE);
	ck_assert_int_eq(bwc_send_ack(p, &fake, true), BWC_EROLE);
	bwc_set_fire_handler(p, role_fire, &calls);
	ck_assert_int_eq(bwc_dispatch(p), BWC_EROLE);
	ck_assert_int_ge(bwc_fd(p), 0);                 /* still connected */
	bwc_set_fire_handler(p, NULL, NULL);
	ck_assert_int_eq(bwc_dispatch(p), 0);
	ck_assert_int_eq(bwc_ack(p, NULL, true, NULL), BWC_EINVAL);
	fake.connection = 0;
	ck_assert_int_eq(bwc_ack(p, &fake, true, NULL), BWC_EINVAL);
	ck_assert_str_eq(bwc_strerror(BWC_EROLE), "not allowed in this connection's role");
	ck_assert(strstr(bwc_strerror(BWC_ESTALE), "earlier connection") != NULL);

	k = attach(d, "e2e-roles", BWC_ROLE_CONSUMER, 0);
	CK_BWC(k, bwc_get_session_info(k, &info));
	ck_assert(info.resumed);
	ck_assert_int_eq(info.role, BWC_ROLE_CONSUMER);
	ck_assert(!info.auto_ack);
	ck_assert_uint_eq(info.window, 256);
	ck_assert_uint_eq(info.consumers, 1);

	/* The producer schedules; the consumer gets the fire, the producer
	 * nothing. */
	CK_BWC(p, bwc_schedule(p, &t, NULL));
	CK_BWC(k, bwc_wait_fire(k, 2 * (int64_t)DU_S, &f));
	ck_assert_uint_eq(f.key, 1);
	ck_assert_uint_eq(f.delivery, 1);
	ck_assert_uint_eq(f.connection, 1);
	ck_assert_int_eq(bwc_wait_fire(p, 0, &f), BWC_EROLE);
	CK_BWC(p, bwc_stats(p, &st));
	ck_assert_uint_eq(st.consumers, 1);
	ck_assert_uint_eq(st.in_flight, 1);
	CK_BWC(k, bwc_ack(k, &f, false, &acked));
	ck_assert_uint_eq(acked, 1);
	CK_BWC(p, bwc_stats(p, &st));
	ck_assert_uint_eq(st.in_flight, 0);
	ck_assert_uint_eq(st.acked, 1);
	bwc_free(p);
	bwc_free(k);
	du_daemon_free(d);
}
END_TEST

#define NWIN 24
#define WIN 4

/*
 * A consumer with window 4: whatever the session has queued, no more than
 * 4 fires are ever unacknowledged, counted on the client's side (every
 * delivery number is at most the last acknowledged plus 4), and with 4 in
 * hand nothing more comes until an ack.
 */
START_TEST(test_window)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *p, *k;
	struct bwc_session_info info;
	struct bwc_stats st;
	struct bwc_fire f, last;
	int seen[NWIN] = { 0 };
	uint64_t t0, acked_upto = 0, got = 0, stalls = 0, acked;

	du_daemon_start(d, NULL);
	p = connect_to(d, "e2e-window");
	t0 = bwc_now_ns();
	for (uint64_t i = 0; i < NWIN; i++) {
		struct bwc_timer t = { .key = i, .absolute = true,
				       .when_ns = t0 + 30 * DU_MS + i * DU_MS };

		CK_BWC(p, bwc_schedule(p, &t, NULL));
	}
	/* All due and queued before the consumer attaches. */
	du_sleep_until(t0 + 30 * DU_MS + NWIN * DU_MS + 100 * DU_MS);
	k = attach(d, "e2e-window", BWC_ROLE_CONSUMER, WIN);
	CK_BWC(k, bwc_get_session_info(k, &info));
	ck_assert_uint_eq(info.window, WIN);
	ck_assert_uint_eq(info.queued, NWIN);

	while (got < NWIN) {
		CK_BWC(k, bwc_wait_fire(k, 2 * (int64_t)DU_S, &f));
		got++;
		ck_assert(f.key < NWIN);
		ck_assert_msg(!f.redelivered, "key %" PRIu64 " redelivered", f.key);
		seen[f.key]++;
		ck_assert_uint_eq(f.delivery, got);
		ck_assert_msg(f.delivery - acked_upto <= WIN,
			      "delivery %" PRIu64 " with only %" PRIu64 " acknowledged, window %d",
			      f.delivery, acked_upto, WIN);
		last = f;
		if (f.delivery - acked_upto < WIN && got < NWIN)
			continue;
		/* A full window: the client holds nothing more, and nothing
		 * more comes (checked twice: each wait costs its timeout). */
		if (got < NWIN && stalls++ < 2)
			ck_assert_int_eq(bwc_wait_fire(k, 150 * (int64_t)DU_MS, &f),
					 BWC_ETIMEDOUT);
		CK_BWC(k, bwc_send_ack(k, &last, true));
		acked_upto = last.delivery;
	}
	for (int i = 0; i < NWIN; i++)
		ck_assert_msg(seen[i] == 1, "key %d seen %d times", i, seen[i]);
	/* The acks without reply are all in once a blocking one returns. */
	CK_BWC(k, bwc_ack(k, &last, true, &acked));
	ck_assert_uint_eq(acked, 0);
	CK_BWC(p, bwc_stats(p, &st));
	ck_assert_uint_eq(st.in_flight, 0);
	ck_assert_uint_eq(st.acked, NWIN);
	ck_assert_uint_eq(st.queued, 0);
	ck_assert_uint_eq(st.redelivered, 0);
	bwc_free(p);
	bwc_free(k);
	du_daemon_free(d);
}
END_TEST

/* bwc_ack's count: single and cumulative, 0 for fires already done. */
START_TEST(test_ack_counts)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *k;
	struct bwc_fire f[5];
	struct bwc_stats st;
	uint64_t t0, acked;

	du_daemon_start(d, NULL);
	/* A consumer schedules too. */
	k = attach(d, "e2e-ackc", BWC_ROLE_CONSUMER, 0);
	t0 = bwc_now_ns();
	for (uint64_t i = 0; i < 5; i++) {
		struct bwc_timer t = { .key = i, .absolute = true,
				       .when_ns = t0 + 20 * DU_MS + i * 5 * DU_MS };

		CK_BWC(k, bwc_schedule(k, &t, NULL));
	}
	for (uint64_t i = 0; i < 5; i++) {
		CK_BWC(k, bwc_wait_fire(k, 2 * (int64_t)DU_S, &f[i]));
		ck_assert_uint_eq(f[i].key, i);
		ck_assert_uint_eq(f[i].delivery, i + 1);
	}
	CK_BWC(k, bwc_ack(k, &f[2], false, &acked));
	ck_assert_uint_eq(acked, 1);
	CK_BWC(k, bwc_ack(k, &f[2], false, &acked));
	ck_assert_uint_eq(acked, 0);
	CK_BWC(k, bwc_ack(k, &f[4], true, &acked));
	ck_assert_uint_eq(acked, 4);
	CK_BWC(k, bwc_ack(k, &f[4], true, NULL));
	CK_BWC(k, bwc_stats(k, &st));
	ck_assert_uint_eq(st.acked, 5);
	ck_assert_uint_eq(st.in_flight, 0);
	/* All done: a new connection gets nothing again. */
	CK_BWC(k, bwc_reconnect(k));
	ck_assert_int_eq(bwc_wait_fire(k, 200 * (int64_t)DU_MS, &f[0]), BWC_ETIMEDOUT);
	CK_BWC(k, bwc_stats(k, &st));
	ck_assert_uint_eq(st.redelivered, 0);
	bwc_free(k);
	du_daemon_free(d);
}
END_TEST

/*
 * A manual-ack consumer reconnects with fires unacknowledged: one handed
 * out (its ack is now BWC_ESTALE) and two still queued in the client
 * (discarded).  The new connection receives all three again, first, in
 * their order, marked redelivered, numbered afresh.
 */
START_TEST(test_stale_after_reconnect)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *k;
	struct bwc_stats st;
	struct bwc_fire f, first;
	uint64_t t0, acked;
	int rc;

	du_daemon_start(d, NULL);
	k = attach(d, "e2e-stale", BWC_ROLE_CONSUMER, 0);
	/* BWC_ESTALE is for callers that reconnect by hand; reconnecting by
	 * itself the client drops such acks (test_reconnect_consumer). */
	CK_BWC(k, bwc_set_reconnect(k, false));
	t0 = bwc_now_ns();
	for (uint64_t i = 1; i <= 3; i++) {
		struct bwc_timer t = { .key = i, .absolute = true,
				       .when_ns = t0 + 20 * DU_MS + i * 5 * DU_MS };

		CK_BWC(k, bwc_schedule(k, &t, NULL));
	}
	CK_BWC(k, bwc_wait_fire(k, 2 * (int64_t)DU_S, &first));
	ck_assert_uint_eq(first.key, 1);
	/* The other two reach the client during a blocking call. */
	du_sleep_until(t0 + 20 * DU_MS + 15 * DU_MS + 100 * DU_MS);
	CK_BWC(k, bwc_stats(k, &st));
	ck_assert_uint_eq(st.in_flight, 3);

	CK_BWC(k, bwc_reconnect(k));
	rc = bwc_ack(k, &first, true, NULL);
	ck_assert_msg(rc == BWC_ESTALE, "ack of the old connection's fire: %d (%s)", rc,
		      bwc_errmsg(k));
	ck_assert(strstr(bwc_errmsg(k), "earlier connection") != NULL);
	ck_assert_int_eq(bwc_send_ack(k, &first, false), BWC_ESTALE);
	for (uint64_t i = 1; i <= 3; i++) {
		CK_BWC(k, bwc_wait_fire(k, 2 * (int64_t)DU_S, &f));
		ck_assert_msg(f.key == i && f.connection == 2 && f.redelivered,
			      "fire %" PRIu64 " after the reconnect: key %" PRIu64
			      " connection %" PRIu64 " redelivered %d", i, f.key, f.connection,
			      f.redelivered);
		ck_assert_uint_eq(f.delivery, i);
	}
	ck_assert_int_eq(bwc_wait_fire(k, 100 * (int64_t)DU_MS, &f), BWC_ETIMEDOUT);
	CK_BWC(k, bwc_ack(k, &f, true, &acked));
	ck_assert_uint_eq(acked, 3);
	CK_BWC(k, bwc_stats(k, &st));
	ck_assert_uint_eq(st.redelivered, 3);
	ck_assert_uint_eq(st.in_flight, 0);

	/* bwc_close does the same discarding: a fire queued, then closed. */
	{
		struct bwc_timer t = { .key = 9, .when_ns = 10 * DU_MS };

		CK_BWC(k, bwc_schedule(k, &t, NULL));
		du_sleep_ms(100);
		CK_BWC(k, bwc_stats(k, &st));          /* reads the fire */
		bwc_close(k);
		ck_assert_int_eq(bwc_wait_fire(k, 0, &f), BWC_ECLOSED);
		CK_BWC(k, bwc_reconnect(k));
		CK_BWC(k, bwc_wait_fire(k, 2 * (int64_t)DU_S, &f));
		ck_assert(f.key == 9 && f.redelivered && f.connection == 3);
	}
	bwc_free(k);
	du_daemon_free(d);
}
END_TEST

#define NNBC 100
#define NBWIN 8

struct nbc_state {
	int seen[NNBC];
	uint64_t got, acked_upto, max_unacked;
	struct bwc_fire last;
	bool have_last;
};

static void nbc_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct nbc_state *s = arg;

	(void)c;
	ck_assert(f->key < NNBC);
	ck_assert(!f->redelivered);
	s->seen[f->key]++;
	s->got++;
	ck_assert_uint_eq(f->delivery, s->got);
	if (f->delivery - s->acked_upto > s->max_unacked)
		s->max_unacked = f->delivery - s->acked_upto;
	s->last = *f;             /* the payload is not kept: acks need none */
	s->have_last = true;
}

/*
 * The non-blocking idiom: the fire handler handles, and after each
 * bwc_dispatch one cumulative bwc_send_ack covers the batch.  With window
 * 8, never more than 8 unacknowledged; every fire exactly once.
 */
START_TEST(test_nonblocking_consumer)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *p, *k;
	struct nbc_state *s = calloc(1, sizeof(*s));
	struct bwc_stats st;
	uint64_t t0, deadline;

	ck_assert_ptr_nonnull(s);
	du_daemon_start(d, NULL);
	k = attach(d, "e2e-nbc", BWC_ROLE_CONSUMER, NBWIN);
	bwc_set_fire_handler(k, nbc_fire, s);
	p = connect_to(d, "e2e-nbc");
	t0 = bwc_now_ns();
	for (uint64_t i = 0; i < NNBC; i++) {
		struct bwc_timer t = { .key = i, .absolute = true,
				       .when_ns = t0 + 20 * DU_MS + (i % 10) * DU_MS };

		ck_assert_int_eq(bwc_send_schedule(p, &t, NULL, NULL), 0);
	}
	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	while (s->got < NNBC) {
		struct pollfd pf[2] = { { bwc_fd(k), bwc_poll_events(k), 0 },
					{ bwc_fd(p), bwc_poll_events(p), 0 } };

		ck_assert_msg(du_now_ns() < deadline, "%" PRIu64 " of %d fires", s->got, NNBC);
		poll(pf, 2, 50);
		ck_assert_int_eq(bwc_dispatch(p), 0);
		ck_assert_msg(bwc_dispatch(k) == 0, "bwc_dispatch: %s", bwc_errmsg(k));
		if (s->have_last && s->last.delivery > s->acked_upto) {
			CK_BWC(k, bwc_send_ack(k, &s->last, true));
			s->acked_upto = s->last.delivery;
		}
	}
	for (int i = 0; i < NNBC; i++)
		ck_assert_msg(s->seen[i] == 1, "key %d seen %d times", i, s->seen[i]);
	ck_assert_msg(s->max_unacked <= NBWIN, "%" PRIu64 " unacknowledged, window %d",
		      s->max_unacked, NBWIN);
	CK_BWC(k, bwc_ack(k, &s->last, true, NULL));
	CK_BWC(p, bwc_stats(p, &st));
	ck_assert_uint_eq(st.acked, NNBC);
	ck_assert_uint_eq(st.in_flight, 0);
	bwc_free(p);
	bwc_free(k);
	free(s);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * owner
 * ====================================================================== */

#define NOBODY 65534

/* In the child: say what went wrong and exit with code. */
static void child_fail(int code, const char *what, const struct bwc_client *c)
{
	fprintf(stderr, "uid %d client: %s: %s\n", NOBODY, what,
		c ? bwc_errmsg(c) : "");
	fflush(stderr);
	_exit(code);
}

/*
 * Session names are per uid (PROTOCOL.md 7).  Everyone: the session info
 * says whose namespace a session is in (the caller's); an owner for an
 * anonymous session is refused before anything is sent.  Root: the same
 * name with owner 65534 is another session than root's own (a key
 * scheduled in one is not pending in the other), it stays 65534's across
 * bwc_reconnect, and 65534 itself attaches to it; 65534 naming root's
 * namespace gets PERMISSION_DENIED.
 */
START_TEST(test_owner)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_session_info info;
	struct bwc_client *c, *o;
	struct bwc_timer t = { .key = 7, .when_ns = 3600 * DU_S };
	bool pending = true;
	pid_t pid;
	int rc;

	/* A client running as nobody must reach the socket. */
	ck_assert(chmod(d->dir, 0755) == 0);
	du_daemon_start(d, "--socket-mode", "0666", NULL);

	/* A named session is the caller's uid's, and says so. */
	c = connect_to(d, "e2e-owner");
	CK_BWC(c, bwc_get_session_info(c, &info));
	ck_assert(!info.resumed);
	ck_assert_uint_eq(info.owner_uid, getuid());
	bwc_free(c);
	/* An anonymous one is nobody's namespace: 0. */
	c = connect_to(d, NULL);
	CK_BWC(c, bwc_get_session_info(c, &info));
	ck_assert_uint_eq(info.owner_uid, 0);
	bwc_close(c);

	/* The range, checked when set; negative is "my own". */
	ck_assert_int_eq(bwc_set_owner_uid(NULL, 1), BWC_EINVAL);
	ck_assert_int_eq(bwc_set_owner_uid(c, (int64_t)UINT32_MAX + 1), BWC_EINVAL);
	ck_assert_msg(strstr(bwc_errmsg(c), "owner uid") != NULL, "errmsg: %s",
		      bwc_errmsg(c));
	CK_BWC(c, bwc_set_owner_uid(c, -5));
	CK_BWC(c, bwc_connect(c, d->sock, NULL));      /* -5: nothing to send */
	bwc_close(c);

	/* An owner names whose namespace a name is in: anonymous is
	 * BWC_EINVAL, at connect and at reconnect, with nothing sent. */
	CK_BWC(c, bwc_set_owner_uid(c, getuid()));
	rc = bwc_connect(c, d->sock, NULL);
	ck_assert_msg(rc == BWC_EINVAL, "anonymous with an owner: %d (%s)", rc, bwc_errmsg(c));
	ck_assert_msg(strstr(bwc_errmsg(c), "owner uid") != NULL &&
		      strstr(bwc_errmsg(c), "named session") != NULL, "errmsg: %s",
		      bwc_errmsg(c));
	ck_assert_int_eq(bwc_fd(c), -1);
	ck_assert_int_eq(bwc_reconnect(c), BWC_EINVAL);
	ck_assert_int_eq(bwc_fd(c), -1);
	/* Naming one's own uid is the same as not naming one. */
	CK_BWC(c, bwc_connect(c, d->sock, "e2e-owner"));
	CK_BWC(c, bwc_get_session_info(c, &info));
	ck_assert(info.resumed);
	ck_assert_uint_eq(info.owner_uid, getuid());
	bwc_free(c);

	if (geteuid() != 0) {
		/* Check has no "skip": the test passes and says so. */
		du_note("SKIP: test_owner's owner_uid part needs root (to name uid %d's "
			"namespace and to run a client as uid %d)", NOBODY, NOBODY);
		du_daemon_free(d);
		return;
	}

	/* Root in nobody's namespace: a new session, nobody's, holding key 7. */
	o = new_client();
	CK_BWC(o, bwc_set_owner_uid(o, NOBODY));
	CK_BWC(o, bwc_connect(o, d->sock, "e2e-owner"));
	CK_BWC(o, bwc_get_session_info(o, &info));
	ck_assert(!info.resumed);
	ck_assert_uint_eq(info.owner_uid, NOBODY);
	CK_BWC(o, bwc_schedule(o, &t, NULL));
	/* Root's own "e2e-owner" is another session: no key 7 in it. */
	c = connect_to(d, "e2e-owner");
	CK_BWC(c, bwc_get_session_info(c, &info));
	ck_assert(info.resumed);
	ck_assert_uint_eq(info.owner_uid, 0);
	ck_assert_uint_eq(info.timers, 0);
	CK_BWC(c, bwc_cancel(c, 7, &pending));
	ck_assert_msg(!pending, "root's own session cancelled nobody's key 7");
	bwc_free(c);
	/* The owner is remembered: a reconnect is back in nobody's. */
	CK_BWC(o, bwc_reconnect(o));
	CK_BWC(o, bwc_get_session_info(o, &info));
	ck_assert(info.resumed);
	ck_assert_uint_eq(info.owner_uid, NOBODY);
	ck_assert_uint_eq(info.timers, 1);
	bwc_free(o);

	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		struct bwc_client *n = NULL;

		du_become(NOBODY);
		if (bwc_new(&n) != 0)
			child_fail(2, "bwc_new", NULL);
		bwc_set_timeout(n, (int64_t)DU_WAIT_MS * (int64_t)DU_MS);
		/* Root's namespace is not nobody's to name. */
		bwc_set_owner_uid(n, 0);
		rc = bwc_connect(n, d->sock, "e2e-owner");
		if (rc != BWC_ESERVER ||
		    bwc_server_error(n) != BWC_SERVER_PERMISSION_DENIED)
			child_fail(3, "owner 0: not PERMISSION_DENIED", n);
		if (strstr(bwc_errmsg(n), "PERMISSION_DENIED") == NULL)
			child_fail(4, "the message does not name the code", n);
		if (bwc_fd(n) != -1)
			child_fail(5, "connected after a refused Hello", n);
		/* Its own "e2e-owner" is the one root made for it. */
		bwc_set_owner_uid(n, -1);
		if (bwc_connect(n, d->sock, "e2e-owner") != 0)
			child_fail(6, "connect to its own session", n);
		if (bwc_get_session_info(n, &info) != 0 || !info.resumed ||
		    info.owner_uid != NOBODY || info.timers != 1)
			child_fail(7, "its session is not the one root made", n);
		if (bwc_cancel(n, 7, &pending) != 0 || !pending)
			child_fail(8, "key 7 not pending in its session", n);
		bwc_free(n);
		_exit(0);
	}
	ck_assert_msg(du_wait_child(pid, DU_WAIT_MS) == 0,
		      "the uid %d client failed (see above)", NOBODY);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * peer
 * ====================================================================== */

/* A connect to the stand-in that must be refused: BWC_EPEER, a message
 * naming the socket, the listener's uid and pid and how to trust it, not
 * connected, and not a byte sent. */
static void assert_refused(struct bwc_client *c, struct du_fake *f, int rc,
			   const char *also)
{
	char want[64];

	ck_assert_msg(rc == BWC_EPEER, "uid %d's listener: %d (%s)", NOBODY, rc,
		      bwc_errmsg(c));
	ck_assert_int_eq(bwc_fd(c), -1);
	snprintf(want, sizeof(want), "uid %d (pid %ld)", NOBODY, (long)f->pid);
	ck_assert_msg(strstr(bwc_errmsg(c), f->sock) != NULL &&
		      strstr(bwc_errmsg(c), want) != NULL &&
		      strstr(bwc_errmsg(c), BWC_DAEMON_USER_ENV) != NULL &&
		      strstr(bwc_errmsg(c), also) != NULL,
		      "message without the socket, \"%s\", $%s or \"%s\": %s", want,
		      BWC_DAEMON_USER_ENV, also, bwc_errmsg(c));
	ck_assert_uint_eq(du_fake_next_conn(f, DU_WAIT_MS), 0);
}

/* A connect to the stand-in that must go through: its Hello answered,
 * and the bytes of the Hello seen on its side. */
static void assert_accepted(struct bwc_client *c, struct du_fake *f, int rc)
{
	struct bwc_session_info info;

	ck_assert_msg(rc == 0, "uid %d's listener, trusted: %d (%s)", NOBODY, rc,
		      bwc_errmsg(c));
	CK_BWC(c, bwc_get_session_info(c, &info));
	ck_assert_str_eq(info.daemon_version, "fake");
	bwc_close(c);
	ck_assert_uint_gt(du_fake_next_conn(f, DU_WAIT_MS), 0);
}

/*
 * Who may listen.  A real daemon of the test's own uid is trusted (every
 * other test relies on it too).  As root: a stand-in listening as uid
 * 65534 is refused unless its user is named, by number or name, with the
 * setter or $BITWHEEL_DAEMON_USER, the setter winning; an unknown name
 * trusts nobody; each reconnect checks again.  As uid 65534, the same
 * listener is its own and trusted.
 */
START_TEST(test_peer)
{
	struct du_daemon *d = du_daemon_new();
	struct passwd *pw = getpwuid(NOBODY);
	struct bwc_client *c;
	struct du_fake *f;
	pid_t pid;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	bwc_free(c);
	du_daemon_free(d);
	if (geteuid() != 0) {
		du_note("SKIP: test_peer's stand-in listener needs root (to run it as "
			"uid %d)", NOBODY);
		return;
	}

	unsetenv(BWC_DAEMON_USER_ENV);
	f = du_fake_start(NOBODY);
	c = new_client();
	ck_assert_int_eq(bwc_set_daemon_user(NULL, "x"), BWC_EINVAL);
	ck_assert_str_eq(bwc_strerror(BWC_EPEER),
			 "the socket's listener is not trusted to be the daemon");
	ck_assert_int_eq(bwc_set_daemon_user(c, ""), BWC_EINVAL);
	/* The default, "bitwheeld", is no user here or not 65534. */
	assert_refused(c, f, bwc_connect(c, f->sock, NULL), "\"" BWC_DEFAULT_DAEMON_USER "\"");
	ck_assert_int_eq(bwc_reconnect(c), BWC_EPEER);
	ck_assert_uint_eq(du_fake_next_conn(f, DU_WAIT_MS), 0);

	CK_BWC(c, bwc_set_daemon_user(c, "65534"));
	assert_accepted(c, f, bwc_reconnect(c));
	if (pw != NULL) {
		CK_BWC(c, bwc_set_daemon_user(c, pw->pw_name));
		assert_accepted(c, f, bwc_reconnect(c));
	} else {
		du_note("no user name for uid %d: the by-name case is left out", NOBODY);
	}
	/* A name nobody has trusts nobody more, and says so. */
	CK_BWC(c, bwc_set_daemon_user(c, "bw-no-such-user"));
	assert_refused(c, f, bwc_reconnect(c), "no such user");
	/* Another uid is not this one. */
	CK_BWC(c, bwc_set_daemon_user(c, "65533"));
	assert_refused(c, f, bwc_reconnect(c), "(uid 65533)");

	/* The environment, when the setter names nobody; the setter wins. */
	setenv(BWC_DAEMON_USER_ENV, "65534", 1);
	CK_BWC(c, bwc_set_daemon_user(c, NULL));
	assert_accepted(c, f, bwc_reconnect(c));
	CK_BWC(c, bwc_set_daemon_user(c, "65533"));
	assert_refused(c, f, bwc_reconnect(c), "(uid 65533)");
	setenv(BWC_DAEMON_USER_ENV, "", 1);
	CK_BWC(c, bwc_set_daemon_user(c, NULL));
	assert_refused(c, f, bwc_reconnect(c), "\"" BWC_DEFAULT_DAEMON_USER "\"");
	unsetenv(BWC_DAEMON_USER_ENV);
	bwc_free(c);

	/* To uid 65534 itself, the listener is its own. */
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		struct bwc_client *n = NULL;

		du_become(NOBODY);
		if (bwc_new(&n) != 0)
			child_fail(2, "bwc_new", NULL);
		bwc_set_timeout(n, (int64_t)DU_WAIT_MS * (int64_t)DU_MS);
		if (bwc_connect(n, f->sock, NULL) != 0)
			child_fail(3, "its own uid's listener refused", n);
		bwc_free(n);
		_exit(0);
	}
	ck_assert_msg(du_wait_child(pid, DU_WAIT_MS) == 0,
		      "the uid %d client failed (see above)", NOBODY);
	ck_assert_uint_gt(du_fake_next_conn(f, DU_WAIT_MS), 0);
	du_fake_free(f);
}
END_TEST

/*
 * struct bwc_stats is caller-allocated ABI (bitwheel-client.h): 384 bytes
 * whatever it holds, its reserved tail zeroed by the library; and the
 * caller's uid's figures, blocking and non-blocking, match what it holds:
 * 3 connections (this one too), 2 named sessions, 3 timers, one of them
 * periodic at 10 Hz.  The session info's limits carry the per-uid budgets
 * the daemon was given, and its reserved slots (and bwc_limits') are 0.
 */
struct stats_seen {
	int calls;
	int status;
	struct bwc_stats st;
};

static void stats_seen(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct stats_seen *s = arg;

	(void)c;
	s->calls++;
	s->status = r->status;
	if (r->status == 0)
		s->st = *r->stats;
}

/* Every reserved slot of an array of n: 0. */
static void assert_zeroed(const uint64_t *reserved, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(reserved[i] == 0, "%s.reserved[%zu] = %#" PRIx64, what, i,
			      reserved[i]);
}

#define ASSERT_ZEROED(r, what) assert_zeroed((r), sizeof(r) / sizeof((r)[0]), (what))

static void assert_uid_stats(const struct bwc_stats *st)
{
	ck_assert_uint_eq(st->uid_connections, 3);
	ck_assert_uint_eq(st->uid_sessions, 2);
	ck_assert_uint_eq(st->uid_timers, 3);
	ck_assert_uint_eq(st->uid_periodic_rate_mhz, 10000);
	/* Three timers' bytes, and no more than the budget allows. */
	ck_assert_uint_gt(st->uid_bytes, 0);
	ck_assert_uint_le(st->uid_bytes, 1 << 20);
	ASSERT_ZEROED(st->reserved, "bwc_stats");
}

START_TEST(test_stats_uid)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *a, *b, *c;
	struct bwc_timer t = { .key = 1, .when_ns = 3600 * DU_S };
	struct bwc_session_info info;
	struct stats_seen seen = { 0 };
	struct bwc_stats st;

	ck_assert_uint_eq(sizeof(struct bwc_stats), 384);
	ck_assert_uint_eq(offsetof(struct bwc_stats, reserved) +
				  sizeof(((struct bwc_stats *)0)->reserved),
			  384);
#if defined(__x86_64__) || defined(__aarch64__)
	ck_assert_uint_eq(sizeof(struct bwc_limits), 160);
	ck_assert_uint_eq(sizeof(struct bwc_session_info), 512);
#endif
	du_daemon_start(d, "--max-sessions-per-uid", "50", "--max-timers-per-uid", "600",
			"--max-periodic-rate-per-uid", "70", "--max-clients-per-uid", "40",
			"--max-bytes-per-uid", "1048576", "--max-memory", "8388608",
			"--max-journal-per-uid", "2097152", "--hello-timeout", "2500ms", NULL);
	a = connect_to(d, "e2e-uid-a");
	/* The budgets, in the session info; its reserved slots 0. */
	memset(&info, 0xa5, sizeof(info));
	CK_BWC(a, bwc_get_session_info(a, &info));
	ck_assert_uint_eq(info.limits.max_clients_per_uid, 40);
	ck_assert_uint_eq(info.limits.max_sessions_per_uid, 50);
	ck_assert_uint_eq(info.limits.max_timers_per_uid, 600);
	ck_assert_uint_eq(info.limits.max_periodic_rate_per_uid, 70);
	ck_assert_uint_eq(info.limits.max_bytes_per_uid, 1048576);
	ck_assert_uint_eq(info.limits.max_memory_bytes, 8388608);
	ck_assert_uint_eq(info.limits.max_journal_bytes_per_uid, 2097152);
	ck_assert_uint_eq(info.limits.hello_timeout_ns, 2500 * DU_MS);
	ASSERT_ZEROED(info.limits.reserved, "bwc_limits");
	ASSERT_ZEROED(info.reserved, "bwc_session_info");
	b = connect_to(d, "e2e-uid-b");
	CK_BWC(a, bwc_schedule(a, &t, NULL));
	t.key = 2;
	CK_BWC(a, bwc_schedule(a, &t, NULL));
	t = (struct bwc_timer){ .key = 3, .when_ns = 3600 * DU_S, .period_ns = 100 * DU_MS };
	CK_BWC(b, bwc_schedule(b, &t, NULL));
	c = connect_to(d, NULL);

	memset(&st, 0xa5, sizeof(st));
	CK_BWC(c, bwc_stats(c, &st));
	assert_uid_stats(&st);
	ck_assert_uint_eq(st.clients, 3);
	ck_assert_uint_eq(st.sessions, 2);
	ck_assert_uint_eq(st.oneshot.pending + st.periodic.pending, 3);

	memset(&seen.st, 0xa5, sizeof(seen.st));
	ck_assert_int_eq(bwc_send_stats(c, stats_seen, &seen), 0);
	dispatch_until(c, &seen.calls, 1);
	ck_assert_int_eq(seen.status, 0);
	assert_uid_stats(&seen.st);

	bwc_free(a);
	bwc_free(b);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/*
 * bwc_metrics_scrape: one fire of a manual consumer, acknowledged, is one
 * queue wait in the oneshot lane and one ack latency, by the lateness'
 * bounds; a histogram id past BWC_HISTOGRAMS reads 0; the process figures
 * are all there (root), their reserved tail 0.  Anyone else gets none.
 */
START_TEST(test_metrics_scrape)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c = new_client();
	struct bwc_timer t = { .key = 1, .when_ns = DU_MS };
	struct bwc_histogram h[BWC_HISTOGRAMS + 1];
	struct bwc_metrics m;
	struct bwc_process p;
	struct bwc_fire f;
	uint64_t acked;

	ck_assert_uint_eq(sizeof(struct bwc_process), 128);
	du_daemon_start(d, NULL);
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_CONSUMER));
	CK_BWC(c, bwc_set_ack_mode(c, BWC_ACK_MANUAL));
	CK_BWC(c, bwc_connect(c, d->sock, "e2e-scrape"));
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	CK_BWC(c, bwc_wait_fire(c, (int64_t)DU_WAIT_MS * (int64_t)DU_MS, &f));
	CK_BWC(c, bwc_ack(c, &f, false, &acked));
	ck_assert_uint_eq(acked, 1);
	memset(h, 0xa5, sizeof(h));
	memset(&p, 0xa5, sizeof(p));
	CK_BWC(c, bwc_metrics_scrape(c, NULL, &m, h, BWC_HISTOGRAMS + 1, &p));
	ASSERT_ZEROED(h[BWC_HISTOGRAMS].le_ns, "a histogram past BWC_HISTOGRAMS");
	ck_assert_uint_eq(h[BWC_HISTOGRAMS].bounds + h[BWC_HISTOGRAMS].count, 0);
	ASSERT_ZEROED(p.reserved, "bwc_process");
	if (geteuid() != 0) {
		ck_assert(!m.present && !p.present);
		ck_assert_uint_eq(h[BWC_HISTOGRAM_ACK_LATENCY].count, 0);
		goto done;
	}
	ck_assert(m.present && p.present);
	ck_assert_uint_eq(h[BWC_HISTOGRAM_QUEUE_WAIT_ONESHOT].count, 1);
	ck_assert_uint_eq(h[BWC_HISTOGRAM_QUEUE_WAIT_PERIODIC].count, 0);
	ck_assert_uint_eq(h[BWC_HISTOGRAM_ACK_LATENCY].count, 1);
	ck_assert_uint_gt(h[BWC_HISTOGRAM_ACK_LATENCY].sum_ns, 0);
	for (int i = BWC_HISTOGRAM_QUEUE_WAIT_ONESHOT; i <= BWC_HISTOGRAM_ACK_LATENCY; i++) {
		ck_assert_uint_eq(h[i].bounds, m.lateness_bounds);
		ck_assert(memcmp(h[i].le_ns, m.lateness_le_ns,
				 m.lateness_bounds * sizeof(uint64_t)) == 0);
		ASSERT_ZEROED(h[i].reserved, "bwc_histogram");
	}
	/* A fire is handed out after the daemon fired it. */
	ck_assert_uint_ge(h[BWC_HISTOGRAM_QUEUE_WAIT_ONESHOT].sum_ns, m.lateness_sum_ns[0]);
	ck_assert(p.has_memory && p.has_open_fds && p.has_max_fds && p.has_cpu &&
		  p.has_start_time);
	ck_assert_uint_gt(p.resident_bytes, 0);
	ck_assert_uint_ge(p.virtual_bytes, p.resident_bytes);
	ck_assert_uint_gt(p.open_fds, 0);
	ck_assert_uint_ge(p.max_fds, p.open_fds);
	ck_assert_uint_gt(p.start_time_ns, 0);
done:
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * restart
 * ====================================================================== */

/*
 * A named session across a daemon crash and restart, without --state-dir
 * (PROTOCOL.md 8), for an auto-ack consumer:
 *   kept:  the client's path, session name and settings (bwc_reconnect()
 *          needs no arguments), and fires that had reached the client
 *          before the connection broke (auto-ack: done on the daemon's
 *          side, so still handed out by bwc_wait_fire);
 *   lost:  every timer and the session itself: the reconnect creates a
 *          new session (resumed = false, no timers), a timer due after the
 *          crash never fires, and cancelling it finds nothing; replaying
 *          with replace = true arms it again.
 */
START_TEST(test_reconnect_restart)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_session_info info;
	struct bwc_timer t;
	struct bwc_scheduled sc;
	struct bwc_stats st;
	struct bwc_fire f;
	bool pending;
	int rc;

	du_daemon_start(d, NULL);
	c = new_client();
	/* bwc_reconnect by hand, as before the client did it by itself. */
	CK_BWC(c, bwc_set_reconnect(c, false));
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_CONSUMER));
	CK_BWC(c, bwc_set_ack_mode(c, BWC_ACK_AUTO));
	CK_BWC(c, bwc_connect(c, d->sock, "e2e-restart"));
	t = (struct bwc_timer){ .key = 1, .when_ns = 3600 * DU_S };
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	t = (struct bwc_timer){ .key = 2, .when_ns = 300 * DU_MS };
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	t = (struct bwc_timer){ .key = 3, .when_ns = DU_MS, .payload = "kept", .payload_len = 4 };
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	/* Key 3's fire reaches the client, which queues it during the Stats. */
	du_sleep_ms(50);
	CK_BWC(c, bwc_stats(c, &st));
	ck_assert_uint_eq(st.oneshot.fired, 1);

	du_daemon_kill(d);
	rc = bwc_stats(c, &st);
	ck_assert_msg(rc == BWC_ECLOSED, "request after the daemon died: %d (%s)", rc,
		      bwc_errmsg(c));
	ck_assert_int_eq(bwc_fd(c), -1);
	rc = bwc_reconnect(c);
	ck_assert_msg(rc == BWC_EUNREACHABLE, "reconnect with no daemon: %d (%s)", rc,
		      bwc_errmsg(c));
	ck_assert(strstr(bwc_errmsg(c), d->sock) != NULL);

	du_daemon_start(d, NULL);
	CK_BWC(c, bwc_reconnect(c));
	CK_BWC(c, bwc_get_session_info(c, &info));
	ck_assert_msg(!info.resumed && info.timers == 0,
		      "a restarted daemon without a journal resumed the session "
		      "(resumed=%d timers=%" PRIu64 ")", info.resumed, info.timers);
	ck_assert_int_eq(info.role, BWC_ROLE_CONSUMER);
	ck_assert(info.auto_ack);
	/* The fire that arrived before the crash is still here, from the
	 * first connection. */
	CK_BWC(c, bwc_wait_fire(c, 0, &f));
	ck_assert(f.key == 3 && f.payload_len == 4 && memcmp(f.payload, "kept", 4) == 0);
	ck_assert_uint_eq(f.connection, 1);
	/* Key 2 was due 300 ms after scheduling: gone with the old daemon. */
	ck_assert_int_eq(bwc_wait_fire(c, 400 * (int64_t)DU_MS, &f), BWC_ETIMEDOUT);
	CK_BWC(c, bwc_cancel(c, 1, &pending));
	ck_assert_msg(!pending, "key 1 survived the restart");
	/* Replay: replace = true arms the key whether or not it was kept. */
	t = (struct bwc_timer){ .key = 1, .when_ns = 20 * DU_MS, .replace = true };
	CK_BWC(c, bwc_schedule(c, &t, &sc));
	ck_assert(!sc.replaced);
	CK_BWC(c, bwc_wait_fire(c, 2 * (int64_t)DU_S, &f));
	ck_assert_uint_eq(f.key, 1);
	/* The new session is named: a second reconnect resumes it. */
	CK_BWC(c, bwc_reconnect(c));
	CK_BWC(c, bwc_get_session_info(c, &info));
	ck_assert(info.resumed);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * fallback
 * ====================================================================== */

/* An unsigned varint at p; returns the byte after it. */
static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	for (; v >= 0x80; v >>= 7)
		*p++ = (uint8_t)(v | 0x80);
	*p++ = (uint8_t)v;
	return p;
}

/* Append a frame of body [b, e) to out + *len. */
static void put_frame(uint8_t *out, size_t *len, const uint8_t *b, const uint8_t *e)
{
	size_t n = (size_t)(e - b);

	out[*len] = (uint8_t)(n >> 24);
	out[*len + 1] = (uint8_t)(n >> 16);
	out[*len + 2] = (uint8_t)(n >> 8);
	out[*len + 3] = (uint8_t)n;
	memcpy(out + *len + 4, b, n);
	*len += 4 + n;
}

/* Envelope field tag + length + a message body at [b, e), into p. */
static uint8_t *put_body(uint8_t *p, unsigned field, const uint8_t *b, const uint8_t *e)
{
	*p++ = (uint8_t)(field << 3 | 2);
	p = put_varint(p, (uint64_t)(e - b));
	memcpy(p, b, (size_t)(e - b));
	return p + (e - b);
}

#define ODD_DEADLINE UINT64_C(123456789012)
#define ODD_DELIVERY 300
#define ODD_ACKED 3

/*
 * The stand-in daemon's answer to env, in encodings bitwheeld never
 * writes but a protobuf reader must take (PROTOCOL.md: unknown fields,
 * any nonzero varint as true, over-long varints): a Hello gets a plain
 * HelloReply (without the version 2 fields: the client takes its own
 * defaults); a Schedule of key k a ScheduleReply carrying an unknown
 * field, then a Fired of k with payload "odd", redelivered spelt 2,
 * delivery ODD_DELIVERY and an unknown field; a Cancel of k a CancelReply
 * whose pending is an over-long 1, then a Fired of k with an empty
 * payload, no delivery and an unknown field; an Ack an AckReply of
 * acked ODD_ACKED with an unknown field.  Everything the client reads
 * here goes through protobuf-c.
 */
static size_t odd_answer(const Bitwheel__V1__Envelope *env, uint8_t *out)
{
	uint8_t msg[64], body[96], *m = msg, *b = body;
	size_t len = 0;

	if (env->body_case == BITWHEEL__V1__ENVELOPE__BODY_HELLO) {
		Bitwheel__V1__Envelope r;
		Bitwheel__V1__HelloReply hr = BITWHEEL__V1__HELLO_REPLY__INIT;

		bwp_reply_init(&r, env);
		hr.has_protocol_version = 1;
		hr.protocol_version = BWP_PROTOCOL_VERSION;
		hr.daemon_version = "odd";
		r.body_case = BITWHEEL__V1__ENVELOPE__BODY_HELLO_REPLY;
		r.hello_reply = &hr;
		return bwp_frame_pack(&r, SIZE_MAX, out, 256, &len) == 0 ? len : 0;
	}
	*b++ = 0x08;
	b = put_varint(b, env->request_id);
	if (env->body_case == BITWHEEL__V1__ENVELOPE__BODY_ACK) {
		*m++ = 0x08;                                  /* acked */
		m = put_varint(m, ODD_ACKED);
		*m++ = 0x78;                                  /* field 15 */
		*m++ = 0x02;
		b = put_body(b, BITWHEEL__V1__ENVELOPE__BODY_ACK_REPLY, msg, m);
		put_frame(out, &len, body, b);
		return len;
	}
	if (env->body_case == BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE) {
		*m++ = 0x08;                                  /* deadline_ns */
		m = put_varint(m, ODD_DEADLINE);
		*m++ = 0x10;                                  /* replaced */
		*m++ = 0x01;
		*m++ = 0x78;                                  /* field 15 */
		*m++ = 0x07;
		b = put_body(b, BITWHEEL__V1__ENVELOPE__BODY_SCHEDULE_REPLY, msg, m);
		put_frame(out, &len, body, b);
		m = msg;
		*m++ = 0x08;                                  /* key */
		m = put_varint(m, env->schedule->key);
		*m++ = 0x12;                                  /* payload */
		*m++ = 3;
		memcpy(m, "odd", 3);
		m += 3;
		*m++ = 0x18;                                  /* deadline_ns */
		m = put_varint(m, ODD_DEADLINE);
		*m++ = 0x38;                                  /* redelivered */
		*m++ = 0x02;
		*m++ = 0x40;                                  /* delivery */
		m = put_varint(m, ODD_DELIVERY);
		*m++ = 0x78;                                  /* field 15 */
		*m++ = 0x01;
	} else {
		*m++ = 0x08;                                  /* pending */
		*m++ = 0x81;
		*m++ = 0x00;
		b = put_body(b, BITWHEEL__V1__ENVELOPE__BODY_CANCEL_REPLY, msg, m);
		put_frame(out, &len, body, b);
		m = msg;
		*m++ = 0x08;                                  /* key */
		m = put_varint(m, env->cancel->key);
		*m++ = 0x12;                                  /* payload, empty */
		*m++ = 0x00;
		*m++ = 0x78;                                  /* field 15 */
		*m++ = 0x01;
	}
	b = put_body(body, BITWHEEL__V1__ENVELOPE__BODY_FIRED, msg, m);
	put_frame(out, &len, body, b);
	return len;
}

/* The stand-in daemon's thread (arg: the listening socket): one
 * connection, answered until EOF.  Returns NULL, or a string saying what
 * went wrong (Check's asserts belong to the test's thread). */
static void *odd_daemon(void *arg)
{
	uint8_t in[4096], out[512];
	size_t in_len = 0;
	const char *why = NULL;
	int fd = accept(*(int *)arg, NULL, NULL);

	if (fd < 0)
		return "accept failed";
	for (;;) {
		ssize_t n = read(fd, in + in_len, sizeof(in) - in_len);
		Bitwheel__V1__Envelope *env;
		size_t fl, len;

		if (n <= 0) {
			why = n == 0 ? NULL : "read failed";
			break;
		}
		in_len += (size_t)n;
		while (bwp_frame_parse(in, in_len, BWP_DEFAULT_MAX_FRAME, &env, &fl) == 0) {
			len = odd_answer(env, out);
			bwp_frame_free(env);
			if (len == 0 || write(fd, out, len) != (ssize_t)len) {
				close(fd);
				return "cannot answer";
			}
			memmove(in, in + fl, in_len - fl);
			in_len -= fl;
		}
	}
	close(fd);
	return (void *)why;
}

static void odd_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct err_seen *e = arg;

	(void)c;
	ck_assert_int_eq(r->status, 0);
	if (r->request == BWC_REQUEST_SCHEDULE) {
		ck_assert_uint_eq(r->scheduled.deadline_ns, ODD_DEADLINE);
		ck_assert(r->scheduled.replaced);
	} else {
		ck_assert(r->pending);
	}
	e->calls++;
}

static void odd_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct err_seen *e = arg;

	(void)c;
	if (f->key == 7) {
		ck_assert(f->payload_len == 3 && memcmp(f->payload, "odd", 3) == 0);
		ck_assert(f->redelivered);
		ck_assert_uint_eq(f->delivery, ODD_DELIVERY);
	} else {
		ck_assert_uint_eq(f->key, 8);
		ck_assert(f->payload != NULL && f->payload_len == 0);
	}
	e->status++;
}

/*
 * Replies and fires in encodings the fast path leaves to protobuf-c (from
 * a stand-in daemon): the client reads them all the same, through both
 * blocking calls and bwc_dispatch.
 */
START_TEST(test_unusual_encodings)
{
	struct du_daemon *d = du_daemon_new();
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct bwc_client *c = new_client();
	struct bwc_timer t = { .key = 7, .when_ns = DU_S };
	struct bwc_scheduled sc;
	struct bwc_fire f, f7;
	struct err_seen e = { 0 };
	uint64_t acked = 0;
	bool pending = false;
	pthread_t th;
	void *why;
	int lfd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->sock);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert(lfd >= 0);
	ck_assert(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ck_assert(listen(lfd, 1) == 0);
	ck_assert_int_eq(pthread_create(&th, NULL, odd_daemon, &lfd), 0);

	CK_BWC(c, bwc_connect(c, d->sock, NULL));
	CK_BWC(c, bwc_schedule(c, &t, &sc));
	ck_assert_uint_eq(sc.deadline_ns, ODD_DEADLINE);
	ck_assert(sc.replaced);
	CK_BWC(c, bwc_cancel(c, 8, &pending));
	ck_assert(pending);
	CK_BWC(c, bwc_wait_fire(c, 0, &f));
	ck_assert_uint_eq(f.key, 7);
	ck_assert(f.payload_len == 3 && memcmp(f.payload, "odd", 3) == 0);
	ck_assert_uint_eq(f.deadline_ns, ODD_DEADLINE);
	ck_assert(f.redelivered);
	ck_assert_uint_eq(f.delivery, ODD_DELIVERY);
	ck_assert_uint_eq(f.connection, 1);
	f7 = f;
	CK_BWC(c, bwc_wait_fire(c, 0, &f));
	ck_assert_uint_eq(f.key, 8);
	ck_assert_msg(f.payload != NULL && f.payload_len == 0,
		      "an empty payload must be non-NULL with length 0");
	/* No delivery number: nothing the client could acknowledge. */
	ck_assert_uint_eq(f.delivery, 0);
	ck_assert_int_eq(bwc_ack(c, &f, false, NULL), BWC_EINVAL);
	/* An AckReply protobuf-c reads (the HelloReply named no role: an
	 * anonymous session's connection is a consumer). */
	CK_BWC(c, bwc_ack(c, &f7, true, &acked));
	ck_assert_uint_eq(acked, ODD_ACKED);

	bwc_set_fire_handler(c, odd_fire, &e);
	ck_assert_int_eq(bwc_send_schedule(c, &t, odd_reply, &e), 0);
	ck_assert_int_eq(bwc_send_cancel(c, 8, odd_reply, &e), 0);
	dispatch_until(c, &e.status, 2);
	ck_assert_int_eq(e.calls, 2);

	bwc_free(c);
	ck_assert_int_eq(pthread_join(th, &why), 0);
	ck_assert_msg(why == NULL, "stand-in daemon: %s", (const char *)why);
	close(lfd);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * sigpipe
 * ====================================================================== */

/* With SIGPIPE's default disposition (death), writes to a daemon that is
 * gone come back as errors; the test process surviving is the check. */
START_TEST(test_no_sigpipe)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c;
	struct bwc_stats st;
	struct err_seen first = { 0 };
	static char big[1000];
	int rc;

	signal(SIGPIPE, SIG_DFL);
	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	CK_BWC(c, bwc_set_reconnect(c, false));
	CK_BWC(c, bwc_stats(c, &st));
	du_daemon_kill(d);
	/* The first, non-blocking: queued, its write fails; the callback
	 * learns it.  Then blocking and non-blocking writes alike fail. */
	{
		struct bwc_timer t = { .key = 100, .when_ns = DU_S, .payload = big,
				       .payload_len = sizeof(big) };

		rc = bwc_send_schedule(c, &t, err_reply, &first);
		ck_assert_msg(rc == 0 || rc == BWC_ECLOSED || rc == BWC_EIO,
			      "first write to a dead daemon: %d (%s)", rc, bwc_errmsg(c));
		if (rc == 0) {
			ck_assert_int_eq(bwc_dispatch(c), BWC_ECLOSED);
			ck_assert_int_eq(first.calls, 1);
			ck_assert_int_eq(first.status, BWC_ECLOSED);
		}
	}
	for (int i = 0; i < 20; i++) {
		struct bwc_timer t = { .key = (uint64_t)i, .when_ns = DU_S, .payload = big,
				       .payload_len = sizeof(big) };

		rc = i % 2 ? bwc_schedule(c, &t, NULL) : bwc_send_schedule(c, &t, NULL, NULL);
		ck_assert_msg(rc == BWC_ECLOSED || rc == BWC_EIO,
			      "write %d to a dead daemon: %d (%s)", i, rc, bwc_errmsg(c));
		if (i == 5)
			ck_assert_int_eq(bwc_reconnect(c), BWC_EUNREACHABLE);
	}
	ck_assert_int_eq(bwc_dispatch(c), BWC_ECLOSED);

	/* And the same with a connection whose daemon died while the client
	 * had unwritten requests queued. */
	du_daemon_start(d, NULL);
	CK_BWC(c, bwc_reconnect(c));
	ck_assert(kill(d->pid, SIGSTOP) == 0);
	for (int i = 0; i < 3000; i++) {
		struct bwc_timer t = { .key = (uint64_t)i, .when_ns = DU_S, .payload = big,
				       .payload_len = sizeof(big) };

		if (bwc_send_schedule(c, &t, NULL, NULL) != 0)
			break;
	}
	du_daemon_kill(d);
	for (int i = 0; i < 50 && bwc_fd(c) >= 0; i++) {
		struct pollfd pf = { bwc_fd(c), bwc_poll_events(c), 0 };

		poll(&pf, 1, 20);
		bwc_dispatch(c);
	}
	ck_assert_int_eq(bwc_fd(c), -1);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * introspection
 * ====================================================================== */

#define INTRO_TIMERS 2500

/* The entry for (owner, name) in a listing, NULL when absent. */
static const struct bwc_session_entry *
find_session(const struct bwc_session_entry *e, size_t n, uint32_t owner,
	     const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!e[i].anonymous && e[i].owner_uid == owner &&
		    strcmp(e[i].name, name) == 0)
			return &e[i];
	return NULL;
}

/* What uid 65534 sees: its own sessions only, and of others' nothing,
 * not even whether a name exists. */
static void intro_nobody(const struct du_daemon *d)
{
	struct bwc_session_entry e[16];
	struct bwc_timer_entry t[8];
	struct bwc_client *c = connect_to(d, NULL);
	const struct bwc_session_entry *b;
	struct bwc_listing l;
	size_t n;

	CK_BWC(c, bwc_list_sessions(c, BWC_ANY_UID, e, 16, &n, &l));
	ck_assert(!l.more);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(e[i].owner_uid == NOBODY, "uid %d sees uid %u's '%s'",
			      NOBODY, e[i].owner_uid, e[i].name);
	b = find_session(e, n, NOBODY, "intro-b");
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(b->timers, 2);
	/* Its own anonymous session, with its pid. */
	ck_assert_uint_eq(n, 2);
	ck_assert(e[0].anonymous != e[1].anonymous);
	ck_assert_uint_eq((e[0].anonymous ? e[0] : e[1]).pid, (uint32_t)getpid());
	/* Naming its own uid is the same. */
	CK_BWC(c, bwc_list_sessions(c, NOBODY, e, 16, &n, NULL));
	ck_assert_uint_eq(n, 2);
	/* Root's: refused, the connection stays. */
	ck_assert_int_eq(bwc_list_sessions(c, 0, e, 16, &n, NULL), BWC_ESERVER);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_PERMISSION_DENIED);
	ck_assert_int_eq(bwc_list_timers(c, "intro-a", 0, t, 8, &n, NULL), BWC_ESERVER);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_PERMISSION_DENIED);
	/* A name root does not have: the same answer. */
	ck_assert_int_eq(bwc_list_timers(c, "intro-none", 0, t, 8, &n, NULL), BWC_ESERVER);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_PERMISSION_DENIED);
	ck_assert_int_ge(bwc_fd(c), 0);
	/* Its own: the timers root scheduled there; a name it lacks. */
	CK_BWC(c, bwc_list_timers(c, "intro-b", BWC_ANY_UID, t, 8, &n, &l));
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(l.total, 2);
	ck_assert_uint_eq(l.owner_uid, NOBODY);
	ck_assert_int_eq(bwc_list_timers(c, "intro-none", BWC_ANY_UID, t, 8, &n, NULL),
			 BWC_ESERVER);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_UNKNOWN_SESSION);
	bwc_free(c);
}

/*
 * ListSessions and the uid rule: root sees every uid's sessions (named
 * and anonymous, with their figures), or one uid's; a detached session
 * says it is idle and when it expires; uid 65534 sees only its own.
 */
START_TEST(test_list_sessions)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_session_entry e[16];
	const struct bwc_session_entry *x;
	struct bwc_client *a, *b, *anon;
	struct bwc_timer t = { .when_ns = 3600 * DU_S };
	struct bwc_listing l;
	size_t n;

	ck_assert(chmod(d->dir, 0755) == 0);
	du_daemon_start(d, "--socket-mode", "0666", "--linger", "1h", NULL);
	a = connect_to(d, "intro-a");
	for (t.key = 1; t.key <= 3; t.key++)
		CK_BWC(a, bwc_schedule(a, &t, NULL));
	anon = connect_to(d, NULL);
	b = new_client();
	if (geteuid() == 0)
		CK_BWC(b, bwc_set_owner_uid(b, NOBODY));
	CK_BWC(b, bwc_connect(b, d->sock, "intro-b"));
	for (t.key = 1; t.key <= 2; t.key++)
		CK_BWC(b, bwc_schedule(b, &t, NULL));

	CK_BWC(anon, bwc_list_sessions(anon, BWC_ANY_UID, e, 16, &n, &l));
	ck_assert(!l.more);
	ck_assert_uint_eq(n, 3);
	x = find_session(e, n, getuid(), "intro-a");
	ck_assert_ptr_nonnull(x);
	ck_assert_uint_eq(x->timers, 3);
	ck_assert_uint_eq(x->producers, 1);
	ck_assert_uint_eq(x->consumers, 0);
	ck_assert_uint_eq(x->idle_ns, 0);
	ck_assert(!x->expires);
	for (size_t i = 0; i < n; i++)
		if (e[i].anonymous) {
			ck_assert_uint_eq(e[i].pid, (uint32_t)getpid());
			ck_assert_uint_eq(e[i].consumers, 1);
			ck_assert_str_eq(e[i].name, "");
		}
	/* A page smaller than the listing: more. */
	CK_BWC(anon, bwc_list_sessions(anon, BWC_ANY_UID, e, 2, &n, &l));
	ck_assert_uint_eq(n, 2);
	ck_assert(l.more);
	/* Detached: idle, and expiring within its linger. */
	bwc_free(b);
	for (int i = 0;; i++) {
		CK_BWC(anon, bwc_list_sessions(anon, geteuid() == 0 ? NOBODY : getuid(),
					       e, 16, &n, NULL));
		x = find_session(e, n, geteuid() == 0 ? NOBODY : getuid(), "intro-b");
		ck_assert_ptr_nonnull(x);
		if (x->producers == 0)
			break;
		ck_assert_int_lt(i, 1000);
		usleep(2000);
	}
	ck_assert(x->expires);
	ck_assert_uint_le(x->expires_in_ns, 3600 * DU_S);
	ck_assert_uint_ge(x->expires_in_ns + x->idle_ns, 3600 * DU_S - DU_S);
	ck_assert_uint_eq(x->timers, 2);
	if (geteuid() != 0) {
		du_note("SKIP: test_list_sessions' uid part needs root");
	} else {
		/* Root asks for one uid's. */
		ck_assert_uint_eq(n, 1);
		du_run_as(NOBODY, d, intro_nobody, DU_WAIT_MS);
	}
	bwc_free(a);
	bwc_free(anon);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* The timer i of the paging test: keys spread over 64 bits, some
 * periodic, payloads of several sizes, none at all for some. */
static void intro_timer(uint64_t seed, unsigned i, struct bwc_timer *t,
			uint8_t *payload)
{
	struct tu_rng r;

	memset(t, 0, sizeof(*t));
	tu_rng_seed(&r, seed + i);
	t->key = tu_rng_next(&r);
	t->absolute = true;
	t->when_ns = bwc_now_ns() + 3600 * DU_S + (uint64_t)i * DU_MS;
	t->period_ns = i % 7 == 0 ? (uint64_t)(i + 1) * DU_S : 0;
	t->payload = i % 5 == 0 ? NULL : payload;
	t->payload_len = i % 5 == 0 ? 0 : i % 50;
}

static int cmp_key(const void *a, const void *b)
{
	uint64_t x = ((const struct bwc_timer_entry *)a)->key;
	uint64_t y = ((const struct bwc_timer_entry *)b)->key;

	return x < y ? -1 : x > y;
}

/*
 * bwc_calendar: a spec's normalized form, zone and elapses from a base
 * (hand-checked: the Berlin spring-forward day skips 02:30), "never" as
 * none, the base echoed; the daemon's now without one; BAD_CALENDAR with
 * its reason and the connection still usable; BWC_EINVAL before sending.
 */
START_TEST(test_calendar)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_calendar *cal = NULL;
	struct bwc_client *c;
	uint64_t before;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	/* 2026-03-28 12:00 UTC */
	CK_BWC(c, bwc_calendar(c, "*-*-* 02:30 Europe/Berlin", 3,
			       UINT64_C(1774699200) * DU_S, &cal));
	ck_assert_str_eq(cal->normalized, "*-*-* 02:30:00 Europe/Berlin");
	ck_assert_str_eq(cal->zone, "Europe/Berlin");
	ck_assert_uint_eq(cal->base_realtime_ns, UINT64_C(1774699200) * DU_S);
	ck_assert_uint_eq(cal->n_elapses, 3);
	ck_assert(!cal->gave_up);
	/* not 03-29 (no 02:30 that day), 03-30 00:30Z, 03-31, 04-01 */
	ck_assert_uint_eq(cal->elapses_realtime_ns[0], UINT64_C(1774830600) * DU_S);
	ck_assert_uint_eq(cal->elapses_realtime_ns[1], UINT64_C(1774917000) * DU_S);
	ck_assert_uint_eq(cal->elapses_realtime_ns[2], UINT64_C(1775003400) * DU_S);
	bwc_calendar_free(cal);
	CK_BWC(c, bwc_calendar(c, "*-02-30", 5, 0, &cal));
	ck_assert_uint_eq(cal->n_elapses, 0);
	ck_assert_str_eq(cal->zone, "");
	bwc_calendar_free(cal);
	before = (uint64_t)time(NULL) * DU_S;
	CK_BWC(c, bwc_calendar(c, "minutely", 0, 0, &cal));
	ck_assert_uint_eq(cal->n_elapses, 1);
	ck_assert_uint_ge(cal->base_realtime_ns, before);
	ck_assert_uint_gt(cal->elapses_realtime_ns[0], cal->base_realtime_ns);
	ck_assert_uint_le(cal->elapses_realtime_ns[0], cal->base_realtime_ns + 60 * DU_S);
	bwc_calendar_free(cal);
	cal = (void *)1;
	ck_assert_int_eq(bwc_calendar(c, "Mon..Fri 09:00 Mars/Olympus", 1, 0, &cal),
			 BWC_ESERVER);
	ck_assert_ptr_null(cal);
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_BAD_CALENDAR);
	ck_assert_str_eq(bwc_server_error_name(BWC_SERVER_BAD_CALENDAR), "BAD_CALENDAR");
	ck_assert_msg(strstr(bwc_errmsg(c), "unknown time zone") != NULL, "%s",
		      bwc_errmsg(c));
	ck_assert_int_eq(bwc_calendar(c, "daily", BWC_CALENDAR_ITERATIONS_MAX + 1, 0, &cal),
			 BWC_EINVAL);
	ck_assert_int_eq(bwc_calendar(c, NULL, 1, 0, &cal), BWC_EINVAL);
	ck_assert_int_eq(bwc_calendar(c, "daily", 1, 0, NULL), BWC_EINVAL);
	CK_BWC(c, bwc_calendar(c, "daily", BWC_CALENDAR_ITERATIONS_MAX, 0, &cal));
	ck_assert_uint_eq(cal->n_elapses, BWC_CALENDAR_ITERATIONS_MAX);
	for (size_t i = 1; i < cal->n_elapses; i++)
		ck_assert_uint_eq(cal->elapses_realtime_ns[i] - cal->elapses_realtime_ns[i - 1],
				  86400 * DU_S);
	bwc_calendar_free(cal);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/*
 * ListTimers pages through 2,500 timers (several replies) and returns
 * each exactly once with its key, deadline, period, payload size and lane;
 * a smaller array stops at it with more; root lists another uid's session
 * by naming it; a realtime clock comes with the monotonic one.
 */
START_TEST(test_list_timers)
{
	struct du_daemon *d = du_daemon_new();
	uint64_t seed = test_seed();
	struct bwc_timer_entry *got = calloc(INTRO_TIMERS + 10, sizeof(*got));
	uint64_t *when = calloc(INTRO_TIMERS, sizeof(*when));
	uint8_t payload[64] = { 0 };
	struct bwc_client *c, *o;
	struct bwc_timer t;
	struct bwc_scheduled sc;
	struct bwc_listing l;
	struct timespec rt;
	size_t n;

	ck_assert(got && when);
	du_daemon_start(d, NULL);
	c = connect_to(d, "intro-page");
	for (unsigned i = 0; i < INTRO_TIMERS; i++) {
		intro_timer(seed, i, &t, payload);
		/* A periodic one's period for leeway: the periodic lane. */
		CK_BWC(c, bwc_schedule_leeway(c, &t, t.period_ns ? t.period_ns :
					      BWC_LEEWAY_DEFAULT, &sc));
		when[i] = sc.deadline_ns;
	}
	CK_BWC(c, bwc_list_timers(c, "intro-page", BWC_ANY_UID, got,
				  INTRO_TIMERS + 10, &n, &l));
	ck_assert_uint_eq(n, INTRO_TIMERS);
	ck_assert(!l.more);
	ck_assert_uint_eq(l.total, INTRO_TIMERS);
	ck_assert_uint_eq(l.owner_uid, getuid());
	ck_assert_uint_le(l.now_ns, bwc_now_ns());
	clock_gettime(CLOCK_REALTIME, &rt);
	ck_assert_uint_le(l.realtime_ns, (uint64_t)rt.tv_sec * DU_S + (uint64_t)rt.tv_nsec);
	ck_assert_uint_gt(l.realtime_ns, (uint64_t)rt.tv_sec * DU_S - 60 * DU_S);
	qsort(got, n, sizeof(*got), cmp_key);
	for (unsigned i = 0; i < INTRO_TIMERS; i++) {
		struct bwc_timer_entry key = { .key = 0 }, *e;

		intro_timer(seed, i, &t, payload);
		key.key = t.key;
		e = bsearch(&key, got, n, sizeof(*got), cmp_key);
		ck_assert_msg(e != NULL, "key %#" PRIx64 " not listed", t.key);
		ck_assert_msg(e == got || e[-1].key != t.key, "key listed twice");
		ck_assert_msg(e == got + n - 1 || e[1].key != t.key, "key listed twice");
		ck_assert_uint_eq(e->deadline_ns, when[i]);
		ck_assert_uint_eq(e->period_ns, t.period_ns);
		ck_assert_uint_eq(e->payload_len, t.payload_len);
		ck_assert(e->has_payload == (t.payload != NULL));
		ck_assert(e->periodic_lane == (t.period_ns != 0));
		ck_assert(!e->late);
		ck_assert_uint_eq(e->reserved[0], 0);
	}
	/* The limit: the first ones, and more. */
	CK_BWC(c, bwc_list_timers(c, "intro-page", BWC_ANY_UID, got, 100, &n, &l));
	ck_assert_uint_eq(n, 100);
	ck_assert(l.more);
	ck_assert_uint_eq(l.total, INTRO_TIMERS);
	ck_assert_int_eq(bwc_list_timers(c, "intro-page", BWC_ANY_UID, got, 0, &n, &l),
			 BWC_EINVAL);
	ck_assert_int_eq(bwc_list_timers(c, "bad name", BWC_ANY_UID, got, 1, &n, &l),
			 BWC_EINVAL);
	if (geteuid() == 0) {
		/* Root, into uid 65534's namespace and back out by name. */
		o = new_client();
		CK_BWC(o, bwc_set_owner_uid(o, NOBODY));
		CK_BWC(o, bwc_connect(o, d->sock, "intro-other"));
		intro_timer(seed, 1, &t, payload);
		CK_BWC(o, bwc_schedule(o, &t, NULL));
		CK_BWC(c, bwc_list_timers(c, "intro-other", NOBODY, got, 10, &n, &l));
		ck_assert_uint_eq(n, 1);
		ck_assert_uint_eq(got[0].key, t.key);
		ck_assert_uint_eq(l.owner_uid, NOBODY);
		/* Not in root's own namespace. */
		ck_assert_int_eq(bwc_list_timers(c, "intro-other", BWC_ANY_UID, got, 10,
						 &n, &l), BWC_ESERVER);
		ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_UNKNOWN_SESSION);
		bwc_free(o);
	}
	bwc_free(c);
	free(got);
	free(when);
	du_assert_serving(d);
	du_daemon_free(d);
}
END_TEST

/* ======================================================================
 * reconnect
 * ====================================================================== */

/* The daemon with a state directory in its scratch directory: a restart
 * keeps named sessions, their timers and queues. */
static void start_with_state(struct du_daemon *d)
{
	char dir[160];

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
}

/* Read fd into buf[*len, cap) until *len >= want, EOF or deadline;
 * returns false at EOF. */
static bool pipe_read(int fd, void *buf, size_t *len, size_t cap, size_t want,
		      uint64_t deadline)
{
	while (*len < want) {
		struct pollfd pf = { fd, POLLIN, 0 };
		ssize_t n;

		ck_assert_msg(du_now_ns() < deadline, "pipe: %zu of %zu bytes by the deadline",
			      *len, want);
		if (poll(&pf, 1, 50) <= 0)
			continue;
		n = read(fd, (uint8_t *)buf + *len, cap - *len);
		if (n == 0)
			return false;
		ck_assert_msg(n > 0 || errno == EINTR, "pipe: %s", strerror(errno));
		if (n > 0)
			*len += (size_t)n;
	}
	return true;
}

/* A child's exit status by the deadline (it is killed after). */
static int child_status(pid_t pid, uint64_t deadline)
{
	int status;

	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (du_now_ns() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			ck_abort_msg("child %ld did not exit in time", (long)pid);
		}
		du_sleep_ms(10);
	}
	return status;
}

#define RIDE_KEYS 150
#define RIDE_SESSION "e2e-ride"

/* In a child: a client of the ride session in role, with the library's
 * defaults otherwise (reconnecting included), or exit 2. */
static struct bwc_client *ride_client(const char *sock, enum bwc_role role)
{
	struct bwc_client *c = NULL;

	if (bwc_new(&c) != 0 || bwc_set_role(c, role) != 0 ||
	    bwc_connect(c, sock, RIDE_SESSION) != 0) {
		fprintf(stderr, "ride: connect: %s\n", bwc_errmsg(c));
		_exit(2);
	}
	return c;
}

/* test_reconnect_ride's producer: keys 0 to RIDE_KEYS - 1, one every 4
 * ms, each due 30 ms later; each key whose Schedule returned 0 goes to
 * fd.  Exits 1 if any call failed. */
static void ride_producer(const char *sock, int fd)
{
	struct bwc_client *c = ride_client(sock, BWC_ROLE_PRODUCER);

	for (uint64_t k = 0; k < RIDE_KEYS; k++) {
		struct bwc_timer t = { .key = k, .when_ns = 30 * DU_MS };
		int rc = bwc_schedule(c, &t, NULL);

		if (rc != 0) {
			fprintf(stderr, "ride producer: schedule %" PRIu64 ": %s (%d)\n",
				k, bwc_errmsg(c), rc);
			_exit(1);
		}
		if (write(fd, &k, sizeof(k)) != (ssize_t)sizeof(k))
			_exit(3);
		du_sleep_ms(4);
	}
	bwc_free(c);
	_exit(0);
}

/* test_reconnect_ride's consumer: every fire as {key, connection} to fd,
 * acknowledged (odd keys blocking, even ones without reply), until it has
 * seen every key or the deadline.  Exits 1 if any call failed. */
static void ride_consumer(const char *sock, int fd, uint64_t deadline)
{
	struct bwc_client *c = ride_client(sock, BWC_ROLE_CONSUMER);
	static bool seen[RIDE_KEYS];
	unsigned distinct = 0;

	while (distinct < RIDE_KEYS && du_now_ns() < deadline) {
		struct bwc_fire f;
		uint64_t rec[2];
		int rc = bwc_wait_fire(c, 100 * (int64_t)DU_MS, &f);

		if (rc == BWC_ETIMEDOUT)
			continue;
		if (rc != 0) {
			fprintf(stderr, "ride consumer: wait_fire: %s (%d)\n", bwc_errmsg(c), rc);
			_exit(1);
		}
		rec[0] = f.key;
		rec[1] = f.connection;
		if (write(fd, rec, sizeof(rec)) != (ssize_t)sizeof(rec))
			_exit(3);
		if (f.key < RIDE_KEYS && !seen[f.key]) {
			seen[f.key] = true;
			distinct++;
		}
		rc = f.key % 2 ? bwc_ack(c, &f, false, NULL) : bwc_send_ack(c, &f, false);
		if (rc != 0) {
			fprintf(stderr, "ride consumer: ack of key %" PRIu64 ": %s (%d)\n",
				f.key, bwc_errmsg(c), rc);
			_exit(1);
		}
	}
	bwc_free(c);
	_exit(0);
}

/*
 * The daemon stopped (SIGTERM) and started again on its state directory
 * while a producer schedules and a consumer consumes, both with the
 * library's defaults and no code to reconnect: no call fails, and every
 * key whose Schedule returned 0 reaches the consumer.
 */
START_TEST(test_reconnect_ride)
{
	struct du_daemon *d = du_daemon_new();
	static uint64_t produced[RIDE_KEYS + 1], consumed[4 * RIDE_KEYS][2];
	size_t plen = 0, clen = 0, before;
	uint64_t deadline, max_conn = 0;
	int pp[2], cp[2], status;
	pid_t prod, cons;

	start_with_state(d);
	ck_assert(pipe(pp) == 0 && pipe(cp) == 0);
	deadline = du_now_ns() + 2 * (uint64_t)DU_WAIT_MS * DU_MS;
	cons = fork();
	ck_assert(cons >= 0);
	if (cons == 0) {
		close(pp[0]);
		close(pp[1]);
		close(cp[0]);
		ride_consumer(d->sock, cp[1], deadline);
	}
	prod = fork();
	ck_assert(prod >= 0);
	if (prod == 0) {
		close(cp[0]);
		close(cp[1]);
		close(pp[0]);
		ride_producer(d->sock, pp[1]);
	}
	close(pp[1]);
	close(cp[1]);

	/* Mid-stream: a fifth of the keys scheduled. */
	pipe_read(pp[0], produced, &plen, sizeof(produced),
		  RIDE_KEYS / 5 * sizeof(uint64_t), deadline);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	before = plen / sizeof(uint64_t);
	start_with_state(d);

	while (pipe_read(pp[0], produced, &plen, sizeof(produced), sizeof(produced), deadline))
		;
	while (pipe_read(cp[0], consumed, &clen, sizeof(consumed), sizeof(consumed), deadline))
		;
	close(pp[0]);
	close(cp[0]);
	status = child_status(prod, deadline);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the producer failed (status %#x; its stderr says why)", status);
	status = child_status(cons, deadline);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the consumer failed (status %#x; its stderr says why)", status);

	ck_assert_msg(before < RIDE_KEYS, "the producer was done before the restart");
	ck_assert_uint_eq(plen, RIDE_KEYS * sizeof(uint64_t));
	for (size_t i = 0; i < clen / sizeof(consumed[0]); i++)
		if (consumed[i][1] > max_conn)
			max_conn = consumed[i][1];
	ck_assert_msg(max_conn >= 2, "no fire came on a second connection");
	for (size_t i = 0; i < RIDE_KEYS; i++) {
		bool found = false;

		for (size_t j = 0; j < clen / sizeof(consumed[0]) && !found; j++)
			found = consumed[j][0] == produced[i];
		ck_assert_msg(found, "key %" PRIu64 " was acknowledged but never fired "
			      "(%zu fires in all)", produced[i], clen / sizeof(consumed[0]));
	}
	du_daemon_free(d);
}
END_TEST

/* A manual-ack consumer across a restart: the ack of a fire from the old
 * connection completes nothing and is not sent; the fire comes again,
 * marked, on the new connection, where acks work; the new connection has
 * the settings of the first. */
START_TEST(test_reconnect_consumer)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *k = new_client();
	struct bwc_session_info info;
	struct bwc_fire first, f;
	uint64_t acked = 99;
	bool again = false;

	start_with_state(d);
	CK_BWC(k, bwc_set_role(k, BWC_ROLE_CONSUMER));
	CK_BWC(k, bwc_set_window(k, 7));
	CK_BWC(k, bwc_set_ack_timeout(k, 5 * DU_S));
	CK_BWC(k, bwc_set_ack_mode(k, BWC_ACK_MANUAL));
	CK_BWC(k, bwc_set_coalesce(k, true));
	CK_BWC(k, bwc_connect(k, d->sock, "e2e-rconsumer"));
	for (uint64_t i = 1; i <= 3; i++) {
		struct bwc_timer t = { .key = i, .when_ns = i * 10 * DU_MS };

		CK_BWC(k, bwc_schedule(k, &t, NULL));
	}
	CK_BWC(k, bwc_wait_fire(k, 2 * (int64_t)DU_S, &first));
	ck_assert_uint_eq(first.key, 1);
	ck_assert_uint_eq(first.connection, 1);
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	start_with_state(d);

	/* Found out here or by the wait below: either way nothing fails. */
	CK_BWC(k, bwc_ack(k, &first, false, &acked));
	ck_assert_uint_eq(acked, 0);
	CK_BWC(k, bwc_send_ack(k, &first, false));
	for (int n = 0; n < 3; n++) {
		CK_BWC(k, bwc_wait_fire(k, (int64_t)DU_WAIT_MS * (int64_t)DU_MS, &f));
		ck_assert_uint_eq(f.connection, 2);
		if (f.key == 1) {
			ck_assert(f.redelivered);
			again = true;
		}
		CK_BWC(k, bwc_ack(k, &f, false, &acked));
		ck_assert_uint_eq(acked, 1);
	}
	ck_assert_msg(again, "key 1, never acknowledged, did not come again");
	CK_BWC(k, bwc_get_session_info(k, &info));
	ck_assert(info.resumed);
	ck_assert_int_eq(info.role, BWC_ROLE_CONSUMER);
	ck_assert_uint_eq(info.window, 7);
	ck_assert_uint_eq(info.ack_timeout_ns, 5 * DU_S);
	ck_assert(!info.auto_ack && info.coalesce);
	bwc_free(k);
	du_daemon_free(d);
}
END_TEST

/* What test_reconnect_handler's fire handler saw. */
struct handled {
	struct bwc_fire last;
	bool have_last, seen[4], redelivered[4];
	uint64_t max_conn;
};

static void handled_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct handled *h = arg;

	(void)c;
	if (f->key < 4) {
		h->seen[f->key] = true;
		h->redelivered[f->key] |= f->redelivered;
	}
	if (f->connection > h->max_conn)
		h->max_conn = f->connection;
	h->last = *f;
	h->have_last = true;
}

/*
 * An event-loop consumer (fire handler, one cumulative bwc_send_ack per
 * dispatch) across a SIGTERM restart, watching bwc_fd() anew each turn:
 * every bwc_dispatch returns 0, the fire it had not acknowledged comes
 * again marked, and the others arrive on the new connection.
 */
START_TEST(test_reconnect_handler)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *k = new_client();
	struct handled h;
	uint64_t deadline;
	int rc;

	memset(&h, 0, sizeof(h));
	start_with_state(d);
	CK_BWC(k, bwc_set_role(k, BWC_ROLE_CONSUMER));
	CK_BWC(k, bwc_connect(k, d->sock, "e2e-rhandler"));
	bwc_set_fire_handler(k, handled_fire, &h);
	for (uint64_t i = 1; i <= 3; i++) {
		struct bwc_timer t = { .key = i, .when_ns = i == 1 ? DU_MS : 500 * DU_MS };

		CK_BWC(k, bwc_schedule(k, &t, NULL));
	}
	/* Key 1 handled, not acknowledged. */
	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	while (!h.seen[1]) {
		struct pollfd pf = { bwc_fd(k), bwc_poll_events(k), 0 };

		ck_assert_msg(du_now_ns() < deadline, "key 1 never fired");
		poll(&pf, 1, 50);
		CK_BWC(k, bwc_dispatch(k));
	}
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	start_with_state(d);
	h.seen[1] = false;
	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	while (!(h.seen[1] && h.seen[2] && h.seen[3])) {
		struct pollfd pf = { bwc_fd(k), bwc_poll_events(k), 0 };

		ck_assert_msg(du_now_ns() < deadline, "fires after the restart: 1 %d, 2 %d, 3 %d",
			      h.seen[1], h.seen[2], h.seen[3]);
		if (pf.fd >= 0)
			poll(&pf, 1, 50);
		rc = bwc_dispatch(k);
		ck_assert_msg(rc == 0, "bwc_dispatch across a restart: %d (%s)", rc,
			      bwc_errmsg(k));
		if (h.have_last)
			CK_BWC(k, bwc_send_ack(k, &h.last, true));
	}
	ck_assert(h.redelivered[1]);
	ck_assert_uint_eq(h.max_conn, 2);
	ck_assert_int_ge(bwc_fd(k), 0);
	bwc_free(k);
	du_daemon_free(d);
}
END_TEST

/* The daemon never comes back: the call returns BWC_EGAVEUP once the
 * give-up time has passed since the loss, and so do later calls. */
START_TEST(test_reconnect_give_up)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c = new_client();
	struct bwc_timer t = { .key = 1, .when_ns = DU_S };
	struct bwc_stats st;
	uint64_t t0, took;
	int rc;

	du_daemon_start(d, NULL);
	ck_assert_int_eq(bwc_set_reconnect_backoff(c, 0, DU_S, DU_S), BWC_EINVAL);
	ck_assert_int_eq(bwc_set_reconnect_backoff(c, 2 * DU_S, DU_S, DU_S), BWC_EINVAL);
	ck_assert_int_eq(bwc_set_reconnect_backoff(c, DU_MS, DU_S, 0), BWC_EINVAL);
	CK_BWC(c, bwc_set_reconnect_backoff(c, 10 * DU_MS, 100 * DU_MS, 500 * DU_MS));
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_PRODUCER));
	CK_BWC(c, bwc_connect(c, d->sock, "e2e-giveup"));
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	du_daemon_kill(d);

	t0 = du_now_ns();
	t.key = 2;
	rc = bwc_schedule(c, &t, NULL);
	took = du_now_ns() - t0;
	ck_assert_msg(rc == BWC_EGAVEUP, "schedule with the daemon gone: %d (%s)", rc,
		      bwc_errmsg(c));
	ck_assert_msg(strstr(bwc_errmsg(c), "gave up") && strstr(bwc_errmsg(c), d->sock),
		      "message: %s", bwc_errmsg(c));
	ck_assert_msg(took >= 500 * DU_MS && took < 500 * DU_MS + du_margin_ns() + DU_S,
		      "gave up after %" PRIu64 " ms, not 500", took / DU_MS);
	/* Later calls say so at once; the client stays closed. */
	t0 = du_now_ns();
	ck_assert_int_eq(bwc_stats(c, &st), BWC_EGAVEUP);
	ck_assert_uint_lt(du_now_ns() - t0, 100 * DU_MS);
	ck_assert_int_eq(bwc_fd(c), -1);
	/* bwc_reconnect is the way back. */
	du_daemon_start(d, NULL);
	ck_assert_int_eq(bwc_stats(c, &st), BWC_EGAVEUP);
	CK_BWC(c, bwc_reconnect(c));
	CK_BWC(c, bwc_stats(c, &st));
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* An anonymous session cannot be resumed: BWC_EANONYMOUS, whether the
 * daemon stops (SHUTTING_DOWN) or dies (EOF), and no reconnecting. */
START_TEST(test_reconnect_anonymous)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c, *c2;
	struct bwc_stats st;
	struct bwc_fire f;
	int rc;

	du_daemon_start(d, NULL);
	c = connect_to(d, NULL);
	ck_assert(kill(d->pid, SIGTERM) == 0);
	rc = bwc_wait_fire(c, (int64_t)DU_WAIT_MS * (int64_t)DU_MS, &f);
	ck_assert_msg(rc == BWC_EANONYMOUS, "wait_fire while the daemon stops: %d (%s)", rc,
		      bwc_errmsg(c));
	ck_assert_msg(strstr(bwc_errmsg(c), "anonymous") && strstr(bwc_errmsg(c), "SHUTTING_DOWN"),
		      "message: %s", bwc_errmsg(c));
	ck_assert_int_eq(bwc_server_error(c), BWC_SERVER_SHUTTING_DOWN);
	du_assert_exit(d, du_daemon_stop(d, 0, DU_WAIT_MS), 0);
	du_daemon_start(d, NULL);
	/* No reconnecting by itself: the session is gone. */
	ck_assert_int_eq(bwc_stats(c, &st), BWC_EANONYMOUS);
	ck_assert_int_eq(bwc_fd(c), -1);
	CK_BWC(c, bwc_reconnect(c));
	CK_BWC(c, bwc_stats(c, &st));

	c2 = connect_to(d, NULL);
	du_daemon_kill(d);
	rc = bwc_stats(c2, &st);
	ck_assert_msg(rc == BWC_EANONYMOUS, "stats after the daemon died: %d (%s)", rc,
		      bwc_errmsg(c2));
	bwc_free(c);
	bwc_free(c2);
	du_daemon_free(d);
}
END_TEST

struct kill_later {
	pid_t pid;
	unsigned ms;
};

static void *kill_later(void *arg)
{
	const struct kill_later *k = arg;

	du_sleep_ms(k->ms);
	kill(k->pid, SIGKILL);
	return NULL;
}

/*
 * A Schedule without replace written whole, then the connection ends
 * without SHUTTING_DOWN (the daemon killed): BWC_EUNKNOWN naming the key,
 * blocking and not.  What is safe goes again on the new connection by
 * itself: a Schedule with replace, a Cancel, and a Schedule never
 * written.
 */
START_TEST(test_reconnect_unknown)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c = new_client();
	struct kill_later kl;
	struct err_seen s[4];
	pthread_t th;
	bool pending;
	uint64_t deadline;
	int rc;

	du_daemon_start(d, NULL);
	CK_BWC(c, bwc_set_reconnect_backoff(c, 10 * DU_MS, 100 * DU_MS, (uint64_t)DU_WAIT_MS * DU_MS));
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_PRODUCER));
	CK_BWC(c, bwc_connect(c, d->sock, "e2e-unknown"));

	/* Blocking: the daemon stopped reads nothing, then dies. */
	ck_assert(kill(d->pid, SIGSTOP) == 0);
	kl = (struct kill_later){ .pid = d->pid, .ms = 200 };
	ck_assert_int_eq(pthread_create(&th, NULL, kill_later, &kl), 0);
	{
		struct bwc_timer t = { .key = 42, .when_ns = 3600 * DU_S };

		rc = bwc_schedule(c, &t, NULL);
	}
	pthread_join(th, NULL);
	ck_assert_msg(rc == BWC_EUNKNOWN, "schedule cut off: %d (%s)", rc, bwc_errmsg(c));
	ck_assert_msg(strstr(bwc_errmsg(c), "key 42") &&
		      strstr(bwc_errmsg(c), "may or may not"), "message: %s", bwc_errmsg(c));
	du_daemon_kill(d);
	du_daemon_start(d, NULL);
	/* The next call reconnects by itself. */
	CK_BWC(c, bwc_cancel(c, 42, &pending));
	ck_assert(!pending);

	/* Non-blocking: 43 (replace) and 42 written, 45 and the cancel of 44
	 * not yet. */
	memset(s, 0, sizeof(s));
	ck_assert(kill(d->pid, SIGSTOP) == 0);
	{
		struct bwc_timer t43 = { .key = 43, .when_ns = 3600 * DU_S, .replace = true };
		struct bwc_timer t42 = { .key = 42, .when_ns = 3600 * DU_S };
		struct bwc_timer t45 = { .key = 45, .when_ns = 3600 * DU_S };

		CK_BWC(c, bwc_send_schedule(c, &t43, err_reply, &s[0]));
		CK_BWC(c, bwc_send_schedule(c, &t42, err_reply, &s[1]));
		CK_BWC(c, bwc_dispatch(c));
		ck_assert_int_eq(bwc_poll_events(c) & POLLOUT, 0);
		CK_BWC(c, bwc_send_schedule(c, &t45, err_reply, &s[2]));
		CK_BWC(c, bwc_send_cancel(c, 44, err_reply, &s[3]));
	}
	du_daemon_kill(d);
	du_daemon_start(d, NULL);
	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	while (s[0].calls + s[1].calls + s[2].calls + s[3].calls < 4) {
		struct pollfd pf = { bwc_fd(c), bwc_poll_events(c), 0 };

		ck_assert_msg(du_now_ns() < deadline, "callbacks never ran");
		if (pf.fd >= 0)
			poll(&pf, 1, 50);
		rc = bwc_dispatch(c);
		ck_assert_msg(rc == 0, "bwc_dispatch: %d (%s)", rc, bwc_errmsg(c));
	}
	ck_assert_msg(s[0].status == 0, "schedule 43 (replace): %d", s[0].status);
	ck_assert_msg(s[1].status == BWC_EUNKNOWN && strstr(s[1].message, "key 42"),
		      "schedule 42: %d (%s)", s[1].status, s[1].message);
	ck_assert_msg(s[2].status == 0, "schedule 45 (never written): %d", s[2].status);
	ck_assert_msg(s[3].status == 0 && !s[3].pending, "cancel 44: %d", s[3].status);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(s[i].calls, 1);
	CK_BWC(c, bwc_cancel(c, 43, &pending));
	ck_assert(pending);
	CK_BWC(c, bwc_cancel(c, 45, &pending));
	ck_assert(pending);
	CK_BWC(c, bwc_cancel(c, 42, &pending));
	ck_assert(!pending);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/*
 * Requests made while the client reconnects wait for the new connection:
 * a blocking call that runs out of time leaves the reconnecting to the
 * next call (its own request abandoned), non-blocking requests queue,
 * and bwc_dispatch brings the session back and sends them, in order.
 */
START_TEST(test_reconnect_pending)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c = new_client();
	struct bwc_timer t = { .key = 9, .when_ns = 3600 * DU_S };
	struct err_seen s[2];
	struct bwc_stats st;
	uint64_t deadline;
	bool pending;
	int rc;

	memset(s, 0, sizeof(s));
	du_daemon_start(d, NULL);
	CK_BWC(c, bwc_set_reconnect_backoff(c, 10 * DU_MS, 100 * DU_MS,
					    (uint64_t)DU_WAIT_MS * DU_MS));
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_PRODUCER));
	CK_BWC(c, bwc_connect(c, d->sock, "e2e-pending"));
	du_daemon_kill(d);
	CK_BWC(c, bwc_set_timeout(c, 200 * (int64_t)DU_MS));
	rc = bwc_stats(c, &st);
	ck_assert_msg(rc == BWC_ETIMEDOUT && strstr(bwc_errmsg(c), "reconnecting"),
		      "stats with the daemon away: %d (%s)", rc, bwc_errmsg(c));
	ck_assert_int_eq(bwc_fd(c), -1);
	CK_BWC(c, bwc_send_schedule(c, &t, err_reply, &s[0]));
	CK_BWC(c, bwc_send_cancel(c, 8, err_reply, &s[1]));
	ck_assert_int_eq(s[0].calls + s[1].calls, 0);

	du_daemon_start(d, NULL);
	CK_BWC(c, bwc_set_timeout(c, (int64_t)DU_WAIT_MS * (int64_t)DU_MS));
	deadline = du_now_ns() + DU_WAIT_MS * DU_MS;
	while (s[0].calls + s[1].calls < 2) {
		struct pollfd pf = { bwc_fd(c), bwc_poll_events(c), 0 };

		ck_assert_msg(du_now_ns() < deadline, "callbacks never ran");
		if (pf.fd >= 0)
			poll(&pf, 1, 50);
		rc = bwc_dispatch(c);
		ck_assert_msg(rc == 0, "bwc_dispatch: %d (%s)", rc, bwc_errmsg(c));
		ck_assert_int_ge(bwc_fd(c), 0);
	}
	ck_assert_msg(s[0].status == 0 && s[1].status == 0 && !s[1].pending,
		      "schedule %d, cancel %d", s[0].status, s[1].status);
	CK_BWC(c, bwc_cancel(c, 9, &pending));
	ck_assert(pending);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* bwc_set_reconnect(c, false): the behaviour before the client could
 * reconnect, as the header's recipe says: SHUTTING_DOWN, then
 * BWC_ECLOSED with the daemon back, until bwc_reconnect. */
START_TEST(test_reconnect_opt_out)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *c = new_client();
	struct bwc_timer t = { .key = 1, .when_ns = 3600 * DU_S };
	struct bwc_session_info info;
	struct bwc_stats st;
	int rc;

	start_with_state(d);
	CK_BWC(c, bwc_set_reconnect(c, false));
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_PRODUCER));
	CK_BWC(c, bwc_connect(c, d->sock, "e2e-optout"));
	CK_BWC(c, bwc_schedule(c, &t, NULL));
	du_assert_exit(d, du_daemon_stop(d, SIGTERM, DU_WAIT_MS), 0);
	rc = bwc_stats(c, &st);
	ck_assert_msg(rc == BWC_ESERVER && bwc_server_error(c) == BWC_SERVER_SHUTTING_DOWN,
		      "stats after a clean stop: %d (%s)", rc, bwc_errmsg(c));
	start_with_state(d);
	ck_assert_int_eq(bwc_stats(c, &st), BWC_ECLOSED);
	CK_BWC(c, bwc_reconnect(c));
	CK_BWC(c, bwc_get_session_info(c, &info));
	ck_assert(info.resumed && info.timers == 1);
	bwc_free(c);
	du_daemon_free(d);
}
END_TEST

/* ---------------------------------------------------------------------- */

/* ======================================================================
 * failures
 * ====================================================================== */

/* bwc_backoff: min(cap, base * 2^(deliveries - 1)), less a random part of
 * up to half; exact at the ends of the random range. */
START_TEST(test_backoff)
{
	const uint64_t base = DU_S, cap = 300 * DU_S;
	uint64_t rnd = test_seed() | 1;

	for (uint64_t n = 0; n <= 70; n++) {
		uint64_t d = n <= 1 ? base : n - 1 >= 9 ? cap : base << (n - 1);

		if (d > cap)
			d = cap;
		/* random 0 keeps it all; d / 2 takes the most off. */
		ck_assert_uint_eq(bwc_backoff(n, base, cap, 0), d);
		ck_assert_uint_eq(bwc_backoff(n, base, cap, d / 2), d - d / 2);
		for (int i = 0; i < 100; i++) {
			uint64_t b;

			rnd ^= rnd << 13;
			rnd ^= rnd >> 7;
			rnd ^= rnd << 17;
			b = bwc_backoff(n, base, cap, rnd);
			ck_assert_msg(b >= d - d / 2 && b <= d,
				      "deliveries %" PRIu64 ": %" PRIu64 " outside [%" PRIu64
				      ", %" PRIu64 "]", n, b, d - d / 2, d);
		}
	}
	/* 1 s, 2 s, 4 s: doubling from the first delivery. */
	ck_assert_uint_eq(bwc_backoff(3, base, cap, 0), 4 * DU_S);
	/* A base above the cap is the cap; huge counts stop at it at once. */
	ck_assert_uint_eq(bwc_backoff(1, 10 * DU_S, DU_S, 0), DU_S);
	ck_assert_uint_eq(bwc_backoff(UINT64_MAX, 1, UINT64_MAX, 0), UINT64_MAX);
	ck_assert_uint_eq(bwc_backoff(UINT64_MAX, base, cap, UINT64_MAX),
			  cap - UINT64_MAX % (cap / 2 + 1));
	ck_assert_uint_eq(bwc_backoff(5, 0, cap, 12345), 0);
	/* Names of the reasons, and of HOLD_LIMIT. */
	ck_assert_str_eq(bwc_take_back_name(BWC_TAKE_BACK_ACK_TIMEOUT), "ACK_TIMEOUT");
	ck_assert_str_eq(bwc_take_back_name(99), "UNKNOWN");
	ck_assert_str_eq(bwc_server_error_name(BWC_SERVER_HOLD_LIMIT), "HOLD_LIMIT");
}
END_TEST

/* The listing's entry of one of the caller's sessions. */
static struct bwc_session_entry session_entry(struct bwc_client *c, const char *name)
{
	static struct bwc_session_entry e[64];
	size_t n = 0;

	CK_BWC(c, bwc_list_sessions(c, (int64_t)geteuid(), e, 64, &n, NULL));
	for (size_t i = 0; i < n; i++)
		if (!e[i].anonymous && strcmp(e[i].name, name) == 0)
			return e[i];
	ck_abort_msg("no session %s among %zu", name, n);
	return e[0];
}

/*
 * Release: a fire given back with a delay is not handed out again before
 * it (the listing counts it delayed meanwhile), comes back the same fire
 * with its deliveries counted on; released at once it comes back at once;
 * a delay over the daemon's limit is BAD_REQUEST; a Release of a fire
 * acknowledged already does nothing.
 */
START_TEST(test_release_delay)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *k;
	struct bwc_session_info info;
	struct bwc_session_entry e;
	struct bwc_released out;
	struct bwc_fire f;
	uint64_t t0, delay = (uint64_t)du_scale_ms(400) * DU_MS;
	struct bwc_timer t = { .key = 11, .when_ns = 0, .payload = "p", .payload_len = 1 };
	int rc;

	du_daemon_start(d, NULL);
	k = attach(d, "e2e-release", BWC_ROLE_CONSUMER, 0);
	CK_BWC(k, bwc_get_session_info(k, &info));
	ck_assert_uint_gt(info.limits.max_release_delay_ns, 0);
	ck_assert_uint_gt(info.limits.max_hold_ns, 0);
	ck_assert_uint_gt(info.limits.max_kick, 0);
	CK_BWC(k, bwc_schedule(k, &t, NULL));
	CK_BWC(k, bwc_wait_fire(k, (int64_t)DU_WAIT_MS * (int64_t)DU_MS, &f));
	ck_assert_uint_eq(f.key, 11);
	ck_assert_uint_eq(f.deliveries, 1);
	ck_assert(!f.dead_letter.present);

	t0 = bwc_now_ns();
	CK_BWC(k, bwc_release(k, &f, delay, &out));
	ck_assert(out.released && !out.dead_lettered);
	ck_assert_uint_eq(out.deliveries, 1);
	ck_assert_uint_ge(out.ready_ns, t0 + delay);
	e = session_entry(k, "e2e-release");
	ck_assert_uint_eq(e.delayed, 1);
	ck_assert_uint_eq(e.in_flight, 0);
	/* Not before the delay: nothing for most of it... */
	ck_assert_int_eq(bwc_wait_fire(k, (int64_t)(delay / 2), &f), BWC_ETIMEDOUT);
	/* ...then the same fire, never before ready_ns. */
	CK_BWC(k, bwc_wait_fire(k, (int64_t)DU_WAIT_MS * (int64_t)DU_MS, &f));
	ck_assert_uint_ge(bwc_now_ns(), out.ready_ns);
	ck_assert_msg(f.key == 11 && f.deliveries == 2 && f.payload_len == 1 &&
		      memcmp(f.payload, "p", 1) == 0,
		      "key %" PRIu64 " deliveries %" PRIu64, f.key, f.deliveries);

	/* At once: back at once, counted on. */
	CK_BWC(k, bwc_release(k, &f, 0, &out));
	ck_assert(out.released && !out.dead_lettered && out.deliveries == 2);
	CK_BWC(k, bwc_wait_fire(k, (int64_t)DU_WAIT_MS * (int64_t)DU_MS, &f));
	ck_assert_uint_eq(f.deliveries, 3);
	CK_BWC(k, bwc_ack(k, &f, false, NULL));
	/* Done: a Release of it finds nothing. */
	CK_BWC(k, bwc_release(k, &f, 0, &out));
	ck_assert(!out.released && !out.dead_lettered);

	/* Past the limit: refused. */
	t.key = 12;
	CK_BWC(k, bwc_schedule(k, &t, NULL));
	CK_BWC(k, bwc_wait_fire(k, (int64_t)DU_WAIT_MS * (int64_t)DU_MS, &f));
	rc = bwc_release(k, &f, info.limits.max_release_delay_ns + 1, &out);
	ck_assert_msg(rc == BWC_ESERVER && bwc_server_error(k) == BWC_SERVER_BAD_REQUEST,
		      "release past max_release_delay_ns: %d (%s)", rc, bwc_errmsg(k));
	bwc_free(k);
	du_daemon_free(d);
}
END_TEST

static void policy_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct bwc_policy *p = arg;

	(void)c;
	ck_assert_int_eq(r->request, BWC_REQUEST_SET_POLICY);
	ck_assert_int_eq(r->status, 0);
	ck_assert_ptr_nonnull(r->policy);
	*p = *r->policy;
}

/*
 * SetPolicy: the defaults at Hello, each field set and kept on its own,
 * "" back to the default name, 0 unlimited; bad values refused before
 * sending, the session's own name by the daemon, an anonymous session by
 * the library; the non-blocking form's reply; a new connection's Hello
 * shows what was set.
 */
START_TEST(test_policy)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *p, *a;
	struct bwc_session_info info;
	struct bwc_policy pol, got = { .max_deliveries = 0 };
	int rc;

	du_daemon_start(d, NULL);
	p = attach(d, "e2e-policy", BWC_ROLE_PRODUCER, 0);
	CK_BWC(p, bwc_get_session_info(p, &info));
	ck_assert_uint_eq(info.policy.max_deliveries, info.limits.default_max_deliveries);
	ck_assert_uint_eq(info.limits.default_max_deliveries, 20);
	ck_assert(!info.policy.is_explicit && info.policy.has_dead_letter);
	ck_assert_str_eq(info.policy.dead_letter, "e2e-policy.dead");

	CK_BWC(p, bwc_set_policy(p, 5, NULL, &pol));
	ck_assert(pol.max_deliveries == 5 && pol.is_explicit);
	ck_assert_str_eq(pol.dead_letter, "e2e-policy.dead");
	CK_BWC(p, bwc_set_policy(p, BWC_POLICY_KEEP, "e2e-policy-dl", &pol));
	ck_assert_uint_eq(pol.max_deliveries, 5);
	ck_assert_str_eq(pol.dead_letter, "e2e-policy-dl");
	CK_BWC(p, bwc_set_policy(p, BWC_POLICY_KEEP, NULL, &pol));
	ck_assert_str_eq(pol.dead_letter, "e2e-policy-dl");
	CK_BWC(p, bwc_set_policy(p, 0, "", &pol));
	ck_assert_uint_eq(pol.max_deliveries, 0);
	ck_assert_str_eq(pol.dead_letter, "e2e-policy.dead");

	ck_assert_int_eq(bwc_set_policy(p, -2, NULL, &pol), BWC_EINVAL);
	ck_assert_int_eq(bwc_set_policy(p, (int64_t)UINT32_MAX + 1, NULL, &pol), BWC_EINVAL);
	ck_assert_int_eq(bwc_set_policy(p, 3, "no spaces", &pol), BWC_EINVAL);
	rc = bwc_set_policy(p, BWC_POLICY_KEEP, "e2e-policy", &pol);
	ck_assert_msg(rc == BWC_ESERVER && bwc_server_error(p) == BWC_SERVER_BAD_REQUEST,
		      "its own name as dead-letter session: %d (%s)", rc, bwc_errmsg(p));

	/* Non-blocking (a refusal may have closed: attach again). */
	bwc_free(p);
	p = attach(d, "e2e-policy", BWC_ROLE_PRODUCER, 0);
	CK_BWC(p, bwc_send_set_policy(p, 7, NULL, policy_reply, &got));
	for (int i = 0; i < 100 && got.max_deliveries == 0; i++) {
		CK_BWC(p, bwc_dispatch(p));
		du_sleep_ms(10);
	}
	ck_assert_uint_eq(got.max_deliveries, 7);
	ck_assert(got.is_explicit);
	bwc_free(p);
	p = attach(d, "e2e-policy", BWC_ROLE_CONSUMER, 0);
	CK_BWC(p, bwc_get_session_info(p, &info));
	ck_assert(info.policy.max_deliveries == 7 && info.policy.is_explicit);
	bwc_free(p);

	a = connect_to(d, NULL);
	ck_assert_int_eq(bwc_set_policy(a, 3, NULL, NULL), BWC_EROLE);
	ck_assert_int_eq(bwc_kick(a, false, 0, 0, NULL, NULL), BWC_EROLE);
	bwc_free(a);
	du_daemon_free(d);
}
END_TEST

/*
 * Max 3: a fire released three times goes to the dead-letter session
 * (not back), where a consumer sees its history; kick brings it back to
 * its session with its deliveries counted from 0, by key and limit.
 */
START_TEST(test_dead_letter_kick)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *k, *dl;
	struct bwc_released out;
	struct bwc_session_entry e;
	struct bwc_fire f;
	uint64_t kicked, t0;
	bool more;
	const int64_t wait = (int64_t)DU_WAIT_MS * (int64_t)DU_MS;

	du_daemon_start(d, NULL);
	k = attach(d, "e2e-poison", BWC_ROLE_CONSUMER, 0);
	CK_BWC(k, bwc_set_policy(k, 3, NULL, NULL));
	/* Before the Schedules: the first fire may be handed out while the
	 * second is sent (under valgrind it was). */
	t0 = bwc_now_ns();
	for (uint64_t key = 1; key <= 2; key++) {
		struct bwc_timer t = { .key = key, .when_ns = 0 };

		CK_BWC(k, bwc_schedule(k, &t, NULL));
	}
	/* Both released three times, in whatever order they come (the first
	 * may come again before the second is due); the third dead-letters
	 * each. */
	for (uint64_t n = 1, seen[3] = { 0 }; n <= 6; n++) {
		CK_BWC(k, bwc_wait_fire(k, wait, &f));
		ck_assert_uint_le(f.key, 2);
		ck_assert_uint_eq(f.deliveries, ++seen[f.key]);
		CK_BWC(k, bwc_release(k, &f, 0, &out));
		ck_assert(out.released);
		ck_assert_uint_eq(out.deliveries, f.deliveries);
		ck_assert_msg(out.dead_lettered == (f.deliveries == 3),
			      "release %" PRIu64 " of key %" PRIu64 ": dead_lettered %d", n,
			      f.key, out.dead_lettered);
		if (out.dead_lettered)
			ck_assert_uint_eq(out.ready_ns, 0);
	}
	ck_assert_int_eq(bwc_wait_fire(k, (int64_t)du_scale_ms(200) * (int64_t)DU_MS, &f),
			 BWC_ETIMEDOUT);
	e = session_entry(k, "e2e-poison");
	ck_assert_uint_eq(e.dead_lettered, 2);
	ck_assert(e.policy.max_deliveries == 3 && e.policy.is_explicit);
	e = session_entry(k, "e2e-poison.dead");
	ck_assert_uint_eq(e.dead_letters, 2);

	/* The dead-letter session is an ordinary one, with the history. */
	dl = attach(d, "e2e-poison.dead", BWC_ROLE_CONSUMER, 0);
	CK_BWC(dl, bwc_wait_fire(dl, wait, &f));
	ck_assert(f.dead_letter.present);
	ck_assert_str_eq(f.dead_letter.session, "e2e-poison");
	ck_assert_uint_eq(f.dead_letter.deliveries, 3);
	ck_assert_int_eq(f.dead_letter.reason, BWC_TAKE_BACK_RELEASED);
	ck_assert(t0 <= f.dead_letter.first_handed_ns &&
		  f.dead_letter.first_handed_ns <= f.dead_letter.last_handed_ns &&
		  f.dead_letter.last_handed_ns <= f.dead_letter.dead_lettered_ns &&
		  f.dead_letter.dead_lettered_ns <= bwc_now_ns());
	/* Left unacknowledged: back to the dead-letter queue at the close,
	 * not dead-lettered again. */
	bwc_free(dl);

	/* Key 2 only, then the rest with a limit of 1. */
	CK_BWC(k, bwc_kick(k, true, 2, 0, &kicked, &more));
	ck_assert(kicked == 1 && !more);
	CK_BWC(k, bwc_wait_fire(k, wait, &f));
	ck_assert(f.key == 2 && f.deliveries == 1 && !f.dead_letter.present);
	CK_BWC(k, bwc_ack(k, &f, false, NULL));
	CK_BWC(k, bwc_kick(k, true, 2, 0, &kicked, &more));
	ck_assert(kicked == 0 && !more);
	CK_BWC(k, bwc_kick(k, false, 0, 1, &kicked, NULL));
	ck_assert_uint_eq(kicked, 1);
	CK_BWC(k, bwc_wait_fire(k, wait, &f));
	ck_assert(f.key == 1 && f.deliveries == 1 && !f.dead_letter.present);
	CK_BWC(k, bwc_ack(k, &f, false, NULL));
	e = session_entry(k, "e2e-poison.dead");
	ck_assert_uint_eq(e.dead_letters, 0);
	bwc_free(k);
	du_daemon_free(d);
}
END_TEST

/*
 * Touch: a handler that takes four ack timeouts keeps its fire by
 * touching it every half one (no redelivery, the ack completes it); a
 * touch past the hold limit is HOLD_LIMIT and leaves the connection and
 * the fire as they were; stale fires and producers are refused as for
 * bwc_ack.
 */
START_TEST(test_touch)
{
	struct du_daemon *d = du_daemon_new();
	struct bwc_client *k, *p;
	struct bwc_session_info info;
	struct bwc_released out;
	struct bwc_stats st;
	struct bwc_fire f, old;
	uint64_t ack_timeout = (uint64_t)du_scale_ms(400) * DU_MS, deadline, acked, t0;
	struct bwc_timer t = { .key = 21, .when_ns = 0 };
	const int64_t wait = (int64_t)DU_WAIT_MS * (int64_t)DU_MS;
	bool touched;
	int rc;

	du_daemon_start(d, NULL);
	k = new_client();
	CK_BWC(k, bwc_set_role(k, BWC_ROLE_CONSUMER));
	CK_BWC(k, bwc_set_ack_timeout(k, ack_timeout));
	CK_BWC(k, bwc_connect(k, d->sock, "e2e-touch"));
	CK_BWC(k, bwc_get_session_info(k, &info));
	CK_BWC(k, bwc_schedule(k, &t, NULL));
	CK_BWC(k, bwc_wait_fire(k, wait, &f));
	t0 = bwc_now_ns();
	while (bwc_now_ns() < t0 + 4 * ack_timeout) {
		uint64_t before = bwc_now_ns();

		CK_BWC(k, bwc_touch(k, &f, 0, &touched, &deadline));
		ck_assert(touched);
		ck_assert_uint_ge(deadline, before + ack_timeout);
		du_sleep_ms(du_scale_ms(400) / 4);
	}
	/* Past the hold limit: refused, the connection open. */
	rc = bwc_touch(k, &f, info.limits.max_hold_ns + DU_S, &touched, &deadline);
	ck_assert_msg(rc == BWC_ESERVER && bwc_server_error(k) == BWC_SERVER_HOLD_LIMIT,
		      "touch past max_hold_ns: %d (%s)", rc, bwc_errmsg(k));
	ck_assert(strstr(bwc_errmsg(k), "HOLD_LIMIT") != NULL);
	CK_BWC(k, bwc_ack(k, &f, false, &acked));
	ck_assert_uint_eq(acked, 1);
	CK_BWC(k, bwc_stats(k, &st));
	ck_assert_uint_eq(st.redelivered, 0);
	/* Done: a Touch finds nothing. */
	CK_BWC(k, bwc_touch(k, &f, 0, &touched, &deadline));
	ck_assert(!touched);

	/* A fire of an earlier connection: BWC_ESTALE without reconnecting
	 * by itself... */
	t.key = 22;
	CK_BWC(k, bwc_schedule(k, &t, NULL));
	CK_BWC(k, bwc_wait_fire(k, wait, &old));
	CK_BWC(k, bwc_set_reconnect(k, false));
	CK_BWC(k, bwc_reconnect(k));
	ck_assert_int_eq(bwc_touch(k, &old, 0, NULL, NULL), BWC_ESTALE);
	ck_assert_int_eq(bwc_release(k, &old, 0, NULL), BWC_ESTALE);
	ck_assert_int_eq(bwc_send_release(k, &old, 0, NULL, NULL), BWC_ESTALE);
	ck_assert(strstr(bwc_errmsg(k), "cannot release") != NULL);
	/* ...and nothing done, nothing sent, when it does. */
	CK_BWC(k, bwc_set_reconnect(k, true));
	CK_BWC(k, bwc_wait_fire(k, wait, &f));
	ck_assert(f.key == 22 && f.redelivered);
	CK_BWC(k, bwc_reconnect(k));
	CK_BWC(k, bwc_release(k, &f, 0, &out));
	ck_assert(!out.released);
	CK_BWC(k, bwc_touch(k, &f, 0, &touched, NULL));
	ck_assert(!touched);
	bwc_free(k);

	p = attach(d, "e2e-touch", BWC_ROLE_PRODUCER, 0);
	f.connection = 1;
	ck_assert_int_eq(bwc_touch(p, &f, 0, NULL, NULL), BWC_EROLE);
	bwc_free(p);
	du_daemon_free(d);
}
END_TEST

static Suite *client_suite(void)
{
	Suite *s = suite_create("client");
	TCase *tc;

	tc = tcase_create("blocking");
	du_tcase(tc);
	tcase_add_test(tc, test_connect_info);
	tcase_add_test(tc, test_schedule_fire);
	tcase_add_test(tc, test_wall_clock);
	tcase_add_test(tc, test_boottime);
	tcase_add_test(tc, test_wait_fire_timeout);
	tcase_add_test(tc, test_request_timeout);
	tcase_add_test(tc, test_fires_during_blocking_call);
	tcase_add_test(tc, test_wait_fire_eintr);
	tcase_add_test(tc, test_mixed_modes);
	tcase_add_test(tc, test_fire_payloads);
	suite_add_tcase(s, tc);

	tc = tcase_create("nonblocking");
	du_tcase(tc);
	tcase_add_test(tc, test_nonblocking);
	tcase_add_test(tc, test_nonblocking_errors);
	tcase_add_test(tc, test_nonblocking_closed);
	tcase_add_test(tc, test_batched_writes);
	suite_add_tcase(s, tc);

	tc = tcase_create("errors");
	du_tcase(tc);
	tcase_add_test(tc, test_unreachable);
	tcase_add_test(tc, test_server_errors);
	tcase_add_test(tc, test_shutting_down);
	suite_add_tcase(s, tc);

	tc = tcase_create("consumer");
	du_tcase(tc);
	tcase_add_test(tc, test_roles);
	tcase_add_test(tc, test_window);
	tcase_add_test(tc, test_ack_counts);
	tcase_add_test(tc, test_stale_after_reconnect);
	tcase_add_test(tc, test_nonblocking_consumer);
	suite_add_tcase(s, tc);

	tc = tcase_create("owner");
	du_tcase(tc);
	tcase_add_test(tc, test_owner);
	suite_add_tcase(s, tc);

	tc = tcase_create("introspection");
	du_tcase(tc);
	tcase_add_test(tc, test_list_sessions);
	tcase_add_test(tc, test_list_timers);
	tcase_add_test(tc, test_calendar);
	suite_add_tcase(s, tc);

	tc = tcase_create("peer");
	du_tcase(tc);
	tcase_add_test(tc, test_peer);
	tcase_add_test(tc, test_stats_uid);
	tcase_add_test(tc, test_metrics_scrape);
	suite_add_tcase(s, tc);

	tc = tcase_create("restart");
	du_tcase(tc);
	tcase_add_test(tc, test_reconnect_restart);
	suite_add_tcase(s, tc);

	tc = tcase_create("reconnect");
	du_tcase(tc);
	tcase_add_test(tc, test_reconnect_ride);
	tcase_add_test(tc, test_reconnect_consumer);
	tcase_add_test(tc, test_reconnect_handler);
	tcase_add_test(tc, test_reconnect_give_up);
	tcase_add_test(tc, test_reconnect_anonymous);
	tcase_add_test(tc, test_reconnect_unknown);
	tcase_add_test(tc, test_reconnect_pending);
	tcase_add_test(tc, test_reconnect_opt_out);
	suite_add_tcase(s, tc);

	tc = tcase_create("failures");
	du_tcase(tc);
	tcase_add_test(tc, test_backoff);
	tcase_add_test(tc, test_release_delay);
	tcase_add_test(tc, test_policy);
	tcase_add_test(tc, test_dead_letter_kick);
	tcase_add_test(tc, test_touch);
	suite_add_tcase(s, tc);

	tc = tcase_create("fallback");
	du_tcase(tc);
	tcase_add_test(tc, test_unusual_encodings);
	suite_add_tcase(s, tc);

	tc = tcase_create("sigpipe");
	du_tcase(tc);
	tcase_add_test(tc, test_no_sigpipe);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(client_suite());
}
