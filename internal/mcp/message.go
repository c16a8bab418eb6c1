package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/lethe-io/lethe"
)

// A key repeated in one object of a JSON-RPC message is ambiguous: the SDK
// decodes the message into structs and maps, last value winning, where
// another reader of the same message (a proxy, a log, a client's
// confirmation) may take the first, so that {"name": "recall", "name":
// "forget"} runs a tool that reader never saw. Both transports refuse such
// a message before the server reads it (repeatedInMessage), as the HTTP
// API refuses a key repeated in a body. The keys of a tool call's
// arguments are left to the tool's own check (repeatedKey), which names
// them by the tool's schema and answers with an error result.

// messageKey matches the keys a refusal may name: protocol field names,
// never something that looks like data.
var messageKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// repeatedInMessage returns the JSON-RPC error for a message (or a batch)
// with a key repeated in one of its objects, and the id to answer it with
// (null when the id itself is repeated, or for a batch), or a nil error.
// A key of the message itself is an invalid request (-32600), a key within
// its params invalid params (-32602); either error's message and data are
// an ErrorInfo (code invalid_argument, the key's path as field, "repeated
// key") that quotes no value. body must be JSON-RPC (jsonrpcProblem "").
func repeatedInMessage(body []byte) (any, *jsonrpc.Error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, nil
	}
	batch := body[0] == '['
	var id any
	var methods []string // each message's method, to tell a tool call
	if batch {
		var raws []json.RawMessage
		if json.Unmarshal(body, &raws) != nil {
			return nil, nil
		}
		for _, raw := range raws {
			methods = append(methods, method(raw))
		}
	} else {
		methods = []string{method(body)}
		if msg, err := jsonrpc.DecodeMessage(body); err == nil {
			switch m := msg.(type) {
			case *jsonrpc.Request:
				id = m.ID.Raw()
			case *jsonrpc.Response:
				id = m.ID.Raw()
			}
		}
	}
	skip := func(path []seg) bool {
		i := 0
		if batch {
			if len(path) == 0 {
				return false
			}
			i, path = path[0].index, path[1:]
		}
		return len(path) == 2 && path[0].key == "params" && path[1].key == "arguments" &&
			i < len(methods) && methods[i] == "tools/call"
	}
	path, err := firstRepeat(json.NewDecoder(bytes.NewReader(body)), nil, skip)
	if err != nil || path == nil {
		return nil, nil
	}
	rel := path
	if batch {
		rel = path[1:]
		id = nil
	}
	code := int64(jsonrpc.CodeInvalidParams)
	if len(rel) == 1 {
		code = jsonrpc.CodeInvalidRequest
		if rel[0].key == "id" {
			id = nil
		}
	}
	b, _ := json.Marshal(ErrorInfo{Code: string(lethe.CodeInvalidArgument), Field: pathName(path), Message: "repeated key",
		Hint: "send each key of a JSON object once"})
	return id, &jsonrpc.Error{Code: code, Message: string(b), Data: b}
}

// method is the method of a JSON-RPC message, or "".
func method(raw []byte) string {
	var m struct {
		Method string `json:"method"`
	}
	json.Unmarshal(raw, &m)
	return m.Method
}

// seg is one step of a path into a JSON value: an object's key, or an
// array's index (index -1 for a key).
type seg struct {
	key   string
	index int
}

// firstRepeat reads one JSON value from d, at path, and returns the path of
// the first key repeated in one of its objects, or nil. It does not look
// into a value at a path skip accepts.
func firstRepeat(d *json.Decoder, path []seg, skip func([]seg) bool) ([]seg, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	open, ok := tok.(json.Delim)
	if !ok {
		return nil, nil
	}
	if skip(path) {
		for depth := 1; depth > 0; {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			if dl, ok := tok.(json.Delim); ok {
				if dl == '{' || dl == '[' {
					depth++
				} else {
					depth--
				}
			}
		}
		return nil, nil
	}
	seen := map[string]bool{}
	for i := 0; d.More(); i++ {
		s := seg{index: i}
		if open == '{' {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			s.key, s.index = tok.(string), -1
			if seen[s.key] {
				return append(path[:len(path):len(path)], s), nil
			}
			seen[s.key] = true
		}
		if p, err := firstRepeat(d, append(path[:len(path):len(path)], s), skip); p != nil || err != nil {
			return p, err
		}
	}
	_, err = d.Token() // the closing delimiter
	return nil, err
}

// pathName names a path as a field ("params.arguments", "[1].id"), up to
// the first key that does not look like a field name.
func pathName(path []seg) string {
	var b strings.Builder
	for _, s := range path {
		switch {
		case s.index >= 0:
			fmt.Fprintf(&b, "[%d]", s.index)
		case messageKey.MatchString(s.key):
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		default:
			return b.String()
		}
	}
	return b.String()
}
