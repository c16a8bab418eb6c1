package store

import (
	"context"
	"path/filepath"
	"sync"
	"time"
)

// A writeGate queues this process's transactions on one SQLite file in Go,
// ahead of SQLite's own lock. Every transaction of the store takes that
// lock at its BEGIN (IMMEDIATE, see sqliteParams), and SQLite makes a
// transaction that finds it taken poll for it, sleeping 1, 2, 5, 10, 15,
// 20, 25, 25, 25, 50, 50 and then 100 ms between tries (go-sqlite3 builds
// it with HAVE_USLEEP): the lock stood free while its waiters slept, and
// whoever tried at the right moment went first. Under four clients, one
// forget by hash in a hundred took 80-230 ms and the slowest 1.5-2.6 s
// (lethe-load, 10,000 grains), one erasure in a hundred 0.33-0.46 s
// (BenchmarkForgetUser/sqlite/keys=2000/clients=4); through the gate they
// take their turns in order, each as soon as the last commits: the
// slowest forget 23-45 ms, the median 11-12 ms instead of 2.6-2.8 (a
// fourth in line waits for three; docs/performance.md, "A write gate
// ahead of SQLite's lock").
//
// The gate is per file, shared by every store a process opens on it (two
// instances on one store, as TestModel runs). Background work marked with
// [Background] (the cleaner, the retrieval statistics) does not queue: it
// takes SQLite's lock when it finds it free, as before, and so never makes
// a request wait for its turn behind it; through the gate, a cleaner's
// transaction of ten erased users (15-60 ms) was ahead of one erasure in a
// hundred of a single client. A transaction that waits longer than
// gateWait (one held open that long, or begun inside another's) goes on
// to SQLite's busy timeout, as it did before the gate; so do the writes of
// other processes and writes outside a transaction, which only SQLite's
// lock orders.
type writeGate struct{ ch chan struct{} }

// gateWait bounds a transaction's wait at the gate: SQLite's busy timeout
// (sqliteParams).
const gateWait = 10 * time.Second

// gates are the write gates by SQLite file (absolute path).
var gates struct {
	sync.Mutex
	m map[string]*writeGate
}

// gateFor returns the write gate of the SQLite file at path.
func gateFor(path string) *writeGate {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	gates.Lock()
	defer gates.Unlock()
	if gates.m == nil {
		gates.m = map[string]*writeGate{}
	}
	g, ok := gates.m[path]
	if !ok {
		g = &writeGate{ch: make(chan struct{}, 1)}
		gates.m[path] = g
	}
	return g
}

type backgroundKey struct{}

// Background returns ctx marked as background work, whose SQLite
// transactions do not queue at the write gate (see writeGate).
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// enter waits for the gate and returns its release, which does nothing
// when the transaction did not take it: background work (see Background),
// ctx's end (which the BEGIN then reports) or a wait past gateWait.
func (g *writeGate) enter(ctx context.Context) func() {
	if ctx.Value(backgroundKey{}) != nil {
		return func() {}
	}
	select {
	case g.ch <- struct{}{}:
		return g.leave
	default:
	}
	t := time.NewTimer(gateWait)
	defer t.Stop()
	select {
	case g.ch <- struct{}{}:
		return g.leave
	case <-ctx.Done():
	case <-t.C:
	}
	return func() {}
}

func (g *writeGate) leave() { <-g.ch }
