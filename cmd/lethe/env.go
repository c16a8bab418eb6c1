package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/lethe-io/lethe"
)

// env is what every subcommand shares: streams, global flags and the
// lazily opened store.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	data      string
	postgres  string
	server    string
	tokenFile string
	memory    string
	json      bool
	yes       bool
	// policyFile is $LETHE_POLICY: the embedded store's policy for every
	// command (its auto-pin rules apply to add and supersede).
	policyFile string

	db *lethe.DB
}

// newEnv returns an env with the global flags' defaults.
func newEnv(stdin io.Reader, stdout, stderr io.Writer) *env {
	data := os.Getenv("LETHE_DATA")
	if data == "" {
		data = "lethe-data"
	}
	return &env{stdin: stdin, stdout: stdout, stderr: stderr, data: data,
		postgres: os.Getenv("LETHE_POSTGRES_DSN"), server: os.Getenv("LETHE_SERVER"),
		tokenFile: os.Getenv("LETHE_TOKEN_FILE"), memory: "default", policyFile: os.Getenv("LETHE_POLICY")}
}

// flags returns a FlagSet for a subcommand with the global flags on it
// (see globalFlags in main.go).
func (e *env) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&e.data, "data", e.data, "")
	fs.StringVar(&e.postgres, "postgres", e.postgres, "")
	fs.StringVar(&e.server, "server", e.server, "")
	fs.StringVar(&e.tokenFile, "token-file", e.tokenFile, "")
	fs.StringVar(&e.memory, "memory", e.memory, "")
	fs.BoolVar(&e.json, "json", e.json, "")
	fs.BoolVar(&e.yes, "yes", e.yes, "")
	return fs
}

// isGlobalFlag reports whether name is one of the flags every command
// takes (flags, above).
func isGlobalFlag(name string) bool {
	switch name {
	case "data", "postgres", "server", "token-file", "memory", "json", "yes":
		return true
	}
	return false
}

// takesOnly returns a usage error naming the first flag given on the
// command line of fs that is neither global nor one of names. A command
// family (hold, hook, request, audit) declares its subcommands' flags on
// one FlagSet; each subcommand calls this so that it refuses a sibling's
// flag instead of accepting it and ignoring it ("hold list --scope acme"
// listed every hold).
func takesOnly(fs *flag.FlagSet, names ...string) error {
	var bad string
	fs.Visit(func(f *flag.Flag) {
		if bad == "" && !isGlobalFlag(f.Name) && !slices.Contains(names, f.Name) {
			bad = f.Name
		}
	})
	if bad != "" {
		return usagef("%s: --%s is not a flag of this command", fs.Name(), bad)
	}
	return nil
}

// noArgs returns a usage error naming the first of pos, the positional
// arguments of a command that takes none.
func noArgs(fs *flag.FlagSet, pos []string) error {
	if len(pos) > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), pos[0])
	}
	return nil
}

// parse parses flags that may appear before, between or after positional
// arguments, and returns the positional ones. "--" ends flag parsing.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp // run prints the command's usage
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// open opens the embedded store the global flags name, with the policy of
// $LETHE_POLICY if set. Commands that also work against a server call
// backend (client.go) instead.
func (e *env) open(ctx context.Context) (*lethe.DB, error) {
	if e.policyFile == "" || e.db != nil {
		return e.openPolicy(ctx, nil)
	}
	p, err := lethe.LoadPolicy(e.policyFile)
	if err != nil {
		return nil, err
	}
	return e.openPolicy(ctx, p)
}

// openPolicy is open with policy instead of the built-in default policy
// (when not nil).
func (e *env) openPolicy(ctx context.Context, policy *lethe.Policy) (*lethe.DB, error) {
	if e.db != nil {
		return e.db, nil
	}
	if e.server != "" {
		return nil, usagef("this command works on the embedded store only; leave out --server")
	}
	cfg := lethe.Config{DataDir: e.data, PostgresDSN: e.postgres, Policy: policy}
	if err := storeEnv(&cfg); err != nil {
		return nil, err
	}
	db, err := lethe.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	e.db = db
	return db, nil
}

func (e *env) close() {
	if e.db != nil {
		e.db.Close()
	}
}

// printJSON writes v as indented JSON.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// needYes refuses a destructive command without --yes.
func (e *env) needYes(what string) error {
	if e.yes {
		return nil
	}
	return &usageError{msg: what + " is destructive and needs --yes",
		hint: "check the selection with 'lethe recall' first, then repeat with --yes"}
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func printf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format, args...) }
