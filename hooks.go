package lethe

import (
	"context"
	"time"

	"github.com/lethe-io/lethe/internal/hooks"
	"github.com/lethe-io/lethe/proofs"
)

// Webhooks: the public face of package hooks, whose Registry manages the
// hooks and whose Engine delivers them.

// HooksConfig configures webhooks. The zero value stores hooks and queues
// their deliveries, but sends nothing from this DB: set Deliver in the
// processes that send (the server does). Several DBs over one database may
// deliver at once. Its fields:
//
//   - Deliver: run a delivery engine in this DB.
//   - AllowPrivate: let hook URLs name loopback, private, link-local and
//     other internal addresses (development and tests only).
//   - Timeout: one delivery attempt's bound (default 10s).
//   - MaxAge, MaxAttempts: how long and how often a delivery is retried
//     before it is dead-lettered (defaults 24h and 30); MaxAge runs while
//     its hook is paused too.
//   - PauseAfter, Pause, MaxPause: a hook's circuit breaker. PauseAfter
//     consecutive failed attempts of a hook (default 10), of any of its
//     deliveries, pause it: none of its deliveries is attempted for Pause
//     (default 1m); then one is tried alone, which resumes the hook if
//     accepted and pauses it again for twice as long if not, at most
//     MaxPause (default 15m). The pause is in the database, shared by
//     every DB over it; Redeliver ends it.
//   - BaseDelay, MaxDelay: the exponential backoff with jitter between
//     attempts (defaults 1s and 15m).
//   - Poll: how often the engine looks for due deliveries (default 500ms).
//   - Batch: the most deliveries one claim takes (default 32).
//   - Workers, PerHook, PerMemory: the attempts under way at once, in
//     all, to one hook and to one memory's hooks together (defaults 64, 4
//     and 8), so that slow receivers of one memory never hold up the
//     others' deliveries.
type HooksConfig = hooks.Settings

// Hook is a webhook of a memory: lethe POSTs the audit events of the
// listed types to URL, signed per the Standard Webhooks specification.
// Its fields: ID, Memory, URL, Events, CreatedAt, after a rotation
// PreviousSecretUntil (when the previous secret stops signing), and the
// state of its deliveries: Status (HookActive, HookFailing, HookPaused or
// HookProbing), ConsecutiveFailures, and while paused or probing
// PausedUntil (when the pause ends, or ended).
type Hook = hooks.Hook

// The states of a hook's deliveries (Hook.Status; see
// HooksConfig.PauseAfter): HookActive, they go out and the last attempt,
// if any, was accepted; HookFailing, they go out but the last attempts
// failed; HookPaused, none is attempted before PausedUntil; HookProbing,
// the pause has ended and the next due delivery is tried alone, resuming
// the hook if accepted or pausing it again.
const (
	HookActive  = hooks.StatusActive
	HookFailing = hooks.StatusFailing
	HookPaused  = hooks.StatusPaused
	HookProbing = hooks.StatusProbing
)

// HookSpec describes a hook to create: Memory, URL, and Events (audit
// event types of HookEventTypes, or "*" for every type).
type HookSpec = hooks.Spec

// HookEventTypes returns the audit event types a hook can receive: those
// of one memory, every type but the key-encryption key's kek.rotate and
// kek.trim.
func HookEventTypes() []proofs.EventType { return hooks.EventTypes() }

// HookSecret is a Hook with its signing Secret ("whsec_" and base64), as
// AddHook and RotateHookSecret return it: the only times it is shown.
type HookSecret = hooks.WithSecret

// HookDelivery is a delivery not yet accepted, pending or dead-lettered:
// ID, EventID, State, Attempts, LastError (why the last attempt failed:
// "status 503", "timeout", "refused address"...), NextAt and CreatedAt.
type HookDelivery = hooks.Undelivered

// HookStats describes the delivery queue (shared by every replica):
// Pending, Dead, OldestPending (the age of the oldest pending delivery),
// Paused (the hooks paused or probing); and this DB's engine counters:
// Delivered, Failed, DeadLettered, Pauses (failures that paused a hook,
// or paused it again).
type HookStats = hooks.QueueStats

// MaxHooksPerMemory bounds the hooks of one memory.
const MaxHooksPerMemory = hooks.MaxPerMemory

// AddHook creates a hook and returns it with its secret. The URL must be
// http or https and, unless HooksConfig.AllowPrivate, must not resolve to
// an internal address (code url_refused).
func (db *DB) AddHook(ctx context.Context, spec HookSpec) (*HookSecret, error) {
	var err error
	if spec.Memory, err = memoryName(spec.Memory); err != nil {
		return nil, err
	}
	return db.hooks.Add(ctx, spec)
}

// Hooks returns the hooks of memory, oldest first, without secrets.
func (db *DB) Hooks(ctx context.Context, memory string) ([]Hook, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	return db.hooks.List(ctx, memory)
}

// RemoveHook deletes hook id of memory and its undelivered deliveries.
func (db *DB) RemoveHook(ctx context.Context, memory, id string) error {
	memory, err := memoryName(memory)
	if err != nil {
		return err
	}
	return db.hooks.Remove(ctx, memory, id)
}

// RotateHookSecret gives hook id a new secret and returns it. The previous
// secret keeps signing, beside the new one, for overlap (default 24h; at
// most 30 days), so receivers can switch without losing a delivery.
func (db *DB) RotateHookSecret(ctx context.Context, memory, id string, overlap time.Duration) (*HookSecret, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	return db.hooks.Rotate(ctx, memory, id, overlap)
}

// HookDeliveries returns up to 1000 undelivered deliveries of hook id, in
// state "pending" or "dead" ("" for both), oldest first.
func (db *DB) HookDeliveries(ctx context.Context, memory, id, state string) ([]HookDelivery, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	return db.hooks.Deliveries(ctx, memory, id, state)
}

// Redeliver makes dead-lettered deliveries of hook id pending again, due
// now, with a fresh retry budget: delivery, or all of them when delivery
// is 0. It returns how many. It ends the hook's pause, if it is paused
// (see HooksConfig.PauseAfter), even when nothing is dead, so that its
// next due delivery is tried now, alone; not when delivery names no dead
// delivery (not_found).
func (db *DB) Redeliver(ctx context.Context, memory, id string, delivery int64) (int64, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return 0, err
	}
	return db.hooks.Redeliver(ctx, memory, id, delivery)
}

// HookStats returns the delivery queue's state and this DB's counters.
func (db *DB) HookStats(ctx context.Context) (HookStats, error) { return db.hooks.Stats(ctx) }

// DeliverHooks runs one delivery step now (claims due deliveries, sends
// them) and returns how many it claimed; it needs HooksConfig.Deliver.
// The engine runs on its own; this is for tests and tools.
func (db *DB) DeliverHooks(ctx context.Context) (int, error) { return db.hooks.Step(ctx) }
