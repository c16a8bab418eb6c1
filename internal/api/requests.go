package api

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// Requester is what the erasure request routes need of the library;
// *lethe.DB has it.
type Requester interface {
	FileErasureRequest(ctx context.Context, spec lethe.RequestSpec) (*lethe.FiledRequest, error)
	ErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error)
	ErasureRequests(ctx context.Context, memory string, f lethe.RequestFilter) ([]lethe.ErasureRequest, error)
	ApproveErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error)
	RejectErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error)
	ExecuteErasureRequest(ctx context.Context, memory, id string) (*lethe.Erasure, error)
	ErasureCertificate(ctx context.Context, memory, id string) (*lethe.ErasureCertificate, error)
}

var _ Requester = (*lethe.DB)(nil)

// ErasureRequestBody is the body of POST .../erasure-requests: exactly
// one of user_id or scope, a reason code, the portal's reference (a
// ticket id, never personal data) and an optional due date (RFC 3339;
// default 30 days).
type ErasureRequestBody struct {
	UserID    *string    `json:"user_id,omitempty"`
	Scope     *string    `json:"scope,omitempty"`
	Reason    string     `json:"reason"`
	Reference string     `json:"reference"`
	Due       *time.Time `json:"due,omitempty"`
}

// ErasureRequestList answers GET .../erasure-requests.
type ErasureRequestList struct {
	Requests []lethe.ErasureRequest `json:"requests"`
}

// fileRequest files an erasure request. A scope-limited token may file
// scope requests within its scopes, not user requests.
func (s *Server) fileRequest(c *gin.Context, req *ErasureRequestBody) (reply, error) {
	spec := lethe.RequestSpec{Memory: c.Param("memory"), Reason: lethe.RequestReason(req.Reason), Reference: req.Reference}
	if req.Due != nil {
		spec.Due = *req.Due
	}
	tok := tokenOf(c)
	switch {
	case req.UserID != nil && req.Scope != nil:
		return nil, grains.Errorf(lethe.CodeInvalidArgument, "a request names exactly one of a user or a scope")
	case req.Scope != nil:
		scope, err := required("scope", req.Scope)
		if err != nil {
			return nil, err
		}
		if strings.Trim(scope, "/") == "" {
			return nil, &lethe.Error{Code: lethe.CodeEmptySelector, Field: "scope", Message: "name a scope path"}
		}
		if !tok.AllowsScope(scope) {
			return nil, outOfScope("scope")
		}
		spec.Scope = scope
	default:
		user, err := required("user_id", req.UserID)
		if err != nil {
			return nil, err
		}
		if tok.Scoped() {
			return nil, unscopedOnly("file a user's erasure request")
		}
		spec.UserID = user
	}
	f, err := s.lib.FileErasureRequest(c.Request.Context(), spec)
	if err != nil {
		return nil, err
	}
	c.Header("Location", "/api/memories/"+f.Memory+"/erasure-requests/"+f.ID)
	return jsonReply{http.StatusCreated, f}, nil
}

// visible fails unless the token may see request r: a scope-limited token
// sees scope requests within its scopes, and hears not_found of others.
func visible(c *gin.Context, r *lethe.ErasureRequest) error {
	tok := tokenOf(c)
	if !tok.Scoped() || (r.Kind == "scope" && tok.AllowsScope(r.Scope)) {
		return nil
	}
	return &lethe.Error{Code: lethe.CodeNotFound, Message: "no such erasure request"}
}

// request reads the route's request and checks the token may see it.
func (s *Server) request(c *gin.Context) (*lethe.ErasureRequest, error) {
	r, err := s.lib.ErasureRequest(c.Request.Context(), c.Param("memory"), c.Param("id"))
	if err != nil {
		return nil, err
	}
	return r, visible(c, r)
}

func (s *Server) getRequest(c *gin.Context) {
	r, err := s.request(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, r)
}

// listRequests lists requests by status (?status=), due date
// (?due_before=RFC 3339) or overdue (?overdue=true).
// A parameter given empty is refused (queryParam).
func (s *Server) listRequests(c *gin.Context) {
	var q [3]string
	for i, name := range []string{"status", "due_before", "overdue"} {
		v, err := queryParam(c, name)
		if err != nil {
			s.fail(c, err)
			return
		}
		q[i] = v
	}
	f := lethe.RequestFilter{Status: lethe.RequestStatus(q[0])}
	if q[1] != "" {
		t, err := time.Parse(time.RFC3339, q[1])
		if err != nil {
			s.fail(c, grains.FieldError(lethe.CodeInvalidArgument, "due_before", "must be an RFC 3339 time"))
			return
		}
		f.DueBefore = t
	}
	switch q[2] {
	case "", "false":
	case "true":
		f.Overdue = true
	default:
		s.fail(c, grains.FieldError(lethe.CodeInvalidArgument, "overdue", "must be true or false"))
		return
	}
	rs, err := s.lib.ErasureRequests(c.Request.Context(), c.Param("memory"), f)
	if err != nil {
		s.fail(c, err)
		return
	}
	out := ErasureRequestList{Requests: make([]lethe.ErasureRequest, 0, len(rs))}
	for _, r := range rs {
		if visible(c, &r) == nil {
			out.Requests = append(out.Requests, r)
		}
	}
	c.JSON(http.StatusOK, out)
}

// decideRequest approves (or rejects) the route's request.
func (s *Server) decideRequest(approve bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if _, err := s.request(c); err != nil {
			s.fail(c, err)
			return
		}
		do := s.lib.RejectErasureRequest
		if approve {
			do = s.lib.ApproveErasureRequest
		}
		r, err := do(c.Request.Context(), c.Param("memory"), c.Param("id"))
		if err != nil {
			s.fail(c, err)
			return
		}
		c.JSON(http.StatusOK, r)
	}
}

// executeRequest runs the route's approved request and answers as the
// erase routes do; 423 held when a legal hold blocks it (it then runs
// when the hold is released).
func (s *Server) executeRequest(c *gin.Context) {
	if _, err := s.request(c); err != nil {
		s.fail(c, err)
		return
	}
	res, err := s.lib.ExecuteErasureRequest(c.Request.Context(), c.Param("memory"), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	receiptReply{res.Receipt, res}.send(c)
}

// certificate answers an executed request's erasure certificate: JSON, or
// printable HTML for Accept: text/html or ?format=html.
func (s *Server) certificate(c *gin.Context) {
	// The query first: a malformed one is 400 whatever the id names, as
	// on every route (it tells nothing of the request).
	format, err := queryParam(c, "format")
	if err != nil {
		s.fail(c, err)
		return
	}
	switch format {
	case "", "json", "html":
	default:
		s.fail(c, grains.FieldError(lethe.CodeInvalidArgument, "format", "must be json or html"))
		return
	}
	if _, err := s.request(c); err != nil {
		s.fail(c, err)
		return
	}
	cert, err := s.lib.ErasureCertificate(c.Request.Context(), c.Param("memory"), c.Param("id"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if format == "html" || (format == "" && c.NegotiateFormat(gin.MIMEJSON, gin.MIMEHTML) == gin.MIMEHTML) {
		page, err := cert.HTML()
		if err != nil {
			s.fail(c, err)
			return
		}
		c.Data(http.StatusOK, "text/html; charset=utf-8", page)
		return
	}
	c.JSON(http.StatusOK, cert)
}
