package keys

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"

	vault "github.com/hashicorp/vault/api"

	"github.com/lethe-io/lethe/internal/testenv"
)

// testVault returns a real Vault's address and root token (see
// testenv.Vault for where it comes from), or skips tb (fails it with CI=true).
func testVault(tb testing.TB) (addr, token string) {
	tb.Helper()
	return testenv.Vault(tb)
}

// testVaultClient returns a root client for addr, for test set-up only.
func testVaultClient(tb testing.TB, addr, token string) *vault.Client {
	tb.Helper()
	cfg := vault.DefaultConfig()
	cfg.Address = addr
	cfg.MaxRetries = 0
	c, err := vault.NewClient(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	c.SetToken(token)
	return c
}

// newTransitKey creates a transit key with a random name and deletes it when
// tb ends: the Vault may be shared with other tests and packages, so a test
// that rotates or trims never touches "lethe-kek".
func newTransitKey(tb testing.TB, addr, token string) string {
	tb.Helper()
	name := "lethe-test-" + randHex(8)
	c := testVaultClient(tb, addr, token)
	if _, err := c.Logical().Write("transit/keys/"+name, nil); err != nil {
		tb.Fatalf("create transit key: %v", err)
	}
	tb.Cleanup(func() { deleteTransitKeys(c, "transit/keys/"+name) })
	return name
}

// deleteTransitKeys deletes keys on a best-effort basis (the server may be
// gone by then).
func deleteTransitKeys(c *vault.Client, paths ...string) {
	for _, p := range paths {
		if _, err := c.Logical().Write(p+"/config", map[string]any{"deletion_allowed": true}); err == nil {
			_, _ = c.Logical().Delete(p)
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// vaultTestStore is an in-memory Store: a fake of the storage port, enough
// for the Keyring (the real store and its conformance tests live in
// internal/store).
type vaultTestStore struct {
	mu   sync.Mutex
	recs []Record // index i holds id i+1
}

var _ Store = (*vaultTestStore)(nil)

func (s *vaultTestStore) LiveKey(_ context.Context, memory string, kind Kind, name string) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.recs {
		if r.Memory == memory && r.Kind == kind && r.Name == name && r.Live() {
			return cloneRecord(r), nil
		}
	}
	return Record{}, ErrNoKey
}

func (s *vaultTestStore) CreateKey(_ context.Context, r Record) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.recs {
		if x.Memory == r.Memory && x.Kind == r.Kind && x.Name == r.Name && x.Live() {
			return cloneRecord(x), nil
		}
	}
	r.ID = int64(len(s.recs) + 1)
	s.recs = append(s.recs, cloneRecord(r))
	return r, nil
}

func (s *vaultTestStore) KeysByID(_ context.Context, ids []int64) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, id := range ids {
		if id >= 1 && int(id) <= len(s.recs) {
			out = append(out, cloneRecord(s.recs[id-1]))
		}
	}
	return out, nil
}

func (s *vaultTestStore) ScopeKeys(_ context.Context, memory, prefix string) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, r := range s.recs {
		if r.Memory == memory && r.Kind == KindScope && r.Live() &&
			(prefix == "" || r.Name == prefix || strings.HasPrefix(r.Name, prefix+"/")) {
			out = append(out, cloneRecord(r))
		}
	}
	return out, nil
}

// ScopeGeneration counts every record, which is enough for a generation:
// it grows whenever a key is created (destruction is not needed here).
func (s *vaultTestStore) ScopeGeneration(context.Context, string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.recs)), nil
}

// all returns every record, live or not.
func (s *vaultTestStore) all() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, len(s.recs))
	for i, r := range s.recs {
		out[i] = cloneRecord(r)
	}
	return out
}

func cloneRecord(r Record) Record {
	r.Wrapped = slices.Clone(r.Wrapped)
	return r
}
