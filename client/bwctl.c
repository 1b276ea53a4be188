/*
 * bwctl.c - the command line of bitwheeld: schedule, cancel, watch, stats,
 * metrics, who holds what (sessions, list), and how the daemon reads a
 * calendar event (calendar).
 *
 * Each command is one connection: connect (anonymous, or attached to the
 * named session given), one or two requests through libbitwheel-client's
 * blocking calls, print, exit.  bwctl talks to the daemon through nothing
 * but the public header, as any other client would; it builds in
 * proto/duration.c, so that it reads durations, words their refusals and
 * checks a schedule's bounds exactly as the daemon does.  Output goes to stdout, one line per fire
 * (flushed as it arrives, so a pipe sees it live), diagnostics to stderr.
 * With --json every output is JSON through one small writer (jw_*), and
 * every diagnostic too: a failure is one {"error":{...}} object on
 * stderr (complain()), a warning one {"warning":{...}}, the exit status
 * the same as without --json.
 *
 * Roles (PROTOCOL.md 7): schedule and cancel with --session attach as
 * producers, which never receive a fire, so any number of them may run
 * beside a watch without taking its fires.  watch is the session's
 * consumer: it acknowledges a fire only once its line has been written
 * and flushed to stdout, cumulatively, once per batch of lines flushed
 * together, so a watch killed at any moment loses nothing (what it had
 * not acknowledged is delivered again, marked redelivered).  When the
 * daemon restarts, the library attaches again by itself (watch
 * --no-reconnect turns that off, to exit 4 as before).  schedule and
 * cancel without --session, and stats, use an anonymous session, whose
 * connection is its own consumer with auto-ack.
 *
 * Session names are per uid: --session NAME is the caller's own uid's
 * session NAME, unless --owner names another uid's namespace, which only
 * root may do (the daemon answers anyone else PERMISSION_DENIED).
 *
 * sessions and list read the daemon's listings (PROTOCOL.md, ListSessions,
 * ListTimers) through an anonymous connection: root sees every uid's,
 * anyone else its own; the library pages, one round trip per page.
 * calendar asks Calendar once per spec on an anonymous connection and
 * lays the answer out as systemd-analyze calendar does (its labels, its
 * timestamps in the local zone and in UTC, systemd's words for "From
 * now"), or prints the UTC ns with --json.
 *
 * Cost: one connection and one or two round trips per command; watch and
 * waiting schedules then block in the library until a fire or the
 * deadline, using no CPU in between; watch adds one ack per batch.
 *
 * Who listens: the library talks only to a listener running as root, as
 * bwctl's own uid, or as the daemon's user (--daemon-user, else
 * $BITWHEEL_DAEMON_USER, else "bitwheeld"); anything else is refused
 * before a byte is sent, exit 5.
 *
 * Exit status (also in bwctl.1 and --help):
 *   0 ok, 1 not found or timed out, 2 usage, 3 daemon unreachable,
 *   4 any other error (the daemon refused a request, the connection broke),
 *   5 the socket's listener is not trusted to be bitwheeld.
 */
/* pipe2(), and glibc hides it without this. */
#define _GNU_SOURCE

#include "bitwheel-client.h"
#include "duration.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/pidfd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

enum status {
	ST_OK = 0,
	ST_NOTFOUND = 1,
	ST_USAGE = 2,
	ST_UNREACHABLE = 3,
	ST_ERROR = 4,
	ST_UNTRUSTED = 5,
	ST_HELP = -1,          /* internal: help printed, exit 0 */
};

/* --socket, wherever it was given; NULL until main() settles it. */
static const char *socket_path;
/* --owner, wherever it was given: the uid whose namespace --session is
 * in; -1 for the caller's own (not sent). */
static int64_t owner_uid = -1;
/* --daemon-user, wherever it was given; NULL: the library's default
 * ($BITWHEEL_DAEMON_USER, else "bitwheeld"). */
static const char *daemon_user;

/* ---- help ---------------------------------------------------------------- */

static const char help_main[] =
"Usage: bwctl [--socket PATH] [--daemon-user USER] [--owner UID] COMMAND\n"
"             [OPTIONS]\n"
"\n"
"Talk to bitwheeld, the host-wide timer service.\n"
"\n"
"Commands:\n"
"  schedule   arm a timer; without --session, wait for it to fire\n"
"  cancel     disarm a timer\n"
"  watch      print a named session's fires as they arrive, and\n"
"             acknowledge them once printed\n"
"  stats      print the daemon's counters\n"
"  metrics    print them for Prometheus (text exposition format)\n"
"  sessions   list the sessions you may see (root: everyone's)\n"
"  list       list a named session's pending timers\n"
"  policy     show or set a session's delivery limit and dead-letter\n"
"             session\n"
"  kick       move a session's dead letters back to it\n"
"  calendar   show the next elapses of a calendar event, as the daemon\n"
"             computes them (like systemd-analyze calendar)\n"
"\n"
"Options:\n"
"  --socket PATH  the daemon's socket (default: $" BWC_SOCKET_ENV ",\n"
"                 else " BWC_DEFAULT_SOCKET ")\n"
"  --daemon-user USER\n"
"                 the user (name or uid) bitwheeld runs as: besides root\n"
"                 and yourself, the only one trusted to listen on the\n"
"                 socket (default: $" BWC_DAEMON_USER_ENV ", else "
BWC_DEFAULT_DAEMON_USER ")\n"
"  --owner UID    root only: the uid (number or user name) whose session\n"
"                 --session names, for schedule, cancel, watch, list,\n"
"                 policy and kick\n"
"                 (session names are per uid; default: your own); for\n"
"                 sessions, whose to list\n"
"  --json         output as JSON (schedule, cancel, watch, stats,\n"
"                 sessions, list, policy, kick, calendar), and\n"
"                 any error as one JSON object on stderr:\n"
"                 {\"error\":{\"code\":...,\"exit\":N,\"message\":...}}\n"
"  -h, --help     show this help; 'bwctl COMMAND --help' for a command\n"
"  -V, --version  show the version\n"
"\n"
"Durations are a number and a unit: 250ms, 2s, 1.5s, 5m, 1h, 1h30m, 2d,\n"
"also us and ns.  A bare number is refused.\n"
"\n"
"Exit status: 0 ok, 1 not found or timed out, 2 usage error, 3 daemon\n"
"unreachable, 4 any other error, 5 the socket's listener is not trusted.\n";

static const char help_schedule[] =
"Usage: bwctl [--socket PATH] schedule --key K\n"
"             (--in DURATION | --at TIME | --at-monotonic NS |\n"
"              --calendar SPEC [--jitter DURATION] [--jitter-fixed]\n"
"              [--misfire-grace DURATION])\n"
"             [--every DURATION] [--leeway DURATION]\n"
"             [--clock monotonic|boottime]\n"
"             [--session NAME [--owner UID]]\n"
"             [--payload TEXT] [--replace] [--count N] [--json]\n"
"\n"
"Arm timer K.  With --session, attach to the named session as a producer\n"
"(which never receives fires, so any number may run while a watch is\n"
"attached), schedule, print the deadline and exit: the timer stays with the\n"
"session and its fire waits in the session's queue for a consumer such as\n"
"'bwctl watch --session NAME'.  Without --session the timer belongs to this\n"
"bwctl alone: it waits for the fire and prints it (with --every, for\n"
"--count fires), and the timer is gone when bwctl exits.\n"
"\n"
"  --key K              the timer's key, 0 to 2^64-1 (decimal, or hex with 0x)\n"
"  --in DURATION        fire this long from now\n"
"  --at TIME            fire when the wall clock reaches TIME, however it is\n"
"                       stepped meanwhile (a oneshot): '@UNIX_SECONDS[.F]',\n"
"                       ISO 8601 with an offset ('2026-12-24T18:00:00+01:00',\n"
"                       '...Z'), or local time 'YYYY-MM-DD HH:MM[:SS]' with\n"
"                       an optional IANA zone ('2026-12-24 18:00 Europe/Berlin')\n"
"  --at-monotonic NS    fire at this CLOCK_MONOTONIC time, in nanoseconds\n"
"  --calendar SPEC      fire at every elapse of a systemd.time(7) calendar\n"
"                       event ('Mon..Fri 09:00', '*:0/15', 'daily', 'Sat 10:00\n"
"                       Europe/Berlin'), in the zone named last or the\n"
"                       daemon's local zone; recurring, not with --every\n"
"  --jitter DURATION    calendar: a random delay up to DURATION added to each\n"
"                       elapse, drawn afresh for each\n"
"  --jitter-fixed       calendar: the delay is the same for every elapse (per\n"
"                       host, session and key)\n"
"  --misfire-grace DURATION\n"
"                       calendar: an elapse missed while the daemon was down\n"
"                       fires at its start only if missed by at most DURATION\n"
"                       (default: always, once, marked late)\n"
"  --every DURATION     periodic: fire again every DURATION (> 0)\n"
"  --leeway DURATION    how late each fire may come, which picks the lane\n"
"                       (default: 0 oneshot, the period / 64 periodic)\n"
"  --clock CLOCK        what --in, --at-monotonic and --every count on:\n"
"                       monotonic (the default) stops while the host is\n"
"                       suspended, boottime counts the suspend (a timer due\n"
"                       during it fires at the resume); not with --at or\n"
"                       --calendar\n"
"  --session NAME       the named session (1 to 64 of A-Z a-z 0-9 _ . : @ -),\n"
"                       your uid's unless --owner says whose\n"
"  --owner UID          root only: the session NAME of this uid (a number or\n"
"                       a user name)\n"
"  --payload TEXT       bytes handed back with every fire\n"
"  --replace            replace a pending timer with the same key\n"
"  --count N            without --session: fires to wait for (default 1;\n"
"                       more than 1 needs --every or --calendar)\n"
"  --json               JSON: {\"key\":K,\"session\":NAME,\"deadline_ns\":NS,\n"
"                       \"replaced\":false} (and \"period_ns\" or\n"
"                       \"calendar\"), or fires as\n"
"                       'bwctl watch --json' prints them\n"
"\n"
"Prints 'scheduled key=K deadline=NS' (--session) or one line per fire, as\n"
"'bwctl watch' does.  Exit status: 0 ok, 2 usage, 3 unreachable, 4 the\n"
"daemon refused (e.g. DUPLICATE_KEY without --replace) or other error,\n"
"5 the socket's listener is not trusted (see --daemon-user).\n";

static const char help_cancel[] =
"Usage: bwctl [--socket PATH] cancel --key K [--session NAME [--owner UID]]\n"
"             [--json]\n"
"\n"
"Disarm timer K of the named session, attached as a producer (without\n"
"--session, of a new anonymous session, where nothing is ever pending).\n"
"\n"
"  --key K              the timer's key (decimal, or hex with 0x)\n"
"  --session NAME       the named session that holds the timer (your uid's)\n"
"  --owner UID          root only: the session NAME of this uid (a number or\n"
"                       a user name)\n"
"  --json               {\"key\":K,\"session\":NAME,\"cancelled\":true} on\n"
"                       stdout (false, exit 1, when not pending)\n"
"\n"
"Exit status: 0 the timer was pending and is gone, 1 no pending timer had\n"
"this key (never scheduled, already fired, or cancelled), 2 usage,\n"
"3 unreachable, 4 other error, 5 the socket's listener is not trusted.\n";

static const char help_watch[] =
"Usage: bwctl [--socket PATH] watch (--session NAME | NAME) [--owner UID]\n"
"             [--count N] [--window N] [--ack-timeout DURATION] [--coalesce]\n"
"             [--no-reconnect] [--timeout DURATION] [--json]\n"
"             [--exec CMD [--backoff-base DURATION] [--backoff-cap DURATION]]\n"
"\n"
"Attach to the named session as a consumer and print each fire as one\n"
"line: first those waiting in the session's queue, then new ones.  Each\n"
"line is written and flushed to stdout before its fire is acknowledged, so\n"
"'bwctl watch | handler' loses nothing when bwctl is killed: fires not yet\n"
"acknowledged are delivered again, marked redelivered.  Several watches\n"
"(consumers) of one session share its fires, each fire going to one.\n"
"When the daemon restarts, watch attaches again by itself and goes on (its\n"
"fires not yet acknowledged come again, marked redelivered); it gives up\n"
"(exit 4) if the daemon is not back within 60 s.\n"
"\n"
"  --session NAME       the named session to attach to (your uid's)\n"
"  --owner UID          root only: the session NAME of this uid (a number or\n"
"                       a user name), e.g. to drain a stuck user's queue\n"
"  --count N            exit after exactly N fires (the window is at most\n"
"                       N; fires received past N go back to the session's\n"
"                       queue, marked redelivered)\n"
"  --window N           the most fires in flight unacknowledged at once\n"
"                       (default: the daemon's, 256)\n"
"  --ack-timeout DURATION\n"
"                       have the daemon take back and redeliver a fire\n"
"                       unacknowledged this long (default: never)\n"
"  --coalesce           let the daemon hold fires within their leeways and\n"
"                       send those whose windows overlap together (while\n"
"                       every consumer of the session asks for it)\n"
"  --no-reconnect       exit (4) when the daemon ends the connection, e.g.\n"
"                       as it restarts, instead of attaching again\n"
"  --timeout DURATION   give up after DURATION in all\n"
"  --exec CMD           a worker instead of lines: run CMD with /bin/sh -c\n"
"                       once per fire, one at a time (the window is 1 unless\n"
"                       --window says otherwise), the payload on its stdin and\n"
"                       the fire in its environment: BW_SESSION, BW_KEY,\n"
"                       BW_DELIVERIES, BW_DEADLINE_NS, BW_FIRED_NS,\n"
"                       BW_FIRE_COUNT, BW_REDELIVERED, BW_RESTORED,\n"
"                       BW_HAS_PAYLOAD (0 or 1), and for a dead letter\n"
"                       BW_DEAD_LETTER_OF, BW_DEAD_LETTER_DELIVERIES,\n"
"                       BW_DEAD_LETTER_REASON.  Exit 0 acknowledges the fire;\n"
"                       anything else releases it with exponential backoff\n"
"                       (or, at the session's delivery limit, dead-letters\n"
"                       it), said on stderr.  With an ack timeout, a command\n"
"                       running past half of it has its fire touched\n"
"                       (extended), every half ack timeout, up to the\n"
"                       daemon's hold limit (12 h)\n"
"  --backoff-base DURATION\n"
"                       --exec: the first release's delay (default 1s),\n"
"                       doubling with each delivery ...\n"
"  --backoff-cap DURATION\n"
"                       ... up to this (default 5m); each delay is cut by a\n"
"                       random part of up to half\n"
"  --json               JSON lines: key, payload, deadline_ns, fired_ns,\n"
"                       late_us, deliveries, and fire_count/restored/\n"
"                       redelivered/due_unix_ns/dead_letter when set\n"
"\n"
"Human lines read: fired key=7 payload=\"hi\" deadline=NS late=0.84ms\n"
"deliveries=1, with ' redelivered' before deliveries= for a fire that may\n"
"have been printed before, due=\"TIME\" after it for a wall-clock or\n"
"calendar timer's fire (the local time it was due at), and a dead\n"
"letter's history after that:\n"
"dead_letter_of=NAME dead_deliveries=N first_handed=NS last_handed=NS\n"
"dead_lettered=NS reason=ACK_TIMEOUT.\n"
"\n"
"Exit status: 0 after --count fires (or, with --timeout only, if any fire\n"
"came), 1 timed out (before --count fires, or with none), 2 usage,\n"
"3 unreachable, 4 other error (e.g. stdout could not be written, the\n"
"daemon went away), 5 the socket's listener is not trusted.\n";

static const char help_stats[] =
"Usage: bwctl [--socket PATH] stats [--json]\n"
"\n"
"Print the daemon's counters (the whole daemon's for root, your uid's\n"
"for anyone else): per lane (oneshot, periodic) the timers pending, in\n"
"overflow, inserted, cancelled, fired and lost, its tick and the most a\n"
"fire in it comes late; and clients, consumers,\n"
"named sessions, fires queued, in flight, acknowledged, redelivered and\n"
"dropped, expired sessions, uptime and memory; and your uid's\n"
"connections, named sessions, timers and periodic fire rate, each against\n"
"its per-uid budget (bitwheeld(8)).\n"
"\n"
"  --json               one JSON object instead of the table\n"
"\n"
"Exit status: 0 ok, 2 usage, 3 unreachable, 4 other error, 5 the socket's\n"
"listener is not trusted.\n";

static const char help_metrics[] =
"Usage: bwctl [--socket PATH] metrics [--output FILE]\n"
"\n"
"Print everything stats gives, the daemon's limits (bitwheel_limit*{name}),\n"
"and for root the daemon-wide counters (fire lateness, queue wait and ack\n"
"latency histograms, requests by type, errors by code, connections\n"
"accepted, refused and ended by reason, fires delivered, journal syncs\n"
"and their histogram, snapshots' count, time and age) and the daemon's\n"
"process_* figures, in the Prometheus text exposition format, names\n"
"prefixed bitwheel_ (but process_*), ending with \"# EOF\":\n"
"for node_exporter's textfile collector (bwctl(1), EXAMPLES).  No --json:\n"
"'bwctl stats --json' has the figures.\n"
"\n"
"  --output FILE        write FILE instead, atomically: a temporary file\n"
"                       beside it (FILE.tmp.XXXXXX), mode 0644, renamed\n"
"                       over it; on failure FILE is left as it was.  Its\n"
"                       directory must be root's or yours, writable by no\n"
"                       one else (unless sticky), and not a symbolic link\n"
"\n"
"Exit status: 0 ok, 2 usage, 3 unreachable, 4 other error, 5 the socket's\n"
"listener is not trusted.\n";

static const char help_sessions[] =
"Usage: bwctl [--socket PATH] sessions [--owner UID] [--json]\n"
"\n"
"List the sessions you may see: root every uid's, anyone else only their\n"
"own uid's (named ones, and the anonymous sessions of their connections).\n"
"One row per session, sorted by uid and name: its uid, name (anonymous:\n"
"'-' and its client's pid), pending timers, fires queued and in flight,\n"
"released fires waiting out their delay, dead letters it holds, consumers\n"
"and producers attached, for a session with no connection how long it has\n"
"been idle and how long until it expires, and a named session's delivery\n"
"policy: its limit and dead-letter session (bwctl policy).\n"
"\n"
"  --owner UID          only this uid's sessions (a number or a user name;\n"
"                       another uid's is for root alone)\n"
"  --json               one JSON object per session and line: uid, session\n"
"                       (or anonymous and pid), timers, queued, in_flight,\n"
"                       consumers, producers, dropped, idle_ns,\n"
"                       expires_in_ns when it has no connection, delayed,\n"
"                       dead_letters, dead_lettered (fires it sent to its\n"
"                       dead-letter session), and for a named session\n"
"                       max_deliveries (0: unlimited), dead_letter,\n"
"                       policy_set\n"
"\n"
"Exit status: 0 ok, 2 usage, 3 unreachable, 4 other error (e.g.\n"
"PERMISSION_DENIED: another uid's, not being root), 5 the socket's\n"
"listener is not trusted.\n";

static const char help_policy[] =
"Usage: bwctl [--socket PATH] policy (--session NAME | NAME) [--owner UID]\n"
"             [--max-deliveries N|unlimited] [--dead-letter NAME] [--json]\n"
"\n"
"Without options, show the named session's delivery policy; with them,\n"
"set it (attached as a producer) and show the result.  A fire taken back\n"
"(its consumer went away or its ack timeout passed) or released after its\n"
"max-deliveries-th hand-out goes to the dead-letter session, an ordinary\n"
"session ('bwctl watch NAME.dead'), instead of back to the queue; 'bwctl\n"
"kick' brings such fires back.  Defaults: the daemon's --max-deliveries\n"
"(20) and NAME.dead.\n"
"\n"
"  --session NAME       the named session (or NAME as the argument)\n"
"  --owner UID          root only: the session NAME of this uid\n"
"  --max-deliveries N   hand-outs without an ack before a fire is\n"
"                       dead-lettered, 1 to 4294967295, or 'unlimited'\n"
"  --dead-letter NAME   the dead-letter session, in the same namespace;\n"
"                       '' for the default, the session's name + .dead\n"
"  --json               {\"session\":NAME,\"max_deliveries\":N (0:\n"
"                       unlimited),\"dead_letter\":NAME,\"policy_set\":false}\n"
"\n"
"Prints 'policy session=NAME max_deliveries=N dead_letter=NAME set=yes'.\n"
"Exit status: 0 ok, 1 no such session (showing), 2 usage, 3 unreachable,\n"
"4 other error (e.g. BAD_REQUEST: the dead-letter name is the session's\n"
"own), 5 the socket's listener is not trusted.\n";

static const char help_kick[] =
"Usage: bwctl [--socket PATH] kick (--session NAME | NAME) [--owner UID]\n"
"             [--key K] [--limit N] [--json]\n"
"\n"
"Move the fires the named session dead-lettered back from its dead-letter\n"
"session to its queue, their deliveries counted from 0 again (attached as\n"
"a producer).  The daemon moves at most 10,000 per request; kick asks\n"
"again until all are moved, or --limit.  Dead letters in flight to a\n"
"consumer of the dead-letter session stay with it.\n"
"\n"
"  --session NAME       the session the fires failed in (or NAME as the\n"
"                       argument)\n"
"  --owner UID          root only: the session NAME of this uid\n"
"  --key K              only fires of this key\n"
"  --limit N            move at most N\n"
"  --json               {\"session\":NAME,\"kicked\":N,\"more\":false} (and\n"
"                       \"key\")\n"
"\n"
"Prints 'kicked N'.  Exit status: 0 ok (none to move included), 2 usage,\n"
"3 unreachable, 4 other error, 5 the socket's listener is not trusted.\n";

static const char help_list[] =
"Usage: bwctl [--socket PATH] list --session NAME [--owner UID] [--limit N]\n"
"             [--json]\n"
"\n"
"List the pending timers of the named session (your uid's, or with\n"
"--owner, root only, another uid's), soonest first: key, deadline as\n"
"local wall-clock time (a calendar timer's next elapse, its jitter\n"
"added), time left, period ('calendar' for a calendar timer), payload\n"
"size and lane, then a calendar timer's spec, normalized, and its jitter\n"
"and misfire grace.  The\n"
"daemon sends at most 1,000 per reply, in no particular order; bwctl\n"
"reads them all, shows the soonest --limit, and says on stderr when the\n"
"session holds more.\n"
"\n"
"  --session NAME       the named session (1 to 64 of A-Z a-z 0-9 _ . : @ -)\n"
"  --owner UID          root only: the session NAME of this uid\n"
"  --limit N            list the soonest N timers (default 100)\n"
"  --json               one JSON object per timer and line: key,\n"
"                       deadline_ns (CLOCK_MONOTONIC), deadline_unix_ns\n"
"                       (wall clock), remaining_ns, period_ns, payload_bytes,\n"
"                       has_payload, lane, clock (monotonic, boottime or\n"
"                       realtime), and fire_count/late when set;\n"
"                       a calendar timer's calendar, jitter_ns,\n"
"                       jitter_fixed and misfire_grace_ns\n"
"\n"
"Exit status: 0 ok, 1 no such session (UNKNOWN_SESSION), 2 usage,\n"
"3 unreachable, 4 other error (e.g. PERMISSION_DENIED), 5 the socket's\n"
"listener is not trusted.\n";

static const char help_calendar[] =
"Usage: bwctl [--socket PATH] calendar SPEC... [--iterations N]\n"
"             [--base-time TIME] [--json]\n"
"\n"
"Show how the daemon reads each systemd.time(7) calendar event SPEC\n"
"('Mon..Fri 09:00 Europe/Berlin', '*:0/15', 'daily', '*-02~01'): its\n"
"normalized form and its next elapses, as 'systemd-analyze calendar'\n"
"prints them.  A SPEC without a time zone is in the daemon's local zone;\n"
"the times are shown in yours (and in UTC when yours is not UTC).\n"
"\n"
"  --iterations N       the elapses to show, 1 to 1000 (default 1); fewer\n"
"                       when the spec has no more\n"
"  --base-time TIME     the elapses after TIME rather than now: as\n"
"                       'schedule --at' takes it ('@UNIX_SECONDS[.F]',\n"
"                       ISO 8601 with an offset, or 'YYYY-MM-DD HH:MM[:SS]'\n"
"                       with an optional IANA zone)\n"
"  --json               one JSON object per SPEC and line: {\"spec\":SPEC,\n"
"                       \"normalized\":FORM,\"zone\":ZONE,\"base_realtime_ns\":NS,\n"
"                       \"elapses_realtime_ns\":[NS,...]} (UTC ns; zone \"\"\n"
"                       when the spec names none)\n"
"\n"
"Exit status: 0 ok, 2 usage, 3 unreachable, 4 the daemon refused a SPEC\n"
"(BAD_CALENDAR, with its reason) or gave up searching for its next\n"
"elapse, or other error, 5 the socket's listener is not trusted.\n";

/* ---- JSON ------------------------------------------------------------- */

/*
 * The one JSON writer every --json output goes through, errors on stderr
 * included: an object on one line, its members added in order, commas
 * placed by the writer.  Keys are the callers' literals and need no
 * escaping; values are unsigned numbers, booleans, byte strings (below)
 * and nested objects.  No allocation: it writes as it goes.
 */
struct jw {
	FILE *out;
	bool comma;     /* a member precedes at this level: the next needs ',' */
};

/*
 * A quoted string: printable ASCII as is, the usual backslash escapes, and
 * any other byte b through other_fmt - "\u%04x" for JSON, which maps b to
 * code point U+00bb so any payload, UTF-8 or not, comes back exactly
 * (Python: s.encode("latin-1")); "\x%02x" for people.
 */
static void quoted_bytes(FILE *out, const void *data, size_t len,
			 const char *other_fmt)
{
	const unsigned char *p = data;
	size_t i;

	putc('"', out);
	for (i = 0; i < len; i++) {
		unsigned char b = p[i];

		switch (b) {
		case '"': fputs("\\\"", out); break;
		case '\\': fputs("\\\\", out); break;
		case '\n': fputs("\\n", out); break;
		case '\r': fputs("\\r", out); break;
		case '\t': fputs("\\t", out); break;
		default:
			if (b >= 0x20 && b < 0x7f)
				putc(b, out);
			else
				fprintf(out, other_fmt, b);
		}
	}
	putc('"', out);
}

static void jw_open(struct jw *j, FILE *out)
{
	j->out = out;
	j->comma = false;
	putc('{', out);
}

static void jw_key(struct jw *j, const char *key)
{
	if (j->comma)
		putc(',', j->out);
	j->comma = true;
	fprintf(j->out, "\"%s\":", key);
}

static void jw_u64(struct jw *j, const char *key, uint64_t v)
{
	jw_key(j, key);
	fprintf(j->out, "%llu", (unsigned long long)v);
}

/* v thousandths, as a decimal with three places: late_us to the ns. */
static void jw_milli(struct jw *j, const char *key, uint64_t v)
{
	jw_key(j, key);
	fprintf(j->out, "%llu.%03llu", (unsigned long long)(v / 1000),
		(unsigned long long)(v % 1000));
}

static void jw_bool(struct jw *j, const char *key, bool v)
{
	jw_key(j, key);
	fputs(v ? "true" : "false", j->out);
}

/* Bytes as a string (byte b is U+00bb); data NULL is null. */
static void jw_bytes(struct jw *j, const char *key, const void *data,
		     size_t len)
{
	jw_key(j, key);
	if (data == NULL)
		fputs("null", j->out);
	else
		quoted_bytes(j->out, data, len, "\\u%04x");
}

static void jw_str(struct jw *j, const char *key, const char *s)
{
	jw_bytes(j, key, s, s != NULL ? strlen(s) : 0);
}

/* Unsigned numbers as an array. */
static void jw_u64s(struct jw *j, const char *key, const uint64_t *v, size_t n)
{
	jw_key(j, key);
	putc('[', j->out);
	for (size_t i = 0; i < n; i++)
		fprintf(j->out, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
	putc(']', j->out);
}

/* A nested object as the value of key, until jw_end(). */
static void jw_begin(struct jw *j, const char *key)
{
	jw_key(j, key);
	putc('{', j->out);
	j->comma = false;
}

static void jw_end(struct jw *j)
{
	putc('}', j->out);
	j->comma = true;
}

/* The outermost object's end, and its line's. */
static void jw_close(struct jw *j)
{
	fputs("}\n", j->out);
}

/* ---- diagnostics ---------------------------------------------------------- */

/* --json anywhere: diagnostics too are JSON (main() looks before any
 * parsing, so that a usage error before --json is JSON as well). */
static bool json_mode;

/*
 * Why bwctl exits non-zero, written once here for people or for programs:
 * "bwctl: message" and a hint line, or with --json one object on stderr,
 *   {"error":{"code":"DUPLICATE_KEY","exit":4,"server_code":11,
 *             "message":"...","hint":"..."}}
 * code is the daemon's error code name when it refused (server_code its
 * number, else absent), else one of bwctl's (bwctl(1), DIAGNOSTICS).
 */
struct problem {
	int status;            /* the exit status                           */
	const char *code;
	int server_code;       /* the daemon's ErrorCode; 0: not from it    */
	const char *hint;      /* a second sentence for people, or NULL     */
};

__attribute__((format(printf, 2, 3)))
static int complain(const struct problem *p, const char *fmt, ...)
{
	char msg[1024];
	struct jw j;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!json_mode) {
		fprintf(stderr, "bwctl: %s\n", msg);
		/* A usage hint is coreutils' "Try ..." line, unprefixed. */
		if (p->hint != NULL)
			fprintf(stderr, "%s%s\n",
				p->status == ST_USAGE ? "" : "bwctl: ", p->hint);
		return p->status;
	}
	jw_open(&j, stderr);
	jw_begin(&j, "error");
	jw_str(&j, "code", p->code);
	jw_u64(&j, "exit", (uint64_t)p->status);
	if (p->server_code != 0)
		jw_u64(&j, "server_code", (uint64_t)p->server_code);
	jw_str(&j, "message", msg);
	if (p->hint != NULL)
		jw_str(&j, "hint", p->hint);
	jw_end(&j);
	jw_close(&j);
	return p->status;
}

/* Something to know that is no failure: "bwctl: ..." or, with --json,
 * {"warning":{"code":...,"message":...}} on stderr. */
__attribute__((format(printf, 2, 3)))
static void warn(const char *code, const char *fmt, ...)
{
	char msg[1024];
	struct jw j;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!json_mode) {
		fprintf(stderr, "bwctl: %s\n", msg);
		return;
	}
	jw_open(&j, stderr);
	jw_begin(&j, "warning");
	jw_str(&j, "code", code);
	jw_str(&j, "message", msg);
	jw_end(&j);
	jw_close(&j);
}

__attribute__((format(printf, 2, 3)))
static int usage_error(const char *cmd, const char *fmt, ...)
{
	char msg[1024], hint[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(hint, sizeof(hint), "Try 'bwctl %s%s--help'.",
		 cmd != NULL ? cmd : "", cmd != NULL ? " " : "");
	return complain(&(struct problem){ .status = ST_USAGE, .code = "USAGE",
					   .hint = hint }, "%s", msg);
}

/*
 * Why connecting failed, for people: a socket we may not use (connect(2)
 * needs write permission on it and search permission on its directories,
 * which the system service grants to its group) is not a daemon that is
 * down.  The library's message has errno's text; this asks the file
 * system the same question with our effective ids.  The hint into buf;
 * *code NOT_PERMITTED for the first case, else left as it is.
 */
static const char *unreachable_hint(char *buf, size_t len, const char **code)
{
	struct stat st;
	struct group *gr;
	struct passwd *pw;
	const char *group;

	if (faccessat(AT_FDCWD, socket_path, W_OK, AT_EACCESS) != 0 &&
	    errno == EACCES) {
		gr = stat(socket_path, &st) == 0 ? getgrgid(st.st_gid) : NULL;
		pw = getpwuid(geteuid());
		group = gr ? gr->gr_name : "bitwheel";
		snprintf(buf, len,
			 "you (uid %u) lack permission on %s: connecting "
			 "needs write permission on the socket, usually "
			 "membership of its group (%s%s).  An administrator "
			 "adds you with 'usermod -aG %s %s'; then log in "
			 "again.", (unsigned)geteuid(), socket_path,
			 gr ? "here: " : "for the system service: ", group,
			 group, pw ? pw->pw_name : "YOUR_USER");
		*code = "NOT_PERMITTED";
		return buf;
	}
	/* The packaged socket is systemd's (bitwheeld.socket listens there
	 * and starts the service on the first connection): the daemon is
	 * down because the socket unit is, and only root may start it. */
	if (strcmp(socket_path, BWC_DEFAULT_SOCKET) == 0) {
		snprintf(buf, len,
			 "is the bitwheel service down?  %s 'systemctl start "
			 "bitwheeld.socket' starts it (and 'systemctl enable "
			 "bitwheeld.socket' at every boot); or point --socket "
			 "or $%s at another daemon's socket.",
			 geteuid() == 0 ? "As root," : "An administrator's",
			 BWC_SOCKET_ENV);
		return buf;
	}
	snprintf(buf, len,
		 "is bitwheeld running?  Start it (e.g. 'bitwheeld --socket "
		 "%s'), or point --socket or $%s at its socket.", socket_path,
		 BWC_SOCKET_ENV);
	return buf;
}

/* The code of a library failure other than the daemon's refusal. */
static const char *client_code(int rc)
{
	switch (rc) {
	case BWC_EINVAL: return "USAGE";    /* an argument given: exit 2 */
	case BWC_ENOMEM: return "OUT_OF_MEMORY";
	case BWC_EUNREACHABLE: return "UNREACHABLE";
	case BWC_ECLOSED: return "CLOSED";
	case BWC_ETIMEDOUT: return "TIMED_OUT";
	case BWC_EPROTO: return "PROTOCOL_ERROR";
	case BWC_ETOOBIG: return "TOO_BIG";
	case BWC_EIO: return "SYSTEM_ERROR";
	case BWC_EPEER: return "UNTRUSTED_LISTENER";
	case BWC_EUNKNOWN: return "UNKNOWN_OUTCOME";
	case BWC_EANONYMOUS: return "SESSION_LOST";
	case BWC_EGAVEUP: return "RECONNECT_GAVE_UP";
	default: return "CLIENT_ERROR";
	}
}

/* A library failure: the message, a hint where one helps, the status. */
static int report(struct bwc_client *c, int rc)
{
	struct problem p = { .status = ST_ERROR, .code = client_code(rc) };
	char hint[512];

	switch (rc) {
	case BWC_EUNREACHABLE:
		p.status = ST_UNREACHABLE;
		p.hint = unreachable_hint(hint, sizeof(hint), &p.code);
		break;
	case BWC_EPEER:
		p.status = ST_UNTRUSTED;
		p.hint = "not talking to it: a process posing as bitwheeld "
			 "would see and could forge your timers.  If it is the "
			 "bitwheeld you mean, trust its user with --daemon-user "
			 "USER or $" BWC_DAEMON_USER_ENV ".";
		break;
	case BWC_EINVAL:
		p.status = ST_USAGE;
		break;
	case BWC_ESERVER:
		p.server_code = bwc_server_error(c);
		p.code = bwc_server_error_name(p.server_code);
		if (p.server_code == BWC_SERVER_PERMISSION_DENIED &&
		    owner_uid >= 0)
			p.hint = "only root may use --owner to name another "
				 "uid's session; without --owner, --session is "
				 "your own uid's";
		if (p.server_code == BWC_SERVER_UNKNOWN_SESSION)
			p.status = ST_NOTFOUND;
		if (p.server_code == BWC_SERVER_PERMISSION_DENIED &&
		    owner_uid < 0)
			p.hint = "the daemon shows a user only their own uid's "
				 "sessions; root sees everyone's";
		if (p.server_code == BWC_SERVER_STORAGE_UNAVAILABLE)
			p.hint = "bitwheeld cannot write its state directory "
				 "(full or failing): named sessions take no "
				 "changes until it can; anonymous ones still "
				 "work.  Free space there, then retry";
		break;
	default:
		break;
	}
	return complain(&p, "%s", bwc_errmsg(c));
}

/* stdout could not be written: EPIPE from a reader gone, a full disk. */
static int output_error(const char *hint)
{
	return complain(&(struct problem){ .status = ST_ERROR,
					   .code = "OUTPUT_ERROR",
					   .hint = hint },
			"writing output: %s", strerror(errno));
}

/* ---- argument parsing ------------------------------------------------- */

/* Decimal, or hex with 0x: no sign, no spaces, nothing after. */
static bool parse_u64(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	int base = 10;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!((*s >= '0' && *s <= '9') ||
	      (base == 16 && ((*s >= 'a' && *s <= 'f') ||
			      (*s >= 'A' && *s <= 'F')))))
		return false;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

/* A duration option, by the parser and in the words the daemon uses. */
static int parse_duration(const char *cmd, const char *flag, const char *text,
			  uint64_t *out_ns)
{
	int err = bwp_parse_duration(text, out_ns);

	if (err != 0)
		return usage_error(cmd, "--%s: '%s' %s", flag, text,
				   bwp_duration_problem(err));
	return ST_OK;
}

/* --owner: a uid, 0 to 2^32-1 (as parse_u64 reads numbers), or a user
 * name, looked up.  Sets owner_uid; ST_USAGE with a message if neither. */
static int parse_owner(const char *cmd, const char *text)
{
	struct passwd *pw;
	uint64_t v;

	if (parse_u64(text, &v)) {
		if (v > UINT32_MAX)
			return usage_error(cmd, "bad --owner '%s': a uid is 0 "
					   "to %u", text, UINT32_MAX);
		owner_uid = (int64_t)v;
		return ST_OK;
	}
	pw = *text != '\0' ? getpwnam(text) : NULL;
	if (pw == NULL)
		return usage_error(cmd, "bad --owner '%s': neither a uid nor a "
				   "known user name", text);
	owner_uid = (int64_t)pw->pw_uid;
	return ST_OK;
}

/* --owner without --session: there is no name to look up in its
 * namespace (anonymous sessions have none). */
static int owner_needs_session(const char *cmd, const char *session)
{
	if (owner_uid >= 0 && session == NULL)
		return usage_error(cmd, "--owner needs --session: it says whose "
				   "namespace the session name is in");
	return ST_OK;
}

/* getopt_long's complaints, worded once for every command. */
static int bad_option(const char *cmd, char **argv, int c)
{
	const char *opt = argv[optind - 1];
	bool is_long = strncmp(opt, "--", 2) == 0;

	if (c == ':')
		return usage_error(cmd, "option '%s' needs an argument", opt);
	/* glibc sets optopt for a known long option given an argument it
	 * does not take, and leaves it 0 for an unknown or ambiguous one. */
	if (is_long && optopt != 0)
		return usage_error(cmd, "option '%s' takes no argument", opt);
	if (is_long)
		return usage_error(cmd, "unknown or ambiguous option '%s'",
				   opt);
	return usage_error(cmd, "unknown option '-%c'", optopt);
}

/*
 * The options every command shares (--json, --owner, --socket,
 * --daemon-user, --help), for the cases a command's own switch leaves:
 * ST_OK when o was one of them, ST_HELP after printing help, else the
 * usage error.  A command's option table lists those it takes.
 */
static int common_option(const char *cmd, const char *help, char **argv,
			 int o)
{
	switch (o) {
	case 'j':
		json_mode = true;
		return ST_OK;
	case 'O':
		return parse_owner(cmd, optarg);
	case 'S':
		socket_path = optarg;
		return ST_OK;
	case 'D':
		daemon_user = optarg;
		return ST_OK;
	case 'h':
		fputs(help, stdout);
		return ST_HELP;
	default:
		return bad_option(cmd, argv, o);
	}
}

static int leftover(const char *cmd, int argc, char **argv)
{
	if (optind < argc)
		return usage_error(cmd, "unexpected argument '%s'",
				   argv[optind]);
	return ST_OK;
}

/* The session of watch, policy and kick: --session NAME, or NAME as the
 * one argument left (not both). */
static int session_arg(const char *cmd, int argc, char **argv,
		       const char **session)
{
	if (optind < argc && *session == NULL)
		*session = argv[optind++];
	else if (optind < argc)
		return usage_error(cmd, "unexpected argument '%s' (the session "
				   "is given by --session already)",
				   argv[optind]);
	return leftover(cmd, argc, argv);
}

/* ---- output ----------------------------------------------------------- */

/* One fire's line, into stdout's buffer: the caller flushes (and checks)
 * before it acknowledges anything. */
/* A deadline as local wall-clock time: "2026-12-01 07:30:01.250 UTC". */
static const char *fmt_wall(uint64_t unix_ns, char *buf, size_t len)
{
	time_t t = (time_t)(unix_ns / 1000000000u);
	char sec[40];
	struct tm tm;

	if (localtime_r(&t, &tm) == NULL ||
	    strftime(sec, sizeof(sec), "%Y-%m-%d %H:%M:%S", &tm) == 0) {
		snprintf(buf, len, "%llu", (unsigned long long)unix_ns);
		return buf;
	}
	snprintf(buf, len, "%s.%03u", sec, (unsigned)(unix_ns / 1000000u % 1000u));
	if (strftime(sec, sizeof(sec), " %Z", &tm) > 0)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s", sec);
	return buf;
}

static void print_fire(const struct bwc_fire *f)
{
	/* fired_ns >= deadline_ns by the protocol; don't trust it blindly. */
	uint64_t late = f->fired_ns > f->deadline_ns ?
				f->fired_ns - f->deadline_ns : 0;

	if (json_mode) {
		struct jw j;

		jw_open(&j, stdout);
		jw_u64(&j, "key", f->key);
		jw_bytes(&j, "payload", f->payload, f->payload_len);
		jw_u64(&j, "deadline_ns", f->deadline_ns);
		jw_u64(&j, "fired_ns", f->fired_ns);
		jw_milli(&j, "late_us", late);
		if (f->fire_count > 0)
			jw_u64(&j, "fire_count", f->fire_count);
		if (f->late)
			jw_bool(&j, "restored", true);
		if (f->redelivered)
			jw_bool(&j, "redelivered", true);
		if (f->deliveries > 0)
			jw_u64(&j, "deliveries", f->deliveries);
		if (f->due_realtime_ns > 0)
			jw_u64(&j, "due_unix_ns", f->due_realtime_ns);
		if (f->dead_letter.present) {
			const struct bwc_dead_letter *d = &f->dead_letter;

			jw_begin(&j, "dead_letter");
			jw_str(&j, "session", d->session);
			jw_u64(&j, "deliveries", d->deliveries);
			jw_u64(&j, "first_handed_ns", d->first_handed_ns);
			jw_u64(&j, "last_handed_ns", d->last_handed_ns);
			jw_u64(&j, "dead_lettered_ns", d->dead_lettered_ns);
			jw_str(&j, "reason", bwc_take_back_name(d->reason));
			jw_end(&j);
		}
		jw_close(&j);
	} else {
		printf("fired key=%llu", (unsigned long long)f->key);
		if (f->payload != NULL) {
			fputs(" payload=", stdout);
			quoted_bytes(stdout, f->payload, f->payload_len,
				     "\\x%02x");
		}
		printf(" deadline=%llu late=%.2fms",
		       (unsigned long long)f->deadline_ns, (double)late / 1e6);
		if (f->fire_count > 0)
			printf(" count=%llu", (unsigned long long)f->fire_count);
		if (f->late)
			fputs(" restored", stdout);
		if (f->redelivered)
			fputs(" redelivered", stdout);
		if (f->deliveries > 0)
			printf(" deliveries=%llu",
			       (unsigned long long)f->deliveries);
		/* A wall-clock or calendar timer's: the time it was due at. */
		if (f->due_realtime_ns > 0) {
			char when[64];

			printf(" due=\"%s\"", fmt_wall(f->due_realtime_ns, when,
							sizeof(when)));
		}
		/* A dead letter: where it failed, how often, and how long
		 * ago (all CLOCK_MONOTONIC, as deadline=). */
		if (f->dead_letter.present) {
			const struct bwc_dead_letter *d = &f->dead_letter;

			/* "-": a daemon that did not name it. */
			printf(" dead_letter_of=%s dead_deliveries=%llu "
			       "first_handed=%llu last_handed=%llu "
			       "dead_lettered=%llu reason=%s",
			       *d->session ? d->session : "-",
			       (unsigned long long)d->deliveries,
			       (unsigned long long)d->first_handed_ns,
			       (unsigned long long)d->last_handed_ns,
			       (unsigned long long)d->dead_lettered_ns,
			       bwc_take_back_name(d->reason));
		}
		putchar('\n');
	}
}

/* Push what stdout holds to its file: false (errno set) when it did not
 * all get there, EPIPE from a reader that went away among others. */
static bool flush_out(void)
{
	errno = 0;
	if (fflush(stdout) != 0 || ferror(stdout)) {
		if (errno == 0)
			errno = EIO;
		return false;
	}
	return true;
}

/* "1h02m03.500s", "4m05.000s", "0.250s" into buf. */
static const char *fmt_duration(uint64_t ns, char *buf, size_t len)
{
	unsigned long long ms = ns / 1000000, s = ms / 1000;

	if (s >= 3600)
		snprintf(buf, len, "%lluh%02llum%02llu.%03llus", s / 3600,
			 s / 60 % 60, s % 60, ms % 1000);
	else if (s >= 60)
		snprintf(buf, len, "%llum%02llu.%03llus", s / 60, s % 60,
			 ms % 1000);
	else
		snprintf(buf, len, "%llu.%03llus", s, ms % 1000);
	return buf;
}

static void print_uptime(uint64_t ns)
{
	char buf[48];

	fputs(fmt_duration(ns, buf, sizeof(buf)), stdout);
}

/* ---- commands ----------------------------------------------------------- */

/* How a command connects: the session, and what the connection is in it. */
struct conn_opts {
	const char *session;       /* NULL: anonymous                       */
	enum bwc_role role;
	uint32_t window;           /* consumers; 0: the daemon's default     */
	uint64_t ack_timeout_ns;   /* consumers; 0: none                     */
	bool coalesce;             /* consumers: coalesced delivery          */
	bool no_reconnect;         /* exit when the daemon ends the
				      connection, rather than reattach      */
};

static int open_client(const struct conn_opts *o, struct bwc_client **out)
{
	struct bwc_client *c;
	int rc;

	*out = NULL;
	if (bwc_new(&c) != 0) {
		return complain(&(struct problem){ .status = ST_ERROR,
						   .code = "OUT_OF_MEMORY" },
				"out of memory");
	}
	bwc_set_role(c, o->role);
	bwc_set_window(c, o->window);
	bwc_set_ack_timeout(c, o->ack_timeout_ns);
	bwc_set_coalesce(c, o->coalesce);
	bwc_set_reconnect(c, !o->no_reconnect);
	if (o->session != NULL && owner_uid >= 0)
		bwc_set_owner_uid(c, owner_uid);
	rc = bwc_set_daemon_user(c, daemon_user);
	if (rc == 0)
		rc = bwc_connect(c, socket_path, o->session);
	if (rc != 0) {
		rc = report(c, rc);
		bwc_free(c);
		return rc;
	}
	*out = c;
	return ST_OK;
}

/* The next fire, riding out signals that interrupt the wait. */
static int next_fire(struct bwc_client *c, int64_t timeout_ns,
		     struct bwc_fire *f)
{
	int rc;

	do
		rc = bwc_wait_fire(c, timeout_ns, f);
	while (rc == BWC_EINTR);
	return rc;
}

/* A named session's producer; an anonymous session's consumer (the
 * only role it has). */
static struct conn_opts producer(const char *session)
{
	return (struct conn_opts){
		.session = session,
		.role = session ? BWC_ROLE_PRODUCER : BWC_ROLE_DEFAULT,
	};
}

/* A timer the daemon took into a named session. */
static void print_scheduled(const struct bwc_timer *t, const char *session,
			    const struct bwc_scheduled *s)
{
	struct jw j;

	if (!json_mode) {
		printf("scheduled key=%llu deadline=%llu%s\n",
		       (unsigned long long)t->key,
		       (unsigned long long)s->deadline_ns,
		       s->replaced ? " replaced" : "");
		return;
	}
	jw_open(&j, stdout);
	jw_u64(&j, "key", t->key);
	jw_str(&j, "session", session);
	jw_u64(&j, "deadline_ns", s->deadline_ns);
	if (t->period_ns > 0)
		jw_u64(&j, "period_ns", t->period_ns);
	if (t->calendar != NULL)
		jw_str(&j, "calendar", t->calendar);
	jw_bool(&j, "replaced", s->replaced);
	jw_close(&j);
}

/* ---- wall-clock times (schedule --at) ---------------------------------- */

/* n digits at *p into *v, *p moved past them. */
static bool digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return false;
		*v = *v * 10 + (**p - '0');
	}
	return true;
}

/* Days in month m (1-12) of year y, proleptic Gregorian. */
static int month_days(int y, int m)
{
	static const int d[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : d[m - 1];
}

/* "YYYY-MM-DD(T| )HH:MM[:SS[.FRACTION]]" at *p into tm and *frac_ns, *p
 * moved past it; false, with *why, when it is not that. */
static bool parse_datetime(const char **p, struct tm *tm, uint64_t *frac_ns,
			   const char **why)
{
	int y, mo, d, h, mi, sec = 0;

	*why = "expected YYYY-MM-DD HH:MM[:SS]";
	*frac_ns = 0;
	if (!digits(p, 4, &y) || *(*p)++ != '-' || !digits(p, 2, &mo) ||
	    *(*p)++ != '-' || !digits(p, 2, &d) ||
	    (**p != 'T' && **p != ' ') || !++*p || !digits(p, 2, &h) ||
	    *(*p)++ != ':' || !digits(p, 2, &mi))
		return false;
	if (**p == ':') {
		++*p;
		if (!digits(p, 2, &sec))
			return false;
		if (**p == '.') {
			uint64_t scale = 100000000u;

			if (*++*p < '0' || **p > '9')
				return false;
			for (; **p >= '0' && **p <= '9'; ++*p, scale /= 10)
				*frac_ns += (uint64_t)(**p - '0') * scale;
		}
	}
	*why = "a field out of its range";
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo) ||
	    h > 23 || mi > 59 || sec > 59)
		return false;
	*tm = (struct tm){ .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d,
			   .tm_hour = h, .tm_min = mi, .tm_sec = sec, .tm_isdst = -1 };
	return true;
}

/* A zone name of the tz database: refused unless its file is there (the C
 * library would take an unknown name for UTC without a word). */
static bool zone_known(const char *zone)
{
	const char *dir = getenv("TZDIR");
	char path[512];

	if (!*zone || zone[0] == '/' || strstr(zone, "..") ||
	    strspn(zone, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/_+-") != strlen(zone))
		return false;
	snprintf(path, sizeof(path), "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", zone);
	return access(path, R_OK) == 0;
}

/* Local time tm in zone (NULL: the local zone) as Unix seconds: TZ set for
 * the conversion (bwctl is one thread).  A time the zone skips (a
 * daylight-saving gap) is refused; one it repeats is its first. */
static bool local_seconds(struct tm *tm, const char *zone, int64_t *out,
			  const char **why)
{
	const char *was = getenv("TZ");
	char *saved = was ? strdup(was) : NULL;
	struct tm want = *tm, back;
	time_t t;
	bool ok;

	if (zone)
		setenv("TZ", zone, 1);
	tzset();
	t = mktime(tm);
	ok = t != (time_t)-1 && localtime_r(&t, &back) != NULL &&
	     back.tm_hour == want.tm_hour && back.tm_min == want.tm_min &&
	     back.tm_mday == want.tm_mday;
	if (ok && back.tm_isdst > 0) {
		/* A repeated hour: the earlier of its two instants. */
		struct tm std = want;
		time_t t2;

		std.tm_isdst = 0;
		t2 = mktime(&std);
		if (t2 != (time_t)-1 && t2 < t && localtime_r(&t2, &back) &&
		    back.tm_hour == want.tm_hour && back.tm_min == want.tm_min)
			t = t2;
	}
	if (zone) {
		if (saved)
			setenv("TZ", saved, 1);
		else
			unsetenv("TZ");
		tzset();
	}
	free(saved);
	*why = "that local time does not exist there (a daylight-saving gap)";
	*out = (int64_t)t;
	return ok;
}

/*
 * --at TIME as Unix nanoseconds: "@SECONDS[.FRACTION]"; ISO 8601 with an
 * offset, "YYYY-MM-DDTHH:MM[:SS[.F]](Z|+HH:MM|-HH:MM|+HHMM)"; or local
 * time "YYYY-MM-DD HH:MM[:SS[.F]]" with an optional IANA zone name after
 * a space.  0, or false with *why.
 */
static bool parse_at(const char *text, uint64_t *out, const char **why)
{
	const char *p = text;
	uint64_t frac = 0;
	int64_t secs;
	struct tm tm;

	if (*p == '@') {
		uint64_t scale = 100000000u, whole = 0;

		*why = "expected @SECONDS[.FRACTION] since the Unix epoch";
		if (*++p < '0' || *p > '9')
			return false;
		for (; *p >= '0' && *p <= '9'; p++) {
			if (whole > (UINT64_MAX / 1000000000u - 9) / 10)
				return false;
			whole = whole * 10 + (uint64_t)(*p - '0');
		}
		if (*p == '.')
			for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
				frac += (uint64_t)(*p - '0') * scale;
		if (*p != '\0')
			return false;
		*out = whole * 1000000000u + frac;
		*why = "the epoch itself (0) is refused";
		return *out > 0;
	}
	if (!parse_datetime(&p, &tm, &frac, why))
		return false;
	if (*p == 'Z' || *p == 'z' || *p == '+' || *p == '-') {
		int sign = *p == '-' ? -1 : 1, oh = 0, om = 0;

		*why = "expected an offset Z, +HH:MM or -HH:MM";
		if (*p++ != 'Z' && p[-1] != 'z') {
			if (!digits(&p, 2, &oh) || (*p == ':' && !++p) ||
			    !digits(&p, 2, &om) || oh > 23 || om > 59)
				return false;
		}
		if (*p != '\0')
			return false;
		tm.tm_isdst = 0;
		secs = (int64_t)timegm(&tm) - sign * (oh * 3600 + om * 60);
	} else if (*p == '\0' || *p == ' ') {
		const char *zone = *p == ' ' ? p + 1 : NULL;

		if (zone && !zone_known(zone)) {
			*why = "unknown time zone (an IANA name such as Europe/Berlin, from the tz database)";
			return false;
		}
		if (!local_seconds(&tm, zone, &secs, why))
			return false;
	} else {
		*why = "unexpected text after the time";
		return false;
	}
	*why = "before the Unix epoch";
	if (secs <= 0)
		return false;
	*out = (uint64_t)secs * 1000000000u + frac;
	return true;
}

static int cmd_schedule(int argc, char **argv)
{
	static const char cmd[] = "schedule";
	static const struct option opts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "in", required_argument, NULL, 'i' },
		{ "at-monotonic", required_argument, NULL, 'a' },
		{ "at", required_argument, NULL, 'A' },
		{ "calendar", required_argument, NULL, 'C' },
		{ "jitter", required_argument, NULL, 'J' },
		{ "jitter-fixed", no_argument, NULL, 'F' },
		{ "misfire-grace", required_argument, NULL, 'G' },
		{ "every", required_argument, NULL, 'e' },
		{ "leeway", required_argument, NULL, 'l' },
		{ "clock", required_argument, NULL, 'L' },
		{ "session", required_argument, NULL, 's' },
		{ "payload", required_argument, NULL, 'p' },
		{ "replace", no_argument, NULL, 'r' },
		{ "count", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "owner", required_argument, NULL, 'O' },
		{ "socket", required_argument, NULL, 'S' },
		{ "daemon-user", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bwc_timer t = { .key = 0 };
	struct bwc_scheduled sched;
	struct conn_opts co;
	struct bwc_client *c = NULL;
	struct bwc_fire f;
	const char *session = NULL, *every_text = NULL, *why;
	bool have_key = false, have_in = false, have_at = false;
	bool have_count = false, have_wall = false, have_cal_opt = false;
	uint64_t count = 1, i, leeway = BWC_LEEWAY_DEFAULT;
	int o, rc;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 'k':
			if (!parse_u64(optarg, &t.key))
				return usage_error(cmd, "bad --key '%s': an "
						   "unsigned 64-bit number",
						   optarg);
			have_key = true;
			break;
		case 'i':
			if ((rc = parse_duration(cmd, "in", optarg,
						 &t.when_ns)) != ST_OK)
				return rc;
			have_in = true;
			break;
		case 'a':
			if (!parse_u64(optarg, &t.when_ns))
				return usage_error(cmd, "bad --at-monotonic "
						   "'%s': nanoseconds of "
						   "CLOCK_MONOTONIC", optarg);
			have_at = true;
			break;
		case 'A':
			if (!parse_at(optarg, &t.realtime_ns, &why))
				return usage_error(cmd, "bad --at '%s': %s",
						   optarg, why);
			have_wall = true;
			break;
		case 'C':
			t.calendar = optarg;
			break;
		case 'J':
			if ((rc = parse_duration(cmd, "jitter", optarg,
						 &t.jitter_ns)) != ST_OK)
				return rc;
			have_cal_opt = true;
			break;
		case 'F':
			t.jitter_fixed = true;
			have_cal_opt = true;
			break;
		case 'G':
			if ((rc = parse_duration(cmd, "misfire-grace", optarg,
						 &t.misfire_grace_ns)) != ST_OK)
				return rc;
			t.has_misfire_grace = true;
			have_cal_opt = true;
			break;
		case 'e':
			if ((rc = parse_duration(cmd, "every", optarg,
						 &t.period_ns)) != ST_OK)
				return rc;
			every_text = optarg;
			break;
		case 'l':
			if ((rc = parse_duration(cmd, "leeway", optarg,
						 &leeway)) != ST_OK)
				return rc;
			break;
		case 'L':
			if (strcmp(optarg, "monotonic") && strcmp(optarg, "boottime"))
				return usage_error(cmd, "bad --clock '%s': "
						   "monotonic or boottime", optarg);
			t.clock = optarg[0] == 'b' ? BWC_CLOCK_BOOTTIME :
				BWC_CLOCK_MONOTONIC;
			break;
		case 's':
			session = optarg;
			break;
		case 'p':
			t.payload = optarg;
			t.payload_len = strlen(optarg);
			break;
		case 'r':
			t.replace = true;
			break;
		case 'c':
			if (!parse_u64(optarg, &count) || count == 0)
				return usage_error(cmd, "bad --count '%s': a "
						   "number above zero", optarg);
			have_count = true;
			break;
		default:
			if ((rc = common_option(cmd, help_schedule, argv, o)) != ST_OK)
				return rc == ST_HELP ? ST_OK : rc;
		}
	}
	if ((rc = leftover(cmd, argc, argv)) != ST_OK)
		return rc;
	if (!have_key)
		return usage_error(cmd, "--key is required");
	if (have_in + have_at + have_wall + (t.calendar != NULL) != 1)
		return usage_error(cmd, "give exactly one of --in, --at, "
				   "--at-monotonic and --calendar");
	if (have_wall && every_text != NULL)
		return usage_error(cmd, "--at with --every: a wall-clock timer "
				   "is a oneshot (PROTOCOL.md, \"Clocks\")");
	if (t.calendar != NULL && every_text != NULL)
		return usage_error(cmd, "--calendar with --every: a calendar "
				   "timer recurs by its spec");
	if (t.clock == BWC_CLOCK_BOOTTIME && (have_wall || t.calendar != NULL))
		return usage_error(cmd, "--clock boottime with --at or "
				   "--calendar: those count on the wall clock");
	if (have_cal_opt && t.calendar == NULL)
		return usage_error(cmd, "--jitter, --jitter-fixed and "
				   "--misfire-grace need --calendar");
	if ((rc = owner_needs_session(cmd, session)) != ST_OK)
		return rc;
	if (have_count && session != NULL)
		return usage_error(cmd, "--count is for waiting without "
				   "--session; with one, use 'bwctl watch "
				   "--count'");
	if (count > 1 && every_text == NULL && t.calendar == NULL)
		return usage_error(cmd, "--count above 1 needs --every or "
				   "--calendar: a oneshot timer fires once");
	/* What the daemon would refuse (BAD_DEADLINE), refused here alike:
	 * bwc_now_ns() is its clock.  The delay is checked against now; the
	 * daemon's now comes later, so nothing passing here fails there. */
	why = have_wall || t.calendar != NULL ? NULL :
		bwp_schedule_problem(bwc_now_ns(), have_in, t.when_ns,
				     every_text != NULL, t.period_ns);
	if (why != NULL)
		return usage_error(cmd, "the daemon would refuse this "
				   "schedule: %s", why);
	t.absolute = have_at;

	co = producer(session);
	if ((rc = open_client(&co, &c)) != ST_OK)
		return rc;
	rc = bwc_schedule_leeway(c, &t, leeway, &sched);
	if (rc != 0)
		goto fail;

	if (session != NULL) {
		print_scheduled(&t, session, &sched);
		bwc_free(c);
		return ST_OK;
	}
	/* The anonymous session's own fires, auto-acknowledged. */
	for (i = 0; i < count; i++) {
		rc = next_fire(c, -1, &f);
		if (rc != 0)
			goto fail;
		print_fire(&f);
		if (!flush_out()) {
			bwc_free(c);
			return output_error(NULL);
		}
	}
	bwc_free(c);
	return ST_OK;

fail:
	rc = report(c, rc);
	bwc_free(c);
	return rc;
}

static int cmd_cancel(int argc, char **argv)
{
	static const char cmd[] = "cancel";
	static const struct option opts[] = {
		{ "key", required_argument, NULL, 'k' },
		{ "session", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "owner", required_argument, NULL, 'O' },
		{ "socket", required_argument, NULL, 'S' },
		{ "daemon-user", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bwc_client *c = NULL;
	struct conn_opts co;
	char owner[32] = "";
	const char *session = NULL;
	bool have_key = false, pending = false;
	uint64_t key = 0;
	int o, rc;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 'k':
			if (!parse_u64(optarg, &key))
				return usage_error(cmd, "bad --key '%s': an "
						   "unsigned 64-bit number",
						   optarg);
			have_key = true;
			break;
		case 's':
			session = optarg;
			break;
		default:
			if ((rc = common_option(cmd, help_cancel, argv, o)) != ST_OK)
				return rc == ST_HELP ? ST_OK : rc;
		}
	}
	if ((rc = leftover(cmd, argc, argv)) != ST_OK)
		return rc;
	if (!have_key)
		return usage_error(cmd, "--key is required");
	if ((rc = owner_needs_session(cmd, session)) != ST_OK)
		return rc;

	co = producer(session);
	if ((rc = open_client(&co, &c)) != ST_OK)
		return rc;
	rc = bwc_cancel(c, key, &pending);
	if (rc != 0) {
		rc = report(c, rc);
		bwc_free(c);
		return rc;
	}
	bwc_free(c);
	if (json_mode) {
		struct jw j;

		jw_open(&j, stdout);
		jw_u64(&j, "key", key);
		jw_str(&j, "session", session);
		jw_bool(&j, "cancelled", pending);
		jw_close(&j);
	} else if (pending) {
		printf("cancelled key=%llu\n", (unsigned long long)key);
	}
	if (!pending) {
		if (owner_uid >= 0)
			snprintf(owner, sizeof(owner), " of uid %lld",
				 (long long)owner_uid);
		return complain(&(struct problem){ .status = ST_NOTFOUND,
						   .code = "NOT_FOUND" },
				"no pending timer with key %llu%s%s%s",
				(unsigned long long)key,
				session ? " in session " : "",
				session ? session : "", owner);
	}
	return ST_OK;
}

/* The daemon's default window (PROTOCOL.md, Hello), for --count's bound. */
#define DEFAULT_WINDOW 256u

/* ---- watch --exec: the shell's worker ----------------------------------- */

/* watch --exec's settings. */
struct exec_opts {
	const char *cmd;           /* run by /bin/sh -c, once per fire       */
	const char *session;
	uint64_t ack_timeout_ns;   /* 0: none, and no touching               */
	uint64_t backoff_base_ns, backoff_cap_ns;
};

#define DEFAULT_BACKOFF_BASE_NS 1000000000ull     /* 1 s   */
#define DEFAULT_BACKOFF_CAP_NS 300000000000ull    /* 5 min */

/* 64 random bits for the release's jitter; the clock's if the kernel has
 * none to give (jitter needs no secrecy). */
static uint64_t random64(void)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r))
		return r;
	return bwc_now_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
}

static void setenv_u64(const char *name, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	setenv(name, buf, 1);
}

/* In the child: the fire in the environment, the payload's pipe as stdin,
 * signals as a shell expects them, then the command.  Never returns. */
static void exec_child(const struct exec_opts *x, const struct bwc_fire *f,
		       int in)
{
	const struct bwc_dead_letter *d = &f->dead_letter;

	setenv("BW_SESSION", x->session, 1);
	setenv_u64("BW_KEY", f->key);
	setenv_u64("BW_DELIVERIES", f->deliveries);
	setenv_u64("BW_DEADLINE_NS", f->deadline_ns);
	setenv_u64("BW_FIRED_NS", f->fired_ns);
	setenv_u64("BW_FIRE_COUNT", f->fire_count);
	setenv_u64("BW_REDELIVERED", f->redelivered);
	setenv_u64("BW_RESTORED", f->late);
	setenv_u64("BW_HAS_PAYLOAD", f->payload != NULL);
	if (d->present) {
		setenv("BW_DEAD_LETTER_OF", d->session, 1);
		setenv_u64("BW_DEAD_LETTER_DELIVERIES", d->deliveries);
		setenv("BW_DEAD_LETTER_REASON", bwc_take_back_name(d->reason),
		       1);
	}
	/* watch ignores SIGPIPE; an ignored signal stays ignored across
	 * exec, and a pipeline in CMD wants the default. */
	signal(SIGPIPE, SIG_DFL);
	if (in != STDIN_FILENO) {
		dup2(in, STDIN_FILENO);
		close(in);
	}
	execl("/bin/sh", "sh", "-c", x->cmd, (char *)NULL);
	fprintf(stderr, "bwctl: cannot run /bin/sh: %s\n", strerror(errno));
	_exit(127);
}

/*
 * Run the command for fire f and wait for it, feeding it the payload and
 * touching the fire every half ack timeout while it runs (the daemon
 * would take it back at the full one).  *status gets waitpid's; a
 * failure to run it at all is reported (the fire is then released by the
 * caller's rule: not exit 0).
 */
static int exec_one(struct bwc_client *c, const struct exec_opts *x,
		    const struct bwc_fire *f, int *status)
{
	const uint8_t *pay = f->payload;
	size_t left = f->payload ? f->payload_len : 0;
	uint64_t next_touch = UINT64_MAX;
	bool touching = x->ack_timeout_ns > 0;
	int pipefd[2], pidfd, poll_err = 0;
	pid_t pid;

	*status = -1;
	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return complain(&(struct problem){ .status = ST_ERROR,
						   .code = "SYSTEM_ERROR" },
				"pipe: %s", strerror(errno));
	/* What stdio holds goes out once, not once more from the child. */
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return complain(&(struct problem){ .status = ST_ERROR,
						   .code = "SYSTEM_ERROR" },
				"fork: %s", strerror(errno));
	}
	if (pid == 0) {
		close(pipefd[1]);
		exec_child(x, f, pipefd[0]);
	}
	close(pipefd[0]);
	if (left == 0) {
		close(pipefd[1]);
		pipefd[1] = -1;
	} else {
		fcntl(pipefd[1], F_SETFL, O_NONBLOCK);
	}
	/* The child's end as a descriptor to poll; without pidfds (before
	 * Linux 5.3) a look every 20 ms. */
	pidfd = pidfd_open(pid, 0);
	if (touching)
		next_touch = bwc_now_ns() + x->ack_timeout_ns / 2;

	for (;;) {
		struct pollfd p[2];
		nfds_t n = 0;
		uint64_t now = bwc_now_ns();
		int timeout = pidfd < 0 ? 20 : -1;

		if (waitpid(pid, status, WNOHANG) == pid)
			break;
		if (touching && now >= next_touch) {
			bool touched = false;
			uint64_t deadline = 0;
			int rc = bwc_touch(c, f, 0, &touched, &deadline);

			if (rc == BWC_ESERVER &&
			    bwc_server_error(c) == BWC_SERVER_HOLD_LIMIT) {
				warn("HOLD_LIMIT", "key %llu: %s; the command "
				     "runs on, and the daemon will take the "
				     "fire back at its ack deadline",
				     (unsigned long long)f->key, bwc_errmsg(c));
				touching = false;
			} else if (rc != 0) {
				kill(pid, SIGTERM);
				waitpid(pid, status, 0);
				if (pipefd[1] >= 0)
					close(pipefd[1]);
				if (pidfd >= 0)
					close(pidfd);
				return report(c, rc);
			} else if (!touched) {
				/* Taken back already (a reconnect, or the
				 * deadline passed): nothing to hold. */
				warn("NOT_IN_FLIGHT", "key %llu: the daemon "
				     "no longer holds the fire for this "
				     "watch; it will come again",
				     (unsigned long long)f->key);
				touching = false;
			} else {
				next_touch = bwc_now_ns() + x->ack_timeout_ns / 2;
			}
			continue;
		}
		if (touching) {
			uint64_t ms = (next_touch - now) / 1000000 + 1;

			if (timeout < 0 || ms < (uint64_t)timeout)
				timeout = ms > INT32_MAX ? INT32_MAX : (int)ms;
		}
		if (pidfd >= 0)
			p[n++] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		if (pipefd[1] >= 0)
			p[n++] = (struct pollfd){ .fd = pipefd[1],
						  .events = POLLOUT };
		if (poll(p, n, timeout) < 0 && errno != EINTR) {
			poll_err = errno;
			kill(pid, SIGTERM);
			waitpid(pid, status, 0);
			break;
		}
		if (pipefd[1] >= 0) {
			ssize_t w = write(pipefd[1], pay, left);

			/* EPIPE: the command does not read its stdin. */
			if (w > 0) {
				pay += w;
				left -= (size_t)w;
			}
			if (left == 0 || (w < 0 && errno != EAGAIN &&
					  errno != EINTR)) {
				close(pipefd[1]);
				pipefd[1] = -1;
			}
		}
	}
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (pidfd >= 0)
		close(pidfd);
	if (poll_err != 0)
		return complain(&(struct problem){ .status = ST_ERROR,
						   .code = "SYSTEM_ERROR" },
				"poll: %s", strerror(poll_err));
	return ST_OK;
}

/* The command's verdict on f: exit 0 acknowledges it, anything else
 * releases it with backoff (or dead-letters it, at the session's limit). */
static int exec_verdict(struct bwc_client *c, const struct exec_opts *x,
			const struct bwc_fire *f, int status)
{
	struct bwc_released out;
	char why[64], in[48];
	uint64_t delay;
	int rc;

	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		rc = bwc_ack(c, f, false, NULL);
		return rc != 0 ? report(c, rc) : ST_OK;
	}
	if (WIFEXITED(status))
		snprintf(why, sizeof(why), "exited with status %d",
			 WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(why, sizeof(why), "was killed by signal %d",
			 WTERMSIG(status));
	else
		snprintf(why, sizeof(why), "did not run");
	delay = bwc_backoff(f->deliveries, x->backoff_base_ns,
			    x->backoff_cap_ns, random64());
	rc = bwc_release(c, f, delay, &out);
	if (rc != 0)
		return report(c, rc);
	if (!out.released)
		warn("COMMAND_FAILED", "key %llu: the command %s; the daemon "
		     "had taken the fire back already, and it will come again",
		     (unsigned long long)f->key, why);
	else if (out.dead_lettered)
		warn("DEAD_LETTERED", "key %llu: the command %s on delivery "
		     "%llu, the session's last: the fire went to its "
		     "dead-letter session", (unsigned long long)f->key, why,
		     (unsigned long long)out.deliveries);
	else
		warn("COMMAND_FAILED", "key %llu: the command %s (delivery "
		     "%llu): released, back in %s",
		     (unsigned long long)f->key, why,
		     (unsigned long long)out.deliveries,
		     fmt_duration(delay, in, sizeof(in)));
	return ST_OK;
}

/*
 * The fires already in the client, up to the count, after the one just
 * printed: one batch, flushed and acknowledged together.  Returns the
 * last fire printed in *last.
 */
static void print_batch(struct bwc_client *c, uint64_t count,
			uint64_t *seen, struct bwc_fire *last)
{
	struct bwc_fire f;

	while ((count == 0 || *seen < count) && bwc_wait_fire(c, 0, &f) == 0) {
		print_fire(&f);
		(*seen)++;
		*last = f;
	}
}

static int cmd_watch(int argc, char **argv)
{
	static const char cmd[] = "watch";
	static const struct option opts[] = {
		{ "session", required_argument, NULL, 's' },
		{ "count", required_argument, NULL, 'c' },
		{ "window", required_argument, NULL, 'w' },
		{ "ack-timeout", required_argument, NULL, 'a' },
		{ "coalesce", no_argument, NULL, 'C' },
		{ "no-reconnect", no_argument, NULL, 'R' },
		{ "timeout", required_argument, NULL, 't' },
		{ "exec", required_argument, NULL, 'x' },
		{ "backoff-base", required_argument, NULL, 'b' },
		{ "backoff-cap", required_argument, NULL, 'B' },
		{ "json", no_argument, NULL, 'j' },
		{ "owner", required_argument, NULL, 'O' },
		{ "socket", required_argument, NULL, 'S' },
		{ "daemon-user", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct conn_opts co = { .role = BWC_ROLE_CONSUMER };
	struct exec_opts xo = { .backoff_base_ns = DEFAULT_BACKOFF_BASE_NS,
				.backoff_cap_ns = DEFAULT_BACKOFF_CAP_NS };
	bool backoff_set = false;
	struct bwc_session_info info;
	struct bwc_client *c = NULL;
	struct bwc_fire f, last = { .key = 0 };
	const char *timeout_text = NULL;
	static const struct problem timed_out = { .status = ST_NOTFOUND,
						  .code = "TIMED_OUT" };
	uint64_t count = 0, timeout = 0, deadline = 0, seen = 0, window = 0;
	bool unacked = false;
	int o, rc;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			co.session = optarg;
			break;
		case 'c':
			if (!parse_u64(optarg, &count) || count == 0)
				return usage_error(cmd, "bad --count '%s': a "
						   "number above zero", optarg);
			break;
		case 'w':
			if (!parse_u64(optarg, &window) || window == 0 ||
			    window > UINT32_MAX)
				return usage_error(cmd, "bad --window '%s': a "
						   "number from 1 to %u",
						   optarg, UINT32_MAX);
			break;
		case 'a':
			if ((rc = parse_duration(cmd, "ack-timeout", optarg,
						 &co.ack_timeout_ns)) != ST_OK)
				return rc;
			break;
		case 'C':
			co.coalesce = true;
			break;
		case 'R':
			co.no_reconnect = true;
			break;
		case 't':
			if ((rc = parse_duration(cmd, "timeout", optarg,
						 &timeout)) != ST_OK)
				return rc;
			timeout_text = optarg;
			break;
		case 'x':
			if (optarg[0] == '\0')
				return usage_error(cmd, "--exec needs a command");
			xo.cmd = optarg;
			break;
		case 'b':
		case 'B':
			if ((rc = parse_duration(cmd, o == 'b' ? "backoff-base" :
						 "backoff-cap", optarg,
						 o == 'b' ? &xo.backoff_base_ns :
						 &xo.backoff_cap_ns)) != ST_OK)
				return rc;
			backoff_set = true;
			break;
		default:
			if ((rc = common_option(cmd, help_watch, argv, o)) != ST_OK)
				return rc == ST_HELP ? ST_OK : rc;
		}
	}
	if ((rc = session_arg(cmd, argc, argv, &co.session)) != ST_OK)
		return rc;
	if (co.session == NULL)
		return usage_error(cmd, "a session is required (SESSION or "
				   "--session NAME): fires of an anonymous "
				   "session die with it");
	if (xo.cmd == NULL && backoff_set)
		return usage_error(cmd, "--backoff-base and --backoff-cap are "
				   "for --exec, which releases a fire its "
				   "command fails");
	if (xo.backoff_base_ns == 0 || xo.backoff_base_ns > xo.backoff_cap_ns)
		return usage_error(cmd, "the backoff needs 0 < --backoff-base "
				   "<= --backoff-cap");
	/* --exec runs one command at a time: a window of one leaves the
	 * session's other fires to other consumers, instead of aging here
	 * toward their ack timeout. */
	if (xo.cmd != NULL && window == 0)
		window = 1;
	/* --count N: never more than N in flight, so the daemon sends no
	 * more than needed at once (more only as acks free the window at
	 * the end; those go back to the queue when bwctl closes). */
	if (count > 0 && count < (window ? window : DEFAULT_WINDOW))
		window = count;
	co.window = (uint32_t)window;
	/* A reader gone is a write error (EPIPE) to report, with the fires
	 * of the failed batch unacknowledged, not a silent death. */
	signal(SIGPIPE, SIG_IGN);

	if ((rc = open_client(&co, &c)) != ST_OK)
		return rc;
	if (bwc_get_session_info(c, &info) != 0)
		memset(&info, 0, sizeof(info));
	if (info.dropped > 0)
		warn("DROPPED_FIRES", "the daemon dropped %llu periodic fires "
		     "of session %s at its queue limit since a consumer last "
		     "attached", (unsigned long long)info.dropped, co.session);
	if (timeout_text != NULL) {
		uint64_t now = bwc_now_ns();

		deadline = timeout > UINT64_MAX - now ? UINT64_MAX
						       : now + timeout;
	}

	while (count == 0 || seen < count) {
		int64_t left = -1;

		if (timeout_text != NULL) {
			uint64_t now = bwc_now_ns();

			left = now >= deadline ? 0 :
			       deadline - now > INT64_MAX ?
				       INT64_MAX : (int64_t)(deadline - now);
		}
		rc = next_fire(c, left, &f);
		if (rc == BWC_ETIMEDOUT)
			break;
		if (rc != 0)
			goto fail;
		if (xo.cmd != NULL) {
			int status;

			xo.session = co.session;
			xo.ack_timeout_ns = info.ack_timeout_ns;
			if ((rc = exec_one(c, &xo, &f, &status)) != ST_OK ||
			    (rc = exec_verdict(c, &xo, &f, status)) != ST_OK) {
				bwc_free(c);
				return rc;
			}
			seen++;
			continue;
		}
		print_fire(&f);
		seen++;
		last = f;
		print_batch(c, count, &seen, &last);
		/* Printed and flushed first, acknowledged after: a fire
		 * whose line did not get out is delivered again. */
		if (!flush_out()) {
			bwc_free(c);
			return output_error("the fires not acknowledged go back "
					    "to the session's queue");
		}
		unacked = true;
		if (count > 0 && seen == count)
			break;              /* acknowledged durably below */
		rc = bwc_send_ack(c, &last, true);
		if (rc != 0)
			goto fail;
	}
	/* The last acks durable before exiting: the blocking ack returns
	 * once the daemon has journaled it (a repeat of one sent without
	 * reply is harmless and waits for that one too). */
	if (unacked) {
		rc = bwc_ack(c, &last, true, NULL);
		if (rc != 0)
			goto fail;
	}
	/* Fires received past --count go back to the queue with the close. */
	bwc_free(c);
	if (count > 0 && seen < count)
		return complain(&timed_out, "timed out after %s with %llu of "
				"%llu fires", timeout_text,
				(unsigned long long)seen,
				(unsigned long long)count);
	if (seen == 0)
		return complain(&timed_out, "no fire within %s", timeout_text);
	return ST_OK;

fail:
	rc = report(c, rc);
	bwc_free(c);
	return rc;
}

/* The most a fire in the lane of this tick comes late, from HelloReply's
 * lanes (finest first); 0 from a daemon that sends none. */
static uint64_t lane_max_late(const struct bwc_session_info *info,
			      uint64_t resolution_ns)
{
	for (uint32_t i = 0; i < info->nlanes && i < BWC_MAX_LANES; i++)
		if (info->lanes[i].resolution_ns == resolution_ns)
			return info->lanes[i].max_late_ns;
	return 0;
}

static void jw_lane(struct jw *j, const char *name,
		    const struct bwc_lane_stats *l,
		    const struct bwc_session_info *info, uint64_t resolution_ns)
{
	jw_begin(j, name);
	jw_u64(j, "resolution_ns", resolution_ns);
	jw_u64(j, "max_late_ns", lane_max_late(info, resolution_ns));
	jw_u64(j, "pending", l->pending);
	jw_u64(j, "overflow", l->overflow);
	jw_u64(j, "inserted", l->inserted);
	jw_u64(j, "cancelled", l->cancelled);
	jw_u64(j, "fired", l->fired);
	jw_u64(j, "lost", l->lost);
	jw_end(j);
}

/* A lane's tick or bound in milliseconds, to the microsecond. */
static const char *fmt_ms(uint64_t ns, char *buf, size_t len)
{
	unsigned long long us = ns / 1000;

	if (us % 1000)
		snprintf(buf, len, "%llu.%03llums", us / 1000, us % 1000);
	else
		snprintf(buf, len, "%llums", us / 1000);
	return buf;
}

static void print_lane(const char *name, const struct bwc_lane_stats *l,
		       const struct bwc_session_info *info,
		       uint64_t resolution_ns)
{
	char tick[32], late[32];

	printf("%-8s %10llu %10llu %10llu %10llu %10llu %10llu %9s %9s\n", name,
	       (unsigned long long)l->pending, (unsigned long long)l->overflow,
	       (unsigned long long)l->inserted,
	       (unsigned long long)l->cancelled,
	       (unsigned long long)l->fired, (unsigned long long)l->lost,
	       fmt_ms(resolution_ns, tick, sizeof(tick)),
	       fmt_ms(lane_max_late(info, resolution_ns), late, sizeof(late)));
}

/*
 * One row of the uid's figures: "name  value of budget unit (what)", the
 * budget left out when the daemon sent none (0).  name NULL: the value is
 * printed already (the periodic rate, with its fraction).
 */
static void print_uid_row(const char *name, uint64_t value, const char *unit,
			  uint64_t budget, const char *what)
{
	if (name != NULL)
		printf("%-16s %llu%s", name, (unsigned long long)value, unit);
	if (budget > 0)
		printf(" of %llu%s", (unsigned long long)budget, unit);
	printf(" (%s)\n", what);
}

/* What metrics asks for besides Stats, and its --output. */
struct scrape {
	struct bwc_metrics m;
	struct bwc_histogram h[BWC_HISTOGRAMS];
	struct bwc_process p;
	const char *output;        /* NULL: stdout                          */
};

/*
 * The options stats and metrics share, then one Stats request: json_ok
 * false for a command without --json; metrics NULL when not wanted.
 */
static int fetch_stats(const char *cmd, const char *help, int argc,
		       char **argv, bool json_ok, struct bwc_session_info *info,
		       struct bwc_stats *st, struct scrape *metrics)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "socket", required_argument, NULL, 'S' },
		{ "daemon-user", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct conn_opts co = producer(NULL);
	struct bwc_client *c = NULL;
	int o, rc;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 'o':
			if (metrics == NULL)
				return usage_error(cmd, "--output is for metrics");
			if (optarg[0] == '\0')
				return usage_error(cmd, "--output needs a file name");
			metrics->output = optarg;
			break;
		default:
			if ((rc = common_option(cmd, help, argv, o)) != ST_OK)
				return rc;
		}
	}
	if ((rc = leftover(cmd, argc, argv)) != ST_OK)
		return rc;
	if (json_mode && !json_ok)
		return usage_error(cmd, "--json is not for %s, whose output "
				   "is the Prometheus text format: 'bwctl "
				   "stats --json' gives its figures as JSON",
				   cmd);
	if (owner_uid >= 0)
		return usage_error(cmd, "--owner is for schedule, cancel and "
				   "watch with --session: stats are the whole "
				   "daemon's");

	/* Anonymous: a producer needs a named session, and stats needs none
	 * (nothing is scheduled, so nothing ever fires to this connection). */
	if ((rc = open_client(&co, &c)) != ST_OK)
		return rc;
	if (bwc_get_session_info(c, info) != 0)
		memset(info, 0, sizeof(*info));
	rc = metrics ? bwc_metrics_scrape(c, st, &metrics->m, metrics->h,
					  BWC_HISTOGRAMS, &metrics->p) :
		       bwc_metrics(c, st, NULL);
	if (rc != 0)
		rc = report(c, rc);
	bwc_free(c);
	return rc;
}

static int cmd_stats(int argc, char **argv)
{
	struct bwc_session_info info;
	struct bwc_stats st;
	int rc = fetch_stats("stats", help_stats, argc, argv, true, &info,
			     &st, NULL);

	if (rc != ST_OK)
		return rc == ST_HELP ? ST_OK : rc;

	if (json_mode) {
		struct jw j;

		jw_open(&j, stdout);
		jw_str(&j, "daemon_version", info.daemon_version);
		jw_lane(&j, "oneshot", &st.oneshot, &info,
			info.oneshot_resolution_ns);
		jw_lane(&j, "periodic", &st.periodic, &info,
			info.periodic_resolution_ns);
		jw_u64(&j, "clients", st.clients);
		jw_u64(&j, "consumers", st.consumers);
		jw_u64(&j, "sessions", st.sessions);
		jw_u64(&j, "queued", st.queued);
		jw_u64(&j, "in_flight", st.in_flight);
		jw_u64(&j, "acked", st.acked);
		jw_u64(&j, "redelivered", st.redelivered);
		jw_u64(&j, "dropped", st.dropped);
		jw_u64(&j, "expired", st.expired);
		jw_u64(&j, "uptime_ns", st.uptime_ns);
		jw_u64(&j, "memory_bytes", st.memory_bytes);
		jw_u64(&j, "uid", geteuid());
		jw_u64(&j, "uid_connections", st.uid_connections);
		jw_u64(&j, "uid_sessions", st.uid_sessions);
		jw_u64(&j, "uid_timers", st.uid_timers);
		jw_u64(&j, "uid_periodic_rate_mhz", st.uid_periodic_rate_mhz);
		jw_u64(&j, "uid_bytes", st.uid_bytes);
		jw_u64(&j, "max_clients_per_uid",
		       info.limits.max_clients_per_uid);
		jw_u64(&j, "max_sessions_per_uid",
		       info.limits.max_sessions_per_uid);
		jw_u64(&j, "max_timers_per_uid", info.limits.max_timers_per_uid);
		jw_u64(&j, "max_periodic_rate_per_uid",
		       info.limits.max_periodic_rate_per_uid);
		jw_u64(&j, "max_bytes_per_uid", info.limits.max_bytes_per_uid);
		jw_u64(&j, "max_memory_bytes", info.limits.max_memory_bytes);
		jw_close(&j);
		return ST_OK;
	}
	printf("daemon       bitwheeld %s at %s\n",
	       info.daemon_version[0] ? info.daemon_version : "(unknown)",
	       socket_path);
	fputs("uptime       ", stdout);
	print_uptime(st.uptime_ns);
	printf("\nclients      %llu (connections now)\n",
	       (unsigned long long)st.clients);
	printf("consumers    %llu (consumer connections now)\n",
	       (unsigned long long)st.consumers);
	printf("sessions     %llu (named, attached or not)\n",
	       (unsigned long long)st.sessions);
	printf("queued       %llu (fires waiting in sessions' queues)\n",
	       (unsigned long long)st.queued);
	printf("in_flight    %llu (fires sent to consumers, not yet "
	       "acknowledged)\n", (unsigned long long)st.in_flight);
	printf("acked        %llu (fires acknowledged, auto-ack included)\n",
	       (unsigned long long)st.acked);
	printf("redelivered  %llu (fires taken back to be sent again)\n",
	       (unsigned long long)st.redelivered);
	printf("dropped      %llu (periodic fires dropped at a session's "
	       "queue limit)\n", (unsigned long long)st.dropped);
	printf("expired      %llu (named sessions dropped after their "
	       "linger)\n", (unsigned long long)st.expired);
	printf("memory       %llu bytes\n",
	       (unsigned long long)st.memory_bytes);
	/* The daemon counts the caller's uid: ours, as SO_PEERCRED saw it. */
	printf("\nyour uid %u, against its per-uid budgets%s:\n",
	       (unsigned)geteuid(),
	       geteuid() == 0 ? " (root: exempt unless --budgets names it)" :
				"");
	print_uid_row("uid_connections", st.uid_connections, "",
		      info.limits.max_clients_per_uid,
		      "connections now, this one included");
	print_uid_row("uid_sessions", st.uid_sessions, "",
		      info.limits.max_sessions_per_uid,
		      "named sessions, attached or not");
	print_uid_row("uid_timers", st.uid_timers, "",
		      info.limits.max_timers_per_uid,
		      "pending timers and undelivered fires");
	printf("uid_periodic     %llu.%03llu Hz",
	       (unsigned long long)(st.uid_periodic_rate_mhz / 1000),
	       (unsigned long long)(st.uid_periodic_rate_mhz % 1000));
	print_uid_row(NULL, 0, " Hz", info.limits.max_periodic_rate_per_uid,
		      "periodic fires a second: the sum of 1/period");
	print_uid_row("uid_bytes", st.uid_bytes, "",
		      info.limits.max_bytes_per_uid,
		      "timers, fires and unread output");
	printf("\n%-8s %10s %10s %10s %10s %10s %10s %9s %9s\n", "lane",
	       "pending", "overflow", "inserted", "cancelled", "fired", "lost",
	       "tick", "max_late");
	print_lane("oneshot", &st.oneshot, &info, info.oneshot_resolution_ns);
	print_lane("periodic", &st.periodic, &info,
		   info.periodic_resolution_ns);
	puts("(a timer goes to the coarsest lane whose max_late is within its "
	     "leeway)");
	return ST_OK;
}

/*
 * The Prometheus text exposition format: one family's HELP and TYPE, then
 * its samples.  Counters' names end in _total in both lines, as Prometheus'
 * text format (what node_exporter's textfile collector reads) wants.  All
 * of it goes to mout: stdout, or --output's temporary file.
 */
static FILE *mout;

static void family(const char *name, const char *type, const char *help)
{
	fprintf(mout, "# HELP bitwheel_%s %s\n# TYPE bitwheel_%s %s\n", name,
		help, name, type);
}

static void sample(const char *name, const char *labels, uint64_t v)
{
	fprintf(mout, "bitwheel_%s%s %llu\n", name, labels,
		(unsigned long long)v);
}

/* A sample's value and its line's end: nanoseconds as seconds, a count
 * (UINT64_MAX: +Inf, the text format's infinity). */
static void value_seconds(uint64_t ns)
{
	fprintf(mout, "%llu.%09llu\n", (unsigned long long)(ns / 1000000000u),
		(unsigned long long)(ns % 1000000000u));
}

static void value_or_inf(uint64_t v)
{
	if (v == UINT64_MAX)
		fputs("+Inf\n", mout);
	else
		fprintf(mout, "%llu\n", (unsigned long long)v);
}

static void sample_seconds(const char *name, const char *labels, uint64_t ns)
{
	fprintf(mout, "bitwheel_%s%s ", name, labels);
	value_seconds(ns);
}

/* A label value as the text format quotes it: \\, \" and \n escaped. */
static void label_value(const char *v)
{
	putc('"', mout);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			putc('\\', mout);
		if (*v == '\n')
			fputs("\\n", mout);
		else
			putc(*v, mout);
	}
	putc('"', mout);
}

static void one(const char *name, const char *type, const char *help,
		uint64_t v)
{
	family(name, type, help);
	sample(name, "", v);
}

static void one_seconds(const char *name, const char *type, const char *help,
			uint64_t ns)
{
	family(name, type, help);
	sample_seconds(name, "", ns);
}

static void lanes(const char *name, const char *type, const char *help,
		  const struct bwc_stats *st, size_t off)
{
	family(name, type, help);
	sample(name, "{lane=\"oneshot\"}",
	       *(const uint64_t *)((const char *)&st->oneshot + off));
	sample(name, "{lane=\"periodic\"}",
	       *(const uint64_t *)((const char *)&st->periodic + off));
}

/* One histogram's samples (its family printed before): cumulative
 * buckets, +Inf, _sum and _count; lane NULL for one without the label.
 * sum_ns UINT64_MAX: a histogram of counts, not durations (bounds as
 * integers), whose sum the daemon does not send: no _sum. */
#define NO_SUM UINT64_MAX
static void histogram(const char *name, const char *lane, uint32_t bounds,
		      const uint64_t *le_ns, const uint64_t *bucket,
		      uint64_t count, uint64_t sum_ns)
{
	char metric[64], label[80], lab[32] = "";
	uint64_t cum = 0;

	if (lane != NULL)
		snprintf(lab, sizeof(lab), "lane=\"%s\",", lane);
	snprintf(metric, sizeof(metric), "%s_bucket", name);
	for (uint32_t i = 0; i < bounds; i++) {
		cum += bucket[i];
		if (sum_ns == NO_SUM)
			snprintf(label, sizeof(label), "{%sle=\"%llu\"}", lab,
				 (unsigned long long)le_ns[i]);
		else
			snprintf(label, sizeof(label), "{%sle=\"%llu.%09llu\"}",
				 lab, (unsigned long long)(le_ns[i] / 1000000000u),
				 (unsigned long long)(le_ns[i] % 1000000000u));
		sample(metric, label, cum);
	}
	snprintf(label, sizeof(label), "{%sle=\"+Inf\"}", lab);
	sample(metric, label, count);
	if (lane != NULL)
		snprintf(label, sizeof(label), "{lane=\"%s\"}", lane);
	else
		label[0] = '\0';
	snprintf(metric, sizeof(metric), "%s_sum", name);
	if (sum_ns != NO_SUM)
		sample_seconds(metric, label, sum_ns);
	snprintf(metric, sizeof(metric), "%s_count", name);
	sample(metric, label, count);
}

static void print_lateness(const struct bwc_metrics *m)
{
	static const char *const lane[2] = { "oneshot", "periodic" };

	family("fire_lateness_seconds", "histogram",
	       "Time from a timer's deadline to the daemon firing it, by "
	       "lane; _count is bitwheel_fires_total.");
	for (int l = 0; l < 2; l++)
		histogram("fire_lateness_seconds", lane[l], m->lateness_bounds,
			  m->lateness_le_ns, m->lateness_bucket[l],
			  m->lateness_count[l], m->lateness_sum_ns[l]);
}

/* A histogram of the scrape's, when the daemon sent it. */
static void print_histogram(const struct bwc_histogram *h, const char *name,
			    const char *lane)
{
	if (h->bounds)
		histogram(name, lane, h->bounds, h->le_ns, h->bucket, h->count,
			  h->sum_ns);
}

/* What happens to fires after they are due: queue wait, ack latency. */
static void print_delivery(const struct scrape *x)
{
	if (!x->h[BWC_HISTOGRAM_QUEUE_WAIT_ONESHOT].bounds)
		return;
	family("queue_wait_seconds", "histogram",
	       "Time from a fire's deadline to its first hand-out to a "
	       "consumer, by lane; _count is the fires handed out a first "
	       "time.");
	print_histogram(&x->h[BWC_HISTOGRAM_QUEUE_WAIT_ONESHOT],
			"queue_wait_seconds", "oneshot");
	print_histogram(&x->h[BWC_HISTOGRAM_QUEUE_WAIT_PERIODIC],
			"queue_wait_seconds", "periodic");
	family("ack_latency_seconds", "histogram",
	       "Time from a fire's hand-out to the Ack that completed it "
	       "(manual acks; auto-ack's completion on write is not one).");
	print_histogram(&x->h[BWC_HISTOGRAM_ACK_LATENCY],
			"ack_latency_seconds", NULL);
}

/* Fires that fail: what became of fires their handlers did not
 * acknowledge, and how many hand-outs the acknowledged ones took. */
static void print_failures(const struct scrape *x)
{
	const struct bwc_histogram *h = &x->h[BWC_HISTOGRAM_DELIVERIES];

	one("fires_dead_lettered_total", "counter",
	    "Fires sent to a dead-letter session at their session's delivery "
	    "limit.", x->m.dead_lettered);
	one("fires_released_total", "counter",
	    "Fires given back by their consumer (Release).", x->m.released);
	one("fires_touched_total", "counter",
	    "Fires whose ack deadline their consumer extended (Touch).",
	    x->m.touched);
	one("fires_kicked_total", "counter",
	    "Dead letters moved back to their session (Kick).", x->m.kicked);
	if (!h->bounds)
		return;
	family("fire_deliveries", "histogram",
	       "Acknowledged fires by the hand-outs they took (1: the first "
	       "did); no _sum.");
	histogram("fire_deliveries", NULL, h->bounds, h->le_ns, h->bucket,
		  h->count, NO_SUM);
}

/*
 * The daemon process's figures under the names and help texts the
 * Prometheus client libraries give every process, labelled with the
 * daemon: node_exporter's textfile collector serves its own process_*
 * unlabelled beside them, and drops a family whose help differs or a
 * series it already has.  One figure's HELP and TYPE lines and its
 * sample's name; the caller prints the value.
 */
static void process_metric(const char *name, const char *type,
			   const char *help)
{
	fprintf(mout, "# HELP process_%s %s\n# TYPE process_%s %s\n"
		"process_%s{daemon=\"bitwheeld\"} ", name, help, name, type,
		name);
}

static void print_process(const struct bwc_process *p)
{
	if (p->has_cpu) {
		process_metric("cpu_seconds_total", "counter",
			       "Total user and system CPU time spent in seconds.");
		value_seconds(p->cpu_ns);
	}
	if (p->has_open_fds) {
		process_metric("open_fds", "gauge",
			       "Number of open file descriptors.");
		value_or_inf(p->open_fds);
	}
	if (p->has_max_fds) {
		process_metric("max_fds", "gauge",
			       "Maximum number of open file descriptors.");
		value_or_inf(p->max_fds);
	}
	if (p->has_memory) {
		process_metric("virtual_memory_bytes", "gauge",
			       "Virtual memory size in bytes.");
		value_or_inf(p->virtual_bytes);
		process_metric("resident_memory_bytes", "gauge",
			       "Resident memory size in bytes.");
		value_or_inf(p->resident_bytes);
	}
	if (p->has_start_time) {
		process_metric("start_time_seconds", "gauge",
			       "Start time of the process since unix epoch in seconds.");
		value_seconds(p->start_time_ns);
	}
}

/* With a state directory: the journal's syncs and the snapshots. */
static void print_storage(const struct scrape *x)
{
	const struct bwc_metrics *m = &x->m;
	const struct bwc_histogram *sync = &x->h[BWC_HISTOGRAM_JOURNAL_SYNC];
	const struct bwc_histogram *recs = &x->h[BWC_HISTOGRAM_JOURNAL_SYNC_RECORDS];

	one("storage_down", "gauge",
	    "1 while the state directory cannot be written.", m->storage_down);
	if (sync->bounds) {
		family("journal_sync_seconds", "histogram",
		       "Time each journal sync (fdatasync) took.");
		print_histogram(sync, "journal_sync_seconds", NULL);
	}
	if (recs->bounds) {
		family("journal_sync_records", "histogram",
		       "Journal syncs by the records each made durable; no _sum "
		       "(journal_records_total).");
		histogram("journal_sync_records", NULL, recs->bounds, recs->le_ns,
			  recs->bucket, recs->count, NO_SUM);
		one("journal_records_total", "counter",
		    "Journal records made durable by syncs.", recs->sum_ns);
	}
	one_seconds("journal_sync_last_seconds", "gauge",
		    "The last journal sync's time.", m->journal_sync_ns_last);
	one_seconds("journal_sync_max_seconds", "gauge",
		    "The longest journal sync's time since the start.",
		    m->journal_sync_ns_max);
	one("snapshots_total", "counter", "Snapshots written since the start.",
	    m->snapshots);
	one_seconds("snapshot_seconds_total", "counter",
		    "Time spent writing snapshots, fork to installed.",
		    m->snapshot_ns_total);
	one_seconds("snapshot_last_seconds", "gauge",
		    "The last snapshot's writing time.", m->snapshot_ns_last);
	if (m->has_snapshot)
		one_seconds("snapshot_age_seconds", "gauge",
			    "Age of the state in the last snapshot written.",
			    m->snapshot_age_ns);
}

static void print_daemon_metrics(const struct scrape *x)
{
	static const char *const kinds[BWC_REQUEST_KINDS] = {
		[0] = "other", [2] = "hello", [3] = "schedule", [4] = "cancel",
		[5] = "stats", [12] = "ack", [14] = "release", [15] = "touch",
	};
	const struct bwc_metrics *m = &x->m;
	uint64_t other = m->requests[0], unknown = m->errors[0];
	char label[64];

	print_lateness(m);
	print_delivery(x);
	print_failures(x);
	one("delivered_fires_total", "counter",
	    "Fired frames sent to consumers, redeliveries included.",
	    m->fires_delivered);
	one("fire_writes_total", "counter",
	    "Writes to connections that carried fires: consumers' wake-ups.",
	    m->fire_writes);
	one("coalesced_fires_total", "counter",
	    "Fires that shared a write with an earlier one: wake-ups saved.",
	    m->fires_coalesced);
	family("requests_total", "counter", "Requests read, by type.");
	for (size_t i = 1; i < BWC_REQUEST_KINDS; i++)
		if (kinds[i] == NULL)
			other += m->requests[i];
	for (size_t i = 0; i < BWC_REQUEST_KINDS; i++) {
		if (kinds[i] == NULL)
			continue;
		snprintf(label, sizeof(label), "{type=\"%s\"}", kinds[i]);
		sample("requests_total", label, i ? m->requests[i] : other);
	}
	sample("requests_total", "{type=\"list_sessions\"}", m->list_sessions_requests);
	sample("requests_total", "{type=\"list_timers\"}", m->list_timers_requests);
	family("errors_total", "counter",
	       "Error replies sent, refusals at accept included, by code.");
	for (int i = 1; i < BWC_ERROR_CODES; i++) {
		const char *name = bwc_server_error_name(i);

		if (strcmp(name, "UNKNOWN") == 0) {
			unknown += m->errors[i];
			continue;
		}
		snprintf(label, sizeof(label), "{code=\"%s\"}", name);
		sample("errors_total", label, m->errors[i]);
	}
	sample("errors_total", "{code=\"UNKNOWN\"}", unknown);
	one("connections_accepted_total", "counter", "Connections accepted.",
	    m->accepted);
	family("connections_refused_total", "counter",
	       "Connections refused at accept, by the limit reached.");
	sample("connections_refused_total", "{reason=\"max_clients\"}",
	       m->refused_max_clients);
	sample("connections_refused_total", "{reason=\"uid_budget\"}",
	       m->refused_uid_budget);
	sample("connections_refused_total", "{reason=\"memory\"}",
	       m->refused_memory);
	family("disconnects_total", "counter",
	       "Connections ended, by why: the client closed, the daemon "
	       "after a fatal error reply, unread output reached "
	       "max_output_bytes, no memory for output.");
	sample("disconnects_total", "{reason=\"closed\"}",
	       m->disconnects_closed);
	sample("disconnects_total", "{reason=\"error\"}", m->disconnects_error);
	sample("disconnects_total", "{reason=\"slow_consumer\"}",
	       m->slow_consumer_disconnects);
	sample("disconnects_total", "{reason=\"no_memory\"}",
	       m->disconnects_no_memory);
	one("storage", "gauge", "1 if the daemon keeps state (--state-dir).",
	    m->storage);
	if (m->storage)
		print_storage(x);
	print_process(&x->p);
}

#define LANE_OFF(f) offsetof(struct bwc_lane_stats, f)

/* One limit's sample: name is the bitwheeld option that sets it, without
 * its dashes and with _ for -; UINT64_MAX (a budget "unlimited") is +Inf.
 * The family, one per unit, is printed before. */
static void limit(const char *family_name, const char *name, uint64_t v)
{
	fprintf(mout, "bitwheel_%s{name=\"%s\"} ", family_name, name);
	value_or_inf(v);
}

/*
 * The daemon's limits as its Hello told this connection, by unit, so that
 * dashboards divide usage by them (bitwheel_clients by
 * bitwheel_limit{name="max_clients"}) without numbers of their own.  The
 * per-uid ones are the budgets of the uid bwctl runs as: root, exempt,
 * is told the defaults every uid without a --budgets rule has.
 */
static void print_limits(const struct bwc_limits *l)
{
	family("limit", "gauge",
	       "A bitwheeld limit on a count, named by its option.");
	limit("limit", "max_clients", l->max_clients);
	limit("limit", "max_timers", l->max_timers);
	limit("limit", "max_queued", l->max_queued);
	limit("limit", "max_window", l->max_window);
	limit("limit", "max_clients_per_uid", l->max_clients_per_uid);
	limit("limit", "max_sessions_per_uid", l->max_sessions_per_uid);
	limit("limit", "max_timers_per_uid", l->max_timers_per_uid);
	/* Fires that fail's, from a daemon that has them (max_kick is never
	 * 0 there); a default of 0 deliveries is unlimited: +Inf. */
	if (l->max_kick) {
		limit("limit", "max_deliveries", l->default_max_deliveries ?
			      l->default_max_deliveries : UINT64_MAX);
		limit("limit", "max_kick", l->max_kick);
	}
	family("limit_bytes", "gauge",
	       "A bitwheeld limit in bytes, named by its option.");
	limit("limit_bytes", "max_frame", l->max_frame_bytes);
	limit("limit_bytes", "max_payload", l->max_payload_bytes);
	limit("limit_bytes", "max_output", l->max_output_bytes);
	limit("limit_bytes", "max_bytes_per_uid", l->max_bytes_per_uid);
	if (l->max_journal_bytes_per_uid)
		limit("limit_bytes", "max_journal_per_uid",
		      l->max_journal_bytes_per_uid);
	limit("limit_bytes", "max_memory", l->max_memory_bytes);
	family("limit_seconds", "gauge",
	       "A bitwheeld limit on a time, named by its option.");
	sample_seconds("limit_seconds", "{name=\"linger\"}",
		       l->session_linger_ns);
	if (l->hello_timeout_ns)
		sample_seconds("limit_seconds", "{name=\"hello_timeout\"}",
			       l->hello_timeout_ns);
	if (l->max_kick) {
		sample_seconds("limit_seconds", "{name=\"max_release_delay\"}",
			       l->max_release_delay_ns);
		sample_seconds("limit_seconds", "{name=\"max_hold\"}",
			       l->max_hold_ns);
	}
	family("limit_hertz", "gauge",
	       "A bitwheeld limit on a rate, named by its option.");
	limit("limit_hertz", "max_periodic_rate_per_uid",
	      l->max_periodic_rate_per_uid);
}

static void print_metrics(const struct bwc_session_info *info,
			  const struct bwc_stats *st, const struct scrape *x)
{
	char label[32];

	if (!x->m.present)
		fprintf(mout, "# bitwheel: not root: figures are uid %u's "
			"alone, without the daemon-wide ones\n",
			(unsigned)geteuid());
	family("build_info", "gauge", "The daemon's release, as a label; 1.");
	fputs("bitwheel_build_info{version=", mout);
	label_value(info->daemon_version[0] ? info->daemon_version : "unknown");
	fputs("} 1\n", mout);
	one_seconds("uptime_seconds", "gauge", "Time since the daemon started.",
		    st->uptime_ns);
	one("clients", "gauge", "Connections now.", st->clients);
	one("consumers", "gauge", "Consumer connections now.", st->consumers);
	one("sessions", "gauge", "Named sessions, attached or not.",
	    st->sessions);
	one("queued_fires", "gauge", "Fires waiting in sessions' queues.",
	    st->queued);
	one("in_flight_fires", "gauge",
	    "Fires sent to consumers, not yet acknowledged.", st->in_flight);
	one("memory_bytes", "gauge",
	    "Bytes of timers, fires and unread output.", st->memory_bytes);
	one("acked_fires_total", "counter",
	    "Fires acknowledged, auto-ack included.", st->acked);
	one("redelivered_fires_total", "counter",
	    "Fires taken back to be sent again.", st->redelivered);
	one("dropped_fires_total", "counter",
	    "Periodic fires dropped at a session's queue limit.", st->dropped);
	one("expired_sessions_total", "counter",
	    "Named sessions dropped after their linger.", st->expired);
	lanes("timers_pending", "gauge", "Timers waiting now, by lane.", st,
	      LANE_OFF(pending));
	lanes("timers_overflow", "gauge",
	      "Of the pending timers, those in the lane's overflow store.",
	      st, LANE_OFF(overflow));
	lanes("timers_inserted_total", "counter", "Timers armed, by lane.",
	      st, LANE_OFF(inserted));
	lanes("timers_cancelled_total", "counter", "Timers cancelled, by lane.",
	      st, LANE_OFF(cancelled));
	lanes("fires_total", "counter", "Timers that fired, by lane.", st,
	      LANE_OFF(fired));
	lanes("timers_lost_total", "counter",
	      "Timers accepted but dropped by the wheel, by lane.", st,
	      LANE_OFF(lost));
	snprintf(label, sizeof(label), "{uid=\"%u\"}", (unsigned)geteuid());
	family("uid_connections", "gauge", "The caller's uid's connections.");
	sample("uid_connections", label, st->uid_connections);
	family("uid_sessions", "gauge", "The caller's uid's named sessions.");
	sample("uid_sessions", label, st->uid_sessions);
	family("uid_timers", "gauge",
	       "The caller's uid's pending timers and undelivered fires.");
	sample("uid_timers", label, st->uid_timers);
	family("uid_bytes", "gauge",
	       "The caller's uid's timers', fires' and output's bytes.");
	sample("uid_bytes", label, st->uid_bytes);
	family("uid_periodic_rate_hertz", "gauge",
	       "The caller's uid's periodic rate: the sum of 1/period.");
	fprintf(mout, "bitwheel_uid_periodic_rate_hertz%s %llu.%03llu\n", label,
		(unsigned long long)(st->uid_periodic_rate_mhz / 1000u),
		(unsigned long long)(st->uid_periodic_rate_mhz % 1000u));
	print_limits(&info->limits);
	if (x->m.present)
		print_daemon_metrics(x);
	fputs("# EOF\n", mout);
}

/*
 * --output's directory, opened as a directory without following a
 * symbolic link in its last component, into *dirfd; its file's name into
 * *base (a pointer into path).  Trusted as the daemon trusts its socket's
 * and its state's directories: owned by root or the caller, and writable
 * by nobody else unless sticky.  Otherwise root, writing node_exporter's
 * file, would create it wherever a link points, or in a directory where
 * another user can swap it.  ST_OK, or the problem's status (said).
 */
static int open_output_dir(const char *path, int *dirfd, const char **base)
{
	static const struct problem untrusted = {
		.status = ST_ERROR, .code = "OUTPUT_ERROR",
		.hint = "write into a directory that only root or you can change, "
			"named without a symbolic link at its end",
	};
	const char *slash = strrchr(path, '/');
	char dir[4096];
	struct stat st;
	int fd;

	*base = slash ? slash + 1 : path;
	if (!**base || !strcmp(*base, ".") || !strcmp(*base, ".."))
		return usage_error("metrics", "--output %s: names a directory, not a file",
				   path);
	if ((size_t)snprintf(dir, sizeof(dir), "%.*s",
			     slash ? (int)(slash == path ? 1 : slash - path) : 1,
			     slash ? path : ".") >= sizeof(dir))
		return usage_error("metrics", "--output %s: name too long", path);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		int err = errno;

		if (fd >= 0)
			close(fd);
		/* O_DIRECTORY | O_NOFOLLOW on a link: ENOTDIR (ELOOP
		 * without O_DIRECTORY). */
		if ((err == ELOOP || err == ENOTDIR) && lstat(dir, &st) == 0 &&
		    S_ISLNK(st.st_mode))
			return complain(&untrusted, "--output %s: its directory %s is a symbolic link",
					path, dir);
		return complain(&(struct problem){ .status = ST_ERROR,
						   .code = "OUTPUT_ERROR",
						   .hint = "the file is left as it was" },
				"--output %s: its directory %s: %s", path, dir,
				err == ENOTDIR ? "not a directory" : strerror(err));
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		close(fd);
		return complain(&untrusted, "--output %s: its directory %s is owned by uid %u, not by root or you (uid %u)",
				path, dir, (unsigned)st.st_uid, (unsigned)geteuid());
	}
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX)) {
		close(fd);
		return complain(&untrusted, "--output %s: its directory %s is writable by %s (mode %04o)",
				path, dir, st.st_mode & 002 ? "others" : "its group",
				(unsigned)(st.st_mode & 07777));
	}
	*dirfd = fd;
	return ST_OK;
}

/* A new file base.tmp.XXXXXX in dirfd (O_EXCL, not following a link),
 * its suffix (".tmp.XXXXXX") into sfx; -1 with errno. */
static int create_temp(int dirfd, const char *base, char sfx[static 12])
{
	static const char chars[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	char name[4096];

	for (int tries = 0; tries < 100; tries++) {
		uint8_t r[6];
		int fd;

		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return -1;
		memcpy(sfx, ".tmp.", 5);
		for (int i = 0; i < 6; i++)
			sfx[5 + i] = chars[r[i] % (sizeof(chars) - 1)];
		sfx[11] = '\0';
		if ((size_t)snprintf(name, sizeof(name), "%s%s", base, sfx) >=
		    sizeof(name)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
			    O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

/*
 * --output: the exposition written to a temporary file beside path
 * (path.tmp.XXXXXX: not *.prom, so node_exporter's textfile collector
 * never reads it half written), made readable by all (the collector runs
 * as another user), and renamed over path: a reader sees the old file
 * or the new one, whole.  Every step is relative to the directory
 * open_output_dir() checked.
 */
static int write_output(const char *path, const struct bwc_session_info *info,
			const struct bwc_stats *st, const struct scrape *x)
{
	char sfx[12] = ".tmp.XXXXXX", tmp[4096 + 12];
	const char *what = "creating", *base;
	FILE *f = NULL;
	int fd = -1, dirfd = -1, err = open_output_dir(path, &dirfd, &base);

	if (err != ST_OK)
		return err;
	if ((fd = create_temp(dirfd, base, sfx)) < 0)
		goto fail;
	what = "writing";
	if (fchmod(fd, 0644) != 0 || !(f = fdopen(fd, "w")))
		goto fail;
	fd = -1;
	mout = f;
	print_metrics(info, st, x);
	mout = stdout;
	if (fflush(f) != 0 || ferror(f))
		goto fail;
	err = fclose(f);
	f = NULL;
	if (err != 0)
		goto fail;
	what = "renaming onto";
	snprintf(tmp, sizeof(tmp), "%s%s", base, sfx);
	if (renameat(dirfd, tmp, dirfd, base) != 0)
		goto fail;
	close(dirfd);
	return ST_OK;
fail:
	err = errno;
	mout = stdout;
	if (f)
		fclose(f);
	if (fd >= 0)
		close(fd);
	snprintf(tmp, sizeof(tmp), "%s%s", base, sfx);
	if (strcmp(what, "creating") != 0)
		unlinkat(dirfd, tmp, 0);
	close(dirfd);
	snprintf(tmp, sizeof(tmp), "%s%s", path, sfx);
	return complain(&(struct problem){ .status = ST_ERROR,
					   .code = "OUTPUT_ERROR",
					   .hint = "the file is left as it was" },
			"%s %s: %s", what,
			strcmp(what, "renaming onto") == 0 ? path : tmp,
			strerror(err));
}

/* ---- sessions, list ------------------------------------------------- */

/*
 * The options sessions and list share: --session (list), --owner,
 * --limit (list), --json; then an anonymous connection (*c).
 */
static int list_open(const char *cmd, const char *help, int argc, char **argv,
		     const char **session, uint64_t *limit,
		     struct bwc_client **c)
{
	static const struct option opts[] = {
		{ "session", required_argument, NULL, 's' },
		{ "limit", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ "owner", required_argument, NULL, 'O' },
		{ "socket", required_argument, NULL, 'S' },
		{ "daemon-user", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct conn_opts co = producer(NULL);
	int o, rc;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 's':
		case 'l':
			if (session == NULL)
				return usage_error(cmd, "--%s is for 'bwctl list'",
						   o == 's' ? "session" : "limit");
			if (o == 's')
				*session = optarg;
			else if (!parse_u64(optarg, limit) || *limit == 0 ||
				 *limit > 10000000)
				return usage_error(cmd, "bad --limit '%s': 1 to "
						   "10000000", optarg);
			break;
		default:
			if ((rc = common_option(cmd, help, argv, o)) != ST_OK)
				return rc;
		}
	}
	if ((rc = leftover(cmd, argc, argv)) != ST_OK)
		return rc;
	if (session != NULL && *session == NULL)
		return usage_error(cmd, "--session is required");
	return open_client(&co, c);
}

static int cmp_session(const void *a, const void *b)
{
	const struct bwc_session_entry *x = a, *y = b;

	if (x->owner_uid != y->owner_uid)
		return x->owner_uid < y->owner_uid ? -1 : 1;
	if (x->anonymous != y->anonymous)
		return x->anonymous ? 1 : -1;
	if (x->anonymous)
		return x->pid < y->pid ? -1 : x->pid > y->pid;
	return strcmp(x->name, y->name);
}

/* A policy's limit for people: "20", "unlimited". */
static const char *fmt_max_deliveries(uint32_t max, char *buf, size_t len)
{
	if (max == 0)
		snprintf(buf, len, "unlimited");
	else
		snprintf(buf, len, "%u", max);
	return buf;
}

/* A named session's policy into a JSON object. */
static void jw_policy(struct jw *j, const struct bwc_policy *p)
{
	jw_u64(j, "max_deliveries", p->max_deliveries);
	if (p->has_dead_letter)
		jw_str(j, "dead_letter", p->dead_letter);
	jw_bool(j, "policy_set", p->is_explicit);
}

static void print_session(const struct bwc_session_entry *e)
{
	char idle[48] = "-", expires[48] = "-", name[96], max[16] = "-";
	const char *dl = "-";

	if (json_mode) {
		struct jw j;

		jw_open(&j, stdout);
		jw_u64(&j, "uid", e->owner_uid);
		if (e->anonymous) {
			jw_bool(&j, "anonymous", true);
			jw_u64(&j, "pid", e->pid);
		} else {
			jw_str(&j, "session", e->name);
		}
		jw_u64(&j, "timers", e->timers);
		jw_u64(&j, "queued", e->queued);
		jw_u64(&j, "in_flight", e->in_flight);
		jw_u64(&j, "consumers", e->consumers);
		jw_u64(&j, "producers", e->producers);
		jw_u64(&j, "dropped", e->dropped);
		jw_u64(&j, "idle_ns", e->idle_ns);
		if (e->expires)
			jw_u64(&j, "expires_in_ns", e->expires_in_ns);
		jw_u64(&j, "delayed", e->delayed);
		jw_u64(&j, "dead_letters", e->dead_letters);
		jw_u64(&j, "dead_lettered", e->dead_lettered);
		if (!e->anonymous)
			jw_policy(&j, &e->policy);
		jw_close(&j);
		return;
	}
	if (e->anonymous)
		snprintf(name, sizeof(name), "- (anonymous, pid %u)", e->pid);
	else
		snprintf(name, sizeof(name), "%s", e->name);
	if (e->consumers + e->producers == 0)
		fmt_duration(e->idle_ns, idle, sizeof(idle));
	if (e->expires)
		fmt_duration(e->expires_in_ns, expires, sizeof(expires));
	if (!e->anonymous) {
		fmt_max_deliveries(e->policy.max_deliveries, max, sizeof(max));
		dl = e->policy.has_dead_letter ? e->policy.dead_letter : "none";
	}
	printf("%-6u %-24s %8llu %8llu %9llu %7llu %6llu %5u %5u %12s %12s "
	       "%9s %s\n", e->owner_uid, name, (unsigned long long)e->timers,
	       (unsigned long long)e->queued, (unsigned long long)e->in_flight,
	       (unsigned long long)e->delayed,
	       (unsigned long long)e->dead_letters, e->consumers,
	       e->producers, idle, expires, max, dl);
}

/* Every session the caller may see (owner_uid's, if set) into *out (the
 * caller frees it), *n of them. */
static int fetch_sessions(struct bwc_client *c, struct bwc_session_entry **out,
			  size_t *n)
{
	struct bwc_session_entry *e = NULL;
	struct bwc_listing l = { .more = true };
	size_t max = 256;
	int rc = ST_OK;

	*n = 0;
	/* Sessions are few (per-uid budgets bound them): a bigger array
	 * until one holds them all. */
	while (rc == ST_OK && l.more) {
		struct bwc_session_entry *more = realloc(e, max * sizeof(*e));

		if (more == NULL) {
			rc = complain(&(struct problem){ .status = ST_ERROR,
							 .code = "OUT_OF_MEMORY" },
				      "out of memory for %zu sessions", max);
			break;
		}
		e = more;
		rc = bwc_list_sessions(c, owner_uid, e, max, n, &l);
		if (rc != 0)
			rc = report(c, rc);
		max *= 4;
	}
	*out = e;
	return rc;
}

static int cmd_sessions(int argc, char **argv)
{
	struct bwc_session_entry *e = NULL;
	struct bwc_client *c;
	size_t n = 0;
	int rc = list_open("sessions", help_sessions, argc, argv, NULL, NULL, &c);

	if (rc != ST_OK)
		return rc == ST_HELP ? ST_OK : rc;
	rc = fetch_sessions(c, &e, &n);
	bwc_free(c);
	if (rc == ST_OK) {
		qsort(e, n, sizeof(*e), cmp_session);
		if (!json_mode)
			printf("%-6s %-24s %8s %8s %9s %7s %6s %5s %5s %12s "
			       "%12s %9s %s\n", "UID", "SESSION", "TIMERS",
			       "QUEUED", "IN_FLIGHT", "DELAYED", "DEAD", "CONS",
			       "PROD", "IDLE", "EXPIRES_IN", "MAX_DELIV",
			       "DEAD_LETTER_TO");
		for (size_t i = 0; i < n; i++)
			print_session(&e[i]);
	}
	free(e);
	return rc;
}

/* ---- policy, kick ------------------------------------------------------- */

/* A session's policy: "policy session=NAME max_deliveries=20
 * dead_letter=NAME.dead set=no", or one JSON object. */
static void print_policy(const char *session, const struct bwc_policy *p)
{
	char max[16];

	if (json_mode) {
		struct jw j;

		jw_open(&j, stdout);
		jw_str(&j, "session", session);
		jw_policy(&j, p);
		jw_close(&j);
		return;
	}
	printf("policy session=%s max_deliveries=%s dead_letter=%s set=%s\n",
	       session, fmt_max_deliveries(p->max_deliveries, max, sizeof(max)),
	       p->has_dead_letter ? p->dead_letter : "none",
	       p->is_explicit ? "yes" : "no (the defaults)");
}

/*
 * The policy of a session that exists, from the listing, so that looking
 * creates nothing (a Hello would): ST_NOTFOUND when there is none.
 */
static int show_policy(const char *cmd, const char *session)
{
	struct bwc_session_entry *e = NULL;
	struct bwc_client *c;
	struct conn_opts co = producer(NULL);
	int64_t uid = owner_uid >= 0 ? owner_uid : (int64_t)geteuid();
	size_t n = 0, i;
	int rc;

	/* The listing is of an anonymous connection: --owner names whose. */
	owner_uid = uid;
	if ((rc = open_client(&co, &c)) != ST_OK)
		return rc;
	rc = fetch_sessions(c, &e, &n);
	bwc_free(c);
	for (i = 0; rc == ST_OK && i < n; i++)
		if (!e[i].anonymous && strcmp(e[i].name, session) == 0)
			break;
	if (rc == ST_OK && i < n)
		print_policy(session, &e[i].policy);
	else if (rc == ST_OK)
		rc = complain(&(struct problem){ .status = ST_NOTFOUND,
						 .code = "UNKNOWN_SESSION" },
			      "%s: uid %lld has no session '%s'", cmd,
			      (long long)uid, session);
	free(e);
	return rc;
}

static int cmd_policy(int argc, char **argv)
{
	static const char cmd[] = "policy";
	static const struct option opts[] = {
		{ "session", required_argument, NULL, 's' },
		{ "max-deliveries", required_argument, NULL, 'm' },
		{ "dead-letter", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "owner", required_argument, NULL, 'O' },
		{ "socket", required_argument, NULL, 'S' },
		{ "daemon-user", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *session = NULL, *dead_letter = NULL;
	int64_t max = BWC_POLICY_KEEP;
	struct bwc_policy p;
	struct bwc_client *c;
	uint64_t v;
	int o, rc;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			session = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "unlimited") == 0)
				v = 0;
			else if (!parse_u64(optarg, &v) || v == 0 ||
				 v > UINT32_MAX)
				return usage_error(cmd, "bad --max-deliveries "
						   "'%s': 1 to %u, or "
						   "'unlimited'", optarg,
						   UINT32_MAX);
			max = (int64_t)v;
			break;
		case 'd':
			dead_letter = optarg;
			break;
		default:
			if ((rc = common_option(cmd, help_policy, argv, o)) != ST_OK)
				return rc == ST_HELP ? ST_OK : rc;
		}
	}
	if ((rc = session_arg(cmd, argc, argv, &session)) != ST_OK)
		return rc;
	if (session == NULL)
		return usage_error(cmd, "a session is required (SESSION or "
				   "--session NAME)");
	if (max == BWC_POLICY_KEEP && dead_letter == NULL)
		return show_policy(cmd, session);

	if ((rc = open_client(&(struct conn_opts){
				      .session = session,
				      .role = BWC_ROLE_PRODUCER },
			      &c)) != ST_OK)
		return rc;
	rc = bwc_set_policy(c, max, dead_letter, &p);
	if (rc != 0)
		rc = report(c, rc);
	else
		print_policy(session, &p);
	bwc_free(c);
	return rc;
}

static int cmd_kick(int argc, char **argv)
{
	static const char cmd[] = "kick";
	static const struct option opts[] = {
		{ "session", required_argument, NULL, 's' },
		{ "key", required_argument, NULL, 'k' },
		{ "limit", required_argument, NULL, 'l' },
		{ "json", no_argument, NULL, 'j' },
		{ "owner", required_argument, NULL, 'O' },
		{ "socket", required_argument, NULL, 'S' },
		{ "daemon-user", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *session = NULL;
	uint64_t key = 0, limit = 0, total = 0, kicked;
	bool has_key = false, more = true;
	struct bwc_client *c;
	int o, rc;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			session = optarg;
			break;
		case 'k':
			if (!parse_u64(optarg, &key))
				return usage_error(cmd, "bad --key '%s': a number "
						   "from 0 to 2^64-1", optarg);
			has_key = true;
			break;
		case 'l':
			if (!parse_u64(optarg, &limit) || limit == 0)
				return usage_error(cmd, "bad --limit '%s': a "
						   "number above zero", optarg);
			break;
		default:
			if ((rc = common_option(cmd, help_kick, argv, o)) != ST_OK)
				return rc == ST_HELP ? ST_OK : rc;
		}
	}
	if ((rc = session_arg(cmd, argc, argv, &session)) != ST_OK)
		return rc;
	if (session == NULL)
		return usage_error(cmd, "a session is required (SESSION or "
				   "--session NAME): the one whose dead letters "
				   "to move back");

	if ((rc = open_client(&(struct conn_opts){
				      .session = session,
				      .role = BWC_ROLE_PRODUCER },
			      &c)) != ST_OK)
		return rc;
	/* Each Kick moves at most the daemon's max_kick: again while it
	 * says more, up to --limit.  One that moved nothing stops: more
	 * then means max_kick dead letters of other keys or sessions come
	 * first, and asking again would look at the same ones. */
	while (more && (limit == 0 || total < limit)) {
		uint64_t room = limit ? limit - total : 0;

		rc = bwc_kick(c, has_key, key,
			      room > UINT32_MAX ? UINT32_MAX : (uint32_t)room,
			      &kicked, &more);
		if (rc != 0) {
			rc = report(c, rc);
			bwc_free(c);
			return rc;
		}
		total += kicked;
		if (kicked == 0)
			break;
	}
	bwc_free(c);
	if (more && (limit == 0 || total < limit))
		warn("KICK_STOPPED", "the first dead letters of the dead-letter "
		     "session are none of %s%s's: %llu moved, and more may "
		     "be there (consume or kick those first)",
		     has_key ? "this key of " : "", session,
		     (unsigned long long)total);
	if (json_mode) {
		struct jw j;

		jw_open(&j, stdout);
		jw_str(&j, "session", session);
		if (has_key)
			jw_u64(&j, "key", key);
		jw_u64(&j, "kicked", total);
		jw_bool(&j, "more", more);
		jw_close(&j);
	} else {
		printf("kicked %llu%s\n", (unsigned long long)total,
		       more && limit && total >= limit ?
			       " (more left: --limit reached)" : "");
	}
	return ST_OK;
}

static int cmp_deadline(const void *a, const void *b)
{
	const struct bwc_timer_entry *x = a, *y = b;

	if (x->deadline_ns != y->deadline_ns)
		return x->deadline_ns < y->deadline_ns ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key;
}

static void print_timer(const struct bwc_timer_entry *e,
			const struct bwc_listing *l)
{
	uint64_t left = e->deadline_ns > l->now_ns ? e->deadline_ns - l->now_ns : 0;
	/* A wall-clock timer's own instant; else the monotonic deadline
	 * read on the wall clock of the listing's moment. */
	uint64_t wall = e->deadline_realtime_ns ? e->deadline_realtime_ns :
		l->realtime_ns + left -
		(e->deadline_ns < l->now_ns ? l->now_ns - e->deadline_ns : 0);
	char when[64], in[48], period[48] = "-", size[16] = "-";

	if (json_mode) {
		struct jw j;

		jw_open(&j, stdout);
		jw_u64(&j, "key", e->key);
		jw_u64(&j, "deadline_ns", e->deadline_ns);
		jw_u64(&j, "deadline_unix_ns", wall);
		jw_str(&j, "clock", e->deadline_realtime_ns ? "realtime" :
		       e->clock == BWC_CLOCK_BOOTTIME ? "boottime" : "monotonic");
		jw_u64(&j, "remaining_ns", left);
		jw_u64(&j, "period_ns", e->period_ns);
		jw_u64(&j, "payload_bytes", e->payload_len);
		jw_bool(&j, "has_payload", e->has_payload);
		jw_str(&j, "lane", e->periodic_lane ? "periodic" : "oneshot");
		if (e->period_ns > 0 || e->calendar[0])
			jw_u64(&j, "fire_count", e->fire_count);
		if (e->late)
			jw_bool(&j, "late", true);
		if (e->calendar[0]) {
			jw_str(&j, "calendar", e->calendar);
			jw_u64(&j, "jitter_ns", e->jitter_ns);
			jw_bool(&j, "jitter_fixed", e->jitter_fixed);
			if (e->has_misfire_grace)
				jw_u64(&j, "misfire_grace_ns", e->misfire_grace_ns);
		}
		jw_close(&j);
		return;
	}
	if (e->period_ns > 0)
		fmt_duration(e->period_ns, period, sizeof(period));
	if (e->calendar[0])
		snprintf(period, sizeof(period), "calendar");
	if (e->has_payload)
		snprintf(size, sizeof(size), "%u", e->payload_len);
	printf("%-20llu %-31s %12s %12s %8s %s",
	       (unsigned long long)e->key, fmt_wall(wall, when, sizeof(when)),
	       left ? fmt_duration(left, in, sizeof(in)) : "due", period, size,
	       e->periodic_lane ? "periodic" : "oneshot");
	if (e->clock == BWC_CLOCK_BOOTTIME)
		printf("  clock=boottime");
	if (e->calendar[0]) {
		printf("  %s", e->calendar);
		if (e->jitter_ns)
			printf(" jitter=%s%s", fmt_duration(e->jitter_ns, in, sizeof(in)),
			       e->jitter_fixed ? " fixed" : "");
		if (e->has_misfire_grace)
			printf(" misfire-grace=%s",
			       fmt_duration(e->misfire_grace_ns, in, sizeof(in)));
	}
	putchar('\n');
}

static int cmd_list(int argc, char **argv)
{
	static const char cmd[] = "list";
	struct bwc_timer_entry *e = NULL;
	struct bwc_listing l = { .more = true };
	struct bwc_client *c;
	const char *session = NULL;
	uint64_t limit = 100, max = 1000;
	size_t n = 0;
	int rc = list_open(cmd, help_list, argc, argv, &session, &limit, &c);

	if (rc != ST_OK)
		return rc == ST_HELP ? ST_OK : rc;
	/* The daemon lists in its hash table's order, not by deadline: the
	 * soonest --limit are found among them all.  Room for a page, then,
	 * while the session holds more, for as many as it said it holds: a session's timers are bounded by its uid's budget
	 * (226,719 by default: some 25 MB here for a moment). */
	while (rc == ST_OK && l.more) {
		struct bwc_timer_entry *more;

		if (!(more = realloc(e, (size_t)max * sizeof(*e)))) {
			rc = complain(&(struct problem){ .status = ST_ERROR,
							 .code = "OUT_OF_MEMORY" },
				      "out of memory for %llu timers",
				      (unsigned long long)max);
			break;
		}
		e = more;
		rc = bwc_list_timers(c, session, owner_uid, e, (size_t)max, &n, &l);
		if (rc != 0)
			rc = report(c, rc);
		if (n < max)
			break;
		max = l.total > max ? l.total + l.total / 8 : max * 2;
	}
	bwc_free(c);
	if (rc == ST_OK) {
		qsort(e, n, sizeof(*e), cmp_deadline);
		if (!json_mode)
			printf("%-20s %-31s %12s %12s %8s %s\n", "KEY",
			       "DEADLINE", "IN", "PERIOD", "PAYLOAD", "LANE");
		for (size_t i = 0; i < n && i < limit; i++)
			print_timer(&e[i], &l);
		if (n > limit)
			warn("TRUNCATED", "session '%s' holds %zu timers; these "
			     "are the soonest %llu (--limit)", session, n,
			     (unsigned long long)limit);
	}
	free(e);
	return rc;
}

static int cmd_metrics(int argc, char **argv)
{
	struct bwc_session_info info;
	struct bwc_stats st;
	static struct scrape x;
	int rc = fetch_stats("metrics", help_metrics, argc, argv, false, &info,
			     &st, &x);

	if (rc != ST_OK)
		return rc == ST_HELP ? ST_OK : rc;
	if (x.output != NULL)
		return write_output(x.output, &info, &st, &x);
	mout = stdout;
	print_metrics(&info, &st, &x);
	return ST_OK;
}

/* ---- calendar ------------------------------------------------------------ */

/* t (UTC ns) as systemd prints a timestamp, "Thu 2026-12-03 09:00:00 CET",
 * in the local zone, or in UTC. */
static const char *fmt_timestamp(uint64_t t, bool utc, char *buf, size_t len)
{
	time_t s = (time_t)(t / 1000000000u);
	struct tm tm;

	if ((utc ? gmtime_r(&s, &tm) : localtime_r(&s, &tm)) == NULL ||
	    strftime(buf, len, utc ? "%a %Y-%m-%d %H:%M:%S UTC" :
		     "%a %Y-%m-%d %H:%M:%S %Z", &tm) == 0)
		snprintf(buf, len, "@%llu", (unsigned long long)(t / 1000000000u));
	return buf;
}

/* How far t (UTC ns) is from now, in systemd's words: "1 day 21h left",
 * "4min 4s ago" (format_timestamp_relative(), systemd 252). */
static const char *fmt_relative(uint64_t t, uint64_t now, char *buf, size_t len)
{
	const unsigned long long S = 1000000000ull, MIN = 60 * S, H = 60 * MIN,
		D = 24 * H, W = 7 * D, MON = 2629800 * S, Y = 31557600 * S;
	unsigned long long d = now > t ? now - t : t - now;
	const char *sfx = now > t ? " ago" : " left";

	if (d >= Y)
		snprintf(buf, len, "%llu %s %llu %s%s", d / Y, d / Y == 1 ? "year" : "years",
			 d % Y / MON, d % Y / MON == 1 ? "month" : "months", sfx);
	else if (d >= MON)
		snprintf(buf, len, "%llu %s %llu %s%s", d / MON, d / MON == 1 ? "month" : "months",
			 d % MON / D, d % MON / D == 1 ? "day" : "days", sfx);
	else if (d >= W)
		snprintf(buf, len, "%llu %s %llu %s%s", d / W, d / W == 1 ? "week" : "weeks",
			 d % W / D, d % W / D == 1 ? "day" : "days", sfx);
	else if (d >= 2 * D)
		snprintf(buf, len, "%llu days%s", d / D, sfx);
	else if (d >= 25 * H)
		snprintf(buf, len, "1 day %lluh%s", (d - D) / H, sfx);
	else if (d >= 6 * H)
		snprintf(buf, len, "%lluh%s", d / H, sfx);
	else if (d >= H)
		snprintf(buf, len, "%lluh %llumin%s", d / H, d % H / MIN, sfx);
	else if (d >= 5 * MIN)
		snprintf(buf, len, "%llumin%s", d / MIN, sfx);
	else if (d >= MIN)
		snprintf(buf, len, "%llumin %llus%s", d / MIN, d % MIN / S, sfx);
	else if (d >= S)
		snprintf(buf, len, "%llus%s", d / S, sfx);
	else if (d >= 1000000)
		snprintf(buf, len, "%llums%s", d / 1000000, sfx);
	else if (d >= 1000)
		snprintf(buf, len, "%lluus%s", d / 1000, sfx);
	else
		snprintf(buf, len, "now");
	return buf;
}

/* One spec's answer, as systemd-analyze calendar lays it out. */
static void print_calendar(const char *spec, const struct bwc_calendar *cal,
			   bool first)
{
	char label[32], when[64], rel[64];
	struct timespec ts;
	uint64_t now;
	bool local_utc;

	if (json_mode) {
		struct jw j;

		jw_open(&j, stdout);
		jw_str(&j, "spec", spec);
		jw_str(&j, "normalized", cal->normalized);
		jw_str(&j, "zone", cal->zone);
		jw_u64(&j, "base_realtime_ns", cal->base_realtime_ns);
		jw_u64s(&j, "elapses_realtime_ns", cal->elapses_realtime_ns,
			cal->n_elapses);
		if (cal->gave_up)
			jw_bool(&j, "gave_up", true);
		jw_close(&j);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	tzset();
	local_utc = timezone == 0 && daylight == 0;
	if (!first)
		putchar('\n');
	if (strcmp(spec, cal->normalized) != 0)
		printf("  Original form: %s\n", spec);
	printf("Normalized form: %s\n", cal->normalized);
	if (cal->n_elapses == 0 && !cal->gave_up)
		printf("    Next elapse: never\n");
	for (size_t i = 0; i < cal->n_elapses; i++) {
		uint64_t t = cal->elapses_realtime_ns[i];

		if (i == 0)
			snprintf(label, sizeof(label), "Next elapse");
		else
			snprintf(label, sizeof(label), "Iter. #%zu", i + 1);
		printf("%15s: %s\n", label, fmt_timestamp(t, false, when, sizeof(when)));
		if (!local_utc)
			printf("       (in UTC): %s\n", fmt_timestamp(t, true, when, sizeof(when)));
		printf("       From now: %s\n", fmt_relative(t, now, rel, sizeof(rel)));
	}
}

static int cmd_calendar(int argc, char **argv)
{
	static const char cmd[] = "calendar";
	static const struct option opts[] = {
		{ "iterations", required_argument, NULL, 'n' },
		{ "base-time", required_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 'S' },
		{ "daemon-user", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t iterations = 1, base = 0;
	struct bwc_calendar *cal;
	struct bwc_client *c;
	const char *why;
	int o, rc = ST_OK;

	optind = 0;
	while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (o) {
		case 'n':
			if (!parse_u64(optarg, &iterations) || iterations == 0 ||
			    iterations > BWC_CALENDAR_ITERATIONS_MAX)
				return usage_error(cmd, "bad --iterations '%s': 1 "
						   "to %d", optarg,
						   BWC_CALENDAR_ITERATIONS_MAX);
			break;
		case 'b':
			if (!parse_at(optarg, &base, &why))
				return usage_error(cmd, "bad --base-time '%s': %s",
						   optarg, why);
			break;
		default:
			if ((rc = common_option(cmd, help_calendar, argv, o)) != ST_OK)
				return rc == ST_HELP ? ST_OK : rc;
		}
	}
	if (optind >= argc)
		return usage_error(cmd, "a calendar event SPEC is required "
				   "(e.g. 'Mon..Fri 09:00')");
	if ((rc = open_client(&(struct conn_opts){ .role = BWC_ROLE_DEFAULT },
			      &c)) != ST_OK)
		return rc;
	for (int i = optind; i < argc && rc == ST_OK; i++) {
		const char *spec = argv[i];

		if ((rc = bwc_calendar(c, spec, (uint32_t)iterations, base,
				       &cal)) != 0) {
			rc = report(c, rc);
			break;
		}
		print_calendar(spec, cal, i == optind);
		if (cal->gave_up)
			rc = complain(&(struct problem){ .status = ST_ERROR,
							 .code = "GAVE_UP" },
				      "the search for elapse #%zu of '%s' gave "
				      "up, as systemd's does (its bound of "
				      "1000 rounds)", cal->n_elapses + 1, spec);
		bwc_calendar_free(cal);
	}
	bwc_free(c);
	return rc;
}

/* ---- main --------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
} commands[] = {
	{ "schedule", cmd_schedule, help_schedule },
	{ "cancel", cmd_cancel, help_cancel },
	{ "watch", cmd_watch, help_watch },
	{ "stats", cmd_stats, help_stats },
	{ "metrics", cmd_metrics, help_metrics },
	{ "sessions", cmd_sessions, help_sessions },
	{ "list", cmd_list, help_list },
	{ "policy", cmd_policy, help_policy },
	{ "kick", cmd_kick, help_kick },
	{ "calendar", cmd_calendar, help_calendar },
};

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 'S' },
		{ "daemon-user", required_argument, NULL, 'D' },
		{ "owner", required_argument, NULL, 'O' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *name;
	size_t i;
	int o, rc;

	/* --json (or a prefix getopt_long would take for it) anywhere before
	 * "--": a usage error met before it is JSON too. */
	for (i = 1; i < (size_t)argc && strcmp(argv[i], "--") != 0; i++)
		if (strlen(argv[i]) >= 3 &&
		    strncmp(argv[i], "--json", strlen(argv[i])) == 0)
			json_mode = true;
	/* "+": stop at the command, whose options are its own. */
	while ((o = getopt_long(argc, argv, "+:hV", opts, NULL)) != -1) {
		switch (o) {
		case 'V':
			printf("bwctl (bitwheel) %s, libbitwheel-client %s\n",
			       PACKAGE_VERSION, bwc_version());
			return ST_OK;
		default:
			if ((rc = common_option(NULL, help_main, argv, o)) != ST_OK)
				return rc == ST_HELP ? ST_OK : rc;
		}
	}
	if (optind >= argc)
		return usage_error(NULL, "no command given");
	name = argv[optind];
	if (socket_path == NULL)
		socket_path = bwc_default_socket();

	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(name, commands[i].name) != 0)
			continue;
		rc = commands[i].run(argc - optind, argv + optind);
		if (!flush_out())
			return output_error(NULL);
		return rc;
	}
	if (strcmp(name, "help") == 0) {
		const char *topic = optind + 1 < argc ? argv[optind + 1] : NULL;

		for (i = 0; topic && i < sizeof(commands) / sizeof(commands[0]);
		     i++)
			if (strcmp(topic, commands[i].name) == 0) {
				fputs(commands[i].help, stdout);
				return ST_OK;
			}
		if (topic != NULL)
			return usage_error(NULL, "no help for '%s'", topic);
		fputs(help_main, stdout);
		return ST_OK;
	}
	return usage_error(NULL, "unknown command '%s'", name);
}
