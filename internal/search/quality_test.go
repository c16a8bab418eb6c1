package search

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGraphRecallClustered measures the graph's recall@10 against exact
// search on 50,000 vectors of 384 dimensions drawn around 200 centres, as
// embeddings of related texts are: at this size too few candidates while
// building (efConstruction 64) left it at 0.94, a tenth of the answers
// wrong. Built in the background, as in production.
func TestGraphRecallClustered(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a graph of 50,000 vectors")
	}
	const n, dim, k, queries = 50000, 384, 10, 100
	r := rand.New(rand.NewPCG(1, 2))
	centres := make([][]float32, 200)
	for i := range centres {
		centres[i] = randomVec(r, dim)
	}
	point := func() []float32 {
		v, c := randomVec(r, dim), centres[r.IntN(len(centres))]
		for i := range v {
			v[i] = c[i] + 0.3*v[i]
		}
		return v
	}
	model := make(map[int64][]float32, n)
	s := NewSet()
	for i := range n {
		v := point()
		model[int64(i+1)] = v
		s.Add(int64(i+1), v)
	}
	if !s.WaitGraph() {
		t.Fatal("no graph over 50,000 vectors")
	}
	found := 0
	for range queries {
		q := point()
		want := bruteForce(model, q, k)
		for _, h := range s.Nearest(q, k) {
			if slices.Contains(want, h.ID) {
				found++
			}
		}
	}
	rc := float64(found) / (queries * k)
	t.Logf("recall@10 = %.3f", rc)
	if rc < 0.98 {
		t.Errorf("recall@10 = %.3f on clustered vectors, want at least 0.98", rc)
	}
}
