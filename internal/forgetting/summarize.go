package forgetting

import (
	"errors"
	"maps"
	"slices"

	"github.com/lethe-io/lethe/internal/grains"
)

// ErrNotCompressible is returned by a [Summarizer] for a grain it cannot
// make smaller: one with no text to drop, or nothing to keep once the text
// is gone. The sweep leaves such a grain as it is; it is dropped later if
// its risk keeps growing.
var ErrNotCompressible = errors.New("forgetting: grain has nothing to compress")

// Summarizer compresses a grain for the risk sweep's compress action.
type Summarizer interface {
	// Summarize must return the grain that replaces g, holding no personal
	// text that g did not hold and less than g held, or a non-nil error
	// (ErrNotCompressible when there is nothing to do). It must not modify
	// g. The result keeps g's memory, scope, user, namespace and
	// operational fields (the store reseals it under the same key chain);
	// its Hash is empty, as the store computes it. The store must replace
	// g by the result, not supersede it: a superseded grain keeps its text.
	Summarize(g grains.Grain) (grains.Grain, error)
}

// TripleSummarizer is the default Summarizer: it keeps the triple (subject,
// relation, object), tags and metadata and drops the free text (content).
type TripleSummarizer struct{}

var _ Summarizer = TripleSummarizer{}

// Summarize returns g without its content. A grain with no content, or with
// no triple to keep, gives ErrNotCompressible.
func (TripleSummarizer) Summarize(g grains.Grain) (grains.Grain, error) {
	if g.Content == "" || (g.Subject == "" && g.Relation == "" && g.Object == "") {
		return grains.Grain{}, ErrNotCompressible
	}
	out := g
	out.Hash = ""
	out.Content = ""
	out.Tags = slices.Clone(g.Tags)
	out.Metadata = maps.Clone(g.Metadata)
	if g.LastRetrievedAt != nil {
		t := *g.LastRetrievedAt
		out.LastRetrievedAt = &t
	}
	return out, nil
}
