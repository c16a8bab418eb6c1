#!/usr/bin/env bash
# The stock age tool (https://age-encryption.org), which the tests use to
# open lethe's age-encrypted exports as a recipient would. "start" installs
# the Debian package when the binary is missing and appends to
# $LETHE_CI_ENV:
#
#   LETHE_TEST_AGE    path of the age binary
#
# Nothing runs; "stop" has nothing to do.
set -euo pipefail
: "${LETHE_CI_DIR:?}" "${LETHE_CI_ENV:?}"

case "${1:-}" in
start)
	if ! command -v age >/dev/null; then
		echo "ci: installing the age package" >&2
		sudo=""
		[ "$(id -u)" -eq 0 ] || sudo="sudo"
		$sudo apt-get install -y age >/dev/null || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y age >/dev/null; }
	fi
	echo "LETHE_TEST_AGE=$(command -v age)" >>"$LETHE_CI_ENV"
	;;
stop) ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
