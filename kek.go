package lethe

import (
	"context"
	"errors"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
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

// rotator is a KEK whose versions can be rotated, rewrapped and trimmed
// (Vault transit in shared mode).
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
	// Version is the KEK version every live data key is now wrapped under.
	Version int `json:"version"`
	// Rewrapped counts the live data keys rewrapped.
	Rewrapped int `json:"rewrapped"`
	// TrimmedBelow is the oldest KEK version still available.
	TrimmedBelow int `json:"trimmed_below"`
}

// RotateKEK rotates the KEK, rewraps every live data key under the new
// version, and trims KEK versions older than the Keep newest. Backups
// taken before the trim hold data keys wrapped under trimmed versions:
// they no longer decrypt, which bounds how long an erased key survives in
// backups (the backup horizon).
func (db *DB) RotateKEK(ctx context.Context, opts RotateOptions) (*Rotation, error) {
	r, ok := db.kek.(rotator)
	if !ok {
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Message: "this KEK cannot be rotated",
			Hint: "rotation needs Vault transit in shared-key mode; the local age KEK is rotated by re-keying the data dir"}
	}
	if opts.Keep == 0 {
		opts.Keep = 1
	}
	if opts.Keep < 1 {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "keep", "must be at least 1")
	}
	if err := r.Rotate(ctx); err != nil {
		return nil, kekErr(err)
	}
	latest, err := r.LatestVersion(ctx)
	if err != nil {
		return nil, kekErr(err)
	}
	out := &Rotation{Version: latest}
	var after int64
	for {
		page, err := db.store.LiveKeyPage(ctx, after, 500)
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, k := range page {
			after = k.ID
			nw, err := r.Rewrap(ctx, k.Wrapped)
			if err != nil {
				return nil, kekErr(err)
			}
			// Compare-and-swap: a key erased meanwhile stays erased.
			ok, err := db.store.ReplaceWrapped(ctx, k.ID, k.Wrapped, nw)
			if err != nil {
				return nil, err
			}
			if ok {
				out.Rewrapped++
			}
		}
	}
	out.TrimmedBelow = max(1, latest-opts.Keep+1)
	if err := r.Trim(ctx, out.TrimmedBelow); err != nil {
		return nil, kekErr(err)
	}
	// Cached unwrapped keys are unchanged by a rewrap; nothing to purge.
	return out, nil
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
