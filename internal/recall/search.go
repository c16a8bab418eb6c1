package recall

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/index"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/search"
	"github.com/lethe-io/lethe/internal/store"
)

// statsTTL bounds how long a memory's text statistics (document count and
// mean length) are reused. They weigh terms; they decide nothing about
// what is returned.
const statsTTL = 10 * time.Second

// vectorResync is how often a memory's vector index is checked against
// the store's list of grains with an embedding, dropping those deleted
// since (a search drops those it meets at once).
const vectorResync = 30 * time.Second

// CheckDimensions checks the embeddings of a batch of one memory against
// the memory's dimension, fixing it on the first embedding.
func (e *Engine) CheckDimensions(ctx context.Context, batch []grains.Grain) error {
	for i := range batch {
		n := len(batch[i].Embedding)
		if n == 0 {
			continue
		}
		dim, err := e.dimension(ctx, batch[i].Memory, n)
		if err != nil {
			return err
		}
		if dim != n {
			return grains.AtIndex(dimensionError(dim, n), i, len(batch))
		}
	}
	return nil
}

func dimensionError(want, got int) error {
	return &grains.Error{Code: grains.CodeDimensionMismatch, Field: "embedding",
		Message: "this memory's embeddings have " + strconv.Itoa(want) + " dimensions, not " + strconv.Itoa(got),
		Hint:    "every embedding of a memory has the dimension of its first; use another memory for another model"}
}

// dimension returns memory's embedding dimension; with fix > 0, a memory
// without one gets fix.
func (e *Engine) dimension(ctx context.Context, memory string, fix int) (int, error) {
	e.mu.Lock()
	dim, ok := e.dims[memory]
	e.mu.Unlock()
	if ok {
		return dim, nil
	}
	var err error
	if fix > 0 {
		dim, err = e.store.FixDimension(ctx, memory, fix)
	} else {
		dim, err = e.store.Dimension(ctx, memory)
	}
	if err != nil || dim == 0 {
		return dim, err
	}
	e.mu.Lock()
	e.dims[memory] = dim
	e.mu.Unlock()
	return dim, nil
}

// candidate is a grain an index proposes, with its relevance there.
type candidate struct {
	id       int64
	text     float64 // BM25
	vector   float64 // cosine similarity
	proposed float64 // the order candidates are read in
}

// search answers a text or vector query (see Query.Search).
func (e *Engine) search(ctx context.Context, q *grains.Query) (*Page, error) {
	for fresh := false; ; fresh = true {
		page, err := e.searchOnce(ctx, q, fresh)
		if errors.Is(err, store.ErrStaleScopes) && !fresh {
			continue // the cached index keys miss a scope: read them again
		}
		return page, err
	}
}

func (e *Engine) searchOnce(ctx context.Context, q *grains.Query, fresh bool) (*Page, error) {
	page := &Page{Grains: []grains.Grain{}}
	f, ok, err := e.Filter(ctx, q, fresh)
	if err != nil || !ok {
		return page, err
	}
	if q.Embedding != nil {
		dim, err := e.dimension(ctx, q.Memory, 0)
		if err != nil {
			return nil, err
		}
		if dim == 0 {
			return page, nil // no embedding was ever written here
		}
		if dim != len(q.Embedding) {
			return nil, dimensionError(dim, len(q.Embedding))
		}
	}
	terms := search.QueryTerms(q.Text)
	var text textIndex
	if len(terms) > 0 {
		if text, err = e.textCandidates(ctx, q, f, terms, fresh); err != nil {
			return nil, err
		}
	}
	var vecs *vectorIndex
	if q.Embedding != nil {
		if vecs, err = e.vectors(ctx, q.Memory); err != nil {
			return nil, err
		}
	}
	now := e.now().UTC()
	window := max(2*q.Limit, 20)
	// With an embedding, the nearest k vectors are candidates; with text,
	// the 4k best by BM25 (every grain holding a term with an embedding
	// too, for the hybrid rank); if the filters leave too few of them, k
	// grows.
	var found []grains.Grain
	var ids []int64
	for k := window; ; k *= 4 {
		kText := 4 * k
		if vecs != nil {
			kText = 1 << 30
		}
		top, more, err := text.top(kText)
		if err != nil {
			return nil, err
		}
		cands := make(map[int64]*candidate, len(top)+k)
		for _, s := range top {
			cands[s.ID] = &candidate{id: s.ID, text: s.Score}
		}
		if vecs != nil {
			for _, h := range vecs.set.Nearest(q.Embedding, k) {
				c := cands[h.ID]
				if c == nil {
					c = &candidate{id: h.ID}
					cands[h.ID] = c
				}
				c.vector = h.Sim
			}
		}
		var decided bool
		if found, ids, decided, err = e.collect(ctx, q, f, terms, vecs, cands, window, now); err != nil {
			return nil, err
		}
		if decided {
			break
		}
		if more && len(found) < window {
			continue
		}
		if vecs == nil || len(found) >= q.Limit || k >= vecs.set.Len() {
			break
		}
	}
	order := make([]int, len(found))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(found[b].Score, found[a].Score) })
	order = order[:min(len(order), q.Limit)]
	kept := make([]int64, 0, len(order))
	for _, i := range order {
		page.Grains = append(page.Grains, found[i])
		kept = append(kept, ids[i])
	}
	e.sweep.Searched(q.Memory, now, page.Grains, kept)
	return page, nil
}

// collect reads the candidates best first, window at a time, until window
// of them pass the filters (their final rank, relevance times decay, is
// decided among these) or none is left. It returns the grains, each with
// its Score, their row ids, and whether the answer is decided: window of
// them were found, or fewer but the limit best already outscore every
// candidate left.
//
// It reads the limit best candidates first, and stops there when the
// limit-th best score among those that pass is at least the bound of the
// next candidate (see bound): no candidate left can then enter the first
// limit, as it would sort after them (a stable sort by score, in the order
// read). The answer is the one reading window candidates gives, for half
// the reads when decay and the filters leave the order alone.
func (e *Engine) collect(ctx context.Context, q *grains.Query, f *store.Filter, terms []string, vecs *vectorIndex,
	cands map[int64]*candidate, window int, now time.Time) ([]grains.Grain, []int64, bool, error) {
	list := make([]*candidate, 0, len(cands))
	bestText := 0.0
	for _, c := range cands {
		bestText = max(bestText, c.text)
		list = append(list, c)
	}
	hasText, hasVector := len(terms) > 0, q.Embedding != nil
	for _, c := range list {
		c.proposed = relevance(c.text, bestText, c.vector, hasText, hasVector)
	}
	slices.SortFunc(list, func(a, b *candidate) int {
		if c := cmp.Compare(b.proposed, a.proposed); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	var found []grains.Grain
	var ids []int64
	var scores []float64 // of found, best first: the limit-th is the bar
	for start := 0; start < len(list) && len(found) < window; {
		// The first part is the limit best candidates; then on to a
		// multiple of window, as many as the filters need.
		end := window * (start/window + 1)
		if start == 0 {
			end = max(q.Limit, 1)
		}
		part := list[start:min(end, len(list))]
		start += len(part)
		want := make([]int64, len(part))
		byID := make(map[int64]*candidate, len(part))
		for i, c := range part {
			want[i], byID[c.id] = c.id, c
		}
		rows, err := e.store.GrainsByIDs(ctx, *f, want)
		if err != nil {
			return nil, nil, false, err
		}
		e.opener.Prepare(ctx, rows) // before open: an erase seen here empties the key cache
		for i := range rows {
			g, err := e.opener.Open(ctx, &rows[i])
			if grains.ErrorCode(err) == grains.CodeErased {
				if vecs != nil {
					vecs.set.Remove(rows[i].ID)
				}
				continue
			}
			if err != nil {
				return nil, nil, false, err
			}
			if !matches(g, q) || !textMatches(g, terms) {
				continue
			}
			c := byID[rows[i].ID]
			if hasVector {
				c.vector = search.Cosine(q.Embedding, g.Embedding) // the sealed vector, not the index's copy
			}
			rel := relevance(c.text, bestText, c.vector, hasText, hasVector)
			g.Score = e.sweep.Policy().Retrieval.Rank(rel, forgetting.FactsOf(g), now)
			found = append(found, *g)
			ids = append(ids, rows[i].ID)
			scores = append(scores, g.Score)
		}
		if start < len(list) && len(found) >= max(q.Limit, 1) && len(found) < window {
			slices.SortFunc(scores, func(a, b float64) int { return cmp.Compare(b, a) })
			if scores[max(q.Limit, 1)-1] >= bound(list[start].proposed, hasVector) {
				return found, ids, true, nil
			}
		}
	}
	return found, ids, len(found) >= window, nil
}

// bound is the most a candidate proposed at relevance rel can score: the
// score is its relevance times a retrieval score in [0, 1] (see
// forgetting.RetrievalConfig.Rank), and a relevance is at most rel, or,
// with a vector, rel plus what the sealed vector's cosine similarity may
// differ from the index's (float32, normalised) by rounding.
func bound(rel float64, hasVector bool) float64 {
	if hasVector {
		rel += 1e-4
	}
	return max(rel, 0)
}

// relevance combines a candidate's text and vector relevance: BM25
// divided by the best BM25 among the candidates (so in [0, 1]), the cosine
// similarity, or with both their sum.
func relevance(text, bestText, vector float64, hasText, hasVector bool) float64 {
	r := 0.0
	if hasText && bestText > 0 {
		if !hasVector {
			return text
		}
		r = text / bestText
	}
	if hasVector {
		r += vector
	}
	return r
}

// textMatches re-checks a decrypted grain against the query's terms (none:
// no text query), so that a token collision never returns a wrong grain.
func textMatches(g *grains.Grain, terms []string) bool {
	return len(terms) == 0 || search.Matches(terms, g.Subject, g.Object, g.Content)
}

// textIndex is a text query's postings, read once and ranked by top.
type textIndex struct {
	terms [][]search.Block
	st    textStats
}

// top returns the k best grains by BM25 and whether others hold a term.
func (t textIndex) top(k int) ([]search.Scored, bool, error) {
	if t.terms == nil {
		return nil, false, nil
	}
	return search.Top(t.terms, t.st.docs, t.st.avgdl, k)
}

// textCandidates reads the postings of the grains holding any of terms.
func (e *Engine) textCandidates(ctx context.Context, q *grains.Query, f *store.Filter, terms []string, fresh bool) (textIndex, error) {
	out := textIndex{terms: make([][]search.Block, len(terms))}
	idx, gen, err := e.keys.IndexKeys(ctx, q.Memory, q.Scope, fresh)
	if err != nil {
		return out, err
	}
	if !f.CheckScopeGen && !fresh {
		f.ScopeGen, f.CheckScopeGen = gen, true
	} else if f.CheckScopeGen && f.ScopeGen != gen {
		return out, store.ErrStaleScopes
	}
	termOf := make(map[string]int, len(terms)*len(idx))
	toks := make([][]byte, 0, len(terms)*len(idx))
	for i, t := range terms {
		for _, s := range idx {
			tok := s.Index.Token(index.Term, []byte(t))
			termOf[string(tok)] = i
			toks = append(toks, tok)
		}
	}
	if len(toks) == 0 {
		return out, nil
	}
	blocks, err := e.store.PostingBlocks(ctx, toks)
	if err != nil {
		return out, err
	}
	if f.CheckScopeGen {
		// The tokens came from cached keys: a scope created since has
		// none here, and its grains would be missed. The generation only
		// grows, so if it is still the keys' after the postings were read,
		// no scope was missing when they were.
		now, err := e.store.ScopeGeneration(ctx, q.Memory)
		if err != nil {
			return out, err
		}
		if now != f.ScopeGen {
			return out, store.ErrStaleScopes
		}
		f.CheckScopeGen = false
	}
	for _, b := range blocks {
		i := termOf[string(b.Token)]
		out.terms[i] = append(out.terms[i], b)
	}
	out.st, err = e.textStats(ctx, q.Memory)
	return out, err
}

// textStats returns memory's text statistics, read at most statsTTL ago.
func (e *Engine) textStats(ctx context.Context, memory string) (textStats, error) {
	now := time.Now()
	e.mu.Lock()
	st, ok := e.stats[memory]
	e.mu.Unlock()
	if ok && now.Sub(st.at) < statsTTL {
		return st, nil
	}
	docs, total, err := e.store.TextStats(ctx, memory)
	if err != nil {
		return st, err
	}
	st = textStats{docs: docs, at: now}
	if docs > 0 {
		st.avgdl = float64(total) / float64(docs)
	}
	e.mu.Lock()
	e.stats[memory] = st
	e.mu.Unlock()
	return st, nil
}

// vectors returns memory's vector index, loading it from the sealed rows
// on first use, adding the grains written since the last call, and every
// vectorResync dropping the grains deleted since.
func (e *Engine) vectors(ctx context.Context, memory string) (*vectorIndex, error) {
	e.mu.Lock()
	v := e.vecs[memory]
	if v == nil {
		v = &vectorIndex{set: search.NewSet()}
		if e.closed {
			v.set.Close()
		}
		e.vecs[memory] = v
	}
	e.mu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	after := v.last
	resync := time.Since(v.synced) > vectorResync
	if resync {
		after = 0
	}
	ids, err := e.store.VectorIDs(ctx, memory, after)
	if err != nil {
		return nil, err
	}
	if resync {
		v.set.Keep(ids)
		v.synced = time.Now()
	}
	var todo []int64
	for _, id := range ids {
		if !v.set.Has(id) {
			todo = append(todo, id)
		}
	}
	f := store.Filter{Memory: memory, IncludeSuperseded: true, IncludeArchived: true}
	if len(todo) > 0 {
		dim, err := e.dimension(ctx, memory, 0)
		if err != nil {
			return nil, err
		}
		v.set.Reserve(len(todo), dim)
	}
	for i := 0; i < len(todo); i += 500 {
		rows, err := e.store.GrainsByIDs(ctx, f, todo[i:min(i+500, len(todo))])
		if err != nil {
			return nil, err
		}
		e.opener.Prepare(ctx, rows)
		for j := range rows {
			g, err := e.opener.Open(ctx, &rows[j])
			if grains.ErrorCode(err) == grains.CodeErased {
				continue
			}
			if err != nil {
				return nil, err
			}
			if len(g.Embedding) > 0 {
				v.set.Add(rows[j].ID, g.Embedding)
			}
		}
	}
	if len(ids) > 0 {
		v.last = max(v.last, ids[len(ids)-1])
	}
	return v, nil
}

type textStats struct {
	docs  int64
	avgdl float64
	at    time.Time
}

// vectorIndex is one memory's vectors, loaded from the sealed rows on first
// use and kept up to date by id.
type vectorIndex struct {
	mu     sync.Mutex // held while loading
	set    *search.Set
	last   int64 // the highest grain id read
	synced time.Time
}

// Indexer returns a function that adds a grain's text postings and
// embedding dimension to its row, for the grains of one batch: it
// remembers the stems and tokens of the words it met (search.Words), and
// is dropped with the batch. The postings are blind: a term's token is its
// HMAC under the scope's index key. It is the sealer's Index hook.
func (e *Engine) Indexer() func(row *store.GrainRow, c *keys.Chain, g *grains.Grain) {
	words := search.NewWords()
	type termKey struct {
		key  *index.Key
		term string
	}
	tokens := map[termKey][]byte{}
	var terms []search.TermCount // one grain's, reused
	return func(row *store.GrainRow, c *keys.Chain, g *grains.Grain) {
		var n int
		terms, n = words.Count(terms[:0], g.Subject, g.Object, g.Content)
		row.DocLen, row.Dim = n, len(g.Embedding)
		row.Terms = make([]store.TermRow, 0, len(terms))
		for _, t := range terms {
			k := termKey{c.Index, t.Term}
			tok, ok := tokens[k]
			if !ok {
				tok = c.Index.Token(index.Term, []byte(t.Term))
				tokens[k] = tok
			}
			row.Terms = append(row.Terms, store.TermRow{Token: tok, TF: t.N, DL: n})
		}
	}
}

// Vectors returns memory's in-memory vector index, nil when it is not
// loaded (for measurements: its size, its graph).
func (e *Engine) Vectors(memory string) *search.Set {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v := e.vecs[memory]; v != nil {
		return v.set
	}
	return nil
}
