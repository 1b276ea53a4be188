/*
 * log.c - bitwheeld's log: one line per message on stderr.
 *
 * How a line starts depends on where stderr goes, settled at the first
 * line: to journald (JOURNAL_STREAM names stderr's device and inode,
 * systemd.exec(5)) "<4>" alone, the syslog level that journald turns into
 * the entry's priority (sd-daemon(3)), since journald tags the entry with
 * the program itself; to a terminal "bitwheeld: " alone, for people; to
 * anything else (a pipe, a file, another supervisor) both, "<4>bitwheeld:
 * ".  Debug lines appear only with --verbose; the fuzzer shows errors
 * only.
 *
 * Lines a client can cause (bwd_log_client) are rate-limited per kind and
 * per uid, so that one user cannot flood the log: each kind has a table
 * of RATELIMIT_SLOTS windows, a uid's found by a hash of the uid (uids
 * that share a slot share its budget: letting one reset the other's
 * window would let two uids taking turns through without limit).  A
 * window lets RATELIMIT_BURST lines through per second and counts the
 * rest; the first line after it says how many were suppressed, naming the
 * uid held back last.  O(1) a line.
 *
 * bwd_mode_name: what a line calls a file by its mode (the state
 * directory's, the socket's and the budget file's checks).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon-internal.h"

static enum bwd_log_level shown = BWD_LOG_INFO;

void bwd_log_set_level(enum bwd_log_level max)
{
	shown = max;
}

enum form { FORM_UNSET, FORM_JOURNAL, FORM_TERMINAL, FORM_BOTH };

static enum form form_of_stderr(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (js != NULL && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	    fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino)
		return FORM_JOURNAL;
	return isatty(STDERR_FILENO) ? FORM_TERMINAL : FORM_BOTH;
}

static void vlog(enum bwd_log_level level, const char *fmt, va_list ap)
{
	static enum form form = FORM_UNSET;
	char line[1024];

	if (form == FORM_UNSET)
		form = form_of_stderr();
	vsnprintf(line, sizeof(line), fmt, ap);
	/* One write per line, so lines from a crash or a restart never mix. */
	if (form == FORM_JOURNAL)
		fprintf(stderr, "<%d>%s\n", (int)level, line);
	else if (form == FORM_TERMINAL)
		fprintf(stderr, "bitwheeld: %s\n", line);
	else
		fprintf(stderr, "<%d>bitwheeld: %s\n", (int)level, line);
}

const char *bwd_mode_name(mode_t m)
{
	return S_ISREG(m) ? "regular file" : S_ISDIR(m) ? "directory" :
	       S_ISLNK(m) ? "symbolic link" : S_ISFIFO(m) ? "FIFO" :
	       S_ISSOCK(m) ? "socket" : S_ISCHR(m) || S_ISBLK(m) ? "device" :
	       "special file";
}

void bwd_log(enum bwd_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > shown)
		return;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

bool bwd_ratelimit_allow(struct bwd_ratelimit *rl, uid_t uid, uint64_t now_ns,
			 uint64_t *held, uid_t *held_uid)
{
	struct bwd_ratelimit_slot *w =
		&rl->slot[((uint64_t)uid * 0x9e3779b97f4a7c15ull >> 32) % BWD_RATELIMIT_SLOTS];

	*held = 0;
	*held_uid = uid;
	if (!w->used || now_ns - w->start_ns >= BWD_RATELIMIT_WINDOW_NS) {
		*held = w->suppressed;
		*held_uid = w->used ? w->uid : uid;
		*w = (struct bwd_ratelimit_slot){ .used = true, .uid = uid,
						  .start_ns = now_ns };
	}
	if (w->lines < BWD_RATELIMIT_BURST) {
		w->lines++;
		return true;
	}
	w->suppressed++;
	w->uid = uid;
	return false;
}

static const char *const kind_names[BWD_LOGK_KINDS] = {
	[BWD_LOGK_CLOSE] = "a client closed for breaking the protocol",
	[BWD_LOGK_SLOW] = "a client not reading",
	[BWD_LOGK_SESSION] = "sessions joined, left and expired",
	[BWD_LOGK_REFUSED] = "connections refused",
};

void bwd_log_client(enum bwd_log_kind kind, uid_t uid, enum bwd_log_level level,
		    const char *fmt, ...)
{
	static struct bwd_ratelimit limits[BWD_LOGK_KINDS];
	uint64_t held;
	uid_t held_uid;
	bool allowed;
	va_list ap;

	if (level > shown)
		return;
	allowed = bwd_ratelimit_allow(&limits[kind], uid, bw_now_ns(), &held, &held_uid);
	if (held)
		bwd_log(BWD_LOG_WARNING, "%" PRIu64 " messages about %s (the last for uid %ld) suppressed: more than %u a second",
			held, kind_names[kind], (long)held_uid, BWD_RATELIMIT_BURST);
	if (!allowed)
		return;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}
