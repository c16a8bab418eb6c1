package history

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/recall"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/proofs"
)

// History exports: the chains of Chains, each event with its inclusion
// proof against one signed checkpoint, signed by the log key as one
// proofs.HistoryExport document, encrypted with age to the reader, and
// audited by a history.export event.

// Store is what an Exporter reads from the store. *store.DB implements it.
type Store interface {
	MemoryEvents(ctx context.Context, memory string, types []string) ([]store.MemoryEvent, error)
	Versions(ctx context.Context, memory string, hashes []string) (map[string]store.Version, error)
	BulkHashes(ctx context.Context, memory string) (map[string][]string, error)
}

var _ Store = (*store.DB)(nil)

// Opener opens sealed rows; Observe must see rows before they are opened
// (see recall.Opener).
type Opener interface {
	Observe(rows []store.GrainRow)
	Open(ctx context.Context, r *store.GrainRow) (*grains.Grain, error)
}

// Recaller answers the query that finds a subject's grains.
// *recall.Engine implements it.
type Recaller interface {
	Recall(ctx context.Context, q grains.Query) (*recall.Page, error)
}

// Journal builds and commits the history.export event and waits for
// receipts. *audit.Journal implements it.
type Journal interface {
	Event(ctx context.Context, typ proofs.EventType, memory string, fill func(*proofs.Leaf)) (audit.Event, error)
	Append(ctx context.Context, evs ...audit.Event) error
	Receipt(ctx context.Context, id string, leaf []byte) (*audit.Receipt, error)
}

// Prover proves a sequenced leaf against a checkpoint. *audit.Sequencer
// implements it.
type Prover interface {
	ProveAt(ctx context.Context, index uint64, leaf []byte, cp *audit.SignedCheckpoint) (*proofs.Proof, error)
}

// ExporterConfig configures an Exporter.
type ExporterConfig struct {
	Store   Store
	Opener  Opener
	Recall  Recaller
	Journal Journal
	Prover  Prover
	// Latest returns the latest signed checkpoint (code not_found when the
	// log has none).
	Latest func(ctx context.Context) (*audit.SignedCheckpoint, error)
	Signer *proofs.Signer
	Now    func() time.Time
}

// Exporter builds history exports.
type Exporter struct{ cfg ExporterConfig }

// NewExporter returns an Exporter.
func NewExporter(cfg ExporterConfig) *Exporter { return &Exporter{cfg: cfg} }

// Request asks for a version-chain audit export: exactly one of Hash
// (the chain of that grain, found in the store or, once forgotten, in the
// audit log) or Subject (every chain with a version whose subject is
// Subject, exactly as recall matches it), and the age X25519 recipient
// ("age1...") to encrypt it to.
type Request struct {
	Memory    string
	Hash      string
	Subject   string
	Recipient string
	// WithholdFields leaves every version's fields out: for a reader who
	// may see the chain's shape and proofs but no grain content (an
	// auditor).
	WithholdFields bool
}

// Export is what Exporter.Export returns (package lethe's HistoryExport).
type Export struct {
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

// Export builds, signs, encrypts and audits the export req asks for (see
// package lethe's DB.ExportHistory); req.Memory arrives validated.
func (x *Exporter) Export(ctx context.Context, req Request) (*Export, error) {
	memory := req.Memory
	var err error
	req.Subject = grains.NormalizeText(req.Subject)
	switch hash, subject := req.Hash != "", strings.TrimSpace(req.Subject) != ""; {
	case hash && subject:
		return nil, grains.FieldError(grains.CodeInvalidArgument, "subject", "name a hash or a subject, not both")
	case !hash && !subject:
		return nil, &grains.Error{Code: grains.CodeEmptySelector, Message: "name exactly one of a hash or a subject"}
	}
	selector := "subject"
	if req.Hash != "" {
		selector = "hash"
		if !grains.ValidHash(req.Hash) {
			return nil, grains.FieldError(grains.CodeInvalidArgument, "hash", "must be 64 lowercase hex digits")
		}
	}
	rcpt, err := ParseRecipient(req.Recipient)
	if err != nil {
		return nil, err
	}
	seeds := []string{req.Hash}
	if selector == "subject" {
		if seeds, err = x.subjectSeeds(ctx, memory, req.Subject); err != nil {
			return nil, err
		}
	}
	rows := storeRows{x: x, memory: memory, withhold: req.WithholdFields}
	chains, err := x.chains(ctx, memory, rows, seeds)
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
	cp, err := x.cfg.Latest(ctx)
	if err != nil && grains.ErrorCode(err) != grains.CodeNotFound {
		return nil, err
	}
	if last := Latest(chains); last != nil && !covered(chains, cp) {
		r, err := x.cfg.Journal.Receipt(ctx, last.ID, last.Raw)
		if err != nil {
			return nil, err
		}
		if r.Pending {
			return nil, pendingHistory()
		}
		if chains, err = x.chains(ctx, memory, rows, seeds); err != nil {
			return nil, err
		}
		if cp, err = x.cfg.Latest(ctx); err != nil {
			return nil, err
		}
	}
	if cp == nil {
		return nil, pendingHistory() // no event at all, and no checkpoint yet
	}
	doc := &proofs.HistoryExport{Format: proofs.HistoryExportFormat, Memory: memory, ExportedAt: Truncate(x.cfg.Now()),
		Selector: selector, Hash: req.Hash, FieldsWithheld: req.WithholdFields, Checkpoint: string(cp.Note)}
	res := &Export{Chains: len(chains)}
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
			p, err := x.cfg.Prover.ProveAt(ctx, e.Index, e.Raw, cp)
			if err != nil {
				return nil, audit.DomainError(err)
			}
			hc.Events = append(hc.Events, proofs.HistoryEvent{Type: e.Leaf.Type, Proof: p})
			if e.Leaf.Digest != "" {
				if doc.HashLists == nil {
					doc.HashLists = map[string][]string{}
				}
				doc.HashLists[e.Leaf.Digest] = Sorted(e.Hashes)
			}
		}
		for _, v := range c.Versions {
			hashes = append(hashes, v.Hash)
		}
		res.Versions += len(c.Versions)
		res.Events += len(c.Events)
		doc.Chains = append(doc.Chains, hc)
	}
	plain, err := proofs.SealHistoryExport(doc, x.cfg.Signer)
	if err != nil {
		return nil, grains.Wrap(grains.CodeInternal, "encode history export", err)
	}
	if res.Data, err = EncryptArmored(rcpt, plain); err != nil {
		return nil, err
	}
	var nonce []byte
	if selector == "subject" {
		nonce = proofs.NewNonce()
		res.SubjectNonce = hex.EncodeToString(nonce)
	}
	ev, err := x.cfg.Journal.Event(ctx, proofs.EventHistoryExport, memory, func(l *proofs.Leaf) {
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
	if err := x.cfg.Journal.Append(ctx, ev); err != nil {
		return nil, err
	}
	res.EventID = ev.ID
	return res, nil
}

// covered reports whether the checkpoint cp (nil: none) covers every event
// of chains.
func covered(chains []Chain, cp *audit.SignedCheckpoint) bool {
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
func (x *Exporter) subjectSeeds(ctx context.Context, memory, subject string) ([]string, error) {
	var out []string
	q := grains.Query{Memory: memory, Subject: subject, IncludeSuperseded: true, IncludeArchived: true, Disclosure: true, Limit: grains.MaxLimit}
	for {
		page, err := x.cfg.Recall.Recall(ctx, q)
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
func (x *Exporter) chains(ctx context.Context, memory string, rows storeRows, seeds []string) ([]Chain, error) {
	evs, err := x.cfg.Store.MemoryEvents(ctx, memory, EventTypes)
	if err != nil {
		return nil, err
	}
	bulk, err := x.cfg.Store.BulkHashes(ctx, memory)
	if err != nil {
		return nil, err
	}
	events := make([]Event, 0, len(evs))
	for _, e := range evs {
		l, err := proofs.ParseLeaf(e.Leaf)
		if err != nil {
			return nil, grains.Wrap(grains.CodeInternal, "read audit event", err)
		}
		events = append(events, Event{Order: e.Order, ID: e.EventID, Raw: e.Leaf, Leaf: l, Index: uint64(e.Seq), Sequenced: e.Sequenced, Hashes: bulk[e.EventID]})
	}
	return Chains(ctx, rows, events, seeds)
}

// storeRows adapts the store and the opener to Rows.
type storeRows struct {
	x        *Exporter
	memory   string
	withhold bool
}

func (r storeRows) Rows(ctx context.Context, hashes []string) (map[string]Row, error) {
	vs, err := r.x.cfg.Store.Versions(ctx, r.memory, hashes)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Row, len(vs))
	for h, v := range vs {
		if v.Row == nil { // deleted by the cleaner after an erasure
			out[h] = Row{Erased: true, Deleted: true, KeyFingerprints: v.KeyFingerprints, Destroyed: v.Destroyed}
			continue
		}
		row := Row{Supersedes: v.Row.Supersedes, SupersededBy: v.Row.SupersededBy, Erased: v.Erased,
			KeyFingerprints: v.KeyFingerprints, Destroyed: v.Destroyed}
		if !v.Erased && !r.withhold {
			r.x.cfg.Opener.Observe([]store.GrainRow{*v.Row})
			g, err := r.x.cfg.Opener.Open(ctx, v.Row)
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

// RecipientFingerprint is how a subject.export event names the recipient an
// export was encrypted to: lowercase hex SHA-256 of "lethe/recipient/v1",
// a zero byte and the recipient string ("age1..."). Whoever holds the
// recipient can check it; the leaf does not reveal it.
func RecipientFingerprint(recipient string) string {
	sum := sha256.Sum256([]byte("lethe/recipient/v1\x00" + recipient))
	return hex.EncodeToString(sum[:])
}

// ParseRecipient parses an age X25519 recipient ("age1...").
func ParseRecipient(recipient string) (*age.X25519Recipient, error) {
	rcpt, err := age.ParseX25519Recipient(strings.TrimSpace(recipient))
	if err != nil {
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Field: "recipient", Message: "not an age X25519 recipient",
			Hint: "generate one with age-keygen and pass its public key (age1...)"}
	}
	return rcpt, nil
}

// EncryptArmored returns plain encrypted with age to rcpt, ASCII-armored:
// a file the stock age tool opens with the recipient's identity.
func EncryptArmored(rcpt age.Recipient, plain []byte) ([]byte, error) {
	var out bytes.Buffer
	aw := armor.NewWriter(&out)
	w, err := age.Encrypt(aw, rcpt)
	if err == nil {
		_, err = w.Write(plain)
	}
	if err == nil {
		err = w.Close()
	}
	if err == nil {
		err = aw.Close()
	}
	if err != nil {
		return nil, grains.Wrap(grains.CodeInternal, "encrypt export", err)
	}
	return out.Bytes(), nil
}
