package store

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/testenv"
)

// TestWrapsHaveNoToast: the partitions of data_key_wraps keep the wrapped
// keys in line and have no TOAST table, whose rewrite at every scrub cost
// a relation and an index more: the first one, one created later, and one
// that a store of an earlier version made with a TOAST table, which the
// Open that converts the store rewrites without. The keys read back the
// same throughout.
func TestWrapsHaveNoToast(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Dialect: Postgres, DSN: testenv.Postgres(t)}
	db, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	raw, err := sql.Open("pgx", cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := raw.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var seq string
	if err := raw.QueryRowContext(ctx, `SELECT pg_get_serial_sequence('data_keys', 'id')`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	made := map[string][]byte{} // name: wrapped
	mk := func(bucket int) {
		t.Helper()
		exec(fmt.Sprintf(`SELECT setval('%s', %d)`, seq, bucket*wrapBucket+len(made)+1))
		name := fmt.Sprintf("user-%d", len(made))
		w := []byte(fmt.Sprintf("wrapped-%d-%x", len(made), tok(name)))
		if _, err := db.CreateKey(ctx, keys.Record{Memory: "m", Kind: keys.KindUser, Name: name, Wrapped: w,
			Fingerprint: "fp-" + name, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		made[name] = w
	}
	check := func(when string) {
		t.Helper()
		rows, err := raw.QueryContext(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'data_key_wraps'::regclass AND c.reltoastrelid <> 0`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name string
			rows.Scan(&name)
			t.Errorf("%s: partition %s has a TOAST table", when, name)
		}
		rows.Close()
		for name, w := range made {
			r, err := db.LiveKey(ctx, "m", keys.KindUser, name)
			if err != nil || !bytes.Equal(r.Wrapped, w) {
				t.Errorf("%s: key %s reads %q, %v; want %q", when, name, r.Wrapped, err, w)
			}
		}
	}
	mk(0)
	mk(3) // a partition created after the first
	check("a new store")

	// A store of an earlier version: column storage extended, and a
	// partition made with a TOAST table, holding keys.
	exec(`ALTER TABLE data_key_wraps ALTER COLUMN wrapped SET STORAGE EXTENDED`)
	exec(`CREATE TABLE data_key_wraps_5 (key_id bigint NOT NULL, wrapped bytea NOT NULL, PRIMARY KEY (key_id))`)
	exec(fmt.Sprintf(`ALTER TABLE data_key_wraps ATTACH PARTITION data_key_wraps_5 FOR VALUES FROM (%d) TO (%d)`, 5*wrapBucket, 6*wrapBucket))
	mk(5)
	var toast bool
	if err := raw.QueryRowContext(ctx, `SELECT reltoastrelid <> 0 FROM pg_class WHERE relname = 'data_key_wraps_5'`).Scan(&toast); err != nil || !toast {
		t.Fatalf("the earlier version's partition has no TOAST table (%v): the test shows nothing", err)
	}
	db.Close()
	if db, err = Open(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	check("the Open that converts an earlier store")
	var pending int64
	if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM scrub_pending`).Scan(&pending); err != nil || pending != 0 {
		t.Fatalf("after Open, scrub_pending holds %d rows (%v)", pending, err)
	}
}
