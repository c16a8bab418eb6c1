package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
)

// chunk bounds the number of bound parameters per statement.
const chunk = 500

// withEpoch selects grain rows with their memory's erase epoch, read in the
// same statement so that a reader sees an erase no later than its rows.
// The subquery is not correlated (the memory is a parameter), so it runs
// once per statement rather than once per row.
const withEpoch = "grains.*, " + epochExpr + " AS erase_epoch"

const epochExpr = "COALESCE((SELECT epoch FROM erase_epochs WHERE erase_epochs.memory = ?), 0)"

// scopeGenExpr reads the memory's scope generation (see ScopeGenRow) in
// the statement that reads the rows, like epochExpr.
const scopeGenExpr = "COALESCE((SELECT gen FROM scope_generations WHERE scope_generations.memory = ?), 0)"

// foundColumns are what FindGrains reads of a row, in scanFound's order:
// all but the blind tokens and user reference, which only queries use.
const foundColumns = rowColumns + ", " + epochExpr + ", " + scopeGenExpr

// rowColumns are the columns of foundColumns read from the grain row.
const rowColumns = "id, hash, memory, type, namespace, scope, importance, confidence, salience, pinned, archived, " +
	"created_us, last_retrieved_us, retrieval_count, supersedes, superseded_by, key_chain, user_key_id, blob"

func scanFound(rows *sql.Rows, r *GrainRow) error {
	return rows.Scan(&r.ID, &r.Hash, &r.Memory, &r.Type, &r.Namespace, &r.Scope, &r.Importance, &r.Confidence, &r.Salience,
		&r.Pinned, &r.Archived, &r.CreatedUS, &r.LastRetrievedUS, &r.RetrievalCount, &r.Supersedes, &r.SupersededBy,
		&r.KeyChain, &r.UserKeyID, &r.Blob, &r.Epoch, &r.ScopeGen)
}

// packedColumns is foundColumns for SQLite, where go-sqlite3 makes two or
// three cgo calls per column of every row and they were most of a
// recall's cost: the validated text fields (none holds a space) and the
// integers travel as one space-separated text, which scanPacked splits.
const packedColumns = "id, hash, importance, confidence, salience, blob, " +
	"type || ' ' || namespace || ' ' || scope || ' ' || supersedes || ' ' || superseded_by || ' ' || key_chain || ' ' || " +
	"pinned || ' ' || archived || ' ' || created_us || ' ' || last_retrieved_us || ' ' || retrieval_count || ' ' || user_key_id || ' ' || " +
	epochExpr + " || ' ' || " + scopeGenExpr

// pageColumns are the columns queryFound reads on db's dialect:
// packedColumns on SQLite, foundColumns elsewhere.
func (db *DB) pageColumns() string {
	if db.dialect == SQLite {
		return packedColumns
	}
	return foundColumns
}

// scanPacked fills r from a row of packedColumns, as the driver returns
// its values (see queryDriver).
func scanPacked(vals []driver.Value, r *GrainRow, memory string) error {
	var packed string
	var err error
	if len(vals) != 7 {
		return fmt.Errorf("grain row: %d columns", len(vals))
	}
	if r.ID, err = valInt(vals[0]); err != nil {
		return err
	}
	if r.Hash, err = valString(vals[1]); err != nil {
		return err
	}
	for i, p := range []*float64{&r.Importance, &r.Confidence, &r.Salience} {
		if *p, err = valFloat(vals[2+i]); err != nil {
			return err
		}
	}
	if r.Blob, err = valBytes(vals[5]); err != nil {
		return err
	}
	if packed, err = valString(vals[6]); err != nil {
		return err
	}
	var f [14]string // no slice per row, as strings.Split made
	n := 0
	for rest, more := packed, true; more; n++ {
		if n == len(f) {
			return fmt.Errorf("grain row %d: more than %d packed fields", r.ID, len(f))
		}
		f[n], rest, more = strings.Cut(rest, " ")
	}
	if n != len(f) {
		return fmt.Errorf("grain row %d: %d packed fields", r.ID, n)
	}
	r.Memory, r.Type, r.Namespace, r.Scope, r.Supersedes, r.SupersededBy, r.KeyChain = memory, f[0], f[1], f[2], f[3], f[4], f[5]
	var ints [8]int64
	for i := range ints {
		v, err := strconv.ParseInt(f[6+i], 10, 64)
		if err != nil {
			return fmt.Errorf("grain row %d: packed field %d: %w", r.ID, 6+i, err)
		}
		ints[i] = v
	}
	r.Pinned, r.Archived = ints[0] != 0, ints[1] != 0
	r.CreatedUS, r.LastRetrievedUS, r.RetrievalCount, r.UserKeyID, r.Epoch, r.ScopeGen = ints[2], ints[3], ints[4], ints[5], ints[6], ints[7]
	return nil
}

// chainIDs returns the distinct key ids of the rows' chains.
func chainIDs(rows []*GrainRow) ([]int64, error) {
	seen := map[string]bool{}
	var ids []int64
	for _, r := range rows {
		if seen[r.KeyChain] {
			continue
		}
		seen[r.KeyChain] = true
		chain, err := keys.ParseChainID(r.KeyChain)
		if err != nil {
			return nil, err
		}
		for _, id := range chain {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// countFresh returns the counter deltas of newly stored rows.
func countFresh(fresh []*GrainRow) counter {
	c := counter{}
	for _, r := range fresh {
		c.add(r.Scope, r.UserKeyID, 1)
	}
	return c
}

// InsertGrains stores rows of one memory in one transaction and returns
// their hashes in order. A row whose (scope, dedup token) matches a live
// grain, or an earlier row of the batch, is not stored: its slot gets the
// existing hash. The rows' Tags are stored with them.
//
// The caller may still be building the rows: when p is not nil, a row's
// Hash and Blob are read only after p.Ready(i) returns nil, and the rows'
// search fields (Terms, DocLen, Dim) only after p.Indexed does. On
// PostgreSQL the transaction's first statements, and the insert of earlier
// rows, overlap the sealing of later ones; on both stores the insert of the
// grains overlaps the computing of their search terms.
func (db *DB) InsertGrains(ctx context.Context, memory string, rows []*GrainRow, p Pending) ([]string, error) {
	var out []string
	// A concurrent writer of the same content can win the unique index
	// between our read and our insert: retry, and the read finds its row.
	for attempt := 0; ; attempt++ {
		var err error
		if db.dialect == Postgres {
			err = db.pgTx(ctx, func(tx pgx.Tx) error {
				var err error
				out, err = insertGrainsPG(ctx, tx, db.grainSeq, memory, rows, p)
				return translatePG(err, "insert grains")
			})
		} else {
			for i := 0; p != nil && i < len(rows); i++ {
				if err := p.Ready(i); err != nil {
					return nil, err
				}
			}
			err = db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				var err error
				out, err = db.insertGrains(tx, memory, rows, p)
				return err
			})
		}
		if err == nil {
			db.noteInserted(len(rows))
		}
		if err == nil || !errors.Is(err, errDuplicate) || attempt == 2 {
			return out, translate(err, "insert grains")
		}
	}
}

// Pending is a batch of rows still being built (see InsertGrains).
type Pending interface {
	// Ready returns once row i's Hash and Blob are set.
	Ready(i int) error
	// Indexed returns once every row's search fields are set.
	Indexed() error
}

// indexed waits for p's search fields, if p is not nil.
func indexed(p Pending) error {
	if p == nil {
		return nil
	}
	return p.Indexed()
}

func dedupKey(scope string, tok []byte) string { return scope + "\x00" + string(tok) }

// dedupHit is a live-looking row whose dedup token a batch row repeats.
type dedupHit struct {
	ID        int64
	Hash      string
	Scope     string
	DedupTok  []byte `gorm:"column:dedup_tok"`
	KeyChain  string
	UserKeyID int64
	// What a write of the same grain must repeat (see sameGrain).
	Importance, Confidence float64
	Pinned                 bool
}

// deadRows are rows to delete with their counter deltas.
type deadRows struct {
	ids []int64
	c   counter
}

// sortHits turns the rows found by a batch's dedup lookup into the map
// splitFresh reads, (scope, token) to the row, leaving out rows sealed under a
// destroyed key: an erased grain not yet deleted by the cleaner is not the
// grain being written, even if its content is the same (the user or scope
// it belonged to was erased, and the new row is sealed under the new key).
// Those rows are returned to delete at once, as the cleaner would: they
// hold the token's place in the unique dedup index. live returns which of
// the given key ids are live.
//
// A hit under the batch row's own key chain is live (the insert checked
// that chain); another chain of the same scope and user differs in a key
// that was replaced, so one of its keys was destroyed, which live checks.
func sortHits(rows []*GrainRow, found []dedupHit, live func(ids []int64) ([]int64, error)) (map[string]dedupHit, deadRows, error) {
	var dead deadRows
	chainOf := make(map[string]string, len(rows))
	for _, r := range rows {
		chainOf[dedupKey(r.Scope, r.DedupTok)] = r.KeyChain
	}
	existing := make(map[string]dedupHit, len(found))
	var other []dedupHit
	var ids []int64
	for _, f := range found {
		k := dedupKey(f.Scope, f.DedupTok)
		if c, ok := chainOf[k]; !ok || c == f.KeyChain {
			existing[k] = f
			continue
		}
		other = append(other, f)
		chain, err := keys.ParseChainID(f.KeyChain)
		if err != nil {
			return nil, dead, err
		}
		for _, id := range chain {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(other) == 0 {
		return existing, dead, nil
	}
	liveIDs, err := live(ids)
	if err != nil {
		return nil, dead, err
	}
	for _, f := range other {
		chain, _ := keys.ParseChainID(f.KeyChain)
		alive := true
		for _, id := range chain {
			alive = alive && slices.Contains(liveIDs, id)
		}
		if alive {
			existing[dedupKey(f.Scope, f.DedupTok)] = f
			continue
		}
		dead.ids = append(dead.ids, f.ID)
		dead.c.add(f.Scope, f.UserKeyID, -1)
	}
	return existing, dead, nil
}

func (db *DB) insertGrains(tx *gorm.DB, memory string, rows []*GrainRow, p Pending) ([]string, error) {
	ids, err := chainIDs(rows)
	if err != nil {
		return nil, err
	}
	if err := checkLive(tx, db.dialect, memory, ids); err != nil {
		return nil, err
	}
	toks := make([][]byte, 0, len(rows))
	for _, r := range rows {
		toks = append(toks, r.DedupTok)
	}
	var found []dedupHit
	for i := 0; i < len(toks); i += chunk {
		var part []dedupHit
		err := tx.Model(&GrainRow{}).Select("id", "hash", "scope", "dedup_tok", "key_chain", "user_key_id", "importance", "confidence", "pinned").
			Where("superseded_by = '' AND dedup_tok IN ?", toks[i:min(i+chunk, len(toks))]).
			Find(&part).Error
		if err != nil {
			return nil, translate(err, "read grains")
		}
		found = append(found, part...)
	}
	existing, dead, err := sortHits(rows, found, func(ids []int64) ([]int64, error) {
		var live []int64
		err := tx.Model(&KeyRow{}).Select("id").Where("id IN ? AND destroyed_us = 0", ids).Find(&live).Error
		return live, translate(err, "check data keys")
	})
	if err != nil {
		return nil, err
	}
	if len(dead.ids) > 0 {
		if err := deleteIDs(tx, dead.ids); err != nil {
			return nil, err
		}
		if err := adjustCounts(tx, memory, dead.c); err != nil {
			return nil, err
		}
	}
	pos, out, same, err := splitFresh(rows, existing)
	if err != nil {
		return nil, err
	}
	out = finishHashes(rows, out, same)
	if len(pos) == 0 {
		return out, nil
	}
	fresh := pick(rows, pos)
	// A large batch that will merge the text index's tail reads and
	// merges its segments through another connection meanwhile.
	var pre <-chan preparedMerge
	if db.dialect != Postgres && len(fresh) >= planParallel && runtime.GOMAXPROCS(0) > 1 && db.tail.due() {
		pre = db.prepareMergeAsync(tx.Statement.Context)
	}
	// A large batch's text index is planned (searchPlan: its postings
	// grouped by token, in token order) on another core while the grains
	// are inserted on this one; the plan reads the rows' search fields,
	// the insert writes their ids (and, gorm's CreateInBatches, every
	// element of the slice it is given: the plan reads a copy).
	var planned chan plannedSearch
	if len(fresh) >= planParallel && runtime.GOMAXPROCS(0) > 1 {
		planned = make(chan plannedSearch, 1)
		own := slices.Clone(fresh)
		go func() {
			if err := indexed(p); err != nil {
				planned <- plannedSearch{err: err}
				return
			}
			planned <- plannedSearch{plan: planSearch(own)}
		}()
	}
	if err := tx.CreateInBatches(fresh, chunk).Error; err != nil {
		return nil, translate(err, "insert grains")
	}
	if err := adjustCounts(tx, memory, countFresh(fresh)); err != nil {
		return nil, err
	}
	var tags []TagRow
	for _, r := range fresh {
		for _, t := range r.Tags {
			tags = append(tags, TagRow{GrainID: r.ID, Token: t.Token, Memory: memory})
		}
	}
	if len(tags) > 0 {
		if err := tx.CreateInBatches(tags, chunk).Error; err != nil {
			return nil, translate(err, "insert tags")
		}
	}
	var plan *searchPlan
	if planned != nil {
		r := <-planned
		if r.err != nil {
			return nil, r.err
		}
		plan = r.plan
	} else if err := indexed(p); err != nil {
		return nil, err
	}
	if err := db.insertSearch(tx, memory, fresh, plan, pre); err != nil {
		return nil, err
	}
	return out, nil
}

// planParallel is the number of new grains from which an insert plans its
// text index, and prepares the merge of its tail, beside the grains'
// insert (see insertGrains). A variable for the tests.
var planParallel = 64

// plannedSearch is a searchPlan made in the background, or why not.
type plannedSearch struct {
	plan *searchPlan
	err  error
}

// GrainByHash returns the grain with hash in memory, or a not_found error.
func (db *DB) GrainByHash(ctx context.Context, memory, hash string) (*GrainRow, error) {
	sctx, err := db.boundedCtx(ctx)
	if err != nil {
		return nil, translate(err, "read grain")
	}
	var rows []GrainRow
	if err := db.gorm.WithContext(sctx).Select(withEpoch, memory).Where("hash = ? AND memory = ?", hash, memory).Limit(1).Find(&rows).Error; err != nil {
		return nil, translate(err, "read grain")
	}
	if len(rows) == 0 {
		return nil, grains.NoGrain(memory, hash)
	}
	return &rows[0], nil
}

// ReadGrain returns the grain with hash in memory as FindGrains returns
// rows (without tokens or user reference: what opening it needs), or a
// not_found error. It is GrainByHash for a read that only opens the grain
// (DB.Get): one statement written out and scanned by hand, where gorm's
// building and reflection cost more than the read.
func (db *DB) ReadGrain(ctx context.Context, memory, hash string) (*GrainRow, error) {
	sctx, err := db.boundedCtx(ctx)
	if err != nil {
		return nil, translate(err, "read grain")
	}
	f := Filter{Memory: memory}
	rows, err := db.queryFound(sctx, &f, db.rebind("SELECT "+db.pageColumns()+" FROM grains WHERE hash = ? AND memory = ? LIMIT 1"),
		[]any{memory, memory, hash, memory}, 1, false)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, grains.NoGrain(memory, hash)
	}
	return &rows[0], nil
}

// Placements returns, for those of hashes that name a row of memory, the
// row with only its Hash, Memory, Namespace, Scope, KeyChain and Epoch set: where a
// version is and which keys open it, without its blob, in one statement per
// 500 hashes and in no order.
func (db *DB) Placements(ctx context.Context, memory string, hashes []string) ([]GrainRow, error) {
	sctx, err := db.boundedCtx(ctx)
	if err != nil {
		return nil, translate(err, "read grains")
	}
	out := make([]GrainRow, 0, len(hashes))
	for i := 0; i < len(hashes); i += chunk {
		part := hashes[i:min(i+chunk, len(hashes))]
		args := make([]any, 0, len(part)+2)
		args = append(args, memory)
		for _, h := range part {
			args = append(args, h)
		}
		args = append(args, memory)
		q := db.rebind("SELECT hash, namespace, scope, key_chain, " + epochExpr + " FROM grains WHERE hash IN (?" +
			strings.Repeat(", ?", len(part)-1) + ") AND memory = ?")
		if err := db.placements(sctx, q, args, memory, &out); err != nil {
			return nil, translate(err, "read grains")
		}
	}
	return out, nil
}

// placements runs Placements' statement q, appending its rows to out.
func (db *DB) placements(ctx context.Context, q string, args []any, memory string, out *[]GrainRow) error {
	if db.dialect == SQLite {
		return db.queryDriver(ctx, q, args, func(vals []driver.Value) (err error) {
			r := GrainRow{Memory: memory}
			if len(vals) != 5 {
				return fmt.Errorf("placement: %d columns", len(vals))
			}
			for i, p := range []*string{&r.Hash, &r.Namespace, &r.Scope, &r.KeyChain} {
				if *p, err = valString(vals[i]); err != nil {
					return err
				}
			}
			if r.Epoch, err = valInt(vals[4]); err != nil {
				return err
			}
			*out = append(*out, r)
			return nil
		})
	}
	res, err := db.gorm.ConnPool.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer res.Close()
	for res.Next() {
		r := GrainRow{Memory: memory}
		if err := res.Scan(&r.Hash, &r.Namespace, &r.Scope, &r.KeyChain, &r.Epoch); err != nil {
			return err
		}
		*out = append(*out, r)
	}
	return res.Err()
}

// Filter selects grain rows. Token lists hold one token per scope the query
// covers; a row matches a field when its token is any of them. A nil list
// does not filter; an empty non-nil list matches nothing.
type Filter struct {
	Memory      string
	Subject     [][]byte
	Relation    [][]byte
	Object      [][]byte
	Tags        [][][]byte // every tag must match
	UserRef     []byte
	Type        string
	Namespace   string
	ScopePrefix string

	IncludeSuperseded bool
	IncludeArchived   bool

	// BeforeID pages backwards: only rows with a smaller id (0: from the newest).
	BeforeID int64
	// Limit bounds the rows returned (0: no bound).
	Limit int

	// ScopeGen is the memory's scope generation the tokens were made at,
	// when they came from a cache (keys.Keyring.IndexKeys). With
	// CheckScopeGen set, FindGrains fails with ErrStaleScopes if the
	// generation has moved since: a scope created since has no token in
	// the lists.
	ScopeGen      int64
	CheckScopeGen bool

	userKeyIDs []int64  // the keys of UserRef's user, see resolve
	scopes     []string // the scopes under ScopePrefix (SQLite), see resolve
}

func (f *Filter) empty() bool {
	for _, l := range [][][]byte{f.Subject, f.Relation, f.Object} {
		if l != nil && len(l) == 0 {
			return true
		}
	}
	for _, l := range f.Tags {
		if len(l) == 0 {
			return true
		}
	}
	return false
}

// The drivers of a recall: the field whose index finds the rows (see
// findQuery).
const (
	driveWalk     = iota // the memory's rows newest first (idx_grains_mem)
	driveSubject         // idx_grains_s
	driveObject          // idx_grains_o
	driveUser            // idx_grains_userkey
	driveTag             // idx_grain_tags_tg
	driveRelation        // idx_grains_r
	driveScope           // idx_grains_scope, one scope at a time
)

// driver picks the index that finds f's rows: the field most
// likely to be selective, in a fixed order, so that the plan does not hang
// on the planner's statistics (which a new store has not got).
func (f *Filter) driver() int {
	switch {
	case f.Subject != nil:
		return driveSubject
	case f.Object != nil:
		return driveObject
	case f.UserRef != nil:
		return driveUser
	case len(f.Tags) > 0:
		return driveTag
	case f.Relation != nil:
		return driveRelation
	case f.ScopePrefix != "" && f.scopes != nil && len(f.scopes) <= maxBranches:
		return driveScope
	}
	return driveWalk
}

// maxBranches bounds the branches of a recall (one per token or
// scope); past it, one IN list and a sort (or, for scopes, the walk).
const maxBranches = 64

// whereSQL is f's condition, with ? placeholders.
func (db *DB) whereSQL(f *Filter) (string, []any) {
	return db.whereSQLSkip(f, -1, "", 0)
}

// hidden says which of a condition's columns whereSQLSkip writes in a form
// that no index serves, keeping its meaning (see pgBranches for why).
type hidden int

const (
	hideMemory hidden = 1 << iota // memory IS NOT DISTINCT FROM ?
	hideTokens                    // (s_tok || ''::bytea), and r_tok, o_tok
	hideScope                     // (scope || '') for the scope prefix
)

// whereSQLSkip is whereSQL without the condition of the driver field skip
// (see driver; -1: none), its columns prefixed with qual ("g." or ""), and
// those hide names written so that no index serves them.
func (db *DB) whereSQLSkip(f *Filter, skip int, qual string, hide hidden) (string, []any) {
	var b strings.Builder
	args := []any{f.Memory}
	if hide&hideMemory != 0 {
		b.WriteString(qual + "memory IS NOT DISTINCT FROM ?")
	} else {
		b.WriteString(qual + "memory = ?")
	}
	token := func(name string) string {
		if hide&hideTokens != 0 {
			return "(" + qual + name + " || ''::bytea)"
		}
		return qual + name
	}
	in := func(cond string, vals []any) {
		b.WriteString(" AND ")
		b.WriteString(cond)
		b.WriteString(" IN (")
		for i, v := range vals {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('?')
			args = append(args, v)
		}
		b.WriteByte(')')
	}
	if f.Subject != nil && skip != driveSubject {
		in(token("s_tok"), anys(f.Subject))
	}
	if f.Relation != nil && skip != driveRelation {
		in(token("r_tok"), anys(f.Relation))
	}
	if f.Object != nil && skip != driveObject {
		in(token("o_tok"), anys(f.Object))
	}
	for i, t := range f.Tags {
		if i == 0 && skip == driveTag {
			continue
		}
		in(qual+"id IN (SELECT grain_id FROM grain_tags WHERE token", anys(t))
		b.WriteByte(')')
	}
	if f.UserRef != nil && skip != driveUser {
		in(qual+"user_key_id", anys(nonEmpty(f.userKeyIDs)))
	}
	and := func(cond string, vals ...any) {
		b.WriteString(" AND ")
		b.WriteString(cond)
		args = append(args, vals...)
	}
	if f.Type != "" {
		and(qual+"type = ?", f.Type)
	}
	if f.Namespace != "" {
		and(qual+"namespace = ?", f.Namespace)
	}
	if f.ScopePrefix != "" && skip != driveScope {
		scope := qual + "scope"
		if hide&hideScope != 0 {
			scope = "(" + scope + " || '')"
		}
		cond, vals := db.underPrefix(scope, f.ScopePrefix)
		and(cond, vals...)
	}
	if !f.IncludeSuperseded {
		if db.dialect == Postgres {
			// superseded_by is '' or a hex hash, so this is "= ''" in a
			// form that does not match the partial dedup index's predicate:
			// PostgreSQL without statistics took that index for a cheap
			// way to the memory's live rows, read them all and sorted.
			and(qual + "superseded_by < '0'")
		} else {
			and(qual + "superseded_by = ''")
		}
	}
	if !f.IncludeArchived {
		and(qual+"archived = ?", false)
	}
	if f.BeforeID > 0 {
		and(qual+"id < ?", f.BeforeID)
	}
	return b.String(), args
}

func anys[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// userKeyIDs returns the id of the live key of the user with blind
// reference ref, if any: a destroyed key's name is no longer the reference
// (see destroyedName), and the rows it made unreadable are the cleaner's.
// Rows are found by user through the user_key_id index. (They carry
// user_ref too, for hold checks, but it is not indexed.) The ids are read
// first, rather than in a subquery, because SQLite's
// planner estimates a subquery's rows poorly and scans instead.
func userKeyIDs(tx *gorm.DB, memory string, ref []byte) ([]int64, error) {
	ids, err := column[int64](tx, "SELECT id FROM data_keys WHERE memory = ? AND kind = ? AND name = ? ORDER BY id",
		memory, string(keys.KindUser), hex.EncodeToString(ref))
	return ids, translate(err, "read data keys")
}

// column runs q in tx, a statement of one column, and returns its values:
// gorm's Pluck without its statement building.
func column[T any](tx *gorm.DB, q string, args ...any) ([]T, error) {
	var out []T
	err := gormRunner{tx}.query(tx.Statement.Context, q, args, func(scan func(...any) error) error {
		var v T
		err := scan(&v)
		out = append(out, v)
		return err
	})
	return out, err
}

// nonEmpty returns ids, or a list no row matches when it is empty (an empty
// IN list is not valid SQL everywhere). That list is -1, never 0: 0 is the
// user_key_id of every grain without a user, so "a user with no key" would
// select all of them.
const noKey = -1

func nonEmpty(ids []int64) []int64 {
	if len(ids) == 0 {
		return []int64{noKey}
	}
	return ids
}

// resolve reads what f needs before it can be turned into SQL: the user's
// key ids, and the scopes under a scope prefix (see driver). Both are read
// by statements written out, not built by gorm, whose building cost a
// recall by user or by scope prefix more than the reads (BenchmarkResolve).
func (f *Filter) resolve(tx *gorm.DB) error {
	if f.UserRef != nil {
		var err error
		if f.userKeyIDs, err = userKeyIDs(tx, f.Memory, f.UserRef); err != nil {
			return err
		}
	}
	f.scopes = nil
	if f.ScopePrefix != "" && f.driver() == driveWalk {
		// The scopes holding rows, or having held them: a counter row
		// stays at 0. Read through the counters' primary key.
		cond, args := (&DB{dialect: tx.Dialector.Name()}).underPrefix("name", f.ScopePrefix)
		scopes, err := column[string](tx, "SELECT DISTINCT name FROM grain_counts WHERE memory = ? AND kind = 'scope' AND "+
			cond+" ORDER BY name LIMIT "+strconv.Itoa(maxBranches+1), append([]any{f.Memory}, args...)...)
		if err != nil {
			return translate(err, "read scopes")
		}
		if scopes == nil {
			scopes = []string{} // read, and none: not nil (see driver)
		}
		f.scopes = scopes
	}
	return nil
}

// findQuery is FindGrains' statement and its arguments. It is built by
// hand, not by gorm: gorm's statement building cost a recall more than
// scanning its rows.
//
// The statement leaves the planner no choice to get wrong. With no
// statistics (a new store until its first ANALYZE; PostgreSQL's generic
// plans of prepared statements), both databases read a memory's rows
// through the scope index and sorted them all. So the field that finds the
// rows is chosen here (see driver), and:
//
//   - each of its values (one token per scope the query covers, the user's
//     key ids, the scopes under a prefix) gets one branch, reading its
//     index backwards, newest first, and stopping at the limit, since a
//     value's entries are in id order (see GrainRow). A recall reads at
//     most limit rows per value however many rows match (on SQLite, about
//     limit in all), where one IN list would read every match and sort
//     them. The branches select ids; the page's rows are read by id. On
//     SQLite a branch is spelled out per value and the branches merged
//     (sqliteBranches); on PostgreSQL the values are one array parameter
//     read behind LATERAL, one statement for any number of them
//     (pgBranches).
//   - SQLite is told the index (INDEXED BY). PostgreSQL cannot be told, so
//     a branch leaves it no other index that gives its order (see
//     pgBranches), and the rows are read by id behind LATERAL and OFFSET
//     0, which no plan can turn into a scan of grains.
//   - with no driver, the memory's rows are walked newest first
//     (idx_grains_mem), which is the only index a memory alone can use.
func (db *DB) findQuery(f *Filter) (string, []any) {
	d := f.driver()
	limit := ""
	if f.Limit > 0 {
		limit = " LIMIT " + strconv.Itoa(f.Limit)
	}
	if d == driveWalk {
		cols, from := db.pageColumns(), "grains"
		if db.dialect == SQLite {
			from = "grains INDEXED BY idx_grains_mem"
		}
		cond, args := db.whereSQLSkip(f, d, "", 0)
		q := "SELECT " + cols + " FROM " + from + " WHERE " + cond + " ORDER BY id DESC" + limit
		return db.rebind(q), append([]any{f.Memory, f.Memory}, args...)
	}
	var index, col string
	var vals any // the driver's values: [][]byte, []int64 or []string
	switch d {
	case driveSubject:
		index, col, vals = "idx_grains_s", "s_tok", distinctBytes(f.Subject)
	case driveObject:
		index, col, vals = "idx_grains_o", "o_tok", distinctBytes(f.Object)
	case driveRelation:
		index, col, vals = "idx_grains_r", "r_tok", distinctBytes(f.Relation)
	case driveUser:
		index, col, vals = "idx_grains_userkey", "user_key_id", distinctOf(nonEmpty(f.userKeyIDs))
	case driveTag:
		index, vals = "idx_grain_tags_tg", distinctBytes(f.Tags[0])
	case driveScope:
		index, col, vals = "idx_grains_scope", "scope", distinctOf(nonEmptyScopes(f.scopes))
	}
	if db.dialect == SQLite {
		cond, args := db.whereSQLSkip(f, d, "g.", 0)
		return sqliteBranches(d, index, col, vals, cond, args, limit)
	}
	return db.pgBranches(f, d, col, vals, limit)
}

// sqliteBranches is findQuery's statement on SQLite for driver d: one
// branch per value, each told its index, joined by UNION ALL under one
// ORDER BY id DESC and the limit. SQLite answers that by merging the
// branches (each a co-routine reading its index newest first, no sort), and
// the merge stops at the limit: a recall reads about limit index entries in
// all, not limit per value. The page's rows are then read by id. (A
// materialized CTE of branches each with its own limit read up to limit
// rows per value: 8 scopes, 80 rows, and a recall by tag cost a third
// more; docs/performance.md.) The parameters are numbered (?N), so that
// the conditions beside the driver's are bound once, not once per branch:
// every bind is a cgo call. The statement's text depends only on its shape
// and is kept (sqliteShapes): building it was a tenth of a recall's CPU.
func sqliteBranches(d int, index, col string, vals any, cond string, args []any, limit string) (string, []any) {
	values := anysOf(vals)
	all := append(args, values...)
	n := len(values)
	if n > maxBranches {
		n = -n // one IN list of n values
	}
	shape := branchShape{d: d, n: n, cond: cond, limit: limit}
	if q, ok := sqliteShapes.get(shape); ok {
		return q, all
	}
	cond = numbered(cond, 1) // ?1 is the memory
	var b strings.Builder
	branch := func(eq string) {
		if b.Len() > 0 {
			b.WriteString(" UNION ALL ")
		}
		if d == driveTag {
			b.WriteString("SELECT t.grain_id AS id FROM grain_tags AS t INDEXED BY " + index +
				" CROSS JOIN grains AS g NOT INDEXED WHERE g.id = t.grain_id AND t.token " + eq + " AND " + cond)
		} else {
			b.WriteString("SELECT g.id AS id FROM grains AS g INDEXED BY " + index + " WHERE g." + col + " " + eq + " AND " + cond)
		}
	}
	// A tag's branch reads its grains by id (NOT INDEXED still allows the
	// rowid): SQLite 3.53 with the statistics of an empty store chose to
	// scan a covering index of grains for each tag entry instead
	// (TestPlansAtEverySize), a plan that stays once the store has grown.
	//
	// The branches are disjoint, and UNION ALL need not drop duplicates: a
	// row has one token per field (the values are one per scope, and a row
	// is in one scope), one key, one scope, and no tag token twice. The
	// values themselves are distinct. Past maxBranches (SQLite allows 500
	// terms in a compound SELECT), one IN list, whose matches are sorted.
	if n > 0 {
		for i := range values {
			branch("= ?" + strconv.Itoa(len(args)+1+i))
		}
	} else {
		branch("IN (" + numbered(strings.Repeat("?, ", len(values)-1)+"?", len(args)+1) + ")")
	}
	q := "SELECT grains." + packedColumnsNumbered + " FROM (" + b.String() + " ORDER BY 1 DESC" + limit +
		") AS hit CROSS JOIN grains WHERE grains.id = hit.id ORDER BY grains.id DESC"
	sqliteShapes.put(shape, q)
	return q, all
}

// packedColumnsNumbered is packedColumns with the memory as ?1.
var packedColumnsNumbered = strings.ReplaceAll(packedColumns, "?", "?1")

// branchShape is what the text of sqliteBranches' statement depends on:
// the driver, the number of values (negative: one IN list), the other
// conditions (with ? placeholders) and the limit clause.
type branchShape struct {
	d, n        int
	cond, limit string
}

// shapeCache keeps statement texts by shape. Shapes are few (the fields a
// query combines, the scopes it covers, its page size); past
// shapeCacheSize the cache starts over, so it stays bounded whatever the
// queries.
type shapeCache struct {
	mu sync.Mutex
	m  map[branchShape]string
}

const shapeCacheSize = 256

var sqliteShapes shapeCache

func (c *shapeCache) get(s branchShape) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q, ok := c.m[s]
	return q, ok
}

func (c *shapeCache) put(s branchShape, q string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= shapeCacheSize {
		c.m = make(map[branchShape]string)
	}
	c.m[s] = q
}

// pgBranches is findQuery's statement on PostgreSQL for driver d: the
// values are one array parameter, and each is read behind LATERAL, its
// index backwards, up to the limit. The statement's text is the same
// however many values there are (one per scope the query covers), so it
// is prepared once and its plan is small: a branch per value spelled out
// cost more to plan (1.3 ms for 8) than to run.
//
// A token or user branch must not let PostgreSQL take the memory condition
// to idx_grains_mem instead of the driver's index: IS NOT DISTINCT FROM
// (memory is never NULL) no index serves, and it is estimated like "=",
// from the memory's statistics; a hidden form (the memory concatenated
// with an empty string) is estimated at 0.5% and made PostgreSQL read every row of a broad token
// and sort them. The scope index is (scope, memory, id), so a scope
// branch's conditions are all its. The branches' ids are ordered and cut
// to the page first; then the page's rows, and only theirs, are read by id
// behind LATERAL and OFFSET 0, which no plan can turn into a scan of
// grains. (Read before the cut, a tag recall over 8 scopes read 40 whole
// rows for a page of 10: TestRecallReadsOnlyItsPage.)
func (db *DB) pgBranches(f *Filter, d int, col string, vals any, limit string) (string, []any) {
	// The memory's condition is hidden (see above) but for the scope
	// driver, whose index holds the memory.
	hide := hideTokens
	if d != driveScope {
		hide |= hideMemory
	}
	// Another token field's condition is hidden from its index (the column
	// joined to nothing): with statistics, PostgreSQL ANDed that index's
	// bitmap with the driver's, reading every row of a broad relation for
	// each value (500 rows per value at 10,000 grains) to find the few of a
	// subject, and sorted them. The driver's rows are few; they are read
	// and filtered.
	//
	// So is the scope prefix's, behind a token: PostgreSQL ANDed the
	// scope index's bitmap with the token's and sorted (a relation within
	// a scope read the scope's every row), and planned that at each call.
	// A token is made under one scope's index key, so its rows are that
	// scope's already, and the query's tokens are those of the scopes
	// under the prefix: the condition, kept as a check, drops nothing they
	// do not (TestPlansAtEverySize, "... in a scope").
	if d != driveUser && d != driveScope {
		hide |= hideScope
	}
	cond, args := db.whereSQLSkip(f, d, "g.", hide)
	if d == driveUser || d == driveScope {
		return db.pgSpelled(f, col, anysOf(vals), cond, args, limit)
	}
	typ := "bytea[]"
	switch vals.(type) {
	case []int64:
		typ = "bigint[]"
	case []string:
		typ = "text[]"
	}
	// A value is matched as the range [x, x], and the rows ordered by
	// (value, id): the order only the driver's index gives. With "= x" the
	// value drops out of the order (it is constant), and a plan made for
	// an unknown value (one statement for them all) walked the primary
	// key backwards, filtering: every row of the memory for a value of
	// few rows.
	var branch string
	switch d {
	case driveTag:
		// LATERAL with OFFSET 0 fences the grain lookup: by id, once per
		// tag entry, never a join that scans grains.
		branch = "SELECT t.grain_id AS id FROM grain_tags AS t CROSS JOIN LATERAL (SELECT 1 FROM grains AS g WHERE g.id = t.grain_id AND " +
			cond + " OFFSET 0) AS ok WHERE t.token >= v.x AND t.token <= v.x ORDER BY t.token DESC, t.grain_id DESC"
	case driveScope:
		// The scope index is (scope text_pattern_ops, memory, id): its
		// operators, and its order (the memory is constant).
		branch = "SELECT g.id FROM grains AS g WHERE g.scope ~>=~ v.x AND g.scope ~<=~ v.x AND " + cond +
			" ORDER BY g.scope USING ~>~, g.id DESC"
	default:
		branch = "SELECT g.id FROM grains AS g WHERE g." + col + " >= v.x AND g." + col + " <= v.x AND " + cond +
			" ORDER BY g." + col + " DESC, g.id DESC"
	}
	q := "SELECT g.*, " + epochExpr + ", " + scopeGenExpr + " FROM (SELECT b.id FROM unnest(?::" + typ + ") AS v(x) CROSS JOIN LATERAL (" +
		branch + limit + ") AS b ORDER BY b.id DESC" + limit + ") AS hit CROSS JOIN LATERAL (SELECT " + rowColumns +
		" FROM grains WHERE grains.id = hit.id OFFSET 0) AS g WHERE g.memory = ? ORDER BY g.id DESC"
	out := append([]any{f.Memory, f.Memory, vals}, args...)
	return db.rebind(q), append(out, f.Memory)
}

// pgSpelled is pgBranches with one branch spelled out per value, each
// planned for its value, for the user and scope drivers: a user has a few
// keys and a prefix a few scopes, and these were slower as one array
// (BenchmarkRecallMatrix, docs/performance.md).
func (db *DB) pgSpelled(f *Filter, col string, vals []any, cond string, args []any, limit string) (string, []any) {
	var b strings.Builder
	var all []any
	for i, v := range vals {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString("SELECT id FROM (SELECT g.id FROM grains AS g WHERE g." + col + " = ? AND " + cond + " ORDER BY g.id DESC" + limit +
			") AS b" + strconv.Itoa(i))
		all = append(append(all, v), args...)
	}
	q := "SELECT g.*, " + epochExpr + ", " + scopeGenExpr + " FROM (SELECT id FROM (" + b.String() + ") AS b ORDER BY id DESC" + limit +
		") AS hit CROSS JOIN LATERAL (SELECT " + rowColumns + " FROM grains WHERE grains.id = hit.id OFFSET 0) AS g WHERE g.memory = ? ORDER BY g.id DESC"
	return db.rebind(q), append(append([]any{f.Memory, f.Memory}, all...), f.Memory)
}

// numbered turns the ? placeholders of q into SQLite's ?N, from ?from on.
func numbered(q string, from int) string {
	var b strings.Builder
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		b.WriteByte('?')
		b.WriteString(strconv.Itoa(from))
		from++
	}
	return b.String()
}

// distinctBytes returns vals without repeats, in order.
func distinctBytes(vals [][]byte) [][]byte {
	out := vals[:0:0]
	seen := make(map[string]bool, len(vals))
	for _, v := range vals {
		if !seen[string(v)] {
			seen[string(v)] = true
			out = append(out, v)
		}
	}
	return out
}

// distinctOf returns vals without repeats, in order.
func distinctOf[T comparable](vals []T) []T {
	out := vals[:0:0]
	seen := make(map[T]bool, len(vals))
	for _, v := range vals {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// anysOf returns the values of vals, a [][]byte, []int64 or []string.
func anysOf(vals any) []any {
	switch v := vals.(type) {
	case [][]byte:
		return anys(v)
	case []int64:
		return anys(v)
	case []string:
		return anys(v)
	}
	panic(fmt.Sprintf("store: driver values of type %T", vals))
}

// nonEmptyScopes returns scopes, or a list no row matches when it is empty.
func nonEmptyScopes(scopes []string) []string {
	if len(scopes) == 0 {
		return []string{" "} // no scope path holds a space
	}
	return scopes
}

// rebind turns the ? placeholders of q into PostgreSQL's $1, $2...; q holds
// no ? in a literal.
func (db *DB) rebind(q string) string {
	if db.dialect != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// FindGrains returns the rows matching f, newest first, without their
// tokens and user reference (see foundColumns).
func (db *DB) FindGrains(ctx context.Context, f Filter) ([]GrainRow, error) {
	if f.empty() {
		return nil, nil
	}
	if err := f.resolve(db.gorm.WithContext(ctx)); err != nil {
		return nil, err
	}
	// Scanned by hand: gorm's reflection cost a 10-row recall on SQLite
	// more than the query itself. The statement is prepared once, in
	// gorm's cache of prepared statements.
	q, args := db.findQuery(&f)
	return db.queryFound(ctx, &f, q, args, f.Limit, tokenDriven(f.driver()))
}

// tokenDriven reports whether driver d finds rows by blind tokens: on
// PostgreSQL its statement is pgBranches' array form, which runs on the
// pool of generic plans (DB.generic).
func tokenDriven(d int) bool {
	switch d {
	case driveSubject, driveObject, driveRelation, driveTag:
		return true
	}
	return false
}

// queryFound runs q, a SELECT of foundColumns (packedColumns on SQLite) for
// filter f, scans its rows by hand and, with f.CheckScopeGen set, fails
// with ErrStaleScopes if the memory's scope generation moved since f's
// tokens were made. With generic set, on PostgreSQL, q runs on the pool of
// generic plans.
func (db *DB) queryFound(ctx context.Context, f *Filter, q string, args []any, rows int, generic bool) ([]GrainRow, error) {
	// A GrainRow is about 400 bytes: grown by append from nothing, a page of
	// 10 rows cost 15 KB of copies.
	out := make([]GrainRow, 0, min(max(rows, 0), chunk))
	if db.dialect == SQLite {
		err := db.queryDriver(ctx, q, args, func(vals []driver.Value) error {
			out = append(out, GrainRow{})
			return scanPacked(vals, &out[len(out)-1], f.Memory)
		})
		if err != nil {
			return nil, translate(err, "find grains")
		}
	} else {
		pool := db.gorm.ConnPool
		if generic {
			pool = db.generic
		}
		res, err := pool.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, translate(err, "find grains")
		}
		defer res.Close()
		for res.Next() {
			out = append(out, GrainRow{})
			if err := scanFound(res, &out[len(out)-1]); err != nil {
				return nil, translate(err, "find grains")
			}
		}
		if err := res.Err(); err != nil {
			return nil, translate(err, "find grains")
		}
		res.Close()
	}
	if f.CheckScopeGen {
		// The rows carry the generation of their statement's snapshot. With
		// no rows, a later read is as good: the generation only grows, so
		// if it has not moved now, it had not when the rows were read.
		gen := int64(0)
		var err error
		if len(out) > 0 {
			gen = out[0].ScopeGen
		} else if gen, err = db.ScopeGeneration(ctx, f.Memory); err != nil {
			return nil, err
		}
		if gen != f.ScopeGen {
			return nil, ErrStaleScopes
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// boundedCtx returns the context for a read of one row by its unique
// index (GrainByHash), after checking that ctx is still live. On SQLite it
// cannot be cancelled: for a cancellable context database/sql starts a
// goroutine per result set to watch it, and go-sqlite3 a watcher, which
// cost more than the read (docs/performance.md); such a read, once
// started, runs to its end. Reads of more rows on SQLite go through
// queryDriver, which keeps the caller's context. On PostgreSQL, whose
// round trips can hang, every statement keeps it.
func (db *DB) boundedCtx(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if db.dialect == SQLite {
		return context.WithoutCancel(ctx), nil
	}
	return ctx, nil
}

// ErrStaleScopes is FindGrains' answer to a filter whose tokens were made
// before the memory's set of scope keys last changed: make them again.
var ErrStaleScopes = errors.New("store: the memory's scopes changed since the tokens were made")

// Supersede marks old (in memory) as superseded by next and stores next, in
// one transaction. It fails with already_superseded if old has a newer
// version that can still be read, and with conflict if next duplicates a
// live grain. A newer version that was erased (its key destroyed, its row
// perhaps deleted already) does not count: old is then the newest
// surviving version of its chain, and next replaces the erased link.
func (db *DB) Supersede(ctx context.Context, memory, oldHash string, next *GrainRow, evs []Event) error {
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The memory's lock before any row's (see lockMemory): taken only
		// when the new row is stored, after the old row's update, it let a
		// supersede, a forget of that row and an erase or hold waiting for
		// the forget wait for each other in a cycle.
		if err := lockMemory(tx, db.dialect, memory, false); err != nil {
			return err
		}
		res := tx.Model(&GrainRow{}).Where("memory = ? AND hash = ? AND superseded_by = ''", memory, oldHash).
			Update("superseded_by", next.Hash)
		if res.Error != nil {
			return translate(res.Error, "supersede grain")
		}
		if res.RowsAffected != 1 {
			var old []GrainRow
			if err := tx.Select("superseded_by").Where("memory = ? AND hash = ?", memory, oldHash).Limit(1).Find(&old).Error; err != nil {
				return translate(err, "supersede grain")
			}
			if len(old) == 0 {
				return grains.NoGrain(memory, oldHash)
			}
			succ := old[0].SupersededBy
			erased, err := successorErased(tx, memory, succ)
			if err != nil {
				return err
			}
			if erased {
				res = tx.Model(&GrainRow{}).Where("memory = ? AND hash = ? AND superseded_by = ?", memory, oldHash, succ).
					Update("superseded_by", next.Hash)
				if res.Error != nil {
					return translate(res.Error, "supersede grain")
				}
			}
			if !erased || res.RowsAffected != 1 {
				return &grains.Error{Code: grains.CodeAlreadySuperseded, Message: "grain " + oldHash + " already has a newer version",
					Hint: "supersede the newest version; see its history"}
			}
		}
		out, err := db.insertGrains(tx, memory, []*GrainRow{next}, nil)
		if err != nil {
			return err
		}
		if out[0] != next.Hash {
			return &grains.Error{Code: grains.CodeConflict, Message: "an identical live grain exists: " + out[0]}
		}
		return insertEvents(tx, next.CreatedUS, evs)
	})
	if errors.Is(err, errDuplicate) {
		return &grains.Error{Code: grains.CodeConflict, Message: "an identical live grain was written concurrently"}
	}
	return translate(err, "supersede grain")
}

// successorErased reports whether the version hash (a grain's
// superseded_by) was erased: its row is gone (the cleaner deleted it; a
// forget or purge takes whole chains, so it removes the predecessor too) or
// a key of its chain is destroyed.
func successorErased(tx *gorm.DB, memory, hash string) (bool, error) {
	if hash == "" {
		return false, nil
	}
	var rows []GrainRow
	if err := tx.Select("key_chain").Where("memory = ? AND hash = ?", memory, hash).Limit(1).Find(&rows).Error; err != nil {
		return false, translate(err, "read grain")
	}
	if len(rows) == 0 {
		return true, nil
	}
	return chainDestroyed(tx, rows[0].KeyChain)
}

// chainDestroyed reports whether any key of the key chain is destroyed.
func chainDestroyed(tx *gorm.DB, keyChain string) (bool, error) {
	ids, err := keys.ParseChainID(keyChain)
	if err != nil {
		return false, err
	}
	var n int64
	if err := tx.Model(&KeyRow{}).Where("id IN ? AND destroyed_us = 0", ids).Count(&n).Error; err != nil {
		return false, translate(err, "check data keys")
	}
	return n != int64(len(ids)), nil
}

// SuccessorErased reports whether hash's newer version in memory, if it has
// one, was erased (see Supersede).
func (db *DB) SuccessorErased(ctx context.Context, memory, hash string) (bool, error) {
	tx := db.gorm.WithContext(ctx)
	var rows []GrainRow
	if err := tx.Select("superseded_by").Where("memory = ? AND hash = ?", memory, hash).Limit(1).Find(&rows).Error; err != nil {
		return false, translate(err, "read grain")
	}
	if len(rows) == 0 {
		return false, nil
	}
	return successorErased(tx, memory, rows[0].SupersededBy)
}

// chainRow is what chain walks read.
type chainRow struct {
	ID           int64
	Hash         string
	Supersedes   string
	SupersededBy string
	Scope        string
	UserKeyID    int64
}

// Chain returns every version of hash's chain in memory, newest first. A
// version that was erased (a key of its chain destroyed, or its row deleted
// by the cleaner since) is returned as a row with only its Hash and Erased
// set, and the walk stops there: what lies beyond it is reported the same
// way whether or not the cleaner has run. The start must not be erased: it
// fails with erased, or not_found once its row is deleted.
func (db *DB) Chain(ctx context.Context, memory, hash string) ([]GrainRow, error) {
	start, err := db.GrainByHash(ctx, memory, hash)
	if err != nil {
		return nil, err
	}
	tx := db.gorm.WithContext(ctx)
	dead := map[string]bool{}
	erased := func(r *GrainRow) (bool, error) {
		d, ok := dead[r.KeyChain]
		if !ok {
			var err error
			if d, err = chainDestroyed(tx, r.KeyChain); err != nil {
				return false, err
			}
			dead[r.KeyChain] = d
		}
		return d, nil
	}
	// step reads the version h, or nil and a placeholder when it was erased.
	step := func(h string) (*GrainRow, *GrainRow, error) {
		r, err := db.GrainByHash(ctx, memory, h)
		if grains.ErrorCode(err) == grains.CodeNotFound {
			return nil, &GrainRow{Hash: h, Memory: memory, Erased: true}, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if d, err := erased(r); err != nil || d {
			return nil, &GrainRow{Hash: h, Memory: memory, Erased: true}, err
		}
		return r, nil, nil
	}
	if d, err := erased(start); err != nil {
		return nil, err
	} else if d {
		return nil, grains.Errorf(grains.CodeErased, "a key of this grain's chain was erased")
	}
	seen := map[string]bool{start.Hash: true}
	head := *start
	var top *GrainRow
	for head.SupersededBy != "" && !seen[head.SupersededBy] {
		next, ghost, err := step(head.SupersededBy)
		if err != nil {
			return nil, err
		}
		if ghost != nil {
			top = ghost
			break
		}
		seen[next.Hash] = true
		head = *next
	}
	var out []GrainRow
	if top != nil {
		out = append(out, *top)
	}
	out = append(out, head)
	visited := map[string]bool{head.Hash: true}
	for cur := head; cur.Supersedes != "" && !visited[cur.Supersedes]; {
		prev, ghost, err := step(cur.Supersedes)
		if err != nil {
			return nil, err
		}
		if ghost != nil {
			out = append(out, *ghost)
			break
		}
		visited[prev.Hash] = true
		out = append(out, *prev)
		cur = *prev
	}
	return out, nil
}

// Deletion says what a delete removed: the hashes, sorted, and the rows'
// operational columns, in the same order. The rows are read in the
// delete's transaction, under its row locks on PostgreSQL (SQLite's
// writer holds the database), so what a caller checks in them before the
// commit (a protection rule, a forget's scopes) is what is deleted: a
// version a concurrent supersede added is either in them or not deleted.
// A row an erasure made unreadable, not yet deleted by the cleaner, has
// Erasing set; a version the cleaner already deleted is not in them, but
// a row's link to it (Supersedes, SupersededBy) names a hash that is not
// either.
type Deletion struct {
	Hashes []string
	Ops    []OpRow
}

// DeleteHashes deletes the grains of memory with the given hashes and every
// version of their chains, with their tag tokens and the events mk builds,
// in one transaction. Refused by a hold (code held), or rolled back by mk
// returning ErrDryRun, it returns what it would have deleted with the
// error. A hash of a grain an erasure made unreadable, whose row the
// cleaner has not deleted yet, names nothing, as it will once the cleaner
// has run: neither that row nor its chain is deleted.
func (db *DB) DeleteHashes(ctx context.Context, memory string, hashes []string, now int64, mk EventsFunc[*Deletion]) (*Deletion, error) {
	if db.dialect == Postgres && len(hashes) == 1 {
		var del *Deletion
		var ok bool
		err := retryMoved(func() (err error) {
			del, ok, err = db.deleteOnePG(ctx, memory, hashes[0], now, mk)
			return err
		})
		if err != nil {
			return del, translate(err, "delete grains")
		}
		if ok {
			if len(del.Hashes) > 0 {
				db.scrubForget(ctx)
			}
			return del, nil
		}
	}
	var del *Deletion
	err := db.deleteTx(ctx, memory, func(tx *gorm.DB) error {
		var seeds []chainRow
		for i := 0; i < len(hashes); i += chunk {
			var r []chainRow
			if err := tx.Model(&GrainRow{}).Where("memory = ? AND hash IN ? AND NOT "+erasingRow, memory, hashes[i:min(i+chunk, len(hashes))]).Find(&r).Error; err != nil {
				return translate(err, "read grains")
			}
			seeds = append(seeds, r...)
		}
		var err error
		if del, err = deleteChains(tx, memory, seeds); err != nil {
			return err
		}
		return commitEvents(ctx, tx, now, del, mk)
	})
	if err != nil {
		return del, translate(err, "delete grains")
	}
	if del != nil && len(del.Hashes) > 0 {
		db.scrubForget(ctx)
	}
	return del, nil
}

// errChainMoved is deleteChains' answer when a chain it walked gained a
// version before its rows were locked: the transaction is tried again.
var errChainMoved = errors.New("store: a chain changed while it was read")

// retryMoved runs tx, a delete's transaction, again while it fails with
// errChainMoved or a lock conflict (PostgreSQL's deadlock_detected: a
// policy's batch deletes the older versions of the chains it locked by
// their newest, in another order than a forget's), at most 5 times in all;
// the failed attempt was rolled back. A chain gains a version per
// supersede, so a delete racing a steady stream of supersedes can fail
// with code conflict: the caller may try again.
func retryMoved(tx func() error) error {
	var err error
	for range 5 {
		if err = tx(); !errors.Is(err, errChainMoved) && !lockConflict(err) {
			return err
		}
	}
	if errors.Is(err, errChainMoved) {
		return &grains.Error{Code: grains.CodeConflict, Message: "the grains' version chains kept changing during the delete",
			Hint: "try again"}
	}
	return err
}

// deleteTx runs fn, a delete's work, in a transaction that takes the
// memory's lock first, shared (see lockMemory), tried again by retryMoved.
func (db *DB) deleteTx(ctx context.Context, memory string, fn func(tx *gorm.DB) error) error {
	return retryMoved(func() error {
		return db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := lockMemory(tx, db.dialect, memory, false); err != nil {
				return err
			}
			return fn(tx)
		})
	})
}

// DeleteWhere deletes every grain of f.Memory matching f (superseded and
// archived included, whatever f says) and every version of their chains,
// with the events mk builds, in one transaction. A hold refusal or a dry
// run returns what it would have deleted, as DeleteHashes does.
func (db *DB) DeleteWhere(ctx context.Context, f Filter, now int64, mk EventsFunc[*Deletion]) (*Deletion, error) {
	if f.empty() {
		return &Deletion{}, nil
	}
	f.IncludeArchived, f.IncludeSuperseded, f.Limit, f.BeforeID = true, true, 0, 0
	var del *Deletion
	err := db.deleteTx(ctx, f.Memory, func(tx *gorm.DB) error {
		if err := f.resolve(tx); err != nil {
			return err
		}
		seeds, err := db.chainRowsWhere(ctx, tx, &f)
		if err != nil {
			return err
		}
		if del, err = deleteChains(tx, f.Memory, seeds); err != nil {
			return err
		}
		return commitEvents(ctx, tx, now, del, mk)
	})
	if err != nil {
		return del, translate(err, "delete grains")
	}
	if del != nil && len(del.Hashes) > 0 {
		db.scrubForget(ctx)
	}
	return del, nil
}

// chainRowsWhere reads the chain rows matching f, in tx. (Not through
// gorm's condition building, which would split a token's bytes into as
// many parameters when it follows a parenthesis.)
func (db *DB) chainRowsWhere(ctx context.Context, tx *gorm.DB, f *Filter) ([]chainRow, error) {
	cond, args := db.whereSQL(f)
	res, err := tx.Statement.ConnPool.QueryContext(ctx,
		db.rebind("SELECT id, hash, supersedes, superseded_by, scope, user_key_id FROM grains WHERE "+cond), args...)
	if err != nil {
		return nil, translate(err, "find grains")
	}
	defer res.Close()
	var out []chainRow
	for res.Next() {
		var r chainRow
		if err := res.Scan(&r.ID, &r.Hash, &r.Supersedes, &r.SupersededBy, &r.Scope, &r.UserKeyID); err != nil {
			return nil, translate(err, "find grains")
		}
		out = append(out, r)
	}
	return out, translate(res.Err(), "find grains")
}

// deleteChains closes seeds over their version chains and deletes them all.
func deleteChains(tx *gorm.DB, memory string, seeds []chainRow) (*Deletion, error) {
	ids := make(map[string]chainRow, len(seeds))
	var frontier []string
	add := func(r chainRow) {
		if _, ok := ids[r.Hash]; ok {
			return
		}
		ids[r.Hash] = r
		for _, h := range []string{r.Supersedes, r.SupersededBy} {
			if h != "" {
				frontier = append(frontier, h)
			}
		}
	}
	for _, s := range seeds {
		add(s)
	}
	looked := map[string]bool{} // versions read for, found or not
	for len(frontier) > 0 {
		var next []string
		for _, h := range frontier {
			if _, ok := ids[h]; !ok {
				next = append(next, h)
				looked[h] = true
			}
		}
		frontier = nil
		for i := 0; i < len(next); i += chunk {
			var r []chainRow
			if err := tx.Model(&GrainRow{}).Where("memory = ? AND hash IN ?", memory, next[i:min(i+chunk, len(next))]).Find(&r).Error; err != nil {
				return nil, translate(err, "read chain")
			}
			for _, x := range r {
				add(x)
			}
		}
	}
	// The walk read without locks. The rows are read again as they are
	// now, locked on PostgreSQL in id order (two deletes of overlapping
	// chains never wait for each other in a cycle); a row a concurrent
	// delete removed since the walk is not deleted, counted off or
	// reported a second time.
	walked := make([]int64, 0, len(ids))
	for _, r := range ids {
		walked = append(walked, r.ID)
	}
	ops, err := lockOps(tx, memory, walked)
	if err != nil {
		return nil, err
	}
	// On PostgreSQL a supersede that committed between the walk and the
	// lock linked a version the walk did not see (the lock reads the row
	// as it is now): delete nothing, and walk again.
	for _, r := range ops {
		for _, h := range [...]string{r.Supersedes, r.SupersededBy} {
			if _, walk := ids[h]; h != "" && !walk && !looked[h] {
				return nil, errChainMoved
			}
		}
	}
	if err := markErasing(tx, memory, [][]OpRow{ops}); err != nil {
		return nil, err
	}
	slices.SortFunc(ops, func(a, b OpRow) int { return strings.Compare(a.Hash, b.Hash) })
	del := &Deletion{Hashes: make([]string, len(ops)), Ops: ops}
	idList := make([]int64, len(ops))
	c := counter{}
	for i, r := range ops {
		del.Hashes[i], idList[i] = r.Hash, r.ID
		c.add(r.Scope, r.UserKeyID, -1)
	}
	if err := opsHeld(tx, memory, ops); err != nil {
		return del, err // what a hold refuses, for a dry run to report
	}
	if err := deleteIDs(tx, idList); err != nil {
		return nil, err
	}
	if err := adjustCounts(tx, memory, c); err != nil {
		return nil, err
	}
	return del, nil
}
