package search

import (
	"cmp"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestTopModel checks Top against scoring every posting: random postings
// of up to four terms, cut into blocks as batches would be, some grains
// then removed from their blocks (as a forget does); Top's k best must
// have the scores of the model's k best, in order, be grains that hold a
// term, never a removed one, and say whether others were left out.
func TestTopModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		nTerms := rapid.IntRange(1, 4).Draw(t, "terms")
		nGrains := rapid.IntRange(1, 400).Draw(t, "grains")
		batch := rapid.IntRange(1, 100).Draw(t, "batch")
		gone := map[int64]bool{}
		for id := range int64(nGrains) {
			if rapid.IntRange(0, 9).Draw(t, "forget") == 0 {
				gone[id+1] = true
			}
		}
		dl := make([]int, nGrains+1)
		for id := 1; id <= nGrains; id++ {
			dl[id] = rapid.IntRange(1, 30).Draw(t, "dl")
		}
		terms := make([][]Block, nTerms)
		model := map[int64]float64{}
		var total, docs int64
		for id := 1; id <= nGrains; id++ {
			total += int64(dl[id])
		}
		docs = int64(nGrains)
		avgdl := float64(total) / float64(docs)
		postings := make([][]Posting, nTerms)
		for i := range nTerms {
			// Term i is in about a share of the grains: some rare, some common.
			share := rapid.IntRange(1, 100).Draw(t, "share")
			for id := 1; id <= nGrains; id++ {
				if rapid.IntRange(1, 100).Draw(t, "in") <= share {
					tf := rapid.IntRange(1, 4).Draw(t, "tf")
					postings[i] = append(postings[i], Posting{int64(id), tf, dl[id]})
				}
			}
		}
		for i, ps := range postings {
			df := 0
			for start := 0; start < len(ps); start += batch {
				v := EncodeBlock(slices.Clone(ps[start:min(start+batch, len(ps))]))
				v, _, err := RemoveFromBlock(v, gone)
				if err != nil {
					t.Fatal(err)
				}
				if v == nil {
					continue
				}
				b, err := DecodeBlock([]byte{byte(i)}, v)
				if err != nil {
					t.Fatal(err)
				}
				terms[i] = append(terms[i], b)
				df += b.Count
			}
			for _, p := range ps {
				if !gone[p.ID] {
					model[p.ID] += BM25(p.TF, p.DL, df, docs, avgdl)
				}
			}
		}
		var want []Scored
		for id, s := range model {
			want = append(want, Scored{id, s})
		}
		slices.SortFunc(want, func(a, b Scored) int {
			if c := cmp.Compare(b.Score, a.Score); c != 0 {
				return c
			}
			return cmp.Compare(b.ID, a.ID)
		})
		k := rapid.IntRange(1, 50).Draw(t, "k")
		got, more, err := Top(terms, docs, avgdl, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != min(k, len(want)) {
			t.Fatalf("Top returned %d, want %d", len(got), min(k, len(want)))
		}
		for i, g := range got {
			if _, ok := model[g.ID]; !ok {
				t.Fatalf("Top returned %d, which holds no term or was removed", g.ID)
			}
			if math.Abs(g.Score-want[i].Score) > 1e-9 || math.Abs(g.Score-model[g.ID]) > 1e-9 {
				t.Fatalf("Top[%d] = %+v, want score %v (model's %v)", i, g, want[i].Score, model[g.ID])
			}
		}
		if !more && len(want) > k {
			t.Fatalf("Top says nothing was left out, but %d grains hold a term and k = %d", len(want), k)
		}
	})
}

func TestBlockRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 200).Draw(t, "n")
		ids := rapid.SliceOfNDistinct(rapid.Int64Range(1, 1<<40), n, n, func(x int64) int64 { return x }).Draw(t, "ids")
		ps := make([]Posting, n)
		for i, id := range ids {
			ps[i] = Posting{id, rapid.IntRange(1, 1000).Draw(t, "tf"), rapid.IntRange(1, 100000).Draw(t, "dl")}
		}
		b, err := DecodeBlock(nil, EncodeBlock(slices.Clone(ps)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Postings(nil)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(ps, func(a, b Posting) int { return cmp.Compare(a.ID, b.ID) })
		if !slices.Equal(got, ps) {
			t.Fatalf("round trip: %v, want %v", got, ps)
		}
		for _, r := range b.Runs {
			rs, _ := r.Postings(nil)
			for _, p := range rs {
				if p.TF > r.MaxTF || p.DL < r.MinDL || p.ID < r.First || p.ID > r.Last {
					t.Fatalf("run header %+v does not bound %+v", r, p)
				}
			}
		}
	})
}

// TestTopSkips checks that Top reads few of a common word's runs: 20,000
// grains in batches of 1,000, a word in every other grain (tf 1, one grain
// in 500 with tf 3) and a rare word in one grain in 200. Alone, the common
// word's top 10 is in the 20 runs holding a tf 3; with the rare word, the
// common word adds only to the grains the rare word found.
func TestTopSkips(t *testing.T) {
	var common, rare []Posting
	for id := int64(1); id <= 20000; id++ {
		if id%2 == 0 {
			tf := 1
			if id%1000 == 0 {
				tf = 3
			}
			common = append(common, Posting{id, tf, 12})
		}
		if id%200 == 7 {
			rare = append(rare, Posting{id, 1, 12})
		}
	}
	blocks := func(ps []Posting) []Block {
		var out []Block
		for start := int64(1); start <= 20000; start += 1000 {
			var part []Posting
			for _, p := range ps {
				if p.ID >= start && p.ID < start+1000 {
					part = append(part, p)
				}
			}
			if len(part) > 0 {
				b, err := DecodeBlock(nil, EncodeBlock(part))
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b)
			}
		}
		return out
	}
	cb, rb := blocks(common), blocks(rare)
	runs := 0
	for _, b := range cb {
		runs += len(b.Runs)
	}
	for _, tt := range []struct {
		name  string
		terms [][]Block
		most  int
	}{
		{"common word alone", [][]Block{cb}, 20},
		// At most the 100 runs whose id range holds a grain of the rare
		// word, and the 20 holding a tf 3.
		{"common and rare", [][]Block{cb, rb}, 120},
	} {
		read := 0
		got, more, err := top(tt.terms, 20000, 12, 10, &read)
		if err != nil || len(got) != 10 || !more {
			t.Fatalf("%s: top = %v, %v, %v", tt.name, got, more, err)
		}
		t.Logf("%s: read %d of %d runs of the common word", tt.name, read, runs)
		if read > tt.most {
			t.Errorf("%s: read %d runs, want at most %d", tt.name, read, tt.most)
		}
	}
}
