package search

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
)

// A segment is the postings blocks of one insert, one per distinct token,
// packed into one value in token order: the text index's tail on SQLite
// (see package store), where a batch then costs one row instead of one row
// per distinct term. Each entry is
//
//	entry = token length (one byte), token, block length (unsigned varint), block
//
// with the block as EncodeBlock packs it.
type Segment struct {
	Entries []SegmentEntry // in increasing token order, tokens distinct
}

// SegmentEntry is one token's block in a segment.
type SegmentEntry struct {
	Token, Block []byte
}

var errSegment = errors.New("corrupt postings segment")

// AppendSegment appends the segment of entries (in increasing token
// order, tokens distinct, each at most 255 bytes) to b.
func AppendSegment(b []byte, entries []SegmentEntry) []byte {
	for _, e := range entries {
		b = append(b, byte(len(e.Token)))
		b = append(b, e.Token...)
		b = binary.AppendUvarint(b, uint64(len(e.Block)))
		b = append(b, e.Block...)
	}
	return b
}

// ParseSegment reads a segment's entries. They point into v, which the
// caller must not modify while the segment is in use. Tokens out of order
// or repeated are an error: Find relies on the order.
func ParseSegment(v []byte) (Segment, error) {
	var s Segment
	for len(v) > 0 {
		tok, block, size, err := nextEntry(v)
		if err != nil {
			return Segment{}, err
		}
		v = v[size:]
		if last := len(s.Entries) - 1; last >= 0 && bytes.Compare(s.Entries[last].Token, tok) >= 0 {
			return Segment{}, errSegment
		}
		s.Entries = append(s.Entries, SegmentEntry{Token: tok, Block: block})
	}
	return s, nil
}

// nextEntry reads the entry at the start of v (not empty): its token and
// block, capped, and its encoded size.
func nextEntry(v []byte) (tok, block []byte, size int, err error) {
	n := int(v[0])
	if n == 0 || len(v) < 1+n {
		return nil, nil, 0, errSegment
	}
	tok = v[1 : 1+n : 1+n]
	m, k := binary.Uvarint(v[1+n:])
	if k <= 0 || m == 0 || m > uint64(len(v)-1-n-k) {
		return nil, nil, 0, errSegment
	}
	size = 1 + n + k + int(m)
	return tok, v[1+n+k : size : size], size, nil
}

// Find returns the block of tok in s, or nil.
func (s Segment) Find(tok []byte) []byte {
	i, ok := slices.BinarySearchFunc(s.Entries, tok, func(e SegmentEntry, t []byte) int { return bytes.Compare(e.Token, t) })
	if !ok {
		return nil
	}
	return s.Entries[i].Block
}

// RemoveFromSegment returns segment value v without the postings of the
// ids in gone[token], for each token of gone (a token's block left empty
// is dropped), its number of blocks, and whether it changed. It walks v
// once and copies the blocks it keeps as they are, in runs: a delete in a
// batch's segment of 2,500 blocks rewrites the few blocks of its grain's
// terms, not the segment's entries one by one.
func RemoveFromSegment(v []byte, gone map[string]map[int64]bool) (out []byte, n int, changed bool, err error) {
	out = make([]byte, 0, len(v))
	kept := 0 // v[kept:at] is to copy as it is
	for at := 0; at < len(v); {
		start := at
		tok, block, size, err := nextEntry(v[at:])
		if err != nil {
			return nil, 0, false, err
		}
		at += size
		ids := gone[string(tok)]
		if len(ids) == 0 {
			n++
			continue
		}
		b, ch, err := RemoveFromBlock(block, ids)
		if err != nil {
			return nil, 0, false, err
		}
		if !ch {
			n++
			continue
		}
		changed = true
		out = append(out, v[kept:start]...)
		kept = at
		if b != nil {
			out = AppendSegment(out, []SegmentEntry{{Token: tok, Block: b}})
			n++
		}
	}
	if !changed {
		return v, n, false, nil
	}
	return append(out, v[kept:]...), n, true, nil
}

// MergeSegments returns the blocks of segs (in increasing order of the
// grain ids they hold: each segment's ids above the previous one's) merged
// by token: one block per distinct token, in token order, with the
// postings of every segment that holds it. first[i] is the index of the
// first segment holding entry i's token.
func MergeSegments(segs []Segment) (entries []SegmentEntry, first []int, err error) {
	at := make([]int, len(segs)) // each segment's next entry
	var holding []int            // the segments whose next entry has the least token
	var ps []Posting
	for {
		holding = holding[:0]
		var least []byte
		for i, s := range segs {
			if at[i] == len(s.Entries) {
				continue
			}
			tok := s.Entries[at[i]].Token
			switch c := bytes.Compare(tok, least); {
			case len(holding) == 0 || c < 0:
				holding, least = append(holding[:0], i), tok
			case c == 0:
				holding = append(holding, i)
			}
		}
		if len(holding) == 0 {
			return entries, first, nil
		}
		block := segs[holding[0]].Entries[at[holding[0]]].Block
		if len(holding) > 1 {
			ps = ps[:0]
			for _, i := range holding {
				b, err := DecodeBlock(nil, segs[i].Entries[at[i]].Block)
				if err != nil {
					return nil, nil, err
				}
				if ps, err = b.Postings(ps); err != nil {
					return nil, nil, err
				}
			}
			block = EncodeBlock(ps)
		}
		entries = append(entries, SegmentEntry{Token: least, Block: block})
		first = append(first, holding[0])
		for _, i := range holding {
			at[i]++
		}
	}
}
