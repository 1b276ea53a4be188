#!/usr/bin/env bash
# soak.sh - a bounded soak of bitwheeld under load and faults (not in CI).
#
#   bench/soak.sh [--duration SECONDS] [--build DIR] [--keep] [--state]
#                 [--restart-every SECONDS] [--daemon-opt OPTION]...
#                 [-- BWSOAK_OPTIONS...]
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
#      --restart-every (with --state) stops bitwheeld with SIGTERM and
#      starts it again on the same state directory every SECONDS, until
#      10 s before the end: named sessions, their fires and their counts
#      must come through
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
restart_every=0
daemon_opts=()

while [ $# -gt 0 ]; do
	case $1 in
	--duration) duration=$2; shift ;;
	--build) build=$2; shift ;;
	--keep) keep=yes ;;
	--state) state=yes ;;
	--restart-every) restart_every=$2; shift ;;
	--daemon-opt) daemon_opts+=("$2"); shift ;;
	--) shift; break ;;
	-h | --help) sed -n '2,32p' "$0"; exit 0 ;;
	*) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
case $duration$restart_every in
'' | *[!0-9]*) echo "soak.sh: --duration and --restart-every take whole seconds" >&2; exit 2 ;;
esac
if [ "$restart_every" -gt 0 ] && [ -z "$state" ]; then
	echo "soak.sh: --restart-every needs --state (a daemon without one keeps nothing)" >&2
	exit 2
fi

# shellcheck source=build-aux/common.sh
. "$root/build-aux/common.sh"

# ---- build ---------------------------------------------------------------
build=$(bw_bench_build "$build" soak.sh)
nice make -C "$build" -j2 bench/bwsoak daemon/bitwheeld >/dev/null

# ---- daemon --------------------------------------------------------------
tmp=$(mktemp -d)
bw_pid=
soak_pid=
status=1
cleanup() {
	if [ -n "$soak_pid" ] && kill -0 "$soak_pid" 2>/dev/null; then
		kill "$soak_pid" 2>/dev/null || true
		wait "$soak_pid" 2>/dev/null || true
	fi
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

# The libtool wrapper execs the daemon, so $! is the daemon's pid; bwsoak
# reads it from bitwheeld.pid, which a restart rewrites.
start_daemon() {
	rm -f "$tmp/bw.sock"
	nice "$build/daemon/bitwheeld" --socket "$tmp/bw.sock" ${daemon_opts[@]+"${daemon_opts[@]}"} \
		>>"$tmp/bitwheeld.log" 2>&1 &
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
	echo "$bw_pid" >"$tmp/bitwheeld.pid"
}

# SIGTERM: it must stop cleanly (status 0).
stop_daemon() {
	local rc=0

	kill -TERM "$bw_pid"
	wait "$bw_pid" || rc=$?
	bw_pid=
	if [ "$rc" -ne 0 ]; then
		echo "soak.sh: bitwheeld exited with status $rc on SIGTERM" >&2
		return 1
	fi
}

start_daemon

# ---- run -----------------------------------------------------------------
echo "soak.sh: $("$build/daemon/bitwheeld" --version 2>&1 | head -1), ${duration} s, build $build" >&2
set +e
nice "$build/bench/bwsoak" --socket "$tmp/bw.sock" --daemon-pid-file "$tmp/bitwheeld.pid" \
	--duration "$duration" --dir "$tmp/journals" "$@" &
soak_pid=$!
restarts=0
restart_failed=
if [ "$restart_every" -gt 0 ]; then
	# bwsoak starts its clients about a second after it starts.
	t0=$(date +%s)
	next=$((t0 + 1 + restart_every))
	while kill -0 "$soak_pid" 2>/dev/null; do
		now=$(date +%s)
		if [ "$now" -ge "$next" ] && [ "$now" -lt $((t0 + duration - 10)) ]; then
			stop_daemon || restart_failed=yes
			start_daemon
			restarts=$((restarts + 1))
			next=$((now + restart_every))
		fi
		sleep 0.2
	done
fi
wait "$soak_pid"
status=$?
soak_pid=
set -e
[ "$restarts" -eq 0 ] || echo "soak.sh: restarted bitwheeld $restarts times" >&2
[ -z "$restart_failed" ] || [ "$status" -ne 0 ] || status=1

# ---- stop ----------------------------------------------------------------
stop_daemon || { [ "$status" -ne 0 ] || status=1; }
# Warnings and worse (syslog levels 0-4), e.g. a slow reader cut off.
if grep -Eq '^<[0-4]>' "$tmp/bitwheeld.log"; then
	echo "soak.sh: bitwheeld logged $(grep -Ec '^<[0-4]>' "$tmp/bitwheeld.log") warnings or errors; the first:" >&2
	grep -E '^<[0-4]>' "$tmp/bitwheeld.log" | head -10 >&2
fi
exit "$status"
