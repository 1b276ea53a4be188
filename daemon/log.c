/*
 * log.c - bitwheeld's log: one line per message on stderr.
 *
 * Each line starts with a syslog level in angle brackets ("<4>"), which
 * journald turns into the entry's priority (sd-daemon(3)); on a terminal
 * it is still readable.  Debug lines appear only with --verbose; the
 * fuzzer shows errors only.
 */
#include <stdarg.h>
#include <stdio.h>

#include "daemon-internal.h"

static enum bwd_log_level shown = BWD_LOG_INFO;

void bwd_log_set_level(enum bwd_log_level max)
{
	shown = max;
}

void bwd_log(enum bwd_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (level > shown)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One write per line, so lines from a crash or a restart never mix. */
	fprintf(stderr, "<%d>bitwheeld: %s\n", (int)level, line);
}
