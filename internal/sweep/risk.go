package sweep

import (
	"context"
	"errors"
	"log/slog"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// RiskOptions tunes a risk sweep.
type RiskOptions struct {
	// Batch is the number of grains per transaction, at most
	// grains.MaxBatch (0: the decay purge's batch; below 0 is an error).
	Batch int
	// DryRun reports what the sweep would do and changes nothing.
	DryRun bool
}

// RiskItem is one grain the sweep acts on (or a protection rule keeps).
type RiskItem struct {
	Hash   string  `json:"hash"`
	Action string  `json:"action"` // compress, drop, protected, held or kept (not compressible)
	Risk   float64 `json:"risk"`
}

// RiskResult says what a risk sweep did, or with DryRun would do.
type RiskResult struct {
	DryRun  bool `json:"dry_run"`
	Scanned int  `json:"scanned"`
	// Compressed counts grains replaced by their summaries.
	Compressed int `json:"compressed"`
	// Dropped counts grains forgotten, every version of their chains.
	Dropped int `json:"dropped"`
	// Protected counts grains at risk that a protection rule keeps, and
	// grains to drop whose chain holds a version one keeps (the chain is
	// left whole; the item says protected).
	Protected int `json:"protected"`
	// Held counts grains at risk that a legal hold keeps; each refusal is
	// audited.
	Held int `json:"held"`
	// Kept counts grains due for compression that the summarizer cannot
	// make smaller, that are unreadable (erased) or whose summary would
	// duplicate a live grain.
	Kept int `json:"kept"`
	// Items lists the grains at risk with their action and risk, at most
	// 10,000.
	Items     []RiskItem `json:"items"`
	Truncated bool       `json:"truncated,omitempty"`
	Events    []string   `json:"events,omitempty"`
	// Receipt is the policy.run event that closes the sweep.
	*audit.Receipt
}

func (r *RiskResult) item(hash, action string, risk float64) {
	if len(r.Items) == maxReportHashes {
		r.Truncated = true
		return
	}
	r.Items = append(r.Items, RiskItem{Hash: hash, Action: action, Risk: risk})
}

// dropped counts what a batch of drops did, or would do, and lists each of
// drops with its action: protected or held (its chain kept, k), or dropped
// (in forgot, every version of the chains deleted); a grain whose chain
// waits for the cleaner (k.Erasing) or that no longer qualified gets no
// item.
func (r *RiskResult) dropped(drops []store.OpRow, riskOf map[string]float64, k store.Kept, forgot []string) {
	r.Dropped += len(forgot)
	r.Held += countHeld(k.Held)
	r.Protected += len(k.Protected)
	action := map[string]string{}
	for _, h := range forgot {
		action[h] = string(forgetting.ActionDrop)
	}
	for _, hs := range k.Held {
		for _, h := range hs {
			action[h] = "held"
		}
	}
	for _, h := range k.Protected {
		action[h] = string(forgetting.ActionProtected)
	}
	for _, h := range k.Erasing {
		delete(action, h)
	}
	for _, d := range drops {
		if a, ok := action[d.Hash]; ok {
			r.item(d.Hash, a, riskOf[d.Hash])
		}
	}
}

// RiskSweep runs linksee-memory's risk sweep on one memory over the newest
// versions: a grain whose risk reaches drop_at is forgotten with every
// version of its chain (as Forget does); one whose risk reaches
// compress_at is replaced by its summary ([Summarizer]; by default the
// triple without the content). The summary takes the grain's place in its
// version chain, so history keeps the version, but the old sealed text is
// deleted, not superseded: a superseded version would keep it. Caveats,
// goals, pinned grains and grains of importance >= 0.9 (the policy's
// protection rules) are never touched. Both actions destroy data, so a
// grain a legal hold covers is skipped and the refusal audited. Drops
// commit with grain.purge events, compressions with grain.supersede events
// of reason compressed (old and new hashes), both policy "risk"; a sweep
// that changed or was refused anything ends with a policy.run event. A dry
// run changes nothing.
func (s *Sweeper) RiskSweep(ctx context.Context, memory string, opts RiskOptions) (*RiskResult, error) {
	return s.riskSweep(ctx, memory, opts, true)
}

func (s *Sweeper) riskSweep(ctx context.Context, memory string, opts RiskOptions, wantReceipt bool) (*RiskResult, error) {
	memory, err := grains.MemoryName(memory)
	if err != nil {
		return nil, err
	}
	pol := s.policy
	if err := checkBatch(opts.Batch); err != nil {
		return nil, err
	}
	if opts.Batch == 0 {
		opts.Batch = pol.Decay.Batch
	}
	now := s.now().UTC()
	res := &RiskResult{DryRun: opts.DryRun, Items: []RiskItem{}}
	holds, err := s.store.Holds(ctx, memory)
	if err != nil {
		return nil, err
	}
	actionOf := func(r *store.OpRow) forgetting.Action {
		if r.SupersededBy != "" {
			return forgetting.ActionNone
		}
		a, _ := pol.Assess(factsOf(r), now)
		return a
	}
	riskOf := map[string]float64{}
	var all []string
	var drops, compresses []store.OpRow
	flushDrops := func() error {
		if len(drops) == 0 {
			return nil
		}
		defer func() { drops = drops[:0] }()
		if opts.DryRun {
			w, err := s.wouldForget(ctx, memory, drops, holds)
			if err != nil {
				return err
			}
			res.dropped(drops, riskOf, w.Kept, w.Forgot)
			return nil
		}
		ids := make([]int64, len(drops))
		for i, r := range drops {
			ids[i] = r.ID
		}
		keep := func(r store.OpRow) bool { return actionOf(&r) == forgetting.ActionDrop }
		del, err := s.forgetSeeds(ctx, memory, policyRisk, ids, keep, func(id string) { res.Events = append(res.Events, id) })
		if err != nil {
			return err
		}
		res.dropped(drops, riskOf, del.Kept, del.Hashes)
		all = append(all, del.Hashes...)
		return nil
	}
	flushCompresses := func() error {
		if len(compresses) == 0 {
			return nil
		}
		defer func() { compresses = compresses[:0] }()
		done, err := s.compress(ctx, memory, compresses, holds, opts.DryRun, actionOf, res, riskOf)
		all = append(all, done...)
		return err
	}
	err = s.scan(ctx, store.OpScan{Memory: memory, Heads: true}, func(r *store.OpRow) (bool, error) {
		res.Scanned++
		f := factsOf(r)
		action, risk := pol.Assess(f, now)
		switch action {
		case forgetting.ActionProtected:
			if wouldAct(&pol.Risk, risk) {
				res.Protected++
				res.item(r.Hash, string(action), risk)
			}
		case forgetting.ActionDrop:
			riskOf[r.Hash] = risk
			drops = append(drops, *r)
			if len(drops) >= opts.Batch {
				return true, flushDrops()
			}
		case forgetting.ActionCompress:
			riskOf[r.Hash] = risk
			compresses = append(compresses, *r)
			if len(compresses) >= opts.Batch {
				return true, flushCompresses()
			}
		}
		return true, nil
	})
	if err == nil {
		err = flushDrops()
	}
	if err == nil {
		err = flushCompresses()
	}
	if err != nil {
		return nil, err
	}
	if !opts.DryRun && (len(all) > 0 || res.Held > 0) {
		if res.Receipt, err = s.runEvent(ctx, memory, policyRisk, "", all, wantReceipt); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// wouldAct reports whether risk reaches an action threshold.
func wouldAct(c *forgetting.RiskConfig, risk float64) bool {
	return (c.DropAt > 0 && risk >= c.DropAt) || (c.CompressAt > 0 && risk >= c.CompressAt)
}

// errBadSummary is a summary that is not a valid grain.
var errBadSummary = errors.New("the summarizer returned an invalid grain")

// summarize decrypts row and seals its summary in its place (unless
// dryRun, which only checks that there is one).
func (s *Sweeper) summarize(ctx context.Context, row *store.GrainRow, dryRun bool) (*store.Replacement, error) {
	g, err := s.sealer.Open(ctx, row)
	if err != nil {
		return nil, err
	}
	sum, err := s.summarizer.Summarize(*g)
	if err != nil {
		return nil, err
	}
	// The summary stays under the grain's key chain, in its place.
	sum.Hash, sum.Memory, sum.Scope, sum.UserID, sum.Supersedes = "", g.Memory, g.Scope, g.UserID, g.Supersedes
	if err := sum.Validate(); err != nil {
		s.logger.Warn("summarizer returned an invalid grain; the grain is kept", slog.Any("error", err))
		return nil, errBadSummary
	}
	if dryRun {
		return nil, nil
	}
	n, err := s.sealer.Seal(ctx, &sum)
	if err != nil {
		return nil, err
	}
	return &store.Replacement{OldID: row.ID, Old: row.Hash, New: n}, nil
}

// compress replaces one batch of grains by their summaries and returns
// the hashes concerned (old and new).
func (s *Sweeper) compress(ctx context.Context, memory string, rows []store.OpRow, holds []store.HoldRow, dryRun bool,
	actionOf func(*store.OpRow) forgetting.Action, res *RiskResult, riskOf map[string]float64) ([]string, error) {
	var reps []store.Replacement
	for i := range rows {
		r := &rows[i]
		if dryRun && store.HoldOn(holds, r.Scope, r.UserRef) != "" {
			res.Held++
			res.item(r.Hash, "held", riskOf[r.Hash])
			continue
		}
		row, err := s.store.GrainByHash(ctx, memory, r.Hash)
		if grains.ErrorCode(err) == grains.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		rep, err := s.summarize(ctx, row, dryRun)
		switch {
		case err == nil:
			if dryRun {
				res.Compressed++
				res.item(r.Hash, string(forgetting.ActionCompress), riskOf[r.Hash])
			} else {
				reps = append(reps, *rep)
			}
		case errors.Is(err, forgetting.ErrNotCompressible), grains.ErrorCode(err) == grains.CodeErased, errors.Is(err, errBadSummary):
			res.Kept++
			res.item(r.Hash, "kept", riskOf[r.Hash])
		default:
			return nil, err
		}
	}
	if dryRun || len(reps) == 0 {
		return nil, nil
	}
	keep := func(r store.OpRow) bool { return actionOf(&r) == forgetting.ActionCompress }
	var evID string
	out, err := s.store.ReplaceGrains(ctx, memory, reps, keep, s.now().UnixMicro(), func(ctx context.Context, rp *store.Replaced) ([]audit.Event, error) {
		evID = ""
		evs, err := s.journal.Refusals(ctx, memory, policyRisk, rp.Held)
		if err != nil || len(rp.Done) == 0 {
			return evs, err
		}
		var pairs []string
		for _, d := range rp.Done {
			pairs = append(pairs, d.Old, d.New.Hash)
		}
		ev, err := s.journal.Event(ctx, proofs.EventGrainSupersede, memory, func(l *proofs.Leaf) {
			audit.SetHashes(l, pairs)
			l.Policy, l.Reason = policyRisk, "compressed"
		})
		evID = ev.ID
		return append([]audit.Event{ev}, evs...), err
	})
	if err != nil {
		return nil, err
	}
	s.journal.Committed()
	if evID != "" {
		res.Events = append(res.Events, evID)
	}
	res.Compressed += len(out.Done)
	res.Held += countHeld(out.Held)
	res.Kept += out.Skipped
	var hashes []string
	for _, d := range out.Done {
		res.item(d.Old, string(forgetting.ActionCompress), riskOf[d.Old])
		hashes = append(hashes, d.Old, d.New.Hash)
	}
	for _, hs := range out.Held {
		for _, h := range hs {
			res.item(h, "held", riskOf[h])
		}
	}
	return hashes, nil
}
