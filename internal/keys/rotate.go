package keys

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/proofs"
)

// KEK rotation: rotate the key-encryption key, rewrap every live data key
// under its new version, trim the old versions. Trimming bounds how long
// an erased key survives in backups (the horizon).

// RotationStore is the store's side of a rotation: the live data keys, a
// page at a time, and a compare-and-swap of one key's wrapped bytes.
// *store.DB implements it.
type RotationStore interface {
	LiveKeyPage(ctx context.Context, after int64, n int) ([]Record, error)
	ReplaceWrapped(ctx context.Context, id int64, old, next []byte) (bool, error)
}

// RotationJournal builds and commits the kek.rotate and kek.trim events.
// *audit.Journal implements it.
type RotationJournal interface {
	Event(ctx context.Context, typ proofs.EventType, memory string, fill func(*proofs.Leaf)) (audit.Event, error)
	Append(ctx context.Context, evs ...audit.Event) error
	Receipt(ctx context.Context, id string, leaf []byte) (*audit.Receipt, error)
}

// RotatorConfig configures a Rotator.
type RotatorConfig struct {
	KEK     Wrapper
	Store   RotationStore
	Journal RotationJournal
	// Rewrapped, when set, rewraps the other secrets the KEK wraps (hook
	// secrets) with rewrap, those current says are not yet under the new
	// version, and returns how many it rewrapped.
	Rewrapped func(ctx context.Context, rewrap func(context.Context, []byte) ([]byte, error), current func([]byte) bool) (int, error)
}

// Rotator rotates a KEK; one rotation runs at a time.
type Rotator struct {
	cfg      RotatorConfig
	rotating atomic.Bool
}

// NewRotator returns a Rotator.
func NewRotator(cfg RotatorConfig) *Rotator { return &Rotator{cfg: cfg} }

// RotateOptions configures Rotator.Rotate.
type RotateOptions struct {
	// Keep is how many KEK versions stay usable, the newest included
	// (default 1). Older versions are trimmed: a backup holding keys
	// wrapped under them can no longer be decrypted.
	Keep int
}

// Rotation reports a rotation.
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
	Trim *audit.Receipt `json:"trim"`
}

// rotator is a KEK whose versions can be rotated, rewrapped and trimmed:
// Vault transit in shared-key mode, and the local age KEK.
type rotator interface {
	Rotate(ctx context.Context) error
	Rewrap(ctx context.Context, wrapped []byte) ([]byte, error)
	LatestVersion(ctx context.Context) (int, error)
	Trim(ctx context.Context, keepFrom int) error
}

// maxRewrapPasses bounds the passes over the live keys a rotation makes
// before trimming: a pass after the first finds only keys another process
// wrapped under an old version while the rotation ran.
const maxRewrapPasses = 4

// Rotate rotates the KEK, rewraps every live data key (and, through
// RotatorConfig.Rewrapped, the other secrets it wraps) under the new
// version, and trims the versions older than the Keep newest, with a
// kek.rotate and a kek.trim event (see package lethe's DB.RotateKEK).
func (k *Rotator) Rotate(ctx context.Context, opts RotateOptions) (*Rotation, error) {
	r, ok := k.cfg.KEK.(rotator)
	if !ok {
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Message: "this KEK cannot be rotated",
			Hint: "rotation needs the local age KEK or Vault transit in shared-key mode"}
	}
	if v, ok := k.cfg.KEK.(interface{ Dedicated() bool }); ok && v.Dedicated() {
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Message: "this KEK cannot be rotated",
			Hint: "in dedicated-key mode each data key has its own transit key, deleted on erase"}
	}
	if opts.Keep == 0 {
		opts.Keep = 1
	}
	if opts.Keep < 1 {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "keep", "must be at least 1")
	}
	if !k.rotating.CompareAndSwap(false, true) {
		return nil, grains.Errorf(grains.CodeConflict, "a KEK rotation is already running")
	}
	defer k.rotating.Store(false)
	if err := r.Rotate(ctx); err != nil {
		return nil, kekErr(err)
	}
	latest, err := r.LatestVersion(ctx)
	if err != nil {
		return nil, kekErr(err)
	}
	_, name := KEKVersion(k.cfg.KEK, nil)
	if name == "" {
		name = "kek"
	}
	out := &Rotation{KEK: name, Version: latest}
	v := uint64(latest)
	rot, err := k.cfg.Journal.Event(ctx, proofs.EventKEKRotate, "", func(l *proofs.Leaf) { l.KEK, l.KEKVersion = name, &v })
	if err != nil {
		return nil, err
	}
	if err := k.cfg.Journal.Append(ctx, rot); err != nil {
		return nil, err
	}
	out.RotateEventID = rot.ID
	vr, _ := k.cfg.KEK.(Versioner)
	for pass := 0; pass < maxRewrapPasses; pass++ {
		n, err := k.rewrapAll(ctx, r, vr, latest)
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
	trim, err := k.cfg.Journal.Event(ctx, proofs.EventKEKTrim, "", func(l *proofs.Leaf) { l.KEK, l.KEKMinVersion = name, &minV })
	if err != nil {
		return nil, err
	}
	if err := k.cfg.Journal.Append(ctx, trim); err != nil {
		return nil, err
	}
	if out.Trim, err = k.cfg.Journal.Receipt(ctx, trim.ID, trim.Leaf); err != nil {
		return nil, err
	}
	// Cached unwrapped keys are unchanged by a rewrap; nothing to purge.
	return out, nil
}

// rewrapAll rewraps every live data key not yet under KEK version latest
// and returns how many it rewrapped.
func (k *Rotator) rewrapAll(ctx context.Context, r rotator, vr Versioner, latest int) (int, error) {
	n := 0
	var after int64
	for {
		page, err := k.cfg.Store.LiveKeyPage(ctx, after, 500)
		if err != nil {
			return n, err
		}
		if len(page) == 0 {
			// Other secrets (hook secrets) are wrapped by the KEK too.
			if k.cfg.Rewrapped == nil {
				return n, nil
			}
			m, err := k.cfg.Rewrapped(ctx, r.Rewrap, func(w []byte) bool {
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
		for _, rec := range page {
			after = rec.ID
			if vr != nil {
				if v, ok := vr.KEKVersion(rec.Wrapped); ok && v >= latest {
					continue
				}
			}
			nw, err := r.Rewrap(ctx, rec.Wrapped)
			if err != nil {
				return n, kekErr(err)
			}
			// Compare-and-swap: a key erased meanwhile stays erased.
			ok, err := k.cfg.Store.ReplaceWrapped(ctx, rec.ID, rec.Wrapped, nw)
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

// Versioner is a KEK whose wrapped keys say which KEK version made them.
// KEKName names the KEK in audit events.
type Versioner interface {
	KEKVersion(wrapped []byte) (int, bool)
	KEKName() string
}

// KEKVersion returns the newest version of kek among wrapped keys, and the
// KEK's name; 0 and "" when the KEK does not tell.
func KEKVersion(kek Wrapper, recs []Record) (uint64, string) {
	vr, ok := kek.(Versioner)
	if !ok {
		return 0, ""
	}
	var top uint64
	for _, r := range recs {
		if v, ok := vr.KEKVersion(r.Wrapped); ok {
			top = max(top, uint64(v))
		}
	}
	return top, vr.KEKName()
}
