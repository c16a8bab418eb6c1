package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/mcp"
	"github.com/lethe-io/lethe/proofs"
)

func openDB(t testing.TB) *lethe.DB {
	t.Helper()
	db, err := lethe.Open(context.Background(), lethe.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// connect runs a server for cfg and returns a client session to it over
// the SDK's in-memory transport.
func connect(t testing.TB, cfg mcp.Config) *sdk.ClientSession {
	t.Helper()
	s, err := mcp.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

func call(t testing.TB, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// ok calls a tool that must succeed and decodes its structured result.
func ok[T any](t testing.TB, cs *sdk.ClientSession, name string, args any) T {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s(%v): error result %s", name, args, text(res))
	}
	return decode[T](t, res.StructuredContent)
}

func decode[T any](t testing.TB, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return out
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// failed calls a tool that must fail and returns its error's code.
func failed(t testing.TB, cs *sdk.ClientSession, name string, args any) mcp.ErrorInfo {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("%s(%v) = %s, want an error result", name, args, text(res))
	}
	var info mcp.ErrorInfo
	if err := json.Unmarshal([]byte(text(res)), &info); err != nil {
		t.Fatalf("%s(%v): error text is not an ErrorInfo: %s", name, args, text(res))
	}
	return info
}

type m = map[string]any

func TestToolsAndSchemas(t *testing.T) {
	db := openDB(t)
	for _, erase := range []bool{false, true} {
		cfg := mcp.Config{Library: db}
		if erase {
			cfg.Eraser, cfg.Requester = db, db
		}
		cs := connect(t, cfg)
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		tools := map[string]*sdk.Tool{}
		var names []string
		for _, tl := range res.Tools {
			tools[tl.Name] = tl
			names = append(names, tl.Name)
		}
		slices.Sort(names)
		want := []string{"add", "forget", "history", "recall", "supersede"}
		if erase {
			want = []string{"add", "erase_scope", "erasure_request_approve", "erasure_request_create", "erasure_request_execute",
				"erasure_request_list", "erasure_request_reject", "erasure_request_show", "forget", "forget_user", "history",
				"recall", "supersede"}
		}
		if !slices.Equal(names, want) {
			t.Fatalf("erase=%v: tools %v, want %v", erase, names, want)
		}
		for _, tc := range []struct {
			name                              string
			readOnly, destructive, idempotent bool
		}{
			{"add", false, false, true}, {"recall", true, false, true}, {"supersede", false, false, true},
			{"history", true, false, true}, {"forget", false, true, false},
			{"forget_user", false, true, false}, {"erase_scope", false, true, false},
			{"erasure_request_create", false, false, false}, {"erasure_request_list", true, false, true},
			{"erasure_request_show", true, false, true}, {"erasure_request_approve", false, false, false},
			{"erasure_request_reject", false, true, false}, {"erasure_request_execute", false, true, false},
		} {
			tl := tools[tc.name]
			if tl == nil {
				continue
			}
			a := tl.Annotations
			if a == nil || a.ReadOnlyHint != tc.readOnly || a.DestructiveHint == nil || *a.DestructiveHint != tc.destructive ||
				a.IdempotentHint != tc.idempotent || a.OpenWorldHint == nil || *a.OpenWorldHint {
				t.Errorf("%s: annotations %+v, want readOnly=%v destructive=%v idempotent=%v closed world",
					tc.name, a, tc.readOnly, tc.destructive, tc.idempotent)
			}
			if tl.OutputSchema == nil {
				t.Errorf("%s: no output schema", tc.name)
			}
		}
		// recall takes every filter of the library's Query.
		in := decode[struct {
			Properties           map[string]any `json:"properties"`
			AdditionalProperties any            `json:"additionalProperties"`
		}](t, tools["recall"].InputSchema)
		for _, p := range []string{"memory", "subject", "relation", "object", "type", "namespace", "scope", "user_id", "tags",
			"include_superseded", "include_archived", "limit", "cursor"} {
			if in.Properties[p] == nil {
				t.Errorf("recall's input schema has no %q", p)
			}
		}
		if in.AdditionalProperties != false {
			t.Errorf("recall's input schema allows unknown properties: %v", in.AdditionalProperties)
		}
		fin := decode[struct {
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		}](t, tools["forget"].InputSchema)
		for _, p := range []string{"hash", "hashes", "subject", "user_id", "dry_run"} {
			if fin.Properties[p] == nil {
				t.Errorf("forget's input schema has no %q", p)
			}
		}
		// add requires type; supersede carries it forward (docs/api.md).
		for tl, want := range map[string][]string{"add": {"type"}, "supersede": {"hash"}} {
			req := decode[struct {
				Required []string `json:"required"`
			}](t, tools[tl].InputSchema).Required
			if !slices.Equal(req, want) {
				t.Errorf("%s's input schema requires %v, want %v", tl, req, want)
			}
		}
		if len(fin.Required) != 0 {
			t.Errorf("forget requires %v; with no target it runs the sweep", fin.Required)
		}
		fout := decode[struct {
			Properties map[string]any `json:"properties"`
		}](t, tools["forget"].OutputSchema)
		for _, p := range []string{"ok", "preserved", "reason", "hint", "dry_run", "to_drop", "to_compress"} {
			if fout.Properties[p] == nil {
				t.Errorf("forget's output schema has no %q", p)
			}
		}
	}
}

func TestGrainTools(t *testing.T) {
	db := openDB(t)
	cs := connect(t, mcp.Config{Library: db})
	add := m{"type": "fact", "subject": "alice", "relation": "likes", "object": "tea", "scope": "acme/prod", "tags": []string{"drinks"}}
	h1 := ok[mcp.AddOutput](t, cs, "add", add).Hash
	if h2 := ok[mcp.AddOutput](t, cs, "add", add).Hash; h2 != h1 {
		t.Errorf("add twice: %s then %s; add is annotated idempotent", h1, h2)
	}
	g, err := db.Get(context.Background(), "", h1)
	if err != nil || g.Subject != "alice" || g.Scope != "acme/prod" || !slices.Equal(g.Tags, []string{"drinks"}) {
		t.Fatalf("Get(%s) = %+v, %v", h1, g, err)
	}
	ok[mcp.AddOutput](t, cs, "add", m{"type": "fact", "subject": "bob", "relation": "likes", "object": "coffee"})

	page := ok[mcp.RecallOutput](t, cs, "recall", m{"subject": "alice"})
	if page.Count != 1 || page.Grains[0].Hash != h1 {
		t.Fatalf("recall subject=alice: %+v", page)
	}
	for _, q := range []m{{"tags": []string{"drinks"}}, {"scope": "acme"}, {"relation": "likes", "object": "tea"}, {"type": "fact", "subject": "alice"}} {
		if p := ok[mcp.RecallOutput](t, cs, "recall", q); p.Count != 1 || p.Grains[0].Hash != h1 {
			t.Errorf("recall %v: %d grains", q, p.Count)
		}
	}
	if p := ok[mcp.RecallOutput](t, cs, "recall", m{"limit": 1}); p.Count != 1 || p.Next == "" {
		t.Errorf("recall limit 1: %d grains, next %q", p.Count, p.Next)
	} else if p2 := ok[mcp.RecallOutput](t, cs, "recall", m{"limit": 1, "cursor": p.Next}); p2.Count != 1 || p2.Grains[0].Hash == p.Grains[0].Hash {
		t.Errorf("second page: %+v", p2)
	}

	sup := ok[mcp.SupersedeOutput](t, cs, "supersede", m{"hash": h1, "type": "fact", "object": "coffee"})
	if sup.Superseded != h1 || sup.Hash == h1 {
		t.Fatalf("supersede: %+v", sup)
	}
	if e := failed(t, cs, "supersede", m{"hash": h1, "type": "fact", "object": "coffee"}); e.Code != "already_superseded" {
		t.Errorf("second supersede: %+v", e)
	}
	hist := ok[mcp.HistoryOutput](t, cs, "history", m{"hash": h1})
	if len(hist.Grains) != 2 || hist.Grains[0].Hash != sup.Hash || hist.Grains[1].Hash != h1 || hist.Grains[0].Object != "coffee" {
		t.Fatalf("history: %+v", hist)
	}
	if p := ok[mcp.RecallOutput](t, cs, "recall", m{"subject": "alice", "include_superseded": true}); p.Count != 2 {
		t.Errorf("recall with superseded: %d grains", p.Count)
	}

	// Resources.
	ctx := context.Background()
	rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.GrainURI("default", h1)})
	if err != nil {
		t.Fatal(err)
	}
	rg := decode[lethe.Grain](t, json.RawMessage(rr.Contents[0].Text))
	if rg.Hash != h1 || rg.SupersededBy != sup.Hash || rr.Contents[0].MIMEType != "application/json" {
		t.Errorf("grain resource: %+v", rg)
	}
	rr, err = cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.GrainURI("default", h1) + "/history"})
	if err != nil {
		t.Fatal(err)
	}
	if rh := decode[mcp.HistoryOutput](t, json.RawMessage(rr.Contents[0].Text)); len(rh.Grains) != 2 {
		t.Errorf("history resource: %+v", rh)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.GrainURI("default", strings.Repeat("0", 64))}); err == nil ||
		!strings.Contains(err.Error(), "not found") {
		t.Errorf("missing grain resource: %v", err)
	}
	tpls, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tpls.ResourceTemplates) != 2 {
		t.Fatalf("templates: %v, %v", tpls, err)
	}

	// Bad input: clear errors with codes, nothing written.
	for _, tc := range []struct {
		tool string
		args m
		code string
	}{
		{"add", m{"type": "fact"}, "empty_grain"},
		{"add", m{"type": "fact", "content": "x", "importance": 2}, "invalid_argument"},
		{"add", m{"type": "fact", "content": "x", "scope": "a//b"}, "invalid_scope"},
		{"add", m{"type": "fact", "content": "x", "colour": "red"}, "invalid_argument"},
		{"recall", m{"memory": "Bad Name"}, "invalid_memory"},
		{"recall", m{"limit": 5000}, "too_large"},
		{"recall", m{"limit": -1}, "invalid_argument"},
		{"history", m{"hash": "xyz"}, "invalid_argument"},
		{"supersede", m{"hash": "xyz", "type": "fact"}, "invalid_argument"},
		{"add", m{"content": "no type"}, "invalid_argument"},
		{"forget", m{"hash": ""}, "empty_selector"},
		{"forget", m{"subject": "  "}, "empty_selector"},
		{"forget", m{"hashes": []string{}}, "empty_selector"},
		{"forget", m{"hash": h1, "subject": "alice"}, "invalid_argument"},
		{"forget", m{"hashes": []string{"nothex"}}, "invalid_argument"},
		{"forget", m{"hashes": make([]string, 10001), "dry_run": true}, "too_large"},
	} {
		if e := failed(t, cs, tc.tool, tc.args); e.Code != tc.code || e.Message == "" {
			t.Errorf("%s %v: %+v, want code %s", tc.tool, tc.args, e, tc.code)
		}
	}
	// An empty tag is refused, naming it, as over HTTP; never dropped.
	for _, tc := range []struct {
		tool  string
		args  m
		field string
	}{
		{"add", m{"type": "fact", "content": "tagged", "tags": []string{""}}, "tags[0]"},
		{"add", m{"type": "fact", "content": "tagged", "tags": []string{"a", " "}}, "tags[1]"},
		{"supersede", m{"hash": sup.Hash, "tags": []string{"a", ""}}, "tags[1]"},
	} {
		if e := failed(t, cs, tc.tool, tc.args); e.Code != "invalid_argument" || e.Field != tc.field {
			t.Errorf("%s %v: %+v, want invalid_argument field %s", tc.tool, tc.args, e, tc.field)
		}
	}
	// An item of a list at fault is named, not the list.
	if e := failed(t, cs, "forget", m{"hashes": []string{h1, "nothex"}, "dry_run": true}); e.Code != "invalid_argument" || e.Field != "hashes[1]" {
		t.Errorf("forget [h1, nothex]: %+v, want invalid_argument on hashes[1]", e)
	}
	// An empty value filter never means every value: leave it out.
	// Nor every type or namespace (as on the route).
	// Nor is a text search for nothing no search, nor a search finding
	// nothing: left out, there is no search.
	for _, f := range []string{"subject", "relation", "object", "user_id", "type", "namespace", "query"} {
		for _, v := range []string{"", " "} {
			if e := failed(t, cs, "recall", m{f: v}); e.Code != "invalid_argument" || e.Field != f {
				t.Errorf("recall %s %q: %+v, want invalid_argument field %s", f, v, e, f)
			}
		}
	}
	if p := ok[mcp.RecallOutput](t, cs, "recall", m{"include_superseded": true}); p.Count != 3 {
		t.Errorf("after bad input: %d grains, want 3", p.Count)
	}
}

func TestForgetProtection(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	cs := connect(t, mcp.Config{Library: db})
	add := func(args m) string { return ok[mcp.AddOutput](t, cs, "add", args).Hash }
	caveat := add(m{"type": "caveat", "subject": "stove", "content": "never leave it on"})
	goal := add(m{"type": "goal", "content": "ship v1"})
	pinned := add(m{"type": "fact", "subject": "stove", "content": "is gas", "pinned": true})
	important := add(m{"type": "fact", "content": "the key is under the mat", "importance": 0.95})
	plain := add(m{"type": "fact", "subject": "kettle", "content": "is electric"})
	plain2 := add(m{"type": "fact", "subject": "kettle", "content": "is blue"})

	count := func() int {
		p, err := db.Recall(ctx, lethe.Query{IncludeSuperseded: true, IncludeArchived: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Grains)
	}
	before := count()
	reasons := map[string]string{}
	for _, tc := range []struct {
		name string
		args m
	}{
		{"caveat", m{"hash": caveat}}, {"goal", m{"hash": goal}}, {"pinned", m{"hash": pinned}},
		{"importance", m{"hash": important}}, {"hashes", m{"hashes": []string{plain, caveat}}},
		{"subject", m{"subject": "stove"}},
	} {
		res := call(t, cs, "forget", tc.args)
		out := decode[mcp.ForgetOutput](t, res.StructuredContent)
		if !res.IsError || out.OK || !out.Preserved || out.Reason == "" || out.Hint == "" || out.Code != "protected" || out.Status != "refused" {
			t.Errorf("%s: isError=%v %+v, want a preserved refusal", tc.name, res.IsError, out)
		}
		reasons[tc.name] = out.Reason
		if n := count(); n != before {
			t.Fatalf("%s: %d grains after a refused forget, want %d", tc.name, n, before)
		}
	}
	// A dry run says the same, without an error.
	out := ok[mcp.ForgetOutput](t, cs, "forget", m{"hash": caveat, "dry_run": true})
	if !out.DryRun || out.Status != "protected" || out.Reason == "" || out.Count != 1 || out.Preview == "" {
		t.Errorf("dry run of a caveat: %+v", out)
	}
	if out.Reason != reasons["caveat"] {
		t.Errorf("dry run of a caveat: reason %q, the forget's %q: want the same", out.Reason, reasons["caveat"])
	}
	// Unprotected grains: dry run, then the real thing.
	sup := ok[mcp.SupersedeOutput](t, cs, "supersede", m{"hash": plain, "type": "fact", "content": "is electric and loud"}).Hash
	before = count()
	out = ok[mcp.ForgetOutput](t, cs, "forget", m{"subject": "kettle", "dry_run": true})
	want := []string{plain, plain2, sup}
	slices.Sort(want)
	if out.Status != "would_forget" || out.Count != 3 || !slices.Equal(out.Hashes, want) {
		t.Errorf("dry run by subject: %+v, want %v", out, want)
	}
	if n := count(); n != before {
		t.Fatalf("dry run changed the store: %d grains, want %d", n, before)
	}
	out = ok[mcp.ForgetOutput](t, cs, "forget", m{"subject": "kettle"})
	if !out.OK || out.Status != "forgotten" || out.Count != 3 || !slices.Equal(out.Hashes, want) || out.EventID == "" {
		t.Errorf("forget by subject: %+v", out)
	}
	if n := count(); n != before-3 {
		t.Errorf("%d grains after forgetting 3 of %d", n, before)
	}
	if _, err := db.Get(ctx, "", sup); lethe.ErrorCode(err) != "not_found" {
		t.Errorf("Get(forgotten) = %v", err)
	}
	out = ok[mcp.ForgetOutput](t, cs, "forget", m{"subject": "kettle"})
	if out.Status != "not_found" || out.Count != 0 {
		t.Errorf("forget again: %+v", out)
	}
	if e := failed(t, cs, "forget", m{"hash": plain}); e.Code != "not_found" {
		t.Errorf("forget a forgotten hash: %+v", e)
	}

	// A legal hold applies: the library refuses, and the grain stays.
	held := add(m{"type": "fact", "content": "evidence", "scope": "case/42"})
	if _, err := db.SetHold(ctx, lethe.HoldSpec{Scope: "case"}); err != nil {
		t.Fatal(err)
	}
	if e := failed(t, cs, "forget", m{"hash": held}); e.Code != "held" {
		t.Errorf("forget a held grain: %+v", e)
	}
	if _, err := db.Get(ctx, "", held); err != nil {
		t.Errorf("the held grain: %v", err)
	}
}

func TestForgetSweep(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	old := func(days int, g lethe.Grain) string {
		g.CreatedAt = time.Now().Add(-time.Duration(days) * 24 * time.Hour)
		h, err := db.Add(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	drop := old(120, lethe.Grain{Type: "fact", Content: "old news", Importance: 0.1})
	compress := old(60, lethe.Grain{Type: "fact", Subject: "s", Relation: "r", Object: "o", Content: "long story", Importance: 0.5})
	old(120, lethe.Grain{Type: "caveat", Content: "old but protected"})
	old(1, lethe.Grain{Type: "fact", Content: "fresh"})
	want, err := db.RiskSweep(ctx, "", lethe.RiskOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if want.Dropped != 1 || want.Compressed != 1 {
		t.Fatalf("the library's dry run: %+v (the test's grains are not at the risk it expects)", want)
	}

	cs := connect(t, mcp.Config{Library: db})
	out := ok[mcp.ForgetOutput](t, cs, "forget", m{"dry_run": true})
	if out.Mode != "sweep" || !out.DryRun || n(out.Scanned) != want.Scanned || n(out.ToDrop) != 1 || n(out.ToCompress) != 1 || n(out.Held) != 0 ||
		!slices.Equal(out.SampleHashesDrop, []string{drop}) || !slices.Equal(out.SampleHashesCompress, []string{compress}) {
		t.Errorf("sweep dry run: %+v", out)
	}
	if _, err := db.Get(ctx, "", drop); err != nil {
		t.Errorf("the dry run dropped a grain: %v", err)
	}
	out = ok[mcp.ForgetOutput](t, cs, "forget", m{})
	if out.DryRun || n(out.ToDrop) != 1 || n(out.ToCompress) != 1 || out.EventID == "" {
		t.Errorf("sweep: %+v", out)
	}
	if _, err := db.Get(ctx, "", drop); lethe.ErrorCode(err) != "not_found" {
		t.Errorf("the sweep kept the grain it dropped: %v", err)
	}
}

// n is *p, or -1 for nil (not reported).
func n(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

func TestLocks(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	outside, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "x", Content: "other team", Namespace: "other", Scope: "acme/prod"})
	if err != nil {
		t.Fatal(err)
	}
	outsideScope, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "x", Content: "dev", Namespace: "agent1", Scope: "acme/dev"})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, mcp.Config{Library: db, Eraser: db, LockNamespace: "agent1", LockScope: "acme/prod"})
	h := ok[mcp.AddOutput](t, cs, "add", m{"type": "fact", "subject": "x", "content": "mine"}).Hash
	g, err := db.Get(ctx, "", h)
	if err != nil || g.Namespace != "agent1" || g.Scope != "acme/prod" {
		t.Fatalf("locked add: %+v, %v", g, err)
	}
	below := ok[mcp.AddOutput](t, cs, "add", m{"type": "fact", "subject": "x", "content": "bot", "scope": "acme/prod/bot1", "namespace": "agent1"}).Hash

	p := ok[mcp.RecallOutput](t, cs, "recall", m{"subject": "x"})
	var got []string
	for _, g := range p.Grains {
		got = append(got, g.Hash)
	}
	slices.Sort(got)
	want := []string{h, below}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("locked recall: %v, want %v", got, want)
	}
	// A grain outside the lock is not found, as a missing one is: the
	// session cannot tell a grain of another partition from no grain.
	missing := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		tool string
		args m
		code string
	}{
		{"add", m{"type": "fact", "content": "y", "namespace": "other"}, "forbidden"},
		{"add", m{"type": "fact", "content": "y", "scope": "acme/dev"}, "forbidden"},
		{"add", m{"type": "fact", "content": "y", "scope": "acme/production"}, "forbidden"},
		{"add", m{"type": "fact", "content": "y", "memory": "elsewhere"}, "forbidden"},
		{"recall", m{"namespace": "other"}, "forbidden"},
		{"recall", m{"scope": "acme"}, "forbidden"},
		{"history", m{"hash": outside}, "not_found"},
		{"history", m{"hash": outsideScope}, "not_found"},
		{"history", m{"hash": missing}, "not_found"},
		{"supersede", m{"hash": outside, "type": "fact", "content": "mine now"}, "not_found"},
		{"supersede", m{"hash": missing, "type": "fact", "content": "mine now"}, "not_found"},
		{"supersede", m{"hash": h, "type": "fact", "scope": "acme/dev"}, "forbidden"},
		{"forget", m{"hash": outside}, "not_found"},
		{"forget", m{"hash": missing}, "not_found"},
		{"forget", m{}, "forbidden"},
		{"forget_user", m{"user_id": "u1"}, "forbidden"},
		{"erase_scope", m{"scope": "acme/prod"}, "forbidden"},
	} {
		e := failed(t, cs, tc.tool, tc.args)
		if e.Code != tc.code {
			t.Errorf("locked %s %v: %+v, want %s", tc.tool, tc.args, e, tc.code)
		}
		if strings.Contains(e.Message, "lock") && tc.code == "not_found" {
			t.Errorf("locked %s %v: the message tells the lock from a missing grain: %q", tc.tool, tc.args, e.Message)
		}
	}
	if a, b := failed(t, cs, "history", m{"hash": outside}), failed(t, cs, "history", m{"hash": missing}); strings.ReplaceAll(a.Message, outside, "H") != strings.ReplaceAll(b.Message, missing, "H") || a.Hint != b.Hint {
		t.Errorf("outside the lock %+v, missing %+v: told apart", a, b)
	}
	// A list of hashes forgets those inside and passes over the rest, as
	// missing ones.
	inside := ok[mcp.AddOutput](t, cs, "add", m{"type": "fact", "subject": "y", "content": "mine too"}).Hash
	if fo := ok[mcp.ForgetOutput](t, cs, "forget", m{"hashes": []string{inside, outsideScope}}); fo.Count != 1 || !slices.Equal(fo.Hashes, []string{inside}) {
		t.Errorf("locked forget of [inside, outside]: %+v", fo)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.GrainURI("default", outside)}); err == nil {
		t.Error("read a grain outside the lock")
	}
	for _, hh := range []string{outside, outsideScope, h} {
		if _, err := db.Get(ctx, "", hh); err != nil {
			t.Errorf("a refused call changed the store: %v", err)
		}
	}
	// The sweep may be previewed; forgetting by subject stays inside.
	if sw := ok[mcp.ForgetOutput](t, cs, "forget", m{"dry_run": true}); sw.Scanned != nil || n(sw.ToDrop) != 0 || n(sw.ToCompress) != 0 {
		t.Errorf("locked sweep preview: %+v", sw)
	}
	out := ok[mcp.ForgetOutput](t, cs, "forget", m{"subject": "x"})
	if out.ToDrop != nil || out.Scanned != nil {
		t.Errorf("a forget by subject reports sweep counts: %+v", out)
	}
	if out.Count != 2 {
		t.Errorf("locked forget by subject: %+v", out)
	}
	for _, hh := range []string{outside, outsideScope} {
		if _, err := db.Get(ctx, "", hh); err != nil {
			t.Errorf("a locked forget reached outside: %v", err)
		}
	}

	// A scope-only lock may erase its own scope.
	cs2 := connect(t, mcp.Config{Library: db, Eraser: db, LockScope: "acme/dev"})
	e := ok[mcp.ErasureOutput](t, cs2, "erase_scope", m{"scope": "acme/dev"})
	if e.Count != 1 || e.KeyFingerprint == "" || e.EventID == "" {
		t.Errorf("erase_scope: %+v", e)
	}
	if _, err := mcp.New(mcp.Config{Library: db, LockScope: "a//b"}); err == nil {
		t.Error("New accepted a bad lock scope")
	}
}

func TestEraseTools(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	h, err := db.Add(ctx, lethe.Grain{Type: "fact", Content: "about u42", UserID: "u42"})
	if err != nil {
		t.Fatal(err)
	}
	cs := connect(t, mcp.Config{Library: db})
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "forget_user", Arguments: m{"user_id": "u42"}}); err == nil {
		t.Error("forget_user answered without --allow-erase")
	}
	if _, err := db.Get(ctx, "", h); err != nil {
		t.Fatal(err)
	}
	cs = connect(t, mcp.Config{Library: db, Eraser: db})
	if e := failed(t, cs, "forget_user", m{"user_id": ""}); e.Code != "empty_selector" {
		t.Errorf("forget_user empty: %+v", e)
	}
	out := ok[mcp.ErasureOutput](t, cs, "forget_user", m{"user_id": "u42"})
	if out.Count != 1 || out.SubjectNonce == "" || out.EventID == "" {
		t.Errorf("forget_user: %+v", out)
	}
	if !out.Pending {
		proof, _ := out.Proof.(map[string]any)
		if proof["format"] != "lethe.proof/v1" {
			t.Errorf("proof: %v", out.Proof)
		}
		// The same proof as a tlog-proof file, which lethe verify reads.
		tp, err := proofs.ParseAnyProof([]byte(out.TlogProof))
		if err != nil {
			t.Fatalf("tlog_proof %q: %v", out.TlogProof, err)
		}
		b, _ := json.Marshal(out.Proof)
		jp, err := proofs.ParseAnyProof(b)
		if err != nil {
			t.Fatalf("proof: %v", err)
		}
		if tp.LeafIndex != jp.LeafIndex || tp.TreeSize != jp.TreeSize || !slices.Equal(tp.Leaf, jp.Leaf) {
			t.Errorf("tlog_proof (leaf %d, size %d) and proof (leaf %d, size %d) differ", tp.LeafIndex, tp.TreeSize, jp.LeafIndex, jp.TreeSize)
		}
	}
	if _, err := db.Get(ctx, "", h); lethe.ErrorCode(err) == "" {
		t.Error("the erased user's grain still reads")
	}
}

// TestLockConfinement makes random calls through a locked session, with
// small pools of namespaces, scopes and subjects so that they collide with
// grains outside the lock, and checks after each call that nothing outside
// the lock changed and that nothing outside it was shown.
func TestLockConfinement(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	namespaces := []string{"agent1", "other"}
	scopes := []string{"acme/prod", "acme/prod/bot", "acme/prodx", "acme/dev", "acme", ""}
	subjects := []string{"x", "y"}
	rnd := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[rnd.IntN(len(s))] }
	lock := &lethe.Grain{Namespace: "agent1", Scope: "acme/prod"}
	inside := func(g *lethe.Grain) bool {
		return g.Namespace == lock.Namespace && (g.Scope == lock.Scope || strings.HasPrefix(g.Scope, lock.Scope+"/"))
	}
	// Grains outside the lock, written directly, and what they must stay.
	outside := map[string]lethe.Grain{}
	for i := range 12 {
		g := lethe.Grain{Type: "fact", Subject: pick(subjects), Content: fmt.Sprintf("outside %d", i),
			Namespace: pick(namespaces), Scope: pick(scopes)}
		if inside(&g) || (g.Namespace == "agent1" && g.Scope == "") {
			continue
		}
		h, err := db.Add(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := db.Get(ctx, "", h)
		if err != nil {
			t.Fatal(err)
		}
		outside[h] = *got
	}
	var hashes []string
	for h := range outside {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	cs := connect(t, mcp.Config{Library: db, Eraser: db, LockNamespace: "agent1", LockScope: "acme/prod"})
	var mine []string
	anyHash := func() string {
		if len(mine) > 0 && rnd.IntN(2) == 0 {
			return mine[rnd.IntN(len(mine))]
		}
		return hashes[rnd.IntN(len(hashes))]
	}
	for step := range 150 {
		var name string
		var args m
		switch rnd.IntN(8) {
		case 0, 1:
			name, args = "add", m{"type": "fact", "subject": pick(subjects), "content": fmt.Sprintf("step %d", step),
				"namespace": pick(namespaces), "scope": pick(scopes)}
		case 2:
			name, args = "recall", m{"subject": pick(subjects), "namespace": pick(namespaces), "scope": pick(scopes), "include_superseded": true}
		case 3:
			name, args = "supersede", m{"hash": anyHash(), "type": "fact", "content": fmt.Sprintf("new %d", step), "scope": pick(scopes)}
		case 4:
			name, args = "history", m{"hash": anyHash()}
		case 5:
			name, args = "forget", m{"hash": anyHash(), "dry_run": rnd.IntN(2) == 0}
		case 6:
			name, args = "forget", m{"subject": pick(subjects)}
		default:
			name, args = "erase_scope", m{"scope": pick(scopes)}
		}
		res := call(t, cs, name, args)
		if !res.IsError {
			switch name {
			case "add":
				mine = append(mine, decode[mcp.AddOutput](t, res.StructuredContent).Hash)
			case "supersede":
				mine = append(mine, decode[mcp.SupersedeOutput](t, res.StructuredContent).Hash)
			case "recall", "history":
				for _, g := range decode[mcp.RecallOutput](t, res.StructuredContent).Grains {
					if !inside(&g) {
						t.Fatalf("step %d: %s %v showed a grain outside the lock: %+v", step, name, args, g)
					}
				}
			}
		}
		for _, h := range hashes {
			g, err := db.Get(ctx, "", h)
			want := outside[h]
			if err != nil || g.Content != want.Content || g.SupersededBy != want.SupersededBy || g.Archived != want.Archived {
				t.Fatalf("step %d: %s %v changed a grain outside the lock: %+v, %v", step, name, args, g, err)
			}
		}
	}
	if len(mine) == 0 {
		t.Fatal("no call succeeded: the test exercised nothing")
	}
}

// The recall tool searches by text and by vector as the library does, and
// what a crypto-erasure took is never found again.
func TestSearchTools(t *testing.T) {
	db := openDB(t)
	cs := connect(t, mcp.Config{Library: db, Eraser: db})
	tea := ok[mcp.AddOutput](t, cs, "add", m{"type": "fact", "content": "Ada is allergic to penicillin", "user_id": "ada",
		"embedding": []float32{1, 0, 0}}).Hash
	ok[mcp.AddOutput](t, cs, "add", m{"type": "fact", "content": "Bob drinks green tea every morning", "user_id": "bob",
		"embedding": []float32{0, 1, 0}})
	p := ok[mcp.RecallOutput](t, cs, "recall", m{"query": "penicillin allergies"})
	if p.Count != 1 || p.Grains[0].Hash != tea || p.Grains[0].Score <= 0 {
		t.Fatalf("recall query: %+v", p)
	}
	p = ok[mcp.RecallOutput](t, cs, "recall", m{"embedding": []float32{0.9, 0.1, 0}, "limit": 1})
	if p.Count != 1 || p.Grains[0].Hash != tea {
		t.Fatalf("recall embedding: %+v", p)
	}
	if e := failed(t, cs, "add", m{"type": "fact", "content": "x", "embedding": []float32{1, 2}}); e.Code != "dimension_mismatch" {
		t.Errorf("add with another dimension: %+v", e)
	}
	ok[mcp.ErasureOutput](t, cs, "forget_user", m{"user_id": "ada"})
	for _, q := range []m{{"query": "penicillin"}, {"embedding": []float32{1, 0, 0}}} {
		for _, g := range ok[mcp.RecallOutput](t, cs, "recall", q).Grains {
			if g.Hash == tea {
				t.Errorf("recall %v after ada's erasure returns her grain", q)
			}
		}
	}
}

// TestRequestTools drives the erasure request tools through the SDK
// client on the embedded store, whose every call is the one principal
// "local": it files, lists, shows and rejects, but cannot approve its own
// request (four eyes); once a second principal approved through the
// library, execute erases with its proof.
func TestRequestTools(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	h, err := db.Add(ctx, lethe.Grain{Type: "fact", Content: "about u7", UserID: "u7"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connect(t, mcp.Config{Library: db}).CallTool(ctx, &sdk.CallToolParams{Name: "erasure_request_create",
		Arguments: m{"user_id": "u7", "reason": "other", "reference": "T-1"}}); err == nil {
		t.Error("erasure_request_create answered without a Requester")
	}
	s := connect(t, mcp.Config{Library: db, Requester: db})
	due := time.Now().UTC().Add(10 * 24 * time.Hour).Truncate(time.Second)
	filed := ok[mcp.RequestCreateOutput](t, s, "erasure_request_create",
		m{"user_id": "u7", "reason": "data_subject_request", "reference": "T-100", "due": due.Format(time.RFC3339)})
	r := filed.Request
	if r == nil || r.Status != "pending" || r.RequestedBy != "local" || r.Reference != "T-100" || filed.SubjectNonce == "" ||
		!r.Due.Equal(due) || filed.Preview == nil || filed.Preview.Count != 1 {
		t.Fatalf("create: %+v %+v", r, filed.Preview)
	}
	if strings.Contains(text(call(t, s, "erasure_request_show", m{"id": r.ID})), "u7") {
		t.Error("a request's JSON names its subject")
	}
	for _, c := range []struct {
		tool string
		args m
		code string
	}{
		{"erasure_request_approve", m{"id": r.ID}, "four_eyes"},
		{"erasure_request_execute", m{"id": r.ID}, "invalid_state"},
		{"erasure_request_create", m{"user_id": "u7", "scope": "a", "reason": "other", "reference": "T"}, "invalid_argument"},
		{"erasure_request_create", m{"user_id": "u7", "reason": "because", "reference": "T"}, "invalid_argument"},
		{"erasure_request_create", m{"user_id": "u7", "reason": "other", "reference": "T", "due": "tomorrow"}, "invalid_argument"},
		{"erasure_request_list", m{"due_before": "soon"}, "invalid_argument"},
		{"erasure_request_show", m{"id": "nope"}, "invalid_argument"},
		{"erasure_request_show", m{"id": strings.Repeat("0", 32)}, "not_found"},
	} {
		if e := failed(t, s, c.tool, c.args); e.Code != c.code {
			t.Errorf("%s %v: %+v, want %s", c.tool, c.args, e, c.code)
		}
	}
	if l := ok[mcp.RequestListOutput](t, s, "erasure_request_list", m{"status": "pending"}); l.Count != 1 || l.Requests[0].ID != r.ID {
		t.Errorf("list pending: %+v", l)
	}
	if _, err := db.Get(ctx, "", h); err != nil {
		t.Fatalf("a refused call erased: %v", err)
	}
	// A second request, rejected: its subject is gone, nothing erased.
	other := ok[mcp.RequestCreateOutput](t, s, "erasure_request_create", m{"user_id": "u7", "reason": "other", "reference": "T-101"})
	if got := ok[mcp.RequestOutput](t, s, "erasure_request_reject", m{"id": other.Request.ID}); got.Request.Status != "rejected" {
		t.Errorf("reject: %+v", got.Request)
	}
	// Four eyes: a second principal approves, then the session executes.
	if _, err := db.ApproveErasureRequest(lethe.WithActor(ctx, "tok-second-dpo"), "", r.ID); err != nil {
		t.Fatal(err)
	}
	out := ok[mcp.ErasureOutput](t, s, "erasure_request_execute", m{"id": r.ID})
	if out.Count != 1 || out.EventID == "" || out.KeyFingerprint == "" {
		t.Errorf("execute: %+v", out)
	}
	if got := ok[mcp.RequestOutput](t, s, "erasure_request_show", m{"id": r.ID}); got.Request.Status != "executed" ||
		got.Request.ApprovedBy != "tok-second-dpo" || got.Request.EventID != out.EventID {
		t.Errorf("show after execute: %+v", got.Request)
	}
	if _, err := db.Get(ctx, "", h); lethe.ErrorCode(err) == "" {
		t.Error("the erased user's grain still reads")
	}
	// A locked session cannot use them.
	locked := connect(t, mcp.Config{Library: db, Requester: db, LockScope: "acme"})
	if e := failed(t, locked, "erasure_request_list", m{}); e.Code != "forbidden" {
		t.Errorf("locked list: %+v", e)
	}
}

// TestForgetDryRunIsTheLibrarys: forget's dry run is the library's, so it
// sees what a preview through read paths did not: a legal hold (held, with
// the hold), and the store's own protection policy rather than the default
// one. By hash and by user_id, with nothing changed.
func TestForgetDryRunIsTheLibrarys(t *testing.T) {
	ctx := context.Background()
	policy := lethe.DefaultPolicy()
	policy.Risk.ProtectedTypes = append(policy.Risk.ProtectedTypes, "belief")
	db, err := lethe.Open(ctx, lethe.Config{DataDir: t.TempDir(), Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cs := connect(t, mcp.Config{Library: db})
	add := func(args m) string { return ok[mcp.AddOutput](t, cs, "add", args).Hash }
	held := add(m{"type": "fact", "content": "held", "user_id": "u1"})
	belief := add(m{"type": "belief", "content": "a belief"})
	free := add(m{"type": "fact", "content": "free", "user_id": "u2"})
	hold, err := db.SetHold(ctx, lethe.HoldSpec{UserID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   m
		status string
	}{
		{"held by hash", m{"hash": held, "dry_run": true}, "held"},
		{"held by user", m{"user_id": "u1", "dry_run": true}, "held"},
		{"held among hashes", m{"hashes": []string{free, held}, "dry_run": true}, "held"},
		{"protected by the store's policy", m{"hash": belief, "dry_run": true}, "protected"},
		{"free", m{"hash": free, "dry_run": true}, "would_forget"},
	} {
		out := ok[mcp.ForgetOutput](t, cs, "forget", tc.args)
		if !out.DryRun || out.Status != tc.status || out.Count == 0 {
			t.Errorf("%s: %+v, want %s", tc.name, out, tc.status)
		}
		if (tc.status == "held") != (out.HeldBy == hold.ID) || (tc.status == "protected") != (out.Reason != "") {
			t.Errorf("%s: held_by %q reason %q", tc.name, out.HeldBy, out.Reason)
		}
	}
	// The real forget meets what the dry run said.
	if e := failed(t, cs, "forget", m{"hash": held}); e.Code != "held" {
		t.Errorf("forget of a held grain: %+v", e)
	}
	for _, h := range []string{held, belief, free} {
		if _, err := db.Get(ctx, "", h); err != nil {
			t.Errorf("%s after dry runs: %v", h, err)
		}
	}
}

// TestArgumentErrorsQuoteNoValue sends arguments of the wrong type, unknown
// fields and missing ones, each carrying a marker, and checks that every
// error result names the field and the problem but never the marker (the
// SDK's own schema messages quote the value).
func TestArgumentErrorsQuoteNoValue(t *testing.T) {
	db := openDB(t)
	cs := connect(t, mcp.Config{Library: db, Eraser: db, Requester: db})
	const mark = "bob.private@example.com"
	for _, tc := range []struct {
		tool  string
		args  m
		field string
	}{
		{"add", m{"type": "fact", "content": "x", "importance": mark}, "importance"},
		{"add", m{"type": "fact", "content": "x", "tags": mark}, "tags"},
		{"add", m{"type": "fact", "content": "x", "tags": []any{"a", m{"k": mark}}}, "tags[1]"},
		{"add", m{"type": "fact", "content": "x", "metadata": m{mark: 4155550123}}, "metadata"},
		{"add", m{"type": "fact", "content": "x", "subject": 4155550123}, "subject"},
		{"add", m{"type": "fact", "content": "x", "pinned": mark}, "pinned"},
		{"add", m{"type": "fact", "content": "x", mark: "x"}, ""},
		{"add", m{"type": []string{mark}, "content": "x"}, "type"},
		{"recall", m{"limit": mark}, "limit"},
		{"recall", m{"limit": 1e30}, ""}, // in the schema, too large for an int
		{"recall", m{"embedding": []any{1, mark}}, "embedding[1]"},
		{"forget", m{"hashes": mark}, "hashes"},
		{"forget", m{"subject": 4155550123}, "subject"},
		{"forget", m{"dry_run": mark}, "dry_run"},
		{"supersede", m{"object": mark}, "hash"},
		{"history", m{"hash": m{"x": mark}}, "hash"},
		{"forget_user", m{"user_id": []string{mark}}, "user_id"},
		{"erasure_request_list", m{"overdue": mark}, "overdue"},
	} {
		res := call(t, cs, tc.tool, tc.args)
		txt := text(res)
		if !res.IsError {
			t.Errorf("%s %v: %s, want an error result", tc.tool, tc.args, txt)
			continue
		}
		if strings.Contains(txt, mark) || strings.Contains(txt, "4155550123") || strings.Contains(txt, "4.155550123e+09") || strings.Contains(txt, "1e+30") {
			t.Errorf("%s %v: error quotes the value: %s", tc.tool, tc.args, txt)
		}
		var info mcp.ErrorInfo
		if err := json.Unmarshal([]byte(txt), &info); err != nil {
			t.Errorf("%s %v: error text is not an ErrorInfo: %s", tc.tool, tc.args, txt)
			continue
		}
		if info.Code != "invalid_argument" || info.Field != tc.field || info.Message == "" {
			t.Errorf("%s %v: %+v, want invalid_argument for field %q", tc.tool, tc.args, info, tc.field)
		}
	}
	// A tool name the server does not offer (here an erasure tool without
	// --allow-erase, and a name that is data) is the JSON-RPC error the SDK
	// sends, invalid params, with lethe's code and field instead of the
	// SDK's message, which quotes the name.
	plain := connect(t, mcp.Config{Library: db})
	for _, name := range []string{mark, "forget_user"} {
		_, err := plain.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: m{"user_id": mark}})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("tool %q: %v, want a JSON-RPC invalid params error", name, err)
			continue
		}
		if strings.Contains(err.Error(), mark) || strings.Contains(err.Error(), "forget_user") {
			t.Errorf("tool %q: the error quotes the name or the arguments: %v", name, err)
		}
		var info mcp.ErrorInfo
		if err := json.Unmarshal(we.Data, &info); err != nil || info.Code != "invalid_argument" || info.Field != "name" || info.Hint == "" {
			t.Errorf("tool %q: data %s, want code invalid_argument, field name and a hint", name, we.Data)
		}
	}
}

// TestHTTPMalformedBody posts bodies that are not JSON-RPC, each with a
// marker, and checks that the answer is a 400 with code invalid_argument
// that does not quote the body (the SDK's "malformed payload" does).
func TestHTTPMalformedBody(t *testing.T) {
	h, err := mcp.NewHandler(mcp.Config{Library: openDB(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	const mark = "mary@example.com"
	for _, body := range []string{
		"not json " + mark,
		`{"jsonrpc":"2.0","id":1,"method":"ping"} ` + mark,
		`{"` + mark + `":1}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},"` + mark + `"]`,
		`{"jsonrpc":"2.0","id":{"x":"` + mark + `"},"method":"ping"}`,
	} {
		status, b := postRaw(t, srv.URL, body)
		if strings.Contains(string(b), mark) {
			t.Errorf("%s: answer quotes the body: %d %s", body, status, b)
		}
		var info mcp.ErrorInfo
		if status != http.StatusBadRequest || json.Unmarshal(b, &info) != nil || info.Code != "invalid_argument" {
			t.Errorf("%s: %d %s, want 400 invalid_argument", body, status, b)
		}
	}
}

// TestResourceErrorCodes checks that a refused resource read is a JSON-RPC
// error with a valid code (not 0) that carries lethe's code, field and hint.
func TestResourceErrorCodes(t *testing.T) {
	db := openDB(t)
	cs := connect(t, mcp.Config{Library: db, LockScope: "acme"})
	ctx := context.Background()
	hash := strings.Repeat("0", 64)
	for _, tc := range []struct {
		uri  string
		code int64
		info string // lethe's code, "" for none
	}{
		{mcp.GrainURI("other", hash), mcp.CodeRefused, "forbidden"},
		{mcp.GrainURI("other", hash) + "/history", mcp.CodeRefused, "forbidden"},
		{mcp.GrainURI("default", hash), sdk.CodeResourceNotFound, ""},
	} {
		_, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: tc.uri})
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			t.Errorf("%s: %v, want a JSON-RPC error", tc.uri, err)
			continue
		}
		if we.Code != tc.code {
			t.Errorf("%s: code %d (%s), want %d", tc.uri, we.Code, we.Message, tc.code)
		}
		if tc.info == "" {
			continue
		}
		var info mcp.ErrorInfo
		if err := json.Unmarshal(we.Data, &info); err != nil || info.Code != tc.info || info.Field != "memory" || info.Hint == "" {
			t.Errorf("%s: data %s, want code %s with field and hint", tc.uri, we.Data, tc.info)
		}
	}
}

// TestSupersedeSchema checks that supersede's schema allows what
// docs/api.md says: a field left out carries forward, type included, and
// null is the empty value of any field; add still requires its type.
func TestSupersedeSchema(t *testing.T) {
	db := openDB(t)
	cs := connect(t, mcp.Config{Library: db})
	ctx := context.Background()
	h := ok[mcp.AddOutput](t, cs, "add", m{"type": "belief", "subject": "alice", "relation": "lives_in",
		"object": "Paris", "content": "she said so", "tags": []string{"home"}}).Hash

	// No type: it carries forward.
	h2 := ok[mcp.SupersedeOutput](t, cs, "supersede", m{"hash": h, "object": "Madrid"}).Hash
	g, err := db.Get(ctx, "default", h2)
	if err != nil {
		t.Fatal(err)
	}
	if g.Type != "belief" || g.Object != "Madrid" || g.Content != "she said so" {
		t.Errorf("supersede without type: %+v, want type belief carried forward", g)
	}

	// null clears a field, as "" and [] do; a null type carries forward.
	h3 := ok[mcp.SupersedeOutput](t, cs, "supersede", m{"hash": h2, "type": nil, "content": nil, "tags": nil}).Hash
	if g, err = db.Get(ctx, "default", h3); err != nil {
		t.Fatal(err)
	}
	if g.Type != "belief" || g.Content != "" || len(g.Tags) != 0 || g.Object != "Madrid" {
		t.Errorf("supersede with nulls: %+v, want type carried, content and tags cleared", g)
	}

	// add keeps its schema: type required, content a string.
	if e := failed(t, cs, "add", m{"content": "x"}); e.Code != "invalid_argument" || e.Field != "type" {
		t.Errorf("add without type: %+v", e)
	}
	if e := failed(t, cs, "add", m{"type": "fact", "subject": "s", "content": nil}); e.Code != "invalid_argument" || e.Field != "content" {
		t.Errorf("add with null content: %+v", e)
	}
	// hash stays required and a string.
	if e := failed(t, cs, "supersede", m{"hash": nil, "object": "x"}); e.Code != "invalid_argument" || e.Field != "hash" {
		t.Errorf("supersede with null hash: %+v", e)
	}
}

// TestStdioBadLine writes lines that are not JSON-RPC messages to a
// session over StdioTransport: each gets a JSON-RPC error reply (-32700
// for a line that is not JSON, -32600 for JSON that is no message) that
// does not quote it, and the session goes on to answer a ping.
func TestStdioBadLine(t *testing.T) {
	s, err := mcp.New(mcp.Config{Library: openDB(t)})
	if err != nil {
		t.Fatal(err)
	}
	ss := startStdio(t, context.Background(), s)
	const mark = "mary@example.com"
	for _, tc := range []struct {
		line string
		code int64
	}{
		{"not json at all " + mark, jsonrpc.CodeParseError},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"} ` + mark, jsonrpc.CodeParseError},
		{`{"` + mark + `":1}`, jsonrpc.CodeInvalidRequest},
		{`[]`, jsonrpc.CodeInvalidRequest},
	} {
		if err := ss.send(tc.line); err != nil {
			t.Fatalf("%s: write: %v (the session ended)", tc.line, err)
		}
		reply := string(ss.next(tc.line))
		var r struct {
			ID    any            `json:"id"`
			Error *jsonrpc.Error `json:"error"`
		}
		if err := json.Unmarshal([]byte(reply), &r); err != nil || r.Error == nil || r.Error.Code != tc.code || r.ID != nil {
			t.Errorf("%s: reply %s, want error %d with a null id", tc.line, reply, tc.code)
		}
		if strings.Contains(reply, mark) {
			t.Errorf("%s: reply quotes the line: %s", tc.line, reply)
		}
	}
	ss.send(`{"jsonrpc":"2.0","id":7,"method":"ping"}`)
	if reply := string(ss.next("ping")); !strings.Contains(reply, `"id":7`) || !strings.Contains(reply, `"result"`) {
		t.Errorf("ping after bad lines: %s", reply)
	}
	ss.end()
}

// TestLockUnseen checks that a locked session learns nothing of the
// versions outside its lock, as a scope-limited token over HTTP does
// (internal/api testScopesUnseen): a hash outside the lock answers every
// tool and resource exactly what a hash that names no grain answers, no
// answer names a version outside the lock (a chain's link to one is no
// link), and a forget never deletes a version outside it.
func TestLockUnseen(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	add := func(g lethe.Grain) string {
		t.Helper()
		g.Type = "fact"
		h, err := db.Add(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	supersede := func(old string, g lethe.Grain, set ...string) string {
		t.Helper()
		h, err := db.Supersede(ctx, old, g, set...)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	in := lethe.Grain{Namespace: "agent1", Scope: "acme/prod"}
	at := func(ns, scope, object string) lethe.Grain {
		return lethe.Grain{Subject: "bob", Object: object, Namespace: ns, Scope: scope}
	}
	out := add(at("agent1", "acme/dev", "out"))
	// Chains across the lock: c1 inside, superseded by c2 in another
	// scope; d1 in another scope, superseded by d2 inside; n1 inside,
	// superseded by n2 in another namespace; e1 and e2 both inside.
	c1 := add(at(in.Namespace, in.Scope, "c"))
	c2 := supersede(c1, lethe.Grain{Scope: "acme/dev"})
	d1 := add(at(in.Namespace, "acme/dev", "d"))
	d2 := supersede(d1, lethe.Grain{Scope: in.Scope})
	n1 := add(at(in.Namespace, in.Scope, "n"))
	n2 := supersede(n1, lethe.Grain{Namespace: "other"})
	e1 := add(at(in.Namespace, in.Scope, "e"))
	e2 := supersede(e1, lethe.Grain{Scope: in.Scope + "/x"})
	unseen := []string{out, c2, d1, n2}
	missing := strings.Repeat("0", 64)
	cs := connect(t, mcp.Config{Library: db, LockNamespace: in.Namespace, LockScope: in.Scope})

	// No answer names a version outside the lock; a link inside stays.
	noneNamed := func(what, answer string) {
		t.Helper()
		for _, h := range unseen {
			if strings.Contains(answer, h) {
				t.Errorf("%s names %s, a version outside the lock: %s", what, h, answer)
			}
		}
	}
	res := call(t, cs, "recall", m{"subject": "bob", "include_superseded": true})
	noneNamed("recall", text(res))
	if p := decode[mcp.RecallOutput](t, res.StructuredContent); p.Count != 5 {
		t.Errorf("locked recall: %d grains, want c1, d2, n1, e1, e2", p.Count)
	}
	for _, h := range []string{c1, d2, n1, e1, e2} {
		noneNamed("history "+h, text(call(t, cs, "history", m{"hash": h})))
		for _, uri := range []string{mcp.GrainURI("default", h), mcp.GrainURI("default", h) + "/history"} {
			rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
			if err != nil {
				t.Fatalf("%s: %v", uri, err)
			}
			noneNamed(uri, rr.Contents[0].Text)
		}
	}
	rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: mcp.GrainURI("default", e1)})
	if err != nil || decode[lethe.Grain](t, json.RawMessage(rr.Contents[0].Text)).SupersededBy != e2 {
		t.Errorf("a link inside the lock was hidden: %v %v", rr, err)
	}

	// A hash outside the lock answers what a missing one answers, whole.
	answer := func(name string, args m) string {
		t.Helper()
		res := call(t, cs, name, args)
		b, _ := json.Marshal(struct {
			IsError    bool
			Text       string
			Structured any
		}{res.IsError, text(res), res.StructuredContent})
		return string(b)
	}
	read := func(uri string) string {
		t.Helper()
		rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		b, _ := json.Marshal(rr)
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			b, _ = json.Marshal(we)
		} else if err != nil {
			b = []byte(err.Error())
		}
		return string(b)
	}
	for _, h := range unseen {
		for _, tc := range []struct {
			name string
			args func(h string) m
		}{
			{"history", func(h string) m { return m{"hash": h} }},
			{"supersede", func(h string) m { return m{"hash": h, "content": "mine now"} }},
			{"forget", func(h string) m { return m{"hash": h} }},
			{"forget", func(h string) m { return m{"hash": h, "dry_run": true} }},
			{"forget", func(h string) m { return m{"hashes": []string{h}} }},
			{"forget", func(h string) m { return m{"hashes": []string{h, h}, "dry_run": true} }},
		} {
			a, b := answer(tc.name, tc.args(h)), answer(tc.name, tc.args(missing))
			if strings.ReplaceAll(a, h, missing) != b {
				t.Errorf("%s %v: outside the lock %s, missing %s: want the same answer", tc.name, tc.args(h), a, b)
			}
		}
		for _, uri := range []string{mcp.GrainURI("default", "%s"), mcp.GrainURI("default", "%s") + "/history"} {
			a, b := read(fmt.Sprintf(uri, h)), read(fmt.Sprintf(uri, missing))
			if strings.ReplaceAll(a, h, missing) != b {
				t.Errorf("read %s: outside the lock %s, missing %s: want the same answer", uri, a, b)
			}
		}
	}

	// A forget of a chain with a version outside is refused, naming no
	// hash; the list [e1, out] forgets e1's chain alone.
	for _, tc := range []struct {
		args  m
		field string
	}{
		{m{"hash": c1}, "hash"},
		{m{"hashes": []string{d2}}, "hashes[0]"},
		{m{"hashes": []string{missing, e1, n1}, "dry_run": true}, "hashes[2]"},
		{m{"hash": n1, "dry_run": true}, "hash"},
		{m{"subject": "bob", "dry_run": true}, "subject"},
	} {
		res := call(t, cs, "forget", tc.args)
		noneNamed(fmt.Sprintf("forget %v", tc.args), text(res))
		if e := failed(t, cs, "forget", tc.args); e.Code != "forbidden" || e.Field != tc.field {
			t.Errorf("forget %v: %+v, want forbidden on %s", tc.args, e, tc.field)
		}
	}
	if fo := ok[mcp.ForgetOutput](t, cs, "forget", m{"hashes": []string{e1, out}}); fo.Count != 2 || !slices.Equal(fo.Hashes, sorted(e1, e2)) {
		t.Errorf("forget [e1, out]: %+v", fo)
	}
	for _, h := range []string{out, c1, c2, d1, d2, n1, n2} {
		if _, err := db.Get(ctx, "", h); err != nil {
			t.Errorf("a locked forget deleted %s: %v", h, err)
		}
	}

	// An erased version's namespace and scope cannot be read: it is
	// outside every lock. f1 is in the default namespace, f2 (another
	// namespace) erased with its user's key; a session locked to the
	// default namespace must not forget f1, which would delete f2.
	f1 := add(at("", "", "f"))
	f2 := supersede(f1, lethe.Grain{Namespace: "other", UserID: "u9"})
	if _, err := db.ForgetUser(ctx, "", "u9"); err != nil {
		t.Fatal(err)
	}
	cs2 := connect(t, mcp.Config{Library: db, LockNamespace: "default"})
	if e := failed(t, cs2, "forget", m{"hash": f1}); e.Code != "forbidden" {
		t.Errorf("forget of a chain with an erased version: %+v, want forbidden", e)
	}
	noneNamed("history f1", text(call(t, cs2, "history", m{"hash": f1})))
	if h := text(call(t, cs2, "history", m{"hash": f1})); strings.Contains(h, f2) {
		t.Errorf("history names the erased version: %s", h)
	}
	if chain, err := db.History(ctx, "", f1); err != nil || len(chain) != 2 || chain[0].Hash != f2 || !chain[0].Erased {
		t.Errorf("the chain after a locked forget: %+v, %v; want the erased version kept", chain, err)
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}
