package forgetting

import (
	"testing"
	"time"
)

func TestShouldRun(t *testing.T) {
	def := Default().Ladder // soft limit 500, all triggers
	off := def
	off.Enabled = false
	pressureOnly := def
	pressureOnly.Triggers = []Trigger{TriggerMemoryPressure}
	always := def
	always.SoftLimit = 0

	tests := []struct {
		name    string
		c       LadderConfig
		trigger Trigger
		count   int
		want    bool
	}{
		{"memory_pressure with no grains", def, TriggerMemoryPressure, 0, true},
		{"memory_pressure below the soft limit", def, TriggerMemoryPressure, 499, true},
		{"ingest_complete below the soft limit", def, TriggerIngestComplete, 499, false},
		{"ingest_complete at the soft limit", def, TriggerIngestComplete, 500, true},
		{"query_complete below the soft limit", def, TriggerQueryComplete, 499, false},
		{"query_complete above the soft limit", def, TriggerQueryComplete, 10000, true},
		{"cron below the soft limit", def, TriggerCron, 499, false},
		{"cron at the soft limit", def, TriggerCron, 500, true},
		{"unknown trigger", def, Trigger("reboot"), 10000, false},
		{"ladder disabled", off, TriggerMemoryPressure, 10000, false},
		{"trigger not listed", pressureOnly, TriggerCron, 10000, false},
		{"listed trigger", pressureOnly, TriggerMemoryPressure, 0, true},
		{"soft limit 0 runs on every ingest", always, TriggerIngestComplete, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.ShouldRun(tt.trigger, tt.count); got != tt.want {
				t.Errorf("ShouldRun(%s, %d) = %v, want %v", tt.trigger, tt.count, got, tt.want)
			}
		})
	}
}

func TestStep(t *testing.T) {
	def := Default().Ladder // threshold 0.05
	noArchive := def
	noArchive.Rungs.Archive = false
	sal := func(s float64) Facts { f := aged(10, 0); f.Salience = s; return f }
	pinned := sal(0.01)
	pinned.Pinned = true
	archived := sal(0.01)
	archived.Archived = true

	tests := []struct {
		name         string
		c            LadderConfig
		f            Facts
		wantArchive  bool
		wantSalience float64
	}{
		{"below the threshold is archived and halved", def, sal(0.04), true, 0.02}, // 0.04/2
		{"at the threshold is kept", def, sal(0.05), false, 0.05},                  // 0.05 < 0.05 is false
		{"above the threshold is kept", def, sal(0.5), false, 0.5},
		{"zero salience is archived", def, sal(0), true, 0}, // 0/2
		{"pinned is kept", def, pinned, false, 0.01},
		{"archived is left alone", def, archived, false, 0.01},
		{"archive rung off", noArchive, sal(0.01), false, 0.01},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			archive, s := tt.c.Step(tt.f, time.Time{})
			if archive != tt.wantArchive {
				t.Errorf("Step archive = %v, want %v", archive, tt.wantArchive)
			}
			near(t, "Step salience", s, tt.wantSalience)
		})
	}
}

func TestPolicyLadderStepProtected(t *testing.T) {
	p := Default()
	goal := aged(10, 0)
	goal.Type = "goal"
	goal.Salience = 0.01
	if archive, s := p.LadderStep(goal, time.Time{}); archive || s != 0.01 {
		t.Errorf("LadderStep(goal) = %v, %v; want false, 0.01", archive, s)
	}
	fact := aged(10, 0)
	fact.Salience = 0.01
	if archive, s := p.LadderStep(fact, time.Time{}); !archive || s != 0.005 {
		t.Errorf("LadderStep(fact) = %v, %v; want true, 0.005", archive, s)
	}
}

func TestBump(t *testing.T) {
	def := Default().Ladder // +0.1, capped at 1
	tests := []struct {
		name     string
		in, want float64
	}{
		{"from 0", 0, 0.1},
		{"from 0.5", 0.5, 0.6},
		{"capped at 1", 0.95, 1}, // min(1, 1.05)
		{"at 1", 1, 1},
		{"archived salience", 0.02, 0.12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			near(t, "Bump", def.Bump(tt.in), tt.want)
		})
	}
}

func TestRetrieved(t *testing.T) {
	p := Default()
	f := aged(30, 0)
	f.Salience = 0.5
	f.RetrievalCount = 2
	g := p.Retrieved(f, now)
	if !g.LastRetrievedAt.Equal(now) || g.RetrievalCount != 3 {
		t.Errorf("Retrieved = last %v count %d, want %v 3", g.LastRetrievedAt, g.RetrievalCount, now)
	}
	near(t, "Retrieved salience", g.Salience, 0.6)
	if f.RetrievalCount != 2 {
		t.Error("Retrieved modified its argument")
	}
}

func TestSalienceFades(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	days := func(d float64) time.Time { return now.Add(-time.Duration(d * 24 * float64(time.Hour))) }
	def := Default().Ladder // half-life 30 days
	off := def
	off.SalienceHalfLifeDays = 0
	tests := []struct {
		name string
		c    LadderConfig
		f    Facts
		want float64
	}{
		{"fresh", def, Facts{Salience: 1, CreatedAt: now}, 1},
		{"one half-life since the write", def, Facts{Salience: 1, CreatedAt: days(30)}, 0.5},
		{"two half-lives, stored 0.8", def, Facts{Salience: 0.8, CreatedAt: days(60)}, 0.2},
		{"the last retrieval restarts the clock", def, Facts{Salience: 1, CreatedAt: days(300), LastRetrievedAt: days(30)}, 0.5},
		{"pinned does not fade", def, Facts{Salience: 0.7, CreatedAt: days(300), Pinned: true}, 0.7},
		{"half-life 0: no fading", off, Facts{Salience: 0.7, CreatedAt: days(300)}, 0.7},
		{"future write counts as now", def, Facts{Salience: 0.3, CreatedAt: now.Add(time.Hour)}, 0.3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			near(t, "Salience", tt.c.Salience(tt.f, now), tt.want)
		})
	}
	// The ladder archives by the faded salience and halves the stored one.
	f := Facts{Salience: 1, CreatedAt: days(200)} // 2^(-200/30) = 0.0098
	if archive, s := def.Step(f, now); !archive || s != 0.5 {
		t.Errorf("Step(200 days idle) = %v, %v; want true, 0.5", archive, s)
	}
	if archive, _ := off.Step(f, now); archive {
		t.Error("Step without fading archived a grain at stored salience 1")
	}
	if archive, _ := def.Step(Facts{Salience: 1, CreatedAt: days(200), LastRetrievedAt: days(1)}, now); archive {
		t.Error("Step archived a grain retrieved yesterday")
	}
}
