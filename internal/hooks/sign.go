package hooks

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts the text form of a secret (Standard Webhooks).
const SecretPrefix = "whsec_"

// SecretSize is the size of a new secret in bytes.
const SecretSize = 32

// NewSecret returns a new random secret.
func NewSecret() []byte {
	b := make([]byte, SecretSize)
	rand.Read(b)
	return b
}

// FormatSecret returns the text form of secret: "whsec_" and its base64.
func FormatSecret(secret []byte) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(secret)
}

// ParseSecret returns the bytes of a secret's text form.
func ParseSecret(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, SecretPrefix))
	if err != nil || len(b) == 0 {
		return nil, errors.New("hooks: malformed secret")
	}
	return b, nil
}

// Headers are the Standard Webhooks headers of one request.
type Headers struct {
	ID        string // webhook-id
	Timestamp string // webhook-timestamp (Unix seconds)
	Signature string // webhook-signature
}

// Sign returns the headers of body sent as message id at t, signed with
// each of secrets (the current one first): "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>", space-separated.
func Sign(secrets [][]byte, id string, t time.Time, body []byte) Headers {
	ts := strconv.FormatInt(t.Unix(), 10)
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		m := hmac.New(sha256.New, s)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write([]byte(ts))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs[i] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return Headers{ID: id, Timestamp: ts, Signature: strings.Join(sigs, " ")}
}
