package lethe_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/hooks"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// receiver is a real HTTP webhook receiver. It verifies every request's
// signature with the Standard Webhooks Go library under each secret it
// was given, records what it accepted, and fails requests on demand.
type receiver struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	secrets  []*standardwebhooks.Webhook // each must verify
	failNext int                         // answer 503 to this many requests
	failAll  bool
	delay    time.Duration
	got      []delivered         // accepted requests, in order
	inFlight map[string]int      // webhook-id -> requests being served
	overlaps int                 // requests served while another of the same id was
	bad      []string            // verification failures
	sigs     map[string][]string // webhook-id -> signature headers seen
}

type delivered struct {
	id   string
	body []byte
	hdr  http.Header
}

type hookPayload struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Data      struct {
		HookID    string          `json:"hook_id"`
		EventID   string          `json:"event_id"`
		Memory    string          `json:"memory"`
		LeafIndex uint64          `json:"leaf_index"`
		Proof     string          `json:"proof"`
		Leaf      json.RawMessage `json:"leaf"`
	} `json:"data"`
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t, inFlight: map[string]int{}, sigs: map[string][]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) url() string { return r.srv.URL + "/hook" }

func (r *receiver) trust(secret string) {
	r.t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		r.t.Fatalf("NewWebhook: %v", err)
	}
	r.mu.Lock()
	r.secrets = append(r.secrets, wh)
	r.mu.Unlock()
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	r.inFlight[id]++
	if r.inFlight[id] > 1 {
		r.overlaps++
	}
	fail := r.failAll || r.failNext > 0
	if r.failNext > 0 {
		r.failNext--
	}
	delay := r.delay
	secrets := slices.Clone(r.secrets)
	r.sigs[id] = append(r.sigs[id], req.Header.Get("webhook-signature"))
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight[id]--
		r.mu.Unlock()
	}()
	time.Sleep(delay)
	if len(secrets) == 0 {
		r.mu.Lock()
		r.bad = append(r.bad, "no secret to verify with")
		r.mu.Unlock()
	}
	for _, wh := range secrets {
		if err := wh.Verify(body, req.Header); err != nil {
			r.mu.Lock()
			r.bad = append(r.bad, err.Error())
			r.mu.Unlock()
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
	}
	if fail {
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, delivered{id: id, body: body, hdr: req.Header.Clone()})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) set(f func(r *receiver)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// events returns the accepted payloads by event id, and how many times
// each was accepted.
func (r *receiver) events() (map[string]hookPayload, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out, n := map[string]hookPayload{}, map[string]int{}
	for _, d := range r.got {
		var p hookPayload
		if err := json.Unmarshal(d.body, &p); err != nil {
			r.t.Errorf("payload is not JSON: %v", err)
			continue
		}
		out[p.Data.EventID] = p
		n[p.Data.EventID]++
	}
	return out, n
}

func (r *receiver) check() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		r.t.Errorf("receiver refused %d requests; first: %s", len(r.bad), r.bad[0])
	}
	if r.overlaps > 0 {
		r.t.Errorf("the same delivery was in flight twice at once %d times", r.overlaps)
	}
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hookCfg is a delivering configuration with fast retries.
func hookCfg() lethe.HooksConfig {
	return lethe.HooksConfig{Deliver: true, AllowPrivate: true, Poll: 20 * time.Millisecond,
		BaseDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Timeout: 5 * time.Second}
}

// hookBackends runs test per backend with a config to open (several times,
// for restarts and replicas) on one database.
func hookBackends(t *testing.T, test func(t *testing.T, cfg lethe.Config)) {
	for _, b := range []string{"sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) {
			cfg := lethe.Config{DataDir: t.TempDir()}
			if b == "postgres" {
				cfg.PostgresDSN = testenv.Postgres(t)
			}
			test(t, cfg)
		})
	}
}

func withHooks(cfg lethe.Config, h lethe.HooksConfig) lethe.Config {
	cfg.Hooks = h
	return cfg
}

// A hook receives the events it asked for, signed so that the Standard
// Webhooks library verifies them, with the audit leaf and its index, and
// with none of the personal values the test wrote anywhere in its bytes.
func TestHookDelivery(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		db := openDB(t, withHooks(cfg, hookCfg()))
		rcv := newReceiver(t)
		h, err := db.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.url(),
			Events: []string{"grain.forget", "grain.supersede", "key.erase", "erasure.refused"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(h.Secret, "whsec_") || h.Memory != "m" || len(h.Events) != 4 {
			t.Fatalf("AddHook = %+v", h)
		}
		rcv.trust(h.Secret)
		personal := []string{"user-7f3a9c-personal", "Subject-Q8Z-Personal", "content-w2k-personal-text", "object-v9p-personal"}
		a := mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", UserID: personal[0], Subject: personal[1],
			Relation: "likes", Object: personal[3], Content: personal[2], Scope: "acme/prod"})
		b, err := db.Supersede(ctx, a, lethe.Grain{Memory: "m", Type: "fact", UserID: personal[0], Subject: personal[1],
			Relation: "likes", Object: personal[3] + "-2", Content: personal[2] + " v2", Scope: "acme/prod"})
		if err != nil {
			t.Fatal(err)
		}
		other := mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", Subject: personal[1], Content: personal[2] + " other"})
		fr, err := db.Forget(ctx, lethe.Selector{Memory: "m", Subject: personal[1] + "-none"})
		if err != nil || fr.Receipt != nil {
			t.Fatalf("forget of nothing = %+v, %v", fr, err)
		}
		fr, err = db.Forget(ctx, lethe.Selector{Memory: "m", Hash: other})
		if err != nil {
			t.Fatal(err)
		}
		hold, err := db.SetHold(ctx, lethe.HoldSpec{Memory: "m", UserID: personal[0]})
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Forget(ctx, lethe.Selector{Memory: "m", Hash: b})
		wantCode(t, err, lethe.CodeHeld)
		if err := db.ReleaseHold(ctx, "m", hold.ID); err != nil {
			t.Fatal(err)
		}
		er, err := db.ForgetUser(ctx, "m", personal[0])
		if err != nil {
			t.Fatal(err)
		}
		// Another memory's events never reach this hook.
		mustAdd(t, db, lethe.Grain{Memory: "other", Type: "fact", Subject: "x", Content: "y"})
		if _, err := db.Forget(ctx, lethe.Selector{Memory: "other", Subject: "x"}); err != nil {
			t.Fatal(err)
		}

		// The audit log is the model: every event of memory m of the
		// hook's types, exactly.
		leaves, err := db.AuditLeaves(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint64{}
		for i, l := range leaves {
			pl, err := proofs.ParseLeaf(l)
			if err != nil {
				t.Fatal(err)
			}
			if pl.Memory == "m" && slices.Contains(h.Events, string(pl.Type)) {
				want[pl.ID] = uint64(i)
			}
		}
		if len(want) != 4 { // supersede, forget, refused, erase
			t.Fatalf("audit log holds %d events for the hook, want 4", len(want))
		}
		if _, ok := want[fr.EventID]; !ok {
			t.Fatalf("the forget's event %s is not among the hook's", fr.EventID)
		}
		if _, ok := want[er.EventID]; !ok {
			t.Fatalf("the erasure's event %s is not among the hook's", er.EventID)
		}
		waitFor(t, "4 deliveries", func() bool { got, _ := rcv.events(); return len(got) >= len(want) })
		got, n := rcv.events()
		for id, idx := range want {
			p, ok := got[id]
			if !ok {
				t.Errorf("event %s not delivered", id)
				continue
			}
			if n[id] != 1 {
				t.Errorf("event %s delivered %d times, want once (no failures)", id, n[id])
			}
			if p.Data.LeafIndex != idx || !bytes.Equal(p.Data.Leaf, leaves[idx]) || p.Data.Memory != "m" || p.Data.HookID != h.ID {
				t.Errorf("payload of %s = %+v, want leaf %d = %s", id, p.Data, idx, leaves[idx])
			}
			if p.Data.Proof != "/api/audit/proof?event="+id {
				t.Errorf("proof link = %q", p.Data.Proof)
			}
			pl, _ := proofs.ParseLeaf(leaves[idx])
			if p.Type != string(pl.Type) || p.Timestamp != pl.Time.Format(time.RFC3339) {
				t.Errorf("type, timestamp = %s, %s, want %s, %s", p.Type, p.Timestamp, pl.Type, pl.Time.Format(time.RFC3339))
			}
		}
		if len(got) != len(want) {
			t.Errorf("received %d events, want %d", len(got), len(want))
		}
		rcv.mu.Lock()
		for _, d := range rcv.got {
			if !strings.HasPrefix(d.id, "msg_") || d.hdr.Get("webhook-timestamp") == "" || !strings.HasPrefix(d.hdr.Get("webhook-signature"), "v1,") {
				t.Errorf("headers = %v", d.hdr)
			}
			raw := append(append([]byte{}, d.body...), []byte(fmt.Sprint(d.hdr))...)
			for _, p := range personal {
				for _, form := range []string{p, strings.ToLower(p), strings.ToUpper(p)} {
					if bytes.Contains(raw, []byte(form)) {
						t.Errorf("a delivery's bytes contain personal value %q", form)
					}
				}
			}
		}
		rcv.mu.Unlock()
		var st lethe.HookStats
		waitFor(t, "an empty queue", func() bool { st, err = db.HookStats(ctx); return err == nil && st.Pending == 0 })
		if st.Dead != 0 || st.Delivered != 4 {
			t.Errorf("HookStats = %+v, %v", st, err)
		}
		rcv.check()
	})
}

// A receiver that fails is retried with backoff until it accepts; one that
// keeps failing past MaxAttempts is dead-lettered, visible, and delivered
// again on request.
func TestHookRetryAndDeadLetter(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		hc := hookCfg()
		hc.MaxAttempts = 4
		db := openDB(t, withHooks(cfg, hc))
		rcv := newReceiver(t)
		h, err := db.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.url(), Events: []string{"grain.forget"}})
		if err != nil {
			t.Fatal(err)
		}
		rcv.trust(h.Secret)
		rcv.set(func(r *receiver) { r.failNext = 3 })
		g := mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", Subject: "s", Content: "c"})
		fr, err := db.Forget(ctx, lethe.Selector{Memory: "m", Hash: g})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the forget delivered", func() bool { got, _ := rcv.events(); _, ok := got[fr.EventID]; return ok })
		rcv.mu.Lock()
		attempts := 0
		for _, s := range rcv.sigs {
			attempts += len(s)
		}
		rcv.mu.Unlock()
		_, n := rcv.events()
		delivered := 0
		for _, c := range n {
			delivered += c
		}
		if attempts != delivered+3 {
			t.Errorf("%d requests for %d deliveries; want 3 failed attempts more", attempts, delivered)
		}

		rcv.set(func(r *receiver) { r.failAll = true })
		g = mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", Subject: "s2", Content: "c2"})
		fr, err = db.Forget(ctx, lethe.Selector{Memory: "m", Hash: g})
		if err != nil {
			t.Fatal(err)
		}
		var dead []lethe.HookDelivery
		waitFor(t, "a dead letter", func() bool {
			dead, err = db.HookDeliveries(ctx, "m", h.ID, "dead")
			return err == nil && len(dead) == 1
		})
		if dead[0].EventID != fr.EventID || dead[0].Attempts != 4 || dead[0].LastError != "status 503" {
			t.Errorf("dead letter = %+v", dead[0])
		}
		st, err := db.HookStats(ctx)
		if err != nil || st.Dead != 1 || st.Pending != 0 || st.DeadLettered != 1 {
			t.Errorf("HookStats = %+v, %v", st, err)
		}
		time.Sleep(100 * time.Millisecond) // a dead letter is never retried on its own
		if d, _ := db.HookDeliveries(ctx, "m", h.ID, ""); len(d) != 1 || d[0].Attempts != 4 {
			t.Errorf("deliveries after a pause = %+v", d)
		}
		_, err = db.Redeliver(ctx, "m", h.ID, dead[0].ID+1000)
		wantCode(t, err, lethe.CodeNotFound)
		rcv.set(func(r *receiver) { r.failAll = false })
		if n, err := db.Redeliver(ctx, "m", h.ID, dead[0].ID); err != nil || n != 1 {
			t.Fatalf("Redeliver = %d, %v", n, err)
		}
		waitFor(t, "the redelivery", func() bool { got, _ := rcv.events(); _, ok := got[fr.EventID]; return ok })
		waitFor(t, "an empty queue", func() bool { d, _ := db.HookDeliveries(ctx, "m", h.ID, ""); return len(d) == 0 })
		rcv.check()
	})
}

// Rotating a secret signs with both secrets during the overlap: a receiver
// that knows only the old one, and one that knows only the new one, both
// verify. Removing the hook stops its deliveries.
func TestHookSecretRotation(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		db := openDB(t, withHooks(cfg, hookCfg()))
		oldOnly, newOnly := newReceiver(t), newReceiver(t)
		h, err := db.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: oldOnly.url(), Events: []string{"grain.forget"}})
		if err != nil {
			t.Fatal(err)
		}
		oldOnly.trust(h.Secret)
		rot, err := db.RotateHookSecret(ctx, "m", h.ID, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if rot.Secret == h.Secret || rot.PreviousSecretUntil == nil {
			t.Fatalf("rotation = %+v", rot)
		}
		newOnly.trust(rot.Secret)
		h2, err := db.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: newOnly.url(), Events: []string{"grain.forget"}})
		if err != nil {
			t.Fatal(err)
		}
		// The second hook has its own secret; route its deliveries to a
		// receiver that trusts it as well.
		newOnly.trust(h2.Secret)
		if err := db.RemoveHook(ctx, "m", h2.ID); err != nil {
			t.Fatal(err)
		}
		wantCode(t, db.RemoveHook(ctx, "m", h2.ID), lethe.CodeNotFound)
		g := mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", Subject: "s", Content: "c"})
		if _, err := db.Forget(ctx, lethe.Selector{Memory: "m", Hash: g}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the delivery", func() bool { got, _ := oldOnly.events(); return len(got) == 1 })
		oldOnly.mu.Lock()
		sig := oldOnly.got[0].hdr.Get("webhook-signature")
		body, hdr := oldOnly.got[0].body, oldOnly.got[0].hdr
		oldOnly.mu.Unlock()
		if len(strings.Fields(sig)) != 2 {
			t.Fatalf("signature header %q, want two signatures during the overlap", sig)
		}
		wh, _ := standardwebhooks.NewWebhook(rot.Secret)
		if err := wh.Verify(body, hdr); err != nil {
			t.Errorf("the new secret does not verify: %v", err)
		}
		oldOnly.check()
		if got, _ := newOnly.events(); len(got) != 0 {
			t.Errorf("a removed hook received %d deliveries", len(got))
		}
		hs, err := db.Hooks(ctx, "m")
		if err != nil || len(hs) != 1 || hs[0].ID != h.ID {
			t.Errorf("Hooks = %+v, %v", hs, err)
		}
	})
}

// Hook URLs that name or resolve to internal addresses are refused at
// creation; a hook created where they were allowed is refused at delivery
// by an engine where they are not (the dialer checks the address actually
// connected to), and dead-lettered with the reason.
func TestHookSSRF(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		strict := openDB(t, withHooks(cfg, lethe.HooksConfig{Deliver: true, Poll: 20 * time.Millisecond,
			BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, MaxAttempts: 2}))
		for _, u := range []string{"http://127.0.0.1:8080/h", "http://localhost/h", "http://[::1]/h", "http://10.1.2.3/h",
			"http://172.16.0.1/", "http://192.168.1.1/", "http://169.254.169.254/latest/meta-data/", "http://[fd00:ec2::254]/",
			"http://100.64.0.1/", "http://0.0.0.0/", "http://[::]/", "http://[::ffff:127.0.0.1]/", "http://[fe80::1]/",
			"https://224.0.0.1/", "http://[64:ff9b::a00:1]/", "http://[::7f00:1]/", "http://[2001::a00:1]/", "http://127.1/"} {
			_, err := strict.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: u, Events: []string{"*"}})
			if u == "http://127.1/" { // not an IP literal to Go: a name that does not resolve
				wantCode(t, err, lethe.CodeInvalidArgument)
				continue
			}
			if lethe.ErrorCode(err) != lethe.CodeURLRefused {
				t.Errorf("AddHook(%s) = %v, want url_refused", u, err)
			}
		}
		for _, u := range []string{"ftp://example.com/", "/relative", "http://user:pw@example.com/", "http://", "javascript:alert(1)"} {
			_, err := strict.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: u, Events: []string{"*"}})
			wantCode(t, err, lethe.CodeInvalidArgument)
		}
		_, err := strict.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: "https://example.com/", Events: []string{"grain.nope"}})
		wantCode(t, err, lethe.CodeInvalidArgument)
		_, err = strict.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: "https://example.com/"})
		wantCode(t, err, lethe.CodeInvalidArgument)

		lax := openDB(t, withHooks(cfg, lethe.HooksConfig{AllowPrivate: true})) // stores, does not deliver
		rcv := newReceiver(t)
		h, err := lax.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.url(), Events: []string{"grain.forget"}})
		if err != nil {
			t.Fatal(err)
		}
		rcv.trust(h.Secret)
		g := mustAdd(t, lax, lethe.Grain{Memory: "m", Type: "fact", Subject: "s", Content: "c"})
		if _, err := lax.Forget(ctx, lethe.Selector{Memory: "m", Hash: g}); err != nil {
			t.Fatal(err)
		}
		var dead []lethe.HookDelivery
		waitFor(t, "a dead letter", func() bool {
			dead, err = strict.HookDeliveries(ctx, "m", h.ID, "dead")
			return err == nil && len(dead) == 1
		})
		if dead[0].LastError != "refused address" {
			t.Errorf("dead letter = %+v, want refused address", dead[0])
		}
		rcv.mu.Lock()
		n := len(rcv.sigs)
		rcv.mu.Unlock()
		if n != 0 {
			t.Errorf("the receiver on a loopback address got %d requests", n)
		}
	})
}

// Two replicas deliver one backlog: each delivery is sent exactly once (no
// failures, so no repeats), never twice at once. Then a replica is stopped
// in the middle of a second backlog and another started: nothing is lost,
// and nothing repeats (a stopping engine finishes its sends in flight and
// releases the rest).
func TestHookReplicasAndRestart(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		writer := openDB(t, withHooks(cfg, lethe.HooksConfig{AllowPrivate: true}))
		rcv := newReceiver(t)
		rcv.set(func(r *receiver) { r.delay = 5 * time.Millisecond })
		h, err := writer.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.url(), Events: []string{"grain.forget"}})
		if err != nil {
			t.Fatal(err)
		}
		rcv.trust(h.Secret)
		forgetN := func(n int) []string {
			var ids []string
			var gs []lethe.Grain
			for i := range n {
				gs = append(gs, lethe.Grain{Memory: "m", Type: "fact", Subject: fmt.Sprintf("s%d", i), Content: fmt.Sprintf("c%d-%d", i, rand.Int())})
			}
			hs, err := writer.AddBatch(ctx, gs)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range hs {
				fr, err := writer.Forget(ctx, lethe.Selector{Memory: "m", Hash: g})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, fr.EventID)
			}
			return ids
		}
		first := forgetN(80)
		hc := hookCfg()
		hc.Batch = 4 // small claims, so that both replicas get some
		a := openDB(t, withHooks(cfg, hc))
		b := openDB(t, withHooks(cfg, hc))
		waitFor(t, "the first backlog", func() bool { got, _ := rcv.events(); return len(got) == len(first) })
		_, n := rcv.events()
		for _, id := range first {
			if n[id] != 1 {
				t.Errorf("event %s delivered %d times, want once", id, n[id])
			}
		}
		var sa, sb lethe.HookStats
		waitFor(t, "an empty queue", func() bool {
			sa, _ = a.HookStats(ctx)
			sb, _ = b.HookStats(ctx)
			return sa.Pending == 0
		})
		if sa.Delivered+sb.Delivered != int64(len(first)) {
			t.Errorf("replicas delivered %d + %d, want %d in all", sa.Delivered, sb.Delivered, len(first))
		}
		t.Logf("replica a delivered %d, b %d", sa.Delivered, sb.Delivered)
		for _, db := range []*lethe.DB{a, b} {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}

		// A restart in the middle of a backlog.
		second := forgetN(60)
		rcv.set(func(r *receiver) { r.delay = 30 * time.Millisecond })
		mid := openDB(t, withHooks(cfg, hc))
		waitFor(t, "part of the second backlog", func() bool { got, _ := rcv.events(); return len(got) >= len(first)+5 })
		if err := mid.Close(); err != nil {
			t.Fatal(err)
		}
		got, _ := rcv.events()
		left := len(first) + len(second) - len(got)
		t.Logf("stopped with %d of %d left", left, len(second))
		if left == 0 {
			t.Error("the backlog was done before the restart: the test tests no restart")
		}
		rcv.set(func(r *receiver) { r.delay = 0 })
		c := openDB(t, withHooks(cfg, hc))
		waitFor(t, "the second backlog", func() bool { got, _ := rcv.events(); return len(got) == len(first)+len(second) })
		_, n = rcv.events()
		for _, id := range second {
			if n[id] != 1 {
				t.Errorf("event %s delivered %d times, want once", id, n[id])
			}
		}
		waitFor(t, "an empty queue", func() bool { st, err := c.HookStats(ctx); return err == nil && st.Pending == 0 })
		rcv.check()
	})
}

// A KEK rotation rewraps hook secrets with the data keys: after the old
// KEK version is trimmed, deliveries are still signed with the secret the
// receiver holds.
func TestHookSecretSurvivesKEKRotation(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		db := openDB(t, withHooks(cfg, hookCfg()))
		rcv := newReceiver(t)
		h, err := db.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.url(), Events: []string{"grain.forget"}})
		if err != nil {
			t.Fatal(err)
		}
		rcv.trust(h.Secret)
		rot, err := db.RotateKEK(ctx, lethe.RotateOptions{Keep: 1})
		if err != nil {
			t.Fatal(err)
		}
		if rot.Rewrapped < 1 {
			t.Fatalf("rotation rewrapped %d keys and secrets", rot.Rewrapped)
		}
		g := mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", Subject: "s", Content: "c"})
		fr, err := db.Forget(ctx, lethe.Selector{Memory: "m", Hash: g})
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the delivery after the rotation", func() bool { got, _ := rcv.events(); _, ok := got[fr.EventID]; return ok })
		rcv.check()
	})
}

// TestHookModel runs a random sequence of writes, supersessions, forgets,
// erasures and holds (small pools of users, subjects and scopes, so they
// collide) on two replicas that both deliver, against a receiver that
// fails a fifth of its requests, with replica restarts in between. The
// model is the audit log: at the end each hook has received, exactly once,
// every event of its memory and types and no other; the hashes received
// as forgotten are exactly those the forgets reported, so a refused
// forget (rolled back under a hold) sent nothing.
func TestHookModel(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		r := rand.New(rand.NewPCG(seed, 7))
		hc := hookCfg()
		hc.MaxAttempts = 1000 // flaky, never dead
		hc.PauseAfter = 1000  // nor paused (ten failures in a row, one chance in ten million, would pause it for a minute)
		dbs := []*lethe.DB{openDB(t, withHooks(cfg, hc)), openDB(t, withHooks(cfg, hc))}
		rcv := newReceiver(t)
		all, err := dbs[0].AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.url(), Events: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		some, err := dbs[1].AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.url(), Events: []string{"grain.forget", "key.erase", "erasure.refused"}})
		if err != nil {
			t.Fatal(err)
		}
		rcv.trust(all.Secret)
		// A receiver verifies every request under each secret it trusts:
		// one receiver per hook.
		if err := dbs[1].RemoveHook(ctx, "m", some.ID); err != nil {
			t.Fatal(err)
		}
		rcv2 := newReceiver(t)
		some, err = dbs[1].AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv2.url(), Events: []string{"grain.forget", "key.erase", "erasure.refused"}})
		if err != nil {
			t.Fatal(err)
		}
		rcv2.trust(some.Secret)
		users := []string{"u-anna-91", "u-bo-37", ""}
		subjects := []string{"subj-kite", "subj-lamp", "subj-moss"}
		scopes := []string{"a", "a/b", "c"}
		var live []string
		forgotten := map[string]bool{}
		var holds []string
		for step := range 60 {
			db := dbs[r.IntN(2)]
			if r.IntN(5) == 0 {
				rcv.set(func(x *receiver) { x.failNext = 1 + r.IntN(3) })
				rcv2.set(func(x *receiver) { x.failNext = r.IntN(2) })
			}
			switch op := r.IntN(10); {
			case op < 4 || len(live) == 0:
				h, err := db.Add(ctx, lethe.Grain{Memory: "m", Type: "fact", UserID: users[r.IntN(3)], Subject: subjects[r.IntN(3)],
					Content: fmt.Sprintf("content %d", step), Scope: scopes[r.IntN(3)]})
				if err == nil {
					live = append(live, h)
				}
			case op == 4:
				i := r.IntN(len(live))
				h, err := db.Supersede(ctx, live[i], lethe.Grain{Memory: "m", Type: "fact", Content: fmt.Sprintf("v %d", step)})
				if err == nil {
					live[i] = h
				}
			case op == 5:
				i := r.IntN(len(live))
				fr, err := db.Forget(ctx, lethe.Selector{Memory: "m", Hash: live[i]})
				if err == nil {
					for _, h := range fr.Hashes {
						forgotten[h] = true
					}
					live = slices.Delete(live, i, i+1)
				} else if code := lethe.ErrorCode(err); code != lethe.CodeHeld && code != lethe.CodeNotFound {
					t.Fatalf("step %d: forget: %v", step, err)
				}
			case op == 6:
				fr, err := db.Forget(ctx, lethe.Selector{Memory: "m", Subject: subjects[r.IntN(3)]})
				if err == nil {
					for _, h := range fr.Hashes {
						forgotten[h] = true
					}
				}
			case op == 7:
				_, err := db.ForgetUser(ctx, "m", users[r.IntN(2)])
				if code := lethe.ErrorCode(err); err != nil && code != lethe.CodeHeld && code != lethe.CodeNotFound {
					t.Fatalf("step %d: forget user: %v", step, err)
				}
			case op == 8:
				if len(holds) > 0 && r.IntN(2) == 0 {
					if err := db.ReleaseHold(ctx, "m", holds[0]); err != nil {
						t.Fatal(err)
					}
					holds = holds[1:]
				} else if hd, err := db.SetHold(ctx, lethe.HoldSpec{Memory: "m", Scope: scopes[r.IntN(3)]}); err == nil {
					holds = append(holds, hd.ID)
				}
			case op == 9:
				// A replica restarts.
				i := r.IntN(2)
				if err := dbs[i].Close(); err != nil {
					t.Fatal(err)
				}
				dbs[i] = openDB(t, withHooks(cfg, hc))
			}
		}
		leaves, err := dbs[0].AuditLeaves(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wantAll, wantSome := map[string]bool{}, map[string]bool{}
		for _, l := range leaves {
			pl, err := proofs.ParseLeaf(l)
			if err != nil {
				t.Fatal(err)
			}
			if pl.Memory != "m" {
				continue
			}
			wantAll[pl.ID] = true
			if slices.Contains(some.Events, string(pl.Type)) {
				wantSome[pl.ID] = true
			}
		}
		for _, c := range []struct {
			rcv  *receiver
			want map[string]bool
		}{{rcv, wantAll}, {rcv2, wantSome}} {
			waitFor(t, "every event", func() bool { got, _ := c.rcv.events(); return len(got) >= len(c.want) })
			got, n := c.rcv.events()
			for id := range c.want {
				if n[id] != 1 {
					t.Errorf("event %s received %d times, want once", id, n[id])
				}
			}
			for id := range got {
				if !c.want[id] {
					t.Errorf("received event %s that is not the hook's", id)
				}
			}
			c.rcv.check()
		}
		got, _ := rcv2.events()
		sent := map[string]bool{}
		for _, p := range got {
			if p.Type != "grain.forget" {
				continue
			}
			var l struct{ Hashes []string }
			json.Unmarshal(p.Data.Leaf, &l)
			for _, h := range l.Hashes {
				sent[h] = true
			}
		}
		if len(sent) != len(forgotten) {
			t.Errorf("hooks received %d forgotten hashes, the forgets reported %d", len(sent), len(forgotten))
		}
		for h := range forgotten {
			if !sent[h] {
				t.Errorf("forgotten %s never received", h)
			}
		}
		t.Logf("%d events, %d forgotten grains", len(wantAll), len(forgotten))
	})
}

// Hook secrets are stored wrapped by the KEK, never in clear (a forensic
// read of the SQLite files), with the local age KEK and with Vault transit
// in shared and dedicated modes; deliveries verify either way. Erasing the
// memory keeps its hooks: the erasure's key.erase event arrives, with
// counts and fingerprints only, and the hook goes on.
func TestHookSecretsAtRest(t *testing.T) {
	addr, token := testenv.Vault(t)
	for _, kek := range []string{"age", "vault", "vault-dedicated"} {
		t.Run(kek, func(t *testing.T) {
			ctx := context.Background()
			cfg := withHooks(lethe.Config{DataDir: t.TempDir()}, hookCfg())
			if kek != "age" {
				cfg.KEK = vaultKEK(t, addr, token, kek == "vault-dedicated")
			}
			db := openDB(t, cfg)
			rcv := newReceiver(t)
			h, err := db.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.url(), Events: []string{"*"}})
			if err != nil {
				t.Fatal(err)
			}
			rcv.trust(h.Secret)
			secretB64 := strings.TrimPrefix(h.Secret, "whsec_")
			secret, _ := base64.StdEncoding.DecodeString(secretB64)
			mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", Subject: "s", Content: "c", UserID: "u-1"})
			er, err := db.EraseMemory(ctx, "m")
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the erasure's event", func() bool { got, _ := rcv.events(); _, ok := got[er.EventID]; return ok })
			got, _ := rcv.events()
			p := got[er.EventID]
			var leaf struct {
				Count           *uint64  `json:"count"`
				KeyFingerprints []string `json:"key_fingerprints"`
			}
			if err := json.Unmarshal(p.Data.Leaf, &leaf); err != nil || p.Type != "key.erase" || leaf.Count == nil || len(leaf.KeyFingerprints) == 0 || leaf.KeyFingerprints[0] != er.KeyFingerprint {
				t.Errorf("erasure payload %s (%v)", p.Data.Leaf, err)
			}
			if hs, err := db.Hooks(ctx, "m"); err != nil || len(hs) != 1 {
				t.Errorf("hooks after the memory's erasure: %v, %v", hs, err)
			}
			mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", Subject: "s2", Content: "c2"})
			waitFor(t, "the new memory key's event", func() bool {
				got, _ := rcv.events()
				n := 0
				for _, p := range got {
					if p.Type == "key.create" {
						n++
					}
				}
				return n >= 3 // memory key, user key, then the memory key after the erasure
			})
			rcv.check()
			db.Close()
			files, _ := filepath.Glob(filepath.Join(cfg.DataDir, "lethe.db*"))
			if len(files) == 0 {
				t.Fatal("no database files")
			}
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(b, secret) || bytes.Contains(b, []byte(secretB64)) {
					t.Errorf("%s holds the hook secret in clear", filepath.Base(f))
				}
			}
		})
	}
}

// hanging is a webhook receiver that answers no request until the test
// ends. It counts the requests it holds, in all and per path (one path per
// hook), and the most it held at once.
type hanging struct {
	srv     *httptest.Server
	release chan struct{}

	mu              sync.Mutex
	held            int
	perPath         map[string]int
	most, mostPath  int
	answered, total int
}

// newHanging starts a hanging receiver. Call it after openDB: its cleanup
// then runs first and lets the held requests go, so that closing the DB
// (which waits for the sends in flight) does not wait for their timeout.
func newHanging(t *testing.T) *hanging {
	h := &hanging{release: make(chan struct{}), perPath: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.held++
		h.total++
		h.perPath[r.URL.Path]++
		h.most = max(h.most, h.held)
		h.mostPath = max(h.mostPath, h.perPath[r.URL.Path])
		h.mu.Unlock()
		<-h.release
		h.mu.Lock()
		h.held--
		h.perPath[r.URL.Path]--
		h.answered++
		h.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(h.srv.Close)
	t.Cleanup(func() { close(h.release) })
	return h
}

func (h *hanging) stats() (held, most, mostPath, answered int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.most, h.mostPath, h.answered
}

// appendForgets commits n grain.forget events of memory and returns their
// ids.
func appendForgets(t *testing.T, db *lethe.DB, memory string, n int) []string {
	t.Helper()
	var leaves [][]byte
	var ids []string
	for i := range n {
		l := proofs.Leaf{V: proofs.LeafVersion, ID: proofs.NewEventID(), Type: proofs.EventGrainForget, Memory: memory,
			Time: time.Now().UTC().Truncate(time.Second), Actor: "local", Hashes: []string{fmt.Sprintf("%064x", i)}}
		lb, err := l.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		leaves, ids = append(leaves, lb), append(ids, l.ID)
	}
	if err := db.AppendRawEvents(context.Background(), leaves); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A receiver that never answers holds up no other memory's deliveries: a
// memory has four hooks on a receiver that holds every request until the
// test ends (the attempt timeout is a minute) and thirty events queued
// first; another memory's thirty deliveries to a healthy receiver all
// arrive while those requests are still held. The hanging receiver never
// holds more requests at once than one memory may occupy, nor more of one
// hook than one hook may.
func TestHookSlowReceiverHoldsUpNoOtherMemory(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		hc := hookCfg()
		hc.Timeout = time.Minute
		db := openDB(t, withHooks(cfg, hc))
		slow := newHanging(t)
		for i := range 4 {
			if _, err := db.AddHook(ctx, lethe.HookSpec{Memory: "evil", URL: fmt.Sprintf("%s/h%d", slow.srv.URL, i),
				Events: []string{"grain.forget"}}); err != nil {
				t.Fatal(err)
			}
		}
		rcv := newReceiver(t)
		h, err := db.AddHook(ctx, lethe.HookSpec{Memory: "victim", URL: rcv.url(), Events: []string{"grain.forget"}})
		if err != nil {
			t.Fatal(err)
		}
		rcv.trust(h.Secret)
		appendForgets(t, db, "evil", 30)
		waitFor(t, "the hanging receiver to hold requests", func() bool { held, _, _, _ := slow.stats(); return held >= 4 })
		want := appendForgets(t, db, "victim", 30)
		waitFor(t, "the other memory's deliveries", func() bool { got, _ := rcv.events(); return len(got) == len(want) })
		got, n := rcv.events()
		for _, id := range want {
			if _, ok := got[id]; !ok || n[id] != 1 {
				t.Errorf("event %s received %d times, want once", id, n[id])
			}
		}
		held, most, mostPath, answered := slow.stats()
		t.Logf("the hanging receiver holds %d requests (at most %d at once, %d of one hook)", held, most, mostPath)
		if answered != 0 || held == 0 {
			t.Errorf("the hanging receiver answered %d and holds %d: the other memory was not delivered while it hung", answered, held)
		}
		if most > hooks.DefaultPerMemory || mostPath > hooks.DefaultPerHook {
			t.Errorf("one memory's hooks held %d deliveries at once (%d of one hook), want at most %d (%d)",
				most, mostPath, hooks.DefaultPerMemory, hooks.DefaultPerHook)
		}
		rcv.check()
	})
}

// A hook receives every event type lethe.HookEventTypes lists: the
// erasure requests' transitions and version-chain exports too, which the
// documentation once left out.
func TestHookRequestAndExportEvents(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		db := openDB(t, withHooks(cfg, hookCfg()))
		rcv := newReceiver(t)
		var types []string
		for _, typ := range lethe.HookEventTypes() {
			types = append(types, string(typ))
		}
		h, err := db.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.url(), Events: types})
		if err != nil {
			t.Fatal(err)
		}
		rcv.trust(h.Secret)
		g := mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", UserID: "u-1", Subject: "s", Content: "c"})
		mustAdd(t, db, lethe.Grain{Memory: "m", Type: "fact", UserID: "u-2", Subject: "s2", Content: "c2"})
		exportHistory(t, db, lethe.HistoryRequest{Memory: "m", Hash: g})
		for _, user := range []string{"u-1", "u-2"} {
			f, err := db.FileErasureRequest(as("tok_a"), lethe.RequestSpec{Memory: "m", UserID: user, Reason: "data_subject_request", Reference: "DSR-1"})
			if err != nil {
				t.Fatal(err)
			}
			decide := db.ApproveErasureRequest
			if user == "u-2" {
				decide = db.RejectErasureRequest
			}
			if _, err := decide(as("tok_b"), "m", f.ID); err != nil {
				t.Fatal(err)
			}
		}
		want := map[string]bool{"history.export": true, "request.create": true, "request.approve": true, "request.reject": true}
		waitFor(t, "the requests' and the export's events", func() bool {
			got, _ := rcv.events()
			n := 0
			for _, p := range got {
				if want[p.Type] {
					n++
				}
			}
			return n == 5 // one export, two requests filed, one approved, one rejected
		})
		rcv.check()
	})
}

// counter is a webhook receiver that counts the requests it gets and
// answers 503 until told to accept (204). It verifies no signature: the
// tests that use it move their clock by minutes, past the Standard
// Webhooks library's tolerance for webhook-timestamp.
type counter struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests int
	accept   bool
	delay    time.Duration
	accepted map[string]int // webhook-id -> requests accepted
}

func newCounter(t *testing.T) *counter {
	c := &counter{accepted: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		c.mu.Lock()
		c.requests++
		accept, delay := c.accept, c.delay
		if accept {
			c.accepted[r.Header.Get("webhook-id")]++
		}
		c.mu.Unlock()
		time.Sleep(delay)
		if !accept {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *counter) count() (requests, accepted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests, len(c.accepted)
}

func (c *counter) set(accept bool, delay time.Duration) {
	c.mu.Lock()
	c.accept, c.delay = accept, delay
	c.mu.Unlock()
}

// quiet checks that c gets no request more than want over a few of the
// engines' polls.
func (c *counter) quiet(t *testing.T, what string, want int) {
	t.Helper()
	time.Sleep(300 * time.Millisecond) // 15 polls
	if n, _ := c.count(); n != want {
		t.Fatalf("%s: the receiver got %d requests, want %d", what, n, want)
	}
}

// pauseCfg delivers with fast retries, one attempt at a time to a hook,
// and pauses a hook after 3 consecutive failed attempts for 1 minute,
// doubling up to 4.
func pauseCfg() lethe.HooksConfig {
	hc := hookCfg()
	hc.PerHook, hc.PauseAfter, hc.Pause, hc.MaxPause = 1, 3, time.Minute, 4*time.Minute
	return hc
}

// A receiver that keeps failing gets PauseAfter attempts, then none while
// its hook is paused, however due the hook's deliveries are; after the
// pause one attempt (a probe), and while probes fail, one a pause, the
// pause doubling up to MaxPause. Deliveries held back cost no attempt.
// Once the receiver accepts, the next probe resumes the hook and every
// delivery arrives, once.
func TestHookPause(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		clk := newClock()
		cfg.Now = clk.now
		db := openDB(t, withHooks(cfg, pauseCfg()))
		rcv := newCounter(t)
		h, err := db.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.srv.URL + "/in", Events: []string{"grain.forget"}})
		if err != nil {
			t.Fatal(err)
		}
		appendForgets(t, db, "m", 10)
		waitFor(t, "3 attempts", func() bool { n, _ := rcv.count(); return n >= 3 })
		rcv.quiet(t, "paused", 3)
		ds, err := db.HookDeliveries(ctx, "m", h.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		attempts := 0
		for _, d := range ds {
			attempts += d.Attempts
			if d.State != "pending" {
				t.Errorf("delivery %d is %s", d.ID, d.State)
			}
		}
		if len(ds) != 10 || attempts != 3 {
			t.Fatalf("%d deliveries with %d attempts in all, want 10 with 3", len(ds), attempts)
		}
		state := func() lethe.Hook {
			t.Helper()
			hs, err := db.Hooks(ctx, "m")
			if err != nil || len(hs) != 1 {
				t.Fatalf("Hooks = %+v, %v", hs, err)
			}
			return hs[0]
		}
		if got := state(); got.Status != lethe.HookPaused || got.ConsecutiveFailures != 3 || got.PausedUntil == nil ||
			!got.PausedUntil.Equal(clk.now().Add(time.Minute)) {
			t.Errorf("hook %+v, want paused after 3 failures until a minute from now", got)
		}
		if st, err := db.HookStats(ctx); err != nil || st.Paused != 1 || st.Pauses != 1 {
			t.Errorf("HookStats = %+v, %v, want a paused hook", st, err)
		}
		clk.add(59 * time.Second) // every retry is due, the pause is not over
		rcv.quiet(t, "paused, retries due", 3)

		// Probes, one a pause: 1, 2, 4 and 4 minutes.
		probe := func(after time.Duration, want int) {
			t.Helper()
			clk.add(after - time.Second)
			rcv.quiet(t, "paused", want-1)
			clk.add(time.Second)
			waitFor(t, "a probe", func() bool { n, _ := rcv.count(); return n >= want })
			rcv.quiet(t, "after a failed probe", want)
		}
		clk.add(time.Second)
		waitFor(t, "a probe", func() bool { n, _ := rcv.count(); return n >= 4 })
		rcv.quiet(t, "after a failed probe", 4)
		probe(2*time.Minute, 5)
		probe(4*time.Minute, 6)
		probe(4*time.Minute, 7) // not 8: MaxPause
		clk.add(4*time.Minute - time.Second)
		rcv.quiet(t, "paused", 7)
		rcv.set(true, 0)
		clk.add(time.Second)
		waitFor(t, "every delivery", func() bool { _, n := rcv.count(); return n == 10 })
		waitFor(t, "an empty queue", func() bool { st, err := db.HookStats(ctx); return err == nil && st.Pending == 0 })
		if n, _ := rcv.count(); n != 17 {
			t.Errorf("the receiver got %d requests, want 7 failed and 10 accepted", n)
		}
		rcv.mu.Lock()
		for id, n := range rcv.accepted {
			if n != 1 {
				t.Errorf("%s accepted %d times", id, n)
			}
		}
		rcv.mu.Unlock()
		if st, _ := db.HookStats(ctx); st.Dead != 0 || st.Failed != 7 || st.Delivered != 10 || st.Paused != 0 || st.Pauses != 5 {
			t.Errorf("HookStats = %+v", st)
		}
		if got := state(); got.Status != lethe.HookActive || got.ConsecutiveFailures != 0 || got.PausedUntil != nil {
			t.Errorf("hook %+v, want active again", got)
		}
	})
}

// max_age runs while a hook is paused: a failed probe whose new pause ends
// more than MaxAge after a delivery was queued dead-letters it, attempted
// or not ("hook paused" if not), where it is visible; a delivery queued
// later stays pending. A redeliver ends the pause: its probe, accepted,
// resumes the hook and every delivery arrives.
func TestHookPauseAgesOut(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		clk := newClock()
		cfg.Now = clk.now
		hc := pauseCfg()
		hc.PauseAfter, hc.Pause, hc.MaxPause, hc.MaxAge = 2, 4*time.Minute, 8*time.Minute, 10*time.Minute
		db := openDB(t, withHooks(cfg, hc))
		rcv := newCounter(t)
		h, err := db.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.srv.URL + "/in", Events: []string{"grain.forget"}})
		if err != nil {
			t.Fatal(err)
		}
		old := appendForgets(t, db, "m", 5)
		waitFor(t, "2 attempts", func() bool { n, _ := rcv.count(); return n >= 2 })
		rcv.quiet(t, "paused", 2)
		clk.add(3 * time.Minute)
		young := appendForgets(t, db, "m", 1)[0]
		clk.add(time.Minute) // the probe fails: paused 8 minutes, until 12 minutes after the first five were queued
		waitFor(t, "the old deliveries dead-lettered", func() bool {
			dead, err := db.HookDeliveries(ctx, "m", h.ID, "dead")
			return err == nil && len(dead) == len(old)
		})
		dead, _ := db.HookDeliveries(ctx, "m", h.ID, "dead")
		unattempted := 0
		for _, d := range dead {
			switch {
			case d.Attempts == 0 && d.LastError == "hook paused":
				unattempted++
			case d.Attempts == 1 && d.LastError == "status 503":
			default:
				t.Errorf("dead letter %+v", d)
			}
		}
		if n, _ := rcv.count(); unattempted != 2 || n != 3 {
			t.Errorf("%d dead letters never attempted after %d requests, want 2 after 3", unattempted, n)
		}
		pending, _ := db.HookDeliveries(ctx, "m", h.ID, "pending")
		if len(pending) != 1 || pending[0].EventID != young {
			t.Errorf("pending %+v, want the delivery queued during the pause", pending)
		}
		// The engine counts its dead letters once the failure that made
		// them has committed: after the rows read above, maybe.
		waitFor(t, "5 dead letters counted", func() bool { st, err := db.HookStats(ctx); return err == nil && st.DeadLettered >= 5 })
		if st, _ := db.HookStats(ctx); st.Dead != 5 || st.DeadLettered != 5 {
			t.Errorf("HookStats = %+v, want 5 dead letters", st)
		}
		rcv.quiet(t, "paused again", 3)

		rcv.set(true, 0)
		if n, err := db.Redeliver(ctx, "m", h.ID, 0); err != nil || n != 5 {
			t.Fatalf("Redeliver = %d, %v", n, err)
		}
		waitFor(t, "every delivery", func() bool { _, n := rcv.count(); return n == 6 })
		waitFor(t, "an empty queue", func() bool { st, err := db.HookStats(ctx); return err == nil && st.Pending == 0 && st.Dead == 0 })
	})
}

// Two replicas share a hook's pause: one pauses it, and another, started
// during the pause, sends nothing; once it has ended, the two send one
// probe between them (the receiver answers slowly, so that both claim
// while it is out); then the receiver accepts, and each delivery arrives
// once.
func TestHookPauseReplicas(t *testing.T) {
	hookBackends(t, func(t *testing.T, cfg lethe.Config) {
		ctx := context.Background()
		clk := newClock()
		cfg.Now = clk.now
		writer := openDB(t, withHooks(cfg, lethe.HooksConfig{AllowPrivate: true}))
		rcv := newCounter(t)
		if _, err := writer.AddHook(ctx, lethe.HookSpec{Memory: "m", URL: rcv.srv.URL + "/in", Events: []string{"grain.forget"}}); err != nil {
			t.Fatal(err)
		}
		appendForgets(t, writer, "m", 10)
		a := openDB(t, withHooks(cfg, pauseCfg()))
		waitFor(t, "3 attempts", func() bool { n, _ := rcv.count(); return n >= 3 })
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		rcv.quiet(t, "paused by a", 3)
		b := openDB(t, withHooks(cfg, pauseCfg()))
		rcv.quiet(t, "b started during the pause", 3)
		c := openDB(t, withHooks(cfg, pauseCfg()))

		rcv.set(false, 500*time.Millisecond)
		clk.add(time.Minute)
		waitFor(t, "a probe", func() bool { n, _ := rcv.count(); return n >= 4 })
		time.Sleep(time.Second) // the probe fails after 500 ms; the other replica polled 25 times meanwhile
		if n, _ := rcv.count(); n != 4 {
			t.Fatalf("after the pause the replicas sent %d requests, want one probe", n-3)
		}
		rcv.set(true, 0)
		clk.add(2 * time.Minute)
		waitFor(t, "every delivery", func() bool { _, n := rcv.count(); return n == 10 })
		waitFor(t, "an empty queue", func() bool { st, err := b.HookStats(ctx); return err == nil && st.Pending == 0 })
		sb, _ := b.HookStats(ctx)
		sc, _ := c.HookStats(ctx)
		if sb.Delivered+sc.Delivered != 10 {
			t.Errorf("replicas delivered %d + %d, want 10", sb.Delivered, sc.Delivered)
		}
		rcv.mu.Lock()
		for id, n := range rcv.accepted {
			if n != 1 {
				t.Errorf("%s accepted %d times", id, n)
			}
		}
		rcv.mu.Unlock()
	})
}
