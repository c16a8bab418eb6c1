package lethe_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
)

// backend opens a fresh store of one kind.
type backend struct {
	name string
	open func(t *testing.T) *lethe.DB
}

func backends() []backend {
	return []backend{
		{"sqlite", func(t *testing.T) *lethe.DB { return openDB(t, lethe.Config{DataDir: t.TempDir()}) }},
		{"postgres", func(t *testing.T) *lethe.DB {
			return openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: testenv.Postgres(t)})
		}},
	}
}

func openDB(t *testing.T, cfg lethe.Config) *lethe.DB {
	t.Helper()
	db, err := lethe.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	allLeaves.Lock()
	allLeaves.opened++
	allLeaves.Unlock()
	t.Cleanup(func() {
		collectLeaves(t, db)
		db.Close()
	})
	return db
}

// forEachBackend runs test against every store: the conformance suite.
func forEachBackend(t *testing.T, test func(t *testing.T, db *lethe.DB)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { test(t, b.open(t)) })
	}
}

func wantCode(t *testing.T, err error, code lethe.Code) {
	t.Helper()
	if got := lethe.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func mustAdd(t *testing.T, db *lethe.DB, g lethe.Grain) string {
	t.Helper()
	h, err := db.Add(context.Background(), g)
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	return h
}

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, db *lethe.DB)
	}{
		{"RoundTrip", testRoundTrip},
		{"RecallPatterns", testRecallPatterns},
		{"RecallPagination", testRecallPagination},
		{"SupersedeChain", testSupersedeChain},
		{"ForgetSelectors", testForgetSelectors},
		{"Dedup", testDedup},
		{"BadInput", testBadInput},
	} {
		t.Run(tc.name, func(t *testing.T) { forEachBackend(t, tc.test) })
	}
}

func testRoundTrip(t *testing.T, db *lethe.DB) {
	ctx := context.Background()
	created := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	in := lethe.Grain{
		Memory: "support", Type: "fact", Subject: "Alice Example", Relation: "prefers", Object: "green tea",
		Content: "said so on the phone", Namespace: "crm", Scope: "acme/prod/bot1", UserID: "user-42",
		Tags: []string{"pref", "drink"}, Metadata: map[string]string{"source": "call"},
		Importance: 0.7, Confidence: 0.9, Pinned: true, CreatedAt: created,
	}
	h := mustAdd(t, db, in)
	if len(h) != 64 {
		t.Fatalf("hash %q is not 64 hex digits", h)
	}
	got, err := db.Get(ctx, "support", h)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	want := in
	want.Hash, want.Tags, want.Salience = h, []string{"drink", "pref"}, 1
	if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", *got, want)
	}
	// Another memory does not see it.
	_, err = db.Get(ctx, "other", h)
	wantCode(t, err, "not_found")
}

// corpus writes a grid of grains and returns them with their hashes.
func corpus(t *testing.T, db *lethe.DB) []lethe.Grain {
	var gs []lethe.Grain
	subjects := []string{"alice", "bob", "carol"}
	relations := []string{"likes", "knows"}
	objects := []string{"tea", "bob", "jazz"}
	scopes := []string{"", "acme", "acme/prod", "acme/prod/bot1", "other"}
	users := []string{"", "u1", "u2"}
	i := 0
	for _, s := range subjects {
		for _, r := range relations {
			for _, o := range objects {
				g := lethe.Grain{Type: []string{"fact", "belief"}[i%2], Subject: s, Relation: r, Object: o,
					Namespace: []string{"default", "crm"}[i%2], Scope: scopes[i%len(scopes)], UserID: users[i%len(users)],
					Tags: []string{[]string{"x", "y"}[i%2], "all"}}
				g.Hash = mustAdd(t, db, g)
				gs = append(gs, g)
				i++
			}
		}
	}
	return gs
}

func hashesOf(gs []lethe.Grain) []string {
	out := make([]string, 0, len(gs))
	for _, g := range gs {
		out = append(out, g.Hash)
	}
	sort.Strings(out)
	return out
}

func inScope(scope, prefix string) bool {
	return prefix == "" || scope == prefix || strings.HasPrefix(scope, prefix+"/")
}

func testRecallPatterns(t *testing.T, db *lethe.DB) {
	ctx := context.Background()
	all := corpus(t, db)
	// Token queries under a multi-segment scope prefix first, while the
	// keyring's caches are cold: the prefix's ancestors' keys are needed too.
	queries := []lethe.Query{
		{Subject: "bob", Scope: "acme/prod"}, {Object: "tea", Scope: "acme/prod/bot1"},
		{Relation: "knows", Tags: []string{"all"}, Scope: "acme/prod"}, {Subject: "carol", Scope: "acme/nothing"},
	}
	// Every subject/relation/object pattern, with values that exist and one that does not.
	for _, s := range []string{"", "alice", "BOB ", "nobody"} {
		for _, r := range []string{"", "likes"} {
			for _, o := range []string{"", "bob", "jazz"} {
				queries = append(queries, lethe.Query{Subject: s, Relation: r, Object: o})
			}
		}
	}
	queries = append(queries,
		lethe.Query{Type: "belief"}, lethe.Query{Namespace: "crm"}, lethe.Query{Scope: "acme"},
		lethe.Query{Scope: "acme/prod"}, lethe.Query{Scope: "acme/pro"}, lethe.Query{UserID: "u1"},
		lethe.Query{UserID: "nobody"}, lethe.Query{Tags: []string{"x"}}, lethe.Query{Tags: []string{"x", "all"}},
		lethe.Query{Tags: []string{"x", "y"}}, lethe.Query{Subject: "alice", Scope: "acme", UserID: "u2"},

		lethe.Query{Subject: "carol", Tags: []string{"y"}, Type: "fact"},
	)
	norm := func(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
	for _, q := range queries {
		var want []lethe.Grain
		for _, g := range all {
			if (q.Subject == "" || norm(q.Subject) == g.Subject) && (q.Relation == "" || q.Relation == g.Relation) &&
				(q.Object == "" || q.Object == g.Object) && (q.Type == "" || q.Type == g.Type) &&
				(q.Namespace == "" || q.Namespace == g.Namespace) && inScope(g.Scope, q.Scope) &&
				(q.UserID == "" || q.UserID == g.UserID) && containsAll(g.Tags, q.Tags) {
				want = append(want, g)
			}
		}
		q.Limit = 1000
		page, err := db.Recall(ctx, q)
		if err != nil {
			t.Fatalf("Recall(%+v): %v", q, err)
		}
		if got, w := hashesOf(page.Grains), hashesOf(want); !slices.Equal(got, w) {
			t.Errorf("Recall(%+v) = %d grains, want %d", q, len(got), len(w))
		}
	}
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func testRecallPagination(t *testing.T, db *lethe.DB) {
	ctx := context.Background()
	var batch []lethe.Grain
	for i := range 250 {
		batch = append(batch, lethe.Grain{Type: "event", Content: fmt.Sprintf("event %d", i)})
	}
	want, err := db.AddBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	q := lethe.Query{Limit: 100}
	pages := 0
	for {
		p, err := db.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, g := range p.Grains {
			got = append(got, g.Hash)
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	if pages != 3 && pages != 4 {
		t.Errorf("pages = %d, want 3 (or 4 with an empty last page)", pages)
	}
	slices.Reverse(got) // newest first
	if !slices.Equal(got, want) {
		t.Errorf("pagination returned %d grains, want the %d written in reverse order", len(got), len(want))
	}
	_, err = db.Recall(ctx, lethe.Query{Cursor: "nope"})
	wantCode(t, err, "invalid_argument")
}

func testSupersedeChain(t *testing.T, db *lethe.DB) {
	ctx := context.Background()
	v1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "alice", Relation: "lives_in", Object: "paris",
		Namespace: "crm", Tags: []string{"home"}, Confidence: 0.8, Scope: "acme", UserID: "u1"})
	hashes := []string{v1}
	for _, city := range []string{"lyon", "nice", "lille"} {
		h, err := db.Supersede(ctx, hashes[len(hashes)-1], lethe.Grain{Type: "fact", Subject: "alice", Relation: "lives_in", Object: city})
		if err != nil {
			t.Fatalf("Supersede: %v", err)
		}
		hashes = append(hashes, h)
	}
	head, err := db.Get(ctx, "", hashes[3])
	if err != nil {
		t.Fatal(err)
	}
	if head.Namespace != "crm" || !slices.Equal(head.Tags, []string{"home"}) || head.Confidence != 0.8 ||
		head.Scope != "acme" || head.UserID != "u1" || head.Supersedes != hashes[2] {
		t.Errorf("carried fields: %+v", head)
	}
	old, err := db.Get(ctx, "", hashes[1])
	if err != nil {
		t.Fatal(err)
	}
	if old.SupersededBy != hashes[2] || old.Supersedes != hashes[0] {
		t.Errorf("links of v2: supersedes %s superseded_by %s", old.Supersedes, old.SupersededBy)
	}
	p, _ := db.Recall(ctx, lethe.Query{Subject: "alice"})
	if len(p.Grains) != 1 || p.Grains[0].Hash != hashes[3] {
		t.Errorf("default recall = %v, want only the newest", hashesOf(p.Grains))
	}
	p, _ = db.Recall(ctx, lethe.Query{Subject: "alice", IncludeSuperseded: true})
	if len(p.Grains) != 4 {
		t.Errorf("recall with superseded = %d grains, want 4", len(p.Grains))
	}
	for _, h := range hashes {
		hist, err := db.History(ctx, "", h)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range hist {
			got = append(got, g.Hash)
		}
		want := slices.Clone(hashes)
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Errorf("History(%s) = %v, want newest first %v", h[:8], got, want)
		}
	}
	_, err = db.Supersede(ctx, hashes[1], lethe.Grain{Type: "fact", Subject: "alice", Object: "rome"})
	wantCode(t, err, "already_superseded")
	_, err = db.Supersede(ctx, strings.Repeat("0", 64), lethe.Grain{Type: "fact", Subject: "x"})
	wantCode(t, err, "not_found")
}

func testForgetSelectors(t *testing.T, db *lethe.DB) {
	ctx := context.Background()
	all := corpus(t, db)
	// A chain on alice's first grain: forgetting by subject takes every version.
	v2, err := db.Supersede(ctx, all[0].Hash, lethe.Grain{Type: "fact", Subject: "dave", Relation: "likes", Object: "tea"})
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		p, err := db.Recall(ctx, lethe.Query{Limit: 1000, IncludeSuperseded: true})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Grains)
	}
	total := count()

	res, err := db.Forget(ctx, lethe.Selector{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != 7 { // six alice grains and dave's later version of one
		t.Errorf("forget subject: count %d, want 7", res.Count)
	}
	if _, err := db.Get(ctx, "", v2); lethe.ErrorCode(err) != "not_found" {
		t.Errorf("the later version survived a forget by subject: %v", err)
	}
	p, _ := db.Recall(ctx, lethe.Query{Subject: "alice", IncludeSuperseded: true, IncludeArchived: true})
	if len(p.Grains) != 0 {
		t.Errorf("recall after forget: %d grains", len(p.Grains))
	}

	var u1 int
	for _, g := range all {
		if g.UserID == "u1" && g.Subject != "alice" {
			u1++
		}
	}
	res, err = db.Forget(ctx, lethe.Selector{UserID: "u1"})
	if err != nil || res.Count != u1 {
		t.Errorf("forget user: %v, count %d, want %d", err, res.Count, u1)
	}

	res, err = db.Forget(ctx, lethe.Selector{Hash: all[17].Hash})
	if err != nil || res.Count != 1 || res.Hashes[0] != all[17].Hash {
		t.Errorf("forget hash: %v %+v", err, res)
	}
	res, err = db.Forget(ctx, lethe.Selector{Hashes: []string{all[16].Hash, all[15].Hash, strings.Repeat("a", 64)}})
	if err != nil {
		t.Fatal(err)
	}
	if got := count(); got != total-7-u1-1-res.Count {
		t.Errorf("grains left %d, want %d", got, total-7-u1-1-res.Count)
	}
	_, err = db.Forget(ctx, lethe.Selector{Hash: all[17].Hash})
	wantCode(t, err, "not_found")
	res, err = db.Forget(ctx, lethe.Selector{Subject: "nobody"})
	if err != nil || res.Count != 0 || res.Status != "not_found" {
		t.Errorf("forget of nothing: %v %+v", err, res)
	}
}

func testDedup(t *testing.T, db *lethe.DB) {
	ctx := context.Background()
	g := lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea", Scope: "acme"}
	h1 := mustAdd(t, db, g)
	h2 := mustAdd(t, db, g)
	if h1 != h2 {
		t.Errorf("retry gave a new hash")
	}
	g.Scope = "other"
	if h3 := mustAdd(t, db, g); h3 == h1 {
		t.Errorf("same content in another scope deduplicated across scopes")
	}
	hs, err := db.AddBatch(ctx, []lethe.Grain{{Type: "fact", Content: "x"}, {Type: "fact", Content: "x"}, {Type: "fact", Content: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	if hs[0] != hs[1] || hs[0] == hs[2] {
		t.Errorf("batch dedup: %v", hs)
	}
	p, _ := db.Recall(ctx, lethe.Query{Limit: 100})
	if len(p.Grains) != 4 {
		t.Errorf("stored %d grains, want 4", len(p.Grains))
	}

	// The same content with another importance, confidence or pin is not
	// a retry: answering the grain's hash would drop what was asked (a pin
	// protects the grain from a forget by hash). It is refused, in a batch
	// too, and nothing of the batch is written; the grain stays as it was.
	g.Scope = "acme"
	for _, other := range []func(*lethe.Grain){
		func(g *lethe.Grain) { g.Pinned = true },
		func(g *lethe.Grain) { g.Importance = 0.95 },
		func(g *lethe.Grain) { g.Confidence = 0.5 },
	} {
		o := g
		other(&o)
		_, err := db.Add(ctx, o)
		wantCode(t, err, "conflict")
		if !strings.Contains(err.Error(), h1) {
			t.Errorf("the refusal does not name the grain: %v", err)
		}
		_, err = db.AddBatch(ctx, []lethe.Grain{{Type: "fact", Content: "fresh"}, o})
		wantCode(t, err, "conflict")
		if e := (*lethe.Error)(nil); !errors.As(err, &e) || e.Field != "grains[1]" {
			t.Errorf("the batch refusal names another field: %v", err)
		}
		_, err = db.AddBatch(ctx, []lethe.Grain{g, o})
		wantCode(t, err, "conflict")
	}
	if p, _ := db.Recall(ctx, lethe.Query{Limit: 100}); len(p.Grains) != 4 {
		t.Errorf("refused writes stored grains: %d, want 4", len(p.Grains))
	}
	if got, err := db.Get(ctx, "", h1); err != nil || got.Pinned || got.Importance != 0 || got.Confidence != 1 {
		t.Errorf("the grain changed: %+v, %v", got, err)
	}
	_, err = db.AddBatch(ctx, []lethe.Grain{{Type: "fact", Content: "z"}, {Type: "fact", Content: "z", Pinned: true}})
	wantCode(t, err, "conflict")
}

func testBadInput(t *testing.T, db *lethe.DB) {
	ctx := context.Background()
	good := lethe.Grain{Type: "fact", Subject: "s"}
	big := strings.Repeat("x", 70000)
	for _, tc := range []struct {
		name string
		g    lethe.Grain
		code lethe.Code
	}{
		{"empty", lethe.Grain{Type: "fact"}, "empty_grain"},
		{"no type", lethe.Grain{Subject: "s"}, "invalid_argument"},
		{"bad type", lethe.Grain{Type: "Fact!", Subject: "s"}, "invalid_argument"},
		{"importance", lethe.Grain{Type: "fact", Subject: "s", Importance: 1.5}, "invalid_argument"},
		{"negative confidence", lethe.Grain{Type: "fact", Subject: "s", Confidence: -1}, "invalid_argument"},
		{"oversize content", lethe.Grain{Type: "fact", Content: big}, "too_large"},
		{"oversize subject", lethe.Grain{Type: "fact", Subject: big[:3000]}, "too_large"},
		{"bad scope", lethe.Grain{Type: "fact", Subject: "s", Scope: "a//b"}, "invalid_scope"},
		{"scope dots", lethe.Grain{Type: "fact", Subject: "s", Scope: "a/../b"}, "invalid_scope"},
		{"bad memory", lethe.Grain{Memory: "Bad Memory", Type: "fact", Subject: "s"}, "invalid_memory"},
		{"invalid utf8", lethe.Grain{Type: "fact", Subject: "\xff"}, "invalid_argument"},
		{"future", lethe.Grain{Type: "fact", Subject: "s", CreatedAt: time.Now().Add(time.Hour)}, "invalid_argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Add(ctx, tc.g)
			wantCode(t, err, tc.code)
			// In a batch, one bad grain writes nothing.
			_, err = db.AddBatch(ctx, []lethe.Grain{good, tc.g})
			wantCode(t, err, tc.code)
			if !strings.Contains(err.Error(), "grains[1]") {
				t.Errorf("batch error does not name the position: %v", err)
			}
		})
	}
	p, _ := db.Recall(ctx, lethe.Query{})
	if len(p.Grains) != 0 {
		t.Errorf("a rejected batch wrote %d grains", len(p.Grains))
	}
	_, err := db.AddBatch(ctx, nil)
	wantCode(t, err, "invalid_argument")
	_, err = db.Get(ctx, "", "abc")
	wantCode(t, err, "invalid_argument")
	_, err = db.Get(ctx, "BAD", strings.Repeat("a", 64))
	wantCode(t, err, "invalid_memory")
	_, err = db.History(ctx, "", "zz")
	wantCode(t, err, "invalid_argument")
	_, err = db.Recall(ctx, lethe.Query{Limit: 5000})
	wantCode(t, err, "too_large")
	_, err = db.Recall(ctx, lethe.Query{Scope: "a b"})
	wantCode(t, err, "invalid_scope")
	for _, sel := range []lethe.Selector{{}, {Hashes: []string{}}, {Subject: "   "}, {Hash: "nothex"},
		{Subject: "a", UserID: "b"}, {Memory: "NO", Hash: strings.Repeat("a", 64)}} {
		_, err := db.Forget(ctx, sel)
		if code := lethe.ErrorCode(err); code != "empty_selector" && code != "invalid_argument" && code != "invalid_memory" {
			t.Errorf("Forget(%+v) = %v, want a selector error", sel, err)
		}
	}
	_, err = db.Forget(ctx, lethe.Selector{})
	wantCode(t, err, "empty_selector")
	_, err = db.Supersede(ctx, "nothex", good)
	wantCode(t, err, "invalid_argument")
	h := mustAdd(t, db, good)
	_, err = db.Supersede(ctx, h, lethe.Grain{Type: "fact"})
	wantCode(t, err, "invalid_argument") // changes nothing
	_, err = db.Supersede(ctx, h, lethe.Grain{Type: "fact", Importance: 2})
	wantCode(t, err, "invalid_argument")
	_, err = db.Supersede(ctx, h, lethe.Grain{Type: "fact", Scope: "../x"})
	wantCode(t, err, "invalid_scope")
	if g, err := db.Get(ctx, "", h); err != nil || g.SupersededBy != "" {
		t.Errorf("a rejected supersede changed the old grain: %v %+v", err, g)
	}
}
