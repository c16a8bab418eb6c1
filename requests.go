package lethe

import (
	"context"

	"github.com/lethe-io/lethe/internal/erasure"
	"github.com/lethe-io/lethe/internal/requests"
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

// RequestSpec is an erasure request to file: Memory, exactly one of
// UserID or Scope, a Reason, the portal's Reference (a ticket id, never
// personal data) and a Due date (zero: 30 days).
type RequestSpec = requests.Spec

// FiledRequest is what FileErasureRequest returns: the pending
// ErasureRequest, its Preview, and the SubjectNonce of its subject
// commitment (hex), for the caller alone: lethe keeps it sealed until
// execution, then destroys it.
type FiledRequest = erasure.Filed

// FileErasureRequest files a pending erasure request, with a preview of
// what it would erase (computed without changing anything or appending to
// the audit log). Its request.create event commits with it; the actor of
// ctx (see WithActor) is its requester.
func (db *DB) FileErasureRequest(ctx context.Context, spec RequestSpec) (*FiledRequest, error) {
	var err error
	if spec.Memory, err = memoryName(spec.Memory); err != nil {
		return nil, err
	}
	return db.erasure.FileRequest(ctx, spec)
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
	return db.erasure.ExecuteRequest(ctx, memory, id)
}

// ErasureCertificate returns the certificate of an executed request: what
// was erased, when, under which keys, and the proof of its key.erase
// event against the latest signed checkpoint (CodePending while none
// covers it yet). It never names the subject.
func (db *DB) ErasureCertificate(ctx context.Context, memory, id string) (*ErasureCertificate, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	return db.erasure.Certificate(ctx, memory, id)
}
