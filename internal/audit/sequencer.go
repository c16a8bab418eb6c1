package audit

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

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

// Sequenced is an event with its leaf index.
type Sequenced struct {
	Index uint64
	Leaf  []byte
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

	kick chan struct{}
	mu   sync.Mutex
	cond *sync.Cond
	// covered is the size of the latest checkpoint this process knows of.
	covered uint64
	lastErr error
	// begun and ended count the steps of Run (see WaitStep).
	begun, ended uint64
}

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
// for the log to integrate them (bounded), and signs a new checkpoint.
func (s *Sequencer) Step(ctx context.Context) error {
	for {
		n, err := s.outbox.AssignSequence(ctx, batch)
		if err != nil {
			return err
		}
		if n < batch {
			break
		}
	}
	next, appended, err := s.outbox.Counters(ctx)
	if err != nil {
		return err
	}
	for appended < next {
		evs, err := s.outbox.Sequenced(ctx, appended, batch)
		if err != nil {
			return err
		}
		if len(evs) == 0 || evs[0].Index != appended {
			return fmt.Errorf("audit: outbox has no event at index %d", appended)
		}
		leaves := make([][]byte, 0, len(evs))
		for i, e := range evs {
			if e.Index != appended+uint64(i) {
				return fmt.Errorf("audit: outbox gap at index %d", appended+uint64(i))
			}
			leaves = append(leaves, e.Leaf)
		}
		if err := s.log.Append(ctx, appended, leaves); err != nil {
			return err
		}
		appended += uint64(len(leaves))
		if err := s.outbox.SetAppended(ctx, appended); err != nil {
			return err
		}
	}
	if appended == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = s.log.WaitIntegrated(wctx, appended)
	cancel()
	if err != nil {
		return fmt.Errorf("audit: waiting for the log to integrate %d leaves: %w", appended, err)
	}
	_, err = s.SignCheckpoint(ctx)
	return err
}

// SignCheckpoint signs a checkpoint for the log's current integrated size,
// after checking that the log is consistent with the last checkpoint lethe
// signed. It returns the latest checkpoint (possibly the old one when the
// log has not grown).
func (s *Sequencer) SignCheckpoint(ctx context.Context) (*SignedCheckpoint, error) {
	size, root, err := s.log.Root(ctx)
	if err != nil {
		return nil, err
	}
	last, err := s.outbox.LatestCheckpoint(ctx)
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
			s.noteCovered(size)
			return last, nil
		}
		p, err := s.log.ConsistencyProof(ctx, last.Size, size)
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
	cp := SignedCheckpoint{Size: size, Root: root, Note: note}
	if err := s.outbox.SaveCheckpoint(ctx, cp); err != nil {
		return nil, err
	}
	s.noteCovered(size)
	return &cp, nil
}

func (s *Sequencer) noteCovered(size uint64) {
	s.mu.Lock()
	if size > s.covered {
		s.covered = size
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

// ErrPending means an event is committed but no signed checkpoint covers it
// yet; its proof can be fetched later.
var ErrPending = errors.New("audit: event not yet covered by a signed checkpoint")

// WaitCovered waits until a signed checkpoint covers leaf index, or ctx
// ends (then ErrPending).
func (s *Sequencer) WaitCovered(ctx context.Context, index uint64) error {
	s.Kick()
	return s.waitFor(ctx, func() bool { return s.covered > index })
}

// WaitStep kicks the sequencer and waits until a step of Run that began
// after the call has ended (so it saw every event committed before the
// call), or until ctx ends (then ErrPending). A waiter for an event's
// number waits here instead of polling the outbox.
func (s *Sequencer) WaitStep(ctx context.Context) error {
	s.mu.Lock()
	target := s.begun + 1
	s.mu.Unlock()
	s.Kick()
	return s.waitFor(ctx, func() bool { return s.ended >= target })
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
	h := sha256.Sum256(append([]byte{0}, leaf...))
	if err := proofs.VerifyInclusion(index, cp.Size, h[:], incl, cp.Root[:]); err != nil {
		return nil, fmt.Errorf("audit: log returned a bad inclusion proof: %w", err)
	}
	return proofs.NewProof(leaf, s.signer.SignLeaf(leaf), index, cp.Size, incl, cp.Note)
}
