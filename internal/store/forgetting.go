package store

import (
	"context"
	"database/sql"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// What forgetting policies need of the store: scans of the operational
// columns only (never the blob, never a token), and bulk changes that
// commit with their audit events and honour legal holds.

// OpRow is the operational columns of one grain row: what forgetting
// policies read. It holds no personal data: no blob, no blind token; the
// user reference is only compared with holds.
type OpRow struct {
	ID              int64
	Hash            string
	Type            string
	Namespace       string
	Scope           string
	Importance      float64
	Salience        float64
	Pinned          bool
	Archived        bool
	CreatedUS       int64
	LastRetrievedUS int64
	RetrievalCount  int64
	Supersedes      string
	SupersededBy    string
	UserKeyID       int64
	UserRef         []byte
	// Erasing is set by the chain reads (ForgetSeeds, Chains) on a row an
	// erasure made unreadable that the cleaner has not deleted yet.
	Erasing bool
}

const opColumns = "id, hash, type, namespace, scope, importance, salience, pinned, archived, created_us, " +
	"last_retrieved_us, retrieval_count, supersedes, superseded_by, user_key_id, user_ref"

// dest is where a row of opColumns is scanned into, in their order.
func (r *OpRow) dest() []any {
	return []any{&r.ID, &r.Hash, &r.Type, &r.Namespace, &r.Scope, &r.Importance, &r.Salience, &r.Pinned,
		&r.Archived, &r.CreatedUS, &r.LastRetrievedUS, &r.RetrievalCount, &r.Supersedes, &r.SupersededBy, &r.UserKeyID, &r.UserRef}
}

func scanOps(rows *sql.Rows, capacity int) ([]OpRow, error) {
	defer rows.Close()
	out := make([]OpRow, 0, capacity)
	for rows.Next() {
		var r OpRow
		if err := rows.Scan(r.dest()...); err != nil {
			return nil, translate(err, "read grains")
		}
		out = append(out, r)
	}
	return out, translate(rows.Err(), "read grains")
}

// OpScan selects one page of a policy scan: rows of Memory in id order,
// after AfterID.
type OpScan struct {
	Memory string
	// Namespace limits the scan to one namespace ("" every namespace).
	Namespace string
	// Heads limits the scan to the newest version of each chain.
	Heads bool
	// Unarchived leaves archived rows out.
	Unarchived bool
	// SalienceBelow, when positive, keeps only rows with a smaller salience.
	SalienceBelow float64
	AfterID       int64
	// Limit bounds the page (default 10,000).
	Limit int
}

// ScanOps returns one page of operational rows, in id order, leaving out
// rows an erasure made unreadable that the cleaner has not deleted yet.
// Call it again with AfterID set to the last row's ID until it returns
// fewer than Limit.
func (db *DB) ScanOps(ctx context.Context, s OpScan) ([]OpRow, error) {
	if s.Limit <= 0 {
		s.Limit = 10000
	}
	// Rows an erasure made unreadable (their key chain holds a key whose
	// cleanup job is pending) are already gone: no policy counts or acts
	// on them, and the cleaner deletes them and links them to their
	// erasure (TestPoliciesSkipErasedRows). Usually no job is pending.
	q := "SELECT " + opColumns + " FROM grains WHERE memory = ? AND id > ? AND NOT " + erasingRow
	args := []any{s.Memory, s.AfterID}
	if s.Namespace != "" {
		q += " AND namespace = ?"
		args = append(args, s.Namespace)
	}
	if s.Heads {
		q += " AND superseded_by = ''"
	}
	if s.Unarchived {
		q += " AND archived = ?"
		args = append(args, false)
	}
	if s.SalienceBelow > 0 {
		q += " AND salience < ?"
		args = append(args, s.SalienceBelow)
	}
	q += " ORDER BY id LIMIT ?"
	args = append(args, s.Limit)
	rows, err := db.gorm.WithContext(ctx).Raw(q, args...).Rows()
	if err != nil {
		return nil, translate(err, "scan grains")
	}
	return scanOps(rows, s.Limit)
}

// erasingRow is the condition on a grains row that an erasure made it
// unreadable and the cleaner has not deleted it yet: its key chain holds a
// key whose cleanup job is pending.
const erasingRow = "EXISTS (SELECT 1 FROM erase_cleanup c WHERE c.memory = grains.memory" +
	" AND '.' || grains.key_chain || '.' LIKE '%.' || CAST(c.key_id AS TEXT) || '.%')"

// markErasing sets Erasing on the rows of groups that erasingRow holds
// for. It reads nothing more when memory has no pending cleanup job, the
// usual case.
func markErasing(tx *gorm.DB, memory string, groups [][]OpRow) error {
	if pending, err := cleanupPending(tx, memory); err != nil || !pending {
		return err
	}
	var ids []int64
	for _, g := range groups {
		for _, r := range g {
			ids = append(ids, r.ID)
		}
	}
	erasing := map[int64]bool{}
	for i := 0; i < len(ids); i += chunk {
		var found []int64
		err := tx.Raw("SELECT id FROM grains WHERE memory = ? AND id IN ? AND "+erasingRow,
			memory, ids[i:min(i+chunk, len(ids))]).Scan(&found).Error
		if err != nil {
			return translate(err, "read erased grains")
		}
		for _, id := range found {
			erasing[id] = true
		}
	}
	for _, g := range groups {
		for j := range g {
			g[j].Erasing = erasing[g[j].ID]
		}
	}
	return nil
}

// cleanupPending reports whether memory has a pending cleanup job: whether
// an erasure left rows for the cleaner.
func cleanupPending(tx *gorm.DB, memory string) (bool, error) {
	var pending []int64
	err := tx.Model(&CleanupJob{}).Where("memory = ?", memory).Limit(1).Pluck("key_id", &pending).Error
	return len(pending) > 0, translate(err, "read cleanup jobs")
}

// CountLive returns the number of unarchived newest versions in memory: the
// grain count the archive ladder compares with its soft limit. Rows an
// erasure made unreadable are already gone (see ScanOps): while a cleanup
// job is pending, they are not counted (TestLadderCountsNoErasedRows).
func (db *DB) CountLive(ctx context.Context, memory string) (int64, error) {
	tx := db.gorm.WithContext(ctx)
	q := "SELECT COUNT(*) FROM grains WHERE memory = ? AND superseded_by = '' AND archived = ?"
	pending, err := cleanupPending(tx, memory)
	if err != nil {
		return 0, err
	}
	if pending {
		q += " AND NOT " + erasingRow
	}
	var n int64
	err = tx.Raw(q, memory, false).Scan(&n).Error
	return n, translate(err, "count grains")
}

// Memories returns the names of the memories that have a live memory key,
// sorted: the memories a scheduled policy visits.
func (db *DB) Memories(ctx context.Context) ([]string, error) {
	var ms []string
	err := db.gorm.WithContext(ctx).Model(&KeyRow{}).Distinct("memory").
		Where("kind = ? AND destroyed_us = 0", "memory").Order("memory").Pluck("memory", &ms).Error
	return ms, translate(err, "list memories")
}

// OpsByHashes returns the operational rows of memory with the given hashes;
// unknown hashes are left out, and so are those of rows an erasure made
// unreadable that the cleaner has not deleted yet (see erasingRow).
func (db *DB) OpsByHashes(ctx context.Context, memory string, hashes []string) ([]OpRow, error) {
	return opsWhere(db.gorm.WithContext(ctx), "memory = ? AND hash IN ? AND NOT "+erasingRow, memory, hashes)
}

// opsWhere reads the rows matching cond (with one list argument, read in
// chunks), without locking them.
func opsWhere[T any](tx *gorm.DB, cond string, memory string, list []T) ([]OpRow, error) {
	var out []OpRow
	for i := 0; i < len(list); i += chunk {
		rows, err := tx.Model(&GrainRow{}).Select(opColumns).Where(cond, memory, list[i:min(i+chunk, len(list))]).Rows()
		if err != nil {
			return nil, translate(err, "read grains")
		}
		part, err := scanOps(rows, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// lockOps is opsWhere over row ids for a transaction that will change the
// rows: on PostgreSQL it locks them FOR UPDATE in ascending id order, across
// chunks, the order RecordRetrievals updates in, so a policy batch and the
// retrieval writer cannot deadlock. (The lock order was the hash within
// each chunk while the retrieval writer went by id: a PostgreSQL model run
// hit "deadlock detected" in ArchiveGrains.)
func lockOps(tx *gorm.DB, memory string, ids []int64) ([]OpRow, error) {
	if tx.Dialector.Name() != Postgres {
		return opsWhere(tx, "memory = ? AND id IN ?", memory, ids)
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var out []OpRow
	for i := 0; i < len(ids); i += chunk {
		rows, err := tx.Model(&GrainRow{}).Select(opColumns).Where("memory = ? AND id IN ?", memory, ids[i:min(i+chunk, len(ids))]).
			Order("id").Clauses(clause.Locking{Strength: "UPDATE"}).Rows()
		if err != nil {
			return nil, translate(err, "read grains")
		}
		part, err := scanOps(rows, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
	}
	return out, nil
}

// closeChains returns, for each seed, every version of its chain (the seed
// first). Seeds of one chain end up in one group. Seeds without links cost
// no query.
func closeChains(tx *gorm.DB, memory string, seeds []OpRow) ([][]OpRow, error) {
	parent := make([]int, len(seeds)) // union-find over seed indices
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	label := make(map[string]int, len(seeds)) // hash -> seed index
	rows := make(map[string]OpRow, len(seeds))
	var frontier map[string]int // hash to read -> seed index
	visit := func(r OpRow, seed int) {
		if l, ok := label[r.Hash]; ok {
			if a, b := find(l), find(seed); a != b {
				parent[a] = b
			}
			return
		}
		label[r.Hash], rows[r.Hash] = seed, r
		for _, h := range []string{r.Supersedes, r.SupersededBy} {
			if _, ok := label[h]; h != "" && !ok {
				if frontier == nil {
					frontier = map[string]int{}
				}
				frontier[h] = seed
			}
		}
	}
	for i, s := range seeds {
		visit(s, i)
	}
	for len(frontier) > 0 {
		next := frontier
		frontier = nil
		hashes := make([]string, 0, len(next))
		for h := range next {
			hashes = append(hashes, h)
		}
		sort.Strings(hashes)
		found, err := opsWhere(tx, "memory = ? AND hash IN ?", memory, hashes)
		if err != nil {
			return nil, err
		}
		for _, r := range found {
			visit(r, next[r.Hash])
		}
	}
	groups := map[int][]OpRow{}
	var order []int
	isSeed := make(map[string]bool, len(seeds))
	for i, s := range seeds {
		root := find(i)
		if _, ok := groups[root]; !ok {
			order = append(order, root)
		}
		if !isSeed[s.Hash] {
			isSeed[s.Hash] = true
			groups[root] = append(groups[root], s)
		}
	}
	others := make([]string, 0, len(rows)-len(isSeed))
	for h := range rows {
		if !isSeed[h] {
			others = append(others, h)
		}
	}
	sort.Strings(others)
	for _, h := range others {
		root := find(label[h])
		groups[root] = append(groups[root], rows[h])
	}
	out := make([][]OpRow, 0, len(order))
	for _, root := range order {
		out = append(out, groups[root])
	}
	return out, nil
}

// Chains returns every version of the seeds' chains, grouped by chain, each
// group starting with its seeds. It reads without locking: dry runs use it.
func (db *DB) Chains(ctx context.Context, memory string, seeds []OpRow) ([][]OpRow, error) {
	tx := db.gorm.WithContext(ctx)
	groups, err := closeChains(tx, memory, seeds)
	if err != nil {
		return nil, err
	}
	return groups, markErasing(tx, memory, groups)
}

// HoldOn returns the id of the first active hold in hs that covers a row
// with scope and userRef, or "".
func HoldOn(hs []HoldRow, scope string, userRef []byte) string { return holdOn(hs, scope, userRef) }

// ChainHold returns the id of the first hold in hs covering any row of
// chain, or "".
func ChainHold(hs []HoldRow, chain []OpRow) string {
	for _, r := range chain {
		if id := holdOn(hs, r.Scope, r.UserRef); id != "" {
			return id
		}
	}
	return ""
}

// PolicyDeletion says what a policy's bulk forget did.
type PolicyDeletion struct {
	// Hashes are the deleted rows' hashes, every version of each chain, sorted.
	Hashes []string
	// Kept says which seeds' chains were left whole, and why.
	Kept
	// Gone counts seeds that no longer existed or no longer qualified.
	Gone int
}

// Kept lists the seeds of a policy's batch whose chains it left whole.
type Kept struct {
	// Held maps the id of each hold that kept grains to the hashes of the
	// seeds it kept.
	Held map[string][]string
	// Protected lists the seeds whose chain holds a version that a
	// protection rule keeps.
	Protected []string
	// Erasing lists the seeds whose chain holds a version an erasure made
	// unreadable that the cleaner has not deleted yet (OpRow.Erasing): the
	// cleaner deletes that version and links it to its erasure
	// (ErasedGrainRow); a later run decides on the rest.
	Erasing []string
}

// ForgetSeeds deletes, in one transaction, the grains of memory with the
// given ids that still satisfy keep (re-read and, on PostgreSQL, locked),
// with every version of their chains and their tag tokens, but the chains
// SortChains keeps: one with a version that protected reports (an older
// version pinned, say), reported in Protected, and one that an active
// legal hold covers, reported in Held, not refused: one held grain never
// fails a policy run. mk's events commit in the same transaction; mk is
// called even when nothing was deleted, so that it can record refusals.
// The batch locks each chain by its newest version and then deletes the
// older ones, the other order than a forget's, so PostgreSQL may abort it
// in a deadlock: deleteTx tries again (TestPurgeRetriesADeadlock).
func (db *DB) ForgetSeeds(ctx context.Context, memory string, ids []int64, keep, protected func(OpRow) bool, now int64, mk EventsFunc[*PolicyDeletion]) (*PolicyDeletion, error) {
	del := &PolicyDeletion{}
	err := db.deleteTx(ctx, memory, func(tx *gorm.DB) error {
		*del = PolicyDeletion{}
		seeds, err := lockOps(tx, memory, ids)
		if err != nil {
			return err
		}
		del.Gone = len(ids) - len(seeds)
		kept := seeds[:0]
		for _, s := range seeds {
			if keep == nil || keep(s) {
				kept = append(kept, s)
			} else {
				del.Gone++
			}
		}
		groups, err := closeChains(tx, memory, kept)
		if err != nil {
			return err
		}
		// After the shared memory lock: an erasure that committed before
		// it has its cleanup job in place.
		if err := markErasing(tx, memory, groups); err != nil {
			return err
		}
		hs, err := activeHolds(tx, memory)
		if err != nil {
			return err
		}
		fate := SortChains(groups, kept, hs, protected)
		del.Kept = fate.Kept
		victims := make([]int64, len(fate.Gone))
		c := counter{}
		for i, r := range fate.Gone {
			victims[i] = r.ID
			del.Hashes = append(del.Hashes, r.Hash)
			c.add(r.Scope, r.UserKeyID, -1)
		}
		sort.Strings(del.Hashes)
		if err := deleteIDs(tx, victims); err != nil {
			return err
		}
		if err := adjustCounts(tx, memory, c); err != nil {
			return err
		}
		return commitEvents(ctx, tx, now, del, mk)
	})
	if err != nil {
		return del, translate(err, "forget grains")
	}
	db.scrubForget(ctx)
	return del, nil
}

// ChainFate is what a policy's batch does with its chains (SortChains).
type ChainFate struct {
	// Gone holds every version of the chains to delete.
	Gone []OpRow
	// Kept lists the seeds whose chains are left whole.
	Kept
}

// SortChains decides what a policy's batch does with each chain of groups
// (every version of the chains of seeds). A chain is kept whole when it
// holds a version an erasure made unreadable (the cleaner's to delete, with
// its link to the erasure), else when it holds one that protected reports
// (nil: none), else when a hold of hs covers it; every version of the other
// chains is gone. ForgetSeeds decides by it in its transaction, and the dry
// runs on the same rows read without one.
func SortChains(groups [][]OpRow, seeds []OpRow, hs []HoldRow, protected func(OpRow) bool) ChainFate {
	isSeed := make(map[int64]bool, len(seeds))
	for _, s := range seeds {
		isSeed[s.ID] = true
	}
	seedsOf := func(g []OpRow, into []string) []string {
		for _, r := range g {
			if isSeed[r.ID] {
				into = append(into, r.Hash)
			}
		}
		return into
	}
	var f ChainFate
	for _, g := range groups {
		if slices.ContainsFunc(g, func(r OpRow) bool { return r.Erasing }) {
			f.Erasing = seedsOf(g, f.Erasing)
			continue
		}
		if protected != nil && slices.ContainsFunc(g, protected) {
			f.Protected = seedsOf(g, f.Protected)
			continue
		}
		if id := ChainHold(hs, g); id != "" {
			if f.Held == nil {
				f.Held = map[string][]string{}
			}
			f.Held[id] = seedsOf(g, f.Held[id])
			continue
		}
		f.Gone = append(f.Gone, g...)
	}
	return f
}

// deleteIDs deletes the grains ids, their tags, postings (removePostings)
// and search documents (ON DELETE CASCADE) in tx.
func deleteIDs(tx *gorm.DB, ids []int64) error {
	if err := removePostings(tx.Statement.Context, gormRunner{tx}, ids); err != nil {
		return translate(err, "delete postings")
	}
	for i := 0; i < len(ids); i += chunk {
		part := ids[i:min(i+chunk, len(ids))]
		if err := tx.Where("grain_id IN ?", part).Delete(&TagRow{}).Error; err != nil {
			return translate(err, "delete tags")
		}
		if err := tx.Where("id IN ?", part).Delete(&GrainRow{}).Error; err != nil {
			return translate(err, "delete grains")
		}
	}
	return nil
}

// Archival says what ArchiveRows did.
type Archival struct {
	// Hashes are the archived rows' hashes, sorted.
	Hashes []string
	// Gone counts the ids that name no row any more, or a row an erasure
	// made unreadable that the cleaner has not deleted yet (erasingRow).
	Gone int
}

// ArchiveRows archives, in one transaction, the rows of memory with the
// given ids that are not archived and still satisfy keep, multiplying their
// salience by factor (the ladder halves it); mk's events commit with the
// change. Archiving destroys nothing, so legal holds do not stop it. The
// transaction takes the memory's lock first, shared (see lockMemory), and
// then reads the rows again: an erasure that committed since the caller
// read them has its cleanup job in place, and its rows are left out and
// counted in Gone, as rows deleted meanwhile are; an erasure that starts
// later waits for the commit. (The rows were read without the lock, so an
// erasure committing in between had its rows archived, and named in a
// grain.archive event.)
func (db *DB) ArchiveRows(ctx context.Context, memory string, ids []int64, factor float64, keep func(OpRow) bool, now int64, mk EventsFunc[[]string]) (*Archival, error) {
	res := &Archival{}
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		*res = Archival{}
		if err := lockMemory(tx, db.dialect, memory, false); err != nil {
			return err
		}
		rows, err := lockOps(tx, memory, ids)
		if err != nil {
			return err
		}
		if err := markErasing(tx, memory, [][]OpRow{rows}); err != nil {
			return err
		}
		res.Gone = len(slices.Compact(slices.Sorted(slices.Values(ids))))
		var todo []int64
		for _, r := range rows {
			if r.Erasing {
				continue
			}
			res.Gone--
			if !r.Archived && (keep == nil || keep(r)) {
				todo = append(todo, r.ID)
				res.Hashes = append(res.Hashes, r.Hash)
			}
		}
		sort.Strings(res.Hashes)
		for i := 0; i < len(todo); i += chunk {
			part := todo[i:min(i+chunk, len(todo))]
			if err := tx.Model(&GrainRow{}).Where("id IN ? AND archived = ?", part, false).
				Updates(map[string]any{"archived": true, "salience": gorm.Expr("salience * ?", factor)}).Error; err != nil {
				return translate(err, "archive grains")
			}
		}
		if len(res.Hashes) == 0 {
			return nil
		}
		return commitEvents(ctx, tx, now, res.Hashes, mk)
	})
	if err != nil {
		return &Archival{}, translate(err, "archive grains")
	}
	return res, nil
}

// Retrieval is the retrievals of one grain since the last flush.
type Retrieval struct {
	ID     int64 // the grain's row id
	Count  int64
	LastUS int64
}

// RecordRetrievals adds retrieval statistics in one transaction: each
// grain's retrieval count grows by Count, its last retrieval moves forward
// to LastUS, and its salience grows by bump per retrieval, capped at 1:
// forgetting.Policy.RetrievedN in SQL (TestRetrievalsFollowTheRule holds
// the two together).
// Grains deleted meanwhile are ignored. Callers sort rs by id, so that
// instances flushing at once lock rows in one order.
func (db *DB) RecordRetrievals(ctx context.Context, rs []Retrieval, bump float64) error {
	if len(rs) == 0 {
		return nil
	}
	if db.dialect == Postgres {
		return db.recordRetrievalsEach(ctx, rs, bump)
	}
	// SQLite: one statement per chunk, joined on a VALUES list. Recalls
	// return thousands of grains a second, and an UPDATE each cost them a
	// fifth of their time. (PostgreSQL locks the rows in id order before
	// its join updates them: a join alone would lock rows in the plan's
	// order, and two instances flushing at once could deadlock. SQLite
	// has one writer.)
	//
	// The statement is the same for every chunk (a short chunk is padded
	// with rows that match no grain: ids start at 1), so it is prepared once
	// per connection (stmtPool): preparing it cost more than running it.
	args := make([]any, 0, 4*retrievalChunk)
	return translate(db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for i := 0; i < len(rs); i += retrievalChunk {
			args = args[:0]
			for _, r := range rs[i:min(i+retrievalChunk, len(rs))] {
				args = append(args, r.ID, r.Count, r.LastUS, bump*float64(r.Count))
			}
			for len(args) < cap(args) {
				args = append(args, 0, 0, 0, 0.0)
			}
			if _, err := tx.Statement.ConnPool.ExecContext(ctx, retrievalSQL, args...); err != nil {
				return err
			}
		}
		return nil
	}), "record retrievals")
}

// retrievalChunk is the number of grains one retrieval update joins.
const retrievalChunk = chunk / 4

// retrievalSQL records the retrievals of retrievalChunk grains (SQLite).
var retrievalSQL = func() string {
	vals := make([]string, retrievalChunk)
	for j := range vals {
		vals[j] = "(CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS DOUBLE PRECISION))"
	}
	return `WITH v(id, n, last_us, add_s) AS (VALUES ` + strings.Join(vals, ", ") + `)
UPDATE grains SET retrieval_count = retrieval_count + v.n,
  last_retrieved_us = CASE WHEN last_retrieved_us < v.last_us THEN v.last_us ELSE last_retrieved_us END,
  salience = CASE WHEN salience + v.add_s > 1 THEN 1 ELSE salience + v.add_s END
FROM v WHERE grains.id = v.id`
}()

// recordRetrievalsEach is RecordRetrievals on PostgreSQL. The statistics
// writer must never hold up, or deadlock with, a transaction that changes
// grains (a forget, a policy batch: their multi-row statements lock rows
// in their plan's order): it waits at most retrievalLockWait for a row lock,
// and on a timeout or a deadlock its transaction, rolled back, is tried
// again a few times.
func (db *DB) recordRetrievalsEach(ctx context.Context, rs []Retrieval, bump float64) error {
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return translate(ctx.Err(), "record retrievals")
			case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
			}
		}
		if err = db.recordRetrievalsTx(ctx, rs, bump); !lockConflict(err) {
			break
		}
	}
	return translate(err, "record retrievals")
}

// retrievalLockWait bounds the statistics writer's wait for a row lock.
const retrievalLockWait = "100ms"

// lockConflict reports whether err is PostgreSQL's deadlock_detected or
// lock_not_available: the transaction was rolled back and may be retried.
func lockConflict(err error) bool {
	c := pgCode(err)
	return c == "40P01" || c == "55P03"
}

func (db *DB) recordRetrievalsTx(ctx context.Context, rs []Retrieval, bump float64) error {
	ids := make([]int64, len(rs))
	counts := make([]int64, len(rs))
	lasts := make([]int64, len(rs))
	adds := make([]float64, len(rs))
	for i, r := range rs {
		ids[i], counts[i], lasts[i], adds[i] = r.ID, r.Count, r.LastUS, bump*float64(r.Count)
	}
	// One round trip: the rows are locked in id order first (the lock
	// happens after the sort), then updated by one join. It was one
	// UPDATE per grain, each a round trip: 2,000 grains held a transaction
	// open for about half a second, and every erasure's scrub waited for
	// such transactions to end (docs/performance.md).
	return db.pgTx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue("SET LOCAL lock_timeout = '" + retrievalLockWait + "'")
		b.Queue(`SELECT g.id FROM unnest($1::bigint[]) AS k(id) JOIN grains g ON g.id = k.id ORDER BY g.id FOR UPDATE OF g`, ids)
		b.Queue(`UPDATE grains SET retrieval_count = retrieval_count + v.n,
  last_retrieved_us = CASE WHEN last_retrieved_us < v.last_us THEN v.last_us ELSE last_retrieved_us END,
  salience = CASE WHEN salience + v.add_s > 1 THEN 1 ELSE salience + v.add_s END
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::float8[]) AS v(id, n, last_us, add_s) WHERE grains.id = v.id`,
			ids, counts, lasts, adds)
		return tx.SendBatch(ctx, b).Close()
	})
}

// Replacement is one grain replaced by its summary (the risk sweep's
// compress): New takes Old's place in its version chain.
type Replacement struct {
	OldID int64
	Old   string
	New   *GrainRow
}

// Replaced says what ReplaceGrains did.
type Replaced struct {
	// Done are the replacements made.
	Done []Replacement
	// Held maps the id of each hold that kept grains to their hashes.
	Held map[string][]string
	// Skipped counts grains left as they were: gone, made unreadable by an
	// erasure, no longer qualifying, or whose summary duplicates a live
	// grain.
	Skipped int
}

// ReplaceGrains replaces, in one transaction, each old grain that still
// satisfies keep by its new row: the old row and its tag tokens are
// deleted (its sealed text is gone), the new row takes its chain links,
// archived flag and retrieval statistics, and its neighbours in the chain
// point to the new hash. Replacing destroys data, so a row an active legal
// hold covers is skipped and reported in Held. A row an erasure made
// unreadable (its cleanup pending) is skipped too. mk's events commit with
// it.
func (db *DB) ReplaceGrains(ctx context.Context, memory string, reps []Replacement, keep func(OpRow) bool, now int64, mk EventsFunc[*Replaced]) (*Replaced, error) {
	res := &Replaced{}
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		*res = Replaced{}
		if err := lockMemory(tx, db.dialect, memory, false); err != nil {
			return err
		}
		ids := make([]int64, len(reps))
		for i, r := range reps {
			ids[i] = r.OldID
		}
		rows, err := lockOps(tx, memory, ids)
		if err != nil {
			return err
		}
		// A grain an erasure made unreadable since the caller read it is
		// left to the cleaner: its summary would be sealed under a dead
		// key (failing the batch) or outlive the erasure.
		if err := markErasing(tx, memory, [][]OpRow{rows}); err != nil {
			return err
		}
		byID := make(map[int64]OpRow, len(rows))
		for _, r := range rows {
			byID[r.ID] = r
		}
		hs, err := activeHolds(tx, memory)
		if err != nil {
			return err
		}
		var fresh []*GrainRow
		c := counter{}
		for _, rep := range reps {
			old, ok := byID[rep.OldID]
			if !ok || old.Erasing || old.Hash != rep.Old || (keep != nil && !keep(old)) {
				res.Skipped++
				continue
			}
			if id := holdOn(hs, old.Scope, old.UserRef); id != "" {
				if res.Held == nil {
					res.Held = map[string][]string{}
				}
				res.Held[id] = append(res.Held[id], old.Hash)
				continue
			}
			n := rep.New
			if old.SupersededBy == "" {
				var dup int64
				if err := tx.Model(&GrainRow{}).Where("superseded_by = '' AND dedup_tok = ? AND id <> ?", n.DedupTok, old.ID).
					Count(&dup).Error; err != nil {
					return translate(err, "read grains")
				}
				if dup > 0 {
					res.Skipped++
					continue
				}
			}
			n.Supersedes, n.SupersededBy, n.Archived = old.Supersedes, old.SupersededBy, old.Archived
			n.LastRetrievedUS, n.RetrievalCount, n.Salience = old.LastRetrievedUS, old.RetrievalCount, old.Salience
			if err := deleteIDs(tx, []int64{old.ID}); err != nil {
				return err
			}
			if old.Supersedes != "" {
				if err := tx.Model(&GrainRow{}).Where("memory = ? AND hash = ?", memory, old.Supersedes).
					Update("superseded_by", n.Hash).Error; err != nil {
					return translate(err, "relink chain")
				}
			}
			if old.SupersededBy != "" {
				if err := tx.Model(&GrainRow{}).Where("memory = ? AND hash = ?", memory, old.SupersededBy).
					Update("supersedes", n.Hash).Error; err != nil {
					return translate(err, "relink chain")
				}
			}
			c.add(old.Scope, old.UserKeyID, -1)
			c.add(n.Scope, n.UserKeyID, 1)
			fresh = append(fresh, n)
			res.Done = append(res.Done, rep)
		}
		if len(fresh) > 0 {
			ids, err := chainIDs(fresh)
			if err != nil {
				return err
			}
			if err := checkLive(tx, db.dialect, memory, ids); err != nil {
				return err
			}
			for _, n := range fresh {
				if err := tx.Create(n).Error; err != nil {
					return translate(err, "insert summary")
				}
				for _, t := range n.Tags {
					if err := tx.Create(&TagRow{GrainID: n.ID, Token: t.Token, Memory: memory}).Error; err != nil {
						return translate(err, "insert tags")
					}
				}
			}
		}
		if err := adjustCounts(tx, memory, c); err != nil {
			return err
		}
		return commitEvents(ctx, tx, now, res, mk)
	})
	if err == nil && len(res.Done) > 0 {
		db.scrubForget(ctx)
	}
	return res, translate(err, "replace grains")
}

// PolicyRunRow records when a scheduled policy last started, so that
// replicas sharing a database run it once per interval between them.
type PolicyRunRow struct {
	Name   string `gorm:"primaryKey;size:64"`
	LastUS int64  `gorm:"column:last_us;not null"`
}

// TableName is the policy run table.
func (PolicyRunRow) TableName() string { return "policy_runs" }

// MigrateForgetting creates the tables the policy scheduler needs.
func (db *DB) MigrateForgetting(ctx context.Context) error {
	return Migrate(ctx, db.gorm, &PolicyRunRow{})
}

// claimRun records a start of name at now if the last one is at least
// every ago, and reports whether it did.
func claimRun(tx *gorm.DB, name string, now time.Time, every time.Duration) (bool, error) {
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&PolicyRunRow{Name: name, LastUS: 0}).Error; err != nil {
		return false, translate(err, "claim policy run")
	}
	res := tx.Model(&PolicyRunRow{}).Where("name = ? AND last_us <= ?", name, now.Add(-every).UnixMicro()).
		Update("last_us", now.UnixMicro())
	return res.RowsAffected == 1, translate(res.Error, "claim policy run")
}

// policyLockKey is the PostgreSQL advisory lock key of a policy name: the
// FNV-1a hash of "lethe-policy:" and the name.
func policyLockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("lethe-policy:" + name))
	return int64(h.Sum64())
}

// RunScheduled runs fn if the policy name is due: its last scheduled start
// (across every instance sharing the database) is at least every before
// now. On PostgreSQL, fn runs while this session holds a transaction-level
// advisory lock on the name (pg_try_advisory_xact_lock), so at most one
// replica runs it at a time; an instance that finds the lock taken skips.
// On SQLite the claim is serialized by the database's write lock; the
// caller keeps runs in one process apart. ran reports whether fn ran.
func (db *DB) RunScheduled(ctx context.Context, name string, now time.Time, every time.Duration, fn func(context.Context) error) (ran bool, err error) {
	if db.dialect != Postgres {
		err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var err error
			ran, err = claimRun(tx, name, now, every)
			return err
		})
		if err != nil || !ran {
			return false, err
		}
		return true, fn(ctx)
	}
	var fnErr error
	err = db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var locked bool
		if err := tx.Raw("SELECT pg_try_advisory_xact_lock(?)", policyLockKey(name)).Scan(&locked).Error; err != nil {
			return translate(err, "lock policy")
		}
		if !locked {
			return nil
		}
		ok, err := claimRun(tx, name, now, every)
		if err != nil || !ok {
			return err
		}
		ran = true
		// The claim commits even when fn fails: a failed run waits for its
		// next interval instead of retrying at once.
		fnErr = fn(ctx)
		return nil
	})
	if err != nil {
		return false, err
	}
	return ran, fnErr
}
