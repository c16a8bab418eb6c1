package api_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// confinedRefusal is the message of a forget refused for a version outside
// the scopes or namespace its body confines it to (after the field).
const confinedRefusal = "a version of the chain is outside the scopes or namespace this forget is confined to"

// TestConfinedForget: a forget's scopes and namespace confine it to chains
// wholly within them, for a token without scope limits and for a
// scope-limited one, whose scopes they only narrow; malformed values are
// refused naming the field, before anything is deleted.
func TestConfinedForget(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		ctx := context.Background()
		admin := f.token("writer,reader,dpo", []string{"default"})
		prod := f.token("writer,reader,dpo", []string{"default"}, "acme/prod")
		base := "/api/memories/default"
		n := 0
		// chain writes a grain and a newer version of it, each in its
		// scope and namespace (in, then next), and returns both hashes.
		chain := func(in, next api.GrainInput) (string, string) {
			t.Helper()
			n++
			subject := fmt.Sprint("subject-confined-", n)
			in.Type, in.Subject, in.Object = "fact", subject, "v1"
			g1 := f.add(admin, "default", in)
			g2, err := f.db.Supersede(ctx, g1, lethe.Grain{Type: "fact", Subject: subject, Object: "v2",
				Scope: next.Scope, Namespace: next.Namespace})
			if err != nil {
				t.Fatal(err)
			}
			return g1, g2
		}
		both := func(g1, g2 string) {
			t.Helper()
			f.want(f.call(admin, "GET", base+"/grains/"+g1, nil), 200, "")
			f.want(f.call(admin, "GET", base+"/grains/"+g2, nil), 200, "")
		}
		with := func(body, confine map[string]any) map[string]any {
			out := map[string]any{}
			for _, m := range []map[string]any{body, confine} {
				for k, v := range m {
					out[k] = v
				}
			}
			return out
		}

		// Refused: a version of the chain is outside the confinement.
		{
			for _, c := range []struct {
				name     string
				token    string
				confine  map[string]any
				in, next api.GrainInput
			}{
				{"scopes", admin, map[string]any{"scopes": []string{"acme/prod"}},
					api.GrainInput{Scope: "acme/prod"}, api.GrainInput{Scope: "acme/dev"}},
				{"scopes, the chain's other way round", admin, map[string]any{"scopes": []string{"acme/dev", "other"}},
					api.GrainInput{Scope: "acme/prod"}, api.GrainInput{Scope: "acme/dev"}},
				{"namespace", admin, map[string]any{"namespace": "work"},
					api.GrainInput{Namespace: "work"}, api.GrainInput{Namespace: "home"}},
				{"the default namespace", admin, map[string]any{"namespace": "default"},
					api.GrainInput{}, api.GrainInput{Namespace: "home"}},
				{"scopes and namespace", admin, map[string]any{"scopes": []string{"acme"}, "namespace": "work"},
					api.GrainInput{Scope: "acme/prod", Namespace: "work"}, api.GrainInput{Scope: "acme/dev", Namespace: "home"}},
				{"scopes within the token's", prod, map[string]any{"scopes": []string{"acme/prod/bot1"}},
					api.GrainInput{Scope: "acme/prod/bot1"}, api.GrainInput{Scope: "acme/prod/bot2"}},
				{"namespace, scoped token", prod, map[string]any{"namespace": "work"},
					api.GrainInput{Scope: "acme/prod", Namespace: "work"}, api.GrainInput{Scope: "acme/prod", Namespace: "home"}},
			} {
				g1, g2 := chain(c.in, c.next)
				bodies := []map[string]any{
					{"blob_hash": g1}, {"blob_hash": g1, "dry_run": true}, {"blob_hash": g1, "force": true},
					{"hashes": []string{g2, g1}}, {"hashes": []string{g1}, "dry_run": true},
				}
				if c.token == admin {
					bodies = append(bodies, map[string]any{"subject": fmt.Sprint("subject-confined-", n)},
						map[string]any{"blob_hash": g1, "subject": fmt.Sprint("subject-confined-", n)})
				}
				for _, body := range bodies {
					a := f.call(c.token, "POST", base+"/forget", with(body, c.confine))
					field := "blob_hash"
					for _, k := range []string{"subject", "hashes"} {
						if _, ok := body[k]; ok && body["blob_hash"] == nil {
							field = k
						}
					}
					f.wantField(a, 403, "forbidden", field)
					var e api.ErrorResponse
					a.decode(t, &e)
					if e.Message != field+": "+confinedRefusal {
						t.Errorf("%s %v: message %q", c.name, body, e.Message)
					}
					if strings.Contains(string(a.body), g1) || strings.Contains(string(a.body), g2) {
						t.Errorf("%s %v: %s names a hash", c.name, body, a.body)
					}
					both(g1, g2)
				}
				// Without the confinement the token may forget the chain.
				var res lethe.ForgetResult
				a := f.call(c.token, "POST", base+"/forget", map[string]any{"blob_hash": g1, "dry_run": true})
				f.want(a, 200, "")
				a.decode(t, &res)
				if res.Status != "would_forget" || res.Count != 2 {
					t.Errorf("%s, not confined: %s", c.name, a.body)
				}
			}
		}

		// Within: the chain is wholly inside the confinement.
		{
			for _, c := range []struct {
				name     string
				token    string
				confine  map[string]any
				in, next api.GrainInput
			}{
				{"scopes", admin, map[string]any{"scopes": []string{"acme/dev", "/acme/prod/"}},
					api.GrainInput{Scope: "acme/prod"}, api.GrainInput{Scope: "acme/dev"}},
				{"namespace", admin, map[string]any{"namespace": "work"},
					api.GrainInput{Namespace: "work"}, api.GrainInput{Namespace: "work"}},
				{"the default namespace", admin, map[string]any{"namespace": "default"},
					api.GrainInput{}, api.GrainInput{Namespace: "default"}},
				{"a parent of the token's scope", prod, map[string]any{"scopes": []string{"acme"}, "namespace": "work"},
					api.GrainInput{Scope: "acme/prod", Namespace: "work"}, api.GrainInput{Scope: "acme/prod/bot1", Namespace: "work"}},
				{"within the token's scope", prod, map[string]any{"scopes": []string{"acme/prod/bot1"}},
					api.GrainInput{Scope: "acme/prod/bot1"}, api.GrainInput{Scope: "acme/prod/bot1/x"}},
			} {
				g1, g2 := chain(c.in, c.next)
				var res lethe.ForgetResult
				a := f.call(c.token, "POST", base+"/forget", with(map[string]any{"blob_hash": g1, "dry_run": true}, c.confine))
				f.want(a, 200, "")
				a.decode(t, &res)
				if !res.DryRun || res.Status != "would_forget" || res.Count != 2 {
					t.Errorf("%s: dry run %s", c.name, a.body)
				}
				both(g1, g2)
				a = f.call(c.token, "POST", base+"/forget", with(map[string]any{"hashes": []string{g1}}, c.confine))
				if a.status != 200 && a.status != 202 {
					t.Fatalf("%s: %d %s", c.name, a.status, a.body)
				}
				res = lethe.ForgetResult{}
				a.decode(t, &res)
				if want := []string{g1, g2}; res.Status != "forgotten" || !slices.Equal(sorted(res.Hashes), sorted(want)) {
					t.Errorf("%s: %s", c.name, a.body)
				}
			}
		}

		// A scope-limited token's scopes that meet none of its own.
		{
			g1, g2 := chain(api.GrainInput{Scope: "acme/prod"}, api.GrainInput{Scope: "acme/prod"})
			for _, c := range []struct {
				scopes []string
				field  string
			}{
				{[]string{"other"}, "scopes[0]"},
				{[]string{"acme/prod", "acme/production"}, "scopes[1]"},
				{[]string{"acme/dev"}, "scopes[0]"},
			} {
				for _, body := range []map[string]any{{"blob_hash": g1}, {"hashes": []string{g1}, "dry_run": true}} {
					a := f.call(prod, "POST", base+"/forget", with(body, map[string]any{"scopes": c.scopes}))
					f.wantField(a, 403, "forbidden", c.field)
					both(g1, g2)
				}
			}
		}

		// Malformed confinements, refused before anything is deleted.
		{
			g1, g2 := chain(api.GrainInput{Scope: "acme/prod"}, api.GrainInput{Scope: "acme/prod"})
			many := make([]string, 65)
			for i := range many {
				many[i] = fmt.Sprint("acme/prod/s", i)
			}
			for _, c := range []struct {
				name    string
				confine map[string]any
				code    string
				field   string
			}{
				{"no scopes", map[string]any{"scopes": []string{}}, "invalid_scope", "scopes"},
				{"the root", map[string]any{"scopes": []string{"acme/prod", "/"}}, "invalid_scope", "scopes[1]"},
				{"an empty prefix", map[string]any{"scopes": []string{""}}, "invalid_scope", "scopes[0]"},
				{"a malformed prefix", map[string]any{"scopes": []string{"acme//prod"}}, "invalid_scope", "scopes[0]"},
				{"too many", map[string]any{"scopes": many}, "too_large", "scopes"},
				{"an empty namespace", map[string]any{"namespace": ""}, "invalid_argument", "namespace"},
				{"a malformed namespace", map[string]any{"namespace": "work space"}, "invalid_argument", "namespace"},
				{"a malformed namespace with scopes", map[string]any{"scopes": []string{"acme"}, "namespace": "-"}, "invalid_argument", "namespace"},
			} {
				for _, token := range []string{admin, prod} {
					for _, body := range []map[string]any{{"blob_hash": g1}, {"hashes": []string{g1}, "dry_run": true}} {
						a := f.call(token, "POST", base+"/forget", with(body, c.confine))
						f.wantField(a, 400, c.code, c.field)
						if strings.Contains(string(a.body), "work space") || strings.Contains(string(a.body), "acme//prod") {
							t.Errorf("%s: %s quotes the value", c.name, a.body)
						}
					}
				}
				both(g1, g2)
			}
		}
	})
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
