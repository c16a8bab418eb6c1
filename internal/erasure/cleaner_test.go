package erasure

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves. The cleaner waits on one timer at a
// time, so the live timer is the one registered last.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	at      time.Time // the live timer's deadline
	ch      chan time.Time
	waiting int // timers registered
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at, f.ch = f.now.Add(d), make(chan time.Time, 1)
	f.waiting++
	return f.ch
}

// registered waits until the cleaner has registered n timers, that is,
// until it waits again after what the test did.
func (f *fakeClock) registered(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		w := f.waiting
		f.mu.Unlock()
		if w >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cleaner registered %d timers, want %d", w, n)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// advance moves the clock to at, firing the live timer if it is due.
func (f *fakeClock) advance(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = at
	if f.ch != nil && !f.at.After(at) {
		f.ch <- at
		f.ch = nil
	}
}

// TestCleanerSchedule drives a cleaner with random streams of kicks on a
// fake clock and checks each purge's time against a model: at once at the
// start; after a kick, CleanerQuiet after the last kick of its stream but
// at most CleanerMaxDelay after its first; without a kick, CleanerEvery
// after the last purge. Kicks that arrive while a purge runs start the
// next stream.
func TestCleanerSchedule(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		start := time.Unix(1_000_000, 0)
		clock := &fakeClock{now: start}
		purges := make(chan time.Time, 1)
		// A purge kicked during it (an erasure that commits meanwhile).
		kickDuring := map[int]bool{}
		c := NewCleaner(nil, nil)
		n := 0
		c.purge = func(context.Context) (int, error) {
			n++
			if kickDuring[n] {
				c.Kick()
			}
			purges <- clock.Now()
			return 0, nil
		}
		c.now, c.after = clock.Now, clock.After
		// Kick times: bursts of 1 to 40 kicks closer than the quiet
		// period (some longer than the maximum delay), apart by more than
		// it, some by more than CleanerEvery.
		var kicks []time.Time
		at := start
		for range 8 {
			at = at.Add(CleanerQuiet + time.Duration(rng.Int64N(int64(2*CleanerEvery))))
			for range 1 + rng.IntN(40) {
				at = at.Add(time.Duration(rng.Int64N(int64(CleanerQuiet))) + time.Microsecond) // never on a whole millisecond
				kicks = append(kicks, at)
			}
		}
		for i := 2; i < 40; i++ {
			kickDuring[i] = rng.IntN(5) == 0
		}

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); c.Run(ctx) }()

		// The model: the purges' times up to end.
		model := func(end time.Time) []time.Time {
			want := []time.Time{start}
			now, k := start, 0
			for {
				var first time.Time
				switch {
				case kickDuring[len(want)]:
					first = now
				case k < len(kicks) && kicks[k].Before(now.Add(CleanerEvery)):
					first = kicks[k]
					k++
				default:
					if now = now.Add(CleanerEvery); now.After(end) {
						return want
					}
					want = append(want, now)
					continue
				}
				last := first
				for k < len(kicks) && kicks[k].Before(purgeAt(first, last)) {
					last = kicks[k]
					k++
				}
				if now = purgeAt(first, last); now.After(end) {
					return want
				}
				want = append(want, now)
			}
		}
		end := kicks[len(kicks)-1].Add(2 * CleanerEvery)
		want := model(end)

		// Drive the cleaner: move the clock to the next kick or the live
		// timer's deadline, whichever comes first.
		var got []time.Time
		got = append(got, <-purges)
		timers := 1
		clock.registered(t, timers)
		k := 0
		for {
			clock.mu.Lock()
			deadline := clock.at
			clock.mu.Unlock()
			if k < len(kicks) && kicks[k].Before(deadline) {
				clock.advance(kicks[k])
				k++
				c.Kick()
				timers++
				clock.registered(t, timers)
				continue
			}
			if deadline.After(end) {
				break
			}
			clock.advance(deadline)
			select {
			case p := <-purges:
				got = append(got, p)
			case <-time.After(10 * time.Second):
				t.Fatalf("seed %d: no purge at the deadline %v", seed, deadline.Sub(start))
			}
			timers++
			clock.registered(t, timers)
		}
		cancel()
		<-done

		if len(got) != len(want) {
			t.Fatalf("seed %d: %d purges, the model %d", seed, len(got), len(want))
		}
		for i := range got {
			if !got[i].Equal(want[i]) {
				t.Fatalf("seed %d: purge %d at %v, the model at %v", seed, i, got[i].Sub(start), want[i].Sub(start))
			}
		}
	}
}
