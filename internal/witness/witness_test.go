package witness

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// memLog is an in-memory RFC 6962 tree: the log the witnesses see.
type memLog struct{ hashes [][]byte }

func (m *memLog) add(n int) {
	for range n {
		h := sha256.Sum256([]byte{byte(len(m.hashes))})
		m.hashes = append(m.hashes, rfc6962.DefaultHasher.HashLeaf(h[:]))
	}
}

func (m *memLog) root(size uint64) [32]byte {
	rf := &compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}
	r := rf.NewEmptyRange(0)
	for _, h := range m.hashes[:size] {
		r.Append(h, nil)
	}
	root, _ := r.GetRootHash(nil)
	var out [32]byte
	copy(out[:], root)
	return out
}

func (m *memLog) ConsistencyProof(_ context.Context, from, to uint64) ([][]byte, error) {
	nodes, err := proof.Consistency(from, to)
	if err != nil {
		return nil, err
	}
	hashes := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		hashes[i] = m.node(id)
	}
	return nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
}

func (m *memLog) node(id compact.NodeID) []byte {
	if id.Level == 0 {
		return m.hashes[id.Index]
	}
	return rfc6962.DefaultHasher.HashChildren(m.node(compact.NewNodeID(id.Level-1, 2*id.Index)),
		m.node(compact.NewNodeID(id.Level-1, 2*id.Index+1)))
}

// TestPool submits a growing log's checkpoints to two real litewitnesses,
// one of which goes away: the pool keeps what verifies and enforces its
// threshold.
func TestPool(t *testing.T) {
	const origin = "lethe.test/pool"
	skey, vkey, err := proofs.GenerateKey(origin)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := proofs.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	w1 := testenv.StartLitewitness(t, "witness.test/p1", origin, vkey)
	w2 := testenv.StartLitewitness(t, "witness.test/p2", origin, vkey)
	log := &memLog{}
	newPool := func(threshold int) *Pool {
		p, err := NewPool(PoolConfig{Witnesses: []Config{{URL: w1.URL, Key: w1.Key}, {URL: w2.URL + "/", Key: w2.Key}},
			Threshold: threshold, Prover: log, Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	sign := func(size uint64) []byte {
		n, err := signer.SignCheckpoint(proofs.Checkpoint{Origin: origin, Size: size, Hash: log.root(size)})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx := context.Background()
	policy, err := proofs.ParseWitnessPolicy([]string{w1.Key, w2.Key}, 2)
	if err != nil {
		t.Fatal(err)
	}

	pool := newPool(2)
	for _, grow := range []int{1, 2, 5, 9} {
		log.add(grow)
		size := uint64(len(log.hashes))
		note, n, err := pool.Cosign(ctx, sign(size), size)
		if err != nil || n != 2 {
			t.Fatalf("size %d: Cosign = %d, %v", size, n, err)
		}
		if _, err := policy.Check(note); err != nil {
			t.Fatalf("size %d: %v\n%s", size, err, note)
		}
	}
	if got := w1.TreeSize(t, origin); got != int64(len(log.hashes)) {
		t.Fatalf("witness 1 is at %d, the log at %d", got, len(log.hashes))
	}

	// A new pool (a restarted lethe) starts from size 0 and catches up
	// through the witnesses' 409 answers.
	log.add(3)
	size := uint64(len(log.hashes))
	if _, n, err := newPool(2).Cosign(ctx, sign(size), size); err != nil || n != 2 {
		t.Fatalf("new pool: Cosign = %d, %v", n, err)
	}

	// A checkpoint that does not extend what the witnesses saw (same
	// size, another root) is refused by both.
	forked := &memLog{hashes: append([][]byte{}, log.hashes...)}
	forked.hashes[0] = make([]byte, 32)
	forkedNote, err := forked.signed(t, signer, origin)
	if err != nil {
		t.Fatal(err)
	}
	if _, got, err := newPool(0).Cosign(ctx, forkedNote, size); err != nil || got != 0 {
		t.Fatalf("forked checkpoint: %d cosignatures, %v; want 0", got, err)
	}

	// One witness down: threshold 1 still cosigns, threshold 2 fails.
	w2.Stop()
	log.add(1)
	size = uint64(len(log.hashes))
	note, got, err := newPool(1).Cosign(ctx, sign(size), size)
	if err != nil || got != 1 || !strings.Contains(string(note), "— witness.test/p1 ") {
		t.Fatalf("one witness down, threshold 1: %d, %v", got, err)
	}
	log.add(1)
	size = uint64(len(log.hashes))
	if _, got, err := pool.Cosign(ctx, sign(size), size); err == nil || got != 1 {
		t.Fatalf("one witness down, threshold 2: %d, %v; want 1 and an error", got, err)
	}
	if _, err := NewPool(PoolConfig{Witnesses: []Config{{URL: "ftp://x", Key: w1.Key}}}); err == nil {
		t.Error("a non-HTTP URL was accepted")
	}
	if _, err := NewPool(PoolConfig{Witnesses: []Config{{URL: w1.URL, Key: vkey}}}); err == nil {
		t.Error("a log key was accepted as a witness key")
	}
}

func (m *memLog) signed(t *testing.T, s *proofs.Signer, origin string) ([]byte, error) {
	t.Helper()
	size := uint64(len(m.hashes))
	return s.SignCheckpoint(proofs.Checkpoint{Origin: origin, Size: size, Hash: m.root(size)})
}

// tWriter sends the pool's log to the test's.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
