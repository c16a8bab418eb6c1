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
