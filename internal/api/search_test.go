package api_test

import (
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// TestSearch recalls by text ("query") and by embedding over HTTP, through
// the contract validator, on both stores, and forgets a found grain.
func TestSearch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		tok := f.token("writer,reader,dpo", []string{"med"})
		pen := f.add(tok, "med", api.GrainInput{Type: "fact", Subject: "alice", Content: "penicillin allergy", Embedding: []float32{1, 0}})
		f.add(tok, "med", api.GrainInput{Type: "fact", Subject: "bob", Content: "likes tea", Embedding: []float32{0, 1}})
		var page lethe.Page
		a := f.call(tok, "POST", "/api/memories/med/recall", map[string]any{"query": "Allergies", "limit": 5})
		f.want(a, 200, "")
		a.decode(t, &page)
		if len(page.Grains) != 1 || page.Grains[0].Hash != pen || page.Grains[0].Score <= 0 {
			t.Fatalf("query: %s", a.body)
		}
		a = f.call(tok, "POST", "/api/memories/med/recall", map[string]any{"embedding": []float32{0.9, 0.2}, "limit": 1})
		f.want(a, 200, "")
		page = lethe.Page{}
		a.decode(t, &page)
		if len(page.Grains) != 1 || page.Grains[0].Hash != pen || len(page.Grains[0].Embedding) != 2 {
			t.Fatalf("embedding: %s", a.body)
		}
		f.want(f.call(tok, "POST", "/api/memories/med/recall", map[string]any{"embedding": []float32{1, 2, 3}}), 400, "dimension_mismatch")
		f.want(f.call(tok, "POST", "/api/memories/med/grains", api.GrainInput{Type: "fact", Content: "x", Embedding: []float32{1, 2, 3}}), 400, "dimension_mismatch")
		f.want(f.call(tok, "POST", "/api/memories/med/recall", map[string]any{"query": "tea", "cursor": "5"}), 400, "invalid_argument")
		// A fault in the search text names the field as sent, never the
		// library's name for it.
		f.wantField(f.call(tok, "POST", "/api/memories/med/recall", map[string]any{"query": "te\x00a"}), 400, "invalid_argument", "query")
		f.wantField(f.call(tok, "POST", "/api/memories/med/recall", map[string]any{"query": strings.Repeat("tea ", 1025)}), 400, "too_large", "query")
		f.want(f.call(tok, "POST", "/api/memories/med/forget", map[string]any{"blob_hash": pen}), 200, "")
		a = f.call(tok, "POST", "/api/memories/med/recall", map[string]any{"query": "penicillin"})
		page = lethe.Page{}
		a.decode(t, &page)
		if len(page.Grains) != 0 {
			t.Errorf("after forget: %s", a.body)
		}
	})
}
