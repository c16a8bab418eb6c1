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
			if _, err := a.DeliveryFailed(ctx, ds[1].ID, "after", DeliveryFailure{Attempts: 1, NextUS: 7_000_000, Dead: true,
				Reason: "status 500", AtUS: 1_000_001, Trip: func(c HookCircuit) HookCircuit { return c }}); err != nil {
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

// A hook's circuit (its columns of hooks) is shared by every handle: no
// claim takes a delivery of a paused hook; once the pause has ended, one
// claim in all takes one of its deliveries, a probe, whether the claims
// follow each other or run at once on two handles; a failed probe pauses
// it again and dead-letters the deliveries the pause carries past their
// age, unattempted ones with "hook paused"; an accepted probe closes the
// circuit and its deliveries flow; a redeliver ends a pause, unless it
// names no dead delivery.
func TestHookCircuitClaims(t *testing.T) {
	for _, dialect := range []string{SQLite, Postgres} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			a, b := twoHandles(t, dialect)
			for _, id := range []string{"hk_p", "hk_ok"} {
				if err := a.CreateHook(ctx, HookRow{ID: id, Memory: "m", URL: "https://x.test/", Events: "*", Secret: []byte("w")}); err != nil {
					t.Fatal(err)
				}
			}
			next := 0
			queue := func(at int64, n int) {
				t.Helper()
				var evs []Event
				for range n {
					evs = append(evs, Event{ID: fmt.Sprintf("%032x", next), Memory: "m", Type: "grain.forget", Leaf: []byte(`{}`)})
					next++
				}
				if err := b.AppendEvents(ctx, at, evs); err != nil {
					t.Fatal(err)
				}
				if _, err := b.AssignSequence(ctx, 1000); err != nil {
					t.Fatal(err)
				}
			}
			claim := func(db *DB, owner string, now int64, lim ClaimLimits) []ClaimedDelivery {
				t.Helper()
				ds, err := db.ClaimDeliveries(ctx, owner, now, now+1_000_000, 100, lim)
				if err != nil {
					t.Fatal(err)
				}
				return ds
			}
			of := func(ds []ClaimedDelivery, hook string) (out []ClaimedDelivery) {
				for _, d := range ds {
					if d.HookID == hook {
						out = append(out, d)
					}
				}
				return out
			}
			circuit := func() HookRow {
				t.Helper()
				h, err := b.Hook(ctx, "m", "hk_p")
				if err != nil {
					t.Fatal(err)
				}
				return *h
			}
			pauseUntil := func(until int64) func(HookCircuit) HookCircuit {
				return func(c HookCircuit) HookCircuit {
					c.Failures++
					c.PauseUS, c.PausedUntilUS = c.PauseUS+1, until
					return c
				}
			}
			done := func(owner string, ds []ClaimedDelivery) {
				t.Helper()
				var refs []DeliveryRef
				for _, d := range ds {
					refs = append(refs, DeliveryRef{d.ID, owner})
				}
				if err := a.DeliveryDone(ctx, refs); err != nil {
					t.Fatal(err)
				}
			}

			queue(1000, 6)
			held := claim(a, "c1", 2000, ClaimLimits{Hooks: map[string]int{"hk_ok": 0}})
			if len(held) != 6 {
				t.Fatalf("claimed %d of hk_p, want 6", len(held))
			}
			tr, err := a.DeliveryFailed(ctx, held[0].ID, "c1", DeliveryFailure{Attempts: 1, NextUS: 2100, Reason: "status 503",
				AtUS: 2000, Trip: pauseUntil(50_000), MaxAgeUS: 1_000_000})
			if err != nil || !tr.Paused || tr.Circuit.PausedUntilUS != 50_000 || tr.Expired != 0 {
				t.Fatalf("the failure that pauses = %+v, %v", tr, err)
			}
			var rest []DeliveryRef
			for _, d := range held[1:] {
				rest = append(rest, DeliveryRef{d.ID, "c1"})
			}
			if err := a.ReleaseDeliveries(ctx, rest); err != nil {
				t.Fatal(err)
			}
			if h := circuit(); h.Failures != 1 || h.PausedUntilUS != 50_000 || h.PauseUS != 1 {
				t.Fatalf("hook after the pause = %+v", h)
			}
			if q, err := b.DeliveryQueueStats(ctx); err != nil || q.Paused != 1 {
				t.Fatalf("queue = %+v, %v, want 1 paused hook", q, err)
			}

			// Paused: neither handle's claims take any of its deliveries,
			// however due.
			for i, db := range []*DB{a, b} {
				ds := claim(db, fmt.Sprintf("c2-%d", i), 49_999, ClaimLimits{})
				if p := of(ds, "hk_p"); len(p) != 0 {
					t.Fatalf("a claim during the pause took %d deliveries of the paused hook", len(p))
				}
				done(fmt.Sprintf("c2-%d", i), ds)
			}

			// The pause has ended: one probe, then nothing while it is out.
			probe := of(claim(a, "p1", 50_000, ClaimLimits{}), "hk_p")
			if len(probe) != 1 {
				t.Fatalf("the first claim after the pause took %d deliveries of the hook, want one probe", len(probe))
			}
			for i, db := range []*DB{a, b} {
				if p := of(claim(db, fmt.Sprintf("p2-%d", i), 50_001+int64(i), ClaimLimits{}), "hk_p"); len(p) != 0 {
					t.Fatalf("a claim while the probe is out took %d more", len(p))
				}
			}
			// Released unsent (its claimer held it too long), the probe frees
			// the hook at once: the next claim, on either handle, takes it
			// again as the probe, and then again nothing more.
			if err := a.ReleaseDeliveries(ctx, []DeliveryRef{{probe[0].ID, "p1"}}); err != nil {
				t.Fatal(err)
			}
			if h := circuit(); h.ProbeUntilUS != 0 || h.PausedUntilUS != 50_000 {
				t.Fatalf("hook after its probe was released = %+v, want its probe mark cleared, still paused until 50000", h)
			}
			again := of(claim(b, "p1", 50_003, ClaimLimits{}), "hk_p")
			if len(again) != 1 || again[0].ID != probe[0].ID {
				t.Fatalf("after the probe was released unsent, a claim took %+v, want the same probe again", again)
			}
			probe = again
			if p := of(claim(a, "p2-2", 50_004, ClaimLimits{}), "hk_p"); len(p) != 0 {
				t.Fatalf("a claim while the probe is out again took %d more", len(p))
			}

			// The probe fails: paused again, and what the new pause carries
			// past MaxAgeUS is dead-lettered (queued at 1000; those of 60,000
			// stay).
			queue(60_000, 3)
			tr, err = a.DeliveryFailed(ctx, probe[0].ID, "p1", DeliveryFailure{Attempts: probe[0].Attempts + 1, NextUS: 60_100,
				Reason: "timeout", AtUS: 60_000, Trip: pauseUntil(100_000), MaxAgeUS: 60_000})
			if err != nil || !tr.Paused || tr.Circuit.Failures != 2 || tr.Expired != 6 {
				t.Fatalf("the failed probe = %+v, %v; want paused again, 6 expired", tr, err)
			}
			ds, err := a.Deliveries(ctx, "hk_p", "", 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				wantState, wantErr := DeliveryDead, "hook paused"
				switch {
				case d.CreatedUS == 60_000:
					wantState, wantErr = DeliveryPending, ""
				case d.ID == held[0].ID:
					wantErr = "status 503"
				case d.ID == probe[0].ID:
					wantErr = "timeout"
				}
				if d.State != wantState || d.LastError != wantErr || (wantErr == "hook paused" && d.Attempts != 0) {
					t.Errorf("delivery %d (queued at %d) = %s %q after %d attempts, want %s %q", d.ID, d.CreatedUS, d.State, d.LastError,
						d.Attempts, wantState, wantErr)
				}
			}

			// The pause ends again, and again: each time, claims on both
			// handles at once take one probe in all.
			var probes []ClaimedDelivery
			var owners []string
			at := int64(100_000)
			for round := range 6 {
				if round > 0 {
					if _, err := a.DeliveryFailed(ctx, probes[0].ID, owners[0], DeliveryFailure{Attempts: 1, NextUS: at, Reason: "timeout",
						AtUS: at, Trip: pauseUntil(at + 10_000), MaxAgeUS: 1_000_000}); err != nil {
						t.Fatal(err)
					}
					at += 10_000
				}
				var mu sync.Mutex
				var wg sync.WaitGroup
				probes, owners = nil, nil
				for w := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						owner := fmt.Sprintf("p3-%d-%d", round, w)
						ds, err := []*DB{a, b}[w%2].ClaimDeliveries(ctx, owner, at, at+1_000_000, 100, ClaimLimits{})
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for _, d := range of(ds, "hk_p") {
							probes, owners = append(probes, d), append(owners, owner)
						}
						mu.Unlock()
					}()
				}
				wg.Wait()
				if len(probes) != 1 {
					t.Fatalf("round %d: concurrent claims after the pause took %d deliveries of the hook, want one probe", round, len(probes))
				}
			}

			// Accepted: the circuit closes and the rest flow.
			done(owners[0], probes)
			if h := circuit(); h.Failures != 0 || h.PausedUntilUS != 0 || h.PauseUS != 0 || h.ProbeUntilUS != 0 {
				t.Fatalf("hook after an accepted probe = %+v", h)
			}
			if p := of(claim(b, "flow", at+1, ClaimLimits{}), "hk_p"); len(p) != 2 {
				t.Fatalf("after the probe was accepted, claimed %d, want the 2 left", len(p))
			}
			if q, err := b.DeliveryQueueStats(ctx); err != nil || q.Paused != 0 {
				t.Fatalf("queue = %+v, %v, want no paused hook", q, err)
			}

			// A redeliver ends a pause, unless it names no dead delivery.
			queue(200_000, 2)
			first := of(claim(a, "r1", 200_000, ClaimLimits{}), "hk_p")
			if len(first) != 2 {
				t.Fatalf("claimed %d, want 2", len(first))
			}
			if _, err := a.DeliveryFailed(ctx, first[0].ID, "r1", DeliveryFailure{Attempts: 1, NextUS: 200_001, Reason: "status 500",
				AtUS: 200_000, Trip: pauseUntil(900_000), MaxAgeUS: 1_000_000}); err != nil {
				t.Fatal(err)
			}
			if err := a.ReleaseDeliveries(ctx, []DeliveryRef{{first[1].ID, "r1"}}); err != nil {
				t.Fatal(err)
			}
			if n, err := a.Redeliver(ctx, "hk_p", first[0].ID, 300_000); err != nil || n != 0 || circuit().PausedUntilUS != 900_000 {
				t.Fatalf("a redeliver of a pending delivery = %d, %v; the hook is paused until %d, want 900000", n, err, circuit().PausedUntilUS)
			}
			if n, err := a.Redeliver(ctx, "hk_p", 0, 300_000); err != nil || n != 6 {
				t.Fatalf("Redeliver = %d, %v, want the 6 dead", n, err)
			}
			if h := circuit(); h.PausedUntilUS != 300_000 || h.PauseUS != 0 {
				t.Fatalf("hook after a redeliver = %+v, want its pause ended at 300000", h)
			}
			if p := of(claim(b, "r2", 300_000, ClaimLimits{}), "hk_p"); len(p) != 1 {
				t.Fatalf("after a redeliver, claimed %d, want one probe", len(p))
			}
		})
	}
}

// oldHookRow is the hooks table before the circuit breaker's columns.
type oldHookRow struct {
	ID         string `gorm:"primaryKey;size:40"`
	Memory     string `gorm:"size:64;not null;index:idx_hooks_memory"`
	URL        string `gorm:"size:2048;not null"`
	Events     string `gorm:"size:2048;not null"`
	Secret     []byte `gorm:"not null"`
	OldSecret  []byte
	OldUntilUS int64 `gorm:"column:old_until_us;not null"`
	CreatedUS  int64 `gorm:"column:created_us;not null"`
}

func (oldHookRow) TableName() string { return "hooks" }

// Opening a database whose hooks table predates the circuit breaker adds
// its columns, closed for the hooks there, which then deliver and pause.
func TestHookCircuitMigration(t *testing.T) {
	for _, dialect := range []string{SQLite, Postgres} {
		t.Run(dialect, func(t *testing.T) {
			ctx := context.Background()
			cfg := Config{Dialect: dialect, DSN: filepath.Join(t.TempDir(), "lethe.db")}
			if dialect == Postgres {
				cfg.DSN = testenv.Postgres(t)
			}
			db, err := Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.gorm.Migrator().DropTable("hooks"); err != nil {
				t.Fatal(err)
			}
			if err := db.gorm.AutoMigrate(&oldHookRow{}); err != nil {
				t.Fatal(err)
			}
			if err := db.gorm.Create(&oldHookRow{ID: "hk_old", Memory: "m", URL: "https://x.test/", Events: "*", Secret: []byte("w"), CreatedUS: 5}).Error; err != nil {
				t.Fatal(err)
			}
			if db.gorm.Migrator().HasColumn(&HookRow{}, "paused_until_us") {
				t.Fatal("the old table has the new columns: the test tests no migration")
			}
			db.Close()

			db, err = Open(ctx, cfg)
			if err != nil {
				t.Fatalf("open over the old hooks table: %v", err)
			}
			defer db.Close()
			h, err := db.Hook(ctx, "m", "hk_old")
			if err != nil || h.URL != "https://x.test/" || h.Failures != 0 || h.PausedUntilUS != 0 || h.PauseUS != 0 || h.ProbeUntilUS != 0 {
				t.Fatalf("the old hook after the migration = %+v, %v", h, err)
			}
			if err := db.AppendEvents(ctx, 1000, []Event{{ID: fmt.Sprintf("%032x", 1), Memory: "m", Type: "grain.forget", Leaf: []byte(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			if _, err := db.AssignSequence(ctx, 10); err != nil {
				t.Fatal(err)
			}
			ds, err := db.ClaimDeliveries(ctx, "o", 2000, 3000, 10, ClaimLimits{})
			if err != nil || len(ds) != 1 {
				t.Fatalf("claim = %d, %v", len(ds), err)
			}
			tr, err := db.DeliveryFailed(ctx, ds[0].ID, "o", DeliveryFailure{Attempts: 1, NextUS: 2001, Reason: "status 500", AtUS: 2000,
				Trip: func(c HookCircuit) HookCircuit {
					return HookCircuit{Failures: c.Failures + 1, PausedUntilUS: 9000, PauseUS: 7000}
				}})
			if err != nil || !tr.Paused || tr.Circuit.Failures != 1 {
				t.Fatalf("failure = %+v, %v", tr, err)
			}
			if ds, err := db.ClaimDeliveries(ctx, "o2", 8999, 10_000, 10, ClaimLimits{}); err != nil || len(ds) != 0 {
				t.Fatalf("claim during the pause = %d, %v", len(ds), err)
			}
		})
	}
}
