# shellcheck shell=bash
# servers.sh - the servers a benchmark script measures against, sourced by
# bench/run-service.sh and bench/run-python.sh: a bitwheeld and a
# redis-server (--port 0, no persistence) on Unix sockets in a temporary
# directory of their own, both stopped and the directory removed however
# the script ends (EXIT trap; INT and TERM exit 130 through it).
#
#   bw_servers_init WHO     WHO names the calling script in messages;
#                           sets bw_servers_tmp
#   bw_start_bitwheeld BUILD
#                           BUILD/daemon/bitwheeld on $bw_servers_tmp/bw.sock;
#                           ends the script when it does not come up
#   bw_start_redis WHAT     redis-server on $bw_servers_tmp/redis.sock;
#                           status 1 and a note naming WHAT (what the run
#                           goes without) when it is missing or fails
#   bw_spawn_redis SOCK DIR ARGS...
#                           a redis-server of the caller's (no trap)
#
# bw_pid and redis_pid hold the two processes (the libtool wrapper execs
# the daemon, so bw_pid is the daemon's own pid).

bw_servers_init() {
	bw_servers_who=$1
	bw_servers_tmp=$(mktemp -d)
	bw_pid=
	redis_pid=
	trap bw_servers_stop EXIT
	trap 'exit 130' INT TERM
}

bw_servers_stop() {
	local p

	for p in $bw_pid $redis_pid; do
		kill "$p" 2>/dev/null || true
	done
	for p in $bw_pid $redis_pid; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$bw_servers_tmp"
}

# bw_wait_socket PATH PID: until PATH is a socket, for at most 5 s, or
# until PID has died.
bw_wait_socket() {
	for _ in $(seq 50); do
		[ -S "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

bw_start_bitwheeld() {
	"$1/daemon/bitwheeld" --socket "$bw_servers_tmp/bw.sock" \
		>"$bw_servers_tmp/bitwheeld.log" 2>&1 &
	bw_pid=$!
	if ! bw_wait_socket "$bw_servers_tmp/bw.sock" "$bw_pid"; then
		echo "$bw_servers_who: bitwheeld did not start:" >&2
		cat "$bw_servers_tmp/bitwheeld.log" >&2
		exit 1
	fi
}

bw_start_redis() {
	if ! command -v redis-server >/dev/null; then
		echo "$bw_servers_who: redis-server not installed: no $1 (install redis-server)" >&2
		return 1
	fi
	if ! bw_spawn_redis "$bw_servers_tmp/redis.sock" "$bw_servers_tmp" --appendonly no; then
		echo "$bw_servers_who: redis-server did not start: no $1" >&2
		return 1
	fi
}

# bw_spawn_redis SOCK DIR ARGS...: redis-server on SOCK (no TCP, no RDB
# snapshots), its files and DIR/redis.log in DIR, ARGS after (persistence:
# --appendonly, --appendfsync); its pid in redis_pid; status 1 when it
# does not come up.  bench/run-durable.sh starts its AOF peers with it.
bw_spawn_redis() {
	local sock=$1 dir=$2
	shift 2
	redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --save '' \
		--daemonize no --dir "$dir" --logfile "$dir/redis.log" "$@" &
	redis_pid=$!
	bw_wait_socket "$sock" "$redis_pid"
}
