// Package memlog is a small in-memory Merkle log for tests and test
// vectors. It follows the definitions of [RFC 6962] section 2.1 literally
// (MTH, PATH, PROOF and SUBPROOF, by recursion), so that it is an
// implementation independent of github.com/transparency-dev/merkle, which
// the verifier uses. It is quadratic and meant for trees of a few thousand
// leaves at most.
//
// [RFC 6962]: https://www.rfc-editor.org/rfc/rfc6962#section-2.1
package memlog

import (
	"crypto/sha256"
	"fmt"
)

// Log is an append-only list of leaves.
type Log struct {
	leafHashes [][32]byte
}

// LeafHash returns SHA-256(0x00 || leaf).
func LeafHash(leaf []byte) [32]byte {
	return sha256.Sum256(append([]byte{0}, leaf...))
}

// nodeHash returns SHA-256(0x01 || left || right).
func nodeHash(l, r [32]byte) [32]byte {
	b := make([]byte, 0, 65)
	b = append(b, 1)
	b = append(b, l[:]...)
	b = append(b, r[:]...)
	return sha256.Sum256(b)
}

// Append adds a leaf and returns its index.
func (l *Log) Append(leaf []byte) uint64 {
	l.leafHashes = append(l.leafHashes, LeafHash(leaf))
	return uint64(len(l.leafHashes) - 1)
}

// Size returns the number of leaves.
func (l *Log) Size() uint64 { return uint64(len(l.leafHashes)) }

// split returns the largest power of two smaller than n (n > 1).
func split(n int) int {
	k := 1
	for k<<1 < n {
		k <<= 1
	}
	return k
}

// mth is MTH(D[n]) over leaf hashes.
func mth(d [][32]byte) [32]byte {
	switch len(d) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return d[0]
	}
	k := split(len(d))
	return nodeHash(mth(d[:k]), mth(d[k:]))
}

// path is PATH(m, D[n]).
func path(m int, d [][32]byte) [][]byte {
	if len(d) <= 1 {
		return nil
	}
	k := split(len(d))
	if m < k {
		h := mth(d[k:])
		return append(path(m, d[:k]), h[:])
	}
	h := mth(d[:k])
	return append(path(m-k, d[k:]), h[:])
}

// subproof is SUBPROOF(m, D[n], b).
func subproof(m int, d [][32]byte, b bool) [][]byte {
	n := len(d)
	if m == n {
		if b {
			return nil
		}
		h := mth(d)
		return [][]byte{h[:]}
	}
	k := split(n)
	if m <= k {
		h := mth(d[k:])
		return append(subproof(m, d[:k], b), h[:])
	}
	h := mth(d[:k])
	return append(subproof(m-k, d[k:], false), h[:])
}

// Root returns the root hash of the tree of the first size leaves.
func (l *Log) Root(size uint64) ([32]byte, error) {
	if size > l.Size() {
		return [32]byte{}, fmt.Errorf("size %d beyond log size %d", size, l.Size())
	}
	return mth(l.leafHashes[:size]), nil
}

// Inclusion returns the inclusion proof of leaf index in the tree of the
// first size leaves. The result is never nil.
func (l *Log) Inclusion(index, size uint64) ([][]byte, error) {
	if index >= size || size > l.Size() {
		return nil, fmt.Errorf("no leaf %d in tree size %d of log size %d", index, size, l.Size())
	}
	p := path(int(index), l.leafHashes[:size])
	if p == nil {
		p = [][]byte{}
	}
	return p, nil
}

// Consistency returns the consistency proof from tree size m to tree size
// n. RFC 6962 defines it for 0 < m < n; for m == 0 or m == n it is empty.
func (l *Log) Consistency(m, n uint64) ([][]byte, error) {
	if m > n || n > l.Size() {
		return nil, fmt.Errorf("no consistency proof from %d to %d in log size %d", m, n, l.Size())
	}
	if m == 0 || m == n {
		return [][]byte{}, nil
	}
	return subproof(int(m), l.leafHashes[:n], true), nil
}
