package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
)

// A read whose context is cancelled stops at once, and the connection it
// ran on serves the next read: go-sqlite3 interrupts the statement (since
// v1.14.52 from one watcher per result set, not a goroutine per row), so a
// client that goes away does not leave a long statement holding a
// connection. The statement here would count for minutes.
func TestCancelledReadStops(t *testing.T) {
	db := openSQLite(t)
	sqlDB, err := db.gorm.DB()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := sqlDB.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const long = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5000000000) SELECT COUNT(*) FROM c"
	for round := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		rows, err := conn.QueryContext(ctx, long)
		if err == nil {
			for rows.Next() { // the count is stepped, and interrupted, here
			}
			err = rows.Err()
			rows.Close()
		}
		stop.Stop()
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v after %v, want the statement interrupted", round, err, time.Since(start))
		}
		var n int
		if err := conn.QueryRowContext(context.Background(), "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
			t.Fatalf("round %d: the next read on the connection: %d, %v", round, n, err)
		}
	}
}

// The reads that answer a recall and a lookup by hash refuse a context that
// is already cancelled or past its deadline, before any statement, on
// both stores. On SQLite the lookup by hash then runs under a context that
// cannot be cancelled (boundedCtx), so this check is what stops it; the
// recall's statement goes through queryDriver, which keeps the context.
func TestBoundedReadsCheckTheContext(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		f := newFixture(t, db, 1)
		row := f.row(0, 0, "a", "b", "c")
		if _, err := db.InsertGrains(ctx, f.memory, []*GrainRow{row}, nil); err != nil {
			t.Fatal(err)
		}
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		expired, stop := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer stop()
		filter := Filter{Memory: f.memory, Subject: [][]byte{row.SubjectTok}}
		for name, c := range map[string]context.Context{"cancelled": cancelled, "expired": expired, "live": ctx} {
			_, gerr := db.GrainByHash(c, f.memory, row.Hash)
			found, ferr := db.FindGrains(c, filter)
			if name == "live" {
				if gerr != nil || ferr != nil || len(found) != 1 {
					t.Fatalf("live context: %v, %v, %d rows", gerr, ferr, len(found))
				}
				continue
			}
			for _, err := range []error{gerr, ferr} {
				if !errors.Is(err, c.Err()) || grains.ErrorCode(err) != grains.CodeUnavailable {
					t.Errorf("%s context: %v (code %s), want %v", name, err, grains.ErrorCode(err), c.Err())
				}
			}
		}
	})
}

// queryDriver, the path of a recall's statements on SQLite, stops a
// statement when its context is cancelled, and the pool's connection
// serves the next read; its rows arrive as the driver's values.
func TestQueryDriverStopsWhenCancelled(t *testing.T) {
	db := openSQLite(t)
	const long = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5000000000) SELECT COUNT(*) FROM c"
	for round := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(50*time.Millisecond, cancel)
		err := db.queryDriver(ctx, long, nil, func([]driver.Value) error { return nil })
		stop.Stop()
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: %v, want the statement interrupted", round, err)
		}
		var got []driver.Value
		err = db.queryDriver(context.Background(), "SELECT ?1 + 1, ?2, ?3", []any{41, "two", []byte{3}}, func(vals []driver.Value) error {
			got = append(got, vals...)
			return nil
		})
		if err != nil || len(got) != 3 || got[0] != int64(42) || got[1] != "two" || string(got[2].([]byte)) != "\x03" {
			t.Fatalf("round %d: the next read: %v, %v", round, got, err)
		}
	}
}
