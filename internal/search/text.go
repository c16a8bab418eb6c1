// Package search is lethe's ranking: the words a grain is found by, BM25
// over their blind postings, and cosine similarity over embeddings. It does
// no I/O: the store keeps the postings (as blind tokens) and package
// recall reads them, re-checks every candidate against the store and ranks
// with these functions.
//
// # Words
//
// [Terms] splits text on anything that is not a letter or a digit,
// lower-cases it (after Unicode NFC, as grains.NormalizeText), drops English
// stop words and words over [MaxWordBytes], and stems what is left with the
// Snowball English stemmer (github.com/kljensen/snowball, the Porter2
// algorithm: https://snowballstem.org/algorithms/english/stemmer.html).
// "Allergies" and "allergy" are one term; words of other languages pass
// through the English rules, mostly unchanged.
//
// # Ranking
//
// [BM25] is Okapi BM25 with k1 = 1.2 and b = 0.75 and the non-negative
// idf log(1 + (N - df + 0.5) / (df + 0.5)) (Robertson and Zaragoza, "The
// Probabilistic Relevance Framework: BM25 and Beyond", 2009).
package search

import (
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"

	"github.com/lethe-io/lethe/internal/grains"
)

// MaxWordBytes bounds an indexed word: longer runs of letters are not words
// anyone searches for (hashes, base64) and are left out.
const MaxWordBytes = 64

// MaxQueryTerms bounds the distinct terms of a query: each is one index
// lookup per scope.
const MaxQueryTerms = 32

// Doc is the terms of one grain: each distinct term with its count, and
// the grain's length in terms.
type Doc struct {
	Terms map[string]int
	Len   int
}

// Terms returns the terms of texts, as one document.
func Terms(texts ...string) Doc {
	return (*Words)(nil).Terms(texts...)
}

// Words computes the terms of many documents, remembering the stem of
// every word it met: the grains of one batch share most of their words,
// and stemming was most of the cost of indexing them. A Words holds the
// words it met for as long as it is kept, so it is made for one batch and
// dropped with it, never kept across writes (the words of a forgotten grain
// must not outlive it in memory). A nil *Words remembers nothing. Not safe
// for concurrent use.
type Words struct {
	stems map[string]string
	at    map[string]int // Count's scratch: a term's place in its answer
}

// NewWords returns an empty Words.
func NewWords() *Words { return &Words{stems: map[string]string{}, at: map[string]int{}} }

// TermCount is a term and its count in a document.
type TermCount struct {
	Term string
	N    int
}

// Count appends the distinct terms of texts, as one document, to dst with
// their counts, in order of first appearance, and returns them with the
// document's length: Terms' answer as a slice. It allocates little: a
// batch's indexer calls it for every grain.
func (ws *Words) Count(dst []TermCount, texts ...string) ([]TermCount, int) {
	var at map[string]int
	if ws != nil {
		at = ws.at
		clear(at)
	} else {
		at = map[string]int{}
	}
	n := 0
	for _, t := range texts {
		eachWord(t, func(w string) bool {
			s := ws.stem(w)
			n++
			if i, ok := at[s]; ok {
				dst[i].N++
			} else {
				at[s] = len(dst)
				dst = append(dst, TermCount{Term: s, N: 1})
			}
			return false
		})
	}
	return dst, n
}

// Terms returns the terms of texts, as one document.
func (ws *Words) Terms(texts ...string) Doc {
	d := Doc{Terms: map[string]int{}}
	for _, t := range texts {
		for _, w := range ws.words(t) {
			d.Terms[w]++
			d.Len++
		}
	}
	return d
}

// stem returns w's stem.
func (ws *Words) stem(w string) string {
	if ws == nil {
		return stem(w)
	}
	s, ok := ws.stems[w]
	if !ok {
		s = stem(w)
		ws.stems[w] = s
	}
	return s
}

// QueryTerms returns the distinct terms of a query, in order of first
// appearance, at most MaxQueryTerms.
func QueryTerms(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, w := range (*Words)(nil).words(text) {
		if !seen[w] && len(out) < MaxQueryTerms {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

// Matches reports whether texts hold any of terms (as QueryTerms returns
// them), as Terms would find them. It stems only the words that can stem
// to a term: the English stemmer keeps a word's first letter and never
// lengthens it (TestStemKeepsFirstByte checks both), so a word whose first
// byte or length rules out every term is not stemmed.
func Matches(terms []string, texts ...string) bool {
	if len(terms) == 0 {
		return false
	}
	var first [256]bool
	minLen := MaxWordBytes + 1
	for _, t := range terms {
		if t != "" {
			first[t[0]] = true
			minLen = min(minLen, len(t))
		}
	}
	for _, text := range texts {
		found := eachWord(text, func(w string) bool {
			return len(w) >= minLen && first[w[0]] && slices.Contains(terms, stem(w))
		})
		if found {
			return true
		}
	}
	return false
}

// words returns the stemmed words of text, stop words left out.
func (ws *Words) words(text string) []string {
	var out []string
	eachWord(text, func(w string) bool {
		out = append(out, ws.stem(w))
		return false
	})
	return out
}

// eachWord calls fn with each word of text that is indexed, unstemmed,
// until fn returns true, and reports whether one did: text in NFC and
// lower case, split on anything that is not a letter or a digit, without
// stop words and words over MaxWordBytes. It splits as strings.FieldsFunc
// would, without making the list.
func eachWord(text string, fn func(w string) bool) bool {
	text = strings.ToLower(grains.NormalizeText(text))
	start := -1 // the current word's first byte, or -1 between words
	for i, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && word(text[start:i], fn) {
			return true
		}
		start = -1
	}
	return start >= 0 && word(text[start:], fn)
}

// word calls fn with w unless it is a stop word or over MaxWordBytes, and
// returns what fn did.
func word(w string, fn func(string) bool) bool {
	return len(w) <= MaxWordBytes && !english.IsStopWord(w) && fn(w)
}

// BM25 parameters.
const (
	K1 = 1.2
	B  = 0.75
)

// BM25 returns one term's contribution to a document's score: tf is the
// term's count in the document, dl the document's length, df the number of
// documents holding the term, n the number of documents and avgdl their
// mean length.
func BM25(tf, dl, df int, n int64, avgdl float64) float64 {
	if tf <= 0 {
		return 0
	}
	return IDF(df, n) * tfPart(tf, dl, avgdl)
}

// IDF is BM25's inverse document frequency of a term in df of n
// documents, never negative.
func IDF(df int, n int64) float64 {
	if n < int64(df) {
		n = int64(df) // statistics read at another moment than the postings
	}
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// tfPart is BM25's saturating term-count factor: it grows with tf and
// falls with dl, so a run's largest tf and least dl bound its scores.
func tfPart(tf, dl int, avgdl float64) float64 {
	if tf <= 0 {
		return 0
	}
	if avgdl <= 0 {
		avgdl = float64(max(dl, 1))
	}
	f := float64(tf)
	return f * (K1 + 1) / (f + K1*(1-B+B*float64(dl)/avgdl))
}
