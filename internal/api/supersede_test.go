package api_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// supersedeState is the model of a version: the fields a supersede
// reads and writes, normalized as the store keeps them.
type supersedeState struct {
	Type, Subject, Relation, Object, Content, Namespace, Scope, UserID string
	Tags                                                               []string
	Metadata                                                           map[string]string
	Embedding                                                          []float32
	Importance, Confidence, Salience                                   float64
	Pinned                                                             bool
}

func stateOf(g *lethe.Grain) supersedeState {
	s := supersedeState{Type: g.Type, Subject: g.Subject, Relation: g.Relation, Object: g.Object, Content: g.Content,
		Namespace: g.Namespace, Scope: g.Scope, UserID: g.UserID, Tags: g.Tags, Metadata: g.Metadata, Embedding: g.Embedding,
		Importance: g.Importance, Confidence: g.Confidence, Salience: g.Salience, Pinned: g.Pinned}
	if len(s.Tags) == 0 {
		s.Tags = nil
	}
	if len(s.Metadata) == 0 {
		s.Metadata = nil
	}
	if len(s.Embedding) == 0 {
		s.Embedding = nil
	}
	return s
}

// sameVersion is the library's "changes nothing": every field but
// salience, and salience when the supersede names it.
func sameVersion(a, b supersedeState, salienceNamed bool) bool {
	if !salienceNamed {
		a.Salience, b.Salience = 0, 0
	}
	return reflect.DeepEqual(a, b)
}

// supersedeChoices are, per settable field, the values a step may send
// (nil is JSON null). A step leaves each field out, or sends one of them.
var supersedeChoices = map[string][]any{
	"type":       {"", "fact", "belief"},
	"subject":    {"", nil, "john", "mary"},
	"relation":   {"", "likes"},
	"object":     {"", "tea", "coffee"},
	"content":    {"", nil, "john likes tea"},
	"namespace":  {"", "ns1"},
	"scope":      {"", "acme", "acme/prod"},
	"user_id":    {"", "u1"},
	"tags":       {[]string{}, nil, []string{"a"}, []string{"b", "a"}},
	"metadata":   {map[string]string{}, map[string]string{"k": "v"}},
	"embedding":  {[]float32{}, []float32{1, 0}, []float32{0, 1}},
	"importance": {0, 0.5},
	"confidence": {0, 0.7, 1},
	"salience":   {0, 0.4, 1},
	"pinned":     {false, true},
}

// apply returns the model's next version: every field the body names is
// set to its value (empty included; an empty type or namespace means the
// old type and the default namespace), the others carry forward; salience
// starts at 1 unless named.
func (s supersedeState) apply(body map[string]any) supersedeState {
	n := s
	n.Salience = 1
	str := map[string]*string{"type": &n.Type, "subject": &n.Subject, "relation": &n.Relation, "object": &n.Object,
		"content": &n.Content, "namespace": &n.Namespace, "scope": &n.Scope, "user_id": &n.UserID}
	for k, v := range body {
		switch k {
		case "blob_hash":
		case "tags":
			n.Tags = nil
			if v != nil && len(v.([]string)) > 0 {
				n.Tags = slices.Sorted(slices.Values(v.([]string)))
			}
		case "metadata":
			n.Metadata = nil
			if m := v.(map[string]string); len(m) > 0 {
				n.Metadata = maps.Clone(m)
			}
		case "embedding":
			n.Embedding = nil
			if e := v.([]float32); len(e) > 0 {
				n.Embedding = e
			}
		case "importance":
			n.Importance = toFloat(v)
		case "confidence":
			n.Confidence = toFloat(v)
		case "salience":
			n.Salience = toFloat(v)
		case "pinned":
			n.Pinned = v.(bool)
		default:
			sv, _ := v.(string)
			*str[k] = sv
		}
	}
	if n.Type == "" {
		n.Type = s.Type
	}
	if n.Namespace == "" {
		n.Namespace = "default"
	}
	return n
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case float64:
		return x
	}
	panic(fmt.Sprintf("not a number: %T", v))
}

// TestSupersedeFieldsModel checks the supersede semantics over HTTP
// against a model: from a grain with every field set, random supersedes
// that leave each field out, send it empty (or null) or send a value.
// After each, the new version read back must equal the model's: a field
// left out carries forward, a field given is set, empty included
// ("content": "" clears, "confidence": 0 sets 0, "tags": [] clears). A
// version without subject, relation, object or content is refused
// (empty_grain), and so is one that changes nothing.
func TestSupersedeFieldsModel(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	admin := f.token("admin", []string{"*"})
	fields := slices.Sorted(maps.Keys(supersedeChoices))
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		base := api.GrainInput{Type: "fact", Subject: "john", Relation: "likes", Object: "coffee", Content: fmt.Sprint("base ", n),
			Namespace: "ns0", Scope: "acme", UserID: "u0", Tags: []string{"t"}, Metadata: map[string]string{"m": "1"},
			Importance: 0.2, Confidence: 0.9, Salience: 0.6, Embedding: []float32{1, 1}}
		memory := fmt.Sprint("m", n) // a memory per sequence: no duplicates across sequences
		hash := f.add(admin, memory, base)
		cur := stateOf(f.get(admin, memory, hash))
		seen := []supersedeState{cur}
		for step := rapid.IntRange(1, 6).Draw(rt, "steps"); step > 0; step-- {
			body := map[string]any{"blob_hash": hash}
			for _, k := range fields {
				if i := rapid.IntRange(-1, len(supersedeChoices[k])-1).Draw(rt, k); i >= 0 {
					body[k] = supersedeChoices[k][i]
				}
			}
			_, salienceNamed := body["salience"]
			want := cur.apply(body)
			a := f.call(admin, "POST", "/api/memories/"+memory+"/supersede", body)
			switch {
			case want.Subject == "" && want.Relation == "" && want.Object == "" && want.Content == "":
				if a.status != http.StatusBadRequest || a.errCode() != "empty_grain" {
					rt.Fatalf("supersede %v of %+v: %d %s, want empty_grain", body, cur, a.status, a.body)
				}
				continue
			case sameVersion(want, cur, salienceNamed):
				if a.status != http.StatusBadRequest || a.errCode() != "invalid_argument" {
					rt.Fatalf("supersede %v of %+v changes nothing: %d %s", body, cur, a.status, a.body)
				}
				continue
			case a.status == http.StatusConflict && slices.ContainsFunc(seen, func(s supersedeState) bool { return sameVersion(s, want, false) }):
				continue // the same content as an older version of the chain: a duplicate
			case a.status != http.StatusCreated:
				rt.Fatalf("supersede %v of %+v: %d %s", body, cur, a.status, a.body)
			}
			var res api.SupersedeResponse
			a.decode(t, &res)
			if res.Superseded != hash || res.Status != "superseded" {
				rt.Fatalf("answer %s", a.body)
			}
			got := stateOf(f.get(admin, memory, res.Hash))
			if !reflect.DeepEqual(got, want) {
				b, _ := json.Marshal(body)
				rt.Fatalf("supersede %s of\n %+v\ngave\n %+v\nwant\n %+v", b, cur, got, want)
			}
			hash, cur = res.Hash, got
			seen = append(seen, got)
		}
	})
}

func (f *fixture) get(token, memory, hash string) *lethe.Grain {
	f.t.Helper()
	a := f.call(token, "GET", "/api/memories/"+memory+"/grains/"+hash, nil)
	if a.status != http.StatusOK {
		f.t.Fatalf("get %s: %d %s", hash, a.status, a.body)
	}
	var g lethe.Grain
	a.decode(f.t, &g)
	return &g
}
