package lethe_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
)

// TestScopedForgetAfterSupersede forces the window between a scope-limited
// caller's check of a chain and its forget: the check (a read of the
// chain, all of it within acme/prod) passes, then a supersede moves the
// grain's newest version to acme/dev, then the forget runs with
// Selector.Scopes acme/prod. It must refuse, dry run or not, with code
// forbidden naming no hash, both versions still there and no audit event;
// when the scopes were checked only before the delete, the forget deleted
// the acme/dev version with the chain. A lone grain outside the scopes
// (PostgreSQL's one-row delete) is refused the same way, and a chain
// within them is forgotten whole.
func TestScopedForgetAfterSupersede(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		scopes := []string{"acme/prod"}
		g1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "scoped", Object: "v1", Scope: "acme/prod"})
		chain, err := db.History(ctx, "", g1)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range chain {
			if g.Erased || !inScope(g.Scope, "acme/prod") {
				t.Fatalf("the check before the forget: %s in %q", g.Hash[:8], g.Scope)
			}
		}
		// The concurrent supersede lands between the check and the delete.
		g2, err := db.Supersede(ctx, g1, lethe.Grain{Type: "fact", Subject: "scoped", Object: "v2", Scope: "acme/dev"})
		if err != nil {
			t.Fatal(err)
		}
		lone := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "lone", Scope: "acme/dev"})
		before := auditWeight(t, db)
		for _, tc := range []struct {
			name, field string
			sel         lethe.Selector
		}{
			{"hash", "hash", lethe.Selector{Hash: g1}},
			{"newest", "hash", lethe.Selector{Hash: g2}},
			{"hashes", "hashes", lethe.Selector{Hashes: []string{g1}}},
			{"lone", "hash", lethe.Selector{Hash: lone}},
			{"subject", "subject", lethe.Selector{Subject: "scoped"}},
		} {
			for _, dry := range []bool{true, false} {
				sel := tc.sel
				sel.Scopes, sel.DryRun = scopes, dry
				res, err := db.Forget(ctx, sel)
				var le *lethe.Error
				if !errors.As(err, &le) || le.Code != lethe.CodeForbidden || le.Field != tc.field {
					t.Errorf("%s (dry run %v): %+v, %v; want forbidden, field %s", tc.name, dry, res, err, tc.field)
					continue
				}
				for _, h := range []string{g1, g2, lone} {
					if strings.Contains(err.Error(), h) {
						t.Errorf("%s: %q names a hash", tc.name, err)
					}
				}
			}
		}
		for _, h := range []string{g1, g2, lone} {
			if !exists(t, db, "", h) {
				t.Errorf("%s gone after a refused forget", h[:8])
			}
		}
		if after := auditWeight(t, db); after != before {
			t.Errorf("the refused forgets added %d audit events", after-before)
		}
		res, err := db.Forget(ctx, lethe.Selector{Hash: g1, Scopes: []string{"acme"}})
		want := []string{g1, g2}
		slices.Sort(want)
		if err != nil || !slices.Equal(res.Hashes, want) {
			t.Fatalf("forget within scopes acme: %+v, %v; want %v", res, err, want)
		}
	})
}

// TestNamespacedForgetAfterSupersede is TestScopedForgetAfterSupersede
// for Selector.Namespace: the check passes (the chain is in namespace
// work), a supersede moves the newest version to namespace home, and the
// forget confined to work must refuse, dry run or not, forbidden naming no
// hash, nothing deleted or audited; confined to work and scopes acme it
// refuses the same; a chain wholly in home is forgotten whole. A chain
// with an erased version is refused too, as with scopes. Without the
// in-transaction rule the forget deleted the home version with the chain.
func TestNamespacedForgetAfterSupersede(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		db.PauseCleaner()
		g1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "spaced", Object: "v1", Namespace: "work", Scope: "acme"})
		chain, err := db.History(ctx, "", g1)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range chain {
			if g.Erased || g.Namespace != "work" {
				t.Fatalf("the check before the forget: %s in %q", g.Hash[:8], g.Namespace)
			}
		}
		// The concurrent supersede lands between the check and the delete.
		g2, err := db.Supersede(ctx, g1, lethe.Grain{Type: "fact", Subject: "spaced", Object: "v2", Namespace: "home", Scope: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		lone := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "lone", Namespace: "home", Scope: "acme"})
		// A chain in work whose older version was erased.
		e1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "erased", Object: "v1", Namespace: "work", UserID: "u1"})
		e2, err := db.Supersede(ctx, e1, lethe.Grain{Type: "fact", Subject: "erased", Object: "v2", Namespace: "work", UserID: "u2"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ForgetUser(ctx, "", "u1"); err != nil {
			t.Fatal(err)
		}
		before := auditWeight(t, db)
		for _, tc := range []struct {
			name, field string
			sel         lethe.Selector
		}{
			{"hash", "hash", lethe.Selector{Hash: g1}},
			{"newest", "hash", lethe.Selector{Hash: g2}},
			{"hashes", "hashes", lethe.Selector{Hashes: []string{g1}}},
			{"lone", "hash", lethe.Selector{Hash: lone}},
			{"subject", "subject", lethe.Selector{Subject: "spaced"}},
			{"scopes too", "hash", lethe.Selector{Hash: g1, Scopes: []string{"acme"}}},
			{"erased version", "hash", lethe.Selector{Hash: e2}},
		} {
			for _, dry := range []bool{true, false} {
				sel := tc.sel
				sel.Namespace, sel.DryRun = "work", dry
				res, err := db.Forget(ctx, sel)
				var le *lethe.Error
				if !errors.As(err, &le) || le.Code != lethe.CodeForbidden || le.Field != tc.field {
					t.Errorf("%s (dry run %v): %+v, %v; want forbidden, field %s", tc.name, dry, res, err, tc.field)
					continue
				}
				for _, h := range []string{g1, g2, lone, e1, e2} {
					if strings.Contains(err.Error(), h) {
						t.Errorf("%s: %q names a hash", tc.name, err)
					}
				}
			}
		}
		for _, h := range []string{g1, g2, lone, e2} {
			if !exists(t, db, "", h) {
				t.Errorf("%s gone after a refused forget", h[:8])
			}
		}
		if after := auditWeight(t, db); after != before {
			t.Errorf("the refused forgets added %d audit events", after-before)
		}
		res, err := db.Forget(ctx, lethe.Selector{Hash: lone, Namespace: "home"})
		if err != nil || !slices.Equal(res.Hashes, []string{lone}) {
			t.Fatalf("forget in namespace home: %+v, %v; want %s", res, err, lone[:8])
		}
		_, err = db.Forget(ctx, lethe.Selector{Hash: g1, Namespace: "not a namespace"})
		if le := (*lethe.Error)(nil); !errors.As(err, &le) || le.Code != lethe.CodeInvalidArgument || le.Field != "namespace" {
			t.Errorf("forget in a malformed namespace: %v; want invalid_argument, field namespace", err)
		}
	})
}

// TestScopedForgetErasedVersion: a chain with a version an erasure made
// unreadable is refused to a forget confined to scopes (its scope is
// counted as unknown, as a scope-limited token's check counts it), both
// while the erased row waits for the cleaner and after the cleaner deleted
// it; a forget without scopes deletes the rest. A lone erased grain is a
// hash that names nothing, with scopes or without: not_found.
func TestScopedForgetErasedVersion(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		db.PauseCleaner()
		v1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "erased", Object: "v1", Scope: "acme", UserID: "u1"})
		v2, err := db.Supersede(ctx, v1, lethe.Grain{Type: "fact", Subject: "erased", Object: "v2", Scope: "acme", UserID: "u2"})
		if err != nil {
			t.Fatal(err)
		}
		// A lone grain (PostgreSQL's one-row delete), erased itself.
		lone := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "erased", Object: "lone", Scope: "acme", UserID: "u1"})
		if _, err := db.ForgetUser(ctx, "", "u1"); err != nil {
			t.Fatal(err)
		}
		for _, stage := range []string{"erasing", "cleaned"} {
			sels := []lethe.Selector{{Hash: v2}, {Hash: lone}}
			if stage == "cleaned" {
				if _, err := db.PurgeErased(ctx); err != nil {
					t.Fatal(err)
				}
				sels = sels[:1] // lone is gone
			}
			for _, sel := range sels {
				for _, dry := range []bool{true, false} {
					sel.Scopes, sel.DryRun = []string{"acme"}, dry
					res, err := db.Forget(ctx, sel)
					want := lethe.CodeForbidden
					if sel.Hash == lone {
						want = lethe.CodeNotFound
					}
					if lethe.ErrorCode(err) != want {
						t.Errorf("%s, %s (dry run %v): %+v, %v; want %s", stage, sel.Hash[:8], dry, res, err, want)
					}
				}
			}
			if !exists(t, db, "", v2) {
				t.Fatalf("%s: v2 gone after a refused forget", stage)
			}
		}
		res, err := db.Forget(ctx, lethe.Selector{Hash: v2})
		if err != nil || !slices.Equal(res.Hashes, []string{v2}) {
			t.Fatalf("forget without scopes: %+v, %v", res, err)
		}
	})
}

// TestScopedForgetWaitsOutALinkedVersion (PostgreSQL) holds a transaction
// that links p, a grain in acme/dev, after v2, the newest version of v1
// (what a supersede does), while a forget of v1 confined to acme reads the
// chain: it sees v1 and v2 only, and waits for v2's row lock. When the link
// commits, the forget must walk again and meet p, outside its scopes:
// refused, forbidden, nothing deleted.
func TestScopedForgetWaitsOutALinkedVersion(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	db := openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: dsn})
	v1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "linked", Object: "v1", Scope: "acme/prod"})
	v2, err := db.Supersede(ctx, v1, lethe.Grain{Type: "fact", Subject: "linked", Object: "v2", Scope: "acme/prod"})
	if err != nil {
		t.Fatal(err)
	}
	p := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "linked", Object: "v3", Scope: "acme/dev"})
	tx := rawTx(t, dsn)
	for _, q := range []struct{ sql, col, val, hash string }{
		{"UPDATE grains SET superseded_by = $1 WHERE hash = $2", "superseded_by", p, v2},
		{"UPDATE grains SET supersedes = $1 WHERE hash = $2", "supersedes", v2, p},
	} {
		if tag, err := tx.Exec(ctx, q.sql, q.val, q.hash); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("link %s: %v, %v", q.col, tag, err)
		}
	}
	done := forgetAsync(db, lethe.Selector{Hash: v1, Scopes: []string{"acme/prod"}})
	awaitLockWaiters(t, dsn, 1, nil)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if lethe.ErrorCode(r.err) != lethe.CodeForbidden {
		t.Fatalf("forget of v1 while p was linked after v2: %+v, %v; want forbidden", r.res, r.err)
	}
	for _, h := range []string{v1, v2, p} {
		if !exists(t, db, "", h) {
			t.Errorf("%s gone after a refused forget", h[:8])
		}
	}
}

func auditWeight(t *testing.T, db *lethe.DB) uint64 {
	t.Helper()
	n, err := db.AuditWeight(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
