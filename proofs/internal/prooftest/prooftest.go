// Package prooftest builds deterministic audit logs, leaves and proofs for
// the tests of package proofs and for its vector generator. Keys, ids and
// nonces derive from a seed string, never from crypto/rand, so the output
// is the same on every run.
package prooftest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/memlog"
)

// Rand is a deterministic byte source: Bytes(label, n) is the first n bytes
// of SHA-256(seed || 0x00 || label || 0x00 || counter) for counter 0, 1, ...
type Rand struct {
	seed string
}

// NewRand returns a Rand for seed.
func NewRand(seed string) *Rand { return &Rand{seed: seed} }

// Bytes returns n bytes derived from the seed and label.
func (r *Rand) Bytes(label string, n int) []byte {
	out := make([]byte, 0, n+sha256.Size)
	for ctr := uint64(0); len(out) < n; ctr++ {
		h := sha256.New()
		h.Write([]byte(r.seed))
		h.Write([]byte{0})
		h.Write([]byte(label))
		h.Write([]byte{0})
		binary.Write(h, binary.BigEndian, ctr)
		out = h.Sum(out)
	}
	return out[:n]
}

// Hex returns n bytes from Bytes in lowercase hex.
func (r *Rand) Hex(label string, n int) string { return hex.EncodeToString(r.Bytes(label, n)) }

// Log is an in-memory audit log with a deterministic signing key.
type Log struct {
	Origin string
	SKey   string // test-only signer key, derived from the seed
	VKey   string
	Signer *proofs.Signer
	Leaves [][]byte
	Sigs   [][]byte
	tree   memlog.Log
}

// NewLog returns an empty log named origin whose key derives from seed.
func NewLog(seed, origin string) *Log {
	skey, vkey, err := proofs.NewKeyFromSeed(origin, NewRand(seed).Bytes("log key", 32))
	if err != nil {
		panic(err)
	}
	s, err := proofs.NewSigner(skey)
	if err != nil {
		panic(err)
	}
	return &Log{Origin: origin, SKey: skey, VKey: vkey, Signer: s}
}

// Append signs and appends leaf and returns its index.
func (l *Log) Append(leaf *proofs.Leaf) uint64 {
	b, err := leaf.Marshal()
	if err != nil {
		panic(err)
	}
	return l.AppendRaw(b)
}

// AppendRaw signs and appends leaf bytes as they are, valid or not.
func (l *Log) AppendRaw(b []byte) uint64 {
	l.Leaves = append(l.Leaves, b)
	l.Sigs = append(l.Sigs, l.Signer.SignLeaf(b))
	return l.tree.Append(b)
}

// Size returns the number of leaves.
func (l *Log) Size() uint64 { return l.tree.Size() }

// Root returns the root hash at size.
func (l *Log) Root(size uint64) [32]byte {
	r, err := l.tree.Root(size)
	if err != nil {
		panic(err)
	}
	return r
}

// Checkpoint returns the signed checkpoint note at size.
func (l *Log) Checkpoint(size uint64) []byte {
	n, err := l.Signer.SignCheckpoint(proofs.Checkpoint{Origin: l.Origin, Size: size, Hash: l.Root(size)})
	if err != nil {
		panic(err)
	}
	return n
}

// Inclusion returns the inclusion proof of index at size.
func (l *Log) Inclusion(index, size uint64) [][]byte {
	p, err := l.tree.Inclusion(index, size)
	if err != nil {
		panic(err)
	}
	return p
}

// Consistency returns the consistency proof from m to n.
func (l *Log) Consistency(m, n uint64) [][]byte {
	p, err := l.tree.Consistency(m, n)
	if err != nil {
		panic(err)
	}
	return p
}

// Proof returns the proof of leaf index in the tree of size leaves.
func (l *Log) Proof(index, size uint64) *proofs.Proof {
	p, err := proofs.NewProof(l.Leaves[index], l.Sigs[index], index, size, l.Inclusion(index, size), l.Checkpoint(size))
	if err != nil {
		panic(err)
	}
	return p
}

// Epoch is the time of the first sample event.
var Epoch = time.Date(2026, 11, 21, 10, 15, 30, 0, time.UTC)

// Subject is the sample erasure subject: a made-up scope path, no
// personal data.
const Subject = "acme/prod/bot1"

// sampleTypes are the event types SampleLeaf cycles through: the types of
// the first leaf format, so that the checked-in vectors stay as they were
// generated. The KEK events are made by SampleKEKLeaf.
var sampleTypes = proofs.EventTypes[:10]

// SampleKEKLeaf returns a kek.rotate (rotate set) or kek.trim event at
// minute i, for KEK version v.
func SampleKEKLeaf(r *Rand, i int, rotate bool, v uint64) *proofs.Leaf {
	l := &proofs.Leaf{V: proofs.LeafVersion, ID: r.Hex(fmt.Sprintf("event id %d", i), 16), Type: proofs.EventKEKTrim,
		Time: Epoch.Add(time.Duration(i) * time.Minute), Actor: "local", KEK: "age-local", KEKMinVersion: &v}
	if rotate {
		l.Type, l.KEKMinVersion, l.KEKVersion = proofs.EventKEKRotate, nil, &v
	}
	return l
}

// SampleLeaf returns the i-th of a deterministic series of events, cycling
// through every event type. Erasures commit to [Subject] with the nonce
// r.Bytes("nonce <i>", 32).
func SampleLeaf(r *Rand, i int) *proofs.Leaf {
	types := sampleTypes
	l := &proofs.Leaf{
		V:      proofs.LeafVersion,
		ID:     r.Hex(fmt.Sprintf("event id %d", i), 16),
		Type:   types[i%len(types)],
		Memory: "customer-support",
		Time:   Epoch.Add(time.Duration(i) * time.Minute),
		Actor:  "local",
	}
	hashes := func(n int) []string {
		hs := make([]string, n)
		for j := range hs {
			hs[j] = r.Hex(fmt.Sprintf("grain %d.%d", i, j), 32)
		}
		return hs
	}
	fp := func() []string { return []string{r.Hex(fmt.Sprintf("key %d", i), 32)} }
	switch l.Type {
	case proofs.EventGrainForget, proofs.EventGrainArchive, proofs.EventGrainSupersede:
		l.Hashes = hashes(1 + i%3)
		l.Actor = "tok_" + r.Hex(fmt.Sprintf("token %d", i), 8)
	case proofs.EventGrainPurge:
		hs := hashes(5)
		n := uint64(len(hs))
		l.Count, l.Digest, l.Policy = &n, proofs.HashesDigest(hs), "decay-default"
	case proofs.EventKeyCreate:
		l.KeyFingerprints = fp()
	case proofs.EventKeyErase:
		hs := hashes(3)
		n := uint64(len(hs))
		l.Count, l.Digest, l.KeyFingerprints = &n, proofs.HashesDigest(hs), fp()
		l.Commitment = proofs.Commitment(r.Bytes(fmt.Sprintf("nonce %d", i), 32), Subject)
		l.Actor = "tok_" + r.Hex(fmt.Sprintf("token %d", i), 8)
	case proofs.EventHoldSet, proofs.EventHoldRelease:
		l.Hold = "hold_" + r.Hex(fmt.Sprintf("hold %d", i), 8)
		l.Commitment = proofs.Commitment(r.Bytes(fmt.Sprintf("nonce %d", i), 32), Subject)
	case proofs.EventErasureRefused:
		l.Reason, l.Hold = "held", "hold_"+r.Hex(fmt.Sprintf("hold %d", i), 8)
		l.Commitment = proofs.Commitment(r.Bytes(fmt.Sprintf("nonce %d", i), 32), Subject)
	case proofs.EventPolicyRun:
		n := uint64(0)
		l.Count, l.Digest, l.Policy = &n, proofs.HashesDigest(nil), "risk-sweep"
	}
	return l
}

// SampleLog returns a log of n sample events named origin.
func SampleLog(seed, origin string, n int) (*Log, *Rand) {
	r := NewRand(seed)
	l := NewLog(seed, origin)
	for i := 0; i < n; i++ {
		l.Append(SampleLeaf(r, i))
	}
	return l, r
}
