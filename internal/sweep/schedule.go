package sweep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/lethe-io/lethe/internal/forgetting"
)

// trigger asks the scheduler, if one runs, for a ladder run on memory.
// What runTrigger would ignore is not sent: a send wakes the scheduler's
// goroutine, and every write and recall triggers.
func (s *Sweeper) trigger(memory string, t forgetting.Trigger) {
	if !s.due(memory, t, s.now(), false) {
		return
	}
	select {
	case s.triggers <- triggerEvent{memory: memory, trigger: t}:
	default:
	}
}

// due reports whether trigger t asks for a ladder run on memory at now:
// the ladder is on and takes t, and no trigger started one on memory
// within triggerSpacing. With claim set, a due run is recorded as started.
func (s *Sweeper) due(memory string, t forgetting.Trigger, now time.Time, claim bool) bool {
	if !s.policy.Ladder.Enabled || !slices.Contains(s.policy.Ladder.Triggers, t) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.fired[memory]; ok && now.Sub(last) < triggerSpacing {
		return false
	}
	if claim {
		s.fired[memory] = now
	}
	return true
}

// Wrote fires ingest_complete after a successful write to memory.
func (s *Sweeper) Wrote(memory string) { s.trigger(memory, forgetting.TriggerIngestComplete) }

// exclusive runs fn unless a run of name is in progress in this process.
func (s *Sweeper) exclusive(name string, fn func() error) (bool, error) {
	s.mu.Lock()
	if s.running[name] {
		s.mu.Unlock()
		return false, nil
	}
	s.running[name] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, name)
		s.mu.Unlock()
	}()
	return true, fn()
}

// scheduledPolicy is one policy the scheduler runs on every memory, or
// once (global).
type scheduledPolicy struct {
	name    string
	enabled bool
	every   time.Duration
	run     func(ctx context.Context, memory string) error
	global  bool
}

func (s *Sweeper) scheduled() []scheduledPolicy {
	p := s.policy
	return []scheduledPolicy{
		{policyDecay, p.Decay.Enabled, p.Decay.Schedule.Duration(), func(ctx context.Context, m string) error {
			_, err := s.purgeStale(ctx, PurgeOptions{Memory: m}, false)
			return err
		}, false},
		{policyLadder, p.Ladder.Enabled && slices.Contains(p.Ladder.Triggers, forgetting.TriggerCron), p.Ladder.Schedule.Duration(), func(ctx context.Context, m string) error {
			_, err := s.archiveLadder(ctx, m, ArchiveOptions{Trigger: forgetting.TriggerCron}, false)
			return err
		}, false},
		{policyRetrieval, p.Retrieval.Enabled, p.Retrieval.Schedule.Duration(), func(ctx context.Context, m string) error {
			_, err := s.sweepRetrieval(ctx, m)
			return err
		}, false},
		{policyRisk, p.Risk.Enabled, p.Risk.Schedule.Duration(), func(ctx context.Context, m string) error {
			_, err := s.riskSweep(ctx, m, RiskOptions{}, false)
			return err
		}, false},
		{policyKEK, p.KEK.RotateEvery > 0 && s.rotateKEK != nil, p.KEK.RotateEvery.Duration(), func(ctx context.Context, _ string) error {
			return s.rotateKEK(ctx, p.KEK.Keep)
		}, true},
	}
}

// Run runs the policy's scheduled policies until ctx is done, and
// returns ctx's error. Each enabled policy with a schedule runs on every
// memory once per interval, counted from its last start by any instance
// sharing the database; across replicas at most one runs a policy at a
// time (a PostgreSQL advisory lock; on SQLite, one process). While it
// runs, writes and recalls fire the ladder's ingest_complete and
// query_complete triggers, at most once a minute per memory. New starts
// it when Config.Schedule is set.
func (s *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(schedulerTick)
	defer t.Stop()
	for {
		s.runDue(ctx)
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			case ev := <-s.triggers:
				s.runTrigger(ctx, ev)
				continue
			}
			break
		}
	}
}

// runDue runs every due scheduled policy once.
func (s *Sweeper) runDue(ctx context.Context) {
	for _, p := range s.scheduled() {
		if !p.enabled || p.every <= 0 || ctx.Err() != nil {
			continue
		}
		_, err := s.exclusive("policy:"+p.name, func() error {
			_, err := s.store.RunScheduled(ctx, p.name, s.now().UTC(), p.every, func(ctx context.Context) error {
				if p.global {
					return p.run(ctx, "")
				}
				return s.runEverywhere(ctx, p)
			})
			return err
		})
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("scheduled forgetting policy failed; it runs again at its next interval",
				slog.String("policy", p.name), slog.Any("error", err))
		}
	}
}

// runEverywhere runs p on every memory, going on after a memory fails.
func (s *Sweeper) runEverywhere(ctx context.Context, p scheduledPolicy) error {
	memories, err := s.store.Memories(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range memories {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := p.run(ctx, m); err != nil {
			errs = append(errs, fmt.Errorf("memory %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// runTrigger runs the ladder on a write's or recall's trigger, at most
// once per triggerSpacing per memory.
func (s *Sweeper) runTrigger(ctx context.Context, ev triggerEvent) {
	if !s.due(ev.memory, ev.trigger, s.now(), true) {
		return
	}
	_, err := s.exclusive("ladder:"+ev.memory, func() error {
		_, err := s.archiveLadder(ctx, ev.memory, ArchiveOptions{Trigger: ev.trigger}, false)
		return err
	})
	if err != nil && ctx.Err() == nil {
		s.logger.Warn("archive ladder run failed", slog.String("trigger", string(ev.trigger)), slog.Any("error", err))
	}
}
