package proofs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// LeafVersion is the only leaf version this package reads and writes.
const LeafVersion = 1

// EventType names what an audited event did.
type EventType string

// The event types. A leaf with any other type is rejected.
const (
	EventGrainForget    EventType = "grain.forget"    // grains hard-deleted
	EventGrainSupersede EventType = "grain.supersede" // a grain replaced by a new version
	EventGrainArchive   EventType = "grain.archive"   // grains hidden from default recall
	EventGrainPurge     EventType = "grain.purge"     // grains removed by a decay policy
	EventKeyCreate      EventType = "key.create"      // a data key created
	EventKeyErase       EventType = "key.erase"       // a data key destroyed (crypto-erasure)
	EventHoldSet        EventType = "hold.set"        // a legal hold placed
	EventHoldRelease    EventType = "hold.release"    // a legal hold lifted
	EventErasureRefused EventType = "erasure.refused" // a destructive call refused
	EventPolicyRun      EventType = "policy.run"      // a forgetting policy ran
	EventSubjectExport  EventType = "subject.export"  // a user's grains disclosed in a subject access export
	EventKEKRotate      EventType = "kek.rotate"      // a new KEK version, live data keys rewrapped
	EventKEKTrim        EventType = "kek.trim"        // KEK versions below KEKMinVersion destroyed
	EventHistoryExport  EventType = "history.export"  // version chains disclosed in a version-chain audit export

	// The transitions of an erasure request (see Leaf.Request). Its
	// execution is the key.erase event naming the request; a refusal under
	// a legal hold (the request is then blocked) is the erasure.refused
	// event naming it.
	EventRequestCreate  EventType = "request.create"  // an erasure request filed, pending approval
	EventRequestApprove EventType = "request.approve" // an erasure request approved by a second DPO
	EventRequestReject  EventType = "request.reject"  // an erasure request rejected; its sealed subject destroyed
)

// EventTypes lists every known event type.
var EventTypes = []EventType{
	EventGrainForget, EventGrainSupersede, EventGrainArchive, EventGrainPurge,
	EventKeyCreate, EventKeyErase, EventHoldSet, EventHoldRelease,
	EventErasureRefused, EventPolicyRun, EventSubjectExport, EventKEKRotate, EventKEKTrim,
	EventHistoryExport,
	EventRequestCreate, EventRequestApprove, EventRequestReject,
}

// kekEvent reports whether t concerns the key-encryption key as a whole,
// not one memory: its leaf's memory is "".
func (t EventType) kekEvent() bool { return t == EventKEKRotate || t == EventKEKTrim }

// OfMemory reports whether t is a known type whose events belong to one
// memory (their leaf names it): every type but those of the key-encryption
// key as a whole, kek.rotate and kek.trim.
func (t EventType) OfMemory() bool { return t.Known() && !t.kekEvent() }

// Known reports whether t is one of [EventTypes].
func (t EventType) Known() bool { return slices.Contains(EventTypes, t) }

// leafTimeLayout is RFC 3339 in UTC at second precision.
const leafTimeLayout = "2006-01-02T15:04:05Z"

// Word patterns for the leaf's name fields. They admit identifiers, never
// free text: no spaces, no quotes, no backslashes, ASCII only.
var (
	// memoryPattern is grains' memory-name rule, repeated here so that this
	// package depends on the standard library only.
	memoryPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	idPattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`)
	reasonPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// Leaf is one audited event: the exact content of one Merkle tree leaf.
//
// Its encoding ([Leaf.Marshal]) is compact JSON with the fields in this
// order, optional fields omitted when empty (Count when nil):
//
//	{"v":1,"id":"<32 hex>","type":"<event type>","memory":"<memory>",
//	 "time":"<YYYY-MM-DDTHH:MM:SSZ>","actor":"<token id or local>",
//	 "hashes":["<64 hex>",...],"count":<n>,"digest":"<64 hex>",
//	 "key_fingerprints":["<64 hex>",...],"commitment":"<64 hex>",
//	 "policy":"<name>","hold":"<id>","reason":"<code>",
//	 "kek":"<kek name>","kek_version":<n>,"kek_min_version":<n>,
//	 "request":"<id>"}
//
// Hex is lowercase. Strings are identifiers matching fixed patterns, so
// they never need escaping and never hold free text.
type Leaf struct {
	// V is the leaf format version; it must be [LeafVersion].
	V int
	// ID is a random 16-byte event id in lowercase hex; see [NewEventID].
	ID string
	// Type is the event type.
	Type EventType
	// Memory is the memory name the event belongs to.
	Memory string
	// Time is when the event happened: UTC, whole seconds.
	Time time.Time
	// Actor is the id of the API token that caused the event, or "local".
	Actor string
	// Hashes lists the grain hashes concerned (lowercase hex SHA-256), in
	// any order. Bulk events omit it and carry Count and Digest instead.
	Hashes []string
	// Count is the number of grains concerned, when given. With Hashes it
	// must equal len(Hashes).
	Count *uint64
	// Digest is [HashesDigest] of the grain hashes of a bulk event. It
	// requires Count and excludes Hashes.
	Digest string
	// KeyFingerprints lists the fingerprints of the data keys concerned.
	KeyFingerprints []string
	// Commitment is the subject commitment of an erasure; see [Commitment].
	Commitment string
	// Policy is the name of the policy that caused the event.
	Policy string
	// Hold is the id of the legal hold concerned.
	Hold string
	// Reason is a reason code (a lowercase word such as "held"), never
	// free text.
	Reason string
	// KEK names the key-encryption key ("age-local",
	// "vault-transit:NAME") whose versions KEKVersion and KEKMinVersion
	// count.
	KEK string
	// KEKVersion is, for a key.erase event, the newest KEK version that
	// wrapped a key the erasure destroyed: once every version up to it is
	// trimmed, no copy of those keys (residue, WAL archive, replica,
	// backup) can be unwrapped. For a kek.rotate event it is the new
	// version.
	KEKVersion *uint64
	// KEKMinVersion is, for a kek.trim event, the oldest KEK version still
	// able to unwrap: every version below it is destroyed.
	KEKMinVersion *uint64
	// Request is the id of the erasure request an event belongs to: its
	// filing, approval, rejection, execution (key.erase) or refusal under
	// a hold (erasure.refused).
	Request string
}

// GrainCount returns Count when it is set, else len(Hashes). It is the
// count a proof document repeats at top level.
func (l *Leaf) GrainCount() uint64 {
	if l.Count != nil {
		return *l.Count
	}
	return uint64(len(l.Hashes))
}

// FirstKeyFingerprint returns the first key fingerprint, or "" when there is
// none. It is the key_fingerprint a proof document repeats at top level.
func (l *Leaf) FirstKeyFingerprint() string {
	if len(l.KeyFingerprints) == 0 {
		return ""
	}
	return l.KeyFingerprints[0]
}

// Timestamp returns the leaf's time in its encoded form.
func (l *Leaf) Timestamp() string { return l.Time.Format(leafTimeLayout) }

// Validate reports whether l can be encoded, and why not.
func (l *Leaf) Validate() error {
	if l.V != LeafVersion {
		return fmt.Errorf("leaf: version %d, want %d", l.V, LeafVersion)
	}
	if !isHex(l.ID, 32) {
		return errors.New("leaf: id must be 32 lowercase hex digits")
	}
	if !l.Type.Known() {
		return fmt.Errorf("leaf: unknown event type %q", l.Type)
	}
	if l.Type.kekEvent() {
		if l.Memory != "" {
			return errors.New("leaf: a KEK event names no memory")
		}
		if l.KEK == "" {
			return errors.New("leaf: a KEK event names its KEK")
		}
		if l.Type == EventKEKRotate && l.KEKVersion == nil {
			return errors.New("leaf: kek.rotate requires kek_version")
		}
		if l.Type == EventKEKTrim && l.KEKMinVersion == nil {
			return errors.New("leaf: kek.trim requires kek_min_version")
		}
	} else if !memoryPattern.MatchString(l.Memory) {
		return errors.New("leaf: memory must be a memory name")
	}
	if l.Time.Location() != time.UTC {
		return errors.New("leaf: time must be in UTC")
	}
	if l.Time.Nanosecond() != 0 {
		return errors.New("leaf: time must have whole seconds")
	}
	if y := l.Time.Year(); y < 1970 || y > 9999 {
		return fmt.Errorf("leaf: time year %d out of range", y)
	}
	if l.Actor != "local" && !idPattern.MatchString(l.Actor) {
		return errors.New("leaf: actor must be a token id or \"local\"")
	}
	for i, h := range l.Hashes {
		if !isHex(h, 64) {
			return fmt.Errorf("leaf: hash %d must be 64 lowercase hex digits", i)
		}
	}
	if l.Count != nil && len(l.Hashes) > 0 && *l.Count != uint64(len(l.Hashes)) {
		return fmt.Errorf("leaf: count %d but %d hashes", *l.Count, len(l.Hashes))
	}
	if l.Digest != "" {
		if !isHex(l.Digest, 64) {
			return errors.New("leaf: digest must be 64 lowercase hex digits")
		}
		if len(l.Hashes) > 0 {
			return errors.New("leaf: digest replaces hashes; give one or the other")
		}
		if l.Count == nil {
			return errors.New("leaf: digest requires count")
		}
	}
	for i, f := range l.KeyFingerprints {
		if !isHex(f, 64) {
			return fmt.Errorf("leaf: key fingerprint %d must be 64 lowercase hex digits", i)
		}
	}
	if l.Commitment != "" && !isHex(l.Commitment, 64) {
		return errors.New("leaf: commitment must be 64 lowercase hex digits")
	}
	if l.Policy != "" && !memoryPattern.MatchString(l.Policy) {
		return errors.New("leaf: policy must be a policy name")
	}
	if l.Hold != "" && !idPattern.MatchString(l.Hold) {
		return errors.New("leaf: hold must be a hold id")
	}
	if l.Reason != "" && !reasonPattern.MatchString(l.Reason) {
		return errors.New("leaf: reason must be a lowercase code word")
	}
	if l.KEK != "" && !idPattern.MatchString(l.KEK) {
		return errors.New("leaf: kek must be a KEK name")
	}
	if (l.KEKVersion != nil || l.KEKMinVersion != nil) && l.KEK == "" {
		return errors.New("leaf: KEK versions require kek")
	}
	if l.Request != "" && !isHex(l.Request, 32) {
		return errors.New("leaf: request must be 32 lowercase hex digits")
	}
	for _, v := range []*uint64{l.KEKVersion, l.KEKMinVersion} {
		if v != nil && (*v < 1 || *v > 1<<31) {
			return fmt.Errorf("leaf: KEK version %d out of range", *v)
		}
	}
	return nil
}

// Marshal validates l and returns its canonical encoding.
func (l *Leaf) Marshal() ([]byte, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	// Every string was validated against an ASCII pattern with no
	// characters that JSON escapes, so strings are written raw.
	b := make([]byte, 0, 256+70*len(l.Hashes)+70*len(l.KeyFingerprints))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(l.V), 10)
	b = appendField(b, "id", l.ID)
	b = appendField(b, "type", string(l.Type))
	b = appendField(b, "memory", l.Memory)
	b = appendField(b, "time", l.Timestamp())
	b = appendField(b, "actor", l.Actor)
	if len(l.Hashes) > 0 {
		b = appendListField(b, "hashes", l.Hashes)
	}
	if l.Count != nil {
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, *l.Count, 10)
	}
	if l.Digest != "" {
		b = appendField(b, "digest", l.Digest)
	}
	if len(l.KeyFingerprints) > 0 {
		b = appendListField(b, "key_fingerprints", l.KeyFingerprints)
	}
	for _, f := range [...]struct{ name, value string }{
		{"commitment", l.Commitment},
		{"policy", l.Policy},
		{"hold", l.Hold},
		{"reason", l.Reason},
	} {
		if f.value != "" {
			b = appendField(b, f.name, f.value)
		}
	}
	if l.KEK != "" {
		b = appendField(b, "kek", l.KEK)
	}
	if l.KEKVersion != nil {
		b = append(b, `,"kek_version":`...)
		b = strconv.AppendUint(b, *l.KEKVersion, 10)
	}
	if l.KEKMinVersion != nil {
		b = append(b, `,"kek_min_version":`...)
		b = strconv.AppendUint(b, *l.KEKMinVersion, 10)
	}
	if l.Request != "" {
		b = appendField(b, "request", l.Request)
	}
	return append(b, '}'), nil
}

func appendField(b []byte, name, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":"`...)
	b = append(b, value...)
	return append(b, '"')
}

func appendListField(b []byte, name string, values []string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":[`...)
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, v...)
		b = append(b, '"')
	}
	return append(b, ']')
}

// ParseLeaf parses a leaf. It accepts only canonical input: b must equal the
// re-encoding of the parsed leaf byte for byte, so unknown or repeated
// fields, another field order, white space, escapes and empty optional
// fields are all rejected.
func ParseLeaf(b []byte) (*Leaf, error) {
	l, err := scanLeaf(b)
	if err != nil {
		return nil, fmt.Errorf("leaf: %w", err)
	}
	again, err := l.Marshal()
	if err != nil {
		return nil, err
	}
	if string(again) != string(b) {
		return nil, errors.New("leaf: not in canonical form")
	}
	return l, nil
}

// scanLeaf reads the fields of a leaf from compact JSON without escapes,
// the only JSON a canonical leaf can be. It checks syntax, not order or
// values: ParseLeaf re-encodes the result and compares.
func scanLeaf(b []byte) (*Leaf, error) {
	var (
		l   Leaf
		s   = leafScanner{b: b}
		err error
	)
	if err = s.expect('{'); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		if s.next() == '}' {
			break
		}
		if i > 0 {
			if err = s.expect(','); err != nil {
				return nil, err
			}
		}
		name, err := s.str()
		if err != nil {
			return nil, err
		}
		if err = s.expect(':'); err != nil {
			return nil, err
		}
		switch name {
		case "v":
			var v uint64
			if v, err = s.uint(); err == nil && v > 1<<31 {
				err = fmt.Errorf("version %d out of range", v)
			}
			l.V = int(v)
		case "id":
			l.ID, err = s.str()
		case "type":
			var t string
			t, err = s.str()
			l.Type = EventType(t)
		case "memory":
			l.Memory, err = s.str()
		case "time":
			var t string
			if t, err = s.str(); err == nil {
				l.Time, err = time.Parse(leafTimeLayout, t)
			}
		case "actor":
			l.Actor, err = s.str()
		case "hashes":
			l.Hashes, err = s.strList()
		case "count":
			var n uint64
			n, err = s.uint()
			l.Count = &n
		case "digest":
			l.Digest, err = s.str()
		case "key_fingerprints":
			l.KeyFingerprints, err = s.strList()
		case "commitment":
			l.Commitment, err = s.str()
		case "policy":
			l.Policy, err = s.str()
		case "hold":
			l.Hold, err = s.str()
		case "reason":
			l.Reason, err = s.str()
		case "kek":
			l.KEK, err = s.str()
		case "kek_version":
			var n uint64
			n, err = s.uint()
			l.KEKVersion = &n
		case "kek_min_version":
			var n uint64
			n, err = s.uint()
			l.KEKMinVersion = &n
		case "request":
			l.Request, err = s.str()
		default:
			return nil, fmt.Errorf("unknown field %q", name)
		}
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
	}
	if err = s.expect('}'); err != nil {
		return nil, err
	}
	if s.i != len(b) {
		return nil, fmt.Errorf("data after the object at byte %d", s.i)
	}
	return &l, nil
}

// leafScanner reads compact, escape-free JSON.
type leafScanner struct {
	b []byte
	i int
}

// next returns the next byte without consuming it, or 0 at the end.
func (s *leafScanner) next() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *leafScanner) expect(c byte) error {
	if s.next() != c {
		return fmt.Errorf("want %q at byte %d", c, s.i)
	}
	s.i++
	return nil
}

// str reads a string of printable ASCII other than '"' and '\\'.
func (s *leafScanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return string(s.b[start : s.i-1]), nil
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return "", fmt.Errorf("byte %d: escapes, control and non-ASCII characters are not allowed", s.i)
		}
	}
	return "", errors.New("unterminated string")
}

// strList reads a non-empty array of strings.
func (s *leafScanner) strList() ([]string, error) {
	if err := s.expect('['); err != nil {
		return nil, err
	}
	var list []string
	for {
		v, err := s.str()
		if err != nil {
			return nil, err
		}
		list = append(list, v)
		if s.next() != ',' {
			break
		}
		s.i++
	}
	return list, s.expect(']')
}

// uint reads an unsigned decimal with no leading zeros.
func (s *leafScanner) uint() (uint64, error) {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return parseDecimal(string(s.b[start:s.i]))
}

// HashesDigest returns the digest of a bulk event's grain hashes: the
// lowercase hex SHA-256 of the hashes sorted bytewise, each followed by
// "\n". The list of no hashes has the digest of the empty string.
func HashesDigest(hashes []string) string {
	sorted := slices.Clone(hashes)
	slices.Sort(sorted)
	h := sha256.New()
	for _, s := range sorted {
		h.Write([]byte(s))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// NonceSize is the size of a subject-commitment nonce in bytes.
const NonceSize = 32

// commitmentLabel prefixes every subject commitment.
const commitmentLabel = "lethe/subject/v1"

// Commitment returns the subject commitment for an erasure: the lowercase
// hex SHA-256 of "lethe/subject/v1" || nonce || subject, where subject is a
// user id or a scope path. It panics if nonce is not [NonceSize] bytes, as
// a wrong nonce size is a programming error.
func Commitment(nonce []byte, subject string) string {
	if len(nonce) != NonceSize {
		panic("proofs: commitment nonce must be " + strconv.Itoa(NonceSize) + " bytes")
	}
	h := sha256.New()
	h.Write([]byte(commitmentLabel))
	h.Write(nonce)
	h.Write([]byte(subject))
	return hex.EncodeToString(h.Sum(nil))
}

// NewNonce returns [NonceSize] random bytes for [Commitment].
func NewNonce() []byte {
	n := make([]byte, NonceSize)
	rand.Read(n) // never fails; see crypto/rand.Read
	return n
}

// NewEventID returns a random 16-byte event id in lowercase hex.
func NewEventID() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails; see crypto/rand.Read
	return hex.EncodeToString(b)
}

// isHex reports whether s is exactly n lowercase hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
