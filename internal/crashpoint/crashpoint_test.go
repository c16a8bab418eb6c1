package crashpoint

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		v     string
		name  string
		count int64
	}{
		{"", "", 1},
		{"erase.committed", "erase.committed", 1},
		{"erase.committed@3", "erase.committed", 3},
		{"erase.committed@0", "", 0},
		{"erase.committed@x", "", 0},
		{"erase.committed@-1", "", 0},
	}
	for _, tt := range tests {
		name, n := Parse(tt.v)
		if name != tt.name || n != tt.count {
			t.Errorf("Parse(%q) = %q, %d; want %q, %d", tt.v, name, n, tt.name, tt.count)
		}
	}
}

func TestPointsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Points() {
		if p == "" || strings.ContainsAny(p, "@ ") || seen[p] {
			t.Errorf("point %q is empty, malformed or listed twice", p)
		}
		seen[p] = true
	}
}

// TestHitKills runs the test binary armed at a point's second hit: it
// must survive the first and die by SIGKILL at the second, after its line
// on standard error.
func TestHitKills(t *testing.T) {
	if os.Getenv("CRASHPOINT_TEST_CHILD") != "" {
		Hit(CleanerJob) // not the armed point
		Hit(EraseCommitted)
		os.Stdout.WriteString("survived the first hit\n")
		Hit(EraseCommitted)
		os.Stdout.WriteString("survived the second hit\n")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHitKills$")
	cmd.Env = append(os.Environ(), "CRASHPOINT_TEST_CHILD=1", Env+"="+EraseCommitted+"@2")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v, want killed; output %q", err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, want SIGKILL", ee)
	}
	if got := string(out); got != "survived the first hit\n" {
		t.Errorf("child printed %q", got)
	}
	if want := "lethe: crashpoint erase.committed@2 reached\n"; stderr.String() != want {
		t.Errorf("child's stderr %q, want %q", stderr.String(), want)
	}
}

// BenchmarkHitUnarmed is the cost of a point in a process that armed none.
func BenchmarkHitUnarmed(b *testing.B) {
	for b.Loop() {
		Hit(EraseCommitted)
	}
}
