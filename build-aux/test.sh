#!/usr/bin/env bash
# The test command: a fresh -Werror build, the Check suites, then distcheck.
# Exits non-zero on any failure.
set -euo pipefail

# shellcheck source=build-aux/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bw_build=$bw_root/build-test

# Check writes its summary ("100%: Checks: N, Failures: 0, Errors: 0") into
# each test's log, where the automake harness keeps it; bring those lines,
# and the whole log of a failed program, to the console, then one total.
show_check_results() {
	local log trs summary passed=0 failed=0 n f e
	local re='^[0-9]+%: Checks: ([0-9]+), Failures: ([0-9]+), Errors: ([0-9]+)'

	echo
	echo "== Check results"
	for log in "$bw_build"/tests/*.log; do
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
		else
			# A program that died before its summary counts as one failure.
			failed=$((failed + 1))
		fi
	done
	echo
	echo "checks: $passed passed, $failed failed"
}

bw_install_missing
bw_bootstrap
# From scratch, as in CI's fresh clone: objects built earlier under other
# CFLAGS are not recompiled when flags change, and could hide a warning.
rm -rf "$bw_build"
bw_configure "$bw_build" --enable-werror
make -C "$bw_build" -j2

status=0
make -C "$bw_build" -j2 check || status=$?
if [ "$status" -ne 0 ]; then
	show_check_results
	exit "$status"
fi

make -C "$bw_build" -j2 distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror
show_check_results
