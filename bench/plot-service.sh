#!/usr/bin/env bash
# plot-service.sh - PNG charts of the service and durability benchmarks,
# with gnuplot.
#
#   bench/plot-service.sh [--csv FILE] [--out DIR] [--durable-csv FILE]
#
# Reads bwload's service.csv (--csv, default bench/results/service.csv)
# and writes into DIR (default: the CSV's folder):
#   service-throughput.png
#       requests/s per subject (bitwheel, bitwheel-ack, echo, redis-zset,
#       redis-expire: those in the CSV) for each phase, grouped bars on a
#       log scale (the delivery phases are bwload's tables only)
#   service-lateness.png
#       fire lateness p50, p90, p99, p99.9 in ms on a log scale, one panel
#       per phase with fires, one line per subject with fires
# With --durable-csv FILE (run-durable.sh's durable.csv), if FILE exists:
#   durable-throughput.png
#       requests/s by daemon (memory, never, batch, always) for each
#       phase, grouped bars on a log scale
# --durable-csv without --csv draws the durable chart only (DIR defaults
# to its folder).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
csv=
durable=
out=

while [ $# -gt 0 ]; do
	case $1 in
	--csv) csv=$2; shift ;;
	--out) out=$2; shift ;;
	--durable-csv) durable=$2; shift ;;
	-h | --help) sed -n '2,21p' "$0"; exit 0 ;;
	*) echo "plot-service.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ -n "$csv" ] || [ -n "$durable" ] || csv=$here/results/service.csv
command -v gnuplot >/dev/null || { echo "plot-service.sh: gnuplot not found (install gnuplot-nox)" >&2; exit 1; }
if [ -n "$csv" ] && [ ! -f "$csv" ]; then
	echo "plot-service.sh: $csv not found (run bench/run-service.sh first)" >&2
	exit 1
fi
if [ -n "$durable" ] && [ ! -f "$durable" ]; then
	echo "plot-service.sh: $durable not found: no durable-throughput.png" >&2
	durable=
	[ -n "$csv" ] || exit 0
fi
out=${out:-$(dirname "${csv:-$durable}")}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

phases="rtt single pipelined deep sustained"
# An awk function: 111111 -> 111k.
kilo='function kilo(v) { return v >= 1e4 ? sprintf("%.0fk", v / 1e3) : v }
'

# Per-series colours, the same in every chart.
color() {
	case $1 in
	bitwheel) echo "#1f5fa8" ;;
	bitwheel-ack) echo "#6fa8dc" ;;
	echo) echo "#8c8c8c" ;;
	redis-zset) echo "#c0392b" ;;
	redis-expire) echo "#e69138" ;;
	memory) echo "#4f9a3a" ;;
	never) echo "#1f5fa8" ;;
	batch) echo "#e69138" ;;
	always) echo "#c0392b" ;;
	*) echo "#555555" ;;
	esac
}

# bars_table CSV SERIES-COLUMN SERIES-LIST FILE: one row per phase present
# (index, phase), one column of requests/s per series (NaN if absent).
# Columns are found by their header names.
bars_table() {
	awk -F, -v key="$2" -v series="$3" -v phases="$phases" '
		NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		{ v[$(c["phase"]), $(c[key])] = $(c["requests_per_s"]); have[$(c["phase"])] = 1 }
		END {
			np = split(phases, p, " ")
			ns = split(series, s, " ")
			n = 0
			for (i = 1; i <= np; i++) {
				if (!(p[i] in have)) continue
				printf "%d\t%s", n++, p[i]
				for (j = 1; j <= ns; j++) {
					x = v[p[i], s[j]]
					printf "\t%s", (x == "" || x <= 0 ? "NaN" : x)
				}
				printf "\n"
			}
		}' "$1" >"$4"
}

# present CSV COLUMN CANDIDATES [CONDITION-COLUMN]: the candidates that
# occur in COLUMN, in the candidates' order (with CONDITION-COLUMN, only
# in rows where it is > 0).
present() {
	awk -F, -v key="$2" -v list="$3" -v cond="${4:-}" '
		NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		cond == "" || $(c[cond]) > 0 { have[$(c[key])] = 1 }
		END {
			n = split(list, s, " ")
			for (i = 1; i <= n; i++) if (s[i] in have) printf "%s ", s[i]
		}' "$1"
}

# xtics CSV DATA-FILE: "set xtics" naming each phase with its clients ×
# depth (and the pacing of a paced phase).
xtics() {
	awk -F, "$kilo"'NR == FNR {
			if (FNR == 1) { for (i = 1; i <= NF; i++) c[$i] = i; next }
			ph = $(c["phase"])
			if (!(ph in cd)) {
				cd[ph] = $(c["clients"]) "×" $(c["depth"])
				if ($(c["rate"]) > 0) cd[ph] = cd[ph] ", paced " kilo($(c["rate"])) " req/s"
			}
			next
		}
		{ t = t sep sprintf("\"%s\\n%s\" %d", $2, cd[$2], $1); sep = ", " }
		END { print "set xtics (" t ") nomirror scale 0" }' "$1" FS="\t" "$2"
}

# log_range DATA-FILE FIRST-COLUMN HEADROOM: "ylow" and "set yrange", from the decade
# below the smallest value to the decade above HEADROOM times the largest.
log_range() {
	awk -F'\t' -v f="$2" -v h="$3" '
		{ for (i = f; i <= NF; i++) if ($i != "NaN" && $i > 0) {
			if (lo == "" || $i < lo) lo = $i
			if (hi == "" || $i > hi) hi = $i
		} }
		END {
			if (lo == "") { lo = 1; hi = 10 }
			a = 10 ^ int(log(lo) / log(10) - (lo < 1 ? 1 : 0))
			if (a > lo) a /= 10
			b = 10 ^ int(log(hi * h) / log(10) + 0.999999)
			printf "ylow = %g\nset yrange [ylow:%g]\n", a, b
		}' "$1"
}

# bars OUTPUT TITLE CSV SERIES-COLUMN RATIO SERIES...: the grouped bar
# chart; with RATIO "yes", each bar is labelled with its ratio to the
# first series' bar in the same phase too.
bars() {
	local png=$1 title=$2 src=$3 key=$4 ratio=$5 dat n j s w c text up more
	shift 5
	dat=$tmp/$(basename "$png" .png).dat
	bars_table "$src" "$key" "$*" "$dat"
	n=$#
	w=$(awk -v n="$n" 'BEGIN { printf "%.4f", 0.8 / n }')
	{
		cat <<EOF
set terminal pngcairo size 1200,620 font "DejaVu Sans,10" noenhanced
set output '$png'
set datafile separator "\t"
set title "$title"
set grid ytics lc rgb "#dddddd"
set logscale y
set format y "%.0s%c"
set ylabel "requests/s (log scale)"
set key top right horizontal samplen 1.5
set bmargin 4
set style fill solid 0.85 border -1
set xrange [-0.6:$(($(wc -l <"$dat") - 1)).6]
lbl(v) = v >= 1e6 ? sprintf("%.2fM", v / 1e6) : v >= 1e4 ? sprintf("%.0fk", v / 1e3) : v >= 1e3 ? sprintf("%.2fk", v / 1e3) : sprintf("%.0f", v)
EOF
		xtics "$src" "$dat"
		log_range "$dat" 3 3
		# one bar per series and phase, from ylow (the bottom of the
		# range) up, centred at its slot in the phase's group; its value
		# above it
		up=0.6
		[ "$ratio" != yes ] || up=1.3
		echo "w = $w"
		echo "slot(j) = \$1 + (j - ($n - 1) / 2.0) * w"
		echo "plot \\"
		j=0
		for s in "$@"; do
			c=$((j + 3))
			echo "  '$dat' using (slot($j)):$c:(slot($j) - 0.45 * w):(slot($j) + 0.45 * w):(ylow):$c with boxxyerror lc rgb \"$(color "$s")\" title \"$s\", \\"
			text="lbl(column($c))"
			if [ "$ratio" = yes ]; then
				text="$text . (column(3) > 0 ? sprintf(column($c) >= 0.1 * column(3) ? \"\\n%.2f×\" : \"\\n%.3f×\", column($c) / column(3)) : \"\")"
			fi
			more=", \\"
			[ $((j + 1)) -lt "$n" ] || more=
			echo "  '$dat' using (slot($j)):$c:($text) with labels offset 0,$up font \",8\" notitle$more"
			j=$((j + 1))
		done
	} >"$tmp/bars.gp"
	gnuplot "$tmp/bars.gp"
	echo "$png"
}

# ---- service-throughput.png, service-lateness.png ------------------------
if [ -n "$csv" ]; then
	read -ra subjects <<<"$(present "$csv" subject "bitwheel bitwheel-ack echo redis-zset redis-expire")"
	[ ${#subjects[@]} -gt 0 ] || { echo "plot-service.sh: no known subject in $csv" >&2; exit 1; }
	bars "$out/service-throughput.png" \
		"Service benchmark: requests/s per subject and phase (replies / first send to last reply)" \
		"$csv" subject no "${subjects[@]}" >&2

	# Lateness: the subjects and phases with fires.
	read -ra fsubjects <<<"$(present "$csv" subject "${subjects[*]}" fired)"
	read -ra fphases <<<"$(present "$csv" phase "$phases" fired)"
	if [ ${#fsubjects[@]} -gt 0 ] && [ ${#fphases[@]} -gt 0 ]; then
		last=$((${#fsubjects[@]} + 1))
		for ph in "${fphases[@]}"; do
			# one row per percentile, one column per subject, in ms; a
			# subject without fires in this phase is NaN
			awk -F, -v ph="$ph" -v names="${fsubjects[*]}" '
				NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
				$(c["phase"]) == ph && $(c["fired"]) > 0 {
					v[$(c["subject"]), 0] = $(c["late_p50_ns"])
					v[$(c["subject"]), 1] = $(c["late_p90_ns"])
					v[$(c["subject"]), 2] = $(c["late_p99_ns"])
					v[$(c["subject"]), 3] = $(c["late_p999_ns"])
				}
				END {
					n = split(names, s, " ")
					printf "x"
					for (i = 1; i <= n; i++) printf "\t%s", s[i]
					printf "\n"
					for (k = 0; k < 4; k++) {
						printf "%d", k
						for (i = 1; i <= n; i++) {
							x = v[s[i], k]
							# under 1 µs (or 0) drawn at 1 µs
							printf "\t%s", (x == "" ? "NaN" : (x < 1000 ? 0.001 : x / 1e6))
						}
						printf "\n"
					}
				}' "$csv" >"$tmp/late-$ph.dat"
		done
		w=$(awk -v n="${#fphases[@]}" 'BEGIN { printf "%.4f", 1 / n }')
		{
			cat <<EOF
set terminal pngcairo size $((380 * ${#fphases[@]} + 100)),560 font "DejaVu Sans,10" noenhanced
set output '$out/service-lateness.png'
set datafile separator "\t"
set grid lc rgb "#dddddd"
set logscale y
set format y "%g"
set ylabel "ms (log scale)"
set key off
set xtics ("p50" 0, "p90" 1, "p99" 2, "p99.9" 3)
set xrange [-0.2:3.2]
EOF
			cat "$tmp"/late-*.dat | grep -v '^x' | log_range /dev/stdin 2 1
			echo 'set multiplot title "Service benchmark: fire lateness (receive time - deadline asked for), ms"'
			x=0
			for ph in "${fphases[@]}"; do
				lbl=$(awk -F, -v ph="$ph" "$kilo"'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
					$(c["phase"]) == ph { printf "%s, %s×%s%s", ph, $(c["clients"]), $(c["depth"]), ($(c["rate"]) > 0 ? ", paced " kilo($(c["rate"])) " req/s" : ""); exit }' "$csv")
				cat <<EOF
set origin $x, 0.12
set size $w, 0.80
set title "$lbl"
plot for [i=2:$last] '$tmp/late-$ph.dat' using 1:i with linespoints lw 1.8 pt 7 ps 0.9 lc rgb word("$(for s in "${fsubjects[@]}"; do printf '%s ' "$(color "$s")"; done)", i - 1) title columnhead(i)
EOF
				x=$(awk -v x="$x" -v w="$w" 'BEGIN { printf "%.4f", x + w }')
			done
			cat <<EOF
set origin 0, 0
set size 1, 0.12
unset title
unset border
unset tics
unset xlabel
unset ylabel
unset grid
unset logscale
set xrange [0:1]
set yrange [0:1]
set key on center center horizontal samplen 3 width 2
plot for [i=2:$last] '$tmp/late-${fphases[0]}.dat' using (NaN):(NaN) with linespoints lw 1.8 pt 7 ps 0.9 lc rgb word("$(for s in "${fsubjects[@]}"; do printf '%s ' "$(color "$s")"; done)", i - 1) title columnhead(i)
unset multiplot
EOF
		} >"$tmp/late.gp"
		gnuplot "$tmp/late.gp"
		echo "$out/service-lateness.png" >&2
	else
		echo "plot-service.sh: no fires in $csv: no service-lateness.png" >&2
	fi
fi

# ---- durable-throughput.png ------------------------------------------------
if [ -n "$durable" ]; then
	read -ra configs <<<"$(present "$durable" config "memory never batch always")"
	if [ ${#configs[@]} -gt 0 ]; then
		bars "$out/durable-throughput.png" \
			"Durability benchmark: bitwheeld requests/s by --fsync (memory: no --state-dir; ratios to memory), named sessions, median of the rounds" \
			"$durable" config yes "${configs[@]}" >&2
	else
		echo "plot-service.sh: no known daemon in $durable: no durable-throughput.png" >&2
	fi
fi
