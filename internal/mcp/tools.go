package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// GrainFields are the fields of a grain a caller writes.
type GrainFields struct {
	Type       string            `json:"type" jsonschema:"fact, belief, event, state, checkpoint, observation, goal, caveat, summary, or a custom word"`
	Subject    string            `json:"subject,omitempty" jsonschema:"the triple's subject"`
	Relation   string            `json:"relation,omitempty" jsonschema:"the triple's relation"`
	Object     string            `json:"object,omitempty" jsonschema:"the triple's object"`
	Content    string            `json:"content,omitempty" jsonschema:"free text"`
	Namespace  string            `json:"namespace,omitempty" jsonschema:"namespace (default: default, or the session's lock)"`
	Scope      string            `json:"scope,omitempty" jsonschema:"scope path such as acme/prod/bot1 (never personal data)"`
	UserID     string            `json:"user_id,omitempty" jsonschema:"the data subject the grain is about"`
	Tags       []string          `json:"tags,omitempty" jsonschema:"non-empty strings: an empty tag is refused (invalid_argument, field tags[i])"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Importance float64           `json:"importance,omitempty" jsonschema:"0 to 1; at or above the policy's threshold (0.9 by default) the grain is protected from forget"`
	Confidence float64           `json:"confidence,omitempty" jsonschema:"0 to 1 (default 1)"`
	Salience   float64           `json:"salience,omitempty" jsonschema:"0 to 1 (default 1); it decays while nobody recalls the grain, and the archive ladder archives grains whose salience falls below its threshold"`
	Pinned     bool              `json:"pinned,omitempty" jsonschema:"pinned grains never decay and are protected from forget"`
	Embedding  []float32         `json:"embedding,omitempty" jsonschema:"an optional vector for vector recall; every embedding of a memory has the dimension of its first"`
}

func (f *GrainFields) grain(memory string) lethe.Grain {
	return lethe.Grain{Memory: memory, Type: f.Type, Subject: f.Subject, Relation: f.Relation, Object: f.Object,
		Content: f.Content, Namespace: f.Namespace, Scope: f.Scope, UserID: f.UserID, Tags: f.Tags,
		Metadata: f.Metadata, Importance: f.Importance, Confidence: f.Confidence, Salience: f.Salience, Pinned: f.Pinned,
		Embedding: f.Embedding}
}

// AddInput is the add tool's input.
type AddInput struct {
	Memory string `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	GrainFields
}

// AddOutput is the add tool's result.
type AddOutput struct {
	Hash string `json:"hash" jsonschema:"the grain's hash; the same content in the same scope gives the existing hash"`
}

// RecallInput is the recall tool's input: every filter of the library's
// Query.
type RecallInput struct {
	Memory            string    `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	Subject           string    `json:"subject,omitempty"`
	Relation          string    `json:"relation,omitempty"`
	Object            string    `json:"object,omitempty"`
	Type              string    `json:"type,omitempty"`
	Namespace         string    `json:"namespace,omitempty"`
	Scope             string    `json:"scope,omitempty" jsonschema:"a scope prefix: acme matches acme, acme/prod and below"`
	UserID            string    `json:"user_id,omitempty"`
	Tags              []string  `json:"tags,omitempty" jsonschema:"every tag must be present"`
	IncludeSuperseded bool      `json:"include_superseded,omitempty"`
	IncludeArchived   bool      `json:"include_archived,omitempty"`
	Query             string    `json:"query,omitempty" jsonschema:"text search over subject, object and content (BM25 over blind word tokens); results carry a score; leave it out for no search (empty or white space is invalid_argument)"`
	Embedding         []float32 `json:"embedding,omitempty" jsonschema:"vector recall: the nearest grains by cosine similarity; with query, a hybrid rank"`
	Limit             int       `json:"limit,omitempty" jsonschema:"page size, 1 to 1000 (default 100)"`
	Cursor            string    `json:"cursor,omitempty" jsonschema:"the next of the previous page (not with query or embedding: a search answers one page)"`
}

// RecallOutput is one page of grains.
type RecallOutput struct {
	Grains []lethe.Grain `json:"grains"`
	Count  int           `json:"count"`
	Next   string        `json:"next,omitempty" jsonschema:"cursor of the following page, if any"`
}

// SupersedeInput is the supersede tool's input.
type SupersedeInput struct {
	Memory string `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	Hash   string `json:"hash" jsonschema:"the newest version's hash"`
	GrainFields
}

// SupersedeOutput is the supersede tool's result.
type SupersedeOutput struct {
	Hash       string `json:"hash" jsonschema:"the new version's hash"`
	Superseded string `json:"superseded" jsonschema:"the old version's hash"`
}

// HashInput names one grain.
type HashInput struct {
	Memory string `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	Hash   string `json:"hash" jsonschema:"a grain's hash (64 hex digits)"`
}

// HistoryOutput is a version chain, newest first.
type HistoryOutput struct {
	Grains []lethe.Grain `json:"grains"`
}

// ForgetInput is the forget tool's input: at most one target; none runs
// the risk sweep.
type ForgetInput struct {
	Memory  string   `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	Hash    *string  `json:"hash,omitempty" jsonschema:"forget this grain and every version of its chain"`
	Hashes  []string `json:"hashes,omitempty" jsonschema:"forget these grains and their chains"`
	Subject *string  `json:"subject,omitempty" jsonschema:"forget the grains with this subject that the caller can recall"`
	UserID  *string  `json:"user_id,omitempty" jsonschema:"forget the grains of this user that the caller can recall"`
	DryRun  bool     `json:"dry_run,omitempty" jsonschema:"report what would be forgotten (or, with no target, what the risk sweep would drop and compress) without changing anything"`
}

// ForgetOutput is the forget tool's result, and its error result when
// protection refuses (ok false, preserved true, reason, hint).
type ForgetOutput struct {
	OK     bool   `json:"ok"`
	DryRun bool   `json:"dry_run"`
	Mode   string `json:"mode" jsonschema:"hash, hashes, subject, user_id or sweep"`
	// Target modes.
	Count  int      `json:"count" jsonschema:"grains forgotten (or, in a dry run, that would be), every version included"`
	Hashes []string `json:"hashes,omitempty"`
	Status string   `json:"status,omitempty" jsonschema:"forgotten, not_found or refused; in a dry run would_forget, not_found, held (see held_by) or protected (see reason)"`
	// Refusal.
	Preserved bool   `json:"preserved,omitempty" jsonschema:"true when a protection rule kept the grains and nothing changed"`
	Code      string `json:"code,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Hint      string `json:"hint,omitempty"`
	HeldBy    string `json:"held_by,omitempty" jsonschema:"in a dry run, the legal hold that would refuse the forget"`
	// Sweep mode.
	// Pointers, so that a sweep reports its zeros and a forget by target
	// leaves these out.
	Scanned              *int     `json:"scanned,omitempty" jsonschema:"grains the sweep scanned (not reported under a lock)"`
	ToDrop               *int     `json:"to_drop,omitempty" jsonschema:"grains the sweep dropped (or would drop)"`
	ToCompress           *int     `json:"to_compress,omitempty" jsonschema:"grains the sweep compressed (or would compress)"`
	Held                 *int     `json:"held,omitempty" jsonschema:"grains at risk that a legal hold keeps"`
	SampleHashesDrop     []string `json:"sample_hashes_to_drop,omitempty"`
	SampleHashesCompress []string `json:"sample_hashes_to_compress,omitempty"`
	Truncated            bool     `json:"truncated,omitempty"`
	// Audit.
	EventID string `json:"event_id,omitempty" jsonschema:"the audit event of a real forget"`
	Pending bool   `json:"pending,omitempty" jsonschema:"no signed checkpoint covers the event yet"`
	// Preview says what a dry run is.
	Preview string `json:"preview,omitempty"`
}

// ForgetUserInput is the forget_user tool's input.
type ForgetUserInput struct {
	Memory string `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	UserID string `json:"user_id" jsonschema:"the user whose key is destroyed"`
}

// EraseScopeInput is the erase_scope tool's input.
type EraseScopeInput struct {
	Memory string `json:"memory,omitempty" jsonschema:"memory name (default: the session's)"`
	Scope  string `json:"scope" jsonschema:"the scope path whose key is destroyed, with everything below it"`
}

// ErasureOutput is what a crypto-erasure returns.
type ErasureOutput struct {
	Count          int64     `json:"count" jsonschema:"grains made unreadable"`
	KeyFingerprint string    `json:"key_fingerprint"`
	Timestamp      time.Time `json:"timestamp"`
	EventID        string    `json:"event_id"`
	SubjectNonce   string    `json:"subject_nonce,omitempty" jsonschema:"opens the subject commitment in the audit leaf; stored nowhere else"`
	Pending        bool      `json:"pending"`
	Proof          any       `json:"proof,omitempty" jsonschema:"the signed erasure proof (lethe.proof/v1), verifiable offline with lethe verify"`
	TlogProof      string    `json:"tlog_proof,omitempty" jsonschema:"the same proof as a c2sp.org/tlog-proof@v1 text file, with witness cosignatures"`
}

// tool builds a tool with its annotations.
func tool(name, title, desc string, readOnly, destructive, idempotent bool) *sdk.Tool {
	return &sdk.Tool{Name: name, Title: title, Description: desc, Annotations: &sdk.ToolAnnotations{
		Title: title, ReadOnlyHint: readOnly, DestructiveHint: boolPtr(destructive),
		IdempotentHint: idempotent, OpenWorldHint: boolPtr(false),
	}}
}

func (h *handlers) addTools(s *sdk.Server) {
	addTool(s, h.inputs, tool("add", "Add a grain",
		"Write a grain: a subject/relation/object triple and/or content, with type, namespace, scope, user, tags and importance. "+
			"Returns its hash; writing the same grain again in the same scope returns the existing hash "+
			"(the same content with another importance, confidence or pinned is refused with code conflict: supersede that grain instead).",
		false, false, true), nil, h.add)
	addTool(s, h.inputs, tool("recall", "Recall grains",
		"Find grains by subject, relation, object, type, namespace, scope prefix, user and tags, one page at a time "+
			"(newest first; with filters, ranked by relevance and retrieval decay), or search them by text (query) and by vector "+
			"(embedding), combinable with every filter and ranked by score. Superseded and archived grains only on request. "+
			"Recall changes no grain, but records the retrieval (count, time, salience) that the forgetting policies use, "+
			"and on a server that schedules policies it may start the archive ladder.",
		true, false, true), nil, h.recall)
	addTool(s, h.inputs, tool("supersede", "Supersede a grain",
		"Write a new version of a grain. Fields left out carry forward, type included; a field given is set, empty included (\"content\": \"\" or null clears it, \"tags\": [] clears the tags); "+
			"the old version stays in the history, hidden from default recall. "+
			"Only the newest version can be superseded, so repeating a call changes nothing.",
		false, false, true), supersedeSchema, h.supersede)
	addTool(s, h.inputs, tool("history", "Version history",
		"A grain's version chain, newest first.", true, false, true), nil, h.history)
	addTool(s, h.inputs, tool("forget", "Forget grains",
		"Hard-delete grains by hash, hashes, subject or user_id, every version of their chains, audited. "+
			"Protected grains (pinned, a protected type such as caveat or goal, importance at or above 0.9) are never forgotten: "+
			"the result is an error with preserved: true, a reason and a hint, and nothing changes. "+
			"With no target, run the risk sweep (drop or compress grains at risk). dry_run reports without changing anything.",
		false, true, false), nil, h.forget)
	if h.erasing() {
		addTool(s, h.inputs, tool("forget_user", "Crypto-erase a user",
			"Destroy a user's data key: every grain of that user in the memory becomes unreadable at once. Returns the signed proof.",
			false, true, false), nil, h.forgetUser)
		addTool(s, h.inputs, tool("erase_scope", "Crypto-erase a scope",
			"Destroy a scope path's data key: every grain in that scope and below becomes unreadable at once. Returns the signed proof.",
			false, true, false), nil, h.eraseScope)
	}
	if h.requesting() {
		h.addRequestTools(s)
	}
}

func (h *handlers) add(ctx context.Context, req *sdk.CallToolRequest, in AddInput) (*sdk.CallToolResult, *AddOutput, error) {
	h, err := h.bind(req.Extra)
	if err != nil {
		return nil, nil, h.fail("add", err)
	}
	memory, err := h.memory(in.Memory)
	if err != nil {
		return nil, nil, h.fail("add", err)
	}
	g := in.grain(memory)
	if g.Namespace, err = h.namespace(g.Namespace); err != nil {
		return nil, nil, h.fail("add", err)
	}
	if g.Scope, err = h.scope(g.Scope); err != nil {
		return nil, nil, h.fail("add", err)
	}
	hash, err := h.cfg.Library.Add(ctx, g)
	if err != nil {
		return nil, nil, h.fail("add", err)
	}
	return nil, &AddOutput{Hash: hash}, nil
}

func (h *handlers) recall(ctx context.Context, req *sdk.CallToolRequest, in RecallInput) (*sdk.CallToolResult, *RecallOutput, error) {
	h, err := h.bind(req.Extra)
	if err != nil {
		return nil, nil, h.fail("recall", err)
	}
	memory, err := h.memory(in.Memory)
	if err != nil {
		return nil, nil, h.fail("recall", err)
	}
	if err := emptyFilter(req.Params.Arguments, &in); err != nil {
		return nil, nil, h.fail("recall", err)
	}
	q := lethe.Query{Memory: memory, Subject: in.Subject, Relation: in.Relation, Object: in.Object, Type: in.Type,
		Namespace: in.Namespace, Scope: in.Scope, UserID: in.UserID, Tags: in.Tags,
		IncludeSuperseded: in.IncludeSuperseded, IncludeArchived: in.IncludeArchived, Limit: in.Limit, Cursor: in.Cursor,
		Text: in.Query, Embedding: in.Embedding}
	if q.Namespace, err = h.namespace(q.Namespace); err != nil {
		return nil, nil, h.fail("recall", err)
	}
	if q.Scope, err = h.scope(q.Scope); err != nil {
		return nil, nil, h.fail("recall", err)
	}
	page, err := h.cfg.Library.Recall(ctx, q)
	if err != nil {
		return nil, nil, h.fail("recall", err)
	}
	if h.locked() {
		if err := h.view(memory).HideLinks(ctx, page.Grains); err != nil {
			return nil, nil, h.fail("recall", err)
		}
	}
	out := &RecallOutput{Grains: page.Grains, Next: page.Next}
	if out.Grains == nil {
		out.Grains = []lethe.Grain{}
	}
	out.Count = len(out.Grains)
	return nil, out, nil
}

// emptyFilter refuses a filter (grains.NonEmptyFilters) the arguments
// give empty: "" never means "every value" (a filter left out does), nor
// every type or namespace, as on the route.
func emptyFilter(args json.RawMessage, in *RecallInput) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	values := map[string]string{"subject": in.Subject, "relation": in.Relation, "object": in.Object,
		"user_id": in.UserID, "type": in.Type, "namespace": in.Namespace, "query": in.Query}
	for _, f := range grains.NonEmptyFilters {
		if _, ok := m[f]; ok && strings.TrimSpace(values[f]) == "" {
			return grains.EmptyFilter(f)
		}
	}
	return nil
}

// chainRefused reports whether err is a forget's refusal of a chain with
// a version outside the selector's confinement: forbidden on the
// selector's field (the library's, or a server's over HTTP). Any other
// forbidden (over HTTP: the token's roles or memories, or the lock's scope
// outside the token's scopes, on scopes[i]) is answered in its own words.
func chainRefused(err error) bool {
	var le *lethe.Error
	if !errors.As(err, &le) || le.Code != lethe.CodeForbidden {
		return false
	}
	switch f, _, _ := strings.Cut(le.Field, "["); f {
	case "hash", "blob_hash", "hashes", "subject", "user_id":
		return true
	}
	return false
}

// view is the session's view of memory: the grains inside its lock, and
// nothing of the others (grains.View, the rules a scope-limited API token
// follows too). Unlocked, it sees every grain.
func (h *handlers) view(memory string) *grains.View {
	lib := h.cfg.Library
	v := &grains.View{Memory: memory, Sees: h.inLock,
		Get:     func(ctx context.Context, hash string) (*lethe.Grain, error) { return lib.Get(ctx, memory, hash) },
		History: func(ctx context.Context, hash string) ([]lethe.Grain, error) { return lib.History(ctx, memory, hash) },
		Refuse: func(field string) error {
			return forbidden(field, "a version of the chain is outside this session's lock")
		}}
	if l, ok := lib.(locator); ok {
		v.Locate = func(ctx context.Context, hs []string) (map[string]lethe.Grain, error) {
			return l.Locate(ctx, memory, hs)
		}
	}
	return v
}

// locator is the embedded store's batch lookup of where grains are
// (lethe.DB.Locate), which a lock's link checks use when the library has
// it; an HTTP client of a server has not.
type locator interface {
	Locate(ctx context.Context, memory string, hashes []string) (map[string]lethe.Grain, error)
}

// get returns the grain hash in memory, with its links hidden under a
// lock; a grain outside the lock is not_found, as a missing one is.
func (h *handlers) get(ctx context.Context, memory, hash string) (*lethe.Grain, error) {
	if !h.locked() {
		return h.cfg.Library.Get(ctx, memory, hash)
	}
	v := h.view(memory)
	g, err := v.Grain(ctx, hash)
	if err != nil {
		return nil, err
	}
	one := []lethe.Grain{*g}
	if err := v.HideLinks(ctx, one); err != nil {
		return nil, err
	}
	return &one[0], nil
}

func (h *handlers) supersede(ctx context.Context, req *sdk.CallToolRequest, in SupersedeInput) (*sdk.CallToolResult, *SupersedeOutput, error) {
	h, err := h.bind(req.Extra)
	if err != nil {
		return nil, nil, h.fail("supersede", err)
	}
	memory, err := h.memory(in.Memory)
	if err != nil {
		return nil, nil, h.fail("supersede", err)
	}
	if !grains.ValidHash(in.Hash) {
		return nil, nil, h.fail("supersede", grains.FieldError(lethe.CodeInvalidArgument, "hash", "must be 64 lowercase hex digits"))
	}
	g := in.grain(memory)
	// A field the arguments name is set, empty included ("content": ""
	// clears it); the others carry forward.
	set := namedFields(req.Params.Arguments)
	if h.locked() {
		if _, err := h.view(memory).Grain(ctx, in.Hash); err != nil {
			return nil, nil, h.fail("supersede", err)
		}
		// Fields left out carry forward from the old version, which is
		// inside the lock; named ones must be too (named empty: the lock's).
		if g.Namespace != "" || slices.Contains(set, "namespace") {
			if g.Namespace, err = h.namespace(g.Namespace); err != nil {
				return nil, nil, h.fail("supersede", err)
			}
		}
		if g.Scope != "" || slices.Contains(set, "scope") {
			if g.Scope, err = h.scope(g.Scope); err != nil {
				return nil, nil, h.fail("supersede", err)
			}
		}
	}
	hash, err := h.cfg.Library.Supersede(ctx, in.Hash, g, set...)
	if err != nil {
		return nil, nil, h.fail("supersede", err)
	}
	return nil, &SupersedeOutput{Hash: hash, Superseded: in.Hash}, nil
}

// supersedeSchema makes supersede's input schema say what the tool does:
// a field left out carries forward, type included, so type is not
// required; null is the empty value of any grain field (docs/api.md).
func supersedeSchema(s *jsonschema.Schema) {
	s.Required = slices.DeleteFunc(s.Required, func(n string) bool { return n == "type" })
	nullable(grains.SettableFields...)(s)
}

// namedFields returns the settable grain fields a tool call's arguments
// name (see grains.SettableFields).
func namedFields(args json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return nil
	}
	var set []string
	for _, f := range grains.SettableFields {
		if _, ok := m[f]; ok {
			set = append(set, f)
		}
	}
	return set
}

// chain returns the version chain of hash; under a lock, refused when the
// grain asked for is outside it, without the versions outside it, and with
// no link to one (grains.View.Chain).
func (h *handlers) chain(ctx context.Context, memory, hash string) ([]lethe.Grain, error) {
	if h.locked() {
		return h.view(memory).Chain(ctx, hash)
	}
	return h.cfg.Library.History(ctx, memory, hash)
}

func (h *handlers) history(ctx context.Context, req *sdk.CallToolRequest, in HashInput) (*sdk.CallToolResult, *HistoryOutput, error) {
	h, err := h.bind(req.Extra)
	if err != nil {
		return nil, nil, h.fail("history", err)
	}
	memory, err := h.memory(in.Memory)
	if err != nil {
		return nil, nil, h.fail("history", err)
	}
	chain, err := h.chain(ctx, memory, in.Hash)
	if err != nil {
		return nil, nil, h.fail("history", err)
	}
	if chain == nil {
		chain = []lethe.Grain{}
	}
	return nil, &HistoryOutput{Grains: chain}, nil
}

// forget is linksee-memory's forget over the library (see the package doc).
func (h *handlers) forget(ctx context.Context, req *sdk.CallToolRequest, in ForgetInput) (*sdk.CallToolResult, *ForgetOutput, error) {
	h, err := h.bind(req.Extra)
	if err != nil {
		return nil, nil, h.fail("forget", err)
	}
	memory, err := h.memory(in.Memory)
	if err != nil {
		return nil, nil, h.fail("forget", err)
	}
	out := &ForgetOutput{OK: true, DryRun: in.DryRun}
	var targets int
	for _, f := range []struct {
		name string
		set  bool
		v    *string
	}{{"hash", in.Hash != nil, in.Hash}, {"hashes", in.Hashes != nil, nil}, {"subject", in.Subject != nil, in.Subject},
		{"user_id", in.UserID != nil, in.UserID}} {
		if !f.set {
			continue
		}
		targets++
		out.Mode = f.name
		if f.v != nil && strings.TrimSpace(*f.v) == "" {
			return nil, nil, h.fail("forget", &lethe.Error{Code: lethe.CodeEmptySelector, Field: f.name,
				Message: "an empty selector selects nothing; it never means everything",
				Hint:    "leave every target out to run the risk sweep"})
		}
	}
	if targets > 1 {
		return nil, nil, h.fail("forget", grains.Errorf(lethe.CodeInvalidArgument, "name one of hash, hashes, subject or user_id"))
	}
	if targets == 0 {
		out.Mode = "sweep"
		if err := h.sweep(ctx, memory, out); err != nil {
			return nil, nil, h.fail("forget", err)
		}
		return nil, out, nil
	}
	if in.Hashes != nil && len(in.Hashes) == 0 {
		return nil, nil, h.fail("forget", &lethe.Error{Code: lethe.CodeEmptySelector, Field: "hashes", Message: "an empty list selects nothing"})
	}
	if len(in.Hashes) > maxSeeds {
		return nil, nil, h.fail("forget", grains.FieldError(lethe.CodeTooLarge, "hashes", "at most 10000 hashes"))
	}

	// The seeds: the hashes named, or those the caller can recall.
	var seeds []string
	switch {
	case in.Hash != nil:
		seeds = []string{*in.Hash}
	case in.Hashes != nil:
		seeds = in.Hashes
	default:
		q := lethe.Query{Memory: memory, IncludeSuperseded: true, IncludeArchived: true}
		if in.Subject != nil {
			q.Subject = *in.Subject
		} else {
			q.UserID = *in.UserID
		}
		if seeds, err = h.recallAll(ctx, q); err != nil {
			return nil, nil, h.fail("forget", err)
		}
	}
	// A refusal names the item of hashes at fault, or the target.
	field := func(i int) string {
		if out.Mode == "hashes" {
			return fmt.Sprintf("hashes[%d]", i)
		}
		return out.Mode
	}
	for i, s := range seeds {
		if !grains.ValidHash(s) {
			return nil, nil, h.fail("forget", grains.FieldError(lethe.CodeInvalidArgument, field(i), "must be 64 lowercase hex digits"))
		}
	}
	if h.locked() {
		// Seeds outside the lock are passed over, as missing ones are.
		if seeds, err = h.view(memory).Forgettable(ctx, seeds, in.Hash != nil, field); err != nil {
			return nil, nil, h.fail("forget", err)
		}
	}
	if len(seeds) == 0 {
		out.Status, out.Hashes = "not_found", []string{}
		return nil, out, nil
	}
	sel := lethe.Selector{Memory: memory, Hashes: seeds, DryRun: in.DryRun}
	if in.Hash != nil {
		sel = lethe.Selector{Memory: memory, Hash: *in.Hash, DryRun: in.DryRun}
	}
	// The view's check, made again by the library on the versions the
	// delete removes: one that a concurrent supersede added outside the
	// lock (another scope or namespace) is refused too.
	if h.cfg.LockScope != "" {
		sel.Scopes = []string{h.cfg.LockScope}
	}
	sel.Namespace = h.cfg.LockNamespace
	res, err := h.cfg.Library.Forget(ctx, sel)
	if h.locked() && chainRefused(err) {
		return nil, nil, h.fail("forget", forbidden(out.Mode, "a version of the chain is outside this session's lock"))
	}
	if err == nil && in.DryRun {
		// The library's dry run: its deletion rolled back, with the
		// refusal (hold, then protection) the forget would meet.
		out.Count, out.Hashes, out.Status, out.HeldBy = res.Count, res.Hashes, res.Status, res.HeldBy
		out.Reason = protectedReason(res.Reason)
		switch res.Status {
		case "protected":
			out.Hint = "protected grains are kept on purpose and this server never overrides protection"
		case "held":
			out.Hint = "a legal hold keeps these grains until it is released"
		}
		out.Preview = "the library's dry run of this forget: nothing was changed or audited"
		if out.Mode == "subject" || out.Mode == "user_id" {
			out.Preview += "; the recall that found the grains recorded a retrieval of them"
		}
		return nil, out, nil
	}
	if lethe.ErrorCode(err) == lethe.CodeProtected {
		var le *lethe.Error
		errors.As(err, &le)
		out.OK, out.Preserved, out.Code, out.Status = false, true, string(lethe.CodeProtected), "refused"
		out.Reason = protectedReason(le.Message)
		out.Hint = "protected grains are kept on purpose and this server never overrides protection; " + le.Hint
		return &sdk.CallToolResult{IsError: true}, out, nil
	}
	if err != nil {
		return nil, nil, h.fail("forget", err)
	}
	out.Count, out.Hashes, out.Status = res.Count, res.Hashes, res.Status
	if res.Receipt != nil {
		out.EventID, out.Pending = res.EventID, res.Pending
	}
	return nil, out, nil
}

// protectedReason is the reason of a protection refusal, the same in a
// dry run and a real forget: the library's message without its prefix,
// which code protected already says.
func protectedReason(msg string) string {
	return strings.TrimPrefix(msg, "cannot forget a protected grain: ")
}

// maxSeeds bounds a forget by subject or user: the library's batch limit.
const maxSeeds = grains.MaxBatch

// recallAll returns the hashes of every grain q recalls, within the lock.
func (h *handlers) recallAll(ctx context.Context, q lethe.Query) ([]string, error) {
	var err error
	if q.Namespace, err = h.namespace(""); err != nil {
		return nil, err
	}
	if q.Scope, err = h.scope(""); err != nil {
		return nil, err
	}
	q.Limit = grains.MaxLimit
	var out []string
	for {
		page, err := h.cfg.Library.Recall(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, g := range page.Grains {
			out = append(out, g.Hash)
		}
		if len(out) > maxSeeds {
			return nil, &lethe.Error{Code: lethe.CodeTooLarge, Message: "more than 10000 grains match",
				Hint: "forget them by hashes in batches, or erase the user with forget_user"}
		}
		if page.Next == "" {
			return out, nil
		}
		q.Cursor = page.Next
	}
}

// sampleSize bounds the sample hashes of a sweep result, as linksee does.
const sampleSize = 10

// sweep runs (or previews) the risk sweep. A locked session only previews,
// and sees only the items inside its lock.
func (h *handlers) sweep(ctx context.Context, memory string, out *ForgetOutput) error {
	if h.locked() && !out.DryRun {
		return &lethe.Error{Code: codeForbidden, Message: "the risk sweep spans the whole memory; a locked session may only preview it",
			Hint: "set dry_run, or forget grains of this partition by hash"}
	}
	res, err := h.cfg.Library.RiskSweep(ctx, memory, lethe.RiskOptions{DryRun: out.DryRun})
	if err != nil {
		return err
	}
	scanned, toDrop, toCompress, held := res.Scanned, res.Dropped, res.Compressed, res.Held
	out.Truncated = res.Truncated
	if res.Receipt != nil {
		out.EventID, out.Pending = res.EventID, res.Pending
	}
	v := h.view(memory)
	if h.locked() {
		toDrop, toCompress, held = 0, 0, 0
	}
	for _, it := range res.Items {
		if h.locked() {
			if _, err := v.Grain(ctx, it.Hash); err != nil {
				continue
			}
			switch it.Action {
			case "drop":
				toDrop++
			case "compress":
				toCompress++
			case "held":
				held++
			}
		}
		switch {
		case it.Action == "drop" && len(out.SampleHashesDrop) < sampleSize:
			out.SampleHashesDrop = append(out.SampleHashesDrop, it.Hash)
		case it.Action == "compress" && len(out.SampleHashesCompress) < sampleSize:
			out.SampleHashesCompress = append(out.SampleHashesCompress, it.Hash)
		}
	}
	out.ToDrop, out.ToCompress, out.Held = &toDrop, &toCompress, &held
	if !h.locked() {
		out.Scanned = &scanned
	}
	if h.locked() {
		out.Preview = "the risk sweep's dry run over the whole memory, reduced to the grains inside this session's lock; " +
			"scanned is not reported"
	}
	return nil
}

func (h *handlers) erasureOut(e *lethe.Erasure) (*ErasureOutput, error) {
	out := &ErasureOutput{Count: e.Count, KeyFingerprint: e.KeyFingerprint, Timestamp: e.Timestamp}
	if e.Receipt != nil {
		out.EventID, out.SubjectNonce, out.Pending, out.TlogProof = e.EventID, e.SubjectNonce, e.Pending, e.TlogProof
		if e.Proof != nil {
			b, err := json.Marshal(e.Proof)
			if err != nil {
				return nil, err
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				return nil, err
			}
			out.Proof = m
		}
	}
	return out, nil
}

func (h *handlers) forgetUser(ctx context.Context, req *sdk.CallToolRequest, in ForgetUserInput) (*sdk.CallToolResult, *ErasureOutput, error) {
	h, err := h.bind(req.Extra)
	if err != nil {
		return nil, nil, h.fail("forget_user", err)
	}
	memory, err := h.memory(in.Memory)
	if err != nil {
		return nil, nil, h.fail("forget_user", err)
	}
	if h.locked() {
		return nil, nil, h.fail("forget_user", forbidden("user_id", "a user's key spans every namespace and scope; a locked session cannot erase it"))
	}
	if strings.TrimSpace(in.UserID) == "" {
		return nil, nil, h.fail("forget_user", &lethe.Error{Code: lethe.CodeEmptySelector, Field: "user_id", Message: "a user id is required"})
	}
	e, err := h.cfg.Eraser.ForgetUser(ctx, memory, in.UserID)
	if err != nil {
		return nil, nil, h.fail("forget_user", err)
	}
	out, err := h.erasureOut(e)
	if err != nil {
		return nil, nil, h.fail("forget_user", err)
	}
	return nil, out, nil
}

func (h *handlers) eraseScope(ctx context.Context, req *sdk.CallToolRequest, in EraseScopeInput) (*sdk.CallToolResult, *ErasureOutput, error) {
	h, err := h.bind(req.Extra)
	if err != nil {
		return nil, nil, h.fail("erase_scope", err)
	}
	memory, err := h.memory(in.Memory)
	if err != nil {
		return nil, nil, h.fail("erase_scope", err)
	}
	if h.cfg.LockNamespace != "" {
		return nil, nil, h.fail("erase_scope", forbidden("scope", "a scope's key spans every namespace; a namespace-locked session cannot erase it"))
	}
	// "/acme//" is invalid_scope, never acme (grains.CleanScope).
	scope, err := grains.CleanScope(in.Scope)
	if lethe.ErrorCode(err) == lethe.CodeEmptySelector {
		return nil, nil, h.fail("erase_scope", &lethe.Error{Code: lethe.CodeEmptySelector, Field: "scope",
			Message: "a scope path is required; the memory's root is never erased this way"})
	}
	if err != nil {
		return nil, nil, h.fail("erase_scope", err)
	}
	if !within(scope, h.cfg.LockScope) {
		return nil, nil, h.fail("erase_scope", forbidden("scope", "outside this session's lock"))
	}
	e, err := h.cfg.Eraser.EraseScope(ctx, memory, scope)
	if err != nil {
		return nil, nil, h.fail("erase_scope", err)
	}
	out, err := h.erasureOut(e)
	if err != nil {
		return nil, nil, h.fail("erase_scope", err)
	}
	return nil, out, nil
}
