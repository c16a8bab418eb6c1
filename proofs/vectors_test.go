package proofs_test

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/proofs"
)

// TestVectors verifies every proof in testdata/vectors (written by
// proofgen) and checks the result the manifest states: success, or failure
// of the named check.
func TestVectors(t *testing.T) {
	dir := filepath.Join("testdata", "vectors")
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var m struct {
		LogKey  string `json:"log_key"`
		Vectors []struct {
			Name, Proof, Pinned, Origin, Subject, Nonce string
			Want                                        proofs.Check
		} `json:"vectors"`
	}
	if err := json.Unmarshal(read("vectors.json"), &m); err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(read(m.LogKey)))
	valid, checks := 0, map[proofs.Check]bool{}
	for _, v := range m.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			opts := proofs.VerifyOptions{LogKey: key, Origin: v.Origin, Subject: v.Subject}
			if v.Pinned != "" {
				opts.Pinned = read(v.Pinned)
			}
			if v.Nonce != "" {
				n, err := hex.DecodeString(v.Nonce)
				if err != nil {
					t.Fatal(err)
				}
				opts.Nonce = n
			}
			p, err := proofs.ParseAnyProof(read(v.Proof))
			if err == nil {
				_, err = proofs.Verify(p, opts)
			}
			if got := proofs.FailedCheck(err); got != v.Want {
				t.Fatalf("check %q (%v), want %q", got, err, v.Want)
			}
			if v.Want == "" {
				valid++
			} else {
				checks[v.Want] = true
			}
		})
	}
	// Every check that a proof can fail has a vector.
	for _, c := range []proofs.Check{proofs.CheckFormat, proofs.CheckLeafFormat, proofs.CheckSummary, proofs.CheckLeafSignature,
		proofs.CheckCheckpointSignature, proofs.CheckCheckpointOrigin, proofs.CheckTreeSize, proofs.CheckInclusion,
		proofs.CheckPinned, proofs.CheckConsistency, proofs.CheckSubject} {
		if !checks[c] {
			t.Errorf("no vector fails %q", c)
		}
	}
	if valid < 5 {
		t.Errorf("only %d valid vectors", valid)
	}
}
