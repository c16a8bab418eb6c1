package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/store"
)

// BootstrapID is the id of the admin token that LETHE_ADMIN_TOKEN, an
// admin token file or the generated token file names.
const BootstrapID = "tok_bootstrap"

// tokenRow is one row of api_tokens.
type tokenRow struct {
	ID        string `gorm:"primaryKey;size:40"`
	Hash      string `gorm:"size:64;not null;uniqueIndex:idx_api_tokens_hash"`
	Roles     string `gorm:"size:200;not null"`
	Memories  string `gorm:"not null"`
	Scopes    string `gorm:"not null;default:''"`
	CreatedUS int64  `gorm:"not null"`
	RevokedUS int64  `gorm:"not null;default:0"`
	// ExpiresUS is when the token stops working; NULL: never. Added
	// after the others: Migrate adds it, NULL, to an older table.
	ExpiresUS *int64
}

func (tokenRow) TableName() string { return "api_tokens" }

// Lists are stored newline-separated: memory names and scope paths cannot
// contain a newline.
func join[T ~string](v []T) string {
	s := make([]string, len(v))
	for i := range v {
		s[i] = string(v[i])
	}
	return strings.Join(s, "\n")
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func (r *tokenRow) token() *Token {
	t := &Token{ID: r.ID, Memories: split(r.Memories), Scopes: split(r.Scopes),
		CreatedAt: time.UnixMicro(r.CreatedUS).UTC()}
	for _, role := range split(r.Roles) {
		t.Roles = append(t.Roles, Role(role))
	}
	if r.RevokedUS != 0 {
		at := time.UnixMicro(r.RevokedUS).UTC()
		t.RevokedAt = &at
	}
	if r.ExpiresUS != nil {
		at := time.UnixMicro(*r.ExpiresUS).UTC()
		t.ExpiresAt = &at
	}
	return t
}

// Config says which database holds the tokens.
type Config struct {
	// SQLitePath is the SQLite file (lethe's, DataDir/lethe.db) when
	// PostgresDSN is empty.
	SQLitePath  string
	PostgresDSN string
	// Now is the clock (default time.Now): creation times, expiries and
	// the cache go by it.
	Now func() time.Time
	// CacheTTL is how long Lookup trusts a live token it read without
	// reading it again (default DefaultCacheTTL; negative: never cache).
	// A token revoked through this Store stops at once; one revoked
	// through another (another replica, or `lethe token revoke` on the
	// database) stops here within CacheTTL. A token that expires is
	// never trusted past its expiry.
	CacheTTL time.Duration
}

// DefaultCacheTTL is the default Config.CacheTTL.
const DefaultCacheTTL = time.Second

// maxCached bounds the token cache. Only live tokens are cached, so its
// size follows the tokens an admin made, never what callers send.
const maxCached = 4096

// cached is a live token Lookup read, and until when it is trusted.
type cached struct {
	tok   *Token
	until time.Time
}

// Store keeps tokens. It is safe for concurrent use.
type Store struct {
	db  *gorm.DB
	now func() time.Time
	ttl time.Duration

	mu sync.Mutex
	// cache maps a secret's hash to the live token it names.
	cache map[string]cached
	// gen counts the revocations and bootstraps through this Store: a
	// Lookup whose read began before one does not cache what it read.
	gen uint64
}

// Open opens the token table, creating it if needed. The database is
// opened as the store opens it (store.OpenDatabase): on SQLite with foreign
// keys on and the file's mode 0600.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	d := store.Database{MaxOpenConns: 4}
	switch {
	case cfg.PostgresDSN != "":
		d.Dialect, d.DSN = store.Postgres, cfg.PostgresDSN
	case cfg.SQLitePath != "":
		d.Dialect, d.DSN = store.SQLite, cfg.SQLitePath
	default:
		return nil, errors.New("auth: no database configured")
	}
	g, err := store.OpenDatabase(ctx, d)
	if err != nil {
		return nil, fmt.Errorf("auth: open token database: %w", err)
	}
	if err := store.Migrate(ctx, g, &tokenRow{}); err != nil {
		if sqlDB, err := g.DB(); err == nil {
			sqlDB.Close()
		}
		return nil, fmt.Errorf("auth: migrate token table: %w", err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	ttl := cfg.CacheTTL
	if ttl == 0 {
		ttl = DefaultCacheTTL
	}
	return &Store{db: g, now: now, ttl: ttl, cache: make(map[string]cached)}, nil
}

// Close closes the database handle.
func (s *Store) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}

// Ping checks that the token database answers.
func (s *Store) Ping(ctx context.Context) error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return store.Translate(err, "ping token database")
	}
	return store.Translate(sqlDB.PingContext(ctx), "ping token database")
}

// Create makes a token and returns its secret, shown only now. Its expiry,
// if spec asks for one, is reckoned from the Store's clock (Spec.Expiry).
func (s *Store) Create(ctx context.Context, spec Spec) (string, *Token, error) {
	if err := spec.Validate(); err != nil {
		return "", nil, err
	}
	now := s.now()
	exp, err := spec.Expiry(now)
	if err != nil {
		return "", nil, err
	}
	secret := NewSecret()
	row := &tokenRow{ID: newID(), Hash: HashSecret(secret), Roles: join(spec.Roles), Memories: join(spec.Memories),
		Scopes: join(spec.Scopes), CreatedUS: now.UnixMicro()}
	if exp != nil {
		us := exp.UnixMicro()
		row.ExpiresUS = &us
	}
	if err := s.db.WithContext(ctx).Create(row).Error; err != nil {
		return "", nil, store.Translate(err, "create token")
	}
	return secret, row.token(), nil
}

// Bootstrap makes secret the admin token BootstrapID (for every memory),
// replacing the secret it had before. It never expires. A revoked
// bootstrap token stays revoked while its secret is unchanged: the
// returned token then has RevokedAt set, and only a new secret makes it
// live again.
func (s *Store) Bootstrap(ctx context.Context, secret string) (*Token, error) {
	if err := checkSecret(secret); err != nil {
		return nil, err
	}
	row := &tokenRow{ID: BootstrapID, Hash: HashSecret(secret), Roles: string(Admin), Memories: AllMemories,
		CreatedUS: s.now().UnixMicro()}
	defer s.forget(BootstrapID)
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var cur tokenRow
		err := tx.Where("id = ?", BootstrapID).Take(&cur).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			return tx.Create(row).Error
		case err != nil:
			return err
		case cur.Hash == row.Hash:
			*row = cur
			return nil
		}
		return tx.Model(&tokenRow{}).Where("id = ?", BootstrapID).
			Updates(map[string]any{"hash": row.Hash, "roles": row.Roles, "memories": row.Memories,
				"scopes": "", "created_us": row.CreatedUS, "revoked_us": 0, "expires_us": nil}).Error
	})
	if err != nil {
		return nil, store.Translate(err, "bootstrap admin token")
	}
	return row.token(), nil
}

// Lookup returns the live token whose secret is secret, or ErrUnknown: an
// unknown, revoked or expired secret alike, nothing telling them apart. A
// live token read less than the cache TTL ago is answered from memory
// (keyed by the secret's hash; see Config.CacheTTL), never once its expiry
// has come; an unknown, revoked or expired secret is read from the
// database every time. The token may be shared between callers: they must
// not change it.
func (s *Store) Lookup(ctx context.Context, secret string) (*Token, error) {
	if secret == "" || len(secret) > 512 {
		return nil, ErrUnknown
	}
	hash := HashSecret(secret)
	s.mu.Lock()
	c, ok := s.cache[hash]
	gen := s.gen
	s.mu.Unlock()
	if ok && s.now().Before(c.until) {
		return c.tok, nil
	}
	var row tokenRow
	err := s.db.WithContext(ctx).Where("hash = ?", hash).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, ErrUnknown
	case err != nil:
		return nil, store.Translate(err, "look up token")
	case row.RevokedUS != 0:
		return nil, ErrUnknown
	}
	t := row.token()
	now := s.now()
	if t.Expired(now) {
		return nil, ErrUnknown
	}
	if s.ttl > 0 {
		until := now.Add(s.ttl)
		if t.ExpiresAt != nil && t.ExpiresAt.Before(until) {
			until = *t.ExpiresAt
		}
		s.mu.Lock()
		if s.gen == gen {
			if len(s.cache) >= maxCached {
				clear(s.cache)
			}
			s.cache[hash] = cached{tok: t, until: until}
		}
		s.mu.Unlock()
	}
	return t, nil
}

// forget drops the cached token id and makes reads in flight not cache
// what they read. Revoke and Bootstrap call it after their write, so that
// a Lookup after them on this Store reads the database.
func (s *Store) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	for h, c := range s.cache {
		if c.tok.ID == id {
			delete(s.cache, h)
		}
	}
}

// List returns every token, revoked and expired ones included, oldest
// first.
func (s *Store) List(ctx context.Context) ([]Token, error) {
	var rows []tokenRow
	if err := s.db.WithContext(ctx).Order("created_us, id").Find(&rows).Error; err != nil {
		return nil, store.Translate(err, "list tokens")
	}
	out := make([]Token, len(rows))
	for i := range rows {
		out[i] = *rows[i].token()
	}
	return out, nil
}

// CheckID refuses an id that is not a token id ("tok_" and 16 lowercase
// hex digits, as Create makes them, or BootstrapID; invalid_argument,
// field id) before any lookup, as hold and hook ids are refused.
func CheckID(id string) error {
	if h, ok := strings.CutPrefix(id, "tok_"); id != BootstrapID &&
		(!ok || len(h) != 16 || strings.Trim(h, "0123456789abcdef") != "") {
		return grains.FieldError(grains.CodeInvalidArgument, "id", "not a token id")
	}
	return nil
}

// Revoke revokes the token id. Revoking a revoked token is not an error.
// The token stops working through this Store at once, and through another
// Store on the same database within its cache TTL. An id that is not a
// token id (CheckID) is invalid_argument, one that names no token
// not_found.
func (s *Store) Revoke(ctx context.Context, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	defer s.forget(id)
	res := s.db.WithContext(ctx).Model(&tokenRow{}).Where("id = ?", id).
		Where("revoked_us = 0").Update("revoked_us", s.now().UnixMicro())
	if res.Error != nil {
		return store.Translate(res.Error, "revoke token")
	}
	if res.RowsAffected == 0 {
		var n int64
		if err := s.db.WithContext(ctx).Model(&tokenRow{}).Where("id = ?", id).Count(&n).Error; err != nil {
			return store.Translate(err, "revoke token")
		}
		if n == 0 {
			return grains.Errorf(grains.CodeNotFound, "no such token")
		}
	}
	return nil
}
