package lethe_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
)

// BenchmarkForgetByHash forgets one grain by hash per call, with its proof
// (the receipt waits for a signed checkpoint that covers the event), from 1
// and 4 goroutines, on a store of 20,000 grains: issue 14's "forget by hash
// with its proof" through the library, as lethe-load's floor runs it, in a
// form a CPU or block profile can be taken of (-cpuprofile). Reports
// forgets/s, the p50 of one call, and the sequencer steps per forget.
func BenchmarkForgetByHash(b *testing.B) {
	for name, mk := range benchStores(b) {
		for _, clients := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/clients=%d", name, clients), func(b *testing.B) {
				cfg, _ := mk(b)
				db := openBench(b, cfg)
				ctx := context.Background()
				const n = 20000
				var hashes []string
				for j := 0; j < n; j += 1000 {
					batch := make([]lethe.Grain, 1000)
					for k := range batch {
						batch[k] = benchGrain(j + k)
					}
					hs, err := db.AddBatch(ctx, batch)
					if err != nil {
						b.Fatal(err)
					}
					hashes = append(hashes, hs...)
				}
				b.ResetTimer()
				steps := db.AuditSteps()
				cpu := machineBusy(b)
				all, elapsed := runClients(b, clients, min(b.N, n), func(i int) error {
					res, err := db.Forget(ctx, lethe.Selector{Hash: hashes[i]})
					if err != nil || res.Count != 1 || res.Receipt == nil {
						return fmt.Errorf("forget %d: %+v, %v", i, res, err)
					}
					return nil
				})
				b.StopTimer()
				b.ReportMetric((machineBusy(b)-cpu).Seconds()*1e6/float64(len(all)), "machine-cpu-µs/forget")
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "forgets/s")
				b.ReportMetric(p50(all), "p50-ms")
				b.ReportMetric(float64(db.AuditSteps()-steps)/float64(len(all)), "steps/forget")
			})
		}
	}
}

// machineBusy returns the CPU time every process of this machine has used
// since it booted (/proc/stat: all but idle, I/O wait and steal), this process
// and its database server among them. On a machine whose cores are the
// limit, the difference over a run divided by its operations is what one
// operation costs the whole machine: steadier from run to run than the
// operations a second, which also move with what the scheduler makes wait.
func machineBusy(b *testing.B) time.Duration {
	f, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(f), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 8 || fields[0] != "cpu" {
		b.Fatalf("/proc/stat: unexpected first line %q", line)
	}
	var ticks int64
	for i, v := range fields[1:] {
		if i == 3 || i == 4 || i >= 7 { // idle, iowait, steal; guest time is counted in user already
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %v", err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// runClients calls call(i) for every i in [0, n) from clients goroutines,
// each taking the next i, and returns every call's latency and the time
// they all took; the first error fails b.
func runClients(b *testing.B, clients, n int, call func(i int) error) ([]time.Duration, time.Duration) {
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	done := make(chan error, clients)
	start := time.Now()
	for c := range clients {
		go func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					break
				}
				t := time.Now()
				if err := call(int(i)); err != nil {
					done <- err
					return
				}
				lat[c] = append(lat[c], time.Since(t))
			}
			done <- nil
		}()
	}
	for range clients {
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return all, elapsed
}
