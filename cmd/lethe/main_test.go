package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/lethe-io/lethe/internal/testenv"
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
			if bin := ageBin(); bin != "" {
				env.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+env.Getenv("PATH"))
			}
			return nil
		},
		// [age] holds when the stock age binary (and its age-keygen) is
		// installed; under CI=true its absence fails the script instead.
		Condition: func(cond string) (bool, error) {
			if cond != "age" {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			if ageBin() != "" {
				return true, nil
			}
			if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
				return false, fmt.Errorf("the age binary is not installed (CI=true: a failure, not a skip); hint: apt-get install -y age")
			}
			return false, nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// stash NAME sets $NAME to the last command's trimmed stdout.
			"stash": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: stash NAME")
				}
				ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile("stdout")))
			},
			// mode PERM FILE fails unless FILE's permission bits are PERM
			// (octal).
			"mode": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 {
					ts.Fatalf("usage: mode PERM FILE")
				}
				want, err := strconv.ParseUint(args[0], 8, 32)
				ts.Check(err)
				fi, err := os.Stat(ts.MkAbs(args[1]))
				ts.Check(err)
				if got := fi.Mode().Perm(); (got == os.FileMode(want)) == neg {
					ts.Fatalf("%s: mode %#o, want %s%#o", args[1], got, map[bool]string{true: "not ", false: ""}[neg], want)
				}
			},
			// busyport NAME holds a TCP port for the rest of the script and
			// sets $NAME to its address.
			"busyport": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: busyport NAME")
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				ts.Check(err)
				ts.Defer(func() { ln.Close() })
				ts.Setenv(args[0], ln.Addr().String())
			},
			// jsonget NAME FILE a.b.c sets $NAME to the value at a.b.c of
			// the JSON object in FILE (a string as is, else its JSON).
			"jsonget": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 3 {
					ts.Fatalf("usage: jsonget NAME FILE PATH")
				}
				var v any
				ts.Check(json.Unmarshal([]byte(ts.ReadFile(args[1])), &v))
				for _, k := range strings.Split(args[2], ".") {
					m, ok := v.(map[string]any)
					if !ok {
						ts.Fatalf("jsonget: %s: no object at %q", args[2], k)
					}
					if v, ok = m[k]; !ok {
						ts.Fatalf("jsonget: %s: no field %q", args[2], k)
					}
				}
				if s, ok := v.(string); ok {
					ts.Setenv(args[0], s)
					return
				}
				b, err := json.Marshal(v)
				ts.Check(err)
				ts.Setenv(args[0], string(b))
			},
		},
	})
}

// ageBin returns the path of the stock age binary, or "".
func ageBin() string {
	if bin := os.Getenv(testenv.AgeEnv); bin != "" {
		return bin
	}
	bin, _ := exec.LookPath("age")
	return bin
}
