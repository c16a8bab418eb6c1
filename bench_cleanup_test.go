package lethe_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
)

// BenchmarkCleanupErased times the cleaner's deletion of the n rows of a
// user whose key was destroyed (PurgeErased after ForgetUser; adding the
// rows and the erase are untimed). Since the cleaner also records each
// deleted row's hash and the erased key's fingerprint (erased_grains, for
// history exports), compare it with the same benchmark on a commit before
// that.
func BenchmarkCleanupErased(b *testing.B) {
	for name, mk := range benchStores(b) {
		for _, n := range []int{10000} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				cfg, _ := mk(b)
				cfg.ProofWait = time.Nanosecond
				db := openBench(b, cfg)
				db.PauseCleaner()
				ctx := context.Background()
				var spent time.Duration
				for i := 0; i < b.N; i++ {
					user := fmt.Sprintf("cleanup-user-%d", i)
					for j := 0; j < n; j += 1000 {
						batch := make([]lethe.Grain, min(1000, n-j))
						for k := range batch {
							batch[k] = benchGrain(i*n + j + k)
							batch[k].UserID = user
						}
						if _, err := db.AddBatch(ctx, batch); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := db.ForgetUser(ctx, "", user); err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					deleted, err := db.PurgeErased(ctx)
					spent += time.Since(start)
					if err != nil || deleted != n {
						b.Fatalf("cleanup deleted %d rows (%v), want %d", deleted, err, n)
					}
				}
				b.ReportMetric(float64(spent.Microseconds())/1000/float64(b.N), "ms/cleanup")
			})
		}
	}
}
