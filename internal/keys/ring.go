package keys

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lethe-io/lethe/internal/crashpoint"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/index"
)

// Chain is the resolved key chain of one (memory, scope, user): what a grain
// is sealed under.
type Chain struct {
	// ID lists the key record ids, memory first, then scope prefixes, then
	// the user's key: "1.4.9.12". It is stored beside the grain and bound
	// into its associated data.
	ID string
	// GrainKey seals grains of this chain.
	GrainKey []byte
	// IndexKey makes blind tokens for the chain's scope.
	IndexKey []byte
	// Index is IndexKey prepared (nil where IndexKey is).
	Index *index.Key
	// UserRef is HMAC(memory user-ref key, user id), 16 bytes; nil without a user.
	UserRef []byte
	// UserKeyID is the id of the user's key, 0 without a user.
	UserKeyID int64
	// memory is the memory the chain's keys belong to (PurgeMemory).
	memory string
}

// ScopeIndex is the index key of one scope, prepared: what a query makes
// its tokens with.
type ScopeIndex struct {
	Scope string
	Index *index.Key
}

// Keyring resolves, creates and caches data keys. It is safe for concurrent
// use. Unwrapped keys stay in a bounded cache; PurgeMemory empties a
// memory's part of it (Purge all of it), and callers purge a memory when any
// of its keys may have been destroyed.
type Keyring struct {
	store   Store
	wrapper Wrapper
	now     func() time.Time

	mu     sync.Mutex
	byID   *lru[int64, Record] // with Wrapped replaced by the unwrapped key
	byName *lru[string, int64] // memory/kind/name -> id of the live key
	chains *lru[string, *Chain]
	// indexSets caches IndexKeys' answers by memory and prefix.
	indexSets *lru[string, indexSet]
	// memGens is, per memory, the scope generation its cached memory key
	// was last checked at (UserRefAt).
	memGens *lru[string, int64]
}

// indexSet is an answer of IndexKeys and the scope generation it was read at.
type indexSet struct {
	keys []ScopeIndex
	gen  int64
}

// KeyringConfig configures a Keyring.
type KeyringConfig struct {
	Store   Store
	Wrapper Wrapper
	// CacheSize bounds each cache (default 10,000 entries).
	CacheSize int
}

// NewKeyring returns a Keyring.
func NewKeyring(cfg KeyringConfig) *Keyring {
	n := cfg.CacheSize
	if n <= 0 {
		n = 10000
	}
	return &Keyring{store: cfg.Store, wrapper: cfg.Wrapper, now: time.Now,
		byID: newLRU[int64, Record](n), byName: newLRU[string, int64](n), chains: newLRU[string, *Chain](n),
		indexSets: newLRU[string, indexSet](n), memGens: newLRU[string, int64](n)}
}

// Purge drops every cached key. After it returns, no destroyed key is used
// again by this Keyring.
func (k *Keyring) Purge() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.byID.purge()
	k.byName.purge()
	k.chains.purge()
	k.indexSets.purge()
	k.memGens.purge()
}

// PurgeMemory drops every cached key of memory, and what was derived from
// them: an erasure destroys keys of one memory only (every key belongs to
// one memory, and a chain's keys to the same one), so the other memories'
// keys stay cached. After it returns, no destroyed key of memory is used
// again by this Keyring. It walks the caches under the keyring's lock:
// 2.2 ms for 30,000 entries here (BenchmarkPurgeMemory), once per
// erasure, against a cold cache for every memory (a recall that unwraps
// its keys again, see BenchmarkRecallCold).
func (k *Keyring) PurgeMemory(memory string) {
	prefix := memory + "\x00" // memory names hold no NUL (grains.ValidateMemory)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.byID.removeIf(func(_ int64, r Record) bool { return r.Memory == memory })
	k.byName.removeIf(func(n string, _ int64) bool { return strings.HasPrefix(n, prefix) })
	k.chains.removeIf(func(_ string, c *Chain) bool { return c.memory == memory })
	k.indexSets.removeIf(func(n string, _ indexSet) bool { return strings.HasPrefix(n, prefix) })
	k.memGens.removeIf(func(m string, _ int64) bool { return m == memory })
}

func nameKey(memory string, kind Kind, name string) string {
	return memory + "\x00" + string(kind) + "\x00" + name
}

// key returns the live key (memory, kind, name) unwrapped, creating it if
// create is set; with create unset and no key, it returns ErrNoKey. under
// is the id of the memory key a user key's name derives from (0 for other
// kinds); see Record.Under.
func (k *Keyring) key(ctx context.Context, memory string, kind Kind, name string, create bool, under int64) (Record, error) {
	nk := nameKey(memory, kind, name)
	if r, ok := k.cached(nk); ok {
		return r, nil
	}
	r, err := k.store.LiveKey(ctx, memory, kind, name)
	if errors.Is(err, ErrNoKey) && create {
		fresh, dk, werr := k.newKey(ctx, memory, kind, name)
		if werr != nil {
			return Record{}, werr
		}
		fresh.Under = under
		if r, err = k.store.CreateKey(ctx, fresh); err == nil {
			crashpoint.Hit(crashpoint.KeyCreated)
			return k.adopt(ctx, r, fresh.Fingerprint, dk)
		}
		k.purgeIfErased(memory, err)
	}
	if err != nil {
		return Record{}, err
	}
	return k.unwrapAndCache(ctx, r, nk)
}

// purgeIfErased empties memory's caches when err says a cached key was
// erased by another instance, so that a retry resolves live keys.
func (k *Keyring) purgeIfErased(memory string, err error) {
	if grains.ErrorCode(err) == grains.CodeErased {
		k.PurgeMemory(memory)
	}
}

// cached returns the cached key named nk.
func (k *Keyring) cached(nk string) (Record, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if id, ok := k.byName.get(nk); ok {
		return k.byID.get(id)
	}
	return Record{}, false
}

// newKey makes a data key for (memory, kind, name), wrapped by the KEK,
// and returns its record to store and the key itself.
func (k *Keyring) newKey(ctx context.Context, memory string, kind Kind, name string) (Record, []byte, error) {
	dk := NewDataKey()
	fp := Fingerprint(dk)
	wrapped, err := k.wrapper.Wrap(ctx, Ref{Memory: memory, Kind: kind, Fingerprint: fp}, dk)
	if err != nil {
		return Record{}, nil, grains.Wrap(grains.CodeUnavailable, "key-encryption key unavailable", err)
	}
	return Record{Memory: memory, Kind: kind, Name: name, Wrapped: wrapped, Fingerprint: fp, CreatedAt: k.now().UTC()}, dk, nil
}

// newKeys is newKey for each of names, wrapped with one WrapBatch; it
// fills fresh and dks.
func (k *Keyring) newKeys(ctx context.Context, bw BatchWrapper, memory string, under int64, names []string, fresh []Record, dks [][]byte) error {
	refs := make([]Ref, len(names))
	for i := range names {
		dks[i] = NewDataKey()
		refs[i] = Ref{Memory: memory, Kind: KindUser, Fingerprint: Fingerprint(dks[i])}
	}
	wrapped, err := bw.WrapBatch(ctx, refs, dks)
	if err != nil {
		return grains.Wrap(grains.CodeUnavailable, "key-encryption key unavailable", err)
	}
	now := k.now().UTC()
	for i, n := range names {
		fresh[i] = Record{Memory: memory, Kind: KindUser, Name: n, Wrapped: wrapped[i], Fingerprint: refs[i].Fingerprint, CreatedAt: now, Under: under}
	}
	return nil
}

// adopt caches live, the stored key after creating the key with
// fingerprint fp and value dk: ours if the fingerprints match (no need to
// unwrap what we just wrapped), else another writer's, unwrapped.
func (k *Keyring) adopt(ctx context.Context, live Record, fp string, dk []byte) (Record, error) {
	nk := nameKey(live.Memory, live.Kind, live.Name)
	if live.Fingerprint != fp {
		return k.unwrapAndCache(ctx, live, nk)
	}
	live.Wrapped = dk
	k.cache(live, nk)
	return live, nil
}

func (k *Keyring) cache(r Record, nk string) {
	k.mu.Lock()
	k.byID.put(r.ID, r)
	if nk != "" {
		k.byName.put(nk, r.ID)
	}
	k.mu.Unlock()
}

func (k *Keyring) unwrapAndCache(ctx context.Context, r Record, nk string) (Record, error) {
	if !r.Live() {
		return Record{}, grains.Errorf(grains.CodeErased, "a key of this grain's chain was erased")
	}
	dk, err := k.wrapper.Unwrap(ctx, refOf(r), r.Wrapped)
	if err != nil {
		return Record{}, grains.Wrap(grains.CodeUnavailable, "key-encryption key unavailable", err)
	}
	return k.cacheChecked(r, dk, nk)
}

// refOf is the reference the KEK is given for r.
func refOf(r Record) Ref { return Ref{Memory: r.Memory, Kind: r.Kind, Fingerprint: r.Fingerprint} }

// cacheChecked checks that dk, the unwrapped key of r, matches r's
// fingerprint, and caches r with it (by name too, when nk is set).
func (k *Keyring) cacheChecked(r Record, dk []byte, nk string) (Record, error) {
	if !hmac.Equal([]byte(Fingerprint(dk)), []byte(r.Fingerprint)) {
		return Record{}, grains.Errorf(grains.CodeInternal, "data key %d does not match its fingerprint", r.ID)
	}
	r.Wrapped = dk
	k.cache(r, nk)
	return r, nil
}

// UserRef returns the blind reference of userID in memory, or ErrNoKey when
// the memory has no key (so it holds no grains). It first checks that the
// cached memory key is still the memory's live key (see Revalidate), so a
// user's erasure, hold or export on this instance names the user's key
// even after another instance erased and re-created the memory.
func (k *Keyring) UserRef(ctx context.Context, memory, userID string) ([]byte, error) {
	if err := k.Revalidate(ctx, memory); err != nil {
		return nil, err
	}
	mk, err := k.key(ctx, memory, KindMemory, "", false, 0)
	if err != nil {
		return nil, err
	}
	return userRef(mk.Wrapped, userID), nil
}

// UserRefAt is UserRef for queries: unless fresh is set, the answer may
// come from the cache, and gen is the memory's scope generation the cached
// memory key was checked at. The caller checks, in its query's snapshot,
// that the generation is still gen (an erasure of the memory, and the
// creation of its new key, move it) and calls again with fresh set if not.
func (k *Keyring) UserRefAt(ctx context.Context, memory, userID string, fresh bool) (ref []byte, gen int64, err error) {
	if !fresh {
		k.mu.Lock()
		g, ok := k.memGens.get(memory)
		k.mu.Unlock()
		if mk, hit := k.cached(nameKey(memory, KindMemory, "")); ok && hit {
			return userRef(mk.Wrapped, userID), g, nil
		}
	}
	if gen, err = k.store.ScopeGeneration(ctx, memory); err != nil {
		return nil, 0, err
	}
	if ref, err = k.UserRef(ctx, memory, userID); err != nil {
		return nil, gen, err
	}
	k.mu.Lock()
	k.memGens.put(memory, gen)
	k.mu.Unlock()
	return ref, gen, nil
}

// Revalidate reads memory's live memory key and, if the cache holds
// another one (another instance erased the memory, and maybe created a new
// key since), empties memory's caches: every key derived under the old one
// is stale. One indexed read.
func (k *Keyring) Revalidate(ctx context.Context, memory string) error {
	cached, hit := k.cached(nameKey(memory, KindMemory, ""))
	if !hit {
		return nil
	}
	live, err := k.store.LiveKey(ctx, memory, KindMemory, "")
	if errors.Is(err, ErrNoKey) || (err == nil && live.ID != cached.ID) {
		k.PurgeMemory(memory)
		return nil
	}
	return err
}

func userRef(memoryKey []byte, userID string) []byte {
	m := hmac.New(sha256.New, derive("lethe/user-ref/v1", memoryKey))
	m.Write([]byte(userID))
	return m.Sum(nil)[:16]
}

// WarmUsers loads or creates the user keys of userIDs in memory, whose
// memory key must exist: the live ones in one read, the missing ones
// wrapped concurrently (8 at a time) and stored in one transaction. A batch
// that brings 1,000 new users thus commits once instead of 1,000 times. It
// does nothing when the store is not a BatchStore: WriteChain then creates
// each key on its own.
func (k *Keyring) WarmUsers(ctx context.Context, memory string, userIDs []string) error {
	bs, ok := k.store.(BatchStore)
	if !ok {
		return nil
	}
	mk, err := k.key(ctx, memory, KindMemory, "", false, 0)
	if err != nil {
		return err
	}
	var names []string
	seen := make(map[string]bool, len(userIDs))
	for _, u := range userIDs {
		name := hex.EncodeToString(userRef(mk.Wrapped, u))
		if seen[name] {
			continue
		}
		seen[name] = true
		if _, hit := k.cached(nameKey(memory, KindUser, name)); !hit {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	found, err := bs.LiveKeys(ctx, memory, KindUser, names)
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(found))
	for _, r := range found {
		have[r.Name] = true
	}
	var missing []string
	for _, n := range names {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	fresh := make([]Record, len(missing))
	dks := make([][]byte, len(missing))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, r := range found {
		g.Go(func() error {
			_, err := k.unwrapAndCache(gctx, r, nameKey(memory, KindUser, r.Name))
			return err
		})
	}
	if bw, ok := k.wrapper.(BatchWrapper); ok && len(missing) > 1 {
		// One KEK call for the batch's new keys (Vault transit batch_input).
		g.Go(func() error { return k.newKeys(gctx, bw, memory, mk.ID, missing, fresh, dks) })
	} else {
		for i, n := range missing {
			g.Go(func() error {
				var err error
				fresh[i], dks[i], err = k.newKey(gctx, memory, KindUser, n)
				fresh[i].Under = mk.ID
				return err
			})
		}
	}
	if err := g.Wait(); err != nil || len(fresh) == 0 {
		return err
	}
	live, err := bs.CreateKeys(ctx, fresh)
	if err != nil {
		k.purgeIfErased(memory, err)
		return err
	}
	crashpoint.Hit(crashpoint.KeyCreated)
	for i, r := range live {
		if _, err := k.adopt(ctx, r, fresh[i].Fingerprint, dks[i]); err != nil {
			return err
		}
	}
	return nil
}

func writeChainKey(memory, scope, userID string) string {
	return memory + "\x00" + scope + "\x00" + userID
}

// HasWriteChain reports whether WriteChain(memory, scope, userID) would be
// answered from the cache.
func (k *Keyring) HasWriteChain(memory, scope, userID string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.chains.get(writeChainKey(memory, scope, userID))
	return ok
}

// WriteChain returns the chain for writing a grain of (memory, scope,
// userID), creating any key that does not exist yet.
func (k *Keyring) WriteChain(ctx context.Context, memory, scope, userID string) (*Chain, error) {
	ck := writeChainKey(memory, scope, userID)
	k.mu.Lock()
	c, ok := k.chains.get(ck)
	k.mu.Unlock()
	if ok {
		return c, nil
	}
	mk, err := k.key(ctx, memory, KindMemory, "", true, 0)
	if err != nil {
		return nil, err
	}
	ids := []string{strconv.FormatInt(mk.ID, 10)}
	material := [][]byte{mk.Wrapped}
	for _, p := range grains.ScopePrefixes(scope) {
		sk, err := k.key(ctx, memory, KindScope, p, true, 0)
		if err != nil {
			return nil, err
		}
		ids = append(ids, strconv.FormatInt(sk.ID, 10))
		material = append(material, sk.Wrapped)
	}
	scopeID := strings.Join(ids, ".")
	c = &Chain{IndexKey: derive("lethe/index-key/v1\x00"+scopeID, material...), memory: memory}
	c.Index = index.NewKey(c.IndexKey)
	if userID != "" {
		c.UserRef = userRef(mk.Wrapped, userID)
		uk, err := k.key(ctx, memory, KindUser, hex.EncodeToString(c.UserRef), true, mk.ID)
		if err != nil {
			return nil, err
		}
		ids = append(ids, strconv.FormatInt(uk.ID, 10))
		material = append(material, uk.Wrapped)
		c.UserKeyID = uk.ID
	}
	c.ID = strings.Join(ids, ".")
	c.GrainKey = derive("lethe/grain-key/v1\x00"+c.ID, material...)
	k.mu.Lock()
	k.chains.put(ck, c)
	k.mu.Unlock()
	return c, nil
}

// GrainKey returns the key grains of chain id were sealed under, or an error
// with code erased if any key of the chain was destroyed.
func (k *Keyring) GrainKey(ctx context.Context, chainID string) ([]byte, error) {
	k.mu.Lock()
	c, ok := k.chains.get("#" + chainID)
	k.mu.Unlock()
	if ok {
		return c.GrainKey, nil
	}
	ids, err := ParseChainID(chainID)
	if err != nil {
		return nil, err
	}
	var missing []int64
	recs := make([]Record, len(ids))
	k.mu.Lock()
	for i, id := range ids {
		if r, ok := k.byID.get(id); ok {
			recs[i] = r
		} else {
			missing = append(missing, id)
		}
	}
	k.mu.Unlock()
	if len(missing) > 0 {
		got, err := k.store.KeysByID(ctx, missing)
		if err != nil {
			return nil, err
		}
		byID := make(map[int64]Record, len(got))
		for _, r := range got {
			byID[r.ID] = r
		}
		for i, id := range ids {
			if recs[i].ID != 0 {
				continue
			}
			r, ok := byID[id]
			if !ok {
				return nil, grains.Errorf(grains.CodeErased, "a key of this grain's chain was erased")
			}
			if recs[i], err = k.unwrapAndCache(ctx, r, ""); err != nil {
				return nil, err
			}
		}
	}
	material := make([][]byte, len(recs))
	for i, r := range recs {
		material[i] = r.Wrapped
	}
	gk := derive("lethe/grain-key/v1\x00"+chainID, material...)
	k.mu.Lock()
	k.chains.put("#"+chainID, &Chain{ID: chainID, GrainKey: gk, memory: recs[0].Memory})
	k.mu.Unlock()
	return gk, nil
}

// WarmChains readies the keys of the chains chainIDs for GrainKey: the keys
// none of them has in the cache are read in one KeysByID and unwrapped (see
// unwrapAll), so that a page of grains by ten users whose keys this process
// has not unwrapped yet (after a start, or after an erasure emptied the
// cache) costs one read instead of ten (one per 500 keys), and with Vault
// transit its unwraps overlap. It caches what GrainKey would cache, live
// keys that unwrap and match their fingerprint, and reports nothing: a key
// it does not find, a destroyed one, or one it cannot unwrap is left for
// GrainKey, which reads it again and answers as it always did.
func (k *Keyring) WarmChains(ctx context.Context, chainIDs []string) {
	var missing []int64
	k.mu.Lock()
	for _, chainID := range chainIDs {
		if _, ok := k.chains.get("#" + chainID); ok {
			continue
		}
		ids, err := ParseChainID(chainID)
		if err != nil {
			continue
		}
		for _, id := range ids {
			if _, ok := k.byID.get(id); !ok {
				missing = append(missing, id)
			}
		}
	}
	k.mu.Unlock()
	slices.Sort(missing)
	missing = slices.Compact(missing)
	if len(missing) < 2 {
		return // GrainKey reads one key as cheaply
	}
	for chunk := range slices.Chunk(missing, 500) {
		got, err := k.store.KeysByID(ctx, chunk)
		if err != nil {
			return
		}
		k.unwrapAll(ctx, got)
	}
}

// unwrapAll unwraps and caches (by id only) the live keys of rs that the
// cache does not hold: with a KEK that unwraps in batches (Vault transit's
// shared key) in as few calls as it takes; with the local age KEK one
// after the other, each being about 25 µs of CPU that goroutines on two
// cores did not make shorter (BenchmarkRecallCold); with any other KEK (a
// KMS of the caller's, Vault's dedicated keys) 8 at a time, each unwrap
// being a call to a service. It returns the unwrapped keys of rs by id,
// those the cache held included, so that a caller needing more keys than
// the cache holds does not unwrap each again as the cache evicts them. A
// key that fails is left out: the caller's own path unwraps it again and
// reports the error.
func (k *Keyring) unwrapAll(ctx context.Context, rs []Record) map[int64]Record {
	have := make(map[int64]Record, len(rs))
	var todo []Record
	k.mu.Lock()
	for _, r := range rs {
		if !r.Live() {
			continue
		}
		if c, hit := k.byID.get(r.ID); hit {
			have[r.ID] = c
		} else {
			todo = append(todo, r)
		}
	}
	k.mu.Unlock()
	if len(todo) == 0 {
		return have
	}
	if bu, ok := k.wrapper.(BatchUnwrapper); ok && k.unwrapBatch(ctx, bu, todo, have) {
		return have
	}
	var g errgroup.Group
	var mu sync.Mutex
	_, local := k.wrapper.(*AgeWrapper)
	g.SetLimit(8)
	one := func(r Record) {
		if c, err := k.unwrapAndCache(ctx, r, ""); err == nil {
			mu.Lock()
			have[r.ID] = c
			mu.Unlock()
		}
	}
	for _, r := range todo {
		if local {
			one(r)
			continue
		}
		g.Go(func() error { one(r); return nil })
	}
	_ = g.Wait()
	return have
}

// unwrapBatch unwraps todo (live keys the cache does not hold) with bu in
// as few calls as it takes, caches them, and adds them to have. A key that
// does not unwrap, or does not match its fingerprint, is left out, as
// unwrapAll leaves it. It returns false when bu cannot unwrap these keys
// in batches (dedicated transit keys), and unwrapAll goes on without it.
func (k *Keyring) unwrapBatch(ctx context.Context, bu BatchUnwrapper, todo []Record, have map[int64]Record) bool {
	refs := make([]Ref, len(todo))
	wrapped := make([][]byte, len(todo))
	for i, r := range todo {
		refs[i], wrapped[i] = refOf(r), r.Wrapped
	}
	dks, ok, _ := bu.UnwrapBatch(ctx, refs, wrapped)
	if !ok {
		return false
	}
	for i, dk := range dks {
		if dk == nil {
			continue
		}
		if r, err := k.cacheChecked(todo[i], dk, ""); err == nil {
			have[r.ID] = r
		}
	}
	return true
}

// ParseChainID parses a chain id ("1.4.9").
func ParseChainID(chainID string) ([]int64, error) {
	parts := strings.Split(chainID, ".")
	ids := make([]int64, len(parts))
	for i, p := range parts {
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil || id <= 0 {
			return nil, grains.Errorf(grains.CodeInternal, "corrupt key chain id")
		}
		ids[i] = id
	}
	return ids, nil
}

// IndexKeys returns the index key of every scope at or below prefix that has
// a key (with the root scope "" when prefix is ""): the tokens a query must
// compute. A memory without a key yields none.
//
// gen is the memory's scope generation (Store.ScopeGeneration) read before
// the keys. Unless fresh is set, the answer may come from a cache: the
// caller must then check, in the snapshot its query reads, that the
// generation is still gen (store.Filter.ScopeGen), and call again with
// fresh set if it is not. Empty answers are never cached.
func (k *Keyring) IndexKeys(ctx context.Context, memory, prefix string, fresh bool) (idx []ScopeIndex, gen int64, err error) {
	ck := memory + "\x00" + prefix
	if !fresh {
		k.mu.Lock()
		s, ok := k.indexSets.get(ck)
		k.mu.Unlock()
		if ok {
			return s.keys, s.gen, nil
		}
	}
	if gen, err = k.store.ScopeGeneration(ctx, memory); err != nil {
		return nil, 0, err
	}
	if err = k.Revalidate(ctx, memory); err != nil {
		return nil, 0, err
	}
	if idx, err = k.indexKeys(ctx, memory, prefix); err != nil || len(idx) == 0 {
		return idx, gen, err
	}
	k.mu.Lock()
	k.indexSets.put(ck, indexSet{keys: idx, gen: gen})
	k.mu.Unlock()
	return idx, gen, nil
}

func (k *Keyring) indexKeys(ctx context.Context, memory, prefix string) ([]ScopeIndex, error) {
	mk, err := k.key(ctx, memory, KindMemory, "", false, 0)
	if errors.Is(err, ErrNoKey) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	scopes, err := k.store.ScopeKeys(ctx, memory, prefix)
	if err != nil {
		return nil, err
	}
	var out []ScopeIndex
	if prefix == "" {
		out = append(out, ScopeIndex{Scope: "", Index: index.NewKey(derive("lethe/index-key/v1\x00"+strconv.FormatInt(mk.ID, 10), mk.Wrapped))})
	}
	recs := make(map[string]Record, len(scopes))
	for _, r := range scopes {
		recs[r.Name] = r
	}
	var have map[int64]Record
	if len(scopes) > 1 {
		have = k.unwrapAll(ctx, scopes)
	}
	// A scope's index key derives from every key on its path, so the
	// prefix's ancestors are needed too (a/b needs a).
	prefixes := grains.ScopePrefixes(prefix)
	for _, p := range prefixes[:max(0, len(prefixes)-1)] {
		r, err := k.key(ctx, memory, KindScope, p, false, 0)
		if errors.Is(err, ErrNoKey) {
			return nil, nil // an ancestor has no key: nothing below it exists
		}
		if err != nil {
			return nil, err
		}
		recs[p] = r
	}
	for _, s := range scopes {
		c, err := k.scopeIndex(ctx, mk, s.Name, recs, have)
		if err != nil {
			if grains.ErrorCode(err) == grains.CodeErased {
				continue // a prefix was erased between the two reads: nothing below it is readable
			}
			return nil, err
		}
		out = append(out, ScopeIndex{Scope: s.Name, Index: c})
	}
	return out, nil
}

// scopeIndex returns the index key of scope, derived from mk and the keys
// of the scope's path in recs; unwrapped keys come from have (unwrapAll's
// answer, nil for none), else from the cache, else from the KEK.
func (k *Keyring) scopeIndex(ctx context.Context, mk Record, scope string, recs map[string]Record, have map[int64]Record) (*index.Key, error) {
	prefixes := grains.ScopePrefixes(scope)
	ids := make([]string, 1, len(prefixes)+1)
	ids[0] = strconv.FormatInt(mk.ID, 10)
	for _, p := range prefixes {
		r, ok := recs[p]
		if !ok {
			return nil, grains.Errorf(grains.CodeErased, "a scope key was erased")
		}
		ids = append(ids, strconv.FormatInt(r.ID, 10))
	}
	// Cached by the ids of the path's keys, not by the scope's name: a
	// scope that another instance erased and wrote to again has a new key,
	// and its grains' tokens come from the new index key. (Cached by name,
	// the old index key outlived the fresh read of the scopes' keys, and
	// this instance's queries missed every grain of the scope made again.)
	scopeID := strings.Join(ids, ".")
	ck := "idx\x00" + mk.Memory + "\x00" + scopeID
	k.mu.Lock()
	c, ok := k.chains.get(ck)
	k.mu.Unlock()
	if ok {
		return c.Index, nil
	}
	material := [][]byte{mk.Wrapped}
	for _, p := range prefixes {
		r := recs[p]
		nk := nameKey(mk.Memory, KindScope, p)
		cached, hit := have[r.ID]
		if !hit {
			k.mu.Lock()
			cached, hit = k.byID.get(r.ID)
			k.mu.Unlock()
		}
		if !hit {
			var err error
			if cached, err = k.unwrapAndCache(ctx, r, nk); err != nil {
				return nil, err
			}
		}
		material = append(material, cached.Wrapped)
	}
	ik := derive("lethe/index-key/v1\x00"+scopeID, material...)
	c = &Chain{IndexKey: ik, Index: index.NewKey(ik), memory: mk.Memory}
	k.mu.Lock()
	k.chains.put(ck, c)
	k.mu.Unlock()
	return c.Index, nil
}

// String describes the keyring.
func (k *Keyring) String() string { return fmt.Sprintf("keyring(%v)", k.wrapper) }
