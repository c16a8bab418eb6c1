// Package grains is lethe's domain: the grain record, its validation, its
// canonical encoding, version chains and the query model. It uses the
// standard library only; storage, keys and transport live in adapters.
//
// # Personal and operational fields
//
// A grain's personal fields (subject, relation, object, content, user_id,
// tags, metadata) exist in clear only in memory and inside the sealed blob;
// see [Payload]. Its operational fields (hash, memory, type, namespace,
// scope, importance, confidence, salience, pinned, archived, timestamps,
// retrieval statistics, chain links) are stored in clear so that policies
// run without keys. Scope paths and namespaces are operational: they must not
// carry personal data.
package grains

import (
	"encoding/json"
	"fmt"
	"golang.org/x/text/unicode/norm"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on field sizes, in bytes.
const (
	MaxTripleBytes  = 2048
	MaxContentBytes = 64 << 10
	MaxUserIDBytes  = 256
	MaxTags         = 64
	MaxTagBytes     = 128
	MaxMetadata     = 32
	MaxMetaKeyBytes = 64
	MaxMetaValBytes = 2048
	MaxScopeBytes   = 512
	MaxScopeDepth   = 16
	MaxSegmentBytes = 64
	MaxNamespace    = 128
	MaxEmbedding    = 4096 // dimensions
	MaxQueryText    = 4096
	MaxBatch        = 10000
	// MaxBatchTags bounds the tags of one batch, counted as given: each tag
	// is an index entry to derive and write, the largest cost of a batch
	// in memory (10,000 grains of 64 tags took the server from 43 MB to
	// 594 MB).
	MaxBatchTags     = 1 << 16
	DefaultMemory    = "default"
	DefaultNamespace = "default"
)

// Types names the built-in grain types. Custom words matching typePattern
// are accepted too.
var Types = []string{"fact", "belief", "event", "state", "checkpoint", "observation", "goal", "caveat", "summary"}

var (
	memoryPattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	typePattern      = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	segmentPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	namespacePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	hashPattern      = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// Grain is one record. Hash is the lowercase hex SHA-256 of the sealed blob
// exactly as stored.
type Grain struct {
	Hash      string `json:"hash,omitempty"`
	Memory    string `json:"memory,omitempty"`
	Type      string `json:"type"`
	Subject   string `json:"subject,omitempty"`
	Relation  string `json:"relation,omitempty"`
	Object    string `json:"object,omitempty"`
	Content   string `json:"content,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Scope     string `json:"scope,omitempty"`
	UserID    string `json:"user_id,omitempty"`

	Tags     []string          `json:"tags,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Embedding is an optional vector for vector recall, sealed with the
	// personal fields. Every embedding of a memory has the dimension of
	// its first (see ValidateEmbedding).
	Embedding []float32 `json:"embedding,omitempty"`

	// Importance and Confidence are in [0,1]. A zero Confidence means
	// "not given" and is stored as 1.
	Importance float64 `json:"importance"`
	Confidence float64 `json:"confidence"`
	Salience   float64 `json:"salience"`
	Pinned     bool    `json:"pinned,omitempty"`
	Archived   bool    `json:"archived,omitempty"`

	CreatedAt       time.Time  `json:"created_at"`
	Supersedes      string     `json:"supersedes,omitempty"`
	SupersededBy    string     `json:"superseded_by,omitempty"`
	LastRetrievedAt *time.Time `json:"last_retrieved_at,omitempty"`
	RetrievalCount  int64      `json:"retrieval_count,omitempty"`

	// Score is a text or vector recall's rank of the grain (relevance
	// times the retrieval-time decay); 0 elsewhere.
	Score float64 `json:"score,omitempty"`
	// Scores are the forgetting policies' scores of the grain when a
	// recall answered it, before that recall's own retrieval counted; nil
	// elsewhere (get, history).
	Scores *Scores `json:"scores,omitempty"`

	// Erased marks a version of a chain that was erased, in a history:
	// such a Grain has only Hash set, and encodes as {"hash", "erased"}.
	Erased bool `json:"erased,omitempty"`
}

// Scores are a grain's forgetting scores at one time, each in [0,1].
type Scores struct {
	// Retrieval is Vitamem's retrieval-time decay score (with the
	// retrieval boost; 1 for pinned grains): the retrieval sweep archives
	// the grain at or below retrieval.min_retrieval_score.
	Retrieval float64 `json:"retrieval"`
	// Salience is the ladder's salience, faded since the last retrieval:
	// the archive ladder archives the grain below
	// ladder.forget_salience_threshold.
	Salience float64 `json:"salience"`
	// Retention is the decay purge's retention: the purge forgets the
	// grain below decay.threshold (once older than decay.min_age_days).
	Retention float64 `json:"retention"`
}

// MarshalJSON encodes g; an Erased version encodes as its hash and
// "erased": true alone, since nothing else of it can be read.
func (g Grain) MarshalJSON() ([]byte, error) {
	if g.Erased {
		return json.Marshal(struct {
			Hash   string `json:"hash"`
			Erased bool   `json:"erased"`
		}{g.Hash, true})
	}
	type plain Grain
	return json.Marshal(plain(g))
}

// Normalize fills defaults in place: memory, namespace, confidence and
// salience; it sorts and de-duplicates tags (dropping empty ones: writes
// refuse those first, see CheckTags) and trims the scope's slashes.
func (g *Grain) Normalize() {
	if g.Memory == "" {
		g.Memory = DefaultMemory
	}
	if g.Namespace == "" {
		g.Namespace = DefaultNamespace
	}
	if g.Confidence == 0 {
		g.Confidence = 1
	}
	if g.Salience == 0 {
		g.Salience = 1
	}
	// "/acme//" is refused by Validate, never stored as "acme".
	g.Scope = TrimScope(g.Scope)
	for _, f := range []*string{&g.Subject, &g.Relation, &g.Object, &g.Content, &g.UserID} {
		*f = NormalizeText(*f)
	}
	g.Tags = normalizeTags(g.Tags)
}

// NormalizeText returns v in Unicode normalisation form C (NFC), so that
// text a person sees as the same (an "é" written as one code point or as
// "e" and a combining accent) is the same bytes. Every value that feeds a
// blind token, a user reference or the dedup token goes through it at
// every entry point: a grain's subject, relation, object, content, tags and
// user_id when written, and the same fields of queries, forget selectors,
// erasures, holds and exports. Case is not folded here (see
// NormalizeValue), and metadata, types, namespaces and scope paths (ASCII
// by validation) are left as they are. See docs/compliance/erasure.md.
func NormalizeText(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] >= 0x80 {
			return norm.NFC.String(v)
		}
	}
	return v // ASCII is always NFC
}

// CheckTags refuses an empty tag of tags, or one of white space only,
// naming it field[i] ("tags[2]"): Normalize would drop it, and a write
// would keep less than it was sent. A tag is a non-empty string.
func CheckTags(field string, tags []string) error {
	for i, t := range tags {
		if strings.TrimSpace(t) == "" {
			return FieldError(CodeInvalidArgument, fmt.Sprintf("%s[%d]", field, i), "an empty tag: a tag is a non-empty string")
		}
	}
	return nil
}

func normalizeTags(tags []string) []string {
	if len(tags) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(tags))
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		t = NormalizeText(strings.TrimSpace(t))
		if t == "" || seen[t] {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Validate checks a normalized grain for writing. It never mentions the
// values of personal fields in its errors.
func (g *Grain) Validate() error {
	if err := ValidateMemory(g.Memory); err != nil {
		return err
	}
	if !typePattern.MatchString(g.Type) {
		return FieldError(CodeInvalidArgument, "type", "must be a lowercase word of at most 32 characters (fact, belief, event, state, checkpoint, observation, goal, caveat, summary, or a custom word)")
	}
	if g.Subject == "" && g.Relation == "" && g.Object == "" && g.Content == "" {
		return &Error{Code: CodeEmptyGrain, Message: "a grain needs a subject, relation, object or content", Hint: "set subject=, relation=, object= or content="}
	}
	for _, f := range []struct {
		name, value string
		max         int
	}{
		{"subject", g.Subject, MaxTripleBytes},
		{"relation", g.Relation, MaxTripleBytes},
		{"object", g.Object, MaxTripleBytes},
		{"content", g.Content, MaxContentBytes},
		{"user_id", g.UserID, MaxUserIDBytes},
	} {
		if err := checkText(f.name, f.value, f.max); err != nil {
			return err
		}
	}
	if g.UserID != "" && strings.TrimSpace(g.UserID) != g.UserID {
		return FieldError(CodeInvalidArgument, "user_id", "must not start or end with white space")
	}
	if g.Namespace != "" && !namespacePattern.MatchString(g.Namespace) {
		return FieldError(CodeInvalidArgument, "namespace", "must be letters, digits, '.', '_', ':' or '-', at most 128 characters")
	}
	if err := ValidateScope(g.Scope); err != nil {
		return err
	}
	if err := ValidateEmbedding(g.Embedding); err != nil {
		return err
	}
	if len(g.Tags) > MaxTags {
		return TooManyTags("tags")
	}
	for _, t := range g.Tags {
		if err := checkText("tags", t, MaxTagBytes); err != nil {
			return err
		}
	}
	if len(g.Metadata) > MaxMetadata {
		return FieldError(CodeTooLarge, "metadata", "at most 32 entries")
	}
	for k, v := range g.Metadata {
		if k == "" {
			return FieldError(CodeInvalidArgument, "metadata", "keys must not be empty")
		}
		if err := checkText("metadata", k, MaxMetaKeyBytes); err != nil {
			return err
		}
		if err := checkText("metadata", v, MaxMetaValBytes); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name  string
		value float64
	}{{"importance", g.Importance}, {"confidence", g.Confidence}, {"salience", g.Salience}} {
		if math.IsNaN(f.value) || f.value < 0 || f.value > 1 {
			return FieldError(CodeInvalidArgument, f.name, "must be a number in [0,1]")
		}
	}
	if g.Supersedes != "" && !hashPattern.MatchString(g.Supersedes) {
		return FieldError(CodeInvalidArgument, "supersedes", "must be a grain hash")
	}
	return nil
}

func checkText(field, v string, max int) error {
	if len(v) > max {
		return FieldError(CodeTooLarge, field, "value too large")
	}
	if !utf8.ValidString(v) {
		return FieldError(CodeInvalidArgument, field, "must be valid UTF-8")
	}
	if strings.ContainsRune(v, 0) {
		return FieldError(CodeInvalidArgument, field, "must not contain NUL")
	}
	return nil
}

// MemoryName returns m, or DefaultMemory for "", after validating it.
func MemoryName(m string) (string, error) {
	if m == "" {
		m = DefaultMemory
	}
	return m, ValidateMemory(m)
}

// ValidateMemory checks a memory name: a lowercase word of at most 63
// characters, letters, digits, '.', '_' and '-'.
func ValidateMemory(name string) error {
	if !memoryPattern.MatchString(name) {
		return FieldError(CodeInvalidMemory, "memory", "must be 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	return nil
}

// ValidateScope checks a scope path ("" is the memory's root scope).
// Segments are separated by '/', each 1-64 of letters, digits, '.', '_' and
// '-', not starting with a punctuation mark; at most 16 segments.
func ValidateScope(path string) error {
	if path == "" {
		return nil
	}
	if len(path) > MaxScopeBytes {
		return FieldError(CodeInvalidScope, "scope", "path too long")
	}
	segs := strings.Split(path, "/")
	if len(segs) > MaxScopeDepth {
		return FieldError(CodeInvalidScope, "scope", "at most 16 segments")
	}
	for _, s := range segs {
		if !segmentPattern.MatchString(s) {
			return FieldError(CodeInvalidScope, "scope", "segments must be 1-64 letters, digits, '.', '_' or '-', separated by single '/'")
		}
	}
	return nil
}

// TrimScope drops at most one leading and one trailing '/' of a scope path
// (a grain's, a query's, CleanScope's), and nothing else: "/acme/" is
// "acme", "/acme//" stays malformed for ValidateScope.
func TrimScope(path string) string {
	return strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/")
}

// CleanScope returns a scope path named by a call that selects by scope
// (erase, holds, token scopes): at most one leading and one trailing '/'
// are dropped, and what remains must be a valid, non-empty path. Nothing
// else is normalised: "/acme//" and "acme//prod" are refused, never read
// as "acme" or "acme/prod".
func CleanScope(path string) (string, error) {
	if len(path) > MaxScopeBytes+2 {
		return "", FieldError(CodeInvalidScope, "scope", "path too long")
	}
	p := TrimScope(path)
	if p == "" {
		return "", &Error{Code: CodeEmptySelector, Field: "scope", Message: "name a scope",
			Hint: "an empty scope never means everything"}
	}
	if err := ValidateScope(p); err != nil {
		return "", err
	}
	return p, nil
}

// ValidateUserID checks a user id that names a user (forget-user, holds,
// export, selectors): not blank, at most 256 bytes of UTF-8 without NUL or
// surrounding white space, as a grain's user_id must be.
func ValidateUserID(id string) error {
	if strings.TrimSpace(id) == "" {
		return &Error{Code: CodeEmptySelector, Field: "user_id", Message: "name the user"}
	}
	if err := checkText("user_id", id, MaxUserIDBytes); err != nil {
		return err
	}
	if strings.TrimSpace(id) != id {
		return FieldError(CodeInvalidArgument, "user_id", "must not start or end with white space")
	}
	return nil
}

// ValidateNamespace checks a namespace filter or value.
func ValidateNamespace(ns string) error {
	if ns != "" && !namespacePattern.MatchString(ns) {
		return FieldError(CodeInvalidArgument, "namespace", "must be letters, digits, '.', '_', ':' or '-', at most 128 characters")
	}
	return nil
}

// ScopePrefixes returns every prefix of a scope path, shortest first:
// "acme/prod/bot1" gives ["acme", "acme/prod", "acme/prod/bot1"]; the root
// scope "" gives none.
func ScopePrefixes(path string) []string {
	if path == "" {
		return nil
	}
	segs := strings.Split(path, "/")
	out := make([]string, len(segs))
	for i := range segs {
		out[i] = strings.Join(segs[:i+1], "/")
	}
	return out
}

// InScope reports whether scope is prefix or below it. The root prefix ""
// contains every scope.
func InScope(scope, prefix string) bool {
	return prefix == "" || scope == prefix || strings.HasPrefix(scope, prefix+"/")
}

// ValidHash reports whether h is a grain hash: 64 lowercase hex digits.
func ValidHash(h string) bool { return hashPattern.MatchString(h) }

// NormalizeValue is the normalisation blind tokens use for subjects,
// relations, objects and tags: trimmed, inner white space collapsed to one
// space, lowercased, in NFC (see NormalizeText). Lookups by these fields
// are therefore case-insensitive; user ids are not (they are NFC only).
func NormalizeValue(v string) string {
	if normalASCII(v) {
		return v // the common case, without allocating: recalls normalise every value they compare
	}
	return norm.NFC.String(strings.ToLower(strings.Join(strings.Fields(v), " ")))
}

// normalASCII reports whether v is ASCII and already normalised: no upper
// case, no white space but single inner spaces.
func normalASCII(v string) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= 0x80 || c >= 'A' && c <= 'Z' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r':
			return false
		case c == ' ' && (i == 0 || i == len(v)-1 || v[i-1] == ' '):
			return false
		}
	}
	return true
}

// Payload is the sealed part of a grain: every personal field. Its JSON
// encoding (fields in this order, map keys sorted) is canonical.
type Payload struct {
	Subject  string            `json:"s,omitempty"`
	Relation string            `json:"r,omitempty"`
	Object   string            `json:"o,omitempty"`
	Content  string            `json:"c,omitempty"`
	UserID   string            `json:"u,omitempty"`
	Tags     []string          `json:"t,omitempty"`
	Metadata map[string]string `json:"m,omitempty"`
	// Embedding is the grain's vector, little-endian float32s.
	Embedding []byte `json:"e,omitempty"`
}

// PayloadOf returns the personal fields of g.
func PayloadOf(g *Grain) Payload {
	return Payload{Subject: g.Subject, Relation: g.Relation, Object: g.Object, Content: g.Content,
		UserID: g.UserID, Tags: g.Tags, Metadata: g.Metadata, Embedding: EncodeVector(g.Embedding)}
}

// Apply copies the payload's fields into g.
func (p Payload) Apply(g *Grain) {
	g.Subject, g.Relation, g.Object, g.Content = p.Subject, p.Relation, p.Object, p.Content
	g.UserID, g.Tags, g.Metadata = p.UserID, p.Tags, p.Metadata
	g.Embedding = DecodeVector(p.Embedding)
}

// Encode returns the canonical encoding of the payload.
func (p Payload) Encode() []byte {
	b, err := json.Marshal(p)
	if err != nil {
		// Marshal of strings, slices and string maps cannot fail.
		panic("grains: payload encoding: " + err.Error())
	}
	return b
}

// DedupMaterial returns the bytes that decide whether two writes are the same
// grain: type, namespace and the canonical payload. Two grains with equal
// material in the same memory and scope are one grain.
func DedupMaterial(g *Grain) []byte {
	return DedupMaterialOf(g, PayloadOf(g).Encode())
}

// DedupMaterialOf is DedupMaterial given g's encoded payload.
func DedupMaterialOf(g *Grain, payload []byte) []byte {
	b := make([]byte, 0, len(g.Type)+len(g.Namespace)+2+len(payload))
	b = append(append(append(append(b, g.Type...), 0), g.Namespace...), 0)
	return append(b, payload...)
}

// ValidateEmbedding checks an embedding (nil is none): at most MaxEmbedding
// finite values, not all zero (a zero vector has no direction to compare).
func ValidateEmbedding(v []float32) error {
	if v == nil {
		return nil
	}
	if len(v) == 0 {
		return FieldError(CodeInvalidArgument, "embedding", "must not be empty")
	}
	if len(v) > MaxEmbedding {
		return FieldError(CodeTooLarge, "embedding", "at most 4096 dimensions")
	}
	nonzero := false
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return FieldError(CodeInvalidArgument, "embedding", "values must be finite")
		}
		nonzero = nonzero || x != 0
	}
	if !nonzero {
		return FieldError(CodeInvalidArgument, "embedding", "must not be all zeros")
	}
	return nil
}

// TooManyGrains is the error of a batch of more than MaxBatch grains.
func TooManyGrains() error {
	return FieldError(CodeTooLarge, "grains", fmt.Sprintf("at most %d grains per batch", MaxBatch))
}

// TooManyTags is the error of a grain with more than MaxTags tags; field
// names the list ("tags", or "grains[i].tags" in a batch).
func TooManyTags(field string) error {
	return FieldError(CodeTooLarge, field, fmt.Sprintf("at most %d tags", MaxTags))
}

// TooManyBatchTags is the error of a batch of more than MaxBatchTags tags.
func TooManyBatchTags() error {
	return &Error{Code: CodeTooLarge, Field: "grains", Message: fmt.Sprintf("at most %d tags in one batch", MaxBatchTags),
		Hint: "split the batch into smaller ones"}
}
