package main

import (
	"context"
	"io"
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
	if len(args) > 0 && args[0] == "history" {
		return cmdExportHistory(ctx, e, args[1:])
	}
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
	w, err := e.writeExport(*out, res.Data)
	if err != nil {
		return err
	}
	printf(w, "event %s\nsubject_nonce %s\n", res.EventID, res.SubjectNonce)
	return nil
}

// writeExport writes an age-encrypted export to the file out (0600, see
// writePrivate), or to stdout when out is empty, and returns where the
// disclosure's receipt (its audit event, the nonce of its subject
// commitment) goes: stdout, or stderr when the export itself went there.
func (e *env) writeExport(out string, data []byte) (io.Writer, error) {
	if out != "" {
		return e.stdout, writePrivate(out, data)
	}
	_, err := e.stdout.Write(data)
	return e.stderr, err
}

// writePrivate writes data to the file path, readable by its owner only
// (0600), as every file the CLI writes about a data subject is: an export,
// an erasure certificate. A regular file already there is overwritten and
// made 0600 too (os.WriteFile keeps an existing file's mode); another file
// (/dev/stdout) is written as it is.
func writePrivate(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() != 0o600 {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return err
		}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
