package lethe

import (
	"context"

	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/sweep"
)

// Automatic forgetting: the public face of package sweep, which runs the
// policies of package forgetting against the store. The result types are
// declared here, where go doc shows their fields, and converted from
// sweep's. See docs/compliance/forgetting.md.

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
	// Pinned counts pinned grains the purge skipped: their retention is 1,
	// and unpinned they would have been candidates.
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
	*Receipt
}

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
	r, err := db.sweep.PurgeStale(ctx, sweep.PurgeOptions(opts))
	if err != nil {
		return nil, err
	}
	return &PurgeResult{DryRun: r.DryRun, Curve: r.Curve, Scanned: r.Scanned, Candidates: r.Candidates, Forgotten: r.Forgotten,
		Held: r.Held, Protected: r.Protected, Pinned: r.Pinned, Batches: r.Batches, Hashes: r.Hashes, Truncated: r.Truncated, Events: r.Events,
		Receipt: (*Receipt)(r.Receipt)}, nil
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
	return archiveResult(db.sweep.Archive(ctx, memory, sweep.ArchiveOptions(opts)))
}

// ArchiveGrains archives the named grains of memory (any version): they
// leave default recall and stay reachable with Query.IncludeArchived and
// Get. Grains already archived are left as they are. It commits one
// grain.archive event and returns its receipt; it fails with not_found if
// no hash names a grain of memory.
func (db *DB) ArchiveGrains(ctx context.Context, memory string, hashes []string) (*ArchiveResult, error) {
	return archiveResult(db.sweep.ArchiveGrains(ctx, memory, hashes))
}

func archiveResult(r *sweep.ArchiveResult, err error) (*ArchiveResult, error) {
	if err != nil {
		return nil, err
	}
	return &ArchiveResult{DryRun: r.DryRun, Trigger: r.Trigger, Ran: r.Ran, Live: r.Live, Scanned: r.Scanned, Archived: r.Archived,
		Protected: r.Protected, Hashes: r.Hashes, Truncated: r.Truncated, Events: r.Events, Receipt: (*Receipt)(r.Receipt)}, nil
}

// ShouldArchive returns the hashes of the unarchived newest versions of
// memory whose retrieval score is at or below the policy's
// min_retrieval_score (Vitamem's shouldArchive), sorted. Pinned and
// protected grains are never listed. It reads operational fields only and
// changes nothing; the retrieval sweep (retrieval.schedule) archives them.
func (db *DB) ShouldArchive(ctx context.Context, memory string) ([]string, error) {
	return db.sweep.ShouldArchive(ctx, memory)
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
	r, err := db.sweep.RiskSweep(ctx, memory, sweep.RiskOptions(opts))
	if err != nil {
		return nil, err
	}
	out := &RiskResult{DryRun: r.DryRun, Scanned: r.Scanned, Compressed: r.Compressed, Dropped: r.Dropped, Protected: r.Protected,
		Held: r.Held, Kept: r.Kept, Items: make([]RiskItem, len(r.Items)), Truncated: r.Truncated, Events: r.Events,
		Receipt: (*Receipt)(r.Receipt)}
	for i, it := range r.Items {
		out.Items[i] = RiskItem(it)
	}
	return out, nil
}

// RunPolicies runs the policy's scheduled policies until ctx is done, and
// returns ctx's error. Each enabled policy with a schedule runs on every
// memory once per interval, counted from its last start by any instance
// sharing the database; across replicas at most one runs a policy at a
// time (a PostgreSQL advisory lock; on SQLite, one process). While it
// runs, writes and recalls fire the ladder's ingest_complete and
// query_complete triggers, at most once a minute per memory. Open starts
// it when Config.Schedule is set.
func (db *DB) RunPolicies(ctx context.Context) error { return db.sweep.Run(ctx) }

// DroppedRetrievals returns the number of retrieval-statistics updates
// dropped because too many waited or the write failed since Open.
// Dropping one loses a salience bump and a count; it never loses data.
func (db *DB) DroppedRetrievals() int64 { return db.sweep.DroppedRetrievals() }
