package keys

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
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

// countingKeyring returns a keyring over an in-memory store that counts its
// reads by id, with the age KEK of dir.
func countingKeyring(t *rapid.T, dir string) (*AgeWrapper, *countingStore, *Keyring) {
	w, err := LoadOrCreateAgeIdentity(filepath.Join(dir, "kek.age"))
	if err != nil {
		t.Fatal(err)
	}
	st := &countingStore{vaultTestStore: &vaultTestStore{}}
	return w, st, NewKeyring(KeyringConfig{Store: st, Wrapper: w})
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
		w, st, ring := countingKeyring(t, dir)
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

// TestPurgeMemoryModel caches chains and index keys of two memories,
// destroys random keys of the first (as an erasure of a user, a scope or
// the memory does) and purges that memory alone. The first memory then
// answers as a keyring that never cached anything (the same grain keys,
// erased where a key was destroyed, the same scopes to query); the second
// answers from its cache without a read.
func TestPurgeMemoryModel(t *testing.T) {
	dir := t.TempDir()
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		w, st, ring := countingKeyring(t, dir)
		chains := map[string][]*Chain{}
		for i := range rapid.IntRange(2, 16).Draw(t, "grains") {
			m := rapid.SampledFrom([]string{"m1", "m2"}).Draw(t, fmt.Sprintf("memory%d", i))
			scope := rapid.SampledFrom([]string{"", "a", "a/b", "d"}).Draw(t, fmt.Sprintf("scope%d", i))
			user := rapid.SampledFrom([]string{"", "u1", "u2", "u3"}).Draw(t, fmt.Sprintf("user%d", i))
			c, err := ring.WriteChain(ctx, m, scope, user)
			if err != nil {
				t.Fatal(err)
			}
			chains[m] = append(chains[m], c)
		}
		for _, m := range []string{"m1", "m2"} {
			if _, _, err := ring.IndexKeys(ctx, m, "", false); err != nil {
				t.Fatal(err)
			}
			if _, _, err := ring.UserRefAt(ctx, m, "u1", false); err != nil && len(chains[m]) > 0 {
				t.Fatal(err)
			}
			for _, c := range chains[m] {
				if _, err := ring.GrainKey(ctx, c.ID); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, r := range st.all() {
			if r.Memory == "m1" && rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("destroy%d", r.ID)) == 0 {
				st.destroy(r.ID)
			}
		}
		ring.PurgeMemory("m1")
		if left := ring.cachedOf("m1"); left != 0 {
			t.Fatalf("%d cache entries of m1 left after its purge", left)
		}

		fresh := NewKeyring(KeyringConfig{Store: st, Wrapper: w})
		for _, c := range chains["m1"] {
			got, err := ring.GrainKey(ctx, c.ID)
			want, werr := fresh.GrainKey(ctx, c.ID)
			if grains.ErrorCode(err) != grains.ErrorCode(werr) || !bytes.Equal(got, want) {
				t.Fatalf("m1 chain %s after the purge: %x, %v; a fresh keyring: %x, %v", c.ID, got, err, want, werr)
			}
		}
		idx, _, err := ring.IndexKeys(ctx, "m1", "", false)
		widx, _, werr := fresh.IndexKeys(ctx, "m1", "", true)
		if err != nil || werr != nil || len(idx) != len(widx) {
			t.Fatalf("m1 index keys after the purge: %d, %v; a fresh keyring: %d, %v", len(idx), err, len(widx), werr)
		}
		for i := range idx {
			if idx[i].Scope != widx[i].Scope || !bytes.Equal(idx[i].Index.Value("subject", "x"), widx[i].Index.Value("subject", "x")) {
				t.Fatalf("m1 index key %d: scope %q, a fresh keyring's %q", i, idx[i].Scope, widx[i].Scope)
			}
		}
		before := st.byID.Load()
		for _, c := range chains["m2"] {
			if _, err := ring.GrainKey(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := ring.IndexKeys(ctx, "m2", "", false); err != nil {
			t.Fatal(err)
		}
		if st.byID.Load() != before {
			t.Fatal("purging m1 dropped m2's cached keys")
		}
	})
}

// cachedOf counts the entries of k's caches that belong to memory.
func (k *Keyring) cachedOf(memory string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, e := range k.byID.items {
		if e.Value.(*entry[int64, Record]).v.Memory == memory {
			n++
		}
	}
	for name := range k.byName.items {
		if strings.HasPrefix(name, memory+"\x00") {
			n++
		}
	}
	for _, e := range k.chains.items {
		if e.Value.(*entry[string, *Chain]).v.memory == memory {
			n++
		}
	}
	for name := range k.indexSets.items {
		if strings.HasPrefix(name, memory+"\x00") {
			n++
		}
	}
	if _, ok := k.memGens.items[memory]; ok {
		n++
	}
	return n
}

// BenchmarkPurgeMemory purges one memory out of full caches (10,000 keys
// by id and by name, 10,000 chains, half of them the purged memory's).
func BenchmarkPurgeMemory(b *testing.B) {
	ring := NewKeyring(KeyringConfig{})
	for b.Loop() {
		b.StopTimer()
		for i := range int64(10000) {
			m := []string{"m1", "m2"}[i%2]
			r := Record{ID: i + 1, Memory: m, Kind: KindUser, Name: fmt.Sprint(i), Wrapped: NewDataKey()}
			ring.cache(r, nameKey(m, KindUser, r.Name))
			ring.chains.put(fmt.Sprint("#", i), &Chain{memory: m})
		}
		b.StartTimer()
		ring.PurgeMemory("m1")
	}
}
