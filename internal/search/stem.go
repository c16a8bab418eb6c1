package search

import "github.com/kljensen/snowball/english"

// stem returns w's stem, as english.Stem(w, false) does. Words of lower-case
// ASCII letters and digits (nearly every word of English text, and every
// word the tokens of a store were made of) are stemmed here, on the bytes of
// the word, with the steps of kljensen/snowball's English stemmer written
// again without its per-word allocations (a slice of runes, the suffix lists
// converted at every step, the answer); other words go to english.Stem.
// The output must be byte for byte the library's: a stem decides a token,
// and the tokens already stored were made by the library.
// TestStemIsLibrary checks it over the Snowball vocabulary, every short
// word of an alphabet of the letters the rules test, and random words
// built of the rules' suffixes.
func stem(w string) string {
	if len(w) > MaxWordBytes || !lowerASCII(w) {
		return english.Stem(w, false)
	}
	if len(w) <= 2 || english.IsStopWord(w) {
		return w
	}
	if s, ok := specialStems[w]; ok {
		return s
	}
	var s stemmer
	s.n = copy(s.b[:], w)
	s.preprocess()
	s.step1a()
	s.step1b()
	s.step1c()
	s.step2()
	s.step3()
	s.step4()
	s.step5()
	out := s.word()
	for i, c := range out {
		if c == 'Y' {
			out[i] = 'y'
		}
	}
	if string(out) == w {
		return w
	}
	return string(out)
}

// lowerASCII reports whether w is only lower-case ASCII letters and digits.
func lowerASCII(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// specialStems are the words the library stems by a table.
var specialStems = map[string]string{
	"skis": "ski", "skies": "sky", "dying": "die", "lying": "lie", "tying": "tie", "idly": "idl",
	"gently": "gentl", "ugly": "ugli", "early": "earli", "only": "onli", "singly": "singl", "sky": "sky",
	"news": "news", "howe": "howe", "atlas": "atlas", "cosmos": "cosmos", "bias": "bias", "andes": "andes",
	"inning": "inning", "innings": "inning", "outing": "outing", "outings": "outing", "canning": "canning",
	"cannings": "canning", "herring": "herring", "herrings": "herring", "earring": "earring",
	"earrings": "earring", "proceed": "proceed", "proceeds": "proceed", "proceeded": "proceed",
	"proceeding": "proceed", "exceed": "exceed", "exceeds": "exceed", "exceeded": "exceed",
	"exceeding": "exceed", "succeed": "succeed", "succeeds": "succeed", "succeeded": "succeed",
	"succeeding": "succeed",
}

// stemmer is a word being stemmed: its n bytes ('Y' a consonant y) and
// the starts of its regions R1 and R2, as the library's SnowballWord. The
// bytes are an array, not a slice, so that a stemmer stays on the stack.
type stemmer struct {
	b         [MaxWordBytes + 1]byte // step 1b can add an "e"
	n, r1, r2 int
}

// word returns the word's bytes.
func (s *stemmer) word() []byte { return s.b[:s.n] }

// suffixes is a list of endings to try in order, and the last bytes they
// end with, to rule out most words at once.
type suffixes struct {
	list []string
	last [256]bool
}

func newSuffixes(list ...string) *suffixes {
	x := &suffixes{list: list}
	for _, e := range list {
		x.last[e[len(e)-1]] = true
	}
	return x
}

// vowel reports whether c is a vowel of the rules ('y' is, 'Y' is not).
func vowel(c byte) bool {
	switch c {
	case 'a', 'e', 'i', 'o', 'u', 'y':
		return true
	}
	return false
}

// suffix returns the first of x's endings the word ends with, or "".
func (s *stemmer) suffix(x *suffixes) string {
	if s.n == 0 || !x.last[s.b[s.n-1]] {
		return ""
	}
	for _, e := range x.list {
		if len(e) <= s.n && string(s.b[s.n-len(e):s.n]) == e {
			return e
		}
	}
	return ""
}

// clamp keeps the regions within the word.
func (s *stemmer) clamp() {
	s.r1, s.r2 = min(s.r1, s.n), min(s.r2, s.n)
}

// cut removes the word's last k bytes.
func (s *stemmer) cut(k int) {
	s.n -= k
	s.clamp()
}

// replace replaces the word's last k bytes with repl.
func (s *stemmer) replace(k int, repl string) {
	s.n = s.n - k + copy(s.b[s.n-k:], repl)
	s.clamp()
}

// add appends c to the word.
func (s *stemmer) add(c byte) {
	s.b[s.n] = c
	s.n++
}

// vnv returns the index after the first non-vowel following a vowel at or
// after start+1, or the word's length (the library's romance.VnvSuffix).
func (s *stemmer) vnv(start int) int {
	for j := start + 1; j < s.n; j++ {
		if vowel(s.b[j-1]) && !vowel(s.b[j]) {
			return j + 1
		}
	}
	return s.n
}

// preprocess marks the y's that are consonants and finds R1 and R2.
func (s *stemmer) preprocess() {
	for i, c := range s.word() {
		if c == 'y' && (i == 0 || vowel(s.b[i-1])) {
			s.b[i] = 'Y'
		}
	}
	if p := s.prefix("gener", "commun", "arsen"); p != "" {
		s.r1 = len(p)
	} else {
		s.r1 = s.vnv(0)
	}
	s.r2 = s.vnv(s.r1)
}

// prefix returns the first of prefixes the word starts with, or "".
func (s *stemmer) prefix(prefixes ...string) string {
	for _, p := range prefixes {
		if len(p) <= s.n && string(s.b[:len(p)]) == p {
			return p
		}
	}
	return ""
}

// shortSyllableAt reports whether s.b[:i] ends in a short syllable.
func (s *stemmer) shortSyllableAt(i int) bool {
	switch {
	case i == 2:
		return vowel(s.b[0]) && !vowel(s.b[1])
	case i >= 3:
		c1, c2, c3 := s.b[i-1], s.b[i-2], s.b[i-3]
		return !vowel(c1) && c1 != 'w' && c1 != 'x' && c1 != 'Y' && vowel(c2) && !vowel(c3)
	}
	return false
}

// short reports whether the word is short: R1 empty and a short syllable
// at its end.
func (s *stemmer) short() bool {
	return s.r1 >= s.n && s.shortSyllableAt(s.n)
}

// The endings of each step, in the library's order.
var (
	step1aEnds = newSuffixes("sses", "ied", "ies", "us", "ss", "s")
	step1bEnds = newSuffixes("eedly", "ingly", "edly", "ing", "eed", "ed")
	// step1bAfter are the endings step 1b looks at once it cut one.
	step1bAfter = newSuffixes("at", "bl", "iz", "bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt")
	step2Ends   = newSuffixes("ational", "fulness", "iveness", "ization", "ousness",
		"biliti", "lessli", "tional", "alism", "aliti", "ation",
		"entli", "fulli", "iviti", "ousli", "anci", "abli",
		"alli", "ator", "enci", "izer", "bli", "ogi", "li")
	step3Ends = newSuffixes("ational", "tional", "alize", "icate", "ative", "iciti", "ical", "ful", "ness")
	step4Ends = newSuffixes("ement", "ance", "ence", "able", "ible", "ment",
		"ent", "ant", "ism", "ate", "iti", "ous", "ive",
		"ize", "ion", "al", "er", "ic")
)

// step1a rewrites the plural endings: sses to ss, ied and ies to i or ie,
// and drops an s after a part with a vowel before its last letter.
func (s *stemmer) step1a() {
	switch x := s.suffix(step1aEnds); x {
	case "sses":
		s.replace(4, "ss")
	case "ied", "ies":
		if s.n > 4 {
			s.replace(3, "i")
		} else {
			s.replace(3, "ie")
		}
	case "s":
		for i := 0; i < s.n-2; i++ {
			if vowel(s.b[i]) {
				s.cut(1)
				return
			}
		}
	}
}

// step1b rewrites eed and eedly in R1 to ee, and drops ed, edly, ing and
// ingly after a part with a vowel, then mends the end (at, bl and iz take
// an e, a double letter loses one, a short word takes an e).
func (s *stemmer) step1b() {
	x := s.suffix(step1bEnds)
	switch x {
	case "eed", "eedly":
		if len(x) <= s.n-s.r1 {
			s.replace(len(x), "ee")
		}
		return
	case "ed", "edly", "ing", "ingly":
	default:
		return
	}
	found := false
	for i := 0; i < s.n-len(x); i++ {
		if vowel(s.b[i]) {
			found = true
			break
		}
	}
	if !found {
		return
	}
	r1, r2 := s.r1, s.r2
	s.cut(len(x))
	switch y := s.suffix(step1bAfter); y {
	case "":
		if s.short() {
			s.add('e')
			s.r1, s.r2 = s.n, s.n
			return
		}
	case "at", "bl", "iz":
		s.add('e')
	default:
		s.cut(1)
	}
	s.r1, s.r2 = min(r1, s.n), min(r2, s.n)
}

// step1c turns a final y or Y after a consonant, not the first letter,
// into i.
func (s *stemmer) step1c() {
	n := s.n
	if n > 2 && (s.b[n-1] == 'y' || s.b[n-1] == 'Y') && !vowel(s.b[n-2]) {
		s.b[n-1] = 'i'
	}
}

// step2Repl is what step 2 replaces each of its suffixes with ("li" and
// "ogi" aside).
var step2Repl = map[string]string{
	"tional": "tion", "enci": "ence", "anci": "ance", "abli": "able", "entli": "ent", "izer": "ize",
	"ization": "ize", "ational": "ate", "ation": "ate", "ator": "ate", "alism": "al", "aliti": "al",
	"alli": "al", "fulness": "ful", "ousli": "ous", "ousness": "ous", "iveness": "ive", "iviti": "ive",
	"biliti": "ble", "bli": "ble", "fulli": "ful", "lessli": "less",
}

// step2 rewrites the derivational endings in R1 (ational to ate, izer to
// ize, li after a valid li-ending dropped, ...).
func (s *stemmer) step2() {
	x := s.suffix(step2Ends)
	if x == "" || len(x) > s.n-s.r1 {
		return
	}
	n := s.n
	switch x {
	case "li":
		if n >= 3 {
			switch s.b[n-3] {
			case 'c', 'd', 'e', 'g', 'h', 'k', 'm', 'n', 'r', 't':
				s.cut(2)
			}
		}
	case "ogi":
		if n >= 4 && s.b[n-4] == 'l' {
			s.replace(3, "og")
		}
	default:
		s.replace(len(x), step2Repl[x])
	}
}

// step3Repl is what step 3 replaces each of its suffixes with ("ative"
// aside).
var step3Repl = map[string]string{
	"ational": "ate", "tional": "tion", "alize": "al", "icate": "ic", "iciti": "ic", "ical": "ic",
	"ful": "", "ness": "",
}

// step3 rewrites the endings of step 3 in R1 (alize to al, ful and ness
// dropped, ...) and drops ative in R2.
func (s *stemmer) step3() {
	x := s.suffix(step3Ends)
	if x == "" || len(x) > s.n-s.r1 {
		return
	}
	if x == "ative" {
		if s.n-s.r2 >= 5 {
			s.cut(5)
		}
		return
	}
	s.replace(len(x), step3Repl[x])
}

// step4 drops the endings of step 4 in R2 (ion after s or t only).
func (s *stemmer) step4() {
	x := s.suffix(step4Ends)
	if x == "" || len(x) > s.n-s.r2 {
		return
	}
	if x == "ion" {
		if n := s.n; n >= 4 && (s.b[n-4] == 's' || s.b[n-4] == 't') {
			s.cut(3)
		}
		return
	}
	s.cut(len(x))
}

// step5 drops a final e in R2, or in R1 after no short syllable, and the
// second l of a final ll in R2.
func (s *stemmer) step5() {
	last := s.n - 1
	if s.r1 > last {
		return
	}
	switch {
	case s.b[last] == 'e':
		if s.r2 <= last || !s.shortSyllableAt(last) {
			s.cut(1)
		}
	case s.r2 <= last && s.b[last] == 'l' && last >= 1 && s.b[last-1] == 'l':
		s.cut(1)
	}
}
