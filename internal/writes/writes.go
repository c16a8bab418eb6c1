// Package writes writes grains: a batch (validated, normalised, sealed on
// every core while the store inserts it, retried when another instance
// erases a key it used) and a new version of a grain (the fields carried
// from the old one, its grain.supersede event committed with it).
//
// A [Writer] states what it needs as small interfaces declared here and
// never imports package lethe.
package writes

import (
	"context"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/sealing"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// Store is what a Writer needs of the store. *store.DB implements it.
type Store interface {
	InsertGrains(ctx context.Context, memory string, rows []*store.GrainRow, p store.Pending) ([]string, error)
	Supersede(ctx context.Context, memory, oldHash string, next *store.GrainRow, evs []store.Event) error
	SuccessorErased(ctx context.Context, memory, hash string) (bool, error)
}

var _ Store = (*store.DB)(nil)

// Sealer seals grains under their key chains. *sealing.Sealer implements it.
type Sealer interface {
	// Warm resolves the key chains of a batch before it is sealed.
	Warm(ctx context.Context, batch []grains.Grain) error
	// Start seals a batch on every core; the store reads its rows as they
	// are ready.
	Start(ctx context.Context, batch []grains.Grain) (*sealing.Batch, error)
	// Seal seals one grain.
	Seal(ctx context.Context, g *grains.Grain) (*store.GrainRow, error)
}

var _ Sealer = (*sealing.Sealer)(nil)

// Journal builds the grain.supersede event. *audit.Journal implements it.
type Journal interface {
	Event(ctx context.Context, typ proofs.EventType, memory string, fill func(*proofs.Leaf)) (audit.Event, error)
	Committed()
}

// Policy is the forgetting policy's side of a write. *sweep.Sweeper
// implements it.
type Policy interface {
	// AutoPin pins g if an auto-pin rule matches it.
	AutoPin(g *grains.Grain)
	// Wrote fires the ladder's ingest_complete trigger.
	Wrote(memory string)
}

// Dimensions checks a batch's embeddings against its memory's dimension.
// *recall.Engine implements it.
type Dimensions interface {
	CheckDimensions(ctx context.Context, batch []grains.Grain) error
}

// Keys is the key cache a retry drops. *keys.Keyring implements it.
type Keys interface{ PurgeMemory(memory string) }

// Config configures a Writer.
type Config struct {
	Store      Store
	Sealer     Sealer
	Journal    Journal
	Policy     Policy
	Dimensions Dimensions
	Keys       Keys
	// Get returns the grain with hash in memory (the old version of a
	// supersede), as package lethe's DB.Get.
	Get func(ctx context.Context, memory, hash string) (*grains.Grain, error)
	Now func() time.Time
}

// Writer writes grains.
type Writer struct{ cfg Config }

// New returns a Writer.
func New(cfg Config) *Writer { return &Writer{cfg: cfg} }

// AddBatch writes grains of one memory in one transaction (see package
// lethe's DB.AddBatch).
func (w *Writer) AddBatch(ctx context.Context, gs []grains.Grain) ([]string, error) {
	if len(gs) == 0 {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "grains", "an empty batch")
	}
	if len(gs) > grains.MaxBatch {
		return nil, grains.TooManyGrains()
	}
	tags := 0
	for i := range gs {
		tags += len(gs[i].Tags)
	}
	if tags > grains.MaxBatchTags {
		return nil, grains.TooManyBatchTags()
	}
	now := w.cfg.Now().UTC()
	batch := make([]grains.Grain, len(gs)) // copies: the caller's grains are not modified
	for i := range gs {
		g := &batch[i]
		*g = gs[i]
		if err := w.prepare(g, now); err != nil {
			return nil, grains.AtIndex(err, i, len(gs))
		}
		if g.Memory != batch[0].Memory {
			return nil, grains.AtIndex(grains.FieldError(grains.CodeInvalidArgument, "memory", "a batch writes to one memory"), i, len(gs))
		}
		if g.Supersedes != "" {
			return nil, grains.AtIndex(grains.FieldError(grains.CodeInvalidArgument, "supersedes", "use Supersede to write a new version"), i, len(gs))
		}
	}
	if err := w.cfg.Dimensions.CheckDimensions(ctx, batch); err != nil {
		return nil, err
	}
	var hs []string
	err := w.retryErased(batch[0].Memory, func() (err error) {
		hs, err = w.insertBatch(ctx, batch)
		return err
	})
	if err != nil {
		return nil, err
	}
	w.cfg.Policy.Wrote(batch[0].Memory)
	return hs, nil
}

// erasedAttempts bounds the attempts of a write whose keys another instance
// erases meanwhile. Each retry follows an erasure that committed, so the
// worst race needs three: the first attempt seals under a key this process
// had cached and another instance had erased; the second creates the
// user's new key, which a concurrent erase of that user destroys before the
// grain commits; the third comes after that erase.
const erasedAttempts = 4

// retryErased runs op, a write to memory, until it succeeds, fails for
// another reason than an erased key, or has run erasedAttempts times.
// Before each retry it drops memory's cached keys, so that an erased user
// or scope gets a new key.
func (w *Writer) retryErased(memory string, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if grains.ErrorCode(err) != grains.CodeErased || attempt == erasedAttempts {
			return err
		}
		w.cfg.Keys.PurgeMemory(memory)
	}
}

// insertBatch resolves the batch's key chains, seals it and inserts it: one
// attempt of AddBatch. An error with code erased means a cached key was
// erased by another instance (the store refuses a grain, or a new user key,
// under a destroyed key).
func (w *Writer) insertBatch(ctx context.Context, batch []grains.Grain) ([]string, error) {
	if err := w.cfg.Sealer.Warm(ctx, batch); err != nil {
		return nil, err
	}
	s, err := w.cfg.Sealer.Start(ctx, batch)
	if err != nil {
		return nil, err
	}
	hs, err := w.cfg.Store.InsertGrains(ctx, batch[0].Memory, s.Rows, s)
	if serr := s.Wait(); err == nil && serr != nil {
		hs, err = nil, serr
	}
	return hs, err
}

// prepare normalizes and validates g for writing at now. An empty tag is
// refused before Normalize, which would drop it.
func (w *Writer) prepare(g *grains.Grain, now time.Time) error {
	if err := grains.CheckTags("tags", g.Tags); err != nil {
		return err
	}
	g.Normalize()
	if g.CreatedAt.IsZero() {
		g.CreatedAt = now
	} else if g.CreatedAt.After(now.Add(5 * time.Minute)) {
		return grains.FieldError(grains.CodeInvalidArgument, "created_at", "must not be in the future")
	}
	g.CreatedAt = g.CreatedAt.UTC().Truncate(time.Microsecond)
	g.Hash, g.SupersededBy, g.Archived = "", "", false
	g.LastRetrievedAt, g.RetrievalCount = nil, 0
	w.cfg.Policy.AutoPin(g)
	return g.Validate()
}

// Supersede writes g as the new version of oldHash (see package lethe's
// DB.Supersede).
func (w *Writer) Supersede(ctx context.Context, oldHash string, g grains.Grain, set ...string) (string, error) {
	if g.Memory == "" {
		g.Memory = grains.DefaultMemory
	}
	old, err := w.cfg.Get(ctx, g.Memory, oldHash)
	if err != nil {
		return "", err
	}
	if old.SupersededBy != "" {
		// A newer version that was erased leaves old the newest surviving
		// version: it may be superseded again (store.Supersede checks this
		// again in its transaction).
		erased, err := w.cfg.Store.SuccessorErased(ctx, g.Memory, oldHash)
		if err != nil {
			return "", err
		}
		if !erased {
			return "", &grains.Error{Code: grains.CodeAlreadySuperseded, Message: "grain " + oldHash + " already has a newer version",
				Hint: "supersede the newest version; see its history"}
		}
	}
	if err := grains.Carry(&g, old, set); err != nil {
		return "", err
	}
	zeros := grains.ExplicitZeros(&g, set)
	if err := w.prepare(&g, w.cfg.Now().UTC()); err != nil {
		return "", err
	}
	zeros.Restore(&g)
	if grains.Unchanged(&g, old, set) {
		return "", grains.Errorf(grains.CodeInvalidArgument, "the new version changes nothing")
	}
	if err := w.cfg.Dimensions.CheckDimensions(ctx, []grains.Grain{g}); err != nil {
		return "", err
	}
	g.Supersedes = oldHash
	// As in AddBatch: a key this process had cached may have been erased by
	// another instance. The old version's own erasure shows as not found
	// (store.Supersede reads it in its transaction), so it is not retried.
	var hash string
	err = w.retryErased(g.Memory, func() (err error) {
		hash, err = w.supersedeOnce(ctx, oldHash, &g)
		return err
	})
	return hash, err
}

// supersedeOnce seals g and commits it as the new version of oldHash with
// its audit event: one attempt of Supersede.
func (w *Writer) supersedeOnce(ctx context.Context, oldHash string, g *grains.Grain) (string, error) {
	row, err := w.cfg.Sealer.Seal(ctx, g)
	if err != nil {
		return "", err
	}
	ev, err := w.cfg.Journal.Event(ctx, proofs.EventGrainSupersede, g.Memory, func(l *proofs.Leaf) { l.Hashes = []string{oldHash, row.Hash} })
	if err != nil {
		return "", err
	}
	if err := w.cfg.Store.Supersede(ctx, g.Memory, oldHash, row, []store.Event{ev}); err != nil {
		return "", err
	}
	w.cfg.Journal.Committed()
	return row.Hash, nil
}
