/*
 * server.c - bitwheeld's event loop.
 *
 * One libevent base, one thread.  Its events:
 *   listener   accepts every pending connection per wakeup; at the client
 *              limit, or its uid's (bwd_state_conn_open, which counts it
 *              until conn_free), a newcomer gets TOO_MANY_CLIENTS and is
 *              closed; out of
 *              descriptors, accepting pauses for 100 ms instead of spinning
 *   wheel      a timerfd of its own, armed at the wheel's next deadline in
 *              absolute CLOCK_MONOTONIC nanoseconds and re-armed only when
 *              that deadline changes (by the pump).  Edge-triggered:
 *              re-arming resets its expiry count, so it is never read.
 *              libevent's own precise timer would cost a timerfd_settime()
 *              on every turn of the loop, two per request and fire.  The
 *              state's own timers (lingers, ack timeouts) are in the same
 *              wheel.
 *   pump       a deferred event that whoever changed the state activates
 *              (a poll, a batch of requests, an Ack, a connection leaving,
 *              output drained): it makes a chunk of the fires the wheel
 *              fired into their sessions' due lists, one per session in
 *              turn (bwd_state_fire), hands every fire that may go now to
 *              its connection (bwd_state_next_delivery: round-robin
 *              over sessions, then over each one's consumers), at most
 *              BWD_DELIVER_CHUNK fires or BWD_TURN_NS, cancels a chunk
 *              of ended anonymous sessions' timers, and re-arms the
 *              wheel's timerfd; a zero timeout (reaper) runs it again
 *              while chunks remain.  After every turn of the loop the
 *              pump is activated again while the state has fires that
 *              may go (bwd_state_has_work): liveness does not rest on
 *              each event remembering to activate it.  So fires leave in
 *              the turn they became possible or the next, one session's
 *              burst - of fires, redeliveries or a released batch - costs
 *              another's fires a turn and not the whole burst, and the
 *              state never calls up into the connections.
 *   signals    SIGTERM/SIGINT start the shutdown; SIGHUP reads --budgets
 *              again (a file that does not parse changes nothing);
 *              SIGPIPE is ignored
 *   notify     READY=1 once the loop runs, STATUS= every few seconds
 *              (saying so while the state directory cannot be written),
 *              WATCHDOG=1 at half the watchdog interval, STOPPING=1
 *   sigchld    a snapshot writer finished (store.c)
 *   clock      the wall clock was stepped (clock.c): every wall-clock
 *              timer is placed again, then the pump runs (the wheel's
 *              next deadline may have moved either way); the same for
 *              boottime timers when the CLOCK_BOOTTIME timerfd expires
 *              and the host was suspended meanwhile, and for calendar
 *              timers when the time zones changed (and on SIGHUP)
 * The loop runs one turn at a time (EVLOOP_ONCE): after each, the store
 * writes what the turn journaled and starts its sync (in the journal's
 * thread); the output held for it goes out once the sync is done.
 * Shutdown: stop accepting, answer every connection SHUTTING_DOWN after its
 * pending replies, wait (at most 5 s, or until a second signal) for them
 * to drain, log what was still pending, exit 0.  A journal that cannot be
 * written does not stop it: the store goes on without one (store.c).
 *   sigxfsz    ignored: past RLIMIT_FSIZE a write fails with EFBIG instead
 */
#define _GNU_SOURCE /* accept4, struct ucred */
#include <errno.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "daemon-internal.h"

#define STATUS_INTERVAL_S 5
#define ACCEPT_PAUSE_MS 100
#define SHUTDOWN_GRACE_S 5
/* Fires handed out between two reads of the clock in the pump. */
#define DELIVER_CLOCK_EVERY 64

struct bwd_server {
	struct bwd_env env;        /* what the connections share             */
	const struct bwd_options *opt;
	struct event_base *base;
	struct bwd_state *state;
	struct bwd_store *store;
	int listen_fd;
	int timer_fd;              /* the wheel's timerfd                    */
	bool activated;
	uint64_t armed_ns;         /* when timer_fd expires; MAX: disarmed   */
	struct bwd_clock *clock;   /* hears of wall-clock steps (clock.c)    */
	struct event *listener, *wheel, *status, *watchdog, *reaper;
	struct event *sigterm, *sigint, *sighup;
	/* The budgets SIGHUP read last; NULL: opt's are in force. */
	struct bwd_budgets *reread;
};

struct bwd_env *bwd_server_env(struct bwd_server *srv)
{
	return &srv->env;
}

/* Arm the wheel's timerfd at ns (0: disarm).  The clock is the wheel's
 * own, so the wakeup is never early; a time already past expires at once. */
static void set_timer(struct bwd_server *srv, uint64_t ns)
{
	struct itimerspec its = {
		.it_value = { .tv_sec = (time_t)(ns / 1000000000u),
			      .tv_nsec = (long)(ns % 1000000000u) },
	};

	if (timerfd_settime(srv->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		bwd_log(BWD_LOG_ERR, "timerfd_settime: %s", strerror(errno));
	srv->armed_ns = ns ? ns : UINT64_MAX;
}

static void rearm(struct bwd_server *srv)
{
	uint64_t next;

	if (bwd_state_next_deadline(srv->state, &next)) {
		if (srv->armed_ns != UINT64_MAX)
			set_timer(srv, 0);
		return;
	}
	/* Absolute time 0 would disarm it: nothing can be due before 1 ns. */
	if (next == 0)
		next = 1;
	if (next != srv->armed_ns)
		set_timer(srv, next);
}

/* Make a turn's share of the fires the wheel fired, hand out every fire
 * that may go now, then see to the timerfd. */
static void pump(struct bwd_server *srv)
{
	static const struct timeval now = { 0, 0 };
	struct bwd_member *m;
	struct bwd_fire *f;
	bool more = bwd_state_fire(srv->state);
	uint64_t start = bw_now_ns();

	for (unsigned n = 1; (f = bwd_state_next_delivery(srv->state, &m)); n++) {
		bwd_conn_deliver(m->owner, f);
		if (n == BWD_DELIVER_CHUNK ||
		    (n % DELIVER_CLOCK_EVERY == 0 && bw_now_ns() - start >= BWD_TURN_NS))
			break;
	}
	if (bwd_state_reap(srv->state))
		more = true;
	/* A timer, not event_active: the loop polls for I/O (and the wheel)
	 * in between. */
	if (more)
		evtimer_add(srv->reaper, &now);
	rearm(srv);
}

static void on_pump(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	pump(arg);
}

static void on_more(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_server *srv = arg;

	(void)fd;
	(void)what;
	bwd_conn_run_deferred(&srv->env);
}

static void on_wheel(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_server *srv = arg;

	(void)fd;
	(void)what;
	/* It expired, so it is disarmed (or was re-armed since, and this is
	 * stale: then the poll finds nothing and the re-arm repeats it). */
	srv->armed_ns = UINT64_MAX;
	bwd_state_poll(srv->state, bw_now_ns());
	pump(srv);
}

static void on_step(void *arg, enum bwd_clock_event what)
{
	struct bwd_server *srv = arg;

	if (what == BWD_CLOCK_ZONES)
		bwd_state_zones_changed(srv->state);
	else
		bwd_state_clock_step(srv->state, what == BWD_CLOCK_RESUME);
	pump(srv);
}

static void notify_status(struct bwd_server *srv)
{
	struct bwd_state_stats ss;

	bwd_state_stats(srv->state, &ss);
	sd_notifyf(0, "STATUS=%" PRIu64 " timers pending, %" PRIu64 " clients, %" PRIu64 " sessions, %" PRIu64 " queued fires, %" PRIu64 " in flight%s%s",
		   ss.timers, srv->env.clients, ss.sessions, ss.queued, ss.in_flight,
		   srv->env.storage.down ? "; state directory not writable: " : "",
		   srv->env.storage.down ? strerror(-srv->env.storage.err) : "");
}

static void on_status(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	notify_status(arg);
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	sd_notify(0, "WATCHDOG=1");
}

static void on_ready(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_server *srv = arg;

	(void)fd;
	(void)what;
	sd_notify(0, "READY=1");
	notify_status(srv);
	bwd_log(BWD_LOG_NOTICE, "ready: %s, oneshot lane %u ms, periodic lane %u ms, %s",
		srv->opt->preset_name, srv->opt->wheel.oneshot.resolution_ms,
		srv->opt->wheel.periodic.resolution_ms,
		srv->activated ? "socket from systemd" : srv->opt->socket_path);
}

/* Tell a client over a limit why, without giving it a connection. */
static void refuse(int fd, Bitwheel__V1__ErrorCode code, const char *msg)
{
	Bitwheel__V1__Envelope env;
	Bitwheel__V1__Error err;
	uint8_t buf[384];
	size_t len;

	bwp_error_init(&env, &err, NULL, code, msg);
	if (bwp_frame_pack(&env, sizeof(buf), buf, sizeof(buf), &len) == 0 &&
	    send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		bwd_log(BWD_LOG_DEBUG, "refusal not sent: %s", strerror(errno));
	close(fd);
}

static void resume_accept(evutil_socket_t fd, short what, void *arg)
{
	struct bwd_server *srv = arg;

	(void)fd;
	(void)what;
	if (!srv->env.stopping)
		event_add(srv->listener, NULL);
}

static void pause_accept(struct bwd_server *srv, int err)
{
	struct timeval tv = { 0, ACCEPT_PAUSE_MS * 1000 };

	bwd_log(BWD_LOG_WARNING, "accept: %s; pausing new connections for %d ms (%" PRIu64 " open)",
		strerror(err), ACCEPT_PAUSE_MS, srv->env.clients);
	event_del(srv->listener);
	event_base_once(srv->base, -1, EV_TIMEOUT, resume_accept, srv, &tv);
}

/* A connection bwd_state_conn_open() counted: conn_free uncounts it, and
 * so does a failure here. */
static int attach_counted(struct bwd_server *srv, struct bufferevent *bev,
			  uid_t uid, pid_t pid)
{
	struct bwd_conn *c;
	int err = bwd_conn_new(&srv->env, bev, uid, pid, &c);

	if (err)
		bwd_state_conn_close(srv->state, uid);
	return err;
}

static void on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct bwd_server *srv = arg;

	(void)what;
	for (;;) {
		struct ucred cred = { 0, (uid_t)-1, (gid_t)-1 };
		socklen_t clen = sizeof(cred);
		struct bufferevent *bev;
		int code;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				pause_accept(srv, errno);
			else if (errno != EAGAIN)
				bwd_log(BWD_LOG_ERR, "accept: %s", strerror(errno));
			return;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
			bwd_log(BWD_LOG_WARNING, "SO_PEERCRED: %s; closing", strerror(errno));
			close(fd);
			continue;
		}
		if (srv->env.clients >= srv->opt->limits.max_clients) {
			srv->env.metrics.refused_clients++;
			bwd_metrics_error(&srv->env.metrics, BITWHEEL__V1__ERROR_CODE__TOO_MANY_CLIENTS);
			bwd_log_client(BWD_LOGK_REFUSED, cred.uid, BWD_LOG_WARNING,
				"client pid %ld uid %ld refused: %" PRIu64 " connections is the limit",
				(long)cred.pid, (long)cred.uid, srv->env.clients);
			refuse(fd, BITWHEEL__V1__ERROR_CODE__TOO_MANY_CLIENTS,
			       "bitwheeld is at its connection limit");
			continue;
		}
		code = bwd_state_conn_open(srv->state, cred.uid);
		if (code) {
			char msg[160];
			const struct bwd_budget *lim = bwd_budget_of(bwd_state_budgets(srv->state), cred.uid);

			snprintf(msg, sizeof(msg), code == BITWHEEL__V1__ERROR_CODE__TOO_MANY_CLIENTS ?
				 "uid %ld is at its budget of %" PRIu64 " connections (max_clients_per_uid)" :
				 "bitwheeld is out of memory (uid %ld, budget %" PRIu64 ")",
				 (long)cred.uid, lim ? lim->clients : UINT64_MAX);
			bwd_log_client(BWD_LOGK_REFUSED, cred.uid, BWD_LOG_WARNING,
				"client pid %ld uid %ld refused: %s", (long)cred.pid,
				(long)cred.uid, msg);
			if (code == BITWHEEL__V1__ERROR_CODE__TOO_MANY_CLIENTS)
				srv->env.metrics.refused_uid++;
			else
				srv->env.metrics.refused_memory++;
			bwd_metrics_error(&srv->env.metrics, (unsigned)code);
			refuse(fd, (Bitwheel__V1__ErrorCode)code, msg);
			continue;
		}
		bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
		if (!bev || attach_counted(srv, bev, cred.uid, cred.pid)) {
			bwd_log(BWD_LOG_ERR, "out of memory for a connection");
			if (!bev) {
				bwd_state_conn_close(srv->state, cred.uid);
				close(fd);
			}
			continue;
		}
		srv->env.metrics.accepted++;
		bwd_log(BWD_LOG_DEBUG, "client pid %ld uid %ld connected", (long)cred.pid,
			(long)cred.uid);
	}
}


static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct bwd_server *srv = arg;
	struct timeval grace = { SHUTDOWN_GRACE_S, 0 };

	(void)what;
	if (srv->env.stopping) {
		bwd_log(BWD_LOG_NOTICE, "%s again: stopping without waiting for clients",
			strsignal((int)sig));
		event_base_loopbreak(srv->base);
		return;
	}
	srv->env.stopping = true;
	sd_notify(0, "STOPPING=1");
	bwd_log(BWD_LOG_NOTICE, "%s: stopping", strsignal((int)sig));
	event_del(srv->listener);
	for (struct bwd_conn *c = srv->env.conns, *next; c; c = next) {
		next = bwd_conn_next(c);
		bwd_conn_fail(c, BITWHEEL__V1__ERROR_CODE__SHUTTING_DOWN,
			      "bitwheeld is stopping");
	}
	if (srv->env.clients == 0)
		event_base_loopbreak(srv->base);
	else
		event_base_loopexit(srv->base, &grace);
}

/* SIGHUP: read the budget file again, here in the loop: budgets.c opens
 * it without blocking and reads only a trusted regular file of at most
 * 1 MiB (a FIFO or a /dev/zero there is refused at once).  A file that is
 * refused or does not parse leaves the budgets in force as they are, and
 * the daemon running. */
static void on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct bwd_server *srv = arg;
	const char *path = srv->opt->budgets.path;
	struct bwd_budgets *b;

	(void)sig;
	(void)what;
	/* A zone change inotify did not see (or cannot: no inotify). */
	bwd_state_zones_changed(srv->state);
	pump(srv);
	if (!path) {
		bwd_log(BWD_LOG_NOTICE, "SIGHUP: no --budgets file to read again; nothing changes");
		return;
	}
	b = calloc(1, sizeof(*b));
	if (!b || bwd_budgets_load(path, &srv->opt->limits, b)) {
		bwd_log(BWD_LOG_WARNING, "SIGHUP: %s not read again (%s); the budgets in force stay",
			path, b ? "see the error above" : "out of memory");
		free(b);
		return;
	}
	bwd_state_set_budgets(srv->state, b);
	if (srv->reread) {
		bwd_budgets_free(srv->reread);
		free(srv->reread);
	}
	srv->reread = b;
	bwd_log(BWD_LOG_NOTICE, "SIGHUP: budgets read again from %s: %zu uids set apart from the default",
		path, b->n);
}

int bwd_server_attach(struct bwd_server *srv, struct bufferevent *bev,
		      uid_t uid, pid_t pid)
{
	if (bwd_state_conn_open(srv->state, uid)) {
		bufferevent_free(bev);
		return -EPERM;
	}
	return attach_counted(srv, bev, uid, pid);
}

/* A sync of the journal is done: the output it covered may go. */
static void on_durable(void *arg, uint64_t upto)
{
	struct bwd_server *srv = arg;

	bwd_conn_release(&srv->env.held, upto);
	event_active(srv->env.pump, 0, 0);
}

int bwd_server_new(const struct bwd_options *opt, struct bwd_server **out)
{
	struct bwd_server *srv = calloc(1, sizeof(*srv));
	int err = -ENOMEM;

	if (!srv)
		return -ENOMEM;
	srv->opt = opt;
	srv->listen_fd = -1;
	srv->timer_fd = -1;
	srv->armed_ns = UINT64_MAX;
	srv->base = event_base_new();
	if (!srv->base)
		goto fail;
	srv->env.opt = opt;
	srv->env.base = srv->base;
	srv->env.started_ns = bw_now_ns();
	srv->env.pump = event_new(srv->base, -1, 0, on_pump, srv);
	srv->reaper = evtimer_new(srv->base, on_pump, srv);
	srv->env.more = evtimer_new(srv->base, on_more, srv);
	if (!srv->env.pump || !srv->reaper || !srv->env.more)
		goto fail;
	if (bwd_state_new(opt, srv->env.started_ns, &srv->state))
		goto fail;
	srv->env.state = srv->state;
	srv->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (srv->timer_fd < 0) {
		err = -errno;
		bwd_log(BWD_LOG_ERR, "timerfd_create: %s", strerror(errno));
		goto fail;
	}
	srv->wheel = event_new(srv->base, srv->timer_fd, EV_READ | EV_PERSIST | EV_ET,
			       on_wheel, srv);
	if (!srv->wheel || event_add(srv->wheel, NULL))
		goto fail;
	if (opt->store.dir) {
		err = bwd_store_open(&opt->store, srv->state, srv->base, on_durable,
				     srv, &srv->env.storage, &srv->store);
		if (err)
			goto fail;
		rearm(srv);
	} else {
		bwd_log(BWD_LOG_NOTICE, "no --state-dir: timers are kept in memory only and lost when bitwheeld stops");
	}
	/* After the restore: restored wall-clock timers are placed by then. */
	err = bwd_clock_open(srv->base, on_step, srv, &srv->clock);
	if (err)
		goto fail;
	bwd_state_clock_attach(srv->state, srv->clock);
	*out = srv;
	return 0;
fail:
	bwd_server_free(srv);
	return err;
}

/* What a real daemon adds: the socket, signals, systemd notification. */
static int server_open(struct bwd_server *srv)
{
	const struct bwd_options *opt = srv->opt;
	struct timeval status = { STATUS_INTERVAL_S, 0 }, zero = { 0, 0 };
	uint64_t wd_usec;

	if (bwd_listen_open(opt->socket_path, opt->socket_mode, opt->socket_gid,
			    &srv->listen_fd, &srv->activated))
		return -EADDRNOTAVAIL;
	evutil_make_socket_nonblocking(srv->listen_fd);
	srv->listener = event_new(srv->base, srv->listen_fd, EV_READ | EV_PERSIST,
				  on_accept, srv);
	srv->status = event_new(srv->base, -1, EV_PERSIST, on_status, srv);
	srv->sigterm = evsignal_new(srv->base, SIGTERM, on_signal, srv);
	srv->sigint = evsignal_new(srv->base, SIGINT, on_signal, srv);
	srv->sighup = evsignal_new(srv->base, SIGHUP, on_hup, srv);
	if (!srv->listener || !srv->status || !srv->sigterm || !srv->sigint ||
	    !srv->sighup)
		return -ENOMEM;
	if (sd_watchdog_enabled(0, &wd_usec) > 0) {
		struct timeval tv = { (time_t)(wd_usec / 2 / 1000000),
				      (suseconds_t)(wd_usec / 2 % 1000000) };

		srv->watchdog = event_new(srv->base, -1, EV_PERSIST, on_watchdog, srv);
		if (!srv->watchdog)
			return -ENOMEM;
		event_add(srv->watchdog, &tv);
	}
	event_add(srv->listener, NULL);
	event_add(srv->status, &status);
	event_add(srv->sigterm, NULL);
	event_add(srv->sigint, NULL);
	event_add(srv->sighup, NULL);
	return event_base_once(srv->base, -1, EV_TIMEOUT, on_ready, srv, &zero);
}

void bwd_server_free(struct bwd_server *srv)
{
	struct event *evs[] = { srv->listener, srv->wheel, srv->status,
				srv->watchdog, srv->sigterm, srv->sigint,
				srv->sighup, srv->reaper, srv->env.pump, srv->env.more };

	/* Connections free themselves from the loop's next turn. */
	while (srv->env.conns) {
		bwd_conn_close(srv->env.conns, false);
		event_base_loop(srv->base, EVLOOP_NONBLOCK);
	}
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if (evs[i])
			event_free(evs[i]);
	if (srv->state)
		bwd_state_clock_attach(srv->state, NULL);
	bwd_clock_free(srv->clock);
	bwd_store_free(srv->store);
	bwd_state_free(srv->state);
	if (srv->reread) {
		bwd_budgets_free(srv->reread);
		free(srv->reread);
	}
	if (srv->timer_fd >= 0)
		close(srv->timer_fd);
	if (srv->listen_fd >= 0) {
		close(srv->listen_fd);
		if (!srv->activated)
			unlink(srv->opt->socket_path);
	}
	if (srv->base)
		event_base_free(srv->base);
	free(srv);
}

/* Turn the loop until it is told to stop; after each turn, commit. */
static int serve(struct bwd_server *srv)
{
	for (;;) {
		int rc = event_base_loop(srv->base, EVLOOP_ONCE);

		if (srv->store) {
			uint64_t upto;
			enum bwd_commit done = bwd_store_commit(srv->store,
				bwd_conn_waiting(srv->env.held), &upto);

			if (done != BWD_COMMIT_WAIT)
				bwd_conn_cover(&srv->env.held, upto);
			if (done == BWD_COMMIT_DURABLE)
				bwd_conn_release(&srv->env.held, upto);
			/* Seen at the store's retries at the latest. */
			if (srv->env.storage.down && srv->env.held &&
			    bw_now_ns() - srv->env.storage.down_ns > BWD_HELD_DOWN_NS)
				bwd_conn_drop_held(&srv->env.held,
						   "the state directory cannot be written; what this connection was sent since is not durable and is dropped (its fires go back to the queue); reconnect");
		}
		/* Whatever the turn did that lets a fire go (an ack, a drain,
		 * a consumer attaching, a hold ending, a journal generation
		 * that gives a uid its share back), the pump runs in the next
		 * turn at the latest: delivery never waits for a request to
		 * come by, and a chunk left over goes on after I/O. */
		if (bwd_state_has_work(srv->state))
			event_active(srv->env.pump, 0, 0);
		if (rc || event_base_got_break(srv->base) ||
		    event_base_got_exit(srv->base) ||
		    (srv->env.stopping && srv->env.clients == 0))
			return 0;
	}
}

int bwd_server_run(const struct bwd_options *opt)
{
	struct bwd_server *srv;
	int err;

	signal(SIGPIPE, SIG_IGN);
	/* Past RLIMIT_FSIZE a write fails with EFBIG, a storage fault the
	 * daemon lives through, instead of killing it. */
	signal(SIGXFSZ, SIG_IGN);
	err = bwd_server_new(opt, &srv);
	if (err) {
		if (err == -ENOMEM)
			bwd_log(BWD_LOG_ERR, "out of memory at start-up");
		return err;
	}
	err = server_open(srv);
	if (err == 0) {
		err = serve(srv);
		if (srv->env.stopping || err)
			bwd_state_log_pending(srv->state, srv->store != NULL);
	} else if (err == -ENOMEM) {
		bwd_log(BWD_LOG_ERR, "out of memory at start-up");
	}
	bwd_server_free(srv);
	return err;
}
