package store

import (
	"context"
	"encoding/hex"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
)

// MemoryEvent is a committed audit event of a memory: its outbox order,
// its leaf, and its leaf index once sequenced.
type MemoryEvent struct {
	Order     int64 // the outbox row id: commit order
	EventID   string
	Leaf      []byte
	Seq       int64
	Sequenced bool
}

// MemoryEvents returns the committed audit events of memory whose type is
// one of types, in commit order, reading pageSize rows at a time.
func (db *DB) MemoryEvents(ctx context.Context, memory string, types []string) ([]MemoryEvent, error) {
	const pageSize = 2000
	if len(types) == 0 {
		return nil, nil
	}
	var out []MemoryEvent
	var after int64
	q := db.rebind(memoryEventsQuery(len(types)))
	for {
		var rows []EventRow
		args := append(append([]any{memory}, anysOf(types)...), after, pageSize)
		err := db.gorm.WithContext(ctx).Raw(q, args...).Scan(&rows).Error
		if err != nil {
			return nil, translate(err, "read audit events")
		}
		for _, r := range rows {
			e := MemoryEvent{Order: r.ID, EventID: r.EventID, Leaf: r.Leaf}
			if r.Seq != nil {
				e.Seq, e.Sequenced = *r.Seq, true
			}
			out = append(out, e)
			after = r.ID
		}
		if len(rows) < pageSize {
			return out, nil
		}
	}
}

// memoryEventsQuery is MemoryEvents' page: a memory's events of ntypes
// types (at least one) after an id, in id order, up to a limit. It reads
// them through idx_audit_events_memory (memory, id) from the page's start
// on: the memory's events, not every memory's
// (TestMemoryEventsReadTheirMemoryOnly).
func memoryEventsQuery(ntypes int) string {
	return "SELECT * FROM audit_events WHERE memory = ? AND type IN (?" + strings.Repeat(", ?", ntypes-1) +
		") AND id > ? ORDER BY id LIMIT ?"
}

// Version is a grain as a version-chain export sees it: its row (nil when
// no row has the hash), whether a key of its chain was destroyed, the
// fingerprints of its chain's keys, and those of the destroyed ones. A
// version whose row the cleaner deleted after an erasure has no row, is
// Erased, and names the erasure's key in Destroyed (see ErasedGrainRow).
type Version struct {
	Row             *GrainRow
	Erased          bool
	KeyFingerprints []string
	Destroyed       []string
}

// Versions returns, for each of hashes that has a row in memory or was
// deleted by the cleaner after an erasure, its Version.
func (db *DB) Versions(ctx context.Context, memory string, hashes []string) (map[string]Version, error) {
	out := map[string]Version{}
	tx := db.gorm.WithContext(ctx)
	var gone []string
	for _, h := range hashes {
		var rows []GrainRow
		if err := tx.Select(withEpoch, memory).Where("hash = ? AND memory = ?", h, memory).Limit(1).Find(&rows).Error; err != nil {
			return nil, translate(err, "read grain")
		}
		if len(rows) == 0 {
			gone = append(gone, h)
			continue
		}
		ids, err := keys.ParseChainID(rows[0].KeyChain)
		if err != nil {
			return nil, err
		}
		var ks []KeyRow
		if err := tx.Select("id", "fingerprint", "destroyed_us").Where("id IN ?", ids).Find(&ks).Error; err != nil {
			return nil, translate(err, "read data keys")
		}
		v := Version{Row: &rows[0], Erased: len(ks) != len(ids)}
		for _, k := range ks {
			v.KeyFingerprints = append(v.KeyFingerprints, k.Fingerprint)
			if k.DestroyedUS != 0 {
				v.Erased = true
				v.Destroyed = append(v.Destroyed, k.Fingerprint)
			}
		}
		out[h] = v
	}
	for i := 0; i < len(gone); i += chunk {
		var links []ErasedGrainRow
		if err := tx.Where("memory = ? AND hash IN ?", memory, gone[i:min(i+chunk, len(gone))]).Find(&links).Error; err != nil {
			return nil, translate(err, "read erased grains")
		}
		for _, l := range links {
			out[l.Hash] = Version{Erased: true, KeyFingerprints: []string{l.Fingerprint}, Destroyed: []string{l.Fingerprint}}
		}
	}
	return out, nil
}

// ErasedGrainRow links a grain row the cleaner deleted after a
// crypto-erasure to the destroyed key that made it unreadable: the
// fingerprint of the erasure's key, which its key.erase event names. The
// cleaner writes it in the transaction that deletes the row, so an erase
// stays O(1) and a version-chain export still finds the erasure event of a
// version whose row is gone. It holds a grain hash and a key fingerprint,
// nothing personal, and is kept for as long as the audit log is: a later
// erase of the scope or the memory adds links, it never removes them.
type ErasedGrainRow struct {
	Memory      string `gorm:"primaryKey;size:64"`
	Hash        string `gorm:"primaryKey;size:64"`
	Fingerprint string `gorm:"size:64;not null"`
}

// TableName is the erased grain link table.
func (ErasedGrainRow) TableName() string { return "erased_grains" }

// BulkHashesRow keeps the grain hashes of a bulk audit event, whose leaf
// carries their count and digest instead (audit.Event.Hashes): each hash
// as 32 bytes, in the order given. Nothing personal: grain hashes only.
type BulkHashesRow struct {
	EventID string `gorm:"primaryKey;size:32"`
	Memory  string `gorm:"size:64;not null;index:idx_bulk_hashes_memory"`
	Hashes  []byte `gorm:"not null"`
}

// TableName is the bulk event hash table.
func (BulkHashesRow) TableName() string { return "bulk_hashes" }

// packHashes turns hex grain hashes into 32 bytes each.
func packHashes(hashes []string) ([]byte, error) {
	out := make([]byte, 0, 32*len(hashes))
	for _, h := range hashes {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			return nil, grains.Errorf(grains.CodeInternal, "a bulk event lists a malformed grain hash")
		}
		out = append(out, b...)
	}
	return out, nil
}

// BulkHashes returns the hash lists of memory's bulk audit events, by
// event id.
func (db *DB) BulkHashes(ctx context.Context, memory string) (map[string][]string, error) {
	var rows []BulkHashesRow
	if err := db.gorm.WithContext(ctx).Where("memory = ?", memory).Find(&rows).Error; err != nil {
		return nil, translate(err, "read bulk event hashes")
	}
	out := make(map[string][]string, len(rows))
	for _, r := range rows {
		if len(r.Hashes)%32 != 0 {
			return nil, grains.Errorf(grains.CodeInternal, "bulk event %s: a stored hash list is truncated", r.EventID)
		}
		hs := make([]string, 0, len(r.Hashes)/32)
		for i := 0; i < len(r.Hashes); i += 32 {
			hs = append(hs, hex.EncodeToString(r.Hashes[i:i+32]))
		}
		out[r.EventID] = hs
	}
	return out, nil
}

// linkErased records, in the cleaner's transaction tx, that the rows of
// memory with hashes were deleted as unreadable after the erasure of the
// key keyID.
func linkErased(tx *gorm.DB, memory string, keyID int64, hashes []string) error {
	if len(hashes) == 0 {
		return nil
	}
	var fp []string
	if err := tx.Model(&KeyRow{}).Where("id = ?", keyID).Pluck("fingerprint", &fp).Error; err != nil {
		return translate(err, "read erased key")
	}
	if len(fp) == 0 {
		return grains.Errorf(grains.CodeInternal, "the erased key %d has no row", keyID)
	}
	rows := make([]ErasedGrainRow, 0, min(len(hashes), chunk))
	for i := 0; i < len(hashes); i += chunk {
		rows = rows[:0]
		for _, h := range hashes[i:min(i+chunk, len(hashes))] {
			rows = append(rows, ErasedGrainRow{Memory: memory, Hash: h, Fingerprint: fp[0]})
		}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error; err != nil {
			return translate(err, "link erased grains")
		}
	}
	return nil
}
