package lethe

import (
	"time"

	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/store"
)

// SetTextIndex turns the writing of text postings on or off, so that a
// benchmark can measure their cost in one run. Grains written with it off
// are never found by text.
func (db *DB) SetTextIndex(on bool) {
	if on {
		db.sealer.Index = db.recall.Indexer
		return
	}
	db.sealer.Index = func() func(*store.GrainRow, *keys.Chain, *Grain) {
		return func(row *store.GrainRow, _ *keys.Chain, g *Grain) { row.Dim = len(g.Embedding) }
	}
}

// VectorBytes returns the memory the vector index of memory holds (0 when
// it is not loaded).
func (db *DB) VectorBytes(memory string) int {
	if s := db.recall.Vectors(memory); s != nil {
		return s.Bytes()
	}
	return 0
}

// VectorGraph sets the size from which memory's vector index uses a graph
// (see search.Set.SetGraphMin) and waits for the graph, if one is built;
// it reports whether the index has one.
func (db *DB) VectorGraph(memory string, graphMin int) bool {
	s := db.recall.Vectors(memory)
	if s == nil {
		return false
	}
	s.SetGraphMin(graphMin)
	return s.WaitGraph()
}

// SlowIndex makes the computing of each grain's search fields take d
// longer, so that a test would see a store that wrote the text index
// before it had them (see store.Pending).
func (db *DB) SlowIndex(d time.Duration) {
	next := db.sealer.Index
	db.sealer.Index = func() func(*store.GrainRow, *keys.Chain, *Grain) {
		index := next()
		return func(row *store.GrainRow, c *keys.Chain, g *Grain) {
			time.Sleep(d)
			index(row, c, g)
		}
	}
}
