package forgetting

import (
	"math"
	"time"
)

// Defaults of retrieval-time decay (Vitamem's).
const (
	DefaultRetrievalHalfLifeDays = 180.0
	DefaultDecayFloor            = 0.1
	DefaultBoostScale            = 0.1
	DefaultBoostCap              = 0.3
	DefaultMinRetrievalScore     = 0.1
)

// RetrievalConfig is Vitamem's retrieval-time decay: a score in [0,1] that
// ranks recall results and, in a sweep, archives grains nobody retrieves.
//
//	decay = max(floor, 1 - t/(2*half_life))        t: days since the last retrieval, else since creation
//	boost = min(boost_cap, log1p(retrieval_count)*boost_scale)
//	score = min(1, decay + boost)                  pinned grains: 1
type RetrievalConfig struct {
	// Enabled turns on decay in ranking and the archive sweep.
	Enabled bool `yaml:"enabled"`
	// Schedule is the interval between archive sweeps.
	Schedule Interval `yaml:"schedule"`

	HalfLifeDays float64 `yaml:"half_life_days"`
	Floor        float64 `yaml:"floor"`
	BoostScale   float64 `yaml:"boost_scale"`
	BoostCap     float64 `yaml:"boost_cap"`
	// MinRetrievalScore: a grain whose score is at or below it is archived
	// by the sweep. "At or below", where Vitamem says "below": the default
	// equals the floor, so a strict comparison would never archive anything;
	// with it, a grain archives once its decay reaches the floor and it was
	// never retrieved.
	MinRetrievalScore float64 `yaml:"min_retrieval_score"`
}

// Score returns the grain's retrieval score in [0,1] at now. A half-life
// that is not a positive number (a configuration that skipped validation)
// makes nothing decay.
func (c RetrievalConfig) Score(f Facts, now time.Time) float64 {
	if f.Pinned || !positive(c.HalfLifeDays) {
		return 1
	}
	t := f.idleDays(now)
	decay := math.Max(c.Floor, 1-t/(2*c.HalfLifeDays))
	boost := 0.0
	if f.RetrievalCount > 0 {
		boost = math.Min(c.BoostCap, math.Log1p(float64(f.RetrievalCount))*c.BoostScale)
	}
	return clamp01(decay + boost)
}

// ShouldArchive reports whether the sweep archives the grain at now: it is
// neither archived nor pinned and its score is at or below
// MinRetrievalScore.
func (c RetrievalConfig) ShouldArchive(f Facts, now time.Time) bool {
	if f.Archived || f.Pinned {
		return false
	}
	return c.Score(f, now) <= c.MinRetrievalScore
}

// Rank returns relevance weighted by the grain's score: relevance * score.
// Recall sorts by it, highest first. With decay disabled it returns
// relevance.
func (c RetrievalConfig) Rank(relevance float64, f Facts, now time.Time) float64 {
	if !c.Enabled {
		return relevance
	}
	return relevance * c.Score(f, now)
}
