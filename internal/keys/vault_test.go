package keys

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/testenv"
)

func newTestVaultWrapper(tb testing.TB, cfg VaultConfig) *VaultWrapper {
	tb.Helper()
	w, err := NewVaultWrapper(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// testRef returns a Ref for dk as the Keyring would make it.
func testRef(dk []byte) Ref {
	return Ref{Memory: "m1", Kind: KindUser, Fingerprint: Fingerprint(dk)}
}

// checkNoSecret fails tb if err's text holds the token or a key.
func checkNoSecret(tb testing.TB, err error, secrets ...string) {
	tb.Helper()
	if err == nil {
		return
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			tb.Errorf("error text holds a secret: %v", err)
		}
	}
}

func TestNewVaultWrapper(t *testing.T) {
	tests := []struct {
		name    string
		cfg     VaultConfig
		want    string
		wantErr bool
	}{
		{name: "defaults", cfg: VaultConfig{Address: "http://127.0.0.1:8200", Token: "s.secret\n"},
			want: "vault-transit(http://127.0.0.1:8200, transit/keys/lethe-kek)"},
		{name: "dedicated", cfg: VaultConfig{Address: "http://v:8200", Token: "hvs.dedicated-secret", Mount: "/kms/transit/", Dedicated: true},
			want: "vault-transit(http://v:8200, dedicated kms/transit/keys/lethe-dk-*)"},
		{name: "no address", cfg: VaultConfig{Token: "t"}, wantErr: true},
		{name: "no token", cfg: VaultConfig{Address: "http://v", Token: " \n"}, wantErr: true},
		{name: "key name with slash", cfg: VaultConfig{Address: "http://v", Token: "t", KeyName: "a/b"}, wantErr: true},
		{name: "bad mount", cfg: VaultConfig{Address: "http://v", Token: "t", Mount: "a/../b"}, wantErr: true},
		{name: "bad prefix", cfg: VaultConfig{Address: "http://v", Token: "t", DedicatedPrefix: "x/"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewVaultWrapper(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := w.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if strings.Contains(w.String(), strings.TrimSpace(tt.cfg.Token)) {
				t.Errorf("String() holds the token")
			}
		})
	}
}

func TestVaultKeyVersion(t *testing.T) {
	tests := []struct {
		in     string
		want   int
		wantOK bool
	}{
		{"vault:v1:abc", 1, true},
		{"vault:v12:abc", 12, true},
		{"vault:v0:abc", 0, false},
		{"vault:vx:abc", 0, false},
		{"vault:v3", 0, false},
		{"age-encryption.org/v1", 0, false},
	}
	for _, tt := range tests {
		got, ok := VaultKeyVersion([]byte(tt.in))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("VaultKeyVersion(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestVaultKeyring runs the Keyring on Vault in both modes: chains written
// by one keyring are read back by a fresh one, through Vault.
func TestVaultKeyring(t *testing.T) {
	addr, token := testVault(t)
	for _, dedicated := range []bool{false, true} {
		name := map[bool]string{false: "shared", true: "dedicated"}[dedicated]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			cfg := VaultConfig{Address: addr, Token: token, Dedicated: dedicated}
			if dedicated {
				cfg.DedicatedPrefix = "lethe-test-" + randHex(4) + "-"
			} else {
				cfg.KeyName = newTransitKey(t, addr, token)
			}
			w := newTestVaultWrapper(t, cfg)
			if err := w.Check(ctx); err != nil {
				t.Fatal(err)
			}
			store := &vaultTestStore{}
			kr := NewKeyring(KeyringConfig{Store: store, Wrapper: w})
			c, err := kr.WriteChain(ctx, "m1", "acme/prod", "john")
			if err != nil {
				t.Fatal(err)
			}
			blob := Seal(c.GrainKey, GrainAD("m1", "acme/prod", c.ID), []byte("hello"))

			recs := store.all()
			if len(recs) != 4 { // memory, acme, acme/prod, user
				t.Fatalf("%d key records, want 4", len(recs))
			}
			var dedicatedKeys []string
			for _, r := range recs {
				if !strings.HasPrefix(string(r.Wrapped), "vault:v1:") {
					t.Errorf("record %d wrapped as %.12q..., want a transit ciphertext", r.ID, r.Wrapped)
				}
				if dedicated {
					n, err := w.DedicatedKeyName(Ref{Fingerprint: r.Fingerprint})
					if err != nil {
						t.Fatal(err)
					}
					dedicatedKeys = append(dedicatedKeys, "transit/keys/"+n)
				}
			}
			if dedicated {
				c := testVaultClient(t, addr, token)
				t.Cleanup(func() { deleteTransitKeys(c, dedicatedKeys...) })
				for _, p := range dedicatedKeys {
					if s, err := c.Logical().Read(p); err != nil || s == nil {
						t.Errorf("dedicated key %s: %v, %v", p, s, err)
					}
				}
			}

			fresh := NewKeyring(KeyringConfig{Store: store, Wrapper: w})
			gk, err := fresh.GrainKey(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gk, c.GrainKey) {
				t.Fatal("grain key read back differs")
			}
			pt, err := Open(gk, GrainAD("m1", "acme/prod", c.ID), blob)
			if err != nil || string(pt) != "hello" {
				t.Fatalf("Open = %q, %v", pt, err)
			}
		})
	}
}

func TestVaultWrongToken(t *testing.T) {
	addr, token := testVault(t)
	ctx := context.Background()
	key := newTransitKey(t, addr, token)
	good := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, KeyName: key})
	dk := NewDataKey()
	wrapped, err := good.Wrap(ctx, testRef(dk), dk)
	if err != nil {
		t.Fatal(err)
	}

	const badToken = "hvs.not-a-real-token-0123456789"
	bad := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: badToken, KeyName: key})
	_, err = bad.Wrap(ctx, testRef(dk), dk)
	if !errors.Is(err, ErrVaultDenied) {
		t.Errorf("Wrap with a bad token: %v, want ErrVaultDenied", err)
	}
	checkNoSecret(t, err, badToken, token)
	_, err = bad.Unwrap(ctx, testRef(dk), wrapped)
	if !errors.Is(err, ErrVaultDenied) {
		t.Errorf("Unwrap with a bad token: %v, want ErrVaultDenied", err)
	}
	checkNoSecret(t, err, badToken, token, string(wrapped))
	var ve *VaultError
	if !errors.As(err, &ve) || ve.StatusCode != 403 {
		t.Errorf("error %v: want a *VaultError with status 403", err)
	}
	if err := bad.Check(ctx); !errors.Is(err, ErrVaultDenied) {
		t.Errorf("Check with a bad token: %v, want ErrVaultDenied", err)
	}
}

func TestVaultKeyMissing(t *testing.T) {
	addr, token := testVault(t)
	ctx := context.Background()
	dk := NewDataKey()
	other := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, KeyName: newTransitKey(t, addr, token)})
	wrapped, err := other.Wrap(ctx, testRef(dk), dk)
	if err != nil {
		t.Fatal(err)
	}

	missing := "lethe-test-missing-" + randHex(8)
	w := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, KeyName: missing})
	if err := w.Check(ctx); !errors.Is(err, ErrVaultKeyMissing) {
		t.Errorf("Check: %v, want ErrVaultKeyMissing", err)
	}
	_, err = w.Wrap(ctx, testRef(dk), dk)
	if !errors.Is(err, ErrVaultKeyMissing) {
		t.Errorf("Wrap: %v, want ErrVaultKeyMissing", err)
	}
	// A root token may create keys, and transit creates a missing key on
	// encrypt: Wrap must not have.
	c := testVaultClient(t, addr, token)
	if s, err := c.Logical().Read("transit/keys/" + missing); err != nil || s != nil {
		deleteTransitKeys(c, "transit/keys/"+missing)
		t.Errorf("Wrap created the missing key: %v, %v", s, err)
	}
	_, err = w.Unwrap(ctx, testRef(dk), wrapped)
	if !errors.Is(err, ErrVaultKeyMissing) {
		t.Errorf("Unwrap: %v, want ErrVaultKeyMissing", err)
	}
	checkNoSecret(t, err, token, string(wrapped))
	if err := w.Rotate(ctx); !errors.Is(err, ErrVaultKeyMissing) {
		t.Errorf("Rotate: %v, want ErrVaultKeyMissing", err)
	}
	if _, err := w.LatestVersion(ctx); !errors.Is(err, ErrVaultKeyMissing) {
		t.Errorf("LatestVersion: %v, want ErrVaultKeyMissing", err)
	}

	noMount := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, Mount: "no-such-mount-" + randHex(4)})
	if _, err := noMount.Unwrap(ctx, testRef(dk), wrapped); !errors.Is(err, ErrVaultKeyMissing) {
		t.Errorf("Unwrap on a missing mount: %v, want ErrVaultKeyMissing", err)
	}
}

// TestVaultStopped stops a Vault of the test's own mid-run: every call then
// fails with ErrVaultUnreachable, the Keyring stores no key it could not
// wrap and caches no failure, and keys it had unwrapped before stay right.
func TestVaultStopped(t *testing.T) {
	srv := testenv.VaultDev(t)
	ctx := context.Background()
	w := newTestVaultWrapper(t, VaultConfig{Address: srv.Addr, Token: srv.Token, Timeout: 5 * time.Second})
	store := &vaultTestStore{}
	kr := NewKeyring(KeyringConfig{Store: store, Wrapper: w})
	c, err := kr.WriteChain(ctx, "m1", "acme", "john")
	if err != nil {
		t.Fatal(err)
	}
	recs := store.all()

	srv.Stop()

	start := time.Now()
	_, err = w.Unwrap(ctx, Ref{Fingerprint: recs[0].Fingerprint}, recs[0].Wrapped)
	if !errors.Is(err, ErrVaultUnreachable) {
		t.Fatalf("Unwrap: %v, want ErrVaultUnreachable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Unwrap took %v to fail on a refused connection", d)
	}
	checkNoSecret(t, err, srv.Token, string(recs[0].Wrapped))
	dk := NewDataKey()
	if _, err := w.Wrap(ctx, testRef(dk), dk); !errors.Is(err, ErrVaultUnreachable) {
		t.Errorf("Wrap: %v, want ErrVaultUnreachable", err)
	}

	// A new memory needs a new key: nothing may be stored for it.
	_, err = kr.WriteChain(ctx, "m2", "acme", "")
	if !errors.Is(err, ErrVaultUnreachable) || grains.ErrorCode(err) != grains.CodeUnavailable {
		t.Errorf("WriteChain on a new memory: %v (code %q), want unavailable wrapping ErrVaultUnreachable", err, grains.ErrorCode(err))
	}
	if n := len(store.all()); n != len(recs) {
		t.Errorf("store holds %d keys after a failed wrap, want %d", n, len(recs))
	}

	// A keyring that had not unwrapped the chain fails, and keeps failing:
	// the failure is not cached as a key.
	cold := NewKeyring(KeyringConfig{Store: store, Wrapper: w})
	for range 2 {
		gk, err := cold.GrainKey(ctx, c.ID)
		if !errors.Is(err, ErrVaultUnreachable) || gk != nil {
			t.Errorf("GrainKey on a cold keyring: %x, %v; want ErrVaultUnreachable", gk, err)
		}
	}
	// The warm keyring still has the keys it unwrapped while Vault was up;
	// they are the real ones.
	gk, err := kr.GrainKey(ctx, c.ID)
	if err != nil || !bytes.Equal(gk, c.GrainKey) {
		t.Errorf("GrainKey on the warm keyring: %v", err)
	}
}

// TestVaultSealed seals a Vault of the test's own: calls fail with
// ErrVaultSealed, and work again, with the same keys, once it is unsealed.
func TestVaultSealed(t *testing.T) {
	srv := testenv.VaultDev(t)
	ctx := context.Background()
	w := newTestVaultWrapper(t, VaultConfig{Address: srv.Addr, Token: srv.Token})
	dk := NewDataKey()
	wrapped, err := w.Wrap(ctx, testRef(dk), dk)
	if err != nil {
		t.Fatal(err)
	}

	srv.Seal(t)
	_, err = w.Unwrap(ctx, testRef(dk), wrapped)
	if !errors.Is(err, ErrVaultSealed) {
		t.Fatalf("Unwrap: %v, want ErrVaultSealed", err)
	}
	checkNoSecret(t, err, srv.Token, string(wrapped))
	if _, err := w.Wrap(ctx, testRef(dk), dk); !errors.Is(err, ErrVaultSealed) {
		t.Errorf("Wrap: %v, want ErrVaultSealed", err)
	}

	srv.Unseal(t)
	got, err := w.Unwrap(ctx, testRef(dk), wrapped)
	if err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("Unwrap after unseal: %v", err)
	}
}

func TestVaultDedicatedDestroy(t *testing.T) {
	addr, token := testVault(t)
	ctx := context.Background()
	prefix := "lethe-test-" + randHex(4) + "-"
	w := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, Dedicated: true, DedicatedPrefix: prefix})
	c := testVaultClient(t, addr, token)

	dk1, dk2 := NewDataKey(), NewDataKey()
	ref1, ref2 := testRef(dk1), testRef(dk2)
	n1, _ := w.DedicatedKeyName(ref1)
	n2, _ := w.DedicatedKeyName(ref2)
	t.Cleanup(func() { deleteTransitKeys(c, "transit/keys/"+n1, "transit/keys/"+n2) })
	if n1 != prefix+ref1.Fingerprint[:32] {
		t.Fatalf("dedicated key name %q", n1)
	}
	w1, err := w.Wrap(ctx, ref1, dk1)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := w.Wrap(ctx, ref2, dk2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Unwrap(ctx, ref2, w1); err == nil {
		t.Error("a wrapped key unwrapped under another data key's transit key")
	}

	if err := w.Destroy(ctx, ref1); err != nil {
		t.Fatal(err)
	}
	_, err = w.Unwrap(ctx, ref1, w1)
	if !errors.Is(err, ErrVaultKeyMissing) {
		t.Errorf("Unwrap after Destroy: %v, want ErrVaultKeyMissing", err)
	}
	checkNoSecret(t, err, token, string(w1))
	if s, err := c.Logical().Read("transit/keys/" + n1); err != nil || s != nil {
		t.Errorf("transit key still there after Destroy: %v, %v", s, err)
	}
	if err := w.Destroy(ctx, ref1); err != nil {
		t.Errorf("second Destroy: %v, want nil (idempotent)", err)
	}
	if got, err := w.Unwrap(ctx, ref2, w2); err != nil || !bytes.Equal(got, dk2) {
		t.Errorf("the other key: %v", err)
	}

	shared := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token})
	if err := shared.Destroy(ctx, ref2); err == nil {
		t.Error("Destroy in shared mode: want an error")
	}
	if err := w.Rotate(ctx); err == nil {
		t.Error("Rotate in dedicated mode: want an error")
	}
}

// TestVaultDedicatedErase erases a user through the Keyring's store in
// dedicated mode: a fresh keyring can no longer derive the grain key, even
// from a copy of the wrapped key taken before (a backup).
func TestVaultDedicatedErase(t *testing.T) {
	addr, token := testVault(t)
	ctx := context.Background()
	w := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, Dedicated: true,
		DedicatedPrefix: "lethe-test-" + randHex(4) + "-"})
	store := &vaultTestStore{}
	kr := NewKeyring(KeyringConfig{Store: store, Wrapper: w})
	ch, err := kr.WriteChain(ctx, "m1", "acme", "john")
	if err != nil {
		t.Fatal(err)
	}
	c := testVaultClient(t, addr, token)
	var user Record
	for _, r := range store.all() {
		n, _ := w.DedicatedKeyName(Ref{Fingerprint: r.Fingerprint})
		t.Cleanup(func() { deleteTransitKeys(c, "transit/keys/"+n) })
		if r.ID == ch.UserKeyID {
			user = r
		}
	}
	// The store row still holds the wrapped key (as a backup would): only
	// the transit key goes.
	if err := w.Destroy(ctx, Ref{Memory: user.Memory, Kind: user.Kind, Fingerprint: user.Fingerprint}); err != nil {
		t.Fatal(err)
	}
	_, err = NewKeyring(KeyringConfig{Store: store, Wrapper: w}).GrainKey(ctx, ch.ID)
	if !errors.Is(err, ErrVaultKeyMissing) {
		t.Fatalf("GrainKey after erasing the user's transit key: %v, want ErrVaultKeyMissing", err)
	}
}

// TestVaultRotateRewrapTrim is `lethe keys rotate`: rotate the KEK, rewrap
// the live keys, trim the old version. A copy wrapped before (a backup) no
// longer unwraps after the trim; the rewrapped key does.
func TestVaultRotateRewrapTrim(t *testing.T) {
	addr, token := testVault(t)
	ctx := context.Background()
	w := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, KeyName: newTransitKey(t, addr, token)})
	dk := NewDataKey()
	ref := testRef(dk)
	live, err := w.Wrap(ctx, ref, dk)
	if err != nil {
		t.Fatal(err)
	}
	backup := bytes.Clone(live)
	if v, _ := VaultKeyVersion(live); v != 1 {
		t.Fatalf("wrapped under version %d, want 1", v)
	}

	if err := w.Rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := w.LatestVersion(ctx); err != nil || v != 2 {
		t.Fatalf("LatestVersion = %d, %v; want 2", v, err)
	}
	live, err = w.Rewrap(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := VaultKeyVersion(live); v != 2 {
		t.Fatalf("rewrapped under version %d, want 2", v)
	}
	if got, err := w.Unwrap(ctx, ref, backup); err != nil || !bytes.Equal(got, dk) {
		t.Fatalf("backup before trim: %v", err)
	}

	if err := w.Trim(ctx, 2); err != nil {
		t.Fatal(err)
	}
	st, err := w.KeyState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st != (VaultKeyState{Latest: 2, MinDecryptionVersion: 2, MinEncryptionVersion: 2, MinAvailableVersion: 2}) {
		t.Errorf("key state after trim: %+v", st)
	}
	_, err = w.Unwrap(ctx, ref, backup)
	if !errors.Is(err, ErrVaultKeyVersionRetired) {
		t.Errorf("backup after trim: %v, want ErrVaultKeyVersionRetired", err)
	}
	checkNoSecret(t, err, token, string(backup))
	if _, err := w.Rewrap(ctx, backup); !errors.Is(err, ErrVaultKeyVersionRetired) {
		t.Errorf("rewrap of the backup after trim: %v, want ErrVaultKeyVersionRetired", err)
	}
	if got, err := w.Unwrap(ctx, ref, live); err != nil || !bytes.Equal(got, dk) {
		t.Errorf("rewrapped key after trim: %v", err)
	}

	if err := w.Trim(ctx, 2); err != nil {
		t.Errorf("Trim again: %v, want nil", err)
	}
	if err := w.Trim(ctx, 3); err == nil {
		t.Error("Trim past the latest version: want an error")
	}
	// Trim only ever moves the horizon forward.
	if err := w.Trim(ctx, 1); err != nil {
		t.Errorf("Trim(1) after Trim(2): %v, want nil (nothing to do)", err)
	}
}

func BenchmarkVaultWrap(b *testing.B) {
	addr, token := testVault(b)
	w := newTestVaultWrapper(b, VaultConfig{Address: addr, Token: token, KeyName: newTransitKey(b, addr, token)})
	ctx := context.Background()
	dk := NewDataKey()
	ref := testRef(dk)
	if _, err := w.Wrap(ctx, ref, dk); err != nil { // checks the key once
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := w.Wrap(ctx, ref, dk); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
	b.Run("parallel16", func(b *testing.B) {
		b.SetParallelism(16 / max(1, runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := w.Wrap(ctx, ref, dk); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}

func BenchmarkVaultUnwrap(b *testing.B) {
	addr, token := testVault(b)
	w := newTestVaultWrapper(b, VaultConfig{Address: addr, Token: token, KeyName: newTransitKey(b, addr, token)})
	ctx := context.Background()
	dk := NewDataKey()
	ref := testRef(dk)
	wrapped, err := w.Wrap(ctx, ref, dk)
	if err != nil {
		b.Fatal(err)
	}
	var bad atomic.Int64
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if _, err := w.Unwrap(ctx, ref, wrapped); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
	b.Run("parallel16", func(b *testing.B) {
		b.SetParallelism(16 / max(1, runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if got, err := w.Unwrap(ctx, ref, wrapped); err != nil || !bytes.Equal(got, dk) {
					bad.Add(1)
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
	if n := bad.Load(); n > 0 {
		b.Fatalf("%d unwraps failed", n)
	}
}

// TestVaultTimeout points the wrapper at a server that accepts connections
// and never answers: the call ends at the timeout with ErrVaultUnreachable.
func TestVaultTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	defer func() { ln.Close(); <-done }()
	go func() {
		defer close(done)
		var held []net.Conn // open, never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	w := newTestVaultWrapper(t, VaultConfig{Address: "http://" + ln.Addr().String(), Token: "hvs.timeout-token",
		Timeout: 200 * time.Millisecond})
	dk := NewDataKey()
	start := time.Now()
	_, err = w.Unwrap(context.Background(), testRef(dk), []byte("vault:v1:AAAA"))
	if !errors.Is(err, ErrVaultUnreachable) {
		t.Fatalf("Unwrap: %v, want ErrVaultUnreachable", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Unwrap returned after %v, want about the 200ms timeout", d)
	}
	checkNoSecret(t, err, "hvs.timeout-token")
}

// TestVaultPolicies runs the wrapper with tokens holding exactly the
// policies of docs/compliance/vault.md, so the documented policies are the
// ones that work.
func TestVaultPolicies(t *testing.T) {
	addr, token := testVault(t)
	ctx := context.Background()
	policies := docPolicies(t, "../../docs/compliance/vault.md")
	for _, name := range []string{"lethe", "lethe-rotate", "lethe-dedicated"} {
		if policies[name] == "" {
			t.Fatalf("no policy %q in docs/compliance/vault.md", name)
		}
	}
	root := testVaultClient(t, addr, token)
	key := newTransitKey(t, addr, token)
	prefix := "lethe-test-" + randHex(4) + "-"
	tokenFor := func(t *testing.T, policy string) string {
		t.Helper()
		hcl := strings.ReplaceAll(policies[policy], "lethe-kek", key)
		hcl = strings.ReplaceAll(hcl, "lethe-dk-", prefix)
		pname := "lethe-test-" + policy + "-" + randHex(4)
		if _, err := root.Logical().Write("sys/policies/acl/"+pname, map[string]any{"policy": hcl}); err != nil {
			t.Fatalf("write policy: %v", err)
		}
		t.Cleanup(func() { _, _ = root.Logical().Delete("sys/policies/acl/" + pname) })
		s, err := root.Logical().Write("auth/token/create", map[string]any{"policies": []string{pname}, "ttl": "10m"})
		if err != nil {
			t.Fatalf("create token: %v", err)
		}
		return s.Auth.ClientToken
	}

	t.Run("lethe", func(t *testing.T) {
		w := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: tokenFor(t, "lethe"), KeyName: key})
		if err := w.Check(ctx); err != nil {
			t.Fatal(err)
		}
		dk := NewDataKey()
		wrapped, err := w.Wrap(ctx, testRef(dk), dk)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := w.Unwrap(ctx, testRef(dk), wrapped); err != nil || !bytes.Equal(got, dk) {
			t.Fatalf("Unwrap: %v", err)
		}
		if err := w.Rotate(ctx); !errors.Is(err, ErrVaultDenied) {
			t.Errorf("Rotate with the service policy: %v, want ErrVaultDenied", err)
		}
		other := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: w.cfg.Token, KeyName: key + "-other"})
		if _, err := other.Wrap(ctx, testRef(dk), dk); err == nil {
			t.Error("Wrap under another key name: want an error")
		}
	})
	t.Run("lethe-rotate", func(t *testing.T) {
		svc := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, KeyName: key})
		dk := NewDataKey()
		wrapped, err := svc.Wrap(ctx, testRef(dk), dk)
		if err != nil {
			t.Fatal(err)
		}
		w := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: tokenFor(t, "lethe-rotate"), KeyName: key})
		if err := w.Rotate(ctx); err != nil {
			t.Fatal(err)
		}
		v, err := w.LatestVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if wrapped, err = w.Rewrap(ctx, wrapped); err != nil {
			t.Fatal(err)
		}
		if err := w.Trim(ctx, v); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Unwrap(ctx, testRef(dk), wrapped); !errors.Is(err, ErrVaultDenied) {
			t.Errorf("Unwrap with the rotation policy: %v, want ErrVaultDenied", err)
		}
		if got, err := svc.Unwrap(ctx, testRef(dk), wrapped); err != nil || !bytes.Equal(got, dk) {
			t.Errorf("rewrapped key: %v", err)
		}
	})
	t.Run("lethe-dedicated", func(t *testing.T) {
		w := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: tokenFor(t, "lethe-dedicated"),
			Dedicated: true, DedicatedPrefix: prefix})
		if err := w.Check(ctx); err != nil {
			t.Fatal(err)
		}
		dk := NewDataKey()
		n, _ := w.DedicatedKeyName(testRef(dk))
		t.Cleanup(func() { deleteTransitKeys(root, "transit/keys/"+n) })
		wrapped, err := w.Wrap(ctx, testRef(dk), dk)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := w.Unwrap(ctx, testRef(dk), wrapped); err != nil || !bytes.Equal(got, dk) {
			t.Fatalf("Unwrap: %v", err)
		}
		if err := w.Destroy(ctx, testRef(dk)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Unwrap(ctx, testRef(dk), wrapped); !errors.Is(err, ErrVaultKeyMissing) {
			t.Errorf("Unwrap after Destroy: %v, want ErrVaultKeyMissing", err)
		}
	})
}

// docPolicies returns the ```hcl blocks of a Markdown file whose first line
// is "# policy: NAME", by name.
func docPolicies(tb testing.TB, path string) map[string]string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{}
	rest := string(b)
	for {
		_, after, ok := strings.Cut(rest, "```hcl\n")
		if !ok {
			return out
		}
		block, after, ok := strings.Cut(after, "```")
		if !ok {
			tb.Fatalf("%s: unterminated hcl block", path)
		}
		rest = after
		first, body, _ := strings.Cut(block, "\n")
		if name, ok := strings.CutPrefix(first, "# policy: "); ok {
			out[strings.TrimSpace(name)] = body
		}
	}
}

// WrapBatch wraps many keys with one transit call in shared mode (one per
// key in dedicated mode), and each unwraps to its key.
func TestVaultWrapBatch(t *testing.T) {
	addr, token := testVault(t)
	ctx := context.Background()
	for _, dedicated := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared", true: "dedicated"}[dedicated], func(t *testing.T) {
			cfg := VaultConfig{Address: addr, Token: token, Dedicated: dedicated}
			if dedicated {
				cfg.DedicatedPrefix = "lethe-test-" + randHex(4) + "-"
			} else {
				cfg.KeyName = newTransitKey(t, addr, token)
			}
			w := newTestVaultWrapper(t, cfg)
			n := 3
			if !dedicated {
				n = maxBatch + 3 // two requests
			}
			dks := make([][]byte, n)
			refs := make([]Ref, n)
			for i := range dks {
				dks[i] = NewDataKey()
				refs[i] = testRef(dks[i])
			}
			before := w.Calls()
			wrapped, err := w.WrapBatch(ctx, refs, dks)
			if err != nil {
				t.Fatal(err)
			}
			if calls := w.Calls() - before; !dedicated && calls != 2 {
				t.Errorf("%d Vault calls for %d keys, want 2", calls, n)
			}
			for i, wr := range wrapped {
				dk, err := w.Unwrap(ctx, refs[i], wr)
				if err != nil || !bytes.Equal(dk, dks[i]) {
					t.Fatalf("key %d: %v", i, err)
				}
			}
			if _, err := w.WrapBatch(ctx, refs[:1], dks); err == nil {
				t.Error("mismatched refs and keys accepted")
			}
		})
	}
}

// UnwrapBatch unwraps many keys with one transit call per 500 in shared
// mode, answers nil for a key Vault does not decrypt (a ciphertext of
// another transit key, a forged one, a blob that is no ciphertext) and the
// others still, and declines in dedicated mode.
func TestVaultUnwrapBatch(t *testing.T) {
	addr, token := testVault(t)
	ctx := context.Background()
	cfg := VaultConfig{Address: addr, Token: token, KeyName: newTransitKey(t, addr, token)}
	w := newTestVaultWrapper(t, cfg)
	other := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, KeyName: newTransitKey(t, addr, token)})
	n := maxBatch + 7 // two requests
	dks := make([][]byte, n)
	refs := make([]Ref, n)
	for i := range dks {
		dks[i] = NewDataKey()
		refs[i] = testRef(dks[i])
	}
	wrapped, err := w.WrapBatch(ctx, refs, dks)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[int]bool{3: true, maxBatch + 1: true, n - 1: true}
	if wrapped[3], err = other.Wrap(ctx, refs[3], dks[3]); err != nil {
		t.Fatal(err)
	}
	wrapped[maxBatch+1] = []byte("vault:v1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 60)))
	wrapped[n-1] = []byte("age-encryption.org/v1 not a transit ciphertext")
	before := w.Calls()
	out, ok, err := w.UnwrapBatch(ctx, refs, wrapped)
	if err != nil || !ok || len(out) != n {
		t.Fatalf("UnwrapBatch: %d keys, %v, %v", len(out), ok, err)
	}
	if calls := w.Calls() - before; calls != 2 {
		t.Errorf("%d Vault calls for %d keys, want 2", calls, n)
	}
	for i := range out {
		switch {
		case bad[i] && out[i] != nil:
			t.Errorf("key %d, which Vault cannot decrypt under this key, unwrapped to %x", i, out[i])
		case !bad[i] && !bytes.Equal(out[i], dks[i]):
			t.Errorf("key %d unwrapped to %x, want %x", i, out[i], dks[i])
		}
	}
	if _, _, err := w.UnwrapBatch(ctx, refs[:1], wrapped); err == nil {
		t.Error("mismatched refs and keys accepted")
	}
	ded := newTestVaultWrapper(t, VaultConfig{Address: addr, Token: token, Dedicated: true, DedicatedPrefix: "lethe-test-" + randHex(4) + "-"})
	if out, ok, err := ded.UnwrapBatch(ctx, refs, wrapped); ok || out != nil || err != nil {
		t.Errorf("dedicated mode: %d keys, %v, %v; want it to decline", len(out), ok, err)
	}
}
