package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/testenv"
)

// TestScrubPending: on PostgreSQL the tables an erase leaves to its scrub
// are rows of scrub_pending, written in the erase's transaction, so that
// the rewrite they need outlives the process.
//
//   - A snapshot older than the erase (another session's open
//     repeatable-read transaction) does not hold the scrub back, and
//     still reads every live key of the rewritten partition.
//   - A transaction holding a lock on the partition does: its row stays
//     and once that transaction ends, RetryScrub rewrites the partition
//     (a new file) and deletes the row.
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

	// An older snapshot does not hold the scrub back, and still sees
	// every live key after it: the partition is a copy of its live rows,
	// frozen.
	tx, err := raw.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	liveWraps := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int64 {
		t.Helper()
		var n int64
		if err := q.QueryRowContext(ctx, `SELECT count(*) FROM data_key_wraps_0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, err := tx.ExecContext(ctx, `SELECT count(*) FROM data_keys`); err != nil {
		t.Fatal(err)
	}
	before := file()
	live := liveWraps(raw)
	erase(0, false)
	if p := pending(); len(p) != 0 {
		t.Fatalf("after a scrub beside an older snapshot, scrub_pending = %v", p)
	}
	if file() == before {
		t.Fatal("the scrub beside an older snapshot did not rewrite data_key_wraps_0")
	}
	if n := liveWraps(tx); n != live-1 {
		t.Fatalf("a snapshot older than the rewrite sees %d wrapped keys in the partition, want the %d live ones", n, live-1)
	}

	// A transaction holding a lock on the partition holds the scrub back
	// (for the lock's timeout): the row stays, and once it ends RetryScrub
	// rewrites the partition.
	before = file()
	erase(1, false)
	if p := pending(); p["data_key_wraps_0"] == 0 {
		t.Fatalf("after a scrub a lock on the partition held back, scrub_pending = %v, want data_key_wraps_0", p)
	}
	if file() != before {
		t.Fatal("the partition was rewritten under another transaction's lock")
	}
	tx.Rollback()
	if err := db.RetryScrub(ctx); err != nil {
		t.Fatal(err)
	}
	if p := pending(); len(p) != 0 {
		t.Fatalf("after RetryScrub with the lock released, scrub_pending = %v", p)
	}
	if file() == before {
		t.Fatal("RetryScrub did not rewrite data_key_wraps_0")
	}

	// The process ends before the scrub: the next Open rewrites it.
	erase(2, true)
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

// pageStore opens a PostgreSQL store and a connection of the test's own
// to its database, with pageinspect, for the tests that read raw pages.
func pageStore(t *testing.T) (*DB, *sql.DB) {
	t.Helper()
	dsn := testenv.Postgres(t)
	db, err := Open(context.Background(), Config{Dialect: Postgres, DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if _, err := raw.Exec(`CREATE EXTENSION IF NOT EXISTS pageinspect`); err != nil {
		t.Fatal(err)
	}
	return db, raw
}

// inPartPages reports whether secret is in any page of table part, free
// space included.
func inPartPages(t *testing.T, raw *sql.DB, part string, secret []byte) bool {
	t.Helper()
	var found bool
	if err := raw.QueryRow(`SELECT COALESCE(bool_or(position($1::bytea IN get_raw_page($2::text, 'main', b::int)) > 0), false)
		FROM generate_series(0, pg_relation_size($2::text::regclass) / current_setting('block_size')::int - 1) b`, secret, part).Scan(&found); err != nil {
		t.Fatal(err)
	}
	return found
}

// TestScrubIgnoresOlderSnapshots: no snapshot older than an erase holds
// its scrub back or keeps a byte of the destroyed key. A plain VACUUM that
// began before the erase (of another table, slowed down) is not counted
// by waitOlder, and the scrub's VACUUM FULL beside it leaves no byte of
// the key: PostgreSQL leaves a lazy VACUUM out of VACUUM FULL's horizon.
// A repeatable-read snapshot of the same age does keep the dead tuple in a
// VACUUM FULL (the control: the byte check finds it then), and the scrub,
// beside that same snapshot, copies the partition's live rows instead,
// which leaves no byte of it.
func TestScrubIgnoresOlderSnapshots(t *testing.T) {
	ctx := context.Background()
	db, raw := pageStore(t)
	f := newFixture(t, db, 1)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE lazy_slow AS SELECT g, repeat('x', 200) AS s FROM generate_series(1, 20000) g`)
	exec(`DELETE FROM lazy_slow WHERE g % 2 = 0`)

	// A user key whose wrapped form is bytes of its own, to look for.
	newUser := func(n int) ([]byte, keys.Record) {
		t.Helper()
		secret := []byte(fmt.Sprintf("wrapped-key-%d-%x", n, tok(fmt.Sprint("secret", n))))
		ref := tok(fmt.Sprint("lazy-user", n))
		r, err := db.CreateKey(ctx, keys.Record{Memory: f.memory, Kind: keys.KindUser, Name: hex.EncodeToString(ref),
			Wrapped: secret, Fingerprint: fmt.Sprint("fp-lazy-", n), CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return secret, r
	}
	erase := func(r keys.Record) int64 {
		t.Helper()
		ref, _ := hex.DecodeString(r.Name)
		if _, err := db.EraseKey(ctx, EraseSpec{Memory: f.memory, Kind: keys.KindUser, Name: r.Name, UserRef: ref, Now: 1, DeferScrub: true},
			func(context.Context, *Erasure) ([]Event, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		var xid int64
		if err := raw.QueryRowContext(ctx, `SELECT max(xid) FROM scrub_pending`).Scan(&xid); err != nil {
			t.Fatal(err)
		}
		return xid
	}
	// inPages reports whether secret is in any page of data_key_wraps_0,
	// free space included.
	inPages := func(secret []byte) bool { t.Helper(); return inPartPages(t, raw, "data_key_wraps_0", secret) }
	older := func(xid int64) int64 {
		t.Helper()
		conn, err := raw.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		n, err := waitOlder(ctx, conn, xid, 0)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	pending := func() int64 {
		t.Helper()
		var n int64
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM scrub_pending`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The slow VACUUM, on a connection of its own.
	vconn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var vpid int64
	if err := vconn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&vpid); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`SET vacuum_cost_delay = 100`, `SET vacuum_cost_limit = 1`} {
		if _, err := vconn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	vacuumed := make(chan error, 1)
	go func() {
		_, err := vconn.ExecContext(ctx, `VACUUM (PARALLEL 0) lazy_slow`)
		vconn.Close()
		vacuumed <- err
	}()
	defer func() {
		exec(`SELECT pg_cancel_backend($1::int)`, vpid)
		<-vacuumed
	}()
	for {
		var running bool
		if err := raw.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_progress_vacuum v JOIN pg_stat_activity a USING (pid)
			WHERE v.pid = $1 AND a.backend_xmin IS NOT NULL)`, vpid).Scan(&running); err != nil {
			t.Fatal(err)
		}
		if running {
			break
		}
		select {
		case err := <-vacuumed:
			t.Fatalf("the slowed VACUUM ended before the erase: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}

	secret, key := newUser(1)
	if !inPages(secret) {
		t.Fatal("a live wrapped key is not in its partition's pages: the check cannot see it")
	}
	xid := erase(key)
	var vacuumOlder bool
	if err := raw.QueryRowContext(ctx, `SELECT age(backend_xmin) >= age($2::text::xid) FROM pg_stat_activity WHERE pid = $1`,
		vpid, fmt.Sprint(xid%(1<<32))).Scan(&vacuumOlder); err != nil {
		t.Fatal(err)
	}
	if !vacuumOlder {
		t.Fatal("the VACUUM's snapshot is not older than the erase: the test shows nothing")
	}
	// Other databases on the server (other packages' tests) may hold a
	// writer older than the erase for a moment: wait for them, as the
	// scrub does, and check the VACUUM is still running when waitOlder
	// counts none (it runs for a minute, throttled).
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n, err := waitOlder(ctx, conn, xid, 30*time.Second)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	var still bool
	if err := raw.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_progress_vacuum WHERE pid = $1)`, vpid).Scan(&still); err != nil {
		t.Fatal(err)
	}
	if n != 0 || !still {
		t.Fatalf("waitOlder counts %d transactions older than the erase (the plain VACUUM still running: %v)", n, still)
	}
	db.ScrubErased(ctx)
	if n := pending(); n != 0 {
		t.Fatalf("after the scrub, %d rows of scrub_pending stay: the VACUUM held it back", n)
	}
	if inPages(secret) {
		t.Fatal("the destroyed key's bytes are in data_key_wraps_0 after its rewrite, with a plain VACUUM running")
	}

	// The control: a snapshot as old does keep the dead tuple.
	tx, err := raw.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SELECT count(*) FROM data_keys`); err != nil {
		t.Fatal(err)
	}
	secret, key = newUser(2)
	xid = erase(key)
	if n := older(xid); n == 0 {
		t.Fatal("waitOlder counts no transaction older than the erase with a repeatable-read snapshot open")
	}
	conn, err = raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `VACUUM FULL data_key_wraps_0`); err != nil {
		t.Fatal(err)
	}
	if !inPages(secret) {
		t.Fatal("a rewrite under an older snapshot left no copy of the destroyed key: the byte check cannot see one")
	}
	db.ScrubErased(ctx)
	if n := pending(); n != 0 {
		t.Fatalf("after the scrub beside an older snapshot, %d rows of scrub_pending stay", n)
	}
	if inPages(secret) {
		t.Fatal("the destroyed key's bytes are in data_key_wraps_0 after the scrub, beside a snapshot older than the erase")
	}
}

// TestCopyScrubUnderLoad: with a snapshot older than every erase open, so
// that every scrub copies its partition's live rows, goroutines create,
// read and erase user keys at once. Every read of a live key returns its
// own wrapped form meanwhile; afterwards every key created and not erased
// reads back, every erased one is gone and its bytes are in no page of
// data_key_wraps, and scrub_pending is empty with the old snapshot still
// open (VACUUM FULL would have kept the rows).
func TestCopyScrubUnderLoad(t *testing.T) {
	ctx := context.Background()
	db, raw := pageStore(t)
	f := newFixture(t, db, 0)
	old, err := raw.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback()
	if _, err := old.ExecContext(ctx, `SELECT count(*) FROM data_keys`); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	live := map[string][]byte{}   // name: wrapped form
	erased := map[string][]byte{} // name: the destroyed wrapped form
	var names []string            // live, not being erased
	create := func(name string) {
		secret := []byte("wrapped-under-load-" + name + "-" + hex.EncodeToString(tok(name)))
		r, err := db.CreateKey(ctx, keys.Record{Memory: f.memory, Kind: keys.KindUser, Name: name,
			Wrapped: secret, Fingerprint: "fp-" + name, CreatedAt: time.Now()})
		if err != nil || !bytes.Equal(r.Wrapped, secret) {
			t.Errorf("create %s: %v", name, err)
			return
		}
		mu.Lock()
		live[name] = secret
		names = append(names, name)
		mu.Unlock()
	}
	for i := range 100 {
		create(hex.EncodeToString(tok(fmt.Sprint("seed", i))))
	}
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 60 {
				switch op := rng.IntN(3); {
				case op == 0:
					create(hex.EncodeToString(tok(fmt.Sprint("g", g, "-", i))))
				default:
					mu.Lock()
					if len(names) == 0 {
						mu.Unlock()
						continue
					}
					k := rng.IntN(len(names))
					name := names[k]
					secret := live[name]
					if op == 1 {
						names = slices.Delete(names, k, k+1) // no other goroutine reads or erases it now
					}
					mu.Unlock()
					if op == 2 {
						r, err := db.LiveKey(ctx, f.memory, keys.KindUser, name)
						if err != nil || !bytes.Equal(r.Wrapped, secret) {
							t.Errorf("read of live key %s during the scrubs: %q, %v", name, r.Wrapped, err)
						}
						continue
					}
					ref, _ := hex.DecodeString(name)
					if _, err := db.EraseKey(ctx, EraseSpec{Memory: f.memory, Kind: keys.KindUser, Name: name, UserRef: ref, Now: 1},
						func(context.Context, *Erasure) ([]Event, error) { return nil, nil }); err != nil {
						t.Errorf("erase %s: %v", name, err)
						continue
					}
					mu.Lock()
					delete(live, name)
					erased[name] = secret
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(erased) == 0 {
		t.Fatal("no erase ran: the test shows nothing")
	}
	for name, secret := range live {
		r, err := db.LiveKey(ctx, f.memory, keys.KindUser, name)
		if err != nil || !bytes.Equal(r.Wrapped, secret) {
			t.Errorf("live key %s after the scrubs: %q, %v", name, r.Wrapped, err)
		}
	}
	var parts []string
	rows, err := raw.QueryContext(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'data_key_wraps'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil || len(parts) == 0 {
		t.Fatalf("partitions of data_key_wraps: %v, %v", parts, err)
	}
	rows.Close()
	for name, secret := range erased {
		if _, err := db.LiveKey(ctx, f.memory, keys.KindUser, name); !errors.Is(err, keys.ErrNoKey) {
			t.Errorf("erased key %s reads back: %v", name, err)
		}
		for _, p := range parts {
			if inPartPages(t, raw, p, secret) {
				t.Errorf("the bytes of erased key %s are in %s's pages", name, p)
			}
		}
	}
	var pending int64
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM scrub_pending`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Fatalf("%d rows of scrub_pending with the older snapshot open: the scrubs did not copy", pending)
	}
	t.Logf("%d keys live, %d erased, %d partitions", len(live), len(erased), len(parts))
}
