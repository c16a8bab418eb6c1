package forgetting

import (
	"math"
	"testing"
	"time"
)

// now is the fixed "now" of every test: no test reads a clock.
var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

const tolerance = 1e-9

// ago returns the time d days before now.
func ago(d float64) time.Time { return now.Add(-time.Duration(d * 24 * float64(time.Hour))) }

// aged returns the facts of an unpinned, never retrieved "fact" grain in
// the default namespace, created days ago with the given importance.
func aged(days, importance float64) Facts {
	return Facts{Type: "fact", Namespace: "default", Importance: importance, Salience: 1, CreatedAt: ago(days)}
}

// retrieved returns the facts of a grain created a year ago, retrieved
// count times, last retrieved days ago.
func retrieved(days float64, count int64, importance float64) Facts {
	f := aged(365, importance)
	f.LastRetrievedAt = ago(days)
	f.RetrievalCount = count
	return f
}

func near(tb testing.TB, name string, got, want float64) {
	tb.Helper()
	if math.Abs(got-want) > tolerance {
		tb.Errorf("%s = %.17g, want %.17g", name, got, want)
	}
}
