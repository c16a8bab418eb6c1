package api_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/proofs"
)

// reader is a token of the isolation test with the leaves it must read.
type reader struct {
	name, secret string
	route        string // "proof" (dpo) or "entries" (auditor)
	sees         func(l *proofs.Leaf) bool
}

// TestAuditIsolation walks every leaf of the audit log with tokens of
// several reaches, over real HTTP: a token limited to some memories (or
// scopes) reads the leaves its rule allows, and for any other leaf gets,
// by index and by event id, byte for byte what an index beyond the log or
// an event id naming nothing gets (the probe's token: dpo,reader for
// memory support, scope acme/prod, read memory hr-secret's leaves). Tokens
// for every memory read every leaf. Entry bundles, which hold every
// memory's leaves, need such a token.
func TestAuditIsolation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newFixture(t, kind, nil)
		ctx := context.Background()
		admin := f.token("admin", []string{"*"})
		probe := f.token("dpo,reader", []string{"support"}, "acme/prod")
		probeTok, err := f.tokens.Lookup(ctx, probe)
		if err != nil {
			t.Fatal(err)
		}
		readers := []reader{
			{"admin", admin, "proof", func(*proofs.Leaf) bool { return true }},
			{"auditor *", f.token("auditor", []string{"*"}), "entries", func(*proofs.Leaf) bool { return true }},
			{"dpo support", f.token("dpo", []string{"support"}), "proof", func(l *proofs.Leaf) bool {
				return l.Memory == "" || l.Memory == "support"
			}},
			{"auditor support", f.token("auditor", []string{"support"}), "entries", func(l *proofs.Leaf) bool {
				return l.Memory == "" || l.Memory == "support"
			}},
			{"probe", probe, "proof", func(l *proofs.Leaf) bool {
				return l.Memory == "" || (l.Memory == "support" && l.Actor == probeTok.ID)
			}},
			{"auditor * acme/prod", f.token("auditor", []string{"*"}, "acme/prod"), "entries", func(l *proofs.Leaf) bool {
				return l.Memory == ""
			}},
		}

		// Another tenant's erasure, another token's in support, the probe's
		// own, and a KEK rotation (leaves that name no memory).
		forget := func(token, memory string, body any) lethe.ForgetResult {
			t.Helper()
			a := f.call(token, "POST", "/api/memories/"+memory+"/forget", body)
			f.want(a, 200, "")
			var res lethe.ForgetResult
			a.decode(t, &res)
			if res.Proof == nil {
				t.Fatalf("forget without a proof: %s", a.body)
			}
			return res
		}
		f.add(admin, "hr-secret", api.GrainInput{Type: "fact", Subject: alice, UserID: userU1})
		hr := forget(admin, "hr-secret", map[string]any{"user_id": userU1})
		f.add(admin, "support", api.GrainInput{Type: "fact", Subject: bob, UserID: userU2, Scope: "acme/dev"})
		other := forget(admin, "support", map[string]any{"user_id": userU2})
		h := f.add(admin, "support", api.GrainInput{Type: "fact", Subject: bob, Scope: "acme/prod"})
		own := forget(probe, "support", map[string]any{"blob_hash": h})
		rot, err := f.db.RotateKEK(ctx, lethe.RotateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rot.Trim == nil || rot.Trim.Proof == nil {
			t.Fatalf("rotation without the kek.trim proof: %+v", rot)
		}
		// Every event so far was committed before the kek.trim event, so
		// the checkpoint of its proof covers them all.
		size := rot.Trim.Proof.TreeSize

		// What a leaf that does not exist answers, by index and by event.
		beyond := size + 100
		unknown := strings.Repeat("0", 32)
		missing := map[string]answer{
			"proof":   f.call(admin, "GET", fmt.Sprintf("/api/audit/proof?index=%d", beyond), nil),
			"entries": f.call(admin, "GET", fmt.Sprintf("/api/audit/entries/%d", beyond), nil),
			"event":   f.call(admin, "GET", "/api/audit/proof?event="+unknown, nil),
		}
		for name, a := range missing {
			f.want(a, 404, "not_found")
			if name != "event" && a.body == nil {
				t.Fatalf("%s: empty answer", name)
			}
		}

		counts := map[string][2]int{}
		for i := range size {
			a := f.call(admin, "GET", fmt.Sprintf("/api/audit/entries/%d", i), nil)
			f.want(a, 200, "")
			var e lethe.AuditEntry
			a.decode(t, &e)
			l, err := proofs.ParseLeaf(e.Leaf)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range readers {
				path := fmt.Sprintf("/api/audit/entries/%d", i)
				if r.route == "proof" {
					path = fmt.Sprintf("/api/audit/proof?index=%d", i)
				}
				byIndex := f.call(r.secret, "GET", path, nil)
				byEvent := f.call(r.secret, "GET", "/api/audit/proof?event="+l.ID, nil)
				c := counts[r.name]
				if r.sees(l) {
					c[0]++
					if byIndex.status != 200 || (r.route == "proof" && byEvent.status != 200) {
						t.Errorf("%s, leaf %d (%s of memory %q): %d %s, %d %s; want it read", r.name, i, l.Type, l.Memory,
							byIndex.status, byIndex.body, byEvent.status, byEvent.body)
					}
				} else {
					c[1]++
					want := strings.ReplaceAll(string(missing[r.route].body), strconv.FormatUint(beyond, 10), strconv.FormatUint(i, 10))
					if byIndex.status != 404 || string(byIndex.body) != want {
						t.Errorf("%s, leaf %d (%s of memory %q) by index: %d %s; want what a missing index answers, %s",
							r.name, i, l.Type, l.Memory, byIndex.status, byIndex.body, want)
					}
					want = strings.ReplaceAll(string(missing["event"].body), unknown, l.ID)
					if r.route == "proof" && (byEvent.status != 404 || string(byEvent.body) != want) {
						t.Errorf("%s, leaf %d (%s of memory %q) by event: %d %s; want what an unknown event answers, %s",
							r.name, i, l.Type, l.Memory, byEvent.status, byEvent.body, want)
					}
				}
				counts[r.name] = c
			}
		}
		t.Logf("leaves read and hidden: %v", counts)

		// The events named above, for the probe's token.
		for _, c := range []struct {
			name   string
			res    lethe.ForgetResult
			status int
		}{{"another memory's", hr, 404}, {"another token's in its memory", other, 404}, {"its own", own, 200}} {
			f.want(f.call(probe, "GET", "/api/audit/proof?event="+c.res.EventID, nil), c.status, "")
			f.want(f.call(probe, "GET", fmt.Sprintf("/api/audit/proof?index=%d", c.res.Proof.LeafIndex), nil), c.status, "")
		}
		f.want(f.call(readers[2].secret, "GET", "/api/audit/proof?event="+other.EventID, nil), 200, "")
		f.want(f.call(readers[2].secret, "GET", "/api/audit/proof?event="+hr.EventID, nil), 404, "not_found")

		// Routes without leaves: any auditor.
		for _, path := range []string{"/api/audit/key", "/api/audit/checkpoint", "/api/audit/log/checkpoint",
			fmt.Sprintf("/api/audit/consistency?from=1&to=%d", size), "/api/audit/log/" + tilePath("0", size)} {
			f.want(f.call(readers[3].secret, "GET", path, nil), 200, "")
		}
		// Entry bundles: every leaf, so a token that reads every leaf.
		bundle := "/api/audit/log/" + tilePath("entries", size)
		for _, r := range readers {
			a := f.call(r.secret, "GET", bundle, nil)
			switch r.name {
			case "admin", "auditor *":
				f.want(a, 200, "")
			default:
				f.want(a, 403, "forbidden")
			}
		}
	})
}

// TestAuditIsolationPending: an event no signed checkpoint covers yet (the
// log's only witness never answers) is 202 pending for a token that may
// read it and, for one limited to another memory, what an unknown event
// id answers.
func TestAuditIsolationPending(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	forEachBackend(t, func(t *testing.T, kind backendKind) {
		f := newStoreFixture(t, kind, func(c *lethe.Config) {
			c.ProofWait, c.WitnessThreshold = 100*time.Millisecond, 1
			c.Witnesses = []lethe.WitnessConfig{{URL: down.URL, Key: witnessKey("witness.test/down"), Timeout: time.Second}}
		}, nil, nil)
		admin := f.token("admin", []string{"*"})
		f.add(admin, "hr-secret", api.GrainInput{Type: "fact", Subject: alice, UserID: userU1})
		a := f.call(admin, "POST", "/api/memories/hr-secret/forget-user", map[string]any{"user_id": userU1})
		f.want(a, 202, "")
		var e lethe.Erasure
		a.decode(t, &e)
		if !e.Pending || e.EventID == "" {
			t.Fatalf("erasure with the witness down: %s", a.body)
		}
		f.want(f.call(admin, "GET", "/api/audit/proof?event="+e.EventID, nil), 202, "pending")
		f.want(f.call(f.token("dpo", []string{"hr-secret"}), "GET", "/api/audit/proof?event="+e.EventID, nil), 202, "pending")
		other := f.token("dpo,reader", []string{"support"})
		unknown := strings.Repeat("0", 32)
		hidden := f.call(other, "GET", "/api/audit/proof?event="+e.EventID, nil)
		missing := f.call(other, "GET", "/api/audit/proof?event="+unknown, nil)
		if hidden.status != 404 || string(hidden.body) != strings.ReplaceAll(string(missing.body), unknown, e.EventID) {
			t.Errorf("another memory's pending event: %d %s; an unknown one: %d %s", hidden.status, hidden.body, missing.status, missing.body)
		}
	})
}

// tilePath is the tlog-tiles path of the first tile of kind ("entries" or
// a level) within a tree of size leaves.
func tilePath(kind string, size uint64) string {
	if size >= 256 {
		return "tile/" + kind + "/000"
	}
	return fmt.Sprintf("tile/%s/000.p/%d", kind, size)
}

// witnessKey is a cosignature/v1 verifier key named name
// (c2sp.org/tlog-cosignature) of a witness that never signs.
func witnessKey(name string) string {
	priv := ed25519.NewKeyFromSeed(make([]byte, 32))
	key := append([]byte{0x04}, priv.Public().(ed25519.PublicKey)...)
	h := sha256.Sum256(append([]byte(name+"\n"), key...))
	return fmt.Sprintf("%s+%x+%s", name, h[:4], base64.StdEncoding.EncodeToString(key))
}
