package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
	lethemcp "github.com/lethe-io/lethe/internal/mcp"
	"github.com/lethe-io/lethe/internal/testenv"
)

// forgetRacer is a server's library with a call forced into the window
// between the checks of a forget (the MCP tool's, then the route's) and
// the delete: before runs once, at the next Forget, before the library's.
type forgetRacer struct {
	api.Library
	before func()
}

func (r *forgetRacer) Forget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error) {
	if f := r.before; f != nil {
		r.before = nil
		f()
	}
	return r.Library.Forget(ctx, sel)
}

// remoteMCP runs "lethe mcp --server URL --token-file F" with flags, in
// process on pipes, for the token secret, and connects to it.
func remoteMCP(t *testing.T, m *mcpHTTP, secret string, flags ...string) *sdk.ClientSession {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"mcp", "--server", m.srv.URL, "--token-file", tokenFile}, flags...), inR, outW, &stderr)
		outW.Close()
	}()
	cs, err := mcpClient().Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("lethe mcp: %v\n%s", err, stderr.String())
		}
		cancel()
	})
	return cs
}

// TestMCPRemoteLockedForgetRacingSupersede is the MCP package's
// TestLockedForgetRacingSupersede and TestNamespaceLockedForgetRacingSupersede
// over --server: a session of "lethe mcp --server URL" locked to scope
// acme/prod (or namespace work) forgets a grain whose chain is inside the
// lock when the tool checks it, and a supersede that moves the chain's
// newest version out of the lock (to acme/dev, or namespace home) lands in
// the server before the delete. The session sends its lock in the forget's
// scopes or namespace, so the server refuses the forget in the delete's
// transaction: forbidden, naming no hash, dry run or not, with both
// versions still there. The token's own scopes (none, or acme) hold the
// moved version: when the lock was checked only by the tool, the server
// deleted it with the chain. SQLite and PostgreSQL.
func TestMCPRemoteLockedForgetRacingSupersede(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			var dsn string
			if kind == "postgres" {
				dsn = testenv.Postgres(t)
			}
			r := &forgetRacer{}
			m := newMCPHTTPOn(t, mcpServeConfig{}, dsn, func(lib api.Library) api.Library {
				r.Library = lib
				return r
			})
			for _, c := range []struct {
				name      string
				lock      []string
				scopes    []string // the token's
				in, moved func(g *lethe.Grain)
			}{
				{"scope", []string{"--lock-scope", "acme/prod"}, nil,
					func(g *lethe.Grain) { g.Scope = "acme/prod" }, func(g *lethe.Grain) { g.Scope = "acme/dev" }},
				{"scope, scoped token", []string{"--lock-scope", "acme/prod"}, []string{"acme"},
					func(g *lethe.Grain) { g.Scope = "acme/prod" }, func(g *lethe.Grain) { g.Scope = "acme/dev" }},
				{"namespace", []string{"--lock-namespace", "work"}, nil,
					func(g *lethe.Grain) { g.Namespace = "work" }, func(g *lethe.Grain) { g.Namespace = "home" }},
				{"namespace, scoped token", []string{"--lock-namespace", "work"}, []string{"acme"},
					func(g *lethe.Grain) { g.Namespace, g.Scope = "work", "acme/prod" }, func(g *lethe.Grain) { g.Namespace = "home" }},
			} {
				t.Run(c.name, func(t *testing.T) {
					raceRemoteLockedForget(t, m, r, c.lock, c.scopes, c.in, c.moved)
				})
			}
		})
	}
}

// raceRemoteLockedForget runs the forgets of a session of "lethe mcp
// --server" with the lock flags, for a token with scopes, while a
// supersede that moves the chain's newest version out of the lock lands
// in the server between the checks and the delete; in places a grain in
// the lock, moved sets the new version's scope or namespace.
func raceRemoteLockedForget(t *testing.T, m *mcpHTTP, r *forgetRacer, lock, scopes []string, in, moved func(g *lethe.Grain)) {
	t.Helper()
	ctx := context.Background()
	secret, _ := m.token(t, auth.Spec{Roles: []auth.Role{auth.Reader, auth.DPO}, Scopes: scopes})
	cs := remoteMCP(t, m, secret, lock...)
	for i, a := range []args{{"hash": ""}, {"hash": "", "dry_run": true}, {"hashes": nil}, {"hashes": nil, "dry_run": true}} {
		v1 := lethe.Grain{Type: "fact", Subject: "race", Content: fmt.Sprint("v1-", i, lock, scopes)}
		in(&v1)
		g1, err := m.db.Add(ctx, v1)
		if err != nil {
			t.Fatal(err)
		}
		var g2 string
		r.before = func() {
			v2 := v1
			v2.Content = fmt.Sprint("v2-", i, lock, scopes)
			moved(&v2)
			var err error
			if g2, err = m.db.Supersede(ctx, g1, v2); err != nil {
				t.Error(err)
			}
		}
		mode := "hash"
		if _, list := a["hashes"]; list {
			a["hashes"], mode = []string{g1}, "hashes"
		} else {
			a["hash"] = g1
		}
		res := callTool(t, cs, "forget", a)
		r.before = nil
		if g2 == "" {
			t.Fatalf("forget %v: the supersede did not run: %s", a, resultText(res))
		}
		var e lethemcp.ErrorInfo
		switch {
		case !res.IsError || json.Unmarshal([]byte(resultText(res)), &e) != nil:
			t.Errorf("forget %v: %s, want an error", a, resultText(res))
		case e.Code != "forbidden" || e.Field != mode || !strings.Contains(e.Message, "outside this session's lock"):
			t.Errorf("forget %v: %+v, want forbidden on %s", a, e, mode)
		case strings.Contains(resultText(res), g1) || strings.Contains(resultText(res), g2):
			t.Errorf("forget %v: %s names a hash", a, resultText(res))
		}
		for _, h := range []string{g1, g2} {
			if _, err := m.db.Get(ctx, "", h); err != nil {
				t.Errorf("forget %v: %s after a refused forget: %v", a, h[:8], err)
			}
		}
	}
}
