package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/grains"
)

// HookRow is a webhook of a memory. Events lists the audit event types it
// receives as ",type,type," ("*" for every type), so that one LIKE matches
// an event's type. Secret is the signing secret wrapped by the KEK;
// OldSecret, the secret a rotation replaced, signs too until OldUntilUS.
//
// Failures, PausedUntilUS and PauseUS are the hook's circuit breaker (see
// hooks.Circuit), one for every handle on the database: its consecutive
// failed attempts; while PausedUntilUS is after now, no claim takes a
// delivery of the hook, and once it has passed (and is not 0) a claim
// takes one at a time, a probe, and marks the hook with ProbeUntilUS, its
// lease, so that no other claim takes another meanwhile; PauseUS is the
// last pause's length. The columns have defaults, so that the migration
// adds them to the hooks of an older table (closed circuits).
type HookRow struct {
	ID            string `gorm:"primaryKey;size:40"`
	Memory        string `gorm:"size:64;not null;index:idx_hooks_memory"`
	URL           string `gorm:"size:2048;not null"`
	Events        string `gorm:"size:2048;not null"`
	Secret        []byte `gorm:"not null"`
	OldSecret     []byte
	OldUntilUS    int64 `gorm:"column:old_until_us;not null"`
	CreatedUS     int64 `gorm:"column:created_us;not null"`
	Failures      int   `gorm:"column:failures;not null;default:0"`
	PausedUntilUS int64 `gorm:"column:paused_until_us;not null;default:0;index:idx_hooks_paused"`
	PauseUS       int64 `gorm:"column:pause_us;not null;default:0"`
	ProbeUntilUS  int64 `gorm:"column:probe_until_us;not null;default:0"`
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

// queueDeliveriesPG is queueDeliveries on pgx. One event, the usual case,
// is queued by a statement with a scalar parameter, which PostgreSQL plans
// once per connection (queueDeliveryOne); with an array parameter it
// planned it again at every call (see queueGarbageOne): 54 µs of plan
// against 10 of execution under lethe-load's forget phase.
func queueDeliveriesPG(ctx context.Context, tx pgExecer, evs []Event) error {
	if len(evs) == 1 {
		_, err := tx.Exec(ctx, queueDeliveryOne, evs[0].ID)
		return err
	}
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	_, err := tx.Exec(ctx, queueDeliveriesAny, ids)
	return err
}

var (
	queueDeliveriesAny = strings.Replace(queueDeliveries, "IN ?", "= ANY($1)", 1)
	queueDeliveryOne   = strings.Replace(queueDeliveries, "IN ?", "= $1", 1)
)

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
// when it is 0. It returns how many. If the hook is paused (see HookRow),
// its pause ends at now, so that the next claim sends one of its
// deliveries as a probe; not when deliveryID names no dead delivery.
func (db *DB) Redeliver(ctx context.Context, hookID string, deliveryID int64, now int64) (int64, error) {
	var n int64
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// The hook's row first, as every statement that writes both.
		err := tx.Model(&HookRow{}).Where("id = ? AND paused_until_us > ?", hookID, now).
			Updates(map[string]any{"paused_until_us": now, "pause_us": 0, "probe_until_us": 0}).Error
		if err != nil {
			return err
		}
		q := tx.Model(&DeliveryRow{}).Where("hook_id = ? AND state = ?", hookID, DeliveryDead)
		if deliveryID != 0 {
			q = q.Where("id = ?", deliveryID)
		}
		res := q.Updates(map[string]any{"state": DeliveryPending, "next_us": now, "attempts": 0, "created_us": now,
			"owner": "", "lease_us": 0})
		if res.Error != nil {
			return res.Error
		}
		if n = res.RowsAffected; deliveryID != 0 && n == 0 {
			return errRollback
		}
		return nil
	})
	if errors.Is(err, errRollback) {
		return 0, nil
	}
	return n, translate(err, "redeliver webhook deliveries")
}

// errRollback rolls back a transaction that has nothing to change.
var errRollback = errors.New("store: nothing to change")

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
// of each memory, and the claim takes the first max of those; it takes
// nothing of a paused hook (see probeHooks for those). The bounds
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
					AND d.hook_id NOT IN (SELECT p.id FROM hooks p WHERE p.paused_until_us > 0)
					AND d.hook_id NOT IN (SELECT j.key FROM {each} j WHERE CAST(j.value AS INTEGER) <= 0)
					AND d.memory NOT IN (SELECT j.key FROM {each} j WHERE CAST(j.value AS INTEGER) <= 0)
				ORDER BY d.next_us, d.id LIMIT ?{lock}
			) c
		) h WHERE h.nh <= h.ch
	) m WHERE m.nm <= m.cm ORDER BY m.next_us, m.id LIMIT ?{end} AND state = 'pending' AND lease_us <= ?`

// probeHooks marks the hooks whose pause has ended (see HookRow) and
// that have a due delivery of a numbered event, up to max of them and none
// that the claimer may start none of, as probed until a claim's lease
// ends, and returns them. The outer statement checks the hook's state
// again: on PostgreSQL a concurrent claim that marked one first holds its
// row until it commits, and this one then finds it probed; SQLite runs
// the statement under the database's write lock. So at most one claim, of
// every handle on the database, takes a probe of a hook at a time.
const probeHooks = `UPDATE hooks SET probe_until_us = ? WHERE id IN (
	SELECT h.id FROM hooks h WHERE h.paused_until_us > 0 AND h.paused_until_us <= ? AND h.probe_until_us <= ?
		AND h.id NOT IN (SELECT j.key FROM {each} j WHERE CAST(j.value AS INTEGER) <= 0)
		AND h.memory NOT IN (SELECT j.key FROM {each} j WHERE CAST(j.value AS INTEGER) <= 0)
		AND EXISTS (SELECT 1 FROM hook_deliveries d JOIN audit_events e ON e.event_id = d.event_id
			WHERE d.hook_id = h.id AND d.state = 'pending' AND d.next_us <= ? AND d.lease_us <= ? AND e.seq IS NOT NULL)
		ORDER BY h.paused_until_us, h.id LIMIT ?)
	AND paused_until_us > 0 AND paused_until_us <= ? AND probe_until_us <= ? RETURNING id`

// claimProbes leases the first due delivery of each hook probeHooks
// marked for this claim (the last IN's list).
const claimProbes = `UPDATE hook_deliveries SET owner = ?, lease_us = ? WHERE id IN (
	SELECT (SELECT d.id FROM hook_deliveries d JOIN audit_events e ON e.event_id = d.event_id
		WHERE d.hook_id = h.id AND d.state = 'pending' AND d.next_us <= ? AND d.lease_us <= ? AND e.seq IS NOT NULL
		ORDER BY d.next_us, d.id LIMIT 1)
	FROM hooks h WHERE h.id IN ?) AND state = 'pending' AND lease_us <= ?`

// ClaimDeliveries leases to owner, until leaseUntil, up to max pending
// deliveries due at now (Unix microseconds) whose event is numbered,
// within lim, and returns them. On PostgreSQL the rows are taken FOR
// UPDATE SKIP LOCKED, so concurrent claims skip each other's; on SQLite
// the one UPDATE runs under the database's write lock. Either way the
// UPDATE re-checks that the lease is free, and the rows are read back by
// owner, which is unique to this claim.
//
// A paused hook's deliveries are not taken; of a hook whose pause has
// ended, only one, a probe, and only if no other claim holds one (see
// probeHooks): the hook is marked probed until leaseUntil, which its
// delivery's outcome (DeliveryDone, DeliveryFailed) ends.
//
// The bounds are counted among the first candidates in due order (four
// times max, and 64 more), so a claim behind many deliveries of one busy
// hook may take fewer than it could; the claimer then counts that hook as
// full and its next claim reaches past it.
func (db *DB) ClaimDeliveries(ctx context.Context, owner string, now, leaseUntil int64, max int, lim ClaimLimits) ([]ClaimedDelivery, error) {
	q, probe := claimDeliveries, probeHooks
	if db.dialect == Postgres {
		q = strings.ReplaceAll(q, "{each}", "json_each_text(CAST(? AS json))")
		q = strings.Replace(q, "{lock}", " FOR UPDATE OF d SKIP LOCKED", 1)
		q = strings.Replace(q, "{in}", "= ANY(ARRAY(", 1)
		q = strings.Replace(q, "{end}", "))", 1)
		probe = strings.ReplaceAll(probe, "{each}", "json_each_text(CAST(? AS json))")
	} else {
		q = strings.ReplaceAll(q, "{each}", "json_each(?)")
		q = strings.Replace(q, "{lock}", "", 1)
		q = strings.Replace(q, "{in}", "IN (", 1)
		q = strings.Replace(q, "{end}", ")", 1)
		probe = strings.ReplaceAll(probe, "{each}", "json_each(?)")
	}
	hooks, mems := boundsJSON(lim.Hooks), boundsJSON(lim.Memories)
	g := db.gorm.WithContext(ctx)
	var probed []string
	err := g.Raw(probe, leaseUntil, now, now, string(hooks), string(mems), now, now, max, now, now).Scan(&probed).Error
	if err != nil {
		return nil, translate(err, "claim webhook probes")
	}
	if len(probed) > 0 {
		// A hook marked but left without a delivery (its delivery taken
		// meanwhile) is probed again once leaseUntil has passed.
		res := g.Exec(claimProbes, owner, leaseUntil, now, now, probed, now)
		if res.Error != nil {
			return nil, translate(res.Error, "claim webhook probes")
		}
		max -= int(res.RowsAffected)
	}
	if max > 0 {
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
		if err := g.Exec(q, args...).Error; err != nil {
			return nil, translate(err, "claim webhook deliveries")
		}
	}
	var out []ClaimedDelivery
	err = g.Raw(`SELECT d.id, d.hook_id, d.event_id, d.memory, d.attempts, d.created_us, h.url, h.secret, h.old_secret,
		h.old_until_us, e.type, e.leaf, e.seq
		FROM hook_deliveries d JOIN hooks h ON h.id = d.hook_id JOIN audit_events e ON e.event_id = d.event_id
		WHERE d.owner = ? ORDER BY d.id`, owner).Scan(&out).Error
	return out, translate(err, "read claimed webhook deliveries")
}

// DeliveryDone deletes the deliveries refs names that their owners still
// hold, in one statement, after closing the circuits of their hooks (see
// HookRow): a receiver accepted a delivery. A hook whose circuit is closed
// and has no failure is not written.
func (db *DB) DeliveryDone(ctx context.Context, refs []DeliveryRef) error {
	if len(refs) == 0 {
		return nil
	}
	g := db.gorm.WithContext(ctx)
	pairs := refPairs(refs)
	err := g.Exec(`UPDATE hooks SET failures = 0, paused_until_us = 0, pause_us = 0, probe_until_us = 0
		WHERE id IN (SELECT hook_id FROM hook_deliveries WHERE (id, owner) IN ?) AND (failures <> 0 OR paused_until_us <> 0)`, pairs).Error
	if err != nil {
		return translate(err, "record webhook delivery")
	}
	err = g.Where("(id, owner) IN ?", pairs).Delete(&DeliveryRow{}).Error
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

// HookCircuit is a hook's circuit breaker as the hooks table holds it
// (see HookRow).
type HookCircuit struct {
	Failures      int
	PausedUntilUS int64
	PauseUS       int64
}

// DeliveryFailure is a failed attempt, as DeliveryFailed records it.
type DeliveryFailure struct {
	// Attempts, NextUS and Reason are the delivery's; Dead moves it to
	// the dead-letter state instead of due again at NextUS.
	Attempts int
	NextUS   int64
	Dead     bool
	Reason   string
	// AtUS is when the attempt failed.
	AtUS int64
	// Trip returns the hook's circuit after the failure, given the circuit
	// before it.
	Trip func(HookCircuit) HookCircuit
	// MaxAgeUS bounds the age of the hook's deliveries at the end of a
	// pause (see DeliveryFailed); 0: no bound.
	MaxAgeUS int64
}

// Tripped is what a failed attempt did to its hook.
type Tripped struct {
	// Circuit is the hook's circuit after the failure.
	Circuit HookCircuit
	// Paused reports that the failure paused the hook, or paused it again
	// (its PausedUntilUS moved past AtUS).
	Paused bool
	// Expired counts the deliveries the pause dead-lettered (see
	// DeliveryFailed), the failed one among them if it left it pending.
	Expired int64
}

// DeliveryFailed records a failed attempt of delivery id if owner holds
// it: attempts, the reason, and the next due time or the dead state; it
// releases the lease. In the same transaction it moves the hook's circuit
// by f.Trip (the hook's row locked) and, while the circuit leaves the
// hook paused after f.AtUS, dead-letters the hook's pending deliveries
// that no claim holds and that were queued more than f.MaxAgeUS before
// the pause ends ("hook paused" their last error if they had none): their
// next attempt would come after their age allows one, as Dead does for
// a delivery whose next retry would. It returns what it did to the hook,
// nothing if owner no longer holds the delivery.
func (db *DB) DeliveryFailed(ctx context.Context, id int64, owner string, f DeliveryFailure) (Tripped, error) {
	state := DeliveryPending
	if f.Dead {
		state = DeliveryDead
	}
	reason := f.Reason
	if len(reason) > 64 {
		reason = reason[:64]
	}
	lock := ""
	if db.dialect == Postgres {
		lock = " FOR UPDATE"
	}
	var out Tripped
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var hook []string
		if err := tx.Raw("SELECT hook_id FROM hook_deliveries WHERE id = ? AND owner = ?", id, owner).Scan(&hook).Error; err != nil {
			return err
		}
		if len(hook) == 0 {
			return nil // another owner sends it
		}
		// The hook's row first, locked, then the delivery's: the order of
		// the claim's and DeliveryDone's statements.
		var rows []HookRow
		if err := tx.Raw("SELECT failures, paused_until_us, pause_us FROM hooks WHERE id = ?"+lock, hook[0]).Scan(&rows).Error; err != nil {
			return err
		}
		res := tx.Model(&DeliveryRow{}).Where("id = ? AND owner = ?", id, owner).
			Updates(map[string]any{"attempts": f.Attempts, "next_us": f.NextUS, "state": state, "last_error": reason, "owner": "", "lease_us": 0})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errRollback // its lease expired meanwhile, and another claim took it
		}
		if len(rows) == 0 {
			return nil // the hook was deleted meanwhile
		}
		before := HookCircuit{Failures: rows[0].Failures, PausedUntilUS: rows[0].PausedUntilUS, PauseUS: rows[0].PauseUS}
		c := f.Trip(before)
		err := tx.Model(&HookRow{}).Where("id = ?", hook[0]).
			Updates(map[string]any{"failures": c.Failures, "paused_until_us": c.PausedUntilUS, "pause_us": c.PauseUS, "probe_until_us": 0}).Error
		if err != nil {
			return err
		}
		out = Tripped{Circuit: c, Paused: c.PausedUntilUS > f.AtUS && c.PausedUntilUS != before.PausedUntilUS}
		if c.PausedUntilUS <= f.AtUS || f.MaxAgeUS <= 0 {
			return nil
		}
		res = tx.Exec(`UPDATE hook_deliveries SET state = ?, last_error = CASE WHEN last_error = '' THEN 'hook paused' ELSE last_error END
			WHERE hook_id = ? AND state = ? AND lease_us <= ? AND created_us < ?`,
			DeliveryDead, hook[0], DeliveryPending, f.AtUS, c.PausedUntilUS-f.MaxAgeUS)
		out.Expired = res.RowsAffected
		return res.Error
	})
	if errors.Is(err, errRollback) {
		return Tripped{}, nil
	}
	if err != nil {
		return Tripped{}, translate(err, "record webhook delivery failure")
	}
	return out, nil
}

// DeliveryQueue is the state of the delivery queue.
type DeliveryQueue struct {
	Pending      int64
	Dead         int64
	OldestUS     int64 // created_us of the oldest pending delivery; 0 if none
	OldestDeadUS int64
	// Paused counts the hooks whose circuit is open or half-open: paused,
	// or whose pause ended with no delivery accepted since.
	Paused int64
}

// DeliveryQueueStats returns the state of the whole delivery queue.
func (db *DB) DeliveryQueueStats(ctx context.Context) (DeliveryQueue, error) {
	var rows []struct {
		State  string
		N      int64
		Oldest int64
	}
	err := db.gorm.WithContext(ctx).Raw(`SELECT state, count(*) AS n, min(created_us) AS oldest FROM hook_deliveries GROUP BY state`).Scan(&rows).Error
	if err != nil {
		return DeliveryQueue{}, translate(err, "read webhook queue")
	}
	var q DeliveryQueue
	for _, r := range rows {
		switch r.State {
		case DeliveryPending:
			q.Pending, q.OldestUS = r.N, r.Oldest
		case DeliveryDead:
			q.Dead, q.OldestDeadUS = r.N, r.Oldest
		}
	}
	err = db.gorm.WithContext(ctx).Model(&HookRow{}).Where("paused_until_us > 0").Count(&q.Paused).Error
	return q, translate(err, "read webhook queue")
}

// ReleaseDeliveries gives back the leases refs names that their owners
// still hold. A probe among them (a delivery whose lease is its hook's
// probe mark: the claim that took it set both to its lease's end) frees
// its hook for the next claim's probe at once, not when the lease would
// have ended.
func (db *DB) ReleaseDeliveries(ctx context.Context, refs []DeliveryRef) error {
	if len(refs) == 0 {
		return nil
	}
	pairs := refPairs(refs)
	err := db.gorm.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`UPDATE hooks SET probe_until_us = 0 WHERE probe_until_us > 0 AND EXISTS (
			SELECT 1 FROM hook_deliveries d WHERE d.hook_id = hooks.id AND (d.id, d.owner) IN ? AND d.lease_us = hooks.probe_until_us)`,
			pairs).Error; err != nil {
			return err
		}
		return tx.Model(&DeliveryRow{}).Where("(id, owner) IN ?", pairs).Updates(map[string]any{"owner": "", "lease_us": 0}).Error
	})
	return translate(err, "release webhook deliveries")
}
