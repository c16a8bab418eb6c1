package lethe_test

import (
	"context"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
)

// Locate answers, for every hash, what Get answers of its place: the
// namespace and scope of a grain Get returns, and nothing for a hash that
// names no grain, a forgotten one, another memory's, or a version erased by
// another instance after this one had opened it (its cached keys must not
// make it readable). Both instances are asked, so the erasing one and the
// one that learns of the erasure from the store.
func TestLocateAnswersAsGet(t *testing.T) {
	forEachBackendTwice(t, func(t *testing.T, a, other *lethe.DB) {
		ctx := context.Background()
		other.PauseCleaner() // erased rows stay: Locate must leave them out by their keys' state
		a.PauseCleaner()
		kept := mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Object: "x", Scope: "acme/prod", UserID: "u-kept"})
		root := mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Object: "y"})
		old := mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Object: "z", Scope: "beta", Namespace: "ns1"})
		next, err := a.Supersede(ctx, old, lethe.Grain{Object: "z2", Scope: "gamma", Namespace: "ns2"})
		if err != nil {
			t.Fatal(err)
		}
		forgotten := mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Object: "f", Scope: "acme"})
		byUser := mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Object: "u", Scope: "acme", UserID: "u-erased"})
		inScope := mustAdd(t, a, lethe.Grain{Type: "fact", Subject: "ada", Object: "s", Scope: "doomed/x"})
		elsewhere := mustAdd(t, a, lethe.Grain{Memory: "m2", Type: "fact", Subject: "ada", Object: "m", Scope: "acme"})
		all := []string{kept, root, old, next, forgotten, byUser, inScope, elsewhere, strings.Repeat("0", 64)}
		// a opens every grain, so its key cache holds their keys.
		if got, err := a.Locate(ctx, "", all); err != nil || len(got) != 7 {
			t.Fatalf("Locate before = %v, %v; want 7 grains", got, err)
		}
		if _, err := a.Forget(ctx, lethe.Selector{Hash: forgotten}); err != nil {
			t.Fatal(err)
		}
		if _, err := other.ForgetUser(ctx, "", "u-erased"); err != nil {
			t.Fatal(err)
		}
		if _, err := other.EraseScope(ctx, "", "doomed"); err != nil {
			t.Fatal(err)
		}
		for _, db := range []*lethe.DB{a, other} {
			got, err := db.Locate(ctx, "", append(all, all...)) // repeated hashes too
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]lethe.Grain{}
			for _, h := range all {
				if g, err := db.Get(ctx, "", h); err == nil {
					want[h] = lethe.Grain{Hash: h, Memory: g.Memory, Namespace: g.Namespace, Scope: g.Scope}
				} else if c := lethe.ErrorCode(err); c != lethe.CodeNotFound && c != lethe.CodeErased {
					t.Fatalf("Get %s: %v", h, err)
				}
			}
			if len(got) != len(want) || len(want) != 4 {
				t.Errorf("Locate = %v, Get finds %v; want the same 4 grains", got, want)
			}
			for h, w := range want {
				if g := got[h]; g.Hash != w.Hash || g.Memory != w.Memory || g.Namespace != w.Namespace || g.Scope != w.Scope {
					t.Errorf("Locate[%s] = %+v, Get says %+v", h, g, w)
				}
			}
		}
		if got, err := a.Locate(ctx, "m2", []string{elsewhere, kept}); err != nil || len(got) != 1 || got[elsewhere].Scope != "acme" || got[elsewhere].Memory != "m2" {
			t.Errorf("Locate in m2 = %v, %v; want its one grain", got, err)
		}
		_, err = a.Locate(ctx, "", []string{kept, "nope"})
		wantCode(t, err, lethe.CodeInvalidArgument)
		if got, err := a.Locate(ctx, "", nil); err != nil || len(got) != 0 {
			t.Errorf("Locate of none = %v, %v", got, err)
		}
	})
}
