package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheckJSON checks what checkJSON promises: a body it lets through
// decodes without encoding/json repairing anything. Every string decoded
// holds U+FFFD only if the body spelled one, and every object keeps all its
// keys (none repeated, so none lost).
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{
		`{"subject":"a"}`, `{"subject":"a","Subject":"b"}`, `{"a":"u\xc3"}`, `{"a":"\ud800"}`,
		`{"a":"\ud83d\ude00"}`, `{"metadata":{"K":"1","k":"2"}}`, `{"a":{"a":1},"b":[{"a":1,"a":2}]}`,
		`{"a":"\\ud800"}`, `{"a":"\ufffd"}`, `[{"x":1},{"x":1}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if checkJSON(b) != nil || !json.Valid(b) {
			return
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return
		}
		spelled := bytes.Contains(b, []byte("\xef\xbf\xbd")) || strings.Contains(strings.ToLower(string(b)), `\ufffd`)
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case string:
				if strings.ContainsRune(v, utf8.RuneError) && !spelled {
					t.Fatalf("checkJSON let through %q, which decodes with U+FFFD", b)
				}
			case map[string]any:
				for k, x := range v {
					walk(k)
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(v)
		if got, want := countMapKeys(v), countKeys(t, b); got != want {
			t.Fatalf("checkJSON let through %q: %d keys in the body, %d after decoding", b, want, got)
		}
	})
}

func countMapKeys(v any) int {
	n := 0
	switch v := v.(type) {
	case map[string]any:
		n += len(v)
		for _, x := range v {
			n += countMapKeys(x)
		}
	case []any:
		for _, x := range v {
			n += countMapKeys(x)
		}
	}
	return n
}

// countKeys counts the keys of every object in b, from the token stream.
func countKeys(t *testing.T, b []byte) int {
	type frame struct{ obj, wantKey bool }
	var stack []*frame
	done := func() {
		if n := len(stack); n > 0 && stack[n-1].obj {
			stack[n-1].wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		switch tok := tok.(type) {
		case json.Delim:
			if tok == '{' || tok == '[' {
				stack = append(stack, &frame{obj: tok == '{', wantKey: tok == '{'})
				continue
			}
			stack = stack[:len(stack)-1]
			done()
		case string:
			if k := len(stack); k > 0 && stack[k-1].obj && stack[k-1].wantKey {
				n++
				stack[k-1].wantKey = false
				continue
			}
			done()
		default:
			done()
		}
	}
}
