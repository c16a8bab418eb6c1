package store

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
)

// eraseUserPG is EraseKey of a user's key over pgx, in three round trips
// where the general path takes about sixteen: BEGIN, the memory's lock,
// the pending cleanup jobs that are not users', the key, its grain count
// and the memory's active holds in one batch; the key's wrapped form by
// its id (see withWraps); then the wrapped form deleted, the key destroyed (and renamed, see
// destroyedName), the epoch bumped, the
// cleanup job, the transaction's id, the events mk builds (with their
// webhook deliveries) and COMMIT in a second. Erasures of a memory hold its
// lock one after the other, so the time between the two is the erasures'
// queue: four at a time waited about 18 ms of their 27 ms transaction for
// each other's sixteen round trips (lethe-load, 100,000 grains).
//
// It reports ok false, having changed nothing, where the general path's
// other steps are needed: a request's execution, another kind's cleanup
// job to finish first, or a hold on a scope, which needs a read of the
// user's grains under it.
func (db *DB) eraseUserPG(ctx context.Context, spec EraseSpec, mk EventsFunc[*Erasure]) (er *Erasure, ok bool, err error) {
	err = db.pgConn(ctx, func(pc *pgx.Conn) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue(lockMemorySQL(true, "$1", "$2"), int32(memoryLockClass), memoryLockKey(spec.Memory))
		b.Queue(`SELECT count(*) FROM erase_cleanup WHERE memory = $1 AND kind <> $2`, spec.Memory, string(keys.KindUser))
		b.Queue(`SELECT id, memory, kind, name, wrapped, fingerprint, created_us, destroyed_us, wrapped IS NOT NULL FROM data_keys
			WHERE memory = $1 AND kind = $2 AND name = $3 AND destroyed_us = 0 LIMIT 1`,
			spec.Memory, string(keys.KindUser), spec.Name)
		b.Queue(`SELECT COALESCE(SUM(c.n), 0) FROM user_grain_counts c WHERE c.key_id = (SELECT id FROM data_keys
			WHERE memory = $1 AND kind = $2 AND name = $3 AND destroyed_us = 0 LIMIT 1)`, spec.Memory, string(keys.KindUser), spec.Name)
		b.Queue(activeHoldsSQL, spec.Memory)
		br := pc.SendBatch(ctx, b)
		var jobs, count int64
		var key KeyRow
		var legacy, found bool
		var hs []HoldRow
		_, err := br.Exec()
		if err == nil {
			_, err = br.Exec()
		}
		if err == nil {
			err = br.QueryRow().Scan(&jobs)
		}
		if err == nil {
			found, err = scanOptional(br.QueryRow(), &key.ID, &key.Memory, &key.Kind, &key.Name, &key.Wrapped, &key.Fingerprint,
				&key.CreatedUS, &key.DestroyedUS, &legacy)
		}
		if err == nil {
			err = br.QueryRow().Scan(&count)
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
		if jobs > 0 {
			return nil // ok false: the general path finishes those jobs first
		}
		for _, h := range hs {
			if h.Kind != grains.HoldUser {
				return nil // ok false: a scope hold refuses only if the user has grains under it
			}
		}
		ok = true
		if !found {
			return grains.Errorf(grains.CodeNotFound, "nothing to erase: no live %s key", spec.Kind)
		}
		er = &Erasure{Count: count, Fingerprint: key.Fingerprint}
		for _, h := range hs {
			if h.Cover().Covers("", spec.UserRef) {
				return HoldError(h.ID)
			}
		}
		if !legacy {
			// The wrapped form by the key's id (see withWraps), for the
			// events' KEK version. Under the memory's lock no erase
			// destroys the key meanwhile.
			if err := pc.QueryRow(ctx, `SELECT wrapped FROM data_key_wraps WHERE key_id = $1`, key.ID).Scan(&key.Wrapped); err != nil {
				return err
			}
		}
		er.Destroyed = []keys.Record{toRecord(key)}
		dirty := wrapParts([]int64{key.ID})
		if legacy {
			dirty = append(dirty, "data_keys")
		}
		var evs []Event
		if mk != nil {
			if evs, err = mk(ctx, er); err != nil {
				return err
			}
		}
		w := &pgx.Batch{}
		q := batchExec{w}
		q.Exec(ctx, `DELETE FROM data_key_wraps WHERE key_id = $1`, key.ID)
		// Under the memory's lock no other erase can destroy the key; the
		// statement fails (the message cast to an integer) if one did.
		q.Exec(ctx, `WITH d AS (UPDATE data_keys SET wrapped = NULL, destroyed_us = $2, name = `+destroyedName+` WHERE id = $1 AND destroyed_us = 0 RETURNING 1)
			SELECT (CASE WHEN count(*) = 1 THEN '1' ELSE 'a concurrent erase destroyed the key first' END)::int FROM d`, key.ID, spec.Now)
		q.Exec(ctx, `INSERT INTO erase_epochs (memory, epoch) VALUES ($1, 1) ON CONFLICT (memory) DO UPDATE SET epoch = erase_epochs.epoch + 1`, spec.Memory)
		q.Exec(ctx, `INSERT INTO erase_cleanup (memory, kind, scope, key_id, created_us) VALUES ($1, $2, '', $3, $4)`,
			spec.Memory, string(keys.KindUser), key.ID, spec.Now)
		q.Exec(ctx, markDirtyPG, strings.Join(dirty, ","))
		q.Exec(ctx, markNamesSQL) // the key is renamed
		if err := insertEventsPG(ctx, q, spec.Now, evs); err != nil {
			return err
		}
		w.Queue("COMMIT")
		wr := pc.SendBatch(ctx, w)
		for range w.Len() {
			if _, err = wr.Exec(); err != nil {
				break
			}
		}
		if cerr := wr.Close(); err == nil {
			err = cerr
		}
		return err
	})
	return er, ok, err
}
