package lethe_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/lethe-io/lethe"
)

// A forgotten grain's words leave no byte in the SQLite files, wherever
// its postings were when it was forgotten: one grain's blocks moved
// through both levels of the text index's tail into grain_postings (each
// merge deleting the moved rows), another's were still in the tail's
// segments (posting_segments).
// A word only the grain held has a token only its block and its document
// row held: after the forget and Close, the token must be nowhere in the
// data directory (secure_delete zeroes deleted cells; Close checkpoints
// and removes the log).
func TestForgottenWordsLeaveNoBytes(t *testing.T) {
	dir := t.TempDir()
	raw := sqliteRaw{dir: dir}
	db, err := lethe.Open(context.Background(), lethe.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetPostingTailMax(12) // posting_mid at 96
	ctx := context.Background()
	common := []string{"aspirin", "fever", "dose", "rash", "penicillin", "allergy", "cough", "tablet", "nurse", "clinic"}
	batch := func(k int, extra string) []lethe.Grain {
		var out []lethe.Grain
		for i := range 20 {
			out = append(out, lethe.Grain{Memory: "m", Type: "fact", Subject: fmt.Sprintf("s%d", k),
				Content: fmt.Sprintf("%s %s patient%d", common[i%len(common)], common[(i+k)%len(common)], k*100+i)})
		}
		if extra != "" {
			out[0].Content += " " + extra
		}
		return out
	}
	add := func(b []lethe.Grain) string {
		t.Helper()
		hs, err := db.AddBatch(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return hs[0]
	}
	// ownTokens returns the tokens of the grain with hash h that no other
	// grain holds.
	ownTokens := func(h string) [][]byte {
		t.Helper()
		ids := raw.query(t, "SELECT id FROM grains WHERE hash = ?", h)
		if len(ids) != 1 {
			t.Fatalf("grain %s: %d rows", h[:8], len(ids))
		}
		others := map[string]bool{}
		for _, packed := range raw.query(t, "SELECT toks FROM grain_docs WHERE grain_id != ?", string(ids[0])) {
			for _, tok := range unpack(t, packed) {
				others[string(tok)] = true
			}
		}
		var own [][]byte
		for _, packed := range raw.query(t, "SELECT toks FROM grain_docs WHERE grain_id = ?", string(ids[0])) {
			for _, tok := range unpack(t, packed) {
				if !others[string(tok)] {
					own = append(own, tok)
				}
			}
		}
		if len(own) == 0 {
			t.Fatalf("grain %s has no word of its own", h[:8])
		}
		return own
	}
	where := func(tok []byte) string {
		for _, b := range rawBlocks(t, "sqlite", func(q string) [][]byte { return raw.query(t, q) }) {
			if bytes.Equal(b.token, tok) {
				return b.table
			}
		}
		return ""
	}

	old := add(batch(0, "zyzzyva quixotic"))
	oldToks := ownTokens(old)
	for k := 1; k <= 15; k++ {
		add(batch(k, ""))
	}
	// Two grains, fewer blocks than the tail holds: the forget rewrites
	// their segment (an UPDATE, its old pages freed), not deletes it.
	young := add(batch(16, "xylophone")[:2])
	youngToks := ownTokens(young)
	for _, tok := range oldToks {
		if got := where(tok); got != "grain_postings" {
			t.Fatalf("the old grain's block is in %q, want grain_postings: the merges did not run", got)
		}
	}
	for _, tok := range youngToks {
		if got := where(tok); got != "posting_segments" {
			t.Fatalf("the young grain's block is in %q, want posting_segments", got)
		}
	}
	for _, tok := range append(oldToks, youngToks...) {
		if len(raw.residue(t, tok)) == 0 {
			t.Fatal("a live token is not found in the data directory: the search is blind")
		}
	}
	for _, h := range []string{old, young} {
		if fr, err := db.Forget(ctx, lethe.Selector{Memory: "m", Hash: h}); err != nil || fr.Count != 1 {
			t.Fatalf("forget %s: %+v, %v", h[:8], fr, err)
		}
	}
	if n := raw.query(t, "SELECT COUNT(*) FROM posting_segments"); string(n[0]) != "1" {
		t.Fatalf("%s segments after the forgets, want the young grains' one, rewritten", n[0])
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tok := range append(oldToks, youngToks...) {
		if at := raw.residue(t, tok); len(at) > 0 {
			t.Errorf("a forgotten grain's token survives at %v", at)
		}
	}
}

// unpack splits a document row's packed tokens (a length byte before each).
func unpack(t *testing.T, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n {
			t.Fatal("corrupt token list")
		}
		out, b = append(out, b[1:1+n]), b[1+n:]
	}
	return out
}
