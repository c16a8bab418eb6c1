package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/testenv"
)

// TestScrubPending: on PostgreSQL the tables an erase leaves to its scrub
// are rows of scrub_pending, written in the erase's transaction, so that
// the rewrite they need outlives the process.
//
//   - A scrub held back by an older snapshot (another session's open
//     transaction) keeps its row; once that transaction ends, RetryScrub
//     rewrites the partition (a new file) and deletes the row.
//   - An erase whose process ends before its scrub leaves the row, and
//     the next Open rewrites the partition.
//   - A store from before the table (scrub_pending dropped) gets every
//     partition of data_key_wraps rewritten at its first open.
func TestScrubPending(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Dialect: Postgres, DSN: testenv.Postgres(t)}
	open := func() *DB {
		t.Helper()
		db, err := Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	f := newFixture(t, db, 4)
	// Read through a connection of its own: the store's is closed at times.
	raw, err := sql.Open("pgx", cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	pending := func() map[string]int64 {
		t.Helper()
		rows, err := raw.Query(`SELECT tbl, count(*) FROM scrub_pending GROUP BY tbl`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var tbl string
			var n int64
			if err := rows.Scan(&tbl, &n); err != nil {
				t.Fatal(err)
			}
			out[tbl] = n
		}
		return out
	}
	file := func() int64 {
		t.Helper()
		var n int64
		if err := raw.QueryRow(`SELECT relfilenode FROM pg_class WHERE relname = 'data_key_wraps_0'`).Scan(&n); err != nil || n == 0 {
			t.Fatalf("relfilenode of data_key_wraps_0: %d, %v", n, err)
		}
		return n
	}
	erase := func(u int, defer_ bool) {
		t.Helper()
		ref, _ := hex.DecodeString(f.users[u].Name)
		if _, err := db.EraseKey(ctx, EraseSpec{Memory: f.memory, Kind: keys.KindUser, Name: f.users[u].Name, UserRef: ref, Now: 1, DeferScrub: defer_},
			func(context.Context, *Erasure) ([]Event, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if p := pending(); len(p) != 0 {
		t.Fatalf("a new store has tables to scrub: %v", p)
	}

	// An older snapshot holds the scrub back: the row stays.
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `SELECT count(*) FROM data_keys`); err != nil {
		t.Fatal(err)
	}
	before := file()
	erase(0, false) // waits scrubWait for the snapshot, then rewrites anyway
	if p := pending(); p["data_key_wraps_0"] == 0 {
		t.Fatalf("after a scrub an older snapshot held back, scrub_pending = %v, want data_key_wraps_0", p)
	}
	tx.Rollback()
	if err := db.RetryScrub(ctx); err != nil {
		t.Fatal(err)
	}
	if p := pending(); len(p) != 0 {
		t.Fatalf("after RetryScrub with no older snapshot, scrub_pending = %v", p)
	}
	if file() == before {
		t.Fatal("RetryScrub did not rewrite data_key_wraps_0")
	}

	// The process ends before the scrub: the next Open rewrites it.
	erase(1, true)
	if p := pending(); p["data_key_wraps_0"] == 0 {
		t.Fatalf("after an erase whose scrub did not run, scrub_pending = %v", p)
	}
	db.SetScrub(false) // Close must not scrub either: as a crash
	db.Close()
	before = file()
	db = open()
	if p := pending(); len(p) != 0 {
		t.Fatalf("after Open, scrub_pending = %v", p)
	}
	if file() == before {
		t.Fatal("Open did not rewrite the partition an erase left to its scrub")
	}

	// A store made before scrub_pending: every partition rewritten once.
	if _, err := raw.Exec(`DROP TABLE scrub_pending`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before = file()
	db = open()
	defer db.Close()
	if p := pending(); len(p) != 0 {
		t.Fatalf("after the first Open with scrub_pending, it holds %v", p)
	}
	if file() == before {
		t.Fatal("the first Open with scrub_pending did not rewrite data_key_wraps_0")
	}
}
