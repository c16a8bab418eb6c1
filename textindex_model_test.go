package lethe_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/search"
)

// TestTextIndexModel checks text search against a model under random
// sequences of batch adds (1 to 100 grains, so that both the sealer's
// small-batch path and its parallel one run), forgets by hash and by
// subject, and reopenings, on both stores. After every step, each word of
// a small vocabulary (with inflections that stem alike) finds exactly the
// live grains that hold it. On SQLite the text index's tail is merged every
// dozen blocks into its second level, and that every hundred into
// grain_postings (store.DB.insertSearch), so merges at both levels, forgets
// of blocks in each of the three tables, and a tail left over a restart all
// happen; the raw tables must never hold one block twice.
func TestTextIndexModel(t *testing.T) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			dir, dsn, raw := rawTestStore(t, b)
			cfg := lethe.Config{DataDir: dir, PostgresDSN: dsn, ProofWait: time.Millisecond}
			h := &textHarness{t: t, cfg: cfg, backend: b, raw: raw}
			h.open()
			t.Cleanup(func() { h.db.Close() })
			n := 0
			rapid.Check(t, func(rt *rapid.T) {
				n++
				m := &textModel{h: h, memory: fmt.Sprintf("t%d", n), live: map[string]textGrain{}}
				rt.Repeat(rapid.StateMachineActions(m))
			})
			if b == "sqlite" {
				for _, table := range append(sqlitePostings, "posting_segments") {
					if !h.held[table] {
						t.Errorf("%s never held a block: the merges were not exercised", table)
					}
				}
			}
		})
	}
}

// textHarness is the store the sequences share.
type textHarness struct {
	t       *testing.T
	cfg     lethe.Config
	backend string
	raw     func(string) [][]byte
	db      *lethe.DB
	held    map[string]bool // the postings tables seen holding a block (SQLite)
}

// modelTailMax is the text index's tail size in the model test: a batch of a
// few grains reaches it (and its second level is eight times that).
const modelTailMax = 12

func (h *textHarness) open() {
	db, err := lethe.Open(context.Background(), h.cfg)
	if err != nil {
		h.t.Fatalf("Open: %v", err)
	}
	db.SetPostingTailMax(modelTailMax)
	// The store must wait for a batch's search fields (Terms), computed
	// while it inserts the batch.
	db.SlowIndex(100 * time.Microsecond)
	h.db = db
}

// textVocabulary: words whose inflections stem alike ("allergy",
// "allergies"), a stop word, and words that share no stem.
var textVocabulary = []string{"allergy", "allergies", "penicillin", "rash", "rashes", "the", "aspirin", "fever", "Fever", "dose", "dosing", "café", "cafe\u0301"}

type textModel struct {
	h      *textHarness
	memory string
	live   map[string]textGrain // by hash
	next   int
}

// textGrain is the model of a live grain: its subject and its terms.
type textGrain struct {
	subject string
	doc     search.Doc
}

func (m *textModel) Check(t *rapid.T) {
	ctx := context.Background()
	asked := map[string]bool{}
	for _, w := range textVocabulary {
		terms := search.QueryTerms(w)
		if k := strings.Join(terms, " "); asked[k] {
			continue // a word that stems like one asked before
		} else {
			asked[k] = true
		}
		var want []string
		for h, g := range m.live {
			for _, term := range terms {
				if g.doc.Terms[term] > 0 {
					want = append(want, h)
					break
				}
			}
		}
		slices.Sort(want)
		p, err := m.h.db.Recall(ctx, lethe.Query{Memory: m.memory, Text: w, Limit: 1000})
		if len(terms) == 0 {
			// A stop word alone is no query.
			if err == nil && len(p.Grains) > 0 {
				t.Fatalf("query %q (no terms) found %d grains", w, len(p.Grains))
			}
			continue
		}
		if err != nil {
			t.Fatalf("query %q: %v", w, err)
		}
		var got []string
		for _, g := range p.Grains {
			got = append(got, g.Hash)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("query %q found %d grains %v, want %d %v", w, len(got), short8(got), len(want), short8(want))
		}
	}
	if m.h.backend != "sqlite" {
		return // PostgreSQL removes postings after the commit (DrainPostings)
	}
	// The raw tables: no block in both, postings of exactly the grains
	// that have terms (all memories: the sequences share the store).
	if m.h.held == nil {
		m.h.held = map[string]bool{}
	}
	in := map[string]string{}
	blocks := rawBlocks(m.h.t, m.h.backend, m.h.raw)
	for _, b := range blocks {
		m.h.held[b.table] = true
		k := fmt.Sprintf("%x/%d", b.token, b.key)
		if in[k] != "" {
			t.Fatalf("block %s is both in %s and in %s", k, in[k], b.table)
		}
		in[k] = b.table
	}
	indexed := map[int64]bool{}
	for _, v := range m.h.raw("SELECT grain_id FROM grain_docs WHERE len > 0") {
		id, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		indexed[id] = true
	}
	posted := postingsIn(m.h.t, blocks)
	for id := range posted {
		if !indexed[id] {
			t.Fatalf("the text index holds postings of grain %d, which is gone", id)
		}
	}
	for id := range indexed {
		if posted[id] == 0 {
			t.Fatalf("grain %d has terms and no postings", id)
		}
	}
}

func (m *textModel) Add(t *rapid.T) {
	n := rapid.IntRange(1, 100).Draw(t, "grains")
	batch := make([]lethe.Grain, n)
	for i := range batch {
		k := rapid.IntRange(1, 4).Draw(t, "words")
		words := make([]string, k)
		for j := range words {
			words[j] = rapid.SampledFrom(textVocabulary).Draw(t, "word")
		}
		m.next++
		// Subjects from a small pool, so a forget by subject takes several.
		batch[i] = lethe.Grain{Memory: m.memory, Type: "fact", Subject: fmt.Sprintf("s%d", m.next%5),
			Content: strings.Join(words, " "), Importance: 0.5}
	}
	hs, err := m.h.db.AddBatch(context.Background(), batch)
	if err != nil {
		t.Fatalf("AddBatch: %v", err)
	}
	for i, h := range hs {
		m.live[h] = textGrain{batch[i].Subject, search.Terms(batch[i].Subject, batch[i].Object, batch[i].Content)}
	}
}

func (m *textModel) ForgetHash(t *rapid.T) {
	if len(m.live) == 0 {
		t.Skip("nothing to forget")
	}
	h := rapid.SampledFrom(slices.Sorted(maps.Keys(m.live))).Draw(t, "hash")
	if _, err := m.h.db.Forget(context.Background(), lethe.Selector{Memory: m.memory, Hash: h}); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	delete(m.live, h)
}

func (m *textModel) ForgetSubject(t *rapid.T) {
	s := fmt.Sprintf("s%d", rapid.IntRange(0, 4).Draw(t, "subject"))
	if _, err := m.h.db.Forget(context.Background(), lethe.Selector{Memory: m.memory, Subject: s}); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	for h, g := range m.live {
		if g.subject == s {
			delete(m.live, h)
		}
	}
}

// Reopen closes the store and opens it again (SQLite: what the tail's
// count is read from at start; a PostgreSQL store keeps nothing of the
// text index in process, and its reopening costs more than the rest).
func (m *textModel) Reopen(t *rapid.T) {
	if m.h.backend != "sqlite" {
		t.Skip("no tail on PostgreSQL")
	}
	if err := m.h.db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	m.h.open()
}
