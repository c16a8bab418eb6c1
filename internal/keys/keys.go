// Package keys holds lethe's data-key hierarchy: one data key per memory,
// per scope-path node and per (memory, user), each stored only wrapped by a
// key-encryption key (KEK), and the derivations that turn a chain of them
// into the key a grain is sealed under.
//
// # Hierarchy
//
// A grain in memory M, scope a/b, of user U is sealed under
//
//	HKDF-SHA256(ikm = K(M) || K(a) || K(a/b) || K(M,U), info = "lethe/grain-key/v1" || chain id)
//
// so destroying any one of those keys makes the grain unreadable: erasing a
// user, a scope (and everything below it) or a memory is one key, O(1) in
// the number of grains. Blind-index keys derive from the memory and scope
// keys only (not the user's), so a query computes one token per scope.
//
// # Wrapping
//
// A [Wrapper] wraps data keys: [AgeWrapper] with a local age X25519
// identity (the embedded default), or Vault transit in production. A key's
// fingerprint is SHA-256 over a fixed label and the key; it names the key
// in audit events and proofs and says nothing about the key.
package keys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// Kind is the level of a data key in the hierarchy.
type Kind string

// The kinds of data keys.
const (
	KindMemory Kind = "memory"
	KindScope  Kind = "scope"
	KindUser   Kind = "user"
)

// KeySize is the size of every data key in bytes.
const KeySize = 32

// Ref names a data key to a Wrapper. It carries no personal data: a user
// key is named by its fingerprint, never by the user id.
type Ref struct {
	Memory      string
	Kind        Kind
	Fingerprint string
}

// Wrapper wraps data keys under a KEK.
type Wrapper interface {
	// Wrap encrypts the data key dk under the KEK and returns the wrapped
	// form, or a non-nil error. It must not keep dk.
	Wrap(ctx context.Context, ref Ref, dk []byte) ([]byte, error)
	// Unwrap returns the data key of wrapped, or a non-nil error.
	Unwrap(ctx context.Context, ref Ref, wrapped []byte) ([]byte, error)
}

// BatchWrapper is a Wrapper that wraps many data keys in one call (Vault
// transit's batch_input); Keyring.WarmUsers uses it when the KEK has it.
type BatchWrapper interface {
	Wrapper
	// WrapBatch wraps dks[i] for refs[i] and returns the wrapped forms in
	// order, or a non-nil error (then none is usable).
	WrapBatch(ctx context.Context, refs []Ref, dks [][]byte) ([][]byte, error)
}

// BatchUnwrapper is a Wrapper that unwraps many data keys in one call
// (Vault transit's batch_input under its shared key); Keyring.unwrapAll
// uses it when the KEK has it.
type BatchUnwrapper interface {
	Wrapper
	// UnwrapBatch unwraps wrapped[i] for refs[i]. out[i] is nil where that
	// key did not unwrap; ok is false when the KEK cannot unwrap these
	// keys in batches (each has a transit key of its own), and then out is
	// nil. err reports a failed call; the keys it held are not unwrapped.
	UnwrapBatch(ctx context.Context, refs []Ref, wrapped [][]byte) (out [][]byte, ok bool, err error)
}

// Record is a data key as stored: wrapped, with its fingerprint.
type Record struct {
	ID          int64
	Memory      string
	Kind        Kind
	Name        string // scope path for scope keys, user ref (hex) for user keys, "" for the memory key
	Wrapped     []byte // nil once destroyed
	Fingerprint string
	CreatedAt   time.Time
	DestroyedAt *time.Time
	// Under is, for a user key being created, the id of the memory key its
	// name (the user reference) was derived from. The store creates the key
	// only while that memory key is live, else it fails with code erased: a
	// keyring that cached a memory key another instance erased cannot
	// create a user key named under it. It is not stored (0 when read).
	Under int64
}

// Live reports whether the key still exists.
func (r Record) Live() bool { return r.DestroyedAt == nil && len(r.Wrapped) > 0 }

// ErrNoKey is returned by a Store when no live key has the given name.
var ErrNoKey = errors.New("no such key")

// Store keeps wrapped keys. internal/store implements it.
type Store interface {
	// LiveKey returns the live key (memory, kind, name), or ErrNoKey.
	LiveKey(ctx context.Context, memory string, kind Kind, name string) (Record, error)
	// CreateKey stores r if no live key has its (memory, kind, name) and
	// returns the live key afterwards: r with its ID, or the key another
	// writer created first. If r.Under is set and that key is no longer
	// live, it stores nothing and fails with code erased.
	CreateKey(ctx context.Context, r Record) (Record, error)
	// KeysByID returns the keys with the given ids, live or destroyed, in
	// any order; missing ids are left out, as may be a key that an erase
	// destroyed while it was read.
	KeysByID(ctx context.Context, ids []int64) ([]Record, error)
	// ScopeKeys returns the live scope keys of memory at or below prefix
	// ("" for all).
	ScopeKeys(ctx context.Context, memory, prefix string) ([]Record, error)
	// ScopeGeneration returns a number that grows whenever a memory or
	// scope key of memory is created or destroyed.
	ScopeGeneration(ctx context.Context, memory string) (int64, error)
}

// BatchStore is a Store that also reads and creates keys many at a time;
// Keyring.WarmUsers uses it when the store has it.
type BatchStore interface {
	Store
	// LiveKeys returns the live keys of memory and kind with the given
	// names, in any order; names without a live key are left out.
	LiveKeys(ctx context.Context, memory string, kind Kind, names []string) ([]Record, error)
	// CreateKeys is CreateKey for each record, in one transaction; it
	// returns the live key of each, in order.
	CreateKeys(ctx context.Context, rs []Record) ([]Record, error)
}

// NewDataKey returns a fresh random data key.
func NewDataKey() []byte {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		panic("keys: crypto/rand failed: " + err.Error())
	}
	return k
}

// Fingerprint returns the hex SHA-256 of a fixed label and dk. It identifies
// a key in events and proofs without revealing it.
func Fingerprint(dk []byte) string {
	h := sha256.New()
	h.Write([]byte("lethe/key-fingerprint/v1\x00"))
	h.Write(dk)
	return hex.EncodeToString(h.Sum(nil))
}
