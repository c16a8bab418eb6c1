package proofs_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/transparency-dev/merkle/proof"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/prooftest"
)

func TestVerifyEveryLeafOfEverySize(t *testing.T) {
	l, _ := prooftest.SampleLog("every", "lethe.example/audit", 33)
	v, err := proofs.NewVerifier(proofs.VerifyOptions{LogKey: l.VKey})
	if err != nil {
		t.Fatal(err)
	}
	for size := uint64(1); size <= l.Size(); size++ {
		for i := uint64(0); i < size; i++ {
			got, err := v.Verify(l.Proof(i, size))
			if err != nil {
				t.Fatalf("proof %d@%d: %v", i, size, err)
			}
			if got.Checkpoint.Size != size || got.Checkpoint.Hash != l.Root(size) || got.KeyName != "lethe.example/audit" ||
				!bytes.Equal(mustMarshal(t, got.Leaf), l.Leaves[i]) || got.Pinned != nil || got.SubjectChecked {
				t.Fatalf("proof %d@%d: Verified = %+v", i, size, got)
			}
		}
	}
}

func mustMarshal(tb testing.TB, l *proofs.Leaf) []byte {
	tb.Helper()
	b, err := l.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// leafCheck returns the check a proof with leaf b (and otherwise p's
// fields) must fail: the leaf does not parse, or its summary differs from
// p's, or (the leaf being signed) its signature fails.
func leafCheck(p *proofs.Proof, b []byte) proofs.Check {
	l, err := proofs.ParseLeaf(b)
	switch {
	case err != nil:
		return proofs.CheckLeafFormat
	case l.ID != p.EventID || l.Timestamp() != p.Timestamp || l.GrainCount() != p.Count || l.FirstKeyFingerprint() != p.KeyFingerprint:
		return proofs.CheckSummary
	}
	return proofs.CheckLeafSignature
}

// TestTamper changes every byte (or bit, for numbers) of every field of a
// valid proof, one at a time, and checks that verification fails with the
// check responsible for that field.
func TestTamper(t *testing.T) {
	l, good := sampleProof(t)
	pinned := l.Checkpoint(6)
	opts := proofs.VerifyOptions{LogKey: l.VKey, Pinned: pinned, Subject: prooftest.Subject, Nonce: prooftest.NewRand("proof").Bytes("nonce 5", 32)}
	v, err := proofs.NewVerifier(opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := v.Verify(good); err != nil || !got.SubjectChecked || got.Pinned == nil || got.Pinned.Size != 6 {
		t.Fatalf("the untampered proof does not verify: %+v, %v", got, err)
	}
	clone := func() *proofs.Proof {
		b, _ := good.Marshal()
		p, _ := proofs.ParseProof(b)
		return p
	}
	run := 0
	expect := func(name string, p *proofs.Proof, want proofs.Check) {
		t.Helper()
		run++
		_, err := v.Verify(p)
		if got := proofs.FailedCheck(err); got != want {
			t.Fatalf("%s: check %q (%v), want %q", name, got, err, want)
		}
		if !strings.HasPrefix(err.Error(), string(want)+": ") {
			t.Fatalf("%s: error %q does not start with the check name", name, err)
		}
	}
	flipBytes := func(b []byte, f func(i int, b []byte)) {
		for i := range b {
			for _, mask := range []byte{0x01, 0x80} {
				c := bytes.Clone(b)
				c[i] ^= mask
				f(i, c)
			}
		}
	}
	flipString := func(s string, f func(i int, s string)) {
		flipBytes([]byte(s), func(i int, b []byte) { f(i, string(b)) })
	}
	flipUint := func(n uint64, f func(bit int, n uint64)) {
		for bit := 0; bit < 64; bit++ {
			f(bit, n^(1<<bit))
		}
	}

	flipString(good.Format, func(i int, s string) {
		p := clone()
		p.Format = s
		expect(fmt.Sprintf("format byte %d", i), p, proofs.CheckFormat)
	})
	seen := map[proofs.Check]int{}
	flipBytes(good.Leaf, func(i int, b []byte) {
		p := clone()
		p.Leaf = b
		want := leafCheck(p, b)
		seen[want]++
		expect(fmt.Sprintf("leaf byte %d", i), p, want)
	})
	if seen[proofs.CheckLeafSignature] == 0 || seen[proofs.CheckSummary] == 0 || seen[proofs.CheckLeafFormat] == 0 {
		t.Fatalf("leaf tampering did not exercise every leaf check: %v", seen)
	}
	flipUint(good.Count, func(bit int, n uint64) {
		p := clone()
		p.Count = n
		expect(fmt.Sprintf("count bit %d", bit), p, proofs.CheckSummary)
	})
	for name, field := range map[string]func(p *proofs.Proof) *string{
		"key_fingerprint": func(p *proofs.Proof) *string { return &p.KeyFingerprint },
		"timestamp":       func(p *proofs.Proof) *string { return &p.Timestamp },
		"event_id":        func(p *proofs.Proof) *string { return &p.EventID },
	} {
		flipString(*field(good), func(i int, s string) {
			p := clone()
			*field(p) = s
			expect(fmt.Sprintf("%s byte %d", name, i), p, proofs.CheckSummary)
		})
		p := clone()
		*field(p) = ""
		expect(name+" empty", p, proofs.CheckSummary)
	}
	flipBytes(good.LeafSignature, func(i int, b []byte) {
		p := clone()
		p.LeafSignature = b
		expect(fmt.Sprintf("leaf_signature byte %d", i), p, proofs.CheckLeafSignature)
	})
	for _, sig := range [][]byte{nil, good.LeafSignature[:63], append(bytes.Clone(good.LeafSignature), 0)} {
		p := clone()
		p.LeafSignature = sig
		expect(fmt.Sprintf("leaf_signature of %d bytes", len(sig)), p, proofs.CheckLeafSignature)
	}
	flipString(good.Checkpoint, func(i int, s string) {
		p := clone()
		p.Checkpoint = s
		expect(fmt.Sprintf("checkpoint byte %d", i), p, proofs.CheckCheckpointSignature)
	})
	flipUint(good.TreeSize, func(bit int, n uint64) {
		p := clone()
		p.TreeSize = n
		expect(fmt.Sprintf("tree_size bit %d", bit), p, proofs.CheckTreeSize)
	})
	flipUint(good.LeafIndex, func(bit int, n uint64) {
		p := clone()
		p.LeafIndex = n
		expect(fmt.Sprintf("leaf_index bit %d", bit), p, proofs.CheckInclusion)
	})
	for j := range good.Inclusion {
		flipBytes(good.Inclusion[j], func(i int, b []byte) {
			p := clone()
			p.Inclusion[j] = b
			expect(fmt.Sprintf("inclusion %d byte %d", j, i), p, proofs.CheckInclusion)
		})
	}
	for name, edit := range map[string]func(p *proofs.Proof){
		"inclusion dropped":    func(p *proofs.Proof) { p.Inclusion = p.Inclusion[:len(p.Inclusion)-1] },
		"inclusion added":      func(p *proofs.Proof) { p.Inclusion = append(p.Inclusion, p.Inclusion[0]) },
		"inclusion swapped":    func(p *proofs.Proof) { p.Inclusion[0], p.Inclusion[1] = p.Inclusion[1], p.Inclusion[0] },
		"inclusion short hash": func(p *proofs.Proof) { p.Inclusion[0] = p.Inclusion[0][:31] },
	} {
		p := clone()
		edit(p)
		expect(name, p, proofs.CheckInclusion)
	}
	for j := range good.Consistency {
		flipBytes(good.Consistency[j], func(i int, b []byte) {
			p := clone()
			p.Consistency[j] = b
			expect(fmt.Sprintf("consistency %d byte %d", j, i), p, proofs.CheckConsistency)
		})
	}
	flipUint(good.ConsistencyFrom, func(bit int, n uint64) {
		p := clone()
		p.ConsistencyFrom = n
		expect(fmt.Sprintf("consistency_from bit %d", bit), p, proofs.CheckConsistency)
	})
	t.Logf("%d tampered proofs rejected", run)
}

// TestTamperEncoded flips every byte of both encodings of a valid proof and
// checks that no result both parses and verifies.
func TestTamperEncoded(t *testing.T) {
	l, p := sampleProof(t)
	v, _ := proofs.NewVerifier(proofs.VerifyOptions{LogKey: l.VKey, Pinned: l.Checkpoint(6)})
	jsonForm, _ := p.Marshal()
	textForm, _ := p.MarshalTlogProof()
	for _, enc := range [][]byte{jsonForm, textForm} {
		if q, err := proofs.ParseAnyProof(enc); err != nil {
			t.Fatal(err)
		} else if _, err := v.Verify(q); err != nil {
			t.Fatal(err)
		}
		for i := range enc {
			for _, mask := range []byte{0x01, 0x20} {
				c := bytes.Clone(enc)
				c[i] ^= mask
				q, err := proofs.ParseAnyProof(c)
				if err == nil {
					_, err = v.Verify(q)
				}
				if err == nil {
					t.Fatalf("byte %d ^ %#x of\n%s\nstill verifies", i, mask, c)
				}
				if proofs.FailedCheck(err) == "" {
					t.Fatalf("byte %d: error %v names no check", i, err)
				}
			}
		}
	}
}

func TestVerifyWithAnotherLogsKey(t *testing.T) {
	l, p := sampleProof(t)
	other, _ := prooftest.SampleLog("another log", "lethe.example/audit", 13)
	// The leaf is checked first, so another key fails there.
	_, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: other.VKey})
	var lse *proofs.LeafSignatureError
	if !errors.As(err, &lse) || !strings.HasPrefix(other.VKey, lse.Key) {
		t.Fatalf("Verify with another key = %v, want a LeafSignatureError naming the key", err)
	}
	// A proof whose checkpoint comes from another log (same name) fails
	// at the checkpoint.
	p.Checkpoint = string(other.Checkpoint(13))
	_, err = proofs.Verify(p, proofs.VerifyOptions{LogKey: l.VKey})
	var cse *proofs.CheckpointSignatureError
	if !errors.As(err, &cse) {
		t.Fatalf("Verify with another log's checkpoint = %v, want a CheckpointSignatureError", err)
	}
}

func TestVerifyOrigin(t *testing.T) {
	l, _ := prooftest.SampleLog("origin", "lethe.example/audit", 4)
	// Sign a checkpoint whose origin is not the key's name.
	cp, err := l.Signer.SignCheckpoint(proofs.Checkpoint{Origin: "audit.example.org", Size: 4, Hash: l.Root(4)})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := proofs.NewProof(l.Leaves[2], l.Sigs[2], 2, 4, l.Inclusion(2, 4), cp)
	_, err = proofs.Verify(p, proofs.VerifyOptions{LogKey: l.VKey})
	var oe *proofs.CheckpointOriginError
	if !errors.As(err, &oe) || oe.Got != "audit.example.org" || oe.Want != "lethe.example/audit" {
		t.Fatalf("Verify = %v, want a CheckpointOriginError", err)
	}
	if _, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: l.VKey, Origin: "audit.example.org"}); err != nil {
		t.Fatalf("Verify with the origin given = %v", err)
	}
	// The default proof is refused when another origin is required.
	_, err = proofs.Verify(l.Proof(2, 4), proofs.VerifyOptions{LogKey: l.VKey, Origin: "audit.example.org"})
	if proofs.FailedCheck(err) != proofs.CheckCheckpointOrigin {
		t.Fatalf("Verify = %v", err)
	}
}

func TestVerifyPinned(t *testing.T) {
	l, _ := prooftest.SampleLog("pinned", "lethe.example/audit", 20)
	// fork shares the first 10 leaves with l, then differs; same key.
	r := prooftest.NewRand("fork")
	fork := prooftest.NewLog("pinned", "lethe.example/audit")
	for i := 0; i < 20; i++ {
		if i < 10 {
			fork.AppendRaw(l.Leaves[i])
		} else {
			fork.Append(prooftest.SampleLeaf(r, i))
		}
	}
	if fork.Root(10) != l.Root(10) || fork.Root(11) == l.Root(11) {
		t.Fatal("fork is not a fork")
	}
	withConsistency := func(lg *prooftest.Log, index, size, from uint64) *proofs.Proof {
		p := lg.Proof(index, size)
		p.SetConsistency(from, lg.Consistency(from, size))
		return p
	}
	emptyRoot := l.Root(0)
	emptyCP, _ := l.Signer.SignCheckpoint(proofs.Checkpoint{Origin: l.Origin, Size: 0, Hash: emptyRoot})
	badEmptyCP, _ := l.Signer.SignCheckpoint(proofs.Checkpoint{Origin: l.Origin, Size: 0, Hash: l.Root(1)})
	other := prooftest.NewLog("other", "lethe.example/audit")

	tests := []struct {
		name    string
		proof   *proofs.Proof
		pinned  []byte
		want    proofs.Check
		wantErr string
	}{
		{"consistent", withConsistency(l, 3, 20, 12), l.Checkpoint(12), "", ""},
		{"consistent from 1", withConsistency(l, 0, 20, 1), l.Checkpoint(1), "", ""},
		{"consistent from a power of two", withConsistency(l, 19, 20, 16), l.Checkpoint(16), "", ""},
		{"same checkpoint", l.Proof(3, 20), l.Checkpoint(20), "", ""},
		{"empty pinned tree", l.Proof(3, 20), emptyCP, "", ""},
		{"pinned empty tree with wrong root", l.Proof(3, 20), badEmptyCP, proofs.CheckConsistency, "empty tree"},
		{"fork: proof consistent with its own log", withConsistency(fork, 3, 20, 12), l.Checkpoint(12), proofs.CheckConsistency, "does not match"},
		{"fork: same size", fork.Proof(3, 20), l.Checkpoint(20), proofs.CheckConsistency, "forked"},
		{"rollback", l.Proof(3, 12), l.Checkpoint(20), proofs.CheckConsistency, "shrank"},
		{"no consistency proof", l.Proof(3, 20), l.Checkpoint(12), proofs.CheckConsistency, "no consistency proof"},
		{"consistency from another size", withConsistency(l, 3, 20, 11), l.Checkpoint(12), proofs.CheckConsistency, "starts at size 11"},
		{"pinned by another key", withConsistency(l, 3, 20, 12), other.Checkpoint(0), proofs.CheckPinned, "checkpoint_signature"},
		{"pinned garbage", withConsistency(l, 3, 20, 12), []byte("hello"), proofs.CheckPinned, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := proofs.Verify(tt.proof, proofs.VerifyOptions{LogKey: l.VKey, Pinned: tt.pinned})
			if c := proofs.FailedCheck(err); c != tt.want {
				t.Fatalf("Verify = %v; check %q, want %q", err, c, tt.want)
			}
			if tt.want == "" {
				if got.Pinned == nil {
					t.Fatal("Verified.Pinned is nil")
				}
				return
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}
	// The evidence is in the typed error.
	_, err := proofs.Verify(withConsistency(fork, 3, 20, 12), proofs.VerifyOptions{LogKey: l.VKey, Pinned: l.Checkpoint(12)})
	var ce *proofs.ConsistencyError
	var rm proof.RootMismatchError
	if !errors.As(err, &ce) || ce.From != 12 || ce.To != 20 || !errors.As(err, &rm) {
		t.Fatalf("fork error = %#v", err)
	}
	root12 := l.Root(12)
	if !bytes.Equal(ce.FromRoot, root12[:]) {
		t.Fatal("ConsistencyError.FromRoot is not the pinned root")
	}
}

func TestVerifySubject(t *testing.T) {
	l, r := prooftest.SampleLog("subject", "lethe.example/audit", 16)
	nonce := r.Bytes("nonce 5", 32)
	erase := l.Proof(5, 16)
	tests := []struct {
		name    string
		proof   *proofs.Proof
		subject string
		nonce   []byte
		want    proofs.Check
	}{
		{"right subject and nonce", erase, prooftest.Subject, nonce, ""},
		{"other subject", erase, prooftest.Subject + "x", nonce, proofs.CheckSubject},
		{"parent scope", erase, "acme/prod", nonce, proofs.CheckSubject},
		{"other nonce", erase, prooftest.Subject, r.Bytes("nonce 15", 32), proofs.CheckSubject},
		{"leaf without commitment", l.Proof(0, 16), prooftest.Subject, nonce, proofs.CheckSubject},
		{"subject without nonce", erase, prooftest.Subject, nil, proofs.CheckOptions},
		{"nonce without subject", erase, "", nonce, proofs.CheckOptions},
		{"short nonce", erase, prooftest.Subject, nonce[:31], proofs.CheckOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := proofs.Verify(tt.proof, proofs.VerifyOptions{LogKey: l.VKey, Subject: tt.subject, Nonce: tt.nonce})
			if c := proofs.FailedCheck(err); c != tt.want {
				t.Fatalf("Verify = %v; check %q, want %q", err, c, tt.want)
			}
			if tt.want == "" && !got.SubjectChecked {
				t.Fatal("SubjectChecked is false")
			}
			if err != nil && strings.Contains(err.Error(), tt.subject) && tt.subject != "" {
				t.Fatalf("error %q repeats the subject", err)
			}
		})
	}
}

func TestVerifyOptions(t *testing.T) {
	l, p := sampleProof(t)
	for _, key := range []string{"", "lethe.example/audit", l.SKey, l.VKey[:len(l.VKey)-4], strings.Replace(l.VKey, "+", "+0", 1)} {
		_, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: key})
		var oe *proofs.OptionsError
		if !errors.As(err, &oe) {
			t.Errorf("Verify with key %.24q = %v, want an OptionsError", key, err)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE") {
			t.Errorf("error echoes a private key: %v", err)
		}
	}
	// Surrounding white space (a key file's newline) is fine.
	if _, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: " " + l.VKey + "\n"}); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyErrorsAreDistinctTypes(t *testing.T) {
	// Each check has its own error type, matched with errors.As.
	l, p := sampleProof(t)
	opts := proofs.VerifyOptions{LogKey: l.VKey}
	type matcher func(error) bool
	as := func(target any) matcher { return func(err error) bool { return errors.As(err, target) } }
	tests := []struct {
		name  string
		edit  func(p *proofs.Proof, o *proofs.VerifyOptions)
		match matcher
	}{
		{"format", func(p *proofs.Proof, o *proofs.VerifyOptions) { p.Format = "lethe.proof/v2" }, as(new(*proofs.FormatError))},
		{"leaf_format", func(p *proofs.Proof, o *proofs.VerifyOptions) { p.Leaf = append(p.Leaf, ' ') }, as(new(*proofs.LeafFormatError))},
		{"summary", func(p *proofs.Proof, o *proofs.VerifyOptions) { p.Count++ }, as(new(*proofs.SummaryMismatchError))},
		{"leaf_signature", func(p *proofs.Proof, o *proofs.VerifyOptions) { p.LeafSignature[0]++ }, as(new(*proofs.LeafSignatureError))},
		{"checkpoint_signature", func(p *proofs.Proof, o *proofs.VerifyOptions) { p.Checkpoint = "x" }, as(new(*proofs.CheckpointSignatureError))},
		{"checkpoint_origin", func(p *proofs.Proof, o *proofs.VerifyOptions) { o.Origin = "x" }, as(new(*proofs.CheckpointOriginError))},
		{"tree_size", func(p *proofs.Proof, o *proofs.VerifyOptions) { p.TreeSize++ }, as(new(*proofs.TreeSizeError))},
		{"inclusion", func(p *proofs.Proof, o *proofs.VerifyOptions) { p.Inclusion[0][0]++ }, as(new(*proofs.InclusionError))},
		{"pinned", func(p *proofs.Proof, o *proofs.VerifyOptions) { o.Pinned = []byte("x") }, as(new(*proofs.PinnedCheckpointError))},
		{"consistency", func(p *proofs.Proof, o *proofs.VerifyOptions) { o.Pinned = l.Checkpoint(7) }, as(new(*proofs.ConsistencyError))},
		{"subject", func(p *proofs.Proof, o *proofs.VerifyOptions) { o.Subject, o.Nonce = "x", make([]byte, 32) }, as(new(*proofs.SubjectCommitmentError))},
		{"options", func(p *proofs.Proof, o *proofs.VerifyOptions) { o.LogKey = "x" }, as(new(*proofs.OptionsError))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, _ := p.Marshal()
			q, _ := proofs.ParseProof(b)
			o := opts
			tt.edit(q, &o)
			_, err := proofs.Verify(q, o)
			if err == nil || !tt.match(err) {
				t.Fatalf("Verify = %v (%T)", err, err)
			}
		})
	}
	// The inclusion error states both roots.
	b, _ := p.Marshal()
	q, _ := proofs.ParseProof(b)
	q.Inclusion[0][0]++
	_, err := proofs.Verify(q, opts)
	root := l.Root(13)
	if want := "does not match checkpoint root " + b64(root[:]); !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "inclusion: computed root ") {
		t.Fatalf("inclusion error = %q", err)
	}
}

func TestVerifierMatchesVerify(t *testing.T) {
	l, p := sampleProof(t)
	opts := proofs.VerifyOptions{LogKey: l.VKey, Pinned: l.Checkpoint(6)}
	v, _ := proofs.NewVerifier(opts)
	// A bad checkpoint after a good one, and a good one after a bad one:
	// the memory of opened checkpoints never changes an answer.
	bad := *p
	bad.Checkpoint = strings.Replace(p.Checkpoint, "\n13\n", "\n14\n", 1)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				for _, q := range []*proofs.Proof{p, &bad} {
					_, got := v.Verify(q)
					_, want := proofs.Verify(q, opts)
					if proofs.FailedCheck(got) != proofs.FailedCheck(want) {
						t.Errorf("Verifier = %v, Verify = %v", got, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	// Many distinct checkpoints exercise the bound on the memory.
	for size := uint64(6); size <= l.Size(); size++ {
		for k := 0; k < 10; k++ {
			q := l.Proof(0, size)
			q.SetConsistency(6, l.Consistency(6, size))
			if _, err := v.Verify(q); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestFailedCheck(t *testing.T) {
	if got := proofs.FailedCheck(nil); got != "" {
		t.Fatalf("FailedCheck(nil) = %q", got)
	}
	if got := proofs.FailedCheck(errors.New("x")); got != "" {
		t.Fatalf("FailedCheck(plain) = %q", got)
	}
	wrapped := fmt.Errorf("verify proof.json: %w", &proofs.TreeSizeError{Proof: 1, Checkpoint: 2})
	if got := proofs.FailedCheck(wrapped); got != proofs.CheckTreeSize {
		t.Fatalf("FailedCheck(wrapped) = %q", got)
	}
	if !strings.Contains(wrapped.Error(), "tree_size: proof says tree size 1 but the checkpoint says "+strconv.Itoa(2)) {
		t.Fatalf("message = %q", wrapped)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

func TestVerifyNil(t *testing.T) {
	l, _ := sampleProof(t)
	if _, err := proofs.Verify(nil, proofs.VerifyOptions{LogKey: l.VKey}); proofs.FailedCheck(err) != proofs.CheckFormat {
		t.Fatalf("Verify(nil) = %v", err)
	}
}
