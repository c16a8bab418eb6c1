package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
)

// TestLoad runs a small load against a real server, through each client,
// and checks every phase ran without errors.
func TestLoad(t *testing.T) {
	for _, client := range []string{"conn", "go", "conn+floor"} {
		t.Run(client, func(t *testing.T) { testLoad(t, client) })
	}
}

// testLoad runs lethe-load against a server in this process. With
// "+floor" each phase runs through the library too, and the recall and get
// phases a third time, paced (each call after a ping).
func testLoad(t *testing.T, client string) {
	client, floor := strings.CutSuffix(client, "+floor")
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
	args := []string{"--server", srv.URL, "--token-file", tokFile, "--grains", "300", "--batch", "100",
		"--users", "10", "--pings", "30", "--recalls", "50", "--gets", "20", "--forgets", "10", "--erasures", "2", "--json"}
	if client == "go" {
		args = append(args, "--go-client")
	}
	if floor {
		args = append(args, "--floor", "sqlite")
	}
	err = run(ctx, args, &out, &errb)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	var r report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Client != client {
		t.Errorf("the report says client %q, want %q", r.Client, client)
	}
	want := map[string]int{"add (batch)": 300, pingPhase: 30, "recall": 50, "get": 20, "forget (hash)": 10, "erase (user)": 60}
	paced := map[string]bool{"recall": true, "get": true}
	for _, p := range r.Phases {
		if p.Errors != 0 || p.Items != want[p.Name] || p.P99 < p.P50 {
			t.Errorf("%s: %+v", p.Name, p)
		}
		// The floor runs every phase but the ping (the library has no
		// round trip); the paced floor runs recall and get.
		if f := p.Floor; floor && p.Name != pingPhase && (f == nil || f.Errors != 0 || f.Items != p.Items || f.P50 <= 0) {
			t.Errorf("%s: floor %+v", p.Name, f)
		}
		if f := p.Paced; floor && paced[p.Name] != (f != nil) || f != nil && (f.Errors != 0 || f.Items != p.Items || f.P50 <= 0) {
			t.Errorf("%s: paced floor %+v", p.Name, f)
		}
		if !floor && (p.Floor != nil || p.Paced != nil) {
			t.Errorf("%s: a floor without --floor", p.Name)
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

func TestReportShowsTheOverheadOverTheFloor(t *testing.T) {
	r := &report{Server: "http://127.0.0.1:1", Memory: "m", Concurrency: 1, Phases: []*phase{
		{Name: pingPhase, Requests: 10, Items: 10, P50: 210 * time.Microsecond},
		{Name: "recall", Requests: 10, Items: 10, P50: 540 * time.Microsecond,
			Floor: &phase{Name: "recall", Requests: 10, Items: 10, P50: 150 * time.Microsecond},
			Paced: &phase{Name: "recall", Requests: 10, Items: 10, P50: 200 * time.Microsecond}},
		{Name: "get", Requests: 10, Items: 10, P50: 90 * time.Microsecond,
			Floor: &phase{Name: "get", Requests: 10, Items: 10, P50: 100 * time.Microsecond}},
	}}
	var out bytes.Buffer
	if err := r.print(&out, false); err != nil {
		t.Fatal(err)
	}
	// Fields, not columns: the table's padding is tabwriter's.
	var fields []string
	for _, line := range strings.Split(out.String(), "\n") {
		fields = append(fields, strings.Join(strings.Fields(line), " "))
	}
	text := strings.Join(fields, "\n")
	for _, want := range []string{"p50/floor p50-floor", "recall 10 10 0 0.00s 0 540µs 0µs 0µs 3.60× +390µs",
		"library, paced 10 10 0 0.00s 0 200µs 0µs 0µs 2.70× +340µs",
		"get 10 10 0 0.00s 0 90µs 0µs 0µs 0.90× -10µs", "its p50 (210µs) is the HTTP round trip",
		"library, paced: each call after one ping"} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

// bareEnv names, in a child process of this test binary, the file where
// serveBare writes its addresses.
const bareEnv = "LETHE_LOAD_BARE_ADDRS"

func TestMain(m *testing.M) {
	if f := os.Getenv(bareEnv); f != "" {
		serveBare(f)
		return
	}
	os.Exit(m.Run())
}

// bareHandler answers every request with a constant.
var bareHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"status":"ok"}`))
})

// echo writes back every byte each connection of l sends, until l closes.
func echo(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go io.Copy(c, c)
	}
}

// serveBare serves, until its parent closes its stdin, a net/http server
// whose one handler writes a constant and a TCP server that echoes every
// byte, and writes their addresses to file.
func serveBare(file string) {
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go http.Serve(hl, bareHandler)
	go echo(tl)
	if err := os.WriteFile(file, []byte(hl.Addr().String()+" "+tl.Addr().String()), 0o600); err != nil {
		panic(err)
	}
	io.Copy(io.Discard, os.Stdin)
}

// BenchmarkLoopbackFloor measures what a request between two processes
// costs on this machine before any server does any work: a one-byte TCP
// exchange and a GET to a net/http server that writes a constant, each
// with the server in a child process (cross-process) and, for contrast,
// in this one (in-process); the GET through Go's http.Client and, as
// http-get-one-goroutine, through lethe-load's connClient. lethe-load's
// ping phase is the same GET to lethe's /healthz (docs/performance.md).
func BenchmarkLoopbackFloor(b *testing.B) {
	file := filepath.Join(b.TempDir(), "addrs")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), bareEnv+"="+file)
	stdin, err := child.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	var addrs []string
	for range 500 {
		if raw, err := os.ReadFile(file); err == nil && len(raw) > 0 {
			addrs = strings.Fields(string(raw))
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(addrs) != 2 {
		b.Fatal("the child server did not start")
	}
	local := httptest.NewServer(bareHandler)
	defer local.Close()
	el, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer el.Close()
	go echo(el)

	tcp := func(addr string) func(b *testing.B) {
		return func(b *testing.B) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := []byte{1}
			timed(b, func() error {
				if _, err := c.Write(buf); err != nil {
					return err
				}
				_, err := io.ReadFull(c, buf)
				return err
			})
		}
	}
	// get sends the GET through one of lethe-load's senders: Go's
	// http.Client, or connClient (written and read on the caller's
	// goroutine, no Transport with read and write loops of their own).
	get := func(s sender, url string) func(b *testing.B) {
		return func(b *testing.B) {
			timed(b, func() error {
				req, err := http.NewRequest(http.MethodGet, url, nil)
				if err != nil {
					return err
				}
				_, _, err = s.send(req)
				return err
			})
		}
	}
	goc := func() sender { return goClient{&http.Client{}} }
	conn := func(addr string) sender { return &connClient{addr: addr, timeout: time.Minute} }
	b.Run("tcp-1-byte/cross-process", tcp(addrs[1]))
	b.Run("tcp-1-byte/in-process", tcp(el.Addr().String()))
	b.Run("http-get/cross-process", get(goc(), "http://"+addrs[0]+"/"))
	b.Run("http-get/in-process", get(goc(), local.URL+"/"))
	b.Run("http-get-one-goroutine/cross-process", get(conn(addrs[0]), "http://"+addrs[0]+"/"))
	b.Run("http-get-one-goroutine/in-process", get(conn(strings.TrimPrefix(local.URL, "http://")), local.URL+"/"))
}

// timed runs op b.N times and reports its p50 and p99 in µs.
func timed(b *testing.B, op func() error) {
	var ds []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	b.ReportMetric(float64(percentile(ds, 0.50))/1e3, "p50-µs")
	b.ReportMetric(float64(percentile(ds, 0.99))/1e3, "p99-µs")
}

// TestConnClient checks the one-goroutine client against net/http's
// server: keep-alive reuse, bodies of both framings, a server that closes
// the connection, and a kept connection the server closed meanwhile.
func TestConnClient(t *testing.T) {
	var conns atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/block":
			<-release
			return
		case "/close":
			w.Header().Set("Connection", "close")
		case "/big": // past net/http's buffer: chunked
			w.Write(bytes.Repeat([]byte("x"), 10000))
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write(append([]byte(r.Method+" "), body...))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	// No deadline of its own within the test: only the cancellation can end
	// the blocked request below.
	k := &connClient{addr: strings.TrimPrefix(srv.URL, "http://"), timeout: time.Hour}
	defer k.close()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, err := http.NewRequest(method, srv.URL+path, r)
		if err != nil {
			t.Fatal(err)
		}
		status, b, err := k.send(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return status, string(b)
	}
	for i := range 5 {
		if st, b := do(http.MethodPost, "/", fmt.Sprint(i)); st != http.StatusCreated || b != fmt.Sprintf("POST %d", i) {
			t.Fatalf("POST: %d %q", st, b)
		}
	}
	if st, b := do(http.MethodGet, "/big", ""); st != http.StatusOK || b != strings.Repeat("x", 10000) {
		t.Fatalf("GET /big: %d, %d bytes", st, len(b))
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 6 requests on a kept connection", n)
	}
	do(http.MethodGet, "/close", "")
	// A POST is not sent twice: the closed connection must not be kept.
	if st, b := do(http.MethodPost, "/", "after"); st != http.StatusCreated || b != "POST after" {
		t.Fatalf("POST after a closing response: %d %q", st, b)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections: the closed one was not replaced once", n)
	}
	// The server closes the kept connection; a GET goes again on a new one.
	srv.CloseClientConnections()
	time.Sleep(50 * time.Millisecond)
	if st, b := do(http.MethodGet, "/", ""); st != http.StatusCreated || b != "GET " {
		t.Fatalf("GET after the server closed the connection: %d %q", st, b)
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d connections after the server closed one", n)
	}
	// A cancelled request returns while the server still holds it (the
	// handler is released only after), and its connection is not kept.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/block", strings.NewReader("x"))
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, _, err := k.send(req); err == nil {
		t.Fatal("a cancelled request succeeded")
	}
	close(release)
	do(http.MethodGet, "/", "")
	if n := conns.Load(); n != 4 {
		t.Fatalf("%d connections: the cancelled request's was kept", n)
	}
}

// A request's latency ends when its answer has been read, not when the
// client has decoded it; through the library, when the call returns.
func TestLatencyEndsWhenTheAnswerIsRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"count":1}`))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	const pause = 300 * time.Millisecond // decoding, or the call's own work
	for _, client := range []sender{&connClient{addr: u.Host, timeout: time.Minute}, goClient{srv.Client()}} {
		c := &config{server: srv.URL, concurrency: 1, client: client}
		answered := c.work(context.Background(), "answered", 3, func(ctx context.Context, _ int) (int, error) {
			err := c.call(ctx, http.MethodGet, "/", nil, nil, http.StatusOK)
			time.Sleep(pause)
			return 1, err
		})
		if answered.Errors > 0 || answered.Max >= pause {
			t.Errorf("%T: the latency (max %v, %s) includes what followed the answer", client, answered.Max, answered.FirstError)
		}
		returned := c.work(context.Background(), "returned", 3, func(ctx context.Context, _ int) (int, error) {
			time.Sleep(pause)
			return 1, nil
		})
		if returned.P50 < pause {
			t.Errorf("%T: a job that sent nothing was timed %v, less than its %v", client, returned.P50, pause)
		}
	}
}
