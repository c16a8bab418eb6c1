package api_test

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/proofs"
)

// TestErasureRequestsAPI drives the erasure request routes over real HTTP
// with the contract check on: filing with a preview, four eyes, execution
// with its proof, the certificate as JSON and HTML, listing, rejection,
// scope-limited tokens, and a hold that blocks a request until released.
func TestErasureRequestsAPI(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		const m = "portal"
		const user = "subject-31@example.net"
		w := f.token("writer", []string{m})
		dpo1, dpo2 := f.token("dpo", []string{m}), f.token("dpo", []string{m})
		aud := f.token("auditor", []string{m})
		scoped := f.token("dpo", []string{m}, "acme/dev")
		for _, s := range []string{"acme/prod", "acme/dev", "other"} {
			f.add(w, m, api.GrainInput{Type: "fact", Subject: "s", Relation: "r", Object: s, UserID: user, Scope: s})
		}
		base := "/api/memories/" + m + "/erasure-requests"

		// Bad input, each with its code.
		f.want(f.call(dpo1, "POST", base, map[string]any{"user_id": user, "reason": "whim", "reference": "T-1"}), 400, "invalid_argument")
		f.want(f.call(dpo1, "POST", base, map[string]any{"user_id": user, "reason": "other", "reference": "a b"}), 400, "invalid_argument")
		f.want(f.call(dpo1, "POST", base, map[string]any{"reason": "other", "reference": "T-1"}), 400, "empty_selector")
		f.want(f.call(dpo1, "POST", base, map[string]any{"user_id": user, "scope": "acme", "reason": "other", "reference": "T-1"}), 400, "invalid_argument")
		f.want(f.call(dpo1, "POST", base, map[string]any{"user_id": user, "reason": "other", "reference": "T-1", "due": "2001-01-01T00:00:00Z"}), 400, "invalid_argument")
		for _, due := range []any{"garbage", 12} {
			a := f.call(dpo1, "POST", base, map[string]any{"user_id": user, "reason": "other", "reference": "T-1", "due": due})
			f.wantField(a, 400, "invalid_argument", "due")
			if strings.Contains(string(a.body), "garbage") {
				t.Errorf("due %v: the error quotes the value: %s", due, a.body)
			}
		}
		f.want(f.call(scoped, "POST", base, map[string]any{"user_id": user, "reason": "other", "reference": "T-1"}), 403, "forbidden")
		f.want(f.call(w, "POST", base, map[string]any{"user_id": user, "reason": "other", "reference": "T-1"}), 403, "forbidden")
		f.want(f.call(dpo1, "GET", base+"?status=done", nil), 400, "invalid_argument")
		f.want(f.call(dpo1, "GET", base+"?overdue=maybe", nil), 400, "invalid_argument")
		f.want(f.call(dpo1, "GET", base+"/xyz", nil), 400, "invalid_argument")
		f.want(f.call(dpo1, "GET", base+"/"+strings.Repeat("a", 32), nil), 404, "not_found")

		a := f.call(dpo1, "POST", base, map[string]any{"user_id": user, "reason": "data_subject_request", "reference": "ZD-77812"})
		f.want(a, 201, "")
		var filed lethe.FiledRequest
		a.decode(t, &filed)
		if filed.Status != "pending" || filed.Preview.Count != 3 || len(filed.Preview.Scopes) != 3 || a.header.Get("Location") != base+"/"+filed.ID {
			t.Fatalf("filed %s", a.body)
		}
		if strings.Contains(string(a.body), user) {
			t.Error("the filing's answer names the user")
		}
		id := filed.ID
		f.want(f.call(dpo1, "POST", base+"/"+id+"/execute", nil), 409, "invalid_state")
		f.want(f.call(dpo1, "POST", base+"/"+id+"/approve", nil), 403, "four_eyes")
		f.want(f.call(dpo1, "GET", base+"/"+id+"/certificate", nil), 409, "invalid_state")
		f.want(f.call(scoped, "GET", base+"/"+id, nil), 404, "not_found")
		f.want(f.call(dpo2, "POST", base+"/"+id+"/approve", nil), 200, "")
		a = f.call(dpo1, "POST", base+"/"+id+"/execute", nil)
		f.want(a, 200, "")
		var e lethe.Erasure
		a.decode(t, &e)
		nonce, _ := hex.DecodeString(filed.SubjectNonce)
		if e.Count != 3 || e.Proof == nil {
			t.Fatalf("execution %s", a.body)
		}
		if _, err := proofs.Verify(e.Proof, proofs.VerifyOptions{LogKey: f.auditKey(aud), Subject: user, Nonce: nonce}); err != nil {
			t.Errorf("the execution's proof: %v", err)
		}
		f.want(f.call(dpo2, "POST", base+"/"+id+"/execute", nil), 409, "invalid_state")

		// The certificate, as JSON and as HTML, for the auditor too.
		a = f.call(aud, "GET", base+"/"+id+"/certificate", nil)
		f.want(a, 200, "")
		var c lethe.ErasureCertificate
		a.decode(t, &c)
		if c.LeafIndex != e.Proof.LeafIndex || c.KeyFingerprints[0] != e.KeyFingerprint || c.Reference != "ZD-77812" || c.Count != 3 {
			t.Errorf("certificate %s", a.body)
		}
		// A malformed query is 400 before the id is looked up: for an
		// executed request and for an id that names none.
		other := id[:len(id)-1] + "0"
		if other == id {
			other = id[:len(id)-1] + "1"
		}
		for _, rid := range []string{id, other} {
			f.want(f.call(aud, "GET", base+"/"+rid+"/certificate?format=pdf", nil), 400, "invalid_argument")
			f.want(f.call(aud, "GET", base+"/"+rid+"/certificate?format=", nil), 400, "invalid_argument")
		}
		f.want(f.call(aud, "GET", base+"/"+other+"/certificate?format=json", nil), 404, "not_found")
		for _, q := range []string{"?format=html", ""} {
			req := f.srv.URL + base + "/" + id + "/certificate" + q
			r, _ := http.NewRequest("GET", req, nil)
			r.Header.Set("Authorization", "Bearer "+dpo2)
			r.Header.Set("Accept", "text/html")
			resp, err := f.srv.Client().Do(r)
			if err != nil {
				t.Fatal(err)
			}
			var page strings.Builder
			buf := make([]byte, 1<<16)
			for {
				n, err := resp.Body.Read(buf)
				page.Write(buf[:n])
				if err != nil {
					break
				}
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("html certificate%s: %d %s", q, resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			for _, s := range []string{e.KeyFingerprint, "ZD-77812", "lethe verify", c.Commitment} {
				if !strings.Contains(page.String(), s) {
					t.Errorf("the html certificate lacks %q", s)
				}
			}
			if strings.Contains(page.String(), user) {
				t.Error("the html certificate names the user")
			}
		}

		// Rejection, and a scope request within a scoped token's scopes
		// that a hold blocks until it is released.
		a = f.call(dpo1, "POST", base, map[string]any{"user_id": "subject-32@example.net", "reason": "other", "reference": "ZD-77813"})
		f.want(a, 201, "")
		a.decode(t, &filed)
		f.want(f.call(dpo2, "POST", base+"/"+filed.ID+"/reject", nil), 200, "")
		f.want(f.call(dpo2, "POST", base+"/"+filed.ID+"/approve", nil), 409, "invalid_state")

		a = f.call(dpo1, "POST", "/api/memories/"+m+"/holds", map[string]any{"scope": "acme"})
		f.want(a, 201, "")
		var hold lethe.Hold
		a.decode(t, &hold)
		f.add(w, m, api.GrainInput{Type: "fact", Subject: "s", Relation: "r", Object: "o", Scope: "acme/dev/x"})
		a = f.call(scoped, "POST", base, map[string]any{"scope": "acme/dev", "reason": "retention_expired", "reference": "RET-2026-11", "due": "2099-01-01T00:00:00Z"})
		f.want(a, 400, "invalid_argument") // too far
		a = f.call(scoped, "POST", base, map[string]any{"scope": "acme/dev", "reason": "retention_expired", "reference": "RET-2026-11"})
		f.want(a, 201, "")
		a.decode(t, &filed)
		if len(filed.Preview.Holds) != 1 || filed.Preview.Holds[0] != hold.ID || filed.Preview.Count != 1 {
			t.Errorf("preview under a hold: %s", a.body)
		}
		f.want(f.call(dpo2, "POST", base+"/"+filed.ID+"/approve", nil), 200, "")
		f.want(f.call(scoped, "POST", base+"/"+filed.ID+"/execute", nil), 423, "held")
		var r lethe.ErasureRequest
		a = f.call(scoped, "GET", base+"/"+filed.ID, nil)
		a.decode(t, &r)
		if r.Status != "blocked" || r.Hold != hold.ID {
			t.Errorf("blocked request %s", a.body)
		}
		var list api.ErasureRequestList
		a = f.call(scoped, "GET", base, nil)
		a.decode(t, &list)
		if len(list.Requests) != 1 || list.Requests[0].ID != filed.ID {
			t.Errorf("a scoped token lists %s", a.body)
		}
		a = f.call(dpo1, "GET", base+"?status=blocked", nil)
		a.decode(t, &list)
		if len(list.Requests) != 1 {
			t.Errorf("blocked: %s", a.body)
		}
		a = f.call(dpo1, "GET", base+"?overdue=true", nil)
		a.decode(t, &list)
		if len(list.Requests) != 0 {
			t.Errorf("overdue: %s", a.body)
		}
		a = f.call(dpo1, "GET", base+"?due_before=2099-01-01T00:00:00Z", nil)
		a.decode(t, &list)
		if len(list.Requests) != 3 {
			t.Errorf("due before 2099: %d requests", len(list.Requests))
		}
		f.want(f.call(dpo1, "DELETE", "/api/memories/"+m+"/holds/"+hold.ID, nil), 204, "")
		a = f.call(scoped, "GET", base+"/"+filed.ID, nil)
		a.decode(t, &r)
		if r.Status != "executed" || r.Count != 1 {
			t.Errorf("after the release: %s", a.body)
		}
	})
}
