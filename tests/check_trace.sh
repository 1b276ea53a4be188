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
#   3. streams that break the format's promises are refused, with the
#      line: a cancel of a timer a poll has fired, ids out of order, a
#      truncated stream.
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
