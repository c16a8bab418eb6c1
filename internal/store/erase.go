package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"hash/fnv"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/lethe-io/lethe/internal/crashpoint"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/requests"
)

// HoldRow is a legal hold on a scope prefix or a user of a memory. A user
// hold names the user by blind reference, never by id. ReleasedUS is 0
// while the hold is active.
type HoldRow struct {
	ID         string `gorm:"primaryKey;size:32"`
	Memory     string `gorm:"size:64;not null;index:idx_holds_memory"`
	Kind       string `gorm:"size:8;not null"` // grains.HoldScope or grains.HoldUser
	Scope      string `gorm:"size:512;not null"`
	UserRef    []byte
	CreatedUS  int64 `gorm:"column:created_us;not null"`
	ReleasedUS int64 `gorm:"column:released_us;not null"`
}

// TableName is the holds table.
func (HoldRow) TableName() string { return "holds" }

// Cover returns what the hold covers.
func (h *HoldRow) Cover() grains.HoldCover {
	return grains.HoldCover{Kind: h.Kind, Scope: h.Scope, UserRef: h.UserRef}
}

// EpochRow counts the erasures of a memory. Readers fetch it with the rows
// they read and drop cached keys when it moved, so that once an erase
// commits no instance decrypts with a destroyed key.
type EpochRow struct {
	Memory string `gorm:"primaryKey;size:64"`
	Epoch  int64  `gorm:"not null"`
}

// TableName is the erase epoch table.
func (EpochRow) TableName() string { return "erase_epochs" }

// CleanupJob is the durable record of rows made unreadable by an erasure,
// still to delete with their index tokens. The cleaner deletes rows of
// memory (at or below Scope for scope erasures, of UserKeyID for user
// erasures) whose key chain contains KeyID.
type CleanupJob struct {
	ID        int64  `gorm:"primaryKey;autoIncrement"`
	Memory    string `gorm:"size:64;not null"`
	Kind      string `gorm:"size:8;not null"`
	Scope     string `gorm:"size:512;not null"`
	KeyID     int64  `gorm:"not null"`
	CreatedUS int64  `gorm:"column:created_us;not null"`
}

// TableName is the cleanup job table.
func (CleanupJob) TableName() string { return "erase_cleanup" }

// NewHoldID returns a random hold id.
func NewHoldID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// HeldBy is the cause inside a held error: the hold that refused.
type HeldBy struct{ HoldID string }

func (h *HeldBy) Error() string { return "legal hold " + h.HoldID }

// HoldError is the refusal of a destructive call under a legal hold. It
// names the hold, never the user.
func HoldError(id string) error {
	return &grains.Error{Code: grains.CodeHeld, Message: "refused: legal hold " + id + " covers grains this call would destroy",
		Hint: "release the hold first if the legal reason has ended", Err: &HeldBy{HoldID: id}}
}

// SetHold stores a hold with its event.
func (db *DB) SetHold(ctx context.Context, h HoldRow, evs []Event) error {
	return db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Exclusive: the hold waits for the deletes in flight, and a
		// delete that starts after it commits reads it (see lockMemory).
		if err := lockMemory(tx, db.dialect, h.Memory, true); err != nil {
			return err
		}
		if err := tx.Create(&h).Error; err != nil {
			return translate(err, "set hold")
		}
		return insertEvents(tx, h.CreatedUS, evs)
	})
}

// ReleaseHold marks an active hold released, with its event.
func (db *DB) ReleaseHold(ctx context.Context, memory, id string, now int64, evs []Event) error {
	return db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&HoldRow{}).Where("memory = ? AND id = ? AND released_us = 0", memory, id).Update("released_us", now)
		if res.Error != nil {
			return translate(res.Error, "release hold")
		}
		if res.RowsAffected == 0 {
			return grains.NoHold(memory, id)
		}
		return insertEvents(tx, now, evs)
	})
}

// Holds returns the active holds of memory.
func (db *DB) Holds(ctx context.Context, memory string) ([]HoldRow, error) {
	var hs []HoldRow
	err := db.gorm.WithContext(ctx).Where("memory = ? AND released_us = 0", memory).Order("created_us").Find(&hs).Error
	return hs, translate(err, "read holds")
}

func activeHolds(tx *gorm.DB, memory string) ([]HoldRow, error) {
	var hs []HoldRow
	err := tx.Where("memory = ? AND released_us = 0", memory).Order("id").Find(&hs).Error
	return hs, translate(err, "read holds")
}

// holdOn returns the first active hold covering a row of (scope, userRef).
func holdOn(hs []HoldRow, scope string, userRef []byte) string {
	for i := range hs {
		if hs[i].Cover().Covers(scope, userRef) {
			return hs[i].ID
		}
	}
	return ""
}

// opsHeld refuses if an active hold covers any of rows.
func opsHeld(tx *gorm.DB, memory string, rows []OpRow) error {
	hs, err := activeHolds(tx, memory)
	if err != nil || len(hs) == 0 {
		return err
	}
	for _, r := range rows {
		if id := holdOn(hs, r.Scope, r.UserRef); id != "" {
			return HoldError(id)
		}
	}
	return nil
}

// Erasure says what an erase destroyed.
type Erasure struct {
	// Count is the number of grains made unreadable, every version included.
	Count int64
	// Fingerprint is the destroyed key's fingerprint.
	Fingerprint string
	// Destroyed lists every destroyed key (the named key first).
	Destroyed []keys.Record
}

// EraseSpec names the key an erase destroys.
type EraseSpec struct {
	Memory string
	Kind   keys.Kind
	// Name is the scope path for scope erasures and the user ref (hex) for
	// user erasures; "" for the memory.
	Name string
	// UserRef is the user's blind reference for user erasures.
	UserRef []byte
	Now     int64
	// Request, when set, is the execution of an erasure request: the
	// erase moves it to executed in its own transaction (first, so that of
	// two replicas executing it one erases and the other fails with
	// invalid_state), records the result in it and destroys its sealed
	// subject.
	Request *requests.Transition
	// DeferScrub leaves the scrub of the destroyed keys' residue to the
	// caller, who must call ScrubErased before it returns (the eraser
	// runs it beside its wait for the event's checkpoint).
	DeferScrub bool
}

// EraseKey destroys the live key named by spec (and, for scopes and
// memories, every key below it) in one transaction with the events mk
// builds, after checking holds; it bumps the memory's erase epoch and leaves
// a cleanup job for the unreadable rows. It fails with not_found when there
// is no live key (nothing to erase), and with held under a legal hold. A
// hold refusal, or mk returning ErrDryRun (which rolls everything back),
// returns what the erase would have destroyed with the error (Destroyed
// only for a dry run).
func (db *DB) EraseKey(ctx context.Context, spec EraseSpec, mk EventsFunc[*Erasure]) (*Erasure, error) {
	var er *Erasure
	var err error
	done := false // by eraseUserPG
	if db.dialect == Postgres && spec.Kind == keys.KindUser && spec.Request == nil {
		er, done, err = db.eraseUserPG(ctx, spec, mk)
	}
	if !done && err == nil {
		er, err = db.eraseTx(ctx, spec, mk)
	}
	if err != nil {
		return er, translate(err, "erase")
	}
	if slices.ContainsFunc(er.Destroyed, func(r keys.Record) bool { return r.Kind == keys.KindUser }) {
		db.scrub.names.Store(true)
	}
	if !spec.DeferScrub {
		db.ScrubErased(ctx)
	}
	return er, nil
}

// eraseTx is EraseKey's transaction, on every store and for every kind.
// On PostgreSQL it marks the tables holding the destroyed keys' dead
// tuples for the scrub (see deleteWraps).
func (db *DB) eraseTx(ctx context.Context, spec EraseSpec, mk EventsFunc[*Erasure]) (er *Erasure, err error) {
	err = db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := lockMemory(tx, db.dialect, spec.Memory, true); err != nil {
			return err
		}
		if spec.Request != nil {
			if err := db.claimRequest(tx, spec.Request); err != nil {
				return err
			}
		}
		if err := db.finishCleanup(tx, spec.Memory, spec.Kind); err != nil {
			return err
		}
		var target []KeyRow
		if err := tx.Where("memory = ? AND kind = ? AND name = ? AND destroyed_us = 0", spec.Memory, string(spec.Kind), spec.Name).
			Limit(1).Find(&target).Error; err != nil {
			return translate(err, "read data key")
		}
		if len(target) == 0 {
			return grains.Errorf(grains.CodeNotFound, "nothing to erase: no live %s key", spec.Kind)
		}
		key := target[0]
		// Rows the key makes unreadable, from the counters: O(scopes), not O(grains).
		var count int64
		var err error
		switch spec.Kind {
		case keys.KindUser:
			count, err = countUser(tx, key.ID)
		case keys.KindScope:
			count, err = db.countScope(tx, spec.Memory, spec.Name, false)
		default:
			count, err = db.countScope(tx, spec.Memory, "", true)
		}
		if err != nil {
			return err
		}
		er = &Erasure{Count: count, Fingerprint: key.Fingerprint}
		if err := db.checkEraseHolds(tx, spec, key.ID); err != nil {
			return err
		}
		var scopes map[string]int64
		if spec.Request != nil {
			if scopes, err = db.scopeCounts(tx, spec, key.ID); err != nil {
				return err
			}
		}
		// Destroy the key, and the keys it is the parent of.
		dq := tx.Where("memory = ? AND destroyed_us = 0", spec.Memory)
		switch spec.Kind {
		case keys.KindUser:
			dq = dq.Where("id = ?", key.ID)
		case keys.KindScope:
			cond, args := db.underPrefix("name", spec.Name)
			dq = dq.Where("kind = ?", string(keys.KindScope)).Where(cond, args...)
		}
		victims, err := db.findKeys(db.keysQ(dq))
		if err != nil {
			return translate(err, "read data keys")
		}
		ids := make([]int64, 0, len(victims))
		slices.SortFunc(victims, func(a, b KeyRow) int {
			if a.ID == key.ID {
				return -1
			}
			if b.ID == key.ID {
				return 1
			}
			return int(a.ID - b.ID)
		})
		for _, v := range victims {
			ids = append(ids, v.ID)
			er.Destroyed = append(er.Destroyed, toRecord(v))
		}
		if err := db.deleteWraps(tx, ids); err != nil {
			return err
		}
		res := tx.Model(&KeyRow{}).Where("id IN ? AND destroyed_us = 0", ids).
			Updates(map[string]any{"wrapped": nil, "destroyed_us": spec.Now, "name": gorm.Expr(destroyedName)})
		if res.Error != nil {
			return translate(res.Error, "destroy data key")
		}
		if res.RowsAffected != int64(len(ids)) {
			return grains.Errorf(grains.CodeConflict, "a concurrent erase destroyed the key first")
		}
		if slices.ContainsFunc(victims, func(v KeyRow) bool { return v.Kind == string(keys.KindUser) }) {
			if err := markNames(tx); err != nil { // the user keys were renamed
				return err
			}
		}
		if err := bumpEpoch(tx, spec.Memory); err != nil {
			return err
		}
		if spec.Kind != keys.KindUser {
			if err := bumpScopeGen(tx, spec.Memory); err != nil {
				return err
			}
		}
		job := CleanupJob{Memory: spec.Memory, Kind: string(spec.Kind), Scope: spec.Name, KeyID: key.ID, CreatedUS: spec.Now}
		if spec.Kind == keys.KindUser {
			job.Scope = ""
		}
		if err := tx.Create(&job).Error; err != nil {
			return translate(err, "record cleanup")
		}
		var evs []Event
		if mk != nil {
			if evs, err = mk(ctx, er); err != nil {
				return err
			}
		}
		if err := insertEvents(tx, spec.Now, evs); err != nil {
			return err
		}
		if t := spec.Request; t != nil {
			t.Count, t.Scopes = er.Count, scopes
			t.KeyFingerprints = t.KeyFingerprints[:0]
			for _, k := range er.Destroyed {
				t.KeyFingerprints = append(t.KeyFingerprints, k.Fingerprint)
			}
			if len(evs) > 0 {
				t.EventID = evs[0].ID
			}
			return db.finishRequest(tx, t)
		}
		return nil
	})
	return er, err
}

// ScrubErased removes the residue of the keys destroyed by erases that
// committed before the call (see scrubKeys), logging a failure: the key is
// destroyed; only its residue may outlive the erase. The next erase or
// RetryScrub tries again.
func (db *DB) ScrubErased(ctx context.Context) {
	if serr := db.scrubKeys(ctx); serr != nil {
		db.log.Warn("scrub after erase failed", slog.Any("error", serr))
	}
	if db.dialect == Postgres && db.scrub.names.Swap(false) {
		db.scrubNames(ctx) // the renamed user keys' old tuples
	}
}

// checkEraseHolds refuses an erase that would destroy held grains.
func (db *DB) checkEraseHolds(tx *gorm.DB, spec EraseSpec, keyID int64) error {
	ids, err := db.eraseHolds(tx, spec, keyID, false)
	if err != nil || len(ids) == 0 {
		return err
	}
	return HoldError(ids[0])
}

// eraseHolds returns the active holds that refuse an erase of spec (whose
// live key is keyID): the first one, or with all every one, in id order.
func (db *DB) eraseHolds(tx *gorm.DB, spec EraseSpec, keyID int64, all bool) ([]string, error) {
	hs, err := activeHolds(tx, spec.Memory)
	if err != nil || len(hs) == 0 {
		return []string{}, err
	}
	out := []string{}
	for _, h := range hs {
		refuses := false
		switch spec.Kind {
		case keys.KindMemory:
			refuses = true
		case keys.KindScope:
			if h.Cover().NestsWith(spec.Name) {
				refuses = true
			} else if h.Kind == grains.HoldUser {
				cond, args := db.underPrefix("scope", spec.Name)
				ids, err := userKeyIDs(tx, spec.Memory, h.UserRef)
				if err != nil {
					return nil, err
				}
				var n int64
				if err := tx.Model(&GrainRow{}).Where("memory = ? AND user_key_id IN ?", spec.Memory, nonEmpty(ids)).Where(cond, args...).Limit(1).Count(&n).Error; err != nil {
					return nil, translate(err, "check holds")
				}
				refuses = n > 0
			}
		case keys.KindUser:
			if h.Kind == grains.HoldUser && h.Cover().Covers("", spec.UserRef) {
				refuses = true
			} else if h.Kind == grains.HoldScope {
				cond, args := db.underPrefix("scope", h.Scope)
				var n int64
				if err := tx.Model(&GrainRow{}).Where("memory = ? AND user_key_id = ?", spec.Memory, keyID).Where(cond, args...).Limit(1).Count(&n).Error; err != nil {
					return nil, translate(err, "check holds")
				}
				refuses = n > 0
			}
		}
		if refuses {
			out = append(out, h.ID)
			if !all {
				break
			}
		}
	}
	return out, nil
}

func bumpEpoch(tx *gorm.DB, memory string) error {
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&EpochRow{Memory: memory}).Error; err != nil {
		return translate(err, "bump erase epoch")
	}
	return translate(tx.Model(&EpochRow{}).Where("memory = ?", memory).Update("epoch", gorm.Expr("epoch + 1")).Error, "bump erase epoch")
}

// Epoch returns the erase epoch of memory (0 before any erase).
func (db *DB) Epoch(ctx context.Context, memory string) (int64, error) {
	var e []EpochRow
	if err := db.gorm.WithContext(ctx).Where("memory = ?", memory).Find(&e).Error; err != nil {
		return 0, translate(err, "read erase epoch")
	}
	if len(e) == 0 {
		return 0, nil
	}
	return e[0].Epoch, nil
}

// CleanupErased deletes up to limit rows made unreadable by recorded
// erasures, with their tag tokens, and removes finished jobs, of up to ten
// jobs in one transaction (see cleanupJobs). It returns
// how many rows it deleted; call it until it returns 0. The deleted rows'
// residue is scrubbed as a forget's is (see scrubForget): on SQLite before
// it returns, so that their sealed blobs and blind tokens (the user ref
// among them) do not wait in the write-ahead log for the next checkpoint.
func (db *DB) CleanupErased(ctx context.Context, limit int) (int, error) {
	var jobs []CleanupJob
	if err := db.gorm.WithContext(ctx).Order("id").Limit(10).Find(&jobs).Error; err != nil {
		return 0, translate(err, "read cleanup jobs")
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	total, err := db.cleanupJobs(ctx, jobs, limit)
	if err != nil {
		return 0, err
	}
	crashpoint.Hit(crashpoint.CleanerJob)
	// Not when the cleaner is being stopped: Close checkpoints (SQLite),
	// and on PostgreSQL autovacuum prunes what is left.
	if total > 0 && ctx.Err() == nil {
		db.scrubForget(ctx)
	}
	return total, nil
}

// cleanupJobs runs the jobs in one transaction, up to limit rows in all,
// tried again on a lock conflict: it deletes a row's tags before the row,
// the other order than a forget, which locks the row first, and
// PostgreSQL aborts one of the two (TestCleanerRetriesADeadlock). One
// transaction for the jobs that wait, not one each: the postings of the
// rows of several erased users share their blocks (a common word's), which
// are then read and written once, and the cleaner takes SQLite's one
// writer once. A user erasure kicks the cleaner, so under a stream of them
// the jobs wait while the cleaner runs and are taken together next
// (BenchmarkForgetUser/sqlite: the cleaner took seven times the erasures'
// own CPU, most of it in rewriting posting segments, one job at a time).
func (db *DB) cleanupJobs(ctx context.Context, jobs []CleanupJob, limit int) (int, error) {
	deleted := 0
	err := retryMoved(func() error {
		return db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			var err error
			deleted, err = db.cleanupTx(tx, jobs, limit)
			return err
		})
	})
	return deleted, err
}

// finishCleanup runs the pending cleanup jobs of memory that an erase of
// kind must not count again to their end in tx, so that the counters it
// reads count readable rows only. An erase calls it under the memory's
// exclusive lock before reading its count: rows an earlier erase made
// unreadable, not yet deleted by the cleaner, would otherwise be counted
// again. A user erasure counts its key's rows alone, which another user's
// erasure never touched (those rows carry another key id): it finishes the
// scope and memory erasures' jobs and leaves the other users' to the
// cleaner, so that back-to-back user erasures do not each delete the last
// one's rows under the memory's lock.
func (db *DB) finishCleanup(tx *gorm.DB, memory string, kind keys.Kind) error {
	var jobs []CleanupJob
	q := tx.Where("memory = ?", memory)
	if kind == keys.KindUser {
		q = q.Where("kind <> ?", string(keys.KindUser))
	}
	if err := q.Order("id").Find(&jobs).Error; err != nil {
		return translate(err, "read cleanup jobs")
	}
	_, err := db.cleanupTx(tx, jobs, math.MaxInt)
	return err
}

// cleanupTx deletes up to limit rows of the jobs, in order, in tx, and
// each job once none of its rows are left; it returns how many rows it
// deleted.
func (db *DB) cleanupTx(tx *gorm.DB, jobs []CleanupJob, limit int) (int, error) {
	var parts []cleanupPart
	deleted := 0
	for _, j := range jobs {
		part, err := db.collectJob(tx, j, limit-deleted)
		if err != nil {
			return 0, err
		}
		parts = append(parts, part)
		if deleted += len(part.ids); deleted >= limit {
			break
		}
	}
	return deleted, db.applyCleanup(tx, parts)
}

// cleanupPart is what collectJob found of one job: the rows to delete
// (ids, hashes), the counters' deltas, and whether the job is then done.
type cleanupPart struct {
	job    CleanupJob
	ids    []int64
	hashes []string
	counts counter
	done   bool // the job had fewer rows left than asked for
}

// collectJob locks job j in tx and reads up to limit of its rows. The lock
// comes first, so that two cleaners (replicas, or an erase's
// finishCleanup) never both delete, and count down, the same rows; a job
// another cleaner finished has no row to lock and is done, with nothing to
// delete.
func (db *DB) collectJob(tx *gorm.DB, j CleanupJob, limit int) (cleanupPart, error) {
	part := cleanupPart{job: j}
	var locked []CleanupJob
	lq := tx.Where("id = ?", j.ID)
	if db.dialect == Postgres {
		lq = lq.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	if err := lq.Find(&locked).Error; err != nil {
		return part, translate(err, "lock cleanup job")
	}
	if len(locked) == 0 {
		part.done = true // finished by another cleaner
		return part, nil
	}
	keyID := strconv.FormatInt(j.KeyID, 10)
	q := tx.Model(&GrainRow{}).Select("id", "hash", "key_chain", "scope", "user_key_id").Where("memory = ?", j.Memory)
	switch keys.Kind(j.Kind) {
	case keys.KindUser:
		q = q.Where("user_key_id = ?", j.KeyID)
	case keys.KindScope:
		cond, args := db.underPrefix("scope", j.Scope)
		q = q.Where(cond, args...)
	}
	var rows []struct {
		ID        int64
		Hash      string
		KeyChain  string
		Scope     string
		UserKeyID int64
	}
	// Scan in id order; rows sealed under newer keys stay.
	last := int64(0)
	for len(part.ids) < limit {
		rows = rows[:0]
		if err := q.Session(&gorm.Session{}).Where("id > ?", last).Order("id").Limit(chunk).Find(&rows).Error; err != nil {
			return part, translate(err, "read erased grains")
		}
		if len(rows) == 0 {
			break
		}
		for _, r := range rows {
			last = r.ID
			if len(part.ids) == limit {
				break
			}
			if slices.Contains(strings.Split(r.KeyChain, "."), keyID) {
				part.ids = append(part.ids, r.ID)
				part.hashes = append(part.hashes, r.Hash)
				part.counts.add(r.Scope, r.UserKeyID, -1)
			}
		}
	}
	part.done = len(part.ids) < limit
	return part, nil
}

// applyCleanup deletes the rows parts name, in one deleteIDs, links them to
// their erasures, counts them down, and deletes each job that is done, in
// tx. The counters' deltas are summed by memory and applied in memory
// order, each memory's in key order, as a single job's are: transactions
// lock counter rows in one order and cannot deadlock on them.
func (db *DB) applyCleanup(tx *gorm.DB, parts []cleanupPart) error {
	var ids []int64
	byMemory := map[string]*counter{}
	for _, p := range parts {
		ids = append(ids, p.ids...)
		c := byMemory[p.job.Memory]
		if c == nil {
			c = &counter{}
			byMemory[p.job.Memory] = c
		}
		c.merge(p.counts)
	}
	if err := deleteIDs(tx, ids); err != nil {
		return err
	}
	for _, p := range parts {
		// The erasure event stays findable from the deleted versions.
		if err := linkErased(tx, p.job.Memory, p.job.KeyID, p.hashes); err != nil {
			return err
		}
	}
	for _, memory := range slices.Sorted(maps.Keys(byMemory)) {
		if err := adjustCounts(tx, memory, *byMemory[memory]); err != nil {
			return err
		}
	}
	for _, p := range parts {
		if p.done {
			if err := tx.Delete(&CleanupJob{}, p.job.ID).Error; err != nil {
				return translate(err, "finish cleanup job")
			}
		}
	}
	return nil
}

// checkLive fails with code erased unless every key id is live. It first
// takes memory's write lock (see lockMemory), so an erase cannot commit
// between this check and the caller's commit.
func checkLive(tx *gorm.DB, dialect, memory string, ids []int64) error {
	if err := lockMemory(tx, dialect, memory, false); err != nil {
		return err
	}
	var live []int64
	if err := tx.Model(&KeyRow{}).Select("id").Where("id IN ? AND destroyed_us = 0", ids).Find(&live).Error; err != nil {
		return translate(err, "check data keys")
	}
	if len(live) != len(ids) {
		return grains.Errorf(grains.CodeErased, "a key of this grain's chain was erased")
	}
	return nil
}

// memoryLockClass is the first key of the PostgreSQL advisory locks on
// memories ("leth"); the second is memoryLockKey. The two-key form is a
// key space apart from the one-key locks of the sequencer and policies.
const memoryLockClass = 0x6c657468

// memoryLockKey is the FNV-1a hash of a memory name. Two memories with one
// hash share a lock, which costs waits, never correctness.
func memoryLockKey(memory string) int32 {
	h := fnv.New32a()
	h.Write([]byte(memory))
	return int32(h.Sum32())
}

// lockMemory takes memory's write lock until the end of tx, on PostgreSQL:
// shared by transactions that store grains under its keys or delete them
// (forgets, policy batches, compressions) and by archives (ArchiveRows),
// exclusive for an erase and for placing a legal hold. So an erase waits
// for the writes in flight, and reads its count after they commit, which
// makes it exact; a write that starts after the erase sees the destroyed
// keys, and an archive that starts after it sees its cleanup job, so it
// archives no row the erase made unreadable. A hold waits for the
// deletes in flight, and a delete that starts after the hold is placed
// reads it: no grain is deleted under a hold once its placement has been
// answered. Every transaction takes the lock first, before any row lock (a
// supersede's update of the old row included), so that an erase or a hold
// waiting for it never waits in a cycle. A shared lock is one entry in
// the server's lock table, where share-locking each key row of a batch
// wrote every row. On SQLite, writers are serialized by the database.
func lockMemory(tx *gorm.DB, dialect, memory string, exclusive bool) error {
	if dialect != Postgres {
		return nil
	}
	err := tx.Exec(lockMemorySQL(exclusive, "?", "?"), memoryLockClass, memoryLockKey(memory)).Error
	return translate(err, "lock memory")
}

// lockMemorySQL is the statement taking a memory's write lock, with the
// given placeholders for memoryLockClass and memoryLockKey.
func lockMemorySQL(exclusive bool, class, key string) string {
	fn := "pg_advisory_xact_lock_shared"
	if exclusive {
		fn = "pg_advisory_xact_lock"
	}
	return "SELECT " + fn + "(" + class + ", " + key + ")"
}
