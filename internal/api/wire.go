package api

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// The wire types: request and response bodies of the HTTP API. The CLI's
// remote mode marshals the same types, so client and server cannot drift.
// Grains come back as [lethe.Grain], whose JSON field names are the
// contract.

// GrainInput is a grain as a client writes it: the writable fields only.
// The memory comes from the route; hash, chain links and retrieval
// statistics are the server's. Salience, in [0,1], starts at 1 when not
// given.
type GrainInput struct {
	Type       string            `json:"type,omitempty"`
	Subject    string            `json:"subject,omitempty"`
	Relation   string            `json:"relation,omitempty"`
	Object     string            `json:"object,omitempty"`
	Content    string            `json:"content,omitempty"`
	Namespace  string            `json:"namespace,omitempty"`
	Scope      string            `json:"scope,omitempty"`
	UserID     string            `json:"user_id,omitempty"`
	Tags       []string          `json:"tags,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Importance float64           `json:"importance,omitempty"`
	Confidence float64           `json:"confidence,omitempty"`
	Salience   float64           `json:"salience,omitempty"`
	Pinned     bool              `json:"pinned,omitempty"`
	Embedding  []float32         `json:"embedding,omitempty"`
	// CreatedAt is for imports; the server's clock otherwise.
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// Grain returns in as a grain of memory.
func (in *GrainInput) Grain(memory string) lethe.Grain {
	return lethe.Grain{
		Memory: memory, Type: in.Type, Subject: in.Subject, Relation: in.Relation, Object: in.Object,
		Content: in.Content, Namespace: in.Namespace, Scope: in.Scope, UserID: in.UserID,
		Tags: in.Tags, Metadata: in.Metadata, Importance: in.Importance, Confidence: in.Confidence,
		Salience: in.Salience, Pinned: in.Pinned, CreatedAt: in.CreatedAt, Embedding: in.Embedding,
	}
}

// InputOf returns the writable fields of g.
func InputOf(g *lethe.Grain) GrainInput {
	return GrainInput{
		Type: g.Type, Subject: g.Subject, Relation: g.Relation, Object: g.Object, Content: g.Content,
		Namespace: g.Namespace, Scope: g.Scope, UserID: g.UserID, Tags: g.Tags, Metadata: g.Metadata,
		Importance: g.Importance, Confidence: g.Confidence, Salience: g.Salience, Pinned: g.Pinned, CreatedAt: g.CreatedAt,
		Embedding: g.Embedding,
	}
}

// isZero reports whether no field of in is set.
func (in *GrainInput) isZero() bool {
	return in.Type == "" && in.Subject == "" && in.Relation == "" && in.Object == "" && in.Content == "" &&
		in.Namespace == "" && in.Scope == "" && in.UserID == "" && in.Tags == nil && in.Metadata == nil &&
		in.Importance == 0 && in.Confidence == 0 && in.Salience == 0 && !in.Pinned && in.CreatedAt.IsZero() && in.Embedding == nil
}

// AddBatchRequest is the body of a batch add: POST .../grains with
// {"grains": [...]}. A single add sends one GrainInput as the body.
type AddBatchRequest struct {
	Grains []GrainInput `json:"grains"`
}

// addRequest is what the server decodes: one grain, or a batch.
type addRequest struct {
	GrainInput
	Grains []GrainInput `json:"grains"`
}

// AddResponse answers a single add.
type AddResponse struct {
	Hash string `json:"hash"`
}

// AddBatchResponse answers a batch add: the hashes in request order.
type AddBatchResponse struct {
	Hashes []string `json:"hashes"`
	Count  int      `json:"count"`
}

// RecallRequest is the body of POST .../recall. The query travels in the
// body so that no personal value ends up in a URL or an access log.
type RecallRequest struct {
	Subject           string   `json:"subject,omitempty"`
	Relation          string   `json:"relation,omitempty"`
	Object            string   `json:"object,omitempty"`
	Type              string   `json:"type,omitempty"`
	Namespace         string   `json:"namespace,omitempty"`
	Scope             string   `json:"scope,omitempty"`
	UserID            string   `json:"user_id,omitempty"`
	Tags              []string `json:"tags,omitempty"`
	IncludeSuperseded bool     `json:"include_superseded,omitempty"`
	IncludeArchived   bool     `json:"include_archived,omitempty"`
	Limit             int      `json:"limit,omitempty"`
	Cursor            string   `json:"cursor,omitempty"`
	// Text ("query") and Embedding make the recall a search (see
	// lethe.Query.Text).
	Text      string    `json:"query,omitempty"`
	Embedding []float32 `json:"embedding,omitempty"`
	// given names the filters (grains.NonEmptyFilters) the body gives, empty or not: read from its keys by the server.
	given []string
}

// readKeys records the filters the body names.
func (r *RecallRequest) readKeys(body []byte) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return
	}
	r.given = r.given[:0]
	for _, f := range grains.NonEmptyFilters {
		if _, ok := m[f]; ok {
			r.given = append(r.given, f)
		}
	}
}

// checkFilters refuses a filter the body gives empty: "" never means
// "every value" (a filter left out does), nor every type or namespace.
func (r *RecallRequest) checkFilters() error {
	for _, f := range r.given {
		v := map[string]string{"subject": r.Subject, "relation": r.Relation, "object": r.Object, "user_id": r.UserID,
			"type": r.Type, "namespace": r.Namespace, "query": r.Text}[f]
		if strings.TrimSpace(v) == "" {
			return grains.EmptyFilter(f)
		}
	}
	return nil
}

// Query returns r as a query on memory.
func (r *RecallRequest) Query(memory string) lethe.Query {
	return lethe.Query{
		Memory: memory, Subject: r.Subject, Relation: r.Relation, Object: r.Object, Type: r.Type,
		Namespace: r.Namespace, Scope: r.Scope, UserID: r.UserID, Tags: r.Tags,
		IncludeSuperseded: r.IncludeSuperseded, IncludeArchived: r.IncludeArchived,
		Limit: r.Limit, Cursor: r.Cursor, Text: r.Text, Embedding: r.Embedding,
	}
}

// RecallRequestOf returns q as a request body (its memory goes in the route).
func RecallRequestOf(q *lethe.Query) RecallRequest {
	return RecallRequest{
		Subject: q.Subject, Relation: q.Relation, Object: q.Object, Type: q.Type,
		Namespace: q.Namespace, Scope: q.Scope, UserID: q.UserID, Tags: q.Tags,
		IncludeSuperseded: q.IncludeSuperseded, IncludeArchived: q.IncludeArchived,
		Limit: q.Limit, Cursor: q.Cursor, Text: q.Text, Embedding: q.Embedding,
	}
}

// HistoryResponse answers GET .../grains/{hash}/history: the version
// chain, newest first.
type HistoryResponse struct {
	Grains []lethe.Grain `json:"grains"`
}

// SupersedeRequest is the body of POST .../supersede: the hash of the
// version to replace and the new field values. A field left out carries
// forward (type included); a field given is set to its value, empty
// included: "content": "" clears the content, "confidence": 0 sets 0,
// "tags": [] clears the tags.
type SupersedeRequest struct {
	BlobHash string `json:"blob_hash"`
	GrainInput
	// Set names the fields given (JSON names, see lethe.Supersede): read
	// from the body's keys by the server; a client sets it to send those
	// fields even at their zero value.
	Set []string `json:"-"`
}

// nullable names the fields a supersede's body may give as null, their
// empty value (see decodeStrict): the settable ones.
func (r *SupersedeRequest) nullable() []string { return grains.SettableFields }

// readKeys records the settable fields the body names.
func (r *SupersedeRequest) readKeys(body []byte) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return
	}
	r.Set = r.Set[:0]
	for _, f := range grains.SettableFields {
		if _, ok := m[f]; ok {
			r.Set = append(r.Set, f)
		}
	}
}

// zeroValues are what a client sends for a field Set names at its zero
// value.
var zeroValues = map[string]any{"tags": []string{}, "metadata": map[string]string{}, "embedding": []float32{},
	"importance": 0, "confidence": 0, "salience": 0, "pinned": false}

// MarshalJSON encodes r with every field Set names, at its zero value
// when r leaves it there.
func (r SupersedeRequest) MarshalJSON() ([]byte, error) {
	type plain SupersedeRequest
	b, err := json.Marshal(plain(r))
	if err != nil || len(r.Set) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, f := range r.Set {
		if _, ok := m[f]; ok {
			continue
		}
		z, ok := zeroValues[f]
		if !ok {
			z = ""
		}
		if m[f], err = json.Marshal(z); err != nil {
			return nil, err
		}
	}
	return json.Marshal(m)
}

// SupersedeResponse answers a supersede: the new version's hash, the
// superseded one's, and status "superseded", as Areev answers.
type SupersedeResponse struct {
	Hash       string `json:"hash"`
	Superseded string `json:"superseded"`
	Status     string `json:"status"`
}

// ForgetRequest is the body of POST .../forget: one selector, or hashes
// (blob_hash or hashes) with subject and/or user_id, which narrow them (AND).
// A selector given as an empty string or an empty list is an
// empty_selector error, never "everything".
type ForgetRequest struct {
	BlobHash *string  `json:"blob_hash,omitempty"`
	Hashes   []string `json:"hashes,omitempty"`
	Subject  *string  `json:"subject,omitempty"`
	UserID   *string  `json:"user_id,omitempty"`
	// Scopes and Namespace confine the forget (lethe.Selector.Scopes and
	// Namespace): it deletes only chains whose every version lies within
	// these scope prefixes and this namespace when the delete runs, and
	// refuses the whole forget, 403 forbidden, otherwise. They only
	// narrow: a scope-limited token's scopes confine it as well, and a
	// prefix that meets none of them is refused. An empty list, an empty
	// namespace or a malformed value is refused; leave a field out for
	// every scope or namespace. lethe mcp --server sends its lock in them.
	Scopes    []string `json:"scopes,omitempty"`
	Namespace *string  `json:"namespace,omitempty"`
	// Force overrides the policy's protection rules (pinned grains,
	// protected types, high importance), never legal holds; the audit
	// event says so.
	Force bool `json:"force,omitempty"`
	// DryRun answers what the forget would delete, or the hold or
	// protection rule that would refuse it, and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// ForgetResponse answers a forget: {"count": n, "status": "forgotten" |
// "not_found", "hashes": [...]}.
type ForgetResponse = lethe.ForgetResult

// ErrorResponse is every error's body. Code is stable (see docs/api.md);
// Message is safe to show and never carries personal data.
type ErrorResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Hint    string `json:"hint,omitempty"`
}

// TokenRequest is the body of POST /api/tokens. ExpiresIn, seconds from
// the token's creation as OAuth 2.0's expires_in (RFC 6749 section 5.1),
// or ExpiresAt make the token expire: at most one of them, within the
// bounds of auth.Spec.Expiry. Neither: it works until it is revoked.
type TokenRequest struct {
	Roles     []string   `json:"roles"`
	Memories  []string   `json:"memories"`
	Scopes    []string   `json:"scopes,omitempty"`
	ExpiresIn *int64     `json:"expires_in,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// TokenInfo describes a token, never its secret. ExpiresAt is absent for
// a token that works until it is revoked.
type TokenInfo struct {
	ID        string     `json:"id"`
	Roles     []string   `json:"roles"`
	Memories  []string   `json:"memories"`
	Scopes    []string   `json:"scopes,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// TokenCreated answers a token creation: the only time the secret is
// shown.
type TokenCreated struct {
	Token string `json:"token"`
	TokenInfo
}

// TokenList answers GET /api/tokens.
type TokenList struct {
	Tokens []TokenInfo `json:"tokens"`
}

// ForgetUserRequest is the body of POST .../forget-user.
type ForgetUserRequest struct {
	UserID *string `json:"user_id"`
	// DryRun reports the count of grains the erasure would make
	// unreadable and the hold that would refuse it, and changes nothing.
	DryRun bool `json:"dry_run,omitempty"`
}

// ExportRequest is the body of POST .../export: the user, and the age
// X25519 recipient ("age1...") the export is encrypted to.
type ExportRequest struct {
	UserID    *string `json:"user_id"`
	Recipient *string `json:"recipient"`
}

// HistoryExportRequest is the body of POST .../export/history: exactly one
// of hash or subject, and the age X25519 recipient ("age1...") the export
// is encrypted to.
type HistoryExportRequest struct {
	Hash      *string `json:"hash,omitempty"`
	Subject   *string `json:"subject,omitempty"`
	Recipient *string `json:"recipient"`
}

// ScopeEraseRequest is the body of POST .../scope-erase: scope, or
// scope_path (Areev's name for it), not both.
type ScopeEraseRequest struct {
	Scope     *string `json:"scope,omitempty"`
	ScopePath *string `json:"scope_path,omitempty"`
	// DryRun: see ForgetUserRequest.
	DryRun bool `json:"dry_run,omitempty"`
}

// EraseMemoryRequest is the body of POST .../erase: Confirm must repeat
// the memory's name.
type EraseMemoryRequest struct {
	Confirm string `json:"confirm"`
	// DryRun: see ForgetUserRequest.
	DryRun bool `json:"dry_run,omitempty"`
}

// ErasureResponse answers a crypto-erasure: the count of grains made
// unreadable, the destroyed key's fingerprint, the time, and the audit
// receipt with its proof.
type ErasureResponse = lethe.Erasure

// HoldRequest is the body of POST .../holds: exactly one of scope or
// user_id.
type HoldRequest struct {
	Scope  *string `json:"scope,omitempty"`
	UserID *string `json:"user_id,omitempty"`
}

// HoldList answers GET .../holds.
type HoldList struct {
	Holds []lethe.Hold `json:"holds"`
}

// PurgeRequest is the body of POST .../purge/stale: the decay purge's
// options; fields left out take the policy's values.
type PurgeRequest struct {
	Curve        string   `json:"curve,omitempty"`
	HalfLifeDays float64  `json:"half_life_days,omitempty"`
	DecayPerDay  float64  `json:"decay_per_day,omitempty"`
	StrengthDays float64  `json:"strength_days,omitempty"`
	Threshold    *float64 `json:"threshold,omitempty"`
	MinAgeDays   *int     `json:"min_age_days,omitempty"`
	Batch        int      `json:"batch,omitempty"`
	Namespace    string   `json:"namespace,omitempty"`
	DryRun       bool     `json:"dry_run,omitempty"`
}

// refusedEmpty names the fields a purge's body may not give as "": an
// empty namespace or curve is never the policy's (leave the field out).
func (r *PurgeRequest) refusedEmpty() []string { return []string{"curve", "namespace"} }

// Options returns r as the library's options for memory.
func (r *PurgeRequest) Options(memory string) lethe.PurgeOptions {
	return lethe.PurgeOptions{Memory: memory, Curve: lethe.Curve(r.Curve), HalfLifeDays: r.HalfLifeDays,
		DecayPerDay: r.DecayPerDay, StrengthDays: r.StrengthDays, Threshold: r.Threshold, MinAgeDays: r.MinAgeDays,
		Batch: r.Batch, Namespace: r.Namespace, DryRun: r.DryRun}
}

// PurgeRequestOf returns opts as a request body.
func PurgeRequestOf(o *lethe.PurgeOptions) PurgeRequest {
	return PurgeRequest{Curve: string(o.Curve), HalfLifeDays: o.HalfLifeDays, DecayPerDay: o.DecayPerDay,
		StrengthDays: o.StrengthDays, Threshold: o.Threshold, MinAgeDays: o.MinAgeDays, Batch: o.Batch,
		Namespace: o.Namespace, DryRun: o.DryRun}
}

// ArchiveRequest is the body of POST .../archive: hashes to archive
// those grains, or (without hashes) an archive ladder run with its
// trigger (default memory_pressure) and dry_run.
type ArchiveRequest struct {
	Hashes  []string `json:"hashes,omitempty"`
	Trigger string   `json:"trigger,omitempty"`
	DryRun  bool     `json:"dry_run,omitempty"`
}

// refusedEmpty names the fields an archive's body may not give as "": an
// empty trigger is not the default one (leave the field out).
func (r *ArchiveRequest) refusedEmpty() []string { return []string{"trigger"} }

// RiskSweepRequest is the body of POST .../risk-sweep.
type RiskSweepRequest struct {
	Batch  int  `json:"batch,omitempty"`
	DryRun bool `json:"dry_run,omitempty"`
}

// HashList answers GET .../archive/candidates.
type HashList struct {
	Hashes []string `json:"hashes"`
}
