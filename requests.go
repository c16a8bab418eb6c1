package lethe

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/requests"
	"github.com/lethe-io/lethe/internal/store"
)

// ErasureRequest is an erasure request: filed by one DPO token, approved
// by a second, executed (or rejected). It never holds the subject's id,
// only a subject commitment; see internal/requests for the lifecycle and
// docs/compliance/gdpr.md for how the id is kept until execution.
type ErasureRequest = requests.Request

// RequestStatus is where an erasure request is in its lifecycle:
// pending, approved, blocked, executed or rejected.
type RequestStatus = requests.Status

// RequestReason is why an erasure request was filed: data_subject_request,
// retention_expired, legal_obligation, consent_withdrawn or other.
type RequestReason = requests.Reason

// RequestPreview is what an erasure request would erase when filed.
type RequestPreview = requests.Preview

// RequestFilter selects erasure requests to list: by status, due date, or
// overdue.
type RequestFilter = requests.Filter

// ErasureCertificate states that an executed request's erasure happened,
// with its proof; it never names the subject.
type ErasureCertificate = requests.Certificate

// RequestSpec is an erasure request to file: exactly one of UserID or
// Scope, a Reason, the portal's Reference (a ticket id, never personal
// data) and a Due date (zero: 30 days).
type RequestSpec struct {
	Memory    string
	UserID    string
	Scope     string
	Reason    RequestReason
	Reference string
	Due       time.Time
}

// FiledRequest is what FileErasureRequest returns: the pending request,
// its preview, and the nonce of its subject commitment (hex), for the
// caller alone: lethe keeps it sealed until execution, then destroys it.
type FiledRequest struct {
	*ErasureRequest
	Preview      *RequestPreview `json:"preview"`
	SubjectNonce string          `json:"subject_nonce"`
}

// FileErasureRequest files a pending erasure request, with a preview of
// what it would erase (computed without changing anything or appending to
// the audit log). Its request.create event commits with it; the actor of
// ctx (see WithActor) is its requester.
func (db *DB) FileErasureRequest(ctx context.Context, spec RequestSpec) (*FiledRequest, error) {
	var err error
	if spec.Memory, err = memoryName(spec.Memory); err != nil {
		return nil, err
	}
	rs := requests.Spec{Memory: spec.Memory, UserID: spec.UserID, Scope: spec.Scope, Reason: spec.Reason, Reference: spec.Reference, Due: spec.Due}
	if err := rs.Validate(db.now().UTC().Truncate(time.Second)); err != nil {
		return nil, err
	}
	pv, err := db.previewErase(ctx, rs)
	if err != nil {
		return nil, err
	}
	r, nonce, err := db.requests.Create(ctx, rs)
	if err != nil {
		return nil, err
	}
	return &FiledRequest{ErasureRequest: r, Preview: pv, SubjectNonce: hex.EncodeToString(nonce)}, nil
}

// previewErase says what erasing spec's subject would do now.
func (db *DB) previewErase(ctx context.Context, spec requests.Spec) (*RequestPreview, error) {
	es := store.EraseSpec{Memory: spec.Memory, Kind: keys.KindScope, Name: spec.Scope}
	if spec.Kind() == requests.User {
		us, err := db.userErase(ctx, spec.Memory, spec.UserID)
		if grains.ErrorCode(err) == grains.CodeNotFound {
			return &RequestPreview{Scopes: map[string]int64{}, Holds: []string{}}, nil
		}
		if err != nil {
			return nil, err
		}
		es = us.EraseSpec
	}
	return db.store.PreviewErase(ctx, es)
}

// ErasureRequest returns erasure request id of memory.
func (db *DB) ErasureRequest(ctx context.Context, memory, id string) (*ErasureRequest, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	return db.requests.Get(ctx, memory, id)
}

// ErasureRequests lists the erasure requests of memory f selects, by due
// date.
func (db *DB) ErasureRequests(ctx context.Context, memory string, f RequestFilter) ([]ErasureRequest, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	return db.requests.List(ctx, memory, f)
}

// ApproveErasureRequest approves a pending request. The actor of ctx must
// not be its requester: that fails with CodeFourEyes.
func (db *DB) ApproveErasureRequest(ctx context.Context, memory, id string) (*ErasureRequest, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	return db.requests.Approve(ctx, memory, id)
}

// RejectErasureRequest rejects a request that has not run, and destroys
// its sealed subject.
func (db *DB) RejectErasureRequest(ctx context.Context, memory, id string) (*ErasureRequest, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	return db.requests.Reject(ctx, memory, id)
}

// ExecuteErasureRequest runs an approved (or blocked) request: the user's
// or the scope's crypto-erasure, whose key.erase event names the request
// and carries its subject commitment (the nonce returned at filing opens
// it). The request becomes executed, its result recorded and its sealed
// subject destroyed, in the erasure's transaction; of two concurrent
// executions one erases and the other fails with CodeInvalidState. Under a
// legal hold it fails with CodeHeld and the request becomes blocked (an
// erasure.refused event names it); it runs when the hold is released. A
// subject with no live key (nothing held) fails with CodeNotFound: reject
// the request.
func (db *DB) ExecuteErasureRequest(ctx context.Context, memory, id string) (*Erasure, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	r, subject, nonce, t, err := db.requests.Open(ctx, memory, id)
	if err != nil {
		return nil, err
	}
	spec := store.EraseSpec{Memory: memory, Kind: keys.KindScope, Name: subject}
	if r.Kind == requests.User {
		us, err := db.userErase(ctx, memory, subject)
		if err != nil {
			return nil, err
		}
		spec = us.EraseSpec
	}
	spec.Request = t
	e, err := db.erase(ctx, spec, subject, nonce)
	var held *store.HeldBy
	if errors.As(err, &held) {
		if berr := db.requests.Block(ctx, r, held.HoldID); berr != nil {
			return nil, berr
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if serr := db.requests.Destroyed(ctx, r); serr != nil {
		db.logger.Warn("scrub after an erasure request failed; residue of its sealed subject may persist until the next scrub", "error", serr)
	}
	e.SubjectNonce = hex.EncodeToString(nonce)
	return e, nil
}

// runBlocked executes the blocked requests of memory, after a hold was
// released. A request still held stays blocked; a failure is logged.
func (db *DB) runBlocked(ctx context.Context, memory string) {
	rs, err := db.requests.Blocked(ctx, memory)
	if err != nil {
		db.logger.Warn("could not list blocked erasure requests", "error", err)
		return
	}
	for _, r := range rs {
		_, err := db.ExecuteErasureRequest(ctx, memory, r.ID)
		if err != nil && grains.ErrorCode(err) != grains.CodeHeld {
			db.logger.Warn("a blocked erasure request did not run after its hold was released", "request", r.ID, "code", string(grains.ErrorCode(err)), "error", err)
		}
	}
}

// ErasureCertificate returns the certificate of an executed request: what
// was erased, when, under which keys, and the proof of its key.erase
// event against the latest signed checkpoint (CodePending while none
// covers it yet). It never names the subject.
func (db *DB) ErasureCertificate(ctx context.Context, memory, id string) (*ErasureCertificate, error) {
	r, err := db.ErasureRequest(ctx, memory, id)
	if err != nil {
		return nil, err
	}
	if r.Status != requests.Executed {
		return requests.NewCertificate(r, nil, "")
	}
	p, err := db.journal.Proof(ctx, r.EventID)
	if err != nil {
		return nil, audit.DomainError(err)
	}
	return requests.NewCertificate(r, p, db.AuditKey())
}
