package search

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas/blas32"
)

// GraphMin is the number of live vectors from which a Set builds an HNSW
// graph. Below it, exact search is as fast (a few milliseconds at most)
// and exact.
const GraphMin = 10000

// Set is an in-memory set of vectors by grain id. Vectors are stored
// normalised, one after another in one slab, so that cosine similarity is
// a dot product. Below GraphMin live vectors a query compares itself with
// every vector (exact search); from GraphMin on, the Set builds an HNSW
// graph in the background (exact search answers meanwhile) and answers
// from it, approximately, unless the query asks for a quarter of the set
// or more, which exact search answers better.
//
// # Forgetting
//
// A removed vector is zeroed in the slab at once (while a graph is being
// built from the slab, as soon as the build ends) and its slot marked
// dead: a dead slot is never returned, by exact search or the graph. The
// graph keeps dead slots as waypoints; when they are more than a fifth of
// the slab, the Set compacts the slab and rebuilds the graph. A graph
// query that finds fewer than k live vectors is answered exactly.
//
// It is safe for concurrent use. It holds no personal data beyond the
// vectors themselves, in process memory only; the caller re-reads every
// grain it proposes (see package recall).
type Set struct {
	mu   sync.RWMutex
	dim  int
	ids  []int64   // by slot
	vecs []float32 // slot i: vecs[i*dim:(i+1)*dim], normalised (zero when dead)
	dead []bool    // by slot
	pos  map[int64]uint32
	// g, when not nil, holds every slot. gen counts compactions, which
	// renumber the slots; a build started before one is dropped.
	g        *graph
	gen      uint64
	building bool
	buildGen uint64     // the gen of the slab being built from
	buildN   uint32     // and its slots read by the build
	built    *sync.Cond // broadcast when a build ends
	unzeroed []uint32   // dead slots of that slab, to zero when the build ends

	graphMin int
	ef       int // a graph query's candidate list: EfSearch unless a test sets it
	seed     uint64
	inline   bool // build in the caller, under the lock (tests)
	// closed stops a build in progress and keeps another from starting.
	closed atomic.Bool
	bg     sync.WaitGroup // the build's goroutine
}

// Hit is a vector found by Nearest: its grain id and its cosine similarity
// to the query.
type Hit struct {
	ID  int64
	Sim float64
}

// NewSet returns an empty set.
func NewSet() *Set { return newSet(GraphMin, false) }

func newSet(graphMin int, inline bool) *Set {
	s := &Set{pos: map[int64]uint32{}, graphMin: graphMin, inline: inline, seed: 1, ef: EfSearch}
	s.built = sync.NewCond(&s.mu)
	return s
}

// Reserve makes room for n more vectors of dim dimensions, so that a
// load adding many does not copy the slab as it grows.
func (s *Set) Reserve(n, dim int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dim != 0 {
		dim = s.dim
	}
	s.ids = slices.Grow(s.ids, n)
	s.dead = slices.Grow(s.dead, n)
	s.vecs = slices.Grow(s.vecs, n*dim)
}

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
	if i, ok := s.pos[id]; ok {
		same := true
		for j, x := range s.vec(i) {
			if x != float32(float64(v[j])/n) {
				same = false
				break
			}
		}
		if same {
			return
		}
		s.kill(i)
	}
	i := uint32(len(s.ids))
	s.ids = append(s.ids, id)
	s.dead = append(s.dead, false)
	for _, x := range v {
		s.vecs = append(s.vecs, float32(float64(x)/n))
	}
	s.pos[id] = i
	if s.g != nil {
		s.g.vecs = s.vecs
		s.g.insert()
	}
	s.compact()
	s.build()
}

func (s *Set) vec(i uint32) []float32 {
	return s.vecs[int(i)*s.dim : (int(i)+1)*s.dim]
}

// kill marks slot i dead and zeroes its vector (after the build in
// progress, which may be reading it).
func (s *Set) kill(i uint32) {
	delete(s.pos, s.ids[i])
	s.dead[i] = true
	if s.readByBuild() && i < s.buildN {
		s.unzeroed = append(s.unzeroed, i)
	} else {
		clear(s.vec(i))
	}
}

// readByBuild reports whether a build in progress reads the slab.
func (s *Set) readByBuild() bool { return s.building && s.buildGen == s.gen }

// compact renumbers the live slots into a new slab when more than a fifth
// of the slots are dead (with a graph: and at least 64), dropping the
// graph, which build then makes again.
func (s *Set) compact() {
	ndead := len(s.ids) - len(s.pos)
	if ndead == 0 || 5*ndead <= len(s.ids) || (s.g != nil && ndead < 64) {
		return
	}
	ids := make([]int64, 0, len(s.pos))
	vecs := make([]float32, 0, len(s.pos)*s.dim)
	for i, id := range s.ids {
		if !s.dead[i] {
			s.pos[id] = uint32(len(ids))
			ids = append(ids, id)
			vecs = append(vecs, s.vec(uint32(i))...)
		}
	}
	if !s.readByBuild() {
		clear(s.vecs) // else the build zeroes its dead slots when it ends
	}
	s.ids, s.vecs, s.dead = ids, vecs, make([]bool, len(ids))
	s.g = nil
	s.gen++
}

// build starts building the graph if the set needs one and none is being
// built.
func (s *Set) build() {
	if s.g != nil || s.building || len(s.pos) < s.graphMin || s.closed.Load() {
		return
	}
	g := newGraph(s.dim, s.seed)
	g.stop = &s.closed
	if s.inline {
		g.vecs = s.vecs
		g.insertAll(len(s.ids))
		s.g = g
		return
	}
	gen, n := s.gen, len(s.ids)
	s.building, s.buildGen, s.buildN = true, gen, uint32(n)
	g.vecs = s.vecs[:n*s.dim]
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		// Insert without the lock, on every core; the vectors added
		// meanwhile too, a slab snapshot at a time, until few enough are left to insert
		// under the lock without holding queries up.
		for {
			g.insertAll(n)
			s.mu.Lock()
			if gen != s.gen || len(s.ids)-n <= catchUp || s.closed.Load() {
				break
			}
			n = len(s.ids)
			g.vecs, s.buildN = s.vecs[:n*s.dim], uint32(n)
			s.mu.Unlock()
		}
		defer s.mu.Unlock()
		s.building = false
		for _, i := range s.unzeroed {
			clear(g.vecs[int(i)*s.dim : (int(i)+1)*s.dim])
			if gen == s.gen {
				clear(s.vec(i)) // the slab may have moved since
			}
		}
		s.unzeroed = nil
		if gen == s.gen && len(s.pos) >= s.graphMin && !s.closed.Load() {
			g.vecs = s.vecs
			for g.n < len(s.ids) {
				g.insert() // added while building
			}
			s.g = g
		}
		s.built.Broadcast()
		s.compact()
		s.build()
	}()
}

// catchUp is the most vectors a finished build inserts under the lock
// (those added while it ran); with more, it takes another turn without.
const catchUp = 256

// Close stops a graph build in progress (its partial graph is dropped),
// waits for it to end, and keeps the set from starting another; queries
// are then answered by exact search. For the DB's Close: no goroutine of
// the set runs once it returns.
func (s *Set) Close() {
	s.closed.Store(true)
	s.bg.Wait()
}

// WaitGraph waits until no graph is being built, and reports whether the
// set has one.
func (s *Set) WaitGraph() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.building {
		s.built.Wait()
	}
	return s.g != nil
}

// SetGraphMin sets the number of live vectors from which the set builds
// and uses a graph (GraphMin unless set), dropping a graph it no longer
// needs (after any build in progress) and starting a build it now
// does: for benchmarks that compare
// exact search with the graph in one run.
func (s *Set) SetGraphMin(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.graphMin = n
	for s.building {
		s.built.Wait()
	}
	if len(s.pos) < n {
		s.g = nil
	}
	s.build()
}

// Remove removes id's vector, if any.
func (s *Set) Remove(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.pos[id]; ok {
		s.kill(i)
		s.compact()
		s.build()
	}
}

// Keep removes every vector whose id is not in ids.
func (s *Set) Keep(ids []int64) {
	keep := make(map[int64]bool, len(ids))
	for _, id := range ids {
		keep[id] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, i := range s.pos {
		if !keep[id] {
			s.kill(i)
		}
	}
	s.compact()
	s.build()
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
	return len(s.pos)
}

// Bytes returns the memory the vectors, their ids and the graph's links
// hold, without the id map's overhead.
func (s *Set) Bytes() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b := 4*cap(s.vecs) + 8*cap(s.ids) + cap(s.dead)
	if s.g != nil {
		b += s.g.bytes()
	}
	return b
}

// Nearest returns the k vectors most similar to q, most similar first
// (ties: the higher id first). A q of another dimension finds nothing.
// With a graph and k below a quarter of the set, the answer is
// approximate: the graph's, when it finds k live vectors.
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
	if s.g != nil && 4*k < len(s.pos) {
		if h := s.approx(qn, k); h != nil {
			return h
		}
	}
	return s.exact(qn, k)
}

// approx returns the k nearest live vectors the graph finds, or nil if
// it finds fewer.
func (s *Set) approx(q []float32, k int) []Hit {
	cs := s.g.search(q, max(s.ef, 2*k))
	h := make([]Hit, 0, k)
	for _, c := range cs {
		if !s.dead[c.i] {
			h = append(h, Hit{s.ids[c.i], float64(dot(q, s.vec(c.i)))})
		}
	}
	if len(h) < k {
		return nil
	}
	sortHits(h)
	return h[:k]
}

// exact compares q with every live vector.
func (s *Set) exact(q []float32, k int) []Hit {
	h := make(hits, 0, k+1)
	dim := s.dim
	for i, id := range s.ids {
		if s.dead[i] {
			continue
		}
		sim := float64(dot(q, s.vecs[i*dim:(i+1)*dim]))
		if len(h) == k && !better(Hit{id, sim}, h[0]) {
			continue
		}
		h.push(Hit{id, sim})
		if len(h) > k {
			h.pop()
		}
	}
	sortHits(h)
	return h
}

func sortHits(h []Hit) {
	slices.SortFunc(h, func(a, b Hit) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
}

func better(a, b Hit) bool {
	if a.Sim != b.Sim {
		return a.Sim > b.Sim
	}
	return a.ID > b.ID
}

// hits is a min-heap: the worst hit kept is at the top.
type hits []Hit

func (h *hits) push(x Hit) {
	*h = append(*h, x)
	c := *h
	for i := len(c) - 1; i > 0; {
		p := (i - 1) / 2
		if !better(c[p], c[i]) {
			break
		}
		c[i], c[p] = c[p], c[i]
		i = p
	}
}

func (h *hits) pop() {
	c := *h
	last := len(c) - 1
	c[0] = c[last]
	c = c[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && better(c[m], c[l]) {
			m = l
		}
		if r < last && better(c[m], c[r]) {
			m = r
		}
		if m == i {
			break
		}
		c[i], c[m] = c[m], c[i]
		i = m
	}
	*h = c
}

// dot returns the dot product of a and b (of equal length), with gonum's
// SIMD kernel (SSE on amd64; unrolled Go elsewhere): about four times as
// fast as a Go loop, which the compiler does not vectorise.
func dot(a, b []float32) float32 {
	return blas32.Dot(blas32.Vector{N: len(a), Inc: 1, Data: a}, blas32.Vector{N: len(a), Inc: 1, Data: b[:len(a)]})
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
