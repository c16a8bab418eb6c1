// Command vaultdev runs an in-memory HashiCorp Vault with the transit secrets
// engine, for lethe's tests and CI only. It is the same server code as
// `vault server -dev` (github.com/hashicorp/vault used as a library), trimmed
// to what lethe needs: inmem storage, a 1-of-1 Shamir seal, the token auth
// method and transit. Nothing it holds survives the process.
//
// # Usage
//
//	vaultdev -addr 127.0.0.1:0 -token-file /tmp/x/root-token [-addr-file /tmp/x/addr] [-transit-keys lethe-kek]
//
// It listens on a loopback address only (no TLS), mounts transit at
// "transit/", creates the named transit keys, writes the root token to
// -token-file (mode 0600), the address to -addr-file, and then prints one line
//
//	vaultdev: ready addr=http://127.0.0.1:PORT token-file=PATH
//
// # Signals
//
// SIGINT and SIGTERM stop it, and so does the end of stdin with
// -exit-on-stdin-eof (a test that started it died without stopping it). SIGUSR1 seals the Vault (requests then get 503
// "Vault is sealed"), SIGUSR2 unseals it again: tests use them for the
// "Vault sealed" failure mode.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/vault/builtin/logical/transit"
	vaulthttp "github.com/hashicorp/vault/http"
	"github.com/hashicorp/vault/internalshared/configutil"
	"github.com/hashicorp/vault/sdk/helper/consts"
	"github.com/hashicorp/vault/sdk/logical"
	"github.com/hashicorp/vault/sdk/physical/inmem"
	"github.com/hashicorp/vault/vault"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "vaultdev: %v\n", err)
		os.Exit(1)
	}
}

type config struct {
	addr        string
	tokenFile   string
	addrFile    string
	transitKeys []string
	logLevel    string
	watchStdin  bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var keys string
	fs := flag.NewFlagSet("vaultdev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: vaultdev -token-file PATH [-addr 127.0.0.1:0] [-addr-file PATH] [-transit-keys a,b]
                [-log-level error] [-exit-on-stdin-eof]

An in-memory Vault dev server with transit mounted at transit/, for tests.
SIGUSR1 seals it, SIGUSR2 unseals it, SIGINT/SIGTERM stop it.
`)
	}
	fs.StringVar(&c.addr, "addr", "127.0.0.1:0", "loopback `host:port` to listen on (port 0 picks a free one)")
	fs.StringVar(&c.tokenFile, "token-file", "", "write the root token to this `file` (mode 0600)")
	fs.StringVar(&c.addrFile, "addr-file", "", "once ready, write the address (http://host:port) to this `file`")
	fs.StringVar(&keys, "transit-keys", "", "comma-separated transit `keys` to create at start")
	fs.StringVar(&c.logLevel, "log-level", "error", "Vault's log `level` (trace, debug, info, warn, error)")
	fs.BoolVar(&c.watchStdin, "exit-on-stdin-eof", false, "exit when stdin closes (a test process that started it died)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if c.tokenFile == "" {
		return c, errors.New("-token-file is required")
	}
	for k := range strings.SplitSeq(keys, ",") {
		if k = strings.TrimSpace(k); k != "" {
			c.transitKeys = append(c.transitKeys, k)
		}
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.watchStdin {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			cancel()
		}()
	}

	if host, _, err := net.SplitHostPort(cfg.addr); err != nil {
		return fmt.Errorf("-addr: %w", err)
	} else if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-addr %s: not a loopback address (no TLS, root token)", cfg.addr)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		return fmt.Errorf("refusing to listen on %s: not a loopback address (no TLS, root token)", ln.Addr())
	}
	addr := "http://" + ln.Addr().String()

	logger := hclog.New(&hclog.LoggerOptions{Name: "vaultdev", Level: hclog.LevelFromString(cfg.logLevel), Output: stderr})
	phys, err := inmem.NewInmem(nil, logger)
	if err != nil {
		return fmt.Errorf("inmem storage: %w", err)
	}
	core, err := vault.NewCore(&vault.CoreConfig{
		Physical:        phys,
		StorageType:     "inmem",
		LogicalBackends: map[string]logical.Factory{"transit": transit.Factory},
		BuiltinRegistry: registry{},
		DisableMlock:    true,
		Logger:          logger,
		LogLevel:        cfg.logLevel,
	})
	if err != nil {
		return fmt.Errorf("new core: %w", err)
	}
	defer core.Shutdown()

	initCtx := context.Background()
	res, err := core.Initialize(initCtx, &vault.InitParams{
		BarrierConfig: &vault.SealConfig{Type: "shamir", SecretShares: 1, SecretThreshold: 1},
	})
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	unsealKey := res.SecretShares[0]
	if err := unseal(core, unsealKey); err != nil {
		return err
	}

	srv := &http.Server{
		Handler:           vaulthttp.Handler.Handler(&vault.HandlerProperties{Core: core, ListenerConfig: &configutil.Listener{}}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	defer srv.Close()

	if err := setup(ctx, addr, res.RootToken, cfg.transitKeys); err != nil {
		return err
	}
	if err := writeFile(cfg.tokenFile, res.RootToken+"\n"); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	if cfg.addrFile != "" {
		if err := writeFile(cfg.addrFile, addr+"\n"); err != nil {
			return fmt.Errorf("write addr file: %w", err)
		}
	}
	fmt.Fprintf(stdout, "vaultdev: ready addr=%s token-file=%s\n", addr, cfg.tokenFile)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-serveErr:
			return fmt.Errorf("serve: %w", err)
		case s := <-sigs:
			switch s {
			case syscall.SIGUSR1:
				err = do(ctx, addr, res.RootToken, http.MethodPut, "/v1/sys/seal", nil)
				if err == nil {
					fmt.Fprintln(stdout, "vaultdev: sealed")
				}
			case syscall.SIGUSR2:
				err = unseal(core, unsealKey)
				if err == nil {
					fmt.Fprintln(stdout, "vaultdev: unsealed")
				}
			}
			if err != nil {
				fmt.Fprintf(stderr, "vaultdev: %v\n", err)
			}
		}
	}
}

func unseal(core *vault.Core, key []byte) error {
	if !core.Sealed() {
		return nil
	}
	ok, err := core.Unseal(append([]byte(nil), key...)) // Unseal may keep or zero the slice
	if err != nil {
		return fmt.Errorf("unseal: %w", err)
	}
	if !ok {
		return errors.New("unseal: still sealed after the only key share")
	}
	return nil
}

// setup mounts transit and creates the keys through the HTTP API, as a
// client would, so the server is known to answer before "ready" is printed.
func setup(ctx context.Context, addr, token string, keys []string) error {
	// The core becomes active asynchronously after unseal; retry briefly.
	var err error
	for range 100 {
		err = do(ctx, addr, token, http.MethodPost, "/v1/sys/mounts/transit", strings.NewReader(`{"type":"transit"}`))
		if err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("mount transit: %w", err)
	}
	for _, k := range keys {
		if err := do(ctx, addr, token, http.MethodPost, "/v1/transit/keys/"+k, strings.NewReader(`{}`)); err != nil {
			return fmt.Errorf("create transit key %s: %w", k, err)
		}
	}
	return nil
}

func do(ctx context.Context, addr, token, method, path string, body io.Reader) error {
	req, err := http.NewRequestWithContext(ctx, method, addr+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("X-Vault-Token", token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// writeFile writes content to path with mode 0600, atomically: a reader
// polling for the file never sees it half-written.
func writeFile(path, content string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".vaultdev-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// registry is the plugin catalog's view of built-in plugins: transit only.
// Mounting consults it even for backends given in LogicalBackends, and a nil
// registry panics.
type registry struct{}

func (registry) Contains(name string, t consts.PluginType) bool {
	return t == consts.PluginTypeSecrets && name == "transit"
}

func (registry) Get(name string, t consts.PluginType) (func() (any, error), bool) {
	if t == consts.PluginTypeSecrets && name == "transit" {
		return func() (any, error) { return logical.Factory(transit.Factory), nil }, true
	}
	return nil, false
}

func (registry) Keys(t consts.PluginType) []string {
	if t == consts.PluginTypeSecrets {
		return []string{"transit"}
	}
	return nil
}

func (registry) DeprecationStatus(name string, t consts.PluginType) (consts.DeprecationStatus, bool) {
	if t == consts.PluginTypeSecrets && name == "transit" {
		return consts.Supported, true
	}
	return consts.Unknown, false
}

func (registry) IsBuiltinEntPlugin(string, consts.PluginType) bool { return false }
