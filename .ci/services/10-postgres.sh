#!/usr/bin/env bash
# PostgreSQL: make sure the local server runs and create a fresh database for
# this run; tests create their own databases beside it from this URL.
set -euo pipefail
: "${LETHE_CI_DIR:?}" "${LETHE_CI_ENV:?}"
name_file="$LETHE_CI_DIR/postgres.db"

case "${1:-}" in
start)
	if ! pg_isready -h 127.0.0.1 -p 5432 -q; then
		pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
		for _ in $(seq 1 30); do pg_isready -h 127.0.0.1 -p 5432 -q && break; sleep 1; done
	fi
	db="lethe_ci_$(date +%s)_$$"
	psql -h 127.0.0.1 -U postgres -d postgres -v ON_ERROR_STOP=1 -qc "CREATE DATABASE $db" >/dev/null
	echo "$db" >"$name_file"
	echo "LETHE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/$db?sslmode=disable" >>"$LETHE_CI_ENV"
	;;
stop)
	[ -f "$name_file" ] || exit 0
	db="$(cat "$name_file")"
	# Drop this run's database and the per-test databases the tests left behind.
	for d in $db $(psql -h 127.0.0.1 -U postgres -d postgres -Atc "SELECT datname FROM pg_database WHERE datname LIKE '${db}_t%'"); do
		psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $d WITH (FORCE)" >/dev/null || true
	done
	;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
