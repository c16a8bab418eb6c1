package memlog_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"github.com/lethe-io/lethe/proofs/internal/memlog"
)

// TestAgainstMerkle checks memlog, an implementation of RFC 6962's
// definitions, against github.com/transparency-dev/merkle's tree and
// verifiers for every index and pair of sizes up to 70 leaves.
func TestAgainstMerkle(t *testing.T) {
	const n = 70
	var ml memlog.Log
	tree := testonly.New(rfc6962.DefaultHasher)
	for i := 0; i < n; i++ {
		leaf := []byte(fmt.Sprintf("leaf %d", i))
		ml.Append(leaf)
		tree.AppendData(leaf)
	}
	h := rfc6962.DefaultHasher
	for size := uint64(0); size <= n; size++ {
		root, err := ml.Root(size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(root[:], tree.HashAt(size)) {
			t.Fatalf("root at %d differs", size)
		}
		for i := uint64(0); i < size; i++ {
			got, err := ml.Inclusion(i, size)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := tree.InclusionProof(i, size)
			if !equalProofs(got, want) {
				t.Fatalf("inclusion %d@%d differs", i, size)
			}
			lh := memlog.LeafHash([]byte(fmt.Sprintf("leaf %d", i)))
			if err := proof.VerifyInclusion(h, i, size, lh[:], got, root[:]); err != nil {
				t.Fatalf("inclusion %d@%d: %v", i, size, err)
			}
		}
		for m := uint64(0); m <= size; m++ {
			got, err := ml.Consistency(m, size)
			if err != nil {
				t.Fatal(err)
			}
			if m > 0 && m < size {
				want, _ := tree.ConsistencyProof(m, size)
				if !equalProofs(got, want) {
					t.Fatalf("consistency %d->%d differs", m, size)
				}
			}
			old, _ := ml.Root(m)
			if err := proof.VerifyConsistency(h, m, size, got, old[:], root[:]); err != nil {
				t.Fatalf("consistency %d->%d: %v", m, size, err)
			}
		}
	}
	if _, err := ml.Inclusion(n, n); err == nil {
		t.Fatal("Inclusion outside the tree succeeded")
	}
	if _, err := ml.Consistency(2, 1); err == nil {
		t.Fatal("Consistency backwards succeeded")
	}
}

// TestKnownRoots checks roots that do not come from any Go code: the
// empty tree's root is SHA-256 of nothing, a one-leaf tree's root is
// SHA-256(0x00 || leaf), a two-leaf root SHA-256(0x01 || left || right),
// all computed with sha256sum:
//
//	printf '' | sha256sum
//	printf '\0' | sha256sum        # leaf ""
//	printf '\0abc' | sha256sum     # leaf "abc"
//	(printf '\001'; printf '\0a' | sha256sum | cut -c1-64 | xxd -r -p;
//	 printf '\0b' | sha256sum | cut -c1-64 | xxd -r -p) | sha256sum  # leaves "a", "b"
func TestKnownRoots(t *testing.T) {
	for _, tt := range []struct {
		leaves []string
		want   string
	}{
		{nil, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{[]string{""}, "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"},
		{[]string{"abc"}, "609f6e36d2405585188d5cfd761f407c7cc46a7d3f314c88270469dde315fcd1"},
		{[]string{"a", "b"}, "b137985ff484fb600db93107c77b0365c80d78f5b429ded0fd97361d077999eb"},
	} {
		var ml memlog.Log
		for _, l := range tt.leaves {
			ml.Append([]byte(l))
		}
		root, _ := ml.Root(ml.Size())
		if got := hex.EncodeToString(root[:]); got != tt.want {
			t.Errorf("root of %q = %s, want %s", tt.leaves, got, tt.want)
		}
	}
}

func equalProofs(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
