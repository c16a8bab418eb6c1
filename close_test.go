package lethe_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/search"
	"github.com/lethe-io/lethe/internal/testenv"
)

// storeGoroutines returns the stacks of the goroutines running code of
// the store package (its background ANALYZE and VACUUM among them).
func storeGoroutines() []string { return testenv.Goroutines("lethe/internal/store.") }

// TestCloseStopsBackgroundWork closes a DB right after writes and a forget
// that start the store's background work (an ANALYZE once 100 rows are
// inserted; on PostgreSQL a VACUUM after a forget), again and again, and
// checks that Close waited for it: no goroutine of the store runs once
// Close returns, and on SQLite the write-ahead log and shared-memory files
// are gone and no file of the data directory holds any part of the
// forgotten sealed row.
func TestCloseStopsBackgroundWork(t *testing.T) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			dsn := ""
			if b == "postgres" {
				dsn = testenv.Postgres(t)
			}
			for round := range 6 {
				before := storeGoroutines()
				dir := t.TempDir()
				db, err := lethe.Open(context.Background(), lethe.Config{DataDir: dir, PostgresDSN: dsn})
				if err != nil {
					t.Fatal(err)
				}
				closed := false
				t.Cleanup(func() {
					if !closed {
						db.Close()
					}
				})
				ctx := context.Background()
				memory := fmt.Sprintf("close%d", round)
				batch := make([]lethe.Grain, 150)
				for i := range batch {
					batch[i] = lethe.Grain{Memory: memory, Type: "fact", Subject: fmt.Sprintf("s%d", i), Relation: "r",
						Object: fmt.Sprintf("o%d", i), UserID: fmt.Sprintf("u%d", i%3), Tags: []string{"t"}}
				}
				hs, err := db.AddBatch(ctx, batch)
				if err != nil {
					t.Fatal(err)
				}
				var blob []byte
				if b == "sqlite" {
					blobs := sqliteRaw{dir: dir}.query(t, `SELECT blob FROM grains WHERE hash = ?`, hs[0])
					if len(blobs) != 1 || len(blobs[0]) < 64 {
						t.Fatalf("blob of %s: %d rows", hs[0], len(blobs))
					}
					blob = blobs[0]
					// The check finds what it looks for.
					if len(sqliteRaw{dir: dir}.residue(t, blob)) == 0 {
						t.Fatal("the live sealed row is not found in the data directory: the search is blind")
					}
				}
				if fr, err := db.Forget(ctx, lethe.Selector{Memory: memory, Hash: hs[0]}); err != nil || fr.Count != 1 {
					t.Fatalf("forget: %+v, %v", fr, err)
				}
				// More rows: another ANALYZE may start as Close begins.
				if _, err := db.AddBatch(ctx, batch[:60]); err != nil {
					t.Fatal(err)
				}
				closed = true
				if err := db.Close(); err != nil {
					t.Fatalf("round %d: Close: %v", round, err)
				}
				if after := storeGoroutines(); len(after) > len(before) {
					t.Fatalf("round %d: %d goroutines of the store run after Close (%d before Open):\n%s",
						round, len(after), len(before), strings.Join(after, "\n\n"))
				}
				if b != "sqlite" {
					continue
				}
				for _, f := range []string{"lethe.db-wal", "lethe.db-shm"} {
					if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("round %d: %s outlived Close (%v)", round, f, err)
					}
				}
				if where := (sqliteRaw{dir: dir}).residue(t, blob); len(where) > 0 {
					t.Errorf("round %d: the forgotten sealed row survives Close in %v", round, where)
				}
			}
		})
	}
}

// searchGoroutines counts the goroutines of the vector index's background
// graph build.
func searchGoroutines() int { return len(testenv.Goroutines("lethe/internal/search.(*Set).build")) }

// TestCloseStopsVectorBuild closes a DB while a memory's vector index
// builds its graph in the background (a vector recall loaded more than
// search.GraphMin vectors): no goroutine of the build runs once Close
// returns.
func TestCloseStopsVectorBuild(t *testing.T) {
	ctx := context.Background()
	db, err := lethe.Open(ctx, lethe.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			db.Close()
		}
	})
	r := rand.New(rand.NewPCG(3, 3))
	batch := make([]lethe.Grain, 0, 1000)
	var q []float32
	for i := range search.GraphMin + 2000 {
		v := make([]float32, 32)
		for j := range v {
			v[j] = float32(r.NormFloat64())
		}
		q = v
		batch = append(batch, lethe.Grain{Type: "fact", Content: fmt.Sprintf("c%d", i), Embedding: v})
		if len(batch) == cap(batch) {
			if _, err := db.AddBatch(ctx, batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := db.Recall(ctx, lethe.Query{Embedding: q, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if searchGoroutines() == 0 {
		t.Fatal("no graph build in progress when Close is called: the test checks nothing")
	}
	closed = true
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if n := searchGoroutines(); n > 0 {
		t.Fatalf("%d goroutines of the vector index's build run after Close", n)
	}
}
