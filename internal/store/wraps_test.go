package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
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

// TestKeyReadsLockTheirPartitionOnly: every read of keys with their
// wrapped forms, and a user's erasure, opens only the partitions of
// data_key_wraps that hold those keys: with another partition locked as a
// scrub's rewrite locks it (ACCESS EXCLUSIVE, in an open transaction),
// each finishes. A read planned over the whole table (the rows' statement
// joined to data_key_wraps) waits for that lock, and so for every rewrite
// of any partition, and holds a lock on every partition and its index.
func TestKeyReadsLockTheirPartitionOnly(t *testing.T) {
	ctx := context.Background()
	cfg := Config{Dialect: Postgres, DSN: testenv.Postgres(t)}
	db, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := newFixture(t, db, 3) // memory, scope and users in partition 0
	raw, err := sql.Open("pgx", cfg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// A key in partition 3, whose partition the other transaction locks.
	var seq string
	if err := raw.QueryRowContext(ctx, `SELECT pg_get_serial_sequence('data_keys', 'id')`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.ExecContext(ctx, fmt.Sprintf(`SELECT setval('%s', %d)`, seq, 3*wrapBucket+1)); err != nil {
		t.Fatal(err)
	}
	far := newKey(t, db, f.memory, keys.KindUser, "far")
	if wrapPart(far.ID) != "data_key_wraps_3" {
		t.Fatalf("key %d is in %s, want data_key_wraps_3", far.ID, wrapPart(far.ID))
	}
	lock, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.ExecContext(ctx, `LOCK TABLE data_key_wraps_3 IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// Each read gets 10 s; one that waits for the lock fails with the
	// context's deadline (the lock is never released before the end).
	read := func(name string, fn func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := fn(ctx); err != nil {
			t.Errorf("%s with another partition locked: %v", name, err)
		}
	}
	u := f.users[0]
	read("LiveKey", func(ctx context.Context) error {
		r, err := db.LiveKey(ctx, f.memory, keys.KindUser, u.Name)
		if err == nil && string(r.Wrapped) != "wrapped" {
			err = fmt.Errorf("wrapped form %q", r.Wrapped)
		}
		return err
	})
	read("LiveKeys", func(ctx context.Context) error {
		rs, err := db.LiveKeys(ctx, f.memory, keys.KindUser, []string{u.Name, f.users[1].Name, "nobody"})
		if err == nil && (len(rs) != 2 || string(rs[0].Wrapped) != "wrapped" || string(rs[1].Wrapped) != "wrapped") {
			err = fmt.Errorf("read %+v", rs)
		}
		return err
	})
	read("KeysByID", func(ctx context.Context) error {
		rs, err := db.KeysByID(ctx, []int64{u.ID})
		if err == nil && (len(rs) != 1 || string(rs[0].Wrapped) != "wrapped") {
			err = fmt.Errorf("read %+v", rs)
		}
		return err
	})
	read("ScopeKeys", func(ctx context.Context) error {
		rs, err := db.ScopeKeys(ctx, f.memory, "")
		if err == nil && (len(rs) != 1 || string(rs[0].Wrapped) != "wrapped") {
			err = fmt.Errorf("read %+v", rs)
		}
		return err
	})
	read("LiveKeyPage", func(ctx context.Context) error {
		rs, err := db.LiveKeyPage(ctx, 0, 3)
		if err == nil && len(rs) != 3 {
			err = fmt.Errorf("read %d keys", len(rs))
		}
		return err
	})
	erase := func(spec EraseSpec) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			spec.Memory, spec.Now, spec.DeferScrub = f.memory, 1, true
			er, err := db.EraseKey(ctx, spec, func(context.Context, *Erasure) ([]Event, error) { return nil, nil })
			if err == nil && (len(er.Destroyed) == 0 || string(er.Destroyed[0].Wrapped) != "wrapped") {
				err = fmt.Errorf("erased %+v", er.Destroyed)
			}
			return err
		}
	}
	ref, _ := hex.DecodeString(u.Name)
	read("a user's erasure", erase(EraseSpec{Kind: keys.KindUser, Name: u.Name, UserRef: ref}))
	read("a scope's erasure", erase(EraseSpec{Kind: keys.KindScope, Name: "acme"}))
	lock.Rollback()
	// The key in the locked partition reads as it did.
	r, err := db.LiveKey(ctx, f.memory, keys.KindUser, "far")
	if err != nil || string(r.Wrapped) != "wrapped" {
		t.Fatalf("the key in data_key_wraps_3 reads %q, %v", r.Wrapped, err)
	}
}

// withWraps fills in the live keys' wrapped forms by id, in chunks, keeps
// destroyed keys and an earlier version's rows (wrapped form in
// data_keys) as they are, and leaves out a live key whose wrapped form the
// read no longer finds (an erase committed between the two reads).
func TestWithWraps(t *testing.T) {
	var rows []KeyRow
	for id := range int64(chunk + 10) {
		rows = append(rows, KeyRow{ID: id + 1})
	}
	rows[3].DestroyedUS = 7            // destroyed: no wrapped form
	rows[5].Wrapped = []byte("legacy") // an earlier version's row
	var asked [][]int64
	out, err := withWraps(rows, func(ids []int64) ([]wrapRow, error) {
		asked = append(asked, ids)
		var ws []wrapRow
		for _, id := range ids {
			if id != 9 { // key 9 erased between the reads
				ws = append(ws, wrapRow{KeyID: id, Wrapped: []byte(fmt.Sprint("w", id))})
			}
		}
		return ws, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, a := range asked {
		sizes = append(sizes, len(a))
	}
	if want := []int{chunk, len(rows) - 2 - chunk}; !slices.Equal(sizes, want) {
		t.Errorf("read in chunks of %v ids, want %v", sizes, want)
	}
	for _, a := range asked {
		for _, id := range a {
			if id == 4 || id == 6 {
				t.Errorf("asked for the wrapped form of key %d, which has none to read", id)
			}
		}
	}
	if len(out) != len(rows)-1 {
		t.Fatalf("%d keys out of %d, want all but the one erased between the reads", len(out), len(rows))
	}
	for _, r := range out {
		var want string
		switch r.ID {
		case 9:
			t.Errorf("key 9, erased between the reads, is in the answer")
		case 4:
		case 6:
			want = "legacy"
		default:
			want = fmt.Sprint("w", r.ID)
		}
		if string(r.Wrapped) != want {
			t.Errorf("key %d: wrapped %q, want %q", r.ID, r.Wrapped, want)
		}
	}
}
