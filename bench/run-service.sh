#!/usr/bin/env bash
# run-service.sh - the whole service comparison in one command.
#
#   bench/run-service.sh [--quick] [--out DIR] [--no-install] [--no-redis]
#                        [-- BWLOAD_OPTIONS...]
#
#   1. installs the benchmark's optional Debian packages when run as root
#      (build-aux/common.sh: bw_bench_packages: redis-server,
#      libhiredis-dev, ...), unless --no-install
#   2. builds bench/bwload and daemon/bitwheeld: in the tree if it is
#      configured, otherwise out of tree in bench/build
#   3. starts bitwheeld and redis-server (--port 0 --save '' --appendonly
#      no) on Unix sockets in a temporary directory
#   4. runs bwload against them and its own echo server: DIR/service.md,
#      DIR/service.csv
#   5. renders the charts with gnuplot (bench/plot-service.sh; skipped
#      with a note without gnuplot): DIR/service-throughput.png,
#      service-lateness.png
#   6. stops every server it started, however it ends
#
# DIR: bench/results, or bench/results/quick with --quick (a few seconds).
# bwload runs under a time limit of BW_BENCH_TIMEOUT seconds (default 600).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
quick=
out=
install=yes
redis=yes
limit=${BW_BENCH_TIMEOUT:-600}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=--quick ;;
	--out) out=$2; shift ;;
	--no-install) install= ;;
	--no-redis) redis= ;;
	--) shift; break ;;
	-h | --help) sed -n '2,22p' "$0"; exit 0 ;;
	*) echo "run-service.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
out=${out:-$here/results${quick:+/quick}}
mkdir -p "$out"
t0=$(date +%s)

# shellcheck source=build-aux/common.sh
. "$root/build-aux/common.sh"
if [ -n "$install" ]; then
	bw_bench_install_missing || echo "run-service.sh: going on without the missing packages" >&2
fi

# ---- build ---------------------------------------------------------------
build=$(bw_bench_build "" run-service.sh)
make -C "$build" -j2 bench/bwload daemon/bitwheeld >/dev/null
bwload=$build/bench/bwload

# hiredis installed since configure ran: configure again.
if "$bwload" --list | grep 'not built' >/dev/null && pkg-config --exists hiredis 2>/dev/null; then
	(cd "$build" && ./config.status --recheck >/dev/null && ./config.status >/dev/null)
	make -C "$build" -j2 bench/bwload >/dev/null
fi
"$bwload" --list | grep 'not built' >&2 || true

# ---- servers -------------------------------------------------------------
# shellcheck source=bench/servers.sh
. "$here/servers.sh"
bw_servers_init run-service.sh
bw_start_bitwheeld "$build"
args=(--socket "$bw_servers_tmp/bw.sock" --daemon-pid "$bw_pid")
if [ -n "$redis" ] && bw_start_redis "redis subjects"; then
	args+=(--redis "$bw_servers_tmp/redis.sock" --redis-pid "$redis_pid")
fi

# ---- run -----------------------------------------------------------------
echo "run-service.sh: bwload ${quick:-full} -> $out" >&2
t1=$(date +%s)
timeout "$limit" "$bwload" $quick "${args[@]}" --out "$out" "$@"
t2=$(date +%s)
echo "run-service.sh: bwload took $((t2 - t1)) s" >&2
if command -v gnuplot >/dev/null; then
	timeout 120 "$here/plot-service.sh" --csv "$out/service.csv" --out "$out" ||
		echo "run-service.sh: plot-service.sh failed: no charts" >&2
else
	echo "run-service.sh: gnuplot not installed: no charts (install gnuplot-nox)" >&2
fi
echo "run-service.sh: done in $(($(date +%s) - t0)) s; see $out/service.md" >&2
