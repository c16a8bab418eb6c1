package hooks

import (
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestBreakerModel runs random failures, acceptances, redelivers, clock
// steps and changes of the threshold (a restart with another
// hooks.pause_after) through Breaker.Fail, against docs/api.md's "Pause"
// read as a state machine: a closed circuit opens at After consecutive
// failures, for Pause; a failure while paused changes nothing but the
// count; a failed probe (the pause over) pauses again for twice the last
// pause, at most MaxPause, whatever After now is; an accepted attempt
// closes the circuit; a redeliver ends the pause and the next failure
// pauses for Pause.
func TestBreakerModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := Breaker{After: rapid.IntRange(1, 6).Draw(t, "after"), Pause: time.Minute, MaxPause: 8 * time.Minute}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var c Circuit
		// The model: closed with a count, or paused until a time (and
		// probing once that time has passed), with the last pause's
		// length (0 after a redeliver).
		var failures int
		var paused bool
		var until time.Time
		var last time.Duration
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 5: // a failed attempt
				failures++
				switch {
				case paused && now.Before(until):
				case paused: // a failed probe
					last = min(max(2*last, b.Pause), b.MaxPause)
					until = now.Add(last)
				case failures >= b.After:
					paused, last, until = true, b.Pause, now.Add(b.Pause)
				}
				c = b.Fail(c, now)
			case op == 5: // accepted
				failures, paused, until, last = 0, false, time.Time{}, 0
				c = Circuit{}
			case op == 6: // redeliver: the next due delivery goes alone
				if paused {
					until, last = now, 0
					c.PausedUntil, c.Pause = now, 0
				}
			case op == 7:
				b.After = rapid.IntRange(1, 12).Draw(t, "new after")
			default:
				now = now.Add(rapid.SampledFrom([]time.Duration{time.Second, 30 * time.Second, time.Minute, 5 * time.Minute}).Draw(t, "step"))
			}
			want := Circuit{Failures: failures, Pause: last}
			if paused {
				want.PausedUntil = until
			}
			if c != want {
				t.Fatalf("at %v with After %d: circuit %+v, the model %+v", now.Format(time.TimeOnly), b.After, c, want)
			}
		}
	})
}
