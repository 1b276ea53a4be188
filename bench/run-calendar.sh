#!/usr/bin/env bash
# run-calendar.sh - the daemon with 100,000 calendar timers across a DST
# change (issue 24, "Performance"), in one command.
#
#   bench/run-calendar.sh [--quick] [--out DIR] [--at LIST]
#                         [-- BWCALLOAD_OPTIONS...]
#
#   1. builds bench/bwcalload, daemon/bitwheeld and tests/.libs/fakeclock.so
#      (the test suites' CLOCK_REALTIME shim) in $BW_BENCH_BUILD, or in
#      the tree if it is configured, otherwise out of tree in bench/build
#   2. per instant of LIST (default: Europe/Berlin's spring-forward and
#      fall-back of 2027, 2027-03-28T01:00:00Z and 2027-10-31T01:00:00Z),
#      bwcalload starts its own bitwheeld under the shim with TZ=
#      Europe/Berlin and the wall clock 10 s before the instant, schedules
#      100,000 calendar timers of mixed specs, runs 40 s past the change
#      for real, then steps the clock forward and back an hour
#      (bench/bwcalload.c says what it measures and checks); about 55 s
#      each.  --quick: 10,000 timers, 5 s before and 12 s after (about
#      20 s each).
#
# Writes DIR/calendar.md (DIR: bench/results, bench/results/quick with
# --quick).  Exits non-zero when a run's checks fail (the report is still
# written).  Each run is bounded by BW_BENCH_TIMEOUT seconds (default 300).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
quick=
out=
at=2027-03-28T01:00:00Z,2027-10-31T01:00:00Z
command="bench/run-calendar.sh $*"
limit=${BW_BENCH_TIMEOUT:-300}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--out) out=$2; shift ;;
	--at) at=$2; shift ;;
	--) shift; break ;;
	-h | --help) sed -n '2,23p' "$0"; exit 0 ;;
	*) echo "run-calendar.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
out=${out:-$here/results${quick:+/quick}}
mkdir -p "$out"
if [ $# -eq 0 ]; then
	if [ -n "$quick" ]; then
		set -- --timers 10000 --lead 5 --after 12
	else
		set -- --timers 100000 --lead 10 --after 40
	fi
fi

# shellcheck source=build-aux/common.sh
. "$root/build-aux/common.sh"
build=$(bw_bench_build "${BW_BENCH_BUILD:-}" run-calendar.sh)
make -C "$build" -j2 bench/bwcalload daemon/bitwheeld tests/fakeclock.la >/dev/null

report=$out/calendar.md
status=0
version=$(git -C "$root" describe --always --dirty 2>/dev/null || echo '?')
{
	echo "# Calendar timers across a DST change (bench/run-calendar.sh${quick:+ --quick})"
	echo
	echo "\`$command\` on $(hostname), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores (load average $(cut -d' ' -f1-3 /proc/loadavg)), bitwheel $version."
	echo "Each section: \`bwcalload --daemon daemon/bitwheeld --shim tests/.libs/fakeclock.so --at INSTANT $*\`."
	echo
} >"$report"
IFS=, read -ra instants <<<"$at"
for instant in "${instants[@]}"; do
	echo "run-calendar.sh: bwcalload --at $instant $* -> $report" >&2
	if ! timeout "$limit" "$build/bench/bwcalload" --daemon "$build/daemon/bitwheeld" \
		--shim "$build/tests/.libs/fakeclock.so" --at "$instant" "$@" |
		sed '1s/^# /## /' >>"$report"; then
		echo "run-calendar.sh: bwcalload --at $instant failed its checks (see above)" >&2
		status=1
	fi
	echo >>"$report"
done
exit "$status"
