package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
)

// FuzzCheckJSON checks what checkJSON promises: a body it lets through
// decodes without encoding/json repairing anything; and that its scan
// (checkKeysFast) answers as encoding/json's tokens would. Every string decoded
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
		for _, nullable := range [][]string{nil, {"a", "tags"}} {
			if got, ok := checkKeysFast(b, nullable); ok && fmt.Sprint(got) != fmt.Sprint(checkKeys(b, nullable)) {
				t.Fatalf("%q: checkKeysFast %v, checkKeys %v", b, got, checkKeys(b, nullable))
			}
		}
		if checkJSON(b, nil) != nil || !json.Valid(b) {
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

// checkKeysFast answers a body only as checkKeys (encoding/json's tokens)
// would: the same error, or none. Bodies are drawn with repeated keys,
// keys in capitals, metadata objects (direct and nested), escaped keys,
// numbers and literals right and wrong, and syntax errors spliced in:
// missing colons and commas, trailing commas, data after the value.
func TestCheckKeysFastAgreesWithTokens(t *testing.T) {
	keys := rapid.SampledFrom([]string{"a", "b", "subject", "Subject", "metadata", "é", "sub\\u006aect", "", "x_y", "tags"})
	scalars := rapid.SampledFrom([]string{`"s"`, `"\u00e9\n"`, `""`, `"a\"b"`, `0`, `-1.5e3`, `12`, `true`, `false`, `null`,
		`01`, `-`, `1.`, `1e`, `tru`, `"\x"`, "\"\x01\""})
	var value func(t *rapid.T, depth int) string
	value = func(t *rapid.T, depth int) string {
		kind := rapid.IntRange(0, 2).Draw(t, "kind")
		if depth > 3 {
			kind = 0
		}
		switch kind {
		case 1:
			n := rapid.IntRange(0, 5).Draw(t, "members")
			parts := make([]string, n)
			for i := range parts {
				parts[i] = `"` + keys.Draw(t, "key") + `":` + value(t, depth+1)
			}
			return "{" + strings.Join(parts, ",") + "}"
		case 2:
			n := rapid.IntRange(0, 4).Draw(t, "items")
			parts := make([]string, n)
			for i := range parts {
				parts[i] = value(t, depth+1)
			}
			return "[" + strings.Join(parts, " , ") + "]"
		}
		return scalars.Draw(t, "scalar")
	}
	fast := 0
	rapid.Check(t, func(t *rapid.T) {
		body := value(t, 0)
		if rapid.Bool().Draw(t, "splice") {
			at := rapid.IntRange(0, len(body)).Draw(t, "at")
			bit := rapid.SampledFrom([]string{",", ":", "}", "]", "{", "[", " ", `"`, `{"a":1,"a":2}`, "x"}).Draw(t, "bit")
			body = body[:at] + bit + body[at:]
		}
		if rapid.IntRange(0, 9).Draw(t, "trailing") == 0 {
			body += " " + value(t, 0)
		}
		b := []byte(body)
		var nullable []string
		if rapid.Bool().Draw(t, "nullable") {
			nullable = []string{"a", "subject", "tags"}
		}
		got, ok := checkKeysFast(b, nullable)
		if !ok {
			return
		}
		fast++
		if want := checkKeys(b, nullable); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: checkKeysFast %v, checkKeys %v", body, got, want)
		}
	})
	if fast < 20 {
		t.Errorf("checkKeysFast answered %d bodies: the test compares too little", fast)
	}
	// What a random body rarely holds: metadata within metadata, and
	// objects within a metadata object (their keys are checked).
	for _, body := range []string{`{"metadata":{"metadata":{"Subject":1}}}`, `{"metadata":{"K":[{"K":1}]}}`,
		`[{"metadata":{"A":1}}]`, `{"a":{"metadata":{"B":1}}}`, `{"metadata":{"x":{"C":1}}}`, `{"metadata":{"A":1,"A":2}}`,
		`{"metadata":{"K":null}}`, `{"a":[{"b":[1,null]}]}`, `{"metadata":{"x":[{"y":null}]}}`, `null`, `[null]`} {
		got, ok := checkKeysFast([]byte(body), nil)
		if want := checkKeys([]byte(body), nil); !ok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: checkKeysFast %v (answered %v), checkKeys %v", body, got, ok, want)
		}
	}
}

// A batch of grains without escaped keys is checked by the scan, not by
// encoding/json's tokens.
func BenchmarkCheckJSON(b *testing.B) {
	var gs []map[string]any
	for i := range 1000 {
		gs = append(gs, map[string]any{"type": "fact", "subject": fmt.Sprintf("subject-%d", i), "relation": "rel-3",
			"object": fmt.Sprintf("object-%d", i), "scope": "load/s2", "user_id": fmt.Sprintf("user-%d", i), "tags": []string{"t48"},
			"importance": 0.5, "content": "some words of content here", "metadata": map[string]string{"Source": "load"}})
	}
	batch, _ := json.Marshal(map[string]any{"grains": gs})
	for _, c := range []struct {
		name string
		body []byte
	}{{"batch-1000", batch}, {"recall", []byte(`{"subject":"subject-10","limit":10}`)}} {
		b.Run(c.name+"/scan", func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if err, ok := checkKeysFast(c.body, nil); err != nil || !ok {
					b.Fatal(err, ok)
				}
			}
		})
		b.Run(c.name+"/tokens", func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if err := checkKeys(c.body, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeStrictNull checks that JSON null is refused, naming its path,
// wherever the request does not allow it, and allowed where it does (a
// supersede's settable fields), whichever of checkKeysFast and checkKeys
// reads the body; and that an unknown field or a wrong type elsewhere is
// answered first, as without the null.
func TestDecodeStrictNull(t *testing.T) {
	many := `{`
	for i := range 40 { // more keys than checkKeysFast compares
		many += fmt.Sprintf(`"k%d":"v",`, i)
	}
	many = strings.TrimSuffix(many, ",") + `,"limit":null}`
	type loose struct {
		Limit int               `json:"limit"`
		Tags  []string          `json:"tags"`
		Meta  map[string]string `json:"metadata"`
		G     []struct {
			Tags []string `json:"tags"`
		} `json:"grains"`
	}
	cases := []struct {
		name, body string
		v          func() any
		wantField  string // "" and wantMsg "": no error
		wantMsg    string
	}{
		{"body", `null`, func() any { return &RecallRequest{} }, "", "the body must be an object, not null"},
		{"field", `{"limit":null}`, func() any { return &RecallRequest{} }, "limit", "null"},
		{"item", `{"grains":[{"tags":["a",null]}]}`, func() any { return &loose{} }, "grains[0].tags[1]", "null"},
		{"metadata value", `{"metadata":{"Key":null}}`, func() any { return &loose{} }, "metadata", "null"},
		{"escaped key", `{"lim\u0069t":null}`, func() any { return &loose{} }, "limit", "null"},
		{"many keys", many, func() any { return &map[string]any{} }, "limit", "null"},
		{"unknown field first", `{"limit":null,"colour":1}`, func() any { return &RecallRequest{} }, "colour", "unknown field"},
		{"wrong type first", `{"limit":null,"tags":"a"}`, func() any { return &RecallRequest{} }, "tags", "wrong type"},
		{"supersede", `{"blob_hash":"` + strings.Repeat("a", 64) + `","tags":null,"content":null,"pinned":null}`,
			func() any { return &SupersedeRequest{} }, "", ""},
		{"supersede created_at", `{"blob_hash":"` + strings.Repeat("a", 64) + `","created_at":null}`,
			func() any { return &SupersedeRequest{} }, "created_at", "null"},
		{"supersede nested", `{"blob_hash":"` + strings.Repeat("a", 64) + `","tags":[null]}`,
			func() any { return &SupersedeRequest{} }, "tags[0]", "null"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := decodeStrict([]byte(c.body), c.v())
			if c.wantMsg == "" {
				if err != nil {
					t.Fatalf("%s: %v, want no error", c.body, err)
				}
				return
			}
			var le *lethe.Error
			if !errors.As(err, &le) || le.Code != lethe.CodeInvalidArgument || le.Field != c.wantField || !strings.Contains(le.Message, c.wantMsg) {
				t.Fatalf("%s: %#v, want invalid_argument on %q saying %q", c.body, err, c.wantField, c.wantMsg)
			}
		})
	}
}
