package testenv

import (
	"os"
	"testing"
)

// Environment written by .ci/services/40-tlog-tools.sh: paths of
// third-party transparency-log tools built at pinned versions.
const (
	TesseraFsckEnv = "LETHE_TEST_TESSERA_FSCK" // Tessera's cmd/fsck (c2sp.org/tlog-tiles verifier)
	LitewitnessEnv = "LETHE_TEST_LITEWITNESS"  // torchwood's cmd/litewitness (c2sp.org/tlog-witness)
)

const tlogToolsHint = `export LETHE_CI_DIR=$(mktemp -d) LETHE_CI_ENV=$LETHE_CI_DIR/env; ` +
	`bash .ci/services/40-tlog-tools.sh start && set -a && . $LETHE_CI_ENV && set +a`

// TesseraFsck returns the path of Tessera's fsck binary, or skips tb (fails
// it under CI=true) when it is not installed.
func TesseraFsck(tb testing.TB) string {
	tb.Helper()
	return tool(tb, TesseraFsckEnv)
}

// Litewitness returns the path of the litewitness binary, or skips tb
// (fails it under CI=true) when it is not installed.
func Litewitness(tb testing.TB) string {
	tb.Helper()
	return tool(tb, LitewitnessEnv)
}

func tool(tb testing.TB, env string) string {
	tb.Helper()
	path := os.Getenv(env)
	if path == "" {
		Unavailable(tb, "testenv: "+env+" is not set; hint: "+tlogToolsHint)
	}
	if _, err := os.Stat(path); err != nil {
		Unavailable(tb, "testenv: "+env+": "+err.Error()+"; hint: "+tlogToolsHint)
	}
	return path
}
