package cal_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/cal"
)

func openDB(tb testing.TB) *lethe.DB {
	tb.Helper()
	db, err := lethe.Open(context.Background(), lethe.Config{DataDir: tb.TempDir(), ProofWait: 5 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func run(tb testing.TB, db cal.DB, src string) (cal.Result, error) {
	tb.Helper()
	st, err := cal.Parse(src)
	if err != nil {
		tb.Fatalf("Parse(%q): %v", src, err)
	}
	return cal.Exec(context.Background(), db, "", st)
}

func must(tb testing.TB, db cal.DB, src string) cal.Result {
	tb.Helper()
	r, err := run(tb, db, src)
	if err != nil {
		tb.Fatalf("%s: %v", src, err)
	}
	return r
}

func TestExec(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	h1, err := db.Add(ctx, lethe.Grain{Type: "belief", Subject: "john", Relation: "likes", Object: "coffee", Tags: []string{"drink"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "mary", Relation: "lives_in", Object: "paris"})
	if err != nil {
		t.Fatal(err)
	}

	// Areev's supersede names no type: it carries forward, with the tags.
	sup := must(t, db, `SUPERSEDE "`+h1+`" SET object = "tea", confidence = 0.98`).(*cal.SupersedeResult)
	if sup.Superseded != h1 || sup.Status != "superseded" || sup.Hash == "" {
		t.Fatalf("supersede = %+v", sup)
	}
	h2 := sup.Hash
	h3 := must(t, db, `SUPERSEDE "`+h2+`" SET object = "water", type = "preference"`).(*cal.SupersedeResult).Hash

	hist := must(t, db, `HISTORY OF "`+h1+`"`).(*cal.HistoryResult)
	var got []string
	for _, g := range hist.Grains {
		got = append(got, g.Hash+" "+g.Type+" "+g.Object)
	}
	want := []string{h3 + " preference water", h2 + " belief tea", h1 + " belief coffee"}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("HISTORY OF = %q, want %q", got, want)
	}
	if hist.Grains[1].Confidence != 0.98 || len(hist.Grains[1].Tags) != 1 || hist.Grains[0].CreatedAt.IsZero() {
		t.Fatalf("version fields did not carry: %+v", hist.Grains[1])
	}

	// A second chain about john, newer: it comes first.
	time.Sleep(2 * time.Millisecond)
	h4, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "John", Relation: "works_at", Object: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	sh := must(t, db, `HISTORY WHERE subject = "john"`).(*cal.SubjectHistoryResult)
	if len(sh.Chains) != 2 || len(sh.Chains[0].Grains) != 1 || sh.Chains[0].Grains[0].Hash != h4 ||
		len(sh.Chains[1].Grains) != 3 || sh.Chains[1].Grains[0].Hash != h3 || sh.Truncated {
		b, _ := json.Marshal(sh)
		t.Fatalf("HISTORY WHERE = %s", b)
	}
	if sh := must(t, db, `HISTORY WHERE subject = "nobody"`).(*cal.SubjectHistoryResult); len(sh.Chains) != 0 {
		t.Fatalf("HISTORY WHERE nobody = %+v", sh)
	}

	rec := must(t, db, `RECALL WHERE subject = "john" AND relation = "likes"`).(*cal.RecallResult)
	if len(rec.Grains) != 1 || rec.Grains[0].Hash != h3 {
		t.Fatalf("RECALL = %+v, want the newest version only", rec.Grains)
	}
	if rec := must(t, db, `RECALL WHERE tag = "drink" AND type = "preference" LIMIT 1`).(*cal.RecallResult); len(rec.Grains) != 1 {
		t.Fatalf("RECALL by tag and type = %+v", rec.Grains)
	}

	fg := must(t, db, `FORGET "`+h2+`"`).(*cal.ForgetResult)
	if fg.Status != "forgotten" || fg.Count != 3 || fg.Receipt == nil {
		t.Fatalf("FORGET = %+v, want the whole chain of 3 forgotten with a receipt", fg)
	}
	if _, err := run(t, db, `HISTORY OF "`+h1+`"`); lethe.ErrorCode(err) != lethe.CodeNotFound {
		t.Fatalf("HISTORY OF a forgotten grain: %v, want not_found", err)
	}
	if _, err := run(t, db, `SUPERSEDE "`+h1+`" SET object = "x"`); lethe.ErrorCode(err) != lethe.CodeNotFound {
		t.Fatalf("SUPERSEDE of a forgotten grain: %v, want not_found", err)
	}
	if _, err := run(t, db, `FORGET "`+h1+`"`); lethe.ErrorCode(err) != lethe.CodeNotFound {
		t.Fatalf("FORGET of a forgotten grain: %v, want not_found", err)
	}
	if _, err := run(t, db, `SUPERSEDE "`+other+`" SET object = "paris"`); lethe.ErrorCode(err) != lethe.CodeInvalidArgument {
		t.Fatalf("SUPERSEDE changing nothing: %v, want invalid_argument", err)
	}

	// Every answer encodes with its statement's name.
	for src, want := range map[string]string{`HISTORY OF "` + other + `"`: "history", `RECALL`: "recall"} {
		b, err := json.Marshal(must(t, db, src))
		var m map[string]any
		if err != nil || json.Unmarshal(b, &m) != nil || m["statement"] != want || m["grains"] == nil {
			t.Fatalf("%s encodes as %s (%v)", src, b, err)
		}
	}
}

// TestExecProtected checks that FORGET is refused as the library refuses
// a forget by hash of a pinned grain.
func TestExecProtected(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	h, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "john", Object: "allergic", Pinned: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(t, db, `FORGET "`+h+`"`)
	_, want := db.Forget(ctx, lethe.Selector{Hash: h})
	if lethe.ErrorCode(err) != lethe.CodeProtected || lethe.ErrorCode(want) != lethe.CodeProtected {
		t.Fatalf("FORGET of a pinned grain: %v; library: %v; want protected both", err, want)
	}
}
