package lethe

// SetTextIndex turns the writing of text postings on or off, so that a
// benchmark can measure their cost in one run. Grains written with it off
// are never found by text.
func (db *DB) SetTextIndex(on bool) { db.search.noText.Store(!on) }

// VectorBytes returns the memory the vector index of memory holds (0 when
// it is not loaded).
func (db *DB) VectorBytes(memory string) int {
	db.search.mu.Lock()
	v := db.search.vecs[memory]
	db.search.mu.Unlock()
	if v == nil {
		return 0
	}
	return v.set.Bytes()
}

// VectorGraph sets the size from which memory's vector index uses a graph
// (see search.Set.SetGraphMin) and waits for the graph, if one is built;
// it reports whether the index has one.
func (db *DB) VectorGraph(memory string, graphMin int) bool {
	db.search.mu.Lock()
	v := db.search.vecs[memory]
	db.search.mu.Unlock()
	if v == nil {
		return false
	}
	v.set.SetGraphMin(graphMin)
	return v.set.WaitGraph()
}
