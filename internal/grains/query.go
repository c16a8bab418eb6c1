package grains

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Query selects grains for recall. Every non-empty filter must match; with no
// filter, Recall lists the memory's grains. Superseded and archived grains
// are left out unless asked for.
type Query struct {
	Memory    string
	Subject   string
	Relation  string
	Object    string
	Type      string
	Namespace string
	// Scope is a prefix: "acme" matches acme, acme/prod and acme/prod/bot1.
	// One leading and one trailing '/' are dropped (TrimScope); "/acme//"
	// is invalid_scope.
	Scope  string
	UserID string
	// Tags must all be present on a grain.
	Tags []string
	// Text ranks grains by BM25 over the words of their content, subject
	// and object; Embedding ranks them by cosine similarity to it. Either
	// makes the query a search: one page of the best Limit grains, each
	// with its Score, and no cursor. With both, the scores add. Errors
	// name Text "query", as the HTTP API and MCP do. Text "" is no
	// search; Text of only white space is invalid_argument.
	Text      string
	Embedding []float32

	IncludeSuperseded bool
	IncludeArchived   bool
	// Disclosure marks a read made to disclose what is held (an export, a
	// history), not a use of the grains: it records no retrieval, so it
	// neither refreshes their retrieval-time decay nor bumps their
	// salience, and a subject access request does not prolong retention.
	Disclosure bool

	// Limit bounds the page (default 100, at most 1000); Cursor is the Next
	// of the previous page.
	Limit  int
	Cursor string
}

// Default and maximum page sizes.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Normalize fills defaults in place.
func (q *Query) Normalize() {
	if q.Memory == "" {
		q.Memory = DefaultMemory
	}
	// "/acme//" is malformed, never "acme" (nor "///" the root).
	q.Scope = TrimScope(q.Scope)
	for _, f := range []*string{&q.Subject, &q.Relation, &q.Object, &q.UserID} {
		*f = NormalizeText(*f)
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if CheckTags("tags", q.Tags) == nil { // else Validate refuses it
		q.Tags = normalizeTags(q.Tags)
	}
}

// Validate checks a normalized query.
func (q *Query) Validate() error {
	if err := ValidateMemory(q.Memory); err != nil {
		return err
	}
	if err := ValidateScope(q.Scope); err != nil {
		return err
	}
	// A bound passed is too_large, a value under the least one
	// invalid_argument, as for every bound.
	if q.Limit < 0 {
		return FieldError(CodeInvalidArgument, "limit", "must be at least 1 (left out: 100)")
	}
	if q.Limit > MaxLimit {
		return FieldError(CodeTooLarge, "limit", "at most 1000")
	}
	if q.Type != "" && !typePattern.MatchString(q.Type) {
		return FieldError(CodeInvalidArgument, "type", "not a grain type")
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"subject", q.Subject, MaxTripleBytes}, {"relation", q.Relation, MaxTripleBytes}, {"object", q.Object, MaxTripleBytes},
		{"user_id", q.UserID, MaxUserIDBytes}, {"cursor", q.Cursor, MaxCursorBytes}} {
		if err := checkText(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	if err := ValidateNamespace(q.Namespace); err != nil {
		return err
	}
	// An empty tag is refused, as in a write: dropped, it would widen the
	// filter to every grain.
	if err := CheckTags("tags", q.Tags); err != nil {
		return err
	}
	// Every list in a query is bounded as writes are: each tag is one more
	// index lookup.
	if len(q.Tags) > MaxTags {
		return FieldError(CodeTooLarge, "tags", "at most 64 tags")
	}
	// Text "" is no search; only white space is a search for nothing,
	// refused as the API refuses it (NonEmptyFilters).
	if q.Text != "" && strings.TrimSpace(q.Text) == "" {
		return EmptyFilter("query")
	}
	if err := checkText("query", q.Text, MaxQueryText); err != nil {
		return err
	}
	if err := ValidateEmbedding(q.Embedding); err != nil {
		return err
	}
	if q.Search() && q.Cursor != "" {
		return &Error{Code: CodeInvalidArgument, Field: "cursor", Message: "a text or vector search has one page",
			Hint: "raise limit (at most 1000) instead of paging"}
	}
	for _, t := range q.Tags {
		if err := checkText("tags", t, MaxTagBytes); err != nil {
			return err
		}
	}
	return nil
}

// Search reports whether q is a text or vector search.
func (q *Query) Search() bool { return q.Text != "" || q.Embedding != nil }

// Matches reports whether g is selected by s's subject and user (each
// compared as a forget by it compares: the subject with case and spaces
// folded, the user exactly after NFC); an empty one matches every grain.
func (s *Selector) Matches(g *Grain) bool {
	return (s.Subject == "" || NormalizeValue(s.Subject) == NormalizeValue(g.Subject)) &&
		(s.UserID == "" || NormalizeText(s.UserID) == NormalizeText(g.UserID))
}

// MaxCursorBytes bounds a recall cursor.
const MaxCursorBytes = 512

// Selector names grains to forget: one of Hash, Hashes, Subject or UserID,
// or Hash or Hashes narrowed (AND) by Subject and/or UserID: then only the
// listed grains about that subject and by that user are selected (Areev's
// {"hashes": [...], "user_id": "john"}). An empty selector is an error,
// never "everything".
type Selector struct {
	Memory  string
	Hash    string
	Hashes  []string
	Subject string
	UserID  string
	// DryRun reports what the forget would delete (and the hold or
	// protection rule that would refuse it) and changes nothing: no grain,
	// no audit event.
	DryRun bool
	// Scopes, when not nil, confines the forget to version chains whose
	// every version lies at or below one of these scope prefixes (as a
	// scope-limited token's). Forgetting a grain forgets its whole chain,
	// so a chain it selects with a version outside them, or with a version
	// that was erased (a caller confined to scopes cannot read what it
	// was), refuses the whole forget, dry run or not, with code forbidden:
	// nothing deleted, nothing audited. The rule is checked on the rows
	// the delete's transaction removes, so a version that a concurrent
	// supersede adds outside the scopes is refused with the rest. A prefix
	// names a scope ("acme" covers acme and acme/prod), never the root;
	// nil is every scope, and an empty list is refused.
	Scopes []string
	// Namespace, when set, confines the forget to version chains whose
	// every version is in this namespace (as an MCP session locked to it),
	// by the rule of Scopes: a chain it selects with a version in another
	// namespace, or with a version that was erased, refuses the whole
	// forget with code forbidden, checked on the rows the delete's
	// transaction removes. It confines with Scopes when both are set; ""
	// is every namespace.
	Namespace string
}

// InNamespace reports whether a grain in namespace ns ("" is the default
// namespace) lies within s.Namespace (always, when it is "").
func (s *Selector) InNamespace(ns string) bool {
	if ns == "" {
		ns = DefaultNamespace
	}
	return s.Namespace == "" || ns == s.Namespace
}

// Confined reports whether s confines the forget (Scopes or Namespace).
func (s *Selector) Confined() bool { return s.Scopes != nil || s.Namespace != "" }

// InScopes reports whether a grain in scope lies within s.Scopes (always,
// when Scopes is nil).
func (s *Selector) InScopes(scope string) bool {
	if s.Scopes == nil {
		return true
	}
	scope = strings.Trim(scope, "/")
	return slices.ContainsFunc(s.Scopes, func(p string) bool { return InScope(scope, p) })
}

// Narrowed reports whether s lists hashes narrowed by a subject or user.
func (s *Selector) Narrowed() bool {
	return (s.Hash != "" || s.Hashes != nil) && (s.Subject != "" || s.UserID != "")
}

// Validate normalizes the memory and checks that one selector is set, or
// hashes narrowed by a subject and/or user, that Scopes, if set, are
// scope prefixes (s.Scopes becomes a cleaned copy of them), and that
// Namespace, if set, is a namespace.
func (s *Selector) Validate() error {
	if s.Memory == "" {
		s.Memory = DefaultMemory
	}
	s.Subject, s.UserID = NormalizeText(s.Subject), NormalizeText(s.UserID)
	if err := ValidateMemory(s.Memory); err != nil {
		return err
	}
	n := 0
	if s.Hash != "" {
		n++
		if !ValidHash(s.Hash) {
			return FieldError(CodeInvalidArgument, "hash", "must be 64 lowercase hex digits")
		}
	}
	if s.Hashes != nil {
		n++
		if len(s.Hashes) == 0 {
			return &Error{Code: CodeEmptySelector, Field: "hashes", Message: "an empty list selects nothing"}
		}
		if len(s.Hashes) > MaxBatch {
			return FieldError(CodeTooLarge, "hashes", "at most 10000 hashes")
		}
		for i, h := range s.Hashes {
			if !ValidHash(h) {
				return FieldError(CodeInvalidArgument, fmt.Sprintf("hashes[%d]", i), "must be 64 lowercase hex digits")
			}
		}
	}
	if s.Subject != "" {
		n++
		if strings.TrimSpace(s.Subject) == "" {
			return &Error{Code: CodeEmptySelector, Field: "subject", Message: "a blank subject selects nothing"}
		}
		if err := checkText("subject", s.Subject, MaxTripleBytes); err != nil {
			return err
		}
	}
	if s.UserID != "" {
		n++
		if err := ValidateUserID(s.UserID); err != nil {
			return err
		}
	}
	if err := s.ValidateConfinement(); err != nil {
		return err
	}
	switch {
	case n == 0:
		return &Error{Code: CodeEmptySelector, Message: "name what to forget: a hash, hashes, a subject or a user_id",
			Hint: "an empty selector never means everything; to erase a whole user or scope use forget-user or scope-erase"}
	case s.Hash != "" && s.Hashes != nil:
		return &Error{Code: CodeInvalidArgument, Message: "give hash or hashes, not both"}
	case n > 1 && !s.Narrowed():
		return &Error{Code: CodeInvalidArgument, Message: "give one of hash, hashes, subject or user_id, or hashes narrowed by subject and/or user_id",
			Hint: "subject and user_id together narrow a list of hashes; alone, forget by one of them"}
	}
	return nil
}

// ValidateConfinement checks the confinement part of s, as Validate does:
// that Scopes, if set, are scope prefixes (s.Scopes becomes a cleaned copy
// of them; code invalid_scope or too_large naming scopes or scopes[i]),
// and that Namespace, if set, is a namespace (invalid_argument naming
// namespace).
func (s *Selector) ValidateConfinement() error {
	if err := s.validateScopes(); err != nil {
		return err
	}
	return ValidateNamespace(s.Namespace)
}

// maxSelectorScopes bounds Selector.Scopes, as a token's scopes are.
const maxSelectorScopes = 64

// validateScopes checks s.Scopes as a token's scopes are checked, and
// cleans a copy of them (one leading or trailing '/' dropped).
func (s *Selector) validateScopes() error {
	if s.Scopes == nil {
		return nil
	}
	if len(s.Scopes) == 0 {
		return FieldError(CodeInvalidScope, "scopes", "an empty list; leave scopes out for every scope")
	}
	if len(s.Scopes) > maxSelectorScopes {
		return FieldError(CodeTooLarge, "scopes", "at most 64 scopes")
	}
	clean := make([]string, len(s.Scopes))
	for i, p := range s.Scopes {
		field := fmt.Sprintf("scopes[%d]", i)
		if strings.Trim(p, "/") == "" {
			return FieldError(CodeInvalidScope, field, "an empty scope prefix; leave scopes out for every scope")
		}
		c, err := CleanScope(p)
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				named := *e
				named.Field = field
				return &named
			}
			return err
		}
		clean[i] = c
	}
	s.Scopes = clean
	return nil
}

// NonEmptyFilters are the recall filters refused with [EmptyFilter] when
// given empty (or only white space): "" never means "every value", nor
// every type or namespace; a filter left out does. Nor does a text search
// ("query") for nothing mean no search, nor find nothing: left out, there
// is no search. The HTTP body, CAL's RECALL WHERE (which has no query), the
// MCP recall tool and the CLI all refuse by this one list.
var NonEmptyFilters = []string{"subject", "relation", "object", "user_id", "type", "namespace", "query"}

// EmptyFilter is the error of a recall filter on field given empty.
func EmptyFilter(field string) *Error {
	msg := "empty: leave the field out to match every value"
	if field == "query" {
		msg = "empty: leave the field out for no text search"
	}
	return &Error{Code: CodeInvalidArgument, Field: field, Message: msg,
		Hint: "an empty filter never means everything"}
}
