package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// Issue 12 over HTTP: forgetting a user with no key forgets nothing, a
// chain whose newest version was erased shows the erased link and can be
// superseded again, and an export names its audit event.
func TestDestructiveCallsTouchOnlyWhatTheyName(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		w := f.token("writer,reader,dpo", []string{"default"})
		base := "/api/memories/default"
		mine := f.add(w, "default", api.GrainInput{Type: "fact", Subject: "s1", Object: "o", UserID: "alice"})
		nouser := f.add(w, "default", api.GrainInput{Type: "fact", Subject: "s2", Object: "o"})
		caveat := f.add(w, "default", api.GrainInput{Type: "caveat", Content: "careful"})
		a := f.call(w, "POST", base+"/forget", map[string]any{"user_id": "nobody"})
		f.want(a, http.StatusOK, "")
		var res lethe.ForgetResult
		a.decode(t, &res)
		if res.Count != 0 || res.Status != "not_found" {
			t.Errorf("forget by an unknown user: %s", a.body)
		}
		for _, h := range []string{mine, nouser, caveat} {
			f.want(f.call(w, "GET", base+"/grains/"+h, nil), http.StatusOK, "")
		}

		a = f.call(w, "POST", base+"/supersede", map[string]any{"blob_hash": mine, "type": "fact", "object": "p", "user_id": "bob"})
		f.want(a, http.StatusCreated, "")
		var sup api.SupersedeResponse
		a.decode(t, &sup)
		f.want(f.call(w, "POST", base+"/forget-user", map[string]any{"user_id": "bob"}), http.StatusOK, "")
		a = f.call(w, "GET", base+"/grains/"+mine+"/history", nil)
		f.want(a, http.StatusOK, "")
		if !strings.Contains(string(a.body), `{"hash":"`+sup.Hash+`","erased":true}`) {
			t.Errorf("history does not show the erased link: %s", a.body)
		}
		f.want(f.call(w, "POST", base+"/supersede", map[string]any{"blob_hash": mine, "type": "fact", "object": "q"}), http.StatusCreated, "")

		a = f.call(w, "POST", base+"/export", map[string]any{"user_id": "alice", "recipient": "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"})
		f.want(a, http.StatusOK, "")
		if len(a.header.Get(api.HeaderEventID)) != 32 || len(a.header.Get(api.HeaderSubjectNonce)) != 64 {
			t.Errorf("export answer names no audit event: %v", a.header)
		}
	})
}
