package forgetting

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// Action is what the risk sweep does to one grain.
type Action string

// The actions.
const (
	ActionNone      Action = "none"      // keep the grain as it is
	ActionCompress  Action = "compress"  // replace it by its summary (see [Summarizer])
	ActionDrop      Action = "drop"      // forget it (hard delete)
	ActionProtected Action = "protected" // a protection rule keeps it; never touched
)

// Defaults of the risk sweep (linksee-memory's, and lethe's heat).
const (
	DefaultCompressAt        = 50.0
	DefaultDropAt            = 200.0
	DefaultHeatPerAccess     = 10.0
	DefaultHeatWindowDays    = 90.0
	DefaultProtectImportance = 0.9
)

// RiskConfig is linksee-memory's risk sweep:
//
//	risk = (1 - heat/100) * (1 - importance) * days * (1 + days/30)
//
// where days count from the last retrieval, else from creation. A risk at
// or above DropAt drops the grain; else at or above CompressAt compresses
// it. A threshold of 0 turns its action off.
//
// linksee-memory stores heat; lethe derives it from the clear retrieval
// statistics, in [0,100]:
//
//	heat = min(100, retrieval_count * heat_per_access) * max(0, 1 - days_since_retrieval/heat_window_days)
//
// so a grain never retrieved has heat 0, and heat fades to 0 over the
// window after the last retrieval.
//
// Pinned grains, grains of a protected type (default caveat and goal) and
// grains with importance at or above ProtectImportance are protected: the
// sweep never touches them, and an explicit forget of one refuses (see
// [RiskConfig.Protected]).
type RiskConfig struct {
	// Enabled turns on scheduled sweeps. A sweep asked for explicitly
	// runs whatever Enabled says.
	Enabled bool `yaml:"enabled"`
	// Schedule is the interval between scheduled sweeps.
	Schedule Interval `yaml:"schedule"`

	CompressAt        float64  `yaml:"compress_at"`
	DropAt            float64  `yaml:"drop_at"`
	HeatPerAccess     float64  `yaml:"heat_per_access"`
	HeatWindowDays    float64  `yaml:"heat_window_days"`
	ProtectedTypes    []string `yaml:"protected_types"`
	ProtectImportance float64  `yaml:"protect_importance"`
}

// Heat returns the grain's heat in [0,100] at now.
func (c RiskConfig) Heat(f Facts, now time.Time) float64 {
	if f.RetrievalCount <= 0 || f.LastRetrievedAt.IsZero() {
		return 0
	}
	h := math.Min(100, float64(f.RetrievalCount)*c.HeatPerAccess)
	if positive(c.HeatWindowDays) {
		h *= math.Max(0, 1-daysSince(f.LastRetrievedAt, now)/c.HeatWindowDays)
	}
	if math.IsNaN(h) || h < 0 {
		return 0
	}
	return h
}

// Risk returns the grain's forgetting risk at now, protected or not.
func (c RiskConfig) Risk(f Facts, now time.Time) float64 {
	days := f.idleDays(now)
	return (1 - c.Heat(f, now)/100) * (1 - f.importance()) * days * (1 + days/30)
}

// Assess returns what the sweep does to the grain at now, and its risk. A
// protected grain gives ActionProtected (with its risk, for reports); else
// drop is checked before compress.
func (c RiskConfig) Assess(f Facts, now time.Time) (Action, float64) {
	risk := c.Risk(f, now)
	if p, _, _ := c.Protected(f); p {
		return ActionProtected, risk
	}
	switch {
	case c.DropAt > 0 && risk >= c.DropAt:
		return ActionDrop, risk
	case c.CompressAt > 0 && risk >= c.CompressAt:
		return ActionCompress, risk
	}
	return ActionNone, risk
}

// Protected reports whether a protection rule keeps the grain, and if so a
// reason and a hint for the refusal of an explicit forget. Both name only
// operational facts (the rule, the type, the importance), never personal
// data.
func (c RiskConfig) Protected(f Facts) (protected bool, reason, hint string) {
	switch {
	case f.Pinned:
		return true, "the grain is pinned",
			"a data-protection officer can override protection: lethe forget --force, or \"force\": true in the API"
	case slices.Contains(c.ProtectedTypes, f.Type):
		return true, fmt.Sprintf("grains of type %q are protected by policy (risk.protected_types)", f.Type),
			"a data-protection officer can override protection (lethe forget --force, or \"force\": true in the API), or remove the type from risk.protected_types in the policy"
	case f.importance() >= c.ProtectImportance:
		return true, fmt.Sprintf("importance %s is at or above the protection threshold %s (risk.protect_importance)",
				formatFloat(f.importance()), formatFloat(c.ProtectImportance)),
			"a data-protection officer can override protection (lethe forget --force, or \"force\": true in the API), or raise risk.protect_importance in the policy"
	}
	return false, "", ""
}

func formatFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
