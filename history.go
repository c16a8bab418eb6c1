package lethe

import (
	"context"

	"github.com/lethe-io/lethe/internal/history"
)

// HistoryRequest asks for a version-chain audit export: Memory, exactly
// one of Hash (the chain of that grain, found in the store or, once
// forgotten, in the audit log) or Subject (every chain with a version
// whose subject is Subject, exactly as recall matches it), the age X25519
// Recipient ("age1...") to encrypt it to, and WithholdFields, which leaves
// every version's fields out: for a reader who may see the chain's shape
// and proofs but no grain content (an auditor).
type HistoryRequest = history.Request

// HistoryExport is what ExportHistory returns: Data (the ASCII-armored age
// file of the signed proofs.HistoryExportFormat document, see
// proofs.SealHistoryExport), EventID (the history.export audit event),
// SubjectNonce (hex; opens the event's commitment to Subject, for the
// caller alone; empty for a request by hash), and Chains, Versions and
// Events, the counts of what the export holds.
type HistoryExport = history.Export

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
	var err error
	if req.Memory, err = memoryName(req.Memory); err != nil {
		return nil, err
	}
	return db.history.Export(ctx, req)
}
