package proofs_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/prooftest"
)

// Every parser here has the property that what it accepts, its marshaller
// writes back byte for byte (for ParseProof: back to the canonical form,
// keeping the meaning). Crashers found by fuzzing live in testdata/fuzz/
// and run with every go test.

func FuzzParseLeaf(f *testing.F) {
	l, _ := prooftest.SampleLog("fuzz", "lethe.example/audit", 12)
	for _, b := range l.Leaves {
		f.Add(b)
	}
	r := prooftest.NewRand("fuzz kek")
	for i, rotate := range []bool{true, false} {
		b, err := prooftest.SampleKEKLeaf(r, i, rotate, 3).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		leaf, err := proofs.ParseLeaf(in)
		if err != nil {
			return
		}
		out, err := leaf.Marshal()
		if err != nil {
			t.Fatalf("accepted leaf does not marshal: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("ParseLeaf then Marshal:\n%q\nwant\n%q", out, in)
		}
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	l, _ := prooftest.SampleLog("fuzz", "lethe.example/audit", 3)
	f.Add(mustBody(l.Checkpoint(3)))
	f.Add([]byte("o\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := proofs.ParseCheckpoint(in)
		if err != nil {
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("accepted checkpoint does not marshal: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("ParseCheckpoint then Marshal:\n%q\nwant\n%q", out, in)
		}
	})
}

func mustBody(signed []byte) []byte {
	i := bytes.LastIndex(signed, []byte("\n\n"))
	return signed[:i+1]
}

func proofSeeds(f *testing.F) [][]byte {
	l, _ := prooftest.SampleLog("fuzz", "lethe.example/audit", 9)
	var seeds [][]byte
	for _, size := range []uint64{1, 2, 9} {
		p := l.Proof(size-1, size)
		if size == 9 {
			p.SetConsistency(4, l.Consistency(4, 9))
		}
		b, err := p.Marshal()
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

func FuzzParseProof(f *testing.F) {
	for _, b := range proofSeeds(f) {
		f.Add(b)
		var pretty bytes.Buffer
		json.Indent(&pretty, b, "", "  ")
		f.Add(pretty.Bytes())
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := proofs.ParseProof(in)
		if err != nil {
			return
		}
		out, err := p.Marshal()
		if err != nil {
			t.Fatalf("accepted proof does not marshal: %v", err)
		}
		// Marshal gives the canonical form, which is a fixed point...
		q, err := proofs.ParseProof(out)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, out)
		}
		if again, _ := q.Marshal(); !bytes.Equal(again, out) {
			t.Fatalf("canonical form is not a fixed point:\n%s\n%s", out, again)
		}
		// ...and has the input's meaning: the same JSON values, except
		// consistency fields that say "none".
		if want, got := jsonValue(t, in), jsonValue(t, out); !reflect.DeepEqual(got, want) {
			t.Fatalf("Marshal changed the meaning:\n%v\n%v", want, got)
		}
	})
}

// jsonValue decodes a proof document generically, dropping consistency
// fields that carry nothing (from 0, no hashes), which Marshal omits.
func jsonValue(t *testing.T, b []byte) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("accepted document is not JSON: %v", err)
	}
	if from, ok := m["consistency_from"]; !ok || from == json.Number("0") {
		if hs, _ := m["consistency"].([]any); len(hs) == 0 {
			delete(m, "consistency_from")
			delete(m, "consistency")
		}
	}
	if _, ok := m["consistency_from"]; !ok {
		m["consistency_from"] = json.Number("0")
	}
	if _, ok := m["consistency"]; !ok {
		m["consistency"] = []any{}
	}
	return m
}

func FuzzParseTlogProof(f *testing.F) {
	for _, b := range proofSeeds(f) {
		p, _ := proofs.ParseProof(b)
		text, err := p.MarshalTlogProof()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := proofs.ParseTlogProof(in)
		if err != nil {
			return
		}
		out, err := p.MarshalTlogProof()
		if err != nil {
			t.Fatalf("accepted proof does not marshal: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("ParseTlogProof then MarshalTlogProof:\n%q\nwant\n%q", out, in)
		}
	})
}

func FuzzParseConsistencyProof(f *testing.F) {
	l, _ := prooftest.SampleLog("fuzz", "lethe.example/audit", 9)
	b, _ := (&proofs.ConsistencyProof{From: 3, To: 9, Hashes: l.Consistency(3, 9)}).Marshal()
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := proofs.ParseConsistencyProof(in)
		if err != nil {
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("accepted proof does not marshal: %v", err)
		}
		d, err := proofs.ParseConsistencyProof(out)
		if err != nil || !reflect.DeepEqual(c, d) {
			t.Fatalf("round trip changed %+v into %+v (%v)", c, d, err)
		}
	})
}
