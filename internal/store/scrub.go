package store

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/grains"
)

// Scrubbing removes the copies of destroyed data that the database itself
// keeps after a commit: a destroyed wrapped key, a forgotten sealed row.
//
// SQLite: every connection runs with secure_delete on, so freed cells and
// pages are overwritten with zeros in the pages the transaction writes; what
// is left is the older page images in the write-ahead log. A scrub is a
// TRUNCATE checkpoint: every frame copied into the main file, the log cut to
// zero bytes. It waits (busy timeout) for readers of older snapshots.
//
// PostgreSQL: an UPDATE or DELETE leaves the old tuple in its heap page
// until VACUUM prunes it, and pruning compacts a page without zeroing the
// space it frees, so the bytes of a pruned tuple can stay in the page's
// free space. An erase deletes the destroyed keys' wrapped forms from
// their partitions of data_key_wraps (see wraps.go), and the scrub after
// it rewrites those partitions (new files, the old ones unlinked): by
// VACUUM FULL, or beside a transaction older than the erase, whose
// snapshot VACUUM FULL would keep the dead tuple for, as copies of their
// live rows (see vacuumPending and rewriteWrapPart). A partition holds at most
// wrapBucket keys, so the rewrite costs the same at a thousand keys as at
// a million. An erase that destroys user keys
// (of a user or a memory) also renames them (see destroyedName); the old
// tuples of data_keys, which hold the user refs they were named by, get a
// forget's plain VACUUM (see scrubNames). A scrub that fails (a lock on
// the partition held past lock_timeout) leaves the partition in
// scrub_pending, and the next erase, RetryScrub or Open rewrites it. After
// a forget the scrub is a plain VACUUM
// of the grain tables in the background: the forgotten tuples leave the
// heap's items, but their bytes may stay in free page space until
// overwritten (forget is deletion; crypto-erasure is the final path). WAL
// segments, archives, replicas and backups are out of lethe's reach: see
// docs/compliance/erasure.md.

// scrubState coalesces scrubs: a scrub started after a caller's commit
// covers it, so concurrent erases share one.
type scrubState struct {
	mu   sync.Mutex
	seq  atomic.Int64 // requests made
	done int64        // requests covered by a finished scrub (under mu)

	// grains coalesces the background grain-table vacuums (PostgreSQL);
	// grainsLast is when the last one began (only its goroutine touches
	// it).
	grainsRunning atomic.Bool
	grainsAgain   atomic.Bool
	grainsLast    time.Time

	// names is set when an erase destroyed (and renamed) user keys whose
	// old names wait for scrubNames (PostgreSQL); ScrubErased clears it.
	names atomic.Bool

	// wait counts scrub time, for benchmarks.
	nanos atomic.Int64
	runs  atomic.Int64
}

// ScrubStats reports the scrubs run and their total time.
func (db *DB) ScrubStats() (runs int64, total time.Duration) {
	return db.scrub.runs.Load(), time.Duration(db.scrub.nanos.Load())
}

// SetScrub turns post-commit scrubbing on or off (on by default); off is
// for measuring what it costs.
func (db *DB) SetScrub(on bool) { db.scrubOff.Store(!on) }

// markDirtySQL records tables (one comma-separated argument: no table
// name has a comma, and gorm would spell a slice out as a list) as holding
// destroyed keys' dead tuples, for the scrub, in the transaction that made
// them, with its id (the scrub waits for the snapshots older than it).
// Each erase adds rows of its own, so erases never wait for each other
// here, and a scrub deletes the rows it read, leaving those added since.
const markDirtySQL = `INSERT INTO scrub_pending (tbl, xid) SELECT t, txid_current() FROM unnest(string_to_array(?::text, ',')) t`

// markDirtyPG is markDirtySQL for a pgx batch.
var markDirtyPG = strings.Replace(markDirtySQL, "?", "$1", 1)

// markNamesSQL adds a row to scrub_names, in the transaction of an erase
// that renamed user keys (see destroyedName; PostgreSQL). The keys' old
// tuples in data_keys hold the user refs until a plain VACUUM prunes
// them: the background one after the erase (vacuumGrains), which deletes
// the rows it covered once no older snapshot could keep the tuples. A
// process killed before that leaves the rows, and Open runs that VACUUM
// again (TestNoResidueAfterCrashAtErase); before, a crash left the old
// names until autovacuum's next run.
const markNamesSQL = `INSERT INTO scrub_names DEFAULT VALUES`

// markNames runs markNamesSQL in tx (PostgreSQL).
func markNames(tx *gorm.DB) error {
	if tx.Dialector.Name() != "postgres" {
		return nil
	}
	return translate(tx.Exec(markNamesSQL).Error, "record the scrub")
}

// markDirty records tables in scrub_pending in tx (PostgreSQL), so that
// the rewrite they need outlives a crash between the erase's commit and
// its scrub: the scrub deletes a table's rows only once it rewrote the
// table with no older snapshot open, and Open scrubs what is left
// (TestNoResidueAfterCrashAtErase).
func markDirty(tx *gorm.DB, tables []string) error {
	if len(tables) == 0 || tx.Dialector.Name() != "postgres" {
		return nil
	}
	return translate(tx.Exec(markDirtySQL, strings.Join(tables, ",")).Error, "record the scrub")
}

// migrateScrubPending creates scrub_pending (PostgreSQL). A store that
// had none (made by a version that listed the tables to rewrite in memory
// only, so that a crash could lose them) gets every partition of
// data_key_wraps marked once, so that the first scrub rewrites them all.
func (db *DB) migrateScrubPending(ctx context.Context) error {
	if db.dialect != Postgres {
		return nil
	}
	g := db.gorm.WithContext(ctx)
	if err := g.Exec(`CREATE TABLE IF NOT EXISTS scrub_names (id bigserial PRIMARY KEY, xid bigint NOT NULL DEFAULT txid_current())`).Error; err != nil {
		return err
	}
	var existed bool
	if err := g.Raw(`SELECT to_regclass('scrub_pending') IS NOT NULL`).Scan(&existed).Error; err != nil {
		return err
	}
	if existed {
		return nil
	}
	return g.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`CREATE TABLE IF NOT EXISTS scrub_pending (id bigserial PRIMARY KEY, tbl varchar(128) NOT NULL, xid bigint NOT NULL)`).Error; err != nil {
			return err
		}
		var parts []string
		if err := tx.Raw(`SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = to_regclass('data_key_wraps') ORDER BY 1`).Scan(&parts).Error; err != nil {
			return err
		}
		return markDirty(tx, parts)
	})
}

// scrubKeys removes the residue of destroyed keys after an erase committed
// (and marked its tables in scrub_pending). An error means the residue
// may persist; the erase itself stands.
func (db *DB) scrubKeys(ctx context.Context) error {
	if db.scrubOff.Load() {
		return nil
	}
	want := db.scrub.seq.Add(1)
	db.scrub.mu.Lock()
	defer db.scrub.mu.Unlock()
	if db.scrub.done >= want {
		return nil // a scrub that started after our commit finished meanwhile
	}
	// Read before the tables the scrub reads: every table an erase
	// marked before a request up to upTo counted itself is among them.
	var upTo int64
	mark := func() { upTo = db.scrub.seq.Load() }
	start := time.Now()
	var err error
	if db.dialect == SQLite {
		mark()
		err = db.checkpoint(ctx)
	} else {
		err = db.vacuumPending(ctx, mark)
	}
	db.scrub.nanos.Add(int64(time.Since(start)))
	db.scrub.runs.Add(1)
	if err != nil {
		return err
	}
	db.scrub.done = upTo
	return nil
}

// scrubForget removes the residue of deleted grain rows after a forget (or
// a round of the cleaner, see CleanupErased) committed: on SQLite at once (a checkpoint), on PostgreSQL in the
// background (DrainPostings, then a plain VACUUM of the grain tables), at
// once after a quiet period and at most once per grainScrubPace under
// load.
func (db *DB) scrubForget(ctx context.Context) {
	if db.scrubOff.Load() {
		return
	}
	if db.dialect == SQLite {
		if err := db.scrubKeys(ctx); err != nil {
			db.log.Warn("scrub after forget failed", slog.Any("error", err))
		}
		return
	}
	db.scrub.grainsAgain.Store(true)
	if !db.scrub.grainsRunning.CompareAndSwap(false, true) {
		return
	}
	started := db.goBackground(func(ctx context.Context) {
		defer db.scrub.grainsRunning.Store(false)
		for {
			// At most one scrub per grainScrubPace: under a stream of
			// forgets, each scrub (a VACUUM that reads every index of
			// the grain tables) covers all forgets of its pace instead
			// of running back to back and taking a core from them.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(db.scrub.grainsLast.Add(grainScrubPace))):
			}
			if !db.scrub.grainsAgain.Swap(false) {
				return
			}
			db.scrub.grainsLast = time.Now()
			vctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			_, err := db.DrainPostings(vctx)
			if err == nil {
				err = db.vacuumGrains(vctx)
			}
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					db.log.Warn("scrub after forget failed", slog.Any("error", err))
				}
				return
			}
		}
	})
	if !started {
		// Closing: the forget stands; autovacuum prunes its tuples.
		db.scrub.grainsAgain.Store(false)
		db.scrub.grainsRunning.Store(false)
	}
}

// Settle waits until no background work of the store runs: the scrub
// after forgets (on PostgreSQL, the postings drain and the VACUUM of the
// grain tables, which starts up to grainScrubPace after the last forget),
// the statistics refresh after inserts, a text-index merge prepared beside
// a write. It returns ctx's error if ctx ends first.
func (db *DB) Settle(ctx context.Context) error {
	for db.scrub.grainsRunning.Load() || db.scrub.grainsAgain.Load() || db.bg.running.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// checkpoint copies the whole SQLite write-ahead log into the main file and
// truncates the log to zero bytes.
func (db *DB) checkpoint(ctx context.Context) error {
	var busy, logFrames, done int
	// Rows, not Row: gorm's prepared-statement pool answers Row with an
	// empty sql.Row when the statement cannot be prepared (a cancelled
	// context, a closed store), whose Scan panics.
	rows, err := db.gorm.WithContext(ctx).Raw("PRAGMA wal_checkpoint(TRUNCATE)").Rows()
	if err != nil {
		return translate(err, "checkpoint")
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return translate(err, "checkpoint")
		}
		return grains.Errorf(grains.CodeInternal, "checkpoint: no answer")
	}
	if err := rows.Scan(&busy, &logFrames, &done); err != nil {
		return translate(err, "checkpoint")
	}
	if busy != 0 {
		return grains.Errorf(grains.CodeUnavailable, "checkpoint: a reader held the write-ahead log (%d of %d frames copied)", done, logFrames)
	}
	return nil
}

// vacuumPending rewrites the PostgreSQL tables scrub_pending names
// (marked by erases, see markDirty), and deletes the rows it read. Rows an
// erase added since they were read stay for the next scrub. It calls mark
// before it reads them.
//
// The rewrite is VACUUM FULL, which copies the dead tuples a snapshot
// older than the erase may still see: the scrub first waits, at most
// olderWait, for the transactions older than the newest erase to end (the
// erases under way among them, whose rows it then reads too). If some
// still run, a partition of data_key_wraps is replaced instead by a copy
// of its live rows (rewriteWrapPart), which no snapshot can keep a
// destroyed key in; another table (data_keys, once, after its wrapped
// keys moved out; a partition with a TOAST table, once, see plainWraps)
// waits for them up to scrubWait, gets VACUUM FULL anyway, and keeps its
// rows for the next scrub, which is reported.
func (db *DB) vacuumPending(ctx context.Context, mark func()) error {
	conn, err := db.conn(ctx)
	if err != nil {
		return translate(err, "scrub keys")
	}
	defer conn.Close()
	mark()
	var last int64
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(max(xid), 0) FROM scrub_pending`).Scan(&last); err != nil {
		return translate(err, "scrub keys")
	}
	if last == 0 {
		return nil
	}
	if _, err := waitOlder(ctx, conn, last, olderWait); err != nil {
		return translate(err, "scrub keys")
	}
	mark() // the erases that committed meanwhile are covered too
	rows, err := conn.QueryContext(ctx, `SELECT id, tbl, xid FROM scrub_pending`)
	if err != nil {
		return translate(err, "scrub keys")
	}
	ids := map[string][]int64{} // the rows read, by table
	var xid int64               // the newest erase among them
	for rows.Next() {
		var id, x int64
		var tbl string
		if err := rows.Scan(&id, &tbl, &x); err != nil {
			rows.Close()
			return translate(err, "scrub keys")
		}
		ids[tbl], xid = append(ids[tbl], id), max(xid, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return translate(err, "scrub keys")
	}
	if len(ids) == 0 {
		return nil
	}
	older, err := waitOlder(ctx, conn, xid, 0)
	if err != nil {
		return translate(err, "scrub keys")
	}
	copied := map[string]bool{}
	if older > 0 {
		if copied, err = copiedParts(ctx, conn, slices.Collect(maps.Keys(ids))); err != nil {
			return translate(err, "scrub keys")
		}
		if len(copied) < len(ids) {
			if older, err = waitOlder(ctx, conn, xid, scrubWait); err != nil {
				return translate(err, "scrub keys")
			}
		}
	}
	if _, err := conn.ExecContext(ctx, `SET lock_timeout = '5s'`); err != nil {
		return translate(err, "scrub keys")
	}
	kept := false // rows left for the next scrub
	for _, tbl := range slices.Sorted(maps.Keys(ids)) {
		if copied[tbl] {
			if err = db.rewriteWrapPart(ctx, tbl, ids[tbl]); err != nil {
				break
			}
			continue
		}
		// A partition named for a key that an earlier version stored in
		// data_keys may not exist.
		var exists bool
		if err = conn.QueryRowContext(ctx, `SELECT to_regclass($1) IS NOT NULL`, tbl).Scan(&exists); err != nil {
			break
		}
		if exists {
			if _, err = conn.ExecContext(ctx, `VACUUM FULL `+pgIdent(tbl)); err != nil {
				break
			}
		}
		// A snapshot older than the erase kept its dead tuple, which the
		// rewrite copied: the rows stay for the next scrub.
		if older > 0 {
			kept = true
			continue
		}
		if _, err = conn.ExecContext(ctx, `DELETE FROM scrub_pending WHERE id = ANY($1)`, ids[tbl]); err != nil {
			break
		}
	}
	if _, rerr := conn.ExecContext(context.Background(), `RESET lock_timeout`); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return translate(err, "scrub keys")
	}
	if kept {
		return grains.Errorf(grains.CodeUnavailable, "scrub keys: %d transactions older than the erase still see its destroyed key", older)
	}
	return nil
}

// copiedParts returns which of tables are partitions of data_key_wraps
// with no TOAST table, which rewriteWrapPart rewrites; a partition of an
// earlier version's store, made with one, gets VACUUM FULL, whose new
// heap has none (see plainWraps).
func copiedParts(ctx context.Context, conn *sql.Conn, tables []string) (map[string]bool, error) {
	rows, err := conn.QueryContext(ctx, `SELECT t FROM unnest($1::text[]) t JOIN pg_inherits i ON i.inhrelid = to_regclass(t)
		JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'data_key_wraps'::regclass AND c.reltoastrelid = 0`, tables)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out[t] = true
	}
	return out, rows.Err()
}

// rewriteWrapPart replaces partition tbl of data_key_wraps by a copy of
// its live rows, and deletes the rows ids of scrub_pending, in one
// transaction: under an exclusive lock on the partition (which
// every writer of it holds a lock on until it commits, so none is
// missed), its live rows are copied out, the partition truncated (new,
// empty files; the old ones are truncated to zero bytes at the commit and
// unlinked), and the rows copied back in. A dead tuple of a destroyed key
// is not a live row, whatever snapshot is open elsewhere: no copy of it
// reaches the new files, so the rewrite waits for no older transaction, as
// VACUUM FULL must. Copied back with FREEZE, the rows are visible to every
// snapshot, those older than this transaction included (a truncated table
// otherwise looks empty to them): a key read that began before the
// rewrite still finds every live key. A crash or error rolls it all back:
// the old files stay, and so do the rows of scrub_pending. Row by row (its
// index built by inserts), it costs a little more than VACUUM FULL for a
// full partition (4,096 keys, by hand: 22 ms against 19-21), so the scrub
// uses it only beside older transactions.
func (db *DB) rewriteWrapPart(ctx context.Context, tbl string, ids []int64) error {
	return db.pgTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, tbl).Scan(&exists); err != nil {
			return err
		}
		if exists {
			name := pgIdent(tbl)
			if _, err := tx.Exec(ctx, `LOCK TABLE `+name+` IN ACCESS EXCLUSIVE MODE`); err != nil {
				return err
			}
			// The live rows: key ids and wrapped forms, as a key read
			// returns them (the destroyed keys' rows are deleted).
			var live bytes.Buffer
			pc := tx.Conn().PgConn()
			if _, err := pc.CopyTo(ctx, &live, `COPY `+name+` TO STDOUT (FORMAT binary)`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `TRUNCATE `+name); err != nil {
				return err
			}
			if _, err := pc.CopyFrom(ctx, bytes.NewReader(live.Bytes()), `COPY `+name+` FROM STDIN (FORMAT binary, FREEZE)`); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM scrub_pending WHERE id = ANY($1)`, ids)
		return err
	})
}

// pgIdent quotes a table name for PostgreSQL.
func pgIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// olderWait bounds how long a scrub waits for the transactions older than
// the erase before it copies the partition instead of VACUUM FULL (four
// erasures at a time under lethe-load waited 13 ms for them at the median,
// 28 at p90; a long transaction anywhere on the server would otherwise
// hold every erase for scrubWait).
const olderWait = 25 * time.Millisecond

// scrubWait bounds how long the VACUUM FULL of a table the scrub cannot
// copy (see vacuumPending) waits for transactions older than the erase.
const scrubWait = 2 * time.Second

// waitOlder waits, at most wait, until no transaction that may still see a
// row deleted by transaction xid runs, and returns how many still do.
// lethe's own transactions (a sequencer run, a recall) end within
// milliseconds.
//
// VACUUM keeps a dead tuple that a snapshot of this database older than
// the deleting transaction may see (backend_xmin). A snapshot taken after
// it may be such a one too: its xmin is the oldest xid running anywhere in
// the cluster, so a writer older than xid in any database (backend_xid)
// must end first as well. With other databases busy on the same server,
// checking this database's snapshots alone left a residue in 4 of 5 runs
// of TestNoResidueAfterErasure/postgres; with the writers too, 0 of 5.
//
// A plain (lazy) VACUUM is left out: PostgreSQL leaves its snapshot out
// of every other VACUUM's horizon (PROC_IN_VACUUM), so VACUUM FULL drops
// a dead tuple that only such a VACUUM is older than. Such a backend is
// one pg_stat_progress_vacuum lists (VACUUM FULL is listed in
// pg_stat_progress_cluster instead, an ANALYZE in
// pg_stat_progress_analyze): the background VACUUM of the grain tables
// after a forget or a cleaner's round, or autovacuum's. Waiting for them
// held an erase's scrub back by up to 38 ms under lethe-load
// (TestScrubIgnoresLazyVacuum).
func waitOlder(ctx context.Context, conn *sql.Conn, xid int64, wait time.Duration) (int64, error) {
	var older int64
	deadline := time.Now().Add(wait)
	for {
		if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND pid NOT IN (SELECT pid FROM pg_stat_progress_vacuum) AND (
				(datname = current_database() AND age(backend_xmin) >= age($1::text::xid))
				OR age(backend_xid) >= age($1::text::xid))`, fmt.Sprint(xid%(1<<32))).Scan(&older); err != nil {
			return 0, err
		}
		if older == 0 || time.Now().After(deadline) {
			return older, nil
		}
		select {
		case <-ctx.Done():
			return older, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// vacuumGrains runs a plain VACUUM of the grain tables' heaps once no
// transaction older than now may still see the rows deleted before it
// (bounded by grainScrubWait: past it, the VACUUM runs anyway and the next
// forget's VACUUM takes what this one had to keep).
func (db *DB) vacuumGrains(ctx context.Context) error {
	conn, err := db.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The erases' marks of renamed user keys (see markNamesSQL), read
	// first: their transactions committed before the snapshot below.
	var names int64
	if err := conn.QueryRowContext(ctx, `SELECT COALESCE(max(id), 0) FROM scrub_names`).Scan(&names); err != nil {
		return err
	}
	// Every transaction with an xid below the snapshot's xmax began before
	// now, the forget's among them.
	var next int64
	if err := conn.QueryRowContext(ctx, `SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&next); err != nil {
		return err
	}
	older, err := waitOlder(ctx, conn, next, grainScrubWait)
	if err != nil {
		return err
	}
	// grain_postings: the drain rewrote the blocks holding the grain, and
	// the old versions of those rows still name it, as do the drained
	// rows of posting_garbage.
	// Without parallel workers: a background scrub should not start
	// processes that compete with the writes for the cores. Without index
	// cleanup: what the scrub is for is the heap, where the sealed rows
	// are; pruning takes the dead tuples out of the heap's items either
	// way. Index cleanup reads every index of the grain tables whenever
	// other dead tuples (the retrieval statistics' updates) pass
	// PostgreSQL's threshold, 370-830 ms a run at 100,000 grains against
	// about 100 ms without: under a stream of forgets, once a second, it
	// took most of a core from them. The index entries (row ids, hashes,
	// blind tokens: never content) go with autovacuum's next run.
	if _, err = conn.ExecContext(ctx, `VACUUM (PARALLEL 0, INDEX_CLEANUP OFF) grains, grain_tags, grain_postings, grain_docs, posting_garbage, data_keys`); err != nil {
		return err
	}
	// With a snapshot older than the marks still open, the VACUUM may
	// have kept the old names: the marks stay for the next one.
	if names == 0 || older > 0 {
		return nil
	}
	_, err = conn.ExecContext(ctx, `DELETE FROM scrub_names WHERE id <= $1`, names)
	return err
}

// grainScrubPace is the least time between the starts of two background
// scrubs after forgets.
const grainScrubPace = time.Second

// grainScrubWait bounds how long the background VACUUM after a forget
// waits for older transactions to end.
const grainScrubWait = 10 * time.Second

// RetryScrub rewrites again the tables the last scrubs may have left the
// residue of a destroyed key in (PostgreSQL, under a long transaction, or
// after a crash: the tables are in scrub_pending).
func (db *DB) RetryScrub(ctx context.Context) error {
	if db.dialect != Postgres {
		return nil
	}
	var n int64
	var names bool
	if err := db.gorm.WithContext(ctx).Raw(`SELECT (SELECT count(*) FROM scrub_pending), EXISTS (SELECT 1 FROM scrub_names)`).
		Row().Scan(&n, &names); err != nil {
		return translate(err, "scrub keys")
	}
	if names {
		db.scrubForget(ctx) // in the background: see markNamesSQL
	}
	if n == 0 {
		return nil
	}
	return db.scrubKeys(ctx)
}
