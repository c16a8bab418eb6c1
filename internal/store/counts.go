package store

import (
	"context"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// CountRow counts the grain rows of a memory per scope path (Kind "scope")
// and per user key id (Kind "user"), split over countShards rows so that
// concurrent writers to one scope rarely wait on the same row; a count is
// the sum over shards. Every insert and delete adjusts it in its own
// transaction, so an erasure reads its count in O(scopes) instead of
// scanning the grains it makes unreadable.
type CountRow struct {
	Memory string `gorm:"primaryKey;size:64"`
	Kind   string `gorm:"primaryKey;size:8"`
	Name   string `gorm:"primaryKey;size:512"`
	Shard  int    `gorm:"primaryKey;autoIncrement:false"`
	N      int64  `gorm:"not null"`
}

// countShards is how many rows each counter is split over.
const countShards = 16

// TableName is the counter table.
func (CountRow) TableName() string { return "grain_counts" }

type countKey struct{ kind, name string }

// counter accumulates count deltas.
type counter map[countKey]int64

func (c counter) add(scope string, userKeyID int64, d int64) {
	c[countKey{"scope", scope}] += d
	if userKeyID != 0 {
		c[countKey{"user", strconv.FormatInt(userKeyID, 10)}] += d
	}
}

// sorted returns the deltas in key order, so concurrent transactions lock
// counter rows in the same order and cannot deadlock.
func (c counter) sorted(memory string) []CountRow {
	out := make([]CountRow, 0, len(c))
	shard := rand.IntN(countShards)
	for k, n := range c {
		if n != 0 {
			out = append(out, CountRow{Memory: memory, Kind: k.kind, Name: k.name, Shard: shard, N: n})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// adjustCounts applies c in one multi-row upsert.
func adjustCounts(tx *gorm.DB, memory string, c counter) error {
	rows := c.sorted(memory)
	if len(rows) == 0 {
		return nil
	}
	err := tx.Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "memory"}, {Name: "kind"}, {Name: "name"}, {Name: "shard"}},
		DoUpdates: clause.Assignments(map[string]any{"n": gorm.Expr("grain_counts.n + excluded.n")}),
	}).CreateInBatches(rows, chunk/2).Error
	return translate(err, "count grains")
}

func adjustCountsPG(ctx context.Context, tx pgx.Tx, memory string, c counter) error {
	rows := c.sorted(memory)
	if len(rows) == 0 {
		return nil
	}
	kinds, names, shards, ns := make([]string, len(rows)), make([]string, len(rows)), make([]int32, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		kinds[i], names[i], shards[i], ns[i] = r.Kind, r.Name, int32(r.Shard), r.N
	}
	_, err := tx.Exec(ctx, `INSERT INTO grain_counts (memory, kind, name, shard, n)
		SELECT $1, k, nm, sh, d FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[]) AS t(k, nm, sh, d)
		ON CONFLICT (memory, kind, name, shard) DO UPDATE SET n = grain_counts.n + excluded.n`, memory, kinds, names, shards, ns)
	return err
}

// countUser returns the number of grain rows of a user key.
func countUser(tx *gorm.DB, memory string, keyID int64) (int64, error) {
	var n int64
	err := tx.Model(&CountRow{}).Select("COALESCE(SUM(n), 0)").
		Where("memory = ? AND kind = 'user' AND name = ?", memory, strconv.FormatInt(keyID, 10)).Scan(&n).Error
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
