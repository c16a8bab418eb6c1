package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestAuditPipeQueuesWritesInItsTransaction checks the PostgreSQL step's
// pipeline (auditPipe): a read through the step's gorm connection sees the
// writes queued before it; a queued write that fails fails the commit and
// nothing of the step stays (the numbering sent with BEGIN included); a
// step that returns an error leaves nothing either; and every connection
// goes back to the pool usable, with no transaction left open.
func TestAuditPipeQueuesWritesInItsTransaction(t *testing.T) {
	db := openPostgres(t)
	ctx := context.Background()
	evs := appendEvents(t, db, "ev", 3)
	unchanged := func(what string) {
		t.Helper()
		next, appended, err := db.SequenceCounters(ctx)
		if err != nil || next != 0 || appended != 0 {
			t.Fatalf("%s: counters %d, %d (%v), want 0, 0", what, next, appended, err)
		}
		for _, e := range evs {
			c, err := db.CommittedEvent(ctx, e.ID)
			if err != nil || c.Sequenced {
				t.Fatalf("%s: event %s numbered (%+v, %v)", what, e.ID, c, err)
			}
		}
		var cps int64
		if err := db.Gorm().Raw("SELECT count(*) FROM audit_checkpoints").Scan(&cps).Error; err != nil || cps != 0 {
			t.Fatalf("%s: %d checkpoints (%v)", what, cps, err)
		}
	}

	errStep := errors.New("the step failed")
	for round := range 3 { // more rounds than one connection: each goes back to the pool
		// A failing queued write: the commit fails.
		err := db.InAuditTx(ctx, func(a *AuditTx) error {
			if a.pipe == nil {
				t.Fatal("the PostgreSQL step does not run on a pipeline")
			}
			n, err := a.AssignSequence(100)
			if err != nil || n != len(evs) {
				t.Fatalf("numbered %d (%v), want %d", n, err, len(evs))
			}
			if err := a.SetAppended(2); err != nil {
				t.Fatal(err)
			}
			// Queued, not sent: the read below sends it first.
			var appended int64
			if err := a.Gorm().Raw("SELECT appended FROM audit_sequence WHERE id = 1").Scan(&appended).Error; err != nil || appended != 2 {
				t.Fatalf("a read after a queued write: appended %d (%v), want 2", appended, err)
			}
			if err := a.SaveCheckpoint(CheckpointRow{Size: 2, Root: []byte("root"), Note: []byte("note")}); err != nil {
				t.Fatal(err)
			}
			pipeConn{a.pipe}.Defer("UPDATE audit_sequence SET next_seq = 1 / 0 WHERE id = 1")
			return nil
		})
		if err == nil {
			t.Fatalf("round %d: a step whose queued write fails committed", round)
		}
		unchanged(fmt.Sprintf("round %d, failed write", round))

		// A step that fails after its writes were queued.
		err = db.InAuditTx(ctx, func(a *AuditTx) error {
			if _, err := a.AssignSequence(100); err != nil {
				t.Fatal(err)
			}
			if err := a.SetAppended(3); err != nil {
				t.Fatal(err)
			}
			return errStep
		})
		if !errors.Is(err, errStep) {
			t.Fatalf("round %d: step error %v, want %v", round, err, errStep)
		}
		unchanged(fmt.Sprintf("round %d, failed step", round))
	}

	// And a step that succeeds commits all of it.
	err := db.InAuditTx(ctx, func(a *AuditTx) error {
		if _, err := a.AssignSequence(100); err != nil {
			return err
		}
		if err := a.SetAppended(int64(len(evs))); err != nil {
			return err
		}
		return a.SaveCheckpoint(CheckpointRow{Size: int64(len(evs)), Root: []byte("root"), Note: []byte("note")})
	})
	if err != nil {
		t.Fatal(err)
	}
	next, appended, err := db.SequenceCounters(ctx)
	if err != nil || next != int64(len(evs)) || appended != int64(len(evs)) {
		t.Fatalf("after a committed step: counters %d, %d (%v), want %d, %d", next, appended, err, len(evs), len(evs))
	}
	cp, err := db.LatestCheckpoint(ctx)
	if err != nil || cp == nil || cp.Size != int64(len(evs)) {
		t.Fatalf("after a committed step: checkpoint %+v (%v)", cp, err)
	}
	// No connection of the pool is left in a transaction.
	var open int64
	if err := db.Gorm().Raw(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&open).Error; err != nil || open != 0 {
		t.Fatalf("%d connections idle in a transaction (%v)", open, err)
	}
}
