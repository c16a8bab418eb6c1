package proofs_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/prooftest"
)

var (
	hexA = strings.Repeat("a", 64)
	hexB = strings.Repeat("b", 64)
	hexC = strings.Repeat("c", 64)
	id   = "0123456789abcdef0123456789abcdef"
	t0   = time.Date(2026, 11, 21, 10, 15, 30, 0, time.UTC)
)

func u64(n uint64) *uint64 { return &n }

func baseLeaf() *proofs.Leaf {
	return &proofs.Leaf{V: 1, ID: id, Type: proofs.EventGrainForget, Memory: "customer-support", Time: t0, Actor: "local"}
}

func TestLeafMarshal(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(l *proofs.Leaf)
		want    string
		wantErr string
	}{
		{
			name: "minimal",
			edit: func(l *proofs.Leaf) {},
			want: `{"v":1,"id":"` + id + `","type":"grain.forget","memory":"customer-support","time":"2026-11-21T10:15:30Z","actor":"local"}`,
		},
		{
			name: "every field",
			edit: func(l *proofs.Leaf) {
				l.Type = proofs.EventKeyErase
				l.Actor = "tok_01"
				l.Count = u64(7)
				l.Digest = hexA
				l.KeyFingerprints = []string{hexB, hexC}
				l.Commitment = hexC
				l.Policy = "decay-default"
				l.Hold = "hold_1"
				l.Reason = "held"
			},
			want: `{"v":1,"id":"` + id + `","type":"key.erase","memory":"customer-support","time":"2026-11-21T10:15:30Z","actor":"tok_01",` +
				`"count":7,"digest":"` + hexA + `","key_fingerprints":["` + hexB + `","` + hexC + `"],"commitment":"` + hexC +
				`","policy":"decay-default","hold":"hold_1","reason":"held"}`,
		},
		{
			name: "hashes and matching count",
			edit: func(l *proofs.Leaf) { l.Hashes = []string{hexB, hexA}; l.Count = u64(2) },
			want: `{"v":1,"id":"` + id + `","type":"grain.forget","memory":"customer-support","time":"2026-11-21T10:15:30Z","actor":"local",` +
				`"hashes":["` + hexB + `","` + hexA + `"],"count":2}`,
		},
		{
			name: "zero count is kept",
			edit: func(l *proofs.Leaf) {
				l.Type = proofs.EventPolicyRun
				l.Count = u64(0)
				l.Digest = proofs.HashesDigest(nil)
			},
			want: `{"v":1,"id":"` + id + `","type":"policy.run","memory":"customer-support","time":"2026-11-21T10:15:30Z","actor":"local",` +
				`"count":0,"digest":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`,
		},
		{name: "version 2", edit: func(l *proofs.Leaf) { l.V = 2 }, wantErr: "version"},
		{name: "short id", edit: func(l *proofs.Leaf) { l.ID = id[:31] }, wantErr: "id"},
		{name: "uppercase id", edit: func(l *proofs.Leaf) { l.ID = strings.ToUpper(id) }, wantErr: "id"},
		{name: "unknown type", edit: func(l *proofs.Leaf) { l.Type = "grain.delete" }, wantErr: "event type"},
		{name: "empty memory", edit: func(l *proofs.Leaf) { l.Memory = "" }, wantErr: "memory"},
		{name: "memory with space", edit: func(l *proofs.Leaf) { l.Memory = "a b" }, wantErr: "memory"},
		{name: "local time", edit: func(l *proofs.Leaf) { l.Time = t0.In(time.FixedZone("X", 3600)) }, wantErr: "UTC"},
		{name: "sub-second time", edit: func(l *proofs.Leaf) { l.Time = t0.Add(time.Millisecond) }, wantErr: "whole seconds"},
		{name: "zero time", edit: func(l *proofs.Leaf) { l.Time = time.Time{} }, wantErr: "year"},
		{name: "empty actor", edit: func(l *proofs.Leaf) { l.Actor = "" }, wantErr: "actor"},
		{name: "free-text actor", edit: func(l *proofs.Leaf) { l.Actor = "Jane Doe" }, wantErr: "actor"},
		{name: "bad hash", edit: func(l *proofs.Leaf) { l.Hashes = []string{hexA[:63] + "G"} }, wantErr: "hash 0"},
		{name: "count differs from hashes", edit: func(l *proofs.Leaf) { l.Hashes = []string{hexA}; l.Count = u64(2) }, wantErr: "count 2 but 1 hashes"},
		{name: "digest without count", edit: func(l *proofs.Leaf) { l.Digest = hexA }, wantErr: "requires count"},
		{name: "digest with hashes", edit: func(l *proofs.Leaf) { l.Digest = hexA; l.Count = u64(1); l.Hashes = []string{hexA} }, wantErr: "one or the other"},
		{name: "bad digest", edit: func(l *proofs.Leaf) { l.Digest = "ab"; l.Count = u64(1) }, wantErr: "digest"},
		{name: "bad fingerprint", edit: func(l *proofs.Leaf) { l.KeyFingerprints = []string{""} }, wantErr: "fingerprint"},
		{name: "bad commitment", edit: func(l *proofs.Leaf) { l.Commitment = hexA + "00" }, wantErr: "commitment"},
		{name: "free-text reason", edit: func(l *proofs.Leaf) { l.Reason = "the user asked" }, wantErr: "reason"},
		{name: "quote in hold", edit: func(l *proofs.Leaf) { l.Hold = `a"b` }, wantErr: "hold"},
		{name: "bad policy", edit: func(l *proofs.Leaf) { l.Policy = "Decay Default" }, wantErr: "policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := baseLeaf()
			tt.edit(l)
			got, err := l.Marshal()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Marshal error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("Marshal =\n%s\nwant\n%s", got, tt.want)
			}
			back, err := proofs.ParseLeaf(got)
			if err != nil {
				t.Fatalf("ParseLeaf(Marshal) = %v", err)
			}
			again, err := back.Marshal()
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("round trip = %s, %v", again, err)
			}
		})
	}
}

func TestParseLeafStrict(t *testing.T) {
	good := `{"v":1,"id":"` + id + `","type":"grain.forget","memory":"m","time":"2026-11-21T10:15:30Z","actor":"local"}`
	if _, err := proofs.ParseLeaf([]byte(good)); err != nil {
		t.Fatalf("ParseLeaf(good) = %v", err)
	}
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ``},
		{"null", `null`},
		{"array", `[]`},
		{"trailing newline", good + "\n"},
		{"leading space", " " + good},
		{"space after colon", strings.Replace(good, `"v":1`, `"v": 1`, 1)},
		{"other order", strings.Replace(good, `"v":1,"id":"`+id+`"`, `"id":"`+id+`","v":1`, 1)},
		{"unknown field", strings.Replace(good, `}`, `,"user_id":"u"}`, 1)},
		{"duplicate field", strings.Replace(good, `}`, `,"actor":"local"}`, 1)},
		{"missing field", strings.Replace(good, `,"actor":"local"`, ``, 1)},
		{"uppercase key", strings.Replace(good, `"v":1`, `"V":1`, 1)},
		{"escaped char", strings.Replace(good, `"memory":"m"`, `"memory":"\u006d"`, 1)},
		{"version as string", strings.Replace(good, `"v":1`, `"v":"1"`, 1)},
		{"version 1.0", strings.Replace(good, `"v":1`, `"v":1.0`, 1)},
		{"version 01", strings.Replace(good, `"v":1`, `"v":01`, 1)},
		{"time with offset", strings.Replace(good, `10:15:30Z`, `10:15:30+00:00`, 1)},
		{"time with fraction", strings.Replace(good, `10:15:30Z`, `10:15:30.000Z`, 1)},
		{"lowercase z", strings.Replace(good, `10:15:30Z`, `10:15:30z`, 1)},
		{"empty hashes", strings.Replace(good, `}`, `,"hashes":[]}`, 1)},
		{"null hashes", strings.Replace(good, `}`, `,"hashes":null}`, 1)},
		{"empty policy", strings.Replace(good, `}`, `,"policy":""}`, 1)},
		{"negative count", strings.Replace(good, `}`, `,"count":-1}`, 1)},
		{"count overflow", strings.Replace(good, `}`, `,"count":18446744073709551616}`, 1)},
		{"non-ASCII memory", strings.Replace(good, `"memory":"m"`, `"memory":"mé"`, 1)},
		{"trailing data", good + "{}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if l, err := proofs.ParseLeaf([]byte(tt.in)); err == nil {
				t.Fatalf("ParseLeaf(%q) = %+v, want an error", tt.in, l)
			}
		})
	}
}

func TestSampleLeavesRoundTrip(t *testing.T) {
	r := prooftest.NewRand("leaves")
	for i := 0; i < 3*len(proofs.EventTypes); i++ {
		l := prooftest.SampleLeaf(r, i)
		b, err := l.Marshal()
		if err != nil {
			t.Fatalf("leaf %d: %v", i, err)
		}
		back, err := proofs.ParseLeaf(b)
		if err != nil {
			t.Fatalf("leaf %d: ParseLeaf: %v\n%s", i, err, b)
		}
		if again, _ := back.Marshal(); !bytes.Equal(again, b) {
			t.Fatalf("leaf %d: round trip changed it", i)
		}
	}
}

func TestHashesDigest(t *testing.T) {
	tests := []struct {
		name   string
		hashes []string
		want   string
	}{
		{"empty", nil, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		// sha256(hexA + "\n" + hexB + "\n"), computed independently.
		{"sorted", []string{hexA, hexB}, "913f9338fb6c17253f3a14816fc08d52522454bfc19a8c99538a197cfb23fb41"},
		{"unsorted", []string{hexB, hexA}, "913f9338fb6c17253f3a14816fc08d52522454bfc19a8c99538a197cfb23fb41"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]string(nil), tt.hashes...)
			if got := proofs.HashesDigest(tt.hashes); got != tt.want {
				t.Errorf("HashesDigest = %s, want %s", got, tt.want)
			}
			for i := range in {
				if in[i] != tt.hashes[i] {
					t.Fatal("HashesDigest reordered its input")
				}
			}
		})
	}
}

func TestCommitment(t *testing.T) {
	nonce := make([]byte, 32)
	for i := range nonce {
		nonce[i] = byte(i)
	}
	// sha256("lethe/subject/v1" || 00 01 .. 1f || "acme/prod/bot1"), computed independently.
	const want = "f9ceb14f86d7014ba455341fb52ff954db678be33a72ea92b7729b22cbcdcf97"
	if got := proofs.Commitment(nonce, "acme/prod/bot1"); got != want {
		t.Fatalf("Commitment = %s, want %s", got, want)
	}
	if proofs.Commitment(nonce, "acme/prod/bot2") == want {
		t.Fatal("commitment ignores the subject")
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Commitment with a 31-byte nonce did not panic")
		}
	}()
	proofs.Commitment(nonce[:31], "x")
}

func TestRandomHelpers(t *testing.T) {
	a, b := proofs.NewNonce(), proofs.NewNonce()
	if len(a) != proofs.NonceSize || bytes.Equal(a, b) {
		t.Fatalf("NewNonce gave %x and %x", a, b)
	}
	x, y := proofs.NewEventID(), proofs.NewEventID()
	l := baseLeaf()
	l.ID = x
	if _, err := l.Marshal(); err != nil || x == y {
		t.Fatalf("NewEventID gave %q, %q: %v", x, y, err)
	}
}
