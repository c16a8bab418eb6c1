package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/search"
)

// TermRow is one term of a grain for the text index: the term's blind
// token, its count TF in the grain and the grain's length DL in terms.
// GrainID is unset when written.
type TermRow struct {
	Token   []byte
	GrainID int64
	TF      int
	DL      int
}

// DocRow says what a grain holds for search: Len terms in the text index
// (0: none) and an embedding of Dim dimensions (0: none), and where its
// postings are: in the blocks of its tokens Toks (each a byte of length
// then the token) keyed by Block. It references its grain ON DELETE
// CASCADE. It gives the text index its statistics (the number and mean
// length of a memory's documents), the vector index the grains to read at
// start, and removePostings the blocks to rewrite.
type DocRow struct {
	GrainID int64
	Memory  string
	Len     int
	Dim     int
	Block   int64
	Toks    []byte
}

// migrateSearch creates the search tables. They are created by hand, not
// by AutoMigrate, for grain_docs' ON DELETE CASCADE; SQLite enforces it
// because the store opens it with _foreign_keys=on.
//
// Postings are grouped: grain_postings holds one row per (token, block),
// a block being the postings of one token in the grains of one insert
// (keyed by its first grain id), or on SQLite of several inserts merged
// (keyed by the first insert's), packed (search.EncodeBlock). A batch of
// 1,000 grains of 12 terms costs a few thousand index rows instead of
// 12,000 rows and 12,000 entries of a grain_id index, as one row per
// posting did. A term's blocks are one range of the primary key. Rows
// cannot cascade from grains: every path that deletes grains calls
// removePostings first, in its transaction (see deleteIDs).
func migrateSearch(g *gorm.DB, dialect string) error {
	id, blob := "INTEGER", "BLOB"
	postings := `CREATE TABLE IF NOT EXISTS grain_postings (token BLOB NOT NULL, block INTEGER NOT NULL,
		posts BLOB NOT NULL, PRIMARY KEY (token, block)) WITHOUT ROWID`
	if dialect == Postgres {
		id, blob = "BIGINT", "BYTEA"
		postings = `CREATE TABLE IF NOT EXISTS grain_postings (token BYTEA NOT NULL, block BIGINT NOT NULL,
			posts BYTEA NOT NULL, PRIMARY KEY (token, block))`
	}
	stmts := []string{
		postings,
		`CREATE TABLE IF NOT EXISTS grain_docs (grain_id ` + id + ` PRIMARY KEY REFERENCES grains (id) ON DELETE CASCADE,
			memory VARCHAR(64) NOT NULL, len INTEGER NOT NULL, dim INTEGER NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS vector_dims (memory VARCHAR(64) PRIMARY KEY, dim INTEGER NOT NULL)`,
	}
	if dialect == Postgres {
		// The token lists of deleted grains whose postings are still to
		// remove (see removePostings).
		stmts = append(stmts, `CREATE TABLE IF NOT EXISTS posting_garbage (grain_id BIGINT PRIMARY KEY, block BIGINT NOT NULL, toks BYTEA NOT NULL)`)
	} else {
		// The text index's tail (see insertSearch): the segments of the
		// last inserts, one row each (ver changes with every write of the
		// row, for the readers' cache; n is its number of blocks), and the
		// blocks merged from them.
		stmts = append(stmts,
			`CREATE TABLE IF NOT EXISTS posting_segments (block INTEGER PRIMARY KEY, ver INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL)`,
			strings.Replace(postings, "grain_postings", "posting_mid", 1))
	}
	for _, stmt := range stmts {
		if err := g.Exec(stmt).Error; err != nil {
			return err
		}
	}
	if dialect != Postgres && g.Migrator().HasTable("posting_tail") {
		// The tail's first level was a table of blocks (token, block), as
		// posting_mid is: its blocks move there, keys unchanged.
		if err := g.Transaction(func(tx *gorm.DB) error {
			if _, err := mergePostings(tx, "posting_tail", "posting_mid"); err != nil {
				return err
			}
			return tx.Exec("DROP TABLE posting_tail").Error
		}); err != nil {
			return err
		}
	}
	m := g.Migrator()
	for col, typ := range map[string]string{"block": id + " NOT NULL DEFAULT 0", "toks": blob} {
		if !m.HasColumn("grain_docs", col) {
			if err := g.Exec("ALTER TABLE grain_docs ADD COLUMN " + col + " " + typ).Error; err != nil {
				return err
			}
		}
	}
	// The statistics and the vector ids are read from this index alone,
	// not from the rows, which carry the token lists.
	for _, stmt := range []string{
		`CREATE INDEX IF NOT EXISTS idx_grain_docs_cover ON grain_docs (memory, grain_id, len, dim)`,
		`DROP INDEX IF EXISTS idx_grain_docs_mem`,
	} {
		if err := g.Exec(stmt).Error; err != nil {
			return err
		}
	}
	if m.HasTable("grain_terms") {
		return migrateTerms(g)
	}
	return nil
}

// migrateTerms moves the postings of a store written with one row per
// posting (grain_terms) into blocks, one per grain, and drops the old
// table.
func migrateTerms(g *gorm.DB) error {
	return g.Transaction(func(tx *gorm.DB) error {
		rows, err := tx.Raw("SELECT token, grain_id, tf, dl FROM grain_terms ORDER BY grain_id").Rows()
		if err != nil {
			return err
		}
		byGrain := map[int64][]TermRow{}
		var order []int64
		for rows.Next() {
			var t TermRow
			if err := rows.Scan(&t.Token, &t.GrainID, &t.TF, &t.DL); err != nil {
				rows.Close()
				return err
			}
			if byGrain[t.GrainID] == nil {
				order = append(order, t.GrainID)
			}
			byGrain[t.GrainID] = append(byGrain[t.GrainID], t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		r := gormRunner{tx}
		ctx := tx.Statement.Context
		for _, id := range order {
			stored := []*GrainRow{{ID: id, Terms: byGrain[id]}}
			entries, block, _ := searchRows("", stored)
			for _, e := range entries {
				if err := r.exec(ctx, "INSERT INTO grain_postings (token, block, posts) VALUES (?, ?, ?)", e.Token, block, e.Block); err != nil {
					return err
				}
			}
			if err := r.exec(ctx, "UPDATE grain_docs SET block = ?, toks = ? WHERE grain_id = ?", id, packTokens(stored[0].Terms), id); err != nil {
				return err
			}
		}
		return tx.Exec("DROP TABLE grain_terms").Error
	})
}

// packTokens returns a grain's tokens, each after a byte of its length.
func packTokens(ts []TermRow) []byte { return appendTokens(nil, ts) }

// appendTokens appends a grain's packed tokens (packTokens) to b.
func appendTokens(b []byte, ts []TermRow) []byte {
	for _, t := range ts {
		b = append(append(b, byte(len(t.Token))), t.Token...)
	}
	return b
}

func unpackTokens(b []byte) ([][]byte, error) {
	var out [][]byte
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n {
			return nil, errors.New("corrupt token list")
		}
		out, b = append(out, b[1:1+n]), b[1+n:]
	}
	return out, nil
}

// searchRows returns the postings blocks (one per token, in token order:
// a segment's entries, and in rows of (token, block, posts) for
// grain_postings, see postingRows), their block key and the document rows
// (grain_id, memory, len, dim, block, toks) of stored grains (their IDs
// set), the grains of one insert: their block is the least of their ids.
func searchRows(memory string, stored []*GrainRow) ([]search.SegmentEntry, int64, [][]any) {
	return planSearch(stored).rows(memory, stored)
}

// searchPlan is what searchRows computes before the grains have ids: the
// grouping of their postings by token, in token order, and their packed
// token lists. planSearch runs beside the grains' insert (see
// insertGrains), so that only the part that needs the ids (rows) is on
// the batch's path.
//
// It runs for every batch, so it allocates little: the postings are
// grouped by a counting pass into one slice, the token lists are cut from
// one buffer, and a token is the first row's slice of it, not a copy.
type searchPlan struct {
	groups []postingGroup
	order  []int32  // the groups in token order
	slots  []int32  // each posting's place in the grouped slice, in the rows' order
	toks   [][]byte // the document rows' token lists, in the rows' order (nil: no terms)
}

// postingGroup is one token's postings: posts[start:end] of the grouped
// slice.
type postingGroup struct {
	tok        []byte
	start, end int
}

// planSearch groups stored's postings by token (see searchPlan).
func planSearch(stored []*GrainRow) *searchPlan {
	total, ndocs, tokBytes := 0, 0, 0
	for _, r := range stored {
		total += len(r.Terms)
		if r.DocLen > 0 || r.Dim > 0 {
			ndocs++
			for _, t := range r.Terms {
				tokBytes += 1 + len(t.Token)
			}
		}
	}
	// The first pass counts each group's postings (end), the second
	// places them (end is the cursor).
	p := &searchPlan{slots: make([]int32, 0, total), toks: make([][]byte, 0, ndocs)}
	index := make(map[string]int32, total/2)
	for _, r := range stored {
		for _, t := range r.Terms {
			g, ok := index[string(t.Token)]
			if !ok {
				g = int32(len(p.groups))
				index[string(t.Token)] = g
				p.groups = append(p.groups, postingGroup{tok: t.Token})
			}
			p.groups[g].end++
			p.slots = append(p.slots, g)
		}
	}
	p.order = make([]int32, len(p.groups))
	at := 0
	for i := range p.groups {
		p.order[i] = int32(i)
		p.groups[i].start, p.groups[i].end, at = at, at, at+p.groups[i].end
	}
	for k, g := range p.slots {
		p.slots[k] = int32(p.groups[g].end)
		p.groups[g].end++
	}
	slices.SortFunc(p.order, func(a, b int32) int { return bytes.Compare(p.groups[a].tok, p.groups[b].tok) })
	packed := make([]byte, 0, tokBytes)
	for _, r := range stored {
		if r.DocLen == 0 && r.Dim == 0 {
			continue
		}
		var pt []byte
		if len(r.Terms) > 0 {
			from := len(packed)
			packed = appendTokens(packed, r.Terms)
			pt = packed[from:len(packed):len(packed)]
		}
		p.toks = append(p.toks, pt)
	}
	return p
}

// rows returns searchRows' answer for stored, the rows p was planned for,
// now that they have ids.
func (p *searchPlan) rows(memory string, stored []*GrainRow) ([]search.SegmentEntry, int64, [][]any) {
	var block int64
	for _, r := range stored {
		if block == 0 || r.ID < block {
			block = r.ID
		}
	}
	posts := make([]search.Posting, len(p.slots))
	k := 0
	for _, r := range stored {
		for _, t := range r.Terms {
			posts[p.slots[k]] = search.Posting{ID: r.ID, TF: t.TF, DL: t.DL}
			k++
		}
	}
	entries := make([]search.SegmentEntry, len(p.groups))
	buf := make([]byte, 0, 8*len(p.groups)+5*len(posts))
	for i, g := range p.order {
		gr := p.groups[g]
		from := len(buf)
		buf = search.AppendBlock(buf, posts[gr.start:gr.end])
		entries[i] = search.SegmentEntry{Token: gr.tok, Block: buf[from:len(buf):len(buf)]}
	}
	blockV, memoryV := any(block), any(memory)
	cells := make([]any, 6*len(p.toks))
	docs := make([][]any, 0, len(p.toks))
	for _, r := range stored {
		if r.DocLen == 0 && r.Dim == 0 {
			continue
		}
		var pt any
		if t := p.toks[len(docs)]; t != nil {
			pt = t
		}
		row := cells[6*len(docs) : 6*len(docs)+6 : 6*len(docs)+6]
		row[0], row[1], row[2], row[3], row[4], row[5] = r.ID, memoryV, r.DocLen, r.Dim, blockV, pt
		docs = append(docs, row)
	}
	return entries, block, docs
}

// postingRows returns entries as rows (token, block, posts) of the
// postings tables, in their order, so that an insert walks the tree once.
func postingRows(entries []search.SegmentEntry, block int64) [][]any {
	blockV := any(block)
	cells := make([]any, 3*len(entries))
	rows := make([][]any, len(entries))
	for i, e := range entries {
		row := cells[3*i : 3*i+3 : 3*i+3]
		row[0], row[1], row[2] = e.Token, blockV, e.Block
		rows[i] = row
	}
	return rows
}

// insertSearch stores the postings blocks and document rows of stored
// grains in tx.
//
// On SQLite the blocks go to the text index's tail: one row of
// posting_segments holds the insert's blocks (a search.Segment), so that a
// batch of 1,000 grains writes one row and its overflow pages where it
// wrote one row per distinct term (about 2,850 at 20,000 grains, each at a
// random place of the (token, block) order, dirtying most of the table's
// pages). The insert that finds the segments' blocks at the tail's limit
// or over, or whose own segment would be the tailSegments-th, first merges
// them into posting_mid (postingTail.due): one block per token for all of
// them (search.MergeSegments), keyed by the first segment holding the
// token, written in key order; the merge that brings posting_mid to
// tailRatio times the limit moves it into grain_postings, as one ordered
// copy. A large batch reads and merges the segments on another core while
// its grains are inserted (insertGrains, prepareMergeAsync), and its
// transaction only checks that they did not change and writes the result.
// Readers read all three (PostingBlocks, rewriteSQLite). PostgreSQL has no
// tail.
//
// A block's key is the least grain id of the first insert it holds, and
// every insert's ids are above those of every grain before it (the grains
// table's ids are AUTOINCREMENT, never reused, and writers are serialized), so
// a grain's postings for a token are in the block of greatest key at or
// below its id, in the newest table that holds such a block
// (rewriteSQLite relies on this).
//
// plan is stored's searchPlan, or nil to make it here; pre, if not nil,
// delivers the tail's merge prepared beside the transaction (see
// mergeSegments).
func (db *DB) insertSearch(tx *gorm.DB, memory string, stored []*GrainRow, plan *searchPlan, pre <-chan preparedMerge) error {
	if plan == nil {
		plan = planSearch(stored)
	}
	entries, block, docs := plan.rows(memory, stored)
	if db.dialect != Postgres && len(entries) > 0 {
		if db.tail.due() {
			n, err := db.mergeSegments(tx, pre)
			if err != nil {
				return err
			}
			// Counted by this process: another process's rows, or a
			// rolled-back merge, only move the next merge.
			db.tail.segs.Store(0)
			db.tail.rows[0].Store(0)
			if db.tail.rows[1].Add(n) >= db.tail.limit(1) {
				if _, err := mergePostings(tx, "posting_mid", "grain_postings"); err != nil {
					return err
				}
				db.tail.rows[1].Store(0)
			}
		}
		size := 0
		for _, e := range entries {
			size += len(e.Token) + len(e.Block) + 4
		}
		data := search.AppendSegment(make([]byte, 0, size), entries)
		if err := (gormRunner{tx}).exec(tx.Statement.Context, "INSERT INTO posting_segments (block, ver, n, data) VALUES (?, ?, ?, ?)",
			block, rand.Int64(), len(entries), data); err != nil {
			return translate(err, "insert search index")
		}
		db.tail.segs.Add(1)
		db.tail.rows[0].Add(int64(len(entries)))
		entries = nil
	}
	if err := db.insertRows(tx, "INSERT INTO grain_postings (token, block, posts) VALUES ", postingRows(entries, block)); err != nil {
		return err
	}
	return db.insertRows(tx, "INSERT INTO grain_docs (grain_id, memory, len, dim, block, toks) VALUES ", docs)
}

// insertRows inserts rows with stmt ("INSERT INTO t (columns) VALUES ")
// in multi-row statements.
func (db *DB) insertRows(tx *gorm.DB, stmt string, rows [][]any) error {
	for i := 0; i < len(rows); i += chunk / 6 {
		part := rows[i:min(i+chunk/6, len(rows))]
		var b strings.Builder
		b.WriteString(stmt)
		args := make([]any, 0, 6*len(part))
		for j, r := range part {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?" + strings.Repeat(", ?", len(r)-1) + ")")
			args = append(args, r...)
		}
		// Not through gorm's statement building, which splits a token
		// following a parenthesis into one parameter per byte.
		if _, err := tx.Statement.ConnPool.ExecContext(tx.Statement.Context, db.rebind(b.String()), args...); err != nil {
			return translate(err, "insert search index")
		}
	}
	return nil
}

// sqlitePostingTables are the tables of blocks on SQLite, newest first
// (posting_segments aside: see insertSearch).
var sqlitePostingTables = [...]string{"posting_mid", "grain_postings"}

// postingTail counts the text index's tail (SQLite; see insertSearch).
type postingTail struct {
	segs atomic.Int64    // segments inserted since the last merge, as this process counted them
	rows [2]atomic.Int64 // blocks in the segments, rows in posting_mid, the same way
	max  atomic.Int64    // the segments' blocks that merge them; 0: tailMax
	segc segmentCache    // the segments as read
}

// tailMax is the number of blocks in the tail's segments from which an
// insert merges them into posting_mid: about ten batches of 1,000 grains
// of a dozen words. posting_mid's limit is tailRatio times larger, in
// rows. tailSegments bounds the segments (for stores written a few grains
// at a time, whose segments are small): every read lists them.
const (
	tailMax      = 32768
	tailRatio    = 8
	tailSegments = 64
)

// due reports whether the next insert merges the tail's segments before it
// adds its own: they hold the tail's limit of blocks or more, or its own
// would be the tailSegments-th.
func (t *postingTail) due() bool {
	return t.segs.Load()+1 >= tailSegments || t.rows[0].Load() >= t.limit(0)
}

// limit returns the size of the tail's level (0: the segments' blocks, 1:
// posting_mid's rows) from which an insert merges it into the next table.
func (t *postingTail) limit(level int) int64 {
	n := t.max.Load()
	if n <= 0 {
		n = tailMax
	}
	for range level {
		n *= tailRatio
	}
	return n
}

// SetTailMax sets the number of blocks in the tail's segments from which
// an insert merges them (0: the default; posting_mid's limit follows), for
// tests that exercise the merges with little data.
func (db *DB) SetTailMax(n int64) { db.tail.max.Store(n) }

// countTail reads the size of the tail's levels when the store opens.
func (db *DB) countTail(ctx context.Context) error {
	if db.dialect == Postgres {
		return nil
	}
	var segs, blocks, mid int64
	row := db.gorm.ConnPool.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(n), 0), (SELECT COUNT(*) FROM posting_mid) FROM posting_segments")
	if err := row.Scan(&segs, &blocks, &mid); err != nil {
		return translate(err, "count postings")
	}
	db.tail.segs.Store(segs)
	db.tail.rows[0].Store(blocks)
	db.tail.rows[1].Store(mid)
	return nil
}

// tailMerge is a merge of the tail's segments prepared from one listing of
// them: their keys and versions, and the rows (token, block, posts) of
// posting_mid merged from them, in token order.
type tailMerge struct {
	keys, vers []int64
	rows       [][]any
}

// prepareMerge reads the tail's segments through r and merges them.
func prepareMerge(ctx context.Context, r runner) (*tailMerge, error) {
	m := &tailMerge{}
	var segs []search.Segment
	err := r.query(ctx, "SELECT block, ver, data FROM posting_segments ORDER BY block", nil, func(scan func(...any) error) error {
		var key, ver int64
		var data []byte
		if err := scan(&key, &ver, &data); err != nil {
			return err
		}
		seg, err := search.ParseSegment(data)
		if err != nil {
			return err
		}
		m.keys, m.vers, segs = append(m.keys, key), append(m.vers, ver), append(segs, seg)
		return nil
	})
	if err != nil {
		return nil, translate(err, "merge postings")
	}
	entries, first, err := search.MergeSegments(segs)
	if err != nil {
		return nil, fmt.Errorf("merge postings: %w", err)
	}
	m.rows = make([][]any, len(entries))
	cells := make([]any, 3*len(entries))
	for i, e := range entries {
		row := cells[3*i : 3*i+3 : 3*i+3]
		row[0], row[1], row[2] = e.Token, m.keys[first[i]], e.Block
		m.rows[i] = row
	}
	return m, nil
}

// current reports whether the tail's segments, as r lists them, are still
// those m was prepared from: the same keys with the same versions (a
// segment's version changes whenever its row is written).
func (m *tailMerge) current(ctx context.Context, r runner) bool {
	i := 0
	err := r.query(ctx, "SELECT block, ver FROM posting_segments ORDER BY block", nil, func(scan func(...any) error) error {
		var key, ver int64
		if err := scan(&key, &ver); err != nil {
			return err
		}
		if i >= len(m.keys) || m.keys[i] != key || m.vers[i] != ver {
			return errStale
		}
		i++
		return nil
	})
	return err == nil && i == len(m.keys)
}

// errStale stops a listing that differs from a prepared merge's.
var errStale = errors.New("the tail's segments changed")

// preparedMerge is a tailMerge prepared in the background, or why not.
type preparedMerge struct {
	merge *tailMerge
	err   error
}

// prepareMergeAsync prepares the merge of the tail's segments on a
// background goroutine of the store (Close waits for it), reading them
// through the store's pool under ctx while the transaction (which may
// still change them) runs; mergeSegments takes it if the segments did not
// change. SQLite's pool has no bound (see Open), so the read never waits
// for the transaction's connection. It returns nil once the store is
// closing: the merge is then made in the transaction.
func (db *DB) prepareMergeAsync(ctx context.Context) <-chan preparedMerge {
	out := make(chan preparedMerge, 1)
	ok := db.goBackground(func(context.Context) {
		m, err := prepareMerge(ctx, gormRunner{db.gorm})
		out <- preparedMerge{m, err}
	})
	if !ok {
		return nil
	}
	return out
}

// mergeSegments merges the tail's segments into posting_mid (see
// insertSearch), deletes them, and returns the rows it inserted. pre, if
// not nil, delivers a merge prepared beside the transaction: it is used if
// the segments are still those it read, else they are read and merged
// here.
func (db *DB) mergeSegments(tx *gorm.DB, pre <-chan preparedMerge) (int64, error) {
	ctx := tx.Statement.Context
	var m *tailMerge
	if pre != nil {
		if p := <-pre; p.err == nil && p.merge.current(ctx, gormRunner{tx}) {
			m = p.merge
		}
	}
	if m == nil {
		var err error
		if m, err = prepareMerge(ctx, gormRunner{tx}); err != nil {
			return 0, err
		}
	}
	if err := db.insertRows(tx, "INSERT INTO posting_mid (token, block, posts) VALUES ", m.rows); err != nil {
		return 0, err
	}
	return int64(len(m.rows)), translate(tx.Exec("DELETE FROM posting_segments").Error, "merge postings")
}

// mergePostings moves the blocks of table from into table to, in key
// order, and returns how many it moved. A block is in one table, never
// two: its key is new when it is inserted (see insertSearch), and only a
// merge moves it.
func mergePostings(tx *gorm.DB, from, to string) (int64, error) {
	res := tx.Exec("INSERT INTO " + to + " (token, block, posts) SELECT token, block, posts FROM " + from + " ORDER BY token, block")
	if res.Error != nil {
		return 0, translate(res.Error, "merge postings")
	}
	return res.RowsAffected, translate(tx.Exec("DELETE FROM "+from).Error, "merge postings")
}

// insertSearchPG is insertSearch in a pgx transaction.
func insertSearchPG(ctx context.Context, tx pgx.Tx, memory string, stored []*GrainRow) error {
	entries, block, docs := searchRows(memory, stored)
	if len(entries) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"grain_postings"}, []string{"token", "block", "posts"}, pgx.CopyFromRows(postingRows(entries, block))); err != nil {
			return err
		}
	}
	if len(docs) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"grain_docs"}, []string{"grain_id", "memory", "len", "dim", "block", "toks"}, pgx.CopyFromRows(docs)); err != nil {
			return err
		}
	}
	return nil
}

// runner is a transaction of either driver, as removePostings needs it.
type runner interface {
	query(ctx context.Context, q string, args []any, row func(scan func(dest ...any) error) error) error
	exec(ctx context.Context, q string, args ...any) error
	dialect() string
}

func (r gormRunner) dialect() string { return r.tx.Dialector.Name() }

func (r pgxRunner) dialect() string { return Postgres }

type gormRunner struct{ tx *gorm.DB }

func (r gormRunner) query(ctx context.Context, q string, args []any, row func(func(...any) error) error) error {
	rows, err := r.tx.Statement.ConnPool.QueryContext(ctx, (&DB{dialect: r.tx.Dialector.Name()}).rebind(q), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (r gormRunner) exec(ctx context.Context, q string, args ...any) error {
	_, err := r.tx.Statement.ConnPool.ExecContext(ctx, (&DB{dialect: r.tx.Dialector.Name()}).rebind(q), args...)
	return err
}

type pgxRunner struct{ tx pgx.Tx }

func (r pgxRunner) query(ctx context.Context, q string, args []any, row func(func(...any) error) error) error {
	rows, err := r.tx.Query(ctx, (&DB{dialect: Postgres}).rebind(q), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (r pgxRunner) exec(ctx context.Context, q string, args ...any) error {
	_, err := r.tx.Exec(ctx, (&DB{dialect: Postgres}).rebind(q), args...)
	return err
}

// removePostings takes the postings of the grains ids out of the text
// index. Every path that deletes grains calls it first, in the same
// transaction, while their grain_docs rows still say where their postings
// are.
//
// On SQLite it rewrites their blocks at once (rewriteBlocks): writers are
// serialized by the database anyway. On PostgreSQL it copies the grains'
// token lists to posting_garbage, in one statement, and DrainPostings
// rewrites the blocks after the commit, in the background. Rewriting them
// in the deleting transaction made concurrent forgets of grains added in
// one batch (whose postings share blocks) wait for each other's commit on
// every block they share: forgets ran one at a time. Until drained, a
// block still names grains that no longer exist; a reader skips such a
// candidate, which has no row (see package recall), and the post-forget
// scrub drains before it vacuums, so no residue outlives the scrub.
func removePostings(ctx context.Context, r runner, ids []int64) error {
	if r.dialect() == Postgres {
		return r.exec(ctx, queueGarbage, ids)
	}
	var gone goneSet
	for i := 0; i < len(ids); i += chunk {
		part := ids[i:min(i+chunk, len(ids))]
		q := "SELECT grain_id, block, toks FROM grain_docs WHERE toks IS NOT NULL AND grain_id IN (?" + strings.Repeat(", ?", len(part)-1) + ")"
		if err := r.query(ctx, q, anys(part), gone.scan); err != nil {
			return err
		}
	}
	return gone.rewrite(ctx, r)
}

// queueGarbage copies the token lists of the grains $1 (an array of ids) to
// posting_garbage (PostgreSQL; see removePostings).
const queueGarbage = `INSERT INTO posting_garbage (grain_id, block, toks)
	SELECT grain_id, block, toks FROM grain_docs WHERE toks IS NOT NULL AND grain_id = ANY($1)
	ON CONFLICT (grain_id) DO NOTHING`

// queueGarbageOne is queueGarbage for the one grain $1 (an id), the forget
// of one hash's. Its parameter is a scalar so that PostgreSQL keeps its
// generic plan: with an array parameter it planned the statement again at
// every call (its generic plan's estimate for an array exceeds the custom
// plans'), and the planning took twice the execution (pg_stat_statements
// under lethe-load's forget phase: 108 µs of plan and 51 µs of execution a
// call).
var queueGarbageOne = strings.Replace(queueGarbage, "= ANY($1)", "= $1", 1)

// goneSet is the postings to remove: per (token, block), the grains whose
// postings leave it.
type goneSet struct {
	ids  map[blockKey]map[int64]bool
	keys []blockKey
}

type blockKey struct {
	tok   string
	block int64
}

// scan adds the postings of one (grain_id, block, toks) row.
func (g *goneSet) scan(scan func(...any) error) error {
	var id, block int64
	var packed []byte
	if err := scan(&id, &block, &packed); err != nil {
		return err
	}
	return g.add(id, block, packed)
}

// add adds the postings of grain id, in block, of the packed tokens.
func (g *goneSet) add(id, block int64, packed []byte) error {
	toks, err := unpackTokens(packed)
	if err != nil {
		return err
	}
	if g.ids == nil {
		g.ids = map[blockKey]map[int64]bool{}
	}
	for _, t := range toks {
		k := blockKey{string(t), block}
		if g.ids[k] == nil {
			g.ids[k] = map[int64]bool{}
			g.keys = append(g.keys, k)
		}
		g.ids[k][id] = true
	}
	return nil
}

// rewrite removes the postings of g from their blocks, rewriting each
// block that holds one (deleting it when none is left).
//
// Two transactions may rewrite one block at once (two replicas draining):
// on PostgreSQL (rewritePG) the blocks are read FOR UPDATE, so that the
// second rewrites what the first left, not what it read before (which
// would put the first's postings back), and in key order, so that the two
// never wait for each other in a cycle (a deadlock, which failed one of
// them). On SQLite the database serializes writers; a block is read from
// whichever of the postings tables holds it, in key order too.
func (g *goneSet) rewrite(ctx context.Context, r runner) error {
	if r.dialect() == Postgres {
		return g.rewritePG(ctx, r)
	}
	return g.rewriteSQLite(ctx, r)
}

// rewriteSQLite is rewrite on SQLite. g's blocks are the grains' inserts
// (grain_docs.block, the insert's least id): an insert whose segment is
// still in the tail has its key; the others' postings for a token are in
// the block of greatest key at or below the grains' ids, in posting_mid if
// it holds one, else in grain_postings (see insertSearch). A segment is
// rewritten once, with a new version (or deleted when emptied).
func (g *goneSet) rewriteSQLite(ctx context.Context, r runner) error {
	segs := map[int64]bool{}
	err := r.query(ctx, "SELECT block FROM posting_segments", nil, func(scan func(...any) error) error {
		var k int64
		if err := scan(&k); err != nil {
			return err
		}
		segs[k] = true
		return nil
	})
	if err != nil {
		return err
	}
	type located struct {
		table string
		blockKey
	}
	inSeg := map[int64]map[string]map[int64]bool{}
	found := map[located]map[int64]bool{}
	posts := map[located][]byte{}
	var order []located
	for _, k := range g.keys {
		ids := g.ids[k]
		if segs[k.block] {
			if inSeg[k.block] == nil {
				inSeg[k.block] = map[string]map[int64]bool{}
			}
			inSeg[k.block][k.tok] = ids
			continue
		}
		var probe int64
		for id := range ids {
			probe = id // any: they are all in the same block
			break
		}
		var at located
		for _, t := range sqlitePostingTables {
			var block int64
			var v []byte
			err := r.query(ctx, "SELECT block, posts FROM "+t+" WHERE token = ? AND block <= ? ORDER BY block DESC LIMIT 1",
				[]any{[]byte(k.tok), probe}, func(scan func(...any) error) error { return scan(&block, &v) })
			if err != nil {
				return err
			}
			if v != nil {
				at = located{t, blockKey{k.tok, block}}
				if found[at] == nil {
					found[at], posts[at] = map[int64]bool{}, v
					order = append(order, at)
				}
				break
			}
		}
		for id := range ids {
			if at.table != "" {
				found[at][id] = true
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(inSeg)) {
		var data []byte
		err := r.query(ctx, "SELECT data FROM posting_segments WHERE block = ?", []any{key}, func(scan func(...any) error) error { return scan(&data) })
		if err != nil {
			return err
		}
		out, n, changed, err := search.RemoveFromSegment(data, inSeg[key])
		switch {
		case err != nil:
			return err
		case !changed:
		case n == 0:
			err = r.exec(ctx, "DELETE FROM posting_segments WHERE block = ?", key)
		default:
			err = r.exec(ctx, "UPDATE posting_segments SET ver = ?, n = ?, data = ? WHERE block = ?", rand.Int64(), n, out, key)
		}
		if err != nil {
			return err
		}
	}
	for _, at := range order {
		out, changed, err := search.RemoveFromBlock(posts[at], found[at])
		switch {
		case err != nil:
			return err
		case !changed:
		case out == nil:
			err = r.exec(ctx, "DELETE FROM "+at.table+" WHERE token = ? AND block = ?", []byte(at.tok), at.block)
		default:
			err = r.exec(ctx, "UPDATE "+at.table+" SET posts = ? WHERE token = ? AND block = ?", out, []byte(at.tok), at.block)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rewritePG is rewrite on PostgreSQL, in at most three statements however
// many blocks: the blocks read FOR UPDATE in key order (the row locks sit
// above the sort), the changed ones written back, the emptied ones
// deleted, instead of two round trips per block: the drain's
// transactions are what an erasure's scrub waits for when they started
// before it (docs/performance.md).
func (g *goneSet) rewritePG(ctx context.Context, r runner) error {
	if len(g.keys) == 0 {
		return nil
	}
	toks := make([][]byte, len(g.keys))
	blocks := make([]int64, len(g.keys))
	for i, k := range g.keys {
		toks[i], blocks[i] = []byte(k.tok), k.block
	}
	var upToks, upPosts, delToks [][]byte
	var upBlocks, delBlocks []int64
	err := r.query(ctx, `SELECT p.token, p.block, p.posts FROM grain_postings AS p
		JOIN unnest(?::bytea[], ?::bigint[]) AS k(token, block) ON p.token = k.token AND p.block = k.block
		ORDER BY p.token, p.block FOR UPDATE OF p`, []any{toks, blocks}, func(scan func(...any) error) error {
		var tok, v []byte
		var block int64
		if err := scan(&tok, &block, &v); err != nil {
			return err
		}
		out, changed, err := search.RemoveFromBlock(v, g.ids[blockKey{string(tok), block}])
		switch {
		case err != nil:
			return err
		case !changed:
		case out == nil:
			delToks, delBlocks = append(delToks, tok), append(delBlocks, block)
		default:
			upToks, upBlocks, upPosts = append(upToks, tok), append(upBlocks, block), append(upPosts, out)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(upToks) > 0 {
		if err := r.exec(ctx, `UPDATE grain_postings AS p SET posts = v.posts
			FROM unnest(?::bytea[], ?::bigint[], ?::bytea[]) AS v(token, block, posts)
			WHERE p.token = v.token AND p.block = v.block`, upToks, upBlocks, upPosts); err != nil {
			return err
		}
	}
	if len(delToks) > 0 {
		return r.exec(ctx, `DELETE FROM grain_postings AS p USING unnest(?::bytea[], ?::bigint[]) AS v(token, block)
			WHERE p.token = v.token AND p.block = v.block`, delToks, delBlocks)
	}
	return nil
}

// drainBatch bounds the deleted grains whose postings one DrainPostings
// transaction removes.
const drainBatch = 500

// DrainPostings removes from the text index the postings of deleted
// grains that removePostings left in posting_garbage (PostgreSQL; on
// SQLite there are none), in transactions of up to drainBatch grains, and
// returns how many grains' postings it removed. A block shared by many of
// them is rewritten once per transaction. It returns once a transaction
// finds the queue empty: replicas draining at once take it in turn (rows
// locked in grain id order, blocks in key order: no cycle), and each
// returns only after what was queued before it began is drained.
func (db *DB) DrainPostings(ctx context.Context) (int, error) {
	if db.dialect != Postgres {
		return 0, nil
	}
	total := 0
	for {
		n := 0
		err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			r := gormRunner{tx}
			var gone goneSet
			var ids []int64
			err := r.query(ctx, "SELECT grain_id, block, toks FROM posting_garbage ORDER BY grain_id LIMIT ? FOR UPDATE",
				[]any{drainBatch}, func(scan func(...any) error) error {
					var id, block int64
					var packed []byte
					if err := scan(&id, &block, &packed); err != nil {
						return err
					}
					ids = append(ids, id)
					return gone.add(id, block, packed)
				})
			if err != nil || len(ids) == 0 {
				return err
			}
			if err := gone.rewrite(ctx, r); err != nil {
				return err
			}
			n = len(ids)
			return r.exec(ctx, "DELETE FROM posting_garbage WHERE grain_id IN (?"+strings.Repeat(", ?", len(ids)-1)+")", anys(ids)...)
		})
		if err != nil {
			return total, translate(err, "drain postings")
		}
		total += n
		if n == 0 {
			return total, nil
		}
	}
}

// PostingBlocks returns every postings block of the given tokens, headers
// read (see search.Block). Tokens are keyed by their scope's key, so a
// token's postings are all in its memory.
func (db *DB) PostingBlocks(ctx context.Context, toks [][]byte) ([]search.Block, error) {
	var out []search.Block
	for i := 0; i < len(toks); i += chunk {
		part := toks[i:min(i+chunk, len(toks))]
		var err error
		if out, err = db.postingBlocks(ctx, part, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// postingBlocks appends the blocks of toks to out, reading them in one
// statement, one snapshot: a merge moves blocks from one table to another
// in one transaction. On SQLite the statement also lists the tail's
// segments by version, and reads the data of those the cache does not hold
// (see segmentCache).
func (db *DB) postingBlocks(ctx context.Context, toks [][]byte, out []search.Block) ([]search.Block, error) {
	in := "token IN (?" + strings.Repeat(", ?", len(toks)-1) + ")"
	var q string
	var args []any
	var cached *segmentSet
	if db.dialect == Postgres {
		q, args = "SELECT token, posts, NULL, NULL FROM grain_postings WHERE "+in, anys(toks)
	} else {
		cached = db.tail.segc.load()
		var selects []string
		for _, t := range sqlitePostingTables {
			selects = append(selects, "SELECT token, posts, NULL, NULL FROM "+t+" WHERE "+in)
			args = append(args, anys(toks)...)
		}
		// The data of a segment whose version is cached is not read.
		selects = append(selects, "SELECT NULL, NULL, ver, CASE WHEN ver IN (SELECT value FROM json_each(?)) THEN NULL ELSE data END FROM posting_segments")
		q, args = strings.Join(selects, " UNION ALL "), append(args, cached.vers)
	}
	rows, err := db.gorm.ConnPool.QueryContext(ctx, db.rebind(q), args...)
	if err != nil {
		return nil, translate(err, "read postings")
	}
	defer rows.Close()
	var listed []listedSegment
	for rows.Next() {
		var tok, v []byte
		var ver sql.NullInt64
		var data []byte
		if err := rows.Scan(&tok, &v, &ver, &data); err != nil {
			return nil, translate(err, "read postings")
		}
		if ver.Valid {
			listed = append(listed, listedSegment{ver.Int64, data})
			continue
		}
		b, err := search.DecodeBlock(tok, v)
		if err != nil {
			return nil, fmt.Errorf("read postings: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "read postings")
	}
	if cached == nil {
		return out, nil
	}
	segs, err := db.tail.segc.resolve(cached, listed)
	if err != nil {
		return nil, fmt.Errorf("read postings: %w", err)
	}
	for _, seg := range segs {
		for _, tok := range toks {
			v := seg.Find(tok)
			if v == nil {
				continue
			}
			b, err := search.DecodeBlock(tok, v)
			if err != nil {
				return nil, fmt.Errorf("read postings: %w", err)
			}
			out = append(out, b)
		}
	}
	return out, nil
}

// segmentCache holds the tail's segments as last read (SQLite): a text
// query reads only the versions of the segments, and the data of those it
// does not hold. A segment row's version changes whenever it is written
// (a random 63-bit number), so a cached segment is the row as it is now
// whenever their versions are equal, whoever wrote it: this process,
// another process on the same files, or a transaction since rolled back
// (whose version no reader saw). It holds at most the segments listed by
// the last read, a few MB at most (see tailMax).
type segmentCache struct {
	cur atomic.Pointer[segmentSet]
}

// segmentSet is one state of the cache, never modified once stored.
type segmentSet struct {
	byVer map[int64]search.Segment
	vers  string // byVer's versions, a JSON array (for json_each)
}

// listedSegment is a segment as a read listed it: its version, and its
// data unless the cache held it.
type listedSegment struct {
	ver  int64
	data []byte
}

var noSegments = &segmentSet{vers: "[]"}

func (c *segmentCache) load() *segmentSet {
	if s := c.cur.Load(); s != nil {
		return s
	}
	return noSegments
}

// resolve returns the segments listed, from cached or from their data,
// and makes them the cache's content if they differ from cached.
func (c *segmentCache) resolve(cached *segmentSet, listed []listedSegment) ([]search.Segment, error) {
	segs := make([]search.Segment, len(listed))
	same := len(listed) == len(cached.byVer)
	for i, l := range listed {
		if l.data == nil {
			seg, ok := cached.byVer[l.ver]
			if !ok {
				// Not asked for: json_each listed only cached versions.
				return nil, errors.New("a segment's data was not read")
			}
			segs[i] = seg
			continue
		}
		seg, err := search.ParseSegment(l.data)
		if err != nil {
			return nil, err
		}
		segs[i], same = seg, false
	}
	if !same {
		next := &segmentSet{byVer: make(map[int64]search.Segment, len(listed))}
		var b strings.Builder
		b.WriteByte('[')
		for i, l := range listed {
			next.byVer[l.ver] = segs[i]
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(l.ver, 10))
		}
		b.WriteByte(']')
		next.vers = b.String()
		c.cur.Store(next)
	}
	return segs, nil
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
	return db.queryFound(ctx, &f, db.rebind(q), all, len(ids), false)
}
