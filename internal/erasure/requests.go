package erasure

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/crashpoint"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/requests"
	"github.com/lethe-io/lethe/internal/store"
)

// Filed is what filing an erasure request returns: the pending request,
// its preview, and the nonce of its subject commitment (hex), for the
// caller alone: lethe keeps it sealed until execution, then destroys it.
type Filed struct {
	*ErasureRequest
	Preview      *requests.Preview `json:"preview"`
	SubjectNonce string            `json:"subject_nonce"`
}

// ErasureRequest names requests.Request so that Filed's embedded field is
// ErasureRequest, as package lethe calls the type.
type ErasureRequest = requests.Request

// FileRequest files a pending erasure request of spec.Memory (validated),
// with a preview of what it would erase, computed without changing
// anything or appending to the audit log.
func (e *Eraser) FileRequest(ctx context.Context, spec requests.Spec) (*Filed, error) {
	if err := spec.Validate(e.cfg.Now().UTC().Truncate(time.Second)); err != nil {
		return nil, err
	}
	pv, err := e.preview(ctx, spec)
	if err != nil {
		return nil, err
	}
	r, nonce, err := e.cfg.Requests.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &Filed{ErasureRequest: r, Preview: pv, SubjectNonce: hex.EncodeToString(nonce)}, nil
}

// preview says what erasing spec's subject would do now.
func (e *Eraser) preview(ctx context.Context, spec requests.Spec) (*requests.Preview, error) {
	es := store.EraseSpec{Memory: spec.Memory, Kind: keys.KindScope, Name: spec.Scope}
	if spec.Kind() == requests.User {
		us, _, err := e.userSpec(ctx, spec.Memory, spec.UserID)
		if grains.ErrorCode(err) == grains.CodeNotFound {
			return &requests.Preview{Scopes: map[string]int64{}, Holds: []string{}}, nil
		}
		if err != nil {
			return nil, err
		}
		es = us
	}
	return e.cfg.Store.PreviewErase(ctx, es)
}

// ExecuteRequest runs an approved (or blocked) request of memory
// (validated): see package lethe's DB.ExecuteErasureRequest.
func (e *Eraser) ExecuteRequest(ctx context.Context, memory, id string) (*Erasure, error) {
	r, subject, nonce, t, err := e.cfg.Requests.Open(ctx, memory, id)
	if err != nil {
		return nil, err
	}
	spec := store.EraseSpec{Memory: memory, Kind: keys.KindScope, Name: subject}
	if r.Kind == requests.User {
		if spec, _, err = e.userSpec(ctx, memory, subject); err != nil {
			return nil, err
		}
	}
	spec.Request = t
	out, err := e.erase(ctx, spec, subject, nonce, false)
	var held *store.HeldBy
	if errors.As(err, &held) {
		crashpoint.Hit(crashpoint.RequestRefused)
		if berr := e.cfg.Requests.Block(ctx, r, held.HoldID); berr != nil {
			return nil, berr
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	crashpoint.Hit(crashpoint.RequestErased)
	if serr := e.cfg.Requests.Destroyed(ctx, r); serr != nil {
		e.cfg.Logger.Warn("scrub after an erasure request failed; residue of its sealed subject may persist until the next scrub", "error", serr)
	}
	out.SubjectNonce = hex.EncodeToString(nonce)
	return out, nil
}

// RunBlocked executes the blocked requests of memory, after a hold was
// released. A request still held stays blocked; a failure is logged.
func (e *Eraser) RunBlocked(ctx context.Context, memory string) {
	rs, err := e.cfg.Requests.Blocked(ctx, memory)
	if err != nil {
		e.cfg.Logger.Warn("could not list blocked erasure requests", "error", err)
		return
	}
	for _, r := range rs {
		_, err := e.ExecuteRequest(ctx, memory, r.ID)
		if err != nil && grains.ErrorCode(err) != grains.CodeHeld {
			e.cfg.Logger.Warn("a blocked erasure request did not run after its hold was released", "request", r.ID, "code", string(grains.ErrorCode(err)), "error", err)
		}
	}
}

// RecoveryActor is the actor of the executions RunStranded makes.
const RecoveryActor = "recovery"

// RunStranded executes, in every memory, the blocked requests whose
// blocking hold is no longer active, oldest due first, as RecoveryActor: a
// release runs the blocked requests after it commits, so a process that
// ended in between left them blocked with no hold in force (found by
// TestCrashModel). A request another hold still covers is blocked again
// by it (with its erasure.refused event); one another instance ran first
// is skipped; any other failure is logged and the request stays blocked.
func (e *Eraser) RunStranded(ctx context.Context) {
	ctx = audit.WithActor(ctx, RecoveryActor)
	var after *requests.Request
	for {
		rs, err := e.cfg.Requests.Stranded(ctx, after)
		if err != nil {
			e.cfg.Logger.Warn("could not list stranded erasure requests", "error", err)
			return
		}
		for i := range rs {
			_, err := e.ExecuteRequest(ctx, rs[i].Memory, rs[i].ID)
			if code := grains.ErrorCode(err); err != nil && code != grains.CodeHeld && code != grains.CodeInvalidState {
				e.cfg.Logger.Warn("a blocked erasure request whose hold was released did not run", "request", rs[i].ID, "code", string(code), "error", err)
			}
		}
		if len(rs) < requests.MaxList || ctx.Err() != nil {
			return
		}
		after = &rs[len(rs)-1]
	}
}

// Certificate returns the certificate of request id of memory
// (validated): see package lethe's DB.ErasureCertificate.
func (e *Eraser) Certificate(ctx context.Context, memory, id string) (*requests.Certificate, error) {
	r, err := e.cfg.Requests.Get(ctx, memory, id)
	if err != nil {
		return nil, err
	}
	if r.Status != requests.Executed {
		return requests.NewCertificate(r, nil, "")
	}
	p, err := e.cfg.Journal.Proof(ctx, r.EventID)
	if err != nil {
		return nil, audit.DomainError(err)
	}
	return requests.NewCertificate(r, p, e.cfg.LogKey)
}
