package store

import (
	"context"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"gorm.io/gorm"
	"pgregory.net/rapid"

	"github.com/lethe-io/lethe/internal/search"
)

// The text index's postings on SQLite, through its tail's segments and
// both merges, against a model: each token's set of grain ids. Two stores
// open the same file, as two processes would: one writes and deletes, both
// read, so that a reader's cache of segments (segmentCache) must follow
// what the other rewrote, merged or deleted. Every read must give each
// posting exactly once.
func TestSegmentsModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lethe.db")
	open := func() *DB {
		db, err := Open(context.Background(), Config{Dialect: SQLite, DSN: path})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	w, r := open(), open()
	defer func() { w.Close(); r.Close() }()
	// Inserts of 4 grains or more are planned, and merge the tail as
	// prepared, beside their grains' insert (see insertGrains).
	defer func(n int) { planParallel = n }(planParallel)
	planParallel = 4
	f := newFixture(t, w, 1)
	ctx := context.Background()
	toks := [][]byte{tok("a"), tok("b"), tok("c"), tok("d"), tok("e")}
	model := map[string]map[int64]bool{} // token -> ids
	live := map[int64][]string{}         // id -> its tokens
	next := 0
	merged := map[string]bool{}
	rapid.Check(t, func(rt *rapid.T) {
		tail := int64(rapid.IntRange(1, 40).Draw(rt, "tail"))
		w.SetTailMax(tail)
		rt.Repeat(map[string]func(*rapid.T){
			"": func(rt *rapid.T) {
				for name, db := range map[string]*DB{"writer": w, "reader": r} {
					for _, tk := range toks {
						blocks, err := db.PostingBlocks(ctx, [][]byte{tk})
						if err != nil {
							rt.Fatal(err)
						}
						got := map[int64]int{}
						for _, b := range blocks {
							ps, err := b.Postings(nil)
							if err != nil {
								rt.Fatal(err)
							}
							for _, p := range ps {
								got[p.ID]++
							}
						}
						for id, n := range got {
							if n != 1 || !model[string(tk)][id] {
								rt.Fatalf("%s: token %x holds grain %d %d times, want %v", name, tk[:2], id, n, model[string(tk)][id])
							}
						}
						if len(got) != len(model[string(tk)]) {
							rt.Fatalf("%s: token %x holds %d grains, want %d", name, tk[:2], len(got), len(model[string(tk)]))
						}
					}
				}
				for _, table := range []string{"posting_segments", "posting_mid", "grain_postings"} {
					var n int
					if err := w.gorm.Raw("SELECT COUNT(*) FROM " + table).Scan(&n).Error; err != nil {
						rt.Fatal(err)
					}
					merged[table] = merged[table] || n > 0
				}
			},
			"insert": func(rt *rapid.T) {
				n := rapid.IntRange(1, 6).Draw(rt, "grains")
				var rows []*GrainRow
				for range n {
					row := f.row(next, 0, "s", "r", "o")
					next++
					picked := rapid.SliceOfNDistinct(rapid.IntRange(0, len(toks)-1), 0, 3, rapid.ID[int]).Draw(rt, "tokens")
					for _, i := range picked {
						row.Terms = append(row.Terms, TermRow{Token: toks[i], TF: 1 + i, DL: 4})
					}
					row.DocLen = len(picked)
					rows = append(rows, row)
				}
				if _, err := w.InsertGrains(ctx, f.memory, rows, nil); err != nil {
					rt.Fatal(err)
				}
				for _, row := range rows {
					for _, t := range row.Terms {
						if model[string(t.Token)] == nil {
							model[string(t.Token)] = map[int64]bool{}
						}
						model[string(t.Token)][row.ID] = true
						live[row.ID] = append(live[row.ID], string(t.Token))
					}
					if len(row.Terms) == 0 {
						live[row.ID] = nil
					}
				}
			},
			"reopen": func(rt *rapid.T) {
				// The tail's counts are read again, the reader's cache
				// starts empty. One time in four: opening two stores is
				// most of the test's time.
				if rapid.IntRange(0, 3).Draw(rt, "reopen") != 0 {
					return
				}
				w.Close()
				r.Close()
				w, r = open(), open()
				w.SetTailMax(tail)
			},
			"delete": func(rt *rapid.T) {
				if len(live) == 0 {
					rt.Skip("nothing to delete")
				}
				from := slices.Sorted(maps.Keys(live))
				if rapid.Bool().Draw(rt, "recent") {
					// The last grains written: their segment is likely
					// still in the tail, rewritten again and again.
					from = from[max(0, len(from)-6):]
				}
				ids := rapid.SliceOfNDistinct(rapid.SampledFrom(from), 1, 2, rapid.ID[int64]).Draw(rt, "ids")
				if err := w.gorm.Transaction(func(tx *gorm.DB) error { return deleteIDs(tx, ids) }); err != nil {
					rt.Fatal(err)
				}
				for _, id := range ids {
					for _, t := range live[id] {
						delete(model[t], id)
					}
					delete(live, id)
				}
			},
		})
	})
	for _, table := range []string{"posting_segments", "posting_mid", "grain_postings"} {
		if !merged[table] {
			t.Errorf("%s never held a block: the merges were not exercised", table)
		}
	}
}

// A merge prepared beside a transaction (prepareMergeAsync) is used only
// if the tail's segments are still those it read: here the transaction
// deletes, after the merge was prepared, nothing, a grain of the last
// insert (its segment rewritten) or all of them (its segment deleted), and
// the merged blocks must not hold them.
func TestPreparedMergeChecksTheTail(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, Config{Dialect: SQLite, DSN: filepath.Join(t.TempDir(), "lethe.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetTailMax(1 << 20) // no merge but the test's
	f := newFixture(t, db, 1)
	toks := [][]byte{tok("a"), tok("b")}
	var ids []int64
	insert := func() { // three grains, one segment
		var rows []*GrainRow
		for i := range 3 {
			row := f.row(len(ids)+i, 0, "s", "r", "o")
			row.Terms = []TermRow{{Token: toks[i%2], TF: 1, DL: 1}}
			row.DocLen = 1
			rows = append(rows, row)
		}
		if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
	}
	for range 3 {
		insert()
	}
	read := func() []int64 {
		var out []int64
		for _, ids := range postingIDs(t, db, toks) {
			out = append(out, ids...)
		}
		slices.Sort(out)
		return out
	}
	for _, gone := range []int{0, 1, 3} {
		want := read()
		pre := db.prepareMergeAsync(ctx)
		err := db.gorm.Transaction(func(tx *gorm.DB) error {
			last := ids[len(ids)-gone:] // of the last insert
			if len(last) > 0 {
				if err := deleteIDs(tx, last); err != nil {
					return err
				}
			}
			want = slices.DeleteFunc(want, func(id int64) bool { return slices.Contains(last, id) })
			_, err := db.mergeSegments(tx, pre)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := read(); !reflect.DeepEqual(got, want) {
			t.Fatalf("after a merge, %d grains of the last insert deleted before it: %v, want %v", gone, got, want)
		}
		insert() // a segment again, for the next round
	}
}

// A store written before the tail's segments kept its last inserts'
// blocks in posting_tail, rows of grain_postings' shape: opening it moves
// them into posting_mid, keys unchanged, and drops the table; reads and
// deletes find them there.
func TestPostingTailMigrates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lethe.db")
	ctx := context.Background()
	db, err := Open(ctx, Config{Dialect: SQLite, DSN: path})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, db, 1)
	toks := [][]byte{tok("a"), tok("b")}
	var ids []int64
	for batch := range 3 {
		var rows []*GrainRow
		for i := range 4 {
			row := f.row(10*batch+i, 0, "s", "r", "o")
			row.Terms = []TermRow{{Token: toks[1], TF: 1, DL: 2}}
			if i%2 == 0 {
				row.Terms = append(row.Terms, TermRow{Token: toks[0], TF: 1, DL: 2})
			}
			row.DocLen = 2
			rows = append(rows, row)
		}
		if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
	}
	before := postingIDs(t, db, toks)
	if len(before[string(toks[1])]) != len(ids) {
		t.Fatalf("token b holds %d grains, want %d", len(before[string(toks[1])]), len(ids))
	}
	// The old layout: each segment's blocks as rows of posting_tail.
	if err := db.gorm.Exec(`CREATE TABLE posting_tail (token BLOB NOT NULL, block INTEGER NOT NULL,
		posts BLOB NOT NULL, PRIMARY KEY (token, block)) WITHOUT ROWID`).Error; err != nil {
		t.Fatal(err)
	}
	err = db.gorm.Transaction(func(tx *gorm.DB) error {
		var keys []int64
		var data [][]byte
		err := gormRunner{tx}.query(ctx, "SELECT block, data FROM posting_segments", nil, func(scan func(...any) error) error {
			var k int64
			var d []byte
			if err := scan(&k, &d); err != nil {
				return err
			}
			keys, data = append(keys, k), append(data, d)
			return nil
		})
		if err != nil {
			return err
		}
		for i, d := range data {
			seg, err := search.ParseSegment(d)
			if err != nil {
				return err
			}
			for _, e := range seg.Entries {
				if err := (gormRunner{tx}).exec(ctx, "INSERT INTO posting_tail (token, block, posts) VALUES (?, ?, ?)", e.Token, keys[i], e.Block); err != nil {
					return err
				}
			}
		}
		return tx.Exec("DROP TABLE posting_segments").Error
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = Open(ctx, Config{Dialect: SQLite, DSN: path})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.gorm.Migrator().HasTable("posting_tail") {
		t.Error("posting_tail is left after the migration")
	}
	var mid int
	if err := db.gorm.Raw("SELECT COUNT(*) FROM posting_mid").Scan(&mid).Error; err != nil || mid != 6 {
		t.Errorf("posting_mid holds %d blocks (%v), want the 6 of posting_tail", mid, err)
	}
	if got := postingIDs(t, db, toks); !reflect.DeepEqual(got, before) {
		t.Errorf("after the migration: %v, want %v", got, before)
	}
	if err := db.gorm.Transaction(func(tx *gorm.DB) error { return deleteIDs(tx, ids[5:6]) }); err != nil {
		t.Fatal(err)
	}
	if got := postingIDs(t, db, toks)[string(toks[1])]; slices.Contains(got, ids[5]) || len(got) != len(ids)-1 {
		t.Errorf("token b after deleting grain %d: %v", ids[5], got)
	}
}

// postingIDs reads each of toks' postings from db: the grain ids, sorted.
func postingIDs(t *testing.T, db *DB, toks [][]byte) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, tk := range toks {
		blocks, err := db.PostingBlocks(context.Background(), [][]byte{tk})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			ps, err := b.Postings(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				out[string(tk)] = append(out[string(tk)], p.ID)
			}
		}
		slices.Sort(out[string(tk)])
	}
	return out
}

// BenchmarkDeleteOneGrain deletes one grain per transaction (its postings
// with it: deleteIDs) from a store of 5,000 grains of 12 Zipf-drawn terms
// written in batches of 1,000, newest first: in the tail, each delete
// rewrites its insert's segment (about 2,500 blocks); merged, it rewrites
// the grain's blocks in posting_mid.
func BenchmarkDeleteOneGrain(b *testing.B) {
	for _, where := range []string{"tail", "merged"} {
		b.Run(where, func(b *testing.B) {
			db, err := Open(context.Background(), Config{Dialect: SQLite, DSN: filepath.Join(b.TempDir(), "lethe.db")})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if where == "merged" {
				db.SetTailMax(1)
			}
			f := newFixture(b, db, 1)
			var ids []int64
			for batch := range 5 {
				terms := zipfBatch(1000, 1, uint64(batch))
				rows := make([]*GrainRow, len(terms))
				for i := range rows {
					rows[i] = f.row(1000*batch+i, 0, "s", "r", "o")
					rows[i].Terms, rows[i].DocLen = terms[i].Terms, terms[i].DocLen
				}
				if _, err := db.InsertGrains(context.Background(), f.memory, rows, nil); err != nil {
					b.Fatal(err)
				}
				for _, r := range rows {
					ids = append(ids, r.ID)
				}
			}
			i := len(ids)
			for b.Loop() {
				if i == 0 {
					b.Fatal("out of grains")
				}
				i--
				if err := db.gorm.Transaction(func(tx *gorm.DB) error { return deleteIDs(tx, ids[i:i+1]) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
