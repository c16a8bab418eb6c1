// Package erasure destroys grains: Forget hard-deletes selected grains
// with every version of their chains; crypto-erasure destroys the data key
// of a user, a scope or a whole memory, so that every grain under it
// becomes unreadable at once. Each commits its audit event (grain.forget,
// key.erase) in its transaction. It also keeps the legal holds that refuse
// both, and executes erasure requests (package requests keeps their
// lifecycle).
//
// # Ports
//
// An [Eraser] states what it needs as small interfaces declared here:
// [Store] (deletion, key erasure, holds and previews), [Keys] (user
// references and the key cache), [Journal] (audit events and receipts),
// [Requests] (the request workflow), and for Forget [Protection],
// [Filter] and [Opener]. It never imports package lethe.
package erasure

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/crashpoint"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/keys"
	"github.com/lethe-io/lethe/internal/requests"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// Store is what an Eraser needs of the store. *store.DB implements it.
type Store interface {
	EraseKey(ctx context.Context, spec store.EraseSpec, mk store.EventsFunc[*store.Erasure]) (*store.Erasure, error)
	// ScrubErased removes the residue of the keys erases with
	// EraseSpec.DeferScrub destroyed (see store.DB.ScrubErased).
	ScrubErased(ctx context.Context)
	PreviewErase(ctx context.Context, spec store.EraseSpec) (*requests.Preview, error)
	SetHold(ctx context.Context, h store.HoldRow, evs []store.Event) error
	ReleaseHold(ctx context.Context, memory, id string, now int64, evs []store.Event) error
	Holds(ctx context.Context, memory string) ([]store.HoldRow, error)
	GrainByHash(ctx context.Context, memory, hash string) (*store.GrainRow, error)
	DeleteHashes(ctx context.Context, memory string, hashes []string, now int64, mk store.EventsFunc[*store.Deletion]) (*store.Deletion, error)
	DeleteWhere(ctx context.Context, f store.Filter, now int64, mk store.EventsFunc[*store.Deletion]) (*store.Deletion, error)
}

var _ Store = (*store.DB)(nil)

// Keys is the key hierarchy as an Eraser uses it. *keys.Keyring
// implements it.
type Keys interface {
	// UserRef returns the blind reference of a user, keys.ErrNoKey when the
	// memory has no key.
	UserRef(ctx context.Context, memory, userID string) ([]byte, error)
	// Revalidate drops a cached memory key another instance erased.
	Revalidate(ctx context.Context, memory string) error
	// WriteChain returns (creating them if needed) the keys a write uses.
	WriteChain(ctx context.Context, memory, scope, userID string) (*keys.Chain, error)
	// PurgeMemory empties the key cache of a memory.
	PurgeMemory(memory string)
}

var _ Keys = (*keys.Keyring)(nil)

// Journal builds audit events and returns receipts. *audit.Journal
// implements it.
type Journal interface {
	// Event builds an event; fill adds its fields.
	Event(ctx context.Context, typ proofs.EventType, memory string, fill func(*proofs.Leaf)) (audit.Event, error)
	// Append commits events that record no other change.
	Append(ctx context.Context, evs ...audit.Event) error
	// Committed says that events committed with a change.
	Committed()
	// Receipt returns the receipt of a committed event, with its proof or
	// pending.
	Receipt(ctx context.Context, id string, leaf []byte) (*audit.Receipt, error)
	// Proof returns the proof of a committed event against the latest
	// signed checkpoint (code pending while none covers it).
	Proof(ctx context.Context, id string) (*proofs.Proof, error)
}

var _ Journal = (*audit.Journal)(nil)

// Requests is the erasure request workflow. *requests.Workflow implements
// it.
type Requests interface {
	Create(ctx context.Context, spec requests.Spec) (*requests.Request, []byte, error)
	Get(ctx context.Context, memory, id string) (*requests.Request, error)
	Open(ctx context.Context, memory, id string) (*requests.Request, string, []byte, *requests.Transition, error)
	Block(ctx context.Context, r *requests.Request, hold string) error
	Destroyed(ctx context.Context, r *requests.Request) error
	Blocked(ctx context.Context, memory string) ([]requests.Request, error)
	Stranded(ctx context.Context, after *requests.Request) ([]requests.Request, error)
}

var _ Requests = (*requests.Workflow)(nil)

// Protection is the forgetting policy's protection rules as Forget checks
// them. *sweep.Sweeper implements it.
type Protection interface {
	// Protected returns the first of rows a rule keeps from an explicit
	// forget, with the refusal (code protected) a forget of it meets, or
	// perr nil when none is.
	Protected(rows []store.OpRow) (hash string, perr error)
}

// Filter turns a query into a store filter with blind tokens; ok is false
// when it can match nothing. *recall.Engine implements it.
type Filter interface {
	Filter(ctx context.Context, q *grains.Query, fresh bool) (f *store.Filter, ok bool, err error)
}

// Opener opens sealed rows; Observe must see rows before they are opened
// (see recall.Opener).
type Opener interface {
	Observe(rows []store.GrainRow)
	Open(ctx context.Context, r *store.GrainRow) (*grains.Grain, error)
}

// Config configures an Eraser.
type Config struct {
	Store    Store
	Keys     Keys
	Journal  Journal
	Requests Requests
	// Protection, Filter and Opener serve Forget.
	Protection Protection
	Filter     Filter
	Opener     Opener
	// KEK wraps the data keys: an erasure names its newest version and,
	// in dedicated-key mode, deletes the erased keys' own KEKs.
	KEK keys.Wrapper
	// Erased is called after every erasure (the DB wakes its cleaner).
	Erased func()
	// LogKey is the audit log's verifier key, for certificates.
	LogKey string
	Now    func() time.Time
	Logger *slog.Logger
}

// Eraser runs erasures, holds and erasure requests.
type Eraser struct{ cfg Config }

// New returns an Eraser.
func New(cfg Config) *Eraser { return &Eraser{cfg: cfg} }

// Erasure is what a crypto-erasure returns: how many grains the destroyed
// key made unreadable, the key's fingerprint, when, and the audit receipt
// with its proof.
type Erasure struct {
	Count          int64     `json:"count"`
	KeyFingerprint string    `json:"key_fingerprint"`
	Timestamp      time.Time `json:"timestamp"`
	// KEKVersion is the newest KEK version that wrapped a key the erasure
	// destroyed (0 when the KEK does not say): once a KEK trim removes
	// every version up to it, no copy of those keys can be unwrapped.
	KEKVersion uint64 `json:"kek_version,omitempty"`
	// DryRun says nothing was destroyed: Count and KeyFingerprint are what
	// the erasure would destroy, and HeldBy the hold that would refuse it.
	DryRun bool   `json:"dry_run,omitempty"`
	HeldBy string `json:"held_by,omitempty"`
	*audit.Receipt
}

// maxLeafKeys bounds the fingerprints an erase event lists (the erased key
// first, then keys below it).
const maxLeafKeys = 64

// User crypto-erases a user of memory (validated): it destroys the user's
// data key, so every grain of that user, in every scope, becomes
// unreadable at once.
func (e *Eraser) User(ctx context.Context, memory, userID string, dryRun bool) (*Erasure, error) {
	spec, subject, err := e.userSpec(ctx, memory, userID)
	if err != nil {
		return nil, err
	}
	return e.erase(ctx, spec, subject, proofs.NewNonce(), dryRun)
}

// userSpec returns the erasure of userID in memory, which it validates,
// and the normalised user id (the commitment's subject): not_found when
// the memory holds no keys.
func (e *Eraser) userSpec(ctx context.Context, memory, userID string) (store.EraseSpec, string, error) {
	if strings.TrimSpace(userID) == "" {
		return store.EraseSpec{}, "", &grains.Error{Code: grains.CodeEmptySelector, Field: "user_id", Message: "name the user to erase"}
	}
	if err := grains.ValidateUserID(userID); err != nil {
		return store.EraseSpec{}, "", err
	}
	userID = grains.NormalizeText(userID)
	ref, err := e.cfg.Keys.UserRef(ctx, memory, userID)
	if errors.Is(err, keys.ErrNoKey) {
		return store.EraseSpec{}, "", grains.Errorf(grains.CodeNotFound, "nothing to erase: memory %s holds no keys", memory)
	}
	if err != nil {
		return store.EraseSpec{}, "", err
	}
	return store.EraseSpec{Memory: memory, Kind: keys.KindUser, Name: hex.EncodeToString(ref), UserRef: ref}, userID, nil
}

// Scope crypto-erases a scope path of memory (validated) and everything
// below it.
func (e *Eraser) Scope(ctx context.Context, memory, path string, dryRun bool) (*Erasure, error) {
	if strings.Trim(path, "/") == "" {
		return nil, &grains.Error{Code: grains.CodeEmptySelector, Field: "scope", Message: "name the scope to erase",
			Hint: "an empty scope never means everything; to erase a whole memory use EraseMemory"}
	}
	// A malformed path is refused, never normalised: "/acme//" is not acme.
	path, err := grains.CleanScope(path)
	if err != nil {
		return nil, err
	}
	return e.erase(ctx, store.EraseSpec{Memory: memory, Kind: keys.KindScope, Name: path}, path, proofs.NewNonce(), dryRun)
}

// Memory crypto-erases a whole memory: its key, and with it every scope
// and user key and every grain.
func (e *Eraser) Memory(ctx context.Context, memory string, dryRun bool) (*Erasure, error) {
	if err := grains.ValidateMemory(memory); err != nil {
		return nil, err
	}
	return e.erase(ctx, store.EraseSpec{Memory: memory, Kind: keys.KindMemory}, memory, proofs.NewNonce(), dryRun)
}

// erase destroys the key spec names, with a key.erase event whose subject
// commitment is of subject under nonce. With spec.Request it executes an
// erasure request: the event names it, and a refusal under a hold is the
// caller's to record.
func (e *Eraser) erase(ctx context.Context, spec store.EraseSpec, subject string, nonce []byte, dryRun bool) (*Erasure, error) {
	now := e.cfg.Now().UTC()
	spec.Now = now.UnixMicro()
	if dryRun {
		return e.dryErase(ctx, spec, now)
	}
	var leaf []byte
	var eventID string
	var kekVersion uint64
	// The scrub runs beside the wait for the event's checkpoint, below.
	spec.DeferScrub = true
	er, err := e.cfg.Store.EraseKey(ctx, spec, func(ctx context.Context, er *store.Erasure) ([]store.Event, error) {
		var kek string
		kekVersion, kek = keys.KEKVersion(e.cfg.KEK, er.Destroyed)
		ev, err := e.cfg.Journal.Event(ctx, proofs.EventKeyErase, spec.Memory, func(l *proofs.Leaf) {
			if kekVersion > 0 {
				v := kekVersion
				l.KEK, l.KEKVersion = kek, &v
			}
			n := uint64(er.Count)
			l.Count = &n
			for i, k := range er.Destroyed {
				if i == maxLeafKeys {
					break
				}
				l.KeyFingerprints = append(l.KeyFingerprints, k.Fingerprint)
			}
			l.Commitment = proofs.Commitment(nonce, subject)
			if spec.Request != nil {
				l.Request = spec.Request.ID
				spec.Request.KEKVersion = kekVersion
			}
		})
		leaf, eventID = ev.Leaf, ev.ID
		return []store.Event{ev}, err
	})
	if err != nil && spec.Request != nil {
		return nil, err
	}
	if err != nil {
		return nil, e.Refused(ctx, spec.Memory, err)
	}
	crashpoint.Hit(crashpoint.EraseCommitted)
	// The destroyed keys' residue is scrubbed while the receipt waits for
	// a checkpoint covering the event (the sequencer's step touches no key
	// table): the call returns once both are done, as before, in the time
	// of the longer.
	e.cfg.Journal.Committed()
	scrubbed := make(chan struct{})
	go func() {
		defer close(scrubbed)
		e.cfg.Store.ScrubErased(ctx)
		crashpoint.Hit(crashpoint.EraseScrubbed)
	}()
	// This process drops the memory's cached keys now; other processes see
	// the new erase epoch with the next rows they read.
	e.cfg.Keys.PurgeMemory(spec.Memory)
	e.destroyDedicated(ctx, er.Destroyed)
	if e.cfg.Erased != nil {
		e.cfg.Erased()
	}
	r, err := e.cfg.Journal.Receipt(ctx, eventID, leaf)
	<-scrubbed
	if err != nil {
		return nil, err
	}
	crashpoint.Hit(crashpoint.EraseReceipted)
	r.SubjectNonce = hex.EncodeToString(nonce)
	return &Erasure{Count: er.Count, KeyFingerprint: er.Fingerprint, Timestamp: now.Truncate(time.Second), KEKVersion: kekVersion, Receipt: r}, nil
}

// dryErase runs the erasure spec names and rolls it back: what it would
// destroy, or the hold that would refuse it, with nothing destroyed or
// audited.
func (e *Eraser) dryErase(ctx context.Context, spec store.EraseSpec, now time.Time) (*Erasure, error) {
	er, err := e.cfg.Store.EraseKey(ctx, spec, func(context.Context, *store.Erasure) ([]store.Event, error) {
		return nil, store.ErrDryRun
	})
	var held *store.HeldBy
	if !errors.Is(err, store.ErrDryRun) && !errors.As(err, &held) {
		return nil, err
	}
	out := &Erasure{DryRun: true, Timestamp: now.Truncate(time.Second)}
	if er != nil {
		out.Count, out.KeyFingerprint = er.Count, er.Fingerprint
	}
	if held != nil {
		out.HeldBy = held.HoldID
	}
	return out, nil
}

// Refused records a refusal under a legal hold (err is a *store.HeldBy) as
// an audit event of its own, the refused change rolled back, and returns
// err. Any other err is returned as it is.
func (e *Eraser) Refused(ctx context.Context, memory string, err error) error {
	var held *store.HeldBy
	if !errors.As(err, &held) {
		return err
	}
	return e.audit(ctx, memory, err, func(l *proofs.Leaf) { l.Hold, l.Reason = held.HoldID, "held" })
}

// refusedProtected audits the refusal perr of a forget by a protection rule
// that keeps the grain hash (an erasure.refused event of reason protected)
// and returns perr.
func (e *Eraser) refusedProtected(ctx context.Context, memory, hash string, perr error) error {
	return e.audit(ctx, memory, perr, func(l *proofs.Leaf) { l.Hashes, l.Reason = []string{hash}, "protected" })
}

// audit appends an erasure.refused event that set fills in and returns err,
// the refusal; a failure to audit is logged.
func (e *Eraser) audit(ctx context.Context, memory string, err error, set func(l *proofs.Leaf)) error {
	ev, eerr := e.cfg.Journal.Event(ctx, proofs.EventErasureRefused, memory, set)
	if eerr == nil {
		eerr = e.cfg.Journal.Append(ctx, ev)
	}
	if eerr != nil {
		e.cfg.Logger.Error("could not audit a refused erasure", "error", eerr)
	} else {
		crashpoint.Hit(crashpoint.RefusalCommitted)
	}
	e.cfg.Journal.Committed()
	return err
}

// destroyer is a KEK that can destroy the KEK of one data key (Vault
// transit in dedicated-key mode).
type destroyer interface {
	Destroy(ctx context.Context, ref keys.Ref) error
}

func (e *Eraser) destroyDedicated(ctx context.Context, destroyed []keys.Record) {
	d, ok := e.cfg.KEK.(destroyer)
	if !ok {
		return
	}
	// A shared transit key wraps every data key: there is nothing of one
	// key's own to delete (Destroy would refuse and warn on every erase).
	if m, ok := e.cfg.KEK.(interface{ Dedicated() bool }); ok && !m.Dedicated() {
		return
	}
	for _, k := range destroyed {
		if err := d.Destroy(ctx, keys.Ref{Memory: k.Memory, Kind: k.Kind, Fingerprint: k.Fingerprint}); err != nil {
			// The wrapped key is already gone from the store; the dedicated KEK
			// outliving it only matters for backups. Log and carry on.
			e.cfg.Logger.Warn("could not delete the dedicated KEK of an erased key", "fingerprint", k.Fingerprint, "error", err)
		}
	}
}
