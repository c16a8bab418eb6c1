package lethe

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/lethe-io/lethe/internal/grains"
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

// ExportUser returns, ASCII-armored and age-encrypted to recipient (an age
// X25519 recipient, "age1..."), the JSON Export of everything memory holds
// about userID: a subject access export that opens with the stock age tool
// and the requester's identity. lethe keeps no copy.
func (db *DB) ExportUser(ctx context.Context, memory, userID, recipient string) ([]byte, error) {
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
	rcpt, err := age.ParseX25519Recipient(strings.TrimSpace(recipient))
	if err != nil {
		return nil, &grains.Error{Code: grains.CodeInvalidArgument, Field: "recipient", Message: "not an age X25519 recipient",
			Hint: "generate one with age-keygen and pass its public key (age1...)"}
	}
	doc := Export{Format: ExportFormat, Memory: memory, UserID: userID, ExportedAt: db.now().UTC().Truncate(time.Second), Grains: []Grain{}}
	q := Query{Memory: memory, UserID: userID, IncludeSuperseded: true, IncludeArchived: true, Limit: grains.MaxLimit}
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
