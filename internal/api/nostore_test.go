package api_test

import (
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// TestNoStore: every /api answer is Cache-Control: no-store, those that
// carry a secret or personal data first (a hook's whsec_ secret at
// creation and rotation, an erasure request's subject_nonce, an export,
// a token, grains), errors too; the tlog-tiles routes keep their own. The
// contract wrapper checks the same of every answer of this package's
// tests.
func TestNoStore(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	admin := f.token("admin", []string{"*"})
	m := "/api/memories/ns"
	h := f.add(admin, "ns", api.GrainInput{Type: "fact", Subject: alice, UserID: userU1})
	// A forget answers once its event is in the log, with its proof: the
	// checkpoints below then exist. (An erasure request's event reaches the
	// log through the sequencer in the background: under load, the
	// checkpoint was asked for before it and answered 404.)
	gone := f.add(admin, "ns", api.GrainInput{Type: "fact", Subject: alice, Object: "forgotten", UserID: userU1})
	f.want(f.call(admin, "POST", m+"/forget", api.ForgetRequest{BlobHash: &gone}), 200, "")
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	a := f.call(admin, "POST", m+"/hooks", api.HookRequest{URL: "https://93.184.215.14/in", Events: []string{"*"}})
	f.want(a, 201, "")
	var hook lethe.HookSecret
	a.decode(t, &hook)

	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"hook rotation", "POST", m + "/hooks/" + hook.ID + "/rotate", map[string]any{}, 200},
		{"erasure request", "POST", m + "/erasure-requests", map[string]any{"user_id": userU1, "reason": "consent_withdrawn", "reference": "T-1"}, 201},
		{"export", "POST", m + "/export", map[string]any{"user_id": userU1, "recipient": id.Recipient().String()}, 200},
		{"token", "POST", "/api/tokens", api.TokenRequest{Roles: []string{"reader"}, Memories: []string{"ns"}}, 201},
		{"get", "GET", m + "/grains/" + h, nil, 200},
		{"history", "GET", m + "/grains/" + h + "/history", nil, 200},
		{"recall", "POST", m + "/recall", api.RecallRequest{Subject: alice}, 200},
		{"audit checkpoint", "GET", "/api/audit/checkpoint", nil, 200},
		{"not found", "GET", m + "/grains/" + strings.Repeat("0", 64), nil, 404},
		{"unauthenticated", "POST", m + "/recall", api.RecallRequest{}, 401},
	} {
		token := admin
		if c.status == 401 {
			token = ""
		}
		got := f.call(token, c.method, c.path, c.body)
		f.want(got, c.status, "")
		if cc := got.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", c.name, cc)
		}
	}
	if cc := a.header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("hook creation: Cache-Control %q, want no-store", cc)
	}
	// The tlog-tiles checkpoint keeps what c2sp.org/tlog-tiles asks.
	if cc := f.call(admin, "GET", "/api/audit/log/checkpoint", nil).header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("tlog-tiles checkpoint: Cache-Control %q, want no-cache", cc)
	}
}
