// Package testenv gives tests the real services they run against. It is
// imported by _test.go files only.
//
// # Rules
//
// Each helper takes a service from the environment CI sets up (.ci/run,
// .ci/services), else starts one of its own, else skips the test; with
// CI=true it fails instead of skipping, so a CI run never passes by testing
// nothing.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/testcontainers/testcontainers-go"
	tcvault "github.com/testcontainers/testcontainers-go/modules/vault"
)

// Environment variables that point tests at a Vault; .ci/services/20-vault.sh
// sets all three.
const (
	EnvVaultAddr      = "LETHE_TEST_VAULT_ADDR"       // http://127.0.0.1:PORT
	EnvVaultTokenFile = "LETHE_TEST_VAULT_TOKEN_FILE" // file holding a root token
	EnvVaultDevBin    = "LETHE_TEST_VAULT_DEV_BIN"    // path of a built tools/vaultdev
)

// VaultImage is the image used when a Docker engine is the only way to get a
// Vault.
const VaultImage = "hashicorp/vault:1.21"

// Unavailable skips tb with reason, or fails it when CI=true.
func Unavailable(tb testing.TB, reason string) {
	tb.Helper()
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		tb.Fatalf("%s (CI=true: a missing service is a failure, not a skip)", reason)
	}
	tb.Skip(reason)
}

// Vault returns the address of a real Vault with transit mounted at
// "transit/" and a transit key "lethe-kek", and a root token for it:
//
//  1. LETHE_TEST_VAULT_ADDR and LETHE_TEST_VAULT_TOKEN_FILE, if set: a Vault
//     shared with other tests and packages, so tests create keys of their
//     own (random names) for anything that changes a key;
//  2. else a vaultdev of tb's own from LETHE_TEST_VAULT_DEV_BIN, stopped when
//     tb ends;
//  3. else a Vault container (testcontainers-go) if a Docker engine answers;
//  4. else tb is skipped, or failed when CI=true.
func Vault(tb testing.TB) (addr, token string) {
	tb.Helper()
	if addr, file := os.Getenv(EnvVaultAddr), os.Getenv(EnvVaultTokenFile); addr != "" || file != "" {
		if addr == "" || file == "" {
			tb.Fatalf("testenv: set both %s and %s, or neither", EnvVaultAddr, EnvVaultTokenFile)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			tb.Fatalf("testenv: read Vault token: %v", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			tb.Fatalf("testenv: %s is empty", file)
		}
		return addr, token
	}
	if os.Getenv(EnvVaultDevBin) != "" {
		s := VaultDev(tb)
		return s.Addr, s.Token
	}
	if err := dockerHealthy(); err != nil {
		Unavailable(tb, "no Vault for this test: set "+EnvVaultAddr+" and "+EnvVaultTokenFile+
			", or "+EnvVaultDevBin+" (cd tools/vaultdev && go build), or run a Docker engine ("+err.Error()+")")
		return "", ""
	}
	return vaultContainer(tb)
}

func dockerHealthy() error {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Health(ctx) // closes p
}

func vaultContainer(tb testing.TB) (addr, token string) {
	tb.Helper()
	ctx := context.Background()
	token = "root-" + randomHex(16)
	c, err := tcvault.Run(ctx, VaultImage,
		tcvault.WithToken(token),
		tcvault.WithInitCommand("secrets enable transit", "write -f transit/keys/lethe-kek"))
	testcontainers.CleanupContainer(tb, c)
	if err != nil {
		tb.Fatalf("testenv: start Vault container: %v", err)
	}
	addr, err = c.HttpHostAddress(ctx)
	if err != nil {
		tb.Fatalf("testenv: Vault container address: %v", err)
	}
	return addr, token
}

// VaultDevServer is a vaultdev process of one test's own: in memory, with
// transit mounted and the key "lethe-kek". Tests stop, seal and unseal it to
// see how lethe fails.
type VaultDevServer struct {
	Addr  string // http://127.0.0.1:PORT
	Token string // root token

	cmd   *exec.Cmd
	stdin io.Closer
	out   *Logs
	done  chan struct{}
	once  sync.Once
}

// VaultDev starts a vaultdev from LETHE_TEST_VAULT_DEV_BIN for tb, stopped
// when tb ends. Without the variable tb is skipped, or failed when CI=true.
func VaultDev(tb testing.TB) *VaultDevServer {
	tb.Helper()
	bin := os.Getenv(EnvVaultDevBin)
	if bin == "" {
		Unavailable(tb, "no vaultdev binary: set "+EnvVaultDevBin+" (cd tools/vaultdev && go build -o /tmp/vaultdev .)")
		return nil
	}
	dir := tb.TempDir()
	tokenFile, addrFile := filepath.Join(dir, "token"), filepath.Join(dir, "addr")
	s := &VaultDevServer{out: &Logs{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "-addr", "127.0.0.1:0", "-token-file", tokenFile, "-addr-file", addrFile,
		"-transit-keys", "lethe-kek", "-exit-on-stdin-eof")
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	stdin, err := s.cmd.StdinPipe() // closes when this process dies: vaultdev then exits
	if err != nil {
		tb.Fatalf("testenv: vaultdev: %v", err)
	}
	s.stdin = stdin
	if err := s.cmd.Start(); err != nil {
		tb.Fatalf("testenv: start vaultdev: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	tb.Cleanup(s.Stop)

	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(addrFile)
		if err == nil {
			s.Addr = strings.TrimSpace(string(b))
			break
		}
		select {
		case <-s.done:
			tb.Fatalf("testenv: vaultdev exited before it was ready:\n%s", s.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: vaultdev not ready after 60s:\n%s", s.out.String())
		}
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		tb.Fatalf("testenv: vaultdev token: %v", err)
	}
	s.Token = strings.TrimSpace(string(b))
	return s
}

// Stop kills the server and waits for it to exit. It may be called more
// than once.
func (s *VaultDevServer) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		_ = s.stdin.Close()
		<-s.done
	})
}

// Seal seals the server (SIGUSR1) and waits until it reports sealed.
func (s *VaultDevServer) Seal(tb testing.TB) {
	tb.Helper()
	s.signalAndWait(tb, syscall.SIGUSR1, true)
}

// Unseal unseals the server (SIGUSR2) and waits until it reports unsealed.
func (s *VaultDevServer) Unseal(tb testing.TB) {
	tb.Helper()
	s.signalAndWait(tb, syscall.SIGUSR2, false)
}

func (s *VaultDevServer) signalAndWait(tb testing.TB, sig syscall.Signal, sealed bool) {
	tb.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("testenv: signal vaultdev: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.sealed()
		if err == nil && got == sealed {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: vaultdev sealed=%v not reached (last: %v, %v):\n%s", sealed, got, err, s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *VaultDevServer) sealed() (bool, error) {
	resp, err := http.Get(s.Addr + "/v1/sys/seal-status")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var st struct {
		Sealed *bool `json:"sealed"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return false, err
	}
	if st.Sealed == nil {
		return false, errors.New("no seal status")
	}
	return *st.Sealed, nil
}

// Output returns what the server printed so far, for failure messages.
func (s *VaultDevServer) Output() string { return s.out.String() }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("testenv: crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}
