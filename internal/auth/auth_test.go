package auth

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/testenv"
)

func TestToken(t *testing.T) {
	tok := &Token{Roles: []Role{Writer, Reader}, Memories: []string{"a"}, Scopes: []string{"acme/prod", "beta"}}
	for _, tt := range []struct {
		name string
		got  bool
		want bool
	}{
		{"writer", tok.Has(Writer), true},
		{"dpo", tok.Has(DPO), false},
		{"memory a", tok.AllowsMemory("a"), true},
		{"memory b", tok.AllowsMemory("b"), false},
		{"scope equal", tok.AllowsScope("acme/prod"), true},
		{"scope below", tok.AllowsScope("acme/prod/bot1"), true},
		{"scope slashes", tok.AllowsScope("/acme/prod/"), true},
		{"scope sibling prefix", tok.AllowsScope("acme/production"), false},
		{"scope above", tok.AllowsScope("acme"), false},
		{"scope root", tok.AllowsScope(""), false},
		{"second scope", tok.AllowsScope("beta/x"), true},
	} {
		if tt.got != tt.want {
			t.Errorf("%s: %t, want %t", tt.name, tt.got, tt.want)
		}
	}
	admin := &Token{Roles: []Role{Admin}, Memories: []string{AllMemories}}
	if !admin.Has(DPO) || !admin.Has(Auditor) || !admin.AllowsMemory("x") || !admin.AllowsScope("") {
		t.Error("admin for every memory is limited")
	}
}

func TestNarrowScope(t *testing.T) {
	one := &Token{Scopes: []string{"acme/prod"}}
	two := &Token{Scopes: []string{"acme/prod", "acme/dev"}}
	for _, tt := range []struct {
		name  string
		tok   *Token
		in    string
		want  string
		oknot bool
	}{
		{"unscoped keeps", &Token{}, "x", "x", false},
		{"root narrows", one, "", "acme/prod", false},
		{"parent narrows", one, "acme", "acme/prod", false},
		{"within keeps", one, "acme/prod/b", "acme/prod/b", false},
		{"outside", one, "other", "", true},
		{"two scopes, root", two, "", "", true},
		{"two scopes, named", two, "acme/dev", "acme/dev", false},
	} {
		got, ok := tt.tok.NarrowScope(tt.in)
		if got != tt.want || ok == tt.oknot {
			t.Errorf("%s: NarrowScope(%q) = %q, %t", tt.name, tt.in, got, ok)
		}
	}
}

func TestNarrowScopes(t *testing.T) {
	one := &Token{Scopes: []string{"acme/prod"}}
	two := &Token{Scopes: []string{"acme/prod", "acme/dev"}}
	for _, tt := range []struct {
		name    string
		tok     *Token
		in      []string
		want    []string
		outside int
	}{
		{"unscoped keeps", &Token{}, []string{"x", "y/z"}, []string{"x", "y/z"}, -1},
		{"unscoped, every scope", &Token{}, nil, nil, -1},
		{"every scope is the token's", two, nil, []string{"acme/prod", "acme/dev"}, -1},
		{"within keeps", one, []string{"acme/prod/b"}, []string{"acme/prod/b"}, -1},
		{"parent narrows", one, []string{"acme"}, []string{"acme/prod"}, -1},
		{"parent narrows to several", two, []string{"acme"}, []string{"acme/dev", "acme/prod"}, -1},
		{"each narrowed, once", two, []string{"acme/dev/x", "acme", "acme/prod"}, []string{"acme/dev", "acme/dev/x", "acme/prod"}, -1},
		{"outside", one, []string{"other"}, nil, 0},
		{"one outside", two, []string{"acme/prod", "acme/production"}, nil, 1},
	} {
		got, outside := tt.tok.NarrowScopes(tt.in)
		if !slices.Equal(got, tt.want) || outside != tt.outside {
			t.Errorf("%s: NarrowScopes(%q) = %q, %d; want %q, %d", tt.name, tt.in, got, outside, tt.want, tt.outside)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		spec Spec
		code grains.Code
	}{
		{"ok", Spec{Roles: []Role{Reader}, Memories: []string{"m"}}, ""},
		{"all", Spec{Roles: []Role{Admin}, Memories: []string{"*"}}, ""},
		{"all and one", Spec{Roles: []Role{Reader}, Memories: []string{"m", "*"}}, grains.CodeInvalidArgument},
		{"all twice", Spec{Roles: []Role{Reader}, Memories: []string{"*", "*"}}, grains.CodeInvalidArgument},
		{"no roles", Spec{Memories: []string{"m"}}, grains.CodeInvalidArgument},
		{"bad role", Spec{Roles: []Role{"root"}, Memories: []string{"m"}}, grains.CodeInvalidArgument},
		{"no memories", Spec{Roles: []Role{Reader}}, grains.CodeInvalidArgument},
		{"bad memory", Spec{Roles: []Role{Reader}, Memories: []string{"Bad"}}, grains.CodeInvalidMemory},
		{"empty scope", Spec{Roles: []Role{Reader}, Memories: []string{"m"}, Scopes: []string{"/"}}, grains.CodeInvalidScope},
		{"bad scope", Spec{Roles: []Role{Reader}, Memories: []string{"m"}, Scopes: []string{"a//b"}}, grains.CodeInvalidScope},
	} {
		if got := grains.ErrorCode(tt.spec.Validate()); got != tt.code {
			t.Errorf("%s: code %q, want %q", tt.name, got, tt.code)
		}
	}
}

func TestStore(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testStore(t, Config{SQLitePath: filepath.Join(t.TempDir(), "lethe.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		testStore(t, Config{PostgresDSN: testenv.Postgres(t)})
	})
}

func testStore(t *testing.T, cfg Config) {
	ctx := context.Background()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	secret, tok, err := s.Create(ctx, Spec{Roles: []Role{Reader, Writer, Reader}, Memories: []string{"b", "a"}, Scopes: []string{"/x/"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, SecretPrefix) || len(secret) != len(SecretPrefix)+43 {
		t.Errorf("secret %q", secret)
	}
	got, err := s.Lookup(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tok.ID || strings.Join([]string{string(got.Roles[0]), string(got.Roles[1])}, ",") != "reader,writer" ||
		strings.Join(got.Memories, ",") != "a,b" || strings.Join(got.Scopes, ",") != "x" {
		t.Errorf("lookup: %+v", got)
	}
	if _, err := s.Lookup(ctx, secret+"x"); !errors.Is(err, ErrUnknown) {
		t.Errorf("wrong secret: %v", err)
	}
	if err := s.Revoke(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, secret); !errors.Is(err, ErrUnknown) {
		t.Errorf("revoked: %v", err)
	}
	if err := s.Revoke(ctx, "tok_0000000000000000"); grains.ErrorCode(err) != grains.CodeNotFound {
		t.Errorf("revoke unknown: %v", err)
	}
	// A malformed id is refused before any lookup, naming id.
	for _, id := range []string{"tok_none", "", "tok_", "tok_0000000000000000 ", "tok_000000000000000A"} {
		var e *grains.Error
		if err := s.Revoke(ctx, id); !errors.As(err, &e) || e.Code != grains.CodeInvalidArgument || e.Field != "id" {
			t.Errorf("revoke %q: %v, want invalid_argument on id", id, err)
		}
	}

	if _, err := s.Bootstrap(ctx, "short"); err == nil {
		t.Error("a short bootstrap secret was accepted")
	}
	first, second := "bootstrap-secret-one-1234", "bootstrap-secret-two-5678"
	if _, err := s.Bootstrap(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Bootstrap(ctx, first); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Lookup(ctx, first); err != nil || b.ID != BootstrapID || !b.Has(Admin) || !b.AllowsMemory("any") {
		t.Fatalf("bootstrap lookup: %+v %v", b, err)
	}
	if _, err := s.Bootstrap(ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, first); !errors.Is(err, ErrUnknown) {
		t.Error("a replaced bootstrap secret still works")
	}
	if _, err := s.Lookup(ctx, second); err != nil {
		t.Error(err)
	}
	// A revoked bootstrap token stays revoked across restarts (a new
	// Bootstrap with the same secret) until its secret changes.
	if err := s.Revoke(ctx, BootstrapID); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Bootstrap(ctx, second); err != nil || b.RevokedAt == nil {
		t.Fatalf("bootstrap of a revoked secret: %+v %v, want the token, revoked", b, err)
	}
	if _, err := s.Lookup(ctx, second); !errors.Is(err, ErrUnknown) {
		t.Errorf("a revoked bootstrap secret works again after Bootstrap: %v", err)
	}
	third := "bootstrap-secret-three-9012"
	if b, err := s.Bootstrap(ctx, third); err != nil || b.RevokedAt != nil {
		t.Fatalf("bootstrap with a new secret: %+v %v", b, err)
	}
	if _, err := s.Lookup(ctx, third); err != nil {
		t.Error(err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %d %v", len(list), err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Error(err)
	}
}

// TestRevokeAcrossReplicas runs two Stores on one database, as two
// replicas (or a replica and `lethe token revoke`) do: a token revoked on
// one stops there at once and on the other once its cache TTL has passed,
// and a Store without a cache sees the revocation at once.
func TestRevokeAcrossReplicas(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testRevokeAcrossReplicas(t, Config{SQLitePath: filepath.Join(t.TempDir(), "lethe.db")})
	})
	t.Run("postgres", func(t *testing.T) {
		testRevokeAcrossReplicas(t, Config{PostgresDSN: testenv.Postgres(t)})
	})
}

func testRevokeAcrossReplicas(t *testing.T, cfg Config) {
	ctx := context.Background()
	var mu sync.Mutex
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	cfg.CacheTTL = 2 * time.Second
	open := func(cfg Config) *Store {
		s, err := Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(cfg), open(cfg)
	uncached := cfg
	uncached.CacheTTL = -1
	c := open(uncached)

	secret, tok, err := a.Create(ctx, Spec{Roles: []Role{Reader}, Memories: []string{"m"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*Store{"a": a, "b": b, "c": c} {
		if got, err := s.Lookup(ctx, secret); err != nil || got.ID != tok.ID {
			t.Fatalf("%s: lookup of a live token: %+v %v", name, got, err)
		}
	}
	if err := a.Revoke(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lookup(ctx, secret); !errors.Is(err, ErrUnknown) {
		t.Errorf("the revoking store still accepts the token: %v", err)
	}
	if _, err := c.Lookup(ctx, secret); !errors.Is(err, ErrUnknown) {
		t.Errorf("a store without a cache still accepts the token: %v", err)
	}
	// Within the TTL the other replica answers from its cache: the bound
	// the documentation states, and proof that the cache is in use.
	advance(cfg.CacheTTL - time.Millisecond)
	if _, err := b.Lookup(ctx, secret); err != nil {
		t.Errorf("the other replica re-read the token within its TTL: %v", err)
	}
	advance(time.Millisecond)
	for i := 0; i < 2; i++ {
		if _, err := b.Lookup(ctx, secret); !errors.Is(err, ErrUnknown) {
			t.Errorf("lookup %d: the other replica accepts a token revoked a TTL ago: %v", i, err)
		}
	}
	// A wrong secret is never cached, and a revoked one is not either.
	if _, err := b.Lookup(ctx, secret+"x"); !errors.Is(err, ErrUnknown) {
		t.Errorf("wrong secret: %v", err)
	}
}

// TestRevokeRacesLookups revokes tokens while other goroutines look them
// up and fill the cache: a lookup that starts after Revoke returned must
// fail, whatever the lookups in flight read before the revocation.
func TestRevokeRacesLookups(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Config{SQLitePath: filepath.Join(t.TempDir(), "lethe.db"), CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for round := range 30 {
		secret, tok, err := s.Create(ctx, Spec{Roles: []Role{Reader}, Memories: []string{"m"}})
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					s.mu.Lock()
					clear(s.cache) // every lookup reads the database
					s.mu.Unlock()
					s.Lookup(ctx, secret)
				}
			}()
		}
		time.Sleep(time.Millisecond)
		if err := s.Revoke(ctx, tok.ID); err != nil {
			t.Fatal(err)
		}
		_, err = s.Lookup(ctx, secret)
		close(stop)
		wg.Wait()
		if !errors.Is(err, ErrUnknown) {
			t.Fatalf("round %d: a lookup after Revoke returned accepts the token: %v", round, err)
		}
		if _, err := s.Lookup(ctx, secret); !errors.Is(err, ErrUnknown) {
			t.Fatalf("round %d: the revoked token is cached: %v", round, err)
		}
	}
}

// TestSQLiteOpenedAsStore checks that the token store opens SQLite as the
// store does: the file (and its -wal and -shm files) mode 0600, and
// foreign keys on in every pooled connection, for a new file and for an
// existing one left readable by others.
func TestSQLiteOpenedAsStore(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name     string
		existing os.FileMode // 0: no file before Open
	}{{"new", 0}, {"existing 0644", 0o644}} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lethe.db")
			if tt.existing != 0 {
				if err := os.WriteFile(path, nil, tt.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(ctx, Config{SQLitePath: path})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, _, err := s.Create(ctx, Spec{Roles: []Role{Reader}, Memories: []string{"a"}}); err != nil {
				t.Fatal(err)
			}
			// Hold every connection of the pool at once, so that each is
			// asked, not one reused.
			sqlDB, err := s.db.DB()
			if err != nil {
				t.Fatal(err)
			}
			var conns []*sql.Conn
			for range 4 {
				c, err := sqlDB.Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				var on int
				if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&on); err != nil {
					t.Fatal(err)
				}
				if on != 1 {
					t.Errorf("connection %d: PRAGMA foreign_keys = %d, want 1", len(conns), on)
				}
			}
			for _, c := range conns {
				c.Close()
			}
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				st, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				if st.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, want 0600", filepath.Base(f), st.Mode().Perm())
				}
			}
		})
	}
}
