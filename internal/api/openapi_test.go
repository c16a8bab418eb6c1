package api

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// TestOpenAPIMatchesRoutes walks the gin routes and the OpenAPI document:
// every route is documented with its method, and every documented
// operation is routed.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi = %q, want 3.x", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options":
				documented[strings.ToUpper(method)+" "+path] = true
			case "parameters", "summary", "description":
			default:
				t.Errorf("%s: unexpected key %q", path, method)
			}
		}
	}
	param := regexp.MustCompile(`[:*]([A-Za-z_]+)`)
	routed := map[string]bool{}
	for _, r := range New(Config{}).Engine().Routes() {
		routed[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	for k := range routed {
		if !documented[k] {
			t.Errorf("route %s is not in openapi.json", k)
		}
	}
	for k := range documented {
		if !routed[k] {
			t.Errorf("openapi.json documents %s, which is not routed", k)
		}
	}
}

// TestOpenAPIRefs checks that every $ref resolves and operation ids are
// unique.
func TestOpenAPIRefs(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var ids []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if !resolves(doc, ref) {
					t.Errorf("$ref %s does not resolve", ref)
				}
			}
			if id, ok := v["operationId"].(string); ok {
				ids = append(ids, id)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	slices.Sort(ids)
	if c := slices.Compact(slices.Clone(ids)); len(c) != len(ids) {
		t.Errorf("duplicate operationId among %v", ids)
	}
}

func resolves(doc map[string]any, ref string) bool {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var cur any = doc
	for _, part := range strings.Split(p, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

// TestCodesDocumented checks that the table of codes in docs/api.md, the
// Error schema's enum in openapi.json and the status table are one set of
// codes, with the same status in the docs as in the table.
func TestCodesDocumented(t *testing.T) {
	md, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[lethe.Code]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([0-9]{3}) \\|").FindAllSubmatch(md, -1) {
		status, _ := strconv.Atoi(string(m[2]))
		documented[lethe.Code(m[1])] = status
	}
	for code, status := range statuses {
		got, ok := documented[code]
		switch {
		case !ok:
			t.Errorf("code %q is not in docs/api.md's table", code)
		case got != status:
			t.Errorf("docs/api.md gives %q status %d, the table %d", code, got, status)
		}
	}
	for code := range documented {
		if _, ok := statuses[code]; !ok {
			t.Errorf("docs/api.md documents %q, which the status table does not know", code)
		}
	}

	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Code struct {
							Enum []lethe.Code `json:"enum"`
						} `json:"code"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	enum := doc.Components.Schemas.Error.Properties.Code.Enum
	got := slices.Sorted(slices.Values(enum))
	want := slices.Sorted(maps.Keys(statuses))
	if !slices.Equal(got, want) {
		t.Errorf("openapi.json's Error.code enum = %v, want the status table's codes %v", got, want)
	}
}

// TestHookEventTypesDocumented checks that docs/api.md (Hooks) and the
// HookRequest schema of openapi.json list exactly the event types a hook
// receives (lethe.HookEventTypes), the schema with "*" as well.
func TestHookEventTypesDocumented(t *testing.T) {
	var want []string
	for _, typ := range lethe.HookEventTypes() {
		want = append(want, string(typ))
	}
	slices.Sort(want)

	md, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(md), "A hook sends a memory's audit events of the types it lists")
	sec, _, _ = strings.Cut(sec, "(The KEK's")
	var documented []string
	for _, m := range regexp.MustCompile("`([a-z]+\\.[a-z]+)`").FindAllStringSubmatch(sec, -1) {
		documented = append(documented, m[1])
	}
	slices.Sort(documented)
	if !slices.Equal(documented, want) {
		t.Errorf("docs/api.md, Hooks, lists %v, want %v", documented, want)
	}

	var doc struct {
		Components struct {
			Schemas struct {
				HookRequest struct {
					Properties struct {
						Events struct {
							Items struct {
								Enum []string `json:"enum"`
							} `json:"items"`
						} `json:"events"`
					} `json:"properties"`
				} `json:"HookRequest"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	enum := slices.Sorted(slices.Values(doc.Components.Schemas.HookRequest.Properties.Events.Items.Enum))
	if wantEnum := slices.Sorted(slices.Values(append(slices.Clone(want), "*"))); !slices.Equal(enum, wantEnum) {
		t.Errorf("openapi.json's HookRequest.events enum = %v, want %v", enum, wantEnum)
	}
}

// TestUserIDPatternIsTheRule holds the document's user_id pattern to the
// server's rule (grains.ValidateUserID: no NUL, no white space at either
// end, by unicode.IsSpace) for every white-space rune of Unicode, at the
// start, at the end, alone and inside, and NUL. The pattern spells its
// characters out: `\s` means [\t\n\f\r ] to Go's regexp (kin-openapi) and
// more to ECMAScript's (every JavaScript validator), and neither is
// unicode.IsSpace, so a client's validator and the server disagreed (a
// vertical tab passed the document and was refused).
func TestUserIDPatternIsTheRule(t *testing.T) {
	patterns := map[string]bool{}
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			if p, ok := v["pattern"].(string); ok && key == "user_id" {
				patterns[p] = true
			}
			for k, x := range v {
				walk(x, k)
			}
		case []any:
			for _, x := range v {
				walk(x, key)
			}
		}
	}
	var doc any
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	walk(doc, "")
	if len(patterns) == 0 {
		t.Fatal("no user_id pattern in the document")
	}
	var spaces []rune
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.IsSpace(r) {
			spaces = append(spaces, r)
		}
	}
	for p := range patterns {
		if strings.Contains(p, `\s`) || strings.Contains(p, `\S`) {
			t.Errorf("pattern %q: \\s differs between regular expression engines; spell the characters out", p)
		}
		re := regexp.MustCompile(p)
		ids := []string{"u", "u 1", "\x00", "u\x00", "a\x00b"}
		for _, s := range spaces {
			c := string(s)
			ids = append(ids, c, c+"u", "u"+c, "u"+c+"v", c+c)
		}
		for _, id := range ids {
			server := grains.ValidateUserID(id) == nil
			if document := re.MatchString(id); document != server {
				t.Errorf("pattern %q: user id %+q: the document says %v, the server %v", p, id, document, server)
			}
		}
	}
}
