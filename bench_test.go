package lethe_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
)

// benchStores are the stores the benchmarks compare.
func benchStores(b *testing.B) map[string]func(b *testing.B) (lethe.Config, gorm.Dialector) {
	return map[string]func(b *testing.B) (lethe.Config, gorm.Dialector){
		"sqlite": func(b *testing.B) (lethe.Config, gorm.Dialector) {
			dir := b.TempDir()
			return lethe.Config{DataDir: dir}, sqlite.Open("file:" + filepath.Join(dir, "plain.db") + "?_journal_mode=WAL&_busy_timeout=10000")
		},
		"postgres": func(b *testing.B) (lethe.Config, gorm.Dialector) {
			return lethe.Config{DataDir: b.TempDir(), PostgresDSN: testenv.Postgres(b)}, postgres.Open(testenv.Postgres(b))
		},
	}
}

func benchGrain(i int) lethe.Grain {
	return lethe.Grain{Type: "fact", Subject: fmt.Sprintf("subject-%d", i%10000), Relation: "relation",
		Object: fmt.Sprintf("object-%d", i), Content: fmt.Sprintf("grain number %d with some text to make it realistic", i),
		Scope: "acme/prod", UserID: fmt.Sprintf("user-%d", i%1000), Tags: []string{"bench"}, Importance: 0.5}
}

func openBench(b *testing.B, cfg lethe.Config) *lethe.DB {
	db, err := lethe.Open(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// BenchmarkAdd writes one grain per call.
func BenchmarkAdd(b *testing.B) {
	for name, mk := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			cfg, _ := mk(b)
			db := openBench(b, cfg)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := db.Add(ctx, benchGrain(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "grains/s")
		})
	}
}

// BenchmarkAddBatch writes batches of 1,000 grains of 1,000 users.
// users-exist is the steady state of a service: the users' keys exist (a
// warm-up batch, not timed, creates them). new-users brings 1,000 users
// never seen in every batch, each needing a data key wrapped by the KEK
// and stored with its audit event. BenchmarkPlainInsert writes the same
// rows unencrypted and unindexed with gorm, the baseline.
func BenchmarkAddBatch(b *testing.B) {
	for name, mk := range benchStores(b) {
		for _, newUsers := range []bool{false, true} {
			b.Run(name+"/"+usersCase(newUsers), func(b *testing.B) {
				cfg, _ := mk(b)
				addBatches(b, openBench(b, cfg), newUsers, nil)
			})
		}
	}
}

// BenchmarkGet reads a grain by hash (DB.Get: its row and its opening),
// in a memory of 10,000 grains, freshly opened, each call a hash drawn at
// random from it; p50 and p99 beside the mean.
func BenchmarkGet(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			cfg, _ := benchStores(b)[name](b)
			ctx := context.Background()
			db := openBench(b, cfg)
			var hashes []string
			for i := 0; i < 10000; i += 1000 {
				batch := make([]lethe.Grain, 1000)
				for j := range batch {
					batch[j] = matrixGrain(i+j, 10000)
				}
				hs, err := db.AddBatch(ctx, batch)
				if err != nil {
					b.Fatal(err)
				}
				hashes = append(hashes, hs...)
			}
			db.Close()
			db = openBench(b, cfg)
			r := rand.New(rand.NewPCG(5, 5))
			for range 1000 { // untimed: most users' keys unwrapped once, as a running process has
				if _, err := db.Get(ctx, "", hashes[r.IntN(len(hashes))]); err != nil {
					b.Fatal(err)
				}
			}
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := db.Get(ctx, "", hashes[r.IntN(len(hashes))]); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkForgetUser erases one user per iteration, scrub and receipt
// included: what an erase costs end to end, with its erasures/s and the
// p50 and p99 of one call. keys=2000 is 2,000 users of 10 grains each;
// keys=50000 is 50,000 users of one grain each, to show how the cost
// grows with the number of keys (the PostgreSQL scrub rewrites the
// destroyed key's partition, not the whole keys table). clients=4 erases
// four users at a time, as lethe-load's erase phase does: erasures of a
// memory then wait for each other's lock and share scrubs, and the
// cleaner deletes the erased users' rows beside them.
func BenchmarkForgetUser(b *testing.B) {
	for name, mk := range benchStores(b) {
		for _, c := range []struct{ users, grains, clients int }{{2000, 10, 1}, {2000, 10, 4}, {50000, 1, 1}} {
			b.Run(fmt.Sprintf("%s/keys=%d/clients=%d", name, c.users, c.clients), func(b *testing.B) {
				cfg, _ := mk(b)
				db := openBench(b, cfg)
				ctx := context.Background()
				var batch []lethe.Grain
				for i := range c.users * c.grains {
					g := benchGrain(i)
					g.UserID = fmt.Sprintf("erase-user-%d", i%c.users)
					batch = append(batch, g)
					if len(batch) == 1000 {
						if _, err := db.AddBatch(ctx, batch); err != nil {
							b.Fatal(err)
						}
						batch = batch[:0]
					}
				}
				if b.N > c.users {
					b.Fatal("out of users")
				}
				b.ResetTimer()
				all, elapsed := runClients(b, c.clients, b.N, func(i int) error {
					_, err := db.ForgetUser(ctx, "", fmt.Sprintf("erase-user-%d", i))
					return err
				})
				b.StopTimer()
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "erasures/s")
				b.ReportMetric(p50(all), "p50-ms")
				b.ReportMetric(pctMS(all, 99), "p99-ms")
			})
		}
	}
}

func usersCase(newUsers bool) string {
	if newUsers {
		return "new-users"
	}
	return "users-exist"
}

// addBatches writes batches of 1,000 grains until the benchmark ends and
// reports grains per second; see BenchmarkAddBatch for newUsers. started,
// if not nil, is called when timing starts.
func addBatches(b *testing.B, db *lethe.DB, newUsers bool, started func()) {
	ctx := context.Background()
	n := 0
	batch := func() []lethe.Grain {
		out := make([]lethe.Grain, 1000)
		for j := range out {
			out[j] = benchGrain(n)
			if newUsers {
				out[j].UserID = fmt.Sprintf("new-user-%d", n)
			}
			n++
		}
		return out
	}
	if !newUsers {
		if _, err := db.AddBatch(ctx, batch()); err != nil {
			b.Fatal(err)
		}
	}
	if started != nil {
		started()
	}
	written := 0
	for b.Loop() {
		if _, err := db.AddBatch(ctx, batch()); err != nil {
			b.Fatal(err)
		}
		written += 1000
	}
	b.ReportMetric(float64(written)/b.Elapsed().Seconds(), "grains/s")
}

// plainGrain is the baseline row: the same fields in clear, no indexes.
type plainGrain struct {
	ID                                               int64 `gorm:"primaryKey"`
	Hash, Memory, Type, Namespace, Scope             string
	Subject, Relation, Object, Content, UserID, Tags string
	Importance, Confidence, Salience                 float64
	Pinned, Archived                                 bool
	CreatedUS, LastRetrievedUS, RetrievalCount       int64
	Supersedes, SupersededBy                         string
}

func BenchmarkPlainInsert(b *testing.B) {
	for name, mk := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			_, dial := mk(b)
			g, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard, SkipDefaultTransaction: true, PrepareStmt: true})
			if err != nil {
				b.Fatal(err)
			}
			if err := g.AutoMigrate(&plainGrain{}); err != nil {
				b.Fatal(err)
			}
			n := 0
			for b.Loop() {
				rows := make([]plainGrain, 1000)
				for j := range rows {
					gr := benchGrain(n)
					rows[j] = plainGrain{Hash: fmt.Sprintf("%064d", n), Memory: "default", Type: gr.Type, Namespace: "default",
						Scope: gr.Scope, Subject: gr.Subject, Relation: gr.Relation, Object: gr.Object, Content: gr.Content,
						UserID: gr.UserID, Tags: "bench", Importance: gr.Importance, Confidence: 1, Salience: 1,
						CreatedUS: time.Now().UnixMicro()}
					n++
				}
				if err := g.Transaction(func(tx *gorm.DB) error { return tx.CreateInBatches(rows, 500).Error }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "grains/s")
		})
	}
}

// BenchmarkRecallBySubject recalls by subject in a memory of 100,000 grains
// (10 grains per subject) and reports the median latency. 1,000 untimed
// recalls come first: a process unwraps each data key once (here the keys
// of the 1,000 users), and the steady state is what the figure is about.
func BenchmarkRecallBySubject(b *testing.B) {
	for name, mk := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			cfg, _ := mk(b)
			db := openBench(b, cfg)
			ctx := context.Background()
			for i := 0; i < 100000; i += 1000 {
				batch := make([]lethe.Grain, 1000)
				for j := range batch {
					batch[j] = benchGrain(i + j)
				}
				if _, err := db.AddBatch(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 1000 {
				if _, err := db.Recall(ctx, lethe.Query{Subject: fmt.Sprintf("subject-%d", 9000+i)}); err != nil {
					b.Fatal(err)
				}
			}
			var lat []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				p, err := db.Recall(ctx, lethe.Query{Subject: fmt.Sprintf("subject-%d", i%10000)})
				lat = append(lat, time.Since(start))
				if err != nil || len(p.Grains) != 10 {
					b.Fatalf("recall: %v, %d grains", err, len(p.Grains))
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// BenchmarkRecallCold times the first recall after the process's key cache
// was emptied, as every erasure and every start leaves it, against the same
// recall right after, keys cached, on SQLite and PostgreSQL with the local
// age KEK and on SQLite with Vault transit. In a memory of n matrixGrain
// grains of 1,000 users, a page of 10 by relation holds grains of 10 users (and 2
// scopes), a page by subject grains of one. The third pattern erases a user
// of another memory instead of emptying the cache: an erasure drops its own
// memory's keys only. Reports the p50 of each and the first recalls' p99.
func BenchmarkRecallCold(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres", "sqlite+vault"} {
		for _, n := range []int{1000, 10000, 100000} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				cfg, _ := benchStores(b)[strings.TrimSuffix(name, "+vault")](b)
				if strings.HasSuffix(name, "+vault") {
					addr, token := testenv.Vault(b)
					cfg.KEK = vaultKEK(b, addr, token, false) // each unwrap a call to Vault
				}
				cfg.ProofWait = time.Nanosecond // the erasures elsewhere do not wait for their proof
				db := openBench(b, cfg)
				ctx := context.Background()
				addMatrix(b, db, n)
				for _, pattern := range []string{"relation", "subject", "relation-after-erasure-elsewhere"} {
					b.Run(pattern, func(b *testing.B) {
						var cold, warm []time.Duration
						for k := 0; b.Loop(); k++ {
							q := lethe.Query{Relation: fmt.Sprintf("rel-%d", k%20), Limit: 10}
							switch pattern {
							case "subject":
								q = lethe.Query{Subject: fmt.Sprintf("subject-%d", k*7919%max(1, n/10)), Limit: 10}
							case "relation-after-erasure-elsewhere":
								// An erasure in another memory: its keys
								// are purged, not this memory's.
								b.StopTimer()
								user := fmt.Sprintf("elsewhere-%d", k)
								if _, err := db.Add(ctx, lethe.Grain{Memory: "elsewhere", Type: "fact", Subject: "s", UserID: user}); err != nil {
									b.Fatal(err)
								}
								if _, err := db.ForgetUser(ctx, "elsewhere", user); err != nil {
									b.Fatal(err)
								}
								b.StartTimer()
							default:
								db.PurgeKeys()
							}
							for _, lat := range []*[]time.Duration{&cold, &warm} {
								start := time.Now()
								page, err := db.Recall(ctx, q)
								*lat = append(*lat, time.Since(start))
								if err != nil || len(page.Grains) == 0 {
									b.Fatalf("recall %+v: %v", q, err)
								}
							}
						}
						b.ReportMetric(p50(cold)*1000, "cold-p50-µs")
						b.ReportMetric(p50(warm)*1000, "warm-p50-µs")
						slices.Sort(cold)
						b.ReportMetric(float64(cold[len(cold)*99/100].Microseconds()), "cold-p99-µs")
					})
				}
			})
		}
	}
}

// BenchmarkEraseVsForget compares crypto-erasing a user holding n grains
// (one key destroyed) with hard-deleting the same grains by user_id. Both
// exclude the wait for log inclusion (ProofWait is 1 ns: the receipt comes
// back pending). The setup of each iteration (writing n grains) is outside
// the reported ms/call, which times the call alone.
func BenchmarkEraseVsForget(b *testing.B) {
	for name, mk := range benchStores(b) {
		for _, n := range []int{1000, 10000, 100000} {
			for _, op := range []string{"erase", "forget"} {
				b.Run(fmt.Sprintf("%s/%s/%d", name, op, n), func(b *testing.B) {
					cfg, _ := mk(b)
					cfg.ProofWait = time.Nanosecond
					db := openBench(b, cfg)
					ctx := context.Background()
					var spent time.Duration
					for i := 0; i < b.N; i++ {
						user := fmt.Sprintf("bench-user-%d", i)
						for j := 0; j < n; j += 1000 {
							batch := make([]lethe.Grain, min(1000, n-j))
							for k := range batch {
								batch[k] = benchGrain(j + k)
								batch[k].UserID = user
							}
							if _, err := db.AddBatch(ctx, batch); err != nil {
								b.Fatal(err)
							}
						}
						start := time.Now()
						var count int64
						if op == "erase" {
							er, err := db.ForgetUser(ctx, "", user)
							if err != nil {
								b.Fatal(err)
							}
							count = er.Count
						} else {
							res, err := db.Forget(ctx, lethe.Selector{UserID: user})
							if err != nil {
								b.Fatal(err)
							}
							count = int64(res.Count)
						}
						spent += time.Since(start)
						if count != int64(n) {
							b.Fatalf("%s removed %d grains, want %d", op, count, n)
						}
					}
					b.ReportMetric(float64(spent.Microseconds())/1000/float64(b.N), "ms/call")
				})
			}
		}
	}
}

// matrixGrain is grain i of a memory of n grains, shaped like
// cmd/lethe-load's: n/10 subjects (10 grains each), 20 relations, 1,000
// users, 8 scopes (acme/s0..s7), 50 tags.
func matrixGrain(i, n int) lethe.Grain {
	return lethe.Grain{Type: "fact", Subject: fmt.Sprintf("subject-%d", i%max(1, n/10)), Relation: fmt.Sprintf("rel-%d", i%20),
		Object: fmt.Sprintf("object-%d", i), Content: fmt.Sprintf("grain number %d with some text to make it realistic", i),
		Scope: fmt.Sprintf("acme/s%d", i%8), UserID: fmt.Sprintf("user-%d", i%1000), Tags: []string{fmt.Sprintf("t%d", i%50)},
		Importance: 0.5}
}

// addMatrix adds grains 0 to n-1 of matrixGrain to db, 1,000 a batch.
func addMatrix(b *testing.B, db *lethe.DB, n int) {
	for i := 0; i < n; i += 1000 {
		batch := make([]lethe.Grain, min(1000, n-i))
		for j := range batch {
			batch[j] = matrixGrain(i+j, n)
		}
		if _, err := db.AddBatch(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
}

// recallPatterns are the recall patterns of BenchmarkRecallMatrix: query k
// of each, over a memory of n matrixGrain grains, page size 10.
var recallPatterns = []struct {
	name  string
	query func(k, n int) lethe.Query
}{
	{"subject", func(k, n int) lethe.Query { return lethe.Query{Subject: fmt.Sprintf("subject-%d", k%max(1, n/10))} }},
	{"relation", func(k, n int) lethe.Query { return lethe.Query{Relation: fmt.Sprintf("rel-%d", k%20)} }},
	{"object", func(k, n int) lethe.Query { return lethe.Query{Object: fmt.Sprintf("object-%d", k%n)} }},
	{"subject+relation", func(k, n int) lethe.Query {
		s := k % max(1, n/10)
		return lethe.Query{Subject: fmt.Sprintf("subject-%d", s), Relation: fmt.Sprintf("rel-%d", s%20)}
	}},
	{"user", func(k, n int) lethe.Query { return lethe.Query{UserID: fmt.Sprintf("user-%d", k%min(n, 1000))} }},
	{"tag", func(k, n int) lethe.Query { return lethe.Query{Tags: []string{fmt.Sprintf("t%d", k%50)}} }},
	{"scope-prefix", func(k, n int) lethe.Query { return lethe.Query{Scope: fmt.Sprintf("acme/s%d", k%8)} }},
	{"namespace", func(k, n int) lethe.Query { return lethe.Query{Namespace: "default"} }},
	{"type", func(k, n int) lethe.Query { return lethe.Query{Type: "fact"} }},
	{"none", func(k, n int) lethe.Query { return lethe.Query{} }},
}

// BenchmarkRecallMatrix recalls by every pattern of recallPatterns in
// memories of 1,000 to 1,000,000 grains, on each store, freshly opened:
// the store is loaded, closed and opened again, as after a restart, and
// the recalls start at once, with the statistics the store takes at open
// and nothing else (no manual ANALYZE). It reports p50 and p99 per
// pattern. Each recall asks for a page of 10, as cmd/lethe-load does.
// Before the timed recalls, each user's key is unwrapped once (a recall by
// user per user, untimed): a process does that once per key; and each
// pattern runs 100 times, untimed.
//
// The 1,000,000-grain stores take minutes to load; select sizes with
// -bench, e.g. 'RecallMatrix/.*/(1000|10000|100000)/'.
func BenchmarkRecallMatrix(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		for _, n := range []int{1000, 10000, 100000, 1000000} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				cfg, _ := benchStores(b)[name](b)
				ctx := context.Background()
				db, err := lethe.Open(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				addMatrix(b, db, n)
				db.Close()
				db = openBench(b, cfg)
				for u := range min(n, 1000) {
					if _, err := db.Recall(ctx, lethe.Query{UserID: fmt.Sprintf("user-%d", u), Limit: 1}); err != nil {
						b.Fatal(err)
					}
				}
				// 100 untimed recalls of each pattern, of other values than
				// the timed ones where the pattern has values.
				for _, p := range recallPatterns {
					for k := range 100 {
						q := p.query(k*7919+1, n)
						q.Limit = 10
						if _, err := db.Recall(ctx, q); err != nil {
							b.Fatal(err)
						}
					}
				}
				for _, p := range recallPatterns {
					b.Run(p.name, func(b *testing.B) {
						recallLatencies(b, db, func(k int) lethe.Query {
							q := p.query(k*7919, n)
							q.Limit = 10
							return q
						})
					})
				}
			})
		}
	}
}

// BenchmarkRecallScopes recalls by subject in a memory of 10,000 grains
// spread over 8 to 10,000 scopes (acme/s0, acme/s1, ...), on each store,
// freshly opened. A value's blind token is made under each scope's index
// key, so that erasing a scope unlinks its tokens at once
// (docs/compliance/erasure.md): a recall over the whole memory makes one
// token per scope and reads one index range per token. "memory" recalls
// over the whole memory, "scope" within the one scope that holds the
// subject's grains (each scope's keys read once before, untimed). It
// reports p50 and p99, and first-ms: the first recall after the store
// opened, over the whole memory, which unwraps every scope's index key
// (sqlite+vault: with Vault transit as the KEK).
func BenchmarkRecallScopes(b *testing.B) {
	const n = 10000
	for _, name := range []string{"sqlite", "postgres", "sqlite+vault"} {
		for _, scopes := range []int{8, 64, 100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s/%d", name, scopes), func(b *testing.B) {
				cfg, _ := benchStores(b)[strings.TrimSuffix(name, "+vault")](b)
				if strings.HasSuffix(name, "+vault") {
					addr, token := testenv.Vault(b)
					cfg.KEK = vaultKEK(b, addr, token, false)
				}
				ctx := context.Background()
				db, err := lethe.Open(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				// 1,000 subjects of 10 grains, each subject's in one scope.
				scopeOf := func(i int) string { return fmt.Sprintf("acme/s%d", (i%1000)%scopes) }
				for i := 0; i < n; i += 1000 {
					batch := make([]lethe.Grain, 1000)
					for j := range batch {
						g := matrixGrain(i+j, n)
						g.Subject, g.Scope = fmt.Sprintf("subject-%d", (i+j)%1000), scopeOf(i+j)
						if scopes > 1000 {
							g.Scope = fmt.Sprintf("acme/s%d", i+j) // one grain each
						}
						batch[j] = g
					}
					if _, err := db.AddBatch(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				db.Close()
				db = openBench(b, cfg)
				start := time.Now()
				if _, err := db.Recall(ctx, lethe.Query{Subject: "subject-1", Limit: 10}); err != nil {
					b.Fatal(err)
				}
				first := time.Since(start)
				query := func(where string, k int) lethe.Query {
					q := lethe.Query{Subject: fmt.Sprintf("subject-%d", k*7919%1000), Limit: 10}
					if where == "scope" {
						q.Scope = scopeOf(k * 7919 % 1000)
						if scopes > 1000 {
							q.Scope = fmt.Sprintf("acme/s%d", k*7919%1000)
						}
					}
					return q
				}
				// Each scope's index keys are read once, untimed, as a
				// process does once per scope it recalls in.
				for k := range 1000 {
					if _, err := db.Recall(ctx, query("scope", k)); err != nil {
						b.Fatal(err)
					}
				}
				for _, where := range []string{"memory", "scope"} {
					b.Run(where, func(b *testing.B) {
						recallLatencies(b, db, func(k int) lethe.Query { return query(where, k) })
						b.ReportMetric(float64(first.Microseconds())/1000, "first-ms")
					})
				}
			})
		}
	}
}

// recallLatencies runs query(k) for each iteration k of b, each of which
// must find grains, and reports their p50 and p99.
func recallLatencies(b *testing.B, db *lethe.DB, query func(k int) lethe.Query) {
	var lat []time.Duration
	for k := 0; b.Loop(); k++ {
		q := query(k)
		start := time.Now()
		page, err := db.Recall(context.Background(), q)
		lat = append(lat, time.Since(start))
		if err != nil || len(page.Grains) == 0 {
			b.Fatalf("recall %+v: %v, %d grains", q, err, len(page.Grains))
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkMachine measures what this machine charges for the operations
// every figure in docs/performance.md rests on, so that figures from two
// machines can be compared: a system call (getpid), a 4 KiB read of a file
// in the page cache (what SQLite pays per page its own cache misses) and a
// loopback TCP round trip of one byte each way between two goroutines (what
// every HTTP request and PostgreSQL statement pays at least once), and a
// dependent load from working sets of 1 MiB and 16 MiB, one per cache line
// in a random cycle (what a recall pays per line its caches miss: a store
// of 10,000 grains is about 20 MB, its pages and the Go heap beyond the
// caches of most of these machines). It measures the machine, not lethe.
func BenchmarkMachine(b *testing.B) {
	for _, mib := range []int{1, 16} {
		b.Run(fmt.Sprintf("load-%dMiB", mib), func(b *testing.B) {
			const line = 8 // ints per 64-byte cache line
			n := mib << 20 / 64
			next := make([]int, n*line)
			perm := rand.Perm(n)
			for i, p := range perm {
				next[p*line] = perm[(i+1)%n] * line
			}
			j := 0
			for b.Loop() {
				j = next[j]
			}
			sinkInt = j
		})
	}
	b.Run("getpid", func(b *testing.B) {
		for b.Loop() {
			syscall.Getpid()
		}
	})
	b.Run("pread-4KiB", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "pages"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write(make([]byte, 1<<20)); err != nil {
			b.Fatal(err)
		}
		page := make([]byte, 4096)
		for i := 0; b.Loop(); i++ {
			if _, err := f.ReadAt(page, int64(i%256)*4096); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tcp-round-trip", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			buf := make([]byte, 1)
			for {
				if _, err := io.ReadFull(c, buf); err != nil {
					return
				}
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, 1)
		for b.Loop() {
			if _, err := c.Write(buf); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(c, buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

var sinkInt int
