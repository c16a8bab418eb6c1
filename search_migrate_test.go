package lethe_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/search"
)

// TestSearchMigratesTermRows turns a SQLite store's text index back into
// the layout of one row per posting (grain_terms, and grain_docs without
// block and toks), reopens it, and checks that the migration brought every
// posting back into blocks: the same searches find the same grains, grain_terms is gone, and forgetting a grain still drops it
// from the index (its token list was rebuilt).
func TestSearchMigratesTermRows(t *testing.T) {
	ctx := context.Background()
	cfg := lethe.Config{DataDir: t.TempDir()}
	db := openDB(t, cfg)
	contents := []string{"penicillin allergy", "allergy to peanuts", "tea with penicillin", "tea and cake", "cake"}
	var hashes []string
	for i, c := range contents {
		hashes = append(hashes, mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s" + string(rune('a'+i)), Content: c}))
	}
	queries := []string{"penicillin", "allergy", "tea cake", "peanuts penicillin"}
	want := map[string][]string{}
	for _, q := range queries {
		want[q] = searchHashes(t, db, lethe.Query{Text: q})
		if len(want[q]) == 0 {
			t.Fatalf("%q found nothing before the migration", q)
		}
	}
	db.Close()

	conn, err := sql.Open("sqlite3", "file:"+filepath.Join(cfg.DataDir, "lethe.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE grain_terms (token BLOB NOT NULL, grain_id INTEGER NOT NULL REFERENCES grains (id) ON DELETE CASCADE,
		tf INTEGER NOT NULL, dl INTEGER NOT NULL, PRIMARY KEY (token, grain_id))`)
	var terms [][]any
	for _, rb := range rawBlocks(t, "sqlite", func(q string) [][]byte { return sqliteRaw{dir: cfg.DataDir}.query(t, q) }) {
		tok := rb.token
		b, err := search.DecodeBlock(tok, rb.posts)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := b.Postings(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			terms = append(terms, []any{tok, p.ID, p.TF, p.DL})
		}
	}
	if len(terms) < 10 {
		t.Fatalf("%d postings, want one per distinct word of each grain", len(terms))
	}
	for _, r := range terms {
		exec("INSERT INTO grain_terms (token, grain_id, tf, dl) VALUES (?, ?, ?, ?)", r...)
	}
	exec("DROP TABLE grain_postings")
	exec("DROP TABLE posting_segments") // the old layout had no tail either
	exec("DROP TABLE posting_mid")
	exec("ALTER TABLE grain_docs DROP COLUMN block")
	exec("ALTER TABLE grain_docs DROP COLUMN toks")
	conn.Close()

	db = openDB(t, cfg)
	for _, q := range queries {
		// As sets: equal scores are ordered by retrieval statistics, which
		// the searches before change.
		if got := searchHashes(t, db, lethe.Query{Text: q}); !slices.Equal(sorted(got), sorted(want[q])) {
			t.Errorf("%q after the migration = %v, want %v", q, short8(got), short8(want[q]))
		}
	}
	conn, err = sql.Open("sqlite3", "file:"+filepath.Join(cfg.DataDir, "lethe.db")+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n int
	if err := conn.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE name = 'grain_terms'").Scan(&n); err != nil || n != 0 {
		t.Errorf("grain_terms left after the migration (%d, %v)", n, err)
	}
	if _, err := db.Forget(ctx, lethe.Selector{Hash: hashes[0]}); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	var posts int
	if err := conn.QueryRow("SELECT COUNT(*) FROM grain_postings").Scan(&posts); err != nil {
		t.Fatal(err)
	}
	if posts == 0 || posts >= len(terms) {
		t.Errorf("%d postings blocks after forgetting one grain of %d postings", posts, len(terms))
	}
	if got := searchHashes(t, db, lethe.Query{Text: "penicillin"}); slices.Contains(got, hashes[0]) || len(got) != 1 {
		t.Errorf("penicillin after forgetting %s = %v", hashes[0][:8], short8(got))
	}
}
