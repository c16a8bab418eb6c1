package audit

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/transparency-dev/merkle/compact"

	"github.com/lethe-io/lethe/internal/crashpoint"
	"github.com/lethe-io/lethe/proofs"
)

// Outbox is where committed events wait for the log: the store implements
// it. Events enter it in the same transaction as the state change they
// record; the Sequencer numbers them and moves them into the Log.
type Outbox interface {
	// AssignSequence numbers up to max committed, unnumbered events with
	// the next consecutive leaf indices (one assigner at a time across
	// replicas) and returns how many it numbered.
	AssignSequence(ctx context.Context, max int) (int, error)
	// Sequenced returns up to max numbered events from index from on, in
	// index order.
	Sequenced(ctx context.Context, from uint64, max int) ([]Sequenced, error)
	// Counters returns the next index to assign and how many leaves the log
	// has accepted.
	Counters(ctx context.Context) (next, appended uint64, err error)
	// SetAppended records that the log holds the first n leaves; it never
	// moves backwards.
	SetAppended(ctx context.Context, n uint64) error
	// LatestCheckpoint returns the largest checkpoint lethe signed, or nil.
	LatestCheckpoint(ctx context.Context) (*SignedCheckpoint, error)
	// SaveCheckpoint stores a signed checkpoint; saving a size twice keeps
	// the first.
	SaveCheckpoint(ctx context.Context, c SignedCheckpoint) error
}

// AtomicOutbox is an Outbox that shares its database with the Log. Atomic
// runs fn in one transaction of that database, with the outbox and the log
// both bound to it: fn's writes commit together when fn returns nil, and
// none of them when it fails (or the process dies). A Sequencer given one
// (and no CosignFunc) runs each step (numbering, append, appended counter,
// checkpoint) in one transaction: one commit, one flush.
type AtomicOutbox interface {
	Outbox
	Atomic(ctx context.Context, fn func(o Outbox, l Log) error) error
}

// Sequenced is an event with its leaf index.
type Sequenced struct {
	Index uint64
	Leaf  []byte
	// EventID is the event's id (see Sequencer.Appended).
	EventID string
}

// SignedCheckpoint is a checkpoint and its signed note.
type SignedCheckpoint struct {
	Size uint64
	Root [32]byte
	Note []byte
}

// Sequencer moves events from the Outbox into the Log and signs checkpoints.
// Every step is idempotent: a process killed between commit and append, or
// between append and checkpoint, resumes where the database says it stopped,
// and the log refuses nothing it already holds identically.
type Sequencer struct {
	outbox Outbox
	log    Log
	signer *proofs.Signer
	origin string
	logger *slog.Logger
	cosign CosignFunc

	kick    chan struct{}
	mu      sync.Mutex
	cond    *sync.Cond
	lastErr error
	// begun and ended count the steps of Run (see WaitStep).
	begun, ended uint64
	// latest is the latest checkpoint this process's steps signed or read
	// (WaitCovered waits for it to cover an index); appended holds the
	// leaf indices of the events they appended, by event id, in two
	// generations of at most recentEvents each (see Appended).
	latest           *SignedCheckpoint
	appended, before map[string]uint64
	// trees are the last keptSteps committed steps' nodes (see stepTree),
	// next the slot the next one takes.
	trees [keptSteps]*stepTree
	next  int
}

// stepTree is what a committed step of this process knew of the tree when
// it signed cp: the nodes its log view's last append knew and made, which
// hold the audit path, against cp, of every leaf that append added (leaf
// indices from to cp.Size). A receipt for such a leaf is proved from them
// without reading the log (see ProveAppended).
type stepTree struct {
	cp    *SignedCheckpoint
	from  uint64
	nodes map[compact.NodeID][]byte
}

// keptSteps bounds the steps whose nodes are kept: a waiter proves its
// event right after the step that appended it ends, so only the last few
// are needed (the others are read from the log). A step's nodes number
// about twice its events, plus up to 64.
const keptSteps = 4

// NodeKeeper is a log view whose last append's nodes can be kept once its
// transaction has committed (EmbeddedLog.AppendedNodes). A view passed to
// an AtomicOutbox's fn that is one (or wraps one and passes the method on)
// lets the sequencer prove its appended leaves without reading them back.
type NodeKeeper interface {
	AppendedNodes() (from, end uint64, nodes map[compact.NodeID][]byte)
}

// recentEvents bounds a generation of Sequencer.appended: a waiter looks
// its event up once the step that appended it has ended, so only the last
// steps' events are needed; an event no longer there is read from the
// outbox instead.
const recentEvents = 4096

// SequencerConfig configures a Sequencer.
type SequencerConfig struct {
	Outbox Outbox
	Log    Log
	Signer *proofs.Signer
	// Origin is the checkpoint origin line (default: the signer's name).
	Origin string
	Logger *slog.Logger
	// Cosign, if set, has each new checkpoint cosigned by witnesses before
	// it is saved (see CosignFunc).
	Cosign CosignFunc
}

// CosignFunc submits a checkpoint note lethe signed for a tree of size to
// witnesses and returns the note with their cosignature lines appended. A
// non-nil error (too few witnesses cosigned) keeps the checkpoint unsaved:
// the sequencer retries at its next step, and proofs wait for a checkpoint
// the witness policy accepts.
type CosignFunc func(ctx context.Context, note []byte, size uint64) ([]byte, error)

// NewSequencer returns a Sequencer; call Run to start it.
func NewSequencer(cfg SequencerConfig) *Sequencer {
	s := &Sequencer{outbox: cfg.Outbox, log: cfg.Log, signer: cfg.Signer, origin: cfg.Origin, logger: cfg.Logger,
		cosign: cfg.Cosign, kick: make(chan struct{}, 1)}
	if s.origin == "" {
		s.origin = cfg.Signer.Name()
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// Origin returns the checkpoint origin.
func (s *Sequencer) Origin() string { return s.origin }

// Kick asks the running sequencer to step now.
func (s *Sequencer) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Run steps whenever kicked and at least every interval, until ctx ends.
// Errors are logged and retried; they never lose events, which stay in
// the outbox.
func (s *Sequencer) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.mu.Lock()
		s.begun++
		s.mu.Unlock()
		err := s.Step(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger.Warn("audit sequencer step failed; events stay in the outbox", slog.Any("error", err))
		}
		s.mu.Lock()
		s.lastErr = err
		s.ended = s.begun
		s.cond.Broadcast()
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-t.C:
		}
	}
}

// batch bounds the events moved per round.
const batch = 1000

// Step numbers waiting events, appends numbered ones the log lacks, waits
// for the log to integrate them (bounded), and signs a new checkpoint. With
// an AtomicOutbox and no cosigner all of it is one transaction, and a crash
// leaves the step undone, to be done again; otherwise each part commits on
// its own and the next step resumes where the database says the last one
// stopped.
func (s *Sequencer) Step(ctx context.Context) error {
	if a, ok := s.outbox.(AtomicOutbox); ok && s.cosign == nil {
		var cp *SignedCheckpoint
		var evs []Sequenced
		var tree *stepTree
		err := a.Atomic(ctx, func(o Outbox, l Log) error {
			var err error
			cp, evs, err = s.step(ctx, o, l)
			tree = nil
			if k, ok := l.(NodeKeeper); ok && err == nil && cp != nil && len(evs) > 0 {
				if from, end, nodes := k.AppendedNodes(); nodes != nil && end == cp.Size {
					tree = &stepTree{cp: cp, from: from, nodes: nodes}
				}
			}
			return err
		})
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			crashpoint.Hit(crashpoint.SequencerCommitted)
		}
		s.noteStep(cp, evs, tree)
		return nil
	}
	cp, evs, err := s.step(ctx, s.outbox, s.log)
	if err == nil && len(evs) > 0 {
		crashpoint.Hit(crashpoint.SequencerCommitted)
	}
	s.noteStep(cp, evs, nil) // cp is nil when the step failed
	return err
}

// step is Step on outbox o and log l; it returns the latest checkpoint
// (nil when the log is empty) and the events it appended, which the caller
// notes (noteStep) once they are committed.
func (s *Sequencer) step(ctx context.Context, o Outbox, l Log) (*SignedCheckpoint, []Sequenced, error) {
	for {
		n, err := o.AssignSequence(ctx, batch)
		if err != nil {
			return nil, nil, err
		}
		if n < batch {
			break
		}
	}
	next, appended, err := o.Counters(ctx)
	if err != nil {
		return nil, nil, err
	}
	var all []Sequenced
	for appended < next {
		evs, err := o.Sequenced(ctx, appended, batch)
		if err != nil {
			return nil, nil, err
		}
		if len(evs) == 0 || evs[0].Index != appended {
			return nil, nil, fmt.Errorf("audit: outbox has no event at index %d", appended)
		}
		leaves := make([][]byte, 0, len(evs))
		for i, e := range evs {
			if e.Index != appended+uint64(i) {
				return nil, nil, fmt.Errorf("audit: outbox gap at index %d", appended+uint64(i))
			}
			leaves = append(leaves, e.Leaf)
		}
		if err := l.Append(ctx, appended, leaves); err != nil {
			return nil, nil, err
		}
		crashpoint.Hit(crashpoint.SequencerAppended)
		appended += uint64(len(leaves))
		if err := o.SetAppended(ctx, appended); err != nil {
			return nil, nil, err
		}
		crashpoint.Hit(crashpoint.SequencerCounted)
		// The ids and indices only, of the last recentEvents: a backlog
		// (a restart after a long outage) is not kept whole.
		for _, e := range evs {
			all = append(all, Sequenced{Index: e.Index, EventID: e.EventID})
		}
		if len(all) > recentEvents {
			all = append(all[:0], all[len(all)-recentEvents:]...)
		}
	}
	if appended == 0 {
		return nil, nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = l.WaitIntegrated(wctx, appended)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("audit: waiting for the log to integrate %d leaves: %w", appended, err)
	}
	cp, err := s.signCheckpoint(ctx, o, l)
	return cp, all, err
}

// SignCheckpoint signs a checkpoint for the log's current integrated size,
// after checking that the log is consistent with the last checkpoint lethe
// signed. It returns the latest checkpoint (possibly the old one when the
// log has not grown).
func (s *Sequencer) SignCheckpoint(ctx context.Context) (*SignedCheckpoint, error) {
	cp, err := s.signCheckpoint(ctx, s.outbox, s.log)
	s.noteStep(cp, nil, nil)
	return cp, err
}

// signCheckpoint is SignCheckpoint on outbox o and log l, without noting
// the checkpoint as covered (the caller does once it is committed).
func (s *Sequencer) signCheckpoint(ctx context.Context, o Outbox, l Log) (*SignedCheckpoint, error) {
	size, root, err := l.Root(ctx)
	if err != nil {
		return nil, err
	}
	last, err := o.LatestCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	if last != nil {
		if size < last.Size {
			return nil, fmt.Errorf("audit: log size %d is below the signed checkpoint's %d: refusing to sign", size, last.Size)
		}
		if size == last.Size {
			if root != last.Root {
				return nil, fmt.Errorf("audit: log root at size %d differs from the signed checkpoint: refusing to sign", size)
			}
			return last, nil
		}
		p, err := l.ConsistencyProof(ctx, last.Size, size)
		if err != nil {
			return nil, err
		}
		if err := proofs.VerifyConsistency(last.Size, size, p, last.Root[:], root[:]); err != nil {
			return nil, fmt.Errorf("audit: log is not consistent with the last signed checkpoint: refusing to sign: %w", err)
		}
	}
	if size == 0 {
		return nil, nil
	}
	note, err := s.signer.SignCheckpoint(proofs.Checkpoint{Origin: s.origin, Size: size, Hash: root})
	if err != nil {
		return nil, err
	}
	if s.cosign != nil {
		if note, err = s.cosign(ctx, note, size); err != nil {
			return nil, fmt.Errorf("audit: checkpoint of size %d not saved: %w", size, err)
		}
	}
	crashpoint.Hit(crashpoint.SequencerSigned)
	cp := SignedCheckpoint{Size: size, Root: root, Note: note}
	if err := o.SaveCheckpoint(ctx, cp); err != nil {
		return nil, err
	}
	return &cp, nil
}

// noteStep notes a committed step: cp, the latest checkpoint (nil when
// the log is empty), evs, the events the step appended, which cp or a
// later checkpoint covers, and tree, the nodes it knew at cp (or nil).
func (s *Sequencer) noteStep(cp *SignedCheckpoint, evs []Sequenced, tree *stepTree) {
	if cp == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tree != nil {
		s.trees[s.next%keptSteps] = tree
		s.next++
	}
	if s.latest == nil || cp.Size > s.latest.Size {
		s.latest = cp
		s.cond.Broadcast()
	}
	for _, e := range evs {
		if e.EventID == "" || e.Index >= s.latest.Size {
			continue
		}
		if s.appended == nil || len(s.appended) >= recentEvents {
			s.before, s.appended = s.appended, make(map[string]uint64, min(len(evs), recentEvents))
		}
		s.appended[e.EventID] = e.Index
	}
}

// Appended returns the leaf index of event id and a signed checkpoint that
// covers it, when one of this process's recent steps appended the event:
// a receipt's proof then needs no read of the outbox (see
// Journal.Receipt). The checkpoint is the one the appending step signed
// while its nodes are kept (ProveAppended then reads nothing), else the
// latest. ok is false otherwise, and the caller reads the outbox.
func (s *Sequencer) Appended(id string) (index uint64, cp *SignedCheckpoint, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest == nil {
		return 0, nil, false
	}
	if index, ok = s.appended[id]; !ok {
		index, ok = s.before[id]
	}
	if !ok || index >= s.latest.Size {
		return 0, nil, false
	}
	if t := s.treeOf(index); t != nil {
		return index, t.cp, true
	}
	return index, s.latest, true
}

// treeOf returns the kept step whose append added leaf index, or nil;
// s.mu is held.
func (s *Sequencer) treeOf(index uint64) *stepTree {
	for _, t := range s.trees {
		if t != nil && t.from <= index && index < t.cp.Size {
			return t
		}
	}
	return nil
}

// keptPath returns the audit path of leaf index against cp from the nodes
// of the kept step that signed cp, or false when no kept step did or a
// node is missing.
func (s *Sequencer) keptPath(index uint64, cp *SignedCheckpoint) ([][]byte, bool) {
	s.mu.Lock()
	t := s.treeOf(index)
	s.mu.Unlock()
	if t == nil || t.cp != cp {
		return nil, false
	}
	return pathFrom(t.nodes, index, cp.Size) // nodes is read only: no lock
}

// ErrPending means an event is committed but no signed checkpoint covers it
// yet; its proof can be fetched later.
var ErrPending = errors.New("audit: event not yet covered by a signed checkpoint")

// WaitCovered waits until a signed checkpoint covers leaf index, or ctx
// ends (then ErrPending). It does not kick the sequencer: see WaitStep.
func (s *Sequencer) WaitCovered(ctx context.Context, index uint64) error {
	return s.waitFor(ctx, func() bool { return s.latest != nil && s.latest.Size > index })
}

// StepMark returns the number of the next step of Run to begin. Every
// step numbered from it begins after the call, so it sees every event
// committed before the call (see WaitStep).
func (s *Sequencer) StepMark() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begun + 1
}

// Steps returns how many steps Run has begun.
func (s *Sequencer) Steps() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.begun
}

// WaitStep waits until the step numbered mark (see StepMark) has ended, or
// until ctx ends (then ErrPending). A waiter for an event's number waits
// here instead of polling the outbox. The waiter takes the mark once its
// event is committed, then kicks: a kick after the mark always begins a
// step numbered mark or more (now, or after the running one). Neither
// wait kicks by itself: a kick while the step the waiter needs is running
// (or has just taken the previous kick, before counting itself begun)
// would queue a step that nobody waits for, and the next writer would
// wait behind it; one receipt cost two steps.
func (s *Sequencer) WaitStep(ctx context.Context, mark uint64) error {
	return s.waitFor(ctx, func() bool { return s.ended >= mark })
}

// waitFor waits until done, called with s.mu held, reports true, or until
// ctx ends (then ErrPending).
func (s *Sequencer) waitFor(ctx context.Context, done func() bool) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !done() {
		if ctx.Err() != nil {
			return ErrPending
		}
		s.cond.Wait()
	}
	return nil
}

// Prove builds the proof of the leaf at index against the latest signed
// checkpoint, or fails with ErrPending if none covers it yet. The inclusion
// proof is verified before it is returned.
func (s *Sequencer) Prove(ctx context.Context, index uint64, leaf []byte) (*proofs.Proof, error) {
	cp, err := s.outbox.LatestCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	if cp == nil || cp.Size <= index {
		return nil, ErrPending
	}
	return s.ProveAt(ctx, index, leaf, cp)
}

// ProveAt builds the proof of the leaf at index against checkpoint cp.
func (s *Sequencer) ProveAt(ctx context.Context, index uint64, leaf []byte, cp *SignedCheckpoint) (*proofs.Proof, error) {
	incl, err := s.log.InclusionProof(ctx, index, cp.Size)
	if err != nil {
		return nil, err
	}
	return s.proof(index, leaf, s.signer.SignLeaf(leaf), cp, incl)
}

// storedPaths is a Log whose audit paths can be read as stored, without
// the check against its stored roots that InclusionProof makes (the
// embedded log).
type storedPaths interface {
	storedInclusionProof(ctx context.Context, index, size uint64) ([][]byte, error)
}

// ProveAppended is ProveAt for a checkpoint this process's sequencer signed
// (Appended), with sig the leaf's signature. When the step that signed cp
// is one of the last keptSteps and appended the leaf, the path is built
// from the nodes that step computed and wrote: no read at all. Otherwise
// the step that signed cp wrote the tree's nodes and the root it signed in
// one transaction, so the embedded log's path is read as stored, in one
// read instead of two or three (InclusionProof reads the log's state, and
// an older root when cp is not the latest, to check the path against
// them). Either path is verified against cp's root before the proof is
// returned, as every proof is.
func (s *Sequencer) ProveAppended(ctx context.Context, index uint64, leaf, sig []byte, cp *SignedCheckpoint) (*proofs.Proof, error) {
	if incl, ok := s.keptPath(index, cp); ok {
		return s.proof(index, leaf, sig, cp, incl)
	}
	read := s.log.InclusionProof
	if sp, ok := s.log.(storedPaths); ok {
		read = sp.storedInclusionProof
	}
	incl, err := read(ctx, index, cp.Size)
	if err != nil {
		return nil, err
	}
	return s.proof(index, leaf, sig, cp, incl)
}

// proof checks the audit path incl of leaf at index against cp's root and
// returns the proof.
func (s *Sequencer) proof(index uint64, leaf, sig []byte, cp *SignedCheckpoint, incl [][]byte) (*proofs.Proof, error) {
	h := sha256.Sum256(append([]byte{0}, leaf...))
	if err := proofs.VerifyInclusion(index, cp.Size, h[:], incl, cp.Root[:]); err != nil {
		return nil, fmt.Errorf("audit: log returned a bad inclusion proof: %w", err)
	}
	return proofs.NewProof(leaf, sig, index, cp.Size, incl, cp.Note)
}
