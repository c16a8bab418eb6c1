package lethe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/search"
	"github.com/lethe-io/lethe/internal/testenv"
)

// TestConcurrentForgetsKeepPostings forgets, from 8 goroutines at once,
// 150 of 200 grains added in one batch (their postings share blocks: one
// per word of the batch), on both stores, and reads the text index's rows
// before and after. Every forget must succeed (on PostgreSQL two forgets
// rewriting the same blocks in different orders deadlocked, failing one);
// no posting of a forgotten grain may be left (a forget that rewrote a
// block from what it had read before another's commit put the other's
// postings back); every survivor keeps each of its postings.
func TestConcurrentForgetsKeepPostings(t *testing.T) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			ctx := context.Background()
			dir, dsn := t.TempDir(), ""
			raw := func(q string) [][]byte { return sqliteRaw{dir: dir}.query(t, q) }
			if b == "postgres" {
				dsn = testenv.Postgres(t)
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close(context.Background()) })
				raw = func(q string) [][]byte { return pgRaw{conn}.direct(t, q) }
			}
			db, err := lethe.Open(ctx, lethe.Config{DataDir: dir, PostgresDSN: dsn})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			words := []string{"apple", "pear", "plum", "fig", "kiwi", "lime", "date", "sloe"}
			r := rand.New(rand.NewPCG(9, 9))
			batch := make([]lethe.Grain, 200)
			for i := range batch {
				batch[i] = lethe.Grain{Type: "fact", Content: fmt.Sprintf("%s %s %s item%d", words[r.IntN(8)], words[r.IntN(8)], words[r.IntN(8)], i)}
			}
			hashes, err := db.AddBatch(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			postings := func() map[int64]int {
				n := map[int64]int{}
				for _, v := range raw(`SELECT posts FROM grain_postings`) {
					bl, err := search.DecodeBlock(nil, v)
					if err != nil {
						t.Fatal(err)
					}
					ps, err := bl.Postings(nil)
					if err != nil {
						t.Fatal(err)
					}
					for _, p := range ps {
						n[p.ID]++
					}
				}
				return n
			}
			before := postings()
			if len(before) != len(batch) {
				t.Fatalf("%d grains have postings, want %d", len(before), len(batch))
			}
			forget := r.Perm(len(hashes))[:150]
			var wg sync.WaitGroup
			errs := make(chan error, len(forget))
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < len(forget); i += 8 {
						res, err := db.Forget(ctx, lethe.Selector{Hash: hashes[forget[i]]})
						if err != nil || res.Count != 1 {
							errs <- fmt.Errorf("forget %s: %+v, %v", hashes[forget[i]], res, err)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			live := map[int64]bool{}
			for _, v := range raw(`SELECT CAST(id AS TEXT) FROM grains`) {
				id, err := strconv.ParseInt(string(v), 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				live[id] = true
			}
			if len(live) != len(batch)-len(forget) {
				t.Fatalf("%d grains left, want %d", len(live), len(batch)-len(forget))
			}
			after := postings()
			for id, n := range before {
				switch {
				case live[id] && after[id] != n:
					t.Errorf("survivor %d has %d postings, had %d", id, after[id], n)
				case !live[id] && after[id] != 0:
					t.Errorf("forgotten grain %d still has %d postings", id, after[id])
				}
			}
		})
	}
}
