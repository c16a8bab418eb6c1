package main

import (
	"context"
	"strconv"

	"github.com/lethe-io/lethe"
)

// cmdAudit runs "lethe audit key | checkpoint | entry N | proof N [--size S]
// | proof --event ID | consistency A B" on the embedded store or, with
// --server, through the audit routes.
func cmdAudit(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("usage: lethe audit key | checkpoint | entry N | proof N [--size S] [--format json|tlog-proof] | proof --event ID [--format json|tlog-proof] | consistency A B")
	}
	fs := e.flags("audit " + args[0])
	size := fs.Uint64("size", 0, "")
	event := fs.String("event", "", "")
	format := fs.String("format", "json", "")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	switch {
	case args[0] != "proof":
		err = takesOnly(fs)
	case *event != "":
		if err = takesOnly(fs, "event", "format"); err != nil {
			err = usagef("%s: --size is not a flag with --event: give --event ID, or N [--size S]", fs.Name())
		}
	default:
		err = takesOnly(fs, "size", "format")
	}
	if err != nil {
		return err
	}
	nums := make([]uint64, len(pos))
	for i, p := range pos {
		if nums[i], err = strconv.ParseUint(p, 10, 64); err != nil {
			return usagef("%q is not a log index or size", p)
		}
	}
	db, err := e.auditLog(ctx)
	if err != nil {
		return err
	}
	switch {
	case args[0] == "key" && len(pos) == 0:
		key, err := db.VerifierKey(ctx)
		if err != nil {
			return err
		}
		return e.jsonOrText(map[string]string{"key": key}, key)
	case args[0] == "checkpoint" && len(pos) == 0:
		note, err := db.Checkpoint(ctx)
		if err != nil {
			return err
		}
		return e.jsonOrText(map[string]string{"checkpoint": string(note)}, string(note))
	case args[0] == "entry" && len(pos) == 1:
		ent, err := db.AuditEntry(ctx, nums[0])
		if err != nil {
			return err
		}
		return e.jsonOrText(ent, string(ent.Leaf))
	case args[0] == "proof" && (len(pos) == 1) != (*event != ""):
		var p *lethe.Proof
		if *event != "" {
			p, err = db.ProofByEvent(ctx, *event)
		} else {
			p, err = db.Proof(ctx, nums[0], *size)
		}
		if err != nil {
			return err
		}
		switch *format {
		case "json":
			b, err := p.Marshal()
			if err != nil {
				return err
			}
			printf(e.stdout, "%s\n", b)
		case "tlog-proof":
			// c2sp.org/tlog-proof@v1: the file ends with the checkpoint's
			// last signature line and its newline.
			b, err := p.MarshalTlogProof()
			if err != nil {
				return err
			}
			printf(e.stdout, "%s", b)
		default:
			return usagef("--format %q: want json or tlog-proof", *format)
		}
		return nil
	case args[0] == "consistency" && len(pos) == 2:
		c, err := db.Consistency(ctx, nums[0], nums[1])
		if err != nil {
			return err
		}
		b, err := c.Marshal()
		if err != nil {
			return err
		}
		printf(e.stdout, "%s\n", b)
		return nil
	}
	return usagef("usage: lethe audit key | checkpoint | entry N | proof N [--size S] [--format json|tlog-proof] | proof --event ID [--format json|tlog-proof] | consistency A B")
}
