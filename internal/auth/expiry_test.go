package auth

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
	"github.com/lethe-io/lethe/internal/testenv"
)

// clock is a settable Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestSpecExpiry(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.UTC) // a half second: rounding shows
	second := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	in := func(d time.Duration) *time.Duration { return &d }
	at := func(t time.Time) *time.Time { return &t }
	paris := time.FixedZone("CET", 3600)
	for _, tt := range []struct {
		name      string
		spec      Spec
		want      *time.Time
		wantField string // the field an invalid_argument names; "" for no error
	}{
		{"none", Spec{}, nil, ""},
		{"in a minute", Spec{ExpiresIn: in(time.Minute)}, at(second.Add(time.Minute)), ""},
		{"in 8h", Spec{ExpiresIn: in(8 * time.Hour)}, at(second.Add(8 * time.Hour)), ""},
		{"in 366 days", Spec{ExpiresIn: in(MaxLifetime)}, at(second.Add(MaxLifetime)), ""},
		{"in 59s", Spec{ExpiresIn: in(59 * time.Second)}, nil, "expires_in"},
		{"in 0", Spec{ExpiresIn: in(0)}, nil, "expires_in"},
		{"in -1h", Spec{ExpiresIn: in(-time.Hour)}, nil, "expires_in"},
		{"in 366 days and 1s", Spec{ExpiresIn: in(MaxLifetime + time.Second)}, nil, "expires_in"},
		{"at in an hour", Spec{ExpiresAt: at(second.Add(time.Hour))}, at(second.Add(time.Hour)), ""},
		{"at rounded down", Spec{ExpiresAt: at(second.Add(time.Hour + 999*time.Millisecond))}, at(second.Add(time.Hour)), ""},
		{"at in another zone", Spec{ExpiresAt: at(second.Add(time.Hour).In(paris))}, at(second.Add(time.Hour)), ""},
		{"at in 366 days", Spec{ExpiresAt: at(second.Add(MaxLifetime))}, at(second.Add(MaxLifetime)), ""},
		{"at now", Spec{ExpiresAt: at(now)}, nil, "expires_at"},
		{"at an hour ago", Spec{ExpiresAt: at(now.Add(-time.Hour))}, nil, "expires_at"},
		{"at in 59s", Spec{ExpiresAt: at(now.Add(59 * time.Second))}, nil, "expires_at"},
		// Rounded down, a minute and a quarter second is under a minute.
		{"at in a minute, rounded under", Spec{ExpiresAt: at(now.Add(time.Minute + 250*time.Millisecond))}, nil, "expires_at"},
		{"at in 367 days", Spec{ExpiresAt: at(now.Add(MaxLifetime + 24*time.Hour))}, nil, "expires_at"},
		{"at year 9999", Spec{ExpiresAt: at(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))}, nil, "expires_at"},
		{"at the zero time", Spec{ExpiresAt: &time.Time{}}, nil, "expires_at"},
		{"both", Spec{ExpiresIn: in(time.Hour), ExpiresAt: at(now.Add(time.Hour))}, nil, "expires_in"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.spec.Expiry(now)
			if tt.wantField != "" {
				var e *grains.Error
				if !errors.As(err, &e) || e.Code != grains.CodeInvalidArgument || e.Field != tt.wantField {
					t.Fatalf("Expiry = %v, %v; want invalid_argument naming %s", got, err, tt.wantField)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == nil && got != nil:
				t.Errorf("Expiry = %v, want none", got)
			case tt.want != nil && (got == nil || !got.Equal(*tt.want) || got.Location() != time.UTC):
				t.Errorf("Expiry = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestExpiry checks that a token works until its expiry and not from then
// on, through a Store whose cache would trust it an hour longer, a Store
// without a cache and one opened at the expiry; that the refusal is the
// one a wrong secret gets; that the expiry is listed and kept; and that
// the bootstrap admin token and a token made without an expiry never
// expire.
func TestExpiry(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testExpiry(t, Config{SQLitePath: filepath.Join(t.TempDir(), "lethe.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		testExpiry(t, Config{PostgresDSN: testenv.Postgres(t)})
	})
}

func testExpiry(t *testing.T, cfg Config) {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	clk := &clock{t: start}
	cfg.Now = clk.Now
	cfg.CacheTTL = time.Hour
	open := func(cfg Config) *Store {
		t.Helper()
		s, err := Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s := open(cfg)
	uncached := cfg
	uncached.CacheTTL = -1
	u := open(uncached)

	in := 10 * time.Minute
	secret, tok, err := s.Create(ctx, Spec{Roles: []Role{Reader}, Memories: []string{"m"}, ExpiresIn: &in})
	if err != nil {
		t.Fatal(err)
	}
	expiry := start.Add(in)
	if tok.ExpiresAt == nil || !tok.ExpiresAt.Equal(expiry) {
		t.Fatalf("created with ExpiresAt %v, want %v", tok.ExpiresAt, expiry)
	}
	at := start.Add(2 * time.Hour)
	_, atTok, err := s.Create(ctx, Spec{Roles: []Role{Reader}, Memories: []string{"m"}, ExpiresAt: &at})
	if err != nil {
		t.Fatal(err)
	}
	if atTok.ExpiresAt == nil || !atTok.ExpiresAt.Equal(at) {
		t.Fatalf("created with ExpiresAt %v, want %v", atTok.ExpiresAt, at)
	}
	forever, _, err := s.Create(ctx, Spec{Roles: []Role{Reader}, Memories: []string{"m"}})
	if err != nil {
		t.Fatal(err)
	}
	const bootstrap = "bootstrap-secret-expiry-1234"
	if b, err := s.Bootstrap(ctx, bootstrap); err != nil || b.ExpiresAt != nil {
		t.Fatalf("bootstrap: %+v %v, want a token without expiry", b, err)
	}

	// Read now, s trusts the token for an hour, past its expiry.
	for name, st := range map[string]*Store{"cached": s, "uncached": u} {
		if got, err := st.Lookup(ctx, secret); err != nil || got.ID != tok.ID || got.ExpiresAt == nil || !got.ExpiresAt.Equal(expiry) {
			t.Fatalf("%s: lookup of a live token: %+v %v", name, got, err)
		}
	}
	clk.Set(expiry.Add(-time.Microsecond))
	for name, st := range map[string]*Store{"cached": s, "uncached": u} {
		if _, err := st.Lookup(ctx, secret); err != nil {
			t.Errorf("%s: lookup just before the expiry: %v", name, err)
		}
	}
	clk.Set(expiry)
	_, wrong := s.Lookup(ctx, NewSecret())
	if wrong != ErrUnknown {
		t.Fatalf("a wrong secret: %v", wrong)
	}
	fresh := open(cfg)
	for name, st := range map[string]*Store{"cached": s, "uncached": u, "opened at the expiry": fresh} {
		for i := range 2 { // the second lookup must not be answered from a cache either
			if got, err := st.Lookup(ctx, secret); err != wrong {
				t.Errorf("%s: lookup %d at the expiry: %+v %v, want what a wrong secret gets (%v)", name, i, got, err, wrong)
			}
		}
	}

	// Listed with its expiry, through another Store too.
	list, err := fresh.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*time.Time{tok.ID: &expiry, atTok.ID: &at, BootstrapID: nil}
	for _, lt := range list {
		w, ok := want[lt.ID]
		if !ok {
			continue
		}
		delete(want, lt.ID)
		if (w == nil) != (lt.ExpiresAt == nil) || (w != nil && !w.Equal(*lt.ExpiresAt)) {
			t.Errorf("list: %s expires %v, want %v", lt.ID, lt.ExpiresAt, w)
		}
	}
	if len(want) != 0 {
		t.Errorf("list lacks %v", want)
	}

	// Ten years on, the bootstrap token and one made without an expiry
	// still work, on every Store.
	clk.Advance(10 * 366 * 24 * time.Hour)
	for name, st := range map[string]*Store{"cached": s, "uncached": u, "fresh": fresh} {
		if _, err := st.Lookup(ctx, bootstrap); err != nil {
			t.Errorf("%s: the bootstrap token after ten years: %v", name, err)
		}
		if _, err := st.Lookup(ctx, forever); err != nil {
			t.Errorf("%s: a token without expiry after ten years: %v", name, err)
		}
	}
	// A new bootstrap secret makes the row a fresh bootstrap token, without
	// an expiry even if one was written into it by hand.
	if err := s.db.Model(&tokenRow{}).Where("id = ?", BootstrapID).Update("expires_us", start.UnixMicro()).Error; err != nil {
		t.Fatal(err)
	}
	if b, err := s.Bootstrap(ctx, bootstrap+"-new"); err != nil || b.ExpiresAt != nil {
		t.Errorf("bootstrap with a new secret: %+v %v", b, err)
	}
	if _, err := u.Lookup(ctx, bootstrap+"-new"); err != nil {
		t.Errorf("the new bootstrap secret: %v", err)
	}
}

// TestExpiryCacheNeverOutlives reads a token through a Store with a long
// cache TTL at several moments before its expiry: none of the cached
// answers outlives the expiry.
func TestExpiryCacheNeverOutlives(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	clk := &clock{t: start}
	s, err := Open(ctx, Config{SQLitePath: filepath.Join(t.TempDir(), "lethe.db"), Now: clk.Now, CacheTTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := time.Hour
	secret, tok, err := s.Create(ctx, Spec{Roles: []Role{Reader}, Memories: []string{"m"}, ExpiresIn: &in})
	if err != nil {
		t.Fatal(err)
	}
	for _, before := range []time.Duration{time.Hour, time.Minute, time.Second, time.Microsecond} {
		clk.Set(tok.ExpiresAt.Add(-before))
		if _, err := s.Lookup(ctx, secret); err != nil {
			t.Fatalf("%v before the expiry: %v", before, err)
		}
		clk.Set(*tok.ExpiresAt)
		if _, err := s.Lookup(ctx, secret); !errors.Is(err, ErrUnknown) {
			t.Fatalf("at the expiry, read %v before it: %v", before, err)
		}
	}
}

// oldTokenRow is api_tokens as lethe made it before tokens could expire.
type oldTokenRow struct {
	ID        string `gorm:"primaryKey;size:40"`
	Hash      string `gorm:"size:64;not null;uniqueIndex:idx_api_tokens_hash"`
	Roles     string `gorm:"size:200;not null"`
	Memories  string `gorm:"not null"`
	Scopes    string `gorm:"not null;default:''"`
	CreatedUS int64  `gorm:"not null"`
	RevokedUS int64  `gorm:"not null;default:0"`
}

func (oldTokenRow) TableName() string { return "api_tokens" }

// TestOpenOldTable opens a database whose api_tokens the code before
// expiries made, with a token in it: the token still works, without an
// expiry, and a token made with one keeps it across reopening.
func TestOpenOldTable(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "lethe.db")
		testOpenOldTable(t, store.Database{Dialect: store.SQLite, DSN: path}, Config{SQLitePath: path})
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.Postgres(t)
		testOpenOldTable(t, store.Database{Dialect: store.Postgres, DSN: dsn}, Config{PostgresDSN: dsn})
	})
}

func testOpenOldTable(t *testing.T, d store.Database, cfg Config) {
	ctx := context.Background()
	old, err := store.OpenDatabase(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, old, &oldTokenRow{}); err != nil {
		t.Fatal(err)
	}
	oldSecret := NewSecret()
	row := &oldTokenRow{ID: "tok_old", Hash: HashSecret(oldSecret), Roles: "reader", Memories: "m",
		CreatedUS: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixMicro()}
	if err := old.Create(row).Error; err != nil {
		t.Fatal(err)
	}
	if sqlDB, err := old.DB(); err == nil {
		sqlDB.Close()
	}

	clk := &clock{t: time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)}
	cfg.Now = clk.Now
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open a table of the old shape: %v", err)
	}
	if got, err := s.Lookup(ctx, oldSecret); err != nil || got.ID != "tok_old" || got.ExpiresAt != nil {
		t.Fatalf("the old token: %+v %v, want it, without expiry", got, err)
	}
	in := time.Hour
	secret, tok, err := s.Create(ctx, Spec{Roles: []Role{Reader}, Memories: []string{"m"}, ExpiresIn: &in})
	if err != nil {
		t.Fatalf("create with an expiry in a migrated table: %v", err)
	}
	s.Close()

	// Reopened (Migrate again, on the migrated table).
	s, err = Open(ctx, cfg)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	for _, lt := range list {
		switch {
		case lt.ID == "tok_old" && lt.ExpiresAt != nil:
			t.Errorf("the old token expires %v after reopening", lt.ExpiresAt)
		case lt.ID == tok.ID && (lt.ExpiresAt == nil || !lt.ExpiresAt.Equal(*tok.ExpiresAt)):
			t.Errorf("the new token expires %v after reopening, want %v", lt.ExpiresAt, tok.ExpiresAt)
		}
	}
	clk.Set(tok.ExpiresAt.Add(-time.Second))
	if _, err := s.Lookup(ctx, secret); err != nil {
		t.Errorf("before its expiry, after reopening: %v", err)
	}
	clk.Set(*tok.ExpiresAt)
	if _, err := s.Lookup(ctx, secret); !errors.Is(err, ErrUnknown) {
		t.Errorf("at its expiry, after reopening: %v", err)
	}
	if _, err := s.Lookup(ctx, oldSecret); err != nil {
		t.Errorf("the old token after reopening: %v", err)
	}
}
