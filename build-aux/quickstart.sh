#!/usr/bin/env bash
# Quick start: install what is missing, build in build/, run the main job.
set -euo pipefail

# shellcheck source=build-aux/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bw_build=$bw_root/build

# What a newcomer should see working: bitwheeld on a socket under the
# build tree, keeping its state there too; a consumer watching a named
# session while two producers schedule into it at the same time, a cancel,
# each fire acknowledged by the consumer once printed, a periodic timer, a
# timer that outlives a crash of the daemon, the counters, and a clean
# stop.
bw_daemon_pid=
stop_daemon() {
	[ -n "$bw_daemon_pid" ] && kill "$bw_daemon_pid" 2>/dev/null
	return 0
}

# bitwheeld on $sock with its state in $state, in the background; returns
# once it listens.
start_daemon() {
	local i

	echo "== bitwheeld --socket $sock --state-dir $state"
	"$bw_build/daemon/bitwheeld" --socket "$sock" --state-dir "$state" &
	bw_daemon_pid=$!
	for i in $(seq 50); do
		"$bwctl" --socket "$sock" stats >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "bitwheeld did not start" >&2
	return 1
}

main_job() {
	local run=$bw_build/run sock state bwctl
	sock=$run/bitwheeld.sock
	state=$run/state
	bwctl=$bw_build/client/bwctl
	mkdir -p "$run"
	# Each run starts from nothing: no sessions left from the last one.
	rm -rf "$state"

	# Whatever happens below, the daemon does not outlive the script.
	trap stop_daemon EXIT
	start_daemon

	echo "== a consumer watches session 'orders' while two producers schedule into it at once"
	"$bwctl" --socket "$sock" watch --session orders --count 3 --timeout 5s &
	watcher=$!
	"$bwctl" --socket "$sock" schedule --session orders --key 1 --in 300ms --payload "order 1 timed out" &
	"$bwctl" --socket "$sock" schedule --session orders --key 2 --in 500ms --payload "order 2 timed out" &
	wait %3 %4
	"$bwctl" --socket "$sock" schedule --session orders --key 3 --in 400ms --payload "order 3"
	echo "== order 3 filled: cancel its timeout"
	"$bwctl" --socket "$sock" cancel --session orders --key 3
	"$bwctl" --socket "$sock" schedule --session orders --key 4 --in 700ms --payload "order 4 timed out"
	echo "== the consumer prints keys 1, 2 and 4, acknowledging each"
	wait "$watcher"
	echo "== an anonymous periodic timer, waited for in the foreground"
	"$bwctl" --socket "$sock" schedule --key 9 --in 250ms --payload "heartbeat" --every 250ms --count 3
	echo "== a timer that outlives the daemon: orders key 5 in 1.5 s, then SIGKILL"
	"$bwctl" --socket "$sock" schedule --session orders --key 5 --in 1500ms --payload "order 5 timed out"
	kill -KILL "$bw_daemon_pid"
	wait "$bw_daemon_pid" || true
	start_daemon
	"$bwctl" --socket "$sock" watch --session orders --count 1 --timeout 5s
	echo "== stats"
	"$bwctl" --socket "$sock" stats
	echo "== stop"
	kill -TERM "$bw_daemon_pid"
	wait "$bw_daemon_pid"
	bw_daemon_pid=
}

bw_install_missing
bw_bootstrap
[ -f "$bw_build/Makefile" ] || bw_configure "$bw_build"
make -C "$bw_build" -j2
main_job
