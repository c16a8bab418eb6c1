package lethe_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/lethe-io/lethe"
)

// Regression tests of issue 12: destructive calls must touch exactly what
// they name. TestModel finds defects of these kinds; these pin each one.

// Forgetting by a user that has no key forgets nothing: grains without a
// user (user_key_id 0) are not "that user's" grains.
func TestForgetUnknownUserForgetsNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		mine := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s1", Object: "o", UserID: "alice"})
		nouser := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s2", Object: "o"})
		caveat := mustAdd(t, db, lethe.Grain{Type: "caveat", Content: "never call after 9pm"})
		before := auditLen(t, db)
		res, err := db.Forget(ctx, lethe.Selector{UserID: "nobody"})
		if err != nil || res.Count != 0 || res.Status != "not_found" {
			t.Fatalf("Forget(user nobody) = %+v, %v; want not_found and 0 grains", res, err)
		}
		for _, h := range []string{mine, nouser, caveat} {
			if _, err := db.Get(ctx, "", h); err != nil {
				t.Errorf("after forgetting an unknown user, Get(%s): %v", h[:8], err)
			}
		}
		if n := auditLen(t, db); n != before {
			t.Errorf("forgetting nothing wrote %d audit events", n-before)
		}
		// A hold on a user without a key covers no grain without a user:
		// erasing their scope is not refused.
		mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s3", Scope: "team"})
		if _, err := db.SetHold(ctx, lethe.HoldSpec{UserID: "nobody"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EraseScope(ctx, "", "team"); err != nil {
			t.Errorf("a hold on a user with no key refused a scope erase: %v", err)
		}
		// Recall and export by that user find nothing either.
		if n := recallCount(t, db, lethe.Query{UserID: "nobody", IncludeSuperseded: true, IncludeArchived: true}); n != 0 {
			t.Errorf("recall by an unknown user found %d grains", n)
		}
	})
}

// Re-adding a grain after its user was erased, before the cleaner deleted
// the erased rows, stores a new grain under the new key: the dedup lookup
// does not answer with the erased one.
func TestReAddAfterForgetUser(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		db.PauseCleaner()
		g := lethe.Grain{Type: "fact", Subject: "ada", Relation: "likes", Object: "tea", UserID: "u1", Tags: []string{"x"}}
		old := mustAdd(t, db, g)
		if _, err := db.ForgetUser(ctx, "", "u1"); err != nil {
			t.Fatal(err)
		}
		for _, batch := range []bool{false, true} {
			var h string
			if batch {
				hs, err := db.AddBatch(ctx, []lethe.Grain{g, g})
				if err != nil {
					t.Fatal(err)
				}
				if hs[0] != hs[1] {
					t.Errorf("a batch repeating a grain got two hashes")
				}
				h = hs[0]
			} else {
				h = mustAdd(t, db, g)
				if h == old {
					t.Fatalf("re-adding after the user's erasure returned the erased hash")
				}
				if _, err := db.ForgetUser(ctx, "", "u1"); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := db.Get(ctx, "", h)
			if err != nil || got.UserID != "u1" {
				t.Fatalf("Get(new) = %+v, %v", got, err)
			}
			if n := recallCount(t, db, lethe.Query{UserID: "u1"}); n != 1 {
				t.Errorf("recall by user after re-adding: %d grains, want 1", n)
			}
			if n := recallCount(t, db, lethe.Query{Subject: "ada", Tags: []string{"x"}}); n != 1 {
				t.Errorf("recall by subject and tag after re-adding: %d grains, want 1", n)
			}
		}
		// The cleaner, run late, leaves the new grain alone.
		if _, err := db.PurgeErased(ctx); err != nil {
			t.Fatal(err)
		}
		if n := recallCount(t, db, lethe.Query{UserID: "u1"}); n != 1 {
			t.Errorf("after the cleaner: %d grains, want 1", n)
		}
		er, err := db.ForgetUser(ctx, "", "u1")
		if err != nil || er.Count != 1 {
			t.Errorf("ForgetUser after re-adding = %+v, %v; want 1 grain", er, err)
		}
	})
}

// A chain whose newest version was erased is not stuck: the surviving
// version stays superseded (not reinstated into default recall), history
// shows the erased link, and the surviving version can be superseded again.
func TestChainWithErasedHead(t *testing.T) {
	for _, how := range []string{"user", "scope"} {
		for _, clean := range []bool{false, true} {
			name := how
			if clean {
				name += "/cleaned"
			}
			t.Run(name, func(t *testing.T) {
				forEachBackend(t, func(t *testing.T, db *lethe.DB) {
					ctx := context.Background()
					db.PauseCleaner()
					g1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "ada", Relation: "lives", Object: "paris", UserID: "u1", Scope: "a"})
					next := lethe.Grain{Type: "fact", Object: "lyon", UserID: "u2"}
					if how == "scope" {
						next = lethe.Grain{Type: "fact", Object: "lyon", Scope: "b"}
					}
					g2, err := db.Supersede(ctx, g1, next)
					if err != nil {
						t.Fatal(err)
					}
					if how == "user" {
						_, err = db.ForgetUser(ctx, "", "u2")
					} else {
						_, err = db.EraseScope(ctx, "", "b")
					}
					if err != nil {
						t.Fatal(err)
					}
					if clean {
						if _, err := db.PurgeErased(ctx); err != nil {
							t.Fatal(err)
						}
					}
					if n := recallAsIs(t, db, lethe.Query{Subject: "ada"}); n != 0 {
						t.Errorf("the corrected version came back into default recall (%d grains)", n)
					}
					if n := recallAsIs(t, db, lethe.Query{Subject: "ada", IncludeSuperseded: true}); n != 1 {
						t.Errorf("include_superseded recalls %d grains, want the surviving version", n)
					}
					h, err := db.History(ctx, "", g1)
					if err != nil {
						t.Fatal(err)
					}
					if len(h) != 2 || !h[0].Erased || h[0].Hash != g2 || h[1].Hash != g1 || h[1].Erased {
						t.Fatalf("history = %+v, want the erased link then the survivor", h)
					}
					b, _ := json.Marshal(h[0])
					if string(b) != `{"hash":"`+g2+`","erased":true}` {
						t.Errorf("an erased version encodes as %s", b)
					}
					g3, err := db.Supersede(ctx, g1, lethe.Grain{Type: "fact", Object: "nice"})
					if err != nil {
						t.Fatalf("superseding the newest surviving version: %v", err)
					}
					h, err = db.History(ctx, "", g3)
					if err != nil || len(h) != 2 || h[0].Hash != g3 || h[1].Hash != g1 {
						t.Fatalf("history after superseding again = %+v, %v", h, err)
					}
					if _, err := db.Supersede(ctx, g1, lethe.Grain{Type: "fact", Object: "rome"}); lethe.ErrorCode(err) != "already_superseded" {
						t.Errorf("superseding a version with a live newer one: %v, want already_superseded", err)
					}
					if n := recallAsIs(t, db, lethe.Query{Subject: "ada"}); n != 1 {
						t.Errorf("default recall after superseding again: %d grains, want 1", n)
					}
				})
			})
		}
	}
}

// Text a person sees as the same matches: a subject or user id written in
// NFD finds, forgets and erases what was written in NFC.
func TestUnicodeEqualValuesMatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		const nfc, nfd = "Jos\u00e9", "Jose\u0301"
		h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: nfc, Relation: "likes", Object: "tea", UserID: nfc, Tags: []string{nfd}})
		if h2 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: nfd, Relation: "likes", Object: "tea", UserID: nfd, Tags: []string{nfc}}); h2 != h {
			t.Errorf("the same grain in NFD was stored twice")
		}
		for _, q := range []lethe.Query{{Subject: nfd}, {UserID: nfd}, {Tags: []string{nfc}}, {Subject: nfc, UserID: nfd}} {
			if n := recallCount(t, db, q); n != 1 {
				t.Errorf("recall %+v found %d grains, want 1", q, n)
			}
		}
		// Case is not folded for user ids.
		if n := recallCount(t, db, lethe.Query{UserID: "JOS\u00c9"}); n != 0 {
			t.Errorf("a user id in another case matched")
		}
		res, err := db.Forget(ctx, lethe.Selector{Subject: nfd})
		if err != nil || res.Count != 1 {
			t.Fatalf("forget by NFD subject = %+v, %v", res, err)
		}
		mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "x", UserID: nfc})
		if _, err := db.SetHold(ctx, lethe.HoldSpec{UserID: nfd}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ForgetUser(ctx, "", nfc); lethe.ErrorCode(err) != "held" {
			t.Errorf("a hold on the NFD user id did not hold the NFC one: %v", err)
		}
	})
}

// recallAsIs counts the grains of one page of q, with q's own flags.
func recallAsIs(t *testing.T, db *lethe.DB, q lethe.Query) int {
	t.Helper()
	p, err := db.Recall(context.Background(), q)
	if err != nil {
		t.Fatalf("Recall: %v", err)
	}
	return len(p.Grains)
}
