/*
 * duration.h - the one parser of human durations (duration.c), and the
 * bounds of a Schedule's times, shared by bitwheeld, libbitwheel-client
 * and bwctl; internal, never installed.
 */
#ifndef BWP_DURATION_H
#define BWP_DURATION_H

#include <stdbool.h>
#include <stdint.h>

/* Longest whole duration: 2^64 - 1 ns, about 584 years. */
#define BWP_DURATION_MAX_YEARS 584
/* A periodic timer's least period (PROTOCOL.md, Schedule). */
#define BWP_MIN_PERIOD_NS 1

#define BWP_STR_(x) #x
#define BWP_STR(x) BWP_STR_(x)

/*
 * "250ms", "1.5s", "1h30m", "2d" -> ns: terms of a decimal number (a
 * fraction allowed) and a unit (ns, us or µs, ms, s, m, h, d).  0, -EINVAL
 * when text is not a duration (a unit missing, say), -ERANGE when it is one
 * longer than 2^64 - 1 ns.
 */
int bwp_parse_duration(const char *text, uint64_t *out_ns);

/* Why bwp_parse_duration() returned err, to follow "'TEXT' " in a message:
 * "is too large: ..." for -ERANGE, "is not a duration: ..." else. */
const char *bwp_duration_problem(int err);

/*
 * The daemon's bounds on a Schedule's times: NULL when they hold, else why
 * not, the text of the BAD_DEADLINE error.  is_delay: when_ns is a delay
 * from now_ns (now_ns unused otherwise); has_period: period_ns was given.
 */
const char *bwp_schedule_problem(uint64_t now_ns, bool is_delay,
				 uint64_t when_ns, bool has_period,
				 uint64_t period_ns);

#endif /* BWP_DURATION_H */
