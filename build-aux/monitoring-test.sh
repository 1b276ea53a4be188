#!/usr/bin/env bash
# doc/operating.md's Monitoring section, followed as written, against the installed
# bitwheel (root only; install-test.sh runs it while its install into /usr
# is in place): Debian's prometheus-node-exporter serves our series from
# the file bitwheel-metrics.timer's service writes.
#
# A daemon stands in for bitwheeld.socket on the default socket
# (systemd-socket-activate, as install-test.sh does), and bwctl schedules
# ONESHOT timers and PERIODIC fires of one periodic timer (in the other
# lane, by its leeway) on it.  Then the
# section's first sh block runs line by line.  Where systemd is PID 1 each
# line runs as it is; where it is not (CI), a line that needs it is done
# the way systemd would do it:
#   systemctl enable --now U.timer   enable on the files alone, then run
#                                    U.service's ExecStart= with its
#                                    Environment= and UMask= (OnActiveSec=0:
#                                    the timer runs it at once)
#   curl ... localhost:9100 ...      the same line against a
#                                    prometheus-node-exporter started here
#                                    on a free loopback port, reading the
#                                    unit's textfile directory
# and an apt-get install line checks the packages are installed
# (common.sh installs them).  A line of another kind fails the test, so
# the page and this script cannot drift apart.  Then node_exporter's
# /metrics must hold bitwheel_build_info with the installed version, the
# fires of the timers scheduled here (bitwheel_fires_total, and the
# lateness histogram's _count equal to it), the daemon's labelled
# process_resident_memory_bytes (not dropped beside node_exporter's own)
# and a limit gauge, no textfile error, and the
# file must be whole and mode 0644 with no temporary beside it.  Every
# wait is bounded; it takes a few seconds.  Exits non-zero on any failure.
set -euo pipefail

# shellcheck source=build-aux/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ONESHOT=3
PERIODIC=4
unit_dir=/lib/systemd/system
sock=/run/bitwheel/bitwheeld.sock

if [ "$(id -u)" -ne 0 ]; then
	echo "monitoring-test: skipped: it runs the installed units' commands as root"
	exit 0
fi
for f in /usr/bin/bwctl /usr/sbin/bitwheeld "$unit_dir/bitwheel-metrics.service" \
	"$unit_dir/bitwheel-metrics.timer"; do
	if [ ! -e "$f" ]; then
		echo "monitoring-test: skipped: $f is not installed (install-test.sh runs this" \
			"while its install is in place)"
		exit 0
	fi
done

bw_tmp=
bw_daemon=
bw_exporter=
made_run_dir=no
prom=
prom_before=no

fail() {
	echo "monitoring-test: $*" >&2
	exit 1
}

stop() {
	[ -z "$1" ] || { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
}

cleanup() {
	stop "$bw_exporter"
	stop "$bw_daemon"
	[ "$made_run_dir" = no ] || rm -rf /run/bitwheel
	[ -z "$prom" ] || [ "$prom_before" = yes ] || rm -f "$prom"
	rm -f /etc/systemd/system/timers.target.wants/bitwheel-metrics.timer
	[ -z "$bw_tmp" ] || rm -rf "$bw_tmp"
	return 0
}
trap cleanup EXIT

# A unit file's value for key (the last one; no continuation lines).
unit_value() {
	sed -n "s/^$2=//p" "$unit_dir/$1" | tail -n 1
}

# What --now does for the metrics timer where systemd does not run:
# its service's command, as systemd would run it.
run_service() {
	local unit=$1 env exec umask_

	env=$(unit_value "$unit" Environment)
	exec=$(unit_value "$unit" ExecStart)
	umask_=$(unit_value "$unit" UMask)
	[ -n "$exec" ] || fail "$unit has no ExecStart="
	echo "   (no systemd: $unit's ExecStart=$exec, with $env)"
	# ${VAR} in ExecStart= is the Environment= value, as systemd expands it.
	(umask "${umask_:-0022}" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$env" \
		timeout 30 bash -c "exec $exec") || fail "$unit failed"
}

# A free loopback port: the kernel's pick, released for the exporter.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start_exporter() {
	local port dir log

	port=$(free_port)
	dir=$(dirname "$prom")
	log=$bw_tmp/node-exporter.log
	prometheus-node-exporter --web.listen-address="127.0.0.1:$port" \
		--collector.disable-defaults --collector.textfile \
		--collector.textfile.directory="$dir" >"$log" 2>&1 &
	bw_exporter=$!
	for _ in $(seq 100); do
		curl -sf --max-time 1 "http://127.0.0.1:$port/metrics" >/dev/null && break
		kill -0 "$bw_exporter" 2>/dev/null || { cat "$log" >&2; fail "prometheus-node-exporter exited"; }
		sleep 0.05
	done
	curl -sf --max-time 2 "http://127.0.0.1:$port/metrics" >/dev/null ||
		{ cat "$log" >&2; fail "prometheus-node-exporter does not answer on 127.0.0.1:$port"; }
	echo "   (no systemd: prometheus-node-exporter on 127.0.0.1:$port, textfile directory $dir)"
	exporter="127.0.0.1:$port"
}

bw_install_missing
bw_tmp=$(mktemp -d)
systemd=no
[ "$(ps -p 1 -o comm=)" = systemd ] && systemd=yes

# The file the service writes, from its unit.
prom=$(unit_value bitwheel-metrics.service Environment)
prom=${prom#BITWHEEL_METRICS_FILE=}
[ -n "$prom" ] || fail "bitwheel-metrics.service sets no BITWHEEL_METRICS_FILE"
[ ! -e "$prom" ] || prom_before=yes
[ "$prom_before" = no ] || fail "$prom exists already: another writer may own it"

# The daemon, on the default socket as bitwheeld.socket would make it.
if [ "$systemd" = no ]; then
	[ ! -e "$sock" ] || fail "$sock exists: a bitwheeld runs here already"
	if [ ! -d /run/bitwheel ]; then
		mkdir /run/bitwheel
		made_run_dir=yes
	fi
	timeout 120 systemd-socket-activate -l "$sock" /usr/sbin/bitwheeld \
		>"$bw_tmp/bitwheeld.log" 2>&1 &
	bw_daemon=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && break
		sleep 0.05
	done
	[ -S "$sock" ] || { cat "$bw_tmp/bitwheeld.log" >&2; fail "no socket at $sock"; }
fi
for k in $(seq "$ONESHOT"); do
	timeout 10 bwctl schedule --key "$k" --in 20ms >/dev/null ||
		fail "bwctl schedule --key $k failed"
done
# Its leeway puts it in the periodic lane, apart from the oneshots.
timeout 10 bwctl schedule --key 100 --in 10ms --every 10ms --leeway 1s \
	--count "$PERIODIC" >/dev/null || fail "bwctl schedule --every failed"
echo "scheduled: $ONESHOT oneshot timers and $PERIODIC fires of a periodic one, all fired"

block=$(awk '/^## Monitoring$/ { s = 1; next } /^## / { s = 0 }
	s && /^```sh$/ { b = 1; next } b && /^```$/ { exit } b' "$bw_root/doc/operating.md")
[ -n "$block" ] || fail "doc/operating.md has no sh block in its Monitoring section"
echo "== doc/operating.md, Monitoring, as written:"
echo "$block"
exporter=localhost:9100
scrape=
while IFS= read -r line; do
	cmd=${line%%  #*}
	cmd=${cmd%"${cmd##*[![:space:]]}"}
	[ -n "$cmd" ] || continue
	echo "-- $cmd"
	if [ "$systemd" = yes ]; then
		out=$(bash -euo pipefail -c "$cmd") || fail "failed: $cmd"
		[[ $cmd != curl* ]] || scrape=$out
		continue
	fi
	case $cmd in
	"apt-get install "*)
		for pkg in ${cmd#apt-get install }; do
			dpkg -s "$pkg" >/dev/null 2>&1 || fail "package $pkg is not installed"
		done
		echo "   (installed already)"
		;;
	"systemctl enable --now "*.timer)
		unit=${cmd#systemctl enable --now }
		systemctl enable "$unit"
		[ -L "/etc/systemd/system/timers.target.wants/$unit" ] ||
			fail "systemctl enable $unit made no link"
		run_service "${unit%.timer}.service"
		;;
	curl*localhost:9100*)
		[ -n "$bw_exporter" ] || start_exporter
		out=$(bash -euo pipefail -c "${cmd//localhost:9100/$exporter}") ||
			fail "failed: $cmd"
		echo "$out"
		;;
	*)
		fail "a line this script cannot follow without systemd: $cmd"
		;;
	esac
done <<<"$block"

# What the section promises: the file whole and readable by the collector,
# node_exporter serving our series with the values they must have.
[ -f "$prom" ] || fail "$prom was not written"
[ "$(stat -c %a "$prom")" = 644 ] || fail "$prom has mode $(stat -c %a "$prom"), want 644"
tail -n 1 "$prom" | grep -qx '# EOF' || fail "$prom does not end with # EOF"
! ls "$prom".tmp.* 2>/dev/null || fail "a temporary file is left beside $prom"
[ -n "$bw_exporter" ] || [ "$systemd" = yes ] || start_exporter
scrape=$(curl -sf --max-time 5 "http://$exporter/metrics") || fail "cannot scrape $exporter"

# The value of one sample, exactly as named with its labels.
value() {
	awk -v k="$1" '$1 == k { print $2; found = 1 } END { exit !found }' <<<"$scrape" ||
		fail "node_exporter does not serve $1"
}
version=$(bitwheeld --version | awk 'NR == 1 { print $NF }')
[ "$(value "bitwheel_build_info{version=\"$version\"}")" = 1 ] ||
	fail "bitwheel_build_info is not 1 for version $version"
[ "$(value node_textfile_scrape_error)" = 0 ] || fail "node_exporter could not read $prom"
oneshot=$(value 'bitwheel_fires_total{lane="oneshot"}')
periodic=$(value 'bitwheel_fires_total{lane="periodic"}')
if [ "$systemd" = no ]; then
	[ "$oneshot" = "$ONESHOT" ] || fail "bitwheel_fires_total{lane=\"oneshot\"} $oneshot, want $ONESHOT"
	[ "$periodic" -ge "$PERIODIC" ] ||
		fail "bitwheel_fires_total{lane=\"periodic\"} $periodic, want at least $PERIODIC"
fi
[ "$(value 'bitwheel_fire_lateness_seconds_count{lane="oneshot"}')" = "$oneshot" ] ||
	fail "the oneshot lateness histogram's count is not bitwheel_fires_total"
[ "$(value 'bitwheel_fire_lateness_seconds_count{lane="periodic"}')" = "$periodic" ] ||
	fail "the periodic lateness histogram's count is not bitwheel_fires_total"
[ "$(value 'bitwheel_fire_lateness_seconds_bucket{lane="oneshot",le="+Inf"}')" = "$oneshot" ] ||
	fail "the oneshot lateness histogram's +Inf bucket is not its count"
[ "$systemd" = yes ] || [ "$(value bitwheel_storage)" = 0 ] ||
	fail "bitwheel_storage is not 0 for a daemon without --state-dir"
# The daemon's process_* beside node_exporter's own: labelled, so that
# node_exporter drops neither as a series it already has.
rss=$(value 'process_resident_memory_bytes{daemon="bitwheeld"}')
awk -v v="$rss" 'BEGIN { exit !(v + 0 > 0) }' || fail "the daemon's resident memory is $rss"
[ "$(value 'bitwheel_limit{name="max_clients"}')" != 0 ] || fail "bitwheel_limit{name=\"max_clients\"} is 0"
echo "node_exporter serves: bitwheel_build_info{version=\"$version\"} 1," \
	"bitwheel_fires_total oneshot $oneshot periodic $periodic, lateness counts equal," \
	"the daemon's resident memory $rss," \
	"$(grep -c '^bitwheel_' <<<"$scrape") bitwheel_ samples"
echo "monitoring-test: ok in ${SECONDS} s"
