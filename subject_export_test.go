package lethe_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"filippo.io/age"
	"filippo.io/age/armor"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/proofs"
)

func TestExportUser(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *lethe.DB) {
		ctx := context.Background()
		john, jane, _ := population(t, db)
		if _, err := db.Supersede(ctx, john[0], lethe.Grain{Type: "fact", Object: "moved"}); err != nil {
			t.Fatal(err)
		}
		id, err := age.GenerateX25519Identity()
		if err != nil {
			t.Fatal(err)
		}
		before := auditLen(t, db)
		res, err := db.ExportUser(ctx, "", "john", id.Recipient().String())
		if err != nil {
			t.Fatal(err)
		}
		out := res.Data
		checkExportEvent(t, db, before, res, "john", id.Recipient().String(), len(john)+1)
		if bytes.Contains(out, []byte("subj-john")) || !bytes.HasPrefix(out, []byte("-----BEGIN AGE ENCRYPTED FILE-----")) {
			t.Fatalf("the export is not an armored age file")
		}
		r, err := age.Decrypt(armor.NewReader(bytes.NewReader(out)), id)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(r)
		var doc lethe.Export
		if err := json.Unmarshal(plain, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Format != lethe.ExportFormat || doc.UserID != "john" || doc.Count != len(john)+1 || len(doc.Grains) != doc.Count {
			t.Errorf("export: format %q user %q count %d, want %d grains", doc.Format, doc.UserID, doc.Count, len(john)+1)
		}
		for _, g := range doc.Grains {
			if g.UserID != "john" {
				t.Errorf("the export holds another user's grain")
			}
		}
		if strings.Contains(string(plain), jane[0]) {
			t.Error("the export holds jane's grain")
		}
		// Another identity cannot open it.
		other, _ := age.GenerateX25519Identity()
		if _, err := age.Decrypt(armor.NewReader(bytes.NewReader(out)), other); err == nil {
			t.Error("another identity opened the export")
		}
		// After erasure, nothing is held: the export is empty.
		if _, err := db.ForgetUser(ctx, "", "john"); err != nil {
			t.Fatal(err)
		}
		before = auditLen(t, db)
		res, err = db.ExportUser(ctx, "", "john", id.Recipient().String())
		if err != nil {
			t.Fatal(err)
		}
		out = res.Data
		checkExportEvent(t, db, before, res, "john", id.Recipient().String(), 0)
		r, _ = age.Decrypt(armor.NewReader(bytes.NewReader(out)), id)
		plain, _ = io.ReadAll(r)
		doc = lethe.Export{}
		json.Unmarshal(plain, &doc)
		if doc.Count != 0 {
			t.Errorf("export after erasure holds %d grains", doc.Count)
		}
		before = auditLen(t, db)
		for _, tc := range []struct{ user, rcpt string }{{"", id.Recipient().String()}, {"john", "not-a-recipient"}, {"john", ""}} {
			if _, err := db.ExportUser(ctx, "", tc.user, tc.rcpt); err == nil {
				t.Errorf("ExportUser(%q, %q) accepted", tc.user, tc.rcpt)
			}
		}
		if n := auditLen(t, db); n != before {
			t.Errorf("refused exports wrote %d audit events", n-before)
		}
	})
}

// auditLen is the number of events in db's audit log.
func auditLen(t testing.TB, db *lethe.DB) int {
	t.Helper()
	leaves, err := db.AuditLeaves(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(leaves)
}

// checkExportEvent checks that one event, a subject.export, followed
// before: committing to user with the returned nonce, counting n grains,
// naming the recipient by fingerprint only.
func checkExportEvent(t *testing.T, db *lethe.DB, before int, res *lethe.SubjectExport, user, rcpt string, n int) {
	t.Helper()
	leaves, err := db.AuditLeaves(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(leaves) != before+1 {
		t.Fatalf("export wrote %d audit events, want 1", len(leaves)-before)
	}
	l, err := proofs.ParseLeaf(leaves[before])
	if err != nil {
		t.Fatal(err)
	}
	nonce, err := hex.DecodeString(res.SubjectNonce)
	if err != nil || len(nonce) != 32 {
		t.Fatalf("subject nonce %q", res.SubjectNonce)
	}
	if l.Type != proofs.EventSubjectExport || l.ID != res.EventID || l.GrainCount() != uint64(n) ||
		l.Commitment != proofs.Commitment(nonce, user) ||
		len(l.KeyFingerprints) != 1 || l.KeyFingerprints[0] != lethe.RecipientFingerprint(rcpt) {
		t.Errorf("export event %s, want subject.export of %d grains, committing to the user, naming the recipient by fingerprint", leaves[before], n)
	}
	if strings.Contains(string(leaves[before]), user) || strings.Contains(string(leaves[before]), rcpt) {
		t.Errorf("export event names the user or the recipient: %s", leaves[before])
	}
}
