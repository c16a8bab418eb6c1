package testenv

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // database/sql driver "sqlite3"
)

// LitewitnessServer is a running litewitness (filippo.io/torchwood), a
// c2sp.org/tlog-witness witness, with its key in an ssh-agent of its own.
type LitewitnessServer struct {
	// URL is its submission prefix (add-checkpoint is below it).
	URL string
	// Key is its cosignature/v1 verifier key.
	Key string

	db   string
	args []string
	cmd  *exec.Cmd
	logs *Logs
}

// litewitnessSchema is litewitness v0.9.0's schema (internal/witness), so
// that logs can be registered before it starts: witnessctl, which does
// that, does not build with the Go this project uses.
const litewitnessSchema = `
CREATE TABLE IF NOT EXISTS log (origin TEXT PRIMARY KEY, tree_size INTEGER NOT NULL, tree_hash TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS key (origin TEXT NOT NULL, key TEXT NOT NULL, FOREIGN KEY(origin) REFERENCES log(origin));
CREATE TABLE IF NOT EXISTS bastion (origin TEXT NOT NULL, bastion TEXT NOT NULL, FOREIGN KEY(origin) REFERENCES log(origin));
`

// StartLitewitness starts a litewitness named name that witnesses the log
// with checkpoint origin whose note verifier key is logKey, and stops it in
// tb.Cleanup. It needs the litewitness binary (see Litewitness) and
// ssh-keygen, ssh-agent and ssh-add.
func StartLitewitness(tb testing.TB, name, origin, logKey string) *LitewitnessServer {
	tb.Helper()
	bin := Litewitness(tb)
	for _, tool := range []string{"ssh-keygen", "ssh-agent", "ssh-add"} {
		if _, err := exec.LookPath(tool); err != nil {
			Unavailable(tb, "testenv: litewitness needs "+tool+": "+err.Error())
		}
	}
	dir := tb.TempDir()
	// A socket path must be short (108 bytes): not under t.TempDir.
	sockDir, err := os.MkdirTemp("", "lw")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "agent")
	keyFile := filepath.Join(dir, "witness_key")
	run := func(name string, args ...string) string {
		tb.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		out, err := cmd.CombinedOutput()
		if err != nil {
			tb.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", keyFile)
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stop(agent) })
	waitFor(tb, func() bool { _, err := os.Stat(sock); return err == nil })
	run("ssh-add", "-q", keyFile)
	fp := strings.Fields(run("ssh-keygen", "-l", "-E", "sha256", "-f", keyFile+".pub"))
	if len(fp) < 2 {
		tb.Fatalf("ssh-keygen -l: %v", fp)
	}

	s := &LitewitnessServer{db: filepath.Join(dir, "litewitness.db")}
	s.exec(tb, litewitnessSchema)
	empty := sha256.Sum256(nil)
	s.exec(tb, "INSERT INTO log (origin, tree_size, tree_hash) VALUES (?, 0, ?)", origin, base64.StdEncoding.EncodeToString(empty[:]))
	s.exec(tb, "INSERT INTO key (origin, key) VALUES (?, ?)", origin, logKey)

	addr := freeAddr(tb)
	s.URL = "http://" + addr
	s.args = []string{bin, "-name", name, "-db", s.db, "-ssh-agent", sock, "-key", fp[1], "-listen", addr}
	s.start(tb)
	return s
}

var vkeyRE = regexp.MustCompile(`msg="verifier key" vkey=(\S+)`)

// start starts the witness process and waits until it answers.
func (s *LitewitnessServer) start(tb testing.TB) {
	tb.Helper()
	s.logs = &Logs{}
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	cmd := s.cmd
	tb.Cleanup(func() { stop(cmd) })
	waitFor(tb, func() bool {
		resp, err := http.Get(s.URL + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && vkeyRE.MatchString(s.logs.String())
	})
	s.Key = vkeyRE.FindStringSubmatch(s.logs.String())[1]
}

// Restart starts the witness again after Stop, on the same database, key
// and address, and returns it.
func (s *LitewitnessServer) Restart(tb testing.TB) *LitewitnessServer {
	tb.Helper()
	s.start(tb)
	return s
}

// exec runs one statement on the witness's database.
func (s *LitewitnessServer) exec(tb testing.TB, query string, args ...any) {
	tb.Helper()
	db, err := sql.Open("sqlite3", s.db+"?_busy_timeout=5000&_foreign_keys=on")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		tb.Fatalf("litewitness database: %v", err)
	}
}

// TreeSize returns the size of the log's latest checkpoint the witness
// cosigned, read from its database.
func (s *LitewitnessServer) TreeSize(tb testing.TB, origin string) int64 {
	tb.Helper()
	db, err := sql.Open("sqlite3", s.db+"?_busy_timeout=5000&mode=ro")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow("SELECT tree_size FROM log WHERE origin = ?", origin).Scan(&n); err != nil {
		tb.Fatalf("litewitness database: %v", err)
	}
	return n
}

// Stop stops the witness (SIGINT, as its service manager would).
func (s *LitewitnessServer) Stop() {
	if s.cmd.Process != nil && s.cmd.ProcessState == nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		s.cmd.Wait()
	}
}

// Logs returns what it wrote.
func (s *LitewitnessServer) Logs() string { return s.logs.String() }

func waitFor(tb testing.TB, ok func() bool) {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: litewitness did not start within 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills a process this file started and reaps it.
func stop(cmd *exec.Cmd) {
	if cmd.Process != nil && cmd.ProcessState == nil {
		cmd.Process.Kill()
		cmd.Wait()
	}
}
