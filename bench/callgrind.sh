#!/usr/bin/env bash
# callgrind.sh - instructions per insert, cancel and poll for every subject
# of bwbench, in the interleaved and trading scenarios, and per poll by gap
# in the idle scenario.
#
#   bench/callgrind.sh [--quick] [--out DIR] [--subject LIST] [--scenario LIST]
#                      [--trace STREAM]
#
# Each subject and scenario runs once under valgrind --tool=callgrind with
# collection switched on only inside bench_measured_phase() (the same
# operation stream as the timed runs, after the same warm-up).  The
# inclusive instruction count (Ir) of each per-operation wrapper
# (bench_op_insert/cancel/poll: the harness's call, the subject's adapter
# and the library) divided by the number of such operations is "per op";
# the library entry point's inclusive Ir over the same count is "library"
# (bw_wheel_insert, ev_timer_start, uv_run, ...).  The null subject, which
# does nothing, gives the harness's own share of "per op".  Instruction
# counts are deterministic: same seed, same binary, same numbers.  The
# idle scenario runs a fifth of the operations (its untimed re-arming
# makes it slow under valgrind); its polls go through one wrapper per gap
# (bench_op_poll_gap0..7), so each gap gets its own count.  --trace adds
# the trace scenario on STREAM (bench/trace-convert.py; all of it is
# measured): besides per op, instructions per kernel trace event (all
# three wrappers' Ir over the events the stream stands for).
#
# Writes DIR/callgrind.md, DIR/callgrind.csv and, for the wheels in the
# headline set, DIR/callgrind-profile-SUBJECT.txt (callgrind_annotate of
# the trading run: where the instructions go).  DIR defaults to
# bench/results.  BWBENCH names the binary (default: bench/bwbench in the
# tree).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bwbench=${BWBENCH:-$here/bwbench}
out=$here/results
warmup=100000
ops=1000000
mode=full
subjects=
trace=
scenarios="interleaved trading idle"
profiled="plain:precise64:exact plain:precise64:coarse failover:precise64:exact dual:fast-precise:exact"

while [ $# -gt 0 ]; do
	case $1 in
	--quick) warmup=10000 ops=100000 mode=quick ;;
	--out) out=$2; shift ;;
	--subject) subjects=${2//,/ }; shift ;;
	--scenario) scenarios=${2//,/ }; shift ;;
	--trace) trace=$2; shift ;;
	-h | --help) sed -n '2,30p' "$0"; exit 0 ;;
	*) echo "callgrind.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done

command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind not found (install valgrind)" >&2; exit 1; }
command -v callgrind_annotate >/dev/null || { echo "callgrind.sh: callgrind_annotate not found" >&2; exit 1; }
[ -x "$bwbench" ] || { echo "callgrind.sh: $bwbench not built (run make)" >&2; exit 1; }
if [ -n "$trace" ]; then
	[ -r "$trace" ] || { echo "callgrind.sh: cannot read $trace" >&2; exit 1; }
	[[ " $scenarios " == *" trace "* ]] || scenarios="$scenarios trace"
	trace_args=(--trace "$trace")
else
	scenarios=${scenarios//trace/}
	trace_args=()
fi
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name -> library functions (insert cancel poll), from bwbench --list
"$bwbench" --list >"$tmp/list"
if [ -z "$subjects" ]; then
	subjects=$(awk '/; calls / { print $1 }' "$tmp/list")
fi
subjects="null $subjects"

libfns() {
	awk -v s="$1" '$1 == s && /; calls / { sub(/.*; calls /, ""); gsub("/", " "); print }' "$tmp/list"
}

# Inclusive Ir of the calls to function $2 made from bwbench's own code,
# in callgrind_annotate --tree=calling output $1 (0 if none).  Only those:
# libev and libuv also call ev_timer_stop/uv_timer_stop from inside
# their loop for every timer that fires.  A PLT stub callgrind could not
# name ("???:0x... [???]") stands between bwbench and some libraries; its
# calls count too.
libcost() {
	awk -v fn="$2" '
		/^ *[0-9,]+ \([ 0-9.]+%\)  \*  / {
			inblk = index($0, "/bwbench]") > 0 || $0 ~ /\?\?\?:0x[0-9a-f]+ \[\?\?\?\]$/
			next
		}
		/^$/ { inblk = 0 }
		inblk && index($0, ":" fn " (") { ir = $1; gsub(",", "", ir); sum += ir }
		END { print sum + 0 }' "$1"
}

# Inclusive Ir of function $2 in annotate output $1 (0 if absent).
incl() {
	awk -v fn="$2" '
		{
			line = $0
			sub(/^[ ]+/, "", line)
			split(line, f, " ")
			ir = f[1]; gsub(",", "", ir)
			if (index(line, ":" fn " [") || substr(line, length(line) - length(fn)) == ":" fn) {
				print ir; found = 1; exit
			}
		}
		END { if (!found) print 0 }' "$1"
}

csv=$out/callgrind.csv
echo "scenario,subject,op,calls,ir_per_op,lib_fn,lib_ir_per_call" >"$csv"
start=$(date +%s)
for scen in $scenarios; do
	for subj in $subjects; do
		f=$tmp/$scen.${subj//:/_}
		n_ops=$ops
		[ "$scen" = idle ] && n_ops=$((ops / 5))
		valgrind --tool=callgrind --callgrind-out-file="$f.out" \
			--collect-atstart=no --toggle-collect=bench_measured_phase \
			"$bwbench" --count-only --warmup "$warmup" --ops "$n_ops" \
			--scenario "$scen" --subject "$subj" "${trace_args[@]}" >"$f.counts" 2>"$f.log" ||
			{ echo "callgrind.sh: $subj on $scen failed:" >&2; tail "$f.log" >&2; exit 1; }
		callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$f.out" >"$f.ann" 2>/dev/null
		callgrind_annotate --tree=calling --inclusive=yes --auto=no --threshold=100 "$f.out" >"$f.tree" 2>/dev/null
		counts=$(grep '^counts ' "$f.counts")
		if [ "$scen" = idle ]; then
			for b in 0 1 2 3 4 5 6 7; do
				n=$(sed -n "s/.* gap$b=\([0-9]*\).*/\1/p" <<<"$counts")
				ir=$(incl "$f.ann" "bench_op_poll_gap$b")
				per=$(awk -v a="$ir" -v b="${n:-0}" 'BEGIN { if (b > 0) printf "%.1f", a / b }')
				echo "$scen,$subj,gap$b,${n:-0},$per,," >>"$csv"
			done
			printf '%-12s %-28s done\n' "$scen" "$subj" >&2
			continue
		fi
		read -r -a fns <<<"$(libfns "$subj")"
		i=0
		ir_all=0
		for op in insert cancel poll; do
			n=$(sed -n "s/.* $op=\([0-9]*\).*/\1/p" <<<"$counts")
			ir=$(incl "$f.ann" "bench_op_$op")
			ir_all=$((ir_all + ir))
			fn=${fns[$i]:-}
			lib=
			if [ -n "$fn" ] && [ "$n" -gt 0 ]; then
				lir=$(libcost "$f.tree" "$fn")
				[ "$lir" -gt 0 ] && lib=$(awk -v a="$lir" -v b="$n" 'BEGIN { printf "%.1f", a / b }')
			fi
			per=$( [ "$n" -gt 0 ] && awk -v a="$ir" -v b="$n" 'BEGIN { printf "%.1f", a / b }' || echo "")
			echo "$scen,$subj,$op,$n,$per,$fn,$lib" >>"$csv"
			i=$((i + 1))
		done
		events=$(sed -n 's/.* events=\([0-9]*\).*/\1/p' <<<"$counts")
		if [ -n "$events" ] && [ "$events" -gt 0 ]; then
			per=$(awk -v a="$ir_all" -v b="$events" 'BEGIN { printf "%.1f", a / b }')
			echo "$scen,$subj,event,$events,$per,," >>"$csv"
		fi
		refused=$(sed -n 's/.* refused=\([0-9]*\).*/\1/p' <<<"$counts")
		echo "$scen,$subj,refused,$refused,,," >>"$csv"
		printf '%-12s %-28s done\n' "$scen" "$subj" >&2
		if [ "$scen" = trading ] && [[ " $profiled " == *" $subj "* ]]; then
			p=$out/callgrind-profile-${subj//:/_}.txt
			{
				echo "# Where bitwheel's instructions go: callgrind_annotate of the"
				echo "# trading measured phase, subject $subj."
				echo "# ($counts)"
				echo "# Ir only; call counts are left out (callgrind counts the untimed"
				echo "# warm-up's calls too)."
				echo
				echo "## Inclusive Ir of libbitwheel's functions (with everything they call)"
				callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$f.out" 2>/dev/null |
					grep -F libbitwheel | head -25
				echo
				echo "## Self Ir (the function's own instructions, inlined helpers by file)"
				callgrind_annotate --auto=no --threshold=100 "$f.out" 2>/dev/null |
					grep -E 'wheel/[a-z-]+\.[ch]:' | head -25
				echo
				echo "## Who calls what (inclusive Ir of each call site)"
				for fn in bw_wheel_insert bw_wheel_cancel bw_wheel_poll bw_poll_collect bw_poll_fire \
					arm place run_slot bw_slot_add bw_slot_remove bw_next_event; do
					awk -v fn="$fn" '
						/^ *[0-9,]+ \([ 0-9.]+%\)  \*  / { show = index($0, ":" fn " [") > 0 }
						/^$/ { if (show) print ""; show = 0 }
						show { gsub(/ \([0-9,]+x\)/, ""); print }' "$f.tree"
				done
			} >"$p"
		fi
	done
done
elapsed=$(($(date +%s) - start))

# ---- Markdown --------------------------------------------------------------
md=$out/callgrind.md
awk -F, -v mode="$mode" -v warmup="$warmup" -v ops="$ops" -v elapsed="$elapsed" '
	NR == 1 { next }
	{
		key = $1 SUBSEP $2
		if (!(($1) in seen_s)) { seen_s[$1] = 1; scen[++ns] = $1 }
		if (!(($2) in seen_j)) { seen_j[$2] = 1; subj[++nj] = $2 }
		if ($3 == "refused") { refused[key] = $4; next }
		per[key, $3] = $5; lib[key, $3] = $7; fn[$2, $3] = $6; calls[key, $3] = $4
	}
	function peer(s) { return s !~ /^(plain|failover|dual):/ && s != "null" }
	function v(x) { return x == "" ? "-" : x }
	END {
		print "# Instructions per operation (callgrind)\n"
		printf "Mode %s: %d warm-up then %d measured operations per scenario, seed 1, ", mode, warmup, ops
		printf "the same streams as the timed runs; %d s under valgrind.\n\n", elapsed
		print "- **per op**: inclusive instructions of the per-operation wrapper over the number of operations: " \
		      "the harness call, the subject adapter (handle bookkeeping, the peers\x27 free list and " \
		      "relative-timeout arithmetic) and the library call, callbacks included."
		print "- **library**: inclusive instructions of the library entry point alone " \
		      "(bw_wheel_insert, ev_timer_start, uv_run, event_base_loop, ...) over the same count."
		print "- the null subject does nothing: its per-op numbers are the harness\x27s own share of every per-op number."
		print "- the event loops read a simulated clock defined in bwbench (a few instructions; " \
		      "a vDSO clock_gettime costs more) and their epoll_wait(..., 0) is answered without a system call.\n"
		for (i = 1; i <= ns; i++) {
			s = scen[i]
			if (s == "idle") continue
			print "## " s "\n"
			ev = s == "trace"
			if (ev)
				print "Per trace event: all three wrappers\x27 instructions over the kernel timer events the stream stands for.\n"
			print "| subject | refused | insert per op | insert library | cancel per op | cancel library | poll per op | poll library |" (ev ? " per trace event |" : "")
			print "|---|---:|---:|---:|---:|---:|---:|---:|" (ev ? "---:|" : "")
			for (j = 1; j <= nj; j++) {
				k = s SUBSEP subj[j]
				if (!(k in refused)) continue
				printf "| %s | %s | %s | %s | %s | %s | %s | %s |", subj[j], refused[k],
					v(per[k, "insert"]), v(lib[k, "insert"]), v(per[k, "cancel"]), v(lib[k, "cancel"]),
					v(per[k, "poll"]), v(lib[k, "poll"])
				printf "%s\n", (ev ? " " v(per[k, "event"]) " |" : "")
			}
			print ""
		}
		if ("idle" in seen_s) {
			print "## idle: instructions per poll by gap\n"
			print "Per op (harness included: the null subject\x27s share is in its row), for polls after " \
			      "each gap with nothing due; max/min is the flatness (target: at most 2).\n"
			print "| subject | 1 ms | 10 ms | 10^2 ms | 10^3 ms | 10^4 ms | 10^5 ms | 10^6 ms | 10^7 ms | max/min |"
			print "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
			for (j = 1; j <= nj; j++) {
				k = "idle" SUBSEP subj[j]
				if (!((k, "gap0") in per)) continue
				lo = ""; hi = ""
				printf "| %s |", subj[j]
				for (b = 0; b < 8; b++) {
					x = per[k, "gap" b]
					printf " %s |", v(x)
					if (x != "") {
						if (lo == "" || x + 0 < lo + 0) lo = x
						if (hi == "" || x + 0 > hi + 0) hi = x
					}
				}
				printf " %s |\n", (lo > 0 ? sprintf("%.2f", hi / lo) : "-")
			}
			print ""
		}
		# targets: trading, library numbers (per op where a library number is missing)
		s = "trading"
		if (!(s in seen_s)) exit
		split("insert cancel poll", opn, " ")
		lim["insert"] = 45; lim["cancel"] = 25; lim["poll"] = 60
		print "## Targets (instructions, trading)\n"
		print "From the benchmark issue: insert <= 45, cancel <= 25, poll <= 60 instructions on average, " \
		      "and below every peer. Checked on the library numbers (for the red-black tree, whose " \
		      "functions are inlined into its adapter, the per-op number less the null subject\x27s). " \
		      "Best peer per operation in brackets.\n"
		for (o = 1; o <= 3; o++) {
			op = opn[o]; best[op] = ""
			for (j = 1; j <= nj; j++) {
				if (!peer(subj[j])) continue
				k = s SUBSEP subj[j]
				x = lib[k, op]
				if (x == "" && per[k, op] != "") x = per[k, op] - per[s SUBSEP "null", op]
				if (x == "") continue
				if (best[op] == "" || x + 0 < best[op] + 0) { best[op] = x; bestn[op] = subj[j] }
			}
		}
		printf "| subject | insert (best peer %s: %s) | cancel (best peer %s: %s) | poll (best peer %s: %s) |\n",
			bestn["insert"], best["insert"], bestn["cancel"], best["cancel"], bestn["poll"], best["poll"]
		print "|---|---|---|---|"
		for (j = 1; j <= nj; j++) {
			if (peer(subj[j]) || subj[j] == "null") continue
			k = s SUBSEP subj[j]
			if (!(k in refused)) continue
			printf "| %s%s |", subj[j], (refused[k] > 0 ? " (refused " refused[k] ")" : "")
			for (o = 1; o <= 3; o++) {
				op = opn[o]; x = lib[k, op]
				ok = x != "" && x + 0 <= lim[op] && (best[op] == "" || x + 0 < best[op] + 0)
				printf " %s %s |", v(x), ok ? "yes" : "**no**"
			}
			print ""
		}
		print ""
	}' "$csv" >"$md"
echo "callgrind.sh: wrote $md and $csv (${elapsed} s)" >&2
