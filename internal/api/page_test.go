package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

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
	// Floats at encoding/json's cutoffs (1e-6, 1e21), the smallest and
	// largest, negative zero, and the NaN and infinities it refuses.
	special := []float64{0, math.Copysign(0, -1), 1e-6, 9.999999e-7, 1e21, 9.99999e20, 5e-324, math.MaxFloat64,
		-1e-7, 123456789.125, math.NaN(), math.Inf(1), math.Inf(-1)}
	float := rapid.OneOf(rapid.Float64(), rapid.Float64Range(0, 1), rapid.SampledFrom(special))
	float32s := rapid.OneOf(rapid.Float32Range(-1e6, 1e6), rapid.Float32(),
		rapid.SampledFrom([]float32{1e-6, 9.999999e-7, 1e21, 1e-45, math.MaxFloat32, float32(math.Inf(1)), float32(math.NaN())}))
	rapid.Check(t, func(t *rapid.T) {
		var page lethe.Page
		n := rapid.IntRange(0, 6).Draw(t, "grains")
		for i := range n {
			g := grains.Grain{
				Hash: text.Draw(t, "hash"), Memory: text.Draw(t, "memory"), Type: text.Draw(t, "type"),
				Subject: text.Draw(t, "subject"), Relation: text.Draw(t, "relation"), Object: text.Draw(t, "object"),
				Content: text.Draw(t, "content"), Namespace: text.Draw(t, "namespace"), Scope: text.Draw(t, "scope"),
				UserID: text.Draw(t, "user"), Tags: rapid.SliceOfN(text, 0, 3).Draw(t, "tags"),
				Importance: float.Draw(t, "importance"), Confidence: rapid.Float64Range(0, 1).Draw(t, "confidence"),
				Salience: rapid.Float64Range(0, 1).Draw(t, "salience"), Pinned: rapid.Bool().Draw(t, "pinned"),
				Archived: rapid.Bool().Draw(t, "archived"), Supersedes: text.Draw(t, "supersedes"),
				SupersededBy: text.Draw(t, "superseded_by"), RetrievalCount: rapid.Int64().Draw(t, "count"),
				Score:     float.Draw(t, "score"),
				CreatedAt: time.UnixMicro(rapid.Int64Range(-1e15, 1e16).Draw(t, "created")).UTC(),
			}
			if rapid.Bool().Draw(t, "has metadata") {
				g.Metadata = rapid.MapOfN(text, text, 0, 3).Draw(t, "metadata")
			}
			if rapid.Bool().Draw(t, "has embedding") {
				g.Embedding = rapid.SliceOfN(float32s, 0, 4).Draw(t, "embedding")
			}
			if rapid.Bool().Draw(t, "retrieved") {
				at := time.UnixMicro(rapid.Int64Range(0, 1e16).Draw(t, "retrieved at")).In(time.FixedZone("x", 3600))
				g.LastRetrievedAt = &at
			}
			if rapid.Bool().Draw(t, "scored") {
				g.Scores = &grains.Scores{Retrieval: float.Draw(t, "r"), Salience: 0.5, Retention: 1}
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
		// The hand-written encoder of the same types (wirejson.go).
		if p, ok := pageReply(&page).(pageJSON); ok {
			got, gerr := p.appendJSON(nil)
			if (werr == nil) != (gerr == nil) || (werr == nil && !bytes.Equal(got, want)) {
				t.Fatalf("appendJSON writes\n%s (%v)\nencoding/json\n%s (%v)", got, gerr, want, werr)
			}
		}
		for i := range page.Grains {
			want, werr := json.Marshal(&page.Grains[i])
			got, gerr := json.Marshal(grainReply(&page.Grains[i]))
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("grain reply encodes as\n%s (%v)\nthe grain as\n%s (%v)", got, gerr, want, werr)
			}
			if w, ok := grainReply(&page.Grains[i]).(*wireGrain); ok {
				got, gerr := w.appendJSON(nil)
				if (werr == nil) != (gerr == nil) || (werr == nil && !bytes.Equal(got, want)) {
					t.Fatalf("appendJSON writes the grain as\n%s (%v)\nencoding/json\n%s (%v)", got, gerr, want, werr)
				}
			}
		}
	})
}

// BenchmarkPageJSON encodes a recall's page of 10 grains as lethe-load's
// recalls return them, through encoding/json and through appendJSON.
func BenchmarkPageJSON(b *testing.B) {
	var page lethe.Page
	at := time.Now().UTC()
	for i := range 10 {
		page.Grains = append(page.Grains, grains.Grain{Hash: fmt.Sprintf("%064x", i), Memory: "load-0a1b2c3d", Type: "fact",
			Subject: "subject-42", Relation: fmt.Sprintf("rel-%d", i), Object: fmt.Sprintf("object-%d", i*1000),
			Namespace: "default", Scope: "load/s3", UserID: fmt.Sprintf("user-%d", i), Tags: []string{"t7"},
			Importance: 0.5, Confidence: 1, Salience: 0.93, CreatedAt: at, LastRetrievedAt: &at, RetrievalCount: 3,
			Scores: &grains.Scores{Retrieval: 0.97, Salience: 0.93, Retention: 0.99}})
	}
	p := pageReply(&page).(pageJSON)
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendJSON", func(b *testing.B) {
		for b.Loop() {
			if _, err := p.appendJSON(make([]byte, 0, 4096)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// An answer's buffer goes back to the pool cleared: grains in clear do not
// stay in it after their answer was sent, on the encoder's path and on
// encoding/json's (a NaN it refuses).
func TestReplyBufferIsClearedAfterUse(t *testing.T) {
	gin.SetMode(gin.TestMode)
	for _, tc := range []struct {
		score   float64
		content string
	}{{0.5, ""}, {math.NaN(), ""}, {0.5, strings.Repeat("x", 10000)}} { // the last outgrows the buffer
		score, name := tc.score, fmt.Sprintf("score %v, content of %d bytes", tc.score, len(tc.content))
		page := lethe.Page{Grains: []grains.Grain{{Hash: "h", Memory: "m", Subject: "penicillin allergy", Content: tc.content, Importance: score}}}
		used := false
		for try := 0; try < 100 && !used; try++ {
			for range 8 { // what earlier answers left in the pool
				replyBuffers.Get()
			}
			all := bytes.Repeat([]byte{0xff}, 8192)
			mine := all[:0]
			replyBuffers.Put(&mine)
			rec := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(rec)
			wireReply{http.StatusOK, pageReply(&page).(pageJSON)}.send(c)
			if !bytes.Contains(rec.Body.Bytes(), []byte("penicillin")) && !math.IsNaN(score) {
				t.Fatalf("the answer lacks the grain: %s", rec.Body.Bytes())
			}
			if all[0] == 0xff {
				continue // the pool gave send another buffer (it may drop what is put)
			}
			used = true
			if i := slices.IndexFunc(all, func(b byte) bool { return b != 0 && b != 0xff }); i >= 0 {
				t.Errorf("%s: the pooled buffer still holds the answer: %q", name, all[:min(len(all), 80)])
			}
		}
		if !used {
			t.Errorf("%s: send never used the buffer put in the pool", name)
		}
	}
}
