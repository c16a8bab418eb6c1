package proofs_test

import (
	"errors"
	"testing"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/prooftest"
)

// finalityLog is a log with a key.erase event at index 0 (KEK version
// erased, KEK "age-local"), rotations and trims after it, and sample events
// between them.
type finalityLog struct {
	log                         *prooftest.Log
	erase, trimLow, trimHigh    uint64 // indices
	otherKEK, rotate, trimEarly uint64
}

func newFinalityLog(t *testing.T) *finalityLog {
	t.Helper()
	r := prooftest.NewRand("finality")
	f := &finalityLog{log: prooftest.NewLog("finality", "lethe.example/audit")}
	// A trim logged before the erasure proves nothing about it.
	f.trimEarly = f.log.Append(prooftest.SampleKEKLeaf(r, 100, false, 5))
	erase := prooftest.SampleLeaf(r, 5) // index 5 of the cycle is key.erase
	if erase.Type != proofs.EventKeyErase {
		t.Fatalf("sample leaf 5 is %s", erase.Type)
	}
	v := uint64(2)
	erase.KEK, erase.KEKVersion = "age-local", &v
	f.erase = f.log.Append(erase)
	for i := range 3 {
		f.log.Append(prooftest.SampleLeaf(r, i))
	}
	f.rotate = f.log.Append(prooftest.SampleKEKLeaf(r, 101, true, 3))
	f.trimLow = f.log.Append(prooftest.SampleKEKLeaf(r, 102, false, 2)) // keeps version 2
	other := prooftest.SampleKEKLeaf(r, 103, false, 9)
	other.KEK = "vault-transit:lethe"
	f.otherKEK = f.log.Append(other)
	f.trimHigh = f.log.Append(prooftest.SampleKEKLeaf(r, 104, false, 3))
	return f
}

// pair returns the erasure's proof at its own tree size and the trim's at
// the final size, with a consistency proof between the two.
func (f *finalityLog) pair(erase, trim uint64) (*proofs.Proof, *proofs.Proof) {
	ep := f.log.Proof(erase, erase+1)
	size := f.log.Size()
	tp := f.log.Proof(trim, size)
	tp.SetConsistency(erase+1, f.log.Consistency(erase+1, size))
	return ep, tp
}

func TestVerifyFinality(t *testing.T) {
	f := newFinalityLog(t)
	opts := proofs.VerifyOptions{LogKey: f.log.VKey}

	ep, tp := f.pair(f.erase, f.trimHigh)
	got, err := proofs.VerifyFinality(ep, tp, opts)
	if err != nil {
		t.Fatalf("VerifyFinality: %v", err)
	}
	if got.KEK != "age-local" || got.ErasureKEKVersion != 2 || got.TrimMinVersion != 3 {
		t.Errorf("got %+v", got)
	}

	tests := []struct {
		name      string
		erase     uint64
		trim      uint64
		mangle    func(ep, tp *proofs.Proof)
		wantCheck proofs.Check
	}{
		{name: "trim keeps the version", erase: f.erase, trim: f.trimLow, wantCheck: proofs.CheckFinality},
		{name: "another KEK", erase: f.erase, trim: f.otherKEK, wantCheck: proofs.CheckFinality},
		{name: "a rotation is no trim", erase: f.erase, trim: f.rotate, wantCheck: proofs.CheckFinality},
		{name: "not an erasure", erase: f.erase + 1, trim: f.trimHigh, wantCheck: proofs.CheckFinality},
		{name: "no consistency proof", erase: f.erase, trim: f.trimHigh, wantCheck: proofs.CheckConsistency,
			mangle: func(_, tp *proofs.Proof) { tp.SetConsistency(0, nil) }},
		{name: "consistency from another size", erase: f.erase, trim: f.trimHigh, wantCheck: proofs.CheckConsistency,
			mangle: func(_, tp *proofs.Proof) { tp.SetConsistency(1, f.log.Consistency(1, f.log.Size())) }},
		{name: "erasure forged", erase: f.erase, trim: f.trimHigh, wantCheck: proofs.CheckLeafSignature,
			mangle: func(ep, _ *proofs.Proof) { ep.LeafSignature[0] ^= 1 }},
		{name: "trim forged", erase: f.erase, trim: f.trimHigh, wantCheck: proofs.CheckLeafSignature,
			mangle: func(_, tp *proofs.Proof) { tp.LeafSignature[0] ^= 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, tp := f.pair(tt.erase, tt.trim)
			if tt.mangle != nil {
				tt.mangle(ep, tp)
			}
			_, err := proofs.VerifyFinality(ep, tp, opts)
			if got := proofs.FailedCheck(err); got != tt.wantCheck {
				t.Fatalf("failed check %q (%v), want %q", got, err, tt.wantCheck)
			}
			var fe *proofs.FinalityError
			if tt.wantCheck == proofs.CheckFinality && !errors.As(err, &fe) {
				t.Fatalf("error %T is not a *FinalityError", err)
			}
		})
	}

	// A trim logged before the erasure: its checkpoint cannot extend the
	// erasure's unless it is the same or larger, and it is earlier.
	ep = f.log.Proof(f.erase, f.log.Size())
	tp = f.log.Proof(f.trimEarly, f.log.Size())
	if _, err := proofs.VerifyFinality(ep, tp, opts); proofs.FailedCheck(err) != proofs.CheckFinality {
		t.Fatalf("a trim before the erasure: %v", err)
	}
}

func FuzzVerifyFinality(f *testing.F) {
	fl := newFinalityLog(&testing.T{})
	ep, tp := fl.pair(fl.erase, fl.trimHigh)
	eb, _ := ep.Marshal()
	tb, _ := tp.Marshal()
	f.Add(eb, tb)
	opts := proofs.VerifyOptions{LogKey: fl.log.VKey}
	f.Fuzz(func(t *testing.T, eb, tb []byte) {
		ep, err := proofs.ParseProof(eb)
		if err != nil {
			return
		}
		tp, err := proofs.ParseProof(tb)
		if err != nil {
			return
		}
		got, err := proofs.VerifyFinality(ep, tp, opts)
		if err != nil {
			if proofs.FailedCheck(err) == "" {
				t.Fatalf("error without a check: %v", err)
			}
			return
		}
		// Whatever verified must say what finality means.
		if got.TrimMinVersion <= got.ErasureKEKVersion || got.Trim.Leaf.Type != proofs.EventKEKTrim ||
			got.Erasure.Leaf.Type != proofs.EventKeyErase || got.Trim.Leaf.KEK != got.Erasure.Leaf.KEK {
			t.Fatalf("accepted a pair that does not show finality: %+v", got)
		}
	})
}
