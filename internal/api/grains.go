package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

func outOfScope(field string) error {
	return &lethe.Error{Code: CodeForbidden, Field: field, Message: "outside this token's scopes"}
}

// noGrain is what a scope-limited token hears of a grain outside its
// scopes: exactly what it hears of a hash that names no grain (the store's
// not_found), so it cannot tell the two apart.
func noGrain(memory, hash string) error {
	return grains.Errorf(lethe.CodeNotFound, "no grain %s in memory %s", hash, memory)
}

// addGrains writes one grain (the body is a grain) or a batch (the body is
// {"grains": [...]}).
func (s *Server) addGrains(c *gin.Context) {
	var req addRequest
	body, err := decode(c, s.cfg.MaxBatchBody, &req)
	if err != nil {
		s.fail(c, err)
		return
	}
	memory, tok := c.Param("memory"), tokenOf(c)
	ctx := c.Request.Context()
	if req.Grains == nil {
		if int64(len(body)) > s.cfg.MaxBody {
			s.fail(c, tooLarge(s.cfg.MaxBody))
			return
		}
		g := req.GrainInput.Grain(memory)
		if !tok.AllowsScope(g.Scope) {
			s.fail(c, outOfScope("scope"))
			return
		}
		h, err := s.lib.Add(ctx, g)
		if err != nil {
			s.fail(c, err)
			return
		}
		c.JSON(http.StatusCreated, AddResponse{Hash: h})
		return
	}
	if !req.GrainInput.isZero() {
		s.fail(c, grains.Errorf(lethe.CodeInvalidArgument, `send one grain, or {"grains": [...]} alone`))
		return
	}
	if len(req.Grains) > grains.MaxBatch {
		s.fail(c, grains.FieldError(lethe.CodeTooLarge, "grains", "at most 10000 grains per batch"))
		return
	}
	// The library bounds the batch's tags too (grains.MaxBatchTags); the
	// body limit bounds everything else one request holds.
	gs := make([]lethe.Grain, len(req.Grains))
	for i := range req.Grains {
		gs[i] = req.Grains[i].Grain(memory)
		if !tok.AllowsScope(gs[i].Scope) {
			s.fail(c, outOfScope(fmt.Sprintf("grains[%d].scope", i)))
			return
		}
	}
	hs, err := s.lib.AddBatch(ctx, gs)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, AddBatchResponse{Hashes: hs, Count: len(hs)})
}

// recall answers a query. A scope-limited token's query is kept within its
// scopes.
func (s *Server) recall(c *gin.Context, req *RecallRequest) (reply, error) {
	q := req.Query(c.Param("memory"))
	if tok := tokenOf(c); tok.Scoped() {
		scope, ok := tok.NarrowScope(q.Scope)
		if !ok {
			return nil, &lethe.Error{Code: CodeForbidden, Field: "scope", Message: "outside this token's scopes",
				Hint: "name a scope within one of the token's scope prefixes"}
		}
		q.Scope = scope
	}
	page, err := s.lib.Recall(c.Request.Context(), q)
	if err != nil {
		return nil, err
	}
	return jsonReply{http.StatusOK, page}, nil
}

// hashParam returns the route's hash, checked, so that a malformed one is
// invalid_argument before any lookup.
func hashParam(c *gin.Context) (string, error) {
	h := c.Param("hash")
	if !grains.ValidHash(h) {
		return "", grains.FieldError(lethe.CodeInvalidArgument, "hash", "must be 64 lowercase hex digits")
	}
	return h, nil
}

func (s *Server) getGrain(c *gin.Context) {
	h, err := hashParam(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	g, err := s.lib.Get(c.Request.Context(), c.Param("memory"), h)
	if err != nil {
		s.fail(c, err)
		return
	}
	if !tokenOf(c).AllowsScope(g.Scope) {
		s.fail(c, noGrain(c.Param("memory"), h))
		return
	}
	c.JSON(http.StatusOK, g)
}

// history answers a version chain. For a scope-limited token the grain
// asked for must be within its scopes, and versions outside them are left
// out.
func (s *Server) history(c *gin.Context) {
	h, err := hashParam(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	chain, err := s.lib.History(c.Request.Context(), c.Param("memory"), h)
	if err != nil {
		s.fail(c, err)
		return
	}
	if tok := tokenOf(c); tok.Scoped() {
		kept := chain[:0]
		for _, g := range chain {
			if g.Hash == h && !tok.AllowsScope(g.Scope) {
				s.fail(c, noGrain(c.Param("memory"), h))
				return
			}
			if tok.AllowsScope(g.Scope) {
				kept = append(kept, g)
			}
		}
		chain = kept
	}
	if chain == nil {
		chain = []lethe.Grain{}
	}
	c.JSON(http.StatusOK, HistoryResponse{Grains: chain})
}

func (s *Server) supersede(c *gin.Context, req *SupersedeRequest) (reply, error) {
	if req.BlobHash == "" {
		return nil, grains.FieldError(lethe.CodeInvalidArgument, "blob_hash", "the hash of the version to supersede is required")
	}
	if !grains.ValidHash(req.BlobHash) {
		return nil, grains.FieldError(lethe.CodeInvalidArgument, "blob_hash", "must be 64 lowercase hex digits")
	}
	memory, ctx := c.Param("memory"), c.Request.Context()
	g := req.GrainInput.Grain(memory)
	if tok := tokenOf(c); tok.Scoped() {
		old, err := s.lib.Get(ctx, memory, req.BlobHash)
		if err != nil {
			return nil, err
		}
		if !tok.AllowsScope(old.Scope) {
			return nil, noGrain(memory, req.BlobHash)
		}
		if g.Scope != "" && !tok.AllowsScope(g.Scope) {
			return nil, outOfScope("scope")
		}
	}
	h, err := s.lib.Supersede(ctx, req.BlobHash, g)
	if err != nil {
		return nil, err
	}
	return jsonReply{http.StatusCreated, SupersedeResponse{Hash: h, Superseded: req.BlobHash}}, nil
}

// forget hard-deletes by blob_hash, hashes, subject or user_id. A selector
// given empty is empty_selector. A scope-limited token forgets by hash only,
// and only chains whose every version is within its scopes.
func (s *Server) forget(c *gin.Context, req *ForgetRequest) (reply, error) {
	memory, ctx, tok := c.Param("memory"), c.Request.Context(), tokenOf(c)
	sel := lethe.Selector{Memory: memory, Hashes: req.Hashes}
	for _, f := range []struct {
		name string
		v    *string
		dst  *string
	}{{"blob_hash", req.BlobHash, &sel.Hash}, {"subject", req.Subject, &sel.Subject}, {"user_id", req.UserID, &sel.UserID}} {
		if f.v == nil {
			continue
		}
		if strings.TrimSpace(*f.v) == "" {
			return nil, &lethe.Error{Code: lethe.CodeEmptySelector, Field: f.name,
				Message: "an empty selector selects nothing; it never means everything"}
		}
		*f.dst = *f.v
	}
	if tok.Scoped() {
		if sel.Subject != "" || sel.UserID != "" {
			return nil, apiError(CodeForbidden, "a scope-limited token forgets by hash only",
				"recall within the token's scope, then forget the hashes")
		}
		if err := sel.Validate(); err != nil {
			return nil, err
		}
		hashes := sel.Hashes
		if sel.Hash != "" {
			hashes = []string{sel.Hash}
		}
		for _, h := range hashes {
			chain, err := s.lib.History(ctx, memory, h)
			if lethe.ErrorCode(err) == lethe.CodeNotFound {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, g := range chain {
				if !tok.AllowsScope(g.Scope) {
					return nil, noGrain(memory, h)
				}
			}
		}
	}
	forget := s.lib.Forget
	if req.Force {
		forget = s.lib.ForceForget
	}
	res, err := forget(ctx, sel)
	if err != nil {
		return nil, err
	}
	return receiptReply{res.Receipt, res}, nil
}
