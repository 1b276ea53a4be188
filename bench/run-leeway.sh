#!/usr/bin/env bash
# run-leeway.sh - what a timer's leeway buys (issue 15), in one command.
#
#   bench/run-leeway.sh [--out DIR] [--before BITWHEELD [--before-label TEXT]]
#                       [-- BWLOAD_OPTIONS...]
#
#   1. builds bench/bwload, daemon/bitwheeld and client/bwctl in
#      $BW_BENCH_BUILD, or in the tree if it is configured, otherwise out
#      of tree in bench/build
#   2. starts bitwheeld on a Unix socket in a temporary directory and runs
#      bwload --leeway against it (defaults: --duration 3000 --rate 2000
#      --min-delay-ms 1 --max-delay-ms 500 --timers 10000 --period-ms
#      1000): lateness by leeway class, and one consumer of 10,000
#      periodic timers without and with coalescing (DIR/leeway.md)
#   3. appends issue 15's example, `bwctl schedule --key 9 --in 250ms
#      --every 250ms --count 20`, against a fresh daemon of this build
#      (and of BITWHEELD, an older build, with --before, named TEXT in
#      the table): the daemon's lateness of each fire (bwctl's late=)
#
# DIR: bench/results.  Run as root for the daemon's write counts (Metrics
# are root's).  bwload runs under BW_BENCH_TIMEOUT seconds (default 300).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
out=
before=
before_label=
command="bench/run-leeway.sh $*"
limit=${BW_BENCH_TIMEOUT:-300}

while [ $# -gt 0 ]; do
	case $1 in
	--out) out=$2; shift ;;
	--before) before=$2; shift ;;
	--) shift; break ;;
	--before-label) before_label=$2; shift ;;
	-h | --help) sed -n '2,22p' "$0"; exit 0 ;;
	*) echo "run-leeway.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
out=${out:-$here/results}
mkdir -p "$out"

# shellcheck source=build-aux/common.sh
. "$root/build-aux/common.sh"
build=$(bw_bench_build "${BW_BENCH_BUILD:-}" run-leeway.sh)
make -C "$build" -j2 bench/bwload daemon/bitwheeld client/bwctl >/dev/null

# shellcheck source=bench/servers.sh
. "$here/servers.sh"
bw_servers_init run-leeway.sh
bw_start_bitwheeld "$build"
if [ $# -eq 0 ]; then
	set -- --duration 3000 --rate 2000 --min-delay-ms 1 --max-delay-ms 500 \
		--timers 10000 --period-ms 1000
fi
echo "run-leeway.sh: bwload --leeway $* -> $out/leeway.md" >&2
timeout "$limit" "$build/bench/bwload" --leeway --socket "$bw_servers_tmp/bw.sock" \
	--daemon-pid "$bw_pid" --out "$out" "$@"

# bwctl250 DAEMON: the example against a fresh DAEMON; one table row.
bwctl250() {
	local dir pid
	dir=$(mktemp -d)
	"$1" --socket "$dir/s" >/dev/null 2>&1 &
	pid=$!
	bw_wait_socket "$dir/s" "$pid" || { echo "run-leeway.sh: $1 did not start" >&2; exit 1; }
	"$build/client/bwctl" --socket "$dir/s" schedule --key 9 --in 250ms \
		--every 250ms --count 20 |
		sed -n 's/.* late=\([0-9.]*\)ms.*/\1/p' | sort -n |
		awk -v who="$2" '{ v[NR] = $1 } END {
			printf "| %s | %d | %.2f | %.2f | %.2f | %.2f |\n", who, NR,
			       v[1], v[int(NR / 2) + 1], v[int(NR * 0.9)], v[NR] }'
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	rm -rf "$dir"
}

# The backquotes are Markdown's.
# shellcheck disable=SC2016
{
	printf '\n## Issue 15'"'"'s example\n\n'
	printf '`bwctl schedule --key 9 --in 250ms --every 250ms --count 20`, '
	printf 'each against a fresh daemon: the daemon'"'"'s lateness of the 20 fires '
	printf '(bwctl'"'"'s late=, fired_at - deadline), in ms.\n\n'
	printf '| daemon | fires | min | p50 | p90 | max |\n|---|---:|---:|---:|---:|---:|\n'
	if [ -n "$before" ]; then
		bwctl250 "$before" "before: ${before_label:-$before}"
	fi
	bwctl250 "$build/daemon/bitwheeld" "this build"
	printf '\nMade by `%s` (bwload --leeway %s).\n' "$command" "$*"
} >>"$out/leeway.md"
echo "run-leeway.sh: done" >&2
