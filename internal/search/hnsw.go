package search

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// graph is a hierarchical navigable small world graph (Malkov and
// Yashunin, "Efficient and robust approximate nearest neighbor search
// using Hierarchical Navigable Small World graphs", 2016,
// https://arxiv.org/abs/1603.09320) over the slots of a Set's slab of
// normalised vectors: the distance of two vectors is 1 - their dot
// product. It never deletes: a Set keeps dead slots in the graph, as
// waypoints, and leaves them out of what it returns; it rebuilds the graph
// when too many slots are dead (see Set).
//
// A graph is not safe for concurrent use by itself: the Set's lock guards
// insert against search; searches may run at once. insertAll inserts on
// every core at once, as hnswlib does: each slot's links are read and
// written under that slot's lock (never two at a time), the entry point
// under its own.
type graph struct {
	dim    int
	vecs   []float32 // the Set's slab: slot i is vecs[i*dim:(i+1)*dim]
	m, m0  int       // neighbours kept per node above level 0, and at level 0
	efc    int       // candidates considered while inserting
	ml     float64   // level multiplier, 1/ln(m)
	rng    *rand.Rand
	n      int       // slots allocated (their levels drawn): 0 to n-1
	l0     []uint32  // level 0: per slot, a count then m0 neighbours
	d0     []float32 // their distances, at the same places
	upper  [][][]uint32
	entry  uint32
	top    int // the entry point's level
	visits sync.Pool
	locks  []sync.Mutex // by slot, while insertAll runs workers
	epMu   sync.Mutex   // entry and top, while insertAll runs workers
	stop   *atomic.Bool // when set and true, insertAll returns early
}

// HNSW parameters. M = 16 is the paper's and hnswlib's usual value.
// efConstruction 128: on clustered 384-dimension vectors (embedding-like:
// 200 centres) at 50,000, recall@10 at efSearch 96 is 0.997 against 0.937
// with 64, for 1.5 times the build (TestGraphRecallClustered; figures in
// docs/performance.md). efSearch is the candidate list of a query, raised
// to 2k for a larger k.
const (
	hnswM   = 16
	hnswEfC = 128
	// EfSearch is the size of a query's candidate list.
	EfSearch = 96
)

func newGraph(dim int, seed uint64) *graph {
	return &graph{dim: dim, m: hnswM, m0: 2 * hnswM, efc: hnswEfC, ml: 1 / math.Log(hnswM),
		rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

func (g *graph) vec(i uint32) []float32 {
	return g.vecs[int(i)*g.dim : (int(i)+1)*g.dim]
}

func (g *graph) dist(q []float32, i uint32) float32 { return 1 - dot(q, g.vec(i)) }

// neighbours returns slot i's neighbours at level l.
func (g *graph) neighbours(i uint32, l int) []uint32 {
	if l == 0 {
		base := int(i) * (g.m0 + 1)
		return g.l0[base+1 : base+1+int(g.l0[base])]
	}
	return g.upper[i][l-1]
}

// links appends slot i's neighbours at level l to buf, under i's lock
// while workers insert.
func (g *graph) links(buf []uint32, i uint32, l int) []uint32 {
	if g.locks == nil {
		return append(buf[:0], g.neighbours(i, l)...)
	}
	g.locks[i].Lock()
	buf = append(buf[:0], g.neighbours(i, l)...)
	g.locks[i].Unlock()
	return buf
}

func (g *graph) setNeighbours(i uint32, l int, cs []cand) {
	if l == 0 {
		base := int(i) * (g.m0 + 1)
		g.l0[base] = uint32(len(cs))
		for j, c := range cs {
			g.l0[base+1+j], g.d0[base+1+j] = c.i, c.d
		}
		return
	}
	g.upper[i][l-1] = g.upper[i][l-1][:0]
	for _, c := range cs {
		g.upper[i][l-1] = append(g.upper[i][l-1], c.i)
	}
}

func (g *graph) level(i uint32) int { return len(g.upper[i]) }

// visited is a set of slots, cleared in O(1) by a new mark.
type visited struct {
	marks []uint32
	mark  uint32
}

func (g *graph) visitor() *visited {
	v, _ := g.visits.Get().(*visited)
	if v == nil {
		v = &visited{}
	}
	if len(v.marks) < g.n {
		v.marks = make([]uint32, g.n+g.n/4+64)
		v.mark = 0
	}
	v.mark++
	if v.mark == 0 {
		clear(v.marks)
		v.mark = 1
	}
	return v
}

// cand is a slot and its distance to the query.
type cand struct {
	d float32
	i uint32
}

// insert adds slot n (its vector already in vecs) to the graph.
func (g *graph) insert() {
	g.grow(g.n + 1)
	g.insertAt(uint32(g.n - 1))
}

// grow allocates slots up to n-1, drawing their levels.
func (g *graph) grow(n int) {
	g.l0 = slices.Grow(g.l0, (n-g.n)*(g.m0+1))
	g.d0 = slices.Grow(g.d0, (n-g.n)*(g.m0+1))
	for ; g.n < n; g.n++ {
		g.l0 = append(g.l0, make([]uint32, g.m0+1)...)
		g.d0 = append(g.d0, make([]float32, g.m0+1)...)
		lvl := int(-math.Log(1-g.rng.Float64()) * g.ml)
		var up [][]uint32
		for range lvl {
			up = append(up, make([]uint32, 0, g.m))
		}
		g.upper = append(g.upper, up)
	}
}

// insertAll inserts slots g.n to n-1 (their vectors already in vecs), on
// every core: the graph is the same kind of graph as one insert after
// another gives, not the same graph.
func (g *graph) insertAll(n int) {
	if g.n == 0 && n > 0 {
		g.insert() // the first is the entry point
	}
	from := g.n
	workers := min(runtime.GOMAXPROCS(0), (n-from)/64)
	if workers < 2 {
		for g.n < n && !g.stopped() {
			g.insert()
		}
		return
	}
	g.grow(n)
	g.locks = make([]sync.Mutex, n)
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || g.stopped() {
					return
				}
				g.insertAt(uint32(i))
			}
		}()
	}
	wg.Wait()
	g.locks = nil
}

// stopped reports whether the graph's build is to stop (its set closed):
// the graph is then dropped half built.
func (g *graph) stopped() bool { return g.stop != nil && g.stop.Load() }

// entryPoint returns the entry point and its level.
func (g *graph) entryPoint() (uint32, int) {
	if g.locks == nil {
		return g.entry, g.top
	}
	g.epMu.Lock()
	defer g.epMu.Unlock()
	return g.entry, g.top
}

// insertAt links slot i, allocated, into the graph.
func (g *graph) insertAt(i uint32) {
	lvl := g.level(i)
	if i == 0 {
		g.entry, g.top = 0, lvl
		return
	}
	entry, top := g.entryPoint()
	q := g.vec(i)
	ep := cand{g.dist(q, entry), entry}
	for l := top; l > lvl; l-- {
		ep = g.greedy(q, ep, l)
	}
	eps := []cand{ep}
	for l := min(lvl, top); l >= 0; l-- {
		found := g.searchLayer(q, eps, g.efc, l)
		sel := g.selectNeighbours(found, g.m)
		if g.locks != nil {
			g.locks[i].Lock()
		}
		g.setNeighbours(i, l, sel)
		if g.locks != nil {
			g.locks[i].Unlock()
		}
		for _, c := range sel {
			g.link(c.i, cand{c.d, i}, l)
		}
		eps = found
	}
	if lvl > top {
		if g.locks != nil {
			g.epMu.Lock()
			defer g.epMu.Unlock()
		}
		if lvl > g.top {
			g.entry, g.top = i, lvl
		}
	}
}

// link adds c to from's neighbours at level l. At level 0, where a node
// keeps m0, a full list gives up its farthest neighbour if c is nearer
// (their distances are kept beside them); above, where lists are short
// and few, a full list is pruned back to m by the heuristic.
func (g *graph) link(from uint32, c cand, l int) {
	if g.locks != nil {
		g.locks[from].Lock()
		defer g.locks[from].Unlock()
	}
	ns := g.neighbours(from, l)
	if l == 0 {
		base := int(from) * (g.m0 + 1)
		if len(ns) < g.m0 {
			g.l0[base+1+len(ns)], g.d0[base+1+len(ns)] = c.i, c.d
			g.l0[base]++
			return
		}
		far := 0
		ds := g.d0[base+1 : base+1+g.m0]
		for j, d := range ds {
			if d > ds[far] {
				far = j
			}
		}
		if c.d < ds[far] {
			g.l0[base+1+far], ds[far] = c.i, c.d
		}
		return
	}
	if len(ns) < g.m {
		g.upper[from][l-1] = append(g.upper[from][l-1], c.i)
		return
	}
	fv := g.vec(from)
	cs := make([]cand, 0, len(ns)+1)
	cs = append(cs, c)
	for _, n := range ns {
		cs = append(cs, cand{g.dist(fv, n), n})
	}
	slices.SortFunc(cs, cmpCand)
	g.setNeighbours(from, l, g.selectNeighbours(cs, g.m))
}

func cmpCand(a, b cand) int {
	switch {
	case a.d < b.d:
		return -1
	case a.d > b.d:
		return 1
	}
	return int(a.i) - int(b.i)
}

// selectNeighbours picks at most max of cs (sorted nearest first) by the
// paper's heuristic (algorithm 4): a candidate is kept if it is nearer the
// new node than any already kept, so that the links spread in every
// direction; the rest fill what is left.
func (g *graph) selectNeighbours(cs []cand, max int) []cand {
	if len(cs) <= max {
		return cs
	}
	sel := make([]cand, 0, max)
	var pruned []cand
	for _, c := range cs {
		if len(sel) == max {
			break
		}
		good := true
		cv := g.vec(c.i)
		for _, s := range sel {
			if g.dist(cv, s.i) < c.d {
				good = false
				break
			}
		}
		if good {
			sel = append(sel, c)
		} else {
			pruned = append(pruned, c)
		}
	}
	for _, c := range pruned {
		if len(sel) == max {
			break
		}
		sel = append(sel, c)
	}
	return sel
}

// greedy walks level l from ep to the nearest node of q it can reach.
func (g *graph) greedy(q []float32, ep cand, l int) cand {
	var buf []uint32
	for changed := true; changed; {
		changed = false
		buf = g.links(buf, ep.i, l)
		for _, n := range buf {
			if d := g.dist(q, n); d < ep.d {
				ep, changed = cand{d, n}, true
			}
		}
	}
	return ep
}

// searchLayer returns the ef nearest nodes of q found on level l from
// eps, nearest first.
func (g *graph) searchLayer(q []float32, eps []cand, ef, l int) []cand {
	v := g.visitor()
	defer g.visits.Put(v)
	near := candHeap{c: make([]cand, 0, 4*ef)} // nearest first: to explore
	far := candHeap{c: make([]cand, 0, ef+1), max: true}
	for _, e := range eps {
		v.marks[e.i] = v.mark
		near.push(e)
		far.push(e)
		if len(far.c) > ef {
			far.pop()
		}
	}
	buf := make([]uint32, 0, g.m0)
	for len(near.c) > 0 {
		c := near.pop()
		if len(far.c) >= ef && c.d > far.c[0].d {
			break
		}
		buf = g.links(buf, c.i, l)
		for _, n := range buf {
			if v.marks[n] == v.mark {
				continue
			}
			v.marks[n] = v.mark
			d := g.dist(q, n)
			if len(far.c) < ef || d < far.c[0].d {
				near.push(cand{d, n})
				far.push(cand{d, n})
				if len(far.c) > ef {
					far.pop()
				}
			}
		}
	}
	out := far.c
	slices.SortFunc(out, cmpCand)
	return out
}

// search returns the ef nearest slots of q it finds, nearest first.
func (g *graph) search(q []float32, ef int) []cand {
	if g.n == 0 {
		return nil
	}
	ep := cand{g.dist(q, g.entry), g.entry}
	for l := g.top; l > 0; l-- {
		ep = g.greedy(q, ep, l)
	}
	return g.searchLayer(q, []cand{ep}, ef, 0)
}

// bytes returns the memory the links hold.
func (g *graph) bytes() int {
	b := 4*cap(g.l0) + 4*cap(g.d0) + 24*cap(g.upper)
	for _, up := range g.upper {
		for _, ns := range up {
			b += 24 + 4*cap(ns)
		}
	}
	return b
}

// candHeap is a binary heap of candidates: the nearest on top, or with
// max the farthest.
type candHeap struct {
	c   []cand
	max bool
}

func (h *candHeap) less(a, b cand) bool {
	if h.max {
		return a.d > b.d
	}
	return a.d < b.d
}

func (h *candHeap) push(x cand) {
	h.c = append(h.c, x)
	i := len(h.c) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(h.c[i], h.c[p]) {
			break
		}
		h.c[i], h.c[p] = h.c[p], h.c[i]
		i = p
	}
}

func (h *candHeap) pop() cand {
	top := h.c[0]
	last := len(h.c) - 1
	h.c[0] = h.c[last]
	h.c = h.c[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && h.less(h.c[l], h.c[m]) {
			m = l
		}
		if r < last && h.less(h.c[r], h.c[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.c[i], h.c[m] = h.c[m], h.c[i]
		i = m
	}
	return top
}
