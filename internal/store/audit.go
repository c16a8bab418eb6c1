package store

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
)

// Event is an audit event committed with the state change it records (see
// audit.Journal).
type Event = audit.Event

var _ audit.Events = (*DB)(nil)

// EventRow is an outbox row. Seq is the leaf index, assigned by the
// sequencer after commit; nil until then.
type EventRow struct {
	ID        int64  `gorm:"primaryKey;autoIncrement;index:idx_audit_events_memory,priority:2"`
	EventID   string `gorm:"size:32;not null;uniqueIndex:idx_audit_events_event"`
	Memory    string `gorm:"size:64;not null;index:idx_audit_events_memory,priority:1"`
	Type      string `gorm:"size:32;not null"`
	Leaf      []byte `gorm:"not null"`
	Seq       *int64 `gorm:"uniqueIndex:idx_audit_events_seq"`
	CreatedUS int64  `gorm:"column:created_us;not null"`
}

// TableName is the outbox table.
func (EventRow) TableName() string { return "audit_events" }

// SequenceState is the single row holding the sequencer's counters.
type SequenceState struct {
	ID       int64 `gorm:"primaryKey;autoIncrement:false"`
	NextSeq  int64 `gorm:"not null"`
	Appended int64 `gorm:"not null"`
}

// TableName is the sequencer state table.
func (SequenceState) TableName() string { return "audit_sequence" }

// CheckpointRow is a checkpoint lethe signed.
type CheckpointRow struct {
	Size      int64  `gorm:"primaryKey;autoIncrement:false"`
	Root      []byte `gorm:"not null"`
	Note      []byte `gorm:"not null"`
	CreatedUS int64  `gorm:"column:created_us;not null"`
}

// TableName is the checkpoint table.
func (CheckpointRow) TableName() string { return "audit_checkpoints" }

// EventsFunc builds the audit events of an audited change from what its
// transaction did (change: a *Deletion, the archived hashes, an *Erasure,
// a *Replaced, a created key...), inside that transaction, so the events
// commit with the change or not at all. It may return no events, and it
// may refuse the change by returning an error (then nothing changes).
// Every store call that makes an audited change takes one; a nil
// EventsFunc records nothing.
type EventsFunc[T any] func(ctx context.Context, change T) ([]Event, error)

// commitEvents inserts in tx, created at now, the events mk builds for
// change.
// ErrDryRun, returned by an EventsFunc, rolls the change back: the call
// that built the change returns what it would have done (its *Deletion or
// *Erasure) with an error wrapping ErrDryRun, and nothing is written.
var ErrDryRun = errors.New("dry run: rolled back")

func commitEvents[T any](ctx context.Context, tx *gorm.DB, now int64, change T, mk EventsFunc[T]) error {
	if mk == nil {
		return nil
	}
	evs, err := mk(ctx, change)
	if err != nil {
		return err
	}
	return insertEvents(tx, now, evs)
}

func insertEvents(tx *gorm.DB, now int64, evs []Event) error {
	if len(evs) == 0 {
		return nil
	}
	rows := make([]EventRow, len(evs))
	for i, e := range evs {
		rows[i] = EventRow{EventID: e.ID, Memory: e.Memory, Type: e.Type, Leaf: e.Leaf, CreatedUS: now}
	}
	if err := tx.Create(&rows).Error; err != nil {
		return translate(err, "write audit event")
	}
	for _, e := range evs {
		if len(e.Hashes) == 0 {
			continue
		}
		b, err := packHashes(e.Hashes)
		if err != nil {
			return err
		}
		if err := tx.Create(&BulkHashesRow{EventID: e.ID, Memory: e.Memory, Hashes: b}).Error; err != nil {
			return translate(err, "write bulk event hashes")
		}
	}
	return queueDeliveriesGorm(tx, evs)
}

func insertEventsPG(ctx context.Context, tx pgExecer, now int64, evs []Event) error {
	for _, e := range evs {
		if _, err := tx.Exec(ctx, `INSERT INTO audit_events (event_id, memory, type, leaf, created_us) VALUES ($1, $2, $3, $4, $5)`,
			e.ID, e.Memory, e.Type, e.Leaf, now); err != nil {
			return err
		}
		if len(e.Hashes) > 0 {
			b, err := packHashes(e.Hashes)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO bulk_hashes (event_id, memory, hashes) VALUES ($1, $2, $3)`, e.ID, e.Memory, b); err != nil {
				return err
			}
		}
	}
	if len(evs) == 0 {
		return nil
	}
	return queueDeliveriesPG(ctx, tx, evs)
}

// AppendEvents commits events alone (for events that record no other state
// change, such as a refused erasure).
func (db *DB) AppendEvents(ctx context.Context, now int64, evs []Event) error {
	return db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return insertEvents(tx, now, evs) })
}

// sequencerLock is the PostgreSQL advisory lock key that serializes
// sequence assignment across replicas ("lethe-sq").
const sequencerLock = 0x6c657468652d7371

// AssignSequence numbers up to max committed, unnumbered events with the
// next consecutive leaf indices, and returns how many it numbered. One
// assigner runs at a time across replicas (an advisory lock on PostgreSQL,
// the write lock on SQLite), and numbers are taken in the same transaction
// that records them, so there are no gaps.
func (db *DB) AssignSequence(ctx context.Context, max int) (int, error) {
	return db.Audit(ctx).AssignSequence(max)
}

// AuditTx is the sequencer's part of the outbox on one transaction (see
// DB.InAuditTx), or on the database itself.
type AuditTx struct {
	g       *gorm.DB
	dialect string
	// inTx says g is a transaction (InAuditTx): a call runs in it as it is,
	// without a savepoint (two more round trips) of its own.
	inTx bool
	// counters is the sequence state as this transaction last wrote it
	// (AssignSequence, SetAppended): its row stays locked until the
	// transaction ends, so SequenceCounters answers from it. Nil until
	// then, and outside a transaction.
	counters *SequenceState
	// numbered are the events AssignSequence numbered in this
	// transaction, in index order: Sequenced answers from them.
	numbered []SequencedEvent
	// latest is the latest checkpoint as AssignSequence read it, when
	// latestRead: LatestCheckpoint answers from it. Another step holds
	// the sequencer's lock (or SQLite's write lock) until this one ends;
	// a checkpoint that a step of four transactions saves meanwhile is of
	// the log before this step, and the step's consistency check against
	// the one read here still proves that the log only grew.
	latest     *CheckpointRow
	latestRead bool
	// pipe is the step's transaction on PostgreSQL (see auditPipe): its
	// writes are queued and sent with the next read or the commit.
	pipe *auditPipe
}

// Audit returns the sequencer's part of the outbox on the database itself:
// each call is its own transaction.
func (db *DB) Audit(ctx context.Context) *AuditTx {
	return &AuditTx{g: db.gorm.WithContext(ctx), dialect: db.dialect}
}

// InAuditTx runs fn in one transaction, handed as an AuditTx: what fn
// writes through it (and through its Gorm, such as an audit.EmbeddedLog's
// view) commits together when fn returns nil, and not at all otherwise.
func (db *DB) InAuditTx(ctx context.Context, fn func(a *AuditTx) error) error {
	if db.dialect == Postgres {
		return translate(db.inAuditPipe(ctx, fn), "audit sequencer step")
	}
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return fn(&AuditTx{g: tx, dialect: db.dialect, inTx: true})
	})
	return translate(err, "audit sequencer step")
}

// Gorm returns the transaction (or database) a is bound to.
func (a *AuditTx) Gorm() *gorm.DB { return a.g }

// transaction runs fn in a's transaction, or in a new one when a is the
// database itself.
func (a *AuditTx) transaction(fn func(tx *gorm.DB) error) error {
	if a.inTx {
		return fn(a.g)
	}
	return a.g.Transaction(fn)
}

// AssignSequence is DB.AssignSequence in a: three statements (the lock on
// PostgreSQL, the numbering, the counter, which returns the counters for
// SequenceCounters), where it took seven and a savepoint: most of a
// sequencer step's time under concurrent forgets.
// The state row is created when the store opens (ensureSequenceState).
func (a *AuditTx) AssignSequence(max int) (int, error) {
	if a.pipe != nil {
		n, err := a.assignPiped(max)
		return n, translate(err, "assign audit sequence")
	}
	n := 0
	err := a.transaction(func(tx *gorm.DB) error {
		if a.dialect == Postgres {
			// A statement of its own: the numbering's snapshot is taken
			// after the lock, so it sees every event numbered before.
			if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", sequencerLock).Error; err != nil {
				return err
			}
		}
		// One statement numbers them all, in id order, from the counter,
		// and returns them for Sequenced.
		var evs []SequencedEvent
		err := tx.Raw(numberEvents, max).Scan(&evs).Error
		if err != nil {
			return err
		}
		n = len(evs)
		if n == 0 {
			return nil
		}
		if a.inTx && n < max {
			// Kept for the step's Sequenced: the last (usually the only)
			// batch, never a whole backlog.
			slices.SortFunc(evs, func(x, y SequencedEvent) int { return cmp.Compare(x.Seq, y.Seq) })
			a.numbered = evs
		}
		// The counters, and the latest checkpoint, for the step's next
		// reads (SequenceCounters, LatestCheckpoint).
		var st []struct {
			SequenceState
			CpSize         *int64
			CpRoot, CpNote []byte
		}
		if err := tx.Raw(`UPDATE audit_sequence SET next_seq = next_seq + ? WHERE id = 1 RETURNING id, next_seq, appended,
			(SELECT size FROM audit_checkpoints ORDER BY size DESC LIMIT 1) AS cp_size,
			(SELECT root FROM audit_checkpoints ORDER BY size DESC LIMIT 1) AS cp_root,
			(SELECT note FROM audit_checkpoints ORDER BY size DESC LIMIT 1) AS cp_note`, n).Scan(&st).Error; err != nil {
			return err
		}
		if len(st) != 1 {
			return errors.New("the audit sequence state is missing")
		}
		if a.inTx {
			a.counters = &st[0].SequenceState
			a.latestRead = true
			if st[0].CpSize != nil {
				a.latest = &CheckpointRow{Size: *st[0].CpSize, Root: st[0].CpRoot, Note: st[0].CpNote}
			}
		}
		return nil
	})
	return n, translate(err, "assign audit sequence")
}

// numberEvents numbers up to ? unnumbered events, in id order, from the
// sequencer's counter, and returns them.
const numberEvents = `UPDATE audit_events SET seq = (SELECT next_seq FROM audit_sequence WHERE id = 1) + r.rn - 1
	FROM (SELECT id, row_number() OVER (ORDER BY id) AS rn FROM audit_events WHERE seq IS NULL ORDER BY id LIMIT ?) AS r
	WHERE audit_events.id = r.id RETURNING audit_events.seq, audit_events.event_id, audit_events.leaf`

// numberEventsPG is numberEvents with PostgreSQL's placeholders, for the
// step's pipeline.
var numberEventsPG = (&DB{dialect: Postgres}).rebind(numberEvents)

// advanceSequencePiped moves the counter past the events numberEvents
// numbered just before it, in the same pipeline (PostgreSQL; see
// assignPiped), which cannot pass it their number, and returns the
// counters and the latest checkpoint. The numbered events are the
// counter's old value and the ones after it, and every earlier event's
// index is below it, so the counter's new value is the largest index plus
// one: read from the end of the index on seq, one entry whatever the
// number of events. Counting the events from the counter on instead, the
// planner, estimating a third of the table for the unknown bound, read
// every event of the log by a sequential scan in each step while the table
// held a few thousand (1,367 scans of about 1,000 rows for 2,000 forgets).
const advanceSequencePiped = `UPDATE audit_sequence SET next_seq = GREATEST(next_seq, (SELECT max(seq) + 1 FROM audit_events))
	WHERE id = 1 RETURNING id, next_seq, appended,
	(SELECT size FROM audit_checkpoints ORDER BY size DESC LIMIT 1),
	(SELECT root FROM audit_checkpoints ORDER BY size DESC LIMIT 1),
	(SELECT note FROM audit_checkpoints ORDER BY size DESC LIMIT 1)`

// ensureSequenceState creates the sequencer's state row if it is missing.
func ensureSequenceState(g *gorm.DB) error {
	return g.Clauses(clause.OnConflict{DoNothing: true}).Create(&SequenceState{ID: 1}).Error
}

// SequencedEvent is an event with its leaf index.
type SequencedEvent struct {
	Seq     int64
	EventID string
	Leaf    []byte
}

// Sequenced returns up to max numbered events from index from on, in order.
func (db *DB) Sequenced(ctx context.Context, from int64, max int) ([]SequencedEvent, error) {
	return db.Audit(ctx).Sequenced(from, max)
}

// Sequenced is DB.Sequenced in a.
func (a *AuditTx) Sequenced(from int64, max int) ([]SequencedEvent, error) {
	// The events this transaction numbered, when they are the ones asked
	// for (they are consecutive: see AssignSequence).
	if len(a.numbered) > 0 && a.numbered[0].Seq == from {
		out := a.numbered[:min(max, len(a.numbered))]
		a.numbered = a.numbered[len(out):]
		return out, nil
	}
	var rows []EventRow
	err := a.g.Where("seq >= ?", from).Order("seq").Limit(max).Find(&rows).Error
	if err != nil {
		return nil, translate(err, "read audit events")
	}
	out := make([]SequencedEvent, len(rows))
	for i, r := range rows {
		out[i] = SequencedEvent{Seq: *r.Seq, EventID: r.EventID, Leaf: r.Leaf}
	}
	return out, nil
}

// SequenceCounters returns the next index to assign and how many leaves the
// log has accepted.
func (db *DB) SequenceCounters(ctx context.Context) (next, appended int64, err error) {
	return db.Audit(ctx).SequenceCounters()
}

// SequenceCounters is DB.SequenceCounters in a.
func (a *AuditTx) SequenceCounters() (next, appended int64, err error) {
	if a.counters != nil {
		return a.counters.NextSeq, a.counters.Appended, nil
	}
	var st []SequenceState
	if err := a.g.Where("id = 1").Find(&st).Error; err != nil {
		return 0, 0, translate(err, "read audit sequence")
	}
	if len(st) == 0 {
		return 0, 0, nil
	}
	return st[0].NextSeq, st[0].Appended, nil
}

// SetAppended records that the log holds the first n leaves. It never
// moves the counter backwards.
func (db *DB) SetAppended(ctx context.Context, n int64) error {
	return db.Audit(ctx).SetAppended(n)
}

// SetAppended is DB.SetAppended in a.
func (a *AuditTx) SetAppended(n int64) error {
	if a.pipe != nil {
		pipeConn{a.pipe}.Defer(`UPDATE audit_sequence SET appended = $1 WHERE id = 1 AND appended < $1`, n)
		if a.counters != nil && a.counters.Appended < n {
			a.counters.Appended = n
		}
		return nil
	}
	err := a.g.Model(&SequenceState{}).Where("id = 1 AND appended < ?", n).Update("appended", n).Error
	if err == nil && a.counters != nil && a.counters.Appended < n {
		a.counters.Appended = n
	}
	return translate(err, "record audit append")
}

// CommittedEvent returns the committed event id, or an error with code
// not_found.
func (db *DB) CommittedEvent(ctx context.Context, id string) (*audit.Committed, error) {
	var rows []EventRow
	if err := db.gorm.WithContext(ctx).Where("event_id = ?", id).Limit(1).Find(&rows).Error; err != nil {
		return nil, translate(err, "read audit event")
	}
	if len(rows) == 0 {
		return nil, grains.NoAuditEvent(id)
	}
	c := &audit.Committed{Leaf: rows[0].Leaf}
	if rows[0].Seq != nil {
		c.Index, c.Sequenced = uint64(*rows[0].Seq), true
	}
	return c, nil
}

// LatestCheckpoint returns the largest signed checkpoint, or nil if none.
func (db *DB) LatestCheckpoint(ctx context.Context) (*CheckpointRow, error) {
	return db.Audit(ctx).LatestCheckpoint()
}

// LatestCheckpoint is DB.LatestCheckpoint in a.
func (a *AuditTx) LatestCheckpoint() (*CheckpointRow, error) {
	if a.latestRead {
		return a.latest, nil
	}
	var rows []CheckpointRow
	if err := a.g.Order("size DESC").Limit(1).Find(&rows).Error; err != nil {
		return nil, translate(err, "read checkpoint")
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &rows[0], nil
}

// CheckpointAt returns the signed checkpoint of a size, or not_found.
func (db *DB) CheckpointAt(ctx context.Context, size int64) (*CheckpointRow, error) {
	var rows []CheckpointRow
	if err := db.gorm.WithContext(ctx).Where("size = ?", size).Limit(1).Find(&rows).Error; err != nil {
		return nil, translate(err, "read checkpoint")
	}
	if len(rows) == 0 {
		return nil, grains.Errorf(grains.CodeNotFound, "no checkpoint of size %d", size)
	}
	return &rows[0], nil
}

// SaveCheckpoint stores a signed checkpoint. Storing the same size twice
// keeps the first (signatures are deterministic, so replicas agree).
func (db *DB) SaveCheckpoint(ctx context.Context, c CheckpointRow) error {
	return db.Audit(ctx).SaveCheckpoint(c)
}

// SaveCheckpoint is DB.SaveCheckpoint in a.
func (a *AuditTx) SaveCheckpoint(c CheckpointRow) error {
	if a.pipe != nil {
		pipeConn{a.pipe}.Defer(`INSERT INTO audit_checkpoints (size, root, note, created_us) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
			c.Size, c.Root, c.Note, c.CreatedUS)
		return nil
	}
	err := a.g.Clauses(clause.OnConflict{DoNothing: true}).Create(&c).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return nil
	}
	return translate(err, "save checkpoint")
}
