package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
	lethemcp "github.com/lethe-io/lethe/internal/mcp"
	"github.com/lethe-io/lethe/internal/testenv"
)

type args = map[string]any

func mcpClient() *sdk.Client {
	return sdk.NewClient(&sdk.Implementation{Name: "lethe-test", Version: "v0"}, nil)
}

func toolNames(t testing.TB, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func callTool(t testing.TB, cs *sdk.ClientSession, name string, a args) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: a})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// structured decodes a result's structured content; want says whether it
// must be an error result.
func structured[T any](t testing.TB, res *sdk.CallToolResult, wantErr bool) T {
	t.Helper()
	var out T
	if res.IsError != wantErr {
		t.Fatalf("isError = %v, want %v: %v", res.IsError, wantErr, resultText(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return out
}

func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// errorCode returns the code of an error result.
func errorCode(t testing.TB, res *sdk.CallToolResult) string {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want an error result, got %s", resultText(res))
	}
	var info lethemcp.ErrorInfo
	if err := json.Unmarshal([]byte(resultText(res)), &info); err != nil {
		t.Fatalf("error result %q: %v", resultText(res), err)
	}
	return info.Code
}

// TestMCPStdio runs "lethe mcp" as a child process (the test binary, which
// testscript put on $PATH as lethe) and drives it with the SDK's client
// over stdin and stdout.
func TestMCPStdio(t *testing.T) {
	for _, v := range []string{"LETHE_SERVER", "LETHE_TOKEN_FILE", "LETHE_POSTGRES_DSN"} {
		t.Setenv(v, "")
	}
	data := filepath.Join(t.TempDir(), "data")
	caveat := strings.TrimSpace(mustCLI(t, "add", "--data", data, "caveat", "subject=stove", "content=never leave it on"))
	bin, err := exec.LookPath("lethe")
	if err != nil {
		t.Fatalf("lethe is not on $PATH (testscript.Main puts it there): %v", err)
	}
	ctx := context.Background()
	connect := func(extra ...string) (*sdk.ClientSession, *bytes.Buffer) {
		cmd := exec.Command(bin, append([]string{"mcp", "--data", data}, extra...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cs, err := mcpClient().Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, stderr.String())
		}
		return cs, &stderr
	}

	cs, stderr := connect()
	if got := toolNames(t, cs); !slices.Equal(got, []string{"add", "forget", "history", "recall", "supersede"}) {
		t.Errorf("tools %v", got)
	}
	h := structured[lethemcp.AddOutput](t, callTool(t, cs, "add", args{"type": "fact", "subject": "kettle", "content": "is electric", "user_id": "u7"}), false).Hash
	page := structured[lethemcp.RecallOutput](t, callTool(t, cs, "recall", args{"user_id": "u7"}), false)
	if page.Count != 1 || page.Grains[0].Hash != h || page.Grains[0].Content != "is electric" {
		t.Errorf("recall: %+v", page)
	}
	refused := structured[lethemcp.ForgetOutput](t, callTool(t, cs, "forget", args{"hash": caveat}), true)
	if !refused.Preserved || refused.Reason == "" || refused.Hint == "" {
		t.Errorf("forget a caveat: %+v", refused)
	}
	dry := structured[lethemcp.ForgetOutput](t, callTool(t, cs, "forget", args{"user_id": "u7", "dry_run": true}), false)
	if dry.Status != "would_forget" || !slices.Equal(dry.Hashes, []string{h}) {
		t.Errorf("dry run: %+v", dry)
	}
	sweep := structured[lethemcp.ForgetOutput](t, callTool(t, cs, "forget", args{"dry_run": true}), false)
	if sweep.Mode != "sweep" || sweep.Scanned == nil || *sweep.Scanned != 2 || sweep.ToDrop == nil || *sweep.ToDrop != 0 {
		t.Errorf("sweep dry run: %+v", sweep)
	}
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "forget_user", Arguments: args{"user_id": "u7"}}); err == nil {
		t.Error("forget_user answered without --allow-erase")
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v\n%s", err, stderr.String())
	}
	// Nothing personal reaches the process's stderr.
	for _, s := range []string{"kettle", "electric", "u7", "stove"} {
		if strings.Contains(stderr.String(), s) {
			t.Errorf("stderr mentions %q: %s", s, stderr.String())
		}
	}

	// Locked, with the erasure tools.
	cs, stderr = connect("--lock-scope", "acme", "--allow-erase")
	defer cs.Close()
	if got := toolNames(t, cs); !slices.Contains(got, "forget_user") || !slices.Contains(got, "erase_scope") {
		t.Errorf("--allow-erase tools %v", got)
	}
	// A grain outside the lock is no grain to the session.
	if code := errorCode(t, callTool(t, cs, "history", args{"hash": h})); code != "not_found" {
		t.Errorf("history outside the lock: %s", code)
	}
	hb := structured[lethemcp.AddOutput](t, callTool(t, cs, "add", args{"type": "fact", "content": "bot state"}), false).Hash
	if p := structured[lethemcp.RecallOutput](t, callTool(t, cs, "recall", args{}), false); p.Count != 1 || p.Grains[0].Hash != hb || p.Grains[0].Scope != "acme" {
		t.Errorf("locked recall: %+v", p)
	}
	if code := errorCode(t, callTool(t, cs, "forget_user", args{"user_id": "u7"})); code != "forbidden" {
		t.Errorf("forget_user under a lock: %s", code)
	}
	e := structured[lethemcp.ErasureOutput](t, callTool(t, cs, "erase_scope", args{"scope": "acme"}), false)
	if e.Count != 1 || e.EventID == "" {
		t.Errorf("erase_scope: %+v\n%s", e, stderr.String())
	}

	// Bad flags are usage errors.
	if _, _, err := cli(t, "mcp", "--data", data, "--lock-scope", "a//b"); err == nil || !strings.Contains(err.Error(), "lock scope") {
		t.Errorf("bad --lock-scope: %v", err)
	}
	if out := mustCLI(t, "mcp", "--help"); !strings.Contains(out, "--lock-namespace") {
		t.Errorf("mcp --help: %s", out)
	}
}

// bearer adds a token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpHTTP is lethe serve's handler (the API with /mcp) over a fresh store
// and token store, on an httptest server.
type mcpHTTP struct {
	db     *lethe.DB
	tokens *auth.Store
	srv    *httptest.Server
	logs   *testenv.Logs
}

func newMCPHTTP(t testing.TB, mc mcpServeConfig) *mcpHTTP {
	t.Helper()
	return newMCPHTTPOn(t, mc, "", nil)
}

// newMCPHTTPOn is newMCPHTTP on the PostgreSQL database postgres (the
// grains; "": SQLite), its API's library wrap(db) when wrap is set.
func newMCPHTTPOn(t testing.TB, mc mcpServeConfig, postgres string, wrap func(api.Library) api.Library) *mcpHTTP {
	t.Helper()
	dir := t.TempDir()
	ctx := context.Background()
	db, err := lethe.Open(ctx, lethe.Config{DataDir: dir, PostgresDSN: postgres})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tokens, err := auth.Open(ctx, auth.Config{SQLitePath: filepath.Join(dir, "lethe.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	logs := &testenv.Logs{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var lib api.Library = db
	if wrap != nil {
		lib = wrap(db)
	}
	h, err := withMCP(api.Config{Library: lib, Tokens: tokens, Logger: logger}, mc)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &mcpHTTP{db: db, tokens: tokens, srv: srv, logs: logs}
}

func (m *mcpHTTP) token(t testing.TB, spec auth.Spec) (string, *auth.Token) {
	t.Helper()
	if spec.Memories == nil {
		spec.Memories = []string{"default"}
	}
	secret, tok, err := m.tokens.Create(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	return secret, tok
}

func (m *mcpHTTP) connect(t testing.TB, secret string) *sdk.ClientSession {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: m.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer{secret}}}
	cs, err := mcpClient().Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestMCPHTTP drives /mcp of lethe serve's handler with the SDK's
// streamable HTTP client: bearer tokens, roles and scopes apply to every
// tool call as they do to the REST routes.
func TestMCPHTTP(t *testing.T) {
	ctx := context.Background()
	m := newMCPHTTP(t, mcpServeConfig{AllowErase: true})

	// No token, a bad token, a revoked token: 401, before MCP.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}`
	post := func(auth string) int {
		req, _ := http.NewRequest(http.MethodPost, m.srv.URL+"/mcp", strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	revoked, rtok := m.token(t, auth.Spec{Roles: []auth.Role{auth.Reader}})
	if err := m.tokens.Revoke(ctx, rtok.ID); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"", "Bearer", "Bearer lethe_nosuchtoken", "Basic abc", "Bearer " + revoked} {
		if code := post(a); code != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", a, code)
		}
	}
	if _, err := mcpClient().Connect(ctx, &sdk.StreamableClientTransport{Endpoint: m.srv.URL + "/mcp"}, nil); err == nil {
		t.Error("an SDK client without a token connected")
	}
	agentSecret, _ := m.token(t, auth.Spec{Roles: []auth.Role{auth.Reader, auth.Writer}})
	if code := post("Bearer " + agentSecret); code != http.StatusOK {
		t.Errorf("initialize with a token: %d", code)
	}
	// Stateless: no event stream (GET) and no session to end (DELETE), so
	// nothing stays open past the request its token authenticated; the
	// answer is a lethe error body, as for a malformed POST.
	for _, method := range []string{http.MethodGet, http.MethodDelete, http.MethodPut} {
		req, _ := http.NewRequest(method, m.srv.URL+"/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+agentSecret)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct{ Code, Message, Hint string }
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" ||
			json.Unmarshal(b, &e) != nil || e.Code != "method_not_allowed" || e.Hint == "" {
			t.Errorf("%s /mcp: %d Allow %q %s, want 405 method_not_allowed, Allow POST", method, resp.StatusCode, resp.Header.Get("Allow"), b)
		}
	}

	agent := m.connect(t, agentSecret)
	if got := toolNames(t, agent); !slices.Equal(got, []string{"add", "erase_scope", "forget", "forget_user", "history", "recall", "supersede"}) {
		t.Errorf("tools %v", got)
	}
	caveat := structured[lethemcp.AddOutput](t, callTool(t, agent, "add", args{"type": "caveat", "content": "the stove is hot"}), false).Hash
	plain := structured[lethemcp.AddOutput](t, callTool(t, agent, "add", args{"type": "fact", "subject": "kettle", "content": "is electric", "scope": "acme/prod"}), false).Hash
	if p := structured[lethemcp.RecallOutput](t, callTool(t, agent, "recall", args{"subject": "kettle"}), false); p.Count != 1 || p.Grains[0].Hash != plain {
		t.Errorf("recall over HTTP: %+v", p)
	}
	// The agent token has no dpo role: forget and the erasures are refused
	// by the API, and nothing changes.
	for _, c := range []struct {
		tool string
		a    args
	}{{"forget", args{"hash": plain}}, {"forget", args{"subject": "kettle"}}, {"forget", args{"dry_run": false}},
		{"forget_user", args{"user_id": "u1"}}, {"erase_scope", args{"scope": "acme"}}} {
		if code := errorCode(t, callTool(t, agent, c.tool, c.a)); code != "forbidden" {
			t.Errorf("agent %s %v: %s, want forbidden", c.tool, c.a, code)
		}
	}
	reader := m.connect(t, mustSecret(m.token(t, auth.Spec{Roles: []auth.Role{auth.Reader}})))
	for _, c := range []struct {
		tool string
		a    args
	}{{"forget", args{"hash": plain}}, {"add", args{"type": "fact", "content": "x"}},
		{"supersede", args{"hash": plain, "type": "fact", "content": "y"}}} {
		if code := errorCode(t, callTool(t, reader, c.tool, c.a)); code != "forbidden" {
			t.Errorf("reader %s: %s, want forbidden", c.tool, code)
		}
	}
	if _, err := m.db.Get(ctx, "", plain); err != nil {
		t.Fatalf("a refused call changed the store: %v", err)
	}

	// A DPO forgets, except what protection keeps.
	dpo := m.connect(t, mustSecret(m.token(t, auth.Spec{Roles: []auth.Role{auth.DPO, auth.Reader}})))
	// Its dry run is the server's: a held grain says so, with the hold.
	hold, err := m.db.SetHold(ctx, lethe.HoldSpec{Scope: "acme/prod"})
	if err != nil {
		t.Fatal(err)
	}
	if dry := structured[lethemcp.ForgetOutput](t, callTool(t, dpo, "forget", args{"hash": plain, "dry_run": true}), false); dry.Status != "held" || dry.HeldBy != hold.ID || dry.Count != 1 {
		t.Errorf("dry run of a held grain over HTTP: %+v, want held by %s", dry, hold.ID)
	}
	if dry := structured[lethemcp.ForgetOutput](t, callTool(t, dpo, "forget", args{"hash": caveat, "dry_run": true}), false); dry.Status != "protected" || dry.Reason == "" {
		t.Errorf("dry run of a caveat over HTTP: %+v", dry)
	}
	if err := m.db.ReleaseHold(ctx, "", hold.ID); err != nil {
		t.Fatal(err)
	}
	refused := structured[lethemcp.ForgetOutput](t, callTool(t, dpo, "forget", args{"hash": caveat}), true)
	if !refused.Preserved || refused.Code != "protected" {
		t.Errorf("forget a caveat over HTTP: %+v", refused)
	}
	out := structured[lethemcp.ForgetOutput](t, callTool(t, dpo, "forget", args{"subject": "kettle"}), false)
	if out.Status != "forgotten" || out.Count != 1 || out.EventID == "" {
		t.Errorf("forget over HTTP: %+v", out)
	}
	if _, err := m.db.Get(ctx, "", caveat); err != nil {
		t.Errorf("the caveat: %v", err)
	}

	// A scope-limited token: its scopes apply, and the session lock too.
	scoped := m.connect(t, mustSecret(m.token(t, auth.Spec{Roles: []auth.Role{auth.Reader, auth.Writer}, Scopes: []string{"acme/prod"}})))
	if code := errorCode(t, callTool(t, scoped, "add", args{"type": "fact", "content": "x", "scope": "acme/dev"})); code != "forbidden" {
		t.Errorf("scoped add outside: %s", code)
	}
	structured[lethemcp.AddOutput](t, callTool(t, scoped, "add", args{"type": "fact", "content": "in scope", "scope": "acme/prod/bot"}), false)
	if p := structured[lethemcp.RecallOutput](t, callTool(t, scoped, "recall", args{}), false); p.Count != 1 {
		t.Errorf("scoped recall: %d grains, want 1", p.Count)
	}
	// Another memory the token does not name.
	if code := errorCode(t, callTool(t, agent, "recall", args{"memory": "other"})); code != "forbidden" {
		t.Errorf("recall in another memory: %s", code)
	}

	// The server is shared; each call acts for its own request's token, so
	// revoking the agent's token stops its session at once.
	revokeID := ""
	list, err := m.tokens.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range list {
		if slices.Equal(tk.Roles, []auth.Role{auth.Reader, auth.Writer}) && len(tk.Scopes) == 0 {
			revokeID = tk.ID
		}
	}
	if err := m.tokens.Revoke(ctx, revokeID); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.CallTool(ctx, &sdk.CallToolParams{Name: "recall", Arguments: args{}}); err == nil {
		t.Error("a revoked token's session still recalls")
	}

	// The access log has the /mcp requests and the API calls they made,
	// and nothing personal.
	logs := m.logs.String()
	if !strings.Contains(logs, `"route":"/mcp"`) || !strings.Contains(logs, `"route":"/api/memories/:memory/recall"`) {
		t.Errorf("access log: %s", logs)
	}
	for _, s := range []string{"kettle", "electric", "stove", "u1", secretOf(agentSecret)} {
		if strings.Contains(logs, s) {
			t.Errorf("the log mentions %q", s)
		}
	}

	// Disabled: no route.
	off := newMCPHTTP(t, mcpServeConfig{Disable: true})
	req, _ := http.NewRequest(http.MethodPost, off.srv.URL+"/mcp", strings.NewReader(init))
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("disabled /mcp: %d, want 404", resp.StatusCode)
	}
}

// secretOf is the part of a token secret after its prefix.
func secretOf(s string) string { return strings.TrimPrefix(s, auth.SecretPrefix) }

func mustSecret(secret string, _ *auth.Token) string { return secret }

// TestMCPRemote runs "lethe mcp --server URL --token-file F" in process on
// pipes: the tools go through the API with that token's roles.
func TestMCPRemote(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := newMCPHTTP(t, mcpServeConfig{})
	h, err := m.db.Add(ctx, lethe.Grain{Type: "fact", Subject: "kettle", Content: "is electric"})
	if err != nil {
		t.Fatal(err)
	}
	secret, _ := m.token(t, auth.Spec{Roles: []auth.Role{auth.Reader}})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inAcme, err := m.db.Add(ctx, lethe.Grain{Type: "fact", Subject: "kettle", Content: "is blue", Scope: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	// An unlocked session, and one locked to acme: a refusal of the
	// server's (the token's roles) is answered in the server's words by
	// both, not as a version outside the lock.
	for _, lock := range []string{"", "acme"} {
		flags := []string{"mcp", "--server", m.srv.URL, "--token-file", tokenFile, "--allow-erase"}
		hash := h
		if lock != "" {
			flags, hash = append(flags, "--lock-scope", lock), inAcme
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		var stderr bytes.Buffer
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, flags, inR, outW, &stderr)
			outW.Close()
		}()
		cs, err := mcpClient().Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p := structured[lethemcp.RecallOutput](t, callTool(t, cs, "recall", args{"subject": "kettle"}), false); lock == "" && p.Count != 2 ||
			lock != "" && (p.Count != 1 || p.Grains[0].Hash != inAcme) {
			t.Errorf("remote recall, lock %q: %+v", lock, p)
		}
		for _, c := range []struct {
			tool string
			a    args
		}{{"forget", args{"hash": hash}}, {"forget", args{"hashes": []string{hash}}}, {"forget_user", args{"user_id": "u1"}},
			{"add", args{"type": "fact", "content": "x"}},
			// The dry run is the server's forget route's, which needs the dpo role.
			{"forget", args{"hash": hash, "dry_run": true}}} {
			if lock != "" && c.tool == "forget_user" {
				continue // refused by the lock itself: a user's key spans every scope
			}
			res := callTool(t, cs, c.tool, c.a)
			if code := errorCode(t, res); code != "forbidden" {
				t.Errorf("reader %s %v over --server, lock %q: %s, want forbidden", c.tool, c.a, lock, code)
				continue
			}
			var info lethemcp.ErrorInfo
			json.Unmarshal([]byte(resultText(res)), &info)
			if info.Message != "this token's roles do not allow this call" || !strings.HasPrefix(info.Hint, "it needs the ") {
				t.Errorf("reader %s %v over --server, lock %q: %+v, want the server's refusal", c.tool, c.a, lock, info)
			}
		}
		cs.Close()
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("lethe mcp: %v\n%s", err, stderr.String())
		}
	}
	if _, err := m.db.Get(ctx, "", h); err != nil {
		t.Errorf("the grain: %v", err)
	}
	if _, _, err := cli(t, "mcp", "--server", m.srv.URL, "--token-file", tokenFile, "--policy", "p.yaml"); err == nil {
		t.Error("--policy with --server accepted")
	}
}

// TestMCPTypeScriptClient drives "lethe mcp" with the TypeScript SDK's
// client: an independent implementation, which validates every structured
// result against its tool's output schema. It runs when
// $LETHE_TEST_MCP_TS names a directory where
// "npm install @modelcontextprotocol/sdk@1" ran.
func TestMCPTypeScriptClient(t *testing.T) {
	dir := os.Getenv("LETHE_TEST_MCP_TS")
	if dir == "" {
		t.Skip("set LETHE_TEST_MCP_TS to a directory holding npm's @modelcontextprotocol/sdk@1")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := exec.LookPath("lethe")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "mcp-ts", "check.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// Node resolves the SDK from the script's own directory.
	path := filepath.Join(dir, "lethe-mcp-check.mjs")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	cmd := exec.Command(node, path, bin, filepath.Join(t.TempDir(), "data"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	type result struct {
		IsError           bool                    `json:"isError"`
		StructuredContent lethemcp.ForgetOutput   `json:"structuredContent"`
		Content           []struct{ Text string } `json:"content"`
	}
	var out struct {
		Tools     map[string]sdk.ToolAnnotations `json:"tools"`
		Recall    lethemcp.RecallOutput          `json:"recall"`
		Refused   result                         `json:"refused"`
		DryRun    lethemcp.ForgetOutput          `json:"dryRun"`
		Sweep     lethemcp.ForgetOutput          `json:"sweep"`
		Bad       result                         `json:"bad"`
		Forgotten lethemcp.ForgetOutput          `json:"forgotten"`
		Resource  lethe.Grain                    `json:"resource"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(out.Tools) != 7 || !out.Tools["recall"].ReadOnlyHint || !out.Tools["history"].ReadOnlyHint ||
		out.Tools["forget"].DestructiveHint == nil || !*out.Tools["forget"].DestructiveHint ||
		out.Tools["add"].DestructiveHint == nil || *out.Tools["add"].DestructiveHint {
		t.Errorf("tools as the TypeScript client sees them: %s", b)
	}
	if out.Recall.Count != 1 || out.Recall.Grains[0].Content != "is electric" {
		t.Errorf("recall: %+v", out.Recall)
	}
	if r := out.Refused; !r.IsError || !r.StructuredContent.Preserved || r.StructuredContent.Reason == "" {
		t.Errorf("forget a caveat: %+v", r)
	}
	if out.DryRun.Status != "would_forget" || out.DryRun.Count != 1 || out.Sweep.Mode != "sweep" || out.Sweep.Scanned == nil {
		t.Errorf("dry runs: %+v %+v", out.DryRun, out.Sweep)
	}
	if !out.Bad.IsError || len(out.Bad.Content) != 1 || !strings.Contains(out.Bad.Content[0].Text, `"code":"invalid_argument"`) {
		t.Errorf("bad input: %+v", out.Bad)
	}
	if out.Forgotten.Status != "forgotten" || out.Resource.Type != "caveat" {
		t.Errorf("forget %+v, resource %+v", out.Forgotten, out.Resource)
	}
}

func TestServeConfigMCP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lethe.yaml")
	if err := os.WriteFile(path, []byte("mcp:\n  allow_erase: true\n  disable: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := defaultServeConfig()
	if err := loadServeConfig(path, &cfg); err != nil || !cfg.MCP.AllowErase || cfg.MCP.Disable {
		t.Errorf("mcp section: %+v, %v", cfg.MCP, err)
	}
	if err := os.WriteFile(path, []byte("mcp:\n  allow_erasure: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := loadServeConfig(path, &cfg); err == nil {
		t.Error("an unknown mcp key was accepted")
	}
}

// TestMCPHTTPRequests drives the erasure request tools at /mcp with the
// SDK's streamable HTTP client: each call goes through the REST routes
// with the session's token, so the dpo role and four eyes apply as they do
// there. One DPO files, cannot approve its own request, a second DPO
// approves, the first executes; other roles are refused and change nothing.
func TestMCPHTTPRequests(t *testing.T) {
	ctx := context.Background()
	m := newMCPHTTP(t, mcpServeConfig{AllowRequests: true})
	h, err := m.db.Add(ctx, lethe.Grain{Type: "fact", Content: "about u9", UserID: "u9"})
	if err != nil {
		t.Fatal(err)
	}
	dpoSecret, dpoTok := m.token(t, auth.Spec{Roles: []auth.Role{auth.DPO}})
	secondSecret, secondTok := m.token(t, auth.Spec{Roles: []auth.Role{auth.DPO}})
	dpo, second := m.connect(t, dpoSecret), m.connect(t, secondSecret)
	if got := toolNames(t, dpo); !slices.Contains(got, "erasure_request_create") || slices.Contains(got, "forget_user") {
		t.Errorf("tools with allow_requests only: %v", got)
	}
	filed := structured[lethemcp.RequestCreateOutput](t, callTool(t, dpo, "erasure_request_create",
		args{"user_id": "u9", "reason": "data_subject_request", "reference": "T-9"}), false)
	id := filed.Request.ID
	if filed.Request.RequestedBy != dpoTok.ID || filed.Preview == nil || filed.Preview.Count != 1 {
		t.Fatalf("create over /mcp: %+v %+v", filed.Request, filed.Preview)
	}
	// Other roles: refused by the API, before anything changes.
	for _, roles := range [][]auth.Role{{auth.Reader, auth.Writer}, {auth.Auditor}} {
		other := m.connect(t, mustSecret(m.token(t, auth.Spec{Roles: roles})))
		for _, c := range []struct {
			tool string
			a    args
		}{{"erasure_request_create", args{"user_id": "u9", "reason": "other", "reference": "T"}},
			{"erasure_request_list", args{}}, {"erasure_request_show", args{"id": id}},
			{"erasure_request_approve", args{"id": id}}, {"erasure_request_execute", args{"id": id}},
			{"erasure_request_reject", args{"id": id}}} {
			if code := errorCode(t, callTool(t, other, c.tool, c.a)); code != "forbidden" {
				t.Errorf("%v %s: %s, want forbidden", roles, c.tool, code)
			}
		}
	}
	if code := errorCode(t, callTool(t, dpo, "erasure_request_approve", args{"id": id})); code != "four_eyes" {
		t.Errorf("self-approval over /mcp: %s, want four_eyes", code)
	}
	if code := errorCode(t, callTool(t, dpo, "erasure_request_execute", args{"id": id})); code != "invalid_state" {
		t.Errorf("execute before approval: %s, want invalid_state", code)
	}
	if _, err := m.db.Get(ctx, "", h); err != nil {
		t.Fatalf("a refused call erased: %v", err)
	}
	approved := structured[lethemcp.RequestOutput](t, callTool(t, second, "erasure_request_approve", args{"id": id}), false)
	if approved.Request.Status != "approved" || approved.Request.ApprovedBy != secondTok.ID {
		t.Errorf("approve over /mcp: %+v", approved.Request)
	}
	out := structured[lethemcp.ErasureOutput](t, callTool(t, dpo, "erasure_request_execute", args{"id": id}), false)
	if out.Count != 1 || out.EventID == "" {
		t.Errorf("execute over /mcp: %+v", out)
	}
	list := structured[lethemcp.RequestListOutput](t, callTool(t, second, "erasure_request_list", args{"status": "executed"}), false)
	if list.Count != 1 || list.Requests[0].ID != id || list.Requests[0].ExecutedBy != dpoTok.ID {
		t.Errorf("list executed over /mcp: %+v", list)
	}
	if _, err := m.db.Get(ctx, "", h); lethe.ErrorCode(err) == "" {
		t.Error("the erased user's grain still reads")
	}
}

// TestMCPHTTPForgetRoles pins down the roles a forget needs over /mcp: by
// hash, dpo; by subject or user_id, dpo and reader, dry run included (the
// tool finds the grains with a recall, the reader route), where the REST
// forget by subject or user_id needs dpo alone.
func TestMCPHTTPForgetRoles(t *testing.T) {
	ctx := context.Background()
	m := newMCPHTTP(t, mcpServeConfig{})
	h, err := m.db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Content: "likes tea", UserID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	dpoSecret, _ := m.token(t, auth.Spec{Roles: []auth.Role{auth.DPO}})
	dpo := m.connect(t, dpoSecret)
	for _, a := range []args{{"subject": "alice", "dry_run": true}, {"user_id": "u1", "dry_run": true}, {"subject": "alice"}} {
		if code := errorCode(t, callTool(t, dpo, "forget", a)); code != "forbidden" {
			t.Errorf("dpo-only forget %v: code %s, want forbidden (the recall needs reader)", a, code)
		}
	}
	if out := structured[lethemcp.ForgetOutput](t, callTool(t, dpo, "forget", args{"hash": h, "dry_run": true}), false); out.Status != "would_forget" {
		t.Errorf("dpo-only forget by hash: %+v", out)
	}
	both := m.connect(t, mustSecret(m.token(t, auth.Spec{Roles: []auth.Role{auth.DPO, auth.Reader}})))
	if out := structured[lethemcp.ForgetOutput](t, callTool(t, both, "forget", args{"subject": "alice", "dry_run": true}), false); out.Status != "would_forget" || out.Count != 1 {
		t.Errorf("dpo and reader forget by subject: %+v", out)
	}

	// The REST route: dpo alone forgets by subject.
	req, _ := http.NewRequest(http.MethodPost, m.srv.URL+"/api/memories/default/forget",
		strings.NewReader(`{"subject":"alice","dry_run":true}`))
	req.Header.Set("Authorization", "Bearer "+dpoSecret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("REST forget by subject with a dpo-only token: %d %s, want 200", resp.StatusCode, b)
	}
}
