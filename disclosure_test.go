package lethe_test

import (
	"context"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/cal"
)

// TestDisclosuresRecordNoRetrieval: exporting what is held about a user, a
// history export by subject and CAL's HISTORY WHERE read grains to disclose
// them, not to use them, so none of them refreshes the grains' decay; a
// recall of the same grain does (the control that lets this test fail).
func TestDisclosuresRecordNoRetrieval(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		h := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea", UserID: "u-alice"})
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		retrievals := func() int64 {
			t.Helper()
			db.FlushRetrievals(context.Background())
			g, err := db.Get(ctx, "default", h)
			if err != nil {
				t.Fatal(err)
			}
			return g.RetrievalCount
		}
		if _, err := db.ExportUser(ctx, "default", "u-alice", id.Recipient().String()); err != nil {
			t.Fatal(err)
		}
		// The export waits for a checkpoint that covers the chain's events
		// (pending until then).
		for i := 0; ; i++ {
			_, err := db.ExportHistory(ctx, lethe.HistoryRequest{Subject: "alice", Recipient: id.Recipient().String()})
			if err == nil {
				break
			}
			if lethe.ErrorCode(err) != lethe.CodePending || i == 300 {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		st, err := cal.Parse(`HISTORY WHERE subject = "alice"`)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cal.Exec(ctx, db, "default", st)
		if err != nil {
			t.Fatal(err)
		}
		if sh, ok := res.(*cal.SubjectHistoryResult); !ok || len(sh.Chains) != 1 {
			t.Fatalf("HISTORY WHERE: %#v", res)
		}
		if n := retrievals(); n != 0 {
			t.Fatalf("after three disclosures the grain was retrieved %d times, want 0", n)
		}
		if _, err := db.Recall(ctx, lethe.Query{Subject: "alice"}); err != nil {
			t.Fatal(err)
		}
		if n := retrievals(); n != 1 {
			t.Fatalf("after a recall the grain was retrieved %d times, want 1", n)
		}
	})
}
