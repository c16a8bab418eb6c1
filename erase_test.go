package lethe_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// population writes grains for john and jane across scopes and returns
// john's hashes, jane's hashes, and all hashes by scope.
func population(t *testing.T, db *lethe.DB) (john, jane []string, byScope map[string][]string) {
	t.Helper()
	byScope = map[string][]string{}
	for _, scope := range []string{"", "acme", "acme/prod", "acme/prod/bot1", "acme/dev"} {
		for _, u := range []string{"john", "jane", ""} {
			h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "subj-" + u, Relation: "in", Object: "scope-" + scope, Scope: scope, UserID: u})
			byScope[scope] = append(byScope[scope], h)
			switch u {
			case "john":
				john = append(john, h)
			case "jane":
				jane = append(jane, h)
			}
		}
	}
	return john, jane, byScope
}

// readable reports whether Get returns the grain; erased or not_found mean no.
func readable(t *testing.T, db *lethe.DB, h string) bool {
	t.Helper()
	_, err := db.Get(context.Background(), "", h)
	switch lethe.ErrorCode(err) {
	case "":
		return true
	case "erased", "not_found":
		return false
	}
	t.Fatalf("Get: %v", err)
	return false
}

func recallCount(t *testing.T, db *lethe.DB, q lethe.Query) int {
	t.Helper()
	q.Limit, q.IncludeSuperseded, q.IncludeArchived = 1000, true, true
	p, err := db.Recall(context.Background(), q)
	if err != nil {
		t.Fatalf("Recall: %v", err)
	}
	return len(p.Grains)
}

func TestEraseUser(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		db.PauseCleaner() // first check reads against rows that still exist, then clean
		john, jane, _ := population(t, db)
		// A version chain of john's: every version dies.
		v2, err := db.Supersede(ctx, john[0], lethe.Grain{Type: "fact", Object: "moved"})
		if err != nil {
			t.Fatal(err)
		}
		er, err := db.ForgetUser(ctx, "", "john")
		if err != nil {
			t.Fatal(err)
		}
		if er.Count != int64(len(john)+1) || len(er.KeyFingerprint) != 64 || er.Proof == nil {
			t.Fatalf("erasure: count %d fingerprint %q proof %v", er.Count, er.KeyFingerprint, er.Proof != nil)
		}
		nonce, _ := hex.DecodeString(er.SubjectNonce)
		v, err := proofs.Verify(er.Proof, proofs.VerifyOptions{LogKey: db.AuditKey(), Subject: "john", Nonce: nonce})
		if err != nil {
			t.Fatalf("proof: %v", err)
		}
		if v.Leaf.Type != proofs.EventKeyErase || v.Leaf.GrainCount() != uint64(er.Count) || v.Leaf.FirstKeyFingerprint() != er.KeyFingerprint {
			t.Errorf("leaf %+v does not match the erasure", v.Leaf)
		}
		// Every read path, before and after the cleaner ran.
		for _, phase := range []string{"erased", "cleaned"} {
			for _, h := range append(john, v2) {
				if readable(t, db, h) {
					t.Errorf("%s: john's grain %s still readable", phase, h[:8])
				}
			}
			if _, err := db.History(ctx, "", v2); err == nil {
				t.Errorf("%s: history of an erased grain answered", phase)
			}
			if n := recallCount(t, db, lethe.Query{UserID: "john"}); n != 0 {
				t.Errorf("%s: recall by user found %d", phase, n)
			}
			if n := recallCount(t, db, lethe.Query{Subject: "subj-john"}); n != 0 {
				t.Errorf("%s: recall by subject found %d", phase, n)
			}
			if n := recallCount(t, db, lethe.Query{}); n != 10 {
				t.Errorf("%s: %d grains left, want jane's 5 and 5 without user", phase, n)
			}
			for _, h := range jane {
				if !readable(t, db, h) {
					t.Errorf("%s: jane's grain %s lost", phase, h[:8])
				}
			}
			if _, err := db.PurgeErased(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// An erased key stays erased: john writes again under a new key.
		h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "subj-john", Object: "again", UserID: "john"})
		if !readable(t, db, h) {
			t.Fatal("new grain for john not readable")
		}
		er2, err := db.ForgetUser(ctx, "", "john")
		if err != nil || er2.Count != 1 || er2.KeyFingerprint == er.KeyFingerprint {
			t.Errorf("second erase: %v %+v", err, er2)
		}
		_, err = db.ForgetUser(ctx, "", "nobody")
		if lethe.ErrorCode(err) != "not_found" {
			t.Errorf("erasing an unknown user: %v", err)
		}
	})
}

func TestEraseScope(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		db.PauseCleaner()
		_, _, byScope := population(t, db)
		er, err := db.EraseScope(ctx, "", "acme/prod")
		if err != nil {
			t.Fatal(err)
		}
		if er.Count != 6 {
			t.Errorf("count %d, want the 6 grains of acme/prod and acme/prod/bot1", er.Count)
		}
		for scope, hs := range byScope {
			dead := scope == "acme/prod" || scope == "acme/prod/bot1"
			for _, h := range hs {
				if readable(t, db, h) == dead {
					t.Errorf("scope %q grain readable=%v after erasing acme/prod", scope, !dead)
				}
			}
		}
		if n := recallCount(t, db, lethe.Query{Scope: "acme"}); n != 6 {
			t.Errorf("recall under acme: %d, want acme's and acme/dev's 6", n)
		}
		if n := recallCount(t, db, lethe.Query{Object: "scope-acme/prod/bot1"}); n != 0 {
			t.Errorf("recall by object found erased grains: %d", n)
		}
		// Writing to the erased scope again makes a new key.
		h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "new", Scope: "acme/prod/bot1"})
		if !readable(t, db, h) {
			t.Error("new grain under an erased scope not readable")
		}
		if _, err := db.PurgeErased(ctx); err != nil {
			t.Fatal(err)
		}
		if !readable(t, db, h) {
			t.Error("the cleaner deleted a grain written after the erase")
		}
		// A user erase dies with any prefix of its scope, and vice versa.
		mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "x", Scope: "acme/dev/bot2", UserID: "john"})
		if _, err := db.EraseScope(ctx, "", "acme"); err != nil {
			t.Fatal(err)
		}
		if n := recallCount(t, db, lethe.Query{UserID: "john"}); n != 1 { // john's grain in the root scope
			t.Errorf("john has %d readable grains after erasing acme, want 1", n)
		}
		for _, tc := range []struct {
			path string
			code lethe.Code
		}{{"", "empty_selector"}, {"/", "empty_selector"}, {"a//b", "invalid_scope"}, {"never/written", "not_found"}} {
			_, err := db.EraseScope(ctx, "", tc.path)
			if lethe.ErrorCode(err) != tc.code {
				t.Errorf("EraseScope(%q) = %v, want %s", tc.path, err, tc.code)
			}
		}
	})
}

// An erase counts the grains it makes unreadable, never again those an
// earlier erase made unreadable and the cleaner has not deleted yet.
func TestEraseCountsOnlyReadableGrains(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		db.PauseCleaner()
		population(t, db)
		er, err := db.ForgetUser(ctx, "", "john")
		if err != nil || er.Count != 5 {
			t.Fatalf("ForgetUser = %+v, %v; want john's 5 grains", er, err)
		}
		er, err = db.EraseScope(ctx, "", "acme")
		if err != nil || er.Count != 8 {
			t.Fatalf("EraseScope = %+v, %v; want the 8 grains of jane and no user under acme (john's 4 are gone already)", er, err)
		}
		er, err = db.EraseMemory(ctx, "default")
		if err != nil || er.Count != 2 {
			t.Fatalf("EraseMemory = %+v, %v; want the 2 readable grains of the root scope", er, err)
		}
	})
}

func TestEraseMemory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		population(t, db)
		other := mustAdd(t, db, lethe.Grain{Memory: "other", Type: "fact", Subject: "kept"})
		er, err := db.EraseMemory(ctx, "default")
		if err != nil {
			t.Fatal(err)
		}
		if er.Count != 15 {
			t.Errorf("count %d, want 15", er.Count)
		}
		if n := recallCount(t, db, lethe.Query{}); n != 0 {
			t.Errorf("%d grains readable in an erased memory", n)
		}
		if _, err := db.Get(ctx, "other", other); err != nil {
			t.Errorf("another memory suffered: %v", err)
		}
		_, err = db.EraseMemory(ctx, "NOPE")
		if lethe.ErrorCode(err) != "invalid_memory" {
			t.Errorf("bad memory: %v", err)
		}
	})
}

func TestHoldsStopEveryDestructivePath(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		john, _, byScope := population(t, db)
		hold, err := db.SetHold(ctx, lethe.HoldSpec{Scope: "acme/prod"})
		if err != nil {
			t.Fatal(err)
		}
		heldGrain := byScope["acme/prod/bot1"][0]
		attempts := []struct {
			name string
			call func() error
		}{
			{"forget hash", func() error { _, err := db.Forget(ctx, lethe.Selector{Hash: heldGrain}); return err }},
			{"forget hashes", func() error {
				_, err := db.Forget(ctx, lethe.Selector{Hashes: []string{byScope[""][0], heldGrain}})
				return err
			}},
			{"forget subject", func() error { _, err := db.Forget(ctx, lethe.Selector{Subject: "subj-jane"}); return err }},
			{"forget user_id", func() error { _, err := db.Forget(ctx, lethe.Selector{UserID: "john"}); return err }},
			{"forget user", func() error { _, err := db.ForgetUser(ctx, "", "john"); return err }},
			{"erase held scope", func() error { _, err := db.EraseScope(ctx, "", "acme/prod"); return err }},
			{"erase parent", func() error { _, err := db.EraseScope(ctx, "", "acme"); return err }},
			{"erase child", func() error { _, err := db.EraseScope(ctx, "", "acme/prod/bot1"); return err }},
			{"erase memory", func() error { _, err := db.EraseMemory(ctx, "default"); return err }},
		}
		for _, a := range attempts {
			err := a.call()
			if lethe.ErrorCode(err) != "held" || !strings.Contains(err.Error(), hold.ID) {
				t.Errorf("%s under a scope hold: %v", a.name, err)
			}
			if strings.Contains(err.Error(), "john") {
				t.Errorf("%s: the refusal names the user: %v", a.name, err)
			}
		}
		if n := recallCount(t, db, lethe.Query{}); n != 15 {
			t.Errorf("refused calls changed the store: %d grains, want 15", n)
		}
		// Outside the hold, destruction works.
		if _, err := db.EraseScope(ctx, "", "acme/dev"); err != nil {
			t.Errorf("erase outside the hold: %v", err)
		}
		// A user hold stops the user's erase and scopes holding their grains.
		uh, err := db.SetHold(ctx, lethe.HoldSpec{UserID: "jane"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ForgetUser(ctx, "", "jane"); lethe.ErrorCode(err) != "held" {
			t.Errorf("erase of a held user: %v", err)
		}
		if _, err := db.Forget(ctx, lethe.Selector{UserID: "jane"}); lethe.ErrorCode(err) != "held" {
			t.Errorf("forget of a held user: %v", err)
		}
		hs, err := db.Holds(ctx, "")
		if err != nil || len(hs) != 2 {
			t.Fatalf("holds: %v %+v", err, hs)
		}
		for _, h := range hs {
			if strings.Contains(fmt.Sprint(h), "jane") {
				t.Errorf("a hold listing names the user: %+v", h)
			}
		}
		// Release restores normal behaviour.
		if err := db.ReleaseHold(ctx, "", hold.ID); err != nil {
			t.Fatal(err)
		}
		if err := db.ReleaseHold(ctx, "", uh.ID); err != nil {
			t.Fatal(err)
		}
		if err := db.ReleaseHold(ctx, "", uh.ID); lethe.ErrorCode(err) != "not_found" {
			t.Errorf("double release: %v", err)
		}
		if _, err := db.ForgetUser(ctx, "", "john"); err != nil {
			t.Errorf("erase after release: %v", err)
		}
		if readable(t, db, john[0]) {
			t.Error("john's grain survived")
		}
		// Every refusal was audited, naming the hold.
		leaves, err := db.AuditLeaves(ctx)
		if err != nil {
			t.Fatal(err)
		}
		refused := 0
		for _, b := range leaves {
			l, _ := proofs.ParseLeaf(b)
			if l.Type == proofs.EventErasureRefused && (l.Hold == hold.ID || l.Hold == uh.ID) && l.Reason == "held" {
				refused++
			}
		}
		if refused != len(attempts)+2 {
			t.Errorf("%d refusals audited, want %d", refused, len(attempts)+2)
		}
		for _, bad := range []lethe.HoldSpec{{}, {Scope: "a", UserID: "b"}, {Scope: "a//b"}} {
			if _, err := db.SetHold(ctx, bad); err == nil {
				t.Errorf("SetHold(%+v) accepted", bad)
			}
		}
		if err := db.ReleaseHold(ctx, "", "xyz"); lethe.ErrorCode(err) != "invalid_argument" {
			t.Errorf("release of a malformed id: %v", err)
		}
	})
}

// TestEraseAcrossInstances opens two instances on one database: once an
// erase on one returns, the other serves none of the erased grains, though
// it had their keys cached.
func TestEraseAcrossInstances(t *testing.T) {
	forEachBackendTwice(t, func(t *testing.T, a, other *lethe.DB) {
		ctx := context.Background()
		a.PauseCleaner() // the erased rows stay: reads must refuse them by key state
		other.PauseCleaner()
		john, _, byScope := population(t, a)
		for _, h := range append(john, byScope["acme/prod"]...) { // warm the second instance's caches
			if !readable(t, other, h) {
				t.Fatal("second instance cannot read")
			}
		}
		if _, err := a.ForgetUser(ctx, "", "john"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.EraseScope(ctx, "", "acme/prod"); err != nil {
			t.Fatal(err)
		}
		for _, h := range append(john, byScope["acme/prod"]...) {
			if readable(t, other, h) {
				t.Errorf("second instance still serves erased grain %s", h[:8])
			}
		}
		if n := recallCount(t, other, lethe.Query{UserID: "john"}); n != 0 {
			t.Errorf("second instance recalls %d of john's grains", n)
		}
		// The second instance writes for john again: a new key, readable by both.
		h := mustAdd(t, other, lethe.Grain{Type: "fact", Subject: "back", UserID: "john", Scope: "acme/prod"})
		if !readable(t, a, h) || !readable(t, other, h) {
			t.Error("grain written after the erase is not readable")
		}
	})
}

// A batch that brings many new users creates each user's key once, listed
// in one key.create event, and a second instance on the same database reads
// every grain and erases a user with the exact count.
func TestBatchOfNewUsers(t *testing.T) {
	forEachBackendTwice(t, func(t *testing.T, a, other *lethe.DB) {
		ctx := context.Background()
		batch := make([]lethe.Grain, 300)
		for i := range batch {
			batch[i] = lethe.Grain{Type: "fact", Subject: fmt.Sprintf("s%d", i), Relation: "r", Object: "o",
				Scope: []string{"acme", "acme/dev"}[i%2], UserID: fmt.Sprintf("batch-user-%d", i%100)}
		}
		hs, err := a.AddBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if !readable(t, other, h) {
				t.Fatalf("grain %s not readable by a second instance", h)
			}
		}
		leaves, err := a.AuditLeaves(ctx)
		if err != nil {
			t.Fatal(err)
		}
		created, events := 0, 0
		for _, b := range leaves {
			l, err := proofs.ParseLeaf(b)
			if err != nil {
				t.Fatal(err)
			}
			if l.Type == proofs.EventKeyCreate {
				created += len(l.KeyFingerprints)
				events++
			}
		}
		if want := 1 + 2 + 100; created != want { // memory, 2 scopes, 100 users
			t.Errorf("key.create events list %d keys, want %d", created, want)
		}
		// The memory and scope keys are created one by one, the users'
		// together: one event lists them.
		if events != 1+2+1 {
			t.Errorf("%d key.create events, want 4", events)
		}
		er, err := other.ForgetUser(ctx, "", "batch-user-7")
		if err != nil || er.Count != 3 {
			t.Fatalf("ForgetUser = %+v, %v; want 3 grains", er, err)
		}
	})
}

// forEachBackendTwice runs test on each backend with two instances open on
// one database, as replicas are.
func forEachBackendTwice(t *testing.T, test func(t *testing.T, a, other *lethe.DB)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			cfg := lethe.Config{DataDir: t.TempDir()}
			if b.name == "postgres" {
				cfg.PostgresDSN = testenv.Postgres(t)
			}
			test(t, openDB(t, cfg), openDB(t, cfg))
		})
	}
}

// A replica caches the index keys of the scopes it has queried. When
// another instance creates or erases a scope, or erases one and writes to
// it again, the replica's next recall answers for the new set of scopes,
// whether its cached tokens would have found some rows or none.
func TestRecallSeesScopesOfOtherInstances(t *testing.T) {
	forEachBackendTwice(t, func(t *testing.T, a, other *lethe.DB) {
		ctx := context.Background()
		other.PauseCleaner() // rows of an erased scope stay: recall must leave them out by key state
		mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Scope: "acme"})
		mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada"})
		for _, q := range []lethe.Query{{Subject: "ada"}, {Subject: "ada", Scope: "acme"}, {Subject: "bob"}} {
			recallCount(t, other, q) // caches the index keys of "" and "acme"
		}
		mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Scope: "acme/new"})
		mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Scope: "beta"})
		mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "bob", Scope: "delta"})
		for _, c := range []struct {
			q    lethe.Query
			want int
		}{
			{lethe.Query{Subject: "ada"}, 4},
			{lethe.Query{Subject: "ada", Scope: "acme"}, 2},
			{lethe.Query{Subject: "bob"}, 1}, // the cached tokens find no row at all
		} {
			if n := recallCount(t, other, c.q); n != c.want {
				t.Errorf("after new scopes, %+v recalls %d grains, want %d", c.q, n, c.want)
			}
		}
		if _, err := a.EraseScope(ctx, "", "acme/new"); err != nil {
			t.Fatal(err)
		}
		p, err := other.Recall(ctx, lethe.Query{Subject: "ada", Scope: "acme", Limit: 1})
		if err != nil || len(p.Grains) != 1 || p.Grains[0].Scope != "acme" {
			t.Errorf("after the erase, a page of 1 under acme = %+v, %v; want the grain in acme", p, err)
		}
		if n := recallCount(t, other, lethe.Query{Subject: "ada"}); n != 3 {
			t.Errorf("after the erase, %d grains, want 3", n)
		}
		// A scope erased and written again has a new key, so a new index
		// key: the replica's tokens for it, made from the old key, must
		// not survive its reading of the scopes' keys afresh. (The index
		// key was cached by the scope's name; a text query found nothing.)
		if _, err := a.EraseScope(ctx, "", "beta"); err != nil {
			t.Fatal(err)
		}
		mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Object: "paris", Scope: "beta"})
		for _, c := range []struct {
			q    lethe.Query
			want int
		}{
			{lethe.Query{Subject: "ada", Scope: "beta"}, 1},
			{lethe.Query{Subject: "ada"}, 3},
			{lethe.Query{Subject: "ada", Text: "paris"}, 1},
		} {
			if n := recallCount(t, other, c.q); n != c.want {
				t.Errorf("after beta was erased and written again on another instance, %+v recalls %d grains, want %d", c.q, n, c.want)
			}
		}
	})
}

// After one instance erases a whole memory, another instance that had the
// memory's key cached (and reads nothing of the memory in between) still
// acts on the memory as it now is: it recalls a user's new grains, erases
// that user, places a hold that protects the user's grains, and creates
// each new key once.
func TestMemoryEraseAcrossInstances(t *testing.T) {
	forEachBackendTwice(t, func(t *testing.T, a, other *lethe.DB) {
		ctx := context.Background()
		a.PauseCleaner() // a cleaner run on the second instance would empty its caches
		other.PauseCleaner()
		mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "old", UserID: "ann"})
		for range 2 { // the second recall leaves the memory key cached (the first's rows set the epoch)
			if n := recallCount(t, other, lethe.Query{UserID: "ann"}); n != 1 {
				t.Fatalf("second instance recalls %d grains, want 1", n)
			}
		}
		if _, err := a.EraseMemory(ctx, "default"); err != nil {
			t.Fatal(err)
		}
		// A hold on a user of the erased memory, before anything is written
		// again: the second instance creates the memory's new key for it.
		early, err := other.SetHold(ctx, lethe.HoldSpec{UserID: "ann"})
		if err != nil {
			t.Fatalf("SetHold after the memory's erase on another instance: %v", err)
		}
		if err := other.ReleaseHold(ctx, "", early.ID); err != nil {
			t.Fatal(err)
		}
		before := keyCreates(t, a)
		h := mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "new", UserID: "ann"})
		if n := recallCount(t, other, lethe.Query{UserID: "ann"}); n != 1 {
			t.Errorf("after the memory's erase, the second instance recalls %d of ann's new grains, want 1", n)
		}
		hold, err := other.SetHold(ctx, lethe.HoldSpec{UserID: "ann"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.ForgetUser(ctx, "", "ann"); lethe.ErrorCode(err) != "held" {
			t.Errorf("ForgetUser under a hold placed by the second instance = %v, want code held", err)
		}
		if err := other.ReleaseHold(ctx, "", hold.ID); err != nil {
			t.Fatal(err)
		}
		// The second instance writes a new user: one key, not one under the
		// erased memory key and another after.
		mustAdd(t, other, lethe.Grain{Type: "fact", Subject: "x", UserID: "bob"})
		if got := keyCreates(t, a) - before; got != 2 { // ann, bob (the hold created the memory key)
			t.Errorf("%d key.create events after the hold, want 2 (ann, bob)", got)
		}
		er, err := other.ForgetUser(ctx, "", "ann")
		if err != nil || er.Count != 1 {
			t.Fatalf("second instance's ForgetUser(ann) = %+v, %v; want 1 grain", er, err)
		}
		if readable(t, a, h) {
			t.Error("ann's grain is still readable after her erasure")
		}
	})
}

// keyCreates counts the keys the key.create events in db's audit log list.
func keyCreates(t *testing.T, db *lethe.DB) int {
	t.Helper()
	leaves, err := db.AuditLeaves(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range leaves {
		l, err := proofs.ParseLeaf(b)
		if err != nil {
			t.Fatal(err)
		}
		if l.Type == proofs.EventKeyCreate {
			n += len(l.KeyFingerprints)
		}
	}
	return n
}

// A grain written again after its scope was erased is a new row: its blind
// tokens are made with the scope's new index key, so the erased row is not
// the one it repeats (a write deletes only an erased row holding its own
// dedup token) and stays, unreadable, until the cleaner deletes it. Written
// again after its user was erased, it has the same tokens (a user erasure
// leaves the scope's index key), and the write deletes the erased row. The
// model (TestModel's dropDead) once expected the first to be deleted too.
func TestRewriteAfterErasureDeletesTheOldRowOnlyUnderTheSameIndexKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		// The rows an erasure leaves are counted below: the cleaner paused,
		// and what it may have done at open done now.
		db.PauseCleaner()
		if _, err := db.PurgeErased(ctx); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name  string
			g     lethe.Grain
			erase func() error
			left  int // erased rows the rewrite leaves to the cleaner
		}{
			{"scope", lethe.Grain{Memory: "m", Type: "fact", Subject: "ada", Relation: "likes", Object: "paris", Scope: "d"},
				func() error { _, err := db.EraseScope(ctx, "m", "d"); return err }, 1},
			{"user", lethe.Grain{Memory: "m", Type: "fact", Subject: "ada", Relation: "likes", Object: "rome", Scope: "e", UserID: "u"},
				func() error { _, err := db.ForgetUser(ctx, "m", "u"); return err }, 0},
		} {
			old, err := db.Add(ctx, c.g)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.erase(); err != nil {
				t.Fatal(err)
			}
			again, err := db.Add(ctx, c.g)
			if err != nil || again == old {
				t.Fatalf("%s: the rewrite = %.8s, %v; the erased grain was %.8s", c.name, again, err, old)
			}
			if _, err := db.Get(ctx, "m", again); err != nil {
				t.Fatalf("%s: the rewrite is unreadable: %v", c.name, err)
			}
			if n, err := db.PurgeErased(ctx); err != nil || n != c.left {
				t.Fatalf("%s: PurgeErased after the rewrite = %d, %v; want %d", c.name, n, err, c.left)
			}
			if _, err := db.Get(ctx, "m", old); lethe.ErrorCode(err) != lethe.CodeNotFound {
				t.Fatalf("%s: the erased grain: %v, want not_found", c.name, err)
			}
		}
	})
}
