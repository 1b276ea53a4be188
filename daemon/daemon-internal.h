/*
 * daemon-internal.h - bitwheeld's modules and the data they share.
 *
 *   options.c   command line and defaults          -> struct bwd_options
 *   log.c       leveled logging to stderr (journald reads the <N> prefix)
 *   map.c       intrusive chained hash map keyed by u64
 *   state.c     sessions, timers and the dual wheel: everything the daemon
 *               knows, changed only through bwd_state_* / bwd_session_*,
 *               each change of a named session told to the journal, and
 *               all of it written out (dump) and read back (apply) there
 *   record.c    the bytes of the state files: headers and records, CRC32C
 *   journal.c   the append-only journal file: append, group commit, rotate
 *   snapshot.c  a snapshot written by a forked child, then installed
 *   store.c     the state directory: lock, recovery at start, when to
 *               commit and when to snapshot
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

/* When a journal write counts as done (--fsync). */
enum bwd_fsync { BWD_FSYNC_NEVER, BWD_FSYNC_BATCH, BWD_FSYNC_ALWAYS };

struct bwd_store_options {
	const char *dir;           /* NULL: nothing is kept on disk          */
	enum bwd_fsync fsync;
	uint64_t journal_max;      /* bytes of journal that start a snapshot */
	uint64_t snapshot_interval_ns; /* and the longest time between them */
	bool ignore_snapshot;      /* recover from the journals alone        */
};

struct bwd_options {
	const char *socket_path;
	unsigned socket_mode;
	struct bw_dual_config wheel;
	const char *preset_name;
	struct bwd_limits limits;
	struct bwd_store_options store;
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
	uint64_t seq;              /* the session's fire number (journal)    */
	bool late;
	bool sent;                 /* handed to a connection at least once   */
	bool redelivered;          /* restored after it had been sent        */
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
	bool late;                 /* restored past its deadline             */
	uint8_t payload[];
};

struct bwd_session {
	struct bwd_map_node node;  /* keyed by the name's hash (named only)  */
	struct bwd_map_node id_node; /* keyed by id (named only)             */
	char *name;                /* NULL: anonymous                        */
	uid_t owner;
	struct bwd_conn *conn;     /* NULL: detached                         */
	struct bwd_map timers;
	/* Named sessions' fires, oldest first: written to the connection but
	 * not yet out of its buffer (sent), then waiting to be (queue). */
	struct bwd_fire *sent_head, *sent_tail;
	struct bwd_fire *queue_head, *queue_tail;
	uint64_t queued;
	uint64_t dropped;          /* since it was last attached             */
	struct event *linger;      /* armed while detached                   */
	struct bwd_state *state;
	uint64_t id;               /* named: its number in the state files,
				      id_node's key                          */
	uint64_t next_seq;         /* named: the next fire's seq             */
	/* Anonymous, ended with many timers: cancelled a chunk per turn. */
	bool ending;
	size_t reap_bucket;        /* timers' buckets before it are empty    */
	struct bwd_session *next_ending;
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
/* A named session's fire f (the session's now) was written to its
 * connection, its frame ending at output offset wire_end. */
void bwd_session_sent(struct bwd_session *s, struct bwd_fire *f,
		      uint64_t wire_end);
/* The connection's output has drained to offset `drained`: the fires
 * written before it are the client's, and the journal says so. */
void bwd_session_written(struct bwd_session *s, uint64_t drained);
/* The connection is gone: fires written but not drained go back to the
 * head of the queue. */
void bwd_session_unsend(struct bwd_session *s);

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

struct bwd_journal;
struct bwd_record;

/* From now on, every change to a named session is appended to j (NULL:
 * none), which starts with a SESSION record for each named session. */
void bwd_state_set_journal(struct bwd_state *st, struct bwd_journal *j);
/* Hand every named session, timer and undelivered fire to emit, as
 * records (a snapshot's body); stops at emit's first nonzero return. */
int bwd_state_dump(const struct bwd_state *st,
		   int (*emit)(void *ctx, const struct bwd_record *r), void *ctx);
/*
 * Recovery: apply one record read back from a state file whose clock runs
 * shift_ns ahead of ours (0 within one boot).  0, or BWD_REC_ECORRUPT when
 * it contradicts the state (the caller logs and goes on); -ENOMEM.
 */
int bwd_state_apply(struct bwd_state *st, const struct bwd_record *r,
		    int64_t shift_ns);
/* After the last record: arm the restored timers (those already due are
 * marked late), start the sessions' lingers.  Counts what was restored. */
int bwd_state_restore_finish(struct bwd_state *st, uint64_t now_ns,
			     struct bwd_state_stats *restored);

/* ---- record.c ----------------------------------------------------------- */

enum bwd_rec_type {
	BWD_REC_SESSION = 1,       /* sid, seq (next fire), uid, name        */
	BWD_REC_END,               /* sid: the session expired               */
	BWD_REC_TIMER,             /* sid, key, deadline, period, count,
				      payload: scheduled (replacing the key) */
	BWD_REC_CANCEL,            /* sid, key                               */
	BWD_REC_FIRE,              /* sid, key, seq, deadline, count, fired:
				      the timer fired; the fire is owed      */
	BWD_REC_QUEUED,            /* the same with the payload: a fire owed
				      (snapshots)                            */
	BWD_REC_SENT,              /* sid, seq: handed to a connection       */
	BWD_REC_DONE,              /* sid, seq: delivered, or dropped        */
	BWD_REC_TRAILER,           /* count: records before it (snapshots)   */
	BWD_REC_TYPES
};

/* Record flags. */
#define BWD_RECF_PAYLOAD 0x01u /* TIMER/QUEUED: has_payload              */
#define BWD_RECF_LATE 0x02u    /* FIRE/QUEUED: the fire was late         */
#define BWD_RECF_SENT 0x04u    /* FIRE/QUEUED: handed to a connection    */

struct bwd_record {
	uint8_t type;
	uint8_t flags;
	uint8_t name_len;
	uint32_t uid;
	uint64_t sid, key, seq, deadline_ns, period_ns, count, fired_ns;
	const char *name;          /* not NUL-terminated                     */
	const uint8_t *payload;
	uint32_t payload_len;
};

enum bwd_file_kind { BWD_FILE_JOURNAL, BWD_FILE_SNAPSHOT };

struct bwd_file_header {
	enum bwd_file_kind kind;
	uint64_t generation;
	uint8_t boot_id[16];
	uint64_t mono_ns, real_ns;
};

#define BWD_FILE_HEADER_SIZE 64
#define BWD_RECORD_HEADER_SIZE 8
/* A body's bound: the largest payload the options allow, and the rest. */
#define BWD_RECORD_MAX ((16u << 20) + 256u)
/* Parse results besides 0. */
#define BWD_REC_ETORN 1        /* the bytes end inside it               */
#define BWD_REC_ECORRUPT 2     /* a checksum or layout that does not hold */

uint32_t bwd_crc32c(const void *data, size_t len);
void bwd_file_header_pack(const struct bwd_file_header *h,
			  uint8_t out[BWD_FILE_HEADER_SIZE]);
int bwd_file_header_parse(const uint8_t *buf, size_t len,
			  struct bwd_file_header *h);
/* Bytes r takes packed, header included. */
size_t bwd_record_size(const struct bwd_record *r);
/* Pack r into out (bwd_record_size bytes); returns that size. */
size_t bwd_record_pack(const struct bwd_record *r, uint8_t *out);
/* The record at buf: 0 and *used, or BWD_REC_ETORN / BWD_REC_ECORRUPT.
 * r's name and payload point into buf. */
int bwd_record_parse(const uint8_t *buf, size_t len, struct bwd_record *r,
		     size_t *used);
const char *bwd_record_strerror(int err);

/* ---- journal.c ---------------------------------------------------------- */

/* CLOCK_REALTIME in ns: how a deadline crosses a reboot. */
uint64_t bwd_realtime_ns(void);
/* The kernel's boot_id (16 bytes); 0 or -errno. */
int bwd_boot_id(uint8_t out[16]);
/* "journal.0000000000000007" */
void bwd_journal_name(uint64_t generation, char out[32]);
/* Create journal.<generation> in the directory dirfd, header written and
 * synced.  0 or -errno. */
int bwd_journal_open(int dirfd, uint64_t generation, enum bwd_fsync policy,
		     struct bwd_journal **out);
void bwd_journal_close(struct bwd_journal *j);
/* Add a record to the next commit (with --fsync=always: sync it now).
 * 0 or -errno; after a failure the journal stays failed. */
int bwd_journal_append(struct bwd_journal *j, const struct bwd_record *r);
/* write(2) what was appended, without waiting for the disk. */
int bwd_journal_write(struct bwd_journal *j);
/* Write what was appended and make it durable now, in the caller. */
int bwd_journal_sync(struct bwd_journal *j);
/*
 * The end of a loop turn: write what was appended; with --fsync=batch
 * start the sync thread on it unless a sync is in flight (*started: one
 * began, covering everything written so far), otherwise make it durable
 * now.  0 or -errno.
 */
int bwd_journal_commit(struct bwd_journal *j, bool *started);
/* batch: the eventfd that becomes readable when a sync is done (-1
 * otherwise); then bwd_journal_synced() takes its result.  0 or -errno. */
int bwd_journal_event_fd(const struct bwd_journal *j);
int bwd_journal_synced(struct bwd_journal *j);
/* Whether some appended record is not yet durable (acks must wait). */
bool bwd_journal_pending(const struct bwd_journal *j);
bool bwd_journal_failed(const struct bwd_journal *j);
uint64_t bwd_journal_generation(const struct bwd_journal *j);
/* Bytes in the file. */
uint64_t bwd_journal_size(const struct bwd_journal *j);

/* ---- snapshot.c --------------------------------------------------------- */

/* Write a whole snapshot of st (header, records, trailer) to fd. */
int bwd_snapshot_write(const struct bwd_state *st, int fd, uint64_t generation);
/*
 * Fork a child that writes the state as it is now to snapshot.tmp.<its
 * pid> in dirfd, header generation `generation`, synced; *pid is the
 * child, which does not keep lockfd and dies with the daemon.  The parent
 * goes on at once.  0 or -errno.
 */
int bwd_snapshot_start(const struct bwd_state *st, int dirfd, int lockfd,
		       uint64_t generation, pid_t *pid);
/* The name the writer `writer` writes to. */
void bwd_snapshot_tmp_name(pid_t writer, char out[40]);
/* Writer `writer` succeeded: rename its file over snapshot, sync the
 * directory, and remove the journals it makes redundant. */
int bwd_snapshot_install(int dirfd, pid_t writer, uint64_t generation);
/* Remove every unfinished snapshot; the count, or -errno. */
int bwd_snapshot_clean(int dirfd);

/* ---- store.c ------------------------------------------------------------ */

struct bwd_store;

/*
 * Open the state directory (created if missing, locked against a second
 * daemon), recover what it holds into st, and start a new journal.
 * durable(arg) is called from the loop whenever a sync that
 * bwd_store_commit() started is done.  Errors are logged; -errno.
 */
int bwd_store_open(const struct bwd_store_options *opt, struct bwd_state *st,
		   struct event_base *base, void (*durable)(void *arg), void *arg,
		   struct bwd_store **out);
void bwd_store_free(struct bwd_store *s);

/* What a commit did for the output held so far. */
enum bwd_commit {
	BWD_COMMIT_WAIT,           /* a sync in flight: it waits for the next */
	BWD_COMMIT_SYNCING,        /* a sync began that covers it            */
	BWD_COMMIT_DURABLE,        /* already durable: it may go             */
};
/* The end of a loop turn: write what the turn appended and see to its
 * sync; may start a snapshot.  -errno when the journal cannot be written
 * or synced. */
int bwd_store_commit(struct bwd_store *s, enum bwd_commit *done);
struct bwd_journal *bwd_store_journal(struct bwd_store *s);

/* What replaying one file found. */
struct bwd_replay {
	uint64_t generation;       /* from its header                        */
	uint64_t records;          /* applied                                */
	uint64_t contradictions;   /* records that did not fit, skipped      */
	size_t stopped_at;         /* offset reading stopped at              */
	bool whole;                /* a snapshot with its trailer            */
};
/*
 * Apply the file in buf (named `name` in messages) to st: 0 when read to
 * its end (a snapshot: to its trailer), else BWD_REC_ETORN/ECORRUPT (what
 * came before it is applied; the reason is logged), or -ENOMEM.
 */
int bwd_store_replay(struct bwd_state *st, const uint8_t *buf, size_t len,
		     const char *name, enum bwd_file_kind kind,
		     struct bwd_replay *out);
/* Log what is pending, per named session, as the daemon stops: counts at
 * notice level, keys at debug level.  kept: whether a journal has them. */
void bwd_state_log_pending(const struct bwd_state *st, bool kept);

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
/* A sync of the journal began: what the connections in the list (head:
 * bwd_server_held) hold waits for that sync. */
void bwd_conn_cover(struct bwd_conn **head);
/* That sync is done: what it covered goes out; a connection leaves the
 * list once it holds nothing more. */
void bwd_conn_release(struct bwd_conn **head);
uid_t bwd_conn_uid(const struct bwd_conn *c);
struct bwd_session *bwd_conn_session(const struct bwd_conn *c);
void bwd_conn_set_session(struct bwd_conn *c, struct bwd_session *s);
size_t bwd_conn_output(const struct bwd_conn *c);
/* CLOCK_MONOTONIC as of the batch of requests being read: the time "the
 * daemon reads the request" (Schedule.delay_ns), one clock read a batch. */
uint64_t bwd_conn_now(struct bwd_conn *c);

struct bwd_server *bwd_conn_server(const struct bwd_conn *c);
/* The next connection in the server's list (head: bwd_server_conns). */
struct bwd_conn *bwd_conn_next(const struct bwd_conn *c);

/* ---- request.c ---------------------------------------------------------- */

/* Act on one request and queue its reply (or fail the connection). */
void bwd_request_handle(struct bwd_conn *c, const Bitwheel__V1__Envelope *env);
/* The same for a Schedule or Cancel read by bwp_frame_parse_request(). */
void bwd_request_handle_fast(struct bwd_conn *c, const struct bwp_request *r);

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
/* Add a libevent timer ns from now, never early by CLOCK_MONOTONIC. */
void bwd_server_timer_add(struct event *ev, uint64_t ns);
/* A connection was freed (conn.c unlinks it from the list itself). */
void bwd_server_conn_gone(struct bwd_server *srv);
/* The head of the list of connections, which conn.c keeps. */
struct bwd_conn **bwd_server_conns(struct bwd_server *srv);
/* The head of the list of connections holding output (conn.c keeps it). */
struct bwd_conn **bwd_server_held(struct bwd_server *srv);
/* NULL without --state-dir. */
struct bwd_journal *bwd_server_journal(struct bwd_server *srv);
bool bwd_server_stopping(const struct bwd_server *srv);
/* Bytes waiting in every connection's output buffer. */
uint64_t bwd_server_buffered(struct bwd_server *srv);
uint64_t bwd_server_started(const struct bwd_server *srv);
uint64_t bwd_server_clients(const struct bwd_server *srv);

#endif /* BWD_DAEMON_INTERNAL_H */
