package lethe_test

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/proofs"
)

// This file is TestCrashModel's model of erasure requests: file, approve,
// reject and execute drawn among the other calls, and a release of a hold
// running the requests the hold blocked.

// crashTokens are the actors of the requests' calls: two, so that an
// approval is by the requester (four_eyes) half the time.
var crashTokens = []string{"tok_a", "tok_b"}

// maxCrashRequests bounds the requests a store gets (a list answers at most
// 1,000).
const maxCrashRequests = 300

// requestOps are the calls applyRequest applies.
var requestOps = map[string]bool{"file": true, "approve": true, "reject": true, "execute": true}

// crashReq is the model of one erasure request.
type crashReq struct {
	ID string `json:"id"`
	// User or Scope is its subject.
	User      string              `json:"user,omitempty"`
	Scope     string              `json:"scope,omitempty"`
	Requester string              `json:"requester"`
	Due       int64               `json:"due"` // Unix seconds
	Status    lethe.RequestStatus `json:"status"`
	SealKey   string              `json:"seal_key"`
	// Nonce opens its subject commitment (hex; "" when it was filed by
	// the call in flight).
	Nonce string `json:"nonce,omitempty"`
	// Hold is the hold that last refused it.
	Hold string `json:"hold,omitempty"`
	// Key and Count are an executed request's erasure: the fingerprint of
	// the key it destroyed and the grains it made unreadable.
	Key   string `json:"key,omitempty"`
	Count int64  `json:"count,omitempty"`
}

// crashRan is a blocked request a release may run (ID, and the Key its
// dry run named when the release was drawn) and, once it ran, its
// erasure's Count and Event as the store recorded them.
type crashRan struct {
	ID    string `json:"id"`
	Key   string `json:"key,omitempty"`
	Count int64  `json:"count,omitempty"`
	Event string `json:"event,omitempty"`
}

func (q *crashReq) kind() string {
	if q.User != "" {
		return "user"
	}
	return "scope"
}

func (q *crashReq) subject() string { return q.User + q.Scope }

// keyName is the model's name of the key q's execution destroys.
func (q *crashReq) keyName() string { return q.kind() + ":" + q.subject() }

// eraseCall is the erasure q's execution runs.
func (q *crashReq) eraseCall() *crashCall {
	if q.User != "" {
		return &crashCall{Op: "forget_user", User: q.User}
	}
	return &crashCall{Op: "erase_scope", Scope: q.Scope}
}

// requestsByDue returns the requests by due date (each is due a second
// after the one filed before it).
func (m *crashModel) requestsByDue() []*crashReq {
	qs := slices.Collect(maps.Values(m.Requests))
	slices.SortFunc(qs, func(a, b *crashReq) int { return cmp.Or(cmp.Compare(a.Due, b.Due), strings.Compare(a.ID, b.ID)) })
	return qs
}

// covers reports whether a hold of the model surely refuses q's execution:
// a hold on its user, or on a scope nested with its scope.
func (m *crashModel) covers(q *crashReq) bool {
	for _, h := range m.Holds {
		if q.User != "" && h.UserID == q.User || q.Scope != "" && h.Scope != "" && (inScope(q.Scope, h.Scope) || inScope(h.Scope, q.Scope)) {
			return true
		}
	}
	return false
}

// mayRefuse reports whether a hold of the model that does not cover q may
// refuse its execution, depending on where the grains lie: a scope hold on
// a user request, or a user hold on a scope request. Another user's hold
// never refuses a user request, nor a hold on a scope not nested with it a
// scope request.
func (m *crashModel) mayRefuse(q *crashReq) bool {
	for _, h := range m.Holds {
		if q.User != "" && h.UserID == "" || q.Scope != "" && h.UserID != "" {
			return true
		}
	}
	return false
}

// expect returns the codes call c on q may answer, as the model sees it.
func (m *crashModel) expect(c *crashCall, q *crashReq) []lethe.Code {
	switch c.Op {
	case "approve":
		if q.Status != "pending" {
			return []lethe.Code{"invalid_state"}
		}
		if c.Token == q.Requester {
			return []lethe.Code{"four_eyes"}
		}
	case "reject":
		if q.Status.Final() {
			return []lethe.Code{"invalid_state"}
		}
	case "execute":
		switch {
		case q.Status != "approved" && q.Status != "blocked":
			return []lethe.Code{"invalid_state"}
		case m.Keys[q.keyName()] != keyLive:
			return []lethe.Code{"not_found"}
		case m.covers(q):
			return []lethe.Code{"held"}
		case m.mayRefuse(q):
			return []lethe.Code{"", "held"}
		}
	}
	return []lethe.Code{""}
}

// applyRequest applies request call c, which returned r, to the model.
func (m *crashModel) applyRequest(name string, c *crashCall, r *crashResult) error {
	if c.Op == "file" {
		if r.Code != "" {
			return fmt.Errorf("filing failed: %s", r.Err)
		}
		if r.Request == "" || m.Requests[r.Request] != nil {
			return fmt.Errorf("filed request %q, which is new and unknown to the model", r.Request)
		}
		m.Requests[r.Request] = &crashReq{ID: r.Request, User: c.User, Scope: c.Scope, Requester: c.Token, Due: c.Due,
			Status: "pending", SealKey: r.Key, Nonce: r.Nonce}
		m.LastDue = max(m.LastDue, c.Due)
		m.Wants = append(m.Wants, leafWant{Type: proofs.EventRequestCreate, Request: r.Request, Key: r.Key, Call: name})
		return nil
	}
	q := m.Requests[c.Request]
	if q == nil {
		return fmt.Errorf("%s of request %s, which the model does not know", c.Op, c.Request)
	}
	if want := m.expect(c, q); !slices.Contains(want, r.Code) {
		return fmt.Errorf("%s of a %s request (%s %s) answered %q (%s); the model expects one of %q", c.Op, q.Status, q.kind(), q.subject(), r.Code, r.Err, want)
	}
	switch {
	case r.Code == "held":
		q.Status, q.Hold = "blocked", ""
		for id := range m.Holds {
			q.Hold = id // there is one at most
		}
		m.Wants = append(m.Wants, leafWant{Type: proofs.EventErasureRefused, Reason: "held", Hold: q.Hold, Request: q.ID, Call: name})
	case r.Code != "":
	case c.Op == "approve":
		q.Status = "approved"
		m.Wants = append(m.Wants, leafWant{Type: proofs.EventRequestApprove, Request: q.ID, Call: name})
	case c.Op == "reject":
		q.Status = "rejected"
		m.Wants = append(m.Wants, leafWant{Type: proofs.EventRequestReject, Request: q.ID, Key: q.SealKey, Call: name})
	case c.Op == "execute":
		return m.execute(name, q, r)
	}
	return nil
}

// execute applies q's execution, whose erasure returned r.
func (m *crashModel) execute(name string, q *crashReq, r *crashResult) error {
	if err := m.erase(name, q.eraseCall(), r, q.ID); err != nil {
		return err
	}
	q.Status, q.Key, q.Count = "executed", r.Key, r.Count
	return nil
}

// ranBlocked applies the blocked requests release c ran (r.Ran): in due
// order, each the model holds blocked with its key live. Once the last
// hold is released, every blocked request whose key is live when its turn
// comes runs, unless the release was in flight (r.Partial).
func (m *crashModel) ranBlocked(name string, c *crashCall, r *crashResult) error {
	i := 0
	for _, q := range m.requestsByDue() {
		if q.Status != "blocked" {
			continue
		}
		if i < len(r.Ran) && r.Ran[i].ID == q.ID {
			x := r.Ran[i]
			i++
			if m.Keys[q.keyName()] != keyLive {
				return fmt.Errorf("the release ran request %s, whose key %s the model holds destroyed", q.ID, q.keyName())
			}
			if err := m.execute(name+" ran "+q.ID[:8], q, &crashResult{Key: x.Key, Count: x.Count, Event: x.Event}); err != nil {
				return fmt.Errorf("request %s the release ran: %w", q.ID, err)
			}
			continue
		}
		if !r.Partial && len(m.Holds) == 0 && m.Keys[q.keyName()] == keyLive {
			return fmt.Errorf("request %s (%s %s) is still blocked after the release of the last hold, and its key is live", q.ID, q.kind(), q.subject())
		}
	}
	if i < len(r.Ran) {
		return fmt.Errorf("the release ran request %s out of due order, or one the model does not hold blocked", r.Ran[i].ID)
	}
	return nil
}

// dryKey returns the fingerprint of the key erasure c would destroy ("" when
// there is none).
func dryKey(ctx context.Context, db *lethe.DB, c *crashCall) string {
	var er *lethe.Erasure
	var err error
	if c.Op == "forget_user" {
		er, err = db.ForgetUser(ctx, crashMemory, c.User, lethe.DryRun())
	} else {
		er, err = db.EraseScope(ctx, crashMemory, c.Scope, lethe.DryRun())
	}
	if err != nil {
		return ""
	}
	return er.KeyFingerprint
}

// blocked returns the blocked requests a release may run, by due date, with
// the keys they would destroy.
func (m *crashModel) blocked(ctx context.Context, db *lethe.DB) []crashRan {
	var out []crashRan
	for _, q := range m.requestsByDue() {
		if q.Status == "blocked" {
			out = append(out, crashRan{ID: q.ID, Key: dryKey(ctx, db, q.eraseCall())})
		}
	}
	return out
}

// drawRequest returns a random request call, or nil to draw another kind.
// Requests name the subject of the hold in force half the time, so that
// executions are refused and blocked. With focus, one request call in ten
// sets a hold on the subject of an open request when there is none.
func (m *crashModel) drawRequest(ctx context.Context, db *lethe.DB, rng *rand.Rand, focus bool) *crashCall {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	qs := m.requestsByDue()
	// runnable requests have a live key to erase; stale ones are open with
	// none left (another erasure took it), to reject.
	var all, pending, runnable, open, stale []string
	for _, q := range qs {
		all = append(all, q.ID)
		if q.Status.Final() {
			continue
		}
		open = append(open, q.ID)
		switch live := m.Keys[q.keyName()] == keyLive; {
		case !live:
			stale = append(stale, q.ID)
		case q.Status == "pending":
			pending = append(pending, q.ID)
		default:
			runnable = append(runnable, q.ID)
		}
	}
	// One in eight calls picks any request, so that the transitions a
	// status forbids are drawn too.
	choose := func(ids []string) string {
		if len(ids) == 0 || rng.IntN(8) == 0 {
			return pick(all)
		}
		return pick(ids)
	}
	tok := pick(crashTokens)
	switch w := rng.IntN(100); {
	case focus && w < 10 && len(m.Holds) == 0 && len(open) > 0:
		q := m.Requests[pick(open)]
		return &crashCall{Op: "hold", User: q.User, Scope: q.Scope}
	case w < 40 && len(runnable) > 0:
		q := m.Requests[choose(runnable)]
		return &crashCall{Op: "execute", Request: q.ID, Token: tok, Key: dryKey(ctx, db, q.eraseCall())}
	case w < 65 && len(pending) > 0:
		return &crashCall{Op: "approve", Request: choose(pending), Token: tok}
	case w < 72 && len(open) > 0 || len(stale) > 3:
		if len(stale) > 0 {
			return &crashCall{Op: "reject", Request: choose(stale), Token: tok}
		}
		return &crashCall{Op: "reject", Request: choose(open), Token: tok}
	case len(all) >= maxCrashRequests:
		return nil
	}
	c := &crashCall{Op: "file", Token: tok, Due: max(time.Now().Add(30*24*time.Hour).Unix(), m.LastDue+1)}
	var held []lethe.HoldSpec
	for _, id := range slices.Sorted(maps.Keys(m.Holds)) {
		held = append(held, m.Holds[id])
	}
	switch {
	case len(held) > 0 && rng.IntN(2) == 0:
		c.User, c.Scope = held[0].UserID, held[0].Scope
	case rng.IntN(2) == 0:
		c.User = pick(append(crashUsers[2:], "nobody"))
	default:
		c.Scope = pick(crashScopes[1:])
	}
	return c
}

// runRequestCall makes request call c, filling r.
func runRequestCall(ctx context.Context, db *lethe.DB, c *crashCall, r *crashResult) error {
	actx := lethe.WithActor(ctx, c.Token)
	var err error
	switch c.Op {
	case "file":
		var f *lethe.FiledRequest
		f, err = db.FileErasureRequest(actx, lethe.RequestSpec{Memory: crashMemory, UserID: c.User, Scope: c.Scope,
			Reason: "data_subject_request", Reference: "DSR-crash", Due: time.Unix(c.Due, 0)})
		if err == nil {
			r.Request, r.Key, r.Nonce = f.ID, f.SealKey, f.SubjectNonce
		}
	case "approve":
		_, err = db.ApproveErasureRequest(actx, crashMemory, c.Request)
	case "reject":
		_, err = db.RejectErasureRequest(actx, crashMemory, c.Request)
	case "execute":
		var er *lethe.Erasure
		er, err = db.ExecuteErasureRequest(actx, crashMemory, c.Request)
		if err == nil {
			r.Count, r.Key, r.Event = er.Count, er.KeyFingerprint, er.EventID
		}
	default:
		panic("unknown call " + c.Op)
	}
	return err
}

// readRan returns the requests of blocked that a release ran, as the store
// recorded their erasures.
func readRan(ctx context.Context, db *lethe.DB, blocked []crashRan) ([]crashRan, error) {
	var out []crashRan
	for _, b := range blocked {
		q, err := db.ErasureRequest(ctx, crashMemory, b.ID)
		if err != nil {
			return nil, err
		}
		if q.Status == "executed" {
			out = append(out, crashRan{ID: b.ID, Key: b.Key, Count: q.Count, Event: q.EventID})
		}
	}
	return out, nil
}

// ranInStore is readRan on the reopened store.
func ranInStore(blocked []crashRan, obs *crashObs) []crashRan {
	var out []crashRan
	for _, b := range blocked {
		if q := obs.requests[b.ID]; q != nil && q.Status == "executed" {
			out = append(out, crashRan{ID: b.ID, Key: b.Key, Count: q.Count, Event: q.EventID})
		}
	}
	return out
}

// requestOutcome returns the result request call c in flight had, as the
// store shows it, or nil when the store shows no effect of it.
func requestOutcome(m0 *crashModel, c *crashCall, obs *crashObs) *crashResult {
	if c.Op == "file" {
		for _, id := range slices.Sorted(maps.Keys(obs.requests)) {
			if m0.Requests[id] == nil {
				return &crashResult{Request: id, Key: obs.requests[id].SealKey}
			}
		}
		return nil
	}
	q, o := m0.Requests[c.Request], obs.requests[c.Request]
	if q == nil || o == nil {
		return nil
	}
	if c.Op != "execute" {
		if o.Status != q.Status {
			return &crashResult{}
		}
		return nil
	}
	// An execution shows in the request's status or in an event naming
	// it: a key.erase event (it ran), or an erasure.refused one (a hold
	// refused it).
	_, rest, _ := matchLeaves(obs.leaves, m0.Wants)
	refused := false
	for _, l := range rest {
		if l.Request != c.Request {
			continue
		}
		switch l.Type {
		case proofs.EventKeyErase:
			o = &lethe.ErasureRequest{Status: "executed"}
		case proofs.EventErasureRefused:
			refused = true
		}
	}
	switch {
	case o.Status == "executed" && q.Status != "executed":
		ec := q.eraseCall()
		return &crashResult{Key: c.Key, Count: int64(len(m0.alive(ec.dies)))}
	case refused:
		return &crashResult{Code: "held"}
	}
	return nil
}

// requestProblems lists how the store's erasure requests differ from the
// model's: each request is in its status wholly (its sealed subject and
// sealing key there while it is open, both destroyed once it is final;
// executed with its key.erase event, the key and the count the model
// expects, and a second approver), and every event naming a request
// carries its subject commitment.
func (m *crashModel) requestProblems(obs *crashObs) []string {
	if obs.requests == nil {
		return []string{"the erasure requests were not read (observeRequests)"}
	}
	var ps []string
	leaves := map[string]*proofs.Leaf{}
	for _, l := range obs.leaves {
		leaves[l.ID] = l
	}
	for _, id := range slices.Sorted(maps.Keys(m.Requests)) {
		q, o := m.Requests[id], obs.requests[id]
		if o == nil {
			ps = append(ps, fmt.Sprintf("request %s (%s %s) is not in the store", id[:8], q.kind(), q.subject()))
			continue
		}
		if o.Status != q.Status {
			ps = append(ps, fmt.Sprintf("request %s (%s %s) is %s, the model %s", id[:8], q.kind(), q.subject(), o.Status, q.Status))
		}
		if string(o.Kind) != q.kind() || o.Scope != q.Scope || o.RequestedBy != q.Requester || o.Due.Unix() != q.Due || o.SealKey != q.SealKey {
			ps = append(ps, fmt.Sprintf("request %s reads %s %q by %s due %d sealed by %.8s, want %s %q by %s due %d sealed by %.8s", id[:8],
				o.Kind, o.Scope, o.RequestedBy, o.Due.Unix(), o.SealKey, q.kind(), q.Scope, q.Requester, q.Due, q.SealKey))
		}
		final := o.Status.Final()
		if (len(o.Sealed) == 0) != final {
			ps = append(ps, fmt.Sprintf("request %s is %s and holds a sealed subject: %t", id[:8], o.Status, len(o.Sealed) > 0))
		}
		if got, want := obs.sealKeys[o.SealKey], map[bool]string{false: "live wrapped", true: "destroyed"}[final]; got != want {
			ps = append(ps, fmt.Sprintf("request %s is %s and its sealing key %.8s is %q, want %q", id[:8], o.Status, o.SealKey, got, want))
		}
		if o.Status == "executed" {
			if l := leaves[o.EventID]; l == nil || l.Type != proofs.EventKeyErase || l.Request != id {
				ps = append(ps, fmt.Sprintf("request %s is executed, and its event %q is not a key.erase event naming it", id[:8], o.EventID))
			}
			if len(o.KeyFingerprints) == 0 || q.Status == "executed" && (o.KeyFingerprints[0] != q.Key || o.Count != q.Count) {
				ps = append(ps, fmt.Sprintf("request %s erased keys %v and %d grains, the model %.8s and %d", id[:8], short8(o.KeyFingerprints), o.Count, q.Key, q.Count))
			}
			if o.ApprovedBy == "" || o.ApprovedBy == o.RequestedBy {
				ps = append(ps, fmt.Sprintf("request %s filed by %s executed with the approval of %q", id[:8], o.RequestedBy, o.ApprovedBy))
			}
		}
		if o.Status == "blocked" && q.Status == "blocked" && o.Hold != q.Hold {
			ps = append(ps, fmt.Sprintf("request %s is blocked by hold %q, the model %q", id[:8], o.Hold, q.Hold))
		}
		if q.Nonce != "" {
			nonce, err := hex.DecodeString(q.Nonce)
			if err != nil || proofs.Commitment(nonce, q.subject()) != o.Commitment {
				ps = append(ps, fmt.Sprintf("request %s: its commitment does not open with the nonce returned at filing", id[:8]))
			}
		}
	}
	named := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(obs.requests)) {
		named[obs.requests[id].SealKey] = true
		if m.Requests[id] == nil {
			ps = append(ps, fmt.Sprintf("request %s is in the store, and no call filed it", id[:8]))
		}
	}
	for _, fp := range slices.Sorted(maps.Keys(obs.sealKeys)) {
		if !named[fp] {
			ps = append(ps, fmt.Sprintf("sealing key %.8s (%s) belongs to no request", fp, obs.sealKeys[fp]))
		}
	}
	for _, l := range obs.leaves {
		if l.Request == "" {
			continue
		}
		if o := obs.requests[l.Request]; o == nil || l.Commitment != o.Commitment {
			ps = append(ps, fmt.Sprintf("the %s event %s names request %.8s and another subject commitment, or no request", l.Type, l.ID, l.Request))
		}
	}
	return ps
}

// observeRequests reads the erasure requests of the crash test's memory and
// the state of their sealing keys into obs. A key's state is "live
// wrapped", "destroyed", or another combination of its row's destroyed
// mark and wrapped form.
func observeRequests(ctx context.Context, t *testing.T, db *lethe.DB, raw rawStore, obs *crashObs, fail func(string, ...any)) {
	rs, err := db.ErasureRequests(ctx, crashMemory, lethe.RequestFilter{})
	if err != nil {
		fail("ErasureRequests: %v", err)
	}
	if len(rs) >= 1000 {
		fail("%d erasure requests: a list answers at most 1,000", len(rs))
	}
	obs.requests = map[string]*lethe.ErasureRequest{}
	for i := range rs {
		obs.requests[rs[i].ID] = &rs[i]
	}
	obs.sealKeys = map[string]string{}
	for _, b := range raw.query(t, `SELECT fingerprint || ' ' || CASE WHEN destroyed_us = 0 THEN 'live' ELSE 'destroyed' END || `+
		`CASE WHEN wrapped IS NULL THEN '' ELSE ' wrapped' END FROM data_keys WHERE memory = ? AND kind = 'request'`, crashMemory) {
		fp, state, _ := strings.Cut(string(b), " ")
		obs.sealKeys[fp] = state
	}
}

// checkCertificates checks the certificate of every executed request: its
// proof verifies, with the subject commitment when the model holds the
// nonce, and names the request, the key and the count the model expects.
func checkCertificates(ctx context.Context, db *lethe.DB, m *crashModel, fail func(string, ...any)) {
	for _, id := range slices.Sorted(maps.Keys(m.Requests)) {
		q := m.Requests[id]
		if q.Status != "executed" {
			continue
		}
		c, err := db.ErasureCertificate(ctx, crashMemory, id)
		if err != nil {
			fail("ErasureCertificate(%s): %v", id[:8], err)
		}
		opts := proofs.VerifyOptions{LogKey: db.AuditKey()}
		if q.Nonce != "" {
			nonce, _ := hex.DecodeString(q.Nonce)
			opts.Subject, opts.Nonce = q.subject(), nonce
		}
		v, err := proofs.Verify(c.Proof, opts)
		if err != nil {
			fail("the certificate of request %s: %v", id[:8], err)
		}
		if v.Leaf.Request != id || len(c.KeyFingerprints) == 0 || c.KeyFingerprints[0] != q.Key || c.Count != q.Count || c.SealKey != q.SealKey {
			fail("the certificate of request %s names request %.8s, keys %v, %d grains, sealing key %.8s; want %.8s, %.8s, %d, %.8s",
				id[:8], v.Leaf.Request, short8(c.KeyFingerprints), c.Count, c.SealKey, id, q.Key, q.Count, q.SealKey)
		}
	}
}

// crashRaw returns a reader of cfg's store tables, for the sealing keys of
// requests, which no API shows.
func crashRaw(t *testing.T, cfg lethe.Config) rawStore {
	if cfg.PostgresDSN == "" {
		return sqliteRaw{dir: cfg.DataDir}
	}
	conn, err := pgx.Connect(context.Background(), cfg.PostgresDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return pgRaw{conn: conn}
}

// recoverStranded applies to m what the reopen's Open did before the store
// was read (RunStranded, as the store shows it): each request m holds
// blocked by a hold no longer in force runs, in due order, when its key is
// live. It is executed unless a hold in force surely covers it, or blocked
// again by the hold in force that refused it, with its erasure.refused
// event. One whose key is gone stays blocked (its execution answers
// not_found), and runs at a later Open if a write creates the key again.
// It returns how the store differs from that.
func (m *crashModel) recoverStranded(obs *crashObs) []string {
	var ps []string
	for _, q := range m.requestsByDue() {
		o := obs.requests[q.ID]
		if _, held := m.Holds[q.Hold]; q.Status != "blocked" || held || o == nil {
			continue // o == nil: requestProblems reports it
		}
		k := m.Keys[q.keyName()]
		name := "reopen (recovery of " + q.ID[:8] + ")"
		_, inForce := m.Holds[o.Hold]
		switch {
		case k == keyNone:
			// requestProblems reports any change.
		case o.Status == "executed" && !m.covers(q):
			fp := ""
			if len(o.KeyFingerprints) > 0 {
				fp = o.KeyFingerprints[0]
			}
			if err := m.execute(name, q, &crashResult{Key: fp, Count: o.Count, Event: o.EventID}); err != nil {
				ps = append(ps, fmt.Sprintf("request %s (%s %s) ran at the reopen: %v", q.ID[:8], q.kind(), q.subject(), err))
			}
		case o.Status == "blocked" && inForce && (m.covers(q) || m.mayRefuse(q)):
			q.Hold = o.Hold
			m.Wants = append(m.Wants, leafWant{Type: proofs.EventErasureRefused, Reason: "held", Hold: q.Hold, Request: q.ID, Call: name})
		case k == keyLive:
			ps = append(ps, fmt.Sprintf("request %s (%s %s) is blocked by hold %.8s, released, its key is live, and the reopen's recovery left it %s (hold %.8s)",
				q.ID[:8], q.kind(), q.subject(), q.Hold, o.Status, o.Hold))
		}
	}
	return ps
}
