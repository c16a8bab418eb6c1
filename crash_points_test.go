package lethe_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/crashpoint"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// crashPointsEnv names the variable that makes the test binary
// TestCrashPointsReached's child; it holds a childConfig.
const crashPointsEnv = "LETHE_CRASH_POINTS_CHILD"

// pointStep is a line TestCrashPointsReached's child prints: a step's
// name (and what it is about) before the step, and with Done its result
// once the step returned.
type pointStep struct {
	Step    string   `json:"step"`
	Done    bool     `json:"done,omitempty"`
	Hashes  []string `json:"hashes,omitempty"`
	Events  []string `json:"events,omitempty"`
	Key     string   `json:"key,omitempty"`     // the fingerprint of the key an erasure destroys
	Request string   `json:"request,omitempty"` // an erasure request's id
}

// TestCrashPointsReached proves that every crash point (package
// internal/crashpoint) is reached: for each, on SQLite and PostgreSQL, a
// child process armed at the point runs a fixed sequence of calls that
// passes every point (writes creating keys, a forget, a refusal under a
// hold, a user erasure, an erasure request refused under a hold and one
// executed, a purge), printing each call before it makes it. The child
// must die by SIGKILL, having written the point's line to its standard
// error. A point that is never reached fails the test.
//
// The parent then reopens the store and checks it: the audit log holds
// every event the child reported, once, a checkpoint covers the whole log,
// each live data key has its key.create event and each destroyed one its
// key.erase event, no read fails, and the call in flight (every point
// follows a commit) happened whole: the forget's grain gone with its
// event; the refusal's event there; the erasure's key destroyed, its
// event there, its grains unreadable and then deleted by the cleaner; the
// executed request executed, with its certificate; the refused request
// still approved, with no refusal, its key live and its execution possible
// once the hold is released.
func TestCrashPointsReached(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			for _, point := range crashpoint.Points() {
				t.Run(point, func(t *testing.T) {
					// Two at a time: a child mostly waits for its store.
					t.Parallel()
					// A database of its own per point: each run starts empty.
					cfg := lethe.Config{DataDir: t.TempDir()}
					if b.name == "postgres" {
						cfg.PostgresDSN = testenv.Postgres(t)
					}
					steps, inflight := runPointChild(t, cfg, point)
					checkPointStore(t, cfg, point, steps, inflight)
				})
			}
		})
	}
}

// runPointChild runs the child armed at point and returns the steps it
// finished, by name, and the step in flight when it died.
func runPointChild(t *testing.T, cfg lethe.Config, point string) (map[string]pointStep, pointStep) {
	t.Helper()
	cc, err := json.Marshal(childConfig{DataDir: cfg.DataDir, PostgresDSN: cfg.PostgresDSN})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashPointsEnv+"="+string(cc), crashpoint.Env+"="+point)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !strings.Contains(stderr.String(), "lethe: crashpoint "+point+"@1 reached\n") || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("crash point %s not reached: the child ended with %v (%v); stdout:\n%s\nstderr:\n%s", point, err, cmd.ProcessState, stdout.String(), stderr.String())
	}
	done := map[string]pointStep{}
	var inflight pointStep
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var s pointStep
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			continue // a line cut short by the kill
		}
		if s.Done {
			done[s.Step] = s
			inflight = pointStep{}
		} else {
			inflight = s
		}
	}
	t.Logf("died at %s in step %q", point, inflight.Step)
	return done, inflight
}

// pointsChild is TestCrashPointsReached's child: it runs the fixed
// sequence, printing each step before it and its result after it, and
// fails (exit status 2) on any unexpected error. It should never finish.
func pointsChild() {
	var cc childConfig
	if err := json.Unmarshal([]byte(os.Getenv(crashPointsEnv)), &cc); err != nil {
		panic(err)
	}
	ctx := lethe.WithActor(context.Background(), "tok_a")
	check := func(step string, err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "crash points child: %s: %v\n", step, err)
			os.Exit(2)
		}
	}
	print := func(s pointStep) {
		b, err := json.Marshal(s)
		check("print", err)
		os.Stdout.Write(append(b, '\n'))
	}
	db, err := lethe.Open(ctx, lethe.Config{DataDir: cc.DataDir, PostgresDSN: cc.PostgresDSN})
	check("open", err)
	m := crashMemory
	g := func(content, user, scope string) lethe.Grain {
		return lethe.Grain{Memory: m, Type: "fact", Subject: "ida", Relation: "likes", Object: "x", Content: content, UserID: user, Scope: scope, Importance: 0.2}
	}

	print(pointStep{Step: "add"})
	hs, err := db.AddBatch(ctx, []lethe.Grain{g("ann 1", "ann", "a"), g("ann 2", "ann", ""), g("ben 1", "ben", "a"),
		g("cy 1", "cy", ""), g("d 1", "", "d"), g("plain 1", "", "")})
	check("add", err)
	print(pointStep{Step: "add", Done: true, Hashes: hs})

	print(pointStep{Step: "forget", Hashes: hs[5:]})
	f, err := db.Forget(ctx, lethe.Selector{Memory: m, Hash: hs[5]})
	check("forget", err)
	print(pointStep{Step: "forget", Done: true, Hashes: f.Hashes, Events: []string{f.EventID}})

	print(pointStep{Step: "hold_d"})
	hd, err := db.SetHold(ctx, lethe.HoldSpec{Memory: m, Scope: "d"})
	check("hold d", err)
	print(pointStep{Step: "hold_d", Done: true})

	print(pointStep{Step: "erase_held"})
	_, err = db.EraseScope(ctx, m, "d")
	if lethe.ErrorCode(err) != "held" {
		check("erase d under a hold", fmt.Errorf("got %v, want held", err))
	}
	print(pointStep{Step: "erase_held", Done: true})
	check("release d", db.ReleaseHold(ctx, m, hd.ID))

	dry, err := db.ForgetUser(ctx, m, "ann", lethe.DryRun())
	check("dry-run forget ann", err)
	print(pointStep{Step: "forget_user", Key: dry.KeyFingerprint, Hashes: hs[:2]})
	er, err := db.ForgetUser(ctx, m, "ann")
	check("forget ann", err)
	print(pointStep{Step: "forget_user", Done: true, Key: er.KeyFingerprint, Events: []string{er.EventID}})

	_, err = db.SetHold(ctx, lethe.HoldSpec{Memory: m, UserID: "cy"})
	check("hold cy", err)
	rc, err := db.FileErasureRequest(ctx, lethe.RequestSpec{Memory: m, UserID: "cy", Reason: "data_subject_request", Reference: "DSR-1"})
	check("file cy", err)
	_, err = db.ApproveErasureRequest(lethe.WithActor(ctx, "tok_b"), m, rc.ID)
	check("approve cy", err)
	print(pointStep{Step: "execute_held", Request: rc.ID, Hashes: hs[3:4]})
	_, err = db.ExecuteErasureRequest(ctx, m, rc.ID)
	if lethe.ErrorCode(err) != "held" {
		check("execute cy under a hold", fmt.Errorf("got %v, want held", err))
	}
	print(pointStep{Step: "execute_held", Done: true, Request: rc.ID})

	rb, err := db.FileErasureRequest(ctx, lethe.RequestSpec{Memory: m, UserID: "ben", Reason: "data_subject_request", Reference: "DSR-2"})
	check("file ben", err)
	_, err = db.ApproveErasureRequest(lethe.WithActor(ctx, "tok_b"), m, rb.ID)
	check("approve ben", err)
	dry, err = db.ForgetUser(ctx, m, "ben", lethe.DryRun())
	check("dry-run forget ben", err)
	print(pointStep{Step: "execute", Request: rb.ID, Key: dry.KeyFingerprint, Hashes: hs[2:3]})
	eb, err := db.ExecuteErasureRequest(ctx, m, rb.ID)
	check("execute ben", err)
	print(pointStep{Step: "execute", Done: true, Request: rb.ID, Key: eb.KeyFingerprint, Events: []string{eb.EventID}})

	print(pointStep{Step: "purge"})
	_, err = db.PurgeErased(ctx)
	check("purge", err)
	print(pointStep{Step: "purge", Done: true})
	// Give the background sequencer and cleaner a last chance.
	time.Sleep(2 * time.Second)
	fmt.Fprintln(os.Stderr, "crash points child: finished without reaching the armed point")
	os.Exit(3)
}

// checkPointStore reopens the store the child armed at point died in and
// checks it (see TestCrashPointsReached).
func checkPointStore(t *testing.T, cfg lethe.Config, point string, done map[string]pointStep, inflight pointStep) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("after a crash at %s in step %q: %s", point, inflight.Step, fmt.Sprintf(format, args...))
	}
	ctx := lethe.WithActor(context.Background(), "tok_a")
	db, err := lethe.Open(ctx, cfg)
	if err != nil {
		fail("reopen: %v", err)
	}
	defer db.Close()
	m := newCrashModel()
	for _, h := range append(slices.Clone(done["add"].Hashes), inflight.Hashes...) {
		if _, ok := m.Grains[h]; !ok {
			m.Grains[h] = &crashGrain{Hash: h}
			m.Order = append(m.Order, h)
		}
	}
	obs := observe(t, db, m, fail)
	checkKeyEvents(obs, fail)
	ids := map[string]*proofs.Leaf{}
	for _, l := range obs.leaves {
		ids[l.ID] = l
	}
	for _, s := range done {
		for _, id := range s.Events {
			if ids[id] == nil {
				fail("event %s of step %s is not in the log", id, s.Step)
			}
		}
	}
	checkCovered(ctx, db, obs, fail)
	leaf := func(match func(l *proofs.Leaf) bool) *proofs.Leaf {
		for _, l := range obs.leaves {
			if match(l) {
				return l
			}
		}
		return nil
	}
	unreadable := func(hs []string) {
		for _, h := range hs {
			if obs.readable[h] != nil {
				fail("grain %s is readable", h[:8])
			}
		}
		if _, err := db.PurgeErased(ctx); err != nil {
			fail("PurgeErased: %v", err)
		}
		for _, h := range hs {
			if _, err := db.Get(ctx, crashMemory, h); lethe.ErrorCode(err) != "not_found" {
				fail("Get(%s) after the cleaner: %v, want not_found", h[:8], err)
			}
		}
	}
	// Every point in a call follows a commit: the step in flight happened.
	// The sequencer and the cleaner run in the background, beside any step.
	step := inflight.Step
	if strings.HasPrefix(point, "sequencer.") || point == crashpoint.CleanerJob {
		step = ""
	}
	switch step {
	case "add":
		if point == crashpoint.KeyCreated && obs.keys["memory"].fingerprint == "" {
			fail("the memory key a write created is not live")
		}
	case "forget":
		unreadable(inflight.Hashes)
		if leaf(func(l *proofs.Leaf) bool {
			return l.Type == proofs.EventGrainForget && slices.Equal(l.Hashes, inflight.Hashes)
		}) == nil {
			fail("no grain.forget event for %s", short8(inflight.Hashes))
		}
	case "erase_held":
		if leaf(func(l *proofs.Leaf) bool { return l.Type == proofs.EventErasureRefused && l.Reason == "held" }) == nil {
			fail("no erasure.refused event")
		}
		if obs.keys["scope:d"].fingerprint == "" {
			fail("the held scope's key was destroyed")
		}
	case "forget_user", "execute":
		if l := leaf(func(l *proofs.Leaf) bool {
			return l.Type == proofs.EventKeyErase && l.FirstKeyFingerprint() == inflight.Key
		}); l == nil {
			fail("no key.erase event for key %s", inflight.Key[:8])
		} else if inflight.Request != "" && l.Request != inflight.Request {
			fail("the key.erase event names request %q, want %s", l.Request, inflight.Request)
		}
		for name, k := range obs.keys {
			if k.fingerprint == inflight.Key {
				fail("the erased key %s is live", name)
			}
		}
		unreadable(inflight.Hashes)
		if inflight.Request != "" {
			r, err := db.ErasureRequest(ctx, crashMemory, inflight.Request)
			if err != nil || r.Status != "executed" {
				fail("the executed request: %+v, %v", r, err)
			}
			if _, err := db.ErasureCertificate(ctx, crashMemory, inflight.Request); err != nil {
				fail("ErasureCertificate: %v", err)
			}
		}
	case "execute_held":
		r, err := db.ErasureRequest(ctx, crashMemory, inflight.Request)
		if err != nil || r.Status != "approved" {
			fail("the request refused before it was blocked: %+v, %v; want approved", r, err)
		}
		if l := leaf(func(l *proofs.Leaf) bool {
			return l.Request == inflight.Request && (l.Type == proofs.EventErasureRefused || l.Type == proofs.EventKeyErase)
		}); l != nil {
			b, _ := l.Marshal()
			fail("the request refused before it was blocked has an event: %s", b)
		}
		if obs.keys["user:cy"].fingerprint == "" || obs.readable[inflight.Hashes[0]] == nil {
			fail("the held user's key or grain is gone")
		}
		hs, err := db.Holds(ctx, crashMemory)
		if err != nil || len(hs) != 1 {
			fail("Holds: %v, %v", hs, err)
		}
		if err := db.ReleaseHold(ctx, crashMemory, hs[0].ID); err != nil {
			fail("ReleaseHold: %v", err)
		}
		if _, err := db.ExecuteErasureRequest(ctx, crashMemory, inflight.Request); err != nil {
			fail("ExecuteErasureRequest after the hold's release: %v", err)
		}
	}
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
}

// crashEraseEnv names the variable that makes the test binary
// TestNoResidueAfterCrashAtErase's child; it holds a childConfig.
const crashEraseEnv = "LETHE_CRASH_ERASE_CHILD"

// eraseChild erases user cc.User (u1 if unset) of memory res, armed to die
// once its erasure committed.
func eraseChild() {
	var cc childConfig
	if err := json.Unmarshal([]byte(os.Getenv(crashEraseEnv)), &cc); err != nil {
		panic(err)
	}
	ctx := context.Background()
	db, err := lethe.Open(ctx, lethe.Config{DataDir: cc.DataDir, PostgresDSN: cc.PostgresDSN})
	if err != nil {
		panic(err)
	}
	user := cmp.Or(cc.User, "u1")
	_, err = db.ForgetUser(ctx, "res", user)
	fmt.Fprintln(os.Stderr, "erase child: ForgetUser returned:", err)
	os.Exit(3)
}

// TestNoResidueAfterCrashAtErase kills a process once its erasure of a
// user committed, before the scrub of the destroyed key's residue
// (crashpoint.EraseCommitted), then reopens the store: once it is open,
// the destroyed wrapped key must leave no copy in the bytes the database
// keeps (as TestNoResidueAfterErasure checks after an erasure returned),
// nor the key's old name (the user's blind reference) a tuple of
// data_keys. On SQLite, Open's checkpoint removes them; on PostgreSQL,
// Open rewrites the partitions the erase marked in scrub_pending in its
// transaction, and runs the plain VACUUM of data_keys that the erase's
// mark there asks for. The second user's grains were all forgotten before
// the erasure, so that no round of the cleaner at Open (which VACUUMs
// data_keys after deleting erased rows) prunes the old name by chance.
func TestNoResidueAfterCrashAtErase(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	withRawStores(t, func(t *testing.T, cfg lethe.Config, raw rawStore) {
		ctx := context.Background()
		db := openDB(t, cfg)
		var batch []lethe.Grain
		for i := range 20 {
			batch = append(batch, lethe.Grain{Memory: "res", Type: "fact", Subject: fmt.Sprintf("s%d", i), Relation: "r",
				Object: fmt.Sprintf("o%d", i), UserID: fmt.Sprintf("u%d", i%3), Scope: "acme"})
		}
		hashes, err := db.AddBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, h := range hashes {
			if batch[i].UserID == "u2" {
				if _, err := db.Forget(ctx, lethe.Selector{Memory: "res", Hash: h}); err != nil {
					t.Fatal(err)
				}
			}
		}
		collectLeaves(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		for _, user := range []string{"u1", "u2"} {
			db := openDB(t, cfg)
			dry, err := db.ForgetUser(ctx, "res", user, lethe.DryRun())
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int64{"u1": 7, "u2": 0}[user]; dry.Count != want {
				t.Fatalf("%s holds %d grains, want %d", user, dry.Count, want)
			}
			collectLeaves(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			wrapped := raw.query(t, `SELECT wrapped FROM data_keys WHERE fingerprint = ?`, dry.KeyFingerprint)
			if len(wrapped) != 1 || len(wrapped[0]) < 64 {
				t.Fatalf("the wrapped key of %s: %d rows", user, len(wrapped))
			}
			if len(raw.residue(t, wrapped[0])) == 0 {
				t.Fatal("the live key is not found in the raw bytes: the search is blind")
			}
			ref := raw.query(t, `SELECT name FROM data_keys WHERE fingerprint = ?`, dry.KeyFingerprint)
			if len(ref) != 1 || len(raw.tuples(t, "data_keys", ref[0])) == 0 {
				t.Fatalf("the name of %s's key is not found in data_keys' tuples: the search is blind", user)
			}

			cc, err := json.Marshal(childConfig{DataDir: cfg.DataDir, PostgresDSN: cfg.PostgresDSN, User: user})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEraseEnv+"="+string(cc), crashpoint.Env+"="+crashpoint.EraseCommitted)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err = cmd.Run()
			if !strings.Contains(stderr.String(), "lethe: crashpoint "+crashpoint.EraseCommitted+"@1 reached") {
				t.Fatalf("the child did not die at %s: %v\n%s", crashpoint.EraseCommitted, err, stderr.String())
			}
			t.Logf("%s: right after the crash, the destroyed key lies in %v, its old name in %v", user,
				raw.residue(t, wrapped[0]), raw.tuples(t, "data_keys", ref[0]))

			db = openDB(t, cfg)
			if _, err := db.ForgetUser(ctx, "res", user, lethe.DryRun()); lethe.ErrorCode(err) != "not_found" {
				t.Fatalf("the erased user %s's key: %v, want not_found", user, err)
			}
			if where := raw.residue(t, wrapped[0]); len(where) > 0 {
				t.Errorf("%s: the store reopened after a crash between an erasure's commit and its scrub: the destroyed key lies in %v", user, where)
			}
			if where := nameResidue(t, raw, ref[0]); len(where) > 0 {
				t.Errorf("%s: the store reopened after a crash between an erasure's commit and its scrub: the key's old name lies in %v", user, where)
			}
			if left := namesMarked(t, raw); len(left) > 0 {
				t.Errorf("%s: after the VACUUM at open, scrub_names keeps %v", user, left)
			}
			collectLeaves(t, db)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if where := raw.residue(t, wrapped[0]); len(where) > 0 {
				t.Errorf("%s: the store closed after a crash between an erasure's commit and its scrub: the destroyed key lies in %v", user, where)
			}
		}
		// Without a crash, the VACUUM after the erase takes its mark.
		db = openDB(t, cfg)
		if _, err := db.ForgetUser(ctx, "res", "u0"); err != nil {
			t.Fatal(err)
		}
		if left := namesMarked(t, raw); len(left) > 0 {
			t.Errorf("after an erasure and its VACUUM, scrub_names keeps %v", left)
		}
	})
}

// namesMarked returns the rows of scrub_names (PostgreSQL: the erases'
// marks of renamed user keys, see store.markNamesSQL) once the background
// VACUUM had 30 s to take them; nil on SQLite.
func namesMarked(t *testing.T, raw rawStore) []string {
	t.Helper()
	if _, ok := raw.(pgRaw); !ok {
		return nil
	}
	return afterScrub(raw, func() []string {
		var ids []string
		for _, id := range raw.query(t, `SELECT id::text FROM scrub_names`) {
			ids = append(ids, string(id))
		}
		return ids
	})
}
