package hooks

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The signature is the specification's: the Standard Webhooks Go library
// computes the same header and verifies ours, under each secret of a
// rotation's overlap; a changed byte fails.
func TestSignMatchesStandardWebhooks(t *testing.T) {
	s1, s2 := NewSecret(), NewSecret()
	body := []byte(`{"type":"grain.forget","data":{"event_id":"0123"}}`)
	at := time.Now()
	h := Sign([][]byte{s1}, "msg_1", at, body)
	lib, err := standardwebhooks.NewWebhook(FormatSecret(s1))
	if err != nil {
		t.Fatal(err)
	}
	want, err := lib.Sign("msg_1", at, body)
	if err != nil {
		t.Fatal(err)
	}
	if h.Signature != want {
		t.Fatalf("signature %q, the library's %q", h.Signature, want)
	}
	both := Sign([][]byte{s2, s1}, "msg_1", at, body)
	if len(strings.Fields(both.Signature)) != 2 {
		t.Fatalf("overlap header %q", both.Signature)
	}
	for _, s := range [][]byte{s1, s2} {
		wh, _ := standardwebhooks.NewWebhook(FormatSecret(s))
		if err := wh.Verify(body, header(both)); err != nil {
			t.Errorf("verify under one of two secrets: %v", err)
		}
		bad := bytes.Clone(body)
		bad[3] ^= 1
		if err := wh.Verify(bad, header(both)); err == nil {
			t.Error("a changed body verifies")
		}
	}
	other, _ := standardwebhooks.NewWebhook(FormatSecret(NewSecret()))
	if err := other.Verify(body, header(both)); err == nil {
		t.Error("a third secret verifies")
	}
}

func header(h Headers) http.Header {
	hd := http.Header{}
	hd.Set("webhook-id", h.ID)
	hd.Set("webhook-timestamp", h.Timestamp)
	hd.Set("webhook-signature", h.Signature)
	return hd
}

func FuzzSecret(f *testing.F) {
	f.Add(FormatSecret(NewSecret()))
	f.Add("whsec_")
	f.Add("whsec_!!")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseSecret(s)
		if err != nil {
			return
		}
		if again, err := ParseSecret(FormatSecret(b)); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("parse(format(%x)) = %x, %v", b, again, err)
		}
	})
}

func TestBlocked(t *testing.T) {
	for _, tc := range []struct {
		ip   string
		want bool
	}{
		{"127.0.0.1", true}, {"127.255.0.9", true}, {"::1", true}, {"10.0.0.1", true}, {"172.16.5.4", true},
		{"192.168.0.1", true}, {"169.254.169.254", true}, {"fd00:ec2::254", true}, {"100.64.0.1", true},
		{"100.127.255.254", true}, {"0.0.0.0", true}, {"::", true}, {"::ffff:10.0.0.1", true}, {"::ffff:127.0.0.1", true},
		{"fe80::1", true}, {"224.0.0.1", true}, {"ff02::1", true}, {"255.255.255.255", true}, {"240.0.0.1", true},
		{"198.18.0.1", true}, {"192.0.2.1", true}, {"64:ff9b::7f00:1", true}, {"2002:7f00:1::", true}, {"2001:db8::1", true},
		{"93.184.215.14", false}, {"8.8.8.8", false}, {"100.128.0.1", false}, {"2606:4700::1111", false}, {"172.32.0.1", false},
	} {
		if got := Blocked(netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("Blocked(%s) = %v, want %v", tc.ip, got, tc.want)
		}
	}
}

// resolver answers fixed addresses: the DNS, not lethe's code.
type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func TestCheckURL(t *testing.T) {
	g := Guard{Resolver: resolver{
		"public.test":  {netip.MustParseAddr("93.184.215.14")},
		"mixed.test":   {netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.0.0.7")},
		"private.test": {netip.MustParseAddr("fd00:ec2::254")},
	}}
	ctx := context.Background()
	for _, tc := range []struct {
		url     string
		refused bool // ErrRefusedAddress; else invalid when wantErr
		wantErr bool
	}{
		{"https://public.test/hook", false, false},
		{"http://93.184.215.14:8080/x", false, false},
		{"https://mixed.test/", true, true},
		{"https://private.test/", true, true},
		{"http://LOCALHOST./", true, true},
		{"http://a.localhost/", true, true},
		{"http://[::1]:80/", true, true},
		{"http://169.254.169.254/latest/meta-data/", true, true},
		{"https://nowhere.test/", false, true},
		{"ftp://public.test/", false, true},
		{"https://user@public.test/", false, true},
		{"https://public.test/#frag", false, true},
		{"public.test/x", false, true},
		{"https://" + strings.Repeat("a", MaxURLLength) + ".test/", false, true},
	} {
		err := g.CheckURL(ctx, tc.url)
		if (err != nil) != tc.wantErr || errors.Is(err, ErrRefusedAddress) != tc.refused {
			t.Errorf("CheckURL(%.60s) = %v, want error %v refused %v", tc.url, err, tc.wantErr, tc.refused)
		}
	}
	if err := (Guard{AllowPrivate: true}).CheckURL(ctx, "http://127.0.0.1:1/"); err != nil {
		t.Errorf("AllowPrivate: %v", err)
	}
}

// The transport refuses a blocked address when it connects, whatever the
// name resolved to when the hook was created: here a real server on
// 127.0.0.1.
func TestTransportRefusesAtDial(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	c := &http.Client{Transport: NewTransport(Guard{}, time.Second)}
	_, err := c.Get(srv.URL)
	if !errors.Is(err, ErrRefusedAddress) {
		t.Fatalf("GET a loopback server = %v, want ErrRefusedAddress", err)
	}
	// A name is resolved when the connection is made, and the address it
	// resolved to is what is checked.
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	if _, err := c.Get("http://localhost:" + port); !errors.Is(err, ErrRefusedAddress) {
		t.Fatalf("GET localhost = %v, want ErrRefusedAddress", err)
	}
	c = &http.Client{Transport: NewTransport(Guard{AllowPrivate: true}, time.Second)}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

func TestBackoff(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base, max := time.Second, time.Minute
	for n := 1; n <= 40; n++ {
		step := base << min(n-1, 20)
		step = min(step, max)
		for range 50 {
			d := Backoff(n, base, max, r)
			if d < step/2 || d > step {
				t.Fatalf("Backoff(%d) = %v, want in [%v, %v]", n, d, step/2, step)
			}
		}
	}
}

// memStore is an in-memory hooks.Store for the engine's own behaviour
// (redirects, bounded reads, outcomes); the real store's claims are tested
// in internal/store and the root package.
type memStore struct {
	mu     sync.Mutex
	ds     []Delivery
	done   []int64
	failed map[int64]Failure
}

func (m *memStore) Claim(_ context.Context, _ string, _ time.Time, _ time.Duration, max int) ([]Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := min(max, len(m.ds))
	out := m.ds[:n]
	m.ds = m.ds[n:]
	return out, nil
}

func (m *memStore) Delivered(_ context.Context, ids []int64, _ string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done = append(m.done, ids...)
	return nil
}

func (m *memStore) Failed(_ context.Context, id int64, _ string, f Failure) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed[id] = f
	return nil
}

func (m *memStore) Release(context.Context, []int64, string) error { return nil }

func TestEngineOutcomes(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 8<<20)
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(http.StatusAccepted)
		case "/big":
			w.Write(big) // only MaxResponseRead of it is read
		case "/redirect":
			http.Redirect(w, r, "/target", http.StatusFound)
		case "/slow":
			time.Sleep(time.Second)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	secret := NewSecret()
	leaf := []byte(`{"v":1,"id":"00","type":"grain.forget","memory":"m","time":"2026-01-01T00:00:00Z","actor":"local"}`)
	st := &memStore{failed: map[int64]Failure{}}
	now := time.Now()
	for i, p := range []string{"/ok", "/big", "/redirect", "/slow", "/fail", "/fail"} {
		d := Delivery{ID: int64(i + 1), HookID: "hk_1", URL: srv.URL + p, Secret: []byte("w"), EventID: "00", Type: "grain.forget",
			Memory: "m", Leaf: leaf, CreatedAt: now}
		if i == 5 {
			d.Attempts, d.CreatedAt = 2, now.Add(-time.Hour) // too old for another attempt
		}
		st.ds = append(st.ds, d)
	}
	e := New(Config{Store: st, Guard: Guard{AllowPrivate: true}, Timeout: 500 * time.Millisecond, MaxAge: 30 * time.Minute,
		Unwrap: func(context.Context, string, []byte) ([]byte, error) { return secret, nil }})
	if n, err := e.Step(context.Background()); err != nil || n != 6 {
		t.Fatalf("Step = %d, %v", n, err)
	}
	if len(st.done) != 2 {
		t.Errorf("delivered %v, want /ok and /big", st.done)
	}
	for id, want := range map[int64]Failure{3: {Attempts: 1, Reason: "status 302"}, 4: {Attempts: 1, Reason: "timeout"},
		5: {Attempts: 1, Reason: "status 500"}, 6: {Attempts: 3, Reason: "status 500", Dead: true}} {
		got := st.failed[id]
		if got.Attempts != want.Attempts || got.Reason != want.Reason || got.Dead != want.Dead {
			t.Errorf("delivery %d failure = %+v, want %+v", id, got, want)
		}
		if !got.Dead && (got.Next.Before(now) || got.Next.After(time.Now().Add(DefaultBaseDelay))) {
			t.Errorf("delivery %d next attempt at %v", id, got.Next)
		}
	}
	if hits["/target"] != 0 {
		t.Errorf("the redirect was followed")
	}
	if s := e.Stats(); s.Delivered != 2 || s.Failed != 4 || s.Dead != 1 {
		t.Errorf("Stats = %+v", s)
	}
}
