/*
 * config.c - presets and validation of wheel configurations.
 *
 * The presets are the seed's, four gears each.  The dual presets pair a
 * coarse periodic lane (heartbeats tolerate 100 ms) with a fine oneshot
 * lane; the seed gives resolution and slot capacity, and we take its
 * default of 8 probes for both lanes.
 */
#include <stddef.h>

#include "wheel-internal.h"

struct preset {
	const char *name;
	unsigned resolution_ms, slot_cap, max_probes;
};

static const struct preset presets[BW_PRESET_COUNT] = {
	[BW_PRESET_BALANCED] = { "balanced", 5, 16, 8 },
	[BW_PRESET_BALANCED_FAST] = { "balanced-fast", 5, 64, 2 },
	[BW_PRESET_BALANCED_LIGHT] = { "balanced-light", 5, 8, 16 },
	[BW_PRESET_PRECISE] = { "precise", 1, 16, 8 },
	[BW_PRESET_BURST] = { "burst", 5, 32, 8 },
	[BW_PRESET_EXTENDED] = { "extended", 16, 16, 8 },
};

struct dual_preset {
	const char *name;
	struct preset periodic, oneshot;
};

static const struct dual_preset dual_presets[BW_DUAL_PRESET_COUNT] = {
	[BW_DUAL_STANDARD_BALANCED] = { "standard-balanced",
		{ NULL, 100, 8, 8 }, { NULL, 5, 16, 8 } },
	[BW_DUAL_FAST_PRECISE] = { "fast-precise",
		{ NULL, 100, 16, 8 }, { NULL, 1, 64, 8 } },
	[BW_DUAL_STANDARD_BURST] = { "standard-burst",
		{ NULL, 100, 8, 8 }, { NULL, 5, 32, 8 } },
};

static void fill(const struct preset *p, bool failover, struct bw_config *cfg)
{
	*cfg = (struct bw_config){
		.gears = 4,
		.resolution_ms = p->resolution_ms,
		.slot_cap = p->slot_cap,
		.max_probes = p->max_probes,
		.precision = BW_EXACT,
		.failover = failover,
		.alloc = NULL,
	};
}

int bw_config_preset(enum bw_preset preset, struct bw_config *cfg)
{
	if (!cfg)
		return BW_EINVAL;
	if ((unsigned)preset >= BW_PRESET_COUNT)
		return BW_EPRESET;
	fill(&presets[preset], false, cfg);
	return 0;
}

const char *bw_preset_name(enum bw_preset preset)
{
	return (unsigned)preset < BW_PRESET_COUNT ? presets[preset].name : NULL;
}

int bw_dual_config_preset(enum bw_dual_preset preset,
			  struct bw_dual_config *cfg)
{
	if (!cfg)
		return BW_EINVAL;
	if ((unsigned)preset >= BW_DUAL_PRESET_COUNT)
		return BW_EPRESET;
	fill(&dual_presets[preset].periodic, true, &cfg->periodic);
	fill(&dual_presets[preset].oneshot, true, &cfg->oneshot);
	return 0;
}

const char *bw_dual_preset_name(enum bw_dual_preset preset)
{
	return (unsigned)preset < BW_DUAL_PRESET_COUNT ?
		dual_presets[preset].name : NULL;
}

int bw_config_validate(const struct bw_config *cfg)
{
	if (!cfg)
		return BW_EINVAL;
	if (cfg->gears < 1 || cfg->gears > BW_MAX_GEARS)
		return BW_EGEARS;
	if (cfg->resolution_ms < 1 || cfg->resolution_ms > BW_MAX_RESOLUTION_MS)
		return BW_ERESOLUTION;
	if (cfg->slot_cap < 1 || cfg->slot_cap > BW_MAX_SLOT_CAP)
		return BW_ESLOTCAP;
	if (cfg->max_probes < 1 || cfg->max_probes > BW_MAX_PROBES)
		return BW_EPROBES;
	if (cfg->precision != BW_EXACT && cfg->precision != BW_COARSE)
		return BW_EPRECISION;
	return 0;
}

/*
 * The delta, in ticks, every insert is guaranteed to place: from any now,
 * a tick up to 63 slots of the top gear ahead has a key at most 63 top
 * slots ahead.  Coarse mode rounds up to the slot start, which can add one
 * slot, so it guarantees one less (except with a single gear, where
 * nothing is rounded).  A two-gear wheel is all ring and rounds nothing
 * either, but keeps the range it has always had: a range that changed with
 * the slot layout would be a change of interface.
 */
uint64_t bw_config_range_ticks(const struct bw_config *cfg)
{
	uint64_t top = bw_pow64(cfg->gears - 1);

	if (cfg->precision == BW_COARSE && cfg->gears > 1)
		return (BW_SLOTS - 2) * top;
	return (BW_SLOTS - 1) * top;
}
