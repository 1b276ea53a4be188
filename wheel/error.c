/*
 * error.c - names for libbitwheel's error codes.
 */
#include "bitwheel.h"

const char *bw_strerror(int err)
{
	switch (err) {
	case BW_OK: return "success";
	case BW_ENOMEM: return "out of memory";
	case BW_EFULL: return "slot and every probe slot full";
	case BW_ERANGE: return "deadline beyond the wheel's range";
	case BW_ENOTFOUND: return "no such pending timer";
	case BW_EEMPTY: return "no timer pending";
	case BW_EINVAL: return "invalid argument";
	case BW_ECORRUPT: return "wheel invariant broken";
	case BW_EGEARS: return "gears must be 1..8";
	case BW_ERESOLUTION: return "resolution_ms must be 1..60000";
	case BW_ESLOTCAP: return "slot_cap must be 1..65535";
	case BW_EPROBES: return "max_probes must be 1..64";
	case BW_EPRECISION: return "precision must be BW_EXACT or BW_COARSE";
	case BW_EPRESET: return "unknown preset";
	case BW_EINPOLL: return "not allowed from inside a poll callback";
	case BW_EPENDING: return "timer already pending";
	default: return "unknown error";
	}
}
