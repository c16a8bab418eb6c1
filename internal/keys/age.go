package keys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"filippo.io/age"
)

// AgeWrapper wraps data keys to a local age X25519 identity: the embedded
// default KEK. The identity file must stay private (mode 0600); whoever reads
// it together with the store reads every live grain.
type AgeWrapper struct {
	id *age.X25519Identity
}

var _ Wrapper = (*AgeWrapper)(nil)

// LoadOrCreateAgeIdentity reads the age identity at path, creating it (mode
// 0600) if it does not exist.
func LoadOrCreateAgeIdentity(path string) (*AgeWrapper, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		id, err := age.GenerateX25519Identity()
		if err != nil {
			return nil, fmt.Errorf("generate age identity: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return LoadOrCreateAgeIdentity(path) // lost a race with another opener
		}
		if err != nil {
			return nil, fmt.Errorf("create age identity: %w", err)
		}
		content := "# lethe local KEK (age X25519 identity); keep private\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n"
		if _, err := f.WriteString(content); err != nil {
			f.Close()
			return nil, fmt.Errorf("write age identity: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("write age identity: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, fmt.Errorf("write age identity: %w", err)
		}
		return &AgeWrapper{id: id}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read age identity: %w", err)
	}
	ids, err := age.ParseIdentities(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("parse age identity %s: %w", path, err)
	}
	for _, i := range ids {
		if x, ok := i.(*age.X25519Identity); ok {
			return &AgeWrapper{id: x}, nil
		}
	}
	return nil, fmt.Errorf("parse age identity %s: no X25519 identity", path)
}

// Recipient returns the public half of the identity.
func (w *AgeWrapper) Recipient() string { return w.id.Recipient().String() }

// Wrap encrypts dk to the identity's recipient.
func (w *AgeWrapper) Wrap(_ context.Context, _ Ref, dk []byte) ([]byte, error) {
	var buf bytes.Buffer
	wc, err := age.Encrypt(&buf, w.id.Recipient())
	if err != nil {
		return nil, fmt.Errorf("age wrap: %w", err)
	}
	if _, err := wc.Write(dk); err != nil {
		return nil, fmt.Errorf("age wrap: %w", err)
	}
	if err := wc.Close(); err != nil {
		return nil, fmt.Errorf("age wrap: %w", err)
	}
	return buf.Bytes(), nil
}

// Unwrap decrypts a wrapped key.
func (w *AgeWrapper) Unwrap(_ context.Context, _ Ref, wrapped []byte) ([]byte, error) {
	r, err := age.Decrypt(bytes.NewReader(wrapped), w.id)
	if err != nil {
		return nil, fmt.Errorf("age unwrap: %w", err)
	}
	dk, err := io.ReadAll(io.LimitReader(r, KeySize+1))
	if err != nil {
		return nil, fmt.Errorf("age unwrap: %w", err)
	}
	if len(dk) != KeySize {
		return nil, fmt.Errorf("age unwrap: key is %d bytes, want %d", len(dk), KeySize)
	}
	return dk, nil
}

// String describes the wrapper without secrets.
func (w *AgeWrapper) String() string {
	return "age-local(" + strings.TrimPrefix(w.Recipient(), "age1")[:12] + "…)"
}
