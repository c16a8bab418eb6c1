package hooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Delivery is one claimed delivery: an audit event for one hook.
type Delivery struct {
	ID     int64
	HookID string
	URL    string
	// Secret and OldSecret are the hook's secrets as stored (wrapped);
	// OldSecret, the secret a rotation replaced, signs too until OldUntil.
	Secret    []byte
	OldSecret []byte
	OldUntil  time.Time
	// EventID, Type, Memory, Leaf and Index are the audit event's.
	EventID string
	Type    string
	Memory  string
	Leaf    []byte
	Index   uint64
	// Attempts is how many attempts failed before this one; CreatedAt is
	// when the delivery was queued.
	Attempts  int
	CreatedAt time.Time
}

// Failure is a failed attempt, as the store records it.
type Failure struct {
	// Attempts is the number of failed attempts, this one included.
	Attempts int
	// Next is when the delivery is due again; unused when Dead.
	Next time.Time
	// Dead moves the delivery to the dead-letter state.
	Dead bool
	// Reason says what failed, with no personal data: "status 503",
	// "timeout", "refused address", "connection failed".
	Reason string
}

// Store is what an Engine needs of the database. internal/store has it
// (through the Registry's adapter, claims).
type Store interface {
	// Claim leases to owner, until now+lease, up to max pending deliveries
	// due at now whose event the audit sequencer has numbered, and returns
	// them, or a non-nil error. No delivery leased to one owner is
	// returned to another before its lease expires.
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, max int) ([]Delivery, error)
	// Delivered removes the deliveries ids that owner still holds; it
	// returns nil for those it no longer holds (another owner sends them
	// again: at least once).
	Delivered(ctx context.Context, ids []int64, owner string) error
	// Failed records a failed attempt of delivery id if owner still holds
	// its lease, and releases the lease.
	Failed(ctx context.Context, id int64, owner string, f Failure) error
	// Release gives back the leases owner holds on deliveries ids, with no
	// attempt counted (an engine stopping before it sent them).
	Release(ctx context.Context, ids []int64, owner string) error
}

// Unwrapper returns a hook's secret from its stored (wrapped) form.
type Unwrapper func(ctx context.Context, hookID string, wrapped []byte) ([]byte, error)

// Defaults of Config.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxAge      = 24 * time.Hour
	DefaultMaxAttempts = 30
	DefaultBaseDelay   = time.Second
	DefaultMaxDelay    = 15 * time.Minute
	DefaultBatch       = 32
	DefaultWorkers     = 4
	DefaultPoll        = time.Second
	// MaxResponseRead bounds the bytes of a response read (and dropped).
	MaxResponseRead = 64 << 10
)

// Config configures an Engine.
type Config struct {
	Store  Store
	Unwrap Unwrapper
	// Guard checks every address connected to.
	Guard Guard
	// Timeout bounds one attempt, connection and response included.
	Timeout time.Duration
	// MaxAge and MaxAttempts bound the retries: a delivery older than
	// MaxAge, or failed MaxAttempts times, goes to the dead-letter state.
	MaxAge      time.Duration
	MaxAttempts int
	// BaseDelay and MaxDelay shape the backoff (see Backoff).
	BaseDelay, MaxDelay time.Duration
	// Batch is how many deliveries a step claims; Workers how many it
	// sends at once.
	Batch, Workers int
	// Poll is how often Run looks for due deliveries when not kicked.
	Poll time.Duration
	// Transport, when set, replaces the guarded transport (tests only:
	// the guard is then not applied).
	Transport http.RoundTripper
	Now       func() time.Time
	Logger    *slog.Logger
}

// Engine sends deliveries. It is safe for concurrent use; several
// engines, in one process or several, may share a database.
type Engine struct {
	cfg    Config
	client *http.Client
	owner  string
	kick   chan struct{}

	mu      sync.Mutex
	secrets map[string][]byte // wrapped form -> secret

	delivered, failed, dead atomic.Int64
}

// New returns an Engine.
func New(cfg Config) *Engine {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BaseDelay <= 0 {
		cfg.BaseDelay = DefaultBaseDelay
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = DefaultMaxDelay
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := make([]byte, 8)
	rand.Read(b)
	e := &Engine{cfg: cfg, owner: hex.EncodeToString(b), kick: make(chan struct{}, 1), secrets: map[string][]byte{}}
	t := cfg.Transport
	if t == nil {
		t = NewTransport(cfg.Guard, cfg.Timeout)
	}
	e.client = &http.Client{Transport: t, Timeout: cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return e
}

// NewTransport returns an HTTP transport whose every connection is
// checked by g (see Guard.Control), with no proxy and bounded timeouts.
func NewTransport(g Guard, timeout time.Duration) *http.Transport {
	d := &net.Dialer{Timeout: timeout, Control: g.Control}
	return &http.Transport{
		Proxy:                  nil, // a proxy would connect for us, past the guard
		DialContext:            d.DialContext,
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		MaxResponseHeaderBytes: 16 << 10,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
	}
}

// Stats are an engine's counters since it started.
type Stats struct {
	Delivered int64 // deliveries a receiver accepted
	Failed    int64 // failed attempts
	Dead      int64 // deliveries moved to the dead-letter state
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{Delivered: e.delivered.Load(), Failed: e.failed.Load(), Dead: e.dead.Load()}
}

// Kick makes Run look for due deliveries now.
func (e *Engine) Kick() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Run sends deliveries until ctx ends.
func (e *Engine) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	for {
		n, err := e.Step(ctx)
		if err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("webhook delivery step failed; it resumes later", slog.Any("error", err))
		}
		if n == e.cfg.Batch && err == nil {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			return
		case <-e.kick:
		case <-t.C:
		}
	}
}

// lease is how long a claim holds its deliveries: every attempt of a
// batch, bounded by Timeout, with room to record the outcome.
func (e *Engine) lease() time.Duration {
	rounds := (e.cfg.Batch + e.cfg.Workers - 1) / e.cfg.Workers
	return time.Duration(rounds+2) * e.cfg.Timeout
}

// Step claims one batch of due deliveries, sends them, records the
// outcomes, and returns how many it claimed.
func (e *Engine) Step(ctx context.Context) (int, error) {
	b := make([]byte, 8)
	rand.Read(b)
	owner := e.owner + "-" + hex.EncodeToString(b)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	// The claim, a send under way and the recording of outcomes finish
	// (each bounded) even if ctx ends, so that a stopping engine leaves no
	// lease behind it and no sent delivery to be sent again; deliveries
	// not yet started are released.
	sctx := context.WithoutCancel(ctx)
	cctx, cancel := context.WithTimeout(sctx, e.cfg.Timeout)
	ds, err := e.cfg.Store.Claim(cctx, owner, e.cfg.Now(), e.lease(), e.cfg.Batch)
	cancel()
	if err != nil || len(ds) == 0 {
		return 0, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var unsent, sent []int64
	work := make(chan Delivery)
	errs := make(chan error, len(ds))
	for range min(e.cfg.Workers, len(ds)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range work {
				if ctx.Err() != nil {
					mu.Lock()
					unsent = append(unsent, d.ID)
					mu.Unlock()
					continue
				}
				ok, err := e.deliver(sctx, owner, d)
				if err != nil {
					errs <- err
				}
				if ok {
					mu.Lock()
					sent = append(sent, d.ID)
					mu.Unlock()
				}
			}
		}()
	}
	for _, d := range ds {
		work <- d
	}
	close(work)
	wg.Wait()
	close(errs)
	// One statement records every accepted delivery of the batch (a
	// commit each cost SQLite an fsync per delivery).
	if len(sent) > 0 {
		if err := e.cfg.Store.Delivered(sctx, sent, owner); err != nil {
			return len(ds), err
		}
	}
	if len(unsent) > 0 {
		rctx, cancel := context.WithTimeout(sctx, 5*time.Second)
		defer cancel()
		if err := e.cfg.Store.Release(rctx, unsent, owner); err != nil {
			return len(ds), err
		}
	}
	return len(ds), <-errs
}

// deliver sends d once and records a failure; it reports whether the
// receiver accepted d, and returns only the store's errors.
func (e *Engine) deliver(ctx context.Context, owner string, d Delivery) (bool, error) {
	reason := e.send(ctx, d)
	if reason == "" {
		e.delivered.Add(1)
		return true, nil
	}
	e.failed.Add(1)
	now := e.cfg.Now()
	f := Failure{Attempts: d.Attempts + 1, Reason: reason}
	f.Next = now.Add(Backoff(f.Attempts, e.cfg.BaseDelay, e.cfg.MaxDelay, nil))
	if f.Attempts >= e.cfg.MaxAttempts || f.Next.Sub(d.CreatedAt) > e.cfg.MaxAge {
		f.Dead = true
		e.dead.Add(1)
	}
	e.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "webhook attempt failed", slog.String("hook", d.HookID),
		slog.Int64("delivery", d.ID), slog.Int("attempts", f.Attempts), slog.String("reason", reason), slog.Bool("dead", f.Dead))
	return false, e.cfg.Store.Failed(ctx, d.ID, owner, f)
}

// send makes one attempt and returns "" on success or the reason of the
// failure.
func (e *Engine) send(ctx context.Context, d Delivery) string {
	secrets, err := e.secretsOf(ctx, d)
	if err != nil {
		return "secret unavailable"
	}
	body, err := Payload(d)
	if err != nil {
		return "payload"
	}
	h := Sign(secrets, MessageID(d.EventID, d.HookID), e.cfg.Now(), body)
	rctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return "bad url"
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "lethe-webhooks/1")
	req.Header.Set("webhook-id", h.ID)
	req.Header.Set("webhook-timestamp", h.Timestamp)
	req.Header.Set("webhook-signature", h.Signature)
	resp, err := e.client.Do(req)
	if err != nil {
		return failReason(err)
	}
	io.CopyN(io.Discard, resp.Body, MaxResponseRead)
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "status " + strconv.Itoa(resp.StatusCode)
	}
	return ""
}

func failReason(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, ErrRefusedAddress):
		return "refused address"
	case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "connection failed"
}

// secretsOf returns the secrets that sign d: the current one, and the
// previous one during a rotation's overlap.
func (e *Engine) secretsOf(ctx context.Context, d Delivery) ([][]byte, error) {
	s, err := e.unwrap(ctx, d.HookID, d.Secret)
	if err != nil {
		return nil, err
	}
	out := [][]byte{s}
	if len(d.OldSecret) > 0 && e.cfg.Now().Before(d.OldUntil) {
		old, err := e.unwrap(ctx, d.HookID, d.OldSecret)
		if err != nil {
			return nil, err
		}
		out = append(out, old)
	}
	return out, nil
}

func (e *Engine) unwrap(ctx context.Context, hookID string, wrapped []byte) ([]byte, error) {
	e.mu.Lock()
	s, ok := e.secrets[string(wrapped)]
	e.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := e.cfg.Unwrap(ctx, hookID, wrapped)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	if len(e.secrets) > 4096 {
		clear(e.secrets)
	}
	e.secrets[string(wrapped)] = s
	e.mu.Unlock()
	return s, nil
}

// MessageID is the webhook-id of the delivery of event to hook: the same
// for every attempt and every redelivery, so a receiver can drop repeats.
func MessageID(eventID, hookID string) string {
	return "msg_" + eventID + "_" + hookID
}

// Payload is the body of d, the same bytes at every attempt:
//
//	{"type":"<event type>","timestamp":"<leaf time>","data":{
//	 "hook_id":"...","event_id":"...","memory":"...","leaf_index":n,
//	 "proof":"/api/audit/proof?event=<event id>","leaf":{<the audit leaf>}}}
//
// The leaf is the audit leaf's exact JSON (see proofs.Leaf): hashes,
// counts, digests, key fingerprints, commitments, never personal data.
func Payload(d Delivery) ([]byte, error) {
	var leaf struct {
		Time string `json:"time"`
	}
	if err := json.Unmarshal(d.Leaf, &leaf); err != nil {
		return nil, fmt.Errorf("hooks: audit leaf is not JSON: %w", err)
	}
	p := payload{Type: d.Type, Timestamp: leaf.Time, Data: payloadData{HookID: d.HookID, EventID: d.EventID,
		Memory: d.Memory, LeafIndex: d.Index, Proof: "/api/audit/proof?event=" + url.QueryEscape(d.EventID), Leaf: d.Leaf}}
	return json.Marshal(p)
}

type payload struct {
	Type      string      `json:"type"`
	Timestamp string      `json:"timestamp"`
	Data      payloadData `json:"data"`
}

type payloadData struct {
	HookID    string          `json:"hook_id"`
	EventID   string          `json:"event_id"`
	Memory    string          `json:"memory"`
	LeafIndex uint64          `json:"leaf_index"`
	Proof     string          `json:"proof"`
	Leaf      json.RawMessage `json:"leaf"`
}
