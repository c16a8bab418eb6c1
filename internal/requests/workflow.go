package requests

import (
	"context"
	"errors"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/proofs"
)

// Store keeps requests; internal/store implements it.
type Store interface {
	// CreateRequest stores r, its sealing key (wrapped) and evs in one
	// transaction; r.KeyID is set.
	CreateRequest(ctx context.Context, r *Request, key keys.Record, evs []audit.Event) error
	// Request returns request id of memory, or an error with code
	// not_found.
	Request(ctx context.Context, memory, id string) (*Request, error)
	// Requests returns the requests of memory f selects, oldest due first.
	Requests(ctx context.Context, memory string, f Filter) ([]Request, error)
	// StrandedRequests returns, in every memory, up to limit blocked
	// requests whose blocking hold is no longer active, oldest due first,
	// after the request (afterDue, afterID) in that order.
	StrandedRequests(ctx context.Context, afterDue time.Time, afterID string, limit int) ([]Request, error)
	// Transition applies t with evs in one transaction, only if the
	// request is in one of t.From (else code invalid_state, nothing
	// changed). With t.Destroy it destroys the sealing key and the sealed
	// subject.
	Transition(ctx context.Context, t *Transition, evs []audit.Event) error
	// KeysByID returns the data keys with the given ids.
	KeysByID(ctx context.Context, ids []int64) ([]keys.Record, error)
	// ScrubRequests removes the residue of destroyed sealing keys and
	// sealed subjects (an error means residue may persist; the change
	// stands).
	ScrubRequests(ctx context.Context) error
}

// Journal builds audit events and tells the sequencer about committed
// ones; *audit.Journal is one.
type Journal interface {
	Event(ctx context.Context, typ proofs.EventType, memory string, fill func(*proofs.Leaf)) (audit.Event, error)
	Committed()
}

// Workflow runs the lifecycle of erasure requests, except the erasure
// itself, which its caller runs with the Transition of [Workflow.Open]
// (see the root package's ExecuteRequest).
type Workflow struct {
	store   Store
	journal Journal
	kek     keys.Wrapper
	now     func() time.Time
}

// Config configures a Workflow.
type Config struct {
	Store   Store
	Journal Journal
	// KEK wraps the keys sealing the requests' subjects.
	KEK keys.Wrapper
	Now func() time.Time
}

// New returns a Workflow.
func New(cfg Config) *Workflow {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Workflow{store: cfg.Store, journal: cfg.Journal, kek: cfg.KEK, now: cfg.Now}
}

func (w *Workflow) at() time.Time { return w.now().UTC().Truncate(time.Second) }

// Create files a pending request for spec (validated here) and returns it
// with the nonce of its subject commitment, for the caller alone. Its
// request.create event commits with it.
func (w *Workflow) Create(ctx context.Context, spec Spec) (*Request, []byte, error) {
	now := w.at()
	if err := spec.Validate(now); err != nil {
		return nil, nil, err
	}
	r := &Request{ID: NewID(), Memory: spec.Memory, Kind: spec.Kind(), Reason: spec.Reason, Reference: spec.Reference,
		Status: Pending, Due: spec.Due, CreatedAt: now, RequestedBy: audit.Actor(ctx)}
	if r.Kind == Scope {
		r.Scope = spec.Scope
	}
	nonce := proofs.NewNonce()
	r.Commitment = proofs.Commitment(nonce, spec.Subject())
	dk := keys.NewDataKey()
	fp := keys.Fingerprint(dk)
	wrapped, err := w.kek.Wrap(ctx, keys.Ref{Memory: r.Memory, Kind: KeyKind, Fingerprint: fp}, dk)
	if err != nil {
		return nil, nil, grains.Wrap(grains.CodeUnavailable, "wrap the request's key", err)
	}
	r.Sealed = SealSubject(dk, r.Memory, r.ID, spec.Subject(), nonce)
	clear(dk)
	r.SealKey = fp
	key := keys.Record{Memory: r.Memory, Kind: KeyKind, Name: r.ID, Wrapped: wrapped, Fingerprint: fp, CreatedAt: now}
	ev, err := w.journal.Event(ctx, proofs.EventRequestCreate, r.Memory, func(l *proofs.Leaf) {
		l.Request, l.Commitment, l.Reason = r.ID, r.Commitment, string(r.Reason)
		l.KeyFingerprints = []string{fp}
	})
	if err != nil {
		return nil, nil, err
	}
	if err := w.store.CreateRequest(ctx, r, key, []audit.Event{ev}); err != nil {
		return nil, nil, err
	}
	w.journal.Committed()
	r.SetOverdue(now)
	return r, nonce, nil
}

// Get returns request id of memory.
func (w *Workflow) Get(ctx context.Context, memory, id string) (*Request, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	r, err := w.store.Request(ctx, memory, id)
	if err != nil {
		return nil, err
	}
	r.SetOverdue(w.now())
	return r, nil
}

// List returns the requests of memory f selects.
func (w *Workflow) List(ctx context.Context, memory string, f Filter) ([]Request, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	f.Now = w.now()
	rs, err := w.store.Requests(ctx, memory, f)
	for i := range rs {
		rs[i].SetOverdue(f.Now)
	}
	return rs, err
}

// Approve approves request id: the caller's token must not be the one
// that filed it.
func (w *Workflow) Approve(ctx context.Context, memory, id string) (*Request, error) {
	return w.decide(ctx, memory, id, Approve, proofs.EventRequestApprove)
}

// Reject rejects request id and destroys its sealed subject.
func (w *Workflow) Reject(ctx context.Context, memory, id string) (*Request, error) {
	return w.decide(ctx, memory, id, Reject, proofs.EventRequestReject)
}

func (w *Workflow) decide(ctx context.Context, memory, id string, a Action, typ proofs.EventType) (*Request, error) {
	r, err := w.Get(ctx, memory, id)
	if err != nil {
		return nil, err
	}
	actor := audit.Actor(ctx)
	if err := Check(r, a, actor); err != nil {
		return nil, err
	}
	t := NewTransition(r, a, actor, w.at())
	ev, err := w.journal.Event(ctx, typ, memory, func(l *proofs.Leaf) {
		l.Request, l.Commitment, l.Reason = r.ID, r.Commitment, string(r.Reason)
		if a == Reject {
			l.KeyFingerprints = []string{r.SealKey}
		}
	})
	if err != nil {
		return nil, err
	}
	if err := w.store.Transition(ctx, t, []audit.Event{ev}); err != nil {
		return nil, err
	}
	w.journal.Committed()
	if t.Destroy {
		w.Destroyed(ctx, r)
	}
	return w.Get(ctx, memory, id)
}

// destroyer is a KEK that keeps a key of its own per data key (Vault
// transit in dedicated-key mode), to delete once the data key is gone.
type destroyer interface {
	Destroy(ctx context.Context, ref keys.Ref) error
}

// Destroyed finishes the destruction of r's sealing key after the
// transition that destroyed it committed: the store's scrub of its
// residue and, with a dedicated-key KEK, the KEK's own key. It returns the
// scrub's failure, which leaves residue only (the next scrub retries). A
// KEK that keeps no key per data key (Vault's shared mode) refuses the
// Destroy: the wrapped key is already gone, so that is ignored.
func (w *Workflow) Destroyed(ctx context.Context, r *Request) error {
	if d, ok := w.kek.(destroyer); ok {
		d.Destroy(ctx, keys.Ref{Memory: r.Memory, Kind: KeyKind, Fingerprint: r.SealKey})
	}
	return w.store.ScrubRequests(ctx)
}

// Open returns request id, which must be executable by the caller, with
// its subject (user id or scope path) and commitment nonce unsealed, and
// the transition its erasure must apply in its own transaction.
func (w *Workflow) Open(ctx context.Context, memory, id string) (*Request, string, []byte, *Transition, error) {
	r, err := w.Get(ctx, memory, id)
	if err != nil {
		return nil, "", nil, nil, err
	}
	actor := audit.Actor(ctx)
	if err := Check(r, Execute, actor); err != nil {
		return nil, "", nil, nil, err
	}
	ks, err := w.store.KeysByID(ctx, []int64{r.KeyID})
	if err != nil {
		return nil, "", nil, nil, err
	}
	if len(ks) != 1 || !ks[0].Live() || len(r.Sealed) == 0 {
		// Only an erasure of the whole memory destroys it before the
		// request is final.
		return nil, "", nil, nil, &grains.Error{Code: grains.CodeInvalidState, Field: "status", Message: "the request's sealed subject was erased with its memory",
			Hint: "the memory was erased as a whole; reject the request"}
	}
	dk, err := w.kek.Unwrap(ctx, keys.Ref{Memory: memory, Kind: KeyKind, Fingerprint: ks[0].Fingerprint}, ks[0].Wrapped)
	if err != nil {
		return nil, "", nil, nil, grains.Wrap(grains.CodeUnavailable, "unwrap the request's key", err)
	}
	subject, nonce, err := OpenSubject(dk, memory, id, r.Sealed)
	clear(dk)
	if err != nil {
		return nil, "", nil, nil, grains.Wrap(grains.CodeInternal, "open the request's sealed subject", err)
	}
	return r, subject, nonce, NewTransition(r, Execute, actor, w.at()), nil
}

// Block records that a legal hold refused r's execution: r becomes
// blocked, with an erasure.refused event naming r and the hold. Every
// refusal is audited, a repeated one too.
func (w *Workflow) Block(ctx context.Context, r *Request, hold string) error {
	t := &Transition{Memory: r.Memory, ID: r.ID, From: []Status{Approved, Blocked}, To: Blocked, Actor: audit.Actor(ctx), At: w.at(), Hold: hold}
	ev, err := w.journal.Event(ctx, proofs.EventErasureRefused, r.Memory, func(l *proofs.Leaf) {
		l.Request, l.Commitment, l.Hold, l.Reason = r.ID, r.Commitment, hold, "held"
	})
	if err != nil {
		return err
	}
	if err := w.store.Transition(ctx, t, []audit.Event{ev}); err != nil {
		return err
	}
	w.journal.Committed()
	return nil
}

// Blocked returns the blocked requests of memory.
func (w *Workflow) Blocked(ctx context.Context, memory string) ([]Request, error) {
	return w.List(ctx, memory, Filter{Status: Blocked})
}

// Stranded returns up to MaxList blocked requests, of every memory, whose
// blocking hold is no longer active, oldest due first, after after (nil
// for the first): those a release left blocked when its process ended
// before it ran them.
func (w *Workflow) Stranded(ctx context.Context, after *Request) ([]Request, error) {
	var due time.Time
	var id string
	if after != nil {
		due, id = after.Due, after.ID
	}
	return w.store.StrandedRequests(ctx, due, id, MaxList)
}

// ErrNotExecuted is the cause of a certificate asked of a request that
// did not run.
var ErrNotExecuted = errors.New("request not executed")
