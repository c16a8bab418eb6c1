package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/internal/mcp"
)

// TestBatchReachesServer: a batch of JSON-RPC messages reaches the server
// as sent, on both transports. The check that a body is JSON-RPC decoded a
// batch into a slice whose first element aliased the body, so it wrote the
// batch's first message over the body's own bytes, and the server read
// garbage.
func TestBatchReachesServer(t *testing.T) {
	const batch = `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`
	db := openDB(t)

	t.Run("http", func(t *testing.T) {
		h, err := mcp.NewHandler(mcp.Config{Library: db}, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		status, b := postRaw(t, srv.URL, batch, "Mcp-Protocol-Version", "2025-03-26") // batches ended with 2025-06-18
		if status != http.StatusOK || !strings.Contains(string(b), `"id":1`) || !strings.Contains(string(b), `"id":2`) {
			t.Errorf("batch of two pings: %d %s", status, b)
		}
	})

	t.Run("stdio", func(t *testing.T) {
		s, err := mcp.New(mcp.Config{Library: db})
		if err != nil {
			t.Fatal(err)
		}
		ss := startStdio(t, context.Background(), s)
		ss.send(batch)
		// The SDK answers a batch with a batch, on one line.
		got := string(ss.next("batch"))
		if !strings.Contains(got, `"id":1`) || !strings.Contains(got, `"id":2`) || strings.Contains(got, `"error"`) {
			t.Errorf("batch of two pings: reply %s", got)
		}
		ss.end()
	})
}
