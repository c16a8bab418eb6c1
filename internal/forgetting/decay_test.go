package forgetting

import (
	"testing"
	"time"
)

func TestRetention(t *testing.T) {
	exp := Default().Decay // half-life 30 days
	lin := exp
	lin.Curve = CurveLinear // 0.01 per day
	ebb := exp
	ebb.Curve = CurveEbbinghaus // strength 45 days
	pinned := aged(1000, 0)
	pinned.Pinned = true
	state := aged(1000, 0)
	state.Type = "state"
	future := aged(0, 0)
	future.CreatedAt = now.Add(48 * time.Hour)
	unknown := aged(0, 0)
	unknown.CreatedAt = time.Time{}
	badHalfLife := exp
	badHalfLife.HalfLifeDays = 0

	tests := []struct {
		name string
		c    DecayConfig
		f    Facts
		want float64
	}{
		// Exponential: 2^(-age/(1+importance)/30).
		{"exp age 0", exp, aged(0, 0), 1},                                         // 2^0
		{"exp age 15", exp, aged(15, 0), 0.7071067811865476},                      // 2^-0.5 = 1/sqrt(2)
		{"exp age 30", exp, aged(30, 0), 0.5},                                     // 2^-1
		{"exp age 60", exp, aged(60, 0), 0.25},                                    // 2^-2
		{"exp age 90", exp, aged(90, 0), 0.125},                                   // 2^-3
		{"exp age 60 importance 1", exp, aged(60, 1), 0.5},                        // effective age 60/2 = 30: 2^-1
		{"exp age 45 importance 0.5", exp, aged(45, 0.5), 0.5},                    // 45/1.5 = 30: 2^-1
		{"exp age 90 importance 0.5", exp, aged(90, 0.5), 0.25},                   // 90/1.5 = 60: 2^-2
		{"exp age 120 importance 0.25", exp, aged(120, 0.25), 0.1088188204120155}, // 120/1.25 = 96: 2^-3.2 = 0.125 * 0.87055056

		// Linear: max(0, 1 - 0.01*age/(1+importance)).
		{"linear age 7", lin, aged(7, 0), 0.93},                   // 1 - 0.07
		{"linear age 50", lin, aged(50, 0), 0.5},                  // 1 - 0.5
		{"linear age 30 importance 0.5", lin, aged(30, 0.5), 0.8}, // 30/1.5 = 20: 1 - 0.2
		{"linear age 100 importance 1", lin, aged(100, 1), 0.5},   // 100/2 = 50: 1 - 0.5
		{"linear age 100", lin, aged(100, 0), 0},                  // 1 - 1
		{"linear age 150 clamps at 0", lin, aged(150, 0), 0},      // max(0, 1 - 1.5)

		// Ebbinghaus: e^(-age/(1+importance)/45).
		{"ebbinghaus age 0", ebb, aged(0, 0), 1},                                          // e^0
		{"ebbinghaus age 45", ebb, aged(45, 0), 0.36787944117144233},                      // e^-1
		{"ebbinghaus age 90", ebb, aged(90, 0), 0.1353352832366127},                       // e^-2
		{"ebbinghaus age 90 importance 1", ebb, aged(90, 1), 0.36787944117144233},         // 90/2 = 45: e^-1
		{"ebbinghaus age 67.5 importance 0.5", ebb, aged(67.5, 0.5), 0.36787944117144233}, // 67.5/1.5 = 45: e^-1

		// Exemptions and edge cases.
		{"state grains never decay", exp, state, 1},
		{"pinned grains never decay", exp, pinned, 1},
		{"created in the future counts as age 0", exp, future, 1},
		{"unknown creation time counts as age 0", exp, unknown, 1},
		{"invalid half-life decays nothing", badHalfLife, aged(1000, 0), 1},
		{"importance above 1 is clamped", exp, aged(60, 3), 0.5}, // treated as 1: 60/2 = 30: 2^-1
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			near(t, "Retention", tt.c.Retention(tt.f, now), tt.want)
		})
	}
}

func TestCandidate(t *testing.T) {
	def := Default().Decay // threshold 0.3, min age 7 days, every namespace
	strict := def
	strict.Threshold = 1
	half := def
	half.Threshold = 0.5
	scoped := def
	scoped.Namespace = "support"
	pinned := aged(1000, 0)
	pinned.Pinned = true
	state := aged(1000, 0)
	state.Type = "state"
	archived := aged(60, 0)
	archived.Archived = true
	inSupport := aged(60, 0)
	inSupport.Namespace = "support"
	unknown := aged(0, 0)
	unknown.CreatedAt = time.Time{}

	tests := []struct {
		name string
		c    DecayConfig
		f    Facts
		want bool
	}{
		{"retention 0.25 is below 0.3", def, aged(60, 0), true},            // 2^-2
		{"retention 0.5 is not", def, aged(30, 0), false},                  // 2^-1
		{"importance 1 keeps a 60-day grain", def, aged(60, 1), false},     // 2^-1
		{"importance 0.5 at 90 days", def, aged(90, 0.5), true},            // 2^-2
		{"younger than min_age_days never", strict, aged(6.9, 0), false},   // 2^-0.23 < 1, but 6.9 < 7
		{"exactly min_age_days is old enough", strict, aged(7, 0), true},   // 2^(-7/30) = 0.85 < 1
		{"retention equal to threshold is kept", half, aged(30, 0), false}, // 0.5 < 0.5 is false
		{"state grains never", def, state, false},
		{"pinned grains never", def, pinned, false},
		{"archived grains are purged too", def, archived, true},
		{"other namespace is out of scope", scoped, aged(60, 0), false},
		{"own namespace is in scope", scoped, inSupport, true},
		{"unknown creation time never", strict, unknown, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Candidate(tt.f, now); got != tt.want {
				t.Errorf("Candidate = %v, want %v (retention %v)", got, tt.want, tt.c.Retention(tt.f, now))
			}
		})
	}
}

func TestPolicyPurgeCandidate(t *testing.T) {
	p := Default()
	caveat := aged(1000, 0)
	caveat.Type = "caveat"
	tests := []struct {
		name string
		f    Facts
		want bool
	}{
		{"old fact", aged(1000, 0.8), true}, // 1000/1.8 = 555 days: 2^-18.5
		{"old caveat is protected", caveat, false},
		{"importance 0.9 is protected", aged(1000, 0.9), false}, // 2^-17.5, but protected
		{"young fact", aged(3, 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.PurgeCandidate(tt.f, now); got != tt.want {
				t.Errorf("PurgeCandidate = %v, want %v", got, tt.want)
			}
		})
	}
}
