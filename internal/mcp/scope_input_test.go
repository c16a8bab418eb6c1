package mcp_test

import (
	"context"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/mcp"
)

// TestMalformedScopes: a scope with more than one leading or trailing '/',
// or an empty segment, is invalid_scope in every tool that takes one, as
// on the library and the HTTP API; it was trimmed of every '/', so
// erase_scope "/acme//" erased acme and recall "///" read every scope.
// One leading and one trailing '/' are dropped.
func TestMalformedScopes(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	h, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "kettle", Scope: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "kettle", Scope: "other"}); err != nil {
		t.Fatal(err)
	}
	for _, lock := range []string{"", "acme"} {
		cs := connect(t, mcp.Config{Library: db, Eraser: db, LockScope: lock})
		for _, bad := range []string{"/acme//", "//acme", "///", "acme//prod", "acme///"} {
			for _, c := range []struct {
				tool string
				args m
			}{
				{"recall", m{"subject": "kettle", "scope": bad}},
				{"add", m{"type": "fact", "subject": "kettle", "scope": bad}},
				{"erase_scope", m{"scope": bad}},
			} {
				if e := failed(t, cs, c.tool, c.args); e.Code != "invalid_scope" {
					t.Errorf("lock %q: %s %v: %+v, want invalid_scope", lock, c.tool, c.args, e)
				}
			}
		}
		if p := ok[mcp.RecallOutput](t, cs, "recall", m{"subject": "kettle", "scope": "/acme/"}); p.Count != 1 || p.Grains[0].Hash != h {
			t.Errorf("lock %q: recall /acme/: %+v, want the acme grain", lock, p)
		}
	}
	if _, err := db.Get(ctx, "", h); err != nil {
		t.Errorf("the acme grain after the refused erasures: %v", err)
	}
}
