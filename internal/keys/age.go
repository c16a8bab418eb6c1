package keys

import (
	"bufio"
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// AgeWrapper wraps data keys to a local age X25519 identity: the embedded
// default KEK. The identity file must stay private (mode 0600); whoever reads
// it together with the store reads every live grain.
//
// # Versions
//
// The KEK has versions, like a Vault transit key: the file holds one
// identity per version still usable, each after a "# version N" line (a file
// without such lines holds version 1). New keys are wrapped to the newest
// version, and the wrapped form says which ("lethe-kek:v2\n" followed by
// the age file; a wrapped key without the prefix is version 1). Rotate adds
// a version, Rewrap moves a wrapped key to the newest, Trim rewrites the
// file without the old versions: every copy of a key wrapped under them
// (residue, a backup) then stays undecryptable, unless a copy of the old
// file survives too.
//
// The file is reread when it changes on disk, so a rotation by another
// process (lethe keys rotate beside a running server) is seen by the next
// wrap; see RotateKEK for the remaining window.
type AgeWrapper struct {
	path string

	mu      sync.Mutex
	ids     map[int]*age.X25519Identity
	syms    map[int]*symKEK // the wrapping key of each version, derived from its identity
	latest  int
	modTime time.Time
	size    int64
}

var _ Wrapper = (*AgeWrapper)(nil)

// agePrefix starts a wrapped key of a version above 1.
const agePrefix = "lethe-kek:v"

const ageFileHeader = "# lethe local KEK (age X25519 identities, one per version); keep private\n"

// LoadOrCreateAgeIdentity reads the age identity file at path, creating it
// (mode 0600, version 1) if it does not exist.
func LoadOrCreateAgeIdentity(path string) (*AgeWrapper, error) {
	w := &AgeWrapper{path: path}
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			return nil, fmt.Errorf("generate age identity: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return LoadOrCreateAgeIdentity(path) // lost a race with another opener
		}
		if err != nil {
			return nil, fmt.Errorf("create age identity: %w", err)
		}
		if _, err := f.WriteString(encodeAgeFile(map[int]*age.X25519Identity{1: id})); err != nil {
			f.Close()
			return nil, fmt.Errorf("write age identity: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("write age identity: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("write age identity: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("read age identity: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.reloadLocked(true); err != nil {
		return nil, err
	}
	return w, nil
}

// encodeAgeFile writes ids, oldest version first.
func encodeAgeFile(ids map[int]*age.X25519Identity) string {
	var b strings.Builder
	b.WriteString(ageFileHeader)
	for v := range maxVersion(ids) + 1 {
		id, ok := ids[v]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "# version %d, public key: %s\n%s\n", v, id.Recipient(), id)
	}
	return b.String()
}

func maxVersion(ids map[int]*age.X25519Identity) int {
	m := 0
	for v := range ids {
		m = max(m, v)
	}
	return m
}

// parseAgeFile reads the identities of an identity file by version.
func parseAgeFile(b []byte) (map[int]*age.X25519Identity, error) {
	ids := map[int]*age.X25519Identity{}
	version := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "# version "); ok {
			n, _, _ := strings.Cut(rest, ",")
			v, err := strconv.Atoi(n)
			if err != nil || v < 1 {
				return nil, fmt.Errorf("bad version line %q", line)
			}
			version = v
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, err := age.ParseX25519Identity(line)
		if err != nil {
			return nil, errors.New("a line is not an age X25519 identity")
		}
		v := version
		if v == 0 {
			v = 1 // a file of before versions
		}
		if _, dup := ids[v]; dup {
			return nil, fmt.Errorf("version %d given twice", v)
		}
		ids[v] = id
		version = 0
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, errors.New("no X25519 identity")
	}
	return ids, nil
}

// reloadLocked rereads the file if it changed since the last read (or
// always, with force).
func (w *AgeWrapper) reloadLocked(force bool) error {
	st, err := os.Stat(w.path)
	if err != nil {
		return fmt.Errorf("read age identity: %w", err)
	}
	if !force && st.ModTime().Equal(w.modTime) && st.Size() == w.size {
		return nil
	}
	b, err := os.ReadFile(w.path)
	if err != nil {
		return fmt.Errorf("read age identity: %w", err)
	}
	ids, err := parseAgeFile(b)
	if err != nil {
		return fmt.Errorf("parse age identity %s: %w", w.path, err)
	}
	syms := make(map[int]*symKEK, len(ids))
	for v, id := range ids {
		if old, ok := w.ids[v]; ok && old.String() == id.String() {
			syms[v] = w.syms[v]
			continue
		}
		if syms[v], err = newSymKEK(id); err != nil {
			return err
		}
	}
	w.ids, w.syms, w.latest, w.modTime, w.size = ids, syms, maxVersion(ids), st.ModTime(), st.Size()
	return nil
}

// current returns the newest identity, its wrapping key and its version,
// rereading the file if it changed.
func (w *AgeWrapper) current() (*age.X25519Identity, *symKEK, int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.reloadLocked(false); err != nil {
		return nil, nil, 0, err
	}
	return w.ids[w.latest], w.syms[w.latest], w.latest, nil
}

// identity returns the identity of version v and its wrapping key.
func (w *AgeWrapper) identity(v int) (*age.X25519Identity, *symKEK, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// Reread a changed file first: a version trimmed by another process
	// must stop unwrapping here too.
	if err := w.reloadLocked(false); err != nil {
		return nil, nil, err
	}
	id, ok := w.ids[v]
	if !ok {
		return nil, nil, fmt.Errorf("age unwrap: KEK version %d: %w", v, ErrKEKVersionTrimmed)
	}
	return id, w.syms[v], nil
}

// ErrKEKVersionTrimmed means a wrapped key was made with a KEK version that
// no longer exists: trimmed after a rotation (by design: a copy from before
// the horizon), or never known here.
var ErrKEKVersionTrimmed = errors.New("KEK version trimmed")

// Recipient returns the public half of the newest identity.
func (w *AgeWrapper) Recipient() string {
	id, _, _, err := w.current()
	if err != nil {
		return ""
	}
	return id.Recipient().String()
}

// Wrap encrypts dk to the newest identity's recipient.
func (w *AgeWrapper) Wrap(_ context.Context, _ Ref, dk []byte) ([]byte, error) {
	_, sym, v, err := w.current()
	if err != nil {
		return nil, err
	}
	return ageWrap(sym, v, dk)
}

func ageWrap(r age.Recipient, v int, dk []byte) ([]byte, error) {
	var buf bytes.Buffer
	if v > 1 {
		buf.WriteString(agePrefix + strconv.Itoa(v) + "\n")
	}
	wc, err := age.Encrypt(&buf, r)
	if err != nil {
		return nil, fmt.Errorf("age wrap: %w", err)
	}
	if _, err := wc.Write(dk); err != nil {
		return nil, fmt.Errorf("age wrap: %w", err)
	}
	if err := wc.Close(); err != nil {
		return nil, fmt.Errorf("age wrap: %w", err)
	}
	return buf.Bytes(), nil
}

// AgeKEKVersion returns the KEK version a wrapped key names and the age
// file after the prefix.
func AgeKEKVersion(wrapped []byte) (int, []byte, bool) {
	rest, ok := bytes.CutPrefix(wrapped, []byte(agePrefix))
	if !ok {
		return 1, wrapped, true
	}
	n, body, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return 0, nil, false
	}
	v, err := strconv.Atoi(string(n))
	if err != nil || v < 2 {
		return 0, nil, false
	}
	return v, body, true
}

// KEKVersion returns the KEK version wrapped was made with.
func (w *AgeWrapper) KEKVersion(wrapped []byte) (int, bool) {
	v, _, ok := AgeKEKVersion(wrapped)
	return v, ok
}

// KEKName names this KEK in audit events.
func (w *AgeWrapper) KEKName() string { return "age-local" }

// Unwrap decrypts a wrapped key with the identity of its version.
func (w *AgeWrapper) Unwrap(_ context.Context, _ Ref, wrapped []byte) ([]byte, error) {
	v, body, ok := AgeKEKVersion(wrapped)
	if !ok {
		return nil, errors.New("age unwrap: bad KEK version prefix")
	}
	id, sym, err := w.identity(v)
	if err != nil {
		return nil, err
	}
	if dk, ok := openSmallAge(body, sym, id); ok {
		return dk, nil
	}
	r, err := age.Decrypt(bytes.NewReader(body), sym, id)
	if err != nil {
		return nil, fmt.Errorf("age unwrap: %w", err)
	}
	dk, err := io.ReadAll(io.LimitReader(r, KeySize+1))
	if err != nil {
		return nil, fmt.Errorf("age unwrap: %w", err)
	}
	if len(dk) != KeySize {
		return nil, fmt.Errorf("age unwrap: key is %d bytes, want %d", len(dk), KeySize)
	}
	return dk, nil
}

// agePayloadNonceSize is the size of the nonce that starts an age file's
// payload, after its header.
const agePayloadNonceSize = 16

// openSmallAge decrypts the age file body when it is what a wrapped data
// key is, a header and a payload of one chunk holding KeySize bytes, and
// reports whether it did. age.Decrypt allocates and clears two 64 KiB
// chunk buffers for any file, most of an unwrap's time (56-61 µs and
// 150 KB against 25 µs and 17 KB, BenchmarkAgeUnwrap); this reads the
// header with age's ExtractHeader and DecryptHeader and opens the one chunk
// as the age format (C2SP age, "Payload") specifies: the payload key is HKDF-SHA-256 of the
// file key with the payload's nonce as salt and "payload" as info, and the
// chunk is ChaCha20-Poly1305 under counter 0 with the last-chunk flag set.
// Anything else (another size, a header or chunk that does not open) is
// left to age.Decrypt, which then answers as it always did:
// TestSmallAgeIsLibrary checks the two agree.
func openSmallAge(body []byte, ids ...age.Identity) ([]byte, bool) {
	hdr, err := age.ExtractHeader(bytes.NewReader(body))
	if err != nil || !bytes.HasPrefix(body, hdr) {
		return nil, false
	}
	payload := body[len(hdr):]
	if len(payload) != agePayloadNonceSize+KeySize+chacha20poly1305.Overhead {
		return nil, false
	}
	fileKey, err := age.DecryptHeader(hdr, ids...)
	if err != nil {
		return nil, false
	}
	key, err := hkdf.Key(sha256.New, fileKey, payload[:agePayloadNonceSize], "payload", chacha20poly1305.KeySize)
	if err != nil {
		return nil, false
	}
	a, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, false
	}
	var nonce [chacha20poly1305.NonceSize]byte
	nonce[len(nonce)-1] = 1 // the last (and only) chunk
	dk, err := a.Open(nil, nonce[:], payload[agePayloadNonceSize:], nil)
	if err != nil || len(dk) != KeySize {
		return nil, false
	}
	return dk, true
}

// Rotate adds a new version to the identity file; new wraps use it. Keys
// wrapped under older versions still unwrap until Trim.
func (w *AgeWrapper) Rotate(context.Context) error {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return fmt.Errorf("generate age identity: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.reloadLocked(true); err != nil {
		return err
	}
	next := make(map[int]*age.X25519Identity, len(w.ids)+1)
	for v, i := range w.ids {
		next[v] = i
	}
	next[w.latest+1] = id
	return w.writeLocked(next)
}

// writeLocked replaces the identity file with ids: a new file (mode 0600)
// synced and renamed over the old one, the directory synced.
func (w *AgeWrapper) writeLocked(ids map[int]*age.X25519Identity) error {
	dir := filepath.Dir(w.path)
	f, err := os.CreateTemp(dir, ".kek-*.tmp")
	if err != nil {
		return fmt.Errorf("write age identity: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write age identity: %w", err)
	}
	if _, err := f.WriteString(encodeAgeFile(ids)); err != nil {
		f.Close()
		return fmt.Errorf("write age identity: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write age identity: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write age identity: %w", err)
	}
	if err := os.Rename(tmp, w.path); err != nil {
		return fmt.Errorf("write age identity: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return w.reloadLocked(true)
}

// Rewrap re-encrypts a wrapped key to the newest version.
func (w *AgeWrapper) Rewrap(ctx context.Context, wrapped []byte) ([]byte, error) {
	dk, err := w.Unwrap(ctx, Ref{}, wrapped)
	if err != nil {
		return nil, err
	}
	_, sym, v, err := w.current()
	if err != nil {
		return nil, err
	}
	return ageWrap(sym, v, dk)
}

// LatestVersion returns the newest version.
func (w *AgeWrapper) LatestVersion(context.Context) (int, error) {
	_, _, v, err := w.current()
	return v, err
}

// MinVersion returns the oldest version still in the file: the oldest
// whose wrapped keys still unwrap.
func (w *AgeWrapper) MinVersion(context.Context) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.reloadLocked(false); err != nil {
		return 0, err
	}
	m := w.latest
	for v := range w.ids {
		m = min(m, v)
	}
	return m, nil
}

// Trim removes every version below keepFrom from the identity file. The
// old file is replaced (renamed over), so no file of the data directory
// holds the old identities afterwards.
func (w *AgeWrapper) Trim(_ context.Context, keepFrom int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.reloadLocked(true); err != nil {
		return err
	}
	if keepFrom < 1 || keepFrom > w.latest {
		return fmt.Errorf("age trim: keep-from version %d outside 1..%d", keepFrom, w.latest)
	}
	next := map[int]*age.X25519Identity{}
	for v, id := range w.ids {
		if v >= keepFrom {
			next[v] = id
		}
	}
	if len(next) == len(w.ids) {
		return nil
	}
	return w.writeLocked(next)
}

// String describes the wrapper without secrets.
func (w *AgeWrapper) String() string {
	r := strings.TrimPrefix(w.Recipient(), "age1")
	return "age-local(" + r[:min(12, len(r))] + "…)"
}

// symKEK wraps an age file key under a symmetric key derived from a KEK
// version's identity: XChaCha20-Poly1305 under HKDF-SHA256(identity,
// "lethe/kek-wrap/v1"), in a stanza of type "lethe-kek" whose argument is
// the nonce. It is an age Recipient and Identity both, so a wrapped data key
// stays an age file; it costs microseconds where an X25519 stanza costs an
// ephemeral key agreement (186 µs to wrap here), which made wrapping a
// batch's new keys the bulk of its time. Keys wrapped to the X25519
// recipient before still unwrap (Unwrap tries both). Whoever holds the
// identity file derives the key, so it protects exactly what the X25519
// recipient did, and dies with the identity at a trim.
type symKEK struct{ aead cipher.AEAD }

const symStanza = "lethe-kek"

func newSymKEK(id *age.X25519Identity) (*symKEK, error) {
	k, err := hkdf.Key(sha256.New, []byte(id.String()), nil, "lethe/kek-wrap/v1", chacha20poly1305.KeySize)
	if err != nil {
		return nil, fmt.Errorf("derive KEK wrapping key: %w", err)
	}
	a, err := chacha20poly1305.NewX(k)
	if err != nil {
		return nil, fmt.Errorf("derive KEK wrapping key: %w", err)
	}
	return &symKEK{aead: a}, nil
}

// Wrap seals an age file key.
func (s *symKEK) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	nonce := make([]byte, chacha20poly1305.NonceSizeX)
	rand.Read(nonce) // never fails; see crypto/rand.Read
	return []*age.Stanza{{Type: symStanza, Args: []string{base64.RawStdEncoding.EncodeToString(nonce)},
		Body: s.aead.Seal(nil, nonce, fileKey, []byte(symStanza))}}, nil
}

// Unwrap opens the file key of a "lethe-kek" stanza sealed under this key.
func (s *symKEK) Unwrap(stanzas []*age.Stanza) ([]byte, error) {
	for _, st := range stanzas {
		if st.Type != symStanza || len(st.Args) != 1 {
			continue
		}
		nonce, err := base64.RawStdEncoding.Strict().DecodeString(st.Args[0])
		if err != nil || len(nonce) != chacha20poly1305.NonceSizeX {
			continue
		}
		if fk, err := s.aead.Open(nil, nonce, st.Body, []byte(symStanza)); err == nil {
			return fk, nil
		}
	}
	return nil, age.ErrIncorrectIdentity
}
