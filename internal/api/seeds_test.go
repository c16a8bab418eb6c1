package api_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/internal/api"
)

// seedFile is testdata/seeds.json: the peer documents' HTTP examples.
type seedFile struct {
	Setup    map[string]api.GrainInput `json:"setup"`
	Examples []struct {
		Name   string `json:"name"`
		Source string `json:"source"`
		Steps  []struct {
			Method      string            `json:"method"`
			Path        string            `json:"path"`
			ContentType string            `json:"content_type"`
			Body        any               `json:"body"`
			Status      int               `json:"status"`
			Expect      map[string]any    `json:"expect"`
			Save        map[string]string `json:"save"`
		} `json:"steps"`
	} `json:"examples"`
}

// TestSeedExamples replays every HTTP example of the peer documents that
// lethe claims to support (testdata/seeds.json, each with its document
// and section) against a real server on a fresh store, and checks each
// answer and its effect, not only the status. The CLI examples are
// replayed by cmd/lethe/testdata/seeds.txt.
func TestSeedExamples(t *testing.T) {
	b, err := os.ReadFile("testdata/seeds.json")
	if err != nil {
		t.Fatal(err)
	}
	var sf seedFile
	if err := json.Unmarshal(b, &sf); err != nil {
		t.Fatal(err)
	}
	if len(sf.Examples) == 0 {
		t.Fatal("no examples")
	}
	for _, ex := range sf.Examples {
		t.Run(ex.Name, func(t *testing.T) {
			f := newFixture(t, sqliteBackend, nil)
			admin := f.token("admin", []string{"*"})
			vars := map[string]string{}
			for name, g := range sf.Setup {
				vars[name] = f.add(admin, "customer-support", g)
			}
			for i, st := range ex.Steps {
				path := subst(st.Path, vars)
				var body any
				switch v := st.Body.(type) {
				case nil:
				case string:
					body = subst(v, vars)
				default:
					j, _ := json.Marshal(v)
					body = subst(string(j), vars)
				}
				ct := st.ContentType
				if ct == "" {
					ct = "application/json"
				}
				a := f.callType(admin, st.Method, path, ct, body)
				if a.status != st.Status {
					t.Fatalf("%s\nstep %d %s %s: %d %s, want %d", ex.Source, i, st.Method, path, a.status, a.body, st.Status)
				}
				var got map[string]any
				if len(a.body) > 0 {
					if err := json.Unmarshal(a.body, &got); err != nil {
						t.Fatalf("step %d: %s: %v", i, a.body, err)
					}
				}
				if err := matchJSON(got, st.Expect, vars); err != nil {
					t.Fatalf("%s\nstep %d %s %s: %v\nanswer: %s", ex.Source, i, st.Method, path, err, a.body)
				}
				for name, key := range st.Save {
					s, _ := got[key].(string)
					vars[name] = s
				}
			}
		})
	}
}

// subst replaces $NAME by vars[NAME], longest names first.
func subst(s string, vars map[string]string) string {
	names := slices.Collect(func(yield func(string) bool) {
		for k := range vars {
			if !yield(k) {
				return
			}
		}
	})
	slices.SortFunc(names, func(a, b string) int { return len(b) - len(a) })
	for _, n := range names {
		s = strings.ReplaceAll(s, "$"+n, vars[n])
	}
	return s
}

// matchJSON checks that got holds every key of want with its value:
// "$any" is any present value, "$absent" a missing key, "$sorted:A,B" the
// sorted hashes of A and B; objects match as subsets, arrays element by
// element with the same length, numbers by value.
func matchJSON(got map[string]any, want map[string]any, vars map[string]string) error {
	for k, w := range want {
		g, ok := got[k]
		if ws, isStr := w.(string); isStr && ws == "$absent" {
			if ok {
				return fmt.Errorf("%s: present (%v), want absent", k, g)
			}
			continue
		}
		if !ok {
			return fmt.Errorf("%s: missing", k)
		}
		if err := matchValue(g, w, vars); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func matchValue(g, w any, vars map[string]string) error {
	switch w := w.(type) {
	case string:
		if w == "$any" {
			return nil
		}
		if names, ok := strings.CutPrefix(w, "$sorted:"); ok {
			var hs []any
			for _, n := range strings.Split(names, ",") {
				hs = append(hs, vars[n])
			}
			slices.SortFunc(hs, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
			return matchValue(g, hs, vars)
		}
		if want := subst(w, vars); g != want {
			return fmt.Errorf("got %v, want %q", g, want)
		}
	case map[string]any:
		gm, ok := g.(map[string]any)
		if !ok {
			return fmt.Errorf("got %v, want an object", g)
		}
		return matchJSON(gm, w, vars)
	case []any:
		ga, ok := g.([]any)
		if !ok || len(ga) != len(w) {
			return fmt.Errorf("got %v, want %d elements", g, len(w))
		}
		for i := range w {
			if err := matchValue(ga[i], w[i], vars); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	default:
		if !reflect.DeepEqual(g, w) {
			return fmt.Errorf("got %v, want %v", g, w)
		}
	}
	return nil
}
