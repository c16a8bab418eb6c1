package lethe

import (
	"context"

	"github.com/lethe-io/lethe/internal/erasure"
)

// Erasure is what a crypto-erasure returns: Count (the grains the
// destroyed key made unreadable), KeyFingerprint, Timestamp, KEKVersion
// (the newest KEK version that wrapped a destroyed key, 0 when the KEK
// does not say: once a KEK trim removes every version up to it, no copy of
// those keys can be unwrapped), DryRun and HeldBy (a dry run destroys
// nothing: Count and KeyFingerprint are what the erasure would destroy,
// HeldBy the hold that would refuse it), and the audit Receipt with its
// proof.
type Erasure = erasure.Erasure

// EraseOption changes an erasure (ForgetUser, EraseScope, EraseMemory).
type EraseOption func(*EraseOptions)

// EraseOptions are the options of an erasure, as its EraseOptions set
// them; see [EraseOptionsOf].
type EraseOptions struct {
	DryRun bool
}

// EraseOptionsOf returns the options opts set (for a client that passes
// them on).
func EraseOptionsOf(opts ...EraseOption) EraseOptions {
	var o EraseOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// DryRun makes an erasure report what it would destroy (the count of
// grains, the key's fingerprint, and the legal hold that would refuse it)
// and change nothing: no key destroyed, no audit event.
func DryRun() EraseOption { return func(o *EraseOptions) { o.DryRun = true } }

// ForgetUser crypto-erases a user of memory: it destroys the user's data
// key, so every grain of that user, in every scope, becomes unreadable at
// once. Writing again for the same user id creates a new key.
func (db *DB) ForgetUser(ctx context.Context, memory, userID string, opts ...EraseOption) (*Erasure, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	return db.erasure.User(ctx, memory, userID, EraseOptionsOf(opts...).DryRun)
}

// EraseScope crypto-erases a scope path of memory and everything below it:
// erasing acme/prod makes the grains of acme/prod and acme/prod/bot1
// unreadable, whatever their user.
func (db *DB) EraseScope(ctx context.Context, memory, path string, opts ...EraseOption) (*Erasure, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	return db.erasure.Scope(ctx, memory, path, EraseOptionsOf(opts...).DryRun)
}

// EraseMemory crypto-erases a whole memory: its key, and with it every
// scope and user key and every grain.
func (db *DB) EraseMemory(ctx context.Context, memory string, opts ...EraseOption) (*Erasure, error) {
	return db.erasure.Memory(ctx, memory, EraseOptionsOf(opts...).DryRun)
}

// Hold is a legal hold: ID, Memory, Kind (scope or user), Scope (of a
// scope hold) and CreatedAt. A user hold does not name the user.
type Hold = erasure.Hold

// HoldSpec names what to hold in Memory: exactly one of Scope or UserID.
type HoldSpec = erasure.HoldSpec

// SetHold places a legal hold on a scope prefix or a user: until it is
// released, every destructive call that would destroy a grain under it
// (forget, erase, purge, policies) refuses with code held, and the refusal
// is audited.
func (db *DB) SetHold(ctx context.Context, spec HoldSpec) (*Hold, error) {
	var err error
	if spec.Memory, err = memoryName(spec.Memory); err != nil {
		return nil, err
	}
	return db.erasure.SetHold(ctx, spec)
}

// ReleaseHold releases an active hold. The erasure requests of memory that
// a hold blocked then run (see ExecuteErasureRequest), in this call, under
// its context's actor; one still refused by another hold stays blocked.
func (db *DB) ReleaseHold(ctx context.Context, memory, id string) error {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return err
	}
	return db.erasure.ReleaseHold(ctx, memory, id)
}

// Holds lists the active holds of memory.
func (db *DB) Holds(ctx context.Context, memory string) ([]Hold, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	return db.erasure.Holds(ctx, memory)
}
