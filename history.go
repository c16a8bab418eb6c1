package lethe

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/history"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// HistoryRequest asks for a version-chain audit export: exactly one of Hash
// (the chain of that grain, found in the store or, once forgotten, in the
// audit log) or Subject (every chain with a version whose subject is
// Subject, exactly as recall matches it), and the age X25519 recipient
// ("age1...") to encrypt it to.
type HistoryRequest struct {
	Memory    string
	Hash      string
	Subject   string
	Recipient string
	// WithholdFields leaves every version's fields out: for a reader who
	// may see the chain's shape and proofs but no grain content (an
	// auditor).
	WithholdFields bool
}

// HistoryExport is what ExportHistory returns.
type HistoryExport struct {
	// Data is the ASCII-armored age file of the signed
	// proofs.HistoryExportFormat document (see proofs.SealHistoryExport).
	Data []byte
	// EventID names the history.export audit event.
	EventID string
	// SubjectNonce (hex) opens the event's commitment to Subject, for the
	// caller alone; empty for a request by hash.
	SubjectNonce string
	// Chains, Versions and Events count what the export holds.
	Chains, Versions, Events int
}

// ExportHistory returns, age-encrypted to the request's recipient, every
// version of the selected version chains (fields, timestamps, and who
// superseded each version when), each grain.supersede, grain.forget,
// grain.purge, grain.archive and key.erase event of the chains with its
// inclusion proof, and the signed checkpoint the proofs are against, as one
// document signed by the log key. "lethe verify-export" checks it offline.
//
// Forgotten and erased versions keep their hashes, states and events;
// their fields are gone. A selector that matches no chain fails with code
// no_chain. A chain event that no signed checkpoint covers within
// Config.ProofWait fails the call with code pending (retry).
//
// The disclosure is audited as ExportUser's is: a history.export event
// commits before the export is returned, with the count and hashes of the
// versions, the recipient's fingerprint and, for a subject, a commitment
// whose nonce is returned in SubjectNonce; never the subject or recipient.
func (db *DB) ExportHistory(ctx context.Context, req HistoryRequest) (*HistoryExport, error) {
	memory, err := memoryName(req.Memory)
	if err != nil {
		return nil, err
	}
	req.Subject = grains.NormalizeText(req.Subject)
	if (req.Hash == "") == (strings.TrimSpace(req.Subject) == "") {
		return nil, &grains.Error{Code: grains.CodeEmptySelector, Message: "name exactly one of a hash or a subject"}
	}
	selector := "subject"
	if req.Hash != "" {
		selector = "hash"
		if err := checkHash(req.Hash); err != nil {
			return nil, err
		}
	}
	rcpt, err := parseRecipient(req.Recipient)
	if err != nil {
		return nil, err
	}
	seeds := []string{req.Hash}
	if selector == "subject" {
		if seeds, err = db.subjectSeeds(ctx, memory, req.Subject); err != nil {
			return nil, err
		}
	}
	rows := historyRows{db: db, memory: memory, withhold: req.WithholdFields}
	chains, err := db.historyChains(ctx, memory, rows, seeds)
	if err != nil {
		return nil, err
	}
	if len(chains) == 0 {
		return nil, &grains.Error{Code: grains.CodeNoChain, Message: "no version chain matches the " + selector,
			Hint: "a subject finds chains that still have a stored version; a forgotten chain is found by one of its hashes"}
	}
	// Every event must be under a signed checkpoint: unless the latest one
	// covers them all, wait for the last one committed, then read the
	// chains again with their leaf indices.
	cp, err := db.checkpointAt(ctx, 0)
	if err != nil && grains.ErrorCode(err) != grains.CodeNotFound {
		return nil, err
	}
	if last := history.Latest(chains); last != nil && !covered(chains, cp) {
		r, err := db.journal.Receipt(ctx, last.ID, last.Raw)
		if err != nil {
			return nil, err
		}
		if r.Pending {
			return nil, pendingHistory()
		}
		if chains, err = db.historyChains(ctx, memory, rows, seeds); err != nil {
			return nil, err
		}
		if cp, err = db.checkpointAt(ctx, 0); err != nil {
			return nil, err
		}
	}
	if cp == nil {
		return nil, pendingHistory() // no event at all, and no checkpoint yet
	}
	doc := &proofs.HistoryExport{Format: proofs.HistoryExportFormat, Memory: memory, ExportedAt: history.Truncate(db.now()),
		Selector: selector, Hash: req.Hash, FieldsWithheld: req.WithholdFields, Checkpoint: string(cp.Note)}
	res := &HistoryExport{Chains: len(chains)}
	var hashes []string
	for _, c := range chains {
		hc := proofs.HistoryChain{Versions: c.Versions, Events: make([]proofs.HistoryEvent, 0, len(c.Events))}
		for _, e := range c.Events {
			if !e.Sequenced || e.Index >= cp.Size {
				return nil, pendingHistory()
			}
			// Another replica's clock may run a little ahead: the export is
			// never dated before an event it holds.
			if e.Leaf.Time.After(doc.ExportedAt) {
				doc.ExportedAt = e.Leaf.Time
			}
			p, err := db.seq.ProveAt(ctx, e.Index, e.Raw, cp)
			if err != nil {
				return nil, audit.DomainError(err)
			}
			hc.Events = append(hc.Events, proofs.HistoryEvent{Type: e.Leaf.Type, Proof: p})
			if e.Leaf.Digest != "" {
				if doc.HashLists == nil {
					doc.HashLists = map[string][]string{}
				}
				doc.HashLists[e.Leaf.Digest] = history.Sorted(e.Hashes)
			}
		}
		for _, v := range c.Versions {
			hashes = append(hashes, v.Hash)
		}
		res.Versions += len(c.Versions)
		res.Events += len(c.Events)
		doc.Chains = append(doc.Chains, hc)
	}
	plain, err := proofs.SealHistoryExport(doc, db.signer)
	if err != nil {
		return nil, grains.Wrap(grains.CodeInternal, "encode history export", err)
	}
	if res.Data, err = encryptArmored(rcpt, plain); err != nil {
		return nil, err
	}
	var nonce []byte
	if selector == "subject" {
		nonce = proofs.NewNonce()
		res.SubjectNonce = hex.EncodeToString(nonce)
	}
	ev, err := db.journal.Event(ctx, proofs.EventHistoryExport, memory, func(l *proofs.Leaf) {
		n := uint64(len(hashes))
		l.Count = &n
		audit.SetHashes(l, hashes)
		l.KeyFingerprints = []string{RecipientFingerprint(rcpt.String())}
		if nonce != nil {
			l.Commitment = proofs.Commitment(nonce, req.Subject)
		}
		if req.WithholdFields {
			l.Reason = "fields_withheld"
		}
	})
	if err != nil {
		return nil, err
	}
	if err := db.journal.Append(ctx, ev); err != nil {
		return nil, err
	}
	res.EventID = ev.ID
	return res, nil
}

// covered reports whether the checkpoint cp (nil: none) covers every event
// of chains.
func covered(chains []history.Chain, cp *audit.SignedCheckpoint) bool {
	for _, c := range chains {
		for _, e := range c.Events {
			if cp == nil || !e.Sequenced || e.Index >= cp.Size {
				return false
			}
		}
	}
	return true
}

func pendingHistory() error {
	return &grains.Error{Code: grains.CodePending, Message: "an event of the chain is not yet covered by a signed checkpoint",
		Hint: "retry in a moment"}
}

// maxHistorySeeds bounds the grains a subject selector may match.
const maxHistorySeeds = 10000

// subjectSeeds returns the hashes of every stored grain of memory whose
// subject is subject, superseded and archived ones included.
func (db *DB) subjectSeeds(ctx context.Context, memory, subject string) ([]string, error) {
	var out []string
	q := Query{Memory: memory, Subject: subject, IncludeSuperseded: true, IncludeArchived: true, Disclosure: true, Limit: grains.MaxLimit}
	for {
		page, err := db.Recall(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, g := range page.Grains {
			out = append(out, g.Hash)
		}
		if len(out) > maxHistorySeeds {
			return nil, &grains.Error{Code: grains.CodeTooLarge, Field: "subject", Message: "the subject matches more than 10000 grains",
				Hint: "export chains by hash"}
		}
		if page.Next == "" {
			return out, nil
		}
		q.Cursor = page.Next
	}
}

// historyChains reads memory's chain events and assembles the chains of
// seeds.
func (db *DB) historyChains(ctx context.Context, memory string, rows historyRows, seeds []string) ([]history.Chain, error) {
	evs, err := db.store.MemoryEvents(ctx, memory, history.EventTypes)
	if err != nil {
		return nil, err
	}
	bulk, err := db.store.BulkHashes(ctx, memory)
	if err != nil {
		return nil, err
	}
	events := make([]history.Event, 0, len(evs))
	for _, e := range evs {
		l, err := proofs.ParseLeaf(e.Leaf)
		if err != nil {
			return nil, grains.Wrap(grains.CodeInternal, "read audit event", err)
		}
		events = append(events, history.Event{Order: e.Order, ID: e.EventID, Raw: e.Leaf, Leaf: l, Index: uint64(e.Seq), Sequenced: e.Sequenced, Hashes: bulk[e.EventID]})
	}
	return history.Chains(ctx, rows, events, seeds)
}

// historyRows adapts the store and sealer to history.Rows.
type historyRows struct {
	db       *DB
	memory   string
	withhold bool
}

func (r historyRows) Rows(ctx context.Context, hashes []string) (map[string]history.Row, error) {
	vs, err := r.db.store.Versions(ctx, r.memory, hashes)
	if err != nil {
		return nil, err
	}
	out := make(map[string]history.Row, len(vs))
	for h, v := range vs {
		if v.Row == nil { // deleted by the cleaner after an erasure
			out[h] = history.Row{Erased: true, Deleted: true, KeyFingerprints: v.KeyFingerprints, Destroyed: v.Destroyed}
			continue
		}
		row := history.Row{Supersedes: v.Row.Supersedes, SupersededBy: v.Row.SupersededBy, Erased: v.Erased,
			KeyFingerprints: v.KeyFingerprints, Destroyed: v.Destroyed}
		if !v.Erased && !r.withhold {
			r.db.observe([]store.GrainRow{*v.Row})
			g, err := r.db.sealer.Open(ctx, v.Row)
			switch {
			case grains.ErrorCode(err) == grains.CodeErased:
				row.Erased = true
			case err != nil:
				return nil, err
			default:
				if row.Fields, err = json.Marshal(g); err != nil {
					return nil, grains.Wrap(grains.CodeInternal, "encode grain", err)
				}
			}
		}
		out[h] = row
	}
	return out, nil
}
