package lethe_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
)

// secrets are distinctive personal values that must never be stored in clear.
var secrets = []string{
	"Zebulon-Quartermaine", "prefers-oolong-7731", "Xanadu-Street-99", "note about Quetzalcoatl-4410",
	"user-Wolfhart-0042", "tag-Persimmon", "meta-Ouroboros",
}

func writeSecrets(t *testing.T, db *lethe.DB) {
	t.Helper()
	ctx := context.Background()
	var batch []lethe.Grain
	for i := range 50 {
		batch = append(batch, lethe.Grain{Type: "fact", Subject: secrets[0], Relation: secrets[1], Object: secrets[2],
			Content: secrets[3] + strings.Repeat(" padding", i), UserID: secrets[4], Scope: "acme/prod",
			Tags: []string{secrets[5]}, Metadata: map[string]string{"k": secrets[6]}})
	}
	hs, err := db.AddBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Supersede(ctx, hs[0], lethe.Grain{Type: "fact", Object: secrets[2] + "-v2"}); err != nil {
		t.Fatal(err)
	}
	// The values are readable through the API...
	p, err := db.Recall(ctx, lethe.Query{Subject: strings.ToUpper(secrets[0]), UserID: secrets[4], Limit: 100})
	if err != nil || p == nil || len(p.Grains) != 50 {
		t.Errorf("recall: %v, %d grains", err, len(p.Grains))
	}
}

// findSecrets reports every secret found in b, in clear, lowercased, or as hex.
func findSecrets(t *testing.T, where string, b []byte) {
	t.Helper()
	lower := bytes.ToLower(b)
	for _, s := range secrets {
		for _, form := range []string{s, strings.ToLower(s), hex.EncodeToString([]byte(s))} {
			if bytes.Contains(b, []byte(form)) || bytes.Contains(lower, []byte(strings.ToLower(form))) {
				t.Errorf("%s holds %q in clear (as %q)", where, s, form)
			}
		}
	}
}

func TestNothingInClearSQLite(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, lethe.Config{DataDir: dir})
	writeSecrets(t, db)
	// Read the files while open (the WAL holds recent pages) and after close.
	check := func(when string) {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) == 0 {
			t.Fatal("no files in the data dir")
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			findSecrets(t, when+" "+filepath.Base(f), b)
		}
	}
	check("open")
	for _, f := range []string{"lethe.db", "lethe.db-wal", "kek.age", "audit.key"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v: readable by others", f, st.Mode().Perm())
		}
	}
	collectLeaves(t, db)
	db.Close()
	check("closed")
}

func TestNothingInClearPostgres(t *testing.T) {
	dsn := testenv.Postgres(t)
	db := openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: dsn})
	writeSecrets(t, db)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if len(tables) < 3 {
		t.Fatalf("found only tables %v", tables)
	}
	for _, tbl := range tables {
		var dump string
		// Each row as text: bytea columns render as hex, which findSecrets checks too.
		err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+pgx.Identifier{tbl}.Sanitize()+` t`).Scan(&dump)
		if err != nil {
			t.Fatal(err)
		}
		findSecrets(t, "table "+tbl, []byte(dump))
	}
}
