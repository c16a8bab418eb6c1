package proofs

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// HistoryExportFormat is the format value of a version-chain audit export.
const HistoryExportFormat = "lethe.history-export/v1"

// The states of a version in a [HistoryExport].
const (
	VersionCurrent    = "current"    // the newest readable version of its chain
	VersionSuperseded = "superseded" // readable, replaced by a newer version
	VersionForgotten  = "forgotten"  // hard-deleted; a forget or purge event lists its hash
	VersionErased     = "erased"     // unreadable: its key was destroyed (crypto-erasure)
)

// HistoryExport is a version-chain audit export: every version of one or
// more chains of grains of one memory, each audit event of those chains
// with its inclusion proof, and the signed checkpoint every proof is
// against. It is the signed body of the file [SealHistoryExport] writes.
type HistoryExport struct {
	// Format is [HistoryExportFormat].
	Format string `json:"format"`
	// Memory is the memory the chains belong to.
	Memory string `json:"memory"`
	// ExportedAt is when the export was made (UTC, whole seconds).
	ExportedAt time.Time `json:"exported_at"`
	// Selector says how the chains were chosen: "hash" or "subject". The
	// subject itself is never written.
	Selector string `json:"selector"`
	// Hash is the grain hash asked for, with Selector "hash".
	Hash string `json:"hash,omitempty"`
	// FieldsWithheld is set when the export was made for a reader who may
	// not see grain content (an auditor): no version has Fields.
	FieldsWithheld bool `json:"fields_withheld,omitempty"`
	// Checkpoint is the signed checkpoint note every event proof is against.
	Checkpoint string `json:"checkpoint"`
	// Chains are the version chains, each oldest version first.
	Chains []HistoryChain `json:"chains"`
	// HashLists holds, for each bulk event of the chains (a leaf with
	// more than 256 grain hashes carries their count and [HashesDigest]
	// instead), the full sorted hash list, keyed by that digest: a
	// verifier recomputes the digest and finds the chain's versions in
	// the list. The other hashes of the list are grain hashes of the same
	// event, in other chains.
	HashLists map[string][]string `json:"hash_lists,omitempty"`
}

// HistoryChain is one version chain.
type HistoryChain struct {
	// Versions are the chain's versions in the order they were written.
	Versions []HistoryVersion `json:"versions"`
	// Events are the audit events of the chain in log order.
	Events []HistoryEvent `json:"events"`
}

// HistoryVersion is one version of a chain.
type HistoryVersion struct {
	// Hash is the grain hash (lowercase hex SHA-256 of the sealed blob).
	Hash string `json:"hash"`
	// State is one of VersionCurrent, VersionSuperseded, VersionForgotten
	// or VersionErased.
	State string `json:"state"`
	// Supersedes and SupersededBy are the chain links.
	Supersedes   string `json:"supersedes,omitempty"`
	SupersededBy string `json:"superseded_by,omitempty"`
	// SupersededAt and SupersededByActor say when, and by which token id
	// ("local" for the embedded library), the version was superseded: the
	// time and actor of the grain.supersede event.
	SupersededAt      *time.Time `json:"superseded_at,omitempty"`
	SupersededByActor string     `json:"superseded_by_actor,omitempty"`
	// Fields is the grain as lethe's API writes it (its JSON object), for a
	// readable version unless fields are withheld; absent for forgotten and
	// erased versions.
	Fields json.RawMessage `json:"fields,omitempty"`
	// ErasedBy are, for an erased version, the fingerprints of its
	// destroyed keys whose key.erase events the chain holds: the erasure
	// that made it unreadable. lethe links a version to its key while the
	// row exists and, once the cleaner deleted the row, through the link
	// the cleaner kept; the link itself is lethe's signed statement, the
	// log does not hold it.
	ErasedBy []string `json:"erased_by,omitempty"`
}

// HistoryEvent is one audit event of a chain and its proof.
type HistoryEvent struct {
	// Type is the leaf's event type, repeated for readers.
	Type EventType `json:"type"`
	// Proof is the event's proof against the export's checkpoint.
	Proof *Proof `json:"proof"`
}

// historyFile is the file: the signed export and its signature.
type historyFile struct {
	Format    string          `json:"format"`
	LogKey    string          `json:"log_key"`
	Signature []byte          `json:"signature"`
	Export    json.RawMessage `json:"export"`
}

// historyMessage is what the log key signs for an export body: a context
// string, a zero byte and the body's SHA-256. The zero byte keeps it from
// ever being a leaf (JSON) or a signed note body (text without control
// characters).
func historyMessage(body []byte) []byte {
	sum := sha256.Sum256(body)
	return append([]byte(HistoryExportFormat+"\x00"), sum[:]...)
}

// SealHistoryExport returns the export file of x: a JSON object
//
//	{"format":"lethe.history-export/v1","log_key":"<verifier key>",
//	 "signature":"<base64>","export":{...}}
//
// whose export member is x and whose signature is the log key's Ed25519
// signature over "lethe.history-export/v1", a zero byte and the SHA-256 of
// the export member's exact bytes. lethe encrypts the file to a recipient
// with age.
func SealHistoryExport(x *HistoryExport, s *Signer) ([]byte, error) {
	if x.Format != HistoryExportFormat {
		return nil, fmt.Errorf("seal history export: format %q", x.Format)
	}
	body, err := json.MarshalIndent(x, "  ", "  ")
	if err != nil {
		return nil, fmt.Errorf("seal history export: %w", err)
	}
	sig, err := s.ns.Sign(historyMessage(body))
	if err != nil {
		return nil, fmt.Errorf("seal history export: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"format\": %q,\n  \"log_key\": %q,\n  \"signature\": %q,\n  \"export\": %s\n}\n",
		HistoryExportFormat, s.VerifierKey(), base64.StdEncoding.EncodeToString(sig), body)
	return b.Bytes(), nil
}

// VerifiedHistory is what a successful [VerifyHistoryExport] established.
type VerifiedHistory struct {
	// Export is the verified export.
	Export *HistoryExport
	// Checkpoint is the export's checkpoint, opened with the log key.
	Checkpoint Checkpoint
	// Versions and Events count the versions and events of every chain.
	Versions, Events int
}

// VerifyHistoryExport checks an export file (as [SealHistoryExport] writes
// it, after age decryption) offline against the log key of opts, in this
// order, and returns the first failure as a [CheckError]:
//
//  1. options: the log key parses ([*OptionsError]);
//  2. format: the file and its export parse and name
//     [HistoryExportFormat] ([*FormatError]);
//  3. checkpoint_signature, checkpoint_origin: the export's checkpoint is
//     signed by the log key (as in [Verify]);
//  4. every event's proof verifies with [Verify] (leaf signature, inclusion
//     and the rest, with opts) and is against the export's checkpoint; its
//     error is wrapped in a [*HistoryEventError] naming the event;
//  5. chain: each chain is consistent ([*ChainError]): distinct, well-formed
//     hashes; the first version supersedes nothing; every other version
//     supersedes an earlier one and a grain.supersede event of the chain
//     records that link; every superseded_by names a later version that
//     supersedes this one, with the time and actor of that event; the
//     links and hash inside each version's fields agree; supersede events
//     follow the version order in the log and in time; every hash-listing
//     event names a version of the chain; forgotten versions are listed by
//     a forget or purge event; only readable versions have fields; every
//     fingerprint in an erased version's erased_by is named by a key.erase
//     event of the chain, and only erased versions have erased_by; a bulk
//     event's hashes are the hash_lists entry under its leaf's digest,
//     whose length is the leaf's count; every hash_lists entry is sorted,
//     well-formed, has the digest it is keyed by, and belongs to an event;
//  6. export_signature: the log key's signature over the export
//     ([*ExportSignatureError]). It comes last so that a tampered export
//     fails at the most specific check that sees it.
func VerifyHistoryExport(file []byte, opts VerifyOptions) (*VerifiedHistory, error) {
	v, err := NewVerifier(opts)
	if err != nil {
		return nil, err
	}
	var f historyFile
	if err := json.Unmarshal(file, &f); err != nil {
		return nil, &FormatError{Field: "document", Err: err}
	}
	if f.Format != HistoryExportFormat {
		return nil, &FormatError{Field: "format", Err: fmt.Errorf("%q is not %q", f.Format, HistoryExportFormat)}
	}
	var x HistoryExport
	if err := json.Unmarshal(f.Export, &x); err != nil {
		return nil, &FormatError{Field: "export", Err: err}
	}
	if x.Format != HistoryExportFormat {
		return nil, &FormatError{Field: "export.format", Err: fmt.Errorf("%q is not %q", x.Format, HistoryExportFormat)}
	}
	out := &VerifiedHistory{Export: &x}
	if out.Checkpoint, err = v.open(x.Checkpoint); err != nil {
		return nil, err
	}
	leaves := make([][]*Leaf, len(x.Chains))
	for i, c := range x.Chains {
		for j, e := range c.Events {
			if e.Proof == nil {
				return nil, &FormatError{Field: fmt.Sprintf("chains[%d].events[%d].proof", i, j), Err: errors.New("missing")}
			}
			if e.Proof.Checkpoint != x.Checkpoint {
				return nil, &HistoryEventError{Chain: i, Event: j, Err: &FormatError{Field: "checkpoint", Err: errors.New("not the export's checkpoint")}}
			}
			ok, err := v.Verify(e.Proof)
			if err != nil {
				return nil, &HistoryEventError{Chain: i, Event: j, Err: err}
			}
			if ok.Leaf.Type != e.Type {
				return nil, &HistoryEventError{Chain: i, Event: j, Err: &SummaryMismatchError{Field: "type", Proof: string(e.Type), Leaf: string(ok.Leaf.Type)}}
			}
			leaves[i] = append(leaves[i], ok.Leaf)
		}
		out.Events += len(c.Events)
		out.Versions += len(c.Versions)
	}
	if err := checkHashLists(&x, leaves); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i := range x.Chains {
		if err := checkChain(&x, i, leaves[i], seen); err != nil {
			return nil, err
		}
	}
	if !v.key.Verify(historyMessage(f.Export), f.Signature) {
		return nil, &ExportSignatureError{Key: v.key.id()}
	}
	return out, nil
}

// checkHashLists checks that every entry of x.HashLists is a sorted list
// of distinct well-formed hashes whose [HashesDigest] is its key, and that
// an event of the export carries that digest.
func checkHashLists(x *HistoryExport, leaves [][]*Leaf) error {
	used := map[string]bool{}
	for _, ls := range leaves {
		for _, l := range ls {
			if l.Digest != "" {
				used[l.Digest] = true
			}
		}
	}
	for d, hs := range x.HashLists {
		fail := func(format string, args ...any) error {
			return &ChainError{Chain: -1, Version: -1, Reason: "hash list " + d + ": " + fmt.Sprintf(format, args...)}
		}
		if !used[d] {
			return fail("no event of the export carries its digest")
		}
		for i, h := range hs {
			if !isHex(h, 64) {
				return fail("entry %d is not 64 lowercase hex digits", i)
			}
			if i > 0 && hs[i-1] >= h {
				return fail("not sorted, or an entry appears twice")
			}
		}
		if HashesDigest(hs) != d {
			return fail("its digest is %s", HashesDigest(hs))
		}
	}
	return nil
}

// chainFields are the fields of a version's grain that the chain checks
// compare.
type chainFields struct {
	Hash         string `json:"hash"`
	Supersedes   string `json:"supersedes"`
	SupersededBy string `json:"superseded_by"`
}

// checkChain checks chain i of x (step 5 of [VerifyHistoryExport]); leaves
// are its verified events' leaves, seen the hashes of earlier chains.
func checkChain(x *HistoryExport, i int, leaves []*Leaf, seen map[string]bool) error {
	c := x.Chains[i]
	fail := func(v int, format string, args ...any) error {
		e := &ChainError{Chain: i, Version: v, Reason: fmt.Sprintf(format, args...)}
		if v >= 0 && v < len(c.Versions) {
			e.Hash = c.Versions[v].Hash
		}
		return e
	}
	if len(c.Versions) == 0 {
		return fail(-1, "no versions")
	}
	pos := map[string]int{}
	for j, v := range c.Versions {
		if !isHex(v.Hash, 64) {
			return fail(j, "hash is not 64 lowercase hex digits")
		}
		if seen[v.Hash] {
			return fail(j, "hash appears twice")
		}
		seen[v.Hash] = true
		pos[v.Hash] = j
	}
	// The supersede events by link, and the listed hashes of the others.
	type link struct{ old, new string }
	created := map[link]*Leaf{}
	createdAt := map[link]int{} // event position
	listed := map[string][]EventType{}
	erasedBy := map[string]bool{} // fingerprints the key.erase events name
	for k, l := range leaves {
		if l.Memory != x.Memory {
			return fail(-1, "event %d belongs to memory %q", k, l.Memory)
		}
		if l.Type == EventGrainSupersede {
			if len(l.Hashes) != 2 {
				return fail(-1, "supersede event %d lists %d hashes", k, len(l.Hashes))
			}
			ln := link{l.Hashes[0], l.Hashes[1]}
			if _, ok := pos[ln.old]; !ok {
				return fail(-1, "supersede event %d names version %s, not in the chain", k, ln.old)
			}
			if _, ok := pos[ln.new]; !ok {
				return fail(-1, "supersede event %d names version %s, not in the chain", k, ln.new)
			}
			created[ln], createdAt[ln] = l, k
			continue
		}
		if l.Type == EventKeyErase {
			for _, f := range l.KeyFingerprints {
				erasedBy[f] = true
			}
		}
		hs := l.Hashes
		if l.Digest != "" {
			var ok bool
			if hs, ok = x.HashLists[l.Digest]; !ok {
				return fail(-1, "%s event %d carries digest %s, and the export has no hash list for it", l.Type, k, l.Digest)
			}
			if l.Count == nil || *l.Count != uint64(len(hs)) {
				return fail(-1, "%s event %d counts %d hashes, its hash list has %d", l.Type, k, l.GrainCount(), len(hs))
			}
		}
		if len(hs) > 0 && !slices.ContainsFunc(hs, func(h string) bool { _, ok := pos[h]; return ok }) {
			return fail(-1, "%s event %d names no version of the chain", l.Type, k)
		}
		for _, h := range hs {
			if _, ok := pos[h]; ok {
				listed[h] = append(listed[h], l.Type)
			}
		}
	}
	lastEvent := -1
	for j, v := range c.Versions {
		if j == 0 {
			if v.Supersedes != "" {
				return fail(j, "the first version supersedes %s", v.Supersedes)
			}
		} else {
			p, ok := pos[v.Supersedes]
			if !ok || p >= j {
				return fail(j, "supersedes %q, not an earlier version of the chain", v.Supersedes)
			}
			k, ok := createdAt[link{v.Supersedes, v.Hash}]
			if !ok {
				return fail(j, "no grain.supersede event records that it supersedes %s", v.Supersedes)
			}
			if k < lastEvent {
				return fail(j, "its supersede event comes before the previous version's in the log")
			}
			lastEvent = k
		}
		if v.SupersededBy != "" {
			n, ok := pos[v.SupersededBy]
			if !ok || n <= j || c.Versions[n].Supersedes != v.Hash {
				return fail(j, "superseded_by %s is not a later version that supersedes it", v.SupersededBy)
			}
			l := created[link{v.Hash, v.SupersededBy}]
			if l == nil {
				return fail(n, "no grain.supersede event records that it supersedes %s", v.Hash)
			}
			if v.SupersededAt == nil || !v.SupersededAt.Equal(l.Time) || v.SupersededByActor != l.Actor {
				return fail(j, "superseded_at and superseded_by_actor differ from the supersede event's time and actor")
			}
		} else if v.SupersededAt != nil || v.SupersededByActor != "" {
			return fail(j, "superseded_at without superseded_by")
		}
		if len(v.ErasedBy) > 0 && v.State != VersionErased {
			return fail(j, "a %s version has erased_by", v.State)
		}
		for _, f := range v.ErasedBy {
			if !erasedBy[f] {
				return fail(j, "erased by key %s, and no key.erase event of the chain names it", f)
			}
		}
		switch v.State {
		case VersionCurrent, VersionSuperseded:
			if (v.State == VersionCurrent) != (v.SupersededBy == "") {
				return fail(j, "state %s with superseded_by %q", v.State, v.SupersededBy)
			}
			if x.FieldsWithheld {
				if v.Fields != nil {
					return fail(j, "fields in an export that withholds them")
				}
				break
			}
			var f chainFields
			if err := json.Unmarshal(v.Fields, &f); err != nil {
				return fail(j, "fields: %v", err)
			}
			if f.Hash != v.Hash || f.Supersedes != v.Supersedes || f.SupersededBy != v.SupersededBy {
				return fail(j, "the hash or links in its fields differ from the version's")
			}
		case VersionForgotten, VersionErased:
			if v.Fields != nil {
				return fail(j, "a %s version has fields", v.State)
			}
			if v.State == VersionForgotten && !slices.ContainsFunc(listed[v.Hash], func(t EventType) bool {
				return t == EventGrainForget || t == EventGrainPurge
			}) {
				return fail(j, "forgotten, but no forget or purge event of the chain lists it")
			}
		default:
			return fail(j, "unknown state %q", v.State)
		}
	}
	// Supersede times follow the chain; nothing happened after the export.
	var last time.Time
	for j, v := range c.Versions {
		if j > 0 {
			t := created[link{v.Supersedes, v.Hash}].Time
			if t.Before(last) {
				return fail(j, "superseded at %s, before the previous link (%s)", t.Format(time.RFC3339), last.Format(time.RFC3339))
			}
			last = t
		}
	}
	for k, l := range leaves {
		if l.Time.After(x.ExportedAt) {
			return fail(-1, "event %d is later than the export", k)
		}
	}
	return nil
}

// ChainError reports a version chain of a history export that is not
// consistent: Chain and Version (-1 for the chain as a whole) locate it;
// Chain is -1 for a hash list of the export.
type ChainError struct {
	Chain, Version int
	Hash           string
	Reason         string
}

func (e *ChainError) Error() string {
	if e.Chain < 0 { // the export as a whole
		return fmt.Sprintf("%s: %s", e.Check(), e.Reason)
	}
	if e.Version < 0 {
		return fmt.Sprintf("%s: chain %d: %s", e.Check(), e.Chain, e.Reason)
	}
	return fmt.Sprintf("%s: chain %d version %d (%s): %s", e.Check(), e.Chain, e.Version, e.Hash, e.Reason)
}

// Check returns [CheckChain].
func (e *ChainError) Check() Check { return CheckChain }

// HistoryEventError reports an event of a history export whose proof does
// not verify; Err is the [CheckError] of [Verify].
type HistoryEventError struct {
	Chain, Event int
	Err          error
}

func (e *HistoryEventError) Error() string {
	return fmt.Sprintf("chain %d event %d: %v", e.Chain, e.Event, e.Err)
}
func (e *HistoryEventError) Unwrap() error { return e.Err }

// Check returns the check that failed for the event.
func (e *HistoryEventError) Check() Check { return FailedCheck(e.Err) }

// ExportSignatureError reports a history export whose body is not signed
// by the log key: it was changed after lethe made it, or comes from
// another log.
type ExportSignatureError struct {
	Key string // the verifier key's name+hash
}

func (e *ExportSignatureError) Error() string {
	return fmt.Sprintf("%s: the export is not signed by %s", e.Check(), e.Key)
}

// Check returns [CheckExportSignature].
func (e *ExportSignatureError) Check() Check { return CheckExportSignature }
