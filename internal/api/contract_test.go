package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/lethe-io/lethe/internal/api"
)

// contract validates every request and response that goes through it
// against internal/api/openapi.json with kin-openapi, an independent
// validator. Every test server of this package is wrapped in it, so the
// document and the code cannot drift apart:
//
//   - every response must be documented (its status, and its body against
//     the status's schema);
//   - a request the document refuses must be refused by the server (4xx);
//   - every answer but a tlog-tiles checkpoint or tile is Cache-Control:
//     no-store, as the document's description says;
//   - a request the document accepts but the server refuses with 400 is
//     logged (go test -v), not failed: some rules are prose in the document
//     and docs/api.md, beyond what a schema says (repeated keys, lone
//     surrogates, a cursor from a previous page, the tags of a whole batch,
//     event or index in a proof query).
type contract struct {
	tb     testing.TB
	router routers.Router
	next   http.Handler
}

var contractDoc = func() func(testing.TB) (*openapi3.T, routers.Router) {
	var (
		doc    *openapi3.T
		router routers.Router
		err    error
	)
	loaded := false
	return func(tb testing.TB) (*openapi3.T, routers.Router) {
		tb.Helper()
		if !loaded {
			loaded = true
			// kin-openapi decodes no text/cal body by itself: a CAL
			// statement is a plain string to its schema.
			openapi3filter.RegisterBodyDecoder("text/cal", openapi3filter.PlainBodyDecoder)
			// Nor an HTML page (an erasure certificate).
			openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
			loader := openapi3.NewLoader()
			doc, err = loader.LoadFromData(api.OpenAPI)
			if err == nil {
				err = doc.Validate(context.Background())
			}
			if err == nil {
				router, err = gorillamux.NewRouter(doc)
			}
		}
		if err != nil {
			tb.Fatalf("openapi.json: %v", err)
		}
		return doc, router
	}
}()

func withContract(tb testing.TB, next http.Handler) http.Handler {
	tb.Helper()
	_, router := contractDoc(tb)
	return &contract{tb: tb, router: router, next: next}
}

func (c *contract) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	c.next.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())

	if (rec.Code != http.StatusOK || !strings.HasPrefix(r.URL.Path, "/api/audit/log/")) && rec.Header().Get("Cache-Control") != "no-store" {
		// See "Personal data" in the package doc.
		c.tb.Errorf("contract: the answer to %s %s is %d without Cache-Control: no-store", r.Method, r.URL.Path, rec.Code)
	}
	if r.URL.Path == "/mcp" {
		// The one route outside openapi.json (see Config.MCP): its bodies
		// are MCP's JSON-RPC, whose contract the MCP tests check.
		return
	}
	what := r.Method + " " + r.URL.RequestURI()
	route, params, err := c.findRoute(r)
	if err != nil {
		// An unrouted path or method: the server must say so.
		if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
			c.tb.Errorf("contract: %s is not in openapi.json (%v), but the server answered %d", what, err, rec.Code)
		}
		return
	}
	ctx := context.Background()
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	rin := &openapi3filter.RequestValidationInput{
		Request: r.Clone(ctx), PathParams: params, Route: route, Options: opts,
	}
	rin.Request.Body = io.NopCloser(bytes.NewReader(body))
	reqErr := openapi3filter.ValidateRequest(ctx, rin)
	switch {
	case reqErr != nil && rec.Code < 400:
		c.tb.Errorf("contract: the server accepted (%d) a request openapi.json refuses: %s %s\n%v", rec.Code, what, trim(body), reqErr)
	case reqErr == nil && rec.Code == http.StatusBadRequest:
		c.tb.Logf("contract: openapi.json accepts a request the server refuses: %s %s -> %s", what, trim(body), trim(rec.Body.Bytes()))
	}
	// The response is always validated against the document.
	rin.Request.Body = io.NopCloser(bytes.NewReader(body))
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: rin, Status: rec.Code, Header: rec.Header(),
		Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: opts,
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		var me openapi3.MultiError
		if errors.As(err, &me) && len(me) == 0 {
			return
		}
		c.tb.Errorf("contract: the response to %s does not match openapi.json: %d %s\n%v", what, rec.Code, trim(rec.Body.Bytes()), err)
	}
}

// tilePrefix is where the tlog-tiles tiles are: their {tile} parameter
// spans several path segments, which the router matches one at a time.
const tilePrefix = "/api/audit/log/tile/"

// findRoute is the router's FindRoute, with a tile path routed as one
// parameter.
func (c *contract) findRoute(r *http.Request) (*routers.Route, map[string]string, error) {
	tile, ok := strings.CutPrefix(r.URL.Path, tilePrefix)
	if !ok || !strings.Contains(tile, "/") {
		return c.router.FindRoute(r)
	}
	one := r.Clone(r.Context())
	one.URL.Path, one.URL.RawPath = tilePrefix+"tile", ""
	route, params, err := c.router.FindRoute(one)
	if err == nil {
		params["tile"] = tile
	}
	return route, params, err
}

func trim(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// recordTB records Errorf calls instead of failing.
type recordTB struct {
	testing.TB
	errs []string
}

func (r *recordTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recordTB) Logf(string, ...any) {}
func (r *recordTB) Helper()             {}

// TestContractCatchesDrift checks that the validator wrapped around every
// test server fails a test for an undocumented status, a response body
// that is not the documented one, an answer without Cache-Control:
// no-store, and a request the document refuses but the server accepts;
// and passes a documented exchange.
func TestContractCatchesDrift(t *testing.T) {
	cases := []struct {
		name         string
		method, path string
		body         string
		status       int
		answer       string
		wantErr      bool
	}{
		{"documented", "GET", "/healthz", "", 200, `{"status":"ok"}`, false},
		{"cacheable", "GET", "/healthz", "", 200, `{"status":"ok"}`, true},
		{"undocumented status", "GET", "/healthz", "", 418, `{"code":"teapot","message":"x"}`, true},
		{"wrong body", "GET", "/healthz", "", 200, `{"status":5}`, true},
		{"refused request accepted", "POST", "/api/memories/default/grains", `{"subject":"no type"}`, 201,
			`{"hash":"` + strings.Repeat("a", 64) + `"}`, true},
		{"closed schema", "POST", "/api/memories/default/recall", `{"colour":"red"}`, 200, `{"grains":[]}`, true},
		{"refused request refused", "POST", "/api/memories/default/grains", `{"subject":"no type"}`, 400,
			`{"code":"invalid_argument","message":"type: required"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recordTB{TB: t}
			h := withContract(rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if c.name != "cacheable" {
					w.Header().Set("Cache-Control", "no-store")
				}
				w.WriteHeader(c.status)
				io.WriteString(w, c.answer)
			}))
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer x")
			if c.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			if got := len(rec.errs) > 0; got != c.wantErr {
				t.Errorf("validator errors: %q, want errors: %t", rec.errs, c.wantErr)
			}
		})
	}
}
