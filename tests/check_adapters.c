/*
 * check_adapters.c - the event-loop adapters (client/adapters/
 * bitwheel-client-libevent.h, -libev.h, -libuv.h, -glib.h) driving real
 * loops against real bitwheeld processes on temporary sockets.
 *
 * The same tests run on every loop, through struct loop_ops (tests/
 * adapters.h: a loop's create, run-with-deadline, stop, and its adapter's
 * attach, update, detach); a loop configure did not find (libev, libuv, GLib:
 * BW_HAVE_LIBEV, BW_HAVE_LIBUV, BW_HAVE_GLIB) has no TCase, and says so.
 *
 * TCases, one per loop:
 *   fires    timers sent with bwc_send_schedule from outside the loop's
 *            callbacks (then update), their fires received through the
 *            loop and acknowledged from the handler: every key once, each
 *            payload intact, nothing left in flight; the adapter
 *            detached from inside the handler at the last fire.
 *   restart  the daemon restarted under an attached consumer: the client
 *            reconnects inside the adapter's dispatch, most often onto
 *            the same descriptor number, and a fire scheduled after the
 *            restart still arrives through the loop (the adapter must
 *            register the new socket: without that the loop waits on
 *            nothing and the deadline fails the test).
 *   update   a fire read into the client's queue by a blocking call
 *            (bwc_stats) is handed out once update is called, though the
 *            socket has nothing more to say.
 *   error    reconnecting off: the daemon stopping reaches the error
 *            callback, the adapter stops watching (-1), and after
 *            bwc_reconnect and update the loop receives fires again.
 *   write    more requests sent from inside the fire handler than the
 *            socket takes at once (its send buffer shrunk to a few KB,
 *            1 KB payloads until the client holds 1 MiB unwritten,
 *            BWC_EAGAIN, the daemon stopped meanwhile so that the
 *            socket backs up however fast it reads): the client asks
 *            for POLLOUT, the adapter watches for it once the handler
 *            returns, and the loop writes the rest with no update called
 *            before any reply came back (every fdatasync is slowed to a
 *            second, tests/faultsync.c, and a named session's replies
 *            wait for theirs: a loop that did not watch for POLLOUT
 *            would write the rest only when the first replies woke it),
 *            then stops watching for it; the daemon has them all.
 *
 * Every loop run has a deadline well inside the TCase's timeout.
 */
#include <check.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "adapters.h"
#include "daemonutil.h"
#include "testutil.h"

/* ---- what a test watches ------------------------------------------------ */

#define MAX_KEYS 64
#define SENT_KEY 1000           /* the handler's own Schedules' first key   */
#define SENT_PAYLOAD 1000       /* and each one's payload                   */

struct watch {
	const struct loop_ops *ops;
	void *loop, *adapter;
	struct bwc_client *c;
	uint64_t want;          /* stop once this many distinct keys came   */
	uint64_t stop_key;      /* ... or this key (UINT64_MAX: none)       */
	bool detach_at_end;     /* detach from inside the handler           */
	int sends;              /* Schedules the handler may send at stop_key:
				   until the client holds 1 MiB unwritten  */
	int sent;
	pid_t hold_pid;         /* stopped while the handler sends, so that
				   the socket backs up however fast it reads */
	int replies;            /* their replies, all successes             */
	uint64_t seen[MAX_KEYS];/* fires per key                            */
	uint64_t distinct, fires;
	int errors, last_error;
	char msg[200];          /* the first problem the handler found      */
};

static void on_reply(struct bwc_client *c, const struct bwc_reply *r, void *arg)
{
	struct watch *w = arg;

	if (r->status != 0 && w->msg[0] == '\0')
		snprintf(w->msg, sizeof(w->msg), "reply for key %" PRIu64 ": %s",
			 r->key, bwc_errmsg(c));
	w->replies++;
}

static void on_fire(struct bwc_client *c, const struct bwc_fire *f, void *arg)
{
	struct watch *w = arg;
	char want[32];

	w->fires++;
	snprintf(want, sizeof(want), "payload-%" PRIu64, f->key);
	if (f->key >= MAX_KEYS ||
	    f->payload_len != strlen(want) ||
	    memcmp(f->payload, want, f->payload_len) != 0) {
		if (w->msg[0] == '\0')
			snprintf(w->msg, sizeof(w->msg),
				 "fire of key %" PRIu64 " with a payload of %zu bytes",
				 f->key, f->payload_len);
		return;
	}
	if (w->seen[f->key]++ == 0)
		w->distinct++;
	if (bwc_send_ack(c, f, false) != 0 && w->msg[0] == '\0')
		snprintf(w->msg, sizeof(w->msg), "send_ack: %s", bwc_errmsg(c));
	if (w->distinct == w->want || f->key == w->stop_key) {
		if (w->hold_pid)
			ck_assert(kill(w->hold_pid, SIGSTOP) == 0);
		for (int i = 0; i < w->sends; i++) {
			static const char big[SENT_PAYLOAD];
			struct bwc_timer t = { .key = SENT_KEY + (uint64_t)i,
					       .when_ns = 3600 * 1000 * DU_MS,
					       .payload = big,
					       .payload_len = sizeof(big) };
			int rc = bwc_send_schedule(c, &t, on_reply, w);

			if (rc == BWC_EAGAIN)
				break;
			if (rc != 0 && w->msg[0] == '\0')
				snprintf(w->msg, sizeof(w->msg), "send_schedule: %s",
					 bwc_errmsg(c));
			w->sent++;
		}
		if (w->hold_pid)
			ck_assert(kill(w->hold_pid, SIGCONT) == 0);
		if (w->detach_at_end && w->adapter != NULL) {
			w->ops->detach(w->adapter);
			w->adapter = NULL;
		}
		w->ops->stop(w->loop);
	}
}

static void on_error(struct bwc_client *c, int err, void *arg)
{
	struct watch *w = arg;

	(void)c;
	w->errors++;
	w->last_error = err;
	w->ops->stop(w->loop);
}

static struct bwc_client *new_consumer(const struct du_daemon *d,
				       const char *session, bool reconnect)
{
	struct bwc_client *c = NULL;

	ck_assert_int_eq(bwc_new(&c), 0);
	ck_assert_int_eq(bwc_set_timeout(c, (int64_t)DU_WAIT_MS * (int64_t)DU_MS), 0);
	CK_BWC(c, bwc_set_role(c, BWC_ROLE_CONSUMER));
	CK_BWC(c, bwc_set_reconnect(c, reconnect));
	CK_BWC(c, bwc_connect(c, d->sock, session));
	return c;
}

/* A consumer of session on d, attached to a new loop of ops. */
static void watch_start(struct watch *w, const struct loop_ops *ops,
			const struct du_daemon *d, const char *session,
			bool reconnect)
{
	memset(w, 0, sizeof(*w));
	w->ops = ops;
	w->stop_key = UINT64_MAX;
	w->loop = ops->create();
	w->c = new_consumer(d, session, reconnect);
	bwc_set_fire_handler(w->c, on_fire, w);
	CK_BWC(w->c, ops->attach(w->loop, w->c, on_error, w, &w->adapter));
	ck_assert_ptr_nonnull(w->adapter);
}

static void watch_end(struct watch *w)
{
	if (w->adapter != NULL)
		w->ops->detach(w->adapter);
	w->ops->destroy(w->loop);
	bwc_free(w->c);
}

/* Run the loop until the handler stops it, failing after ms. */
static void watch_run(struct watch *w, int ms, const char *what)
{
	bool stopped = w->ops->run(w->loop, du_scale_ms(ms));

	ck_assert_msg(w->msg[0] == '\0', "%s: %s: %s", w->ops->name, what, w->msg);
	ck_assert_msg(stopped, "%s: %s: the loop was not stopped within %d ms "
		      "(%" PRIu64 " of %" PRIu64 " keys, %d errors: %s)",
		      w->ops->name, what, du_scale_ms(ms), w->distinct, w->want,
		      w->errors, bwc_errmsg(w->c));
}

static struct bwc_timer timer_for(uint64_t key, uint64_t delay_ns, char *buf,
				  size_t len)
{
	struct bwc_timer t = { .key = key, .when_ns = delay_ns };

	snprintf(buf, len, "payload-%" PRIu64, key);
	t.payload = buf;
	t.payload_len = strlen(buf);
	return t;
}

/* Schedule key through a producer of its own, blocking. */
static void produce(const struct du_daemon *d, const char *session,
		    uint64_t key, uint64_t delay_ns)
{
	struct bwc_client *p = NULL;
	char buf[32];
	struct bwc_timer t = timer_for(key, delay_ns, buf, sizeof(buf));

	ck_assert_int_eq(bwc_new(&p), 0);
	CK_BWC(p, bwc_set_timeout(p, (int64_t)DU_WAIT_MS * (int64_t)DU_MS));
	CK_BWC(p, bwc_set_role(p, BWC_ROLE_PRODUCER));
	CK_BWC(p, bwc_connect(p, d->sock, session));
	CK_BWC(p, bwc_schedule(p, &t, NULL));
	bwc_free(p);
}

static void start_with_state(struct du_daemon *d)
{
	char dir[160];

	snprintf(dir, sizeof(dir), "%s/state", d->dir);
	du_daemon_start(d, "--state-dir", dir, (const char *)NULL);
}

/* ---- the tests ---------------------------------------------------------- */

static const struct loop_ops *const loops[] = {
	&libevent_ops,
#ifdef BW_HAVE_LIBEV
	&libev_ops,
#endif
#ifdef BW_HAVE_LIBUV
	&libuv_ops,
#endif
#ifdef BW_HAVE_GLIB
	&glib_ops,
#endif
};
#define NLOOPS (sizeof(loops) / sizeof(loops[0]))

#define FIRES 40

START_TEST(test_fires)
{
	const struct loop_ops *ops = loops[_i];
	struct du_daemon *d = du_daemon_new();
	struct watch w;
	struct bwc_stats st;
	char bufs[FIRES][32];

	du_daemon_start(d, (const char *)NULL);
	watch_start(&w, ops, d, "adapt-fires", true);
	w.want = FIRES;
	w.detach_at_end = true;
	/* Pipelined from outside the loop's callbacks: update after. */
	for (uint64_t k = 0; k < FIRES; k++) {
		struct bwc_timer t = timer_for(k, (10 + 5 * k) * DU_MS, bufs[k],
					       sizeof(bufs[k]));

		CK_BWC(w.c, bwc_send_schedule(w.c, &t, NULL, NULL));
	}
	ops->update(w.adapter);
	watch_run(&w, 5000, "fires");
	ck_assert_ptr_null(w.adapter);
	for (uint64_t k = 0; k < FIRES; k++)
		ck_assert_msg(w.seen[k] == 1, "%s: key %" PRIu64 " came %" PRIu64
			      " times", ops->name, k, w.seen[k]);
	/* The acks the handler sent went out: nothing is in flight. */
	CK_BWC(w.c, bwc_stats(w.c, &st));
	ck_assert_msg(st.in_flight == 0 && st.acked == FIRES,
		      "%s: in flight %" PRIu64 ", acked %" PRIu64, ops->name,
		      st.in_flight, st.acked);
	watch_end(&w);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_restart)
{
	const struct loop_ops *ops = loops[_i];
	struct du_daemon *d = du_daemon_new();
	struct watch w;
	int fd_before;

	start_with_state(d);
	watch_start(&w, ops, d, "adapt-restart", true);
	produce(d, "adapt-restart", 1, 20 * DU_MS);
	w.stop_key = 1;
	watch_run(&w, 5000, "before the restart");
	fd_before = bwc_fd(w.c);

	du_daemon_stop(d, SIGTERM, DU_WAIT_MS);
	start_with_state(d);
	/* Due well after the client is back (its first attempt comes 25 to
	 * 50 ms after it finds the connection gone): the fire must come
	 * through the loop's watch of the new socket, not inside the
	 * dispatch that reconnected. */
	produce(d, "adapt-restart", 2, 500 * DU_MS);
	w.stop_key = 2;
	watch_run(&w, 8000, "after the restart");
	ck_assert_int_eq(w.seen[2], 1);
	ck_assert_int_eq(w.errors, 0);
	du_note("%s: descriptor %d before the restart, %d after", ops->name,
		fd_before, bwc_fd(w.c));
	watch_end(&w);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_update)
{
	const struct loop_ops *ops = loops[_i];
	struct du_daemon *d = du_daemon_new();
	struct watch w;
	struct bwc_stats st;
	char buf[32];
	struct bwc_timer t = timer_for(5, 20 * DU_MS, buf, sizeof(buf));

	du_daemon_start(d, (const char *)NULL);
	watch_start(&w, ops, d, "adapt-update", true);
	/* The attach's own dispatch happens here, not after the update. */
	ck_assert(!ops->run(w.loop, 50));
	CK_BWC(w.c, bwc_schedule(w.c, &t, NULL));
	/* The fire comes while bwc_stats waits for its reply, which queues
	 * it in the client: the socket has nothing left to signal. */
	du_sleep_ms(150);
	CK_BWC(w.c, bwc_stats(w.c, &st));
	ck_assert_int_eq(st.in_flight, 1);
	w.stop_key = 5;
	ops->update(w.adapter);
	watch_run(&w, 2000, "a fire queued by a blocking call");
	ck_assert_int_eq(w.seen[5], 1);
	watch_end(&w);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_error)
{
	const struct loop_ops *ops = loops[_i];
	struct du_daemon *d = du_daemon_new();
	struct watch w;
	bool stopped;

	start_with_state(d);
	watch_start(&w, ops, d, "adapt-error", false);
	du_daemon_stop(d, SIGTERM, DU_WAIT_MS);
	stopped = ops->run(w.loop, du_scale_ms(5000));
	ck_assert_msg(stopped && w.errors == 1,
		      "%s: the daemon's stop: %d errors", ops->name, w.errors);
	ck_assert_msg(w.last_error == BWC_ECLOSED || w.last_error == BWC_ESERVER,
		      "%s: error %s", ops->name, bwc_strerror(w.last_error));
	ck_assert_int_eq(ops->core(w.adapter)->fd, -1);

	start_with_state(d);
	CK_BWC(w.c, bwc_reconnect(w.c));
	ops->update(w.adapter);
	ck_assert_int_eq(ops->core(w.adapter)->fd, bwc_fd(w.c));
	produce(d, "adapt-error", 3, 20 * DU_MS);
	w.stop_key = 3;
	watch_run(&w, 5000, "after bwc_reconnect");
	ck_assert_int_eq(w.seen[3], 1);
	ck_assert_int_eq(w.errors, 1);
	watch_end(&w);
	du_daemon_free(d);
}
END_TEST

START_TEST(test_write)
{
	const struct loop_ops *ops = loops[_i];
	struct du_daemon *d = du_daemon_new();
	struct watch w;
	struct bwc_stats st;
	int replies_then = -1, sndbuf = 4096;

	du_fault_sync(d, 0, 0);
	start_with_state(d);
	watch_start(&w, ops, d, "adapt-write", true);
	ck_assert(setsockopt(bwc_fd(w.c), SOL_SOCKET, SO_SNDBUF, &sndbuf,
			     sizeof(sndbuf)) == 0);
	produce(d, "adapt-write", 1, 20 * DU_MS);
	du_fault_sync(d, (unsigned)du_scale_ms(1000), 0);
	w.stop_key = 1;
	w.sends = 4000;
	w.hold_pid = d->pid;
	watch_run(&w, 8000, "the fire whose handler sends");
	/* The dispatch wrote what the socket took; the rest waits. */
	ck_assert_msg(w.sent < w.sends,
		      "%s: the daemon read %d requests as fast as they came: nothing tested",
		      ops->name, w.sent);
	ck_assert_msg(bwc_poll_events(w.c) & POLLOUT,
		      "%s: the socket took all %d requests at once: nothing tested",
		      ops->name, w.sent);
	ck_assert_msg(ops->core(w.adapter)->events & POLLOUT,
		      "%s: the adapter does not watch for POLLOUT the client asks for",
		      ops->name);
	for (int i = 0, n = du_scale_ms(8000) / 20; i < n && w.replies < w.sent; i++) {
		ops->run(w.loop, 20);
		if (replies_then < 0 && !(bwc_poll_events(w.c) & POLLOUT)) {
			replies_then = w.replies;
			ck_assert_msg(!(ops->core(w.adapter)->events & POLLOUT),
				      "%s: the adapter still watches for POLLOUT",
				      ops->name);
		}
	}
	ck_assert_msg(w.msg[0] == '\0', "%s: %s", ops->name, w.msg);
	ck_assert_msg(replies_then == 0,
		      "%s: the queued requests were written after %d replies had come (-1: never): not on POLLOUT",
		      ops->name, replies_then);
	ck_assert_int_eq(w.replies, w.sent);
	du_fault_sync(d, 0, 0);
	CK_BWC(w.c, bwc_stats(w.c, &st));
	ck_assert_uint_eq(st.oneshot.pending + st.periodic.pending, (uint64_t)w.sent);
	watch_end(&w);
	du_daemon_free(d);
}
END_TEST

static Suite *adapters_suite(void)
{
	Suite *s = suite_create("adapters");
	TCase *tc;

#ifndef BW_HAVE_LIBEV
	du_note("libev not found by configure: no libev TCase");
#endif
#ifndef BW_HAVE_LIBUV
	du_note("libuv not found by configure: no libuv TCase");
#endif
#ifndef BW_HAVE_GLIB
	du_note("GLib not found by configure: no glib TCase");
#endif
	for (size_t i = 0; i < NLOOPS; i++) {
		tc = tcase_create(loops[i]->name);
		du_tcase(tc);
		tcase_add_loop_test(tc, test_fires, (int)i, (int)i + 1);
		tcase_add_loop_test(tc, test_restart, (int)i, (int)i + 1);
		tcase_add_loop_test(tc, test_update, (int)i, (int)i + 1);
		tcase_add_loop_test(tc, test_error, (int)i, (int)i + 1);
		tcase_add_loop_test(tc, test_write, (int)i, (int)i + 1);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	return tu_run_suite(adapters_suite());
}
