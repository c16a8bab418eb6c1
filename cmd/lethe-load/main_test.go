package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
)

// TestLoad runs a small load against a real server and checks every phase
// ran without errors.
func TestLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := lethe.Open(ctx, lethe.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tokens, err := auth.Open(ctx, auth.Config{SQLitePath: filepath.Join(dir, "lethe.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer tokens.Close()
	secret, _, err := tokens.Create(ctx, auth.Spec{Roles: []auth.Role{auth.Writer, auth.Reader, auth.DPO}, Memories: []string{"*"}})
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "token")
	os.WriteFile(tokFile, []byte(secret), 0o600)
	srv := httptest.NewServer(api.New(api.Config{Library: db, Tokens: tokens}))
	defer srv.Close()

	var out, errb bytes.Buffer
	err = run(ctx, []string{"--server", srv.URL, "--token-file", tokFile, "--grains", "300", "--batch", "100",
		"--users", "10", "--recalls", "50", "--gets", "20", "--forgets", "10", "--erasures", "2", "--json"}, &out, &errb)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"add (batch)": 300, "recall": 50, "get": 20, "forget (hash)": 10, "erase (user)": 60}
	for _, p := range r.Phases {
		if p.Errors != 0 || p.Items != want[p.Name] || p.P99 < p.P50 {
			t.Errorf("%s: %+v", p.Name, p)
		}
		delete(want, p.Name)
	}
	if len(want) != 0 {
		t.Errorf("phases missing: %v", want)
	}
}

func TestLoopbackOnly(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "t")
	os.WriteFile(tok, []byte("x"), 0o600)
	err := run(context.Background(), []string{"--server", "http://192.0.2.1:8080", "--token-file", tok}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a remote server was accepted: %v", err)
	}
	for _, h := range []string{"127.0.0.1", "localhost", "::1"} {
		if !loopback(h) {
			t.Errorf("%s is loopback", h)
		}
	}
}
