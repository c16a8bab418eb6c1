package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/proofs"
)

// The proof vectors written by proofs/proofgen.
var verifyVectorDir = filepath.Join("..", "..", "proofs", "testdata", "vectors")

func verifyVector(name string) string { return filepath.Join(verifyVectorDir, name) }

type verifyManifest struct {
	Vectors []struct {
		Name, Description, Proof, Pinned, Origin, Subject, Nonce string
		Want                                                     proofs.Check
	} `json:"vectors"`
}

func readVerifyManifest(t *testing.T) verifyManifest {
	t.Helper()
	b, err := os.ReadFile(verifyVector("vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m verifyManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func verifyLogKey(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(verifyVector("log.vkey"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func runVerifyT(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := runVerify(context.Background(), args, &stdout, &stderr)
	if stderr.Len() > 0 {
		t.Errorf("runVerify wrote to stderr: %s", stderr.String())
	}
	return stdout.String(), err
}

// eventID reads the event id of a vector proof.
func verifyEventID(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(verifyVector(file))
	if err != nil {
		t.Fatal(err)
	}
	p, err := proofs.ParseAnyProof(b)
	if err != nil {
		t.Fatal(err)
	}
	return p.EventID
}

func TestVerifyCommand(t *testing.T) {
	key := verifyLogKey(t)
	forget := verifyEventID(t, "valid-grain-forget.json")
	erase := verifyEventID(t, "valid-key-erase.json")
	m := readVerifyManifest(t)
	var nonce string
	for _, v := range m.Vectors {
		if v.Name == "valid-key-erase" {
			nonce = v.Nonce
		}
	}
	subjectFile := filepath.Join(t.TempDir(), "subject")
	if err := os.WriteFile(subjectFile, []byte("acme/prod/bot1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	okForget := "OK: event " + forget + " (grain.forget) included at index 10 of tree size 24, checkpoint signed by lethe.example/audit\n"
	okErase := "OK: event " + erase + " (key.erase) included at index 15 of tree size 24, checkpoint signed by lethe.example/audit\n"
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"key string, flags after", []string{verifyVector("valid-grain-forget.json"), "--log-key", key}, okForget},
		{"key file, flags before", []string{"--log-key", verifyVector("log.vkey"), verifyVector("valid-grain-forget.json")}, okForget},
		{"key= form", []string{"--log-key=" + key, verifyVector("valid-grain-forget.json")}, okForget},
		{"tlog-proof text", []string{verifyVector("valid-grain-forget.tlog-proof"), "--log-key", key}, okForget},
		{"origin given", []string{verifyVector("valid-grain-forget.json"), "--log-key", key, "--origin", "lethe.example/audit"}, okForget},
		{"subject", []string{verifyVector("valid-key-erase.json"), "--log-key", key, "--subject", "acme/prod/bot1", "--nonce", nonce},
			okErase + "OK: the subject and nonce match the event's subject commitment\n"},
		{"subject file", []string{verifyVector("valid-key-erase.json"), "--log-key", key, "--subject-file", subjectFile, "--nonce", nonce},
			okErase + "OK: the subject and nonce match the event's subject commitment\n"},
		{"pinned", []string{verifyVector("valid-key-erase-pinned.json"), "--log-key", key, "--checkpoint", verifyVector("checkpoint-9.txt")},
			okErase + "OK: the checkpoint extends the pinned checkpoint of tree size 9\n"},
		{"pinned text", []string{"--checkpoint", verifyVector("checkpoint-9.txt"), verifyVector("valid-key-erase-pinned.tlog-proof"), "--log-key", key},
			okErase + "OK: the checkpoint extends the pinned checkpoint of tree size 9\n"},
		{"pinned and subject (the example in docs/compliance/verifying-proofs.md)", []string{verifyVector("valid-key-erase-pinned.json"),
			"--log-key", key, "--checkpoint", verifyVector("checkpoint-9.txt"), "--subject", "acme/prod/bot1", "--nonce", nonce},
			okErase + "OK: the checkpoint extends the pinned checkpoint of tree size 9\n" +
				"OK: the subject and nonce match the event's subject commitment\n"},
		{"after --", []string{"--log-key", key, "--", verifyVector("valid-grain-forget.json")}, okForget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runVerifyT(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("output:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestVerifyCommandVectors runs every vector through the command: valid
// ones print OK, invalid ones fail with an error that starts with the
// check's name.
func TestVerifyCommandVectors(t *testing.T) {
	m := readVerifyManifest(t)
	for _, v := range m.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			args := []string{verifyVector(v.Proof), "--log-key", verifyVector("log.vkey")}
			if v.Pinned != "" {
				args = append(args, "--checkpoint", verifyVector(v.Pinned))
			}
			if v.Origin != "" {
				args = append(args, "--origin", v.Origin)
			}
			if v.Subject != "" {
				args = append(args, "--subject", v.Subject, "--nonce", v.Nonce)
			}
			out, err := runVerifyT(t, args...)
			if v.Want == "" {
				if err != nil || !strings.HasPrefix(out, "OK: event ") {
					t.Fatalf("got %q, %v", out, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("verified: %s", out)
			}
			if !strings.HasPrefix(err.Error(), string(v.Want)+": ") {
				t.Fatalf("error %q does not start with %q", err, v.Want)
			}
			if out != "" {
				t.Fatalf("printed %q on failure", out)
			}
		})
	}
}

func TestVerifyCommandJSON(t *testing.T) {
	out, err := runVerifyT(t, verifyVector("valid-first-leaf.json"), "--log-key", verifyVector("log.vkey"), "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		OK       bool
		Verified map[string]any
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if !r.OK || r.Verified["event_id"] != verifyEventID(t, "valid-first-leaf.json") || r.Verified["leaf_index"] != 0.0 ||
		r.Verified["tree_size"] != 1.0 || r.Verified["key_name"] != "lethe.example/audit" || r.Verified["type"] != "grain.forget" {
		t.Fatalf("JSON output: %s", out)
	}

	out, err = runVerifyT(t, verifyVector("inclusion-hash.json"), "--log-key", verifyVector("log.vkey"), "--json")
	if err == nil {
		t.Fatal("an invalid proof verified")
	}
	var f struct {
		OK       bool
		Check    string
		Error    string
		Verified any
	}
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if f.OK || f.Check != "inclusion" || f.Error != err.Error() || f.Verified != nil {
		t.Fatalf("JSON failure output: %s", out)
	}
}

func TestVerifyCommandConsistencyFile(t *testing.T) {
	// Take the consistency proof out of the pinned vector and give it
	// separately, with the proof that lacks one.
	b, _ := os.ReadFile(verifyVector("valid-key-erase-pinned.json"))
	withC, err := proofs.ParseProof(b)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, c *proofs.ConsistencyProof) string {
		b, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.json", &proofs.ConsistencyProof{From: 9, To: 24, Hashes: withC.Consistency})
	wrongEnd := write("end.json", &proofs.ConsistencyProof{From: 9, To: 23, Hashes: withC.Consistency})
	bad := write("bad.json", &proofs.ConsistencyProof{From: 9, To: 24, Hashes: withC.Consistency[1:]})

	base := []string{verifyVector("valid-key-erase.json"), "--log-key", verifyVector("log.vkey"), "--checkpoint", verifyVector("checkpoint-9.txt")}
	if out, err := runVerifyT(t, append(base, "--consistency", good)...); err != nil || !strings.Contains(out, "pinned checkpoint of tree size 9") {
		t.Fatalf("with a consistency file: %q, %v", out, err)
	}
	for _, f := range []string{wrongEnd, bad} {
		if _, err := runVerifyT(t, append(base, "--consistency", f)...); err == nil || !strings.HasPrefix(err.Error(), "consistency: ") {
			t.Fatalf("with %s: %v", filepath.Base(f), err)
		}
	}
	// Without the file, the pinned checkpoint cannot be connected.
	if _, err := runVerifyT(t, base...); err == nil || !strings.Contains(err.Error(), "no consistency proof") {
		t.Fatalf("without a consistency file: %v", err)
	}
}

func TestVerifyCommandUsage(t *testing.T) {
	key := verifyLogKey(t)
	proof := verifyVector("valid-key-erase.json")
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no arguments", nil, "exactly one PROOF"},
		{"two proofs", []string{proof, proof, "--log-key", key}, "exactly one PROOF"},
		{"no key", []string{proof}, "--log-key is required"},
		{"unknown flag", []string{proof, "--log-key", key, "--fast"}, "flag provided but not defined"},
		{"key neither key nor file", []string{proof, "--log-key", "no-such-file"}, "neither a verifier key"},
		{"key file without a key", []string{proof, "--log-key", proof}, "does not hold a verifier key"},
		{"no proof file", []string{verifyVector("nope.json"), "--log-key", key}, "no such file"},
		{"subject without nonce", []string{proof, "--log-key", key, "--subject", "acme"}, "both --subject"},
		{"nonce without subject", []string{proof, "--log-key", key, "--nonce", strings.Repeat("00", 32)}, "both --subject"},
		{"short nonce", []string{proof, "--log-key", key, "--subject", "a", "--nonce", "00"}, "--nonce must be 32 bytes"},
		{"nonce not hex", []string{proof, "--log-key", key, "--subject", "a", "--nonce", strings.Repeat("zz", 32)}, "--nonce must be"},
		{"subject twice", []string{proof, "--log-key", key, "--subject", "a", "--subject-file", proof}, "not both"},
		{"consistency without pinned", []string{proof, "--log-key", key, "--consistency", proof}, "needs --checkpoint"},
		{"not a proof", []string{verifyVector("log.vkey"), "--log-key", key}, "format: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runVerifyT(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("runVerify = %v, want an error containing %q", err, tt.wantErr)
			}
			if out != "" {
				t.Fatalf("printed %q", out)
			}
		})
	}
	for _, help := range []string{"-h", "--help"} {
		out, err := runVerifyT(t, help)
		if err != nil || out != verifyUsage {
			t.Fatalf("%s: %v, printed %q", help, err, out)
		}
	}
}

func TestVerifyCommandCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := runVerify(ctx, []string{verifyVector("valid-grain-forget.json"), "--log-key", verifyVector("log.vkey")}, &out, &out)
	if err == nil {
		t.Fatal("runVerify ran with a canceled context")
	}
}
