package search

import (
	"cmp"
	"encoding/binary"
	"errors"
	"slices"
)

// Posting is one grain's entry in a term's postings: the grain's row id,
// the term's count in it and its length in terms.
type Posting struct {
	ID     int64
	TF, DL int
}

// SubBlock is the number of postings a block packs under one header.
const SubBlock = 32

// A block is the postings of one term written in one batch, packed into
// one value so that a batch of grains costs one index row per distinct
// term, not one per term and grain. In increasing id order, the postings
// are cut into runs of SubBlock, each with a header that bounds its
// scores (its largest term count and shortest length) and gives its id
// range, so that a query can skip the runs that cannot reach its best
// (see Top). All numbers are unsigned varints:
//
//	value = count, run...
//	run   = n, max tf, min dl, first id - previous run's last id, last id - first id, byte length, posting...
//	posting = id - previous id in the run (0 for the first), tf, dl
//
// Block is a block as read: its token and its runs, their postings still
// packed.
type Block struct {
	Token []byte
	Count int
	Runs  []Run
}

// Run is one run of a block: its header, its postings packed.
type Run struct {
	N, MaxTF, MinDL int
	First, Last     int64
	data            []byte
}

var errBlock = errors.New("corrupt postings block")

// EncodeBlock packs ps (of one term; sorted here by id) into a block's
// value.
func EncodeBlock(ps []Posting) []byte {
	return AppendBlock(make([]byte, 0, 8+len(ps)*5), ps)
}

// AppendBlock appends the block of ps (of one term; sorted here by id) to
// b.
func AppendBlock(b []byte, ps []Posting) []byte {
	slices.SortFunc(ps, func(a, b Posting) int { return cmp.Compare(a.ID, b.ID) })
	b = binary.AppendUvarint(b, uint64(len(ps)))
	var scratch [SubBlock * 3 * binary.MaxVarintLen64]byte
	run := scratch[:0]
	prevLast := int64(0)
	for start := 0; start < len(ps); start += SubBlock {
		part := ps[start:min(start+SubBlock, len(ps))]
		maxTF, minDL := 0, part[0].DL
		run = run[:0]
		prev := part[0].ID
		for _, p := range part {
			maxTF, minDL = max(maxTF, p.TF), min(minDL, p.DL)
			run = binary.AppendUvarint(run, uint64(p.ID-prev))
			run = binary.AppendUvarint(run, uint64(p.TF))
			run = binary.AppendUvarint(run, uint64(p.DL))
			prev = p.ID
		}
		first, last := part[0].ID, part[len(part)-1].ID
		for _, x := range []uint64{uint64(len(part)), uint64(maxTF), uint64(minDL), uint64(first - prevLast), uint64(last - first), uint64(len(run))} {
			b = binary.AppendUvarint(b, x)
		}
		b = append(b, run...)
		prevLast = last
	}
	return b
}

// DecodeBlock reads a block's run headers; Postings reads the postings.
func DecodeBlock(token, v []byte) (Block, error) {
	next := func() (uint64, bool) {
		x, n := binary.Uvarint(v)
		if n <= 0 {
			return 0, false
		}
		v = v[n:]
		return x, true
	}
	count, ok := next()
	if !ok || count > 1<<31 {
		return Block{}, errBlock
	}
	bl := Block{Token: token, Count: int(count)}
	prevLast, seen := int64(0), 0
	for len(v) > 0 {
		var h [6]uint64
		for i := range h {
			if h[i], ok = next(); !ok {
				return Block{}, errBlock
			}
		}
		if h[0] == 0 || h[0] > SubBlock || h[5] > uint64(len(v)) {
			return Block{}, errBlock
		}
		first := prevLast + int64(h[3])
		r := Run{N: int(h[0]), MaxTF: int(h[1]), MinDL: int(h[2]), First: first, Last: first + int64(h[4]), data: v[:h[5]]}
		v = v[h[5]:]
		bl.Runs = append(bl.Runs, r)
		prevLast, seen = r.Last, seen+r.N
	}
	if seen != bl.Count {
		return Block{}, errBlock
	}
	return bl, nil
}

// Postings appends the run's postings to out, in increasing id order.
func (r Run) Postings(out []Posting) ([]Posting, error) {
	v, id := r.data, r.First
	for range r.N {
		var f [3]uint64
		for i := range f {
			x, n := binary.Uvarint(v)
			if n <= 0 {
				return out, errBlock
			}
			f[i], v = x, v[n:]
		}
		id += int64(f[0])
		out = append(out, Posting{ID: id, TF: int(f[1]), DL: int(f[2])})
	}
	if len(v) != 0 || id != r.Last {
		return out, errBlock
	}
	return out, nil
}

// Postings appends the block's postings to out, in increasing id order.
func (b Block) Postings(out []Posting) ([]Posting, error) {
	var err error
	for _, r := range b.Runs {
		if out, err = r.Postings(out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// RemoveFromBlock returns block value v without the postings of the ids
// in gone (nil when none is left), and whether it changed.
func RemoveFromBlock(v []byte, gone map[int64]bool) ([]byte, bool, error) {
	b, err := DecodeBlock(nil, v)
	if err != nil {
		return nil, false, err
	}
	ps, err := b.Postings(nil)
	if err != nil {
		return nil, false, err
	}
	kept := slices.DeleteFunc(ps, func(p Posting) bool { return gone[p.ID] })
	if len(kept) == b.Count {
		return v, false, nil
	}
	if len(kept) == 0 {
		return nil, true, nil
	}
	return EncodeBlock(kept), true, nil
}
