package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/forgetting"
)

const policyUsage = `Usage: lethe policy check [--json] FILE...

Check forgetting policy files (policies/*.yaml): strict YAML with no unknown
or repeated keys, every knob in its range, every auto-pin pattern compiles.
Prints "ok: FILE" for each valid file; for each invalid one, prints every
problem to stderr as FILE:LINE: KEY: PROBLEM. Exits non-zero if any file is
invalid. Reads only the files given; needs no data directory.

Flags:
  --json    print {"ok":...,"files":[{"file","ok","problems":[{"key","line","message"}]}]}
            to stdout instead
`

// policyFileResult is one file in the --json output.
type policyFileResult struct {
	File     string          `json:"file"`
	OK       bool            `json:"ok"`
	Problems []policyProblem `json:"problems,omitempty"`
}

type policyProblem struct {
	Key     string `json:"key,omitempty"`
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
}

// runPolicy is "lethe policy". Its one subcommand, check, validates policy
// files offline.
func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, policyUsage)
		return usagef("policy: want a subcommand: check")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, policyUsage)
		return nil
	case "check":
	default:
		return usagef("policy: unknown subcommand %q; want check", args[0])
	}

	var files []string
	asJSON := false
	onlyFiles := false
	for _, a := range args[1:] {
		switch {
		case onlyFiles || !strings.HasPrefix(a, "-") || a == "-":
			files = append(files, a)
		case a == "--":
			onlyFiles = true
		case a == "--json" || a == "-json":
			asJSON = true
		case a == "-h" || a == "-help" || a == "--help":
			fmt.Fprint(stdout, policyUsage)
			return nil
		default:
			return usagef("policy check: unknown flag %s", a)
		}
	}
	if len(files) == 0 {
		return usagef("policy check: want at least one FILE")
	}

	results := make([]policyFileResult, 0, len(files))
	bad := 0
	for _, file := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		r := checkPolicyFile(file)
		if !r.OK {
			bad++
		}
		results = append(results, r)
		if asJSON {
			continue
		}
		if r.OK {
			fmt.Fprintf(stdout, "ok: %s\n", file)
			continue
		}
		for _, p := range r.Problems {
			fmt.Fprintln(stderr, formatPolicyProblem(file, p))
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			OK    bool               `json:"ok"`
			Files []policyFileResult `json:"files"`
		}{bad == 0, results}); err != nil {
			return err
		}
	}
	if bad > 0 {
		return &lethe.Error{Code: lethe.CodeInvalidArgument, Message: fmt.Sprintf("policy check: %d of %d files invalid", bad, len(files)),
			Hint: "each problem is printed above as FILE:LINE: KEY: PROBLEM"}
	}
	return nil
}

// checkPolicyFile loads one policy file and lists its problems.
func checkPolicyFile(file string) policyFileResult {
	r := policyFileResult{File: file}
	_, err := forgetting.Load(file)
	if err == nil {
		r.OK = true
		return r
	}
	var ve *forgetting.ValidationError
	if !errors.As(err, &ve) {
		msg := err.Error()
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			msg = "cannot read: " + pe.Err.Error()
		}
		r.Problems = []policyProblem{{Message: msg}}
		return r
	}
	for _, p := range ve.Problems {
		r.Problems = append(r.Problems, policyProblem{Key: p.Key, Line: p.Line, Message: p.Message})
	}
	return r
}

// formatPolicyProblem prints a problem as FILE:LINE: KEY: MESSAGE, leaving
// out what is unknown.
func formatPolicyProblem(file string, p policyProblem) string {
	var b strings.Builder
	b.WriteString(file)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}
