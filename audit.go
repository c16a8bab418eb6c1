package lethe

import (
	"context"
	"fmt"
	"math"
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

// WithActor returns a context whose audit events name actor (an API token
// id, never a person) as their cause. Without it events say "local".
func WithActor(ctx context.Context, actor string) context.Context {
	return audit.WithActor(ctx, actor)
}

// openAudit sets up the signing key, the log backend and the sequencer.
func (db *DB) openAudit(ctx context.Context, cfg *Config) error {
	signer, err := audit.LoadOrCreateSigner(cfg.AuditKeyFile, cfg.AuditOrigin)
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
	db.seq = audit.NewSequencer(audit.SequencerConfig{Outbox: outbox{db.store, db.now}, Log: log, Signer: signer,
		Origin: cfg.AuditOrigin, Logger: db.logger, Cosign: cosign})
	db.journal = audit.NewJournal(audit.JournalConfig{Events: db.store, Sequencer: db.seq, Signer: signer, Now: db.now, ProofWait: cfg.ProofWait})
	db.store.SetKeyEvent(func(ctx context.Context, r keys.Record) ([]store.Event, error) {
		ev, err := db.journal.Event(ctx, proofs.EventKeyCreate, r.Memory, func(l *proofs.Leaf) {
			l.KeyFingerprints = []string{r.Fingerprint}
		})
		return []store.Event{ev}, err
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

// receipt returns the receipt of the committed event id with leaf: see
// audit.Journal.Receipt.
func (db *DB) receipt(ctx context.Context, id string, leaf []byte) (*Receipt, error) {
	ar, err := db.journal.Receipt(ctx, id, leaf)
	if err != nil {
		return nil, err
	}
	r := (*Receipt)(ar)
	if r.Proof != nil {
		if r.TlogProof, err = tlogProof(r.Proof); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ProofByEvent returns the proof of an audit event against the latest
// signed checkpoint, or an error with code pending if none covers it yet.
func (db *DB) ProofByEvent(ctx context.Context, eventID string) (*Proof, error) {
	return db.journal.Proof(ctx, eventID)
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
		return nil, audit.DomainError(err)
	}
	p, err := db.seq.ProveAt(ctx, index, leaf, cp)
	return p, audit.DomainError(err)
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
	db.journal.Committed()
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
		return nil, audit.DomainError(err)
	}
	return &AuditEntry{Index: index, Leaf: leaf, Signature: db.signer.SignLeaf(leaf)}, nil
}

// Consistency returns the RFC 6962 consistency proof between two signed
// sizes of the log.
func (db *DB) Consistency(ctx context.Context, from, to uint64) (*proofs.ConsistencyProof, error) {
	p, err := db.log.ConsistencyProof(ctx, from, to)
	if err != nil {
		return nil, audit.DomainError(err)
	}
	return &proofs.ConsistencyProof{From: from, To: to, Hashes: p}, nil
}

// outbox adapts the store to audit.Outbox.
type outbox struct {
	st  *store.DB
	now func() time.Time
}

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
	return o.st.SaveCheckpoint(ctx, store.CheckpointRow{Size: int64(c.Size), Root: c.Root[:], Note: c.Note, CreatedUS: o.now().UnixMicro()})
}
