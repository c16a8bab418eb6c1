package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var defaultPolicyFile = filepath.Join("..", "..", "policies", "default.yaml")

func runPolicyT(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = runPolicy(context.Background(), args, &o, &e)
	return o.String(), e.String(), err
}

func writePolicy(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPolicyCheckOK(t *testing.T) {
	custom := writePolicy(t, "custom.yaml", "decay:\n  enabled: true\n  curve: linear\nauto_pin:\n  - {name: vip, field: tags, pattern: '(^|,)vip(,|$)'}\n")
	out, errOut, err := runPolicyT(t, "check", defaultPolicyFile, custom)
	if err != nil {
		t.Fatalf("err = %v, stderr %q", err, errOut)
	}
	if want := "ok: " + defaultPolicyFile + "\nok: " + custom + "\n"; out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	if errOut != "" {
		t.Errorf("stderr = %q, want nothing", errOut)
	}
}

func TestPolicyCheckInvalid(t *testing.T) {
	bad := writePolicy(t, "bad.yaml", "decay:\n  threshold: 1.5\n  batch: 0\nrisk:\n  protect: [goal]\n")
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	out, errOut, err := runPolicyT(t, "check", defaultPolicyFile, bad, missing)
	if err == nil || err.Error() != "policy check: 2 of 3 files invalid" {
		t.Fatalf("err = %v, want 2 of 3 files invalid", err)
	}
	var ue *usageError
	if errors.As(err, &ue) {
		t.Error("an invalid policy is not a usage error")
	}
	if want := "ok: " + defaultPolicyFile + "\n"; out != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	// Unknown keys are found before values are checked: the walker
	// reports them alone.
	want := bad + ":5: risk.protect: unknown key; want one of enabled, schedule, compress_at, drop_at, heat_per_access, heat_window_days, protected_types, protect_importance\n" +
		missing + ": cannot read: no such file or directory\n"
	if errOut != want {
		t.Errorf("stderr =\n%s\nwant\n%s", errOut, want)
	}

	ranges := writePolicy(t, "ranges.yaml", "decay:\n  threshold: 1.5\n  batch: 0\n")
	_, errOut, err = runPolicyT(t, "check", ranges)
	if err == nil {
		t.Fatal("out-of-range policy passed")
	}
	want = ranges + ":2: decay.threshold: must be in [0,1], got 1.5\n" +
		ranges + ":3: decay.batch: must be in [1,100000], got 0\n"
	if errOut != want {
		t.Errorf("stderr =\n%s\nwant\n%s", errOut, want)
	}
}

func TestPolicyCheckJSON(t *testing.T) {
	bad := writePolicy(t, "bad.yaml", "auto_pin:\n  - name: a\n    pattern: '(x'\n")
	out, errOut, err := runPolicyT(t, "check", "--json", defaultPolicyFile, bad)
	if err == nil {
		t.Fatal("want an error for the invalid file")
	}
	if errOut != "" {
		t.Errorf("stderr = %q, want nothing with --json", errOut)
	}
	var got struct {
		OK    bool               `json:"ok"`
		Files []policyFileResult `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if got.OK || len(got.Files) != 2 || !got.Files[0].OK || got.Files[1].OK {
		t.Fatalf("got %+v", got)
	}
	p := got.Files[1].Problems
	if len(p) != 1 || p[0].Key != "auto_pin[0].pattern" || p[0].Line != 3 || !strings.HasPrefix(p[0].Message, "does not compile: ") {
		t.Errorf("problems = %+v", p)
	}
}

func TestPolicyUsage(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantUsage bool   // a usage error (exit status 2)
		wantOut   string // a prefix of stdout
	}{
		{"no subcommand", nil, true, ""},
		{"unknown subcommand", []string{"apply", "x.yaml"}, true, ""},
		{"no files", []string{"check"}, true, ""},
		{"unknown flag", []string{"check", "--strict", defaultPolicyFile}, true, ""},
		{"help", []string{"--help"}, false, "Usage: lethe policy check"},
		{"check help", []string{"check", "--help"}, false, "Usage: lethe policy check"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runPolicyT(t, tt.args...)
			var ue *usageError
			if got := errors.As(err, &ue); got != tt.wantUsage {
				t.Errorf("err = %v, usage error %v, want %v", err, got, tt.wantUsage)
			}
			if !tt.wantUsage && err != nil {
				t.Errorf("err = %v", err)
			}
			if !strings.HasPrefix(out, tt.wantOut) {
				t.Errorf("stdout = %q, want prefix %q", out, tt.wantOut)
			}
		})
	}
}

func TestPolicyUsageTextListsFlags(t *testing.T) {
	if !strings.Contains(policyUsage, "--json") {
		t.Error("usage does not list --json")
	}
}
