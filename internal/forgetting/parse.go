package forgetting

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MaxPolicyBytes bounds the size of a policy file.
const MaxPolicyBytes = 1 << 20

// Interval is a schedule: run every so often. The zero Interval is "off":
// never on a timer. In YAML it is a Go duration ("1h", "30m", "24h"),
// optionally after "every" ("every 1h"), or "off".
type Interval time.Duration

// MinInterval is the shortest schedule a policy may set.
const MinInterval = Interval(time.Minute)

// Duration returns i as a time.Duration.
func (i Interval) Duration() time.Duration { return time.Duration(i) }

// String returns "off" for the zero Interval, else the duration.
func (i Interval) String() string {
	if i == 0 {
		return "off"
	}
	return time.Duration(i).String()
}

// UnmarshalYAML parses a schedule.
func (i *Interval) UnmarshalYAML(n *yaml.Node) error {
	v := strings.TrimSpace(n.Value)
	if n.Kind == yaml.ScalarNode {
		switch strings.ToLower(v) {
		case "off", "never", "0":
			*i = 0
			return nil
		}
		v = strings.TrimSpace(strings.TrimPrefix(v, "every "))
		if d, err := time.ParseDuration(v); err == nil {
			*i = Interval(d)
			return nil
		}
	}
	got := strconv.Quote(n.Value)
	switch n.Kind {
	case yaml.SequenceNode:
		got = "a list"
	case yaml.MappingNode:
		got = "a mapping"
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf(
		"line %d: want an interval such as 1h, 30m or \"every 24h\", or off; got %s", n.Line, got)}}
}

// MarshalYAML writes a schedule as UnmarshalYAML reads it.
func (i Interval) MarshalYAML() (any, error) { return i.String(), nil }

// Problem is one thing wrong with a policy.
type Problem struct {
	Key     string // the key path, as "decay.threshold" or "auto_pin[1].pattern"; "" for the whole file
	Line    int    // the line in the file, 0 if unknown
	Message string
	// Rule is Message without the value found ("must be in [0,1]" for
	// "must be in [0,1], got 2"), for answers that must not quote what a
	// caller sent; "" when the message has no value to leave out.
	Rule string
}

func (p Problem) String() string {
	if p.Key == "" {
		return p.Message
	}
	return p.Key + ": " + p.Message
}

// ValidationError lists every problem found in a policy.
type ValidationError struct {
	File     string // set by Load
	Problems []Problem
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.String()
	}
	s := strings.Join(msgs, "; ")
	if e.File != "" {
		s = e.File + ": " + s
	}
	return s
}

// Load reads, parses and validates the policy file at path; see [Parse].
// A *ValidationError it returns has File set to path.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read policy: %w", err)
	}
	if len(b) > MaxPolicyBytes {
		return nil, &ValidationError{File: path, Problems: []Problem{{Message: fmt.Sprintf("file larger than %d bytes", MaxPolicyBytes)}}}
	}
	p, err := Parse(b)
	if ve, ok := errors.AsType[*ValidationError](err); ok {
		ve.File = path
	}
	return p, err
}

// Parse parses and validates a policy. The YAML is strict: unknown and
// repeated keys are errors, and the text holds one document. Keys left out
// keep their [Default] values; an empty document is the default policy.
// Errors are a *ValidationError naming each problem's key path and line.
func Parse(b []byte) (*Policy, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF):
		p := Default()
		return p, p.Validate()
	case err != nil:
		return nil, &ValidationError{Problems: []Problem{yamlProblem(err.Error(), nil)}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &ValidationError{Problems: []Problem{{Line: extra.Line, Message: "a policy file holds one YAML document"}}}
	}

	w := walker{lines: map[string]int{}, byLine: map[int]string{}}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind == yaml.ScalarNode && doc.ShortTag() == "!!null" {
		p := Default() // "---" and nothing else
		return p, p.Validate()
	}
	if doc.Kind != yaml.MappingNode {
		return nil, &ValidationError{Problems: []Problem{{Line: doc.Line, Message: "a policy is a mapping of keys (version, decay, ladder, retrieval, risk, auto_pin)"}}}
	}
	w.walk(doc, reflect.TypeFor[Policy](), "")
	if len(w.problems) > 0 {
		return nil, &ValidationError{Problems: w.problems}
	}

	p := Default()
	strict := yaml.NewDecoder(bytes.NewReader(b))
	strict.KnownFields(true)
	if err := strict.Decode(p); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, &ValidationError{Problems: []Problem{yamlProblem(err.Error(), w.byLine)}}
		}
		ve := &ValidationError{}
		for _, msg := range te.Errors {
			ve.Problems = append(ve.Problems, yamlProblem(msg, w.byLine))
		}
		return nil, ve
	}
	p.normalize()
	if err := p.Validate(); err != nil {
		if ve, ok := errors.AsType[*ValidationError](err); ok {
			for i := range ve.Problems {
				ve.Problems[i].Line = w.lines[ve.Problems[i].Key]
			}
		}
		return nil, err
	}
	return p, nil
}

// normalize makes empty lists nil, so that "[]" and a missing default
// compare equal.
func (p *Policy) normalize() {
	if len(p.Decay.ImmuneTypes) == 0 {
		p.Decay.ImmuneTypes = nil
	}
	if len(p.Ladder.Triggers) == 0 {
		p.Ladder.Triggers = nil
	}
	if len(p.Risk.ProtectedTypes) == 0 {
		p.Risk.ProtectedTypes = nil
	}
	if len(p.AutoPin) == 0 {
		p.AutoPin = nil
	}
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

// yamlProblem turns a yaml.v3 message into a Problem, finding the key of
// its line in byLine.
func yamlProblem(msg string, byLine map[int]string) Problem {
	msg = strings.TrimPrefix(msg, "yaml: ")
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return Problem{Message: msg}
	}
	line, _ := strconv.Atoi(m[1])
	return Problem{Key: byLine[line], Line: line, Message: msg[len(m[0]):]}
}

// walker checks a YAML tree against the Policy type before decoding, so
// that unknown and repeated keys are reported with their full key path,
// and records the line of every key path.
type walker struct {
	lines    map[string]int // key path -> line
	byLine   map[int]string // line -> the longest key path on it
	problems []Problem
}

func (w *walker) record(path string, line int) {
	w.lines[path] = line
	if old, ok := w.byLine[line]; !ok || len(path) > len(old) {
		w.byLine[line] = path
	}
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := map[string]reflect.Type{}
		var names []string
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			if !sf.IsExported() || name == "" || name == "-" {
				continue
			}
			fields[name] = sf.Type
			names = append(names, name)
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := k.Value
			if path != "" {
				kp = path + "." + k.Value
			}
			if first, dup := seen[k.Value]; dup {
				w.problems = append(w.problems, Problem{Key: kp, Line: k.Line, Message: fmt.Sprintf("repeated key (first at line %d)", first)})
				continue
			}
			seen[k.Value] = k.Line
			ft, ok := fields[k.Value]
			if !ok {
				w.problems = append(w.problems, Problem{Key: kp, Line: k.Line, Message: "unknown key; want one of " + strings.Join(names, ", ")})
				continue
			}
			w.record(kp, k.Line)
			w.walk(v, ft, kp)
		}
	case n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && t.Kind() == reflect.Slice:
		// yaml.v3 would make it an empty list; say so explicitly.
		w.problems = append(w.problems, Problem{Key: path, Line: n.Line, Message: "must be a list; write [] for an empty one"})
	case n.Kind == yaml.ScalarNode && !reflect.PointerTo(t).Implements(unmarshalerType):
		// yaml.v3 truncates a float into an int field ("batch: 1.5" gives
		// 1); refuse it, and say what is wanted.
		tag := n.ShortTag()
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if tag != "!!int" {
				w.problems = append(w.problems, Problem{Key: path, Line: n.Line, Message: fmt.Sprintf("must be a whole number, got %q", n.Value)})
			}
		case reflect.Float32, reflect.Float64:
			if tag != "!!int" && tag != "!!float" {
				w.problems = append(w.problems, Problem{Key: path, Line: n.Line, Message: fmt.Sprintf("must be a number, got %q", n.Value)})
			}
		case reflect.Bool:
			if tag != "!!bool" {
				w.problems = append(w.problems, Problem{Key: path, Line: n.Line, Message: fmt.Sprintf("must be true or false, got %q", n.Value)})
			}
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, e := range n.Content {
			ep := path + "[" + strconv.Itoa(i) + "]"
			w.record(ep, e.Line)
			w.walk(e, t.Elem(), ep)
		}
	}
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// Limits on numeric knobs.
const (
	maxDays      = 36500 // a hundred years
	maxBatch     = 100000
	maxScanBound = 10000000
	maxPatternB  = 1024
	maxPinRules  = 256
)

var (
	typeWord      = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)             // as grains validates types
	namespaceWord = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`) // as grains validates namespaces
	ruleName      = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// Validate checks every knob and compiles the auto-pin patterns. It returns
// nil or a *ValidationError naming each problem's key path and allowed
// range. It is not safe to call concurrently with the policy's other
// methods; call it once, before use.
func (p *Policy) Validate() error {
	var v validator
	if p.Version != Version {
		v.add("version", "must be %d, got %d", Version, p.Version)
	}

	d := p.Decay
	v.schedule("decay.schedule", d.Schedule)
	if d.Curve != "" && !slices.Contains(Curves, d.Curve) {
		v.add("decay.curve", "must be one of exponential, linear, ebbinghaus, got %q", d.Curve)
	}
	v.floatRange("decay.half_life_days", d.HalfLifeDays, 0, maxDays, true)
	v.floatRange("decay.decay_per_day", d.DecayPerDay, 0, 1, true)
	v.floatRange("decay.strength_days", d.StrengthDays, 0, maxDays, true)
	v.floatRange("decay.threshold", d.Threshold, 0, 1, false)
	v.intRange("decay.min_age_days", d.MinAgeDays, 0, maxDays)
	v.intRange("decay.batch", d.Batch, 1, maxBatch)
	if d.Namespace != "" && !namespaceWord.MatchString(d.Namespace) {
		v.add("decay.namespace", "must be empty (every namespace) or letters, digits, '.', '_', ':' or '-', at most 128 characters, got %q", d.Namespace)
	}
	v.types("decay.immune_types", d.ImmuneTypes)

	l := p.Ladder
	v.schedule("ladder.schedule", l.Schedule)
	v.floatRange("ladder.forget_salience_threshold", l.ForgetSalienceThreshold, 0, 1, false)
	v.intRange("ladder.soft_limit", l.SoftLimit, 0, maxScanBound)
	v.intRange("ladder.scan_bound", l.ScanBound, 1, maxScanBound)
	v.floatRange("ladder.retrieval_bump", l.RetrievalBump, 0, 1, false)
	v.floatRange("ladder.salience_half_life_days", l.SalienceHalfLifeDays, 0, 36500, false)
	seenT := map[Trigger]bool{}
	for i, t := range l.Triggers {
		key := fmt.Sprintf("ladder.triggers[%d]", i)
		switch {
		case !slices.Contains(Triggers, t):
			v.add(key, "must be one of ingest_complete, query_complete, cron, memory_pressure, got %q", t)
		case seenT[t]:
			v.add(key, "%q is listed twice", t)
		}
		seenT[t] = true
	}
	if l.Rungs.Summarize {
		v.add("ladder.rungs.summarize", "the summarize rung is not implemented yet; must be false")
	}
	if l.Rungs.Detach {
		v.add("ladder.rungs.detach", "the detach rung is not implemented yet; must be false")
	}

	r := p.Retrieval
	v.schedule("retrieval.schedule", r.Schedule)
	v.floatRange("retrieval.half_life_days", r.HalfLifeDays, 0, maxDays, true)
	v.floatRange("retrieval.floor", r.Floor, 0, 1, false)
	v.floatRange("retrieval.boost_scale", r.BoostScale, 0, 1, false)
	v.floatRange("retrieval.boost_cap", r.BoostCap, 0, 1, false)
	v.floatRange("retrieval.min_retrieval_score", r.MinRetrievalScore, 0, 1, false)

	k := p.Risk
	v.schedule("risk.schedule", k.Schedule)
	v.floatMin("risk.compress_at", k.CompressAt)
	v.floatMin("risk.drop_at", k.DropAt)
	if k.CompressAt > 0 && k.DropAt > 0 && k.DropAt < k.CompressAt {
		v.add("risk.drop_at", "must be 0 (off) or at least risk.compress_at (%s), got %s", formatFloat(k.CompressAt), formatFloat(k.DropAt))
	}
	v.floatRange("risk.heat_per_access", k.HeatPerAccess, 0, 100, true)
	v.floatRange("risk.heat_window_days", k.HeatWindowDays, 0, maxDays, true)
	v.types("risk.protected_types", k.ProtectedTypes)
	v.floatRange("risk.protect_importance", k.ProtectImportance, 0, 1, false)

	if len(p.AutoPin) > maxPinRules {
		v.add("auto_pin", "at most %d rules, got %d", maxPinRules, len(p.AutoPin))
	}
	pins := make([]*regexp.Regexp, len(p.AutoPin))
	names := map[string]bool{}
	for i, a := range p.AutoPin {
		key := fmt.Sprintf("auto_pin[%d]", i)
		switch {
		case !ruleName.MatchString(a.Name):
			v.add(key+".name", "must be 1-64 letters, digits, '.', '_' or '-', got %q", a.Name)
		case names[a.Name]:
			v.add(key+".name", "%q names two rules", a.Name)
		}
		names[a.Name] = true
		if a.Field != "" && !slices.Contains(AutoPinFields, a.Field) {
			v.add(key+".field", "must be one of %s, got %q", strings.Join(AutoPinFields, ", "), a.Field)
		}
		switch {
		case a.Pattern == "":
			v.add(key+".pattern", "must not be empty")
		case len(a.Pattern) > maxPatternB:
			v.add(key+".pattern", "must be at most %d bytes, got %d", maxPatternB, len(a.Pattern))
		default:
			re, err := regexp.Compile(a.Pattern)
			if err != nil {
				v.add(key+".pattern", "does not compile: %v", err)
			}
			pins[i] = re
		}
	}
	if r := p.KEK.RotateEvery; r != 0 && r < MinKEKRotation {
		v.add("kek.rotate_every", "must be off or at least %s, got %s", MinKEKRotation, r)
	}
	v.intRange("kek.keep", p.KEK.Keep, 1, 100)
	if len(v.problems) > 0 {
		return &ValidationError{Problems: v.problems}
	}
	p.pins = pins
	return nil
}

type validator struct{ problems []Problem }

// add records a problem. A format ending in ", got <verbs>" (its last
// arguments) gives the problem a Rule: the message up to it.
func (v *validator) add(key, format string, args ...any) {
	p := Problem{Key: key, Message: fmt.Sprintf(format, args...)}
	if i := strings.LastIndex(format, ", got "); i >= 0 {
		got := format[i:]
		if n := strings.Count(got, "%") - 2*strings.Count(got, "%%"); n <= len(args) {
			p.Rule = fmt.Sprintf(format[:i], args[:len(args)-n]...)
		}
	}
	v.problems = append(v.problems, p)
}

// floatRange checks lo <= x <= hi, or lo < x <= hi if openLo.
func (v *validator) floatRange(key string, x, lo, hi float64, openLo bool) {
	ok := x <= hi && (x > lo || (!openLo && x == lo))
	if ok {
		return
	}
	open := "["
	if openLo {
		open = "("
	}
	v.add(key, "must be in %s%s,%s], got %s", open, formatFloat(lo), formatFloat(hi), formatFloat(x))
}

func (v *validator) floatMin(key string, x float64) {
	if !(x >= 0) || x > 1e12 {
		v.add(key, "must be a number in [0,1e12] (0 turns the action off), got %s", formatFloat(x))
	}
}

func (v *validator) intRange(key string, x, lo, hi int) {
	if x < lo || x > hi {
		v.add(key, "must be in [%d,%d], got %d", lo, hi, x)
	}
}

func (v *validator) schedule(key string, i Interval) {
	if i != 0 && i < MinInterval {
		v.add(key, "must be off or at least %s, got %s", time.Duration(MinInterval), time.Duration(i))
	}
}

func (v *validator) types(key string, types []string) {
	seen := map[string]bool{}
	for i, t := range types {
		k := fmt.Sprintf("%s[%d]", key, i)
		switch {
		case !typeWord.MatchString(t):
			v.add(k, "must be a grain type: a lowercase word of at most 32 characters, got %q", t)
		case seen[t]:
			v.add(k, "%q is listed twice", t)
		}
		seen[t] = true
	}
}
