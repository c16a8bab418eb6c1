package lethe

import (
	"context"
	"errors"
	"math"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// WithActor returns a context whose audit events name actor (an API token
// id, never a person) as their cause. Without it events say "local".
func WithActor(ctx context.Context, actor string) context.Context {
	return audit.WithActor(ctx, actor)
}

// ProofByEvent returns the proof of an audit event against the latest
// signed checkpoint, or an error with code pending if none covers it yet.
// An eventID that is not 32 lowercase hex digits is invalid_argument
// (field event); the error never quotes it. An id that names no event is
// not_found.
func (db *DB) ProofByEvent(ctx context.Context, eventID string) (*Proof, error) {
	return db.AuditView(nil).ProofByEvent(ctx, eventID)
}

// Proof returns the proof of the leaf at index against the signed
// checkpoint of size (0: the latest). An index at or beyond that size is
// not_found.
func (db *DB) Proof(ctx context.Context, index, size uint64) (*Proof, error) {
	return db.AuditView(nil).Proof(ctx, index, size)
}

// AuditView is the audit log as a reader sees it who may read only some of
// its leaves, such as an API token limited to some memories: the proofs
// and entries of the leaves its filter accepts. A leaf the filter refuses
// is answered exactly as an event id or an index that names no leaf is
// (code not_found, the same message), whether its event is pending or
// not, so the reader cannot tell the two apart. Checkpoints, consistency
// proofs and the log key carry no leaf; they stay on DB.
type AuditView struct {
	db      *DB
	visible func(leaf []byte) bool
}

// AuditView returns the view of the leaves visible accepts, given each
// leaf parsed; a leaf that does not parse is refused. A nil visible accepts
// every leaf, as DB's own methods do.
func (db *DB) AuditView(visible func(*proofs.Leaf) bool) *AuditView {
	v := &AuditView{db: db}
	if visible != nil {
		v.visible = func(leaf []byte) bool {
			l, err := proofs.ParseLeaf(leaf)
			return err == nil && visible(l)
		}
	}
	return v
}

// ProofByEvent is DB.ProofByEvent within the view.
func (v *AuditView) ProofByEvent(ctx context.Context, eventID string) (*Proof, error) {
	return v.db.journal.ProofIf(ctx, eventID, v.visible)
}

// Proof is DB.Proof within the view.
func (v *AuditView) Proof(ctx context.Context, index, size uint64) (*Proof, error) {
	cp, err := v.db.checkpointAt(ctx, size)
	if err != nil {
		return nil, err
	}
	if index >= cp.Size {
		return nil, grains.NoAuditLeaf(index)
	}
	leaf, err := v.leaf(ctx, index)
	if err != nil {
		return nil, err
	}
	p, err := v.db.seq.ProveAt(ctx, index, leaf, cp)
	return p, audit.DomainError(err)
}

// AuditEntry is DB.AuditEntry within the view.
func (v *AuditView) AuditEntry(ctx context.Context, index uint64) (*AuditEntry, error) {
	leaf, err := v.leaf(ctx, index)
	if err != nil {
		return nil, err
	}
	return &AuditEntry{Index: index, Leaf: leaf, Signature: v.db.signer.SignLeaf(leaf)}, nil
}

// leaf reads the leaf at index: NoAuditLeaf when the log has none there
// or the view does not show it.
func (v *AuditView) leaf(ctx context.Context, index uint64) ([]byte, error) {
	leaf, err := v.db.log.Leaf(ctx, index)
	if errors.Is(err, audit.ErrNotIntegrated) || (err == nil && v.visible != nil && !v.visible(leaf)) {
		return nil, grains.NoAuditLeaf(index)
	}
	return leaf, audit.DomainError(err)
}

func (db *DB) checkpointAt(ctx context.Context, size uint64) (*audit.SignedCheckpoint, error) {
	var row *store.CheckpointRow
	var err error
	if size == 0 {
		row, err = db.store.LatestCheckpoint(ctx)
		if err == nil && row == nil {
			err = grains.Errorf(grains.CodeNotFound, "the audit log is empty")
		}
	} else if size > math.MaxInt64 {
		err = grains.FieldError(grains.CodeInvalidArgument, "size", "must be at most 2^63-1")
	} else {
		row, err = db.store.CheckpointAt(ctx, int64(size))
	}
	if err != nil {
		return nil, err
	}
	return signedOf(row), nil
}

// AuditKey returns the log's public key as a note verifier key
// (name+hash+base64), for "lethe verify --log-key".
func (db *DB) AuditKey() string { return db.signer.VerifierKey() }

// Checkpoint returns the latest signed checkpoint note (c2sp.org/tlog-checkpoint).
func (db *DB) Checkpoint(ctx context.Context) ([]byte, error) {
	db.journal.Committed()
	cp, err := db.checkpointAt(ctx, 0)
	if err != nil {
		return nil, err
	}
	return cp.Note, nil
}

// AuditEntry is one leaf of the audit log with the log key's signature.
type AuditEntry struct {
	Index     uint64 `json:"index"`
	Leaf      []byte `json:"leaf"`
	Signature []byte `json:"leaf_signature"`
}

// AuditEntry returns the leaf at index, or not_found when the log holds
// no leaf there yet.
func (db *DB) AuditEntry(ctx context.Context, index uint64) (*AuditEntry, error) {
	return db.AuditView(nil).AuditEntry(ctx, index)
}

// Consistency returns the RFC 6962 consistency proof between two signed
// sizes of the log.
func (db *DB) Consistency(ctx context.Context, from, to uint64) (*proofs.ConsistencyProof, error) {
	p, err := db.log.ConsistencyProof(ctx, from, to)
	if err != nil {
		return nil, audit.DomainError(err)
	}
	return &proofs.ConsistencyProof{From: from, To: to, Hashes: p}, nil
}
