package proofs_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/prooftest"
)

func TestCheckpointRoundTrip(t *testing.T) {
	var h [32]byte
	for i := range h {
		h[i] = byte(i)
	}
	tests := []struct {
		name string
		cp   proofs.Checkpoint
		want string
	}{
		{"empty tree", proofs.Checkpoint{Origin: "example.com/log", Size: 0, Hash: h}, "example.com/log\n0\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"},
		{"max size", proofs.Checkpoint{Origin: "o", Size: 1<<64 - 1, Hash: h}, "o\n18446744073709551615\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"},
		{"unicode origin", proofs.Checkpoint{Origin: "lethe.example/ångström", Size: 42, Hash: h}, "lethe.example/ångström\n42\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cp.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("Marshal = %q, want %q", got, tt.want)
			}
			back, err := proofs.ParseCheckpoint(got)
			if err != nil {
				t.Fatal(err)
			}
			if back != tt.cp {
				t.Fatalf("ParseCheckpoint = %+v, want %+v", back, tt.cp)
			}
		})
	}
}

func TestParseCheckpointStrict(t *testing.T) {
	const hash = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"no final newline", "o\n1\n" + hash},
		{"extension line", "o\n1\n" + hash + "\next\n"},
		{"blank line", "o\n1\n" + hash + "\n\n"},
		{"empty origin", "\n1\n" + hash + "\n"},
		{"origin with space", "a b\n1\n" + hash + "\n"},
		{"origin with tab", "a\tb\n1\n" + hash + "\n"},
		{"origin like a signature", "— o\n1\n" + hash + "\n"},
		{"leading zero", "o\n01\n" + hash + "\n"},
		{"plus sign", "o\n+1\n" + hash + "\n"},
		{"negative", "o\n-1\n" + hash + "\n"},
		{"overflow", "o\n18446744073709551616\n" + hash + "\n"},
		{"short hash", "o\n1\nAAEC\n"},
		{"unpadded hash", "o\n1\n" + strings.TrimSuffix(hash, "=") + "\n"},
		{"url base64", "o\n1\n" + strings.ReplaceAll(base64.StdEncoding.EncodeToString(make([]byte, 32)), "A", "-") + "\n"},
		{"padding bits set", "o\n1\n" + hash[:42] + "9=\n"},
		{"CRLF", "o\r\n1\r\n" + hash + "\r\n"},
		{"invalid UTF-8", "o\xff\n1\n" + hash + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := proofs.ParseCheckpoint([]byte(tt.in)); err == nil {
				t.Fatalf("ParseCheckpoint(%q) = %+v, want an error", tt.in, c)
			}
		})
	}
}

func TestKeys(t *testing.T) {
	skey, vkey, err := proofs.GenerateKey("lethe.example/audit")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(skey, "PRIVATE+KEY+lethe.example/audit+") || !strings.HasPrefix(vkey, "lethe.example/audit+") {
		t.Fatalf("keys %q / %q are not note keys", skey[:20], vkey)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.SplitN(vkey, "+", 3)[2])
	if err != nil || len(raw) != 33 || raw[0] != 1 {
		t.Fatalf("verifier key does not hold 0x01 || Ed25519 key: %x", raw)
	}
	s, err := proofs.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	if s.VerifierKey() != vkey || s.Name() != "lethe.example/audit" {
		t.Fatalf("signer has key %q name %q, want %q", s.VerifierKey(), s.Name(), vkey)
	}
	// The leaf signature is a plain Ed25519 signature over the leaf bytes.
	msg := []byte(`{"v":1}`)
	if !ed25519.Verify(ed25519.PublicKey(raw[1:]), msg, s.SignLeaf(msg)) {
		t.Fatal("SignLeaf is not an Ed25519 signature by the verifier key")
	}
	// The checkpoint signature is a note signature that x/mod opens.
	cp := proofs.Checkpoint{Origin: "lethe.example/audit", Size: 3}
	signed, err := s.SignCheckpoint(cp)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := note.NewVerifier(vkey)
	if _, err := note.Open(signed, note.VerifierList(v)); err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	got, err := proofs.OpenCheckpoint(signed, vkey, "")
	if err != nil || got != cp {
		t.Fatalf("OpenCheckpoint = %+v, %v", got, err)
	}
	// Two keys from the same name differ.
	_, vkey2, _ := proofs.GenerateKey("lethe.example/audit")
	if vkey2 == vkey {
		t.Fatal("GenerateKey is not random")
	}
	for _, bad := range []string{"", "a b", "a+b", "a\nb"} {
		if _, _, err := proofs.GenerateKey(bad); err == nil {
			t.Errorf("GenerateKey(%q) succeeded", bad)
		}
	}
	for _, bad := range []string{"", vkey, "PRIVATE+KEY+x+00000000+AQ==", skey + "x"} {
		if _, err := proofs.NewSigner(bad); err == nil {
			t.Errorf("NewSigner(%.20q...) succeeded", bad)
		}
	}
}

func TestNewKeyFromSeedIsDeterministic(t *testing.T) {
	seed := make([]byte, 32)
	s1, v1, err := proofs.NewKeyFromSeed("o", seed)
	if err != nil {
		t.Fatal(err)
	}
	s2, v2, _ := proofs.NewKeyFromSeed("o", seed)
	if s1 != s2 || v1 != v2 {
		t.Fatal("NewKeyFromSeed is not deterministic")
	}
	if _, err := proofs.NewSigner(s1); err != nil {
		t.Fatalf("NewSigner(NewKeyFromSeed) = %v", err)
	}
	if _, _, err := proofs.NewKeyFromSeed("o", seed[:31]); err == nil {
		t.Fatal("NewKeyFromSeed accepted a 31-byte seed")
	}
}

func TestSignerHidesKeyMaterial(t *testing.T) {
	skey, _, _ := proofs.NewKeyFromSeed("lethe.example/audit", make([]byte, 32))
	s, _ := proofs.NewSigner(skey)
	secret := strings.SplitN(skey, "+", 5)[4]
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("signer", "s", s)
	for _, out := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q %x", s, s, s, s, s, s), fmt.Sprintf("%v", *s), logged.String(),
	} {
		if strings.Contains(out, secret) || strings.Contains(out, "PRIVATE") {
			t.Fatalf("key material printed: %s", out)
		}
		if !strings.Contains(out, "lethe.example/audit") && !strings.Contains(out, "{") {
			t.Fatalf("signer printed without its name: %s", out)
		}
	}
}

func TestOpenCheckpoint(t *testing.T) {
	l, _ := prooftest.SampleLog("open", "lethe.example/audit", 5)
	other, _ := prooftest.SampleLog("other", "lethe.example/audit", 5)
	good := l.Checkpoint(5)
	body, sigs, _ := strings.Cut(string(good), "\n\n")
	body += "\n"
	sigLine := strings.TrimSuffix(sigs, "\n")
	otherSig := strings.TrimSuffix(strings.SplitN(string(other.Checkpoint(0)), "\n\n", 2)[1], "\n")
	witness := prooftest.NewLog("witness", "witness.example")
	witnessSigned, _ := note.Sign(&note.Note{Text: body}, mustNoteSigner(t, witness.SKey))
	witnessSig := strings.TrimSuffix(strings.SplitN(string(witnessSigned), "\n\n", 2)[1], "\n")

	// Flip the last base64 character before '=' to one that differs only
	// in the unused padding bits: note decodes both to the same bytes.
	name, b64, _ := strings.Cut(strings.TrimPrefix(sigLine, "— "), " ")
	raw, _ := base64.StdEncoding.DecodeString(b64)
	paddingTwin := ""
	enc := base64.StdEncoding.EncodeToString(raw)
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		alt := enc[:len(enc)-2] + string(c) + "="
		if dec, err := base64.StdEncoding.DecodeString(alt); err == nil && string(dec) == string(raw) && alt != enc {
			paddingTwin = "— " + name + " " + alt
			break
		}
	}
	if paddingTwin == "" {
		t.Fatal("could not build a padding-bit twin of the signature")
	}

	tests := []struct {
		name   string
		text   string
		origin string
		want   proofs.Check
	}{
		{"good", string(good), "", ""},
		{"good with explicit origin", string(good), "lethe.example/audit", ""},
		{"witness cosignature ignored", body + "\n" + sigLine + "\n" + witnessSig + "\n", "", ""},
		{"wrong origin", string(good), "lethe.example/other", proofs.CheckCheckpointOrigin},
		{"other key", string(other.Checkpoint(5)), "", proofs.CheckCheckpointSignature},
		{"unsigned", body + "\n", "", proofs.CheckCheckpointSignature},
		{"only witness", body + "\n" + witnessSig + "\n", "", proofs.CheckCheckpointSignature},
		{"same name other key", body + "\n" + otherSig + "\n", "", proofs.CheckCheckpointSignature},
		{"repeated signature line", body + "\n" + sigLine + "\n" + sigLine + "\n", "", proofs.CheckCheckpointSignature},
		{"padding-bit twin", body + "\n" + paddingTwin + "\n", "", proofs.CheckCheckpointSignature},
		{"carriage return in signature", body + "\n" + sigLine[:20] + "\r" + sigLine[20:] + "\n", "", proofs.CheckCheckpointSignature},
		{"body changed", strings.Replace(string(good), "\n5\n", "\n6\n", 1), "", proofs.CheckCheckpointSignature},
		{"no final newline", strings.TrimSuffix(string(good), "\n"), "", proofs.CheckCheckpointSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := proofs.OpenCheckpoint([]byte(tt.text), l.VKey, tt.origin)
			if got := proofs.FailedCheck(err); got != tt.want {
				t.Fatalf("OpenCheckpoint = %+v, %v; check %q, want %q", c, err, got, tt.want)
			}
			if tt.want == "" && (c.Size != 5 || c.Hash != l.Root(5)) {
				t.Fatalf("OpenCheckpoint = %+v", c)
			}
		})
	}

	// A signed body that is not a strict checkpoint is a format error.
	ext, _ := note.Sign(&note.Note{Text: body + "extension\n"}, mustNoteSigner(t, l.SKey))
	_, err := proofs.OpenCheckpoint(ext, l.VKey, "")
	var fe *proofs.FormatError
	if !errors.As(err, &fe) || fe.Field != "checkpoint" {
		t.Fatalf("OpenCheckpoint(extension line) = %v, want a checkpoint FormatError", err)
	}
	if _, err := proofs.OpenCheckpoint(good, "not a key", ""); proofs.FailedCheck(err) != proofs.CheckOptions {
		t.Fatalf("OpenCheckpoint(bad key) = %v", err)
	}
}

func mustNoteSigner(tb testing.TB, skey string) note.Signer {
	tb.Helper()
	s, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
