package hooks

import (
	"math/rand/v2"
	"time"
)

// Backoff returns how long to wait before attempt n+1 after n failed
// attempts (n >= 1): a duration drawn uniformly from [base*2^(n-1)/2,
// base*2^(n-1)], capped at max ("equal jitter": never less than half the
// exponential step, so retries spread out but still back off). r draws the
// jitter; nil means the global source.
func Backoff(n int, base, max time.Duration, r *rand.Rand) time.Duration {
	if n < 1 {
		n = 1
	}
	d := base
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	half := d / 2
	var j int64
	if half > 0 {
		if r != nil {
			j = r.Int64N(int64(half) + 1)
		} else {
			j = rand.Int64N(int64(half) + 1)
		}
	}
	return half + time.Duration(j)
}

// Circuit is a hook's circuit breaker: one for every engine over a
// database, which the store holds with the hook.
type Circuit struct {
	// Failures counts the hook's consecutive failed attempts, of any of
	// its deliveries, since a receiver last accepted one.
	Failures int
	// PausedUntil, unless zero, is when the hook's pause ends: before it
	// no delivery of the hook is attempted; after it, one at a time (a
	// probe), until an attempt is accepted, which closes the circuit (the
	// zero Circuit), or fails, which pauses the hook again.
	PausedUntil time.Time
	// Pause is the length of the last pause.
	Pause time.Duration
}

// Breaker pauses a hook whose attempts keep failing, so that a receiver
// that is down gets one attempt a pause instead of every pending
// delivery's own retries.
type Breaker struct {
	// After is the number of consecutive failed attempts that pauses a
	// hook.
	After int
	// Pause is the first pause; each failed probe doubles it, up to
	// MaxPause.
	Pause, MaxPause time.Duration
}

// Fail returns c after an attempt that failed at now: one failure more. A
// hook that reaches After failures is paused for Pause, and one whose
// pause has ended (the probe failed) is paused again for twice its last
// pause, at most MaxPause, whatever its count: After opens a closed
// circuit only, so a probe that fails after After was raised above the
// count (a restart with a larger hooks.pause_after) still pauses the hook
// instead of leaving it sending one probe after another. A failure during
// a pause (of an attempt that started before it) leaves the pause as it
// is.
func (b Breaker) Fail(c Circuit, now time.Time) Circuit {
	c.Failures++
	if now.Before(c.PausedUntil) {
		return c
	}
	if c.PausedUntil.IsZero() && c.Failures < b.After {
		return c
	}
	if c.Pause <= 0 {
		c.Pause = b.Pause
	} else {
		c.Pause = min(max(2*c.Pause, b.Pause), b.MaxPause)
	}
	c.PausedUntil = now.Add(c.Pause)
	return c
}
