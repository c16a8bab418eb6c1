package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/proofs"
)

// backend is what the grain commands call: the embedded store (*lethe.DB)
// or, with --server, a lethe server over HTTP (*client). Each command works
// unchanged in both modes.
type backend interface {
	Add(ctx context.Context, g lethe.Grain) (string, error)
	Recall(ctx context.Context, q lethe.Query) (*lethe.Page, error)
	Get(ctx context.Context, memory, hash string) (*lethe.Grain, error)
	Supersede(ctx context.Context, oldHash string, g lethe.Grain, set ...string) (string, error)
	History(ctx context.Context, memory, hash string) ([]lethe.Grain, error)
	Forget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error)
}

var (
	_ backend = (*lethe.DB)(nil)
	_ backend = (*client)(nil)
)

// backend returns the store the global flags name: a client of --server
// when it is set, else the embedded store.
func (e *env) backend(ctx context.Context) (backend, error) {
	if e.server == "" {
		return e.open(ctx)
	}
	return e.client()
}

// client returns the HTTP client of --server and --token-file.
func (e *env) client() (*client, error) {
	if e.server == "" {
		return nil, usagef("no server: set --server URL (or $LETHE_SERVER)")
	}
	if e.tokenFile == "" {
		return nil, usagef("--server needs --token-file FILE (or $LETHE_TOKEN_FILE)")
	}
	return newClient(e.server, e.tokenFile)
}

// errRemote is what a command that only works on the embedded store says
// when --server is set.
func errRemote(name string) error {
	return usagef("%s works on the embedded store only; leave out --server", name)
}

// client talks to a lethe server's HTTP API.
type client struct {
	base  string
	token string
	hc    *http.Client
}

func newClient(server, tokenFile string) (*client, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--server: want an http:// or https:// URL")
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, &lethe.Error{Code: lethe.CodeInvalidArgument, Message: "cannot read the token file", Err: err,
			Hint: "--token-file (or $LETHE_TOKEN_FILE) names a readable file holding the API token"}
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return nil, &lethe.Error{Code: lethe.CodeInvalidArgument, Message: "the token file " + tokenFile + " is empty",
			Hint: "--token-file (or $LETHE_TOKEN_FILE) names a readable file holding the API token"}
	}
	return &client{base: strings.TrimRight(u.String(), "/"), token: tok, hc: &http.Client{Timeout: 2 * time.Minute}}, nil
}

// Close releases nothing: the client holds no connection of its own.
func (c *client) Close() error { return nil }

// do sends in (when not nil) as JSON and decodes a 2xx answer into out. An
// error answer comes back as a *lethe.Error with the server's code, so the
// CLI reports it as it would a local one.
func (c *client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	if in == nil {
		return c.send(ctx, method, path, "", nil, out)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	return c.send(ctx, method, path, "application/json", bytes.NewReader(b), out)
}

// send is do with a body of any media type ctype.
func (c *client) send(ctx context.Context, method, path, ctype string, body io.Reader, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, &lethe.Error{Code: lethe.CodeUnavailable, Message: "the server cannot be reached", Err: err,
			Hint: "check --server and that 'lethe serve' runs"}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, &lethe.Error{Code: lethe.CodeUnavailable, Message: "the server's answer was cut short", Err: err}
	}
	if resp.StatusCode >= 300 || (resp.StatusCode == http.StatusAccepted && isError(b)) {
		var e api.ErrorResponse
		if json.Unmarshal(b, &e) != nil || e.Code == "" {
			return resp.StatusCode, &lethe.Error{Code: lethe.CodeUnavailable, Message: fmt.Sprintf("the server answered HTTP %d", resp.StatusCode)}
		}
		// The server's message starts with the field it names (see
		// lethe.Error's Error); kept apart here, it reads the same.
		return resp.StatusCode, &lethe.Error{Code: lethe.Code(e.Code), Field: e.Field,
			Message: strings.TrimPrefix(e.Message, e.Field+": "), Hint: e.Hint}
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		switch o := out.(type) {
		case *[]byte:
			*o = b
		case *rawAnswer:
			o.body, o.header = b, resp.Header
		default:
			if err := json.Unmarshal(b, out); err != nil {
				return resp.StatusCode, fmt.Errorf("decode the server's answer: %w", err)
			}
		}
	}
	return resp.StatusCode, nil
}

// isError reports whether a 202 body is an error (code pending) rather
// than a result.
func isError(b []byte) bool {
	var probe struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(b, &probe) == nil && probe.Code != ""
}

func memoryPath(memory string) string {
	if memory == "" {
		memory = "default"
	}
	return "/api/memories/" + url.PathEscape(memory)
}

func (c *client) Add(ctx context.Context, g lethe.Grain) (string, error) {
	var out api.AddResponse
	_, err := c.do(ctx, http.MethodPost, memoryPath(g.Memory)+"/grains", api.InputOf(&g), &out)
	return out.Hash, err
}

// AddBatch writes grains of one memory in one request.
func (c *client) AddBatch(ctx context.Context, gs []lethe.Grain) ([]string, error) {
	if len(gs) == 0 {
		return nil, &lethe.Error{Code: lethe.CodeInvalidArgument, Field: "grains", Message: "an empty batch"}
	}
	req := api.AddBatchRequest{Grains: make([]api.GrainInput, len(gs))}
	for i := range gs {
		req.Grains[i] = api.InputOf(&gs[i])
	}
	var out api.AddBatchResponse
	_, err := c.do(ctx, http.MethodPost, memoryPath(gs[0].Memory)+"/grains", req, &out)
	return out.Hashes, err
}

func (c *client) Recall(ctx context.Context, q lethe.Query) (*lethe.Page, error) {
	var out lethe.Page
	if _, err := c.do(ctx, http.MethodPost, memoryPath(q.Memory)+"/recall", api.RecallRequestOf(&q), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) Get(ctx context.Context, memory, hash string) (*lethe.Grain, error) {
	var out lethe.Grain
	if _, err := c.do(ctx, http.MethodGet, memoryPath(memory)+"/grains/"+url.PathEscape(hash), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) Supersede(ctx context.Context, oldHash string, g lethe.Grain, set ...string) (string, error) {
	var out api.SupersedeResponse
	req := api.SupersedeRequest{BlobHash: oldHash, GrainInput: api.InputOf(&g), Set: set}
	_, err := c.do(ctx, http.MethodPost, memoryPath(g.Memory)+"/supersede", req, &out)
	return out.Hash, err
}

func (c *client) History(ctx context.Context, memory, hash string) ([]lethe.Grain, error) {
	var out api.HistoryResponse
	if _, err := c.do(ctx, http.MethodGet, memoryPath(memory)+"/grains/"+url.PathEscape(hash)+"/history", nil, &out); err != nil {
		return nil, err
	}
	return out.Grains, nil
}

func (c *client) Forget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error) {
	return c.forget(ctx, sel, false)
}

func (c *client) forget(ctx context.Context, sel lethe.Selector, force bool) (*lethe.ForgetResult, error) {
	req := api.ForgetRequest{Force: force, DryRun: sel.DryRun}
	if sel.Hash != "" {
		req.BlobHash = &sel.Hash
	}
	if sel.Subject != "" {
		req.Subject = &sel.Subject
	}
	if sel.UserID != "" {
		req.UserID = &sel.UserID
	}
	req.Hashes = sel.Hashes
	// The confinement (a locked MCP session's lock): the server checks it
	// in the delete's transaction, with its token's scopes.
	req.Scopes = sel.Scopes
	if sel.Namespace != "" {
		req.Namespace = &sel.Namespace
	}
	var out lethe.ForgetResult
	if _, err := c.do(ctx, http.MethodPost, memoryPath(sel.Memory)+"/forget", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tokens, through the admin routes.

func (c *client) CreateToken(ctx context.Context, req api.TokenRequest) (*api.TokenCreated, error) {
	var out api.TokenCreated
	if _, err := c.do(ctx, http.MethodPost, "/api/tokens", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) ListTokens(ctx context.Context) ([]api.TokenInfo, error) {
	var out api.TokenList
	if _, err := c.do(ctx, http.MethodGet, "/api/tokens", nil, &out); err != nil {
		return nil, err
	}
	return out.Tokens, nil
}

func (c *client) RevokeToken(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/tokens/"+url.PathEscape(id), nil, nil)
	return err
}

// Crypto-erasure and holds (the eraser interface of erase.go).

var _ eraser = (*client)(nil)

func (c *client) erase(ctx context.Context, memory, route string, req any) (*lethe.Erasure, error) {
	var out lethe.Erasure
	if _, err := c.do(ctx, http.MethodPost, memoryPath(memory)+route, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) ForgetUser(ctx context.Context, memory, userID string, opts ...lethe.EraseOption) (*lethe.Erasure, error) {
	return c.erase(ctx, memory, "/forget-user", api.ForgetUserRequest{UserID: &userID, DryRun: lethe.EraseOptionsOf(opts...).DryRun})
}

func (c *client) EraseScope(ctx context.Context, memory, path string, opts ...lethe.EraseOption) (*lethe.Erasure, error) {
	return c.erase(ctx, memory, "/scope-erase", api.ScopeEraseRequest{Scope: &path, DryRun: lethe.EraseOptionsOf(opts...).DryRun})
}

func (c *client) EraseMemory(ctx context.Context, memory string, opts ...lethe.EraseOption) (*lethe.Erasure, error) {
	if memory == "" {
		memory = "default"
	}
	return c.erase(ctx, memory, "/erase", api.EraseMemoryRequest{Confirm: memory, DryRun: lethe.EraseOptionsOf(opts...).DryRun})
}

func (c *client) SetHold(ctx context.Context, spec lethe.HoldSpec) (*lethe.Hold, error) {
	var req api.HoldRequest
	if spec.Scope != "" {
		req.Scope = &spec.Scope
	}
	if spec.UserID != "" || spec.Scope == "" {
		req.UserID = &spec.UserID
	}
	var out lethe.Hold
	if _, err := c.do(ctx, http.MethodPost, memoryPath(spec.Memory)+"/holds", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) ReleaseHold(ctx context.Context, memory, id string) error {
	_, err := c.do(ctx, http.MethodDelete, memoryPath(memory)+"/holds/"+url.PathEscape(id), nil, nil)
	return err
}

func (c *client) Holds(ctx context.Context, memory string) ([]lethe.Hold, error) {
	var out api.HoldList
	if _, err := c.do(ctx, http.MethodGet, memoryPath(memory)+"/holds", nil, &out); err != nil {
		return nil, err
	}
	return out.Holds, nil
}

// The audit log (the auditLog interface "lethe audit" calls).

// auditLog is what "lethe audit" calls: the embedded store (through
// localAudit) or a server.
type auditLog interface {
	VerifierKey(ctx context.Context) (string, error)
	Checkpoint(ctx context.Context) ([]byte, error)
	AuditEntry(ctx context.Context, index uint64) (*lethe.AuditEntry, error)
	Proof(ctx context.Context, index, size uint64) (*lethe.Proof, error)
	ProofByEvent(ctx context.Context, eventID string) (*lethe.Proof, error)
	Consistency(ctx context.Context, from, to uint64) (*proofs.ConsistencyProof, error)
}

var (
	_ auditLog = localAudit{}
	_ auditLog = (*client)(nil)
)

// localAudit is the embedded store as an auditLog.
type localAudit struct{ *lethe.DB }

func (l localAudit) VerifierKey(context.Context) (string, error) { return l.AuditKey(), nil }

// auditLog returns the audit log the global flags name.
func (e *env) auditLog(ctx context.Context) (auditLog, error) {
	if e.server == "" {
		db, err := e.open(ctx)
		if err != nil {
			return nil, err
		}
		return localAudit{db}, nil
	}
	return e.client()
}

func (c *client) VerifierKey(ctx context.Context) (string, error) {
	var out api.AuditKeyResponse
	_, err := c.do(ctx, http.MethodGet, "/api/audit/key", nil, &out)
	return out.Key, err
}

func (c *client) Checkpoint(ctx context.Context) ([]byte, error) {
	var out []byte
	_, err := c.do(ctx, http.MethodGet, "/api/audit/checkpoint", nil, &out)
	return out, err
}

func (c *client) AuditEntry(ctx context.Context, index uint64) (*lethe.AuditEntry, error) {
	var out lethe.AuditEntry
	if _, err := c.do(ctx, http.MethodGet, "/api/audit/entries/"+strconv.FormatUint(index, 10), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) proof(ctx context.Context, query url.Values) (*lethe.Proof, error) {
	var out []byte
	if _, err := c.do(ctx, http.MethodGet, "/api/audit/proof?"+query.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return proofs.ParseProof(out)
}

func (c *client) Proof(ctx context.Context, index, size uint64) (*lethe.Proof, error) {
	return c.proof(ctx, url.Values{"index": {strconv.FormatUint(index, 10)}, "size": {strconv.FormatUint(size, 10)}})
}

func (c *client) ProofByEvent(ctx context.Context, eventID string) (*lethe.Proof, error) {
	return c.proof(ctx, url.Values{"event": {eventID}})
}

func (c *client) Consistency(ctx context.Context, from, to uint64) (*proofs.ConsistencyProof, error) {
	var out []byte
	q := url.Values{"from": {strconv.FormatUint(from, 10)}, "to": {strconv.FormatUint(to, 10)}}
	if _, err := c.do(ctx, http.MethodGet, "/api/audit/consistency?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return proofs.ParseConsistencyProof(out)
}

// Forgetting policies, with the library's signatures, for the commands that
// run them.

var _ interface {
	ForceForget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error)
	PurgeStale(ctx context.Context, opts lethe.PurgeOptions) (*lethe.PurgeResult, error)
	Archive(ctx context.Context, memory string, opts lethe.ArchiveOptions) (*lethe.ArchiveResult, error)
	ArchiveGrains(ctx context.Context, memory string, hashes []string) (*lethe.ArchiveResult, error)
	ShouldArchive(ctx context.Context, memory string) ([]string, error)
	RiskSweep(ctx context.Context, memory string, opts lethe.RiskOptions) (*lethe.RiskResult, error)
} = (*client)(nil)

func (c *client) ForceForget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error) {
	return c.forget(ctx, sel, true)
}

func (c *client) PurgeStale(ctx context.Context, opts lethe.PurgeOptions) (*lethe.PurgeResult, error) {
	var out lethe.PurgeResult
	if _, err := c.do(ctx, http.MethodPost, memoryPath(opts.Memory)+"/purge/stale", api.PurgeRequestOf(&opts), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) archive(ctx context.Context, memory string, req api.ArchiveRequest) (*lethe.ArchiveResult, error) {
	var out lethe.ArchiveResult
	if _, err := c.do(ctx, http.MethodPost, memoryPath(memory)+"/archive", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) Archive(ctx context.Context, memory string, opts lethe.ArchiveOptions) (*lethe.ArchiveResult, error) {
	return c.archive(ctx, memory, api.ArchiveRequest{Trigger: string(opts.Trigger), DryRun: opts.DryRun})
}

func (c *client) ArchiveGrains(ctx context.Context, memory string, hashes []string) (*lethe.ArchiveResult, error) {
	if hashes == nil {
		hashes = []string{}
	}
	return c.archive(ctx, memory, api.ArchiveRequest{Hashes: hashes})
}

func (c *client) ShouldArchive(ctx context.Context, memory string) ([]string, error) {
	var out api.HashList
	if _, err := c.do(ctx, http.MethodGet, memoryPath(memory)+"/archive/candidates", nil, &out); err != nil {
		return nil, err
	}
	return out.Hashes, nil
}

func (c *client) RiskSweep(ctx context.Context, memory string, opts lethe.RiskOptions) (*lethe.RiskResult, error) {
	var out lethe.RiskResult
	req := api.RiskSweepRequest{Batch: opts.Batch, DryRun: opts.DryRun}
	if _, err := c.do(ctx, http.MethodPost, memoryPath(memory)+"/risk-sweep", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExportUser fetches a subject access export (an armored age file) and
// its audit event, from the answer's headers.
func (c *client) ExportUser(ctx context.Context, memory, userID, recipient string) (*lethe.SubjectExport, error) {
	var out rawAnswer
	if _, err := c.do(ctx, http.MethodPost, memoryPath(memory)+"/export", api.ExportRequest{UserID: &userID, Recipient: &recipient}, &out); err != nil {
		return nil, err
	}
	return &lethe.SubjectExport{Data: out.body, EventID: out.header.Get(api.HeaderEventID),
		SubjectNonce: out.header.Get(api.HeaderSubjectNonce)}, nil
}

// ExportHistory fetches a version-chain audit export (an armored age
// file) and its audit event, from the answer's headers.
func (c *client) ExportHistory(ctx context.Context, req lethe.HistoryRequest) (*lethe.HistoryExport, error) {
	var out rawAnswer
	body := api.HistoryExportRequest{Recipient: &req.Recipient}
	if req.Hash != "" {
		body.Hash = &req.Hash
	}
	if req.Subject != "" {
		body.Subject = &req.Subject
	}
	if _, err := c.do(ctx, http.MethodPost, memoryPath(req.Memory)+"/export/history", body, &out); err != nil {
		return nil, err
	}
	return &lethe.HistoryExport{Data: out.body, EventID: out.header.Get(api.HeaderEventID),
		SubjectNonce: out.header.Get(api.HeaderSubjectNonce)}, nil
}

// rawAnswer is an answer's body and headers, for do.
type rawAnswer struct {
	body   []byte
	header http.Header
}
