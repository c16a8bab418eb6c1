package sweep

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// PurgeOptions selects and tunes a decay purge. Zero fields take the
// policy's values (Config.Policy's decay section). An option outside the
// range a policy file allows for it is an invalid_argument error whose
// field is the option's JSON name (half_life_days), never quoting the
// value; a Batch over grains.MaxBatch is too_large.
type PurgeOptions struct {
	// Memory is the memory to purge ("" means "default").
	Memory string
	// Curve is exponential, linear or ebbinghaus.
	Curve forgetting.Curve
	// HalfLifeDays (exponential), DecayPerDay (linear) and StrengthDays
	// (ebbinghaus) shape the curve.
	HalfLifeDays float64
	DecayPerDay  float64
	StrengthDays float64
	// Threshold: grains whose retention is below it are forgotten.
	Threshold *float64
	// MinAgeDays: younger grains are never candidates.
	MinAgeDays *int
	// Batch is the number of candidates forgotten per transaction (and per
	// grain.purge event), at most grains.MaxBatch (0: the policy's; below 0
	// is an error).
	Batch int
	// Namespace limits the purge to one namespace.
	Namespace string
	// DryRun reports what the purge would do and changes nothing.
	DryRun bool
}

// PurgeResult says what a decay purge did, or with DryRun would do.
type PurgeResult struct {
	DryRun bool             `json:"dry_run"`
	Curve  forgetting.Curve `json:"curve"`
	// Scanned counts the grains (newest versions) whose operational fields
	// were read.
	Scanned int `json:"scanned"`
	// Candidates counts the grains below the threshold that no protection
	// rule keeps.
	Candidates int `json:"candidates"`
	// Forgotten counts the grains deleted (would be deleted), every version
	// of each candidate's chain included.
	Forgotten int `json:"forgotten"`
	// Held counts candidates skipped because a legal hold covers their
	// chain; each refusal is audited.
	Held int `json:"held"`
	// Protected counts grains below the threshold that a protection rule
	// keeps, or whose chain holds a version one keeps (the chain is left
	// whole).
	Protected int `json:"protected"`
	// Pinned counts pinned grains the purge skipped: their retention is 1,
	// and unpinned they would be candidates.
	Pinned int `json:"pinned"`
	// Batches counts the transactions (grain.purge events) of the purge.
	Batches int `json:"batches"`
	// Hashes lists the forgotten hashes, sorted, at most 10,000; Truncated
	// says there were more.
	Hashes    []string `json:"hashes"`
	Truncated bool     `json:"truncated,omitempty"`
	// Events are the ids of the purge's grain.purge events.
	Events []string `json:"events,omitempty"`
	// Receipt is the policy.run event that closes the purge, with its
	// proof; nil for dry runs and purges that changed nothing.
	*audit.Receipt
}

// PurgeStale runs the decay purge on one memory: it reads the operational
// fields of every newest version (no blob, no key), and forgets, batch by
// batch, the grains whose retention is below the threshold, with every
// version of their chains and their index entries, as Forget does.
//
// State grains (the policy's immune types), pinned and protected grains and
// grains younger than the minimum age are never candidates. A candidate
// whose chain a legal hold covers is skipped, and the refusal is audited;
// the purge goes on. Each batch commits with a grain.purge event (policy
// "decay"); a purge that forgot or skipped anything ends with a policy.run
// event whose receipt the result carries. A dry run makes the same
// decisions over the same rows and changes nothing.
func (s *Sweeper) PurgeStale(ctx context.Context, opts PurgeOptions) (*PurgeResult, error) {
	return s.purgeStale(ctx, opts, true)
}

// checkBatch checks the batch of a purge or risk sweep, 0 for the
// policy's: over grains.MaxBatch is too_large, below 0 invalid_argument,
// both naming the field batch.
func checkBatch(batch int) error {
	switch {
	case batch > grains.MaxBatch:
		return grains.FieldError(grains.CodeTooLarge, "batch", "at most 10000")
	case batch < 0:
		return grains.FieldError(grains.CodeInvalidArgument, "batch", "must be at least 1 (left out: the policy's)")
	}
	return nil
}

// decayPolicy returns the policy with opts' overrides, validated.
func (s *Sweeper) decayPolicy(opts *PurgeOptions) (*forgetting.Policy, error) {
	p := *s.policy
	d := &p.Decay
	if opts.Curve != "" {
		d.Curve = opts.Curve
	}
	for _, o := range []struct {
		v   float64
		dst *float64
	}{{opts.HalfLifeDays, &d.HalfLifeDays}, {opts.DecayPerDay, &d.DecayPerDay}, {opts.StrengthDays, &d.StrengthDays}} {
		if o.v != 0 {
			*o.dst = o.v
		}
	}
	if opts.Threshold != nil {
		d.Threshold = *opts.Threshold
	}
	if opts.MinAgeDays != nil {
		d.MinAgeDays = *opts.MinAgeDays
	}
	if err := checkBatch(opts.Batch); err != nil {
		return nil, err
	}
	if opts.Batch != 0 {
		d.Batch = opts.Batch
	}
	if opts.Namespace != "" {
		d.Namespace = opts.Namespace
	}
	if d.Curve == "" {
		d.Curve = forgetting.CurveExponential
	}
	if err := p.Validate(); err != nil {
		return nil, optionError(err)
	}
	return &p, nil
}

// purgeOptions are the options of a purge (PurgeOptions' fields by their
// JSON names, as the HTTP API's body spells them) that the policy's decay
// section validates under the same names.
var purgeOptions = []string{"curve", "half_life_days", "decay_per_day", "strength_days", "threshold", "min_age_days", "batch", "namespace"}

// optionError turns the policy's refusal of a purge's options into
// invalid_argument naming the first option at fault and its rule, never
// the value. The policy itself was valid when loaded, so a problem with
// another key is a bug.
func optionError(err error) error {
	var ve *forgetting.ValidationError
	if errors.As(err, &ve) {
		for _, p := range ve.Problems {
			field, ok := strings.CutPrefix(p.Key, "decay.")
			if !ok || !slices.Contains(purgeOptions, field) {
				continue
			}
			msg := p.Rule
			if msg == "" {
				msg = "out of range"
			}
			return grains.FieldError(grains.CodeInvalidArgument, field, msg)
		}
	}
	return grains.Wrap(grains.CodeInternal, "purge options", err)
}

func (s *Sweeper) purgeStale(ctx context.Context, opts PurgeOptions, wantReceipt bool) (*PurgeResult, error) {
	memory, err := grains.MemoryName(opts.Memory)
	if err != nil {
		return nil, err
	}
	pol, err := s.decayPolicy(&opts)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	res := &PurgeResult{DryRun: opts.DryRun, Curve: pol.Decay.Curve}
	var holds []store.HoldRow
	if opts.DryRun {
		if holds, err = s.store.Holds(ctx, memory); err != nil {
			return nil, err
		}
	}
	keep := func(r store.OpRow) bool { return r.SupersededBy == "" && pol.PurgeCandidate(factsOf(&r), now) }
	var all []string
	var batch []store.OpRow
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		defer func() { batch = batch[:0] }()
		res.Batches++
		if opts.DryRun {
			w, err := s.wouldForget(ctx, memory, batch, holds)
			res.batch(w.Kept, w.Forgot)
			return err
		}
		ids := make([]int64, len(batch))
		for i, r := range batch {
			ids[i] = r.ID
		}
		del, err := s.forgetSeeds(ctx, memory, policyDecay, ids, keep, func(id string) { res.Events = append(res.Events, id) })
		if err != nil {
			return err
		}
		res.batch(del.Kept, del.Hashes)
		all = append(all, del.Hashes...)
		return nil
	}
	err = s.scan(ctx, store.OpScan{Memory: memory, Namespace: pol.Decay.Namespace, Heads: true}, func(r *store.OpRow) (bool, error) {
		res.Scanned++
		f := factsOf(r)
		if !pol.Decay.Candidate(f, now) {
			if unpinned := f; f.Pinned {
				unpinned.Pinned = false
				if pol.Decay.Candidate(unpinned, now) {
					res.Pinned++
				}
			}
			return true, nil
		}
		if prot, _, _ := pol.Protected(f); prot {
			res.Protected++
			return true, nil
		}
		res.Candidates++
		batch = append(batch, *r)
		if len(batch) >= pol.Decay.Batch {
			return true, flush()
		}
		return true, nil
	})
	if err == nil {
		err = flush()
	}
	res.Hashes = sortedHashes(res.Hashes)
	if err != nil {
		return nil, err
	}
	if !opts.DryRun && (len(all) > 0 || res.Held > 0) {
		if res.Receipt, err = s.runEvent(ctx, memory, policyDecay, "", all, wantReceipt); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// batch counts what a batch of candidates did, or would do: forgot, every
// version of the chains deleted, and the seeds whose chains it kept. A
// seed kept for a protected version is counted as protected, not as a
// candidate; one whose chain waits for the cleaner, as neither.
func (r *PurgeResult) batch(k store.Kept, forgot []string) {
	r.Candidates -= len(k.Protected) + len(k.Erasing)
	r.Protected += len(k.Protected)
	r.Held += countHeld(k.Held)
	r.Forgotten += len(forgot)
	addHashes(&r.Hashes, &r.Truncated, forgot...)
}

// wouldForget is a dry run's forget of seeds, decided as ForgetSeeds
// decides (store.SortChains): Forgot holds the hashes of every version of
// the chains it would delete.
func (s *Sweeper) wouldForget(ctx context.Context, memory string, seeds []store.OpRow, holds []store.HoldRow) (wouldForget, error) {
	groups, err := s.store.Chains(ctx, memory, seeds)
	if err != nil {
		return wouldForget{}, err
	}
	w := wouldForget{ChainFate: store.SortChains(groups, seeds, holds, s.protectedRow)}
	for _, r := range w.Gone {
		w.Forgot = append(w.Forgot, r.Hash)
	}
	return w, nil
}

// wouldForget is what a dry run's batch would do.
type wouldForget struct {
	store.ChainFate
	Forgot []string
}

// forgetSeeds forgets one batch of a policy's candidates with its events:
// a grain.purge event for what it deleted and an erasure.refused event per
// hold that kept some. event receives the id of the purge event.
func (s *Sweeper) forgetSeeds(ctx context.Context, memory, policy string, ids []int64, keep func(store.OpRow) bool, event func(id string)) (*store.PolicyDeletion, error) {
	var purgeID string
	del, err := s.store.ForgetSeeds(ctx, memory, ids, keep, s.protectedRow, s.now().UnixMicro(), func(ctx context.Context, d *store.PolicyDeletion) ([]audit.Event, error) {
		purgeID = ""
		evs, err := s.journal.Refusals(ctx, memory, policy, d.Held)
		if err != nil || len(d.Hashes) == 0 {
			return evs, err
		}
		ev, err := s.journal.Bulk(ctx, proofs.EventGrainPurge, memory, policy, "", d.Hashes)
		purgeID = ev.ID
		return append([]audit.Event{ev}, evs...), err
	})
	if err != nil {
		return nil, err
	}
	if purgeID != "" || len(del.Held) > 0 {
		s.journal.Committed()
	}
	if purgeID != "" && event != nil {
		event(purgeID)
	}
	return del, nil
}
