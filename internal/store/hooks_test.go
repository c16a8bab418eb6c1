package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/testenv"
)

// twoHandles opens two handles on one database, as two replicas do.
func twoHandles(t *testing.T, dialect string) (*DB, *DB) {
	cfg := Config{Dialect: dialect, DSN: filepath.Join(t.TempDir(), "lethe.db")}
	if dialect == Postgres {
		cfg.DSN = testenv.Postgres(t)
	}
	var dbs [2]*DB
	for i := range dbs {
		db, err := Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs[0], dbs[1]
}

func deliveryCount(t *testing.T, db *DB) int64 {
	var n int64
	if err := db.gorm.Model(&DeliveryRow{}).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// Deliveries are queued by the events' own transaction, for the hooks of
// the event's memory and type only, and vanish with a rolled-back one.
// Concurrent claims on two handles never hand one delivery out twice while
// its lease holds; an expired lease frees it; only the owner completes it.
func TestDeliveryQueueAndClaims(t *testing.T) {
	for _, dialect := range []string{SQLite, Postgres} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			a, b := twoHandles(t, dialect)
			if err := a.CreateHook(ctx, HookRow{ID: "hk_1", Memory: "m", URL: "https://x.test/", Events: ",grain.forget,key.erase,", Secret: []byte("w")}); err != nil {
				t.Fatal(err)
			}
			if err := a.CreateHook(ctx, HookRow{ID: "hk_2", Memory: "m", URL: "https://y.test/", Events: "*", Secret: []byte("w")}); err != nil {
				t.Fatal(err)
			}
			ev := func(i int, memory, typ string) Event {
				return Event{ID: fmt.Sprintf("%032x", i), Memory: memory, Type: typ, Leaf: []byte(`{}`)}
			}
			const n = 60
			var evs []Event
			for i := range n {
				evs = append(evs, ev(i, "m", "grain.forget"))
			}
			evs = append(evs, ev(n, "m", "grain.archive"), ev(n+1, "other", "grain.forget"))
			if err := b.AppendEvents(ctx, 1000, evs); err != nil {
				t.Fatal(err)
			}
			// n forgets to both hooks, the archive to hk_2 only, nothing
			// of the other memory.
			if got := deliveryCount(t, a); got != 2*n+1 {
				t.Fatalf("%d deliveries queued, want %d", got, 2*n+1)
			}
			err := a.gorm.Transaction(func(tx *gorm.DB) error {
				if err := insertEvents(tx, 1000, []Event{ev(n+2, "m", "key.erase")}); err != nil {
					return err
				}
				return errors.New("the change fails")
			})
			if err == nil || deliveryCount(t, a) != 2*n+1 {
				t.Fatalf("a rolled-back event left deliveries (%v)", err)
			}
			// Not numbered yet: nothing to claim.
			if ds, err := a.ClaimDeliveries(ctx, "early", 2000, 3000, 100, ClaimLimits{}); err != nil || len(ds) != 0 {
				t.Fatalf("claim before sequencing = %d, %v", len(ds), err)
			}
			if _, err := a.AssignSequence(ctx, 1000); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			seen := map[int64]string{}
			var wg sync.WaitGroup
			for w := range 8 {
				db := []*DB{a, b}[w%2]
				wg.Add(1)
				go func() {
					defer wg.Done()
					for k := 0; ; k++ {
						owner := fmt.Sprintf("w%d-%d", w, k)
						ds, err := db.ClaimDeliveries(ctx, owner, 2000, 1_000_000, 3, ClaimLimits{})
						if err != nil {
							t.Error(err)
							return
						}
						if len(ds) == 0 {
							return
						}
						mu.Lock()
						for _, d := range ds {
							if prev, ok := seen[d.ID]; ok {
								t.Errorf("delivery %d claimed by %s and %s", d.ID, prev, owner)
							}
							seen[d.ID] = owner
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(seen) != 2*n+1 {
				t.Fatalf("claimed %d deliveries, want %d", len(seen), 2*n+1)
			}
			// Leases hold until 1,000,000: a claim at 999,999 gets nothing,
			// one after gets every delivery again.
			if ds, _ := b.ClaimDeliveries(ctx, "late", 999_999, 5_000_000, 1000, ClaimLimits{}); len(ds) != 0 {
				t.Fatalf("claimed %d leased deliveries", len(ds))
			}
			ds, err := b.ClaimDeliveries(ctx, "after", 1_000_001, 5_000_000, 1000, ClaimLimits{})
			if err != nil || len(ds) != 2*n+1 {
				t.Fatalf("claim after expiry = %d, %v", len(ds), err)
			}
			d := ds[0]
			if d.URL == "" || d.Type == "" || string(d.Leaf) != "{}" {
				t.Errorf("claimed delivery = %+v", d)
			}
			if err := a.DeliveryDone(ctx, []DeliveryRef{{d.ID, "not-the-owner"}}); err != nil || deliveryCount(t, a) != 2*n+1 {
				t.Fatalf("another owner completed a delivery (%v)", err)
			}
			if err := a.DeliveryDone(ctx, []DeliveryRef{{d.ID, "after"}}); err != nil || deliveryCount(t, a) != 2*n {
				t.Fatalf("the owner could not complete a delivery (%v)", err)
			}
			if err := a.DeliveryFailed(ctx, ds[1].ID, "after", 1, 7_000_000, true, "status 500"); err != nil {
				t.Fatal(err)
			}
			if err := a.ReleaseDeliveries(ctx, []DeliveryRef{{ds[2].ID, "after"}}); err != nil {
				t.Fatal(err)
			}
			got, _ := a.ClaimDeliveries(ctx, "again", 1_000_002, 5_000_000, 1000, ClaimLimits{})
			if len(got) != 1 || got[0].ID != ds[2].ID {
				t.Fatalf("after a release, claimed %d (want only the released one)", len(got))
			}
			q, err := a.DeliveryQueueStats(ctx)
			if err != nil || q.Pending != int64(2*n-1) || q.Dead != 1 || q.OldestUS != 1000 {
				t.Fatalf("queue = %+v, %v", q, err)
			}
			if n, err := a.Redeliver(ctx, ds[1].HookID, 0, 9000); err != nil || n != 1 || countDead(t, a, ds[1].HookID) != 0 {
				t.Fatalf("Redeliver = %d, %v", n, err)
			}
			keep, err := a.Deliveries(ctx, "hk_1", "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.DeleteHook(ctx, "m", "hk_2"); err != nil {
				t.Fatal(err)
			}
			if got := deliveryCount(t, a); got != int64(len(keep)) {
				t.Fatalf("%d deliveries after deleting hk_2, want hk_1's %d", got, len(keep))
			}
		})
	}
}

func countDead(t *testing.T, db *DB, hook string) int64 {
	rows, err := db.Deliveries(context.Background(), hook, DeliveryDead, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(rows))
}

// A claim takes at most PerHook deliveries of one hook and PerMemory of
// one memory, fewer for the hooks and memories its limits name, and none
// of those named with 0, however many of theirs are due first.
func TestDeliveryClaimLimits(t *testing.T) {
	for _, dialect := range []string{SQLite, Postgres} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			db, _ := twoHandles(t, dialect)
			for _, h := range []HookRow{{ID: "hk_a1", Memory: "a"}, {ID: "hk_a2", Memory: "a"}, {ID: "hk_b1", Memory: "b"}} {
				h.URL, h.Events, h.Secret = "https://x.test/", "*", []byte("w")
				if err := db.CreateHook(ctx, h); err != nil {
					t.Fatal(err)
				}
			}
			var evs []Event
			for i := range 15 {
				memory := "a" // memory a's events are due first
				if i >= 10 {
					memory = "b"
				}
				evs = append(evs, Event{ID: fmt.Sprintf("%032x", i), Memory: memory, Type: "grain.forget", Leaf: []byte(`{}`)})
			}
			if err := db.AppendEvents(ctx, 1000, evs); err != nil {
				t.Fatal(err)
			}
			if _, err := db.AssignSequence(ctx, 1000); err != nil {
				t.Fatal(err)
			}
			claim := func(owner string, lim ClaimLimits) map[string]int {
				t.Helper()
				ds, err := db.ClaimDeliveries(ctx, owner, 2000, 1_000_000, 100, lim)
				if err != nil {
					t.Fatal(err)
				}
				n := map[string]int{}
				for _, d := range ds {
					n[d.HookID]++
					n[d.Memory]++
				}
				return n
			}
			for _, tc := range []struct {
				name string
				lim  ClaimLimits
				want map[string]int
			}{
				{"bounds", ClaimLimits{PerHook: 3, PerMemory: 4},
					map[string]int{"a": 4, "b": 3, "hk_b1": 3}},
				{"busy", ClaimLimits{PerHook: 3, PerMemory: 4, Hooks: map[string]int{"hk_b1": 0}, Memories: map[string]int{"a": 1}},
					map[string]int{"a": 1}},
				{"one hook lowered", ClaimLimits{PerHook: 3, PerMemory: 100, Hooks: map[string]int{"hk_a1": 1}},
					map[string]int{"a": 4, "hk_a1": 1, "hk_a2": 3, "b": 2, "hk_b1": 2}},
				{"memory full", ClaimLimits{Memories: map[string]int{"a": 0}}, map[string]int{}},
			} {
				got := claim(tc.name, tc.lim)
				for _, k := range []string{"hk_a1", "hk_a2"} {
					if got[k] > tc.lim.PerHook && tc.lim.PerHook > 0 {
						t.Errorf("%s: %d deliveries of %s, over the bound %d", tc.name, got[k], k, tc.lim.PerHook)
					}
				}
				for k, v := range tc.want {
					if got[k] != v {
						t.Errorf("%s: claimed %v, want %s: %d", tc.name, got, k, v)
					}
				}
				if tc.want["a"] == 0 && got["a"] != 0 {
					t.Errorf("%s: claimed %d of memory a, which is full", tc.name, got["a"])
				}
			}
		})
	}
}
