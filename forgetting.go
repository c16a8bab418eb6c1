package lethe

import (
	"context"
	"errors"

	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/sweep"
)

// Automatic forgetting: the public face of package sweep, which runs the
// policies of package forgetting against the store. The option and result
// types are sweep's, named here; their doc comments list their fields. See
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

// PurgeOptions selects and tunes a decay purge; zero fields take the
// policy's values (Config.Policy's decay section). Its fields: Memory (""
// means "default"); Curve (exponential, linear or ebbinghaus) shaped by
// HalfLifeDays, DecayPerDay or StrengthDays; Threshold (grains whose
// retention is below it are forgotten); MinAgeDays (younger grains are
// never candidates); Batch (candidates forgotten per transaction and per
// grain.purge event, at most 10,000: more is too_large, below 0
// invalid_argument); Namespace (limits the purge to one namespace); DryRun
// (report, change nothing). Another option outside the range a policy
// file allows is invalid_argument with the option's JSON name as its
// field (half_life_days), never its value.
type PurgeOptions = sweep.PurgeOptions

// PurgeResult says what a decay purge did, or with DryRun would do: the
// grains Scanned (newest versions whose operational fields were read), the
// Candidates (below the threshold, no protection rule keeping them), the
// grains Forgotten (every version of each candidate's chain), those Held
// (a legal hold covers the chain; each refusal audited), Protected (kept by
// a protection rule, the grain's own or a version's of its chain) and
// Pinned (skipped; unpinned they would have been candidates), the Batches
// (transactions, grain.purge events), the forgotten Hashes (sorted, at
// most 10,000; Truncated says there were more), the Events' ids, and the
// Receipt of the policy.run event that closes the purge (nil for dry runs
// and purges that changed nothing).
type PurgeResult = sweep.PurgeResult

// ArchiveOptions starts an archive ladder run: Trigger is what starts it
// (default memory_pressure, which always runs; the others run once the
// memory holds the policy's soft limit of unarchived grains); DryRun
// reports what the run would archive and changes nothing.
type ArchiveOptions = sweep.ArchiveOptions

// ArchiveResult says what an archive run, or an explicit archive, did:
// DryRun, Trigger, Ran (false when the trigger does not start a run: the
// ladder is off, the trigger is not in the policy, or the memory is below
// the soft limit), Live (the unarchived grains compared with the soft
// limit), Scanned, Archived, Protected (below the salience threshold, kept
// by a protection rule), the archived Hashes (sorted, at most 10,000;
// Truncated says there were more), the grain.archive Events' ids, and the
// Receipt of the last event (the policy.run event of a ladder run, the
// grain.archive event of an explicit archive).
type ArchiveResult = sweep.ArchiveResult

// RiskOptions tunes a risk sweep: Batch is the number of grains per
// transaction (0: the decay purge's batch; at most 10,000: more is
// too_large, below 0 invalid_argument); DryRun reports what the
// sweep would do and changes nothing.
type RiskOptions = sweep.RiskOptions

// RiskItem is one grain the sweep acts on (or a protection rule keeps):
// its Hash, its Action (compress, drop, protected, held or kept: not
// compressible) and its Risk.
type RiskItem = sweep.RiskItem

// RiskResult says what a risk sweep did, or with DryRun would do: the
// grains Scanned, Compressed (replaced by their summaries), Dropped
// (forgotten, every version of their chains), Protected (at risk, kept by
// a protection rule), Held (at risk, kept by a legal hold; each refusal
// audited) and Kept (due for compression but not compressible, unreadable
// or duplicating a live grain when summarized); the Items at risk with
// their action and risk (at most 10,000; Truncated), the Events' ids, and
// the Receipt of the policy.run event that closes the sweep.
type RiskResult = sweep.RiskResult

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
	return db.sweep.PurgeStale(ctx, opts)
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
	return db.sweep.Archive(ctx, memory, opts)
}

// ArchiveGrains archives the named grains of memory (any version): they
// leave default recall and stay reachable with Query.IncludeArchived and
// Get. Grains already archived are left as they are. Each 1,000 grains
// commit in a transaction of their own with a grain.archive event naming
// them: one event for up to 1,000 hashes, and Events lists every event and
// Receipt is the last one's. It fails with not_found if no hash names a
// grain of memory. The hash of a crypto-erased grain names none.
func (db *DB) ArchiveGrains(ctx context.Context, memory string, hashes []string) (*ArchiveResult, error) {
	return db.sweep.ArchiveGrains(ctx, memory, hashes)
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
	return db.sweep.RiskSweep(ctx, memory, opts)
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

// FlushRetrievals writes the queued retrieval statistics now, instead of
// within the tracker's interval (Close writes them too). It returns when
// they are written, or with ctx's error.
func (db *DB) FlushRetrievals(ctx context.Context) error { return db.sweep.Flush(ctx) }

// Settle flushes the retrieval statistics and waits for the store's background work
// (for load tests and tests); see docs/api.md, "lethe-load".
func (db *DB) Settle(ctx context.Context) error {
	return errors.Join(db.FlushRetrievals(ctx), db.store.Settle(ctx))
}
