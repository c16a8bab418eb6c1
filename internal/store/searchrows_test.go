package store

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe/internal/search"
)

// zipfBatch returns a batch of n grains of 12 terms each, drawn from a
// vocabulary of 20,000 tokens by Zipf's law (as BenchmarkSearchTextWriteCost's
// corpus), their ids set from first. Rows of one batch share each token's
// slice, as the recall engine's Indexer gives them.
func zipfBatch(n int, first int64, seed uint64) []*GrainRow {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.1, 1, 19999)
	vocab := map[uint64][]byte{}
	rows := make([]*GrainRow, n)
	for i := range rows {
		counts := map[uint64]int{}
		var order []uint64
		for range 12 {
			w := z.Uint64()
			if counts[w] == 0 {
				order = append(order, w)
			}
			counts[w]++
		}
		row := &GrainRow{ID: first + int64(i), DocLen: 12}
		for _, w := range order {
			if vocab[w] == nil {
				h := sha256.Sum256(fmt.Appendf(nil, "w%d", w))
				vocab[w] = h[:16]
			}
			row.Terms = append(row.Terms, TermRow{Token: vocab[w], TF: counts[w], DL: 12})
		}
		rows[i] = row
	}
	return rows
}

// BenchmarkSearchRows times building a batch's postings blocks and
// document rows (searchRows, in the write transaction of every batch add),
// and its two parts: the plan (beside the grains' insert, for batches of
// planParallel grains or more) and the rows from it (on the batch's path).
func BenchmarkSearchRows(b *testing.B) {
	for _, n := range []int{10, 1000} {
		rows := zipfBatch(n, 1, 1)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				searchRows("m", rows)
			}
		})
		b.Run(fmt.Sprint(n, "/plan"), func(b *testing.B) {
			for b.Loop() {
				planSearch(rows)
			}
		})
		b.Run(fmt.Sprint(n, "/rows"), func(b *testing.B) {
			p := planSearch(rows)
			for b.Loop() {
				p.rows("m", rows)
			}
		})
	}
}

// referenceSearchRows is searchRows as first written (a map of posting
// slices, copies of every token and value): the model the faster one must
// match.
func referenceSearchRows(memory string, stored []*GrainRow) ([][]any, [][]any) {
	var block int64
	for _, r := range stored {
		if block == 0 || r.ID < block {
			block = r.ID
		}
	}
	byTok := map[string][]search.Posting{}
	var toks []string
	var docs [][]any
	for _, r := range stored {
		for _, t := range r.Terms {
			k := string(t.Token)
			if byTok[k] == nil {
				toks = append(toks, k)
			}
			byTok[k] = append(byTok[k], search.Posting{ID: r.ID, TF: t.TF, DL: t.DL})
		}
		if r.DocLen > 0 || r.Dim > 0 {
			var pt any
			if len(r.Terms) > 0 {
				pt = packTokens(r.Terms)
			}
			docs = append(docs, []any{r.ID, memory, r.DocLen, r.Dim, block, pt})
		}
	}
	slices.Sort(toks)
	terms := make([][]any, len(toks))
	for i, k := range toks {
		terms[i] = []any{[]byte(k), block, search.EncodeBlock(byTok[k])}
	}
	return terms, docs
}

// TestSearchRowsMatchesReference checks searchRows against the reference
// on random batches: shared and unshared token slices of equal bytes,
// grains without terms, with an embedding only, ids in any order.
func TestSearchRowsMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alphabet := rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 20), 1, 30).Draw(t, "tokens")
		ids := rapid.SliceOfNDistinct(rapid.Int64Range(1, 1<<40), 0, 60, rapid.ID[int64]).Draw(t, "ids")
		var rows []*GrainRow
		for i, id := range ids {
			row := &GrainRow{ID: id, DocLen: rapid.IntRange(0, 40).Draw(t, fmt.Sprint("len", i)), Dim: rapid.SampledFrom([]int{0, 0, 3}).Draw(t, fmt.Sprint("dim", i))}
			seen := map[string]bool{}
			for _, w := range rapid.SliceOfN(rapid.IntRange(0, len(alphabet)-1), 0, 12).Draw(t, fmt.Sprint("terms", i)) {
				tok := alphabet[w]
				if seen[string(tok)] {
					continue // a grain's terms are distinct
				}
				seen[string(tok)] = true
				if rapid.Bool().Draw(t, fmt.Sprint("copy", i, w)) {
					tok = bytes.Clone(tok) // equal bytes, another slice
				}
				row.Terms = append(row.Terms, TermRow{Token: tok, TF: rapid.IntRange(1, 5).Draw(t, "tf"), DL: row.DocLen})
			}
			rows = append(rows, row)
		}
		entries, block, gotD := searchRows("m", rows)
		gotT := postingRows(entries, block)
		wantT, wantD := referenceSearchRows("m", rows)
		if !reflect.DeepEqual(normalise(gotT), normalise(wantT)) {
			t.Fatalf("blocks\n got %v\nwant %v", gotT, wantT)
		}
		if !reflect.DeepEqual(normalise(gotD), normalise(wantD)) {
			t.Fatalf("documents\n got %v\nwant %v", gotD, wantD)
		}
	})
}

// normalise makes nil and empty byte slices alike, as SQL binds them.
func normalise(rows [][]any) [][]any {
	out := make([][]any, len(rows))
	for i, r := range rows {
		out[i] = slices.Clone(r)
		for j, v := range r {
			if b, ok := v.([]byte); ok && len(b) == 0 {
				out[i][j] = []byte{}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
