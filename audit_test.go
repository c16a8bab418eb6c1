package lethe_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// allLeaves collects every audit leaf the tests' stores wrote; TestMain
// checks them for personal data once all tests ran.
var allLeaves struct {
	sync.Mutex
	leaves [][]byte
	// opened counts stores the tests opened (benchmarks open none).
	opened int
	// personal are values tests used as subjects, objects, contents and user ids.
	personal []string
}

func collectLeaves(t testing.TB, db *lethe.DB) {
	leaves, err := db.AuditLeaves(context.Background())
	if errors.Is(err, lethe.ErrClosed) {
		return // the test closed it itself, after collecting
	}
	if err != nil {
		t.Errorf("reading audit leaves: %v", err)
		return
	}
	allLeaves.Lock()
	allLeaves.leaves = append(allLeaves.leaves, leaves...)
	allLeaves.Unlock()
}

func TestMain(m *testing.M) {
	if os.Getenv("LETHE_CRASH_CHILD") != "" {
		crashChild()
		return
	}
	if os.Getenv(crashModelEnv) != "" {
		crashModelChild()
		return
	}
	if os.Getenv(crashPointsEnv) != "" {
		pointsChild()
		return
	}
	if os.Getenv(crashEraseEnv) != "" {
		eraseChild()
		return
	}
	code := m.Run()
	if code == 0 {
		code = checkLeaves()
	}
	os.Exit(code)
}

// checkLeaves fails the run if any leaf written by any test is not a
// canonical lethe leaf or contains a personal value the tests used.
func checkLeaves() int {
	personal := append([]string{"alice", "bob", "carol", "dave", "u1", "u2", "paris", "lyon", "tea", "jazz",
		"Alice Example", "green tea", "user-42", "phone", "dsr-user-", "residue-subject-", "@example.org"}, secrets...)
	bad := 0
	for _, l := range allLeaves.leaves {
		if _, err := proofs.ParseLeaf(l); err != nil {
			fmt.Fprintf(os.Stderr, "audit leaf is not canonical: %v\n", err)
			bad++
		}
		for _, p := range personal {
			if strings.Contains(strings.ToLower(string(l)), strings.ToLower(p)) {
				fmt.Fprintf(os.Stderr, "audit leaf holds personal value %q: %s\n", p, l)
				bad++
			}
		}
	}
	// A full run opens dozens of stores that write events; if none reached
	// the check, the check itself is broken. (A single test may write none.)
	if len(allLeaves.leaves) == 0 && allLeaves.opened >= 10 {
		fmt.Fprintln(os.Stderr, "no audit leaves were collected: the leaf check checked nothing")
		return 1
	}
	if bad > 0 {
		return 1
	}
	return 0
}

func TestForgetReturnsVerifiableProof(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		for i := range 5 {
			mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "alice", Object: fmt.Sprint("thing", i), UserID: "u1"})
		}
		mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "bob", Object: "x", UserID: "u2"})
		res, err := db.Forget(ctx, lethe.Selector{UserID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Count != 5 || res.Receipt == nil || res.Proof == nil || res.Pending {
			t.Fatalf("forget result: %+v", res)
		}
		nonce, err := hex.DecodeString(res.SubjectNonce)
		if err != nil || len(nonce) != 32 {
			t.Fatalf("subject nonce %q", res.SubjectNonce)
		}
		v, err := proofs.Verify(res.Proof, proofs.VerifyOptions{LogKey: db.AuditKey(), Subject: "u1", Nonce: nonce})
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		if v.Leaf.Type != proofs.EventGrainForget || v.Leaf.GrainCount() != 5 || !slices.Equal(v.Leaf.Hashes, res.Hashes) {
			t.Errorf("leaf: %+v", v.Leaf)
		}
		if _, err := proofs.Verify(res.Proof, proofs.VerifyOptions{LogKey: db.AuditKey(), Subject: "u2", Nonce: nonce}); proofs.FailedCheck(err) != proofs.CheckSubject {
			t.Errorf("a wrong subject verified: %v", err)
		}
		// The same proof is available later, and against later checkpoints.
		if _, err := db.Forget(ctx, lethe.Selector{Subject: "bob"}); err != nil {
			t.Fatal(err)
		}
		later, err := db.ProofByEvent(ctx, res.EventID)
		if err != nil {
			t.Fatal(err)
		}
		if later.TreeSize <= res.Proof.TreeSize {
			t.Errorf("later proof tree size %d, want > %d", later.TreeSize, res.Proof.TreeSize)
		}
		if _, err := proofs.Verify(later, proofs.VerifyOptions{LogKey: db.AuditKey(), Pinned: []byte(res.Proof.Checkpoint)}); err == nil {
			t.Errorf("a pinned checkpoint verified without a consistency proof")
		}
		cons, err := db.Consistency(ctx, res.Proof.TreeSize, later.TreeSize)
		if err != nil {
			t.Fatal(err)
		}
		later.SetConsistency(cons.From, cons.Hashes)
		if _, err := proofs.Verify(later, proofs.VerifyOptions{LogKey: db.AuditKey(), Pinned: []byte(res.Proof.Checkpoint)}); err != nil {
			t.Errorf("consistency with the pinned checkpoint: %v", err)
		}
		note, err := db.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := proofs.OpenCheckpoint(note, db.AuditKey(), ""); err != nil {
			t.Errorf("checkpoint does not open: %v", err)
		}
	})
}

// TestReceiptWaitsForOneStep forgets grains one at a time and counts the
// audit sequencer's steps: a receipt waits for one step that began after
// its event committed, not for a second one when the kick that woke the
// sequencer had already begun a step (which doubled each forget's wait
// for its proof). Each forget needs one step; the sequencer's own timer
// adds one per 500 ms at most.
func TestReceiptWaitsForOneStep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		const n = 20
		hashes := make([]string, n)
		for i := range hashes {
			hashes[i] = mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "alice", Object: fmt.Sprint("thing", i)})
		}
		start, t0 := db.AuditSteps(), time.Now()
		for _, h := range hashes {
			res, err := db.Forget(ctx, lethe.Selector{Hash: h})
			if err != nil || res.Proof == nil {
				t.Fatalf("forget: %+v, %v", res, err)
			}
		}
		steps := db.AuditSteps() - start
		ticks := uint64(time.Since(t0)/(500*time.Millisecond)) + 1
		if steps > n+ticks {
			t.Errorf("%d sequencer steps for %d forgets (at most %d timer steps): a receipt waits for more than one step", steps, n, ticks)
		}
	})
}

// TestAuditEventsMatchChanges checks that each state change left exactly
// its event: key creations, supersedes and forgets, nothing for no-ops.
func TestAuditEventsMatchChanges(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "alice", Relation: "lives_in", Object: "paris", Scope: "acme/prod", UserID: "u1"})
		mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "alice", Relation: "lives_in", Object: "paris", Scope: "acme/prod", UserID: "u1"}) // dedup: no new key
		h2, err := db.Supersede(ctx, h, lethe.Grain{Type: "fact", Object: "lyon"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Forget(ctx, lethe.Selector{Subject: "nobody"}); err != nil { // removes nothing: no event
			t.Fatal(err)
		}
		if _, err := db.Forget(ctx, lethe.Selector{Hash: h2}); err != nil {
			t.Fatal(err)
		}
		leaves, err := db.AuditLeaves(ctx)
		if err != nil {
			t.Fatal(err)
		}
		count := map[proofs.EventType]int{}
		for _, b := range leaves {
			l, err := proofs.ParseLeaf(b)
			if err != nil {
				t.Fatal(err)
			}
			count[l.Type]++
			if l.Type == proofs.EventGrainForget && l.GrainCount() != 2 {
				t.Errorf("forget of a two-version chain counted %d", l.GrainCount())
			}
		}
		// memory, acme, acme/prod, user u1: four keys.
		want := map[proofs.EventType]int{proofs.EventKeyCreate: 4, proofs.EventGrainSupersede: 1, proofs.EventGrainForget: 1}
		if fmt.Sprint(count) != fmt.Sprint(want) {
			t.Errorf("events %v, want %v", count, want)
		}
	})
}

// TestCrashLosesNoEvent kills a writer with SIGKILL while it forgets, then
// reopens the store: every event it reported committed is in the log,
// exactly once, at consecutive indices.
func TestCrashLosesNoEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := lethe.Config{DataDir: dir}
			if b.name == "postgres" {
				cfg.PostgresDSN = testenv.Postgres(t)
			}
			for round := range 3 {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cfgJSON, err := json.Marshal(childConfig{DataDir: cfg.DataDir, PostgresDSN: cfg.PostgresDSN})
				if err != nil {
					t.Fatal(err)
				}
				cmd.Env = append(os.Environ(), "LETHE_CRASH_CHILD="+string(cfgJSON))
				out, err := cmd.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				var committed []string
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					committed = append(committed, sc.Text())
					if len(committed) == 20+round*7 {
						cmd.Process.Signal(syscall.SIGKILL)
						break
					}
				}
				cmd.Wait()
				if len(committed) < 20 {
					t.Fatalf("child reported only %d events", len(committed))
				}
				db := openDB(t, cfg)
				leaves, err := db.AuditLeaves(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				seen := map[string]int{}
				for _, b := range leaves {
					l, err := proofs.ParseLeaf(b)
					if err != nil {
						t.Fatal(err)
					}
					seen[l.ID]++
				}
				for id, n := range seen {
					if n != 1 {
						t.Errorf("event %s appears %d times", id, n)
					}
				}
				for _, id := range committed {
					if seen[id] != 1 {
						t.Errorf("round %d: committed event %s is not in the log", round, id)
					}
				}
			}
		})
	}
}

// childConfig is what the crash test passes to its child process.
type childConfig struct {
	DataDir, PostgresDSN string
	User                 string `json:",omitempty"` // eraseChild's user
}

// crashChild writes and forgets grains forever, printing each forget's
// event id once it is committed, until it is killed.
func crashChild() {
	var cc childConfig
	if err := json.Unmarshal([]byte(os.Getenv("LETHE_CRASH_CHILD")), &cc); err != nil {
		panic(err)
	}
	cfg := lethe.Config{DataDir: cc.DataDir, PostgresDSN: cc.PostgresDSN}
	cfg.ProofWait = time.Millisecond // return before inclusion: the kill lands between commit and append
	ctx := context.Background()
	db, err := lethe.Open(ctx, cfg)
	if err != nil {
		panic(err)
	}
	for i := 0; ; i++ {
		h, err := db.Add(ctx, lethe.Grain{Type: "event", Content: fmt.Sprintf("crash test %d %d", os.Getpid(), i)})
		if err != nil {
			panic(err)
		}
		res, err := db.Forget(ctx, lethe.Selector{Hash: h})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.EventID)
	}
}
