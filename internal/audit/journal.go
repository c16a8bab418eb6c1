package audit

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/proofs"
)

// Event is an audit event on its way into the outbox: its leaf is built by
// a Journal and committed in the same transaction as the state change it
// records, so a crash never keeps one without the other.
type Event struct {
	ID     string // the leaf's event id
	Memory string
	Type   string
	Leaf   []byte
	// Hashes is, for an event whose leaf carries the count and digest of
	// more than MaxLeafHashes grain hashes instead of the hashes, the full
	// list: the store keeps it so that a history export can show a
	// verifier which hashes the digest covers. Nil otherwise.
	Hashes []string
}

// Committed is an event the outbox holds: its leaf and, once the
// Sequencer numbered it, its leaf index.
type Committed struct {
	Leaf      []byte
	Index     uint64
	Sequenced bool
}

// Events is the part of the outbox a Journal writes and reads: the store
// implements it.
type Events interface {
	// AppendEvents commits events alone, created at now (Unix
	// microseconds), for events that record no other state change.
	AppendEvents(ctx context.Context, now int64, evs []Event) error
	// CommittedEvent returns the committed event id, or an error with code
	// not_found.
	CommittedEvent(ctx context.Context, id string) (*Committed, error)
}

// Journal records audited changes: it builds the events a state change
// commits with, commits events that stand alone, and turns committed events
// into receipts once a signed checkpoint covers them. Leaves never carry
// personal data: only hashes, counts, digests, fingerprints and
// commitments.
type Journal struct {
	events Events
	seq    *Sequencer
	signer *proofs.Signer
	now    func() time.Time
	wait   time.Duration
}

// JournalConfig configures a Journal.
type JournalConfig struct {
	Events    Events
	Sequencer *Sequencer
	Signer    *proofs.Signer
	// Now is the clock of event times (default time.Now).
	Now func() time.Time
	// ProofWait bounds how long Receipt waits for a checkpoint.
	ProofWait time.Duration
}

// NewJournal returns a Journal.
func NewJournal(cfg JournalConfig) *Journal {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Journal{events: cfg.Events, seq: cfg.Sequencer, signer: cfg.Signer, now: cfg.Now, wait: cfg.ProofWait}
}

type actorKey struct{}

// WithActor returns a context whose events name actor (an API token id,
// never a person) as their cause.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// Actor returns the actor of ctx, or "local".
func Actor(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return "local"
}

// Now returns the journal's clock reading in Unix microseconds: the
// creation time of events committed now.
func (j *Journal) Now() int64 { return j.now().UnixMicro() }

// Event builds an event of type typ in memory; fill adds the event-specific
// fields.
func (j *Journal) Event(ctx context.Context, typ proofs.EventType, memory string, fill func(*proofs.Leaf)) (Event, error) {
	l := &proofs.Leaf{V: proofs.LeafVersion, ID: proofs.NewEventID(), Type: typ, Memory: memory,
		Time: j.now().UTC().Truncate(time.Second), Actor: Actor(ctx)}
	if fill != nil {
		fill(l)
	}
	b, err := l.Marshal()
	if err != nil {
		return Event{}, grains.Wrap(grains.CodeInternal, "build audit event", err)
	}
	return Event{ID: l.ID, Memory: memory, Type: string(typ), Leaf: b}, nil
}

// Bulk builds an event about many grains of a policy run: their hashes,
// or their count and digest (a count of 0 when there are none).
func (j *Journal) Bulk(ctx context.Context, typ proofs.EventType, memory, policy, reason string, hashes []string) (Event, error) {
	ev, err := j.Event(ctx, typ, memory, func(l *proofs.Leaf) {
		SetHashes(l, hashes)
		if len(hashes) == 0 {
			var zero uint64
			l.Count = &zero
		}
		l.Policy, l.Reason = policy, reason
	})
	KeepHashes(&ev, hashes)
	return ev, err
}

// Refusals builds one erasure.refused event per hold (by id) that kept
// grains (by hash) from a policy's destructive step, in hold id order.
func (j *Journal) Refusals(ctx context.Context, memory, policy string, held map[string][]string) ([]Event, error) {
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var evs []Event
	for _, id := range ids {
		ev, err := j.Event(ctx, proofs.EventErasureRefused, memory, func(l *proofs.Leaf) {
			SetHashes(l, held[id])
			l.Policy, l.Hold, l.Reason = policy, id, "held"
		})
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Append commits events that record no other state change, and tells the
// sequencer.
func (j *Journal) Append(ctx context.Context, evs ...Event) error {
	if err := j.events.AppendEvents(ctx, j.Now(), evs); err != nil {
		return err
	}
	j.seq.Kick()
	return nil
}

// Committed tells the sequencer that events were committed with a state
// change, so it moves them into the log soon.
func (j *Journal) Committed() { j.seq.Kick() }

// MaxLeafKeyCreates is the most key fingerprints a key.create leaf lists.
const MaxLeafKeyCreates = 256

// KeyCreates builds the key.create events of keys created together in
// memory (by fingerprint, in creation order): one per MaxLeafKeyCreates
// keys, so that a batch bringing a thousand new users appends four leaves,
// not a thousand.
func (j *Journal) KeyCreates(ctx context.Context, memory string, fingerprints []string) ([]Event, error) {
	var evs []Event
	for start := 0; start < len(fingerprints); start += MaxLeafKeyCreates {
		part := fingerprints[start:min(start+MaxLeafKeyCreates, len(fingerprints))]
		ev, err := j.Event(ctx, proofs.EventKeyCreate, memory, func(l *proofs.Leaf) { l.KeyFingerprints = part })
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// MaxLeafHashes is the most grain hashes a leaf lists; larger events carry
// a count and a digest of the sorted list instead.
const MaxLeafHashes = 256

// SetHashes sets the grains an event concerns: their hashes, or past
// MaxLeafHashes their count and digest.
func SetHashes(l *proofs.Leaf, hashes []string) {
	if len(hashes) <= MaxLeafHashes {
		l.Hashes = hashes
		return
	}
	n := uint64(len(hashes))
	l.Count, l.Digest = &n, proofs.HashesDigest(hashes)
}

// KeepHashes records on ev the hashes SetHashes gave its leaf, when the
// leaf carries their digest instead (more than MaxLeafHashes): the store
// keeps them with the event (see Event.Hashes).
func KeepHashes(ev *Event, hashes []string) {
	if len(hashes) > MaxLeafHashes {
		ev.Hashes = hashes
	}
}

// Receipt is what an audited destructive call returns: the event, and its
// proof once a signed checkpoint covers it (package lethe's Receipt).
type Receipt struct {
	// EventID names the audit event; "lethe audit proof --event ID" fetches
	// its proof later if Pending.
	EventID string `json:"event_id"`
	// SubjectNonce (hex) opens the subject commitment in the leaf, for the
	// caller alone: it is stored nowhere.
	SubjectNonce string `json:"subject_nonce,omitempty"`
	// Proof is the signed proof, or nil while Pending.
	Proof *proofs.Proof `json:"proof,omitempty"`
	// TlogProof is Proof as a c2sp.org/tlog-proof@v1 text file (see
	// proofs.Proof.MarshalTlogProof), which "lethe verify" also reads.
	TlogProof string `json:"tlog_proof,omitempty"`
	// Pending is true when no checkpoint covered the event within the
	// proof wait.
	Pending bool `json:"pending"`
	// Leaf and LeafSignature are the signed receipt: the exact leaf and the
	// log key's signature over it, available even while Pending.
	Leaf          []byte `json:"leaf"`
	LeafSignature []byte `json:"leaf_signature"`
}

// Receipt waits up to the configured proof wait for a checkpoint to cover
// the committed event id with leaf, and returns its receipt: with its
// proof, or Pending.
func (j *Journal) Receipt(ctx context.Context, id string, leaf []byte) (*Receipt, error) {
	r := &Receipt{EventID: id, Leaf: leaf, LeafSignature: j.signer.SignLeaf(leaf)}
	p, err := j.waitProof(ctx, id, leaf, r.LeafSignature)
	switch {
	case err == nil:
		r.Proof = p
		b, err := p.MarshalTlogProof()
		if err != nil {
			return nil, grains.Wrap(grains.CodeInternal, "encode the proof as a tlog-proof", err)
		}
		r.TlogProof = string(b)
	case grains.ErrorCode(err) == grains.CodePending:
		r.Pending = true
	default:
		return nil, err
	}
	return r, nil
}

// waitProof returns the proof of event id, whose leaf is leaf (signed sig),
// waiting up to the proof wait for a signed checkpoint to cover it; past
// that it fails with code pending. Reads use ctx; only the waiting is
// bounded.
func (j *Journal) waitProof(ctx context.Context, id string, leaf, sig []byte) (*proofs.Proof, error) {
	wctx, cancel := context.WithTimeout(ctx, j.wait)
	defer cancel()
	// The event is committed: every step from mark on sees it, and the
	// kick after the mark begins one. Usually that step appends it, and
	// the sequencer says where (Appended): the proof is built without
	// reading the outbox (ProveAppended checks the leaf against the signed
	// root, so a wrong index or leaf fails rather than proves). Otherwise
	// (another replica appended it, or a step failed) the outbox says, pass
	// by pass.
	// A wait that ends with the event still pending marks and kicks again;
	// a kick per pass would begin a step nobody needs once the proof is
	// there.
	mark := j.seq.StepMark()
	j.seq.Kick()
	kicked := true
	if j.seq.WaitStep(wctx, mark) == nil {
		if index, cp, ok := j.seq.Appended(id); ok {
			p, err := j.seq.ProveAppended(ctx, index, leaf, sig, cp)
			return p, DomainError(err)
		}
		kicked = false // the step it kicked has ended
	}
	for {
		p, c, err := j.proof(ctx, id, nil)
		if grains.ErrorCode(err) != grains.CodePending || wctx.Err() != nil {
			return p, err
		}
		if !kicked {
			mark = j.seq.StepMark()
			j.seq.Kick()
		}
		kicked = false
		if c.Sequenced {
			// The step that numbered it signs a checkpoint over it.
			if err := j.seq.WaitCovered(wctx, c.Index); err != nil {
				return nil, pendingError(id)
			}
			continue
		}
		// Not numbered yet: the step numbered mark numbers it (and signs a
		// checkpoint over it).
		if err := j.seq.WaitStep(wctx, mark); err != nil {
			return nil, pendingError(id)
		}
	}
}

func pendingError(id string) error {
	return &grains.Error{Code: grains.CodePending, Message: "event " + id + " is committed but not yet covered by a signed checkpoint",
		Hint: "fetch its proof later with 'lethe audit proof --event " + id + "'"}
}

// Proof returns the proof of event id against the latest signed
// checkpoint, or an error with code pending if none covers it yet. An id
// that is not 32 lowercase hex digits is invalid_argument with field
// event, before any lookup, so that no answer quotes it.
func (j *Journal) Proof(ctx context.Context, id string) (*proofs.Proof, error) {
	return j.ProofIf(ctx, id, nil)
}

// ProofIf is Proof for a reader that may see only the leaves visible
// accepts (nil: every leaf). An event whose leaf it refuses fails as an id
// that names no event does (grains.NoAuditEvent), pending or not.
func (j *Journal) ProofIf(ctx context.Context, id string, visible func(leaf []byte) bool) (*proofs.Proof, error) {
	if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "event", "not an event id (32 lowercase hex digits)")
	}
	p, _, err := j.proof(ctx, id, visible)
	return p, err
}

// proof is ProofIf, also returning the committed event it read (nil when
// the read failed or visible refused its leaf).
func (j *Journal) proof(ctx context.Context, id string, visible func(leaf []byte) bool) (*proofs.Proof, *Committed, error) {
	c, err := j.events.CommittedEvent(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if visible != nil && !visible(c.Leaf) {
		return nil, nil, grains.NoAuditEvent(id)
	}
	if !c.Sequenced {
		return nil, c, pendingError(id)
	}
	p, err := j.seq.Prove(ctx, c.Index, c.Leaf)
	if errors.Is(err, ErrPending) {
		return nil, c, pendingError(id)
	}
	return p, c, DomainError(err)
}

// DomainError maps the errors of a Log to domain codes: invalid_argument
// (naming the argument at fault when the Log does), not_found (not
// integrated yet) and unavailable; a domain error passes as it is.
func DomainError(err error) error {
	var ae *argError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae):
		return grains.FieldError(grains.CodeInvalidArgument, ae.field, ae.msg)
	case errors.Is(err, ErrInvalidArgument):
		return grains.Wrap(grains.CodeInvalidArgument, "invalid audit log index or size", err)
	case errors.Is(err, ErrNotIntegrated):
		return grains.Wrap(grains.CodeNotFound, "not in the audit log yet", err)
	}
	var ge *grains.Error
	if errors.As(err, &ge) {
		return err
	}
	return grains.Wrap(grains.CodeUnavailable, "audit log unavailable", err)
}
