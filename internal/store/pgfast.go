package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/lethe-io/lethe/internal/grains"
)

// PostgreSQL fast path: batch inserts go through pgx's COPY, which is several
// times cheaper per row than gorm's parameterised multi-row INSERT.

// pgExecer runs a statement: a pgx.Tx, or a batchExec that queues it.
type pgExecer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// batchExec queues statements on a pgx.Batch, to be sent in one round
// trip; their errors come from the batch's results.
type batchExec struct{ b *pgx.Batch }

func (q batchExec) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

// pgTx runs fn in a transaction on one pgx connection of the pool.
func (db *DB) pgTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return db.pgConn(ctx, func(pc *pgx.Conn) error { return pgx.BeginFunc(ctx, pc, fn) })
}

// pgConn runs fn on one pgx connection of the pool, for statements sent
// in batches (BEGIN and COMMIT among them). A transaction fn leaves open
// is rolled back.
func (db *DB) pgConn(ctx context.Context, fn func(pc *pgx.Conn) error) error {
	conn, err := db.conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc, err := pgxConn(dc)
		if err != nil {
			return err
		}
		defer endTx(ctx, pc)
		return fn(pc)
	})
}

// pgxConn returns the pgx connection under a database/sql driver
// connection (sql.Conn.Raw).
func pgxConn(dc any) (*pgx.Conn, error) {
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		return nil, fmt.Errorf("postgres driver connection is %T, not pgx", dc)
	}
	return sc.Conn(), nil
}

// endTx rolls back the transaction pc is in, if any: anything but a
// commit. A connection that cannot roll back is closed, and the pool drops
// it.
func endTx(ctx context.Context, pc *pgx.Conn) {
	if pc.PgConn().TxStatus() == 'I' || pc.IsClosed() {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := pc.Exec(rctx, "ROLLBACK"); err != nil {
		pc.Close(rctx)
	}
}

// activeHoldsSQL reads a memory's active holds ($1) in id order, as
// activeHolds does; scanHolds reads its result from a batch.
const activeHoldsSQL = `SELECT id, kind, scope, user_ref FROM holds WHERE memory = $1 AND released_us = 0 ORDER BY id`

// scanOptional scans row into dest and reports whether there was one: no
// row is not an error.
func scanOptional(row pgx.Row, dest ...any) (bool, error) {
	err := row.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

func scanHolds(br pgx.BatchResults) ([]HoldRow, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hs []HoldRow
	for rows.Next() {
		var h HoldRow
		if err := rows.Scan(&h.ID, &h.Kind, &h.Scope, &h.UserRef); err != nil {
			return nil, err
		}
		hs = append(hs, h)
	}
	return hs, rows.Err()
}

var grainColumns = []string{"id", "hash", "memory", "type", "namespace", "scope", "importance", "confidence", "salience",
	"pinned", "archived", "created_us", "last_retrieved_us", "retrieval_count", "supersedes", "superseded_by",
	"key_chain", "user_key_id", "user_ref", "s_tok", "r_tok", "o_tok", "dedup_tok", "blob"}

// insertGrainsPG is insertGrains over pgx: one dedup read, ids reserved
// from seq (the grains id sequence), then COPY of grains and tags. Rows'
// Hash, Blob and search fields may still be in the making (see
// InsertGrains).
func insertGrainsPG(ctx context.Context, tx pgx.Tx, seq, memory string, rows []*GrainRow, p Pending) ([]string, error) {
	keyIDs, err := chainIDs(rows)
	if err != nil {
		return nil, err
	}
	// The memory's write lock, shared: an erase cannot commit between this
	// check and our commit, so no row is ever stored under a destroyed key
	// (see lockMemory).
	if _, err := tx.Exec(ctx, lockMemorySQL(false, "$1", "$2"), int32(memoryLockClass), memoryLockKey(memory)); err != nil {
		return nil, err
	}
	var live int
	// A join, not "id = ANY($1)": PostgreSQL tests an array parameter
	// against each candidate row one element at a time, 3 ms for a batch of
	// 1,000 users.
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM unnest($1::bigint[]) AS k(id) JOIN data_keys d ON d.id = k.id WHERE d.destroyed_us = 0`, keyIDs).Scan(&live); err != nil {
		return nil, err
	}
	if live != len(keyIDs) {
		return nil, grains.Errorf(grains.CodeErased, "a key of this grain's chain was erased")
	}
	toks := make([][]byte, len(rows))
	for i, r := range rows {
		toks[i] = r.DedupTok
	}
	var found []dedupHit
	res, err := tx.Query(ctx, dedupHitsPG, distinctBytes(toks))
	if err != nil {
		return nil, err
	}
	for res.Next() {
		var f dedupHit
		if err := res.Scan(&f.ID, &f.Hash, &f.Scope, &f.DedupTok, &f.KeyChain, &f.UserKeyID, &f.Importance, &f.Confidence, &f.Pinned); err != nil {
			res.Close()
			return nil, err
		}
		found = append(found, f)
	}
	res.Close()
	if err := res.Err(); err != nil {
		return nil, err
	}
	existing, dead, err := sortHits(rows, found, func(ids []int64) ([]int64, error) {
		var live []int64
		res, err := tx.Query(ctx, `SELECT id FROM data_keys WHERE id = ANY($1) AND destroyed_us = 0`, ids)
		if err != nil {
			return nil, err
		}
		defer res.Close()
		for res.Next() {
			var id int64
			if err := res.Scan(&id); err != nil {
				return nil, err
			}
			live = append(live, id)
		}
		return live, res.Err()
	})
	if err != nil {
		return nil, err
	}
	if len(dead.ids) > 0 {
		if err := removePostings(ctx, pgxRunner{tx}, dead.ids); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM grain_tags WHERE grain_id = ANY($1)`, dead.ids); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM grains WHERE id = ANY($1)`, dead.ids); err != nil {
			return nil, err
		}
		if err := adjustCountsPG(ctx, tx, memory, dead.c); err != nil {
			return nil, err
		}
	}
	fresh, out, same, err := splitFresh(rows, existing)
	if err != nil {
		return nil, err
	}
	if len(fresh) == 0 {
		return finishHashes(rows, out, same), nil
	}
	ids := make([]int64, 0, len(fresh))
	res, err = tx.Query(ctx, `SELECT nextval($1::regclass) FROM generate_series(1, $2)`, seq, len(fresh))
	if err != nil {
		return nil, err
	}
	for res.Next() {
		var id int64
		if err := res.Scan(&id); err != nil {
			res.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	res.Close()
	if err := res.Err(); err != nil {
		return nil, err
	}
	// The rows stream to the server as they are sealed: COPY's encoder
	// waits for each row, while the server inserts the ones before it.
	k := 0
	src := pgx.CopyFromFunc(func() ([]any, error) {
		if k == len(fresh) {
			return nil, nil
		}
		i := fresh[k]
		r := rows[i]
		r.ID = ids[k]
		k++
		if p != nil {
			if err := p.Ready(i); err != nil {
				return nil, err
			}
		}
		return []any{r.ID, r.Hash, r.Memory, r.Type, r.Namespace, r.Scope, r.Importance, r.Confidence, r.Salience,
			r.Pinned, r.Archived, r.CreatedUS, r.LastRetrievedUS, r.RetrievalCount, r.Supersedes, r.SupersededBy,
			r.KeyChain, r.UserKeyID, r.UserRef, r.SubjectTok, r.RelationTok, r.ObjectTok, r.DedupTok, r.Blob}, nil
	})
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"grains"}, grainColumns, src); err != nil {
		return nil, err
	}
	stored := pick(rows, fresh)
	var tags [][]any
	for _, r := range stored {
		for _, t := range r.Tags {
			tags = append(tags, []any{r.ID, t.Token, memory})
		}
	}
	if len(tags) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"grain_tags"}, []string{"grain_id", "token", "memory"}, pgx.CopyFromRows(tags)); err != nil {
			return nil, err
		}
	}
	if err := indexed(p); err != nil {
		return nil, err
	}
	if err := insertSearchPG(ctx, tx, memory, stored); err != nil {
		return nil, err
	}
	if err := adjustCountsPG(ctx, tx, memory, countFresh(stored)); err != nil {
		return nil, err
	}
	return finishHashes(rows, out, same), nil
}

// splitFresh decides which rows of a batch to store and returns their
// positions. A row whose (scope, dedup token) matches a live grain gets
// that grain's hash in out; a row that repeats an earlier row of the batch
// gets that row's position in same (else -1). Neither reads a row's hash,
// which may still be in the making; finishHashes fills in the rest. A row
// that repeats a grain's content but not its importance, confidence or
// pinned flag is refused (code conflict): answering the grain's hash would
// drop what the write asked for without a word, a pin among them.
func splitFresh(rows []*GrainRow, existing map[string]dedupHit) (fresh []int, out []string, same []int, err error) {
	out, same = make([]string, len(rows)), make([]int, len(rows))
	first := make(map[string]int, len(rows))
	for i, r := range rows {
		same[i] = -1
		k := dedupKey(r.Scope, r.DedupTok)
		if h, ok := existing[k]; ok {
			if !sameGrain(r, h.Importance, h.Confidence, h.Pinned) {
				return nil, nil, nil, grains.AtIndex(repeated(h.Hash), i, len(rows))
			}
			out[i] = h.Hash
			continue
		}
		if j, ok := first[k]; ok {
			if e := rows[j]; !sameGrain(r, e.Importance, e.Confidence, e.Pinned) {
				return nil, nil, nil, grains.AtIndex(repeated(""), i, len(rows))
			}
			same[i] = j
			continue
		}
		first[k] = i
		fresh = append(fresh, i)
	}
	return fresh, out, same, nil
}

// sameGrain reports whether r, a write whose content is that of a grain
// with the given importance, confidence and pinned flag, repeats it: the
// fields a write sets that the content does not decide, but for salience
// (which the ladder fades after the write) and the creation time (a retry
// is later).
func sameGrain(r *GrainRow, importance, confidence float64, pinned bool) bool {
	return r.Importance == importance && r.Confidence == confidence && r.Pinned == pinned
}

// repeated is splitFresh's refusal of a write that repeats the content of
// the live grain hash (or, with hash empty, of an earlier grain of its
// batch) with other fields.
func repeated(hash string) error {
	msg := "repeats the content of an earlier grain of the batch with another importance, confidence or pinned flag"
	hint := "write each grain once"
	if hash != "" {
		msg = "repeats the content of grain " + hash + " in its scope with another importance, confidence or pinned flag"
		hint = "supersede that grain to change them"
	}
	return &grains.Error{Code: grains.CodeConflict, Message: msg, Hint: hint}
}

// pick returns the rows at the given positions.
func pick(rows []*GrainRow, pos []int) []*GrainRow {
	out := make([]*GrainRow, len(pos))
	for k, i := range pos {
		out[k] = rows[i]
	}
	return out
}

// finishHashes completes splitFresh's out once the fresh rows are complete.
func finishHashes(rows []*GrainRow, out []string, same []int) []string {
	for i := range rows {
		switch {
		case same[i] >= 0:
			out[i] = rows[same[i]].Hash
		case out[i] == "":
			out[i] = rows[i].Hash
		}
	}
	return out
}

// translatePG maps pgx errors to store errors.
func translatePG(err error, what string) error {
	if pgCode(err) == "23505" { // unique_violation
		return fmt.Errorf("%s: %w", what, errDuplicate)
	}
	return translate(err, what)
}

// dedupHitsPG reads the live rows (not superseded) that hold any of the
// distinct dedup tokens $1, one index lookup per token. "dedup_tok =
// ANY($1)" let the planner, which keeps no statistics of the column,
// choose a sequential scan of grains testing each row against the whole
// array (1,000 tokens a batch) until the table was large: every batch of a
// fresh store's first tens of thousands of grains read all of them
// (TestDedupLookupUsesItsIndex).
const dedupHitsPG = `SELECT g.id, g.hash, g.scope, g.dedup_tok, g.key_chain, g.user_key_id, g.importance, g.confidence, g.pinned FROM unnest($1::bytea[]) AS k(tok)
	CROSS JOIN LATERAL (SELECT id, hash, scope, dedup_tok, key_chain, user_key_id, importance, confidence, pinned FROM grains
		WHERE dedup_tok = k.tok AND superseded_by = '' OFFSET 0) AS g`

// deleteOnePG is DeleteHashes of one grain over pgx, in two round trips
// where the general path takes a dozen: BEGIN, the memory's write lock
// (shared, see lockMemory), the grain's row read FOR UPDATE (with whether
// an erasure made it unreadable: OpRow.Erasing) and the memory's active
// holds in one batch; then the grain's postings queued (removePostings),
// its tags and row deleted, the counters adjusted, the events mk builds
// inserted (with their webhook deliveries) and COMMIT in a second. Each round trip on a busy 2-core machine costs as
// much CPU as the work it carries. It reports ok false, having changed
// nothing, when the grain has other versions: the general path takes the
// whole chain.
func (db *DB) deleteOnePG(ctx context.Context, memory, hash string, now int64, mk EventsFunc[*Deletion]) (del *Deletion, ok bool, err error) {
	err = db.pgConn(ctx, func(pc *pgx.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(lockMemorySQL(false, "$1", "$2"), int32(memoryLockClass), memoryLockKey(memory)) // see lockMemory
		// The grain itself is never one an erasure made unreadable (a hash that
		// names nothing): Erasing is false.
		b.Queue(`SELECT `+opColumns+`, FALSE FROM grains WHERE memory = $1 AND hash = $2 AND NOT `+erasingRow+` FOR UPDATE`, memory, hash)
		b.Queue(activeHoldsSQL, memory)
		br := pc.SendBatch(ctx, b)
		var r OpRow
		found := false
		var hs []HoldRow
		_, err := br.Exec()
		if err == nil {
			_, err = br.Exec()
		}
		if err == nil {
			found, err = scanOptional(br.QueryRow(), append(r.dest(), &r.Erasing)...)
		}
		if err == nil {
			hs, err = scanHolds(br)
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if found && (r.Supersedes != "" || r.SupersededBy != "") {
			return nil // ok false: the general path takes the chain
		}
		ok = true
		del = &Deletion{Hashes: []string{}}
		if found {
			del.Hashes, del.Ops = append(del.Hashes, hash), []OpRow{r}
			if id := holdOn(hs, r.Scope, r.UserRef); id != "" {
				return HoldError(id)
			}
		}
		var evs []Event
		if mk != nil {
			if evs, err = mk(ctx, del); err != nil {
				return err
			}
		}
		if !found {
			return nil // nothing to delete: roll back
		}
		w := &pgx.Batch{}
		q := batchExec{w}
		q.Exec(ctx, queueGarbageOne, r.ID)
		q.Exec(ctx, `DELETE FROM grain_tags WHERE grain_id = $1`, r.ID)
		q.Exec(ctx, `DELETE FROM grains WHERE id = $1`, r.ID)
		c := counter{}
		c.add(r.Scope, r.UserKeyID, -1)
		if err := adjustCountsPG(ctx, q, memory, c); err != nil {
			return err
		}
		if err := insertEventsPG(ctx, q, now, evs); err != nil {
			return err
		}
		w.Queue("COMMIT")
		return pc.SendBatch(ctx, w).Close()
	})
	return del, ok, err
}
