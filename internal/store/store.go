// Package store keeps lethe's rows through gorm: sealed grains with their
// blind tokens, wrapped data keys, and (from other packages' tables) the
// audit outbox. SQLite is the embedded default; PostgreSQL is used when a DSN
// is given. Nothing above this package sees gorm: errors come out as
// grains.Error values with stable codes.
//
// # What is stored
//
// A grain row holds operational fields in clear (memory, type, namespace,
// scope, scores, flags, timestamps, chain links), the sealed blob, the key
// chain id, and 16-byte blind tokens. Personal values (user ids, subjects,
// objects, content, tags, metadata) are never stored outside the blob.
//
// A data key row (data_keys) holds the key's memory, kind, name (a user
// key's is the user's blind reference while it lives, "erased-<id>" once
// destroyed), fingerprint and dates; its wrapped form is in the same row on SQLite and,
// on PostgreSQL, in data_key_wraps, partitioned by key id so that an
// erase's scrub rewrites a few thousand rows, not the whole table (see
// wraps.go and scrub.go).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
)

// Dialects.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Config says which database to open.
type Config struct {
	// Dialect is SQLite or Postgres.
	Dialect string
	// DSN is a PostgreSQL URL or key=value string, or the SQLite file path.
	DSN string
	// MaxOpenConns bounds the pool (default 16 for PostgreSQL).
	MaxOpenConns int
	Logger       *slog.Logger
}

// DB is the store.
type DB struct {
	gorm    *gorm.DB
	dialect string
	log     *slog.Logger

	// grainSeq is the grains id sequence (PostgreSQL), resolved once: a
	// batch reserves its ids from it.
	grainSeq string

	// generic is a second pool on the same PostgreSQL database (nil on
	// SQLite) whose sessions plan a prepared statement once, for every
	// value of its parameters (plan_cache_mode force_generic_plan): the
	// recalls driven by blind tokens run there (see FindGrains). On the
	// main pool PostgreSQL planned each of them again at every call.
	generic *sql.DB

	// inserted counts rows written since the last ANALYZE, and analyzeAt
	// is how many trigger the next; see noteInserted.
	inserted  atomic.Int64
	analyzeAt atomic.Int64
	analyzing atomic.Bool

	keyEvent EventsFunc[[]keys.Record]

	// scrub and scrubOff: see scrub.go.
	scrub scrubState
	// wraps: the partitions of data_key_wraps (PostgreSQL); see wraps.go.
	wraps    wrapState
	scrubOff atomic.Bool

	// tail counts the text index's recent postings (SQLite); see
	// insertSearch.
	tail postingTail

	// bg is the work the store runs in the background on the database (an
	// ANALYZE after inserts, a VACUUM after a forget): Close cancels it
	// and waits for it, so that no connection outlives Close.
	bg background
}

// background tracks the store's goroutines; see DB.goBackground.
type background struct {
	mu      sync.Mutex
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	running atomic.Int64
}

// Open opens the database and brings its schema up to date.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	d := Database{Dialect: cfg.Dialect, DSN: cfg.DSN}
	if cfg.Dialect == Postgres {
		d.MaxOpenConns = cfg.MaxOpenConns
		if d.MaxOpenConns <= 0 {
			d.MaxOpenConns = 16
		}
	}
	g, err := OpenDatabase(ctx, d)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db := &DB{gorm: g, dialect: cfg.Dialect, log: log}
	db.bg.ctx, db.bg.cancel = context.WithCancel(context.Background())
	if cfg.Dialect == Postgres {
		if db.generic, err = openGeneric(cfg.DSN, d.MaxOpenConns); err != nil {
			db.Close()
			return nil, err
		}
	}
	db.analyzeAt.Store(analyzeFirst)
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.analyzeIfStale(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.countTail(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if db.dialect == SQLite {
		// A process killed after an erase or a forget committed and before
		// its scrub left the destroyed rows' older page images in the main
		// file, the zeroed ones in the write-ahead log: copy the log in now
		// (TestNoResidueAfterCrashAtErase), as the scrub would have.
		if err := db.checkpoint(ctx); err != nil {
			db.log.Warn("checkpoint at open failed; a crashed erase's residue may stay until the next scrub", slog.Any("error", err))
		}
	} else if err := db.RetryScrub(ctx); err != nil {
		// The tables an erase marked and no scrub rewrote (a crash
		// between its commit and its scrub, or a scrub that an older
		// snapshot held back) are rewritten now.
		db.log.Warn("scrub at open failed; a crashed erase's residue may stay until the next scrub", slog.Any("error", err))
	}
	return db, nil
}

// Close stops the store's background work (cancelled, and waited for),
// then closes the database. On SQLite it first checkpoints the
// write-ahead log into the main file and truncates it, so that no page
// image stays in lethe.db-wal even while another handle keeps the file
// open (SQLite deletes the log when its last connection closes). The
// caller stops its own users of the store first.
func (db *DB) Close() error {
	sqlDB, err := db.gorm.DB()
	if err != nil {
		return err
	}
	db.bg.mu.Lock()
	db.bg.closed = true
	db.bg.mu.Unlock()
	db.bg.cancel()
	db.bg.wg.Wait()
	if p, ok := db.gorm.ConnPool.(*stmtPool); ok {
		p.Close() // the prepared statements
	}
	if db.dialect == SQLite {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := db.checkpoint(ctx); err != nil {
			db.log.Warn("checkpoint at close failed", slog.Any("error", err))
		}
		cancel()
	}
	if db.generic != nil {
		db.generic.Close()
	}
	return sqlDB.Close()
}

// openGeneric opens the pool of generic plans (DB.generic) on the
// PostgreSQL database dsn names, of at most conns connections, opened as
// recalls need them.
//
// Why: a recall by a blind token is one statement for any number of
// tokens (pgBranches), prepared once per connection, but PostgreSQL's plan
// cache kept planning it for its parameters at every call (after five
// custom plans it compares their estimated cost with the generic plan's,
// and the generic plan's estimate of unnest of an array parameter is
// higher than that of the array it was given). The plan is the same either
// way (TestPlansAtEverySize checks the generic one too); planning it
// cost more than running it on a small memory. The setting is a startup
// parameter of these sessions only: the main pool's statements (a scope
// prefix's, a user's, the walk) still get plans made for their values.
func openGeneric(dsn string, conns int) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, translate(err, "open database")
	}
	cfg.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	g := stdlib.OpenDB(*cfg)
	g.SetMaxOpenConns(conns)
	g.SetMaxIdleConns(conns)
	g.SetConnMaxIdleTime(5 * time.Minute)
	return g, nil
}

// goBackground runs f in a goroutine that Close cancels (through f's
// context) and waits for. It reports false, without running f, once
// Close has begun.
func (db *DB) goBackground(f func(ctx context.Context)) bool {
	db.bg.mu.Lock()
	defer db.bg.mu.Unlock()
	if db.bg.closed {
		return false
	}
	db.bg.wg.Add(1)
	db.bg.running.Add(1)
	go func() {
		defer db.bg.wg.Done()
		defer db.bg.running.Add(-1)
		f(db.bg.ctx)
	}()
	return true
}

// Background returns how many background goroutines of the store run
// (tests: none after Close).
func (db *DB) Background() int64 { return db.bg.running.Load() }

// Dialect returns SQLite or Postgres.
func (db *DB) Dialect() string { return db.dialect }

// Gorm returns the underlying handle, for adapters that keep their own
// tables in the same database (the embedded audit log).
func (db *DB) Gorm() *gorm.DB { return db.gorm }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	sqlDB, err := db.gorm.DB()
	if err != nil {
		return translate(err, "ping database")
	}
	return translate(sqlDB.PingContext(ctx), "ping database")
}

// migrate creates or updates the schema. AutoMigrate only adds; the
// partial unique indexes are created explicitly because their WHERE
// clauses differ in meaning from plain uniqueness.
func (db *DB) migrate(ctx context.Context) error {
	if err := Migrate(ctx, db.gorm, &GrainRow{}, &TagRow{}, &KeyRow{}, &EventRow{}, &SequenceState{}, &CheckpointRow{}, &HoldRow{}, &EpochRow{}, &ScopeGenRow{}, &CleanupJob{}, &CountRow{}, &UserCountRow{}, &HookRow{}, &DeliveryRow{}, &RequestRow{}, &ErasedGrainRow{}, &BulkHashesRow{}); err != nil {
		return err
	}
	g := db.gorm.WithContext(ctx)
	if err := ensureSequenceState(g); err != nil {
		return translate(err, "migrate schema")
	}
	if err := migrateUserCounts(g); err != nil {
		return translate(err, "migrate schema")
	}
	if err := migrateSearch(g, db.dialect); err != nil {
		return translate(err, "migrate schema")
	}
	if err := db.migrateScrubPending(ctx); err != nil {
		return translate(err, "migrate schema")
	}
	if err := db.migrateWraps(ctx); err != nil {
		return translate(err, "migrate schema")
	}
	if err := db.migrateDestroyedNames(ctx); err != nil {
		return translate(err, "migrate schema")
	}
	if db.dialect == Postgres {
		if err := g.Raw(`SELECT pg_get_serial_sequence('grains', 'id')`).Scan(&db.grainSeq).Error; err != nil {
			return translate(err, "migrate schema")
		}
	}
	stmts := []string{
		`CREATE UNIQUE INDEX IF NOT EXISTS idx_grains_dedup ON grains (dedup_tok) WHERE superseded_by = ''`,
		`CREATE UNIQUE INDEX IF NOT EXISTS idx_data_keys_live ON data_keys (memory, kind, name) WHERE destroyed_us = 0`,
		// Indexes of earlier versions that only cost writes: rows are found
		// by user through user_key_id (see userKeys), and by token through
		// one index per token column (see GrainRow).
		`DROP INDEX IF EXISTS idx_grains_user`,
		`DROP INDEX IF EXISTS idx_grains_sro`,
		`DROP INDEX IF EXISTS idx_grains_ros`,
		`DROP INDEX IF EXISTS idx_grains_osr`,
		// A memory's rows newest first: recall with no token filter walks
		// it and stops at the page's limit. (memory, id) only ever grows
		// at its right end, so it costs an insert little.
		`CREATE INDEX IF NOT EXISTS idx_grains_mem ON grains (memory, id)`,
		// Replaced by idx_grain_tags_tg, (token, grain_id).
		`DROP INDEX IF EXISTS idx_grain_tags_tok`,
	}
	if db.dialect == Postgres {
		// A grain hash is the SHA-256 of a blob with a random nonce, so it
		// is unique without a constraint, and only ever looked up by
		// equality: a hash index holds a 4-byte code per row where a btree
		// holds the 64-character text, and costs an insert a third as much.
		stmts = append(stmts, `DROP INDEX IF EXISTS idx_grains_hash`,
			`CREATE INDEX IF NOT EXISTS idx_grains_hash_h ON grains USING hash (hash)`)
		// The recall indexes end with the id (see GrainRow). Scope prefixes
		// are matched with LIKE (see underPrefix), which a btree can serve
		// only under the C collation or with pattern ops. The scope index
		// does not start with the memory, so that a query by memory alone
		// has only idx_grains_mem to take, statistics or not; it holds the
		// memory after the scope, so that one scope of one memory is read
		// newest first.
		for _, ix := range [][2]string{{"idx_grains_s", "s_tok"}, {"idx_grains_r", "r_tok"}, {"idx_grains_o", "o_tok"},
			{"idx_grains_userkey", "user_key_id"}, {"idx_grains_scope", "scope text_pattern_ops, memory"}, {"idx_grains_scope_p", ""}} {
			if ix[1] != "" {
				stmts = append(stmts, `CREATE INDEX IF NOT EXISTS `+ix[0]+`_id ON grains (`+ix[1]+`, id)`)
			}
			stmts = append(stmts, `DROP INDEX IF EXISTS `+ix[0])
		}
	} else {
		stmts = append(stmts, `CREATE UNIQUE INDEX IF NOT EXISTS idx_grains_hash ON grains (hash)`,
			`CREATE INDEX IF NOT EXISTS idx_grains_scope ON grains (memory, scope)`,
			`CREATE INDEX IF NOT EXISTS idx_grains_s ON grains (s_tok)`,
			`CREATE INDEX IF NOT EXISTS idx_grains_r ON grains (r_tok)`,
			`CREATE INDEX IF NOT EXISTS idx_grains_o ON grains (o_tok)`,
			`CREATE INDEX IF NOT EXISTS idx_grains_userkey ON grains (user_key_id)`)
	}
	if db.dialect == Postgres {
		// No query filters on these columns: their statistics only cost
		// each ANALYZE time (a third of it, the sealed blob most).
		var n int64
		if err := g.Raw(`SELECT count(*) FROM pg_attribute WHERE attrelid = 'grains'::regclass
			AND attname IN ('blob', 'key_chain', 'user_ref', 'dedup_tok') AND COALESCE(attstattarget, -1) <> 0`).Scan(&n).Error; err != nil {
			return translate(err, "migrate schema")
		}
		if n > 0 {
			stmts = append(stmts, `ALTER TABLE grains ALTER COLUMN blob SET STATISTICS 0, ALTER COLUMN key_chain SET STATISTICS 0,
				ALTER COLUMN user_ref SET STATISTICS 0, ALTER COLUMN dedup_tok SET STATISTICS 0`)
		}
		// Every recall updates its grains' retrieval statistics. With the
		// pages full (COPY fills them), the new version of a row lands on
		// another page and is inserted into each of the nine indexes; with
		// room left on its page it is a HOT update, which touches no index
		// (and the page's old versions are pruned once no snapshot sees
		// them). Inserts fill a page to grainsFillFactor percent; pages of
		// an older store keep what they hold.
		var opts string
		if err := g.Raw(`SELECT COALESCE(array_to_string(reloptions, ','), '') FROM pg_class WHERE oid = 'grains'::regclass`).Scan(&opts).Error; err != nil {
			return translate(err, "migrate schema")
		}
		if !strings.Contains(opts, "fillfactor=") {
			stmts = append(stmts, fmt.Sprintf(`ALTER TABLE grains SET (fillfactor = %d)`, grainsFillFactor))
		}
	}
	for _, stmt := range stmts {
		if err := g.Exec(stmt).Error; err != nil {
			return translate(err, "migrate schema")
		}
	}
	return nil
}

// grainsFillFactor is the fill factor of the grains table on PostgreSQL:
// the share of a new page that inserts fill, the rest kept for the updated
// versions of its rows (see migrate).
const grainsFillFactor = 80

// errDuplicate is a unique-constraint violation.
var errDuplicate = errors.New("duplicate key")

// translate turns a gorm or driver error into a domain error. what says
// what failed, with no personal data.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var ge *grains.Error
	switch {
	case errors.As(err, &ge):
		return err
	case errors.Is(err, gorm.ErrRecordNotFound), errors.Is(err, sql.ErrNoRows):
		return grains.Errorf(grains.CodeNotFound, "not found")
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return fmt.Errorf("%s: %w", what, errDuplicate)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return grains.Wrap(grains.CodeUnavailable, what+": deadline exceeded or canceled", err)
	case isConnError(err):
		return grains.Wrap(grains.CodeUnavailable, what+": database unavailable", err)
	}
	// Transient lock conflicts on PostgreSQL, answered as such rather than
	// as a bug: the transaction was rolled back whole, and the same call
	// may succeed at once. (The deletes try again first: retryMoved.)
	switch pgCode(err) {
	case "40P01", "40001": // deadlock_detected, serialization_failure
		return &grains.Error{Code: grains.CodeConflict, Message: what + ": a concurrent transaction conflicted with this one",
			Hint: "nothing was changed: try again", Err: err}
	case "55P03": // lock_not_available (a lock_timeout)
		return &grains.Error{Code: grains.CodeUnavailable, Message: what + ": a lock was not available in time",
			Hint: "nothing was changed: try again", Err: err}
	}
	return grains.Wrap(grains.CodeInternal, what, err)
}

// pgCode returns the SQLSTATE of the PostgreSQL error in err's chain, or
// "" if there is none.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// Translate is translate for packages that keep a table of their own with
// gorm in the same database (the API token store), so that their errors
// carry the same codes.
func Translate(err error, what string) error { return translate(err, what) }

func isConnError(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"connection refused", "broken pipe", "connection reset", "database is locked", "the database system is", "bad connection", "database is closed", "no such host"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// underPrefix returns a condition matching column values equal to the scope
// path prefix or below it (prefix + "/..."). SQLite compares bytes, so a
// range works and uses the index: [prefix, prefix+"0") holds the prefix,
// its descendants ("/" is 0x2f, "0" the next byte), and siblings such as
// "prefix-x" ('-' and '.' sort before '/'), which the inner condition drops.
// PostgreSQL's comparisons follow the database collation, so it uses LIKE,
// which matches bytes, and the scope index has text_pattern_ops for it.
func (db *DB) underPrefix(column, prefix string) (string, []any) {
	if db.dialect == SQLite {
		return "(" + column + " >= ? AND " + column + " < ? AND (" + column + " = ? OR " + column + " >= ?))",
			[]any{prefix, prefix + "0", prefix, prefix + "/"}
	}
	esc := strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(prefix)
	return "(" + column + " = ? OR " + column + ` LIKE ? ESCAPE '\')`, []any{prefix, esc + "/%"}
}

// The statistics refresh schedule: the first after analyzeFirst inserted
// rows, each next after twice as many more (100, then 200 more, 400
// more...: O(log n) refreshes for n rows), but never more than analyzeMax
// rows apart. An ANALYZE reads a bounded sample (PostgreSQL: 30,000 rows;
// SQLite: analysisLimit rows per index), so the early ones cost
// milliseconds; they give a new store's planner statistics from its first
// hundred rows on.
const (
	analyzeFirst  = 100
	analyzeMax    = 1000000
	analysisLimit = 1000
)

// analyzeIfStale takes the planner's statistics at open when the grains
// table has none, or when it changed much since they were taken (rows
// written by an earlier process, a bulk load, a large forget): the
// schedule of noteInserted only counts this process's inserts.
// PostgreSQL's autovacuum would catch up, but a minute or more later.
func (db *DB) analyzeIfStale(ctx context.Context) error {
	g := db.gorm.WithContext(ctx)
	stale := false
	if db.dialect == Postgres {
		var st struct {
			Tuples float64
			Mods   int64
			Never  bool
			Any    bool
		}
		err := g.Raw(`SELECT c.reltuples AS tuples, COALESCE(s.n_mod_since_analyze, 0) AS mods,
			s.last_analyze IS NULL AND s.last_autoanalyze IS NULL AS never, EXISTS (SELECT 1 FROM grains) AS any
			FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.oid = 'grains'::regclass`).Scan(&st).Error
		if err != nil {
			return translate(err, "read statistics")
		}
		stale = st.Any && (st.Never || st.Tuples < 0 || (st.Mods >= analyzeFirst && float64(st.Mods) >= st.Tuples/5))
	} else {
		var st struct {
			Stat  sql.NullString
			MaxID sql.NullInt64
		}
		var n int64
		if err := g.Raw(`SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'`).Scan(&n).Error; err != nil {
			return translate(err, "read statistics")
		}
		q := `SELECT NULL AS stat, (SELECT max(id) FROM grains) AS max_id`
		if n > 0 {
			q = `SELECT (SELECT stat FROM sqlite_stat1 WHERE tbl = 'grains' LIMIT 1) AS stat, (SELECT max(id) FROM grains) AS max_id`
		}
		if err := g.Raw(q).Scan(&st).Error; err != nil {
			return translate(err, "read statistics")
		}
		// The first number of a stat1 row is the table's row count when
		// the statistics were taken; ids only grow, so max(id) bounds the
		// rows written since from above.
		var rows int64
		if st.Stat.Valid {
			fmt.Sscan(st.Stat.String, &rows)
		}
		stale = st.MaxID.Valid && st.MaxID.Int64 >= analyzeFirst && (!st.Stat.Valid || st.MaxID.Int64 > 2*rows)
	}
	if !stale {
		return nil
	}
	return db.analyze(ctx)
}

// noteInserted counts inserted rows and refreshes the planner's statistics
// in the background once enough rows arrived: after a bulk load, missing or
// stale statistics make both PostgreSQL and SQLite scan the whole table
// instead of using the token indexes (PostgreSQL's autovacuum catches up,
// but only later; SQLite never does on its own). An ANALYZE costs a sample
// (PostgreSQL) or a pass over the indexes (SQLite), so the interval grows
// with the rows this process has written, rather than staying fixed.
func (db *DB) noteInserted(n int) {
	at := db.analyzeAt.Load()
	if db.inserted.Add(int64(n)) < at || !db.analyzing.CompareAndSwap(false, true) {
		return
	}
	db.analyzeAt.Store(min(2*at, analyzeMax))
	db.inserted.Store(0)
	started := db.goBackground(func(bg context.Context) {
		defer db.analyzing.Store(false)
		ctx, cancel := context.WithTimeout(bg, 5*time.Minute)
		defer cancel()
		if err := db.analyze(ctx); err != nil && bg.Err() == nil { // not when Close cancelled it
			db.log.Warn("analyze failed", slog.Any("error", err))
		}
	})
	if !started {
		db.analyzing.Store(false)
	}
}

// conn takes one connection of the pool, for statements that must share a
// session (pragmas, a raw pgx transaction). The caller closes it.
func (db *DB) conn(ctx context.Context) (*sql.Conn, error) {
	sqlDB, err := db.gorm.DB()
	if err != nil {
		return nil, err
	}
	return sqlDB.Conn(ctx)
}

// analyze refreshes the planner's statistics of the grain tables.
func (db *DB) analyze(ctx context.Context) error {
	if db.dialect == Postgres {
		return db.gorm.WithContext(ctx).Exec("ANALYZE grains, grain_tags, data_keys").Error
	}
	// The analysis limit is a connection's: one connection for both.
	conn, err := db.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA analysis_limit = %d", analysisLimit)); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "ANALYZE"); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "PRAGMA analysis_limit = 0")
	return err
}
