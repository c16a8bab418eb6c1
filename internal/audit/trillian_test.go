package audit

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/trillian"
	"github.com/google/trillian/types"
	"google.golang.org/grpc"

	"github.com/lethe-io/lethe/internal/testenv"
)

func newTrillian(tb testing.TB, addr string, treeID int64, opts ...grpc.DialOption) *TrillianLog {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := NewTrillianLog(ctx, testenv.Dial(tb, addr, opts...), treeID, TrillianOptions{})
	if err != nil {
		tb.Fatalf("NewTrillianLog(%s, %d) = %v", addr, treeID, err)
	}
	return l
}

func TestTrillianLog(t *testing.T) {
	testLog(t, func(t *testing.T) (Log, func() Log) {
		addr, tree := testenv.Trillian(t)
		return newTrillian(t, addr, tree), func() Log { return newTrillian(t, addr, tree) }
	})
}

// TestTrillianMatchesEmbedded replays one stream of leaves, in random
// batches, into an embedded log and a Trillian tree and requires identical
// roots, inclusion proofs and consistency proofs, byte for byte.
func TestTrillianMatchesEmbedded(t *testing.T) {
	ctx := testContext(t)
	addr, tree := testenv.Trillian(t)
	logs := map[string]Log{
		"trillian": newTrillian(t, addr, tree),
		"embedded": newEmbedded(t, openSQLite(t)),
	}
	rng := rand.New(rand.NewPCG(6962, 1))
	var sizes []uint64
	ref := &refTree{}
	for ref.size() < 300 {
		batch := testLeaves("stream", int(ref.size()), 1+rng.IntN(40))
		for _, l := range logs {
			appendAndWait(t, l, ref.size(), batch)
		}
		ref.add(batch...)
		sizes = append(sizes, ref.size())
		for name, l := range logs {
			size, root, err := l.Root(ctx)
			if err != nil || size != ref.size() || string(root[:]) != string(ref.rootAt(size)) {
				t.Fatalf("%s: Root() = %d, %x, %v; want %d, %x", name, size, root, err, ref.size(), ref.rootAt(ref.size()))
			}
		}
	}
	// Batch boundaries (roots both logs have seen) and sizes inside batches.
	checkSizes := append(slices.Clone(sizes), 1, 2, 3, 100, 129, 255, 256, 257)
	same := func(what string, call func(Log) ([][]byte, error)) {
		t.Helper()
		var first [][]byte
		for _, name := range []string{"embedded", "trillian"} {
			p, err := call(logs[name])
			if err != nil {
				t.Fatalf("%s: %s = %v", name, what, err)
			}
			if name == "embedded" {
				first = p
			} else if !equalProofs(first, p) {
				t.Fatalf("%s: embedded %x, trillian %x", what, first, p)
			}
		}
	}
	for _, size := range checkSizes {
		for _, index := range []uint64{0, size / 3, size - 1} {
			same("InclusionProof", func(l Log) ([][]byte, error) { return l.InclusionProof(ctx, index, size) })
			assertInclusion(t, logs["trillian"], ref, index, size)
		}
		for _, to := range checkSizes {
			if size <= to {
				same("ConsistencyProof", func(l Log) ([][]byte, error) { return l.ConsistencyProof(ctx, size, to) })
			}
		}
	}
	for _, size := range []uint64{5, 77, 256, 299} {
		assertConsistency(t, logs["trillian"], ref, size, ref.size())
	}
}

// TestTrillianServerDown stops a private log server in the middle of a
// stream: appends fail with ErrUnavailable, then succeed once it is back,
// and nothing is lost.
func TestTrillianServerDown(t *testing.T) {
	ctx := testContext(t)
	stack := testenv.StartTrillian(t)
	l := newTrillian(t, stack.Addr(), stack.NewTree(t))
	ref := &refTree{}
	appendBatch := func() error {
		batch := testLeaves("down", int(ref.size()), 10)
		if err := l.Append(ctx, ref.size(), batch); err != nil {
			return err
		}
		ref.add(batch...)
		return nil
	}
	for range 5 {
		if err := appendBatch(); err != nil {
			t.Fatalf("Append = %v", err)
		}
	}

	stack.StopServer()
	err := appendBatch()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Append with the log server down = %v, want ErrUnavailable", err)
	}
	t.Logf("Append with the server down: %v", err)
	if !strings.Contains(err.Error(), "trillian") || !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("error %q does not say that Trillian is unavailable", err)
	}
	if _, _, err := l.Root(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Root() with the log server down = %v, want ErrUnavailable", err)
	}

	stack.StartServer()
	// The sequencer retries the same batch until it goes in.
	deadline := time.Now().Add(30 * time.Second)
	for err = appendBatch(); err != nil; err = appendBatch() {
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Append after the server restarted = %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 5 {
		if err := appendBatch(); err != nil {
			t.Fatalf("Append = %v", err)
		}
	}
	if err := l.WaitIntegrated(ctx, ref.size()); err != nil {
		t.Fatalf("WaitIntegrated(%d) = %v", ref.size(), err)
	}
	assertRoot(t, l, ref)
	for i, want := range ref.leaves {
		if got, err := l.Leaf(ctx, uint64(i)); err != nil || string(got) != string(want) {
			t.Fatalf("Leaf(%d) = %q, %v; want %q", i, got, err, want)
		}
	}
	assertConsistency(t, l, ref, 50, ref.size())
}

// TestTrillianSignerRestart kills the signer in the middle of a stream:
// appends still succeed, integration stops, a restarted lethe (a new
// TrillianLog) finds the pending leaves, and once the signer is back
// everything is integrated in order.
func TestTrillianSignerRestart(t *testing.T) {
	ctx := testContext(t)
	stack := testenv.StartTrillian(t)
	tree := stack.NewTree(t)
	l := newTrillian(t, stack.Addr(), tree)
	ref := &refTree{}
	for range 3 {
		batch := testLeaves("signer", int(ref.size()), 20)
		appendAndWait(t, l, ref.size(), batch)
		ref.add(batch...)
	}
	integrated := ref.size()

	stack.StopSigner()
	for range 3 {
		batch := testLeaves("signer", int(ref.size()), 20)
		if err := l.Append(ctx, ref.size(), batch); err != nil {
			t.Fatalf("Append with the signer down = %v", err)
		}
		ref.add(batch...)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := l.WaitIntegrated(wctx, ref.size())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitIntegrated with the signer down = %v, want DeadlineExceeded", err)
	}
	if size, _, err := l.Root(ctx); err != nil || size != integrated {
		t.Fatalf("Root() with the signer down = %d, %v; want %d", size, err, integrated)
	}

	// lethe restarts: the new instance learns the appended size from the
	// pending leaves, accepts a retry of the last batch, and refuses a gap.
	l2 := newTrillian(t, stack.Addr(), tree)
	if err := l2.Append(ctx, ref.size()+1, testLeaves("signer", int(ref.size())+1, 1)); !errors.Is(err, ErrGap) {
		t.Fatalf("Append past the pending leaves = %v, want ErrGap", err)
	}
	if err := l2.Append(ctx, ref.size()-20, ref.leaves[ref.size()-20:]); err != nil {
		t.Fatalf("retry of the last pending batch = %v", err)
	}
	batch := testLeaves("signer", int(ref.size()), 20)
	if err := l2.Append(ctx, ref.size(), batch); err != nil {
		t.Fatalf("Append after the pending leaves = %v", err)
	}
	ref.add(batch...)
	if err := l2.Append(ctx, 30, [][]byte{testLeaves("other", 30, 1)[0]}); !errors.Is(err, ErrConflict) {
		t.Fatalf("Append of a different leaf at 30 = %v, want ErrConflict", err)
	}

	stack.StartSigner()
	for _, l := range []*TrillianLog{l, l2} {
		if err := l.WaitIntegrated(ctx, ref.size()); err != nil {
			t.Fatalf("WaitIntegrated(%d) after the signer restarted = %v", ref.size(), err)
		}
		assertRoot(t, l, ref)
		assertConsistency(t, l, ref, integrated, ref.size())
		assertInclusion(t, l, ref, integrated+5, ref.size())
	}
	for i, want := range ref.leaves {
		if got, err := l2.Leaf(ctx, uint64(i)); err != nil || string(got) != string(want) {
			t.Fatalf("Leaf(%d) = %q, %v; want %q", i, got, err, want)
		}
	}
}

// TestTrillianLyingServer puts a client interceptor between TrillianLog and
// a real server that alters answers: nothing altered reaches a caller.
func TestTrillianLyingServer(t *testing.T) {
	addr, _ := testenv.Trillian(t)
	const n = 10
	fakeRoot := func(size uint64, hash []byte) *trillian.SignedLogRoot {
		b, err := (&types.LogRootV1{TreeSize: size, RootHash: hash}).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return &trillian.SignedLogRoot{LogRoot: b}
	}
	flip := func(b []byte) []byte {
		b = slices.Clone(b)
		b[0] ^= 1
		return b
	}
	tests := []struct {
		name string
		// lie alters a reply of method; ref holds the n leaves appended.
		lie   func(ref *refTree, method string, reply any)
		check func(t *testing.T, ctx context.Context, l *TrillianLog) error
		want  error // nil: want a *VerificationError
	}{{
		name: "inclusion proof hash",
		lie: func(_ *refTree, method string, reply any) {
			if r, ok := reply.(*trillian.GetEntryAndProofResponse); ok && r.Proof != nil {
				r.Proof.Hashes[1] = flip(r.Proof.Hashes[1])
			}
		},
		check: func(t *testing.T, ctx context.Context, l *TrillianLog) error {
			_, err := l.InclusionProof(ctx, 3, n)
			return err
		},
	}, {
		name: "leaf value",
		lie: func(_ *refTree, method string, reply any) {
			if r, ok := reply.(*trillian.GetEntryAndProofResponse); ok && r.Leaf != nil {
				r.Leaf.LeafValue = flip(r.Leaf.LeafValue)
			}
		},
		check: func(t *testing.T, ctx context.Context, l *TrillianLog) error {
			_, err := l.Leaf(ctx, 4)
			return err
		},
	}, {
		name: "consistency proof hash",
		lie: func(_ *refTree, method string, reply any) {
			if r, ok := reply.(*trillian.GetConsistencyProofResponse); ok && r.Proof != nil {
				r.Proof.Hashes[0] = flip(r.Proof.Hashes[0])
			}
		},
		check: func(t *testing.T, ctx context.Context, l *TrillianLog) error {
			_, err := l.ConsistencyProof(ctx, 3, n)
			return err
		},
	}, {
		name: "behind: inclusion",
		lie: func(ref *refTree, method string, reply any) {
			if r, ok := reply.(*trillian.GetEntryAndProofResponse); ok {
				r.SignedLogRoot, r.Proof, r.Leaf = fakeRoot(5, ref.rootAt(5)), nil, nil
			}
		},
		check: func(t *testing.T, ctx context.Context, l *TrillianLog) error {
			_, err := l.InclusionProof(ctx, 3, n)
			return err
		},
		want: ErrNotIntegrated,
	}, {
		name: "behind: inclusion proof for a smaller tree",
		lie: func(ref *refTree, method string, reply any) {
			if r, ok := reply.(*trillian.GetEntryAndProofResponse); ok {
				// What Trillian itself answers for a size beyond its tree.
				r.SignedLogRoot, r.Proof.Hashes = fakeRoot(5, ref.rootAt(5)), ref.inclusion(3, 5)
			}
		},
		check: func(t *testing.T, ctx context.Context, l *TrillianLog) error {
			_, err := l.InclusionProof(ctx, 3, n)
			return err
		},
		want: ErrNotIntegrated,
	}, {
		name: "behind: consistency",
		lie: func(ref *refTree, method string, reply any) {
			if r, ok := reply.(*trillian.GetConsistencyProofResponse); ok {
				r.SignedLogRoot, r.Proof = fakeRoot(5, ref.rootAt(5)), nil
			}
		},
		check: func(t *testing.T, ctx context.Context, l *TrillianLog) error {
			_, err := l.ConsistencyProof(ctx, 2, n)
			return err
		},
		want: ErrNotIntegrated,
	}, {
		name: "forked root at the same size",
		lie: func(ref *refTree, method string, reply any) {
			if r, ok := reply.(*trillian.GetLatestSignedLogRootResponse); ok {
				r.SignedLogRoot = fakeRoot(n, flip(ref.rootAt(n)))
			}
		},
		check: func(t *testing.T, ctx context.Context, l *TrillianLog) error {
			_, _, err := l.Root(ctx)
			return err
		},
	}, {
		name: "forged larger root",
		lie: func(ref *refTree, method string, reply any) {
			if r, ok := reply.(*trillian.GetLatestSignedLogRootResponse); ok {
				r.SignedLogRoot = fakeRoot(n+5, flip(ref.rootAt(n+5)))
			}
		},
		check: func(t *testing.T, ctx context.Context, l *TrillianLog) error {
			// n+6: the log may already have accepted the real root at
			// n+5, then the forged one is a fork at the same size.
			return l.WaitIntegrated(ctx, n+6)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			tree := testenv.NewTrillianTree(t, addr)
			ref := &refTree{}
			var mu sync.Mutex
			lying := false
			intercept := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoker(ctx, method, req, reply, cc, opts...)
				mu.Lock()
				defer mu.Unlock()
				if err == nil && lying {
					tt.lie(ref, method, reply)
				}
				return err
			}
			l := newTrillian(t, addr, tree, grpc.WithUnaryInterceptor(intercept))
			appendAndWait(t, l, 0, testLeaves("lie", 0, n))
			ref.add(testLeaves("lie", 0, n)...)
			// Make the n+5 leaves real on the server (through an honest
			// client), so that the forged larger root has a size to forge.
			honest := newTrillian(t, addr, tree)
			appendAndWait(t, honest, n, testLeaves("lie", n, 5))
			ref.add(testLeaves("lie", n, 5)...)

			mu.Lock()
			lying = true
			mu.Unlock()
			err := tt.check(t, ctx, l)
			var verr *VerificationError
			switch {
			case tt.want == nil && !errors.As(err, &verr):
				t.Fatalf("got %v, want a *VerificationError", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			t.Logf("%v", err)
		})
	}
}

// BenchmarkTrillianAppend measures events/s into Trillian, counting until
// they are integrated, for several batch sizes.
func BenchmarkTrillianAppend(b *testing.B) {
	for _, batch := range []int{1, 10, 100, 1000} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			addr, tree := testenv.Trillian(b)
			l := newTrillian(b, addr, tree)
			ctx := context.Background()
			leaves := testLeaves("bench", 0, 1<<14)
			var size uint64
			start := time.Now()
			for b.Loop() {
				chunk := make([][]byte, batch)
				for i := range chunk {
					// The identity hash binds the index, so repeated bytes
					// at other indices are fine.
					chunk[i] = leaves[(int(size)+i)%len(leaves)]
				}
				if err := l.Append(ctx, size, chunk); err != nil {
					b.Fatal(err)
				}
				size += uint64(batch)
			}
			if err := l.WaitIntegrated(ctx, size); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(size)/time.Since(start).Seconds(), "events/s")
		})
	}
}

// BenchmarkTrillianAppendToProof measures the time from Append to a verified
// inclusion proof (WaitIntegrated, Root, InclusionProof of the batch's last
// leaf), as p50 and p95, while one sequencer appends batches of a given size
// back to back; events/s is the throughput reached meanwhile.
func BenchmarkTrillianAppendToProof(b *testing.B) {
	for _, batch := range []int{1, 10, 100} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			addr, tree := testenv.Trillian(b)
			l := newTrillian(b, addr, tree)
			ctx := context.Background()
			var (
				mu        sync.Mutex
				latencies []time.Duration
				wg        sync.WaitGroup
			)
			leaves := testLeaves("latency", 0, 1<<14)
			var size uint64
			start := time.Now()
			for b.Loop() {
				chunk := make([][]byte, batch)
				for i := range chunk {
					chunk[i] = leaves[(int(size)+i)%len(leaves)]
				}
				t0 := time.Now()
				if err := l.Append(ctx, size, chunk); err != nil {
					b.Fatal(err)
				}
				size += uint64(batch)
				last := size - 1
				wg.Go(func() {
					if err := l.WaitIntegrated(ctx, last+1); err != nil {
						b.Error(err)
						return
					}
					n, _, err := l.Root(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					if _, err := l.InclusionProof(ctx, last, n); err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					latencies = append(latencies, time.Since(t0))
					mu.Unlock()
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			slices.Sort(latencies)
			if len(latencies) > 0 {
				b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(latencies[len(latencies)*95/100].Microseconds())/1000, "p95-ms")
			}
			b.ReportMetric(float64(size)/elapsed.Seconds(), "events/s")
		})
	}
}
