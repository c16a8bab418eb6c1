package lethe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// Proof is a signed erasure proof that an auditor verifies offline with
// "lethe verify" and the log's public key.
type Proof = proofs.Proof

type actorKey struct{}

// WithActor returns a context whose audit events name actor (an API token
// id, never a person) as their cause. Without it events say "local".
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

func actorOf(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return "local"
}

// openAudit sets up the signing key, the log backend and the sequencer.
func (db *DB) openAudit(ctx context.Context, cfg *Config) error {
	signer, err := loadOrCreateSigner(cfg.AuditKeyFile, cfg.AuditOrigin)
	if err != nil {
		return err
	}
	var log audit.Log
	if cfg.TrillianAddr != "" {
		conn, err := grpc.NewClient(cfg.TrillianAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("connect to trillian: %w", err)
		}
		tl, err := audit.NewTrillianLog(ctx, conn, cfg.TrillianTreeID, audit.TrillianOptions{})
		if err != nil {
			conn.Close()
			return err
		}
		db.closers = append(db.closers, conn.Close)
		log = tl
	} else {
		el, err := audit.NewEmbeddedLog(db.store.Gorm())
		if err != nil {
			return err
		}
		log = el
	}
	db.log = log
	db.signer = signer
	cosign, err := newCosigner(cfg, log, db.logger)
	if err != nil {
		return err
	}
	db.seq = audit.NewSequencer(audit.SequencerConfig{Outbox: outbox{db.store}, Log: log, Signer: signer,
		Origin: cfg.AuditOrigin, Logger: db.logger, Cosign: cosign})
	db.store.SetKeyEvent(func(ctx context.Context, r keys.Record) (store.Event, error) {
		return db.event(ctx, proofs.EventKeyCreate, r.Memory, func(l *proofs.Leaf) {
			l.KeyFingerprints = []string{r.Fingerprint}
		})
	})
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.seq.Run(runCtx, 500*time.Millisecond)
	}()
	db.stopSequencer = func() {
		cancel()
		<-done
		// Drain: move what is committed into the log before closing.
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		if err := db.seq.Step(dctx); err != nil {
			db.logger.Warn("audit outbox not drained at close; it resumes at next start", "error", err)
		}
	}
	return nil
}

// loadOrCreateSigner reads the note signing key at path, creating one
// (named origin, or "lethe-<random>") with mode 0600 if it does not exist.
func loadOrCreateSigner(path, origin string) (*proofs.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		name := origin
		if name == "" {
			name = "lethe-" + proofs.NewEventID()[:12]
		}
		skey, _, err := proofs.GenerateKey(name)
		if err != nil {
			return nil, fmt.Errorf("generate audit signing key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return loadOrCreateSigner(path, origin)
		}
		if err != nil {
			return nil, fmt.Errorf("create audit signing key: %w", err)
		}
		_, werr := f.WriteString(skey + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("write audit signing key: %w", werr)
		}
		return proofs.NewSigner(skey)
	}
	if err != nil {
		return nil, fmt.Errorf("read audit signing key: %w", err)
	}
	s, err := proofs.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("audit signing key %s: %w", path, err)
	}
	if origin != "" && s.Name() != origin {
		return nil, fmt.Errorf("audit signing key %s is named %q, but the configured origin is %q", path, s.Name(), origin)
	}
	return s, nil
}

// event builds an audit event of type typ in memory; fill adds the
// event-specific fields. The leaf never carries personal data: only
// hashes, counts, digests, fingerprints and commitments.
func (db *DB) event(ctx context.Context, typ proofs.EventType, memory string, fill func(*proofs.Leaf)) (store.Event, error) {
	l := &proofs.Leaf{V: proofs.LeafVersion, ID: proofs.NewEventID(), Type: typ, Memory: memory,
		Time: db.now().UTC().Truncate(time.Second), Actor: actorOf(ctx)}
	if fill != nil {
		fill(l)
	}
	b, err := l.Marshal()
	if err != nil {
		return store.Event{}, grains.Wrap(grains.CodeInternal, "build audit event", err)
	}
	return store.Event{ID: l.ID, Memory: memory, Type: string(typ), Leaf: b}, nil
}

// maxLeafHashes is the most grain hashes a leaf lists; larger events carry
// a count and a digest of the sorted list instead.
const maxLeafHashes = 256

func setHashes(l *proofs.Leaf, hashes []string) {
	if len(hashes) <= maxLeafHashes {
		l.Hashes = hashes
		return
	}
	n := uint64(len(hashes))
	l.Count, l.Digest = &n, proofs.HashesDigest(hashes)
}

// Receipt is what an audited destructive call returns: the event, and its
// proof once a signed checkpoint covers it.
type Receipt struct {
	// EventID names the audit event; "lethe audit proof --event ID" fetches
	// its proof later if Pending.
	EventID string `json:"event_id"`
	// SubjectNonce (hex) opens the subject commitment in the leaf, for the
	// caller alone: it is stored nowhere.
	SubjectNonce string `json:"subject_nonce,omitempty"`
	// Proof is the signed proof, or nil while Pending.
	Proof *Proof `json:"proof,omitempty"`
	// TlogProof is Proof as a c2sp.org/tlog-proof@v1 text file (see
	// proofs.Proof.MarshalTlogProof), which "lethe verify" also reads.
	TlogProof string `json:"tlog_proof,omitempty"`
	// Pending is true when no checkpoint covered the event within
	// Config.ProofWait.
	Pending bool `json:"pending"`
	// Leaf and LeafSignature are the signed receipt: the exact leaf and the
	// log key's signature over it, available even while Pending.
	Leaf          []byte `json:"leaf"`
	LeafSignature []byte `json:"leaf_signature"`
}

// receipt waits up to Config.ProofWait for a checkpoint to cover event id
// and returns its receipt.
func (db *DB) receipt(ctx context.Context, id string, leaf []byte) (*Receipt, error) {
	r := &Receipt{EventID: id, Leaf: leaf, LeafSignature: db.signer.SignLeaf(leaf)}
	p, err := db.waitProof(ctx, id, db.proofWait)
	switch {
	case err == nil:
		r.Proof = p
		r.TlogProof, err = tlogProof(p)
		if err != nil {
			return nil, err
		}
	case grains.ErrorCode(err) == grains.CodePending:
		r.Pending = true
	default:
		return nil, err
	}
	return r, nil
}

// waitProof returns the proof of event id, waiting up to wait for a signed
// checkpoint to cover it; past that it fails with code pending. Reads use
// ctx; only the waiting is bounded.
func (db *DB) waitProof(ctx context.Context, id string, wait time.Duration) (*Proof, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	db.seq.Kick()
	for {
		p, err := db.ProofByEvent(ctx, id)
		if grains.ErrorCode(err) != grains.CodePending || wctx.Err() != nil {
			return p, err
		}
		ev, err := db.store.EventByID(ctx, id)
		if err != nil {
			return nil, err
		}
		if ev.Seq != nil {
			if err := db.seq.WaitCovered(wctx, uint64(*ev.Seq)); err != nil {
				return nil, pendingError(id)
			}
			continue
		}
		// Not numbered yet: the next step of the sequencer numbers it
		// (and signs a checkpoint over it).
		if err := db.seq.WaitStep(wctx); err != nil {
			return nil, pendingError(id)
		}
	}
}

func pendingError(id string) error {
	return &grains.Error{Code: grains.CodePending, Message: "event " + id + " is committed but not yet covered by a signed checkpoint",
		Hint: "fetch its proof later with 'lethe audit proof --event " + id + "'"}
}

// ProofByEvent returns the proof of an audit event against the latest
// signed checkpoint, or an error with code pending if none covers it yet.
func (db *DB) ProofByEvent(ctx context.Context, eventID string) (*Proof, error) {
	ev, err := db.store.EventByID(ctx, eventID)
	if err != nil {
		return nil, err
	}
	if ev.Seq == nil {
		return nil, pendingError(eventID)
	}
	p, err := db.seq.Prove(ctx, uint64(*ev.Seq), ev.Leaf)
	if errors.Is(err, audit.ErrPending) {
		return nil, pendingError(eventID)
	}
	return p, auditErr(err)
}

// Proof returns the proof of the leaf at index against the signed
// checkpoint of size (0: the latest).
func (db *DB) Proof(ctx context.Context, index, size uint64) (*Proof, error) {
	cp, err := db.checkpointAt(ctx, size)
	if err != nil {
		return nil, err
	}
	if index >= cp.Size {
		return nil, grains.Errorf(grains.CodeInvalidArgument, "index %d is not below tree size %d", index, cp.Size)
	}
	leaf, err := db.log.Leaf(ctx, index)
	if err != nil {
		return nil, auditErr(err)
	}
	p, err := db.seq.ProveAt(ctx, index, leaf, cp)
	return p, auditErr(err)
}

func (db *DB) checkpointAt(ctx context.Context, size uint64) (*audit.SignedCheckpoint, error) {
	var row *store.CheckpointRow
	var err error
	if size == 0 {
		row, err = db.store.LatestCheckpoint(ctx)
		if err == nil && row == nil {
			err = grains.Errorf(grains.CodeNotFound, "the audit log is empty")
		}
	} else if size > math.MaxInt64 {
		err = grains.FieldError(grains.CodeInvalidArgument, "size", "must be at most 2^63-1")
	} else {
		row, err = db.store.CheckpointAt(ctx, int64(size))
	}
	if err != nil {
		return nil, err
	}
	return signedOf(row), nil
}

// signedOf converts a stored checkpoint.
func signedOf(row *store.CheckpointRow) *audit.SignedCheckpoint {
	cp := &audit.SignedCheckpoint{Size: uint64(row.Size), Note: row.Note}
	copy(cp.Root[:], row.Root)
	return cp
}

// AuditKey returns the log's public key as a note verifier key
// (name+hash+base64), for "lethe verify --log-key".
func (db *DB) AuditKey() string { return db.signer.VerifierKey() }

// Checkpoint returns the latest signed checkpoint note (c2sp.org/tlog-checkpoint).
func (db *DB) Checkpoint(ctx context.Context) ([]byte, error) {
	db.seq.Kick()
	cp, err := db.checkpointAt(ctx, 0)
	if err != nil {
		return nil, err
	}
	return cp.Note, nil
}

// AuditEntry is one leaf of the audit log with the log key's signature.
type AuditEntry struct {
	Index     uint64 `json:"index"`
	Leaf      []byte `json:"leaf"`
	Signature []byte `json:"leaf_signature"`
}

// AuditEntry returns the leaf at index.
func (db *DB) AuditEntry(ctx context.Context, index uint64) (*AuditEntry, error) {
	leaf, err := db.log.Leaf(ctx, index)
	if err != nil {
		return nil, auditErr(err)
	}
	return &AuditEntry{Index: index, Leaf: leaf, Signature: db.signer.SignLeaf(leaf)}, nil
}

// Consistency returns the RFC 6962 consistency proof between two signed
// sizes of the log.
func (db *DB) Consistency(ctx context.Context, from, to uint64) (*proofs.ConsistencyProof, error) {
	p, err := db.log.ConsistencyProof(ctx, from, to)
	if err != nil {
		return nil, auditErr(err)
	}
	return &proofs.ConsistencyProof{From: from, To: to, Hashes: p}, nil
}

// auditErr maps log errors to domain codes.
func auditErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, audit.ErrInvalidArgument):
		return grains.Wrap(grains.CodeInvalidArgument, "invalid audit log index or size", err)
	case errors.Is(err, audit.ErrNotIntegrated):
		return grains.Wrap(grains.CodeNotFound, "not in the audit log yet", err)
	}
	var ge *grains.Error
	if errors.As(err, &ge) {
		return err
	}
	return grains.Wrap(grains.CodeUnavailable, "audit log unavailable", err)
}

// outbox adapts the store to audit.Outbox.
type outbox struct{ st *store.DB }

func (o outbox) AssignSequence(ctx context.Context, max int) (int, error) {
	return o.st.AssignSequence(ctx, max)
}

func (o outbox) Sequenced(ctx context.Context, from uint64, max int) ([]audit.Sequenced, error) {
	evs, err := o.st.Sequenced(ctx, int64(from), max)
	out := make([]audit.Sequenced, len(evs))
	for i, e := range evs {
		out[i] = audit.Sequenced{Index: uint64(e.Seq), Leaf: e.Leaf}
	}
	return out, err
}

func (o outbox) Counters(ctx context.Context) (uint64, uint64, error) {
	n, a, err := o.st.SequenceCounters(ctx)
	return uint64(n), uint64(a), err
}

func (o outbox) SetAppended(ctx context.Context, n uint64) error {
	return o.st.SetAppended(ctx, int64(n))
}

func (o outbox) LatestCheckpoint(ctx context.Context) (*audit.SignedCheckpoint, error) {
	row, err := o.st.LatestCheckpoint(ctx)
	if err != nil || row == nil {
		return nil, err
	}
	return signedOf(row), nil
}

func (o outbox) SaveCheckpoint(ctx context.Context, c audit.SignedCheckpoint) error {
	return o.st.SaveCheckpoint(ctx, store.CheckpointRow{Size: int64(c.Size), Root: c.Root[:], Note: c.Note, CreatedUS: time.Now().UnixMicro()})
}
