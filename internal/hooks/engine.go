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
	// At is when the attempt failed.
	At time.Time
	// Breaker moves the circuit of the delivery's hook (Breaker.Fail at
	// At). MaxAge bounds the age of the hook's deliveries when a pause
	// ends: the store dead-letters those the pause carries past it.
	Breaker Breaker
	MaxAge  time.Duration
}

// Tripped is what a failed attempt did to its hook.
type Tripped struct {
	// Circuit is the hook's circuit after the failure.
	Circuit Circuit
	// Paused reports that the failure paused the hook, or paused it again.
	Paused bool
	// Expired counts the deliveries of the hook the pause dead-lettered.
	Expired int
}

// Held names a claimed delivery and the owner its claim leased it to.
type Held struct {
	ID    int64
	Owner string
}

// Limits bounds the deliveries of one hook and of one memory that a claim
// takes, so that the deliveries of slow receivers cannot fill an engine.
type Limits struct {
	// PerHook and PerMemory bound the deliveries of one hook, and of one
	// memory.
	PerHook, PerMemory int
	// Hooks and Memories lower those bounds for the hooks and memories
	// they name (those the engine holds deliveries of) to the deliveries
	// it may still hold of each; 0 means none.
	Hooks, Memories map[string]int
}

// Store is what an Engine needs of the database. internal/store has it
// (through the Registry's adapter, claims).
type Store interface {
	// Claim leases to owner, until now+lease, up to max pending deliveries
	// due at now whose event the audit sequencer has numbered, within lim
	// as far as it can, and returns them, or a non-nil error. No delivery
	// leased to one owner is returned to another before its lease
	// expires. It returns none of a hook paused at now (see Circuit) and,
	// of a hook whose pause has ended, at most one, and none while
	// another owner holds one. The engine releases what it returns beyond
	// lim.
	Claim(ctx context.Context, owner string, now time.Time, lease time.Duration, max int, lim Limits) ([]Delivery, error)
	// Delivered removes, in one write, the deliveries held that their
	// owners still hold; it returns nil for those they no longer hold
	// (another owner sends them again: at least once).
	Delivered(ctx context.Context, held []Held) error
	// Failed records a failed attempt of delivery id if owner still holds
	// its lease, and releases the lease. In the same write it moves the
	// circuit of the delivery's hook by f.Breaker and, while that leaves
	// the hook paused after f.At, dead-letters the hook's pending
	// deliveries that no owner holds and that were queued more than
	// f.MaxAge before the pause ends. It returns what it did to the hook
	// (nothing if owner no longer holds the delivery), or a non-nil error.
	Failed(ctx context.Context, id int64, owner string, f Failure) (Tripped, error)
	// Release gives back the leases held that their owners still hold,
	// with no attempt counted (deliveries an engine will not send: it is
	// stopping, they are beyond its bounds, or their lease ran short).
	Release(ctx context.Context, held []Held) error
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
	DefaultWorkers     = 64
	DefaultPerHook     = 4
	DefaultPerMemory   = 8
	DefaultPoll        = time.Second
	DefaultPauseAfter  = 10
	DefaultPause       = time.Minute
	DefaultMaxPause    = 15 * time.Minute
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
	// MaxAge runs during a hook's pause too.
	MaxAge      time.Duration
	MaxAttempts int
	// PauseAfter consecutive failed attempts of a hook pause it for
	// Pause; each failed probe after a pause doubles it, up to MaxPause
	// (see Breaker).
	PauseAfter      int
	Pause, MaxPause time.Duration
	// BaseDelay and MaxDelay shape the backoff (see Backoff).
	BaseDelay, MaxDelay time.Duration
	// Batch is the most deliveries one claim takes.
	Batch int
	// Workers bounds the sends under way at once; PerHook bounds those of
	// one hook, PerMemory those of one memory's hooks together.
	Workers, PerHook, PerMemory int
	// Poll is how often Run looks for due deliveries when not woken.
	Poll time.Duration
	// Transport, when set, replaces the guarded transport (tests only:
	// the guard is then not applied).
	Transport http.RoundTripper
	Now       func() time.Time
	Logger    *slog.Logger
}

// Engine sends deliveries. It is safe for concurrent use; several
// engines, in one process or several, may share a database.
//
// An engine claims due deliveries ahead (up to Batch a claim) and holds
// them; each is sent by its own goroutine as soon as the bounds on sends
// under way let it start: Workers in all, PerHook per hook, PerMemory per
// memory. A send that ends frees its place for the next held delivery that
// fits, so a slow receiver holds up no batch, only what waits for its own
// hook's or memory's places. What an engine holds is bounded as well, at holdFactor times each
// bound on sends, and a claim takes nothing of a hook or a memory that
// holds its share: the hooks of one memory, however slow or dead their
// receivers, never occupy more than PerMemory places, and claims reach
// past their deliveries to the others'.
type Engine struct {
	cfg    Config
	client *http.Client
	owner  string
	kick   chan struct{} // look for due deliveries now
	wake   chan struct{} // a hook has room for another claim
	sends  sync.WaitGroup
	rec    recorder

	breaker Breaker

	mu      sync.Mutex
	secrets map[string][]byte // wrapped form -> secret
	queue   []*claimed        // held and not started, in the order claimed
	held    load              // deliveries held: queued or being sent
	sending load              // deliveries being sent
	claims  uint64            // claims started
	paused  map[string]pause  // hooks a failure paused

	delivered, failed, dead, pauses atomic.Int64
}

// pause is a hook's pause as an engine learned it: until when, and the
// claims started by then (their deliveries of the hook, claimed before the
// pause, are released unsent; later claims' were taken with the pause in
// the store, which ends it early when a hook is redelivered).
type pause struct {
	until  time.Time
	claims uint64
}

// holdFactor bounds what an engine holds (claimed, sent or waiting to be)
// at this many times each bound on sends under way: per hook, per memory
// and in all.
const holdFactor = 8

// load counts deliveries in all, per hook and per memory.
type load struct {
	all       int
	hook, mem map[string]int
}

func newLoad() load { return load{hook: map[string]int{}, mem: map[string]int{}} }

func (l *load) add(d *Delivery, n int) {
	l.all += n
	bump(l.hook, d.HookID, n)
	bump(l.mem, d.Memory, n)
}

func bump(m map[string]int, k string, n int) {
	if m[k] += n; m[k] <= 0 {
		delete(m, k)
	}
}

// fits reports whether one more of d stays within all, perHook and
// perMemory.
func (l *load) fits(d *Delivery, all, perHook, perMemory int) bool {
	return l.all < all && l.hook[d.HookID] < perHook && l.mem[d.Memory] < perMemory
}

// left returns, for each key of busy, the room bound leaves it.
func left(busy map[string]int, bound int) map[string]int {
	out := make(map[string]int, len(busy))
	for k, n := range busy {
		out[k] = max(0, bound-n)
	}
	return out
}

// claimed is a delivery an engine holds.
type claimed struct {
	Delivery
	owner string
	// ctx is the claimer's (Run's or Step's): once it ends, the delivery
	// is released unsent.
	ctx context.Context
	// startBy is when the delivery's lease leaves too little time for an
	// attempt: not started by then, it is released unsent.
	startBy time.Time
	st      *step // nil for Run's
	// claim numbers the claim that took it, in the order claims started.
	claim uint64
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
	if cfg.PerHook <= 0 {
		cfg.PerHook = DefaultPerHook
	}
	if cfg.PerMemory <= 0 {
		cfg.PerMemory = DefaultPerMemory
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.PauseAfter <= 0 {
		cfg.PauseAfter = DefaultPauseAfter
	}
	if cfg.Pause <= 0 {
		cfg.Pause = DefaultPause
	}
	if cfg.MaxPause <= 0 {
		cfg.MaxPause = DefaultMaxPause
	}
	cfg.MaxPause = max(cfg.MaxPause, cfg.Pause)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := make([]byte, 8)
	rand.Read(b)
	e := &Engine{cfg: cfg, owner: hex.EncodeToString(b), kick: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		secrets: map[string][]byte{}, held: newLoad(), sending: newLoad(), paused: map[string]pause{},
		breaker: Breaker{After: cfg.PauseAfter, Pause: cfg.Pause, MaxPause: cfg.MaxPause}}
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
	Paused    int64 // failures that paused a hook, or paused it again
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{Delivered: e.delivered.Load(), Failed: e.failed.Load(), Dead: e.dead.Load(), Paused: e.pauses.Load()}
}

// Kick makes Run look for due deliveries now.
func (e *Engine) Kick() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Run sends deliveries until ctx ends, then releases those it holds
// unsent and waits for the sends under way (each bounded by Timeout) and
// the recording of their outcomes. It claims again at once after a claim
// that took all it asked for, when a hook's sends leave it room for
// another claim, when kicked, and every Poll. (A claim right after one that
// filled a hook's or a memory's share would read past that one's due
// deliveries to find the others': it waits for a wake or a tick.)
func (e *Engine) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.Poll)
	defer t.Stop()
	for {
		n, more, err := e.claim(ctx, nil)
		select {
		case <-e.wake: // raised before or during this claim: answered
		default:
		}
		if err != nil && ctx.Err() == nil {
			e.cfg.Logger.Warn("webhook delivery claim failed; it resumes later", slog.Any("error", err))
		}
		if err == nil && n > 0 && more {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			e.dispatch() // releases what Run holds unsent
			e.sends.Wait()
			return
		case <-e.kick:
		case <-e.wake:
		case <-t.C:
		}
	}
}

// lease is how long a claim holds its deliveries: the claim, a wait for
// the sends ahead of it (at most holdFactor rounds of its hook's), the
// unwrapping of the secrets and the attempt, each bounded by Timeout, and
// as long again to record the outcome. A delivery whose lease runs short
// before it could start is released unsent (see claimed.startBy), so that
// no two engines ever send it at once.
func (e *Engine) lease() time.Duration { return (holdFactor + 4) * e.cfg.Timeout }

// step gathers the outcomes of the deliveries one Step claimed.
type step struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

// finish records the outcome of one of st's deliveries; st may be nil.
func (st *step) finish(err error) {
	if st == nil {
		return
	}
	st.mu.Lock()
	if st.err == nil {
		st.err = err
	}
	st.mu.Unlock()
	st.wg.Done()
}

// Step claims due deliveries (up to Batch, within what the engine may
// hold, counting what Run holds), sends them as the bounds on sends under
// way let it, records the outcomes, and returns how many it claimed.
func (e *Engine) Step(ctx context.Context) (int, error) {
	var st step
	n, _, err := e.claim(ctx, &st)
	st.wg.Wait()
	if err != nil {
		return n, err
	}
	return n, st.err
}

// claim claims what the engine may still hold, holds it, and starts what
// the bounds on sends let start; st, if not nil, gathers the outcomes. It
// returns how many it holds of those it claimed, and whether another
// claim may find more at once: it took all it asked for, and no hook or
// memory of those it took has its full share. Deliveries beyond what the
// engine may hold (a store that took more than the limits it was given,
// or two claims of this engine at once) are released.
func (e *Engine) claim(ctx context.Context, st *step) (n int, more bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	all, perHook, perMem := holdFactor*e.cfg.Workers, holdFactor*e.cfg.PerHook, holdFactor*e.cfg.PerMemory
	e.mu.Lock()
	for h, p := range e.paused {
		if !e.cfg.Now().Before(p.until) {
			delete(e.paused, h)
		}
	}
	e.claims++
	seq := e.claims
	asked := min(e.cfg.Batch, all-e.held.all)
	lim := Limits{PerHook: perHook, PerMemory: perMem, Hooks: left(e.held.hook, perHook), Memories: left(e.held.mem, perMem)}
	e.mu.Unlock()
	if asked <= 0 {
		return 0, false, nil
	}
	b := make([]byte, 8)
	rand.Read(b)
	owner := e.owner + "-" + hex.EncodeToString(b)
	// The claim, the sends and the recording of outcomes finish (each
	// bounded) even if ctx ends, so that a stopping engine leaves no lease
	// behind it and no sent delivery to be sent again; deliveries not yet
	// started are released.
	sctx := context.WithoutCancel(ctx)
	now := e.cfg.Now()
	cctx, cancel := context.WithTimeout(sctx, e.cfg.Timeout)
	ds, err := e.cfg.Store.Claim(cctx, owner, now, e.lease(), asked, lim)
	cancel()
	if err != nil || len(ds) == 0 {
		return 0, false, err
	}
	var extra []Held
	startBy := now.Add(e.lease() - 3*e.cfg.Timeout)
	e.mu.Lock()
	for _, d := range ds {
		if !e.held.fits(&d, all, perHook, perMem) {
			extra = append(extra, Held{ID: d.ID, Owner: owner})
			continue
		}
		e.held.add(&d, 1)
		n++
		if st != nil {
			st.wg.Add(1)
		}
		e.queue = append(e.queue, &claimed{Delivery: d, owner: owner, ctx: ctx, startBy: startBy, st: st, claim: seq})
	}
	more = n == asked
	for _, d := range ds {
		if e.held.hook[d.HookID] >= perHook || e.held.mem[d.Memory] >= perMem {
			more = false
		}
	}
	e.mu.Unlock()
	e.dispatch()
	if len(extra) > 0 {
		rctx, cancel := context.WithTimeout(sctx, e.cfg.Timeout)
		defer cancel()
		if err := e.cfg.Store.Release(rctx, extra); err != nil {
			return n, false, err
		}
	}
	return n, more, nil
}

// dispatch starts, in the order claimed, each held delivery that the
// bounds on sends under way let start, and releases those whose claimer's
// context ended, whose lease ran short, or whose hook a failure paused
// after they were claimed.
func (e *Engine) dispatch() {
	var drop []*claimed
	e.mu.Lock()
	now := e.cfg.Now()
	rest := e.queue[:0]
	for _, c := range e.queue {
		p, paused := e.paused[c.HookID]
		switch {
		case c.ctx.Err() != nil || now.After(c.startBy) || paused && c.claim <= p.claims && now.Before(p.until):
			e.held.add(&c.Delivery, -1)
			drop = append(drop, c)
		case e.sending.fits(&c.Delivery, e.cfg.Workers, e.cfg.PerHook, e.cfg.PerMemory):
			e.sending.add(&c.Delivery, 1)
			e.sends.Add(1)
			go e.attempt(c)
		default:
			rest = append(rest, c)
		}
	}
	clear(e.queue[len(rest):])
	e.queue = rest
	e.mu.Unlock()
	if len(drop) == 0 {
		return
	}
	held := make([]Held, len(drop))
	for i, c := range drop {
		held[i] = Held{ID: c.ID, Owner: c.owner}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(drop[0].ctx), e.cfg.Timeout)
	err := e.cfg.Store.Release(ctx, held)
	cancel()
	if err != nil {
		// The leases expire instead: the deliveries are sent later.
		e.cfg.Logger.Warn("webhook deliveries not released", slog.Any("error", err))
	}
	for _, c := range drop {
		c.st.finish(nil)
	}
}

// attempt sends c and records the outcome. c's place among the sends
// under way is free once the receiver accepted c, so the next held
// delivery starts while the outcome is recorded (and waits to join others
// in one write); after a failure, once it is recorded, since it may have
// paused the hook, whose held deliveries must then not start. c stays
// held until recorded, and Run is woken when c's hook has room for
// another claim.
func (e *Engine) attempt(c *claimed) {
	defer e.sends.Done()
	ctx := context.WithoutCancel(c.ctx)
	reason := e.send(ctx, c.Delivery)
	free := func() {
		e.mu.Lock()
		e.sending.add(&c.Delivery, -1)
		e.mu.Unlock()
		e.dispatch()
	}
	var err error
	if reason == "" {
		free()
		err = e.outcome(ctx, c.owner, c.Delivery, reason)
	} else {
		err = e.outcome(ctx, c.owner, c.Delivery, reason)
		free()
	}
	e.mu.Lock()
	e.held.add(&c.Delivery, -1)
	room := e.held.hook[c.HookID] <= e.cfg.PerHook && e.held.mem[c.Memory] <= e.cfg.PerMemory
	e.mu.Unlock()
	if room {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
	if err != nil && c.st == nil {
		e.cfg.Logger.Warn("webhook delivery outcome not recorded; the delivery is sent again", slog.Any("error", err))
	}
	c.st.finish(err)
}

// recorder records accepted deliveries in groups: one write for all those
// accepted while the previous write ran (a commit each cost SQLite an
// fsync per delivery).
type recorder struct {
	mu      sync.Mutex
	writing bool
	next    *group
}

type group struct {
	held []Held
	done chan struct{}
	err  error
}

// record records h with the next group, writing it unless a write is
// under way, and returns once h's group is written.
func (r *recorder) record(ctx context.Context, s Store, h Held) error {
	r.mu.Lock()
	if r.next == nil {
		r.next = &group{done: make(chan struct{})}
	}
	g := r.next
	g.held = append(g.held, h)
	if r.writing {
		r.mu.Unlock()
		<-g.done
		return g.err
	}
	r.writing = true
	for r.next != nil {
		w := r.next
		r.next = nil
		r.mu.Unlock()
		w.err = s.Delivered(ctx, w.held)
		close(w.done)
		r.mu.Lock()
	}
	r.writing = false
	r.mu.Unlock()
	return g.err
}

// outcome records the outcome of an attempt of d, reason as send returned
// it; it returns only the store's errors. After a failure that leaves the
// hook paused, the engine releases, unsent, the deliveries of the hook
// it claimed before (see dispatch); an acceptance ends what the engine
// knew of the hook's pause.
func (e *Engine) outcome(ctx context.Context, owner string, d Delivery, reason string) error {
	if reason == "" {
		e.delivered.Add(1)
		e.mu.Lock()
		delete(e.paused, d.HookID)
		e.mu.Unlock()
		return e.rec.record(ctx, e.cfg.Store, Held{ID: d.ID, Owner: owner})
	}
	e.failed.Add(1)
	now := e.cfg.Now()
	f := Failure{Attempts: d.Attempts + 1, Reason: reason, At: now, Breaker: e.breaker, MaxAge: e.cfg.MaxAge}
	f.Next = now.Add(Backoff(f.Attempts, e.cfg.BaseDelay, e.cfg.MaxDelay, nil))
	if f.Attempts >= e.cfg.MaxAttempts || f.Next.Sub(d.CreatedAt) > e.cfg.MaxAge {
		f.Dead = true
		e.dead.Add(1)
	}
	e.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "webhook attempt failed", slog.String("hook", d.HookID),
		slog.Int64("delivery", d.ID), slog.Int("attempts", f.Attempts), slog.String("reason", reason), slog.Bool("dead", f.Dead))
	tr, err := e.cfg.Store.Failed(ctx, d.ID, owner, f)
	if err != nil {
		return err
	}
	e.dead.Add(int64(tr.Expired))
	if tr.Paused {
		e.pauses.Add(1)
		e.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "webhook paused after consecutive failed attempts", slog.String("hook", d.HookID),
			slog.Int("failures", tr.Circuit.Failures), slog.Time("until", tr.Circuit.PausedUntil), slog.Int("expired", tr.Expired))
	}
	if tr.Circuit.PausedUntil.After(now) {
		e.mu.Lock()
		e.paused[d.HookID] = pause{until: tr.Circuit.PausedUntil, claims: e.claims}
		e.mu.Unlock()
	}
	return nil
}

// send makes one attempt and returns "" on success or the reason of the
// failure.
func (e *Engine) send(ctx context.Context, d Delivery) string {
	uctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	secrets, err := e.secretsOf(uctx, d)
	cancel()
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
