/*
 * tz.c - time zones from the system tz database, for calendar timers.
 *
 * Why not glibc: localtime_r() and mktime() read one process-global zone
 * (TZ), and the daemon evaluates thousands of timers each in its own zone;
 * switching TZ per computation is neither cheap nor safe (systemd forks a
 * process per computation for that).  ICU would be a new dependency for a
 * few hundred lines.  The data, tzdata, is the part that needs keeping up,
 * and it stays the system's.
 *
 * Reads TZif files (RFC 8536, versions 1 to 4): the 64-bit data block of
 * version 2 and later (the 32-bit one of version 1 files), and for
 * instants after the last transition the POSIX TZ string of the footer
 * (std offset [dst [offset] [,start[/time],end[/time]]] with the Jn, n and
 * Mm.w.d date forms; times from -167 to 167 hours, RFC 8536 section 3.3.1).
 * Leap-second records are skipped: Debian's zoneinfo holds POSIX time.
 *
 * Data layout: one struct bwd_tz per zone, its transitions (int64 UTC
 * seconds, ascending) and their type indexes in one allocation with the
 * types, kept in a list (the cache, BWD_TZ_CACHE_MAX zones at most) keyed
 * by the name asked for, loaded once and read-only after: computations
 * allocate nothing.  Not thread-safe (the daemon is one thread).
 *
 * Costs: bwd_tz_lookup is a binary search over the transitions (about 240
 * in a European zone: 8 steps) or, past the table, the footer rule's two
 * transitions of that year, O(1); bwd_tz_local_to_utc is three lookups.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "calendar-internal.h"

/* A transition date of a POSIX TZ rule. */
struct tz_date {
	char kind;             /* 'J' (1..365, no Feb 29), 'n' (0..365), 'M' */
	int m, w, d;           /* Mm.w.d; n: day in m                       */
	int32_t time;          /* seconds after local midnight, may be < 0 */
};

struct tz_rule {
	int32_t std_off, dst_off;       /* seconds east                     */
	int has_dst;
	char std_abbr[16], dst_abbr[16];
	struct tz_date start, end;      /* start in std time, end in dst    */
};

struct tz_type {
	int32_t utoff;
	uint8_t isdst;
	char abbr[16];
};

struct bwd_tz {
	struct bwd_tz *next;            /* the cache's list                 */
	char name[256];
	uint32_t ntrans, ntypes;
	int64_t *trans;
	uint8_t *idx;
	struct tz_type *types;
	int has_rule;
	struct tz_rule rule;
};

static struct bwd_tz *cache;
static unsigned cached;

void bwd_tz_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- civil dates (proleptic Gregorian, H. Hinnant's algorithms) ----- */

int64_t bwd_tz_days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

void bwd_tz_civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
	int64_t era, doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = z - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int64_t year_of(int64_t secs)
{
	int64_t z = (secs >= 0 ? secs : secs - 86399) / 86400 + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;

	return yoe + era * 400 + (mp >= 10);
}

/* ---- POSIX TZ strings ------------------------------------------------ */

static const char *rule_name(const char *p, char *out)
{
	size_t n = 0;

	if (*p == '<') {
		for (p++; *p && *p != '>'; p++)
			if (n < 15)
				out[n++] = *p;
		if (*p != '>')
			return NULL;
		p++;
	} else {
		while (isalpha((unsigned char)*p))
			if (n < 15)
				out[n++] = *p++;
			else
				p++;
	}
	out[n] = 0;
	return n >= 3 ? p : NULL;
}

/* [+-]hh[:mm[:ss]], hh up to max_h. */
static const char *rule_hms(const char *p, int max_h, int32_t *out)
{
	int sign = 1, part = 0;
	int32_t v[3] = { 0, 0, 0 };

	if (*p == '+' || *p == '-')
		sign = *p++ == '-' ? -1 : 1;
	for (;;) {
		int digits = 0;

		while (isdigit((unsigned char)*p) && digits < 3) {
			v[part] = v[part] * 10 + (*p++ - '0');
			digits++;
		}
		if (!digits)
			return NULL;
		if (part >= 2 || *p != ':')
			break;
		p++;
		part++;
	}
	if (v[0] > max_h || v[1] > 59 || v[2] > 59)
		return NULL;
	*out = sign * (v[0] * 3600 + v[1] * 60 + v[2]);
	return p;
}

static const char *rule_num(const char *p, int lo, int hi, int *out)
{
	int v = 0, digits = 0;

	while (isdigit((unsigned char)*p) && digits < 4) {
		v = v * 10 + (*p++ - '0');
		digits++;
	}
	if (!digits || v < lo || v > hi)
		return NULL;
	*out = v;
	return p;
}

static const char *rule_date(const char *p, struct tz_date *d)
{
	d->time = 7200;
	d->m = d->w = d->d = 0;
	if (*p == 'M') {
		d->kind = 'M';
		if (!(p = rule_num(p + 1, 1, 12, &d->m)) || *p++ != '.' ||
		    !(p = rule_num(p, 1, 5, &d->w)) || *p++ != '.' ||
		    !(p = rule_num(p, 0, 6, &d->d)))
			return NULL;
	} else if (*p == 'J') {
		d->kind = 'J';
		if (!(p = rule_num(p + 1, 1, 365, &d->d)))
			return NULL;
	} else {
		d->kind = 'n';
		if (!(p = rule_num(p, 0, 365, &d->d)))
			return NULL;
	}
	if (*p == '/')
		p = rule_hms(p + 1, 167, &d->time);
	return p;
}

/* A POSIX TZ string; 0 and r->has_dst 0 for a fixed offset. */
static int rule_parse(const char *s, struct tz_rule *r)
{
	const char *p = s;
	int32_t off;

	memset(r, 0, sizeof(*r));
	if (!(p = rule_name(p, r->std_abbr)) || !(p = rule_hms(p, 24, &off)))
		return -EBADMSG;
	r->std_off = r->dst_off = -off;
	if (!*p)
		return 0;
	if (!(p = rule_name(p, r->dst_abbr)))
		return -EBADMSG;
	r->has_dst = 1;
	r->dst_off = r->std_off + 3600;
	if (*p && *p != ',') {
		if (!(p = rule_hms(p, 24, &off)))
			return -EBADMSG;
		r->dst_off = -off;
	}
	if (!*p) {
		/* POSIX leaves the dates to the implementation; glibc's. */
		r->start = (struct tz_date){ 'M', 3, 2, 0, 7200 };
		r->end = (struct tz_date){ 'M', 11, 1, 0, 7200 };
		return 0;
	}
	if (*p++ != ',' || !(p = rule_date(p, &r->start)) || *p++ != ',' ||
	    !(p = rule_date(p, &r->end)) || *p)
		return -EBADMSG;
	return 0;
}

/* Seconds from the epoch to local midnight of d in year y, plus d->time. */
static int64_t rule_local(const struct tz_date *d, int64_t y)
{
	int64_t day;

	if (d->kind == 'J')
		day = bwd_tz_days_from_civil(y, 1, 1) + d->d - 1 +
		      (is_leap(y) && d->d >= 60);
	else if (d->kind == 'n')
		day = bwd_tz_days_from_civil(y, 1, 1) + d->d;
	else {
		int64_t first = bwd_tz_days_from_civil(y, d->m, 1);
		/* 1970-01-01 was a Thursday (4). */
		int wd = (int)(((first % 7) + 11) % 7);
		int mdays = d->m == 12 ? 31 : (int)(bwd_tz_days_from_civil(
				y, d->m + 1, 1) - first);

		day = (d->d - wd + 7) % 7 + 7 * (d->w - 1);
		if (day >= mdays)
			day -= 7;
		day += first;
	}
	return day * 86400 + d->time;
}

static int rule_isdst(const struct tz_rule *r, int64_t t)
{
	int64_t y, s, e;

	if (!r->has_dst)
		return 0;
	/* The year by UTC, as glibc's __tz_compute() takes it. */
	y = year_of(t);
	s = rule_local(&r->start, y) - r->std_off;
	e = rule_local(&r->end, y) - r->dst_off;
	if (s <= e)
		return t >= s && t < e;
	return !(t >= e && t < s);
}

/* ---- TZif ----------------------------------------------------------- */

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64(const unsigned char *p)
{
	return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

struct tzif_hdr {
	uint32_t isut, isstd, leap, time, type, chars;
};

static size_t tzif_block(const struct tzif_hdr *h, size_t tsize)
{
	return h->time * (tsize + 1) + h->type * 6 + h->chars +
	       h->leap * (tsize + 4) + h->isstd + h->isut;
}

static int tzif_header(const unsigned char *p, size_t len,
		       struct tzif_hdr *h)
{
	if (len < 44 || memcmp(p, "TZif", 4))
		return -EBADMSG;
	h->isut = be32(p + 20);
	h->isstd = be32(p + 24);
	h->leap = be32(p + 28);
	h->time = be32(p + 32);
	h->type = be32(p + 36);
	h->chars = be32(p + 40);
	if (h->type == 0 || h->type > 256 || h->chars == 0 ||
	    h->time > 100000 || h->leap > 100000 || h->chars > 100000 ||
	    (h->isut && h->isut != h->type) ||
	    (h->isstd && h->isstd != h->type))
		return -EBADMSG;
	return 0;
}

static int tzif_parse(const unsigned char *buf, size_t len,
		      struct bwd_tz *tz)
{
	struct tzif_hdr h;
	const unsigned char *p = buf, *chars;
	size_t tsize = 4;
	uint32_t i;
	int r;

	if ((r = tzif_header(p, len, &h)) < 0)
		return r;
	if (buf[4] >= '2') {
		size_t skip = 44 + tzif_block(&h, 4);

		if (skip > len || (r = tzif_header(p + skip, len - skip,
						     &h)) < 0)
			return -EBADMSG;
		p += skip;
		tsize = 8;
	}
	if ((size_t)(p - buf) + 44 + tzif_block(&h, tsize) > len)
		return -EBADMSG;
	p += 44;
	tz->ntrans = h.time;
	tz->ntypes = h.type;
	tz->trans = calloc(h.time + 1, sizeof(*tz->trans));
	tz->idx = calloc(h.time + 1, 1);
	tz->types = calloc(h.type, sizeof(*tz->types));
	if (!tz->trans || !tz->idx || !tz->types)
		return -ENOMEM;
	for (i = 0; i < h.time; i++, p += tsize) {
		tz->trans[i] = tsize == 8 ? be64(p) : (int32_t)be32(p);
		if (i && tz->trans[i] <= tz->trans[i - 1])
			return -EBADMSG;
	}
	for (i = 0; i < h.time; i++)
		if ((tz->idx[i] = *p++) >= h.type)
			return -EBADMSG;
	chars = p + h.type * 6;
	for (i = 0; i < h.type; i++, p += 6) {
		int32_t off = (int32_t)be32(p);
		size_t a = p[5], n;

		/* RFC 8536 3.2: -89999 ... 93599 seconds. */
		if (off < -89999 || off > 93599 || p[4] > 1 || a >= h.chars)
			return -EBADMSG;
		tz->types[i].utoff = off;
		tz->types[i].isdst = p[4];
		n = strnlen((const char *)chars + a, h.chars - a);
		if (n >= sizeof(tz->types[i].abbr))
			n = sizeof(tz->types[i].abbr) - 1;
		memcpy(tz->types[i].abbr, chars + a, n);
	}
	p = chars + h.chars + h.leap * (tsize + 4) + h.isstd + h.isut;
	tz->has_rule = 0;
	if (tsize == 8 && p < buf + len) {
		const unsigned char *end;
		char footer[128];

		if (*p != '\n' || !(end = memchr(p + 1, '\n',
					       (size_t)(buf + len - p - 1))))
			return -EBADMSG;
		if (end > p + 1) {
			if ((size_t)(end - p - 1) >= sizeof(footer))
				return -EBADMSG;
			memcpy(footer, p + 1, (size_t)(end - p - 1));
			footer[end - p - 1] = 0;
			if ((r = rule_parse(footer, &tz->rule)) < 0)
				return r;
			tz->has_rule = 1;
		}
	}
	return 0;
}

static int tz_load_file(const char *path, struct bwd_tz *tz, char *err,
			size_t errlen)
{
	unsigned char *buf = NULL;
	struct stat st;
	ssize_t got;
	size_t len = 0;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		bwd_tz_seterr(err, errlen, "time zone file %s: %s", path,
			      strerror(errno));
		return r == -ENOTDIR ? -ENOENT : r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > BWD_TZ_FILE_MAX) {
		bwd_tz_seterr(err, errlen, "time zone file %s: not a regular file "
			      "of at most %d bytes", path, BWD_TZ_FILE_MAX);
		r = -EBADMSG;
		goto fail;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		r = -ENOMEM;
		goto fail;
	}
	while (len < (size_t)st.st_size &&
	       (got = read(fd, buf + len, (size_t)st.st_size - len)) > 0)
		len += (size_t)got;
	r = tzif_parse(buf, len, tz);
	if (r == -EBADMSG)
		bwd_tz_seterr(err, errlen, "time zone file %s: not a valid TZif "
			      "file (RFC 8536)", path);
fail:
	free(buf);
	close(fd);
	return r;
}

/* systemd's verify_timezone() rules, so both accept the same names. */
static int name_ok(const char *name)
{
	const char *p;
	int slash = 1;

	if (name[0] == '/' || strlen(name) >= 200)
		return 0;
	for (p = name; *p; p++) {
		if (!isalnum((unsigned char)*p) && !strchr("-_+/", *p))
			return 0;
		if (*p == '/' && slash)
			return 0;
		slash = *p == '/';
	}
	return !slash;
}

static void tz_free(struct bwd_tz *tz)
{
	if (!tz)
		return;
	free(tz->trans);
	free(tz->idx);
	free(tz->types);
	free(tz);
}

const char *bwd_tz_dir(void)
{
	const char *dir = getenv("TZDIR");

	return dir && *dir == '/' ? dir : BWD_TZ_DIR;
}

static int tz_load(const char *name, struct bwd_tz *tz, char *err,
		   size_t errlen)
{
	char path[512];
	const char *tzenv;

	if (!strcmp(name, "UTC")) {
		tz->has_rule = 1;
		return rule_parse("UTC0", &tz->rule);
	}
	if (*name) {
		if (!name_ok(name)) {
			bwd_tz_seterr(err, errlen, "time zone name '%s': not an IANA "
				      "name (letters, digits, -_+/, relative, no "
				      "empty or dot parts)", name);
			return -EINVAL;
		}
		snprintf(path, sizeof(path), "%s/%s", bwd_tz_dir(), name);
		return tz_load_file(path, tz, err, errlen);
	}
	tzenv = getenv("TZ");
	if (!tzenv) {
		int r = tz_load_file("/etc/localtime", tz, NULL, 0);

		/* glibc's fallback too: no /etc/localtime is UTC. */
		return r == -ENOENT ? tz_load("UTC", tz, err, errlen) : r;
	}
	if (*tzenv == ':')
		tzenv++;
	if (!*tzenv || !strcmp(tzenv, "UTC"))
		return tz_load("UTC", tz, err, errlen);
	if (*tzenv == '/')
		return tz_load_file(tzenv, tz, err, errlen);
	if (name_ok(tzenv)) {
		snprintf(path, sizeof(path), "%s/%s", bwd_tz_dir(), tzenv);
		if (tz_load_file(path, tz, NULL, 0) == 0)
			return 0;
	}
	/* A POSIX TZ string ("CET-1CEST,M3.5.0,M10.5.0/3"). */
	if (rule_parse(tzenv, &tz->rule) == 0) {
		tz->has_rule = 1;
		return 0;
	}
	bwd_tz_seterr(err, errlen, "TZ='%s': neither a zone of %s nor a POSIX TZ "
		      "string", tzenv, bwd_tz_dir());
	return -EINVAL;
}

int bwd_tz_get(const char *name, const struct bwd_tz **out, char *err,
	       size_t errlen)
{
	struct bwd_tz *tz;
	int r;

	if (!name)
		name = "";
	for (tz = cache; tz; tz = tz->next)
		if (!strcmp(tz->name, name)) {
			*out = tz;
			return 0;
		}
	if (strlen(name) >= sizeof(tz->name)) {
		bwd_tz_seterr(err, errlen, "time zone name too long");
		return -EINVAL;
	}
	if (cached >= BWD_TZ_CACHE_MAX) {
		bwd_tz_seterr(err, errlen, "more than %d time zones in use",
			      BWD_TZ_CACHE_MAX);
		return -ENOSPC;
	}
	tz = calloc(1, sizeof(*tz));
	if (!tz)
		return -ENOMEM;
	strcpy(tz->name, name);
	r = tz_load(name, tz, err, errlen);
	if (r < 0)
		goto fail;
	tz->next = cache;
	cache = tz;
	cached++;
	*out = tz;
	return 0;
fail:
	tz_free(tz);
	return r;
}

void bwd_tz_cache_clear(void)
{
	while (cache) {
		struct bwd_tz *next = cache->next;

		tz_free(cache);
		cache = next;
	}
	cached = 0;
}

const char *bwd_tz_name(const struct bwd_tz *tz)
{
	return tz->name;
}

/* The type in force at t; past the table with a rule, *isdst says which
 * of the rule's two and the result is NULL. */
static const struct tz_type *type_at(const struct bwd_tz *tz, int64_t t,
				     int *isdst)
{
	uint32_t lo = 0, hi;

	if (tz->ntrans == 0 || t >= tz->trans[tz->ntrans - 1]) {
		if (tz->has_rule) {
			*isdst = rule_isdst(&tz->rule, t);
			return NULL;
		}
		return &tz->types[tz->ntrans ? tz->idx[tz->ntrans - 1] : 0];
	}
	/* RFC 8536 3.2: before the first transition, type 0. */
	if (t < tz->trans[0])
		return &tz->types[0];
	/* trans[lo] <= t < trans[hi] */
	hi = tz->ntrans - 1;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (tz->trans[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	return &tz->types[tz->idx[lo]];
}

int32_t bwd_tz_utoff(const struct bwd_tz *tz, int64_t t, int *isdst)
{
	const struct tz_type *ty = type_at(tz, t, isdst);

	if (!ty)
		return *isdst ? tz->rule.dst_off : tz->rule.std_off;
	*isdst = ty->isdst;
	return ty->utoff;
}

int bwd_tz_lookup(const struct bwd_tz *tz, int64_t t,
		  struct bwd_tz_info *out)
{
	const struct tz_type *ty = type_at(tz, t, &out->isdst);

	if (!ty) {
		out->utoff = out->isdst ? tz->rule.dst_off : tz->rule.std_off;
		memcpy(out->abbr, out->isdst ? tz->rule.dst_abbr :
		       tz->rule.std_abbr, sizeof(out->abbr));
		return 0;
	}
	out->utoff = ty->utoff;
	out->isdst = ty->isdst;
	memcpy(out->abbr, ty->abbr, sizeof(out->abbr));
	return 0;
}

int bwd_tz_local_to_utc(const struct bwd_tz *tz, int64_t local,
			int64_t out[2], int *n)
{
	/* Offsets differ by less than 26 h and transitions of one zone lie
	 * more than that apart, so the offsets in force a day either side
	 * are the only candidates. */
	int64_t probe[3] = { local - 93600, local, local + 93600 };
	int i, k = 0;

	for (i = 0; i < 3; i++) {
		int dst;
		int32_t off = bwd_tz_utoff(tz, probe[i], &dst);
		int64_t t = local - off;

		if (bwd_tz_utoff(tz, t, &dst) != off || (k && out[k - 1] == t) ||
		    (k == 2 && out[0] == t))
			continue;
		if (k == 2)
			break;
		out[k++] = t;
	}
	if (k == 2 && out[0] > out[1]) {
		int64_t x = out[0];

		out[0] = out[1];
		out[1] = x;
	}
	*n = k;
	return 0;
}
