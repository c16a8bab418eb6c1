package keys

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	vault "github.com/hashicorp/vault/api"
	"golang.org/x/sync/errgroup"
)

// Errors of the Vault wrapper. Every error a VaultWrapper returns for a
// failed Vault call is a *VaultError; these sentinels say why, for callers to
// branch on with errors.Is.
var (
	// ErrVaultSealed means Vault answered 503 "Vault is sealed". An operator must
	// unseal it; nothing is readable or writable until then.
	ErrVaultSealed = errors.New("vault is sealed")
	// ErrVaultUnreachable means no answer from Vault (connection refused, reset,
	// timeout) or a gateway/availability error (502, 503 other than sealed,
	// 504).
	ErrVaultUnreachable = errors.New("vault unreachable")
	// ErrVaultDenied means Vault answered 403 (or 401): the token is invalid,
	// expired or its policy does not allow the operation.
	ErrVaultDenied = errors.New("vault permission denied")
	// ErrVaultKeyMissing means the transit key does not exist (Vault answers 400
	// "encryption key not found" for encrypt/decrypt, 404 on read), or the
	// transit mount does not exist. In dedicated-key mode this is what an
	// erased data key looks like.
	ErrVaultKeyMissing = errors.New("vault transit key not found")
	// ErrVaultKeyVersionRetired means the wrapped key was made with a version of
	// the transit key older than its min_decryption_version, or trimmed away:
	// a copy from before the rotation horizon (a backup) that no longer
	// decrypts, by design.
	ErrVaultKeyVersionRetired = errors.New("vault transit key version retired")
)

// VaultError is an error from a Vault call. Err is one of the sentinels
// above, or nil when Vault refused the request for another reason (bad
// input, internal error); Cause is what the Vault client returned. Its text
// names the operation, the transit key and Vault's own messages, never the
// token, a data key or a wrapped key.
type VaultError struct {
	Op         string   // "encrypt", "decrypt", "rewrap", "rotate", ...
	Key        string   // transit key name
	StatusCode int      // HTTP status of Vault's answer, 0 without one
	Messages   []string // Vault's error messages, if it answered
	Err        error    // sentinel, or nil
	Cause      error    // the client's error (*api.ResponseError, *url.Error, ...)
}

// Error describes the failure on one line.
func (e *VaultError) Error() string {
	var b strings.Builder
	b.WriteString("vault transit ")
	b.WriteString(e.Op)
	if e.Key != "" {
		b.WriteString(" ")
		b.WriteString(e.Key)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	switch {
	case e.StatusCode != 0:
		fmt.Fprintf(&b, " (%d", e.StatusCode)
		if len(e.Messages) > 0 {
			b.WriteString(": ")
			b.WriteString(strings.Join(e.Messages, "; "))
		}
		b.WriteString(")")
	case e.Cause != nil:
		b.WriteString(": ")
		b.WriteString(strings.Join(strings.Fields(e.Cause.Error()), " "))
	}
	return b.String()
}

// Unwrap returns the sentinel and the cause.
func (e *VaultError) Unwrap() []error {
	var errs []error
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// VaultConfig configures a VaultWrapper. cmd/ fills it; the wrapper reads
// no environment variable and no file.
type VaultConfig struct {
	// Address of Vault, e.g. "https://vault.example:8200".
	Address string
	// Token authenticates lethe to Vault. The caller reads it from a file or
	// the environment; it never appears in errors, String or logs.
	Token string
	// Namespace is the Vault Enterprise / HCP namespace ("" for none).
	Namespace string
	// Mount is the path of the transit secrets engine (default "transit").
	Mount string
	// KeyName is the shared transit key (default "lethe-kek"). Unused in
	// dedicated mode.
	KeyName string
	// Dedicated selects one transit key per data key, named DedicatedPrefix
	// followed by the first 32 hex characters of the data key's fingerprint,
	// created by Wrap and deleted by Destroy.
	Dedicated bool
	// DedicatedPrefix names dedicated keys (default "lethe-dk-").
	DedicatedPrefix string
	// Timeout bounds each Vault request (default 10s). The wrapper does not
	// retry: a failed call returns at once, and the caller decides.
	Timeout time.Duration
}

// VaultWrapper wraps data keys with HashiCorp Vault's transit secrets
// engine: the KEK never leaves Vault. In shared mode every data key is
// encrypted under one transit key and its ciphertext ("vault:vN:...") is the
// wrapped form; Rotate, Rewrap and Trim move wrapped keys to a new KEK
// version and retire the old ones. In dedicated mode each data key has its
// own transit key and Destroy deletes it, so erasure also destroys the KEK in
// Vault. The wrapper caches nothing: every Wrap and Unwrap asks Vault. It is
// safe for concurrent use.
//
// See https://developer.hashicorp.com/vault/api-docs/secret/transit.
type VaultWrapper struct {
	c   *vault.Client
	cfg VaultConfig

	// keyChecked is set once the shared key was seen to exist, so Wrap does
	// not create it by accident (transit "upserts" keys on encrypt when the
	// token may create them).
	keyChecked atomic.Bool

	// calls counts the requests made to Vault (see Calls).
	calls atomic.Int64
}

// Calls returns how many requests this wrapper made to Vault for wrapping,
// unwrapping and rewrapping data keys (for measurements).
func (w *VaultWrapper) Calls() int64 { return w.calls.Load() }

// maxBatch bounds the keys of one transit batch request.
const maxBatch = 500

// WrapBatch wraps many data keys: in shared-key mode with one transit
// encrypt call per 500 keys (batch_input, up to four calls at once), in
// dedicated mode one key at a time (each has its own transit key).
func (w *VaultWrapper) WrapBatch(ctx context.Context, refs []Ref, dks [][]byte) ([][]byte, error) {
	if len(refs) != len(dks) {
		return nil, fmt.Errorf("vault wrap: %d refs for %d keys", len(refs), len(dks))
	}
	out := make([][]byte, len(dks))
	if w.cfg.Dedicated {
		for i := range dks {
			var err error
			if out[i], err = w.Wrap(ctx, refs[i], dks[i]); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if err := w.checkSharedKey(ctx); err != nil {
		return nil, err
	}
	err := inBatches(ctx, len(dks), func(ctx context.Context, lo, hi int) error {
		return w.encryptBatch(ctx, dks[lo:hi], out[lo:hi])
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inBatches calls fn for each run [lo, hi) of at most maxBatch of n keys.
// The batches go to Vault at the same time (at most maxBatchCalls at
// once): a batch costs Vault a round trip and its own work, so 1,000 new
// users wait for one batch's time, not two.
func inBatches(ctx context.Context, n int, fn func(ctx context.Context, lo, hi int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(maxBatchCalls)
	for lo := 0; lo < n; lo += maxBatch {
		hi := min(lo+maxBatch, n)
		g.Go(func() error { return fn(gctx, lo, hi) })
	}
	return g.Wait()
}

// transitBatch sends in as one batch_input request to transit's op
// (encrypt or decrypt) under the shared key, with the parameters of extra,
// and returns one result per item of in.
func (w *VaultWrapper) transitBatch(ctx context.Context, op string, in []map[string]any, extra map[string]any) ([]map[string]any, error) {
	name := w.cfg.KeyName
	body := map[string]any{"batch_input": in}
	for k, v := range extra {
		body[k] = v
	}
	w.calls.Add(1)
	s, err := w.c.Logical().WriteWithContext(ctx, w.path(op, name), body)
	if err != nil {
		return nil, w.fail(op, name, err)
	}
	var results []any
	if s != nil {
		results, _ = s.Data["batch_results"].([]any)
	}
	if len(results) != len(in) {
		return nil, &VaultError{Op: op, Key: name, Cause: fmt.Errorf("%d batch results for %d keys", len(results), len(in))}
	}
	out := make([]map[string]any, len(results))
	for i, r := range results {
		out[i], _ = r.(map[string]any)
	}
	return out, nil
}

// dataKeyOf returns the data key a transit plaintext (base64) holds, or
// false if it holds none.
func dataKeyOf(pt string) ([]byte, bool) {
	dk, err := base64.StdEncoding.DecodeString(pt)
	return dk, err == nil && len(dk) == KeySize
}

// maxBatchCalls bounds the transit batch requests WrapBatch has in flight.
const maxBatchCalls = 4

// encryptBatch wraps part (at most maxBatch keys) with one transit encrypt
// call under the shared key, into out.
func (w *VaultWrapper) encryptBatch(ctx context.Context, part [][]byte, out [][]byte) error {
	in := make([]map[string]any, len(part))
	for i, dk := range part {
		if len(dk) != KeySize {
			return fmt.Errorf("vault wrap: key is %d bytes, want %d", len(dk), KeySize)
		}
		in[i] = map[string]any{"plaintext": base64.StdEncoding.EncodeToString(dk)}
	}
	results, err := w.transitBatch(ctx, "encrypt", in, nil)
	if err != nil {
		return err
	}
	for i, m := range results {
		ct, _ := m["ciphertext"].(string)
		if ct == "" {
			msg, _ := m["error"].(string)
			return &VaultError{Op: "encrypt", Key: w.cfg.KeyName, Messages: []string{w.redact(msg)}, Cause: errors.New("batch item failed")}
		}
		out[i] = []byte(ct)
	}
	return nil
}

// UnwrapBatch unwraps many data keys: in shared-key mode with one transit
// decrypt call per 500 keys (batch_input, up to four calls at once), so
// that the first recall over 10,000 scopes after a start makes 20 calls to
// Vault, not 10,000 (BenchmarkRecallScopes). A key that does not decrypt
// (not a transit ciphertext, or one Vault refuses) is nil in out, and the
// others are answered (partial_failure_response_code). Dedicated mode has
// a transit key per data key: ok is false.
func (w *VaultWrapper) UnwrapBatch(ctx context.Context, refs []Ref, wrapped [][]byte) ([][]byte, bool, error) {
	if w.cfg.Dedicated {
		return nil, false, nil
	}
	if len(refs) != len(wrapped) {
		return nil, true, fmt.Errorf("vault unwrap: %d refs for %d keys", len(refs), len(wrapped))
	}
	out := make([][]byte, len(wrapped))
	err := inBatches(ctx, len(wrapped), func(ctx context.Context, lo, hi int) error {
		return w.decryptBatch(ctx, wrapped[lo:hi], out[lo:hi])
	})
	return out, true, err
}

// decryptBatch unwraps part (at most maxBatch keys) with one transit
// decrypt call under the shared key, into out; a key Vault does not
// decrypt stays nil.
func (w *VaultWrapper) decryptBatch(ctx context.Context, part [][]byte, out [][]byte) error {
	in := make([]map[string]any, 0, len(part))
	at := make([]int, 0, len(part)) // in[j] is part[at[j]]
	for i, ct := range part {
		if strings.HasPrefix(string(ct), "vault:v") {
			in = append(in, map[string]any{"ciphertext": string(ct)})
			at = append(at, i)
		}
	}
	if len(in) == 0 {
		return nil
	}
	results, err := w.transitBatch(ctx, "decrypt", in, map[string]any{"partial_failure_response_code": http.StatusOK})
	if err != nil {
		return err
	}
	for j, m := range results {
		pt, _ := m["plaintext"].(string)
		if dk, ok := dataKeyOf(pt); ok {
			out[at[j]] = dk
		}
	}
	return nil
}

var _ Wrapper = (*VaultWrapper)(nil)
var _ BatchUnwrapper = (*VaultWrapper)(nil)

var transitName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// NewVaultWrapper returns a wrapper for cfg. It does not contact Vault; use
// Check for that.
func NewVaultWrapper(cfg VaultConfig) (*VaultWrapper, error) {
	if cfg.Address == "" {
		return nil, errors.New("vault: no address")
	}
	cfg.Token = strings.TrimSpace(cfg.Token)
	if cfg.Token == "" {
		return nil, errors.New("vault: no token")
	}
	if cfg.Mount == "" {
		cfg.Mount = "transit"
	}
	cfg.Mount = strings.Trim(cfg.Mount, "/")
	if cfg.KeyName == "" {
		cfg.KeyName = "lethe-kek"
	}
	if cfg.DedicatedPrefix == "" {
		cfg.DedicatedPrefix = "lethe-dk-"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	for _, part := range strings.Split(cfg.Mount, "/") {
		if !transitName.MatchString(part) {
			return nil, fmt.Errorf("vault: invalid mount %q", cfg.Mount)
		}
	}
	if !transitName.MatchString(cfg.KeyName) {
		return nil, fmt.Errorf("vault: invalid key name %q", cfg.KeyName)
	}
	if !transitName.MatchString(cfg.DedicatedPrefix) {
		return nil, fmt.Errorf("vault: invalid dedicated key prefix %q", cfg.DedicatedPrefix)
	}

	// Build the client configuration ourselves: api.DefaultConfig reads
	// VAULT_* variables (VAULT_SKIP_VERIFY among them), and an adapter takes
	// its configuration from cmd/ only.
	hc := cleanhttp.DefaultPooledClient()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c, err := vault.NewClient(&vault.Config{
		Address:    cfg.Address,
		HttpClient: hc,
		Timeout:    cfg.Timeout,
		MaxRetries: 0,
	})
	if err != nil {
		return nil, fmt.Errorf("vault: client: %w", err)
	}
	// NewClient also picks up VAULT_TOKEN, VAULT_NAMESPACE and VAULT_HEADERS:
	// override all three.
	c.SetToken(cfg.Token)
	h := http.Header{}
	h.Set(vault.RequestHeaderName, "true")
	c.SetHeaders(h)
	c.ClearNamespace()
	if cfg.Namespace != "" {
		c.SetNamespace(cfg.Namespace)
	}
	return &VaultWrapper{c: c, cfg: cfg}, nil
}

// String describes the wrapper without secrets.
func (w *VaultWrapper) String() string {
	if w.cfg.Dedicated {
		return "vault-transit(" + w.cfg.Address + ", dedicated " + w.cfg.Mount + "/keys/" + w.cfg.DedicatedPrefix + "*)"
	}
	return "vault-transit(" + w.cfg.Address + ", " + w.cfg.Mount + "/keys/" + w.cfg.KeyName + ")"
}

// Dedicated reports whether every data key has a transit key of its own
// (dedicated-key mode), which Destroy deletes.
func (w *VaultWrapper) Dedicated() bool { return w.cfg.Dedicated }

// DedicatedKeyName returns the transit key that wraps ref's data key in
// dedicated mode.
func (w *VaultWrapper) DedicatedKeyName(ref Ref) (string, error) {
	fp := strings.ToLower(ref.Fingerprint)
	if len(fp) < 32 || strings.Trim(fp[:32], "0123456789abcdef") != "" {
		return "", errors.New("vault: ref has no valid fingerprint")
	}
	return w.cfg.DedicatedPrefix + fp[:32], nil
}

func (w *VaultWrapper) keyFor(ref Ref) (string, error) {
	if w.cfg.Dedicated {
		return w.DedicatedKeyName(ref)
	}
	return w.cfg.KeyName, nil
}

// Check verifies that Vault answers and the token works: in shared mode by
// reading the shared key (which must exist), in dedicated mode by looking up
// the token itself.
func (w *VaultWrapper) Check(ctx context.Context) error {
	if w.cfg.Dedicated {
		_, err := w.c.Logical().ReadWithContext(ctx, "auth/token/lookup-self")
		if err != nil {
			return w.fail("check", "", err)
		}
		return nil
	}
	_, err := w.readKey(ctx, "check", w.cfg.KeyName)
	return err
}

// Wrap encrypts dk with transit. In dedicated mode it first creates the
// data key's own transit key.
func (w *VaultWrapper) Wrap(ctx context.Context, ref Ref, dk []byte) ([]byte, error) {
	if len(dk) != KeySize {
		return nil, fmt.Errorf("vault wrap: key is %d bytes, want %d", len(dk), KeySize)
	}
	name, err := w.keyFor(ref)
	if err != nil {
		return nil, err
	}
	if w.cfg.Dedicated {
		if _, err := w.c.Logical().WriteWithContext(ctx, w.path("keys", name), map[string]any{"type": "aes256-gcm96"}); err != nil {
			return nil, w.fail("create key", name, err)
		}
	} else if err := w.checkSharedKey(ctx); err != nil {
		return nil, err
	}
	w.calls.Add(1)
	s, err := w.c.Logical().WriteWithContext(ctx, w.path("encrypt", name), map[string]any{
		"plaintext": base64.StdEncoding.EncodeToString(dk),
	})
	if err != nil {
		return nil, w.fail("encrypt", name, err)
	}
	ct, err := stringField(s, "ciphertext")
	if err != nil {
		return nil, &VaultError{Op: "encrypt", Key: name, Cause: err}
	}
	return []byte(ct), nil
}

// checkSharedKey makes sure, once, that the shared key exists, so that the
// first Wrap never creates it (transit creates a missing key on encrypt when
// the token may). A later deletion shows up as ErrVaultKeyMissing on Unwrap,
// or on Wrap when the token may not create keys, as lethe's policy says.
func (w *VaultWrapper) checkSharedKey(ctx context.Context) error {
	if w.keyChecked.Load() {
		return nil
	}
	if _, err := w.readKey(ctx, "encrypt", w.cfg.KeyName); err != nil {
		return err
	}
	w.keyChecked.Store(true)
	return nil
}

// Unwrap decrypts a wrapped key with transit.
func (w *VaultWrapper) Unwrap(ctx context.Context, ref Ref, wrapped []byte) ([]byte, error) {
	name, err := w.keyFor(ref)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(string(wrapped), "vault:v") {
		return nil, errors.New("vault unwrap: not a transit ciphertext")
	}
	w.calls.Add(1)
	s, err := w.c.Logical().WriteWithContext(ctx, w.path("decrypt", name), map[string]any{
		"ciphertext": string(wrapped),
	})
	if err != nil {
		return nil, w.fail("decrypt", name, err)
	}
	pt, err := stringField(s, "plaintext")
	if err != nil {
		return nil, &VaultError{Op: "decrypt", Key: name, Cause: err}
	}
	dk, ok := dataKeyOf(pt)
	if !ok {
		return nil, &VaultError{Op: "decrypt", Key: name, Cause: errors.New("plaintext is not a data key")}
	}
	return dk, nil
}

// Destroy deletes ref's dedicated transit key: it allows deletion in the
// key's config, deletes it, and reads it back to confirm it is gone. After it
// returns nil, no wrapped copy of the data key (in the store or a backup) can
// be unwrapped with this Vault. A key that is already gone is not an error,
// so an interrupted erasure can be repeated. Dedicated mode only.
//
// Vault's own storage snapshots taken before Destroy still hold the key:
// their retention is part of the erasure horizon.
func (w *VaultWrapper) Destroy(ctx context.Context, ref Ref) error {
	if !w.cfg.Dedicated {
		return errors.New("vault destroy: only in dedicated-key mode; in shared mode destroy the wrapped key")
	}
	name, err := w.DedicatedKeyName(ref)
	if err != nil {
		return err
	}
	_, err = w.c.Logical().WriteWithContext(ctx, w.path("keys", name, "config"), map[string]any{"deletion_allowed": true})
	if err != nil {
		err = w.fail("destroy", name, err)
		if errors.Is(err, ErrVaultKeyMissing) {
			return nil
		}
		return err
	}
	if _, err := w.c.Logical().DeleteWithContext(ctx, w.path("keys", name)); err != nil {
		return w.fail("destroy", name, err)
	}
	s, err := w.c.Logical().ReadWithContext(ctx, w.path("keys", name))
	if err != nil {
		return w.fail("destroy", name, err)
	}
	if s != nil {
		return &VaultError{Op: "destroy", Key: name, Cause: errors.New("key still readable after delete")}
	}
	return nil
}

// Rotate adds a new version of the shared transit key; new wraps use it.
// Older wrapped keys still unwrap until Trim. Shared mode only.
func (w *VaultWrapper) Rotate(ctx context.Context) error {
	if err := w.sharedOnly("rotate"); err != nil {
		return err
	}
	if _, err := w.c.Logical().WriteWithContext(ctx, w.path("keys", w.cfg.KeyName, "rotate"), nil); err != nil {
		return w.fail("rotate", w.cfg.KeyName, err)
	}
	return nil
}

// Rewrap re-encrypts a wrapped key under the latest version of the shared
// transit key, without the data key leaving Vault. Shared mode only.
func (w *VaultWrapper) Rewrap(ctx context.Context, wrapped []byte) ([]byte, error) {
	if err := w.sharedOnly("rewrap"); err != nil {
		return nil, err
	}
	s, err := w.c.Logical().WriteWithContext(ctx, w.path("rewrap", w.cfg.KeyName), map[string]any{
		"ciphertext": string(wrapped),
	})
	if err != nil {
		return nil, w.fail("rewrap", w.cfg.KeyName, err)
	}
	ct, err := stringField(s, "ciphertext")
	if err != nil {
		return nil, &VaultError{Op: "rewrap", Key: w.cfg.KeyName, Cause: err}
	}
	return []byte(ct), nil
}

// VaultKeyVersion returns the transit key version a wrapped key was made
// with ("vault:v3:..." -> 3), so a rotation can skip keys already wrapped
// under the latest version.
func VaultKeyVersion(wrapped []byte) (int, bool) {
	s, ok := strings.CutPrefix(string(wrapped), "vault:v")
	if !ok {
		return 0, false
	}
	v, _, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// KEKVersion returns the transit key version wrapped was made with.
func (w *VaultWrapper) KEKVersion(wrapped []byte) (int, bool) { return VaultKeyVersion(wrapped) }

// KEKName names this KEK in audit events: "vault-transit:" and the shared
// key's name ("vault-transit" when the name is not a plain word, or in
// dedicated-key mode).
func (w *VaultWrapper) KEKName() string {
	if w.cfg.Dedicated || !kekNamePattern.MatchString(w.cfg.KeyName) {
		return "vault-transit"
	}
	return "vault-transit:" + w.cfg.KeyName
}

var kekNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,48}$`)

// MinVersion returns the oldest version of the shared transit key that
// still decrypts. Shared mode only.
func (w *VaultWrapper) MinVersion(ctx context.Context) (int, error) {
	st, err := w.KeyState(ctx)
	if err != nil {
		return 0, err
	}
	return max(1, st.MinDecryptionVersion, st.MinAvailableVersion), nil
}

// VaultKeyState is what Vault reports about the shared transit key's
// versions.
type VaultKeyState struct {
	Latest               int
	MinDecryptionVersion int
	MinEncryptionVersion int // 0: the latest
	MinAvailableVersion  int // 0: none trimmed
}

// KeyState reads the versions of the shared transit key. Shared mode only.
func (w *VaultWrapper) KeyState(ctx context.Context) (VaultKeyState, error) {
	if err := w.sharedOnly("read key"); err != nil {
		return VaultKeyState{}, err
	}
	s, err := w.readKey(ctx, "read key", w.cfg.KeyName)
	if err != nil {
		return VaultKeyState{}, err
	}
	var st VaultKeyState
	for _, f := range []struct {
		name string
		dst  *int
	}{
		{"latest_version", &st.Latest},
		{"min_decryption_version", &st.MinDecryptionVersion},
		{"min_encryption_version", &st.MinEncryptionVersion},
		{"min_available_version", &st.MinAvailableVersion},
	} {
		if *f.dst, err = intField(s, f.name); err != nil {
			return VaultKeyState{}, &VaultError{Op: "read key", Key: w.cfg.KeyName, Cause: err}
		}
	}
	return st, nil
}

// LatestVersion returns the latest version of the shared transit key.
func (w *VaultWrapper) LatestVersion(ctx context.Context) (int, error) {
	st, err := w.KeyState(ctx)
	return st.Latest, err
}

// Trim retires every version of the shared transit key below keepFrom: it
// raises min_decryption_version and min_encryption_version to keepFrom, then
// min_available_version (transit/keys/NAME/trim), which deletes those
// versions from Vault. Wrapped keys made with them, including every copy in
// a backup, no longer unwrap: rewrap live keys first. keepFrom must not
// exceed the latest version; versions already trimmed are left as they are.
// Shared mode only.
func (w *VaultWrapper) Trim(ctx context.Context, keepFrom int) error {
	st, err := w.KeyState(ctx)
	if err != nil {
		return err
	}
	if keepFrom < 1 || keepFrom > st.Latest {
		return fmt.Errorf("vault trim: keep-from version %d outside 1..%d", keepFrom, st.Latest)
	}
	if keepFrom <= st.MinAvailableVersion {
		return nil
	}
	cfg := map[string]any{}
	if st.MinDecryptionVersion < keepFrom {
		cfg["min_decryption_version"] = keepFrom
	}
	if st.MinEncryptionVersion < keepFrom {
		cfg["min_encryption_version"] = keepFrom
	}
	if len(cfg) > 0 {
		if _, err := w.c.Logical().WriteWithContext(ctx, w.path("keys", w.cfg.KeyName, "config"), cfg); err != nil {
			return w.fail("trim", w.cfg.KeyName, err)
		}
	}
	if _, err := w.c.Logical().WriteWithContext(ctx, w.path("keys", w.cfg.KeyName, "trim"), map[string]any{
		"min_available_version": keepFrom,
	}); err != nil {
		return w.fail("trim", w.cfg.KeyName, err)
	}
	return nil
}

func (w *VaultWrapper) sharedOnly(op string) error {
	if w.cfg.Dedicated {
		return fmt.Errorf("vault %s: applies to the shared key, not in dedicated-key mode", op)
	}
	return nil
}

func (w *VaultWrapper) path(parts ...string) string {
	return w.cfg.Mount + "/" + strings.Join(parts, "/")
}

// readKey reads transit/keys/name; a missing key is ErrVaultKeyMissing.
func (w *VaultWrapper) readKey(ctx context.Context, op, name string) (*vault.Secret, error) {
	s, err := w.c.Logical().ReadWithContext(ctx, w.path("keys", name))
	if err != nil {
		return nil, w.fail(op, name, err)
	}
	if s == nil || s.Data == nil {
		return nil, &VaultError{Op: op, Key: name, StatusCode: http.StatusNotFound, Err: ErrVaultKeyMissing}
	}
	return s, nil
}

// fail turns a Vault client error into a *VaultError with its sentinel.
func (w *VaultWrapper) fail(op, key string, err error) error {
	e := &VaultError{Op: op, Key: key, Cause: err}
	var re *vault.ResponseError
	if errors.As(err, &re) {
		e.StatusCode = re.StatusCode
		for _, m := range re.Errors {
			if m = w.redact(m); m != "" {
				e.Messages = append(e.Messages, m)
			}
		}
		text := strings.ToLower(strings.Join(re.Errors, " "))
		switch {
		case re.StatusCode == http.StatusServiceUnavailable && strings.Contains(text, "sealed"):
			e.Err = ErrVaultSealed
		case re.StatusCode == http.StatusForbidden || re.StatusCode == http.StatusUnauthorized:
			e.Err = ErrVaultDenied
		case re.StatusCode == http.StatusNotFound,
			strings.Contains(text, "key not found"), strings.Contains(text, "no such key"),
			strings.Contains(text, "no existing key"):
			e.Err = ErrVaultKeyMissing
		case strings.Contains(text, "disallowed by policy (too old)"), strings.Contains(text, "version is too old"):
			e.Err = ErrVaultKeyVersionRetired
		case re.StatusCode == http.StatusBadGateway, re.StatusCode == http.StatusServiceUnavailable,
			re.StatusCode == http.StatusGatewayTimeout:
			e.Err = ErrVaultUnreachable
		}
		return e
	}
	if errors.Is(err, context.Canceled) {
		return e
	}
	e.Err = ErrVaultUnreachable
	return e
}

// redact removes the token from a message of Vault's, should one ever
// repeat it, and flattens it to one line. Transit messages do not echo
// plaintexts or ciphertexts.
func (w *VaultWrapper) redact(m string) string {
	m = strings.ReplaceAll(m, w.cfg.Token, "[token]")
	return strings.Join(strings.Fields(m), " ")
}

func stringField(s *vault.Secret, name string) (string, error) {
	if s == nil || s.Data == nil {
		return "", errors.New("empty response")
	}
	v, ok := s.Data[name].(string)
	if !ok || v == "" {
		return "", fmt.Errorf("response has no %s", name)
	}
	return v, nil
}

func intField(s *vault.Secret, name string) (int, error) {
	switch v := s.Data[name].(type) {
	case nil:
		return 0, nil
	case float64:
		return int(v), nil
	case interface{ Int64() (int64, error) }: // json.Number
		n, err := v.Int64()
		if err != nil {
			return 0, fmt.Errorf("response field %s: %w", name, err)
		}
		return int(n), nil
	default:
		return 0, fmt.Errorf("response field %s has type %T", name, v)
	}
}
