/*
 * duration.c - bwp_parse_duration(): "250ms", "1.5s", "1h30m" into
 * nanoseconds, for everything that takes durations from people: the
 * daemon's options (--linger, --hello-timeout, ...), bwctl's --in, --every,
 * --timeout, and the client library's bwc_parse_duration().  One parser,
 * so that a duration one accepts the others accept too, and one wording
 * of why one is refused (bwp_duration_problem()).  bwp_schedule_problem()
 * is the one statement of the bounds a Schedule's times must keep, which
 * the daemon enforces and bwctl checks before sending.
 *
 * The grammar is a sequence of terms, each a decimal number with an
 * optional fraction and a mandatory unit: ns, us (or µs), ms, s, m, h, d.  A
 * unit is required because a bare number is ambiguous: milliseconds to
 * one reader are seconds to the next.  Arithmetic is integer throughout,
 * so "0.1s" is exactly 100000000 ns; digits finer than a nanosecond are
 * dropped.  One pass over the text, no allocation.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "duration.h"

struct unit {
	const char *name;
	uint64_t ns;
};

/* Longest names first: "ms" must not be read as "m" followed by junk. */
static const struct unit units[] = {
	{ "ns", 1 },
	{ "us", 1000 },
	{ "\xc2\xb5s", 1000 },  /* µs, UTF-8 */
	{ "ms", 1000000 },
	{ "s", 1000000000 },
	{ "m", 60000000000 },
	{ "h", 3600000000000 },
	{ "d", 86400000000000 },
};

static bool add_ok(uint64_t *acc, uint64_t v)
{
	if (v > UINT64_MAX - *acc)
		return false;
	*acc += v;
	return true;
}

int bwp_parse_duration(const char *text, uint64_t *out_ns)
{
	const char *p = text;
	uint64_t total = 0;

	if (text == NULL || out_ns == NULL || *text == '\0')
		return -EINVAL;

	while (*p != '\0') {
		const struct unit *u = NULL;
		const char *whole = p, *frac = NULL;
		uint64_t ip = 0, term = 0, scale;
		size_t i, nfrac = 0;

		for (; *p >= '0' && *p <= '9'; p++) {
			uint64_t d = (uint64_t)(*p - '0');

			if (ip > (UINT64_MAX - d) / 10)
				return -ERANGE;
			ip = ip * 10 + d;
		}
		if (*p == '.') {
			frac = ++p;
			while (*p >= '0' && *p <= '9')
				p++;
			nfrac = (size_t)(p - frac);
		}
		if (p == whole || (frac != NULL && p - whole == 1))
			return -EINVAL;   /* no digits at all: "", ".", "s" */

		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			size_t n = strlen(units[i].name);

			if (strncmp(p, units[i].name, n) == 0) {
				u = &units[i];
				p += n;
				break;
			}
		}
		if (u == NULL)
			return -EINVAL;   /* missing or unknown unit */

		if (ip > UINT64_MAX / u->ns)
			return -ERANGE;
		term = ip * u->ns;
		/* Each fraction digit is worth a tenth of the one before;
		 * once that drops below 1 ns the rest cannot count. */
		scale = u->ns;
		for (i = 0; i < nfrac && scale >= 10; i++) {
			scale /= 10;
			if (!add_ok(&term, (uint64_t)(frac[i] - '0') * scale))
				return -ERANGE;
		}
		if (!add_ok(&total, term))
			return -ERANGE;
	}
	*out_ns = total;
	return 0;
}

const char *bwp_duration_problem(int err)
{
	if (err == -ERANGE)
		return "is too large: durations go up to about "
		       BWP_STR(BWP_DURATION_MAX_YEARS) " years (2^64 - 1 ns)";
	return "is not a duration: numbers with units ns, us, ms, s, m, h or "
	       "d, e.g. 250ms, 1.5s, 1h30m";
}

const char *bwp_schedule_problem(uint64_t now_ns, bool is_delay,
				 uint64_t when_ns, bool has_period,
				 uint64_t period_ns)
{
	if (is_delay && when_ns > UINT64_MAX - now_ns)
		return "now + delay_ns overflows 64 bits";
	if (has_period && period_ns < BWP_MIN_PERIOD_NS)
		return "period_ns must be > 0";
	return NULL;
}
