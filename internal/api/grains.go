package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/grains"
)

func outOfScope(field string) error {
	return &lethe.Error{Code: CodeForbidden, Field: field, Message: "outside this token's scopes"}
}

// addGrains writes one grain (the body is a grain) or a batch (the body is
// {"grains": [...]}).
func (s *Server) addGrains(c *gin.Context) {
	var req addRequest
	body, err := readBody(c, s.cfg.MaxBatchBody)
	if err != nil {
		s.fail(c, err)
		return
	}
	// The bounds of a batch (grains, tags) and of one grain's body are
	// checked before decoding, which would hold all of it in memory.
	batch, err := checkAddBounds(body)
	if err == nil && !batch && int64(len(body)) > s.cfg.MaxBody {
		err = tooLarge(s.cfg.MaxBody)
	}
	if err == nil {
		err = decodeStrict(body, &req)
	}
	// decodeStrict refuses null: a null body (no grain), {"grains": null}
	// (no batch), a null tag.
	if err == nil && req.Grains == nil {
		err = checkTags("tags", req.Tags)
	}
	for i := 0; err == nil && i < len(req.Grains); i++ {
		err = checkTags(fmt.Sprintf("grains[%d].tags", i), req.Grains[i].Tags)
	}
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

// checkTags refuses an empty tag (or one of white space only, or null,
// which encoding/json decodes as ""), naming it (tags[2]) as the library
// does, before any write: in a batch its name is grains[i].tags[j] even
// when the batch holds one grain.
func checkTags(field string, tags []string) error { return grains.CheckTags(field, tags) }

// recall answers a query. A scope-limited token's query is kept within its
// scopes.
func (s *Server) recall(c *gin.Context, req *RecallRequest) (reply, error) {
	if err := req.checkFilters(); err != nil {
		return nil, err
	}
	page, err := s.recallQuery(c, req.Query(c.Param("memory")))
	if err != nil {
		return nil, err
	}
	body := pageReply(page)
	if p, ok := body.(pageJSON); ok {
		return wireReply{http.StatusOK, p}, nil
	}
	return jsonReply{http.StatusOK, body}, nil
}

// pageJSON is a recall's page as the API writes it, with the grains as
// wireGrain, which encoding/json writes field by field: the same bytes as
// the page itself (TestPageReplyEncodesAsPage). Grain's MarshalJSON (for
// an erased version's short form, which a recall never answers) made
// encoding/json check and compact its output a second time, a quarter of
// the recall handler's CPU for a page of 10 (docs/performance.md).
type pageJSON struct {
	Grains []wireGrain `json:"grains"`
	Next   string      `json:"next,omitempty"`
}

// wireGrain is grains.Grain without its methods.
type wireGrain grains.Grain

// pageReply returns p as pageJSON, or p itself if it holds an erased
// version.
func pageReply(p *lethe.Page) any {
	out := pageJSON{Next: p.Next}
	if p.Grains != nil {
		out.Grains = make([]wireGrain, len(p.Grains))
	}
	for i := range p.Grains {
		if p.Grains[i].Erased {
			return p
		}
		out.Grains[i] = wireGrain(p.Grains[i])
	}
	return out
}

// recallQuery runs q, kept within a scope-limited token's scopes.
func (s *Server) recallQuery(c *gin.Context, q lethe.Query) (*lethe.Page, error) {
	if tok := tokenOf(c); tok.Scoped() {
		// Checked as the library checks it before it is narrowed, which
		// would read "/acme//" as "acme".
		if err := grains.ValidateScope(grains.TrimScope(q.Scope)); err != nil {
			return nil, err
		}
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
	if err := s.hideLinks(c, q.Memory, page.Grains); err != nil {
		return nil, err
	}
	return page, nil
}

// view is the token's view of memory (grains.View): for a scope-limited
// token, the grains within its scopes.
func (s *Server) view(c *gin.Context, memory string) *grains.View {
	tok := tokenOf(c)
	return &grains.View{Memory: memory,
		Sees:    func(g *lethe.Grain) bool { return tok.AllowsScope(g.Scope) },
		Get:     func(ctx context.Context, h string) (*lethe.Grain, error) { return s.lib.Get(ctx, memory, h) },
		History: func(ctx context.Context, h string) ([]lethe.Grain, error) { return s.lib.History(ctx, memory, h) },
		Locate: func(ctx context.Context, hs []string) (map[string]lethe.Grain, error) {
			return s.lib.Locate(ctx, memory, hs)
		},
		Refuse: chainOutside}
}

// hideLinks clears, for a scope-limited token, the links (supersedes,
// superseded_by) of gs that name a version outside its scopes, or one it
// cannot read: the token learns no hash of a version it cannot get (see
// grains.View.HideLinks).
func (s *Server) hideLinks(c *gin.Context, memory string, gs []lethe.Grain) error {
	if !tokenOf(c).Scoped() {
		return nil
	}
	return s.view(c, memory).HideLinks(c.Request.Context(), gs)
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
	memory := c.Param("memory")
	g, err := s.grain(c, memory, h)
	if err != nil {
		s.fail(c, err)
		return
	}
	one := []lethe.Grain{*g}
	if err := s.hideLinks(c, memory, one); err != nil {
		s.fail(c, err)
		return
	}
	g = &one[0]
	if w, ok := grainReply(g).(*wireGrain); ok {
		wireReply{http.StatusOK, w}.send(c)
		return
	}
	c.JSON(http.StatusOK, g)
}

// grainReply returns g as a wireGrain (see pageJSON), or g itself if it is
// an erased version.
func grainReply(g *lethe.Grain) any {
	if g.Erased {
		return g
	}
	return (*wireGrain)(g)
}

// grain returns the grain h; outside a scope-limited token's scopes it is
// not found.
func (s *Server) grain(c *gin.Context, memory, h string) (*lethe.Grain, error) {
	return s.view(c, memory).Grain(c.Request.Context(), h)
}

// history answers a version chain (see chain).
func (s *Server) history(c *gin.Context) {
	h, err := hashParam(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	chain, err := s.chain(c, c.Param("memory"), h)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, HistoryResponse{Grains: chain})
}

// chain returns the version chain of h. For a scope-limited token the
// grain asked for must be within its scopes, and versions outside them are
// left out, links to them too (grains.View.Chain).
func (s *Server) chain(c *gin.Context, memory, h string) ([]lethe.Grain, error) {
	if tokenOf(c).Scoped() {
		return s.view(c, memory).Chain(c.Request.Context(), h)
	}
	chain, err := s.lib.History(c.Request.Context(), memory, h)
	if err != nil {
		return nil, err
	}
	if chain == nil {
		chain = []lethe.Grain{}
	}
	return chain, nil
}

func (s *Server) supersede(c *gin.Context, req *SupersedeRequest) (reply, error) {
	if req.BlobHash == "" {
		return nil, grains.FieldError(lethe.CodeInvalidArgument, "blob_hash", "the hash of the version to supersede is required")
	}
	if !grains.ValidHash(req.BlobHash) {
		return nil, grains.FieldError(lethe.CodeInvalidArgument, "blob_hash", "must be 64 lowercase hex digits")
	}
	if err := checkTags("tags", req.Tags); err != nil {
		return nil, err
	}
	memory := c.Param("memory")
	h, err := s.supersedeGrain(c, memory, req.BlobHash, req.GrainInput.Grain(memory), req.Set...)
	if err != nil {
		return nil, err
	}
	return jsonReply{http.StatusCreated, SupersedeResponse{Hash: h, Superseded: req.BlobHash, Status: "superseded"}}, nil
}

// supersedeGrain writes g as the new version of old, setting the fields
// set names even when empty (see lethe.DB.Supersede). A type left out
// carries forward, as Areev's supersede (which names none) expects. A
// scope-limited token supersedes only grains within its scopes, into its
// scopes (a scope set to "", the root, included).
func (s *Server) supersedeGrain(c *gin.Context, memory, old string, g lethe.Grain, set ...string) (string, error) {
	tok := tokenOf(c)
	if tok.Scoped() || g.Type == "" {
		prev, err := s.grain(c, memory, old)
		if err != nil {
			return "", err
		}
		if g.Type == "" {
			g.Type = prev.Type
		}
		if (g.Scope != "" || slices.Contains(set, "scope")) && !tok.AllowsScope(g.Scope) {
			return "", outOfScope("scope")
		}
	}
	return s.lib.Supersede(c.Request.Context(), old, g, set...)
}

// forget hard-deletes by blob_hash, hashes, subject or user_id. A selector
// given empty is empty_selector. Hashes (blob_hash or hashes) given with
// subject or user_id narrow: only the listed grains about that subject or
// by that user are forgotten, as Areev's {"hashes": [...], "user_id": ...}
// does. scopes and namespace confine the forget (see forgetSelected).
func (s *Server) forget(c *gin.Context, req *ForgetRequest) (reply, error) {
	sel := lethe.Selector{Memory: c.Param("memory"), Hashes: req.Hashes, DryRun: req.DryRun, Scopes: req.Scopes}
	if req.Namespace != nil {
		if *req.Namespace == "" {
			return nil, grains.FieldError(lethe.CodeInvalidArgument, "namespace", "empty: leave the field out for every namespace")
		}
		sel.Namespace = *req.Namespace
	}
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
		if f.name == "blob_hash" && !grains.ValidHash(*f.v) {
			return nil, grains.FieldError(lethe.CodeInvalidArgument, "blob_hash", "must be 64 lowercase hex digits")
		}
		*f.dst = *f.v
	}
	res, err := s.forgetSelected(c, sel, req.Force)
	if err != nil {
		return nil, err
	}
	return receiptReply{res.Receipt, res}, nil
}

// forgetSelected forgets what sel selects; force overrides protection
// rules, never holds. A scope-limited token forgets by hash only, and only
// chains whose every version is within its scopes (see withinScopes), as
// they are when the delete runs (Selector.Scopes). sel.Scopes and
// sel.Namespace, the confinement the request asks for, confine it further
// (see confinement), checked by the library when the delete runs.
func (s *Server) forgetSelected(c *gin.Context, sel lethe.Selector, force bool) (*lethe.ForgetResult, error) {
	memory, ctx, tok := sel.Memory, c.Request.Context(), tokenOf(c)
	asked := sel.Confined()
	conf, err := confinement(tok, sel)
	if err != nil {
		return nil, err
	}
	sel.Scopes, sel.Namespace = nil, ""
	// A refusal names the item of the body's hashes at fault (hashes[i]),
	// or blob_hash; a refusal of the library's, the selector.
	sent := sel.Hashes
	item := func(i int) string { return fmt.Sprintf("hashes[%d]", i) }
	field := "blob_hash"
	switch {
	case sel.Hashes != nil:
		field = "hashes"
	case sel.Hash == "" && sel.Subject != "":
		field = "subject"
	case sel.Hash == "" && sel.UserID != "":
		field = "user_id"
	}
	if (sel.Hash != "" || sel.Hashes != nil) && (sel.Subject != "" || sel.UserID != "") {
		narrowed, err := s.narrow(c, sel)
		if err != nil || narrowed == nil {
			return &lethe.ForgetResult{DryRun: sel.DryRun, Hashes: []string{}, Status: "not_found"}, err
		}
		if sel.Hash != "" {
			item = func(int) string { return "blob_hash" }
		} else {
			kept := narrowed.Hashes
			item = func(i int) string { return fmt.Sprintf("hashes[%d]", slices.Index(sent, kept[i])) }
		}
		sel = *narrowed
	}
	if tok.Scoped() {
		if sel.Subject != "" || sel.UserID != "" {
			return nil, apiError(CodeForbidden, "a scope-limited token forgets by hash only",
				"recall within the token's scope, then forget the hashes")
		}
		if err := sel.Validate(); err != nil {
			return nil, err
		}
		if sel.Hash != "" {
			if _, err := s.withinScopes(c, memory, []string{sel.Hash}, true, func(int) string { return "blob_hash" }); err != nil {
				return nil, err
			}
		} else {
			kept, err := s.withinScopes(c, memory, sel.Hashes, false, item)
			if err != nil {
				return nil, err
			}
			if len(kept) == 0 {
				// What the library answers a list that names no grain.
				return &lethe.ForgetResult{DryRun: sel.DryRun, Hashes: []string{}, Status: "not_found"}, nil
			}
			sel.Hashes = kept
		}
	}
	forget := s.lib.Forget
	if force {
		forget = s.lib.ForceForget
	}
	if !conf.Confined() {
		return forget(ctx, sel)
	}
	// The check above answers a hash outside the token's scopes as a
	// missing one; the library checks the scopes (and the namespace asked
	// for) again in the delete's transaction, on the versions it deletes,
	// so that one a concurrent supersede added outside them is refused too.
	sel.Scopes, sel.Namespace = conf.Scopes, conf.Namespace
	res, err := forget(ctx, sel)
	if lethe.ErrorCode(err) == CodeForbidden {
		if asked {
			return nil, chainOutsideAsked(field)
		}
		return nil, chainOutside(field)
	}
	return res, err
}

// confinement returns the confinement of a forget of sel by tok (only its
// Scopes and Namespace are set): the scopes and namespace sel asks for,
// checked as the library checks them (invalid_scope or too_large naming
// scopes or scopes[i], invalid_argument naming namespace), with the scopes
// narrowed to tok's (auth.Token.NarrowScopes; tok's when sel asks for
// none). A prefix that meets none of tok's is forbidden on scopes[i], as a
// recall's scope outside them is.
func confinement(tok *auth.Token, sel lethe.Selector) (lethe.Selector, error) {
	conf := lethe.Selector{Scopes: sel.Scopes, Namespace: sel.Namespace}
	if err := conf.ValidateConfinement(); err != nil {
		return conf, err
	}
	within, outside := tok.NarrowScopes(conf.Scopes)
	if outside >= 0 {
		return conf, &lethe.Error{Code: CodeForbidden, Field: fmt.Sprintf("scopes[%d]", outside),
			Message: "outside this token's scopes", Hint: "name scopes within the token's scope prefixes"}
	}
	conf.Scopes = within
	return conf, nil
}

// chainOutside is a scope-limited token's refusal to forget a chain with a
// version outside its scopes, on field; it names no hash.
func chainOutside(field string) error {
	return &lethe.Error{Code: CodeForbidden, Field: field,
		Message: "a version of the chain is outside this token's scopes",
		Hint:    "forgetting a grain forgets its whole chain; a token without scope limits can"}
}

// chainOutsideAsked is the refusal to forget a chain with a version
// outside the scopes or namespace the request confined the forget to (or
// the token's scopes), on field; it names no hash.
func chainOutsideAsked(field string) error {
	return &lethe.Error{Code: CodeForbidden, Field: field,
		Message: "a version of the chain is outside the scopes or namespace this forget is confined to",
		Hint:    "forgetting a grain forgets its whole chain"}
}

// withinScopes returns the hashes a scope-limited token may forget, and
// refuses, with forbidden on field(i), the hash at i whose chain has a
// version outside its scopes (forgetting it would delete that version
// too; the answer names no hash of it). A hash outside the token's scopes
// is no grain to it: passed over as a missing one is, or for a forget by
// one hash (single) not_found as a missing one is
// (grains.View.Forgettable).
func (s *Server) withinScopes(c *gin.Context, memory string, hashes []string, single bool, field func(i int) string) ([]string, error) {
	return s.view(c, memory).Forgettable(c.Request.Context(), hashes, single, field)
}

// narrow turns a selector of hashes and a subject or user into one of the
// listed hashes whose grain is about that subject and by that user, or nil
// when none is. A listed hash that names no grain (or one outside a
// scope-limited token's scopes) is left out as one that does not match.
func (s *Server) narrow(c *gin.Context, sel lethe.Selector) (*lethe.Selector, error) {
	hashes := sel.Hashes
	if sel.Hash != "" {
		if sel.Hashes != nil {
			return nil, grains.Errorf(lethe.CodeInvalidArgument, "give blob_hash or hashes, not both")
		}
		hashes = []string{sel.Hash}
	}
	if len(hashes) == 0 {
		return nil, &lethe.Error{Code: lethe.CodeEmptySelector, Field: "hashes", Message: "an empty list selects nothing"}
	}
	if len(hashes) > grains.MaxBatch {
		return nil, grains.FieldError(lethe.CodeTooLarge, "hashes", "at most 10000 hashes")
	}
	// The hashes, subject and user are checked as the library checks a
	// forget by them (a user id of 257 bytes, a NUL), before any lookup.
	check := lethe.Selector{Memory: sel.Memory, Hashes: hashes, Subject: sel.Subject, UserID: sel.UserID}
	if err := check.Validate(); err != nil {
		return nil, err
	}
	// Compared as the library's forget by subject (case and spaces folded)
	// and by user (exact) compare.
	matches := func(g *lethe.Grain) bool {
		return (sel.Subject == "" || grains.NormalizeValue(sel.Subject) == grains.NormalizeValue(g.Subject)) &&
			(sel.UserID == "" || grains.NormalizeText(sel.UserID) == grains.NormalizeText(g.UserID))
	}
	var kept []string
	for i, h := range hashes {
		if !grains.ValidHash(h) {
			return nil, grains.FieldError(lethe.CodeInvalidArgument, fmt.Sprintf("hashes[%d]", i), "must be 64 lowercase hex digits")
		}
		g, err := s.grain(c, sel.Memory, h) // outside a token's scopes: not found
		if lethe.ErrorCode(err) == lethe.CodeNotFound || lethe.ErrorCode(err) == lethe.CodeErased {
			continue
		}
		if err != nil {
			return nil, err
		}
		if matches(g) {
			kept = append(kept, h)
		}
	}
	if kept == nil {
		return nil, nil
	}
	return &lethe.Selector{Memory: sel.Memory, Hashes: kept, DryRun: sel.DryRun}, nil
}
