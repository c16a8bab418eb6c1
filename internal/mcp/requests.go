package mcp

import (
	"context"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
)

// Requester is the erasure request workflow, offered as the
// erasure_request_* tools only when a Config has one (or, with Resolve,
// AllowRequests is set and the resolved Library implements it). Each method
// has the contract of the *lethe.DB method of the same name: the actor of
// the call (the API token, or "local" for the embedded store) files,
// approves, rejects and executes, and approving one's own request fails
// with code four_eyes.
type Requester interface {
	FileErasureRequest(ctx context.Context, spec lethe.RequestSpec) (*lethe.FiledRequest, error)
	ErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error)
	ErasureRequests(ctx context.Context, memory string, f lethe.RequestFilter) ([]lethe.ErasureRequest, error)
	ApproveErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error)
	RejectErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error)
	ExecuteErasureRequest(ctx context.Context, memory, id string) (*lethe.Erasure, error)
}

var _ Requester = (*lethe.DB)(nil)

// RequestCreateInput is the erasure_request_create tool's input.
type RequestCreateInput struct {
	Memory    string `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	UserID    string `json:"user_id,omitempty" jsonschema:"the user whose key the request would destroy (exactly one of user_id or scope)"`
	Scope     string `json:"scope,omitempty" jsonschema:"the scope path whose key the request would destroy, with everything below it"`
	Reason    string `json:"reason" jsonschema:"data_subject_request, retention_expired, legal_obligation, consent_withdrawn or other"`
	Reference string `json:"reference" jsonschema:"the portal's ticket id; never personal data"`
	Due       string `json:"due,omitempty" jsonschema:"RFC 3339 due time (default: 30 days, GDPR Art. 12(3))"`
}

// RequestCreateOutput is what erasure_request_create returns.
type RequestCreateOutput struct {
	Request      *lethe.ErasureRequest `json:"request"`
	Preview      *lethe.RequestPreview `json:"preview" jsonschema:"what the request would erase now (grains per scope, the holds that would refuse); nothing changed"`
	SubjectNonce string                `json:"subject_nonce" jsonschema:"opens the request's subject commitment; for the caller alone"`
}

// RequestIDInput names one erasure request.
type RequestIDInput struct {
	Memory string `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	ID     string `json:"id" jsonschema:"the erasure request's id"`
}

// RequestListInput is the erasure_request_list tool's input.
type RequestListInput struct {
	Memory    string `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	Status    string `json:"status,omitempty" jsonschema:"pending, approved, blocked, executed or rejected (default: all)"`
	DueBefore string `json:"due_before,omitempty" jsonschema:"RFC 3339: only requests due before it"`
	Overdue   bool   `json:"overdue,omitempty" jsonschema:"only requests not yet executed or rejected whose due time has passed"`
}

// RequestListOutput is a list of erasure requests, by due date.
type RequestListOutput struct {
	Requests []lethe.ErasureRequest `json:"requests"`
	Count    int                    `json:"count"`
}

// RequestOutput is one erasure request.
type RequestOutput struct {
	Request *lethe.ErasureRequest `json:"request"`
}

// requesting reports whether the erasure request tools are offered.
func (h *handlers) requesting() bool {
	return h.cfg.Requester != nil || (h.cfg.Resolve != nil && h.cfg.AllowRequests)
}

func (h *handlers) addRequestTools(s *sdk.Server) {
	addTool(s, h.inputs, tool("erasure_request_create", "File an erasure request",
		"File a pending erasure request for a user or a scope, with a reason code and the portal's ticket reference: "+
			"it answers what the erasure would destroy now (a preview; nothing changes) and the nonce of the request's subject "+
			"commitment. A second principal must approve it before it can run (four eyes).",
		false, false, false), nil, h.requestCreate)
	addTool(s, h.inputs, tool("erasure_request_list", "List erasure requests",
		"List the memory's erasure requests by due date, by status, due time or overdue.", true, false, true), nil, h.requestList)
	addTool(s, h.inputs, tool("erasure_request_show", "Show an erasure request",
		"One erasure request: its status, who filed, approved, rejected and executed it when, and once executed the erasure's result.",
		true, false, true), nil, h.requestShow)
	addTool(s, h.inputs, tool("erasure_request_approve", "Approve an erasure request",
		"Approve a pending request. Whoever filed it cannot approve it (code four_eyes).", false, false, false), nil, h.requestApprove)
	addTool(s, h.inputs, tool("erasure_request_reject", "Reject an erasure request",
		"Reject a request that has not run, and destroy its sealed subject.", false, true, false), nil, h.requestReject)
	addTool(s, h.inputs, tool("erasure_request_execute", "Execute an erasure request",
		"Run an approved request: the user's or the scope's crypto-erasure, with its signed proof. "+
			"Under a legal hold it fails with code held and the request waits (blocked) until the hold is released.",
		false, true, false), nil, h.requestExecute)
}

// requests binds the call and checks the session may use the request tools.
func (h *handlers) requests(req *sdk.CallToolRequest, tool, memory string) (*handlers, string, error) {
	h, err := h.bind(req.Extra)
	if err != nil {
		return h, "", h.fail(tool, err)
	}
	if h.cfg.Requester == nil {
		return h, "", h.fail(tool, &lethe.Error{Code: lethe.CodeInternal, Message: "no erasure request workflow behind this session"})
	}
	m, err := h.memory(memory)
	if err != nil {
		return h, "", h.fail(tool, err)
	}
	if h.locked() {
		return h, "", h.fail(tool, forbidden("memory", "erasure requests span the memory; a locked session cannot use them"))
	}
	return h, m, nil
}

func parseTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, &lethe.Error{Code: lethe.CodeInvalidArgument, Field: field, Message: "must be an RFC 3339 time"}
	}
	return t, nil
}

func (h *handlers) requestCreate(ctx context.Context, req *sdk.CallToolRequest, in RequestCreateInput) (*sdk.CallToolResult, *RequestCreateOutput, error) {
	const name = "erasure_request_create"
	h, memory, err := h.requests(req, name, in.Memory)
	if err != nil {
		return nil, nil, err
	}
	spec := lethe.RequestSpec{Memory: memory, UserID: in.UserID, Scope: in.Scope, Reason: lethe.RequestReason(in.Reason), Reference: in.Reference}
	if spec.Due, err = parseTime("due", in.Due); err != nil {
		return nil, nil, h.fail(name, err)
	}
	if in.Scope != "" && strings.Trim(in.Scope, "/") == "" {
		return nil, nil, h.fail(name, &lethe.Error{Code: lethe.CodeEmptySelector, Field: "scope", Message: "name a scope path"})
	}
	f, err := h.cfg.Requester.FileErasureRequest(ctx, spec)
	if err != nil {
		return nil, nil, h.fail(name, err)
	}
	return nil, &RequestCreateOutput{Request: f.ErasureRequest, Preview: f.Preview, SubjectNonce: f.SubjectNonce}, nil
}

func (h *handlers) requestList(ctx context.Context, req *sdk.CallToolRequest, in RequestListInput) (*sdk.CallToolResult, *RequestListOutput, error) {
	const name = "erasure_request_list"
	h, memory, err := h.requests(req, name, in.Memory)
	if err != nil {
		return nil, nil, err
	}
	f := lethe.RequestFilter{Status: lethe.RequestStatus(in.Status), Overdue: in.Overdue}
	if f.DueBefore, err = parseTime("due_before", in.DueBefore); err != nil {
		return nil, nil, h.fail(name, err)
	}
	rs, err := h.cfg.Requester.ErasureRequests(ctx, memory, f)
	if err != nil {
		return nil, nil, h.fail(name, err)
	}
	if rs == nil {
		rs = []lethe.ErasureRequest{}
	}
	return nil, &RequestListOutput{Requests: rs, Count: len(rs)}, nil
}

// decide runs one of the calls that take a request id and answer the request.
func (h *handlers) decide(ctx context.Context, req *sdk.CallToolRequest, name string, in RequestIDInput,
	call func(Requester, context.Context, string, string) (*lethe.ErasureRequest, error)) (*sdk.CallToolResult, *RequestOutput, error) {
	h, memory, err := h.requests(req, name, in.Memory)
	if err != nil {
		return nil, nil, err
	}
	r, err := call(h.cfg.Requester, ctx, memory, in.ID)
	if err != nil {
		return nil, nil, h.fail(name, err)
	}
	return nil, &RequestOutput{Request: r}, nil
}

func (h *handlers) requestShow(ctx context.Context, req *sdk.CallToolRequest, in RequestIDInput) (*sdk.CallToolResult, *RequestOutput, error) {
	return h.decide(ctx, req, "erasure_request_show", in, Requester.ErasureRequest)
}

func (h *handlers) requestApprove(ctx context.Context, req *sdk.CallToolRequest, in RequestIDInput) (*sdk.CallToolResult, *RequestOutput, error) {
	return h.decide(ctx, req, "erasure_request_approve", in, Requester.ApproveErasureRequest)
}

func (h *handlers) requestReject(ctx context.Context, req *sdk.CallToolRequest, in RequestIDInput) (*sdk.CallToolResult, *RequestOutput, error) {
	return h.decide(ctx, req, "erasure_request_reject", in, Requester.RejectErasureRequest)
}

func (h *handlers) requestExecute(ctx context.Context, req *sdk.CallToolRequest, in RequestIDInput) (*sdk.CallToolResult, *ErasureOutput, error) {
	const name = "erasure_request_execute"
	h, memory, err := h.requests(req, name, in.Memory)
	if err != nil {
		return nil, nil, err
	}
	e, err := h.cfg.Requester.ExecuteErasureRequest(ctx, memory, in.ID)
	if err != nil {
		return nil, nil, h.fail(name, err)
	}
	out, err := h.erasureOut(e)
	if err != nil {
		return nil, nil, h.fail(name, err)
	}
	return nil, out, nil
}
