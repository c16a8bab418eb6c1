package lethe_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"filippo.io/age/armor"
	"pgregory.net/rapid"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/testenv"
	"github.com/lethe-io/lethe/proofs"
)

// ageOpen decrypts an armored age file with the stock age binary and the
// identity id, as a recipient of an export would.
func ageOpen(t testing.TB, data []byte, id *age.X25519Identity) []byte {
	t.Helper()
	bin := testenv.Age(t)
	dir := t.TempDir()
	idFile, in := filepath.Join(dir, "key.txt"), filepath.Join(dir, "export.age")
	if err := os.WriteFile(idFile, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "-d", "-i", idFile, in)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("age -d: %v: %s", err, stderr.String())
	}
	return out
}

// exportHistory exports req to a fresh identity, opens it with the age
// binary and verifies it; it returns the verified export and the file.
func exportHistory(t *testing.T, db *lethe.DB, req lethe.HistoryRequest) (*proofs.HistoryExport, []byte, *lethe.HistoryExport) {
	t.Helper()
	return exportHistoryWith(t, db, req, ageOpen)
}

// ageOpenLib decrypts with the age library: the model test's thousands of
// exports would spend their time starting the binary.
func ageOpenLib(t testing.TB, data []byte, id *age.X25519Identity) []byte {
	t.Helper()
	r, err := age.Decrypt(armor.NewReader(bytes.NewReader(data)), id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func exportHistoryWith(t *testing.T, db *lethe.DB, req lethe.HistoryRequest, open func(testing.TB, []byte, *age.X25519Identity) []byte) (*proofs.HistoryExport, []byte, *lethe.HistoryExport) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	req.Recipient = id.Recipient().String()
	before := auditLen(t, db)
	res, err := db.ExportHistory(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(res.Data, []byte("-----BEGIN AGE ENCRYPTED FILE-----")) {
		t.Fatal("the export is not an armored age file")
	}
	plain := open(t, res.Data, id)
	v, err := proofs.VerifyHistoryExport(plain, proofs.VerifyOptions{LogKey: db.AuditKey()})
	if err != nil {
		t.Fatalf("verify export: %v", err)
	}
	if v.Versions != res.Versions || v.Events != res.Events || len(v.Export.Chains) != res.Chains {
		t.Errorf("export holds %d chains %d versions %d events, result says %d %d %d",
			len(v.Export.Chains), v.Versions, v.Events, res.Chains, res.Versions, res.Events)
	}
	checkHistoryEvent(t, db, before, res, req, v.Export)
	return v.Export, plain, res
}

// checkHistoryEvent checks the history.export event the export committed.
func checkHistoryEvent(t *testing.T, db *lethe.DB, before int, res *lethe.HistoryExport, req lethe.HistoryRequest, x *proofs.HistoryExport) {
	t.Helper()
	leaves, err := db.AuditLeaves(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ev *proofs.Leaf
	for _, b := range leaves[before:] {
		l, err := proofs.ParseLeaf(b)
		if err != nil {
			t.Fatal(err)
		}
		if l.ID == res.EventID {
			ev = l
		}
		if req.Subject != "" && strings.Contains(string(b), req.Subject) || strings.Contains(string(b), req.Recipient) {
			t.Errorf("an audit leaf names the subject or the recipient: %s", b)
		}
	}
	if ev == nil || ev.Type != proofs.EventHistoryExport {
		t.Fatalf("no history.export event %s in the log", res.EventID)
	}
	var hashes []string
	for _, c := range x.Chains {
		for _, v := range c.Versions {
			hashes = append(hashes, v.Hash)
		}
	}
	if ev.GrainCount() != uint64(len(hashes)) || len(ev.Hashes) != len(hashes) || !containsAll(ev.Hashes, hashes) ||
		len(ev.KeyFingerprints) != 1 || ev.KeyFingerprints[0] != lethe.RecipientFingerprint(req.Recipient) {
		t.Errorf("history.export event %+v: want the %d version hashes and the recipient's fingerprint", ev, len(hashes))
	}
	if (req.Subject != "") != (ev.Commitment != "") {
		t.Errorf("history.export commitment %q for subject %q", ev.Commitment, req.Subject)
	}
}

func versionHashes(c proofs.HistoryChain) []string {
	var out []string
	for _, v := range c.Versions {
		out = append(out, v.Hash)
	}
	return out
}

func TestExportHistory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		v1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "alice", Relation: "lives_in", Object: "paris", UserID: "u-alice"})
		v2, err := db.Supersede(lethe.WithActor(ctx, "tok-writer-1"), v1, lethe.Grain{Type: "fact", Object: "lyon"})
		if err != nil {
			t.Fatal(err)
		}
		v3, err := db.Supersede(lethe.WithActor(ctx, "tok-writer-2"), v2, lethe.Grain{Type: "fact", Object: "nice"})
		if err != nil {
			t.Fatal(err)
		}
		other := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "alice", Relation: "likes", Object: "tea"})
		mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "bob", Relation: "likes", Object: "coffee"})

		// By any hash of the chain: the whole chain, oldest first.
		x, plain, _ := exportHistory(t, db, lethe.HistoryRequest{Hash: v2})
		if len(x.Chains) != 1 || !slices_equal(versionHashes(x.Chains[0]), []string{v1, v2, v3}) {
			t.Fatalf("export of %s: chains %+v, want [%s %s %s]", v2, x.Chains, v1, v2, v3)
		}
		c := x.Chains[0]
		wantStates := []string{proofs.VersionSuperseded, proofs.VersionSuperseded, proofs.VersionCurrent}
		wantActors := []string{"tok-writer-1", "tok-writer-2", ""}
		for i, v := range c.Versions {
			if v.State != wantStates[i] || v.SupersededByActor != wantActors[i] || (v.SupersededAt == nil) != (i == 2) {
				t.Errorf("version %d: state %s actor %q at %v", i, v.State, v.SupersededByActor, v.SupersededAt)
			}
			var g lethe.Grain
			if err := json.Unmarshal(v.Fields, &g); err != nil || g.Hash != v.Hash || g.Subject != "alice" {
				t.Errorf("version %d fields %s", i, v.Fields)
			}
		}
		if len(c.Events) != 2 || c.Events[0].Type != proofs.EventGrainSupersede {
			t.Errorf("events %+v, want the two supersede events", c.Events)
		}
		if !strings.Contains(string(plain), `"object": "nice"`) {
			t.Error("the export does not hold the newest version's object")
		}

		// By subject: every chain with a version about alice, not bob's.
		x, _, res := exportHistory(t, db, lethe.HistoryRequest{Subject: "alice"})
		if len(x.Chains) != 2 || res.SubjectNonce == "" || x.Selector != "subject" {
			t.Fatalf("export of subject alice: %d chains, nonce %q", len(x.Chains), res.SubjectNonce)
		}
		var all []string
		for _, c := range x.Chains {
			all = append(all, versionHashes(c)...)
		}
		if !containsAll(all, []string{v1, v2, v3, other}) || len(all) != 4 {
			t.Errorf("subject export holds %v", all)
		}

		// Withheld fields: the shape and proofs, no content.
		x, plain, _ = exportHistory(t, db, lethe.HistoryRequest{Hash: v1, WithholdFields: true})
		if !x.FieldsWithheld || bytes.Contains(plain, []byte("alice")) || bytes.Contains(plain, []byte("paris")) {
			t.Error("an export without fields holds grain content")
		}

		// Forgotten: the rows are gone; hashes, states and events stay.
		if _, err := db.Forget(lethe.WithActor(ctx, "tok-dpo"), lethe.Selector{Hash: v3}); err != nil {
			t.Fatal(err)
		}
		x, plain, _ = exportHistory(t, db, lethe.HistoryRequest{Hash: v1})
		if len(x.Chains) != 1 || !slices_equal(versionHashes(x.Chains[0]), []string{v1, v2, v3}) {
			t.Fatalf("export of a forgotten chain: %+v", x.Chains)
		}
		for i, v := range x.Chains[0].Versions {
			if v.State != proofs.VersionForgotten || v.Fields != nil {
				t.Errorf("forgotten version %d: state %s fields %s", i, v.State, v.Fields)
			}
		}
		if evs := x.Chains[0].Events; len(evs) != 3 || evs[2].Type != proofs.EventGrainForget {
			t.Errorf("events of a forgotten chain: %+v", evs)
		}
		if bytes.Contains(plain, []byte("paris")) || bytes.Contains(plain, []byte("alice")) {
			t.Error("the export of a forgotten chain holds its content")
		}

		// Erased: the user's key destroyed; the versions are erased, with
		// the key.erase event while their rows remain.
		db.PauseCleaner()
		e1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "carol", Relation: "is", Object: "here", UserID: "u-carol"})
		e2, err := db.Supersede(ctx, e1, lethe.Grain{Type: "fact", Object: "there"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ForgetUser(ctx, "", "u-carol"); err != nil {
			t.Fatal(err)
		}
		x, _, _ = exportHistory(t, db, lethe.HistoryRequest{Hash: e1})
		if len(x.Chains) != 1 || !slices_equal(versionHashes(x.Chains[0]), []string{e1, e2}) {
			t.Fatalf("export of an erased chain: %+v", x.Chains)
		}
		for _, v := range x.Chains[0].Versions {
			if v.State != proofs.VersionErased || v.Fields != nil {
				t.Errorf("erased version: state %s fields %s", v.State, v.Fields)
			}
		}
		if evs := x.Chains[0].Events; len(evs) != 2 || evs[1].Type != proofs.EventKeyErase {
			t.Errorf("events of an erased chain: %+v", evs)
		}
		erasedBy := x.Chains[0].Versions[0].ErasedBy
		if len(erasedBy) != 1 || !slices_equal(x.Chains[0].Versions[1].ErasedBy, erasedBy) {
			t.Errorf("erased versions name the keys %v and %v, want the user's key", erasedBy, x.Chains[0].Versions[1].ErasedBy)
		}
		// Once the rows are cleaned up, the link the cleaner kept names the
		// same key: the versions stay erased, with the key.erase event.
		if _, err := db.PurgeErased(ctx); err != nil {
			t.Fatal(err)
		}
		x, _, _ = exportHistory(t, db, lethe.HistoryRequest{Hash: e2})
		if len(x.Chains) != 1 || !slices_equal(versionHashes(x.Chains[0]), []string{e1, e2}) ||
			x.Chains[0].Versions[0].State != proofs.VersionErased || len(x.Chains[0].Events) != 2 ||
			x.Chains[0].Events[1].Type != proofs.EventKeyErase {
			t.Fatalf("export of an erased, cleaned-up chain: %+v", x.Chains)
		}
		for i, v := range x.Chains[0].Versions {
			if !slices_equal(v.ErasedBy, erasedBy) {
				t.Errorf("cleaned-up version %d erased by %v, want %v", i, v.ErasedBy, erasedBy)
			}
		}
		// A single version, erased and cleaned up, is still found by its hash.
		lone := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "gus", Relation: "is", Object: "alone", UserID: "u-gus"})
		if _, err := db.ForgetUser(ctx, "", "u-gus"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.PurgeErased(ctx); err != nil {
			t.Fatal(err)
		}
		x, _, _ = exportHistory(t, db, lethe.HistoryRequest{Hash: lone})
		if len(x.Chains) != 1 || len(x.Chains[0].Versions) != 1 || x.Chains[0].Versions[0].State != proofs.VersionErased ||
			len(x.Chains[0].Events) != 1 || x.Chains[0].Events[0].Type != proofs.EventKeyErase || len(x.Chains[0].Versions[0].ErasedBy) != 1 {
			t.Fatalf("export of a lone erased, cleaned-up version: %+v", x.Chains)
		}

		// A successor erased (written for another user, whose key is then
		// destroyed) and the old version superseded again: the export
		// states both branches, and still verifies.
		f1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "erin", Relation: "is", Object: "a", UserID: "u-erin"})
		f2, err := db.Supersede(ctx, f1, lethe.Grain{Type: "fact", Object: "b", UserID: "u-other"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.ForgetUser(ctx, "", "u-other"); err != nil {
			t.Fatal(err)
		}
		f3, err := db.Supersede(lethe.WithActor(ctx, "tok-writer-3"), f1, lethe.Grain{Type: "fact", Object: "c"})
		if err != nil {
			t.Fatal(err)
		}
		x, _, _ = exportHistory(t, db, lethe.HistoryRequest{Hash: f3})
		if len(x.Chains) != 1 || !slices_equal(versionHashes(x.Chains[0]), []string{f1, f2, f3}) {
			t.Fatalf("export of a chain with an erased branch: %+v", x.Chains)
		}
		vs := x.Chains[0].Versions
		if vs[0].State != proofs.VersionSuperseded || vs[0].SupersededBy != f3 || vs[0].SupersededByActor != "tok-writer-3" ||
			vs[1].State != proofs.VersionErased || vs[1].Supersedes != f1 || vs[2].State != proofs.VersionCurrent {
			t.Errorf("versions of a chain with an erased branch: %+v", vs)
		}
		if got := x.Chains[0].Events; len(got) != 3 || got[1].Type != proofs.EventKeyErase {
			t.Errorf("events of a chain with an erased branch: %+v", got)
		}

		// A forget of more than 256 grains: its leaf carries their digest;
		// the export holds the full list under it, which the verifier
		// (above, after the age binary opened the file) checked.
		b1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "hal", Relation: "is", Object: "one"})
		b2, err := db.Supersede(ctx, b1, lethe.Grain{Type: "fact", Object: "two"})
		if err != nil {
			t.Fatal(err)
		}
		fill := make([]lethe.Grain, 300)
		for i := range fill {
			fill[i] = lethe.Grain{Type: "fact", Subject: "filler", Relation: "n", Object: fmt.Sprint(i)}
		}
		bulk, err := db.AddBatch(ctx, fill)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Forget(ctx, lethe.Selector{Hashes: append(bulk, b2)}); err != nil {
			t.Fatal(err)
		}
		x, _, _ = exportHistory(t, db, lethe.HistoryRequest{Hash: b1})
		if len(x.Chains) != 1 || !slices_equal(versionHashes(x.Chains[0]), []string{b1, b2}) ||
			x.Chains[0].Versions[0].State != proofs.VersionForgotten {
			t.Fatalf("export of a chain forgotten in bulk: %+v", x.Chains)
		}
		if evs := x.Chains[0].Events; len(evs) != 2 || evs[1].Type != proofs.EventGrainForget {
			t.Errorf("events of a chain forgotten in bulk: %+v", evs)
		}
		if len(x.HashLists) != 1 {
			t.Fatalf("hash lists %d, want the forget's", len(x.HashLists))
		}
		for d, l := range x.HashLists {
			if len(l) != 302 || !containsAll(l, append(bulk, b1, b2)) || d != proofs.HashesDigest(l) {
				t.Errorf("the forget's hash list has %d hashes", len(l))
			}
		}

		// Nothing matches: no_chain, and no audit event.
		id, _ := age.GenerateX25519Identity()
		before := auditLen(t, db)
		_, err = db.ExportHistory(ctx, lethe.HistoryRequest{Hash: strings.Repeat("ab", 32), Recipient: id.Recipient().String()})
		wantCode(t, err, lethe.CodeNoChain)
		_, err = db.ExportHistory(ctx, lethe.HistoryRequest{Subject: "nobody", Recipient: id.Recipient().String()})
		wantCode(t, err, lethe.CodeNoChain)
		// Both selectors is a malformed request, not an empty one.
		_, err = db.ExportHistory(ctx, lethe.HistoryRequest{Hash: v1, Subject: "alice", Recipient: id.Recipient().String()})
		wantCode(t, err, lethe.CodeInvalidArgument)
		for _, req := range []lethe.HistoryRequest{
			{Recipient: id.Recipient().String()},
			{Hash: v1, Subject: "alice", Recipient: id.Recipient().String()},
			{Hash: "nothex", Recipient: id.Recipient().String()},
			{Hash: v1, Recipient: "age1nope"},
			{Memory: "Bad Memory", Hash: v1, Recipient: id.Recipient().String()},
		} {
			if _, err := db.ExportHistory(ctx, req); err == nil || lethe.ErrorCode(err) == lethe.CodeInternal {
				t.Errorf("ExportHistory(%+v) = %v, want a client error", req, err)
			}
		}
		if n := auditLen(t, db); n != before {
			t.Errorf("refused exports wrote %d audit events", n-before)
		}
	})
}

func slices_equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestVerifyExportDetectsTampering changes a real export's decrypted file
// in each way an attacker could and checks that verification names it.
func TestVerifyExportDetectsTampering(t *testing.T) {
	db := openDB(t, lethe.Config{DataDir: t.TempDir()})
	ctx := context.Background()
	v1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "dave", Relation: "owns", Object: "a bike"})
	v2, err := db.Supersede(ctx, v1, lethe.Grain{Type: "fact", Object: "a car"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Supersede(ctx, v2, lethe.Grain{Type: "fact", Object: "a boat"}); err != nil {
		t.Fatal(err)
	}
	_, plain, _ := exportHistory(t, db, lethe.HistoryRequest{Hash: v1})
	opts := proofs.VerifyOptions{LogKey: db.AuditKey()}

	// edit decodes the file, lets f change the export, and encodes it again
	// with the original signature.
	edit := func(f func(x *proofs.HistoryExport)) []byte {
		var file map[string]json.RawMessage
		if err := json.Unmarshal(plain, &file); err != nil {
			t.Fatal(err)
		}
		var x proofs.HistoryExport
		if err := json.Unmarshal(file["export"], &x); err != nil {
			t.Fatal(err)
		}
		f(&x)
		b, _ := json.Marshal(x)
		file["export"] = b
		out, _ := json.Marshal(file)
		return out
	}
	otherSkey, otherVkey, err := proofs.GenerateKey(strings.SplitN(db.AuditKey(), "+", 2)[0])
	if err != nil {
		t.Fatal(err)
	}
	_ = otherSkey
	tests := []struct {
		name string
		file []byte
		opts proofs.VerifyOptions
		want proofs.Check
	}{
		{"changed field", edit(func(x *proofs.HistoryExport) {
			x.Chains[0].Versions[1].Fields = bytes.Replace(x.Chains[0].Versions[1].Fields, []byte("a car"), []byte("a van"), 1)
		}), opts, proofs.CheckExportSignature},
		{"changed time", edit(func(x *proofs.HistoryExport) { x.ExportedAt = x.ExportedAt.Add(time.Hour) }), opts, proofs.CheckExportSignature},
		{"dropped version", edit(func(x *proofs.HistoryExport) {
			c := &x.Chains[0]
			c.Versions = append(c.Versions[:1], c.Versions[2:]...)
		}), opts, proofs.CheckChain},
		{"dropped last version", edit(func(x *proofs.HistoryExport) {
			c := &x.Chains[0]
			c.Versions = c.Versions[:2]
		}), opts, proofs.CheckChain},
		{"dropped event", edit(func(x *proofs.HistoryExport) { x.Chains[0].Events = x.Chains[0].Events[1:] }), opts, proofs.CheckChain},
		{"state changed", edit(func(x *proofs.HistoryExport) { x.Chains[0].Versions[0].State = proofs.VersionForgotten }), opts, proofs.CheckChain},
		{"actor changed", edit(func(x *proofs.HistoryExport) { x.Chains[0].Versions[0].SupersededByActor = "tok-x" }), opts, proofs.CheckChain},
		{"wrong proof", edit(func(x *proofs.HistoryExport) {
			p := x.Chains[0].Events[0].Proof
			if len(p.Inclusion) == 0 {
				p.Inclusion = [][]byte{make([]byte, 32)}
			} else {
				p.Inclusion[0][0] ^= 1
			}
		}), opts, proofs.CheckInclusion},
		{"swapped leaf", edit(func(x *proofs.HistoryExport) {
			evs := x.Chains[0].Events
			evs[0].Proof, evs[1].Proof = evs[1].Proof, evs[0].Proof
		}), opts, proofs.CheckChain},
		{"wrong log key", plain, proofs.VerifyOptions{LogKey: otherVkey}, proofs.CheckCheckpointSignature},
		{"not an export", []byte(`{"format":"lethe.proof/v1"}`), opts, proofs.CheckFormat},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := proofs.VerifyHistoryExport(tc.file, tc.opts)
			if got := proofs.FailedCheck(err); got != tc.want {
				t.Errorf("check %q (%v), want %q", got, err, tc.want)
			}
		})
	}
	if _, err := proofs.VerifyHistoryExport(plain, opts); err != nil {
		t.Errorf("the untouched export: %v", err)
	}
	var he *proofs.HistoryEventError
	_, err = proofs.VerifyHistoryExport(tests[7].file, opts)
	if !errors.As(err, &he) || he.Event != 0 {
		t.Errorf("a wrong proof is not a HistoryEventError naming event 0: %v", err)
	}
}

// chainModel is the model of one chain: its hashes in order, the state of
// the chain, and whether its rows were cleaned up after an erasure.
type chainModel struct {
	hashes   []string
	user     string
	state    string // "" (live), forgotten or erased
	cleaned  bool
	erasedBy string // the fingerprint of the key whose erasure erased it
	bulk     bool   // forgotten by a bulk event (more than 256 hashes)
}

// TestExportHistoryModel runs random add, supersede, forget, erase and
// cleanup sequences on chains of a fresh memory (shared users, so one
// erasure reaches several chains, and memory erasures) and bulk forgets of
// more than 256 hashes, and checks that each chain's export, from any of
// its hashes, verifies and equals the model: the versions in order, their
// states, the key each erased version names (before and after the cleaner
// deleted its row), and a verifiable event for each supersede, forget and
// erasure (a bulk forget with its hash list).
func TestExportHistoryModel(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			db := b.open(t)
			db.PauseCleaner()
			ctx := context.Background()
			run := 0
			rapid.Check(t, func(rt *rapid.T) {
				run++
				memory := fmt.Sprintf("model-%d", run)
				users := []string{"u1", "u2", ""}
				var chains []*chainModel
				erasedMemory := false // its key destroyed: adds fail from then on
				steps := rapid.IntRange(1, 8).Draw(rt, "steps")
				for i := 0; i < steps; i++ {
					switch op := rapid.IntRange(0, 6).Draw(rt, "op"); {
					case op == 0 || len(chains) == 0:
						if erasedMemory {
							continue
						}
						u := rapid.SampledFrom(users).Draw(rt, "user")
						h, err := db.Add(ctx, lethe.Grain{Memory: memory, Type: "fact", Subject: "s", Relation: "r", Object: fmt.Sprintf("o%d", i), UserID: u})
						if err != nil {
							rt.Fatal(err)
						}
						chains = append(chains, &chainModel{hashes: []string{h}, user: u})
					case op == 1:
						c := rapid.SampledFrom(chains).Draw(rt, "chain")
						if c.state != "" || erasedMemory {
							continue
						}
						h, err := db.Supersede(ctx, c.hashes[len(c.hashes)-1], lethe.Grain{Memory: memory, Type: "fact", Object: fmt.Sprintf("o%d", i)})
						if err != nil {
							rt.Fatal(err)
						}
						c.hashes = append(c.hashes, h)
					case op == 2:
						c := rapid.SampledFrom(chains).Draw(rt, "chain")
						if c.state != "" {
							continue
						}
						h := rapid.SampledFrom(c.hashes).Draw(rt, "hash")
						if _, err := db.Forget(ctx, lethe.Selector{Memory: memory, Hash: h}); err != nil {
							rt.Fatal(err)
						}
						c.state = proofs.VersionForgotten
					case op == 3 || op == 5:
						// A user's key, or (op 5) the memory's key: every
						// live chain of the memory.
						var er *lethe.Erasure
						var err error
						u := rapid.SampledFrom(users[:2]).Draw(rt, "erase")
						if op == 5 {
							er, err = db.EraseMemory(ctx, memory)
						} else {
							er, err = db.ForgetUser(ctx, memory, u)
						}
						if lethe.ErrorCode(err) == lethe.CodeNotFound {
							continue // no live key: nothing changes
						}
						if err != nil {
							rt.Fatal(err)
						}
						for _, c := range chains {
							// An erasure first finishes the memory's pending
							// cleanups: earlier erased rows go.
							c.cleaned = c.cleaned || c.state == proofs.VersionErased
							if (op == 5 || c.user == u) && c.state == "" {
								c.state, c.erasedBy = proofs.VersionErased, er.KeyFingerprint
							}
						}
						if op == 5 {
							erasedMemory = true
						}
					case op == 6:
						// A forget of more than 256 hashes: its leaf carries
						// a digest, and the export the full list.
						c := rapid.SampledFrom(chains).Draw(rt, "chain")
						if c.state != "" || erasedMemory {
							continue
						}
						fill := make([]lethe.Grain, 256) // with the chain's hash, one past a leaf's 256
						for k := range fill {
							fill[k] = lethe.Grain{Memory: memory, Type: "fact", Subject: "filler", Relation: "r", Object: fmt.Sprintf("f%d-%d", i, k)}
						}
						hs, err := db.AddBatch(ctx, fill)
						if err != nil {
							rt.Fatal(err)
						}
						h := rapid.SampledFrom(c.hashes).Draw(rt, "hash")
						if _, err := db.Forget(ctx, lethe.Selector{Memory: memory, Hashes: append(hs, h)}); err != nil {
							rt.Fatal(err)
						}
						c.state, c.bulk = proofs.VersionForgotten, true
					case op == 4:
						if _, err := db.PurgeErased(ctx); err != nil {
							rt.Fatal(err)
						}
						for _, c := range chains {
							c.cleaned = c.cleaned || c.state == proofs.VersionErased
						}
					}
				}
				// Export up to three chains (each export waits for a signed
				// checkpoint; the machine is shared).
				if len(chains) > 3 {
					chains = rapid.Permutation(chains).Draw(rt, "exported")[:3]
				}
				for _, c := range chains {
					h := rapid.SampledFrom(c.hashes).Draw(rt, "export")
					x, _, _ := exportHistoryWith(t, db, lethe.HistoryRequest{Memory: memory, Hash: h}, ageOpenLib)
					if len(x.Chains) != 1 {
						rt.Fatalf("export of %s: %d chains", h, len(x.Chains))
					}
					got := x.Chains[0]
					if !slices_equal(versionHashes(got), c.hashes) {
						rt.Fatalf("export of %s: versions %v, model %v", h, versionHashes(got), c.hashes)
					}
					for i, v := range got.Versions {
						want := c.state
						if want == "" {
							want = proofs.VersionSuperseded
							if i == len(got.Versions)-1 {
								want = proofs.VersionCurrent
							}
						}
						if v.State != want {
							rt.Fatalf("version %d of %v: state %s, model %s", i, c.hashes, v.State, want)
						}
						// Each erased version names the erasure's key, whether
						// or not the cleaner has deleted its row (while the row
						// remains, a memory erasure's also names the chain's
						// other keys it destroyed; the verifier checked that
						// the chain's key.erase event names them all).
						if wantBy := c.erasedBy; v.State == proofs.VersionErased && !slices.Contains(v.ErasedBy, wantBy) {
							rt.Fatalf("version %d of %v (cleaned %v): erased by %v, model %s", i, c.hashes, c.cleaned, v.ErasedBy, wantBy)
						}
					}
					// The supersedes, and the forget or the key.erase event.
					wantEvents := len(c.hashes) - 1
					if c.state != "" {
						wantEvents++
					}
					if len(got.Events) != wantEvents {
						rt.Fatalf("chain %v (%s, cleaned %v): %d events, model %d", c.hashes, c.state, c.cleaned, len(got.Events), wantEvents)
					}
					var last proofs.HistoryEvent
					if n := len(got.Events); n > 0 {
						last = got.Events[n-1]
					}
					switch {
					case c.state == "":
					case c.state == proofs.VersionErased && last.Type != proofs.EventKeyErase,
						c.state == proofs.VersionForgotten && last.Type != proofs.EventGrainForget:
						rt.Fatalf("chain %v (%s): last event %s", c.hashes, c.state, last.Type)
					case c.state == proofs.VersionForgotten && (len(x.HashLists) == 1) != c.bulk:
						rt.Fatalf("chain %v forgotten (bulk %v): %d hash lists", c.hashes, c.bulk, len(x.HashLists))
					}
				}
			})
		})
	}
}

// TestExportHistoryTrillian exports a forgotten chain with Trillian as the
// audit log: the proofs come from Trillian and verify the same way.
func TestExportHistoryTrillian(t *testing.T) {
	db := trillianDB(t, filepath.Join(t.TempDir(), "audit.key"))
	ctx := context.Background()
	v1 := mustAdd(t, db, lethe.Grain{Type: "fact", Subject: "frank", Relation: "drives", Object: "a bus"})
	v2, err := db.Supersede(ctx, v1, lethe.Grain{Type: "fact", Object: "a tram"})
	if err != nil {
		t.Fatal(err)
	}
	x, _, _ := exportHistory(t, db, lethe.HistoryRequest{Hash: v1})
	if len(x.Chains) != 1 || !slices_equal(versionHashes(x.Chains[0]), []string{v1, v2}) || len(x.Chains[0].Events) != 1 {
		t.Fatalf("export with Trillian: %+v", x.Chains)
	}
	if _, err := db.Forget(ctx, lethe.Selector{Hash: v2}); err != nil {
		t.Fatal(err)
	}
	x, _, _ = exportHistory(t, db, lethe.HistoryRequest{Hash: v2})
	if len(x.Chains) != 1 || len(x.Chains[0].Events) != 2 || x.Chains[0].Versions[1].State != proofs.VersionForgotten {
		t.Fatalf("export of a forgotten chain with Trillian: %+v", x.Chains)
	}
}

// BenchmarkExportHistory times the export of one 10-version chain
// (sealed, encrypted, audited) in a memory that also holds `others`
// unrelated supersede events, beside ExportUser of the same ten grains in
// the same run: the history export reads every chain event of the memory
// and proves each of the chain's events.
func BenchmarkExportHistory(b *testing.B) {
	ctx := context.Background()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		b.Fatal(err)
	}
	rcpt := id.Recipient().String()
	for _, c := range []struct {
		others int
		memory string // of the other events
	}{{0, ""}, {1000, ""}, {1000, "elsewhere"}} {
		others := c.others
		db := openBench(b, lethe.Config{DataDir: b.TempDir()})
		h, err := db.Add(ctx, lethe.Grain{Type: "fact", Subject: "bench", Relation: "v", Object: "0", UserID: "bench-user"})
		if err != nil {
			b.Fatal(err)
		}
		first := h
		for i := 1; i < 10; i++ {
			if h, err = db.Supersede(ctx, h, lethe.Grain{Type: "fact", Object: fmt.Sprint(i)}); err != nil {
				b.Fatal(err)
			}
		}
		o, err := db.Add(ctx, lethe.Grain{Memory: c.memory, Type: "fact", Subject: "other", Relation: "v", Object: "0"})
		if err != nil {
			b.Fatal(err)
		}
		for i := 1; i <= others; i++ {
			if o, err = db.Supersede(ctx, o, lethe.Grain{Memory: c.memory, Type: "fact", Object: fmt.Sprint(i)}); err != nil {
				b.Fatal(err)
			}
		}
		where := ""
		if c.memory != "" {
			where = "_in_" + c.memory
		}
		b.Run(fmt.Sprintf("history/other_events=%d%s", others, where), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := db.ExportHistory(ctx, lethe.HistoryRequest{Hash: first, Recipient: rcpt}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("subject_export/other_events=%d%s", others, where), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := db.ExportUser(ctx, "", "bench-user", rcpt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
