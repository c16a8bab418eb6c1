package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Database names the database that holds lethe's tables. Every package that
// keeps tables of its own (the API tokens) opens it with [OpenDatabase], so
// that all of them get the same SQLite settings, foreign keys and file mode.
type Database struct {
	// Dialect is SQLite or Postgres.
	Dialect string
	// DSN is a PostgreSQL URL or key=value string, or the SQLite file path.
	DSN string
	// MaxOpenConns bounds the pool (0: no bound).
	MaxOpenConns int
}

// sqliteParams are the connection settings of every SQLite connection. WAL
// for concurrent readers, foreign keys enforced, IMMEDIATE transactions so
// writers queue on the busy timeout instead of failing on lock upgrade,
// FULL sync so a committed transaction survives power loss. secure_delete
// zeroes freed cells and pages (a destroyed wrapped key, a forgotten sealed
// row) in the pages a transaction writes; see scrub.go for the log.
// _stmt_cache_size keeps, per connection, the statements run through the
// driver's own QueryContext (queryDriver) and database/sql's unprepared
// calls prepared (go-sqlite3 finalizes them when the connection closes).
const sqliteParams = "?_journal_mode=WAL&_busy_timeout=10000&_foreign_keys=on&_txlock=immediate&_synchronous=FULL&_secure_delete=on&_stmt_cache_size=32"

// OpenDatabase opens d through gorm, with TranslateError, and checks that
// it answers. A SQLite file is created with mode 0600, and an existing one
// (with its -wal and -shm files) is restricted to it: the database holds
// wrapped keys and ciphertext, owner only like the KEK beside it. Errors
// carry codes (unavailable when the database cannot be reached).
func OpenDatabase(ctx context.Context, d Database) (*gorm.DB, error) {
	var dial gorm.Dialector
	switch d.Dialect {
	case SQLite:
		if err := restrictSQLite(d.DSN); err != nil {
			return nil, err
		}
		dial = sqlite.Open("file:" + d.DSN + sqliteParams)
	case Postgres:
		dial = postgres.Open(d.DSN)
	default:
		return nil, fmt.Errorf("store: unknown dialect %q", d.Dialect)
	}
	cached := d.Dialect == SQLite && d.MaxOpenConns == 0 // see stmtPool
	var maxStmts int
	if cached {
		maxStmts = stmtCacheSize
	}
	g, err := gorm.Open(dial, &gorm.Config{
		TranslateError:         true,
		PrepareStmt:            true,
		PrepareStmtMaxSize:     maxStmts,
		SkipDefaultTransaction: true,
		Logger:                 logger.Discard,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		return nil, translate(err, "open database")
	}
	sqlDB, err := g.DB()
	if err != nil {
		return nil, translate(err, "open database")
	}
	if p, ok := g.ConnPool.(*gorm.PreparedStmtDB); ok && cached {
		pool := &stmtPool{PreparedStmtDB: p, gate: gateFor(d.DSN)}
		g.ConnPool, g.Statement.ConnPool = pool, pool
	}
	if d.MaxOpenConns > 0 {
		sqlDB.SetMaxOpenConns(d.MaxOpenConns)
		sqlDB.SetMaxIdleConns(d.MaxOpenConns)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		sqlDB.Close()
		return nil, translate(err, "connect to database")
	}
	return g, nil
}

// restrictSQLite creates the SQLite file at path with mode 0600 if it does
// not exist, and gives mode 0600 to it and its -wal and -shm files if they
// do. SQLite creates the -wal and -shm files with the main file's mode.
func restrictSQLite(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: restrict %s: %w", p, err)
		}
	}
	return nil
}

// Migrate creates or updates the tables of models in g: the one way lethe's
// packages create their tables (the store's, the policy runs, the API
// tokens). It only adds tables, columns and indexes; what AutoMigrate cannot
// express (partial indexes, dropped indexes) follows it in the caller, as
// in the store's migrate.
func Migrate(ctx context.Context, g *gorm.DB, models ...any) error {
	return translate(g.WithContext(ctx).AutoMigrate(models...), "migrate schema")
}
