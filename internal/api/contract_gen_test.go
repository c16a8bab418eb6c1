package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/mattn/go-sqlite3"
	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
)

// TestContractByGeneration generates requests from openapi.json, as a
// schema-driven negative fuzzer (schemathesis) does, and sends them through
// the contract check to a real server, on SQLite and on PostgreSQL, with
// an admin token for every memory (authorization is never what refuses). Each example draws
// an operation with a JSON body or query parameters, a request the
// document accepts (built from its schemas, with the example's hashes,
// subjects, users and scopes so that it reaches the store), and 4 to 12
// mutations of it, each one change: a property set to null (one left out
// too), a wrong JSON type, a number past its minimum or maximum (or a
// fraction for an integer), a string past its maxLength, below its
// minLength, empty, or against its pattern, enum or format, an array past
// maxItems or below minItems, an unknown property where
// additionalProperties is false, a required property dropped, an object
// past maxProperties; for a query parameter, empty, of a wrong type, out
// of range or of its enum, or dropped. What the document says of each
// request decides what must hold:
//
//   - it refuses it: the server answers 4xx, and the store (the example
//     memory's grains, tags, holds, keys, audit events, hooks and erasure
//     requests, and the tokens) is as it was;
//   - it accepts it: the server answers no 5xx;
//   - always: the contract check passes (the answer is documented), and
//     nothing panics.
//
// Each example writes to a memory of its own, so destructive operations
// (forget, forget-user, scope-erase, erase) harm nothing the next needs.
// A run is 100 examples per store, 10 to 20 seconds; for a longer one
// raise rapid's checks (go test -run TestContractByGeneration/sqlite
// -rapid.checks=5000), and
// -v lists the requests the document accepts but the server refuses with
// 400 (rules the document states in prose only).
func TestContractByGeneration(t *testing.T) {
	forEachBackend(t, testContractByGeneration)
}

func testContractByGeneration(t *testing.T, kind backendKind) {
	doc, router := contractDoc(t)
	ops := generatedOps(t, doc)
	rec := &genTB{TB: t}
	var dir, dsn string
	f := newStoreFixture(rec, kind, func(c *lethe.Config) { dir, dsn = c.DataDir, c.PostgresDSN }, nil, nil)
	admin := f.token("admin", []string{"*"})
	driver, source := "sqlite3", "file:"+filepath.Join(dir, "lethe.db")+"?mode=ro"
	if kind == postgresBackend {
		driver, source = "pgx", dsn
	}
	store, err := sql.Open(driver, source)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	g := &generator{f: f, router: router, admin: admin, store: store, postgres: kind == postgresBackend, rec: rec,
		recipient: id.Recipient().String(), refused: map[string]string{}}
	rapid.Check(t, func(rt *rapid.T) {
		// rapid draws small numbers most often: the remainder of a wide
		// range draws every operation about as often.
		op := ops[rapid.IntRange(0, 1<<20).Draw(rt, "op")%len(ops)]
		w := g.world(rt, op)
		valid := g.request(rt, op, w)
		g.check(rt, op, w, valid, "")
		for range rapid.IntRange(4, 12).Draw(rt, "mutations") {
			m := g.mutate(rt, op, valid)
			g.check(rt, op, w, m.req, m.what)
		}
	})
	for _, k := range slices.Sorted(maps.Keys(g.refused)) {
		t.Logf("openapi.json accepts, the server refuses: %s\n%s", k, g.refused[k])
	}
}

// genOp is an operation whose requests the test generates.
type genOp struct {
	method, path string
	body         *openapi3.Schema // of an application/json body, or nil
	query        []*openapi3.Parameter
}

func (o genOp) String() string { return o.method + " " + o.path }

// generatedOps returns the operations of doc with a JSON request body or
// query parameters.
func generatedOps(tb testing.TB, doc *openapi3.T) []genOp {
	tb.Helper()
	var ops []genOp
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			o := genOp{method: method, path: path}
			if rb := op.RequestBody; rb != nil && rb.Value != nil {
				if mt := rb.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
					o.body = mt.Schema.Value
				}
			}
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				if p.Value != nil && p.Value.In == "query" {
					o.query = append(o.query, p.Value)
				}
			}
			if o.body != nil || o.query != nil {
				ops = append(ops, o)
			}
		}
	}
	if len(ops) < 15 {
		tb.Fatalf("only %d operations with a JSON body or query parameters in openapi.json", len(ops))
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].String() < ops[j].String() })
	return ops
}

// genTB is the contract check's testing.TB: it records the errors, each
// a failure of the example, and drops the logs (see generator.refused).
type genTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *genTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *genTB) Logf(string, ...any) {}
func (r *genTB) Helper()             {}

func (r *genTB) takeErrors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	errs := r.errs
	r.errs = nil
	return errs
}

// generator builds and sends an example's requests.
type generator struct {
	f         *fixture
	router    routers.Router
	admin     string
	store     *sql.DB
	postgres  bool // store is PostgreSQL ($1 placeholders), not SQLite
	rec       *genTB
	recipient string
	n         int
	// memoryColumn records which tables have a memory column.
	memoryColumn map[string]bool
	// refused holds an example of each request the document accepts and
	// the server refuses with 400, by operation, code and field: rules
	// the document states in prose only, listed by go test -v.
	refused map[string]string
}

// world is what an example's requests name: a memory of its own with a
// few grains, their subjects, users and scopes, and a hook.
type world struct {
	memory                  string
	hashes                  []string
	subjects, users, scopes []string
	hook                    string
}

// world makes the example's memory.
func (g *generator) world(rt *rapid.T, op genOp) *world {
	g.n++
	w := &world{memory: fmt.Sprintf("gen%d", g.n), subjects: []string{"alice", "bob"},
		users: []string{"u-1", "u-2"}, scopes: []string{"acme", "acme/prod"}}
	ctx := context.Background()
	gs := []lethe.Grain{
		{Memory: w.memory, Type: "fact", Subject: "alice", Relation: "likes", Object: "tea", UserID: "u-1", Scope: "acme/prod", Tags: []string{"drinks"}},
		{Memory: w.memory, Type: "fact", Subject: "bob", Object: "jazz", UserID: "u-2", Scope: "acme"},
		{Memory: w.memory, Type: "note", Content: "called twice", UserID: "u-1"},
	}
	hs, err := g.f.db.AddBatch(ctx, gs)
	if err != nil {
		rt.Fatalf("seed %s: %v", w.memory, err)
	}
	w.hashes = hs
	if strings.Contains(op.path, "/hooks/{id}") {
		h, err := g.f.db.AddHook(ctx, lethe.HookSpec{Memory: w.memory, URL: "https://93.184.215.14/in", Events: []string{"*"}})
		if err != nil {
			rt.Fatalf("hook: %v", err)
		}
		w.hook = h.ID
	}
	return w
}

// genRequest is a request as generated: the route's path, its query, and
// its body if json.
type genRequest struct {
	path  string
	query url.Values
	body  any // a JSON value as encoding/json decodes one into any; nil is null
	json  bool
}

func (r genRequest) encode() []byte {
	if !r.json {
		return nil
	}
	b, err := json.Marshal(r.body)
	if err != nil {
		panic(err)
	}
	return b
}

// request returns a request of op the document accepts, most of the time
// (the document's checks across fields, "not" and prose aside).
func (g *generator) request(rt *rapid.T, op genOp, w *world) genRequest {
	path := strings.ReplaceAll(op.path, "{memory}", w.memory)
	if w.hook != "" {
		path = strings.ReplaceAll(path, "{id}", w.hook)
	}
	// An erasure request's certificate: an id naming none.
	path = strings.ReplaceAll(path, "{id}", strings.Repeat("0", 32))
	req := genRequest{path: path, query: url.Values{}}
	vg := &valueGen{rt: rt, w: w, recipient: g.recipient}
	for _, p := range op.query {
		if p.Required || rapid.Bool().Draw(rt, "with "+p.Name) {
			req.query.Set(p.Name, queryString(vg.value(p.Schema.Value, p.Name)))
		}
	}
	if op.body != nil {
		req.body, req.json = vg.value(op.body, ""), true
	}
	return req
}

func queryString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// valueGen draws JSON values from schemas.
type valueGen struct {
	rt        *rapid.T
	w         *world
	recipient string
}

// value draws a value of s, the schema of the property name (or "" for a
// body, name[] for an array's items).
func (v *valueGen) value(s *openapi3.Schema, name string) any {
	rt := v.rt
	if len(s.OneOf) > 0 && s.Type == nil {
		return v.value(rapid.SampledFrom(refs(s.OneOf)).Draw(rt, "branch of "+name), name)
	}
	if s.Nullable && rapid.IntRange(0, 9).Draw(rt, "null "+name) == 0 {
		return nil
	}
	switch {
	case s.Type.Is("object"):
		return v.object(s, name)
	case s.Type.Is("array"):
		n := int(s.MinItems)
		hi := n + 3
		if s.MaxItems != nil && int(*s.MaxItems) < hi {
			hi = int(*s.MaxItems)
		}
		n = rapid.IntRange(n, hi).Draw(rt, "items of "+name)
		a := make([]any, n)
		for i := range a {
			a[i] = v.value(s.Items.Value, name+"[]")
		}
		return a
	case s.Type.Is("boolean"):
		return rapid.Bool().Draw(rt, name)
	case s.Type.Is("integer"):
		// JSON numbers are float64 here: an integer bound past 2^53 (an
		// int64's maximum) is drawn within 2^53.
		lo, hi := bounds(s, 0, 1<<20)
		lo, hi = max(lo, -(1<<53)), min(hi, 1<<53)
		return float64(rapid.Int64Range(int64(lo), int64(hi)).Draw(rt, name))
	case s.Type.Is("number"):
		lo, hi := bounds(s, -1, 1)
		return rapid.Float64Range(lo, hi).Draw(rt, name)
	}
	return v.str(s, name)
}

func bounds(s *openapi3.Schema, lo, hi float64) (float64, float64) {
	if s.Min != nil {
		lo = *s.Min
		if s.Max == nil {
			hi = lo + 1<<20
		}
	}
	if s.Max != nil {
		hi = *s.Max
	}
	return lo, hi
}

// object draws an object of s: its required properties, a random choice of
// the others, and for a schema whose oneOf or anyOf branches require
// properties, those of one branch (and, for oneOf, none of the others').
func (v *valueGen) object(s *openapi3.Schema, name string) any {
	rt := v.rt
	o := map[string]any{}
	required := slices.Clone(s.Required)
	var excluded []string
	minLength := map[string]uint64{}
	for k, branches := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf} {
		if len(branches) == 0 {
			continue
		}
		i := rapid.IntRange(0, len(branches)-1).Draw(rt, "branch of "+name)
		for j, b := range branches {
			switch {
			case j == i:
				required = append(required, b.Value.Required...)
				for p, ps := range b.Value.Properties {
					minLength[p] = max(minLength[p], ps.Value.MinLength)
				}
			case k == 0: // oneOf: one branch only
				excluded = append(excluded, b.Value.Required...)
			}
		}
	}
	names := make([]string, 0, len(s.Properties))
	for p := range s.Properties {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		switch {
		case slices.Contains(required, p):
		case slices.Contains(excluded, p) || !rapid.Bool().Draw(rt, "with "+p):
			continue
		}
		ps := s.Properties[p].Value
		if m := minLength[p]; m > ps.MinLength {
			c := *ps
			c.MinLength = m
			ps = &c
		}
		o[p] = v.value(ps, p)
	}
	if ap := s.AdditionalProperties.Schema; ap != nil && ap.Value != nil {
		hi := 3
		if s.MaxProps != nil {
			hi = min(hi, int(*s.MaxProps))
		}
		for i := range rapid.IntRange(0, hi).Draw(rt, "keys of "+name) {
			o[fmt.Sprintf("k%d", i)] = v.value(ap.Value, name+"{}")
		}
	}
	return o
}

// str draws a string of s: for the fields that name the world's things
// (hashes, subjects, users, scopes, the memory, an age recipient, a hook
// URL), mostly one of those.
func (v *valueGen) str(s *openapi3.Schema, name string) string {
	rt, w := v.rt, v.w
	if len(s.Enum) > 0 {
		return rapid.SampledFrom(s.Enum).Draw(rt, name).(string)
	}
	pick := func(pool ...string) (string, bool) {
		if rapid.IntRange(0, 3).Draw(rt, "pooled "+name) == 0 {
			return "", false
		}
		return rapid.SampledFrom(pool).Draw(rt, name), true
	}
	var pool []string
	switch strings.TrimSuffix(name, "[]") {
	case "blob_hash", "hash", "hashes":
		pool = w.hashes
	case "subject":
		pool = w.subjects
	case "user_id":
		pool = w.users
	case "scope", "scope_path", "scopes":
		pool = w.scopes
	case "confirm":
		pool = []string{w.memory}
	case "memories":
		pool = []string{w.memory, "*"}
	case "recipient":
		pool = []string{v.recipient}
	case "url":
		pool = []string{"https://93.184.215.14/in"}
	case "type":
		pool = []string{"fact", "note"}
	case "namespace":
		pool = []string{"default", "ns1"}
	}
	if pool != nil {
		if s, ok := pick(pool...); ok {
			return s
		}
	}
	if s.Format == "date-time" {
		// In the past (created_at, due_before), or the future for what
		// must be (a token's expiry, a request's due date).
		d := rapid.Int64Range(-400*24, -1).Draw(rt, name+" hours")
		if name == "expires_at" || name == "due" {
			d = rapid.Int64Range(1, 300*24).Draw(rt, name+" hours")
		}
		return time.Now().Add(time.Duration(d) * time.Hour).UTC().Format(time.RFC3339)
	}
	if s.Pattern != "" {
		return rapid.StringMatching(s.Pattern).Draw(rt, name)
	}
	hi := int(s.MinLength) + 12
	if s.MaxLength != nil && int(*s.MaxLength) < hi {
		hi = int(*s.MaxLength)
	}
	return rapid.StringN(int(s.MinLength), hi, -1).Draw(rt, name)
}

func refs(rs openapi3.SchemaRefs) []*openapi3.Schema {
	out := make([]*openapi3.Schema, len(rs))
	for i, r := range rs {
		out[i] = r.Value
	}
	return out
}

// mutation is a request changed in one place.
type mutation struct {
	req  genRequest
	what string // the kind of change and where, "null at grains[0].tags"
}

// site is a change the mutation may make.
type site struct {
	kind  string // "null", "past maxLength"...
	what  string // the kind and where, with details
	apply func(*genRequest)
}

// mutate returns req with one change, drawn among every change its
// schemas suggest: a kind of change, then one of that kind, so that a
// kind with few places (an empty string where none is allowed) is drawn
// as often as one with many (a wrong type).
func (g *generator) mutate(rt *rapid.T, op genOp, req genRequest) mutation {
	var sites []site
	for _, p := range op.query {
		sites = append(sites, querySites(p, req.query)...)
	}
	if op.body != nil {
		sites = append(sites, valueSites(op.body, req.body)...)
	}
	if len(sites) == 0 {
		return mutation{req: req, what: "none"}
	}
	var kinds []string
	for _, s := range sites {
		if !slices.Contains(kinds, s.kind) {
			kinds = append(kinds, s.kind)
		}
	}
	sort.Strings(kinds)
	kind := kinds[rapid.IntRange(0, 1<<20).Draw(rt, "kind")%len(kinds)]
	sites = slices.DeleteFunc(sites, func(s site) bool { return s.kind != kind })
	s := sites[rapid.IntRange(0, len(sites)-1).Draw(rt, "mutation")]
	out := genRequest{path: req.path, query: url.Values{}, json: req.json}
	for k, v := range req.query {
		out.query[k] = slices.Clone(v)
	}
	out.body = clone(req.body)
	s.apply(&out)
	return mutation{req: out, what: s.what}
}

// clone deep-copies a generated body.
func clone(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

// at returns the value at path (keys and indexes) in v.
func at(v any, path []any) any {
	for _, k := range path {
		switch k := k.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

// set replaces the value at path in r's body (deleting it when del).
func set(r *genRequest, path []any, val any, del bool) {
	if len(path) == 0 {
		r.body = val
		return
	}
	parent := at(r.body, path[:len(path)-1])
	switch k := path[len(path)-1].(type) {
	case string:
		if del {
			delete(parent.(map[string]any), k)
		} else {
			parent.(map[string]any)[k] = val
		}
	case int:
		parent.([]any)[k] = val
	}
}

func pathName(path []any) string {
	var b strings.Builder
	for _, k := range path {
		switch k := k.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		}
	}
	if b.Len() == 0 {
		return "the body"
	}
	return b.String()
}

// valueSites returns the changes of body, of schema s, and of what it
// holds, each found by its path from the body's root.
func valueSites(s *openapi3.Schema, body any) []site {
	var sites []site
	var walk func(s *openapi3.Schema, v any, path []any)
	walk = func(s *openapi3.Schema, v any, path []any) {
		p := slices.Clone(path)
		where := pathName(p)
		if len(s.OneOf) > 0 && s.Type == nil {
			s = branchOf(s.OneOf, v)
		}
		replace := func(what string, val any) {
			sites = append(sites, site{kindOf(what), what + " at " + where, func(r *genRequest) { set(r, p, val, false) }})
		}
		if v != nil {
			replace("null", nil)
		}
		for _, wrong := range wrongTypes(s) {
			replace("wrong type ("+jsonType(wrong)+")", wrong)
		}
		switch v := v.(type) {
		case float64:
			integer := s.Type.Is("integer")
			if s.Max != nil {
				replace("past maximum", *s.Max+1)
				replace("far past maximum", *s.Max*1e6+1e9)
			}
			if s.Min != nil {
				replace("below minimum", *s.Min-1)
			}
			if integer {
				replace("fraction for an integer", v+0.5)
				replace("past int64", 1e19)
			}
		case string:
			if s.MaxLength != nil {
				replace("past maxLength", longer(v, int(*s.MaxLength)+1))
			}
			if s.MinLength > 0 {
				replace("below minLength", "")
			} else if v != "" && s.VisitJSON("") != nil {
				replace("empty", "")
			}
			if s.Pattern != "" {
				re := regexp.MustCompile(s.Pattern)
				for _, bad := range []string{"", " ", " " + v, v + " ", "a\x00b", "!", strings.ToUpper(v), "A B"} {
					if !re.MatchString(bad) {
						replace(fmt.Sprintf("against pattern (%q)", bad), bad)
						break
					}
				}
			}
			if len(s.Enum) > 0 {
				replace("not in enum", "not-"+v)
			}
			if s.Format == "date-time" {
				replace("against format date-time", "2024-13-45 25:00")
			}
		case []any:
			if s.MaxItems != nil {
				more := slices.Clone(v)
				for len(more) <= int(*s.MaxItems) {
					if len(v) > 0 {
						more = append(more, v[len(more)%len(v)])
					} else {
						more = append(more, sampleOf(s.Items.Value))
					}
				}
				replace("past maxItems", more)
			}
			if s.MinItems > 0 {
				replace("below minItems", []any{})
			}
			if s.Items != nil {
				for i, e := range v {
					walk(s.Items.Value, e, append(slices.Clone(p), i))
				}
			}
		case map[string]any:
			if ap := s.AdditionalProperties; ap.Has != nil && !*ap.Has {
				sites = append(sites, site{"unknown property", "unknown property at " + where, func(r *genRequest) {
					set(r, append(slices.Clone(p), "colour"), "red", false)
				}})
			}
			for _, k := range s.Required {
				if _, ok := v[k]; ok {
					k := k
					sites = append(sites, site{"required dropped", "required " + k + " dropped at " + where, func(r *genRequest) {
						set(r, append(slices.Clone(p), k), nil, true)
					}})
				}
			}
			if s.MaxProps != nil {
				more := map[string]any{}
				for k, e := range v {
					more[k] = e
				}
				for i := 0; len(more) <= int(*s.MaxProps); i++ {
					more[fmt.Sprintf("extra%d", i)] = "x"
				}
				replace("past maxProperties", more)
			}
			keys := make([]string, 0, len(s.Properties))
			for k := range s.Properties {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				ps := s.Properties[k].Value
				kp := append(slices.Clone(p), k)
				if e, ok := v[k]; ok {
					walk(ps, e, kp)
					continue
				}
				// A property left out: given null, or of a wrong type.
				sites = append(sites, site{"null", "null at " + pathName(kp), func(r *genRequest) { set(r, kp, nil, false) }})
				for _, wrong := range wrongTypes(ps) {
					sites = append(sites, site{"wrong type", "wrong type (" + jsonType(wrong) + ") at " + pathName(kp),
						func(r *genRequest) { set(r, kp, wrong, false) }})
				}
			}
			if ap := s.AdditionalProperties.Schema; ap != nil && ap.Value != nil {
				for k, e := range v {
					if _, ok := s.Properties[k]; !ok {
						walk(ap.Value, e, append(slices.Clone(p), k))
					}
				}
			}
		}
	}
	walk(s, body, nil)
	return sites
}

// kindOf is the kind of a change described as what: "wrong type" for
// "wrong type (string)".
func kindOf(what string) string {
	kind, _, _ := strings.Cut(what, " (")
	return kind
}

// branchOf returns the branch of a oneOf that v's keys fit best.
func branchOf(branches openapi3.SchemaRefs, v any) *openapi3.Schema {
	m, _ := v.(map[string]any)
	best, score := branches[0].Value, -1
	for _, b := range branches {
		n := 0
		for k := range m {
			if _, ok := b.Value.Properties[k]; ok {
				n++
			}
		}
		if n > score {
			best, score = b.Value, n
		}
	}
	return best
}

// wrongTypes returns a value of each JSON type s does not allow.
func wrongTypes(s *openapi3.Schema) []any {
	all := []any{"x", 7.0, 1.5, true, []any{}, map[string]any{}}
	var out []any
	for _, v := range all {
		t := jsonType(v)
		switch {
		case s.Type == nil || s.Type.Is(t):
		case t == "integer" && s.Type.Is("number"):
		default:
			out = append(out, v)
		}
	}
	return out
}

func jsonType(v any) string {
	switch v := v.(type) {
	case string:
		return "string"
	case float64:
		if v == math.Trunc(v) {
			return "integer"
		}
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// longer returns s made n runes long, by repeating its last rune.
func longer(s string, n int) string {
	r := []rune(s)
	last := 'a'
	if len(r) > 0 {
		last = r[len(r)-1]
	}
	for len(r) < n {
		r = append(r, last)
	}
	return string(r)
}

// sampleOf returns a plain value of s's type, for an array grown past its
// maxItems from none.
func sampleOf(s *openapi3.Schema) any {
	switch {
	case s.Type.Is("number"), s.Type.Is("integer"):
		return 1.0
	case s.Type.Is("boolean"):
		return true
	case s.Type.Is("object"):
		return map[string]any{}
	}
	return "x"
}

// querySites returns the changes of the query parameter p, given in q or
// not.
func querySites(p *openapi3.Parameter, q url.Values) []site {
	var sites []site
	s := p.Schema.Value
	replace := func(what, val string) {
		sites = append(sites, site{kindOf(what), what + " at query " + p.Name, func(r *genRequest) { r.query.Set(p.Name, val) }})
	}
	replace("empty", "")
	switch {
	case s.Type.Is("integer"):
		replace("wrong type", "x")
		replace("fraction for an integer", "1.5")
		if s.Min != nil {
			replace("below minimum", strconv.FormatFloat(*s.Min-1, 'f', -1, 64))
		}
		if s.Max != nil {
			// A maximum past 2^53 is read as the float64 next to it:
			// 2^63-1 as 2^63, which is just past it.
			replace("past maximum", strconv.FormatFloat(*s.Max+1, 'f', -1, 64))
		}
		replace("past uint64", "18446744073709551616")
	case len(s.Enum) > 0:
		replace("not in enum", "nope")
	case s.Format == "date-time":
		replace("against format date-time", "yesterday")
	case s.Pattern != "":
		replace("against pattern", "XYZ")
	}
	if p.Required && q.Has(p.Name) {
		sites = append(sites, site{"required dropped", "required dropped at query " + p.Name, func(r *genRequest) { r.query.Del(p.Name) }})
	}
	return sites
}

// check sends req and checks what must hold of the answer (see
// TestContractByGeneration); what names the mutation, "" for the valid
// request.
func (g *generator) check(rt *rapid.T, op genOp, w *world, req genRequest, what string) {
	body := req.encode()
	target := req.path
	if len(req.query) > 0 {
		target += "?" + req.query.Encode()
	}
	refusal := g.verdict(op, target, body)
	var before string
	if refusal != nil {
		before = g.snapshot(rt, w.memory)
	}
	status, answer := g.send(rt, op, target, body)
	label := what
	if label == "" {
		label = "as generated"
	}
	show := fmt.Sprintf("%s %s (%s)\n%s\n-> %d %s", op.method, target, label, trim(body), status, trim(answer))
	if errs := g.rec.takeErrors(); len(errs) > 0 {
		rt.Fatalf("%s\n%s", show, strings.Join(errs, "\n"))
	}
	if status >= 500 {
		rt.Fatalf("a 5xx answer: %s", show)
	}
	if refusal == nil && status == 400 {
		var e struct{ Code, Field string }
		json.Unmarshal(answer, &e)
		k := fmt.Sprintf("%s: %s %s", op, e.Code, e.Field)
		if _, ok := g.refused[k]; !ok {
			g.refused[k] = show
		}
	}
	if refusal == nil {
		return
	}
	if status < 400 || status >= 500 {
		rt.Fatalf("openapi.json refuses the request, the server did not: %s\n%v", show, refusal)
	}
	if after := g.snapshot(rt, w.memory); after != before {
		rt.Fatalf("a request openapi.json refuses changed the store: %s\n%s", show, diffLines(before, after))
	}
}

// verdict returns the document's refusal of a request, or nil.
func (g *generator) verdict(op genOp, target string, body []byte) error {
	r := httptest.NewRequest(strings.ToUpper(op.method), target, bytes.NewReader(body))
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", "Bearer "+g.admin)
	route, params, err := g.router.FindRoute(r)
	if err != nil {
		return err
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
}

// send serves the request in process, through the contract check: its
// errors are recorded before send returns.
func (g *generator) send(rt *rapid.T, op genOp, target string, body []byte) (int, []byte) {
	r := httptest.NewRequest(strings.ToUpper(op.method), target, bytes.NewReader(body))
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", "Bearer "+g.admin)
	w := httptest.NewRecorder()
	g.f.srv.Config.Handler.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

// snapshotTables are the tables a refused request must leave as they
// were: the example memory's rows (all rows of a table without a memory
// column), without the columns that change in the background (a recall's
// retrieval statistics, flushed later; an audit event's leaf index, set by
// the sequencer) and, of grains and their tags, the rows an erasure made
// unreadable, which the cleaner deletes later (recording their hashes in
// erased_grains, left out).
var snapshotTables = []struct{ table, skip string }{
	{"data_keys", ""}, // before grains, grains before grain_tags: see snapshot
	{"grains", "last_retrieved_us retrieval_count salience"},
	{"grain_tags", ""},
	{"holds", ""},
	{"erase_epochs", ""},
	{"audit_events", "seq"},
	{"api_tokens", ""},
	{"hooks", ""},
	{"erasure_requests", ""},
}

// snapshot returns a digest of each table of snapshotTables, a line each.
func (g *generator) snapshot(rt *rapid.T, memory string) string {
	destroyed, live := map[string]bool{}, map[string]bool{}
	var out strings.Builder
	for _, t := range snapshotTables {
		q, args := "SELECT * FROM "+t.table, []any{}
		if g.hasMemory(rt, t.table) {
			q, args = q+" WHERE memory = "+g.param(1), append(args, memory)
		}
		rows, err := g.store.Query(q, args...)
		if err != nil {
			rt.Fatalf("snapshot %s: %v", t.table, err)
		}
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		var lines []string // sorted: the tables' physical order is no contract
	row:
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				rt.Fatalf("snapshot %s: %v", t.table, err)
			}
			var line strings.Builder
			for i, c := range cols {
				v := fmt.Sprint(vals[i])
				switch {
				case t.table == "data_keys" && c == "destroyed_us" && v != "0":
					destroyed[fmt.Sprint(vals[slices.Index(cols, "id")])] = true
				case t.table == "grains" && c == "key_chain":
					for _, k := range strings.Split(v, ".") {
						if destroyed[k] {
							continue row
						}
					}
				case t.table == "grains" && c == "user_key_id" && destroyed[v]:
					continue row
				case t.table == "grain_tags" && c == "grain_id" && !live[v]:
					continue row
				}
				if !slices.Contains(strings.Fields(t.skip), c) {
					fmt.Fprintf(&line, "%s=%s;", c, v)
				}
			}
			if t.table == "grains" {
				live[fmt.Sprint(vals[slices.Index(cols, "id")])] = true
			}
			lines = append(lines, line.String())
		}
		rows.Close()
		slices.Sort(lines)
		h := sha256.New()
		for _, l := range lines {
			h.Write([]byte(l + "\n"))
		}
		fmt.Fprintf(&out, "%s: %d rows %s\n", t.table, len(lines), hex.EncodeToString(h.Sum(nil))[:16])
	}
	return out.String()
}

// hasMemory reports whether table has a memory column.
func (g *generator) hasMemory(rt *rapid.T, table string) bool {
	if v, ok := g.memoryColumn[table]; ok {
		return v
	}
	q := "SELECT count(*) FROM pragma_table_info(?) WHERE name = 'memory'"
	if g.postgres {
		q = "SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = 'memory'"
	}
	var n int
	if err := g.store.QueryRow(q, table).Scan(&n); err != nil {
		rt.Fatalf("columns of %s: %v", table, err)
	}
	if g.memoryColumn == nil {
		g.memoryColumn = map[string]bool{}
	}
	g.memoryColumn[table] = n > 0
	return n > 0
}

// param is the store's placeholder for the i-th argument.
func (g *generator) param(i int) string {
	if g.postgres {
		return fmt.Sprint("$", i)
	}
	return "?"
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			out = append(out, "- "+al[i], "+ "+bl[i])
		}
	}
	return strings.Join(out, "\n")
}
