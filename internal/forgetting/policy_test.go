package forgetting

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
)

// equalPolicies compares two policies' settings, not their compiled
// patterns.
func equalPolicies(a, b *Policy) bool {
	x, y := *a, *b
	x.pins, y.pins = nil, nil
	return reflect.DeepEqual(x, y)
}

func TestDefaultFileIsDefault(t *testing.T) {
	p, err := Load(filepath.Join("..", "..", "policies", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := Default(); !equalPolicies(p, want) {
		t.Errorf("policies/default.yaml parses to\n%+v\nwant Default()\n%+v", *p, *want)
	}
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

// Every policy file shipped in policies/ is valid.
func TestShippedPolicies(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "policies", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no policy files: %v", err)
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	for _, in := range []string{"", "# only a comment\n", "---\n"} {
		p, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if !equalPolicies(p, Default()) {
			t.Errorf("Parse(%q) is not Default()", in)
		}
	}
}

func TestParseOverrides(t *testing.T) {
	p, err := Parse([]byte(`
decay:
  enabled: true
  curve: ebbinghaus
  threshold: 0.2
  namespace: support
ladder:
  triggers: [memory_pressure]
risk:
  protected_types: []
  drop_at: 0
auto_pin:
  - name: allergy
    pattern: '(?i)\ballerg(y|ies|ic)\b'
  - name: vip
    field: tags
    pattern: (^|,)vip(,|$)
`))
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Decay.Enabled = true
	want.Decay.Curve = CurveEbbinghaus
	want.Decay.Threshold = 0.2
	want.Decay.Namespace = "support"
	want.Ladder.Triggers = []Trigger{TriggerMemoryPressure}
	want.Risk.ProtectedTypes = nil
	want.Risk.DropAt = 0
	want.AutoPin = []AutoPin{
		{Name: "allergy", Pattern: `(?i)\ballerg(y|ies|ic)\b`},
		{Name: "vip", Field: "tags", Pattern: `(^|,)vip(,|$)`},
	}
	if !equalPolicies(p, want) {
		t.Errorf("got\n%+v\nwant\n%+v", *p, *want)
	}
}

func TestSchedules(t *testing.T) {
	tests := []struct {
		in   string
		want Interval
	}{
		{"1h", Interval(time.Hour)},
		{"every 6h", Interval(6 * time.Hour)},
		{"30m", Interval(30 * time.Minute)},
		{"off", 0},
		{"never", 0},
		{"0", 0},
		{"1h30m", Interval(90 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse([]byte("risk:\n  schedule: " + tt.in + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if p.Risk.Schedule != tt.want {
				t.Errorf("schedule %q = %v, want %v", tt.in, p.Risk.Schedule, tt.want)
			}
		})
	}
	if Interval(0).String() != "off" || Interval(time.Hour).String() != "1h0m0s" {
		t.Error("Interval.String")
	}
}

// problems parses in and returns its problems, failing if it parses.
func problems(t *testing.T, in string) []Problem {
	t.Helper()
	_, err := Parse([]byte(in))
	if err == nil {
		t.Fatalf("Parse(%q) succeeded, want an error", in)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse(%q) = %T %v, want a *ValidationError", in, err, err)
	}
	return ve.Problems
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // the first problem, as Problem.String gives it
		line     int
	}{
		{"version", "version: 2", "version: must be 1, got 2", 1},

		{"decay.schedule", "decay:\n  schedule: 10s", "decay.schedule: must be off or at least 1m0s, got 10s", 2},
		{"decay.schedule negative", "decay:\n  schedule: -1h", "decay.schedule: must be off or at least 1m0s, got -1h0m0s", 2},
		{"decay.curve", "decay:\n  curve: cubic", `decay.curve: must be one of exponential, linear, ebbinghaus, got "cubic"`, 2},
		{"decay.half_life_days zero", "decay:\n  half_life_days: 0", "decay.half_life_days: must be in (0,36500], got 0", 2},
		{"decay.half_life_days huge", "decay:\n  half_life_days: 40000", "decay.half_life_days: must be in (0,36500], got 40000", 2},
		{"decay.half_life_days nan", "decay:\n  half_life_days: .nan", "decay.half_life_days: must be in (0,36500], got NaN", 2},
		{"decay.decay_per_day", "decay:\n  decay_per_day: 1.5", "decay.decay_per_day: must be in (0,1], got 1.5", 2},
		{"decay.decay_per_day zero", "decay:\n  decay_per_day: 0", "decay.decay_per_day: must be in (0,1], got 0", 2},
		{"decay.strength_days", "decay:\n  strength_days: -3", "decay.strength_days: must be in (0,36500], got -3", 2},
		{"decay.threshold", "decay:\n  threshold: 1.5", "decay.threshold: must be in [0,1], got 1.5", 2},
		{"decay.threshold negative", "decay:\n  threshold: -0.1", "decay.threshold: must be in [0,1], got -0.1", 2},
		{"decay.min_age_days", "decay:\n  min_age_days: -1", "decay.min_age_days: must be in [0,36500], got -1", 2},
		{"decay.batch", "decay:\n  batch: 0", "decay.batch: must be in [1,100000], got 0", 2},
		{"decay.batch huge", "decay:\n  batch: 1000000", "decay.batch: must be in [1,100000], got 1000000", 2},
		{"decay.namespace", "decay:\n  namespace: 'a b'", `decay.namespace: must be empty (every namespace) or letters, digits, '.', '_', ':' or '-', at most 128 characters, got "a b"`, 2},
		{"decay.immune_types", "decay:\n  immune_types: [state, State]", `decay.immune_types[1]: must be a grain type: a lowercase word of at most 32 characters, got "State"`, 2},
		{"decay.immune_types twice", "decay:\n  immune_types:\n    - state\n    - state", `decay.immune_types[1]: "state" is listed twice`, 4},

		{"ladder.schedule", "ladder:\n  schedule: 1s", "ladder.schedule: must be off or at least 1m0s, got 1s", 2},
		{"ladder.forget_salience_threshold", "ladder:\n  forget_salience_threshold: 2", "ladder.forget_salience_threshold: must be in [0,1], got 2", 2},
		{"ladder.soft_limit", "ladder:\n  soft_limit: -5", "ladder.soft_limit: must be in [0,10000000], got -5", 2},
		{"ladder.scan_bound", "ladder:\n  scan_bound: 0", "ladder.scan_bound: must be in [1,10000000], got 0", 2},
		{"ladder.retrieval_bump", "ladder:\n  retrieval_bump: -0.1", "ladder.retrieval_bump: must be in [0,1], got -0.1", 2},
		{"ladder.triggers", "ladder:\n  triggers: [cron, reboot]", `ladder.triggers[1]: must be one of ingest_complete, query_complete, cron, memory_pressure, got "reboot"`, 2},
		{"ladder.triggers twice", "ladder:\n  triggers: [cron, cron]", `ladder.triggers[1]: "cron" is listed twice`, 2},
		{"ladder.rungs.summarize", "ladder:\n  rungs:\n    summarize: true", "ladder.rungs.summarize: the summarize rung is not implemented yet; must be false", 3},
		{"ladder.rungs.detach", "ladder:\n  rungs:\n    detach: true", "ladder.rungs.detach: the detach rung is not implemented yet; must be false", 3},

		{"retrieval.schedule", "retrieval:\n  schedule: 59s", "retrieval.schedule: must be off or at least 1m0s, got 59s", 2},
		{"retrieval.half_life_days", "retrieval:\n  half_life_days: 0", "retrieval.half_life_days: must be in (0,36500], got 0", 2},
		{"retrieval.floor", "retrieval:\n  floor: 1.1", "retrieval.floor: must be in [0,1], got 1.1", 2},
		{"retrieval.boost_scale", "retrieval:\n  boost_scale: -1", "retrieval.boost_scale: must be in [0,1], got -1", 2},
		{"retrieval.boost_cap", "retrieval:\n  boost_cap: 3", "retrieval.boost_cap: must be in [0,1], got 3", 2},
		{"retrieval.min_retrieval_score", "retrieval:\n  min_retrieval_score: 1.01", "retrieval.min_retrieval_score: must be in [0,1], got 1.01", 2},

		{"risk.schedule", "risk:\n  schedule: 1ms", "risk.schedule: must be off or at least 1m0s, got 1ms", 2},
		{"risk.compress_at", "risk:\n  compress_at: -1", "risk.compress_at: must be a number in [0,1e12] (0 turns the action off), got -1", 2},
		{"risk.drop_at", "risk:\n  drop_at: .inf", "risk.drop_at: must be a number in [0,1e12] (0 turns the action off), got +Inf", 2},
		{"risk.drop_at below compress_at", "risk:\n  compress_at: 50\n  drop_at: 40", "risk.drop_at: must be 0 (off) or at least risk.compress_at (50), got 40", 3},
		{"risk.heat_per_access", "risk:\n  heat_per_access: 0", "risk.heat_per_access: must be in (0,100], got 0", 2},
		{"risk.heat_per_access huge", "risk:\n  heat_per_access: 101", "risk.heat_per_access: must be in (0,100], got 101", 2},
		{"risk.heat_window_days", "risk:\n  heat_window_days: 0", "risk.heat_window_days: must be in (0,36500], got 0", 2},
		{"risk.protected_types", "risk:\n  protected_types: ['']", `risk.protected_types[0]: must be a grain type: a lowercase word of at most 32 characters, got ""`, 2},
		{"risk.protect_importance", "risk:\n  protect_importance: 1.2", "risk.protect_importance: must be in [0,1], got 1.2", 2},

		{"auto_pin name", "auto_pin:\n  - name: ''\n    pattern: x", `auto_pin[0].name: must be 1-64 letters, digits, '.', '_' or '-', got ""`, 2},
		{"auto_pin name twice", "auto_pin:\n  - {name: a, pattern: x}\n  - {name: a, pattern: y}", `auto_pin[1].name: "a" names two rules`, 3},
		{"auto_pin field", "auto_pin:\n  - name: a\n    field: user_id\n    pattern: x", `auto_pin[0].field: must be one of content, subject, relation, object, tags, type, namespace, got "user_id"`, 3},
		{"auto_pin empty pattern", "auto_pin:\n  - name: a\n    pattern: ''", "auto_pin[0].pattern: must not be empty", 3},
		{"auto_pin pattern does not compile", "auto_pin:\n  - name: a\n    pattern: '(unclosed'", "auto_pin[0].pattern: does not compile: error parsing regexp: missing closing ): `(unclosed`", 3},
		{"auto_pin pattern backreference", "auto_pin:\n  - name: a\n    pattern: '(a)\\1'", "auto_pin[0].pattern: does not compile: error parsing regexp: invalid escape sequence: `\\1`", 3},
		{"auto_pin pattern too long", "auto_pin:\n  - name: a\n    pattern: " + strings.Repeat("a", 1025), "auto_pin[0].pattern: must be at most 1024 bytes, got 1025", 3},

		{"unknown top-level key", "version: 1\nforget: {}", "forget: unknown key; want one of version, decay, ladder, retrieval, risk, auto_pin, kek", 2},
		{"kek rotation too often", "kek:\n  rotate_every: 10m", "kek.rotate_every: must be off or at least 1h0m0s, got 10m0s", 2},
		{"kek keep zero", "kek:\n  keep: 0", "kek.keep: must be in [1,100], got 0", 2},
		{"unknown nested key", "decay:\n  half_life: 30", "decay.half_life: unknown key; want one of enabled, schedule, curve, half_life_days, decay_per_day, strength_days, threshold, min_age_days, batch, namespace, immune_types", 2},
		{"unknown rung", "ladder:\n  rungs:\n    delete: true", "ladder.rungs.delete: unknown key; want one of archive, summarize, detach", 3},
		{"unknown auto_pin key", "auto_pin:\n  - name: a\n    pattern: x\n    regex: y", "auto_pin[0].regex: unknown key; want one of name, field, pattern", 4},
		{"repeated key", "decay:\n  threshold: 0.2\n  threshold: 0.4", "decay.threshold: repeated key (first at line 2)", 3},
		{"wrong type", "decay:\n  threshold: high", `decay.threshold: must be a number, got "high"`, 2},
		{"wrong type for an int", "decay:\n  batch: 1.5", `decay.batch: must be a whole number, got "1.5"`, 2},
		{"bad schedule", "decay:\n  schedule: hourly", `decay.schedule: want an interval such as 1h, 30m or "every 24h", or off; got "hourly"`, 2},
		{"schedule as a list", "risk:\n  schedule: [1h]", `risk.schedule: want an interval such as 1h, 30m or "every 24h", or off; got a list`, 2},
		{"null list", "decay:\n  immune_types:", "decay.immune_types: must be a list; write [] for an empty one", 2},
		{"null number", "decay:\n  threshold: ~", `decay.threshold: must be a number, got "~"`, 2},
		{"string version", "version: '1'", `version: must be a whole number, got "1"`, 1},
		{"list where a mapping goes", "decay: [1]", "decay: cannot unmarshal !!seq into forgetting.DecayConfig", 1},
		{"not a mapping", "- decay", "a policy is a mapping of keys (version, decay, ladder, retrieval, risk, auto_pin)", 1},
		{"two documents", "version: 1\n---\nversion: 1", "a policy file holds one YAML document", 2},
		{"syntax error", "decay:\n  threshold: [0.3", "did not find expected ',' or ']'", 0}, // yaml.v3 gives the line of the flow's context
		{"wrong type for a bool", "risk:\n  enabled: yes please", `risk.enabled: must be true or false, got "yes please"`, 2},
		{"mapping where a number goes", "decay:\n  threshold: {a: 1}", "decay.threshold: cannot unmarshal !!map into float64", 2},
		{"number where a mapping goes", "decay: 5", "decay: cannot unmarshal !!int `5` into forgetting.DecayConfig", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := problems(t, tt.in)
			if got := ps[0].String(); got != tt.want {
				t.Errorf("problem = %q\nwant      %q", got, tt.want)
			}
			if tt.line != 0 && ps[0].Line != tt.line {
				t.Errorf("line = %d, want %d", ps[0].Line, tt.line)
			}
		})
	}
}

// Validation reports every problem at once, not just the first.
func TestValidationReportsAll(t *testing.T) {
	ps := problems(t, "decay:\n  threshold: 2\n  batch: 0\nrisk:\n  heat_per_access: 0\n")
	var keys []string
	for _, p := range ps {
		keys = append(keys, p.Key)
	}
	if want := []string{"decay.threshold", "decay.batch", "risk.heat_per_access"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("problem keys = %v, want %v", keys, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("decay:\n  threshold: 1.5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad)
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.File != bad {
		t.Fatalf("Load = %v, want a *ValidationError for %s", err, bad)
	}
	if want := bad + ": decay.threshold: must be in [0,1], got 1.5"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}

	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}

	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte("#"+strings.Repeat("x", MaxPolicyBytes)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); !errors.As(err, &ve) {
		t.Errorf("Load(big) = %v, want a *ValidationError", err)
	}
}

func TestAutoPinned(t *testing.T) {
	p, err := Parse([]byte(`
auto_pin:
  - name: allergy
    pattern: '(?i)\ballerg(y|ies|ic)\b'
  - name: vip
    field: tags
    pattern: (^|,)vip(,|$)
  - name: medication
    field: relation
    pattern: ^takes_medication$
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		g        grains.Grain
		wantRule string
	}{
		{"content matches", grains.Grain{Content: "Severe Allergy to peanuts"}, "allergy"},
		{"content does not", grains.Grain{Content: "allergen-free bakery"}, ""},
		{"subject is not the rule's field", grains.Grain{Subject: "allergy"}, ""},
		{"tag matches", grains.Grain{Tags: []string{"support", "vip"}}, "vip"},
		{"tag prefix does not", grains.Grain{Tags: []string{"vipers"}}, ""},
		{"relation matches", grains.Grain{Relation: "takes_medication"}, "medication"},
		{"first rule wins", grains.Grain{Content: "allergic", Tags: []string{"vip"}}, "allergy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rule, ok := p.AutoPinRule(PinFields(&tt.g))
			if rule != tt.wantRule || ok != (tt.wantRule != "") {
				t.Errorf("AutoPinRule = %q, %v; want %q", rule, ok, tt.wantRule)
			}
			if p.AutoPinned(PinFields(&tt.g)) != ok {
				t.Error("AutoPinned disagrees with AutoPinRule")
			}
		})
	}

	// A policy built by hand and never validated still matches.
	hand := Default()
	hand.AutoPin = []AutoPin{{Name: "x", Pattern: "needle"}}
	if !hand.AutoPinned(map[string]string{"content": "haystack needle"}) {
		t.Error("unvalidated policy does not auto-pin")
	}
	if Default().AutoPinned(map[string]string{"content": "allergy"}) {
		t.Error("the default policy auto-pins")
	}
}
