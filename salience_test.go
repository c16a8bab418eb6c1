package lethe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
)

// TestSalienceFadesOverHTTP checks MemState's ladder for API users: grains
// written through the HTTP API (salience as written, or 1), the clock
// moved on through Config.Now, and a memory_pressure run archives the
// grains nobody recalled (their salience faded below the threshold) and
// keeps the one that was recalled (the retrieval restarted its fading), the
// one written more salient, and the pinned one. A salience outside [0,1] is
// refused with invalid_argument.
func TestSalienceFadesOverHTTP(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var now atomic.Int64
	now.Store(time.Now().UnixMicro())
	clock := func() time.Time { return time.UnixMicro(now.Load()) }
	advance := func(d time.Duration) { now.Add(d.Microseconds()) }
	db := openDB(t, lethe.Config{DataDir: dir, Now: clock, ProofWait: time.Millisecond})
	tokens, err := auth.Open(ctx, auth.Config{SQLitePath: filepath.Join(dir, "lethe.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	secret, _, err := tokens.Create(ctx, auth.Spec{Roles: auth.ParseRoles("admin"), Memories: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Library: db, Tokens: tokens}))
	t.Cleanup(srv.Close)
	call := func(path string, body any, out any) int {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", srv.URL+"/api/memories/default/"+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rb, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode < 300 {
			if err := json.Unmarshal(rb, out); err != nil {
				t.Fatalf("%s: %s", path, rb)
			}
		}
		if out == nil && resp.StatusCode >= 300 {
			var e api.ErrorResponse
			json.Unmarshal(rb, &e)
			if e.Code != "invalid_argument" || e.Field != "salience" {
				t.Errorf("%s: %d %s", path, resp.StatusCode, rb)
			}
		}
		return resp.StatusCode
	}
	add := func(g api.GrainInput) string {
		t.Helper()
		var out api.AddResponse
		if s := call("grains", g, &out); s != http.StatusCreated {
			t.Fatalf("add: %d", s)
		}
		return out.Hash
	}
	for _, bad := range []any{1.5, -0.1} {
		if s := call("grains", map[string]any{"type": "fact", "subject": "x", "salience": bad}, nil); s != http.StatusBadRequest {
			t.Errorf("salience %v: %d, want 400", bad, s)
		}
	}
	unused := add(api.GrainInput{Type: "fact", Subject: "john", Object: "tea"})
	recalled := add(api.GrainInput{Type: "fact", Subject: "mary", Object: "coffee"})
	faint := add(api.GrainInput{Type: "fact", Subject: "bob", Object: "jazz", Salience: 0.2})
	pinned := add(api.GrainInput{Type: "fact", Subject: "ann", Object: "pop", Pinned: true})

	archive := func() *lethe.ArchiveResult {
		t.Helper()
		var res lethe.ArchiveResult
		if s := call("archive", map[string]any{"trigger": "memory_pressure"}, &res); s != http.StatusOK && s != http.StatusAccepted {
			t.Fatalf("archive: %d", s)
		}
		return &res
	}
	if res := archive(); res.Archived != 0 {
		t.Fatalf("fresh grains archived: %+v", res)
	}
	// 70 days: 1 * 2^(-70/30) = 0.20 (kept), 0.2 * 2^(-70/30) = 0.04 (archived).
	advance(70 * 24 * time.Hour)
	if res := archive(); !slices.Equal(res.Hashes, []string{faint}) {
		t.Fatalf("after 70 days archived %v, want only the grain written at salience 0.2", res.Hashes)
	}
	// Recall mary at day 120; at day 200 john has faded (2^(-200/30) =
	// 0.01), mary has not (2^(-80/30) * 1 = 0.16, the bump capped at 1).
	advance(50 * 24 * time.Hour)
	var page lethe.Page
	if s := call("recall", map[string]any{"subject": "mary"}, &page); s != http.StatusOK || len(page.Grains) != 1 {
		t.Fatalf("recall: %d %+v", s, page)
	}
	db.FlushRetrievals(context.Background())
	advance(80 * 24 * time.Hour)
	res := archive()
	if !slices.Equal(res.Hashes, []string{unused}) {
		t.Fatalf("after 200 days archived %v, want only the grain never recalled (%s)", res.Hashes, unused)
	}
	for h, want := range map[string]bool{unused: true, recalled: false, faint: true, pinned: false} {
		g, err := db.Get(ctx, "default", h)
		if err != nil {
			t.Fatal(err)
		}
		if g.Archived != want {
			t.Errorf("grain %s archived %v, want %v", g.Subject, g.Archived, want)
		}
	}
}
