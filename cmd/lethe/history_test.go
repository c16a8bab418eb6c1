package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/proofs"
)

// TestChainLines checks the lines lethe verify-export prints for a chain:
// in chain order (each version followed by its superseded_by), whatever
// order the versions were written in, with each version that supersedes
// one whose superseded_by is another on a "branch of" line.
func TestChainLines(t *testing.T) {
	h := func(c byte) string { return strings.Repeat(string(c), 64) }
	a, b, c, d, e := h('a'), h('b'), h('c'), h('d'), h('e')
	key := h('f')
	v := func(hash, state, supersedes, by string, erasedBy ...string) proofs.HistoryVersion {
		return proofs.HistoryVersion{Hash: hash, State: state, Supersedes: supersedes, SupersededBy: by, ErasedBy: erasedBy}
	}
	short := func(hash string) string { return hash[:12] }
	tests := []struct {
		name     string
		versions []proofs.HistoryVersion // in the order written
		want     []string
	}{
		{"one version", []proofs.HistoryVersion{v(a, "current", "", "")},
			[]string{short(a) + " current"}},
		{"a line", []proofs.HistoryVersion{v(a, "superseded", "", b), v(b, "superseded", a, c), v(c, "current", b, "")},
			[]string{short(a) + " superseded -> " + short(b) + " superseded -> " + short(c) + " current"}},
		{"the survivor superseded again", // A -> B, B erased, A -> C
			[]proofs.HistoryVersion{v(a, "superseded", "", c), v(b, "erased", a, "", key), v(c, "current", a, "")},
			[]string{short(a) + " superseded -> " + short(c) + " current",
				"branch of " + short(a) + ": " + short(b) + " erased (key " + short(key) + ")"}},
		{"twice, the second branch a line of its own", // A -> B (erased); A -> C -> D (both erased); A -> E
			[]proofs.HistoryVersion{v(a, "superseded", "", e), v(b, "erased", a, "", key), v(c, "erased", a, d, key),
				v(d, "erased", c, "", key), v(e, "current", a, "")},
			[]string{short(a) + " superseded -> " + short(e) + " current",
				"branch of " + short(a) + ": " + short(b) + " erased (key " + short(key) + ")",
				"branch of " + short(a) + ": " + short(c) + " erased (key " + short(key) + ") -> " + short(d) + " erased (key " + short(key) + ")"}},
		{"a branch off a later version", // A -> B -> C (erased), B -> D
			[]proofs.HistoryVersion{v(a, "superseded", "", b), v(b, "superseded", a, d), v(c, "erased", b, "", key), v(d, "current", b, "")},
			[]string{short(a) + " superseded -> " + short(b) + " superseded -> " + short(d) + " current",
				"branch of " + short(b) + ": " + short(c) + " erased (key " + short(key) + ")"}},
		{"an older version erased", []proofs.HistoryVersion{v(a, "erased", "", b, key), v(b, "current", a, "")},
			[]string{short(a) + " erased (key " + short(key) + ") -> " + short(b) + " current"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chainLines(proofs.HistoryChain{Versions: tt.versions})
			if !slices.Equal(got, tt.want) {
				t.Errorf("chainLines =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
