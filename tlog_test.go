package lethe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

const witnessedOrigin = "lethe.test/witnessed"

// witnessedDir returns a data directory holding a fresh audit key named
// witnessedOrigin, and the key's verifier key, so that a witness can be
// told the log's key before lethe starts.
func witnessedDir(tb testing.TB) (dir, vkey string) {
	tb.Helper()
	dir = tb.TempDir()
	skey, vkey, err := proofs.GenerateKey(witnessedOrigin)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "audit.key"), []byte(skey+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return dir, vkey
}

func openWitnessed(tb testing.TB, dir string, threshold int, ws ...*testenv.LitewitnessServer) *lethe.DB {
	tb.Helper()
	cfg := lethe.Config{DataDir: dir, AuditOrigin: witnessedOrigin, ProofWait: 10 * time.Second, WitnessThreshold: threshold}
	for _, w := range ws {
		cfg.Witnesses = append(cfg.Witnesses, lethe.WitnessConfig{URL: w.URL, Key: w.Key, Timeout: 2 * time.Second})
	}
	db, err := lethe.Open(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

// eraseOne writes a grain for a new user and erases the user, returning
// the erasure's proof.
func eraseOne(tb testing.TB, db *lethe.DB, user string) *lethe.Erasure {
	tb.Helper()
	ctx := context.Background()
	if _, err := db.Add(ctx, lethe.Grain{Memory: "w", Type: "fact", Subject: "s", Relation: "r", Object: "o", UserID: user}); err != nil {
		tb.Fatal(err)
	}
	e, err := db.ForgetUser(ctx, "w", user)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// TestWitnessCosignsCheckpoints runs a real litewitness: every checkpoint
// lethe saves carries its cosignature, which proofs.Verify checks under
// the witness policy; the witness checked lethe's consistency proofs on
// the way (it refuses a checkpoint that does not extend the last one it
// cosigned), including after lethe restarts and no longer knows the
// witness's size.
func TestWitnessCosignsCheckpoints(t *testing.T) {
	dir, logKey := witnessedDir(t)
	w := testenv.StartLitewitness(t, "witness.test/w1", witnessedOrigin, logKey)
	db := openWitnessed(t, dir, 1, w)

	var last *lethe.Erasure
	for i := range 3 {
		e := eraseOne(t, db, fmt.Sprintf("user-%d", i))
		if e.Pending || e.Proof == nil {
			t.Fatalf("erasure %d pending with a working witness", i)
		}
		v, err := proofs.Verify(e.Proof, proofs.VerifyOptions{LogKey: logKey, Witnesses: []string{w.Key}, WitnessThreshold: 1})
		if err != nil {
			t.Fatalf("erasure %d: %v\ncheckpoint:\n%s", i, err, e.Proof.Checkpoint)
		}
		if len(v.Cosignatures) != 1 || v.Cosignatures[0].Witness != w.Key || time.Since(v.Cosignatures[0].Time) > time.Minute {
			t.Fatalf("erasure %d: cosignatures %+v", i, v.Cosignatures)
		}
		if !strings.Contains(e.Proof.Checkpoint, "\n— witness.test/w1 ") {
			t.Fatalf("checkpoint has no cosignature line:\n%s", e.Proof.Checkpoint)
		}
		// The erasure offers the same proof as a tlog-proof file, whose
		// checkpoint keeps the cosignature.
		tp, err := proofs.ParseTlogProof([]byte(e.TlogProof))
		if err != nil {
			t.Fatalf("erasure %d: tlog-proof: %v\n%s", i, err, e.TlogProof)
		}
		if _, err := proofs.Verify(tp, proofs.VerifyOptions{LogKey: logKey, Witnesses: []string{w.Key}, WitnessThreshold: 1}); err != nil {
			t.Fatalf("erasure %d: tlog-proof: %v", i, err)
		}
		last = e
	}
	served, err := db.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := proofs.OpenCheckpoint(served, logKey, "")
	if err != nil {
		t.Fatal(err)
	}
	// The checkpoint lethe serves (tlog-tiles' /checkpoint) carries the
	// cosignature too.
	wp, err := proofs.ParseWitnessPolicy([]string{w.Key}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wp.Check(served); err != nil {
		t.Errorf("served checkpoint: %v\n%s", err, served)
	}
	if got := w.TreeSize(t, witnessedOrigin); uint64(got) != c.Size {
		t.Errorf("witness has size %d, lethe's checkpoint %d", got, c.Size)
	}

	// Another witness's key, or a tampered cosignature, does not count.
	other := "witness.test/other+" + strings.SplitN(w.Key, "+", 3)[1] + "+" + strings.SplitN(w.Key, "+", 3)[2]
	if _, err := proofs.Verify(last.Proof, proofs.VerifyOptions{LogKey: logKey, Witnesses: []string{other}, WitnessThreshold: 1}); err == nil {
		t.Error("a key of another name verified the cosignature")
	}
	tampered := *last.Proof
	i := strings.Index(tampered.Checkpoint, "— witness.test/w1 ") + len("— witness.test/w1 ") + 20
	b := []byte(tampered.Checkpoint)
	b[i] = map[bool]byte{true: 'A', false: 'B'}[b[i] != 'A']
	tampered.Checkpoint = string(b)
	_, err = proofs.Verify(&tampered, proofs.VerifyOptions{LogKey: logKey, Witnesses: []string{w.Key}, WitnessThreshold: 1})
	if proofs.FailedCheck(err) != proofs.CheckWitness {
		t.Errorf("tampered cosignature: %v, want a %s failure", err, proofs.CheckWitness)
	}

	// Restart: the new process tells the witness size 0, is answered 409
	// with the size it knows, and resumes from there.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openWitnessed(t, dir, 1, w)
	defer db.Close()
	e := eraseOne(t, db, "after-restart")
	if e.Pending {
		t.Fatal("erasure after restart pending")
	}
	if _, err := proofs.Verify(e.Proof, proofs.VerifyOptions{LogKey: logKey, Witnesses: []string{w.Key}, WitnessThreshold: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestWitnessThresholdHoldsProofs stops the only witness: with threshold 1
// an erasure's proof stays pending (no checkpoint is saved without the
// cosignature), and becomes final once the witness is back.
func TestWitnessThresholdHoldsProofs(t *testing.T) {
	dir, logKey := witnessedDir(t)
	w := testenv.StartLitewitness(t, "witness.test/w1", witnessedOrigin, logKey)
	db := openWitnessed(t, dir, 1, w)
	defer db.Close()
	eraseOne(t, db, "before")
	w.Stop()

	ctx := context.Background()
	if _, err := db.Add(ctx, lethe.Grain{Memory: "w", Type: "fact", Subject: "s", Relation: "r", Object: "o", UserID: "held"}); err != nil {
		t.Fatal(err)
	}
	e, err := db.ForgetUser(ctx, "w", "held")
	if err != nil {
		t.Fatal(err)
	}
	if !e.Pending || e.Proof != nil {
		t.Fatalf("erasure with the witness down: pending %v, proof %v; want pending", e.Pending, e.Proof != nil)
	}
	// The same witness, restarted on the same database and address.
	w2 := w.Restart(t)
	deadline := time.Now().Add(time.Minute)
	for {
		p, err := db.ProofByEvent(ctx, e.EventID)
		if err == nil {
			if _, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: logKey, Witnesses: []string{w2.Key}, WitnessThreshold: 1}); err != nil {
				t.Fatal(err)
			}
			break
		}
		if lethe.ErrorCode(err) != "pending" || time.Now().After(deadline) {
			t.Fatalf("proof after the witness came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !bytes.Contains([]byte(e.Leaf), []byte(`"type":"key.erase"`)) {
		t.Errorf("leaf %s is not a key.erase event", e.Leaf)
	}
}

// BenchmarkEraseWitnessed measures an erasure until its proof is final
// (ForgetUser returns with the proof), on SQLite, with no witness and with
// one real litewitness that must cosign (threshold 1): the difference is
// what cosigning costs each erasure (one add-checkpoint round trip with a
// consistency proof, and litewitness's SQLite write and ssh-agent signature).
func BenchmarkEraseWitnessed(b *testing.B) {
	for _, witnessed := range []bool{false, true} {
		name := "no-witness"
		if witnessed {
			name = "litewitness"
		}
		b.Run(name, func(b *testing.B) {
			dir, logKey := witnessedDir(b)
			var db *lethe.DB
			if witnessed {
				w := testenv.StartLitewitness(b, "witness.test/bench", witnessedOrigin, logKey)
				db = openWitnessed(b, dir, 1, w)
			} else {
				db = openWitnessed(b, dir, 0)
			}
			defer db.Close()
			ctx := context.Background()
			eraseOne(b, db, "warm-up")
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				user := fmt.Sprintf("user-%d", i)
				if _, err := db.Add(ctx, lethe.Grain{Memory: "w", Type: "fact", Subject: "s", Relation: "r", Object: "o", UserID: user}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				e, err := db.ForgetUser(ctx, "w", user)
				if err != nil || e.Pending {
					b.Fatalf("ForgetUser: %v (pending %v)", err, e != nil && e.Pending)
				}
			}
		})
	}
}

// TestTorchwoodVerifiesErasureProof checks an erasure's tlog-proof with
// third-party code only: torchwood's VerifyProof under a Sigsum-style
// policy naming lethe's log key and a real litewitness, with the record
// hash computed from the leaf the proof's extra data carries.
func TestTorchwoodVerifiesErasureProof(t *testing.T) {
	dir, logKey := witnessedDir(t)
	w := testenv.StartLitewitness(t, "witness.test/w1", witnessedOrigin, logKey)
	db := openWitnessed(t, dir, 1, w)
	defer db.Close()
	e := eraseOne(t, db, "torchwood")

	extra, err := torchwood.ProofExtraData([]byte(e.TlogProof))
	if err != nil {
		t.Fatal(err)
	}
	var fields struct{ Leaf []byte }
	if err := json.Unmarshal(extra, &fields); err != nil || len(fields.Leaf) == 0 {
		t.Fatalf("extra data %s: %v", extra, err)
	}
	policy := func(witnessKey string) torchwood.Policy {
		p, err := torchwood.ParsePolicy([]byte("log " + logKey + "\nwitness w1 " + witnessKey + "\nquorum w1\n"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := torchwood.VerifyProof(policy(w.Key), tlog.RecordHash(fields.Leaf), []byte(e.TlogProof)); err != nil {
		t.Fatalf("torchwood.VerifyProof: %v\n%s", err, e.TlogProof)
	}
	// The same proof under a policy naming a witness that did not cosign,
	// or for another leaf, fails.
	other := testenv.StartLitewitness(t, "witness.test/w2", witnessedOrigin, logKey)
	if err := torchwood.VerifyProof(policy(other.Key), tlog.RecordHash(fields.Leaf), []byte(e.TlogProof)); err == nil {
		t.Error("verified under a policy whose witness did not cosign")
	}
	if err := torchwood.VerifyProof(policy(w.Key), tlog.RecordHash([]byte("another leaf")), []byte(e.TlogProof)); err == nil {
		t.Error("verified another leaf")
	}
}
