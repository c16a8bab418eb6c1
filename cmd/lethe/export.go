package main

import (
	"context"
	"os"

	"github.com/lethe-io/lethe"
)

// exporter makes subject access exports: the embedded store, or a server.
type exporter interface {
	ExportUser(ctx context.Context, memory, userID, recipient string) (*lethe.SubjectExport, error)
}

var (
	_ exporter = (*lethe.DB)(nil)
	_ exporter = (*client)(nil)
)

// cmdExport runs "lethe export --user U --recipient age1... [--out FILE]":
// a subject access export, age-encrypted to the requester's recipient.
func cmdExport(ctx context.Context, e *env, args []string) error {
	fs := e.flags("export")
	user := fs.String("user", "", "")
	recipient := fs.String("recipient", "", "")
	out := fs.String("out", "", "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 || *user == "" || *recipient == "" {
		return usagef("usage: lethe export --user U --recipient age1... [--out FILE]")
	}
	be, err := e.backend(ctx)
	if err != nil {
		return err
	}
	x, ok := be.(exporter)
	if !ok {
		return errRemote("export")
	}
	res, err := x.ExportUser(ctx, e.memory, *user, *recipient)
	if err != nil {
		return err
	}
	// The disclosure's audit event and the nonce of its subject
	// commitment: on stderr when the export itself goes to stdout.
	w := e.stdout
	if *out == "" {
		w = e.stderr
		if _, err := e.stdout.Write(res.Data); err != nil {
			return err
		}
	} else if err := os.WriteFile(*out, res.Data, 0o600); err != nil {
		return err
	}
	printf(w, "event %s\nsubject_nonce %s\n", res.EventID, res.SubjectNonce)
	return nil
}
