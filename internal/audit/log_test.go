package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
)

// newLogFunc returns a fresh, empty Log for one (sub)test, and a function
// that opens another instance on the same storage (a restarted process or a
// second replica).
type newLogFunc func(t *testing.T) (l Log, another func() Log)

// testLog is the conformance suite every Log backend passes (in the manner
// of x/mod's sumdb/storage TestStorage). Proofs are checked twice: with
// merkle's verifier and byte for byte against refTree, a direct transcription
// of RFC 6962 section 2.1 that shares no code with the backends.
func testLog(t *testing.T, newLog newLogFunc) {
	t.Run("Empty", func(t *testing.T) {
		ctx := testContext(t)
		l, _ := newLog(t)
		size, root, err := l.Root(ctx)
		if err != nil || size != 0 || root != sha256.Sum256(nil) {
			t.Fatalf("Root() = %d, %x, %v; want 0, SHA-256(\"\"), nil", size, root, err)
		}
		if err := l.WaitIntegrated(ctx, 0); err != nil {
			t.Errorf("WaitIntegrated(0) = %v", err)
		}
		wantErr(t, "InclusionProof(0, 1)", ErrNotIntegrated)(l.InclusionProof(ctx, 0, 1))
		wantErr(t, "ConsistencyProof(1, 1)", ErrNotIntegrated)(l.ConsistencyProof(ctx, 1, 1))
		wantErr(t, "Leaf(0)", ErrNotIntegrated)(l.Leaf(ctx, 0))
	})

	t.Run("AppendAndProve", func(t *testing.T) {
		ctx := testContext(t)
		l, _ := newLog(t)
		ref := &refTree{}
		var sizes []uint64
		for i, n := range []int{1, 1, 2, 3, 1, 8, 5, 16, 1, 7, 19} {
			batch := testLeaves(fmt.Sprintf("prove-%d", i), int(ref.size()), n)
			appendAndWait(t, l, ref.size(), batch)
			ref.add(batch...)
			sizes = append(sizes, ref.size())
			assertRoot(t, l, ref)
		}
		for size := uint64(1); size <= ref.size(); size++ {
			for index := uint64(0); index < size; index++ {
				assertInclusion(t, l, ref, index, size)
			}
		}
		for from := uint64(1); from <= ref.size(); from++ {
			for _, to := range []uint64{from, from + 1, from + 3, ref.size()} {
				if to <= ref.size() {
					assertConsistency(t, l, ref, from, to)
				}
			}
		}
		for _, from := range sizes {
			for _, to := range sizes {
				if from <= to {
					assertConsistency(t, l, ref, from, to)
				}
			}
		}
		for i, want := range ref.leaves {
			got, err := l.Leaf(ctx, uint64(i))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Leaf(%d) = %q, %v; want %q", i, got, err, want)
			}
		}
	})

	t.Run("IdempotentRetry", func(t *testing.T) {
		ctx := testContext(t)
		l, _ := newLog(t)
		ref := &refTree{}
		first := testLeaves("retry", 0, 6)
		appendAndWait(t, l, 0, first)
		ref.add(first...)
		// The whole batch again, a suffix of it, and one overlapping batch
		// that also carries new leaves.
		for _, retry := range []struct {
			start  uint64
			leaves [][]byte
		}{
			{0, first},
			{4, first[4:]},
			{0, first[:1]},
		} {
			if err := l.Append(ctx, retry.start, retry.leaves); err != nil {
				t.Fatalf("retry Append(%d, %d leaves) = %v, want nil", retry.start, len(retry.leaves), err)
			}
		}
		more := testLeaves("retry", 6, 3)
		appendAndWait(t, l, 3, append(append([][]byte{}, first[3:]...), more...))
		ref.add(more...)
		assertRoot(t, l, ref)
		assertInclusion(t, l, ref, 7, ref.size())
	})

	t.Run("ConflictAndGap", func(t *testing.T) {
		ctx := testContext(t)
		l, _ := newLog(t)
		ref := &refTree{}
		first := testLeaves("conflict", 0, 5)
		appendAndWait(t, l, 0, first)
		ref.add(first...)

		other := testLeaves("other", 3, 1)[0]
		next := testLeaves("conflict", 5, 2)
		err := l.Append(ctx, 3, [][]byte{first[3], other, next[0], next[1]})
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("Append with a different leaf at 4 = %v, want ErrConflict", err)
		}
		err = l.Append(ctx, 7, testLeaves("conflict", 7, 1))
		if !errors.Is(err, ErrGap) {
			t.Fatalf("Append(7) on a log of 5 = %v, want ErrGap", err)
		}
		err = l.Append(ctx, 6, next[1:])
		if !errors.Is(err, ErrGap) {
			t.Fatalf("Append(6) after a refused Append(3..6) = %v, want ErrGap (nothing past the conflict appended)", err)
		}
		// The log is unchanged and still appendable at 5.
		appendAndWait(t, l, 5, next)
		ref.add(next...)
		assertRoot(t, l, ref)
		assertConsistency(t, l, ref, 5, 7)
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		ctx := testContext(t)
		l, _ := newLog(t)
		appendAndWait(t, l, 0, testLeaves("args", 0, 4))
		if err := l.Append(ctx, 4, [][]byte{[]byte("x"), {}}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Append with an empty leaf = %v, want ErrInvalidArgument", err)
		}
		if err := l.Append(ctx, 4, nil); err != nil {
			t.Errorf("Append of no leaves = %v, want nil", err)
		}
		wantErr(t, "InclusionProof(4, 4)", ErrInvalidArgument)(l.InclusionProof(ctx, 4, 4))
		wantErr(t, "InclusionProof(0, 0)", ErrInvalidArgument)(l.InclusionProof(ctx, 0, 0))
		wantErr(t, "ConsistencyProof(0, 4)", ErrInvalidArgument)(l.ConsistencyProof(ctx, 0, 4))
		wantErr(t, "ConsistencyProof(0, 0)", ErrInvalidArgument)(l.ConsistencyProof(ctx, 0, 0))
		wantErr(t, "ConsistencyProof(3, 2)", ErrInvalidArgument)(l.ConsistencyProof(ctx, 3, 2))
		wantErr(t, "InclusionProof(0, 5)", ErrNotIntegrated)(l.InclusionProof(ctx, 0, 5))
		wantErr(t, "ConsistencyProof(2, 5)", ErrNotIntegrated)(l.ConsistencyProof(ctx, 2, 5))
		wantErr(t, "Leaf(4)", ErrNotIntegrated)(l.Leaf(ctx, 4))
		p, err := l.ConsistencyProof(ctx, 3, 3)
		if err != nil || len(p) != 0 {
			t.Errorf("ConsistencyProof(3, 3) = %x, %v; want an empty proof", p, err)
		}
	})

	t.Run("SecondInstance", func(t *testing.T) {
		ctx := testContext(t)
		l1, another := newLog(t)
		l2 := another()
		ref := &refTree{}
		for i := range 8 {
			l := []Log{l1, l2}[i%2]
			batch := testLeaves("second", int(ref.size()), i+1)
			if i < 4 {
				appendAndWait(t, l, ref.size(), batch)
			} else if err := l.Append(ctx, ref.size(), batch); err != nil {
				// Without waiting: the other instance's leaves may be
				// pending.
				t.Fatalf("Append(%d) through instance %d = %v", ref.size(), i%2+1, err)
			}
			ref.add(batch...)
		}
		for _, l := range []Log{l1, l2} {
			if err := l.WaitIntegrated(ctx, ref.size()); err != nil {
				t.Fatalf("WaitIntegrated(%d) = %v", ref.size(), err)
			}
			assertRoot(t, l, ref)
		}
		// Retries, conflicts and gaps are judged on what is stored, not on
		// what one instance appended.
		if err := l1.Append(ctx, ref.size()-8, ref.leaves[ref.size()-8:]); err != nil {
			t.Fatalf("retry of the other instance's batch = %v", err)
		}
		if err := l1.Append(ctx, ref.size()-1, testLeaves("x", 0, 1)); !errors.Is(err, ErrConflict) {
			t.Fatalf("different leaf at the other instance's last index = %v, want ErrConflict", err)
		}
		if err := l2.Append(ctx, ref.size()+1, testLeaves("x", 0, 1)); !errors.Is(err, ErrGap) {
			t.Fatalf("Append past the end = %v, want ErrGap", err)
		}
		l3 := another()
		assertRoot(t, l3, ref)
		assertInclusion(t, l3, ref, 17, ref.size())
		assertConsistency(t, l3, ref, 10, ref.size())
	})

	t.Run("LeavesAndNodeHashes", func(t *testing.T) {
		ctx := testContext(t)
		l, _ := newLog(t)
		ref := &refTree{}
		// 600 leaves: two full level-0 tiles and a partial one, and nodes
		// up to level 9.
		for start := 0; start < 600; start += 200 {
			batch := testLeaves("tiles", start, 200)
			appendAndWait(t, l, uint64(start), batch)
			ref.add(batch...)
		}
		for _, r := range []struct{ start, end uint64 }{{0, 1}, {0, 256}, {255, 257}, {512, 600}, {599, 600}} {
			got, err := l.Leaves(ctx, r.start, r.end)
			if err != nil || len(got) != int(r.end-r.start) {
				t.Fatalf("Leaves(%d, %d) = %d leaves, %v", r.start, r.end, len(got), err)
			}
			for i, leaf := range got {
				if !bytes.Equal(leaf, ref.leaves[r.start+uint64(i)]) {
					t.Fatalf("Leaves(%d, %d)[%d] = %q, want %q", r.start, r.end, i, leaf, ref.leaves[r.start+uint64(i)])
				}
			}
		}
		for _, r := range []struct {
			level      uint
			start, end uint64
		}{{0, 0, 256}, {0, 300, 600}, {1, 0, 300}, {3, 70, 75}, {8, 0, 2}, {9, 0, 1}} {
			got, err := l.NodeHashes(ctx, r.level, r.start, r.end)
			if err != nil || len(got) != int(r.end-r.start) {
				t.Fatalf("NodeHashes(%d, %d, %d) = %d hashes, %v", r.level, r.start, r.end, len(got), err)
			}
			for i, h := range got {
				j := r.start + uint64(i)
				if want := ref.mth(ref.leaves[j<<r.level : (j+1)<<r.level]); !bytes.Equal(h, want) {
					t.Fatalf("NodeHashes(%d, %d, %d)[%d] = %x, want %x", r.level, r.start, r.end, i, h, want)
				}
			}
		}
		wantErr(t, "Leaves(599, 601)", ErrNotIntegrated)(l.Leaves(ctx, 599, 601))
		wantErr(t, "NodeHashes(8, 2, 3)", ErrNotIntegrated)(l.NodeHashes(ctx, 8, 2, 3))
		wantErr(t, "NodeHashes(3, 74, 76)", ErrNotIntegrated)(l.NodeHashes(ctx, 3, 74, 76))
		wantErr(t, "Leaves(5, 5)", ErrInvalidArgument)(l.Leaves(ctx, 5, 5))
		wantErr(t, "NodeHashes(63, 0, 1)", ErrInvalidArgument)(l.NodeHashes(ctx, 63, 0, 1))
		wantErr(t, "NodeHashes(1, 0, 2^62)", ErrInvalidArgument)(l.NodeHashes(ctx, 1, 0, 1<<62))
	})

	t.Run("WaitIntegratedHonoursContext", func(t *testing.T) {
		l, _ := newLog(t)
		appendAndWait(t, l, 0, testLeaves("wait", 0, 2))
		ctx, cancel := context.WithTimeout(testContext(t), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := l.WaitIntegrated(ctx, 3)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitIntegrated(3) on a log of 2 = %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("WaitIntegrated returned %v after its deadline", d)
		}
	})

	t.Run("WaitersWakeOnAppend", func(t *testing.T) {
		ctx := testContext(t)
		l, _ := newLog(t)
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() { errs <- l.WaitIntegrated(ctx, 3) }()
		}
		appendAndWait(t, l, 0, testLeaves("wake", 0, 3))
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Errorf("WaitIntegrated(3) = %v", err)
			}
		}
	})
}

// testContext is the context for one test: it ends with the test.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// testLeaves returns n distinct leaves shaped like lethe's (compact JSON),
// for indices start, start+1, ...
func testLeaves(tag string, start, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		id := sha256.Sum256(fmt.Appendf(nil, "%s/%d", tag, start+i))
		out[i] = fmt.Appendf(nil, `{"v":1,"id":"%x","type":"grain.forget","memory":"m1","time":"2026-01-02T03:04:05Z","grains":["%x"]}`, id[:16], id[16:])
	}
	return out
}

func appendAndWait(t testing.TB, l Log, start uint64, leaves [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Append(ctx, start, leaves); err != nil {
		t.Fatalf("Append(%d, %d leaves) = %v", start, len(leaves), err)
	}
	if err := l.WaitIntegrated(ctx, start+uint64(len(leaves))); err != nil {
		t.Fatalf("WaitIntegrated(%d) = %v", start+uint64(len(leaves)), err)
	}
}

// wantErr checks that a call returned an error wrapping want.
func wantErr(t *testing.T, call string, want error) func(any, error) {
	t.Helper()
	return func(got any, err error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s = %v, %v; want an error wrapping %v", call, got, err, want)
		}
	}
}

func assertRoot(t testing.TB, l Log, ref *refTree) {
	t.Helper()
	size, root, err := l.Root(context.Background())
	if err != nil {
		t.Fatalf("Root() = %v", err)
	}
	if size < ref.size() {
		t.Fatalf("Root() size = %d, want >= %d", size, ref.size())
	}
	if want := ref.rootAt(size); !bytes.Equal(root[:], want) {
		t.Fatalf("Root() at size %d = %x, want %x", size, root, want)
	}
}

func assertInclusion(t testing.TB, l Log, ref *refTree, index, size uint64) {
	t.Helper()
	p, err := l.InclusionProof(context.Background(), index, size)
	if err != nil {
		t.Fatalf("InclusionProof(%d, %d) = %v", index, size, err)
	}
	if err := proof.VerifyInclusion(hasher, index, size, hasher.HashLeaf(ref.leaves[index]), p, ref.rootAt(size)); err != nil {
		t.Fatalf("InclusionProof(%d, %d) does not verify: %v", index, size, err)
	}
	if want := ref.inclusion(index, size); !equalProofs(p, want) {
		t.Fatalf("InclusionProof(%d, %d) = %x, want %x", index, size, p, want)
	}
}

func assertConsistency(t testing.TB, l Log, ref *refTree, from, to uint64) {
	t.Helper()
	p, err := l.ConsistencyProof(context.Background(), from, to)
	if err != nil {
		t.Fatalf("ConsistencyProof(%d, %d) = %v", from, to, err)
	}
	if err := proof.VerifyConsistency(hasher, from, to, p, ref.rootAt(from), ref.rootAt(to)); err != nil {
		t.Fatalf("ConsistencyProof(%d, %d) does not verify: %v", from, to, err)
	}
	if want := ref.consistency(from, to); !equalProofs(p, want) {
		t.Fatalf("ConsistencyProof(%d, %d) = %x, want %x", from, to, p, want)
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

// refTree is RFC 6962 section 2.1 written out recursively: MTH, PATH and
// PROOF/SUBPROOF over the list of leaves. Quadratic, for small test trees.
type refTree struct {
	leaves [][]byte
}

func (r *refTree) add(leaves ...[]byte) { r.leaves = append(r.leaves, leaves...) }
func (r *refTree) size() uint64         { return uint64(len(r.leaves)) }

func (r *refTree) rootAt(size uint64) []byte { return r.mth(r.leaves[:size]) }

// split returns k, the largest power of two smaller than n (n > 1).
func split(n int) int { return 1 << (bits.Len(uint(n-1)) - 1) }

func (r *refTree) mth(d [][]byte) []byte {
	switch len(d) {
	case 0:
		h := sha256.Sum256(nil)
		return h[:]
	case 1:
		h := sha256.Sum256(append([]byte{0}, d[0]...))
		return h[:]
	}
	k := split(len(d))
	h := sha256.Sum256(append(append([]byte{1}, r.mth(d[:k])...), r.mth(d[k:])...))
	return h[:]
}

func (r *refTree) inclusion(index, size uint64) [][]byte {
	return r.path(int(index), r.leaves[:size])
}

func (r *refTree) path(m int, d [][]byte) [][]byte {
	if len(d) <= 1 {
		return [][]byte{}
	}
	k := split(len(d))
	if m < k {
		return append(r.path(m, d[:k]), r.mth(d[k:]))
	}
	return append(r.path(m-k, d[k:]), r.mth(d[:k]))
}

func (r *refTree) consistency(from, to uint64) [][]byte {
	if from == to {
		return [][]byte{}
	}
	return r.subproof(int(from), r.leaves[:to], true)
}

func (r *refTree) subproof(m int, d [][]byte, b bool) [][]byte {
	n := len(d)
	if m == n {
		if b {
			return [][]byte{}
		}
		return [][]byte{r.mth(d)}
	}
	k := split(n)
	if m <= k {
		return append(r.subproof(m, d[:k], b), r.mth(d[k:]))
	}
	return append(r.subproof(m-k, d[k:], false), r.mth(d[:k]))
}
