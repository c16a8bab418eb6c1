package store

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/forgetting"
)

// TestRetrievalsFollowTheRule holds the SQL of RecordRetrievals to the Go
// rule of a retrieval's effect (forgetting.Policy.RetrievedN): on random
// salience, counts, last retrievals and bumps, in several rounds, both
// stores write exactly the values the rule computes.
func TestRetrievalsFollowTheRule(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		f := newFixture(t, db, 4)
		rng := rand.New(rand.NewPCG(16, 3))
		const n = 300
		rows := make([]*GrainRow, n)
		hashes := make([]string, n)
		for i := range rows {
			r := f.row(i, i%4, "s", "r", "o")
			switch i % 3 {
			case 0:
				r.Salience = rng.Float64()
			case 1:
				r.Salience = 1 - rng.Float64()/1000 // near the cap
			}
			if i%2 == 0 {
				r.RetrievalCount = rng.Int64N(1000)
				r.LastRetrievedUS = rng.Int64N(2e15)
			}
			rows[i], hashes[i] = r, r.Hash
		}
		if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
			t.Fatal(err)
		}
		read := func() map[string]OpRow {
			t.Helper()
			ops, err := db.OpsByHashes(ctx, f.memory, hashes)
			if err != nil {
				t.Fatal(err)
			}
			out := make(map[string]OpRow, len(ops))
			for _, o := range ops {
				out[o.Hash] = o
			}
			return out
		}
		before := read()
		if len(before) != n {
			t.Fatalf("read %d rows back, want %d", len(before), n)
		}
		for round := range 4 {
			p := forgetting.Default()
			p.Ladder.RetrievalBump = []float64{0, 0.1, rng.Float64(), 1}[round]
			want := map[string]forgetting.Facts{}
			var rs []Retrieval
			for h, o := range before {
				if rng.IntN(3) == 0 {
					continue // not retrieved this round
				}
				r := Retrieval{ID: o.ID, Count: 1 + rng.Int64N(50), LastUS: rng.Int64N(2e15)}
				rs = append(rs, r)
				facts := forgetting.Facts{Salience: o.Salience, RetrievalCount: o.RetrievalCount, LastRetrievedAt: time.UnixMicro(o.LastRetrievedUS)}
				want[h] = p.RetrievedN(facts, r.Count, time.UnixMicro(r.LastUS))
			}
			if err := db.RecordRetrievals(ctx, rs, p.Ladder.RetrievalBump); err != nil {
				t.Fatal(err)
			}
			after := read()
			for h, o := range after {
				w, retrieved := want[h]
				if !retrieved {
					if b := before[h]; o.Salience != b.Salience || o.RetrievalCount != b.RetrievalCount || o.LastRetrievedUS != b.LastRetrievedUS {
						t.Fatalf("round %d: grain %s not retrieved changed: %+v -> %+v", round, h[:8], b, o)
					}
					continue
				}
				if o.Salience != w.Salience || o.RetrievalCount != w.RetrievalCount || o.LastRetrievedUS != w.LastRetrievedAt.UnixMicro() {
					t.Fatalf("round %d (bump %v): grain %s has salience %v count %d last %d; the rule gives %v %d %d",
						round, p.Ladder.RetrievalBump, h[:8], o.Salience, o.RetrievalCount, o.LastRetrievedUS,
						w.Salience, w.RetrievalCount, w.LastRetrievedAt.UnixMicro())
				}
			}
			before = after
		}
	})
}

// TestRetrievalUpdatesStayOnTheirPage: on PostgreSQL a recall's statistics
// update rewrites its grains' rows. A new version that fits on its row's
// page is a HOT update, which writes none of the table's nine indexes; one
// that does not fit moves to another page and is inserted into every
// index. Inserts leave a fifth of each page of grains free (its fill
// factor): room for two new versions of rows of this size even when no old
// version can be pruned (any snapshot older than the update, in any
// database of the cluster, keeps them). So the retrieval of two grains of
// each page (of nine or ten) leaves every row on the page it was inserted
// on: the rows' block numbers are read before and after. With full pages
// nearly every one of them moved.
func TestRetrievalUpdatesStayOnTheirPage(t *testing.T) {
	db := openPostgres(t)
	ctx := context.Background()
	f := newFixture(t, db, 4)
	rng := rand.New(rand.NewPCG(7, 7))
	const n = 1200
	rows := make([]*GrainRow, n)
	for i := range rows {
		r := f.row(i, i%4, fmt.Sprint("s", i), "r", "o")
		r.Blob = make([]byte, 300+rng.IntN(200)) // a sealed grain of a sentence or two
		for j := range r.Blob {
			r.Blob[j] = byte(rng.Uint32())
		}
		rows[i] = r
	}
	if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
		t.Fatal(err)
	}
	blocks := func() map[int64]int64 {
		t.Helper()
		var got []struct{ ID, Block int64 }
		if err := db.gorm.Raw(`SELECT id, (ctid::text::point)[0]::bigint AS block FROM grains WHERE memory = ?`, f.memory).
			Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		out := make(map[int64]int64, len(got))
		for _, g := range got {
			out[g.ID] = g.Block
		}
		return out
	}
	before := blocks()
	if len(before) != n {
		t.Fatalf("read %d rows, want %d", len(before), n)
	}
	// Two rows of each page, in id order.
	pages := map[int64]int{}
	var rs []Retrieval
	for _, id := range slices.Sorted(maps.Keys(before)) {
		if pages[before[id]]++; pages[before[id]] <= 2 {
			rs = append(rs, Retrieval{ID: id, Count: 1, LastUS: 1})
		}
	}
	if err := db.RecordRetrievals(ctx, rs, 0.1); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for id, b := range blocks() {
		if b != before[id] {
			moved++
		}
	}
	t.Logf("%d rows on %d pages; the retrieval of %d of them moved %d to another page", n, len(pages), len(rs), moved)
	if moved > 0 {
		t.Fatalf("the retrieval of %d grains moved %d rows to another page: those updates were not HOT and wrote every index", len(rs), moved)
	}
}
