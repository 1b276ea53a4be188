#!/usr/bin/env bash
# doc/install.md's Install section, followed as written, on this machine (root
# only: it installs into /usr and /usr/local, then removes everything it
# installed).  In a copy of the tree, after autoreconf -fi, the section's
# build block runs verbatim (configure for /usr, make, make install); then
# the checks: the files and the group that make install must leave, both
# programs run, the units enable, a user added to the group can reach a
# socket made as bitwheeld.socket makes it and one outside cannot; doc/operating.md's
# Monitoring section (monitoring-test.sh) on that install; and the
# same make install into /usr/local, whose libraries only ldconfig puts
# in ld.so's reach.  Exits non-zero on any failure.
set -euo pipefail

# shellcheck source=build-aux/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "install-test: skipped: it installs into /usr and /usr/local, which needs root"
	exit 0
fi

bw_user=bwinstalltest
bw_local=(prefix=/usr/local systemdsystemunitdir=/usr/local/lib/systemd/system)
bw_tmp=
bw_src=
bw_group_before=$(getent group bitwheel || true)
bw_installed=()
bw_daemon=

fail() {
	echo "install-test: $*" >&2
	exit 1
}

# make uninstall for each install made, then the directories it created
# and left empty, and ld.so's cache.
uninstall() {
	local how dir

	for how in "${bw_installed[@]}"; do
		# shellcheck disable=SC2086
		make -s -C "$bw_src" uninstall $how >/dev/null || true
	done
	# make uninstall leaves directories; the docdir's own first.
	for dir in /usr/share/doc/bitwheel/doc /usr/share/doc/bitwheel/examples \
		/usr/share/doc/bitwheel /usr/share/bitwheel \
		/usr/local/share/doc/bitwheel/doc /usr/local/share/doc/bitwheel/examples \
		/usr/local/share/doc/bitwheel /usr/local/share/bitwheel \
		/usr/local/lib/systemd/system /usr/local/lib/systemd \
		/usr/local/lib/sysusers.d /usr/local/lib/pkgconfig \
		/usr/local/etc/default /usr/local/share/bash-completion/completions \
		/usr/local/share/bash-completion; do
		rmdir "$dir" 2>/dev/null || true
	done
	[ "${#bw_installed[@]}" -eq 0 ] || ldconfig
	bw_installed=()
}

cleanup() {
	[ -z "$bw_daemon" ] || { kill "$bw_daemon" 2>/dev/null; wait "$bw_daemon" 2>/dev/null; }
	uninstall
	rm -f /etc/systemd/system/sockets.target.wants/bitwheeld.socket
	! getent passwd "$bw_user" >/dev/null || userdel "$bw_user"
	if [ -z "$bw_group_before" ] && getent group bitwheel >/dev/null; then
		groupdel bitwheel
	fi
	[ -z "$bw_tmp" ] || rm -rf "$bw_tmp"
	return 0
}
trap cleanup EXIT

# Nothing of a real install is overwritten, then removed.
for f in /usr/sbin/bitwheeld /usr/bin/bwctl /usr/local/sbin/bitwheeld \
	/usr/local/bin/bwctl /lib/systemd/system/bitwheeld.socket \
	/usr/lib/libbitwheel.so /usr/local/lib/libbitwheel.so; do
	[ ! -e "$f" ] || fail "$f exists: bitwheel is installed here already"
done
! getent passwd "$bw_user" >/dev/null || fail "user $bw_user exists already"

bw_install_missing
bw_tmp=$(mktemp -d)
chmod 0755 "$bw_tmp"
bw_src=$bw_tmp/bitwheel
bw_copy_tree "$bw_src"
(cd "$bw_src" && autoreconf -fi >/dev/null 2>&1)

# The first sh block of the Install section.
block=$(awk '/^## Install$/ { s = 1; next } /^## / { s = 0 }
	s && /^```sh$/ { b = 1; next } b && /^```$/ { exit } b' "$bw_root/doc/install.md")
[ -n "$block" ] || fail "doc/install.md has no sh block in its Install section"
echo "== doc/install.md, Install, as written (in a copy of the tree):"
echo "$block"
bw_installed+=("")
(cd "$bw_src" && bash -euo pipefail -c "$block") >"$bw_tmp/install.log" 2>&1 ||
	{ tail -n 40 "$bw_tmp/install.log" >&2; fail "doc/install.md's build block failed"; }
grep '^post-install' "$bw_tmp/install.log"

for f in /usr/sbin/bitwheeld /usr/bin/bwctl /usr/lib/libbitwheel.so \
	/usr/lib/libbitwheel-client.so /usr/include/bitwheel.h \
	/usr/include/bitwheel-client.h /lib/systemd/system/bitwheeld.socket \
	/lib/systemd/system/bitwheeld.service /usr/lib/sysusers.d/bitwheel.conf \
	/lib/systemd/system/bitwheel-metrics.service \
	/lib/systemd/system/bitwheel-metrics.timer \
	/usr/share/doc/bitwheel/PROTOCOL.md /usr/share/doc/bitwheel/README.md \
	/usr/share/doc/bitwheel/doc/install.md \
	/usr/share/bitwheel/bitwheel.proto /usr/share/man/man8/bitwheeld.8 \
	/usr/share/man/man1/bwctl.1 /etc/default/bitwheeld; do
	[ -f "$f" ] || fail "$f is missing after make install"
done
grep -qx 'ExecStart=/usr/sbin/bitwheeld --state-dir /var/lib/bitwheel $BITWHEELD_OPTS' \
	/lib/systemd/system/bitwheeld.service ||
	fail "bitwheeld.service does not start /usr/sbin/bitwheeld"
grep -qx 'EnvironmentFile=-/etc/default/bitwheeld' /lib/systemd/system/bitwheeld.service ||
	fail "bitwheeld.service does not read /etc/default/bitwheeld"
echo "installed files: all present"
getent group bitwheel >/dev/null || fail "make install did not create group bitwheel"
echo "group bitwheel: $(getent group bitwheel)"
/usr/sbin/bitwheeld --version
/usr/bin/bwctl --version

# The section's systemctl block needs a running systemd, which CI has
# not: enabling works on the files alone, and systemd-socket-activate
# stands in for the socket unit, with its group and mode.
systemctl enable bitwheeld.socket
[ -L /etc/systemd/system/sockets.target.wants/bitwheeld.socket ] ||
	fail "systemctl enable bitwheeld.socket made no link"
systemctl disable bitwheeld.socket
echo "systemctl enable bitwheeld.socket: ok"

useradd --system --no-create-home --shell /usr/sbin/nologin "$bw_user"
mkdir "$bw_tmp/run"
chmod 0755 "$bw_tmp/run"
sock=$bw_tmp/run/bitwheeld.sock
timeout 60 systemd-socket-activate -l "$sock" /usr/sbin/bitwheeld \
	>"$bw_tmp/bitwheeld.log" 2>&1 &
bw_daemon=$!
for _ in $(seq 50); do
	[ -S "$sock" ] && break
	sleep 0.1
done
chgrp bitwheel "$sock"
chmod 0660 "$sock"
if runuser -u "$bw_user" -- bwctl --socket "$sock" stats >/dev/null 2>&1; then
	fail "a user outside group bitwheel reached the socket"
fi
usermod -aG bitwheel "$bw_user"
runuser -u "$bw_user" -- timeout 10 bwctl --socket "$sock" stats >/dev/null ||
	{ cat "$bw_tmp/bitwheeld.log" >&2; fail "a member of group bitwheel cannot use the daemon"; }
kill "$bw_daemon"
wait "$bw_daemon" 2>/dev/null || true
bw_daemon=
echo "group bitwheel: a member reaches the daemon, another user does not"

# doc/operating.md's Monitoring section needs this install: it runs here.
echo "== build-aux/monitoring-test.sh"
"$bw_root/build-aux/monitoring-test.sh" || fail "monitoring-test.sh failed"

uninstall
for f in /usr/sbin/bitwheeld /usr/lib/libbitwheel.so \
	/lib/systemd/system/bitwheeld.socket /usr/share/doc/bitwheel; do
	[ ! -e "$f" ] || fail "$f is still there after make uninstall"
done
echo "make uninstall: nothing left in /usr"

# /usr/local, the default prefix: its lib directory is in ld.so's path
# only through the cache, which make install's ldconfig updates.
echo "== make install ${bw_local[*]}"
bw_installed+=("${bw_local[*]}")
make -C "$bw_src" install "${bw_local[@]}" >"$bw_tmp/local.log" 2>&1 ||
	{ tail -n 40 "$bw_tmp/local.log" >&2; fail "make install into /usr/local failed"; }
grep '^post-install' "$bw_tmp/local.log"
grep -q '^post-install: ldconfig: done' "$bw_tmp/local.log" ||
	fail "make install's ldconfig step did not leave /usr/local/bin/bwctl startable"
/usr/local/sbin/bitwheeld --version ||
	fail "/usr/local/sbin/bitwheeld does not start after make install"
/usr/local/bin/bwctl --version
# grep reads all of ldd's output: with -q it would stop at the match and
# ldd, killed by SIGPIPE, would fail the pipeline under pipefail.
ldd /usr/local/bin/bwctl | grep '=> /usr/local/lib/libbitwheel-client\.so' >/dev/null ||
	fail "/usr/local/bin/bwctl does not use /usr/local/lib's library"
for f in /usr/local/lib/systemd/system/bitwheeld.socket /usr/local/lib/sysusers.d/bitwheel.conf; do
	[ -f "$f" ] || fail "$f is missing after make install"
done
echo "/usr/local: runs without a manual ldconfig"

uninstall
for f in /usr/local/sbin/bitwheeld /usr/local/lib/libbitwheel.so \
	/usr/local/share/doc/bitwheel /usr/local/lib/systemd; do
	[ ! -e "$f" ] || fail "$f is still there after make uninstall"
done
echo "install-test: ok (make uninstall left nothing)"
