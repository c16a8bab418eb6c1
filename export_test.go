package lethe

import (
	"context"
	"sync"

	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// AuditLeaves drains the outbox into the log and returns every leaf, in
// index order. Tests use it to inspect what the audit log holds.
func (db *DB) AuditLeaves(ctx context.Context) ([][]byte, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	if err := db.seq.Step(ctx); err != nil {
		return nil, err
	}
	size, _, err := db.log.Root(ctx)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, size)
	for i := uint64(0); i < size; i++ {
		l, err := db.log.Leaf(ctx, i)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// PauseCleaner stops the background deletion of erased rows (for good: the
// cleaner does not restart), so tests see that reads refuse erased grains
// whose rows still exist. PurgeErased still deletes them when called.
func (db *DB) PauseCleaner() { db.stopCleaner() }

// SetScrub turns the scrub after forgets on or off (on by default), so a
// test can see what a forget leaves for it.
func (db *DB) SetScrub(on bool) { db.store.SetScrub(on) }

// AuditSteps returns how many steps the audit sequencer has begun.
func (db *DB) AuditSteps() uint64 { return db.seq.Steps() }

// AppendRawEvents commits audit leaves as they are, for conformance tests
// that feed the same stream to two logs.
func (db *DB) AppendRawEvents(ctx context.Context, leaves [][]byte) error {
	evs := make([]store.Event, len(leaves))
	for i, l := range leaves {
		pl, err := proofs.ParseLeaf(l)
		if err != nil {
			return err
		}
		evs[i] = store.Event{ID: pl.ID, Memory: pl.Memory, Type: string(pl.Type), Leaf: l}
	}
	if err := db.journal.Append(ctx, evs...); err != nil {
		return err
	}
	return db.seq.Step(ctx)
}

// AuditSize drains the outbox into the log and returns the log's size.
func (db *DB) AuditSize(ctx context.Context) (uint64, error) {
	if db.closed.Load() {
		return 0, ErrClosed
	}
	if err := db.seq.Step(ctx); err != nil {
		return 0, err
	}
	size, _, err := db.log.Root(ctx)
	return size, err
}

// auditWeights caches, per DB, how far AuditWeight has read the log.
var auditWeights = struct {
	sync.Mutex
	m map[*DB][2]uint64 // leaves read, their weight
}{m: map[*DB][2]uint64{}}

// AuditWeight drains the outbox into the log and returns its events
// counted by what they record: a key.create event counts its keys (it
// lists every key one transaction created, up to 256), any other event
// one. A model that counts the keys it expects to be created, and the other
// events, checks the log with it without modelling how creations batch.
func (db *DB) AuditWeight(ctx context.Context) (uint64, error) {
	size, err := db.AuditSize(ctx)
	if err != nil {
		return 0, err
	}
	auditWeights.Lock()
	defer auditWeights.Unlock()
	st := auditWeights.m[db]
	for i := st[0]; i < size; i++ {
		b, err := db.log.Leaf(ctx, i)
		if err != nil {
			return 0, err
		}
		l, err := proofs.ParseLeaf(b)
		if err != nil {
			return 0, err
		}
		if l.Type == proofs.EventKeyCreate {
			st[1] += uint64(len(l.KeyFingerprints))
		} else {
			st[1]++
		}
	}
	st[0] = size
	auditWeights.m[db] = st
	return st[1], nil
}

// SetPostingTailMax sets the size of the text index's tail from which an
// insert merges it (SQLite; 0: the default), so that a test exercises the
// merge with a few grains.
func (db *DB) SetPostingTailMax(n int64) { db.store.SetTailMax(n) }

// PurgeKeys empties the process's key cache, as every erasure does.
func (db *DB) PurgeKeys() { db.ring.Purge() }
