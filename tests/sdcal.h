/*
 * sdcal.h - systemd-analyze calendar (systemd 252 on Debian 12), run and
 * read at test time, for the differential tests against systemd: the
 * daemon's calendar code in process (check_calendar) and through bwctl
 * (check_bwctl).  Its output is never copied into the tree.
 */
#ifndef BW_SDCAL_H
#define BW_SDCAL_H

#include <stdbool.h>
#include <stdint.h>

#define SDC_ANALYZE "/usr/bin/systemd-analyze"
/* Specs per run, elapses per spec, and a normalized form's length. */
#define SDC_SPECS_MAX 48
#define SDC_ITER_MAX 50
#define SDC_NORM_MAX 4096

/* What systemd-analyze said of one spec. */
struct sdc_result {
	int refused;                    /* "Failed to parse ..."            */
	int gave_up;                    /* "Failed to determine next elapse" */
	char normalized[SDC_NORM_MAX];
	int n;                          /* elapses printed                  */
	int never;                      /* "Next elapse: never"             */
	int64_t at[SDC_ITER_MAX];       /* UTC seconds (it prints no
					   fractions)                       */
};

/* "YYYY-MM-DD HH:MM:SS" in UTC as Unix seconds, or fail the test. */
int64_t sdc_utc(const char *s);
/* Whether SDC_ANALYZE is there to run. */
bool sdc_available(void);
/*
 * Runs systemd-analyze calendar --iterations=iterations
 * --base-time=@base_us/1e6 once for specs[0..n) (n <= SDC_SPECS_MAX) with
 * TZ=tz, and fills res[0..n): every spec's result, in the order given (a
 * spec named twice gets each of its answers once).  Fails the test when
 * the output says nothing about a spec.
 */
void sdc_run(const char *const *specs, int n, int iterations,
	     uint64_t base_us, const char *tz, struct sdc_result *res);

#endif
