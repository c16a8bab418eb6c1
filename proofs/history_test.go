package proofs

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// historyFixture is a signer, its checkpoint over an empty tree, and a
// sealed export built from a function of the export.
type historyFixture struct {
	t    testing.TB
	s    *Signer
	vkey string
	cp   string
}

func newHistoryFixture(t testing.TB) *historyFixture {
	t.Helper()
	skey, vkey, err := GenerateKey("history.test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := s.SignCheckpoint(Checkpoint{Origin: "history.test", Size: 0})
	if err != nil {
		t.Fatal(err)
	}
	return &historyFixture{t: t, s: s, vkey: vkey, cp: string(cp)}
}

func (f *historyFixture) seal(edit func(x *HistoryExport)) []byte {
	f.t.Helper()
	x := &HistoryExport{Format: HistoryExportFormat, Memory: "m", ExportedAt: time.Unix(2000, 0).UTC(), Selector: "hash",
		Checkpoint: f.cp, Chains: []HistoryChain{{Versions: []HistoryVersion{
			{Hash: strings.Repeat("a", 64), State: VersionCurrent, Fields: json.RawMessage(`{"hash":"` + strings.Repeat("a", 64) + `"}`)},
		}}}}
	if edit != nil {
		edit(x)
	}
	b, err := SealHistoryExport(x, f.s)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// TestVerifyHistoryExportChecks signs exports that break one rule of a
// chain each (so the signature is valid) and checks the error names it.
func TestVerifyHistoryExportChecks(t *testing.T) {
	f := newHistoryFixture(t)
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	tests := []struct {
		name string
		edit func(x *HistoryExport)
		want Check
	}{
		{"valid", nil, ""},
		{"no versions", func(x *HistoryExport) { x.Chains[0].Versions = nil }, CheckChain},
		{"bad hash", func(x *HistoryExport) { x.Chains[0].Versions[0].Hash = "A" + a[1:] }, CheckChain},
		{"duplicate hash", func(x *HistoryExport) { x.Chains = append(x.Chains, x.Chains[0]) }, CheckChain},
		{"first supersedes", func(x *HistoryExport) { x.Chains[0].Versions[0].Supersedes = b }, CheckChain},
		{"dangling superseded_by", func(x *HistoryExport) { x.Chains[0].Versions[0].SupersededBy = b }, CheckChain},
		{"second version without its event", func(x *HistoryExport) {
			x.Chains[0].Versions[0].SupersededBy = b
			x.Chains[0].Versions[0].State = VersionSuperseded
			x.Chains[0].Versions = append(x.Chains[0].Versions, HistoryVersion{Hash: b, State: VersionErased, Supersedes: a})
		}, CheckChain},
		{"fields disagree", func(x *HistoryExport) { x.Chains[0].Versions[0].Fields = json.RawMessage(`{"hash":"` + b + `"}`) }, CheckChain},
		{"forgotten without event", func(x *HistoryExport) {
			x.Chains[0].Versions[0].State, x.Chains[0].Versions[0].Fields = VersionForgotten, nil
		}, CheckChain},
		{"erased with fields", func(x *HistoryExport) { x.Chains[0].Versions[0].State = VersionErased }, CheckChain},
		{"withheld with fields", func(x *HistoryExport) { x.FieldsWithheld = true }, CheckChain},
		{"withheld", func(x *HistoryExport) { x.FieldsWithheld, x.Chains[0].Versions[0].Fields = true, nil }, ""},
		{"unknown state", func(x *HistoryExport) { x.Chains[0].Versions[0].State = "gone" }, CheckChain},
		{"current but superseded", func(x *HistoryExport) { x.Chains[0].Versions[0].SupersededAt = &x.ExportedAt }, CheckChain},
		{"event without proof", func(x *HistoryExport) { x.Chains[0].Events = []HistoryEvent{{Type: EventGrainForget}} }, CheckFormat},
		{"another checkpoint", func(x *HistoryExport) { x.Checkpoint = "nope\n" }, CheckCheckpointSignature},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyHistoryExport(f.seal(tc.edit), VerifyOptions{LogKey: f.vkey})
			if got := FailedCheck(err); got != tc.want || (tc.want == "") != (err == nil) {
				t.Errorf("check %q (%v), want %q", got, err, tc.want)
			}
		})
	}
	// A signature by the right key over other bytes.
	file := f.seal(nil)
	changed := bytes.Replace(file, []byte(`"selector": "hash"`), []byte(`"selector": "subject"`), 1)
	_, err := VerifyHistoryExport(changed, VerifyOptions{LogKey: f.vkey})
	var se *ExportSignatureError
	if !errors.As(err, &se) || FailedCheck(err) != CheckExportSignature {
		t.Errorf("a changed export: %v", err)
	}
	if _, err := VerifyHistoryExport(file, VerifyOptions{LogKey: "not a key"}); FailedCheck(err) != CheckOptions {
		t.Errorf("a bad log key: %v", err)
	}
}

// FuzzVerifyHistoryExport checks that no input panics the verifier and that
// an accepted file verifies again to the same export (verification is a
// pure function of the bytes).
func FuzzVerifyHistoryExport(f *testing.F) {
	fx := newHistoryFixture(f)
	f.Add(fx.seal(nil))
	f.Add(fx.seal(func(x *HistoryExport) { x.FieldsWithheld, x.Chains[0].Versions[0].Fields = true, nil }))
	f.Add([]byte(`{"format":"lethe.history-export/v1","export":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := VerifyHistoryExport(b, VerifyOptions{LogKey: fx.vkey})
		if err != nil {
			if FailedCheck(err) == "" {
				t.Fatalf("an error that names no check: %v", err)
			}
			return
		}
		again, err := VerifyHistoryExport(b, VerifyOptions{LogKey: fx.vkey})
		if err != nil || again.Versions != v.Versions || again.Events != v.Events {
			t.Fatalf("verified once, then %v", err)
		}
	})
}
