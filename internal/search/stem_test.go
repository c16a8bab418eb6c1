package search

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kljensen/snowball/english"
	"pgregory.net/rapid"
)

// snowballVocabulary returns the words of the Snowball project's English
// vocabulary (29,414 words, with apostrophes and the stop words), as the
// stemmer library's module ships them in its own test.
func snowballVocabulary(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kljensen/snowball").Output()
	if err != nil {
		t.Fatalf("go list the stemmer's module: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "english_vocab", "vocab_test.go"))
	if err != nil {
		t.Fatalf("the Snowball vocabulary: %v", err)
	}
	var words []string
	for _, m := range regexp.MustCompile(`\{("[^"]*"), "[^"]*"\}`).FindAllStringSubmatch(string(src), -1) {
		w, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatalf("the Snowball vocabulary: %s: %v", m[1], err)
		}
		words = append(words, w)
	}
	if len(words) < 29000 {
		t.Fatalf("the Snowball vocabulary has %d words", len(words))
	}
	return words
}

// stemEnds are the endings the stemmer's rules test, and a few letters
// they look at before them.
var stemEnds = []string{"", "s", "es", "ies", "ied", "ed", "ing", "ly", "ational", "tional", "enci", "anci",
	"izer", "bli", "alli", "entli", "eli", "ousli", "ization", "ation", "ator", "alism", "aliti", "iviti", "biliti",
	"logi", "ogi", "fulli", "lessli", "icate", "ative", "alize", "iciti", "ical", "ful", "ness", "fulness", "iveness",
	"ousness", "ement", "ment", "ent", "ism", "ate", "iti", "ous", "ive", "ize", "ion", "sion", "tion", "al", "er",
	"ic", "able", "ible", "ant", "ence", "ance", "y", "e", "le", "ll", "eed", "eedly", "ingly", "edly", "ss", "sses",
	"us", "yy", "at", "bl", "iz", "bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt", "w", "x", "li", "cli", "gli"}

// TestStemIsLibrary checks that stem gives english.Stem(w, false) byte for
// byte: over the Snowball vocabulary, every word of up to four letters of
// an alphabet of the letters the rules tell apart, and random words made
// of prefixes the rules know, letters and endings.
func TestStemIsLibrary(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, w string) {
		if got, want := stem(w), english.Stem(w, false); got != want {
			t.Fatalf("stem(%q) = %q, the library's %q", w, got, want)
		}
	}
	for _, w := range snowballVocabulary(t) {
		check(t, w)
		check(t, strings.ReplaceAll(w, "'", ""))
	}
	const letters = "aeiouybcdglmnstwx1"
	var word func(prefix string)
	word = func(prefix string) {
		check(t, prefix)
		if len(prefix) < 4 {
			for i := range len(letters) {
				word(prefix + letters[i:i+1])
			}
		}
	}
	word("")
	for _, w := range []string{strings.Repeat("a", MaxWordBytes), strings.Repeat("e", MaxWordBytes-3) + "ing",
		strings.Repeat("ab", MaxWordBytes/2+1), "Running", "caf\u00e9", "na\u00efvet\u00e9s", "\u00fcbernational"} {
		check(t, w)
	}
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		b.WriteString(rapid.SampledFrom([]string{"", "y", "gener", "commun", "arsen", "ya", "ey"}).Draw(t, "prefix"))
		b.WriteString(rapid.StringMatching(`[a-z0-9]{0,6}`).Draw(t, "letters"))
		for range rapid.IntRange(0, 3).Draw(t, "ends") {
			b.WriteString(rapid.SampledFrom(stemEnds).Draw(t, "end"))
		}
		check(t, b.String())
	})
}

// BenchmarkStem stems English words (benchWords: plurals, -ing, -ed, -ly,
// -ation, ...) and made-up words as BenchmarkSearchTextWriteCost's corpus's
// ("w123x", which no rule changes) with stem and with the library; ns/word
// is per word.
func BenchmarkStem(b *testing.B) {
	made := make([]string, 1000)
	for i := range made {
		made[i] = "w" + strconv.Itoa(i) + "x"
	}
	for _, c := range []struct {
		name  string
		words []string
	}{{"english", benchWords}, {"made-up", made}} {
		for _, f := range []struct {
			name string
			fn   func(string) string
		}{{"stem", stem}, {"library", func(w string) string { return english.Stem(w, false) }}} {
			b.Run(c.name+"/"+f.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					for _, w := range c.words {
						f.fn(w)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(c.words)), "ns/word")
			})
		}
	}
}
