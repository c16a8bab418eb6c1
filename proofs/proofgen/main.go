// Command proofgen writes lethe's proof test vectors: valid and invalid
// proofs, the log's verifier key, pinned checkpoints and a manifest that
// states what verifying each one must give.
//
//	go run ./proofs/proofgen [-out proofs/testdata/vectors]
//
// Everything derives from fixed seeds, so the output is the same on every
// run; TestVectorsUpToDate checks that the checked-in files match it. The
// signing keys are test keys derived from public seeds: never use them for
// anything else.
package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/prooftest"
)

// The seeds of the vector logs.
const (
	seed      = "lethe proofgen v1"
	otherSeed = "lethe proofgen v1: another log"
	forkSeed  = "lethe proofgen v1: fork"
	origin    = "lethe.example/audit"
	logSize   = 24
)

// Vector is one manifest entry. Paths are relative to the manifest.
type Vector struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Proof       string `json:"proof"`
	Pinned      string `json:"pinned,omitempty"`
	Origin      string `json:"origin,omitempty"`
	Subject     string `json:"subject,omitempty"`
	Nonce       string `json:"nonce,omitempty"`
	// Want is the check that must fail ("" when the proof is valid).
	Want proofs.Check `json:"want"`
}

// Manifest lists the vectors.
type Manifest struct {
	Comment string   `json:"comment"`
	LogKey  string   `json:"log_key"`
	Vectors []Vector `json:"vectors"`
}

func main() {
	out := flag.String("out", filepath.Join("proofs", "testdata", "vectors"), "output directory")
	flag.Parse()
	files, err := Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "proofgen:", err)
		os.Exit(1)
	}
	if err := write(*out, files); err != nil {
		fmt.Fprintln(os.Stderr, "proofgen:", err)
		os.Exit(1)
	}
	fmt.Printf("proofgen: wrote %d files to %s\n", len(files), *out)
}

// write replaces the contents of dir with files.
func write(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range old {
		if _, keep := files[e.Name()]; !keep && !e.IsDir() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// Generate returns the vector files by name.
func Generate() (map[string][]byte, error) {
	g := &gen{files: map[string][]byte{}}
	g.build()
	if g.err != nil {
		return nil, g.err
	}
	return g.files, nil
}

type gen struct {
	files   map[string][]byte
	vectors []Vector
	err     error
}

func (g *gen) fail(err error) {
	if g.err == nil {
		g.err = err
	}
}

// file records a file, once.
func (g *gen) file(name string, b []byte) string {
	if _, dup := g.files[name]; dup && !bytes.Equal(g.files[name], b) {
		g.fail(fmt.Errorf("two contents for %s", name))
	}
	g.files[name] = b
	return name
}

// proof writes p in the encoding the name's extension says and records a
// vector for it.
func (g *gen) proof(v Vector, file string, p *proofs.Proof) {
	var b []byte
	var err error
	if strings.HasSuffix(file, ".tlog-proof") {
		b, err = p.MarshalTlogProof()
	} else {
		b, err = p.Marshal()
	}
	if err != nil {
		g.fail(fmt.Errorf("%s: %w", v.Name, err))
		return
	}
	g.raw(v, file, b)
}

// raw records a vector whose proof file is b as is.
func (g *gen) raw(v Vector, file string, b []byte) {
	v.Proof = g.file(file, b)
	g.vectors = append(g.vectors, v)
}

func clone(p *proofs.Proof) *proofs.Proof {
	b, err := p.Marshal()
	if err != nil {
		panic(err)
	}
	q, err := proofs.ParseProof(b)
	if err != nil {
		panic(err)
	}
	return q
}

func (g *gen) build() {
	l, r := prooftest.SampleLog(seed, origin, logSize)
	other, _ := prooftest.SampleLog(otherSeed, origin, logSize)
	fork := prooftest.NewLog(seed, origin) // the same key as l
	fr := prooftest.NewRand(forkSeed)
	for i := 0; i < logSize; i++ {
		if i < 10 {
			fork.AppendRaw(l.Leaves[i])
		} else {
			fork.Append(prooftest.SampleLeaf(fr, i))
		}
	}
	g.file("log.vkey", []byte(l.VKey+"\n"))
	cp := func(lg *prooftest.Log, size uint64, name string) string { return g.file(name, lg.Checkpoint(size)) }
	pinned9 := cp(l, 9, "checkpoint-9.txt")
	pinned12 := cp(l, 12, "checkpoint-12.txt")
	pinned24 := cp(l, 24, "checkpoint-24.txt")
	otherPinned9 := cp(other, 9, "other-log-checkpoint-9.txt")
	nonce15 := hex.EncodeToString(r.Bytes("nonce 15", 32))
	nonce5 := hex.EncodeToString(r.Bytes("nonce 5", 32))
	withConsistency := func(lg *prooftest.Log, index, size, from uint64) *proofs.Proof {
		p := lg.Proof(index, size)
		p.SetConsistency(from, lg.Consistency(from, size))
		return p
	}

	// Valid proofs.
	forget := l.Proof(10, logSize)
	erase := l.Proof(15, logSize)
	erasePinned := withConsistency(l, 15, logSize, 9)
	g.proof(Vector{Name: "valid-first-leaf", Description: "the first event, in the tree of size 1 (empty inclusion proof)"},
		"valid-first-leaf.json", l.Proof(0, 1))
	g.proof(Vector{Name: "valid-grain-forget", Description: "a grain.forget event with its grain hashes"},
		"valid-grain-forget.json", forget)
	g.proof(Vector{Name: "valid-grain-forget-text", Description: "the same proof as a c2sp.org/tlog-proof@v1 file"},
		"valid-grain-forget.tlog-proof", forget)
	g.proof(Vector{Name: "valid-key-erase", Description: "a crypto-erasure (key.erase, count and digest), with the subject commitment checked",
		Subject: prooftest.Subject, Nonce: nonce15}, "valid-key-erase.json", erase)
	g.proof(Vector{Name: "valid-key-erase-pinned", Description: "the erasure with a consistency proof from a pinned checkpoint of size 9",
		Pinned: pinned9, Subject: prooftest.Subject, Nonce: nonce15}, "valid-key-erase-pinned.json", erasePinned)
	g.proof(Vector{Name: "valid-key-erase-pinned-text", Description: "the same, as a tlog-proof file",
		Pinned: pinned9, Subject: prooftest.Subject, Nonce: nonce15}, "valid-key-erase-pinned.tlog-proof", erasePinned)
	g.proof(Vector{Name: "valid-pinned-same-size", Description: "the pinned checkpoint is the proof's own checkpoint",
		Pinned: pinned24}, "valid-pinned-same-size.json", l.Proof(3, logSize))
	g.proof(Vector{Name: "valid-policy-run", Description: "a policy run that removed nothing: count 0, digest of the empty list"},
		"valid-policy-run.json", l.Proof(9, logSize))

	// Malformed documents.
	p := clone(forget)
	p.Format = "lethe.proof/v2"
	g.proof(Vector{Name: "format-version", Description: "an unknown format version", Want: proofs.CheckFormat}, "format-version.json", p)
	b, _ := forget.Marshal()
	g.raw(Vector{Name: "format-unknown-field", Description: "an unknown top-level field", Want: proofs.CheckFormat},
		"format-unknown-field.json", bytes.Replace(b, []byte(`{"format"`), []byte(`{"subject_nonce":"00","format"`), 1))
	text, _ := forget.MarshalTlogProof()
	lines := strings.SplitN(string(text), "\n", 3)
	g.raw(Vector{Name: "format-tlog-proof-no-extra", Description: "a tlog-proof file without the extra line carrying the leaf", Want: proofs.CheckFormat},
		"format-tlog-proof-no-extra.tlog-proof", []byte(lines[0]+"\n"+lines[2]))

	// The leaf.
	leaf := l.Leaves[10]
	spaced := bytes.Replace(leaf, []byte(`,"memory"`), []byte(`, "memory"`), 1)
	p = clone(forget)
	p.Leaf, p.LeafSignature = spaced, l.Signer.SignLeaf(spaced)
	g.proof(Vector{Name: "leaf-not-canonical", Description: "a signed leaf with a space added: not the canonical encoding", Want: proofs.CheckLeafFormat},
		"leaf-not-canonical.json", p)
	p = clone(erase)
	p.Count++
	g.proof(Vector{Name: "summary-count", Description: "the top-level count differs from the leaf's", Want: proofs.CheckSummary}, "summary-count.json", p)
	p = clone(erase)
	p.KeyFingerprint = strings.Repeat("0", 64)
	g.proof(Vector{Name: "summary-key-fingerprint", Description: "the top-level key_fingerprint differs from the leaf's", Want: proofs.CheckSummary},
		"summary-key-fingerprint.json", p)
	p = clone(forget)
	p.LeafSignature = other.Signer.SignLeaf(p.Leaf)
	g.proof(Vector{Name: "leaf-signature-other-key", Description: "the leaf signed by another log's key", Want: proofs.CheckLeafSignature},
		"leaf-signature-other-key.json", p)
	p = clone(forget)
	p.LeafSignature[17] ^= 0x04
	g.proof(Vector{Name: "leaf-signature-bit-flip", Description: "one bit of the leaf signature flipped", Want: proofs.CheckLeafSignature},
		"leaf-signature-bit-flip.json", p)

	// The checkpoint.
	p = clone(forget)
	p.Checkpoint = string(other.Checkpoint(logSize))
	g.proof(Vector{Name: "checkpoint-other-key", Description: "a checkpoint signed by another key with the same name", Want: proofs.CheckCheckpointSignature},
		"checkpoint-other-key.json", p)
	p = clone(forget)
	p.Checkpoint = strings.Replace(p.Checkpoint, fmt.Sprintf("\n%d\n", logSize), fmt.Sprintf("\n%d\n", logSize+1), 1)
	g.proof(Vector{Name: "checkpoint-body-edited", Description: "the checkpoint's size line edited after signing", Want: proofs.CheckCheckpointSignature},
		"checkpoint-body-edited.json", p)
	foreign, _ := l.Signer.SignCheckpoint(proofs.Checkpoint{Origin: "other.example/audit", Size: logSize, Hash: l.Root(logSize)})
	p = clone(forget)
	p.Checkpoint = string(foreign)
	g.proof(Vector{Name: "checkpoint-origin", Description: "a checkpoint signed by the log key for another origin", Want: proofs.CheckCheckpointOrigin},
		"checkpoint-origin.json", p)
	g.proof(Vector{Name: "valid-checkpoint-origin-given", Description: "the same proof, verified with that origin given explicitly",
		Origin: "other.example/audit"}, "checkpoint-origin.json", p)

	// Tree size and inclusion.
	p = clone(forget)
	p.TreeSize--
	g.proof(Vector{Name: "tree-size", Description: "tree_size is not the checkpoint's size", Want: proofs.CheckTreeSize}, "tree-size.json", p)
	p = clone(forget)
	p.Inclusion[2][5] ^= 0x01
	g.proof(Vector{Name: "inclusion-hash", Description: "one bit of an inclusion hash flipped", Want: proofs.CheckInclusion}, "inclusion-hash.json", p)
	p = clone(forget)
	p.LeafIndex++
	g.proof(Vector{Name: "inclusion-index", Description: "the leaf index changed", Want: proofs.CheckInclusion}, "inclusion-index.json", p)
	p = clone(l.Proof(11, logSize))
	p.Inclusion = forget.Inclusion
	p.LeafIndex = forget.LeafIndex
	g.proof(Vector{Name: "inclusion-other-leaf", Description: "another signed leaf with this leaf's index and inclusion proof", Want: proofs.CheckInclusion},
		"inclusion-other-leaf.json", p)
	p = clone(forget)
	p.Inclusion = p.Inclusion[:len(p.Inclusion)-1]
	g.proof(Vector{Name: "inclusion-truncated", Description: "the last inclusion hash dropped", Want: proofs.CheckInclusion},
		"inclusion-truncated.json", p)

	// Pinned checkpoints.
	g.proof(Vector{Name: "consistency-fork", Description: "a fork of the log after 10 events, signed by the same key, against a pinned checkpoint of the original at 12",
		Pinned: pinned12, Want: proofs.CheckConsistency}, "consistency-fork.json", withConsistency(fork, 15, logSize, 12))
	g.proof(Vector{Name: "consistency-missing", Description: "a pinned checkpoint of size 9 but no consistency proof in the proof",
		Pinned: pinned9, Want: proofs.CheckConsistency}, "consistency-missing.json", erase)
	g.proof(Vector{Name: "consistency-wrong-start", Description: "a consistency proof from size 12 against a pinned checkpoint of size 9",
		Pinned: pinned9, Want: proofs.CheckConsistency}, "consistency-wrong-start.json", withConsistency(l, 15, logSize, 12))
	g.proof(Vector{Name: "consistency-rollback", Description: "a proof at size 12 against a pinned checkpoint of size 24",
		Pinned: pinned24, Want: proofs.CheckConsistency}, "consistency-rollback.json", l.Proof(3, 12))
	g.proof(Vector{Name: "pinned-other-key", Description: "the pinned checkpoint is signed by another key",
		Pinned: otherPinned9, Want: proofs.CheckPinned}, "valid-key-erase-pinned.json", erasePinned)

	// The subject commitment.
	g.proof(Vector{Name: "subject-wrong", Description: "another scope path than the one erased",
		Subject: "acme/prod/bot2", Nonce: nonce15, Want: proofs.CheckSubject}, "valid-key-erase.json", erase)
	g.proof(Vector{Name: "subject-wrong-nonce", Description: "the nonce of another erasure",
		Subject: prooftest.Subject, Nonce: nonce5, Want: proofs.CheckSubject}, "valid-key-erase.json", erase)
	g.proof(Vector{Name: "subject-no-commitment", Description: "a subject and nonce given for an event that commits to none",
		Subject: prooftest.Subject, Nonce: nonce15, Want: proofs.CheckSubject}, "valid-grain-forget.json", forget)

	slices.SortStableFunc(g.vectors, func(a, b Vector) int { return strings.Compare(a.Name, b.Name) })
	m := Manifest{
		Comment: "Generated by go run ./proofs/proofgen; do not edit. Test keys from public seeds.",
		LogKey:  "log.vkey",
		Vectors: g.vectors,
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		g.fail(err)
		return
	}
	g.file("vectors.json", append(mb, '\n'))
}
