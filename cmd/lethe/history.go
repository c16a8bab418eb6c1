package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/proofs"
)

// historyExporter makes version-chain audit exports: the embedded store,
// or a server.
type historyExporter interface {
	ExportHistory(ctx context.Context, req lethe.HistoryRequest) (*lethe.HistoryExport, error)
}

var (
	_ historyExporter = (*lethe.DB)(nil)
	_ historyExporter = (*client)(nil)
)

// cmdExportHistory runs "lethe export history HASH | --subject S
// --recipient age1... [--out FILE]".
func cmdExportHistory(ctx context.Context, e *env, args []string) error {
	fs := e.flags("export history")
	subject := fs.String("subject", "", "")
	recipient := fs.String("recipient", "", "")
	out := fs.String("out", "", "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *recipient == "" || (len(pos) == 1) == (*subject != "") || len(pos) > 1 {
		return usagef("usage: lethe export history HASH | --subject S --recipient age1... [--out FILE]")
	}
	be, err := e.backend(ctx)
	if err != nil {
		return err
	}
	x, ok := be.(historyExporter)
	if !ok {
		return errRemote("export history")
	}
	req := lethe.HistoryRequest{Memory: e.memory, Subject: *subject, Recipient: *recipient}
	if len(pos) == 1 {
		req.Hash = pos[0]
	}
	res, err := x.ExportHistory(ctx, req)
	if err != nil {
		return err
	}
	w, err := e.writeExport(*out, res.Data)
	if err != nil {
		return err
	}
	printf(w, "event %s\n", res.EventID)
	if res.SubjectNonce != "" {
		printf(w, "subject_nonce %s\n", res.SubjectNonce)
	}
	return nil
}

const verifyExportUsage = `Usage: lethe verify-export FILE --identity KEYFILE --log-key KEY [--json]

Open a version-chain audit export (lethe.history-export/v1) and verify it
offline, with only the recipient's age identity and the log's public key.
FILE is the age file "lethe export history" or POST .../export/history
wrote (ASCII-armored or binary). Flags may come before or after FILE.

Checks, in order: decryption with the identity; the document's format; the
checkpoint's signature and origin; every event's proof (leaf signature,
inclusion in the checkpointed tree) against that one checkpoint; each
chain's consistency (hashes, supersedes/superseded_by links and the
supersede events that record them, states, times in order); the log key's
signature over the export. A failure names its check.

It prints each chain in chain order: the oldest version, then each
superseded_by link to the newest. A version that supersedes one whose
superseded_by is another (a version erased, then its predecessor
superseded again) is on a "branch of HASH:" line below, followed the same
way.

Flags:
  --identity FILE   an age identity file (age-keygen output), as age -i
                    takes it (required)
  --log-key KEY     the log's verifier key ("lethe audit key" prints it), or
                    a file holding it (required)
  --origin ORIGIN   the checkpoint origin expected (default: the key's name)
  --json            print the verified export (the decrypted document's
                    export member) as JSON
`

// maxExportInput bounds what lethe verify-export reads.
const maxExportInput = 256 << 20

// decryptError is an export the identity does not open.
type decryptError struct{ err error }

func (e *decryptError) Error() string { return "verify-export: decrypt: " + e.err.Error() }
func (e *decryptError) Unwrap() error { return e.err }

// runVerifyExport is "lethe verify-export". It reads only the files it is
// given and makes no network calls.
func runVerifyExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify-export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	identity := fs.String("identity", "", "")
	logKey := fs.String("log-key", "", "")
	origin := fs.String("origin", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseVerifyArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, verifyExportUsage)
		return nil
	}
	if err != nil {
		return usagef("verify-export: %v (see 'lethe verify-export --help')", err)
	}
	if len(pos) != 1 {
		return usagef("verify-export: want exactly one FILE, got %d (see 'lethe verify-export --help')", len(pos))
	}
	if *identity == "" || *logKey == "" {
		return usagef("verify-export: --identity and --log-key are required (see 'lethe verify-export --help')")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	opts := proofs.VerifyOptions{Origin: *origin}
	if opts.LogKey, err = readVerifyLogKey(*logKey); err != nil {
		return err
	}
	idf, err := os.Open(*identity)
	if err != nil {
		return fmt.Errorf("verify-export: identity: %w", err)
	}
	ids, err := age.ParseIdentities(idf)
	idf.Close()
	if err != nil {
		return usagef("verify-export: identity: %v", err)
	}
	f, err := os.Open(pos[0])
	if err != nil {
		return fmt.Errorf("verify-export: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxExportInput+1))
	if err != nil {
		return fmt.Errorf("verify-export: %w", err)
	}
	if len(raw) > maxExportInput {
		return &lethe.Error{Code: lethe.CodeTooLarge, Message: fmt.Sprintf("%s is larger than %d bytes", pos[0], maxExportInput)}
	}
	var in io.Reader = bytes.NewReader(raw)
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte(armor.Header)) {
		in = armor.NewReader(bytes.NewReader(bytes.TrimSpace(raw)))
	}
	r, err := age.Decrypt(in, ids...)
	if err != nil {
		return &decryptError{err}
	}
	plain, err := io.ReadAll(io.LimitReader(r, maxExportInput+1))
	if err != nil {
		return &decryptError{err}
	}
	v, err := proofs.VerifyHistoryExport(plain, opts)
	if err != nil {
		return fmt.Errorf("verify-export: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v.Export)
	}
	x := v.Export
	fmt.Fprintf(stdout, "OK: %d chains, %d versions and %d events of memory %s, every event included in the checkpoint of tree size %d signed by %s\n",
		len(x.Chains), v.Versions, v.Events, x.Memory, v.Checkpoint.Size, strings.SplitN(opts.LogKey, "+", 2)[0])
	for i, c := range x.Chains {
		lines := chainLines(c)
		fmt.Fprintf(stdout, "chain %d: %s\n", i, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(stdout, "  %s\n", l)
		}
	}
	if x.FieldsWithheld {
		fmt.Fprintln(stdout, "note: the export withholds the versions' fields (made for an auditor)")
	}
	fmt.Fprintln(stdout, "OK: the export is signed by the log key")
	return nil
}

// chainLines describes c in chain order, not in the order its versions
// were written: first the line from the oldest version through each
// superseded_by link to the newest, then a "branch of H:" line for each
// version that supersedes H but is not H's superseded_by, followed the
// same way. A branch is what superseding a version whose newer version was
// erased leaves: A superseded by B, B erased, A superseded by C reads
// "A superseded -> C current" and "branch of A: B erased", where the
// versions in written order are A, B, C.
func chainLines(c proofs.HistoryChain) []string {
	byHash := make(map[string]*proofs.HistoryVersion, len(c.Versions))
	for i := range c.Versions {
		byHash[c.Versions[i].Hash] = &c.Versions[i]
	}
	children := map[string][]string{} // in written order
	for _, v := range c.Versions {
		if byHash[v.Supersedes] != nil {
			children[v.Supersedes] = append(children[v.Supersedes], v.Hash)
		}
	}
	seen := map[string]bool{}
	var lines []string
	var follow func(from, h string)
	follow = func(from, h string) {
		var path, line []string
		for v := byHash[h]; v != nil && !seen[v.Hash]; v = byHash[v.SupersededBy] {
			seen[v.Hash] = true
			path = append(path, v.Hash)
			s := v.Hash[:12] + " " + v.State
			if len(v.ErasedBy) > 0 {
				s += " (key " + v.ErasedBy[0][:12] + ")"
			}
			line = append(line, s)
		}
		if len(path) == 0 {
			return
		}
		l := strings.Join(line, " -> ")
		if from != "" {
			l = "branch of " + from[:12] + ": " + l
		}
		lines = append(lines, l)
		for _, p := range path {
			for _, ch := range children[p] {
				follow(p, ch)
			}
		}
	}
	for _, v := range c.Versions { // the oldest first, then any version no link reaches
		if seen[v.Hash] {
			continue
		}
		from := ""
		if byHash[v.Supersedes] != nil {
			from = v.Supersedes
		}
		follow(from, v.Hash)
	}
	if len(lines) == 0 {
		lines = append(lines, "")
	}
	return lines
}
