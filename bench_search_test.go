package lethe_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/search"
)

// searchSizes are the store sizes the search benchmarks fill; -search.sizes
// changes them (the 100,000 case takes minutes to fill).
var searchSizes = flag.String("search.sizes", "1000,10000,100000", "store sizes of the search benchmarks")

// costSizes are the fills of BenchmarkSearchTextWriteCost; -search.cost-sizes
// changes them (multiples of 10,000).
var costSizes = flag.String("search.cost-sizes", "20000,100000", "fills of the write-cost benchmark")

func sizes(b *testing.B) []int { return parseSizes(b, "search.sizes", *searchSizes) }

func parseSizes(b *testing.B, name, list string) []int {
	var out []int
	for _, f := range strings.Split(list, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil {
			b.Fatalf("-%s: %v", name, err)
		}
		out = append(out, n)
	}
	return out
}

// vocabulary is the benchmark corpus's words: 20,000 made-up words whose
// use follows Zipf's law (s = 1.1), as words in text do.
var vocabulary = func() []string {
	out := make([]string, 20000)
	for i := range out {
		out[i] = fmt.Sprintf("w%dx", i) // digits and a letter: no stop word, nothing for the stemmer
	}
	return out
}()

// searchCorpus writes n grains of 12 Zipf-distributed words each (and,
// with dim > 0, a random embedding of dim dimensions) in batches of 1,000,
// and returns the time the batches took.
func searchCorpus(b *testing.B, db *lethe.DB, n, dim int, seed uint64) time.Duration {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(seed, 1))
	z := rand.NewZipf(r, 1.1, 1, uint64(len(vocabulary)-1))
	var took time.Duration
	batch := make([]lethe.Grain, 0, 1000)
	for i := range n {
		words := make([]string, 12)
		for j := range words {
			words[j] = vocabulary[z.Uint64()]
		}
		g := lethe.Grain{Type: "fact", Subject: fmt.Sprintf("subject-%d", i%1000), Content: strings.Join(words, " "),
			Scope: "acme/prod", Importance: 0.5}
		if dim > 0 {
			g.Embedding = randomVector(r, dim)
		}
		batch = append(batch, g)
		if len(batch) == cap(batch) || i == n-1 {
			start := time.Now()
			if _, err := db.AddBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			took += time.Since(start)
			batch = batch[:0]
		}
	}
	return took
}

func randomVector(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// p50 returns the median of ds in milliseconds.
func p50(ds []time.Duration) float64 { return pctMS(ds, 50) }

// pctMS returns the pct-th percentile of ds in milliseconds (ds sorted in
// place).
func pctMS(ds []time.Duration, pct int) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)*pct/100]) / float64(time.Millisecond)
}

// BenchmarkSearchText times text queries of two words drawn from ranks 50
// to 2,000 of the vocabulary (each in roughly 0.1% to 3% of the grains),
// limit 10, on SQLite, at each size: on the store as filled (warm), and
// on a fresh instance over the same files (restarted; its first query is
// reported apart, as first-ms). common-word is one query with the most
// frequent word but one (in about half the grains): the worst case of reading
// every posting.
func BenchmarkSearchText(b *testing.B) {
	for _, n := range sizes(b) {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			cfg := lethe.Config{DataDir: b.TempDir()}
			db := openBench(b, cfg)
			searchCorpus(b, db, n, 0, 1)
			r := rand.New(rand.NewPCG(2, 2))
			query := func(db *lethe.DB, text string) time.Duration {
				start := time.Now()
				if _, err := db.Recall(context.Background(), lethe.Query{Text: text, Limit: 10}); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			words := func() string {
				return vocabulary[50+r.IntN(1950)] + " " + vocabulary[50+r.IntN(1950)]
			}
			var warm []time.Duration
			for b.Loop() {
				warm = append(warm, query(db, words()))
			}
			common := query(db, vocabulary[1])
			db.Close()
			again := openBench(b, cfg)
			first := query(again, words())
			var restarted []time.Duration
			for range 200 {
				restarted = append(restarted, query(again, words()))
			}
			b.ReportMetric(p50(warm), "p50-ms")
			b.ReportMetric(p50(restarted), "restarted-p50-ms")
			b.ReportMetric(float64(first)/float64(time.Millisecond), "first-ms")
			b.ReportMetric(float64(common)/float64(time.Millisecond), "common-word-ms")
		})
	}
}

// BenchmarkSearchTextWriteCost fills two SQLite stores with the same
// corpus in batches of 1,000, one with the text index and one without,
// 5,000 grains to one then to the other, up to 20,000 and 100,000 grains
// (-search.cost-sizes);
// it reports both throughputs and the cost of the index over the whole
// fill (cost-%) and over its last 10,000 grains (end-cost-%: the cost at
// that size).
func BenchmarkSearchTextWriteCost(b *testing.B) {
	for _, n := range parseSizes(b, "search.cost-sizes", *costSizes) {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				with := openBench(b, lethe.Config{DataDir: b.TempDir()})
				without := openBench(b, lethe.Config{DataDir: b.TempDir()})
				without.SetTextIndex(false)
				// Alternate, so that neither runs on a quieter machine.
				var tw, to, ew, eo time.Duration
				steps := n / 5000
				for i := range steps {
					w := searchCorpus(b, with, 5000, 0, uint64(10+i))
					o := searchCorpus(b, without, 5000, 0, uint64(10+i))
					tw, to = tw+w, to+o
					if i >= steps-2 {
						ew, eo = ew+w, eo+o
					}
				}
				rw, ro := float64(n)/tw.Seconds(), float64(n)/to.Seconds()
				b.ReportMetric(rw, "with-grains/s")
				b.ReportMetric(ro, "without-grains/s")
				b.ReportMetric(100*(1-rw/ro), "cost-%")
				b.ReportMetric(100*(1-eo.Seconds()/ew.Seconds()), "end-cost-%")
			}
		})
	}
}

// BenchmarkSearchVector times top-10 vector queries (random 384-dimension
// vectors) on SQLite at each size, after loading the index (build-ms, the
// first query after opening: reading and decrypting every row with an
// embedding, answered by exact search), by exact search (exact-p50-ms)
// and, at GraphMin vectors or more, by the HNSW graph (p50-ms) once built
// (graph-build-ms, after the first query); and reports the index's memory
// per 100,000 vectors, with the graph if there is one.
func BenchmarkSearchVector(b *testing.B) {
	const dim = 384
	for _, n := range sizes(b) {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			cfg := lethe.Config{DataDir: b.TempDir()}
			db := openBench(b, cfg)
			searchCorpus(b, db, n, dim, 3)
			db.Close()
			db = openBench(b, cfg)
			r := rand.New(rand.NewPCG(4, 4))
			query := func() time.Duration {
				start := time.Now()
				p, err := db.Recall(context.Background(), lethe.Query{Embedding: randomVector(r, dim), Limit: 10})
				if err != nil || len(p.Grains) != 10 {
					b.Fatalf("vector query: %v", err)
				}
				return time.Since(start)
			}
			build := query()
			db.VectorGraph("default", n+1) // exact search only
			var exact []time.Duration
			for range 100 {
				exact = append(exact, query())
			}
			start := time.Now()
			graph := db.VectorGraph("default", search.GraphMin)
			graphBuild := time.Since(start)
			var ds []time.Duration
			for b.Loop() {
				ds = append(ds, query())
			}
			b.ReportMetric(p50(exact), "exact-p50-ms")
			if graph {
				b.ReportMetric(p50(ds), "p50-ms")
				b.ReportMetric(float64(graphBuild)/float64(time.Millisecond), "graph-build-ms")
			}
			b.ReportMetric(float64(build)/float64(time.Millisecond), "build-ms")
			b.ReportMetric(float64(db.VectorBytes("default"))*100000/float64(n)/(1<<20), "MB/100k")
		})
	}
}
