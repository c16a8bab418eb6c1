package search

import (
	"container/heap"
	"math"
	"slices"
	"sync"
)

// Set is an in-memory set of vectors by grain id, searched exactly: a
// query compares itself with every vector. Vectors are stored normalised,
// so that cosine similarity is a dot product. It is safe for concurrent
// use.
//
// It holds no personal data beyond the vectors themselves, in process
// memory only; the caller re-reads every grain it proposes (see package
// recall).
type Set struct {
	mu   sync.RWMutex
	dim  int
	ids  []int64
	vecs []float32 // len(ids)*dim
	pos  map[int64]int
}

// Hit is a vector found by Nearest: its grain id and its cosine similarity
// to the query.
type Hit struct {
	ID  int64
	Sim float64
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{pos: map[int64]int{}} }

// Add adds (or replaces) id's vector. A vector whose dimension differs from
// the set's first, or of zero norm, is ignored.
func (s *Set) Add(id int64, v []float32) {
	n := norm(v)
	if n == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dim == 0 {
		s.dim = len(v)
	}
	if len(v) != s.dim {
		return
	}
	i, ok := s.pos[id]
	if !ok {
		i = len(s.ids)
		s.ids = append(s.ids, id)
		s.vecs = append(s.vecs, make([]float32, s.dim)...)
		s.pos[id] = i
	}
	dst := s.vecs[i*s.dim : (i+1)*s.dim]
	for j, x := range v {
		dst[j] = float32(float64(x) / n)
	}
}

// Remove removes id's vector, if any.
func (s *Set) Remove(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(id)
}

func (s *Set) remove(id int64) {
	i, ok := s.pos[id]
	if !ok {
		return
	}
	last := len(s.ids) - 1
	if i != last {
		s.ids[i] = s.ids[last]
		s.pos[s.ids[i]] = i
		copy(s.vecs[i*s.dim:(i+1)*s.dim], s.vecs[last*s.dim:])
	}
	// Zero the vector's old place before giving it up.
	clear(s.vecs[last*s.dim:])
	s.ids, s.vecs = s.ids[:last], s.vecs[:last*s.dim]
	delete(s.pos, id)
}

// Keep removes every vector whose id is not in ids.
func (s *Set) Keep(ids []int64) {
	keep := make(map[int64]bool, len(ids))
	for _, id := range ids {
		keep[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range slices.Clone(s.ids) {
		if !keep[id] {
			s.remove(id)
		}
	}
}

// Has reports whether id has a vector in the set.
func (s *Set) Has(id int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.pos[id]
	return ok
}

// Len returns the number of vectors.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.ids)
}

// Bytes returns the memory the vectors and their ids hold, without the
// id map's overhead.
func (s *Set) Bytes() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return 4*cap(s.vecs) + 8*cap(s.ids)
}

// Nearest returns the k vectors most similar to q, most similar first
// (ties: the higher id first). A q of another dimension finds nothing.
func (s *Set) Nearest(q []float32, k int) []Hit {
	n := norm(q)
	if n == 0 || k <= 0 {
		return nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(q) != s.dim {
		return nil
	}
	qn := make([]float32, len(q))
	for i, x := range q {
		qn[i] = float32(float64(x) / n)
	}
	h := make(hits, 0, k+1)
	for i, id := range s.ids {
		sim := float64(dot(qn, s.vecs[i*s.dim:(i+1)*s.dim]))
		if len(h) == k && !better(Hit{id, sim}, h[0]) {
			continue
		}
		heap.Push(&h, Hit{id, sim})
		if len(h) > k {
			heap.Pop(&h)
		}
	}
	slices.SortFunc(h, func(a, b Hit) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	return h
}

func better(a, b Hit) bool {
	if a.Sim != b.Sim {
		return a.Sim > b.Sim
	}
	return a.ID > b.ID
}

// hits is a min-heap: the worst hit kept is at the top.
type hits []Hit

func (h hits) Len() int           { return len(h) }
func (h hits) Less(i, j int) bool { return better(h[j], h[i]) }
func (h hits) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hits) Push(x any)        { *h = append(*h, x.(Hit)) }
func (h *hits) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// dot returns the dot product of a and b (of equal length), four lanes at
// a time.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

// Cosine returns the cosine similarity of a and b, or 0 when their
// dimensions differ or either is zero.
func Cosine(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	na, nb := norm(a), norm(b)
	if na == 0 || nb == 0 {
		return 0
	}
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s / (na * nb)
}
