package store

import (
	"context"
	"encoding/hex"
	"slices"
	"testing"

	"github.com/lethe-io/lethe/internal/keys"
)

// TestArchiveRowsAfterAnErase: a policy reads the rows it archives before
// ArchiveRows runs (the ladder's scan, an archive's lookup by hashes); an
// erasure that commits in between made some of them unreadable. ArchiveRows
// reads them again in its transaction and leaves those out, counted in
// Gone with a row deleted meanwhile, nor names them to mk; it archived them
// and named them in its events.
func TestArchiveRowsAfterAnErase(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		f := newFixture(t, db, 2)
		erased, kept, forgotten := f.row(0, 0, "a", "b", "c"), f.row(1, 1, "a", "b", "d"), f.row(2, 1, "a", "b", "e")
		if _, err := db.InsertGrains(ctx, f.memory, []*GrainRow{erased, kept, forgotten}, nil); err != nil {
			t.Fatal(err)
		}
		ops, err := db.OpsByHashes(ctx, f.memory, []string{erased.Hash, kept.Hash, forgotten.Hash})
		if err != nil || len(ops) != 3 {
			t.Fatalf("OpsByHashes: %d rows, %v", len(ops), err)
		}
		ids := make([]int64, len(ops))
		for i, o := range ops {
			ids[i] = o.ID
		}
		// Between the read and the archive: an erasure and a forget commit.
		ref, _ := hex.DecodeString(f.users[0].Name)
		if _, err := db.EraseKey(ctx, EraseSpec{Memory: f.memory, Kind: keys.KindUser, Name: f.users[0].Name, UserRef: ref, Now: 1},
			func(context.Context, *Erasure) ([]Event, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := db.DeleteHashes(ctx, f.memory, []string{forgotten.Hash}, 1, nil); err != nil {
			t.Fatal(err)
		}
		var named []string
		res, err := db.ArchiveRows(ctx, f.memory, ids, 1, nil, 1, func(_ context.Context, hs []string) ([]Event, error) {
			named = hs
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Hashes, []string{kept.Hash}) || res.Gone != 2 || !slices.Equal(named, []string{kept.Hash}) {
			t.Errorf("ArchiveRows = %+v, events named %v; want only the readable row archived, 2 gone", res, named)
		}
	})
}

// ReplaceGrains (the risk sweep's compress) reads its grains, then replaces
// them: a grain an erasure made unreadable in between is left to the
// cleaner, not replaced by a summary, and does not fail the batch.
func TestReplaceGrainsAfterAnErase(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		f := newFixture(t, db, 2)
		erased, kept := f.row(0, 0, "a", "b", "c"), f.row(1, 1, "a", "b", "d")
		if _, err := db.InsertGrains(ctx, f.memory, []*GrainRow{erased, kept}, nil); err != nil {
			t.Fatal(err)
		}
		ops, err := db.OpsByHashes(ctx, f.memory, []string{erased.Hash, kept.Hash})
		if err != nil || len(ops) != 2 {
			t.Fatalf("OpsByHashes: %d rows, %v", len(ops), err)
		}
		var reps []Replacement
		for _, o := range ops {
			u := 0
			if o.Hash == kept.Hash {
				u = 1
			}
			reps = append(reps, Replacement{OldID: o.ID, Old: o.Hash, New: f.row(10+u, u, "a", "b", "summary")})
		}
		// Between the read and the replace: user 0's erasure commits.
		ref, _ := hex.DecodeString(f.users[0].Name)
		if _, err := db.EraseKey(ctx, EraseSpec{Memory: f.memory, Kind: keys.KindUser, Name: f.users[0].Name, UserRef: ref, Now: 1},
			func(context.Context, *Erasure) ([]Event, error) { return nil, nil }); err != nil {
			t.Fatal(err)
		}
		var named []string
		res, err := db.ReplaceGrains(ctx, f.memory, reps, nil, 1, func(_ context.Context, rp *Replaced) ([]Event, error) {
			for _, d := range rp.Done {
				named = append(named, d.Old)
			}
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Done) != 1 || res.Done[0].Old != kept.Hash || res.Skipped != 1 || !slices.Equal(named, []string{kept.Hash}) {
			t.Errorf("ReplaceGrains = %+v, events named %v; want only the readable grain replaced, 1 skipped", res, named)
		}
		left, err := db.OpsByHashes(ctx, f.memory, []string{erased.Hash, kept.Hash, reps[0].New.Hash, reps[1].New.Hash})
		if err != nil {
			t.Fatal(err)
		}
		var hashes []string
		for _, o := range left {
			hashes = append(hashes, o.Hash)
		}
		if want := []string{f.row(11, 1, "", "", "").Hash}; !slices.Equal(hashes, want) {
			t.Errorf("readable rows after the replace %v, want only the kept grain's summary %v", hashes, want)
		}
	})
}
