package lethe_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
)

// storeDigest is a digest of every row of every table a destructive call
// may change (grains, tags, keys, counters, holds, erase epochs and
// cleanup jobs, scope generations, policy runs, the audit outbox), read
// from the SQLite file itself, and the audit log's size.
func storeDigest(t *rapid.T, db *lethe.DB, path string) string {
	ctx := context.Background()
	size, err := db.AuditSize(ctx) // drains the outbox first
	if err != nil {
		t.Fatalf("AuditSize: %v", err)
	}
	conn, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer conn.Close()
	h := sha256.New()
	fmt.Fprintf(h, "audit size %d\n", size)
	for _, table := range []string{"grains", "grain_tags", "data_keys", "grain_counts", "user_grain_counts", "holds",
		"erase_epochs", "erase_cleanup", "scope_generations", "policy_runs", "audit_events"} {
		rows, err := conn.Query("SELECT * FROM " + table + " ORDER BY 1")
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		n := 0
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("scan %s: %v", table, err)
			}
			fmt.Fprintf(h, "%s %v\n", table, vals)
			n++
		}
		rows.Close()
		fmt.Fprintf(h, "%s: %d rows\n", table, n)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestDryRunsModel checks every destructive path's dry run on random
// stores: random grains (users, subjects, nested scopes, ages, salience,
// pins, protected types, version chains) and sometimes a legal hold, then
// one destructive call, first as a dry run and then for real. The dry run
// must leave every row of the store and the audit log exactly as they
// were, and say what the real call then does: the same hashes forgotten,
// the same count erased, the same grains purged or archived, or the same
// refusal (held, protected, not found).
func TestDryRunsModel(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, lethe.Config{DataDir: dir, ProofWait: time.Millisecond})
	db.PauseCleaner() // no background deletion between two digests
	path := filepath.Join(dir, "lethe.db")
	ctx := context.Background()
	users, subjects, scopes := []string{"", "u1", "u2"}, []string{"s1", "s2"}, []string{"", "a", "a/b", "c"}
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		memory := fmt.Sprint("m", n)
		var hashes []string
		for i := rapid.IntRange(1, 8).Draw(rt, "grains"); i > 0; i-- {
			g := lethe.Grain{Memory: memory, Type: rapid.SampledFrom([]string{"fact", "fact", "caveat"}).Draw(rt, "type"),
				Subject: rapid.SampledFrom(subjects).Draw(rt, "subject"), Object: fmt.Sprint("o", i),
				UserID: rapid.SampledFrom(users).Draw(rt, "user"), Scope: rapid.SampledFrom(scopes).Draw(rt, "scope"),
				Pinned: rapid.IntRange(0, 5).Draw(rt, "pinned") == 0, Salience: rapid.SampledFrom([]float64{0.01, 0.5, 1}).Draw(rt, "salience"),
				CreatedAt: time.Now().Add(-time.Duration(rapid.IntRange(0, 120).Draw(rt, "age days")) * 24 * time.Hour)}
			h, err := db.Add(ctx, g)
			if err != nil {
				rt.Fatalf("add: %v", err)
			}
			if rapid.IntRange(0, 3).Draw(rt, "supersede") == 0 {
				if h, err = db.Supersede(ctx, h, lethe.Grain{Memory: memory, Object: fmt.Sprint("o", i, "v2")}); err != nil {
					rt.Fatalf("supersede: %v", err)
				}
			}
			hashes = append(hashes, h)
		}
		switch rapid.IntRange(0, 3).Draw(rt, "hold") {
		case 0:
			if _, err := db.SetHold(ctx, lethe.HoldSpec{Memory: memory, Scope: rapid.SampledFrom(scopes[1:]).Draw(rt, "hold scope")}); err != nil {
				rt.Fatalf("hold: %v", err)
			}
		case 1:
			if _, err := db.SetHold(ctx, lethe.HoldSpec{Memory: memory, UserID: rapid.SampledFrom(users[1:]).Draw(rt, "hold user")}); err != nil {
				rt.Fatalf("hold: %v", err)
			}
		}
		pick := func() []string {
			var out []string
			for _, h := range hashes {
				if rapid.Bool().Draw(rt, "pick") {
					out = append(out, h)
				}
			}
			return append(out, hashes[0])
		}
		before := storeDigest(rt, db, path)
		dryUnchanged := func(what string) {
			if after := storeDigest(rt, db, path); after != before {
				rt.Fatalf("the dry run of %s changed the store or the audit log", what)
			}
		}
		switch op := rapid.SampledFrom([]string{"forget", "forget-user", "scope-erase", "purge", "archive"}).Draw(rt, "op"); op {
		case "forget":
			var sel lethe.Selector
			switch rapid.IntRange(0, 4).Draw(rt, "selector") {
			case 0:
				sel = lethe.Selector{Hash: rapid.SampledFrom(hashes).Draw(rt, "hash")}
			case 1:
				sel = lethe.Selector{Hashes: pick()}
			case 2:
				sel = lethe.Selector{Subject: rapid.SampledFrom(subjects).Draw(rt, "by subject")}
			case 3:
				sel = lethe.Selector{UserID: rapid.SampledFrom(users[1:]).Draw(rt, "by user")}
			default:
				sel = lethe.Selector{Hashes: pick(), UserID: rapid.SampledFrom(users[1:]).Draw(rt, "narrow user")}
			}
			sel.Memory = memory
			force := rapid.IntRange(0, 3).Draw(rt, "force") == 0
			forget := db.Forget
			if force {
				forget = db.ForceForget
			}
			dsel := sel
			dsel.DryRun = true
			dry, derr := forget(ctx, dsel)
			dryUnchanged(op)
			real, err := forget(ctx, sel)
			if derr != nil {
				if lethe.ErrorCode(err) != lethe.ErrorCode(derr) {
					rt.Fatalf("dry run failed with %v, the forget with %v", derr, err)
				}
				return
			}
			switch dry.Status {
			case "would_forget", "not_found":
				if err != nil {
					rt.Fatalf("dry run %+v, then the forget failed: %v", dry, err)
				}
				want := map[string]string{"would_forget": "forgotten", "not_found": "not_found"}[dry.Status]
				if real.Status != want || real.Count != dry.Count || !slices.Equal(real.Hashes, dry.Hashes) {
					rt.Fatalf("dry run %+v, the forget %+v", dry, real)
				}
			case "held", "protected":
				if lethe.ErrorCode(err) != lethe.Code(dry.Status) {
					rt.Fatalf("dry run %+v, the forget: %+v, %v", dry, real, err)
				}
				if dry.Count == 0 || (dry.Status == "held") != (dry.HeldBy != "") || (dry.Status == "protected") != (dry.Reason != "") {
					rt.Fatalf("dry run refusal without its evidence: %+v", dry)
				}
			default:
				rt.Fatalf("dry run status %q", dry.Status)
			}
		case "forget-user", "scope-erase":
			// The same target for both calls.
			var target string
			var erase func(opts ...lethe.EraseOption) (*lethe.Erasure, error)
			if op == "forget-user" {
				target = rapid.SampledFrom(users[1:]).Draw(rt, "erase user")
				erase = func(opts ...lethe.EraseOption) (*lethe.Erasure, error) {
					return db.ForgetUser(ctx, memory, target, opts...)
				}
			} else {
				target = rapid.SampledFrom(scopes[1:]).Draw(rt, "erase scope")
				erase = func(opts ...lethe.EraseOption) (*lethe.Erasure, error) {
					return db.EraseScope(ctx, memory, target, opts...)
				}
			}
			dry, derr := erase(lethe.DryRun())
			dryUnchanged(op)
			real, err := erase()
			switch {
			case derr != nil:
				if lethe.ErrorCode(err) != lethe.ErrorCode(derr) {
					rt.Fatalf("dry run failed with %v, the erasure with %v", derr, err)
				}
			case !dry.DryRun || dry.Receipt != nil:
				rt.Fatalf("a dry run's answer %+v", dry)
			case dry.HeldBy != "":
				if lethe.ErrorCode(err) != lethe.CodeHeld {
					rt.Fatalf("dry run held by %s, the erasure: %v", dry.HeldBy, err)
				}
			case err != nil:
				rt.Fatalf("dry run %+v, then the erasure failed: %v", dry, err)
			case real.Count != dry.Count || real.KeyFingerprint != dry.KeyFingerprint:
				rt.Fatalf("dry run %+v, the erasure %+v", dry, real)
			}
		case "purge":
			opts := lethe.PurgeOptions{Memory: memory, DryRun: true}
			dry, derr := db.PurgeStale(ctx, opts)
			dryUnchanged(op)
			opts.DryRun = false
			real, err := db.PurgeStale(ctx, opts)
			if derr != nil || err != nil {
				rt.Fatalf("purge: %v / %v", derr, err)
			}
			if real.Forgotten != dry.Forgotten || real.Held != dry.Held || real.Protected != dry.Protected || !slices.Equal(real.Hashes, dry.Hashes) {
				rt.Fatalf("dry run %+v, the purge %+v", dry, real)
			}
		case "archive":
			dry, derr := db.Archive(ctx, memory, lethe.ArchiveOptions{DryRun: true})
			dryUnchanged(op)
			real, err := db.Archive(ctx, memory, lethe.ArchiveOptions{})
			if derr != nil || err != nil {
				rt.Fatalf("archive: %v / %v", derr, err)
			}
			if real.Archived != dry.Archived || real.Protected != dry.Protected || !slices.Equal(real.Hashes, dry.Hashes) {
				rt.Fatalf("dry run %+v, the archive %+v", dry, real)
			}
		}
	})
}
