#!/usr/bin/env bash
# Quick start: install what is missing, build in build/, run the main job.
set -euo pipefail

# shellcheck source=build-aux/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bw_build=$bw_root/build

# What a newcomer should see working: bitwheeld on a socket under the
# build tree, two processes scheduling through bwctl, a watcher receiving
# a named session's fires, the counters, and a clean stop.
main_job() {
	local run=$bw_build/run sock pid i bwctl
	sock=$run/bitwheeld.sock
	bwctl=$bw_build/client/bwctl
	mkdir -p "$run"

	echo "== bitwheeld --socket $sock"
	"$bw_build/daemon/bitwheeld" --socket "$sock" &
	pid=$!
	# Whatever happens below, the daemon does not outlive the script.
	trap 'kill "$pid" 2>/dev/null || true' EXIT
	for i in $(seq 50); do
		[ -S "$sock" ] && break
		[ "$i" -eq 50 ] && { echo "bitwheeld did not start" >&2; return 1; }
		sleep 0.1
	done

	echo "== two processes schedule into the named session 'orders'"
	"$bwctl" --socket "$sock" schedule --session orders --key 1 --in 300ms --payload "order 1 timed out" &
	"$bwctl" --socket "$sock" schedule --session orders --key 2 --in 600ms --payload "order 2 timed out" &
	wait %2 %3
	"$bwctl" --socket "$sock" schedule --session orders --key 3 --in 400ms --payload "order 3"
	echo "== order 3 filled: cancel its timeout"
	"$bwctl" --socket "$sock" cancel --session orders --key 3
	echo "== watch the session's fires"
	"$bwctl" --socket "$sock" watch --session orders --count 2 --timeout 5s
	echo "== an anonymous timer, waited for in the foreground"
	"$bwctl" --socket "$sock" schedule --key 9 --in 250ms --payload "heartbeat" --every 250ms --count 3
	echo "== stats"
	"$bwctl" --socket "$sock" stats
	echo "== stop"
	kill -TERM "$pid"
	wait "$pid"
	trap - EXIT
}

bw_install_missing
bw_bootstrap
[ -f "$bw_build/Makefile" ] || bw_configure "$bw_build"
make -C "$bw_build" -j2
main_job
