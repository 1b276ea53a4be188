# shellcheck shell=bash
# Sourced by quickstart.sh and test.sh, so both install the same packages
# and bootstrap the build the same way.

bw_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Debian 12 packages the build, every configure check and the tests need
# (systemd brings systemd-analyze and systemd-socket-activate; clang and
# libclang-rt-14-dev the libFuzzer targets of make fuzz; python3-* and
# protobuf-compiler the Python package, bindings/python (pip builds it
# with python3-setuptools and python3-wheel; its test_packaging.py makes
# the sdist and the wheel with python3-build and type-checks with mypy;
# protoc checks its committed generated modules); debhelper, dh-python,
# dpkg-dev, fakeroot and lintian the Debian package of build-aux/deb.sh;
# mandoc the manual pages' lint, tests/check_man.sh; bash-completion the
# directory (pkg-config) for bwctl's completion;
# libev-dev, libuv1-dev and libglib2.0-dev the loops tests/check_adapters
# drives the client's adapters with (libevent's is above; without them
# their TCases are left out);
# prometheus the promtool that check_bwctl's metrics test runs on bwctl
# metrics' output; prometheus-node-exporter and curl the node_exporter that
# monitoring-test.sh scrapes).
bw_packages=(
	build-essential autoconf automake libtool pkg-config
	libevent-dev libprotobuf-c-dev protobuf-c-compiler libsystemd-dev check
	libev-dev libuv1-dev libglib2.0-dev
	systemd clang libclang-rt-14-dev
	python3 python3-protobuf python3-pytest python3-pip protobuf-compiler
	python3-setuptools python3-wheel python3-build mypy
	debhelper dh-python dpkg-dev fakeroot lintian mandoc bash-completion
	prometheus prometheus-node-exporter curl
)

# Install only what is missing, so a ready machine needs neither root nor
# the network.
bw_install_missing() {
	local pkg missing=()

	for pkg in "${bw_packages[@]}"; do
		# ${Status} is dpkg-query's field name, not a shell expansion.
		# shellcheck disable=SC2016
		if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
			missing+=("$pkg")
		fi
	done
	[ "${#missing[@]}" -eq 0 ] && return 0

	if [ "$(id -u)" -ne 0 ]; then
		echo "missing Debian packages: ${missing[*]}; rerun as root to install them" >&2
		return 1
	fi
	echo "installing missing Debian packages: ${missing[*]}"
	apt-get update
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

# Once configure and Makefile.in exist, the generated Makefiles rerun the
# autotools themselves whenever configure.ac or a fragment changes; both are
# checked because a failed autoreconf can leave configure alone.
bw_bootstrap() {
	if [ ! -x "$bw_root/configure" ] || [ ! -f "$bw_root/Makefile.in" ]; then
		(cd "$bw_root" && autoreconf -fi)
	fi
}

# A copy of the tree in DEST: tracked and new (not ignored) files, as
# they are in the working tree, so that a build or an install test there
# leaves the checkout clean (deb.sh, install-test.sh).
bw_copy_tree() {
	local dest=$1 f

	git -C "$bw_root" rev-parse --git-dir >/dev/null 2>&1 || {
		echo "$bw_root is not a git checkout: cannot tell its files from build products" >&2
		return 1
	}
	mkdir -p "$dest"
	(cd "$bw_root" && git ls-files -z --cached --others --exclude-standard) |
		while IFS= read -r -d '' f; do
			[ -e "$bw_root/$f" ] && printf '%s\0' "$f"
		done |
		(cd "$bw_root" && tar --null -T - -cf -) | tar -xf - -C "$dest"
}

# Out-of-tree: the source tree stays free of build products, and quickstart
# and test builds with different flags live side by side.
bw_configure() {
	local dir=$1
	shift
	mkdir -p "$dir"
	(cd "$dir" && "$bw_root/configure" "$@")
}

# The build a benchmark script uses, printed: DIR when given (configured
# if it is not yet), else the source tree when it is configured in place,
# else bench/build.  A build with sanitizers gets a warning: its timings
# mean little.  $2 names the script in the warning.
bw_bench_build() {
	local build=$1 who=$2

	if [ -z "$build" ] && [ -f "$bw_root/Makefile" ]; then
		build=$bw_root
	fi
	build=${build:-$bw_root/bench/build}
	if [ ! -f "$build/Makefile" ]; then
		bw_bootstrap >&2
		bw_configure "$build" >&2
	fi
	if grep -q -- '-fsanitize' "$build/config.status" 2>/dev/null; then
		echo "$who: WARNING: $build is configured with sanitizers; timings mean little" >&2
	fi
	echo "$build"
}

# Optional, for the benchmarks only: the wheel benchmark's peers
# (bench/run-wheel.sh: libev, libuv, libbsd's tree.h; libevent is above),
# gnuplot for its charts and valgrind for its instruction counts; the
# service benchmark's (bench/run-service.sh): redis-server and hiredis;
# bench/run-python.sh's: redis-server and python3-redis.
bw_bench_packages=(
	libev-dev libuv1-dev libbsd-dev gnuplot-nox valgrind
	redis-server libhiredis-dev python3-redis
)

# bw_install_missing over the build's packages and the benchmark's.
bw_bench_install_missing() {
	# bw_install_missing reads bw_packages; this local shadows it.
	local bw_packages=("${bw_packages[@]}" "${bw_bench_packages[@]}")

	bw_install_missing
}
