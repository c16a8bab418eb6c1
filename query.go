package lethe

import (
	"context"
	"errors"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/index"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/store"
)

// Queries as the store answers them: a Query turned into a store filter
// with blind tokens, and the check of a decrypted grain against the query.

// filter turns q into a store filter. ok is false when q can match nothing
// (the memory has no keys yet, so it has no grains). Unless fresh is set,
// the tokens may come from cached index keys, and the filter asks the store
// to check that they are not stale (see keys.Keyring.IndexKeys).
func (db *DB) filter(ctx context.Context, q *Query, fresh bool) (*store.Filter, bool, error) {
	f := &store.Filter{Memory: q.Memory, Type: q.Type, Namespace: q.Namespace, ScopePrefix: q.Scope,
		IncludeSuperseded: q.IncludeSuperseded, IncludeArchived: q.IncludeArchived}
	if q.Subject != "" || q.Relation != "" || q.Object != "" || len(q.Tags) > 0 {
		idx, gen, err := db.ring.IndexKeys(ctx, q.Memory, q.Scope, fresh)
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
		ref, gen, err := db.ring.UserRefAt(ctx, q.Memory, q.UserID, fresh)
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
func matches(g *Grain, q *Query) bool {
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
// filter), else ranked (see Recall). Next, when not empty,
// is the Cursor of the following page.
type Page struct {
	Grains []Grain `json:"grains"`
	Next   string  `json:"next,omitempty"`
}
