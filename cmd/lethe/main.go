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
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/proofs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// usageError is a mistake in the command line: exit status 2, code usage.
type usageError struct{ msg, hint string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// Codes of errors the command line itself finds. The library's codes
// (lethe.Code) cover the rest.
const (
	codeUsage        = "usage"          // a mistake in the command line (exit 2)
	codeVerifyFailed = "verify_failed"  // lethe verify: the proof does not verify
	codeIO           = "io"             // a file could not be read or written
	codeDecrypt      = "decrypt_failed" // lethe verify-export: the identity does not open the file
)

// report prints err as "lethe: ...", with hint lines and a "code:" line,
// and returns the exit status: 0 for nil, 2 for usage errors, 1 otherwise.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	err = lethe.HideErasure(err) // an erased grain is no grain, here as over --server
	fmt.Fprintf(stderr, "lethe: %v\n", err)
	var ue *usageError
	if errors.As(err, &ue) {
		hint := ue.hint
		if hint == "" {
			hint = "run 'lethe help' for usage"
		}
		fmt.Fprintf(stderr, "hint: %s\ncode: %s\n", hint, codeUsage)
		return 2
	}
	var le *lethe.Error
	var pe *fs.PathError
	switch {
	case errors.As(err, &le):
		if le.Hint != "" {
			fmt.Fprintf(stderr, "hint: %s\n", le.Hint)
		}
		fmt.Fprintf(stderr, "code: %s\n", le.Code)
	case errors.As(err, new(*decryptError)):
		fmt.Fprintf(stderr, "hint: give the identity whose recipient the export was made for (age-keygen -y KEYFILE prints it)\ncode: %s\n", codeDecrypt)
	case proofs.FailedCheck(err) != "":
		fmt.Fprintf(stderr, "check: %s\ncode: %s\n", proofs.FailedCheck(err), codeVerifyFailed)
	case errors.As(err, &pe):
		fmt.Fprintf(stderr, "code: %s\n", codeIO)
	default:
		fmt.Fprintf(stderr, "code: %s\n", lethe.ErrorCode(err))
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
	"cal":       cmdCal,
	"forget":    cmdForget,
	"hold":      cmdHold,
	"hook":      cmdHook,
	"request":   cmdRequest,
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
	"verify-export": func(ctx context.Context, e *env, args []string) error {
		return runVerifyExport(ctx, args, e.stdout, e.stderr)
	},
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := newEnv(stdin, stdout, stderr)
	defer e.close()
	// Global flags may come before the command: they are moved after its
	// arguments (before a "--"), where its flag set parses them.
	globals, args, err := leadingGlobals(args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		if len(globals) > 0 {
			return usagef("no command after the global flags")
		}
		fmt.Fprint(stderr, usage)
		return usagef("no command")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		// The global flags (--json among them) change nothing in a usage
		// text, which is not machine output: they are passed over.
		rest, err := parse(e.flags("help"), rest)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			return err
		}
		if len(rest) > 0 {
			if _, ok := commands[rest[0]]; ok {
				fmt.Fprint(stdout, commandUsage(rest[0]))
				return nil
			}
			return usagef("help: unknown command %q", rest[0])
		}
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "--version":
		// With the global flags, before it or after it: --json prints
		// {"version": ...}; any other argument is a usage error.
		fs := e.flags("version")
		pos, err := parse(fs, append(rest, globals...))
		if err != nil {
			return err
		}
		if err := noArgs(fs, pos); err != nil {
			return err
		}
		return e.jsonOrText(map[string]string{"version": version}, "lethe "+version)
	}
	cmd, ok := commands[name]
	if !ok {
		return usagef("unknown command %q", name)
	}
	if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "-help" || rest[0] == "--help") {
		// Before a command's own subcommand (lethe hold --help).
		fmt.Fprint(stdout, commandUsage(name))
		return nil
	}
	switch name {
	case "verify", "verify-export", "policy":
		// Offline commands: of the global flags only --json applies.
		var keep []string
		for _, g := range globals {
			if n := flagName(g); n == "json" {
				keep = append(keep, g)
			}
		}
		globals = keep
	}
	if len(globals) > 0 {
		if name == "policy" && len(rest) > 0 {
			rest = append([]string{rest[0]}, insertFlags(rest[1:], globals)...)
		} else {
			rest = insertFlags(rest, globals)
		}
	}
	err = cmd(ctx, e, rest)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, commandUsage(name))
		return nil
	}
	return err
}

// globalFlags are the flags every command takes; true for those that take
// a value.
var globalFlags = map[string]bool{
	"data": true, "postgres": true, "server": true, "token-file": true, "memory": true,
	"json": false, "yes": false,
}

// flagName returns the name of a "-name", "--name" or "--name=value"
// argument.
func flagName(a string) string {
	n := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
	n, _, _ = strings.Cut(n, "=")
	return n
}

// leadingGlobals splits the global flags that come before the command
// (each with its value as one "--name=value" argument) from the rest.
func leadingGlobals(args []string) (globals, rest []string, err error) {
	for len(args) > 0 {
		a := args[0]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			break
		}
		name := flagName(a)
		takesValue, ok := globalFlags[name]
		switch {
		case name == "h" || name == "help" || name == "version":
			return globals, args, nil
		case !ok:
			return nil, nil, usagef("unknown global flag %q before the command", a)
		case takesValue && !strings.Contains(a, "="):
			if len(args) < 2 {
				return nil, nil, usagef("flag needs an argument: %s", a)
			}
			globals = append(globals, "--"+name+"="+args[1])
			args = args[2:]
			continue
		}
		globals = append(globals, a)
		args = args[1:]
	}
	return globals, args, nil
}

// insertFlags puts flags after args, or before a "--" that ends them.
func insertFlags(args, flags []string) []string {
	out := make([]string, 0, len(args)+len(flags))
	for i, a := range args {
		if a == "--" {
			out = append(out, flags...)
			return append(out, args[i:]...)
		}
		out = append(out, a)
	}
	return append(out, flags...)
}

// commandUsage is the usage of one command: its lines of the usage text,
// the sections that concern it, and the global flags.
func commandUsage(name string) string {
	switch name {
	case "serve":
		return serveUsage
	case "verify":
		return verifyUsage
	case "policy":
		return policyUsage
	case "mcp":
		return mcpUsage
	}
	var b strings.Builder
	b.WriteString("Usage:\n")
	in := false
	lines := strings.Split(usage, "\n")
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "  lethe "):
			f := strings.Fields(l)
			in = len(f) > 1 && f[1] == name
		case !strings.HasPrefix(l, "   "):
			in = false
		}
		if in {
			b.WriteString(l + "\n")
		}
	}
	sections := map[string]string{
		"add": "Fields", "supersede": "Fields", "recall": "Recall filters",
		"purge": "Forgetting", "archive": "Forgetting", "risk": "Forgetting",
	}
	for _, sec := range []string{sections[name], "Global flags"} {
		if sec == "" {
			continue
		}
		in = false
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, sec):
				in = true
				b.WriteString("\n")
			case l == "":
				in = false
			}
			if in {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

const version = "0.1.0-dev"

const usage = `lethe: an encrypted memory store with erasure you can prove

Usage:
  lethe add TYPE field=value...            write a grain, print its hash
  lethe recall [filters]                   list matching grains (newest first; filtered: ranked;
                                           --query/--embedding: searched)
  lethe inspect HASH                       show one grain (superseded or archived too)
  lethe supersede HASH TYPE field=value... write a new version, print its hash
  lethe history HASH                       show the version chain, newest first
  lethe cal 'STATEMENT'                    run one CAL statement (HISTORY OF "HASH", HISTORY WHERE
                                           subject = "S", RECALL WHERE ..., SUPERSEDE "HASH" SET ...,
                                           FORGET "HASH" (needs --yes)); grammar in docs/api.md
  lethe forget HASH... | --subject S | --user U [--scope P]... [--namespace NS] [--force] [--dry-run]
                                           hard-delete grains and every version (needs --yes;
                                           --force overrides protection rules, never a hold;
                                           HASH... with --user/--subject: only those that match;
                                           --scope/--namespace: refuse unless every version of each
                                           chain lies under one of the prefixes / in the namespace;
                                           --dry-run: what it would delete or what would refuse it)
  lethe forget user U | forget scope PATH | forget memory [--dry-run]
                                           crypto-erase: destroy one key, print the proof (needs --yes;
                                           --dry-run: the count and the hold that would refuse it)
  lethe export --user U --recipient age1... [--out FILE]
                                           everything held about a user, age-encrypted to the requester
                                           (--out writes FILE mode 0600, over an existing file too)
  lethe export history HASH | --subject S --recipient age1... [--out FILE]
                                           every version of the chains, their events and proofs,
                                           signed and age-encrypted (lethe.history-export/v1)
  lethe hold set --scope PATH | --user U   place a legal hold; prints its id
  lethe hold release ID | hold list
  lethe hook add URL --events TYPE,...
                                           a webhook of the memory's audit events (or --events '*');
                                           prints its id and its secret, shown only then
  lethe hook list | hook remove ID | hook rotate ID [--overlap 24h]
  lethe hook deliveries ID [--state pending|dead] | hook redeliver ID [--delivery N]
  lethe request create --user U | --scope PATH --reason R --reference TICKET [--due RFC3339]
                                           file an erasure request (pending a second token's approval);
                                           prints its id, and on stderr its preview and subject nonce
  lethe request list [--status S] [--overdue] [--due-before RFC3339] | request show ID
  lethe request approve ID                 approve it (a token other than the requester's: four eyes)
  lethe request execute ID | request reject ID
                                           run the approved erasure, print its proof; or reject (needs --yes)
  lethe request certificate ID [--html] [--out FILE]
                                           the erasure certificate (JSON, or printable HTML);
                                           --out writes FILE mode 0600, as export does
  lethe purge stale [--half-life D] [--threshold T] [--min-age-days N] [--batch B]
                    [--namespace NS] [--curve exponential|linear|ebbinghaus] [--dry-run]
                                           forget grains whose retention decayed (needs --yes)
  lethe archive [--trigger T] [--dry-run] | archive HASH... | archive --candidates
                                           run the archive ladder, or archive grains, or list the
                                           grains whose retrieval score decayed (Vitamem's shouldArchive)
  lethe risk sweep [--dry-run]             compress or drop grains at risk (needs --yes)
  lethe policy check FILE...               validate forgetting policy files
  lethe audit key | checkpoint | entry N | proof N [--size S] | proof --event ID | consistency A B
              [--format json|tlog-proof] for proofs: a c2sp.org/tlog-proof@v1 text file
  lethe keys rotate [--keep N]             rotate the KEK (local age or Vault), rewrap, trim old versions (needs --yes)
  lethe verify PROOF --log-key KEY [--checkpoint OLDER] [--consistency FILE]
               [--subject ID --nonce HEX]  check an erasure proof offline (no data dir needed)
               [--finality TRIM_PROOF [--finality-consistency FILE]]
                                           with a later kek.trim proof: check the erasure is final
               [--witness KEY]... [--witness-threshold N]
                                           require witness cosignatures on the checkpoint
  lethe verify-export FILE --identity KEYFILE --log-key KEY
                                           open a history export and verify it offline
  lethe serve [--addr HOST:PORT] [--config FILE]
                                           serve the HTTP API (see 'lethe serve --help')
  lethe mcp [--lock-namespace NS] [--lock-scope PATH] [--allow-erase] [--allow-requests]
                                           serve MCP tools over stdio (see 'lethe mcp --help')
  lethe token create --role R [--memory M] [--scope P] [--expires-in D] | list | revoke ID
                                           manage API tokens
  lethe help | version

Fields (add, supersede):
  subject relation object content namespace scope user_id
  tags=a,b  importance=0..1  confidence=0..1  salience=0..1  pinned=true  meta.KEY=VALUE
  supersede sets every field given, empty included (content= clears it,
  tags= clears the tags); the fields not given carry forward
  embedding=0.1,0.2,...                    a vector for --embedding search (one dimension per memory)
  --created-at RFC3339                     for imports

Recall filters:
  --subject S --relation R --object O --user U --scope PREFIX --namespace N
  --type T --tag T (repeatable) --include-superseded --include-archived
  --limit N --cursor C       (a filter given empty is refused: leave it out for every value)
  --query TEXT      search the words of content, subject and object (BM25, ranked, with a score)
  --embedding X,Y,...  the nearest grains by cosine similarity (with --query: the scores add)

Forgetting (purge, archive, risk):
  --policy FILE     the embedded store's policy (default: the built-in policies/default.yaml)
  --decay-per-day X --strength-days D      the linear and ebbinghaus curves (purge)
  --batch B         grains per transaction and audit event (purge, risk)

Global flags (before or after the command; --flag value or --flag=value):
  --data DIR        embedded store directory (default ./lethe-data, or $LETHE_DATA)
  --postgres DSN    use PostgreSQL instead of SQLite (or $LETHE_POSTGRES_DSN)
  --server URL      talk to a lethe server instead (or $LETHE_SERVER)
  --token-file F    the API token for --server (or $LETHE_TOKEN_FILE)
  --memory M        memory name (default "default")
  $LETHE_POLICY     the embedded store's policy file for every command (auto-pin rules
                    apply to add and supersede; --policy overrides it for purge, archive, risk)
  --json            machine-readable output
  --yes             confirm a destructive command
`
