package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// AgeEnv names the path of the stock age binary (Debian package age),
// written by .ci/services/50-age.sh; without it the binary is looked up on
// PATH.
const AgeEnv = "LETHE_TEST_AGE"

// Age returns the path of the stock age command-line tool, or skips tb
// (fails it under CI=true) when it is not installed.
func Age(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(AgeEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			Unavailable(tb, "testenv: "+AgeEnv+": "+err.Error()+"; hint: bash .ci/services/50-age.sh start")
		}
		return p
	}
	p, err := exec.LookPath("age")
	if err != nil {
		Unavailable(tb, "testenv: the age binary is not installed; hint: apt-get install -y age (or bash .ci/services/50-age.sh start)")
	}
	return p
}
