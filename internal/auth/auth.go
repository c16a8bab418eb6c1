// Package auth keeps the HTTP API's bearer tokens and decides what each may
// do.
//
// # Tokens
//
// A token's secret is "lethe_" followed by 32 random bytes in unpadded
// base64url. Only its SHA-256 (hex) is stored, in the table api_tokens,
// beside a public id, its roles, the memories it may use ("*" for all) and
// optionally the scope prefixes it is limited to. The secret is shown once,
// when the token is created.
//
// # Roles
//
//   - writer: add and supersede grains
//   - reader: get, recall and history
//   - dpo: forget, erase, holds, purge, archive
//   - auditor: audit routes and proofs, never grain content
//   - admin: tokens, and everything the other roles may do
//
// # Storage
//
// The table lives in lethe's database (the SQLite file of the data
// directory, or the PostgreSQL database), opened through gorm by this
// package, because the root package does not expose its handle. That is a
// second connection pool on the same database; tokens are written rarely.
//
// # Cache
//
// Lookup keeps each live token it read in memory, keyed by the secret's
// SHA-256, for Config.CacheTTL (default one second), so a client's
// requests do not each read the table. A token revoked through a Store
// stops working through it at once; through another Store on the same
// database (another replica, or `lethe token revoke` on the database) it
// stops within that Store's TTL. Unknown, revoked and expired secrets are
// never cached, and a token is never trusted from memory past its expiry.
//
// # Expiry
//
// A token may be made to expire (Spec.ExpiresAt, or Spec.ExpiresIn from its
// creation), at least MinLifetime and at most MaxLifetime after its
// creation; the instant is rounded down to the second. From that instant
// Lookup refuses it with ErrUnknown, as a secret that names no token:
// nothing tells an expired token from a wrong secret. An expired token
// stays listed, with its ExpiresAt. Without an expiry a token works until
// it is revoked; the bootstrap admin token (Store.Bootstrap) never
// expires.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
)

// Role is what a token may do.
type Role string

// The roles.
const (
	Writer  Role = "writer"
	Reader  Role = "reader"
	DPO     Role = "dpo"
	Auditor Role = "auditor"
	Admin   Role = "admin"
)

// Roles lists every role.
var Roles = []Role{Writer, Reader, DPO, Auditor, Admin}

// AllMemories in a token's memory list means every memory.
const AllMemories = "*"

// SecretPrefix starts every generated secret, so secret scanners can find
// leaked ones.
const SecretPrefix = "lethe_"

// Token is a token's public description. It never holds the secret.
type Token struct {
	ID        string
	Roles     []Role
	Memories  []string
	Scopes    []string
	CreatedAt time.Time
	RevokedAt *time.Time
	// ExpiresAt, when not nil, is when the token stops working.
	ExpiresAt *time.Time
}

// Expired reports whether t has expired at now: its ExpiresAt is set and
// not after now.
func (t *Token) Expired(now time.Time) bool {
	return t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)
}

// Has reports whether t may act as role. Admin may act as every role.
func (t *Token) Has(role Role) bool {
	return slices.Contains(t.Roles, role) || slices.Contains(t.Roles, Admin)
}

// AllowsMemory reports whether t may use memory.
func (t *Token) AllowsMemory(memory string) bool {
	return slices.Contains(t.Memories, AllMemories) || slices.Contains(t.Memories, memory)
}

// Scoped reports whether t is limited to scope prefixes.
func (t *Token) Scoped() bool { return len(t.Scopes) > 0 }

// AllowsScope reports whether a grain in scope is within t's scope
// prefixes. An unscoped token allows every scope.
func (t *Token) AllowsScope(scope string) bool {
	if !t.Scoped() {
		return true
	}
	scope = strings.Trim(scope, "/")
	for _, p := range t.Scopes {
		if grains.InScope(scope, p) {
			return true
		}
	}
	return false
}

// NarrowScope returns the scope filter a recall by t may use when the
// caller asked for scope: the caller's scope when it is within one of t's
// prefixes, t's prefix when the caller's scope contains it, and false when
// they do not meet or several prefixes would be needed.
func (t *Token) NarrowScope(scope string) (string, bool) {
	scope = strings.Trim(scope, "/")
	if !t.Scoped() || t.AllowsScope(scope) {
		return scope, true
	}
	var within []string
	for _, p := range t.Scopes {
		if grains.InScope(p, scope) {
			within = append(within, p)
		}
	}
	if len(within) == 1 {
		return within[0], true
	}
	return "", false
}

// NarrowScopes returns the scope prefixes a call by t confined to scopes
// (clean prefixes, see grains.CleanScope; nil for every scope) may act
// within: where they meet t's, by NarrowScope's rule for each of them, a
// prefix within one of t's kept and one that contains some of t's
// narrowed to those. For an unscoped token that is scopes, and for nil
// t's prefixes. outside is the index in scopes of a prefix that meets none
// of t's, or -1 when each does.
func (t *Token) NarrowScopes(scopes []string) (within []string, outside int) {
	if !t.Scoped() {
		return scopes, -1
	}
	if scopes == nil {
		return slices.Clone(t.Scopes), -1
	}
	for i, s := range scopes {
		n := len(within)
		if t.AllowsScope(s) {
			within = append(within, s)
		} else {
			for _, p := range t.Scopes {
				if grains.InScope(p, s) {
					within = append(within, p)
				}
			}
		}
		if len(within) == n {
			return nil, i
		}
	}
	slices.Sort(within)
	return slices.Compact(within), -1
}

// MaxListLen bounds the memories and the scopes of one token.
const MaxListLen = 64

// MinLifetime and MaxLifetime bound the lifetime of a token that expires:
// a minute, so that it can be used at all, and 366 days, so that a typo
// (a year 20260, seconds given as milliseconds) is refused. A token that
// must outlive them is made without an expiry and revoked.
const (
	MinLifetime = time.Minute
	MaxLifetime = 366 * 24 * time.Hour
)

// Spec describes a token to create.
type Spec struct {
	Roles    []Role
	Memories []string
	Scopes   []string
	// ExpiresAt, when not nil, is when the token stops working. ExpiresIn,
	// when not nil, is its lifetime from its creation. At most one of the
	// two; neither, and the token works until it is revoked. See Expiry.
	ExpiresAt *time.Time
	ExpiresIn *time.Duration
}

// Validate normalizes and checks a spec.
func (s *Spec) Validate() error {
	if len(s.Roles) == 0 {
		return grains.FieldError(grains.CodeInvalidArgument, "roles", "name at least one role (writer, reader, dpo, auditor, admin)")
	}
	for i, r := range s.Roles {
		if !slices.Contains(Roles, r) {
			return grains.FieldError(grains.CodeInvalidArgument, fmt.Sprintf("roles[%d]", i), "unknown role (writer, reader, dpo, auditor, admin)")
		}
	}
	slices.Sort(s.Roles)
	s.Roles = slices.Compact(s.Roles)
	if len(s.Memories) == 0 {
		return grains.FieldError(grains.CodeInvalidArgument, "memories", "name at least one memory, or \"*\" for all")
	}
	if len(s.Memories) > MaxListLen {
		return grains.FieldError(grains.CodeTooLarge, "memories", "at most 64 memories")
	}
	// An empty list is not "every scope": leave scopes out for that.
	if s.Scopes != nil && len(s.Scopes) == 0 {
		return grains.FieldError(grains.CodeInvalidScope, "scopes", "an empty list; leave scopes out for every scope")
	}
	if len(s.Scopes) > MaxListLen {
		return grains.FieldError(grains.CodeTooLarge, "scopes", "at most 64 scopes")
	}
	for i, m := range s.Memories {
		if m == AllMemories {
			// As a hook's "*" (hooks.events): every memory, so naming
			// others beside it says something it does not do.
			if len(s.Memories) > 1 {
				return grains.FieldError(grains.CodeInvalidArgument, fmt.Sprintf("memories[%d]", i), `"*" stands alone`)
			}
			continue
		}
		if err := grains.ValidateMemory(m); err != nil {
			return inList(err, "memories", i)
		}
	}
	slices.Sort(s.Memories)
	s.Memories = slices.Compact(s.Memories)
	for i, p := range s.Scopes {
		if strings.Trim(p, "/") == "" {
			return grains.FieldError(grains.CodeInvalidScope, fmt.Sprintf("scopes[%d]", i), "an empty scope prefix; leave scopes out for every scope")
		}
		// Refused when malformed, never normalised ("/acme//" is not acme).
		p, err := grains.CleanScope(p)
		if err != nil {
			return inList(err, "scopes", i)
		}
		s.Scopes[i] = p
	}
	slices.Sort(s.Scopes)
	s.Scopes = slices.Compact(s.Scopes)
	return nil
}

// Expiry returns when a token made from s at now stops working, in UTC and
// rounded down to the second (never later than asked), or nil when s asks
// for no expiry. ExpiresIn must be within [MinLifetime, MaxLifetime], and
// ExpiresAt (rounded) that far from now: otherwise, or when s gives both,
// the error has code invalid_argument and names the field (expires_at or
// expires_in).
func (s *Spec) Expiry(now time.Time) (*time.Time, error) {
	const hint = "leave it out for a token that works until it is revoked"
	var at time.Time
	switch {
	case s.ExpiresAt != nil && s.ExpiresIn != nil:
		return nil, grains.FieldError(grains.CodeInvalidArgument, "expires_in", "give expires_in or expires_at, not both")
	case s.ExpiresIn != nil:
		if d := *s.ExpiresIn; d < MinLifetime || d > MaxLifetime {
			return nil, &grains.Error{Code: grains.CodeInvalidArgument, Field: "expires_in",
				Message: "must be between 60 seconds and 366 days (31622400 seconds)", Hint: hint}
		}
		at = now.Add(*s.ExpiresIn).UTC().Truncate(time.Second)
	case s.ExpiresAt != nil:
		at = s.ExpiresAt.UTC().Truncate(time.Second)
		// Sub saturates: a time centuries away is out of bounds too.
		if d := at.Sub(now); d < MinLifetime || d > MaxLifetime {
			return nil, &grains.Error{Code: grains.CodeInvalidArgument, Field: "expires_at",
				Message: "must be at least a minute in the future and at most 366 days away", Hint: hint}
		}
	default:
		return nil, nil
	}
	return &at, nil
}

// inList returns err, a check of one item of the list field, naming the
// item (memories[2]) instead of the item's own field (memory).
func inList(err error, field string, i int) error {
	var e *grains.Error
	if !errors.As(err, &e) {
		return err
	}
	named := *e
	named.Field = fmt.Sprintf("%s[%d]", field, i)
	return &named
}

// ParseRoles parses a comma-separated role list.
func ParseRoles(s string) []Role {
	var out []Role
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, Role(r))
		}
	}
	return out
}

// NewSecret returns a fresh random token secret.
func NewSecret() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// HashSecret returns the stored form of a secret: hex SHA-256.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func newID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "tok_" + hex.EncodeToString(b)
}

// ErrUnknown is returned by Lookup for a secret that names no live token:
// an unknown, revoked or expired one alike.
var ErrUnknown = errors.New("auth: unknown, revoked or expired token")

// MinSecretLen bounds bootstrap secrets chosen by an operator.
const MinSecretLen = 16

func checkSecret(secret string) error {
	if len(secret) < MinSecretLen {
		return fmt.Errorf("auth: an admin token must have at least %d characters", MinSecretLen)
	}
	if strings.TrimSpace(secret) != secret || strings.ContainsAny(secret, " \t\r\n") {
		return errors.New("auth: an admin token must not contain white space")
	}
	return nil
}
