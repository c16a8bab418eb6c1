package keys

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe/internal/grains"
)

// countingStore counts the key reads by id that reach the store.
type countingStore struct {
	*vaultTestStore
	byID atomic.Int64
}

func (s *countingStore) KeysByID(ctx context.Context, ids []int64) ([]Record, error) {
	s.byID.Add(1)
	return s.vaultTestStore.KeysByID(ctx, ids)
}

// destroy marks key id destroyed and drops its wrapped form, as an erasure
// does.
func (s *vaultTestStore) destroy(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.recs[id-1].DestroyedAt = &now
	s.recs[id-1].Wrapped = nil
}

// TestWarmChainsModel writes grains' chains for random users under nested
// scopes, destroys random keys (users', scopes', sometimes the memory's),
// empties the cache, and opens every chain twice: through a keyring that
// warmed the chains first, and through a fresh keyring that did not. Both
// answer the same for every chain (the same grain key, or erased); the
// warmed one reads the store by id once for all the chains, plus once for
// each chain GrainKey has to report erased.
func TestWarmChainsModel(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		w, err := LoadOrCreateAgeIdentity(filepath.Join(dir, "kek.age"))
		if err != nil {
			t.Fatal(err)
		}
		st := &countingStore{vaultTestStore: &vaultTestStore{}}
		ring := NewKeyring(KeyringConfig{Store: st, Wrapper: w})
		scopes := []string{"", "a", "a/b", "a/b/c", "d"}
		var chains []*Chain
		for i := range rapid.IntRange(1, 14).Draw(t, "grains") {
			scope := rapid.SampledFrom(scopes).Draw(t, fmt.Sprintf("scope%d", i))
			user := rapid.SampledFrom([]string{"", "u1", "u2", "u3", "u4", "u5", "u6"}).Draw(t, fmt.Sprintf("user%d", i))
			c, err := ring.WriteChain(ctx, "m", scope, user)
			if err != nil {
				t.Fatal(err)
			}
			chains = append(chains, c)
		}
		all := st.all()
		for _, r := range all {
			if rapid.IntRange(0, 9).Draw(t, fmt.Sprintf("destroy%d", r.ID)) == 0 {
				st.destroy(r.ID)
			}
		}
		ring.Purge()
		ids := make([]string, len(chains))
		for i, c := range chains {
			ids[i] = c.ID
		}
		before := st.byID.Load()
		ring.WarmChains(ctx, ids)
		warmReads := st.byID.Load() - before
		if warmReads > 1 {
			t.Fatalf("WarmChains read the store %d times", warmReads)
		}
		got := make([][]byte, len(chains))
		errs := make([]error, len(chains))
		before = st.byID.Load()
		for i, c := range chains {
			got[i], errs[i] = ring.GrainKey(ctx, c.ID)
		}
		reads := st.byID.Load() - before
		fresh := NewKeyring(KeyringConfig{Store: st, Wrapper: w})
		var erased int64
		for i, c := range chains {
			want, werr := fresh.GrainKey(ctx, c.ID)
			if grains.ErrorCode(errs[i]) != grains.ErrorCode(werr) || !bytes.Equal(got[i], want) {
				t.Fatalf("chain %s: warmed %x, %v; not warmed %x, %v", c.ID, got[i], errs[i], want, werr)
			}
			switch {
			case werr == nil && !bytes.Equal(want, c.GrainKey):
				t.Fatalf("chain %s: grain key %x, written under %x", c.ID, want, c.GrainKey)
			case werr != nil && grains.ErrorCode(werr) != grains.CodeErased:
				t.Fatalf("chain %s: %v", c.ID, werr)
			case werr != nil:
				erased++
			}
		}
		// After a warm-up, only a chain GrainKey reports erased reads the
		// store again (it rereads its missing key); without one (fewer
		// than two keys were missing), one chain reads its key.
		allowed := erased
		if warmReads == 0 {
			allowed++
		}
		if reads > allowed {
			t.Fatalf("%d reads by id after the warm-up for %d chains, %d of them erased", reads, len(chains), erased)
		}
	})
}
