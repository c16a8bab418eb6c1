package proofs_test

import (
	"testing"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/prooftest"
)

// BenchmarkVerify measures proofs verified per second on one core (run
// with -cpu 1), by the wall clock and per CPU second. "one-shot" is Verify: two Ed25519 verifications per proof
// (leaf and checkpoint). "shared-checkpoint" is a Verifier checking many
// proofs against one checkpoint, as an audit of a batch does: the
// checkpoint signature is verified once. "pinned" adds a consistency proof
// against a pinned checkpoint.
func BenchmarkVerify(b *testing.B) {
	l, _ := prooftest.SampleLog("bench", "lethe.example/audit", 1024)
	const size = 1024
	ps := make([]*proofs.Proof, 64)
	for i := range ps {
		ps[i] = l.Proof(uint64(i*16+3), size)
		ps[i].SetConsistency(700, l.Consistency(700, size))
	}
	opts := proofs.VerifyOptions{LogKey: l.VKey}
	run := func(b *testing.B, verify func(p *proofs.Proof) error) {
		b.ReportAllocs()
		cpu0, haveCPU := cpuTime()
		i := 0
		for b.Loop() {
			if err := verify(ps[i%len(ps)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proofs/s")
		// On a shared machine the wall clock counts time spent waiting
		// for a CPU; proofs per CPU second does not.
		if cpu1, ok := cpuTime(); ok && haveCPU && cpu1 > cpu0 {
			b.ReportMetric(float64(b.N)/(cpu1-cpu0).Seconds(), "proofs/cpu-s")
		}
	}
	b.Run("one-shot", func(b *testing.B) {
		run(b, func(p *proofs.Proof) error { _, err := proofs.Verify(p, opts); return err })
	})
	b.Run("shared-checkpoint", func(b *testing.B) {
		v, err := proofs.NewVerifier(opts)
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(p *proofs.Proof) error { _, err := v.Verify(p); return err })
	})
	b.Run("shared-checkpoint-pinned", func(b *testing.B) {
		o := opts
		o.Pinned = l.Checkpoint(700)
		v, err := proofs.NewVerifier(o)
		if err != nil {
			b.Fatal(err)
		}
		run(b, func(p *proofs.Proof) error { _, err := v.Verify(p); return err })
	})
}

// BenchmarkParseProof measures parsing the JSON form.
func BenchmarkParseProof(b *testing.B) {
	l, _ := prooftest.SampleLog("bench", "lethe.example/audit", 100)
	enc, _ := l.Proof(42, 100).Marshal()
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := proofs.ParseProof(enc); err != nil {
			b.Fatal(err)
		}
	}
}
