package api_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	lethemcp "github.com/lethe-io/lethe/internal/mcp"
)

// TestMCPMount checks that Config.MCP is served at /mcp, every method,
// only after the bearer token is checked.
func TestMCPMount(t *testing.T) {
	var reached atomic.Int32
	f := newFixture(t, sqliteBackend, func(c *api.Config) {
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached.Add(1)
			w.Write([]byte("mcp " + r.Method))
		})
	})
	for _, tok := range []string{"", "lethe_nosuchtoken"} {
		a := f.call(tok, http.MethodPost, "/mcp", `{}`)
		f.want(a, http.StatusUnauthorized, "unauthorized")
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the MCP handler ran %d times without a token", n)
	}
	reader := f.token("reader", []string{"default"})
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		a := f.call(reader, m, "/mcp", nil)
		if a.status != http.StatusOK || string(a.body) != "mcp "+m {
			t.Errorf("%s /mcp: %d %s", m, a.status, a.body)
		}
	}
	if logs := f.logs.String(); !strings.Contains(logs, `"route":"/mcp"`) {
		t.Errorf("no access log line for /mcp: %s", logs)
	}

	off := newFixture(t, sqliteBackend, nil)
	off.want(off.call(off.token("reader", []string{"default"}), http.MethodPost, "/mcp", `{}`), http.StatusNotFound, "route_not_found")
}

// TestMCPNoStore: an answer at /mcp is Cache-Control: no-store, as every
// answer of the API is (the package doc, "Personal data"), though the MCP
// SDK's transport sets its own (no-cache, which lets a cache keep a copy):
// a recall over MCP carries the grains' personal fields.
func TestMCPNoStore(t *testing.T) {
	var db *lethe.DB
	f := newFixture(t, sqliteBackend, func(c *api.Config) {
		db = c.Library.(*lethe.DB)
		h, err := lethemcp.NewHandler(lethemcp.Config{Library: db}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.MCP = h
	})
	reader := f.token("reader", []string{"default"})
	if _, err := db.Add(context.Background(), lethe.Grain{Type: "fact", Subject: alice, Relation: "likes", Object: "tea"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, body string }{
		{"initialize", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`},
		{"recall", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall","arguments":{"subject":"` + alice + `"}}}`},
		{"not JSON-RPC", `{}`},
	} {
		req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+reader)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if c.name == "recall" && !strings.Contains(string(body), alice) {
			t.Fatalf("recall over MCP: %d %s, want the grain", resp.StatusCode, body)
		}
		cc := resp.Header.Values("Cache-Control")
		if len(cc) != 1 || !slices.Contains(strings.Split(strings.ReplaceAll(cc[0], " ", ""), ","), "no-store") || strings.Contains(cc[0], "no-cache") {
			t.Errorf("%s: Cache-Control %q, want no-store", c.name, cc)
		}
	}
}
