/*
 * load_leeway.h - bwload --leeway (load_leeway.c): lateness by leeway
 * class, and a tolerant consumer's wake-ups with and without coalescing.
 */
#ifndef LOAD_LEEWAY_H
#define LOAD_LEEWAY_H

#include "bwload.h"

/* Leeway classes: 0, 10 ms, 1 s (a timer's key % LW_CLASSES). */
#define LW_CLASSES 3

struct lw_lateness_opts {
	uint64_t rate;             /* timers a second, all classes          */
	uint64_t duration_ns;
	uint64_t min_delay_ns, max_delay_ns;
};

struct lw_lateness {
	struct load_hist late[LW_CLASSES]; /* receive time - deadline       */
	struct load_hist srv[LW_CLASSES];  /* Fired.fired_at - deadline     */
	uint64_t scheduled, fires, errors;
};

struct lw_coalesce_opts {
	uint64_t timers;           /* periodic timers of the one consumer   */
	uint64_t period_ns;
	uint64_t leeway_ns;        /* BWC_LEEWAY_DEFAULT: period / 64       */
	uint64_t duration_ns;      /* measured, after a period of warm-up   */
	long daemon_pid;           /* 0: no CPU figure                      */
};

struct lw_coalesce_row {
	bool coalesce;
	uint64_t fires;            /* received in the measured span          */
	uint64_t wakeups;          /* the consumer's polls that read fires   */
	uint64_t writes;           /* the daemon's writes carrying fires     */
	bool have_writes;          /* Metrics came (root only)               */
	int64_t cpu_ns;            /* the daemon's; -1 unknown               */
	uint64_t errors;
	struct load_hist late, srv;
};

/* 0, or -1 with err set. */
int load_leeway_lateness(const char *socket, const struct lw_lateness_opts *o,
			 struct lw_lateness *out, char *err, size_t errlen);
/* out[0] without coalescing, out[1] with. */
int load_leeway_coalesce(const char *socket, const struct lw_coalesce_opts *o,
			 struct lw_coalesce_row out[2], char *err, size_t errlen);

#endif /* LOAD_LEEWAY_H */
