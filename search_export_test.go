package lethe

import (
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/store"
)

// SetTextIndex turns the writing of text postings on or off, so that a
// benchmark can measure their cost in one run. Grains written with it off
// are never found by text.
func (db *DB) SetTextIndex(on bool) {
	if on {
		db.sealer.Index = db.recall.Index
		return
	}
	db.sealer.Index = func(row *store.GrainRow, _ *keys.Chain, g *Grain) { row.Dim = len(g.Embedding) }
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
