package forgetting

import "testing"

func TestScore(t *testing.T) {
	def := Default().Retrieval // half-life 180, floor 0.1, boost 0.1*log1p(n) capped at 0.3
	pinned := retrieved(1000, 0, 0)
	pinned.Pinned = true
	bad := def
	bad.HalfLifeDays = -1

	tests := []struct {
		name string
		c    RetrievalConfig
		f    Facts
		want float64
	}{
		{"just created", def, aged(0, 0), 1},                                                              // 1 - 0
		{"created 180 days ago, never retrieved", def, aged(180, 0), 0.5},                                 // 1 - 180/360
		{"created 90 days ago", def, aged(90, 0), 0.75},                                                   // 1 - 90/360
		{"at the floor", def, aged(324, 0), 0.1},                                                          // max(0.1, 1 - 0.9)
		{"past the floor", def, aged(400, 0), 0.1},                                                        // max(0.1, 1 - 1.11)
		{"retrieved once 180 days ago", def, retrieved(180, 1, 0), 0.5693147180559945},                    // 0.5 + ln(2)*0.1
		{"retrieved 19 times 180 days ago", def, retrieved(180, 19, 0), 0.799573227355399},                // 0.5 + ln(20)*0.1
		{"retrieved twice 90 days ago, created long before", def, retrieved(90, 2, 0), 0.859861228866811}, // 0.75 + ln(3)*0.1
		{"boost is capped at 0.3", def, retrieved(400, 100, 0), 0.4},                                      // 0.1 + min(0.3, ln(101)*0.1 = 0.46)
		{"score is capped at 1", def, retrieved(0, 100, 0), 1},                                            // min(1, 1 + 0.3)
		{"pinned never decays", def, pinned, 1},
		{"invalid half-life decays nothing", bad, aged(400, 0), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			near(t, "Score", tt.c.Score(tt.f, now), tt.want)
		})
	}
}

func TestShouldArchive(t *testing.T) {
	def := Default().Retrieval // min_retrieval_score 0.1
	pinned := aged(400, 0)
	pinned.Pinned = true
	archived := aged(400, 0)
	archived.Archived = true
	tests := []struct {
		name string
		f    Facts
		want bool
	}{
		{"at the floor, never retrieved", aged(400, 0), true},     // 0.1 <= 0.1
		{"just reaching the floor", aged(324, 0), true},           // 1 - 0.9 -> floor 0.1
		{"above the floor", aged(300, 0), false},                  // 1 - 300/360 = 0.1667
		{"retrieved once, long ago", retrieved(400, 1, 0), false}, // 0.1 + ln(2)*0.1 = 0.169
		{"pinned", pinned, false},
		{"already archived", archived, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := def.ShouldArchive(tt.f, now); got != tt.want {
				t.Errorf("ShouldArchive = %v, want %v (score %v)", got, tt.want, def.Score(tt.f, now))
			}
		})
	}

	p := Default()
	caveat := aged(400, 0)
	caveat.Type = "caveat"
	if p.RetrievalArchive(caveat, now) {
		t.Error("RetrievalArchive archived a protected caveat")
	}
	if !p.RetrievalArchive(aged(400, 0), now) {
		t.Error("RetrievalArchive kept a fact at the floor")
	}
}

func TestRank(t *testing.T) {
	def := Default().Retrieval
	off := def
	off.Enabled = false
	tests := []struct {
		name      string
		c         RetrievalConfig
		relevance float64
		f         Facts
		want      float64
	}{
		{"fresh grain keeps its relevance", def, 0.8, aged(0, 0), 0.8}, // 0.8 * 1
		{"half-decayed grain", def, 0.8, aged(180, 0), 0.4},            // 0.8 * 0.5
		{"grain at the floor", def, 0.9, aged(400, 0), 0.09},           // 0.9 * 0.1
		{"decay disabled", off, 0.8, aged(180, 0), 0.8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			near(t, "Rank", tt.c.Rank(tt.relevance, tt.f, now), tt.want)
		})
	}
}
