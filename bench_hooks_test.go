package lethe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/proofs"
)

// BenchmarkHookWritePath measures what a hook adds to an audited write:
// Supersede (one grain.supersede event per call) in a memory with no hook
// and in one whose hook subscribes to grain.supersede (its delivery is
// queued in the same transaction). The two alternate in one loop on one
// store, so machine load affects both alike; each is reported as its own
// metric (plain-ns/op, hooked-ns/op). In "delivering" the DB's engine
// meanwhile sends the deliveries to a real receiver.
//
//	go test -run XXX -bench HookWritePath -benchtime 1000x .
func BenchmarkHookWritePath(b *testing.B) {
	var got atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(rcv.Close)
	for name, mk := range benchStores(b) {
		for _, mode := range []string{"queued", "delivering"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				cfg, _ := mk(b)
				cfg.Hooks = lethe.HooksConfig{AllowPrivate: true, Deliver: mode == "delivering", Poll: 50 * time.Millisecond}
				db := openBench(b, cfg)
				ctx := context.Background()
				if _, err := db.AddHook(ctx, lethe.HookSpec{Memory: "hooked", URL: rcv.URL, Events: []string{"grain.supersede"}}); err != nil {
					b.Fatal(err)
				}
				heads := map[string]string{}
				for _, m := range []string{"plain", "hooked"} {
					g := benchGrain(0)
					g.Memory = m
					h, err := db.Add(ctx, g)
					if err != nil {
						b.Fatal(err)
					}
					heads[m] = h
				}
				spent := map[string]time.Duration{}
				b.ResetTimer()
				for i := 1; b.Loop(); i++ {
					for _, m := range []string{"plain", "hooked"} {
						g := benchGrain(i)
						g.Memory = m
						t0 := time.Now()
						h, err := db.Supersede(ctx, heads[m], g)
						spent[m] += time.Since(t0)
						if err != nil {
							b.Fatal(err)
						}
						heads[m] = h
					}
				}
				b.ReportMetric(float64(spent["plain"].Nanoseconds())/float64(b.N), "plain-ns/op")
				b.ReportMetric(float64(spent["hooked"].Nanoseconds())/float64(b.N), "hooked-ns/op")
			})
		}
	}
}

// BenchmarkHookDelivery measures delivery throughput: b.N deliveries are
// queued (untimed), then a delivering DB sends them to a real receiver on
// 127.0.0.1 that verifies nothing and answers 204; the time is until the
// queue is empty. ns/op is per delivery.
//
//	go test -run XXX -bench HookDelivery -benchtime 2000x .
func BenchmarkHookDelivery(b *testing.B) {
	var got atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(rcv.Close)
	for name, mk := range benchStores(b) {
		b.Run(name, func(b *testing.B) {
			cfg, _ := mk(b)
			cfg.Hooks = lethe.HooksConfig{AllowPrivate: true}
			ctx := context.Background()
			queue := openBench(b, cfg)
			if _, err := queue.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.URL, Events: []string{"grain.forget"}}); err != nil {
				b.Fatal(err)
			}
			var leaves [][]byte
			for i := range b.N {
				l := proofs.Leaf{V: proofs.LeafVersion, ID: proofs.NewEventID(), Type: proofs.EventGrainForget, Memory: "m",
					Time: time.Now().UTC().Truncate(time.Second), Actor: "local", Hashes: []string{fmt.Sprintf("%064x", i)}}
				lb, err := l.Marshal()
				if err != nil {
					b.Fatal(err)
				}
				leaves = append(leaves, lb)
				if len(leaves) == 500 || i == b.N-1 {
					if err := queue.AppendRawEvents(ctx, leaves); err != nil {
						b.Fatal(err)
					}
					leaves = leaves[:0]
				}
			}
			before := got.Load()
			b.ResetTimer()
			cfg.Hooks.Deliver, cfg.Hooks.Poll = true, 10*time.Millisecond
			db := openBench(b, cfg)
			for {
				st, err := db.HookStats(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if st.Pending == 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			b.StopTimer()
			if n := got.Load() - before; n != int64(b.N) {
				b.Fatalf("receiver got %d, want %d", n, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}
