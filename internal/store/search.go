package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
)

// TermRow is one posting of the text index: a grain holds the term whose
// blind token is Token TF times, in a document of DL terms. Postings
// reference their grain with ON DELETE CASCADE, so that every path that
// deletes a grain (forget, purge, the risk sweep, the erase cleaner,
// dedup's replacement of an erased row) deletes its postings in the same
// statement: no delete path has to know about them.
type TermRow struct {
	Token   []byte
	GrainID int64
	TF      int
	DL      int
}

// DocRow says what a grain holds for search: Len terms in the text index
// (0: none) and an embedding of Dim dimensions (0: none). Like postings, it
// goes with its grain. It gives the text index its statistics (the number
// and mean length of a memory's documents) and the vector index the grains
// to read at start.
type DocRow struct {
	GrainID int64
	Memory  string
	Len     int
	Dim     int
}

// migrateSearch creates the search tables. They are created by hand, not
// by AutoMigrate, for their foreign keys' ON DELETE CASCADE; SQLite
// enforces them because the store opens it with _foreign_keys=on.
//
// A posting's primary key is (token, grain_id): a term's postings are one
// range of it, read without touching the table (WITHOUT ROWID on SQLite,
// INCLUDE on PostgreSQL). The grain_id index serves the cascade.
func migrateSearch(g *gorm.DB, dialect string) error {
	id := "INTEGER"
	terms := `CREATE TABLE IF NOT EXISTS grain_terms (token BLOB NOT NULL,
		grain_id INTEGER NOT NULL REFERENCES grains (id) ON DELETE CASCADE,
		tf INTEGER NOT NULL, dl INTEGER NOT NULL, PRIMARY KEY (token, grain_id)) WITHOUT ROWID`
	if dialect == Postgres {
		id = "BIGINT"
		terms = `CREATE TABLE IF NOT EXISTS grain_terms (token BYTEA NOT NULL,
			grain_id BIGINT NOT NULL REFERENCES grains (id) ON DELETE CASCADE,
			tf INTEGER NOT NULL, dl INTEGER NOT NULL, PRIMARY KEY (token, grain_id) INCLUDE (tf, dl))`
	}
	for _, stmt := range []string{
		terms,
		`CREATE INDEX IF NOT EXISTS idx_grain_terms_grain ON grain_terms (grain_id)`,
		`CREATE TABLE IF NOT EXISTS grain_docs (grain_id ` + id + ` PRIMARY KEY REFERENCES grains (id) ON DELETE CASCADE,
			memory VARCHAR(64) NOT NULL, len INTEGER NOT NULL, dim INTEGER NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS idx_grain_docs_mem ON grain_docs (memory, grain_id)`,
		`CREATE TABLE IF NOT EXISTS vector_dims (memory VARCHAR(64) PRIMARY KEY, dim INTEGER NOT NULL)`,
	} {
		if err := g.Exec(stmt).Error; err != nil {
			return err
		}
	}
	return nil
}

// searchRows returns the postings and document rows of stored grains
// (their IDs set).
func searchRows(memory string, stored []*GrainRow) ([][]any, [][]any) {
	var terms, docs [][]any
	for _, r := range stored {
		for _, t := range r.Terms {
			terms = append(terms, []any{t.Token, r.ID, t.TF, t.DL})
		}
		if r.DocLen > 0 || r.Dim > 0 {
			docs = append(docs, []any{r.ID, memory, r.DocLen, r.Dim})
		}
	}
	return terms, docs
}

// insertSearch stores the postings and document rows of stored grains in
// tx.
func insertSearch(tx *gorm.DB, memory string, stored []*GrainRow) error {
	terms, docs := searchRows(memory, stored)
	for _, t := range []struct {
		stmt string
		rows [][]any
	}{{"INSERT INTO grain_terms (token, grain_id, tf, dl) VALUES ", terms}, {"INSERT INTO grain_docs (grain_id, memory, len, dim) VALUES ", docs}} {
		for i := 0; i < len(t.rows); i += chunk / 4 {
			part := t.rows[i:min(i+chunk/4, len(t.rows))]
			var b strings.Builder
			b.WriteString(t.stmt)
			args := make([]any, 0, 4*len(part))
			for j, r := range part {
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, ?, ?)")
				args = append(args, r...)
			}
			// Not through gorm's statement building, which splits a token
			// following a parenthesis into one parameter per byte.
			q := (&DB{dialect: tx.Dialector.Name()}).rebind(b.String())
			if _, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, q, args...); err != nil {
				return translate(err, "insert search index")
			}
		}
	}
	return nil
}

// insertSearchPG is insertSearch in a pgx transaction.
func insertSearchPG(ctx context.Context, tx pgx.Tx, memory string, stored []*GrainRow) error {
	terms, docs := searchRows(memory, stored)
	if len(terms) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"grain_terms"}, []string{"token", "grain_id", "tf", "dl"}, pgx.CopyFromRows(terms)); err != nil {
			return err
		}
	}
	if len(docs) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"grain_docs"}, []string{"grain_id", "memory", "len", "dim"}, pgx.CopyFromRows(docs)); err != nil {
			return err
		}
	}
	return nil
}

// Postings returns every posting of the given tokens. Tokens are keyed by
// their scope's key, so a token's postings are all in its memory.
func (db *DB) Postings(ctx context.Context, toks [][]byte) ([]TermRow, error) {
	if db.dialect == SQLite {
		return db.postingsPacked(ctx, toks)
	}
	var out []TermRow
	for i := 0; i < len(toks); i += chunk {
		part := toks[i:min(i+chunk, len(toks))]
		q := "SELECT token, grain_id, tf, dl FROM grain_terms WHERE token IN (?" + strings.Repeat(", ?", len(part)-1) + ")"
		rows, err := db.gorm.ConnPool.QueryContext(ctx, db.rebind(q), anys(part)...)
		if err != nil {
			return nil, translate(err, "read postings")
		}
		for rows.Next() {
			var t TermRow
			if err := rows.Scan(&t.Token, &t.GrainID, &t.TF, &t.DL); err != nil {
				rows.Close()
				return nil, translate(err, "read postings")
			}
			out = append(out, t)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, translate(err, "read postings")
		}
	}
	return out, nil
}

// postingsPacked is Postings on SQLite, where go-sqlite3 costs two or
// three cgo calls per column of every row (see packedColumns): each
// token's postings come as one text of space-separated numbers.
func (db *DB) postingsPacked(ctx context.Context, toks [][]byte) ([]TermRow, error) {
	var out []TermRow
	for i := 0; i < len(toks); i += chunk {
		part := toks[i:min(i+chunk, len(toks))]
		q := "SELECT token, group_concat(grain_id || ' ' || tf || ' ' || dl, ' ') FROM grain_terms WHERE token IN (?" +
			strings.Repeat(", ?", len(part)-1) + ") GROUP BY token"
		rows, err := db.gorm.ConnPool.QueryContext(ctx, q, anys(part)...)
		if err != nil {
			return nil, translate(err, "read postings")
		}
		for rows.Next() {
			var tok []byte
			var packed string
			if err := rows.Scan(&tok, &packed); err != nil {
				rows.Close()
				return nil, translate(err, "read postings")
			}
			f := strings.Fields(packed)
			if len(f)%3 != 0 {
				rows.Close()
				return nil, fmt.Errorf("read postings: %d packed fields", len(f))
			}
			for j := 0; j < len(f); j += 3 {
				id, err1 := strconv.ParseInt(f[j], 10, 64)
				tf, err2 := strconv.Atoi(f[j+1])
				dl, err3 := strconv.Atoi(f[j+2])
				if err := errors.Join(err1, err2, err3); err != nil {
					rows.Close()
					return nil, fmt.Errorf("read postings: %w", err)
				}
				out = append(out, TermRow{Token: tok, GrainID: id, TF: tf, DL: dl})
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, translate(err, "read postings")
		}
	}
	return out, nil
}

// TextStats returns the number of memory's grains in the text index and
// the sum of their lengths.
func (db *DB) TextStats(ctx context.Context, memory string) (docs, total int64, err error) {
	row := db.gorm.ConnPool.QueryRowContext(ctx, db.rebind("SELECT COUNT(*), COALESCE(SUM(len), 0) FROM grain_docs WHERE memory = ? AND len > 0"), memory)
	if err := row.Scan(&docs, &total); err != nil {
		return 0, 0, translate(err, "read text statistics")
	}
	return docs, total, nil
}

// VectorIDs returns the ids of memory's grains that hold an embedding,
// above after (0: all), in id order.
func (db *DB) VectorIDs(ctx context.Context, memory string, after int64) ([]int64, error) {
	rows, err := db.gorm.ConnPool.QueryContext(ctx,
		db.rebind("SELECT grain_id FROM grain_docs WHERE memory = ? AND grain_id > ? AND dim > 0 ORDER BY grain_id"), memory, after)
	if err != nil {
		return nil, translate(err, "read vector ids")
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, translate(err, "read vector ids")
		}
		out = append(out, id)
	}
	return out, translate(rows.Err(), "read vector ids")
}

// FixDimension returns memory's embedding dimension, fixing it at dim if
// it has none yet (the first embedding written fixes it).
func (db *DB) FixDimension(ctx context.Context, memory string, dim int) (int, error) {
	if err := db.gorm.WithContext(ctx).Exec(
		"INSERT INTO vector_dims (memory, dim) VALUES (?, ?) ON CONFLICT (memory) DO NOTHING", memory, dim).Error; err != nil {
		return 0, translate(err, "fix embedding dimension")
	}
	return db.Dimension(ctx, memory)
}

// Dimension returns memory's embedding dimension (0: none fixed yet).
func (db *DB) Dimension(ctx context.Context, memory string) (int, error) {
	var dim int
	err := db.gorm.ConnPool.QueryRowContext(ctx, db.rebind("SELECT dim FROM vector_dims WHERE memory = ?"), memory).Scan(&dim)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	return dim, translate(err, "read embedding dimension")
}

// GrainsByIDs returns the rows among ids (at most chunk of them) that
// match f, with their memory's erase epoch (see foundColumns), in no
// particular order. f's Limit and BeforeID are ignored. With
// f.CheckScopeGen set it fails with ErrStaleScopes as FindGrains does.
func (db *DB) GrainsByIDs(ctx context.Context, f Filter, ids []int64) ([]GrainRow, error) {
	if f.empty() || len(ids) == 0 {
		return nil, nil
	}
	f.Limit, f.BeforeID = 0, 0
	if err := f.resolve(db.gorm.WithContext(ctx)); err != nil {
		return nil, err
	}
	cond, args := db.whereSQL(&f)
	cols := foundColumns
	if db.dialect == SQLite {
		cols = packedColumns
	}
	q := "SELECT " + cols + " FROM grains WHERE id IN (?" + strings.Repeat(", ?", len(ids)-1) + ") AND " + cond
	all := append(append([]any{f.Memory, f.Memory}, anys(ids)...), args...)
	return db.queryFound(ctx, &f, db.rebind(q), all)
}
