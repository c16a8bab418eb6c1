package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
)

const serveUsage = `Usage: lethe serve [--addr HOST:PORT] [--config FILE] [flags]

Serve the HTTP API (see docs/api.md). With no configuration it keeps
everything in --data (default ./lethe-data): SQLite, the local KEK, the
audit log and its signing key. Logs are JSON on stderr.

Flags:
  --addr HOST:PORT         listen address (default 127.0.0.1:8080; port 0 picks one)
  --config FILE            a YAML (or JSON) configuration file; flags and
                           environment variables override it
  --admin-token-file FILE  the bootstrap admin token's secret (or $LETHE_ADMIN_TOKEN)
  --addr-file FILE         write the bound address to FILE once listening
  --policy FILE            a forgetting policy file (default: the built-in policies/default.yaml)
  --schedule               run the policy's scheduled policies in this server
  --data DIR, --postgres DSN   as for every command

With neither $LETHE_ADMIN_TOKEN nor --admin-token-file, an admin token is
generated into DATA/admin.token (mode 0600) on first start; its path is
logged, never its value.
`

// duration is a time.Duration read from "30s"-style strings.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (e.g. 30s)", n.Line, s)
	}
	*d = duration(v)
	return nil
}

// serveConfig is lethe serve's configuration. Precedence: defaults, then
// the --config file, then the environment, then flags.
type serveConfig struct {
	Addr           string `yaml:"addr"`
	Data           string `yaml:"data"`
	Postgres       string `yaml:"postgres"`
	AdminTokenFile string `yaml:"admin_token_file"`
	LogLevel       string `yaml:"log_level"`
	// PolicyFile is a forgetting policy (default: policies/default.yaml's
	// built-in copy); Schedule runs its scheduled policies in this server.
	PolicyFile string `yaml:"policy_file"`
	Schedule   bool   `yaml:"schedule"`

	MaxBodyBytes      int64    `yaml:"max_body_bytes"`
	MaxBatchBodyBytes int64    `yaml:"max_batch_body_bytes"`
	RequestTimeout    duration `yaml:"request_timeout"`
	ReadTimeout       duration `yaml:"read_timeout"`
	WriteTimeout      duration `yaml:"write_timeout"`
	IdleTimeout       duration `yaml:"idle_timeout"`
	ShutdownTimeout   duration `yaml:"shutdown_timeout"`
	// TokenCacheTTL is how long a live token is trusted without reading
	// it again (0: read it on every request); see auth.Config.CacheTTL.
	TokenCacheTTL duration `yaml:"token_cache_ttl"`

	MCP mcpServeConfig `yaml:"mcp"` // the MCP transport at /mcp (mcp.go)

	// Hooks configures webhook delivery (see lethe.HooksConfig). The
	// server delivers unless NoDelivery; AllowPrivate (or
	// LETHE_HOOKS_ALLOW_PRIVATE=1) lets hooks reach internal addresses.
	Hooks struct {
		NoDelivery   bool     `yaml:"no_delivery"`
		AllowPrivate bool     `yaml:"allow_private"`
		Timeout      duration `yaml:"timeout"`
		MaxAge       duration `yaml:"max_age"`
		MaxAttempts  int      `yaml:"max_attempts"`
		// PauseAfter consecutive failed attempts pause a hook for Pause,
		// doubling up to MaxPause (see lethe.HooksConfig).
		PauseAfter int      `yaml:"pause_after"`
		Pause      duration `yaml:"pause"`
		MaxPause   duration `yaml:"max_pause"`
		// Workers, PerHook and PerMemory bound the attempts under way at
		// once (see lethe.HooksConfig).
		Workers   int `yaml:"workers"`
		PerHook   int `yaml:"per_hook"`
		PerMemory int `yaml:"per_memory"`
	} `yaml:"hooks"`

	Audit struct {
		KeyFile        string   `yaml:"key_file"`
		Origin         string   `yaml:"origin"`
		TrillianAddr   string   `yaml:"trillian_addr"`
		TrillianTreeID int64    `yaml:"trillian_tree_id"`
		ProofWait      duration `yaml:"proof_wait"`
		// PublicLog serves the log's tlog-tiles routes (/api/audit/log/)
		// without a token; by default they need the auditor role.
		PublicLog bool `yaml:"public_log"`
		// Witnesses cosign each checkpoint; WitnessThreshold of them must
		// before proofs against it are given (see lethe.Config).
		Witnesses []struct {
			URL     string   `yaml:"url"`
			Key     string   `yaml:"key"`
			Timeout duration `yaml:"timeout"`
		} `yaml:"witnesses"`
		WitnessThreshold int `yaml:"witness_threshold"`
	} `yaml:"audit"`
}

func defaultServeConfig() serveConfig {
	return serveConfig{
		Addr: "127.0.0.1:8080", Data: "lethe-data", LogLevel: "info",
		MaxBodyBytes: api.DefaultMaxBody, MaxBatchBodyBytes: api.DefaultMaxBatchBody,
		RequestTimeout: duration(api.DefaultRequestTimeout), ReadTimeout: duration(time.Minute),
		WriteTimeout: duration(time.Minute + api.DefaultRequestTimeout), IdleTimeout: duration(2 * time.Minute),
		ShutdownTimeout: duration(30 * time.Second), TokenCacheTTL: duration(auth.DefaultCacheTTL),
	}
}

// loadServeConfig reads a config file over cfg. Unknown keys are errors.
func loadServeConfig(path string, cfg *serveConfig) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

func cmdServe(ctx context.Context, e *env, args []string) error {
	fs := e.flags("serve")
	addr := fs.String("addr", "", "")
	config := fs.String("config", "", "")
	adminFile := fs.String("admin-token-file", "", "")
	addrFile := fs.String("addr-file", "", "")
	policy := fs.String("policy", "", "")
	schedule := fs.Bool("schedule", false, "")
	help := fs.Bool("help", false, "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *help {
		fmt.Fprint(e.stdout, serveUsage)
		return nil
	}
	if len(pos) > 0 {
		return usagef("serve: unexpected argument %q", pos[0])
	}
	if e.server != "" {
		return errRemote("serve")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	cfg := defaultServeConfig()
	if *config != "" {
		if err := loadServeConfig(*config, &cfg); err != nil {
			return err
		}
	}
	// The environment over the file, flags over both.
	for _, v := range []struct {
		flag, env string
		dst       *string
		val       string
	}{
		{"data", "LETHE_DATA", &cfg.Data, e.data},
		{"postgres", "LETHE_POSTGRES_DSN", &cfg.Postgres, e.postgres},
		{"addr", "LETHE_ADDR", &cfg.Addr, *addr},
		{"admin-token-file", "", &cfg.AdminTokenFile, *adminFile},
		{"policy", "", &cfg.PolicyFile, *policy},
	} {
		if set[v.flag] {
			*v.dst = v.val
		} else if env := os.Getenv(v.env); v.env != "" && env != "" {
			*v.dst = env
		}
	}

	if set["schedule"] {
		cfg.Schedule = *schedule
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return usagef("serve: log_level: want debug, info, warn or error")
	}
	logger := slog.New(slog.NewJSONHandler(e.stderr, &slog.HandlerOptions{Level: level}))
	return serve(ctx, cfg, *addrFile, logger)
}

// serve runs the server until ctx ends, then shuts it down gracefully:
// stop accepting, finish in-flight requests (bounded), close the store
// (which drains the audit outbox).
func serve(ctx context.Context, cfg serveConfig, addrFile string, logger *slog.Logger) error {
	// Listen first: a busy port fails before anything is opened or written
	// (no store, no generated admin token).
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return &lethe.Error{Code: lethe.CodeUnavailable, Message: "cannot listen on " + cfg.Addr, Err: err,
			Hint: "another process may hold the port: pick another with --addr HOST:PORT (port 0 picks a free one)"}
	}
	defer ln.Close()
	lcfg := lethe.Config{
		DataDir: cfg.Data, PostgresDSN: cfg.Postgres, Logger: logger,
		AuditKeyFile: cfg.Audit.KeyFile, AuditOrigin: cfg.Audit.Origin,
		TrillianAddr: cfg.Audit.TrillianAddr, TrillianTreeID: cfg.Audit.TrillianTreeID,
		ProofWait: time.Duration(cfg.Audit.ProofWait), WitnessThreshold: cfg.Audit.WitnessThreshold,
	}
	for _, w := range cfg.Audit.Witnesses {
		lcfg.Witnesses = append(lcfg.Witnesses, lethe.WitnessConfig{URL: w.URL, Key: w.Key, Timeout: time.Duration(w.Timeout)})
	}
	lcfg.Schedule = cfg.Schedule
	lcfg.Hooks = lethe.HooksConfig{Deliver: !cfg.Hooks.NoDelivery, AllowPrivate: cfg.Hooks.AllowPrivate,
		Timeout: time.Duration(cfg.Hooks.Timeout), MaxAge: time.Duration(cfg.Hooks.MaxAge), MaxAttempts: cfg.Hooks.MaxAttempts,
		PauseAfter: cfg.Hooks.PauseAfter, Pause: time.Duration(cfg.Hooks.Pause), MaxPause: time.Duration(cfg.Hooks.MaxPause),
		Workers: cfg.Hooks.Workers, PerHook: cfg.Hooks.PerHook, PerMemory: cfg.Hooks.PerMemory}
	for _, n := range []struct {
		name string
		v    int
	}{{"hooks.max_attempts", cfg.Hooks.MaxAttempts}, {"hooks.pause_after", cfg.Hooks.PauseAfter}, {"hooks.workers", cfg.Hooks.Workers},
		{"hooks.per_hook", cfg.Hooks.PerHook}, {"hooks.per_memory", cfg.Hooks.PerMemory}} {
		if n.v < 0 {
			return fmt.Errorf("config: %s must be at least 1 (left out or 0: the default)", n.name)
		}
	}
	if cfg.PolicyFile != "" {
		p, err := lethe.LoadPolicy(cfg.PolicyFile)
		if err != nil {
			return err
		}
		lcfg.Policy = p
	}
	// Vault and Trillian from the environment, as for every command.
	if err := storeEnv(&lcfg); err != nil {
		return err
	}
	db, err := lethe.Open(ctx, lcfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			logger.Error("close store", slog.Any("error", err))
		}
	}()
	tcfg := auth.Config{PostgresDSN: cfg.Postgres, CacheTTL: time.Duration(cfg.TokenCacheTTL)}
	if tcfg.CacheTTL <= 0 {
		tcfg.CacheTTL = -1 // 0 in the file: no cache
	}
	if cfg.Postgres == "" {
		tcfg.SQLitePath = filepath.Join(cfg.Data, "lethe.db")
	}
	tokens, err := auth.Open(ctx, tcfg)
	if err != nil {
		return err
	}
	defer tokens.Close()
	if err := bootstrapAdmin(ctx, tokens, cfg, logger); err != nil {
		return err
	}

	handler, err := withMCP(api.Config{Library: db, Tokens: tokens, Logger: logger,
		MaxBody: cfg.MaxBodyBytes, MaxBatchBody: cfg.MaxBatchBodyBytes,
		RequestTimeout: time.Duration(cfg.RequestTimeout), PublicLog: cfg.Audit.PublicLog}, cfg.MCP)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Duration(cfg.ReadTimeout),
		WriteTimeout:      time.Duration(cfg.WriteTimeout),
		IdleTimeout:       time.Duration(cfg.IdleTimeout),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(slogWriter{logger}, "", 0),
	}
	bound := ln.Addr().String()
	logger.Info("listening", slog.String("addr", bound), slog.Bool("postgres", cfg.Postgres != ""))
	if lcfg.Hooks.AllowPrivate {
		logger.Warn("hooks may reach loopback, private and other internal addresses (hooks.allow_private or LETHE_HOOKS_ALLOW_PRIVATE): for development only")
	}
	if addrFile != "" {
		if err := writeFileAtomic(addrFile, []byte(bound+"\n"), 0o644); err != nil {
			ln.Close()
			return err
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down", slog.Duration("timeout", time.Duration(cfg.ShutdownTimeout)))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(cfg.ShutdownTimeout))
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("in-flight requests cut short", slog.Any("error", err))
		srv.Close()
	}
	logger.Info("stopped")
	return nil
}

// bootstrapAdmin makes sure an admin token exists: $LETHE_ADMIN_TOKEN, the
// admin token file, or one generated into DATA/admin.token (mode 0600).
func bootstrapAdmin(ctx context.Context, tokens *auth.Store, cfg serveConfig, logger *slog.Logger) error {
	secret, source := "", ""
	switch {
	case cfg.AdminTokenFile != "":
		b, err := os.ReadFile(cfg.AdminTokenFile)
		if err != nil {
			return fmt.Errorf("admin token file: %w", err)
		}
		secret, source = strings.TrimSpace(string(b)), "file"
	case os.Getenv("LETHE_ADMIN_TOKEN") != "":
		secret, source = strings.TrimSpace(os.Getenv("LETHE_ADMIN_TOKEN")), "environment"
	default:
		path := filepath.Join(cfg.Data, "admin.token")
		b, err := os.ReadFile(path)
		switch {
		case err == nil:
			secret, source = strings.TrimSpace(string(b)), "file"
		case errors.Is(err, os.ErrNotExist):
			secret, source = auth.NewSecret(), "generated"
			if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
				return err
			}
			if err := writeFileAtomic(path, []byte(secret+"\n"), 0o600); err != nil {
				return fmt.Errorf("write admin token: %w", err)
			}
			logger.Info("generated the admin token", slog.String("path", path))
		default:
			return fmt.Errorf("admin token file: %w", err)
		}
	}
	t, err := tokens.Bootstrap(ctx, secret)
	if err != nil {
		return err
	}
	if t.RevokedAt != nil {
		// Revoked through the API: it stays revoked until its secret changes.
		logger.Warn("the bootstrap admin token is revoked; give it a new secret to use it again",
			slog.String("token", t.ID), slog.String("source", source), slog.Time("revoked_at", *t.RevokedAt))
		return nil
	}
	logger.Info("admin token ready", slog.String("token", t.ID), slog.String("source", source))
	return nil
}

// writeFileAtomic writes b to path through a temporary file and a rename,
// so a reader never sees a partial file.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// slogWriter sends net/http's own error lines (TLS, accept errors) to the
// structured log, as a constant message with the line, its client address
// removed, as an attribute.
type slogWriter struct{ l *slog.Logger }

var clientAddr = regexp.MustCompile(`from \S+?: `)

func (w slogWriter) Write(p []byte) (int, error) {
	line := clientAddr.ReplaceAllString(strings.TrimSpace(string(p)), "from <client>: ")
	w.l.Warn("http server", slog.String("detail", line))
	return len(p), nil
}
