package store

import (
	"context"
	"errors"
	"testing"
	"time"
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
