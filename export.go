package lethe

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/lethe-io/lethe/internal/audit"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/history"
	"github.com/lethe-io/lethe/proofs"
)

// ExportFormat names the subject access export document.
const ExportFormat = "lethe.export/v1"

// Export is the document ExportUser encrypts: every grain held about one
// user in one memory, every version and archived grains included.
type Export struct {
	Format     string    `json:"format"`
	Memory     string    `json:"memory"`
	UserID     string    `json:"user_id"`
	ExportedAt time.Time `json:"exported_at"`
	Count      int       `json:"count"`
	Grains     []Grain   `json:"grains"`
}

// SubjectExport is what ExportUser returns: the export, and the audit
// event that records the disclosure.
type SubjectExport struct {
	// Data is the ASCII-armored age file.
	Data []byte
	// EventID names the subject.export audit event; "lethe audit proof
	// --event ID" fetches its proof.
	EventID string
	// SubjectNonce (hex) opens the event's subject commitment to the user
	// id, for the caller alone: it is stored nowhere.
	SubjectNonce string
}

// ExportUser returns, ASCII-armored and age-encrypted to recipient (an age
// X25519 recipient, "age1..."), the JSON Export of everything memory holds
// about userID: a subject access export that opens with the stock age tool
// and the requester's identity. lethe keeps no copy.
//
// A disclosure is audited: before the export is returned, a subject.export
// event commits, carrying a commitment to the user id (its nonce is
// returned in SubjectNonce), the count and hashes (or digest) of the
// grains disclosed, and the recipient's fingerprint
// (RecipientFingerprint), never the user id or the recipient itself. If
// the event cannot be committed, no export is returned.
func (db *DB) ExportUser(ctx context.Context, memory, userID, recipient string) (*SubjectExport, error) {
	var err error
	if memory, err = memoryName(memory); err != nil {
		return nil, err
	}
	if strings.TrimSpace(userID) == "" {
		return nil, &grains.Error{Code: grains.CodeEmptySelector, Field: "user_id", Message: "name the user to export"}
	}
	if err := grains.ValidateUserID(userID); err != nil {
		return nil, err
	}
	userID = grains.NormalizeText(userID)
	rcpt, err := history.ParseRecipient(recipient)
	if err != nil {
		return nil, err
	}
	doc := Export{Format: ExportFormat, Memory: memory, UserID: userID, ExportedAt: db.now().UTC().Truncate(time.Second), Grains: []Grain{}}
	q := Query{Memory: memory, UserID: userID, IncludeSuperseded: true, IncludeArchived: true, Disclosure: true, Limit: grains.MaxLimit}
	for {
		page, err := db.Recall(ctx, q)
		if err != nil {
			return nil, err
		}
		doc.Grains = append(doc.Grains, page.Grains...)
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	doc.Count = len(doc.Grains)
	plain, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, grains.Wrap(grains.CodeInternal, "encode export", err)
	}
	out, err := history.EncryptArmored(rcpt, plain)
	if err != nil {
		return nil, err
	}
	hashes := make([]string, len(doc.Grains))
	for i := range doc.Grains {
		hashes[i] = doc.Grains[i].Hash
	}
	slices.Sort(hashes)
	nonce := proofs.NewNonce()
	ev, err := db.journal.Event(ctx, proofs.EventSubjectExport, memory, func(l *proofs.Leaf) {
		n := uint64(len(hashes))
		l.Count = &n
		audit.SetHashes(l, hashes)
		l.Commitment = proofs.Commitment(nonce, userID)
		l.KeyFingerprints = []string{RecipientFingerprint(rcpt.String())}
	})
	if err != nil {
		return nil, err
	}
	if err := db.journal.Append(ctx, ev); err != nil {
		return nil, err
	}
	return &SubjectExport{Data: out, EventID: ev.ID, SubjectNonce: hex.EncodeToString(nonce)}, nil
}

// RecipientFingerprint is how a subject.export event names the recipient an
// export was encrypted to: lowercase hex SHA-256 of "lethe/recipient/v1",
// a zero byte and the recipient string ("age1..."). Whoever holds the
// recipient can check it; the leaf does not reveal it.
func RecipientFingerprint(recipient string) string { return history.RecipientFingerprint(recipient) }
