// Package sweep runs the forgetting policies of package forgetting against
// the store: the decay purge, the archive ladder, the retrieval sweep and
// tracker, the risk sweep, the scheduler and its triggers, auto-pin and the
// protection check of explicit forgets. Package forgetting decides (pure
// policy math); package sweep reads rows, changes them and records each
// change with its audit events in one transaction.
//
// # Ports
//
// A Sweeper states the I/O it needs as small interfaces, declared here and
// supplied by its owner (the root package): [Store] (operational rows and
// the policy changes), [Journal] (events committed with a change, and
// receipts) and [Sealer] (opening a grain and sealing its summary). It
// never imports the root package.
//
// # Reads
//
// Every scan reads operational columns only (store.OpRow), never a blob,
// so the decay purge, the ladder and the retrieval sweep run without keys;
// the risk sweep's compress decrypts the grains it summarizes. See
// docs/compliance/forgetting.md.
package sweep

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

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
	// so that a flush holds SQLite's write lock, and PostgreSQL's CPU, for
	// short spans: recalls under load kept a lower p99 with 500 than with
	// 2,000 (docs/performance.md).
	retrievalTx = 500
	// retrievalRest bounds the tracker's rest between two of its
	// transactions (see runTracker).
	retrievalRest = 50 * time.Millisecond
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

// Store is the part of the store a Sweeper reads and changes;
// *store.DB implements it. Every change commits with the events its
// EventsFunc builds, in one transaction.
type Store interface {
	// ScanOps returns one page of the operational rows s selects.
	ScanOps(ctx context.Context, s store.OpScan) ([]store.OpRow, error)
	// CountLive returns the number of unarchived newest versions of memory.
	CountLive(ctx context.Context, memory string) (int64, error)
	// Memories lists the memories that hold keys.
	Memories(ctx context.Context) ([]string, error)
	// OpsByHashes returns the operational rows of the named grains.
	OpsByHashes(ctx context.Context, memory string, hashes []string) ([]store.OpRow, error)
	// Chains groups seeds with every version of their chains.
	Chains(ctx context.Context, memory string, seeds []store.OpRow) ([][]store.OpRow, error)
	// Holds returns the active legal holds of memory.
	Holds(ctx context.Context, memory string) ([]store.HoldRow, error)
	// GrainByHash returns the row of a grain, or an error with code
	// not_found.
	GrainByHash(ctx context.Context, memory, hash string) (*store.GrainRow, error)
	// ForgetSeeds deletes the rows ids that still satisfy keep with their
	// chains, skipping chains with a protected version and held chains.
	ForgetSeeds(ctx context.Context, memory string, ids []int64, keep, protected func(store.OpRow) bool, now int64, mk store.EventsFunc[*store.PolicyDeletion]) (*store.PolicyDeletion, error)
	// ArchiveRows archives the rows ids that still satisfy keep, leaving
	// out those an erasure made unreadable, under the memory's lock.
	ArchiveRows(ctx context.Context, memory string, ids []int64, factor float64, keep func(store.OpRow) bool, now int64, mk store.EventsFunc[[]string]) (*store.Archival, error)
	// ReplaceGrains replaces grains that still satisfy keep by new rows,
	// skipping held ones.
	ReplaceGrains(ctx context.Context, memory string, reps []store.Replacement, keep func(store.OpRow) bool, now int64, mk store.EventsFunc[*store.Replaced]) (*store.Replaced, error)
	// RecordRetrievals adds retrieval statistics (see forgetting.Bump).
	RecordRetrievals(ctx context.Context, rs []store.Retrieval, bump float64) error
	// RunScheduled runs fn if policy name is due at now, at most one
	// instance at a time.
	RunScheduled(ctx context.Context, name string, now time.Time, every time.Duration, fn func(context.Context) error) (bool, error)
}

// Journal records audited changes; *audit.Journal implements it.
type Journal interface {
	// Event builds an event; fill adds its fields.
	Event(ctx context.Context, typ proofs.EventType, memory string, fill func(*proofs.Leaf)) (audit.Event, error)
	// Bulk builds an event about many grains of a policy run.
	Bulk(ctx context.Context, typ proofs.EventType, memory, policy, reason string, hashes []string) (audit.Event, error)
	// Refusals builds one erasure.refused event per hold in held.
	Refusals(ctx context.Context, memory, policy string, held map[string][]string) ([]audit.Event, error)
	// Append commits events that record no other change.
	Append(ctx context.Context, evs ...audit.Event) error
	// Committed says that events committed with a change.
	Committed()
	// Receipt returns the receipt of a committed event, with its proof or
	// pending.
	Receipt(ctx context.Context, id string, leaf []byte) (*audit.Receipt, error)
}

// Sealer opens grains and seals new ones under their key chains.
type Sealer interface {
	// Open decrypts a row; it fails with code erased when its key is gone.
	Open(ctx context.Context, r *store.GrainRow) (*grains.Grain, error)
	// Seal encrypts g and builds its row.
	Seal(ctx context.Context, g *grains.Grain) (*store.GrainRow, error)
}

var (
	_ Store   = (*store.DB)(nil)
	_ Journal = (*audit.Journal)(nil)
)

// Config configures a Sweeper.
type Config struct {
	Store   Store
	Journal Journal
	Sealer  Sealer
	// Policy is the validated policy.
	Policy *forgetting.Policy
	// Summarizer compresses grains in the risk sweep (default: keep the
	// triple, drop the content).
	Summarizer forgetting.Summarizer
	// RotateKEK rotates the KEK keeping keep versions: the scheduled
	// kek.rotate_every policy (nil: not scheduled).
	RotateKEK func(ctx context.Context, keep int) error
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives operational logs, never personal data.
	Logger *slog.Logger
	// Schedule starts the scheduler (see Run) and the ladder's write and
	// recall triggers.
	Schedule bool
}

// Sweeper runs the forgetting policies of one database. It is safe for
// concurrent use.
type Sweeper struct {
	store      Store
	journal    Journal
	sealer     Sealer
	policy     *forgetting.Policy
	summarizer forgetting.Summarizer
	rotateKEK  func(ctx context.Context, keep int) error
	now        func() time.Time
	logger     *slog.Logger

	stats   retrievals
	kick    chan struct{} // retrievalFlushSize grains wait
	flushes chan chan struct{}
	tracked chan struct{} // closed when the tracker has stopped
	dropped atomic.Int64

	triggers chan triggerEvent

	mu      sync.Mutex
	running map[string]bool      // policy runs in progress in this process
	fired   map[string]time.Time // memory -> last ladder run from a write or recall trigger

	stop func()
}

type triggerEvent struct {
	memory  string
	trigger forgetting.Trigger
}

// New starts a Sweeper: its retrieval tracker and, with cfg.Schedule, its
// scheduler. Close stops them.
func New(cfg Config) *Sweeper {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Summarizer == nil {
		cfg.Summarizer = forgetting.TripleSummarizer{}
	}
	s := &Sweeper{
		store: cfg.Store, journal: cfg.Journal, sealer: cfg.Sealer, policy: cfg.Policy, summarizer: cfg.Summarizer,
		rotateKEK: cfg.RotateKEK, now: cfg.Now, logger: cfg.Logger,
		kick:     make(chan struct{}, 1),
		flushes:  make(chan chan struct{}),
		triggers: make(chan triggerEvent, 64),
		running:  map[string]bool{},
		fired:    map[string]time.Time{},
	}
	stopTracker := make(chan struct{})
	trackerDone := make(chan struct{})
	s.tracked = trackerDone
	go func() {
		defer close(trackerDone)
		s.runTracker(stopTracker)
	}()
	stopScheduler := func() {}
	if cfg.Schedule {
		sctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Run(audit.WithActor(sctx, "scheduler"))
		}()
		stopScheduler = func() { cancel(); <-done }
	}
	// The tracker stops after the scheduler and flushes what is pending.
	s.stop = sync.OnceFunc(func() {
		stopScheduler()
		close(stopTracker)
		<-trackerDone
	})
	return s
}

// Close stops the scheduler and the tracker, after writing the pending
// retrieval statistics.
func (s *Sweeper) Close() { s.stop() }

// Policy returns the policy s runs.
func (s *Sweeper) Policy() *forgetting.Policy { return s.policy }

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
func (s *Sweeper) scan(ctx context.Context, sc store.OpScan, fn func(r *store.OpRow) (bool, error)) error {
	if sc.Limit <= 0 {
		sc.Limit = scanPage
	}
	for {
		rows, err := s.store.ScanOps(ctx, sc)
		if err != nil {
			return err
		}
		for i := range rows {
			more, err := fn(&rows[i])
			if err != nil || !more {
				return err
			}
		}
		if len(rows) < sc.Limit {
			return nil
		}
		sc.AfterID = rows[len(rows)-1].ID
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

func countHeld(held map[string][]string) int {
	n := 0
	for _, hs := range held {
		n += len(hs)
	}
	return n
}

// runEvent commits the policy.run event that closes a run which changed
// or was refused something, and returns its receipt if wanted.
func (s *Sweeper) runEvent(ctx context.Context, memory, policy, reason string, changed []string, wantReceipt bool) (*audit.Receipt, error) {
	ev, err := s.journal.Bulk(ctx, proofs.EventPolicyRun, memory, policy, reason, changed)
	if err != nil {
		return nil, err
	}
	if err := s.journal.Append(ctx, ev); err != nil {
		return nil, err
	}
	if !wantReceipt {
		return nil, nil
	}
	return s.journal.Receipt(ctx, ev.ID, ev.Leaf)
}
