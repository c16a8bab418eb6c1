package lethe_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// TestStrandedRequestsRunAtOpen: a release of a hold commits, then runs
// the requests the hold blocked; a process that ends in between leaves
// them blocked with no hold in force. The next Open runs them, as the
// "recovery" actor, with their key.erase event, and leaves alone a request
// that a hold still in force blocks. The crash's state is made by
// releasing the hold in the database directly.
func TestStrandedRequestsRunAtOpen(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cfg := lethe.Config{DataDir: t.TempDir()}
			driver, dsn := "sqlite3", "file:"+filepath.Join(cfg.DataDir, "lethe.db")+"?_busy_timeout=5000"
			if pg {
				cfg.PostgresDSN = testenv.Postgres(t)
				driver, dsn = "pgx", cfg.PostgresDSN
			}
			db, err := lethe.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			m := "stranded"
			mustAdd(t, db, lethe.Grain{Memory: m, Type: "fact", Subject: "s", UserID: "ann"})
			mustAdd(t, db, lethe.Grain{Memory: m, Type: "fact", Subject: "s", UserID: "bob"})
			// ann's hold will be released behind the process's back; bob's
			// stays in force.
			block := func(user string) (string, string) {
				t.Helper()
				h, err := db.SetHold(as("tok_c"), lethe.HoldSpec{Memory: m, UserID: user})
				if err != nil {
					t.Fatal(err)
				}
				f, err := db.FileErasureRequest(as("tok_a"), lethe.RequestSpec{Memory: m, UserID: user, Reason: "other", Reference: "S-1"})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.ApproveErasureRequest(as("tok_b"), m, f.ID); err != nil {
					t.Fatal(err)
				}
				_, err = db.ExecuteErasureRequest(as("tok_a"), m, f.ID)
				wantCode(t, err, lethe.CodeHeld)
				return h.ID, f.ID
			}
			annHold, annReq := block("ann")
			_, bobReq := block("bob")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			raw, err := sql.Open(driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			q := `UPDATE holds SET released_us = 1 WHERE id = ?`
			if pg {
				q = `UPDATE holds SET released_us = 1 WHERE id = $1`
			}
			if _, err := raw.Exec(q, annHold); err != nil {
				t.Fatal(err)
			}
			raw.Close()

			db, err = lethe.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			r, err := db.ErasureRequest(ctx, m, annReq)
			if err != nil || r.Status != "executed" || r.ExecutedBy != "recovery" || r.Count != 1 {
				t.Fatalf("ann's request after Open: %+v, %v; want executed by recovery", r, err)
			}
			if n := recallCount(t, db, lethe.Query{Memory: m, UserID: "ann"}); n != 0 {
				t.Errorf("%d of ann's grains readable after her request ran", n)
			}
			r, err = db.ErasureRequest(ctx, m, bobReq)
			if err != nil || r.Status != "blocked" {
				t.Fatalf("bob's request, still held, after Open: %+v, %v", r, err)
			}
			if n := recallCount(t, db, lethe.Query{Memory: m, UserID: "bob"}); n != 1 {
				t.Errorf("%d of bob's grains readable, want 1", n)
			}
			leaves, err := db.AuditLeaves(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var erased, refusedBob int
			for _, b := range leaves {
				l := leafOf(t, b)
				switch {
				case l.Type == proofs.EventKeyErase && l.Request == annReq:
					erased++
				case l.Type == proofs.EventErasureRefused && l.Request == bobReq:
					refusedBob++
				}
			}
			if erased != 1 || refusedBob != 1 {
				t.Errorf("key.erase events of ann's request %d (want 1), refusals of bob's %d (want 1: Open left it alone)", erased, refusedBob)
			}
		})
	}
}
