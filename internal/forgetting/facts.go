package forgetting

import (
	"math"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
)

// Facts are the operational fields of one grain: everything a forgetting
// policy reads. The store fills them from clear columns, so policies run
// without keys; no personal field is here.
type Facts struct {
	Type       string
	Namespace  string
	Importance float64 // in [0,1]
	Salience   float64 // in [0,1]
	Pinned     bool
	Archived   bool

	// CreatedAt is when the grain was written. A zero CreatedAt counts as
	// age 0: a grain whose creation time is unknown is never forgotten by
	// age.
	CreatedAt time.Time
	// LastRetrievedAt is the last time a recall returned the grain; zero if
	// it never was.
	LastRetrievedAt time.Time
	RetrievalCount  int64
}

// FactsOf returns the operational fields of g.
func FactsOf(g *grains.Grain) Facts {
	f := Facts{
		Type:           g.Type,
		Namespace:      g.Namespace,
		Importance:     g.Importance,
		Salience:       g.Salience,
		Pinned:         g.Pinned,
		Archived:       g.Archived,
		CreatedAt:      g.CreatedAt,
		RetrievalCount: g.RetrievalCount,
	}
	if g.LastRetrievedAt != nil {
		f.LastRetrievedAt = *g.LastRetrievedAt
	}
	return f
}

// ageDays is the age of the grain in days at now (since creation), never
// negative; a zero CreatedAt gives 0.
func (f Facts) ageDays(now time.Time) float64 {
	return daysSince(f.CreatedAt, now)
}

// idleDays is the number of days since the grain was last retrieved, or
// since it was created if it never was; never negative.
func (f Facts) idleDays(now time.Time) float64 {
	if !f.LastRetrievedAt.IsZero() {
		return daysSince(f.LastRetrievedAt, now)
	}
	return daysSince(f.CreatedAt, now)
}

// importance returns the grain's importance clamped to [0,1] (NaN counts as
// 0), so that a corrupt row cannot turn a formula into NaN.
func (f Facts) importance() float64 { return clamp01(f.Importance) }

const secondsPerDay = 24 * 60 * 60

// daysSince returns the days from t to now as a float, 0 if t is zero or in
// the future (clock skew never makes a grain younger than new).
func daysSince(t, now time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	d := now.Sub(t).Seconds() / secondsPerDay
	if d < 0 {
		return 0
	}
	return d
}

func clamp01(x float64) float64 {
	switch {
	case math.IsNaN(x) || x < 0:
		return 0
	case x > 1:
		return 1
	}
	return x
}

// positive reports whether x is a finite number above zero.
func positive(x float64) bool { return x > 0 && !math.IsInf(x, 1) }
