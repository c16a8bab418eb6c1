package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lethe-io/lethe/internal/keys"
)

// TestCleanupInBatches: the cleaner takes up to ten jobs in one
// transaction and stops at its row limit, so a job may be cut short by the
// limit the jobs before it used up. Whatever the limits, repeated calls
// delete every erased user's rows and no other, delete a job only with its
// last row, and leave the counters equal to the rows left. Users with no
// rows (a job with nothing to delete) and users erased or not are drawn
// at random, and so is each call's limit.
func TestCleanupInBatches(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		for seed := range uint64(3) {
			t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { cleanupInBatches(t, db, seed) })
		}
	})
}

func cleanupInBatches(t *testing.T, db *DB, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 99))
	f := &fixture{memory: fmt.Sprint("m", seed)}
	mk := newKey(t, db, f.memory, keys.KindMemory, "")
	sk := newKey(t, db, f.memory, keys.KindScope, "acme")
	f.chain = fmt.Sprintf("%d.%d", mk.ID, sk.ID)
	for i := range 14 {
		f.users = append(f.users, newKey(t, db, f.memory, keys.KindUser, hex.EncodeToString(tok(fmt.Sprint(seed, "user", i)))))
	}
	var rows []*GrainRow
	left := map[int64]int64{} // user key id: rows the cleaner must leave
	n := 0
	for u, k := range f.users {
		for range rng.IntN(25) {
			r := f.row(int(seed)*1000+n, u, fmt.Sprint(n), "r", fmt.Sprint(n))
			rows = append(rows, r)
			left[k.ID]++
			n++
		}
	}
	if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
		t.Fatal(err)
	}
	erased := map[int64]bool{}
	for _, k := range f.users {
		if rng.IntN(3) == 0 {
			continue
		}
		ref, _ := hex.DecodeString(k.Name)
		if _, err := db.EraseKey(ctx, EraseSpec{Memory: f.memory, Kind: keys.KindUser, Name: k.Name, UserRef: ref, Now: 1},
			func(context.Context, *Erasure) ([]Event, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		erased[k.ID] = true
	}
	remaining := func() map[int64]int64 {
		var got []struct {
			UserKeyID int64
			N         int64
		}
		if err := db.gorm.Raw(`SELECT user_key_id, count(*) AS n FROM grains WHERE memory = ? GROUP BY user_key_id`, f.memory).
			Scan(&got).Error; err != nil {
			t.Fatal(err)
		}
		out := map[int64]int64{}
		for _, g := range got {
			out[g.UserKeyID] = g.N
		}
		return out
	}
	for calls := 0; ; calls++ {
		if calls == 1000 {
			t.Fatal("the cleaner did not finish in 1,000 calls")
		}
		limit := 1 + rng.IntN(30)
		got, err := db.CleanupErased(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		if got > limit {
			t.Fatalf("CleanupErased(%d) deleted %d rows", limit, got)
		}
		var jobs []CleanupJob
		if err := db.gorm.Where("memory = ?", f.memory).Find(&jobs).Error; err != nil {
			t.Fatal(err)
		}
		pending := map[int64]bool{}
		for _, j := range jobs {
			pending[j.KeyID] = true
		}
		now := remaining()
		for id := range erased {
			if !pending[id] && now[id] > 0 {
				t.Fatalf("after CleanupErased(%d): the job of key %d is gone with %d of its rows left", limit, id, now[id])
			}
		}
		if len(jobs) == 0 {
			break
		}
	}
	now := remaining()
	for _, k := range f.users {
		want := left[k.ID]
		if erased[k.ID] {
			want = 0
		}
		if now[k.ID] != want {
			t.Errorf("key %d (erased %v): %d rows left, want %d", k.ID, erased[k.ID], now[k.ID], want)
		}
		var counted int64
		if err := db.gorm.Raw(`SELECT COALESCE(SUM(n), 0) FROM user_grain_counts WHERE key_id = ?`, k.ID).Scan(&counted).Error; err != nil {
			t.Fatal(err)
		}
		if counted != want {
			t.Errorf("key %d (erased %v): counted %d rows, want %d", k.ID, erased[k.ID], counted, want)
		}
	}
	var total, counted int64
	for _, c := range now {
		total += c
	}
	if err := db.gorm.Raw(`SELECT COALESCE(SUM(n), 0) FROM grain_counts WHERE memory = ? AND kind = 'scope'`, f.memory).
		Scan(&counted).Error; err != nil {
		t.Fatal(err)
	}
	if counted != total {
		t.Errorf("the scope counters say %d rows, %d are left", counted, total)
	}
}
