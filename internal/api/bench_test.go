package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
)

// BenchmarkHTTPOverhead measures one client's get and recall on one SQLite
// store of 1,000 grains three ways: through the library (library), through
// the API's handler without a socket (handler: auth, access log, metrics,
// JSON), and over HTTP on loopback (http: the round trip and the client's
// side too, as lethe-load does). healthz/http is the round trip alone, and
// recall/library-deadline the library under a context that can be
// cancelled, as every request's is (go-sqlite3 before v1.14.52 stepped
// each row on a goroutine of its own; it now watches the context once per
// result set). See docs/performance.md.
func BenchmarkHTTPOverhead(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	db, err := lethe.Open(ctx, lethe.Config{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tokens, err := auth.Open(ctx, auth.Config{SQLitePath: filepath.Join(dir, "lethe.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer tokens.Close()
	secret, _, err := tokens.Create(ctx, auth.Spec{Roles: []auth.Role{auth.Reader, auth.Writer}, Memories: []string{"bench"}})
	if err != nil {
		b.Fatal(err)
	}
	// The access log is on, in JSON, as the server writes it.
	h := api.New(api.Config{Library: db, Tokens: tokens,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	srv := httptest.NewServer(h)
	defer srv.Close()
	gs := make([]lethe.Grain, 1000)
	for i := range gs {
		gs[i] = lethe.Grain{Memory: "bench", Type: "fact", Subject: fmt.Sprintf("subject-%d", i%100),
			Relation: "likes", Object: fmt.Sprintf("object-%d", i), UserID: fmt.Sprintf("user-%d", i%10)}
	}
	hashes, err := db.AddBatch(ctx, gs)
	if err != nil {
		b.Fatal(err)
	}
	hc := srv.Client()
	do := func(b *testing.B, method, path, body string) {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, srv.URL+path, r)
		req.Header.Set("Authorization", "Bearer "+secret)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
	}
	// healthz is the loopback round trip with no auth and no store.
	b.Run("healthz/http", func(b *testing.B) {
		for b.Loop() {
			do(b, http.MethodGet, "/healthz", "")
		}
	})
	// handler is the server's work alone, without the network or the
	// client.
	handler := func(b *testing.B, method, path, body string) {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req := httptest.NewRequest(method, path, r)
		req.Header.Set("Authorization", "Bearer "+secret)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%s %s: %d", method, path, w.Code)
		}
	}
	b.Run("get/handler", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			handler(b, http.MethodGet, "/api/memories/bench/grains/"+hashes[i%len(hashes)], "")
		}
	})
	b.Run("recall/handler", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			handler(b, http.MethodPost, "/api/memories/bench/recall", fmt.Sprintf(`{"subject":"subject-%d","limit":10}`, i%100))
		}
	})
	b.Run("get/library", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := db.Get(ctx, "bench", hashes[i%len(hashes)]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("get/http", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			do(b, http.MethodGet, "/api/memories/bench/grains/"+hashes[i%len(hashes)], "")
		}
	})
	b.Run("recall/library", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := db.Recall(ctx, lethe.Query{Memory: "bench", Subject: fmt.Sprintf("subject-%d", i%100), Limit: 10}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("recall/library-deadline", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err := db.Recall(ctx, lethe.Query{Memory: "bench", Subject: fmt.Sprintf("subject-%d", i%100), Limit: 10})
			cancel()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("recall/http", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			do(b, http.MethodPost, "/api/memories/bench/recall", fmt.Sprintf(`{"subject":"subject-%d","limit":10}`, i%100))
		}
	})
	b.Run("lookup", func(b *testing.B) {
		for b.Loop() {
			if _, err := tokens.Lookup(ctx, secret); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkScopedRecall measures a recall by subject (limit 10) through the
// handler with an unscoped token and with a scope-limited one, on a store
// of 1,000 grains each superseded once (1,000 heads, 1,000 older
// versions): a scope-limited token's page must not name a version outside
// its scopes, so every link of the page is checked (see docs/performance.md).
func BenchmarkScopedRecall(b *testing.B) {
	for _, kind := range []backendKind{sqliteBackend, postgresBackend} {
		b.Run(string(kind), func(b *testing.B) {
			f := newFixture(b, kind, nil)
			// The handler alone, as the server runs it (the fixture's also
			// checks every answer against the OpenAPI document).
			h := api.New(api.Config{Library: f.db, Tokens: f.tokens, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
			ctx := context.Background()
			gs := make([]lethe.Grain, 1000)
			for i := range gs {
				gs[i] = lethe.Grain{Memory: "bench", Type: "fact", Scope: "acme/prod", Subject: fmt.Sprintf("subject-%d", i%100),
					Relation: "likes", Object: fmt.Sprintf("object-%d", i)}
			}
			hashes, err := f.db.AddBatch(ctx, gs)
			if err != nil {
				b.Fatal(err)
			}
			for i, h := range hashes {
				if _, err := f.db.Supersede(ctx, h, lethe.Grain{Memory: "bench", Object: fmt.Sprintf("object-%d-v2", i)}); err != nil {
					b.Fatal(err)
				}
			}
			for _, tc := range []struct{ name, roles, scope, extra string }{
				{"unscoped", "reader", "", ""},
				{"scoped", "reader", "acme", ""},
				{"scoped-superseded-too", "reader", "acme", `,"include_superseded":true`},
			} {
				var secret string
				if tc.scope == "" {
					secret = f.token(tc.roles, []string{"bench"})
				} else {
					secret = f.token(tc.roles, []string{"bench"}, tc.scope)
				}
				b.Run(tc.name, func(b *testing.B) {
					for i := 0; b.Loop(); i++ {
						req := httptest.NewRequest(http.MethodPost, "/api/memories/bench/recall",
							strings.NewReader(fmt.Sprintf(`{"subject":"subject-%d","limit":10%s}`, i%100, tc.extra)))
						req.Header.Set("Authorization", "Bearer "+secret)
						req.Header.Set("Content-Type", "application/json")
						w := httptest.NewRecorder()
						h.ServeHTTP(w, req)
						if w.Code != http.StatusOK {
							b.Fatalf("recall: %d %s", w.Code, w.Body)
						}
					}
				})
			}
		})
	}
}
