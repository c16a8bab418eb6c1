package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// The hook routes through HTTP, validated against the OpenAPI document by
// the contract middleware: roles, scope limits, refusals with their codes,
// a queued delivery visible, rotation, the metrics, deletion. (Delivery
// itself, with real receivers, is tested in the root package.)
func TestHookRoutes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		dpo, writer := f.token("dpo,writer", []string{"hm"}), f.token("writer,reader", []string{"hm"})
		scoped := f.token("dpo", []string{"hm"}, "acme")
		base := "/api/memories/hm/hooks"
		good := api.HookRequest{URL: "https://93.184.215.14/in", Events: []string{"grain.forget"}}
		f.want(f.call(writer, "POST", base, good), 403, "forbidden")
		f.want(f.call(scoped, "POST", base, good), 403, "forbidden")
		f.want(f.call(scoped, "GET", base, nil), 403, "forbidden")
		f.want(f.call(dpo, "POST", base, api.HookRequest{URL: "http://169.254.169.254/", Events: []string{"*"}}), 400, "url_refused")
		f.want(f.call(dpo, "POST", base, api.HookRequest{URL: "http://10.0.0.1/", Events: []string{"*"}}), 400, "url_refused")
		// IPv6 forms that embed an IPv4 address.
		for _, u := range []string{"http://[::127.0.0.1]/", "http://[::7f00:1]/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:0:7f00:1]/",
			"http://[64:ff9b::7f00:1]/", "http://[64:ff9b:1::a00:1]/", "http://[2002:7f00:1::]/", "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
			"http://[fe80::1%25eth0]/"} {
			f.want(f.call(dpo, "POST", base, api.HookRequest{URL: u, Events: []string{"*"}}), 400, "url_refused")
		}
		f.want(f.call(dpo, "POST", base, api.HookRequest{URL: "gopher://93.184.215.14/", Events: []string{"*"}}), 400, "invalid_argument")
		f.want(f.call(dpo, "POST", base, api.HookRequest{URL: good.URL, Events: []string{"grain.nope"}}), 400, "invalid_argument")
		// A type no hook receives is refused naming its item, unquoted.
		for _, evs := range [][]string{{"kek.rotate"}, {"grain.forget", "kek.trim"}} {
			a := f.call(dpo, "POST", base, api.HookRequest{URL: good.URL, Events: evs})
			f.wantField(a, 400, "invalid_argument", fmt.Sprintf("events[%d]", len(evs)-1))
			if strings.Contains(string(a.body), "kek.") {
				t.Errorf("the refusal of %v quotes it: %s", evs, a.body)
			}
		}
		for _, typ := range lethe.HookEventTypes() { // every type a hook receives is accepted
			a := f.call(dpo, "POST", base, api.HookRequest{URL: good.URL, Events: []string{string(typ)}})
			f.want(a, 201, "")
			var h lethe.HookSecret
			a.decode(t, &h)
			f.want(f.call(dpo, "DELETE", base+"/"+h.ID, nil), http.StatusNoContent, "")
		}
		f.want(f.call(dpo, "POST", base, `{"url":"https://93.184.215.14/","events":["*"],"colour":1}`), 400, "invalid_argument")

		a := f.call(dpo, "POST", base, good)
		f.want(a, 201, "")
		var h lethe.HookSecret
		a.decode(t, &h)
		if !strings.HasPrefix(h.ID, "hk_") || !strings.HasPrefix(h.Secret, "whsec_") || h.URL != good.URL {
			t.Fatalf("created %+v", h)
		}
		a = f.call(dpo, "GET", base, nil)
		f.want(a, 200, "")
		var list api.HookList
		a.decode(t, &list)
		if len(list.Hooks) != 1 || list.Hooks[0].ID != h.ID || strings.Contains(string(a.body), "whsec_") {
			t.Fatalf("list %s", a.body)
		}
		if !strings.Contains(string(a.body), `"status":"active","consecutive_failures":0`) || strings.Contains(string(a.body), "paused_until") {
			t.Errorf("a new hook's state: %s", a.body)
		}
		// One hook by id: what the list shows of it, byte for byte; for a
		// scope-limited token or a writer, forbidden as the list.
		one := f.call(dpo, "GET", base+"/"+h.ID, nil)
		f.want(one, 200, "")
		if want, _ := json.Marshal(list.Hooks[0]); string(one.body) != string(want) {
			t.Errorf("GET hooks/{id}: %s, the list shows %s", one.body, want)
		}
		f.want(f.call(scoped, "GET", base+"/"+h.ID, nil), 403, "forbidden")
		f.want(f.call(writer, "GET", base+"/"+h.ID, nil), 403, "forbidden")
		// Another memory's hook is not this memory's.
		f.want(f.call(f.token("dpo", []string{"other"}), "GET", "/api/memories/other/hooks/"+h.ID, nil), 404, "not_found")

		// A forget queues a delivery (this server has no engine running).
		g := f.add(dpo, "hm", api.GrainInput{Type: "fact", Subject: "hook-subject", Content: "c"})
		a = f.call(dpo, "POST", "/api/memories/hm/forget", map[string]string{"blob_hash": g})
		var fr lethe.ForgetResult
		a.decode(t, &fr)
		a = f.call(dpo, "GET", base+"/"+h.ID+"/deliveries", nil)
		f.want(a, 200, "")
		var ds api.DeliveryList
		a.decode(t, &ds)
		if len(ds.Deliveries) != 1 || ds.Deliveries[0].EventID != fr.EventID || ds.Deliveries[0].State != "pending" {
			t.Fatalf("deliveries %s, want the forget's event %s", a.body, fr.EventID)
		}
		f.want(f.call(dpo, "GET", base+"/"+h.ID+"/deliveries?state=dead", nil), 200, "")
		f.want(f.call(dpo, "GET", base+"/"+h.ID+"/deliveries?state=bogus", nil), 400, "")
		a = f.call(dpo, "POST", base+"/"+h.ID+"/redeliver", api.RedeliverRequest{})
		f.want(a, 200, "")
		if !strings.Contains(string(a.body), `"redelivered":0`) {
			t.Errorf("redeliver with nothing dead: %s", a.body)
		}
		f.want(f.call(dpo, "POST", base+"/"+h.ID+"/redeliver", api.RedeliverRequest{DeliveryID: ds.Deliveries[0].ID}), 404, "not_found")

		a = f.call(dpo, "POST", base+"/"+h.ID+"/rotate", api.RotateHookRequest{OverlapSeconds: 60})
		f.want(a, 200, "")
		var rot lethe.HookSecret
		a.decode(t, &rot)
		if rot.Secret == h.Secret || rot.PreviousSecretUntil == nil {
			t.Errorf("rotate %s", a.body)
		}
		f.want(f.call(dpo, "POST", base+"/"+h.ID+"/rotate", api.RotateHookRequest{OverlapSeconds: -1}), 400, "invalid_argument")

		a = f.call("", "GET", "/metrics", nil)
		for _, m := range []string{"lethe_hook_queue_depth 1", "lethe_hook_dead_letters 0", "lethe_hook_deliveries_total 0", "lethe_hook_oldest_pending_seconds",
			"lethe_hook_paused 0", "lethe_hook_pauses_total 0"} {
			if !strings.Contains(string(a.body), m) {
				t.Errorf("/metrics lacks %q", m)
			}
		}

		f.want(f.call(dpo, "DELETE", base+"/"+h.ID, nil), http.StatusNoContent, "")
		gone := f.call(dpo, "DELETE", base+"/"+h.ID, nil)
		f.want(gone, 404, "not_found")
		f.want(f.call(dpo, "GET", base+"/"+h.ID+"/deliveries", nil), 404, "not_found")
		if a := f.call(dpo, "GET", base+"/"+h.ID, nil); a.status != 404 || string(a.body) != string(gone.body) {
			t.Errorf("GET of a deleted hook: %d %s, want DELETE's answer %s", a.status, a.body, gone.body)
		}
		// An id that is not a hook id is refused before any lookup, and no
		// answer quotes what it was sent.
		for _, r := range []struct{ method, path string }{
			{"DELETE", ""}, {"GET", ""}, {"POST", "/rotate"}, {"GET", "/deliveries"}, {"POST", "/redeliver"},
		} {
			var body any
			if r.method == "POST" {
				body = "{}"
			}
			a := f.call(dpo, r.method, base+"/john.doe@example.com"+r.path, body)
			var e api.ErrorResponse
			a.decode(t, &e)
			if a.status != 400 || e.Code != "invalid_argument" || e.Field != "id" || strings.Contains(string(a.body), "john") {
				t.Errorf("%s %s of a malformed id: %d %s, want 400 invalid_argument on id, unquoted", r.method, r.path, a.status, a.body)
			}
		}
	})
}

// A hook whose receiver keeps failing is paused, and GET .../hooks says so
// (status, consecutive_failures, paused_until), as /metrics does; a
// redeliver ends the pause (probing), and the probe's failure pauses it
// again for the first pause, not twice the last. Every answer is checked
// against the OpenAPI document.
func TestHookPauseRoute(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		var clock atomic.Int64
		clock.Store(time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC).UnixNano())
		now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
		f := newStoreFixture(t, kind, func(c *lethe.Config) {
			c.Now = now
			c.Hooks = lethe.HooksConfig{Deliver: true, AllowPrivate: true, Poll: 20 * time.Millisecond, BaseDelay: 10 * time.Millisecond,
				MaxDelay: 50 * time.Millisecond, PerHook: 1, PauseAfter: 2, Pause: time.Minute}
		}, nil, nil)
		var mu sync.Mutex
		requests, delay := 0, time.Duration(0)
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			requests++
			d := delay
			mu.Unlock()
			time.Sleep(d)
			w.WriteHeader(http.StatusServiceUnavailable)
		}))
		t.Cleanup(rcv.Close)
		dpo := f.token("dpo,writer", []string{"hm"})
		base := "/api/memories/hm/hooks"
		a := f.call(dpo, "POST", base, api.HookRequest{URL: rcv.URL + "/in", Events: []string{"grain.forget"}})
		f.want(a, 201, "")
		var h lethe.HookSecret
		a.decode(t, &h)
		if h.Status != lethe.HookActive || h.ConsecutiveFailures != 0 || h.PausedUntil != nil {
			t.Fatalf("created %s", a.body)
		}
		for i := range 3 {
			g := f.add(dpo, "hm", api.GrainInput{Type: "fact", Subject: fmt.Sprintf("s%d", i), Content: "c"})
			f.want(f.call(dpo, "POST", "/api/memories/hm/forget", map[string]string{"blob_hash": g}), 200, "")
		}
		hook := func() lethe.Hook {
			t.Helper()
			a := f.call(dpo, "GET", base, nil)
			f.want(a, 200, "")
			var list api.HookList
			a.decode(t, &list)
			if len(list.Hooks) != 1 {
				t.Fatalf("list %s", a.body)
			}
			return list.Hooks[0]
		}
		deadline := time.Now().Add(20 * time.Second)
		for hook().Status != lethe.HookPaused {
			if time.Now().After(deadline) {
				t.Fatalf("the hook is not paused: %+v", hook())
			}
			time.Sleep(20 * time.Millisecond)
		}
		got := hook()
		if got.ConsecutiveFailures != 2 || got.PausedUntil == nil || !got.PausedUntil.Equal(now().Add(time.Minute)) {
			t.Errorf("paused hook %+v, want 2 failures, paused until %v", got, now().Add(time.Minute))
		}
		a = f.call("", "GET", "/metrics", nil)
		for _, m := range []string{"lethe_hook_paused 1", "lethe_hook_pauses_total 1", "lethe_hook_failures_total 2"} {
			if !strings.Contains(string(a.body), m) {
				t.Errorf("/metrics lacks %q", m)
			}
		}

		// A redeliver ends the pause: probing while the probe is out (the
		// receiver answers after a second), paused again for a minute once
		// it failed.
		clock.Add(int64(30 * time.Second))
		mu.Lock()
		delay = time.Second
		mu.Unlock()
		f.want(f.call(dpo, "POST", base+"/"+h.ID+"/redeliver", api.RedeliverRequest{}), 200, "")
		if got := hook(); got.Status != lethe.HookProbing || got.PausedUntil == nil || !got.PausedUntil.Equal(now()) {
			t.Errorf("after a redeliver, the hook is %+v, want probing since now", got)
		}
		deadline = time.Now().Add(20 * time.Second)
		for got = hook(); got.Status != lethe.HookPaused; got = hook() {
			if time.Now().After(deadline) {
				t.Fatalf("the probe did not pause the hook again: %+v", got)
			}
			time.Sleep(20 * time.Millisecond)
		}
		mu.Lock()
		n := requests
		mu.Unlock()
		if got.ConsecutiveFailures != 3 || !got.PausedUntil.Equal(now().Add(time.Minute)) || n != 3 {
			t.Errorf("after the probe, the hook is %+v after %d requests; want 3 failures, paused for a minute from now", got, n)
		}
	})
}
