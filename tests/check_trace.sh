#!/bin/sh
# check_trace.sh - the trace replay's cross-peer agreement on the kernel
# timer traces committed in bench/traces/: each is converted to an
# operation stream (bench/trace-convert.py) and replayed by bench/bwbench
# against every subject built, untimed (--count-only); then
#
#   1. every subject kept its promise (bwbench exits 1 otherwise): each
#      exact wheel and each peer fired every timer at the poll its tick
#      gives, by the fires, id sum and lateness sum of bench/trace.c's
#      model; a coarse wheel fired none early; nothing was refused;
#   2. the subjects that fire at the first poll at or after the deadline
#      (the peers and the 1 ms exact wheels) fired what the converter's
#      own model says ("# model" line: computed in Python from the
#      stream's records, independently of bwbench);
#   3. the converter's rules give the expected stream on a made-up trace
#      of ten events (re-arm, the tick, a kernel thread, jiffies, a
#      realtime timerfd, a cancel that is an expiry);
#   4. streams that break the format's promises are refused, with the
#      line: a cancel of a timer a poll has fired, ids out of order, a
#      truncated stream, a deadline not after the last poll.
#
# Needs python3 (skipped without it).  Deterministic: the traces are
# fixed; a few seconds in all.  Run by make check from the build
# directory ($srcdir from automake's harness).
set -eu

srcdir=${srcdir:-.}
bwbench=./bench/bwbench
conv=$srcdir/bench/trace-convert.py
command -v python3 >/dev/null || { echo "check_trace: no python3: skipped"; exit 77; }
[ -x "$bwbench" ] || { echo "check_trace: $bwbench not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

for trace in "$srcdir"/bench/traces/*.trace.xz; do
	name=$(basename "$trace" .trace.xz)
	s=$tmp/$name.stream
	python3 "$conv" "$trace" -o "$s"
	if ! timeout 120 "$bwbench" --trace "$s" --scenario trace --count-only \
		>"$tmp/$name.counts" 2>"$tmp/$name.log"; then
		echo "check_trace: $name: the replay failed:"
		grep -v ' round 1 ' "$tmp/$name.log" || true
		fail=1
		continue
	fi
	model=$(sed -n 's/^# model fired \([0-9]*\) idsum \([0-9]*\) late_sum_ns \([0-9]*\)$/fired=\1 idsum=\2 late_sum_ns=\3/p' "$s")
	[ -n "$model" ] || { echo "check_trace: $name: no '# model' line"; fail=1; continue; }
	fired=${model%% *}
	[ "$fired" != fired=0 ] || { echo "check_trace: $name: the model fires nothing"; fail=1; }
	n=0
	for subj in rbtree libev libuv libevent plain:precise64:exact \
		failover:precise:exact dual:fast-precise:exact; do
		line=$(grep " subject=$subj " "$tmp/$name.counts" || true)
		[ -n "$line" ] || continue      # a peer configure did not find
		got=$(echo "$line" | sed 's/.* \(fired=[0-9]*\) events=[0-9]* \(idsum=[0-9]*\) \(late_sum_ns=[0-9]*\)$/\1 \2 \3/')
		if [ "$got" != "$model" ]; then
			echo "check_trace: $name: $subj: $got, the converter's model: $model"
			fail=1
		fi
		n=$((n + 1))
	done
	[ "$n" -ge 2 ] || { echo "check_trace: $name: fewer than 2 subjects compared"; fail=1; }
	echo "check_trace: $name: $(grep -c '^counts ' "$tmp/$name.counts") subjects kept their promise; $n compared with the converter's model ($model)"
done
[ -n "${name:-}" ] || { echo "check_trace: no trace in $srcdir/bench/traces"; exit 1; }

# The converter's rules on a made-up trace: a re-arm is a cancel and an
# insert; the tick and a kernel thread's timer are left out; a timer_list
# deadline is jiffies at HZ (250); a CLOCK_REALTIME hrtimer comes to the
# monotonic clock by the header's offset; a cancel just before its expiry
# on the same CPU is the expiry; deadlines on the 1 ms grid move 1 ns
# earlier; 8 of the 10 events are kept; polls from 0 to 21 ms.
cat >"$tmp/made-up.trace" <<'EOF'
# bwtrace version 1
# bwtrace clock_offsets_ns realtime_minus_mono boottime_minus_mono 1000000000000000000 0
# bwtrace kthreads 2 15
 app-100 [000] d..1. 10.000100: hrtimer_start: hrtimer=00000000000000a1 function=hrtimer_wakeup expires=10050100000 softexpires=10050000000 mode=ABS was_armed=0
 app-100 [000] d..1. 10.000200: hrtimer_start: hrtimer=00000000000000a1 function=hrtimer_wakeup expires=10020100000 softexpires=10020000000 mode=ABS was_armed=1
 <idle>-0 [001] d.h.. 10.000300: hrtimer_start: hrtimer=00000000000000b1 function=tick_nohz_handler expires=10004000000 softexpires=10004000000 mode=ABS was_armed=0
 rcu-15 [000] d..1. 10.000400: timer_start: timer=00000000000000c1 function=process_timeout expires=1010 [timeout=2] bucket_expiry=1010 cpu=0 idx=1 flags=
 app-100 [001] d..1. 10.000500: timer_start: timer=00000000000000d1 function=process_timeout expires=1005 [timeout=5] bucket_expiry=1005 cpu=1 idx=1 flags=
 app-101 [000] d..1. 10.001500: hrtimer_start: hrtimer=00000000000000e1 function=timerfd_tmrproc expires=1000000010003000000 softexpires=1000000010003000000 mode=ABS was_armed=0
 app-100 [000] d..1. 10.002500: hrtimer_cancel: hrtimer=00000000000000a1
 app-101 [000] d.h.. 10.003100: hrtimer_expire_entry: hrtimer=00000000000000e1 function=timerfd_tmrproc now=1000000010003100000
 app-100 [001] ..s1. 10.020600: timer_cancel: timer=00000000000000d1
 app-100 [001] ..s1. 10.020601: timer_expire_entry: timer=00000000000000d1 function=process_timeout now=1005 baseclk=1005
EOF
python3 "$conv" "$tmp/made-up.trace" --hz 250 -o "$tmp/made-up.stream"
grep -v '^[#p]' "$tmp/made-up.stream" | tr '\n' ' ' >"$tmp/made-up.got"
want='bwstream 1 tick 1000000 events 8 start 1000000000000 i 0 1000049999999 c 0 i 1 1000019999999 i 2 1000020500000 i 3 1000002999999 c 1 end '
if [ "$(cat "$tmp/made-up.got")" != "$want" ] || [ "$(grep -c '^p' "$tmp/made-up.stream")" != 22 ] ||
	! grep -q '^# model fired 2 idsum 5 late_sum_ns 500001$' "$tmp/made-up.stream"; then
	echo "check_trace: the made-up trace converted to:"
	cat "$tmp/made-up.stream"
	echo "check_trace: expected the records: $want, 22 polls, model fired 2 idsum 5 late_sum_ns 500001"
	fail=1
elif ! "$bwbench" --trace "$tmp/made-up.stream" --scenario trace --count-only \
	>"$tmp/made-up.counts" 2>"$tmp/made-up.log" ||
	! grep -q ' subject=plain:precise64:exact .* fired=2 events=8 idsum=5 late_sum_ns=500001$' \
		"$tmp/made-up.counts"; then
	echo "check_trace: the made-up trace's replay:"
	cat "$tmp/made-up.log" "$tmp/made-up.counts"
	fail=1
fi

# refused streams: "what to write" "the message bwbench must give"
refuse() {
	printf '%b' "$1" >"$tmp/bad"
	if "$bwbench" --trace "$tmp/bad" --scenario trace --count-only \
		>/dev/null 2>"$tmp/bad.log"; then
		echo "check_trace: accepted a stream with: $2"
		fail=1
	elif ! grep -q "$2" "$tmp/bad.log"; then
		echo "check_trace: expected '$2', got:"
		cat "$tmp/bad.log"
		fail=1
	fi
}
head='bwstream 1\ntick 1000000\nevents 3\nstart 1000000000000\np 1000000000000\n'
refuse "${head}i 0 1000000500000\np 1000001000000\nc 0\nend\n" \
	"bad:8: cancel of a timer a poll has fired"
refuse "${head}i 1 1000000500000\nend\n" "bad:6: insert ids must be 0, 1, 2"
refuse "${head}i 0 1000000500000\np 1000001000000\n" "bad:7: no 'end' line"
refuse "${head}i 0 1000000000000\nend\n" "bad:6: deadline not after the last poll"
exit $fail
