package lethe

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"pgregory.net/rapid"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// TestSequencerStepsByModel checks the sequencer's one-transaction step
// (numbering, append, appended counter and checkpoint commit together: see
// audit.AtomicOutbox) against a model, on SQLite and PostgreSQL: random
// interleavings of committed events, steps by three replicas sharing the
// store (two with the one-transaction step, one with the step of four
// transactions that the Trillian mode and a cosigning replica run), steps
// that crash between any two of their operations or just before their
// commit, concurrent steps, and replica restarts (a new log and sequencer,
// nothing cached). After a step that committed, every event committed
// before it has exactly one leaf index and its leaf is the log's leaf
// there, the counters equal the log's size, and the latest checkpoint
// covers the whole log, opens with the signer's key and is consistent with
// every earlier one. After a crashed step nothing changed, and the
// sequencer does not claim a checkpoint the store does not hold.
func TestSequencerStepsByModel(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, signer := seqStore(t, name, "lethe.test/sequencer-model")
			rapid.Check(t, func(rt *rapid.T) {
				m := &seqModel{st: st, signer: signer}
				for i := range m.replicas {
					m.restart(rt, i)
				}
				m.step(rt, 0, -1) // a clean start: whatever earlier runs left is logged
				m.check(rt, true)
				rt.Repeat(map[string]func(*rapid.T){
					"commit": func(rt *rapid.T) {
						n := rapid.IntRange(1, 4).Draw(rt, "events")
						evs := make([]store.Event, n)
						for i := range evs {
							evs[i] = forgetEvent(rt)
						}
						if err := st.AppendEvents(ctx, time.Now().UnixMicro(), evs); err != nil {
							rt.Fatal(err)
						}
						for _, e := range evs {
							m.events = append(m.events, e)
						}
					},
					"step": func(rt *rapid.T) {
						r := rapid.IntRange(0, len(m.replicas)-1).Draw(rt, "replica")
						before := m.snapshot(rt)
						m.step(rt, r, -1)
						m.check(rt, true)
						m.checkAppended(rt, r, before.appended)
					},
					"crashed step": func(rt *rapid.T) {
						r := rapid.IntRange(0, 1).Draw(rt, "replica") // the one-transaction replicas
						at := rapid.IntRange(0, 12).Draw(rt, "crash at")
						before := m.snapshot(rt)
						m.step(rt, r, at)
						if after := m.snapshot(rt); after != before {
							rt.Fatalf("a step that crashed at operation %d changed the store: %+v, was %+v", at, after, before)
						}
						m.check(rt, false)
					},
					"concurrent steps": func(rt *rapid.T) {
						crash := rapid.IntRange(-1, 12).Draw(rt, "crash at")
						var wg sync.WaitGroup
						ok := make([]bool, 3)
						for r := range m.replicas {
							wg.Add(1)
							go func() {
								defer wg.Done()
								at := -1
								if r == 0 {
									at = crash
								}
								ok[r] = m.tryStep(r, at) == nil
							}()
						}
						wg.Wait()
						m.check(rt, ok[0] || ok[1] || ok[2])
					},
					"restart": func(rt *rapid.T) {
						m.restart(rt, rapid.IntRange(0, len(m.replicas)-1).Draw(rt, "replica"))
					},
				})
				m.step(rt, 1, -1)
				m.check(rt, true)
			})
		})
	}
}

// seqStore opens a fresh store of the named kind ("sqlite" or
// "postgres") and a log signer named origin, for the sequencer tests.
func seqStore(t *testing.T, name, origin string) (*store.DB, *proofs.Signer) {
	cfg := store.Config{Dialect: store.SQLite, DSN: filepath.Join(t.TempDir(), "lethe.db")}
	if name == "postgres" {
		cfg = store.Config{Dialect: store.Postgres, DSN: testenv.Postgres(t)}
	}
	st, err := store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	signer, err := audit.LoadOrCreateSigner(filepath.Join(t.TempDir(), "audit.key"), origin)
	if err != nil {
		t.Fatal(err)
	}
	return st, signer
}

// forgetEvent returns a new grain.forget event of memory default, with a
// leaf a proof can be made of.
func forgetEvent(t interface{ Fatal(args ...any) }) store.Event {
	id := proofs.NewEventID()
	h := sha256.Sum256([]byte(id))
	leaf, err := (&proofs.Leaf{V: proofs.LeafVersion, ID: id, Type: proofs.EventGrainForget, Memory: "default",
		Time: time.Now().UTC().Truncate(time.Second), Actor: "local", Hashes: []string{hex.EncodeToString(h[:])}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return store.Event{ID: id, Memory: "default", Type: string(proofs.EventGrainForget), Leaf: leaf}
}

// seqModel is the model: the events committed in this run, in commit
// order, and the checkpoints seen.
type seqModel struct {
	st       *store.DB
	signer   *proofs.Signer
	replicas [3]seqReplica
	events   []store.Event
	last     *audit.SignedCheckpoint
}

type seqReplica struct {
	log   *audit.EmbeddedLog
	seq   *audit.Sequencer
	crash *crashOutbox // nil for replica 2
}

// restart gives replica i a new log and sequencer (as a new process);
// replica 2 runs the step of four transactions.
func (m *seqModel) restart(t *rapid.T, i int) {
	el, err := audit.NewEmbeddedLog(m.st.Gorm(), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := outbox{at: m.st.Audit, now: time.Now}
	if i == 2 {
		m.replicas[i] = seqReplica{log: el, seq: audit.NewSequencer(audit.SequencerConfig{Outbox: base, Log: el, Signer: m.signer})}
		return
	}
	co := &crashOutbox{Outbox: atomicOutbox{outbox: base, st: m.st, log: el}}
	m.replicas[i] = seqReplica{log: el, crash: co, seq: audit.NewSequencer(audit.SequencerConfig{Outbox: co, Log: el, Signer: m.signer})}
}

var errCrash = errors.New("crash injected")

// tryStep runs a step of replica r; with at >= 0 the step's at-th operation
// on the outbox or the log fails as a crash would, or, when it has fewer,
// the step fails just before its commit.
func (m *seqModel) tryStep(r, at int) error {
	rep := m.replicas[r]
	if rep.crash != nil {
		rep.crash.arm(at)
	}
	return rep.seq.Step(context.Background())
}

func (m *seqModel) step(t *rapid.T, r, at int) {
	err := m.tryStep(r, at)
	switch {
	case at < 0 && err != nil:
		t.Fatalf("replica %d step: %v", r, err)
	case at >= 0 && !errors.Is(err, errCrash):
		t.Fatalf("replica %d step crashed at %d: got %v, want the crash", r, at, err)
	}
}

// seqSnapshot is what a step may change.
type seqSnapshot struct {
	next, appended, size, checkpoint uint64
	root                             [32]byte
	numbered                         int
}

func (m *seqModel) snapshot(t *rapid.T) seqSnapshot {
	ctx := context.Background()
	ob := outbox{at: m.st.Audit, now: time.Now}
	var s seqSnapshot
	var err error
	if s.next, s.appended, err = ob.Counters(ctx); err != nil {
		t.Fatal(err)
	}
	if s.size, s.root, err = m.replicas[0].log.Root(ctx); err != nil {
		t.Fatal(err)
	}
	cp, err := ob.LatestCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cp != nil {
		s.checkpoint = cp.Size
	}
	for _, e := range m.events {
		c, err := m.st.CommittedEvent(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if c.Sequenced {
			s.numbered++
		}
	}
	return s
}

// check compares the store with the model; complete says a step that
// began after every commit has committed.
func (m *seqModel) check(t *rapid.T, complete bool) {
	ctx := context.Background()
	s := m.snapshot(t)
	if s.appended > s.next || s.size != s.appended {
		t.Fatalf("counters next %d, appended %d, log size %d", s.next, s.appended, s.size)
	}
	ob := outbox{at: m.st.Audit, now: time.Now}
	cp, err := ob.LatestCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cp != nil {
		c, err := proofs.OpenCheckpoint(cp.Note, m.signer.VerifierKey(), m.signer.Name())
		if err != nil {
			t.Fatalf("checkpoint %d: %v", cp.Size, err)
		}
		if c.Size != cp.Size || c.Hash != cp.Root {
			t.Fatalf("checkpoint note says size %d, row says %d", c.Size, cp.Size)
		}
		if cp.Size == s.size && cp.Root != s.root {
			t.Fatalf("checkpoint of size %d has another root than the log", cp.Size)
		}
		if m.last != nil {
			if cp.Size < m.last.Size {
				t.Fatalf("latest checkpoint went back from %d to %d", m.last.Size, cp.Size)
			}
			p, err := m.replicas[0].log.ConsistencyProof(ctx, m.last.Size, cp.Size)
			if err != nil {
				t.Fatal(err)
			}
			if err := proofs.VerifyConsistency(m.last.Size, cp.Size, p, m.last.Root[:], cp.Root[:]); err != nil {
				t.Fatalf("checkpoint %d is not consistent with checkpoint %d: %v", cp.Size, m.last.Size, err)
			}
		}
		m.last = cp
	}
	// No sequencer claims a checkpoint the store does not hold, nor an
	// index an event does not have (Appended: what a receipt proves from
	// without reading the outbox).
	done, cancel := context.WithCancel(ctx)
	cancel()
	for i, r := range m.replicas {
		if err := r.seq.WaitCovered(done, s.checkpoint); !errors.Is(err, audit.ErrPending) {
			t.Fatalf("replica %d claims index %d covered; the latest checkpoint has size %d", i, s.checkpoint, s.checkpoint)
		}
		for _, e := range m.events {
			index, cp, ok := r.seq.Appended(e.ID)
			if !ok {
				continue
			}
			c, err := m.st.CommittedEvent(ctx, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !c.Sequenced || c.Index != index || cp.Size <= index || cp.Size > s.checkpoint {
				t.Fatalf("replica %d says event %s is leaf %d under checkpoint %d; the store has %+v and checkpoint %d", i, e.ID, index, cp.Size, c, s.checkpoint)
			}
			p, err := r.log.InclusionProof(ctx, index, cp.Size)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.Sum256(append([]byte{0}, e.Leaf...))
			if err := proofs.VerifyInclusion(index, cp.Size, h[:], p, cp.Root[:]); err != nil {
				t.Fatalf("replica %d: event %s at %d under its checkpoint %d: %v", i, e.ID, index, cp.Size, err)
			}
			// The receipt's proof (from the step's kept nodes when it is
			// one of the last, else read as stored) is the log's path.
			rp, err := r.seq.ProveAppended(ctx, index, e.Leaf, m.signer.SignLeaf(e.Leaf), cp)
			if err != nil {
				t.Fatalf("replica %d: receipt of event %s at %d under checkpoint %d: %v", i, e.ID, index, cp.Size, err)
			}
			if rp.LeafIndex != index || rp.TreeSize != cp.Size || !slices.EqualFunc(rp.Inclusion, p, bytes.Equal) {
				t.Fatalf("replica %d: receipt of event %s proves leaf %d in %d by %x; the log's path is %x", i, e.ID, rp.LeafIndex, rp.TreeSize, rp.Inclusion, p)
			}
		}
	}
	seen := map[uint64]string{}
	for _, e := range m.events {
		c, err := m.st.CommittedEvent(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Sequenced {
			if complete {
				t.Fatalf("event %s committed before a step is not numbered after it", e.ID)
			}
			continue
		}
		if other, ok := seen[c.Index]; ok {
			t.Fatalf("events %s and %s share leaf index %d", other, e.ID, c.Index)
		}
		seen[c.Index] = e.ID
		if c.Index >= s.size {
			if complete {
				t.Fatalf("event %s has index %d, log size is %d", e.ID, c.Index, s.size)
			}
			continue
		}
		leaf, err := m.replicas[0].log.Leaf(ctx, c.Index)
		if err != nil {
			t.Fatal(err)
		}
		if string(leaf) != string(e.Leaf) {
			t.Fatalf("leaf %d is %q, event %s has %q", c.Index, leaf, e.ID, e.Leaf)
		}
	}
	if complete {
		if s.next != s.size || s.checkpoint != s.size {
			t.Fatalf("after a step: next %d, log size %d, checkpoint %d", s.next, s.size, s.checkpoint)
		}
	}
}

// checkAppended checks that replica r, whose step has just committed,
// knows where every event it appended went (the events from leaf index
// from on): a receipt for them reads nothing from the outbox.
func (m *seqModel) checkAppended(t *rapid.T, r int, from uint64) {
	for _, e := range m.events {
		c, err := m.st.CommittedEvent(context.Background(), e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Sequenced || c.Index < from {
			continue
		}
		if _, _, ok := m.replicas[r].seq.Appended(e.ID); !ok {
			t.Fatalf("replica %d appended event %s (leaf %d) and does not know it", r, e.ID, c.Index)
		}
	}
}

// crashOutbox passes a step through to its Outbox, failing it as a crash
// would when armed (see seqModel.tryStep). Only the step of the replica
// that owns it uses it, one at a time.
type crashOutbox struct {
	audit.Outbox
	mu    sync.Mutex
	at, n int
}

func (c *crashOutbox) arm(at int) {
	c.mu.Lock()
	c.at, c.n = at, 0
	c.mu.Unlock()
}

// op counts an operation and fails the at-th.
func (c *crashOutbox) op() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.at >= 0 && c.n == c.at+1 {
		return fmt.Errorf("operation %d: %w", c.at, errCrash)
	}
	return nil
}

func (c *crashOutbox) Atomic(ctx context.Context, fn func(audit.Outbox, audit.Log) error) error {
	return c.Outbox.(audit.AtomicOutbox).Atomic(ctx, func(o audit.Outbox, l audit.Log) error {
		if err := fn(&crashOps{Outbox: o, c: c}, &crashLog{Log: l, c: c}); err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.at >= 0 && c.n <= c.at {
			return fmt.Errorf("before commit: %w", errCrash)
		}
		return nil
	})
}

// crashOps is the outbox inside a step's transaction.
type crashOps struct {
	audit.Outbox
	c *crashOutbox
}

func (o *crashOps) AssignSequence(ctx context.Context, max int) (int, error) {
	if err := o.c.op(); err != nil {
		return 0, err
	}
	return o.Outbox.AssignSequence(ctx, max)
}

func (o *crashOps) Counters(ctx context.Context) (uint64, uint64, error) {
	if err := o.c.op(); err != nil {
		return 0, 0, err
	}
	return o.Outbox.Counters(ctx)
}

func (o *crashOps) Sequenced(ctx context.Context, from uint64, max int) ([]audit.Sequenced, error) {
	if err := o.c.op(); err != nil {
		return nil, err
	}
	return o.Outbox.Sequenced(ctx, from, max)
}

func (o *crashOps) SetAppended(ctx context.Context, n uint64) error {
	if err := o.c.op(); err != nil {
		return err
	}
	return o.Outbox.SetAppended(ctx, n)
}

func (o *crashOps) LatestCheckpoint(ctx context.Context) (*audit.SignedCheckpoint, error) {
	if err := o.c.op(); err != nil {
		return nil, err
	}
	return o.Outbox.LatestCheckpoint(ctx)
}

func (o *crashOps) SaveCheckpoint(ctx context.Context, cp audit.SignedCheckpoint) error {
	if err := o.c.op(); err != nil {
		return err
	}
	return o.Outbox.SaveCheckpoint(ctx, cp)
}

// crashLog is the log inside a step's transaction.
type crashLog struct {
	audit.Log
	c *crashOutbox
}

func (l *crashLog) Append(ctx context.Context, start uint64, leaves [][]byte) error {
	if err := l.c.op(); err != nil {
		return err
	}
	return l.Log.Append(ctx, start, leaves)
}

// AppendedNodes passes the log view's nodes on (audit.NodeKeeper), so that
// the one-transaction replicas prove their receipts from them as a server
// does.
func (l *crashLog) AppendedNodes() (from, end uint64, nodes map[compact.NodeID][]byte) {
	if k, ok := l.Log.(audit.NodeKeeper); ok {
		return k.AppendedNodes()
	}
	return 0, 0, nil
}

func (l *crashLog) Root(ctx context.Context) (uint64, [32]byte, error) {
	if err := l.c.op(); err != nil {
		return 0, [32]byte{}, err
	}
	return l.Log.Root(ctx)
}

func (l *crashLog) ConsistencyProof(ctx context.Context, from, to uint64) ([][]byte, error) {
	if err := l.c.op(); err != nil {
		return nil, err
	}
	return l.Log.ConsistencyProof(ctx, from, to)
}

// TestReceiptFromKeptNodes checks that a receipt for an event the last
// step of this process appended is proved from the nodes that step
// computed, with nothing read from the log: with every leaf and node row
// of the log deleted behind it, the proof is still made and verifies
// offline under the log key, while a sequencer of another process (which
// kept nothing) reads the rows and fails. Both stores.
func TestReceiptFromKeptNodes(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st, signer := seqStore(t, name, "lethe.test/kept-nodes")
			sequencer := func() *audit.Sequencer {
				el, err := audit.NewEmbeddedLog(st.Gorm(), nil)
				if err != nil {
					t.Fatal(err)
				}
				ob := outbox{at: st.Audit, now: time.Now}
				return audit.NewSequencer(audit.SequencerConfig{Outbox: atomicOutbox{outbox: ob, st: st, log: el}, Log: el, Signer: signer})
			}
			seq := sequencer()
			var last []store.Event
			for _, n := range []int{5, 1, 3} { // the last step's events are proved
				last = make([]store.Event, n)
				for i := range last {
					last[i] = forgetEvent(t)
				}
				if err := st.AppendEvents(ctx, time.Now().UnixMicro(), last); err != nil {
					t.Fatal(err)
				}
				if err := seq.Step(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for _, table := range []string{"audit_log_nodes", "audit_log_leaves"} {
				if err := st.Gorm().Exec("DELETE FROM " + table).Error; err != nil {
					t.Fatal(err)
				}
			}
			other := sequencer()
			for _, e := range last {
				index, cp, ok := seq.Appended(e.ID)
				if !ok || cp.Size != 9 || index < 6 {
					t.Fatalf("event %s: Appended says leaf %d under checkpoint %+v, ok %v; want one of 6-8 under size 9", e.ID, index, cp, ok)
				}
				sig := signer.SignLeaf(e.Leaf)
				p, err := seq.ProveAppended(ctx, index, e.Leaf, sig, cp)
				if err != nil {
					t.Fatalf("event %s at %d: %v (read the deleted rows?)", e.ID, index, err)
				}
				if _, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: signer.VerifierKey(), Origin: signer.Name()}); err != nil {
					t.Fatalf("event %s at %d: the proof does not verify: %v", e.ID, index, err)
				}
				if _, err := other.ProveAppended(ctx, index, e.Leaf, sig, cp); err == nil {
					t.Fatalf("event %s at %d: a sequencer that kept nothing proved it with the log's rows deleted", e.ID, index)
				}
			}
		})
	}
}
