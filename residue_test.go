package lethe_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
)

// rawStore reads what lethe wrote, outside lethe: rows through SQL, and
// the bytes that hold them (every file of the data dir, or PostgreSQL's
// heap pages through pageinspect).
type rawStore interface {
	// query runs a one-column query that answers bytes.
	query(t *testing.T, q string, args ...any) [][]byte
	// residue returns where needle (or a window of it) still lies.
	residue(t *testing.T, needle []byte) []string
	// tuples returns where needle lies in a live or dead tuple of table
	// (PostgreSQL; for SQLite the same as residue).
	tuples(t *testing.T, table string, needle []byte) []string
}

// windows are the slices of a secret searched for: a copy of any part of
// it is residue. Age-wrapped keys share their first 32 bytes (the header
// line), so windows start past them.
func windows(b []byte) [][]byte {
	const w = 24
	var out [][]byte
	for i := min(32, len(b)/2); i+w <= len(b); i += w {
		out = append(out, b[i:i+w])
	}
	if len(out) == 0 {
		out = append(out, b)
	}
	return out
}

type sqliteRaw struct{ dir string }

func (s sqliteRaw) query(t *testing.T, q string, args ...any) [][]byte {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(s.dir, "lethe.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return scanBytes(t, db, q, args...)
}

func scanBytes(t *testing.T, db *sql.DB, q string, args ...any) [][]byte {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func (s sqliteRaw) residue(t *testing.T, needle []byte) []string {
	t.Helper()
	var found []string
	err := filepath.Walk(s.dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, w := range windows(needle) {
			if i := bytes.Index(b, w); i >= 0 {
				found = append(found, fmt.Sprintf("%s@%d", filepath.Base(p), i))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func (s sqliteRaw) tuples(t *testing.T, _ string, needle []byte) []string {
	return s.residue(t, needle)
}

type pgRaw struct{ conn *pgx.Conn }

// pgKeys is data_keys as a query reads it on PostgreSQL: the wrapped forms
// live in data_key_wraps, a table partitioned by key id.
const pgKeys = `(SELECT d.id, d.memory, d.kind, d.name, d.fingerprint, d.created_us, d.destroyed_us,
	COALESCE(w.wrapped, d.wrapped) AS wrapped FROM data_keys d LEFT JOIN data_key_wraps w ON w.key_id = d.id) data_keys`

func (p pgRaw) query(t *testing.T, q string, args ...any) [][]byte {
	t.Helper()
	return p.direct(t, strings.ReplaceAll(q, "FROM data_keys ", "FROM "+pgKeys+" "), args...)
}

// direct is query without the rewrite of data_keys.
func (p pgRaw) direct(t *testing.T, q string, args ...any) [][]byte {
	t.Helper()
	q = pgPlaceholders(q)
	rows, err := p.conn.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func pgPlaceholders(q string) string {
	n := 0
	var sb strings.Builder
	for _, c := range q {
		if c == '?' {
			n++
			fmt.Fprintf(&sb, "$%d", n)
			continue
		}
		sb.WriteRune(c)
	}
	return sb.String()
}

// pages returns every heap page of table (its main fork), raw.
func (p pgRaw) pages(t *testing.T, table string) [][]byte {
	t.Helper()
	return p.query(t, `SELECT get_raw_page('`+table+`', 'main', b::int) FROM generate_series(0, pg_relation_size('`+table+`') / current_setting('block_size')::int - 1) b`)
}

// keyTables are the tables that hold keys: data_keys and the partitions
// of data_key_wraps.
func (p pgRaw) keyTables(t *testing.T) []string {
	t.Helper()
	out := []string{"data_keys"}
	for _, b := range p.query(t, `SELECT inhrelid::regclass::text::bytea FROM pg_inherits WHERE inhparent = 'data_key_wraps'::regclass ORDER BY 1`) {
		out = append(out, string(b))
	}
	if len(out) == 1 {
		t.Fatal("data_key_wraps has no partition")
	}
	return out
}

func (p pgRaw) residue(t *testing.T, needle []byte) []string {
	t.Helper()
	var found []string
	for _, table := range append(p.keyTables(t), "grains", "grain_tags", "audit_events") {
		for i, page := range p.pages(t, table) {
			for _, w := range windows(needle) {
				if bytes.Contains(page, w) {
					found = append(found, fmt.Sprintf("%s page %d", table, i))
					break
				}
			}
		}
	}
	return found
}

func (p pgRaw) tuples(t *testing.T, table string, needle []byte) []string {
	t.Helper()
	tables := []string{table}
	if table == "data_keys" {
		tables = p.keyTables(t)
	}
	var found []string
	for _, table := range tables {
		rows := p.query(t, `SELECT t_data FROM generate_series(0, pg_relation_size('`+table+`') / current_setting('block_size')::int - 1) b,
			LATERAL heap_page_items(get_raw_page('`+table+`', 'main', b::int)) WHERE t_data IS NOT NULL`)
		for i, d := range rows {
			for _, w := range windows(needle) {
				if bytes.Contains(d, w) {
					found = append(found, fmt.Sprintf("%s tuple %d", table, i))
					break
				}
			}
		}
	}
	return found
}

// TestNoResidueAfterErasure erases a user, a scope and a memory and forgets
// a grain by hash, and after each searches the bytes the database keeps
// (SQLite: every file of the data dir, open; PostgreSQL: the heap pages of
// the keys and grain tables) for the destroyed wrapped keys and the
// forgotten sealed row, whole or in part.
func TestNoResidueAfterErasure(t *testing.T) {
	withRawStores(t, func(t *testing.T, cfg lethe.Config, raw rawStore) {
		testNoResidue(t, openDB(t, cfg), raw)
	})
}

func testNoResidue(t *testing.T, db *lethe.DB, raw rawStore) {
	ctx := context.Background()
	var hashes []string
	for _, m := range []string{"res", "res2"} {
		var batch []lethe.Grain
		for i := range 60 {
			batch = append(batch, lethe.Grain{Memory: m, Type: "fact", Subject: fmt.Sprintf("s%d", i), Relation: "r",
				Object: fmt.Sprintf("o%d", i), UserID: fmt.Sprintf("u%d", i%4), Scope: []string{"acme/prod", "acme/dev", "other"}[i%3]})
		}
		hs, err := db.AddBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, hs...)
	}
	wrapped := func(memory, kind, name string) []byte {
		t.Helper()
		var got [][]byte
		if name == "?user" {
			got = raw.query(t, `SELECT wrapped FROM data_keys WHERE memory = ? AND kind = 'user' AND destroyed_us = 0 ORDER BY id`, memory)
		} else {
			got = raw.query(t, `SELECT wrapped FROM data_keys WHERE memory = ? AND kind = ? AND name = ? AND destroyed_us = 0`, memory, kind, name)
		}
		if len(got) == 0 || len(got[0]) < 64 {
			t.Fatalf("no live %s key %q in %s", kind, name, memory)
		}
		return got[0]
	}
	mustNot := func(what string, secret []byte) {
		t.Helper()
		if where := raw.residue(t, secret); len(where) > 0 {
			t.Errorf("%s: residue in %v", what, where)
		}
	}
	// The check finds what it looks for: a live key is found.
	live := wrapped("res", "memory", "")
	if where := raw.residue(t, live); len(where) == 0 {
		t.Fatal("the live memory key is not found in the raw bytes: the search is blind")
	}

	// Forget by hash: the sealed row leaves no copy.
	blobs := raw.query(t, `SELECT blob FROM grains WHERE hash = ?`, hashes[0])
	if len(blobs) != 1 {
		t.Fatalf("blob of %s: %d rows", hashes[0], len(blobs))
	}
	if fr, err := db.Forget(ctx, lethe.Selector{Memory: "res", Hash: hashes[0]}); err != nil || fr.Count == 0 {
		t.Fatalf("forget: %v, %v", fr, err)
	}
	// PostgreSQL vacuums the grain table in the background after a forget:
	// wait for the tuple to leave the heap.
	if where := afterScrub(raw, func() []string { return raw.tuples(t, "grains", blobs[0]) }); len(where) > 0 {
		t.Errorf("forgotten sealed row: residue in %v", where)
	}

	// Erase a user: the user's wrapped key leaves no copy.
	users := raw.query(t, `SELECT wrapped FROM data_keys WHERE memory = 'res' AND kind = 'user' AND destroyed_us = 0 ORDER BY id`)
	if len(users) != 4 {
		t.Fatalf("%d user keys, want 4", len(users))
	}
	refs := raw.query(t, `SELECT name FROM data_keys WHERE memory = 'res' AND kind = 'user' AND destroyed_us = 0 ORDER BY id`)
	if where := raw.residue(t, refs[0]); len(where) == 0 {
		t.Fatal("a live user key's name is not found in the raw bytes: the search is blind")
	}
	if _, err := db.ForgetUser(ctx, "res", "u1"); err != nil {
		t.Fatal(err)
	}
	destroyed := 0
	var erasedRef []byte
	for i, w := range users {
		if len(raw.query(t, `SELECT wrapped FROM data_keys WHERE wrapped = ?`, w)) == 0 {
			destroyed++
			mustNot("erased user key", w)
			// The key's name is the user's blind reference: a reader of the
			// files could see the user come back, or, with the memory key,
			// test guessed user ids against it.
			if where := nameResidue(t, raw, refs[i]); len(where) > 0 {
				t.Errorf("erased user's reference: residue in %v", where)
			}
			erasedRef = refs[i]
		}
	}
	if destroyed != 1 {
		t.Fatalf("%d user keys destroyed, want 1", destroyed)
	}
	// The same user written again: a new key, and nothing in data_keys
	// links it to the destroyed one.
	if _, err := db.Add(ctx, lethe.Grain{Memory: "res", Type: "fact", Subject: "back", Relation: "r", Object: "again", UserID: "u1", Scope: "other"}); err != nil {
		t.Fatal(err)
	}
	if n := len(raw.query(t, `SELECT name FROM data_keys WHERE memory = 'res' AND kind = 'user' AND name = ?`, string(erasedRef))); n != 1 {
		t.Errorf("%d user keys named by the returning user's reference, want 1 (the live one)", n)
	}

	// Erase a scope: its key and the keys below it leave no copy.
	acme, prod := wrapped("res", "scope", "acme"), wrapped("res", "scope", "acme/prod")
	other := wrapped("res", "scope", "other")
	if _, err := db.EraseScope(ctx, "res", "acme"); err != nil {
		t.Fatal(err)
	}
	mustNot("erased scope key acme", acme)
	mustNot("erased scope key acme/prod", prod)
	if len(raw.residue(t, other)) == 0 {
		t.Error("the live scope key 'other' is gone too")
	}

	// Erase a memory.
	mk := wrapped("res2", "memory", "")
	sk := wrapped("res2", "scope", "other")
	refs2 := raw.query(t, `SELECT name FROM data_keys WHERE memory = 'res2' AND kind = 'user' AND destroyed_us = 0 ORDER BY id`)
	if len(refs2) != 4 {
		t.Fatalf("%d user keys in res2, want 4", len(refs2))
	}
	if _, err := db.EraseMemory(ctx, "res2"); err != nil {
		t.Fatal(err)
	}
	mustNot("erased memory key", mk)
	mustNot("scope key of an erased memory", sk)
	for _, ref := range refs2 {
		if where := nameResidue(t, raw, ref); len(where) > 0 {
			t.Errorf("reference of a user of an erased memory: residue in %v", where)
		}
	}
}

// nameResidue returns where a destroyed user key's old name, ref, still
// lies once its scrub is done: on SQLite anywhere in the files, at once;
// on PostgreSQL in a tuple of data_keys, live or dead, waiting up to 30 s
// for the background VACUUM an erase starts (the pruned tuple's bytes may
// stay in the page's free space: docs/compliance/erasure.md).
func nameResidue(t *testing.T, raw rawStore, ref []byte) []string {
	t.Helper()
	return afterScrub(raw, func() []string { return raw.tuples(t, "data_keys", ref) })
}

// afterScrub returns what find finds once the scrub of a change that
// returned is done: on SQLite at once (the scrub ran before the call
// returned); on PostgreSQL, whose VACUUM runs in the background, what it
// finds first empty within 30 s, or last.
func afterScrub(raw rawStore, find func() []string) []string {
	deadline := time.Now()
	if _, ok := raw.(pgRaw); ok {
		deadline = deadline.Add(30 * time.Second)
	}
	for {
		where := find()
		if len(where) == 0 || time.Now().After(deadline) {
			return where
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKeyWrapsMigration opens a PostgreSQL store laid out as before the
// wrapped keys left data_keys (wrapped forms in data_keys.wrapped, no
// data_key_wraps) and checks that it opens, moves them out, scrubs the old
// copies from data_keys, and keeps working: recalls decrypt, a rotation
// rewraps, an erase leaves no residue. A key whose wrapped form is still in
// data_keys after the move (as an instance of the earlier version would
// write it) is read and, erased, scrubbed from data_keys.
func TestKeyWrapsMigration(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := lethe.Config{DataDir: dir, PostgresDSN: testenv.Postgres(t)}
	conn, err := pgx.Connect(ctx, cfg.PostgresDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE EXTENSION IF NOT EXISTS pageinspect`)
	raw := pgRaw{conn: conn}
	users := []string{"ann", "bob", "cid", "dan"}
	add := func(db *lethe.DB, tag string) {
		t.Helper()
		var batch []lethe.Grain
		for i, u := range users {
			batch = append(batch, lethe.Grain{Type: "fact", Subject: u, Relation: "r", Object: tag + fmt.Sprint(i), UserID: u, Scope: "acme"})
		}
		if _, err := db.AddBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	recall := func(db *lethe.DB, u string) int {
		t.Helper()
		p, err := db.Recall(ctx, lethe.Query{UserID: u})
		if err != nil {
			t.Fatalf("recall %s: %v", u, err)
		}
		return len(p.Grains)
	}

	old, err := lethe.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	add(old, "before")
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	// The layout before: the wrapped forms in data_keys, no data_key_wraps.
	exec(`UPDATE data_keys d SET wrapped = w.wrapped FROM data_key_wraps w WHERE w.key_id = d.id`)
	exec(`DROP TABLE data_key_wraps`)
	direct := pgRaw{conn: conn}.direct
	inline := direct(t, `SELECT wrapped FROM data_keys WHERE kind = 'user' AND destroyed_us = 0 ORDER BY id`)
	if len(inline) != len(users) {
		t.Fatalf("%d inline user keys, want %d", len(inline), len(users))
	}

	db := openDB(t, cfg)
	if n := len(direct(t, `SELECT wrapped FROM data_keys WHERE wrapped IS NOT NULL`)); n != 0 {
		t.Fatalf("%d wrapped keys left in data_keys", n)
	}
	for _, w := range inline {
		if where := raw.tuples(t, "data_keys", w); len(where) != 1 || !strings.HasPrefix(where[0], "data_key_wraps_") {
			t.Errorf("a moved key lies in %v, want one tuple of a data_key_wraps partition", where)
		}
	}
	for _, u := range users {
		if n := recall(db, u); n != 1 {
			t.Fatalf("recall %s after the migration: %d grains, want 1", u, n)
		}
	}
	add(db, "after")
	rot, err := db.RotateKEK(ctx, lethe.RotateOptions{Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rot.Rewrapped == 0 {
		t.Fatalf("rotation rewrapped no key: %+v", rot)
	}

	// Erase a user whose key moved: no residue anywhere.
	userKeys := func() [][]byte {
		return raw.query(t, `SELECT wrapped FROM data_keys WHERE kind = 'user' AND destroyed_us = 0 ORDER BY id`)
	}
	before := userKeys()
	if _, err := db.ForgetUser(ctx, "", "ann"); err != nil {
		t.Fatal(err)
	}
	if n := recall(db, "ann"); n != 0 {
		t.Fatalf("ann recalled %d grains after her erasure", n)
	}
	after := userKeys()
	if len(after) != len(before)-1 {
		t.Fatalf("%d live user keys after an erasure, want %d", len(after), len(before)-1)
	}
	for _, w := range before {
		if !slices.ContainsFunc(after, func(a []byte) bool { return bytes.Equal(a, w) }) {
			if where := raw.residue(t, w); len(where) > 0 {
				t.Errorf("erased key: residue in %v", where)
			}
		}
	}

	// A key written the earlier way after the migration (an instance of
	// the earlier version): read by an instance that has not cached it,
	// then erased and scrubbed from data_keys.
	db2 := openDB(t, cfg)
	var bobKey int64
	var bobWrapped []byte
	for _, w := range after {
		var id int64
		if err := conn.QueryRow(ctx, `SELECT key_id FROM data_key_wraps WHERE wrapped = $1`, w).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if bobKey == 0 || id < bobKey {
			bobKey, bobWrapped = id, w
		}
	}
	exec(`UPDATE data_keys SET wrapped = $1 WHERE id = $2`, bobWrapped, bobKey)
	exec(`DELETE FROM data_key_wraps WHERE key_id = $1`, bobKey)
	n := 0
	for _, u := range users[1:] {
		n += recall(db2, u)
	}
	if n != 6 {
		t.Fatalf("bob, cid and dan recalled %d grains with one key inline, want 6", n)
	}
	erased := ""
	for _, u := range users[1:] {
		// Erase users until the inline key is destroyed.
		if _, err := db2.ForgetUser(ctx, "", u); err != nil {
			t.Fatal(err)
		}
		var destroyed int64
		if err := conn.QueryRow(ctx, `SELECT destroyed_us FROM data_keys WHERE id = $1`, bobKey).Scan(&destroyed); err != nil {
			t.Fatal(err)
		}
		if destroyed != 0 {
			erased = u
			break
		}
	}
	if erased == "" {
		t.Fatal("no erasure destroyed the inline key")
	}
	if where := raw.residue(t, bobWrapped); len(where) > 0 {
		t.Errorf("erased inline key: residue in %v", where)
	}
}

// TestNoResidueAfterCleaner erases a user, has the cleaner delete the
// user's rows (PurgeErased, the background cleaner paused), and searches
// the bytes the database keeps while it is still open for the deleted
// rows' sealed blobs and the user's blind reference they carried (SQLite:
// every file of the data dir; PostgreSQL: the tuples of the grain table,
// after the background scrub a forget gets too).
func TestNoResidueAfterCleaner(t *testing.T) {
	withRawStores(t, func(t *testing.T, cfg lethe.Config, raw rawStore) {
		db := openDB(t, cfg)
		db.PauseCleaner()
		testNoCleanerResidue(t, db, raw)
	})
}

// withRawStores runs test on an embedded store and on a PostgreSQL one,
// each with the rawStore that reads its bytes.
func withRawStores(t *testing.T, test func(t *testing.T, cfg lethe.Config, raw rawStore)) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			dir := t.TempDir()
			cfg := lethe.Config{DataDir: dir}
			var raw rawStore = sqliteRaw{dir: dir}
			if b == "postgres" {
				cfg.PostgresDSN = testenv.Postgres(t)
				raw = pgResidue(t, cfg.PostgresDSN)
			}
			test(t, cfg, raw)
		})
	}
}

func testNoCleanerResidue(t *testing.T, db *lethe.DB, raw rawStore) {
	ctx := context.Background()
	const m = "cleaned"
	add := func(user string) []string {
		t.Helper()
		var batch []lethe.Grain
		for i := range 5 {
			batch = append(batch, lethe.Grain{Memory: m, Type: "fact", Subject: fmt.Sprintf("s%d", i), Relation: "r",
				Object: fmt.Sprintf("%s-%d", user, i), UserID: user, Scope: "acme"})
		}
		hs, err := db.AddBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	erased, kept := add("erased-user"), add("kept-user")
	one := func(q, hash string) []byte {
		t.Helper()
		got := raw.query(t, q, hash)
		if len(got) != 1 || len(got[0]) < 16 {
			t.Fatalf("%s %s: %d rows", q, hash, len(got))
		}
		return got[0]
	}
	var blobs [][]byte
	for _, h := range erased {
		blobs = append(blobs, one(`SELECT blob FROM grains WHERE hash = ?`, h))
	}
	ref := one(`SELECT user_ref FROM grains WHERE hash = ?`, erased[0])
	keptBlob := one(`SELECT blob FROM grains WHERE hash = ?`, kept[0])
	if len(raw.tuples(t, "grains", blobs[0])) == 0 || len(raw.tuples(t, "grains", ref)) == 0 {
		t.Fatal("a live sealed row or user ref is not found in the raw bytes: the search is blind")
	}
	if _, err := db.ForgetUser(ctx, m, "erased-user"); err != nil {
		t.Fatal(err)
	}
	if n, err := db.PurgeErased(ctx); err != nil || n != len(erased) {
		t.Fatalf("PurgeErased: %d rows, %v; want %d", n, err, len(erased))
	}
	// SQLite: gone when PurgeErased returns. PostgreSQL vacuums the grain
	// tables in the background, as after a forget: wait for the tuples to
	// leave the heap.
	where := afterScrub(raw, func() []string {
		var where []string
		for _, b := range append(blobs, ref) {
			where = append(where, raw.tuples(t, "grains", b)...)
		}
		return where
	})
	if len(where) > 0 {
		t.Errorf("rows the cleaner deleted: residue in %v", where)
	}
	if len(raw.tuples(t, "grains", keptBlob)) == 0 {
		t.Error("the other user's live row is gone too")
	}
}

// TestDestroyedNamesMigrate opens a store where a destroyed user key still
// has its name, the user's blind reference (as an earlier version left
// it), and checks that opening renames it and scrubs the name's bytes.
func TestDestroyedNamesMigrate(t *testing.T) {
	withRawStores(t, func(t *testing.T, cfg lethe.Config, raw rawStore) {
		ctx := context.Background()
		exec := func(q string, args ...any) {
			t.Helper()
			if p, ok := raw.(pgRaw); ok {
				if _, err := p.conn.Exec(ctx, pgPlaceholders(q), args...); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				return
			}
			db, err := sql.Open("sqlite3", "file:"+filepath.Join(cfg.DataDir, "lethe.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec(q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		db, err := lethe.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Add(ctx, lethe.Grain{Memory: "mig", Type: "fact", Subject: "s", Relation: "r", Object: "o", UserID: "gone"}); err != nil {
			t.Fatal(err)
		}
		names := raw.query(t, `SELECT name FROM data_keys WHERE memory = 'mig' AND kind = 'user' AND destroyed_us = 0`)
		if len(names) != 1 {
			t.Fatalf("%d user keys, want 1", len(names))
		}
		if _, err := db.ForgetUser(ctx, "mig", "gone"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.PurgeErased(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		// The layout before: the destroyed key keeps its name.
		exec(`UPDATE data_keys SET name = ? WHERE memory = 'mig' AND kind = 'user'`, string(names[0]))
		if len(raw.residue(t, names[0])) == 0 {
			t.Fatal("the name put back is not found in the raw bytes: the search is blind")
		}
		openDB(t, cfg)
		if where := nameResidue(t, raw, names[0]); len(where) > 0 {
			t.Errorf("a destroyed key's name after the migration: residue in %v", where)
		}
		if left := namesMarked(t, raw); len(left) > 0 {
			t.Errorf("after the migration's VACUUM, scrub_names keeps %v", left)
		}
		if got := raw.query(t, `SELECT name FROM data_keys WHERE memory = 'mig' AND kind = 'user'`); len(got) != 1 || !strings.HasPrefix(string(got[0]), "erased-") {
			t.Errorf("the destroyed key's name after the migration: %q", got)
		}
	})
}
