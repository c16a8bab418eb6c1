package lethe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// Automatic forgetting: the store side of package forgetting's policies.
// Every scan reads operational columns only (store.OpRow), never a blob,
// so the decay purge, the ladder and the retrieval sweep run without keys;
// the risk sweep's compress decrypts the grains it summarizes. See
// docs/compliance/forgetting.md.

// Policy is a forgetting policy: the decay purge, the archive ladder,
// retrieval-time decay, the risk sweep and auto-pin rules. Get one from
// [DefaultPolicy], [LoadPolicy] or [ParsePolicy]; policies/default.yaml
// documents every setting.
type Policy = forgetting.Policy

// PolicyError lists every problem of an invalid policy, each with its key
// path and line.
type PolicyError = forgetting.ValidationError

// Curve names a retention curve of the decay purge.
type Curve = forgetting.Curve

// Trigger names an event that may start an archive ladder run.
type Trigger = forgetting.Trigger

// Summarizer compresses a grain for the risk sweep.
type Summarizer = forgetting.Summarizer

// The retention curves.
const (
	CurveExponential = forgetting.CurveExponential
	CurveLinear      = forgetting.CurveLinear
	CurveEbbinghaus  = forgetting.CurveEbbinghaus
)

// The archive ladder's triggers.
const (
	TriggerIngestComplete = forgetting.TriggerIngestComplete
	TriggerQueryComplete  = forgetting.TriggerQueryComplete
	TriggerCron           = forgetting.TriggerCron
	TriggerMemoryPressure = forgetting.TriggerMemoryPressure
)

// DefaultPolicy returns the default policy (policies/default.yaml): the
// ladder and retrieval-time decay on, the destructive policies (decay
// purge, risk sweep) not scheduled.
func DefaultPolicy() *Policy { return forgetting.Default() }

// LoadPolicy reads and validates a policy file. A validation failure is a
// *PolicyError naming the file and every problem.
func LoadPolicy(path string) (*Policy, error) { return forgetting.Load(path) }

// ParsePolicy parses and validates a policy; see [LoadPolicy].
func ParsePolicy(b []byte) (*Policy, error) { return forgetting.Parse(b) }

// Limits of the policy runs.
const (
	// scanPage is the number of operational rows one scan query reads.
	scanPage = 10000
	// archiveBatch is the number of grains one archive transaction (and
	// one grain.archive event) covers.
	archiveBatch = 1000
	// maxReportHashes bounds the hashes a result lists; counts stay exact.
	maxReportHashes = 10000
	// retrievalMax bounds the grains whose retrieval statistics wait to be
	// written; past it, updates of further grains are dropped and counted.
	retrievalMax = 4 * retrievalFlushSize
	// retrievalFlush is how often pending retrieval statistics are written.
	// A retrieval rewrites its grain's row, and rows retrieved together
	// are rarely neighbours: on SQLite each costs a page written to the
	// WAL and checkpointed. The longer statistics wait, the more of them
	// share a page (and a grain retrieved twice is written once).
	retrievalFlush = time.Second
	// retrievalFlushSize writes pending statistics early once this many
	// grains wait.
	retrievalFlushSize = 50000
	// retrievalTx bounds the grains one transaction of statistics updates,
	// so that a flush holds SQLite's write lock for short spans.
	retrievalTx = 2000
	// schedulerTick is how often RunPolicies looks for due policies.
	schedulerTick = time.Minute
	// triggerSpacing is the least time between two ladder runs of one
	// memory started by ingest_complete or query_complete.
	triggerSpacing = time.Minute
)

// The policy names in audit leaves.
const (
	policyDecay     = "decay"
	policyLadder    = "ladder"
	policyRetrieval = "retrieval"
	policyRisk      = "risk"
	// policyKEK is the scheduled KEK rotation (kek.rotate_every); it
	// runs once, not per memory, and its events are kek.rotate and kek.trim.
	policyKEK = "kek-rotate"
)

// forgetter is a DB's forgetting state.
type forgetter struct {
	policy     *forgetting.Policy
	summarizer forgetting.Summarizer

	stats   retrievals
	kick    chan struct{} // retrievalFlushSize grains wait
	flushes chan chan struct{}
	dropped atomic.Int64

	triggers chan triggerEvent

	mu      sync.Mutex
	running map[string]bool      // policy runs in progress in this process
	fired   map[string]time.Time // memory -> last ladder run from a write or recall trigger
}

type triggerEvent struct {
	memory  string
	trigger Trigger
}

// openForgetting validates the policy, prepares the scheduler's table and
// starts the retrieval tracker (and, with cfg.Schedule, the scheduler).
func (db *DB) openForgetting(ctx context.Context, cfg *Config) error {
	p := forgetting.Default()
	if cfg.Policy != nil {
		cp := *cfg.Policy // Validate compiles patterns into the copy; the caller's stays untouched
		p = &cp
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("forgetting policy: %w", err)
	}
	if err := db.store.MigrateForgetting(ctx); err != nil {
		return err
	}
	f := &forgetter{
		policy:     p,
		summarizer: cfg.Summarizer,
		kick:       make(chan struct{}, 1),
		flushes:    make(chan chan struct{}),
		triggers:   make(chan triggerEvent, 64),
		running:    map[string]bool{},
		fired:      map[string]time.Time{},
	}
	if f.summarizer == nil {
		f.summarizer = forgetting.TripleSummarizer{}
	}
	db.forget = f

	stopTracker := make(chan struct{})
	trackerDone := make(chan struct{})
	go func() {
		defer close(trackerDone)
		db.runTracker(stopTracker)
	}()
	var closers []func() error
	if cfg.Schedule {
		sctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			db.RunPolicies(WithActor(sctx, "scheduler"))
		}()
		closers = append(closers, func() error { cancel(); <-done; return nil })
	}
	// The tracker stops after the scheduler and flushes what is pending.
	closers = append(closers, func() error { close(stopTracker); <-trackerDone; return nil })
	db.closers = append(closers, db.closers...)
	return nil
}

// factsOf returns the policy facts of an operational row.
func factsOf(r *store.OpRow) forgetting.Facts {
	f := forgetting.Facts{Type: r.Type, Namespace: r.Namespace, Importance: r.Importance, Salience: r.Salience,
		Pinned: r.Pinned, Archived: r.Archived, RetrievalCount: r.RetrievalCount}
	if r.CreatedUS != 0 {
		f.CreatedAt = time.UnixMicro(r.CreatedUS).UTC()
	}
	if r.LastRetrievedUS != 0 {
		f.LastRetrievedAt = time.UnixMicro(r.LastRetrievedUS).UTC()
	}
	return f
}

// scan calls fn for every operational row s selects, page by page; fn
// returns false to stop.
func (db *DB) scan(ctx context.Context, s store.OpScan, fn func(r *store.OpRow) (bool, error)) error {
	if s.Limit <= 0 {
		s.Limit = scanPage
	}
	for {
		rows, err := db.store.ScanOps(ctx, s)
		if err != nil {
			return err
		}
		for i := range rows {
			more, err := fn(&rows[i])
			if err != nil || !more {
				return err
			}
		}
		if len(rows) < s.Limit {
			return nil
		}
		s.AfterID = rows[len(rows)-1].ID
	}
}

// addHashes appends hs to a result's list, up to maxReportHashes, and sets
// truncated past it.
func addHashes(list *[]string, truncated *bool, hs ...string) {
	for _, h := range hs {
		if len(*list) == maxReportHashes {
			*truncated = true
			return
		}
		*list = append(*list, h)
	}
}

// sortedHashes returns list sorted, never nil.
func sortedHashes(list []string) []string {
	if list == nil {
		return []string{}
	}
	sort.Strings(list)
	return list
}

// bulkEvent builds an event about many grains: their hashes, or their
// count and digest.
func (db *DB) bulkEvent(ctx context.Context, typ proofs.EventType, memory, policy, reason string, hashes []string) (store.Event, error) {
	return db.journal.Event(ctx, typ, memory, func(l *proofs.Leaf) {
		audit.SetHashes(l, hashes)
		if len(hashes) == 0 {
			var zero uint64
			l.Count = &zero
		}
		l.Policy, l.Reason = policy, reason
	})
}

// refusals builds one erasure.refused event per hold that kept grains from
// a policy's destructive step.
func (db *DB) refusals(ctx context.Context, memory, policy string, held map[string][]string) ([]store.Event, error) {
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var evs []store.Event
	for _, id := range ids {
		ev, err := db.journal.Event(ctx, proofs.EventErasureRefused, memory, func(l *proofs.Leaf) {
			audit.SetHashes(l, held[id])
			l.Policy, l.Hold, l.Reason = policy, id, "held"
		})
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

func countHeld(held map[string][]string) int {
	n := 0
	for _, hs := range held {
		n += len(hs)
	}
	return n
}

// runEvent commits the policy.run event that closes a run which changed
// or was refused something, and returns its receipt if wanted.
func (db *DB) runEvent(ctx context.Context, memory, policy, reason string, changed []string, wantReceipt bool) (*Receipt, error) {
	ev, err := db.bulkEvent(ctx, proofs.EventPolicyRun, memory, policy, reason, changed)
	if err != nil {
		return nil, err
	}
	if err := db.journal.Append(ctx, ev); err != nil {
		return nil, err
	}
	db.journal.Committed()
	if !wantReceipt {
		return nil, nil
	}
	return db.receipt(ctx, ev.ID, ev.Leaf)
}

// --- Decay purge ---

// PurgeOptions selects and tunes a decay purge. Zero fields take the
// policy's values (Config.Policy's decay section).
type PurgeOptions struct {
	// Memory is the memory to purge ("" means "default").
	Memory string
	// Curve is exponential, linear or ebbinghaus.
	Curve Curve
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
	// grain.purge event).
	Batch int
	// Namespace limits the purge to one namespace.
	Namespace string
	// DryRun reports what the purge would do and changes nothing.
	DryRun bool
}

// PurgeResult says what a decay purge did, or with DryRun would do.
type PurgeResult struct {
	DryRun bool  `json:"dry_run"`
	Curve  Curve `json:"curve"`
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
	// keeps.
	Protected int `json:"protected"`
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
	*Receipt
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
func (db *DB) PurgeStale(ctx context.Context, opts PurgeOptions) (*PurgeResult, error) {
	return db.purgeStale(ctx, opts, true)
}

// decayPolicy returns the policy with opts' overrides, validated.
func (db *DB) decayPolicy(opts *PurgeOptions) (*forgetting.Policy, error) {
	p := *db.forget.policy
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
	if opts.Batch > grains.MaxBatch {
		return nil, grains.FieldError(grains.CodeTooLarge, "batch", "at most 10000")
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
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Message: "purge options: " + err.Error()}
	}
	return &p, nil
}

func (db *DB) purgeStale(ctx context.Context, opts PurgeOptions, wantReceipt bool) (*PurgeResult, error) {
	memory, err := memoryName(opts.Memory)
	if err != nil {
		return nil, err
	}
	pol, err := db.decayPolicy(&opts)
	if err != nil {
		return nil, err
	}
	now := db.now().UTC()
	res := &PurgeResult{DryRun: opts.DryRun, Curve: pol.Decay.Curve}
	var holds []store.HoldRow
	if opts.DryRun {
		if holds, err = db.store.Holds(ctx, memory); err != nil {
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
			forgot, held, err := db.wouldForget(ctx, memory, batch, holds)
			res.Forgotten += len(forgot)
			res.Held += held
			addHashes(&res.Hashes, &res.Truncated, forgot...)
			return err
		}
		ids := make([]int64, len(batch))
		for i, r := range batch {
			ids[i] = r.ID
		}
		del, err := db.forgetSeeds(ctx, memory, policyDecay, ids, keep, func(id string) { res.Events = append(res.Events, id) })
		if err != nil {
			return err
		}
		res.Forgotten += len(del.Hashes)
		res.Held += countHeld(del.Held)
		addHashes(&res.Hashes, &res.Truncated, del.Hashes...)
		all = append(all, del.Hashes...)
		return nil
	}
	err = db.scan(ctx, store.OpScan{Memory: memory, Namespace: pol.Decay.Namespace, Heads: true}, func(r *store.OpRow) (bool, error) {
		res.Scanned++
		f := factsOf(r)
		if !pol.Decay.Candidate(f, now) {
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
		if res.Receipt, err = db.runEvent(ctx, memory, policyDecay, "", all, wantReceipt); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// wouldForget is a dry run's forget of seeds: the hashes of every version
// of their chains that no hold covers, and the number of seeds a hold keeps.
func (db *DB) wouldForget(ctx context.Context, memory string, seeds []store.OpRow, holds []store.HoldRow) ([]string, int, error) {
	groups, err := db.store.Chains(ctx, memory, seeds)
	if err != nil {
		return nil, 0, err
	}
	isSeed := make(map[string]bool, len(seeds))
	for _, s := range seeds {
		isSeed[s.Hash] = true
	}
	var forgot []string
	held := 0
	for _, g := range groups {
		if store.ChainHold(holds, g) != "" {
			for _, r := range g {
				if isSeed[r.Hash] {
					held++
				}
			}
			continue
		}
		for _, r := range g {
			forgot = append(forgot, r.Hash)
		}
	}
	return forgot, held, nil
}

// forgetSeeds forgets one batch of a policy's candidates with its events:
// a grain.purge event for what it deleted and an erasure.refused event per
// hold that kept some. event receives the id of the purge event.
func (db *DB) forgetSeeds(ctx context.Context, memory, policy string, ids []int64, keep func(store.OpRow) bool, event func(id string)) (*store.PolicyDeletion, error) {
	var purgeID string
	del, err := db.store.ForgetSeeds(ctx, memory, ids, keep, db.now().UnixMicro(), func(ctx context.Context, d *store.PolicyDeletion) ([]store.Event, error) {
		purgeID = ""
		evs, err := db.refusals(ctx, memory, policy, d.Held)
		if err != nil || len(d.Hashes) == 0 {
			return evs, err
		}
		ev, err := db.bulkEvent(ctx, proofs.EventGrainPurge, memory, policy, "", d.Hashes)
		purgeID = ev.ID
		return append([]store.Event{ev}, evs...), err
	})
	if err != nil {
		return nil, err
	}
	if purgeID != "" || len(del.Held) > 0 {
		db.journal.Committed()
	}
	if purgeID != "" && event != nil {
		event(purgeID)
	}
	return del, nil
}

// --- Archive ladder ---

// ArchiveOptions starts an archive ladder run.
type ArchiveOptions struct {
	// Trigger is what starts the run (default memory_pressure, which always
	// runs; the others run once the memory holds the policy's soft limit of
	// unarchived grains).
	Trigger Trigger
	// DryRun reports what the run would archive and changes nothing.
	DryRun bool
}

// ArchiveResult says what an archive run, or an explicit archive, did.
type ArchiveResult struct {
	DryRun  bool    `json:"dry_run"`
	Trigger Trigger `json:"trigger,omitempty"`
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
	// the grain.archive event for an explicit archive), with its proof.
	*Receipt
}

// Archive runs the archive ladder on one memory. The trigger decides
// whether it runs (see [ArchiveOptions.Trigger]); a run looks at most at
// the policy's scan bound of unarchived newest versions whose salience is
// below the threshold, oldest first, and archives each that no protection
// rule keeps, halving its salience. Archived grains leave default recall
// and stay reachable with Query.IncludeArchived and Get. Archiving is not
// destructive, so legal holds do not stop it. Each batch commits with a
// grain.archive event (policy "ladder"); a run that archived anything ends
// with a policy.run event whose reason is the trigger.
func (db *DB) Archive(ctx context.Context, memory string, opts ArchiveOptions) (*ArchiveResult, error) {
	return db.archiveLadder(ctx, memory, opts, true)
}

func (db *DB) archiveLadder(ctx context.Context, memory string, opts ArchiveOptions, wantReceipt bool) (*ArchiveResult, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	if opts.Trigger == "" {
		opts.Trigger = TriggerMemoryPressure
	}
	if !slices.Contains(forgetting.Triggers, opts.Trigger) {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "trigger", "must be one of ingest_complete, query_complete, cron, memory_pressure")
	}
	pol := db.forget.policy
	res := &ArchiveResult{DryRun: opts.DryRun, Trigger: opts.Trigger}
	if res.Live, err = db.store.CountLive(ctx, memory); err != nil {
		return nil, err
	}
	if !pol.Ladder.ShouldRun(opts.Trigger, int(res.Live)) {
		res.Hashes = sortedHashes(res.Hashes)
		return res, nil
	}
	res.Ran = true
	threshold := pol.Ladder.ForgetSalienceThreshold
	var ids []int64
	if threshold > 0 {
		bound := pol.Ladder.ScanBound
		err = db.scan(ctx, store.OpScan{Memory: memory, Heads: true, Unarchived: true, SalienceBelow: threshold, Limit: min(scanPage, bound)},
			func(r *store.OpRow) (bool, error) {
				res.Scanned++
				f := factsOf(r)
				if arch, _ := pol.Ladder.Step(f); arch {
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
		arch, _ := pol.LadderStep(factsOf(&r))
		return arch
	}
	all, err := db.archiveIDs(ctx, memory, policyLadder, string(opts.Trigger), ids, 0.5, keep, res)
	if err != nil {
		return nil, err
	}
	if len(all) > 0 {
		if res.Receipt, err = db.runEvent(ctx, memory, policyLadder, string(opts.Trigger), all, wantReceipt); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// archiveIDs archives rows in batches, one grain.archive event each, and
// returns every archived hash.
func (db *DB) archiveIDs(ctx context.Context, memory, policy, reason string, ids []int64, factor float64, keep func(store.OpRow) bool, res *ArchiveResult) ([]string, error) {
	var all []string
	for i := 0; i < len(ids); i += archiveBatch {
		var ev store.Event
		done, err := db.store.ArchiveRows(ctx, memory, ids[i:min(i+archiveBatch, len(ids))], factor, keep, db.now().UnixMicro(),
			func(ctx context.Context, hashes []string) ([]store.Event, error) {
				var err error
				ev, err = db.bulkEvent(ctx, proofs.EventGrainArchive, memory, policy, reason, hashes)
				return []store.Event{ev}, err
			})
		if err != nil {
			return all, err
		}
		if len(done) > 0 {
			db.journal.Committed()
			res.Events = append(res.Events, ev.ID)
			if policy == "" {
				res.Receipt = &Receipt{EventID: ev.ID, Leaf: ev.Leaf}
			}
		}
		res.Archived += len(done)
		addHashes(&res.Hashes, &res.Truncated, done...)
		all = append(all, done...)
	}
	res.Hashes = sortedHashes(res.Hashes)
	return all, nil
}

// ArchiveGrains archives the named grains of memory (any version): they
// leave default recall and stay reachable with Query.IncludeArchived and
// Get. Grains already archived are left as they are. It commits one
// grain.archive event and returns its receipt; it fails with not_found if
// no hash names a grain of memory.
func (db *DB) ArchiveGrains(ctx context.Context, memory string, hashes []string) (*ArchiveResult, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	if len(hashes) == 0 {
		return nil, &grains.Error{Code: grains.CodeEmptySelector, Field: "hashes", Message: "name the grains to archive"}
	}
	if len(hashes) > grains.MaxBatch {
		return nil, grains.FieldError(grains.CodeTooLarge, "hashes", "at most 10000 hashes")
	}
	for _, h := range hashes {
		if !grains.ValidHash(h) {
			return nil, grains.FieldError(grains.CodeInvalidArgument, "hashes", "each must be 64 lowercase hex digits")
		}
	}
	rows, err := db.store.OpsByHashes(ctx, memory, hashes)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, grains.Errorf(grains.CodeNotFound, "no such grain in memory %s", memory)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	res := &ArchiveResult{Ran: true}
	if _, err := db.archiveIDs(ctx, memory, "", "", ids, 1, nil, res); err != nil {
		return nil, err
	}
	if res.Receipt != nil {
		if res.Receipt, err = db.receipt(ctx, res.Receipt.EventID, res.Receipt.Leaf); err != nil {
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
func (db *DB) ShouldArchive(ctx context.Context, memory string) ([]string, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	var out []string
	now := db.now().UTC()
	err = db.scan(ctx, store.OpScan{Memory: memory, Heads: true, Unarchived: true}, func(r *store.OpRow) (bool, error) {
		if db.forget.policy.RetrievalArchive(factsOf(r), now) {
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
func (db *DB) sweepRetrieval(ctx context.Context, memory string) (*ArchiveResult, error) {
	now := db.now().UTC()
	pol := db.forget.policy
	var ids []int64
	res := &ArchiveResult{Ran: true}
	err := db.scan(ctx, store.OpScan{Memory: memory, Heads: true, Unarchived: true}, func(r *store.OpRow) (bool, error) {
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
	all, err := db.archiveIDs(ctx, memory, policyRetrieval, "", ids, 1, keep, res)
	if err != nil {
		return nil, err
	}
	if len(all) > 0 {
		_, err = db.runEvent(ctx, memory, policyRetrieval, "", all, false)
	}
	return res, err
}

// --- Retrieval-time decay and tracking ---

// isListing reports whether q lists a memory (no filter at all). Listings
// stay newest first; queries are ranked.
func isListing(q *Query) bool {
	return q.Subject == "" && q.Relation == "" && q.Object == "" && q.Type == "" && q.Namespace == "" &&
		q.Scope == "" && q.UserID == "" && len(q.Tags) == 0
}

// afterRecall ranks a recall's page (unless it is a listing), queues the
// retrieval statistics of what it returns (ids are the grains' row ids),
// and fires query_complete.
func (db *DB) afterRecall(q *Query, gs []Grain, ids []int64) {
	db.trigger(q.Memory, TriggerQueryComplete)
	if len(gs) == 0 {
		return
	}
	now := db.now().UTC()
	if !isListing(q) {
		rank(&db.forget.policy.Retrieval, gs, now)
	}
	db.trackRetrievals(now, ids)
}

// rank orders gs by relevance (1 for every exact match) times the
// retrieval score, highest first; ties keep their order (newest first).
// Pinned grains score 1.
func rank(c *forgetting.RetrievalConfig, gs []Grain, now time.Time) {
	score := make(map[string]float64, len(gs))
	for i := range gs {
		score[gs[i].Hash] = c.Rank(1, forgetting.FactsOf(&gs[i]), now)
	}
	sort.SliceStable(gs, func(i, j int) bool { return score[gs[i].Hash] > score[gs[j].Hash] })
}

// trackRetrievals adds the retrieval of the grains with row ids ids to the
// statistics waiting for the tracker, without blocking on it: past
// retrievalMax waiting grains, a new grain's update is dropped and counted.
func (db *DB) trackRetrievals(now time.Time, ids []int64) {
	f := db.forget
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
func (db *DB) DroppedRetrievals() int64 { return db.forget.dropped.Load() }

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
func (db *DB) runTracker(stop <-chan struct{}) {
	f := db.forget
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
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := 0; i < len(rs); i += retrievalTx {
			part := rs[i:min(i+retrievalTx, len(rs))]
			if err := db.store.RecordRetrievals(ctx, part, f.policy.Ladder.RetrievalBump); err != nil {
				n := int64(0)
				for _, r := range part {
					n += r.Count
				}
				f.dropped.Add(n)
				db.logger.Warn("could not record retrieval statistics; they are dropped", slog.Any("error", err))
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

// autoPin pins g when an auto-pin rule of the policy matches it.
func (db *DB) autoPin(g *Grain) {
	if !g.Pinned && db.forget != nil && len(db.forget.policy.AutoPin) > 0 {
		g.Pinned = db.forget.policy.AutoPinned(forgetting.PinFields(g))
	}
}

// --- Protection of explicit forgets ---

type forceKey struct{}

// ForceForget is Forget overriding protection rules (pinned grains,
// protected types, high importance), never legal holds: for a
// data-protection officer acting on an erasure request. Its grain.forget
// event carries reason protection_override when it overrode a rule.
func (db *DB) ForceForget(ctx context.Context, sel Selector) (*ForgetResult, error) {
	return db.Forget(context.WithValue(ctx, forceKey{}, true), sel)
}

// checkProtected refuses an explicit forget by hash or hashes when a
// protection rule keeps any version of the chains it would delete, and
// audits the refusal. override is true when a forced forget goes ahead
// over a rule. Forgets by subject or user are erasure requests about a
// person and are not refused (holds still are).
func (db *DB) checkProtected(ctx context.Context, sel *Selector) (override bool, err error) {
	hashes := sel.Hashes
	if sel.Hash != "" {
		hashes = []string{sel.Hash}
	}
	if len(hashes) == 0 {
		return false, nil
	}
	rows, err := db.store.ChainOps(ctx, sel.Memory, hashes)
	if err != nil {
		return false, err
	}
	for i := range rows {
		perr := db.forget.policy.CheckForget(factsOf(&rows[i]))
		if perr == nil {
			continue
		}
		if force, _ := ctx.Value(forceKey{}).(bool); force {
			return true, nil
		}
		ev, eerr := db.journal.Event(ctx, proofs.EventErasureRefused, sel.Memory, func(l *proofs.Leaf) {
			l.Hashes, l.Reason = []string{rows[i].Hash}, "protected"
		})
		if eerr == nil {
			eerr = db.journal.Append(ctx, ev)
		}
		if eerr != nil {
			db.logger.Error("could not audit a refused forget", slog.Any("error", eerr))
		}
		db.journal.Committed()
		return false, perr
	}
	return false, nil
}

// --- Risk sweep ---

// RiskOptions tunes a risk sweep.
type RiskOptions struct {
	// Batch is the number of grains per transaction (default: the decay
	// purge's batch).
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
	// Protected counts grains at risk that a protection rule keeps.
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
	*Receipt
}

func (r *RiskResult) item(hash, action string, risk float64) {
	if len(r.Items) == maxReportHashes {
		r.Truncated = true
		return
	}
	r.Items = append(r.Items, RiskItem{Hash: hash, Action: action, Risk: risk})
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
func (db *DB) RiskSweep(ctx context.Context, memory string, opts RiskOptions) (*RiskResult, error) {
	return db.riskSweep(ctx, memory, opts, true)
}

func (db *DB) riskSweep(ctx context.Context, memory string, opts RiskOptions, wantReceipt bool) (*RiskResult, error) {
	memory, err := memoryName(memory)
	if err != nil {
		return nil, err
	}
	pol := db.forget.policy
	if opts.Batch <= 0 {
		opts.Batch = pol.Decay.Batch
	}
	if opts.Batch > grains.MaxBatch {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "batch", "at most 10000")
	}
	now := db.now().UTC()
	res := &RiskResult{DryRun: opts.DryRun, Items: []RiskItem{}}
	holds, err := db.store.Holds(ctx, memory)
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
			forgot, held, err := db.wouldForget(ctx, memory, drops, holds)
			res.Dropped += len(forgot)
			res.Held += held
			for _, r := range drops {
				if store.HoldOn(holds, r.Scope, r.UserRef) == "" {
					res.item(r.Hash, string(forgetting.ActionDrop), riskOf[r.Hash])
				} else {
					res.item(r.Hash, "held", riskOf[r.Hash])
				}
			}
			return err
		}
		ids := make([]int64, len(drops))
		for i, r := range drops {
			ids[i] = r.ID
		}
		keep := func(r store.OpRow) bool { return actionOf(&r) == forgetting.ActionDrop }
		del, err := db.forgetSeeds(ctx, memory, policyRisk, ids, keep, func(id string) { res.Events = append(res.Events, id) })
		if err != nil {
			return err
		}
		res.Dropped += len(del.Hashes)
		res.Held += countHeld(del.Held)
		heldSeeds := map[string]bool{}
		for _, hs := range del.Held {
			for _, h := range hs {
				heldSeeds[h] = true
			}
		}
		for _, r := range drops {
			switch {
			case heldSeeds[r.Hash]:
				res.item(r.Hash, "held", riskOf[r.Hash])
			case slices.Contains(del.Hashes, r.Hash):
				res.item(r.Hash, string(forgetting.ActionDrop), riskOf[r.Hash])
			}
		}
		all = append(all, del.Hashes...)
		return nil
	}
	flushCompresses := func() error {
		if len(compresses) == 0 {
			return nil
		}
		defer func() { compresses = compresses[:0] }()
		done, err := db.compress(ctx, memory, compresses, holds, opts.DryRun, actionOf, res, riskOf)
		all = append(all, done...)
		return err
	}
	err = db.scan(ctx, store.OpScan{Memory: memory, Heads: true}, func(r *store.OpRow) (bool, error) {
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
		if res.Receipt, err = db.runEvent(ctx, memory, policyRisk, "", all, wantReceipt); err != nil {
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
func (db *DB) summarize(ctx context.Context, row *store.GrainRow, dryRun bool) (*store.Replacement, error) {
	g, err := db.open(ctx, row)
	if err != nil {
		return nil, err
	}
	sum, err := db.forget.summarizer.Summarize(*g)
	if err != nil {
		return nil, err
	}
	// The summary stays under the grain's key chain, in its place.
	sum.Hash, sum.Memory, sum.Scope, sum.UserID, sum.Supersedes = "", g.Memory, g.Scope, g.UserID, g.Supersedes
	if err := sum.Validate(); err != nil {
		db.logger.Warn("summarizer returned an invalid grain; the grain is kept", slog.Any("error", err))
		return nil, errBadSummary
	}
	if dryRun {
		return nil, nil
	}
	n, err := db.seal(ctx, &sum)
	if err != nil {
		return nil, err
	}
	return &store.Replacement{OldID: row.ID, Old: row.Hash, New: n}, nil
}

// compress replaces one batch of grains by their summaries and returns
// the hashes concerned (old and new).
func (db *DB) compress(ctx context.Context, memory string, rows []store.OpRow, holds []store.HoldRow, dryRun bool,
	actionOf func(*store.OpRow) forgetting.Action, res *RiskResult, riskOf map[string]float64) ([]string, error) {
	var reps []store.Replacement
	for i := range rows {
		r := &rows[i]
		if dryRun && store.HoldOn(holds, r.Scope, r.UserRef) != "" {
			res.Held++
			res.item(r.Hash, "held", riskOf[r.Hash])
			continue
		}
		row, err := db.store.GrainByHash(ctx, memory, r.Hash)
		if grains.ErrorCode(err) == grains.CodeNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		db.observe([]store.GrainRow{*row})
		rep, err := db.summarize(ctx, row, dryRun)
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
	out, err := db.store.ReplaceGrains(ctx, memory, reps, keep, db.now().UnixMicro(), func(ctx context.Context, rp *store.Replaced) ([]store.Event, error) {
		evID = ""
		evs, err := db.refusals(ctx, memory, policyRisk, rp.Held)
		if err != nil || len(rp.Done) == 0 {
			return evs, err
		}
		var pairs []string
		for _, d := range rp.Done {
			pairs = append(pairs, d.Old, d.New.Hash)
		}
		ev, err := db.journal.Event(ctx, proofs.EventGrainSupersede, memory, func(l *proofs.Leaf) {
			audit.SetHashes(l, pairs)
			l.Policy, l.Reason = policyRisk, "compressed"
		})
		evID = ev.ID
		return append([]store.Event{ev}, evs...), err
	})
	if err != nil {
		return nil, err
	}
	db.journal.Committed()
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

// --- Scheduling ---

// trigger asks the scheduler, if one runs, for a ladder run on memory.
// What runTrigger would ignore is not sent: a send wakes the scheduler's
// goroutine, and every write and recall triggers.
func (db *DB) trigger(memory string, t Trigger) {
	if db.forget == nil || !db.forget.due(memory, t, time.Now(), false) {
		return
	}
	select {
	case db.forget.triggers <- triggerEvent{memory: memory, trigger: t}:
	default:
	}
}

// due reports whether trigger t asks for a ladder run on memory at now:
// the ladder is on and takes t, and no trigger started one on memory
// within triggerSpacing. With claim set, a due run is recorded as started.
func (f *forgetter) due(memory string, t Trigger, now time.Time, claim bool) bool {
	if !f.policy.Ladder.Enabled || !slices.Contains(f.policy.Ladder.Triggers, t) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if last, ok := f.fired[memory]; ok && now.Sub(last) < triggerSpacing {
		return false
	}
	if claim {
		f.fired[memory] = now
	}
	return true
}

// afterWrite fires ingest_complete after a successful write.
func (db *DB) afterWrite(memory string) { db.trigger(memory, TriggerIngestComplete) }

// exclusive runs fn unless a run of name is in progress in this process.
func (db *DB) exclusive(name string, fn func() error) (bool, error) {
	f := db.forget
	f.mu.Lock()
	if f.running[name] {
		f.mu.Unlock()
		return false, nil
	}
	f.running[name] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.running, name)
		f.mu.Unlock()
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

func (db *DB) scheduled() []scheduledPolicy {
	p := db.forget.policy
	return []scheduledPolicy{
		{policyDecay, p.Decay.Enabled, p.Decay.Schedule.Duration(), func(ctx context.Context, m string) error {
			_, err := db.purgeStale(ctx, PurgeOptions{Memory: m}, false)
			return err
		}, false},
		{policyLadder, p.Ladder.Enabled && slices.Contains(p.Ladder.Triggers, TriggerCron), p.Ladder.Schedule.Duration(), func(ctx context.Context, m string) error {
			_, err := db.archiveLadder(ctx, m, ArchiveOptions{Trigger: TriggerCron}, false)
			return err
		}, false},
		{policyRetrieval, p.Retrieval.Enabled, p.Retrieval.Schedule.Duration(), func(ctx context.Context, m string) error {
			_, err := db.sweepRetrieval(ctx, m)
			return err
		}, false},
		{policyRisk, p.Risk.Enabled, p.Risk.Schedule.Duration(), func(ctx context.Context, m string) error {
			_, err := db.riskSweep(ctx, m, RiskOptions{}, false)
			return err
		}, false},
		{policyKEK, p.KEK.RotateEvery > 0, p.KEK.RotateEvery.Duration(), func(ctx context.Context, _ string) error {
			_, err := db.RotateKEK(ctx, RotateOptions{Keep: p.KEK.Keep})
			return err
		}, true},
	}
}

// RunPolicies runs the policy's scheduled policies until ctx is done, and
// returns ctx's error. Each enabled policy with a schedule runs on every
// memory once per interval, counted from its last start by any instance
// sharing the database; across replicas at most one runs a policy at a
// time (a PostgreSQL advisory lock; on SQLite, one process). While it
// runs, writes and recalls fire the ladder's ingest_complete and
// query_complete triggers, at most once a minute per memory. Open starts
// it when Config.Schedule is set.
func (db *DB) RunPolicies(ctx context.Context) error {
	t := time.NewTicker(schedulerTick)
	defer t.Stop()
	for {
		db.runDue(ctx)
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			case ev := <-db.forget.triggers:
				db.runTrigger(ctx, ev)
				continue
			}
			break
		}
	}
}

// runDue runs every due scheduled policy once.
func (db *DB) runDue(ctx context.Context) {
	for _, p := range db.scheduled() {
		if !p.enabled || p.every <= 0 || ctx.Err() != nil {
			continue
		}
		_, err := db.exclusive("policy:"+p.name, func() error {
			_, err := db.store.RunScheduled(ctx, p.name, db.now().UTC(), p.every, func(ctx context.Context) error {
				if p.global {
					return p.run(ctx, "")
				}
				return db.runEverywhere(ctx, p)
			})
			return err
		})
		if err != nil && ctx.Err() == nil {
			db.logger.Warn("scheduled forgetting policy failed; it runs again at its next interval",
				slog.String("policy", p.name), slog.Any("error", err))
		}
	}
}

// runEverywhere runs p on every memory, going on after a memory fails.
func (db *DB) runEverywhere(ctx context.Context, p scheduledPolicy) error {
	memories, err := db.store.Memories(ctx)
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
func (db *DB) runTrigger(ctx context.Context, ev triggerEvent) {
	if !db.forget.due(ev.memory, ev.trigger, time.Now(), true) {
		return
	}
	_, err := db.exclusive("ladder:"+ev.memory, func() error {
		_, err := db.archiveLadder(ctx, ev.memory, ArchiveOptions{Trigger: ev.trigger}, false)
		return err
	})
	if err != nil && ctx.Err() == nil {
		db.logger.Warn("archive ladder run failed", slog.String("trigger", string(ev.trigger)), slog.Any("error", err))
	}
}
