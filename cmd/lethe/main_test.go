package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"lethe": main})
}

// TestScripts runs the CLI scripts in testdata/*.txt against the embedded
// store in each script's work directory.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			env.Setenv("LETHE_DATA", filepath.Join(env.WorkDir, "data"))
			env.Setenv("LETHE_POSTGRES_DSN", "")
			if pg := os.Getenv("LETHE_TEST_POSTGRES_URL"); pg != "" {
				env.Setenv("LETHE_TEST_POSTGRES_URL", pg)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// stash NAME sets $NAME to the last command's trimmed stdout.
			"stash": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: stash NAME")
				}
				ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile("stdout")))
			},
		},
	})
}
