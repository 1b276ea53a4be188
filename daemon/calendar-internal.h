/*
 * calendar-internal.h - time zones (tz.c) and systemd.time(7) calendar
 * events (calendar.c) for bitwheeld: pure modules, no I/O but reading the
 * tz database once per zone.
 *
 * Instants are UTC nanoseconds since the epoch (CLOCK_REALTIME's), local
 * times seconds since the epoch as if the local wall clock were UTC.
 * Every function returns 0 or a negative errno; err/errlen, where given,
 * receive a one-line message naming the part of the input that is wrong.
 */
#ifndef BWD_CALENDAR_INTERNAL_H
#define BWD_CALENDAR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* ---- tz.c: zones ---------------------------------------------------- */

struct bwd_tz;

/* Where IANA names are looked up, unless TZDIR names another directory
 * (glibc's variable, honoured as glibc does). */
#define BWD_TZ_DIR "/usr/share/zoneinfo"
/* Zones the cache holds at most (the IANA database has about 600). */
#define BWD_TZ_CACHE_MAX 1024
/* The largest TZif file read. */
#define BWD_TZ_FILE_MAX (1 << 20)

/* The tz database's directory: TZDIR when it is an absolute path, else
 * BWD_TZ_DIR. */
const char *bwd_tz_dir(void);

/*
 * The zone named `name`: "UTC", an IANA name under bwd_tz_dir(), or NULL or
 * "" for the local zone (TZ if set, else /etc/localtime, else UTC).
 * Loaded once, then shared from the cache until bwd_tz_cache_clear().
 * -EINVAL for a malformed name (absolute, "..", characters outside
 * [A-Za-z0-9_+-/]), -ENOENT for one that is not there, -EBADMSG for a
 * file that is not valid TZif.
 */
int bwd_tz_get(const char *name, const struct bwd_tz **out, char *err,
	       size_t errlen);
/* Drops every cached zone (pointers from bwd_tz_get become invalid). */
void bwd_tz_cache_clear(void);
/* The name the zone was asked by ("UTC", "Europe/Berlin", "" local). */
const char *bwd_tz_name(const struct bwd_tz *tz);

struct bwd_tz_info {
	int32_t utoff;         /* seconds east of UTC                     */
	int isdst;
	char abbr[16];         /* "CET", "+0545"                          */
};

/* The offset in force at UTC second t. O(log transitions). */
int bwd_tz_lookup(const struct bwd_tz *tz, int64_t t,
		  struct bwd_tz_info *out);

/* The offset alone, O(log transitions) without copying the name. */
int32_t bwd_tz_utoff(const struct bwd_tz *tz, int64_t t, int *isdst);

/*
 * The UTC seconds whose local time is `local`, ascending: *n = 1
 * normally, 0 in a gap (spring forward), 2 when the clock repeats.
 */
int bwd_tz_local_to_utc(const struct bwd_tz *tz, int64_t local,
			int64_t out[2], int *n);

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian, m 1..12), and
 * back: H. Hinnant's algorithms, O(1). */
int64_t bwd_tz_days_from_civil(int64_t y, int m, int d);
void bwd_tz_civil_from_days(int64_t days, int64_t *y, int *m, int *d);
/* printf into err (errlen bytes; nothing when err is NULL): how both
 * modules fill their err arguments. */
void bwd_tz_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- calendar.c: calendar events ----------------------------------- */

struct bwd_cal;

/* Components one field's list may have (systemd's limit, 240 + 1). */
#define BWD_CAL_COMPONENTS_MAX 241
/* Longest spec accepted, and longest normalized form written. */
#define BWD_CAL_SPEC_MAX 4096
/* Years a spec may name, and the last one searched (systemd's). */
#define BWD_CAL_YEAR_MIN 1970
#define BWD_CAL_YEAR_MAX 2199

/*
 * Parses a systemd.time(7) calendar event; *out is freed with
 * bwd_cal_free().  -EINVAL (err says which part is wrong), -ERANGE for a
 * number out of range, -ENOBUFS for too many components, -ENOMEM.
 */
int bwd_cal_parse(const char *spec, struct bwd_cal **out, char *err,
		  size_t errlen);
void bwd_cal_free(struct bwd_cal *cal);
/* The bytes a parsed spec takes (its one block). */
size_t bwd_cal_bytes(const struct bwd_cal *cal);
/* systemd 252's "Normalized form"; -ENOSPC if len is too small. */
int bwd_cal_normalize(const struct bwd_cal *cal, char *buf, size_t len);
/* The zone the spec's times are in. */
const struct bwd_tz *bwd_cal_zone(const struct bwd_cal *cal);
/*
 * The first elapse strictly after after_ns (microsecond resolution, as
 * systemd's), in UTC ns.  -ENOENT when there is none (before
 * BWD_CAL_YEAR_MAX ends, e.g. "*-02-30"), -EDEADLK when the search gave
 * up (systemd's bound of 1000 rounds, which it shares).
 */
int bwd_cal_next(const struct bwd_cal *cal, uint64_t after_ns,
		 uint64_t *next_ns);

#endif
