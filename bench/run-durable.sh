#!/usr/bin/env bash
# run-durable.sh - what --state-dir costs, in one command.
#
#   bench/run-durable.sh [--quick] [--out DIR] [--build DIR] [--rounds N]
#                        [--timers N] [--part LIST] [--before DIR]
#                        [-- BWLOAD_OPTIONS...]
#
#   1. throughput: four bitwheelds side by side - in memory (no
#      --state-dir), --fsync=never, batch and always (each on a temporary
#      socket and state directory under $TMPDIR, default /tmp) - and, per
#      bwload phase (rtt, pipelined, deep, wide, sustained; wide is the
#      pipelined phase at 4 x 256, 1,024 requests in flight, to tell a
#      bound of latency from one of capacity, with a consumer window of
#      1,024 fires), bwload against each
#      in turn with named sessions (--session: only they are journaled),
#      N rounds (default 3, --quick 1); the median of the rounds, with
#      ratios to the in-memory daemon; and in each round, right after the
#      rtt phase, the device's own fdatasync of small writes on the same
#      file system (bwdurable synclat: appended, into fallocated room and
#      into zeroed room), against which batch's lone round trip is set; beside them, when redis-server and a bwload built with
#      hiredis are there, the peer: redis-server without persistence,
#      with appendfsync everysec and with always (its AOF, on the same
#      file system), under bwload's redis-zset subject, each set against
#      the redis-server without persistence
#   2. recovery: a daemon with --state-dir (batch, --journal-max 1073741824 so the
#      fill leaves journals only) filled with --timers pending timers
#      (default 1,000,000; --quick 100,000) due in 1..2 h over 16 named
#      sessions, pipelined; SIGKILL and restart (journal only); once its
#      snapshot is written, SIGTERM and restart (snapshot): the daemon's
#      "recovered ... in X ms", the wall time until a Stats is answered,
#      the pending count (must be the same), VmRSS and VmHWM
#   3. stall: that daemon restarted with --journal-max 2000000 -v; for 10 s
#      (--quick 3 s) a probe doing back-to-back Stats round trips and a
#      named session churning Schedule/Cancel at 20,000/s, which starts a
#      snapshot every few seconds: round trips during and outside the
#      snapshots (told by the daemon's Stats), the fork times and write
#      times from the daemon's log
#
# --part LIST: any of throughput,recovery,stall (stall needs recovery's
# daemon and runs after it).  Writes DIR/durable.md, durable.csv and durable-syncs.csv (part 1),
# durable-recovery.csv (part 2), and with gnuplot durable-throughput.png
# (part 1, bench/plot-service.sh); DIR: bench/results, or
# bench/results/quick with --quick.  --build DIR: an already configured
# build tree to use (default: the source tree if configured, else
# bench/build).  --before DIR: another build tree (a version before a
# change, its daemon/bitwheeld built), whose daemon joins part 1 as
# never-before, batch-before and always-before: before and after in the
# same run.  Every daemon it started is stopped however it ends; each
# step runs under `timeout`.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
quick=
out=
build=
rounds=
timers=
parts=throughput,recovery,stall
before=
expect=

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=--quick ;;
	--out) out=$2; shift ;;
	--build) build=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--timers) timers=$2; shift ;;
	--part) parts=$2; shift ;;
	--before) before=$2; shift ;;
	--) shift; break ;;
	-h | --help) sed -n '2,46p' "$0"; exit 0 ;;
	*) echo "run-durable.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
out=${out:-$here/results${quick:+/quick}}
rounds=${rounds:-$([ -n "$quick" ] && echo 1 || echo 3)}
timers=${timers:-$([ -n "$quick" ] && echo 100000 || echo 1000000)}
stall_ms=$([ -n "$quick" ] && echo 3000 || echo 10000)
mkdir -p "$out"
out=$(cd "$out" && pwd)
t_begin=$(date +%s)
want() { case ",$parts," in *",$1,"*) return 0 ;; esac; return 1; }

# ---- build ---------------------------------------------------------------
# shellcheck source=build-aux/common.sh
. "$root/build-aux/common.sh"
build=$(bw_bench_build "$build" run-durable.sh)
make -C "$build" -j2 bench/bwload bench/bwdurable daemon/bitwheeld >/dev/null
bwload=$build/bench/bwload
bwdurable=$build/bench/bwdurable
bitwheeld=$build/daemon/bitwheeld
if [ -n "$before" ]; then
	before=$(cd "$before" && pwd)
	[ -x "$before/daemon/bitwheeld" ] ||
		{ echo "run-durable.sh: --before $before: no daemon/bitwheeld there" >&2; exit 2; }
fi
# shellcheck source=bench/servers.sh
. "$here/servers.sh"
bw_servers_who=run-durable.sh

# ---- daemons -------------------------------------------------------------
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bwdurable.XXXXXX")
pids=()
stop_all() {
	local p

	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap stop_all EXIT
trap 'exit 130' INT TERM

# start NAME ARGS...: bitwheeld (--before's for NAME *-before) on
# $tmp/NAME.sock, log $tmp/NAME.log (appended), pid in $started, wall time
# to the first answered Stats in $ready_line.
start() {
	local name=$1 t0 bin=$bitwheeld
	shift
	case $name in *-before) bin=$before/daemon/bitwheeld ;; esac
	t0=$(date +%s%N)
	"$bin" --socket "$tmp/$name.sock" "$@" >>"$tmp/$name.log" 2>&1 &
	started=$!
	pids+=("$started")
	if ! ready_line=$(timeout 120 "$bwdurable" ready --socket "$tmp/$name.sock" \
			--since "$t0" --pid "$started" --timeout-ms 100000 ${expect:+--expect "$expect"}); then
		echo "run-durable.sh: bitwheeld $name did not come up as expected:" >&2
		echo "$ready_line" >&2
		tail -20 "$tmp/$name.log" >&2
		exit 1
	fi
}
rss_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

host="$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), Linux $(uname -r)"
fs=$(df -PT "$tmp" | awk 'NR == 2 { print $2 " (" $1 ")" }')
md=$out/durable.md
{
	echo "# bitwheeld durability benchmark (bench/run-durable.sh${quick:+ --quick})"
	echo
	echo "Host: $host.  State directories on $fs, the filesystem of \$TMPDIR ($(dirname "$tmp")).  $(date -u '+%Y-%m-%d %H:%M UTC')."
	echo
	echo "Command: \`bench/run-durable.sh${quick:+ --quick} --rounds $rounds --timers $timers$([ "$parts" = throughput,recovery,stall ] || echo " --part $parts")${before:+ --before DIR}${*:+ -- $*}\`"
	[ -z "$before" ] || printf '\nRows *-before: the daemon of the build tree %s (--before), run side by side with this one.\n' "$before"
	echo
} >"$md"

# ---- 1. throughput --------------------------------------------------------
configs=(memory never batch always)
[ -z "$before" ] || configs+=(never-before batch-before always-before)
# The peer's three, as bwload names its subject's rows.
declare -A redis_args=([redis-memory]="--appendonly no"
	[redis-everysec]="--appendonly yes --appendfsync everysec"
	[redis-always]="--appendonly yes --appendfsync always")
if command -v redis-server >/dev/null && "$bwload" --list | grep '^redis-zset' | grep -v 'not built' >/dev/null; then
	configs+=(redis-memory redis-everysec redis-always)
else
	echo "run-durable.sh: no redis-server or no bwload with hiredis: no redis AOF peer (build-aux/common.sh's bench packages)" >&2
fi
if want throughput; then
	echo "run-durable.sh: throughput: ${configs[*]}, $rounds round(s)" >&2
	declare -A dpid
	for c in "${configs[@]}"; do
		case $c in
		memory) start "$c" ;;
		redis-*)
			mkdir -p "$tmp/$c.state"
			# shellcheck disable=SC2086 # the arguments split at blanks
			bw_spawn_redis "$tmp/$c.sock" "$tmp/$c.state" ${redis_args[$c]} ||
				{ echo "run-durable.sh: redis-server $c did not start" >&2; exit 1; }
			pids+=("$redis_pid")
			started=$redis_pid ;;
		*) start "$c" --state-dir "$tmp/$c.state" --fsync "${c%-before}" ;;
		esac
		dpid[$c]=$started
	done
	raw=$tmp/raw.csv
	: >"$raw"
	: >"$tmp/synclat.txt"
	: >"$tmp/syncs.csv"
	for r in $(seq "$rounds"); do
		for ph in rtt pipelined deep wide sustained; do
			# wide: bwload's pipelined phase, four times as deep,
			# and its consumers' window as wide (the daemon's
			# default, 256, holds the in-memory daemon's fires).
			case $ph in
			wide) phase=(--phase pipelined --depth 256 --window 1024) ;;
			*) phase=(--phase "$ph") ;;
			esac
			for c in "${configs[@]}"; do
				d=$tmp/out-$r-$ph-$c
				mkdir -p "$d"
				case $c in
				redis-*) target=(--subject redis-zset --redis "$tmp/$c.sock"
						 --redis-pid "${dpid[$c]}") ;;
				*) target=(--subject bitwheel --session "bwl$r" --socket "$tmp/$c.sock"
					   --daemon-pid "${dpid[$c]}") ;;
				esac
				case $c in
				memory | redis-*) s0= ;;
				*) s0=$(timeout 60 "$bwdurable" syncs --socket "$tmp/$c.sock" || true) ;;
				esac
				nice -n 0 timeout 300 "$bwload" $quick "${phase[@]}" "${target[@]}" \
					--drain-ms 3000 --out "$d" "$@" 2>&1 |
					sed "s/^/  [$c, round $r, $ph] /" >&2 || true
				[ -f "$d/service.csv" ] &&
					sed -n 2p "$d/service.csv" | sed "s/^[a-z0-9]*,/$c,$r,$ph,/" >>"$raw"
				# The journal's syncs over the phase (its drain included).
				if [ -n "$s0" ] && s1=$(timeout 60 "$bwdurable" syncs --socket "$tmp/$c.sock"); then
					echo "$s0 $s1" | tr '=' ' ' | awk -v c="$c" -v r="$r" -v ph="$ph" -v OFS=, \
						'{ print c, r, ph, $10 - $2, $12 - $4, $14 - $6, $16 - $8 }' >>"$tmp/syncs.csv"
				fi
			done
			if [ "$ph" = rtt ]; then
				timeout 300 "$bwdurable" synclat --state-dir "$tmp" \
					--syncs "$([ -n "$quick" ] && echo 300 || echo 1000)" |
					tee -a "$tmp/synclat.txt" | sed "s/^/  [round $r] /" >&2
			fi
		done
	done
	for c in never batch always; do
		du -sb "$tmp/$c.state" | awk -v c="$c" '{ printf "%s: %.1f MiB in its state directory\n", c, $1 / 1048576 }' >&2
	done
	head -1 "$tmp/out-1-rtt-memory/service.csv" | sed 's/^/config,round,/' >"$tmp/header.csv"
	# The median over the rounds of every number, per config and phase;
	# ok only if every round was.
	awk -F, -v OFS=, '
		NR == FNR { for (i = 1; i <= NF; i++) col[$i] = i; hdr = $0; next }
		{
			k = $1 SUBSEP $3
			if (!(k in n)) { order[++nk] = k }
			n[k]++
			for (i = 1; i <= NF; i++) v[k, i, n[k]] = $i
		}
		END {
			sub(/^config,round,/, "config,rounds,", hdr)
			print hdr
			for (j = 1; j <= nk; j++) {
				k = order[j]; m = n[k]; line = v[k, 1, 1] OFS m
				for (i = 3; i <= NF; i++) {
					if (i <= 4) { line = line OFS v[k, i, 1]; continue }
					for (a = 1; a <= m; a++) s[a] = v[k, i, a] + 0
					for (a = 2; a <= m; a++)
						for (b = a; b > 1 && s[b - 1] > s[b]; b--) { t = s[b]; s[b] = s[b - 1]; s[b - 1] = t }
					if (i == col["ok"]) line = line OFS s[1]
					else line = line OFS (m % 2 ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2)
				}
				print line
			}
		}' "$tmp/header.csv" "$raw" >"$out/durable.csv"
	{
		echo "## 1. Schedule throughput and fire lateness by --fsync"
		echo
		echo "bwload's bitwheel subject against four daemons started side by side by the script, one phase at a time, the four daemons in turn within each phase; each client opens its own **named session** (\`--session\`) as its consumer and acknowledges each batch of fires (one cumulative Ack, protocol 2), so the same requests and acks are journaled (never, batch, always) or not (memory: no --state-dir).  Default fast-precise daemon.  Phases as in the service benchmark: rtt 1×1; pipelined 4 clients × depth 64; deep 1 × 256; wide, the pipelined phase at 4 × 256 (1,024 requests in flight: with replies held until their sync, a fixed number in flight makes throughput a matter of each request's time, Little's law, and wide shows what more in flight buys) with each consumer's window at 1,024 fires (\`--window 1024\`: at the daemon's default of 256 the in-memory daemon's fires waited for the window, some 250 ms); sustained 4 × 64 paced at 100,000 new timers/s (+10 % cancels).  Mix: 90 % oneshot schedules due in 1..50 ms, 10 % cancels.  Each cell is the median of $rounds round(s).  ×mem: requests/s relative to the in-memory daemon in the same phase.  The peer (rows redis-*, when the run had it): redis-server on a Unix socket under bwload's redis-zset subject (ZADD/ZREM pipelined at the same depths, a consumer popping what is due with a Lua script), without persistence (redis-memory), and with its append-only file on the same file system synced every second (redis-everysec) or before each reply (redis-always, the guarantee --fsync=batch gives); their ×mem is relative to redis-memory, so each server's column says what its own durability costs it.  Times in µs; late = fire received − deadline asked for."
		echo
		echo "| phase | daemon | clients×depth | requests/s | ×mem | rtt p50 | rtt p99 | rtt p99.9 | late p50 | late p99 | late p99.9 | fired | early | errors | daemon CPU µs/req | RSS MiB | ok |"
		echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
		awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
			{ rows[NR] = $0; if ($1 ~ /memory$/) mem[$1 ~ /^redis-/, $3] = $(c["requests_per_s"]) }
			END {
				for (r = 2; r <= NR; r++) {
					split(rows[r], f, ",")
					rps = f[c["requests_per_s"]]
					base = mem[f[1] ~ /^redis-/, f[3]]
					ratio = base > 0 ? sprintf("%.2f×", rps / base) : "-"
					rtt = f[c["rtt_p50_ns"]] > 0
					printf "| %s | %s | %s×%s | %.0f | %s |", f[3], f[1], f[5], f[6], rps, ratio
					if (rtt) printf " %.1f | %.1f | %.1f |", f[c["rtt_p50_ns"]] / 1e3, f[c["rtt_p99_ns"]] / 1e3, f[c["rtt_p999_ns"]] / 1e3
					else printf " - | - | - |"
					if (f[c["late_p50_ns"]] > 0) printf " %.1f | %.1f | %.1f |", f[c["late_p50_ns"]] / 1e3, f[c["late_p99_ns"]] / 1e3, f[c["late_p999_ns"]] / 1e3
					else printf " - | - | - |"
					printf " %d | %d | %d |", f[c["fired"]], f[c["early"]], f[c["errors"]]
					cpu = f[c["replies"]] > 0 ? f[c["server_cpu_ns"]] / 1e3 / f[c["replies"]] : 0
					printf " %.2f | %.1f | %s |\n", cpu, f[c["server_rss_bytes"]] / 1048576, (f[c["ok"]] == 1 ? "yes" : "NO")
				}
			}' "$out/durable.csv"
		echo
		awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
			$3 == "pipelined" { v[$1] = $(c["requests_per_s"]) }
			$3 == "deep" { w[$1] = $(c["requests_per_s"]) }
			$3 == "wide" { x[$1] = $(c["requests_per_s"]) }
			END {
				if (v["memory"] > 0 && v["batch"] > 0 && w["memory"] > 0) {
					r = v["batch"] / v["memory"]
					q = w["batch"] / w["memory"]
					met = r >= 0.6 && q >= 0.6 ? "met" : "missed"
					printf "Target: with --fsync=batch, pipelined and deep throughput ≥ 0.6× the in-memory daemon at the same depth: pipelined **%.2f×** (%.0f vs %.0f requests/s), deep **%.2f×** (%.0f vs %.0f) - **%s**.\n", r, v["batch"], v["memory"], q, w["batch"], w["memory"], met
				}
				if (x["memory"] > 0 && x["batch"] > 0) {
					printf "\nWide (4×256, 1,024 in flight): --fsync=batch **%.2f×** the in-memory daemon (%.0f vs %.0f requests/s)", x["batch"] / x["memory"], x["batch"], x["memory"]
					if (x["redis-always"] > 0)
						printf ", **%.2f×** redis-server with appendfsync always (%.0f requests/s)", x["batch"] / x["redis-always"], x["redis-always"]
					print "."
				}
				if (v["redis-memory"] > 0 && v["redis-always"] > 0)
					printf "\nThe peer, pipelined: redis-server with appendfsync always %.2f× its own in-memory throughput (%.0f vs %.0f requests/s), everysec %.2f×; bitwheeld with --fsync=batch %.2f× its own, always %.2f×.\n", v["redis-always"] / v["redis-memory"], v["redis-always"], v["redis-memory"], v["redis-everysec"] / v["redis-memory"], v["batch"] / v["memory"], v["always"] / v["memory"]
			}' "$out/durable.csv"
		echo
		# The device's fdatasync (the median of the rounds' p50s, with
		# that round's CPU; appends, writes into fallocated room, and
		# into zeroed room as the journal makes it) against batch's and
		# always' lone round trip (rtt p50).
		synclat() {
			sed -n "s/.*$1: p50_us=\([0-9.]*\).*cpu_us_per_sync=\([0-9.]*\).*/\1 \2/p" "$tmp/synclat.txt" |
				sort -n | awk '{ v[NR] = $0 } END { print v[int((NR + 1) / 2)] }'
		}
		awk -F, -v sl="$(synclat appends)" -v sf="$(synclat 'writes into fallocated room')" \
			-v sz="$(synclat 'writes into zeroed room')" '
			NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
			$3 == "rtt" { rtt[$1] = $(c["rtt_p50_ns"]) / 1e3 }
			END {
				split(sl, f, " ")
				split(sf, a, " ")
				split(sz, g, " ")
				if (f[1] > 0 && a[1] > 0 && g[1] > 0 && rtt["batch"] > 0)
					printf "The device: `bwdurable synclat` (an fdatasync after each small write, on the same file system, as the sync thread does; in each round right after the rtt phase): appending, p50 %.1f µs and %.1f µs of CPU per sync; into fallocated room, p50 %.1f µs and %.1f µs; into room written with zeros ahead, as the journal does while its file system has room, p50 %.1f µs and %.1f µs of CPU (the median round).  A lone request with --fsync=batch: rtt p50 %.1f µs, **%.2f×** the device'"'"'s fdatasync into zeroed room, %.2f× an append'"'"'s (target ≤ 1.2×); with always %.1f µs.  A reply that waits for a sync takes at least the in-memory round trip (%.1f µs) and the sync: %.1f µs, %.2f× the device'"'"'s sync into zeroed room, on this host.\n", f[1], f[2], a[1], a[2], g[1], g[2], rtt["batch"], rtt["batch"] / g[1], rtt["batch"] / f[1], rtt["always"], rtt["memory"], rtt["memory"] + g[1], (rtt["memory"] + g[1]) / g[1]
			}' "$out/durable.csv"
		echo
		if [ -s "$tmp/syncs.csv" ]; then
			echo "The journal's syncs per phase, from the daemon's metrics (\`bwdurable syncs\` before and after each phase, its drain included; the median of the rounds): syncs, requests (Schedule, Cancel, Ack) and journal records (schedules, cancels, fires, acknowledgements; a daemon that does not count them reads -) per sync, and a sync's mean time.  Few requests per sync under load means more fdatasyncs, each with CPU of its own (journal.c, group commit)."
			echo
			echo "| phase | daemon | syncs | requests/sync | records/sync | sync µs (mean) |"
			echo "|---|---|---:|---:|---:|---:|"
			awk -F, '
				function med(k, f,    a, m, i, j, t) {
					m = n[k]
					for (i = 1; i <= m; i++) a[i] = v[k, f, i]
					for (i = 2; i <= m; i++)
						for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
					return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
				}
				{
					k = $3 SUBSEP $1
					if (!(k in n)) order[++nk] = k
					i = ++n[k]
					s = $4 > 0 ? $4 : 1
					v[k, 1, i] = $4
					v[k, 2, i] = $7 / s
					v[k, 3, i] = $6 / s
					v[k, 4, i] = $5 / s / 1e3
				}
				END {
					for (j = 1; j <= nk; j++) {
						split(order[j], p, SUBSEP)
						printf "| %s | %s | %d | %.1f | %s | %.0f |\n", p[1], p[2], med(order[j], 1),
							med(order[j], 2), (med(order[j], 3) > 0 ? sprintf("%.1f", med(order[j], 3)) : "-"),
							med(order[j], 4)
					}
				}' "$tmp/syncs.csv" | sort -t'|' -k2,2 -s
			cp "$tmp/syncs.csv" "$out/durable-syncs.csv"
			echo
		fi
		grep -h . "$tmp"/out-*/service.md | grep -E '^[a-z]+/bitwheel: ' | sort -u | sed 's/^/Error: /' || true
		echo
	} >>"$md"
	for c in "${configs[@]}"; do
		kill "${dpid[$c]}" 2>/dev/null || true
		wait "${dpid[$c]}" 2>/dev/null || true
	done
fi

# ---- 2. recovery ------------------------------------------------------------
state=$tmp/rec.state
recargs=(--state-dir "$state" --fsync batch --linger 2h -v)
rec_csv=$out/durable-recovery.csv
if want recovery || want stall; then
	echo "run-durable.sh: recovery: filling $timers timers" >&2
	expect=
	start rec "${recargs[@]}" --journal-max 1073741824
	rpid=$started
	fill_line=$(timeout 600 nice -n 0 "$bwdurable" fill --socket "$tmp/rec.sock" \
		--timers "$timers" --sessions 16 --depth 256 --name fill)
	echo "$fill_line" >&2
	fill_rss=$(rss_kib "$rpid" VmRSS)
	fill_hwm=$(rss_kib "$rpid" VmHWM)
	journal_bytes=$(du -cb "$state"/journal.* | tail -1 | cut -f1)
	kill -KILL "$rpid"
	wait "$rpid" 2>/dev/null || true

	# recover KIND SIGNAL: restart, wait for the Stats, read the log.
	echo "case,state_files_bytes,recovered_log_ms,ready_wall_ms,pending,expected,rss_kib,hwm_kib,log_line" >"$rec_csv"
	recover() {
		local kind=$1 bytes line log_ms wall pending rss hwm
		bytes=$(du -cb "$state"/snapshot "$state"/journal.* 2>/dev/null | tail -1 | cut -f1 || true)
		: >"$tmp/rec.log"
		expect=$timers
		start rec "${recargs[@]}" --journal-max 1073741824
		expect=
		rpid=$started
		line=$(grep -m1 'recovered ' "$tmp/rec.log" | sed 's/^<[0-9]>bitwheeld: //')
		log_ms=$(echo "$line" | sed -n 's/.* in \([0-9.]*\) ms$/\1/p')
		wall=$(echo "$ready_line" | sed -n 's/.* \([0-9.]*\) ms after start.*/\1/p')
		pending=$(echo "$ready_line" | sed -n 's/.*pending=\([0-9]*\).*/\1/p')
		rss=$(rss_kib "$rpid" VmRSS)
		hwm=$(rss_kib "$rpid" VmHWM)
		echo "$kind,$bytes,$log_ms,$wall,$pending,$timers,$rss,$hwm,\"$line\"" >>"$rec_csv"
		echo "  $kind: $line; Stats answered after $wall ms; RSS $(mib "$rss") MiB, HWM $(mib "$hwm") MiB" >&2
	}
	# wait_snapshot: until the daemon logs its snapshot written (bounded).
	wait_snapshot() {
		for _ in $(seq 600); do
			grep -q 'snapshot before journal generation .* written' "$tmp/rec.log" && return 0
			grep -q 'snapshot: .*fail\|snapshot: writing' "$tmp/rec.log" && break
			sleep 0.1
		done
		echo "run-durable.sh: no snapshot written:" >&2
		tail -5 "$tmp/rec.log" >&2
		return 1
	}
	recover "SIGKILL after the fill: journal only"
	wait_snapshot
	snap1=$(grep -m1 'snapshot before journal generation' "$tmp/rec.log" | sed 's/^<[0-9]>bitwheeld: //')
	fork1=$(grep -m1 'writer forked in' "$tmp/rec.log" | sed 's/.* in \([0-9.]*\) ms/\1/')
	kill -TERM "$rpid"
	wait "$rpid" 2>/dev/null || true
	recover "SIGTERM then restart: snapshot + journal"
	{
		echo "## 2. Recovery of $timers pending timers"
		echo
		echo "\`bwdurable fill --timers $timers --sessions 16 --depth 256\` into \`bitwheeld ${recargs[*]} --journal-max 1073741824\` (the large --journal-max keeps the fill in journals only): oneshot timers due in 1..2 h over 16 named sessions, 16 connections with 256 requests in flight each."
		echo
		echo "$fill_line" | sed 's/^/- /'
		echo "- after the fill: journal $(mib $((journal_bytes / 1024))) MiB; daemon VmRSS $(mib "$fill_rss") MiB (VmHWM $(mib "$fill_hwm") MiB)"
		echo "- after the first recovery, the daemon's snapshot: \"$snap1\" (writer forked in $fork1 ms); snapshot file $(mib $(( $(stat -c %s "$state/snapshot") / 1024 ))) MiB"
		echo
		echo "Start → READY: the daemon's own \"recovered ... in X ms\" (reading and replaying the files, arming the timers) and the wall time from starting the process until a fresh connection's Stats was answered (\`bwdurable ready\`, retrying every ms: exec, recovery, the listening socket, Hello, Stats).  RSS read right after that answer."
		echo
		echo "| case | state files MiB | recovered (log) ms | start → Stats answered ms | pending after / before | VmRSS MiB | VmHWM MiB | under 2 s |"
		echo "|---|---:|---:|---:|---:|---:|---:|---|"
		awk -F, 'NR > 1 { printf "| %s | %.1f | %s | %s | %s / %s | %.1f | %.1f | %s |\n", $1, $2 / 1048576, $3, $4, $5, $6, $7 / 1024, $8 / 1024, ($4 < 2000 && $5 == $6) ? "yes" : "NO" }' "$rec_csv"
		echo
		echo "The daemon's log lines:"
		echo
		awk -F, 'NR > 1 { l = $0; sub(/^[^"]*"/, "", l); sub(/"$/, "", l); print "- " $1 ": `" l "`" }' "$rec_csv"
		echo
	} >>"$md"
fi

# ---- 3. stall -----------------------------------------------------------------
if want stall; then
	echo "run-durable.sh: stall: $stall_ms ms with --journal-max 2000000" >&2
	kill -TERM "$rpid"
	wait "$rpid" 2>/dev/null || true
	: >"$tmp/rec.log"
	expect=$timers
	# The size rule alone, so that the stall sees a snapshot every 2 MB of
	# journal (bitwheeld(8): --snapshot-growth, --snapshot-min-interval).
	start rec "${recargs[@]}" --journal-max 2000000 --snapshot-growth 0 \
		--snapshot-min-interval 0s
	expect=
	rpid=$started
	wait_snapshot || true   # the restart's own snapshot (it replayed a journal)
	n0=$(grep -c 'writer forked in' "$tmp/rec.log" || true)
	stall_out=$(timeout 300 "$bwdurable" stall --socket "$tmp/rec.sock" --state-dir "$state" \
		--duration-ms "$stall_ms" --rate 20000 --depth 16 --name stall) || echo "run-durable.sh: stall: no snapshot seen or a client failed" >&2
	n1=$(grep -c 'writer forked in' "$tmp/rec.log" || true)
	sleep 2   # the last writer's "written" line
	echo "$stall_out" >&2
	forks=$(grep 'writer forked in' "$tmp/rec.log" | sed -n "$((n0 + 1)),${n1}p" | sed 's/.* in \([0-9.]*\) ms/\1/' | paste -sd, -)
	writes=$(grep 'snapshot before journal generation' "$tmp/rec.log" | sed -n "$((n0 + 1)),${n1}p" | sed 's/.* in \([0-9.]*\) ms/\1/' | paste -sd, -)
	srss=$(rss_kib "$rpid" VmRSS)
	{
		echo "## 3. The loop's stall while a snapshot of $timers timers is taken"
		echo
		echo "The recovered daemon restarted as \`bitwheeld ${recargs[*]} --journal-max 2000000\` (holding $timers timers; VmRSS $(mib "$srss") MiB at the end), then \`bwdurable stall --duration-ms $stall_ms --rate 20000 --depth 16\`: a probe client (anonymous session) doing back-to-back Stats round trips, and a named session doing paced Schedule/Cancel pairs of 1 h timers at 20,000 requests/s (up to 16 in flight), whose journal records start a snapshot every time the journal passes 2,000,000 bytes.  A snapshot window runs from its fork to its install as the daemon tells them in the probe's Stats replies (\`snapshots\` grown between two replies: the window runs from the first one's send less \`snapshot_ns_last\`, fork to installed, to the second one's reply, at most one probe round trip wider than the snapshot); a round trip is *during* a snapshot if it overlaps a window."
		echo
		echo "- fork times of these snapshots (\"snapshot: writer forked in X ms\", -v): ${forks:-none} ms"
		echo "- write times (\"snapshot before journal generation N written in X ms\", fork to installed): ${writes:-none} ms"
		echo
		echo "$stall_out" | sed 's/^stall: \(.*\)$/- \1/'
		echo
	} >>"$md"
fi

if want throughput; then
	if command -v gnuplot >/dev/null; then
		timeout 120 "$here/plot-service.sh" --durable-csv "$out/durable.csv" --out "$out" ||
			echo "run-durable.sh: plot-service.sh failed: no chart" >&2
	else
		echo "run-durable.sh: gnuplot not installed: no chart (install gnuplot-nox)" >&2
	fi
fi
echo "run-durable.sh: done in $(($(date +%s) - t_begin)) s; see $md" >&2
