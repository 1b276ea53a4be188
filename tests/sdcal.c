/*
 * sdcal.c - systemd-analyze calendar, run and read (sdcal.h).
 *
 * One run per batch of specs: systemd-analyze writes to two temporary
 * files (unlinked at once), read whole when it exits; its stdout is
 * split into per-spec results by the "Original form" / "Normalized form"
 * lines that open each, its stderr searched for each spec's refusal.
 */
#define _GNU_SOURCE
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sdcal.h"

int64_t sdc_utc(const char *s)
{
	struct tm tm = { 0 };

	ck_assert_ptr_nonnull(strptime(s, "%Y-%m-%d %H:%M:%S", &tm));
	return (int64_t)timegm(&tm);
}

bool sdc_available(void)
{
	return access(SDC_ANALYZE, X_OK) == 0;
}

static char *slurp_fd(int fd)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	ssize_t got;

	ck_assert_ptr_nonnull(buf);
	lseek(fd, 0, SEEK_SET);
	while ((got = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)got;
		if (cap - len < 2) {
			buf = realloc(buf, cap *= 2);
			ck_assert_ptr_nonnull(buf);
		}
	}
	buf[len] = 0;
	return buf;
}

/* "Www YYYY-MM-DD HH:MM:SS UTC"; INT64_MIN for another zone (its "(in
 * UTC)" line follows). */
static int64_t sd_time(const char *s)
{
	char tmp[32];

	ck_assert_msg(strlen(s) >= 24, "unexpected systemd-analyze time '%s'",
		      s);
	if (strcmp(s + 23, " UTC"))
		return INT64_MIN;
	memcpy(tmp, s + 4, 19);
	tmp[19] = 0;
	return sdc_utc(tmp);
}

/* The result of the first spec named v that systemd-analyze has not
 * printed yet (the same spec may be asked twice). */
static struct sdc_result *sd_claim(const char *const *specs, int n,
				  struct sdc_result *res, const char *v)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(specs[i], v) && res[i].n < 0) {
			res[i].n = 0;
			return &res[i];
		}
	ck_abort_msg("systemd-analyze printed '%s'", v);
	return NULL;
}

void sdc_run(const char *const *specs, int n, int iterations,
	     uint64_t base_us, const char *tz, struct sdc_result *res)
{
	char out_path[] = "/tmp/sdcal.out.XXXXXX";
	char err_path[] = "/tmp/sdcal.err.XXXXXX";
	char iters[32], base[64];
	const char *argv[64];
	char tzvar[128];
	char *env[] = { tzvar, "LC_ALL=C", "SYSTEMD_COLORS=0",
			"SYSTEMD_PAGER=", NULL };
	int fo = mkstemp(out_path), fe = mkstemp(err_path), k = 0, i, st;
	char *out, *err, *line, *save = NULL;
	const char *prev = "";
	struct sdc_result *cur = NULL;
	pid_t pid;

	ck_assert(fo >= 0 && fe >= 0 && n <= SDC_SPECS_MAX);
	ck_assert(iterations >= 1 && iterations <= SDC_ITER_MAX);
	snprintf(tzvar, sizeof(tzvar), "TZ=%s", tz);
	unlink(out_path);
	unlink(err_path);
	snprintf(iters, sizeof(iters), "--iterations=%d", iterations);
	snprintf(base, sizeof(base), "--base-time=@%" PRIu64 ".%06" PRIu64,
		 base_us / 1000000, base_us % 1000000);
	argv[k++] = "systemd-analyze";
	argv[k++] = "calendar";
	argv[k++] = iters;
	argv[k++] = base;
	argv[k++] = "--";
	for (i = 0; i < n; i++)
		argv[k++] = specs[i];
	argv[k] = NULL;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fo, 1);
		dup2(fe, 2);
		execve(SDC_ANALYZE, (char **)argv, env);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	out = slurp_fd(fo);
	err = slurp_fd(fe);
	close(fo);
	close(fe);
	for (i = 0; i < n; i++) {
		char want[SDC_NORM_MAX + 64];

		memset(&res[i], 0, sizeof(res[i]));
		res[i].n = -1;
		snprintf(want, sizeof(want),
			 "Failed to parse calendar specification '%s'",
			 specs[i]);
		if (strstr(err, want))
			res[i].refused = 1;
		snprintf(want, sizeof(want),
			 "Failed to determine next elapse for '%s'", specs[i]);
		/* it prints nothing else about the spec then */
		if (strstr(err, want))
			res[i].gave_up = 1;
	}
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *v;

		if ((v = strstr(line, "Original form: "))) {
			cur = sd_claim(specs, n, res, v + 15);
		} else if ((v = strstr(line, "Normalized form: ")) &&
			   !strstr(prev, "Original form: ")) {
			/* No "Original form" when it is the normalized one. */
			v += 17;
			cur = sd_claim(specs, n, res, v);
			snprintf(cur->normalized, sizeof(cur->normalized), "%s",
				 v);
		} else if (!cur) {
			continue;
		} else if ((v = strstr(line, "Normalized form: "))) {
			snprintf(cur->normalized, sizeof(cur->normalized), "%s",
				 v + 17);
		} else if ((v = strstr(line, "Next elapse: ")) ||
			   (v = strstr(line, "Iter. #"))) {
			v = strstr(v, ": ") + 2;
			if (!strcmp(v, "never"))
				cur->never = 1;
			else if (cur->n < iterations)
				cur->at[cur->n++] = sd_time(v);
		} else if ((v = strstr(line, "(in UTC): ")) && cur->n > 0) {
			cur->at[cur->n - 1] = sd_time(v + 10);
		}
		prev = line;
	}
	for (i = 0; i < n; i++)
		ck_assert_msg(res[i].refused || res[i].gave_up || res[i].n >= 0,
			      "systemd-analyze said nothing about '%s': %s",
			      specs[i], err);
	free(out);
	free(err);
}

