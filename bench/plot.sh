#!/usr/bin/env bash
# plot.sh - PNG charts of bwbench's latency percentiles, with gnuplot.
#
#   bench/plot.sh [--csv FILE] [--out DIR] [--subjects LIST]
#
# Reads wheel.csv (default bench/results/wheel.csv) and writes into DIR
# (default: the CSV's folder):
#   wheel-interleaved.png, wheel-trading.png, wheel-burst.png,
#   wheel-trace.png
#       one panel per operation (insert, cancel, poll): p50 ... p99.99 and
#       max per subject, nanoseconds on a log scale; wheels solid, peers
#       dashed
#   wheel-idle.png
#       mean and p99.9 poll latency against the gap since the last poll
# LIST: the subjects to draw (comma-separated), default the headline set of
# the Markdown report.  Values under 1 ns (operations below the counter's
# resolution after the empty-region subtraction) are drawn at 1 ns.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
csv=$here/results/wheel.csv
out=
subjects="plain:precise64:exact,plain:precise64:coarse,failover:precise64:exact,dual:fast-precise:exact,rbtree,libev,libuv,libevent"

while [ $# -gt 0 ]; do
	case $1 in
	--csv) csv=$2; shift ;;
	--out) out=$2; shift ;;
	--subjects) subjects=$2; shift ;;
	-h | --help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "plot.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (install gnuplot-nox)" >&2; exit 1; }
[ -f "$csv" ] || { echo "plot.sh: $csv not found (run bwbench --out first)" >&2; exit 1; }
out=${out:-$(dirname "$csv")}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The subjects present in the CSV, in LIST's order, with their peer flag.
present=$(awk -F, -v list="$subjects" '
	NR > 1 { have[$2] = 1; peer[$2] = $4 }
	END {
		n = split(list, s, ",")
		for (i = 1; i <= n; i++) if (s[i] in have) printf "%s %s\n", s[i], peer[s[i]]
	}' "$csv")
[ -n "$present" ] || { echo "plot.sh: none of the subjects are in $csv" >&2; exit 1; }
names=$(awk '{ print $1 }' <<<"$present" | paste -sd, -)
# wheels must come first in LIST for the solid/dashed split below
nwheels=$(awk '$2 == 0' <<<"$present" | wc -l)
last=$(($(wc -l <<<"$present") + 1))

# The line style of data column i: wheels solid with filled points, peers
# dashed with open ones.
LS="lw 1.8 pt (i <= $((nwheels + 1)) ? 7 : 6) ps 0.9 dt 1+(i > $((nwheels + 1)))"

# Data file: one row per percentile, one column per subject.
table() { # scenario bucket file
	awk -F, -v sc="$1" -v b="$2" -v names="$names" '
		NR > 1 && $1 == sc && $5 == b { for (k = 9; k <= 14; k++) v[$2, k] = $k }
		END {
			n = split(names, s, ",")
			printf "x"
			for (i = 1; i <= n; i++) printf "\t%s", s[i]
			printf "\n"
			for (k = 9; k <= 14; k++) {
				printf "%d", k - 9
				for (i = 1; i <= n; i++) {
					x = v[s[i], k]
					printf "\t%s", (x == "" ? "NaN" : (x < 1 ? 1 : x))
				}
				printf "\n"
			}
		}' "$csv" >"$3"
}

# Data file for the idle scenario: one row per gap; column m of the CSV.
idle_table() { # csv-column file
	awk -F, -v names="$names" -v m="$1" '
		NR > 1 && $1 == "idle" { v[$2, $7] = $m; gaps[$7] = 1 }
		END {
			n = split(names, s, ",")
			printf "gap"
			for (i = 1; i <= n; i++) printf "\t%s", s[i]
			printf "\n"
			for (g = 1; g <= 10000000; g *= 10) {
				if (!(g in gaps)) continue
				printf "%d", g
				for (i = 1; i <= n; i++) {
					x = v[s[i], g]
					printf "\t%s", (x == "" ? "NaN" : (x < 1 ? 1 : x))
				}
				printf "\n"
			}
		}' "$csv" >"$2"
}

header() { # output title
	cat <<EOF
set terminal pngcairo size 1300,500 font "DejaVu Sans,10" noenhanced
set output '$1'
set datafile separator "\t"
set grid lc rgb "#dddddd"
set ylabel "ns (log scale)"
set key off
set multiplot title "$2 (wheels solid, peers dashed)"
EOF
}

panel() { # file title x-origin width
	cat <<EOF
set origin $3, 0.13
set size $4, 0.80
set title "$2"
plot for [i=2:$last] '$1' using 1:i with linespoints $LS title columnhead(i)
EOF
}

# Nothing but the key, across the bottom of the figure: a panel's key
# would be squeezed into one column.
key_strip() { # a data file with the column heads
	cat <<EOF
set origin 0, 0
set size 1, 0.13
unset title
unset border
unset tics
unset xlabel
unset ylabel
unset grid
unset logscale
set xrange [0:1]
set yrange [0:1]
set key on center center horizontal maxcols 4 font ",9" samplen 3 width 2
plot for [i=2:$last] '$1' using (NaN):(NaN) with linespoints $LS title columnhead(i)
unset multiplot
EOF
}

for sc in interleaved trading burst trace; do
	grep -q "^$sc," "$csv" || continue
	case $sc in
	interleaved) title="Interleaved insert" ;;
	trading) title="Realistic trading simulation" ;;
	trace) title="Kernel timer trace replay" ;;
	*) title="Burst: 10,000 timers due in one tick" ;;
	esac
	{
		header "$out/wheel-$sc.png" "$title - latency percentiles per operation"
		echo 'set logscale y'
		echo 'set xtics ("p50" 0, "p90" 1, "p99" 2, "p99.9" 3, "p99.99" 4, "max" 5)'
		echo 'set xrange [-0.2:5.2]'
		x=0
		for op in insert cancel poll; do
			table "$sc" "$op" "$tmp/$sc-$op.dat"
			panel "$tmp/$sc-$op.dat" "$op" "$x" 0.333
			x=$(awk -v x="$x" 'BEGIN { printf "%.3f", x + 0.333 }')
		done
		key_strip "$tmp/$sc-insert.dat"
	} >"$tmp/$sc.gp"
	gnuplot "$tmp/$sc.gp"
done

if grep -q "^idle," "$csv"; then
	idle_table 15 "$tmp/idle-mean.dat"
	idle_table 12 "$tmp/idle-p999.dat"
	{
		header "$out/wheel-idle.png" "Idle gaps: poll latency against the gap since the last poll, nothing due"
		echo 'set logscale xy'
		echo 'set xlabel "gap since the previous poll (ms)"'
		echo 'set format x "1e%L"'
		echo 'set xrange [0.7:1.5e7]'
		panel "$tmp/idle-mean.dat" "mean" 0 0.5
		panel "$tmp/idle-p999.dat" "p99.9" 0.5 0.5
		key_strip "$tmp/idle-mean.dat"
	} >"$tmp/idle.gp"
	gnuplot "$tmp/idle.gp"
fi
ls -1 "$out"/wheel-*.png >&2
