package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe/internal/api"
)

// calCall posts one CAL statement to memory default.
func (f *fixture) calCall(token, stmt string) answer {
	f.t.Helper()
	return f.callType(token, "POST", "/api/memories/default/cal", "text/cal", stmt)
}

type calAnswer struct {
	Statement  string                                         `json:"statement"`
	Grains     []struct{ Hash, Type, Subject, Object string } `json:"grains"`
	Chains     []struct{ Grains []struct{ Hash string } }     `json:"chains"`
	Hash       string                                         `json:"hash"`
	Superseded string                                         `json:"superseded"`
	Status     string                                         `json:"status"`
	Count      int                                            `json:"count"`
	Hashes     []string                                       `json:"hashes"`
}

// TestCAL replays Areev's supersede and HISTORY examples over HTTP: the
// supersede body without a type, then HISTORY OF the old hash through
// POST .../cal with Content-Type text/cal.
func TestCAL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		w := f.token("writer,reader,dpo", []string{"*"})
		old := f.add(w, "default", api.GrainInput{Type: "belief", Subject: "john", Relation: "likes", Object: "coffee"})

		// Areev's HTTP supersede body, as written: no type.
		a := f.call(w, "POST", "/api/memories/default/supersede", map[string]any{
			"blob_hash": old, "subject": "john", "relation": "likes", "object": "tea",
			"confidence": 0.98, "tags": []string{"updated"}})
		f.want(a, http.StatusCreated, "")
		var sup api.SupersedeResponse
		a.decode(t, &sup)
		if sup.Status != "superseded" || sup.Superseded != old || sup.Hash == "" {
			t.Fatalf("supersede = %s", a.body)
		}

		a = f.calCall(w, `HISTORY OF "`+old+`"`)
		f.want(a, http.StatusOK, "")
		var hist calAnswer
		a.decode(t, &hist)
		if hist.Statement != "history" || len(hist.Grains) != 2 || hist.Grains[0].Hash != sup.Hash ||
			hist.Grains[0].Type != "belief" || hist.Grains[0].Object != "tea" || hist.Grains[1].Hash != old {
			t.Fatalf("HISTORY OF = %s", a.body)
		}
		// The same chain as the history route.
		r := f.call(w, "GET", "/api/memories/default/grains/"+old+"/history", nil)
		var route api.HistoryResponse
		r.decode(t, &route)
		if len(route.Grains) != 2 || route.Grains[0].Hash != hist.Grains[0].Hash {
			t.Fatalf("route history %s differs from CAL %s", r.body, a.body)
		}

		a = f.calCall(w, "history where SUBJECT = \"John\";\n")
		f.want(a, http.StatusOK, "")
		var sh calAnswer
		a.decode(t, &sh)
		if len(sh.Chains) != 1 || len(sh.Chains[0].Grains) != 2 {
			t.Fatalf("HISTORY WHERE = %s", a.body)
		}

		a = f.calCall(w, `SUPERSEDE "`+sup.Hash+`" SET object = "water"`)
		f.want(a, http.StatusCreated, "")
		var s2 calAnswer
		a.decode(t, &s2)
		if s2.Statement != "supersede" || s2.Status != "superseded" || s2.Superseded != sup.Hash {
			t.Fatalf("SUPERSEDE = %s", a.body)
		}

		a = f.calCall(w, `RECALL WHERE subject = "john" AND relation = "likes" LIMIT 10`)
		f.want(a, http.StatusOK, "")
		var rec calAnswer
		a.decode(t, &rec)
		if len(rec.Grains) != 1 || rec.Grains[0].Hash != s2.Hash {
			t.Fatalf("RECALL = %s", a.body)
		}

		a = f.calCall(w, `FORGET "`+old+`"`)
		if a.status != http.StatusOK && a.status != http.StatusAccepted {
			t.Fatalf("FORGET: %d %s", a.status, a.body)
		}
		var fg calAnswer
		a.decode(t, &fg)
		if fg.Statement != "forget" || fg.Status != "forgotten" || fg.Count != 3 {
			t.Fatalf("FORGET = %s", a.body)
		}
		f.want(f.calCall(w, `HISTORY OF "`+old+`"`), http.StatusNotFound, "not_found")
	})
}

// TestCALRoles checks that each statement needs the role of its route.
func TestCALRoles(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	admin := f.token("admin", []string{"*"})
	h := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "john", Object: "x"})
	stmts := map[string]string{
		"history":   `HISTORY OF "` + h + `"`,
		"recall":    `RECALL`,
		"supersede": `SUPERSEDE "` + h + `" SET object = "y"`,
		"forget":    `FORGET "` + h + `"`,
	}
	allowed := map[string][]string{ // role -> statements it may run
		"reader":  {"history", "recall"},
		"writer":  {"supersede"},
		"dpo":     {"forget"},
		"auditor": {},
	}
	for role, ok := range allowed {
		tok := f.token(role, []string{"*"})
		for name, st := range stmts {
			a := f.calCall(tok, st)
			want := false
			for _, o := range ok {
				want = want || o == name
			}
			if got := a.status != http.StatusForbidden; got != want {
				t.Errorf("%s running %s: %d %s, want allowed %t", role, name, a.status, a.body, want)
			}
			if !want && a.errCode() != "forbidden" {
				t.Errorf("%s running %s: %s, want forbidden", role, name, a.body)
			}
		}
	}
}

// TestCALRefusalsAsRoutes checks that a hold or a protection rule refuses
// FORGET over CAL with the status and code of POST .../forget, and that a
// scope-limited token is kept to its scopes as on the routes.
func TestCALRefusalsAsRoutes(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	admin := f.token("admin", []string{"*"})
	pinned := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "john", Object: "allergic", Pinned: true})
	held := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "mary", Object: "x", UserID: "u-held"})
	f.want(f.call(admin, "POST", "/api/memories/default/holds", map[string]any{"user_id": "u-held"}), http.StatusCreated, "")

	for _, h := range []string{pinned, held} {
		route := f.call(admin, "POST", "/api/memories/default/forget", map[string]any{"blob_hash": h})
		viaCAL := f.calCall(admin, `FORGET "`+h+`"`)
		if route.status < 400 || route.status != viaCAL.status || route.errCode() != viaCAL.errCode() {
			t.Errorf("route %d %s, CAL %d %s: want the same refusal", route.status, route.body, viaCAL.status, viaCAL.body)
		}
	}

	other := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "ann", Object: "x", Scope: "acme/dev"})
	mine := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "ann", Object: "y", Scope: "acme/prod"})
	scoped := f.token("writer,reader,dpo", []string{"default"}, "acme/prod")
	for _, st := range []string{`HISTORY OF "` + other + `"`, `SUPERSEDE "` + other + `" SET object = "z"`, `FORGET "` + other + `"`} {
		f.want(f.calCall(scoped, st), http.StatusNotFound, "not_found")
	}
	a := f.calCall(scoped, `HISTORY WHERE subject = "ann"`)
	var sh calAnswer
	a.decode(t, &sh)
	if len(sh.Chains) != 1 || sh.Chains[0].Grains[0].Hash != mine {
		t.Fatalf("scoped HISTORY WHERE = %s, want only the grain in acme/prod", a.body)
	}
	f.want(f.calCall(scoped, `SUPERSEDE "`+mine+`" SET scope = "acme/dev"`), http.StatusForbidden, "forbidden")
	f.want(f.calCall(scoped, `RECALL WHERE scope = "acme/dev"`), http.StatusForbidden, "forbidden")
}

func TestCALBadInput(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	tok := f.token("reader", []string{"*"})
	a := f.calCall(tok, "HISTORY OF \"zelda-secret\" junk")
	f.want(a, http.StatusBadRequest, "invalid_argument")
	var e api.ErrorResponse
	a.decode(t, &e)
	if e.Field != "cal" || !strings.Contains(e.Message, "1:12: ") || strings.Contains(string(a.body), "zelda") {
		t.Errorf("syntax error = %s, want field cal, a 1:12 position and no quoted input", a.body)
	}
	f.want(f.callType(tok, "POST", "/api/memories/default/cal", "application/json", `"RECALL"`), http.StatusUnsupportedMediaType, "unsupported_media_type")
	f.want(f.calCall(tok, "  "), http.StatusBadRequest, "invalid_argument")
	// An empty value filter never means every value (HISTORY and FORGET
	// refuse it too).
	for _, st := range []string{`RECALL WHERE subject = ""`, `RECALL WHERE user_id = " "`, `RECALL WHERE tag = ""`} {
		f.want(f.calCall(tok, st), http.StatusBadRequest, "invalid_argument")
	}
	f.want(f.calCall(tok, `RECALL WHERE subject = "`+strings.Repeat("a", 70000)+`"`), http.StatusRequestEntityTooLarge, "payload_too_large")
	// An empty tag is refused, as the supersede route refuses it, never
	// dropped.
	w := f.token("writer,reader", []string{"*"})
	h := f.add(w, "default", api.GrainInput{Type: "fact", Subject: "a", Tags: []string{"x"}})
	a = f.calCall(w, `SUPERSEDE "`+h+`" SET tags = ["y", ""]`)
	f.want(a, http.StatusBadRequest, "invalid_argument")
	a.decode(t, &e)
	if e.Field != "cal" || !strings.Contains(e.Message, "tags[1] is empty") {
		t.Errorf("CAL tags = [\"y\", \"\"]: %s, want field cal naming tags[1]", a.body)
	}
	if strings.Contains(f.logs.String(), "zelda") {
		t.Error("the access log quotes a statement")
	}
}

// TestPeerRequestShapes replays Areev's forget and scope-erase bodies as
// written.
func TestPeerRequestShapes(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	admin := f.token("admin", []string{"*"})
	j1 := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "a", Object: "1", UserID: "john"})
	j2 := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "b", Object: "2", UserID: "john"})
	m1 := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "c", Object: "3", UserID: "mary"})
	missing := strings.Repeat("0", 64)

	// {"hashes": [...], "user_id": "john"}: the listed grains that are john's.
	a := f.call(admin, "POST", "/api/memories/default/forget", map[string]any{"hashes": []string{j1, m1, missing}, "user_id": "john"})
	var fg api.ForgetResponse
	a.decode(t, &fg)
	if fg.Count != 1 || len(fg.Hashes) != 1 || fg.Hashes[0] != j1 {
		t.Fatalf("forget hashes AND user_id = %d %s, want %s alone", a.status, a.body, j1)
	}
	for h, want := range map[string]int{j1: http.StatusNotFound, j2: http.StatusOK, m1: http.StatusOK} {
		f.want(f.call(admin, "GET", "/api/memories/default/grains/"+h, nil), want, "")
	}
	a = f.call(admin, "POST", "/api/memories/default/forget", map[string]any{"blob_hash": m1, "user_id": "john"})
	a.decode(t, &fg)
	if a.status != http.StatusOK || fg.Count != 0 || fg.Status != "not_found" {
		t.Fatalf("forget mary's grain AND user_id john = %d %s, want not_found", a.status, a.body)
	}
	a = f.call(admin, "POST", "/api/memories/default/forget", map[string]any{"blob_hash": j2, "subject": "B", "user_id": "john"})
	a.decode(t, &fg)
	if fg.Count != 1 {
		t.Fatalf("forget hash AND subject AND user = %d %s", a.status, a.body)
	}
	f.want(f.call(admin, "POST", "/api/memories/default/forget", map[string]any{"blob_hash": m1, "hashes": []string{m1}}), http.StatusBadRequest, "")
	f.want(f.call(admin, "POST", "/api/memories/default/forget", map[string]any{"subject": "c", "user_id": "mary"}), http.StatusBadRequest, "")
	f.want(f.call(admin, "POST", "/api/memories/default/forget", map[string]any{"hashes": []string{}, "user_id": "mary"}), http.StatusBadRequest, "empty_selector")

	// {"scope_path": "acme/prod/bot1"}
	s := f.add(admin, "default", api.GrainInput{Type: "fact", Subject: "d", Object: "4", Scope: "acme/prod/bot1"})
	a = f.call(admin, "POST", "/api/memories/default/scope-erase", map[string]any{"scope_path": "acme/prod/bot1"})
	if a.status != http.StatusOK && a.status != http.StatusAccepted {
		t.Fatalf("scope-erase scope_path: %d %s", a.status, a.body)
	}
	if g := f.call(admin, "GET", "/api/memories/default/grains/"+s, nil); g.status == http.StatusOK {
		t.Fatalf("grain in the erased scope still readable: %s", g.body)
	}
	f.want(f.call(admin, "POST", "/api/memories/default/scope-erase", map[string]any{"scope_path": "a", "scope": "a"}), http.StatusBadRequest, "invalid_argument")
	f.want(f.call(admin, "POST", "/api/memories/default/scope-erase", map[string]any{"scope_path": ""}), http.StatusBadRequest, "empty_selector")
}

// TestForgetNarrowingModel checks forget with hashes and a user and/or
// subject against a model: random grains from small pools of users and
// subjects, a random selection of their hashes (and a hash of no grain),
// and the answer must be exactly the selected grains that match, the rest
// untouched.
func TestForgetNarrowingModel(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	admin := f.token("admin", []string{"*"})
	users, subjects := []string{"u-a", "u-b", ""}, []string{"s-a", "S-A", "s-b"}
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		type grain struct{ hash, user, subject string }
		var gs []grain
		for i := rapid.IntRange(1, 5).Draw(rt, "grains"); i > 0; i-- {
			n++
			g := grain{user: rapid.SampledFrom(users).Draw(rt, "user"), subject: rapid.SampledFrom(subjects).Draw(rt, "subject")}
			g.hash = f.add(admin, "default", api.GrainInput{Type: "fact", Subject: g.subject, Object: fmt.Sprint("o", n), UserID: g.user})
			gs = append(gs, g)
		}
		var sel []string
		var picked []grain
		for _, g := range gs {
			if rapid.Bool().Draw(rt, "pick") {
				sel, picked = append(sel, g.hash), append(picked, g)
			}
		}
		sel = append(sel, strings.Repeat("e", 64))
		body := map[string]any{"hashes": sel}
		user := rapid.SampledFrom(users[:2]).Draw(rt, "by user")
		subject := rapid.SampledFrom(append(subjects, "")).Draw(rt, "by subject")
		if user != "" {
			body["user_id"] = user
		}
		if subject != "" {
			body["subject"] = subject
		}
		want := map[string]bool{}
		for _, g := range picked {
			if g.user == user && (subject == "" || strings.EqualFold(g.subject, subject)) {
				want[g.hash] = true
			}
		}
		a := f.call(admin, "POST", "/api/memories/default/forget", body)
		if a.status != http.StatusOK && a.status != http.StatusAccepted {
			rt.Fatalf("forget %v: %d %s", body, a.status, a.body)
		}
		var res api.ForgetResponse
		a.decode(t, &res)
		if res.Count != len(want) || len(res.Hashes) != len(want) {
			rt.Fatalf("forget %v forgot %v, want %v", body, res.Hashes, want)
		}
		for _, h := range res.Hashes {
			if !want[h] {
				rt.Fatalf("forget %v forgot %s, which it should not", body, h)
			}
		}
		for _, g := range gs {
			got := f.call(admin, "GET", "/api/memories/default/grains/"+g.hash, nil).status
			if (got == http.StatusOK) == want[g.hash] {
				rt.Fatalf("grain %+v: GET %d after forget %v", g, got, body)
			}
		}
	})
}
