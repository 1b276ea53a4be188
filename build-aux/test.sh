#!/usr/bin/env bash
# The test command: a fresh -Werror build, the Check suites, the end-to-end
# suites under valgrind, quick runs of the benchmarks and the soak,
# distcheck, the Check suites again built with AddressSanitizer and UBSan,
# and a bounded fuzz run.  Exits non-zero on any failure.
set -euo pipefail

# shellcheck source=build-aux/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bw_build=$bw_root/build-test
# Each stage's heading carries the time spent so far, so a slow CI run
# shows which stage grew.
stage() {
	echo "== $* [+${SECONDS}s]"
}

bw_san=$bw_root/build-san
# A sanitizer report fails the program that hit it, daemons included.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# Check writes its summary ("100%: Checks: N, Failures: 0, Errors: 0") into
# each test's log, where the automake harness keeps it, and pytest its
# "N passed in S" line; bring those lines, and the whole log of a failed
# program, to the console, then one total.
show_check_results() {
	local dir=$1 log trs summary passed=0 failed=0 n f e
	local re='^[0-9]+%: Checks: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+)'

	echo
	echo "== Check results ($(basename "$dir"))"
	for log in "$dir"/tests/*.log; do
		[ -e "$log" ] || continue
		trs=${log%.log}.trs
		echo "-- tests/$(basename "$log" .log)"
		if grep -q '^:test-result: PASS' "$trs" 2>/dev/null; then
			grep -E '^Running suite|^[0-9]+%: Checks:' "$log" || true
		else
			cat "$log"
		fi
		summary=$(grep -E "$re" "$log" | tail -n 1 || true)
		if [[ $summary =~ $re ]]; then
			n=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]} e=${BASH_REMATCH[3]}
			passed=$((passed + n - f - e))
			failed=$((failed + f + e))
		elif [[ $log == *.sh.log ]] && grep -q '^:test-result: PASS' "$trs" 2>/dev/null; then
			# A shell test (check_abi.sh, ...) is one check.
			passed=$((passed + 1))
		else
			# A program that died before its summary counts as one failure.
			failed=$((failed + 1))
		fi
	done
	# The Python suites (bindings/python): pytest's own summary line.
	for log in "$dir"/bindings/python/tests/*.log; do
		[ -e "$log" ] || continue
		trs=${log%.log}.trs
		echo "-- bindings/python/tests/$(basename "$log" .log).py"
		summary=$(grep -E '^=+ .* in [0-9.]+s' "$log" | tail -n 1 || true)
		grep -q '^:test-result: PASS' "$trs" 2>/dev/null || cat "$log"
		echo "${summary:-no pytest summary}"
		if [[ $summary =~ ([0-9]+)\ passed ]]; then
			passed=$((passed + BASH_REMATCH[1]))
		fi
		if [[ $summary =~ ([0-9]+)\ (failed|error) ]]; then
			failed=$((failed + BASH_REMATCH[1]))
		elif [ -z "$summary" ] || ! grep -q '^:test-result: PASS' "$trs" 2>/dev/null; then
			failed=$((failed + 1))
		fi
	done
	echo
	echo "checks: $passed passed, $failed failed"
}

# A fresh build with these configure flags.
build_tree() {
	local dir=$1
	shift
	rm -rf "$dir"
	bw_configure "$dir" "$@"
	make -C "$dir" -j2
}

# make check in a built tree; on a failure, show the results and end the
# script.
check_tree() {
	local dir=$1 status=0
	stage "make check ($(basename "$dir"))"
	make -C "$dir" -j2 check || status=$?
	if [ "$status" -ne 0 ]; then
		show_check_results "$dir"
		exit "$status"
	fi
}

fuzz_available() {
	[ "$(make -s --no-print-directory -C "$bw_build" fuzz-available)" = yes ]
}

# bench/bwload --quick against a bitwheeld of its own on a temporary
# socket, so CI needs no redis; the daemon is stopped however it ends, and
# every step is bounded in time.
bw_load_quick() {
	local dir=$1 tmp pid status=0

	tmp=$(mktemp -d)
	mkdir -p "$dir/bench-quick"
	timeout 60 "$dir/daemon/bitwheeld" --socket "$tmp/bw.sock" >"$tmp/bitwheeld.log" 2>&1 &
	pid=$!
	for _ in $(seq 50); do
		[ -S "$tmp/bw.sock" ] && break
		sleep 0.1
	done
	timeout 60 "$dir/bench/bwload" --quick --socket "$tmp/bw.sock" \
		--daemon-pid "$(pgrep -P "$pid" bitwheeld || echo "$pid")" \
		--subject echo,bitwheel --out "$dir/bench-quick" >/dev/null || status=$?
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	[ "$status" -eq 0 ] || cat "$tmp/bitwheeld.log" >&2
	rm -rf "$tmp"
	return "$status"
}

# The benchmark's peers too: its --quick run below keeps it from rotting.
bw_bench_install_missing
bw_bootstrap
# From scratch, as in CI's fresh clone: objects built earlier under other
# CFLAGS are not recompiled when flags change, and could hide a warning.
stage "build ($(basename "$bw_build"))"
build_tree "$bw_build" --enable-werror
check_tree "$bw_build"
# The sanitizer build and the fuzz targets (clang, from the sources alone:
# tests/fuzz.mk) compile in the background, niced, while check-valgrind's
# suites sit in their scaled waits: that stage keeps some 1.5 of CI's 2
# cores busy, and the two builds took 3 minutes of CI's time on their own.
bw_bg_log=$bw_root/build-background.log
(
	build_tree "$bw_san" --enable-werror --enable-sanitizers
	if fuzz_available; then
		make -C "$bw_build" fuzz
	fi
) >"$bw_bg_log" 2>&1 &
bw_bg=$!
renice -n 10 -p "$bw_bg" >/dev/null 2>&1 || true
# The end-to-end suites again with every daemon under valgrind memcheck
# (tests/local.mk): no invalid access, nothing definitely lost.
if command -v valgrind >/dev/null; then
	# Three suites at once on CI's two cores: they spend much of their
	# time in scaled waits (some 18 minutes of CPU; two at a time they
	# took 15 minutes of wall time, and CI's whole run 42).
	stage "make check-valgrind ($(basename "$bw_build"), ${BW_VALGRIND_JOBS:-3} at once)"
	make -C "$bw_build" -j"${BW_VALGRIND_JOBS:-3}" check-valgrind
else
	stage "check-valgrind: skipped: valgrind is not installed"
fi
stage "background: the sanitizer build and the fuzz targets"
if ! wait "$bw_bg"; then
	tail -n 60 "$bw_bg_log"
	echo "test.sh: the background build failed (log: $bw_bg_log)" >&2
	exit 1
fi
echo "built: $(basename "$bw_san")$(fuzz_available && echo ", the fuzz targets")"
stage "bench/bwbench --quick"
"$bw_build/bench/bwbench" --quick --out "$bw_build/bench-quick" >/dev/null
echo "bench/bwbench --quick: ok ($bw_build/bench-quick/wheel.md)"
stage "bench/bwload --quick (bitwheeld and the echo only)"
bw_load_quick "$bw_build"
echo "bench/bwload --quick: ok, against bitwheeld ($bw_build/bench-quick/service.md)"
# The soak (bench/soak.sh): clients crashing, reconnecting, reading slowly,
# releasing, touching, dead-lettering and kicking, against a daemon with a
# state directory that is restarted every 20 s; every acknowledged
# Schedule's fire accounted for.  BW_SOAK_SECONDS=0 skips it, a larger
# value soaks longer.
if [ "${BW_SOAK_SECONDS:-60}" -gt 0 ]; then
	stage "bench/soak.sh --duration ${BW_SOAK_SECONDS:-60} --state --restart-every 20"
	"$bw_root/bench/soak.sh" --build "$bw_build" --duration "${BW_SOAK_SECONDS:-60}" \
		--state --restart-every 20
fi
# distcheck proves the tarball: it builds from it alone, installs and
# uninstalls cleanly; its check runs the unit suites only, the end-to-end
# ones having run above (and run again under the sanitizers below): 1.8
# minutes rather than 4.6.
stage "make distcheck ($(basename "$bw_build"), unit suites)"
make -C "$bw_build" -j2 distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror \
	TESTS="tests/check_frame tests/check_state tests/check_sim"
# Under ASan and UBSan the daemon runs two to three times slower, and the
# end-to-end suites' real-clock margins (50 ms) were met only most of the
# time (test_ten_thousand_clients: fires 150-320 ms late at the wheel in 3
# of 4 runs on a 2-core machine): the sanitizer run checks memory safety,
# so its waits and margins scale by 4, as check-valgrind's scale by 20.
export BW_TEST_SLOW=${BW_TEST_SLOW:-4}
# pip, venv and mypy (test_packaging.py) checked the package above; here
# they would only add 75 s.
export BW_TEST_PACKAGING=0
check_tree "$bw_san"
# Bounded libFuzzer run (tests/fuzz.mk) when configure found clang with
# libFuzzer in the build-test configuration: 10 s a target, as CI's whole
# run (.ci/run, with the install test and the package built with tests)
# took some 50 minutes with issue 22's suites and 20 s; longer runs are
# `make fuzz-run FUZZ_SECONDS=N` by hand.
if fuzz_available; then
	stage "fuzz: make fuzz-run FUZZ_SECONDS=10 ($(basename "$bw_build"))"
	make -C "$bw_build" fuzz-run FUZZ_SECONDS=10
else
	stage "fuzz: skipped: configure found no clang with libFuzzer (install clang libclang-rt-14-dev)"
fi
show_check_results "$bw_build"
show_check_results "$bw_san"
stage "test.sh: done"
