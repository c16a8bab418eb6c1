package mcp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/mcp"
)

// TestRepeatedArgument: a key repeated in one object of a tool call's
// arguments is refused (invalid_argument, naming it), as in a body of the
// HTTP API, and the call changes nothing. It was read as its last value,
// so {"dry_run": true, ..., "dry_run": false} forgot for real what a
// reader of its first value took for a preview.
func TestRepeatedArgument(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	cs := connect(t, mcp.Config{Library: db})
	h, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tool, args, field string }{
		{"forget", `{"hash": "` + h + `", "dry_run": true, "dry_run": false}`, "dry_run"},
		{"forget", `{"hash": "` + h + `", "hash": "` + h + `"}`, "hash"},
		{"recall", `{"subject": "alice", "subject": "bob"}`, "subject"},
		{"add", `{"type": "fact", "subject": "carol", "metadata": {"k": "1", "k": "2"}}`, "metadata"},
		{"add", `{"type": "fact", "subject": "carol", "tags": ["a"], "metadata": {"x": {"k": 1, "k": 2}}}`, "metadata"},
	} {
		e := failed(t, cs, c.tool, json.RawMessage(c.args))
		if e.Code != "invalid_argument" || e.Field != c.field || e.Message != "repeated key" {
			t.Errorf("%s %s: %+v, want invalid_argument %q on field %s", c.tool, c.args, e, "repeated key", c.field)
		}
	}
	if _, err := db.Get(ctx, "default", h); err != nil {
		t.Errorf("the grain after refused forgets: %v", err)
	}
	if p, err := db.Recall(ctx, lethe.Query{Subject: "carol"}); err != nil || len(p.Grains) != 0 {
		t.Errorf("refused adds wrote %v (%v)", p, err)
	}
}

// TestRepeatedMessageKey: a key repeated in one object of a JSON-RPC
// message, outside a tool call's arguments (which TestRepeatedArgument
// covers), is refused on both transports before the server reads it, with
// a JSON-RPC error naming the key's path (invalid request for a key of the
// message, invalid params within params), and nothing runs. The SDK read
// the message into structs, last value winning, so "name": "recall",
// "name": "forget" forgot what a reader of the first name took for a
// recall.
func TestRepeatedMessageKey(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	h, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea"})
	if err != nil {
		t.Fatal(err)
	}
	forget := `{"hash": "` + h + `"}`
	cases := []struct {
		line  string
		code  int64
		field string
		id    any // the reply's id: float64 or nil
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recall","name":"forget","arguments":` + forget + `}}`,
			jsonrpc.CodeInvalidParams, "params.name", 1.0},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"forget","arguments":{"hash":"` + strings.Repeat("0", 64) + `"},"arguments":` + forget + `}}`,
			jsonrpc.CodeInvalidParams, "params.arguments", 2.0},
		{`{"jsonrpc":"2.0","id":3,"method":"ping","method":"tools/call","params":{"name":"forget","arguments":` + forget + `}}`,
			jsonrpc.CodeInvalidRequest, "method", 3.0},
		{`{"jsonrpc":"2.0","id":4,"params":{"name":"forget","arguments":` + forget + `},"params":{"name":"forget","arguments":` + forget + `},"method":"tools/call"}`,
			jsonrpc.CodeInvalidRequest, "params", 4.0},
		{`{"jsonrpc":"2.0","id":5,"id":6,"method":"tools/call","params":{"name":"forget","arguments":` + forget + `}}`,
			jsonrpc.CodeInvalidRequest, "id", nil},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"forget","arguments":` + forget + `,"_meta":{"progressToken":1,"progressToken":2}}}`,
			jsonrpc.CodeInvalidParams, "params._meta.progressToken", 7.0},
		{`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"forget","arguments":` + forget + `,"_meta":{"mary@example.com":1,"mary@example.com":2}}}`,
			jsonrpc.CodeInvalidParams, "params._meta", 8.0},
		{`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"a","uri":"` + mcp.GrainURI("default", h) + `"}}`,
			jsonrpc.CodeInvalidParams, "params.uri", 9.0},
		{`[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"recall","name":"forget","arguments":` + forget + `}}]`,
			jsonrpc.CodeInvalidParams, "[1].params.name", nil},
	}
	check := func(t *testing.T, line string, reply []byte, code int64, field string, id any) {
		t.Helper()
		var r struct {
			ID    any            `json:"id"`
			Error *jsonrpc.Error `json:"error"`
		}
		if err := json.Unmarshal(reply, &r); err != nil || r.Error == nil || r.Error.Code != code || r.ID != id {
			t.Errorf("%s: reply %s, want error %d with id %v", line, reply, code, id)
			return
		}
		var info mcp.ErrorInfo
		if err := json.Unmarshal(r.Error.Data, &info); err != nil || info.Code != "invalid_argument" || info.Field != field || info.Message != "repeated key" {
			t.Errorf("%s: error data %s, want invalid_argument %q on field %s", line, r.Error.Data, "repeated key", field)
		}
		if strings.Contains(string(reply), "mary@") {
			t.Errorf("%s: reply quotes a key that is not a field name: %s", line, reply)
		}
	}

	t.Run("http", func(t *testing.T) {
		hh, err := mcp.NewHandler(mcp.Config{Library: db}, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(hh)
		defer srv.Close()
		for _, c := range cases {
			status, b := postRaw(t, srv.URL, c.line)
			if status != http.StatusBadRequest {
				t.Errorf("%s: %d %s, want 400", c.line, status, b)
			}
			check(t, c.line, b, c.code, c.field, c.id)
		}
	})

	t.Run("stdio", func(t *testing.T) {
		s, err := mcp.New(mcp.Config{Library: db})
		if err != nil {
			t.Fatal(err)
		}
		ss := startStdio(t, ctx, s)
		ss.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"v0"}}}`)
		if r := ss.next("initialize"); !strings.Contains(string(r), `"result"`) {
			t.Fatalf("initialize: %s", r)
		}
		ss.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		for _, c := range cases {
			if err := ss.send(c.line); err != nil {
				t.Fatalf("%s: write: %v (the session ended)", c.line, err)
			}
			check(t, c.line, ss.next(c.line), c.code, c.field, c.id)
		}
		// A notification is never answered, its refusal included: the
		// ping after it gets the next reply. One with a repeated key of
		// the message itself is an invalid request, answered with a null
		// id, as the HTTP transport answers both.
		for _, n := range []string{
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}`,
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"_meta":{"a":1,"a":2}}}`,
		} {
			// Both lines in one write, apart from the reads: a reply to
			// the notification must not block the ping's line.
			go ss.send(n + "\n" + `{"jsonrpc":"2.0","id":"after","method":"ping"}`)
			if r := ss.next(n); !strings.Contains(string(r), `"id":"after"`) || !strings.Contains(string(r), `"result"`) {
				t.Errorf("%s: the next reply is %s, want the ping's result (no reply to a notification)", n, r)
			}
		}
		n := `{"jsonrpc":"2.0","method":"notifications/cancelled","method":"tools/call","params":{"requestId":1}}`
		go ss.send(n)
		var r struct {
			ID    any            `json:"id"`
			Error *jsonrpc.Error `json:"error"`
		}
		if b := ss.next(n); json.Unmarshal(b, &r) != nil || r.Error == nil || r.Error.Code != jsonrpc.CodeInvalidRequest || r.ID != nil {
			t.Errorf("%s: reply %s, want invalid request with a null id", n, b)
		}
		ss.end()
	})

	if _, err := db.Get(ctx, "default", h); err != nil {
		t.Errorf("the grain after refused messages: %v", err)
	}
}
