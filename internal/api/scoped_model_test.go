package api_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/grains"
)

// TestScopedTokenModel drives random sequences of calls by an unscoped
// token and two scope-limited ones against a model of what a
// scope-limited token may see and do: a grain outside its scopes is no
// grain to it (the same answer, byte for byte, as a hash that names
// nothing), links to versions outside are left out, and a forget by hash
// refuses a chain with a version outside and otherwise forgets it whole.
// Chains cross scopes, subjects are shared, versions are forgotten
// under other versions' feet.
func TestScopedTokenModel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		sequences, steps := 24, 40
		if kind == postgresBackend {
			sequences = 12
		}
		for seq := range sequences {
			m := newScopeModel(f, fmt.Sprintf("sm%d", seq), uint64(seq))
			for step := range steps {
				m.step(step)
				if t.Failed() {
					t.Fatalf("sequence %d (seed %d) failed at step %d; its calls:\n%s", seq, seq, step, strings.Join(m.calls, "\n"))
				}
			}
			m.checkAll()
			if t.Failed() {
				t.Fatalf("sequence %d (seed %d) failed at its end; its calls:\n%s", seq, seq, strings.Join(m.calls, "\n"))
			}
		}
	})
}

// version is the model of one grain.
type version struct {
	hash, scope, subject string
	prev, next           string // supersedes, superseded_by
}

// scopeToken is a token and its scope prefixes (none: unscoped).
type scopeToken struct {
	secret string
	scopes []string
}

func (k scopeToken) allows(scope string) bool {
	if len(k.scopes) == 0 {
		return true
	}
	return slices.ContainsFunc(k.scopes, func(p string) bool { return grains.InScope(scope, p) })
}

type scopeModel struct {
	f        *fixture
	rng      *rand.Rand
	memory   string
	admin    scopeToken
	scoped   []scopeToken
	live     map[string]*version // by hash
	known    []string            // every hash seen, forgotten ones included
	objects  int
	calls    []string
	missing  string
	scopes   []string
	subjects []string
}

func newScopeModel(f *fixture, memory string, seed uint64) *scopeModel {
	m := &scopeModel{
		f: f, rng: rand.New(rand.NewPCG(seed, 0x5c0fe)), memory: memory,
		live:     map[string]*version{},
		missing:  strings.Repeat("7", 64),
		scopes:   []string{"acme", "acme/prod", "acme/prod/x", "acme/dev", "beta", "beta/y", "zeta"},
		subjects: []string{"subject-s0", "subject-s1", "subject-s2"},
	}
	m.admin = scopeToken{secret: f.token("admin", []string{memory})}
	for _, scopes := range [][]string{{"acme/prod"}, {"acme/prod", "beta"}} {
		m.scoped = append(m.scoped, scopeToken{secret: f.token("writer,reader,dpo", []string{memory}, scopes...), scopes: scopes})
	}
	return m
}

func (m *scopeModel) base() string { return "/api/memories/" + m.memory }

func (m *scopeModel) log(format string, args ...any) {
	m.calls = append(m.calls, fmt.Sprintf(format, args...))
}

func (m *scopeModel) pick(xs []string) string { return xs[m.rng.IntN(len(xs))] }

// someHash is a known hash, now and then one that never named a grain.
func (m *scopeModel) someHash() string {
	if len(m.known) == 0 || m.rng.IntN(8) == 0 {
		return m.missing
	}
	return m.pick(m.known)
}

func (m *scopeModel) heads() []string {
	var hs []string
	for _, h := range m.known {
		if v := m.live[h]; v != nil && v.next == "" {
			hs = append(hs, h)
		}
	}
	return hs
}

// chain is every version linked to h, oldest first.
func (m *scopeModel) chain(h string) []*version {
	v := m.live[h]
	for v.prev != "" {
		v = m.live[v.prev]
	}
	var out []*version
	for ; v != nil; v = m.live[v.next] {
		out = append(out, v)
		if v.next == "" {
			break
		}
	}
	return out
}

func (m *scopeModel) step(n int) {
	switch r := m.rng.IntN(100); {
	case r < 22 || len(m.known) == 0:
		m.add(m.admin, m.pick(m.scopes))
	case r < 32:
		m.add(m.scoped[m.rng.IntN(2)], m.pick(m.scopes))
	case r < 44:
		m.supersede()
	case r < 50:
		m.scopedSupersede(m.scoped[m.rng.IntN(2)], m.someHash())
	case r < 62:
		m.get(m.scoped[m.rng.IntN(2)], m.someHash())
	case r < 70:
		m.history(m.scoped[m.rng.IntN(2)], m.someHash())
	case r < 80:
		m.recall(m.scoped[m.rng.IntN(2)])
	case r < 92:
		m.forgetList(m.scoped[m.rng.IntN(2)])
	case r < 97:
		m.forgetOne(m.scoped[m.rng.IntN(2)], m.someHash())
	default:
		if hs := m.heads(); len(hs) > 0 {
			m.forgetOne(m.admin, m.pick(hs))
		}
	}
}

func (m *scopeModel) add(k scopeToken, scope string) {
	f := m.f
	m.objects++
	g := api.GrainInput{Type: "fact", Subject: m.pick(m.subjects), Relation: "r", Object: fmt.Sprintf("o%d", m.objects), Scope: scope}
	m.log("add by %v: %s in %s", k.scopes, g.Object, scope)
	a := f.call(k.secret, "POST", m.base()+"/grains", g)
	if !k.allows(scope) {
		f.want(a, 403, "forbidden")
		return
	}
	f.want(a, 201, "")
	var out api.AddResponse
	a.decode(f.t, &out)
	m.live[out.Hash] = &version{hash: out.Hash, scope: scope, subject: grains.NormalizeValue(g.Subject)}
	m.known = append(m.known, out.Hash)
}

func (m *scopeModel) supersede() {
	f := m.f
	hs := m.heads()
	if len(hs) == 0 {
		return
	}
	old, scope := m.pick(hs), m.pick(m.scopes)
	m.objects++
	m.log("supersede %s into %s", old[:8], scope)
	a := f.call(m.admin.secret, "POST", m.base()+"/supersede", map[string]any{"blob_hash": old, "scope": scope, "object": fmt.Sprintf("o%d", m.objects)})
	f.want(a, 201, "")
	var out api.SupersedeResponse
	a.decode(f.t, &out)
	m.live[out.Hash] = &version{hash: out.Hash, scope: scope, subject: m.live[old].subject, prev: old}
	m.live[old].next = out.Hash
	m.known = append(m.known, out.Hash)
}

// scopedSupersede supersedes h by k, into another scope or (half the
// time) the old version's.
func (m *scopeModel) scopedSupersede(k scopeToken, h string) {
	f := m.f
	m.objects++
	body := func(h string) any { return map[string]any{"blob_hash": h, "object": fmt.Sprintf("o%d", m.objects)} }
	scope := ""
	if m.rng.IntN(2) == 0 {
		scope = m.pick(m.scopes)
		body = func(h string) any {
			return map[string]any{"blob_hash": h, "object": fmt.Sprintf("o%d", m.objects), "scope": scope}
		}
	}
	m.log("supersede %s into %q by %v", h[:8], scope, k.scopes)
	path := m.base() + "/supersede"
	a := f.call(k.secret, "POST", path, body(h))
	switch old := m.live[h]; {
	case m.visible(k, h) == nil:
		f.want(a, 404, "not_found")
		m.sameAsMissing(k, a, h, "POST", path, body)
		return
	case scope != "" && !k.allows(scope):
		f.wantField(a, 403, "forbidden", "scope")
		return
	case old.next != "":
		f.want(a, 409, "already_superseded")
		return
	case scope == "":
		scope = old.scope
	}
	f.want(a, 201, "")
	var out api.SupersedeResponse
	a.decode(f.t, &out)
	m.live[out.Hash] = &version{hash: out.Hash, scope: scope, subject: m.live[h].subject, prev: h}
	m.live[h].next = out.Hash
	m.known = append(m.known, out.Hash)
}

// visible is what k sees of v: nil when v is no grain to it, else the
// version with the links to versions outside its scopes left out.
func (m *scopeModel) visible(k scopeToken, h string) *version {
	v := m.live[h]
	if v == nil || !k.allows(v.scope) {
		return nil
	}
	out := *v
	for _, link := range []*string{&out.prev, &out.next} {
		if *link != "" && !k.allows(m.live[*link].scope) {
			*link = ""
		}
	}
	return &out
}

// sameAsMissing checks that a is what k hears of a hash that names
// nothing: h replaced by the missing hash, the same bytes.
func (m *scopeModel) sameAsMissing(k scopeToken, a answer, h, method, path string, body func(string) any) {
	f := m.f
	f.t.Helper()
	var b any
	if body != nil {
		b = body(m.missing)
	}
	want := f.call(k.secret, method, strings.ReplaceAll(path, h, m.missing), b)
	if got := strings.ReplaceAll(string(a.body), h, m.missing); a.status != want.status || got != string(want.body) {
		f.t.Errorf("%s %s of a grain the token cannot see: %d %s; of a missing hash: %d %s", method, path, a.status, a.body, want.status, want.body)
	}
}

func (m *scopeModel) checkGrain(what string, got lethe.Grain, want *version) {
	m.f.t.Helper()
	if got.Hash != want.hash || got.Scope != want.scope || got.Supersedes != want.prev || got.SupersededBy != want.next {
		m.f.t.Errorf("%s: got %s in %q, supersedes %q, superseded_by %q; want %s in %q, %q, %q", what,
			got.Hash, got.Scope, got.Supersedes, got.SupersededBy, want.hash, want.scope, want.prev, want.next)
	}
}

func (m *scopeModel) get(k scopeToken, h string) {
	f := m.f
	path := m.base() + "/grains/" + h
	m.log("get %s by %v", h[:8], k.scopes)
	a := f.call(k.secret, "GET", path, nil)
	want := m.visible(k, h)
	if want == nil {
		f.want(a, 404, "not_found")
		m.sameAsMissing(k, a, h, "GET", path, nil)
		return
	}
	f.want(a, 200, "")
	var g lethe.Grain
	a.decode(f.t, &g)
	m.checkGrain("get", g, want)
}

func (m *scopeModel) history(k scopeToken, h string) {
	f := m.f
	path := m.base() + "/grains/" + h + "/history"
	m.log("history %s by %v", h[:8], k.scopes)
	a := f.call(k.secret, "GET", path, nil)
	if m.visible(k, h) == nil {
		f.want(a, 404, "not_found")
		m.sameAsMissing(k, a, h, "GET", path, nil)
		return
	}
	f.want(a, 200, "")
	var out api.HistoryResponse
	a.decode(f.t, &out)
	var want []*version
	chain := m.chain(h)
	for i := len(chain) - 1; i >= 0; i-- { // newest first
		if v := m.visible(k, chain[i].hash); v != nil {
			want = append(want, v)
		}
	}
	if len(out.Grains) != len(want) {
		f.t.Errorf("history of %s: %d versions, want %d", h, len(out.Grains), len(want))
		return
	}
	for i := range want {
		m.checkGrain(fmt.Sprintf("history[%d]", i), out.Grains[i], want[i])
	}
}

func (m *scopeModel) recall(k scopeToken) {
	f := m.f
	subject, all := m.pick(m.subjects), m.rng.IntN(2) == 0
	req := map[string]any{"subject": subject, "include_superseded": all, "limit": 1000}
	scope := ""
	if len(k.scopes) > 1 {
		scope = m.pick(k.scopes) // a token of several prefixes names one
		req["scope"] = scope
	}
	m.log("recall %s (superseded too: %v) in %q by %v", subject, all, scope, k.scopes)
	a := f.call(k.secret, "POST", m.base()+"/recall", req)
	f.want(a, 200, "")
	var page lethe.Page
	a.decode(f.t, &page)
	want := map[string]*version{}
	for h, v := range m.live {
		if v.subject == grains.NormalizeValue(subject) && (all || v.next == "") && grains.InScope(v.scope, scope) {
			if w := m.visible(k, h); w != nil {
				want[h] = w
			}
		}
	}
	if len(page.Grains) != len(want) {
		f.t.Errorf("recall: %d grains, want %d", len(page.Grains), len(want))
	}
	for _, g := range page.Grains {
		if w := want[g.Hash]; w == nil {
			f.t.Errorf("recall returned %s in %q, which the token should not see", g.Hash, g.Scope)
		} else {
			m.checkGrain("recall", g, w)
		}
	}
}

// forgetList forgets a few hashes, some outside the token's scopes, some
// missing, some repeated or of one chain.
func (m *scopeModel) forgetList(k scopeToken) {
	f := m.f
	hs := make([]string, 1+m.rng.IntN(3))
	for i := range hs {
		hs[i] = m.someHash()
	}
	m.log("forget %v by %v", short(hs), k.scopes)
	a := f.call(k.secret, "POST", m.base()+"/forget", map[string]any{"hashes": hs})
	// The model: hashes the token cannot see are passed over; a chain with
	// a version outside refuses the whole request.
	var kept []string
	seen := map[string]bool{}
	for i, h := range hs {
		if seen[h] || m.visible(k, h) == nil {
			continue
		}
		for _, v := range m.chain(h) {
			if !k.allows(v.scope) {
				f.wantField(a, 403, "forbidden", fmt.Sprintf("hashes[%d]", i))
				for _, h := range hs {
					if strings.Contains(string(a.body), h) {
						f.t.Errorf("the refusal names a hash: %s", a.body)
					}
				}
				return
			}
			seen[v.hash] = true
		}
		kept = append(kept, h)
	}
	if a.status != 200 && a.status != 202 {
		f.t.Errorf("forget %v: %d %s", hs, a.status, a.body)
		return
	}
	var res lethe.ForgetResult
	a.decode(f.t, &res)
	m.forgotten(res, kept)
}

func (m *scopeModel) forgetOne(k scopeToken, h string) {
	f := m.f
	m.log("forget one %s by %v", h[:8], k.scopes)
	body := func(h string) any { return map[string]any{"blob_hash": h} }
	path := m.base() + "/forget"
	a := f.call(k.secret, "POST", path, body(h))
	if m.visible(k, h) == nil {
		f.want(a, 404, "not_found")
		m.sameAsMissing(k, a, h, "POST", path, body)
		return
	}
	for _, v := range m.chain(h) {
		if !k.allows(v.scope) {
			f.wantField(a, 403, "forbidden", "blob_hash")
			return
		}
	}
	if a.status != 200 && a.status != 202 {
		f.t.Errorf("forget %s: %d %s", h, a.status, a.body)
		return
	}
	var res lethe.ForgetResult
	a.decode(f.t, &res)
	m.forgotten(res, []string{h})
}

// forgotten checks res against the chains of hs and removes them from the
// model.
func (m *scopeModel) forgotten(res lethe.ForgetResult, hs []string) {
	f := m.f
	var want []string
	for _, h := range hs {
		for _, v := range m.chain(h) {
			want = append(want, v.hash)
		}
	}
	for _, h := range want {
		delete(m.live, h)
	}
	slices.Sort(want)
	status := "forgotten"
	if len(want) == 0 {
		status, want = "not_found", []string{}
	}
	if res.Status != status || res.Count != len(want) || !slices.Equal(res.Hashes, want) {
		f.t.Errorf("forget: %s %d %v, want %s %d %v", res.Status, res.Count, short(res.Hashes), status, len(want), short(want))
	}
}

// checkAll reads every hash the sequence saw through the unscoped token:
// the store holds exactly the model's grains, linked as the model says.
func (m *scopeModel) checkAll() {
	for _, h := range m.known {
		m.log("check %s", h[:8])
		a := m.f.call(m.admin.secret, "GET", m.base()+"/grains/"+h, nil)
		v := m.live[h]
		if v == nil {
			m.f.want(a, 404, "not_found")
			continue
		}
		m.f.want(a, 200, "")
		var g lethe.Grain
		a.decode(m.f.t, &g)
		m.checkGrain("check", g, v)
	}
}

func short(hs []string) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h[:min(8, len(h))]
	}
	return out
}
