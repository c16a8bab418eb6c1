package sweep

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// ArchiveOptions starts an archive ladder run.
type ArchiveOptions struct {
	// Trigger is what starts the run (default memory_pressure, which always
	// runs; the others run once the memory holds the policy's soft limit of
	// unarchived grains).
	Trigger forgetting.Trigger
	// DryRun reports what the run would archive and changes nothing.
	DryRun bool
}

// ArchiveResult says what an archive run, or an explicit archive, did.
type ArchiveResult struct {
	DryRun  bool               `json:"dry_run"`
	Trigger forgetting.Trigger `json:"trigger,omitempty"`
	// Ran is false when the trigger does not start a run (the ladder is
	// off, the trigger is not in the policy, or the memory is below the
	// soft limit).
	Ran bool `json:"ran"`
	// Live is the number of unarchived grains the soft limit was compared with.
	Live int64 `json:"live"`
	// Scanned counts the grains looked at (at most the scan bound).
	Scanned int `json:"scanned"`
	// Archived counts the grains archived (would be archived).
	Archived int `json:"archived"`
	// Protected counts grains below the salience threshold that a
	// protection rule keeps.
	Protected int `json:"protected"`
	// Hashes lists the archived hashes, sorted, at most 10,000; Truncated
	// says there were more.
	Hashes    []string `json:"hashes"`
	Truncated bool     `json:"truncated,omitempty"`
	// Events are the ids of the grain.archive events.
	Events []string `json:"events,omitempty"`
	// Receipt is the last event's (the policy.run event for a ladder run,
	// the last grain.archive event for an explicit archive), with its proof.
	*audit.Receipt
}

// Archive runs the archive ladder on one memory. The trigger decides
// whether it runs (see [ArchiveOptions.Trigger]); a run looks at most at
// the policy's scan bound of unarchived newest versions whose salience is
// below the threshold, oldest first, and archives each that no protection
// rule keeps, halving its salience. Archived grains leave default recall
// and stay reachable with grains.Query.IncludeArchived and Get. Archiving is not
// destructive, so legal holds do not stop it. Each batch commits with a
// grain.archive event (policy "ladder"); a run that archived anything ends
// with a policy.run event whose reason is the trigger.
func (s *Sweeper) Archive(ctx context.Context, memory string, opts ArchiveOptions) (*ArchiveResult, error) {
	return s.archiveLadder(ctx, memory, opts, true)
}

func (s *Sweeper) archiveLadder(ctx context.Context, memory string, opts ArchiveOptions, wantReceipt bool) (*ArchiveResult, error) {
	memory, err := grains.MemoryName(memory)
	if err != nil {
		return nil, err
	}
	if opts.Trigger == "" {
		opts.Trigger = forgetting.TriggerMemoryPressure
	}
	if !slices.Contains(forgetting.Triggers, opts.Trigger) {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "trigger", "must be one of ingest_complete, query_complete, cron, memory_pressure")
	}
	pol := s.policy
	res := &ArchiveResult{DryRun: opts.DryRun, Trigger: opts.Trigger}
	if res.Live, err = s.store.CountLive(ctx, memory); err != nil {
		return nil, err
	}
	if !pol.Ladder.ShouldRun(opts.Trigger, int(res.Live)) {
		res.Hashes = sortedHashes(res.Hashes)
		return res, nil
	}
	res.Ran = true
	threshold := pol.Ladder.ForgetSalienceThreshold
	now := s.now().UTC()
	var ids []int64
	if threshold > 0 {
		bound := pol.Ladder.ScanBound
		below := threshold
		if pol.Ladder.SalienceHalfLifeDays > 0 {
			// Salience fades with time, which the stored column does not
			// show: every unarchived grain is a candidate, up to the bound.
			below = 0
		}
		err = s.scan(ctx, store.OpScan{Memory: memory, Heads: true, Unarchived: true, SalienceBelow: below, Limit: min(scanPage, bound)},
			func(r *store.OpRow) (bool, error) {
				res.Scanned++
				f := factsOf(r)
				if arch, _ := pol.Ladder.Step(f, now); arch {
					if prot, _, _ := pol.Protected(f); prot {
						res.Protected++
					} else {
						ids = append(ids, r.ID)
						if opts.DryRun {
							addHashes(&res.Hashes, &res.Truncated, r.Hash)
						}
					}
				}
				return res.Scanned < bound, nil
			})
		if err != nil {
			return nil, err
		}
	}
	if opts.DryRun {
		res.Archived = len(ids)
		res.Hashes = sortedHashes(res.Hashes)
		return res, nil
	}
	keep := func(r store.OpRow) bool {
		arch, _ := pol.LadderStep(factsOf(&r), now)
		return arch
	}
	all, _, err := s.archiveIDs(ctx, memory, policyLadder, string(opts.Trigger), ids, 0.5, keep, res)
	if err != nil {
		return nil, err
	}
	if len(all) > 0 {
		if res.Receipt, err = s.runEvent(ctx, memory, policyLadder, string(opts.Trigger), all, wantReceipt); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// archiveIDs archives rows in batches, one grain.archive event each, and
// returns every archived hash and the number of ids that named no row, or
// a row an erasure made unreadable, when their batch ran (store.Archival).
func (s *Sweeper) archiveIDs(ctx context.Context, memory, policy, reason string, ids []int64, factor float64, keep func(store.OpRow) bool, res *ArchiveResult) ([]string, int, error) {
	var all []string
	gone := 0
	for i := 0; i < len(ids); i += archiveBatch {
		var ev audit.Event
		ar, err := s.store.ArchiveRows(ctx, memory, ids[i:min(i+archiveBatch, len(ids))], factor, keep, s.now().UnixMicro(),
			func(ctx context.Context, hashes []string) ([]audit.Event, error) {
				var err error
				ev, err = s.journal.Bulk(ctx, proofs.EventGrainArchive, memory, policy, reason, hashes)
				return []audit.Event{ev}, err
			})
		if err != nil {
			return all, gone, err
		}
		done := ar.Hashes
		gone += ar.Gone
		if len(done) > 0 {
			s.journal.Committed()
			res.Events = append(res.Events, ev.ID)
			if policy == "" {
				res.Receipt = &audit.Receipt{EventID: ev.ID, Leaf: ev.Leaf}
			}
		}
		res.Archived += len(done)
		addHashes(&res.Hashes, &res.Truncated, done...)
		all = append(all, done...)
	}
	res.Hashes = sortedHashes(res.Hashes)
	return all, gone, nil
}

// ArchiveGrains archives the named grains of memory (any version): they
// leave default recall and stay reachable with grains.Query.IncludeArchived and
// Get. Grains already archived are left as they are. Each archiveBatch
// grains commit with a grain.archive event of their own; Events lists them
// and Receipt is the last one's. It fails with not_found if no hash names
// a grain of memory.
func (s *Sweeper) ArchiveGrains(ctx context.Context, memory string, hashes []string) (*ArchiveResult, error) {
	memory, err := grains.MemoryName(memory)
	if err != nil {
		return nil, err
	}
	if len(hashes) == 0 {
		return nil, &grains.Error{Code: grains.CodeEmptySelector, Field: "hashes", Message: "name the grains to archive"}
	}
	if len(hashes) > grains.MaxBatch {
		return nil, grains.FieldError(grains.CodeTooLarge, "hashes", "at most 10000 hashes")
	}
	for i, h := range hashes {
		if !grains.ValidHash(h) {
			return nil, grains.FieldError(grains.CodeInvalidArgument, fmt.Sprintf("hashes[%d]", i), "must be 64 lowercase hex digits")
		}
	}
	rows, err := s.store.OpsByHashes(ctx, memory, hashes)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, grains.NoGrains(memory)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	res := &ArchiveResult{Ran: true}
	_, gone, err := s.archiveIDs(ctx, memory, "", "", ids, 1, nil, res)
	if err != nil {
		return nil, err
	}
	if gone == len(ids) {
		// An erasure (or a forget) took every row after they were read:
		// the hashes name nothing now, as they would have before.
		return nil, grains.NoGrains(memory)
	}
	if res.Receipt != nil {
		if res.Receipt, err = s.journal.Receipt(ctx, res.Receipt.EventID, res.Receipt.Leaf); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// ShouldArchive returns the hashes of the unarchived newest versions of
// memory whose retrieval score is at or below the policy's
// min_retrieval_score (Vitamem's shouldArchive), sorted. Pinned and
// protected grains are never listed. It reads operational fields only and
// changes nothing; the retrieval sweep (retrieval.schedule) archives them.
func (s *Sweeper) ShouldArchive(ctx context.Context, memory string) ([]string, error) {
	memory, err := grains.MemoryName(memory)
	if err != nil {
		return nil, err
	}
	var out []string
	now := s.now().UTC()
	err = s.scan(ctx, store.OpScan{Memory: memory, Heads: true, Unarchived: true}, func(r *store.OpRow) (bool, error) {
		if s.policy.RetrievalArchive(factsOf(r), now) {
			out = append(out, r.Hash)
		}
		return true, nil
	})
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out, err
}

// sweepRetrieval archives what ShouldArchive lists: the retrieval policy's
// scheduled sweep. Salience is left as it is.
func (s *Sweeper) sweepRetrieval(ctx context.Context, memory string) (*ArchiveResult, error) {
	now := s.now().UTC()
	pol := s.policy
	var ids []int64
	res := &ArchiveResult{Ran: true}
	err := s.scan(ctx, store.OpScan{Memory: memory, Heads: true, Unarchived: true}, func(r *store.OpRow) (bool, error) {
		res.Scanned++
		if pol.RetrievalArchive(factsOf(r), now) {
			ids = append(ids, r.ID)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	keep := func(r store.OpRow) bool { return pol.RetrievalArchive(factsOf(&r), now) }
	all, _, err := s.archiveIDs(ctx, memory, policyRetrieval, "", ids, 1, keep, res)
	if err != nil {
		return nil, err
	}
	if len(all) > 0 {
		_, err = s.runEvent(ctx, memory, policyRetrieval, "", all, false)
	}
	return res, err
}
