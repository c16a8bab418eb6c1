#!/usr/bin/env bash
# Third-party transparency-log tools that check lethe's audit log from
# outside: Tessera's fsck (a c2sp.org/tlog-tiles verifier) and litewitness
# (a c2sp.org/tlog-witness witness, from filippo.io/torchwood). "start"
# builds them once into a cache directory and appends to $LETHE_CI_ENV:
#
#   LETHE_TEST_TESSERA_FSCK    path of the fsck binary
#   LETHE_TEST_LITEWITNESS     path of the litewitness binary
#
# The tests start their own litewitness; nothing runs between tests, so
# "stop" has nothing to do.
set -euo pipefail
: "${LETHE_CI_DIR:?}" "${LETHE_CI_ENV:?}"

# Pinned: tessera v1.0.4 is what @latest resolved to in 2026-11; torchwood
# v0.10.0 needs Go 1.27, so v0.9.0.
tessera_version=v1.0.4
torchwood_version=v0.9.0
bin_dir="${LETHE_TLOG_TOOLS_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/lethe-ci/bin}"

# install builds one binary once; a stamp file records the version so a
# version bump rebuilds. Runs outside any module so lethe's go.mod is neither
# read nor touched.
install() {
	local name=$1 pkg=$2 version=$3
	local stamp="$bin_dir/.$name-$version"
	if [ -f "$stamp" ] && [ -x "$bin_dir/$name" ]; then
		return
	fi
	mkdir -p "$bin_dir"
	echo "ci: building $name $version into $bin_dir" >&2
	(cd / && GOFLAGS=-mod=mod GOBIN="$bin_dir" go install "$pkg@$version")
	rm -f "$bin_dir/.$name-"*
	touch "$stamp"
}

case "${1:-}" in
start)
	install fsck github.com/transparency-dev/tessera/cmd/fsck "$tessera_version"
	install litewitness filippo.io/torchwood/cmd/litewitness "$torchwood_version"
	{
		echo "LETHE_TEST_TESSERA_FSCK=$bin_dir/fsck"
		echo "LETHE_TEST_LITEWITNESS=$bin_dir/litewitness"
	} >>"$LETHE_CI_ENV"
	;;
stop) ;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
