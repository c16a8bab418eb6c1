#!/usr/bin/env bash
# Trillian v1.8.0 (log server + log signer) on PostgreSQL storage, for the
# audit log tests. "start" builds the binaries once into a cache directory,
# creates a fresh database with Trillian's schema, starts both processes on
# free loopback ports, creates one PREORDERED_LOG tree and appends to
# $LETHE_CI_ENV:
#
#   LETHE_TEST_TRILLIAN_ADDR          log server gRPC address (log + admin API)
#   LETHE_TEST_TRILLIAN_TREE_ID       a PREORDERED_LOG tree created for this run
#   LETHE_TEST_TRILLIAN_BIN_DIR       trillian_log_server, trillian_log_signer, createtree
#   LETHE_TEST_TRILLIAN_SCHEMA        storage.sql, to load into databases of private stacks
#   LETHE_TEST_TRILLIAN_PG_URI        --postgresql_uri of this run's database
#   LETHE_TEST_TRILLIAN_SERVER_ARGS   the log server's flags
#   LETHE_TEST_TRILLIAN_SIGNER_ARGS   the signer's flags (to restart it by hand)
#
# "stop" kills both processes and drops the database. Logs and pid files are
# left in $LETHE_CI_DIR.
set -euo pipefail
: "${LETHE_CI_DIR:?}" "${LETHE_CI_ENV:?}"

version=v1.8.0
bin_dir="${LETHE_TRILLIAN_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lethe-ci/bin}"
pg_host=127.0.0.1
pg_port=5432
pg_user=postgres
db_file="$LETHE_CI_DIR/trillian.db"
server_pid="$LETHE_CI_DIR/trillian_log_server.pid"
signer_pid="$LETHE_CI_DIR/trillian_log_signer.pid"

psql_admin() {
	psql -h "$pg_host" -p "$pg_port" -U "$pg_user" -d postgres -v ON_ERROR_STOP=1 -qAt "$@"
}

# install builds the three binaries once; a stamp file records the version so
# a later version bump rebuilds. Runs outside any module so lethe's go.mod is
# neither read nor touched.
install() {
	local stamp="$bin_dir/.trillian-$version"
	if [ -f "$stamp" ] && [ -x "$bin_dir/trillian_log_server" ] &&
		[ -x "$bin_dir/trillian_log_signer" ] && [ -x "$bin_dir/createtree" ]; then
		return
	fi
	mkdir -p "$bin_dir"
	echo "ci: building trillian $version into $bin_dir (first time: about 2 minutes)" >&2
	(cd / && GOFLAGS=-mod=mod GOBIN="$bin_dir" go install \
		"github.com/google/trillian/cmd/trillian_log_server@$version" \
		"github.com/google/trillian/cmd/trillian_log_signer@$version" \
		"github.com/google/trillian/cmd/createtree@$version")
	touch "$stamp"
}

# schema prints the path of Trillian's PostgreSQL schema, downloading the
# module into the module cache if it is not there.
schema() {
	local dir
	dir="$(go env GOMODCACHE)/github.com/google/trillian@$version"
	if [ ! -f "$dir/storage/postgresql/schema/storage.sql" ]; then
		dir="$(cd / && GOFLAGS=-mod=mod go mod download -json "github.com/google/trillian@$version" |
			sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
	fi
	echo "$dir/storage/postgresql/schema/storage.sql"
}

# free_port prints a loopback TCP port nobody listens on (a start that loses
# the race to another process is retried by start_proc).
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# healthz succeeds if http://$1/healthz answers 200 (bash's /dev/tcp: no
# curl needed).
healthz() {
	local line
	(
		exec 3<>"/dev/tcp/${1%:*}/${1##*:}" &&
			printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" >&3 &&
			IFS= read -r -t 2 line <&3 && [[ $line == HTTP/*" 200"* ]]
	) 2>/dev/null
}

# wait_healthy waits for $1's /healthz while pid $2 lives (30 s at most).
wait_healthy() {
	local addr=$1 pid=$2
	for _ in $(seq 1 300); do
		kill -0 "$pid" 2>/dev/null || return 1
		healthz "$addr" && return 0
		sleep 0.1
	done
	return 1
}

# start_proc NAME PIDFILE ARGS...: starts $bin_dir/NAME with ARGS plus free
# --rpc_endpoint/--http_endpoint ports, retrying on a port clash, and prints
# "rpc_addr http_addr".
start_proc() {
	local name=$1 pidfile=$2
	shift 2
	local attempt rpc http pid
	for attempt in 1 2 3 4 5; do
		rpc="127.0.0.1:$(free_port)"
		http="127.0.0.1:$(free_port)"
		"$bin_dir/$name" "$@" --rpc_endpoint="$rpc" --http_endpoint="$http" \
			>>"$LETHE_CI_DIR/$name.log" 2>&1 </dev/null &
		pid=$!
		echo "$pid" >"$pidfile"
		if wait_healthy "$http" "$pid"; then
			echo "$rpc $http"
			return 0
		fi
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		echo "ci: $name did not become healthy (attempt $attempt), see $LETHE_CI_DIR/$name.log" >&2
	done
	return 1
}

stop_proc() {
	local pidfile=$1 pid
	[ -f "$pidfile" ] || return 0
	pid="$(cat "$pidfile")"
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		# The signer takes about 10 s to exit on SIGTERM; do not wait for it.
		for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
}

case "${1:-}" in
start)
	if ! pg_isready -h "$pg_host" -p "$pg_port" -q; then
		pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
		for _ in $(seq 1 30); do pg_isready -h "$pg_host" -p "$pg_port" -q && break; sleep 1; done
	fi
	install
	schema_file="$(schema)"
	[ -f "$schema_file" ] || { echo "ci: trillian schema not found at $schema_file" >&2; exit 1; }

	db="lethe_trillian_$(date +%s)_$$"
	psql_admin -c "CREATE DATABASE $db" >/dev/null
	echo "$db" >"$db_file"
	psql -h "$pg_host" -p "$pg_port" -U "$pg_user" -d "$db" -v ON_ERROR_STOP=1 -q -f "$schema_file" >/dev/null
	pg_uri="postgresql:///$db?host=$pg_host&port=$pg_port&user=$pg_user&sslmode=disable"

	common=(--storage_system=postgresql --quota_system=postgresql "--postgresql_uri=$pg_uri"
		--etcd_servers= --max_msg_size_bytes=0 --logtostderr)
	server_args=("${common[@]}" --tree_gc=false)
	signer_args=("${common[@]}" --election_system=noop --force_master --pre_election_pause=0s
		--sequencer_interval=10ms --batch_size=1000 --num_sequencers=10 --sequencer_guard_window=0s)

	read -r server_rpc _ < <(start_proc trillian_log_server "$server_pid" "${server_args[@]}") ||
		{ echo "ci: trillian_log_server failed to start" >&2; exit 1; }
	read -r _ _ < <(start_proc trillian_log_signer "$signer_pid" "${signer_args[@]}") ||
		{ echo "ci: trillian_log_signer failed to start" >&2; exit 1; }

	tree_id="$("$bin_dir/createtree" --admin_server="$server_rpc" --tree_type=PREORDERED_LOG \
		--max_root_duration=0 --display_name=lethe-ci --rpc_deadline=30s 2>>"$LETHE_CI_DIR/createtree.log")"
	case "$tree_id" in '' | *[!0-9]*) echo "ci: createtree printed '$tree_id'" >&2; exit 1 ;; esac

	# Values are single-quoted: .ci/run sources this file and the URI holds '&'.
	{
		echo "LETHE_TEST_TRILLIAN_ADDR='$server_rpc'"
		echo "LETHE_TEST_TRILLIAN_TREE_ID='$tree_id'"
		echo "LETHE_TEST_TRILLIAN_BIN_DIR='$bin_dir'"
		echo "LETHE_TEST_TRILLIAN_SCHEMA='$schema_file'"
		echo "LETHE_TEST_TRILLIAN_PG_URI='$pg_uri'"
		echo "LETHE_TEST_TRILLIAN_SERVER_ARGS='${server_args[*]}'"
		echo "LETHE_TEST_TRILLIAN_SIGNER_ARGS='${signer_args[*]}'"
	} >>"$LETHE_CI_ENV"
	echo "ci: trillian on $server_rpc, tree $tree_id, database $db" >&2
	;;
stop)
	stop_proc "$signer_pid"
	stop_proc "$server_pid"
	[ -f "$db_file" ] || exit 0
	db="$(cat "$db_file")"
	psql_admin -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || true
	rm -f "$db_file"
	;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
