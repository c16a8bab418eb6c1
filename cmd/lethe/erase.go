package main

import (
	"context"
	"strings"

	"github.com/lethe-io/lethe"
)

// eraser is what the erasure and hold commands call: the embedded store, or
// a server client that implements the same calls.
type eraser interface {
	ForgetUser(ctx context.Context, memory, userID string, opts ...lethe.EraseOption) (*lethe.Erasure, error)
	EraseScope(ctx context.Context, memory, path string, opts ...lethe.EraseOption) (*lethe.Erasure, error)
	EraseMemory(ctx context.Context, memory string, opts ...lethe.EraseOption) (*lethe.Erasure, error)
	SetHold(ctx context.Context, spec lethe.HoldSpec) (*lethe.Hold, error)
	ReleaseHold(ctx context.Context, memory, id string) error
	Holds(ctx context.Context, memory string) ([]lethe.Hold, error)
}

var _ eraser = (*lethe.DB)(nil)

func (e *env) eraser(ctx context.Context) (eraser, error) {
	b, err := e.backend(ctx)
	if err != nil {
		return nil, err
	}
	if er, ok := b.(eraser); ok {
		return er, nil
	}
	return nil, errRemote("erasure and holds")
}

// cmdErase runs "lethe forget user U", "lethe forget scope PATH" and
// "lethe forget memory": crypto-erasure, printing the proof.
func cmdErase(ctx context.Context, e *env, what string, args []string) error {
	fs := e.flags("forget " + what)
	dryRun := fs.Bool("dry-run", false, "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	want := 1
	if what == "memory" {
		want = 0
	}
	if len(pos) != want {
		return usagef("usage: lethe forget user USER_ID | lethe forget scope PATH | lethe forget memory (the --memory one)")
	}
	var opts []lethe.EraseOption
	if *dryRun {
		opts = append(opts, lethe.DryRun())
	} else if err := e.needYes("forget " + what); err != nil {
		return err
	}
	er, err := e.eraser(ctx)
	if err != nil {
		return err
	}
	var res *lethe.Erasure
	switch what {
	case "user":
		res, err = er.ForgetUser(ctx, e.memory, pos[0], opts...)
	case "scope":
		res, err = er.EraseScope(ctx, e.memory, pos[0], opts...)
	default:
		res, err = er.EraseMemory(ctx, e.memory, opts...)
	}
	if err != nil {
		return err
	}
	return e.printErasure(res)
}

// printErasure prints an erasure: with --json whole, else the proof on
// stdout and a summary on stderr.
func (e *env) printErasure(res *lethe.Erasure) error {
	if e.json {
		return e.printJSON(res)
	}
	if res.DryRun {
		if res.HeldBy != "" {
			printf(e.stdout, "dry run: would be refused by legal hold %s (%d grain(s) under key %s)\n", res.HeldBy, res.Count, res.KeyFingerprint)
		} else {
			printf(e.stdout, "dry run: would erase %d grain(s): key %s\n", res.Count, res.KeyFingerprint)
		}
		return nil
	}
	// The proof on stdout ("> proof.json" feeds "lethe verify"); the rest,
	// including the subject nonce only the caller gets, on stderr.
	printf(e.stderr, "erased %d grain(s): key %s destroyed at %s\nevent:         %s\nsubject nonce: %s\n",
		res.Count, res.KeyFingerprint, res.Timestamp.Format("2006-01-02T15:04:05Z"), res.EventID, res.SubjectNonce)
	if res.Pending {
		printf(e.stderr, "proof pending: fetch it with 'lethe audit proof --event %s'\n", res.EventID)
		return nil
	}
	b, err := res.Proof.Marshal()
	if err != nil {
		return err
	}
	printf(e.stdout, "%s\n", b)
	return nil
}

// cmdHold runs "lethe hold set|release|list".
func cmdHold(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("usage: lethe hold set --scope PATH | --user U; lethe hold release ID; lethe hold list")
	}
	fs := e.flags("hold " + args[0])
	scope := fs.String("scope", "", "")
	user := fs.String("user", "", "")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	switch args[0] {
	case "set":
		if len(pos) != 0 {
			return usagef("hold set takes --scope PATH or --user U")
		}
		err = takesOnly(fs, "scope", "user")
	case "release":
		if len(pos) != 1 {
			return usagef("usage: lethe hold release ID")
		}
		err = takesOnly(fs)
	case "list":
		if err = noArgs(fs, pos); err == nil {
			err = takesOnly(fs)
		}
	default:
		return usagef("unknown hold command %q (set, release, list)", args[0])
	}
	if err != nil {
		return err
	}
	er, err := e.eraser(ctx)
	if err != nil {
		return err
	}
	switch args[0] {
	case "set":
		h, err := er.SetHold(ctx, lethe.HoldSpec{Memory: e.memory, Scope: *scope, UserID: *user})
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(h)
		}
		printf(e.stdout, "%s\n", h.ID)
	case "release":
		if err := er.ReleaseHold(ctx, e.memory, pos[0]); err != nil {
			return err
		}
		if e.json {
			return e.printJSON(map[string]string{"released": pos[0]})
		}
		printf(e.stdout, "released %s\n", pos[0])
	case "list":
		hs, err := er.Holds(ctx, e.memory)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(hs)
		}
		for _, h := range hs {
			target := "scope " + h.Scope
			if h.Kind == "user" {
				target = "a user (not named)"
			}
			printf(e.stdout, "%s %s since %s\n", h.ID, target, h.CreatedAt.Format("2006-01-02T15:04:05Z"))
		}
	}
	return nil
}

// cmdKeys runs "lethe keys rotate".
func cmdKeys(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "rotate" {
		return usagef("usage: lethe keys rotate [--keep N] --yes")
	}
	fs := e.flags("keys rotate")
	keep := fs.Int("keep", 1, "")
	if _, err := parse(fs, args[1:]); err != nil {
		return err
	}
	if err := e.needYes("keys rotate (old KEK versions are trimmed: older backups stop decrypting)"); err != nil {
		return err
	}
	db, err := e.open(ctx)
	if err != nil {
		return err
	}
	rot, err := db.RotateKEK(ctx, lethe.RotateOptions{Keep: *keep})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(rot)
	}
	printf(e.stdout, "KEK version %d: %d data key(s) rewrapped; versions below %d trimmed\n", rot.Version, rot.Rewrapped, rot.TrimmedBelow)
	return nil
}

// jsonOrText prints v as JSON with --json, else text.
func (e *env) jsonOrText(v any, text string) error {
	if e.json {
		return e.printJSON(v)
	}
	printf(e.stdout, "%s\n", strings.TrimRight(text, "\n"))
	return nil
}
