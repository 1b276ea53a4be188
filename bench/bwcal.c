/*
 * bwcal.c - what a calendar event's next elapse costs (issue 24): the
 * daemon's bwd_cal_next() (daemon/calendar.c, built in) for the forms of
 * systemd.time(7), without a zone, in UTC and in zones with daylight
 * saving or odd offsets, beside systemd 252's own calendar_spec_next_usec()
 * (dlopen()ed from libsystemd-shared when it is there: systemd's private
 * library, whose calendar code systemd-analyze calendar runs).
 *
 * Per form, three figures, each the median of --repeat runs:
 *   row     the next elapse after the previous one, --elapses in a row from
 *           2026-01-01 (what a recurring timer costs per fire);
 *   cold    the next elapse after a random instant of 2026-2035 (a timer's
 *           first computation, or one after a clock step);
 *   systemd calendar_spec_next_usec() in a row: for a spec with a zone,
 *           systemd forks a child per call to compute in that zone, which
 *           the figure includes (its runs are capped at 0.3 s).
 * Times are wall-clock ns per elapse (CLOCK_MONOTONIC: systemd's children
 * would escape a CPU clock); the machine's load shows in them, so compare
 * the columns of one run.  A spec with no elapse left ("*-02-30") costs a
 * whole search to 2199 each time: its "row" restarts from the base.
 *
 * Usage: bwcal [--elapses N] [--repeat R] [--no-systemd]
 * Output: a Markdown table on stdout (bench/README.md, "Calendar events").
 * The zone of specs without one is $TZ's, UTC when unset.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calendar-internal.h"

#define NS 1000000000ull
#define BASE_2026 1767225600ull        /* 2026-01-01 00:00:00 UTC */
#define SPAN_10Y (3652ull * 86400)
#define SYSTEMD_LIB "/usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so"
#define SYSTEMD_BUDGET_NS (300 * 1000000ull)
#define REPEAT_MAX 31

static const char *const forms[] = {
	"minutely", "hourly", "daily", "weekly", "monthly", "quarterly",
	"yearly", "*:0/15", "*:*:0/0.5", "Mon..Fri 09:00", "Sat,Sun 10:00",
	"Mon,Fri *-*-3,1,2 *:30:45", "mon,fri *-1/2-1,3 *:30:45",
	"*-02~01", "Mon *-05~07/1", "*-02-29 12:00", "12..14:10,20,30",
	"daily UTC", "Mon..Fri 09:00 UTC",
	"Mon..Fri *-*-* 09:00:00 Europe/Berlin", "*-*-* 02:30 Europe/Berlin",
	"*:0/20 America/New_York", "daily Asia/Kathmandu",
	"Sat,Sun 10:00 Australia/Lord_Howe", "weekly Pacific/Auckland",
	"*-02-30",
};

/* systemd 252's, from libsystemd-shared (usec_t is uint64_t). */
struct systemd {
	void *lib;
	int (*from_string)(const char *p, void **spec);
	int (*next_usec)(const void *spec, uint64_t usec, uint64_t *next);
	void *(*free)(void *spec);
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

/* splitmix64: the random bases, the same every run. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ns per elapse of n of ours: in a row from 2026, or (cold) each from a
 * random instant. */
static double ours(const struct bwd_cal *cal, unsigned n, bool cold,
		   uint64_t seed)
{
	uint64_t t = BASE_2026 * NS, next, start;

	start = mono_ns();
	for (unsigned i = 0; i < n; i++) {
		if (cold)
			t = (BASE_2026 + rng_next(&seed) % SPAN_10Y) * NS;
		if (bwd_cal_next(cal, t, &next) < 0)
			next = BASE_2026 * NS;      /* none: start over */
		t = next;
	}
	return (double)(mono_ns() - start) / n;
}

/* ns per elapse of systemd's in a row, within SYSTEMD_BUDGET_NS; < 0 when
 * it refuses the spec. */
static double theirs(const struct systemd *sd, const char *form, unsigned n)
{
	uint64_t t = BASE_2026 * 1000000, next, start, end;
	unsigned i;
	void *spec;

	if (sd->from_string(form, &spec) < 0)
		return -1;
	start = mono_ns();
	for (i = 0, end = start; i < n && end - start < SYSTEMD_BUDGET_NS; i++) {
		if (sd->next_usec(spec, t, &next) < 0)
			next = BASE_2026 * 1000000;
		t = next;
		end = mono_ns();
	}
	sd->free(spec);
	return (double)(end - start) / i;
}

static bool systemd_open(struct systemd *sd)
{
	sd->lib = dlopen(SYSTEMD_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!sd->lib)
		return false;
	*(void **)&sd->from_string = dlsym(sd->lib, "calendar_spec_from_string");
	*(void **)&sd->next_usec = dlsym(sd->lib, "calendar_spec_next_usec");
	*(void **)&sd->free = dlsym(sd->lib, "calendar_spec_free");
	return sd->from_string && sd->next_usec && sd->free;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "elapses", required_argument, NULL, 'n' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "no-systemd", no_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	unsigned n = 20000, repeat = 5;
	bool use_systemd = true, have_systemd;
	struct systemd sd = { 0 };
	double row[REPEAT_MAX], cold[REPEAT_MAX], sdv[REPEAT_MAX];
	int o;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'n':
			n = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'r':
			repeat = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 's':
			use_systemd = false;
			break;
		default:
			fprintf(o == 'h' ? stdout : stderr,
				"usage: bwcal [--elapses N] [--repeat R] [--no-systemd]\n");
			return o == 'h' ? 0 : 2;
		}
	}
	if (n == 0 || repeat == 0 || repeat > REPEAT_MAX) {
		fprintf(stderr, "bwcal: --elapses at least 1, --repeat 1 to %d\n",
			REPEAT_MAX);
		return 2;
	}
	if (!getenv("TZ"))
		setenv("TZ", "UTC", 1);
	tzset();
	have_systemd = use_systemd && systemd_open(&sd);
	printf("bwcal: %u elapses x %u runs (medians), TZ=%s; systemd 252's "
	       "calendar_spec_next_usec: %s\n\n", n, repeat, getenv("TZ"),
	       have_systemd ? SYSTEMD_LIB : use_systemd ?
	       "not found (" SYSTEMD_LIB ")" : "not asked");
	printf("| spec | ns/elapse, in a row | ns/elapse, cold | systemd, in a row |\n");
	printf("|---|---:|---:|---:|\n");
	for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
		struct bwd_cal *cal;
		char err[256], sdtext[32] = "-";

		if (bwd_cal_parse(forms[f], &cal, err, sizeof(err)) < 0) {
			fprintf(stderr, "bwcal: '%s': %s\n", forms[f], err);
			return 1;
		}
		ours(cal, n / 10 + 1, false, 0);        /* warm the zone's cache */
		for (unsigned r = 0; r < repeat; r++) {
			row[r] = ours(cal, n, false, 0);
			cold[r] = ours(cal, n, true, 2026 + r);
			if (have_systemd)
				sdv[r] = theirs(&sd, forms[f], n);
		}
		if (have_systemd && sdv[0] >= 0)
			snprintf(sdtext, sizeof(sdtext), "%.0f", median(sdv, (int)repeat));
		printf("| `%s` | %.0f | %.0f | %s |\n", forms[f],
		       median(row, (int)repeat), median(cold, (int)repeat), sdtext);
		bwd_cal_free(cal);
	}
	return 0;
}
