package lethe_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// forEachStore runs test against every store opened with cfg.
func forEachStore(t *testing.T, cfg lethe.Config, test func(t *testing.T, db *lethe.DB)) {
	t.Helper()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			c := cfg
			c.DataDir = t.TempDir()
			if name == "postgres" {
				c.PostgresDSN = testenv.Postgres(t)
			}
			test(t, openDB(t, c))
		})
	}
}

func policy(t testing.TB, yaml string) *lethe.Policy {
	t.Helper()
	p, err := lethe.ParsePolicy([]byte(yaml))
	if err != nil {
		t.Fatalf("ParsePolicy: %v", err)
	}
	return p
}

func daysAgo(d float64) time.Time {
	return time.Now().Add(-time.Duration(d * 24 * float64(time.Hour))).UTC()
}

// aged writes a grain created days ago.
func aged(t *testing.T, db *lethe.DB, days float64, g lethe.Grain) string {
	t.Helper()
	g.CreatedAt = daysAgo(days)
	if g.Subject == "" && g.Content == "" {
		g.Subject = fmt.Sprintf("s-%d-%s", time.Now().UnixNano(), g.Type)
	}
	return mustAdd(t, db, g)
}

func snapshot(t *testing.T, db *lethe.DB) string {
	t.Helper()
	db.FlushRetrievals(context.Background())
	s, err := db.StoreSnapshot(context.Background())
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

func exists(t *testing.T, db *lethe.DB, memory, h string) bool {
	t.Helper()
	_, err := db.Get(context.Background(), memory, h)
	switch lethe.ErrorCode(err) {
	case "":
		return true
	case "not_found":
		return false
	}
	t.Fatalf("Get: %v", err)
	return false
}

// leaves returns the parsed audit leaves of type typ (and policy, if set).
func leaves(t *testing.T, db *lethe.DB, typ proofs.EventType, policy string) []*proofs.Leaf {
	t.Helper()
	raw, err := db.AuditLeaves(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []*proofs.Leaf
	for _, b := range raw {
		l, err := proofs.ParseLeaf(b)
		if err != nil {
			t.Fatalf("leaf: %v", err)
		}
		if l.Type == typ && (policy == "" || l.Policy == policy) {
			out = append(out, l)
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestPurgeStale(t *testing.T) {
	forEachStore(t, lethe.Config{}, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		old := aged(t, db, 60, lethe.Grain{Type: "fact", Subject: "old", Tags: []string{"t"}})
		important := aged(t, db, 60, lethe.Grain{Type: "fact", Subject: "important", Importance: 0.8}) // effective age 33 d: 0.46
		state := aged(t, db, 400, lethe.Grain{Type: "state", Subject: "state"})
		young := aged(t, db, 3, lethe.Grain{Type: "fact", Subject: "young"})
		pinned := aged(t, db, 400, lethe.Grain{Type: "fact", Subject: "pinned", Pinned: true})
		caveat := aged(t, db, 400, lethe.Grain{Type: "caveat", Subject: "caveat"})
		fresh := aged(t, db, 1, lethe.Grain{Type: "fact", Subject: "fresh"})
		// A chain whose newest version is old: both versions go.
		v1 := aged(t, db, 100, lethe.Grain{Type: "fact", Subject: "chain", Object: "v1"})
		v2, err := db.Supersede(ctx, v1, lethe.Grain{Type: "fact", Object: "v2", CreatedAt: daysAgo(90)})
		if err != nil {
			t.Fatal(err)
		}
		// A chain whose newest version is new keeps its old versions.
		w1 := aged(t, db, 100, lethe.Grain{Type: "fact", Subject: "kept chain", Object: "w1"})
		w2, err := db.Supersede(ctx, w1, lethe.Grain{Type: "fact", Object: "w2"})
		if err != nil {
			t.Fatal(err)
		}
		other := aged(t, db, 400, lethe.Grain{Memory: "other", Type: "fact", Subject: "other memory"})

		before := snapshot(t, db)
		dry, err := db.PurgeStale(ctx, lethe.PurgeOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if after := snapshot(t, db); after != before {
			t.Fatalf("a dry run changed the store:\nbefore %s\nafter %s", before, after)
		}
		wantGone := []string{old, v1, v2}
		slices.Sort(wantGone)
		if !dry.DryRun || dry.Candidates != 2 || dry.Forgotten != 3 || dry.Protected != 1 || !slices.Equal(dry.Hashes, wantGone) || dry.Receipt != nil {
			t.Errorf("dry run: %+v", dry)
		}

		res, err := db.PurgeStale(ctx, lethe.PurgeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Candidates != 2 || res.Forgotten != 3 || res.Held != 0 || res.Batches != 1 || len(res.Events) != 1 ||
			!slices.Equal(res.Hashes, wantGone) || res.Scanned != 9 {
			t.Errorf("purge: %+v", res)
		}
		for _, h := range wantGone {
			if exists(t, db, "", h) {
				t.Errorf("purged grain %s still exists", h[:8])
			}
		}
		for _, h := range []string{important, state, young, pinned, caveat, fresh, w1, w2} {
			if !exists(t, db, "", h) {
				t.Errorf("grain %s was purged", h[:8])
			}
		}
		if !exists(t, db, "other", other) {
			t.Error("a purge of one memory reached another")
		}
		// Index entries went with the rows.
		if p, _ := db.Recall(ctx, lethe.Query{Tags: []string{"t"}, IncludeArchived: true, IncludeSuperseded: true}); len(p.Grains) != 0 {
			t.Errorf("recall by tag after purge: %d grains", len(p.Grains))
		}
		// The run's receipt proves a policy.run event covering every hash.
		if res.Receipt == nil || res.Proof == nil {
			t.Fatalf("no receipt or proof: %+v", res.Receipt)
		}
		if _, err := proofs.Verify(res.Proof, proofs.VerifyOptions{LogKey: db.AuditKey()}); err != nil {
			t.Errorf("proof: %v", err)
		}
		l, err := proofs.ParseLeaf(res.Leaf)
		if err != nil {
			t.Fatal(err)
		}
		if l.Type != proofs.EventPolicyRun || l.Policy != "decay" || !slices.Equal(sorted(l.Hashes), wantGone) {
			t.Errorf("run leaf: %s", res.Leaf)
		}
		purges := leaves(t, db, proofs.EventGrainPurge, "decay")
		if len(purges) != 1 || purges[0].ID != res.Events[0] || !slices.Equal(sorted(purges[0].Hashes), wantGone) {
			t.Errorf("grain.purge leaves: %d", len(purges))
		}
		// Nothing left: a second run changes nothing and appends nothing.
		again, err := db.PurgeStale(ctx, lethe.PurgeOptions{})
		if err != nil || again.Forgotten != 0 || again.Receipt != nil {
			t.Errorf("second purge: %v %+v", err, again)
		}
		if n := len(leaves(t, db, proofs.EventPolicyRun, "")); n != 1 {
			t.Errorf("%d policy.run events, want 1", n)
		}
	})
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestPurgeCurves(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   lethe.PurgeOptions
		ages   []float64 // days, importance 0
		purged []bool
	}{
		// exponential, half-life 30: 0.354 at 45 d, 0.25 at 60 d
		{"exponential", lethe.PurgeOptions{Curve: lethe.CurveExponential}, []float64{45, 60}, []bool{false, true}},
		// linear, 0.01 per day: 0.4 at 60 d, 0.2 at 80 d
		{"linear", lethe.PurgeOptions{Curve: lethe.CurveLinear}, []float64{60, 80}, []bool{false, true}},
		// ebbinghaus, strength 45: 0.368 at 45 d, 0.264 at 60 d
		{"ebbinghaus", lethe.PurgeOptions{Curve: lethe.CurveEbbinghaus}, []float64{45, 60}, []bool{false, true}},
		// overrides: half-life 10 makes 30 d old grains stale (0.125)
		{"half-life", lethe.PurgeOptions{HalfLifeDays: 10}, []float64{10, 30}, []bool{false, true}},
		// threshold 0.6: 0.5 at 30 d is below it
		{"threshold", lethe.PurgeOptions{Threshold: ptr(0.6)}, []float64{15, 30}, []bool{false, true}},
		// min age 0 and threshold 1: everything, even new grains
		{"min age", lethe.PurgeOptions{Threshold: ptr(1.0), MinAgeDays: ptr(0)}, []float64{0.01, 2}, []bool{true, true}},
		// the default min age (7 d) keeps a grain purged by retention alone
		{"default min age", lethe.PurgeOptions{Threshold: ptr(1.0)}, []float64{6, 8}, []bool{false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachStore(t, lethe.Config{}, func(t *testing.T, db *lethe.DB) {
				var hs []string
				for _, d := range tc.ages {
					hs = append(hs, aged(t, db, d, lethe.Grain{Type: "fact", Subject: fmt.Sprintf("age %v", d)}))
				}
				res, err := db.PurgeStale(context.Background(), tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				for i, h := range hs {
					if gone := !exists(t, db, "", h); gone != tc.purged[i] {
						t.Errorf("grain of %v days: purged %v, want %v (%+v)", tc.ages[i], gone, tc.purged[i], res)
					}
				}
			})
		})
	}
}

func TestPurgeImportanceAndNamespace(t *testing.T) {
	forEachStore(t, lethe.Config{}, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		// 90 days at importance 0.5 is an effective age of 60 days (0.25):
		// purged; at importance 0.8 it is 50 days (0.315): kept.
		half := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "half", Importance: 0.5})
		more := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "more", Importance: 0.8})
		crm := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "crm", Namespace: "crm"})
		res, err := db.PurgeStale(ctx, lethe.PurgeOptions{Namespace: "default"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Forgotten != 1 || exists(t, db, "", half) || !exists(t, db, "", more) || !exists(t, db, "", crm) {
			t.Errorf("purge of namespace default: %+v", res)
		}
		if _, err := db.PurgeStale(ctx, lethe.PurgeOptions{Namespace: "crm"}); err != nil || exists(t, db, "", crm) {
			t.Errorf("purge of namespace crm: %v", err)
		}
		_, err = db.PurgeStale(ctx, lethe.PurgeOptions{Threshold: ptr(1.5)})
		wantCode(t, err, "invalid_argument")
		_, err = db.PurgeStale(ctx, lethe.PurgeOptions{Curve: "cubic"})
		wantCode(t, err, "invalid_argument")
		_, err = db.PurgeStale(ctx, lethe.PurgeOptions{Memory: "Bad Memory"})
		wantCode(t, err, "invalid_memory")
	})
}

func TestPurgeBatches(t *testing.T) {
	forEachStore(t, lethe.Config{}, func(t *testing.T, db *lethe.DB) {
		var batch []lethe.Grain
		for i := range 25 {
			batch = append(batch, lethe.Grain{Type: "event", Content: fmt.Sprintf("old event %d", i), CreatedAt: daysAgo(200)})
		}
		if _, err := db.AddBatch(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		res, err := db.PurgeStale(context.Background(), lethe.PurgeOptions{Batch: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Forgotten != 25 || res.Batches != 3 || len(res.Events) != 3 {
			t.Errorf("purge in batches of 10: %+v", res)
		}
		if n := len(leaves(t, db, proofs.EventGrainPurge, "decay")); n != 3 {
			t.Errorf("%d grain.purge events, want 3", n)
		}
	})
}

func TestPurgeHolds(t *testing.T) {
	forEachStore(t, lethe.Config{}, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		held := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "held", Scope: "legal/case1"})
		heldUser := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "held user", UserID: "u1"})
		free := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "free", Scope: "free"})
		// A chain that left the held scope: its old version keeps it whole.
		c1 := aged(t, db, 120, lethe.Grain{Type: "fact", Subject: "moved", Scope: "legal"})
		c2, err := db.Supersede(ctx, c1, lethe.Grain{Type: "fact", Scope: "free", Object: "moved", CreatedAt: daysAgo(100)})
		if err != nil {
			t.Fatal(err)
		}
		hold, err := db.SetHold(ctx, lethe.HoldSpec{Scope: "legal"})
		if err != nil {
			t.Fatal(err)
		}
		uhold, err := db.SetHold(ctx, lethe.HoldSpec{UserID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		dry, err := db.PurgeStale(ctx, lethe.PurgeOptions{DryRun: true})
		if err != nil || dry.Held != 3 || dry.Forgotten != 1 {
			t.Errorf("dry run under holds: %v %+v", err, dry)
		}
		res, err := db.PurgeStale(ctx, lethe.PurgeOptions{})
		if err != nil {
			t.Fatalf("a hold failed the purge: %v", err)
		}
		if res.Held != 3 || res.Forgotten != 1 || !slices.Equal(res.Hashes, []string{free}) {
			t.Errorf("purge under holds: %+v", res)
		}
		for _, h := range []string{held, heldUser, c1, c2} {
			if !exists(t, db, "", h) {
				t.Errorf("held grain %s was purged", h[:8])
			}
		}
		refused := leaves(t, db, proofs.EventErasureRefused, "decay")
		holds := map[string]int{}
		for _, l := range refused {
			if l.Reason != "held" {
				t.Errorf("refusal reason %q", l.Reason)
			}
			holds[l.Hold] += int(l.GrainCount())
		}
		if holds[hold.ID] != 2 || holds[uhold.ID] != 1 {
			t.Errorf("refusals by hold: %v", holds)
		}
		// Released, the grains go.
		if err := db.ReleaseHold(ctx, "", hold.ID); err != nil {
			t.Fatal(err)
		}
		res, err = db.PurgeStale(ctx, lethe.PurgeOptions{})
		if err != nil || res.Forgotten != 3 || res.Held != 1 {
			t.Errorf("purge after release: %v %+v", err, res)
		}
	})
}

func TestArchiveLadder(t *testing.T) {
	cfg := lethe.Config{Policy: policy(t, "ladder:\n  soft_limit: 6\n  triggers: [ingest_complete, cron, memory_pressure]\n")}
	forEachStore(t, cfg, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		low := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "low", Salience: 0.04})
		lowPinned := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "low pinned", Salience: 0.01, Pinned: true})
		lowGoal := mustAdd(t, db, lethe.Grain{Type: "goal", Subject: "low goal", Salience: 0.01})
		high := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "high"})
		heldLow := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "held low", Salience: 0.02, Scope: "legal"})
		if _, err := db.SetHold(ctx, lethe.HoldSpec{Scope: "legal"}); err != nil {
			t.Fatal(err)
		}

		// Below the soft limit, only memory_pressure runs.
		for _, tr := range []lethe.Trigger{lethe.TriggerIngestComplete, lethe.TriggerCron, lethe.TriggerQueryComplete} {
			res, err := db.Archive(ctx, "", lethe.ArchiveOptions{Trigger: tr})
			if err != nil || res.Ran || res.Live != 5 {
				t.Errorf("%s below the soft limit: %v %+v", tr, err, res)
			}
		}
		_, err := db.Archive(ctx, "", lethe.ArchiveOptions{Trigger: "sometimes"})
		wantCode(t, err, "invalid_argument")

		before := snapshot(t, db)
		dry, err := db.Archive(ctx, "", lethe.ArchiveOptions{Trigger: lethe.TriggerMemoryPressure, DryRun: true})
		if err != nil || !dry.Ran || dry.Archived != 2 || dry.Protected != 1 {
			t.Errorf("dry run: %v %+v", err, dry)
		}
		if snapshot(t, db) != before {
			t.Fatal("a dry run changed the store")
		}
		res, err := db.Archive(ctx, "", lethe.ArchiveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Ran || res.Trigger != lethe.TriggerMemoryPressure || res.Archived != 2 || res.Protected != 1 ||
			!slices.Equal(res.Hashes, sorted([]string{low, heldLow})) || res.Receipt == nil {
			t.Errorf("memory_pressure run: %+v", res)
		}
		g, err := db.Get(ctx, "", low)
		if err != nil || !g.Archived || g.Salience != 0.02 {
			t.Errorf("archived grain: %v %+v", err, g)
		}
		// Hidden from default recall, reachable with the flag.
		p, _ := db.Recall(ctx, lethe.Query{Subject: "low"})
		if len(p.Grains) != 0 {
			t.Errorf("default recall returned an archived grain")
		}
		p, _ = db.Recall(ctx, lethe.Query{Subject: "low", IncludeArchived: true})
		if len(p.Grains) != 1 || !p.Grains[0].Archived {
			t.Errorf("recall with archived: %+v", p.Grains)
		}
		for _, h := range []string{lowPinned, lowGoal, high} {
			if g, _ := db.Get(ctx, "", h); g.Archived {
				t.Errorf("grain %s was archived", g.Subject)
			}
		}
		if ev := leaves(t, db, proofs.EventGrainArchive, "ladder"); len(ev) != 1 || ev[0].Reason != "memory_pressure" {
			t.Errorf("grain.archive events: %d", len(ev))
		}
		if ev := leaves(t, db, proofs.EventPolicyRun, "ladder"); len(ev) != 1 || ev[0].GrainCount() != 2 {
			t.Errorf("policy.run events: %d", len(ev))
		}

		// At the soft limit, ingest_complete runs; query_complete is not in
		// this policy's triggers.
		for i := range 4 {
			mustAdd(t, db, lethe.Grain{Type: "fact", Subject: fmt.Sprintf("more %d", i), Salience: 0.03})
		}
		res, err = db.Archive(ctx, "", lethe.ArchiveOptions{Trigger: lethe.TriggerQueryComplete})
		if err != nil || res.Ran {
			t.Errorf("query_complete not in triggers: %v %+v", err, res)
		}
		res, err = db.Archive(ctx, "", lethe.ArchiveOptions{Trigger: lethe.TriggerIngestComplete})
		if err != nil || !res.Ran || res.Live != 7 || res.Archived != 4 {
			t.Errorf("ingest_complete at the soft limit: %v %+v", err, res)
		}
	})
}

func TestArchiveScanBound(t *testing.T) {
	cfg := lethe.Config{Policy: policy(t, "ladder:\n  scan_bound: 3\n")}
	forEachStore(t, cfg, func(t *testing.T, db *lethe.DB) {
		for i := range 5 {
			mustAdd(t, db, lethe.Grain{Type: "fact", Subject: fmt.Sprintf("low %d", i), Salience: 0.01})
		}
		res, err := db.Archive(context.Background(), "", lethe.ArchiveOptions{})
		if err != nil || res.Scanned != 3 || res.Archived != 3 {
			t.Errorf("scan bound 3: %v %+v", err, res)
		}
		res, err = db.Archive(context.Background(), "", lethe.ArchiveOptions{})
		if err != nil || res.Archived != 2 {
			t.Errorf("second run: %v %+v", err, res)
		}
	})
}

func TestArchiveGrains(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		a := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "a"})
		b := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "b", Pinned: true})
		res, err := db.ArchiveGrains(ctx, "", []string{a, b, strings.Repeat("0", 64)})
		if err != nil || res.Archived != 2 || res.Proof == nil {
			t.Fatalf("ArchiveGrains: %v %+v", err, res)
		}
		if g, _ := db.Get(ctx, "", a); !g.Archived || g.Salience != 1 {
			t.Errorf("explicitly archived grain: %+v", g)
		}
		res, err = db.ArchiveGrains(ctx, "", []string{a})
		if err != nil || res.Archived != 0 || res.Receipt != nil {
			t.Errorf("archiving again: %v %+v", err, res)
		}
		_, err = db.ArchiveGrains(ctx, "", []string{strings.Repeat("1", 64)})
		wantCode(t, err, "not_found")
		_, err = db.ArchiveGrains(ctx, "", nil)
		wantCode(t, err, "empty_selector")
		_, err = db.ArchiveGrains(ctx, "", []string{"zz"})
		wantCode(t, err, "invalid_argument")
	})
}

// eventually polls cond until it holds or 5 seconds pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRetrievalTracking(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "tracked", Salience: 0.5})
		arch := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "tracked", Object: "archived", Salience: 0.01})
		if _, err := db.ArchiveGrains(ctx, "", []string{arch}); err != nil {
			t.Fatal(err)
		}
		start := time.Now().Add(-time.Second)
		for range 3 {
			if p, err := db.Recall(ctx, lethe.Query{Subject: "tracked", IncludeArchived: true}); err != nil || len(p.Grains) != 2 {
				t.Fatalf("Recall: %v", err)
			}
		}
		// Without a flush: the statistics show up in the background.
		eventually(t, "retrieval statistics", func() bool {
			g, err := db.Get(ctx, "", h)
			return err == nil && g.RetrievalCount == 3
		})
		g, _ := db.Get(ctx, "", h)
		if g.LastRetrievedAt == nil || g.LastRetrievedAt.Before(start) || fmt.Sprintf("%.2f", g.Salience) != "0.80" {
			t.Errorf("after 3 retrievals: last %v salience %v", g.LastRetrievedAt, g.Salience)
		}
		// Bumping an archived grain does not unarchive it.
		a, _ := db.Get(ctx, "", arch)
		if !a.Archived || a.RetrievalCount != 3 || fmt.Sprintf("%.2f", a.Salience) != "0.31" {
			t.Errorf("archived grain after retrievals: %+v", a)
		}
		// Get is a lookup, not a retrieval.
		db.FlushRetrievals(context.Background())
		if g, _ := db.Get(ctx, "", h); g.RetrievalCount != 3 {
			t.Errorf("Get counted as a retrieval: %d", g.RetrievalCount)
		}
		if n := db.DroppedRetrievals(); n != 0 {
			t.Errorf("%d retrieval updates dropped", n)
		}
	})
}

func TestRetrievalFlushedOnClose(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			cfg := lethe.Config{DataDir: t.TempDir()}
			if name == "postgres" {
				cfg.PostgresDSN = testenv.Postgres(t)
			}
			ctx := context.Background()
			db, err := lethe.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "flushed"})
			if _, err := db.Recall(ctx, lethe.Query{Subject: "flushed"}); err != nil {
				t.Fatal(err)
			}
			collectLeaves(t, db)
			db.Close()
			db = openDB(t, cfg)
			if g, err := db.Get(ctx, "", h); err != nil || g.RetrievalCount != 1 {
				t.Errorf("after Close: %v %+v", err, g)
			}
		})
	}
}

func TestRecallRanking(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		// Written in this order: newest id last.
		fresh := aged(t, db, 0, lethe.Grain{Type: "fact", Subject: "ranked", Object: "fresh"})
		stale := aged(t, db, 300, lethe.Grain{Type: "fact", Subject: "ranked", Object: "stale"})  // score 0.17
		middle := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "ranked", Object: "middle"}) // score 0.75
		pinned := aged(t, db, 300, lethe.Grain{Type: "fact", Subject: "ranked", Object: "pinned", Pinned: true})
		p, err := db.Recall(ctx, lethe.Query{Subject: "ranked"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range p.Grains {
			got = append(got, g.Hash)
		}
		// Pinned and fresh score 1 (newest first between them), then by decay.
		if want := []string{pinned, fresh, middle, stale}; !slices.Equal(got, want) {
			t.Errorf("ranked recall = %v, want %v", short(got), short(want))
		}
		// A listing stays newest first.
		p, err = db.Recall(ctx, lethe.Query{})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, g := range p.Grains {
			got = append(got, g.Hash)
		}
		if want := []string{pinned, middle, stale, fresh}; !slices.Equal(got, want) {
			t.Errorf("listing = %v, want %v", short(got), short(want))
		}
	})
}

func short(hs []string) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h[:8]
	}
	return out
}

func TestShouldArchive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		forgotten := aged(t, db, 400, lethe.Grain{Type: "fact", Subject: "never retrieved"})
		aged(t, db, 400, lethe.Grain{Type: "fact", Subject: "pinned", Pinned: true})
		aged(t, db, 400, lethe.Grain{Type: "caveat", Subject: "caveat"})
		aged(t, db, 100, lethe.Grain{Type: "fact", Subject: "recent"})
		got, err := db.ShouldArchive(ctx, "")
		if err != nil || !slices.Equal(got, []string{forgotten}) {
			t.Errorf("ShouldArchive = %v, %v; want [%s]", got, err, forgotten[:8])
		}
	})
}

func TestAutoPin(t *testing.T) {
	cfg := lethe.Config{Policy: policy(t, `auto_pin:
  - {name: allergy, field: content, pattern: '(?i)\ballerg(y|ies|ic)\b'}
  - {name: vip, field: tags, pattern: '(^|,)vip(,|$)'}
`)}
	forEachStore(t, cfg, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		for _, tc := range []struct {
			g    lethe.Grain
			want bool
		}{
			{lethe.Grain{Type: "fact", Content: "Allergic to peanuts"}, true},
			{lethe.Grain{Type: "fact", Subject: "x", Tags: []string{"a", "vip"}}, true},
			{lethe.Grain{Type: "fact", Content: "likes peanuts"}, false},
			{lethe.Grain{Type: "fact", Subject: "y", Tags: []string{"vipish"}}, false},
		} {
			h := mustAdd(t, db, tc.g)
			if g, _ := db.Get(ctx, "", h); g.Pinned != tc.want {
				t.Errorf("%+v: pinned %v, want %v", tc.g, g.Pinned, tc.want)
			}
		}
		// A new version that matches is pinned too.
		h := mustAdd(t, db, lethe.Grain{Type: "fact", Content: "plain"})
		h2, err := db.Supersede(ctx, h, lethe.Grain{Type: "fact", Content: "severe allergy"})
		if err != nil {
			t.Fatal(err)
		}
		if g, _ := db.Get(ctx, "", h2); !g.Pinned {
			t.Error("superseding version not auto-pinned")
		}
	})
}

func TestForgetProtected(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		caveat := mustAdd(t, db, lethe.Grain{Type: "caveat", Subject: "careful"})
		pinned := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "pinned", Pinned: true})
		important := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "important", Importance: 0.95})
		plain := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "plain"})
		// An old version whose newest version is pinned.
		v1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "chain"})
		if _, err := db.Supersede(ctx, v1, lethe.Grain{Type: "fact", Object: "v2", Pinned: true}); err != nil {
			t.Fatal(err)
		}

		for _, sel := range []lethe.Selector{{Hash: caveat}, {Hashes: []string{plain, pinned}}, {Hash: important}, {Hash: v1}} {
			_, err := db.Forget(ctx, sel)
			wantCode(t, err, "protected")
			var le *lethe.Error
			if !errors.As(err, &le) || le.Hint == "" || !strings.Contains(le.Message, "cannot forget a protected grain") {
				t.Errorf("refusal without a reason or hint: %v", err)
			}
		}
		if !exists(t, db, "", plain) {
			t.Error("a refused forget deleted a grain")
		}
		if n := len(leaves(t, db, proofs.EventErasureRefused, "")); n != 4 {
			t.Errorf("%d refusals audited, want 4", n)
		}
		for _, l := range leaves(t, db, proofs.EventErasureRefused, "") {
			if l.Reason != "protected" {
				t.Errorf("refusal reason %q", l.Reason)
			}
		}
		// A forget by subject is an erasure request about a person: not refused.
		if res, err := db.Forget(ctx, lethe.Selector{Subject: "careful"}); err != nil || res.Count != 1 {
			t.Errorf("forget by subject of a caveat: %v %+v", err, res)
		}
		// A forced forget overrides protection and says so in its event.
		res, err := db.ForceForget(ctx, lethe.Selector{Hash: pinned})
		if err != nil || res.Count != 1 {
			t.Fatalf("ForceForget: %v %+v", err, res)
		}
		l, _ := proofs.ParseLeaf(res.Leaf)
		if l.Reason != "protection_override" {
			t.Errorf("forced forget leaf: %s", res.Leaf)
		}
		// Holds still refuse a forced forget.
		held := mustAdd(t, db, lethe.Grain{Type: "goal", Subject: "held goal", Scope: "legal"})
		if _, err := db.SetHold(ctx, lethe.HoldSpec{Scope: "legal"}); err != nil {
			t.Fatal(err)
		}
		_, err = db.ForceForget(ctx, lethe.Selector{Hash: held})
		wantCode(t, err, "held")
		if res, err := db.Forget(ctx, lethe.Selector{Hash: plain}); err != nil || res.Count != 1 {
			t.Errorf("forget of an unprotected grain: %v", err)
		}
	})
}

func TestRiskSweep(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		// Never retrieved, importance 0: risk 60 at 30 days (compress), 360 at
		// 90 days (drop), 13 at 10 days (none).
		compress := aged(t, db, 30, lethe.Grain{Type: "fact", Subject: "summarize me", Relation: "said", Object: "things",
			Content: "a long story", Tags: []string{"x"}, UserID: "u1", Scope: "acme"})
		drop := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "drop me"})
		keep := aged(t, db, 10, lethe.Grain{Type: "fact", Subject: "keep me"})
		caveat := aged(t, db, 90, lethe.Grain{Type: "caveat", Subject: "protected"})
		important := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "important", Importance: 0.9}) // risk 36: nothing to protect from
		textOnly := aged(t, db, 30, lethe.Grain{Type: "fact", Content: "text only"})
		heldDrop := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "held", Scope: "legal"})
		heldCompress := aged(t, db, 30, lethe.Grain{Type: "fact", Subject: "held", Content: "held text", Scope: "legal"})
		// A chain whose newest version is compressed keeps its history.
		c1 := aged(t, db, 40, lethe.Grain{Type: "fact", Subject: "chained", Content: "first"})
		c2, err := db.Supersede(ctx, c1, lethe.Grain{Type: "fact", Content: "second", CreatedAt: daysAgo(30)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.SetHold(ctx, lethe.HoldSpec{Scope: "legal"}); err != nil {
			t.Fatal(err)
		}

		before := snapshot(t, db)
		dry, err := db.RiskSweep(ctx, "", lethe.RiskOptions{DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if snapshot(t, db) != before {
			t.Fatal("a dry run changed the store")
		}
		if dry.Compressed != 2 || dry.Dropped != 1 || dry.Protected != 1 || dry.Held != 2 || dry.Kept != 1 {
			t.Errorf("dry run: %+v", dry)
		}

		res, err := db.RiskSweep(ctx, "", lethe.RiskOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Compressed != 2 || res.Dropped != 1 || res.Protected != 1 || res.Held != 2 || res.Kept != 1 || res.Proof == nil {
			t.Errorf("sweep: %+v", res)
		}
		for _, h := range []string{drop, compress, c2} {
			if exists(t, db, "", h) {
				t.Errorf("grain %s survived", h[:8])
			}
		}
		for _, h := range []string{keep, caveat, important, textOnly, heldDrop, heldCompress, c1} {
			if !exists(t, db, "", h) {
				t.Errorf("grain %s was removed", h[:8])
			}
		}
		// The summary keeps the triple, tags, user and scope, not the content.
		p, err := db.Recall(ctx, lethe.Query{Subject: "summarize me", UserID: "u1", Tags: []string{"x"}})
		if err != nil || len(p.Grains) != 1 {
			t.Fatalf("recall of the summary: %v %d", err, len(p.Grains))
		}
		sum := p.Grains[0]
		if sum.Content != "" || sum.Object != "things" || sum.Scope != "acme" || sum.CreatedAt.Before(daysAgo(31)) || sum.CreatedAt.After(daysAgo(29)) {
			t.Errorf("summary: %+v", sum)
		}
		// The chain keeps both versions; the newest is the summary.
		p, _ = db.Recall(ctx, lethe.Query{Subject: "chained"})
		if len(p.Grains) != 1 || p.Grains[0].Content != "" {
			t.Fatalf("recall of the compressed chain: %+v", p.Grains)
		}
		hist, err := db.History(ctx, "", c1)
		if err != nil || len(hist) != 2 || hist[0].Hash != p.Grains[0].Hash || hist[1].Hash != c1 || hist[1].Content != "first" {
			t.Errorf("history after compress: %v %+v", err, hist)
		}
		ev := leaves(t, db, proofs.EventGrainSupersede, "risk")
		if len(ev) != 1 || ev[0].Reason != "compressed" || len(ev[0].Hashes) != 4 {
			t.Errorf("compress events: %+v", ev)
		}
		if ev := leaves(t, db, proofs.EventGrainPurge, "risk"); len(ev) != 1 || !slices.Equal(ev[0].Hashes, []string{drop}) {
			t.Errorf("drop events: %+v", ev)
		}
		if ev := leaves(t, db, proofs.EventErasureRefused, "risk"); len(ev) != 2 {
			t.Errorf("refusals: %d", len(ev))
		}
		// Compressed grains are not compressed again.
		again, err := db.RiskSweep(ctx, "", lethe.RiskOptions{})
		if err != nil || again.Compressed != 0 || again.Dropped != 0 {
			t.Errorf("second sweep: %v %+v", err, again)
		}
	})
}

func TestPolicyFiles(t *testing.T) {
	p, err := lethe.LoadPolicy("policies/default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Decay.HalfLifeDays != 30 || p.Ladder.SoftLimit != 500 {
		t.Errorf("default policy: %+v", p)
	}
	_, err = lethe.ParsePolicy([]byte("decay:\n  threshold: 2\n"))
	if pe := (*lethe.PolicyError)(nil); !errors.As(err, &pe) {
		t.Errorf("invalid policy: %v", err)
	}
	bad := *lethe.DefaultPolicy()
	bad.Decay.Batch = 0
	_, err = lethe.Open(context.Background(), lethe.Config{DataDir: t.TempDir(), Policy: &bad})
	if err == nil || !strings.Contains(err.Error(), "decay.batch") {
		t.Errorf("Open with an invalid policy: %v", err)
	}
}

func TestScheduler(t *testing.T) {
	pol := policy(t, "decay:\n  enabled: true\n  schedule: 1h\n")
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		db := openDB(t, lethe.Config{DataDir: dir})
		old := aged(t, db, 90, lethe.Grain{Type: "fact", Subject: "scheduled"})
		sched := openDB(t, lethe.Config{DataDir: dir, Policy: pol, Schedule: true})
		eventually(t, "scheduled purge", func() bool { return !exists(t, sched, "", old) })
	})
	t.Run("postgres replicas", func(t *testing.T) {
		dsn := testenv.Postgres(t)
		dir := t.TempDir()
		db := openDB(t, lethe.Config{DataDir: dir, PostgresDSN: dsn})
		var hs []string
		for _, m := range []string{"default", "second"} {
			hs = append(hs, aged(t, db, 90, lethe.Grain{Memory: m, Type: "fact", Subject: "scheduled " + m}))
		}
		a := openDB(t, lethe.Config{DataDir: dir, PostgresDSN: dsn, Policy: pol, Schedule: true})
		b := openDB(t, lethe.Config{DataDir: dir, PostgresDSN: dsn, Policy: pol, Schedule: true})
		eventually(t, "scheduled purge", func() bool { return !exists(t, a, "default", hs[0]) && !exists(t, b, "second", hs[1]) })
		// Give the other replica time to (wrongly) run too, then count runs.
		time.Sleep(300 * time.Millisecond)
		if n := len(leaves(t, a, proofs.EventPolicyRun, "decay")); n != 2 {
			t.Errorf("%d decay runs, want 2 (one per memory, by one replica)", n)
		}
	})
}

// The erase counters stay exact through purges and compressions.
func TestPoliciesKeepCounters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		for i := range 3 {
			aged(t, db, 90+float64(i), lethe.Grain{Type: "fact", Subject: fmt.Sprintf("stale %d", i), UserID: "u9", Scope: "acme/x"})
		}
		aged(t, db, 1, lethe.Grain{Type: "fact", Subject: "fresh", UserID: "u9", Scope: "acme/x"})
		aged(t, db, 30, lethe.Grain{Type: "fact", Subject: "compress", Relation: "r", Content: "text", UserID: "u9", Scope: "acme/y"})
		if res, err := db.PurgeStale(ctx, lethe.PurgeOptions{}); err != nil || res.Forgotten != 3 {
			t.Fatalf("purge: %v %+v", err, res)
		}
		if res, err := db.RiskSweep(ctx, "", lethe.RiskOptions{}); err != nil || res.Compressed != 1 {
			t.Fatalf("risk sweep: %v %+v", err, res)
		}
		// Left: the fresh grain and the summary.
		er, err := db.ForgetUser(ctx, "", "u9")
		if err != nil || er.Count != 2 {
			t.Errorf("erase user after purge and compress: %v count %d, want 2", err, er.Count)
		}
	})
}

// BenchmarkPurgeScan measures a dry-run decay purge over a memory of
// synthetic rows on PostgreSQL: the scan of the operational columns and the
// policy decisions, no blob read, no key used. The rows are bulk-inserted
// with SQL (their blobs are random bytes nobody opens); about half are
// candidates. LETHE_BENCH_PURGE_ROWS sets the count (default 1,000,000).
func BenchmarkPurgeScan(b *testing.B) {
	n := 1000000
	if s := os.Getenv("LETHE_BENCH_PURGE_ROWS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	dsn := testenv.Postgres(b)
	db, err := lethe.Open(ctx, lethe.Config{DataDir: b.TempDir(), PostgresDSN: dsn})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	start := time.Now()
	now := time.Now().UnixMicro()
	const day = int64(24 * time.Hour / time.Microsecond)
	for lo := 1; lo <= n; lo += 100000 {
		hi := min(lo+99999, n)
		// Ages spread over 0 to 120 days; importance 0 to 0.5.
		if _, err := conn.Exec(ctx, `INSERT INTO grains (hash, memory, type, namespace, scope, importance, confidence, salience,
  pinned, archived, created_us, last_retrieved_us, retrieval_count, supersedes, superseded_by, key_chain, user_key_id,
  s_tok, r_tok, o_tok, dedup_tok, blob)
SELECT encode(sha256(int8send(i)), 'hex'), 'bench', 'fact', 'default', 'acme/prod', (i % 6) / 10.0, 1, 1,
  false, false, $3 - (i % 120) * $4 - (i % 997) * 1000, 0, 0, '', '', '1.2', 0,
  substr(sha256(int8send(i) || '\x73'::bytea), 1, 16), substr(sha256('\x72'::bytea), 1, 16),
  substr(sha256(int8send(i) || '\x6f'::bytea), 1, 16), substr(sha256(int8send(i) || '\x64'::bytea), 1, 16),
  decode(repeat(md5(i::text), 6), 'hex')
FROM generate_series($1::bigint, $2::bigint) AS i`, lo, hi, now, day); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, "ANALYZE grains"); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d rows in %v", n, time.Since(start).Round(time.Millisecond))
	var res *lethe.PurgeResult
	for b.Loop() {
		if res, err = db.PurgeStale(ctx, lethe.PurgeOptions{Memory: "bench", DryRun: true}); err != nil {
			b.Fatal(err)
		}
	}
	if res.Scanned != n {
		b.Fatalf("scanned %d rows, want %d", res.Scanned, n)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(res.Candidates), "candidates")
}

// Under the scheduler, writes and recalls fire the ladder's triggers.
func TestSchedulerTriggers(t *testing.T) {
	for _, tc := range []struct {
		trigger string
		fire    func(t *testing.T, db *lethe.DB)
	}{
		{"ingest_complete", func(t *testing.T, db *lethe.DB) {}},
		{"query_complete", func(t *testing.T, db *lethe.DB) {
			if _, err := db.Recall(context.Background(), lethe.Query{Subject: "someone else"}); err != nil {
				t.Fatal(err)
			}
			mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "someone else"})
			if _, err := db.Recall(context.Background(), lethe.Query{Subject: "someone else"}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.trigger, func(t *testing.T) {
			pol := policy(t, "ladder:\n  soft_limit: 1\n  triggers: ["+tc.trigger+"]\n")
			forEachStore(t, lethe.Config{Policy: pol, Schedule: true}, func(t *testing.T, db *lethe.DB) {
				h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "faint", Salience: 0.01})
				tc.fire(t, db)
				eventually(t, tc.trigger+" archive", func() bool {
					g, err := db.Get(context.Background(), "", h)
					return err == nil && g.Archived
				})
				// The policy.run event closes the run: it commits after the
				// archive, so it may not be there yet.
				eventually(t, tc.trigger+" policy.run event", func() bool {
					return len(leaves(t, db, proofs.EventPolicyRun, "ladder")) > 0
				})
				if ev := leaves(t, db, proofs.EventPolicyRun, "ladder"); len(ev) != 1 || ev[0].Reason != tc.trigger {
					t.Errorf("ladder runs: %d", len(ev))
				}
			})
		})
	}
}

// TestFlushRetrievalsWritesNowAndAfterClose checks FlushRetrievals: the
// statistics of a recall are stored when it returns (the tracker's interval
// has not passed), and after Close it returns at once instead of waiting
// for a tracker that has stopped.
func TestFlushRetrievalsWritesNowAndAfterClose(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, lethe.Config{DataDir: t.TempDir()})
	h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "flush-me", Relation: "is", Object: "recalled"})
	for range 3 {
		if p, err := db.Recall(ctx, lethe.Query{Subject: "flush-me"}); err != nil || len(p.Grains) != 1 {
			t.Fatalf("recall: %+v, %v", p, err)
		}
	}
	if err := db.FlushRetrievals(ctx); err != nil {
		t.Fatal(err)
	}
	g, err := db.Get(ctx, "default", h)
	if err != nil || g.RetrievalCount != 3 {
		t.Fatalf("after FlushRetrievals: retrieval count %d (%v), want 3", g.RetrievalCount, err)
	}
	db.Close()
	done := make(chan error, 1)
	go func() { done <- db.FlushRetrievals(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("FlushRetrievals after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FlushRetrievals after Close did not return")
	}
}

// TestPoliciesSpareProtectedOlderVersions: a chain whose newest version no
// rule protects, but whose older version one does (pinned, then a new
// version unpinned on purpose; a protected type, then a fact), is kept
// whole by the decay purge and the risk sweep's drops, dry runs included,
// as an explicit forget of it is refused: no policy touches a protected
// grain. A chain of the same age with no protected version goes.
func TestPoliciesSpareProtectedOlderVersions(t *testing.T) {
	for _, run := range []string{"purge", "risk"} {
		t.Run(run, func(t *testing.T) {
			forEachStore(t, lethe.Config{}, func(t *testing.T, db *lethe.DB) {
				ctx := context.Background()
				chain := func(first lethe.Grain, set ...string) (string, string) {
					t.Helper()
					v1 := aged(t, db, 100, first)
					v2, err := db.Supersede(ctx, v1, lethe.Grain{Type: "fact", Object: "v2", CreatedAt: daysAgo(90)}, set...)
					if err != nil {
						t.Fatal(err)
					}
					return v1, v2
				}
				p1, p2 := chain(lethe.Grain{Type: "fact", Subject: "pinned once", Pinned: true}, "pinned")
				c1, c2 := chain(lethe.Grain{Type: "caveat", Subject: "a caveat once"})
				o1, o2 := chain(lethe.Grain{Type: "fact", Subject: "plain"})
				kept := []string{p1, p2, c1, c2}
				_, err := db.Forget(ctx, lethe.Selector{Hash: p2})
				wantCode(t, err, lethe.CodeProtected)
				gone := []string{o1, o2}
				slices.Sort(gone)
				for _, dry := range []bool{true, false} {
					var hashes []string
					var protected int
					switch run {
					case "purge":
						res, err := db.PurgeStale(ctx, lethe.PurgeOptions{DryRun: dry})
						if err != nil {
							t.Fatal(err)
						}
						hashes, protected = res.Hashes, res.Protected
						if res.Candidates != 1 || res.Forgotten != 2 {
							t.Errorf("dry run %v: %+v; want 1 candidate, 2 forgotten", dry, res)
						}
					case "risk":
						res, err := db.RiskSweep(ctx, "", lethe.RiskOptions{DryRun: dry})
						if err != nil {
							t.Fatal(err)
						}
						protected = res.Protected
						var drops []string
						for _, it := range res.Items {
							if it.Action == "drop" {
								drops = append(drops, it.Hash)
							}
						}
						// Items name the newest versions; Dropped counts every version.
						if res.Dropped != 2 || !slices.Equal(drops, []string{o2}) {
							t.Errorf("dry run %v: %+v; want %s dropped, 2 grains", dry, res, o2[:8])
						}
						hashes = gone
					}
					if !slices.Equal(hashes, gone) {
						t.Errorf("dry run %v: forgot %v; want %v", dry, hashes, gone)
					}
					if protected != 2 {
						t.Errorf("dry run %v: %d protected; want 2 (the chains with a protected older version)", dry, protected)
					}
				}
				for _, h := range kept {
					if !exists(t, db, "", h) {
						t.Errorf("%s, of a chain with a protected version, was forgotten", h[:8])
					}
				}
				for _, h := range gone {
					if exists(t, db, "", h) {
						t.Errorf("%s still there", h[:8])
					}
				}
			})
		})
	}
}

// TestPoliciesSkipErasedRows: rows a user erasure made unreadable, which
// the cleaner has not deleted yet, are already gone: the decay purge and
// the risk sweep, dry runs included, neither count nor act on them (the
// purge deleted them and named them in its grain.purge event as grains it
// forgot, so a DPO's report counted grains erased before it ran); nor
// does the archive ladder.
func TestPoliciesSkipErasedRows(t *testing.T) {
	forEachStore(t, lethe.Config{}, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		db.PauseCleaner()
		aged(t, db, 100, lethe.Grain{Type: "fact", Subject: "erased", UserID: "u", Salience: 0.04})
		kept := aged(t, db, 100, lethe.Grain{Type: "fact", Subject: "stale", UserID: "v", Salience: 0.04})
		if _, err := db.ForgetUser(ctx, "", "u"); err != nil {
			t.Fatal(err)
		}
		ladder, err := db.Archive(ctx, "", lethe.ArchiveOptions{DryRun: true})
		if err != nil || ladder.Scanned != 1 || !slices.Equal(ladder.Hashes, []string{kept}) {
			t.Errorf("archive ladder dry run: %+v, %v; want the one readable grain", ladder, err)
		}
		risk, err := db.RiskSweep(ctx, "", lethe.RiskOptions{DryRun: true})
		if err != nil || risk.Scanned != 1 || len(risk.Items) != 1 || risk.Items[0].Hash != kept {
			t.Errorf("risk sweep dry run: %+v, %v; want the one readable grain", risk, err)
		}
		for _, dry := range []bool{true, false} {
			res, err := db.PurgeStale(ctx, lethe.PurgeOptions{DryRun: dry})
			if err != nil || res.Scanned != 1 || res.Forgotten != 1 || !slices.Equal(res.Hashes, []string{kept}) {
				t.Errorf("purge, dry run %v: %+v, %v; want only the readable grain", dry, res, err)
			}
		}
		if n, err := db.PurgeErased(ctx); err != nil || n != 1 {
			t.Errorf("the cleaner deleted %d rows (%v); want the erased one", n, err)
		}
	})
}

// TestPoliciesWaitForTheCleanerOnAChain: a chain whose older version an
// erasure made unreadable (a supersede moved the fact to another user, and
// the first user was then erased) is left whole by the decay purge and the
// risk sweep's drops, dry runs included, while the cleaner has not deleted
// that version. The purge deleted the whole chain and named the erased
// version in its grain.purge event as a grain it forgot; the cleaner then
// found the row gone and never linked it to its erasure, so a version-chain
// export called an erased version forgotten. Once the cleaner has run, the
// next run forgets the rest, and the export says erased.
func TestPoliciesWaitForTheCleanerOnAChain(t *testing.T) {
	for _, run := range []string{"purge", "risk"} {
		t.Run(run, func(t *testing.T) {
			forEachStore(t, lethe.Config{}, func(t *testing.T, db *lethe.DB) {
				ctx := context.Background()
				db.PauseCleaner()
				v1 := aged(t, db, 100, lethe.Grain{Type: "fact", Subject: "moved", UserID: "u"})
				v2, err := db.Supersede(ctx, v1, lethe.Grain{Type: "fact", Subject: "moved", UserID: "v", CreatedAt: daysAgo(90)})
				if err != nil {
					t.Fatal(err)
				}
				plain := aged(t, db, 100, lethe.Grain{Type: "fact", Subject: "plain", UserID: "v"})
				if _, err := db.ForgetUser(ctx, "", "u"); err != nil {
					t.Fatal(err)
				}
				// forget runs the policy and checks that it forgot want, each
				// the one version of its chain.
				forget := func(dry bool, want ...string) {
					t.Helper()
					var got []string
					var count int
					switch run {
					case "purge":
						res, err := db.PurgeStale(ctx, lethe.PurgeOptions{DryRun: dry})
						if err != nil {
							t.Fatal(err)
						}
						if res.Candidates != len(want) {
							t.Errorf("purge, dry run %v: %d candidates; want %d", dry, res.Candidates, len(want))
						}
						got, count = res.Hashes, res.Forgotten
					default:
						res, err := db.RiskSweep(ctx, "", lethe.RiskOptions{DryRun: dry})
						if err != nil {
							t.Fatal(err)
						}
						for _, it := range res.Items {
							if it.Action != "drop" {
								t.Errorf("risk sweep, dry run %v: item %s is %s", dry, it.Hash[:8], it.Action)
							}
							got = append(got, it.Hash)
						}
						count = res.Dropped
					}
					if !slices.Equal(got, want) || count != len(want) {
						t.Errorf("dry run %v: forgot %d grains, %v; want %v", dry, count, got, want)
					}
				}
				for _, dry := range []bool{true, false} {
					forget(dry, plain) // not the chain waiting for the cleaner
				}
				if !exists(t, db, "", v2) {
					t.Fatalf("the newest version of a chain waiting for the cleaner was forgotten")
				}
				if n, err := db.PurgeErased(ctx); err != nil || n != 1 {
					t.Fatalf("the cleaner deleted %d rows (%v); want the erased version", n, err)
				}
				forget(false, v2)
				x, _, _ := exportHistory(t, db, lethe.HistoryRequest{Hash: v1})
				states := map[string]string{}
				for _, c := range x.Chains {
					for _, v := range c.Versions {
						states[v.Hash] = v.State
					}
				}
				if states[v1] != proofs.VersionErased || states[v2] != proofs.VersionForgotten {
					t.Errorf("the export says %s is %q and %s is %q; want erased and forgotten", v1[:8], states[v1], v2[:8], states[v2])
				}
			})
		})
	}
}

// TestLadderCountsNoErasedRows: the grain count the archive ladder compares
// with its soft limit leaves out rows an erasure made unreadable that the
// cleaner has not deleted yet, as its scan does: they counted, so right
// after a large user's erasure a trigger ran the ladder over a memory below
// its soft limit and archived what MemState's ladder keeps there.
func TestLadderCountsNoErasedRows(t *testing.T) {
	cfg := lethe.Config{Policy: policy(t, "ladder:\n  soft_limit: 3\n  triggers: [ingest_complete, memory_pressure]\n")}
	forEachStore(t, cfg, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		db.PauseCleaner()
		for i := range 3 {
			mustAdd(t, db, lethe.Grain{Type: "fact", Subject: fmt.Sprintf("erased %d", i), UserID: "u"})
		}
		low := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "low", UserID: "v", Salience: 0.01})
		res, err := db.Archive(ctx, "", lethe.ArchiveOptions{Trigger: lethe.TriggerIngestComplete, DryRun: true})
		if err != nil || !res.Ran || res.Live != 4 {
			t.Fatalf("at the soft limit: %+v, %v; want a run over 4 live grains", res, err)
		}
		if _, err := db.ForgetUser(ctx, "", "u"); err != nil {
			t.Fatal(err)
		}
		for _, dry := range []bool{true, false} {
			res, err := db.Archive(ctx, "", lethe.ArchiveOptions{Trigger: lethe.TriggerIngestComplete, DryRun: dry})
			if err != nil || res.Ran || res.Live != 1 {
				t.Errorf("after the erasure, dry run %v: %+v, %v; want no run, 1 live grain", dry, res, err)
			}
		}
		if g, err := db.Get(ctx, "", low); err != nil || g.Archived {
			t.Errorf("the grain below the threshold: %+v, %v; want it unarchived", g, err)
		}
		if n, err := db.PurgeErased(ctx); err != nil || n != 3 {
			t.Fatalf("the cleaner deleted %d rows (%v); want 3", n, err)
		}
		if res, err := db.Archive(ctx, "", lethe.ArchiveOptions{Trigger: lethe.TriggerIngestComplete}); err != nil || res.Ran || res.Live != 1 {
			t.Errorf("after the cleaner: %+v, %v; want no run, 1 live grain", res, err)
		}
	})
}
