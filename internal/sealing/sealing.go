// Package sealing turns grains into sealed store rows and back, under the
// key chains of a keyring: the payload sealed with the grain key, bound to
// its memory, scope and chain; blind tokens from the chain's index keys;
// the row named by its blob's hash. A large batch is sealed on every core
// while the store streams its rows.
package sealing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/index"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/store"
)

// Sealer seals and opens grains under the key chains of a keyring. It is
// safe for concurrent use.
type Sealer struct {
	ring *keys.Keyring
	// Index, if set, returns a function that adds a row's search postings
	// (see package recall's Indexer) from its chain and grain, for the rows
	// of one batch.
	Index func() func(row *store.GrainRow, c *keys.Chain, g *grains.Grain)
}

// New returns a Sealer over ring.
func New(ring *keys.Keyring) *Sealer { return &Sealer{ring: ring} }

// Seal encrypts g under its key chain and builds its row with blind tokens.
func (s *Sealer) Seal(ctx context.Context, g *grains.Grain) (*store.GrainRow, error) {
	row, c, payload, err := s.rowOf(ctx, g)
	if err != nil {
		return nil, err
	}
	sealRow(row, c, g, payload)
	s.indexer()(row, c, g)
	return row, nil
}

// indexer returns the function that sets the search fields of a batch's
// rows: the Index hook's, or one that does nothing.
func (s *Sealer) indexer() func(row *store.GrainRow, c *keys.Chain, g *grains.Grain) {
	if s.Index == nil {
		return func(*store.GrainRow, *keys.Chain, *grains.Grain) {}
	}
	return s.Index()
}

// rowOf builds g's row but for its blob, hash and search fields: the
// operational fields, key chain and blind tokens. It returns the chain and
// g's encoded payload for sealRow.
func (s *Sealer) rowOf(ctx context.Context, g *grains.Grain) (*store.GrainRow, *keys.Chain, []byte, error) {
	c, err := s.ring.WriteChain(ctx, g.Memory, g.Scope, g.UserID)
	if err != nil {
		return nil, nil, nil, err
	}
	payload := grains.PayloadOf(g).Encode()
	row := &store.GrainRow{
		Memory: g.Memory, Type: g.Type, Namespace: g.Namespace, Scope: g.Scope,
		Importance: g.Importance, Confidence: g.Confidence, Salience: g.Salience, Pinned: g.Pinned,
		CreatedUS: g.CreatedAt.UnixMicro(), Supersedes: g.Supersedes, KeyChain: c.ID,
		UserKeyID: c.UserKeyID, UserRef: c.UserRef,
		SubjectTok:  c.Index.Value(index.Subject, g.Subject),
		RelationTok: c.Index.Value(index.Relation, g.Relation),
		ObjectTok:   c.Index.Value(index.Object, g.Object),
		DedupTok:    c.Index.Token(index.Dedup, grains.DedupMaterialOf(g, payload)),
	}
	for _, t := range g.Tags {
		row.Tags = append(row.Tags, store.TagRow{Token: c.Index.Value(index.Tag, t)})
	}
	return row, c, payload, nil
}

// sealRow seals payload into row's blob under c, bound to g's memory,
// scope and chain, and names the row by the blob's hash.
func sealRow(row *store.GrainRow, c *keys.Chain, g *grains.Grain, payload []byte) {
	row.Blob = keys.Seal(c.GrainKey, keys.GrainAD(g.Memory, g.Scope, c.ID), payload)
	sum := sha256.Sum256(row.Blob)
	row.Hash = hex.EncodeToString(sum[:])
}

// WarmRows readies the keys that opening rows needs, in one read for the
// keys this process has not unwrapped yet (see keys.Keyring.WarmChains).
// Open answers the same with or without it.
func (s *Sealer) WarmRows(ctx context.Context, rows []store.GrainRow) {
	chains := make([]string, 0, len(rows))
	for i := range rows {
		if !rows[i].Erased {
			chains = append(chains, rows[i].KeyChain)
		}
	}
	s.ring.WarmChains(ctx, chains)
}

// Open decrypts a row into a grain.
func (s *Sealer) Open(ctx context.Context, r *store.GrainRow) (*grains.Grain, error) {
	gk, err := s.ring.GrainKey(ctx, r.KeyChain)
	if err != nil {
		return nil, err
	}
	pt, err := keys.Open(gk, keys.GrainAD(r.Memory, r.Scope, r.KeyChain), r.Blob)
	if err != nil {
		return nil, grains.Wrap(grains.CodeInternal, "grain "+r.Hash+" does not decrypt", err)
	}
	p, err := grains.DecodePayload(pt)
	if err != nil {
		return nil, err
	}
	g := &grains.Grain{
		Hash: r.Hash, Memory: r.Memory, Type: r.Type, Namespace: r.Namespace, Scope: r.Scope,
		Importance: r.Importance, Confidence: r.Confidence, Salience: r.Salience, Pinned: r.Pinned, Archived: r.Archived,
		CreatedAt: time.UnixMicro(r.CreatedUS).UTC(), Supersedes: r.Supersedes, SupersededBy: r.SupersededBy,
		RetrievalCount: r.RetrievalCount,
	}
	if r.LastRetrievedUS != 0 {
		t := time.UnixMicro(r.LastRetrievedUS).UTC()
		g.LastRetrievedAt = &t
	}
	p.Apply(g)
	return g, nil
}

// sealParallel is the batch size from which a batch is sealed on every
// core.
const sealParallel = 64

// Batch is a batch whose rows are built and being sealed in the
// background: Rows have their blind tokens and operational fields, and
// Ready(i) returns once row i has its blob and hash too. The store starts
// its transaction meanwhile, and streams row i as soon as it is ready.
type Batch struct {
	// Rows are the batch's rows, in order.
	Rows    []*store.GrainRow
	done    []chan struct{}
	indexed chan struct{} // closed once every row's search fields are set
	g       *errgroup.Group
	ctx     context.Context
}

// Start builds a batch's rows (key chains, tokens) on every core, then
// starts sealing them, and then computing their search fields (the Index
// hook): a store inserts the sealed rows while the words of the batch are
// still being stemmed and hashed, and waits for them (Indexed) only before
// it writes the text index. Its key chains should be warm (see Warm).
func (s *Sealer) Start(ctx context.Context, batch []grains.Grain) (*Batch, error) {
	n := len(batch)
	workers := runtime.GOMAXPROCS(0)
	if n < sealParallel || workers < 2 {
		// A small batch is sealed here, at once: goroutines would cost
		// more than they overlap.
		b := &Batch{Rows: make([]*store.GrainRow, n)}
		index := s.indexer()
		for i := range batch {
			row, c, payload, err := s.rowOf(ctx, &batch[i])
			if err != nil {
				return nil, err
			}
			sealRow(row, c, &batch[i], payload)
			index(row, c, &batch[i])
			b.Rows[i] = row
		}
		return b, nil
	}
	rows := make([]*store.GrainRow, n)
	chains := make([]*keys.Chain, n)
	payloads := make([][]byte, n)
	g, gctx := errgroup.WithContext(ctx)
	for w := range workers {
		g.Go(func() error {
			for i := w; i < n; i += workers {
				var err error
				if rows[i], chains[i], payloads[i], err = s.rowOf(gctx, &batch[i]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	b := &Batch{Rows: rows, done: make([]chan struct{}, n), indexed: make(chan struct{})}
	for i := range b.done {
		b.done[i] = make(chan struct{})
	}
	b.g, b.ctx = errgroup.WithContext(ctx)
	// One core fewer computes the search fields than sealed, leaving one to
	// the store's transaction (a goroutine waiting for its rows would
	// otherwise wait for a time slice). The last indexer to finish closes
	// b.indexed; one that fails returns early and cancels b.ctx, so that
	// Indexed returns its error instead.
	indexers := max(1, workers-1)
	var left atomic.Int32
	left.Store(int32(indexers))
	for w := range workers {
		// Interleaved, so rows are ready roughly in the order they stream.
		b.g.Go(func() error {
			for i := w; i < n; i += workers {
				if err := b.ctx.Err(); err != nil {
					return err
				}
				sealRow(rows[i], chains[i], &batch[i], payloads[i])
				close(b.done[i])
			}
			if w >= indexers {
				return nil
			}
			index := s.indexer()
			for i := w; i < n; i += indexers {
				if err := b.ctx.Err(); err != nil {
					return err
				}
				index(rows[i], chains[i], &batch[i])
			}
			if left.Add(-1) == 0 {
				close(b.indexed)
			}
			return nil
		})
	}
	return b, nil
}

// Ready returns once row i is sealed, or with the context's error.
func (b *Batch) Ready(i int) error {
	if b.g == nil {
		return nil // sealed at once
	}
	select {
	case <-b.done[i]:
		return nil
	case <-b.ctx.Done():
		return context.Cause(b.ctx)
	}
}

// Indexed returns once every row's search fields are set, or with the
// context's error.
func (b *Batch) Indexed() error {
	if b.g == nil {
		return nil // indexed at once
	}
	select {
	case <-b.indexed:
		return nil
	case <-b.ctx.Done():
		return context.Cause(b.ctx)
	}
}

// Wait returns once no sealing goroutine runs.
func (b *Batch) Wait() error {
	if b.g == nil {
		return nil
	}
	return b.g.Wait()
}

// Warm resolves the distinct key chains of a batch that are not
// cached, concurrently, so a batch that brings many new users waits for
// their key wraps in parallel.
func (s *Sealer) Warm(ctx context.Context, batch []grains.Grain) error {
	type chainKey struct{ scope, user string }
	seen := make(map[chainKey]bool)
	var todo []chainKey
	for i := range batch {
		k := chainKey{batch[i].Scope, batch[i].UserID}
		if !seen[k] {
			seen[k] = true
			if !s.ring.HasWriteChain(batch[0].Memory, k.scope, k.user) {
				todo = append(todo, k)
			}
		}
	}
	if len(todo) < 2 {
		return nil
	}
	// The memory and scope keys first, once, so workers do not race to
	// create them; then the users' keys, many in one transaction.
	if _, err := s.ring.WriteChain(ctx, batch[0].Memory, todo[0].scope, ""); err != nil {
		return err
	}
	var users []string
	for _, k := range todo {
		if k.user != "" {
			users = append(users, k.user)
		}
	}
	if err := s.ring.WarmUsers(ctx, batch[0].Memory, users); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, k := range todo {
		g.Go(func() error {
			_, err := s.ring.WriteChain(gctx, batch[0].Memory, k.scope, k.user)
			return err
		})
	}
	return g.Wait()
}
