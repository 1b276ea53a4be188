#!/usr/bin/env bash
# run-attack.sh - the victim's lateness under each attack of a hostile
# local user (issues 12 and 20), in one command:
#
#   bench/run-attack.sh [--build DIR] [--out FILE] [--duration S]
#                       [--nice N] [-- BWATTACK_OPTIONS...]
#
#   1. builds bench/bwattack, bench/bwturns.so and daemon/bitwheeld in DIR
#      (default: the tree if it is configured, else bench/build)
#   2. runs bwattack (as root: the attacker is uid 65534, the victim uid
#      65533): a fresh daemon with its default budgets per attack, the
#      baseline and every attack of bench/attack.h (or those of
#      bwattack's --attacks), --duration seconds of the victim each
#      (default 10), its loop turns timed (bwturns.so)
#   3. writes FILE (default bench/results/attack.md): the command, the
#      machine, its load, and the table
#
# --nice N runs the daemon and the victim at nice N (default 0; e.g. -10
# on a shared machine, so that the figures show the daemon's own stalls
# more than the other processes' share of the CPU); bwattack's --rt PRIO
# runs them under SCHED_FIFO, for a machine loaded past its cores.
# Issue 20's victim and delivery attacks (results/attack-delivery.md):
#
#   bench/run-attack.sh --out bench/results/attack-delivery.md -- --rt 10 \
#       --attacks none,redeliver,churn,reattach,coalesce \
#       --interval 10 --delay 50 --delay-max 500
#
# Exit status: bwattack's (1 when an attack missed the target).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build=
out=$here/results/attack.md
duration=10
nice=0
cmdline="bench/run-attack.sh $*"

while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift ;;
	--out) out=$2; shift ;;
	--duration) duration=$2; shift ;;
	--nice) nice=$2; shift ;;
	--) shift; break ;;
	-h | --help) sed -n '2,28p' "$0"; exit 0 ;;
	*) echo "run-attack.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
if [ "$(id -u)" != 0 ]; then
	echo "run-attack.sh: needs root (the attacker runs as uid 65534, the victim as 65533)" >&2
	exit 2
fi

# shellcheck source=build-aux/common.sh
. "$root/build-aux/common.sh"
build=$(bw_bench_build "$build" run-attack.sh)
make -C "$build" -j2 bench/bwattack bench/bwturns.la daemon/bitwheeld >/dev/null

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
rc=0
"$build/bench/bwattack" --daemon "$build/daemon/bitwheeld" --duration "$duration" \
	--nice "$nice" --turns "$build/bench/.libs/bwturns.so" "$@" >"$tmp" || rc=$?
load1=$(cut -d' ' -f1-3 /proc/loadavg)
{
	echo "# The victim under attack (issues 12 and 20)"
	echo
	echo "Produced by \`$cmdline\` on $(date -u '+%Y-%m-%d %H:%M UTC'),"
	# Dirty means changed sources; the results this writes do not count.
	rev=$(git -C "$root" describe --always 2>/dev/null || echo '?')
	git -C "$root" diff --quiet HEAD -- . ':!bench/results' 2>/dev/null || rev=$rev-dirty
	echo "bitwheel $rev,"
	echo "$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')),"
	echo "load average $load0 before and $load1 after ($(($(date +%s) - t0)) s)."
	echo
	echo "Each row: a fresh bitwheeld with its default budgets (\`--linger 500ms\`"
	echo "for the expiry attack), the attacker (uid 65534, bench/attack.h) built up"
	echo "until the daemon refused it, then the victim (uid 65533, its own named"
	echo "session, a consumer; the line above the table says its timers and the"
	echo "target) scheduling while the attacker kept on.  Lateness in ms: at receipt"
	echo "(receive time - deadline: p50, p99, max) and by the daemon's clock"
	echo "(Fired.fired_at_ns - deadline, p99).  The loop turn column is"
	echo "bench/turns.c's: the longest CPU time and wall time the daemon spent"
	echo "between two epoll_wait calls, and how many turns took over 1, 5 and"
	echo "10 ms of CPU, in the seconds the victim ran; then the longest in the"
	echo "daemon's life, the attacker's build-up included.  CPU time counts the"
	echo "daemon's own work however busy the machine was."
	echo
	cat "$tmp"
} >"$out"
cat "$tmp"
echo "run-attack.sh: $out" >&2
exit "$rc"
