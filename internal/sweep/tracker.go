package sweep

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
)

// isListing reports whether q lists a memory (no filter at all). Listings
// stay newest first; queries are ranked.
func isListing(q *grains.Query) bool {
	return q.Subject == "" && q.Relation == "" && q.Object == "" && q.Type == "" && q.Namespace == "" &&
		q.Scope == "" && q.UserID == "" && len(q.Tags) == 0
}

// Recalled ranks a recall's page gs in place (unless q is a listing),
// queues the retrieval statistics of what it returns (ids are the grains'
// row ids), and fires query_complete; of a disclosure read (q.Disclosure)
// it only scores the page.
func (s *Sweeper) Recalled(q *grains.Query, gs []grains.Grain, ids []int64) {
	now := s.now().UTC()
	if q.Disclosure {
		s.score(gs, now) // reported, not recorded
		return
	}
	s.trigger(q.Memory, forgetting.TriggerQueryComplete)
	if len(gs) == 0 {
		return
	}
	s.score(gs, now)
	if !isListing(q) {
		rank(&s.policy.Retrieval, gs)
	}
	s.trackRetrievals(now, ids)
}

// Searched records a ranked search's answer gs: the grains' scores, the
// query trigger, and the retrieval of the grains with row ids ids (search
// ranks its answer itself, by relevance times decay).
func (s *Sweeper) Searched(memory string, now time.Time, gs []grains.Grain, ids []int64) {
	s.trigger(memory, forgetting.TriggerQueryComplete)
	s.score(gs, now.UTC())
	if len(ids) > 0 {
		s.trackRetrievals(now.UTC(), ids)
	}
}

// score sets each grain's Scores at now: what the forgetting policies see
// of it (Vitamem's retrieval score, the ladder's faded salience, the decay
// purge's retention).
func (s *Sweeper) score(gs []grains.Grain, now time.Time) {
	for i := range gs {
		f := forgetting.FactsOf(&gs[i])
		gs[i].Scores = &grains.Scores{Retrieval: s.policy.Retrieval.Score(f, now),
			Salience: s.policy.Ladder.Salience(f, now), Retention: s.policy.Decay.Retention(f, now)}
	}
}

// rank orders gs by relevance (1 for every exact match) times the
// retrieval score, highest first; ties keep their order (newest first).
// Pinned grains score 1. The scores are those score set (Scores.Retrieval,
// Rank's score at the same time); with the decay off every grain ranks 1.
func rank(c *forgetting.RetrievalConfig, gs []grains.Grain) {
	if !c.Enabled {
		return
	}
	slices.SortStableFunc(gs, func(a, b grains.Grain) int { return cmp.Compare(b.Scores.Retrieval, a.Scores.Retrieval) })
}

// trackRetrievals adds the retrieval of the grains with row ids ids to the
// statistics waiting for the tracker, without blocking on it: past
// retrievalMax waiting grains, a new grain's update is dropped and counted.
func (s *Sweeper) trackRetrievals(now time.Time, ids []int64) {
	f := s
	at := now.UnixMicro()
	f.stats.mu.Lock()
	if f.stats.pending == nil {
		f.stats.pending = map[int64]store.Retrieval{}
	}
	for _, id := range ids {
		r, ok := f.stats.pending[id]
		if !ok && len(f.stats.pending) >= retrievalMax {
			f.dropped.Add(1)
			continue
		}
		r.ID, r.Count, r.LastUS = id, r.Count+1, max(r.LastUS, at)
		f.stats.pending[id] = r
	}
	full := len(f.stats.pending) >= retrievalFlushSize
	f.stats.mu.Unlock()
	if full {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// DroppedRetrievals returns the number of retrieval-statistics updates
// dropped because too many waited or the write failed since Open.
// Dropping one loses a salience bump and a count; it never loses data.
func (s *Sweeper) DroppedRetrievals() int64 { return s.dropped.Load() }

// Flush writes the queued retrieval statistics now. After Close it
// returns at once: Close wrote them.
func (s *Sweeper) Flush(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case s.flushes <- done:
	case <-s.tracked:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retrievals are the statistics waiting for the tracker, by grain row id.
// Recalls add to them under a mutex rather than sending on a channel: a
// send woke the tracker's goroutine at every recall, which cost a recall a
// thread wake-up and the tracker a context switch.
type retrievals struct {
	mu      sync.Mutex
	pending map[int64]store.Retrieval
}

// runTracker writes the waiting retrieval statistics every retrievalFlush,
// or when retrievalFlushSize grains wait, until stop closes; then it
// writes what is left.
func (s *Sweeper) runTracker(stop <-chan struct{}) {
	f := s
	t := time.NewTicker(retrievalFlush)
	defer t.Stop()
	flush := func() {
		f.stats.mu.Lock()
		taken := f.stats.pending
		f.stats.pending = nil
		f.stats.mu.Unlock()
		if len(taken) == 0 {
			return
		}
		rs := slices.Collect(maps.Values(taken))
		// In id order: one lock order across instances, and neighbouring
		// rows in one transaction.
		slices.SortFunc(rs, func(a, b store.Retrieval) int { return cmp.Compare(a.ID, b.ID) })
		var took time.Duration
		for i := 0; i < len(rs); i += retrievalTx {
			if i > 0 {
				// Statistics are background work: between two
				// transactions the tracker rests as long as the last one
				// took (at most retrievalRest), so that a backlog of
				// them (a burst of recalls) takes at most half of a core
				// from the recalls and writes of the moment.
				select {
				case <-time.After(min(took, retrievalRest)):
				case <-stop:
				}
			}
			start := time.Now()
			part := rs[i:min(i+retrievalTx, len(rs))]
			// Each transaction has its own deadline: a backlog's
			// transactions and rests together may take longer.
			// Background work: on SQLite it takes the lock when free
			// rather than queue before requests (store.Background).
			ctx, cancel := context.WithTimeout(store.Background(context.Background()), 30*time.Second)
			err := s.store.RecordRetrievals(ctx, part, f.policy.Ladder.RetrievalBump)
			cancel()
			took = time.Since(start)
			if err != nil {
				n := int64(0)
				for _, r := range part {
					n += r.Count
				}
				f.dropped.Add(n)
				s.logger.Warn("could not record retrieval statistics; they are dropped", slog.Any("error", err))
			}
		}
	}
	for {
		select {
		case <-stop:
			flush()
			return
		case done := <-f.flushes:
			flush()
			close(done)
		case <-f.kick:
			flush()
		case <-t.C:
			flush()
		}
	}
}

// AutoPin pins g when an auto-pin rule of the policy matches it.
func (s *Sweeper) AutoPin(g *grains.Grain) {
	if !g.Pinned && len(s.policy.AutoPin) > 0 {
		g.Pinned = s.policy.AutoPinned(forgetting.PinFields(g))
	}
}
