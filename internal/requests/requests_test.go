package requests

import (
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/proofs"
)

// TestCertificateHTMLEscapes renders a certificate whose every string
// field holds markup: none of it reaches the page unescaped.
func TestCertificateHTMLEscapes(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	const evil = `<script>alert("x")</script>`
	r := &Request{ID: evil, Memory: evil, Kind: Scope, Scope: evil, Commitment: evil, Reason: Reason(evil), Reference: evil,
		Status: Executed, Due: at, CreatedAt: at, RequestedBy: evil, ApprovedAt: &at, ApprovedBy: evil, ExecutedAt: &at, ExecutedBy: evil,
		Count: 2, Scopes: map[string]int64{evil: 2}, KeyFingerprints: []string{evil}, SealKey: evil, EventID: evil}
	c, err := NewCertificate(r, &proofs.Proof{LeafIndex: 7, TreeSize: 9, Checkpoint: evil}, evil)
	if err != nil {
		t.Fatal(err)
	}
	page, err := c.HTML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), "<script") {
		t.Fatalf("unescaped markup in the certificate:\n%s", page)
	}
	if !strings.Contains(string(page), "&lt;script&gt;") || !strings.Contains(string(page), "leaf index 7 of a tree of 9") {
		t.Fatalf("the certificate lacks its values:\n%s", page)
	}
}

func TestCertificateNeedsExecution(t *testing.T) {
	for _, s := range []Status{Pending, Approved, Blocked, Rejected} {
		_, err := NewCertificate(&Request{Status: s}, nil, "")
		if grains.ErrorCode(err) != grains.CodeInvalidState {
			t.Errorf("%s: %v", s, err)
		}
	}
}

// TestCheck is the transition table: which status admits which action,
// and four eyes.
func TestCheck(t *testing.T) {
	for _, s := range Statuses {
		for _, a := range []Action{Approve, Reject, Execute} {
			r := &Request{Status: s, RequestedBy: "tok_a"}
			err := Check(r, a, "tok_b")
			allowed := map[Action][]Status{Approve: {Pending}, Reject: {Pending, Approved, Blocked}, Execute: {Approved, Blocked}}[a]
			want := grains.CodeInvalidState
			for _, ok := range allowed {
				if s == ok {
					want = ""
				}
			}
			if got := grains.ErrorCode(err); got != want {
				t.Errorf("%s on %s: %q, want %q", a, s, got, want)
			}
		}
	}
	if err := Check(&Request{Status: Pending, RequestedBy: "tok_a"}, Approve, "tok_a"); grains.ErrorCode(err) != grains.CodeFourEyes {
		t.Errorf("self-approval: %v", err)
	}
}

// TestSealRoundTrip: a sealed subject opens under its key and binding
// only.
func TestSealRoundTrip(t *testing.T) {
	dk := make([]byte, 32)
	nonce := proofs.NewNonce()
	b := SealSubject(dk, "m", "id1", "José", nonce)
	s, n, err := OpenSubject(dk, "m", "id1", b)
	if err != nil || s != "José" || string(n) != string(nonce) {
		t.Fatalf("open: %q %x %v", s, n, err)
	}
	if _, _, err := OpenSubject(dk, "m", "id2", b); err == nil {
		t.Error("a sealed subject opened under another request's binding")
	}
}
