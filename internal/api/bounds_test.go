package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// batchBody builds {"grains": [...]} of n grains with tags tags each,
// followed by tail (inside the array: "" or malformed JSON).
func batchBody(n, tags int, tail string) []byte {
	var sb strings.Builder
	sb.WriteString(`{"grains": [`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"type":"fact","subject":"s%d","tags":[`, i)
		for j := range tags {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `"t%d"`, j)
		}
		sb.WriteString(`]}`)
	}
	sb.WriteString(tail + `]}`)
	return []byte(sb.String())
}

// TestAddBoundsBeforeDecoding sends adds over a bound (too many grains,
// too many tags in one grain or in the batch, a body over its limit), each
// also with malformed JSON after the bound is passed: the answer is the
// bound's code, never the decoder's (the body is not decoded past the
// bound), never a 500, and the store holds nothing afterwards. A refused
// batch allocates a small multiple of its body, not its decoded form.
func TestAddBoundsBeforeDecoding(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		tok := f.token("writer,reader", []string{"*"})
		big := strings.Repeat("x", 2<<20)
		cases := []struct {
			name   string
			body   []byte
			status int
			code   string
			field  string
		}{
			{"10001 grains", batchBody(10001, 0, ""), 400, "too_large", "grains"},
			{"10001 grains then garbage", batchBody(10001, 0, `,{"type": nope`), 400, "too_large", "grains"},
			{"65 tags in grain 5", batchBody(5, 0, `,{"tags":[`+strings.Repeat(`"a",`, 64)+`"a"]}`), 400, "too_large", "grains[5].tags"},
			{"65 tags then garbage", batchBody(1, 0, `,{"tags":[`+strings.Repeat(`"a",`, 65)+`"a" x]}`), 400, "too_large", "grains[1].tags"},
			{"65,600 tags in a batch", batchBody(1025, 64, ""), 400, "too_large", "grains"},
			{"65,600 tags then garbage", batchBody(1025, 64, `,{"type": nope`), 400, "too_large", "grains"},
			{"one grain of 65 tags", []byte(`{"type":"fact","subject":"s","tags":[` + strings.Repeat(`"a",`, 64) + `"a"], "bad": nope}`), 400, "too_large", "tags"},
			{"one grain over 1 MiB", []byte(`{"type":"fact","content":"` + big + `", "bad": nope}`), 413, "payload_too_large", ""},
			{"a batch over 16 MiB", []byte(`{"grains":[{"type":"fact","content":"` + strings.Repeat(big, 9) + `"}]}`), 413, "payload_too_large", ""},
		}
		for _, c := range cases {
			a := f.call(tok, "POST", "/api/memories/bounds/grains", c.body)
			var e struct {
				Code  string `json:"code"`
				Field string `json:"field"`
			}
			a.decode(t, &e)
			if a.status != c.status || e.Code != c.code || e.Field != c.field {
				t.Errorf("%s: %d %.300s, want %d %s field %q", c.name, a.status, a.body, c.status, c.code, c.field)
			}
		}
		page, err := f.db.Recall(t.Context(), lethe.Query{Memory: "bounds", IncludeArchived: true, IncludeSuperseded: true})
		if err != nil || len(page.Grains) != 0 {
			t.Fatalf("the store changed: %v, %v", page, err)
		}

		// Memory: a refused batch of 65,600 tags costs a few times its
		// body (read, scanned), not its decoded grains.
		// The handler alone (the fixture's contract check decodes bodies).
		h := api.New(api.Config{Library: f.db, Tokens: f.tokens})
		body := batchBody(1025, 64, "")
		serve := func() *httptest.ResponseRecorder {
			r := httptest.NewRequest("POST", "/api/memories/bounds/grains", bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+tok)
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		serve() // warm up
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		w := serve()
		runtime.ReadMemStats(&m1)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"too_large"`) {
			t.Fatalf("handler: %d %s", w.Code, w.Body)
		}
		if got := m1.TotalAlloc - m0.TotalAlloc; got > uint64(4*len(body))+1<<20 {
			t.Errorf("a refused batch of %d bytes allocated %d bytes", len(body), got)
		} else {
			t.Logf("a refused batch of %d bytes allocated %d bytes", len(body), got)
		}
	})
}
