package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// The resource templates (RFC 6570).
const (
	GrainTemplate   = "lethe://{memory}/grains/{hash}"
	HistoryTemplate = "lethe://{memory}/grains/{hash}/history"
)

// GrainURI is the resource URI of a grain.
func GrainURI(memory, hash string) string { return "lethe://" + memory + "/grains/" + hash }

func (h *handlers) addResources(s *sdk.Server) {
	s.AddResourceTemplate(&sdk.ResourceTemplate{Name: "grain", Title: "A grain",
		Description: "One grain by hash, superseded or archived included, as JSON.",
		URITemplate: GrainTemplate, MIMEType: "application/json"}, h.readGrain)
	s.AddResourceTemplate(&sdk.ResourceTemplate{Name: "history", Title: "A grain's version chain",
		Description: "The version chain of a grain, newest first, as JSON.",
		URITemplate: HistoryTemplate, MIMEType: "application/json"}, h.readHistory)
}

// parseURI splits lethe://MEMORY/grains/HASH[/history].
func parseURI(uri string, history bool) (memory, hash string, ok bool) {
	rest, found := strings.CutPrefix(uri, "lethe://")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, "/")
	want := 3
	if history {
		want = 4
	}
	if len(parts) != want || parts[1] != "grains" || (history && parts[3] != "history") {
		return "", "", false
	}
	if grains.ValidateMemory(parts[0]) != nil || !grains.ValidHash(parts[2]) {
		return "", "", false
	}
	return parts[0], parts[2], true
}

// CodeRefused is the JSON-RPC error code of a resource read that lethe
// refused (forbidden, invalid_memory, unauthorized...): an application
// code of JSON-RPC 2.0's server range (-32000 to -32099). The error's
// message and data are the ErrorInfo, with lethe's code, field and hint.
// A missing grain (an erased one too) is MCP's resource not found (the SDK's
// CodeResourceNotFound: -32602 since the specification's SEP-2164, -32002
// before), an internal failure -32603.
const CodeRefused = -32001

// resourceErr turns a library error into a resource read's error.
func (h *handlers) resourceErr(uri string, err error) error {
	err = grains.HideErasure(err)
	code := lethe.ErrorCode(err)
	if code == lethe.CodeNotFound {
		return sdk.ResourceNotFoundError(uri)
	}
	info := errorInfo(err)
	b, _ := json.Marshal(info)
	rpc := int64(CodeRefused)
	if code == lethe.CodeInternal {
		h.cfg.Logger.Error("mcp resource read failed", slog.Any("error", err))
		rpc = jsonrpc.CodeInternalError
	}
	return &jsonrpc.Error{Code: rpc, Message: string(b), Data: b}
}

func jsonContents(uri string, v any) (*sdk.ReadResourceResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

func (h *handlers) readGrain(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	h, err := h.bind(req.Extra)
	if err != nil {
		return nil, h.resourceErr(uri, err)
	}
	memory, hash, ok := parseURI(uri, false)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if _, err := h.memory(memory); err != nil {
		return nil, h.resourceErr(uri, err)
	}
	g, err := h.get(ctx, memory, hash)
	if err != nil {
		return nil, h.resourceErr(uri, err)
	}
	return jsonContents(uri, g)
}

func (h *handlers) readHistory(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	h, err := h.bind(req.Extra)
	if err != nil {
		return nil, h.resourceErr(uri, err)
	}
	memory, hash, ok := parseURI(uri, true)
	if !ok {
		return nil, sdk.ResourceNotFoundError(uri)
	}
	if _, err := h.memory(memory); err != nil {
		return nil, h.resourceErr(uri, err)
	}
	chain, err := h.chain(ctx, memory, hash)
	if err != nil {
		return nil, h.resourceErr(uri, err)
	}
	if chain == nil {
		chain = []lethe.Grain{}
	}
	return jsonContents(uri, HistoryOutput{Grains: chain})
}
