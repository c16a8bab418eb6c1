package lethe

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/hooks"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// HooksConfig configures webhooks (see internal/hooks for the delivery
// engine). The zero value stores hooks and queues their deliveries, but
// sends nothing from this DB: set Deliver in the processes that send (the
// server does). Several DBs over one database may deliver at once.
type HooksConfig struct {
	// Deliver runs a delivery engine in this DB.
	Deliver bool
	// AllowPrivate lets hook URLs name loopback, private, link-local and
	// other internal addresses (development and tests only; the server
	// sets it from LETHE_HOOKS_ALLOW_PRIVATE=1).
	AllowPrivate bool
	// Timeout bounds one delivery attempt (default 10s).
	Timeout time.Duration
	// MaxAge bounds how long a delivery is retried before it is
	// dead-lettered (default 24h); MaxAttempts bounds its attempts
	// (default 30).
	MaxAge      time.Duration
	MaxAttempts int
	// BaseDelay and MaxDelay shape the exponential backoff with jitter
	// between attempts (defaults 1s and 15m).
	BaseDelay, MaxDelay time.Duration
	// Poll is how often the engine looks for due deliveries (default 500ms).
	Poll time.Duration
	// Batch is how many deliveries one claim takes (default 32).
	Batch int
}

// Hook is a webhook of a memory: lethe POSTs the audit events of the
// listed types to URL, signed per the Standard Webhooks specification.
type Hook struct {
	ID     string   `json:"id"`
	Memory string   `json:"memory"`
	URL    string   `json:"url"`
	Events []string `json:"events"`
	// CreatedAt is when the hook was created.
	CreatedAt time.Time `json:"created_at"`
	// PreviousSecretUntil, after a rotation, is when the previous secret
	// stops signing.
	PreviousSecretUntil *time.Time `json:"previous_secret_until,omitempty"`
}

// HookSpec describes a hook to create.
type HookSpec struct {
	Memory string
	URL    string
	// Events lists audit event types (see proofs.EventTypes), or "*" for
	// every type.
	Events []string
}

// HookSecret is a hook with its signing secret ("whsec_" and base64), as
// AddHook and RotateHookSecret return it: the only times it is shown.
type HookSecret struct {
	Hook
	Secret string `json:"secret"`
}

// HookDelivery is a delivery not yet accepted: pending, or dead-lettered.
type HookDelivery struct {
	ID       int64  `json:"id"`
	EventID  string `json:"event_id"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// LastError says why the last attempt failed ("status 503",
	// "timeout", "refused address"...).
	LastError string    `json:"last_error,omitempty"`
	NextAt    time.Time `json:"next_attempt_at"`
	CreatedAt time.Time `json:"created_at"`
}

// HookStats describes the delivery queue (shared by every replica) and
// this DB's engine counters.
type HookStats struct {
	Pending int64
	Dead    int64
	// OldestPending is the age of the oldest pending delivery (0 if none).
	OldestPending time.Duration
	// Delivered, Failed and DeadLettered count this process's deliveries
	// accepted, attempts failed and deliveries dead-lettered.
	Delivered, Failed, DeadLettered int64
}

// MaxHooksPerMemory bounds the hooks of one memory.
const MaxHooksPerMemory = 32

// AddHook creates a hook and returns it with its secret. The URL must be
// http or https and, unless HooksConfig.AllowPrivate, must not resolve to
// an internal address (code url_refused).
func (db *DB) AddHook(ctx context.Context, spec HookSpec) (*HookSecret, error) {
	memory, err := memoryName(spec.Memory)
	if err != nil {
		return nil, err
	}
	evs, err := hookEvents(spec.Events)
	if err != nil {
		return nil, err
	}
	if err := db.hookGuard.CheckURL(ctx, spec.URL); err != nil {
		code := grains.CodeInvalidArgument
		if errors.Is(err, hooks.ErrRefusedAddress) {
			code = grains.CodeURLRefused
		}
		return nil, &grains.Error{Code: code, Field: "url", Message: "hook url " + strings.TrimPrefix(err.Error(), "hooks: "),
			Hint: "hooks reach public http(s) addresses only; LETHE_HOOKS_ALLOW_PRIVATE=1 allows internal ones for development"}
	}
	have, err := db.store.Hooks(ctx, memory)
	if err != nil {
		return nil, err
	}
	if len(have) >= MaxHooksPerMemory {
		return nil, grains.Errorf(grains.CodeTooLarge, "memory %s has %d hooks, the most allowed", memory, MaxHooksPerMemory)
	}
	b := make([]byte, 8)
	rand.Read(b)
	id := "hk_" + hex.EncodeToString(b)
	secret := hooks.NewSecret()
	wrapped, err := db.wrapHookSecret(ctx, memory, id, secret)
	if err != nil {
		return nil, err
	}
	row := store.HookRow{ID: id, Memory: memory, URL: spec.URL, Events: joinEvents(evs), Secret: wrapped, CreatedUS: db.now().UnixMicro()}
	if err := db.store.CreateHook(ctx, row); err != nil {
		return nil, err
	}
	return &HookSecret{Hook: hookOf(row), Secret: hooks.FormatSecret(secret)}, nil
}

// Hooks returns the hooks of memory, oldest first, without secrets.
func (db *DB) Hooks(ctx context.Context, memory string) ([]Hook, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	rows, err := db.store.Hooks(ctx, memory)
	if err != nil {
		return nil, err
	}
	out := make([]Hook, len(rows))
	for i, r := range rows {
		out[i] = hookOf(r)
	}
	return out, nil
}

// RemoveHook deletes hook id of memory and its undelivered deliveries.
func (db *DB) RemoveHook(ctx context.Context, memory, id string) error {
	memory, err := memoryName(memory)
	if err != nil {
		return err
	}
	return db.store.DeleteHook(ctx, memory, id)
}

// RotateHookSecret gives hook id a new secret and returns it. The previous
// secret keeps signing, beside the new one, for overlap (default 24h; at
// most 30 days), so receivers can switch without losing a delivery.
func (db *DB) RotateHookSecret(ctx context.Context, memory, id string, overlap time.Duration) (*HookSecret, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	if overlap == 0 {
		overlap = 24 * time.Hour
	}
	if overlap < 0 || overlap > 30*24*time.Hour {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "overlap_seconds", "must be between 0 and 30 days")
	}
	if _, err := db.store.Hook(ctx, memory, id); err != nil {
		return nil, err
	}
	secret := hooks.NewSecret()
	wrapped, err := db.wrapHookSecret(ctx, memory, id, secret)
	if err != nil {
		return nil, err
	}
	if err := db.store.RotateHookSecret(ctx, memory, id, wrapped, db.now().Add(overlap).UnixMicro()); err != nil {
		return nil, err
	}
	row, err := db.store.Hook(ctx, memory, id)
	if err != nil {
		return nil, err
	}
	return &HookSecret{Hook: hookOf(*row), Secret: hooks.FormatSecret(secret)}, nil
}

// HookDeliveries returns up to 1000 undelivered deliveries of hook id, in
// state "pending" or "dead" ("" for both), oldest first.
func (db *DB) HookDeliveries(ctx context.Context, memory, id, state string) ([]HookDelivery, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	if state != "" && state != store.DeliveryPending && state != store.DeliveryDead {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "state", "must be pending or dead")
	}
	if _, err := db.store.Hook(ctx, memory, id); err != nil {
		return nil, err
	}
	rows, err := db.store.Deliveries(ctx, id, state, 1000)
	if err != nil {
		return nil, err
	}
	out := make([]HookDelivery, len(rows))
	for i, r := range rows {
		out[i] = HookDelivery{ID: r.ID, EventID: r.EventID, State: r.State, Attempts: r.Attempts, LastError: r.LastError,
			NextAt: time.UnixMicro(r.NextUS).UTC(), CreatedAt: time.UnixMicro(r.CreatedUS).UTC()}
	}
	return out, nil
}

// Redeliver makes dead-lettered deliveries of hook id pending again, due
// now, with a fresh retry budget: delivery, or all of them when delivery
// is 0. It returns how many.
func (db *DB) Redeliver(ctx context.Context, memory, id string, delivery int64) (int64, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return 0, err
	}
	if _, err := db.store.Hook(ctx, memory, id); err != nil {
		return 0, err
	}
	n, err := db.store.Redeliver(ctx, id, delivery, db.now().UnixMicro())
	if err == nil && delivery != 0 && n == 0 {
		return 0, grains.Errorf(grains.CodeNotFound, "no dead delivery %d of hook %s", delivery, id)
	}
	if db.hookEngine != nil {
		db.hookEngine.Kick()
	}
	return n, err
}

// HookStats returns the delivery queue's state and this DB's counters.
func (db *DB) HookStats(ctx context.Context) (HookStats, error) {
	q, err := db.store.DeliveryQueueStats(ctx)
	if err != nil {
		return HookStats{}, err
	}
	st := HookStats{Pending: q.Pending, Dead: q.Dead}
	if q.OldestUS != 0 {
		st.OldestPending = max(0, db.now().Sub(time.UnixMicro(q.OldestUS)))
	}
	if db.hookEngine != nil {
		s := db.hookEngine.Stats()
		st.Delivered, st.Failed, st.DeadLettered = s.Delivered, s.Failed, s.Dead
	}
	return st, nil
}

// DeliverHooks runs one delivery step now (claims due deliveries, sends
// them) and returns how many it claimed; it needs HooksConfig.Deliver.
// The engine runs on its own; this is for tests and tools.
func (db *DB) DeliverHooks(ctx context.Context) (int, error) {
	if db.hookEngine == nil {
		return 0, grains.Errorf(grains.CodeInvalidArgument, "this DB does not deliver hooks (HooksConfig.Deliver)")
	}
	return db.hookEngine.Step(ctx)
}

// hookEvents validates and normalizes a hook's event types.
func hookEvents(evs []string) ([]string, error) {
	if len(evs) == 0 {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "events", `list the audit event types to receive, or "*"`)
	}
	if slices.Contains(evs, "*") {
		if len(evs) > 1 {
			return nil, grains.FieldError(grains.CodeInvalidArgument, "events", `"*" stands alone`)
		}
		return evs, nil
	}
	out := slices.Clone(evs)
	for _, e := range out {
		if !proofs.EventType(e).Known() {
			return nil, grains.FieldError(grains.CodeInvalidArgument, "events", "unknown event type (see docs/api.md, Hooks)")
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func joinEvents(evs []string) string {
	if len(evs) == 1 && evs[0] == "*" {
		return "*"
	}
	return "," + strings.Join(evs, ",") + ","
}

func hookOf(r store.HookRow) Hook {
	h := Hook{ID: r.ID, Memory: r.Memory, URL: r.URL, CreatedAt: time.UnixMicro(r.CreatedUS).UTC()}
	if r.Events == "*" {
		h.Events = []string{"*"}
	} else {
		h.Events = strings.Split(strings.Trim(r.Events, ","), ",")
	}
	if len(r.OldSecret) > 0 && r.OldUntilUS != 0 {
		t := time.UnixMicro(r.OldUntilUS).UTC()
		h.PreviousSecretUntil = &t
	}
	return h
}

// hookSecretRef names a hook's secret to the KEK: the secret is wrapped
// like a data key, under a fingerprint derived from the hook id.
func hookSecretRef(memory, id string) keys.Ref {
	fp := sha256.Sum256([]byte("lethe/hook-secret/v1\x00" + id))
	return keys.Ref{Memory: memory, Kind: "hook", Fingerprint: hex.EncodeToString(fp[:])}
}

func (db *DB) wrapHookSecret(ctx context.Context, memory, id string, secret []byte) ([]byte, error) {
	w, err := db.kek.Wrap(ctx, hookSecretRef(memory, id), secret)
	if err != nil {
		return nil, grains.Wrap(grains.CodeUnavailable, "key-encryption key unavailable", err)
	}
	return w, nil
}

// rewrapHookSecrets rewraps, during a KEK rotation, every hook secret
// (current and previous) that current says is not under the newest KEK
// version, and returns how many it rewrapped.
func (db *DB) rewrapHookSecrets(ctx context.Context, rewrap func(context.Context, []byte) ([]byte, error), current func([]byte) bool) (int, error) {
	rows, err := db.store.AllHooks(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, h := range rows {
		for _, old := range [][]byte{h.Secret, h.OldSecret} {
			if len(old) == 0 || current(old) {
				continue
			}
			nw, err := rewrap(ctx, old)
			if err != nil {
				return n, err
			}
			// Compare-and-swap: a secret rotated meanwhile stays rotated.
			ok, err := db.store.ReplaceHookSecret(ctx, h.ID, old, nw)
			if err != nil {
				return n, err
			}
			if ok {
				n++
			}
		}
	}
	return n, nil
}

// hookStore adapts the store to hooks.Store.
type hookStore struct{ st *store.DB }

func (h hookStore) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, max int) ([]hooks.Delivery, error) {
	rows, err := h.st.ClaimDeliveries(ctx, owner, now.UnixMicro(), now.Add(lease).UnixMicro(), max)
	out := make([]hooks.Delivery, len(rows))
	for i, r := range rows {
		out[i] = hooks.Delivery{ID: r.ID, HookID: r.HookID, URL: r.URL, Secret: r.Secret, OldSecret: r.OldSecret,
			OldUntil: time.UnixMicro(r.OldUntilUS), EventID: r.EventID, Type: r.Type, Memory: r.Memory, Leaf: r.Leaf,
			Index: uint64(r.Seq), Attempts: r.Attempts, CreatedAt: time.UnixMicro(r.CreatedUS)}
	}
	return out, err
}

func (h hookStore) Delivered(ctx context.Context, ids []int64, owner string) error {
	return h.st.DeliveryDone(ctx, ids, owner)
}

func (h hookStore) Failed(ctx context.Context, id int64, owner string, f hooks.Failure) error {
	return h.st.DeliveryFailed(ctx, id, owner, f.Attempts, f.Next.UnixMicro(), f.Dead, f.Reason)
}

func (h hookStore) Release(ctx context.Context, ids []int64, owner string) error {
	return h.st.ReleaseDeliveries(ctx, ids, owner)
}

// startHooks sets up the URL guard and, with cfg.Deliver, starts the
// delivery engine; the returned function stops it.
func (db *DB) startHooks(cfg HooksConfig) func() {
	db.hookGuard = hooks.Guard{AllowPrivate: cfg.AllowPrivate}
	if !cfg.Deliver {
		return func() {}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 500 * time.Millisecond
	}
	db.hookEngine = hooks.New(hooks.Config{Store: hookStore{db.store},
		Unwrap: func(ctx context.Context, id string, wrapped []byte) ([]byte, error) {
			// The memory is not needed to unwrap: a Ref's memory only
			// labels the key for the KEK's logs.
			return db.kek.Unwrap(ctx, hookSecretRef("", id), wrapped)
		},
		Guard: db.hookGuard, Timeout: cfg.Timeout, MaxAge: cfg.MaxAge, MaxAttempts: cfg.MaxAttempts,
		BaseDelay: cfg.BaseDelay, MaxDelay: cfg.MaxDelay, Poll: cfg.Poll, Batch: cfg.Batch, Now: db.now, Logger: db.logger})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		db.hookEngine.Run(ctx)
	}()
	return sync.OnceFunc(func() { cancel(); wg.Wait() })
}
