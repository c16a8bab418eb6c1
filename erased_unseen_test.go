package lethe_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/mcp"
)

// TestErasedIsNoGrain: a crypto-erased grain leaves no trace on the wire.
// Every surface that takes a grain's hash (the HTTP routes, CAL, the MCP
// tools and resources) answers the hash of an erased grain exactly as it
// answers a hash that names nothing, byte for byte once the one hash is
// put for the other: before the cleaner deletes the erased rows and
// after. Erased grains of three kinds are asked about: a lone one, the
// erased newer version of a surviving grain, and the erased older version
// of one; by a token without scope limits, a scope-limited one, an MCP
// session and a locked one.
func TestErasedIsNoGrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		db.PauseCleaner() // the erased rows stay until PurgeErased
		w := newWire(t, db)

		// One erased grain of each kind per probe and phase: a probe may
		// delete or supersede what it asks about.
		type kinds struct{ lone, newer, older string }
		n := 0
		fresh := func() kinds {
			n++
			s := fmt.Sprintf("subject-%d", n)
			lone := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: s, Object: "lone", UserID: "u-gone", Scope: "s/x"})
			keep := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: s, Object: "kept", UserID: "u-keep", Scope: "s/x"})
			newer, err := db.Supersede(ctx, keep, lethe.Grain{UserID: "u-gone"})
			if err != nil {
				t.Fatal(err)
			}
			old := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: s, Object: "old", UserID: "u-gone", Scope: "s/x"})
			if _, err := db.Supersede(ctx, old, lethe.Grain{UserID: "u-keep"}); err != nil {
				t.Fatal(err)
			}
			return kinds{lone, newer, old}
		}
		live := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "live", UserID: "u-keep", Scope: "s/x"})
		probes := w.probes(live)
		var before, after []kinds
		for range probes {
			before, after = append(before, fresh()), append(after, fresh())
		}
		if _, err := db.ForgetUser(ctx, "", "u-gone"); err != nil {
			t.Fatal(err)
		}
		// The library keeps code erased for its callers until the cleaner
		// has run, with the message of a hash that names nothing.
		library := func(h string, want lethe.Code) {
			t.Helper()
			_, err := db.Get(ctx, "", h)
			var le *lethe.Error
			if lethe.ErrorCode(err) != want || !errors.As(err, &le) || le.Message != "no grain "+h+" in memory default" {
				t.Errorf("Get of an erased grain: %v (code %s), want code %s", err, lethe.ErrorCode(err), want)
			}
		}
		check := func(phase string, ks []kinds) {
			for i, p := range probes {
				for kind, h := range map[string]string{"lone": ks[i].lone, "newer": ks[i].newer, "older": ks[i].older} {
					missing := randomHash()
					e, m := p.ask(h), p.ask(missing)
					if got := strings.ReplaceAll(e, h, missing); got != m {
						t.Errorf("%s, %s, %s erased grain:\n got %s\nwant %s (as for a hash that names nothing)", phase, p.name, kind, e, m)
					}
				}
			}
		}
		library(before[0].lone, lethe.CodeErased)
		check("rows kept", before)
		if _, err := db.PurgeErased(ctx); err != nil {
			t.Fatal(err)
		}
		library(before[0].lone, lethe.CodeNotFound)
		check("rows cleaned", after)
		if _, err := db.Get(ctx, "", live); err != nil {
			t.Errorf("the live grain: %v", err)
		}
	})
}

func randomHash() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// wire is a DB behind every surface that takes a grain's hash.
type wire struct {
	t                    *testing.T
	srv                  *httptest.Server
	admin, scoped        string
	session, lockSession *sdk.ClientSession
}

func newWire(t *testing.T, db *lethe.DB) *wire {
	t.Helper()
	ctx := context.Background()
	tokens, err := auth.Open(ctx, auth.Config{SQLitePath: filepath.Join(t.TempDir(), "tokens.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	token := func(scopes ...string) string {
		secret, _, err := tokens.Create(ctx, auth.Spec{Roles: auth.ParseRoles("admin"), Memories: []string{"*"}, Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	w := &wire{t: t, admin: token(), scoped: token("s")}
	w.srv = httptest.NewServer(api.New(api.Config{Library: db, Tokens: tokens}))
	t.Cleanup(w.srv.Close)
	w.session = mcpSession(t, mcp.Config{Library: db})
	w.lockSession = mcpSession(t, mcp.Config{Library: db, LockScope: "s"})
	return w
}

func mcpSession(t *testing.T, cfg mcp.Config) *sdk.ClientSession {
	t.Helper()
	s, err := mcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "v0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// probe asks one surface about a hash and returns the whole answer.
type probe struct {
	name string
	ask  func(hash string) string
}

// probes are the requests about a hash; live is a grain that a dry run
// lists beside it.
func (w *wire) probes(live string) []probe {
	var ps []probe
	for _, tok := range []struct{ name, secret string }{{"admin", w.admin}, {"scoped", w.scoped}} {
		route := func(name, method, path, ctype string, body func(h string) string) {
			ps = append(ps, probe{tok.name + " " + name, func(h string) string {
				return w.call(tok.secret, method, strings.ReplaceAll(path, "{h}", h), ctype, body(h))
			}})
		}
		post := func(name, path string, body func(h string) string) {
			route(name, "POST", path, "application/json", body)
		}
		cal := func(name, stmt string) {
			route(name, "POST", "/cal", "text/cal", func(h string) string { return strings.ReplaceAll(stmt, "{h}", h) })
		}
		none := func(string) string { return "" }
		route("get", "GET", "/grains/{h}", "", none)
		route("history", "GET", "/grains/{h}/history", "", none)
		post("supersede", "/supersede", func(h string) string { return `{"blob_hash":"` + h + `","object":"new"}` })
		post("forget", "/forget", func(h string) string { return `{"blob_hash":"` + h + `"}` })
		post("forget dry run", "/forget", func(h string) string { return `{"blob_hash":"` + h + `","dry_run":true}` })
		post("forget list", "/forget", func(h string) string { return `{"hashes":["` + h + `"]}` })
		post("forget list dry run", "/forget", func(h string) string { return `{"hashes":["` + h + `"],"dry_run":true}` })
		post("forget list with a live grain dry run", "/forget", func(h string) string { return `{"hashes":["` + live + `","` + h + `"],"dry_run":true}` })
		post("forget narrowed", "/forget", func(h string) string { return `{"blob_hash":"` + h + `","user_id":"u-gone"}` })
		post("forget list narrowed", "/forget", func(h string) string { return `{"hashes":["` + h + `"],"user_id":"u-gone"}` })
		post("archive", "/archive", func(h string) string { return `{"hashes":["` + h + `"]}` })
		cal("CAL history", `HISTORY OF "{h}"`)
		cal("CAL forget", `FORGET "{h}"`)
		cal("CAL supersede", `SUPERSEDE "{h}" SET object = "new"`)
	}
	for _, s := range []struct {
		name string
		cs   *sdk.ClientSession
	}{{"mcp", w.session}, {"locked mcp", w.lockSession}} {
		tool := func(name, tool string, args func(h string) map[string]any) {
			ps = append(ps, probe{s.name + " " + name, func(h string) string { return w.tool(s.cs, tool, args(h)) }})
		}
		resource := func(name, suffix string) {
			ps = append(ps, probe{s.name + " " + name, func(h string) string { return w.resource(s.cs, mcp.GrainURI("default", h)+suffix) }})
		}
		tool("history", "history", func(h string) map[string]any { return map[string]any{"hash": h} })
		tool("supersede", "supersede", func(h string) map[string]any { return map[string]any{"hash": h, "object": "new"} })
		tool("forget", "forget", func(h string) map[string]any { return map[string]any{"hash": h} })
		tool("forget dry run", "forget", func(h string) map[string]any { return map[string]any{"hash": h, "dry_run": true} })
		tool("forget list", "forget", func(h string) map[string]any { return map[string]any{"hashes": []string{h}} })
		tool("forget list dry run", "forget", func(h string) map[string]any { return map[string]any{"hashes": []string{h}, "dry_run": true} })
		tool("forget list with a live grain dry run", "forget", func(h string) map[string]any {
			return map[string]any{"hashes": []string{live, h}, "dry_run": true}
		})
		resource("grain resource", "")
		resource("history resource", "/history")
	}
	return ps
}

func (w *wire) call(token, method, path, ctype, body string) string {
	w.t.Helper()
	req, err := http.NewRequest(method, w.srv.URL+"/api/memories/default"+path, strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := w.srv.Client().Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
}

func (w *wire) tool(cs *sdk.ClientSession, name string, args map[string]any) string {
	w.t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "protocol error: " + err.Error()
	}
	b, err := json.Marshal(res)
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

func (w *wire) resource(cs *sdk.ClientSession, uri string) string {
	w.t.Helper()
	res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: uri})
	if err != nil {
		return "error: " + err.Error()
	}
	b, err := json.Marshal(res)
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}
