package store

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/requests"
)

var _ requests.Store = (*DB)(nil)

// RequestRow is an erasure request (see internal/requests). It holds a
// subject commitment, never the subject's id: the id is in Sealed, under
// the data key KeyID (kind "request"), both destroyed when the request is
// executed or rejected.
type RequestRow struct {
	ID          string `gorm:"primaryKey;size:32"`
	Memory      string `gorm:"size:64;not null;index:idx_erasure_requests_status,priority:1"`
	Kind        string `gorm:"size:8;not null"`
	Scope       string `gorm:"size:512;not null"`
	Commitment  string `gorm:"size:64;not null"`
	Reason      string `gorm:"size:32;not null"`
	Reference   string `gorm:"size:128;not null"`
	Status      string `gorm:"size:16;not null;index:idx_erasure_requests_status,priority:2"`
	DueUS       int64  `gorm:"column:due_us;not null;index:idx_erasure_requests_status,priority:3"`
	CreatedUS   int64  `gorm:"column:created_us;not null"`
	RequestedBy string `gorm:"size:64;not null"`
	ApprovedBy  string `gorm:"size:64;not null"`
	ApprovedUS  int64  `gorm:"column:approved_us;not null"`
	RejectedBy  string `gorm:"size:64;not null"`
	RejectedUS  int64  `gorm:"column:rejected_us;not null"`
	ExecutedBy  string `gorm:"size:64;not null"`
	ExecutedUS  int64  `gorm:"column:executed_us;not null"`
	Hold        string `gorm:"size:32;not null"`
	Count       int64  `gorm:"not null"`
	Scopes      string `gorm:"not null"` // JSON object: scope path -> count
	KeyFPs      string `gorm:"column:key_fps;not null"`
	KEKVersion  int64  `gorm:"column:kek_version;not null"`
	EventID     string `gorm:"size:32;not null"`
	SealKey     string `gorm:"size:64;not null"`
	KeyID       int64  `gorm:"not null"`
	Sealed      []byte
}

// TableName is the erasure request table.
func (RequestRow) TableName() string { return "erasure_requests" }

func usTime(us int64) *time.Time {
	if us == 0 {
		return nil
	}
	t := time.UnixMicro(us).UTC()
	return &t
}

func (r *RequestRow) request() requests.Request {
	out := requests.Request{ID: r.ID, Memory: r.Memory, Kind: requests.Kind(r.Kind), Scope: r.Scope, Commitment: r.Commitment,
		Reason: requests.Reason(r.Reason), Reference: r.Reference, Status: requests.Status(r.Status),
		Due: time.UnixMicro(r.DueUS).UTC(), CreatedAt: time.UnixMicro(r.CreatedUS).UTC(), RequestedBy: r.RequestedBy,
		ApprovedAt: usTime(r.ApprovedUS), ApprovedBy: r.ApprovedBy, RejectedAt: usTime(r.RejectedUS), RejectedBy: r.RejectedBy,
		ExecutedAt: usTime(r.ExecutedUS), ExecutedBy: r.ExecutedBy, Hold: r.Hold, Count: r.Count,
		KEKVersion: uint64(r.KEKVersion), EventID: r.EventID, SealKey: r.SealKey, KeyID: r.KeyID, Sealed: r.Sealed}
	if r.KeyFPs != "" {
		out.KeyFingerprints = strings.Split(r.KeyFPs, ",")
	}
	if r.Scopes != "" {
		json.Unmarshal([]byte(r.Scopes), &out.Scopes) // written by applyTransition
	}
	return out
}

// CreateRequest stores r with its sealing key and events.
func (db *DB) CreateRequest(ctx context.Context, r *requests.Request, key keys.Record, evs []Event) error {
	now := key.CreatedAt.UnixMicro()
	k := KeyRow{Memory: key.Memory, Kind: string(key.Kind), Name: key.Name, Wrapped: key.Wrapped, Fingerprint: key.Fingerprint, CreatedUS: now}
	if db.dialect == Postgres {
		// The wrapped form goes to data_key_wraps (see wraps.go).
		ids, err := db.reserveKeyIDs(ctx, 1)
		if err != nil {
			return err
		}
		k.ID, k.Wrapped = ids[0], nil
	}
	return translate(db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&k).Error; err != nil {
			return translate(err, "store the request's key")
		}
		if db.dialect == Postgres {
			if err := insertWraps(tx, []int64{k.ID}, [][]byte{key.Wrapped}); err != nil {
				return translate(err, "store the request's key")
			}
		}
		r.KeyID = k.ID
		row := RequestRow{ID: r.ID, Memory: r.Memory, Kind: string(r.Kind), Scope: r.Scope, Commitment: r.Commitment,
			Reason: string(r.Reason), Reference: r.Reference, Status: string(r.Status), DueUS: r.Due.UnixMicro(),
			CreatedUS: r.CreatedAt.UnixMicro(), RequestedBy: r.RequestedBy, Scopes: "{}", SealKey: r.SealKey, KeyID: k.ID, Sealed: r.Sealed}
		if err := tx.Create(&row).Error; err != nil {
			return translate(err, "store the request")
		}
		return insertEvents(tx, now, evs)
	}), "store the request")
}

// Request returns request id of memory.
func (db *DB) Request(ctx context.Context, memory, id string) (*requests.Request, error) {
	var rows []RequestRow
	if err := db.gorm.WithContext(ctx).Where("memory = ? AND id = ?", memory, id).Limit(1).Find(&rows).Error; err != nil {
		return nil, translate(err, "read request")
	}
	if len(rows) == 0 {
		return nil, grains.Errorf(grains.CodeNotFound, "no erasure request %s in memory %s", id, memory)
	}
	r := rows[0].request()
	return &r, nil
}

// Requests returns the requests of memory f selects, by due date.
func (db *DB) Requests(ctx context.Context, memory string, f requests.Filter) ([]requests.Request, error) {
	q := db.gorm.WithContext(ctx).Where("memory = ?", memory)
	if f.Status != "" {
		q = q.Where("status = ?", string(f.Status))
	}
	if !f.DueBefore.IsZero() {
		q = q.Where("due_us < ?", f.DueBefore.UnixMicro())
	}
	if f.Overdue {
		q = q.Where("status NOT IN ? AND due_us < ?", []string{string(requests.Executed), string(requests.Rejected)}, f.Now.UnixMicro())
	}
	return findRequests(q, f.Limit)
}

// findRequests returns up to limit requests q selects, oldest due first.
func findRequests(q *gorm.DB, limit int) ([]requests.Request, error) {
	var rows []RequestRow
	if err := q.Order("due_us, id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, translate(err, "read requests")
	}
	out := make([]requests.Request, len(rows))
	for i := range rows {
		out[i] = rows[i].request()
	}
	return out, nil
}

// StrandedRequests returns, of every memory, up to limit blocked requests
// whose blocking hold is not active (released, or never found), oldest due
// first, after (afterDue, afterID) in that order.
func (db *DB) StrandedRequests(ctx context.Context, afterDue time.Time, afterID string, limit int) ([]requests.Request, error) {
	due := afterDue.UnixMicro()
	if afterDue.IsZero() {
		due = math.MinInt64
	}
	return findRequests(db.gorm.WithContext(ctx).Where("status = ?", string(requests.Blocked)).
		Where("NOT EXISTS (SELECT 1 FROM holds h WHERE h.id = erasure_requests.hold AND h.memory = erasure_requests.memory AND h.released_us = 0)").
		Where("(due_us > ? OR (due_us = ? AND id > ?))", due, due, afterID), limit)
}

// Transition applies t with its events. A transition that destroys the
// sealing key marks its partition for the scrub, as an erase does (see
// deleteWraps).
func (db *DB) Transition(ctx context.Context, t *requests.Transition, evs []Event) error {
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := db.applyTransition(tx, t); err != nil {
			return err
		}
		return insertEvents(tx, t.At.UnixMicro(), evs)
	})
	return translate(err, "change request")
}

// applyTransition moves the request to t.To if it is in one of t.From,
// else fails with invalid_state (not_found if there is no such request).
// With t.Destroy it destroys the sealing key and the sealed subject (see
// deleteWraps for the key's dead tuples).
func (db *DB) applyTransition(tx *gorm.DB, t *requests.Transition) error {
	now := t.At.UnixMicro()
	set := map[string]any{"status": string(t.To)}
	switch t.To {
	case requests.Approved:
		set["approved_by"], set["approved_us"] = t.Actor, now
	case requests.Rejected:
		set["rejected_by"], set["rejected_us"] = t.Actor, now
	case requests.Blocked:
		set["hold"] = t.Hold
	case requests.Executed:
		scopes, err := json.Marshal(t.Scopes)
		if err != nil || t.Scopes == nil {
			scopes = []byte("{}")
		}
		set["executed_by"], set["executed_us"], set["count"], set["scopes"] = t.Actor, now, t.Count, string(scopes)
		set["key_fps"], set["kek_version"], set["event_id"] = strings.Join(t.KeyFingerprints, ","), int64(t.KEKVersion), t.EventID
	}
	if t.Destroy {
		set["sealed"] = nil
	}
	from := make([]string, len(t.From))
	for i, s := range t.From {
		from[i] = string(s)
	}
	var rows []RequestRow
	if err := tx.Select("id", "status", "key_id").Where("memory = ? AND id = ?", t.Memory, t.ID).Limit(1).Find(&rows).Error; err != nil {
		return translate(err, "read request")
	}
	if len(rows) == 0 {
		return grains.Errorf(grains.CodeNotFound, "no erasure request %s in memory %s", t.ID, t.Memory)
	}
	res := tx.Model(&RequestRow{}).Where("memory = ? AND id = ? AND status IN ?", t.Memory, t.ID, from).Updates(set)
	if res.Error != nil {
		return translate(res.Error, "change request")
	}
	if res.RowsAffected == 0 {
		return &grains.Error{Code: grains.CodeInvalidState, Field: "status",
			Message: "the request is no longer " + strings.Join(from, " or ") + " (another call changed it first)"}
	}
	if !t.Destroy {
		return nil
	}
	if err := db.deleteWraps(tx, []int64{rows[0].KeyID}); err != nil {
		return err
	}
	err := tx.Model(&KeyRow{}).Where("id = ? AND destroyed_us = 0", rows[0].KeyID).
		Updates(map[string]any{"wrapped": nil, "destroyed_us": now, "name": gorm.Expr(destroyedName)}).Error
	return translate(err, "destroy the request's key")
}

// claimRequest moves an executable request to executed at the start of
// its erasure's transaction: the row lock it takes makes a second replica
// executing the same request wait, then fail with invalid_state, so the
// erasure runs once.
func (db *DB) claimRequest(tx *gorm.DB, t *requests.Transition) error {
	return db.applyTransition(tx, &requests.Transition{Memory: t.Memory, ID: t.ID, From: t.From, To: requests.Executed, Actor: t.Actor, At: t.At})
}

// finishRequest records the erasure's result in the claimed request and
// destroys its sealed subject.
func (db *DB) finishRequest(tx *gorm.DB, t *requests.Transition) error {
	done := *t
	done.From, done.To, done.Destroy = []requests.Status{requests.Executed}, requests.Executed, true
	return db.applyTransition(tx, &done)
}

// ScrubRequests removes the residue of destroyed request keys and sealed
// subjects: the keys' scrub (see scrubKeys), and on PostgreSQL a rewrite
// of the request table, whose old tuples hold the sealed subjects.
func (db *DB) ScrubRequests(ctx context.Context) error {
	if db.scrubOff.Load() {
		return nil
	}
	err := db.scrubKeys(ctx)
	if db.dialect != Postgres {
		return err
	}
	// The request table is rewritten even when the keys' scrub failed: its
	// sealed subjects are residue of their own.
	if verr := db.gorm.WithContext(ctx).Exec("VACUUM FULL erasure_requests").Error; err == nil {
		err = translate(verr, "scrub requests")
	}
	return err
}

// scopeCounts returns the readable grains an erasure of spec's key would
// make unreadable, per scope path.
func (db *DB) scopeCounts(tx *gorm.DB, spec EraseSpec, keyID int64) (map[string]int64, error) {
	var rows []struct {
		Scope string
		N     int64
	}
	var err error
	switch spec.Kind {
	case keys.KindUser:
		err = tx.Model(&GrainRow{}).Select("scope, COUNT(*) AS n").Where("memory = ? AND user_key_id = ?", spec.Memory, keyID).
			Group("scope").Find(&rows).Error
	default:
		q := tx.Model(&CountRow{}).Select("name AS scope, SUM(n) AS n").Where("memory = ? AND kind = 'scope'", spec.Memory)
		if spec.Kind == keys.KindScope {
			cond, args := db.underPrefix("name", spec.Name)
			q = q.Where(cond, args...)
		}
		err = q.Group("name").Find(&rows).Error
	}
	if err != nil {
		return nil, translate(err, "count grains per scope")
	}
	out := map[string]int64{}
	for _, r := range rows {
		if r.N > 0 {
			out[r.Scope] = r.N
		}
	}
	return out, nil
}

// PreviewErase says what an erase of spec would do now: the grains it
// would make unreadable, per scope, and the active holds that would refuse
// it. It changes nothing. Rows an earlier erasure made unreadable are not
// counted, whether or not the cleaner has deleted them yet: as the erase
// does, the preview first finishes the pending cleanup (see
// finishCleanup), then rolls it back with everything else.
func (db *DB) PreviewErase(ctx context.Context, spec EraseSpec) (*requests.Preview, error) {
	pv := &requests.Preview{Scopes: map[string]int64{}, Holds: []string{}}
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := db.finishCleanup(tx, spec.Memory, spec.Kind); err != nil {
			return err
		}
		var target []KeyRow
		if err := tx.Where("memory = ? AND kind = ? AND name = ? AND destroyed_us = 0", spec.Memory, string(spec.Kind), spec.Name).
			Limit(1).Find(&target).Error; err != nil {
			return translate(err, "read data key")
		}
		if len(target) == 0 {
			return ErrDryRun
		}
		var err error
		if pv.Scopes, err = db.scopeCounts(tx, spec, target[0].ID); err != nil {
			return err
		}
		for _, n := range pv.Scopes {
			pv.Count += n
		}
		if pv.Holds, err = db.eraseHolds(tx, spec, target[0].ID, true); err != nil {
			return err
		}
		return ErrDryRun // roll the cleanup back
	})
	if err != nil && !errors.Is(err, ErrDryRun) {
		return nil, translate(err, "preview erasure")
	}
	return pv, nil
}
