/*
 * calendar.c - systemd.time(7) calendar events: parse, normalize, next
 * elapse; the same specs accepted and refused, the same normalized form
 * and the same elapses as systemd 252 (tests/check_calendar runs
 * systemd-analyze calendar against this module).
 *
 * A spec is "[weekdays] [[year-]month-day] [hour:minute[:second]] [zone]"
 * or a shorthand (minutely, hourly, daily, monthly, weekly, yearly,
 * annually, quarterly, semiannually and their spellings) or "@seconds".
 * Each field is "*" or a list of components "a", "a..b", "a/r", "a..b/r";
 * "~" before the day counts days from the month's end; seconds take six
 * decimals.  The zone is " UTC", an IANA name, or else the local zone.
 *
 * The next elapse follows systemd's find_next() step for step: fields from
 * the year down, each set to the earliest value its list allows at or
 * after the current one, lower fields reset when a higher one moves, and
 * every step renormalized through the zone the way glibc 2.36's mktime()
 * does: with tm_isdst -1, except right after a step that normalized
 * forward (its result's flag stays for one mktime(), as in systemd), and
 * with the probe for an offset starting from the offset of the previous
 * result.  That decides systemd's daylight-saving behaviour, so it is
 * reproduced (struct mk, mk_time): a local time in a spring-forward gap
 * becomes the time as far after the gap (02:30 -> 03:30, which no "02:30"
 * spec then matches: that day is skipped), also for negative daylight
 * saving (Europe/Dublin, as Debian's systemd 252.39 has it); a local time
 * the autumn change repeats resolves to the occurrence with the offset in
 * force at the previous step, in practice the first one, so "*:0/20" does
 * not fire again in the repeated hour and "02:30" fires once; a gap that
 * does not end on the hour (Pacific/Chatham's 02:45-03:45) can send the
 * search back and forth, and then it gives up (-EDEADLK) as systemd's
 * does.  The search gives up, like systemd's, after year 2199
 * (-ENOENT: "*-02-30") or 1000 rounds (-EDEADLK).  Not supported: a
 * suffix naming the local zone's abbreviation ("CET", "CEST"), which
 * systemd reads with the process's own TZ.
 *
 * Data layout: struct bwd_cal holds the weekday bits, flags, the zone and
 * per field (year, month, day, hour, minute, microsecond of the minute) a
 * count and a slice of one array of {start, stop, repeat} components,
 * sorted and deduplicated, allocated with the struct in one block: 40
 * bytes plus 12 a component ("*" has none; "Mon..Fri 09:00" has 3).
 * Parsing is deterministic, so a journal can keep the spec string and
 * parse it again.
 *
 * Costs: parse O(length); next elapse a few rounds of the loop, each a
 * handful of zone lookups (binary search) and a scan of the components:
 * 2.5 to 5.5 us of CPU for the forms check_calendar times (the timing
 * TCase prints them).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "calendar-internal.h"

#define USEC 1000000
#define WEEKDAYS_ALL 127
#define MAX_ROUNDS 1000
/* systemd's USEC_TIMESTAMP_FORMATTABLE_MAX on 64-bit: 9999-12-30 23:59:59. */
#define FORMATTABLE_MAX_US UINT64_C(253402214399999999)

enum { F_YEAR, F_MONTH, F_DAY, F_HOUR, F_MINUTE, F_USEC, F_N };

struct comp {
	int32_t start, stop, repeat;    /* stop -1: none; repeat 0: none */
};

struct bwd_cal {
	const struct bwd_tz *tz;
	int16_t weekdays;               /* bit 0 Monday; -1 every day     */
	uint8_t end_of_month, utc, has_zone;
	uint16_t n[F_N];                /* components per field, 0 = "*" */
	uint16_t first[F_N];            /* index of the first in comps    */
	struct comp comps[];
};

/* A spec being parsed: up to BWD_CAL_COMPONENTS_MAX components a field. */
struct draft {
	int weekdays;
	int end_of_month, utc, has_zone;
	int has_at;
	int64_t at;                     /* "@seconds"                      */
	char zone[256];
	int n[F_N];
	struct comp c[F_N][BWD_CAL_COMPONENTS_MAX];
};

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* ---- parsing -------------------------------------------------------- */

struct parser {
	const char *p;
	struct draft *d;
	char *err;
	size_t errlen;
	const char *spec;
};

#define FAIL(ps, code, ...) \
	(bwd_tz_seterr((ps)->err, (ps)->errlen, __VA_ARGS__), (code))

/* A whole number, or with usec seconds with up to six decimals (the
 * seventh rounds) in microseconds; INT_MAX at most. */
static int parse_decimal(struct parser *ps, int usec, int32_t *out)
{
	const char *e = ps->p;
	uint64_t v = 0;

	if (!is_digit(*e))
		return FAIL(ps, -EINVAL, "'%s': a number expected at '%s'",
			    ps->spec, e);
	for (; is_digit(*e); e++) {
		v = v * 10 + (uint64_t)(*e - '0');
		if (v > INT_MAX)
			return FAIL(ps, -ERANGE, "'%s': number too large at "
				    "'%s'", ps->spec, ps->p);
	}
	if (usec) {
		v *= USEC;
		if (e[0] == '.' && e[1] != '.') {
			uint64_t f = 0;
			int i;

			e++;
			if (!is_digit(*e))
				return FAIL(ps, -EINVAL, "'%s': digits "
					    "expected after the decimal point "
					    "at '%s'", ps->spec, ps->p);
			for (i = 0; i < 6; i++)
				f = f * 10 + (is_digit(*e) ? (uint64_t)(*e++ -
									'0') : 0);
			if (*e >= '5' && *e <= '9')
				f++;
			while (is_digit(*e))
				e++;
			v += f;
		}
		if (v > INT_MAX)
			return FAIL(ps, -ERANGE, "'%s': number too large at "
				    "'%s'", ps->spec, ps->p);
	}
	ps->p = e;
	*out = (int32_t)v;
	return 0;
}

/* "*" or a comma-separated list of a[..b][/r]. */
static int parse_chain(struct parser *ps, int field, int usec)
{
	struct draft *d = ps->d;

	d->n[field] = 0;
	if (*ps->p == '*') {
		ps->p++;
		if (usec)
			d->c[field][d->n[field]++] = (struct comp){ 0, -1, USEC };
		return 0;
	}
	for (;;) {
		struct comp c = { 0, -1, 0 };
		const char *at = ps->p;
		int r;

		if (d->n[field] >= BWD_CAL_COMPONENTS_MAX)
			return FAIL(ps, -ENOBUFS, "'%s': more than %d "
				    "components in one field", ps->spec,
				    BWD_CAL_COMPONENTS_MAX);
		if ((r = parse_decimal(ps, usec, &c.start)) < 0)
			return r;
		if (ps->p[0] == '.' && ps->p[1] == '.') {
			ps->p += 2;
			if ((r = parse_decimal(ps, usec, &c.stop)) < 0)
				return r;
			c.repeat = usec ? USEC : 1;
		}
		if (*ps->p == '/') {
			ps->p++;
			if ((r = parse_decimal(ps, usec, &c.repeat)) < 0)
				return r;
			if (c.repeat == 0)
				return FAIL(ps, -ERANGE, "'%s': a repetition "
					    "of 0 at '%s'", ps->spec, at);
		} else if (usec && c.stop >= 0 && c.start + c.repeat > c.stop) {
			/* systemd: no sub-second range without a step. */
			return FAIL(ps, -EINVAL, "'%s': a seconds range "
				    "shorter than 1 s needs a repetition at "
				    "'%s'", ps->spec, at);
		}
		if (!strchr(" ,-~:", *ps->p))
			return FAIL(ps, -EINVAL, "'%s': unexpected '%c' at "
				    "'%s'", ps->spec, *ps->p, ps->p);
		d->c[field][d->n[field]++] = c;
		if (*ps->p != ',')
			return 0;
		ps->p++;
	}
}

static int parse_weekdays(struct parser *ps)
{
	static const char *const names[] = {
		"Monday", "Mon", "Tuesday", "Tue", "Wednesday", "Wed",
		"Thursday", "Thu", "Friday", "Fri", "Saturday", "Sat",
		"Sunday", "Sun"
	};
	int l = -1, first = 1;

	for (;;) {
		size_t i, skip = 0;
		int nr = 0;

		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			skip = strlen(names[i]);
			if (!strncasecmp(ps->p, names[i], skip))
				break;
		}
		if (i == sizeof(names) / sizeof(names[0])) {
			if (first)
				return 0;
			return FAIL(ps, -EINVAL, "'%s': a weekday expected "
				    "at '%s'", ps->spec, ps->p);
		}
		nr = (int)i / 2;
		if (!strchr("-., ", ps->p[skip]))
			return FAIL(ps, -EINVAL, "'%s': bad weekday at '%s'",
				    ps->spec, ps->p);
		ps->d->weekdays |= 1 << nr;
		if (l >= 0) {
			if (l > nr)
				return FAIL(ps, -EINVAL, "'%s': weekday range "
					    "backwards at '%s'", ps->spec,
					    ps->p);
			for (int j = l + 1; j < nr; j++)
				ps->d->weekdays |= 1 << j;
		}
		ps->p += skip;
		if (!*ps->p)
			return 0;
		if (*ps->p == ' ') {
			ps->p += strspn(ps->p, " ");
			return 0;
		}
		if (*ps->p == '.') {
			if (l >= 0 || ps->p[1] != '.')
				return FAIL(ps, -EINVAL, "'%s': bad weekday "
					    "range at '%s'", ps->spec, ps->p);
			l = nr;
			ps->p += 2;
		} else if (*ps->p == '-') {
			/* The old range syntax, still accepted. */
			if (l >= 0)
				return FAIL(ps, -EINVAL, "'%s': bad weekday "
					    "range at '%s'", ps->spec, ps->p);
			l = nr;
			ps->p++;
		} else if (*ps->p == ',') {
			l = -1;
			ps->p++;
		}
		if (!*ps->p || *ps->p == ' ') {
			ps->p += strspn(ps->p, " ");
			if (l >= 0)
				return FAIL(ps, -EINVAL, "'%s': open weekday "
					    "range", ps->spec);
			return 0;
		}
		first = 0;
	}
}

/* The separator before a date's next part: '-', or '~' (counted from the
 * month's end). */
static int date_sep(struct parser *ps)
{
	if (*ps->p == '~')
		ps->d->end_of_month = 1;
	else if (*ps->p != '-')
		return FAIL(ps, -EINVAL, "'%s': '-' expected at '%s'",
			    ps->spec, ps->p);
	ps->p++;
	return 0;
}

/* 1 for "@seconds" (nothing may follow), else 0; see systemd's
 * parse_date(): two parts are month-day, three year-month-day. */
static int parse_date(struct parser *ps)
{
	struct draft *d = ps->d;
	const char *start = ps->p;
	int r;

	if (!*ps->p)
		return 0;
	if (*ps->p == '@') {
		/* strtoul(): blanks and a sign are allowed. */
		const char *e = ps->p + 1;
		uint64_t v = 0;
		int neg = 0;

		e += strspn(e, " \t\n\v\f\r");
		if (*e == '+' || *e == '-')
			neg = *e++ == '-';
		if (!is_digit(*e))
			return FAIL(ps, -EINVAL, "'%s': seconds expected "
				    "after '@'", ps->spec);
		for (; is_digit(*e); e++) {
			if (v > (UINT64_MAX - 9) / 10)
				return FAIL(ps, -ERANGE, "'%s': '@' seconds "
					    "too large", ps->spec);
			v = v * 10 + (uint64_t)(*e - '0');
		}
		d->at = neg ? -(int64_t)v : (int64_t)v;
		d->has_at = 1;
		ps->p = e;
		return 1;
	}
	if ((r = parse_chain(ps, F_YEAR, 0)) < 0)
		return r;
	if (!*ps->p || *ps->p == ':') {
		/* A time, not a date: parse it again as the hour. */
		d->n[F_YEAR] = 0;
		ps->p = start;
		return 0;
	}
	if ((r = date_sep(ps)) < 0)
		return r;
	if ((r = parse_chain(ps, F_MONTH, 0)) < 0)
		return r;
	if (!*ps->p || *ps->p == ' ') {
		/* month-day: move the parts down */
		d->n[F_DAY] = d->n[F_MONTH];
		memcpy(d->c[F_DAY], d->c[F_MONTH],
		       sizeof(d->c[F_DAY][0]) * (size_t)d->n[F_MONTH]);
		d->n[F_MONTH] = d->n[F_YEAR];
		memcpy(d->c[F_MONTH], d->c[F_YEAR],
		       sizeof(d->c[F_MONTH][0]) * (size_t)d->n[F_YEAR]);
		d->n[F_YEAR] = 0;
		ps->p += strspn(ps->p, " ");
		return 0;
	}
	if (d->end_of_month)
		return FAIL(ps, -EINVAL, "'%s': '~' must come between month "
			    "and day", ps->spec);
	if ((r = date_sep(ps)) < 0)
		return r;
	if ((r = parse_chain(ps, F_DAY, 0)) < 0)
		return r;
	if (*ps->p && *ps->p != ' ')
		return FAIL(ps, -EINVAL, "'%s': unexpected '%s' after the "
			    "date", ps->spec, ps->p);
	ps->p += strspn(ps->p, " ");
	return 0;
}

static void const_field(struct draft *d, int field, int32_t v)
{
	d->c[field][d->n[field]++] = (struct comp){ v, -1, 0 };
}

static int parse_time(struct parser *ps)
{
	struct draft *d = ps->d;
	int r;

	if (!*ps->p) {
		const_field(ps->d, F_HOUR, 0);
		const_field(ps->d, F_MINUTE, 0);
		const_field(ps->d, F_USEC, 0);
		return 0;
	}
	if ((r = parse_chain(ps, F_HOUR, 0)) < 0)
		return r;
	if (*ps->p != ':')
		return FAIL(ps, -EINVAL, "'%s': ':' expected at '%s'",
			    ps->spec, ps->p);
	ps->p++;
	if ((r = parse_chain(ps, F_MINUTE, 0)) < 0)
		return r;
	if (!*ps->p) {
		const_field(d, F_USEC, 0);
		return 0;
	}
	if (*ps->p != ':')
		return FAIL(ps, -EINVAL, "'%s': ':' expected at '%s'",
			    ps->spec, ps->p);
	ps->p++;
	if ((r = parse_chain(ps, F_USEC, 1)) < 0)
		return r;
	if (*ps->p)
		return FAIL(ps, -EINVAL, "'%s': unexpected '%s' after the "
			    "time", ps->spec, ps->p);
	return 0;
}

static const struct {
	const char *name;
	int8_t month[4], day;   /* months (0 ends), day; -1 none */
	int8_t hour, minute, weekly;
} shorthands[] = {
	{ "minutely", { 0 }, -1, -1, -1, 0 },
	{ "hourly", { 0 }, -1, -1, 0, 0 },
	{ "daily", { 0 }, -1, 0, 0, 0 },
	{ "monthly", { 0 }, 1, 0, 0, 0 },
	{ "annually", { 1 }, 1, 0, 0, 0 },
	{ "yearly", { 1 }, 1, 0, 0, 0 },
	{ "anually", { 1 }, 1, 0, 0, 0 },
	{ "weekly", { 0 }, -1, 0, 0, 1 },
	{ "quarterly", { 1, 4, 7, 10 }, 1, 0, 0, 0 },
	{ "biannually", { 1, 7 }, 1, 0, 0, 0 },
	{ "bi-annually", { 1, 7 }, 1, 0, 0, 0 },
	{ "semiannually", { 1, 7 }, 1, 0, 0, 0 },
	{ "semi-annually", { 1, 7 }, 1, 0, 0, 0 },
};

static int shorthand(struct draft *d, const char *s)
{
	size_t i;
	int k;

	for (i = 0; i < sizeof(shorthands) / sizeof(shorthands[0]); i++) {
		if (strcasecmp(s, shorthands[i].name))
			continue;
		for (k = 0; k < 4 && shorthands[i].month[k]; k++)
			const_field(d, F_MONTH, shorthands[i].month[k]);
		if (shorthands[i].day >= 0)
			const_field(d, F_DAY, shorthands[i].day);
		if (shorthands[i].hour >= 0)
			const_field(d, F_HOUR, shorthands[i].hour);
		if (shorthands[i].minute >= 0)
			const_field(d, F_MINUTE, shorthands[i].minute);
		const_field(d, F_USEC, 0);
		if (shorthands[i].weekly)
			d->weekdays = 1;
		return 1;
	}
	return 0;
}

static int comp_cmp(const void *a, const void *b)
{
	const struct comp *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->stop != y->stop)
		return x->stop < y->stop ? -1 : 1;
	return (x->repeat > y->repeat) - (x->repeat < y->repeat);
}

/* systemd's normalize_chain(): ranges cut to a whole number of steps,
 * steps that cannot repeat dropped, sorted, duplicates removed. */
static void normalize_field(struct comp *c, int *n)
{
	int i, k;

	for (i = 0; i < *n; i++) {
		if (c[i].stop > c[i].start && c[i].repeat > 0)
			c[i].stop -= (c[i].stop - c[i].start) % c[i].repeat;
		if ((c[i].stop > c[i].start && c[i].repeat > 0 &&
		     c[i].start + c[i].repeat > c[i].stop) ||
		    c[i].start == c[i].stop) {
			c[i].repeat = 0;
			c[i].stop = -1;
		}
	}
	if (*n <= 1)
		return;
	qsort(c, (size_t)*n, sizeof(*c), comp_cmp);
	for (i = 1, k = 1; i < *n; i++)
		if (comp_cmp(&c[i], &c[k - 1]))
			c[k++] = c[i];
	*n = k;
}

/* systemd's chain_valid(). */
static int field_valid(const struct comp *c, int n, int from, int to,
		       int eom)
{
	int i;

	for (i = 0; i < n; i++) {
		/* At most 28 days from the month's end, and 3 fewer for
		 * each further component: systemd 252's chain_valid()
		 * takes 3 off again at each step of its recursion. */
		if (eom)
			to -= 3;
		if (c[i].start < from || c[i].start > to ||
		    c[i].repeat > to - from)
			return 0;
		if (c[i].stop >= 0) {
			if (c[i].stop < from || c[i].stop > to ||
			    c[i].start + c[i].repeat > c[i].stop)
				return 0;
		} else if (eom ? c[i].start - c[i].repeat < from :
				 c[i].start + c[i].repeat > to) {
			return 0;
		}
	}
	return 1;
}

static int fold(struct parser *ps, int field, int from, int to, int eom,
		const char *what)
{
	struct draft *d = ps->d;

	if (field == F_YEAR)
		for (int i = 0; i < d->n[F_YEAR]; i++) {
			struct comp *c = &d->c[F_YEAR][i];

			/* two-digit years: 12 -> 2012, 89 -> 1989 */
			if (c->start >= 0 && c->start < 100)
				c->start += c->start < 70 ? 2000 : 1900;
			if (c->stop >= 0 && c->stop < 100)
				c->stop += c->stop < 70 ? 2000 : 1900;
		}
	normalize_field(d->c[field], &d->n[field]);
	if (!field_valid(d->c[field], d->n[field], from, to, eom))
		return FAIL(ps, -EINVAL, "'%s': %s out of range (%d..%d%s, a "
			    "repetition must fit at least once)", ps->spec,
			    what, from, eom ? to - 3 : to, eom ? " from the "
			    "month's end, 3 fewer for each further one" : "");
	return 0;
}

static int draft_parse(struct parser *ps, char *body)
{
	struct draft *d = ps->d;
	size_t len = strlen(body);
	char *sp, tzerr[256] = "";
	int r;

	if (len >= 4 && !strcasecmp(body + len - 4, " UTC")) {
		d->utc = 1;
		body[len - 4] = 0;
	} else if ((sp = strrchr(body, ' ')) && sp[1]) {
		const struct bwd_tz *tz;

		/* systemd takes the last word as a zone if it is one. */
		if (!strcmp(sp + 1, "UTC")) {
			d->utc = 1;
			*sp = 0;
		} else if ((r = bwd_tz_get(sp + 1, &tz, tzerr,
					   sizeof(tzerr))) == 0) {
			snprintf(d->zone, sizeof(d->zone), "%s", sp + 1);
			d->has_zone = 1;
			*sp = 0;
		} else if (strpbrk(sp + 1, "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ")) {
			/* A last word with letters is no date or time
			 * (weekdays come first): it was meant as a zone. */
			return FAIL(ps, -EINVAL, "'%s': unknown time zone "
				    "'%s': %s", ps->spec, sp + 1, tzerr);
		}
	}
	ps->p = body;
	if (!*body)
		return FAIL(ps, -EINVAL, "'%s': empty", ps->spec);
	if (!shorthand(d, body)) {
		if ((r = parse_weekdays(ps)) < 0 || (r = parse_date(ps)) < 0)
			return r;
		if (r == 0 && (r = parse_time(ps)) < 0)
			return r;
		if (*ps->p)
			return FAIL(ps, -EINVAL, "'%s': unexpected '%s' (or an "
				    "unknown time zone)", ps->spec, ps->p);
	}
	if (d->has_at) {
		int64_t s = d->at, y;
		int m, dd;
		int64_t days = (s >= 0 ? s : s - 86399) / 86400;
		int64_t sod = s - days * 86400;

		bwd_tz_civil_from_days(days, &y, &m, &dd);
		if (y < BWD_CAL_YEAR_MIN || y > BWD_CAL_YEAR_MAX)
			return FAIL(ps, -EINVAL, "'%s': '@' outside the "
				    "years %d..%d", ps->spec,
				    BWD_CAL_YEAR_MIN, BWD_CAL_YEAR_MAX);
		memset(d->n, 0, sizeof(d->n));
		const_field(d, F_YEAR, (int32_t)y);
		const_field(d, F_MONTH, m);
		const_field(d, F_DAY, dd);
		const_field(d, F_HOUR, (int32_t)(sod / 3600));
		const_field(d, F_MINUTE, (int32_t)(sod / 60 % 60));
		const_field(d, F_USEC, (int32_t)(sod % 60) * USEC);
		d->utc = 1;
	}
	if (d->weekdays <= 0 || d->weekdays >= WEEKDAYS_ALL)
		d->weekdays = -1;
	if (d->end_of_month && d->n[F_DAY] == 0)
		d->end_of_month = 0;
	if ((r = fold(ps, F_YEAR, BWD_CAL_YEAR_MIN, BWD_CAL_YEAR_MAX, 0,
		      "year")) < 0 ||
	    (r = fold(ps, F_MONTH, 1, 12, 0, "month")) < 0 ||
	    (r = fold(ps, F_DAY, 1, 31, d->end_of_month, "day")) < 0 ||
	    (r = fold(ps, F_HOUR, 0, 23, 0, "hour")) < 0 ||
	    (r = fold(ps, F_MINUTE, 0, 59, 0, "minute")) < 0 ||
	    (r = fold(ps, F_USEC, 0, 60 * USEC - 1, 0,
		      "second (in microseconds)")) < 0)
		return r;
	return 0;
}

int bwd_cal_parse(const char *spec, struct bwd_cal **out, char *err,
		  size_t errlen)
{
	struct parser ps = { .err = err, .errlen = errlen, .spec = spec };
	struct bwd_cal *cal = NULL;
	char *body = NULL;
	size_t total = 0, k = 0;
	int r, f;

	*out = NULL;
	if (strlen(spec) >= BWD_CAL_SPEC_MAX) {
		bwd_tz_seterr(err, errlen, "calendar spec longer than %d bytes",
			      BWD_CAL_SPEC_MAX - 1);
		return -EINVAL;
	}
	ps.d = calloc(1, sizeof(*ps.d));
	body = strdup(spec);
	if (!ps.d || !body) {
		r = -ENOMEM;
		goto fail;
	}
	if ((r = draft_parse(&ps, body)) < 0)
		goto fail;
	for (f = 0; f < F_N; f++)
		total += (size_t)ps.d->n[f];
	cal = calloc(1, sizeof(*cal) + total * sizeof(cal->comps[0]));
	if (!cal) {
		r = -ENOMEM;
		goto fail;
	}
	r = bwd_tz_get(ps.d->utc ? "UTC" : ps.d->has_zone ? ps.d->zone : "",
		       &cal->tz, err, errlen);
	if (r < 0)
		goto fail;
	cal->weekdays = (int16_t)ps.d->weekdays;
	cal->end_of_month = (uint8_t)ps.d->end_of_month;
	cal->utc = (uint8_t)ps.d->utc;
	cal->has_zone = (uint8_t)ps.d->has_zone;
	for (f = 0; f < F_N; f++) {
		cal->first[f] = (uint16_t)k;
		cal->n[f] = (uint16_t)ps.d->n[f];
		memcpy(&cal->comps[k], ps.d->c[f],
		       sizeof(cal->comps[0]) * (size_t)ps.d->n[f]);
		k += (size_t)ps.d->n[f];
	}
	*out = cal;
	cal = NULL;
	r = 0;
fail:
	free(cal);
	free(body);
	free(ps.d);
	return r;
}

size_t bwd_cal_bytes(const struct bwd_cal *cal)
{
	size_t n = 0;

	for (int f = 0; f < F_N; f++)
		n += cal->n[f];
	return sizeof(*cal) + n * sizeof(cal->comps[0]);
}

void bwd_cal_free(struct bwd_cal *cal)
{
	free(cal);
}

const struct bwd_tz *bwd_cal_zone(const struct bwd_cal *cal)
{
	return cal->tz;
}

/* ---- the normalized form -------------------------------------------- */

struct out {
	char *buf;
	size_t len, at;
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->buf + (o->at < o->len ? o->at : o->len),
		      o->at < o->len ? o->len - o->at : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->at += (size_t)n;
}

static void put_weekdays(struct out *o, int bits)
{
	static const char *const days[] = { "Mon", "Tue", "Wed", "Thu",
					    "Fri", "Sat", "Sun" };
	int x, l = -1, comma = 0;

	for (x = 0; x <= 7; x++) {
		if (x < 7 && (bits & (1 << x))) {
			if (l < 0) {
				put(o, "%s%s", comma ? "," : "", days[x]);
				comma = 1;
				l = x;
			}
		} else if (l >= 0) {
			if (x > l + 1)
				put(o, "%s%s", x > l + 2 ? ".." : ",",
				    days[x - 1]);
			l = -1;
		}
	}
	put(o, " ");
}

static void put_field(struct out *o, const struct bwd_cal *cal, int f,
		      int width)
{
	const struct comp *c = &cal->comps[cal->first[f]];
	int d = f == F_USEC ? USEC : 1, i;

	for (i = 0; i < cal->n[f]; i++)
		if (f == F_USEC && c[i].start == 0 && c[i].stop < 0 &&
		    c[i].repeat == USEC)
			break;
	if (cal->n[f] == 0 || i < cal->n[f]) {
		put(o, "*");
		return;
	}
	for (i = 0; i < cal->n[f]; i++) {
		put(o, "%s%0*d", i ? "," : "", width, c[i].start / d);
		if (c[i].start % d > 0)
			put(o, ".%06d", c[i].start % d);
		if (c[i].stop > 0)
			put(o, "..%0*d", width, c[i].stop / d);
		if (c[i].stop % d > 0)
			put(o, ".%06d", c[i].stop % d);
		if (c[i].repeat > 0 && !(c[i].stop > 0 && c[i].repeat == d))
			put(o, "/%d", c[i].repeat / d);
		if (c[i].repeat % d > 0)
			put(o, ".%06d", c[i].repeat % d);
	}
}

int bwd_cal_normalize(const struct bwd_cal *cal, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };

	if (cal->weekdays > 0)
		put_weekdays(&o, cal->weekdays);
	put_field(&o, cal, F_YEAR, 4);
	put(&o, "-");
	put_field(&o, cal, F_MONTH, 2);
	put(&o, cal->end_of_month ? "~" : "-");
	put_field(&o, cal, F_DAY, 2);
	put(&o, " ");
	put_field(&o, cal, F_HOUR, 2);
	put(&o, ":");
	put_field(&o, cal, F_MINUTE, 2);
	put(&o, ":");
	put_field(&o, cal, F_USEC, 2);
	if (cal->utc)
		put(&o, " UTC");
	else if (cal->has_zone)
		put(&o, " %s", bwd_tz_name(cal->tz));
	return o.at < len ? 0 : -ENOSPC;
}

/* ---- the next elapse ------------------------------------------------- */

/* A broken-down local time as struct tm has it, fields possibly out of
 * range until normalized; year is the full year. */
struct ltm {
	int year, mon, mday, hour, min, sec, wday;
	int isdst;              /* tm_isdst: asked of mk_time, then its own */
};

/* glibc's mktime() on one zone, with its memory of the last offset. */
struct mk {
	const struct bwd_tz *tz;
	int utc;
	int64_t guess;          /* seconds east: the last result's local - t */
};

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

static int64_t ltm_linear(const struct ltm *tm)
{
	int64_t y = tm->year + floor_div(tm->mon, 12);
	int mon = (int)(tm->mon - floor_div(tm->mon, 12) * 12);

	return (bwd_tz_days_from_civil(y, mon + 1, 1) + tm->mday - 1) * 86400 +
	       (int64_t)tm->hour * 3600 + (int64_t)tm->min * 60 + tm->sec;
}

static void ltm_from(struct ltm *tm, int64_t local)
{
	int64_t days = floor_div(local, 86400), sod = local - days * 86400;
	int64_t y;

	bwd_tz_civil_from_days(days, &y, &tm->mon, &tm->mday);
	tm->year = (int)y;
	tm->mon--;
	tm->hour = (int)(sod / 3600);
	tm->min = (int)(sod / 60 % 60);
	tm->sec = (int)(sod % 60);
	tm->wday = (int)((days % 7 + 11) % 7);      /* 0 Sunday */
}

static int32_t utoff(const struct mk *m, int64_t t, int *isdst)
{
	if (m->utc) {
		*isdst = 0;
		return 0;
	}
	return bwd_tz_utoff(m->tz, t, isdst);
}

/*
 * mktime(tm) (timegm() for UTC): normalizes *tm, sets *t, 0; or -1 and *tm
 * untouched.  glibc 2.36's algorithm: probe from the last offset, follow
 * the error at most 6 times; when the probes swing between two instants
 * (a gap), take the one whose daylight-saving flag differs from tm's (with
 * tm_isdst -1 the later one, see below); when the match found has the
 * wrong flag, look for that flag a week at a time either way and take
 * that offset.
 */
static int mk_time(struct mk *m, struct ltm *tm, int64_t *t)
{
	int64_t local = ltm_linear(tm), x, x1, x2;
	int probes = 6, isdst, want = tm->isdst;
	int32_t off;

	if (m->utc) {
		*t = local;
		ltm_from(tm, local);
		tm->isdst = 0;
		return 0;
	}
	x = x1 = x2 = local - m->guess;
	for (;;) {
		int64_t dt;

		off = utoff(m, x, &isdst);
		dt = local - (x + off);
		if (dt == 0)
			break;
		if (x == x1 && x != x2 && want < 0) {
			/* A gap: glibc takes the daylight-saving side,
			 * the later one for positive daylight saving;
			 * Debian's systemd 252.39, with the fix of systemd
			 * PR 36897, ends up at the later one for negative
			 * daylight saving (Europe/Dublin) too. */
			if (x < x2) {
				x = x2;
				off = utoff(m, x, &isdst);
			}
			goto found;
		}
		if (x == x1 && x != x2 && (want != 0) != isdst)
			goto found;
		if (--probes == 0)
			return -1;
		x1 = x2;
		x2 = x;
		x += dt;
	}
	if (want >= 0 && (want != 0) != isdst) {
		int64_t delta;

		for (delta = 601200; delta < 536454000 / 2 + 601200;
		     delta += 601200)
			for (int dir = -1; dir <= 1; dir += 2) {
				int64_t ot = x + delta * dir;
				int od;
				int32_t oo = utoff(m, ot, &od);

				if ((want != 0) == od) {
					x = ot + (local - (ot + oo));
					off = utoff(m, x, &isdst);
					goto found;
				}
			}
		return -1;
	}
found:
	m->guess = local - x;
	*t = x;
	ltm_from(tm, x + off);
	tm->isdst = isdst;
	return 0;
}

/* systemd's find_end_of_month(): the day'th last day of tm's month. */
static int end_of_month(struct mk *m, const struct ltm *tm, int day)
{
	struct ltm t = *tm;
	int64_t x;

	t.mon++;
	t.mday = 1 - day;
	if (mk_time(m, &t, &x) < 0 || t.mon != tm->mon)
		return -1;
	return t.mday;
}

/* systemd's find_matching_component(): the earliest value >= *val a
 * component allows; 1 if *val changed, 0 if not, -ENOENT if none. */
static int match(const struct bwd_cal *cal, int f, struct mk *m,
		 const struct ltm *tm, int *val)
{
	const struct comp *c = &cal->comps[cal->first[f]];
	int i, d = -1, dset = 0, r;

	if (cal->n[f] == 0)
		return 0;
	for (i = 0; i < cal->n[f]; i++) {
		int start = c[i].start, stop = c[i].stop;

		if (f == F_DAY && cal->end_of_month) {
			start = end_of_month(m, tm, c[i].start);
			stop = end_of_month(m, tm, c[i].stop);
			if (stop > 0) {
				int x = start;

				start = stop;
				stop = x;
			}
		}
		if (start >= *val) {
			if (!dset || start < d) {
				d = start;
				dset = 1;
			}
		} else if (c[i].repeat > 0) {
			int k = start + c[i].repeat * ((*val - start +
						       c[i].repeat - 1) /
						      c[i].repeat);

			if ((!dset || k < d) && (stop < 0 || k <= stop)) {
				d = k;
				dset = 1;
			}
		}
	}
	if (!dset)
		return -ENOENT;
	r = *val != d;
	*val = d;
	return r;
}

/* systemd's tm_within_bounds(): 1 if tm is a valid time as it is; 0 if
 * it normalized forward (tm moved there, the field below the one that
 * moved reset); < 0 if backward or out of range. */
static int within(struct mk *m, struct ltm *tm)
{
	struct ltm t = *tm;
	int64_t x;
	int cmp;

	if (tm->year > BWD_CAL_YEAR_MAX)
		return -ERANGE;
	if (mk_time(m, &t, &x) < 0)
		return -EOVERFLOW;
#define CMP(a, b) (((a) > (b)) - ((a) < (b)))
	if ((cmp = CMP(t.year, tm->year)) != 0)
		t.mon = 0;
	else if ((cmp = CMP(t.mon, tm->mon)) != 0)
		t.mday = 1;
	else if ((cmp = CMP(t.mday, tm->mday)) != 0)
		t.hour = 0;
	else if ((cmp = CMP(t.hour, tm->hour)) != 0)
		t.min = 0;
	else if ((cmp = CMP(t.min, tm->min)) != 0)
		t.sec = 0;
	else
		cmp = CMP(t.sec, tm->sec);
#undef CMP
	if (cmp < 0)
		return -EDEADLK;
	if (cmp > 0)
		*tm = t;
	return cmp == 0;
}

static int weekday_ok(const struct bwd_cal *cal, struct mk *m,
		      const struct ltm *tm)
{
	struct ltm t = *tm;
	int64_t x;

	if (cal->weekdays < 0)
		return 1;
	if (mk_time(m, &t, &x) < 0)
		return 0;
	return !!(cal->weekdays & (1 << (t.wday == 0 ? 6 : t.wday - 1)));
}

static int find_next(const struct bwd_cal *cal, struct mk *m,
		     struct ltm *tm, int *usec)
{
	struct ltm c = *tm;
	int us = *usec, r, round;
	int64_t x;

	for (round = 0; round < MAX_ROUNDS; round++) {
		(void)mk_time(m, &c, &x);
		c.isdst = -1;

		r = match(cal, F_YEAR, m, &c, &c.year);
		if (r > 0) {
			c.mon = 0;
			c.mday = 1;
			c.hour = c.min = c.sec = us = 0;
		}
		if (r < 0)
			return r;
		if (within(m, &c) <= 0)
			return -ENOENT;

		c.mon++;
		r = match(cal, F_MONTH, m, &c, &c.mon);
		c.mon--;
		if (r > 0) {
			c.mday = 1;
			c.hour = c.min = c.sec = us = 0;
		}
		if (r < 0 || (r = within(m, &c)) < 0) {
			c.year++;
			c.mon = 0;
			c.mday = 1;
			c.hour = c.min = c.sec = us = 0;
			continue;
		}
		if (r == 0)
			continue;

		r = match(cal, F_DAY, m, &c, &c.mday);
		if (r > 0)
			c.hour = c.min = c.sec = us = 0;
		if (r < 0 || (r = within(m, &c)) < 0) {
			c.mon++;
			c.mday = 1;
			c.hour = c.min = c.sec = us = 0;
			continue;
		}
		if (r == 0)
			continue;

		if (!weekday_ok(cal, m, &c)) {
			c.mday++;
			c.hour = c.min = c.sec = us = 0;
			continue;
		}

		r = match(cal, F_HOUR, m, &c, &c.hour);
		if (r > 0)
			c.min = c.sec = us = 0;
		if (r < 0 || (r = within(m, &c)) < 0) {
			c.mday++;
			c.hour = c.min = c.sec = us = 0;
			continue;
		}
		if (r == 0)
			continue;

		r = match(cal, F_MINUTE, m, &c, &c.min);
		if (r > 0)
			c.sec = us = 0;
		if (r < 0 || (r = within(m, &c)) < 0) {
			c.hour++;
			c.min = c.sec = us = 0;
			continue;
		}
		if (r == 0)
			continue;

		c.sec = c.sec * USEC + us;
		r = match(cal, F_USEC, m, &c, &c.sec);
		us = c.sec % USEC;
		c.sec /= USEC;
		if (r < 0 || (r = within(m, &c)) < 0) {
			c.min++;
			c.sec = us = 0;
			continue;
		}
		if (r == 0)
			continue;

		*tm = c;
		*usec = us;
		return 0;
	}
	return -EDEADLK;
}

int bwd_cal_next(const struct bwd_cal *cal, uint64_t after_ns,
		 uint64_t *next_ns)
{
	struct mk m = { cal->tz, cal->utc, 0 };
	uint64_t us = after_ns / 1000;
	struct ltm tm;
	int64_t t;
	int32_t off;
	int usec, isdst, r;

	if (us > FORMATTABLE_MAX_US)
		return -EINVAL;
	us++;
	t = (int64_t)(us / USEC);
	usec = (int)(us % USEC);
	/* localtime(), and what mktime() learns from its first call, which
	 * has localtime()'s tm_isdst: this very instant. */
	off = utoff(&m, t, &isdst);
	m.guess = off;
	ltm_from(&tm, t + off);
	tm.isdst = isdst;
	r = find_next(cal, &m, &tm, &usec);
	if (r < 0)
		return r;
	if (mk_time(&m, &tm, &t) < 0 || t < 0)
		return -EINVAL;
	*next_ns = ((uint64_t)t * USEC + (uint64_t)usec) * 1000;
	return 0;
}
