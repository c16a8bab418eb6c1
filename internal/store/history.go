package store

import (
	"context"

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
	var out []MemoryEvent
	var after int64
	for {
		var rows []EventRow
		err := db.gorm.WithContext(ctx).Where("memory = ? AND type IN ? AND id > ?", memory, types, after).
			Order("id").Limit(pageSize).Find(&rows).Error
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

// Version is a stored grain row as a version-chain export sees it: the row
// (nil when no row has the hash), whether a key of its chain was destroyed,
// and the fingerprints of its chain's keys.
type Version struct {
	Row             *GrainRow
	Erased          bool
	KeyFingerprints []string
}

// Versions returns, for each of hashes that has a row in memory, its
// Version.
func (db *DB) Versions(ctx context.Context, memory string, hashes []string) (map[string]Version, error) {
	out := map[string]Version{}
	tx := db.gorm.WithContext(ctx)
	for _, h := range hashes {
		var rows []GrainRow
		if err := tx.Select(withEpoch, memory).Where("hash = ? AND memory = ?", h, memory).Limit(1).Find(&rows).Error; err != nil {
			return nil, translate(err, "read grain")
		}
		if len(rows) == 0 {
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
			v.Erased = v.Erased || k.DestroyedUS != 0
		}
		out[h] = v
	}
	return out, nil
}
