package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// TestDryRunRoutes checks dry_run on forget, forget-user and scope-erase
// over HTTP: the answer says what the call would do (or which hold would
// refuse it), nothing changes (the grains stay readable; TestDryRunsModel
// checks every row and the audit log), and the real call then does what
// the dry run said.
func TestDryRunRoutes(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	admin := f.token("admin", []string{"*"})
	ctx := context.Background()
	a := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "john", Object: "tea", UserID: "john", Scope: "acme/prod"})
	b := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "mary", Object: "tea", UserID: "mary", Scope: "acme/prod/bot1"})

	var fr lethe.ForgetResult
	r := f.call(admin, "POST", "/api/memories/default/forget", map[string]any{"hashes": []string{a, b}, "user_id": "john", "dry_run": true})
	f.want(r, http.StatusOK, "")
	r.decode(t, &fr)
	if !fr.DryRun || fr.Status != "would_forget" || fr.Count != 1 || fr.Hashes[0] != a || fr.Receipt != nil {
		t.Fatalf("forget dry run: %s", r.body)
	}
	var er lethe.Erasure
	r = f.call(admin, "POST", "/api/memories/default/scope-erase", map[string]any{"scope_path": "acme", "dry_run": true})
	f.want(r, http.StatusOK, "")
	r.decode(t, &er)
	if !er.DryRun || er.Count != 2 || er.KeyFingerprint == "" || er.HeldBy != "" {
		t.Fatalf("scope-erase dry run: %s", r.body)
	}
	hold, err := f.db.SetHold(ctx, lethe.HoldSpec{Scope: "acme/prod/bot1"})
	if err != nil {
		t.Fatal(err)
	}
	r = f.call(admin, "POST", "/api/memories/default/scope-erase", map[string]any{"scope": "acme", "dry_run": true})
	f.want(r, http.StatusOK, "")
	er = lethe.Erasure{}
	r.decode(t, &er)
	if !er.DryRun || er.HeldBy != hold.ID || er.Count != 2 {
		t.Fatalf("held scope-erase dry run: %s", r.body)
	}
	r = f.call(admin, "POST", "/api/memories/default/forget-user", map[string]any{"user_id": "mary", "dry_run": true})
	er = lethe.Erasure{}
	r.decode(t, &er)
	if r.status != http.StatusOK || !er.DryRun || er.HeldBy != hold.ID || er.Count != 1 {
		t.Fatalf("held forget-user dry run: %d %s", r.status, r.body)
	}
	for _, h := range []string{a, b} {
		f.want(f.call(admin, "GET", "/api/memories/default/grains/"+h, nil), http.StatusOK, "")
	}
	// The real calls do what the dry runs said.
	f.want(f.call(admin, "POST", "/api/memories/default/forget-user", map[string]any{"user_id": "mary"}), 423, "held")
	r = f.call(admin, "POST", "/api/memories/default/forget", map[string]any{"hashes": []string{a, b}, "user_id": "john"})
	fr = lethe.ForgetResult{}
	r.decode(t, &fr)
	if fr.Status != "forgotten" || fr.Count != 1 || fr.Hashes[0] != a {
		t.Fatalf("forget: %s", r.body)
	}
}
