// Package requests is the erasure request workflow a DPO portal drives:
// file a request for a user or a scope, see what it would erase, have a
// second token approve it (four eyes), execute it, and hand out a
// certificate of the erasure.
//
// # Lifecycle
//
//	pending --approve (another token)--> approved --execute--> executed
//	   |                                    |   ^          |
//	   |                                    |   |          v
//	   +--------------reject----------------+   +--held-- blocked --execute/hold released--> executed
//	                                                          |
//	                                                       reject
//
// rejected and executed are final. Every transition commits with its audit
// event in one transaction: request.create, request.approve,
// request.reject, erasure.refused naming the request (blocked), and the
// key.erase naming the request (executed).
//
// # The subject
//
// A request stores a subject commitment (proofs.Commitment), never the
// user id. The id is needed until execution, so it is sealed
// (XChaCha20-Poly1305) with the commitment's nonce under a data key of its
// own, stored wrapped by the KEK in the data key table with kind
// [KeyKind]. Execution and rejection destroy that key and the sealed bytes
// in the transaction of the transition, and the store scrubs their residue
// as it does for erased keys: afterwards the id exists nowhere in lethe.
package requests

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
)

// Status is where a request is in its lifecycle.
type Status string

// The statuses.
const (
	Pending  Status = "pending"  // filed, waiting for a second token's approval
	Approved Status = "approved" // approved, not yet executed
	Blocked  Status = "blocked"  // execution refused under a legal hold; runs when it is released
	Executed Status = "executed" // the erasure ran (final)
	Rejected Status = "rejected" // rejected before execution (final)
)

// Statuses lists every status.
var Statuses = []Status{Pending, Approved, Blocked, Executed, Rejected}

// Final reports whether s admits no further transition.
func (s Status) Final() bool { return s == Executed || s == Rejected }

// Reason is why a request was filed: a code, never free text.
type Reason string

// The reasons.
const (
	DataSubjectRequest Reason = "data_subject_request" // the data subject asked (Art. 17(1))
	RetentionExpired   Reason = "retention_expired"    // the retention period ended (Art. 5(1)(e), 17(1)(a))
	LegalObligation    Reason = "legal_obligation"     // a legal obligation requires it (Art. 17(1)(e))
	ConsentWithdrawn   Reason = "consent_withdrawn"    // consent withdrawn (Art. 17(1)(b))
	Other              Reason = "other"
)

// Reasons lists every reason.
var Reasons = []Reason{DataSubjectRequest, RetentionExpired, LegalObligation, ConsentWithdrawn, Other}

// Kind is what a request erases.
type Kind string

// The kinds.
const (
	User  Kind = "user"  // one user's key: every grain of the user in the memory
	Scope Kind = "scope" // one scope path's key: every grain at or below it
)

// KeyKind is the data key kind of the key that seals a request's subject.
const KeyKind keys.Kind = "request"

// DefaultDue is the default time to the due date: one month, GDPR Art.
// 12(3) (extendable by two further months when necessary).
const DefaultDue = 30 * 24 * time.Hour

// MaxDue bounds the due date: Art. 12(3)'s month and its two-month
// extension.
const MaxDue = 90 * 24 * time.Hour

// MaxReference bounds a reference's length.
const MaxReference = 128

// referencePattern is what a reference may be: a ticket id of ASCII
// letters, digits and . _ : / # -, starting with a letter or digit. No
// spaces and no @, so a name or an e-mail address does not fit.
var referencePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/#-]{0,127}$`)

// idPattern is a request id: 32 lowercase hex digits.
var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Request is an erasure request as stored and shown. It never holds the
// subject's id.
type Request struct {
	ID     string `json:"id"`
	Memory string `json:"memory"`
	Kind   Kind   `json:"kind"`
	// Scope is the scope path of a scope request (operational, not
	// personal); "" for a user request.
	Scope string `json:"scope,omitempty"`
	// Commitment is the subject commitment: proofs.Commitment of the
	// nonce returned at creation and the user id or scope path.
	Commitment string    `json:"commitment"`
	Reason     Reason    `json:"reason"`
	Reference  string    `json:"reference"`
	Status     Status    `json:"status"`
	Due        time.Time `json:"due"`
	// Overdue is true when the request is not final and Due has passed.
	Overdue bool `json:"overdue"`

	CreatedAt   time.Time  `json:"created_at"`
	RequestedBy string     `json:"requested_by"`
	ApprovedAt  *time.Time `json:"approved_at,omitempty"`
	ApprovedBy  string     `json:"approved_by,omitempty"`
	RejectedAt  *time.Time `json:"rejected_at,omitempty"`
	RejectedBy  string     `json:"rejected_by,omitempty"`
	ExecutedAt  *time.Time `json:"executed_at,omitempty"`
	ExecutedBy  string     `json:"executed_by,omitempty"`
	// Hold is the legal hold that blocked the request's execution.
	Hold string `json:"hold,omitempty"`

	// The erasure, once executed: grains made unreadable (per scope), the
	// destroyed keys, the KEK version, and the key.erase event.
	Count           int64            `json:"count,omitempty"`
	Scopes          map[string]int64 `json:"scopes,omitempty"`
	KeyFingerprints []string         `json:"key_fingerprints,omitempty"`
	KEKVersion      uint64           `json:"kek_version,omitempty"`
	EventID         string           `json:"event_id,omitempty"`

	// SealKey is the fingerprint of the key sealing the subject (destroyed
	// at execution or rejection).
	SealKey string `json:"seal_key_fingerprint"`
	// KeyID and Sealed are the store's: the sealing key's row and the
	// sealed subject (nil once destroyed).
	KeyID  int64  `json:"-"`
	Sealed []byte `json:"-"`
}

// SetOverdue sets Overdue as of now.
func (r *Request) SetOverdue(now time.Time) {
	r.Overdue = !r.Status.Final() && now.After(r.Due)
}

// Spec is a request to file: exactly one of UserID or Scope.
type Spec struct {
	Memory    string
	UserID    string
	Scope     string
	Reason    Reason
	Reference string
	// Due is when the request must be answered (zero: DefaultDue from now).
	Due time.Time
}

// Validate normalizes s (user id, scope path, due date) as of now and
// checks it.
func (s *Spec) Validate(now time.Time) error {
	if err := grains.ValidateMemory(s.Memory); err != nil {
		return err
	}
	s.UserID = grains.NormalizeText(s.UserID)
	switch {
	case s.UserID != "" && s.Scope != "":
		return grains.Errorf(grains.CodeInvalidArgument, "a request names exactly one of a user or a scope")
	case s.UserID != "":
		if err := grains.ValidateUserID(s.UserID); err != nil {
			return err
		}
	case strings.Trim(s.Scope, "/") != "":
		// A malformed path is refused, never normalised.
		p, err := grains.CleanScope(s.Scope)
		if err != nil {
			return err
		}
		s.Scope = p
	default:
		return &grains.Error{Code: grains.CodeEmptySelector, Field: "user_id", Message: "name the user or the scope to erase",
			Hint: "an empty selector never means everything"}
	}
	if !slices.Contains(Reasons, s.Reason) {
		return &grains.Error{Code: grains.CodeInvalidArgument, Field: "reason", Message: "not a reason code",
			Hint: "one of data_subject_request, retention_expired, legal_obligation, consent_withdrawn, other"}
	}
	if !referencePattern.MatchString(s.Reference) {
		return &grains.Error{Code: grains.CodeInvalidArgument, Field: "reference",
			Message: "must be a ticket id: 1 to 128 ASCII letters, digits and . _ : / # -, starting with a letter or digit",
			Hint:    "the portal's ticket id, never personal data (no names, no e-mail addresses)"}
	}
	if s.Due.IsZero() {
		s.Due = now.Add(DefaultDue)
	}
	s.Due = s.Due.UTC().Truncate(time.Second)
	if !s.Due.After(now) || s.Due.After(now.Add(MaxDue)) {
		return &grains.Error{Code: grains.CodeInvalidArgument, Field: "due", Message: "must be in the future and at most 90 days away",
			Hint: "GDPR Art. 12(3): one month, extendable by two further months; leave it out for 30 days"}
	}
	return nil
}

// Kind returns the kind of request s files.
func (s *Spec) Kind() Kind {
	if s.UserID != "" {
		return User
	}
	return Scope
}

// Subject returns the user id or the scope path.
func (s *Spec) Subject() string {
	if s.UserID != "" {
		return s.UserID
	}
	return s.Scope
}

// NewID returns a random request id.
func NewID() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// CheckID fails with invalid_argument unless id is a request id.
func CheckID(id string) error {
	if !idPattern.MatchString(id) {
		return grains.FieldError(grains.CodeInvalidArgument, "id", "not an erasure request id (32 lowercase hex digits)")
	}
	return nil
}

// Action is a transition a caller asks for.
type Action string

// The actions.
const (
	Approve Action = "approve"
	Reject  Action = "reject"
	Execute Action = "execute"
)

// From returns the statuses a request may be in for a.
func (a Action) From() []Status {
	switch a {
	case Approve:
		return []Status{Pending}
	case Reject:
		return []Status{Pending, Approved, Blocked}
	case Execute:
		return []Status{Approved, Blocked}
	}
	return nil
}

// Check says whether actor (a token id, or "local") may do a to r: the
// status must allow it (else invalid_state), and the requester may not
// approve (four_eyes).
func Check(r *Request, a Action, actor string) error {
	if !slices.Contains(a.From(), r.Status) {
		hint := ""
		switch {
		case a == Execute && r.Status == Pending:
			hint = "a second dpo token must approve it first"
		case r.Status.Final():
			hint = "the request is " + string(r.Status) + "; file a new one if needed"
		}
		return &grains.Error{Code: grains.CodeInvalidState, Field: "status",
			Message: "cannot " + string(a) + " a request that is " + string(r.Status), Hint: hint}
	}
	if a == Approve && actor == r.RequestedBy {
		return &grains.Error{Code: grains.CodeFourEyes, Message: "the token that filed the request cannot approve it",
			Hint: "approval needs a second dpo token (four eyes)"}
	}
	return nil
}

// Filter selects requests to list.
type Filter struct {
	// Status keeps requests in this status ("" for all).
	Status Status
	// DueBefore keeps requests due before it (zero for all).
	DueBefore time.Time
	// Overdue keeps requests not final and past due as of Now.
	Overdue bool
	Now     time.Time
	// Limit bounds the answer (default and maximum 1,000).
	Limit int
}

// MaxList bounds a list.
const MaxList = 1000

// Validate checks f.
func (f *Filter) Validate() error {
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		return &grains.Error{Code: grains.CodeInvalidArgument, Field: "status", Message: "not a request status",
			Hint: "one of pending, approved, blocked, executed, rejected"}
	}
	if f.Limit <= 0 || f.Limit > MaxList {
		f.Limit = MaxList
	}
	return nil
}

// Transition is a status change as the store applies it: conditional on
// the request being in one of From, so that of two replicas racing, one
// wins and the other fails with invalid_state.
type Transition struct {
	Memory string
	ID     string
	From   []Status
	To     Status
	Actor  string
	At     time.Time
	// Hold is the hold that blocked the request (To is Blocked).
	Hold string
	// Destroy destroys the sealing key and the sealed subject (To is
	// Executed or Rejected).
	Destroy bool
	// The erasure's result (To is Executed), set by the store inside the
	// erasure's transaction.
	Count           int64
	Scopes          map[string]int64
	KeyFingerprints []string
	KEKVersion      uint64
	EventID         string
}

// NewTransition returns the transition a does to r.
func NewTransition(r *Request, a Action, actor string, at time.Time) *Transition {
	t := &Transition{Memory: r.Memory, ID: r.ID, From: a.From(), Actor: actor, At: at}
	switch a {
	case Approve:
		t.To = Approved
	case Reject:
		t.To, t.Destroy = Rejected, true
	case Execute:
		t.To, t.Destroy = Executed, true
	}
	return t
}

// SealAD is the associated data binding a sealed subject to its memory
// and request.
func SealAD(memory, id string) []byte {
	return []byte("lethe/erasure-request/v1\x00" + memory + "\x00" + id)
}

// SealSubject seals subject and nonce under dk.
func SealSubject(dk []byte, memory, id, subject string, nonce []byte) []byte {
	pt := append([]byte(hex.EncodeToString(nonce)+"\x00"), subject...)
	return keys.Seal(dk, SealAD(memory, id), pt)
}

// OpenSubject opens what SealSubject sealed.
func OpenSubject(dk []byte, memory, id string, sealed []byte) (subject string, nonce []byte, err error) {
	pt, err := keys.Open(dk, SealAD(memory, id), sealed)
	if err != nil {
		return "", nil, err
	}
	n, s, ok := strings.Cut(string(pt), "\x00")
	if !ok {
		return "", nil, keys.ErrOpen
	}
	if nonce, err = hex.DecodeString(n); err != nil {
		return "", nil, keys.ErrOpen
	}
	return s, nonce, nil
}

// Preview is what a request would erase, computed without changing
// anything and without an audit event.
type Preview struct {
	// Count is the number of grains the erasure would make unreadable.
	Count int64 `json:"count"`
	// Scopes counts them per scope path.
	Scopes map[string]int64 `json:"scopes"`
	// Holds lists the active legal holds that would refuse the erasure.
	Holds []string `json:"holds"`
}
