package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

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
		for _, m := range []string{"lethe_hook_queue_depth 1", "lethe_hook_dead_letters 0", "lethe_hook_deliveries_total 0", "lethe_hook_oldest_pending_seconds"} {
			if !strings.Contains(string(a.body), m) {
				t.Errorf("/metrics lacks %q", m)
			}
		}

		f.want(f.call(dpo, "DELETE", base+"/"+h.ID, nil), http.StatusNoContent, "")
		f.want(f.call(dpo, "DELETE", base+"/"+h.ID, nil), 404, "not_found")
		f.want(f.call(dpo, "GET", base+"/"+h.ID+"/deliveries", nil), 404, "not_found")
		// An id that is not a hook id is refused before any lookup, and no
		// answer quotes what it was sent.
		for _, r := range []struct{ method, path string }{
			{"DELETE", ""}, {"POST", "/rotate"}, {"GET", "/deliveries"}, {"POST", "/redeliver"},
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
