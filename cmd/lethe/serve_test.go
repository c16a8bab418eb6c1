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
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"filippo.io/age"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/testenv"
)

// cli runs one lethe command line in-process.
func cli(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), err
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, err := cli(t, args...)
	if err != nil {
		t.Fatalf("lethe %s: %v\n%s", strings.Join(args, " "), err, errs)
	}
	return out
}

// TestServeAndRemoteCLI starts "lethe serve --addr 127.0.0.1:0" in the
// background and drives it with the CLI's --server mode, on SQLite and on
// PostgreSQL.
func TestServeAndRemoteCLI(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			for _, v := range []string{"LETHE_DATA", "LETHE_POSTGRES_DSN", "LETHE_SERVER", "LETHE_TOKEN_FILE", "LETHE_ADMIN_TOKEN", "LETHE_ADDR"} {
				t.Setenv(v, "")
			}
			t.Setenv("LETHE_HOOKS_ALLOW_PRIVATE", "1") // the hook receiver is on 127.0.0.1
			var pg []string
			if backend == "postgres" {
				pg = []string{"--postgres", testenv.Postgres(t)}
			}
			testServe(t, pg)
		})
	}
}

func testServe(t *testing.T, pg []string) {
	dir := t.TempDir()
	data, addrFile := filepath.Join(dir, "data"), filepath.Join(dir, "addr")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &testenv.Logs{}
	done := make(chan error, 1)
	go func() {
		args := append([]string{"serve", "--data", data, "--addr", "127.0.0.1:0", "--addr-file", addrFile}, pg...)
		done <- run(ctx, args, strings.NewReader(""), &bytes.Buffer{}, logs)
	}()
	var addr []byte
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if addr, err = os.ReadFile(addrFile); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start\n%s", logs)
		}
	}
	server := "http://" + strings.TrimSpace(string(addr))

	// The generated admin token: mode 0600, its path logged, not its value.
	adminFile := filepath.Join(data, "admin.token")
	fi, err := os.Stat(adminFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("admin token mode %v", fi.Mode().Perm())
	}
	adminSecret, _ := os.ReadFile(adminFile)
	if !strings.Contains(logs.String(), adminFile) || strings.Contains(logs.String(), strings.TrimSpace(string(adminSecret))) {
		t.Errorf("the log must name the admin token's path, not its value:\n%s", logs)
	}
	// LETHE_HOOKS_ALLOW_PRIVATE is set (above): the start says so.
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"hooks may reach loopback, private and other internal addresses`) {
		t.Errorf("the log must warn that hooks may reach internal addresses:\n%s", logs)
	}

	admin := []string{"--server", server, "--token-file", adminFile}
	var created struct{ Token, ID string }
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"token", "create", "--role", "writer,reader,dpo", "--memory", "default", "--json"}, admin...)...)), &created); err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte(created.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := []string{"--server", server, "--token-file", tokFile}
	r := func(args ...string) []string { return append(args, remote...) }

	a := strings.TrimSpace(mustCLI(t, r("add", "fact", "subject=serve-alice-31f", "relation=likes", "object=tea", "user_id=serve-u1-9c2")...))
	if len(a) != 64 {
		t.Fatalf("add printed %q", a)
	}
	mustCLI(t, r("add", "fact", "subject=serve-bob-7aa", "relation=likes", "object=jazz")...)
	if out := mustCLI(t, r("recall", "--subject", "serve-alice-31f")...); !strings.Contains(out, a) || !strings.Contains(out, `"tea"`) {
		t.Errorf("recall: %q", out)
	}
	if out := mustCLI(t, r("inspect", a)...); !strings.Contains(out, "user_id:    serve-u1-9c2") {
		t.Errorf("inspect: %q", out)
	}
	b := strings.TrimSpace(mustCLI(t, r("supersede", a, "fact", "object=coffee")...))
	if out := mustCLI(t, r("history", b)...); !strings.Contains(out, a) || !strings.Contains(out, b) {
		t.Errorf("history: %q", out)
	}
	_, errs, err := cli(t, r("forget", "--subject=", "--yes")...)
	if lethe.ErrorCode(err) != "empty_selector" {
		t.Errorf("forget --subject=: %v %s", err, errs)
	}
	if out := mustCLI(t, r("forget", "--subject", "serve-alice-31f", "--yes")...); !strings.Contains(out, "forgot 2 grain(s)") {
		t.Errorf("forget: %q", out)
	}
	if _, errs, err := cli(t, r("inspect", a)...); lethe.ErrorCode(err) != "not_found" {
		t.Errorf("inspect after forget: %v %s", err, errs)
	}
	if out := mustCLI(t, r("forget", "--user", "serve-u1-9c2", "--yes", "--json")...); !strings.Contains(out, `"status": "not_found"`) {
		t.Errorf("forget by user: %q", out)
	}
	// A confined forget through the server: --scope and --namespace reach
	// the route's body, and a chain outside them is refused whole.
	erin := strings.TrimSpace(mustCLI(t, r("add", "fact", "subject=serve-erin-0b4", "scope=acme/prod", "namespace=ops")...))
	for _, confine := range [][]string{{"--scope", "acme/dev"}, {"--namespace", "other"}, {"--scope", "acme", "--namespace", "other"}} {
		if _, errs, err := cli(t, r(append([]string{"forget", "--subject", "serve-erin-0b4", "--yes"}, confine...)...)...); lethe.ErrorCode(err) != "forbidden" {
			t.Errorf("forget confined by %v: %v %s", confine, err, errs)
		}
	}
	if out := mustCLI(t, r("forget", "--subject", "serve-erin-0b4", "--scope", "beta", "--scope", "acme", "--namespace", "ops", "--yes")...); !strings.Contains(out, "forgot 1 grain(s)") {
		t.Errorf("confined forget: %q", out)
	}
	if _, errs, err := cli(t, r("inspect", erin)...); lethe.ErrorCode(err) != "not_found" {
		t.Errorf("inspect after a confined forget: %v %s", err, errs)
	}
	// The forgotten chain's version-chain export through the server: it
	// opens with the identity and verifies offline with the log key.
	hid, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	idFile, hx := filepath.Join(dir, "id.txt"), filepath.Join(dir, "history.age")
	if err := os.WriteFile(idFile, []byte(hid.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, r("export", "history", b, "--recipient", hid.Recipient().String(), "--out", hx)...)
	logKey := strings.TrimSpace(mustCLI(t, append([]string{"audit", "key"}, admin...)...))
	if out := mustCLI(t, "verify-export", hx, "--identity", idFile, "--log-key", logKey); !strings.Contains(out, "OK: 1 chains, 2 versions") ||
		!strings.Contains(out, "forgotten -> ") {
		t.Errorf("verify-export of a server's history export: %q", out)
	}

	// Crypto-erasure, holds and the audit log through the server; the
	// proof verifies offline.
	mustCLI(t, r("add", "fact", "subject=serve-carol-5d1", "user_id=serve-u2-e07", "scope=case/a")...)
	hold := strings.TrimSpace(mustCLI(t, r("hold", "set", "--scope", "case")...))
	if out := mustCLI(t, r("hold", "list")...); !strings.Contains(out, hold+" scope case") {
		t.Errorf("hold list: %q", out)
	}
	if _, _, err := cli(t, r("forget", "scope", "case/a", "--yes")...); lethe.ErrorCode(err) != "held" {
		t.Errorf("erase under a hold: %v", err)
	}
	mustCLI(t, r("hold", "release", hold)...)
	// A webhook through the server: the erasure below reaches a real
	// receiver, signed so that the Standard Webhooks library verifies it.
	hookBodies := make(chan []byte, 16)
	var hookSecret atomic.Value
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		wh, err := standardwebhooks.NewWebhook(hookSecret.Load().(string))
		if err == nil {
			err = wh.Verify(body, req.Header)
		}
		if err != nil {
			t.Errorf("webhook signature: %v", err)
		}
		hookBodies <- body
	}))
	defer rcv.Close()
	hookOut := strings.Fields(mustCLI(t, r("hook", "add", rcv.URL+"/in", "--events", "key.erase")...))
	if len(hookOut) != 2 || !strings.HasPrefix(hookOut[0], "hk_") || !strings.HasPrefix(hookOut[1], "whsec_") {
		t.Fatalf("hook add printed %q", hookOut)
	}
	hookSecret.Store(hookOut[1])
	if out := mustCLI(t, r("hook", "list")...); !strings.Contains(out, hookOut[0]+" "+rcv.URL+"/in events=key.erase") || strings.Contains(out, "whsec_") {
		t.Errorf("hook list: %q", out)
	}
	// A subject access export through the server: armored age, never clear.
	if out := mustCLI(t, r("export", "--user", "serve-u2-e07", "--recipient", "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p")...); !strings.HasPrefix(out, "-----BEGIN AGE ENCRYPTED FILE-----") || strings.Contains(out, "serve-carol") {
		t.Errorf("export over the server: %q", out)
	}
	proof, errs, err := cli(t, r("forget", "user", "serve-u2-e07", "--yes")...)
	if err != nil || !strings.Contains(errs, "erased 1 grain(s)") {
		t.Fatalf("forget user: %v %s", err, errs)
	}
	nonce := regexpFind(t, `subject nonce: ([0-9a-f]{64})`, errs)
	event := regexpFind(t, `event: +([0-9a-f]+)`, errs)
	select {
	case body := <-hookBodies:
		if !strings.Contains(string(body), `"event_id":"`+event+`"`) || strings.Contains(string(body), "serve-u2-e07") {
			t.Errorf("webhook body: %s", body)
		}
	case <-time.After(20 * time.Second):
		t.Error("the erasure's webhook did not arrive")
	}
	mustCLI(t, r("hook", "remove", hookOut[0])...)
	if out := mustCLI(t, r("hook", "list")...); strings.TrimSpace(out) != "" {
		t.Errorf("hook list after remove: %q", out)
	}
	key := strings.TrimSpace(mustCLI(t, append([]string{"audit", "key"}, admin...)...))
	proofFile := filepath.Join(dir, "proof.json")
	os.WriteFile(proofFile, []byte(proof), 0o644)
	mustCLI(t, "verify", proofFile, "--log-key", key, "--subject", "serve-u2-e07", "--nonce", nonce)
	if _, _, err := cli(t, "verify", proofFile, "--log-key", key, "--subject", "someone-else", "--nonce", nonce); err == nil {
		t.Error("the proof verifies for another subject")
	}
	testRemoteRequests(t, dir, r, admin, key)
	again := mustCLI(t, append([]string{"audit", "proof", "--event", event}, admin...)...)
	if !strings.Contains(again, event) {
		t.Errorf("audit proof --event: %q", again)
	}
	if out := mustCLI(t, append([]string{"audit", "checkpoint"}, admin...)...); !strings.Contains(out, "\n\n") {
		t.Errorf("audit checkpoint: %q", out)
	}
	mustCLI(t, append([]string{"audit", "entry", "0"}, admin...)...)
	mustCLI(t, append([]string{"audit", "consistency", "1", "2"}, admin...)...)
	if _, _, err := cli(t, r("audit", "key")...); lethe.ErrorCode(err) != "forbidden" {
		t.Errorf("audit key as writer: %v", err)
	}

	// A writer is no admin; a reader-only token cannot forget.
	if _, errs, err := cli(t, r("token", "list")...); lethe.ErrorCode(err) != "forbidden" {
		t.Errorf("token list as writer: %v %s", err, errs)
	}
	// Tokens made locally on the same store work against the server.
	local := append([]string{"--data", data}, pg...)
	readerTok := strings.TrimSpace(mustCLI(t, append([]string{"token", "create", "--role", "reader"}, local...)...))
	readerFile := filepath.Join(dir, "reader")
	os.WriteFile(readerFile, []byte(readerTok), 0o600)
	rd := []string{"--server", server, "--token-file", readerFile}
	mustCLI(t, append([]string{"recall"}, rd...)...)
	if _, errs, err := cli(t, append([]string{"forget", "--subject", "x", "--yes"}, rd...)...); lethe.ErrorCode(err) != "forbidden" {
		t.Errorf("forget as reader: %v %s", err, errs)
	}

	// CAL through the server: a reader reads history, and FORGET as a
	// reader is forbidden, as the forget route is.
	c1 := strings.TrimSpace(mustCLI(t, r("add", "belief", "subject=serve-dan-4e2", "relation=likes", "object=coffee")...))
	c2 := strings.TrimSpace(mustCLI(t, r("cal", `SUPERSEDE "`+c1+`" SET object = "tea"`)...))
	if out := mustCLI(t, append([]string{"cal", `HISTORY OF "` + c1 + `"`}, rd...)...); !strings.Contains(out, c2+" belief") || !strings.Contains(out, c1) {
		t.Errorf("cal HISTORY OF over the server: %q", out)
	}
	if out := mustCLI(t, append([]string{"cal", `HISTORY WHERE subject = "serve-dan-4e2"`, "--json"}, rd...)...); !strings.Contains(out, `"chains"`) || strings.Count(out, `"hash"`) != 2 {
		t.Errorf("cal HISTORY WHERE over the server: %q", out)
	}
	if _, errs, err := cli(t, append([]string{"cal", `FORGET "` + c2 + `"`, "--yes"}, rd...)...); lethe.ErrorCode(err) != "forbidden" {
		t.Errorf("cal FORGET as reader: %v %s", err, errs)
	}
	if out := mustCLI(t, r("cal", `FORGET "`+c2+`"`, "--yes")...); !strings.Contains(out, "forgot 2 grain(s)") {
		t.Errorf("cal FORGET as dpo: %q", out)
	}
	// Areev's {"hashes": [...], "user_id": "john"} through the CLI: the
	// listed grains that are john's.
	j := strings.TrimSpace(mustCLI(t, r("add", "fact", "subject=serve-x-1", "user_id=serve-john")...))
	o := strings.TrimSpace(mustCLI(t, r("add", "fact", "subject=serve-x-2", "user_id=serve-other")...))
	if out := mustCLI(t, r("forget", j, o, "--user", "serve-john", "--yes", "--json")...); !strings.Contains(out, j) || strings.Contains(out, o) {
		t.Errorf("forget hashes --user: %q", out)
	}
	mustCLI(t, r("inspect", o)...)

	if out := mustCLI(t, append([]string{"token", "list"}, admin...)...); !strings.Contains(out, created.ID) || !strings.Contains(out, "tok_bootstrap") {
		t.Errorf("token list: %q", out)
	}
	// A token that expires, made through the server: its expiry in the
	// answer and the list, and it works until then.
	var expiring api.TokenCreated
	before := time.Now()
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"token", "create", "--role", "reader", "--expires-in", "2h", "--json"}, admin...)...)), &expiring); err != nil {
		t.Fatal(err)
	}
	if e := expiring.ExpiresAt; e == nil || e.Before(before.Add(2*time.Hour).Add(-time.Second)) || e.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("token create --expires-in 2h: expires_at %v, want about %v", e, before.Add(2*time.Hour))
	}
	expFile := filepath.Join(dir, "expiring")
	os.WriteFile(expFile, []byte(expiring.Token), 0o600)
	mustCLI(t, "recall", "--server", server, "--token-file", expFile)
	if out := mustCLI(t, append([]string{"token", "list"}, admin...)...); expiring.ExpiresAt != nil &&
		!strings.Contains(out, "live, expires "+expiring.ExpiresAt.Format(time.RFC3339)) {
		t.Errorf("token list: %q, want the token's expiry", out)
	}
	if _, errs, err := cli(t, append([]string{"token", "create", "--role", "reader", "--expires-in", "59s"}, admin...)...); lethe.ErrorCode(err) != "invalid_argument" ||
		!strings.Contains(err.Error(), "expires_in: must be between 60 seconds and 366 days") {
		t.Errorf("token create --expires-in 59s through the server: %v %s", err, errs)
	}
	mustCLI(t, append([]string{"token", "revoke", created.ID}, admin...)...)
	if _, errs, err := cli(t, r("recall")...); lethe.ErrorCode(err) != "unauthorized" {
		t.Errorf("revoked token: %v %s", err, errs)
	}
	if out := mustCLI(t, append([]string{"token", "list"}, local...)...); !strings.Contains(out, created.ID+"  dpo,reader,writer") || !strings.Contains(out, "revoked") {
		t.Errorf("local token list: %q", out)
	}

	// Commands that work on the embedded store only refuse --server.
	if _, _, err := cli(t, append([]string{"serve"}, remote...)...); err == nil {
		t.Error("serve --server ran")
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	l := logs.String()
	if !strings.Contains(l, `"msg":"stopped"`) {
		t.Errorf("no stop line:\n%s", l)
	}
	for _, personal := range []string{"serve-alice-31f", "serve-bob-7aa", "serve-u1-9c2", created.Token, readerTok} {
		if strings.Contains(l, personal) {
			t.Errorf("the server log holds %q", personal)
		}
	}
}

func regexpFind(t *testing.T, pattern, s string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%q not in %q", pattern, s)
	}
	return m[1]
}

// TestBootstrapRevokedStaysRevoked: a revoked bootstrap admin token stays
// revoked when the server starts again with the same secret, and the start
// says so; a new secret makes it live.
func TestBootstrapRevokedStaysRevoked(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tokens, err := auth.Open(ctx, auth.Config{SQLitePath: filepath.Join(dir, "lethe.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer tokens.Close()
	cfg := defaultServeConfig()
	cfg.Data = dir
	var logs testenv.Logs
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	if err := bootstrapAdmin(ctx, tokens, cfg, logger); err != nil {
		t.Fatal(err)
	}
	secret, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	if err := tokens.Revoke(ctx, auth.BootstrapID); err != nil {
		t.Fatal(err)
	}
	// A restart: the same admin.token.
	if err := bootstrapAdmin(ctx, tokens, cfg, logger); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Lookup(ctx, strings.TrimSpace(string(secret))); err == nil {
		t.Error("the revoked bootstrap token works again after a restart")
	}
	if !strings.Contains(logs.String(), "the bootstrap admin token is revoked") {
		t.Errorf("the start does not say the bootstrap token is revoked:\n%s", logs.String())
	}
	// A new secret makes it live.
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte(auth.NewSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := bootstrapAdmin(ctx, tokens, cfg, logger); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "admin.token"))
	if _, err := tokens.Lookup(ctx, strings.TrimSpace(string(b))); err != nil {
		t.Errorf("a new bootstrap secret: %v", err)
	}
}

// testRemoteRequests drives an erasure request through the server with
// two dpo tokens: file with one, approve with the other (the first cannot:
// four eyes), execute, verify the proof with "lethe verify", and write the
// certificate as HTML.
func testRemoteRequests(t *testing.T, dir string, r func(args ...string) []string, admin []string, key string) {
	t.Helper()
	var second struct{ Token string }
	if err := json.Unmarshal([]byte(mustCLI(t, append([]string{"token", "create", "--role", "dpo", "--memory", "default", "--json"}, admin...)...)), &second); err != nil {
		t.Fatal(err)
	}
	tok2 := filepath.Join(dir, "token2")
	if err := os.WriteFile(tok2, []byte(second.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := admin[1]
	r2 := func(args ...string) []string { return append(args, "--server", server, "--token-file", tok2) }
	mustCLI(t, r("add", "fact", "subject=req-s", "relation=r", "object=o", "user_id=serve-req-u9", "scope=acme")...)
	out, errs, err := cli(t, r("request", "create", "--user", "serve-req-u9", "--reason", "data_subject_request", "--reference", "ZD-9")...)
	if err != nil || !strings.Contains(errs, "would erase 1 grain(s) (acme: 1)") {
		t.Fatalf("request create: %v %s", err, errs)
	}
	id := strings.TrimSpace(out)
	nonce := regexpFind(t, `subject nonce: ([0-9a-f]{64})`, errs)
	if _, _, err := cli(t, r("request", "approve", id)...); lethe.ErrorCode(err) != lethe.CodeFourEyes {
		t.Errorf("self-approval: %v", err)
	}
	if out := mustCLI(t, r2("request", "approve", id)...); !strings.Contains(out, "approved by tok_") {
		t.Errorf("approve: %q", out)
	}
	proof, errs, err := cli(t, r("request", "execute", id, "--yes")...)
	if err != nil || !strings.Contains(errs, "erased 1 grain(s)") {
		t.Fatalf("request execute: %v %s", err, errs)
	}
	proofFile := filepath.Join(dir, "request-proof.json")
	os.WriteFile(proofFile, []byte(proof), 0o644)
	mustCLI(t, "verify", proofFile, "--log-key", key, "--subject", "serve-req-u9", "--nonce", nonce)
	if out := mustCLI(t, r2("request", "list", "--status", "executed")...); !strings.Contains(out, id) {
		t.Errorf("request list: %q", out)
	}
	page := filepath.Join(dir, "certificate.html")
	mustCLI(t, r2("request", "certificate", id, "--html", "--out", page)...)
	b, err := os.ReadFile(page)
	if err != nil || !strings.Contains(string(b), "Erasure certificate") || !strings.Contains(string(b), "ZD-9") || strings.Contains(string(b), "serve-req-u9") {
		t.Errorf("certificate page: %v\n%s", err, b)
	}
	// The certificate is written as an export is: readable by its owner
	// only, even over a file that was not.
	private := func(what string) {
		t.Helper()
		fi, err := os.Stat(page)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", what, fi.Mode().Perm())
		}
	}
	private("certificate page")
	if err := os.Chmod(page, 0o644); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, r2("request", "certificate", id, "--out", page)...)
	private("certificate over a 0644 file")
}
