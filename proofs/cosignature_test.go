package proofs

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// testWitness is a cosignature/v1 signer written from
// c2sp.org/tlog-cosignature for these tests; the end-to-end tests use a
// real litewitness instead.
type testWitness struct {
	name string
	priv ed25519.PrivateKey
	vkey string
}

func newTestWitness(t *testing.T, name string, seed byte) *testWitness {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(append(make([]byte, 31), seed))
	key := append([]byte{0x04}, priv.Public().(ed25519.PublicKey)...)
	h := sha256.Sum256(append([]byte(name+"\n"), key...))
	return &testWitness{name: name, priv: priv, vkey: fmt.Sprintf("%s+%x+%s", name, h[:4], base64.StdEncoding.EncodeToString(key))}
}

func (w *testWitness) cosign(body []byte, ts uint64) string {
	msg := fmt.Appendf(nil, "cosignature/v1\ntime %d\n%s", ts, body)
	k := append([]byte{0x04}, w.priv.Public().(ed25519.PublicKey)...)
	h := sha256.Sum256(append([]byte(w.name+"\n"), k...))
	sig := append(h[:4:4], binary.BigEndian.AppendUint64(nil, ts)...)
	sig = append(sig, ed25519.Sign(w.priv, msg)...)
	return "— " + w.name + " " + base64.StdEncoding.EncodeToString(sig)
}

func TestWitnessPolicy(t *testing.T) {
	skey, vkey, err := NewKeyFromSeed("log.test", make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	note, err := s.SignCheckpoint(Checkpoint{Origin: "log.test", Size: 5, Hash: sha256.Sum256([]byte("x"))})
	if err != nil {
		t.Fatal(err)
	}
	body := note[:strings.Index(string(note), "\n\n")+1]
	w1, w2, w3 := newTestWitness(t, "w1.test", 1), newTestWitness(t, "w2.test", 2), newTestWitness(t, "w3.test", 3)
	ts := uint64(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC).Unix())
	cosigned := string(note) + w1.cosign(body, ts) + "\n" + w2.cosign(body, ts+1) + "\n"
	// A cosignature over another body, by w3.
	cosigned += w3.cosign([]byte("log.test\n6\nAAAA\n"), ts) + "\n"
	if _, err := OpenCheckpoint([]byte(cosigned), vkey, ""); err != nil {
		t.Fatalf("the log's signature no longer opens with cosignatures beside it: %v", err)
	}

	tests := []struct {
		name      string
		keys      []string
		threshold int
		want      int
		wantErr   Check
	}{
		{"both", []string{w1.vkey, w2.vkey}, 2, 2, ""},
		{"one of two", []string{w1.vkey, w3.vkey}, 1, 1, ""},
		{"wrong body", []string{w3.vkey}, 1, 0, CheckWitness},
		{"two of three", []string{w1.vkey, w2.vkey, w3.vkey}, 3, 2, CheckWitness},
		{"none required", []string{w3.vkey}, 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseWitnessPolicy(tt.keys, tt.threshold)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := p.Check([]byte(cosigned))
			if FailedCheck(err) != tt.wantErr || len(cs) != tt.want {
				t.Fatalf("Check = %d cosignatures, %v; want %d, %q", len(cs), err, tt.want, tt.wantErr)
			}
			var we *WitnessError
			if tt.wantErr != "" && (!errors.As(err, &we) || we.Got != tt.want || we.Threshold != tt.threshold) {
				t.Fatalf("error %#v does not carry the counts", err)
			}
		})
	}
	cs, _ := Cosignatures([]byte(cosigned), []*WitnessKey{mustWitnessKey(t, w2.vkey)})
	if len(cs) != 1 || !cs[0].Time.Equal(time.Unix(int64(ts+1), 0)) {
		t.Errorf("w2's cosignature time = %+v", cs)
	}
}

func mustWitnessKey(t *testing.T, vkey string) *WitnessKey {
	t.Helper()
	k, err := ParseWitnessKey(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseWitnessKey(t *testing.T) {
	w := newTestWitness(t, "w.test", 1)
	parts := strings.SplitN(w.vkey, "+", 3)
	logKey := "log.test+" + parts[1] + "+" + base64.StdEncoding.EncodeToString(append([]byte{0x01}, make([]byte, 32)...))
	for _, bad := range []string{
		"", "w.test", "w.test+" + parts[1], parts[0] + "+00000000+" + parts[2], "other.test+" + parts[1] + "+" + parts[2],
		logKey, parts[0] + "+" + parts[1] + "+" + parts[2][:10], parts[0] + "+zzzzzzzz+" + parts[2],
	} {
		if _, err := ParseWitnessKey(bad); err == nil {
			t.Errorf("ParseWitnessKey(%q) succeeded", bad)
		}
	}
	if _, err := ParseWitnessPolicy([]string{w.vkey, w.vkey}, 1); err == nil {
		t.Error("a key given twice counted twice")
	}
	if _, err := ParseWitnessPolicy([]string{w.vkey}, 2); err == nil {
		t.Error("threshold above the number of keys accepted")
	}
}
