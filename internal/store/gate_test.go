package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"gorm.io/gorm"
)

// held reports whether a transaction holds the gate.
func (g *writeGate) held() bool { return len(g.ch) > 0 }

// gateOf returns the write gate of a SQLite store's transactions.
func gateOf(t *testing.T, db *DB) *writeGate {
	t.Helper()
	p, ok := db.gorm.ConnPool.(*stmtPool)
	if !ok || p.gate == nil {
		t.Fatalf("the store's pool is %T, without a write gate", db.gorm.ConnPool)
	}
	return p.gate
}

// TestWriteGate checks the write gate ahead of SQLite's lock (see
// writeGate): a transaction holds it from its BEGIN to its commit or
// rollback, however it ends (an error, a panic); two stores on one file
// share it; a transaction waits for it, but background work
// (Background) passes it, and a cancelled context returns at once with
// the BEGIN's error rather than waiting.
func TestWriteGate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *DB {
		db, err := Open(ctx, Config{Dialect: SQLite, DSN: filepath.Join(dir, "lethe.db")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	db, other := open(), open()
	g := gateOf(t, db)
	if gateOf(t, other) != g {
		t.Fatal("two stores on one file have a write gate each")
	}
	insert := func(tx *gorm.DB) error {
		return tx.Exec(`INSERT INTO erase_epochs (memory, epoch) VALUES ('gate', 1) ON CONFLICT (memory) DO UPDATE SET epoch = epoch + 1`).Error
	}

	// Held inside, open after every way a transaction ends.
	boom := errors.New("boom")
	for name, fn := range map[string]func(tx *gorm.DB) error{
		"commit": func(tx *gorm.DB) error {
			if !g.held() {
				t.Error("commit: the gate is open inside the transaction")
			}
			return insert(tx)
		},
		"error": func(tx *gorm.DB) error { insert(tx); return boom },
		"panic": func(tx *gorm.DB) error { insert(tx); panic(boom) },
	} {
		func() {
			defer func() { recover() }()
			db.gorm.WithContext(ctx).Transaction(fn)
		}()
		if g.held() {
			t.Fatalf("%s: the gate stays held after the transaction ended", name)
		}
	}

	// Held from outside: a transaction waits for it; background work and
	// a cancelled context do not.
	g.ch <- struct{}{}
	bg, cancelBg := context.WithTimeout(Background(ctx), 5*time.Second) // it fails at the deadline if it waits
	defer cancelBg()
	if err := other.gorm.WithContext(bg).Transaction(insert); err != nil {
		t.Fatalf("a background transaction beside a held gate: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := db.gorm.WithContext(cancelled).Transaction(insert); !errors.Is(err, context.Canceled) {
		t.Fatalf("a transaction with a cancelled context at a held gate: %v, want context.Canceled", err)
	}
	done := make(chan error, 1)
	go func() { done <- db.gorm.WithContext(ctx).Transaction(insert) }()
	select {
	case err := <-done:
		t.Fatalf("a transaction ran while the gate was held (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	g.leave()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g.held() {
		t.Fatal("the gate stays held after the waiting transaction committed")
	}
}
