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
// stops within that Store's TTL. Unknown and revoked secrets are never
// cached.
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

// MaxListLen bounds the memories and the scopes of one token.
const MaxListLen = 64

// Spec describes a token to create.
type Spec struct {
	Roles    []Role
	Memories []string
	Scopes   []string
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

// ErrUnknown is returned by Lookup for a secret that names no live token.
var ErrUnknown = errors.New("auth: unknown or revoked token")

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
