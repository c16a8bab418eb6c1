package proofs

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ProofFormat is the format value of a version 1 proof document.
const ProofFormat = "lethe.proof/v1"

// Bounds on proof sizes. An inclusion proof in a tree of at most 2^64
// leaves has at most 64 hashes, a consistency proof at most 2*64.
const (
	maxInclusion   = 64
	maxConsistency = 128
)

// Proof is an offline-verifiable proof that an event is in the audit log.
//
// Its JSON encoding ([Proof.Marshal]) has the fields in this order, the
// consistency fields only when set:
//
//	{"format":"lethe.proof/v1","count":N,"key_fingerprint":"<hex or empty>",
//	 "timestamp":"<leaf time>","event_id":"<leaf id>","leaf":"<base64>",
//	 "leaf_signature":"<base64>","leaf_index":N,"tree_size":N,
//	 "inclusion":["<base64 hash>",...],"checkpoint":"<signed note text>",
//	 "consistency_from":N,"consistency":["<base64 hash>",...]}
//
// Count, KeyFingerprint, Timestamp and EventID repeat the leaf's values for
// readers that do not decode the leaf; [Verify] checks that they agree.
type Proof struct {
	// Format is [ProofFormat].
	Format string
	// Count is the leaf's [Leaf.GrainCount].
	Count uint64
	// KeyFingerprint is the leaf's [Leaf.FirstKeyFingerprint].
	KeyFingerprint string
	// Timestamp is the leaf's time, as encoded in the leaf.
	Timestamp string
	// EventID is the leaf's id.
	EventID string
	// Leaf is the exact leaf bytes.
	Leaf []byte
	// LeafSignature is the log key's Ed25519 signature over Leaf.
	LeafSignature []byte
	// LeafIndex is the leaf's zero-based position in the log.
	LeafIndex uint64
	// TreeSize is the size of the tree the inclusion proof is for; it
	// equals the checkpoint's size.
	TreeSize uint64
	// Inclusion is the RFC 6962 inclusion proof of the leaf at LeafIndex in
	// the tree of TreeSize leaves, from the leaf's sibling upwards.
	Inclusion [][]byte
	// Checkpoint is the signed checkpoint note for TreeSize.
	Checkpoint string
	// ConsistencyFrom is the older tree size Consistency starts at.
	ConsistencyFrom uint64
	// Consistency is an RFC 6962 consistency proof from ConsistencyFrom to
	// TreeSize, or nil.
	Consistency [][]byte
}

// NewProof assembles a proof from the log's parts. It parses the leaf to
// fill the summary fields and checks the parts' shapes; it verifies nothing
// cryptographically (use [Verify]).
func NewProof(leaf []byte, leafSig []byte, index, size uint64, inclusion [][]byte, checkpointNote []byte) (*Proof, error) {
	l, err := ParseLeaf(leaf)
	if err != nil {
		return nil, fmt.Errorf("new proof: %w", err)
	}
	p := &Proof{
		Format:         ProofFormat,
		Count:          l.GrainCount(),
		KeyFingerprint: l.FirstKeyFingerprint(),
		Timestamp:      l.Timestamp(),
		EventID:        l.ID,
		Leaf:           bytes.Clone(leaf),
		LeafSignature:  bytes.Clone(leafSig),
		LeafIndex:      index,
		TreeSize:       size,
		Inclusion:      make([][]byte, len(inclusion)),
		Checkpoint:     string(checkpointNote),
	}
	for i, h := range inclusion {
		p.Inclusion[i] = bytes.Clone(h)
	}
	if err := p.validateShape(); err != nil {
		return nil, fmt.Errorf("new proof: %w", err)
	}
	return p, nil
}

// SetConsistency attaches a consistency proof from tree size from to the
// proof's TreeSize.
func (p *Proof) SetConsistency(from uint64, hashes [][]byte) {
	p.ConsistencyFrom = from
	p.Consistency = make([][]byte, len(hashes))
	for i, h := range hashes {
		p.Consistency[i] = bytes.Clone(h)
	}
}

// validateShape checks what the encodings need: 32-byte hashes and bounded
// hash lists. It returns a [*FormatError]. Everything else, an empty leaf
// or checkpoint or an index outside the tree included, is left to [Verify],
// which names the check that fails.
func (p *Proof) validateShape() error {
	for _, l := range []struct {
		field  string
		hashes [][]byte
		max    int
	}{{"inclusion", p.Inclusion, maxInclusion}, {"consistency", p.Consistency, maxConsistency}} {
		if err := checkHashes(l.hashes, l.max); err != nil {
			return &FormatError{Field: l.field, Err: err}
		}
	}
	return nil
}

// checkHashes checks that list has at most max hashes of 32 bytes.
func checkHashes(list [][]byte, max int) error {
	if len(list) > max {
		return fmt.Errorf("%d hashes, at most %d allowed", len(list), max)
	}
	for i, h := range list {
		if len(h) != 32 {
			return fmt.Errorf("hash %d is %d bytes, want 32", i, len(h))
		}
	}
	return nil
}

// hasConsistency reports whether the consistency fields are set.
func (p *Proof) hasConsistency() bool { return p.ConsistencyFrom != 0 || len(p.Consistency) > 0 }

// Marshal returns the canonical JSON encoding: compact, fields in the
// documented order, strings escaped minimally (see [ParseProof]).
func (p *Proof) Marshal() ([]byte, error) {
	return p.appendJSON(nil, true)
}

// appendJSON writes the document; withLog selects the fields that the
// tlog-proof text form carries outside its extra data (leaf_index,
// inclusion, checkpoint) and tree_size, which it takes from the checkpoint.
func (p *Proof) appendJSON(b []byte, withLog bool) ([]byte, error) {
	if err := p.validateShape(); err != nil {
		return nil, err
	}
	var err error
	b = append(b, `{"format":`...)
	if b, err = appendJSONString(b, p.Format); err != nil {
		return nil, &FormatError{Field: "format", Err: err}
	}
	b = append(b, `,"count":`...)
	b = strconv.AppendUint(b, p.Count, 10)
	b = append(b, `,"key_fingerprint":`...)
	if b, err = appendJSONString(b, p.KeyFingerprint); err != nil {
		return nil, &FormatError{Field: "key_fingerprint", Err: err}
	}
	b = append(b, `,"timestamp":`...)
	if b, err = appendJSONString(b, p.Timestamp); err != nil {
		return nil, &FormatError{Field: "timestamp", Err: err}
	}
	b = append(b, `,"event_id":`...)
	if b, err = appendJSONString(b, p.EventID); err != nil {
		return nil, &FormatError{Field: "event_id", Err: err}
	}
	b = append(b, `,"leaf":`...)
	b = appendBase64(b, p.Leaf)
	b = append(b, `,"leaf_signature":`...)
	b = appendBase64(b, p.LeafSignature)
	if withLog {
		b = append(b, `,"leaf_index":`...)
		b = strconv.AppendUint(b, p.LeafIndex, 10)
		b = append(b, `,"tree_size":`...)
		b = strconv.AppendUint(b, p.TreeSize, 10)
		b = append(b, `,"inclusion":`...)
		b = appendBase64List(b, p.Inclusion)
		b = append(b, `,"checkpoint":`...)
		if b, err = appendJSONString(b, p.Checkpoint); err != nil {
			return nil, &FormatError{Field: "checkpoint", Err: err}
		}
	}
	if p.hasConsistency() {
		b = append(b, `,"consistency_from":`...)
		b = strconv.AppendUint(b, p.ConsistencyFrom, 10)
		b = append(b, `,"consistency":`...)
		b = appendBase64List(b, p.Consistency)
	}
	return append(b, '}'), nil
}

// proofFields returns the decoders for a proof document's fields; withLog
// as for appendJSON.
func (p *Proof) proofFields(withLog bool) (map[string]fieldDecoder, []string) {
	fields := map[string]fieldDecoder{
		"format":           stringField(&p.Format),
		"count":            uintField(&p.Count),
		"key_fingerprint":  stringField(&p.KeyFingerprint),
		"timestamp":        stringField(&p.Timestamp),
		"event_id":         stringField(&p.EventID),
		"leaf":             bytesField(&p.Leaf),
		"leaf_signature":   bytesField(&p.LeafSignature),
		"consistency_from": uintField(&p.ConsistencyFrom),
		"consistency":      hashListField(&p.Consistency, maxConsistency),
	}
	required := []string{"format", "count", "key_fingerprint", "timestamp", "event_id", "leaf", "leaf_signature"}
	if withLog {
		fields["leaf_index"] = uintField(&p.LeafIndex)
		fields["tree_size"] = uintField(&p.TreeSize)
		fields["inclusion"] = hashListField(&p.Inclusion, maxInclusion)
		fields["checkpoint"] = stringField(&p.Checkpoint)
		required = append(required, "leaf_index", "tree_size", "inclusion", "checkpoint")
	}
	return fields, required
}

// ParseProof parses a JSON proof document. It rejects unknown, repeated,
// missing and null fields, numbers that are not plain unsigned decimals,
// non-canonical base64, hashes that are not 32 bytes, and trailing data;
// it accepts any JSON white space, field order and string escaping, so a
// document that went through a JSON pretty-printer still parses. For the
// canonical encoding, Marshal of the result gives the input back.
//
// A format value other than [ProofFormat] is not rejected here; [Verify]
// reports it. All errors are [*FormatError].
func ParseProof(b []byte) (*Proof, error) {
	var p Proof
	fields, required := p.proofFields(true)
	if err := decodeObject(b, fields, required); err != nil {
		return nil, &FormatError{Field: "document", Err: err}
	}
	if err := p.validateShape(); err != nil {
		return nil, err
	}
	return &p, nil
}

// MarshalJSON implements json.Marshaler with [Proof.Marshal], so a Proof
// embedded in a larger JSON response keeps its documented form.
func (p *Proof) MarshalJSON() ([]byte, error) { return p.Marshal() }

// UnmarshalJSON implements json.Unmarshaler with [ParseProof].
func (p *Proof) UnmarshalJSON(b []byte) error {
	q, err := ParseProof(b)
	if err != nil {
		return err
	}
	*p = *q
	return nil
}

// tlogProofHeader is the first line of a c2sp.org/tlog-proof file.
const tlogProofHeader = "c2sp.org/tlog-proof@v1"

// MarshalTlogProof returns the proof as a [c2sp.org/tlog-proof@v1] text
// file:
//
//	c2sp.org/tlog-proof@v1
//	extra <base64 of the extra JSON>
//	index <leaf_index>
//	<base64 inclusion hash>
//	...
//	<empty line>
//	<checkpoint note, verbatim>
//
// The extra JSON is the canonical proof document without leaf_index,
// tree_size, inclusion and checkpoint, which the text form carries itself
// (tree_size is the checkpoint's size). The proof's TreeSize must therefore
// equal the size in its checkpoint body.
//
// [c2sp.org/tlog-proof@v1]: https://c2sp.org/tlog-proof
func (p *Proof) MarshalTlogProof() ([]byte, error) {
	cpSize, err := checkpointSize(p.Checkpoint)
	if err != nil {
		return nil, &FormatError{Field: "checkpoint", Err: err}
	}
	if cpSize != p.TreeSize {
		return nil, &FormatError{Field: "tree_size", Err: fmt.Errorf("tree size %d differs from the checkpoint's %d; the text form cannot carry both", p.TreeSize, cpSize)}
	}
	extra, err := p.appendJSON(nil, false)
	if err != nil {
		return nil, err
	}
	var b []byte
	b = append(b, tlogProofHeader+"\nextra "...)
	b = appendBase64Raw(b, extra)
	b = append(b, "\nindex "...)
	b = strconv.AppendUint(b, p.LeafIndex, 10)
	b = append(b, '\n')
	for _, h := range p.Inclusion {
		b = appendBase64Raw(b, h)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, p.Checkpoint...), nil
}

// ParseTlogProof parses a proof written by [Proof.MarshalTlogProof]. It is
// strict: the extra data is required and must be the canonical extra JSON,
// every number and hash must be canonical, and the checkpoint body must
// parse (its signature is checked by [Verify]). Marshalling the result
// gives the input back. All errors are [*FormatError].
func ParseTlogProof(b []byte) (*Proof, error) {
	fail := func(err error) (*Proof, error) { return nil, &FormatError{Field: "tlog-proof", Err: err} }
	rest := string(b)
	line := func() (string, bool) {
		l, r, ok := strings.Cut(rest, "\n")
		rest = r
		return l, ok
	}
	if l, ok := line(); !ok || l != tlogProofHeader {
		return fail(fmt.Errorf("first line must be %q", tlogProofHeader))
	}
	l, ok := line()
	extraB64, isExtra := strings.CutPrefix(l, "extra ")
	if !ok || !isExtra {
		return fail(errors.New("second line must be the extra data; lethe proofs carry their leaf there"))
	}
	extra, err := decodeBase64(extraB64)
	if err != nil {
		return fail(fmt.Errorf("extra: %w", err))
	}
	l, ok = line()
	idx, isIndex := strings.CutPrefix(l, "index ")
	if !ok || !isIndex {
		return fail(errors.New("third line must be the index"))
	}
	var p Proof
	if p.LeafIndex, err = parseDecimal(idx); err != nil {
		return fail(fmt.Errorf("index: %w", err))
	}
	p.Inclusion = [][]byte{}
	for {
		l, ok := line()
		if !ok {
			return fail(errors.New("no empty line before the checkpoint"))
		}
		if l == "" {
			break
		}
		if len(p.Inclusion) == maxInclusion {
			return fail(fmt.Errorf("more than %d inclusion hashes", maxInclusion))
		}
		h, err := decodeHash(l)
		if err != nil {
			return fail(fmt.Errorf("inclusion hash %d: %w", len(p.Inclusion), err))
		}
		p.Inclusion = append(p.Inclusion, h)
	}
	p.Checkpoint = rest
	if p.TreeSize, err = checkpointSize(p.Checkpoint); err != nil {
		return nil, &FormatError{Field: "checkpoint", Err: err}
	}
	fields, required := p.proofFields(false)
	if err := decodeObject(extra, fields, required); err != nil {
		return fail(fmt.Errorf("extra: %w", err))
	}
	if err := p.validateShape(); err != nil {
		return nil, err
	}
	again, err := p.appendJSON(nil, false)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, extra) {
		return fail(errors.New("extra: not in canonical form"))
	}
	return &p, nil
}

// ParseAnyProof parses a proof in either encoding: a tlog-proof text file
// when b starts with its header line, else a JSON document.
func ParseAnyProof(b []byte) (*Proof, error) {
	if bytes.HasPrefix(b, []byte(tlogProofHeader+"\n")) {
		return ParseTlogProof(b)
	}
	return ParseProof(b)
}

// checkpointSize returns the size in a checkpoint note's body, without
// checking its signature.
func checkpointSize(noteText string) (uint64, error) {
	i := strings.LastIndex(noteText, "\n\n")
	if i < 0 {
		return 0, errors.New("not a signed note")
	}
	c, err := ParseCheckpoint([]byte(noteText[:i+1]))
	if err != nil {
		return 0, err
	}
	return c.Size, nil
}

// ConsistencyProof is an RFC 6962 consistency proof between two tree sizes,
// as given to "lethe verify --consistency". Its JSON form is
//
//	{"from":N,"to":M,"consistency":["<base64 hash>",...]}
type ConsistencyProof struct {
	From, To uint64
	Hashes   [][]byte
}

// Marshal returns the canonical JSON form.
func (c *ConsistencyProof) Marshal() ([]byte, error) {
	if c.From > c.To {
		return nil, fmt.Errorf("consistency proof: from %d is above to %d", c.From, c.To)
	}
	if err := checkHashes(c.Hashes, maxConsistency); err != nil {
		return nil, fmt.Errorf("consistency proof: %w", err)
	}
	b := []byte(`{"from":`)
	b = strconv.AppendUint(b, c.From, 10)
	b = append(b, `,"to":`...)
	b = strconv.AppendUint(b, c.To, 10)
	b = append(b, `,"consistency":`...)
	b = appendBase64List(b, c.Hashes)
	return append(b, '}'), nil
}

// ParseConsistencyProof parses the JSON form of a consistency proof, with
// the same strictness as [ParseProof].
func ParseConsistencyProof(b []byte) (*ConsistencyProof, error) {
	var c ConsistencyProof
	fields := map[string]fieldDecoder{
		"from":        uintField(&c.From),
		"to":          uintField(&c.To),
		"consistency": hashListField(&c.Hashes, maxConsistency),
	}
	if err := decodeObject(b, fields, []string{"from", "to", "consistency"}); err != nil {
		return nil, &FormatError{Field: "consistency proof", Err: err}
	}
	if c.From > c.To {
		return nil, &FormatError{Field: "consistency proof", Err: fmt.Errorf("from %d is above to %d", c.From, c.To)}
	}
	return &c, nil
}
