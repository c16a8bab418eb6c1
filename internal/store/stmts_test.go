package store

import (
	"context"
	"testing"
)

// A SQLite store's transactions run statements prepared once, and keep at
// most stmtCacheSize of them: inserts of batches of every size from 1 to
// 150 rows (each size a new multi-row statement) leave the cache at its
// bound, and the statements of the latest size in it, prepared outside any
// transaction.
func TestStatementCacheIsBounded(t *testing.T) {
	db := openSQLite(t)
	ctx := context.Background()
	f := newFixture(t, db, 2)
	p, ok := db.gorm.ConnPool.(*stmtPool)
	if !ok {
		t.Fatalf("the SQLite store's pool is %T, want *stmtPool", db.gorm.ConnPool)
	}
	n := 0
	for size := 1; size <= 150; size++ {
		rows := make([]*GrainRow, size)
		for i := range rows {
			rows[i] = f.row(n, n%2, "s", "r", "o")
			n++
		}
		if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
			t.Fatal(err)
		}
	}
	keys := p.Stmts.Keys()
	if len(keys) > stmtCacheSize || len(keys) < stmtCacheSize/2 {
		t.Fatalf("%d statements cached, want at most %d and at least half", len(keys), stmtCacheSize)
	}
	for _, k := range keys {
		st, ok := p.Stmts.Get(k)
		if ok && st.Transaction {
			t.Fatalf("statement prepared in a transaction is cached: %.80s", k)
		}
	}
	// The store still answers through statements evicted and prepared again.
	var count int64
	if err := db.gorm.WithContext(ctx).Raw("SELECT COUNT(*) FROM grains").Scan(&count).Error; err != nil || count != int64(n) {
		t.Fatalf("%d grains (%v), want %d", count, err, n)
	}
}
