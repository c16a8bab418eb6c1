package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	lethemcp "github.com/lethe-io/lethe/internal/mcp"
)

const mcpUsage = `Usage: lethe mcp [--lock-namespace NS] [--lock-scope PATH] [--allow-erase] [--allow-requests] [--policy FILE]

Serve the Model Context Protocol over stdin and stdout, for an AI agent's MCP
client: tools add, recall, supersede, history and forget (with dry_run), and
with --allow-erase forget_user and erase_scope, with --allow-requests the
erasure request workflow (erasure_request_create, _list, _show, _approve,
_reject, _execute; four eyes: the filer cannot approve); resources
lethe://MEMORY/grains/HASH and lethe://MEMORY/grains/HASH/history. It works on
the embedded store (--data), or with --server URL --token-file F through the
API, with that token's roles and scopes. 'lethe serve' offers the same
tools at /mcp (streamable HTTP).

Flags:
  --lock-namespace NS    confine every call to namespace NS (adds get it)
  --lock-scope PATH      confine every call to scope PATH and below (adds get it)
  --allow-erase          offer the crypto-erasure tools forget_user and erase_scope
  --allow-requests       offer the erasure request tools (erasure_request_*)
  --policy FILE          the embedded store's forgetting policy (default: the built-in one)
  --memory M             the session's memory (default "default")
  --data DIR, --postgres DSN, --server URL, --token-file F   as for every command
`

// mcpStore is what "lethe mcp" serves: the embedded store or a client.
type mcpStore interface {
	lethemcp.Library
	lethemcp.Eraser
	lethemcp.Requester
}

var (
	_ mcpStore = (*lethe.DB)(nil)
	_ mcpStore = (*client)(nil)
)

func cmdMCP(ctx context.Context, e *env, args []string) error {
	fs := e.flags("mcp")
	lockNS := fs.String("lock-namespace", "", "")
	lockScope := fs.String("lock-scope", "", "")
	allowErase := fs.Bool("allow-erase", false, "")
	allowRequests := fs.Bool("allow-requests", false, "")
	policyFile := fs.String("policy", "", "")
	help := fs.Bool("help", false, "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *help {
		fmt.Fprint(e.stdout, mcpUsage)
		return nil
	}
	if len(pos) > 0 {
		return usagef("mcp: unexpected argument %q", pos[0])
	}
	cfg := lethemcp.Config{Memory: e.memory, LockNamespace: *lockNS, LockScope: *lockScope, Version: version}
	var store mcpStore
	if e.server != "" {
		if *policyFile != "" {
			return usagef("mcp: --policy applies to the embedded store; a server runs the policy it was started with")
		}
		c, err := e.client()
		if err != nil {
			return err
		}
		store = c
	} else {
		lcfg := lethe.Config{DataDir: e.data, PostgresDSN: e.postgres}
		if *policyFile != "" {
			if lcfg.Policy, err = lethe.LoadPolicy(*policyFile); err != nil {
				return err
			}
		}
		if err := storeEnv(&lcfg); err != nil {
			return err
		}
		db, err := lethe.Open(ctx, lcfg)
		if err != nil {
			return err
		}
		e.db, store = db, db
	}
	cfg.Library = store
	if *allowErase {
		cfg.Eraser = store
	}
	if *allowRequests {
		cfg.Requester = store
	}
	s, err := lethemcp.New(cfg)
	if err != nil {
		return usagef("mcp: %v", err)
	}
	// A line that is not JSON-RPC gets a JSON-RPC error reply; the session
	// goes on (the SDK's IOTransport would end it).
	err = s.Run(ctx, lethemcp.StdioTransport(e.stdin, e.stdout))
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil // the client closed stdin, or a signal ended the session
	}
	return err
}

// mcpServeConfig is lethe serve's "mcp" section.
type mcpServeConfig struct {
	// Disable leaves /mcp unrouted.
	Disable bool `yaml:"disable"`
	// AllowErase offers forget_user and erase_scope at /mcp (the token
	// still needs the dpo role).
	AllowErase bool `yaml:"allow_erase"`
	// AllowRequests offers the erasure request tools at /mcp (the token
	// still needs the dpo role; four eyes as on the REST routes).
	AllowRequests bool `yaml:"allow_requests"`
}

// withMCP returns the API for cfg with the MCP streamable HTTP transport at
// /mcp. Every tool call is made through this same API, in process, with the
// bearer token of the HTTP request that carried it: the token's roles,
// memories and scopes apply to it exactly as to the REST routes, and a
// token revoked mid-session stops working at once, one that expires
// mid-session at its expiry.
func withMCP(cfg api.Config, mc mcpServeConfig) (*api.Server, error) {
	lb := &loopback{}
	if !mc.Disable {
		h, err := lethemcp.NewHandler(lethemcp.Config{
			Resolve: func(header http.Header) (lethemcp.Library, lethemcp.Eraser, error) {
				scheme, secret, _ := strings.Cut(header.Get("Authorization"), " ")
				secret = strings.TrimSpace(secret)
				if !strings.EqualFold(scheme, "Bearer") || secret == "" {
					// The API answered 401 before MCP saw the request; this
					// is another transport.
					return nil, nil, &lethe.Error{Code: api.CodeUnauthorized, Message: "a bearer token is required"}
				}
				c := &client{base: "http://lethe.loopback", token: secret, hc: &http.Client{Transport: lb}}
				return c, c, nil
			},
			AllowErase: mc.AllowErase, AllowRequests: mc.AllowRequests, Version: version, Logger: cfg.Logger,
		}, &lethemcp.HandlerOptions{MaxBody: cfg.MaxBody})
		if err != nil {
			return nil, err
		}
		cfg.MCP = h
	}
	s := api.New(cfg)
	lb.h = s
	return s, nil
}

// loopback is an http.RoundTripper that serves requests with a handler in
// process, without a socket.
type loopback struct{ h http.Handler }

func (l *loopback) RoundTrip(r *http.Request) (*http.Response, error) {
	w := &recorder{header: http.Header{}}
	l.h.ServeHTTP(w, r)
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: r,
	}, nil
}

// recorder is the http.ResponseWriter of a loopback request.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}
