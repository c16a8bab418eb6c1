package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/grains"
)

// metrics are the HTTP metrics, labelled by method, route pattern and
// status only: memory names, hashes and tokens never become labels.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lethe_http_requests_total",
			Help: "HTTP requests answered, by method, route pattern and status.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lethe_http_request_duration_seconds",
			Help:    "HTTP request latency, by method, route pattern and status.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "route", "status"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// routeOf is the route pattern of c, "unmatched" when no route matched.
func routeOf(c *gin.Context) string {
	if r := c.FullPath(); r != "" {
		return r
	}
	return "unmatched"
}

// methodLabel bounds the method label.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// observe writes the access log line and the metrics of each request. The
// line has the method, the route pattern (never the raw URL or its query),
// the status, the latency, the bytes sent, and once the request's token is
// authenticated its id and, if the token may use it, the route's memory
// name: a request without a live token, or for a memory its token may not
// use, writes no string of its own choosing into the log.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	lat := time.Since(start)
	sendNow(c)
	route, method := routeOf(c), methodLabel(c.Request.Method)
	status := c.Writer.Status()
	st := strconv.Itoa(status)
	s.metrics.requests.WithLabelValues(method, route, st).Inc()
	s.metrics.latency.WithLabelValues(method, route, st).Observe(lat.Seconds())
	attrs := []slog.Attr{
		slog.String("method", method), slog.String("route", route), slog.Int("status", status),
		slog.Float64("latency_ms", float64(lat.Microseconds())/1000),
		slog.Int("bytes_out", max(c.Writer.Size(), 0)),
	}
	if m := c.GetString(memoryKey); m != "" {
		attrs = append(attrs, slog.String("memory", m))
	}
	if t := tokenOf(c); t != nil {
		attrs = append(attrs, slog.String("token", t.ID))
	}
	s.log.LogAttrs(c.Request.Context(), slog.LevelInfo, "request", attrs...)
}

// sendNow sends what is left of an answer whose length is known before
// the access log line is written. net/http sends the first 4 KiB of an
// answer while the handler writes and the rest only once every middleware
// has returned: a recall page of 10 grains (about 4.4 KB) reached the
// client in two parts, with the log line's write between them. An answer
// without a Content-Length (c.JSON's) is not flushed: flushing it would
// switch it to chunked encoding.
func sendNow(c *gin.Context) {
	if c.Writer.Written() && c.Writer.Header().Get("Content-Length") != "" && c.Request.Method != http.MethodHead {
		c.Writer.Flush()
	}
}

// recover turns a panic into a JSON 500. The panic's value is not logged
// (it could hold a request's values); its type and the stack are.
func (s *Server) recover(c *gin.Context) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler {
			panic(v)
		}
		s.log.LogAttrs(c.Request.Context(), slog.LevelError, "panic in handler",
			slog.String("route", routeOf(c)), slog.String("panic_type", fmt.Sprintf("%T", v)),
			slog.String("stack", string(debug.Stack())))
		if c.Writer.Written() {
			c.Abort()
			return
		}
		c.AbortWithStatusJSON(http.StatusInternalServerError, ErrorResponse{Code: string(lethe.CodeInternal), Message: "internal error"})
	}()
	c.Next()
}

// noStore forbids caching the answer anywhere (RFC 9111): see "Personal
// data" in the package doc. A handler may set another Cache-Control (the
// tlog-tiles routes do).
func noStore(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.Next()
}

// keepNoStore serves h with Cache-Control: no-store on every answer,
// whatever h set: the MCP SDK's transport sets its own (no-cache, which
// lets a cache keep a copy) on answers that carry grains.
func keepNoStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&noStoreWriter{ResponseWriter: w}, r)
	})
}

// noStoreWriter sets Cache-Control: no-store as the header is written. It
// flushes (the SDK streams server-sent events) and unwraps, for
// http.ResponseController.
type noStoreWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *noStoreWriter) header() {
	if !w.wrote {
		w.wrote = true
		w.Header().Set("Cache-Control", "no-store")
	}
}

func (w *noStoreWriter) WriteHeader(code int) {
	w.header()
	w.ResponseWriter.WriteHeader(code)
}

func (w *noStoreWriter) Write(b []byte) (int, error) {
	w.header()
	return w.ResponseWriter.Write(b)
}

func (w *noStoreWriter) Flush() {
	w.header()
	http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *noStoreWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// singleQuery refuses a query parameter given more than once with 400
// invalid_argument naming it (the first in byte order), as a key repeated
// in a JSON body is, rather than read its first value and drop the others
// (?status=pending&status=executed listed the pending requests only).
func (s *Server) singleQuery(c *gin.Context) {
	q := c.Request.URL.Query()
	var repeated []string
	for k, vs := range q {
		if len(vs) > 1 {
			repeated = append(repeated, k)
		}
	}
	if len(repeated) > 0 {
		slices.Sort(repeated)
		s.fail(c, grains.FieldError(lethe.CodeInvalidArgument, repeated[0], "repeated parameter"))
	}
}

// deadline bounds the request's work.
func (s *Server) deadline(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.RequestTimeout)
	defer cancel()
	c.Request = c.Request.WithContext(ctx)
	c.Next()
}

const (
	tokenKey  = "lethe.token"
	memoryKey = "lethe.memory" // the route's memory, once its token may use it
)

func tokenOf(c *gin.Context) *auth.Token {
	if t, ok := c.Get(tokenKey); ok {
		return t.(*auth.Token)
	}
	return nil
}

// authenticate finds the bearer token: 401 when it is missing, unknown,
// revoked or expired (the last three one answer, byte for byte).
func (s *Server) authenticate(c *gin.Context) {
	h := c.GetHeader("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		c.Header("WWW-Authenticate", `Bearer realm="lethe"`)
		s.fail(c, apiError(CodeUnauthorized, "a bearer token is required", "send Authorization: Bearer <token>"))
		return
	}
	t, err := s.tokens.Lookup(c.Request.Context(), strings.TrimSpace(secret))
	if errors.Is(err, auth.ErrUnknown) {
		c.Header("WWW-Authenticate", `Bearer realm="lethe", error="invalid_token"`)
		s.fail(c, apiError(CodeUnauthorized, "unknown, revoked or expired token", ""))
		return
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Set(tokenKey, t)
	c.Request = c.Request.WithContext(lethe.WithActor(c.Request.Context(), t.ID))
	c.Next()
}

// memory checks the route's memory name and that the token may use it.
func (s *Server) memory(c *gin.Context) {
	m := c.Param("memory")
	if err := grains.ValidateMemory(m); err != nil {
		s.fail(c, err)
		return
	}
	if !tokenOf(c).AllowsMemory(m) {
		s.fail(c, apiError(CodeForbidden, "this token may not use this memory", ""))
		return
	}
	c.Set(memoryKey, m)
	c.Next()
}

// allow requires one of roles (admin has every role).
func (s *Server) allow(roles ...auth.Role) gin.HandlerFunc {
	need := make([]string, len(roles))
	for i, r := range roles {
		need[i] = string(r)
	}
	hint := "it needs the " + strings.Join(need, " or ") + " role"
	return func(c *gin.Context) {
		t := tokenOf(c)
		for _, r := range roles {
			if t.Has(r) {
				c.Next()
				return
			}
		}
		s.fail(c, apiError(CodeForbidden, "this token's roles do not allow this call", hint))
	}
}

// tokenAdmin requires an admin token for every memory and every scope:
// a narrower admin could otherwise mint a wider token.
func (s *Server) tokenAdmin(c *gin.Context) {
	t := tokenOf(c)
	if !t.Has(auth.Admin) || !t.AllowsMemory(auth.AllMemories) || t.Scoped() {
		s.fail(c, apiError(CodeForbidden, "managing tokens needs an admin token for every memory and scope", ""))
		return
	}
	c.Next()
}
