#!/bin/sh
# check_abi.sh - the libraries' exported symbols against their headers and
# version scripts: every function a public header marks BW_EXPORT or
# BWC_EXPORT is in the library's script (wheel/libbitwheel.map,
# client/libbitwheel-client.map) and exported by the built library under
# that script's version, and nothing else is exported; then both public
# headers, with their generated version headers, compile as C99 and C++
# and their version macros agree with configure's version; and so do the
# client's event-loop adapters, as C and C++.  Run by make
# check from the build directory ($srcdir from automake's harness).
set -eu

srcdir=${srcdir:-.}
top_srcdir=$srcdir
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# lib header macro map node
check_lib() {
	lib=$1 header=$2 macro=$3 map=$4 node=$5
	so=$(dirname "$lib")/.libs/$(basename "$lib" .la).so
	if [ ! -f "$so" ]; then
		echo "check_abi: $so not built (a static-only build?): skipped"
		return 0
	fi
	sed -n "s/.*$macro [^(]*[ *]\\([a-z_0-9]*\\)(.*/\\1/p" "$header" | sort >"$tmp/header"
	sed -n '/^[[:space:]]*global:/,/^[[:space:]]*local:/s/^[[:space:]]*\([a-z_0-9]*\);.*/\1/p' "$map" |
		sort >"$tmp/map"
	nm -D --defined-only "$so" | awk '$2 != "A" { print $3 }' | sort >"$tmp/so"
	if ! diff -u "$tmp/header" "$tmp/map" >"$tmp/diff"; then
		echo "check_abi: $header's $macro functions (-) and $map (+) differ:" \
			"list every export in the script (its comment says how)"
		cat "$tmp/diff"
		fail=1
	fi
	if grep -q . "$tmp/so" && ! grep -qv "@@$node\$" "$tmp/so"; then
		sed "s/@@$node\$//" "$tmp/so" >"$tmp/so.bare"
	elif grep -q '@@' "$tmp/so"; then
		echo "check_abi: $so exports symbols outside version $node:"
		grep -v "@@$node\$" "$tmp/so"
		fail=1
		return 0
	else
		# A linker without version scripts: unversioned exports.
		cp "$tmp/so" "$tmp/so.bare"
	fi
	if ! diff -u "$tmp/header" "$tmp/so.bare" >"$tmp/diff"; then
		echo "check_abi: $header's $macro functions (-) and $so's exports (+) differ:"
		cat "$tmp/diff"
		fail=1
	fi
	echo "check_abi: $(wc -l <"$tmp/header") exports of $so, all in $node"
}

check_lib wheel/libbitwheel.la "$top_srcdir/wheel/bitwheel.h" BW_EXPORT \
	"$top_srcdir/wheel/libbitwheel.map" BITWHEEL_0
check_lib client/libbitwheel-client.la "$top_srcdir/client/bitwheel-client.h" BWC_EXPORT \
	"$top_srcdir/client/libbitwheel-client.map" BITWHEEL_CLIENT_2

# The headers as a program outside the tree sees them, in C99 and C++.
version=$(sed -n 's/^PACKAGE_VERSION = //p' Makefile)
cat >"$tmp/use.c" <<EOC
#include "bitwheel.h"
#include "bitwheel-client.h"
#define STR_(x) #x
#define STR(x) STR_(x)
#if BW_VERSION_NUMBER != BW_VERSION_AT(BW_VERSION_MAJOR, BW_VERSION_MINOR, BW_VERSION_PATCH) || \\
	BWC_VERSION_NUMBER != BW_VERSION_NUMBER
#error "version macros disagree"
#endif
static const char a[] = BW_VERSION_STRING, b[] = BWC_VERSION_STRING,
	c[] = STR(BW_VERSION_MAJOR) "." STR(BW_VERSION_MINOR) "." STR(BW_VERSION_PATCH);
static const char want[] = "$version";
int main(void)
{
	return !(sizeof(a) == sizeof(want) && sizeof(b) == sizeof(want) &&
		 sizeof(c) == sizeof(want));
}
EOC
incs="-I$top_srcdir/wheel -I$top_srcdir/client -Iwheel -Iclient"
# shellcheck disable=SC2086
${CC:-cc} -std=c99 -pedantic -Wall -Wextra -Werror $incs "$tmp/use.c" -o "$tmp/use" &&
	"$tmp/use" || { echo "check_abi: the headers fail as C99, or their version is not $version"; fail=1; }
if command -v "${CXX:-c++}" >/dev/null 2>&1; then
	cp "$tmp/use.c" "$tmp/use.cc"
	# shellcheck disable=SC2086
	"${CXX:-c++}" -std=c++11 -pedantic -Wall -Wextra -Werror $incs "$tmp/use.cc" -o "$tmp/usexx" &&
		"$tmp/usexx" || { echo "check_abi: the headers fail as C++"; fail=1; }
else
	echo "check_abi: no C++ compiler: the C++ check skipped"
fi

# The event-loop adapters (client/adapters/), header-only: each compiles
# alone as C (gnu99: uv.h needs POSIX types) and C++, where its loop's
# header is installed.
for loop in libevent:event2/event.h libev:ev.h libuv:uv.h glib:glib.h; do
	name=${loop%%:*}
	# GLib's header is in a directory of its own.
	flags=$(pkg-config --cflags glib-2.0 2>/dev/null || :)
	printf '#include <%s>\nint main(void) { return 0; }\n' "${loop#*:}" >"$tmp/has.c"
	# shellcheck disable=SC2086
	if ! ${CC:-cc} $flags -c "$tmp/has.c" -o "$tmp/has.o" 2>/dev/null; then
		echo "check_abi: ${loop#*:} not found: the $name adapter not compiled"
		continue
	fi
	printf '#include "bitwheel-client-%s.h"\nint main(void) { return 0; }\n' "$name" >"$tmp/adapter.c"
	cp "$tmp/adapter.c" "$tmp/adapter.cc"
	# shellcheck disable=SC2086
	${CC:-cc} -std=gnu99 -pedantic -Wall -Wextra -Werror $incs $flags \
		-I"$top_srcdir/client/adapters" -c "$tmp/adapter.c" -o "$tmp/adapter.o" ||
		{ echo "check_abi: bitwheel-client-$name.h fails as C"; fail=1; }
	if command -v "${CXX:-c++}" >/dev/null 2>&1; then
		# shellcheck disable=SC2086
		"${CXX:-c++}" -std=c++11 -Wall -Wextra -Werror $incs $flags \
			-I"$top_srcdir/client/adapters" -c "$tmp/adapter.cc" -o "$tmp/adapter.o" ||
			{ echo "check_abi: bitwheel-client-$name.h fails as C++"; fail=1; }
	fi
done
[ "$fail" -eq 0 ] && echo "check_abi: headers, scripts and libraries agree (version $version)"
exit "$fail"
