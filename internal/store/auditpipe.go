package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/audit"
)

// auditPipe is a sequencer step's transaction on PostgreSQL (InAuditTx):
// one pgx connection, whose writes are queued and sent with the
// transaction's next read or with its COMMIT, in one round trip. A step
// was nine round trips, each a statement waiting for the last (BEGIN, the
// lock, the numbering, the counters, the log's state, the append, the
// appended counter, the checkpoint, COMMIT); it is three: BEGIN, the lock,
// the numbering and the counters (AssignSequence); the log's state, read
// and locked by the append; the writes and COMMIT.
//
// PostgreSQL runs a pipeline's statements one after the other, each
// seeing what the ones before it did, so queueing changes no statement's
// result; an error aborts the transaction and the statements after it do
// not run (COMMIT among them).
type auditPipe struct {
	conn   *sql.Conn
	queue  []queued // writes not yet sent
	begun  bool     // BEGIN was sent: the transaction must end with COMMIT or ROLLBACK
	locked bool     // the sequencer's lock was taken
	ended  bool
	err    error // the first failed send: the transaction is aborted
}

type queued struct {
	sql  string
	args []any
}

// pipeConn is the gorm connection of an auditPipe: every statement gorm
// runs sends the queued writes first (and BEGIN, the first time); an
// embedded log's append hands its write to Defer.
type pipeConn struct{ p *auditPipe }

var (
	_ gorm.ConnPool  = pipeConn{}
	_ audit.Deferrer = pipeConn{}
)

func (c pipeConn) Defer(sql string, args ...any) { c.p.queue = append(c.p.queue, queued{sql, args}) }

func (c pipeConn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if err := c.p.send(ctx, nil, nil); err != nil {
		return nil, err
	}
	return c.p.conn.PrepareContext(ctx, query)
}

func (c pipeConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := c.p.send(ctx, nil, nil); err != nil {
		return nil, err
	}
	return c.p.conn.ExecContext(ctx, query, args...)
}

func (c pipeConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := c.p.send(ctx, nil, nil); err != nil {
		return nil, err
	}
	return c.p.conn.QueryContext(ctx, query, args...)
}

func (c pipeConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if err := c.p.send(ctx, nil, nil); err != nil {
		// A *sql.Row carries an error only when database/sql makes it: a
		// query on a cancelled context does. The transaction is aborted,
		// and its commit returns err.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		return c.p.conn.QueryRowContext(cctx, query, args...)
	}
	return c.p.conn.QueryRowContext(ctx, query, args...)
}

// send sends, in one round trip, BEGIN (the first time), the queued
// writes, then what more queues, and hands the results of more's
// statements to read.
func (p *auditPipe) send(ctx context.Context, more func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	if p.err != nil {
		return p.err
	}
	if p.ended {
		return errors.New("audit step: the transaction has ended")
	}
	if p.begun && len(p.queue) == 0 && more == nil {
		return nil // nothing to send: the usual case of a read
	}
	b := &pgx.Batch{}
	n := 0
	if !p.begun {
		b.Queue("BEGIN")
		n++
	}
	for _, q := range p.queue {
		b.Queue(q.sql, q.args...)
		n++
	}
	p.queue = p.queue[:0]
	if more != nil {
		more(b)
	}
	p.err = p.conn.Raw(func(dc any) error {
		pc, err := pgxConn(dc)
		if err != nil {
			return err
		}
		br := pc.SendBatch(ctx, b)
		p.begun = true
		for range n {
			if _, err = br.Exec(); err != nil {
				break
			}
		}
		if err == nil && read != nil {
			err = read(br)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		return err
	})
	return p.err
}

// commit sends the queued writes and COMMIT.
func (p *auditPipe) commit(ctx context.Context) error {
	if !p.begun && len(p.queue) == 0 {
		p.ended = true
		return nil // nothing was read or written
	}
	err := p.send(ctx, func(b *pgx.Batch) { b.Queue("COMMIT") }, func(br pgx.BatchResults) error {
		_, err := br.Exec()
		return err
	})
	if err == nil {
		p.ended = true
	}
	return err
}

// rollback ends a transaction that did not commit (see endTx).
func (p *auditPipe) rollback(ctx context.Context) {
	if p.ended || !p.begun {
		return
	}
	p.ended = true
	p.conn.Raw(func(dc any) error {
		if pc, err := pgxConn(dc); err == nil {
			endTx(ctx, pc)
		}
		return nil
	})
}

// inAuditPipe is InAuditTx on PostgreSQL: fn's AuditTx runs on an
// auditPipe.
func (db *DB) inAuditPipe(ctx context.Context, fn func(a *AuditTx) error) error {
	conn, err := db.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	p := &auditPipe{conn: conn}
	defer p.rollback(ctx)
	g := db.gorm.Session(&gorm.Session{NewDB: true, Context: ctx})
	g.Statement.ConnPool = pipeConn{p}
	if err := fn(&AuditTx{g: g, dialect: db.dialect, inTx: true, pipe: p}); err != nil {
		return err
	}
	return p.commit(ctx)
}

// assignPiped is AssignSequence on an auditPipe: the lock (the first time),
// the numbering and the counters in the round trip that begins the step.
// The counter moves past the events just numbered, counted in the
// statement: every event numbered before has a lower index than the
// counter, so the events from it on are this step's.
func (a *AuditTx) assignPiped(max int) (int, error) {
	p := a.pipe
	lock := !p.locked
	var evs []SequencedEvent
	var st SequenceState
	var cpSize *int64
	var cpRoot, cpNote []byte
	err := p.send(a.g.Statement.Context, func(b *pgx.Batch) {
		if lock {
			b.Queue("SELECT pg_advisory_xact_lock($1)", int64(sequencerLock))
		}
		b.Queue(numberEventsPG, max)
		b.Queue(advanceSequencePiped)
	}, func(br pgx.BatchResults) error {
		if lock {
			if _, err := br.Exec(); err != nil {
				return err
			}
			p.locked = true
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var e SequencedEvent
			if err := rows.Scan(&e.Seq, &e.EventID, &e.Leaf); err != nil {
				rows.Close()
				return err
			}
			evs = append(evs, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		err = br.QueryRow().Scan(&st.ID, &st.NextSeq, &st.Appended, &cpSize, &cpRoot, &cpNote)
		if errors.Is(err, pgx.ErrNoRows) {
			return errors.New("the audit sequence state is missing")
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	n := len(evs)
	if n > 0 && n < max {
		// Kept for the step's Sequenced: the last (usually the only)
		// batch, never a whole backlog.
		slices.SortFunc(evs, func(x, y SequencedEvent) int { return cmp.Compare(x.Seq, y.Seq) })
		a.numbered = evs
	}
	a.counters = &st
	a.latestRead, a.latest = true, nil
	if cpSize != nil {
		a.latest = &CheckpointRow{Size: *cpSize, Root: cpRoot, Note: cpNote}
	}
	return n, nil
}
