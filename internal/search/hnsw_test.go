package search

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func randomVec(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// bruteForce is the model's answer: the k ids of vecs most similar to q by
// Cosine, ties to the higher id.
func bruteForce(vecs map[int64][]float32, q []float32, k int) []int64 {
	var hs []Hit
	for id, v := range vecs {
		hs = append(hs, Hit{id, Cosine(q, v)})
	}
	sortHits(hs)
	var out []int64
	for _, h := range hs[:min(k, len(hs))] {
		out = append(out, h.ID)
	}
	return out
}

func hitIDs(hs []Hit) []int64 {
	out := []int64{}
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}

// recallFloor is the least recall@10 the graph must reach against exact
// search on the fixed corpus of TestGraphRecall. It is a statistical
// check with fixed seeds: the graph and the corpus are deterministic, so
// it either always passes or always fails for a given implementation.
const recallFloor = 0.95

// TestGraphRecall checks the graph's recall@10 against exact search on a
// fixed random corpus (5,000 Gaussian vectors of 48 dimensions, 200
// queries), before and after forgetting a tenth of it.
func TestGraphRecall(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const n, dim, k = 5000, 48, 10
	model := map[int64][]float32{}
	s := newSet(100, true)
	for i := range n {
		v := randomVec(r, dim)
		model[int64(i+1)] = v
		s.Add(int64(i+1), v)
	}
	if s.g == nil {
		t.Fatal("no graph over 5,000 vectors")
	}
	recall := func() float64 {
		found := 0
		for range 200 {
			q := randomVec(r, dim)
			want := bruteForce(model, q, k)
			got := s.Nearest(q, k)
			for _, h := range got {
				if _, ok := model[h.ID]; !ok {
					t.Fatalf("forgotten %d returned", h.ID)
				}
				if slices.Contains(want, h.ID) {
					found++
				}
			}
		}
		return float64(found) / float64(200*k)
	}
	rc := recall()
	t.Logf("recall@10 = %.3f", rc)
	if rc < recallFloor {
		t.Errorf("recall@10 = %.3f, want at least %.2f", rc, recallFloor)
	}
	for id := int64(1); id <= n; id += 10 {
		s.Remove(id)
		delete(model, id)
	}
	rc = recall()
	t.Logf("recall@10 after forgetting a tenth = %.3f", rc)
	if rc < recallFloor {
		t.Errorf("recall@10 after forgetting = %.3f, want at least %.2f", rc, recallFloor)
	}
}

// TestSetModel runs random adds, replacements, removals, keeps and queries
// against a map: a query never returns a vector not in the map; one that
// the set answers exactly (no graph, or k a quarter of the set or more)
// equals the model's brute force; Len and Has agree. Half the runs build
// the graph in the background, as in production.
func TestSetModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const dim = 8
		background := rapid.Bool().Draw(t, "background")
		s := newSet(rapid.IntRange(1, 60).Draw(t, "graphMin"), !background)
		model := map[int64][]float32{}
		vec := rapid.Custom(func(t *rapid.T) []float32 {
			v := make([]float32, dim)
			for i := range v {
				v[i] = float32(rapid.IntRange(-4, 4).Draw(t, "x"))
			}
			v[0] += 0.5 // never zero
			return v
		})
		id := rapid.Int64Range(1, 120)
		t.Repeat(map[string]func(*rapid.T){
			"add": func(t *rapid.T) {
				i, v := id.Draw(t, "id"), vec.Draw(t, "v")
				s.Add(i, v)
				model[i] = v
			},
			"addMany": func(t *rapid.T) {
				for range rapid.IntRange(1, 40).Draw(t, "n") {
					i, v := id.Draw(t, "id"), vec.Draw(t, "v")
					s.Add(i, v)
					model[i] = v
				}
			},
			"remove": func(t *rapid.T) {
				i := id.Draw(t, "id")
				s.Remove(i)
				delete(model, i)
			},
			"keep": func(t *rapid.T) {
				var keep []int64
				for i := range model {
					if rapid.IntRange(0, 3).Draw(t, "keep") > 0 {
						keep = append(keep, i)
					}
				}
				s.Keep(keep)
				for i := range model {
					if !slices.Contains(keep, i) {
						delete(model, i)
					}
				}
			},
			"wait": func(t *rapid.T) { s.WaitGraph() },
			"nearest": func(t *rapid.T) {
				q, k := vec.Draw(t, "q"), rapid.IntRange(1, 30).Draw(t, "k")
				s.mu.RLock()
				exact := s.g == nil || 4*k >= len(s.pos)
				s.mu.RUnlock()
				got := s.Nearest(q, k)
				if len(got) != min(k, len(model)) {
					t.Fatalf("Nearest(k=%d) returned %d of %d", k, len(got), len(model))
				}
				for _, h := range got {
					if _, ok := model[h.ID]; !ok {
						t.Fatalf("Nearest returned %d, removed or never added", h.ID)
					}
				}
				if exact {
					// Similarities are compared in float32 after
					// normalising: ties can differ from the model's
					// float64, so compare the similarities, not the ids.
					want := bruteForce(model, q, k)
					for j, h := range got {
						if d := h.Sim - Cosine(q, model[want[j]]); d > 1e-5 || d < -1e-5 {
							t.Fatalf("exact Nearest = %v, want %v", hitIDs(got), want)
						}
					}
				}
			},
			"": func(t *rapid.T) {
				if s.Len() != len(model) {
					t.Fatalf("Len = %d, want %d", s.Len(), len(model))
				}
				for i := range model {
					if !s.Has(i) {
						t.Fatalf("Has(%d) = false", i)
					}
				}
			},
		})
		s.WaitGraph()
	})
}

// TestRemoveZeroes checks that a removed vector does not stay in the
// slab, with and without a graph.
func TestRemoveZeroes(t *testing.T) {
	for _, graphMin := range []int{1, 1000} {
		s := newSet(graphMin, true)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range 50 {
			s.Add(int64(i), randomVec(r, 16))
		}
		s.mu.RLock()
		slot := s.pos[7]
		s.mu.RUnlock()
		s.Remove(7)
		for _, x := range s.vec(slot) {
			if x != 0 {
				t.Fatalf("graphMin %d: a removed vector is still in the slab", graphMin)
			}
		}
	}
}

func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	x, y := randomVec(r, 384), randomVec(r, 384)
	var s float32
	for b.Loop() {
		s += dot(x, y)
	}
	_ = s
}

// BenchmarkGraph builds a Set of n 384-dimension vectors, Gaussian
// (random) or near a 32-dimension subspace (latent), (n from
// -graph.sizes) and reports the graph's build time, its top-10 query p50
// beside exact search's in the same run, its recall@10 against exact
// search over 200 queries, and the memory held per 100,000 vectors.
func BenchmarkGraph(b *testing.B) {
	const dim = 384
	for _, n := range graphSizes(b) {
		for _, corpus := range []string{"random", "latent"} {
			b.Run(fmt.Sprintf("n=%d/corpus=%s", n, corpus), func(b *testing.B) {
				r := rand.New(rand.NewPCG(3, 3))
				gen := func() []float32 { return randomVec(r, dim) }
				if corpus == "latent" {
					gen = latent(r, dim, 32)
				}
				s := newSet(n+1, true) // no graph yet
				for i := range n {
					s.Add(int64(i+1), gen())
				}
				start := time.Now()
				s.graphMin = 1
				s.mu.Lock()
				s.build()
				s.mu.Unlock()
				build := time.Since(start)
				qs := make([][]float32, 200)
				for i := range qs {
					qs[i] = gen()
				}
				type metric struct {
					v    float64
					unit string
				}
				var ms []metric
				for _, ef := range []int{EfSearch, 200, 400} {
					s.ef = ef
					found := 0
					var approx, exact []time.Duration
					for _, q := range qs {
						t0 := time.Now()
						got := s.Nearest(q, 10)
						t1 := time.Now()
						want := s.exact(normalised(q), 10)
						exact = append(exact, time.Since(t1))
						approx = append(approx, t1.Sub(t0))
						for _, h := range got {
							if slices.ContainsFunc(want, func(w Hit) bool { return w.ID == h.ID }) {
								found++
							}
						}
					}
					sfx := ""
					if ef != EfSearch {
						sfx = fmt.Sprintf("-ef%d", ef)
					} else {
						ms = append(ms, metric{median(exact), "exact-p50-ms"})
					}
					ms = append(ms, metric{median(approx), "p50-ms" + sfx},
						metric{float64(found) / float64(10*len(qs)), "recall@10" + sfx})
				}
				s.ef = EfSearch
				for b.Loop() {
					s.Nearest(qs[0], 10)
				}
				for _, m := range ms {
					b.ReportMetric(m.v, m.unit)
				}
				b.ReportMetric(build.Seconds(), "build-s")
				b.ReportMetric(float64(s.Bytes())*100000/float64(n)/(1<<20), "MB/100k")
			})
		}
	}
}

// latent returns a generator of vectors of dim dimensions that lie near a
// random subspace of k dimensions (W z plus a little noise, z Gaussian):
// like text embeddings, whose intrinsic dimension is far below their
// length, and unlike Gaussian vectors, whose nearest neighbours are barely
// nearer than any other vector.
func latent(r *rand.Rand, dim, k int) func() []float32 {
	w := make([][]float32, k)
	for i := range w {
		w[i] = randomVec(r, dim)
	}
	return func() []float32 {
		v := make([]float32, dim)
		for _, row := range w {
			z := float32(r.NormFloat64())
			for j := range v {
				v[j] += z * row[j]
			}
		}
		for j := range v {
			v[j] += 0.3 * float32(r.NormFloat64())
		}
		return v
	}
}

var graphSizesFlag = flag.String("graph.sizes", "10000", "set sizes of BenchmarkGraph")

func graphSizes(b *testing.B) []int {
	var out []int
	for _, f := range strings.Split(*graphSizesFlag, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			b.Fatalf("-graph.sizes: %v", err)
		}
		out = append(out, n)
	}
	return out
}

func normalised(q []float32) []float32 {
	n := norm(q)
	out := make([]float32, len(q))
	for i, x := range q {
		out[i] = float32(float64(x) / n)
	}
	return out
}

func median(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / float64(time.Millisecond)
}

// TestBackgroundBuild adds and removes vectors while the graph is built in
// the background (more than catchUp of them, so the build takes further
// turns without the lock): once it ends, the graph holds every slot, every
// removed vector is zeroed, and no query returns one.
func TestBackgroundBuild(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	s := newSet(1000, false) // the build of 1,000 takes longer than adding 2,000 more
	live := map[int64]bool{}
	for i := int64(1); i <= 3000; i++ {
		s.Add(i, randomVec(r, 16))
		live[i] = true
		if i%7 == 0 {
			s.Remove(i - 3)
			delete(live, i-3)
		}
		if i%500 == 0 {
			for _, h := range s.Nearest(randomVec(r, 16), 10) {
				if !live[h.ID] {
					t.Fatalf("removed %d returned while building", h.ID)
				}
			}
		}
	}
	if !s.WaitGraph() {
		t.Fatal("no graph after the build")
	}
	s.mu.RLock()
	t.Logf("the last turn of the build started at %d slots", s.buildN)
	if s.g.n != len(s.ids) {
		t.Errorf("the graph holds %d slots of %d", s.g.n, len(s.ids))
	}
	for i, dead := range s.dead {
		if dead && slices.ContainsFunc(s.vec(uint32(i)), func(x float32) bool { return x != 0 }) {
			t.Errorf("dead slot %d not zeroed", i)
		}
	}
	s.mu.RUnlock()
	for range 100 {
		for _, h := range s.Nearest(randomVec(r, 16), 10) {
			if !live[h.ID] {
				t.Fatalf("removed %d returned", h.ID)
			}
		}
	}
}
