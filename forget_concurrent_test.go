package lethe_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/search"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// TestConcurrentForgetsKeepPostings forgets, from 8 goroutines at once,
// 150 of 200 grains added in one batch (their postings share blocks: one
// per word of the batch), on both stores, and reads the text index's rows
// before and after. Every forget must succeed (on PostgreSQL two forgets
// rewriting the same blocks in different orders deadlocked, failing one);
// no posting of a forgotten grain may be left (a forget that rewrote a
// block from what it had read before another's commit put the other's
// postings back); every survivor keeps each of its postings. (On
// PostgreSQL a forget queues its grains' postings and the scrub after it
// removes them: the rows are read once it has finished.)
func TestConcurrentForgetsKeepPostings(t *testing.T) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			ctx := context.Background()
			dir, dsn, raw := rawTestStore(t, b)
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
			postings := func() map[int64]int { return postingsPerGrain(t, b, raw) }
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
			if err := db.Settle(ctx); err != nil {
				t.Fatal(err)
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

// TestForgottenPostingsDrainAfterRestart forgets grains whose postings
// share blocks with survivors while nothing removes their postings (the
// scrub off, the cleaner paused), checks that text search already skips
// them and fills its page with survivors, closes the store as a crash
// would leave it (on PostgreSQL the postings are still queued in
// posting_garbage and their blocks still name the forgotten grains), and
// reopens it: the cleaner that starts with the store must remove every
// forgotten grain's postings and the queue, and leave each survivor's.
func TestForgottenPostingsDrainAfterRestart(t *testing.T) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			ctx := context.Background()
			dir, dsn, raw := rawTestStore(t, b)
			cfg := lethe.Config{DataDir: dir, PostgresDSN: dsn}
			db, err := lethe.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			db.PauseCleaner()
			db.SetScrub(false)
			batch := make([]lethe.Grain, 60)
			for i := range batch {
				batch[i] = lethe.Grain{Type: "fact", Content: fmt.Sprintf("quince item%d", i)}
			}
			hashes, err := db.AddBatch(ctx, batch)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]int64{}
			for _, v := range raw(`SELECT hash || ':' || CAST(id AS TEXT) FROM grains`) {
				h, id, _ := strings.Cut(string(v), ":")
				n, err := strconv.ParseInt(id, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				ids[h] = n
			}
			postings := func() map[int64]int { return postingsPerGrain(t, b, raw) }
			before := postings()
			forgotten := map[int64]bool{}
			// The newest first: the best-ranked candidates of an equal
			// score, so that a search meets them before any survivor.
			for _, h := range hashes[40:] {
				if _, err := db.Forget(ctx, lethe.Selector{Hash: h}); err != nil {
					t.Fatal(err)
				}
				forgotten[ids[h]] = true
			}
			left := 0
			for id := range postings() {
				if forgotten[id] {
					left++
				}
			}
			if b == "postgres" {
				if left != len(forgotten) {
					t.Errorf("%d of %d forgotten grains still in the blocks before the drain, want all (is the drain the test's subject?)", left, len(forgotten))
				}
				if n := len(raw(`SELECT grain_id FROM posting_garbage`)); n != len(forgotten) {
					t.Errorf("%d grains queued in posting_garbage, want %d", n, len(forgotten))
				}
			} else if left != 0 {
				t.Errorf("SQLite: %d forgotten grains left in the blocks", left)
			}
			page, err := db.Recall(ctx, lethe.Query{Text: "quince", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Grains) != 10 {
				t.Errorf("search found %d grains, want a full page of 10 survivors", len(page.Grains))
			}
			for _, g := range page.Grains {
				if forgotten[ids[g.Hash]] {
					t.Errorf("search found forgotten grain %s", g.Hash[:8])
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			db, err = lethe.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			deadline := time.Now().Add(30 * time.Second)
			for b == "postgres" && len(raw(`SELECT grain_id FROM posting_garbage`)) > 0 {
				if time.Now().After(deadline) {
					t.Fatal("posting_garbage not drained 30 s after the store reopened")
				}
				time.Sleep(20 * time.Millisecond)
			}
			after := postings()
			for h, id := range ids {
				switch {
				case forgotten[id] && after[id] != 0:
					t.Errorf("forgotten grain %s still has %d postings", h[:8], after[id])
				case !forgotten[id] && after[id] != before[id]:
					t.Errorf("survivor %s has %d postings, had %d", h[:8], after[id], before[id])
				}
			}
		})
	}
}

// TestConcurrentForgetsOfOneGrain forgets one grain from 8 goroutines at
// once, on both stores: exactly one forget may report it forgotten (with
// one audit event), the others not_found, and the counters an erasure
// reads its count from must still be exact (on PostgreSQL each forget read
// the row, the first deleted it, and the others, whose DELETE then matched
// nothing, still took it off the counters and logged a second event).
func TestConcurrentForgetsOfOneGrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		for round := range 5 {
			user := fmt.Sprint("user", round)
			var hashes []string
			for i := range 10 {
				hashes = append(hashes, mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s", Object: fmt.Sprint(round, "-", i), UserID: user, Scope: "team/a"}))
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			forgotten, events := 0, map[string]bool{}
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res, err := db.Forget(ctx, lethe.Selector{Hash: hashes[0]})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil && res.Status == "forgotten":
						forgotten++
						events[res.EventID] = true
					case err == nil && res.Status == "not_found", lethe.ErrorCode(err) == lethe.CodeNotFound:
					default:
						t.Errorf("forget: %+v, %v", res, err)
					}
				}()
			}
			wg.Wait()
			if forgotten != 1 || len(events) != 1 {
				t.Fatalf("round %d: %d forgets reported the grain forgotten (%d events), want 1", round, forgotten, len(events))
			}
			er, err := db.ForgetUser(ctx, "", user)
			if err != nil {
				t.Fatal(err)
			}
			if er.Count != int64(len(hashes)-1) {
				t.Errorf("round %d: the user's erasure counts %d grains, %d are left", round, er.Count, len(hashes)-1)
			}
		}
	})
}

// postingsPerGrain counts the postings of each grain id in the raw rows of
// the postings blocks that raw reads, on backend b.
func postingsPerGrain(t *testing.T, b string, raw func(string) [][]byte) map[int64]int {
	t.Helper()
	return postingsIn(t, rawBlocks(t, b, raw))
}

// postingsIn counts the postings of each grain id in blocks.
func postingsIn(t *testing.T, blocks []rawBlock) map[int64]int {
	t.Helper()
	n := map[int64]int{}
	for _, rb := range blocks {
		bl, err := search.DecodeBlock(nil, rb.posts)
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

// rawTestStore returns a data directory, the PostgreSQL DSN (b "postgres") or
// "" (b "sqlite"), and a reader of the raw rows of the store opened there.
func rawTestStore(t *testing.T, b string) (string, string, func(string) [][]byte) {
	dir := t.TempDir()
	if b != "postgres" {
		return dir, "", func(q string) [][]byte { return sqliteRaw{dir: dir}.query(t, q) }
	}
	dsn := testenv.Postgres(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return dir, dsn, func(q string) [][]byte { return pgRaw{conn}.direct(t, q) }
}

// TestConcurrentReceiptsVerify forgets grains from 8 goroutines at once, so
// that steps number several events and a receipt is proved against a
// checkpoint signed after its own step: every receipt carries a proof
// (none pending), for its own event, that an auditor verifies offline.
func TestConcurrentReceiptsVerify(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		batch := make([]lethe.Grain, 80)
		for i := range batch {
			batch[i] = lethe.Grain{Type: "fact", Subject: fmt.Sprint("s", i), UserID: fmt.Sprint("u", i%7), Scope: "team/a"}
		}
		hashes, err := db.AddBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(hashes); i += 8 {
					res, err := db.Forget(ctx, lethe.Selector{Hash: hashes[i]})
					if err != nil || res.Receipt == nil || res.Pending || res.Proof == nil {
						t.Errorf("forget %d: %+v, %v", i, res, err)
						return
					}
					v, err := proofs.Verify(res.Proof, proofs.VerifyOptions{LogKey: db.AuditKey()})
					if err != nil || v.Leaf.ID != res.EventID || v.Leaf.Type != proofs.EventGrainForget {
						t.Errorf("forget %d: the receipt's proof of %s: %+v, %v", i, res.EventID, v, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	})
}

// TestForgetRacingSupersede forgets a grain by hash while another
// goroutine supersedes it with a pinned version, which a protection rule
// keeps, on both stores, with the two calls' starts jittered. Whatever the
// order, the forget must never delete the pinned version: it either
// deletes the grain before the supersede (which then fails, not_found), or
// meets the pinned version and is refused (protected), the grain and its
// new version both still there. When the rules were checked by a read
// before the delete's transaction, a supersede committed in between had
// its pinned version deleted with the chain, no override in the event.
func TestForgetRacingSupersede(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		outcomes := map[string]int{}
		for round := range 100 {
			g := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "racing", Object: fmt.Sprint("v1-", round)})
			jitter := time.Duration(rand.IntN(120)) * time.Microsecond
			var wg sync.WaitGroup
			var res *lethe.ForgetResult
			var ferr, serr error
			var h2 string
			wg.Add(2)
			go func() {
				defer wg.Done()
				if round%2 == 0 {
					time.Sleep(jitter)
				}
				res, ferr = db.Forget(ctx, lethe.Selector{Hash: g})
			}()
			go func() {
				defer wg.Done()
				if round%2 == 1 {
					time.Sleep(jitter)
				}
				h2, serr = db.Supersede(ctx, g, lethe.Grain{Type: "fact", Subject: "racing", Object: fmt.Sprint("v2-", round), Pinned: true})
			}()
			wg.Wait()
			switch {
			case ferr == nil && serr == nil:
				t.Fatalf("round %d: the forget deleted %v and the supersede added %s: one must have failed", round, short8(res.Hashes), h2[:8])
			case ferr == nil:
				wantCode(t, serr, lethe.CodeNotFound)
				if res.Status != "forgotten" || !slices.Equal(res.Hashes, []string{g}) {
					t.Fatalf("round %d: forget %+v, want the grain alone", round, res)
				}
				if exists(t, db, "", g) {
					t.Fatalf("round %d: forgotten grain still there", round)
				}
				outcomes["forget first"]++
			case serr == nil:
				wantCode(t, ferr, lethe.CodeProtected)
				if !exists(t, db, "", g) || !exists(t, db, "", h2) {
					t.Fatalf("round %d: a refused forget left the grain %v and its pinned version %v", round, exists(t, db, "", g), exists(t, db, "", h2))
				}
				outcomes["supersede first"]++
			default:
				t.Fatalf("round %d: forget %v, supersede %v", round, ferr, serr)
			}
		}
		t.Logf("outcomes: %v", outcomes)
	})
}

// TestForgetWaitsOutALinkedVersion (PostgreSQL) holds a transaction that
// links a pinned grain p after v2, the newest version of v1 (what a
// supersede does), while a forget of v1 reads the chain: it sees v1 and v2
// only, and waits for v2's row lock. When the link commits, the locked v2
// names p, which the forget's walk never saw: the forget must walk again
// and meet p, which a protection rule keeps (refused, protected), rather
// than delete v1 and v2 and leave p linked to nothing. (SQLite's writer
// holds the whole database: no link commits during a delete.)
func TestForgetWaitsOutALinkedVersion(t *testing.T) {
	ctx := context.Background()
	db, dsn, v1, v2 := pgChain(t, "linked")
	p := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "linked", Object: "v3", Pinned: true})
	tx := rawTx(t, dsn)
	for _, q := range []struct{ sql, col, val, hash string }{
		{"UPDATE grains SET superseded_by = $1 WHERE hash = $2", "superseded_by", p, v2},
		{"UPDATE grains SET supersedes = $1 WHERE hash = $2", "supersedes", v2, p},
	} {
		if tag, err := tx.Exec(ctx, q.sql, q.val, q.hash); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("link %s: %v, %v", q.col, tag, err)
		}
	}
	done := forgetAsync(db, lethe.Selector{Hash: v1})
	awaitLockWaiters(t, dsn, 1, nil) // the forget, for v2's row (the link's transaction holds it)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if lethe.ErrorCode(r.err) != lethe.CodeProtected {
		t.Fatalf("forget of v1 while p was linked after v2: %+v, %v; want refused, protected", r.res, r.err)
	}
	for _, h := range []string{v1, v2, p} {
		if !exists(t, db, "", h) {
			t.Errorf("%s gone after a refused forget", h[:8])
		}
	}
}

// rawTx begins a transaction on a connection of its own to dsn, rolled
// back (unless committed) when the test ends.
func rawTx(t *testing.T, dsn string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	return tx
}

// forgetResult is what a forget answered.
type forgetResult struct {
	res *lethe.ForgetResult
	err error
}

// lockGrain locks the row of grain h in tx, FOR UPDATE.
func lockGrain(t *testing.T, tx pgx.Tx, h string) {
	t.Helper()
	if _, err := tx.Exec(context.Background(), "SELECT 1 FROM grains WHERE hash = $1 FOR UPDATE", h); err != nil {
		t.Fatalf("lock %s: %v", h[:8], err)
	}
}

// wantGone fails the test for each of hashes still in the default memory.
func wantGone(t *testing.T, db *lethe.DB, hashes ...string) {
	t.Helper()
	for _, h := range hashes {
		if exists(t, db, "", h) {
			t.Errorf("%s still there", h[:8])
		}
	}
}

// forgetAsync forgets sel on a goroutine of its own.
func forgetAsync(db *lethe.DB, sel lethe.Selector) <-chan forgetResult {
	done := make(chan forgetResult, 1)
	go func() {
		res, err := db.Forget(context.Background(), sel)
		done <- forgetResult{res, err}
	}()
	return done
}

// awaitLockWaiters waits until n transactions of dsn's database wait for a
// lock (pg_stat_activity), at most 10 s; it fails the test if or, a call
// that should be among them, answers first.
func awaitLockWaiters(t *testing.T, dsn string, n int, or <-chan error) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for waited := 0; ; waited++ {
		select {
		case err := <-or:
			t.Fatalf("answered (%v) while it should wait for a lock", err)
		default:
		}
		var got int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if waited == 1000 {
			t.Fatalf("%d transactions wait for a lock, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestForgetRetriesADeadlock (PostgreSQL) makes a forget of a chain of two
// versions one side of a deadlock: another transaction locks v2, the
// forget locks v1 and waits for v2, then the other transaction asks for v1.
// PostgreSQL aborts the forget, which waited first (deadlock_detected):
// the forget must roll back and try again, not fail. (A policy's batch,
// which locks the newest versions it deletes first and the older ones after,
// can meet a forget this way.)
func TestForgetRetriesADeadlock(t *testing.T) {
	db, dsn, _, _ := pgChain(t, "deadlock")
	for attempt := range deadlockAttempts {
		v1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: fmt.Sprintf("deadlock-%d", attempt), Object: "v1"})
		v2, err := db.Supersede(context.Background(), v1, lethe.Grain{Object: "v2"})
		if err != nil {
			t.Fatal(err)
		}
		var res *lethe.ForgetResult
		victim := inDeadlock(t, dsn, v2, v1, func() { res, err = db.Forget(context.Background(), lethe.Selector{Hash: v1}) })
		if err != nil || res.Count != 2 {
			t.Fatalf("forget of a chain that met a deadlock: %+v, %v; want both versions forgotten", res, err)
		}
		wantGone(t, db, v1, v2)
		if victim {
			return
		}
	}
	t.Fatalf("in %d attempts PostgreSQL never aborted the forget's side of the deadlock", deadlockAttempts)
}

// deadlockAttempts bounds the deadlocks a test makes until PostgreSQL
// picks the call's side as the victim (see inDeadlock).
const deadlockAttempts = 5

// inDeadlock makes call one side of a deadlock: a raw transaction locks
// the row of grain first, call starts and waits for it (holding second's),
// then the raw transaction asks for second. PostgreSQL aborts the attempt
// of call, which waited first, and inDeadlock reports true once call has
// returned. PostgreSQL checks a wait for a deadlock once, deadlock_timeout
// (1 s) after it starts: when the raw transaction asks for second only
// after call's check (a loaded machine), the raw transaction is the one
// aborted; inDeadlock then reports false once call has returned, and the
// test tries again.
func inDeadlock(t *testing.T, dsn, first, second string, call func()) bool {
	t.Helper()
	tx := rawTx(t, dsn)
	lockGrain(t, tx, first)
	done := make(chan error, 1)
	go func() {
		call()
		done <- nil
	}()
	awaitLockWaiters(t, dsn, 1, done) // call, for first's row
	// The cycle: returns once PostgreSQL has aborted one side.
	_, err := tx.Exec(context.Background(), "SELECT 1 FROM grains WHERE hash = $1 FOR UPDATE", second)
	var pe *pgconn.PgError
	if err != nil && (!errors.As(err, &pe) || pe.Code != "40P01") {
		t.Fatalf("lock %s: %v", second[:8], err)
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	return err == nil
}

// TestPurgeRetriesADeadlock (PostgreSQL) is TestForgetRetriesADeadlock for
// a policy's batch: the purge locks a chain by its newest version (the
// seed) and then deletes the older one, the other order than a forget's.
// A raw transaction holds v1, the purge locks v2 and waits for v1, then the
// raw transaction asks for v2: PostgreSQL aborts the purge's attempt, which
// waited first. The purge must roll back and try again, not fail with an
// internal error (a 500 over the API, a failed scheduled run).
func TestPurgeRetriesADeadlock(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	db := openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: dsn})
	for attempt := range deadlockAttempts {
		v1 := aged(t, db, 100, lethe.Grain{Type: "fact", Subject: fmt.Sprintf("deadlock-%d", attempt), Object: "v1"})
		v2, err := db.Supersede(ctx, v1, lethe.Grain{Type: "fact", Object: "v2", CreatedAt: daysAgo(90)})
		if err != nil {
			t.Fatal(err)
		}
		var res *lethe.PurgeResult
		victim := inDeadlock(t, dsn, v1, v2, func() { res, err = db.PurgeStale(ctx, lethe.PurgeOptions{}) })
		if err != nil || res.Forgotten != 2 {
			t.Fatalf("purge of a chain that met a deadlock: %+v, %v; want both versions forgotten", res, err)
		}
		wantGone(t, db, v1, v2)
		if victim {
			return
		}
	}
	t.Fatalf("in %d attempts PostgreSQL never aborted the purge's side of the deadlock", deadlockAttempts)
}

// TestCleanerRetriesADeadlock (PostgreSQL): the background cleaner, which
// deletes the rows of a user erasure, deletes a row's tags and then the
// row; a transaction that holds the row and then deletes its tags (as a
// forget does, in the other order) makes a cycle. PostgreSQL aborts the
// cleaner's attempt, which waited first. The cleaner must try again at
// once, not log a failure and leave the rows to its next round.
func TestCleanerRetriesADeadlock(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	var logs testenv.Logs
	db := openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: dsn,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	g := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "erased", UserID: "u", Tags: []string{"t"}})
	tx := rawTx(t, dsn)
	lockGrain(t, tx, g)
	// The erasure answers once its proof is ready; the cleaner it starts
	// meets the row's lock before that. The cycle must close before
	// PostgreSQL's deadlock check of the cleaner's wait (1 s), or the check
	// finds no cycle and the other side is aborted.
	erased := make(chan error, 1)
	go func() {
		_, err := db.ForgetUser(ctx, "", "u")
		erased <- err
	}()
	awaitLockWaiters(t, dsn, 1, nil) // the cleaner, for the row, its tags deleted
	// The cycle: returns once PostgreSQL has aborted the cleaner's attempt.
	if _, err := tx.Exec(ctx, "DELETE FROM grain_tags WHERE grain_id = (SELECT id FROM grains WHERE hash = $1)", g); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-erased; err != nil {
		t.Fatal(err)
	}
	// Waits for the cleaner's job (its row lock) and finds it done.
	if _, err := db.PurgeErased(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM grains WHERE hash = $1", g).Scan(&n); err != nil || n != 0 {
		t.Errorf("the erased row: %d left, %v", n, err)
	}
	if strings.Contains(logs.String(), "cleanup of erased grains failed") {
		t.Errorf("the cleaner failed on a deadlock instead of trying again:\n%s", logs.String())
	}
}

// TestHoldWaitsForAForgetInFlight (PostgreSQL) places a legal hold on a
// scope while a forget of a grain in it is in flight: the forget has begun
// and waits for the grain's row, which another transaction holds. The
// hold must wait for the forget: answered while the forget was still to
// commit, the hold would be followed by the deletion of a grain it covers,
// and the audit log would show a grain.forget under a hold placed before
// it. (SQLite's writer holds the whole database: the two never overlap.)
func TestHoldWaitsForAForgetInFlight(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	db := openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: dsn})
	g := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "in flight", Scope: "legal"})
	tx := rawTx(t, dsn)
	lockGrain(t, tx, g)
	forgot := forgetAsync(db, lethe.Selector{Hash: g})
	awaitLockWaiters(t, dsn, 1, nil) // the forget, for the grain's row
	held := make(chan error, 1)
	go func() {
		_, err := db.SetHold(ctx, lethe.HoldSpec{Scope: "legal"})
		held <- err
	}()
	awaitLockWaiters(t, dsn, 2, held) // and the hold, for the forget
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-forgot; r.err != nil || r.res.Count != 1 {
		t.Fatalf("the forget in flight: %+v, %v", r.res, r.err)
	}
	if err := <-held; err != nil {
		t.Fatalf("SetHold: %v", err)
	}
	if exists(t, db, "", g) {
		t.Error("the grain forgotten before the hold is still there")
	}
	other := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "after", Scope: "legal"})
	_, err := db.Forget(ctx, lethe.Selector{Hash: other})
	wantCode(t, err, lethe.CodeHeld)
}

// TestConcurrentDestructiveCalls runs 4 goroutines of random calls at once
// (add, half of them 100 days old; supersede pinning, unpinning on purpose
// or keeping the old version's pin; forget by hash; forget by subject; the
// decay purge; place and release a hold on a scope) through two instances
// of one store (two replicas), on both stores, and then checks what must
// hold whatever the interleaving: every call answers or refuses with a code
// a user can act on (never an internal error, nor a lock conflict); no
// forget by hash and no purge deleted a pinned version (only ForceForget
// may); every chain link has its counterpart (a.superseded_by = b exactly
// when b.supersedes = a); and the scope and user counters equal the rows.
func TestConcurrentDestructiveCalls(t *testing.T) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			ctx := context.Background()
			dir, dsn, raw := rawTestStore(t, b)
			// Two instances on one store, as two replicas: workers 0 and 2
			// call one, 1 and 3 the other.
			replicas := []*lethe.DB{openDB(t, lethe.Config{DataDir: dir, PostgresDSN: dsn}), openDB(t, lethe.Config{DataDir: dir, PostgresDSN: dsn})}
			var mu sync.Mutex
			var known []string
			pinned := map[string]bool{}
			var deleted []string
			allowed := refusals()
			pick := func(rng *rand.Rand) (string, bool) {
				mu.Lock()
				defer mu.Unlock()
				if len(known) == 0 {
					return "", false
				}
				h := known[rng.IntN(len(known))]
				return h, pinned[h]
			}
			var purged []string
			// Half the grains are written 100 days old: the decay purge's
			// candidates, unless pinned.
			created := func(rng *rand.Rand) time.Time {
				if rng.IntN(2) == 0 {
					return daysAgo(100)
				}
				return time.Time{}
			}
			runCalls(t, replicas, 14, 60, allowed, func(db *lethe.DB, rng *rand.Rand, w, i int) (op string, err error) {
				subject := fmt.Sprint("s", rng.IntN(4))
				scope := []string{"team/a", "team/b"}[rng.IntN(2)]
				switch k := rng.IntN(11); {
				case k < 3:
					op = "add"
					var h string
					h, err = db.Add(ctx, lethe.Grain{Type: "fact", Subject: subject, Object: fmt.Sprint(w, "-", i), Scope: scope,
						UserID: fmt.Sprint("u", rng.IntN(3)), CreatedAt: created(rng)})
					if err == nil {
						mu.Lock()
						known = append(known, h)
						mu.Unlock()
					}
				case k < 5:
					op = "supersede"
					old, oldPinned := pick(rng)
					if old == "" {
						return "", nil
					}
					// Pinned, unpinned on purpose, or as the old version.
					pin, set := rng.IntN(3), []string(nil)
					if pin == 1 {
						set = []string{"pinned"}
					}
					var h string
					h, err = db.Supersede(ctx, old, lethe.Grain{Type: "fact", Subject: subject, Object: fmt.Sprint(w, "-", i, "'"),
						Pinned: pin == 0, CreatedAt: created(rng)}, set...)
					if err == nil {
						mu.Lock()
						known = append(known, h)
						pinned[h] = pin == 0 || pin == 2 && oldPinned
						mu.Unlock()
					}
				case k < 8:
					op = "forget by hash"
					h, _ := pick(rng)
					if h == "" {
						return "", nil
					}
					var res *lethe.ForgetResult
					if res, err = db.Forget(ctx, lethe.Selector{Hash: h}); err == nil {
						mu.Lock()
						deleted = append(deleted, res.Hashes...)
						mu.Unlock()
					}
				case k < 9:
					op = "forget by subject"
					_, err = db.Forget(ctx, lethe.Selector{Subject: subject})
				case k < 10:
					op = "purge"
					var res *lethe.PurgeResult
					if res, err = db.PurgeStale(ctx, lethe.PurgeOptions{}); err == nil {
						mu.Lock()
						purged = append(purged, res.Hashes...)
						mu.Unlock()
					}
				default:
					op, err = "hold", holdBriefly(db, rng)
				}
				return op, err
			})
			// A forget by subject names a person: it may delete pinned
			// versions. Only forgets by hash are counted in deleted.
			for _, h := range deleted {
				if pinned[h] {
					t.Errorf("a forget by hash deleted the pinned version %s", h[:8])
				}
			}
			for _, h := range purged {
				if pinned[h] {
					t.Errorf("the decay purge deleted the pinned version %s", h[:8])
				}
			}
			for _, q := range []string{
				`SELECT a.hash FROM grains a WHERE a.superseded_by <> '' AND NOT EXISTS
					(SELECT 1 FROM grains b WHERE b.memory = a.memory AND b.hash = a.superseded_by AND b.supersedes = a.hash)`,
				`SELECT a.hash FROM grains a WHERE a.supersedes <> '' AND NOT EXISTS
					(SELECT 1 FROM grains b WHERE b.memory = a.memory AND b.hash = a.supersedes AND b.superseded_by = a.hash)`,
			} {
				if rows := raw(q); len(rows) > 0 {
					t.Errorf("%d rows with a link that has no counterpart (%s...)", len(rows), rows[0][:8])
				}
			}
			for _, q := range []string{
				`SELECT c.name FROM (SELECT name, SUM(n) AS n FROM grain_counts WHERE kind = 'scope' GROUP BY name) c
					WHERE c.n <> (SELECT count(*) FROM grains g WHERE g.scope = c.name)`,
				`SELECT DISTINCT g.scope FROM grains g WHERE NOT EXISTS (SELECT 1 FROM grain_counts c WHERE c.kind = 'scope' AND c.name = g.scope)`,
				`SELECT CAST(c.key_id AS TEXT) FROM (SELECT key_id, SUM(n) AS n FROM user_grain_counts GROUP BY key_id) c
					WHERE c.n <> (SELECT count(*) FROM grains g WHERE g.user_key_id = c.key_id)`,
			} {
				if rows := raw(q); len(rows) > 0 {
					t.Errorf("counters differ from the rows: %q (%s)", rows, q)
				}
			}
			t.Logf("%s rows left, %d deleted by forgets by hash, %d by purges", raw(`SELECT CAST(count(*) AS TEXT) FROM grains`)[0], len(deleted), len(purged))
		})
	}
}

// TestConcurrentErasures runs 4 goroutines of random adds for three users
// (half of them 100 days old), supersedes, forgets by hash, user erasures,
// decay purges and holds placed and released
// through two instances of one store, on both stores. Every call must
// answer or refuse with a code a user can act on (erased for a supersede
// of an erased grain), and after the run every grain of a user whose add
// had returned before an erasure of that user started (and that erasure
// succeeded) must be unreadable through both instances: erased, or
// not_found once the cleaner has deleted its row.
func TestConcurrentErasures(t *testing.T) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			ctx := context.Background()
			dir, dsn, _ := rawTestStore(t, b)
			replicas := []*lethe.DB{openDB(t, lethe.Config{DataDir: dir, PostgresDSN: dsn}), openDB(t, lethe.Config{DataDir: dir, PostgresDSN: dsn})}
			type added struct {
				hash, user string
				done       int64 // clock when its add returned
			}
			var mu sync.Mutex
			var clock int64
			tick := func() int64 { mu.Lock(); defer mu.Unlock(); clock++; return clock }
			var adds []added
			erasedBefore := map[string]int64{} // user -> latest start of a successful erasure
			allowed := refusals(lethe.CodeErased)
			runCalls(t, replicas, 28, 50, allowed, func(db *lethe.DB, rng *rand.Rand, w, i int) (op string, err error) {
				user := fmt.Sprint("u", rng.IntN(3))
				scope := []string{"team/a", "team/b"}[rng.IntN(2)]
				switch k := rng.IntN(11); {
				case k < 4:
					op = "add"
					var h string
					g := lethe.Grain{Type: "fact", Subject: "s", Object: fmt.Sprint(w, "-", i), Scope: scope, UserID: user}
					if rng.IntN(2) == 0 {
						g.CreatedAt = daysAgo(100) // a decay purge's candidate
					}
					h, err = db.Add(ctx, g)
					if err == nil {
						done := tick()
						mu.Lock()
						adds = append(adds, added{h, user, done})
						mu.Unlock()
					}
				case k < 6:
					mu.Lock()
					var h string
					if len(adds) > 0 {
						h = adds[rng.IntN(len(adds))].hash
					}
					mu.Unlock()
					if h == "" {
						return "", nil
					}
					if k < 5 {
						op = "supersede"
						_, err = db.Supersede(ctx, h, lethe.Grain{Type: "fact", Subject: "s", Object: fmt.Sprint(w, "-", i, "'"), UserID: user})
					} else {
						op = "forget by hash"
						_, err = db.Forget(ctx, lethe.Selector{Hash: h})
					}
				case k < 9:
					op = "erase user"
					start := tick()
					if _, err = db.ForgetUser(ctx, "", user); err == nil {
						mu.Lock()
						erasedBefore[user] = max(erasedBefore[user], start)
						mu.Unlock()
					}
				case k < 10:
					op = "purge"
					_, err = db.PurgeStale(ctx, lethe.PurgeOptions{})
				default:
					op, err = "hold", holdBriefly(db, rng)
				}
				return op, err
			})
			checked := 0
			for _, a := range adds {
				if start, ok := erasedBefore[a.user]; !ok || a.done >= start {
					continue
				}
				checked++
				for r, db := range replicas {
					if _, err := db.Get(ctx, "", a.hash); lethe.ErrorCode(err) != lethe.CodeErased && lethe.ErrorCode(err) != lethe.CodeNotFound {
						t.Errorf("instance %d reads %s of %s, added before an erasure of that user: %v", r, a.hash[:8], a.user, err)
					}
				}
			}
			t.Logf("%d adds, %d checked unreadable", len(adds), checked)
		})
	}
}

// refusals are the codes a call of the random concurrent tests may answer
// besides success, with extra ones: refusals a user can act on, never an
// internal error.
func refusals(extra ...lethe.Code) map[lethe.Code]bool {
	m := map[lethe.Code]bool{"": true, lethe.CodeNotFound: true, lethe.CodeProtected: true, lethe.CodeHeld: true,
		lethe.CodeAlreadySuperseded: true, lethe.CodeConflict: true}
	for _, c := range extra {
		m[c] = true
	}
	return m
}

// runCalls runs 4 workers of n calls each at once, workers 0 and 2 through
// replicas[0] and 1 and 3 through replicas[1], each with its own random
// source from seed, and fails the test at the first call that answers a
// code allowed does not hold, or a PostgreSQL lock conflict (deadlock,
// serialization failure, lock timeout) that reached the caller: those are
// answered with codes a user can act on (conflict, unavailable), but in
// these runs each one is a lock order to find, or a retry missing.
func runCalls(t *testing.T, replicas []*lethe.DB, seed uint64, n int, allowed map[lethe.Code]bool,
	call func(db *lethe.DB, rng *rand.Rand, w, i int) (op string, err error)) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			for i := range n {
				op, err := call(replicas[w%2], rng, w, i)
				var pe *pgconn.PgError
				if !allowed[lethe.ErrorCode(err)] || errors.As(err, &pe) && strings.HasPrefix(pe.Code, "40") || errors.As(err, &pe) && pe.Code == "55P03" {
					t.Errorf("worker %d, call %d, %s: %v (code %q)", w, i, op, err, lethe.ErrorCode(err))
					return
				}
			}
		}()
	}
	wg.Wait()
}

// holdBriefly places a hold on scope team/b and releases it after 0 to 2 ms.
func holdBriefly(db *lethe.DB, rng *rand.Rand) error {
	ctx := context.Background()
	hold, err := db.SetHold(ctx, lethe.HoldSpec{Scope: "team/b"})
	if err != nil {
		return err
	}
	time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
	return db.ReleaseHold(ctx, "", hold.ID)
}

// pgChain opens a store on a PostgreSQL database of its own and adds a
// grain about subject and a second version of it.
func pgChain(t *testing.T, subject string) (db *lethe.DB, dsn, v1, v2 string) {
	t.Helper()
	dsn = testenv.Postgres(t)
	db = openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: dsn})
	v1 = mustAdd(t, db, lethe.Grain{Type: "fact", Subject: subject, Object: "v1"})
	v2, err := db.Supersede(context.Background(), v1, lethe.Grain{Type: "fact", Subject: subject, Object: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	return db, dsn, v1, v2
}
