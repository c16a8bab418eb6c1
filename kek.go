package lethe

import (
	"context"

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

// RotateOptions configures RotateKEK: Keep is how many KEK versions stay
// usable, the newest included (default 1). Older versions are trimmed: a
// backup holding keys wrapped under them can no longer be decrypted.
type RotateOptions = keys.RotateOptions

// Rotation reports a RotateKEK: the KEK's name, the Version every live
// data key is now wrapped under, how many keys were Rewrapped,
// TrimmedBelow (the oldest KEK version still available: every version
// below it is destroyed), RotateEventID (the kek.rotate event), and Trim,
// the receipt of the kek.trim event with its proof: with an erasure's
// proof whose kek_version is below TrimmedBelow, it shows every copy of
// the erased keys dead ("lethe verify --finality").
type Rotation = keys.Rotation

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
	return db.rotator.Rotate(ctx, opts)
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
