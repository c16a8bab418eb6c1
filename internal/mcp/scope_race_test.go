package mcp_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/mcp"
)

// racer is the library with a call forced into the window between a
// locked session's check of a chain (its reads of the chain) and the
// forget's delete: before runs once, at the next Forget, before the
// library's.
type racer struct {
	mcp.Library
	before func()
}

func (r *racer) Forget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error) {
	if f := r.before; f != nil {
		r.before = nil
		f()
	}
	return r.Library.Forget(ctx, sel)
}

// TestLockedForgetRacingSupersede: a session locked to scope acme/prod
// forgets a grain whose chain is inside the lock when the tool checks it,
// and a supersede into acme/dev lands before the delete. The forget must
// be refused as a chain with a version outside the lock is (forbidden,
// naming no hash), dry run or not, with both versions still there; when
// the lock was checked only before the delete, it deleted the acme/dev
// version.
func TestLockedForgetRacingSupersede(t *testing.T) {
	raceLockedForget(t, mcp.Config{LockScope: "acme/prod"}, func(g *lethe.Grain) { g.Scope = "acme/dev" })
}

// TestNamespaceLockedForgetRacingSupersede is TestLockedForgetRacingSupersede
// for a session locked to namespace work: the supersede that lands before
// the delete moves the chain's newest version to namespace home. The
// forget must be refused (forbidden, naming no hash), dry run or not, with
// both versions still there; the namespace lock was checked only before
// the delete, which deleted the home version with the chain.
func TestNamespaceLockedForgetRacingSupersede(t *testing.T) {
	raceLockedForget(t, mcp.Config{LockNamespace: "work"}, func(g *lethe.Grain) { g.Namespace = "home" })
}

// raceLockedForget runs the forget of a session of cfg while a supersede
// that moves the chain's newest version out of the lock (elsewhere sets
// its scope or namespace) lands between the tool's check and the delete.
func raceLockedForget(t *testing.T, cfg mcp.Config, elsewhere func(g *lethe.Grain)) {
	t.Helper()
	db := openDB(t)
	ctx := context.Background()
	r := &racer{Library: db}
	cfg.Library = r
	cs := connect(t, cfg)
	for i, args := range []m{{"hash": ""}, {"hash": "", "dry_run": true}, {"hashes": nil}, {"hashes": nil, "dry_run": true}} {
		g1 := ok[mcp.AddOutput](t, cs, "add", m{"type": "fact", "subject": "race", "content": fmt.Sprint("v1-", i)}).Hash
		var g2 string
		r.before = func() {
			var err error
			next := lethe.Grain{Type: "fact", Subject: "race", Content: fmt.Sprint("v2-", i)}
			elsewhere(&next)
			g2, err = db.Supersede(ctx, g1, next)
			if err != nil {
				t.Fatal(err)
			}
		}
		mode := "hash"
		if _, list := args["hashes"]; list {
			args["hashes"], mode = []string{g1}, "hashes"
		} else {
			args["hash"] = g1
		}
		e := failed(t, cs, "forget", args)
		if g2 == "" {
			t.Fatalf("%v: the supersede did not run", args)
		}
		if e.Code != "forbidden" || e.Field != mode || !strings.Contains(e.Message, "outside this session's lock") {
			t.Errorf("forget %v: %+v, want forbidden on %s", args, e, mode)
		}
		if strings.Contains(e.Message, g1) || strings.Contains(e.Message, g2) {
			t.Errorf("forget %v: %q names a hash", args, e.Message)
		}
		for _, h := range []string{g1, g2} {
			if _, err := db.Get(ctx, "", h); err != nil {
				t.Errorf("forget %v: %s after a refused forget: %v", args, h[:8], err)
			}
		}
	}
}
