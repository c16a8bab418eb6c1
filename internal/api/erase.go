package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// Eraser is what the crypto-erasure and hold routes need of the library;
// *lethe.DB has it.
type Eraser interface {
	ForgetUser(ctx context.Context, memory, userID string, opts ...lethe.EraseOption) (*lethe.Erasure, error)
	EraseScope(ctx context.Context, memory, path string, opts ...lethe.EraseOption) (*lethe.Erasure, error)
	EraseMemory(ctx context.Context, memory string, opts ...lethe.EraseOption) (*lethe.Erasure, error)
	SetHold(ctx context.Context, spec lethe.HoldSpec) (*lethe.Hold, error)
	ReleaseHold(ctx context.Context, memory, id string) error
	Holds(ctx context.Context, memory string) ([]lethe.Hold, error)
}

var _ Eraser = (*lethe.DB)(nil)

// required returns *v, or empty_selector when it is missing or blank: an
// erasure or hold never defaults to "everything".
func required(field string, v *string) (string, error) {
	if v == nil || strings.TrimSpace(*v) == "" {
		return "", &lethe.Error{Code: lethe.CodeEmptySelector, Field: field,
			Message: "name what to act on; an empty selector never means everything"}
	}
	return *v, nil
}

// eraseOptions are the library's options for a body's dry_run.
func eraseOptions(dryRun bool) []lethe.EraseOption {
	if dryRun {
		return []lethe.EraseOption{lethe.DryRun()}
	}
	return nil
}

func unscopedOnly(what string) error {
	return apiError(CodeForbidden, "a scope-limited token cannot "+what, "use a token without scope limits")
}

// forgetUser crypto-erases a user: one key, every grain of the user in
// every scope. A scope-limited token cannot: the user spans scopes.
func (s *Server) forgetUser(c *gin.Context, req *ForgetUserRequest) (reply, error) {
	user, err := required("user_id", req.UserID)
	if err != nil {
		return nil, err
	}
	if tokenOf(c).Scoped() {
		return nil, unscopedOnly("erase a user")
	}
	res, err := s.lib.ForgetUser(c.Request.Context(), c.Param("memory"), user, eraseOptions(req.DryRun)...)
	if err != nil {
		return nil, err
	}
	return receiptReply{res.Receipt, res}, nil
}

// scopeErase crypto-erases a scope path and everything below it. A
// scope-limited token may erase within its scopes.
func (s *Server) scopeErase(c *gin.Context, req *ScopeEraseRequest) (reply, error) {
	field, given := "scope", req.Scope
	if req.ScopePath != nil {
		if req.Scope != nil {
			return nil, grains.FieldError(lethe.CodeInvalidArgument, "scope_path", "give scope or scope_path, not both")
		}
		field, given = "scope_path", req.ScopePath
	}
	path, err := required(field, given)
	if err != nil {
		return nil, err
	}
	if strings.Trim(path, "/") == "" {
		return nil, &lethe.Error{Code: lethe.CodeEmptySelector, Field: field, Message: "the root scope is the whole memory",
			Hint: "to erase a whole memory use POST .../erase"}
	}
	if !tokenOf(c).AllowsScope(path) {
		return nil, outOfScope(field)
	}
	res, err := s.lib.EraseScope(c.Request.Context(), c.Param("memory"), path, eraseOptions(req.DryRun)...)
	if err != nil {
		return nil, err
	}
	return receiptReply{res.Receipt, res}, nil
}

// eraseMemory crypto-erases a whole memory. The body must repeat the
// memory's name; a scope-limited token cannot.
func (s *Server) eraseMemory(c *gin.Context, req *EraseMemoryRequest) (reply, error) {
	memory := c.Param("memory")
	if req.Confirm != memory {
		return nil, grains.FieldError(lethe.CodeInvalidArgument, "confirm", "must repeat the memory's name")
	}
	if tokenOf(c).Scoped() {
		return nil, unscopedOnly("erase a memory")
	}
	res, err := s.lib.EraseMemory(c.Request.Context(), memory, eraseOptions(req.DryRun)...)
	if err != nil {
		return nil, err
	}
	return receiptReply{res.Receipt, res}, nil
}

// listHolds lists the memory's active holds; a scope-limited token sees
// the scope holds within its scopes.
func (s *Server) listHolds(c *gin.Context) {
	hs, err := s.lib.Holds(c.Request.Context(), c.Param("memory"))
	if err != nil {
		s.fail(c, err)
		return
	}
	out := HoldList{Holds: make([]lethe.Hold, 0, len(hs))}
	tok := tokenOf(c)
	for _, h := range hs {
		if !tok.Scoped() || (h.Kind == "scope" && tok.AllowsScope(h.Scope)) {
			out.Holds = append(out.Holds, h)
		}
	}
	c.JSON(http.StatusOK, out)
}

// setHold places a legal hold on a scope or a user. A scope-limited token
// may hold scopes within its scopes, not users.
func (s *Server) setHold(c *gin.Context, req *HoldRequest) (reply, error) {
	spec := lethe.HoldSpec{Memory: c.Param("memory")}
	var err error
	switch {
	case req.Scope != nil && req.UserID != nil:
		err = grains.Errorf(lethe.CodeInvalidArgument, "a hold names exactly one of a scope or a user")
	case req.Scope != nil:
		spec.Scope, err = required("scope", req.Scope)
		if err == nil && strings.Trim(spec.Scope, "/") == "" {
			err = &lethe.Error{Code: lethe.CodeEmptySelector, Field: "scope", Message: "name a scope path"}
		}
		if err == nil && !tokenOf(c).AllowsScope(spec.Scope) {
			err = outOfScope("scope")
		}
	default:
		spec.UserID, err = required("user_id", req.UserID)
		if err == nil && tokenOf(c).Scoped() {
			err = unscopedOnly("hold a user")
		}
	}
	if err != nil {
		return nil, err
	}
	h, err := s.lib.SetHold(c.Request.Context(), spec)
	if err != nil {
		return nil, err
	}
	return jsonReply{http.StatusCreated, h}, nil
}

// releaseHold releases a hold. A scope-limited token may release the scope
// holds within its scopes; the others are not found to it.
func (s *Server) releaseHold(c *gin.Context) {
	memory, id, ctx := c.Param("memory"), c.Param("id"), c.Request.Context()
	if tok := tokenOf(c); tok.Scoped() {
		hs, err := s.lib.Holds(ctx, memory)
		if err != nil {
			s.fail(c, err)
			return
		}
		// A hold outside the token's scopes, or on a user, is no hold to
		// it (the hold list leaves it out): the answer for an id that
		// names none.
		for _, h := range hs {
			if h.ID == id && (h.Kind != "scope" || !tok.AllowsScope(h.Scope)) {
				s.fail(c, grains.NoHold(memory, id))
				return
			}
		}
	}
	if err := s.lib.ReleaseHold(ctx, memory, id); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
