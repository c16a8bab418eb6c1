package erasure

import (
	"context"
	"encoding/hex"
	"errors"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/crashpoint"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// ForgetResult says what Forget removed, or with Selector.DryRun would
// remove. When it removed anything, the embedded Receipt names the audit
// event and carries its proof.
type ForgetResult struct {
	// DryRun says nothing was changed: the result is what the forget
	// would do.
	DryRun bool `json:"dry_run,omitempty"`
	// Count is the number of grains deleted (would be deleted), every
	// version included.
	Count int `json:"count"`
	// Hashes are the deleted grains' hashes, sorted.
	Hashes []string `json:"hashes"`
	// Status is "forgotten", or "not_found" when nothing matched. A dry run
	// answers "would_forget", "not_found", or the refusal the forget would
	// meet: "held" (a legal hold covers a selected grain; see HeldBy) or
	// "protected" (a protection rule keeps one; see Reason), with Count and
	// Hashes what it selects.
	Status string `json:"status"`
	// HeldBy is the id of the hold that would refuse a dry run's forget.
	HeldBy string `json:"held_by,omitempty"`
	// Reason is the protection rule that would refuse a dry run's forget.
	Reason string `json:"reason,omitempty"`
	*audit.Receipt
}

// Forget hard-deletes the grains sel selects (see package lethe's
// DB.Forget), overriding protection rules when force is set.
func (e *Eraser) Forget(ctx context.Context, sel grains.Selector, force bool) (*ForgetResult, error) {
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	outside := outsideConfinement(&sel)
	if sel.Narrowed() {
		if err := e.narrow(ctx, &sel); err != nil {
			return nil, err
		}
		if len(sel.Hashes) == 0 {
			return &ForgetResult{DryRun: sel.DryRun, Hashes: []string{}, Status: "not_found"}, nil
		}
	}
	hashes := sel.Hashes
	if sel.Hash != "" {
		hashes = []string{sel.Hash}
	}
	// Protection rules keep grains from a forget by hash; a forget by
	// subject or user is an erasure request about a person, which only a
	// hold refuses. The rules are checked on the rows the delete removes,
	// read in its transaction (store.Deletion's Ops): a version that a
	// concurrent supersede adds is checked with the rest, or not deleted.
	// With force a data-protection officer overrides them (a dry run then
	// reports no protection), and the event says so.
	protects := len(hashes) > 0 && !(sel.DryRun && force)
	var override bool
	// Forgetting by subject or user commits to what was named, so the caller
	// can later prove which person the event concerned.
	var nonce []byte
	var commitment string
	if subject := sel.Subject + sel.UserID; subject != "" {
		nonce = proofs.NewNonce()
		commitment = proofs.Commitment(nonce, subject)
	}
	var leaf []byte
	var eventID string
	// Scopes and a namespace (Selector.Scopes, Selector.Namespace) confine
	// the forget as the protection rules keep grains from it, checked on
	// the rows the delete removes, in its transaction: a version that a
	// concurrent supersede adds outside them refuses the forget, or is not
	// deleted. The refusal, which comes before any other, is not audited:
	// nothing outside the caller's confinement was tried.
	mk := func(ctx context.Context, d *store.Deletion) ([]store.Event, error) {
		if err := outside(d.Ops); err != nil {
			return nil, err // roll back
		}
		if sel.DryRun {
			return nil, store.ErrDryRun // roll back: nothing deleted, nothing audited
		}
		override = false // mk runs again when the store retries its transaction
		if protects {
			if _, perr := e.cfg.Protection.Protected(d.Ops); perr != nil {
				if !force {
					return nil, perr // roll back; audited below
				}
				override = true
			}
		}
		if len(d.Hashes) == 0 {
			return nil, nil
		}
		ev, err := e.cfg.Journal.Event(ctx, proofs.EventGrainForget, sel.Memory, func(l *proofs.Leaf) {
			audit.SetHashes(l, d.Hashes)
			l.Commitment = commitment
			if override {
				l.Reason = "protection_override"
			}
		})
		audit.KeepHashes(&ev, d.Hashes)
		leaf, eventID = ev.Leaf, ev.ID
		return []store.Event{ev}, err
	}
	var del *store.Deletion
	var err error
	switch {
	case sel.Hash != "":
		del, err = e.cfg.Store.DeleteHashes(ctx, sel.Memory, []string{sel.Hash}, e.cfg.Now().UnixMicro(), mk)
		if del != nil && len(del.Hashes) == 0 && (err == nil || errors.Is(err, store.ErrDryRun)) {
			// Nothing to delete: the hash names no grain, or an erased
			// one, which the delete passes over as no grain.
			return nil, grains.NoGrain(sel.Memory, sel.Hash)
		}
	case sel.Hashes != nil:
		del, err = e.cfg.Store.DeleteHashes(ctx, sel.Memory, sel.Hashes, e.cfg.Now().UnixMicro(), mk)
	default:
		q := grains.Query{Memory: sel.Memory, Subject: sel.Subject, UserID: sel.UserID}
		f, ok, ferr := e.cfg.Filter.Filter(ctx, &q, true)
		if ferr != nil || !ok {
			del, err = &store.Deletion{}, ferr
			break
		}
		del, err = e.cfg.Store.DeleteWhere(ctx, *f, e.cfg.Now().UnixMicro(), mk)
	}
	if del != nil {
		// Whether mk met it or a hold refused the delete first, and in a
		// dry run.
		if err := outside(del.Ops); err != nil {
			return nil, err
		}
	}
	// The refusal by a rule, whether mk met it or a hold refused the
	// delete first: a protected grain is refused as protected, held or not,
	// as when the rules were checked before the delete.
	var protectedHash string
	var protected error
	if protects && del != nil {
		protectedHash, protected = e.cfg.Protection.Protected(del.Ops)
	}
	if sel.DryRun {
		return dryForget(del, err, protected)
	}
	if protected != nil && !force {
		return nil, e.refusedProtected(ctx, sel.Memory, protectedHash, protected)
	}
	if err != nil {
		return nil, e.Refused(ctx, sel.Memory, err)
	}
	res := &ForgetResult{Count: len(del.Hashes), Hashes: del.Hashes, Status: "forgotten"}
	if res.Hashes == nil {
		res.Hashes = []string{}
	}
	if res.Count == 0 {
		res.Status = "not_found"
		return res, nil
	}
	crashpoint.Hit(crashpoint.ForgetCommitted)
	if res.Receipt, err = e.cfg.Journal.Receipt(ctx, eventID, leaf); err != nil {
		return nil, err
	}
	if nonce != nil {
		res.SubjectNonce = hex.EncodeToString(nonce)
	}
	return res, nil
}

// outsideConfinement returns the check of sel's confinement (Scopes and
// Namespace) on the rows a delete removes: nil when they are all within
// it (always, unconfined), and code forbidden, naming no hash, when one is
// outside it, was made unreadable by an erasure, or links to a version the
// cleaner deleted after an erasure (its scope and namespace are no longer
// known). The field is the selector's.
func outsideConfinement(sel *grains.Selector) func(rows []store.OpRow) error {
	if !sel.Confined() {
		return func([]store.OpRow) error { return nil }
	}
	field := "hash"
	switch {
	case sel.Hashes != nil:
		field = "hashes"
	case sel.Subject != "" && sel.Hash == "":
		field = "subject"
	case sel.UserID != "" && sel.Hash == "":
		field = "user_id"
	}
	what := "scopes"
	switch {
	case sel.Scopes == nil:
		what = "namespace"
	case sel.Namespace != "":
		what = "namespace and scopes"
	}
	refusal := func() error {
		return &grains.Error{Code: grains.CodeForbidden, Field: field,
			Message: "a version of a selected chain is outside the selector's " + what,
			Hint:    "forgetting a grain forgets its whole chain"}
	}
	return func(rows []store.OpRow) error {
		in := make(map[string]bool, len(rows))
		for i := range rows {
			in[rows[i].Hash] = true
		}
		for i := range rows {
			r := &rows[i]
			if r.Erasing || !sel.InScopes(r.Scope) || !sel.InNamespace(r.Namespace) {
				return refusal()
			}
			for _, h := range [...]string{r.Supersedes, r.SupersededBy} {
				if h != "" && !in[h] {
					return refusal() // a version erased and deleted by the cleaner
				}
			}
		}
		return nil
	}
}

// narrow turns sel, hashes narrowed by a subject and/or user, into the
// listed hashes whose grain is about that subject and by that user. A
// listed hash that names no grain, or an erased one, is left out as one
// that does not match.
func (e *Eraser) narrow(ctx context.Context, sel *grains.Selector) error {
	hashes := sel.Hashes
	if sel.Hash != "" {
		hashes = []string{sel.Hash}
	}
	kept := []string{}
	for _, h := range hashes {
		g, err := e.get(ctx, sel.Memory, h)
		if c := grains.ErrorCode(err); c == grains.CodeNotFound || c == grains.CodeErased {
			continue
		}
		if err != nil {
			return err
		}
		if sel.Matches(g) {
			kept = append(kept, h)
		}
	}
	sel.Hash, sel.Hashes, sel.Subject, sel.UserID = "", kept, "", ""
	return nil
}

// dryForget is a dry run's answer: what the rolled-back deletion del held,
// and the refusal (protected, then held) the forget would meet.
func dryForget(del *store.Deletion, err error, protected error) (*ForgetResult, error) {
	var held *store.HeldBy
	switch {
	case err == nil, errors.Is(err, store.ErrDryRun), errors.As(err, &held):
	default:
		return nil, err
	}
	res := &ForgetResult{DryRun: true, Hashes: []string{}, Status: "would_forget"}
	if del != nil && del.Hashes != nil {
		res.Hashes = del.Hashes
	}
	res.Count = len(res.Hashes)
	switch {
	case res.Count == 0:
		res.Status = "not_found"
	case protected != nil:
		res.Status, res.Reason = "protected", errorMessage(protected)
	case held != nil:
		res.Status, res.HeldBy = "held", held.HoldID
	}
	return res, nil
}

// errorMessage is the client-safe message of a domain error.
func errorMessage(err error) string {
	var e *grains.Error
	if errors.As(err, &e) {
		return e.Message
	}
	return string(grains.ErrorCode(err))
}

// get returns the grain with hash in memory, as package lethe's DB.Get.
func (e *Eraser) get(ctx context.Context, memory, hash string) (*grains.Grain, error) {
	if !grains.ValidHash(hash) {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "hash", "must be 64 lowercase hex digits")
	}
	r, err := e.cfg.Store.GrainByHash(ctx, memory, hash)
	if err != nil {
		return nil, err
	}
	e.cfg.Opener.Observe([]store.GrainRow{*r})
	return e.cfg.Opener.Open(ctx, r)
}
