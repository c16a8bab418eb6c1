package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// eventScan finds a plan's reading of every row of audit_events.
var eventScan = regexp.MustCompile(`(?m)^.*(Seq Scan on audit_events|SCAN audit_events\b).*$`)

// TestSequencerStepReadsNoEventByScan checks that a sequencer step's
// statements (the numbering of new events, and on PostgreSQL the counter
// that follows it in the same pipeline) find their events through an
// index whatever the size of the log (on PostgreSQL, once it is more than
// one page), before and after the database's statistics: a step that read the log by a sequential scan cost each
// forget's proof in proportion to the events ever written. It then runs a
// step and checks the counter and the indexes it gave.
func TestSequencerStepReadsNoEventByScan(t *testing.T) {
	for _, n := range []int{0, 100, 3000, 30000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, db *DB) {
				ctx := context.Background()
				if n > 0 {
					fillEvents(t, db, "default", "old", 0, n, true)
					if err := db.gorm.Exec("UPDATE audit_sequence SET next_seq = ?, appended = ? WHERE id = 1", n, n).Error; err != nil {
						t.Fatal(err)
					}
				}
				evs := appendEvents(t, db, "new", 5)
				check := func(stage string) {
					t.Helper()
					stmts := []string{db.rebind(numberEvents)}
					if db.dialect == Postgres {
						stmts = append(stmts, advanceSequencePiped)
					}
					for _, q := range stmts {
						args := []any{100}
						if !strings.Contains(q, "$1") && !strings.Contains(q, "?") {
							args = nil
						}
						// A table of one page is read whole either way.
						if plan := explainSQL(t, db, q, args...); eventScan.MatchString(plan) && (db.dialect == SQLite || !onePage(t, db, "audit_events")) {
							t.Errorf("%s, %d events: a step's statement reads every event:\n%s\n%s", stage, n, q, plan)
						}
					}
				}
				check("fresh")
				if err := db.gorm.Exec("ANALYZE audit_events").Error; err != nil {
					t.Fatal(err)
				}
				check("analyzed")

				err := db.InAuditTx(ctx, func(a *AuditTx) error {
					got, err := a.AssignSequence(100)
					if err != nil || got != len(evs) {
						return fmt.Errorf("numbered %d (%v), want %d", got, err, len(evs))
					}
					next, _, err := a.SequenceCounters()
					if err != nil || next != int64(n+len(evs)) {
						return fmt.Errorf("counter %d (%v) in the step, want %d", next, err, n+len(evs))
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				next, _, err := db.SequenceCounters(ctx)
				if err != nil || next != int64(n+len(evs)) {
					t.Fatalf("counter %d (%v), want %d", next, err, n+len(evs))
				}
				for i, e := range evs {
					c, err := db.CommittedEvent(ctx, e.ID)
					if err != nil || !c.Sequenced || c.Index != uint64(n+i) {
						t.Fatalf("event %s: %+v (%v), want index %d", e.ID, c, err, n+i)
					}
				}
			})
		})
	}
}

// fillEvents inserts n events of memory, g from from on: event id
// prefix-g, type t-(g mod 3), and, when numbered, leaf index g.
func fillEvents(t *testing.T, db *DB, memory, prefix string, from, n int, numbered bool) {
	t.Helper()
	if n == 0 {
		return
	}
	seq := "NULL"
	if numbered {
		seq = "g"
	}
	rows := fmt.Sprintf("SELECT '%s-' || g, '%s', 't-' || (g %% 3), '\\x00'::bytea, %s, 0 FROM generate_series(%d, %d) AS g",
		prefix, memory, seq, from, from+n-1)
	if db.dialect == SQLite {
		rows = fmt.Sprintf("WITH RECURSIVE c(g) AS (SELECT %d UNION ALL SELECT g + 1 FROM c WHERE g < %d) "+
			"SELECT '%s-' || g, '%s', 't-' || (g %% 3), X'00', %s, 0 FROM c", from, from+n-1, prefix, memory, seq)
	}
	if err := db.gorm.Exec("INSERT INTO audit_events (event_id, memory, type, leaf, seq, created_us) " + rows).Error; err != nil {
		t.Fatal(err)
	}
}

// TestMemoryEventsReadTheirMemoryOnly checks that a memory's events (for a
// version-chain export) are read through the memory's part of
// idx_audit_events_memory, not by reading every memory's events, at every
// size of the log, before and after the statistics; and that MemoryEvents
// returns exactly the memory's events of the types asked, in order, across
// pages.
func TestMemoryEventsReadTheirMemoryOnly(t *testing.T) {
	for _, c := range []struct{ others, mine int }{{0, 3}, {3000, 40}, {30000, 2500}} {
		t.Run(fmt.Sprint(c.others), func(t *testing.T) {
			forEachStore(t, func(t *testing.T, db *DB) {
				ctx := context.Background()
				// Event g has type t-(g mod 3): t-0 and t-1 are asked for.
				insert := func(memory string, from, n int) { fillEvents(t, db, memory, memory, from, n, false) }
				// Interleaved: the memory's events among the others'.
				insert("other", 0, c.others/2)
				insert("mine", 0, c.mine)
				insert("other", c.others/2, c.others-c.others/2)
				types := []string{"t-0", "t-1"}
				check := func(stage string) {
					t.Helper()
					plan := explainSQL(t, db, db.rebind(memoryEventsQuery(len(types))), "mine", "t-0", "t-1", 0, 2000)
					// A log of a few events is read whole either way.
					if !strings.Contains(plan, "idx_audit_events_memory") && c.others > 0 {
						t.Errorf("%s, %d other events: the memory's events are not read through its index:\n%s", stage, c.others, plan)
					}
				}
				check("fresh")
				if err := db.gorm.Exec("ANALYZE audit_events").Error; err != nil {
					t.Fatal(err)
				}
				check("analyzed")
				got, err := db.MemoryEvents(ctx, "mine", types)
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for g := range c.mine {
					if g%3 != 2 {
						want = append(want, fmt.Sprintf("mine-%d", g))
					}
				}
				if len(got) != len(want) {
					t.Fatalf("%d events, want %d", len(got), len(want))
				}
				for i, e := range got {
					if e.EventID != want[i] || (i > 0 && e.Order <= got[i-1].Order) {
						t.Fatalf("event %d: %s (order %d), want %s in commit order", i, e.EventID, e.Order, want[i])
					}
				}
			})
		})
	}
}

// TestDedupLookupUsesItsIndex checks that a PostgreSQL batch insert's
// lookup of the rows already holding its dedup tokens (a batch of 1,000)
// goes through idx_grains_dedup at every size of the memory, fresh and
// analyzed, not by a sequential scan of grains that tests every row
// against the whole array.
func TestDedupLookupUsesItsIndex(t *testing.T) {
	for _, n := range []int{0, 1000, 20000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			db := openPostgres(t)
			ctx := context.Background()
			f := newFixture(t, db, 50)
			for i := 0; i < n; i += 1000 {
				if _, err := db.InsertGrains(ctx, f.memory, loadRows(f, i, min(1000, n-i), n), nil); err != nil {
					t.Fatal(err)
				}
			}
			toks := make([][]byte, 1000)
			for i := range toks {
				toks[i] = []byte(fmt.Sprintf("%016d", i))
			}
			check := func(stage string) {
				t.Helper()
				plan := explainSQL(t, db, dedupHitsPG, toks)
				if strings.Contains(plan, "Seq Scan on grains") && !onePage(t, db, "grains") {
					t.Errorf("%s, %d grains: the dedup lookup scans grains:\n%s", stage, n, plan)
				}
			}
			check("fresh")
			if err := db.analyze(ctx); err != nil {
				t.Fatal(err)
			}
			check("analyzed")
		})
	}
}
