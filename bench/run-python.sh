#!/usr/bin/env bash
# run-python.sh - the Python client's schedules per second beside redis-py.
#
#   bench/run-python.sh [--quick] [--out DIR] [--no-install] [-- PYBENCH_OPTIONS...]
#
#   1. installs the benchmark's optional Debian packages when run as root
#      (build-aux/common.sh: bw_bench_packages, with python3-redis and
#      redis-server), unless --no-install
#   2. builds daemon/bitwheeld and the Python package: in the tree if it
#      is configured, otherwise out of tree in bench/build (configure must
#      have found Python: see its summary)
#   3. starts bitwheeld and redis-server (--port 0 --save '' --appendonly
#      no) on Unix sockets in a temporary directory
#   4. runs bench/pybench.py against both: DIR/python.md, DIR/python.csv
#   5. stops every server it started, however it ends
#
# DIR: bench/results, or bench/results/quick with --quick (a few seconds).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
quick=
out=
install=yes

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=yes ;;
	--out) out=$2; shift ;;
	--no-install) install= ;;
	--) shift; break ;;
	-h | --help) sed -n '2,16p' "$0"; exit 0 ;;
	*) echo "run-python.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
out=${out:-$here/results${quick:+/quick}}
mkdir -p "$out"

# shellcheck source=build-aux/common.sh
. "$root/build-aux/common.sh"
if [ -n "$install" ]; then
	bw_bench_install_missing || echo "run-python.sh: going on without the missing packages" >&2
fi
build=$(bw_bench_build "" run-python.sh)
make -C "$build" -j2 daemon/bitwheeld bindings/python/stage/.stamp >/dev/null
python=$(sed -n 's/^PYTHON = //p' "$build/Makefile")
if [ -z "$python" ] || ! grep -q '^bw_py_enabled = yes' "$build/Makefile"; then
	echo "run-python.sh: $build was configured without Python (see configure's summary)" >&2
	exit 1
fi

# shellcheck source=bench/servers.sh
. "$here/servers.sh"
bw_servers_init run-python.sh
bw_start_bitwheeld "$build"
args=(--bitwheel "$bw_servers_tmp/bw.sock")
if bw_start_redis "redis-py subjects"; then
	args+=(--redis "$bw_servers_tmp/redis.sock")
fi
if [ -n "$quick" ]; then
	args+=(--count 2000 --serial 500 --rounds 1)
fi

PYTHONPATH="$build/bindings/python/stage" timeout "${BW_BENCH_TIMEOUT:-600}" \
	"$python" "$here/pybench.py" "${args[@]}" --out "$out" "$@"
echo "run-python.sh: see $out/python.md" >&2
