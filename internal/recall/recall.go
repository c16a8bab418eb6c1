// Package recall answers queries: a grains.Query becomes a store filter
// with blind tokens, pages of the store's rows are opened and checked
// again against the query, and text and vector queries (Query.Search) are
// ranked over candidates from the blind postings and the in-memory vector
// indexes (package search's BM25 and cosine similarity).
//
// # Trust
//
// No index is trusted: every candidate is read again from the store
// through the query's filters, with its memory's erase epoch, decrypted,
// and checked against the query before it is returned. An index entry left
// behind (a vector of a grain another replica forgot or erased) can cost a
// read, never return a grain. See docs/search.md.
//
// # Ports
//
// The Engine states what it needs as small interfaces: [Store] (rows,
// postings and statistics), [Keys] (index keys and user references),
// [Opener] (the sealer) and [Tracker] (the retrieval statistics and the
// policy that ranks). It never imports package lethe.
package recall

import (
	"context"
	"errors"
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

// Store is what the Engine reads from the store. *store.DB implements it.
type Store interface {
	FindGrains(ctx context.Context, f store.Filter) ([]store.GrainRow, error)
	GrainsByIDs(ctx context.Context, f store.Filter, ids []int64) ([]store.GrainRow, error)
	PostingBlocks(ctx context.Context, toks [][]byte) ([]search.Block, error)
	ScopeGeneration(ctx context.Context, memory string) (int64, error)
	TextStats(ctx context.Context, memory string) (docs, total int64, err error)
	VectorIDs(ctx context.Context, memory string, after int64) ([]int64, error)
	FixDimension(ctx context.Context, memory string, dim int) (int, error)
	Dimension(ctx context.Context, memory string) (int, error)
	Placements(ctx context.Context, memory string, hashes []string) ([]store.GrainRow, error)
}

var _ Store = (*store.DB)(nil)

// Keys gives the blind index keys of a scope prefix and the reference of
// a user, each with the memory's scope generation (see
// keys.Keyring.IndexKeys). *keys.Keyring implements it.
type Keys interface {
	IndexKeys(ctx context.Context, memory, prefix string, fresh bool) ([]keys.ScopeIndex, int64, error)
	UserRefAt(ctx context.Context, memory, userID string, fresh bool) ([]byte, int64, error)
	GrainKey(ctx context.Context, chain string) ([]byte, error)
}

var _ Keys = (*keys.Keyring)(nil)

// Opener opens sealed rows. Prepare must see every batch of rows read
// before any of them is opened: a newer erase epoch in them drops the
// memory's cached keys, and then the keys the rows need are read, in one
// read for the batch instead of one per grain. Open fails with code erased
// for a row whose key is gone.
type Opener interface {
	Prepare(ctx context.Context, rows []store.GrainRow)
	Open(ctx context.Context, r *store.GrainRow) (*grains.Grain, error)
}

// Tracker is the sweeper's side of recall: the policy that ranks, and the
// retrieval statistics of what is returned (recorded in the background).
// *sweep.Sweeper implements it.
type Tracker interface {
	Policy() *forgetting.Policy
	Recalled(q *grains.Query, gs []grains.Grain, ids []int64)
	Searched(memory string, now time.Time, gs []grains.Grain, ids []int64)
}

// Config configures an Engine.
type Config struct {
	Store  Store
	Keys   Keys
	Opener Opener
	Sweep  Tracker
	Now    func() time.Time
}

// Engine answers queries. It keeps, per memory, the text statistics, the
// embedding dimension and the in-memory vector index. It is safe for
// concurrent use.
type Engine struct {
	store  Store
	keys   Keys
	opener Opener
	sweep  Tracker
	now    func() time.Time

	mu    sync.Mutex
	stats map[string]textStats
	dims  map[string]int
	vecs  map[string]*vectorIndex
	// closed: the vector indexes build no graph (see Close).
	closed bool
}

// New returns an Engine.
func New(cfg Config) *Engine {
	return &Engine{store: cfg.Store, keys: cfg.Keys, opener: cfg.Opener, sweep: cfg.Sweep, now: cfg.Now,
		stats: map[string]textStats{}, dims: map[string]int{}, vecs: map[string]*vectorIndex{}}
}

// Close stops the vector indexes' graph builds in progress and waits for
// them; indexes loaded afterwards build none. For the DB's Close, before
// the store closes.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	sets := make([]*search.Set, 0, len(e.vecs))
	for _, v := range e.vecs {
		sets = append(sets, v.set)
	}
	e.mu.Unlock()
	for _, s := range sets {
		s.Close()
	}
}

// Recall answers q (see package lethe's DB.Recall) and hands what it
// returns to the sweeper's retrieval tracker.
func (e *Engine) Recall(ctx context.Context, q grains.Query) (*Page, error) {
	if len(q.Tags) > grains.MaxTags { // bounded as given, before duplicates go
		return nil, grains.FieldError(grains.CodeTooLarge, "tags", "at most 64 tags")
	}
	q.Normalize()
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if q.Search() {
		return e.search(ctx, &q)
	}
	rows, err := e.find(ctx, &q)
	if err != nil {
		return nil, err
	}
	e.opener.Prepare(ctx, rows)
	page := &Page{Grains: make([]grains.Grain, 0, len(rows))}
	ids := make([]int64, 0, len(rows))
	for i := range rows {
		g, err := e.opener.Open(ctx, &rows[i])
		if grains.ErrorCode(err) == grains.CodeErased {
			continue
		}
		if err != nil {
			return nil, err
		}
		if matches(g, &q) {
			page.Grains = append(page.Grains, *g)
			ids = append(ids, rows[i].ID)
		}
	}
	if len(rows) == q.Limit {
		page.Next = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	e.sweep.Recalled(&q, page.Grains, ids)
	return page, nil
}

// find returns the rows of a page of q's answer.
func (e *Engine) find(ctx context.Context, q *grains.Query) ([]store.GrainRow, error) {
	var before int64
	if q.Cursor != "" {
		id, err := strconv.ParseInt(q.Cursor, 10, 64)
		if err != nil || id <= 0 {
			return nil, grains.FieldError(grains.CodeInvalidArgument, "cursor", "not a cursor from a previous page")
		}
		before = id
	}
	for fresh := false; ; fresh = true {
		f, ok, err := e.Filter(ctx, q, fresh)
		if errors.Is(err, store.ErrStaleScopes) && !fresh {
			continue
		}
		if err != nil || !ok {
			return nil, err
		}
		f.BeforeID, f.Limit = before, q.Limit
		rows, err := e.store.FindGrains(ctx, *f)
		if errors.Is(err, store.ErrStaleScopes) && !fresh {
			continue // the cached index keys miss a scope: read them again
		}
		return rows, err
	}
}

// Filter turns q into a store filter. ok is false when q can match nothing
// (the memory has no keys yet, so it has no grains). Unless fresh is set,
// the tokens may come from cached index keys, and the filter asks the store
// to check that they are not stale (see keys.Keyring.IndexKeys).
func (e *Engine) Filter(ctx context.Context, q *grains.Query, fresh bool) (*store.Filter, bool, error) {
	f := &store.Filter{Memory: q.Memory, Type: q.Type, Namespace: q.Namespace, ScopePrefix: q.Scope,
		IncludeSuperseded: q.IncludeSuperseded, IncludeArchived: q.IncludeArchived}
	if q.Subject != "" || q.Relation != "" || q.Object != "" || len(q.Tags) > 0 {
		idx, gen, err := e.keys.IndexKeys(ctx, q.Memory, q.Scope, fresh)
		if err != nil {
			return nil, false, err
		}
		f.ScopeGen, f.CheckScopeGen = gen, !fresh
		toks := func(field, v string) [][]byte {
			if v == "" {
				return nil
			}
			out := make([][]byte, 0, len(idx))
			for _, s := range idx {
				out = append(out, s.Index.Value(field, v))
			}
			return out
		}
		f.Subject, f.Relation, f.Object = toks(index.Subject, q.Subject), toks(index.Relation, q.Relation), toks(index.Object, q.Object)
		for _, t := range q.Tags {
			f.Tags = append(f.Tags, toks(index.Tag, t))
		}
	}
	if q.UserID != "" {
		ref, gen, err := e.keys.UserRefAt(ctx, q.Memory, q.UserID, fresh)
		if errors.Is(err, keys.ErrNoKey) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		f.UserRef = ref
		// The reference derives from the memory key: the query checks it,
		// like index keys, against the scope generation.
		if !f.CheckScopeGen && !fresh {
			f.ScopeGen, f.CheckScopeGen = gen, true
		} else if !fresh && gen != f.ScopeGen {
			return nil, false, store.ErrStaleScopes
		}
	}
	return f, true, nil
}

// matches re-checks a decrypted grain against q's personal filters, so a
// token collision can never return a wrong grain.
func matches(g *grains.Grain, q *grains.Query) bool {
	eq := func(want, got string) bool {
		return want == "" || grains.NormalizeValue(want) == grains.NormalizeValue(got)
	}
	if !eq(q.Subject, g.Subject) || !eq(q.Relation, g.Relation) || !eq(q.Object, g.Object) {
		return false
	}
	if q.UserID != "" && q.UserID != g.UserID {
		return false
	}
	for _, t := range q.Tags {
		found := false
		for _, gt := range g.Tags {
			if grains.NormalizeValue(gt) == grains.NormalizeValue(t) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Page is one page of recall results: newest first for a listing (no
// filter), else ranked (see Engine.Recall). Next, when not empty, is the
// Cursor of the following page.
type Page struct {
	Grains []grains.Grain `json:"grains"`
	Next   string         `json:"next,omitempty"`
}

// Locate returns, for each of hashes that names a readable grain of memory,
// a Grain with only Hash, Memory, Namespace and Scope set; a hash naming
// nothing, or an erased version, is left out. It reads the rows in one
// statement per 500 hashes (store.DB.Placements), observes their erase
// epochs and reads their keys as recall does, and decrypts none.
func (e *Engine) Locate(ctx context.Context, memory string, hashes []string) (map[string]grains.Grain, error) {
	rows, err := e.store.Placements(ctx, memory, hashes)
	if err != nil {
		return nil, err
	}
	e.opener.Prepare(ctx, rows)
	out := make(map[string]grains.Grain, len(rows))
	for i := range rows {
		r := &rows[i]
		if _, err := e.keys.GrainKey(ctx, r.KeyChain); err != nil {
			if grains.ErrorCode(err) == grains.CodeErased {
				continue
			}
			return nil, err
		}
		out[r.Hash] = grains.Grain{Hash: r.Hash, Memory: r.Memory, Namespace: r.Namespace, Scope: r.Scope}
	}
	return out, nil
}
