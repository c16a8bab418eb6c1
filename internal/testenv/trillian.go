package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/trillian"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Environment written by .ci/services/30-trillian.sh.
const (
	TrillianAddrEnv   = "LETHE_TEST_TRILLIAN_ADDR"
	TrillianTreeEnv   = "LETHE_TEST_TRILLIAN_TREE_ID"
	TrillianBinEnv    = "LETHE_TEST_TRILLIAN_BIN_DIR"
	TrillianSchemaEnv = "LETHE_TEST_TRILLIAN_SCHEMA"
)

const trillianVersion = "v1.8.0"

// trillianHint says how to get a Trillian for the tests outside .ci/run.
const trillianHint = `export LETHE_CI_DIR=$(mktemp -d) LETHE_CI_ENV=$LETHE_CI_DIR/env; ` +
	`bash .ci/services/30-trillian.sh start && set -a && . $LETHE_CI_ENV && set +a ` +
	`(and "bash .ci/services/30-trillian.sh stop" afterwards)`

// Trillian returns the gRPC address of the shared Trillian log server
// (LETHE_TEST_TRILLIAN_ADDR) and the id of a new PREORDERED_LOG tree created
// on it for this test (deleted in tb.Cleanup). Without the variable the test
// is skipped (failed under CI=true); there is no container fallback.
func Trillian(tb testing.TB) (addr string, treeID int64) {
	tb.Helper()
	addr = os.Getenv(TrillianAddrEnv)
	if addr == "" {
		Unavailable(tb, "testenv: Trillian: "+TrillianAddrEnv+" is not set; hint: "+trillianHint)
	}
	return addr, NewTrillianTree(tb, addr)
}

// Dial returns a gRPC client connection to addr, closed in tb.Cleanup. It
// reconnects quickly (at most 1 s apart) after the server comes back; opts
// add to or override that.
func Dial(tb testing.TB, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	tb.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(fastReconnect),
	}, opts...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		tb.Fatalf("testenv: dial %s: %v", addr, err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// fastReconnect keeps gRPC's reconnection backoff short, so a client finds a
// restarted server within about a second.
var fastReconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 2 * time.Second,
}

// NewTrillianTree creates and initialises a PREORDERED_LOG tree with
// max_root_duration 0 through the admin API at addr, and deletes it in
// tb.Cleanup so the signer stops visiting it.
func NewTrillianTree(tb testing.TB, addr string) int64 {
	tb.Helper()
	conn := Dial(tb, addr)
	admin := trillian.NewTrillianAdminClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tree, err := admin.CreateTree(ctx, &trillian.CreateTreeRequest{Tree: &trillian.Tree{
		TreeState:       trillian.TreeState_ACTIVE,
		TreeType:        trillian.TreeType_PREORDERED_LOG,
		DisplayName:     "lethe-test",
		Description:     strings.ReplaceAll(tb.Name(), "/", " ")[:min(len(tb.Name()), 200)],
		MaxRootDuration: durationpb.New(0),
	}})
	if err != nil {
		tb.Fatalf("testenv: create trillian tree on %s: %v", addr, err)
	}
	log := trillian.NewTrillianLogClient(conn)
	for attempt := 0; ; attempt++ {
		_, err = log.InitLog(ctx, &trillian.InitLogRequest{LogId: tree.TreeId})
		if err == nil {
			break
		}
		if attempt == 20 {
			tb.Fatalf("testenv: init trillian tree %d: %v", tree.TreeId, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Best effort: the server may have been stopped by the test.
		_, _ = admin.DeleteTree(ctx, &trillian.DeleteTreeRequest{TreeId: tree.TreeId})
	})
	return tree.TreeId
}

// TrillianStack is a private Trillian (one log server, one log signer) on
// its own fresh PostgreSQL database, for tests that stop and restart its
// processes. The server keeps its gRPC address across restarts.
type TrillianStack struct {
	tb     testing.TB
	binDir string
	pgURI  string
	dir    string

	rpcAddr, httpAddr             string // log server
	signerRPCAddr, signerHTTPAddr string

	mu             sync.Mutex
	server, signer *exec.Cmd
}

// StartTrillian starts a private Trillian stack and stops it in tb.Cleanup.
// It needs the binaries (LETHE_TEST_TRILLIAN_BIN_DIR, else the CI cache
// directory) and PostgreSQL (see Postgres); without them the test is
// skipped (failed under CI=true).
func StartTrillian(tb testing.TB) *TrillianStack {
	tb.Helper()
	binDir := os.Getenv(TrillianBinEnv)
	if binDir == "" {
		if cache, err := os.UserCacheDir(); err == nil {
			binDir = filepath.Join(cache, "lethe-ci", "bin")
		}
	}
	for _, b := range []string{"trillian_log_server", "trillian_log_signer"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			Unavailable(tb, fmt.Sprintf("testenv: Trillian: %s not found in %q (%s unset); hint: %s", b, binDir, TrillianBinEnv, trillianHint))
		}
	}
	schema, err := trillianSchema()
	if err != nil {
		Unavailable(tb, fmt.Sprintf("testenv: Trillian schema: %v (%s unset); hint: %s", err, TrillianSchemaEnv, trillianHint))
	}
	dsn := Postgres(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminExec(ctx, dsn, string(schema)); err != nil {
		tb.Fatalf("testenv: load trillian schema: %v", err)
	}
	s := &TrillianStack{
		tb:     tb,
		binDir: binDir,
		pgURI:  dsn,
		dir:    tb.TempDir(),
	}
	addrs := freeAddrs(tb, 4)
	s.rpcAddr, s.httpAddr, s.signerRPCAddr, s.signerHTTPAddr = addrs[0], addrs[1], addrs[2], addrs[3]
	tb.Cleanup(func() {
		s.StopSigner()
		s.StopServer()
		if tb.Failed() {
			for _, name := range []string{"trillian_log_server", "trillian_log_signer"} {
				b, _ := os.ReadFile(filepath.Join(s.dir, name+".log"))
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				tb.Logf("%s.log (last lines):\n%s", name, strings.Join(lines[max(0, len(lines)-25):], "\n"))
			}
		}
	})
	s.StartServer()
	s.StartSigner()
	return s
}

// Addr returns the log server's gRPC address (log and admin API).
func (s *TrillianStack) Addr() string { return s.rpcAddr }

// NewTree creates a PREORDERED_LOG tree on the stack.
func (s *TrillianStack) NewTree(tb testing.TB) int64 {
	tb.Helper()
	return NewTrillianTree(tb, s.rpcAddr)
}

// StartServer starts the log server and waits until it is healthy.
func (s *TrillianStack) StartServer() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.server != nil {
		return
	}
	s.server = s.start("trillian_log_server", s.httpAddr,
		"--rpc_endpoint="+s.rpcAddr, "--http_endpoint="+s.httpAddr, "--tree_gc=false")
}

// StopServer kills the log server (SIGKILL: a crash, and no 10 s wait).
func (s *TrillianStack) StopServer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	kill(s.server)
	s.server = nil
}

// StartSigner starts the log signer (10 ms sequencer interval, master for
// every tree at once) and waits until it is healthy.
func (s *TrillianStack) StartSigner() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signer != nil {
		return
	}
	s.signer = s.start("trillian_log_signer", s.signerHTTPAddr,
		"--rpc_endpoint="+s.signerRPCAddr, "--http_endpoint="+s.signerHTTPAddr,
		"--election_system=noop", "--force_master", "--pre_election_pause=0s",
		"--sequencer_interval=10ms", "--batch_size=1000", "--num_sequencers=10",
		"--sequencer_guard_window=0s")
}

// StopSigner kills the log signer.
func (s *TrillianStack) StopSigner() {
	s.mu.Lock()
	defer s.mu.Unlock()
	kill(s.signer)
	s.signer = nil
}

func (s *TrillianStack) start(name, httpAddr string, args ...string) *exec.Cmd {
	s.tb.Helper()
	logf, err := os.OpenFile(filepath.Join(s.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.tb.Fatalf("testenv: %v", err)
	}
	defer logf.Close()
	args = append([]string{
		"--storage_system=postgresql", "--quota_system=postgresql", "--postgresql_uri=" + s.pgURI,
		"--etcd_servers=", "--logtostderr",
	}, args...)
	cmd := exec.Command(filepath.Join(s.binDir, name), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("testenv: start %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(s.dir, name+".log"))
			s.tb.Fatalf("testenv: %s exited at start:\n%s", name, lastLines(b, 20))
		default:
		}
		if healthy(httpAddr) {
			break
		}
		if time.Now().After(deadline) {
			kill(cmd)
			s.tb.Fatalf("testenv: %s not healthy on %s after 30s", name, httpAddr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	processes.Store(cmd, exited)
	return cmd
}

// processes maps each started *exec.Cmd to the channel closed when it exits.
var processes sync.Map

func kill(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	if ch, ok := processes.LoadAndDelete(cmd); ok {
		<-ch.(chan struct{})
	}
}

func healthy(httpAddr string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + httpAddr + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freeAddr returns a loopback address with a port nobody listens on now.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	return freeAddrs(tb, 1)[0]
}

// freeAddrs returns n loopback addresses with distinct ports nobody
// listens on now. Each port's listener stays open until all are chosen:
// closed at once, the kernel could hand the same port out twice (the
// Trillian signer once got the log server's HTTP port and exited at
// start).
func freeAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	out := make([]string, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("testenv: %v", err)
		}
		defer l.Close()
		out[i] = "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	return out
}

// trillianSchema reads Trillian's PostgreSQL schema from
// LETHE_TEST_TRILLIAN_SCHEMA or from the module cache.
func trillianSchema() ([]byte, error) {
	path := os.Getenv(TrillianSchemaEnv)
	if path == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			return nil, fmt.Errorf("go env GOMODCACHE: %w", err)
		}
		path = filepath.Join(strings.TrimSpace(string(out)), "github.com", "google",
			"trillian@"+trillianVersion, "storage", "postgresql", "schema", "storage.sql")
	}
	return os.ReadFile(path)
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return string(bytes.Join(lines[max(0, len(lines)-n):], []byte("\n")))
}
