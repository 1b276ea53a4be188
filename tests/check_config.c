/*
 * check_config.c - configuration surface of libbitwheel: the six wheel
 * presets and three dual presets (values and names), config validation
 * (one distinct error per invalid field, boundaries accepted, creation
 * refusing what validation refuses), bw_strerror for every code, and
 * bw_now_ns against CLOCK_MONOTONIC.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

struct preset_want {
	enum bw_preset p;
	unsigned res_ms, cap, probes;
};

/* The seed's table; the header promises exactly these. */
static const struct preset_want presets[] = {
	{ BW_PRESET_BALANCED, 5, 16, 8 },
	{ BW_PRESET_BALANCED_FAST, 5, 64, 2 },
	{ BW_PRESET_BALANCED_LIGHT, 5, 8, 16 },
	{ BW_PRESET_PRECISE, 1, 16, 8 },
	{ BW_PRESET_BURST, 5, 32, 8 },
	{ BW_PRESET_EXTENDED, 16, 16, 8 },
};

START_TEST(test_preset_values)
{
	const struct preset_want *pw = &presets[_i];
	struct bw_config cfg;
	int rc;

	ck_assert_int_eq(BW_PRESET_COUNT, 6);
	/* Garbage first, so a preset that leaves a field alone is caught. */
	memset(&cfg, 0x5a, sizeof(cfg));
	rc = bw_config_preset(pw->p, &cfg);
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(cfg.gears, 4);
	ck_assert_uint_eq(cfg.resolution_ms, pw->res_ms);
	ck_assert_uint_eq(cfg.slot_cap, pw->cap);
	ck_assert_uint_eq(cfg.max_probes, pw->probes);
	ck_assert_int_eq(cfg.precision, BW_EXACT);
	ck_assert(cfg.failover == false);
	ck_assert_ptr_null(cfg.alloc);
	ck_assert_int_eq(bw_config_validate(&cfg), 0);
}
END_TEST

START_TEST(test_preset_names)
{
	const char *names[BW_PRESET_COUNT];

	for (int p = 0; p < BW_PRESET_COUNT; p++) {
		names[p] = bw_preset_name((enum bw_preset)p);
		ck_assert_msg(names[p] != NULL && names[p][0] != '\0',
			      "preset %d has no name", p);
		for (int q = 0; q < p; q++)
			ck_assert_msg(strcmp(names[p], names[q]) != 0,
				      "presets %d and %d share name %s", p, q,
				      names[p]);
	}
	ck_assert_str_eq(bw_preset_name(BW_PRESET_BALANCED), "balanced");
	ck_assert_ptr_null(bw_preset_name(BW_PRESET_COUNT));
	ck_assert_ptr_null(bw_preset_name((enum bw_preset)-1));
	ck_assert_ptr_null(bw_preset_name((enum bw_preset)1000));
}
END_TEST

START_TEST(test_preset_errors)
{
	struct bw_config cfg = tu_cfg(3, 7, 9, 5, BW_COARSE, true);
	struct bw_config keep = cfg;

	ck_assert_int_eq(bw_config_preset(BW_PRESET_COUNT, &cfg), BW_EPRESET);
	ck_assert_int_eq(bw_config_preset((enum bw_preset)-1, &cfg),
			 BW_EPRESET);
	/* A refused preset must not half-fill the caller's config. */
	ck_assert(memcmp(&cfg, &keep, sizeof(cfg)) == 0);
	ck_assert_int_eq(bw_config_preset(BW_PRESET_BALANCED, NULL), BW_EINVAL);
}
END_TEST

struct dual_want {
	enum bw_dual_preset p;
	const char *name;
	unsigned per_cap, one_res, one_cap;
};

static const struct dual_want duals[] = {
	{ BW_DUAL_STANDARD_BALANCED, "standard-balanced", 8, 5, 16 },
	{ BW_DUAL_FAST_PRECISE, "fast-precise", 16, 1, 64 },
	{ BW_DUAL_STANDARD_BURST, "standard-burst", 8, 5, 32 },
};

START_TEST(test_dual_presets)
{
	const struct dual_want *dw = &duals[_i];
	struct bw_dual_config dc;

	ck_assert_int_eq(BW_DUAL_PRESET_COUNT, 3);
	memset(&dc, 0x5a, sizeof(dc));
	ck_assert_int_eq(bw_dual_config_preset(dw->p, &dc), 0);
	ck_assert_str_eq(bw_dual_preset_name(dw->p), dw->name);

	ck_assert_uint_eq(dc.periodic.resolution_ms, 100);
	ck_assert_uint_eq(dc.periodic.slot_cap, dw->per_cap);
	ck_assert_int_eq(dc.periodic.precision, BW_EXACT);
	ck_assert(dc.periodic.failover);
	ck_assert_ptr_null(dc.periodic.alloc);
	ck_assert_int_eq(bw_config_validate(&dc.periodic), 0);

	ck_assert_uint_eq(dc.oneshot.resolution_ms, dw->one_res);
	ck_assert_uint_eq(dc.oneshot.slot_cap, dw->one_cap);
	ck_assert_int_eq(dc.oneshot.precision, BW_EXACT);
	ck_assert(dc.oneshot.failover);
	ck_assert_ptr_null(dc.oneshot.alloc);
	ck_assert_int_eq(bw_config_validate(&dc.oneshot), 0);
}
END_TEST

START_TEST(test_dual_preset_errors)
{
	struct bw_dual_config dc;

	ck_assert_ptr_null(bw_dual_preset_name(BW_DUAL_PRESET_COUNT));
	ck_assert_ptr_null(bw_dual_preset_name((enum bw_dual_preset)-1));
	ck_assert_int_eq(bw_dual_config_preset(BW_DUAL_PRESET_COUNT, &dc),
			 BW_EPRESET);
	ck_assert_int_eq(bw_dual_config_preset(BW_DUAL_FAST_PRECISE, NULL),
			 BW_EINVAL);
}
END_TEST

static struct bw_config good_cfg(void)
{
	return tu_cfg(4, 5, 16, 8, BW_EXACT, false);
}

struct bad_field {
	const char *what;
	void (*set)(struct bw_config *cfg);
	int want;
};

static void gears0(struct bw_config *c) { c->gears = 0; }
static void gears9(struct bw_config *c) { c->gears = BW_MAX_GEARS + 1; }
static void gears_huge(struct bw_config *c) { c->gears = ~0u; }
static void res0(struct bw_config *c) { c->resolution_ms = 0; }
static void res_big(struct bw_config *c)
{
	c->resolution_ms = BW_MAX_RESOLUTION_MS + 1;
}
static void cap0(struct bw_config *c) { c->slot_cap = 0; }
static void cap_big(struct bw_config *c) { c->slot_cap = BW_MAX_SLOT_CAP + 1; }
static void probes0(struct bw_config *c) { c->max_probes = 0; }
static void probes_big(struct bw_config *c)
{
	c->max_probes = BW_MAX_PROBES + 1;
}
static void prec_bad(struct bw_config *c)
{
	c->precision = (enum bw_precision)2;
}
static void prec_neg(struct bw_config *c)
{
	c->precision = (enum bw_precision)-1;
}

static const struct bad_field bad_fields[] = {
	{ "gears 0", gears0, BW_EGEARS },
	{ "gears 9", gears9, BW_EGEARS },
	{ "gears ~0", gears_huge, BW_EGEARS },
	{ "resolution 0", res0, BW_ERESOLUTION },
	{ "resolution 60001", res_big, BW_ERESOLUTION },
	{ "slot_cap 0", cap0, BW_ESLOTCAP },
	{ "slot_cap 65536", cap_big, BW_ESLOTCAP },
	{ "max_probes 0", probes0, BW_EPROBES },
	{ "max_probes 65", probes_big, BW_EPROBES },
	{ "precision 2", prec_bad, BW_EPRECISION },
	{ "precision -1", prec_neg, BW_EPRECISION },
};

START_TEST(test_validate_bad_field)
{
	const struct bad_field *bf = &bad_fields[_i];
	struct bw_config cfg = good_cfg();
	struct bw_wheel *w = (struct bw_wheel *)&cfg; /* sentinel */
	int rc;

	bf->set(&cfg);
	rc = bw_config_validate(&cfg);
	ck_assert_msg(rc == bf->want, "%s: validate gave %d, want %d",
		      bf->what, rc, bf->want);
	/* Creation refuses with the same code and hands back no wheel. */
	rc = bw_wheel_new(&cfg, 12345, &w);
	ck_assert_msg(rc == bf->want, "%s: new gave %d, want %d", bf->what,
		      rc, bf->want);
	ck_assert_msg(w == NULL || w == (struct bw_wheel *)&cfg,
		      "%s: refused creation returned a wheel", bf->what);
}
END_TEST

START_TEST(test_validate_boundaries)
{
	struct bw_config cfg;
	struct bw_wheel *w;

	cfg = good_cfg();
	ck_assert_int_eq(bw_config_validate(&cfg), 0);

	cfg = tu_cfg(1, 1, 1, 1, BW_EXACT, false);
	ck_assert_int_eq(bw_config_validate(&cfg), 0);
	w = tu_wheel_new(&cfg, 0);
	tu_assert_healthy(w);
	bw_wheel_free(w);

	cfg = tu_cfg(BW_MAX_GEARS, BW_MAX_RESOLUTION_MS, 1, BW_MAX_PROBES,
		     BW_COARSE, true);
	ck_assert_int_eq(bw_config_validate(&cfg), 0);
	w = tu_wheel_new(&cfg, 0);
	tu_assert_healthy(w);
	bw_wheel_free(w);

	/*
	 * Every field at its maximum validates (it is not created: that
	 * would pre-allocate tens of millions of records).
	 */
	cfg = tu_cfg(BW_MAX_GEARS, 5, BW_MAX_SLOT_CAP, BW_MAX_PROBES,
		     BW_EXACT, false);
	ck_assert_int_eq(bw_config_validate(&cfg), 0);

	/* A moderately large wheel is created fine. */
	cfg = tu_cfg(2, 5, 4096, 8, BW_EXACT, false);
	ck_assert_int_eq(bw_config_validate(&cfg), 0);
	w = tu_wheel_new(&cfg, 0);
	tu_assert_healthy(w);
	bw_wheel_free(w);
}
END_TEST

START_TEST(test_validate_null)
{
	struct bw_config cfg = good_cfg();
	struct bw_wheel *w = NULL;

	ck_assert_int_eq(bw_config_validate(NULL), BW_EINVAL);
	ck_assert_int_eq(bw_wheel_new(NULL, 0, &w), BW_EINVAL);
	ck_assert_ptr_null(w);
	ck_assert_int_eq(bw_wheel_new(&cfg, 0, NULL), BW_EINVAL);
}
END_TEST

START_TEST(test_validate_several_bad)
{
	/* Several bad fields: some field error, never success. */
	struct bw_config cfg = tu_cfg(0, 0, 0, 0, (enum bw_precision)7, false);
	int rc = bw_config_validate(&cfg);

	ck_assert_msg(rc == BW_EGEARS || rc == BW_ERESOLUTION ||
			      rc == BW_ESLOTCAP || rc == BW_EPROBES ||
			      rc == BW_EPRECISION,
		      "validate gave %d", rc);
}
END_TEST

START_TEST(test_dual_new_validates)
{
	struct bw_dual_config dc;
	struct bw_dual *d = NULL;

	ck_assert_int_eq(bw_dual_config_preset(BW_DUAL_STANDARD_BALANCED, &dc),
			 0);
	dc.oneshot.slot_cap = 0;
	ck_assert_int_eq(bw_dual_new(&dc, 0, &d), BW_ESLOTCAP);
	ck_assert_ptr_null(d);
	ck_assert_int_eq(bw_dual_config_preset(BW_DUAL_STANDARD_BALANCED, &dc),
			 0);
	dc.periodic.gears = 0;
	ck_assert_int_eq(bw_dual_new(&dc, 0, &d), BW_EGEARS);
	ck_assert_ptr_null(d);
	ck_assert_int_eq(bw_dual_new(NULL, 0, &d), BW_EINVAL);
}
END_TEST

static const int all_codes[] = {
	BW_OK,        BW_ENOMEM,      BW_EFULL,     BW_ERANGE,   BW_ENOTFOUND,
	BW_EEMPTY,    BW_EINVAL,      BW_ECORRUPT,  BW_EGEARS,   BW_ERESOLUTION,
	BW_ESLOTCAP,  BW_EPROBES,     BW_EPRECISION, BW_EPRESET,
	BW_EINPOLL,
};

START_TEST(test_strerror)
{
	size_t n = sizeof(all_codes) / sizeof(all_codes[0]);

	for (size_t i = 0; i < n; i++) {
		const char *s = bw_strerror(all_codes[i]);

		ck_assert_msg(s != NULL && s[0] != '\0',
			      "no description for %d", all_codes[i]);
		for (size_t j = 0; j < i; j++)
			ck_assert_msg(strcmp(s, bw_strerror(all_codes[j])) != 0,
				      "codes %d and %d share \"%s\"",
				      all_codes[i], all_codes[j], s);
	}
	/* Unknown codes still get a printable string. */
	ck_assert_ptr_nonnull(bw_strerror(-9));
	ck_assert_ptr_nonnull(bw_strerror(-999));
	ck_assert_ptr_nonnull(bw_strerror(42));
}
END_TEST

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

START_TEST(test_now_monotonic)
{
	uint64_t before = mono_ns();
	uint64_t prev = bw_now_ns();
	uint64_t after;
	struct timespec ms = { 0, 2000000 };

	ck_assert_uint_ge(prev, before);
	for (int i = 0; i < 200000; i++) {
		uint64_t t = bw_now_ns();

		ck_assert_uint_ge(t, prev);
		prev = t;
	}
	after = mono_ns();
	ck_assert_uint_le(prev, after);

	/* It really advances: 2 ms of sleep shows up as >= 2 ms. */
	before = bw_now_ns();
	nanosleep(&ms, NULL);
	ck_assert_uint_ge(bw_now_ns() - before, 2000000);
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc;

	tc = tcase_create("presets");
	tcase_add_loop_test(tc, test_preset_values, 0,
			    (int)(sizeof(presets) / sizeof(presets[0])));
	tcase_add_test(tc, test_preset_names);
	tcase_add_test(tc, test_preset_errors);
	tcase_add_loop_test(tc, test_dual_presets, 0,
			    (int)(sizeof(duals) / sizeof(duals[0])));
	tcase_add_test(tc, test_dual_preset_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("validation");
	tcase_add_loop_test(tc, test_validate_bad_field, 0,
			    (int)(sizeof(bad_fields) / sizeof(bad_fields[0])));
	tcase_add_test(tc, test_validate_boundaries);
	tcase_add_test(tc, test_validate_null);
	tcase_add_test(tc, test_validate_several_bad);
	tcase_add_test(tc, test_dual_new_validates);
	suite_add_tcase(s, tc);

	tc = tcase_create("misc");
	tcase_add_test(tc, test_strerror);
	tcase_add_test(tc, test_now_monotonic);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(config_suite());
}
