package forgetting

import (
	"errors"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/internal/grains"
)

func TestHeat(t *testing.T) {
	def := Default().Risk // 10 per access, 90-day window
	tests := []struct {
		name string
		f    Facts
		want float64
	}{
		{"never retrieved", aged(10, 0), 0},
		{"5 retrievals, last 45 days ago", retrieved(45, 5, 0), 25}, // min(100, 50) * (1 - 45/90)
		{"20 retrievals, last 9 days ago", retrieved(9, 20, 0), 90}, // min(100, 200) * (1 - 9/90)
		{"3 retrievals, just now", retrieved(0, 3, 0), 30},          // 30 * 1
		{"past the window", retrieved(120, 3, 0), 0},                // 30 * max(0, 1 - 120/90)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			near(t, "Heat", def.Heat(tt.f, now), tt.want)
		})
	}
}

func TestAssess(t *testing.T) {
	def := Default().Risk // compress at 50, drop at 200
	edges := def
	edges.CompressAt, edges.DropAt = 60, 360
	noDrop := def
	noDrop.DropAt = 0
	caveat := aged(1000, 0)
	caveat.Type = "caveat"
	goal := aged(1000, 0)
	goal.Type = "goal"
	pinned := aged(1000, 0)
	pinned.Pinned = true

	tests := []struct {
		name       string
		c          RiskConfig
		f          Facts
		wantAction Action
		wantRisk   float64
	}{
		// risk = (1 - heat/100) * (1 - importance) * days * (1 + days/30)
		{"10 days old", def, aged(10, 0), ActionNone, 13.333333333333332},                       // 10 * (1 + 1/3)
		{"30 days old", def, aged(30, 0), ActionCompress, 60},                                   // 30 * 2
		{"60 days old", def, aged(60, 0), ActionCompress, 180},                                  // 60 * 3
		{"60 days old, importance 0.25", def, aged(60, 0.25), ActionCompress, 135},              // 0.75 * 60 * 3
		{"90 days old", def, aged(90, 0), ActionDrop, 360},                                      // 90 * 4
		{"90 days old, importance 0.5", def, aged(90, 0.5), ActionCompress, 180},                // 0.5 * 90 * 4
		{"heat 25, 45 days idle", def, retrieved(45, 5, 0), ActionCompress, 84.375},             // 0.75 * 45 * 2.5
		{"heat 90, 9 days idle, importance 0.2", def, retrieved(9, 20, 0.2), ActionNone, 0.936}, // 0.1 * 0.8 * 9 * 1.3
		{"heat faded, 120 days idle", def, retrieved(120, 3, 0), ActionDrop, 600},               // 1 * 120 * 5
		{"exactly compress_at compresses", edges, aged(30, 0), ActionCompress, 60},
		{"exactly drop_at drops", edges, aged(90, 0), ActionDrop, 360},
		{"drop off: compress instead", noDrop, aged(90, 0), ActionCompress, 360},
		{"caveat is protected", def, caveat, ActionProtected, 1000 * (1 + 1000.0/30)},
		{"goal is protected", def, goal, ActionProtected, 1000 * (1 + 1000.0/30)},
		{"pinned is protected", def, pinned, ActionProtected, 1000 * (1 + 1000.0/30)},
		{"importance 0.9 is protected", def, aged(90, 0.9), ActionProtected, 36}, // 0.1 * 90 * 4
		{"importance 0.89 is not", def, aged(1000, 0.89), ActionDrop, 0.11 * 1000 * (1 + 1000.0/30)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			action, risk := tt.c.Assess(tt.f, now)
			if action != tt.wantAction {
				t.Errorf("Assess action = %s, want %s", action, tt.wantAction)
			}
			near(t, "Assess risk", risk, tt.wantRisk)
		})
	}
}

func TestProtected(t *testing.T) {
	def := Default().Risk
	caveat := aged(1, 0)
	caveat.Type = "caveat"
	pinned := aged(1, 0)
	pinned.Pinned = true
	tests := []struct {
		name       string
		f          Facts
		want       bool
		wantReason string
	}{
		{"pinned", pinned, true, "pinned"},
		{"caveat", caveat, true, `type "caveat"`},
		{"importance 0.9", aged(1, 0.9), true, "importance 0.9 is at or above the protection threshold 0.9"},
		{"importance 1", aged(1, 1), true, "importance 1 "},
		{"plain fact", aged(1, 0.5), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason, hint := def.Protected(tt.f)
			if got != tt.want {
				t.Fatalf("Protected = %v, want %v", got, tt.want)
			}
			if !strings.Contains(reason, tt.wantReason) {
				t.Errorf("reason %q does not contain %q", reason, tt.wantReason)
			}
			if got && hint == "" {
				t.Error("protected without a hint")
			}
		})
	}
}

func TestCheckForget(t *testing.T) {
	p := Default()
	if err := p.CheckForget(aged(1, 0)); err != nil {
		t.Fatalf("CheckForget(fact) = %v", err)
	}
	goal := aged(1, 0)
	goal.Type = "goal"
	err := p.CheckForget(goal)
	var ge *grains.Error
	if !errors.As(err, &ge) || ge.Code != grains.CodeProtected || ge.Hint == "" {
		t.Fatalf("CheckForget(goal) = %#v, want a grains.Error with code protected and a hint", err)
	}
}

// The refusal's reason and hint name only operational facts: a grain's
// personal fields are not even in Facts, so they cannot leak; this test
// keeps it that way should Facts ever grow.
func TestProtectedNamesNoPersonalData(t *testing.T) {
	g := grains.Grain{Type: "caveat", Subject: "alice@example.com", Content: "secret-content", UserID: "user-42", Importance: 0.95}
	_, reason, hint := Default().Protected(FactsOf(&g))
	for _, s := range []string{g.Subject, g.Content, g.UserID} {
		if strings.Contains(reason+hint, s) {
			t.Errorf("refusal names personal data %q: %s / %s", s, reason, hint)
		}
	}
}

func TestTripleSummarizer(t *testing.T) {
	g := grains.Grain{Hash: strings.Repeat("a", 64), Type: "fact", Subject: "s", Relation: "r", Object: "o",
		Content: "long text", Tags: []string{"t"}, Metadata: map[string]string{"k": "v"}, UserID: "u", Scope: "acme"}
	out, err := TripleSummarizer{}.Summarize(g)
	if err != nil {
		t.Fatal(err)
	}
	if out.Content != "" || out.Hash != "" {
		t.Errorf("summary keeps content %q or hash %q", out.Content, out.Hash)
	}
	if out.Subject != "s" || out.Relation != "r" || out.Object != "o" || out.UserID != "u" || out.Scope != "acme" {
		t.Errorf("summary lost the triple or the key chain: %+v", out)
	}
	out.Tags[0], out.Metadata["k"] = "changed", "changed"
	if g.Tags[0] != "t" || g.Metadata["k"] != "v" || g.Content != "long text" {
		t.Error("Summarize modified its argument")
	}

	for name, g := range map[string]grains.Grain{
		"no content": {Type: "fact", Subject: "s"},
		"no triple":  {Type: "fact", Content: "text only"},
	} {
		if _, err := (TripleSummarizer{}).Summarize(g); !errors.Is(err, ErrNotCompressible) {
			t.Errorf("%s: err = %v, want ErrNotCompressible", name, err)
		}
	}
}
