package api_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// Personal values the suite writes. None may appear in the access log.
const (
	alice   = "subject-alice-5b1e"
	bob     = "subject-bob-c93a"
	userU1  = "user-u1-77d0"
	userU2  = "user-u2-a41f"
	content = "content-private-9e2c"
)

// fixture is a real server over a real store.
type fixture struct {
	t       testing.TB
	db      *lethe.DB
	tokens  *auth.Store
	srv     *httptest.Server
	logs    *testenv.Logs
	secrets []string // every token secret, which the log must not hold
}

type backendKind string

const (
	sqliteBackend   backendKind = "sqlite"
	postgresBackend backendKind = "postgres"
)

func newFixture(tb testing.TB, kind backendKind, mutate func(*api.Config)) *fixture {
	tb.Helper()
	return newStoreFixture(tb, kind, nil, nil, mutate)
}

// newStoreFixture is newFixture whose store's configuration store, and
// token store's configuration tokenCfg, change first.
func newStoreFixture(tb testing.TB, kind backendKind, store func(*lethe.Config), tokenCfg func(*auth.Config), mutate func(*api.Config)) *fixture {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	cfg := lethe.Config{DataDir: dir, ProofWait: 5 * time.Second}
	tcfg := auth.Config{SQLitePath: filepath.Join(dir, "lethe.db")}
	if kind == postgresBackend {
		dsn := testenv.Postgres(tb)
		cfg.PostgresDSN, tcfg = dsn, auth.Config{PostgresDSN: dsn}
	}
	if store != nil {
		store(&cfg)
	}
	if tokenCfg != nil {
		tokenCfg(&tcfg)
	}
	db, err := lethe.Open(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tokens, err := auth.Open(ctx, tcfg)
	if err != nil {
		db.Close()
		tb.Fatal(err)
	}
	logs := &testenv.Logs{}
	acfg := api.Config{Library: db, Tokens: tokens, Logger: slog.New(slog.NewJSONHandler(logs, nil))}
	if mutate != nil {
		mutate(&acfg)
	}
	srv := httptest.NewServer(withContract(tb, api.New(acfg)))
	tb.Cleanup(func() {
		srv.Close()
		tokens.Close()
		db.Close()
	})
	return &fixture{t: tb, db: db, tokens: tokens, srv: srv, logs: logs}
}

// token creates a token and returns its secret.
func (f *fixture) token(roles string, memories []string, scopes ...string) string {
	f.t.Helper()
	secret, _, err := f.tokens.Create(context.Background(), auth.Spec{Roles: auth.ParseRoles(roles), Memories: memories, Scopes: scopes})
	if err != nil {
		f.t.Fatal(err)
	}
	f.secrets = append(f.secrets, secret)
	return secret
}

// answer is a response, read.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) errCode() string {
	var e api.ErrorResponse
	json.Unmarshal(a.body, &e)
	return e.Code
}

func (a answer) decode(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		tb.Fatalf("decode %s: %v", a.body, err)
	}
}

// call sends body (a string or []byte is sent as is, anything else as
// JSON) with the token.
func (f *fixture) call(token, method, path string, body any) answer {
	return f.callType(token, method, path, "application/json", body)
}

func (f *fixture) callType(token, method, path, ctype string, body any) answer {
	f.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, r)
	if err != nil {
		f.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil && ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

func (f *fixture) want(a answer, status int, code string) {
	f.t.Helper()
	if a.status != status || (code != "" && a.errCode() != code) {
		f.t.Errorf("got %d %s, want %d %s", a.status, a.body, status, code)
	}
}

// wantField is want for an error that names field.
func (f *fixture) wantField(a answer, status int, code, field string) {
	f.t.Helper()
	var e api.ErrorResponse
	json.Unmarshal(a.body, &e)
	if a.status != status || e.Code != code || e.Field != field {
		f.t.Errorf("got %d %s, want %d %s field %q", a.status, a.body, status, code, field)
	}
}

func (f *fixture) add(token, memory string, g api.GrainInput) string {
	f.t.Helper()
	a := f.call(token, "POST", "/api/memories/"+memory+"/grains", g)
	if a.status != http.StatusCreated {
		f.t.Fatalf("add: %d %s", a.status, a.body)
	}
	var out api.AddResponse
	a.decode(f.t, &out)
	return out.Hash
}

func forEachBackend(t *testing.T, fn func(t *testing.T, kind backendKind)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteBackend) })
	t.Run("postgres", func(t *testing.T) { fn(t, postgresBackend) })
}

// TestAPI runs the whole suite over real HTTP, on SQLite and PostgreSQL.
func TestAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		t.Run("operations", func(t *testing.T) { f.t = t; testOperations(f) })
		t.Run("grains", func(t *testing.T) { f.t = t; testGrains(f) })
		t.Run("authentication", func(t *testing.T) { f.t = t; testAuthentication(f) })
		t.Run("roles", func(t *testing.T) { f.t = t; testRoles(f) })
		t.Run("scopes", func(t *testing.T) { f.t = t; testScopes(f) })
		t.Run("scopes_unseen", func(t *testing.T) { f.t = t; testScopesUnseen(f) })
		t.Run("bad_input", func(t *testing.T) { f.t = t; testBadInput(f) })
		t.Run("tokens", func(t *testing.T) { f.t = t; testTokens(f) })
		t.Run("erasure", func(t *testing.T) { f.t = t; testErasure(f) })
		t.Run("history_export", func(t *testing.T) { f.t = t; testHistoryExport(f) })
		t.Run("forgetting", func(t *testing.T) { f.t = t; testForgetting(f) })
		t.Run("audit", func(t *testing.T) { f.t = t; testAudit(f) })
		t.Run("access_log", func(t *testing.T) { f.t = t; testAccessLog(f) })
	})
}

func testOperations(f *fixture) {
	f.want(f.call("", "GET", "/healthz", nil), 200, "")
	a := f.call("", "GET", "/readyz", nil)
	f.want(a, 200, "")
	if !strings.Contains(string(a.body), `"ready"`) {
		f.t.Errorf("readyz: %s", a.body)
	}
	a = f.call("", "GET", "/openapi.json", nil)
	if a.status != 200 || !bytes.Equal(a.body, api.OpenAPI) {
		f.t.Errorf("openapi.json: %d", a.status)
	}
	f.call("", "GET", "/nope", nil)
	a = f.call("", "GET", "/metrics", nil)
	if a.status != 200 || !strings.Contains(string(a.body), `lethe_http_requests_total{method="GET",route="/healthz",status="200"}`) ||
		!strings.Contains(string(a.body), `route="unmatched"`) {
		f.t.Errorf("metrics: %d\n%s", a.status, a.body)
	}
}

func testGrains(f *fixture) {
	w := f.token("writer,reader,dpo", []string{"default", "m2"})
	base := "/api/memories/default"

	h1 := f.add(w, "default", api.GrainInput{Type: "fact", Subject: alice, Relation: "likes", Object: "tea", UserID: userU1, Tags: []string{"drinks"}})
	if again := f.add(w, "default", api.GrainInput{Type: "fact", Subject: alice, Relation: "likes", Object: "tea", UserID: userU1, Tags: []string{"drinks"}}); again != h1 {
		f.t.Errorf("a retried add gave %s, want the existing %s", again, h1)
	}
	a := f.call(w, "POST", base+"/grains", api.AddBatchRequest{Grains: []api.GrainInput{
		{Type: "fact", Subject: bob, Relation: "likes", Object: "jazz", UserID: userU2},
		{Type: "observation", Content: content, UserID: userU2, Scope: "acme/prod"},
	}})
	f.want(a, 201, "")
	var batch api.AddBatchResponse
	a.decode(f.t, &batch)
	if batch.Count != 2 || len(batch.Hashes) != 2 {
		f.t.Fatalf("batch: %+v", batch)
	}

	a = f.call(w, "GET", base+"/grains/"+h1, nil)
	f.want(a, 200, "")
	var g lethe.Grain
	a.decode(f.t, &g)
	if g.Hash != h1 || g.Subject != alice || g.Object != "tea" || g.UserID != userU1 || g.Memory != "default" {
		f.t.Errorf("get: %+v", g)
	}

	a = f.call(w, "POST", base+"/recall", api.RecallRequest{Subject: alice})
	f.want(a, 200, "")
	var page lethe.Page
	a.decode(f.t, &page)
	if len(page.Grains) != 1 || page.Grains[0].Hash != h1 {
		f.t.Errorf("recall: %+v", page)
	}
	a = f.call(w, "POST", base+"/recall", api.RecallRequest{UserID: userU2, Limit: 1})
	a.decode(f.t, &page)
	if len(page.Grains) != 1 || page.Next == "" {
		f.t.Errorf("recall page 1: %+v", page)
	}
	a = f.call(w, "POST", base+"/recall", api.RecallRequest{UserID: userU2, Limit: 1, Cursor: page.Next})
	a.decode(f.t, &page)
	if len(page.Grains) != 1 {
		f.t.Errorf("recall page 2: %+v", page)
	}
	// Other memories are other memories.
	a = f.call(w, "POST", "/api/memories/m2/recall", api.RecallRequest{})
	a.decode(f.t, &page)
	if len(page.Grains) != 0 {
		f.t.Errorf("m2 recall: %+v", page)
	}
	f.want(f.call(w, "GET", "/api/memories/m2/grains/"+h1, nil), 404, "not_found")

	a = f.call(w, "POST", base+"/supersede", map[string]any{"blob_hash": h1, "type": "fact", "object": "coffee"})
	f.want(a, 201, "")
	var sup api.SupersedeResponse
	a.decode(f.t, &sup)
	if sup.Superseded != h1 || sup.Hash == "" || sup.Hash == h1 {
		f.t.Fatalf("supersede: %+v", sup)
	}
	f.want(f.call(w, "POST", base+"/supersede", map[string]any{"blob_hash": h1, "type": "fact", "object": "milk"}), 409, "already_superseded")
	f.want(f.call(w, "POST", base+"/supersede", map[string]any{"blob_hash": strings.Repeat("0", 64), "type": "fact"}), 404, "not_found")
	f.want(f.call(w, "POST", base+"/supersede", map[string]any{"type": "fact"}), 400, "invalid_argument")

	a = f.call(w, "GET", base+"/grains/"+sup.Hash+"/history", nil)
	f.want(a, 200, "")
	var hist api.HistoryResponse
	a.decode(f.t, &hist)
	if len(hist.Grains) != 2 || hist.Grains[0].Hash != sup.Hash || hist.Grains[1].Hash != h1 || hist.Grains[0].Object != "coffee" {
		f.t.Errorf("history: %+v", hist)
	}

	// Forget by subject takes every version, with a proof.
	a = f.call(w, "POST", base+"/forget", map[string]any{"subject": alice})
	f.want(a, 200, "")
	var res lethe.ForgetResult
	a.decode(f.t, &res)
	if res.Count != 2 || res.Status != "forgotten" || res.Receipt == nil || res.Proof == nil || res.SubjectNonce == "" {
		f.t.Fatalf("forget: %s", a.body)
	}
	f.want(f.call(w, "GET", base+"/grains/"+h1, nil), 404, "not_found")
	f.want(f.call(w, "GET", base+"/grains/"+sup.Hash+"/history", nil), 404, "not_found")

	a = f.call(w, "POST", base+"/forget", map[string]any{"subject": alice})
	f.want(a, 200, "")
	a.decode(f.t, &res)
	if res.Count != 0 || res.Status != "not_found" {
		f.t.Errorf("second forget: %s", a.body)
	}
	a = f.call(w, "POST", base+"/forget", map[string]any{"user_id": userU2})
	a.decode(f.t, &res)
	if res.Count != 2 {
		f.t.Errorf("forget by user: %s", a.body)
	}
	h := f.add(w, "default", api.GrainInput{Type: "fact", Subject: bob, Object: "x"})
	h2 := f.add(w, "default", api.GrainInput{Type: "fact", Subject: bob, Object: "y"})
	f.want(f.call(w, "POST", base+"/forget", map[string]any{"blob_hash": h}), 200, "")
	f.want(f.call(w, "POST", base+"/forget", map[string]any{"blob_hash": h}), 404, "not_found")
	a = f.call(w, "POST", base+"/forget", map[string]any{"hashes": []string{h2, h}})
	a.decode(f.t, &res)
	if res.Count != 1 || len(res.Hashes) != 1 || res.Hashes[0] != h2 {
		f.t.Errorf("forget hashes: %s", a.body)
	}
}

func testAuthentication(f *fixture) {
	path := "/api/memories/default/recall"
	a := f.call("", "POST", path, api.RecallRequest{})
	f.want(a, 401, "unauthorized")
	if a.header.Get("WWW-Authenticate") == "" {
		f.t.Error("401 without WWW-Authenticate")
	}
	f.want(f.call("lethe_not-a-token", "POST", path, api.RecallRequest{}), 401, "unauthorized")
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Basic dXNlcjpwYXNz")
	req.Header.Set("Content-Type", "application/json")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		f.t.Errorf("Basic auth: %d", resp.StatusCode)
	}

	secret, tok, err := f.tokens.Create(context.Background(), auth.Spec{Roles: []auth.Role{auth.Reader}, Memories: []string{"*"}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.secrets = append(f.secrets, secret)
	f.want(f.call(secret, "POST", path, api.RecallRequest{}), 200, "")
	if err := f.tokens.Revoke(context.Background(), tok.ID); err != nil {
		f.t.Fatal(err)
	}
	f.want(f.call(secret, "POST", path, api.RecallRequest{}), 401, "unauthorized")
}

// testRoles calls every route with every role: allowed calls get past
// authorization (whatever they then answer), denied ones get 403.
func testRoles(f *fixture) {
	zero := strings.Repeat("0", 64)
	routes := []struct {
		name, method, path string
		body               any
		allowed            []auth.Role
	}{
		{"add", "POST", "/api/memories/default/grains", api.GrainInput{Type: "fact", Subject: "role-check"}, []auth.Role{auth.Writer}},
		{"supersede", "POST", "/api/memories/default/supersede", map[string]any{"blob_hash": zero, "type": "fact"}, []auth.Role{auth.Writer}},
		{"recall", "POST", "/api/memories/default/recall", api.RecallRequest{}, []auth.Role{auth.Reader}},
		{"get", "GET", "/api/memories/default/grains/" + zero, nil, []auth.Role{auth.Reader}},
		{"history", "GET", "/api/memories/default/grains/" + zero + "/history", nil, []auth.Role{auth.Reader}},
		{"forget", "POST", "/api/memories/default/forget", map[string]any{"blob_hash": zero}, []auth.Role{auth.DPO}},
		{"forget-user", "POST", "/api/memories/default/forget-user", map[string]any{"user_id": "nobody"}, []auth.Role{auth.DPO}},
		{"export", "POST", "/api/memories/default/export", map[string]any{"user_id": "nobody", "recipient": "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"}, []auth.Role{auth.DPO}},
		{"export history", "POST", "/api/memories/default/export/history", map[string]any{"hash": zero, "recipient": "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"}, []auth.Role{auth.DPO, auth.Auditor}},
		{"scope-erase", "POST", "/api/memories/default/scope-erase", map[string]any{"scope": "nothing/here"}, []auth.Role{auth.DPO}},
		{"erase", "POST", "/api/memories/default/erase", map[string]any{"confirm": "not-this-one"}, []auth.Role{auth.DPO}},
		{"list holds", "GET", "/api/memories/default/holds", nil, []auth.Role{auth.DPO}},
		{"set hold", "POST", "/api/memories/default/holds", map[string]any{"scope": "role-check"}, []auth.Role{auth.DPO}},
		{"release hold", "DELETE", "/api/memories/default/holds/" + strings.Repeat("0", 32), nil, []auth.Role{auth.DPO}},
		{"purge", "POST", "/api/memories/default/purge/stale", map[string]any{"dry_run": true}, []auth.Role{auth.DPO}},
		{"archive", "POST", "/api/memories/default/archive", map[string]any{"dry_run": true}, []auth.Role{auth.DPO}},
		{"archive candidates", "GET", "/api/memories/default/archive/candidates", nil, []auth.Role{auth.DPO}},
		{"risk sweep", "POST", "/api/memories/default/risk-sweep", map[string]any{"dry_run": true}, []auth.Role{auth.DPO}},
		{"audit key", "GET", "/api/audit/key", nil, []auth.Role{auth.Auditor}},
		{"audit checkpoint", "GET", "/api/audit/checkpoint", nil, []auth.Role{auth.Auditor}},
		{"audit entry", "GET", "/api/audit/entries/0", nil, []auth.Role{auth.Auditor}},
		{"audit proof", "GET", "/api/audit/proof?index=0", nil, []auth.Role{auth.Auditor, auth.DPO}},
		{"audit consistency", "GET", "/api/audit/consistency?from=0&to=0", nil, []auth.Role{auth.Auditor}},
		{"list tokens", "GET", "/api/tokens", nil, nil},
		{"create token", "POST", "/api/tokens", api.TokenRequest{Roles: []string{"reader"}, Memories: []string{"default"}}, nil},
		{"revoke token", "DELETE", "/api/tokens/tok_0000000000000000", nil, nil},
	}
	secrets := map[auth.Role]string{}
	for _, r := range auth.Roles {
		secrets[r] = f.token(string(r), []string{"*"})
	}
	for _, rt := range routes {
		for _, role := range auth.Roles {
			allowed := role == auth.Admin
			for _, a := range rt.allowed {
				allowed = allowed || a == role
			}
			a := f.call(secrets[role], rt.method, rt.path, rt.body)
			switch {
			case a.status >= 500:
				f.t.Errorf("%s as %s: %d %s", rt.name, role, a.status, a.body)
			case allowed && (a.status == 401 || a.status == 403):
				f.t.Errorf("%s as %s: %d %s, want allowed", rt.name, role, a.status, a.body)
			case !allowed && (a.status != 403 || a.errCode() != "forbidden"):
				f.t.Errorf("%s as %s: %d %s, want 403 forbidden", rt.name, role, a.status, a.body)
			}
		}
	}
	// A token for memory "a" may not use memory "b".
	only := f.token("writer,reader,dpo", []string{"mem-a"})
	f.want(f.call(only, "POST", "/api/memories/mem-a/recall", api.RecallRequest{}), 200, "")
	f.want(f.call(only, "POST", "/api/memories/mem-b/recall", api.RecallRequest{}), 403, "forbidden")
	f.want(f.call(only, "POST", "/api/memories/mem-b/grains", api.GrainInput{Type: "fact", Subject: "x"}), 403, "forbidden")
	f.want(f.call(only, "POST", "/api/memories/mem-b/forget", map[string]any{"subject": "x"}), 403, "forbidden")
	// An admin limited to some memories does not manage tokens.
	narrow := f.token("admin", []string{"mem-a"})
	f.want(f.call(narrow, "GET", "/api/tokens", nil), 403, "forbidden")
	f.want(f.call(narrow, "POST", "/api/memories/mem-a/recall", api.RecallRequest{}), 200, "")
}

func testScopes(f *fixture) {
	admin := f.token("admin", []string{"*"})
	scoped := f.token("writer,reader,dpo", []string{"sc"}, "acme/prod")
	base := "/api/memories/sc"

	in := f.add(admin, "sc", api.GrainInput{Type: "fact", Subject: alice, Object: "in", Scope: "acme/prod/bot1"})
	out := f.add(admin, "sc", api.GrainInput{Type: "fact", Subject: alice, Object: "out", Scope: "acme/dev"})
	root := f.add(admin, "sc", api.GrainInput{Type: "fact", Subject: alice, Object: "root"})

	// Add: only under the token's scopes.
	mine := f.add(scoped, "sc", api.GrainInput{Type: "fact", Subject: bob, Scope: "acme/prod"})
	f.want(f.call(scoped, "POST", base+"/grains", api.GrainInput{Type: "fact", Subject: bob, Scope: "acme/dev"}), 403, "forbidden")
	f.want(f.call(scoped, "POST", base+"/grains", api.GrainInput{Type: "fact", Subject: bob}), 403, "forbidden")
	f.want(f.call(scoped, "POST", base+"/grains", api.GrainInput{Type: "fact", Subject: bob, Scope: "acme/production"}), 403, "forbidden")
	a := f.call(scoped, "POST", base+"/grains", api.AddBatchRequest{Grains: []api.GrainInput{
		{Type: "fact", Subject: "batch-ok", Scope: "acme/prod/x"}, {Type: "fact", Subject: "batch-bad", Scope: "other"}}})
	f.want(a, 403, "forbidden")
	var e api.ErrorResponse
	a.decode(f.t, &e)
	if e.Field != "grains[1].scope" {
		f.t.Errorf("batch denial names %q", e.Field)
	}

	// Recall: narrowed to the token's scope.
	var page lethe.Page
	for _, scope := range []string{"", "acme", "acme/prod", "/acme/prod/"} {
		a = f.call(scoped, "POST", base+"/recall", api.RecallRequest{Scope: scope})
		f.want(a, 200, "")
		a.decode(f.t, &page)
		if len(page.Grains) != 2 || page.Grains[0].Hash != mine || page.Grains[1].Hash != in {
			f.t.Errorf("scoped recall %q: %d grains", scope, len(page.Grains))
		}
	}
	for _, scope := range []string{"", "acme/prod/bot1"} {
		a = f.call(scoped, "POST", base+"/recall", api.RecallRequest{Subject: alice, Scope: scope})
		a.decode(f.t, &page)
		if len(page.Grains) != 1 || page.Grains[0].Hash != in {
			f.t.Errorf("scoped recall by subject within %q: %d grains, want 1", scope, len(page.Grains))
		}
	}
	f.want(f.call(scoped, "POST", base+"/recall", api.RecallRequest{Scope: "acme/dev"}), 403, "forbidden")
	a = f.call(admin, "POST", base+"/recall", api.RecallRequest{Subject: alice})
	a.decode(f.t, &page)
	if len(page.Grains) != 3 {
		f.t.Errorf("admin recall: %d grains", len(page.Grains))
	}

	// Get and history: the grain's scope. A grain outside the token's
	// scopes answers exactly as a hash that names no grain (issue 15): the
	// token cannot tell them apart.
	missing := strings.Repeat("0", 64)
	same := func(method, path string, body func(h string) any, h string) {
		f.t.Helper()
		a := f.call(scoped, method, base+strings.ReplaceAll(path, "HASH", h), body(h))
		m := f.call(scoped, method, base+strings.ReplaceAll(path, "HASH", missing), body(missing))
		f.want(a, 404, "not_found")
		if got, want := strings.ReplaceAll(string(a.body), h, missing), string(m.body); a.status != m.status || got != want {
			f.t.Errorf("%s %s: out of scope %d %s, missing %d %s: want the same answer", method, path, a.status, got, m.status, want)
		}
	}
	none := func(string) any { return nil }
	f.want(f.call(scoped, "GET", base+"/grains/"+in, nil), 200, "")
	same("GET", "/grains/HASH", none, out)
	same("GET", "/grains/HASH", none, root)
	f.want(f.call(scoped, "GET", base+"/grains/"+in+"/history", nil), 200, "")
	same("GET", "/grains/HASH/history", none, out)

	// Supersede: the old version and the new scope.
	same("POST", "/supersede", func(h string) any { return map[string]any{"blob_hash": h, "type": "fact", "object": "x"} }, out)
	f.want(f.call(scoped, "POST", base+"/supersede", map[string]any{"blob_hash": mine, "type": "fact", "scope": "acme/dev"}), 403, "forbidden")
	a = f.call(scoped, "POST", base+"/supersede", map[string]any{"blob_hash": mine, "type": "fact", "object": "new"})
	f.want(a, 201, "")

	// Forget: by hash, within scope only.
	f.want(f.call(scoped, "POST", base+"/forget", map[string]any{"subject": alice}), 403, "forbidden")
	f.want(f.call(scoped, "POST", base+"/forget", map[string]any{"user_id": userU1}), 403, "forbidden")
	same("POST", "/forget", func(h string) any { return map[string]any{"blob_hash": h} }, out)
	a = f.call(scoped, "POST", base+"/forget", map[string]any{"hashes": []string{in, out}})
	f.want(a, 200, "")
	var res lethe.ForgetResult
	a.decode(f.t, &res)
	if res.Count != 1 || res.Hashes[0] != in {
		f.t.Errorf("forget [in, out]: %s, want in forgotten and out passed over", a.body)
	}
	f.want(f.call(admin, "GET", base+"/grains/"+out, nil), 200, "")
	f.want(f.call(admin, "GET", base+"/grains/"+in, nil), 404, "not_found")
}

// testScopesUnseen checks that a scope-limited token learns nothing of the
// grains outside its scopes: a hash outside them, alone or in a list,
// answers byte for byte what a hash that names no grain answers, on every
// route that takes hashes, and no answer names a version outside them.
func testScopesUnseen(f *fixture) {
	admin := f.token("admin", []string{"*"})
	scoped := f.token("writer,reader,dpo", []string{"su"}, "acme/prod")
	base := "/api/memories/su"
	missing := strings.Repeat("0", 64)

	in := f.add(admin, "su", api.GrainInput{Type: "fact", Subject: alice, Object: "in", Scope: "acme/prod"})
	out := f.add(admin, "su", api.GrainInput{Type: "fact", Subject: alice, Object: "out", Scope: "acme/dev"})
	// same sends body with out and with missing: the two answers must be
	// the same, byte for byte.
	same := func(what string, body func(h string) any) answer {
		f.t.Helper()
		a := f.call(scoped, "POST", base+what, body(out))
		m := f.call(scoped, "POST", base+what, body(missing))
		if got, want := strings.ReplaceAll(string(a.body), out, missing), string(m.body); a.status != m.status || got != want {
			f.t.Errorf("POST %s: out of scope %d %s, missing %d %s: want the same answer", what, a.status, a.body, m.status, m.body)
		}
		return a
	}

	// 1. Forget by a list: an outside hash is passed over as a missing one,
	// and nothing is deleted.
	for _, dry := range []bool{true, false} {
		a := same("/forget", func(h string) any { return map[string]any{"hashes": []string{h}, "dry_run": dry} })
		f.want(a, 200, "")
		same("/forget", func(h string) any { return map[string]any{"hashes": []string{h, h}, "dry_run": dry} })
		f.want(f.call(admin, "GET", base+"/grains/"+out, nil), 200, "")
	}
	a := same("/forget", func(h string) any { return map[string]any{"hashes": []string{in, h}, "dry_run": true} })
	if !strings.Contains(string(a.body), in) || strings.Contains(string(a.body), out) {
		f.t.Errorf("dry forget [in, out]: %s, want in and not out", a.body)
	}
	same("/forget", func(h string) any { return map[string]any{"blob_hash": h, "dry_run": true} })

	// 2. Archive by hashes: the same.
	f.want(same("/archive", func(h string) any { return map[string]any{"hashes": []string{h}} }), 404, "not_found")
	a = f.call(scoped, "POST", base+"/archive", map[string]any{"hashes": []string{in, out}})
	f.want(a, 200, "")
	var ar lethe.ArchiveResult
	a.decode(f.t, &ar)
	if ar.Archived != 1 || len(ar.Hashes) != 1 || ar.Hashes[0] != in {
		f.t.Errorf("archive [in, out]: %s, want in archived and out passed over", a.body)
	}
	var g lethe.Grain
	f.call(admin, "GET", base+"/grains/"+out, nil).decode(f.t, &g)
	if g.Archived {
		f.t.Error("a scoped archive archived a grain outside its scopes")
	}

	// 3. A version chain across scopes: c1 in acme/prod, superseded by c2
	// in acme/dev; d1 in acme/dev, superseded by d2 in acme/prod. The
	// token reads c1 and d2 but learns neither c2 nor d1.
	c1 := f.add(admin, "su", api.GrainInput{Type: "fact", Subject: bob, Object: "c", Scope: "acme/prod"})
	var sup api.SupersedeResponse
	a = f.call(admin, "POST", base+"/supersede", map[string]any{"blob_hash": c1, "scope": "acme/dev"})
	f.want(a, 201, "")
	a.decode(f.t, &sup)
	c2 := sup.Hash
	d1 := f.add(admin, "su", api.GrainInput{Type: "fact", Subject: bob, Object: "d", Scope: "acme/dev"})
	a = f.call(admin, "POST", base+"/supersede", map[string]any{"blob_hash": d1, "scope": "acme/prod"})
	f.want(a, 201, "")
	a.decode(f.t, &sup)
	d2 := sup.Hash
	// A link within the token's scopes stays.
	e1 := f.add(admin, "su", api.GrainInput{Type: "fact", Subject: bob, Object: "e", Scope: "acme/prod"})
	a = f.call(admin, "POST", base+"/supersede", map[string]any{"blob_hash": e1, "scope": "acme/prod/x"})
	a.decode(f.t, &sup)
	e2 := sup.Hash
	hidden := func(what string, a answer) {
		f.t.Helper()
		f.want(a, 200, "")
		for _, h := range []string{c2, d1} {
			if strings.Contains(string(a.body), h) {
				f.t.Errorf("%s names a version outside the token's scopes: %s", what, a.body)
			}
		}
	}
	for _, h := range []string{c1, d2} {
		hidden("get", f.call(scoped, "GET", base+"/grains/"+h, nil))
		hidden("history", f.call(scoped, "GET", base+"/grains/"+h+"/history", nil))
		hidden("CAL history", f.callType(scoped, "POST", base+"/cal", "text/cal", `HISTORY OF "`+h+`"`))
	}
	hidden("recall", f.call(scoped, "POST", base+"/recall", api.RecallRequest{Subject: bob, IncludeSuperseded: true}))
	hidden("recall", f.call(scoped, "POST", base+"/recall", api.RecallRequest{Subject: bob}))
	hidden("CAL recall", f.callType(scoped, "POST", base+"/cal", "text/cal", `RECALL WHERE subject = "`+bob+`"`))
	hidden("CAL history by subject", f.callType(scoped, "POST", base+"/cal", "text/cal", `HISTORY WHERE subject = "`+bob+`"`))
	f.call(scoped, "GET", base+"/grains/"+e1, nil).decode(f.t, &g)
	if g.SupersededBy != e2 {
		f.t.Errorf("superseded_by within the token's scopes = %q, want %s", g.SupersededBy, e2)
	}
	f.call(scoped, "GET", base+"/grains/"+e2, nil).decode(f.t, &g)
	if g.Supersedes != e1 {
		f.t.Errorf("supersedes within the token's scopes = %q, want %s", g.Supersedes, e1)
	}

	// 4. Forgetting c1 would delete c2, outside the token's scopes: 403
	// forbidden, naming the field (the item of a list) and no hash.
	for _, tc := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"blob_hash": c1, "dry_run": true}, "blob_hash"},
		{map[string]any{"blob_hash": c1}, "blob_hash"},
		{map[string]any{"hashes": []string{c1}, "dry_run": true}, "hashes[0]"},
		{map[string]any{"hashes": []string{missing, c1}}, "hashes[1]"},
		{map[string]any{"hashes": []string{missing, e1, c1}, "subject": bob, "dry_run": true}, "hashes[2]"},
		{map[string]any{"blob_hash": c1, "subject": bob, "dry_run": true}, "blob_hash"},
	} {
		body := tc.body
		a := f.call(scoped, "POST", base+"/forget", body)
		f.want(a, 403, "forbidden")
		var e api.ErrorResponse
		a.decode(f.t, &e)
		if e.Field != tc.field {
			f.t.Errorf("forget %v: field %q, want %q", body, e.Field, tc.field)
		}
		if strings.Contains(string(a.body), c2) || strings.Contains(string(a.body), c1) {
			f.t.Errorf("forget %v: %s names a hash", body, a.body)
		}
	}
	f.want(f.call(scoped, "GET", base+"/grains/"+c1, nil), 200, "")
	f.want(f.call(admin, "GET", base+"/grains/"+c2, nil), 200, "")
}

func tagList(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"t%d"`, i)
	}
	return b.String()
}

// tagBatch is a batch of n grains with tags tags each.
func tagBatch(n, tags int) string {
	var b strings.Builder
	b.WriteString(`{"grains":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"type":"fact","subject":"s%d","tags":[%s]}`, i, tagList(tags))
	}
	b.WriteString("]}")
	return b.String()
}

func hashList(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"%064x"`, i)
	}
	return b.String()
}

func testBadInput(f *fixture) {
	w := f.token("admin", []string{"*"})
	base := "/api/memories/default"
	big := strings.Repeat("x", 2<<20)
	var huge bytes.Buffer
	huge.WriteString(`{"grains":[`)
	for huge.Len() < 17<<20 {
		huge.WriteString(`{"type":"fact","content":"` + strings.Repeat("y", 60000) + `"},`)
	}
	huge.WriteString(`{"type":"fact","subject":"z"}]}`)
	var many bytes.Buffer
	many.WriteString(`{"grains":[`)
	for i := range 10001 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"type":"fact","subject":"s%d"}`, i)
	}
	many.WriteString("]}")

	cases := []struct {
		name, method, path, ctype, body string
		status                          int
		code, field                     string
	}{
		{"unknown field", "POST", "/grains", "", `{"type":"fact","subject":"x","colour":"red"}`, 400, "invalid_argument", "colour"},
		{"server field", "POST", "/grains", "", `{"type":"fact","subject":"x","hash":"` + strings.Repeat("a", 64) + `"}`, 400, "invalid_argument", "hash"},
		{"wrong type", "POST", "/grains", "", `{"type":"fact","subject":"x","importance":"high"}`, 400, "invalid_argument", "importance"},
		{"wrong type in batch", "POST", "/grains", "", `{"grains":[{"type":"fact","tags":"a"}]}`, 400, "invalid_argument", "grains.tags"},
		{"out of range", "POST", "/grains", "", `{"type":"fact","subject":"x","importance":2}`, 400, "invalid_argument", "importance"},
		{"empty grain", "POST", "/grains", "", `{"type":"fact"}`, 400, "empty_grain", ""},
		{"bad scope", "POST", "/grains", "", `{"type":"fact","subject":"x","scope":"a//b"}`, 400, "invalid_scope", "scope"},
		{"bad created_at", "POST", "/grains", "", `{"type":"fact","subject":"x","created_at":"yesterday"}`, 400, "invalid_argument", "created_at"},
		{"numeric created_at", "POST", "/grains", "", `{"type":"fact","subject":"x","created_at":12}`, 400, "invalid_argument", "created_at"},
		{"bad created_at in batch", "POST", "/grains", "", `{"grains":[{"type":"fact","subject":"x"},{"type":"fact","subject":"y","created_at":"yesterday"}]}`, 400, "invalid_argument", "grains[1].created_at"},
		{"malformed", "POST", "/grains", "", `{"type":"fact",`, 400, "invalid_argument", ""},
		{"syntax", "POST", "/grains", "", `{"type":fact}`, 400, "invalid_argument", ""},
		{"trailing data", "POST", "/grains", "", `{"type":"fact","subject":"x"} {"type":"fact"}`, 400, "invalid_argument", ""},
		{"trailing garbage", "POST", "/grains", "", `{"type":"fact","subject":"x"}]`, 400, "invalid_argument", ""},
		{"array body", "POST", "/grains", "", `[]`, 400, "invalid_argument", ""},
		{"null grains", "POST", "/grains", "", `{"grains":null}`, 400, "invalid_argument", "grains"},
		{"null tag", "POST", "/grains", "", `{"type":"fact","subject":"x","tags":[null]}`, 400, "invalid_argument", "tags[0]"},
		{"empty tag", "POST", "/grains", "", `{"type":"fact","subject":"x","tags":["a",""]}`, 400, "invalid_argument", "tags[1]"},
		{"blank tag in batch", "POST", "/grains", "", `{"grains":[{"type":"fact","subject":"x"},{"type":"fact","subject":"y","tags":[" "]}]}`, 400, "invalid_argument", "grains[1].tags[0]"},
		{"empty tag in supersede", "POST", "/supersede", "", `{"blob_hash":"` + strings.Repeat("a", 64) + `","tags":[""]}`, 400, "invalid_argument", "tags[0]"},
		{"empty tag in recall", "POST", "/recall", "", `{"tags":["a"," "]}`, 400, "invalid_argument", "tags[1]"},
		{"empty body", "POST", "/grains", "", ``, 400, "invalid_argument", ""},
		{"mixed single and batch", "POST", "/grains", "", `{"type":"fact","grains":[{"type":"fact","subject":"x"}]}`, 400, "invalid_argument", ""},
		{"empty batch", "POST", "/grains", "", `{"grains":[]}`, 400, "invalid_argument", "grains"},
		{"batch over 10000", "POST", "/grains", "", many.String(), 400, "too_large", "grains"},
		{"single over 1 MiB", "POST", "/grains", "", `{"type":"fact","content":"` + big + `"}`, 413, "payload_too_large", ""},
		{"batch over 16 MiB", "POST", "/grains", "", huge.String(), 413, "payload_too_large", ""},
		{"recall over 1 MiB", "POST", "/recall", "", `{"subject":"` + big + `"}`, 413, "payload_too_large", ""},
		{"text/plain", "POST", "/grains", "text/plain", `{"type":"fact","subject":"x"}`, 415, "unsupported_media_type", ""},
		{"form", "POST", "/recall", "application/x-www-form-urlencoded", `a=b`, 415, "unsupported_media_type", ""},
		{"no content type", "POST", "/recall", "-", `{}`, 415, "unsupported_media_type", ""},
		{"charset ok", "POST", "/recall", "application/json; charset=utf-8", `{}`, 200, "", ""},
		// Over a bound: too_large; under the least value: invalid_argument.
		{"recall limit", "POST", "/recall", "", `{"limit":1001}`, 400, "too_large", "limit"},
		{"recall negative limit", "POST", "/recall", "", `{"limit":-1}`, 400, "invalid_argument", "limit"},
		// An empty value filter never means every value: leave it out.
		{"recall empty subject", "POST", "/recall", "", `{"subject":""}`, 400, "invalid_argument", "subject"},
		{"recall blank relation", "POST", "/recall", "", `{"relation":" \t"}`, 400, "invalid_argument", "relation"},
		{"recall empty object", "POST", "/recall", "", `{"subject":"x","object":""}`, 400, "invalid_argument", "object"},
		{"recall empty user", "POST", "/recall", "", `{"user_id":""}`, 400, "invalid_argument", "user_id"},
		// Nor is a text search for nothing no search (every grain), nor
		// one that finds nothing: left out, there is no search.
		{"recall empty query", "POST", "/recall", "", `{"query":""}`, 400, "invalid_argument", "query"},
		{"recall blank query", "POST", "/recall", "", `{"query":" \n"}`, 400, "invalid_argument", "query"},
		{"recall cursor", "POST", "/recall", "", `{"cursor":"abc"}`, 400, "invalid_argument", "cursor"},
		{"recall unknown", "POST", "/recall", "", `{"text":"x"}`, 400, "invalid_argument", "text"},
		{"forget nothing", "POST", "/forget", "", `{}`, 400, "empty_selector", ""},
		{"forget null", "POST", "/forget", "", `null`, 400, "invalid_argument", ""},
		{"forget empty subject", "POST", "/forget", "", `{"subject":""}`, 400, "empty_selector", "subject"},
		{"forget blank subject", "POST", "/forget", "", `{"subject":"  "}`, 400, "empty_selector", "subject"},
		{"forget empty user", "POST", "/forget", "", `{"user_id":""}`, 400, "empty_selector", "user_id"},
		{"forget empty hash", "POST", "/forget", "", `{"blob_hash":""}`, 400, "empty_selector", "blob_hash"},
		{"forget empty list", "POST", "/forget", "", `{"hashes":[]}`, 400, "empty_selector", "hashes"},
		{"forget two selectors", "POST", "/forget", "", `{"subject":"a","user_id":"b"}`, 400, "invalid_argument", ""},
		{"forget bad hash", "POST", "/forget", "", `{"blob_hash":"xyz"}`, 400, "invalid_argument", "blob_hash"},
		{"forget bad hash narrowed", "POST", "/forget", "", `{"blob_hash":"zz","user_id":"u"}`, 400, "invalid_argument", "blob_hash"},
		{"forget bad hashes", "POST", "/forget", "", `{"hashes":["xyz"]}`, 400, "invalid_argument", "hashes[0]"},
		{"forget unknown field", "POST", "/forget", "", `{"everything":true}`, 400, "invalid_argument", "everything"},
		// An item of a list at fault is named, not the list.
		{"forget bad hash in a list", "POST", "/forget", "", `{"hashes":["` + strings.Repeat("a", 64) + `","XYZ"],"dry_run":true}`, 400, "invalid_argument", "hashes[1]"},
		{"archive bad hash in a list", "POST", "/archive", "", `{"hashes":["` + strings.Repeat("a", 64) + `","` + strings.Repeat("A", 64) + `"]}`, 400, "invalid_argument", "hashes[1]"},
		{"supersede bad hash", "POST", "/supersede", "", `{"blob_hash":"XYZ","type":"fact"}`, 400, "invalid_argument", "blob_hash"},
		{"get bad hash", "GET", "/grains/not-a-hash", "", "", 400, "invalid_argument", "hash"},
		{"get upper hash", "GET", "/grains/" + strings.Repeat("A", 64), "", "", 400, "invalid_argument", "hash"},
		{"history bad hash", "GET", "/grains/zz/history", "", "", 400, "invalid_argument", "hash"},
		// Issue 15: every list bounded, every identifier validated, and what
		// encoding/json would silently repair refused.
		{"recall 65 tags", "POST", "/recall", "", `{"tags":[` + strings.TrimSuffix(strings.Repeat(`"t",`, 65), ",") + `]}`, 400, "too_large", "tags"},
		{"recall 10000 tags", "POST", "/recall", "", `{"tags":[` + tagList(10000) + `]}`, 400, "too_large", "tags"},
		{"recall overlong tag", "POST", "/recall", "", `{"tags":["` + strings.Repeat("t", 129) + `"]}`, 400, "too_large", "tags"},
		{"recall NUL namespace", "POST", "/recall", "", `{"namespace":"a\u0000b"}`, 400, "invalid_argument", "namespace"},
		{"recall NUL user", "POST", "/recall", "", `{"user_id":"a\u0000b"}`, 400, "invalid_argument", "user_id"},
		{"recall overlong user", "POST", "/recall", "", `{"user_id":"` + strings.Repeat("u", 257) + `"}`, 400, "too_large", "user_id"},
		{"recall overlong cursor", "POST", "/recall", "", `{"cursor":"` + strings.Repeat("1", 513) + `"}`, 400, "too_large", "cursor"},
		{"forget NUL user", "POST", "/forget", "", `{"user_id":"u\u0000"}`, 400, "invalid_argument", "user_id"},
		{"forget 100 kB user", "POST", "/forget", "", `{"user_id":"` + strings.Repeat("u", 100000) + `"}`, 400, "too_large", "user_id"},
		{"forget 100 kB subject", "POST", "/forget", "", `{"subject":"` + strings.Repeat("s", 100000) + `"}`, 400, "too_large", "subject"},
		{"forget 10001 hashes", "POST", "/forget", "", `{"hashes":[` + hashList(10001) + `]}`, 400, "too_large", "hashes"},
		{"forget-user NUL", "POST", "/forget-user", "", `{"user_id":"u\u0000"}`, 400, "invalid_argument", "user_id"},
		{"forget-user 100 kB", "POST", "/forget-user", "", `{"user_id":"` + strings.Repeat("u", 100000) + `"}`, 400, "too_large", "user_id"},
		{"hold NUL user", "POST", "/holds", "", `{"user_id":"u\u0000"}`, 400, "invalid_argument", "user_id"},
		{"hold 100 kB user", "POST", "/holds", "", `{"user_id":"` + strings.Repeat("u", 100000) + `"}`, 400, "too_large", "user_id"},
		{"hold malformed scope", "POST", "/holds", "", `{"scope":"/acme//"}`, 400, "invalid_scope", "scope"},
		{"hold NUL scope", "POST", "/holds", "", `{"scope":"acme\u0000"}`, 400, "invalid_scope", "scope"},
		{"erase malformed scope", "POST", "/scope-erase", "", `{"scope":"/acme//"}`, 400, "invalid_scope", "scope"},
		{"erase double slash", "POST", "/scope-erase", "", `{"scope":"acme//prod"}`, 400, "invalid_scope", "scope"},
		{"add malformed scope", "POST", "/grains", "", `{"type":"fact","subject":"x","scope":"/acme//"}`, 400, "invalid_scope", "scope"},
		{"export NUL user", "POST", "/export", "", `{"user_id":"u\u0000","recipient":"age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"}`, 400, "invalid_argument", "user_id"},
		{"invalid UTF-8", "POST", "/grains", "", "{\"type\":\"fact\",\"subject\":\"x\",\"user_id\":\"u\xc3\"}", 400, "invalid_argument", ""},
		{"lone surrogate", "POST", "/grains", "", `{"type":"fact","subject":"x","user_id":"u\ud800"}`, 400, "invalid_argument", ""},
		{"lone low surrogate", "POST", "/recall", "", `{"user_id":"u\udc00x"}`, 400, "invalid_argument", ""},
		{"duplicate key", "POST", "/grains", "", `{"type":"fact","subject":"a","subject":"b"}`, 400, "invalid_argument", "subject"},
		{"keys differing in case", "POST", "/grains", "", `{"type":"fact","subject":"a","Subject":"b"}`, 400, "invalid_argument", "Subject"},
		{"upper-case key", "POST", "/recall", "", `{"Subject":"a"}`, 400, "invalid_argument", "Subject"},
		{"folded key", "POST", "/recall", "", `{"\u017fubject":"a"}`, 400, "invalid_argument", ""},
		{"duplicate key in batch", "POST", "/grains", "", `{"grains":[{"type":"fact","subject":"a","type":"x"}]}`, 400, "invalid_argument", "type"},
		{"duplicate metadata key", "POST", "/grains", "", `{"type":"fact","subject":"a","metadata":{"k":"1","k":"2"}}`, 400, "invalid_argument", "k"},
		{"batch over 65536 tags", "POST", "/grains", "", tagBatch(1025, 64), 400, "too_large", "grains"},
		{"purge batch over 10000", "POST", "/purge/stale", "", `{"batch":10001,"dry_run":true}`, 400, "too_large", "batch"},
		{"purge negative batch", "POST", "/purge/stale", "", `{"batch":-5,"dry_run":true}`, 400, "invalid_argument", "batch"},
		// Every other option: invalid_argument naming it, never the value
		// (ranges are not bounds: see docs/api.md, Limits).
		{"purge unknown curve", "POST", "/purge/stale", "", `{"curve":"yesterday","dry_run":true}`, 400, "invalid_argument", "curve"},
		{"purge negative half-life", "POST", "/purge/stale", "", `{"half_life_days":-1,"dry_run":true}`, 400, "invalid_argument", "half_life_days"},
		{"purge half-life of a century and a day", "POST", "/purge/stale", "", `{"half_life_days":36501,"dry_run":true}`, 400, "invalid_argument", "half_life_days"},
		{"purge decay per day over 1", "POST", "/purge/stale", "", `{"curve":"linear","decay_per_day":1.5,"dry_run":true}`, 400, "invalid_argument", "decay_per_day"},
		{"purge negative strength", "POST", "/purge/stale", "", `{"strength_days":-2,"dry_run":true}`, 400, "invalid_argument", "strength_days"},
		{"purge threshold over 1", "POST", "/purge/stale", "", `{"threshold":1.5,"dry_run":true}`, 400, "invalid_argument", "threshold"},
		{"purge negative threshold", "POST", "/purge/stale", "", `{"threshold":-0.1,"dry_run":true}`, 400, "invalid_argument", "threshold"},
		{"purge negative min age", "POST", "/purge/stale", "", `{"min_age_days":-1,"dry_run":true}`, 400, "invalid_argument", "min_age_days"},
		{"purge min age over a century", "POST", "/purge/stale", "", `{"min_age_days":36501,"dry_run":true}`, 400, "invalid_argument", "min_age_days"},
		{"purge malformed namespace", "POST", "/purge/stale", "", `{"namespace":"yesterday!","dry_run":true}`, 400, "invalid_argument", "namespace"},
		{"risk-sweep batch over 10000", "POST", "/risk-sweep", "", `{"batch":10001,"dry_run":true}`, 400, "too_large", "batch"},
		{"risk-sweep negative batch", "POST", "/risk-sweep", "", `{"batch":-1,"dry_run":true}`, 400, "invalid_argument", "batch"},
		// JSON null is never "left out": refused where the document says no
		// nullable, naming it (within metadata, the metadata).
		{"null limit", "POST", "/recall", "", `{"limit":null}`, 400, "invalid_argument", "limit"},
		{"null tags filter", "POST", "/recall", "", `{"tags":null}`, 400, "invalid_argument", "tags"},
		{"null unknown field", "POST", "/recall", "", `{"colour":null}`, 400, "invalid_argument", "colour"},
		{"null in a batch", "POST", "/grains", "", `{"grains":[{"type":"fact","subject":"x","pinned":null}]}`, 400, "invalid_argument", "grains[0].pinned"},
		{"null metadata value", "POST", "/grains", "", `{"type":"fact","subject":"x","metadata":{"k":null}}`, 400, "invalid_argument", "metadata"},
		{"null embedding item", "POST", "/grains", "", `{"type":"fact","subject":"x","embedding":[1,null]}`, 400, "invalid_argument", "embedding[1]"},
		{"null forget selector", "POST", "/forget", "", `{"subject":null}`, 400, "invalid_argument", "subject"},
		{"null dry run", "POST", "/forget", "", `{"blob_hash":"` + strings.Repeat("a", 64) + `","dry_run":null}`, 400, "invalid_argument", "dry_run"},
		{"null created_at in supersede", "POST", "/supersede", "", `{"blob_hash":"` + strings.Repeat("a", 64) + `","created_at":null}`, 400, "invalid_argument", "created_at"},
		{"null hold", "POST", "/holds", "", `{"user_id":null}`, 400, "invalid_argument", "user_id"},
		// A query parameter given empty is never "every value".
		{"requests empty status", "GET", "/erasure-requests?status=", "", "", 400, "invalid_argument", "status"},
		{"requests empty due date", "GET", "/erasure-requests?due_before=", "", "", 400, "invalid_argument", "due_before"},
		{"requests empty overdue", "GET", "/erasure-requests?overdue=&status=pending", "", "", 400, "invalid_argument", "overdue"},
		{"deliveries empty state", "GET", "/hooks/hk_0000000000000000/deliveries?state=", "", "", 400, "invalid_argument", "state"},
		// Nor is an empty type, namespace, curve or trigger.
		{"recall empty type", "POST", "/recall", "", `{"type":""}`, 400, "invalid_argument", "type"},
		{"recall empty namespace", "POST", "/recall", "", `{"subject":"x","namespace":""}`, 400, "invalid_argument", "namespace"},
		{"purge empty namespace", "POST", "/purge/stale", "", `{"namespace":"","dry_run":true}`, 400, "invalid_argument", "namespace"},
		{"purge empty curve", "POST", "/purge/stale", "", `{"curve":"","dry_run":true}`, 400, "invalid_argument", "curve"},
		{"archive empty trigger", "POST", "/archive", "", `{"trigger":"","dry_run":true}`, 400, "invalid_argument", "trigger"},
		// In a grain, an empty namespace is the default, an empty user none.
		{"add empty namespace and user", "POST", "/grains", "", `{"type":"fact","subject":"empty-ns","namespace":"","user_id":""}`, 201, "", ""},
		// Hashes narrowed by a subject or user: those are checked as a
		// forget by them is, before any lookup.
		{"forget narrowed by a 257-byte user", "POST", "/forget", "", `{"hashes":["` + strings.Repeat("a", 64) + `"],"user_id":"` + strings.Repeat("u", 257) + `"}`, 400, "too_large", "user_id"},
		{"forget narrowed by a NUL subject", "POST", "/forget", "", `{"blob_hash":"` + strings.Repeat("a", 64) + `","subject":"a\u0000"}`, 400, "invalid_argument", "subject"},
		// A recall's scope: one leading and one trailing '/' dropped,
		// never more.
		{"recall malformed scope", "POST", "/recall", "", `{"scope":"/acme//"}`, 400, "invalid_scope", "scope"},
		{"recall slashes", "POST", "/recall", "", `{"scope":"///"}`, 400, "invalid_scope", "scope"},
		{"wrong method", "DELETE", "/grains", "", "", 405, "method_not_allowed", ""},
		{"no route", "GET", "/nothing", "", "", 404, "route_not_found", ""},
	}
	for _, c := range cases {
		ctype := c.ctype
		switch ctype {
		case "":
			ctype = "application/json"
		case "-":
			ctype = ""
		}
		var body any
		if c.body != "" || c.method == "POST" {
			body = c.body
		}
		a := f.callType(w, c.method, base+c.path, ctype, body)
		var e api.ErrorResponse
		json.Unmarshal(a.body, &e)
		short := a.body
		if len(short) > 300 {
			short = short[:300]
		}
		if a.status != c.status || e.Code != c.code || (c.field != "" && e.Field != c.field) {
			f.t.Errorf("%s: got %d %s, want %d %s field %q", c.name, a.status, short, c.status, c.code, c.field)
		}
		if a.status >= 500 {
			f.t.Errorf("%s: a 5xx for bad input", c.name)
		}
		if strings.Contains(string(a.body), "yesterday") || strings.Contains(string(a.body), "xxxxxxxx") ||
			strings.Contains(string(a.body), "got ") || strings.Contains(string(a.body), "decay.") {
			f.t.Errorf("%s: the error quotes the input, or names the policy's key: %s", c.name, short)
		}
	}
	// A scope-limited token's recall scope is checked before it is
	// narrowed to the token's.
	scoped := f.token("reader", []string{"default"}, "acme")
	for _, sc := range []string{"/acme//", "acme//", "//acme"} {
		f.wantField(f.call(scoped, "POST", base+"/recall", map[string]any{"scope": sc}), 400, "invalid_scope", "scope")
	}
	// A null body is no grain: refused as not an object, not as a grain
	// without a type.
	a := f.call(w, "POST", base+"/grains", `null`)
	f.wantField(a, 400, "invalid_argument", "")
	if !strings.Contains(string(a.body), "must be an object") {
		f.t.Errorf("null body: %s, want \"must be an object\"", a.body)
	}
	f.want(f.call(w, "POST", "/api/memories/Bad!/recall", api.RecallRequest{}), 400, "invalid_memory")
	f.want(f.call(w, "GET", "/api/audit/entries/minus-one", nil), 400, "invalid_argument")
	f.want(f.call(w, "GET", "/api/audit/proof", nil), 400, "invalid_argument")
	f.want(f.call(w, "GET", "/api/audit/proof?event=e&index=1", nil), 400, "invalid_argument")
	f.want(f.call(w, "GET", "/api/audit/consistency?from=x&to=1", nil), 400, "invalid_argument")
	f.want(f.call(w, "POST", "/api/tokens", `{"roles":["root"],"memories":["*"]}`), 400, "invalid_argument")
	f.want(f.call(w, "POST", "/api/tokens", `{"roles":["reader"],"memories":[]}`), 400, "invalid_argument")
	f.want(f.call(w, "POST", "/api/tokens", `{"roles":["reader"],"memories":["*"],"scopes":["a//b"]}`), 400, "invalid_scope")
	f.want(f.call(w, "POST", "/api/tokens", `{"roles":["reader"],"memories":["*"],"scopes":[]}`), 400, "invalid_scope")
	f.want(f.call(w, "POST", "/api/tokens", `{"roles":["reader"],"memories":["*"],"scopes":["/acme//"]}`), 400, "invalid_scope")
	// A list item's error names the item, not the field of its check.
	f.wantField(f.call(w, "POST", "/api/tokens", `{"roles":["reader"],"memories":["M1"]}`), 400, "invalid_memory", "memories[0]")
	f.wantField(f.call(w, "POST", "/api/tokens", `{"roles":["reader"],"memories":["m1","Bad!"]}`), 400, "invalid_memory", "memories[1]")
	f.wantField(f.call(w, "POST", "/api/tokens", `{"roles":["reader"],"memories":["m1"],"scopes":["a/../b"]}`), 400, "invalid_scope", "scopes[0]")
	f.wantField(f.call(w, "POST", "/api/tokens", `{"roles":["reader"],"memories":["m1"],"scopes":["acme","/"]}`), 400, "invalid_scope", "scopes[1]")
	f.wantField(f.call(w, "POST", "/api/tokens", `{"roles":["reader","root"],"memories":["m1"]}`), 400, "invalid_argument", "roles[1]")
	// Metadata keys are data: case differences are distinct keys there.
	f.want(f.call(w, "POST", base+"/grains", `{"type":"fact","subject":"meta-case","metadata":{"Env":"a","env":"b"}}`), 201, "")
	// Sizes and indexes past 2^63-1: a clear 400 naming the parameter.
	for _, q := range []string{"index=0&size=18446744073709551615", "index=18446744073709551615", "index=9223372036854775808"} {
		a := f.call(w, "GET", "/api/audit/proof?"+q, nil)
		f.want(a, 400, "invalid_argument")
		if !strings.Contains(string(a.body), "2^63-1") || strings.Contains(string(a.body), "-1\"") {
			f.t.Errorf("proof?%s: %s", q, a.body)
		}
	}
	f.want(f.call(w, "GET", "/api/audit/entries/18446744073709551615", nil), 400, "invalid_argument")
}

func testTokens(f *fixture) {
	admin := f.token("admin", []string{"*"})
	a := f.call(admin, "POST", "/api/tokens", api.TokenRequest{Roles: []string{"reader", "writer"}, Memories: []string{"tm"}, Scopes: []string{"/acme/"}})
	f.want(a, 201, "")
	var created api.TokenCreated
	a.decode(f.t, &created)
	f.secrets = append(f.secrets, created.Token)
	if !strings.HasPrefix(created.Token, auth.SecretPrefix) || created.ID == "" || len(created.Scopes) != 1 || created.Scopes[0] != "acme" {
		f.t.Fatalf("created: %+v", created)
	}
	if a.header.Get("Cache-Control") != "no-store" {
		f.t.Error("the token's secret may be cached")
	}
	f.add(created.Token, "tm", api.GrainInput{Type: "fact", Subject: "t", Scope: "acme/x"})

	a = f.call(admin, "GET", "/api/tokens", nil)
	f.want(a, 200, "")
	if strings.Contains(string(a.body), created.Token) || strings.Contains(string(a.body), auth.HashSecret(created.Token)) {
		f.t.Error("the token list shows a secret or its hash")
	}
	var list api.TokenList
	a.decode(f.t, &list)
	found := false
	for _, t := range list.Tokens {
		found = found || (t.ID == created.ID && t.RevokedAt == nil)
	}
	if !found {
		f.t.Errorf("list lacks %s", created.ID)
	}
	f.want(f.call(admin, "DELETE", "/api/tokens/"+created.ID, nil), 204, "")
	f.want(f.call(admin, "DELETE", "/api/tokens/"+created.ID, nil), 204, "")
	f.want(f.call(admin, "DELETE", "/api/tokens/tok_0000000000000000", nil), 404, "not_found")
	// A malformed id is refused as a hold's or a hook's is, before any
	// lookup: 400 naming id, never 404.
	for _, id := range []string{"tok_nonexistent", "nope", "tok_000000000000000G", "tok_00000000000000000", "TOK_0000000000000000"} {
		f.wantField(f.call(admin, "DELETE", "/api/tokens/"+id, nil), 400, "invalid_argument", "id")
	}
	f.want(f.call(created.Token, "POST", "/api/memories/tm/recall", api.RecallRequest{}), 401, "unauthorized")
}

func testAudit(f *fixture) {
	admin := f.token("admin", []string{"*"})
	auditor := f.token("auditor", []string{"*"})
	h := f.add(admin, "aud", api.GrainInput{Type: "fact", Subject: alice, UserID: userU1})
	a := f.call(admin, "POST", "/api/memories/aud/forget", map[string]any{"user_id": userU1})
	f.want(a, 200, "")
	var res lethe.ForgetResult
	a.decode(f.t, &res)
	if res.Proof == nil {
		f.t.Fatalf("forget without proof: %s", a.body)
	}

	a = f.call(auditor, "GET", "/api/audit/key", nil)
	f.want(a, 200, "")
	var key api.AuditKeyResponse
	a.decode(f.t, &key)
	nonce, _ := hex.DecodeString(res.SubjectNonce)
	if _, err := proofs.Verify(res.Proof, proofs.VerifyOptions{LogKey: key.Key, Subject: userU1, Nonce: nonce}); err != nil {
		f.t.Errorf("the forget's proof does not verify: %v", err)
	}

	a = f.call(auditor, "GET", "/api/audit/proof?event="+res.EventID, nil)
	f.want(a, 200, "")
	var p lethe.Proof
	a.decode(f.t, &p)
	v, err := proofs.Verify(&p, proofs.VerifyOptions{LogKey: key.Key})
	if err != nil {
		f.t.Fatalf("proof by event: %v", err)
	}
	if strings.Contains(string(a.body), alice) || strings.Contains(string(a.body), userU1) {
		f.t.Error("a proof holds personal data")
	}
	if !slicesContains(v.Leaf.Hashes, h) {
		f.t.Errorf("the leaf does not name %s", h)
	}
	a = f.call(auditor, "GET", fmt.Sprintf("/api/audit/proof?index=%d&size=%d", p.LeafIndex, p.TreeSize), nil)
	f.want(a, 200, "")
	// The same proof as a tlog-proof file: it parses to the same leaf and
	// tree, and verifies.
	a = f.call(auditor, "GET", "/api/audit/proof?format=tlog-proof&event="+res.EventID, nil)
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		f.t.Fatalf("tlog-proof: %d %q", a.status, a.body)
	}
	tp, err := proofs.ParseTlogProof(a.body)
	if err != nil {
		f.t.Fatalf("tlog-proof: %v", err)
	}
	if tp.LeafIndex != p.LeafIndex || tp.TreeSize != p.TreeSize || string(tp.Leaf) != string(p.Leaf) {
		f.t.Errorf("tlog-proof leaf %d of %d, JSON proof leaf %d of %d", tp.LeafIndex, tp.TreeSize, p.LeafIndex, p.TreeSize)
	}
	if _, err := proofs.Verify(tp, proofs.VerifyOptions{LogKey: key.Key}); err != nil {
		f.t.Errorf("tlog-proof does not verify: %v", err)
	}
	f.want(f.call(auditor, "GET", "/api/audit/proof?format=xml&event="+res.EventID, nil), 400, "invalid_argument")

	a = f.call(auditor, "GET", "/api/audit/checkpoint", nil)
	if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") || !strings.Contains(string(a.body), "\n\n") {
		f.t.Errorf("checkpoint: %d %q", a.status, a.body)
	}
	a = f.call(auditor, "GET", fmt.Sprintf("/api/audit/entries/%d", p.LeafIndex), nil)
	f.want(a, 200, "")
	var entry lethe.AuditEntry
	a.decode(f.t, &entry)
	if !bytes.Equal(entry.Leaf, p.Leaf) {
		f.t.Error("entry leaf differs from the proof's")
	}
	f.want(f.call(auditor, "GET", "/api/audit/entries/99999999", nil), 404, "not_found")
	a = f.call(auditor, "GET", fmt.Sprintf("/api/audit/consistency?from=1&to=%d", p.TreeSize), nil)
	f.want(a, 200, "")
	if _, err := proofs.ParseConsistencyProof(a.body); err != nil {
		f.t.Errorf("consistency: %v: %s", err, a.body)
	}
	// A malformed index or size is 400 naming its parameter: out of range,
	// and a number not written as the index's canonical decimal (leading
	// zeros, a sign), which would be a second name for the same leaf.
	for _, tc := range []struct{ path, field string }{
		{"/api/audit/consistency?from=0", "to"}, // to is required
		{"/api/audit/consistency?from=0&to=1", "from"},
		{fmt.Sprintf("/api/audit/consistency?from=%d&to=1", p.TreeSize+1), "from"},
		{"/api/audit/consistency?from=1", "to"},
		{"/api/audit/consistency?from=01&to=1", "from"},
		{"/api/audit/consistency?from=1&to=+1", "to"},
		{fmt.Sprintf("/api/audit/entries/0%d", p.LeafIndex), "index"},
		{"/api/audit/entries/00", "index"},
		{"/api/audit/entries/+1", "index"},
		{"/api/audit/proof?index=00", "index"},
		{"/api/audit/proof?index=0&size=01", "size"},
	} {
		f.wantField(f.call(auditor, "GET", tc.path, nil), 400, "invalid_argument", tc.field)
	}
	// An id that is not an event id is refused before any lookup, and no
	// answer quotes what it was sent.
	a = f.call(auditor, "GET", "/api/audit/proof?event=john.doe@example.com", nil)
	f.want(a, 400, "invalid_argument")
	var e api.ErrorResponse
	a.decode(f.t, &e)
	if e.Field != "event" || strings.Contains(string(a.body), "john") {
		f.t.Errorf("malformed event id: %s, want field event and no echo", a.body)
	}
	f.want(f.call(auditor, "GET", "/api/audit/proof?event="+strings.Repeat("0", 32), nil), 404, "not_found")
	// Auditors never see content.
	f.want(f.call(auditor, "POST", "/api/memories/aud/recall", api.RecallRequest{}), 403, "forbidden")
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func testAccessLog(f *fixture) {
	logs := f.logs.String()
	if !strings.Contains(logs, `"route":"/api/memories/:memory/recall"`) || !strings.Contains(logs, `"memory":"default"`) {
		f.t.Fatalf("the access log lacks route patterns or memories:\n%.2000s", logs)
	}
	for _, personal := range append([]string{alice, bob, userU1, userU2, content, "?event=", "index="}, f.secrets...) {
		if strings.Contains(logs, personal) {
			f.t.Errorf("the access log holds %q", personal)
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			f.t.Fatalf("not a JSON log line: %s", line)
		}
		if m["msg"] != "request" {
			f.t.Errorf("unexpected log line (only 5xx errors are logged): %s", line)
		}
	}
}

// panicky is the real library with a Recall that panics.
type panicky struct{ *lethe.DB }

func (panicky) Recall(context.Context, lethe.Query) (*lethe.Page, error) {
	panic("panic-value-" + alice)
}

func TestPanicIsJSON500(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	srv := httptest.NewServer(withContract(t, api.New(api.Config{Library: panicky{f.db}, Tokens: f.tokens,
		Logger: slog.New(slog.NewJSONHandler(f.logs, nil))})))
	defer srv.Close()
	f.srv = srv
	a := f.call(f.token("reader", []string{"*"}), "POST", "/api/memories/default/recall", api.RecallRequest{})
	f.want(a, 500, "internal")
	if strings.Contains(string(a.body), "panic") || strings.Contains(string(a.body), alice) {
		t.Errorf("the answer leaks the panic: %s", a.body)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, `"msg":"panic in handler"`) || strings.Contains(logs, alice) {
		t.Errorf("panic log: %s", logs)
	}
	// The server still serves.
	f.want(f.call("", "GET", "/healthz", nil), 200, "")
}

func TestDeadlineIs504(t *testing.T) {
	f := newFixture(t, sqliteBackend, func(c *api.Config) { c.RequestTimeout = time.Nanosecond })
	a := f.call(f.token("reader", []string{"*"}), "POST", "/api/memories/default/recall", api.RecallRequest{})
	f.want(a, 504, "deadline_exceeded")
}

func testErasure(f *fixture) {
	admin := f.token("admin", []string{"*"})
	base := "/api/memories/er"
	u1 := f.add(admin, "er", api.GrainInput{Type: "fact", Subject: alice, UserID: userU1, Scope: "a/b"})
	u1b := f.add(admin, "er", api.GrainInput{Type: "fact", Subject: alice, Object: "2", UserID: userU1, Scope: "c"})
	other := f.add(admin, "er", api.GrainInput{Type: "fact", Subject: bob, UserID: userU2, Scope: "c"})

	// Subject access export before the erasure: an armored age file that
	// opens with the requester's identity and holds only the user's grains.
	id, err := age.GenerateX25519Identity()
	if err != nil {
		f.t.Fatal(err)
	}
	x := f.call(admin, "POST", base+"/export", map[string]any{"user_id": userU1, "recipient": id.Recipient().String()})
	f.want(x, 200, "")
	if bytes.Contains(x.body, []byte(alice)) {
		f.t.Error("the export travels in clear")
	}
	r, err := age.Decrypt(armor.NewReader(bytes.NewReader(x.body)), id)
	if err != nil {
		f.t.Fatalf("export does not open: %v", err)
	}
	var doc lethe.Export
	if err := json.NewDecoder(r).Decode(&doc); err != nil || doc.Count != 2 || doc.UserID != userU1 {
		f.t.Errorf("export document: %v %+v", err, doc)
	}
	f.want(f.call(admin, "POST", base+"/export", map[string]any{"user_id": userU1, "recipient": "nope"}), 400, "invalid_argument")
	f.want(f.call(admin, "POST", base+"/export", map[string]any{"user_id": userU1}), 400, "invalid_argument")
	f.want(f.call(admin, "POST", base+"/export", map[string]any{"recipient": id.Recipient().String()}), 400, "empty_selector")

	for _, body := range []string{`{}`, `{"user_id":""}`, `{"user_id":"  "}`} {
		f.want(f.call(admin, "POST", base+"/forget-user", body), 400, "empty_selector")
	}
	f.want(f.call(admin, "POST", base+"/forget-user", `{"user":"x"}`), 400, "invalid_argument")
	a := f.call(admin, "POST", base+"/forget-user", map[string]any{"user_id": userU1})
	f.want(a, 200, "")
	var er lethe.Erasure
	a.decode(f.t, &er)
	if er.Count != 2 || er.KeyFingerprint == "" || er.Receipt == nil || er.Proof == nil {
		f.t.Fatalf("forget-user: %s", a.body)
	}
	key := f.auditKey(admin)
	nonce, _ := hex.DecodeString(er.SubjectNonce)
	if _, err := proofs.Verify(er.Proof, proofs.VerifyOptions{LogKey: key, Subject: userU1, Nonce: nonce}); err != nil {
		f.t.Errorf("forget-user proof: %v", err)
	}
	for _, h := range []string{u1, u1b} {
		f.want(f.call(admin, "GET", base+"/grains/"+h, nil), 404, "not_found")
	}
	f.want(f.call(admin, "GET", base+"/grains/"+other, nil), 200, "")
	f.want(f.call(admin, "POST", "/api/memories/er-none/forget-user", map[string]any{"user_id": userU1}), 404, "not_found")

	// Scope erase.
	for _, body := range []string{`{}`, `{"scope":""}`, `{"scope":"/"}`} {
		f.want(f.call(admin, "POST", base+"/scope-erase", body), 400, "empty_selector")
	}
	f.want(f.call(admin, "POST", base+"/scope-erase", `{"scope":"a//b"}`), 400, "invalid_scope")
	a = f.call(admin, "POST", base+"/scope-erase", map[string]any{"scope": "c"})
	f.want(a, 200, "")
	a.decode(f.t, &er)
	if er.Count != 1 || er.Proof == nil {
		f.t.Errorf("scope-erase: %s", a.body)
	}

	// Holds: a held scope or user refuses destruction with 423.
	a = f.call(admin, "POST", base+"/holds", map[string]any{"scope": "legal"})
	f.want(a, 201, "")
	var hold lethe.Hold
	a.decode(f.t, &hold)
	a = f.call(admin, "POST", base+"/holds", map[string]any{"user_id": userU2})
	f.want(a, 201, "")
	var uhold lethe.Hold
	a.decode(f.t, &uhold)
	if strings.Contains(string(a.body), userU2) {
		f.t.Error("a hold names its user")
	}
	f.want(f.call(admin, "POST", base+"/holds", `{}`), 400, "empty_selector")
	f.want(f.call(admin, "POST", base+"/holds", `{"scope":""}`), 400, "empty_selector")
	f.want(f.call(admin, "POST", base+"/holds", `{"scope":"x","user_id":"y"}`), 400, "invalid_argument")
	held := f.add(admin, "er", api.GrainInput{Type: "fact", Subject: "held-grain", Scope: "legal/case1"})
	f.add(admin, "er", api.GrainInput{Type: "fact", Subject: "held-user-grain", UserID: userU2, Scope: "d"})
	f.want(f.call(admin, "POST", base+"/scope-erase", map[string]any{"scope": "legal"}), 423, "held")
	f.want(f.call(admin, "POST", base+"/forget-user", map[string]any{"user_id": userU2}), 423, "held")
	f.want(f.call(admin, "POST", base+"/forget", map[string]any{"blob_hash": held}), 423, "held")
	a = f.call(admin, "GET", base+"/holds", nil)
	var holds api.HoldList
	a.decode(f.t, &holds)
	if len(holds.Holds) != 2 {
		f.t.Errorf("holds: %s", a.body)
	}
	f.want(f.call(admin, "DELETE", base+"/holds/"+hold.ID, nil), 204, "")
	f.want(f.call(admin, "DELETE", base+"/holds/"+uhold.ID, nil), 204, "")
	f.want(f.call(admin, "DELETE", base+"/holds/not-an-id", nil), 400, "invalid_argument")
	f.want(f.call(admin, "POST", base+"/scope-erase", map[string]any{"scope": "legal"}), 200, "")

	// A scope-limited DPO.
	dpo := f.token("dpo", []string{"er"}, "mine")
	f.want(f.call(dpo, "POST", base+"/forget-user", map[string]any{"user_id": userU2}), 403, "forbidden")
	f.want(f.call(dpo, "POST", base+"/scope-erase", map[string]any{"scope": "d"}), 403, "forbidden")
	f.want(f.call(dpo, "POST", base+"/erase", map[string]any{"confirm": "er"}), 403, "forbidden")
	f.want(f.call(dpo, "POST", base+"/holds", map[string]any{"user_id": userU2}), 403, "forbidden")
	f.want(f.call(dpo, "POST", base+"/holds", map[string]any{"scope": "d"}), 403, "forbidden")
	a = f.call(admin, "POST", base+"/holds", map[string]any{"scope": "d"})
	a.decode(f.t, &hold)
	// A hold outside its scopes, or on a user, is no hold to it: the
	// answer for an id that names none, byte for byte.
	a = f.call(admin, "POST", base+"/holds", map[string]any{"user_id": userU2})
	var uheld lethe.Hold
	a.decode(f.t, &uheld)
	none := strings.Repeat("e", 32)
	missing := f.call(dpo, "DELETE", base+"/holds/"+none, nil)
	f.want(missing, 404, "not_found")
	for _, id := range []string{hold.ID, uheld.ID} {
		a = f.call(dpo, "DELETE", base+"/holds/"+id, nil)
		if got := strings.ReplaceAll(string(a.body), id, none); a.status != missing.status || got != string(missing.body) {
			f.t.Errorf("a scoped dpo releasing a hold it cannot see: %d %s; an unknown id: %d %s", a.status, a.body, missing.status, missing.body)
		}
	}
	f.want(f.call(admin, "DELETE", base+"/holds/"+uheld.ID, nil), 204, "")
	a = f.call(dpo, "POST", base+"/holds", map[string]any{"scope": "mine/x"})
	f.want(a, 201, "")
	var mine lethe.Hold
	a.decode(f.t, &mine)
	a = f.call(dpo, "GET", base+"/holds", nil)
	a.decode(f.t, &holds)
	if len(holds.Holds) != 1 || holds.Holds[0].ID != mine.ID {
		f.t.Errorf("scoped hold list: %s", a.body)
	}
	f.want(f.call(dpo, "DELETE", base+"/holds/"+mine.ID, nil), 204, "")
	f.add(admin, "er", api.GrainInput{Type: "fact", Subject: "m", Scope: "mine/y"})
	f.want(f.call(dpo, "POST", base+"/scope-erase", map[string]any{"scope": "mine/y"}), 200, "")
	f.want(f.call(admin, "DELETE", base+"/holds/"+hold.ID, nil), 204, "")

	// The whole memory.
	f.want(f.call(admin, "POST", base+"/erase", map[string]any{"confirm": "wrong"}), 400, "invalid_argument")
	f.want(f.call(admin, "POST", base+"/erase", `{}`), 400, "invalid_argument")
	a = f.call(admin, "POST", base+"/erase", map[string]any{"confirm": "er"})
	f.want(a, 200, "")
	a = f.call(admin, "POST", base+"/recall", api.RecallRequest{})
	var page lethe.Page
	a.decode(f.t, &page)
	if a.status != 200 || len(page.Grains) != 0 {
		f.t.Errorf("recall after erasing the memory: %d %s", a.status, a.body)
	}
}

func (f *fixture) auditKey(token string) string {
	f.t.Helper()
	var key api.AuditKeyResponse
	f.call(token, "GET", "/api/audit/key", nil).decode(f.t, &key)
	return key.Key
}

func testForgetting(f *fixture) {
	admin := f.token("admin", []string{"*"})
	base := "/api/memories/fg"
	old := time.Now().Add(-400 * 24 * time.Hour)
	stale := f.add(admin, "fg", api.GrainInput{Type: "fact", Subject: "stale-one", CreatedAt: old})
	fresh := f.add(admin, "fg", api.GrainInput{Type: "fact", Subject: "fresh-one", Scope: "mine/a"})
	caveat := f.add(admin, "fg", api.GrainInput{Type: "caveat", Content: "never drop", Scope: "other"})

	// Decay purge: a dry run changes nothing, the real one forgets the stale grain.
	a := f.call(admin, "POST", base+"/purge/stale", map[string]any{"dry_run": true, "threshold": 0.3, "min_age_days": 7})
	f.want(a, 200, "")
	var pr lethe.PurgeResult
	a.decode(f.t, &pr)
	if !pr.DryRun || pr.Candidates != 1 || pr.Forgotten != 1 {
		f.t.Errorf("dry purge: %s", a.body)
	}
	f.want(f.call(admin, "GET", base+"/grains/"+stale, nil), 200, "")
	a = f.call(admin, "POST", base+"/purge/stale", map[string]any{"threshold": 0.3, "min_age_days": 7})
	f.want(a, 200, "")
	a.decode(f.t, &pr)
	if pr.Forgotten != 1 || len(pr.Hashes) != 1 || pr.Hashes[0] != stale || pr.Receipt == nil {
		f.t.Errorf("purge: %s", a.body)
	}
	f.want(f.call(admin, "GET", base+"/grains/"+stale, nil), 404, "not_found")
	f.want(f.call(admin, "POST", base+"/purge/stale", map[string]any{"curve": "cubic"}), 400, "invalid_argument")
	f.want(f.call(admin, "POST", base+"/purge/stale", map[string]any{"half_life": 3}), 400, "invalid_argument")

	// Archive: out of default recall, still reachable.
	a = f.call(admin, "POST", base+"/archive", map[string]any{"hashes": []string{fresh}})
	f.want(a, 200, "")
	var ar lethe.ArchiveResult
	a.decode(f.t, &ar)
	if ar.Archived != 1 {
		f.t.Errorf("archive: %s", a.body)
	}
	var page lethe.Page
	f.call(admin, "POST", base+"/recall", api.RecallRequest{}).decode(f.t, &page)
	for _, g := range page.Grains {
		if g.Hash == fresh {
			f.t.Error("an archived grain in default recall")
		}
	}
	f.call(admin, "POST", base+"/recall", api.RecallRequest{IncludeArchived: true}).decode(f.t, &page)
	if len(page.Grains) != 2 {
		f.t.Errorf("recall with archived: %d grains", len(page.Grains))
	}
	var g lethe.Grain
	f.call(admin, "GET", base+"/grains/"+fresh, nil).decode(f.t, &g)
	if !g.Archived {
		f.t.Error("get: not archived")
	}
	f.want(f.call(admin, "POST", base+"/archive", map[string]any{"hashes": []string{}}), 400, "empty_selector")
	f.want(f.call(admin, "POST", base+"/archive", map[string]any{"hashes": []string{fresh}, "dry_run": true}), 400, "invalid_argument")
	f.want(f.call(admin, "POST", base+"/archive", map[string]any{"hashes": []string{strings.Repeat("0", 64)}}), 404, "not_found")
	a = f.call(admin, "POST", base+"/archive", map[string]any{"dry_run": true})
	f.want(a, 200, "")
	f.want(f.call(admin, "POST", base+"/archive", map[string]any{"trigger": "never"}), 400, "invalid_argument")
	a = f.call(admin, "GET", base+"/archive/candidates", nil)
	f.want(a, 200, "")
	var hl api.HashList
	a.decode(f.t, &hl)
	if hl.Hashes == nil {
		f.t.Error("candidates: null")
	}
	f.want(f.call(admin, "POST", base+"/risk-sweep", map[string]any{"dry_run": true}), 200, "")

	// Protected grains: forget refuses, force overrides.
	f.want(f.call(admin, "POST", base+"/forget", map[string]any{"blob_hash": caveat}), 409, "protected")
	f.want(f.call(admin, "POST", base+"/forget", map[string]any{"blob_hash": caveat, "force": true}), 200, "")

	// A scope-limited DPO.
	dpo := f.token("dpo", []string{"fg"}, "mine")
	f.want(f.call(dpo, "POST", base+"/purge/stale", map[string]any{"dry_run": true}), 403, "forbidden")
	f.want(f.call(dpo, "POST", base+"/archive", map[string]any{"dry_run": true}), 403, "forbidden")
	f.want(f.call(dpo, "POST", base+"/risk-sweep", map[string]any{"dry_run": true}), 403, "forbidden")
	f.want(f.call(dpo, "GET", base+"/archive/candidates", nil), 403, "forbidden")
	other := f.add(admin, "fg", api.GrainInput{Type: "fact", Subject: "other-one", Scope: "other"})
	// A grain outside its scopes is no grain to it (see testScopesUnseen).
	f.want(f.call(dpo, "POST", base+"/archive", map[string]any{"hashes": []string{other}}), 404, "not_found")
	f.want(f.call(dpo, "POST", base+"/archive", map[string]any{"hashes": []string{fresh}}), 200, "")
}

func TestReadyzUnavailable(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	f.tokens.Close()
	a := f.call("", "GET", "/readyz", nil)
	if a.status != 503 || !strings.Contains(string(a.body), `"tokens":"unavailable"`) {
		t.Errorf("readyz with a closed store: %d %s", a.status, a.body)
	}
	f.want(f.call("", "GET", "/healthz", nil), 200, "")
	// Without its store a token cannot be checked: 503, not 401 or 500.
	f.want(f.call("lethe_x", "POST", "/api/memories/default/recall", api.RecallRequest{}), 503, "unavailable")
}

// testHistoryExport exports a version chain through the API: a dpo gets
// the versions' fields, an auditor the chain without them, a scoped token
// nothing; every export verifies against the log key.
func testHistoryExport(f *fixture) {
	admin := f.token("admin", []string{"*"})
	dpo := f.token("dpo", []string{"*"})
	auditor := f.token("auditor", []string{"*"})
	scoped := f.token("dpo", []string{"*"}, "a")
	base := "/api/memories/hx"
	v1 := f.add(admin, "hx", api.GrainInput{Type: "fact", Subject: alice, Relation: "lives_in", Object: "paris", UserID: userU1})
	a := f.call(admin, "POST", base+"/supersede", map[string]any{"blob_hash": v1, "type": "fact", "object": "lyon"})
	f.want(a, 201, "")
	var sup struct {
		Hash string `json:"hash"`
	}
	a.decode(f.t, &sup)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		f.t.Fatal(err)
	}
	open := func(a answer) *proofs.HistoryExport {
		f.t.Helper()
		f.want(a, 200, "")
		if bytes.Contains(a.body, []byte(alice)) || a.header.Get(api.HeaderEventID) == "" {
			f.t.Fatalf("history export: clear text or no event id: %s", a.header)
		}
		r, err := age.Decrypt(armor.NewReader(bytes.NewReader(a.body)), id)
		if err != nil {
			f.t.Fatalf("history export does not open: %v", err)
		}
		plain, _ := io.ReadAll(r)
		v, err := proofs.VerifyHistoryExport(plain, proofs.VerifyOptions{LogKey: f.db.AuditKey()})
		if err != nil {
			f.t.Fatalf("history export does not verify: %v", err)
		}
		return v.Export
	}
	rcpt := id.Recipient().String()
	x := open(f.call(dpo, "POST", base+"/export/history", map[string]any{"hash": v1, "recipient": rcpt}))
	if x.FieldsWithheld || len(x.Chains) != 1 || len(x.Chains[0].Versions) != 2 || x.Chains[0].Versions[1].Hash != sup.Hash ||
		!bytes.Contains(x.Chains[0].Versions[1].Fields, []byte("lyon")) {
		f.t.Errorf("dpo history export: %+v", x)
	}
	x = open(f.call(auditor, "POST", base+"/export/history", map[string]any{"hash": sup.Hash, "recipient": rcpt}))
	if !x.FieldsWithheld || len(x.Chains) != 1 || len(x.Chains[0].Versions) != 2 || x.Chains[0].Versions[0].Fields != nil {
		f.t.Errorf("auditor history export: %+v", x)
	}
	a = f.call(dpo, "POST", base+"/export/history", map[string]any{"subject": alice, "recipient": rcpt})
	if a.header.Get(api.HeaderSubjectNonce) == "" {
		f.t.Error("a subject export answers no subject nonce")
	}
	if x = open(a); x.Selector != "subject" || len(x.Chains) != 1 {
		f.t.Errorf("subject history export: %+v", x)
	}
	f.want(f.call(scoped, "POST", base+"/export/history", map[string]any{"hash": v1, "recipient": rcpt}), 403, "forbidden")
	f.want(f.call(dpo, "POST", base+"/export/history", map[string]any{"hash": strings.Repeat("ab", 32), "recipient": rcpt}), 404, "no_chain")
	f.want(f.call(dpo, "POST", base+"/export/history", map[string]any{"subject": "nobody", "recipient": rcpt}), 404, "no_chain")
	f.want(f.call(dpo, "POST", base+"/export/history", map[string]any{"hash": v1}), 400, "invalid_argument")
	f.want(f.call(dpo, "POST", base+"/export/history", map[string]any{"hash": v1, "recipient": "nope"}), 400, "invalid_argument")
	f.want(f.call(dpo, "POST", base+"/export/history", map[string]any{"recipient": rcpt}), 400, "empty_selector")
	// Both selectors is a malformed request, not an empty one (as scope
	// and scope_path in a scope-erase).
	f.wantField(f.call(dpo, "POST", base+"/export/history", map[string]any{"hash": v1, "subject": alice, "recipient": rcpt}), 400, "invalid_argument", "subject")
	f.wantField(f.call(dpo, "POST", base+"/export/history", map[string]any{"hash": "", "subject": alice, "recipient": rcpt}), 400, "invalid_argument", "subject")
	f.want(f.call(dpo, "POST", base+"/export/history", map[string]any{"hash": "xyz", "recipient": rcpt}), 400, "invalid_argument")
}

// TestAccessLogMemory: the access log names a route's memory only once
// the request's token is authenticated and may use that memory; a request
// without a token, with a bogus one or with a token for other memories
// writes no name of its choosing into the log (the probe wrote
// "walter.smith.piimem2" with a bogus token). No query string either.
func TestAccessLogMemory(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	other := f.token("reader", []string{"logged-mem"})
	noRole := f.token("writer", []string{"role-mem"})
	for i, c := range []struct {
		token, memory string
		status        int
		logged        bool
	}{
		{"", "walter.smith.piimem1", 401, false},
		{"lethe_bogus", "walter.smith.piimem2", 401, false},
		{other, "walter.smith.piimem3", 403, false},
		{noRole, "role-mem", 403, true}, // its own memory, without the role
		{other, "logged-mem", 200, true},
	} {
		f.want(f.call(c.token, "POST", "/api/memories/"+c.memory+"/recall?user=walter.smith.query", api.RecallRequest{}), c.status, "")
		// The line is written once the answer is sent.
		for deadline := time.Now().Add(5 * time.Second); strings.Count(f.logs.String(), `"msg":"request"`) <= i && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if got := strings.Contains(f.logs.String(), `"memory":"`+c.memory+`"`); got != c.logged {
			t.Errorf("%d for memory %s: in the access log %t, want %t", c.status, c.memory, got, c.logged)
		}
	}
	logs := f.logs.String()
	for _, s := range []string{"walter.smith", "lethe_bogus"} {
		if strings.Contains(logs, s) {
			t.Errorf("the access log holds %q:\n%s", s, logs)
		}
	}
	if n := strings.Count(logs, `"msg":"request"`); n != 5 {
		t.Errorf("%d access log lines, want 5:\n%s", n, logs)
	}
}
