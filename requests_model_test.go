package lethe_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// TestErasureRequestModel runs random sequences of file, approve, reject,
// execute, hold, release and write, through two instances of one store,
// against a model of the requests: the status of each request follows the
// model after every step (four eyes, and every transition its status
// forbids, refused with their codes); no request executes without a second
// token's approval; a rejected request never runs; none runs twice (one
// key.erase names it, at most); and with no hold in force, none is
// blocked, while a hold on the request's own user or an enclosing or
// nested scope blocks it.
func TestErasureRequestModel(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			cfg := lethe.Config{DataDir: t.TempDir()}
			if b.name == "postgres" {
				cfg.PostgresDSN = testenv.Postgres(t)
			}
			dbs := [2]*lethe.DB{openDB(t, cfg), openDB(t, cfg)}
			n := 0
			var machines []*reqMachine
			rapid.Check(t, func(rt *rapid.T) {
				n++
				m := &reqMachine{dbs: dbs, memory: fmt.Sprintf("rq%d", n), reqs: map[string]*mreq{}, holds: map[string]lethe.HoldSpec{}}
				var batch []lethe.Grain
				for _, u := range reqUsers {
					for _, s := range reqScopes {
						batch = append(batch, lethe.Grain{Memory: m.memory, Type: "fact", Subject: "s", Relation: "r", Object: "o", UserID: u, Scope: s})
					}
				}
				if _, err := dbs[0].AddBatch(context.Background(), batch); err != nil {
					rt.Fatal(err)
				}
				rt.Repeat(rapid.StateMachineActions(m))
				machines = append(machines, m)
			})
			// One read of the log for every sequence (reading it after each
			// would cost the square of its length).
			checkRequestLog(t, dbs[0], machines)
		})
	}
}

var (
	reqUsers  = []string{"u1", "u2", ""}
	reqScopes = []string{"a", "a/b", "d"}
	reqTokens = []string{"tok_a", "tok_b", "tok_c"}
)

// mreq is the model of one request.
type mreq struct {
	id        string
	requester string
	kind      string // user or scope
	subject   string
	status    lethe.RequestStatus
}

type reqMachine struct {
	dbs    [2]*lethe.DB
	memory string
	reqs   map[string]*mreq
	order  []string
	holds  map[string]lethe.HoldSpec
}

func (m *reqMachine) db(t *rapid.T) *lethe.DB { return m.dbs[rapid.IntRange(0, 1).Draw(t, "instance")] }

func (m *reqMachine) pick(t *rapid.T) *mreq {
	if len(m.order) == 0 {
		t.Skip("no request")
	}
	return m.reqs[rapid.SampledFrom(m.order).Draw(t, "request")]
}

func (m *reqMachine) write(t *rapid.T, user, scope string) {
	g := lethe.Grain{Memory: m.memory, Type: "fact", Subject: "s", Relation: "r", Object: fmt.Sprint(len(m.order), user, scope), UserID: user, Scope: scope}
	if _, err := m.dbs[0].Add(context.Background(), g); err != nil {
		t.Fatalf("add: %v", err)
	}
}

func (m *reqMachine) Write(t *rapid.T) {
	u := rapid.SampledFrom(reqUsers).Draw(t, "user")
	s := rapid.SampledFrom(reqScopes).Draw(t, "scope")
	m.write(t, u, s)
}

func (m *reqMachine) File(t *rapid.T) {
	tok := rapid.SampledFrom(reqTokens).Draw(t, "token")
	spec := lethe.RequestSpec{Memory: m.memory, Reason: "other", Reference: "T-1"}
	r := &mreq{requester: tok, status: "pending"}
	if rapid.Bool().Draw(t, "user request") {
		spec.UserID = rapid.SampledFrom(reqUsers[:2]).Draw(t, "user")
		r.kind, r.subject = "user", spec.UserID
	} else {
		spec.Scope = rapid.SampledFrom(reqScopes).Draw(t, "scope")
		r.kind, r.subject = "scope", spec.Scope
	}
	f, err := m.db(t).FileErasureRequest(as(tok), spec)
	if err != nil {
		t.Fatalf("file: %v", err)
	}
	if f.Status != "pending" || f.RequestedBy != tok {
		t.Fatalf("filed %+v", f.ErasureRequest)
	}
	r.id = f.ID
	m.reqs[r.id] = r
	m.order = append(m.order, r.id)
}

func (m *reqMachine) Approve(t *rapid.T) {
	r := m.pick(t)
	tok := rapid.SampledFrom(reqTokens).Draw(t, "token")
	_, err := m.db(t).ApproveErasureRequest(as(tok), m.memory, r.id)
	switch {
	case r.status != "pending":
		wantModelCode(t, err, lethe.CodeInvalidState)
	case tok == r.requester:
		wantModelCode(t, err, lethe.CodeFourEyes)
	default:
		wantModelCode(t, err, "")
		r.status = "approved"
	}
}

func (m *reqMachine) Reject(t *rapid.T) {
	r := m.pick(t)
	tok := rapid.SampledFrom(reqTokens).Draw(t, "token")
	_, err := m.db(t).RejectErasureRequest(as(tok), m.memory, r.id)
	if r.status == "executed" || r.status == "rejected" {
		wantModelCode(t, err, lethe.CodeInvalidState)
		return
	}
	wantModelCode(t, err, "")
	r.status = "rejected"
}

// covers reports whether an active hold in the model surely refuses r:
// a hold of its user, or of a scope nested with its scope.
func (m *reqMachine) covers(r *mreq) bool {
	for _, h := range m.holds {
		if r.kind == "user" && h.UserID == r.subject {
			return true
		}
		if r.kind == "scope" && h.Scope != "" && (inScope(r.subject, h.Scope) || inScope(h.Scope, r.subject)) {
			return true
		}
	}
	return false
}

func (m *reqMachine) Execute(t *rapid.T) {
	r := m.pick(t)
	tok := rapid.SampledFrom(reqTokens).Draw(t, "token")
	_, err := m.db(t).ExecuteErasureRequest(as(tok), m.memory, r.id)
	if r.status != "approved" && r.status != "blocked" {
		wantModelCode(t, err, lethe.CodeInvalidState)
		return
	}
	switch lethe.ErrorCode(err) {
	case "":
		if m.covers(r) {
			t.Fatalf("request %s (%s %s) ran under a hold covering it: %v", r.id, r.kind, r.subject, m.holds)
		}
		r.status = "executed"
	case lethe.CodeHeld:
		if len(m.holds) == 0 {
			t.Fatalf("request %s blocked with no hold in force", r.id)
		}
		r.status = "blocked"
	case lethe.CodeNotFound:
		// Nothing to erase: an earlier erasure took the key. The request
		// stays as it was.
	default:
		t.Fatalf("execute: %v", err)
	}
}

func (m *reqMachine) Hold(t *rapid.T) {
	spec := lethe.HoldSpec{Memory: m.memory}
	if rapid.Bool().Draw(t, "user hold") {
		spec.UserID = rapid.SampledFrom(reqUsers[:2]).Draw(t, "user")
	} else {
		spec.Scope = rapid.SampledFrom(reqScopes).Draw(t, "scope")
	}
	h, err := m.db(t).SetHold(as("tok_c"), spec)
	if err != nil {
		t.Fatalf("hold: %v", err)
	}
	m.holds[h.ID] = spec
}

func (m *reqMachine) Release(t *rapid.T) {
	if len(m.holds) == 0 {
		t.Skip("no hold")
	}
	ids := make([]string, 0, len(m.holds))
	for id := range m.holds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	id := rapid.SampledFrom(ids).Draw(t, "hold")
	db := m.db(t)
	if err := db.ReleaseHold(as("tok_c"), m.memory, id); err != nil {
		t.Fatalf("release: %v", err)
	}
	delete(m.holds, id)
	// Blocked requests ran, unless another hold still refuses them (or
	// nothing is left to erase).
	for _, r := range m.reqs {
		if r.status != "blocked" {
			continue
		}
		got, err := db.ErasureRequest(context.Background(), m.memory, r.id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case got.Status == "executed" && m.covers(r):
			t.Fatalf("request %s ran under a hold covering it", r.id)
		case got.Status == "blocked" && len(m.holds) == 0:
			// Only when nothing is left to erase: another request for the
			// same subject ran first on this release.
			if _, err := db.ExecuteErasureRequest(as("tok_c"), m.memory, r.id); lethe.ErrorCode(err) != lethe.CodeNotFound {
				t.Fatalf("request %s still blocked with no hold in force: execute answers %v", r.id, err)
			}
		case got.Status != "executed" && got.Status != "blocked":
			t.Fatalf("a blocked request became %s on a release", got.Status)
		}
		r.status = got.Status
	}
}

// Check compares every request with the model, through either instance.
func (m *reqMachine) Check(t *rapid.T) {
	rs, err := m.db(t).ErasureRequests(context.Background(), m.memory, lethe.RequestFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(m.reqs) {
		t.Fatalf("%d requests, model %d", len(rs), len(m.reqs))
	}
	for _, r := range rs {
		want := m.reqs[r.ID]
		if want == nil || r.Status != want.status {
			t.Fatalf("request %s is %s, model %v", r.ID, r.Status, want)
		}
		if r.Status == "executed" && (r.ApprovedBy == "" || r.ApprovedBy == r.RequestedBy || r.ExecutedAt == nil) {
			t.Fatalf("request %s executed without a second approver: %+v", r.ID, r)
		}
		if r.Status == "rejected" && r.ExecutedAt != nil {
			t.Fatalf("rejected request %s has an execution", r.ID)
		}
	}
}

// checkRequestLog counts the key.erase events naming each request of
// every sequence: one for an executed request, none for any other.
func checkRequestLog(t *testing.T, db *lethe.DB, machines []*reqMachine) {
	leaves, err := db.AuditLeaves(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, b := range leaves {
		l, err := proofs.ParseLeaf(b)
		if err != nil {
			t.Fatal(err)
		}
		if l.Type == proofs.EventKeyErase && l.Request != "" {
			runs[l.Request]++
		}
	}
	checked := 0
	for _, m := range machines {
		for id, r := range m.reqs {
			want := 0
			if r.status == "executed" {
				want = 1
			}
			if runs[id] != want {
				t.Errorf("request %s (%s): %d key.erase events, want %d", id, r.status, runs[id], want)
			}
			checked++
		}
	}
	t.Logf("%d requests in %d sequences checked against the log", checked, len(machines))
}

func wantModelCode(t *rapid.T, err error, code lethe.Code) {
	t.Helper()
	if got := lethe.ErrorCode(err); got != code {
		t.Fatalf("code %q (%v), want %q", got, err, code)
	}
}
