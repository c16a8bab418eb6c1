package search

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// segmentsGen draws segments over a few tokens (of varied lengths, some
// prefixes of others) whose ids increase from one segment to the next, as
// the inserts of a store give them, and returns them with the model: each
// token's postings in id order.
func segmentsGen(t *rapid.T) ([]Segment, map[string][]Posting) {
	toks := []string{"a", "ab", "b", "ba\x00", "\xff", "zzzzzzzzzzzzzzzz"}
	model := map[string][]Posting{}
	var segs []Segment
	id := int64(rapid.IntRange(1, 1000).Draw(t, "first"))
	for range rapid.IntRange(0, 6).Draw(t, "segments") {
		byTok := map[string][]Posting{}
		for range rapid.IntRange(1, 40).Draw(t, "grains") {
			id += int64(rapid.IntRange(1, 3).Draw(t, "gap"))
			for _, i := range rapid.SliceOfNDistinct(rapid.IntRange(0, len(toks)-1), 0, 3, rapid.ID[int]).Draw(t, "tokens") {
				p := Posting{ID: id, TF: rapid.IntRange(1, 5).Draw(t, "tf"), DL: rapid.IntRange(1, 300).Draw(t, "dl")}
				byTok[toks[i]] = append(byTok[toks[i]], p)
				model[toks[i]] = append(model[toks[i]], p)
			}
		}
		var entries []SegmentEntry
		for _, tok := range slices.Sorted(maps.Keys(byTok)) {
			entries = append(entries, SegmentEntry{Token: []byte(tok), Block: EncodeBlock(byTok[tok])})
		}
		seg, err := ParseSegment(AppendSegment(nil, entries))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(seg.Entries, entries, func(a, b SegmentEntry) bool {
			return bytes.Equal(a.Token, b.Token) && bytes.Equal(a.Block, b.Block)
		}) {
			t.Fatal("a segment read back differs from the one written")
		}
		segs = append(segs, seg)
	}
	return segs, model
}

func postingsOf(t *rapid.T, v []byte) []Posting {
	b, err := DecodeBlock(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := b.Postings(nil)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// Merged segments hold every posting once, one block per token in token
// order, the first segment named right; Find finds every token of a
// segment and nothing else; RemoveFromSegment takes out exactly the
// postings asked.
func TestSegments(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		segs, model := segmentsGen(t)
		entries, first, err := MergeSegments(segs)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != len(model) || len(first) != len(entries) {
			t.Fatalf("%d merged blocks, want %d", len(entries), len(model))
		}
		for i, e := range entries {
			if i > 0 && bytes.Compare(entries[i-1].Token, e.Token) >= 0 {
				t.Fatal("merged blocks out of token order")
			}
			if got, want := postingsOf(t, e.Block), model[string(e.Token)]; !slices.Equal(got, want) {
				t.Fatalf("token %q: %v, want %v", e.Token, got, want)
			}
			f := slices.IndexFunc(segs, func(s Segment) bool { return s.Find(e.Token) != nil })
			if first[i] != f {
				t.Fatalf("token %q: first segment %d, want %d", e.Token, first[i], f)
			}
		}
		for _, s := range segs {
			for _, tok := range []string{"a", "ab", "b", "ba\x00", "\xff", "zzzzzzzzzzzzzzzz", "", "aa", "zzzzzzzzzzzzzzzzz"} {
				i := slices.IndexFunc(s.Entries, func(e SegmentEntry) bool { return string(e.Token) == tok })
				got := s.Find([]byte(tok))
				if (i < 0) != (got == nil) || i >= 0 && !bytes.Equal(got, s.Entries[i].Block) {
					t.Fatalf("Find(%q) = %x, want entry %d", tok, got, i)
				}
			}
		}
		if len(segs) == 0 {
			return
		}
		s := segs[rapid.IntRange(0, len(segs)-1).Draw(t, "segment")]
		gone := map[string]map[int64]bool{}
		for _, e := range s.Entries {
			for _, p := range postingsOf(t, e.Block) {
				if rapid.Bool().Draw(t, "gone") {
					if gone[string(e.Token)] == nil {
						gone[string(e.Token)] = map[int64]bool{}
					}
					gone[string(e.Token)][p.ID] = true
				}
			}
		}
		v, n, changed, err := RemoveFromSegment(AppendSegment(nil, s.Entries), gone)
		if err != nil {
			t.Fatal(err)
		}
		out, err := ParseSegment(v)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(out.Entries) {
			t.Fatalf("RemoveFromSegment counts %d blocks, the segment holds %d", n, len(out.Entries))
		}
		if changed != (len(gone) > 0) {
			t.Fatalf("changed = %v with %d tokens' postings gone", changed, len(gone))
		}
		kept := 0
		for _, e := range s.Entries {
			want := slices.DeleteFunc(postingsOf(t, e.Block), func(p Posting) bool { return gone[string(e.Token)][p.ID] })
			v := out.Find(e.Token)
			switch {
			case len(want) == 0 && v != nil:
				t.Fatalf("token %q emptied and still in the segment", e.Token)
			case len(want) > 0 && !slices.Equal(postingsOf(t, v), want):
				t.Fatalf("token %q after RemoveFromSegment: %v, want %v", e.Token, postingsOf(t, v), want)
			}
			if len(want) > 0 {
				kept++
			}
		}
		if len(out.Entries) != kept {
			t.Fatalf("%d entries after RemoveFromSegment, want %d", len(out.Entries), kept)
		}
	})
}

// A corrupt segment is an error, never a panic or a wrong read.
func TestParseSegmentRejects(t *testing.T) {
	good := AppendSegment(nil, []SegmentEntry{{Token: []byte("a"), Block: EncodeBlock([]Posting{{ID: 1, TF: 1, DL: 1}})},
		{Token: []byte("b"), Block: EncodeBlock([]Posting{{ID: 2, TF: 1, DL: 1}})}})
	if _, err := ParseSegment(good); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string][]byte{
		"cut in a token":   good[:1],
		"cut in a block":   good[:len(good)-1],
		"no token":         append([]byte{0}, good...),
		"tokens reversed":  AppendSegment(nil, []SegmentEntry{{Token: []byte("b"), Block: []byte{1}}, {Token: []byte("a"), Block: []byte{1}}}),
		"token repeated":   AppendSegment(nil, []SegmentEntry{{Token: []byte("a"), Block: []byte{1}}, {Token: []byte("a"), Block: []byte{1}}}),
		"empty block":      {1, 'a', 0},
		"length too large": {1, 'a', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, err := ParseSegment(v); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// RemoveFromSegment walks the same entries (their order aside).
	gone := map[string]map[int64]bool{"a": {1: true}, "b": {2: true}}
	for name, v := range map[string][]byte{
		"cut in a token":   good[:1],
		"cut in a block":   good[:len(good)-1],
		"no token":         append([]byte{0}, good...),
		"empty block":      {1, 'a', 0},
		"length too large": {1, 'a', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"corrupt block":    {1, 'a', 1, 0xff},
	} {
		if _, _, _, err := RemoveFromSegment(v, gone); err == nil {
			t.Errorf("RemoveFromSegment, %s: no error", name)
		}
	}
}
