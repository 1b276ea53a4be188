#!/usr/bin/env bash
# soak.sh - a bounded soak of bitwheeld under load and faults (not in CI).
#
#   bench/soak.sh [--duration SECONDS] [--build DIR] [--keep] [--state]
#                 [--daemon-opt OPTION]... [-- BWSOAK_OPTIONS...]
#
#   1. builds bench/bwsoak and daemon/bitwheeld: in DIR with --build, in
#      the tree if it is configured, otherwise out of tree in bench/build
#   2. starts its own bitwheeld on a socket in a temporary directory, with
#      each --daemon-opt (e.g. --daemon-opt --max-queued=16 to see that the
#      soak notices drops); --state keeps its state in a state directory
#      there (--state-dir), journal and snapshots at work throughout
#   3. runs bwsoak against it for --duration seconds (default 300): client
#      processes mixing oneshot and periodic timers, cancels, replaces,
#      kills, reconnects and slow readers, as producers and manually
#      acknowledging consumers of shared named sessions (protocol 2) and
#      in anonymous sessions; consumers release, touch and kick, and fires
#      that keep failing are dead-lettered; then the accounting
#   4. stops bitwheeld with SIGTERM and removes the directory (--keep
#      leaves the journals and logs), however it ends
#
# Exits non-zero if bwsoak reports anything lost (or any other failure),
# or if bitwheeld did not stop cleanly.  $BW_SOAK_SEED varies the run.
# Runs niced: the machines are shared.  build-aux/test.sh runs it for
# $BW_SOAK_SECONDS (90 by default) with --state; longer runs by hand, as
# issue 20's lost fires showed only after eight minutes:
#   BW_SOAK_SEED=11 bench/soak.sh --duration 1200 --state
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
duration=300
build=
keep=
state=
daemon_opts=()

while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift ;;
	--build) build=$2; shift ;;
	--keep) keep=yes ;;
	--state) state=yes ;;
	--daemon-opt) daemon_opts+=("$2"); shift ;;
	--) shift; break ;;
	-h | --help) sed -n '2,27p' "$0"; exit 0 ;;
	*) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
case $duration in
'' | *[!0-9]*) echo "soak.sh: --duration takes whole seconds" >&2; exit 2 ;;
esac

# shellcheck source=build-aux/common.sh
. "$root/build-aux/common.sh"

# ---- build ---------------------------------------------------------------
build=$(bw_bench_build "$build" soak.sh)
nice make -C "$build" -j2 bench/bwsoak daemon/bitwheeld >/dev/null

# ---- daemon --------------------------------------------------------------
tmp=$(mktemp -d)
bw_pid=
status=1
cleanup() {
	if [ -n "$bw_pid" ]; then
		kill "$bw_pid" 2>/dev/null || true
		wait "$bw_pid" 2>/dev/null || true
	fi
	if [ -n "$keep" ]; then
		echo "soak.sh: kept $tmp" >&2
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
[ -z "$state" ] || daemon_opts+=("--state-dir=$tmp/state")

# The libtool wrapper execs the daemon, so $! is the daemon's pid.
nice "$build/daemon/bitwheeld" --socket "$tmp/bw.sock" ${daemon_opts[@]+"${daemon_opts[@]}"} \
	>"$tmp/bitwheeld.log" 2>&1 &
bw_pid=$!
for _ in $(seq 50); do
	[ -S "$tmp/bw.sock" ] && break
	kill -0 "$bw_pid" 2>/dev/null || break
	sleep 0.1
done
if [ ! -S "$tmp/bw.sock" ]; then
	echo "soak.sh: bitwheeld did not start:" >&2
	cat "$tmp/bitwheeld.log" >&2
	exit 1
fi

# ---- run -----------------------------------------------------------------
echo "soak.sh: $("$build/daemon/bitwheeld" --version 2>&1 | head -1), ${duration} s, build $build" >&2
set +e
nice "$build/bench/bwsoak" --socket "$tmp/bw.sock" --daemon-pid "$bw_pid" \
	--duration "$duration" --dir "$tmp/journals" "$@"
status=$?
set -e

# ---- stop ----------------------------------------------------------------
kill -TERM "$bw_pid"
set +e
wait "$bw_pid"
rc=$?
set -e
bw_pid=
if [ "$rc" -ne 0 ]; then
	echo "soak.sh: bitwheeld exited with status $rc on SIGTERM" >&2
	[ "$status" -ne 0 ] || status=1
fi
# Warnings and worse (syslog levels 0-4), e.g. a slow reader cut off.
if grep -Eq '^<[0-4]>' "$tmp/bitwheeld.log"; then
	echo "soak.sh: bitwheeld logged $(grep -Ec '^<[0-4]>' "$tmp/bitwheeld.log") warnings or errors; the first:" >&2
	grep -E '^<[0-4]>' "$tmp/bitwheeld.log" | head -10 >&2
fi
exit "$status"
