package lethe_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// trillianDB opens a store on PostgreSQL whose audit log is a fresh
// Trillian PREORDERED_LOG tree.
func trillianDB(t *testing.T, keyFile string) *lethe.DB {
	t.Helper()
	addr, tree := testenv.Trillian(t)
	return openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: testenv.Postgres(t),
		TrillianAddr: addr, TrillianTreeID: tree, AuditKeyFile: keyFile, ProofWait: 10 * time.Second})
}

// TestTrillianErasureProofs runs erasures with Trillian as the audit log:
// proofs come back complete and verify offline.
func TestTrillianErasureProofs(t *testing.T) {
	db := trillianDB(t, filepath.Join(t.TempDir(), "audit.key"))
	ctx := context.Background()
	population(t, db)
	er, err := db.ForgetUser(ctx, "", "john")
	if err != nil {
		t.Fatal(err)
	}
	if er.Pending || er.Proof == nil {
		t.Fatalf("erasure with Trillian: pending=%v", er.Pending)
	}
	nonce, _ := hex.DecodeString(er.SubjectNonce)
	if _, err := proofs.Verify(er.Proof, proofs.VerifyOptions{LogKey: db.AuditKey(), Subject: "john", Nonce: nonce}); err != nil {
		t.Fatalf("verify: %v", err)
	}
	res, err := db.Forget(ctx, lethe.Selector{Subject: "subj-jane"})
	if err != nil || res.Proof == nil {
		t.Fatalf("forget: %v %+v", err, res)
	}
	cons, err := db.Consistency(ctx, er.Proof.TreeSize, res.Proof.TreeSize)
	if err != nil {
		t.Fatal(err)
	}
	res.Proof.SetConsistency(cons.From, cons.Hashes)
	if _, err := proofs.Verify(res.Proof, proofs.VerifyOptions{LogKey: db.AuditKey(), Pinned: []byte(er.Proof.Checkpoint)}); err != nil {
		t.Errorf("consistency across Trillian checkpoints: %v", err)
	}
}

// TestEmbeddedTrillianConformance replays one event stream into the
// embedded log and into Trillian, with the same signing key: the signed
// checkpoints and the proofs are identical byte for byte.
func TestEmbeddedTrillianConformance(t *testing.T) {
	ctx := context.Background()
	keyFile := filepath.Join(t.TempDir(), "audit.key")
	embedded := openDB(t, lethe.Config{DataDir: t.TempDir(), AuditKeyFile: keyFile})
	trill := trillianDB(t, keyFile)
	var stream [][]byte
	for i := range 37 {
		n := uint64(i)
		l := proofs.Leaf{V: proofs.LeafVersion, ID: fmt.Sprintf("%032x", i+1), Type: proofs.EventGrainPurge, Memory: "default",
			Time: time.Date(2026, 11, 21, 10, 0, i, 0, time.UTC), Actor: "local", Count: &n,
			Digest: proofs.HashesDigest([]string{fmt.Sprintf("%064x", i)})}
		b, err := l.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, b)
	}
	// Feed in uneven batches to both.
	for _, cut := range [][2]int{{0, 1}, {1, 8}, {8, 20}, {20, 37}} {
		for _, db := range []*lethe.DB{embedded, trill} {
			if err := db.AppendRawEvents(ctx, stream[cut[0]:cut[1]]); err != nil {
				t.Fatal(err)
			}
		}
	}
	a, err := embedded.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := trill.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("signed checkpoints differ:\n%s\n%s", a, b)
	}
	for _, idx := range []uint64{0, 7, 19, 36} {
		pa, err := embedded.Proof(ctx, idx, 37)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := trill.Proof(ctx, idx, 37)
		if err != nil {
			t.Fatal(err)
		}
		ja, _ := pa.Marshal()
		jb, _ := pb.Marshal()
		if !bytes.Equal(ja, jb) {
			t.Errorf("proofs of leaf %d differ", idx)
		}
	}
	for _, sizes := range [][2]uint64{{1, 37}, {8, 20}, {20, 37}} {
		ca, err := embedded.Consistency(ctx, sizes[0], sizes[1])
		if err != nil {
			t.Fatal(err)
		}
		cb, err := trill.Consistency(ctx, sizes[0], sizes[1])
		if err != nil {
			t.Fatal(err)
		}
		ja, _ := ca.Marshal()
		jb, _ := cb.Marshal()
		if !bytes.Equal(ja, jb) {
			t.Errorf("consistency proofs %v differ", sizes)
		}
	}
}

// TestTrillianDownQueuesEvents stops the Trillian log server while
// erasures happen: they commit and return pending receipts, their events
// wait in the outbox, and once Trillian is back every event is appended,
// once, and its proof verifies.
func TestTrillianDownQueuesEvents(t *testing.T) {
	stack := testenv.StartTrillian(t)
	ctx := context.Background()
	db := openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: testenv.Postgres(t),
		TrillianAddr: stack.Addr(), TrillianTreeID: stack.NewTree(t), ProofWait: 300 * time.Millisecond})
	population(t, db)
	stack.StopServer()
	var pending []*lethe.Erasure
	for _, scope := range []string{"acme/dev", "acme/prod/bot1"} {
		er, err := db.EraseScope(ctx, "", scope)
		if err != nil {
			t.Fatalf("erase with Trillian down: %v", err)
		}
		if !er.Pending || er.Proof != nil {
			t.Fatalf("erase with Trillian down returned a proof")
		}
		if _, err := proofs.ParseLeaf(er.Leaf); err != nil {
			t.Fatalf("the pending receipt's leaf: %v", err)
		}
		pending = append(pending, er)
	}
	if n := recallCount(t, db, lethe.Query{Scope: "acme/dev"}); n != 0 {
		t.Errorf("the erase did not take effect while Trillian was down: %d grains", n)
	}
	stack.StartServer()
	deadline := time.Now().Add(60 * time.Second)
	for _, er := range pending {
		for {
			p, err := db.ProofByEvent(ctx, er.EventID)
			if err == nil {
				if _, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: db.AuditKey()}); err != nil {
					t.Errorf("proof after recovery: %v", err)
				}
				break
			}
			if lethe.ErrorCode(err) != "pending" || time.Now().After(deadline) {
				t.Fatalf("proof after Trillian came back: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	leaves, err := db.AuditLeaves(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, b := range leaves {
		l, _ := proofs.ParseLeaf(b)
		seen[l.ID]++
	}
	for _, er := range pending {
		if seen[er.EventID] != 1 {
			t.Errorf("event %s appears %d times in the log", er.EventID, seen[er.EventID])
		}
	}
}
