package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
	lethemcp "github.com/lethe-io/lethe/internal/mcp"
)

// BenchmarkMCPRecall measures one recall by subject (2 of 200 grains) on
// the same SQLite store: the library's Recall, the REST API over HTTP, and
// the MCP recall tool over the SDK's in-memory transport, over /mcp
// (streamable HTTP, a server per request, each tool call through the API
// in process), and over stdio to a "lethe mcp" child process.
func BenchmarkMCPRecall(b *testing.B) {
	ctx := context.Background()
	data := filepath.Join(b.TempDir(), "data")
	db, err := lethe.Open(ctx, lethe.Config{DataDir: data})
	if err != nil {
		b.Fatal(err)
	}
	gs := make([]lethe.Grain, 200)
	for i := range gs {
		gs[i] = lethe.Grain{Type: "fact", Subject: fmt.Sprintf("s%d", i%100), Relation: "r", Object: fmt.Sprintf("o%d", i)}
	}
	if _, err := db.AddBatch(ctx, gs); err != nil {
		b.Fatal(err)
	}
	q := lethe.Query{Subject: "s42"}
	check := func(b *testing.B, n int) {
		if n != 2 {
			b.Fatalf("recall returned %d grains, want 2", n)
		}
	}
	tool := func(b *testing.B, cs *sdk.ClientSession) {
		params := &sdk.CallToolParams{Name: "recall", Arguments: map[string]any{"subject": "s42"}}
		b.ResetTimer()
		for b.Loop() {
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				b.Fatalf("recall: %v %v", err, res)
			}
		}
		b.StopTimer()
		res, _ := cs.CallTool(ctx, params)
		check(b, int(res.StructuredContent.(map[string]any)["count"].(float64)))
	}

	b.Run("library", func(b *testing.B) {
		for b.Loop() {
			p, err := db.Recall(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			check(b, len(p.Grains))
		}
	})
	b.Run("mcp-inmemory", func(b *testing.B) {
		s, err := lethemcp.New(lethemcp.Config{Library: db})
		if err != nil {
			b.Fatal(err)
		}
		st, ct := sdk.NewInMemoryTransports()
		ss, err := s.Connect(ctx, st, nil)
		if err != nil {
			b.Fatal(err)
		}
		cs, err := mcpClient().Connect(ctx, ct, nil)
		if err != nil {
			b.Fatal(err)
		}
		tool(b, cs)
		cs.Close()
		ss.Wait()
	})

	tokens, err := auth.Open(ctx, auth.Config{SQLitePath: filepath.Join(b.TempDir(), "tokens.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer tokens.Close()
	secret, _, err := tokens.Create(ctx, auth.Spec{Roles: []auth.Role{auth.Reader}, Memories: []string{"default"}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := withMCP(api.Config{Library: db, Tokens: tokens}, mcpServeConfig{})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	b.Run("rest-http", func(b *testing.B) {
		c := &client{base: srv.URL, token: secret, hc: srv.Client()}
		for b.Loop() {
			p, err := c.Recall(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			check(b, len(p.Grains))
		}
	})
	b.Run("mcp-http", func(b *testing.B) {
		tr := &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{secret}}}
		cs, err := mcpClient().Connect(ctx, tr, nil)
		if err != nil {
			b.Fatal(err)
		}
		tool(b, cs)
		cs.Close()
	})
	srv.Close()
	db.Close()

	b.Run("mcp-stdio", func(b *testing.B) {
		bin, err := exec.LookPath("lethe")
		if err != nil {
			b.Skip("lethe is not on $PATH")
		}
		cmd := exec.Command(bin, "mcp", "--data", data)
		cmd.Env = append(cmd.Environ(), "LETHE_SERVER=", "LETHE_POSTGRES_DSN=")
		cs, err := mcpClient().Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			b.Fatal(err)
		}
		tool(b, cs)
		cs.Close()
	})
}
