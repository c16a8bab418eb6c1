// Command lethe is the lethe binary: the embedded store's command line, the
// server, and the offline proof verifier.
//
// See "lethe help" for usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/lethe-io/lethe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// report prints err as "lethe: ..." with hint lines and returns the exit
// status: 0 for nil, 2 for usage errors, 1 otherwise.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "lethe: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, "hint: run 'lethe help' for usage")
		return 2
	}
	var le *lethe.Error
	if errors.As(err, &le) {
		if le.Hint != "" {
			fmt.Fprintf(stderr, "hint: %s\n", le.Hint)
		}
		fmt.Fprintf(stderr, "code: %s\n", le.Code)
	}
	return 1
}

// command is one subcommand.
type command func(ctx context.Context, e *env, args []string) error

var commands = map[string]command{
	"add":       cmdAdd,
	"recall":    cmdRecall,
	"inspect":   cmdInspect,
	"supersede": cmdSupersede,
	"history":   cmdHistory,
	"forget":    cmdForget,
	"hold":      cmdHold,
	"export":    cmdExport,
	"audit":     cmdAudit,
	"keys":      cmdKeys,
	"purge":     cmdPurge,
	"archive":   cmdArchive,
	"risk":      cmdRisk,
	"serve":     cmdServe,
	"mcp":       cmdMCP,
	"token":     cmdToken,
	"policy": func(ctx context.Context, e *env, args []string) error {
		return runPolicy(ctx, args, e.stdout, e.stderr)
	},
	"verify": func(ctx context.Context, e *env, args []string) error {
		return runVerify(ctx, args, e.stdout, e.stderr)
	},
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "--version":
		fmt.Fprintln(stdout, "lethe", version)
		return nil
	}
	cmd, ok := commands[name]
	if !ok {
		return usagef("unknown command %q", name)
	}
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	defer e.close()
	return cmd(ctx, e, rest)
}

const version = "0.1.0-dev"

const usage = `lethe: an encrypted memory store with erasure you can prove

Usage:
  lethe add TYPE field=value...            write a grain, print its hash
  lethe recall [filters]                   list matching grains (newest first; filtered: ranked)
  lethe inspect HASH                       show one grain (superseded or archived too)
  lethe supersede HASH TYPE field=value... write a new version, print its hash
  lethe history HASH                       show the version chain, newest first
  lethe forget HASH... | --subject S | --user U [--force]
                                           hard-delete grains and every version (needs --yes;
                                           --force overrides protection rules, never a hold)
  lethe forget user U | forget scope PATH | forget memory
                                           crypto-erase: destroy one key, print the proof (needs --yes)
  lethe export --user U --recipient age1... [--out FILE]
                                           everything held about a user, age-encrypted to the requester
  lethe hold set --scope PATH | --user U   place a legal hold; prints its id
  lethe hold release ID | hold list
  lethe purge stale [--half-life D] [--threshold T] [--min-age-days N] [--batch B]
                    [--namespace NS] [--curve exponential|linear|ebbinghaus] [--dry-run]
                                           forget grains whose retention decayed (needs --yes)
  lethe archive [--trigger T] [--dry-run] | archive HASH...
                                           run the archive ladder, or archive grains
  lethe risk sweep [--dry-run]             compress or drop grains at risk (needs --yes)
  lethe policy check FILE...               validate forgetting policy files
  lethe audit key | checkpoint | entry N | proof N [--size S] | proof --event ID | consistency A B
  lethe keys rotate [--keep N]             rotate the Vault KEK, rewrap, trim old versions (needs --yes)
  lethe verify PROOF --log-key KEY [--checkpoint OLDER] [--consistency FILE]
               [--subject ID --nonce HEX]  check an erasure proof offline (no data dir needed)
  lethe serve [--addr HOST:PORT] [--config FILE]
                                           serve the HTTP API (see 'lethe serve --help')
  lethe mcp [--lock-namespace NS] [--lock-scope PATH] [--allow-erase]
                                           serve MCP tools over stdio (see 'lethe mcp --help')
  lethe token create --role R [--memory M] [--scope P] | list | revoke ID
                                           manage API tokens
  lethe help | version

Fields (add, supersede):
  subject relation object content namespace scope user_id
  tags=a,b  importance=0..1  confidence=0..1  pinned=true  meta.KEY=VALUE
  --created-at RFC3339                     for imports

Recall filters:
  --subject S --relation R --object O --user U --scope PREFIX --namespace N
  --type T --tag T (repeatable) --include-superseded --include-archived
  --limit N --cursor C

Forgetting (purge, archive, risk):
  --policy FILE     the embedded store's policy (default: the built-in policies/default.yaml)
  --decay-per-day X --strength-days D      the linear and ebbinghaus curves (purge)
  --batch B         grains per transaction and audit event (purge, risk)

Global flags (anywhere on the line):
  --data DIR        embedded store directory (default ./lethe-data, or $LETHE_DATA)
  --postgres DSN    use PostgreSQL instead of SQLite (or $LETHE_POSTGRES_DSN)
  --server URL      talk to a lethe server instead (or $LETHE_SERVER)
  --token-file F    the API token for --server (or $LETHE_TOKEN_FILE)
  --memory M        memory name (default "default")
  --json            machine-readable output
  --yes             confirm a destructive command
`
