package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// racer is the library with a call forced into the window between a
// scope-limited token's check of a chain (its reads of the chain) and the
// forget's delete: before runs once, at the next Forget or ForceForget,
// before the library's.
type racer struct {
	api.Library
	before func()
}

func (r *racer) Forget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error) {
	r.race()
	return r.Library.Forget(ctx, sel)
}

func (r *racer) ForceForget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error) {
	r.race()
	return r.Library.ForceForget(ctx, sel)
}

func (r *racer) race() {
	if f := r.before; f != nil {
		r.before = nil
		f()
	}
}

// TestScopedForgetRacingSupersede: a scope-limited token (acme/prod)
// forgets a grain whose chain is within its scopes when the route checks
// it, and a supersede into acme/dev lands before the delete. The forget
// must answer what the check answers for such a chain, 403 forbidden
// (field blob_hash or hashes, naming no hash), dry run, force or not, with
// both versions still there; when the scopes were checked only before the
// delete, it deleted the acme/dev version (200, count 2).
func TestScopedForgetRacingSupersede(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		var r *racer
		f := newFixture(t, kind, func(c *api.Config) {
			r = &racer{Library: c.Library}
			c.Library = r
		})
		ctx := context.Background()
		admin := f.token("writer,reader,dpo", []string{"default"})
		scoped := f.token("writer,reader,dpo", []string{"default"}, "acme/prod")
		base := "/api/memories/default"
		for i, body := range []map[string]any{
			{"blob_hash": ""}, {"blob_hash": "", "dry_run": true}, {"blob_hash": "", "force": true},
			{"blob_hash": "", "subject": alice}, {"hashes": nil}, {"hashes": nil, "dry_run": true},
		} {
			g1 := f.add(scoped, "default", api.GrainInput{Type: "fact", Subject: alice, Object: fmt.Sprint("v1-", i), Scope: "acme/prod"})
			var g2 string
			r.before = func() {
				var err error
				g2, err = f.db.Supersede(ctx, g1, lethe.Grain{Type: "fact", Subject: alice, Object: fmt.Sprint("v2-", i), Scope: "acme/dev"})
				if err != nil {
					t.Fatal(err)
				}
			}
			field := "blob_hash"
			if _, ok := body["hashes"]; ok {
				body["hashes"], field = []string{g1}, "hashes"
			} else {
				body["blob_hash"] = g1
			}
			a := f.call(scoped, "POST", base+"/forget", body)
			if g2 == "" {
				t.Fatalf("%v: the supersede did not run", body)
			}
			f.wantField(a, 403, "forbidden", field)
			var e api.ErrorResponse
			a.decode(t, &e)
			if e.Message != field+": a version of the chain is outside this token's scopes" {
				t.Errorf("%v: message %q", body, e.Message)
			}
			if strings.Contains(string(a.body), g1) || strings.Contains(string(a.body), g2) {
				t.Errorf("%v: %s names a hash", body, a.body)
			}
			f.want(f.call(admin, "GET", base+"/grains/"+g1, nil), 200, "")
			f.want(f.call(admin, "GET", base+"/grains/"+g2, nil), 200, "")
		}
	})
}

// TestConfinedForgetRacingSupersede: a forget confined by its body
// (scopes, namespace) of a grain whose chain is within the confinement
// when the route reads it, while a supersede that moves the chain's newest
// version out of it lands before the delete. The forget must be refused,
// 403 forbidden (field blob_hash or hashes, naming no hash), dry run, force
// or not, with both versions still there: by a token without scope limits
// (the body's confinement alone), and by a token limited to acme, whose
// own scopes hold the moved version (the body's scopes acme/prod narrow
// them) or not (the body's acme, wider than the token, must not widen it).
// When the body's confinement was not passed to the delete, it deleted
// the moved version with the chain.
func TestConfinedForgetRacingSupersede(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		var r *racer
		f := newFixture(t, kind, func(c *api.Config) {
			r = &racer{Library: c.Library}
			c.Library = r
		})
		ctx := context.Background()
		admin := f.token("writer,reader,dpo", []string{"default"})
		acme := f.token("writer,reader,dpo", []string{"default"}, "acme")
		prod := f.token("writer,reader,dpo", []string{"default"}, "acme/prod")
		base := "/api/memories/default"
		for _, c := range []struct {
			name      string
			token     string
			confine   map[string]any
			in, moved api.GrainInput // scope and namespace of the versions
			message   string
		}{
			{"scopes", admin, map[string]any{"scopes": []string{"acme/prod"}},
				api.GrainInput{Scope: "acme/prod"}, api.GrainInput{Scope: "acme/dev"}, confinedRefusal},
			{"namespace", admin, map[string]any{"namespace": "work"},
				api.GrainInput{Namespace: "work"}, api.GrainInput{Namespace: "home"}, confinedRefusal},
			{"scopes and namespace", admin, map[string]any{"scopes": []string{"acme"}, "namespace": "work"},
				api.GrainInput{Scope: "acme/prod", Namespace: "work"}, api.GrainInput{Scope: "acme/prod", Namespace: "home"}, confinedRefusal},
			{"scopes within the token's", acme, map[string]any{"scopes": []string{"acme/prod"}},
				api.GrainInput{Scope: "acme/prod"}, api.GrainInput{Scope: "acme/dev"}, confinedRefusal},
			{"namespace, scoped token", acme, map[string]any{"namespace": "work"},
				api.GrainInput{Scope: "acme/prod", Namespace: "work"}, api.GrainInput{Scope: "acme/prod", Namespace: "home"}, confinedRefusal},
			{"scopes wider than the token's", prod, map[string]any{"scopes": []string{"acme"}},
				api.GrainInput{Scope: "acme/prod"}, api.GrainInput{Scope: "acme/dev"}, confinedRefusal},
		} {
			for i, body := range []map[string]any{
				{"blob_hash": ""}, {"blob_hash": "", "dry_run": true}, {"blob_hash": "", "force": true},
				{"hashes": nil}, {"hashes": nil, "dry_run": true},
			} {
				v1 := c.in
				v1.Type, v1.Subject, v1.Object = "fact", alice, fmt.Sprint("v1-", c.name, i)
				g1 := f.add(admin, "default", v1)
				var g2 string
				r.before = func() {
					var err error
					g2, err = f.db.Supersede(ctx, g1, lethe.Grain{Type: "fact", Subject: alice, Object: fmt.Sprint("v2-", c.name, i),
						Scope: c.moved.Scope, Namespace: c.moved.Namespace})
					if err != nil {
						t.Error(err)
					}
				}
				field := "blob_hash"
				if _, ok := body["hashes"]; ok {
					body["hashes"], field = []string{g1}, "hashes"
				} else {
					body["blob_hash"] = g1
				}
				for k, v := range c.confine {
					body[k] = v
				}
				a := f.call(c.token, "POST", base+"/forget", body)
				r.before = nil
				if g2 == "" {
					t.Fatalf("%s %v: the supersede did not run: %d %s", c.name, body, a.status, a.body)
				}
				f.wantField(a, 403, "forbidden", field)
				var e api.ErrorResponse
				a.decode(t, &e)
				if e.Message != field+": "+c.message {
					t.Errorf("%s %v: message %q", c.name, body, e.Message)
				}
				if strings.Contains(string(a.body), g1) || strings.Contains(string(a.body), g2) {
					t.Errorf("%s %v: %s names a hash", c.name, body, a.body)
				}
				f.want(f.call(admin, "GET", base+"/grains/"+g1, nil), 200, "")
				f.want(f.call(admin, "GET", base+"/grains/"+g2, nil), 200, "")
			}
		}
	})
}
