package lethe

import (
	"context"
	"errors"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
)

// TlogTile returns a [c2sp.org/tlog-tiles] resource of the audit log: the
// tile or entry bundle at path (relative to the log's prefix, such as
// "tile/0/x001/067.p/3" or "tile/entries/000"), within the latest signed
// checkpoint. A malformed path fails with code invalid_argument; a tile the
// latest checkpoint does not contain entirely, with code not_found. full
// reports a full (256-wide) tile, whose contents never change.
//
// [c2sp.org/tlog-tiles]: https://c2sp.org/tlog-tiles
func (db *DB) TlogTile(ctx context.Context, path string) (data []byte, full bool, err error) {
	t, err := audit.ParseTilePath(path)
	if err != nil {
		return nil, false, grains.Wrap(grains.CodeInvalidArgument, "not a tlog-tiles path", err)
	}
	row, err := db.store.LatestCheckpoint(ctx)
	if err != nil {
		return nil, false, err
	}
	var size uint64
	if row != nil {
		size = uint64(row.Size)
	}
	if t.Entries {
		data, err = audit.ReadEntryBundle(ctx, db.log, t, size)
	} else {
		data, err = audit.ReadTile(ctx, db.log, t, size)
	}
	if errors.Is(err, audit.ErrTileNotFound) {
		return nil, false, grains.Wrap(grains.CodeNotFound, "the latest checkpoint does not contain this tile", err)
	}
	if err != nil {
		return nil, false, audit.DomainError(err)
	}
	return data, t.Width == audit.TileWidth, nil
}

// WitnessConfig names a witness of the audit log ([c2sp.org/tlog-witness]):
// lethe submits each new checkpoint to URL + "/add-checkpoint" with a
// consistency proof, and keeps the cosignature (c2sp.org/tlog-cosignature)
// that verifies under Key in the checkpoint it serves and puts in proofs.
//
// [c2sp.org/tlog-witness]: https://c2sp.org/tlog-witness
type WitnessConfig struct {
	// URL is the witness's submission prefix, such as
	// "https://witness.example.com".
	URL string `json:"url" yaml:"url"`
	// Key is its verifier key, "<name>+<hash>+<base64 of 0x04 || key>".
	Key string `json:"key" yaml:"key"`
	// Timeout bounds its answer (default 5s); the longest Timeout of the
	// witnesses configured applies to each.
	Timeout time.Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
}
