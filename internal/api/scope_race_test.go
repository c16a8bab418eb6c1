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
		admin := f.token("writer,reader,dpo", []string{"default"})
		scoped := f.token("writer,reader,dpo", []string{"default"}, "acme/prod")
		for i, body := range []map[string]any{
			{"blob_hash": ""}, {"blob_hash": "", "dry_run": true}, {"blob_hash": "", "force": true},
			{"blob_hash": "", "subject": alice}, {"hashes": nil}, {"hashes": nil, "dry_run": true},
		} {
			raceForget(t, f, r, scoped, scoped, admin, body,
				api.GrainInput{Type: "fact", Subject: alice, Object: fmt.Sprint("v1-", i), Scope: "acme/prod"},
				lethe.Grain{Type: "fact", Subject: alice, Object: fmt.Sprint("v2-", i), Scope: "acme/dev"},
				"a version of the chain is outside this token's scopes", "")
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
		admin := f.token("writer,reader,dpo", []string{"default"})
		acme := f.token("writer,reader,dpo", []string{"default"}, "acme")
		prod := f.token("writer,reader,dpo", []string{"default"}, "acme/prod")
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
				for k, v := range c.confine {
					body[k] = v
				}
				raceForget(t, f, r, admin, c.token, admin, body, v1,
					lethe.Grain{Type: "fact", Subject: alice, Object: fmt.Sprint("v2-", c.name, i), Scope: c.moved.Scope, Namespace: c.moved.Namespace},
					c.message, c.name)
			}
		}
	})
}

// raceForget adds v1 with the token adder, then forgets it with token by
// body (its blob_hash or hashes filled in with v1's hash) while a
// supersede to moved lands just before the delete, and checks the forget
// was refused: 403 forbidden on the selector's field with message, naming
// no hash, and both versions still read by admin.
func raceForget(t *testing.T, f *fixture, r *racer, adder, token, admin string, body map[string]any, v1 api.GrainInput, moved lethe.Grain, message, label string) {
	t.Helper()
	const base = "/api/memories/default"
	g1 := f.add(adder, "default", v1)
	var g2 string
	r.before = func() {
		var err error
		if g2, err = f.db.Supersede(context.Background(), g1, moved); err != nil {
			t.Error(err)
		}
	}
	field := "blob_hash"
	if _, ok := body["hashes"]; ok {
		body["hashes"], field = []string{g1}, "hashes"
	} else {
		body["blob_hash"] = g1
	}
	a := f.call(token, "POST", base+"/forget", body)
	r.before = nil
	if g2 == "" {
		t.Fatalf("%s %v: the supersede did not run: %d %s", label, body, a.status, a.body)
	}
	f.wantField(a, 403, "forbidden", field)
	var e api.ErrorResponse
	a.decode(t, &e)
	if e.Message != field+": "+message {
		t.Errorf("%s %v: message %q", label, body, e.Message)
	}
	if strings.Contains(string(a.body), g1) || strings.Contains(string(a.body), g2) {
		t.Errorf("%s %v: %s names a hash", label, body, a.body)
	}
	f.want(f.call(admin, "GET", base+"/grains/"+g1, nil), 200, "")
	f.want(f.call(admin, "GET", base+"/grains/"+g2, nil), 200, "")
}
