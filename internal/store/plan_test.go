package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/testenv"
)

// loadRows returns n rows shaped like cmd/lethe-load's, from row from on:
// n/10 subjects, 20 relations, 8 scopes (acme/s0..s7), 50 tags, the
// fixture's users in turn.
func loadRows(f *fixture, from, n, total int) []*GrainRow {
	var rows []*GrainRow
	for i := from; i < from+n; i++ {
		sc := i % 8
		r := f.row(i, i%len(f.users), "", "", "")
		r.Scope = fmt.Sprintf("acme/s%d", sc)
		// Tokens are keyed by scope, as perScope's.
		r.SubjectTok = tok(fmt.Sprint("s", i%(total/10+1), "@", sc))
		r.RelationTok = tok(fmt.Sprint("r", i%20, "@", sc))
		r.ObjectTok = tok(fmt.Sprint("o", i, "@", sc))
		r.Tags = []TagRow{{Token: tok(fmt.Sprint("t", i%50, "@", sc))}}
		rows = append(rows, r)
	}
	return rows
}

// perScope is one token per scope of loadRows, as a query over the whole
// memory carries.
func perScope(v string) [][]byte {
	var out [][]byte
	for s := range 8 {
		out = append(out, tok(fmt.Sprint(v, "@", s)))
	}
	return out
}

// planCase is a recall pattern and the indexes its plan must use.
type planCase struct {
	name   string
	filter Filter
	sqlite string // the index SQLite must search
	pg     string // the index PostgreSQL must scan
	// pgWalk: PostgreSQL may walk the memory newest first instead, as it
	// does, with statistics, for a scope holding a large part of it.
	pgWalk bool
	walk   bool // newest first through idx_grains_mem, no sort
}

func planCases(ref []byte) []planCase {
	s, r, o := perScope("s7"), perScope("r7"), perScope("o7")
	return []planCase{
		{name: "subject", filter: Filter{Subject: s}, sqlite: "idx_grains_s", pg: "idx_grains_s_id"},
		{name: "relation", filter: Filter{Relation: r}, sqlite: "idx_grains_r", pg: "idx_grains_r_id"},
		{name: "object", filter: Filter{Object: o}, sqlite: "idx_grains_o", pg: "idx_grains_o_id"},
		{name: "subject+relation", filter: Filter{Subject: s, Relation: r}, sqlite: "idx_grains_s", pg: "idx_grains_s_id"},
		{name: "subject+relation+object", filter: Filter{Subject: s, Relation: r, Object: o}, sqlite: "idx_grains_s", pg: "idx_grains_s_id"},
		{name: "relation+object", filter: Filter{Relation: r, Object: o}, sqlite: "idx_grains_o", pg: "idx_grains_o_id"},
		{name: "user", filter: Filter{UserRef: ref}, sqlite: "idx_grains_userkey", pg: "idx_grains_userkey_id"},
		{name: "tag", filter: Filter{Tags: [][][]byte{perScope("t3")}}, sqlite: "idx_grain_tags_tg", pg: "idx_grain_tags_tg"},
		// Within a scope a query carries that scope's token only.
		{name: "subject in a scope", filter: Filter{Subject: [][]byte{tok("s7@3")}, ScopePrefix: "acme/s3"}, sqlite: "idx_grains_s", pg: "idx_grains_s_id"},
		{name: "relation in a scope", filter: Filter{Relation: [][]byte{tok("r7@3")}, ScopePrefix: "acme/s3"}, sqlite: "idx_grains_r", pg: "idx_grains_r_id"},
		{name: "tag in a scope", filter: Filter{Tags: [][][]byte{{tok("t3@3")}}, ScopePrefix: "acme/s3"}, sqlite: "idx_grain_tags_tg", pg: "idx_grain_tags_tg"},
		{name: "scope prefix", filter: Filter{ScopePrefix: "acme/s3"}, sqlite: "idx_grains_scope", pg: "idx_grains_scope_id", pgWalk: true},
		{name: "scope prefix, every scope", filter: Filter{ScopePrefix: "acme"}, sqlite: "idx_grains_scope", pg: "idx_grains_scope_id", pgWalk: true},
		{name: "namespace", filter: Filter{Namespace: "default"}, walk: true},
		{name: "type", filter: Filter{Type: "fact"}, walk: true},
		{name: "none", filter: Filter{}, walk: true},
		{name: "none, next page", filter: Filter{BeforeID: 5}, walk: true},
	}
}

// Every recall pattern is answered through the index of its field, or by
// walking the memory newest first, at every size from an empty store on:
// fresh (no statistics), after a restart, after the statistics are taken,
// and after most rows are forgotten. (TestEveryPatternUsesAnIndex checks
// the same patterns on a store with statistics.) Only the plans are
// checked: what they cost is for the benchmarks.
func TestPlansAtEverySize(t *testing.T) {
	for _, dialect := range []string{SQLite, Postgres} {
		for _, n := range []int{0, 10, 1000, 10000} {
			t.Run(fmt.Sprint(dialect, "/", n), func(t *testing.T) {
				ctx := context.Background()
				cfg := Config{Dialect: dialect, DSN: filepath.Join(t.TempDir(), "lethe.db")}
				if dialect == Postgres {
					cfg.DSN = testenv.Postgres(t)
				}
				db, err := Open(ctx, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { db.Close() }()
				f := newFixture(t, db, 50)
				var hashes []string
				for i := 0; i < n; i += 1000 {
					hs, err := db.InsertGrains(ctx, f.memory, loadRows(f, i, min(1000, n-i), n), nil)
					if err != nil {
						t.Fatal(err)
					}
					hashes = append(hashes, hs...)
				}
				ref, _ := hex.DecodeString(f.users[3].Name)
				check := func(stage string) {
					for _, c := range planCases(ref) {
						c.filter.Memory, c.filter.Limit = f.memory, 10
						checkPlan(t, db, stage, c, explain(t, db, &c.filter))
						if dialect == Postgres && tokenDriven(c.filter.driver()) {
							// The plan these run with (DB.generic).
							checkPlan(t, db, stage+", generic", c, explainGeneric(t, db, &c.filter))
						}
					}
				}
				// Fresh: as the store leaves itself after the writes, with
				// the statistics it took on its own (see noteInserted).
				for deadline := time.Now().Add(time.Minute); db.analyzing.Load() && time.Now().Before(deadline); {
					time.Sleep(10 * time.Millisecond)
				}
				check("fresh")
				db.Close()
				if db, err = Open(ctx, cfg); err != nil {
					t.Fatal(err)
				}
				check("reopened")
				if err := db.analyze(ctx); err != nil {
					t.Fatal(err)
				}
				check("analyzed")
				if len(hashes) > 10 {
					if _, err := db.DeleteHashes(ctx, f.memory, hashes[:len(hashes)*9/10], 0, nil); err != nil {
						t.Fatal(err)
					}
				}
				check("after forgetting 90%")
			})
		}
	}
}

// explainGeneric returns the plan that the pool of generic plans runs f's
// statement with (PostgreSQL): the statement prepared on one of its
// connections, and explained as executed with f's values.
func explainGeneric(t *testing.T, db *DB, f *Filter) string {
	t.Helper()
	ctx := context.Background()
	if err := f.resolve(db.gorm); err != nil {
		t.Fatal(err)
	}
	q, args := db.findQuery(f)
	conn, err := db.generic.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PREPARE lethe_plan AS "+q); err != nil {
		t.Fatalf("prepare %s: %v", q, err)
	}
	defer conn.ExecContext(ctx, "DEALLOCATE lethe_plan")
	// EXPLAIN EXECUTE takes no parameters of its own: the values are
	// written as literals.
	params := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case []byte:
			params[i] = `'\x` + hex.EncodeToString(v) + `'::bytea`
		case [][]byte:
			var els []string
			for _, x := range v {
				els = append(els, `'\x`+hex.EncodeToString(x)+`'::bytea`)
			}
			params[i] = "ARRAY[" + strings.Join(els, ", ") + "]::bytea[]"
		case string:
			params[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case bool:
			params[i] = strconv.FormatBool(v)
		case int64:
			params[i] = strconv.FormatInt(v, 10)
		default:
			t.Fatalf("no literal for a %T", a)
		}
	}
	res, err := conn.QueryContext(ctx, "EXPLAIN EXECUTE lethe_plan("+strings.Join(params, ", ")+")")
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer res.Close()
	var b strings.Builder
	for res.Next() {
		var line string
		if err := res.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A recall by blind tokens on PostgreSQL is planned once per connection,
// not at every call: on the main pool its statement stayed on plans made
// for its values (custom plans), planned again at each of thousands of
// calls; on the pool of generic plans it runs one plan.
func TestTokenRecallsPlanOnce(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, Config{Dialect: Postgres, DSN: testenv.Postgres(t), MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := newFixture(t, db, 50)
	if _, err := db.InsertGrains(ctx, f.memory, loadRows(f, 0, 1000, 1000), nil); err != nil {
		t.Fatal(err)
	}
	ref, _ := hex.DecodeString(f.users[3].Name)
	tokens := 0
	for _, c := range planCases(ref) {
		c.filter.Memory, c.filter.Limit = f.memory, 10
		if tokenDriven(c.filter.driver()) {
			tokens++
		}
		for range 12 {
			if _, err := db.FindGrains(ctx, c.filter); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The pool has one connection: its prepared statements are the
	// recalls'.
	res, err := db.generic.QueryContext(ctx,
		"SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%unnest(%' AND statement NOT LIKE '%pg_prepared_statements%'")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	n := 0
	for res.Next() {
		var q string
		var generic, custom int64
		if err := res.Scan(&q, &generic, &custom); err != nil {
			t.Fatal(err)
		}
		n++
		if custom != 0 || generic != 12 {
			t.Errorf("%d custom and %d generic plans for 12 calls of %s", custom, generic, q)
		}
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if n != tokens {
		t.Errorf("%d token recall statements on the pool of generic plans, want %d (one per case)", n, tokens)
	}
}

var (
	// sqliteSearch finds the grains or tag index searches of a SQLite plan.
	sqliteSearch = regexp.MustCompile(`(?m)^(SEARCH|SCAN) (grains|g|t)\b.*$`)
	// pgScan finds the scans of grains and grain_tags in a PostgreSQL plan.
	pgScan = regexp.MustCompile(`(?m)(Seq Scan|Index Scan|Index Only Scan|Index Scan Backward)( using (\w+))? on (grains|grain_tags)\b.*$`)
	// pgBitmap finds the bitmap scans of grains' and grain_tags' indexes
	// (a bitmap index scan names the index, not the table).
	pgBitmap = regexp.MustCompile(`(?m)Bitmap Index Scan on ((idx_grains?_\w+|grains?_\w*pkey))\b.*$`)
)

// checkPlan fails t unless plan answers c as c says: through c's index,
// touching grains otherwise only by id, with no sort but the final one of
// at most limit rows per branch; or walking idx_grains_mem with no sort.
func checkPlan(t *testing.T, db *DB, stage string, c planCase, plan string) {
	t.Helper()
	fail := func(why string) { t.Errorf("%s, %s: %s:\n%s", stage, c.name, why, plan) }
	if db.dialect == SQLite {
		want := "USING INDEX " + c.sqlite + " ("
		if c.walk {
			want = "SEARCH grains USING INDEX idx_grains_mem (memory=?"
		} else if c.sqlite == "idx_grain_tags_tg" {
			want = "USING COVERING INDEX idx_grain_tags_tg (token=?)"
		}
		for _, line := range sqliteSearch.FindAllString(plan, -1) {
			switch {
			case strings.Contains(line, want), strings.Contains(line, "USING INTEGER PRIMARY KEY (rowid=?)"):
			default:
				fail("reads grains other than through " + c.sqlite + " or by id: " + line)
			}
		}
		if !strings.Contains(plan, want) {
			fail("the plan does not use " + want)
		}
		sorts := strings.Count(plan, "USE TEMP B-TREE FOR ORDER BY")
		if (c.walk && sorts != 0) || sorts > 1 {
			fail(fmt.Sprintf("%d sorts", sorts))
		}
		// Several branches are merged, each read as far as the page
		// needs, not run one after the other to their own limit.
		if strings.Contains(plan, "COMPOUND QUERY") {
			fail("the branches are not merged")
		}
		return
	}
	want := c.pg
	if c.walk {
		want = "idx_grains_mem"
	}
	for _, m := range pgBitmap.FindAllStringSubmatch(plan, -1) {
		if m[1] != want && m[1] != "grains_pkey" {
			fail("reads grains through " + m[1] + ", not " + want + ": " + m[0])
		}
	}
	for _, m := range pgScan.FindAllStringSubmatch(plan, -1) {
		switch {
		case m[3] == want, m[3] == "grains_pkey", c.pgWalk && m[3] == "idx_grains_mem" && m[1] == "Index Scan Backward":
		case m[1] == "Seq Scan" && onePage(t, db, m[4]):
			// Reading the table's one page is the cheapest plan there is.
		default:
			fail("reads " + m[4] + " other than through " + want + " or by id: " + m[0])
		}
	}
	if onePage(t, db, "grains") {
		return
	}
	if c.walk {
		// With statistics, a memory holding every row is walked through
		// the primary key: as good.
		if (!strings.Contains(plan, "Index Scan Backward using idx_grains_mem") && !strings.Contains(plan, "Index Scan Backward using grains_pkey")) ||
			strings.Contains(plan, "Sort") {
			fail("not a walk of the memory newest first")
		}
	} else if !strings.Contains(plan, " "+want+" ") &&
		!(c.pgWalk && (strings.Contains(plan, "Index Scan Backward using grains_pkey") || strings.Contains(plan, "Index Scan Backward using idx_grains_mem"))) {
		fail("the plan does not use " + want)
	}
}

// onePage reports whether the PostgreSQL table holds at most one page.
func onePage(t *testing.T, db *DB, table string) bool {
	t.Helper()
	var n int64
	if err := db.gorm.Raw("SELECT pg_relation_size(?::regclass)", table).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n <= 8192
}

// FindGrains returns, for every pattern of planCases, what a scan of the
// rows in Go returns: the matching rows newest first, a page at a time,
// through every driver and its branches, on both stores. Some rows are
// superseded, archived or in a second memory, so that the conditions
// beside the driver's are exercised too.
func TestFindGrainsMatchesModel(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *DB) {
		ctx := context.Background()
		f := newFixture(t, db, 50)
		other := &fixture{memory: "other", chain: f.chain, users: f.users}
		rows := loadRows(f, 0, 600, 600)
		for i, r := range rows {
			switch i % 11 {
			case 3:
				r.SupersededBy = fmt.Sprintf("%064x", i)
			case 5:
				r.Archived = true
			}
		}
		if _, err := db.InsertGrains(ctx, f.memory, rows, nil); err != nil {
			t.Fatal(err)
		}
		// The same tokens in another memory: only a 2^-128 accident in
		// real use, here on purpose, to show the memory is checked.
		orows := loadRows(other, 1000, 50, 600)
		for _, r := range orows {
			r.Memory = other.memory
		}
		if _, err := db.InsertGrains(ctx, other.memory, orows, nil); err != nil {
			t.Fatal(err)
		}
		var stored []GrainRow
		if err := db.gorm.Where("memory = ?", f.memory).Order("id DESC").Find(&stored).Error; err != nil {
			t.Fatal(err)
		}
		tags := map[int64][][]byte{}
		var tagRows []TagRow
		if err := db.gorm.Find(&tagRows).Error; err != nil {
			t.Fatal(err)
		}
		for _, tr := range tagRows {
			tags[tr.GrainID] = append(tags[tr.GrainID], tr.Token)
		}
		ref, _ := hex.DecodeString(f.users[3].Name)
		userKey := f.users[3].ID
		in := func(list [][]byte, v []byte) bool {
			return list == nil || slices.ContainsFunc(list, func(x []byte) bool { return string(x) == string(v) })
		}
		// More values than maxBranches: one IN list instead of branches.
		var many [][]byte
		for v := 0; len(many) <= maxBranches; v++ {
			many = append(many, perScope(fmt.Sprint("s", v))...)
		}
		cases := append(planCases(ref), planCase{name: "subject, more values than branches", filter: Filter{Subject: many}},
			planCase{name: "tag, more values than branches", filter: Filter{Tags: [][][]byte{append(perScope("t3"), many...)}}})
		for _, c := range cases {
			want := []int64{}
			for _, r := range stored {
				fl := c.filter
				ok := in(fl.Subject, r.SubjectTok) && in(fl.Relation, r.RelationTok) && in(fl.Object, r.ObjectTok) &&
					(fl.UserRef == nil || r.UserKeyID == userKey) && (fl.Type == "" || r.Type == fl.Type) &&
					(fl.Namespace == "" || r.Namespace == fl.Namespace) &&
					(fl.ScopePrefix == "" || r.Scope == fl.ScopePrefix || strings.HasPrefix(r.Scope, fl.ScopePrefix+"/")) &&
					r.SupersededBy == "" && !r.Archived && (fl.BeforeID == 0 || r.ID < fl.BeforeID)
				for _, tl := range fl.Tags {
					ok = ok && slices.ContainsFunc(tags[r.ID], func(tk []byte) bool { return in(tl, tk) })
				}
				if ok {
					want = append(want, r.ID)
				}
			}
			var got []int64
			fl := c.filter
			fl.Memory, fl.Limit = f.memory, 7
			for page := 0; page < 100; page++ {
				rs, err := db.FindGrains(ctx, fl)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				for _, r := range rs {
					if r.Memory != f.memory {
						t.Fatalf("%s: row %d of memory %q", c.name, r.ID, r.Memory)
					}
					got = append(got, r.ID)
				}
				if len(rs) < fl.Limit {
					break
				}
				fl.BeforeID = rs[len(rs)-1].ID
			}
			if len(want) > 0 && !slices.Equal(got, want) {
				t.Errorf("%s: got %d rows %v..., want %d %v...", c.name, len(got), got[:min(5, len(got))], len(want), want[:min(5, len(want))])
			}
			if len(want) == 0 && len(got) != 0 {
				t.Errorf("%s: got %v, want none", c.name, got)
			}
		}
	})
}

// pgPageRead finds the read of a page's whole rows in a PostgreSQL plan run
// with EXPLAIN ANALYZE: the primary key of grains under no alias (the
// branches' checks read it as g or g_1), with its count of loops.
var pgPageRead = regexp.MustCompile(`Index Scan using grains_pkey on grains \(actual rows=\d+ loops=(\d+)\)`)

// A recall on PostgreSQL reads the whole rows of its page only: the
// branches' ids are cut to the page before any row is read. Each pattern
// runs over a store whose branches hold more than a page between them (a
// tag in 4 of the 8 scopes, a relation in 2, a scope prefix over all 8),
// and EXPLAIN ANALYZE counts the rows read. (SQLite's statement reads the
// page's rows by id after its merge's limit, by construction.)
func TestRecallReadsOnlyItsPage(t *testing.T) {
	db := openPostgres(t)
	ctx := context.Background()
	f := newFixture(t, db, 50)
	const n = 2000
	if _, err := db.InsertGrains(ctx, f.memory, loadRows(f, 0, n, n), nil); err != nil {
		t.Fatal(err)
	}
	ref, _ := hex.DecodeString(f.users[3].Name)
	for _, c := range planCases(ref) {
		if c.walk {
			continue
		}
		for _, limit := range []int{1, 10} {
			c.filter.Memory, c.filter.Limit = f.memory, limit
			if err := c.filter.resolve(db.gorm); err != nil {
				t.Fatal(err)
			}
			q, args := db.findQuery(&c.filter)
			plan := explainWith(t, db, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ", q, args...)
			reads := pgPageRead.FindAllStringSubmatch(plan, -1)
			if len(reads) != 1 {
				t.Errorf("%s, limit %d: %d reads of whole rows, want 1:\n%s", c.name, limit, len(reads), plan)
				continue
			}
			if loops, _ := strconv.Atoi(reads[0][1]); loops > limit {
				t.Errorf("%s, limit %d: %d whole rows read for a page of %d:\n%s", c.name, limit, loops, limit, plan)
			}
		}
	}
}
