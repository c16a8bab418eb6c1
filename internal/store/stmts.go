package store

import (
	"context"
	"database/sql"
	"sync"

	"gorm.io/gorm"
)

// stmtPool is gorm's pool of prepared statements (PrepareStmt) whose
// transactions run statements prepared on the database, not in the
// transaction.
//
// gorm prepares a statement first met in a transaction in that transaction
// and keeps it; database/sql cannot reuse a transaction's statement in
// another, so it prepared every statement of a write again in every
// transaction (and closed it at the end). Preparing the multi-row inserts
// of a batch cost about a fifth of the insert's CPU (BenchmarkAddBatch,
// SQLite). Here a transaction's statement is prepared once on the database,
// in gorm's cache, and run in the transaction through Tx.StmtContext,
// which prepares it once per connection.
//
// Preparing on the database takes a connection of the pool while the
// transaction holds one: it is used only where the pool has no bound
// (SQLite's store), never where a full pool would wait for itself.
//
// A statement stays prepared on each connection it ran on until gorm's
// cache evicts it: the cache keeps the stmtCacheSize statements used last.
//
// Its transactions pass the file's writeGate first.
type stmtPool struct {
	*gorm.PreparedStmtDB
	gate *writeGate
}

// stmtCacheSize bounds the statements a stmtPool keeps prepared. A
// transaction's statements used to be closed with it; kept, they cost
// memory: a 450-row insert of 20 columns holds about 0.9 MB of SQLite's
// memory on each connection it ran on (measured with go-sqlite3, 100 such
// statements). A batch runs about twenty distinct statements, its
// full-chunk inserts the same every time and its remainders new ones: the
// cache keeps the first and lets the others go.
const stmtCacheSize = 64

// BeginTx implements gorm.ConnPoolBeginner: the transaction begins once
// it passed the pool's write gate, and leaves it at its Commit or
// Rollback.
func (p *stmtPool) BeginTx(ctx context.Context, opt *sql.TxOptions) (gorm.ConnPool, error) {
	leave := p.gate.enter(ctx)
	c, err := p.PreparedStmtDB.BeginTx(ctx, opt)
	if err != nil {
		leave()
		return c, err
	}
	t, ok := c.(*gorm.PreparedStmtTX)
	if !ok {
		leave() // not gorm's prepared transaction: SQLite's lock alone
		return c, nil
	}
	sqlTx, ok := t.Tx.(*sql.Tx)
	if !ok {
		leave()
		return c, nil
	}
	return &stmtTx{PreparedStmtTX: t, tx: sqlTx, pool: p, leave: sync.OnceFunc(leave)}, nil
}

// stmt returns query prepared on the database, from gorm's cache.
func (p *stmtPool) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	p.Mux.RLock()
	st, ok := p.Stmts.Get(query)
	p.Mux.RUnlock()
	if ok && !st.Transaction {
		return st.Stmt, st.Error()
	}
	p.Mux.Lock()
	if st, ok := p.Stmts.Get(query); ok && !st.Transaction {
		p.Mux.Unlock()
		return st.Stmt, st.Error()
	}
	// New unlocks p.Mux once the entry is in the cache, before preparing.
	st, err := p.Stmts.New(ctx, query, false, p.ConnPool, p.Mux)
	if err != nil {
		return nil, err
	}
	return st.Stmt, nil
}

// stmtTx is a transaction of a stmtPool.
type stmtTx struct {
	*gorm.PreparedStmtTX
	tx    *sql.Tx
	pool  *stmtPool
	leave func() // the write gate, once
}

// Commit implements gorm.TxCommitter. The gate opens whatever the commit
// returns (gorm then rolls back, which finds it open).
func (t *stmtTx) Commit() error {
	defer t.leave()
	return t.PreparedStmtTX.Commit()
}

// Rollback implements gorm.TxCommitter.
func (t *stmtTx) Rollback() error {
	defer t.leave()
	return t.PreparedStmtTX.Rollback()
}

// ExecContext implements gorm.ConnPool.
func (t *stmtTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.pool.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

// QueryContext implements gorm.ConnPool.
func (t *stmtTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := t.pool.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
}

// QueryRowContext implements gorm.ConnPool.
func (t *stmtTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := t.pool.stmt(ctx, query)
	if err != nil {
		// A Row carries its error only when built by database/sql: run
		// the query unprepared, which reports the same error.
		return t.tx.QueryRowContext(ctx, query, args...)
	}
	return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
}
