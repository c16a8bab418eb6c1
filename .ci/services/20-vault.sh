#!/usr/bin/env bash
# Vault: build tools/vaultdev (an in-memory Vault dev server, in its own Go
# module so Vault's dependencies stay out of lethe's go.mod), start it on a
# free loopback port with transit mounted at transit/ and the transit key
# lethe-kek, and append to $LETHE_CI_ENV:
#
#   LETHE_TEST_VAULT_ADDR        http://127.0.0.1:PORT
#   LETHE_TEST_VAULT_TOKEN_FILE  file holding the root token (mode 0600)
#   LETHE_TEST_VAULT_DEV_BIN     the vaultdev binary: tests start instances of
#                                their own to stop or seal them mid-run
#
# "stop" kills it; its log stays in $LETHE_CI_DIR/vault.log. Needs only Go and
# the module proxy; the first build takes several minutes, later ones are
# cached by Go.
set -euo pipefail
: "${LETHE_CI_DIR:?}" "${LETHE_CI_ENV:?}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$LETHE_CI_DIR/vaultdev"
pid_file="$LETHE_CI_DIR/vault.pid"
addr_file="$LETHE_CI_DIR/vault.addr"
token_file="$LETHE_CI_DIR/vault.token"
log="$LETHE_CI_DIR/vault.log"

case "${1:-}" in
start)
	echo "ci: building tools/vaultdev (first time: several minutes)" >&2
	(cd "$root/tools/vaultdev" && GOWORK=off go build -o "$bin" .)
	rm -f "$addr_file" "$token_file"
	nohup "$bin" -addr 127.0.0.1:0 -token-file "$token_file" -addr-file "$addr_file" \
		-transit-keys lethe-kek </dev/null >"$log" 2>&1 &
	echo $! >"$pid_file"
	for _ in $(seq 1 600); do
		[ -s "$addr_file" ] && break
		if ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then
			echo "vault: vaultdev exited before it was ready:" >&2
			cat "$log" >&2
			exit 1
		fi
		sleep 0.1
	done
	if [ ! -s "$addr_file" ]; then
		echo "vault: vaultdev not ready after 60s:" >&2
		cat "$log" >&2
		exit 1
	fi
	{
		echo "LETHE_TEST_VAULT_ADDR=$(cat "$addr_file")"
		echo "LETHE_TEST_VAULT_TOKEN_FILE=$token_file"
		echo "LETHE_TEST_VAULT_DEV_BIN=$bin"
	} >>"$LETHE_CI_ENV"
	;;
stop)
	[ -f "$pid_file" ] || exit 0
	pid="$(cat "$pid_file")"
	# Only our own vaultdev: the pid may have been reused since.
	if [ "$(readlink "/proc/$pid/exe" 2>/dev/null || true)" = "$bin" ]; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$pid_file" "$token_file"
	;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
