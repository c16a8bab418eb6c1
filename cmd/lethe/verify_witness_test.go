package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// TestVerifyWitnessCosignatures verifies an erasure's tlog-proof, as the
// erasure returned it, with --witness and a real litewitness's key.
func TestVerifyWitnessCosignatures(t *testing.T) {
	const origin = "lethe.test/cli-witnessed"
	dir := t.TempDir()
	skey, logKey, err := proofs.GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "audit.key"), []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := testenv.StartLitewitness(t, "witness.test/cli", origin, logKey)
	ctx := context.Background()
	db, err := lethe.Open(ctx, lethe.Config{DataDir: dir, AuditOrigin: origin, ProofWait: 10 * time.Second,
		Witnesses: []lethe.WitnessConfig{{URL: w.URL, Key: w.Key}}, WitnessThreshold: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Add(ctx, lethe.Grain{Memory: "m", Type: "fact", Subject: "s", Relation: "r", Object: "o", UserID: "u1"}); err != nil {
		t.Fatal(err)
	}
	e, err := db.ForgetUser(ctx, "m", "u1")
	if err != nil || e.TlogProof == "" {
		t.Fatalf("ForgetUser: %v, tlog-proof %q", err, e.TlogProof)
	}
	proofFile := filepath.Join(t.TempDir(), "erasure.tlog-proof")
	if err := os.WriteFile(proofFile, []byte(e.TlogProof), 0o644); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "witness.vkey")
	if err := os.WriteFile(keyFile, []byte(w.Key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := runVerifyT(t, proofFile, "--log-key", logKey, "--witness", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"OK: the checkpoint is cosigned by witness witness.test/cli at ", "OK: 1 of 1 witnesses cosigned the checkpoint, 1 required\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// Another witness's key: the policy is not met.
	_, otherKey := otherWitnessKey(t)
	_, err = runVerifyT(t, proofFile, "--log-key", logKey, "--witness", w.Key, "--witness", otherKey, "--witness-threshold", "2")
	if err == nil || !strings.HasPrefix(err.Error(), "witness_cosignatures: 1 of 2 witnesses cosigned") {
		t.Errorf("threshold 2 of (litewitness, other): %v", err)
	}
	if _, err := runVerifyT(t, proofFile, "--log-key", logKey, "--witness", otherKey, "--witness-threshold", "1"); proofs.FailedCheck(err) != proofs.CheckWitness {
		t.Errorf("another witness's key: %v, want a witness_cosignatures failure", err)
	}
	if _, err := runVerifyT(t, proofFile, "--log-key", logKey, "--witness", w.Key, "--witness-threshold", "2"); err == nil || !strings.Contains(err.Error(), "threshold 2 is not in [0, 1]") {
		t.Errorf("threshold above the keys given: %v", err)
	}
	if _, err := runVerifyT(t, proofFile, "--log-key", logKey, "--witness", "not-a-key"); err == nil {
		t.Error("a malformed --witness verified")
	}
}

// otherWitnessKey returns the verifier key of a fresh cosignature/v1
// witness key that cosigned nothing (c2sp.org/tlog-cosignature: the key
// hash is SHA-256(name || "\n" || 0x04 || public key)[:4]).
func otherWitnessKey(t *testing.T) (name, vkey string) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	name = "witness.test/other"
	key := append([]byte{0x04}, pub...)
	h := sha256.Sum256(append([]byte(name+"\n"), key...))
	vkey = fmt.Sprintf("%s+%x+%s", name, h[:4], base64.StdEncoding.EncodeToString(key))
	if _, err := proofs.ParseWitnessKey(vkey); err != nil {
		t.Fatal(err)
	}
	return name, vkey
}
