package grains

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// jsonPayload is what encoding/json makes of b: the reference DecodePayload
// must agree with.
func jsonPayload(b []byte) (Payload, error) {
	var p Payload
	err := json.Unmarshal(b, &p)
	return p, err
}

func TestDecodePayload(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        string
		canonical bool // the hand parser takes it (else encoding/json does)
	}{
		{"empty", `{}`, true},
		{"all fields", `{"s":"ada","r":"knows","o":"bob","c":"text","u":"u1","t":["a","b"],"m":{"k":"v","x":"y"}}`, true},
		{"escapes", `{"c":"line\nbreak \"quoted\" back\\slash \u003chtml\u003e \u0026 tab\t\/"}`, true},
		{"control escapes", `{"c":"\b\f\r\u0001\u001f"}`, true},
		{"surrogate pair", `{"s":"\ud83d\ude00 smile"}`, true},
		{"raw unicode", `{"s":"Zoë 日本 😀","t":["ünï"]}`, true},
		{"line separators", `{"c":"a\u2028b\u2029c"}`, true},
		{"empty string", `{"s":""}`, true},
		{"lone surrogate", `{"s":"\ud800x"}`, false},
		{"reversed pair", `{"s":"\ude00\ud83d"}`, false},
		{"white space", `{ "s": "a" }`, false},
		{"keys out of order", `{"r":"a","s":"b"}`, false},
		{"repeated key", `{"s":"a","s":"b"}`, false},
		{"unknown key", `{"x":"a"}`, false},
		{"long key", `{"subject":"a"}`, false},
		{"null", `{"t":null}`, false},
		{"empty list", `{"t":[]}`, false},
		{"empty map", `{"m":{}}`, false},
		{"repeated map key", `{"m":{"k":"a","k":"b"}}`, false},
		{"uppercase hex", `{"s":"\u00E9"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := jsonPayload([]byte(tc.in))
			if err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			got, err := DecodePayload([]byte(tc.in))
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("DecodePayload = %#v, %v; want %#v", got, err, want)
			}
			if _, ok := decodeCanonical([]byte(tc.in)); ok != tc.canonical {
				t.Errorf("hand parser took it: %v, want %v", ok, tc.canonical)
			}
		})
	}
	for _, bad := range []string{``, `{`, `{"s":"a"`, `{"s":"a"}x`, `{"s":1}`, `{"s":"a\x01"}`, `{"s":"\x"}`, `[]`, `{"t":["a",]}`} {
		if _, err := DecodePayload([]byte(bad)); ErrorCode(err) != CodeInternal {
			t.Errorf("DecodePayload(%q) = %v, want an internal error", bad, err)
		}
	}
}

// Every encoding Payload.Encode writes takes the hand parser and decodes
// to the payload encoded.
func TestDecodePayloadRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "<", ">", "&", "é", "日", "😀", "\u2028", "\u2029", "\ufffd", "\x7f"}
	str := func() string {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := range 5000 {
		p := Payload{Subject: str(), Relation: str(), Object: str(), Content: str(), UserID: str()}
		for range r.IntN(3) {
			p.Tags = append(p.Tags, str())
		}
		if n := r.IntN(3); n > 0 {
			p.Metadata = map[string]string{}
			for range n {
				p.Metadata[str()] = str()
			}
		}
		enc := p.Encode()
		got, ok := decodeCanonical(enc)
		want, err := jsonPayload(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("case %d: %s: hand parser %v %#v, encoding/json %#v", i, enc, ok, got, want)
		}
	}
}

// Whatever the hand parser accepts, encoding/json accepts and decodes to
// the same payload.
func FuzzDecodePayload(f *testing.F) {
	for _, s := range []string{`{}`, `{"s":"a","t":["x"],"m":{"k":"v"}}`, `{"c":"\ud83d\ude00\n"}`, `{"s":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := decodeCanonical(b)
		if !ok {
			return
		}
		want, err := jsonPayload(b)
		if err != nil {
			t.Fatalf("hand parser took %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: hand parser %#v, encoding/json %#v", b, got, want)
		}
	})
}

func BenchmarkDecodePayload(b *testing.B) {
	enc := Payload{Subject: "subject-1234", Relation: "relation", Object: "object-123456",
		Content: "grain number 123456 with some text to make it realistic", UserID: "user-123", Tags: []string{"bench"}}.Encode()
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodePayload(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := jsonPayload(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// NormalizeValue's shortcut for values already normal agrees with the
// full normalisation.
func TestNormalizeValue(t *testing.T) {
	for _, v := range []string{"", "ada", "ada lovelace", "Ada", " ada", "ada ", "ada  lovelace", "ada\tl", "zoë", "ZOË",
		"a\nb", "x\u00a0y", "\u2003a", "a\vb", "a\fb", "a\rb", " ", "  ", "a b c", "ab-c_d.e:f"} {
		if got, want := NormalizeValue(v), strings.ToLower(strings.Join(strings.Fields(v), " ")); got != want {
			t.Errorf("NormalizeValue(%q) = %q, want %q", v, got, want)
		}
	}
}

func FuzzNormalizeValue(f *testing.F) {
	f.Add("Ada  Lovelace ")
	f.Fuzz(func(t *testing.T, v string) {
		if got, want := NormalizeValue(v), strings.ToLower(strings.Join(strings.Fields(v), " ")); got != want {
			t.Fatalf("NormalizeValue(%q) = %q, want %q", v, got, want)
		}
	})
}
