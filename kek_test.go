package lethe_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/proofs"
)

// TestLocalKEKRotation rotates the embedded age KEK: every live data key is
// rewrapped under a new identity, the old identity leaves the data
// directory, a wrapped key copied before the rotation no longer unwraps,
// the store keeps working, and the erasure's proof together with the trim
// event's proof shows finality.
func TestLocalKEKRotation(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, lethe.Config{DataDir: dir})
	ctx := context.Background()
	john, jane, _ := population(t, db)
	oldKEK, err := os.ReadFile(filepath.Join(dir, "kek.age"))
	if err != nil {
		t.Fatal(err)
	}
	er, err := db.ForgetUser(ctx, "", "john")
	if err != nil {
		t.Fatal(err)
	}
	if er.KEKVersion != 1 || er.Proof == nil {
		t.Fatalf("erasure kek_version %d (proof %v), want 1", er.KEKVersion, er.Proof != nil)
	}
	backup := wrappedKeys(t, dir)
	if len(backup) == 0 {
		t.Fatal("no keys")
	}

	rot, err := db.RotateKEK(ctx, lethe.RotateOptions{Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rot.KEK != "age-local" || rot.Version != 2 || rot.TrimmedBelow != 2 || rot.Rewrapped != len(backup) || rot.Trim == nil || rot.Trim.Proof == nil {
		t.Fatalf("rotation %+v, want %d keys rewrapped to version 2 and a trim proof", rot, len(backup))
	}

	// The identity file: mode 0600, the new identity only.
	st, err := os.Stat(filepath.Join(dir, "kek.age"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("kek.age mode %v, want 0600", st.Mode().Perm())
	}
	var oldID string
	for _, line := range strings.Split(string(oldKEK), "\n") {
		if strings.HasPrefix(line, "AGE-SECRET-KEY-") {
			oldID = line
		}
	}
	if oldID == "" {
		t.Fatal("no identity in the old kek.age")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if bytes.Contains(b, []byte(oldID)) || bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(oldID))) {
			t.Errorf("%s still holds the trimmed identity", filepath.Base(f))
		}
	}

	// A copy made before (a backup) no longer unwraps, with the KEK as the
	// data dir holds it now; the live keys do.
	kek, err := keys.LoadOrCreateAgeIdentity(filepath.Join(dir, "kek.age"))
	if err != nil {
		t.Fatal(err)
	}
	now := wrappedKeys(t, dir)
	for id, old := range backup {
		if bytes.Equal(now[id], old) {
			t.Errorf("key %d was not rewrapped", id)
		}
		if _, err := kek.Unwrap(ctx, keys.Ref{}, old); err == nil {
			t.Errorf("the copy of key %d made before the rotation still unwraps", id)
		}
		if v, ok := kek.KEKVersion(now[id]); !ok || v != 2 {
			t.Errorf("key %d is under KEK version %d, want 2", id, v)
		}
		if _, err := kek.Unwrap(ctx, keys.Ref{}, now[id]); err != nil {
			t.Errorf("the rewrapped key %d does not unwrap: %v", id, err)
		}
	}
	// The store keeps working, in this process and in a fresh one.
	if !readable(t, db, jane[0]) || readable(t, db, john[0]) {
		t.Error("after rotation: jane's grain unreadable or john's readable")
	}
	mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "after", Relation: "r", Object: "o", UserID: "newcomer"})
	db.Close()
	fresh := openDB(t, lethe.Config{DataDir: dir})
	if !readable(t, fresh, jane[0]) {
		t.Error("a fresh instance cannot read after rotation")
	}

	// Finality: the erasure (version 1) and the trim (versions below 2
	// destroyed), with a consistency proof between their checkpoints.
	tp := rot.Trim.Proof
	cons, err := fresh.Consistency(ctx, er.Proof.TreeSize, tp.TreeSize)
	if err != nil {
		t.Fatal(err)
	}
	tp.SetConsistency(cons.From, cons.Hashes)
	f, err := proofs.VerifyFinality(er.Proof, tp, proofs.VerifyOptions{LogKey: fresh.AuditKey()})
	if err != nil {
		t.Fatalf("VerifyFinality: %v", err)
	}
	if f.ErasureKEKVersion != 1 || f.TrimMinVersion != 2 || f.KEK != "age-local" {
		t.Errorf("finality %+v", f)
	}
	// An erasure after the rotation is under version 2: the trim does not
	// cover it.
	er2, err := fresh.ForgetUser(ctx, "", "jane")
	if err != nil {
		t.Fatal(err)
	}
	if er2.KEKVersion != 2 {
		t.Errorf("erasure after rotation: kek_version %d, want 2", er2.KEKVersion)
	}
}

// TestScheduledKEKRotation: a policy with kek.rotate_every rotates the KEK
// on its schedule (the first run is due at start), with both audit events.
func TestScheduledKEKRotation(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, lethe.Config{DataDir: dir})
	_, jane, _ := population(t, db)
	sched := openDB(t, lethe.Config{DataDir: dir, Policy: policy(t, "kek:\n  rotate_every: 24h\n  keep: 1\n"), Schedule: true})
	eventually(t, "scheduled rotation", func() bool {
		return len(leaves(t, sched, proofs.EventKEKTrim, "")) == 1
	})
	rot := leaves(t, sched, proofs.EventKEKRotate, "")
	trim := leaves(t, sched, proofs.EventKEKTrim, "")
	if len(rot) != 1 || *rot[0].KEKVersion != 2 || *trim[0].KEKMinVersion != 2 || trim[0].KEK != "age-local" || trim[0].Memory != "" {
		t.Fatalf("rotate %+v, trim %+v", rot, trim)
	}
	for id, w := range wrappedKeys(t, dir) {
		if v, _, _ := keys.AgeKEKVersion(w); v != 2 {
			t.Errorf("key %d under KEK version %d after the scheduled rotation", id, v)
		}
	}
	if !readable(t, sched, jane[0]) {
		t.Error("unreadable after the scheduled rotation")
	}
}
