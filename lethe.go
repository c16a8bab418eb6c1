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

	"github.com/lethe-io/lethe/internal/erasure"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
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
	return db.writes.AddBatch(ctx, gs)
}

// Get returns the grain with hash in memory ("" means "default"),
// superseded or archived included. ctx is checked before its read; on
// SQLite that read, one row by its index, is not interrupted once started.
// A grain whose key was destroyed fails with code erased and the message
// of a hash that names no grain (not_found once the cleaner has deleted
// its row).
func (db *DB) Get(ctx context.Context, memory, hash string) (*Grain, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	if err := checkHash(hash); err != nil {
		return nil, err
	}
	r, err := db.store.ReadGrain(ctx, memory, hash)
	if err != nil {
		return nil, erasedGrain(memory, hash, err)
	}
	db.observe([]store.GrainRow{*r})
	g, err := db.sealer.Open(ctx, r)
	return g, erasedGrain(memory, hash, err)
}

// erasedGrain is err, or for an error with code erased, the erased error
// of hash in memory: whatever key of its chain was destroyed, the grain
// named is gone, and said to be as NoGrain says it.
func erasedGrain(memory, hash string, err error) error {
	if grains.ErrorCode(err) == grains.CodeErased {
		return grains.Erased(memory, hash, err)
	}
	return err
}

// Recall returns the grains matching q one page at a time. Pages follow
// the grains newest first, so cursors are stable; within a page, a query
// with any filter is ranked by relevance (1 for every exact match) times
// the retrieval-time decay score, highest first. Recall records the
// retrieval of what it returns (last_retrieved_at, retrieval_count, a
// salience bump) in the background, without delaying the answer, unless
// q.Disclosure is set. When ctx ends, the statement running is
// interrupted.
func (db *DB) Recall(ctx context.Context, q Query) (*Page, error) { return db.recall.Recall(ctx, q) }

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
// an invalid_argument error. Superseding a grain whose key was destroyed
// fails as Get does.
func (db *DB) Supersede(ctx context.Context, oldHash string, g Grain, set ...string) (string, error) {
	h, err := db.writes.Supersede(ctx, oldHash, g, set...)
	return h, erasedGrain(g.Memory, oldHash, err)
}

// Locate returns, for each of hashes that names a grain of memory ("" means
// "default") that Get would return, where it is: a Grain with only Hash,
// Memory, Namespace and Scope set. A hash that names nothing, or an erased
// version, is left out. It reads the rows in one statement per 500 hashes
// and decrypts none; the API and the MCP server use it to learn which
// linked versions a partial view may show (grains.View).
func (db *DB) Locate(ctx context.Context, memory string, hashes []string) (map[string]Grain, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	for _, h := range hashes {
		if err := checkHash(h); err != nil {
			return nil, err
		}
	}
	return db.recall.Locate(ctx, memory, hashes)
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
		return nil, erasedGrain(memory, hash, err)
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
			return nil, erasedGrain(memory, hash, err)
		}
		out = append(out, *g)
	}
	return out, nil
}

// ForgetResult says what Forget removed, or with Selector.DryRun would
// remove: DryRun (nothing was changed), Count (the grains deleted, every
// version included), Hashes (sorted), Status ("forgotten", or "not_found"
// when nothing matched; a dry run answers "would_forget", "not_found", or
// the refusal the forget would meet: "held", with HeldBy the hold, or
// "protected", with Reason the protection rule), and, when it removed
// anything, the Receipt of its audit event with its proof.
type ForgetResult = erasure.ForgetResult

// Forget hard-deletes the selected grains, every version of their chains,
// and their index entries, in one transaction. A version chain is one fact:
// forgetting any version forgets them all, whoever wrote them, so a forget
// by user, or narrowed by user, also deletes other users' versions of the
// chains it selects (Selector.DryRun lists them first); ForgetUser is the
// way to remove one user's versions only. A forget by hash or hashes of a
// grain a protection rule of the policy keeps (pinned, a protected type,
// high importance) refuses with code protected, a reason and a hint, and
// the refusal is audited; see ForceForget. The hash of a crypto-erased
// grain names no grain: a forget by it (Hash: not_found; Hashes: passed
// over) deletes nothing through it, its chain's survivors included. With
// Selector.Scopes it deletes only chains wholly within those scopes, with
// Selector.Namespace only chains wholly in that namespace, checked in the
// delete's transaction, and refuses the rest (an erased version counts as
// outside) with code forbidden, unaudited.
func (db *DB) Forget(ctx context.Context, sel Selector) (*ForgetResult, error) {
	return db.erasure.Forget(ctx, sel, false)
}

// ForceForget is Forget overriding protection rules (pinned grains,
// protected types, high importance), never legal holds: for a
// data-protection officer acting on an erasure request. Its grain.forget
// event carries reason protection_override when it overrode a rule.
func (db *DB) ForceForget(ctx context.Context, sel Selector) (*ForgetResult, error) {
	return db.erasure.Forget(ctx, sel, true)
}
