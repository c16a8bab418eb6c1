// Package index computes lethe's blind-index tokens: keyed hashes that let
// the store find grains by subject, relation, object, tag, user and content
// without holding those values.
//
// A token is HMAC-SHA256(index key, field || 0x00 || normalised value),
// truncated to 16 bytes. The index key derives from the memory and scope key
// chain (see internal/keys), so equal values in different scopes give
// different tokens and a scope's tokens die with its key. The triple index
// answers every subject/relation/object pattern: the store keeps the tokens
// in three composite indexes (SRO, ROS, OSR) whose prefixes cover all seven
// patterns.
package index

import (
	"crypto/hmac"
	"crypto/sha256"

	"github.com/lethe-io/lethe/internal/grains"
)

// Size is the length of a token in bytes.
const Size = 16

// The fields tokens are made for. Each is a domain separator.
const (
	Subject  = "subject"
	Relation = "relation"
	Object   = "object"
	Tag      = "tag"
	Dedup    = "dedup"
)

// Token returns the token of value for field under key. Subject, relation,
// object and tag values are normalised with grains.NormalizeValue; dedup
// material is used as given.
func Token(key []byte, field string, value []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(field))
	m.Write([]byte{0})
	m.Write(value)
	return m.Sum(nil)[:Size]
}

// Value returns the token of a normalised text value, or nil for "".
func Value(key []byte, field, value string) []byte {
	if value == "" {
		return nil
	}
	return Token(key, field, []byte(grains.NormalizeValue(value)))
}
