package lethe

import (
	"context"
	"errors"

	"github.com/lethe-io/lethe/internal/erasure"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/proofs"
)

// VaultConfig configures the Vault transit KEK: address, token (read by the
// caller from a file or the environment), mount, key name, and
// dedicated-key mode (one transit key per data key, deleted on erase).
type VaultConfig = keys.VaultConfig

// NewVaultKEK returns a KEK that wraps data keys with Vault transit; the
// KEK never leaves Vault. Put it in Config.KEK.
func NewVaultKEK(cfg VaultConfig) (KeyWrapper, error) {
	return keys.NewVaultWrapper(cfg)
}

// rotator is a KEK whose versions can be rotated, rewrapped and trimmed:
// Vault transit in shared-key mode, and the local age KEK.
type rotator interface {
	Rotate(ctx context.Context) error
	Rewrap(ctx context.Context, wrapped []byte) ([]byte, error)
	LatestVersion(ctx context.Context) (int, error)
	Trim(ctx context.Context, keepFrom int) error
}

// RotateOptions configures RotateKEK.
type RotateOptions struct {
	// Keep is how many KEK versions stay usable, the newest included
	// (default 1). Older versions are trimmed: a backup holding keys
	// wrapped under them can no longer be decrypted.
	Keep int
}

// Rotation reports a RotateKEK.
type Rotation struct {
	// KEK names the rotated key-encryption key.
	KEK string `json:"kek"`
	// Version is the KEK version every live data key is now wrapped under.
	Version int `json:"version"`
	// Rewrapped counts the live data keys rewrapped.
	Rewrapped int `json:"rewrapped"`
	// TrimmedBelow is the oldest KEK version still available: every
	// version below it is destroyed.
	TrimmedBelow int `json:"trimmed_below"`
	// RotateEventID names the kek.rotate audit event.
	RotateEventID string `json:"rotate_event_id"`
	// Trim is the receipt of the kek.trim audit event, with its proof: with
	// an erasure's proof whose kek_version is below TrimmedBelow, it shows
	// every copy of the erased keys dead ("lethe verify --finality").
	Trim *Receipt `json:"trim"`
}

// maxRewrapPasses bounds the passes over the live keys a rotation makes
// before trimming: a pass after the first finds only keys another process
// wrapped under an old version while the rotation ran.
const maxRewrapPasses = 4

// RotateKEK rotates the KEK, rewraps every live data key under the new
// version, and trims KEK versions older than the Keep newest. Backups
// taken before the trim hold data keys wrapped under trimmed versions:
// they no longer decrypt, which bounds how long an erased key survives in
// backups and residue (the horizon). The rotation and the trim are each
// appended to the audit log (kek.rotate, kek.trim).
//
// With the local age KEK, rotate while no other process writes to the same
// data directory, or through the running server: another process sees the
// new identity file at its next wrap, but a key it wraps under the old
// version after the last rewrap pass and before the trim would be lost.
func (db *DB) RotateKEK(ctx context.Context, opts RotateOptions) (*Rotation, error) {
	r, ok := db.kek.(rotator)
	if !ok {
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Message: "this KEK cannot be rotated",
			Hint: "rotation needs the local age KEK or Vault transit in shared-key mode"}
	}
	if v, ok := db.kek.(interface{ Dedicated() bool }); ok && v.Dedicated() {
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Message: "this KEK cannot be rotated",
			Hint: "in dedicated-key mode each data key has its own transit key, deleted on erase"}
	}
	if opts.Keep == 0 {
		opts.Keep = 1
	}
	if opts.Keep < 1 {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "keep", "must be at least 1")
	}
	if !db.rotating.CompareAndSwap(false, true) {
		return nil, grains.Errorf(grains.CodeConflict, "a KEK rotation is already running")
	}
	defer db.rotating.Store(false)
	if err := r.Rotate(ctx); err != nil {
		return nil, kekErr(err)
	}
	latest, err := r.LatestVersion(ctx)
	if err != nil {
		return nil, kekErr(err)
	}
	_, name := erasure.KEKVersion(db.kek, nil)
	if name == "" {
		name = "kek"
	}
	out := &Rotation{KEK: name, Version: latest}
	v := uint64(latest)
	rot, err := db.journal.Event(ctx, proofs.EventKEKRotate, "", func(l *proofs.Leaf) { l.KEK, l.KEKVersion = name, &v })
	if err != nil {
		return nil, err
	}
	if err := db.journal.Append(ctx, rot); err != nil {
		return nil, err
	}
	out.RotateEventID = rot.ID
	vr, _ := db.kek.(erasure.Versioner)
	for pass := 0; pass < maxRewrapPasses; pass++ {
		n, err := db.rewrapAll(ctx, r, vr, latest)
		if err != nil {
			return nil, err
		}
		out.Rewrapped += n
		if n == 0 && pass > 0 {
			break
		}
	}
	out.TrimmedBelow = max(1, latest-opts.Keep+1)
	if err := r.Trim(ctx, out.TrimmedBelow); err != nil {
		return nil, kekErr(err)
	}
	minV := uint64(out.TrimmedBelow)
	trim, err := db.journal.Event(ctx, proofs.EventKEKTrim, "", func(l *proofs.Leaf) { l.KEK, l.KEKMinVersion = name, &minV })
	if err != nil {
		return nil, err
	}
	if err := db.journal.Append(ctx, trim); err != nil {
		return nil, err
	}
	if out.Trim, err = db.journal.Receipt(ctx, trim.ID, trim.Leaf); err != nil {
		return nil, err
	}
	// Cached unwrapped keys are unchanged by a rewrap; nothing to purge.
	return out, nil
}

// rewrapAll rewraps every live data key not yet under KEK version latest
// and returns how many it rewrapped.
func (db *DB) rewrapAll(ctx context.Context, r rotator, vr erasure.Versioner, latest int) (int, error) {
	n := 0
	var after int64
	for {
		page, err := db.store.LiveKeyPage(ctx, after, 500)
		if err != nil {
			return n, err
		}
		if len(page) == 0 {
			// Hook secrets are wrapped by the KEK too.
			m, err := db.hooks.Rewrap(ctx, r.Rewrap, func(w []byte) bool {
				if vr == nil {
					return false
				}
				v, ok := vr.KEKVersion(w)
				return ok && v >= latest
			})
			if err != nil {
				return n + m, kekErr(err)
			}
			return n + m, nil
		}
		for _, k := range page {
			after = k.ID
			if vr != nil {
				if v, ok := vr.KEKVersion(k.Wrapped); ok && v >= latest {
					continue
				}
			}
			nw, err := r.Rewrap(ctx, k.Wrapped)
			if err != nil {
				return n, kekErr(err)
			}
			// Compare-and-swap: a key erased meanwhile stays erased.
			ok, err := db.store.ReplaceWrapped(ctx, k.ID, k.Wrapped, nw)
			if err != nil {
				return n, err
			}
			if ok {
				n++
			}
		}
	}
}

func kekErr(err error) error {
	var ge *grains.Error
	if errors.As(err, &ge) {
		return err
	}
	return grains.Wrap(grains.CodeUnavailable, "key-encryption key unavailable", err)
}

// checker is a KEK that can tell whether it is reachable (Vault).
type checker interface {
	Check(ctx context.Context) error
}

// Ready reports whether the store, the KEK and the audit log answer. It
// names the failing part, with code unavailable.
func (db *DB) Ready(ctx context.Context) error {
	if err := db.store.Ping(ctx); err != nil {
		return grains.Wrap(grains.CodeUnavailable, "store not ready", err)
	}
	if c, ok := db.kek.(checker); ok {
		if err := c.Check(ctx); err != nil {
			return grains.Wrap(grains.CodeUnavailable, "key-encryption key not ready", err)
		}
	}
	if _, _, err := db.log.Root(ctx); err != nil {
		return grains.Wrap(grains.CodeUnavailable, "audit log not ready", err)
	}
	return nil
}
