package lethe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/testenv"
)

// TestModel is the reference-model test of issue 12: random sequences of
// every call that writes, forgets, erases, holds, archives, purges or
// exports, on two library instances sharing one store (SQLite, and
// PostgreSQL), with restarts, and after every step every read (get, recall
// with each filter, history, export), every call's answer and the audit
// log's size are compared with an in-memory model of what must be visible.
// Users, subjects, namespaces and scopes come from small pools (with "no
// user", NFC and NFD spellings, nested scopes) so that collisions happen.
//
// Its length is rapid's: by default 100 sequences of up to 30 steps per
// store (go test -run TestModel); longer with
// go test -run TestModel -rapid.checks=2000 -rapid.steps=100 (see README).
// A failure is shrunk to a short sequence of steps, printed with the
// failure.
func TestModel(t *testing.T) {
	pol := policy(t, "version: 1\nrisk:\n  compress_at: 0\n  drop_at: 200\n")
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			cfg := lethe.Config{DataDir: t.TempDir(), ProofWait: time.Millisecond, Policy: pol}
			if b.name == "postgres" {
				cfg.PostgresDSN = testenv.Postgres(t)
			}
			h := &harness{cfg: cfg}
			h.dbs[0], h.dbs[1] = openDB(t, cfg), openDB(t, cfg)
			t.Cleanup(func() {
				collectLeaves(t, h.dbs[0])
				for _, db := range h.dbs {
					db.Close()
				}
			})
			for _, db := range h.dbs {
				db.PauseCleaner()
			}
			id, err := age.GenerateX25519Identity()
			if err != nil {
				t.Fatal(err)
			}
			h.id = id
			start, steps := time.Now(), 0
			rapid.Check(t, func(rt *rapid.T) {
				h.n++
				m := &machine{h: h, memory: fmt.Sprintf("m%d", h.n), grains: map[string]*mgrain{},
					users: map[string]bool{}, scopes: map[string]bool{}, holds: map[string]lethe.HoldSpec{}, gens: map[string]int{}, steps: &steps}
				m.audit = m.auditSize(rt)
				rt.Repeat(rapid.StateMachineActions(m))
			})
			t.Logf("%s: %d steps in %d sequences, %v", b.name, steps, h.n, time.Since(start).Round(time.Millisecond))
		})
	}
}

// harness holds what outlives one sequence: the two instances.
type harness struct {
	cfg lethe.Config
	dbs [2]*lethe.DB
	id  *age.X25519Identity
	n   int
}

// mgrain is the model of one grain row.
type mgrain struct {
	hash       string
	g          lethe.Grain // as stored: NFC, defaults filled
	supersedes string
	by         string // superseded_by
	archived   bool
	alive      bool   // readable: no key of its chain destroyed
	present    bool   // its row exists (alive, or erased and not yet cleaned)
	index      string // the index key its blind tokens were made with (machine.indexOf)
	byUser     bool   // made unreadable by a user erasure
}

// machine is the model of one memory, and the rapid state machine.
type machine struct {
	h      *harness
	memory string
	grains map[string]*mgrain
	order  []string // hashes in write order
	users  map[string]bool
	scopes map[string]bool
	memKey bool
	gens   map[string]int // how many times each key was made: the memory's (memGen), each scope's
	holds  map[string]lethe.HoldSpec
	audit  uint64
	steps  *int
}

var (
	poolUsers    = []string{"", "", "u1", "u2", "Jos\u00e9", "Jose\u0301"}
	poolSubjects = []string{"ada", "Ada", "Jos\u00e9", "Jose\u0301"}
	poolObjects  = []string{"tea", "paris"}
	poolScopes   = []string{"", "a", "a/b", "a/b/c", "d"}
	// poolNamespaces: "" is the default namespace.
	poolNamespaces = []string{"", "", "n"}
	poolTypes      = []string{"fact", "fact", "caveat", "state"}
	poolAges       = []float64{0, 0, 60, 3000}
)

func nfc(s string) string { return norm.NFC.String(s) }

func (m *machine) db(t *rapid.T) *lethe.DB { return m.h.dbs[rapid.IntRange(0, 1).Draw(t, "instance")] }

// auditSize is the log's weight (see AuditWeight): the keys created, one
// per key.create fingerprint, and the other events, one each.
func (m *machine) auditSize(t *rapid.T) uint64 {
	n, err := m.h.dbs[0].AuditWeight(context.Background())
	if err != nil {
		t.Fatalf("audit size: %v", err)
	}
	return n
}

func drawGrain(t *rapid.T, memory string) lethe.Grain {
	g := lethe.Grain{Memory: memory, Type: rapid.SampledFrom(poolTypes).Draw(t, "type"),
		Subject: rapid.SampledFrom(poolSubjects).Draw(t, "subject"), Relation: "likes",
		Object: rapid.SampledFrom(poolObjects).Draw(t, "object"), UserID: rapid.SampledFrom(poolUsers).Draw(t, "user"),
		Scope:      rapid.SampledFrom(poolScopes).Draw(t, "scope"),
		Namespace:  rapid.SampledFrom(poolNamespaces).Draw(t, "namespace"),
		Importance: rapid.SampledFrom([]float64{0.2, 0.2, 0.95}).Draw(t, "importance")}
	if rapid.Bool().Draw(t, "tagged") {
		g.Tags = []string{"x"}
	}
	if age := rapid.SampledFrom(poolAges).Draw(t, "age_days"); age > 0 {
		g.CreatedAt = time.Now().Add(-time.Duration(age * 24 * float64(time.Hour)))
	}
	return g
}

// stored is g as the library stores it.
func stored(g lethe.Grain) lethe.Grain {
	g.Subject, g.Object, g.UserID = nfc(g.Subject), nfc(g.Object), nfc(g.UserID)
	if g.Namespace == "" {
		g.Namespace = grains.DefaultNamespace
	}
	return g
}

// dedupKey is what makes two grains the same grain (dedup material, with
// the namespace, and scope).
func dedupKey(g lethe.Grain) string {
	return strings.Join([]string{g.Scope, g.Namespace, g.Type, g.Subject, g.Relation, g.Object, g.Content, g.UserID, strings.Join(g.Tags, ",")}, "\x00")
}

func prefixes(scope string) []string {
	if scope == "" {
		return nil
	}
	parts := strings.Split(scope, "/")
	out := make([]string, len(parts))
	for i := range parts {
		out[i] = strings.Join(parts[:i+1], "/")
	}
	return out
}

// ensureKeys models the data keys a write under (scope, user) creates,
// and returns how many (each is a key.create event).
func (m *machine) ensureKeys(scope, user string) uint64 {
	n := uint64(0)
	if !m.memKey {
		m.memKey = true
		m.gens[memGen]++
		n++
	}
	for _, p := range prefixes(scope) {
		if !m.scopes[p] {
			m.scopes[p] = true
			m.gens[p]++
			n++
		}
	}
	if user != "" && !m.users[user] {
		m.users[user] = true
		n++
	}
	return n
}

// live returns the alive grain that g would repeat, if any.
func (m *machine) live(g lethe.Grain) *mgrain {
	k := dedupKey(g)
	for _, h := range m.order {
		x := m.grains[h]
		if x.alive && x.by == "" && dedupKey(x.g) == k {
			return x
		}
	}
	return nil
}

// memGen is the memory key's entry in machine.gens.
const memGen = "\x00memory"

// indexOf names the index key a grain written now in scope gets: it is
// derived from the memory key and every prefix's scope key, so a scope or
// memory erasure (a new key after it) changes it, and a user erasure does
// not.
func (m *machine) indexOf(scope string) string {
	id := fmt.Sprint(m.gens[memGen])
	for _, p := range prefixes(scope) {
		id += fmt.Sprintf("/%d", m.gens[p])
	}
	return id
}

// dropDead models the deletion, at a write, of erased rows the write
// repeats: rows with its dedup token, which the store finds by that token,
// so only rows whose tokens were made with the index key the write uses.
// An erased row of an erased scope or memory keeps its place until the
// cleaner.
func (m *machine) dropDead(g lethe.Grain) {
	k, index := dedupKey(g), m.indexOf(g.Scope)
	for _, x := range m.grains {
		if x.present && !x.alive && x.by == "" && dedupKey(x.g) == k && x.index == index {
			x.present = false
		}
	}
}

func (m *machine) insert(g lethe.Grain, hash string) {
	if _, ok := m.grains[hash]; ok {
		panic("model: hash reused " + hash)
	}
	m.grains[hash] = &mgrain{hash: hash, g: g, alive: true, present: true, index: m.indexOf(g.Scope)}
	m.order = append(m.order, hash)
}

func (m *machine) step() { *m.steps++ }

// Add writes one grain.
func (m *machine) Add(t *rapid.T) {
	m.step()
	g := drawGrain(t, m.memory)
	h, err := m.db(t).Add(context.Background(), g)
	if m.refused(t, []lethe.Grain{stored(g)}, err) {
		return
	}
	if err != nil {
		t.Fatalf("Add: %v", err)
	}
	m.applyAdd(t, []lethe.Grain{stored(g)}, []string{h})
}

// refused reports whether a write of gs was refused as the model says it
// must be: a grain that repeats a live grain's content, or an earlier
// grain's of its batch, with another importance (code conflict). The
// write's keys were made before the refusal and stay; nothing else
// changed.
func (m *machine) refused(t *rapid.T, gs []lethe.Grain, err error) bool {
	want := false
	first := map[string]lethe.Grain{}
	for _, g := range gs {
		k := dedupKey(g)
		if x := m.live(g); x != nil {
			want = want || x.g.Importance != g.Importance
		} else if f, ok := first[k]; ok {
			want = want || f.Importance != g.Importance
		} else {
			first[k] = g
		}
	}
	if !want {
		return false
	}
	if lethe.ErrorCode(err) != "conflict" {
		t.Fatalf("a write repeating a grain with another importance: %v, want code conflict", err)
	}
	for _, g := range gs {
		m.audit += m.ensureKeys(g.Scope, g.UserID)
	}
	return true
}

// Batch writes grains in one call.
func (m *machine) Batch(t *rapid.T) {
	m.step()
	n := rapid.IntRange(1, 4).Draw(t, "n")
	gs := make([]lethe.Grain, n)
	for i := range gs {
		gs[i] = drawGrain(t, m.memory)
	}
	hs, err := m.db(t).AddBatch(context.Background(), gs)
	st := make([]lethe.Grain, n)
	for i := range gs {
		st[i] = stored(gs[i])
	}
	if m.refused(t, st, err) {
		return
	}
	if err != nil {
		t.Fatalf("AddBatch: %v", err)
	}
	m.applyAdd(t, st, hs)
}

func (m *machine) applyAdd(t *rapid.T, gs []lethe.Grain, hs []string) {
	for i, g := range gs {
		m.audit += m.ensureKeys(g.Scope, g.UserID)
		if x := m.live(g); x != nil {
			if hs[i] != x.hash {
				t.Fatalf("grain %d repeats live grain %s, got hash %s", i, x.hash[:8], hs[i][:8])
			}
			continue
		}
		if x, ok := m.grains[hs[i]]; ok {
			t.Fatalf("grain %d is new, got the hash of a known grain %s (alive %t)", i, hs[i][:8], x.alive)
		}
		m.dropDead(g)
		m.insert(g, hs[i])
	}
}

// pick draws a known hash (any state), or a hash never written.
func (m *machine) pick(t *rapid.T, label string) string {
	if len(m.order) == 0 || rapid.IntRange(0, 9).Draw(t, label+"_unknown") == 0 {
		return strings.Repeat("ab", 32)
	}
	return rapid.SampledFrom(m.order).Draw(t, label)
}

// Supersede writes a new version of a grain.
func (m *machine) Supersede(t *rapid.T) {
	m.step()
	old := m.pick(t, "old")
	next := lethe.Grain{Memory: m.memory, Type: "fact", Object: rapid.SampledFrom(append(poolObjects, "nice")).Draw(t, "object")}
	if rapid.Bool().Draw(t, "new_user") {
		next.UserID = rapid.SampledFrom(poolUsers).Draw(t, "user")
	}
	if rapid.Bool().Draw(t, "new_scope") {
		next.Scope = rapid.SampledFrom(poolScopes).Draw(t, "scope")
	}
	if rapid.IntRange(0, 3).Draw(t, "new_namespace") == 0 {
		next.Namespace = rapid.SampledFrom([]string{grains.DefaultNamespace, "n"}).Draw(t, "namespace")
	}
	// An old new version can be a policy's candidate while an older
	// version of its chain is protected (a caveat, or important).
	if age := rapid.SampledFrom(poolAges).Draw(t, "age_days"); age > 0 {
		next.CreatedAt = time.Now().Add(-time.Duration(age * 24 * float64(time.Hour)))
	}
	m.supersede(t, old, next)
}

// Move supersedes a readable newest version of a user's grain by an old
// version of another user's: a fact moved to the person it is about. The
// first user's erasure then leaves an unreadable older version under a
// readable head that the policies judge (Supersede draws this rarely: in
// 1,000 sequences it never reached a purge before the cleaner).
func (m *machine) Move(t *rapid.T) {
	var heads []string
	for _, h := range m.order {
		if x := m.grains[h]; x.alive && x.by == "" && x.g.UserID != "" {
			heads = append(heads, h)
		}
	}
	if len(heads) == 0 {
		t.Skip("no readable grain of a user")
	}
	m.step()
	old := rapid.SampledFrom(heads).Draw(t, "old")
	next := lethe.Grain{Memory: m.memory, Type: "fact", Object: rapid.SampledFrom(poolObjects).Draw(t, "object"),
		UserID:    rapid.SampledFrom(poolUsers[2:]).Draw(t, "user"),
		CreatedAt: time.Now().Add(-3000 * 24 * time.Hour)}
	m.supersede(t, old, next)
}

// supersede supersedes old by next and checks the answer against the model.
func (m *machine) supersede(t *rapid.T, old string, next lethe.Grain) {
	h, err := m.db(t).Supersede(context.Background(), old, next)
	want, keys := m.expectSupersede(old, next)
	m.audit += keys
	if got := lethe.ErrorCode(err); got != want && !(want == "not_found" && got == "erased") {
		t.Fatalf("Supersede(%s) = %v, want %q", old[:8], err, want)
	}
	if err != nil {
		return
	}
	x := m.grains[old]
	g := x.g
	g.Object, g.Importance = nfc(next.Object), x.g.Importance
	if next.UserID != "" {
		g.UserID = nfc(next.UserID)
	}
	if next.Scope != "" {
		g.Scope = next.Scope
	}
	if next.Namespace != "" {
		g.Namespace = next.Namespace
	}
	g.Type, g.CreatedAt = "fact", next.CreatedAt
	if _, ok := m.grains[h]; ok {
		t.Fatalf("Supersede returned a known hash")
	}
	m.dropDead(g)
	m.insert(g, h)
	m.grains[h].supersedes = old
	x.by = h
	m.audit++
}

// expectSupersede is the model's answer to a supersede, and the data keys
// it creates.
func (m *machine) expectSupersede(old string, next lethe.Grain) (lethe.Code, uint64) {
	x, ok := m.grains[old]
	switch {
	case !ok || !x.present:
		return "not_found", 0
	case !x.alive:
		return "erased", 0
	case x.by != "" && m.grains[x.by].alive:
		return "already_superseded", 0
	}
	g := x.g
	g.Object = nfc(next.Object)
	if next.UserID != "" {
		g.UserID = nfc(next.UserID)
	}
	if next.Scope != "" {
		g.Scope = next.Scope
	}
	if next.Namespace != "" {
		g.Namespace = next.Namespace
	}
	g.Type = "fact"
	if dedupKey(g) == dedupKey(x.g) {
		return "invalid_argument", 0
	}
	keys := m.ensureKeys(g.Scope, g.UserID)
	if y := m.live(g); y != nil && y != x {
		return "conflict", keys
	}
	return "", keys
}

// clean runs the cleaner, as it runs in the background.
func (m *machine) clean(t *rapid.T) {
	if _, err := m.h.dbs[0].PurgeErased(context.Background()); err != nil {
		t.Fatalf("PurgeErased: %v", err)
	}
	for _, x := range m.grains {
		if !x.alive {
			x.present = false
		}
	}
}

// Cleaner deletes erased rows.
func (m *machine) Cleaner(t *rapid.T) { m.step(); m.clean(t) }

// held returns whether a hold covers a grain.
func (m *machine) held(x *mgrain) bool {
	for _, h := range m.holds {
		if h.Scope != "" && grains.InScope(x.g.Scope, h.Scope) || h.UserID != "" && nfc(h.UserID) == x.g.UserID {
			return true
		}
	}
	return false
}

func protected(x *mgrain) bool { return x.g.Type == "caveat" || x.g.Importance >= 0.9 }

// closure returns the present rows of the chains of seeds.
func (m *machine) closure(seeds []*mgrain) []*mgrain {
	in := map[string]bool{}
	var out []*mgrain
	var walk func(h string)
	walk = func(h string) {
		x, ok := m.grains[h]
		if h == "" || !ok || !x.present || in[h] {
			return
		}
		in[h] = true
		out = append(out, x)
		walk(x.supersedes)
		walk(x.by)
	}
	for _, s := range seeds {
		walk(s.hash)
	}
	return out
}

// outside reports whether a forget confined to scopes or a namespace
// (Selector.Scopes, nil for none; Selector.Namespace, "" for none) is
// refused for x, a row it would delete: x lies outside the scopes or the
// namespace, or links to a version an erasure removed (whose scope and
// namespace the caller cannot know).
func (m *machine) outside(x *mgrain, scopes []string, ns string) bool {
	if scopes == nil && ns == "" {
		return false
	}
	if scopes != nil && !slices.ContainsFunc(scopes, func(p string) bool { return grains.InScope(x.g.Scope, p) }) {
		return true
	}
	if ns != "" && x.g.Namespace != ns {
		return true
	}
	for _, h := range []string{x.supersedes, x.by} {
		if v, ok := m.grains[h]; h != "" && (!ok || !v.present || !v.alive) {
			return true
		}
	}
	return false
}

// Forget forgets by one selector.
func (m *machine) Forget(t *rapid.T) {
	m.step()
	m.clean(t) // the model does not follow erased rows into forgets
	var sel lethe.Selector
	var seeds []*mgrain
	byHash := false
	switch rapid.IntRange(0, 3).Draw(t, "selector") {
	case 0:
		sel.Hash, byHash = m.pick(t, "hash"), true
		if x, ok := m.grains[sel.Hash]; ok && x.present {
			seeds = append(seeds, x)
		}
	case 1:
		n := rapid.IntRange(1, 3).Draw(t, "n")
		for range n {
			sel.Hashes = append(sel.Hashes, m.pick(t, "hash"))
		}
		byHash = true
		for _, h := range sel.Hashes {
			if x, ok := m.grains[h]; ok && x.present && !slices.Contains(seeds, x) {
				seeds = append(seeds, x)
			}
		}
	case 2:
		sel.Subject = rapid.SampledFrom(poolSubjects).Draw(t, "subject")
		for _, h := range m.order {
			if x := m.grains[h]; x.alive && grains.NormalizeValue(x.g.Subject) == grains.NormalizeValue(sel.Subject) {
				seeds = append(seeds, x)
			}
		}
	default:
		sel.UserID = rapid.SampledFrom(poolUsers[2:]).Draw(t, "user")
		if rapid.IntRange(0, 3).Draw(t, "nobody") == 0 {
			sel.UserID = "nobody"
		}
		for _, h := range m.order {
			if x := m.grains[h]; x.alive && x.g.UserID == nfc(sel.UserID) {
				seeds = append(seeds, x)
			}
		}
	}
	sel.Memory = m.memory
	if rapid.IntRange(0, 2).Draw(t, "scoped") == 0 {
		// Confined to scopes, as a scope-limited token's forget is.
		sel.Scopes = rapid.SliceOfNDistinct(rapid.SampledFrom(poolScopes[1:]), 1, 2, rapid.ID[string]).Draw(t, "scopes")
	}
	if rapid.IntRange(0, 2).Draw(t, "namespaced") == 0 {
		// Confined to a namespace, as a namespace-locked MCP session's is.
		sel.Namespace = rapid.SampledFrom([]string{grains.DefaultNamespace, "n"}).Draw(t, "namespace")
	}
	res, err := m.db(t).Forget(context.Background(), sel)
	del := m.closure(seeds)
	want := lethe.Code("")
	switch {
	case slices.ContainsFunc(del, func(x *mgrain) bool { return m.outside(x, sel.Scopes, sel.Namespace) }):
		want = "forbidden"
	case byHash && slices.ContainsFunc(del, protected):
		want = "protected"
	case sel.Hash != "" && len(seeds) == 0:
		want = "not_found"
	case slices.ContainsFunc(del, m.held):
		want = "held"
	}
	if got := lethe.ErrorCode(err); got != want {
		t.Fatalf("Forget(%+v) = %+v, %v; want %q", sel, res, err, want)
	}
	if want != "" {
		if want != "not_found" && want != "forbidden" {
			m.audit++ // the refusal is audited
		}
		return
	}
	var hs []string
	for _, x := range del {
		hs = append(hs, x.hash)
	}
	sort.Strings(hs)
	if res.Count != len(hs) || !slices.Equal(res.Hashes, nonNil(hs)) {
		t.Fatalf("Forget(%+v) removed %d %v, want %d %v", sel, res.Count, short8(res.Hashes), len(hs), short8(hs))
	}
	for _, x := range del {
		x.present, x.alive = false, false
	}
	if len(hs) > 0 {
		m.audit++
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func short8(hs []string) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h[:8]
	}
	return out
}

// erased applies a successful erase: the grains sel selects die; erased
// rows of earlier erasures are deleted first (the erase finishes the
// cleanup under its lock), but a user erasure (user) leaves the rows of
// earlier user erasures to the cleaner: they count for no other user.
func (m *machine) erased(t *rapid.T, er *lethe.Erasure, err error, want lethe.Code, user bool, dies func(x *mgrain) bool) {
	if got := lethe.ErrorCode(err); got != want {
		t.Fatalf("erase = %+v, %v; want %q", er, err, want)
	}
	switch want {
	case "not_found":
		return
	case "held":
		m.audit++
		return
	}
	for _, x := range m.grains {
		if !x.alive && !(user && x.byUser) {
			x.present = false
		}
	}
	n := 0
	for _, x := range m.grains {
		if x.alive && dies(x) {
			x.alive, x.byUser = false, user
			n++
		}
	}
	if er.Count != int64(n) {
		t.Fatalf("erase made %d grains unreadable, want %d", er.Count, n)
	}
	m.audit++
}

// expectForgetUser is the model's answer to ForgetUser.
func (m *machine) expectForgetUser(u string) lethe.Code {
	if !m.users[u] {
		return "not_found"
	}
	for _, x := range m.grains {
		if x.alive && x.g.UserID == u && m.held(x) {
			return "held"
		}
	}
	for _, h := range m.holds {
		if h.UserID != "" && nfc(h.UserID) == u {
			return "held"
		}
	}
	return ""
}

// ForgetUser crypto-erases a user.
func (m *machine) ForgetUser(t *rapid.T) {
	m.step()
	u := rapid.SampledFrom(append(poolUsers[2:], "nobody")).Draw(t, "user")
	er, err := m.db(t).ForgetUser(context.Background(), m.memory, u)
	want := m.expectForgetUser(nfc(u))
	m.erased(t, er, err, want, true, func(x *mgrain) bool { return x.g.UserID == nfc(u) })
	if want == "" {
		m.users[nfc(u)] = false
	}
}

// EraseScope crypto-erases a scope and everything below it.
func (m *machine) EraseScope(t *rapid.T) {
	m.step()
	p := rapid.SampledFrom(poolScopes[1:]).Draw(t, "scope")
	er, err := m.db(t).EraseScope(context.Background(), m.memory, p)
	want := lethe.Code("")
	if !m.scopes[p] {
		want = "not_found"
	} else {
		for _, h := range m.holds {
			if h.Scope != "" && (grains.InScope(h.Scope, p) || grains.InScope(p, h.Scope)) {
				want = "held"
			}
			if h.UserID != "" {
				for _, x := range m.grains {
					if x.alive && x.g.UserID == nfc(h.UserID) && grains.InScope(x.g.Scope, p) {
						want = "held"
					}
				}
			}
		}
	}
	m.erased(t, er, err, want, false, func(x *mgrain) bool { return grains.InScope(x.g.Scope, p) })
	if want == "" {
		for s := range m.scopes {
			if grains.InScope(s, p) {
				m.scopes[s] = false
			}
		}
	}
}

// EraseMemory crypto-erases the whole memory.
func (m *machine) EraseMemory(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "really") != 0 {
		t.Skip("erase the memory rarely")
	}
	m.step()
	i := rapid.IntRange(0, 1).Draw(t, "instance")
	er, err := m.h.dbs[i].EraseMemory(context.Background(), m.memory)
	want := lethe.Code("")
	switch {
	case !m.memKey:
		want = "not_found"
	case len(m.holds) > 0:
		want = "held"
	}
	m.erased(t, er, err, want, false, func(*mgrain) bool { return true })
	if want == "" {
		m.memKey = false
		clear(m.users)
		clear(m.scopes)
		// The other instance keeps the erased memory key cached: its next
		// write of a new user must not create a key named under it (the
		// store refuses, the keyring purges, the write retries), so the
		// key.create events stay the model's.
	}
}

// Hold places a legal hold on a scope or a user.
func (m *machine) Hold(t *rapid.T) {
	m.step()
	spec := lethe.HoldSpec{Memory: m.memory}
	if rapid.Bool().Draw(t, "on_user") {
		spec.UserID = rapid.SampledFrom(append(poolUsers[2:], "nobody")).Draw(t, "user")
		if !m.memKey {
			m.memKey = true
			m.gens[memGen]++
			m.audit++
		}
	} else {
		spec.Scope = rapid.SampledFrom(poolScopes[1:]).Draw(t, "scope")
	}
	h, err := m.db(t).SetHold(context.Background(), spec)
	if err != nil {
		t.Fatalf("SetHold: %v", err)
	}
	m.holds[h.ID] = spec
	m.audit++
}

// Release releases a hold.
func (m *machine) Release(t *rapid.T) {
	if len(m.holds) == 0 {
		t.Skip("no hold")
	}
	m.step()
	id := rapid.SampledFrom(slices.Sorted(maps.Keys(m.holds))).Draw(t, "hold")
	if err := m.db(t).ReleaseHold(context.Background(), m.memory, id); err != nil {
		t.Fatalf("ReleaseHold: %v", err)
	}
	delete(m.holds, id)
	m.audit++
}

// Archive archives named grains.
func (m *machine) Archive(t *rapid.T) {
	m.step()
	hs := []string{m.pick(t, "hash"), m.pick(t, "hash")}
	res, err := m.db(t).ArchiveGrains(context.Background(), m.memory, hs)
	var want []string
	anyAlive := false
	for _, h := range hs {
		// An erased grain is no grain, whether or not the cleaner has
		// deleted its row yet.
		if x, ok := m.grains[h]; ok && x.alive {
			anyAlive = true
			if !x.archived && !slices.Contains(want, h) {
				want = append(want, h)
			}
		}
	}
	if !anyAlive {
		if lethe.ErrorCode(err) != "not_found" {
			t.Fatalf("ArchiveGrains of unknown grains = %v, want not_found", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("ArchiveGrains: %v", err)
	}
	sort.Strings(want)
	got := slices.Sorted(slices.Values(res.Hashes))
	if !slices.Equal(got, nonNil(want)) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("ArchiveGrains archived %v, want %v", short8(got), short8(want))
	}
	for _, h := range want {
		m.grains[h].archived = true
	}
	if len(want) > 0 {
		m.audit++
	}
}

// bulk checks what a purge or a risk sweep forgot, and applies it: each
// forgotten grain, every version of its chain, was alive, unprotected and
// unheld, and its whole chain went with it. Which grains a policy picks is the policy's tests'
// business; that it touches nothing else, and nothing it does not report,
// is this one's.
func (m *machine) bulk(t *rapid.T, what string, hashes []string) {
	for _, h := range hashes {
		x, ok := m.grains[h]
		if !ok || !x.alive {
			t.Fatalf("%s forgot %s, which the model does not hold alive", what, h[:8])
		}
		if m.held(x) || protected(x) {
			t.Fatalf("%s forgot %s, which is held or protected", what, h[:8])
		}
		// The purge judges a chain by its newest version (a chain is one
		// fact): an immune type keeps it only there.
		if what == "purge" && x.g.Type == "state" && x.by == "" {
			t.Fatalf("purge forgot %s, the newest version of its chain and of an immune type", h[:8])
		}
	}
	var seeds []*mgrain
	for _, h := range hashes {
		seeds = append(seeds, m.grains[h])
	}
	for _, x := range m.closure(seeds) {
		if !slices.Contains(hashes, x.hash) {
			t.Fatalf("%s forgot %s but not %s of its chain", what, short8(hashes), x.hash[:8])
		}
	}
	for _, h := range hashes {
		m.grains[h].present, m.grains[h].alive = false, false
	}
	// Policy runs write their own events; take the log's size as it is,
	// after checking that it grew when something was forgotten.
	n := m.auditSize(t)
	if n < m.audit || len(hashes) > 0 && n == m.audit {
		t.Fatalf("%s: audit log %d events, was %d", what, n, m.audit)
	}
	m.audit = n
}

// Purge runs the decay purge, with the cleaner's work maybe still pending:
// rows an erasure made unreadable are not the purge's to forget.
func (m *machine) Purge(t *rapid.T) {
	m.step()
	res, err := m.db(t).PurgeStale(context.Background(), lethe.PurgeOptions{Memory: m.memory})
	if err != nil {
		if lethe.ErrorCode(err) == "held" {
			m.audit = m.auditSize(t)
			return
		}
		t.Fatalf("PurgeStale: %v", err)
	}
	m.bulk(t, "purge", res.Hashes)
}

// Risk runs the risk sweep (drop only), with the cleaner's work maybe
// still pending, as Purge.
func (m *machine) Risk(t *rapid.T) {
	m.step()
	res, err := m.db(t).RiskSweep(context.Background(), m.memory, lethe.RiskOptions{})
	if err != nil {
		t.Fatalf("RiskSweep: %v", err)
	}
	var dropped []string
	for _, it := range res.Items {
		if it.Action == "drop" {
			x, ok := m.grains[it.Hash]
			if !ok {
				t.Fatalf("risk sweep dropped unknown %s", it.Hash[:8])
			}
			for _, y := range m.closure([]*mgrain{x}) {
				if !slices.Contains(dropped, y.hash) {
					dropped = append(dropped, y.hash)
				}
			}
		}
	}
	m.bulk(t, "risk sweep", dropped)
}

// Restart closes an instance and opens it again.
func (m *machine) Restart(t *rapid.T) {
	if rapid.IntRange(0, 2).Draw(t, "really") != 0 {
		t.Skip("restart rarely: opening costs a PostgreSQL store a second")
	}
	m.step()
	m.restart(t, rapid.IntRange(0, 1).Draw(t, "instance"))
}

func (m *machine) restart(t *rapid.T, i int) {
	if err := m.h.dbs[i].Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	db, err := lethe.Open(context.Background(), m.h.cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	db.PauseCleaner()
	m.h.dbs[i] = db
	// The new instance's cleaner may have run once before it was paused.
	m.clean(t)
}

// Race runs a write of a user's grain on one instance and the erasure of
// that user on the other at the same time. The outcome must be one of the
// two orders.
func (m *machine) Race(t *rapid.T) {
	m.step()
	g := drawGrain(t, m.memory)
	g.UserID = rapid.SampledFrom(poolUsers[2:]).Draw(t, "user")
	if x := m.live(stored(g)); x != nil {
		g.Importance = x.g.Importance // a repeat, not a refused write (see refused)
	}
	var wg sync.WaitGroup
	var h string
	var addErr, eraseErr error
	var er *lethe.Erasure
	wg.Add(2)
	go func() { defer wg.Done(); h, addErr = m.h.dbs[0].Add(context.Background(), g) }()
	go func() {
		defer wg.Done()
		er, eraseErr = m.h.dbs[1].ForgetUser(context.Background(), m.memory, g.UserID)
	}()
	wg.Wait()
	if addErr != nil {
		t.Fatalf("Add during an erase: %v", addErr)
	}
	g = stored(g)
	// Which order happened shows in the outcome: the erase's answer and
	// count, and whether the new grain is readable after both.
	_, getErr := m.h.dbs[0].Get(context.Background(), m.memory, h)
	readable := getErr == nil
	code, count := lethe.ErrorCode(eraseErr), int64(-1)
	if er != nil {
		count = er.Count
	}
	a := m.clone()
	a.applyAddQuiet(g, h)
	if wa, na := a.eraseOutcome(g.UserID); wa == code && (wa != "" || na == count) && readable == (wa != "") {
		m.applyAdd(t, []lethe.Grain{g}, []string{h})
		m.erased(t, er, eraseErr, wa, true, func(x *mgrain) bool { return x.g.UserID == g.UserID })
		if wa == "" {
			m.users[g.UserID] = false
		}
		return
	}
	if !readable {
		t.Fatalf("racing erase = %v, %v; the new grain is unreadable but the erase did not take it", er, eraseErr)
	}
	want, _ := m.eraseOutcome(g.UserID)
	if want == "not_found" && eraseErr == nil {
		// The third interleaving: the write created the user's first key,
		// the erase destroyed it before the write's grain committed, and
		// the write sealed again under a new key.
		m.audit += m.ensureKeys(g.Scope, g.UserID)
		want = ""
	}
	m.erased(t, er, eraseErr, want, true, func(x *mgrain) bool { return x.g.UserID == g.UserID })
	if want == "" {
		m.users[g.UserID] = false
	}
	m.applyAdd(t, []lethe.Grain{g}, []string{h})
}

// eraseOutcome is the model's answer to ForgetUser(u): its code, and the
// count when it succeeds.
func (m *machine) eraseOutcome(u string) (lethe.Code, int64) {
	want := m.expectForgetUser(u)
	n := int64(0)
	for _, x := range m.grains {
		if x.alive && x.g.UserID == u {
			n++
		}
	}
	return want, n
}

// applyAddQuiet is applyAdd of one grain without checks, on a clone.
func (m *machine) applyAddQuiet(g lethe.Grain, h string) {
	m.ensureKeys(g.Scope, g.UserID)
	if m.live(g) != nil {
		return
	}
	m.dropDead(g)
	if _, ok := m.grains[h]; !ok {
		m.insert(g, h)
	}
}

// clone is a deep copy of the model.
func (m *machine) clone() *machine {
	c := *m
	c.grains = make(map[string]*mgrain, len(m.grains))
	for h, x := range m.grains {
		y := *x
		c.grains[h] = &y
	}
	c.order = slices.Clone(m.order)
	c.users, c.scopes, c.holds, c.gens = maps.Clone(m.users), maps.Clone(m.scopes), maps.Clone(m.holds), maps.Clone(m.gens)
	return &c
}

// Export makes a subject access export and opens it.
func (m *machine) Export(t *rapid.T) {
	m.step()
	m.checkExport(t, rapid.SampledFrom(append(poolUsers[2:], "nobody")).Draw(t, "user"))
}

func (m *machine) checkExport(t *rapid.T, u string) {
	res, err := m.db(t).ExportUser(context.Background(), m.memory, u, m.h.id.Recipient().String())
	if err != nil {
		t.Fatalf("ExportUser: %v", err)
	}
	m.audit++
	r, err := age.Decrypt(armor.NewReader(bytes.NewReader(res.Data)), m.h.id)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(r)
	var doc lethe.Export
	if err := json.Unmarshal(plain, &doc); err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, g := range doc.Grains {
		got = append(got, g.Hash)
	}
	for _, x := range m.grains {
		if x.alive && x.g.UserID == nfc(u) {
			want = append(want, x.hash)
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("export of %q holds %v, want %v", u, short8(got), short8(want))
	}
}

// Check compares every read with the model, after every step.
func (m *machine) Check(t *rapid.T) {
	ctx := context.Background()
	db := m.h.dbs[*m.steps%2]
	for _, h := range m.order {
		x := m.grains[h]
		g, err := db.Get(ctx, m.memory, h)
		switch {
		case x.alive:
			if err != nil {
				t.Fatalf("Get(%s): %v, want the grain", h[:8], err)
			}
			if g.Subject != x.g.Subject || g.Object != x.g.Object || g.UserID != x.g.UserID || g.Scope != x.g.Scope ||
				g.Type != x.g.Type || g.Supersedes != x.supersedes || g.SupersededBy != x.by || g.Archived != x.archived {
				t.Fatalf("Get(%s) = %+v, want %+v superseded_by %s archived %t", h[:8], g, x.g, x.by, x.archived)
			}
		default:
			if c := lethe.ErrorCode(err); c != "not_found" && c != "erased" {
				t.Fatalf("Get(%s) of a forgotten or erased grain = %v", h[:8], err)
			}
		}
	}
	// Locate answers of every hash what Get does of its place.
	places, err := db.Locate(ctx, m.memory, m.order)
	if err != nil {
		t.Fatalf("Locate: %v", err)
	}
	for _, h := range m.order {
		x := m.grains[h]
		if g, ok := places[h]; ok != x.alive || (ok && (g.Scope != x.g.Scope || g.Namespace != x.g.Namespace)) {
			t.Fatalf("Locate[%s] = %+v, %t; want %q %q, %t", h[:8], g, ok, x.g.Namespace, x.g.Scope, x.alive)
		}
	}
	queries := []lethe.Query{{}, {IncludeSuperseded: true, IncludeArchived: true}, {Tags: []string{"x"}}, {Type: "caveat", IncludeArchived: true}}
	for _, s := range poolSubjects {
		queries = append(queries, lethe.Query{Subject: s}, lethe.Query{Subject: s, IncludeSuperseded: true})
	}
	for _, u := range poolUsers[2:] {
		queries = append(queries, lethe.Query{UserID: u, IncludeArchived: true})
	}
	queries = append(queries, lethe.Query{UserID: "nobody", IncludeSuperseded: true, IncludeArchived: true})
	for _, p := range poolScopes[1:] {
		queries = append(queries, lethe.Query{Scope: p})
	}
	queries = append(queries, lethe.Query{Scope: "a", Subject: "ada", IncludeSuperseded: true})
	for _, q := range queries {
		q.Memory, q.Limit = m.memory, 1000
		p, err := db.Recall(ctx, q)
		if err != nil {
			t.Fatalf("Recall(%+v): %v", q, err)
		}
		var got, want []string
		for _, g := range p.Grains {
			got = append(got, g.Hash)
		}
		for _, x := range m.grains {
			if m.matches(x, q) {
				want = append(want, x.hash)
			}
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Fatalf("Recall(%+v) = %v, want %v", q, short8(got), short8(want))
		}
	}
	for _, h := range m.order {
		x := m.grains[h]
		if !x.alive {
			continue
		}
		hist, err := db.History(ctx, m.memory, h)
		if err != nil {
			t.Fatalf("History(%s): %v", h[:8], err)
		}
		var got []string
		for _, g := range hist {
			s := g.Hash[:8]
			if g.Erased {
				s += "(erased)"
			}
			got = append(got, s)
		}
		if want := m.history(x); !slices.Equal(got, want) {
			t.Fatalf("History(%s) = %v, want %v", h[:8], got, want)
		}
	}
	if n := m.auditSize(t); n != m.audit {
		leaves, _ := m.h.dbs[0].AuditLeaves(ctx)
		var last []string
		for _, l := range leaves[max(0, len(leaves)-6):] {
			var v struct{ Type, Memory string }
			json.Unmarshal(l, &v)
			last = append(last, v.Memory+":"+v.Type)
		}
		t.Fatalf("audit log weighs %d (keys created and other events), want %d; the last: %v", n, m.audit, last)
	}
}

// matches is the model of recall.
func (m *machine) matches(x *mgrain, q lethe.Query) bool {
	switch {
	case !x.alive,
		!q.IncludeSuperseded && x.by != "",
		!q.IncludeArchived && x.archived,
		q.Subject != "" && grains.NormalizeValue(q.Subject) != grains.NormalizeValue(x.g.Subject),
		q.UserID != "" && nfc(q.UserID) != x.g.UserID,
		q.Type != "" && q.Type != x.g.Type,
		!grains.InScope(x.g.Scope, q.Scope),
		len(q.Tags) > 0 && !slices.Contains(x.g.Tags, q.Tags[0]):
		return false
	}
	return true
}

// history is the model of History: newest first; an erased version is
// shown and ends the walk.
func (m *machine) history(x *mgrain) []string {
	var out []string
	head := x
	ghost := ""
	for head.by != "" {
		n, ok := m.grains[head.by]
		if !ok || !n.alive {
			ghost = head.by
			break
		}
		head = n
	}
	if ghost != "" {
		out = append(out, ghost[:8]+"(erased)")
	}
	for cur := head; ; {
		out = append(out, cur.hash[:8])
		if cur.supersedes == "" {
			break
		}
		p, ok := m.grains[cur.supersedes]
		if !ok || !p.alive {
			out = append(out, cur.supersedes[:8]+"(erased)")
			break
		}
		cur = p
	}
	return out
}
