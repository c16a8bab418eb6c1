package lethe

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/erasure"
	"github.com/lethe-io/lethe/internal/forgetting"
	"github.com/lethe-io/lethe/internal/history"
	"github.com/lethe-io/lethe/internal/hooks"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/recall"
	"github.com/lethe-io/lethe/internal/requests"
	"github.com/lethe-io/lethe/internal/sealing"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/internal/sweep"
	"github.com/lethe-io/lethe/internal/witness"
	"github.com/lethe-io/lethe/internal/writes"
)

// Config configures Open. The zero value is the embedded default: SQLite,
// the local age KEK and everything else in ./lethe-data.
type Config struct {
	// DataDir holds the SQLite database, the local KEK identity and other
	// local state (default ./lethe-data, created with mode 0700).
	DataDir string
	// PostgresDSN selects PostgreSQL instead of SQLite.
	PostgresDSN string
	// KEK wraps data keys; nil means the local age identity DataDir/kek.age.
	KEK KeyWrapper
	// KeyCacheSize bounds the unwrapped-key cache (default 10,000).
	KeyCacheSize int
	// Logger receives operational logs, never personal data (default: none).
	Logger *slog.Logger
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time

	// AuditKeyFile holds the audit log's Ed25519 signing key in note format
	// (default DataDir/audit.key, created with mode 0600 on first start).
	AuditKeyFile string
	// AuditOrigin names the log in its checkpoints; a new key gets this name
	// (default "lethe-" and 12 random hex digits).
	AuditOrigin string
	// TrillianAddr (host:port of a Trillian log server) and TrillianTreeID
	// select a Trillian PREORDERED_LOG tree instead of the embedded log.
	TrillianAddr   string
	TrillianTreeID int64
	// ProofWait bounds how long an audited call waits for a signed
	// checkpoint to cover its event before returning a pending receipt
	// (default 2s).
	ProofWait time.Duration
	// Witnesses cosign each new audit checkpoint (c2sp.org/tlog-witness);
	// WitnessThreshold of them must, before the checkpoint is saved and
	// proofs against it are given (default 0: cosignatures are collected,
	// none is required). See WitnessConfig.
	Witnesses        []WitnessConfig
	WitnessThreshold int

	// Policy is the forgetting policy (default DefaultPolicy()): decay
	// purge, archive ladder, retrieval-time decay, risk sweep, protection
	// and auto-pin rules. Open validates it.
	Policy *Policy
	// Summarizer compresses grains in the risk sweep (default: keep the
	// triple, drop the content).
	Summarizer Summarizer
	// Schedule starts the policy scheduler (see DB.RunPolicies) and the
	// ladder's write and recall triggers; without it policies run only when
	// called.
	Schedule bool

	// Hooks configures webhooks: whether this DB delivers them, and which
	// addresses they may reach. See HooksConfig.
	Hooks HooksConfig
}

// Open opens (creating if needed) the store described by cfg.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.DataDir == "" {
		cfg.DataDir = "lethe-data"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	scfg := store.Config{Dialect: store.SQLite, DSN: filepath.Join(cfg.DataDir, "lethe.db"), Logger: cfg.Logger}
	if cfg.PostgresDSN != "" {
		scfg = store.Config{Dialect: store.Postgres, DSN: cfg.PostgresDSN, Logger: cfg.Logger}
	}
	kek := cfg.KEK
	if kek == nil {
		w, err := keys.LoadOrCreateAgeIdentity(filepath.Join(cfg.DataDir, "kek.age"))
		if err != nil {
			return nil, err
		}
		kek = w
	}
	if cfg.AuditKeyFile == "" {
		cfg.AuditKeyFile = filepath.Join(cfg.DataDir, "audit.key")
	}
	if cfg.ProofWait == 0 {
		cfg.ProofWait = 2 * time.Second
	}
	st, err := store.Open(ctx, scfg)
	if err != nil {
		return nil, err
	}
	db := &DB{
		store:  st,
		ring:   keys.NewKeyring(keys.KeyringConfig{Store: st, Wrapper: kek, CacheSize: cfg.KeyCacheSize}),
		logger: cfg.Logger,
		now:    cfg.Now,
		kek:    kek,
	}
	// The cleaner is background work: on SQLite it takes the lock when free
	// rather than queue before requests (store.Background).
	db.cleaner = erasure.NewCleaner(func(ctx context.Context) (int, error) { return db.PurgeErased(store.Background(ctx)) }, cfg.Logger)
	db.sealer = sealing.New(db.ring)
	if err := db.openAudit(ctx, &cfg); err != nil {
		st.Close()
		return nil, err
	}
	cctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.cleaner.Run(cctx)
	}()
	db.stopCleaner = sync.OnceFunc(func() { cancel(); <-done })
	db.closers = append([]func() error{func() error { db.stopCleaner(); return nil }}, db.closers...)
	db.hooks = hooks.NewRegistry(hooks.RegistryConfig{Store: st, KEK: kek, Settings: cfg.Hooks, Now: db.now, Logger: db.logger})
	db.rotator = keys.NewRotator(keys.RotatorConfig{KEK: kek, Store: st, Journal: db.journal, Rewrapped: db.hooks.Rewrap})
	// Recall is ready before the sweeper starts: what a policy seals is
	// indexed by it.
	db.recall = recall.New(recall.Config{Store: st, Keys: db.ring, Opener: opener{db}, Sweep: tracker{db}, Now: db.now})
	db.sealer.Index = db.recall.Indexer
	// The vector indexes' graph builds stop with the background work.
	db.closers = append(db.closers, func() error { db.recall.Close(); return nil })
	if db.sweep, err = openSweeper(ctx, db, &cfg); err != nil {
		db.hooks.Close()
		db.Close()
		return nil, err
	}
	db.writes = writes.New(writes.Config{Store: st, Sealer: db.sealer, Journal: db.journal, Policy: db.sweep, Dimensions: db.recall,
		Keys: db.ring, Get: db.Get, Now: db.now})
	db.requests = requests.New(requests.Config{Store: st, Journal: db.journal, KEK: kek, Now: db.now})
	db.erasure = erasure.New(erasure.Config{Store: st, Keys: db.ring, Journal: db.journal, Requests: db.requests,
		Protection: db.sweep, Filter: db.recall, Opener: opener{db}, KEK: kek,
		Erased: db.cleaner.Kick, LogKey: db.signer.VerifierKey(), Now: db.now, Logger: db.logger})
	db.history = history.NewExporter(history.ExporterConfig{Store: st, Opener: opener{db}, Recall: db.recall, Journal: db.journal,
		Prover: db.seq, Signer: db.signer, Now: db.now,
		Latest: func(ctx context.Context) (*audit.SignedCheckpoint, error) { return db.checkpointAt(ctx, 0) }})
	// The sweeper stops first: its tracker writes what is pending.
	db.closers = append([]func() error{func() error { db.sweep.Close(); return nil }}, db.closers...)
	// The hook engine stops before everything: its sends use the store.
	db.closers = append([]func() error{func() error { db.hooks.Close(); return nil }}, db.closers...)
	db.erasure.RunStranded(ctx) // blocked requests a release left behind
	return db, nil
}

// Close stops the background work (the hook engine, the sweeper, the
// cleaner, then the sequencer, which drains the audit outbox, bounded, so
// that what the others wrote while stopping is logged, and the vector
// indexes' graph builds), then closes the store, which stops and waits for its own background work. When it
// returns, no goroutine of the DB uses the database, and a SQLite
// store's write-ahead log is checkpointed and gone.
func (db *DB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	var err error
	for _, c := range db.closers {
		if cerr := c(); err == nil {
			err = cerr
		}
	}
	if cerr := db.store.Close(); err == nil {
		err = cerr
	}
	return err
}

// openAudit sets up the signing key, the log backend and the sequencer.
func (db *DB) openAudit(ctx context.Context, cfg *Config) error {
	signer, err := audit.LoadOrCreateSigner(cfg.AuditKeyFile, cfg.AuditOrigin)
	if err != nil {
		return err
	}
	var log audit.Log
	// With the embedded log the outbox and the log share the store: a
	// sequencer step is one transaction.
	var ob audit.Outbox = outbox{db.store.Audit, db.now}
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
		el, err := audit.NewEmbeddedLog(db.store.Gorm(), db.now)
		if err != nil {
			return err
		}
		log = el
		ob = atomicOutbox{outbox: outbox{db.store.Audit, db.now}, st: db.store, log: el}
	}
	db.log = log
	db.signer = signer
	cosign, err := newCosigner(cfg, log, db.logger)
	if err != nil {
		return err
	}
	db.seq = audit.NewSequencer(audit.SequencerConfig{Outbox: ob, Log: log, Signer: signer,
		Origin: cfg.AuditOrigin, Logger: db.logger, Cosign: cosign})
	db.journal = audit.NewJournal(audit.JournalConfig{Events: db.store, Sequencer: db.seq, Signer: signer, Now: db.now, ProofWait: cfg.ProofWait})
	db.store.SetKeyEvent(store.KeyEventsByMemory(db.journal.KeyCreates))
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		db.seq.Run(runCtx, 500*time.Millisecond)
	}()
	stop := func() error {
		cancel()
		<-done
		// Drain: move what is committed into the log before closing.
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer dcancel()
		if err := db.seq.Step(dctx); err != nil {
			db.logger.Warn("audit outbox not drained at close; it resumes at next start", "error", err)
		}
		return nil
	}
	// The sequencer stops after what Open starts later (they are put
	// before it) and before the Trillian connection it writes to.
	db.closers = append([]func() error{stop}, db.closers...)
	return nil
}

// openSweeper validates the policy, prepares the scheduler's table and
// starts the sweeper (its retrieval tracker and, with cfg.Schedule, its
// scheduler).
func openSweeper(ctx context.Context, db *DB, cfg *Config) (*sweep.Sweeper, error) {
	p := forgetting.Default()
	if cfg.Policy != nil {
		cp := *cfg.Policy // Validate compiles patterns into the copy; the caller's stays untouched
		p = &cp
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("forgetting policy: %w", err)
	}
	if err := db.store.MigrateForgetting(ctx); err != nil {
		return nil, err
	}
	return sweep.New(sweep.Config{Store: db.store, Journal: db.journal, Sealer: sealer{db}, Policy: p, Summarizer: cfg.Summarizer,
		RotateKEK: func(ctx context.Context, keep int) error {
			_, err := db.RotateKEK(ctx, RotateOptions{Keep: keep})
			return err
		},
		Now: db.now, Logger: db.logger, Schedule: cfg.Schedule}), nil
}

// newCosigner returns the sequencer's cosigning step for cfg's witnesses,
// or nil when there are none.
func newCosigner(cfg *Config, log audit.Log, logger *slog.Logger) (audit.CosignFunc, error) {
	if len(cfg.Witnesses) == 0 {
		if cfg.WitnessThreshold != 0 {
			return nil, fmt.Errorf("witness threshold %d with no witnesses configured", cfg.WitnessThreshold)
		}
		return nil, nil
	}
	ws := make([]witness.Config, len(cfg.Witnesses))
	var timeout time.Duration
	for i, w := range cfg.Witnesses {
		ws[i] = witness.Config{URL: w.URL, Key: w.Key}
		timeout = max(timeout, w.Timeout)
	}
	pool, err := witness.NewPool(witness.PoolConfig{Witnesses: ws, Threshold: cfg.WitnessThreshold,
		Prover: log, Timeout: timeout, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("audit witnesses: %w", err)
	}
	return func(ctx context.Context, note []byte, size uint64) ([]byte, error) {
		out, _, err := pool.Cosign(ctx, note, size)
		return out, err
	}, nil
}
