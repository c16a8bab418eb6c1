// Package lethe is an encrypted memory store with erasure you can prove.
//
// Services and agents write grains (a subject/relation/object triple and/or
// text, with type, namespace, scope, user, tags and importance) into named
// memories. Every memory, scope-path node and user has its own data key,
// wrapped by a key-encryption key (a local age identity by default, Vault
// transit in production); grains are sealed at rest and found through blind
// index tokens.
//
// # Use
//
//	db, err := lethe.Open(ctx, lethe.Config{DataDir: "./lethe-data"})
//	hash, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea"})
//	page, err := db.Recall(ctx, lethe.Query{Subject: "alice"})
//	res, err := db.Forget(ctx, lethe.Selector{Subject: "alice"})
//
// Errors carry stable codes: see [ErrorCode].
package lethe

import (
	"context"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// Add writes one grain and returns its hash. Writing the same grain again
// (same type, namespace, personal fields and scope) returns the existing
// hash, so retries are safe.
func (db *DB) Add(ctx context.Context, g Grain) (string, error) {
	hs, err := db.AddBatch(ctx, []Grain{g})
	if err != nil {
		return "", err
	}
	return hs[0], nil
}

// AddBatch writes grains of one memory in one transaction and returns their
// hashes in order. If any grain is invalid, nothing is written and the error
// names its position.
func (db *DB) AddBatch(ctx context.Context, gs []Grain) ([]string, error) {
	if len(gs) == 0 {
		return nil, grains.FieldError(grains.CodeInvalidArgument, "grains", "an empty batch")
	}
	if len(gs) > grains.MaxBatch {
		return nil, grains.FieldError(grains.CodeTooLarge, "grains", "at most 10000 grains per batch")
	}
	tags := 0
	for i := range gs {
		tags += len(gs[i].Tags)
	}
	if tags > grains.MaxBatchTags {
		return nil, &grains.Error{Code: grains.CodeTooLarge, Field: "grains", Message: "at most 65536 tags in one batch",
			Hint: "split the batch into smaller ones"}
	}
	now := db.now().UTC()
	batch := make([]Grain, len(gs)) // copies: the caller's grains are not modified
	for i := range gs {
		g := &batch[i]
		*g = gs[i]
		if err := db.prepare(g, now); err != nil {
			return nil, atIndex(err, i, len(gs))
		}
		if g.Memory != batch[0].Memory {
			return nil, atIndex(grains.FieldError(grains.CodeInvalidArgument, "memory", "a batch writes to one memory"), i, len(gs))
		}
		if g.Supersedes != "" {
			return nil, atIndex(grains.FieldError(grains.CodeInvalidArgument, "supersedes", "use Supersede to write a new version"), i, len(gs))
		}
	}
	if err := db.checkDimensions(ctx, batch); err != nil {
		return nil, err
	}
	var hs []string
	err := db.retryErased(func() (err error) {
		hs, err = db.insertBatch(ctx, batch)
		return err
	})
	if err != nil {
		return nil, err
	}
	db.sweep.Wrote(batch[0].Memory)
	return hs, nil
}

// erasedAttempts bounds the attempts of a write whose keys another instance
// erases meanwhile. Each retry follows an erasure that committed, so the
// worst race needs three: the first attempt seals under a key this process
// had cached and another instance had erased; the second creates the
// user's new key, which a concurrent erase of that user destroys before the
// grain commits; the third comes after that erase.
const erasedAttempts = 4

// retryErased runs op until it succeeds, fails for another reason than an
// erased key, or has run erasedAttempts times. Before each retry it drops
// the cached keys, so that an erased user or scope gets a new key.
func (db *DB) retryErased(op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		if grains.ErrorCode(err) != grains.CodeErased || attempt == erasedAttempts {
			return err
		}
		db.ring.Purge()
	}
}

// insertBatch resolves the batch's key chains, seals it and inserts it: one
// attempt of AddBatch. An error with code erased means a cached key was
// erased by another instance (the store refuses a grain, or a new user key,
// under a destroyed key).
func (db *DB) insertBatch(ctx context.Context, batch []Grain) ([]string, error) {
	if err := db.sealer.Warm(ctx, batch); err != nil {
		return nil, err
	}
	s, err := db.sealer.Start(ctx, batch)
	if err != nil {
		return nil, err
	}
	hs, err := db.store.InsertGrains(ctx, batch[0].Memory, s.Rows, s.Ready)
	if serr := s.Wait(); err == nil && serr != nil {
		hs, err = nil, serr
	}
	return hs, err
}

// prepare normalizes and validates g for writing at now.
func (db *DB) prepare(g *Grain, now time.Time) error {
	g.Normalize()
	if g.CreatedAt.IsZero() {
		g.CreatedAt = now
	} else if g.CreatedAt.After(now.Add(5 * time.Minute)) {
		return grains.FieldError(grains.CodeInvalidArgument, "created_at", "must not be in the future")
	}
	g.CreatedAt = g.CreatedAt.UTC().Truncate(time.Microsecond)
	g.Hash, g.SupersededBy, g.Archived = "", "", false
	g.LastRetrievedAt, g.RetrievalCount = nil, 0
	db.sweep.AutoPin(g)
	return g.Validate()
}

// Get returns the grain with hash in memory ("" means "default"),
// superseded or archived included.
func (db *DB) Get(ctx context.Context, memory, hash string) (*Grain, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	if err := checkHash(hash); err != nil {
		return nil, err
	}
	r, err := db.store.GrainByHash(ctx, memory, hash)
	if err != nil {
		return nil, err
	}
	db.observe([]store.GrainRow{*r})
	return db.sealer.Open(ctx, r)
}

// Recall returns the grains matching q one page at a time. Pages follow
// the grains newest first, so cursors are stable; within a page, a query
// with any filter is ranked by relevance (1 for every exact match) times
// the retrieval-time decay score, highest first. Recall records the
// retrieval of what it returns (last_retrieved_at, retrieval_count, a
// salience bump) in the background, without delaying the answer, unless
// q.Disclosure is set.
func (db *DB) Recall(ctx context.Context, q Query) (*Page, error) {
	if len(q.Tags) > grains.MaxTags { // bounded as given, before duplicates go
		return nil, grains.FieldError(grains.CodeTooLarge, "tags", "at most 64 tags")
	}
	q.Normalize()
	if err := q.Validate(); err != nil {
		return nil, err
	}
	if q.Search() {
		return db.searchRecall(ctx, &q)
	}
	rows, err := db.find(ctx, &q)
	if err != nil {
		return nil, err
	}
	db.observe(rows)
	page := &Page{Grains: make([]Grain, 0, len(rows))}
	ids := make([]int64, 0, len(rows))
	for i := range rows {
		g, err := db.sealer.Open(ctx, &rows[i])
		if grains.ErrorCode(err) == grains.CodeErased {
			continue
		}
		if err != nil {
			return nil, err
		}
		if matches(g, &q) {
			page.Grains = append(page.Grains, *g)
			ids = append(ids, rows[i].ID)
		}
	}
	if len(rows) == q.Limit {
		page.Next = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	db.sweep.Recalled(&q, page.Grains, ids)
	return page, nil
}

// find returns the rows of a page of q's answer.
func (db *DB) find(ctx context.Context, q *Query) ([]store.GrainRow, error) {
	var before int64
	if q.Cursor != "" {
		id, err := strconv.ParseInt(q.Cursor, 10, 64)
		if err != nil || id <= 0 {
			return nil, grains.FieldError(grains.CodeInvalidArgument, "cursor", "not a cursor from a previous page")
		}
		before = id
	}
	for fresh := false; ; fresh = true {
		f, ok, err := db.filter(ctx, q, fresh)
		if errors.Is(err, store.ErrStaleScopes) && !fresh {
			continue
		}
		if err != nil || !ok {
			return nil, err
		}
		f.BeforeID, f.Limit = before, q.Limit
		rows, err := db.store.FindGrains(ctx, *f)
		if errors.Is(err, store.ErrStaleScopes) && !fresh {
			continue // the cached index keys miss a scope: read them again
		}
		return rows, err
	}
}

// Supersede writes g as the new version of the grain oldHash in g.Memory
// and returns the new hash. The old grain stays, hidden from default
// recall, linked both ways.
//
// g holds the new field values. A field is set when g gives it a value
// other than its zero value (for Tags, Metadata and Embedding: not nil, so
// an empty list clears the tags) or when set names it by its JSON name;
// every other field carries forward from the old version. So
// Supersede(ctx, h, Grain{Object: "lyon"}) changes the object only, and
// Supersede(ctx, h, Grain{Confidence: 0}, "content", "confidence") clears
// the content and sets the confidence to 0. The type carries forward when
// g leaves it empty. Salience is not carried: the new version starts at 1,
// or at g's salience when set. A name outside [grains.SettableFields]
// (type, subject, relation, object, content, namespace, scope, user_id,
// tags, metadata, embedding, importance, confidence, salience, pinned) is
// an invalid_argument error.
func (db *DB) Supersede(ctx context.Context, oldHash string, g Grain, set ...string) (string, error) {
	if g.Memory == "" {
		g.Memory = grains.DefaultMemory
	}
	old, err := db.Get(ctx, g.Memory, oldHash)
	if err != nil {
		return "", err
	}
	if old.SupersededBy != "" {
		// A newer version that was erased leaves old the newest surviving
		// version: it may be superseded again (store.Supersede checks this
		// again in its transaction).
		erased, err := db.store.SuccessorErased(ctx, g.Memory, oldHash)
		if err != nil {
			return "", err
		}
		if !erased {
			return "", &grains.Error{Code: grains.CodeAlreadySuperseded, Message: "grain " + oldHash + " already has a newer version",
				Hint: "supersede the newest version; see its history"}
		}
	}
	if err := grains.Carry(&g, old, set); err != nil {
		return "", err
	}
	zeros := grains.ExplicitZeros(&g, set)
	if err := db.prepare(&g, db.now().UTC()); err != nil {
		return "", err
	}
	zeros.Restore(&g)
	if grains.Unchanged(&g, old, set) {
		return "", grains.Errorf(grains.CodeInvalidArgument, "the new version changes nothing")
	}
	if err := db.checkDimensions(ctx, []Grain{g}); err != nil {
		return "", err
	}
	g.Supersedes = oldHash
	// As in AddBatch: a key this process had cached may have been erased by
	// another instance. The old version's own erasure shows as not found
	// (store.Supersede reads it in its transaction), so it is not retried.
	var hash string
	err = db.retryErased(func() (err error) {
		hash, err = db.supersedeOnce(ctx, oldHash, &g)
		return err
	})
	return hash, err
}

// supersedeOnce seals g and commits it as the new version of oldHash with
// its audit event: one attempt of Supersede.
func (db *DB) supersedeOnce(ctx context.Context, oldHash string, g *Grain) (string, error) {
	row, err := db.sealer.Seal(ctx, g)
	if err != nil {
		return "", err
	}
	ev, err := db.journal.Event(ctx, proofs.EventGrainSupersede, g.Memory, func(l *proofs.Leaf) { l.Hashes = []string{oldHash, row.Hash} })
	if err != nil {
		return "", err
	}
	if err := db.store.Supersede(ctx, g.Memory, oldHash, row, []store.Event{ev}); err != nil {
		return "", err
	}
	db.journal.Committed()
	return row.Hash, nil
}

// History returns the version chain of hash, newest first. A version that
// was erased (its user, scope or memory key destroyed) appears as a Grain
// with only Hash and Erased set, and the chain is not followed past it; see
// docs/compliance/erasure.md. History of an erased grain itself fails like
// Get.
func (db *DB) History(ctx context.Context, memory, hash string) ([]Grain, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	if err := checkHash(hash); err != nil {
		return nil, err
	}
	rows, err := db.store.Chain(ctx, memory, hash)
	if err != nil {
		return nil, err
	}
	db.observe(rows)
	out := make([]Grain, 0, len(rows))
	for i := range rows {
		if rows[i].Erased {
			out = append(out, Grain{Hash: rows[i].Hash, Erased: true})
			continue
		}
		g, err := db.sealer.Open(ctx, &rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, *g)
	}
	return out, nil
}

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
	*Receipt
}

// Forget hard-deletes the selected grains, every version of their chains,
// and their index entries, in one transaction. A version chain is one fact:
// forgetting any version forgets them all. A forget by hash or hashes of a
// grain a protection rule of the policy keeps (pinned, a protected type,
// high importance) refuses with code protected, a reason and a hint, and
// the refusal is audited; see ForceForget.
func (db *DB) Forget(ctx context.Context, sel Selector) (*ForgetResult, error) {
	return db.forget(ctx, sel, false)
}

// ForceForget is Forget overriding protection rules (pinned grains,
// protected types, high importance), never legal holds: for a
// data-protection officer acting on an erasure request. Its grain.forget
// event carries reason protection_override when it overrode a rule.
func (db *DB) ForceForget(ctx context.Context, sel Selector) (*ForgetResult, error) {
	return db.forget(ctx, sel, true)
}

// forget is Forget, overriding protection rules when force is set.
func (db *DB) forget(ctx context.Context, sel Selector, force bool) (*ForgetResult, error) {
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	if sel.Narrowed() {
		if err := db.narrow(ctx, &sel); err != nil {
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
	var override bool
	var protected error
	var err error
	if sel.DryRun {
		if !force {
			if _, protected, err = db.sweep.Protected(ctx, sel.Memory, hashes); err != nil {
				return nil, err
			}
		}
	} else if override, err = db.sweep.CheckForget(ctx, sel.Memory, hashes, force); err != nil {
		return nil, err
	}
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
	mk := func(ctx context.Context, d *store.Deletion) ([]store.Event, error) {
		if sel.DryRun {
			return nil, store.ErrDryRun // roll back: nothing deleted, nothing audited
		}
		if len(d.Hashes) == 0 {
			return nil, nil
		}
		ev, err := db.journal.Event(ctx, proofs.EventGrainForget, sel.Memory, func(l *proofs.Leaf) {
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
	switch {
	case sel.Hash != "":
		if _, err := db.store.GrainByHash(ctx, sel.Memory, sel.Hash); err != nil {
			return nil, err
		}
		del, err = db.store.DeleteHashes(ctx, sel.Memory, []string{sel.Hash}, db.now().UnixMicro(), mk)
	case sel.Hashes != nil:
		del, err = db.store.DeleteHashes(ctx, sel.Memory, sel.Hashes, db.now().UnixMicro(), mk)
	default:
		q := Query{Memory: sel.Memory, Subject: sel.Subject, UserID: sel.UserID}
		f, ok, ferr := db.filter(ctx, &q, true)
		if ferr != nil || !ok {
			del, err = &store.Deletion{}, ferr
			break
		}
		del, err = db.store.DeleteWhere(ctx, *f, db.now().UnixMicro(), mk)
	}
	if sel.DryRun {
		return dryForget(del, err, protected)
	}
	if err != nil {
		return nil, db.refused(ctx, sel.Memory, err)
	}
	res := &ForgetResult{Count: len(del.Hashes), Hashes: del.Hashes, Status: "forgotten"}
	if res.Hashes == nil {
		res.Hashes = []string{}
	}
	if res.Count == 0 {
		res.Status = "not_found"
		return res, nil
	}
	if res.Receipt, err = db.receipt(ctx, eventID, leaf); err != nil {
		return nil, err
	}
	if nonce != nil {
		res.SubjectNonce = hex.EncodeToString(nonce)
	}
	return res, nil
}

// narrow turns sel, hashes narrowed by a subject and/or user, into the
// listed hashes whose grain is about that subject and by that user. A
// listed hash that names no grain, or an erased one, is left out as one
// that does not match.
func (db *DB) narrow(ctx context.Context, sel *Selector) error {
	hashes := sel.Hashes
	if sel.Hash != "" {
		hashes = []string{sel.Hash}
	}
	kept := []string{}
	for _, h := range hashes {
		g, err := db.Get(ctx, sel.Memory, h)
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
