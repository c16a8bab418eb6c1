package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// Library is what the tools call: the embedded store (*lethe.DB) or an HTTP
// client of a lethe server. Each method has the contract of the *lethe.DB
// method of the same name; errors carry lethe's codes.
type Library interface {
	Add(ctx context.Context, g lethe.Grain) (string, error)
	Recall(ctx context.Context, q lethe.Query) (*lethe.Page, error)
	Get(ctx context.Context, memory, hash string) (*lethe.Grain, error)
	Supersede(ctx context.Context, oldHash string, g lethe.Grain, set ...string) (string, error)
	History(ctx context.Context, memory, hash string) ([]lethe.Grain, error)
	Forget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error)
	RiskSweep(ctx context.Context, memory string, opts lethe.RiskOptions) (*lethe.RiskResult, error)
}

// Eraser is crypto-erasure, offered as the forget_user and erase_scope
// tools only when a Config has one.
type Eraser interface {
	ForgetUser(ctx context.Context, memory, userID string, opts ...lethe.EraseOption) (*lethe.Erasure, error)
	EraseScope(ctx context.Context, memory, path string, opts ...lethe.EraseOption) (*lethe.Erasure, error)
}

var (
	_ Library = (*lethe.DB)(nil)
	_ Eraser  = (*lethe.DB)(nil)
)

// Config configures a server.
type Config struct {
	// Library is the store the tools call. Required unless Resolve is set.
	Library Library
	// Eraser, when set, adds the forget_user and erase_scope tools.
	Eraser Eraser
	// Resolve, when set, gives each call its Library and Eraser from the
	// header of the HTTP request that carried it (NewHandler's requests;
	// the header is nil over other transports): so one server serves
	// every caller with that caller's token. The erasure tools are offered
	// when AllowErase is set; Resolve may then return an Eraser.
	Resolve    func(header http.Header) (Library, Eraser, error)
	AllowErase bool
	// Requester, when set, adds the erasure_request_* tools (the four-eyes
	// erasure request workflow). With Resolve, they are offered when
	// AllowRequests is set, and each call uses the resolved Library, which
	// must then implement Requester.
	Requester     Requester
	AllowRequests bool
	// Memory is the session's memory (default "default"); a call may name
	// another unless a lock is set.
	Memory string
	// LockNamespace and LockScope pin the session to one namespace and to
	// one scope path and everything below it (see the package doc).
	LockNamespace string
	LockScope     string
	// Version is the server version reported to clients.
	Version string
	// Logger receives internal errors (code internal), never personal data
	// (default: none).
	Logger *slog.Logger
}

// schemas is shared by every server, so that a server per HTTP request
// does not infer the tools' schemas again.
var schemas = sdk.NewSchemaCache()

// New returns an MCP server over cfg.Library.
func New(cfg Config) (*sdk.Server, error) {
	if cfg.Library == nil && cfg.Resolve == nil {
		return nil, errors.New("mcp: no library")
	}
	if cfg.Memory == "" {
		cfg.Memory = grains.DefaultMemory
	}
	if err := grains.ValidateMemory(cfg.Memory); err != nil {
		return nil, err
	}
	cfg.LockScope = strings.Trim(cfg.LockScope, "/")
	if err := grains.ValidateScope(cfg.LockScope); err != nil {
		return nil, fmt.Errorf("lock scope: %w", err)
	}
	if cfg.LockNamespace != "" {
		probe := lethe.Grain{Type: "fact", Content: "x", Namespace: cfg.LockNamespace}
		probe.Normalize()
		if err := probe.Validate(); err != nil {
			return nil, fmt.Errorf("lock namespace: %w", err)
		}
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "lethe", Title: "lethe memory", Version: cfg.Version},
		&sdk.ServerOptions{Instructions: instructions(&cfg), SchemaCache: schemas})
	h := &handlers{cfg: cfg, inputs: map[string]*jsonschema.Schema{}}
	h.addTools(s)
	s.AddReceivingMiddleware(validateArgs(h.inputs))
	h.addResources(s)
	return s, nil
}

func instructions(cfg *Config) string {
	var b strings.Builder
	b.WriteString("lethe is an encrypted memory store with erasure you can prove. Write grains (a subject/relation/object " +
		"triple and/or content) with add, find them with recall, correct them with supersede (the old version stays in " +
		"the history), and delete them with forget. Protected grains (pinned, protected types such as caveat and goal, " +
		"high importance) are never forgotten here: forget answers preserved: true. Use dry_run to preview a forget.")
	fmt.Fprintf(&b, " This session's memory is %q.", cfg.Memory)
	if cfg.Requester != nil || (cfg.Resolve != nil && cfg.AllowRequests) {
		b.WriteString(" Erasure requests (erasure_request_*) need four eyes: whoever files a request cannot approve it.")
	}
	if cfg.LockNamespace != "" || cfg.LockScope != "" {
		b.WriteString(" The session is locked to")
		if cfg.LockNamespace != "" {
			fmt.Fprintf(&b, " namespace %q", cfg.LockNamespace)
		}
		if cfg.LockScope != "" {
			fmt.Fprintf(&b, " scope %q and below", cfg.LockScope)
		}
		b.WriteString(": calls naming anything else are refused.")
	}
	return b.String()
}

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// MaxBody bounds request bodies (default: the SDK's).
	MaxBody int64
}

// NewHandler serves the streamable HTTP transport, stateless (no session
// outlives its request, so any replica answers any request), with one
// server for cfg. Set cfg.Resolve so that each call acts for the token of
// its own request.
// A POST body that is not JSON-RPC is answered 400 with code
// invalid_argument (see checkBody), not with the SDK's message, which
// quotes the body.
func NewHandler(cfg Config, opts *HandlerOptions) (http.Handler, error) {
	if opts == nil {
		opts = &HandlerOptions{}
	}
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: opts.MaxBody,
			// The SDK refuses requests that reach a loopback address with another
			// Host, against DNS rebinding. lethe's /mcp needs a bearer token,
			// which a rebinding page does not have, and a reverse proxy on the
			// same host (forwarding its own Host) is a common deployment.
			DisableLocalhostProtection: true})
	max := opts.MaxBody
	if max <= 0 {
		max = sdk.DefaultMaxRequestBodyBytes
	}
	return &checkBody{next: h, max: max}, nil
}

// checkBody answers a POST whose body is not JSON, or not JSON-RPC 2.0
// messages, with 400 and a lethe error body ({"code": "invalid_argument",
// "message", "hint"}) that does not quote the body; the SDK's answer
// ("malformed payload: ... invalid token: <the body>") would. A message
// with a key repeated in one of its objects is 400 too, with the JSON-RPC
// error of repeatedInMessage. Other requests, and bodies over max (which
// the SDK answers 413), go to next.
type checkBody struct {
	next http.Handler
	max  int64
}

func (c *checkBody) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		// Stateless: no session to end (DELETE) and no event stream to
		// open (GET), so nothing outlives the request that authenticated
		// it, and a revoked or expired token has nothing left open.
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, ErrorInfo{Code: "method_not_allowed",
			Message: "only POST is allowed on /mcp",
			Hint:    "the MCP endpoint is stateless: POST JSON-RPC 2.0 messages; it keeps no session and no event stream"})
		return
	}
	if r.Body == nil {
		c.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, c.max+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorInfo{Code: string(lethe.CodeInvalidArgument), Message: "the body could not be read"})
		return
	}
	if int64(len(body)) > c.max {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
		c.next.ServeHTTP(w, r)
		return
	}
	if msg := jsonrpcProblem(body); msg != "" {
		writeError(w, http.StatusBadRequest, ErrorInfo{Code: string(lethe.CodeInvalidArgument), Message: msg,
			Hint: "post one JSON-RPC 2.0 message (or a batch) as JSON"})
		return
	}
	if id, problem := repeatedInMessage(body); problem != nil {
		// As the SDK answers a message it refuses before the server reads it.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(errorReply(id, problem))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.next.ServeHTTP(w, r)
}

// errorReply is a JSON-RPC 2.0 error response to the request id (nil for
// null).
func errorReply(id any, e *jsonrpc.Error) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      any            `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", id, e})
	return b
}

// jsonrpcProblem says what makes body not JSON-RPC 2.0 messages, without
// quoting it, or "" when it is (or is empty, which the SDK refuses itself).
func jsonrpcProblem(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	if !json.Valid(body) {
		return "malformed JSON"
	}
	// Not raws := []json.RawMessage{body}: Unmarshal would write the
	// batch's first message over body, which aliases the caller's bytes.
	var raws []json.RawMessage
	if body[0] == '[' {
		if json.Unmarshal(body, &raws) != nil || len(raws) == 0 {
			return "not a JSON-RPC 2.0 message"
		}
	} else {
		raws = []json.RawMessage{body}
	}
	for _, raw := range raws {
		if _, err := jsonrpc.DecodeMessage(raw); err != nil {
			return "not a JSON-RPC 2.0 message"
		}
	}
	return ""
}

func writeError(w http.ResponseWriter, status int, info ErrorInfo) {
	b, _ := json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Hint    string `json:"hint,omitempty"`
	}{info.Code, info.Message, info.Hint})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// handlers are the tools and resources of one server.
type handlers struct {
	cfg Config
	// inputs are the tools' input schemas, by tool name, for validateArgs.
	inputs map[string]*jsonschema.Schema
}

// bind returns the handlers for one call: with Config.Resolve, those of
// the Library and Eraser it gives for the call's HTTP header. On error it
// returns h, to report it.
func (h *handlers) bind(extra *sdk.RequestExtra) (*handlers, error) {
	if h.cfg.Resolve == nil {
		return h, nil
	}
	var header http.Header
	if extra != nil {
		header = extra.Header
	}
	lib, er, err := h.cfg.Resolve(header)
	if err != nil {
		return h, err
	}
	c := *h
	c.cfg.Library, c.cfg.Eraser = lib, er
	if r, ok := lib.(Requester); ok && h.cfg.AllowRequests {
		c.cfg.Requester = r
	}
	return &c, nil
}

// erasing reports whether the erasure tools are offered.
func (h *handlers) erasing() bool {
	return h.cfg.Eraser != nil || (h.cfg.Resolve != nil && h.cfg.AllowErase)
}

// ErrorInfo is the body of an error result: the library's stable code, a
// message and a hint that never quote personal values.
type ErrorInfo struct {
	OK      bool   `json:"ok"`
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// resultError is a tool's failure; the SDK sends Error() as the text of an
// error result (isError), so it is ErrorInfo's JSON.
type resultError struct{ info ErrorInfo }

func (e *resultError) Error() string {
	b, _ := json.Marshal(e.info)
	return string(b)
}

// fail turns err into a tool error result.
func (h *handlers) fail(tool string, err error) error {
	info := errorInfo(err)
	if info.Code == string(lethe.CodeInternal) {
		h.cfg.Logger.Error("mcp tool failed", slog.String("tool", tool), slog.Any("error", err))
	}
	return &resultError{info}
}

// errorInfo is the ErrorInfo of err: its code, public message, field and
// hint.
func errorInfo(err error) ErrorInfo {
	err = grains.HideErasure(err) // an erased grain is no grain, in the same words
	info := ErrorInfo{Code: string(lethe.ErrorCode(err)), Message: grains.PublicMessage(err)}
	var le *lethe.Error
	if errors.As(err, &le) {
		info.Field, info.Hint = le.Field, le.Hint
		if le.Field != "" {
			info.Message = le.Message
		}
	}
	return info
}

// codeForbidden is this package's refusal of a call outside the session's
// lock: the library's code for a forget outside its selector's scopes,
// which the HTTP API answers too.
const codeForbidden = lethe.CodeForbidden

func forbidden(field, msg string) error {
	return &lethe.Error{Code: codeForbidden, Field: field, Message: msg,
		Hint: "this session is locked to one partition; see the server's instructions"}
}

func (h *handlers) locked() bool { return h.cfg.LockNamespace != "" || h.cfg.LockScope != "" }

// memory returns the memory a call names ("" is the session's). A locked
// session stays in its memory.
func (h *handlers) memory(m string) (string, error) {
	if m == "" || m == h.cfg.Memory {
		return h.cfg.Memory, nil
	}
	if h.locked() {
		return "", forbidden("memory", "outside this session's lock")
	}
	return m, grains.ValidateMemory(m)
}

// namespace returns the namespace a call may use: the lock's when it names
// none or the same.
func (h *handlers) namespace(ns string) (string, error) {
	if h.cfg.LockNamespace == "" || ns == "" || ns == h.cfg.LockNamespace {
		if ns == "" {
			return h.cfg.LockNamespace, nil
		}
		return ns, nil
	}
	return "", forbidden("namespace", "outside this session's lock")
}

// scope returns the scope a call may use: the lock's when it names none, the
// one named when it is the lock's or below it. As the library does, one
// leading and one trailing '/' are dropped (grains.TrimScope), and nothing
// else: "/acme//" is invalid_scope, never acme, nor "///" the root.
func (h *handlers) scope(s string) (string, error) {
	s = grains.TrimScope(s)
	if s == "" {
		return h.cfg.LockScope, nil
	}
	if err := grains.ValidateScope(s); err != nil {
		return "", err
	}
	if !within(s, h.cfg.LockScope) {
		return "", forbidden("scope", "outside this session's lock")
	}
	return s, nil
}

func within(scope, prefix string) bool {
	return prefix == "" || scope == prefix || strings.HasPrefix(scope, prefix+"/")
}

// inLock reports whether g is inside the session's partition.
func (h *handlers) inLock(g *lethe.Grain) bool {
	if h.cfg.LockNamespace != "" {
		ns := g.Namespace
		if ns == "" {
			ns = grains.DefaultNamespace
		}
		if ns != h.cfg.LockNamespace {
			return false
		}
	}
	return within(strings.Trim(g.Scope, "/"), h.cfg.LockScope)
}

func boolPtr(b bool) *bool { return &b }
