package erasure

import (
	"context"
	"log/slog"
	"time"
)

// A Cleaner runs the purge of the rows that erasures made unreadable (the
// grain rows, their blind tokens and text postings: store.DB.CleanupErased
// and DrainPostings) in the background, after the erasures rather than
// beside them.
//
// An erasure kicks it ([Cleaner.Kick]). It then waits for the kicks to
// stop for [CleanerQuiet], but never longer than [CleanerMaxDelay] after
// the first kick it waits for, and purges every pending erasure at once.
// The purge cost an erasure twice its own work (lethe-load, 100,000 grains
// on PostgreSQL, four clients: 29 ms of the machine's CPU per erasure with
// the purge beside it, about 13 without), and its transactions, older than
// the erasures that commit while they run, held those erasures' scrubs
// back (see store.waitOlder). Taken together, the purge also rewrites the
// text index's blocks of common words once for many users. The rows it
// deletes are unreadable from the erasure's commit on (their key is
// destroyed and scrubbed); the delay only decides when they leave the
// tables. Without a kick it purges every [CleanerEvery], for the jobs
// another replica or a crash left.
type Cleaner struct {
	purge func(context.Context) (int, error)
	log   *slog.Logger
	kick  chan struct{}

	// now and after are the clock (time.Now and time.After, but for
	// tests).
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

const (
	// CleanerQuiet is how long the cleaner waits after the last erasure
	// before it purges.
	CleanerQuiet = 250 * time.Millisecond
	// CleanerMaxDelay bounds how long it waits after the first erasure
	// of a stream.
	CleanerMaxDelay = 2 * time.Second
	// CleanerEvery is how often it purges without a kick.
	CleanerEvery = 5 * time.Second
)

// NewCleaner returns a cleaner that calls purge (which purges everything
// pending and returns the rows it deleted) and logs its failures to log.
func NewCleaner(purge func(context.Context) (int, error), log *slog.Logger) *Cleaner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cleaner{purge: purge, log: log, kick: make(chan struct{}, 1), now: time.Now, after: time.After}
}

// Kick tells the cleaner an erasure committed. It never blocks.
func (c *Cleaner) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run purges at once, then as the kicks and CleanerEvery say, until ctx
// ends. A purge that fails is logged and tried again at the next one.
func (c *Cleaner) Run(ctx context.Context) {
	for {
		if _, err := c.purge(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("cleanup of erased grains failed; it resumes later", slog.Any("error", err))
		}
		select {
		case <-c.kick: // an erasure committed during the purge
		default:
			select {
			case <-ctx.Done():
				return
			case <-c.after(CleanerEvery):
				continue
			case <-c.kick:
			}
		}
		if !c.settle(ctx) {
			return
		}
	}
}

// settle waits, after a kick, until purgeAt; false when ctx ended first.
func (c *Cleaner) settle(ctx context.Context) bool {
	first := c.now()
	last := first
	for {
		wait := purgeAt(first, last).Sub(c.now())
		if wait <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-c.kick:
			last = c.now()
		case <-c.after(wait):
			return true
		}
	}
}

// purgeAt is when the cleaner purges after kicks from first to last: a
// quiet period after the last, at most CleanerMaxDelay after the first.
func purgeAt(first, last time.Time) time.Time {
	at := last.Add(CleanerQuiet)
	if limit := first.Add(CleanerMaxDelay); limit.Before(at) {
		return limit
	}
	return at
}
