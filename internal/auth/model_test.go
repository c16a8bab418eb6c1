package auth

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/testenv"
)

// TestTokenModel runs random sequences of token calls against a model of
// what each token may do. Two Stores share one database (two replicas,
// or a server and `lethe token revoke`) and one clock, with a cache TTL
// drawn per sequence (none, a second, a minute, an hour); a step creates a
// token (with no expiry, expires_in or expires_at) through either, revokes
// one through either, moves the clock (by a microsecond to two hours,
// onto a token's expiry or just before it), restarts a Store (an empty
// cache), lists the tokens, or looks a secret up through either (a
// token's, or one that names none). The rules the model holds every
// Lookup to:
//
//   - a secret that names no token, a token at or past its expiry, and a
//     token revoked through the same Store are refused, with ErrUnknown;
//   - a live token (not revoked, not expired) is accepted, as itself;
//   - a token revoked through the other Store may still be accepted there
//     only before its revocation plus the TTL, never without a cache, and
//     never at or past its expiry;
//
// and List shows every token the model made with its expiry and whether
// it is revoked.
func TestTokenModel(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		root, n := t.TempDir(), 0
		testTokenModel(t, func() Config {
			n++ // a database of its own for each cache TTL
			return Config{SQLitePath: filepath.Join(root, fmt.Sprint(n, ".db"))}
		})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Postgres(t) // one database: each sequence has tokens of its own
		testTokenModel(t, func() Config { return Config{PostgresDSN: dsn} })
	})
}

// modelToken is what the model knows of a token.
type modelToken struct {
	secret, id string
	expires    *time.Time
	revokedAt  time.Time // zero: not revoked
	revokedBy  int       // the Store that revoked it
}

func testTokenModel(t *testing.T, config func() Config) {
	ctx := context.Background()
	// One pair of Stores and one clock per cache TTL, kept from sequence
	// to sequence (a Store opens in about 100 ms on PostgreSQL): each
	// sequence makes tokens of its own, so what the Stores cached of
	// earlier ones does not matter to it, and the clocks only move on.
	type pair struct {
		cfg    Config
		clk    *clock
		stores [2]*Store
	}
	pairs := map[time.Duration]*pair{}
	open := func(tb interface{ Fatal(...any) }, cfg Config) *Store {
		s, err := Open(ctx, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	defer func() {
		for _, p := range pairs {
			for _, s := range p.stores {
				s.Close()
			}
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		ttl := rapid.SampledFrom([]time.Duration{-1, time.Second, time.Minute, time.Hour}).Draw(rt, "ttl")
		p := pairs[ttl]
		if p == nil {
			p = &pair{cfg: config(), clk: &clock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}}
			p.cfg.Now, p.cfg.CacheTTL = p.clk.Now, ttl
			p.stores = [2]*Store{open(t, p.cfg), open(t, p.cfg)}
			pairs[ttl] = p
		}
		cfg, clk, stores := p.cfg, p.clk, &p.stores
		var toks []*modelToken
		pick := func() *modelToken { return toks[rapid.IntRange(0, len(toks)-1).Draw(rt, "token")] }
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for range steps {
			s := rapid.IntRange(0, 1).Draw(rt, "store")
			now := clk.Now()
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 2 || len(toks) == 0: // create
				spec := Spec{Roles: []Role{Reader}, Memories: []string{"m"}}
				switch rapid.IntRange(0, 2).Draw(rt, "expiry") {
				case 1:
					d := time.Duration(rapid.Int64Range(int64(MinLifetime), int64(3*time.Hour)).Draw(rt, "expires_in"))
					spec.ExpiresIn = &d
				case 2:
					at := now.Add(time.Duration(rapid.Int64Range(int64(MinLifetime)+int64(time.Second), int64(3*time.Hour)).Draw(rt, "expires_at")))
					spec.ExpiresAt = &at
				}
				secret, tok, err := stores[s].Create(ctx, spec)
				if err != nil {
					rt.Fatalf("create: %v", err)
				}
				toks = append(toks, &modelToken{secret: secret, id: tok.ID, expires: tok.ExpiresAt})
			case op == 2: // revoke
				m := pick()
				if err := stores[s].Revoke(ctx, m.id); err != nil {
					rt.Fatalf("revoke %s through %d: %v", m.id, s, err)
				}
				if m.revokedAt.IsZero() {
					m.revokedAt, m.revokedBy = now, s
				} else if m.revokedBy != s {
					// Revoking again through the other Store drops that
					// Store's cached token: from now on both refuse it.
					m.revokedBy = -1
				}
			case op == 3: // the clock moves
				var d time.Duration
				switch rapid.IntRange(0, 2).Draw(rt, "move") {
				case 0:
					d = time.Duration(rapid.Int64Range(1, int64(2*time.Hour)).Draw(rt, "by"))
				case 1, 2:
					// Onto a token's expiry, or a microsecond before it.
					if m := pick(); m.expires != nil && m.expires.After(now) {
						d = m.expires.Sub(now)
						if rapid.Bool().Draw(rt, "just before") {
							d -= time.Microsecond
						}
					}
				}
				clk.Advance(d)
			case op == 4 && rapid.IntRange(0, 2).Draw(rt, "restart") == 0: // a restart
				stores[s].Close()
				stores[s] = open(rt, cfg)
			case op == 5: // list
				list, err := stores[s].List(ctx)
				if err != nil {
					rt.Fatal(err)
				}
				byID := map[string]Token{}
				for _, lt := range list {
					byID[lt.ID] = lt
				}
				for _, m := range toks {
					lt, ok := byID[m.id]
					switch {
					case !ok:
						rt.Fatalf("list lacks %s", m.id)
					case (lt.ExpiresAt == nil) != (m.expires == nil) || (m.expires != nil && !lt.ExpiresAt.Equal(*m.expires)):
						rt.Fatalf("list: %s expires %v, want %v", m.id, lt.ExpiresAt, m.expires)
					case (lt.RevokedAt != nil) != !m.revokedAt.IsZero():
						rt.Fatalf("list: %s revoked %v, the model says revoked at %v", m.id, lt.RevokedAt, m.revokedAt)
					}
				}
			default: // look up
				if rapid.IntRange(0, 5).Draw(rt, "unknown") == 0 {
					if got, err := stores[s].Lookup(ctx, NewSecret()); err != ErrUnknown {
						rt.Fatalf("a secret that names no token: %+v %v", got, err)
					}
					continue
				}
				m := pick()
				got, err := stores[s].Lookup(ctx, m.secret)
				if err != nil && !errors.Is(err, ErrUnknown) {
					rt.Fatalf("lookup: %v", err)
				}
				accepted := err == nil
				if accepted && got.ID != m.id {
					rt.Fatalf("lookup of %s answered %s", m.id, got.ID)
				}
				expired := m.expires != nil && !now.Before(*m.expires)
				switch {
				case expired && accepted:
					rt.Fatalf("%s accepted through %d at %v, at or past its expiry %v", m.id, s, now, m.expires)
				case m.revokedAt.IsZero() && !expired && !accepted:
					rt.Fatalf("live token %s refused through %d at %v (expires %v)", m.id, s, now, m.expires)
				case !m.revokedAt.IsZero() && accepted && (m.revokedBy != 1-s || cfg.CacheTTL < 0 || !now.Before(m.revokedAt.Add(cfg.CacheTTL))):
					rt.Fatalf("%s revoked at %v through %d accepted through %d at %v (cache TTL %v)",
						m.id, m.revokedAt, m.revokedBy, s, now, cfg.CacheTTL)
				}
			}
		}
	})
}

// TestNarrowScopesIsTheIntersection draws a scope-limited token's
// prefixes and a call's prefixes from a small tree of paths (with a
// sibling whose name extends another's, acme-x beside acme) and checks
// NarrowScopes against the meaning of both: when no prefix is outside,
// the result allows exactly the scopes that both the token and the call
// allow, for every path of the tree and a child of each; otherwise the
// prefix it names allows no scope the token allows, and every prefix
// before it does.
func TestNarrowScopesIsTheIntersection(t *testing.T) {
	tree := []string{"acme", "acme/prod", "acme/prod/bot1", "acme/dev", "acme-x", "acme-x/prod", "beta", "beta/eu"}
	var paths []string
	for _, p := range tree {
		paths = append(paths, p, p+"/leaf")
	}
	allows := func(prefixes []string, scope string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return grains.InScope(scope, p) })
	}
	meets := func(a string, prefixes []string) bool {
		return slices.ContainsFunc(paths, func(s string) bool { return grains.InScope(s, a) && allows(prefixes, s) })
	}
	rapid.Check(t, func(rt *rapid.T) {
		path := rapid.SampledFrom(tree)
		tok := &Token{Scopes: rapid.SliceOfNDistinct(path, 1, 3, rapid.ID[string]).Draw(rt, "token")}
		asked := rapid.SliceOfN(path, 1, 4).Draw(rt, "asked")
		within, outside := tok.NarrowScopes(asked)
		if outside >= 0 {
			if within != nil || meets(asked[outside], tok.Scopes) {
				rt.Fatalf("NarrowScopes(%v) by %v: %v, outside %d, but %s meets the token's scopes", asked, tok.Scopes, within, outside, asked[outside])
			}
			for _, a := range asked[:outside] {
				if !meets(a, tok.Scopes) {
					rt.Fatalf("NarrowScopes(%v) by %v: outside %d, but %s before it meets none", asked, tok.Scopes, outside, a)
				}
			}
			return
		}
		for _, s := range paths {
			if got, want := allows(within, s), allows(tok.Scopes, s) && allows(asked, s); got != want {
				rt.Fatalf("NarrowScopes(%v) by %v = %v: %s allowed %v, the token and the call together %v", asked, tok.Scopes, within, s, got, want)
			}
		}
	})
}
