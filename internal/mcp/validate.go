package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// The SDK checks a tool call's arguments against the tool's input schema
// before the handler runs, and its messages quote the value that failed
// ("type: bob@example.com has type "string", want "number""). The server
// checks the arguments itself first (checkArgs, in a receiving middleware),
// with messages that name the field and the problem, never the value, and
// replaces any other error text the SDK would send (invalidArgs).

// inputSchemas holds each input type's schema, inferred once, so that the
// SDK's schema cache (by pointer) resolves it once too.
var inputSchemas sync.Map // reflect.Type -> *jsonschema.Schema

// inputSchema returns the input schema of In, adjusted by adjust the first
// time (adjust may be nil).
func inputSchema[In any](adjust func(*jsonschema.Schema)) *jsonschema.Schema {
	rt := reflect.TypeFor[In]()
	if s, ok := inputSchemas.Load(rt); ok {
		return s.(*jsonschema.Schema)
	}
	s, err := jsonschema.For[In](&jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("mcp: input schema of %v: %v", rt, err)) // a bug in an input type
	}
	if adjust != nil {
		adjust(s)
	}
	actual, _ := inputSchemas.LoadOrStore(rt, s)
	return actual.(*jsonschema.Schema)
}

// addTool adds a tool whose input schema is In's, adjusted by adjust, and
// records the schema for checkArgs.
func addTool[In, Out any](s *sdk.Server, inputs map[string]*jsonschema.Schema, t *sdk.Tool,
	adjust func(*jsonschema.Schema), h sdk.ToolHandlerFor[In, Out]) {
	t.InputSchema = inputSchema[In](adjust)
	inputs[t.Name] = t.InputSchema.(*jsonschema.Schema)
	sdk.AddTool(s, t, h)
}

// nullable lets the named properties of s be null, the empty value.
func nullable(names ...string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		for _, n := range names {
			p := s.Properties[n]
			if p == nil {
				panic("mcp: nullable: no property " + n)
			}
			if p.Type != "" {
				p.Types, p.Type = []string{"null", p.Type}, ""
			} else if !slices.Contains(p.Types, "null") {
				p.Types = append([]string{"null"}, p.Types...)
			}
		}
	}
}

// validateArgs is a receiving middleware that answers a tools/call whose
// arguments do not match its tool's input schema with a lethe error
// result (code invalid_argument, the field, no value), and replaces the
// text of any error result that is not the server's own (the SDK's
// validation and decoding messages) likewise. A call of a tool the server
// does not offer is unknownTool's error, not the SDK's, which quotes the
// name sent.
func validateArgs(inputs map[string]*jsonschema.Schema) sdk.Middleware {
	return func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			ctr, ok := req.(*sdk.CallToolRequest)
			if !ok || ctr.Params == nil {
				return next(ctx, method, req)
			}
			s := inputs[ctr.Params.Name]
			if s == nil {
				return nil, unknownTool()
			}
			if err := checkArgs(s, ctr.Params.Arguments); err != nil {
				return invalidArgs(err), nil
			}
			res, err := next(ctx, method, req)
			if r, ok := res.(*sdk.CallToolResult); ok && err == nil && r.IsError && !ownError(r) {
				return invalidArgs(grains.Errorf(lethe.CodeInvalidArgument,
					"the arguments do not match the tool's input schema")), nil
			}
			return res, err
		}
	}
}

// unknownTool is the answer to a tools/call naming a tool the server does
// not offer: the JSON-RPC error the SDK sends (invalid params), whose
// message and data are an ErrorInfo (code invalid_argument, field name)
// that does not quote the name, as a resource read's refusal is.
func unknownTool() error {
	b, _ := json.Marshal(ErrorInfo{Code: string(lethe.CodeInvalidArgument), Field: "name", Message: "no such tool",
		Hint: "see tools/list; the erasure tools need --allow-erase, the request tools --allow-requests"})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: string(b), Data: b}
}

// invalidArgs is the error result of arguments that checkArgs refused.
func invalidArgs(err *lethe.Error) *sdk.CallToolResult {
	err.Hint = "see the tool's input schema (tools/list)"
	var res sdk.CallToolResult
	res.SetError(&resultError{ErrorInfo{Code: string(err.Code), Field: err.Field, Message: err.Message, Hint: err.Hint}})
	return &res
}

// ownError reports whether an error result is the server's: its text is an
// ErrorInfo (or a refused forget's ForgetOutput), a JSON object with "ok".
func ownError(r *sdk.CallToolResult) bool {
	if len(r.Content) != 1 {
		return false
	}
	tc, ok := r.Content[0].(*sdk.TextContent)
	if !ok {
		return false
	}
	var v struct {
		OK *bool `json:"ok"`
	}
	return json.Unmarshal([]byte(tc.Text), &v) == nil && v.OK != nil && !*v.OK
}

// safeName matches the field names an error may name: a caller's unknown
// key is named only when it looks like a field name, not like data.
var safeName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// checkArgs checks args against s for the keywords that jsonschema.For
// infers (type, required, properties, additionalProperties, items).
func checkArgs(s *jsonschema.Schema, args json.RawMessage) *lethe.Error {
	var v any = map[string]any{}
	if len(bytes.TrimSpace(args)) > 0 {
		if err := repeatedKey(s, args); err != nil {
			return err
		}
		d := json.NewDecoder(bytes.NewReader(args))
		d.UseNumber()
		if err := d.Decode(&v); err != nil {
			return grains.Errorf(lethe.CodeInvalidArgument, "the arguments are not JSON")
		}
		if v == nil {
			v = map[string]any{}
		}
	}
	return checkValue(s, v, "")
}

// repeatedKey refuses a key repeated in one object of args (at any depth,
// metadata's included), as the HTTP API refuses it in a body: a map keeps
// the last value, where another reader of the same arguments (a log, a
// client's confirmation prompt) may take the first ("dry_run": true, ...,
// "dry_run": false forgot for real). The field named is the key's path
// as checkValue names it, by the schema s: a map's keys (metadata's) are
// data, so the path stops at the map. Malformed JSON is left to the
// decoder.
func repeatedKey(s *jsonschema.Schema, args json.RawMessage) *lethe.Error {
	type frame struct {
		obj    bool
		schema *jsonschema.Schema // nil once the path stops (a map, or no schema)
		path   string
		keys   map[string]bool
		key    string // an object's last key, naming the next value
		keyed  bool   // an object has read a key and awaits its value
		items  int    // an array's items so far
	}
	var stack []*frame
	d := json.NewDecoder(bytes.NewReader(args))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err != nil {
			return nil // the end, or a syntax error the decoder reports
		}
		var top *frame
		if n := len(stack); n > 0 {
			top = stack[n-1]
		}
		if k, ok := tok.(string); ok && top != nil && top.obj && !top.keyed {
			if top.keys[k] {
				path := top.path
				if top.schema != nil && top.schema.Properties[k] != nil {
					path = join(path, k)
				}
				if path == "" {
					return grains.Errorf(lethe.CodeInvalidArgument, "repeated key")
				}
				return grains.FieldError(lethe.CodeInvalidArgument, path, "repeated key")
			}
			top.keys[k], top.key, top.keyed = true, k, true
			continue
		}
		if dl, ok := tok.(json.Delim); ok && (dl == '}' || dl == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		// A value: a scalar, or an object or array that starts.
		var sub *jsonschema.Schema
		path := ""
		switch {
		case top == nil:
			sub = s
		case top.obj:
			top.keyed = false
			path = top.path
			if top.schema != nil && top.schema.Properties[top.key] != nil {
				sub, path = top.schema.Properties[top.key], join(top.path, top.key)
			}
		default:
			path = fmt.Sprintf("%s[%d]", top.path, top.items)
			top.items++
			if top.schema != nil {
				sub = top.schema.Items
			}
		}
		if dl, ok := tok.(json.Delim); ok {
			stack = append(stack, &frame{obj: dl == '{', schema: sub, path: path, keys: map[string]bool{}})
		}
	}
}

func checkValue(s *jsonschema.Schema, v any, path string) *lethe.Error {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) > 0 {
		got := jsonType(v)
		if !slices.Contains(types, got) && !(got == "integer" && slices.Contains(types, "number")) {
			if path == "" {
				return grains.Errorf(lethe.CodeInvalidArgument, "the arguments must be a JSON object")
			}
			if got == "integer" {
				got = "number"
			}
			return grains.FieldError(lethe.CodeInvalidArgument, path,
				fmt.Sprintf("wrong type: want %s, not %s", strings.Join(types, " or "), got))
		}
	}
	switch v := v.(type) {
	case map[string]any:
		for _, name := range s.Required {
			if _, ok := v[name]; !ok {
				return grains.FieldError(lethe.CodeInvalidArgument, join(path, name), "is required")
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p := s.Properties[k]; p != nil {
				if err := checkValue(p, v[k], join(path, k)); err != nil {
					return err
				}
				continue
			}
			ap := s.AdditionalProperties
			if ap == nil {
				continue
			}
			if ap.Not != nil {
				if safeName.MatchString(k) {
					return grains.FieldError(lethe.CodeInvalidArgument, join(path, k), "unknown field")
				}
				if path == "" {
					return grains.Errorf(lethe.CodeInvalidArgument, "unknown field")
				}
				return grains.FieldError(lethe.CodeInvalidArgument, path, "unknown field")
			}
			// A map's keys are data (metadata): the path stops at the map.
			if err := checkValue(ap, v[k], path); err != nil {
				return err
			}
		}
	case []any:
		if s.Items != nil {
			for i, e := range v {
				if err := checkValue(s.Items, e, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// jsonType is the JSON Schema type of a value decoded with UseNumber.
func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer"
		}
		if f, err := v.Float64(); err == nil && f == math.Trunc(f) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}
