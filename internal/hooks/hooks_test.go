package hooks

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/proofs"
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

// Every address the rule names is refused, when a hook is created and
// when a connection is made (the dialer's control function), by the one
// table: each of its ranges at both ends, and the IPv6 forms that embed
// an IPv4 address, which are refused whatever they embed, except an
// IPv4-mapped address, which is checked as the IPv4 address it maps.
func TestBlocked(t *testing.T) {
	type test struct {
		ip   string
		want bool
	}
	tests := []test{
		{"127.0.0.1", true}, {"127.255.0.9", true}, {"::1", true}, {"10.0.0.1", true}, {"172.16.5.4", true},
		{"192.168.0.1", true}, {"169.254.169.254", true}, {"fd00:ec2::254", true}, {"100.64.0.1", true},
		{"100.127.255.254", true}, {"0.0.0.0", true}, {"::", true}, {"fe80::1", true}, {"fe80::1%eth0", true},
		{"224.0.0.1", true}, {"ff02::1", true}, {"ff01::1", true}, {"255.255.255.255", true}, {"240.0.0.1", true},
		{"198.18.0.1", true}, {"192.0.2.1", true}, {"2001:db8::1", true}, {"192.88.99.1", true}, {"3fff::1", true},
		// IPv4-compatible (::/96): refused, whatever it embeds.
		{"::127.0.0.1", true}, {"::7f00:1", true}, {"::10.0.0.1", true}, {"::93.184.215.14", true},
		// IPv4-mapped (::ffff:0:0/96): the IPv4 address it maps.
		{"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"::ffff:169.254.169.254", true}, {"::ffff:93.184.215.14", false},
		// IPv4-translated (::ffff:0:0:0/96), NAT64, 6to4, Teredo: refused, whatever they embed.
		{"::ffff:0:7f00:1", true}, {"::ffff:0:5db8:d70e", true},
		{"64:ff9b::7f00:1", true}, {"64:ff9b::5db8:d70e", true}, {"64:ff9b:1::a00:1", true},
		{"2002:7f00:1::", true}, {"2002:5db8:d70e::1", true},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true}, {"2001::7f00:1", true},
		{"93.184.215.14", false}, {"8.8.8.8", false}, {"100.128.0.1", false}, {"2606:4700::1111", false}, {"172.32.0.1", false},
		{"2001:4860:4860::8888", false}, {"2003::1", false}, {"64:ff9c::1", false},
	}
	for _, r := range reserved {
		tests = append(tests, test{r.Prefix.Addr().String(), true}, test{lastAddr(r.Prefix).String(), true})
	}
	g := Guard{}
	for _, tc := range tests {
		ip := netip.MustParseAddr(tc.ip)
		if got := Blocked(ip); got != tc.want {
			t.Errorf("Blocked(%s) = %v, want %v", tc.ip, got, tc.want)
		}
		err := g.Control("tcp", netip.AddrPortFrom(ip, 443).String(), nil)
		if errors.Is(err, ErrRefusedAddress) != tc.want {
			t.Errorf("Control(%s) = %v, want refused %v", tc.ip, err, tc.want)
		}
		u := "https://" + netip.AddrPortFrom(ip, 443).String() + "/"
		if ip.Zone() != "" {
			u = "https://[" + strings.Replace(ip.String(), "%", "%25", 1) + "]/"
		}
		err = g.CheckURL(context.Background(), u)
		if errors.Is(err, ErrRefusedAddress) != tc.want {
			t.Errorf("CheckURL(%s) = %v, want refused %v", u, err, tc.want)
		}
	}
}

// lastAddr returns the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for bit := p.Bits(); bit < len(b)*8; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
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
// (redirects, bounded reads, outcomes, its bounds on sends under way); the
// real store's claims are tested in internal/store and the root package.
// Its claims leave out the hooks and memories the limits say are full, and
// paused hooks, but take any number of the others' deliveries, so that
// the engine has to keep its own bounds.
type memStore struct {
	mu       sync.Mutex
	ds       []Delivery // pending, not claimed
	held     map[int64]Delivery
	done     []int64
	failed   map[int64]Failure
	circuits map[string]Circuit
	released int
}

func newMemStore() *memStore {
	return &memStore{held: map[int64]Delivery{}, failed: map[int64]Failure{}, circuits: map[string]Circuit{}}
}

func (m *memStore) Claim(_ context.Context, _ string, now time.Time, _ time.Duration, max int, lim Limits) ([]Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out, rest []Delivery
	for _, d := range m.ds {
		n, busyHook := lim.Hooks[d.HookID]
		k, busyMem := lim.Memories[d.Memory]
		if len(out) == max || (busyHook && n == 0) || (busyMem && k == 0) || now.Before(m.circuits[d.HookID].PausedUntil) {
			rest = append(rest, d)
			continue
		}
		out = append(out, d)
		m.held[d.ID] = d
	}
	m.ds = rest
	return out, nil
}

func (m *memStore) Delivered(_ context.Context, held []Held) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, h := range held {
		m.done = append(m.done, h.ID)
		delete(m.held, h.ID)
	}
	return nil
}

func (m *memStore) Failed(_ context.Context, id int64, _ string, f Failure) (Tripped, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed[id] = f
	d := m.held[id]
	delete(m.held, id)
	before := m.circuits[d.HookID]
	c := f.Breaker.Fail(before, f.At)
	m.circuits[d.HookID] = c
	return Tripped{Circuit: c, Paused: c.PausedUntil != before.PausedUntil}, nil
}

func (m *memStore) Release(_ context.Context, held []Held) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var back []Delivery
	for _, h := range held {
		back = append(back, m.held[h.ID])
		delete(m.held, h.ID)
	}
	m.ds = append(back, m.ds...)
	m.released += len(held)
	return nil
}

func (m *memStore) delivered() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.done)
}

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
	st := newMemStore()
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

// The engine keeps its bounds whatever its store's claims return: three
// hooks of one memory on a receiver that holds every request until the
// test ends, queued first, never have more than PerMemory sends under way,
// nor one hook more than PerHook; the engine releases what it may not
// hold, and the other memory's deliveries all arrive meanwhile.
func TestEngineBounds(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	held, most := map[string]int{}, map[string]int{}
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		held[r.URL.Path]++
		held[""]++
		most[r.URL.Path] = max(most[r.URL.Path], held[r.URL.Path])
		most[""] = max(most[""], held[""])
		mu.Unlock()
		<-release
		mu.Lock()
		held[r.URL.Path]--
		held[""]--
		mu.Unlock()
	}))
	defer hang.Close()
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer ok.Close()

	leaf := []byte(`{"v":1,"id":"00","type":"grain.forget","memory":"m","time":"2026-01-01T00:00:00Z","actor":"local"}`)
	st := newMemStore()
	id := int64(0)
	add := func(hook, memory, url string, n int) {
		for range n {
			id++
			st.ds = append(st.ds, Delivery{ID: id, HookID: hook, URL: url, Secret: []byte("w"), EventID: "00", Type: "grain.forget",
				Memory: memory, Leaf: leaf, CreatedAt: time.Now()})
		}
	}
	for _, h := range []string{"hk_s1", "hk_s2", "hk_s3"} {
		add(h, "slow", hang.URL+"/"+h, 30) // more than the engine may hold of one hook
	}
	add("hk_o1", "ok", ok.URL, 10)
	secret := NewSecret()
	e := New(Config{Store: st, Guard: Guard{AllowPrivate: true}, Timeout: time.Minute, Poll: 10 * time.Millisecond,
		Workers: 6, PerHook: 2, PerMemory: 4, Unwrap: func(context.Context, string, []byte) ([]byte, error) { return secret, nil }})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		e.Run(ctx)
		close(stopped)
	}()
	defer func() {
		// The held requests go first: Run, once cancelled, waits for its
		// sends, and a server closes once its requests end.
		close(release)
		cancel()
		<-stopped
	}()

	deadline := time.After(20 * time.Second)
	for st.delivered() < 10 {
		select {
		case <-deadline:
			t.Fatalf("%d of the other memory's 10 deliveries arrived", st.delivered())
		case <-time.After(10 * time.Millisecond):
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if held[""] == 0 || most[""] > 4 {
		t.Errorf("the hanging receiver holds %d requests, at most %d at once; want some, at most PerMemory (4)", held[""], most[""])
	}
	for _, h := range []string{"hk_s1", "hk_s2", "hk_s3"} {
		if most["/"+h] > 2 {
			t.Errorf("hook %s had %d sends under way at once, want at most PerHook (2)", h, most["/"+h])
		}
	}
	st.mu.Lock()
	if st.released == 0 {
		t.Error("the store's claims took nothing over the bounds: the test tests nothing of the engine's own")
	}
	st.mu.Unlock()
}

// A failure that pauses a hook releases the engine's held deliveries of it
// unsent: with one send at a time to the hook, a receiver that fails gets
// exactly PauseAfter requests of the eight deliveries held; the rest go
// back to the store with no attempt counted, and once the pause has ended
// they are claimed again (the in-memory store's claims take no probe: the
// next failure pauses the hook again). Another hook's deliveries are sent.
func TestEnginePausesAHook(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	leaf := []byte(`{"v":1,"id":"00","type":"grain.forget","memory":"m","time":"2026-01-01T00:00:00Z","actor":"local"}`)
	st := newMemStore()
	now := time.Now()
	for i := range 12 {
		d := Delivery{ID: int64(i + 1), HookID: "hk_down", URL: srv.URL + "/down", Secret: []byte("w"), EventID: "00", Type: "grain.forget",
			Memory: "m", Leaf: leaf, CreatedAt: now}
		if i >= 10 {
			d.HookID, d.URL = "hk_up", srv.URL+"/up"
		}
		st.ds = append(st.ds, d)
	}
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	secret := NewSecret()
	e := New(Config{Store: st, Guard: Guard{AllowPrivate: true}, PerHook: 1, PauseAfter: 3, Pause: time.Minute,
		Now:    func() time.Time { return time.Unix(0, clock.Load()) },
		Unwrap: func(context.Context, string, []byte) ([]byte, error) { return secret, nil }})
	if n, err := e.Step(context.Background()); err != nil || n != 10 { // 8 of the failing hook: holdFactor*PerHook
		t.Fatalf("Step = %d, %v", n, err)
	}
	if hits["/down"] != 3 || hits["/up"] != 2 || len(st.failed) != 3 || st.released != 7 {
		t.Fatalf("requests %v, %d failed and %d released; want 3 to the failing receiver, 3 failed and 7 released unsent",
			hits, len(st.failed), st.released)
	}
	for _, d := range st.ds {
		if d.Attempts != 0 {
			t.Errorf("a released delivery has %d attempts", d.Attempts)
		}
	}
	if s := e.Stats(); s.Paused != 1 || s.Failed != 3 {
		t.Errorf("Stats = %+v, want one pause", s)
	}
	if n, _ := e.Step(context.Background()); n != 0 || hits["/down"] != 3 {
		t.Fatalf("a step during the pause claimed %d, and the receiver got %d requests", n, hits["/down"])
	}
	clock.Add(int64(time.Minute))
	if n, _ := e.Step(context.Background()); n != 7 || hits["/down"] != 4 {
		t.Fatalf("the step after the pause claimed %d (the store's claim is no probe), and the receiver got %d requests, want 4", n, hits["/down"])
	}
}

// Breaker.Fail pauses a hook at After consecutive failures, doubles the
// pause at each failed probe up to MaxPause, and leaves a pause under way
// as it is.
func TestBreaker(t *testing.T) {
	b := Breaker{After: 3, Pause: time.Minute, MaxPause: 5 * time.Minute}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		name string
		c    Circuit
		now  time.Time
		want Circuit
	}{
		{"first failure", Circuit{}, t0, Circuit{Failures: 1}},
		{"below the threshold", Circuit{Failures: 1}, t0, Circuit{Failures: 2}},
		{"the threshold pauses", Circuit{Failures: 2}, t0, Circuit{Failures: 3, PausedUntil: at(time.Minute), Pause: time.Minute}},
		{"during the pause", Circuit{Failures: 3, PausedUntil: at(time.Minute), Pause: time.Minute}, at(30 * time.Second),
			Circuit{Failures: 4, PausedUntil: at(time.Minute), Pause: time.Minute}},
		{"a failed probe doubles", Circuit{Failures: 4, PausedUntil: at(time.Minute), Pause: time.Minute}, at(time.Minute),
			Circuit{Failures: 5, PausedUntil: at(3 * time.Minute), Pause: 2 * time.Minute}},
		{"capped", Circuit{Failures: 9, PausedUntil: at(0), Pause: 4 * time.Minute}, at(time.Hour),
			Circuit{Failures: 10, PausedUntil: at(time.Hour + 5*time.Minute), Pause: 5 * time.Minute}},
		{"after a redeliver", Circuit{Failures: 9, PausedUntil: at(0), Pause: 0}, at(time.Second),
			Circuit{Failures: 10, PausedUntil: at(time.Second + time.Minute), Pause: time.Minute}},
		{"a failed probe below the threshold", Circuit{Failures: 1, PausedUntil: at(0), Pause: time.Minute}, at(time.Minute),
			Circuit{Failures: 2, PausedUntil: at(3 * time.Minute), Pause: 2 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := b.Fail(tc.c, tc.now); got != tc.want {
				t.Errorf("Fail(%+v, %v) = %+v, want %+v", tc.c, tc.now, got, tc.want)
			}
		})
	}
}

// docs/api.md lists every range the guard refuses, and no other.
func TestReservedDocumented(t *testing.T) {
	md, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(md), "**Addresses.**")
	sec, _, _ = strings.Cut(sec, "\n**")
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`([0-9a-f.:]+/[0-9]+)`").FindAllStringSubmatch(sec, -1) {
		documented[m[1]] = true
	}
	for _, r := range reserved {
		if !documented[r.Prefix.String()] {
			t.Errorf("docs/api.md, Addresses, does not list %s (%s)", r.Prefix, r.Name)
		}
		delete(documented, r.Prefix.String())
	}
	for p := range documented {
		t.Errorf("docs/api.md, Addresses, lists %s, which the guard does not refuse", p)
	}
}

// A hook lists "*" alone, or event types it can receive: those of one
// memory. Any other item, a KEK event among them, is refused naming its
// position, never quoting it.
func TestEvents(t *testing.T) {
	for _, typ := range proofs.EventTypes {
		_, err := events([]string{string(typ)})
		if typ.OfMemory() != (err == nil) {
			t.Errorf("events([%s]) = %v", typ, err)
		}
	}
	if got := EventTypes(); len(got) != len(proofs.EventTypes)-2 || slices.Contains(got, proofs.EventKEKRotate) ||
		slices.Contains(got, proofs.EventKEKTrim) || !slices.Contains(got, proofs.EventRequestReject) || !slices.Contains(got, proofs.EventHistoryExport) {
		t.Errorf("EventTypes() = %v", got)
	}
	for _, tc := range []struct {
		name    string
		evs     []string
		want    []string
		wantErr string // the field named
	}{
		{"all", []string{"*"}, []string{"*"}, ""},
		{"sorted, once each", []string{"request.reject", "grain.forget", "request.reject", "history.export"},
			[]string{"grain.forget", "history.export", "request.reject"}, ""},
		{"none", nil, nil, "events"},
		{"kek.rotate", []string{"kek.rotate"}, nil, "events[0]"},
		{"kek.trim second", []string{"grain.forget", "kek.trim"}, nil, "events[1]"},
		{"unknown", []string{"grain.forget", "key.erase", "john@example.com"}, nil, "events[2]"},
		{"empty", []string{""}, nil, "events[0]"},
		{"* and more", []string{"grain.forget", "*"}, nil, "events[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := events(tc.evs)
			var ge *grains.Error
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("events(%q) = %v", tc.evs, err)
			case tc.wantErr == "" && !slices.Equal(got, tc.want):
				t.Errorf("events(%q) = %q, want %q", tc.evs, got, tc.want)
			case tc.wantErr != "" && (!errors.As(err, &ge) || ge.Code != grains.CodeInvalidArgument || ge.Field != tc.wantErr):
				t.Errorf("events(%q) = %v, want invalid_argument on %s", tc.evs, err, tc.wantErr)
			case tc.wantErr != "" && len(tc.evs) > 0 && len(tc.evs[len(tc.evs)-1]) > 1 && strings.Contains(err.Error(), tc.evs[len(tc.evs)-1]):
				t.Errorf("events(%q) = %v quotes what it refused", tc.evs, err)
			}
		})
	}
}
