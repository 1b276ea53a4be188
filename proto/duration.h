/*
 * duration.h - the one parser of human durations (duration.c), shared by
 * bitwheeld, libbitwheel-client and bwctl; internal, never installed.
 */
#ifndef BWP_DURATION_H
#define BWP_DURATION_H

#include <stdint.h>

/* Longest whole duration: 2^64 - 1 ns, about 584 years. */
#define BWP_DURATION_MAX_YEARS 584

/*
 * "250ms", "1.5s", "1h30m" -> ns: terms of a decimal number (a fraction
 * allowed) and a unit (ns, us or µs, ms, s, m, h).  0, -EINVAL when text
 * is not a duration (a unit missing, say), -ERANGE when it is one longer
 * than 2^64 - 1 ns.
 */
int bwp_parse_duration(const char *text, uint64_t *out_ns);

#endif /* BWP_DURATION_H */
