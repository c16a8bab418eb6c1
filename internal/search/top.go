package search

import (
	"cmp"
	"slices"
)

// Scored is a grain and its BM25 score for a query.
type Scored struct {
	ID    int64
	Score float64
}

// Top returns the k grains of highest BM25 score for a query whose i-th
// term's postings are the blocks terms[i] (of every scope's token), best
// first (ties: the higher id first), and whether any grain holding a
// term is left out. n and avgdl are the memory's document count and mean
// length.
//
// It is MaxScore (Turtle and Flood, "Query evaluation: strategies and
// optimizations", 1995) over runs of SubBlock postings with their own
// upper bounds (block-max): terms are read from the highest bound to the
// lowest; a run is skipped when no grain in it can reach the k-th best
// score found so far, even with every term still to read; once the terms
// left cannot lift a grain not yet seen to the k-th best, they only add to
// the grains seen, reading only the runs whose id range holds one. BM25's
// idf makes a word in half the grains worth little, so most of its runs
// are skipped. The scores returned are exact, and so is the set but for
// grains of a score equal to the k-th's.
func Top(terms [][]Block, n int64, avgdl float64, k int) ([]Scored, bool, error) {
	return top(terms, n, avgdl, k, new(int))
}

// top is Top, counting the runs it reads in *read.
func top(terms [][]Block, n int64, avgdl float64, k int, read *int) ([]Scored, bool, error) {
	type termRuns struct {
		idf, bound float64
		runs       []Run
		bounds     []float64
	}
	ts := make([]termRuns, 0, len(terms))
	for _, blocks := range terms {
		df := 0
		for _, b := range blocks {
			df += b.Count
		}
		if df == 0 {
			continue
		}
		t := termRuns{idf: IDF(df, n)}
		for _, b := range blocks {
			t.runs = append(t.runs, b.Runs...)
		}
		// Highest bound first, then the higher ids, which win ties.
		t.bounds = make([]float64, len(t.runs))
		idx := make([]int, len(t.runs))
		for i, r := range t.runs {
			t.bounds[i], idx[i] = t.idf*tfPart(r.MaxTF, r.MinDL, avgdl), i
			t.bound = max(t.bound, t.bounds[i])
		}
		slices.SortFunc(idx, func(a, b int) int {
			if c := cmp.Compare(t.bounds[b], t.bounds[a]); c != 0 {
				return c
			}
			return cmp.Compare(t.runs[b].First, t.runs[a].First)
		})
		runs, bounds := make([]Run, len(idx)), make([]float64, len(idx))
		for i, j := range idx {
			runs[i], bounds[i] = t.runs[j], t.bounds[j]
		}
		t.runs, t.bounds = runs, bounds
		ts = append(ts, t)
	}
	slices.SortStableFunc(ts, func(a, b termRuns) int { return cmp.Compare(b.bound, a.bound) })
	rest := make([]float64, len(ts)+1) // rest[j]: the bounds of terms j on
	for j := len(ts) - 1; j >= 0; j-- {
		rest[j] = rest[j+1] + ts[j].bound
	}
	acc := map[int64]float64{}
	skipped := false
	var ps []Posting
	for j, t := range ts {
		theta := kth(acc, k) // the k-th best so far; it only grows
		maxAcc := 0.0
		for _, s := range acc {
			maxAcc = max(maxAcc, s)
		}
		// New grains cannot reach theta: only add to those seen.
		seenOnly := len(acc) >= k && rest[j] < theta
		var seen []int64
		if seenOnly {
			seen = make([]int64, 0, len(acc))
			for id := range acc {
				seen = append(seen, id)
			}
			slices.Sort(seen)
		}
		// The k best of the grains this term adds to, a lower bound of
		// acc's k-th best while the term is read.
		best := minHeap{}
		for i, r := range t.runs {
			floor := theta
			if len(best) == k {
				floor = max(floor, best[0])
			}
			if (len(acc) >= k || len(best) == k) && maxAcc+t.bounds[i]+rest[j+1] < floor {
				skipped = true
				continue
			}
			if seenOnly {
				at, _ := slices.BinarySearch(seen, r.First)
				if at == len(seen) || seen[at] > r.Last {
					skipped = true
					continue
				}
			}
			*read++
			var err error
			if ps, err = r.Postings(ps[:0]); err != nil {
				return nil, false, err
			}
			for _, p := range ps {
				old, ok := acc[p.ID]
				if seenOnly && !ok {
					skipped = true
					continue
				}
				s := old + t.idf*tfPart(p.TF, p.DL, avgdl)
				acc[p.ID] = s
				best.offer(s, k)
			}
		}
	}
	out := make([]Scored, 0, len(acc))
	for id, s := range acc {
		out = append(out, Scored{id, s})
	}
	slices.SortFunc(out, func(a, b Scored) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	more := skipped || len(out) > k
	return out[:min(k, len(out))], more, nil
}

// kth returns the k-th largest value of acc, or -1 if it has fewer.
func kth(acc map[int64]float64, k int) float64 {
	if len(acc) < k {
		return -1
	}
	h := minHeap{}
	for _, s := range acc {
		h.offer(s, k)
	}
	return h[0]
}

// minHeap keeps the k largest values offered, the least on top.
type minHeap []float64

func (h *minHeap) offer(x float64, k int) {
	c := *h
	if len(c) == k {
		if x <= c[0] {
			return
		}
		c[0] = x
		for i := 0; ; {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(c) && c[l] < c[m] {
				m = l
			}
			if r < len(c) && c[r] < c[m] {
				m = r
			}
			if m == i {
				break
			}
			c[i], c[m] = c[m], c[i]
			i = m
		}
		return
	}
	c = append(c, x)
	for i := len(c) - 1; i > 0; {
		p := (i - 1) / 2
		if c[p] <= c[i] {
			break
		}
		c[i], c[p] = c[p], c[i]
		i = p
	}
	*h = c
}
