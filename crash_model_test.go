package lethe_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/crashpoint"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// TestCrashModel kills a writer at random moments and checks the store it
// leaves against a model of what the writer reported. The bar it holds the
// store to: a crash at any point leaves a consistent store, and a state
// change and its audit event commit together.
//
// Each round, a child process (the test binary again, as in
// TestCrashLosesNoEvent) opens the store and runs a random sequence of
// library calls on one memory: Add and AddBatch (users from a small pool,
// with "no user"; scopes "", a, a/b, a/b/c and d), Supersede (into another
// scope or user too), Forget by hash, subject or user, ForgetUser and
// EraseScope (crypto-erasure), SetHold and ReleaseHold, ArchiveGrains,
// PurgeErased, and erasure requests (crash_requests_test.go): filed for a
// user or a scope (often the one a hold is on) by one of two tokens,
// approved, rejected and executed by either, so that four eyes refuse,
// transitions a status forbids fail, and executions are refused under a
// hold (the request blocked) and run when it is released. It prints each
// call before making it and its result once it returned. The parent
// SIGKILLs it at a random moment: mostly once a call (often a forget, an
// erasure, a request's execution or rejection, or a release) has begun,
// after a wait drawn around how long such calls took so far, so that the
// kill lands inside it, before or after its commit; sometimes between
// calls, or while the store opens.
//
// Random timing rarely lands inside the narrow windows that matter, so half
// the rounds also arm a crash point (package internal/crashpoint), drawn
// with its first, second or third hit: the child kills itself with SIGKILL
// there, right after a commit and before the step that follows it (an
// erasure's key destroyed, its scrub and receipt not yet done; the
// sequencer's events appended, its checkpoint not yet saved; the cleaner
// between two transactions; a request's execution refused, not yet
// blocked...), unless the parent kills it first as above (it then waits
// for 20 to 60 results). A round armed at an erasure request's point draws
// requests more often. A round that died at its point is checked as any
// other. The parent then reopens the store and builds the model from the
// results it read: the call begun and not reported (in flight) may have
// happened or not, and the store must be explained by one of the two:
//
//   - every grain the model holds alive reads back (Get, History, Recall
//     by subject, user and scope, a subject export) with its fields and
//     version links; every grain a forget or an erasure removed answers
//     not_found or erased, never another error; no grain the model does
//     not know is readable;
//   - an erasure in flight happened whole (key gone, every grain under it
//     unreadable, its key.erase event in the log) or not at all;
//   - each live data key (memory, scopes, users, found by dry-run erasures)
//     has exactly one key.create event and counts the grains the model
//     holds under it; every key.create event names a live key or one a
//     key.erase event destroyed;
//   - every audit leaf's event id appears once; every reported event is in
//     the log with what the call reported, and proves against the log's
//     key; every leaf but key.create is the event of a reported call, or of
//     the call in flight exactly when its effect is visible (a refusal in
//     flight may have left its erasure.refused event or not);
//   - the legal holds are the model's; the background cleaner deletes the
//     rows erasures made unreadable;
//   - each erasure request is in the model's status, wholly: open, with its
//     sealed subject and its live, wrapped sealing key (read from the
//     store's tables); rejected or executed, with both destroyed; executed
//     with a second approver, its key.erase event naming it, the key and
//     the count the model expects, and a certificate whose proof verifies
//     with the subject commitment; blocked by the model's hold. Each
//     transition answers the code the model expects (four_eyes,
//     invalid_state, held when a hold surely covers the subject, not_found
//     when its key is gone), and has its event (request.create, .approve,
//     .reject, erasure.refused or key.erase naming the request, with its
//     commitment). A request in flight changed wholly or not at all; a
//     release in flight ran some of the blocked requests, in due order.
//     The reopen itself runs, as the "recovery" actor, each request left
//     blocked by a hold no longer in force whose key is live (a release
//     that did not get to it, or one that found its key gone before a
//     later write made it again): the model applies that too, before it
//     compares (recoverStranded).
//
// The next round continues on the same store, so writes after a crash are
// checked too. It runs on SQLite and PostgreSQL.
//
// By default it runs 16 rounds per store (about 6 s on SQLite and 20 s on
// PostgreSQL on an idle machine). For a longer run set LETHE_CRASH_ROUNDS
// (rounds per store); LETHE_CRASH_POINTS (a comma-separated list of
// points) arms every round at one of those points. LETHE_CRASH_SEED
// (printed by every run) fixes the test's random choices; where each kill
// lands, and so what the later rounds start from, still varies from run
// to run.
//
//	LETHE_CRASH_ROUNDS=200 go test -count=1 -run TestCrashModel -timeout 2h .
//	LETHE_CRASH_POINTS=erase.committed,cleaner.job go test -count=1 -run TestCrashModel .
//
// A failure prints the round, the crash point armed (and whether the child
// died at it), the call in flight and the calls before it; with -v, the
// rounds armed at each point and those that died there.
func TestCrashModel(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	rounds := 16
	if s := os.Getenv("LETHE_CRASH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LETHE_CRASH_ROUNDS=%q: want a positive number", s)
		}
		rounds = n
	}
	seed := rand.Uint64()
	if s := os.Getenv("LETHE_CRASH_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LETHE_CRASH_SEED=%q: want a number", s)
		}
		seed = n
	}
	t.Logf("LETHE_CRASH_SEED=%d", seed)
	points := crashpoint.Points()
	armAll := false
	if s := os.Getenv("LETHE_CRASH_POINTS"); s != "" {
		points, armAll = strings.Split(s, ","), true
		for _, p := range points {
			if !slices.Contains(crashpoint.Points(), p) {
				t.Fatalf("LETHE_CRASH_POINTS: %q is not a crash point (%v)", p, crashpoint.Points())
			}
		}
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			cfg := lethe.Config{DataDir: t.TempDir(), ProofWait: time.Millisecond}
			if b.name == "postgres" {
				cfg.PostgresDSN = testenv.Postgres(t)
			}
			r := &crashRun{t: t, cfg: cfg, raw: crashRaw(t, cfg), seed: seed, id: id, model: newCrashModel(),
				file: t.TempDir() + "/model.json", kill: rand.New(rand.NewPCG(seed, 1)), took: map[string][]int64{},
				outcomes: map[string]int{}, arm: rand.New(rand.NewPCG(seed, 2)), points: points, armAll: armAll,
				armed: map[string]int{}, reached: map[string]int{}}
			start := time.Now()
			for round := range rounds {
				r.round(round, round == rounds-1)
			}
			alive := 0
			for _, x := range r.model.Grains {
				if x.Alive {
					alive++
				}
			}
			t.Logf("%s: %d rounds (%d armed at a crash point, %d died at it), %d calls (%d in flight at a kill, %d of them happened), %d grains written, %d alive, %d audit leaves, %v",
				b.name, rounds, countRounds(r.armed), countRounds(r.reached), r.calls, r.inFlight, r.happened, len(r.model.Grains), alive, r.leaves, time.Since(start).Round(time.Millisecond))
			if testing.Verbose() {
				for _, k := range slices.Sorted(maps.Keys(r.outcomes)) {
					t.Logf("%5d %s", r.outcomes[k], k)
				}
				for _, p := range slices.Sorted(maps.Keys(r.armed)) {
					t.Logf("crash point %s: armed in %d rounds, reached in %d", p, r.armed[p], r.reached[p])
				}
			}
		})
	}
}

// countRounds sums the rounds counted by point.
func countRounds(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// crashMemory is the memory the crash test writes to.
const crashMemory = "crash"

// crashModelEnv names the variable that makes the test binary the crash
// model's child; it holds a crashChildConfig.
const crashModelEnv = "LETHE_CRASH_MODEL_CHILD"

var (
	crashUsers    = []string{"", "", "ann", "ben", "cy"}
	crashSubjects = []string{"ida", "ole", "uma"}
	crashScopes   = []string{"", "a", "a/b", "a/b/c", "d"}
)

// crashChildConfig is what the parent passes to a round's child.
type crashChildConfig struct {
	DataDir, PostgresDSN string
	Seed                 uint64
	Round                int
	// Model is the file holding the model as the round starts.
	Model string
}

// crashGrain is the model of one grain.
type crashGrain struct {
	Hash       string  `json:"hash,omitempty"`
	Subject    string  `json:"subject,omitempty"`
	Object     string  `json:"object,omitempty"`
	Content    string  `json:"content,omitempty"`
	User       string  `json:"user,omitempty"`
	Scope      string  `json:"scope,omitempty"`
	Importance float64 `json:"importance,omitempty"`
	Supersedes string  `json:"supersedes,omitempty"`
	By         string  `json:"by,omitempty"` // superseded_by
	Archived   bool    `json:"archived,omitempty"`
	// Alive is true while it is readable: no forget deleted it and no key
	// of its chain was destroyed.
	Alive bool `json:"alive,omitempty"`
}

// keyState is what the model knows of a data key.
type keyState int

const (
	keyNone  keyState = iota // never created, or destroyed
	keyLive                  // created by a reported write, not destroyed since
	keyMaybe                 // a call in flight may have created it
)

// leafWant is an audit leaf the model expects: by event id when the call
// reported one, else by what it records.
type leafWant struct {
	ID     string           `json:"id,omitempty"`
	Type   proofs.EventType `json:"type"`
	Hashes []string         `json:"hashes,omitempty"` // sorted
	Hold   string           `json:"hold,omitempty"`
	Key    string           `json:"key,omitempty"` // the first key fingerprint
	Count  int64            `json:"count,omitempty"`
	Reason string           `json:"reason,omitempty"`
	// Request is the erasure request the leaf names ("" for none: a leaf
	// naming a request matches only a want naming it).
	Request string `json:"request,omitempty"`
	// OneOf, when set, is the versions of a chain: the leaf names exactly
	// one of them (a protected refusal names the first protected version
	// of the chain it would delete).
	OneOf []string `json:"one_of,omitempty"`
	// Call names the call that wrote it, for messages.
	Call string `json:"call"`
}

func (w *leafWant) matches(l *proofs.Leaf) bool {
	if l.Type != w.Type || l.Request != w.Request || w.Hold != "" && l.Hold != w.Hold || w.Reason != "" && l.Reason != w.Reason {
		return false
	}
	if (w.Type == proofs.EventRequestCreate || w.Type == proofs.EventRequestReject) && l.FirstKeyFingerprint() != w.Key {
		return false
	}
	if w.Hashes != nil && !slices.Equal(slices.Sorted(slices.Values(l.Hashes)), w.Hashes) {
		return false
	}
	if w.OneOf != nil && (len(l.Hashes) != 1 || !slices.Contains(w.OneOf, l.Hashes[0])) {
		return false
	}
	if w.Type == proofs.EventKeyErase && (l.FirstKeyFingerprint() != w.Key || l.GrainCount() != uint64(w.Count)) {
		return false
	}
	return true
}

// crashModel is the model of the crash test's memory: its grains, holds,
// data keys, erasure requests and the audit leaves they left.
type crashModel struct {
	Grains   map[string]*crashGrain    `json:"grains"`
	Order    []string                  `json:"order"` // hashes in write order
	Holds    map[string]lethe.HoldSpec `json:"holds"`
	Keys     map[string]keyState       `json:"keys"` // "memory", "scope:a/b", "user:ann"
	Requests map[string]*crashReq      `json:"requests"`
	// LastDue is the latest due date of a request filed (Unix seconds):
	// each request is due a second after the one before, so that the
	// order a release runs blocked requests in (by due date) is known.
	LastDue int64      `json:"last_due,omitempty"`
	Wants   []leafWant `json:"wants"`
	// happened is set on the model resolve returns when the call in
	// flight happened.
	happened bool
}

func newCrashModel() *crashModel {
	return &crashModel{Grains: map[string]*crashGrain{}, Holds: map[string]lethe.HoldSpec{}, Keys: map[string]keyState{}, Requests: map[string]*crashReq{}}
}

func (m *crashModel) clone() *crashModel {
	c := &crashModel{Grains: make(map[string]*crashGrain, len(m.Grains)), Order: slices.Clone(m.Order),
		Holds: maps.Clone(m.Holds), Keys: maps.Clone(m.Keys), Requests: make(map[string]*crashReq, len(m.Requests)),
		LastDue: m.LastDue, Wants: slices.Clone(m.Wants)}
	for h, x := range m.Grains {
		y := *x
		c.Grains[h] = &y
	}
	for id, q := range m.Requests {
		y := *q
		c.Requests[id] = &y
	}
	return c
}

// crashCall is one library call of the child.
type crashCall struct {
	Op string `json:"op"`
	// Grains are the grains of an add or a batch, or for a supersede the
	// new version's fields that change (Object, Content, maybe Scope and
	// User).
	Grains  []crashGrain `json:"grains,omitempty"`
	Hash    string       `json:"hash,omitempty"`    // supersede: the old version; forget by hash
	Subject string       `json:"subject,omitempty"` // forget by subject
	User    string       `json:"user,omitempty"`    // forget by user, forget_user, a hold on a user
	Scope   string       `json:"scope,omitempty"`   // erase_scope, a hold on a scope
	Hashes  []string     `json:"hashes,omitempty"`  // archive
	Hold    string       `json:"hold,omitempty"`    // release
	// Key is, for an erasure (and a request's execution), the fingerprint
	// of the key its dry run just before it named ("" when there was none
	// to erase).
	Key string `json:"key,omitempty"`
	// Request is the erasure request approved, rejected or executed; Token
	// the actor of a request's call; Due a filed request's due date (Unix
	// seconds; User or Scope names its subject).
	Request string `json:"request,omitempty"`
	Token   string `json:"token,omitempty"`
	Due     int64  `json:"due,omitempty"`
	// Blocked lists, for a release, the blocked requests it may run, by
	// due date, each with the Key its dry run named.
	Blocked []crashRan `json:"blocked,omitempty"`
}

// crashResult is what a call returned.
type crashResult struct {
	Code   lethe.Code `json:"code,omitempty"`
	Err    string     `json:"err,omitempty"`
	Hashes []string   `json:"hashes,omitempty"` // written, forgotten or archived
	Event  string     `json:"event,omitempty"`
	Events []string   `json:"events,omitempty"` // an archive's
	Count  int64      `json:"count,omitempty"`
	Key    string     `json:"key,omitempty"`
	Hold   string     `json:"hold,omitempty"`
	// Request is a filed request's id (Key its sealing key's fingerprint)
	// and Nonce its subject commitment's nonce (hex).
	Request string `json:"request,omitempty"`
	Nonce   string `json:"nonce,omitempty"`
	// Ran lists the blocked requests a release ran, by due date.
	Ran []crashRan `json:"ran,omitempty"`
	// Partial marks the result of a release in flight that outcome read
	// from the store: the blocked requests it ran are a prefix of those
	// it would have run.
	Partial bool `json:"-"`
	// Took is how long the call took, in microseconds.
	Took int64 `json:"took_us"`
}

// crashLine is one line the child prints: Open before it opens the store,
// then for each call N its Call before making it and its Res once it
// returned.
type crashLine struct {
	Open bool         `json:"open,omitempty"`
	N    int          `json:"n"`
	Call *crashCall   `json:"call,omitempty"`
	Res  *crashResult `json:"res,omitempty"`
}

// allowed lists the codes each call may answer; any other is a failure.
var allowed = map[string][]lethe.Code{
	"add": {""}, "batch": {""},
	"supersede":   {"", "not_found", "erased", "already_superseded"},
	"forget":      {"", "not_found", "held", "protected"},
	"forget_user": {"", "not_found", "held"},
	"erase_scope": {"", "not_found", "held"},
	"hold":        {""}, "release": {""}, "archive": {"", "not_found"}, "clean": {""},
	"file": {""}, "approve": {"", "invalid_state", "four_eyes"}, "reject": {"", "invalid_state"},
	"execute": {"", "invalid_state", "held", "not_found"},
}

func scopePrefixes(scope string) []string {
	var out []string
	for i := range scope {
		if scope[i] == '/' {
			out = append(out, scope[:i])
		}
	}
	if scope != "" {
		out = append(out, scope)
	}
	return out
}

// writeKeys marks the keys a write of g uses live.
func (m *crashModel) writeKeys(g *crashGrain, state keyState) {
	set := func(k string) {
		if m.Keys[k] != keyLive {
			m.Keys[k] = state
		}
	}
	set("memory")
	for _, p := range scopePrefixes(g.Scope) {
		set("scope:" + p)
	}
	if g.User != "" {
		set("user:" + g.User)
	}
}

// next is the new version of old that a supersede by c writes.
func next(old *crashGrain, c *crashCall) crashGrain {
	g := *old
	n := c.Grains[0]
	g.Hash, g.Object, g.Content, g.Supersedes, g.By, g.Archived, g.Alive = "", n.Object, n.Content, old.Hash, "", false, true
	if n.Scope != "" {
		g.Scope = n.Scope
	}
	if n.User != "" {
		g.User = n.User
	}
	return g
}

// dies reports whether an erasure by c makes x unreadable.
func (c *crashCall) dies(x *crashGrain) bool {
	if c.Op == "forget_user" {
		return x.User == c.User
	}
	return inScope(x.Scope, c.Scope)
}

func (c *crashCall) String() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// apply applies call c, which returned r, to the model, and reports a
// result the model cannot follow. name names the call in messages.
func (m *crashModel) apply(name string, c *crashCall, r *crashResult) error {
	if requestOps[c.Op] {
		return m.applyRequest(name, c, r)
	}
	switch r.Code {
	case "":
	case "held", "protected":
		w := leafWant{Type: proofs.EventErasureRefused, Reason: string(r.Code), Call: name}
		if r.Code == "protected" {
			w.OneOf = m.chain(c.Hash)
		}
		m.Wants = append(m.Wants, w)
		return nil
	default:
		return nil
	}
	switch c.Op {
	case "add", "batch":
		if len(r.Hashes) != len(c.Grains) {
			return fmt.Errorf("%d hashes for %d grains", len(r.Hashes), len(c.Grains))
		}
		for i, g := range c.Grains {
			if _, ok := m.Grains[r.Hashes[i]]; ok {
				return fmt.Errorf("new grain %d has the hash of a known grain, %s", i, r.Hashes[i])
			}
			g.Hash, g.Alive = r.Hashes[i], true
			m.Grains[g.Hash] = &g
			m.Order = append(m.Order, g.Hash)
			m.writeKeys(&g, keyLive)
		}
	case "supersede":
		old, ok := m.Grains[c.Hash]
		if !ok || !old.Alive {
			return fmt.Errorf("superseded %s, which the model does not hold alive", c.Hash)
		}
		if len(r.Hashes) != 1 {
			return fmt.Errorf("supersede returned %d hashes", len(r.Hashes))
		}
		if _, ok := m.Grains[r.Hashes[0]]; ok {
			return fmt.Errorf("the new version has the hash of a known grain, %s", r.Hashes[0])
		}
		g := next(old, c)
		g.Hash = r.Hashes[0]
		m.Grains[g.Hash] = &g
		m.Order = append(m.Order, g.Hash)
		old.By = g.Hash
		m.writeKeys(&g, keyLive)
		m.Wants = append(m.Wants, leafWant{Type: proofs.EventGrainSupersede, Hashes: slices.Sorted(slices.Values([]string{c.Hash, g.Hash})), Call: name})
	case "forget":
		if r.Count != int64(len(r.Hashes)) {
			return fmt.Errorf("forget counted %d grains and listed %d", r.Count, len(r.Hashes))
		}
		for _, h := range r.Hashes {
			x, ok := m.Grains[h]
			if !ok {
				return fmt.Errorf("forget deleted %s, which the model never saw written", h)
			}
			x.Alive = false
		}
		if len(r.Hashes) > 0 || r.Event != "" {
			m.Wants = append(m.Wants, leafWant{ID: r.Event, Type: proofs.EventGrainForget, Hashes: slices.Sorted(slices.Values(r.Hashes)), Call: name})
		}
	case "forget_user", "erase_scope":
		return m.erase(name, c, r, "")
	case "hold":
		m.Holds[r.Hold] = lethe.HoldSpec{Memory: crashMemory, Scope: c.Scope, UserID: c.User}
		if c.User != "" {
			m.Keys["memory"] = keyLive // a user hold names the user under the memory key
		}
		m.Wants = append(m.Wants, leafWant{Type: proofs.EventHoldSet, Hold: r.Hold, Call: name})
	case "release":
		if _, ok := m.Holds[c.Hold]; !ok {
			return fmt.Errorf("released hold %s, which the model does not hold", c.Hold)
		}
		delete(m.Holds, c.Hold)
		m.Wants = append(m.Wants, leafWant{Type: proofs.EventHoldRelease, Hold: c.Hold, Call: name})
		return m.ranBlocked(name, c, r)
	case "archive":
		for _, h := range r.Hashes {
			x, ok := m.Grains[h]
			if !ok || !x.Alive {
				return fmt.Errorf("archived %s, which the model does not hold alive", h)
			}
			x.Archived = true
		}
		if len(r.Events) > 0 {
			for _, id := range r.Events {
				m.Wants = append(m.Wants, leafWant{ID: id, Type: proofs.EventGrainArchive, Call: name})
			}
		} else if len(r.Hashes) > 0 {
			m.Wants = append(m.Wants, leafWant{Type: proofs.EventGrainArchive, Hashes: slices.Sorted(slices.Values(r.Hashes)), Call: name})
		}
	}
	return nil
}

// erase applies erasure c (forget_user or erase_scope), which returned r:
// the grains under its key die and its keys are destroyed, with a key.erase
// event naming request (the request it executed, "" for none).
func (m *crashModel) erase(name string, c *crashCall, r *crashResult, request string) error {
	n := int64(0)
	for _, h := range m.Order {
		if x := m.Grains[h]; x.Alive && c.dies(x) {
			x.Alive = false
			n++
		}
	}
	if r.Count != n {
		return fmt.Errorf("erasure counted %d grains, the model %d", r.Count, n)
	}
	for k := range m.Keys {
		if c.Op == "forget_user" && k == "user:"+c.User || c.Op == "erase_scope" && strings.HasPrefix(k, "scope:") && inScope(k[len("scope:"):], c.Scope) {
			m.Keys[k] = keyNone
		}
	}
	m.Wants = append(m.Wants, leafWant{ID: r.Event, Type: proofs.EventKeyErase, Key: r.Key, Count: r.Count, Request: request, Call: name})
	return nil
}

// chain returns the versions of h's chain: the grains linked to it by
// supersedes and superseded_by, h included.
func (m *crashModel) chain(h string) []string {
	seen := map[string]bool{}
	var walk func(h string)
	walk = func(h string) {
		x, ok := m.Grains[h]
		if !ok || seen[h] {
			return
		}
		seen[h] = true
		walk(x.Supersedes)
		walk(x.By)
		for _, y := range m.Grains {
			if y.Supersedes == h || y.By == h {
				walk(y.Hash)
			}
		}
	}
	walk(h)
	return slices.Sorted(maps.Keys(seen))
}

// alive returns the hashes of the grains the model holds alive that keep
// returns true for, in write order.
func (m *crashModel) alive(keep func(*crashGrain) bool) []string {
	var out []string
	for _, h := range m.Order {
		if x := m.Grains[h]; x.Alive && keep(x) {
			out = append(out, h)
		}
	}
	return out
}

// crashModelChild is the child process of TestCrashModel: it runs random
// calls on the store, printing each call before it makes it and its result
// once it returned, until it is killed.
func crashModelChild() {
	var cc crashChildConfig
	if err := json.Unmarshal([]byte(os.Getenv(crashModelEnv)), &cc); err != nil {
		panic(err)
	}
	b, err := os.ReadFile(cc.Model)
	if err != nil {
		panic(err)
	}
	m := newCrashModel()
	if err := json.Unmarshal(b, m); err != nil {
		panic(err)
	}
	emit := func(l crashLine) {
		b, err := json.Marshal(l)
		if err != nil {
			panic(err)
		}
		// One write per line: a kill leaves whole lines, and at most a
		// last line cut short, which the parent drops.
		if _, err := os.Stdout.Write(append(b, '\n')); err != nil {
			os.Exit(3)
		}
	}
	ctx := context.Background()
	emit(crashLine{Open: true})
	// Return before inclusion, so kills land between a commit and its
	// append to the log too.
	db, err := lethe.Open(ctx, lethe.Config{DataDir: cc.DataDir, PostgresDSN: cc.PostgresDSN, ProofWait: time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child: open:", err)
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(cc.Seed, uint64(cc.Round)))
	// A round armed at an erasure request's crash point draws requests
	// more often, so that it reaches the point.
	point, _ := crashpoint.Parse(os.Getenv(crashpoint.Env))
	focus := strings.HasPrefix(point, "request.")
	for n := 0; ; n++ {
		c := m.draw(ctx, db, rng, fmt.Sprintf("c%d.%d", cc.Round, n), focus)
		emit(crashLine{N: n, Call: c})
		start := time.Now()
		r := runCrashCall(ctx, db, c)
		r.Took = time.Since(start).Microseconds()
		emit(crashLine{N: n, Res: r})
		if err := m.apply("", c, r); err != nil {
			fmt.Fprintf(os.Stderr, "crash child: call %d: %v\n", n, err)
		}
	}
}

// draw returns a random call that the model makes likely to do something.
// Content values are unique (tag), so every grain written is new. With
// focus, half the calls are erasure requests' (else one in seven).
func (m *crashModel) draw(ctx context.Context, db *lethe.DB, rng *rand.Rand, tag string, focus bool) *crashCall {
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	share := 14
	if focus {
		share = 50
	}
	if rng.IntN(100) < share {
		if c := m.drawRequest(ctx, db, rng, focus); c != nil {
			return c
		}
	}
	grain := func(i int) crashGrain {
		g := crashGrain{Subject: pick(crashSubjects), Object: pick([]string{"x", "y"}), Content: fmt.Sprintf("%s.%d", tag, i),
			User: pick(crashUsers), Scope: pick(crashScopes), Importance: 0.2}
		if rng.IntN(8) == 0 {
			g.Importance = 0.95 // protected from a forget by hash
		}
		return g
	}
	// known is a hash of any state, now and then, else one of hs.
	known := func(hs []string) string {
		if len(hs) == 0 || len(m.Order) > 0 && rng.IntN(10) == 0 {
			if len(m.Order) == 0 {
				return strings.Repeat("ab", 32)
			}
			return pick(m.Order)
		}
		return pick(hs)
	}
	all := m.alive(func(*crashGrain) bool { return true })
	switch w := rng.IntN(100); {
	case w < 25:
		return &crashCall{Op: "add", Grains: []crashGrain{grain(0)}}
	case w < 37:
		c := &crashCall{Op: "batch"}
		for i := range 2 + rng.IntN(3) {
			c.Grains = append(c.Grains, grain(i))
		}
		return c
	case w < 53:
		heads := m.alive(func(x *crashGrain) bool { return x.By == "" || !m.Grains[x.By].Alive })
		n := crashGrain{Object: pick([]string{"x", "y", "z"}), Content: tag}
		if rng.IntN(3) == 0 {
			n.Scope = pick(crashScopes[1:])
		}
		if rng.IntN(4) == 0 {
			n.User = pick(crashUsers[2:])
		}
		return &crashCall{Op: "supersede", Hash: known(heads), Grains: []crashGrain{n}}
	case w < 62:
		return &crashCall{Op: "forget", Hash: known(all)}
	case w < 64:
		return &crashCall{Op: "forget", Subject: pick(crashSubjects)}
	case w < 66:
		return &crashCall{Op: "forget", User: pick(crashUsers[2:])}
	case w < 76:
		c := &crashCall{Op: "forget_user", User: pick(append(crashUsers[2:], "nobody"))}
		if w >= 71 {
			c = &crashCall{Op: "erase_scope", Scope: pick(crashScopes[1:])}
		}
		// What key the erasure is to destroy, so that the parent can tell
		// whether one in flight happened.
		c.Key = dryKey(ctx, db, c)
		return c
	case w < 78 && len(m.Holds) == 0:
		if rng.IntN(2) == 0 {
			return &crashCall{Op: "hold", User: pick(crashUsers[2:])}
		}
		return &crashCall{Op: "hold", Scope: pick(crashScopes[1:])}
	case w < 85 && len(m.Holds) > 0:
		return &crashCall{Op: "release", Hold: pick(slices.Sorted(maps.Keys(m.Holds))), Blocked: m.blocked(ctx, db)}
	case w < 95:
		return &crashCall{Op: "archive", Hashes: []string{known(all), known(all)}}
	default:
		return &crashCall{Op: "clean"}
	}
}

func (g *crashGrain) grain() lethe.Grain {
	return lethe.Grain{Memory: crashMemory, Type: "fact", Subject: g.Subject, Relation: "likes", Object: g.Object,
		Content: g.Content, UserID: g.User, Scope: g.Scope, Importance: g.Importance}
}

// runCrashCall makes call c and returns its result.
func runCrashCall(ctx context.Context, db *lethe.DB, c *crashCall) *crashResult {
	r := &crashResult{}
	var err error
	switch c.Op {
	case "add", "batch":
		gs := make([]lethe.Grain, len(c.Grains))
		for i := range c.Grains {
			gs[i] = c.Grains[i].grain()
		}
		r.Hashes, err = db.AddBatch(ctx, gs)
	case "supersede":
		n := c.Grains[0]
		var h string
		h, err = db.Supersede(ctx, c.Hash, lethe.Grain{Memory: crashMemory, Object: n.Object, Content: n.Content, Scope: n.Scope, UserID: n.User})
		if err == nil {
			r.Hashes = []string{h}
		}
	case "forget":
		var res *lethe.ForgetResult
		res, err = db.Forget(ctx, lethe.Selector{Memory: crashMemory, Hash: c.Hash, Subject: c.Subject, UserID: c.User})
		if err == nil {
			r.Hashes, r.Count = res.Hashes, int64(res.Count)
			if res.Receipt != nil {
				r.Event = res.EventID
			}
		}
	case "forget_user", "erase_scope":
		var er *lethe.Erasure
		if c.Op == "forget_user" {
			er, err = db.ForgetUser(ctx, crashMemory, c.User)
		} else {
			er, err = db.EraseScope(ctx, crashMemory, c.Scope)
		}
		if err == nil {
			r.Count, r.Key, r.Event = er.Count, er.KeyFingerprint, er.EventID
		}
	case "hold":
		var h *lethe.Hold
		h, err = db.SetHold(ctx, lethe.HoldSpec{Memory: crashMemory, Scope: c.Scope, UserID: c.User})
		if err == nil {
			r.Hold = h.ID
		}
	case "archive":
		var res *lethe.ArchiveResult
		res, err = db.ArchiveGrains(ctx, crashMemory, c.Hashes)
		if err == nil {
			r.Hashes, r.Events = res.Hashes, res.Events
		}
	case "clean":
		_, err = db.PurgeErased(ctx)
	case "release":
		err = db.ReleaseHold(ctx, crashMemory, c.Hold)
		if err == nil {
			r.Ran, err = readRan(ctx, db, c.Blocked)
		}
	default:
		err = runRequestCall(ctx, db, c, r)
	}
	if err != nil {
		r = &crashResult{Code: lethe.ErrorCode(err), Err: err.Error()}
	}
	return r
}

// crashRun is the parent's side of one store's rounds.
type crashRun struct {
	t     *testing.T
	cfg   lethe.Config
	raw   rawStore // reads the sealing keys of requests
	seed  uint64
	id    *age.X25519Identity
	model *crashModel
	file  string
	kill  *rand.Rand // when to kill
	// took lists how long the calls took, by operation, in microseconds.
	took map[string][]int64

	calls, inFlight, happened, leaves int
	// arm draws the crash point of a round (half of them, or every one
	// with armAll) from points; armed and reached count the rounds armed
	// at each point and those whose child died at it.
	arm            *rand.Rand
	points         []string
	armAll         bool
	armed, reached map[string]int
	// outcomes counts the reported calls by operation and code, and the
	// calls in flight by operation and whether they happened.
	outcomes map[string]int
}

// round runs one child until it is killed, then reopens the store and
// checks it against the model.
func (r *crashRun) round(round int, last bool) {
	t := r.t
	lines, stderr, point := r.runChild(round)
	// The calls in order: those with a result happened; the last may be in
	// flight.
	type step struct {
		call *crashCall
		res  *crashResult
	}
	var steps []step
	for _, l := range lines {
		switch {
		case l.Call != nil:
			if l.N != len(steps) {
				t.Fatalf("round %d: call %d printed as call %d", round, len(steps), l.N)
			}
			steps = append(steps, step{call: l.Call})
		case l.Res != nil:
			if l.N != len(steps)-1 || steps[l.N].res != nil {
				t.Fatalf("round %d: result of call %d out of order", round, l.N)
			}
			steps[l.N].res = l.Res
		}
	}
	// trace prints the calls of the round up to the failure.
	trace := func() string {
		var sb strings.Builder
		for i, s := range steps[max(0, len(steps)-25):] {
			n := max(0, len(steps)-25) + i
			res := "IN FLIGHT"
			if s.res != nil {
				b, _ := json.Marshal(s.res)
				res = string(b)
			}
			fmt.Fprintf(&sb, "\n  %d.%d %v -> %s", round, n, s.call, res)
		}
		if stderr != "" {
			sb.WriteString("\nchild stderr:\n" + stderr)
		}
		return sb.String()
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d round %d (%s): %s\ncalls:%s", r.seed, round, point, fmt.Sprintf(format, args...), trace())
	}
	m0 := r.model.clone()
	var inflight *crashCall
	for i, s := range steps {
		name := fmt.Sprintf("%d.%d %s", round, i, s.call.Op)
		if s.res == nil {
			if i != len(steps)-1 {
				fail("call %d has no result but is not the last", i)
			}
			inflight = s.call
			break
		}
		if !slices.Contains(allowed[s.call.Op], s.res.Code) {
			fail("call %s %v failed: %s (%s)", name, s.call, s.res.Code, s.res.Err)
		}
		if err := m0.apply(name, s.call, s.res); err != nil {
			fail("call %s %v: %v", name, s.call, err)
		}
		r.calls++
		r.outcomes[s.call.Op+":"+cmp.Or(string(s.res.Code), "ok")]++
		if len(s.res.Ran) > 0 {
			r.outcomes["release:ran a blocked request"] += len(s.res.Ran)
		}
		r.took[s.call.Op] = append(r.took[s.call.Op], s.res.Took)
	}

	ctx := context.Background()
	db, err := lethe.Open(ctx, r.cfg)
	if err != nil {
		fail("reopen: %v", err)
	}
	defer db.Close()
	obs := observe(t, db, m0, fail)
	observeRequests(ctx, t, db, r.raw, obs, fail)
	r.leaves = len(obs.leaves)
	m := m0
	if inflight != nil {
		r.inFlight++
		m = resolve(m0, inflight, fmt.Sprintf("%d.%d %s", round, len(steps)-1, inflight.Op), obs, fail)
		if m.happened {
			r.happened++
			r.outcomes["in flight, happened: "+inflight.Op]++
		} else {
			r.outcomes["in flight, did not happen: "+inflight.Op]++
		}
	} else {
		ps := m.recoverStranded(obs) // as the reopen ran them
		if p, _ := m.problems(obs, false); len(ps)+len(p) > 0 {
			fail("the store differs from the model (no call was in flight):\n  %s", strings.Join(append(ps, p...), "\n  "))
		}
	}
	// What a call in flight may have created is now known.
	for k, s := range m.Keys {
		if s == keyMaybe {
			m.Keys[k] = keyNone
			if obs.keys[k].fingerprint != "" {
				m.Keys[k] = keyLive
			}
		}
	}
	checkKeyEvents(obs, fail)
	r.checkReads(ctx, db, m, obs, fail)
	checkCertificates(ctx, db, m, fail)
	r.checkCleaner(ctx, db, m, fail)
	if last {
		collectLeaves(t, db)
	}
	if err := db.Close(); err != nil {
		fail("close: %v", err)
	}
	r.model = m
}

// runChild runs round's child until it is killed and returns the lines it
// printed (a last line cut short dropped), its standard error, and what
// killed it: the crash point it was armed at, if any, and whether it died
// there or was killed by the parent.
func (r *crashRun) runChild(round int) ([]crashLine, string, string) {
	t := r.t
	b, err := json.Marshal(r.model)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cc, err := json.Marshal(crashChildConfig{DataDir: r.cfg.DataDir, PostgresDSN: r.cfg.PostgresDSN, Seed: r.seed, Round: round, Model: r.file})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashModelEnv+"="+string(cc))
	// Half the rounds arm a crash point at its first, second or third hit:
	// the child kills itself there, unless the parent kills it first as
	// in any round.
	point := ""
	if r.armAll || r.arm.IntN(2) == 0 {
		point = fmt.Sprintf("%s@%d", r.points[r.arm.IntN(len(r.points))], 1+r.arm.IntN(3))
		cmd.Env = append(cmd.Env, crashpoint.Env+"="+point)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var silent atomic.Bool
	killed := false
	kill := func() {
		once.Do(func() {
			killed = true
			cmd.Process.Signal(syscall.SIGKILL)
		})
	}
	// A child that stops printing is killed and the round fails below.
	stuck := time.AfterFunc(2*time.Minute, func() { silent.Store(true); kill() })
	defer stuck.Stop()
	// One round in eight is killed while it opens the store or just after.
	// The others are killed after 1 to 60 results: a quarter once the next
	// result is printed (the kill lands between calls, or early in the
	// next), the rest once the next call is printed, half of them once a
	// forget or an erasure is. Those are killed after a wait drawn from 30%
	// to 110% of how long that kind of call took so far (its commit comes
	// at its end), or at once.
	inOpen := r.kill.IntN(8) == 0
	after := 1 + r.kill.IntN(60)
	if point != "" {
		// Time for the calls to reach the point.
		inOpen, after = false, 20+r.kill.IntN(41)
	}
	onCall := r.kill.IntN(4) != 0
	destructive := r.kill.IntN(2) == 0
	waits := r.kill.IntN(4) != 0
	frac := 0.3 + 0.8*r.kill.Float64()
	wait := func(op string) time.Duration {
		took := r.took[op]
		if !waits || len(took) == 0 {
			return 0
		}
		slices.Sort(took)
		return time.Duration(frac * float64(took[len(took)/2]) * float64(time.Microsecond))
	}
	openWait := time.Duration(r.kill.IntN(40)) * time.Millisecond
	var lines []crashLine
	br := bufio.NewReader(out)
	done := 0
	for {
		b, err := br.ReadBytes('\n')
		if err != nil {
			break // the child is dead; a line without its newline is dropped
		}
		var l crashLine
		if err := json.Unmarshal(b, &l); err != nil {
			kill()
			cmd.Wait()
			t.Fatalf("round %d: child printed %q: %v", round, b, err)
		}
		lines = append(lines, l)
		switch {
		case inOpen:
			if l.Open {
				time.AfterFunc(openWait, kill)
			}
		case l.Res != nil:
			done++
			if done == after && !onCall {
				kill()
			}
		case l.Call != nil && done >= after && onCall:
			if destructive && !slices.Contains([]string{"forget", "forget_user", "erase_scope", "execute", "reject", "release"}, l.Call.Op) && done < after+30 {
				break
			}
			time.Sleep(wait(l.Call.Op))
			kill()
		}
	}
	io.Copy(io.Discard, out)
	cmd.Wait()
	stuck.Stop()
	once.Do(func() {}) // no kill after this
	how := "no crash point armed"
	if point != "" {
		name, _ := crashpoint.Parse(point)
		r.armed[name]++
		how = "crash point " + point + " armed, not reached: killed by the parent"
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if strings.Contains(stderr.String(), "lethe: crashpoint "+point+" reached\n") && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			r.reached[name]++
			how, killed = "died at crash point "+point, true
		}
	}
	if !killed {
		t.Fatalf("round %d (%s): the child exited before it was killed: %s", round, how, stderr.String())
	}
	if silent.Load() {
		t.Fatalf("round %d: the child printed nothing for 2 minutes: %s", round, stderr.String())
	}
	return lines, stderr.String(), how
}

// keyObs is a data key as dry-run erasures see it.
type keyObs struct {
	fingerprint string // "" when there is no live key
	count       int64  // the grains its erasure would make unreadable
}

// crashObs is what the reopened store holds.
type crashObs struct {
	readable map[string]*lethe.Grain // Get of every known hash and of every grain Recall returns
	holds    map[string]bool
	keys     map[string]keyObs // by the model's key names
	leaves   []*proofs.Leaf
	// requests are the erasure requests by id, and sealKeys the state of
	// their sealing keys by fingerprint (see observeRequests; nil when
	// not read).
	requests map[string]*lethe.ErasureRequest
	sealKeys map[string]string
}

// observe reads the whole memory: every grain the model knows (Get), every
// grain Recall returns, the holds, the data keys (dry-run erasures) and
// the audit log. A read that fails with another code than not_found or
// erased fails the test.
func observe(t *testing.T, db *lethe.DB, m *crashModel, fail func(string, ...any)) *crashObs {
	ctx := context.Background()
	obs := &crashObs{readable: map[string]*lethe.Grain{}, holds: map[string]bool{}, keys: map[string]keyObs{}}
	recalled := map[string]*lethe.Grain{}
	for _, g := range recallAll(ctx, lethe.Query{}, db, fail) {
		recalled[g.Hash] = g
	}
	hashes := slices.Clone(m.Order)
	for h := range recalled {
		if _, ok := m.Grains[h]; !ok {
			hashes = append(hashes, h)
		}
	}
	for _, h := range hashes {
		g, err := db.Get(ctx, crashMemory, h)
		switch c := lethe.ErrorCode(err); c {
		case "":
			obs.readable[h] = g
		case "not_found", "erased":
		default:
			fail("Get(%s): %v (code %s): a read fails", h[:8], err, c)
		}
		if _, ok := recalled[h]; ok != (err == nil) {
			fail("Get(%s) = %v but Recall of everything returned it: %t", h[:8], err, ok)
		}
	}
	hs, err := db.Holds(ctx, crashMemory)
	if err != nil {
		fail("Holds: %v", err)
	}
	for _, h := range hs {
		obs.holds[h.ID] = true
	}
	dry := func(name string, er *lethe.Erasure, err error) {
		switch lethe.ErrorCode(err) {
		case "":
			obs.keys[name] = keyObs{fingerprint: er.KeyFingerprint, count: er.Count}
		case "not_found":
			obs.keys[name] = keyObs{}
		default:
			fail("dry-run erasure of %s: %v", name, err)
		}
	}
	er, err := db.EraseMemory(ctx, crashMemory, lethe.DryRun())
	dry("memory", er, err)
	for _, u := range crashUsers[2:] {
		er, err := db.ForgetUser(ctx, crashMemory, u, lethe.DryRun())
		dry("user:"+u, er, err)
	}
	for _, p := range crashScopes[1:] {
		er, err := db.EraseScope(ctx, crashMemory, p, lethe.DryRun())
		dry("scope:"+p, er, err)
	}
	leaves, err := db.AuditLeaves(ctx)
	if err != nil {
		fail("AuditLeaves: %v", err)
	}
	ids := map[string]int{}
	for i, b := range leaves {
		l, err := proofs.ParseLeaf(b)
		if err != nil {
			fail("leaf %d: %v", i, err)
		}
		if j, ok := ids[l.ID]; ok {
			fail("event %s is in the log twice, at %d and %d", l.ID, j, i)
		}
		ids[l.ID] = i
		obs.leaves = append(obs.leaves, l)
	}
	return obs
}

// recallAll returns every grain q (its memory, superseded and archived
// grains included) matches, page by page.
func recallAll(ctx context.Context, q lethe.Query, db *lethe.DB, fail func(string, ...any)) []*lethe.Grain {
	q.Memory, q.IncludeSuperseded, q.IncludeArchived, q.Limit = crashMemory, true, true, 1000
	var out []*lethe.Grain
	for {
		p, err := db.Recall(ctx, q)
		if err != nil {
			fail("Recall(%+v): %v", q, err)
		}
		for i := range p.Grains {
			out = append(out, &p.Grains[i])
		}
		if p.Next == "" {
			return out
		}
		q.Cursor = p.Next
	}
}

// resolve returns the model that explains the store: m0 (the call in
// flight did not happen) or m0 with it applied, as the store shows its
// outcome. It fails when neither does.
func resolve(m0 *crashModel, c *crashCall, name string, obs *crashObs, fail func(string, ...any)) *crashModel {
	// A write in flight may have created its keys without its grains (keys
	// commit in their own transaction, with their key.create events).
	base := m0.clone()
	switch c.Op {
	case "add", "batch":
		for i := range c.Grains {
			base.writeKeys(&c.Grains[i], keyMaybe)
		}
	case "supersede":
		if old, ok := m0.Grains[c.Hash]; ok && old.Alive {
			g := next(old, c)
			base.writeKeys(&g, keyMaybe)
		}
	case "hold":
		if c.User != "" && base.Keys["memory"] != keyLive {
			base.Keys["memory"] = keyMaybe
		}
	}
	refusable := c.Op == "forget" || c.Op == "forget_user" || c.Op == "erase_scope"
	// The reopen ran the stranded requests before the store was read, on
	// the store as the call in flight left it.
	m := base.clone()
	notHappened := m.recoverStranded(obs)
	ps, refused := m.problems(obs, refusable)
	if notHappened = append(notHappened, ps...); len(notHappened) == 0 {
		if refused != nil {
			// It was refused, and its refusal's event committed.
			m.Wants = append(m.Wants, leafWant{ID: refused.ID, Type: proofs.EventErasureRefused, Call: name + " (refused in flight)"})
		}
		return m
	}
	r := outcome(m0, c, obs)
	if r == nil {
		fail("the call in flight, %s %v, shows no effect, and the store differs from the model without it:\n  %s",
			name, c, strings.Join(notHappened, "\n  "))
	}
	m1 := base.clone()
	if err := m1.apply(name, c, r); err != nil {
		fail("the call in flight, %s %v, as the store shows it %+v: %v", name, c, r, err)
	}
	happened := m1.recoverStranded(obs)
	ps, _ = m1.problems(obs, false)
	if happened = append(happened, ps...); len(happened) == 0 {
		m1.happened = true
		return m1
	}
	fail("the store is explained neither by the call in flight, %s %v, having happened:\n  %s\nnor by its not having happened:\n  %s",
		name, c, strings.Join(happened, "\n  "), strings.Join(notHappened, "\n  "))
	return nil
}

// outcome returns the result call c in flight had, as the store shows it,
// or nil when the store shows no effect of it.
func outcome(m0 *crashModel, c *crashCall, obs *crashObs) *crashResult {
	unknown := map[string]string{} // content → hash of readable grains the model does not know
	for h, g := range obs.readable {
		if _, ok := m0.Grains[h]; !ok {
			unknown[g.Content] = h
		}
	}
	// unmatched returns the leaves of type typ that no reported call wrote.
	unmatched := func(typ proofs.EventType) []*proofs.Leaf {
		_, rest, _ := matchLeaves(obs.leaves, m0.Wants)
		var out []*proofs.Leaf
		for _, l := range rest {
			if l.Type == typ {
				out = append(out, l)
			}
		}
		return out
	}
	switch c.Op {
	case "add", "batch", "supersede":
		r := &crashResult{}
		for _, g := range c.Grains {
			if h, ok := unknown[g.Content]; ok {
				r.Hashes = append(r.Hashes, h)
			}
		}
		if len(r.Hashes) == 0 {
			return nil
		}
		return r
	case "forget":
		// The grains it deleted: those the model holds alive that are
		// gone, and those its leaf lists.
		gone := map[string]bool{}
		for _, h := range m0.alive(func(*crashGrain) bool { return true }) {
			if obs.readable[h] == nil {
				gone[h] = true
			}
		}
		for _, l := range unmatched(proofs.EventGrainForget) {
			for _, h := range l.Hashes {
				gone[h] = true
			}
		}
		if len(gone) == 0 {
			return nil
		}
		hs := slices.Sorted(maps.Keys(gone))
		return &crashResult{Hashes: hs, Count: int64(len(hs))}
	case "forget_user", "erase_scope":
		if c.Key == "" {
			return nil // there was no key to destroy
		}
		n := int64(0)
		for _, x := range m0.Grains {
			if x.Alive && c.dies(x) {
				n++
			}
		}
		return &crashResult{Key: c.Key, Count: n}
	case "hold":
		for id := range obs.holds {
			if _, ok := m0.Holds[id]; !ok {
				return &crashResult{Hold: id}
			}
		}
	case "release":
		if _, ok := m0.Holds[c.Hold]; ok && !obs.holds[c.Hold] {
			return &crashResult{Ran: ranInStore(c.Blocked, obs), Partial: true}
		}
	case "file", "approve", "reject", "execute":
		return requestOutcome(m0, c, obs)
	case "archive":
		r := &crashResult{}
		for _, h := range c.Hashes {
			if x, ok := m0.Grains[h]; ok && x.Alive && !x.Archived && !slices.Contains(r.Hashes, h) {
				r.Hashes = append(r.Hashes, h)
			}
		}
		if len(r.Hashes) == 0 {
			return nil
		}
		slices.Sort(r.Hashes)
		return r
	}
	return nil
}

// matchLeaves matches the leaves with the wants: by event id, else by
// content, each leaf once. It returns the wants no leaf matched (as
// problems) and the leaves no want matched, key.create leaves left out
// (checkKeyEvents checks them).
func matchLeaves(leaves []*proofs.Leaf, wants []leafWant) (problems []string, rest []*proofs.Leaf, used []bool) {
	used = make([]bool, len(leaves))
	byID := map[string]int{}
	for i, l := range leaves {
		byID[l.ID] = i
	}
	for _, w := range wants {
		if w.ID == "" {
			continue
		}
		i, ok := byID[w.ID]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("event %s of call %s is not in the log", w.ID, w.Call))
		case used[i]:
			problems = append(problems, fmt.Sprintf("event %s of call %s is reported twice", w.ID, w.Call))
		case !w.matches(leaves[i]):
			b, _ := leaves[i].Marshal()
			problems = append(problems, fmt.Sprintf("event %s of call %s is %s, want %+v", w.ID, w.Call, b, w))
		}
		if ok {
			used[i] = true
		}
	}
	for _, w := range wants {
		if w.ID != "" {
			continue
		}
		found := false
		for i, l := range leaves {
			if !used[i] && w.matches(l) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("no %s event in the log for call %s (%+v)", w.Type, w.Call, w))
		}
	}
	for i, l := range leaves {
		if !used[i] && l.Type != proofs.EventKeyCreate {
			rest = append(rest, l)
		}
	}
	return problems, rest, used
}

// problems lists how the store differs from the model. refusal allows one
// erasure.refused event that no call reported (a refusal in flight), which
// it returns.
func (m *crashModel) problems(obs *crashObs, refusal bool) ([]string, *proofs.Leaf) {
	var ps []string
	for _, h := range m.Order {
		x, g := m.Grains[h], obs.readable[h]
		switch {
		case x.Alive && g == nil:
			ps = append(ps, fmt.Sprintf("grain %s (%s) is not readable", h[:8], x.Content))
		case !x.Alive && g != nil:
			ps = append(ps, fmt.Sprintf("grain %s (%s) was forgotten or erased but is readable", h[:8], x.Content))
		case g != nil:
			want := crashGrain{Hash: h, Subject: x.Subject, Object: x.Object, Content: x.Content, User: x.User, Scope: x.Scope,
				Importance: x.Importance, Supersedes: x.Supersedes, By: x.By, Archived: x.Archived, Alive: true}
			got := crashGrain{Hash: g.Hash, Subject: g.Subject, Object: g.Object, Content: g.Content, User: g.UserID, Scope: g.Scope,
				Importance: g.Importance, Supersedes: g.Supersedes, By: g.SupersededBy, Archived: g.Archived, Alive: true}
			if got != want {
				ps = append(ps, fmt.Sprintf("grain %s reads %+v, want %+v", h[:8], got, want))
			}
		}
	}
	for h, g := range obs.readable {
		if _, ok := m.Grains[h]; !ok {
			ps = append(ps, fmt.Sprintf("grain %s (%s) is readable, and no call wrote it", h[:8], g.Content))
		}
	}
	holds := map[string]bool{}
	for id := range m.Holds {
		holds[id] = true
	}
	if !maps.Equal(obs.holds, holds) {
		ps = append(ps, fmt.Sprintf("holds %v, want %v", slices.Sorted(maps.Keys(obs.holds)), slices.Sorted(maps.Keys(m.Holds))))
	}
	for name, k := range obs.keys {
		switch s := m.Keys[name]; {
		case s == keyLive && k.fingerprint == "":
			ps = append(ps, fmt.Sprintf("key %s is gone", name))
		case s == keyNone && k.fingerprint != "":
			ps = append(ps, fmt.Sprintf("key %s is live", name))
		}
		if k.fingerprint == "" {
			continue
		}
		keep := func(*crashGrain) bool { return true }
		if u, ok := strings.CutPrefix(name, "user:"); ok {
			keep = func(x *crashGrain) bool { return x.User == u }
		} else if p, ok := strings.CutPrefix(name, "scope:"); ok {
			keep = func(x *crashGrain) bool { return inScope(x.Scope, p) }
		}
		if n := len(m.alive(keep)); int64(n) != k.count {
			ps = append(ps, fmt.Sprintf("an erasure of key %s would count %d grains, the model holds %d", name, k.count, n))
		}
	}
	wps, rest, _ := matchLeaves(obs.leaves, m.Wants)
	ps = append(ps, wps...)
	var refused *proofs.Leaf
	ps = append(ps, m.requestProblems(obs)...)
	if refusal && len(rest) == 1 && rest[0].Type == proofs.EventErasureRefused && rest[0].Request == "" {
		refused, rest = rest[0], nil
	}
	for _, l := range rest {
		b, _ := l.Marshal()
		ps = append(ps, fmt.Sprintf("no call explains the leaf %s", b))
	}
	return ps, refused
}

// checkKeyEvents checks the data keys against the key.create and key.erase
// events: each live key was created by exactly one event, and every key an
// event created is live or was destroyed by an erasure's event.
// checkCovered checks that the latest signed checkpoint covers every leaf
// of obs; a store killed before its first write has none.
func checkCovered(ctx context.Context, db *lethe.DB, obs *crashObs, fail func(string, ...any)) {
	if len(obs.leaves) == 0 {
		return
	}
	note, err := db.Checkpoint(ctx)
	if err != nil {
		fail("Checkpoint: %v", err)
	}
	cp, err := proofs.OpenCheckpoint(note, db.AuditKey(), "")
	if err != nil {
		fail("checkpoint: %v", err)
	}
	if cp.Size != uint64(len(obs.leaves)) {
		fail("the checkpoint covers %d leaves, the log holds %d", cp.Size, len(obs.leaves))
	}
}

func checkKeyEvents(obs *crashObs, fail func(string, ...any)) {
	created, destroyed := map[string]int{}, map[string]bool{}
	for _, l := range obs.leaves {
		switch l.Type {
		case proofs.EventKeyCreate:
			for _, fp := range l.KeyFingerprints {
				created[fp]++
			}
		case proofs.EventKeyErase:
			for _, fp := range l.KeyFingerprints {
				destroyed[fp] = true
			}
		}
	}
	live := map[string]bool{}
	for name, k := range obs.keys {
		if k.fingerprint == "" {
			continue
		}
		live[k.fingerprint] = true
		if created[k.fingerprint] != 1 || destroyed[k.fingerprint] {
			fail("live key %s (%s) has %d key.create events, destroyed: %t", name, k.fingerprint[:8], created[k.fingerprint], destroyed[k.fingerprint])
		}
	}
	for fp, n := range created {
		if n != 1 || !live[fp] && !destroyed[fp] {
			fail("key %s has %d key.create events and is neither live nor destroyed by a key.erase event", fp[:8], n)
		}
	}
}

// checkReads reads the memory in every way against the resolved model:
// History of every grain, Recall by each subject, user and scope, the
// proof of every event a call reported, and a subject export of each user.
func (r *crashRun) checkReads(ctx context.Context, db *lethe.DB, m *crashModel, obs *crashObs, fail func(string, ...any)) {
	for _, h := range m.Order {
		x := m.Grains[h]
		hist, err := db.History(ctx, crashMemory, h)
		if !x.Alive {
			if c := lethe.ErrorCode(err); c != "not_found" && c != "erased" {
				fail("History(%s) of a forgotten or erased grain: %v", h[:8], err)
			}
			continue
		}
		if err != nil {
			fail("History(%s): %v", h[:8], err)
		}
		var got []string
		for _, g := range hist {
			s := g.Hash[:8]
			if g.Erased {
				s += "(erased)"
			}
			got = append(got, s)
		}
		if want := m.history(x); !slices.Equal(got, want) {
			fail("History(%s) = %v, want %v", h[:8], got, want)
		}
	}
	type query struct {
		q    lethe.Query
		keep func(*crashGrain) bool
	}
	var queries []query
	for _, s := range crashSubjects {
		queries = append(queries, query{lethe.Query{Subject: s}, func(x *crashGrain) bool { return x.Subject == s }})
	}
	for _, u := range crashUsers[2:] {
		queries = append(queries, query{lethe.Query{UserID: u}, func(x *crashGrain) bool { return x.User == u }})
	}
	for _, p := range crashScopes[1:] {
		queries = append(queries, query{lethe.Query{Scope: p}, func(x *crashGrain) bool { return inScope(x.Scope, p) }})
	}
	for _, q := range queries {
		var got []string
		for _, g := range recallAll(ctx, q.q, db, fail) {
			got = append(got, g.Hash)
		}
		want := m.alive(q.keep)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			fail("Recall(%+v) = %v, want %v", q.q, short8(got), short8(want))
		}
	}
	for _, w := range m.Wants {
		if w.ID == "" {
			continue
		}
		p, err := db.ProofByEvent(ctx, w.ID)
		if err != nil {
			fail("ProofByEvent(%s) of call %s: %v", w.ID, w.Call, err)
		}
		if _, err := proofs.Verify(p, proofs.VerifyOptions{LogKey: db.AuditKey()}); err != nil {
			fail("proof of event %s of call %s: %v", w.ID, w.Call, err)
		}
	}
	checkCovered(ctx, db, obs, fail)
	for _, u := range crashUsers[2:] {
		res, err := db.ExportUser(ctx, crashMemory, u, r.id.Recipient().String())
		if err != nil {
			fail("ExportUser(%s): %v", u, err)
		}
		m.Wants = append(m.Wants, leafWant{ID: res.EventID, Type: proofs.EventSubjectExport, Call: "export"})
		rd, err := age.Decrypt(armor.NewReader(bytes.NewReader(res.Data)), r.id)
		if err != nil {
			fail("decrypt export: %v", err)
		}
		var doc lethe.Export
		if err := json.NewDecoder(rd).Decode(&doc); err != nil {
			fail("export: %v", err)
		}
		var got []string
		for _, g := range doc.Grains {
			got = append(got, g.Hash)
		}
		want := m.alive(func(x *crashGrain) bool { return x.User == u })
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			fail("export of %s holds %v, want %v", u, short8(got), short8(want))
		}
	}
}

// history is the model of History: newest first; an erased version is
// shown and ends the walk (as machine.history).
func (m *crashModel) history(x *crashGrain) []string {
	var out []string
	head := x
	for head.By != "" {
		n, ok := m.Grains[head.By]
		if !ok || !n.Alive {
			out = append(out, head.By[:8]+"(erased)")
			break
		}
		head = n
	}
	for cur := head; ; {
		out = append(out, cur.Hash[:8])
		if cur.Supersedes == "" {
			break
		}
		p, ok := m.Grains[cur.Supersedes]
		if !ok || !p.Alive {
			out = append(out, cur.Supersedes[:8]+"(erased)")
			break
		}
		cur = p
	}
	return out
}

// checkCleaner waits for the background cleaner of the reopened store to
// delete every row an erasure made unreadable: each grain the model holds
// dead then answers not_found.
func (r *crashRun) checkCleaner(ctx context.Context, db *lethe.DB, m *crashModel, fail func(string, ...any)) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var erased []string
		for _, h := range m.Order {
			if m.Grains[h].Alive {
				continue
			}
			_, err := db.Get(ctx, crashMemory, h)
			switch lethe.ErrorCode(err) {
			case "not_found":
			case "erased":
				erased = append(erased, h)
			default:
				fail("Get(%s) of a forgotten or erased grain: %v", h[:8], err)
			}
		}
		if len(erased) == 0 {
			return
		}
		if time.Now().After(deadline) {
			fail("the cleaner left %d erased rows: %v", len(erased), short8(erased))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
