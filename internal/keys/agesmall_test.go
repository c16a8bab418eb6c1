package keys

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"filippo.io/age"
	"pgregory.net/rapid"

	"github.com/lethe-io/lethe/internal/testenv"
)

// libraryOpen is what Unwrap did before openSmallAge, and still does for
// what openSmallAge leaves: age.Decrypt, and a data key only.
func libraryOpen(body []byte, ids ...age.Identity) ([]byte, bool) {
	r, err := age.Decrypt(bytes.NewReader(body), ids...)
	if err != nil {
		return nil, false
	}
	dk, err := io.ReadAll(io.LimitReader(r, KeySize+1))
	if err != nil || len(dk) != KeySize {
		return nil, false
	}
	return dk, true
}

// TestSmallAgeIsLibrary checks openSmallAge against age.Decrypt on age files
// of every kind an unwrap can meet: data keys wrapped to the symmetric KEK
// stanza and to the X25519 recipient, files of other sizes (empty, a byte
// short, a byte over, two chunks), and each of them with a byte flipped,
// cut short or extended. Whatever openSmallAge opens, the library opens to
// the same bytes; and it opens every intact wrapped key (so the library's
// 64 KiB buffers are off the path of every unwrap).
func TestSmallAgeIsLibrary(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	sym, err := newSymKEK(id)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := age.GenerateX25519Identity()
	otherSym, _ := newSymKEK(other)
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.SampledFrom([]int{KeySize, KeySize, KeySize, 0, 1, KeySize - 1, KeySize + 1, 64 << 10, 64<<10 + 7}).Draw(t, "size")
		plain := rapid.SliceOfN(rapid.Byte(), size, size).Draw(t, "plain")
		var to age.Recipient = sym
		if rapid.Bool().Draw(t, "x25519") {
			to = id.Recipient()
		}
		var buf bytes.Buffer
		wc, err := age.Encrypt(&buf, to)
		if err != nil {
			t.Fatal(err)
		}
		wc.Write(plain)
		if err := wc.Close(); err != nil {
			t.Fatal(err)
		}
		body := buf.Bytes()
		intact := true
		switch rapid.IntRange(0, 4).Draw(t, "change") {
		case 1:
			i := rapid.IntRange(0, len(body)-1).Draw(t, "at")
			body[i] ^= byte(rapid.IntRange(1, 255).Draw(t, "xor"))
			intact = false
		case 2:
			body = body[:rapid.IntRange(0, len(body)-1).Draw(t, "cut")]
			intact = false
		case 3:
			body = append(body, rapid.SliceOfN(rapid.Byte(), 1, 20).Draw(t, "extra")...)
			intact = false
		}
		ids := []age.Identity{sym, id}
		if rapid.IntRange(0, 5).Draw(t, "stranger") == 0 {
			ids = []age.Identity{otherSym, other}
			intact = false
		}
		fast, fastOK := openSmallAge(body, ids...)
		lib, libOK := libraryOpen(body, ids...)
		if fastOK && (!libOK || !bytes.Equal(fast, lib)) {
			t.Fatalf("openSmallAge opened %x, the library %x (ok %v)", fast, lib, libOK)
		}
		if intact && size == KeySize && (!fastOK || !bytes.Equal(fast, plain)) {
			t.Fatalf("openSmallAge did not open an intact wrapped key (ok %v)", fastOK)
		}
	})
}

// TestSmallAgeOpensTheAgeBinary: a data key encrypted by the stock age
// binary to the KEK's X25519 recipient (as keys wrapped before the
// symmetric stanza were) opens through openSmallAge.
func TestSmallAgeOpensTheAgeBinary(t *testing.T) {
	bin := testenv.Age(t)
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dk := NewDataKey()
	in := filepath.Join(t.TempDir(), "dk")
	if err := os.WriteFile(in, dk, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-e", "-r", id.Recipient().String(), in).Output()
	if err != nil {
		t.Fatalf("age -e: %v", err)
	}
	got, ok := openSmallAge(out, id)
	if !ok || !bytes.Equal(got, dk) {
		t.Fatalf("openSmallAge of the age binary's file: %x, %v; want %x", got, ok, dk)
	}
}

// BenchmarkAgeUnwrap opens a wrapped data key through age.Decrypt and
// through openSmallAge, the path Unwrap takes.
func BenchmarkAgeUnwrap(b *testing.B) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	sym, err := newSymKEK(id)
	if err != nil {
		b.Fatal(err)
	}
	body, err := ageWrap(sym, 1, NewDataKey())
	if err != nil {
		b.Fatal(err)
	}
	for name, open := range map[string]func([]byte, ...age.Identity) ([]byte, bool){"library": libraryOpen, "small": openSmallAge} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := open(body, sym, id); !ok {
					b.Fatal("does not open")
				}
			}
		})
	}
}
