package proofs

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// Checkpoint is a signed statement's content: the log's origin, its size
// and its RFC 6962 root hash, as in [c2sp.org/tlog-checkpoint].
//
// [c2sp.org/tlog-checkpoint]: https://c2sp.org/tlog-checkpoint
type Checkpoint struct {
	// Origin identifies the log, such as "lethe.example.com/audit".
	Origin string
	// Size is the number of leaves in the tree.
	Size uint64
	// Hash is the root hash of the tree of Size leaves.
	Hash [32]byte
}

// maxOriginBytes bounds an origin line.
const maxOriginBytes = 256

// validOrigin reports whether origin can be a checkpoint's first line: not
// empty, valid UTF-8, no Unicode spaces or control characters, and not
// starting with "—" (which would read as a note signature line).
func validOrigin(origin string) error {
	switch {
	case origin == "":
		return errors.New("origin is empty")
	case len(origin) > maxOriginBytes:
		return fmt.Errorf("origin is longer than %d bytes", maxOriginBytes)
	case !utf8.ValidString(origin):
		return errors.New("origin is not valid UTF-8")
	case strings.IndexFunc(origin, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return errors.New("origin contains white space or control characters")
	case strings.HasPrefix(origin, "—"):
		return errors.New("origin starts with an em dash")
	}
	return nil
}

// Marshal returns the checkpoint body: "<origin>\n<size>\n<base64 hash>\n".
// It writes no extension lines.
func (c Checkpoint) Marshal() ([]byte, error) {
	if err := validOrigin(c.Origin); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	b := make([]byte, 0, len(c.Origin)+70)
	b = append(b, c.Origin...)
	b = append(b, '\n')
	b = strconv.AppendUint(b, c.Size, 10)
	b = append(b, '\n')
	b = base64.StdEncoding.AppendEncode(b, c.Hash[:])
	return append(b, '\n'), nil
}

// ParseCheckpoint parses a checkpoint body. It is strict: exactly three
// lines, each ending in "\n", a size in decimal with no leading zeros, and a
// canonical base64 32-byte hash. Extension lines, which tlog-checkpoint
// allows but does not recommend, are rejected: lethe never writes them, and
// refusing them keeps every accepted body equal to its re-encoding.
func ParseCheckpoint(body []byte) (Checkpoint, error) {
	var c Checkpoint
	lines := strings.SplitAfter(string(body), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return c, errors.New("checkpoint: body must be exactly three lines ending in newlines")
	}
	origin := strings.TrimSuffix(lines[0], "\n")
	if err := validOrigin(origin); err != nil {
		return c, fmt.Errorf("checkpoint: %w", err)
	}
	size, err := parseDecimal(strings.TrimSuffix(lines[1], "\n"))
	if err != nil {
		return c, fmt.Errorf("checkpoint: size: %w", err)
	}
	hash, err := decodeHash(strings.TrimSuffix(lines[2], "\n"))
	if err != nil {
		return c, fmt.Errorf("checkpoint: root hash: %w", err)
	}
	c.Origin, c.Size = origin, size
	copy(c.Hash[:], hash)
	return c, nil
}

// GenerateKey returns a new Ed25519 log key named name, as a signed-note
// signer key (skey, secret: "PRIVATE+KEY+<name>+<hash>+<base64 of 0x01 ||
// seed>") and verifier key (vkey, public: "<name>+<hash>+<base64 of 0x01 ||
// public key>"). The name should be the log's checkpoint origin.
func GenerateKey(name string) (skey, vkey string, err error) {
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed) // never fails; see crypto/rand.Read
	defer clear(seed)
	return NewKeyFromSeed(name, seed)
}

// NewKeyFromSeed is [GenerateKey] with the 32-byte Ed25519 seed given. Only
// tests and test-vector generators should call it.
func NewKeyFromSeed(name string, seed []byte) (skey, vkey string, err error) {
	if err := validOrigin(name); err != nil {
		return "", "", fmt.Errorf("key name: %w", err)
	}
	if strings.Contains(name, "+") {
		return "", "", errors.New("key name: contains '+'")
	}
	if len(seed) != ed25519.SeedSize {
		return "", "", fmt.Errorf("key seed is %d bytes, want %d", len(seed), ed25519.SeedSize)
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	vkey, err = note.NewEd25519VerifierKey(name, pub)
	if err != nil {
		return "", "", fmt.Errorf("generate key: %w", err)
	}
	// vkey is name+hash+key; the signer key shares its name and hash.
	hash := strings.Split(vkey, "+")[1]
	skey = "PRIVATE+KEY+" + name + "+" + hash + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, seed...))
	return skey, vkey, nil
}

// Signer signs leaves and checkpoints with the log's Ed25519 key. Its
// String, GoString and LogValue methods show the key's name and hash only,
// never key material.
type Signer struct {
	ns   note.Signer
	vkey string
}

// NewSigner returns a Signer for a signer key from [GenerateKey].
func NewSigner(skey string) (*Signer, error) {
	ns, err := note.NewSigner(skey)
	if err != nil {
		// note's error says only "malformed signer id"; never echo skey.
		return nil, fmt.Errorf("signer key: %w", err)
	}
	// note does not expose the public key; derive it from the seed.
	// skey is PRIVATE+KEY+name+hash+base64; base64 may itself hold '+'.
	parts := strings.SplitN(skey, "+", 5)
	raw, err := base64.StdEncoding.DecodeString(parts[4])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return nil, errors.New("signer key: not an Ed25519 key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	clear(raw)
	vkey, err := note.NewEd25519VerifierKey(ns.Name(), pub)
	if err != nil {
		return nil, fmt.Errorf("signer key: %w", err)
	}
	return &Signer{ns: ns, vkey: vkey}, nil
}

// Name returns the key's name.
func (s *Signer) Name() string { return s.ns.Name() }

// VerifierKey returns the public verifier key matching this signer, as
// printed by "lethe audit key".
func (s *Signer) VerifierKey() string { return s.vkey }

// String describes the signer by key name and hash.
func (s *Signer) String() string {
	return fmt.Sprintf("proofs.Signer(%s+%08x)", s.ns.Name(), s.ns.KeyHash())
}

// GoString is String, so that %#v shows no key material either.
func (s *Signer) GoString() string { return s.String() }

// LogValue makes slog print the key name only.
func (s *Signer) LogValue() slog.Value { return slog.StringValue(s.String()) }

// SignLeaf returns the raw 64-byte Ed25519 signature over the exact leaf
// bytes.
func (s *Signer) SignLeaf(leaf []byte) []byte {
	sig, err := s.ns.Sign(leaf)
	if err != nil {
		// note's Ed25519 signer never fails.
		panic("proofs: Ed25519 signing failed: " + err.Error())
	}
	return sig
}

// SignCheckpoint returns the signed note text of c: its body, a blank line
// and one signature line "— <name> <base64 of key hash || signature>".
func (s *Signer) SignCheckpoint(c Checkpoint) ([]byte, error) {
	body, err := c.Marshal()
	if err != nil {
		return nil, err
	}
	msg, err := note.Sign(&note.Note{Text: string(body)}, s.ns)
	if err != nil {
		return nil, fmt.Errorf("sign checkpoint: %w", err)
	}
	return msg, nil
}

// logKey is a parsed verifier key.
type logKey struct {
	note.Verifier
	vkey string
}

// parseLogKey parses a note verifier key.
func parseLogKey(vkey string) (*logKey, error) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return nil, fmt.Errorf("log key: %w", err)
	}
	return &logKey{Verifier: v, vkey: vkey}, nil
}

// id returns "<name>+<hash>", the key's public identity.
func (k *logKey) id() string { return fmt.Sprintf("%s+%08x", k.Name(), k.KeyHash()) }

// OpenCheckpoint verifies a signed checkpoint note against the verifier key
// vkey and returns its content. The note must carry exactly one valid
// signature by vkey, in canonical base64; signatures by other keys (such as
// witness cosignatures) are ignored. The body must parse with
// [ParseCheckpoint] and its origin must equal origin, or the key's name when
// origin is "". Errors are a [*CheckpointSignatureError],
// [*CheckpointOriginError], [*FormatError] or, for a bad vkey, an
// [*OptionsError].
func OpenCheckpoint(noteText []byte, vkey string, origin string) (Checkpoint, error) {
	k, err := parseLogKey(vkey)
	if err != nil {
		return Checkpoint{}, &OptionsError{Err: err}
	}
	return openCheckpoint(noteText, k, origin)
}

func openCheckpoint(noteText []byte, k *logKey, origin string) (Checkpoint, error) {
	n, err := note.Open(noteText, note.VerifierList(k.Verifier))
	if err != nil {
		return Checkpoint{}, &CheckpointSignatureError{Key: k.id(), Err: err}
	}
	if err := strictSignatures(noteText, k); err != nil {
		return Checkpoint{}, &CheckpointSignatureError{Key: k.id(), Err: err}
	}
	c, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, &FormatError{Field: "checkpoint", Err: err}
	}
	want := origin
	if want == "" {
		want = k.Name()
	}
	if c.Origin != want {
		return Checkpoint{}, &CheckpointOriginError{Want: want, Got: c.Origin}
	}
	return c, nil
}

// strictSignatures closes the gaps that note.Open leaves for malleability:
// it requires every signature line to be canonical base64 (note decodes
// leniently, ignoring padding bits and carriage returns), and it requires
// exactly one line signed by k (note skips repeated lines by a known key
// without checking them). msg has already been opened by note.Open, so its
// structure is sound.
func strictSignatures(msg []byte, k *logKey) error {
	split := bytes.LastIndex(msg, []byte("\n\n"))
	ours := 0
	for _, line := range strings.Split(strings.TrimSuffix(string(msg[split+2:]), "\n"), "\n") {
		line = strings.TrimPrefix(line, "— ")
		name, b64, _ := strings.Cut(line, " ")
		sig, err := decodeBase64(b64)
		if err != nil {
			return fmt.Errorf("signature by %s: %w", name, err)
		}
		if name == k.Name() && len(sig) >= 4 && binary.BigEndian.Uint32(sig) == k.KeyHash() {
			ours++
		}
	}
	if ours != 1 {
		return fmt.Errorf("%d signature lines by %s, want exactly 1", ours, k.id())
	}
	return nil
}
