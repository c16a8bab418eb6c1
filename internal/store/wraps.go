package store

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
)

// Wrapped keys on PostgreSQL live apart from data_keys, in data_key_wraps,
// a table partitioned by ranges of wrapBucket key ids: partition n,
// data_key_wraps_<n>, holds the wrapped forms of keys n*wrapBucket to
// (n+1)*wrapBucket-1. An erase deletes the destroyed keys' rows there, and
// its scrub rewrites (see vacuumPending) only the partitions that held them: at
// most wrapBucket rows each, whatever the number of keys (the old name
// of an erased user's key gets a plain VACUUM of data_keys: see
// scrubNames). data_keys keeps the names, fingerprints and dates, and its wrapped column stays NULL
// (rows written before the split are moved out when the store opens; see
// migrateWraps).
//
// A partition is created, standalone, before the first key of its range is
// inserted, and attached to the parent (ALTER TABLE ... ATTACH PARTITION
// takes a SHARE UPDATE EXCLUSIVE lock on the parent, which no read or
// write waits for; CREATE TABLE ... PARTITION OF would take an ACCESS
// EXCLUSIVE one). Key ids are taken from data_keys' sequence before the
// insert, so that the partitions of a batch's keys exist before its
// transaction starts.
//
// SQLite keeps the wrapped form in data_keys: its scrub (secure_delete and
// a checkpoint) costs what the erase wrote, not the table's size.

// wrapBucket is how many key ids one partition of data_key_wraps covers.
const wrapBucket = 4096

// wrapPartLock is the advisory lock key that serializes the creation of
// data_key_wraps partitions across instances ("lethe-wp").
const wrapPartLock = 0x6c657468652d7770

// wrapState remembers the partitions known to exist.
type wrapState struct {
	mu    sync.Mutex
	parts map[int64]bool
	seq   string // data_keys' id sequence
}

// wrapPart names the partition of data_key_wraps that holds key id's
// wrapped form.
func wrapPart(id int64) string { return fmt.Sprintf("data_key_wraps_%d", id/wrapBucket) }

// wrapParts returns the partitions of ids, sorted, without repeats.
func wrapParts(ids []int64) []string {
	var out []string
	for _, id := range ids {
		if p := wrapPart(id); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// migrateWraps creates data_key_wraps (PostgreSQL) and moves into it the
// wrapped keys an earlier version kept in data_keys; the old copies are
// then scrubbed from data_keys by a rewrite of the table, once.
func (db *DB) migrateWraps(ctx context.Context) error {
	if db.dialect != Postgres {
		return nil
	}
	g := db.gorm.WithContext(ctx)
	if err := g.Exec(`CREATE TABLE IF NOT EXISTS data_key_wraps (key_id bigint NOT NULL, wrapped bytea NOT NULL,
		PRIMARY KEY (key_id)) PARTITION BY RANGE (key_id)`).Error; err != nil {
		return err
	}
	if err := db.plainWraps(ctx); err != nil {
		return err
	}
	if err := g.Raw(`SELECT pg_get_serial_sequence('data_keys', 'id')`).Scan(&db.wraps.seq).Error; err != nil {
		return err
	}
	var legacy []int64
	if err := g.Raw(`SELECT id FROM data_keys WHERE wrapped IS NOT NULL`).Scan(&legacy).Error; err != nil {
		return err
	}
	if len(legacy) == 0 {
		return nil
	}
	if err := db.ensureWrapParts(ctx, legacy); err != nil {
		return err
	}
	err := g.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`INSERT INTO data_key_wraps (key_id, wrapped)
			SELECT id, wrapped FROM data_keys WHERE wrapped IS NOT NULL AND destroyed_us = 0 ON CONFLICT DO NOTHING`).Error; err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE data_keys SET wrapped = NULL WHERE wrapped IS NOT NULL`).Error; err != nil {
			return err
		}
		// The old copies are dead tuples of data_keys now: rewrite it as
		// a scrub does, after the transactions that may still see them.
		return markDirty(tx, []string{"data_keys"})
	})
	if err != nil {
		return err
	}
	if err := db.scrubKeys(ctx); err != nil {
		db.log.Warn("scrub of data_keys after moving the wrapped keys out failed; the next erase retries", slog.Any("error", err))
	}
	return nil
}

// plainWraps stores the wrapped keys in line (STORAGE PLAIN): they are a
// few hundred bytes, and a partition with no TOAST table rewrites one
// relation and one index, not two of each: a scrub's VACUUM FULL of a
// partition of 970 keys took 16.4 ms at the median with one, 13.6 without;
// of an empty one, 9.9 and 6.6 ms (docs/performance.md). A store made
// before gets the column's storage changed once (which reaches every
// partition) and its partitions that have a TOAST table marked for the
// scrub, whose rewrite creates none (the new heap gets a TOAST table only
// if its columns need one), so the Open that changes it rewrites them.
// ensureWrapParts creates new partitions LIKE the parent, storage included.
func (db *DB) plainWraps(ctx context.Context) error {
	g := db.gorm.WithContext(ctx)
	var storage string
	if err := g.Raw(`SELECT attstorage::text FROM pg_attribute WHERE attrelid = 'data_key_wraps'::regclass AND attname = 'wrapped'`).
		Scan(&storage).Error; err != nil {
		return err
	}
	if storage == "p" {
		return nil
	}
	return g.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`ALTER TABLE data_key_wraps ALTER COLUMN wrapped SET STORAGE PLAIN`).Error; err != nil {
			return err
		}
		var parts []string
		if err := tx.Raw(`SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'data_key_wraps'::regclass AND c.reltoastrelid <> 0 ORDER BY 1`).Scan(&parts).Error; err != nil {
			return err
		}
		return markDirty(tx, parts)
	})
}

// ensureWrapParts creates the partitions of data_key_wraps that ids fall
// in, if they do not exist yet.
func (db *DB) ensureWrapParts(ctx context.Context, ids []int64) error {
	var need []int64
	db.wraps.mu.Lock()
	if db.wraps.parts == nil {
		db.wraps.parts = map[int64]bool{}
	}
	for _, id := range ids {
		if n := id / wrapBucket; !db.wraps.parts[n] && !slices.Contains(need, n) {
			need = append(need, n)
		}
	}
	db.wraps.mu.Unlock()
	for _, n := range need {
		err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec(`SELECT pg_advisory_xact_lock(?)`, wrapPartLock).Error; err != nil {
				return err
			}
			name := fmt.Sprintf("data_key_wraps_%d", n)
			var attached int64
			if err := tx.Raw(`SELECT count(*) FROM pg_inherits WHERE inhparent = 'data_key_wraps'::regclass
				AND inhrelid = to_regclass(?)`, name).Scan(&attached).Error; err != nil {
				return err
			}
			if attached > 0 {
				return nil
			}
			if err := tx.Exec(`CREATE TABLE IF NOT EXISTS ` + name + ` (LIKE data_key_wraps INCLUDING STORAGE, PRIMARY KEY (key_id))`).Error; err != nil {
				return err
			}
			return tx.Exec(fmt.Sprintf(`ALTER TABLE data_key_wraps ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`,
				name, n*wrapBucket, (n+1)*wrapBucket)).Error
		})
		if err != nil {
			return translate(err, "create key partition")
		}
		db.wraps.mu.Lock()
		db.wraps.parts[n] = true
		db.wraps.mu.Unlock()
	}
	return nil
}

// reserveKeyIDs takes n ids from data_keys' sequence (PostgreSQL) and
// makes sure their partitions of data_key_wraps exist.
func (db *DB) reserveKeyIDs(ctx context.Context, n int) ([]int64, error) {
	var ids []int64
	if err := db.gorm.WithContext(ctx).Raw(`SELECT nextval(?::regclass) FROM generate_series(1, ?)`, db.wraps.seq, n).
		Scan(&ids).Error; err != nil {
		return nil, translate(err, "reserve key ids")
	}
	if len(ids) != n {
		return nil, fmt.Errorf("reserve key ids: %d of %d", len(ids), n)
	}
	return ids, db.ensureWrapParts(ctx, ids)
}

// insertWraps stores the wrapped forms of keys ids (PostgreSQL).
func insertWraps(tx *gorm.DB, ids []int64, wrapped [][]byte) error {
	for start := 0; start < len(ids); start += chunk {
		end := min(start+chunk, len(ids))
		var sb strings.Builder
		args := make([]any, 0, 2*(end-start))
		sb.WriteString("INSERT INTO data_key_wraps (key_id, wrapped) VALUES ")
		for j := start; j < end; j++ {
			if j > start {
				sb.WriteByte(',')
			}
			sb.WriteString("(?, ?)")
			args = append(args, ids[j], wrapped[j])
		}
		if err := tx.Exec(sb.String(), args...).Error; err != nil {
			return err
		}
	}
	return nil
}

// keysQ starts a read of KeyRows; findKeys runs it and fills in the
// wrapped forms. Conditions name data_keys' columns.
func (db *DB) keysQ(tx *gorm.DB) *gorm.DB { return tx.Model(&KeyRow{}) }

// findKeys runs q, a keysQ read, and on PostgreSQL reads the live keys'
// wrapped forms from data_key_wraps by their ids (see withWraps).
func (db *DB) findKeys(q *gorm.DB) ([]KeyRow, error) {
	var rows []KeyRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, err
	}
	if db.dialect != Postgres {
		return rows, nil
	}
	return withWraps(rows, func(ids []int64) ([]wrapRow, error) {
		var ws []wrapRow
		err := q.Session(&gorm.Session{NewDB: true}).Raw(`SELECT key_id, wrapped FROM data_key_wraps WHERE key_id IN ?`, ids).Scan(&ws).Error
		return ws, err
	})
}

// readWrapsPG reads the wrapped forms of keys ids in tx.
func readWrapsPG(ctx context.Context, tx pgx.Tx, ids []int64) ([]wrapRow, error) {
	rows, err := tx.Query(ctx, `SELECT key_id, wrapped FROM data_key_wraps WHERE key_id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (wrapRow, error) {
		var w wrapRow
		return w, r.Scan(&w.KeyID, &w.Wrapped)
	})
}

// wrapRow is a row of data_key_wraps.
type wrapRow struct {
	KeyID   int64
	Wrapped []byte
}

// withWraps fills in the wrapped forms of rows' live keys that data_keys
// does not hold (an earlier version's rows do), read by read in chunks of
// ids. By ids, as a statement of its own: the ids are then parameters,
// which PostgreSQL prunes the partitions with as it plans, so the read
// opens and locks one partition. Joined to the rows' statement, the ids
// come from its own rows: the plan holds every partition of the table, and
// locks each with its index (2,006 locks at 1,000 partitions, four million
// keys; the server's lock table holds 64 per connection), and waits for a
// scrub's rewrite of any partition (TestKeyReadsLockTheirPartitionOnly).
// A live key whose wrapped form the second read no longer finds was
// destroyed by an erase that committed between the two reads: it is left
// out, as a read that began after the erase would leave it.
func withWraps(rows []KeyRow, read func(ids []int64) ([]wrapRow, error)) ([]KeyRow, error) {
	var ids []int64
	for _, r := range rows {
		if r.Wrapped == nil && r.DestroyedUS == 0 {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return rows, nil
	}
	found := make(map[int64][]byte, len(ids))
	for i := 0; i < len(ids); i += chunk {
		ws, err := read(ids[i:min(i+chunk, len(ids))])
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			found[w.KeyID] = w.Wrapped
		}
	}
	out := rows[:0]
	for _, r := range rows {
		if r.Wrapped == nil && r.DestroyedUS == 0 {
			if r.Wrapped = found[r.ID]; r.Wrapped == nil {
				continue
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// deleteWraps deletes the wrapped forms of keys ids in an erase's
// transaction and marks for the scrub (markDirty) the tables whose pages
// still hold them until it rewrites them: their partitions of
// data_key_wraps, and data_keys if a key kept its wrapped form there (an
// earlier version's row).
// SQLite has nothing to delete: the erase's UPDATE clears the column.
func (db *DB) deleteWraps(tx *gorm.DB, ids []int64) error {
	if db.dialect != Postgres || len(ids) == 0 {
		return nil
	}
	var tables []string
	for i := 0; i < len(ids); i += chunk {
		part := ids[i:min(i+chunk, len(ids))]
		if err := tx.Exec(`DELETE FROM data_key_wraps WHERE key_id IN ?`, part).Error; err != nil {
			return translate(err, "destroy data key")
		}
		var legacy int64
		if err := tx.Raw(`SELECT count(*) FROM data_keys WHERE id IN ? AND wrapped IS NOT NULL`, part).Scan(&legacy).Error; err != nil {
			return translate(err, "destroy data key")
		}
		if legacy > 0 && !slices.Contains(tables, "data_keys") {
			tables = append(tables, "data_keys")
		}
	}
	for _, p := range wrapParts(ids) {
		if !slices.Contains(tables, p) {
			tables = append(tables, p)
		}
	}
	return markDirty(tx, tables)
}
