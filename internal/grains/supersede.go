package grains

import "slices"

// SettableFields are the fields a supersede may set, by their JSON names.
// The memory, hash, chain links, timestamps and retrieval statistics are
// never set by a caller.
var SettableFields = []string{"type", "subject", "relation", "object", "content", "namespace", "scope", "user_id",
	"tags", "metadata", "embedding", "importance", "confidence", "salience", "pinned"}

// Carry fills g, the new version of old, from old: a field is set (it keeps
// g's value, empty included) when it is named in set or holds a value that
// is not its zero value (for tags, metadata and embedding: not nil, so an
// empty list clears); every other field carries forward from old. Salience
// and retrieval statistics never carry: a new version starts fresh (at 1,
// or at g's salience when set). Type is required of every grain, so an
// empty type carries forward even when named. set names JSON fields (see
// [SettableFields]); a name outside them is an invalid_argument error.
//
// Confidence and salience set to 0 stay 0 only through [ExplicitZeros]:
// Normalize reads a zero as "not given".
func Carry(g, old *Grain, set []string) error {
	for _, f := range set {
		if !slices.Contains(SettableFields, f) {
			return &Error{Code: CodeInvalidArgument, Field: f, Message: "not a field a supersede can set",
				Hint: "settable: type, subject, relation, object, content, namespace, scope, user_id, tags, metadata, embedding, importance, confidence, salience, pinned"}
		}
	}
	named := func(f string) bool { return slices.Contains(set, f) }
	if g.Type == "" {
		g.Type = old.Type
	}
	for _, f := range []struct {
		name     string
		dst, src *string
	}{
		{"subject", &g.Subject, &old.Subject}, {"relation", &g.Relation, &old.Relation}, {"object", &g.Object, &old.Object},
		{"content", &g.Content, &old.Content}, {"namespace", &g.Namespace, &old.Namespace}, {"scope", &g.Scope, &old.Scope},
		{"user_id", &g.UserID, &old.UserID},
	} {
		if *f.dst == "" && !named(f.name) {
			*f.dst = *f.src
		}
	}
	if g.Tags == nil && !named("tags") {
		g.Tags = old.Tags
	}
	if g.Metadata == nil && !named("metadata") {
		g.Metadata = old.Metadata
	}
	switch {
	case named("embedding") && len(g.Embedding) == 0:
		g.Embedding = nil // "embedding": [] clears, as "tags": [] does
	case g.Embedding == nil:
		g.Embedding = old.Embedding
	}
	if g.Importance == 0 && !named("importance") {
		g.Importance = old.Importance
	}
	if g.Confidence == 0 && !named("confidence") {
		g.Confidence = old.Confidence
	}
	if !g.Pinned && !named("pinned") {
		g.Pinned = old.Pinned
	}
	return nil
}

// Zeros records which of confidence and salience a new version holds at 0
// on purpose: Normalize reads a zero as "not given" and stores 1, so call
// Restore after it.
type Zeros struct{ confidence, salience bool }

// ExplicitZeros returns the zeros of g, filled by Carry, that are meant: a
// confidence of 0 (set, or carried from a version that had 0) and a
// salience of 0 that set names.
func ExplicitZeros(g *Grain, set []string) Zeros {
	return Zeros{confidence: g.Confidence == 0,
		salience: g.Salience == 0 && slices.Contains(set, "salience")}
}

// Restore sets back to 0 the fields z recorded.
func (z Zeros) Restore(g *Grain) {
	if z.confidence {
		g.Confidence = 0
	}
	if z.salience {
		g.Salience = 0
	}
}

// Unchanged reports whether g, a new version of old filled by Carry and
// normalized, changes nothing: same scope, type, payload, importance,
// confidence and pin, and the same salience when set names it.
func Unchanged(g, old *Grain, set []string) bool {
	return g.Scope == old.Scope && g.Type == old.Type && string(DedupMaterial(g)) == string(DedupMaterial(old)) &&
		g.Importance == old.Importance && g.Confidence == old.Confidence && g.Pinned == old.Pinned &&
		(!slices.Contains(set, "salience") || g.Salience == old.Salience)
}
