package keys

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/hkdf"
)

// blobVersion is the first byte of every sealed grain.
const blobVersion = 0x01

// Overhead is the number of bytes Seal adds: version, nonce and tag.
const Overhead = 1 + chacha20poly1305.NonceSizeX + chacha20poly1305.Overhead

// ErrOpen is returned by Open when a blob is malformed, was sealed under
// another key, or was moved to another memory, scope or key chain.
var ErrOpen = errors.New("grain blob does not open")

// GrainAD returns the associated data that binds a blob to its memory, scope
// and key chain, so it cannot be moved between rows or scopes.
func GrainAD(memory, scope, chainID string) []byte {
	return []byte("lethe/grain/v1\x00" + memory + "\x00" + scope + "\x00" + chainID)
}

// Seal encrypts plaintext with XChaCha20-Poly1305 under key with a random
// nonce: version || nonce || ciphertext.
func Seal(key, ad, plaintext []byte) []byte {
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		panic("keys: bad grain key size")
	}
	out := make([]byte, 1+chacha20poly1305.NonceSizeX, Overhead+len(plaintext))
	out[0] = blobVersion
	if _, err := rand.Read(out[1:]); err != nil {
		panic("keys: crypto/rand failed: " + err.Error())
	}
	return aead.Seal(out, out[1:], plaintext, ad)
}

// Open decrypts a blob made by Seal.
func Open(key, ad, blob []byte) ([]byte, error) {
	if len(blob) < Overhead || blob[0] != blobVersion {
		return nil, ErrOpen
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, ErrOpen
	}
	nonce := blob[1 : 1+chacha20poly1305.NonceSizeX]
	pt, err := aead.Open(nil, nonce, blob[1+chacha20poly1305.NonceSizeX:], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

// derive returns HKDF-SHA256 over the concatenated keys with the given info.
func derive(info string, ks ...[]byte) []byte {
	var ikm []byte
	for _, k := range ks {
		ikm = append(ikm, k...)
	}
	out := make([]byte, KeySize)
	if _, err := io.ReadFull(hkdf.New(sha256.New, ikm, []byte("lethe/v1"), []byte(info)), out); err != nil {
		panic("keys: hkdf: " + err.Error())
	}
	return out
}
