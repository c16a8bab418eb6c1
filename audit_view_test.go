package lethe_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/proofs"
)

// onlyMemory is a view filter for a reader of memory m: its leaves and
// those that name no memory.
func onlyMemory(m string) func(*proofs.Leaf) bool {
	return func(l *proofs.Leaf) bool { return l.Memory == m || l.Memory == "" }
}

// errText is err's code and text with every occurrence of id replaced by
// ID: two answers about different ids compare equal when only the id
// differs.
func errText(err error, id string) string {
	if err == nil {
		return "<nil>"
	}
	if id == "" {
		return string(lethe.ErrorCode(err)) + " " + err.Error()
	}
	return string(lethe.ErrorCode(err)) + " " + strings.ReplaceAll(err.Error(), id, "ID")
}

// TestAuditViewHidesLeaves: a view answers, for a leaf its filter refuses,
// what it answers for an index or event id that names no leaf, by index
// (Proof, AuditEntry) and by event (ProofByEvent); the leaves it accepts,
// those that name no memory included, it proves as DB does.
func TestAuditViewHidesLeaves(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		mustAdd(t, db, lethe.Grain{Memory: "mem-a", Type: "fact", Subject: "s", Object: "a", UserID: "u-a"})
		mustAdd(t, db, lethe.Grain{Memory: "mem-b", Type: "fact", Subject: "s", Object: "b", UserID: "u-b"})
		eb, err := db.ForgetUser(ctx, "mem-b", "u-b")
		if err != nil || eb.Pending {
			t.Fatalf("ForgetUser: %v (pending %v)", err, eb != nil && eb.Pending)
		}
		if _, err := db.RotateKEK(ctx, lethe.RotateOptions{}); err != nil {
			t.Fatal(err)
		}
		leaves, err := db.AuditLeaves(ctx)
		if err != nil {
			t.Fatal(err)
		}
		size := uint64(len(leaves))
		for {
			p, err := db.Proof(ctx, size-1, 0)
			if err == nil && p.TreeSize == size {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		view := db.AuditView(onlyMemory("mem-a"))
		var seen = map[string]int{}
		for i, b := range leaves {
			l, err := proofs.ParseLeaf(b)
			if err != nil {
				t.Fatal(err)
			}
			index := uint64(i)
			p, perr := view.Proof(ctx, index, 0)
			e, eerr := view.AuditEntry(ctx, index)
			q, qerr := view.ProofByEvent(ctx, l.ID)
			if l.Memory == "mem-b" {
				seen["hidden"]++
				want := fmt.Sprintf("not_found no audit event at index %d", index)
				if got := errText(perr, ""); got != want || p != nil {
					t.Errorf("Proof(%d) of a hidden leaf: %s, want %s", index, got, want)
				}
				if got := errText(eerr, ""); got != want || e != nil {
					t.Errorf("AuditEntry(%d) of a hidden leaf: %s, want %s", index, got, want)
				}
				// What an index the log has no leaf at answers.
				beyond := size + uint64(i)
				_, berr := view.Proof(ctx, beyond, 0)
				_, bentry := view.AuditEntry(ctx, beyond+1000)
				if errText(berr, fmt.Sprint(beyond)) != errText(perr, fmt.Sprint(index)) ||
					errText(bentry, fmt.Sprint(beyond+1000)) != errText(eerr, fmt.Sprint(index)) {
					t.Errorf("beyond the log: %v, %v; a hidden leaf: %v, %v", berr, bentry, perr, eerr)
				}
				unknown := strings.Repeat("0", 32)
				_, uerr := view.ProofByEvent(ctx, unknown)
				if errText(qerr, l.ID) != errText(uerr, unknown) || q != nil {
					t.Errorf("ProofByEvent of a hidden event: %v; of an unknown one: %v", qerr, uerr)
				}
				continue
			}
			if l.Memory == "" {
				seen["memoryless"]++
			} else {
				seen["shown"]++
			}
			if perr != nil || eerr != nil || qerr != nil {
				t.Fatalf("leaf %d (%s, memory %q): %v, %v, %v", index, l.Type, l.Memory, perr, eerr, qerr)
			}
			if _, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: db.AuditKey()}); err != nil || string(e.Leaf) != string(b) || q.LeafIndex != index {
				t.Errorf("leaf %d: %v", index, err)
			}
		}
		if seen["hidden"] == 0 || seen["shown"] == 0 || seen["memoryless"] == 0 {
			t.Fatalf("the log's leaves: %v, want some of each", seen)
		}
		// The whole log: DB's methods and a nil filter show every leaf.
		if _, err := db.AuditView(nil).ProofByEvent(ctx, eb.EventID); err != nil {
			t.Errorf("unfiltered view: %v", err)
		}
		if _, err := db.Proof(ctx, size-1, 0); err != nil {
			t.Errorf("DB.Proof: %v", err)
		}
	})
}

// TestAuditViewHidesPending: an event no signed checkpoint covers yet (the
// log's only witness never answers) is pending for a view that shows it,
// and answers as an unknown event id for one that does not.
func TestAuditViewHidesPending(t *testing.T) {
	ctx := context.Background()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	// Not openDB: its cleanup drains the outbox into a checkpoint, which
	// the witness never cosigns.
	db, err := lethe.Open(ctx, lethe.Config{DataDir: t.TempDir(), ProofWait: 100 * time.Millisecond, WitnessThreshold: 1,
		Witnesses: []lethe.WitnessConfig{{URL: down.URL, Key: witnessKey("witness.test/down"), Timeout: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	mustAdd(t, db, lethe.Grain{Memory: "mem-b", Type: "fact", Subject: "s", Object: "b", UserID: "u-b"})
	e, err := db.ForgetUser(ctx, "mem-b", "u-b")
	if err != nil || !e.Pending {
		t.Fatalf("ForgetUser with the witness down: %v (pending %v)", err, e != nil && e.Pending)
	}
	if _, err := db.AuditView(onlyMemory("mem-b")).ProofByEvent(ctx, e.EventID); lethe.ErrorCode(err) != lethe.CodePending {
		t.Errorf("the event's own memory: %v, want pending", err)
	}
	unknown := strings.Repeat("1", 32)
	_, uerr := db.AuditView(onlyMemory("mem-b")).ProofByEvent(ctx, unknown)
	_, herr := db.AuditView(onlyMemory("mem-a")).ProofByEvent(ctx, e.EventID)
	if errText(herr, e.EventID) != errText(uerr, unknown) {
		t.Errorf("a hidden pending event: %v; an unknown one: %v", herr, uerr)
	}
}

// witnessKey is a cosignature/v1 verifier key named name
// (c2sp.org/tlog-cosignature) for a witness that never signs.
func witnessKey(name string) string {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	key := append([]byte{0x04}, priv.Public().(ed25519.PublicKey)...)
	h := sha256.Sum256(append([]byte(name+"\n"), key...))
	return fmt.Sprintf("%s+%x+%s", name, h[:4], base64.StdEncoding.EncodeToString(key))
}
