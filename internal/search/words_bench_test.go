package search

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// benchWords is an English vocabulary with the suffixes the stemmer works
// on (plurals, -ing, -ed, -ly, -ation, ...), drawn Zipf-wise below.
var benchWords = strings.Fields(`patient allergy allergies penicillin reaction reactions treatment treated treating
	doctor doctors prescribed prescription dose doses daily weekly monthly morning evening symptoms symptom
	headache headaches fever fevers rash rashes swelling swollen breathing difficulty difficulties history
	family mother father sister brother children child pregnant pregnancy blood pressure heart rate measured
	measurements recorded recording visited visiting hospital hospitals clinic clinics insurance insured
	policy policies claim claims payment payments account accounts address addresses phone email contact
	contacted contacting prefers preferred preference preferences language languages speaks spoke spoken
	meeting meetings scheduled rescheduled cancelled appointment appointments follow following followed
	happily quickly slowly carefully generally usually occasionally rarely never always sometimes often
	relational conditional national rationalization organization organizations organized organizing
	running runner runs walked walking walks jumped jumping hopeful hopefully hopeless hopelessness
	connection connections connected connecting connective education educational educated educating`)

// benchTexts returns n grain texts of 12 words each, Zipf over benchWords.
func benchTexts(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.1, 1, uint64(len(benchWords)-1))
	out := make([]string, n)
	for i := range out {
		ws := make([]string, 12)
		for j := range ws {
			ws[j] = benchWords[z.Uint64()]
		}
		if i%3 == 0 {
			ws[0] = strings.ToUpper(ws[0][:1]) + ws[0][1:]
		}
		out[i] = strings.Join(ws, " ") + "."
	}
	return out
}

// BenchmarkWordsBatch computes the terms of a batch of 1,000 grains with
// one Words, as a write's indexer does: ns/op is per batch.
func BenchmarkWordsBatch(b *testing.B) {
	texts := benchTexts(1000, 7)
	for b.Loop() {
		ws := NewWords()
		for _, t := range texts {
			ws.Terms("subject-1", "", t)
		}
	}
}

// BenchmarkWordsCount is BenchmarkWordsBatch through Count, as the
// indexer calls it: one scratch slice for the batch.
func BenchmarkWordsCount(b *testing.B) {
	texts := benchTexts(1000, 7)
	for b.Loop() {
		ws := NewWords()
		var terms []TermCount
		for _, t := range texts {
			terms, _ = ws.Count(terms[:0], "subject-1", "", t)
		}
	}
}
