#!/usr/bin/env bash
# Quick start: install what is missing, build in build/, run the main job.
set -euo pipefail

# shellcheck source=build-aux/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bw_build=$bw_root/build

# What a newcomer should see working: bitwheeld on a socket under the
# build tree, two processes scheduling at the same time (each into its own
# named session: a session takes one connection at a time), a cancel, a
# watcher receiving a session's fires, a periodic timer, the counters, and
# a clean stop.
bw_daemon_pid=
stop_daemon() {
	[ -n "$bw_daemon_pid" ] && kill "$bw_daemon_pid" 2>/dev/null
	return 0
}

main_job() {
	local run=$bw_build/run sock i bwctl
	sock=$run/bitwheeld.sock
	bwctl=$bw_build/client/bwctl
	mkdir -p "$run"

	echo "== bitwheeld --socket $sock"
	"$bw_build/daemon/bitwheeld" --socket "$sock" &
	bw_daemon_pid=$!
	# Whatever happens below, the daemon does not outlive the script.
	trap stop_daemon EXIT
	for i in $(seq 50); do
		[ -S "$sock" ] && break
		[ "$i" -eq 50 ] && { echo "bitwheeld did not start" >&2; return 1; }
		sleep 0.1
	done

	echo "== two processes schedule at once: sessions 'orders' and 'leases'"
	"$bwctl" --socket "$sock" schedule --session orders --key 1 --in 300ms --payload "order 1 timed out" &
	"$bwctl" --socket "$sock" schedule --session leases --key 7 --in 500ms --payload "lease 7 expired" &
	wait %2 %3
	"$bwctl" --socket "$sock" schedule --session orders --key 2 --in 600ms --payload "order 2 timed out"
	"$bwctl" --socket "$sock" schedule --session orders --key 3 --in 400ms --payload "order 3"
	echo "== order 3 filled: cancel its timeout"
	"$bwctl" --socket "$sock" cancel --session orders --key 3
	echo "== watch each session's fires"
	"$bwctl" --socket "$sock" watch --session orders --count 2 --timeout 5s
	"$bwctl" --socket "$sock" watch --session leases --count 1 --timeout 5s
	echo "== an anonymous periodic timer, waited for in the foreground"
	"$bwctl" --socket "$sock" schedule --key 9 --in 250ms --payload "heartbeat" --every 250ms --count 3
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
