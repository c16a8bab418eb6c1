package api_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lethe-io/lethe/internal/api"
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
