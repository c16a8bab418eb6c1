package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/testenv"
)

// These tests check what the store promises below the library's API: the
// query plans, the write lock that orders writes and erasures, the counter
// migration and the statistics schedule. The library's conformance suite
// (the root package) covers behaviour through the public API.

func openSQLite(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), Config{Dialect: SQLite, DSN: filepath.Join(t.TempDir(), "lethe.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openPostgres(t *testing.T) *DB {
	t.Helper()
	db, err := Open(context.Background(), Config{Dialect: Postgres, DSN: testenv.Postgres(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// appendEvents commits n unnumbered events of memory "default", ids
// prefix-0 to prefix-(n-1), leaf i the byte i, and returns them.
func appendEvents(t *testing.T, db *DB, prefix string, n int) []Event {
	t.Helper()
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = Event{ID: fmt.Sprintf("%s-%d", prefix, i), Memory: "default", Type: "test", Leaf: []byte{byte(i)}}
	}
	if err := db.AppendEvents(context.Background(), time.Now().UnixMicro(), evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

func forEachStore(t *testing.T, fn func(t *testing.T, db *DB)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, openSQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, openPostgres(t)) })
}

func tok(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:16]
}

func newKey(t testing.TB, db *DB, memory string, kind keys.Kind, name string) keys.Record {
	t.Helper()
	r, err := db.CreateKey(context.Background(), keys.Record{Memory: memory, Kind: kind, Name: name,
		Wrapped: []byte("wrapped"), Fingerprint: "fp-" + string(kind) + "-" + name, CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fixture is a memory with a scope key and users, for writing rows.
type fixture struct {
	memory, chain string
	users         []keys.Record
}

func newFixture(t testing.TB, db *DB, users int) *fixture {
	f := &fixture{memory: "m"}
	mk := newKey(t, db, f.memory, keys.KindMemory, "")
	sk := newKey(t, db, f.memory, keys.KindScope, "acme")
	f.chain = fmt.Sprintf("%d.%d", mk.ID, sk.ID)
	for i := range users {
		f.users = append(f.users, newKey(t, db, f.memory, keys.KindUser, hex.EncodeToString(tok(fmt.Sprint("user", i)))))
	}
	return f
}

// row is grain n of user u with the given subject, relation and object.
func (f *fixture) row(n, u int, s, r, o string) *GrainRow {
	h := sha256.Sum256([]byte(fmt.Sprint("grain", n)))
	user := f.users[u]
	ref, _ := hex.DecodeString(user.Name)
	return &GrainRow{Hash: hex.EncodeToString(h[:]), Memory: f.memory, Type: "fact", Namespace: "default", Scope: "acme",
		Importance: 0.5, Confidence: 1, Salience: 1, CreatedUS: 1, KeyChain: f.chain + "." + strconv.FormatInt(user.ID, 10),
		UserKeyID: user.ID, UserRef: ref, SubjectTok: tok("s" + s), RelationTok: tok("r" + r), ObjectTok: tok("o" + o),
		DedupTok: tok(fmt.Sprint("dedup", n)), Blob: []byte("sealed"), Tags: []TagRow{{Token: tok(fmt.Sprint("t", n%20))}}}
}

// Every subject/relation/object pattern, and the user and tag filters, is
// answered through an index of the field, not by scanning the memory.
func TestEveryPatternUsesAnIndex(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		f := newFixture(t, db, 50)
		rng := rand.New(rand.NewPCG(1, 2))
		var rows []*GrainRow
		for n := range 5000 {
			r := f.row(n, rng.IntN(50), fmt.Sprint(rng.IntN(500)), fmt.Sprint(rng.IntN(50)), fmt.Sprint(rng.IntN(2500)))
			if n%10 == 0 {
				r.Scope = fmt.Sprintf("acme/bot%d", n%100)
			}
			rows = append(rows, r)
		}
		if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.analyze(ctx); err != nil {
			t.Fatal(err)
		}
		ref, _ := hex.DecodeString(f.users[3].Name)
		s, r, o := [][]byte{tok("s7")}, [][]byte{tok("r7")}, [][]byte{tok("o7")}
		for _, c := range []struct {
			name    string
			filter  Filter
			indexes []string
		}{
			{"S", Filter{Subject: s}, []string{"idx_grains_s"}},
			{"R", Filter{Relation: r}, []string{"idx_grains_r"}},
			{"O", Filter{Object: o}, []string{"idx_grains_o"}},
			{"SR", Filter{Subject: s, Relation: r}, []string{"idx_grains_s", "idx_grains_r"}},
			{"SO", Filter{Subject: s, Object: o}, []string{"idx_grains_s", "idx_grains_o"}},
			{"RO", Filter{Relation: r, Object: o}, []string{"idx_grains_r", "idx_grains_o"}},
			{"SRO", Filter{Subject: s, Relation: r, Object: o}, []string{"idx_grains_s", "idx_grains_r", "idx_grains_o"}},
			{"S in two scopes", Filter{Subject: [][]byte{tok("s7"), tok("s8")}}, []string{"idx_grains_s"}},
			{"user", Filter{UserRef: ref}, []string{"idx_grains_userkey"}},
			{"tag", Filter{Tags: [][][]byte{{tok("t3")}}}, []string{"idx_grain_tags_tg"}},
			{"scope prefix", Filter{ScopePrefix: "acme/bot7"}, []string{"idx_grains_scope"}},
		} {
			c.filter.Memory, c.filter.Limit = f.memory, 100
			plan := explain(t, db, &c.filter)
			used := false
			for _, idx := range c.indexes {
				used = used || strings.Contains(plan, idx)
			}
			if !used {
				t.Errorf("%s: the plan uses none of %v:\n%s", c.name, c.indexes, plan)
			}
			if strings.Contains(plan, "Seq Scan on grains") || strings.Contains(plan, "SCAN grains\n") {
				t.Errorf("%s: the plan scans the grains table:\n%s", c.name, plan)
			}
		}
	})
}

// explain returns the query plan of FindGrains(f), one node per line.
func explain(t *testing.T, db *DB, f *Filter) string {
	t.Helper()
	if err := f.resolve(db.gorm); err != nil {
		t.Fatal(err)
	}
	q, args := db.findQuery(f)
	return explainSQL(t, db, q, args...)
}

// explainSQL returns the plan of statement q (placeholders in db's
// dialect) with args: one line per row of EXPLAIN (PostgreSQL) or EXPLAIN
// QUERY PLAN (SQLite).
func explainSQL(t *testing.T, db *DB, q string, args ...any) string {
	t.Helper()
	prefix := "EXPLAIN "
	if db.dialect == SQLite {
		prefix = "EXPLAIN QUERY PLAN "
	}
	return explainWith(t, db, prefix, q, args...)
}

// explainWith returns what prefix (an EXPLAIN of either dialect) followed
// by q says of q: the last column of each row, one line each.
func explainWith(t *testing.T, db *DB, prefix, q string, args ...any) string {
	t.Helper()
	sqlDB, err := db.gorm.DB()
	if err != nil {
		t.Fatal(err)
	}
	res, err := sqlDB.Query(prefix+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer res.Close()
	cols, _ := res.Columns()
	var b strings.Builder
	for res.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := res.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%v\n", vals[len(vals)-1])
	}
	return b.String()
}

// An erase waits for the writes of its memory in flight, and counts their
// rows; without the memory's write lock it would count before they commit,
// and return a count short of what it made unreadable.
func TestEraseWaitsForWritesInFlight(t *testing.T) {
	db := openPostgres(t)
	ctx := context.Background()
	f := newFixture(t, db, 1)
	if _, err := db.InsertGrains(ctx, f.memory, []*GrainRow{f.row(0, 0, "a", "b", "c")}, nil); err != nil {
		t.Fatal(err)
	}
	checked, release, written := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		written <- db.pgTx(ctx, func(tx pgx.Tx) error {
			rows := []*GrainRow{f.row(1, 0, "a", "b", "d"), f.row(2, 0, "a", "b", "e")}
			if _, err := insertGrainsPG(ctx, tx, db.grainSeq, f.memory, rows, nil); err != nil {
				return err
			}
			close(checked) // keys checked live, rows written, not committed
			<-release
			return nil
		})
	}()
	<-checked
	ref, _ := hex.DecodeString(f.users[0].Name)
	erased := make(chan *Erasure, 1)
	go func() {
		er, err := db.EraseKey(ctx, EraseSpec{Memory: f.memory, Kind: keys.KindUser, Name: f.users[0].Name, UserRef: ref, Now: 1},
			func(context.Context, *Erasure) ([]Event, error) { return nil, nil })
		if err != nil {
			t.Error(err)
		}
		erased <- er
	}()
	select {
	case er := <-erased:
		t.Fatalf("the erase returned (count %d) while a write of its memory was in flight", er.Count)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if er := <-erased; er == nil || er.Count != 3 {
		t.Fatalf("erasure = %+v, want a count of 3 (1 committed before, 2 in flight)", er)
	}
	// A write after the erase sees the destroyed key.
	_, err := db.InsertGrains(ctx, f.memory, []*GrainRow{f.row(3, 0, "a", "b", "f")}, nil)
	if grains.ErrorCode(err) != grains.CodeErased {
		t.Fatalf("write after erase: %v, want code erased", err)
	}
}

// User counters kept in grain_counts by earlier versions move to
// user_grain_counts when the store opens.
func TestUserCountsMigrate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lethe.db")
	db, err := Open(context.Background(), Config{Dialect: SQLite, DSN: path})
	if err != nil {
		t.Fatal(err)
	}
	old := []CountRow{{Memory: "m", Kind: "user", Name: "42", Shard: 0, N: 5}, {Memory: "m", Kind: "user", Name: "42", Shard: 3, N: 2},
		{Memory: "m", Kind: "user", Name: "7", Shard: 1, N: 1}, {Memory: "m", Kind: "scope", Name: "acme", Shard: 0, N: 8}}
	if err := db.gorm.Create(&old).Error; err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(context.Background(), Config{Dialect: SQLite, DSN: path}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for id, want := range map[int64]int64{42: 7, 7: 1, 9: 0} {
		if n, err := countUser(db.gorm, id); err != nil || n != want {
			t.Errorf("countUser(%d) = %d, %v; want %d", id, n, err, want)
		}
	}
	if n, err := db.countScope(db.gorm, "m", "", true); err != nil || n != 8 {
		t.Errorf("countScope = %d, %v; want 8", n, err)
	}
	var left int64
	db.gorm.Model(&CountRow{}).Where("kind = 'user'").Count(&left)
	if left != 0 {
		t.Errorf("%d user rows left in grain_counts", left)
	}
}

// Statistics are refreshed after the first analyzeFirst rows, then at
// doubling intervals up to analyzeMax.
func TestAnalyzeSchedule(t *testing.T) {
	db := openSQLite(t)
	ctx := context.Background()
	f := newFixture(t, db, 1)
	if _, err := db.InsertGrains(ctx, f.memory, []*GrainRow{f.row(0, 0, "a", "b", "c"), f.row(1, 0, "a", "b", "d")}, nil); err != nil {
		t.Fatal(err)
	}
	stats := func() int64 {
		var n int64
		db.gorm.Raw("SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'").Scan(&n)
		if n == 0 {
			return 0
		}
		db.gorm.Raw("SELECT count(*) FROM sqlite_stat1 WHERE tbl = 'grains'").Scan(&n)
		return n
	}
	idle := func() {
		for deadline := time.Now().Add(30 * time.Second); db.analyzing.Load(); {
			if time.Now().After(deadline) {
				t.Fatal("analyze did not finish")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	db.noteInserted(analyzeFirst - 3) // InsertGrains noted 2
	idle()
	if n := stats(); n != 0 {
		t.Fatalf("statistics before %d rows: %d", analyzeFirst, n)
	}
	db.noteInserted(1)
	idle()
	if n := stats(); n == 0 {
		t.Fatal("no statistics after the first interval")
	}
	var want []int64
	for w := int64(2 * analyzeFirst); len(want) == 0 || want[len(want)-1] < analyzeMax; w *= 2 {
		want = append(want, min(w, analyzeMax))
	}
	want = append(want, analyzeMax)
	for _, w := range want {
		if got := db.analyzeAt.Load(); got != w {
			t.Fatalf("next interval %d, want %d (schedule %v)", got, w, want)
		}
		db.noteInserted(int(w))
		idle()
	}
}

// CreateKeys stores new keys in one transaction with the audit events
// built from them (here one each), and returns, in order, the live key of every record: for a name that
// already has a live key, that key.
func TestCreateKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		events := 0
		db.SetKeyEvent(func(_ context.Context, rs []keys.Record) ([]Event, error) {
			var evs []Event
			for _, r := range rs {
				events++
				evs = append(evs, Event{ID: fmt.Sprintf("ev-%d", r.ID), Memory: r.Memory, Type: "key.create", Leaf: []byte("{}")})
			}
			return evs, nil
		})
		old := newKey(t, db, "m", keys.KindUser, "u1")
		events = 0
		rec := func(name string) keys.Record {
			return keys.Record{Memory: "m", Kind: keys.KindUser, Name: name, Wrapped: []byte("w-" + name), Fingerprint: "fp-new-" + name, CreatedAt: time.Now()}
		}
		got, err := db.CreateKeys(ctx, []keys.Record{rec("u0"), rec("u1"), rec("u2")})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Name != "u0" || got[1].ID != old.ID || got[1].Fingerprint != old.Fingerprint || got[2].Name != "u2" {
			t.Fatalf("CreateKeys = %+v, want u0, the existing u1 (id %d), u2", got, old.ID)
		}
		if got[0].ID == 0 || got[2].ID == 0 || got[0].ID == got[2].ID {
			t.Fatalf("new keys have ids %d and %d", got[0].ID, got[2].ID)
		}
		if events != 2 {
			t.Errorf("%d key events, want 2 (u1 existed)", events)
		}
		live, err := db.LiveKeys(ctx, "m", keys.KindUser, []string{"u0", "u1", "u2", "u3"})
		if err != nil || len(live) != 3 {
			t.Fatalf("LiveKeys = %+v, %v; want u0, u1, u2", live, err)
		}
	})
}

// PostgreSQL keeps no statistics of columns no query filters on: they
// would only cost every ANALYZE time.
func TestNoStatisticsForOpaqueColumns(t *testing.T) {
	db := openPostgres(t)
	var n int64
	if err := db.gorm.Raw(`SELECT count(*) FROM pg_attribute WHERE attrelid = 'grains'::regclass
		AND attname IN ('blob', 'key_chain', 'user_ref', 'dedup_tok') AND attstattarget = 0`).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("%d of 4 opaque columns without statistics", n)
	}
}

// RecordRetrievals adds counts, moves the last retrieval forward only and
// caps salience at 1, across statement chunks.
func TestRecordRetrievals(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		f := newFixture(t, db, 1)
		var rows []*GrainRow
		for n := range 300 {
			r := f.row(n, 0, "s", "r", fmt.Sprint(n))
			r.Salience = 0.5
			rows = append(rows, r)
		}
		hs, err := db.InsertGrains(ctx, f.memory, rows, nil)
		if err != nil {
			t.Fatal(err)
		}
		var rs []Retrieval
		for i, h := range hs {
			g, err := db.GrainByHash(ctx, f.memory, h)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, Retrieval{ID: g.ID, Count: int64(1 + i%3), LastUS: 1000})
		}
		if err := db.RecordRetrievals(ctx, rs, 0.2); err != nil {
			t.Fatal(err)
		}
		rs[7].LastUS = 500 // older: must not move last_retrieved back
		if err := db.RecordRetrievals(ctx, rs[:200], 0.2); err != nil {
			t.Fatal(err)
		}
		for i, h := range hs {
			g, err := db.GrainByHash(ctx, f.memory, h)
			if err != nil {
				t.Fatal(err)
			}
			c := int64(1 + i%3)
			n, wantSal := c, min(1, 0.5+0.2*float64(c))
			if i < 200 {
				n, wantSal = 2*c, min(1, wantSal+0.2*float64(c))
			}
			if g.RetrievalCount != n || g.LastRetrievedUS != 1000 || math.Abs(g.Salience-wantSal) > 1e-9 {
				t.Fatalf("grain %d: count %d last %d salience %v; want %d, 1000, %v", i, g.RetrievalCount, g.LastRetrievedUS, g.Salience, n, wantSal)
			}
		}
	})
}

// A user key is created only while the memory key its name derives from
// (Record.Under) is live: a keyring that cached a memory key another
// instance erased gets code erased, and nothing is stored.
func TestCreateKeysUnderErasedMemoryKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		events := 0
		db.SetKeyEvent(func(_ context.Context, rs []keys.Record) ([]Event, error) {
			var evs []Event
			for _, r := range rs {
				events++
				evs = append(evs, Event{ID: fmt.Sprintf("ev-%d", r.ID), Memory: r.Memory, Type: "key.create", Leaf: []byte("{}")})
			}
			return evs, nil
		})
		mk := newKey(t, db, "m", keys.KindMemory, "")
		rec := func(name string) keys.Record {
			return keys.Record{Memory: "m", Kind: keys.KindUser, Name: name, Wrapped: []byte("w-" + name),
				Fingerprint: "fp-" + name, CreatedAt: time.Now(), Under: mk.ID}
		}
		if _, err := db.CreateKeys(ctx, []keys.Record{rec("u0")}); err != nil {
			t.Fatalf("under a live memory key: %v", err)
		}
		if err := db.gorm.Exec("UPDATE data_keys SET destroyed_us = 1, wrapped = NULL WHERE id = ?", mk.ID).Error; err != nil {
			t.Fatal(err)
		}
		events = 0
		_, err := db.CreateKeys(ctx, []keys.Record{rec("u1"), rec("u2")})
		if grains.ErrorCode(err) != grains.CodeErased {
			t.Fatalf("CreateKeys under an erased memory key: %v, want code erased", err)
		}
		if _, err := db.CreateKey(ctx, rec("u3")); grains.ErrorCode(err) != grains.CodeErased {
			t.Fatalf("CreateKey under an erased memory key: %v, want code erased", err)
		}
		live, err := db.LiveKeys(ctx, "m", keys.KindUser, []string{"u0", "u1", "u2", "u3"})
		if err != nil || len(live) != 1 || live[0].Name != "u0" {
			t.Fatalf("LiveKeys = %+v, %v; want u0 only", live, err)
		}
		if events != 0 {
			t.Errorf("%d key events for refused keys", events)
		}
	})
}

// A policy batch that locks rows (ArchiveRows, ForgetSeeds, ReplaceGrains
// lock through lockOps) and the retrieval-statistics writer run at once on
// the same rows, more than one statement chunk of them, without an error:
// no deadlock, no lock timeout reaching the caller.
func TestPolicyBatchesAndRetrievalsDoNotDeadlock(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		f := newFixture(t, db, 1)
		var rows []*GrainRow
		for n := range 2*chunk + 100 {
			rows = append(rows, f.row(n, 0, "s", "r", fmt.Sprint(n)))
		}
		if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
			t.Fatal(err)
		}
		ops, err := db.OpsByHashes(ctx, f.memory, func() []string {
			var hs []string
			for _, r := range rows {
				hs = append(hs, r.Hash)
			}
			return hs
		}())
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, len(ops))
		for i, o := range ops {
			ids[i] = o.ID
		}
		slices.Sort(ids)
		var rs []Retrieval
		for _, id := range ids {
			rs = append(rs, Retrieval{ID: id, Count: 1, LastUS: 1})
		}
		var g errgroup.Group
		for w := range 2 {
			g.Go(func() error {
				order := slices.Clone(ids)
				for i := range 15 {
					// Hash order, reversed order: what a caller may pass.
					if (i+w)%2 == 0 {
						slices.Reverse(order)
					} else {
						slices.SortFunc(order, func(a, b int64) int { return cmp.Compare(a%97, b%97) })
					}
					if _, err := db.ArchiveRows(ctx, f.memory, order, 1, func(OpRow) bool { return false }, 1, nil); err != nil {
						return fmt.Errorf("ArchiveRows: %w", err)
					}
				}
				return nil
			})
		}
		g.Go(func() error {
			for range 30 {
				if err := db.RecordRetrievals(ctx, rs, 0.01); err != nil {
					return fmt.Errorf("RecordRetrievals: %w", err)
				}
			}
			return nil
		})
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	})
}

// A memory's scope generation is 0 before its first scope key, and moves
// with every scope key created in it, not with another memory's.
func TestScopeGeneration(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		gen := func(memory string) int64 {
			t.Helper()
			g, err := db.ScopeGeneration(ctx, memory)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		if g := gen("m"); g != 0 {
			t.Fatalf("generation of a memory with no key: %d, want 0", g)
		}
		newKey(t, db, "m", keys.KindMemory, "")
		before := gen("m")
		newKey(t, db, "m", keys.KindScope, "acme")
		newKey(t, db, "m", keys.KindScope, "acme/a")
		newKey(t, db, "other", keys.KindScope, "acme")
		if g := gen("m"); g != before+2 {
			t.Fatalf("generation after two scope keys: %d, want %d", g, before+2)
		}
		if g := gen("other"); g < 1 {
			t.Fatalf("generation of the other memory: %d, want at least 1", g)
		}
	})
}

// ReadGrain returns what GrainByHash does but the tokens and the user
// reference (and the scope generation, which GrainByHash does not read),
// for rows superseded, archived, pinned, with and without a user, with the
// memory's erase epoch moved; and not_found for a hash it does not hold or
// holds in another memory.
func TestReadGrainIsGrainByHash(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		f := newFixture(t, db, 3)
		var rows []*GrainRow
		for n := range 12 {
			r := f.row(n, n%3, fmt.Sprint(n), "r", fmt.Sprint(n))
			switch n % 4 {
			case 1:
				r.SupersededBy = fmt.Sprintf("%064x", n)
			case 2:
				r.Archived, r.Pinned = true, true
			case 3:
				r.UserKeyID, r.UserRef, r.KeyChain = 0, nil, f.chain
			}
			r.Scope = []string{"acme", "acme/a", "acme/a-b.c_d"}[n%3]
			r.LastRetrievedUS, r.RetrievalCount, r.Salience = int64(n), int64(n), 1/float64(n+1)
			rows = append(rows, r)
		}
		if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.gorm.Exec("INSERT INTO erase_epochs (memory, epoch) VALUES (?, 7)", f.memory).Error; err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			want, err := db.GrainByHash(ctx, f.memory, r.Hash)
			if err != nil {
				t.Fatal(err)
			}
			got, err := db.ReadGrain(ctx, f.memory, r.Hash)
			if err != nil {
				t.Fatal(err)
			}
			if got.Epoch != 7 || got.ScopeGen == 0 {
				t.Errorf("%s: epoch %d, scope generation %d; want 7 and the memory's", r.Hash, got.Epoch, got.ScopeGen)
			}
			w := *want
			w.UserRef, w.SubjectTok, w.RelationTok, w.ObjectTok, w.DedupTok, w.ScopeGen = nil, nil, nil, nil, nil, got.ScopeGen
			if !reflect.DeepEqual(*got, w) {
				t.Errorf("ReadGrain(%s) = %+v, want %+v", r.Hash, *got, w)
			}
		}
		for _, c := range []struct{ memory, hash string }{{f.memory, fmt.Sprintf("%064x", 1)}, {"other", rows[0].Hash}} {
			if _, err := db.ReadGrain(ctx, c.memory, c.hash); grains.ErrorCode(err) != grains.CodeNotFound {
				t.Errorf("ReadGrain(%s, %s): %v, want not_found", c.memory, c.hash, err)
			}
		}
	})
}

// A checkpoint asked for with a context already cancelled (the cleaner's,
// when the store closes) answers an error: gorm's prepared-statement pool
// answered the statement with an empty row, whose Scan panicked.
func TestCheckpointCancelled(t *testing.T) {
	db := openSQLite(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.checkpoint(ctx); err == nil {
		t.Error("a checkpoint with a cancelled context answered no error")
	}
	if err := db.checkpoint(context.Background()); err != nil {
		t.Errorf("checkpoint: %v", err)
	}
}
