package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
)

var _ keys.Store = (*DB)(nil)

func toRecord(r KeyRow) keys.Record {
	rec := keys.Record{ID: r.ID, Memory: r.Memory, Kind: keys.Kind(r.Kind), Name: r.Name, Wrapped: r.Wrapped,
		Fingerprint: r.Fingerprint, CreatedAt: time.UnixMicro(r.CreatedUS).UTC()}
	if r.DestroyedUS != 0 {
		t := time.UnixMicro(r.DestroyedUS).UTC()
		rec.DestroyedAt = &t
	}
	return rec
}

// destroyedName is the name a key takes, in the statement that destroys
// it, when its name is personal: a user key's name is the user's blind
// reference (hex), the same in every key of the user, so a destroyed key
// that kept it would show a reader of the database that an erased user
// came back (a new key of the same name), and let whoever holds the memory
// key test guessed user ids against it. It becomes "erased-<id>", unique
// per row and telling nothing; no lookup reads a destroyed key by name
// (the live-key index and every read by name require destroyed_us = 0).
// Scope and memory keys keep their names (scope paths are stored in clear
// with the rows), as do request keys (named by request id).
const destroyedName = `CASE WHEN kind = 'user' THEN 'erased-' || CAST(id AS TEXT) ELSE name END`

// migrateDestroyedNames renames the user keys that an earlier version
// destroyed with their names (see destroyedName), and scrubs the old
// names as an erase does, marking scrub_names in the same transaction.
func (db *DB) migrateDestroyedNames(ctx context.Context) error {
	var n int64
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE data_keys SET name = `+destroyedName+` WHERE kind = ? AND destroyed_us <> 0 AND name NOT LIKE 'erased-%'`,
			string(keys.KindUser))
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		n = res.RowsAffected
		return markNames(tx) // as an erase's rename (see markNamesSQL)
	})
	if err != nil || n == 0 {
		return err
	}
	db.scrubNames(ctx)
	return nil
}

// scrubNames removes the residue of the names of user keys destroyed (and
// renamed, see destroyedName) by transactions that committed: on SQLite a
// checkpoint (secure_delete zeroed the old cells and index entries in the
// pages written; the checkpoint takes the older page images out of the
// log); on PostgreSQL the background VACUUM a forget gets, whose list
// holds data_keys (an erase that renames marks scrub_names in its
// transaction, see markNamesSQL, so that Open runs it after a crash): the old tuple leaves the heap's items, but, as a
// forgotten row's, its bytes can stay in the page's free space until
// overwritten, and its index entry until autovacuum cleans the index.
// Rewriting data_keys (VACUUM FULL) would remove them, but costs the whole
// table under an exclusive lock (about 1 s per 100,000 keys), at every
// erasure: lethe does not (docs/compliance/erasure.md).
func (db *DB) scrubNames(ctx context.Context) {
	db.scrubForget(ctx)
}

// LiveKey returns the live key (memory, kind, name), or keys.ErrNoKey.
func (db *DB) LiveKey(ctx context.Context, memory string, kind keys.Kind, name string) (keys.Record, error) {
	rows, err := db.findKeys(db.keysQ(db.gorm.WithContext(ctx)).Where("memory = ? AND kind = ? AND name = ? AND destroyed_us = 0", memory, string(kind), name).
		Limit(1))
	if err != nil {
		return keys.Record{}, translate(err, "read data key")
	}
	if len(rows) == 0 {
		return keys.Record{}, keys.ErrNoKey
	}
	return toRecord(rows[0]), nil
}

// CreateKey stores r unless a live key of the same name exists, and returns
// the live key.
func (db *DB) CreateKey(ctx context.Context, r keys.Record) (keys.Record, error) {
	out, err := db.CreateKeys(ctx, []keys.Record{r})
	if err != nil {
		return keys.Record{}, err
	}
	return out[0], nil
}

// LiveKeys returns the live keys of memory and kind with the given names,
// in no particular order; names without a live key are left out.
func (db *DB) LiveKeys(ctx context.Context, memory string, kind keys.Kind, names []string) ([]keys.Record, error) {
	if db.dialect == Postgres {
		return db.liveKeysPG(ctx, memory, kind, names)
	}
	var out []keys.Record
	for i := 0; i < len(names); i += chunk {
		var rows []KeyRow
		err := db.gorm.WithContext(ctx).Where("memory = ? AND kind = ? AND name IN ? AND destroyed_us = 0",
			memory, string(kind), names[i:min(i+chunk, len(names))]).Find(&rows).Error
		if err != nil {
			return nil, translate(err, "read data keys")
		}
		for _, r := range rows {
			out = append(out, toRecord(r))
		}
	}
	return out, nil
}

// liveKeysPG is LiveKeys as one probe of the live-key index per name. With
// "name IN (...)" PostgreSQL, whose statistics lag behind a data_keys table
// that grows by a thousand users a batch, scanned every user key of the
// memory against the whole list: 37 ms for 500 names among 10,000 keys.
func (db *DB) liveKeysPG(ctx context.Context, memory string, kind keys.Kind, names []string) ([]keys.Record, error) {
	var out []keys.Record
	err := db.pgTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT d.id, d.memory, d.kind, d.name, d.wrapped, d.fingerprint, d.created_us, d.destroyed_us
			FROM unnest($3::text[]) AS n(name), LATERAL (SELECT * FROM data_keys
				WHERE memory = $1 AND kind = $2 AND name = n.name AND destroyed_us = 0 LIMIT 1) d`, memory, string(kind), names)
		if err != nil {
			return err
		}
		var krs []KeyRow
		for rows.Next() {
			var r KeyRow
			if err := rows.Scan(&r.ID, &r.Memory, &r.Kind, &r.Name, &r.Wrapped, &r.Fingerprint, &r.CreatedUS, &r.DestroyedUS); err != nil {
				rows.Close()
				return err
			}
			krs = append(krs, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// The wrapped forms by the keys' ids (see withWraps).
		krs, err = withWraps(krs, func(ids []int64) ([]wrapRow, error) { return readWrapsPG(ctx, tx, ids) })
		for _, r := range krs {
			out = append(out, toRecord(r))
		}
		return err
	})
	return out, translatePG(err, "read data keys")
}

// CreateKeys stores each record unless a live key of its name exists, in
// one transaction with the audit events of the keys it created (a batch
// that brings many new users commits once, not once per user), and returns
// the live key of each record, in order. The rows go in one multi-row
// INSERT per 500 keys; the events are what the SetKeyEvent function builds
// from all the keys created, in one more.
func (db *DB) CreateKeys(ctx context.Context, rs []keys.Record) ([]keys.Record, error) {
	out := make([]keys.Record, len(rs))
	var lost []int
	// PostgreSQL: the wrapped forms go to data_key_wraps, whose partitions
	// must exist before the transaction (see wraps.go).
	var ids []int64
	if db.dialect == Postgres {
		var err error
		if ids, err = db.reserveKeyIDs(ctx, len(rs)); err != nil {
			return nil, err
		}
	}
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		lost = lost[:0]
		if err := db.checkUnder(tx, rs); err != nil {
			return err
		}
		created := make([]bool, len(rs))
		for start := 0; start < len(rs); start += chunk {
			part := rs[start:min(start+chunk, len(rs))]
			var sb strings.Builder
			args := make([]any, 0, 7*len(part))
			if ids == nil {
				sb.WriteString("INSERT INTO data_keys (memory, kind, name, wrapped, fingerprint, created_us, destroyed_us) VALUES ")
			} else {
				sb.WriteString("INSERT INTO data_keys (id, memory, kind, name, wrapped, fingerprint, created_us, destroyed_us) VALUES ")
			}
			for j, r := range part {
				if j > 0 {
					sb.WriteByte(',')
				}
				if ids == nil {
					sb.WriteString("(?, ?, ?, ?, ?, ?, 0)")
					args = append(args, r.Memory, string(r.Kind), r.Name, r.Wrapped, r.Fingerprint, r.CreatedAt.UnixMicro())
				} else {
					sb.WriteString("(?, ?, ?, ?, NULL, ?, ?, 0)")
					args = append(args, ids[start+j], r.Memory, string(r.Kind), r.Name, r.Fingerprint, r.CreatedAt.UnixMicro())
				}
			}
			// A live key of the same name (another writer's, or an earlier
			// row of this batch) wins; the fingerprint, random per key,
			// tells which rows went in.
			sb.WriteString(" ON CONFLICT DO NOTHING RETURNING id, fingerprint")
			rows, err := tx.Raw(sb.String(), args...).Rows()
			if err != nil {
				return err
			}
			got := make(map[string]int64, len(part))
			for rows.Next() {
				var id int64
				var fp string
				if err := rows.Scan(&id, &fp); err != nil {
					rows.Close()
					return err
				}
				got[fp] = id
			}
			if err := rows.Close(); err != nil {
				return err
			}
			var wids []int64
			var wrapped [][]byte
			for j, r := range part {
				id, ok := got[r.Fingerprint]
				if !ok {
					lost = append(lost, start+j)
					continue
				}
				r.ID, r.DestroyedAt = id, nil
				r.CreatedAt = time.UnixMicro(r.CreatedAt.UnixMicro()).UTC()
				out[start+j], created[start+j] = r, true
				wids, wrapped = append(wids, id), append(wrapped, r.Wrapped)
			}
			if ids != nil {
				if err := insertWraps(tx, wids, wrapped); err != nil {
					return err
				}
			}
		}
		var made []keys.Record
		bumped := map[string]bool{}
		for i, r := range rs {
			if !created[i] {
				continue
			}
			if (r.Kind == keys.KindScope || r.Kind == keys.KindMemory) && !bumped[r.Memory] {
				if err := bumpScopeGen(tx, r.Memory); err != nil {
					return err
				}
				bumped[r.Memory] = true
			}
			made = append(made, out[i])
		}
		if db.keyEvent == nil || len(made) == 0 {
			return nil
		}
		evs, err := db.keyEvent(ctx, made)
		if err != nil {
			return err
		}
		return insertEvents(tx, rs[0].CreatedAt.UnixMicro(), evs)
	})
	if err != nil {
		return nil, translate(err, "create data keys")
	}
	for _, i := range lost {
		if out[i], err = db.LiveKey(ctx, rs[i].Memory, rs[i].Kind, rs[i].Name); err != nil {
			if errors.Is(err, keys.ErrNoKey) {
				// The live key that won over ours was destroyed since (an
				// erasure of that user or scope): code erased, on which a
				// write drops its cached keys and tries again.
				return nil, grains.Errorf(grains.CodeErased, "a data key created meanwhile was erased")
			}
			return nil, err
		}
	}
	return out, nil
}

// checkUnder fails with code erased if a record is to be created under a
// memory key (Record.Under) that is no longer live. It takes the memory's
// write lock first (see checkLive), so an erase cannot commit between the
// check and this transaction's commit, and an erase that starts after it
// destroys the keys it created.
func (db *DB) checkUnder(tx *gorm.DB, rs []keys.Record) error {
	under := map[string][]int64{}
	var memories []string
	for _, r := range rs {
		if r.Under == 0 || slices.Contains(under[r.Memory], r.Under) {
			continue
		}
		if under[r.Memory] == nil {
			memories = append(memories, r.Memory)
		}
		under[r.Memory] = append(under[r.Memory], r.Under)
	}
	slices.Sort(memories) // one lock order across transactions
	for _, m := range memories {
		if err := checkLive(tx, db.dialect, m, under[m]); err != nil {
			return err
		}
	}
	return nil
}

// SetKeyEvent sets the function that builds the audit events committed with
// the keys a transaction creates: it gets them all, in creation order.
func (db *DB) SetKeyEvent(fn EventsFunc[[]keys.Record]) { db.keyEvent = fn }

// KeyEventsByMemory returns a SetKeyEvent function that calls fn once per
// memory of the keys created, memories in the order their first key was
// created, with the fingerprints of that memory's keys in creation order.
func KeyEventsByMemory(fn func(ctx context.Context, memory string, fingerprints []string) ([]Event, error)) EventsFunc[[]keys.Record] {
	return func(ctx context.Context, rs []keys.Record) ([]Event, error) {
		var memories []string
		fps := map[string][]string{}
		for _, r := range rs {
			if fps[r.Memory] == nil {
				memories = append(memories, r.Memory)
			}
			fps[r.Memory] = append(fps[r.Memory], r.Fingerprint)
		}
		var evs []Event
		for _, m := range memories {
			ev, err := fn(ctx, m, fps[m])
			if err != nil {
				return nil, err
			}
			evs = append(evs, ev...)
		}
		return evs, nil
	}
}

// KeysByID returns the keys with the given ids.
func (db *DB) KeysByID(ctx context.Context, ids []int64) ([]keys.Record, error) {
	rows, err := db.findKeys(db.keysQ(db.gorm.WithContext(ctx)).Where("id IN ?", ids))
	if err != nil {
		return nil, translate(err, "read data keys")
	}
	out := make([]keys.Record, len(rows))
	for i, r := range rows {
		out[i] = toRecord(r)
	}
	return out, nil
}

// ScopeGenRow counts the changes to a memory's set of index keys: the
// creations and destructions of its memory and scope keys. Queries read it
// with their rows, so that a reader whose tokens come from cached index keys
// learns, in the same snapshot, whether a scope was created since (see
// Filter.ScopeGen). It is bumped in the transaction that changes the set.
type ScopeGenRow struct {
	Memory string `gorm:"primaryKey;size:64"`
	Gen    int64  `gorm:"not null"`
}

// TableName is the scope generation table.
func (ScopeGenRow) TableName() string { return "scope_generations" }

func bumpScopeGen(tx *gorm.DB, memory string) error {
	err := tx.Exec(`INSERT INTO scope_generations (memory, gen) VALUES (?, 1)
		ON CONFLICT (memory) DO UPDATE SET gen = scope_generations.gen + 1`, memory).Error
	return translate(err, "bump scope generation")
}

// ScopeGeneration returns the scope generation of memory (0 before its
// first key).
func (db *DB) ScopeGeneration(ctx context.Context, memory string) (int64, error) {
	// Through the connection pool's kept statement, not gorm's builder:
	// every text query and every recall that finds nothing reads it, and
	// building it cost more than running it.
	var gen int64
	err := db.gorm.ConnPool.QueryRowContext(ctx, db.rebind("SELECT gen FROM scope_generations WHERE memory = ?"), memory).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, translate(err, "read scope generation")
	}
	return gen, nil
}

// ScopeKeys returns the live scope keys of memory at or below prefix.
func (db *DB) ScopeKeys(ctx context.Context, memory, prefix string) ([]keys.Record, error) {
	q := db.keysQ(db.gorm.WithContext(ctx)).Where("memory = ? AND kind = ? AND destroyed_us = 0", memory, string(keys.KindScope))
	if prefix != "" {
		cond, args := db.underPrefix("name", prefix)
		q = q.Where(cond, args...)
	}
	rows, err := db.findKeys(q.Order("data_keys.name"))
	if err != nil {
		return nil, translate(err, "read scope keys")
	}
	out := make([]keys.Record, len(rows))
	for i, r := range rows {
		out[i] = toRecord(r)
	}
	return out, nil
}

// LiveKeyPage returns up to n live keys with ids above after, in id order.
func (db *DB) LiveKeyPage(ctx context.Context, after int64, n int) ([]keys.Record, error) {
	rows, err := db.findKeys(db.keysQ(db.gorm.WithContext(ctx)).Where("data_keys.id > ? AND destroyed_us = 0", after).Order("data_keys.id").Limit(n))
	if err != nil {
		return nil, translate(err, "read data keys")
	}
	out := make([]keys.Record, len(rows))
	for i, r := range rows {
		out[i] = toRecord(r)
	}
	return out, nil
}

// ReplaceWrapped swaps a live key's wrapped form from old to next (a KEK
// rewrap) and reports whether it did; a key destroyed or rewrapped
// meanwhile is left alone.
func (db *DB) ReplaceWrapped(ctx context.Context, id int64, old, next []byte) (bool, error) {
	g := db.gorm.WithContext(ctx)
	if db.dialect == Postgres {
		// An erase deletes the row in data_key_wraps: a destroyed key has
		// none to replace.
		res := g.Exec(`UPDATE data_key_wraps SET wrapped = ? WHERE key_id = ? AND wrapped = ?`, next, id, old)
		if res.Error != nil || res.RowsAffected == 1 {
			return res.RowsAffected == 1, translate(res.Error, "rewrap data key")
		}
	}
	res := g.Model(&KeyRow{}).Where("id = ? AND destroyed_us = 0 AND wrapped = ?", id, old).Update("wrapped", next)
	return res.RowsAffected == 1, translate(res.Error, "rewrap data key")
}
