package lethe_test

import (
	"context"
	"slices"
	"testing"

	"github.com/lethe-io/lethe"
)

// TestUserForgetTakesWholeChains pins the documented behaviour of a forget
// by user (and narrowed by user): a version chain is one fact, so the
// chain of a user's grain goes whole, another user's versions included,
// and the dry run lists them first; ForgetUser instead leaves the other
// user's version readable.
func TestUserForgetTakesWholeChains(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		chain := func(obj string) (string, string) {
			t.Helper()
			h1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s", Relation: "r", Object: obj + "1", UserID: "u1"})
			h2, err := db.Supersede(ctx, h1, lethe.Grain{Type: "fact", Subject: "s", Relation: "r", Object: obj + "2", UserID: "u2"})
			if err != nil {
				t.Fatal(err)
			}
			return h1, h2
		}
		for _, sel := range []func(h1 string) lethe.Selector{
			func(string) lethe.Selector { return lethe.Selector{UserID: "u1"} },
			func(h1 string) lethe.Selector { return lethe.Selector{Hashes: []string{h1}, UserID: "u1"} },
		} {
			h1, h2 := chain("a")
			want := []string{h1, h2}
			slices.Sort(want)
			s := sel(h1)
			s.DryRun = true
			dry, err := db.Forget(ctx, s)
			if err != nil || dry.Status != "would_forget" || !slices.Equal(dry.Hashes, want) {
				t.Fatalf("dry run %+v: %+v, %v; want %v", s, dry, err, want)
			}
			s.DryRun = false
			res, err := db.Forget(ctx, s)
			if err != nil || res.Count != 2 || !slices.Equal(res.Hashes, want) {
				t.Fatalf("forget %+v: %+v, %v; want %v", s, res, err, want)
			}
			if _, err := db.Get(ctx, "", h2); lethe.ErrorCode(err) != lethe.CodeNotFound {
				t.Fatalf("u2's version after a forget narrowed by u1: %v, want not_found", err)
			}
		}
		// ForgetUser erases u1's version only.
		h1, h2 := chain("b")
		if _, err := db.ForgetUser(ctx, "", "u1"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Get(ctx, "", h1); lethe.ErrorCode(err) == "" {
			t.Error("u1's version reads after ForgetUser")
		}
		if g, err := db.Get(ctx, "", h2); err != nil || g.UserID != "u2" {
			t.Errorf("u2's version after ForgetUser(u1): %+v, %v", g, err)
		}
	})
}
