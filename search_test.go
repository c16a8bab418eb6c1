package lethe_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/search"
	"github.com/lethe-io/lethe/internal/testenv"
)

// searchHashes runs q and returns the hashes found, in rank order.
func searchHashes(t *testing.T, db *lethe.DB, q lethe.Query) []string {
	t.Helper()
	p, err := db.Recall(context.Background(), q)
	if err != nil {
		t.Fatalf("Recall(%+v): %v", q, err)
	}
	var out []string
	for i, g := range p.Grains {
		if g.Score <= 0 && q.Embedding == nil {
			t.Errorf("grain %s has score %v", g.Hash[:8], g.Score)
		}
		if i > 0 && g.Score > p.Grains[i-1].Score {
			t.Errorf("scores out of order: %v after %v", g.Score, p.Grains[i-1].Score)
		}
		out = append(out, g.Hash)
	}
	if p.Next != "" {
		t.Errorf("a search returned a cursor")
	}
	return out
}

func TestTextSearch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		both := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "alice", Content: "Severe penicillin allergy, noted twice: penicillin."})
		allergy := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "bob", Content: "Has allergies to peanuts"})
		drug := mustAdd(t, db, lethe.Grain{Type: "event", Subject: "carol", Content: "Prescribed penicillin in March", Scope: "clinic"})
		mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "dave", Content: "Likes tea"})
		obj := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "erin", Relation: "avoids", Object: "Penicillin"})

		got := searchHashes(t, db, lethe.Query{Text: "penicillin allergy"})
		if len(got) != 4 || got[0] != both {
			t.Fatalf("penicillin allergy = %v, want 4 grains, %s first", short8(got), both[:8])
		}
		if !slices.Contains(got, allergy) || !slices.Contains(got, obj) {
			t.Errorf("stemming or object words missed: %v", short8(got))
		}
		if got := searchHashes(t, db, lethe.Query{Text: "ALLERGIES"}); !slices.Equal(sorted(got), sorted([]string{both, allergy})) {
			t.Errorf("allergies = %v, want the two allergy grains", short8(got))
		}
		if got := searchHashes(t, db, lethe.Query{Text: "penicillin", Type: "event"}); !slices.Equal(got, []string{drug}) {
			t.Errorf("penicillin type=event = %v, want %s", short8(got), drug[:8])
		}
		if got := searchHashes(t, db, lethe.Query{Text: "penicillin", Scope: "clinic"}); !slices.Equal(got, []string{drug}) {
			t.Errorf("penicillin scope=clinic = %v", short8(got))
		}
		if got := searchHashes(t, db, lethe.Query{Text: "penicillin", Subject: "erin"}); !slices.Equal(got, []string{obj}) {
			t.Errorf("penicillin subject=erin = %v", short8(got))
		}
		all := searchHashes(t, db, lethe.Query{Text: "penicillin"})
		if got := searchHashes(t, db, lethe.Query{Text: "penicillin", Limit: 1}); len(all) != 3 || !slices.Equal(got, all[:1]) {
			t.Errorf("limit 1 = %v, all %v", short8(got), short8(all))
		}
		if got := searchHashes(t, db, lethe.Query{Text: "the and of"}); len(got) != 0 {
			t.Errorf("stop words found %v", short8(got))
		}
		if got := searchHashes(t, db, lethe.Query{Text: "zeppelin"}); len(got) != 0 {
			t.Errorf("an absent word found %v", short8(got))
		}
		_, err := db.Recall(ctx, lethe.Query{Text: "penicillin", Cursor: "12"})
		wantCode(t, err, "invalid_argument")
		_, err = db.Recall(ctx, lethe.Query{Text: "a\x00b"})
		wantCode(t, err, "invalid_argument")
	})
}

func TestVectorSearch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		x := mustAdd(t, db, lethe.Grain{Type: "fact", Content: "east", Embedding: []float32{1, 0, 0}})
		xy := mustAdd(t, db, lethe.Grain{Type: "fact", Content: "north-east", Embedding: []float32{1, 1, 0}})
		y := mustAdd(t, db, lethe.Grain{Type: "event", Content: "north", Embedding: []float32{0, 1, 0}})
		mustAdd(t, db, lethe.Grain{Type: "fact", Content: "no vector"})

		got := searchHashes(t, db, lethe.Query{Embedding: []float32{0.9, 0.1, 0}, Limit: 2})
		if !slices.Equal(got, []string{x, xy}) {
			t.Errorf("nearest 2 = %v, want %s %s", short8(got), x[:8], xy[:8])
		}
		if got := searchHashes(t, db, lethe.Query{Embedding: []float32{1, 0, 0}, Type: "event"}); !slices.Equal(got, []string{y}) {
			t.Errorf("type=event = %v, want %s", short8(got), y[:8])
		}
		// Hybrid: the text decides among equally near vectors.
		if got := searchHashes(t, db, lethe.Query{Embedding: []float32{1, 1, 0}, Text: "north", Limit: 1}); !slices.Equal(got, []string{xy}) {
			t.Errorf("hybrid = %v, want %s", short8(got), xy[:8])
		}
		_, err := db.Add(ctx, lethe.Grain{Type: "fact", Content: "4d", Embedding: []float32{1, 2, 3, 4}})
		wantCode(t, err, "dimension_mismatch")
		_, err = db.AddBatch(ctx, []lethe.Grain{{Type: "fact", Content: "ok", Embedding: []float32{0, 0, 1}}, {Type: "fact", Content: "2d", Embedding: []float32{1, 2}}})
		wantCode(t, err, "dimension_mismatch")
		_, err = db.Recall(ctx, lethe.Query{Embedding: []float32{1, 2}})
		wantCode(t, err, "dimension_mismatch")
		for _, bad := range [][]float32{{}, {0, 0, 0}, {float32(math.NaN()), 1, 1}} {
			_, err = db.Add(ctx, lethe.Grain{Type: "fact", Content: "bad", Embedding: bad})
			wantCode(t, err, "invalid_argument")
		}
		// Another memory has its own dimension.
		mustAdd(t, db, lethe.Grain{Memory: "other", Type: "fact", Content: "2d", Embedding: []float32{1, 2}})
		// The embedding survives a supersede that does not name one.
		nx, err := db.Supersede(ctx, x, lethe.Grain{Type: "fact", Content: "east, again"})
		if err != nil {
			t.Fatal(err)
		}
		if got := searchHashes(t, db, lethe.Query{Embedding: []float32{1, 0, 0}, Limit: 1}); !slices.Equal(got, []string{nx}) {
			t.Errorf("after supersede = %v, want the new version %s", short8(got), nx[:8])
		}
	})
}

// sqlitePostings are the tables of the text index's blocks on SQLite
// besides posting_segments, whose rows each hold the blocks of one insert
// (see store.DB.insertSearch).
var sqlitePostings = []string{"grain_postings", "posting_mid"}

// rawBlock is one postings block as a store's rows hold it: its table, its
// token, its key (for a segment's block, the segment's) and its value.
type rawBlock struct {
	table string
	token []byte
	key   int64
	posts []byte
}

// rawBlocks reads every postings block of a store on backend through raw
// (a reader of one column), segments' blocks included: one statement per
// table, each row's columns joined in hex.
func rawBlocks(t *testing.T, backend string, raw func(string) [][]byte) []rawBlock {
	t.Helper()
	row := "printf('%d', block) || ':' || hex(token) || ':' || hex(posts)"
	tables := sqlitePostings
	if backend == "postgres" {
		row, tables = "block::text || ':' || encode(token, 'hex') || ':' || encode(posts, 'hex')", []string{"grain_postings"}
	}
	var out []rawBlock
	for _, table := range tables {
		for _, v := range raw("SELECT " + row + " FROM " + table) {
			parts := strings.Split(string(v), ":")
			if len(parts) != 3 {
				t.Fatalf("%s: row %q", table, v)
			}
			key, err := strconv.ParseInt(parts[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := hex.DecodeString(parts[1])
			if err != nil {
				t.Fatal(err)
			}
			posts, err := hex.DecodeString(parts[2])
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rawBlock{table, tok, key, posts})
		}
	}
	if backend == "postgres" {
		return out
	}
	for _, v := range raw("SELECT printf('%d', block) || ':' || hex(data) FROM posting_segments") {
		k, data, ok := strings.Cut(string(v), ":")
		if !ok {
			t.Fatalf("posting_segments: row %q", v)
		}
		key, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		b, err := hex.DecodeString(data)
		if err != nil {
			t.Fatal(err)
		}
		seg, err := search.ParseSegment(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(seg.Entries) == 0 {
			t.Fatalf("segment %d holds no block", key)
		}
		for _, e := range seg.Entries {
			out = append(out, rawBlock{"posting_segments", e.Token, key, e.Block})
		}
	}
	return out
}

// storeHandle opens a second connection to a store's database, for
// counting index rows.
type storeHandle struct {
	sqlite *sql.DB
	pg     *pgx.Conn
}

func (h storeHandle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	var err error
	if h.sqlite != nil {
		err = h.sqlite.QueryRow(q, args...).Scan(&n)
	} else {
		for i := range args {
			q = replaceFirst(q, "?", "$"+strconv.Itoa(i+1))
		}
		err = h.pg.QueryRow(context.Background(), q, args...).Scan(&n)
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// rows reads the first column of q's rows.
func (h storeHandle) rows(t *testing.T, q string) [][]byte {
	t.Helper()
	if h.pg != nil {
		return pgRaw{h.pg}.direct(t, q)
	}
	return scanBytes(t, h.sqlite, q)
}

func replaceFirst(s, old, new string) string {
	i := bytes.Index([]byte(s), []byte(old))
	if i < 0 {
		return s
	}
	return s[:i] + new + s[i+len(old):]
}

// TestSearchForgets checks every path that hides or deletes a grain against
// text and vector search, on two instances of one store: the writer and
// another that has searched (and so loaded its vector index) before.
func TestSearchForgets(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cfg := lethe.Config{DataDir: t.TempDir()}
			var h storeHandle
			if name == "postgres" {
				cfg.PostgresDSN = testenv.Postgres(t)
			}
			a, b := openDB(t, cfg), openDB(t, cfg)
			b.PauseCleaner()
			a.PauseCleaner()
			if name == "postgres" {
				conn, err := pgx.Connect(ctx, cfg.PostgresDSN)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close(ctx) })
				h.pg = conn
			} else {
				conn, err := sql.Open("sqlite3", "file:"+filepath.Join(cfg.DataDir, "lethe.db")+"?mode=ro")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { conn.Close() })
				h.sqlite = conn
			}
			vec := []float32{0.3, 0.4, 0.5}
			add := func(g lethe.Grain) string {
				g.Type, g.Content, g.Embedding = "fact", g.Content+" quokka", vec
				return mustAdd(t, a, g)
			}
			found := func(db *lethe.DB, q lethe.Query) []string {
				q.Limit = 1000
				tq, vq := q, q
				tq.Text, vq.Embedding = "quokkas", vec
				ht, hv := searchHashes(t, db, tq), searchHashes(t, db, vq)
				if !slices.Equal(sorted(ht), sorted(hv)) {
					t.Fatalf("text found %v, vector %v", short8(ht), short8(hv))
				}
				return sorted(ht)
			}
			gone := func(step, hash string) {
				t.Helper()
				for i, db := range []*lethe.DB{a, b} {
					for _, q := range []lethe.Query{{}, {IncludeSuperseded: true, IncludeArchived: true}} {
						if slices.Contains(found(db, q), hash) {
							t.Fatalf("%s: instance %d still finds %s", step, i, hash[:8])
						}
					}
				}
			}
			all := []string{add(lethe.Grain{Content: "h"}), add(lethe.Grain{Subject: "sam", Content: "s"}),
				add(lethe.Grain{UserID: "u1", Content: "u"}), add(lethe.Grain{Content: "old"}), add(lethe.Grain{Content: "arch"}),
				add(lethe.Grain{UserID: "u2", Content: "e"}), add(lethe.Grain{Scope: "doomed", Content: "sc"})}
			for _, db := range []*lethe.DB{a, b} {
				if got := found(db, lethe.Query{}); !slices.Equal(got, sorted(all)) {
					t.Fatalf("before: %v, want %v", short8(got), short8(all))
				}
			}
			// Each grain is added alone: one block per posting.
			terms := func() int { return len(rawBlocks(t, name, func(q string) [][]byte { return h.rows(t, q) })) }
			perGrain := terms() / len(all)
			if perGrain < 2 {
				t.Fatalf("%d postings per grain", perGrain)
			}

			if _, err := a.Forget(ctx, lethe.Selector{Hash: all[0]}); err != nil {
				t.Fatal(err)
			}
			gone("forget by hash", all[0])
			if _, err := a.Forget(ctx, lethe.Selector{Subject: "sam"}); err != nil {
				t.Fatal(err)
			}
			gone("forget by subject", all[1])
			if _, err := a.Forget(ctx, lethe.Selector{UserID: "u1"}); err != nil {
				t.Fatal(err)
			}
			gone("forget by user", all[2])
			if err := a.Settle(ctx); err != nil { // PostgreSQL removes forgotten postings after the commit
				t.Fatal(err)
			}
			if n := terms(); n != perGrain*4 {
				t.Errorf("after three forgets: %d postings, want %d", n, perGrain*4)
			}

			next, err := a.Supersede(ctx, all[3], lethe.Grain{Type: "fact", Content: "new quokka"})
			if err != nil {
				t.Fatal(err)
			}
			for i, db := range []*lethe.DB{a, b} {
				got := found(db, lethe.Query{})
				if slices.Contains(got, all[3]) || !slices.Contains(got, next) {
					t.Errorf("after supersede, instance %d finds %v", i, short8(got))
				}
				if got := found(db, lethe.Query{IncludeSuperseded: true}); !slices.Contains(got, all[3]) {
					t.Errorf("include_superseded misses the old version on instance %d", i)
				}
			}

			if _, err := a.ArchiveGrains(ctx, "", []string{all[4]}); err != nil {
				t.Fatal(err)
			}
			for i, db := range []*lethe.DB{a, b} {
				if slices.Contains(found(db, lethe.Query{}), all[4]) || !slices.Contains(found(db, lethe.Query{IncludeArchived: true}), all[4]) {
					t.Errorf("archive: instance %d", i)
				}
			}

			// Erasures: on instance a; b, which has the vectors in memory,
			// must not return them, before and after the cleaner.
			if _, err := a.ForgetUser(ctx, "", "u2"); err != nil {
				t.Fatal(err)
			}
			gone("forget user (erase)", all[5])
			if _, err := a.EraseScope(ctx, "", "doomed"); err != nil {
				t.Fatal(err)
			}
			gone("erase scope", all[6])
			if _, err := a.PurgeErased(ctx); err != nil {
				t.Fatal(err)
			}
			gone("after the cleaner", all[6])
			left := 3 // the old and new versions, the archived one
			if n := h.count(t, "SELECT COUNT(*) FROM grain_docs"); n != left {
				t.Errorf("after the erasures: %d search documents, want %d", n, left)
			}
			if _, err := a.EraseMemory(ctx, "default"); err != nil {
				t.Fatal(err)
			}
			gone("erase memory", next)
			if _, err := a.PurgeErased(ctx); err != nil {
				t.Fatal(err)
			}
			if n, d := terms(), h.count(t, "SELECT COUNT(*) FROM grain_docs"); n != 0 || d != 0 {
				t.Errorf("after erasing the memory: %d postings, %d documents", n, d)
			}
		})
	}
}

// TestEmbeddingNotInClear writes a distinctive embedding and looks for its
// bytes, in either byte order, in every file of the SQLite store.
func TestEmbeddingNotInClear(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, lethe.Config{DataDir: dir})
	v := make([]float32, 64)
	for i := range v {
		v[i] = 0.123456 + float32(i)*0.0101
	}
	hs := make([]lethe.Grain, 20)
	for i := range hs {
		hs[i] = lethe.Grain{Type: "fact", Content: "vector " + strconv.Itoa(i), Embedding: v}
	}
	if _, err := db.AddBatch(context.Background(), hs); err != nil {
		t.Fatal(err)
	}
	if got := searchHashes(t, db, lethe.Query{Embedding: v, Limit: 3}); len(got) != 3 {
		t.Fatalf("search found %d", len(got))
	}
	var le, be []byte
	for _, x := range v[:4] {
		le = binary.LittleEndian.AppendUint32(le, math.Float32bits(x))
		be = binary.BigEndian.AppendUint32(be, math.Float32bits(x))
	}
	check := func(when string) {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, form := range [][]byte{le, be, []byte("0.123456"), []byte("0.13355")} {
				if bytes.Contains(b, form) {
					t.Errorf("%s %s holds the embedding in clear (%x)", when, filepath.Base(f), form)
				}
			}
		}
	}
	check("open")
	collectLeaves(t, db)
	db.Close()
	check("closed")
}

// TestSearchLimitIsPrefix checks that a search with a small limit returns
// the first grains of the same search with a large one, when decay
// reorders them: recall reads the limit best candidates first and stops
// there only when no other can outscore them (see collect), so the answer
// must be the one reading every candidate gives. Fifteen grains, all
// within the window of candidates read, half of them old (decayed).
func TestSearchLimitIsPrefix(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		r := rand.New(rand.NewPCG(7, 7))
		now := time.Now().UTC()
		for i := range 15 {
			words := []string{"tea", "tea tea", "tea and cake", "cake", "tea, tea and tea"}[i%5]
			v := make([]float32, 8)
			for j := range v {
				v[j] = float32(r.NormFloat64())
			}
			mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "s" + strconv.Itoa(i), Content: words + " " + strconv.Itoa(i),
				Embedding: v, CreatedAt: now.Add(-time.Duration(r.IntN(400)) * 24 * time.Hour)})
		}
		q := []float32{1, 0.5, -0.2, 0, 0.3, -1, 0.1, 0.7}
		for _, base := range []lethe.Query{{Text: "tea"}, {Embedding: q}, {Text: "cake", Embedding: q}} {
			base.Limit = 1000
			all := searchHashes(t, db, base)
			if len(all) < 6 {
				t.Fatalf("Recall(%+v) found %d grains, want at least 6", base, len(all))
			}
			for _, k := range []int{1, 2, 3, 5} {
				q := base
				q.Limit = k
				if got := searchHashes(t, db, q); !slices.Equal(got, all[:k]) {
					t.Errorf("Recall(text %q, embedding %v, limit %d) = %v, want %v", q.Text, q.Embedding != nil, k, short8(got), short8(all[:k]))
				}
			}
		}
	})
}
