/*
 * options.c - bitwheeld's command line, its defaults and their checks.
 *
 * Everything the daemon can be told lands in one struct bwd_options; the
 * wheel's lanes start from a dual preset and finer flags override single
 * fields, so the order of flags does not matter.  Errors name the flag
 * and the accepted range in one line, then "Try 'bitwheeld --help'.", and
 * exit with status 2 (usage).
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon-internal.h"
#include "duration.h"

#define DEFAULT_SOCKET "/run/bitwheel/bitwheeld.sock"

#define ONESHOT_SLOT_CAP 1024u

/* The smallest bytes budget: a few timers of the largest default payload. */
#define MIN_BYTES 4096u

/* The daemon-wide bound when none is given. */
#define DEFAULT_MAX_MEMORY (1ull << 30)

static void usage(FILE *f)
{
	fprintf(f,
"Usage: bitwheeld [OPTIONS]\n"
"Host-wide timer service: schedules timeouts for local processes over a\n"
"Unix socket and fires them back.\n"
"\n"
"  -s, --socket PATH         listen here unless socket-activated\n"
"                            (default $BITWHEEL_SOCKET or " DEFAULT_SOCKET ")\n"
"  -m, --socket-mode MODE    octal mode of the socket it creates (0660)\n"
"      --socket-group GROUP  the group of the socket it creates (name or\n"
"                            number; default the daemon's own)\n"
"  -p, --preset NAME         standard-balanced | fast-precise | standard-burst\n"
"                            (default fast-precise)\n"
"      --precision MODE      exact (default) | coarse\n"
"      --oneshot-resolution MS   --oneshot-slot-cap N   --oneshot-probes N\n"
"      --periodic-resolution MS  --periodic-slot-cap N  --periodic-probes N\n"
"                            override one lane of the preset (the daemon\n"
"                            probes 1 slot, full slots overflow on time;\n"
"                            oneshot slots hold 1024)\n"
"      --max-clients N       open connections (1024)\n"
"      --max-frame BYTES     frame body size (65536; >= max-payload + 256)\n"
"      --max-payload BYTES   Schedule payload (1024)\n"
"      --max-timers N        pending timers plus undelivered fires per session\n"
"                            (65536; Schedule gets TOO_MANY_TIMERS beyond)\n"
"      --max-queued N        undelivered fires per session past which periodic\n"
"                            fires are dropped and counted (4096)\n"
"      --max-clients-per-uid N   connections of one uid, before Hello too\n"
"                            (max-clients / 4; TOO_MANY_CLIENTS beyond)\n"
"      --max-sessions-per-uid N  named sessions of one uid (256; a Hello\n"
"                            creating one more gets OVER_BUDGET)\n"
"      --max-timers-per-uid N    pending timers plus undelivered fires over\n"
"                            all of one uid's sessions (4 x max-timers, at\n"
"                            most what max-bytes-per-uid holds at the\n"
"                            largest payload)\n"
"      --max-periodic-rate-per-uid HZ  sum of 1/period over one uid's\n"
"                            periodic timers (10000; OVER_BUDGET beyond)\n"
"                            Root (uid 0) is exempt from the per-uid budgets\n"
"      --max-bytes-per-uid SIZE  bytes of one uid's timers, fires and unread\n"
"                            output (max-memory / 4; OVER_BUDGET beyond)\n"
"      --max-memory SIZE     the same bytes over every uid, root too\n"
"                            (1G; NO_MEMORY beyond).  SIZE: 4096, 64K, 16M, 1G\n"
"      --max-journal-per-uid SIZE  bytes one uid's named sessions may add to\n"
"                            a journal generation (journal-max / 4; then\n"
"                            Schedule and new named sessions get OVER_BUDGET\n"
"                            until the next snapshot)\n"
"      --budgets FILE        per-uid, per-user and per-group budgets, and the\n"
"                            default (bitwheeld(8), BUDGET FILE); a regular\n"
"                            file of root's or the daemon's user, writable by\n"
"                            no one else, at most 1 MiB\n"
"      --max-window N        largest consumer window (4096)\n"
"      --max-deliveries N    hand-outs without an ack after which a named\n"
"                            session's fire goes to its dead-letter session,\n"
"                            unless its policy says otherwise (20; 0: never)\n"
"      --hello-timeout DURATION  close a connection that has not said Hello\n"
"                            by then (30s)\n"
"      --linger DURATION     life of a named session with no connection (5m)\n"
"      --max-output BYTES    unread output per connection (1048576; at half,\n"
"                            reading and fires pause; >= 2 x the largest fire)\n"
"      --output-timeout DURATION  close a connection whose output has waited\n"
"                            that long without the client reading any (30s;\n"
"                            its fires in flight go to other consumers)\n"
"      --state-dir DIR       keep named sessions' timers here, across restarts\n"
"                            and crashes (default: nothing is kept)\n"
"      --fsync POLICY        batch (default: group commit, one fdatasync at a\n"
"                            time in a thread; replies wait for it) | always\n"
"                            (one per loop turn, in the loop, which waits for\n"
"                            it) | never (survives a daemon crash, not a\n"
"                            machine crash)\n"
"      --journal-max BYTES   journal size that starts a snapshot (67108864)\n"
"      --snapshot-growth FACTOR  ... once also past FACTOR times the last\n"
"                            snapshot's size (2; 0: --journal-max alone)\n"
"      --snapshot-min-interval DURATION  least time between snapshots (10s)\n"
"      --snapshot-interval DURATION  most time between snapshots while the\n"
"                            journal has changes (10m)\n"
"      --ignore-snapshot     recover from the journals alone when the snapshot\n"
"                            is damaged (what only it held is lost)\n"
"  -v, --verbose             log debug messages\n"
"  -h, --help                show this help\n"
"  -V, --version             show the version\n"
"\n"
"Durations take a unit: ns, us, ms, s, m, h or d (e.g. 250ms, 5m).\n");
}

/* A duration option of min_ns or more: 0, or -1 with the reason printed
 * (not a duration, longer than the clock can count, or under min_ns). */
static int parse_duration(const char *flag, const char *arg, uint64_t min_ns,
			  const char *min_text, uint64_t *out_ns)
{
	int err = bwp_parse_duration(arg, out_ns);

	if (err) {
		fprintf(stderr, "bitwheeld: --%s: '%s' %s\n", flag, arg, bwp_duration_problem(err));
		return -1;
	}
	if (*out_ns < min_ns) {
		fprintf(stderr, "bitwheeld: --%s: '%s' is under the least allowed, %s\n",
			flag, arg, min_text);
		return -1;
	}
	return 0;
}

int bwd_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMG";
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end) {
		const char *u = strchr(units, *end);

		if (!u || end[1])
			return -EINVAL;
		shift = 10u * (unsigned)(u - units + 1);
	}
	if (v > UINT64_MAX >> shift)
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

/* A whole number in [min, max], or a message naming the flag. */
static int parse_uint(const char *flag, const char *arg, uint64_t min,
		      uint64_t max, int base, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, base);
	if (errno || end == arg || *end || *arg == '-' || v < min || v > max) {
		fprintf(stderr, "bitwheeld: %s: '%s' is not a number in %" PRIu64
			"..%" PRIu64 "\n", flag, arg, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

/* A group by name, or a number that names one. */
static int parse_group(const char *arg, gid_t *out)
{
	struct group *gr = getgrnam(arg);
	unsigned long v;
	char *end;

	if (gr == NULL && arg[0] >= '0' && arg[0] <= '9') {
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (!errno && !*end && v < UINT32_MAX)
			gr = getgrgid((gid_t)v);
	}
	if (gr == NULL) {
		fprintf(stderr, "bitwheeld: --socket-group: no group '%s' on this system\n",
			arg);
		return -1;
	}
	*out = gr->gr_gid;
	return 0;
}

enum {
	OPT_PRECISION = 256,
	OPT_ONESHOT_RES, OPT_ONESHOT_CAP, OPT_ONESHOT_PROBES,
	OPT_PERIODIC_RES, OPT_PERIODIC_CAP, OPT_PERIODIC_PROBES,
	OPT_MAX_CLIENTS, OPT_MAX_FRAME, OPT_MAX_PAYLOAD, OPT_MAX_TIMERS,
	OPT_MAX_QUEUED, OPT_LINGER, OPT_MAX_OUTPUT, OPT_MAX_WINDOW, OPT_HELLO_TIMEOUT, OPT_OUTPUT_TIMEOUT, OPT_MAX_DELIVERIES,
	OPT_STATE_DIR, OPT_FSYNC, OPT_JOURNAL_MAX, OPT_SNAPSHOT_INTERVAL,
	OPT_IGNORE_SNAPSHOT, OPT_SNAPSHOT_GROWTH, OPT_SNAPSHOT_MIN_INTERVAL,
	OPT_CLIENTS_PER_UID, OPT_SESSIONS_PER_UID, OPT_TIMERS_PER_UID,
	OPT_RATE_PER_UID, OPT_BYTES_PER_UID, OPT_MAX_MEMORY, OPT_JOURNAL_PER_UID,
	OPT_BUDGETS, OPT_SOCKET_GROUP,
};

static const struct option longopts[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "socket-mode", required_argument, NULL, 'm' },
	{ "socket-group", required_argument, NULL, OPT_SOCKET_GROUP },
	{ "preset", required_argument, NULL, 'p' },
	{ "precision", required_argument, NULL, OPT_PRECISION },
	{ "oneshot-resolution", required_argument, NULL, OPT_ONESHOT_RES },
	{ "oneshot-slot-cap", required_argument, NULL, OPT_ONESHOT_CAP },
	{ "oneshot-probes", required_argument, NULL, OPT_ONESHOT_PROBES },
	{ "periodic-resolution", required_argument, NULL, OPT_PERIODIC_RES },
	{ "periodic-slot-cap", required_argument, NULL, OPT_PERIODIC_CAP },
	{ "periodic-probes", required_argument, NULL, OPT_PERIODIC_PROBES },
	{ "max-clients", required_argument, NULL, OPT_MAX_CLIENTS },
	{ "max-frame", required_argument, NULL, OPT_MAX_FRAME },
	{ "max-payload", required_argument, NULL, OPT_MAX_PAYLOAD },
	{ "max-timers", required_argument, NULL, OPT_MAX_TIMERS },
	{ "max-queued", required_argument, NULL, OPT_MAX_QUEUED },
	{ "linger", required_argument, NULL, OPT_LINGER },
	{ "max-clients-per-uid", required_argument, NULL, OPT_CLIENTS_PER_UID },
	{ "max-sessions-per-uid", required_argument, NULL, OPT_SESSIONS_PER_UID },
	{ "max-timers-per-uid", required_argument, NULL, OPT_TIMERS_PER_UID },
	{ "max-periodic-rate-per-uid", required_argument, NULL, OPT_RATE_PER_UID },
	{ "max-bytes-per-uid", required_argument, NULL, OPT_BYTES_PER_UID },
	{ "max-journal-per-uid", required_argument, NULL, OPT_JOURNAL_PER_UID },
	{ "max-memory", required_argument, NULL, OPT_MAX_MEMORY },
	{ "budgets", required_argument, NULL, OPT_BUDGETS },
	{ "max-output", required_argument, NULL, OPT_MAX_OUTPUT },
	{ "max-window", required_argument, NULL, OPT_MAX_WINDOW },
	{ "hello-timeout", required_argument, NULL, OPT_HELLO_TIMEOUT },
	{ "output-timeout", required_argument, NULL, OPT_OUTPUT_TIMEOUT },
	{ "max-deliveries", required_argument, NULL, OPT_MAX_DELIVERIES },
	{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
	{ "fsync", required_argument, NULL, OPT_FSYNC },
	{ "journal-max", required_argument, NULL, OPT_JOURNAL_MAX },
	{ "snapshot-interval", required_argument, NULL, OPT_SNAPSHOT_INTERVAL },
	{ "snapshot-growth", required_argument, NULL, OPT_SNAPSHOT_GROWTH },
	{ "snapshot-min-interval", required_argument, NULL, OPT_SNAPSHOT_MIN_INTERVAL },
	{ "ignore-snapshot", no_argument, NULL, OPT_IGNORE_SNAPSHOT },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

/* A lane field set by a flag: which lane, which field, its bounds. */
struct lane_flag {
	int opt;
	enum bw_lane lane;
	size_t offset;
	uint64_t max;
};

static const struct lane_flag lane_flags[] = {
	{ OPT_ONESHOT_RES, BW_LANE_ONESHOT,
	  offsetof(struct bw_config, resolution_ms), BW_MAX_RESOLUTION_MS },
	{ OPT_ONESHOT_CAP, BW_LANE_ONESHOT,
	  offsetof(struct bw_config, slot_cap), BW_MAX_SLOT_CAP },
	{ OPT_ONESHOT_PROBES, BW_LANE_ONESHOT,
	  offsetof(struct bw_config, max_probes), BW_MAX_PROBES },
	{ OPT_PERIODIC_RES, BW_LANE_PERIODIC,
	  offsetof(struct bw_config, resolution_ms), BW_MAX_RESOLUTION_MS },
	{ OPT_PERIODIC_CAP, BW_LANE_PERIODIC,
	  offsetof(struct bw_config, slot_cap), BW_MAX_SLOT_CAP },
	{ OPT_PERIODIC_PROBES, BW_LANE_PERIODIC,
	  offsetof(struct bw_config, max_probes), BW_MAX_PROBES },
};

struct lane_override {
	bool set;
	unsigned value;
};

static const char *flag_name(int opt)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == opt)
			return o->name;
	return "?";
}

static int find_preset(const char *name, enum bw_dual_preset *out)
{
	for (int p = 0; p < BW_DUAL_PRESET_COUNT; p++) {
		if (strcmp(name, bw_dual_preset_name(p)) == 0) {
			*out = p;
			return 0;
		}
	}
	fprintf(stderr, "bitwheeld: --preset: unknown preset '%s' (standard-balanced, fast-precise, standard-burst)\n",
		name);
	return -1;
}

static int parse_limit(int opt, const char *arg, struct bwd_limits *l)
{
	uint64_t v;
	const char *flag = flag_name(opt);

	switch (opt) {
	case OPT_MAX_CLIENTS:
		if (parse_uint(flag, arg, 1, 1000000, 10, &v))
			return -1;
		l->max_clients = (uint32_t)v;
		return 0;
	case OPT_MAX_FRAME:
		if (parse_uint(flag, arg, 256, 16u << 20, 10, &v))
			return -1;
		l->max_frame = (uint32_t)v;
		return 0;
	case OPT_MAX_PAYLOAD:
		if (parse_uint(flag, arg, 0, 16u << 20, 10, &v))
			return -1;
		l->max_payload = (uint32_t)v;
		return 0;
	case OPT_MAX_TIMERS:
		return parse_uint(flag, arg, 1, UINT32_MAX, 10, &l->max_timers);
	case OPT_MAX_QUEUED:
		return parse_uint(flag, arg, 0, UINT32_MAX, 10, &l->max_queued);
	case OPT_MAX_OUTPUT:
		return parse_uint(flag, arg, 4096, 1ull << 34, 10, &l->max_output);
	case OPT_MAX_WINDOW:
		if (parse_uint(flag, arg, 1, 1u << 20, 10, &v))
			return -1;
		l->max_window = (uint32_t)v;
		return 0;
	case OPT_MAX_DELIVERIES:
		if (parse_uint(flag, arg, 0, UINT32_MAX, 10, &v))
			return -1;
		l->max_deliveries = (uint32_t)v;
		return 0;
	case OPT_HELLO_TIMEOUT:
		return parse_duration(flag, arg, 1000000u, "1ms", &l->hello_timeout_ns);
	case OPT_OUTPUT_TIMEOUT:
		return parse_duration(flag, arg, 1000000u, "1ms", &l->output_timeout_ns);
	case OPT_CLIENTS_PER_UID:
		if (parse_uint(flag, arg, 1, 1000000, 10, &v))
			return -1;
		l->max_clients_per_uid = (uint32_t)v;
		return 0;
	case OPT_SESSIONS_PER_UID:
		return parse_uint(flag, arg, 0, UINT32_MAX, 10,
				  &l->max_sessions_per_uid);
	case OPT_TIMERS_PER_UID:
		return parse_uint(flag, arg, 1, UINT64_MAX / 2, 10,
				  &l->max_timers_per_uid);
	case OPT_RATE_PER_UID:
		if (parse_uint(flag, arg, 0, 1000000000, 10, &v))
			return -1;
		l->max_periodic_mhz_per_uid = v * 1000u;
		return 0;
	case OPT_BYTES_PER_UID:
	case OPT_MAX_MEMORY:
	case OPT_JOURNAL_PER_UID:
		if (bwd_parse_size(arg, &v) || v < MIN_BYTES) {
			fprintf(stderr, "bitwheeld: --%s: '%s' is not a size of %u or more (e.g. 65536, 64K, 16M, 1G)\n",
				flag, arg, MIN_BYTES);
			return -1;
		}
		*(opt == OPT_MAX_MEMORY ? &l->max_memory :
		  opt == OPT_JOURNAL_PER_UID ? &l->max_journal_per_uid :
		  &l->max_bytes_per_uid) = v;
		return 0;
	case OPT_LINGER:
		return parse_duration(flag, arg, 0, "0s", &l->linger_ns);
	}
	return -1;
}

static int parse_store(int opt, const char *arg, struct bwd_store_options *st)
{
	static const char *const policies[] = {
		[BWD_FSYNC_NEVER] = "never", [BWD_FSYNC_BATCH] = "batch",
		[BWD_FSYNC_ALWAYS] = "always",
	};

	switch (opt) {
	case OPT_STATE_DIR:
		if (!*arg) {
			fprintf(stderr, "bitwheeld: --state-dir: an empty path\n");
			return -1;
		}
		st->dir = arg;
		return 0;
	case OPT_FSYNC:
		for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
			if (strcmp(arg, policies[i]) == 0) {
				st->fsync = (enum bwd_fsync)i;
				return 0;
			}
		}
		fprintf(stderr, "bitwheeld: --fsync: '%s' is not batch, always or never\n", arg);
		return -1;
	case OPT_JOURNAL_MAX:
		return parse_uint(flag_name(opt), arg, 4096, 1ull << 40, 10,
				  &st->journal_max);
	case OPT_SNAPSHOT_INTERVAL:
		return parse_duration(flag_name(opt), arg, 1000000000ull, "1s",
				      &st->snapshot_interval_ns);
	case OPT_IGNORE_SNAPSHOT:
		st->ignore_snapshot = true;
		return 0;
	case OPT_SNAPSHOT_GROWTH: {
		char *end;

		errno = 0;
		st->snapshot_growth = strtod(arg, &end);
		if (errno || end == arg || *end || !(st->snapshot_growth >= 0) ||
		    st->snapshot_growth > 1000) {
			fprintf(stderr, "bitwheeld: --snapshot-growth: '%s' is not a factor in 0..1000\n", arg);
			return -1;
		}
		return 0;
	}
	case OPT_SNAPSHOT_MIN_INTERVAL:
		return parse_duration(flag_name(opt), arg, 0, "0s",
				      &st->snapshot_min_interval_ns);
	}
	return -1;
}

void bwd_options_free(struct bwd_options *o)
{
	bwd_budgets_free(&o->budgets);
}

/* getopt_long's complaints, one line each, worded as bwctl's are (opterr
 * is off: getopt's own would name libtool's .libs path as the program). */
static void bad_option(char **argv, int c)
{
	const char *opt = argv[optind - 1];
	bool is_long = strncmp(opt, "--", 2) == 0;

	if (c == ':')
		fprintf(stderr, "bitwheeld: option '%s' needs an argument\n", opt);
	/* glibc sets optopt for a known long option given an argument it
	 * does not take, and leaves it 0 for an unknown or ambiguous one. */
	else if (is_long && optopt != 0)
		fprintf(stderr, "bitwheeld: option '%s' takes no argument\n", opt);
	else if (is_long)
		fprintf(stderr, "bitwheeld: unknown or ambiguous option '%s'\n", opt);
	else
		fprintf(stderr, "bitwheeld: unknown option '-%c'\n", optopt);
}

static int parse(int argc, char **argv, struct bwd_options *o)
{
	enum bw_dual_preset preset = BW_DUAL_FAST_PRECISE;
	struct lane_override over[sizeof(lane_flags) / sizeof(lane_flags[0])] = { 0 };
	enum bw_precision precision = BW_EXACT;
	const char *env = getenv("BITWHEEL_SOCKET");
	uint64_t v;
	int c, err;

	memset(o, 0, sizeof(*o));
	o->socket_path = env && *env ? env : DEFAULT_SOCKET;
	o->socket_mode = 0660;
	o->socket_gid = (gid_t)-1;
	o->limits = (struct bwd_limits){
		.max_clients = 1024,
		.max_frame = BWP_DEFAULT_MAX_FRAME,
		.max_payload = BWP_DEFAULT_MAX_PAYLOAD,
		.max_timers = 65536,
		.max_queued = 4096,
		.linger_ns = 300000000000ull,
		.max_output = 1u << 20,
		.max_window = 4096,
		.max_deliveries = BWD_DEFAULT_MAX_DELIVERIES,
		.hello_timeout_ns = 30000000000ull,
		.output_timeout_ns = 30000000000ull,
		/* max_clients_per_uid and max_timers_per_uid: 0 until the
		 * end, where they follow max_clients and max_timers. */
		.max_sessions_per_uid = 256,
		.max_periodic_mhz_per_uid = 10000u * 1000u,
		/* max_bytes_per_uid: 0 until the end, where it follows
		 * max_memory. */
		.max_memory = DEFAULT_MAX_MEMORY,
	};
	o->store = (struct bwd_store_options){
		.fsync = BWD_FSYNC_BATCH,
		.journal_max = 64u << 20,
		.snapshot_growth = 2.0,
		.snapshot_min_interval_ns = 10000000000ull,
		.snapshot_interval_ns = 600000000000ull,
	};
	optind = 1;
	while ((c = getopt_long(argc, argv, ":s:m:p:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			o->socket_path = optarg;
			break;
		case 'm':
			if (parse_uint("socket-mode", optarg, 0, 0777, 8, &v))
				return -1;
			o->socket_mode = (unsigned)v;
			break;
		case OPT_SOCKET_GROUP:
			if (parse_group(optarg, &o->socket_gid))
				return -1;
			break;
		case 'p':
			if (find_preset(optarg, &preset))
				return -1;
			break;
		case OPT_PRECISION:
			if (strcmp(optarg, "exact") == 0) {
				precision = BW_EXACT;
			} else if (strcmp(optarg, "coarse") == 0) {
				precision = BW_COARSE;
			} else {
				fprintf(stderr, "bitwheeld: --precision: '%s' is neither exact nor coarse\n", optarg);
				return -1;
			}
			break;
		case OPT_ONESHOT_RES: case OPT_ONESHOT_CAP: case OPT_ONESHOT_PROBES:
		case OPT_PERIODIC_RES: case OPT_PERIODIC_CAP: case OPT_PERIODIC_PROBES:
			for (size_t i = 0; i < sizeof(lane_flags) / sizeof(lane_flags[0]); i++) {
				if (lane_flags[i].opt != c)
					continue;
				if (parse_uint(flag_name(c), optarg, 1, lane_flags[i].max, 10, &v))
					return -1;
				over[i].set = true;
				over[i].value = (unsigned)v;
			}
			break;
		case OPT_MAX_CLIENTS: case OPT_MAX_FRAME: case OPT_MAX_PAYLOAD:
		case OPT_MAX_TIMERS: case OPT_MAX_QUEUED: case OPT_LINGER:
		case OPT_MAX_OUTPUT: case OPT_MAX_WINDOW: case OPT_HELLO_TIMEOUT: case OPT_MAX_DELIVERIES:
		case OPT_OUTPUT_TIMEOUT: case OPT_CLIENTS_PER_UID: case OPT_SESSIONS_PER_UID:
		case OPT_TIMERS_PER_UID: case OPT_RATE_PER_UID:
		case OPT_BYTES_PER_UID: case OPT_MAX_MEMORY: case OPT_JOURNAL_PER_UID:
			if (parse_limit(c, optarg, &o->limits))
				return -1;
			break;
		case OPT_STATE_DIR: case OPT_FSYNC: case OPT_JOURNAL_MAX:
		case OPT_SNAPSHOT_INTERVAL: case OPT_IGNORE_SNAPSHOT:
		case OPT_SNAPSHOT_GROWTH: case OPT_SNAPSHOT_MIN_INTERVAL:
			if (parse_store(c, optarg, &o->store))
				return -1;
			break;
		case OPT_BUDGETS:
			o->budgets.path = optarg;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case 'V':
			printf("bitwheeld " PACKAGE_VERSION "\n");
			return 1;
		default:
			bad_option(argv, c);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "bitwheeld: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	/* One uid takes at most a quarter of the connections and of the
	 * memory, and four sessions' worth of timers, no more than its bytes
	 * hold at the largest payload, unless told otherwise. */
	if (!o->limits.max_clients_per_uid)
		o->limits.max_clients_per_uid = o->limits.max_clients / 4 ?
			o->limits.max_clients / 4 : 1;
	if (!o->limits.max_bytes_per_uid)
		o->limits.max_bytes_per_uid = o->limits.max_memory / 4;
	/* And a quarter of the journal that starts a snapshot. */
	if (!o->limits.max_journal_per_uid)
		o->limits.max_journal_per_uid = o->store.journal_max / 4;
	if (!o->limits.max_timers_per_uid) {
		uint64_t fit = o->limits.max_bytes_per_uid /
			BWD_TIMER_COST(o->limits.max_payload);

		o->limits.max_timers_per_uid = 4 * o->limits.max_timers;
		if (fit < o->limits.max_timers_per_uid)
			o->limits.max_timers_per_uid = fit ? fit : 1;
	}
	if (o->budgets.path) {
		if (bwd_budgets_load(o->budgets.path, &o->limits, &o->budgets))
			return -1;
	} else {
		bwd_budgets_defaults(&o->limits, &o->budgets);
	}
	bw_dual_config_preset(preset, &o->wheel);
	o->preset_name = bw_dual_preset_name(preset);
	/* Both lanes fail over to an ordered store that fires on the exact
	 * tick, so a full slot is better left than probed past: probing would
	 * fire the timer ticks late (measured: p99 lateness 7.8 ms instead of
	 * 1.1 ms at 100 timers per 1 ms tick with slot cap 64). */
	o->wheel.oneshot.max_probes = o->wheel.periodic.max_probes = 1;
	/* A busy oneshot tick holds more timers than the presets' slots (at
	 * 1,000,000 schedules/s over 50 ms, ~900 a tick): past the cap they
	 * wait in the overflow store, O(log n) a timer, where they fire on
	 * the same tick anyway (measured: a third of the daemon's CPU, 1.1 M
	 * requests/s against 1.5 M).  The records are threaded lazily, so
	 * the larger cap costs address space until it is used. */
	o->wheel.oneshot.slot_cap = ONESHOT_SLOT_CAP;
	o->wheel.oneshot.precision = o->wheel.periodic.precision = precision;
	for (size_t i = 0; i < sizeof(lane_flags) / sizeof(lane_flags[0]); i++) {
		struct bw_config *lane = lane_flags[i].lane == BW_LANE_ONESHOT ?
			&o->wheel.oneshot : &o->wheel.periodic;

		if (over[i].set)
			*(unsigned *)((char *)lane + lane_flags[i].offset) = over[i].value;
	}
	if ((err = bw_config_validate(&o->wheel.oneshot)) ||
	    (err = bw_config_validate(&o->wheel.periodic))) {
		fprintf(stderr, "bitwheeld: wheel configuration: %s\n", bw_strerror(err));
		return -1;
	}
	if ((uint64_t)o->limits.max_frame < (uint64_t)o->limits.max_payload + BWP_PAYLOAD_OVERHEAD) {
		fprintf(stderr, "bitwheeld: --max-frame %" PRIu32 " must be at least --max-payload + %u = %" PRIu64 "\n",
			o->limits.max_frame, BWP_PAYLOAD_OVERHEAD,
			(uint64_t)o->limits.max_payload + BWP_PAYLOAD_OVERHEAD);
		return -1;
	}
	/* Fires pause at half the bound (conn.c): the largest must fit below
	 * it, or a reading client could be cut off for a single fire. */
	if (o->limits.max_output < 2 * ((uint64_t)o->limits.max_payload +
					BWP_PAYLOAD_OVERHEAD + BWP_HEADER_SIZE)) {
		fprintf(stderr, "bitwheeld: --max-output %" PRIu64 " must be at least twice the largest fire, 2 x (--max-payload + %u) = %" PRIu64 "\n",
			o->limits.max_output, BWP_PAYLOAD_OVERHEAD + BWP_HEADER_SIZE,
			2 * ((uint64_t)o->limits.max_payload + BWP_PAYLOAD_OVERHEAD +
			     BWP_HEADER_SIZE));
		return -1;
	}
	return 0;
}

int bwd_options_parse(int argc, char **argv, struct bwd_options *o)
{
	int r = parse(argc, argv, o);

	/* Each refusal above is one line; then the way on, as coreutils'. */
	if (r < 0)
		fputs("Try 'bitwheeld --help'.\n", stderr);
	return r;
}
