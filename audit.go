package lethe

import (
	"context"
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
// (field event); the error never quotes it.
func (db *DB) ProofByEvent(ctx context.Context, eventID string) (*Proof, error) {
	return db.journal.Proof(ctx, eventID)
}

// Proof returns the proof of the leaf at index against the signed
// checkpoint of size (0: the latest).
func (db *DB) Proof(ctx context.Context, index, size uint64) (*Proof, error) {
	cp, err := db.checkpointAt(ctx, size)
	if err != nil {
		return nil, err
	}
	if index >= cp.Size {
		return nil, grains.Errorf(grains.CodeInvalidArgument, "index %d is not below tree size %d", index, cp.Size)
	}
	leaf, err := db.log.Leaf(ctx, index)
	if err != nil {
		return nil, audit.DomainError(err)
	}
	p, err := db.seq.ProveAt(ctx, index, leaf, cp)
	return p, audit.DomainError(err)
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

// AuditEntry returns the leaf at index.
func (db *DB) AuditEntry(ctx context.Context, index uint64) (*AuditEntry, error) {
	leaf, err := db.log.Leaf(ctx, index)
	if err != nil {
		return nil, audit.DomainError(err)
	}
	return &AuditEntry{Index: index, Leaf: leaf, Signature: db.signer.SignLeaf(leaf)}, nil
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
