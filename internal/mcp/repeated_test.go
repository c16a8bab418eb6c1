package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/mcp"
)

// TestRepeatedArgument: a key repeated in one object of a tool call's
// arguments is refused (invalid_argument, naming it), as in a body of the
// HTTP API, and the call changes nothing. It was read as its last value,
// so {"dry_run": true, ..., "dry_run": false} forgot for real what a
// reader of its first value took for a preview.
func TestRepeatedArgument(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	cs := connect(t, mcp.Config{Library: db})
	h, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tool, args, field string }{
		{"forget", `{"hash": "` + h + `", "dry_run": true, "dry_run": false}`, "dry_run"},
		{"forget", `{"hash": "` + h + `", "hash": "` + h + `"}`, "hash"},
		{"recall", `{"subject": "alice", "subject": "bob"}`, "subject"},
		{"add", `{"type": "fact", "subject": "carol", "metadata": {"k": "1", "k": "2"}}`, "metadata"},
		{"add", `{"type": "fact", "subject": "carol", "tags": ["a"], "metadata": {"x": {"k": 1, "k": 2}}}`, "metadata"},
	} {
		e := failed(t, cs, c.tool, json.RawMessage(c.args))
		if e.Code != "invalid_argument" || e.Field != c.field || e.Message != "repeated key" {
			t.Errorf("%s %s: %+v, want invalid_argument %q on field %s", c.tool, c.args, e, "repeated key", c.field)
		}
	}
	if _, err := db.Get(ctx, "default", h); err != nil {
		t.Errorf("the grain after refused forgets: %v", err)
	}
	if p, err := db.Recall(ctx, lethe.Query{Subject: "carol"}); err != nil || len(p.Grains) != 0 {
		t.Errorf("refused adds wrote %v (%v)", p, err)
	}
}
