package lethe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/erasure"
	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/history"
	"github.com/lethe-io/lethe/internal/hooks"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/recall"
	"github.com/lethe-io/lethe/internal/requests"
	"github.com/lethe-io/lethe/internal/sealing"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/internal/sweep"
	"github.com/lethe-io/lethe/internal/writes"
	"github.com/lethe-io/lethe/proofs"
)

// Grain is one record. Its fields (JSON names in brackets):
//
//   - Hash (hash): the lowercase hex SHA-256 of the sealed blob as stored;
//     set by lethe.
//   - Memory (memory): the memory it belongs to ("" means "default").
//   - Type (type): required, e.g. fact, event, caveat, goal.
//   - Subject, Relation, Object (subject, relation, object): the triple;
//     Content (content): free text. A grain has a triple, content or both.
//   - Namespace (namespace), Scope (scope, a path such as acme/prod) and
//     UserID (user_id): where it belongs and whom it is about.
//   - Tags (tags) and Metadata (metadata). Each tag is a non-empty
//     string: a write given an empty tag (or one of white space only) is
//     refused with code invalid_argument naming it (tags[i]); repeated
//     tags are kept once.
//   - Embedding (embedding): an optional vector for vector recall, of the
//     memory's fixed dimension, sealed with the payload.
//   - Importance and Confidence (importance, confidence): in [0,1]; a zero
//     Confidence means "not given" and is stored as 1.
//   - Salience (salience), Pinned (pinned), Archived (archived): the
//     forgetting policies' state.
//   - CreatedAt (created_at), Supersedes and SupersededBy (supersedes,
//     superseded_by): time and version chain.
//   - LastRetrievedAt and RetrievalCount (last_retrieved_at,
//     retrieval_count): retrieval statistics, set by lethe.
//   - Score (score): in a text or vector recall's answer, the grain's rank
//     (relevance times the retrieval-time decay).
//   - Scores (scores): in a recall's answer, the forgetting policies'
//     scores of the grain (retrieval, faded salience, retention).
//   - Erased (erased): in a History, a version whose key was erased; such
//     a Grain has only Hash set.
//
// Subject, Relation, Object, Content, UserID, Tags, Metadata and Embedding
// are personal: sealed at rest, found through blind tokens, never logged.
type Grain = grains.Grain

// Query selects grains for Recall.
type Query = grains.Query

// Selector names grains to Forget: exactly one of Hash, Hashes, Subject or
// UserID.
type Selector = grains.Selector

// Error is a domain error with a stable Code.
type Error = grains.Error

// Code is a stable error code.
type Code = grains.Code

// KeyWrapper wraps data keys under a key-encryption key.
type KeyWrapper = keys.Wrapper

// KeyRef names a data key to a KeyWrapper, without personal data.
type KeyRef = keys.Ref

// ErrorCode returns the stable code of err ("" for nil, "internal" for
// errors that are not lethe's).
func ErrorCode(err error) Code { return grains.ErrorCode(err) }

// HideErasure returns err as a client should hear it: an error with code
// erased becomes a not_found error with the same message (that of a hash
// that names no grain), without its cause; any other error is returned as
// it is. lethe's own surfaces (the HTTP API, CAL, MCP, the command line)
// answer every error through it, so an erasure leaves no trace.
func HideErasure(err error) error { return grains.HideErasure(err) }

// Proof is a signed erasure proof that an auditor verifies offline with
// "lethe verify" and the log's public key.
type Proof = proofs.Proof

// DB is an open lethe store. It is safe for concurrent use.
type DB struct {
	store  *store.DB
	ring   *keys.Keyring
	sealer *sealing.Sealer
	logger *slog.Logger
	now    func() time.Time

	log     audit.Log
	signer  *proofs.Signer
	seq     *audit.Sequencer
	journal *audit.Journal
	closers []func() error
	closed  atomic.Bool

	kek         keys.Wrapper
	rotator     *keys.Rotator
	epochs      epochs
	cleaner     *erasure.Cleaner
	stopCleaner func()

	sweep  *sweep.Sweeper
	recall *recall.Engine

	hooks    *hooks.Registry
	requests *requests.Workflow
	erasure  *erasure.Eraser
	history  *history.Exporter
	writes   *writes.Writer
}

// ErrClosed is returned by calls on a closed DB.
var ErrClosed = errors.New("lethe: closed")

// Receipt is what an audited destructive call returns: the event, and its
// proof once a signed checkpoint covers it. Its fields: EventID (names the
// audit event; "lethe audit proof --event ID" fetches its proof later if
// Pending), SubjectNonce (hex; opens the subject commitment in the leaf,
// for the caller alone: it is stored nowhere), Proof (the signed proof, or
// nil while Pending), TlogProof (Proof as a c2sp.org/tlog-proof@v1 text
// file, which "lethe verify" also reads), Pending (no checkpoint covered
// the event within Config.ProofWait), and Leaf and LeafSignature (the
// signed receipt: the exact leaf and the log key's signature over it,
// available even while Pending).
type Receipt = audit.Receipt

// epochs remembers, per memory, the erase epoch this process's key cache
// reflects.
type epochs struct {
	mu sync.Mutex
	m  map[string]int64
}

// observe purges the keyring when a row read shows a newer erase epoch than
// the cache reflects: another instance erased a key since.
func (db *DB) observe(rows []store.GrainRow) {
	if len(rows) == 0 {
		return
	}
	db.epochs.mu.Lock()
	defer db.epochs.mu.Unlock()
	if db.epochs.m == nil {
		db.epochs.m = make(map[string]int64)
	}
	for _, r := range rows {
		if seen, ok := db.epochs.m[r.Memory]; !ok || seen != r.Epoch {
			db.ring.PurgeMemory(r.Memory)
			db.epochs.m[r.Memory] = r.Epoch
		}
	}
}

// PurgeErased deletes, now, the rows and index tokens that erasures made
// unreadable (a background cleaner does this after each stream of erasures) and returns how
// many it deleted. It also removes the text postings of every grain
// deleted so far whose postings are still queued (PostgreSQL).
func (db *DB) PurgeErased(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := db.store.CleanupErased(ctx, 5000)
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			break
		}
	}
	_, err := db.store.DrainPostings(ctx)
	return total, err
}

// memoryName returns m, or "default" for "", after validating it.
func memoryName(m string) (string, error) {
	if m == "" {
		m = grains.DefaultMemory
	}
	return m, grains.ValidateMemory(m)
}

func checkHash(h string) error {
	if !grains.ValidHash(h) {
		return grains.FieldError(grains.CodeInvalidArgument, "hash", "must be 64 lowercase hex digits")
	}
	return nil
}

// signedOf converts a stored checkpoint.
func signedOf(row *store.CheckpointRow) *audit.SignedCheckpoint {
	cp := &audit.SignedCheckpoint{Size: uint64(row.Size), Note: row.Note}
	copy(cp.Root[:], row.Root)
	return cp
}

// outbox adapts the store's audit tables to audit.Outbox, through at: the
// database itself (store.DB.Audit: each call its own transaction) or, in
// an atomicOutbox's step, one transaction (whose context the calls use).
type outbox struct {
	at  func(context.Context) *store.AuditTx
	now func() time.Time
}

func (o outbox) AssignSequence(ctx context.Context, max int) (int, error) {
	return o.at(ctx).AssignSequence(max)
}

func (o outbox) Sequenced(ctx context.Context, from uint64, max int) ([]audit.Sequenced, error) {
	evs, err := o.at(ctx).Sequenced(int64(from), max)
	out := make([]audit.Sequenced, len(evs))
	for i, e := range evs {
		out[i] = audit.Sequenced{Index: uint64(e.Seq), Leaf: e.Leaf, EventID: e.EventID}
	}
	return out, err
}

func (o outbox) Counters(ctx context.Context) (uint64, uint64, error) {
	n, a, err := o.at(ctx).SequenceCounters()
	return uint64(n), uint64(a), err
}

func (o outbox) SetAppended(ctx context.Context, n uint64) error {
	return o.at(ctx).SetAppended(int64(n))
}

func (o outbox) LatestCheckpoint(ctx context.Context) (*audit.SignedCheckpoint, error) {
	row, err := o.at(ctx).LatestCheckpoint()
	if err != nil || row == nil {
		return nil, err
	}
	return signedOf(row), nil
}

func (o outbox) SaveCheckpoint(ctx context.Context, c audit.SignedCheckpoint) error {
	return o.at(ctx).SaveCheckpoint(store.CheckpointRow{Size: int64(c.Size), Root: c.Root[:], Note: c.Note, CreatedUS: o.now().UnixMicro()})
}

// atomicOutbox is the outbox of a store that also holds the embedded log:
// a sequencer step runs in one transaction of it (audit.AtomicOutbox).
type atomicOutbox struct {
	outbox
	st  *store.DB
	log *audit.EmbeddedLog
}

var _ audit.AtomicOutbox = atomicOutbox{}

func (o atomicOutbox) Atomic(ctx context.Context, fn func(audit.Outbox, audit.Log) error) error {
	return o.st.InAuditTx(ctx, func(a *store.AuditTx) error {
		in := outbox{at: func(context.Context) *store.AuditTx { return a }, now: o.now}
		return fn(in, o.log.In(a.Gorm()))
	})
}

// opener adapts the DB's sealer to recall.Opener.
type opener struct{ db *DB }

func (o opener) Observe(rows []store.GrainRow) { o.db.observe(rows) }

// Prepare observes rows' erase epochs, then reads the keys they need.
func (o opener) Prepare(ctx context.Context, rows []store.GrainRow) {
	o.db.observe(rows)
	o.db.sealer.WarmRows(ctx, rows)
}

func (o opener) Open(ctx context.Context, r *store.GrainRow) (*grains.Grain, error) {
	return o.db.sealer.Open(ctx, r)
}

// tracker hands recall's retrieval statistics to the sweeper, which Open
// starts after recall.
type tracker struct{ db *DB }

func (t tracker) Policy() *forgetting.Policy { return t.db.sweep.Policy() }

func (t tracker) Recalled(q *grains.Query, gs []grains.Grain, ids []int64) {
	t.db.sweep.Recalled(q, gs, ids)
}

func (t tracker) Searched(memory string, now time.Time, gs []grains.Grain, ids []int64) {
	t.db.sweep.Searched(memory, now, gs, ids)
}

// sealer adapts the DB's sealer to sweep.Sealer: it notes the erase epoch
// of the rows it opens.
type sealer struct{ db *DB }

func (s sealer) Open(ctx context.Context, r *store.GrainRow) (*grains.Grain, error) {
	s.db.observe([]store.GrainRow{*r})
	return s.db.sealer.Open(ctx, r)
}

func (s sealer) Seal(ctx context.Context, g *grains.Grain) (*store.GrainRow, error) {
	return s.db.sealer.Seal(ctx, g)
}
