package sweep

import (
	"context"
	"log/slog"

	"github.com/lethe-io/lethe/proofs"
)

// CheckForget refuses an explicit forget of the grains of memory named by
// hashes when a protection rule of the policy keeps any version of the
// chains it would delete, and audits the refusal (an erasure.refused event
// of reason protected). With force (ForceForget: a data-protection officer
// acting on an erasure request) it refuses nothing, and override reports
// that a rule was overridden. Forgets by subject or user are erasure
// requests about a person: their callers do not check (holds still refuse
// them).
func (s *Sweeper) CheckForget(ctx context.Context, memory string, hashes []string, force bool) (override bool, err error) {
	hash, perr, err := s.Protected(ctx, memory, hashes)
	if err != nil || perr == nil {
		return false, err
	}
	if force {
		return true, nil
	}
	ev, eerr := s.journal.Event(ctx, proofs.EventErasureRefused, memory, func(l *proofs.Leaf) {
		l.Hashes, l.Reason = []string{hash}, "protected"
	})
	if eerr == nil {
		eerr = s.journal.Append(ctx, ev)
	}
	if eerr != nil {
		s.logger.Error("could not audit a refused forget", slog.Any("error", eerr))
	}
	return false, perr
}

// Protected returns the first grain of the chains of hashes that a
// protection rule keeps from an explicit forget, with the rule's refusal
// (code protected), or perr nil when none is; it audits nothing (a dry
// run's check). err is a failure to read the store.
func (s *Sweeper) Protected(ctx context.Context, memory string, hashes []string) (hash string, perr, err error) {
	if len(hashes) == 0 {
		return "", nil, nil
	}
	rows, err := s.store.ChainOps(ctx, memory, hashes)
	if err != nil {
		return "", nil, err
	}
	for i := range rows {
		if perr := s.policy.CheckForget(factsOf(&rows[i])); perr != nil {
			return rows[i].Hash, perr, nil
		}
	}
	return "", nil, nil
}
