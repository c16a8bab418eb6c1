package forgetting

import (
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParse checks that Parse never panics, that what it accepts is valid,
// and that a parsed policy written back as YAML parses to the same policy.
// The default file is a 4 KB seed: fuzz with -fuzzminimizetime 200x or
// minimizing it stalls the run.
func FuzzParse(f *testing.F) {
	def, err := os.ReadFile(filepath.Join("..", "..", "policies", "default.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(def)
	for _, s := range []string{
		"",
		"decay:\n  curve: linear\n  threshold: 0.2\n",
		"ladder:\n  triggers: [cron]\n  rungs: {archive: false}\n",
		"risk:\n  schedule: every 6h\n  drop_at: 0\n",
		"auto_pin:\n  - {name: a, field: tags, pattern: '(^|,)vip(,|$)'}\n",
		"decay: {threshold: 1.5}\n",
		"version: 1\n---\nversion: 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			if p != nil {
				t.Fatal("Parse returned a policy and an error")
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid policy: %v", err)
		}
		out, err := yaml.Marshal(p)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		q, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(p)): %v\n%s", err, out)
		}
		if !equalPolicies(p, q) {
			t.Fatalf("round trip changed the policy:\n%+v\n%+v\n%s", *p, *q, out)
		}
	})
}
