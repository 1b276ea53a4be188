#!/usr/bin/env bash
# run-wheel.sh - the whole wheel comparison in one command.
#
#   bench/run-wheel.sh [--quick] [--out DIR] [--no-callgrind] [--no-install]
#                      [--trace NAME|none]
#
#   1. installs the benchmark's optional Debian packages when run as root
#      (build-aux/common.sh: bw_bench_packages), unless --no-install
#   2. builds bench/bwbench: in the tree if it is configured, otherwise
#      out of tree in bench/build
#   3. runs bwbench over every scenario and subject: DIR/wheel.md,
#      wheel.csv, wheel.json; the trace scenario replays
#      bench/traces/NAME.trace.xz (default redis, the shape of an event
#      loop under load; none: no trace), converted by trace-convert.py
#      (needs python3)
#   4. unless --quick or --no-callgrind: bench/callgrind.sh, instructions
#      per operation: DIR/callgrind.md, callgrind.csv, callgrind-profile-*
#   5. renders the charts with gnuplot: DIR/wheel-*.png
#
# DIR: bench/results, or bench/results/quick with --quick.  Every step has
# a time limit (BW_BENCH_TIMEOUT seconds each, default 1800).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
quick=
out=
callgrind=yes
install=yes
trace=redis
limit=${BW_BENCH_TIMEOUT:-1800}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=--quick ;;
	--out) out=$2; shift ;;
	--no-callgrind) callgrind= ;;
	--no-install) install= ;;
	--trace) trace=$2; shift ;;
	-h | --help) sed -n '2,24p' "$0"; exit 0 ;;
	*) echo "run-wheel.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$quick" ] && callgrind=
out=${out:-$here/results${quick:+/quick}}
mkdir -p "$out"
t0=$(date +%s)

# shellcheck source=build-aux/common.sh
. "$root/build-aux/common.sh"
if [ -n "$install" ]; then
	bw_bench_install_missing || echo "run-wheel.sh: going on without the missing packages" >&2
fi

# ---- build ---------------------------------------------------------------
build=$(bw_bench_build "" run-wheel.sh)
make -C "$build" -j2 bench/bwbench >/dev/null
bwbench=$build/bench/bwbench

# A peer configure missed but whose package is there now: configure again.
if "$bwbench" --list | grep 'not built' >/dev/null; then
	(cd "$build" && ./config.status --recheck >/dev/null && ./config.status >/dev/null)
	make -C "$build" -j2 bench/bwbench >/dev/null
fi
"$bwbench" --list | grep 'not built' >&2 || true

# ---- run -----------------------------------------------------------------
trace_args=()
if [ "$trace" != none ]; then
	if ! command -v python3 >/dev/null; then
		echo "run-wheel.sh: no python3: no trace scenario" >&2
	else
		tmp=$(mktemp -d)
		trap 'rm -rf "$tmp"' EXIT
		python3 "$here/trace-convert.py" "$here/traces/$trace.trace.xz" -o "$tmp/$trace.stream"
		trace_args=(--trace "$tmp/$trace.stream")
	fi
fi
echo "run-wheel.sh: bwbench ${quick:-full} -> $out" >&2
t1=$(date +%s)
timeout "$limit" "$bwbench" $quick --out "$out" "${trace_args[@]}"
t2=$(date +%s)
echo "run-wheel.sh: bwbench took $((t2 - t1)) s" >&2

if [ -n "$callgrind" ]; then
	if command -v valgrind >/dev/null; then
		BWBENCH=$bwbench timeout "$limit" "$here/callgrind.sh" --out "$out" "${trace_args[@]}"
	else
		echo "run-wheel.sh: valgrind not installed: no instruction counts" >&2
	fi
fi

if command -v gnuplot >/dev/null; then
	timeout "$limit" "$here/plot.sh" --csv "$out/wheel.csv" --out "$out"
else
	echo "run-wheel.sh: gnuplot not installed: no charts (install gnuplot-nox)" >&2
fi
echo "run-wheel.sh: done in $(($(date +%s) - t0)) s; see $out/wheel.md" >&2
