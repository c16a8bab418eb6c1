package api

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// A recall's page encodes to the same bytes through pageReply as through
// the page itself (Grain.MarshalJSON), and a grain through grainReply as
// itself, whatever the grains hold: text that
// JSON escapes, empty and missing fields, times, scores, embeddings; and an
// erased version keeps its short form.
func TestPageReplyEncodesAsPage(t *testing.T) {
	text := rapid.OneOf(rapid.String(), rapid.SampledFrom([]string{"", "<b>&amp;</b>", "\u2028\u2029", "é", "\x00\x1f\"\\", "\xff\xfe"}))
	rapid.Check(t, func(t *rapid.T) {
		var page lethe.Page
		n := rapid.IntRange(0, 6).Draw(t, "grains")
		for i := range n {
			g := grains.Grain{
				Hash: text.Draw(t, "hash"), Memory: text.Draw(t, "memory"), Type: text.Draw(t, "type"),
				Subject: text.Draw(t, "subject"), Relation: text.Draw(t, "relation"), Object: text.Draw(t, "object"),
				Content: text.Draw(t, "content"), Namespace: text.Draw(t, "namespace"), Scope: text.Draw(t, "scope"),
				UserID: text.Draw(t, "user"), Tags: rapid.SliceOfN(text, 0, 3).Draw(t, "tags"),
				Importance: rapid.Float64Range(0, 1).Draw(t, "importance"), Confidence: rapid.Float64Range(0, 1).Draw(t, "confidence"),
				Salience: rapid.Float64Range(0, 1).Draw(t, "salience"), Pinned: rapid.Bool().Draw(t, "pinned"),
				Archived: rapid.Bool().Draw(t, "archived"), Supersedes: text.Draw(t, "supersedes"),
				SupersededBy: text.Draw(t, "superseded_by"), RetrievalCount: rapid.Int64().Draw(t, "count"),
				Score:     rapid.Float64().Draw(t, "score"),
				CreatedAt: time.UnixMicro(rapid.Int64Range(-1e15, 1e16).Draw(t, "created")).UTC(),
			}
			if rapid.Bool().Draw(t, "has metadata") {
				g.Metadata = rapid.MapOfN(text, text, 0, 3).Draw(t, "metadata")
			}
			if rapid.Bool().Draw(t, "has embedding") {
				g.Embedding = rapid.SliceOfN(rapid.Float32Range(-1e6, 1e6), 0, 4).Draw(t, "embedding")
			}
			if rapid.Bool().Draw(t, "retrieved") {
				at := time.UnixMicro(rapid.Int64Range(0, 1e16).Draw(t, "retrieved at")).In(time.FixedZone("x", 3600))
				g.LastRetrievedAt = &at
			}
			if rapid.Bool().Draw(t, "scored") {
				g.Scores = &grains.Scores{Retrieval: rapid.Float64Range(0, 1).Draw(t, "r"), Salience: 0.5, Retention: 1}
			}
			g.Erased = i > 0 && rapid.IntRange(0, 9).Draw(t, "erased") == 0
			page.Grains = append(page.Grains, g)
		}
		page.Next = text.Draw(t, "next")
		want, werr := json.Marshal(&page)
		got, gerr := json.Marshal(pageReply(&page))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("errors differ: page %v, reply %v", werr, gerr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("reply encodes as\n%s\nthe page as\n%s", got, want)
		}
		for i := range page.Grains {
			want, werr := json.Marshal(&page.Grains[i])
			got, gerr := json.Marshal(grainReply(&page.Grains[i]))
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("grain reply encodes as\n%s (%v)\nthe grain as\n%s (%v)", got, gerr, want, werr)
			}
		}
	})
}
