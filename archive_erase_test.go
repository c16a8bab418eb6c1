package lethe_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// TestArchiveRacingAnErase (PostgreSQL) holds g's row locked in another
// transaction while an archive of g (by hash, and the archive ladder)
// waits for it, having read g as a live grain; then g's user is erased.
// An erasure must not commit between an archive's read of its rows and its
// update, so one of two orders holds. Either the erasure waits for the
// archive (which takes the memory's lock, shared, before it locks rows)
// and erases g once the archive has archived it; or it commits first, and
// the archive, reading its rows again under the lock, finds g erased: by
// hash not_found, as a hash that names nothing, and the ladder archives
// nothing. The archive read g without the lock, and so archived the erased
// g after the erasure committed and named it in a grain.archive event.
// (On SQLite no erasure commits during the archive's write transaction,
// _txlock=immediate; one that commits before it, after the read, is
// store.TestArchiveRowsAfterAnErase, on both stores.)
func TestArchiveRacingAnErase(t *testing.T) {
	for _, run := range []string{"hashes", "ladder"} {
		t.Run(run, func(t *testing.T) {
			ctx := context.Background()
			dsn := testenv.Postgres(t)
			db := openDB(t, lethe.Config{DataDir: t.TempDir(), PostgresDSN: dsn})
			db.PauseCleaner()
			g := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "erased", UserID: "u", Salience: 0.01})
			tx := rawTx(t, dsn)
			lockGrain(t, tx, g)

			type archived struct {
				res *lethe.ArchiveResult
				err error
			}
			archive := make(chan archived, 1)
			go func() {
				var a archived
				if run == "hashes" {
					a.res, a.err = db.ArchiveGrains(ctx, "", []string{g})
				} else {
					a.res, a.err = db.Archive(ctx, "", lethe.ArchiveOptions{})
				}
				archive <- a
			}()
			awaitLockWaiters(t, dsn, 1, nil)
			erase := make(chan error, 1)
			go func() {
				_, err := db.ForgetUser(ctx, "", "u")
				erase <- err
			}()
			// Either the erasure commits, or it waits for the archive.
			eraseFirst := false
			select {
			case err := <-erase:
				if err != nil {
					t.Fatalf("erase: %v", err)
				}
				eraseFirst = true
			case <-lockWaiters(t, dsn, 2):
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			a := <-archive
			if !eraseFirst {
				if err := <-erase; err != nil {
					t.Fatalf("erase: %v", err)
				}
			}
			var got []string
			if a.res != nil {
				got = a.res.Hashes
			}
			switch {
			case !eraseFirst:
				// The archive, then the erasure.
				if a.err != nil || !slices.Equal(got, []string{g}) {
					t.Errorf("archive before the erasure: %+v, %v; want g archived", a.res, a.err)
				}
			case run == "hashes":
				if lethe.ErrorCode(a.err) != lethe.CodeNotFound {
					t.Errorf("archive by hash after the erasure committed: %+v, %v; want not_found", a.res, a.err)
				}
			default:
				if a.err != nil || len(got) != 0 {
					t.Errorf("archive ladder after the erasure committed: %+v, %v; want nothing archived", a.res, a.err)
				}
			}
			if eraseFirst {
				for _, l := range leaves(t, db, proofs.EventGrainArchive, "") {
					if slices.Contains(l.Hashes, g) {
						t.Errorf("a grain.archive event names g, archived after its erasure")
					}
				}
			}
		})
	}
}

// lockWaiters is closed once n transactions of dsn's database wait for a
// lock (pg_stat_activity). It polls for at most 10 s, and stops when the
// test ends.
func lockWaiters(t *testing.T, dsn string, n int) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	out, stopped := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		defer c.Close(context.Background())
		for range 1000 {
			var got int
			err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&got)
			if err != nil {
				return
			}
			if got >= n {
				close(out)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return out
}
