package keys

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
)

// A data dir of before versions: a one-identity file without version
// lines, and keys wrapped to the X25519 recipient. They stay readable, and
// a rotation moves them to version 2.
func TestAgeWrapperReadsOldFiles(t *testing.T) {
	ctx := context.Background()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kek.age")
	old := "# lethe local KEK (age X25519 identity); keep private\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n"
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	dk := NewDataKey()
	var buf bytes.Buffer
	wc, _ := age.Encrypt(&buf, id.Recipient())
	wc.Write(dk)
	wc.Close()
	oldWrapped := buf.Bytes()

	w, err := LoadOrCreateAgeIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := w.KEKVersion(oldWrapped); !ok || v != 1 {
		t.Fatalf("old wrapped key: version %d %v, want 1", v, ok)
	}
	got, err := w.Unwrap(ctx, Ref{}, oldWrapped)
	if err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("old wrapped key: %v", err)
	}
	fresh, err := w.Wrap(ctx, Ref{}, dk)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(fresh, []byte("age-encryption.org/v1\n-> lethe-kek ")) {
		t.Errorf("a new wrap is not an age file with a lethe-kek stanza: %q", fresh[:40])
	}
	if err := w.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	moved, err := w.Rewrap(ctx, oldWrapped)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := w.KEKVersion(moved); v != 2 || !bytes.HasPrefix(moved, []byte("lethe-kek:v2\n")) {
		t.Fatalf("rewrapped key: version %d, %q", v, moved[:20])
	}
	if err := w.Trim(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{oldWrapped, fresh} {
		if _, err := w.Unwrap(ctx, Ref{}, b); !errors.Is(err, ErrKEKVersionTrimmed) {
			t.Errorf("a version-1 key after the trim: %v, want ErrKEKVersionTrimmed", err)
		}
	}
	if got, err := w.Unwrap(ctx, Ref{}, moved); err != nil || !bytes.Equal(got, dk) {
		t.Errorf("the rewrapped key: %v", err)
	}
	b, _ := os.ReadFile(path)
	if strings.Contains(string(b), id.String()) || strings.Count(string(b), "AGE-SECRET-KEY-") != 1 || !strings.Contains(string(b), "# version 2,") {
		t.Errorf("identity file after the trim:\n%s", b)
	}
	// Another process's view follows the file.
	other, err := LoadOrCreateAgeIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := other.LatestVersion(ctx); err != nil || v != 3 {
		t.Errorf("the other wrapper sees version %d (%v), want 3", v, err)
	}
}

func TestParseAgeFileErrors(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	for _, tt := range []struct{ name, file string }{
		{"empty", "# nothing\n"},
		{"bad version", "# version x\n" + id.String() + "\n"},
		{"twice", "# version 1\n" + id.String() + "\n# version 1\n" + id.String() + "\n"},
		{"garbage", "# version 1\nAGE-SECRET-KEY-1NOPE\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseAgeFile([]byte(tt.file)); err == nil {
				t.Error("accepted")
			} else if strings.Contains(err.Error(), "AGE-SECRET") {
				t.Errorf("error shows key material: %v", err)
			}
		})
	}
}
