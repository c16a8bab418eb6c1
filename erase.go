package lethe

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// Erasure is what a crypto-erasure returns: how many grains the destroyed
// key made unreadable, the key's fingerprint, when, and the audit receipt
// with its proof.
type Erasure struct {
	Count          int64     `json:"count"`
	KeyFingerprint string    `json:"key_fingerprint"`
	Timestamp      time.Time `json:"timestamp"`
	// KEKVersion is the newest KEK version that wrapped a key the erasure
	// destroyed (0 when the KEK does not say): once a KEK trim removes
	// every version up to it, no copy of those keys can be unwrapped.
	KEKVersion uint64 `json:"kek_version,omitempty"`
	// DryRun says nothing was destroyed: Count and KeyFingerprint are what
	// the erasure would destroy, and HeldBy the hold that would refuse it.
	DryRun bool   `json:"dry_run,omitempty"`
	HeldBy string `json:"held_by,omitempty"`
	*Receipt
}

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

// maxLeafKeys bounds the fingerprints an erase event lists (the erased key
// first, then keys below it).
const maxLeafKeys = 64

// ForgetUser crypto-erases a user of memory: it destroys the user's data
// key, so every grain of that user, in every scope, becomes unreadable at
// once. Writing again for the same user id creates a new key.
func (db *DB) ForgetUser(ctx context.Context, memory, userID string, opts ...EraseOption) (*Erasure, error) {
	spec, err := db.userErase(ctx, memory, userID)
	if err != nil {
		return nil, err
	}
	return db.erase(ctx, spec.EraseSpec, spec.Subject, proofs.NewNonce(), opts...)
}

// userSpec is the erase of userID in memory, which it validates.
type userSpec struct {
	store.EraseSpec
	// Subject is the normalised user id, for the commitment.
	Subject string
}

// userErase returns the erase of userID in memory: not_found when the
// memory holds no keys.
func (db *DB) userErase(ctx context.Context, memory, userID string) (userSpec, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return userSpec{}, err
	}
	if strings.TrimSpace(userID) == "" {
		return userSpec{}, &grains.Error{Code: grains.CodeEmptySelector, Field: "user_id", Message: "name the user to erase"}
	}
	if err := grains.ValidateUserID(userID); err != nil {
		return userSpec{}, err
	}
	userID = grains.NormalizeText(userID)
	ref, err := db.ring.UserRef(ctx, memory, userID)
	if errors.Is(err, keys.ErrNoKey) {
		return userSpec{}, grains.Errorf(grains.CodeNotFound, "nothing to erase: memory %s holds no keys", memory)
	}
	if err != nil {
		return userSpec{}, err
	}
	return userSpec{store.EraseSpec{Memory: memory, Kind: keys.KindUser, Name: hex.EncodeToString(ref), UserRef: ref}, userID}, nil
}

// EraseScope crypto-erases a scope path of memory and everything below it:
// erasing acme/prod makes the grains of acme/prod and acme/prod/bot1
// unreadable, whatever their user.
func (db *DB) EraseScope(ctx context.Context, memory, path string, opts ...EraseOption) (*Erasure, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	if strings.Trim(path, "/") == "" {
		return nil, &grains.Error{Code: grains.CodeEmptySelector, Field: "scope", Message: "name the scope to erase",
			Hint: "an empty scope never means everything; to erase a whole memory use EraseMemory"}
	}
	// A malformed path is refused, never normalised: "/acme//" is not acme.
	if path, err = grains.CleanScope(path); err != nil {
		return nil, err
	}
	return db.erase(ctx, store.EraseSpec{Memory: memory, Kind: keys.KindScope, Name: path}, path, proofs.NewNonce(), opts...)
}

// EraseMemory crypto-erases a whole memory: its key, and with it every
// scope and user key and every grain.
func (db *DB) EraseMemory(ctx context.Context, memory string, opts ...EraseOption) (*Erasure, error) {
	if err := grains.ValidateMemory(memory); err != nil {
		return nil, err
	}
	return db.erase(ctx, store.EraseSpec{Memory: memory, Kind: keys.KindMemory}, memory, proofs.NewNonce(), opts...)
}

// erase destroys the key spec names, with a key.erase event whose subject
// commitment is of subject under nonce. With spec.Request it executes an
// erasure request: the event names it, and a refusal under a hold is the
// caller's to record.
func (db *DB) erase(ctx context.Context, spec store.EraseSpec, subject string, nonce []byte, opts ...EraseOption) (*Erasure, error) {
	now := db.now().UTC()
	spec.Now = now.UnixMicro()
	if EraseOptionsOf(opts...).DryRun {
		return db.dryErase(ctx, spec, now)
	}
	var leaf []byte
	var eventID string
	var kekVersion uint64
	er, err := db.store.EraseKey(ctx, spec, func(ctx context.Context, er *store.Erasure) ([]store.Event, error) {
		var kek string
		kekVersion, kek = db.kekVersionOf(er.Destroyed)
		ev, err := db.journal.Event(ctx, proofs.EventKeyErase, spec.Memory, func(l *proofs.Leaf) {
			if kekVersion > 0 {
				v := kekVersion
				l.KEK, l.KEKVersion = kek, &v
			}
			n := uint64(er.Count)
			l.Count = &n
			for i, k := range er.Destroyed {
				if i == maxLeafKeys {
					break
				}
				l.KeyFingerprints = append(l.KeyFingerprints, k.Fingerprint)
			}
			l.Commitment = proofs.Commitment(nonce, subject)
			if spec.Request != nil {
				l.Request = spec.Request.ID
				spec.Request.KEKVersion = kekVersion
			}
		})
		leaf, eventID = ev.Leaf, ev.ID
		return []store.Event{ev}, err
	})
	if err != nil && spec.Request != nil {
		return nil, err
	}
	if err != nil {
		return nil, db.refused(ctx, spec.Memory, err)
	}
	// This process drops its cached keys now; other processes see the new
	// erase epoch with the next rows they read.
	db.ring.Purge()
	db.destroyDedicated(ctx, er.Destroyed)
	db.kickCleaner()
	r, err := db.journal.Receipt(ctx, eventID, leaf)
	if err != nil {
		return nil, err
	}
	r.SubjectNonce = hex.EncodeToString(nonce)
	return &Erasure{Count: er.Count, KeyFingerprint: er.Fingerprint, Timestamp: now.Truncate(time.Second), KEKVersion: kekVersion, Receipt: r}, nil
}

// dryErase runs the erasure spec names and rolls it back: what it would
// destroy, or the hold that would refuse it, with nothing destroyed or
// audited.
func (db *DB) dryErase(ctx context.Context, spec store.EraseSpec, now time.Time) (*Erasure, error) {
	er, err := db.store.EraseKey(ctx, spec, func(context.Context, *store.Erasure) ([]store.Event, error) {
		return nil, store.ErrDryRun
	})
	var held *store.HeldBy
	if !errors.Is(err, store.ErrDryRun) && !errors.As(err, &held) {
		return nil, err
	}
	out := &Erasure{DryRun: true, Timestamp: now.Truncate(time.Second)}
	if er != nil {
		out.Count, out.KeyFingerprint = er.Count, er.Fingerprint
	}
	if held != nil {
		out.HeldBy = held.HoldID
	}
	return out, nil
}

// destroyer is a KEK that can destroy the KEK of one data key (Vault
// transit in dedicated-key mode).
type destroyer interface {
	Destroy(ctx context.Context, ref keys.Ref) error
}

func (db *DB) destroyDedicated(ctx context.Context, destroyed []keys.Record) {
	d, ok := db.kek.(destroyer)
	if !ok {
		return
	}
	// A shared transit key wraps every data key: there is nothing of one
	// key's own to delete (Destroy would refuse and warn on every erase).
	if m, ok := db.kek.(interface{ Dedicated() bool }); ok && !m.Dedicated() {
		return
	}
	for _, k := range destroyed {
		if err := d.Destroy(ctx, keys.Ref{Memory: k.Memory, Kind: k.Kind, Fingerprint: k.Fingerprint}); err != nil {
			// The wrapped key is already gone from the store; the dedicated KEK
			// outliving it only matters for backups. Log and carry on.
			db.logger.Warn("could not delete the dedicated KEK of an erased key", "fingerprint", k.Fingerprint, "error", err)
		}
	}
}

// Hold is a legal hold. A user hold does not name the user.
type Hold struct {
	ID        string    `json:"id"`
	Memory    string    `json:"memory"`
	Kind      string    `json:"kind"`
	Scope     string    `json:"scope,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// HoldSpec names what to hold: exactly one of Scope or UserID.
type HoldSpec struct {
	Memory string
	Scope  string
	UserID string
}

// SetHold places a legal hold on a scope prefix or a user: until it is
// released, every destructive call that would destroy a grain under it
// (forget, erase, purge, policies) refuses with code held, and the refusal
// is audited.
func (db *DB) SetHold(ctx context.Context, spec HoldSpec) (*Hold, error) {
	var err error
	if spec.Memory, err = memoryName(spec.Memory); err != nil {
		return nil, err
	}
	spec.UserID = grains.NormalizeText(spec.UserID)
	if (spec.Scope == "") == (spec.UserID == "") {
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Message: "a hold names exactly one of a scope or a user"}
	}
	row := store.HoldRow{ID: store.NewHoldID(), Memory: spec.Memory, CreatedUS: db.now().UnixMicro()}
	if spec.Scope != "" {
		// A malformed path is refused, never normalised.
		if spec.Scope, err = grains.CleanScope(spec.Scope); err != nil {
			return nil, err
		}
		row.Kind, row.Scope = grains.HoldScope, spec.Scope
	} else {
		if err := grains.ValidateUserID(spec.UserID); err != nil {
			return nil, err
		}
		// The memory key, for the user ref: first drop a cached one another
		// instance erased, so WriteChain creates the memory's new key.
		if err := db.ring.Revalidate(ctx, spec.Memory); err != nil {
			return nil, err
		}
		if _, err := db.ring.WriteChain(ctx, spec.Memory, "", ""); err != nil {
			return nil, err
		}
		ref, err := db.ring.UserRef(ctx, spec.Memory, spec.UserID)
		if err != nil {
			return nil, err
		}
		row.Kind, row.UserRef = grains.HoldUser, ref
	}
	ev, err := db.journal.Event(ctx, proofs.EventHoldSet, spec.Memory, func(l *proofs.Leaf) { l.Hold = row.ID })
	if err != nil {
		return nil, err
	}
	if err := db.store.SetHold(ctx, row, []store.Event{ev}); err != nil {
		return nil, err
	}
	db.journal.Committed()
	return holdOf(row), nil
}

// ReleaseHold releases an active hold. The erasure requests of memory that
// a hold blocked then run (see ExecuteErasureRequest), in this call, under
// its context's actor; one still refused by another hold stays blocked.
func (db *DB) ReleaseHold(ctx context.Context, memory, id string) error {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return err
	}
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return grains.FieldError(grains.CodeInvalidArgument, "id", "not a hold id")
	}
	ev, err := db.journal.Event(ctx, proofs.EventHoldRelease, memory, func(l *proofs.Leaf) { l.Hold = id })
	if err != nil {
		return err
	}
	if err := db.store.ReleaseHold(ctx, memory, id, db.now().UnixMicro(), []store.Event{ev}); err != nil {
		return err
	}
	db.journal.Committed()
	if db.afterRelease != nil {
		db.afterRelease(ctx, memory)
	}
	return nil
}

// Holds lists the active holds of memory.
func (db *DB) Holds(ctx context.Context, memory string) ([]Hold, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	rows, err := db.store.Holds(ctx, memory)
	if err != nil {
		return nil, err
	}
	out := make([]Hold, 0, len(rows))
	for _, r := range rows {
		out = append(out, *holdOf(r))
	}
	return out, nil
}

func holdOf(r store.HoldRow) *Hold {
	return &Hold{ID: r.ID, Memory: r.Memory, Kind: r.Kind, Scope: r.Scope, CreatedAt: time.UnixMicro(r.CreatedUS).UTC()}
}
