package search

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/kljensen/snowball/english"
	"pgregory.net/rapid"

	"github.com/lethe-io/lethe/internal/grains"
)

func TestTerms(t *testing.T) {
	tests := []struct {
		name string
		text string
		want map[string]int
		len  int
	}{
		{"stems and lower-cases", "Allergies, ALLERGY; allergic!", map[string]int{"allergi": 2, "allerg": 1}, 3},
		{"drops stop words", "the cat and the hat", map[string]int{"cat": 1, "hat": 1}, 2},
		{"splits on punctuation, keeps digits", "room-101/b", map[string]int{"room": 1, "101": 1, "b": 1}, 3},
		{"NFC", "Jose\u0301 jos\u00e9", map[string]int{"jos\u00e9": 2}, 2},
		{"drops long words", string(make([]byte, 0)) + "a" + string(slices.Repeat([]byte("x"), 70)), map[string]int{}, 0},
		{"empty", "", map[string]int{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Terms(tt.text)
			if d.Len != tt.len || len(d.Terms) != len(tt.want) {
				t.Fatalf("Terms(%q) = %v (len %d), want %v (len %d)", tt.text, d.Terms, d.Len, tt.want, tt.len)
			}
			for k, v := range tt.want {
				if d.Terms[k] != v {
					t.Errorf("Terms(%q)[%q] = %d, want %d", tt.text, k, d.Terms[k], v)
				}
			}
		})
	}
	if got := QueryTerms("Allergy allergies penicillin the"); !slices.Equal(got, []string{"allergi", "penicillin"}) {
		t.Errorf("QueryTerms = %v", got)
	}
}

func TestBM25(t *testing.T) {
	// More occurrences score higher, a longer document lower, a rarer term higher.
	base := BM25(1, 10, 10, 1000, 10)
	if base <= 0 || BM25(2, 10, 10, 1000, 10) <= base || BM25(1, 40, 10, 1000, 10) >= base || BM25(1, 10, 500, 1000, 10) >= base {
		t.Errorf("BM25 is not monotone as it should be")
	}
	if got := BM25(1, 10, 2000, 1000, 10); got <= 0 || math.IsNaN(got) {
		t.Errorf("df > n gives %v, want a small positive score", got)
	}
	if BM25(0, 10, 1, 10, 10) != 0 {
		t.Errorf("tf 0 scores")
	}
}

func TestSet(t *testing.T) {
	s := NewSet()
	s.Add(1, []float32{1, 0})
	s.Add(2, []float32{1, 1})
	s.Add(3, []float32{0, 2})
	s.Add(4, []float32{0, 0})    // zero: ignored
	s.Add(5, []float32{1, 2, 3}) // another dimension: ignored
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3", s.Len())
	}
	ids := func(hs []Hit) []int64 {
		var out []int64
		for _, h := range hs {
			out = append(out, h.ID)
		}
		return out
	}
	if got := ids(s.Nearest([]float32{1, 0.1}, 2)); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("Nearest = %v, want [1 2]", got)
	}
	if h := s.Nearest([]float32{0, 5}, 1); len(h) != 1 || h[0].ID != 3 || math.Abs(h[0].Sim-1) > 1e-6 {
		t.Errorf("Nearest = %+v, want 3 with similarity 1", h)
	}
	s.Remove(1)
	if s.Has(1) || !s.Has(2) || !s.Has(3) {
		t.Fatalf("Remove(1) left %v", ids(s.Nearest([]float32{1, 0}, 10)))
	}
	if got := ids(s.Nearest([]float32{1, 0}, 10)); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("after Remove: %v", got)
	}
	s.Keep([]int64{3, 99})
	if got := ids(s.Nearest([]float32{1, 0}, 10)); !slices.Equal(got, []int64{3}) {
		t.Errorf("after Keep: %v", got)
	}
	if s.Nearest([]float32{1, 0, 0}, 1) != nil {
		t.Errorf("a query of another dimension found something")
	}
	if c := Cosine([]float32{1, 0}, []float32{0, 1}); c != 0 {
		t.Errorf("Cosine of orthogonal vectors = %v", c)
	}
}

// TestStemKeepsFirstByte checks what Matches relies on: the stemmer keeps
// a word's first byte and never makes it longer, for random words of
// English-like letters and endings and of other scripts.
func TestStemKeepsFirstByte(t *testing.T) {
	specials := []string{"skis", "skies", "dying", "lying", "tying", "idly", "gently", "ugly", "early", "only", "singly",
		"news", "howe", "atlas", "cosmos", "bias", "andes", "inning", "outing", "canning", "herring", "earring",
		"proceed", "exceed", "succeed", "generously", "yelling", "Ypsilanti", "yyyy", "eeing"}
	check := func(t interface{ Fatalf(string, ...any) }, w string) {
		d := Terms(w)
		for s := range d.Terms {
			if s[0] != w[0] || len(s) > len(w) {
				t.Fatalf("%q stems to %q", w, s)
			}
			if !Matches([]string{s}, w) {
				t.Fatalf("Matches(%q, %q) = false", s, w)
			}
		}
	}
	for _, w := range specials {
		check(t, strings.ToLower(w))
	}
	rapid.Check(t, func(t *rapid.T) {
		stem := rapid.StringMatching(`[a-z]{1,8}`).Draw(t, "stem")
		end := rapid.SampledFrom([]string{"", "s", "es", "ies", "ied", "ed", "ing", "ly", "ational", "tional", "enci", "anci",
			"izer", "bli", "alli", "entli", "eli", "ousli", "ization", "ation", "ator", "alism", "aliti", "iviti", "biliti",
			"logi", "fulli", "lessli", "icate", "ative", "alize", "iciti", "ical", "ful", "ness", "ement", "ment", "ent",
			"ism", "ate", "iti", "ous", "ive", "ize", "ion", "al", "er", "ic", "able", "ible", "ant", "ence", "ance", "y", "e",
			"eed", "eedly", "ingly", "edly", "ss", "us", "yy", "\u00e9", "\u00df"}).Draw(t, "end")
		w := stem + end
		if rapid.Bool().Draw(t, "y") {
			w = "y" + w
		}
		check(t, w)
	})
}

// refTerms is the words' rule of the package doc spelled out with
// strings.FieldsFunc: the reference Terms and Count are checked against.
func refTerms(texts ...string) Doc {
	d := Doc{Terms: map[string]int{}}
	for _, text := range texts {
		text = strings.ToLower(grains.NormalizeText(text))
		for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			if len(w) <= MaxWordBytes && !english.IsStopWord(w) {
				d.Terms[english.Stem(w, false)]++
				d.Len++
			}
		}
	}
	return d
}

// Terms, and Count as a slice in order of first appearance, give the
// reference's terms for any texts: Count through one Words reused across
// documents (its scratch and its stems carried from one to the next) and
// through none.
func TestCountIsTerms(t *testing.T) {
	pieces := []string{"a", "B", "allergies", "Allergy", "the", "and", "running", "101", "-", " ", ".", ", ",
		"jos\u00e9", "Jose\u0301", "\u00c9t\u00e9", "\u03b1\u03b2\u03b3", "\u6771\u4eac", "\xff", "\ufffd", "_", "x\u200by",
		strings.Repeat("x", MaxWordBytes), strings.Repeat("y", MaxWordBytes+1), "Hopelessness", "NATIONAL"}
	rapid.Check(t, func(t *rapid.T) {
		ws := NewWords()
		for range rapid.IntRange(1, 4).Draw(t, "docs") {
			texts := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) string {
				return strings.Join(rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 12).Draw(t, "pieces"), "")
			}), 0, 3).Draw(t, "texts")
			want := refTerms(texts...)
			if got := Terms(texts...); got.Len != want.Len || !maps.Equal(got.Terms, want.Terms) {
				t.Fatalf("Terms(%q) = %v (len %d), want %v (len %d)", texts, got.Terms, got.Len, want.Terms, want.Len)
			}
			for _, w := range []*Words{ws, nil} {
				got, n := w.Count(nil, texts...)
				if n != want.Len || len(got) != len(want.Terms) {
					t.Fatalf("Count(%q) = %v (len %d), want %v (len %d)", texts, got, n, want.Terms, want.Len)
				}
				seen := map[string]bool{}
				for _, tc := range got {
					if seen[tc.Term] || want.Terms[tc.Term] != tc.N {
						t.Fatalf("Count(%q) = %v, want %v", texts, got, want.Terms)
					}
					seen[tc.Term] = true
				}
			}
		}
	})
}

// Matches is true exactly when the reference's terms of the texts hold one
// of the query's terms (drawn from other texts of the same pieces).
func TestMatchesIsReference(t *testing.T) {
	pieces := []string{"a", "B", "allergies", "Allergy", "the", "running", "runs", "101", " ", "-",
		"jos\u00e9", "Jose\u0301", "\u03b1\u03b2\u03b3", "\xff", "Hopelessness", "hopeful", "NATIONAL", "nation",
		strings.Repeat("x", MaxWordBytes), strings.Repeat("x", MaxWordBytes+1)}
	text := rapid.Custom(func(t *rapid.T) string {
		return strings.Join(rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 10).Draw(t, "pieces"), " ")
	})
	rapid.Check(t, func(t *rapid.T) {
		terms := QueryTerms(text.Draw(t, "query"))
		texts := rapid.SliceOfN(text, 0, 3).Draw(t, "texts")
		want := false
		for term := range refTerms(texts...).Terms {
			want = want || slices.Contains(terms, term)
		}
		if got := Matches(terms, texts...); got != want {
			t.Fatalf("Matches(%q, %q) = %v, want %v", terms, texts, got, want)
		}
	})
}
