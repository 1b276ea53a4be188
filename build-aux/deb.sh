#!/usr/bin/env bash
# The Debian package: builds the binary packages of debian/ with
# dpkg-buildpackage in a copy of the tree (the repository stays clean),
# runs lintian on them, then, as root, installs them on this machine,
# checks what they put in place, and purges them again.  The packages are
# left in build-deb/.  Exits non-zero on any failure.
#
#   build-aux/deb.sh                   build, lintian, install test
#   build-aux/deb.sh --no-install      build and lintian only
#   build-aux/deb.sh --update-symbols  build and rewrite debian/*.symbols
#                                      from the libraries just built
set -euo pipefail

# shellcheck source=build-aux/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

bw_out=$bw_root/build-deb
# The binary packages, from debian/control.  The library packages' names
# follow the SONAMEs (debian/rules checks them against the built
# libraries): libfooN holds libfoo.so.N.
mapfile -t bw_debs < <(sed -n 's/^Package: *//p' "$bw_root/debian/control")

# lintian tags tolerated at warning or error level, each with the reason.
# Empty today: a new tag fails the run until it is fixed, or justified
# here or in a commented debian/*.lintian-overrides.
bw_lintian_allowed=(
)

bw_install=yes
bw_update_symbols=no
for arg in "$@"; do
	case $arg in
	--no-install) bw_install=no ;;
	--update-symbols) bw_update_symbols=yes bw_install=no ;;
	*) echo "usage: $0 [--no-install | --update-symbols]" >&2; exit 2 ;;
	esac
done

bw_tmp=
bw_installed=no
bw_group_before=
bw_fake_systemd=no
cleanup() {
	if [ "$bw_installed" = yes ]; then
		purge_packages || true
	fi
	[ "$bw_fake_systemd" = no ] || rmdir /run/systemd/system 2>/dev/null || true
	[ -n "$bw_tmp" ] && rm -rf "$bw_tmp"
	return 0
}
trap cleanup EXIT

# The version lives in configure.ac; debian/changelog must follow it.
check_version() {
	local upstream deb

	upstream=$(sed -n 's/^AC_INIT(\[bitwheel\], \[\([^]]*\)\].*/\1/p' "$bw_root/configure.ac")
	deb=$(dpkg-parsechangelog -l "$bw_root/debian/changelog" -S Version)
	if [ "$upstream" != "$deb" ]; then
		echo "deb.sh: configure.ac says $upstream, debian/changelog $deb:" \
			"add a changelog entry (dch -v $upstream)" >&2
		exit 1
	fi
	echo "$deb"
}

# dpkg-buildpackage in $bw_tmp (mktemp's: 0700, so only root enters it),
# the packages in $bw_out, with the test suite on as dh runs it, but a
# subset: build-aux/test.sh has just run the whole suite (and more) on
# this tree, and a second run would double CI's longest step.  The subset
# (BW_DEB_TESTS, debian/rules) is the unit suites and the Python suites
# that run things as another uid, which must skip, saying so, where that
# uid cannot reach the build; BW_DEB_TESTS= (empty) runs the whole suite.
: "${BW_DEB_TESTS=tests/check_frame tests/check_state bindings/python/tests/test_client.py bindings/python/tests/test_errors.py}"
export BW_DEB_TESTS
build_packages() {
	local version=$1 src

	src=$bw_tmp/bitwheel-$version
	bw_copy_tree "$src"
	echo "== dpkg-buildpackage -us -uc -b (in $src)"
	# --update-symbols: dh_makeshlibs' -c4 (debian/rules) would stop
	# the build at the first difference; this level only reports them.
	[ "$bw_update_symbols" = no ] || export DPKG_GENSYMBOLS_CHECK_LEVEL=0
	if ! (cd "$src" && DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" \
		dpkg-buildpackage -us -uc -b); then
		echo "deb.sh: dpkg-buildpackage failed.  If dpkg-gensymbols printed a diff," \
			"the libraries' exported symbols changed: when that is meant, run" \
			"build-aux/deb.sh --update-symbols and commit debian/*.symbols" \
			"(a symbol removed or changed also needs a new SONAME:" \
			"-version-info in wheel/local.mk or client/local.mk)" >&2
		exit 1
	fi
	rm -rf "$bw_out"
	mkdir -p "$bw_out"
	cp "$bw_tmp"/*.deb "$bw_tmp"/*.changes "$bw_tmp"/*.buildinfo "$bw_out"/
	[ "$bw_update_symbols" = no ] || update_symbols "$src" "$version"
}

# Symbols files from the libraries just built: a symbol already listed
# keeps its version, a new one gets this version.
update_symbols() {
	local src=$1 version=$2 pkg template

	for pkg in "${bw_debs[@]}"; do
		[[ $pkg =~ ^lib.*[0-9]$ ]] || continue
		template=$bw_root/debian/$pkg.symbols
		(cd "$src" && dpkg-gensymbols -q -c0 -p"$pkg" -P"debian/$pkg" -v"$version" \
			${template:+$( [ -f "$template" ] && echo "-I$template")} \
			-O"$bw_tmp/$pkg.symbols")
		cp "$bw_tmp/$pkg.symbols" "$template"
		echo "deb.sh: wrote debian/$pkg.symbols"
	done
}

run_lintian() {
	local changes suppress=() status=0

	changes=$(ls "$bw_out"/*.changes)
	if [ "${#bw_lintian_allowed[@]}" -gt 0 ]; then
		suppress=(--suppress-tags "$(IFS=,; echo "${bw_lintian_allowed[*]}")")
	fi
	echo "== lintian $(basename "$changes")"
	lintian --fail-on error,warning --display-info --show-overrides \
		"${suppress[@]}" "$changes" | tee "$bw_tmp/lintian.txt" || status=$?
	echo "lintian: $(grep -c '^E:' "$bw_tmp/lintian.txt") errors," \
		"$(grep -c '^W:' "$bw_tmp/lintian.txt") warnings," \
		"$(grep -c '^I:' "$bw_tmp/lintian.txt") info," \
		"$(grep -c '^O:' "$bw_tmp/lintian.txt") overridden," \
		"${#bw_lintian_allowed[@]} tags tolerated by this script"
	if [ "$status" -ne 0 ]; then
		echo "deb.sh: lintian failed: fix the errors and warnings above, or" \
			"justify a tag in bw_lintian_allowed or debian/*.lintian-overrides" >&2
		exit 1
	fi
}

purge_packages() {
	echo "== dpkg --purge ${bw_debs[*]}"
	dpkg --purge "${bw_debs[@]}"
	bw_installed=no
	# Debian never removes a system group on purge; the test leaves the
	# machine as it found it.
	if [ -z "$bw_group_before" ] && getent group bitwheel >/dev/null; then
		groupdel bitwheel
	fi
}

fail() {
	echo "deb.sh: install test: $*" >&2
	exit 1
}

# What the maintainer scripts ask of a running systemd: deb-systemd-invoke
# (start, stop, restart) through a logging wrapper first in PATH (dpkg
# passes PATH on to the scripts), its calls in $bw_tmp/invoked.  The
# scripts call it only where systemd runs (/run/systemd/system); where it
# does not, as in a container, that directory stands in while the test
# runs, and the wrapper only logs, as does one of systemctl for
# daemon-reload, the one call that needs the bus (systemctl preset, which
# deb-systemd-helper runs on a first install, works without it), so that
# the upgrade and removal paths run as on a live system.
systemd_wrappers() {
	local fake=

	mkdir -p "$bw_tmp/shim"
	if [ ! -d /run/systemd/system ]; then
		mkdir -p /run/systemd/system
		bw_fake_systemd=yes
		fake='exit 0'
	fi
	printf '#!/bin/sh\necho "deb-systemd-invoke $*" >>"%s"\n%s\nexec /usr/bin/deb-systemd-invoke "$@"\n' \
		"$bw_tmp/invoked" "$fake" >"$bw_tmp/shim/deb-systemd-invoke"
	printf '#!/bin/sh\ncase " $* " in *" daemon-reload "*) %s ;; esac\nexec /usr/bin/systemctl "$@"\n' \
		"${fake:-:}" >"$bw_tmp/shim/systemctl"
	chmod 755 "$bw_tmp/shim/deb-systemd-invoke" "$bw_tmp/shim/systemctl"
}

# Run dpkg with the wrappers; what it invoked then is in $bw_tmp/invoked.
dpkg_logged() {
	: >"$bw_tmp/invoked"
	PATH=$bw_tmp/shim:$PATH dpkg "$@"
}

# bitwheeld from the package on a socket of its own, and bwctl and a
# program built against the -dev packages talking to it.
try_installed() {
	local sock=$bw_tmp/bw.sock pid status=0

	cat >"$bw_tmp/try.c" <<'EOF'
#include <stdio.h>
#include <bitwheel.h>
#include <bitwheel-client.h>

int main(void)
{
	printf("libbitwheel-client %s, wheel preset %s\n", bwc_version(),
	       bw_preset_name(BW_PRESET_BALANCED));
	return 0;
}
EOF
	# shellcheck disable=SC2046
	cc -o "$bw_tmp/try" "$bw_tmp/try.c" \
		$(pkg-config --cflags --libs libbitwheel-client libbitwheel) ||
		fail "a program does not build against libbitwheel-dev and libbitwheel-client-dev"
	"$bw_tmp/try" || fail "a program built against the -dev packages does not run"

	timeout 30 bitwheeld --socket "$sock" 2>"$bw_tmp/bitwheeld.log" &
	pid=$!
	for _ in $(seq 50); do
		[ -S "$sock" ] && break
		sleep 0.1
	done
	timeout 10 bwctl --socket "$sock" schedule --key 1 --in 10ms --payload deb || status=$?
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	[ "$status" -eq 0 ] || { cat "$bw_tmp/bitwheeld.log" >&2; fail "bwctl schedule against the installed bitwheeld failed"; }
	echo "installed bitwheeld and bwctl: a timer scheduled and fired"
}

install_test() {
	local pkg multiarch f debs=()

	for pkg in "${bw_debs[@]}"; do
		# shellcheck disable=SC2016
		if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ]; then
			fail "$pkg is installed already; purge it first (the test purges what it installs)"
		fi
	done
	bw_group_before=$(getent group bitwheel || true)
	[ -z "$bw_group_before" ] ||
		echo "deb.sh: note: group bitwheel exists already; its creation cannot be checked"

	# The packages of bw_debs; the -dbgsym ones stay out.
	for pkg in "${bw_debs[@]}"; do
		debs+=("$(ls "$bw_out/${pkg}_"*.deb)")
	done
	echo "== dpkg -i ${debs[*]#"$bw_out/"}"
	bw_installed=yes
	systemd_wrappers
	dpkg_logged -i "${debs[@]}"
	! grep -q 'start.*bitwheel-metrics' "$bw_tmp/invoked" ||
		fail "the install started the metrics timer: $(grep metrics "$bw_tmp/invoked")"

	multiarch=$(dpkg-architecture -q DEB_HOST_MULTIARCH)
	for f in /usr/sbin/bitwheeld /usr/bin/bwctl \
		/lib/systemd/system/bitwheeld.socket /lib/systemd/system/bitwheeld.service \
		/lib/systemd/system/bitwheel-metrics.service \
		/lib/systemd/system/bitwheel-metrics.timer \
		/usr/lib/sysusers.d/bitwheel.conf /etc/default/bitwheeld \
		/usr/share/bash-completion/completions/bwctl \
		/usr/share/doc/bitwheeld/PROTOCOL.md.gz /usr/share/doc/bitwheeld/README.md.gz \
		/usr/share/doc/bitwheeld/doc/install.md.gz \
		/usr/share/bitwheel/bitwheel.proto \
		/usr/lib/python3/dist-packages/bitwheel/__init__.py \
		/usr/lib/python3/dist-packages/bitwheel/bitwheel_pb2.py \
		/usr/share/man/man8/bitwheeld.8.gz /usr/share/man/man1/bwctl.1.gz \
		/usr/include/bitwheel.h /usr/include/bitwheel-client.h \
		"/usr/lib/$multiarch/pkgconfig/libbitwheel.pc" \
		"/usr/lib/$multiarch/pkgconfig/libbitwheel-client.pc"; do
		[ -e "$f" ] || fail "$f is missing"
	done
	for pkg in "${bw_debs[@]}"; do
		[[ $pkg =~ ^(lib.*[^0-9])([0-9]+)$ ]] || continue
		f=/usr/lib/$multiarch/${BASH_REMATCH[1]}.so.${BASH_REMATCH[2]}
		[ -e "$f" ] || fail "$f (package $pkg) is missing"
	done
	! ls "/usr/lib/$multiarch"/libbitwheel*.la 2>/dev/null || fail "a .la file is installed"
	echo "installed files: all present"

	getent group bitwheel >/dev/null || fail "group bitwheel does not exist after install"
	echo "group bitwheel: $(getent group bitwheel)"

	# The Debian way: the socket enabled (started too when systemd runs),
	# the service only through it.
	[ -L /etc/systemd/system/sockets.target.wants/bitwheeld.socket ] ||
		fail "bitwheeld.socket is not enabled"
	if find /etc/systemd/system -name bitwheeld.service | grep . >/dev/null; then
		fail "bitwheeld.service is enabled on its own"
	fi
	if find /etc/systemd/system -name 'bitwheel-metrics.*' | grep . >/dev/null; then
		fail "the metrics timer is enabled: it must be off by default"
	fi
	echo "units: bitwheeld.socket enabled, bitwheeld.service and bitwheel-metrics.timer not"

	bitwheeld --version || fail "bitwheeld --version failed"
	bwctl --version || fail "bwctl --version failed"
	# Debian's python3, from anywhere: the package and its generated
	# modules (protobuf messages, one exception class per error code).
	(cd / && /usr/bin/python3 -c 'import bitwheel; print("python3: bitwheel", bitwheel.__version__, bitwheel.Client.__name__, bitwheel.TooManyTimersError.__name__)') ||
		fail "python3 cannot import the installed bitwheel package"
	try_installed

	# The same packages again: the maintainer scripts' upgrade path
	# (preinst upgrade, prerm upgrade, postinst configure OLD-VERSION)
	# must keep the socket enabled, the group, and the metrics timer as
	# an administrator left it: enabled and running stays so.
	# --root: offline, as an administrator's enable would be without the bus.
	systemctl --root=/ enable bitwheel-metrics.timer
	echo "== dpkg -i again (the upgrade path), the metrics timer enabled"
	dpkg_logged -i "${debs[@]}" >/dev/null
	[ -L /etc/systemd/system/sockets.target.wants/bitwheeld.socket ] ||
		fail "bitwheeld.socket is no longer enabled after a reinstall"
	getent group bitwheel >/dev/null || fail "group bitwheel is gone after a reinstall"
	[ -L /etc/systemd/system/timers.target.wants/bitwheel-metrics.timer ] ||
		fail "the metrics timer is no longer enabled after an upgrade"
	! grep -q 'stop.*bitwheel-metrics' "$bw_tmp/invoked" ||
		fail "the upgrade stopped the metrics timer: $(grep metrics "$bw_tmp/invoked")"
	echo "reinstalled: socket still enabled, group still there, metrics timer enabled and not stopped"

	echo "== dpkg -r bitwheel-tools"
	dpkg_logged -r bitwheel-tools >/dev/null
	grep -q 'deb-systemd-invoke stop.*bitwheel-metrics.timer' "$bw_tmp/invoked" ||
		fail "removing bitwheel-tools did not stop the metrics timer"
	if [ -e /etc/systemd/system/timers.target.wants/bitwheel-metrics.timer ] ||
		[ -L /etc/systemd/system/timers.target.wants/bitwheel-metrics.timer ]; then
		fail "the metrics timer is still enabled after bitwheel-tools was removed"
	fi
	echo "removed bitwheel-tools: metrics timer stopped and no longer enabled"

	# What the service kept (StateDirectory= under DynamicUser=) goes on
	# purge; a stand-in, as systemd is not asked to start it here.
	mkdir -p /var/lib/private/bitwheel
	: >/var/lib/private/bitwheel/snapshot
	[ -e /var/lib/bitwheel ] || ln -s private/bitwheel /var/lib/bitwheel
	PATH=$bw_tmp/shim:$PATH purge_packages
	[ "$bw_fake_systemd" = no ] || rmdir /run/systemd/system
	bw_fake_systemd=no
	for f in /usr/sbin/bitwheeld /etc/systemd/system/sockets.target.wants/bitwheeld.socket \
		/etc/systemd/system/timers.target.wants/bitwheel-metrics.timer \
		/var/lib/private/bitwheel /var/lib/bitwheel; do
		if [ -e "$f" ] || [ -L "$f" ]; then
			fail "$f is still there after purge"
		fi
	done
	echo "purged: nothing left, the service's state directory included"
}

bw_install_missing
version=$(check_version)
bw_tmp=$(mktemp -d)
build_packages "$version"
if [ "$bw_update_symbols" = yes ]; then
	git -C "$bw_root" diff --stat -- debian/*.symbols
	exit 0
fi
run_lintian
if [ "$bw_install" = no ]; then
	echo "== install test: skipped (--no-install)"
elif [ "$(id -u)" -ne 0 ]; then
	echo "== install test: skipped: it installs the packages on this machine, which needs root"
else
	install_test
fi
echo "deb.sh: ok: packages in $bw_out"
