/*
 * check_calendar.c - the daemon's time zones (daemon/tz.c) and calendar
 * events (daemon/calendar.c), in process.
 *
 *   - units: values worked out by hand: daylight-saving gaps and repeats
 *     in Europe/Berlin, America/New_York and Australia/Lord_Howe (a 30
 *     minute change), Asia/Kathmandu's +05:45, leap days, "~" from the
 *     month's end, seconds fractions, "@" times, systemd.time(7)'s table
 *     of normalized forms, refusals with their messages, zone names
 *     refused, the footer rule past the table (year 2100), hand-built
 *     TZif files of versions 1 and 4;
 *   - tz: bwd_tz_lookup against glibc's localtime_r() (one process, TZ
 *     set per zone) for random instants 1901..2199 in zones with odd
 *     offsets and rules (1901..2199), and for POSIX TZ strings of every
 *     date form (1971..2199: glibc applies a string's rules to earlier
 *     years with 1970's dates);
 *   - systemd: the differential test.  systemd-analyze calendar (systemd
 *     252 on Debian 12) runs with TZ=UTC for systemd.time(7)'s examples
 *     and random specs (weekday lists and ranges, dates with lists,
 *     ranges, repetitions, "~", seconds fractions, zones with and without
 *     daylight saving) from base times around transitions and leap days,
 *     the local zone (specs without one) UTC or, in some batches, zones
 *     with daylight saving or odd offsets (its "(in UTC)" lines are read);
 *     the normalized form, the refusal and 50 elapses (to the second: it
 *     prints no fractions) must equal ours; a spec systemd gives up on
 *     (EDEADLK) ours must give up on too.  BW_CALENDAR_SPECS random specs
 *     (default 80: 10 to 40 s here, by the load; thousands for a long
 *     run), a fixed seed then BW_TEST_SEED's, printed with any failing
 *     spec.  Skipped, saying so, without /usr/bin/systemd-analyze;
 *   - model: next elapses of random specs against a brute-force search
 *     that walks local days, hours, minutes and quarter seconds and maps
 *     each local time to UTC through bwd_tz_local_to_utc (its first
 *     instant; none in a gap), compared where the offset at the base and
 *     at the elapse agree (across a change systemd's rule, the offset of
 *     the previous step, is the reference: the systemd TCase covers it);
 * What a next elapse costs is bench/bwcal's (bench/README.md, "Calendar
 * events"), beside systemd's own.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "calendar-internal.h"
#include "sdcal.h"
#include "testutil.h"

#define NS UINT64_C(1000000000)
#define ITER 50

static struct bwd_cal *parse_ok(const char *spec)
{
	struct bwd_cal *cal;
	char err[256] = "";
	int r = bwd_cal_parse(spec, &cal, err, sizeof(err));

	ck_assert_msg(r == 0, "'%s' refused: %d %s", spec, r, err);
	return cal;
}

/* The first n elapses after base (UTC "YYYY-MM-DD HH:MM:SS"), each
 * compared with want[i] (UTC, or "never"). */
static void expect(const char *spec, const char *base, unsigned n,
		   const char *const *want)
{
	struct bwd_cal *cal = parse_ok(spec);
	uint64_t t = (uint64_t)sdc_utc(base) * NS;
	unsigned i;

	for (i = 0; i < n; i++) {
		int r = bwd_cal_next(cal, t, &t);

		if (!strcmp(want[i], "never")) {
			ck_assert_msg(r == -ENOENT, "'%s' #%u: %d, want never",
				      spec, i, r);
			break;
		}
		ck_assert_msg(r == 0, "'%s' #%u: %d", spec, i, r);
		ck_assert_msg(t == (uint64_t)sdc_utc(want[i]) * NS,
			      "'%s' from %s #%u: %" PRIu64 ", want %s", spec,
			      base, i, t / NS, want[i]);
	}
	bwd_cal_free(cal);
}

#define EXPECT(spec, base, ...) do { \
	static const char *const w_[] = { __VA_ARGS__ }; \
	expect(spec, base, sizeof(w_) / sizeof(w_[0]), w_); \
} while (0)

START_TEST(test_dst_europe_berlin)
{
	/* 2026-03-29 01:00Z: 02:00 CET -> 03:00 CEST; 02:30 does not
	 * exist that day and the day is skipped (systemd's rule). */
	EXPECT("*-*-* 02:30 Europe/Berlin", "2026-03-29 00:00:00",
	       "2026-03-30 00:30:00", "2026-03-31 00:30:00");
	/* 2026-10-25 01:00Z: 03:00 CEST -> 02:00 CET; 02:30 is there
	 * twice and fires the first time only. */
	EXPECT("*-*-* 02:30 Europe/Berlin", "2026-10-24 23:00:00",
	       "2026-10-25 00:30:00", "2026-10-26 01:30:00");
	/* Every 20 minutes: the repeated hour 02:00-03:00 CET is not
	 * fired again. */
	EXPECT("*:0/20 Europe/Berlin", "2026-10-24 23:50:00",
	       "2026-10-25 00:00:00", "2026-10-25 00:20:00",
	       "2026-10-25 00:40:00", "2026-10-25 02:00:00",
	       "2026-10-25 02:20:00");
	/* From inside the repeated hour (02:10 CET) the search keeps that
	 * hour's offset: 02:20 CET, 02:40 CET, 03:00 CET. */
	EXPECT("*:0/20 Europe/Berlin", "2026-10-25 01:10:00",
	       "2026-10-25 01:20:00", "2026-10-25 01:40:00",
	       "2026-10-25 02:00:00");
	/* Over the gap: 01:40 CET, then 03:00 CEST. */
	EXPECT("*:0/20 Europe/Berlin", "2026-03-29 00:30:00",
	       "2026-03-29 00:40:00", "2026-03-29 01:00:00");
	/* Past the file's table (2037): the footer's rule, last Sunday of
	 * March 2100 is the 28th. */
	EXPECT("*-*-* 02:30 Europe/Berlin", "2100-03-27 12:00:00",
	       "2100-03-29 00:30:00", "2100-03-30 00:30:00");
	EXPECT("*-*-* 01:30 Europe/Berlin", "2100-03-27 12:00:00",
	       "2100-03-28 00:30:00", "2100-03-28 23:30:00");
	EXPECT("*-*-* 12:00 Europe/Berlin", "2100-10-30 12:00:00",
	       "2100-10-31 11:00:00");
}
END_TEST

START_TEST(test_dst_america_new_york)
{
	/* 2026-03-08 07:00Z: 02:00 EST -> 03:00 EDT. */
	EXPECT("*-*-* 02:30 America/New_York", "2026-03-08 00:00:00",
	       "2026-03-09 06:30:00");
	/* 2026-11-01 06:00Z: 02:00 EDT -> 01:00 EST: 01:30 EDT once. */
	EXPECT("*-*-* 01:30 America/New_York", "2026-11-01 00:00:00",
	       "2026-11-01 05:30:00", "2026-11-02 06:30:00");
	EXPECT("Mon..Fri *-*-* 09:00 America/New_York", "2026-11-06 00:00:00",
	       "2026-11-06 14:00:00", "2026-11-09 14:00:00");
}
END_TEST

START_TEST(test_odd_offsets)
{
	const struct bwd_tz *tz;
	struct bwd_tz_info info;
	int64_t out[2];
	int n;

	EXPECT("daily Asia/Kathmandu", "2026-01-01 00:00:00",
	       "2026-01-01 18:15:00", "2026-01-02 18:15:00");
	ck_assert_int_eq(bwd_tz_get("Asia/Kathmandu", &tz, NULL, 0), 0);
	ck_assert_int_eq(bwd_tz_lookup(tz, sdc_utc("2026-06-01 00:00:00"),
				       &info), 0);
	ck_assert_int_eq(info.utoff, 5 * 3600 + 45 * 60);
	ck_assert_str_eq(info.abbr, "+0545");

	/* Lord Howe: +10:30, +11 in summer; 2026-10-04 02:00 -> 02:30
	 * (15:30Z the day before), 2026-04-05 02:00 -> 01:30. */
	EXPECT("*-*-* 02:15 Australia/Lord_Howe", "2026-10-03 12:00:00",
	       "2026-10-04 15:15:00");
	EXPECT("*-*-* 01:45 Australia/Lord_Howe", "2026-04-04 12:00:00",
	       "2026-04-04 14:45:00", "2026-04-05 15:15:00");
	ck_assert_int_eq(bwd_tz_get("Australia/Lord_Howe", &tz, NULL, 0), 0);
	ck_assert_int_eq(bwd_tz_lookup(tz, sdc_utc("2026-07-01 00:00:00"),
				       &info), 0);
	ck_assert_int_eq(info.utoff, 37800);
	ck_assert_int_eq(info.isdst, 0);
	ck_assert_int_eq(bwd_tz_lookup(tz, sdc_utc("2027-01-01 00:00:00"),
				       &info), 0);
	ck_assert_int_eq(info.utoff, 39600);
	ck_assert_int_eq(info.isdst, 1);
	ck_assert_int_eq(bwd_tz_local_to_utc(tz, sdc_utc("2026-04-05 01:45:00"),
					     out, &n), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(out[0], sdc_utc("2026-04-04 14:45:00"));
	ck_assert_int_eq(out[1], sdc_utc("2026-04-04 15:15:00"));
	ck_assert_int_eq(bwd_tz_local_to_utc(tz, sdc_utc("2026-10-04 02:15:00"),
					     out, &n), 0);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(bwd_tz_local_to_utc(tz, sdc_utc("2026-10-04 02:30:00"),
					     out, &n), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(out[0], sdc_utc("2026-10-03 15:30:00"));
}
END_TEST

START_TEST(test_dates)
{
	EXPECT("*-02-29 12:00 UTC", "2025-03-01 00:00:00",
	       "2028-02-29 12:00:00", "2032-02-29 12:00:00");
	/* "~": the last day of February, then the last Monday of May
	 * (May 2026 ends on a Sunday). */
	EXPECT("*-02~01 UTC", "2027-01-01 00:00:00", "2027-02-28 00:00:00",
	       "2028-02-29 00:00:00");
	EXPECT("Mon *-05~07/1 UTC", "2026-01-01 00:00:00",
	       "2026-05-25 00:00:00", "2027-05-31 00:00:00");
	EXPECT("*-*~01..03/2 UTC", "2026-02-01 00:00:00",
	       "2026-02-26 00:00:00", "2026-02-28 00:00:00",
	       "2026-03-29 00:00:00");
	EXPECT("*-02-30", "2026-01-01 00:00:00", "never");
	EXPECT("2199-12-31 23:59:59 UTC", "2199-12-31 00:00:00",
	       "2199-12-31 23:59:59", "never");
	EXPECT("@1767225600", "2025-12-31 00:00:00", "2026-01-01 00:00:00",
	       "never");
	EXPECT("quarterly UTC", "2026-05-17 00:00:00", "2026-07-01 00:00:00",
	       "2026-10-01 00:00:00", "2027-01-01 00:00:00");
	EXPECT("Sat,Sun 10:00 UTC", "2026-12-02 00:00:00",
	       "2026-12-05 10:00:00", "2026-12-06 10:00:00",
	       "2026-12-12 10:00:00");
}
END_TEST

START_TEST(test_fractions)
{
	struct bwd_cal *cal = parse_ok("*:*:0/0.5 UTC");
	uint64_t t = (uint64_t)sdc_utc("2026-01-01 00:00:00") * NS + NS / 4;

	ck_assert_int_eq(bwd_cal_next(cal, t, &t), 0);
	ck_assert_uint_eq(t, (uint64_t)sdc_utc("2026-01-01 00:00:00") * NS +
			  NS / 2);
	ck_assert_int_eq(bwd_cal_next(cal, t, &t), 0);
	ck_assert_uint_eq(t, (uint64_t)sdc_utc("2026-01-01 00:00:01") * NS);
	/* strictly after: 999 ns before the elapse still finds it */
	t -= 999;
	ck_assert_int_eq(bwd_cal_next(cal, t, &t), 0);
	ck_assert_uint_eq(t, (uint64_t)sdc_utc("2026-01-01 00:00:01") * NS);
	bwd_cal_free(cal);

	cal = parse_ok("*:*:07.1234565 UTC");    /* the 7th decimal rounds */
	t = (uint64_t)sdc_utc("2026-01-01 00:00:00") * NS;
	ck_assert_int_eq(bwd_cal_next(cal, t, &t), 0);
	ck_assert_uint_eq(t, (uint64_t)sdc_utc("2026-01-01 00:00:07") * NS +
			  123457000);
	bwd_cal_free(cal);
}
END_TEST

/* systemd.time(7)'s table of specs and their normalized forms. */
static const char *const man_examples[][2] = {
	{ "Sat,Thu,Mon..Wed,Sat..Sun", "Mon..Thu,Sat,Sun *-*-* 00:00:00" },
	{ "Mon,Sun 12-*-* 2,1:23", "Mon,Sun 2012-*-* 01,02:23:00" },
	{ "Wed *-1", "Wed *-*-01 00:00:00" },
	{ "Wed..Wed,Wed *-1", "Wed *-*-01 00:00:00" },
	{ "Wed, 17:48", "Wed *-*-* 17:48:00" },
	{ "Wed..Sat,Tue 12-10-15 1:2:3", "Tue..Sat 2012-10-15 01:02:03" },
	{ "*-*-7 0:0:0", "*-*-07 00:00:00" },
	{ "10-15", "*-10-15 00:00:00" },
	{ "monday *-12-* 17:00", "Mon *-12-* 17:00:00" },
	{ "Mon,Fri *-*-3,1,2 *:30:45", "Mon,Fri *-*-01,02,03 *:30:45" },
	{ "12,14,13,12:20,10,30", "*-*-* 12,13,14:10,20,30:00" },
	{ "12..14:10,20,30", "*-*-* 12..14:10,20,30:00" },
	{ "mon,fri *-1/2-1,3 *:30:45", "Mon,Fri *-01/2-01,03 *:30:45" },
	{ "03-05 08:05:40", "*-03-05 08:05:40" },
	{ "08:05:40", "*-*-* 08:05:40" },
	{ "05:40", "*-*-* 05:40:00" },
	{ "Sat,Sun 12-05 08:05:40", "Sat,Sun *-12-05 08:05:40" },
	{ "Sat,Sun 08:05:40", "Sat,Sun *-*-* 08:05:40" },
	{ "2003-03-05 05:40", "2003-03-05 05:40:00" },
	{ "05:40:23.4200004/3.1700005", "*-*-* 05:40:23.420000/3.170001" },
	{ "2003-02..04-05", "2003-02..04-05 00:00:00" },
	{ "2003-03-05 05:40 UTC", "2003-03-05 05:40:00 UTC" },
	{ "2003-03-05", "2003-03-05 00:00:00" },
	{ "03-05", "*-03-05 00:00:00" },
	{ "hourly", "*-*-* *:00:00" },
	{ "daily", "*-*-* 00:00:00" },
	{ "daily UTC", "*-*-* 00:00:00 UTC" },
	{ "monthly", "*-*-01 00:00:00" },
	{ "weekly", "Mon *-*-* 00:00:00" },
	{ "weekly Pacific/Auckland", "Mon *-*-* 00:00:00 Pacific/Auckland" },
	{ "yearly", "*-01-01 00:00:00" },
	{ "annually", "*-01-01 00:00:00" },
	{ "*:2/3", "*-*-* *:02/3:00" },
	/* and the forms the text names */
	{ "minutely", "*-*-* *:*:00" },
	{ "quarterly", "*-01,04,07,10-01 00:00:00" },
	{ "semiannually", "*-01,07-01 00:00:00" },
	{ "*-02~01", "*-02~01 00:00:00" },
	{ "Mon *-05~07/1", "Mon *-05~07/1 00:00:00" },
	{ "*:*:0/0.5", "*-*-* *:*:00/0.500000" },
	{ "*-*-* *:*:*", "*-*-* *:*:*" },
	{ "Mon..Fri *-*-* 09:00:00 Europe/Berlin",
	  "Mon..Fri *-*-* 09:00:00 Europe/Berlin" },
	{ "*:0/15", "*-*-* *:00/15:00" },
	{ "2026-12-24", "2026-12-24 00:00:00" },
	{ "@1234", "1970-01-01 00:20:34 UTC" },
};

START_TEST(test_normalized)
{
	size_t i;

	for (i = 0; i < sizeof(man_examples) / sizeof(man_examples[0]); i++) {
		struct bwd_cal *cal = parse_ok(man_examples[i][0]);
		char buf[BWD_CAL_SPEC_MAX];

		ck_assert_int_eq(bwd_cal_normalize(cal, buf, sizeof(buf)), 0);
		ck_assert_msg(!strcmp(buf, man_examples[i][1]),
			      "'%s' -> '%s', want '%s'", man_examples[i][0],
			      buf, man_examples[i][1]);
		ck_assert_int_eq(bwd_cal_normalize(cal, buf, 5), -ENOSPC);
		bwd_cal_free(cal);
	}
}
END_TEST

START_TEST(test_refusals)
{
	static const char *const bad[][2] = {
		{ "", "empty" },
		{ "foo", "number expected" },
		{ "Mon,Fri *-02-~1 UTC", "number expected at '~1'" },
		{ "25:00", "hour out of range" },
		{ "*-13-01", "month out of range" },
		{ "*-*-32", "day out of range" },
		{ "*-02~29", "day out of range" },
		{ "Fri..Mon", "backwards" },
		{ "Mon.. 10:00", "open weekday range" },
		{ "*:*:1..1.5", "shorter than 1 s" },
		{ "*:0/0", "repetition of 0" },
		{ "1969-01-01", "year out of range" },
		{ "*:*:60", "second (in microseconds) out of range" },
		{ "*-*-* 00:00:00 Mars/Olympus", "unknown time zone" },
		{ "daily ../../etc/passwd", "unknown time zone" },
		{ "*:0/60", "minute out of range" },
		{ "2147483648-01-01", "too large" },
		{ "@-1", "outside the years" },
		{ "12:00:00:00", "after the time" },
		{ "Mon-", "open weekday range" },
		{ "Monx", "bad weekday" },
	};
	char many[4096] = "*-*-1";
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct bwd_cal *cal = (void *)1;
		char err[512] = "";
		int r = bwd_cal_parse(bad[i][0], &cal, err, sizeof(err));

		ck_assert_msg(r < 0, "'%s' accepted", bad[i][0]);
		ck_assert_ptr_null(cal);
		ck_assert_msg(strstr(err, bad[i][1]), "'%s': '%s' lacks '%s'",
			      bad[i][0], err, bad[i][1]);
	}
	/* 241 components in one field pass, 242 do not. */
	for (i = 1; i < 241; i++)
		strcat(many, ",1");
	bwd_cal_free(parse_ok(many));
	strcat(many, ",1");
	{
		struct bwd_cal *cal;

		ck_assert_int_eq(bwd_cal_parse(many, &cal, NULL, 0),
				 -ENOBUFS);
	}
}
END_TEST

START_TEST(test_zone_names)
{
	static const struct {
		const char *name;
		int r;
	} names[] = {
		{ "../etc/passwd", -EINVAL }, { "/etc/localtime", -EINVAL },
		{ "Europe//Berlin", -EINVAL }, { "Europe/", -EINVAL },
		{ "Europe/Nowhere", -ENOENT }, { "Europe", -EBADMSG },
		{ "Europe/Berlin", 0 }, { "UTC", 0 }, { "Etc/GMT+5", 0 },
	};
	char path[] = "/tmp/check_calendar.XXXXXX";
	const struct bwd_tz *a, *b;
	char err[512];
	size_t i;
	int fd;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		err[0] = 0;
		ck_assert_msg(bwd_tz_get(names[i].name, &a, err,
					 sizeof(err)) == names[i].r,
			      "%s: %s", names[i].name, err);
		ck_assert(names[i].r == 0 || err[0]);
	}
	/* shared: the second get is the same zone */
	ck_assert_int_eq(bwd_tz_get("Europe/Berlin", &a, NULL, 0), 0);
	ck_assert_int_eq(bwd_tz_get("Europe/Berlin", &b, NULL, 0), 0);
	ck_assert_ptr_eq(a, b);
	/* the local zone from TZ: a file that is not TZif is refused */
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "TZif2 but short", 15), 15);
	close(fd);
	setenv("TZ", path, 1);
	bwd_tz_cache_clear();
	ck_assert_int_eq(bwd_tz_get(NULL, &a, err, sizeof(err)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "TZif"));
	unlink(path);
	setenv("TZ", ":Asia/Kathmandu", 1);
	ck_assert_int_eq(bwd_tz_get("", &a, NULL, 0), 0);
	{
		struct bwd_tz_info info;

		bwd_tz_lookup(a, 1767225600, &info);
		ck_assert_int_eq(info.utoff, 20700);
	}
	bwd_tz_cache_clear();
}
END_TEST

/* Appends a TZif header and data block: one transition at t1 to type 1. */
static size_t tzif_block(unsigned char *p, char version, int wide,
			 int64_t t1)
{
	static const unsigned char types[] = { 0, 0, 0, 0, 0, 0,
					       0, 0, 0x0e, 0x10, 1, 4 };
	unsigned char *q = p;
	uint32_t counts[6] = { 0, 0, 0, 1, 2, 8 };
	int i, k;

	memcpy(q, "TZif", 4);
	q[4] = (unsigned char)version;
	memset(q + 5, 0, 15);
	q += 20;
	for (i = 0; i < 6; i++)
		for (k = 3; k >= 0; k--)
			*q++ = (unsigned char)(counts[i] >> (8 * k));
	for (k = wide ? 7 : 3; k >= 0; k--)
		*q++ = (unsigned char)((uint64_t)t1 >> (8 * k));
	*q++ = 1;
	memcpy(q, types, sizeof(types));
	q += sizeof(types);
	memcpy(q, "AAA\0BBB\0", 8);
	return (size_t)(q + 8 - p);
}

static const struct bwd_tz *tzif_file(const char *path, const void *buf,
				      size_t len)
{
	const struct bwd_tz *tz;
	char err[256] = "";
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
	setenv("TZ", path, 1);
	bwd_tz_cache_clear();
	ck_assert_msg(bwd_tz_get(NULL, &tz, err, sizeof(err)) == 0, "%s", err);
	return tz;
}

START_TEST(test_tzif_versions)
{
	unsigned char buf[512];
	char path[] = "/tmp/check_calendar.tzif.XXXXXX";
	const struct bwd_tz *tz;
	struct bwd_tz_info info;
	size_t n;
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	/* version 1: 32-bit times, no footer; the last type stays */
	n = tzif_block(buf, 0, 0, 1000000000);
	tz = tzif_file(path, buf, n);
	bwd_tz_lookup(tz, 999999999, &info);
	ck_assert(info.utoff == 0 && !info.isdst && !strcmp(info.abbr, "AAA"));
	bwd_tz_lookup(tz, 1000000000, &info);
	ck_assert(info.utoff == 3600 && info.isdst && !strcmp(info.abbr, "BBB"));
	bwd_tz_lookup(tz, 4000000000ll, &info);
	ck_assert_int_eq(info.utoff, 3600);
	/* version 4: the 64-bit block (its transition in 2100) and a
	 * footer rule past it; the version-1 block's transition ignored */
	n = tzif_block(buf, '4', 0, 1000000000);
	n += tzif_block(buf + n, '4', 1, 4102444800ll);
	memcpy(buf + n, "\nCCC-2DDD,M3.5.0,M10.5.0/3\n", 27);
	n += 27;
	tz = tzif_file(path, buf, n);
	bwd_tz_lookup(tz, 1000000000, &info);
	ck_assert_int_eq(info.utoff, 0);
	bwd_tz_lookup(tz, sdc_utc("2100-07-01 00:00:00"), &info);
	ck_assert(info.utoff == 3 * 3600 && info.isdst &&
		  !strcmp(info.abbr, "DDD"));
	bwd_tz_lookup(tz, sdc_utc("2100-12-01 00:00:00"), &info);
	ck_assert(info.utoff == 2 * 3600 && !info.isdst &&
		  !strcmp(info.abbr, "CCC"));
	/* a footer without its closing newline is refused */
	n--;
	setenv("TZ", path, 1);
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, buf, n), (ssize_t)n);
	close(fd);
	bwd_tz_cache_clear();
	ck_assert_int_eq(bwd_tz_get(NULL, &tz, NULL, 0), -EBADMSG);
	unlink(path);
	bwd_tz_cache_clear();
}
END_TEST

/* ---- tz against glibc ------------------------------------------------ */

static void tz_vs_glibc(const char *tzenv, const char *name,
			struct tu_rng *rng, unsigned n, int64_t from)
{
	const struct bwd_tz *tz;
	char err[256] = "";
	unsigned i;

	setenv("TZ", tzenv, 1);
	tzset();
	bwd_tz_cache_clear();
	ck_assert_msg(bwd_tz_get(name, &tz, err, sizeof(err)) == 0, "%s: %s",
		      tzenv, err);
	for (i = 0; i < n; i++) {
		int64_t t = from + (int64_t)tu_rng_below(rng, (uint64_t)(
				    7258118400ll - from));     /* ..2199 */
		struct bwd_tz_info info;
		struct tm tm;
		time_t tt = (time_t)t;

		ck_assert_ptr_nonnull(localtime_r(&tt, &tm));
		bwd_tz_lookup(tz, t, &info);
		ck_assert_msg(info.utoff == tm.tm_gmtoff &&
			      info.isdst == (tm.tm_isdst > 0) &&
			      !strcmp(info.abbr, tm.tm_zone),
			      "TZ=%s at %" PRId64 ": ours %d %d %s, glibc "
			      "%ld %d %s", tzenv, t, info.utoff, info.isdst,
			      info.abbr, tm.tm_gmtoff, tm.tm_isdst, tm.tm_zone);
	}
}

START_TEST(test_tz_glibc)
{
	static const char *const zones[] = {
		"Europe/Berlin", "America/New_York", "Asia/Kathmandu",
		"Australia/Lord_Howe", "Pacific/Chatham", "America/Sao_Paulo",
		"Africa/Casablanca", "Europe/Dublin", "Pacific/Apia",
		"America/St_Johns", "Antarctica/Troll", "Asia/Tehran",
	};
	static const char *const rules[] = {
		"CET-1CEST,M3.5.0,M10.5.0/3", "EST5EDT", "<+0545>-5:45",
		"AAA3BBB,J60/25,J300/-1", "XXX-10YYY-11,100/2,250/3",
		"ZZZ+3WWW,M1.1.0/-20,M12.5.6/167", "<-03>3<-02>,M3.5.0/-2,M10.5.0/-1",
		"IST-1GMT0,M10.5.0,M3.5.0/1",
	};
	uint64_t seed = tu_seed_from_env("BW_TEST_SEED", 24);
	struct tu_rng rng;
	char env[64];
	size_t i;

	tu_rng_seed(&rng, seed);
	printf("check_calendar tz: seed %" PRIu64 " (BW_TEST_SEED)\n", seed);
	for (i = 0; i < sizeof(zones) / sizeof(zones[0]); i++) {
		snprintf(env, sizeof(env), ":%s", zones[i]);
		tz_vs_glibc(env, zones[i], &rng, 20000, -2140000000ll);
	}
	for (i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
		tz_vs_glibc(rules[i], "", &rng, 20000, 31536000);
}
END_TEST

/* ---- the differential test against systemd-analyze ------------------- */

/* Ours against systemd's for one spec; 0 if equal, else a message. */
static int sd_compare(const char *spec, uint64_t base_us,
		      const struct sdc_result *sd, char *msg, size_t len,
		      unsigned *elapses)
{
	struct bwd_cal *cal;
	char norm[BWD_CAL_SPEC_MAX], err[256] = "";
	uint64_t t = base_us * 1000;
	int r = bwd_cal_parse(spec, &cal, err, sizeof(err)), i;

	if (r < 0 || sd->refused) {
		if ((r < 0) == sd->refused) {
			if (r < 0)
				bwd_cal_free(cal);
			return 0;
		}
		snprintf(msg, len, "'%s': ours %s, systemd %s", spec,
			 r < 0 ? err : "accepted",
			 sd->refused ? "refused" : "accepted");
		if (r == 0)
			bwd_cal_free(cal);
		return -1;
	}
	if (sd->gave_up) {
		/* systemd's search gave up within the 50 (-EDEADLK): ours
		 * must too, at whichever elapse (it does not say which). */
		for (i = 0; i < ITER && (r = bwd_cal_next(cal, t, &t)) == 0;
		     i++)
			(*elapses)++;
		bwd_cal_free(cal);
		if (r == -EDEADLK)
			return 0;
		snprintf(msg, len, "'%s' from @%" PRIu64 ".%06" PRIu64 ": "
			 "systemd gave up (EDEADLK), ours %d after %d",
			 spec, base_us / 1000000, base_us % 1000000, r, i);
		return -1;
	}
	bwd_cal_normalize(cal, norm, sizeof(norm));
	if (strcmp(norm, sd->normalized)) {
		snprintf(msg, len, "'%s': normalized '%.300s', systemd "
			 "'%.300s'", spec, norm, sd->normalized);
		bwd_cal_free(cal);
		return -1;
	}
	for (i = 0; i < ITER; i++) {
		r = bwd_cal_next(cal, t, &t);
		if (r < 0 || i >= sd->n) {
			if (r < 0 && i == sd->n && (r == -ENOENT) ==
			    (sd->never || i > 0))
				break;
			snprintf(msg, len, "'%s' from @%" PRIu64 ".%06" PRIu64
				 " #%d: ours %d %" PRIu64 ", systemd %s %"
				 PRId64, spec, base_us / 1000000,
				 base_us % 1000000, i, r, t / NS,
				 i < sd->n ? "at" : "none",
				 i < sd->n ? sd->at[i] : 0);
			bwd_cal_free(cal);
			return -1;
		}
		(*elapses)++;
		if ((int64_t)(t / NS) != sd->at[i]) {
			snprintf(msg, len, "'%s' from @%" PRIu64 ".%06" PRIu64
				 " #%d: ours %" PRIu64 ".%09" PRIu64
				 ", systemd %" PRId64, spec, base_us / 1000000,
				 base_us % 1000000, i, t / NS, t % NS,
				 sd->at[i]);
			bwd_cal_free(cal);
			return -1;
		}
	}
	bwd_cal_free(cal);
	return 0;
}

static const char *const zone_pool[] = {
	"Europe/Berlin", "America/New_York", "Asia/Kathmandu",
	"Australia/Lord_Howe", "Pacific/Chatham", "America/Sao_Paulo",
	"Europe/London", "Asia/Tokyo", "America/St_Johns", "Pacific/Apia",
	"Africa/Casablanca", "Europe/Dublin", "Antarctica/Troll",
};

/* Base times: transitions of the pool's zones, leap days, plain days. */
static uint64_t pick_base(struct tu_rng *rng)
{
	static const char *const near[] = {
		"2026-03-29 00:40:00", "2026-10-25 00:10:00",
		"2026-10-25 01:10:00", "2026-03-08 06:30:00",
		"2026-11-01 05:20:00", "2026-11-01 06:20:00",
		"2026-04-04 14:50:00", "2026-10-03 15:00:00",
		"2028-02-28 22:00:00", "2024-02-29 12:00:00",
		"2026-04-04 13:30:00", "2026-09-26 13:40:00",
		"2027-03-28 00:59:59", "2100-03-28 00:30:00",
		"2030-12-31 23:59:59", "2026-12-02 05:00:00",
	};
	int64_t t = sdc_utc(near[tu_rng_below(rng, sizeof(near) / sizeof(near[0]))]);

	t += (int64_t)tu_rng_below(rng, 7200) - 3600;
	return (uint64_t)t * 1000000 + (tu_rng_chance(rng, 300000) ?
					tu_rng_below(rng, 1000000) : 0);
}

static void put_num(char **p, struct tu_rng *rng, int lo, int hi, int bad)
{
	int v = (int)tu_rng_range(rng, (uint64_t)lo, (uint64_t)hi);

	if (bad && tu_rng_chance(rng, 20000))
		v = hi + 1 + (int)tu_rng_below(rng, 3);
	*p += sprintf(*p, tu_rng_chance(rng, 300000) ? "%d" : "%02d", v);
}

/* A field: "*" or up to 3 of a, a..b, a/r, a..b/r. */
static void put_field(char **p, struct tu_rng *rng, int lo, int hi,
		      int frac)
{
	unsigned n = 1 + (unsigned)tu_rng_below(rng, 3), i;

	if (tu_rng_chance(rng, 300000)) {
		*(*p)++ = '*';
		if (tu_rng_chance(rng, 100000)) {
			*p += sprintf(*p, "/%d", 1 + (int)tu_rng_below(
					      rng, (uint64_t)(hi - lo)));
		}
		return;
	}
	for (i = 0; i < n; i++) {
		unsigned form = (unsigned)tu_rng_below(rng, 4);
		int a = (int)tu_rng_range(rng, (uint64_t)lo, (uint64_t)hi);

		if (i)
			*(*p)++ = ',';
		put_num(p, rng, a, a, 1);
		if (frac && tu_rng_chance(rng, 300000))
			*p += sprintf(*p, ".%d", (int)tu_rng_below(rng, 1000));
		if (form & 1) {
			*p += sprintf(*p, "..");
			put_num(p, rng, a, hi, 1);
		}
		if (form & 2) {
			*p += sprintf(*p, "/%d", 1 + (int)tu_rng_below(
					      rng, (uint64_t)(hi - lo + 1) / 2 + 1));
			if (frac && tu_rng_chance(rng, 400000))
				*p += sprintf(*p, ".%d",
					      (int)tu_rng_below(rng, 100) * 5);
		}
	}
}

static void random_spec(struct tu_rng *rng, char *buf)
{
	static const char *const days[] = { "Mon", "Tue", "Wed", "Thu", "Fri",
					    "Sat", "Sun" };
	static const char *const shorts[] = { "minutely", "hourly", "daily",
		"monthly", "weekly", "yearly", "annually", "quarterly",
		"semiannually", "semi-annually", "bi-annually", "anually" };
	char *p = buf;

	if (tu_rng_chance(rng, 80000)) {
		p += sprintf(p, "%s", shorts[tu_rng_below(rng, 12)]);
	} else {
		if (tu_rng_chance(rng, 400000)) {
			unsigned n = 1 + (unsigned)tu_rng_below(rng, 3), i;

			for (i = 0; i < n; i++) {
				uint64_t a = tu_rng_below(rng, 7);

				p += sprintf(p, "%s%s", i ? "," : "", days[a]);
				if (tu_rng_chance(rng, 400000))
					p += sprintf(p, "..%s", days[
						tu_rng_range(rng, tu_rng_chance(
							rng, 950000) ? a : 0, 6)]);
			}
			*p++ = ' ';
		}
		if (tu_rng_chance(rng, 600000)) {
			int eom = tu_rng_chance(rng, 250000);

			if (tu_rng_chance(rng, 500000)) {
				if (tu_rng_chance(rng, 200000))
					put_num(&p, rng, 24, 35, 0);
				else
					put_field(&p, rng, 2024, 2040, 0);
				*p++ = '-';
			}
			put_field(&p, rng, 1, 12, 0);
			*p++ = eom ? '~' : '-';
			put_field(&p, rng, 1, eom ? 28 : 31, 0);
			*p++ = ' ';
		}
		if (tu_rng_chance(rng, 850000)) {
			put_field(&p, rng, 0, 23, 0);
			*p++ = ':';
			put_field(&p, rng, 0, 59, 0);
			if (tu_rng_chance(rng, 600000)) {
				*p++ = ':';
				put_field(&p, rng, 0, 59, 1);
			}
		}
		if (p > buf && p[-1] == ' ')
			p--;
		if (p == buf)
			p += sprintf(p, "daily");
	}
	if (tu_rng_chance(rng, 650000)) {
		if (tu_rng_chance(rng, 250000))
			p += sprintf(p, " UTC");
		else
			p += sprintf(p, " %s", zone_pool[tu_rng_below(
				rng, sizeof(zone_pool) / sizeof(zone_pool[0]))]);
	}
	*p = 0;
}

START_TEST(test_systemd_differential)
{
	uint64_t seeds[2] = { 2026, tu_seed_from_env("BW_TEST_SEED", 2026) };
	const char *knob = getenv("BW_CALENDAR_SPECS");
	unsigned nrandom = knob ? (unsigned)strtoul(knob, NULL, 10) : 80;
	unsigned specs = 0, elapses = 0, refused = 0, s;
	static char pool[48][256];
	const char *batch[48];
	static struct sdc_result res[48];
	struct timespec a, b;
	struct tu_rng rng;
	char msg[1024];
	size_t i;
	int k;

	static const char *const locals[] = { "UTC", "UTC", "Europe/Berlin",
		"America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu" };

	if (!sdc_available()) {
		printf("check_calendar: SKIP the differential test: no %s "
		       "(the package systemd)\n", SDC_ANALYZE);
		return;
	}
	setenv("TZ", "UTC", 1);
	bwd_tz_cache_clear();
	clock_gettime(CLOCK_MONOTONIC, &a);
	/* systemd.time(7)'s forms from a few bases */
	for (k = 0; k < 3; k++) {
		static const uint64_t bases[] = { 1774740000, 1793146200,
						  1835395200 };
		int n = 0;

		for (i = 0; i < sizeof(man_examples) / sizeof(man_examples[0]);
		     i++)
			batch[n++] = man_examples[i][0];
		sdc_run(batch, n, ITER, bases[k] * 1000000, "UTC", res);
		for (i = 0; i < (size_t)n; i++) {
			ck_assert_msg(sd_compare(batch[i], bases[k] * 1000000,
						 &res[i], msg, sizeof(msg),
						 &elapses) == 0, "%s", msg);
			specs++;
			refused += res[i].refused;
		}
	}
	for (s = 0; s < 2; s++) {
		unsigned done = 0;

		if (s == 1 && seeds[1] == seeds[0])
			break;
		tu_rng_seed(&rng, seeds[s]);
		while (done < nrandom) {
			int n = nrandom - done < 16 ? (int)(nrandom - done) : 16;
			uint64_t base = pick_base(&rng);
			/* the local zone, for specs without one */
			const char *local = locals[tu_rng_below(&rng, 6)];

			setenv("TZ", local, 1);
			bwd_tz_cache_clear();
			for (k = 0; k < n; k++) {
				random_spec(&rng, pool[k]);
				batch[k] = pool[k];
			}
			sdc_run(batch, n, ITER, base, local, res);
			for (k = 0; k < n; k++) {
				ck_assert_msg(sd_compare(batch[k], base, &res[k],
							 msg, sizeof(msg),
							 &elapses) == 0,
					      "seed %" PRIu64 " (BW_TEST_SEED), "
					      "TZ=%s: %s", seeds[s], local, msg);
				specs++;
				refused += res[k].refused;
			}
			done += (unsigned)n;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("check_calendar: systemd-analyze calendar --iterations=%d "
	       "agrees on %u specs (%u refused by both), %u "
	       "elapses, in %.1f s; seeds %" PRIu64 ", %" PRIu64
	       " (BW_TEST_SEED), BW_CALENDAR_SPECS=%u\n", ITER, specs, refused,
	       elapses, (double)(b.tv_sec - a.tv_sec) +
	       (double)(b.tv_nsec - a.tv_nsec) / 1e9, seeds[0], seeds[1],
	       nrandom);
}
END_TEST

/* ---- the model: a brute-force search through local time ------------- */

struct mcomp {
	int start, stop, repeat;        /* stop -1, repeat 0: none */
};

struct mspec {
	int weekdays;                   /* bit 0 Monday; 0 every day      */
	int eom;
	int n[6];                       /* 0: "*"                         */
	struct mcomp c[6][3];           /* year, month, day, hour, min, q */
	const char *zone;
};

/* v against one field; q (quarter seconds) for the seconds. */
static int mmatch(const struct mspec *s, int f, int v, int mdays)
{
	int i;

	if (s->n[f] == 0)
		return f != 5 || v % 4 == 0;    /* "*" seconds: whole ones */
	for (i = 0; i < s->n[f]; i++) {
		struct mcomp c = s->c[f][i];

		if (c.stop > c.start && c.repeat > 0)
			c.stop -= (c.stop - c.start) % c.repeat;
		if (f == 2 && s->eom) {
			int lo, hi;

			if (c.stop == c.start)
				c.stop = -1;
			if (c.stop < 0) {
				lo = mdays - c.start + 1;
				if (c.repeat ? v >= lo && (v - lo) % c.repeat == 0
					     : v == lo)
					return 1;
				continue;
			}
			lo = mdays - c.stop + 1;
			hi = mdays - c.start + 1;
			if (v >= lo && v <= hi && (v - lo) % c.repeat == 0)
				return 1;
			continue;
		}
		if (c.repeat == 0 ? v == c.start
				  : v >= c.start && (v - c.start) % c.repeat == 0 &&
				    (c.stop < 0 || v <= c.stop))
			return 1;
	}
	return 0;
}

static void mput(char **p, const struct mspec *s, int f)
{
	int i;

	if (s->n[f] == 0) {
		*(*p)++ = '*';
		return;
	}
	for (i = 0; i < s->n[f]; i++) {
		const struct mcomp *c = &s->c[f][i];
		int v[3] = { c->start, c->stop, c->repeat }, k;

		for (k = 0; k < 3; k++) {
			if ((k == 1 && c->stop < 0) || (k == 2 && (!c->repeat ||
			    (c->stop >= 0 && c->repeat == 1))))
				continue;
			*p += sprintf(*p, "%s", k == 0 ? (i ? "," : "") :
				      k == 1 ? ".." : "/");
			if (f == 5)
				*p += sprintf(*p, "%d.%02d", v[k] / 4,
					      v[k] % 4 * 25);
			else
				*p += sprintf(*p, "%02d", v[k]);
		}
	}
}

static void mrandom(struct tu_rng *rng, struct mspec *s, char *buf)
{
	static const char *const zones[] = { "UTC", "Asia/Kathmandu",
		"Asia/Tokyo", "Europe/Berlin", "America/New_York",
		"Australia/Lord_Howe" };
	static const int lo[6] = { 2026, 1, 1, 0, 0, 0 };
	static const int hi[6] = { 2030, 12, 28, 23, 59, 239 };
	static const char *const days[] = { "Mon", "Tue", "Wed", "Thu", "Fri",
					    "Sat", "Sun" };
	char *p = buf;
	int f, i;

	memset(s, 0, sizeof(*s));
	s->zone = zones[tu_rng_below(rng, 6)];
	s->eom = tu_rng_chance(rng, 200000);
	if (tu_rng_chance(rng, 300000))
		s->weekdays = (int)tu_rng_range(rng, 1, 126);
	for (f = 0; f < 6; f++) {
		if ((f == 0 && !tu_rng_chance(rng, 200000)) ||
		    tu_rng_chance(rng, 300000))
			continue;
		s->n[f] = 1 + (int)tu_rng_below(rng, 3);
		for (i = 0; i < s->n[f]; i++) {
			struct mcomp *c = &s->c[f][i];
			int span = hi[f] - lo[f];

			c->start = (int)tu_rng_range(rng, (uint64_t)lo[f],
						     (uint64_t)hi[f]);
			c->stop = -1;
			if (tu_rng_chance(rng, 400000))
				c->stop = (int)tu_rng_range(rng, (uint64_t)c->start,
							    (uint64_t)hi[f]);
			if (c->stop >= 0)
				c->repeat = f == 5 ? 4 : 1;
			if (tu_rng_chance(rng, 500000))
				c->repeat = 1 + (int)tu_rng_below(
					rng, (uint64_t)span / 3 + 1);
		}
	}
	for (i = 0; i < 7; i++)
		if (s->weekdays & (1 << i))
			p += sprintf(p, "%s%s", p > buf ? "," : "", days[i]);
	if (p > buf)
		*p++ = ' ';
	mput(&p, s, 0);
	*p++ = '-';
	mput(&p, s, 1);
	*p++ = s->eom ? '~' : '-';
	mput(&p, s, 2);
	*p++ = ' ';
	mput(&p, s, 3);
	*p++ = ':';
	mput(&p, s, 4);
	*p++ = ':';
	mput(&p, s, 5);
	p += sprintf(p, " %s", s->zone);
}

#define MODEL_DAYS 1200

/* The first local time the spec names whose first instant is after
 * after_us: 0 and *out_us, or -ENOENT within MODEL_DAYS. */
static int mnext(const struct mspec *s, const struct bwd_tz *tz,
		 uint64_t after_us, uint64_t *out_us)
{
	struct bwd_tz_info info;
	int64_t t0 = (int64_t)(after_us / 1000000), day0, d;

	bwd_tz_lookup(tz, t0, &info);
	day0 = (t0 + info.utoff) / 86400 - 1;
	for (d = day0; d < day0 + MODEL_DAYS; d++) {
		time_t noon = (time_t)(d * 86400 + 43200);
		struct tm tm;
		int mdays, h, m, q;

		gmtime_r(&noon, &tm);
		mdays = tm.tm_mon == 1 ? 28 + ((tm.tm_year % 4) == 0) :
			(tm.tm_mon == 3 || tm.tm_mon == 5 || tm.tm_mon == 8 ||
			 tm.tm_mon == 10) ? 30 : 31;
		if (!mmatch(s, 0, tm.tm_year + 1900, 0) ||
		    !mmatch(s, 1, tm.tm_mon + 1, 0) ||
		    !mmatch(s, 2, tm.tm_mday, mdays) ||
		    (s->weekdays && !(s->weekdays & (1 << ((tm.tm_wday + 6) % 7)))))
			continue;
		for (h = 0; h < 24; h++) {
			if (!mmatch(s, 3, h, 0))
				continue;
			for (m = 0; m < 60; m++) {
				int64_t utcs[2];
				int n;

				if (!mmatch(s, 4, m, 0))
					continue;
				bwd_tz_local_to_utc(tz, d * 86400 + h * 3600 +
						    m * 60, utcs, &n);
				if (n == 0)
					continue;
				for (q = 0; q < 240; q++) {
					uint64_t us = (uint64_t)utcs[0] * 1000000 +
						      (uint64_t)q * 250000;

					if (us > after_us && mmatch(s, 5, q, 0)) {
						*out_us = us;
						return 0;
					}
				}
			}
		}
	}
	return -ENOENT;
}

START_TEST(test_model)
{
	uint64_t seeds[2] = { 424242, tu_seed_from_env("BW_TEST_SEED", 424242) };
	unsigned compared = 0, refused = 0, skipped = 0, horizon = 0, s, i;
	struct tu_rng rng;

	for (s = 0; s < 2; s++) {
		if (s == 1 && seeds[1] == seeds[0])
			break;
		tu_rng_seed(&rng, seeds[s]);
		for (i = 0; i < 300; i++) {
			struct mspec ms;
			struct bwd_cal *cal;
			char spec[512], err[256];
			uint64_t after = (uint64_t)(sdc_utc("2026-01-01 00:00:00") +
				(int64_t)tu_rng_below(&rng, 4 * 365 * 86400ull)) *
				1000000 + tu_rng_below(&rng, 4) * 250000;
			uint64_t ref = 0, ours = 0;
			int64_t pair[2];
			int rr, ro, n;
			struct bwd_tz_info info;

			mrandom(&rng, &ms, spec);
			if (bwd_cal_parse(spec, &cal, err, sizeof(err)) < 0) {
				refused++;
				continue;
			}
			/* A base in a repeated hour: systemd's rule goes by the
			 * offset there, the model by the first instant. */
			bwd_tz_lookup(bwd_cal_zone(cal), (int64_t)(after / 1000000),
				      &info);
			bwd_tz_local_to_utc(bwd_cal_zone(cal),
					    (int64_t)(after / 1000000) + info.utoff,
					    pair, &n);
			if (n == 2) {
				skipped++;
				bwd_cal_free(cal);
				continue;
			}
			rr = mnext(&ms, bwd_cal_zone(cal), after, &ref);
			ro = bwd_cal_next(cal, after * 1000, &ours);
			if (rr == -ENOENT) {
				ck_assert_msg(ro == -ENOENT || ours / 1000 >=
					      after + (MODEL_DAYS - 2) * 86400ull *
					      1000000, "seed %" PRIu64 " (BW_TEST_SEED) "
					      "'%s' after %" PRIu64 " us: ours %d %"
					      PRIu64 ", model none", seeds[s], spec,
					      after, ro, ours / 1000);
				horizon++;
			} else {
				ck_assert_msg(ro == 0 && ours / 1000 == ref,
					      "seed %" PRIu64 " (BW_TEST_SEED) '%s' "
					      "after %" PRIu64 " us: ours %d %"
					      PRIu64 ", model %" PRIu64, seeds[s],
					      spec, after, ro, ours / 1000, ref);
				compared++;
			}
			bwd_cal_free(cal);
		}
	}
	printf("check_calendar model: %u next elapses equal the brute-force "
	       "search, %u agree there is none within %d days, %u bases in a "
	       "repeated hour skipped, %u specs refused; seeds %" PRIu64
	       ", %" PRIu64 " (BW_TEST_SEED)\n", compared, horizon,
	       MODEL_DAYS, skipped, refused, seeds[0], seeds[1]);
}
END_TEST

static Suite *calendar_suite(void)
{
	Suite *s = suite_create("calendar");
	TCase *tc;

	tc = tcase_create("units");
	tcase_add_test(tc, test_dst_europe_berlin);
	tcase_add_test(tc, test_dst_america_new_york);
	tcase_add_test(tc, test_odd_offsets);
	tcase_add_test(tc, test_dates);
	tcase_add_test(tc, test_fractions);
	tcase_add_test(tc, test_normalized);
	tcase_add_test(tc, test_refusals);
	tcase_add_test(tc, test_zone_names);
	tcase_add_test(tc, test_tzif_versions);
	suite_add_tcase(s, tc);

	tc = tcase_create("tz");
	tcase_add_test(tc, test_tz_glibc);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);

	tc = tcase_create("model");
	tcase_add_test(tc, test_model);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);

	tc = tcase_create("systemd");
	tcase_add_test(tc, test_systemd_differential);
	/* about 0.3 s a spec (both seeds) on a loaded machine; 2 s allowed */
	tcase_set_timeout(tc, 300 + (getenv("BW_CALENDAR_SPECS") ?
		(double)strtoul(getenv("BW_CALENDAR_SPECS"), NULL, 10) * 2 : 0));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(calendar_suite());
	int failed;

	setenv("TZ", "UTC", 1);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
