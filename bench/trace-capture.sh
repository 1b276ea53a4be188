#!/usr/bin/env bash
# trace-capture.sh - record the kernel's timer events while a workload runs.
#
#   bench/trace-capture.sh [--seconds N] [--max-kb KB] [--out FILE] [-- COMMAND ...]
#
# As root: mounts tracefs on /sys/kernel/tracing if it is not mounted,
# enables timer:timer_start, timer_cancel, timer_expire_entry,
# hrtimer_start, hrtimer_cancel and hrtimer_expire_entry with the trace
# clock "mono" (so that the event times and the hrtimers' expiry times are
# the same CLOCK_MONOTONIC), runs COMMAND (none: the host as it is) for at
# most N seconds (default 5), and writes the trace as ftrace's text
# (the "trace" file) to FILE (default timers.trace; .xz or .gz compresses).
#
# Bounded: the command is killed (SIGTERM, SIGKILL 2 s later) after N
# seconds; the per-CPU ring holds at most KB KiB (default 4096), so a busy
# host overwrites its oldest events rather than growing (the header says
# whether events were lost); N is at most 600.  Whatever happens, the
# tracing state found on entry (the six events' enable bits, trace_clock,
# buffer_size_kb, tracing_on) is restored and a tracefs this script
# mounted is unmounted.
#
# The header lines (starting "# bwtrace") give what the converter
# (bench/trace-convert.py) needs besides the events: the offsets of
# CLOCK_REALTIME and CLOCK_BOOTTIME from CLOCK_MONOTONIC (hrtimers on those
# bases carry their own clock's time) and the kernel threads' pids (their
# timers are the kernel's own, not a user process's).
set -euo pipefail

seconds=5
max_kb=4096
out=timers.trace
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) seconds=$2; shift ;;
	--max-kb) max_kb=$2; shift ;;
	--out) out=$2; shift ;;
	--) shift; break ;;
	-h | --help) sed -n '2,26p' "$0"; exit 0 ;;
	*) echo "trace-capture.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
case $seconds in '' | *[!0-9]*) echo "trace-capture.sh: --seconds must be 1..600" >&2; exit 2 ;; esac
case $max_kb in '' | *[!0-9]*) echo "trace-capture.sh: --max-kb must be 64..65536" >&2; exit 2 ;; esac
if [ "$seconds" -lt 1 ] || [ "$seconds" -gt 600 ]; then
	echo "trace-capture.sh: --seconds must be 1..600" >&2; exit 2
fi
if [ "$max_kb" -lt 64 ] || [ "$max_kb" -gt 65536 ]; then
	echo "trace-capture.sh: --max-kb must be 64..65536" >&2; exit 2
fi
[ "$(id -u)" -eq 0 ] || { echo "trace-capture.sh: needs root (tracefs)" >&2; exit 1; }

T=/sys/kernel/tracing
mounted=
if [ ! -e $T/trace ]; then
	mount -t tracefs nodev $T
	mounted=1
fi
events="timer/timer_start timer/timer_cancel timer/timer_expire_entry
	timer/hrtimer_start timer/hrtimer_cancel timer/hrtimer_expire_entry"

# the state to put back
declare -A was
for e in $events; do was[$e]=$(cat $T/events/$e/enable); done
was_clock=$(sed 's/.*\[\(.*\)\].*/\1/' $T/trace_clock)
# "1408", or "7 (expanded: 1408)" before the ring was first used
was_kb=$(sed 's/.*expanded: *\([0-9]*\).*/\1/' $T/buffer_size_kb)
was_on=$(cat $T/tracing_on)
pid=
restore() {
	set +e
	[ -n "$pid" ] && kill -TERM -- "-$pid" 2>/dev/null
	echo 0 >$T/tracing_on
	for e in $events; do echo "${was[$e]}" >$T/events/$e/enable; done
	echo "$was_clock" >$T/trace_clock
	echo "$was_kb" >$T/buffer_size_kb
	echo >$T/trace
	echo "$was_on" >$T/tracing_on
	[ -n "$mounted" ] && umount $T
}
trap restore EXIT
trap 'exit 130' INT TERM

kthreads() {
	# pid 2 (kthreadd) and its children: every kernel thread
	ps -e -o pid=,ppid= | awk '$1 == 2 || $2 == 2 { printf " %s", $1 }'
}

echo 0 >$T/tracing_on
echo mono >$T/trace_clock
echo "$max_kb" >$T/buffer_size_kb
echo >$T/trace
for e in $events; do echo 1 >$T/events/$e/enable; done
kt_start=$(kthreads)
offsets=$(python3 -c 'import time
m = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
r = time.clock_gettime_ns(time.CLOCK_REALTIME)
b = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
print(r - m, b - m)')
echo 1 >$T/tracing_on
t0=$(date +%s.%N)
if [ $# -gt 0 ]; then
	setsid "$@" </dev/null &
	pid=$!
	timeout -k 2 "$seconds" tail --pid="$pid" -f /dev/null || true
	kill -TERM -- "-$pid" 2>/dev/null || true
	timeout 2 tail --pid="$pid" -f /dev/null || kill -KILL -- "-$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	pid=
else
	sleep "$seconds"
fi
echo 0 >$T/tracing_on
t1=$(date +%s.%N)
kt_end=$(kthreads)

case $out in
*.xz) compress="xz -9" ;;
*.gz) compress="gzip -9" ;;
*) compress=cat ;;
esac
{
	echo "# bwtrace version 1"
	echo "# bwtrace kernel $(uname -r) cpus $(nproc)"
	echo "# bwtrace command ${*:-(none: the host as it is)}"
	echo "# bwtrace seconds $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
	echo "# bwtrace clock_offsets_ns realtime_minus_mono boottime_minus_mono $offsets"
	echo "# bwtrace kthreads$(printf '%s\n' $kt_start $kt_end | sort -un | tr '\n' ' ' | sed 's/^/ /;s/ $//')"
	echo "# bwtrace lost $(awk '/^overrun:/ { s += $2 } END { print s + 0 }' $T/per_cpu/cpu*/stats)"
	cat $T/trace
} | $compress >"$out"
echo "trace-capture.sh: wrote $out ($(wc -c <"$out") bytes)" >&2
