/*
 * log.c - bitwheeld's log: one line per message on stderr.
 *
 * Each line starts with a syslog level in angle brackets ("<4>"), which
 * journald turns into the entry's priority (sd-daemon(3)); on a terminal
 * it is still readable.  Debug lines appear only with --verbose.
 */
#include <stdarg.h>
#include <stdio.h>

#include "daemon-internal.h"

static bool verbose;

void bwd_log_set_verbose(bool on)
{
	verbose = on;
}

void bwd_log(enum bwd_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (level == BWD_LOG_DEBUG && !verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One write per line, so lines from a crash or a restart never mix. */
	fprintf(stderr, "<%d>bitwheeld: %s\n", (int)level, line);
}
