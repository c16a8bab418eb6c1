package store

import (
	"context"
	"encoding/json"
	"strings"

	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/grains"
)

// HookRow is a webhook of a memory. Events lists the audit event types it
// receives as ",type,type," ("*" for every type), so that one LIKE matches
// an event's type. Secret is the signing secret wrapped by the KEK;
// OldSecret, the secret a rotation replaced, signs too until OldUntilUS.
type HookRow struct {
	ID         string `gorm:"primaryKey;size:40"`
	Memory     string `gorm:"size:64;not null;index:idx_hooks_memory"`
	URL        string `gorm:"size:2048;not null"`
	Events     string `gorm:"size:2048;not null"`
	Secret     []byte `gorm:"not null"`
	OldSecret  []byte
	OldUntilUS int64 `gorm:"column:old_until_us;not null"`
	CreatedUS  int64 `gorm:"column:created_us;not null"`
}

// TableName is the hooks table.
func (HookRow) TableName() string { return "hooks" }

// Delivery states.
const (
	DeliveryPending = "pending"
	DeliveryDead    = "dead"
)

// DeliveryRow is a pending or dead-lettered delivery of an audit event to
// a hook, inserted in the transaction of the event (see insertEvents) and
// deleted once delivered. Owner and LeaseUS are the claim: a delivery is
// free when LeaseUS has passed.
type DeliveryRow struct {
	ID        int64  `gorm:"primaryKey;autoIncrement"`
	HookID    string `gorm:"size:40;not null;uniqueIndex:idx_hook_deliveries_he,priority:1"`
	EventID   string `gorm:"size:32;not null;uniqueIndex:idx_hook_deliveries_he,priority:2"`
	Memory    string `gorm:"size:64;not null"`
	State     string `gorm:"size:8;not null;index:idx_hook_deliveries_due,priority:1"`
	NextUS    int64  `gorm:"column:next_us;not null;index:idx_hook_deliveries_due,priority:2"`
	Attempts  int    `gorm:"not null"`
	Owner     string `gorm:"size:40;not null"`
	LeaseUS   int64  `gorm:"column:lease_us;not null"`
	CreatedUS int64  `gorm:"column:created_us;not null"`
	LastError string `gorm:"size:64;not null"`
}

// TableName is the deliveries table.
func (DeliveryRow) TableName() string { return "hook_deliveries" }

// queueDeliveries is the statement that inserts, in an event's
// transaction, one delivery per hook of the events' memories that asks for
// their type. It is one statement whatever the number of events, and with
// no hooks it reads one empty index range.
const queueDeliveries = `INSERT INTO hook_deliveries (hook_id, event_id, memory, state, next_us, attempts, owner, lease_us, created_us, last_error)
	SELECT h.id, e.event_id, e.memory, 'pending', e.created_us, 0, '', 0, e.created_us, ''
	FROM audit_events e JOIN hooks h ON h.memory = e.memory
	WHERE e.event_id IN ? AND (h.events = '*' OR h.events LIKE '%,' || e.type || ',%')`

func queueDeliveriesGorm(tx *gorm.DB, evs []Event) error {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return translate(tx.Exec(queueDeliveries, ids).Error, "queue webhook deliveries")
}

func queueDeliveriesPG(ctx context.Context, tx pgExecer, evs []Event) error {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	_, err := tx.Exec(ctx, strings.Replace(queueDeliveries, "IN ?", "= ANY($1)", 1), ids)
	return err
}

// CreateHook stores a hook.
func (db *DB) CreateHook(ctx context.Context, h HookRow) error {
	return translate(db.gorm.WithContext(ctx).Create(&h).Error, "create hook")
}

// Hooks returns the hooks of memory, oldest first.
func (db *DB) Hooks(ctx context.Context, memory string) ([]HookRow, error) {
	var rows []HookRow
	err := db.gorm.WithContext(ctx).Where("memory = ?", memory).Order("created_us, id").Find(&rows).Error
	return rows, translate(err, "list hooks")
}

// Hook returns hook id of memory, or not_found.
func (db *DB) Hook(ctx context.Context, memory, id string) (*HookRow, error) {
	var rows []HookRow
	if err := db.gorm.WithContext(ctx).Where("memory = ? AND id = ?", memory, id).Limit(1).Find(&rows).Error; err != nil {
		return nil, translate(err, "read hook")
	}
	if len(rows) == 0 {
		return nil, grains.Errorf(grains.CodeNotFound, "no hook %s in memory %s", id, memory)
	}
	return &rows[0], nil
}

// DeleteHook deletes hook id of memory and its deliveries, or fails with
// not_found.
func (db *DB) DeleteHook(ctx context.Context, memory, id string) error {
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Where("memory = ? AND id = ?", memory, id).Delete(&HookRow{})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return grains.Errorf(grains.CodeNotFound, "no hook %s in memory %s", id, memory)
		}
		return tx.Where("hook_id = ?", id).Delete(&DeliveryRow{}).Error
	})
	return translate(err, "delete hook")
}

// AllHooks returns every hook of every memory.
func (db *DB) AllHooks(ctx context.Context) ([]HookRow, error) {
	var rows []HookRow
	err := db.gorm.WithContext(ctx).Order("id").Find(&rows).Error
	return rows, translate(err, "list hooks")
}

// ReplaceHookSecret replaces hook id's wrapped secret old (current or
// previous) by nw, if it is still old, and reports whether it did.
func (db *DB) ReplaceHookSecret(ctx context.Context, id string, old, nw []byte) (bool, error) {
	n := int64(0)
	for _, col := range []string{"secret", "old_secret"} {
		res := db.gorm.WithContext(ctx).Model(&HookRow{}).Where("id = ? AND "+col+" = ?", id, old).Update(col, nw)
		if res.Error != nil {
			return false, translate(res.Error, "rewrap hook secret")
		}
		n += res.RowsAffected
	}
	return n > 0, nil
}

// RotateHookSecret replaces hook id's secret by secret; the current one
// becomes the old secret until oldUntil (Unix microseconds).
func (db *DB) RotateHookSecret(ctx context.Context, memory, id string, secret []byte, oldUntil int64) error {
	res := db.gorm.WithContext(ctx).Model(&HookRow{}).Where("memory = ? AND id = ?", memory, id).
		Updates(map[string]any{"old_secret": gorm.Expr("secret"), "secret": secret, "old_until_us": oldUntil})
	if res.Error != nil {
		return translate(res.Error, "rotate hook secret")
	}
	if res.RowsAffected == 0 {
		return grains.Errorf(grains.CodeNotFound, "no hook %s in memory %s", id, memory)
	}
	return nil
}

// Deliveries returns up to limit deliveries of hook id in state ("" for
// every state), oldest first.
func (db *DB) Deliveries(ctx context.Context, hookID, state string, limit int) ([]DeliveryRow, error) {
	q := db.gorm.WithContext(ctx).Where("hook_id = ?", hookID)
	if state != "" {
		q = q.Where("state = ?", state)
	}
	var rows []DeliveryRow
	err := q.Order("id").Limit(limit).Find(&rows).Error
	return rows, translate(err, "list webhook deliveries")
}

// Redeliver makes dead deliveries of hook id pending again, due at now,
// with their attempts and age reset: the one named by deliveryID, or all
// when it is 0. It returns how many.
func (db *DB) Redeliver(ctx context.Context, hookID string, deliveryID int64, now int64) (int64, error) {
	q := db.gorm.WithContext(ctx).Model(&DeliveryRow{}).Where("hook_id = ? AND state = ?", hookID, DeliveryDead)
	if deliveryID != 0 {
		q = q.Where("id = ?", deliveryID)
	}
	res := q.Updates(map[string]any{"state": DeliveryPending, "next_us": now, "attempts": 0, "created_us": now,
		"owner": "", "lease_us": 0})
	return res.RowsAffected, translate(res.Error, "redeliver webhook deliveries")
}

// ClaimedDelivery is a claimed delivery with its hook and event.
type ClaimedDelivery struct {
	ID         int64
	HookID     string
	EventID    string
	Memory     string
	Attempts   int
	CreatedUS  int64
	URL        string
	Secret     []byte
	OldSecret  []byte
	OldUntilUS int64
	Type       string
	Leaf       []byte
	Seq        int64
}

// ClaimLimits bounds the deliveries of one hook and of one memory that a
// claim takes, so that a hook or a memory whose receivers are slow cannot
// take every delivery a claim hands out.
type ClaimLimits struct {
	// PerHook and PerMemory bound the deliveries of one hook, and of one
	// memory, that the claim takes (0: no bound).
	PerHook, PerMemory int
	// Hooks and Memories lower those bounds for the hooks and memories
	// they name, to the deliveries the claimer may still start for each
	// (0: none).
	Hooks, Memories map[string]int
}

// DeliveryRef names a claimed delivery and the owner that claimed it.
type DeliveryRef struct {
	ID    int64
	Owner string
}

// claimDeliveries is the claim's statement. The innermost query takes the
// candidates, due deliveries of numbered events in due order, leaving out
// the hooks and memories the claimer may start none of (on PostgreSQL it
// locks them, skipping rows another claim holds); the next keeps at most
// the per-hook bound of each hook, the next at most the per-memory bound
// of each memory, and the claim takes the first max of those. The bounds
// of busy hooks and memories arrive as JSON objects ({"hk_...": 2}), so
// that the statement's text, prepared once, never changes. {each} reads
// such an object as rows (key, value); {lock} is PostgreSQL's row lock.
// On PostgreSQL {in} and {end} make "= ANY(ARRAY(...))", so that the chosen ids are
// computed once and updated through the primary key: with "IN (" and no
// statistics yet, PostgreSQL read every pending row and searched the
// chosen ones for each (SQLite computes an IN list once).
const claimDeliveries = `UPDATE hook_deliveries SET owner = ?, lease_us = ? WHERE id {in}
	SELECT m.id FROM (
		SELECT h.id, h.next_us, ROW_NUMBER() OVER (PARTITION BY h.memory ORDER BY h.next_us, h.id) AS nm,
			COALESCE((SELECT CAST(j.value AS INTEGER) FROM {each} j WHERE j.key = h.memory), ?) AS cm
		FROM (
			SELECT c.id, c.memory, c.next_us, ROW_NUMBER() OVER (PARTITION BY c.hook_id ORDER BY c.next_us, c.id) AS nh,
				COALESCE((SELECT CAST(j.value AS INTEGER) FROM {each} j WHERE j.key = c.hook_id), ?) AS ch
			FROM (
				SELECT d.id, d.hook_id, d.memory, d.next_us FROM hook_deliveries d JOIN audit_events e ON e.event_id = d.event_id
				WHERE d.state = 'pending' AND d.next_us <= ? AND d.lease_us <= ? AND e.seq IS NOT NULL
					AND d.hook_id NOT IN (SELECT j.key FROM {each} j WHERE CAST(j.value AS INTEGER) <= 0)
					AND d.memory NOT IN (SELECT j.key FROM {each} j WHERE CAST(j.value AS INTEGER) <= 0)
				ORDER BY d.next_us, d.id LIMIT ?{lock}
			) c
		) h WHERE h.nh <= h.ch
	) m WHERE m.nm <= m.cm ORDER BY m.next_us, m.id LIMIT ?{end} AND state = 'pending' AND lease_us <= ?`

// ClaimDeliveries leases to owner, until leaseUntil, up to max pending
// deliveries due at now (Unix microseconds) whose event is numbered,
// within lim, and returns them. On PostgreSQL the rows are taken FOR
// UPDATE SKIP LOCKED, so concurrent claims skip each other's; on SQLite
// the one UPDATE runs under the database's write lock. Either way the
// UPDATE re-checks that the lease is free, and the rows are read back by
// owner, which is unique to this claim.
//
// The bounds are counted among the first candidates in due order (four
// times max, and 64 more), so a claim behind many deliveries of one busy
// hook may take fewer than it could; the claimer then counts that hook as
// full and its next claim reaches past it.
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, now, leaseUntil int64, max int, lim ClaimLimits) ([]ClaimedDelivery, error) {
	q := claimDeliveries
	if db.dialect == Postgres {
		q = strings.ReplaceAll(q, "{each}", "json_each_text(CAST(? AS json))")
		q = strings.Replace(q, "{lock}", " FOR UPDATE OF d SKIP LOCKED", 1)
		q = strings.Replace(q, "{in}", "= ANY(ARRAY(", 1)
		q = strings.Replace(q, "{end}", "))", 1)
	} else {
		q = strings.ReplaceAll(q, "{each}", "json_each(?)")
		q = strings.Replace(q, "{lock}", "", 1)
		q = strings.Replace(q, "{in}", "IN (", 1)
		q = strings.Replace(q, "{end}", ")", 1)
	}
	hooks, mems := boundsJSON(lim.Hooks), boundsJSON(lim.Memories)
	perHook, perMem := lim.PerHook, lim.PerMemory
	if perHook <= 0 {
		perHook = max
	}
	if perMem <= 0 {
		perMem = max
	}
	// The arguments in the order of their ? in the statement's text.
	args := []any{owner, leaseUntil, string(mems), perMem, string(hooks), perHook, now, now, string(hooks), string(mems),
		4*max + 64, max, now}
	g := db.gorm.WithContext(ctx)
	if err := g.Exec(q, args...).Error; err != nil {
		return nil, translate(err, "claim webhook deliveries")
	}
	var out []ClaimedDelivery
	err := g.Raw(`SELECT d.id, d.hook_id, d.event_id, d.memory, d.attempts, d.created_us, h.url, h.secret, h.old_secret,
		h.old_until_us, e.type, e.leaf, e.seq
		FROM hook_deliveries d JOIN hooks h ON h.id = d.hook_id JOIN audit_events e ON e.event_id = d.event_id
		WHERE d.owner = ? ORDER BY d.id`, owner).Scan(&out).Error
	return out, translate(err, "read claimed webhook deliveries")
}

// DeliveryDone deletes the deliveries refs names that their owners still
// hold, in one statement.
func (db *DB) DeliveryDone(ctx context.Context, refs []DeliveryRef) error {
	if len(refs) == 0 {
		return nil
	}
	err := db.gorm.WithContext(ctx).Where("(id, owner) IN ?", refPairs(refs)).Delete(&DeliveryRow{}).Error
	return translate(err, "record webhook delivery")
}

// boundsJSON is m as a JSON object, {} when empty (never null: the
// statement reads it as rows, and null is not an object).
func boundsJSON(m map[string]int) []byte {
	if len(m) == 0 {
		return []byte("{}")
	}
	b, _ := json.Marshal(m) // a map of strings to ints always marshals
	return b
}

func refPairs(refs []DeliveryRef) [][]any {
	out := make([][]any, len(refs))
	for i, r := range refs {
		out[i] = []any{r.ID, r.Owner}
	}
	return out
}

// DeliveryFailed records a failed attempt of delivery id if owner holds
// it: attempts, the reason, and the next due time or the dead state. It
// releases the lease.
func (db *DB) DeliveryFailed(ctx context.Context, id int64, owner string, attempts int, next int64, dead bool, reason string) error {
	state := DeliveryPending
	if dead {
		state = DeliveryDead
	}
	if len(reason) > 64 {
		reason = reason[:64]
	}
	err := db.gorm.WithContext(ctx).Model(&DeliveryRow{}).Where("id = ? AND owner = ?", id, owner).
		Updates(map[string]any{"attempts": attempts, "next_us": next, "state": state, "last_error": reason, "owner": "", "lease_us": 0}).Error
	return translate(err, "record webhook delivery failure")
}

// DeliveryQueue is the state of the delivery queue.
type DeliveryQueue struct {
	Pending      int64
	Dead         int64
	OldestUS     int64 // created_us of the oldest pending delivery; 0 if none
	OldestDeadUS int64
}

// DeliveryQueueStats returns the state of the whole delivery queue.
func (db *DB) DeliveryQueueStats(ctx context.Context) (DeliveryQueue, error) {
	var rows []struct {
		State  string
		N      int64
		Oldest int64
	}
	err := db.gorm.WithContext(ctx).Raw(`SELECT state, count(*) AS n, min(created_us) AS oldest FROM hook_deliveries GROUP BY state`).Scan(&rows).Error
	var q DeliveryQueue
	for _, r := range rows {
		switch r.State {
		case DeliveryPending:
			q.Pending, q.OldestUS = r.N, r.Oldest
		case DeliveryDead:
			q.Dead, q.OldestDeadUS = r.N, r.Oldest
		}
	}
	return q, translate(err, "read webhook queue")
}

// ReleaseDeliveries gives back the leases refs names that their owners
// still hold.
func (db *DB) ReleaseDeliveries(ctx context.Context, refs []DeliveryRef) error {
	if len(refs) == 0 {
		return nil
	}
	err := db.gorm.WithContext(ctx).Model(&DeliveryRow{}).Where("(id, owner) IN ?", refPairs(refs)).
		Updates(map[string]any{"owner": "", "lease_us": 0}).Error
	return translate(err, "release webhook deliveries")
}
