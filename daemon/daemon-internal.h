/*
 * daemon-internal.h - bitwheeld's modules and the data they share.
 *
 *   options.c   command line and defaults          -> struct bwd_options
 *   log.c       leveled logging to stderr (journald reads the <N> prefix)
 *   map.c       intrusive chained hash map keyed by u64
 *   state.c     sessions, timers and the dual wheel: everything the daemon
 *               knows, changed only through bwd_state_* / bwd_session_*,
 *               so it can be written out and read back in one place
 *   listen.c    the listening socket: systemd's, or one we bind
 *   conn.c      one client connection: frames in, frames out, bounds
 *   request.c   what each request does to the state, and its reply
 *   server.c    the libevent loop: accept, timers, signals, sd_notify
 *   bitwheeld.c main()
 */
#ifndef BWD_DAEMON_INTERNAL_H
#define BWD_DAEMON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bitwheel.h"
#include "frame.h"

struct event_base;
struct event;
struct bufferevent;

/* ---- options.c ---------------------------------------------------------- */

struct bwd_limits {
	uint32_t max_clients;
	uint32_t max_frame;
	uint32_t max_payload;
	uint64_t max_timers;       /* per session                            */
	uint64_t max_queued;       /* per detached named session             */
	uint64_t linger_ns;
	uint64_t max_output;       /* unread bytes per connection            */
};

struct bwd_options {
	const char *socket_path;
	unsigned socket_mode;
	struct bw_dual_config wheel;
	const char *preset_name;
	struct bwd_limits limits;
	bool verbose;
};

/* 0 to run, 1 when --help/--version printed, -1 on a usage error. */
int bwd_options_parse(int argc, char **argv, struct bwd_options *out);
/* "250ms", "2s", "5m", "1h", "10us", "100ns" -> ns; 0 or -EINVAL. */
int bwd_parse_duration(const char *s, uint64_t *out_ns);

/* ---- log.c -------------------------------------------------------------- */

enum bwd_log_level { BWD_LOG_ERR = 3, BWD_LOG_WARNING = 4, BWD_LOG_NOTICE = 5,
		     BWD_LOG_INFO = 6, BWD_LOG_DEBUG = 7 };

/* Show messages up to this level (default BWD_LOG_INFO). */
void bwd_log_set_level(enum bwd_log_level max);
void bwd_log(enum bwd_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- map.c -------------------------------------------------------------- */

struct bwd_map_node {
	struct bwd_map_node *next;
	uint64_t key;
};

struct bwd_map {
	struct bwd_map_node **bucket;
	size_t mask;               /* buckets - 1, a power of two minus one  */
	size_t count;
	uint64_t seed;
};

int bwd_map_init(struct bwd_map *m, uint64_t seed);
void bwd_map_fini(struct bwd_map *m);
/* The first node with this key; bwd_map_next() walks the rest. */
struct bwd_map_node *bwd_map_find(const struct bwd_map *m, uint64_t key);
struct bwd_map_node *bwd_map_next(struct bwd_map_node *n, uint64_t key);
/* Insert; without memory to grow, chains just get longer. */
void bwd_map_insert(struct bwd_map *m, struct bwd_map_node *n);
void bwd_map_remove(struct bwd_map *m, struct bwd_map_node *n);
size_t bwd_map_bytes(const struct bwd_map *m);

#define bwd_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- state.c ------------------------------------------------------------ */

struct bwd_conn;

/* A fire on its way to a client: sent at once, or queued while detached. */
struct bwd_fire {
	struct bwd_fire *next;
	uint64_t key;
	uint64_t deadline_ns;
	uint64_t fired_ns;
	uint64_t count;            /* periodic: fire number; 0 for oneshot   */
	bool late;
	bool has_payload;
	uint32_t payload_len;
	const uint8_t *payload;    /* the timer's, or the bytes that follow  */
	uint64_t wire_end;         /* conn.c: output offset its frame ends at */
};

struct bwd_timer {
	struct bwd_map_node node;  /* keyed by the client's key              */
	struct bwd_session *session;
	bw_handle handle;
	uint64_t deadline_ns;      /* the deadline it waits for now          */
	uint64_t period_ns;        /* 0: oneshot                             */
	uint64_t count;            /* fires so far                           */
	uint32_t payload_len;
	bool has_payload;
	uint8_t payload[];
};

struct bwd_session {
	struct bwd_map_node node;  /* keyed by the name's hash (named only)  */
	char *name;                /* NULL: anonymous                        */
	uid_t owner;
	struct bwd_conn *conn;     /* NULL: detached                         */
	struct bwd_map timers;
	struct bwd_fire *queue_head, *queue_tail;
	uint64_t queued;
	uint64_t dropped;          /* since it was last attached             */
	struct event *linger;      /* armed while detached                   */
	struct bwd_state *state;
};

struct bwd_state_stats {
	uint64_t sessions;         /* named                                  */
	uint64_t queued;           /* fires waiting in session queues        */
	uint64_t dropped;          /* fires dropped from full queues, ever   */
	uint64_t expired;          /* sessions dropped after their linger    */
	uint64_t timers;           /* pending, all sessions                  */
	uint64_t bytes;            /* timers, fires, sessions, maps          */
};

/*
 * Where fires go: the server hands fires for attached sessions to their
 * connection.  deliver returns 0 when the fire was written, nonzero when
 * the session must queue it instead.
 */
struct bwd_sink {
	int (*deliver)(struct bwd_conn *conn, const struct bwd_fire *fire,
		       void *ctx);
	void *ctx;
};

struct bwd_state;

int bwd_state_new(const struct bwd_options *opt, struct event_base *base,
		  const struct bwd_sink *sink, uint64_t now_ns,
		  struct bwd_state **out);
void bwd_state_free(struct bwd_state *st);
/* Fire every due timer; the server re-arms its timer from next_deadline. */
void bwd_state_poll(struct bwd_state *st, uint64_t now_ns);
/* BW_EEMPTY when nothing is pending. */
int bwd_state_next_deadline(struct bwd_state *st, uint64_t *out_ns);
void bwd_state_stats(const struct bwd_state *st, struct bwd_state_stats *out);
struct bw_dual *bwd_state_wheel(struct bwd_state *st);

/*
 * Open a session for a connection.  name NULL: a new anonymous session.
 * Otherwise attach to the named one or create it.  Errors are protocol
 * codes (Bitwheel__V1__ErrorCode) as positive ints, 0 on success.
 */
int bwd_session_open(struct bwd_state *st, const char *name, uid_t uid,
		     struct bwd_conn *conn, struct bwd_session **out,
		     bool *resumed);
/* The connection is gone: anonymous sessions end, named ones linger. */
void bwd_session_detach(struct bwd_session *s);
/* A copy of f with its payload, in one allocation free() releases. */
struct bwd_fire *bwd_fire_copy(const struct bwd_fire *f);
/* Take the oldest queued fire (caller frees it with free()), or NULL. */
struct bwd_fire *bwd_session_dequeue(struct bwd_session *s);
/* Put fires that were not sent back at the head of the queue, in order:
 * chain is a list through next, which the queue takes over. */
void bwd_session_requeue(struct bwd_session *s, struct bwd_fire *chain);

struct bwd_schedule {
	uint64_t key;
	uint64_t deadline_ns;
	uint64_t period_ns;        /* 0: oneshot                             */
	const uint8_t *payload;
	uint32_t payload_len;
	bool has_payload;
	bool replace;
};

/* 0 or a protocol error code; *replaced says whether a timer was replaced. */
int bwd_timer_schedule(struct bwd_session *s, const struct bwd_schedule *req,
		       bool *replaced);
/* 0 (*pending says whether it was), or a protocol error code. */
int bwd_timer_cancel(struct bwd_session *s, uint64_t key, bool *pending);

/* ---- listen.c ----------------------------------------------------------- */

/* The listening fd: systemd's if it passed one, else bound at path. */
int bwd_listen_open(const char *path, unsigned mode, int *fd_out,
		    bool *activated);

/* ---- conn.c ------------------------------------------------------------- */

struct bwd_server;

/* A connection over bev, which it owns from now on, even on failure. */
int bwd_conn_new(struct bwd_server *srv, struct bufferevent *bev, uid_t uid,
		 pid_t pid, struct bwd_conn **out);
/* Write one envelope; 0, or -ENOBUFS when the output bound is hit. */
int bwd_conn_send(struct bwd_conn *c, const Bitwheel__V1__Envelope *env);
/* Queue an error frame answering req (NULL: the connection); when fatal,
 * close once it has been written. */
void bwd_conn_error(struct bwd_conn *c, const Bitwheel__V1__Envelope *req,
		    Bitwheel__V1__ErrorCode code, bool fatal, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* Close after the output drains (graceful) or at once. */
void bwd_conn_close(struct bwd_conn *c, bool flush);
/* Deliver a fire (the sink's deliver). */
int bwd_conn_deliver(struct bwd_conn *c, const struct bwd_fire *f, void *ctx);
/* Send queued fires of the attached session while the output has room. */
void bwd_conn_drain_queue(struct bwd_conn *c);
uid_t bwd_conn_uid(const struct bwd_conn *c);
struct bwd_session *bwd_conn_session(const struct bwd_conn *c);
void bwd_conn_set_session(struct bwd_conn *c, struct bwd_session *s);
size_t bwd_conn_output(const struct bwd_conn *c);

struct bwd_server *bwd_conn_server(const struct bwd_conn *c);
/* The next connection in the server's list (head: bwd_server_conns). */
struct bwd_conn *bwd_conn_next(const struct bwd_conn *c);

/* ---- request.c ---------------------------------------------------------- */

/* Act on one request and queue its reply (or fail the connection). */
void bwd_request_handle(struct bwd_conn *c, const Bitwheel__V1__Envelope *env);

/* ---- server.c ----------------------------------------------------------- */

/* The whole daemon: listen, serve until a signal, stop. */
int bwd_server_run(const struct bwd_options *opt);
/* A server with its state and loop but no socket, signals or systemd
 * notification: the fuzzer feeds it connections of its own. */
int bwd_server_new(const struct bwd_options *opt, struct bwd_server **out);
void bwd_server_free(struct bwd_server *srv);
/* Serve a client over bev (taken over, even on failure). */
int bwd_server_attach(struct bwd_server *srv, struct bufferevent *bev,
		      uid_t uid, pid_t pid);
struct event_base *bwd_server_base(struct bwd_server *srv);
struct bwd_state *bwd_server_state(struct bwd_server *srv);
const struct bwd_options *bwd_server_options(struct bwd_server *srv);
/* The wheel may have a new earliest deadline: re-arm the loop's timer. */
void bwd_server_rearm(struct bwd_server *srv);
/* A connection was freed (conn.c unlinks it from the list itself). */
void bwd_server_conn_gone(struct bwd_server *srv);
/* The head of the list of connections, which conn.c keeps. */
struct bwd_conn **bwd_server_conns(struct bwd_server *srv);
bool bwd_server_stopping(const struct bwd_server *srv);
/* Bytes waiting in every connection's output buffer. */
uint64_t bwd_server_buffered(struct bwd_server *srv);
uint64_t bwd_server_started(const struct bwd_server *srv);
uint64_t bwd_server_clients(const struct bwd_server *srv);

#endif /* BWD_DAEMON_INTERNAL_H */
