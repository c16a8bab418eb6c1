package erasure

import (
	"context"
	"strings"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

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

// SetHold places a legal hold on a scope prefix or a user of spec.Memory
// (validated), with its hold.set event.
func (e *Eraser) SetHold(ctx context.Context, spec HoldSpec) (*Hold, error) {
	var err error
	spec.UserID = grains.NormalizeText(spec.UserID)
	if (spec.Scope == "") == (spec.UserID == "") {
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Message: "a hold names exactly one of a scope or a user"}
	}
	row := store.HoldRow{ID: store.NewHoldID(), Memory: spec.Memory, CreatedUS: e.cfg.Now().UnixMicro()}
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
		if err := e.cfg.Keys.Revalidate(ctx, spec.Memory); err != nil {
			return nil, err
		}
		if _, err := e.cfg.Keys.WriteChain(ctx, spec.Memory, "", ""); err != nil {
			return nil, err
		}
		ref, err := e.cfg.Keys.UserRef(ctx, spec.Memory, spec.UserID)
		if err != nil {
			return nil, err
		}
		row.Kind, row.UserRef = grains.HoldUser, ref
	}
	ev, err := e.cfg.Journal.Event(ctx, proofs.EventHoldSet, spec.Memory, func(l *proofs.Leaf) { l.Hold = row.ID })
	if err != nil {
		return nil, err
	}
	if err := e.cfg.Store.SetHold(ctx, row, []store.Event{ev}); err != nil {
		return nil, err
	}
	e.cfg.Journal.Committed()
	return holdOf(row), nil
}

// ReleaseHold releases an active hold of memory (validated), with its
// hold.release event; then the erasure requests of memory that a hold
// blocked run, under ctx's actor (see RunBlocked).
func (e *Eraser) ReleaseHold(ctx context.Context, memory, id string) error {
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return grains.FieldError(grains.CodeInvalidArgument, "id", "not a hold id")
	}
	ev, err := e.cfg.Journal.Event(ctx, proofs.EventHoldRelease, memory, func(l *proofs.Leaf) { l.Hold = id })
	if err != nil {
		return err
	}
	if err := e.cfg.Store.ReleaseHold(ctx, memory, id, e.cfg.Now().UnixMicro(), []store.Event{ev}); err != nil {
		return err
	}
	e.cfg.Journal.Committed()
	e.RunBlocked(ctx, memory)
	return nil
}

// Holds lists the active holds of memory (validated).
func (e *Eraser) Holds(ctx context.Context, memory string) ([]Hold, error) {
	rows, err := e.cfg.Store.Holds(ctx, memory)
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
