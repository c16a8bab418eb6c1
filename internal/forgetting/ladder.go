package forgetting

import (
	"math"
	"slices"
	"time"
)

// Trigger names an event that may start an archive ladder run.
type Trigger string

// The triggers (MemState's).
const (
	TriggerIngestComplete Trigger = "ingest_complete" // a write or batch finished
	TriggerQueryComplete  Trigger = "query_complete"  // a recall finished
	TriggerCron           Trigger = "cron"            // the ladder's schedule fired
	TriggerMemoryPressure Trigger = "memory_pressure" // the operator or the store asks for room
)

// Triggers lists the valid triggers.
var Triggers = []Trigger{TriggerIngestComplete, TriggerQueryComplete, TriggerCron, TriggerMemoryPressure}

// Defaults of the archive ladder (MemState's).
const (
	DefaultForgetSalienceThreshold = 0.05
	DefaultSoftLimit               = 500
	DefaultScanBound               = 10000
	DefaultRetrievalBump           = 0.1
	// DefaultSalienceHalfLifeDays is lethe's choice (MemState damps
	// salience but names no rate): a grain written at salience 1 and never
	// recalled falls below the default threshold (0.05) after 4.3
	// half-lives, 130 days.
	DefaultSalienceHalfLifeDays = 30.0
)

// Rungs are the archive ladder's steps, lowest first. Only Archive is acted
// on; Summarize and Detach are named so that policies can be written
// against them, and validation refuses to enable them until they exist.
type Rungs struct {
	Archive   bool `yaml:"archive"`
	Summarize bool `yaml:"summarize"`
	Detach    bool `yaml:"detach"`
}

// LadderConfig is MemState's archive ladder. A run scans at most ScanBound
// unarchived grains; each whose salience at the time of the run is below
// ForgetSalienceThreshold is archived (hidden from default recall,
// reachable by explicit lookup) and its salience halved. Salience fades
// while a grain is not reinforced:
//
//	salience(now) = stored * 2^(-t/salience_half_life_days)    t: days since the last retrieval, else since the write
//
// where stored is the salience at the last reinforcement (the write, at 1
// or the salience the writer gave, or the last retrieval). A retrieval
// raises the stored salience by RetrievalBump, capped at 1, and restarts t.
// Archiving is not destructive.
type LadderConfig struct {
	// Enabled turns on runs from every trigger.
	Enabled bool `yaml:"enabled"`
	// Schedule is the interval of the cron trigger.
	Schedule Interval `yaml:"schedule"`

	ForgetSalienceThreshold float64 `yaml:"forget_salience_threshold"`
	// SoftLimit is the grain count from which ingest_complete,
	// query_complete and cron start runs; memory_pressure always does.
	SoftLimit int `yaml:"soft_limit"`
	// ScanBound bounds the grains one run looks at.
	ScanBound int `yaml:"scan_bound"`
	// RetrievalBump is what a retrieval adds to salience.
	RetrievalBump float64 `yaml:"retrieval_bump"`
	// SalienceHalfLifeDays is the time without a retrieval in which
	// salience halves; 0 turns the fading off (salience then changes only
	// by retrievals and archiving).
	SalienceHalfLifeDays float64 `yaml:"salience_half_life_days"`
	// Triggers are the triggers that may start a run.
	Triggers []Trigger `yaml:"triggers"`
	Rungs    Rungs     `yaml:"rungs"`
}

// ShouldRun reports whether trigger starts a run when the memory holds
// grainCount unarchived grains: memory_pressure always does; the others do
// once grainCount reaches SoftLimit. A trigger not listed in Triggers never
// does, nor does any trigger when the ladder is not Enabled.
func (c LadderConfig) ShouldRun(trigger Trigger, grainCount int) bool {
	if !c.Enabled || !slices.Contains(c.Triggers, trigger) {
		return false
	}
	switch trigger {
	case TriggerMemoryPressure:
		return true
	case TriggerIngestComplete, TriggerQueryComplete, TriggerCron:
		return grainCount >= c.SoftLimit
	}
	return false
}

// Salience returns the grain's salience at now: its stored salience
// halved every SalienceHalfLifeDays since it was last retrieved, or
// written if it never was. Pinned grains, and every grain when the
// half-life is not a positive number, keep their stored salience.
func (c LadderConfig) Salience(f Facts, now time.Time) float64 {
	s := clamp01(f.Salience)
	if f.Pinned || !positive(c.SalienceHalfLifeDays) {
		return s
	}
	return s * math.Exp2(-f.idleDays(now)/c.SalienceHalfLifeDays)
}

// Step is one grain's turn in a run at now: archive is true when its
// salience at now ([LadderConfig.Salience]) is below
// ForgetSalienceThreshold, and newSalience, the stored salience after the
// step, is then half the stored one (so the salience at now halves too:
// archiving does not restart the fading). Archived and pinned grains are
// left alone (archive false, salience unchanged), as is every grain when
// the archive rung is off.
func (c LadderConfig) Step(f Facts, now time.Time) (archive bool, newSalience float64) {
	if !c.Rungs.Archive || f.Archived || f.Pinned || !(c.Salience(f, now) < c.ForgetSalienceThreshold) {
		return false, f.Salience
	}
	return true, f.Salience / 2
}

// Bump returns the salience after one retrieval: salience + RetrievalBump,
// capped at 1 (lethe keeps salience in [0,1], where MemState leaves it
// unbounded). Bumping an archived grain does not unarchive it.
func (c LadderConfig) Bump(salience float64) float64 { return c.BumpN(salience, 1) }

// BumpN returns the salience after n retrievals written at once:
// salience + n*RetrievalBump, capped at 1. It is not Bump applied n times:
// the store adds the product in one step, and rounding differs.
func (c LadderConfig) BumpN(salience float64, n int64) float64 {
	return clamp01(salience + c.RetrievalBump*float64(n))
}
