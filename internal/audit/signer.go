package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/lethe-io/lethe/proofs"
)

// LoadOrCreateSigner reads the note signing key at path, creating one
// (named origin, or "lethe-<random>") with mode 0600 if it does not exist.
// An existing key must be named origin when origin is set.
func LoadOrCreateSigner(path, origin string) (*proofs.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		name := origin
		if name == "" {
			name = "lethe-" + proofs.NewEventID()[:12]
		}
		skey, _, err := proofs.GenerateKey(name)
		if err != nil {
			return nil, fmt.Errorf("generate audit signing key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return LoadOrCreateSigner(path, origin)
		}
		if err != nil {
			return nil, fmt.Errorf("create audit signing key: %w", err)
		}
		_, werr := f.WriteString(skey + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("write audit signing key: %w", werr)
		}
		return proofs.NewSigner(skey)
	}
	if err != nil {
		return nil, fmt.Errorf("read audit signing key: %w", err)
	}
	s, err := proofs.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("audit signing key %s: %w", path, err)
	}
	if origin != "" && s.Name() != origin {
		return nil, fmt.Errorf("audit signing key %s is named %q, but the configured origin is %q", path, s.Name(), origin)
	}
	return s, nil
}
