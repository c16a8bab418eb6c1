package store

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// CountRow counts the grain rows of a memory per scope path, split over
// countShards rows so that concurrent writers to one scope rarely wait on
// the same row; a count is the sum over shards. Every insert and delete
// adjusts it in its own transaction, so an erasure reads its count in
// O(scopes) instead of scanning the grains it makes unreadable. Kind is
// always "scope": user keys are counted in UserCountRow.
type CountRow struct {
	Memory string `gorm:"primaryKey;size:64"`
	Kind   string `gorm:"primaryKey;size:8"`
	Name   string `gorm:"primaryKey;size:512"`
	Shard  int    `gorm:"primaryKey;autoIncrement:false"`
	N      int64  `gorm:"not null"`
}

// TableName is the scope counter table.
func (CountRow) TableName() string { return "grain_counts" }

// UserCountRow counts the grain rows sealed under one user key, sharded like
// CountRow. It is keyed by the key's id alone (ids are unique across
// memories): a batch for many users adjusts one row per user, and an
// integer key costs half as much to probe as CountRow's text key.
type UserCountRow struct {
	KeyID int64 `gorm:"primaryKey;autoIncrement:false"`
	Shard int   `gorm:"primaryKey;autoIncrement:false"`
	N     int64 `gorm:"not null"`
}

// TableName is the user counter table.
func (UserCountRow) TableName() string { return "user_grain_counts" }

// countShards is how many rows each counter is split over.
const countShards = 16

// counter accumulates count deltas per scope path and per user key id.
type counter struct {
	scopes map[string]int64
	users  map[int64]int64
}

func (c *counter) add(scope string, userKeyID int64, d int64) {
	if c.scopes == nil {
		c.scopes, c.users = map[string]int64{}, map[int64]int64{}
	}
	c.scopes[scope] += d
	if userKeyID != 0 {
		c.users[userKeyID] += d
	}
}

// merge adds o's deltas to c.
func (c *counter) merge(o counter) {
	if c.scopes == nil {
		c.scopes, c.users = map[string]int64{}, map[int64]int64{}
	}
	for scope, d := range o.scopes {
		c.scopes[scope] += d
	}
	for user, d := range o.users {
		c.users[user] += d
	}
}

// sorted returns the non-zero deltas in key order, so concurrent
// transactions lock counter rows in the same order and cannot deadlock.
func (c *counter) sorted(memory string) ([]CountRow, []UserCountRow) {
	shard := rand.IntN(countShards)
	scopes := make([]CountRow, 0, len(c.scopes))
	for name, n := range c.scopes {
		if n != 0 {
			scopes = append(scopes, CountRow{Memory: memory, Kind: "scope", Name: name, Shard: shard, N: n})
		}
	}
	slices.SortFunc(scopes, func(a, b CountRow) int { return strings.Compare(a.Name, b.Name) })
	users := make([]UserCountRow, 0, len(c.users))
	for id, n := range c.users {
		if n != 0 {
			users = append(users, UserCountRow{KeyID: id, Shard: shard, N: n})
		}
	}
	slices.SortFunc(users, func(a, b UserCountRow) int { return cmp.Compare(a.KeyID, b.KeyID) })
	return scopes, users
}

// adjustCounts applies c in one multi-row upsert per table.
func adjustCounts(tx *gorm.DB, memory string, c counter) error {
	scopes, users := c.sorted(memory)
	if len(scopes) > 0 {
		err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "memory"}, {Name: "kind"}, {Name: "name"}, {Name: "shard"}},
			DoUpdates: clause.Assignments(map[string]any{"n": gorm.Expr("grain_counts.n + excluded.n")}),
		}).CreateInBatches(scopes, chunk/2).Error
		if err != nil {
			return translate(err, "count grains")
		}
	}
	if len(users) > 0 {
		err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "key_id"}, {Name: "shard"}},
			DoUpdates: clause.Assignments(map[string]any{"n": gorm.Expr("user_grain_counts.n + excluded.n")}),
		}).CreateInBatches(users, chunk/2).Error
		if err != nil {
			return translate(err, "count grains")
		}
	}
	return nil
}

// adjustCountsPG is adjustCounts over pgx, one array statement per table.
func adjustCountsPG(ctx context.Context, tx pgExecer, memory string, c counter) error {
	scopes, users := c.sorted(memory)
	if len(scopes) > 0 {
		names, shards, ns := make([]string, len(scopes)), make([]int32, len(scopes)), make([]int64, len(scopes))
		for i, r := range scopes {
			names[i], shards[i], ns[i] = r.Name, int32(r.Shard), r.N
		}
		_, err := tx.Exec(ctx, `INSERT INTO grain_counts (memory, kind, name, shard, n)
			SELECT $1, 'scope', nm, sh, d FROM unnest($2::text[], $3::int[], $4::bigint[]) AS t(nm, sh, d)
			ON CONFLICT (memory, kind, name, shard) DO UPDATE SET n = grain_counts.n + excluded.n`, memory, names, shards, ns)
		if err != nil {
			return err
		}
	}
	if len(users) > 0 {
		ids, shards, ns := make([]int64, len(users)), make([]int32, len(users)), make([]int64, len(users))
		for i, r := range users {
			ids[i], shards[i], ns[i] = r.KeyID, int32(r.Shard), r.N
		}
		_, err := tx.Exec(ctx, `INSERT INTO user_grain_counts (key_id, shard, n)
			SELECT k, sh, d FROM unnest($1::bigint[], $2::int[], $3::bigint[]) AS t(k, sh, d)
			ON CONFLICT (key_id, shard) DO UPDATE SET n = user_grain_counts.n + excluded.n`, ids, shards, ns)
		if err != nil {
			return err
		}
	}
	return nil
}

// countUser returns the number of grain rows of a user key.
func countUser(tx *gorm.DB, keyID int64) (int64, error) {
	var n int64
	err := tx.Model(&UserCountRow{}).Select("COALESCE(SUM(n), 0)").Where("key_id = ?", keyID).Scan(&n).Error
	return n, translate(err, "count grains")
}

// countScope returns the number of grain rows at or below a scope path (""
// and all: the whole memory).
func (db *DB) countScope(tx *gorm.DB, memory, prefix string, all bool) (int64, error) {
	q := tx.Model(&CountRow{}).Select("COALESCE(SUM(n), 0)").Where("memory = ? AND kind = 'scope'", memory)
	if !all {
		cond, args := db.underPrefix("name", prefix)
		q = q.Where(cond, args...)
	}
	var n int64
	err := q.Scan(&n).Error
	return n, translate(err, "count grains")
}

// migrateUserCounts moves user counters kept in grain_counts (Kind "user",
// Name the key id), as databases created before user_grain_counts have
// them, into user_grain_counts. It runs once: afterwards there are none.
func migrateUserCounts(g *gorm.DB) error {
	return g.Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&CountRow{}).Where("kind = 'user'").Count(&n).Error; err != nil || n == 0 {
			return err
		}
		if err := tx.Exec(`INSERT INTO user_grain_counts (key_id, shard, n)
			SELECT CAST(name AS BIGINT), shard, n FROM grain_counts WHERE kind = 'user'`).Error; err != nil {
			return err
		}
		return tx.Where("kind = 'user'").Delete(&CountRow{}).Error
	})
}
