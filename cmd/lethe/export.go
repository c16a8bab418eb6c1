package main

import (
	"context"
	"os"

	"github.com/lethe-io/lethe"
)

// exporter makes subject access exports: the embedded store, or a server.
type exporter interface {
	ExportUser(ctx context.Context, memory, userID, recipient string) ([]byte, error)
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
	b, err := x.ExportUser(ctx, e.memory, *user, *recipient)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = e.stdout.Write(b)
		return err
	}
	return os.WriteFile(*out, b, 0o600)
}
