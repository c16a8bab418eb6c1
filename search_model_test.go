package lethe_test

import (
	"context"
	"slices"
	"sort"
	"strings"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
)

// The search actions of the model in model_test.go: grains with an
// embedding, and text and vector searches checked against the model of
// recall (machine.matches) and the words of each grain. Every other action
// of the model (forget, supersede, erasures, archive, purge, the risk
// sweep, restarts, the cleaner) changes what they must return.

// poolVectors are the embeddings VectorAdd draws; grain i's content is
// "vec<i>", so that two grains with different embeddings never dedup.
var poolVectors = [][]float32{{1, 0, 0}, {0, 1, 0}, {1, 1, 0}, {0.2, 0.1, 0.9}}

// VectorAdd writes a grain with an embedding.
func (m *machine) VectorAdd(t *rapid.T) {
	m.step()
	g := drawGrain(t, m.memory)
	i := rapid.IntRange(0, len(poolVectors)-1).Draw(t, "vector")
	g.Content, g.Embedding = "vec"+string(rune('0'+i)), poolVectors[i]
	h, err := m.db(t).Add(context.Background(), g)
	if m.refused(t, []lethe.Grain{stored(g)}, err) {
		return
	}
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	m.applyAdd(t, []lethe.Grain{stored(g)}, []string{h})
}

// words is the model of a grain's words: its subject's, object's and
// content's, lower-cased (the pools hold no word the stemmer changes
// differently in two spellings).
func words(g lethe.Grain) []string {
	return strings.Fields(strings.ToLower(nfc(g.Subject + " " + g.Object + " " + g.Content)))
}

// Search runs a text or vector search, with a random filter, on a random
// instance.
func (m *machine) Search(t *rapid.T) {
	m.step()
	q := lethe.Query{Memory: m.memory, Limit: 1000}
	switch rapid.IntRange(0, 3).Draw(t, "filter") {
	case 1:
		q.Scope = rapid.SampledFrom(poolScopes).Draw(t, "scope")
	case 2:
		q.Subject = rapid.SampledFrom(poolSubjects).Draw(t, "subject")
	case 3:
		q.IncludeSuperseded, q.IncludeArchived = true, true
	}
	var text []string
	if rapid.IntRange(0, 2).Draw(t, "vector") > 0 {
		text = rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"ada", "tea", "paris", "nice", "Jos\u00e9", "vec1", "vec2"}),
			1, 2, func(s string) string { return s }).Draw(t, "words")
		q.Text = strings.Join(text, " ")
	} else {
		q.Embedding = rapid.SampledFrom(poolVectors).Draw(t, "query")
	}
	p, err := m.db(t).Recall(context.Background(), q)
	if err != nil {
		t.Fatalf("Recall(%+v): %v", q, err)
	}
	var got, want []string
	for i, g := range p.Grains {
		got = append(got, g.Hash)
		if g.Score <= 0 && q.Text != "" {
			t.Fatalf("Recall(%+v): grain %s has score %v", q, g.Hash[:8], g.Score)
		}
		if i > 0 && g.Score > p.Grains[i-1].Score {
			t.Fatalf("Recall(%+v): scores not in order: %v after %v", q, g.Score, p.Grains[i-1].Score)
		}
	}
	for _, x := range m.grains {
		if !m.matches(x, q) {
			continue
		}
		if q.Embedding != nil && x.g.Embedding == nil {
			continue
		}
		hit := q.Embedding != nil
		for _, w := range text {
			hit = hit || slices.Contains(words(x.g), strings.ToLower(nfc(w)))
		}
		if hit {
			want = append(want, x.hash)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Recall(%+v) = %v, want %v", q, short8(got), short8(want))
	}
}
