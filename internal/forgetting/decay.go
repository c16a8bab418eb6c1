package forgetting

import (
	"math"
	"slices"
	"time"
)

// Curve names a retention curve of the decay purge.
type Curve string

// The retention curves. The zero Curve is exponential.
const (
	CurveExponential Curve = "exponential" // 2^(-age/half_life)
	CurveLinear      Curve = "linear"      // max(0, 1 - decay_per_day*age)
	CurveEbbinghaus  Curve = "ebbinghaus"  // e^(-age/strength)
)

// Curves lists the valid curves.
var Curves = []Curve{CurveExponential, CurveLinear, CurveEbbinghaus}

// Defaults of the decay purge (Areev's, where Areev has one).
const (
	DefaultHalfLifeDays   = 30.0
	DefaultDecayPerDay    = 0.01 // lethe's choice: retention 0.5 at 50 days, 0.3 at 70
	DefaultStrengthDays   = 45.0 // lethe's choice: retention 0.5 at 31.2 days, 0.3 at 54.2
	DefaultDecayThreshold = 0.3
	DefaultMinAgeDays     = 7
	DefaultDecayBatch     = 100
)

// DecayConfig is Areev's decay purge: a grain whose retention has fallen
// below Threshold is forgotten (hard-deleted, content and index entries).
//
// Retention is a curve over the effective age, age_days/(1+importance),
// where age counts from creation; importance 1 halves the age. Grains of an
// immune type (default: state) and pinned grains keep retention 1. Grains
// younger than MinAgeDays are never candidates, whatever their retention.
type DecayConfig struct {
	// Enabled turns on scheduled purges. A purge asked for explicitly
	// ("lethe purge stale") runs whatever Enabled says.
	Enabled bool `yaml:"enabled"`
	// Schedule is the interval between scheduled purges.
	Schedule Interval `yaml:"schedule"`

	Curve        Curve   `yaml:"curve"`
	HalfLifeDays float64 `yaml:"half_life_days"` // exponential
	DecayPerDay  float64 `yaml:"decay_per_day"`  // linear
	StrengthDays float64 `yaml:"strength_days"`  // ebbinghaus
	Threshold    float64 `yaml:"threshold"`
	MinAgeDays   int     `yaml:"min_age_days"`
	// Batch is the number of candidates the purge forgets per transaction
	// (and per audit event); a purge forgets every candidate, batch by batch.
	Batch int `yaml:"batch"`
	// Namespace scopes the purge to one namespace; "" means every
	// namespace.
	Namespace string `yaml:"namespace"`
	// ImmuneTypes are grain types whose retention is always 1.
	ImmuneTypes []string `yaml:"immune_types"`
}

// Retention returns the grain's retention in [0,1] at now. It is 1 for
// pinned grains and immune types. A curve parameter that is not a positive
// number (a configuration that skipped validation) makes nothing decay.
func (c DecayConfig) Retention(f Facts, now time.Time) float64 {
	if f.Pinned || slices.Contains(c.ImmuneTypes, f.Type) {
		return 1
	}
	age := f.ageDays(now) / (1 + f.importance())
	switch c.Curve {
	case CurveLinear:
		if !positive(c.DecayPerDay) {
			return 1
		}
		return math.Max(0, 1-c.DecayPerDay*age)
	case CurveEbbinghaus:
		if !positive(c.StrengthDays) {
			return 1
		}
		return math.Exp(-age / c.StrengthDays)
	default:
		if !positive(c.HalfLifeDays) {
			return 1
		}
		return math.Exp2(-age / c.HalfLifeDays)
	}
}

// Candidate reports whether the purge would forget the grain at now: it is
// in the purge's namespace, at least MinAgeDays old, and its retention is
// below Threshold. It does not look at protection or holds; see
// [Policy.PurgeCandidate].
func (c DecayConfig) Candidate(f Facts, now time.Time) bool {
	if c.Namespace != "" && f.Namespace != c.Namespace {
		return false
	}
	if f.ageDays(now) < float64(c.MinAgeDays) {
		return false
	}
	return c.Retention(f, now) < c.Threshold
}
