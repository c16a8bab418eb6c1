package hooks

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// Settings configures webhooks (package lethe's HooksConfig). The zero
// value stores hooks and queues their deliveries, but sends nothing: set
// Deliver in the processes that send (the server does). Several processes
// over one database may deliver at once.
type Settings struct {
	// Deliver runs a delivery engine.
	Deliver bool
	// AllowPrivate lets hook URLs name loopback, private, link-local and
	// other internal addresses (development and tests only; the server
	// sets it from LETHE_HOOKS_ALLOW_PRIVATE=1).
	AllowPrivate bool
	// Timeout bounds one delivery attempt (default 10s).
	Timeout time.Duration
	// MaxAge bounds how long a delivery is retried before it is
	// dead-lettered (default 24h), its hook's pauses included;
	// MaxAttempts bounds its attempts (default 30).
	MaxAge      time.Duration
	MaxAttempts int
	// PauseAfter consecutive failed attempts of a hook, of any of its
	// deliveries, pause its deliveries for Pause (defaults 10 and 1m);
	// then one delivery is tried alone, which resumes them if accepted
	// and pauses them again for twice as long if not, up to MaxPause
	// (default 15m). Every process over the database shares the pause.
	PauseAfter      int
	Pause, MaxPause time.Duration
	// BaseDelay and MaxDelay shape the exponential backoff with jitter
	// between attempts (defaults 1s and 15m).
	BaseDelay, MaxDelay time.Duration
	// Poll is how often the engine looks for due deliveries (default 500ms).
	Poll time.Duration
	// Batch is the most deliveries one claim takes (default 32).
	Batch int
	// Workers bounds the attempts under way at once (default 64);
	// PerHook bounds those of one hook (default 4) and PerMemory those of
	// one memory's hooks together (default 8), so that slow or dead
	// receivers of one memory never hold up the others' deliveries.
	Workers, PerHook, PerMemory int
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
	// Status is the state of the hook's deliveries (its Circuit):
	// StatusActive, StatusFailing, StatusPaused or StatusProbing.
	Status string `json:"status"`
	// ConsecutiveFailures counts the hook's failed attempts, of any of its
	// deliveries, since a receiver last accepted one.
	ConsecutiveFailures int `json:"consecutive_failures"`
	// PausedUntil, while the hook is paused or probing, is when its pause
	// ends or ended.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
}

// The states of a hook's deliveries (Hook.Status).
const (
	// StatusActive: the hook's deliveries go out, and the last attempt,
	// if any, was accepted.
	StatusActive = "active"
	// StatusFailing: the hook's deliveries go out, but the last attempts
	// failed (fewer than PauseAfter).
	StatusFailing = "failing"
	// StatusPaused: no delivery of the hook is attempted before
	// PausedUntil.
	StatusPaused = "paused"
	// StatusProbing: the pause has ended; the hook's next due delivery is
	// tried alone, and resumes the hook if accepted or pauses it again.
	StatusProbing = "probing"
)

// Spec describes a hook to create.
type Spec struct {
	Memory string
	URL    string
	// Events lists audit event types (see EventTypes), or "*" for every
	// type.
	Events []string
}

// WithSecret is a hook with its signing secret ("whsec_" and base64), as
// Add and Rotate return it: the only times it is shown.
type WithSecret struct {
	Hook
	Secret string `json:"secret"`
}

// Undelivered is a delivery not yet accepted: pending, or dead-lettered.
type Undelivered struct {
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

// QueueStats describes the delivery queue (shared by every replica) and
// this process's engine counters.
type QueueStats struct {
	Pending int64
	Dead    int64
	// OldestPending is the age of the oldest pending delivery (0 if none).
	OldestPending time.Duration
	// Paused counts the hooks paused or probing (see Circuit).
	Paused int64
	// Delivered, Failed and DeadLettered count this process's deliveries
	// accepted, attempts failed and deliveries dead-lettered; Pauses its
	// failures that paused a hook, or paused it again.
	Delivered, Failed, DeadLettered, Pauses int64
}

// MaxPerMemory bounds the hooks of one memory.
const MaxPerMemory = 32

// HookStore is what a Registry needs of the store: the hooks and their
// delivery queue. *store.DB implements it.
type HookStore interface {
	CreateHook(ctx context.Context, h store.HookRow) error
	Hooks(ctx context.Context, memory string) ([]store.HookRow, error)
	Hook(ctx context.Context, memory, id string) (*store.HookRow, error)
	DeleteHook(ctx context.Context, memory, id string) error
	AllHooks(ctx context.Context) ([]store.HookRow, error)
	ReplaceHookSecret(ctx context.Context, id string, old, nw []byte) (bool, error)
	RotateHookSecret(ctx context.Context, memory, id string, secret []byte, oldUntil int64) error
	Deliveries(ctx context.Context, hookID, state string, limit int) ([]store.DeliveryRow, error)
	Redeliver(ctx context.Context, hookID string, deliveryID int64, now int64) (int64, error)
	DeliveryQueueStats(ctx context.Context) (store.DeliveryQueue, error)
	ClaimDeliveries(ctx context.Context, owner string, now, leaseUntil int64, max int, lim store.ClaimLimits) ([]store.ClaimedDelivery, error)
	DeliveryDone(ctx context.Context, refs []store.DeliveryRef) error
	DeliveryFailed(ctx context.Context, id int64, owner string, f store.DeliveryFailure) (store.Tripped, error)
	ReleaseDeliveries(ctx context.Context, refs []store.DeliveryRef) error
}

var _ HookStore = (*store.DB)(nil)

// RegistryConfig configures a Registry.
type RegistryConfig struct {
	Store    HookStore
	KEK      keys.Wrapper // wraps the hooks' secrets
	Settings Settings
	Now      func() time.Time
	Logger   *slog.Logger
}

// Registry manages the hooks of a DB (create, list, remove, rotate
// secrets, inspect and redrive deliveries) and runs its delivery engine
// when Settings.Deliver is set. Memory names reach it validated.
type Registry struct {
	store  HookStore
	kek    keys.Wrapper
	guard  Guard
	engine *Engine // nil unless Settings.Deliver
	now    func() time.Time
	stop   func()
}

// NewRegistry returns a Registry and, with cfg.Settings.Deliver, starts
// its delivery engine (Close stops it).
func NewRegistry(cfg RegistryConfig) *Registry {
	r := &Registry{store: cfg.Store, kek: cfg.KEK, guard: Guard{AllowPrivate: cfg.Settings.AllowPrivate}, now: cfg.Now, stop: func() {}}
	s := cfg.Settings
	if !s.Deliver {
		return r
	}
	if s.Poll <= 0 {
		s.Poll = 500 * time.Millisecond
	}
	r.engine = New(Config{Store: claims{cfg.Store},
		Unwrap: func(ctx context.Context, id string, wrapped []byte) ([]byte, error) {
			// The memory is not needed to unwrap: a Ref's memory only
			// labels the key for the KEK's logs.
			return r.kek.Unwrap(ctx, secretRef("", id), wrapped)
		},
		Guard: r.guard, Timeout: s.Timeout, MaxAge: s.MaxAge, MaxAttempts: s.MaxAttempts,
		PauseAfter: s.PauseAfter, Pause: s.Pause, MaxPause: s.MaxPause,
		BaseDelay: s.BaseDelay, MaxDelay: s.MaxDelay, Poll: s.Poll, Batch: s.Batch,
		Workers: s.Workers, PerHook: s.PerHook, PerMemory: s.PerMemory, Now: cfg.Now, Logger: cfg.Logger})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.engine.Run(ctx)
	}()
	r.stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	return r
}

// Close stops the delivery engine, if it runs.
func (r *Registry) Close() { r.stop() }

// Add creates a hook and returns it with its secret. The URL must be http
// or https and, unless Settings.AllowPrivate, must not resolve to an
// internal address (code url_refused).
func (r *Registry) Add(ctx context.Context, spec Spec) (*WithSecret, error) {
	evs, err := events(spec.Events)
	if err != nil {
		return nil, err
	}
	if err := r.guard.CheckURL(ctx, spec.URL); err != nil {
		code := grains.CodeInvalidArgument
		if errors.Is(err, ErrRefusedAddress) {
			code = grains.CodeURLRefused
		}
		return nil, &grains.Error{Code: code, Field: "url", Message: "hook url " + strings.TrimPrefix(err.Error(), "hooks: "),
			Hint: "hooks reach public http(s) addresses only; LETHE_HOOKS_ALLOW_PRIVATE=1 allows internal ones for development"}
	}
	have, err := r.store.Hooks(ctx, spec.Memory)
	if err != nil {
		return nil, err
	}
	if len(have) >= MaxPerMemory {
		return nil, grains.Errorf(grains.CodeTooLarge, "memory %s has %d hooks, the most allowed", spec.Memory, MaxPerMemory)
	}
	b := make([]byte, 8)
	rand.Read(b)
	id := "hk_" + hex.EncodeToString(b)
	secret := NewSecret()
	wrapped, err := r.wrap(ctx, spec.Memory, id, secret)
	if err != nil {
		return nil, err
	}
	row := store.HookRow{ID: id, Memory: spec.Memory, URL: spec.URL, Events: joinEvents(evs), Secret: wrapped, CreatedUS: r.now().UnixMicro()}
	if err := r.store.CreateHook(ctx, row); err != nil {
		return nil, err
	}
	return &WithSecret{Hook: hookOf(row, r.now()), Secret: FormatSecret(secret)}, nil
}

// CheckID refuses an id that is not a hook id ("hk_" and 16 lowercase hex
// digits, as Add makes them; invalid_argument, field id) before any
// lookup, so that no not_found answer quotes what the caller sent.
func CheckID(id string) error {
	if h, ok := strings.CutPrefix(id, "hk_"); !ok || len(h) != 16 || strings.Trim(h, "0123456789abcdef") != "" {
		return grains.FieldError(grains.CodeInvalidArgument, "id", "not a hook id")
	}
	return nil
}

// List returns the hooks of memory, oldest first, without secrets.
func (r *Registry) List(ctx context.Context, memory string) ([]Hook, error) {
	rows, err := r.store.Hooks(ctx, memory)
	if err != nil {
		return nil, err
	}
	out := make([]Hook, len(rows))
	now := r.now()
	for i, row := range rows {
		out[i] = hookOf(row, now)
	}
	return out, nil
}

// Remove deletes hook id of memory and its undelivered deliveries.
func (r *Registry) Remove(ctx context.Context, memory, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	return r.store.DeleteHook(ctx, memory, id)
}

// Rotate gives hook id a new secret and returns it; the previous secret
// keeps signing for overlap (default 24h; at most 30 days).
func (r *Registry) Rotate(ctx context.Context, memory, id string, overlap time.Duration) (*WithSecret, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	if overlap == 0 {
		overlap = 24 * time.Hour
	}
	if overlap < 0 || overlap > 30*24*time.Hour {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "overlap_seconds", "must be between 0 and 30 days")
	}
	if _, err := r.store.Hook(ctx, memory, id); err != nil {
		return nil, err
	}
	secret := NewSecret()
	wrapped, err := r.wrap(ctx, memory, id, secret)
	if err != nil {
		return nil, err
	}
	if err := r.store.RotateHookSecret(ctx, memory, id, wrapped, r.now().Add(overlap).UnixMicro()); err != nil {
		return nil, err
	}
	row, err := r.store.Hook(ctx, memory, id)
	if err != nil {
		return nil, err
	}
	return &WithSecret{Hook: hookOf(*row, r.now()), Secret: FormatSecret(secret)}, nil
}

// Deliveries returns up to 1000 undelivered deliveries of hook id, in
// state "pending" or "dead" ("" for both), oldest first.
func (r *Registry) Deliveries(ctx context.Context, memory, id, state string) ([]Undelivered, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	if state != "" && state != store.DeliveryPending && state != store.DeliveryDead {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "state", "must be pending or dead")
	}
	if _, err := r.store.Hook(ctx, memory, id); err != nil {
		return nil, err
	}
	rows, err := r.store.Deliveries(ctx, id, state, 1000)
	if err != nil {
		return nil, err
	}
	out := make([]Undelivered, len(rows))
	for i, d := range rows {
		out[i] = Undelivered{ID: d.ID, EventID: d.EventID, State: d.State, Attempts: d.Attempts, LastError: d.LastError,
			NextAt: time.UnixMicro(d.NextUS).UTC(), CreatedAt: time.UnixMicro(d.CreatedUS).UTC()}
	}
	return out, nil
}

// Redeliver makes dead-lettered deliveries of hook id pending again, due
// now, with a fresh retry budget: delivery, or all of them when delivery
// is 0. It returns how many. It ends the hook's pause (see Circuit), even
// when nothing is dead, unless delivery names no dead delivery.
func (r *Registry) Redeliver(ctx context.Context, memory, id string, delivery int64) (int64, error) {
	if err := CheckID(id); err != nil {
		return 0, err
	}
	if _, err := r.store.Hook(ctx, memory, id); err != nil {
		return 0, err
	}
	n, err := r.store.Redeliver(ctx, id, delivery, r.now().UnixMicro())
	if err == nil && delivery != 0 && n == 0 {
		return 0, grains.Errorf(grains.CodeNotFound, "no dead delivery %d of hook %s", delivery, id)
	}
	if r.engine != nil {
		r.engine.Kick()
	}
	return n, err
}

// Stats returns the delivery queue's state and this process's counters.
func (r *Registry) Stats(ctx context.Context) (QueueStats, error) {
	q, err := r.store.DeliveryQueueStats(ctx)
	if err != nil {
		return QueueStats{}, err
	}
	st := QueueStats{Pending: q.Pending, Dead: q.Dead, Paused: q.Paused}
	if q.OldestUS != 0 {
		st.OldestPending = max(0, r.now().Sub(time.UnixMicro(q.OldestUS)))
	}
	if r.engine != nil {
		s := r.engine.Stats()
		st.Delivered, st.Failed, st.DeadLettered, st.Pauses = s.Delivered, s.Failed, s.Dead, s.Paused
	}
	return st, nil
}

// Step runs one delivery step now (see Engine.Step); it needs
// Settings.Deliver.
func (r *Registry) Step(ctx context.Context) (int, error) {
	if r.engine == nil {
		return 0, grains.Errorf(grains.CodeInvalidArgument, "this DB does not deliver hooks (HooksConfig.Deliver)")
	}
	return r.engine.Step(ctx)
}

// Rewrap rewraps, during a KEK rotation, every hook secret (current and
// previous) that current says is not under the newest KEK version, and
// returns how many it rewrapped.
func (r *Registry) Rewrap(ctx context.Context, rewrap func(context.Context, []byte) ([]byte, error), current func([]byte) bool) (int, error) {
	rows, err := r.store.AllHooks(ctx)
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
			ok, err := r.store.ReplaceHookSecret(ctx, h.ID, old, nw)
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

// EventTypes returns the audit event types a hook can receive, in the
// order of proofs.EventTypes: those of one memory, since a delivery goes
// to the hooks of its event's memory. The KEK's events (kek.rotate,
// kek.trim) belong to no memory and reach no hook.
func EventTypes() []proofs.EventType {
	var out []proofs.EventType
	for _, t := range proofs.EventTypes {
		if t.OfMemory() {
			out = append(out, t)
		}
	}
	return out
}

// events validates and normalizes a hook's event types: "*" alone, or
// types of EventTypes. An error names the item at fault (events[i]),
// never quoting it.
func events(evs []string) ([]string, error) {
	if len(evs) == 0 {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "events", `list the audit event types to receive, or "*"`)
	}
	if i := slices.Index(evs, "*"); i >= 0 {
		if len(evs) > 1 {
			return nil, grains.FieldError(grains.CodeInvalidArgument, fmt.Sprintf("events[%d]", i), `"*" stands alone`)
		}
		return evs, nil
	}
	deliverable := EventTypes()
	for i, e := range evs {
		if !slices.Contains(deliverable, proofs.EventType(e)) {
			return nil, grains.FieldError(grains.CodeInvalidArgument, fmt.Sprintf("events[%d]", i),
				"not an event type a hook receives (see docs/api.md, Hooks)")
		}
	}
	out := slices.Clone(evs)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func joinEvents(evs []string) string {
	if len(evs) == 1 && evs[0] == "*" {
		return "*"
	}
	return "," + strings.Join(evs, ",") + ","
}

// hookOf is the hook r at now.
func hookOf(r store.HookRow, now time.Time) Hook {
	h := Hook{ID: r.ID, Memory: r.Memory, URL: r.URL, CreatedAt: time.UnixMicro(r.CreatedUS).UTC(),
		Status: StatusActive, ConsecutiveFailures: r.Failures}
	switch {
	case r.PausedUntilUS != 0:
		t := time.UnixMicro(r.PausedUntilUS).UTC()
		h.PausedUntil, h.Status = &t, StatusPaused
		if !now.Before(t) {
			h.Status = StatusProbing
		}
	case r.Failures > 0:
		h.Status = StatusFailing
	}
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

// secretRef names a hook's secret to the KEK: the secret is wrapped like a
// data key, under a fingerprint derived from the hook id.
func secretRef(memory, id string) keys.Ref {
	fp := sha256.Sum256([]byte("lethe/hook-secret/v1\x00" + id))
	return keys.Ref{Memory: memory, Kind: "hook", Fingerprint: hex.EncodeToString(fp[:])}
}

func (r *Registry) wrap(ctx context.Context, memory, id string, secret []byte) ([]byte, error) {
	w, err := r.kek.Wrap(ctx, secretRef(memory, id), secret)
	if err != nil {
		return nil, grains.Wrap(grains.CodeUnavailable, "key-encryption key unavailable", err)
	}
	return w, nil
}

// claims adapts the store's delivery queue to the engine's Store.
type claims struct{ st HookStore }

func (c claims) Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, max int, lim Limits) ([]Delivery, error) {
	rows, err := c.st.ClaimDeliveries(ctx, owner, now.UnixMicro(), now.Add(lease).UnixMicro(), max,
		store.ClaimLimits{PerHook: lim.PerHook, PerMemory: lim.PerMemory, Hooks: lim.Hooks, Memories: lim.Memories})
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = Delivery{ID: r.ID, HookID: r.HookID, URL: r.URL, Secret: r.Secret, OldSecret: r.OldSecret,
			OldUntil: time.UnixMicro(r.OldUntilUS), EventID: r.EventID, Type: r.Type, Memory: r.Memory, Leaf: r.Leaf,
			Index: uint64(r.Seq), Attempts: r.Attempts, CreatedAt: time.UnixMicro(r.CreatedUS)}
	}
	return out, err
}

func (c claims) Delivered(ctx context.Context, held []Held) error {
	return c.st.DeliveryDone(ctx, refs(held))
}

func (c claims) Failed(ctx context.Context, id int64, owner string, f Failure) (Tripped, error) {
	trip := func(hc store.HookCircuit) store.HookCircuit {
		return circuitRow(f.Breaker.Fail(circuitOf(hc), f.At))
	}
	tr, err := c.st.DeliveryFailed(ctx, id, owner, store.DeliveryFailure{Attempts: f.Attempts, NextUS: f.Next.UnixMicro(), Dead: f.Dead,
		Reason: f.Reason, AtUS: f.At.UnixMicro(), Trip: trip, MaxAgeUS: f.MaxAge.Microseconds()})
	return Tripped{Circuit: circuitOf(tr.Circuit), Paused: tr.Paused, Expired: int(tr.Expired)}, err
}

// circuitOf is a hook's circuit as the store holds it; circuitRow its
// inverse.
func circuitOf(c store.HookCircuit) Circuit {
	out := Circuit{Failures: c.Failures, Pause: time.Duration(c.PauseUS) * time.Microsecond}
	if c.PausedUntilUS != 0 {
		out.PausedUntil = time.UnixMicro(c.PausedUntilUS)
	}
	return out
}

func circuitRow(c Circuit) store.HookCircuit {
	out := store.HookCircuit{Failures: c.Failures, PauseUS: c.Pause.Microseconds()}
	if !c.PausedUntil.IsZero() {
		out.PausedUntilUS = c.PausedUntil.UnixMicro()
	}
	return out
}

func (c claims) Release(ctx context.Context, held []Held) error {
	return c.st.ReleaseDeliveries(ctx, refs(held))
}

func refs(held []Held) []store.DeliveryRef {
	out := make([]store.DeliveryRef, len(held))
	for i, h := range held {
		out[i] = store.DeliveryRef{ID: h.ID, Owner: h.Owner}
	}
	return out
}
