#!/bin/sh
# check_man.sh - the manual pages lint clean with mandoc -Tlint, style
# messages included, and name configure's release in their .TH line.
# Skipped (77) without mandoc (Debian package mandoc, build-aux/common.sh).
set -eu

srcdir=${srcdir:-.}
pages="$srcdir/daemon/bitwheeld.8 $srcdir/client/bwctl.1"
version=$(sed -n 's/^PACKAGE_VERSION = //p' Makefile)
fail=0

if ! command -v mandoc >/dev/null 2>&1; then
	echo "check_man: mandoc not installed: skipped"
	exit 77
fi
for page in $pages; do
	if ! out=$(mandoc -Tlint -Wstyle "$page" 2>&1) || [ -n "$out" ]; then
		echo "check_man: $page:"
		echo "$out"
		fail=1
	fi
	grep -q "^\.TH [A-Z]* [0-9] [0-9-]* \"bitwheel $version\" " "$page" || {
		echo "check_man: $page: its .TH line does not name bitwheel $version and a date"
		fail=1
	}
done
[ "$fail" -eq 0 ] && echo "check_man: $pages lint clean"
exit "$fail"
