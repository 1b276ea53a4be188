#!/bin/sh
# check_man.sh - the manual pages lint clean with mandoc -Tlint, style
# messages included, and name configure's release in their .TH line; the
# client's section 3 pages (client/man/) name, in their NAME sections,
# every function of the public client headers: the library's BWC_EXPORT
# ones and the adapters' (client/man/links.sh lists the names).
# Skipped (77) without mandoc (Debian package mandoc, build-aux/common.sh).
set -eu

srcdir=${srcdir:-.}
man3="$srcdir/client/man/*.3"
# shellcheck disable=SC2086
pages="$srcdir/daemon/bitwheeld.8 $srcdir/client/bwctl.1 $(echo $man3)"
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
	grep -q "^\.TH [A-Z_-]* [0-9] [0-9-]* \"bitwheel $version\" " "$page" || {
		echo "check_man: $page: its .TH line does not name bitwheel $version and a date"
		fail=1
	}
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
	sed -n 's/.*BWC_EXPORT [^(]*[ *]\(bwc_[a-z_0-9]*\)(.*/\1/p' \
		"$srcdir/client/bitwheel-client.h"
	# The adapters' functions: static inline, not ending in "_" (the
	# shared part, bitwheel-client-loop.h, is the adapters' own).
	for h in "$srcdir"/client/adapters/bitwheel-client-*.h; do
		case $h in */bitwheel-client-loop.h) continue ;; esac
		sed -n 's/^static inline [^(]*[ *]\(bwc_[a-z_0-9]*[a-z0-9]\)(.*/\1/p' "$h"
	done
} | sort -u >"$tmp/functions"
# shellcheck disable=SC2086
{
	sh "$srcdir/client/man/links.sh" $man3 | cut -d' ' -f1
	for page in $man3; do basename "$page" .3; done
} | sort -u >"$tmp/named"
missing=$(comm -23 "$tmp/functions" "$tmp/named")
if [ -n "$missing" ]; then
	echo "check_man: functions of the client's headers named by no page in client/man/:"
	echo "$missing"
	fail=1
fi
[ "$fail" -eq 0 ] && echo "check_man: $(echo "$pages" | wc -w) pages lint clean;" \
	"$(wc -l <"$tmp/functions") client functions, each on a page"
exit "$fail"
