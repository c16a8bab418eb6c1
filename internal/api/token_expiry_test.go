package api_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
)

// tokenClock is a settable clock for the token store.
type tokenClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *tokenClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *tokenClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// newClockFixture is newFixture whose token store goes by clk, with the
// default cache TTL.
func newClockFixture(tb testing.TB, kind backendKind, clk *tokenClock) *fixture {
	tb.Helper()
	return newStoreFixture(tb, kind, nil, func(c *auth.Config) { c.Now = clk.Now }, nil)
}

// sameAnswer reports how b differs from a: status, headers but Date, body.
func sameAnswer(a, b answer) string {
	if a.status != b.status {
		return "status"
	}
	if !bytes.Equal(a.body, b.body) {
		return "body"
	}
	ha, hb := a.header.Clone(), b.header.Clone()
	ha.Del("Date")
	hb.Del("Date")
	for k := range ha {
		if !slices.Equal(ha[k], hb[k]) {
			return "header " + k
		}
	}
	for k := range hb {
		if _, ok := ha[k]; !ok {
			return "header " + k
		}
	}
	return ""
}

// TestTokenExpiry makes tokens that expire through POST /api/tokens
// (expires_in and expires_at), uses one until its expiry and after it, and
// compares the answer after it with the answers to a wrong secret and a
// revoked token: the same, byte for byte.
func TestTokenExpiry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
		clk := &tokenClock{t: start}
		f := newClockFixture(t, kind, clk)
		admin := f.token("admin", []string{"*"})

		a := f.call(admin, "POST", "/api/tokens", `{"roles":["reader"],"memories":["*"],"expires_in":600}`)
		f.want(a, 201, "")
		if !strings.Contains(string(a.body), `"expires_at":"2026-01-01T09:10:00Z"`) {
			t.Errorf("created with expires_in 600 at 09:00:00: %s", a.body)
		}
		var in api.TokenCreated
		a.decode(t, &in)
		f.secrets = append(f.secrets, in.Token)
		expiry := start.Add(600 * time.Second)
		if in.ExpiresAt == nil || !in.ExpiresAt.Equal(expiry) {
			t.Fatalf("created: expires_at %v, want %v", in.ExpiresAt, expiry)
		}

		// Rounded down to the second, in UTC.
		a = f.call(admin, "POST", "/api/tokens", `{"roles":["reader"],"memories":["*"],"expires_at":"2026-01-01T11:00:00.75+01:00"}`)
		f.want(a, 201, "")
		if !strings.Contains(string(a.body), `"expires_at":"2026-01-01T10:00:00Z"`) {
			t.Errorf("created with expires_at 11:00:00.75+01:00: %s", a.body)
		}
		var at api.TokenCreated
		a.decode(t, &at)
		f.secrets = append(f.secrets, at.Token)

		a = f.call(admin, "POST", "/api/tokens", api.TokenRequest{Roles: []string{"reader"}, Memories: []string{"*"}})
		f.want(a, 201, "")
		if strings.Contains(string(a.body), "expires_at") {
			t.Errorf("a token without expiry shows one: %s", a.body)
		}
		var revoked api.TokenCreated
		a.decode(t, &revoked)
		f.secrets = append(f.secrets, revoked.Token)
		f.want(f.call(admin, "DELETE", "/api/tokens/"+revoked.ID, nil), 204, "")

		listed := func() map[string]api.TokenInfo {
			t.Helper()
			a := f.call(admin, "GET", "/api/tokens", nil)
			f.want(a, 200, "")
			var list api.TokenList
			a.decode(t, &list)
			m := map[string]api.TokenInfo{}
			for _, ti := range list.Tokens {
				m[ti.ID] = ti
			}
			return m
		}
		l := listed()
		if e := l[in.ID].ExpiresAt; e == nil || !e.Equal(expiry) {
			t.Errorf("list: %s expires_at %v, want %v", in.ID, e, expiry)
		}
		if e := l[at.ID].ExpiresAt; e == nil || !e.Equal(start.Add(time.Hour)) {
			t.Errorf("list: %s expires_at %v", at.ID, e)
		}
		if e := l[revoked.ID].ExpiresAt; e != nil {
			t.Errorf("list: %s, made without expiry, expires_at %v", revoked.ID, e)
		}

		path := "/api/memories/default/recall"
		f.want(f.call(in.Token, "POST", path, api.RecallRequest{}), 200, "")
		// A microsecond before: the token works (and is cached for the
		// default TTL, a second, past its expiry).
		clk.Set(expiry.Add(-time.Microsecond))
		f.want(f.call(in.Token, "POST", path, api.RecallRequest{}), 200, "")

		clk.Set(expiry)
		wrong := f.call(auth.NewSecret(), "POST", path, api.RecallRequest{})
		f.want(wrong, 401, "unauthorized")
		for i := range 2 {
			got := f.call(in.Token, "POST", path, api.RecallRequest{})
			if d := sameAnswer(wrong, got); d != "" {
				t.Errorf("call %d at the expiry: its %s differs from a wrong secret's:\n%d %v %s\n%d %v %s", i, d,
					got.status, got.header, got.body, wrong.status, wrong.header, wrong.body)
			}
		}
		if d := sameAnswer(wrong, f.call(revoked.Token, "POST", path, api.RecallRequest{})); d != "" {
			t.Errorf("a revoked token's answer differs from a wrong secret's: %s", d)
		}
		// The other token still works until its own expiry.
		f.want(f.call(at.Token, "POST", path, api.RecallRequest{}), 200, "")
		clk.Set(start.Add(time.Hour))
		if d := sameAnswer(wrong, f.call(at.Token, "POST", path, api.RecallRequest{})); d != "" {
			t.Errorf("at its expires_at, the token's answer differs from a wrong secret's: %s", d)
		}

		// Expired tokens stay listed, with their expiry; the admin token,
		// made without one, works years on.
		clk.Set(start.Add(10 * 366 * 24 * time.Hour))
		l = listed()
		if e := l[in.ID].ExpiresAt; e == nil || !e.Equal(expiry) {
			t.Errorf("list after the expiry: %s expires_at %v", in.ID, e)
		}
	})
}

// TestTokenExpiryBadInput sends expiries out of bounds or malformed: each is
// 400 invalid_argument naming its field, and makes no token.
func TestTokenExpiryBadInput(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
		clk := &tokenClock{t: start}
		f := newClockFixture(t, kind, clk)
		admin := f.token("admin", []string{"*"})
		before, err := f.tokens.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name, expiry, field string
		}{
			{"in 0", `"expires_in":0`, "expires_in"},
			{"in negative", `"expires_in":-3600`, "expires_in"},
			{"in 59", `"expires_in":59`, "expires_in"},
			{"in 366 days and 1s", `"expires_in":31622401`, "expires_in"},
			// 2^55 + 3600 seconds: as nanoseconds, wraps to exactly an hour.
			{"in wrapping to an hour", `"expires_in":36028797018967568`, "expires_in"},
			{"in max int64", `"expires_in":9223372036854775807`, "expires_in"},
			{"in beyond int64", `"expires_in":9223372036854775808`, "expires_in"},
			{"in a string", `"expires_in":"1h"`, "expires_in"},
			{"in a fraction", `"expires_in":90.5`, "expires_in"},
			{"at past", `"expires_at":"2025-12-31T09:00:00Z"`, "expires_at"},
			{"at now", `"expires_at":"2026-01-01T09:00:00Z"`, "expires_at"},
			{"at in 59s", `"expires_at":"2026-01-01T09:00:59Z"`, "expires_at"},
			{"at in 367 days", `"expires_at":"2027-01-03T09:00:00Z"`, "expires_at"},
			{"at year 9999", `"expires_at":"9999-12-31T23:59:59Z"`, "expires_at"},
			{"at a date", `"expires_at":"2026-02-01"`, "expires_at"},
			{"at a word", `"expires_at":"tomorrow"`, "expires_at"},
			{"at a number", `"expires_at":1767258000`, "expires_at"},
			{"both", `"expires_in":3600,"expires_at":"2026-01-01T10:00:00Z"`, "expires_in"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				f.t = t
				f.wantField(f.call(admin, "POST", "/api/tokens", `{"roles":["reader"],"memories":["*"],`+tt.expiry+`}`),
					http.StatusBadRequest, "invalid_argument", tt.field)
			})
		}
		f.t = t
		after, err := f.tokens.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before) {
			t.Errorf("refused requests made %d tokens", len(after)-len(before))
		}
		// The bounds themselves are accepted.
		for _, expiry := range []string{`"expires_in":60`, `"expires_in":31622400`,
			`"expires_at":"2026-01-01T09:01:00Z"`, `"expires_at":"2027-01-02T09:00:00Z"`} {
			f.want(f.call(admin, "POST", "/api/tokens", `{"roles":["reader"],"memories":["*"],`+expiry+`}`), 201, "")
		}
	})
}
