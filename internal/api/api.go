// Package api is lethe's HTTP API: gin handlers over the root package's
// library, bearer-token authorization, JSON wire types, the one table from
// error codes to HTTP statuses, and the OpenAPI document.
//
// # Routes
//
// Grain routes live under /api/memories/{memory}/ (grains, recall, cal,
// grains/{hash}, grains/{hash}/history, supersede, forget, forget-user,
// scope-erase, erase, holds, purge/stale, archive, risk-sweep, and the
// webhooks under hooks); the audit
// log's key, checkpoints, entries and proofs under /api/audit/; token
// management under /api/tokens; /healthz, /readyz, /metrics and
// /openapi.json are unauthenticated. The document served at /openapi.json
// (openapi.json in this directory) lists every route; a test keeps the two
// equal. The one exception is /mcp, where [Config.MCP] (the Model Context
// Protocol's streamable HTTP transport) is mounted behind the same bearer
// tokens: it speaks JSON-RPC, not this REST API, and is not in the document.
//
// # Personal data
//
// Every answer is Cache-Control: no-store: most under /api and /mcp carry
// personal data (grains, recall pages, histories, exports) or secrets
// (tokens, hook secrets, subject nonces), and one rule for all leaves none
// out. The tlog-tiles checkpoint and tiles (/api/audit/log/) set their
// own, as c2sp.org/tlog-tiles asks: they hold no personal data.
//
// Queries travel in request bodies, never in URLs. The access log carries
// the method, the route pattern, the status, the latency, the token id and
// the memory name (only once the token is authenticated and may use it):
// never subjects, user ids, bodies or raw URLs. Error
// messages are the domain's, which never quote personal values; internal
// errors answer a fixed message and are logged.
package api

import (
	"context"
	_ "embed"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/auth"
)

// OpenAPI is the OpenAPI 3 document of this API, served at /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// Library is what the API needs of a lethe store; *lethe.DB has it.
type Library interface {
	Add(ctx context.Context, g lethe.Grain) (string, error)
	AddBatch(ctx context.Context, gs []lethe.Grain) ([]string, error)
	Get(ctx context.Context, memory, hash string) (*lethe.Grain, error)
	Recall(ctx context.Context, q lethe.Query) (*lethe.Page, error)
	Supersede(ctx context.Context, oldHash string, g lethe.Grain, set ...string) (string, error)
	History(ctx context.Context, memory, hash string) ([]lethe.Grain, error)
	Locate(ctx context.Context, memory string, hashes []string) (map[string]lethe.Grain, error)
	Forget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error)
	Auditor
	Eraser
	Forgetter
	Exporter
	TlogServer
	Hooker
	Requester
}

var _ Library = (*lethe.DB)(nil)

// Tokens is what the API needs of a token store; *auth.Store has it.
type Tokens interface {
	// Lookup must return auth.ErrUnknown for a secret that names no live
	// token.
	Lookup(ctx context.Context, secret string) (*auth.Token, error)
	Create(ctx context.Context, spec auth.Spec) (string, *auth.Token, error)
	List(ctx context.Context) ([]auth.Token, error)
	Revoke(ctx context.Context, id string) error
	Ping(ctx context.Context) error
}

var _ Tokens = (*auth.Store)(nil)

// Default limits.
const (
	DefaultMaxBody        = 1 << 20
	DefaultMaxBatchBody   = 16 << 20
	DefaultRequestTimeout = 30 * time.Second
)

// Config configures a Server.
type Config struct {
	Library Library
	Tokens  Tokens
	// Logger receives the access log and 5xx errors (default: none).
	Logger *slog.Logger
	// MaxBody bounds request bodies (default 1 MiB); MaxBatchBody bounds
	// the body of a batch add (default 16 MiB).
	MaxBody, MaxBatchBody int64
	// RequestTimeout bounds the work of one API request (default 30 s);
	// past it the answer is 504 deadline_exceeded.
	RequestTimeout time.Duration
	// Registry receives the HTTP metrics and is served at /metrics
	// (default: a new registry with the Go and process collectors).
	Registry *prometheus.Registry
	// MCP, when set, is served at /mcp (every method) after the bearer
	// token is checked as for /api: a request without a live token is
	// answered 401 and never reaches it. What a call may do is MCP's to
	// enforce, with the request's token.
	MCP http.Handler
	// PublicLog serves the audit log's tlog-tiles routes (/api/audit/log/)
	// without a token: every memory's leaves to anyone. Otherwise they need
	// the auditor role, and the entry bundles a token that reads every leaf
	// (see leafFilter).
	PublicLog bool
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	lib     Library
	tokens  Tokens
	log     *slog.Logger
	cfg     Config
	engine  *gin.Engine
	metrics *metrics
}

// New returns the API over cfg.Library and cfg.Tokens.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxBatchBody <= 0 {
		cfg.MaxBatchBody = DefaultMaxBatchBody
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Server{lib: cfg.Library, tokens: cfg.Tokens, log: cfg.Logger, cfg: cfg, metrics: newMetrics(cfg.Registry)}
	cfg.Registry.MustRegister(newHookCollector(cfg.Library))
	s.engine = s.routes()
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.engine.ServeHTTP(w, r) }

// Engine returns the gin engine, for tests that walk its routes.
func (s *Server) Engine() *gin.Engine { return s.engine }

func init() {
	// gin's debug mode prints every route to stdout at start.
	gin.SetMode(gin.ReleaseMode)
}

// routes builds the router. Every route here is in openapi.json, with the
// same methods, except /mcp (see Config.MCP).
func (s *Server) routes() *gin.Engine {
	e := gin.New()
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	e.Use(s.recover, s.observe, noStore)
	e.NoRoute(func(c *gin.Context) { s.fail(c, apiError(CodeRouteNotFound, "no such route", "see /openapi.json")) })
	e.NoMethod(func(c *gin.Context) {
		s.fail(c, apiError(CodeMethodNotAllowed, "method not allowed on this route", "see /openapi.json"))
	})

	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/metrics", gin.WrapH(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})))
	e.GET("/openapi.json", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", OpenAPI) })

	api := e.Group("/api", s.deadline, s.authenticate, s.singleQuery)
	m := api.Group("/memories/:memory", s.memory)
	m.POST("/grains", s.allow(auth.Writer), s.addGrains)
	m.POST("/supersede", s.allow(auth.Writer), handle(s, s.supersede))
	m.POST("/recall", s.allow(auth.Reader), handle(s, s.recall))
	// Each statement needs the role of its route; see calStatement.
	m.POST("/cal", s.calStatement)
	m.GET("/grains/:hash", s.allow(auth.Reader), s.getGrain)
	m.GET("/grains/:hash/history", s.allow(auth.Reader), s.history)
	m.POST("/forget", s.allow(auth.DPO), handle(s, s.forget))
	m.POST("/forget-user", s.allow(auth.DPO), handle(s, s.forgetUser))
	m.POST("/export", s.allow(auth.DPO), handle(s, s.exportUser))
	m.POST("/export/history", s.allow(auth.DPO, auth.Auditor), handle(s, s.exportHistory))
	m.POST("/scope-erase", s.allow(auth.DPO), handle(s, s.scopeErase))
	m.POST("/erase", s.allow(auth.DPO), handle(s, s.eraseMemory))
	m.GET("/holds", s.allow(auth.DPO), s.listHolds)
	m.POST("/holds", s.allow(auth.DPO), handle(s, s.setHold))
	m.DELETE("/holds/:id", s.allow(auth.DPO), s.releaseHold)
	m.POST("/purge/stale", s.allow(auth.DPO), handle(s, s.purgeStale))
	m.POST("/archive", s.allow(auth.DPO), handle(s, s.archive))
	m.GET("/archive/candidates", s.allow(auth.DPO), s.archiveCandidates)
	m.POST("/risk-sweep", s.allow(auth.DPO), handle(s, s.riskSweep))
	s.hookRoutes(m)
	m.POST("/erasure-requests", s.allow(auth.DPO), handle(s, s.fileRequest))
	m.GET("/erasure-requests", s.allow(auth.DPO), s.listRequests)
	m.GET("/erasure-requests/:id", s.allow(auth.DPO), s.getRequest)
	m.POST("/erasure-requests/:id/approve", s.allow(auth.DPO), s.decideRequest(true))
	m.POST("/erasure-requests/:id/reject", s.allow(auth.DPO), s.decideRequest(false))
	m.POST("/erasure-requests/:id/execute", s.allow(auth.DPO), s.executeRequest)
	// The certificate is for the data subject and auditors too.
	m.GET("/erasure-requests/:id/certificate", s.allow(auth.DPO, auth.Auditor), s.certificate)

	a := api.Group("/audit")
	a.GET("/key", s.allow(auth.Auditor), s.auditKey)
	a.GET("/checkpoint", s.allow(auth.Auditor), s.auditCheckpoint)
	a.GET("/entries/:index", s.allow(auth.Auditor), s.auditEntry)
	a.GET("/consistency", s.allow(auth.Auditor), s.auditConsistency)
	// A DPO fetches the proofs of its erasures when they were pending.
	// Entries and proofs are of the leaves the token may read (leafFilter).
	a.GET("/proof", s.allow(auth.Auditor, auth.DPO), s.auditProof)
	s.tlogRoutes(e, api)

	t := api.Group("/tokens", s.tokenAdmin)
	t.GET("", s.listTokens)
	t.POST("", handle(s, s.createToken))
	t.DELETE("/:id", s.revokeToken)

	if s.cfg.MCP != nil {
		e.Any("/mcp", s.deadline, s.authenticate, gin.WrapH(keepNoStore(s.cfg.MCP)))
	}
	return e
}

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readier is what the library may offer to say it is ready (store, KEK and
// audit log reachable).
type readier interface {
	Ready(ctx context.Context) error
}

func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	checks := map[string]string{"tokens": "ok"}
	ok := true
	if err := s.tokens.Ping(ctx); err != nil {
		checks["tokens"], ok = "unavailable", false
		s.log.LogAttrs(ctx, slog.LevelWarn, "not ready", slog.String("check", "tokens"), slog.Any("error", err))
	}
	if r, is := s.lib.(readier); is {
		checks["library"] = "ok"
		if err := r.Ready(ctx); err != nil {
			checks["library"], ok = "unavailable", false
			s.log.LogAttrs(ctx, slog.LevelWarn, "not ready", slog.String("check", "library"), slog.Any("error", err))
		}
	} else {
		// Without a readiness check of its own, reading the latest signed
		// checkpoint goes through the library's store pool and audit state.
		checks["audit"] = "ok"
		if _, err := s.lib.Checkpoint(ctx); err != nil && lethe.ErrorCode(err) != lethe.CodeNotFound {
			checks["audit"], ok = "unavailable", false
			s.log.LogAttrs(ctx, slog.LevelWarn, "not ready", slog.String("check", "audit"), slog.Any("error", err))
		}
	}
	if !ok {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "unavailable", "checks": checks})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "checks": checks})
}
