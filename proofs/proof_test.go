package proofs_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/proofs"
	"github.com/lethe-io/lethe/proofs/internal/prooftest"
)

// sampleProof returns a log of 13 sample events and the proof of the
// key.erase event at index 5 in it, with a consistency proof from size 6.
func sampleProof(tb testing.TB) (*prooftest.Log, *proofs.Proof) {
	tb.Helper()
	l, _ := prooftest.SampleLog("proof", "lethe.example/audit", 13)
	p := l.Proof(5, 13)
	p.SetConsistency(6, l.Consistency(6, 13))
	return l, p
}

func TestNewProof(t *testing.T) {
	l, p := sampleProof(t)
	leaf, _ := proofs.ParseLeaf(l.Leaves[5])
	if p.Format != proofs.ProofFormat || p.EventID != leaf.ID || p.Count != 3 ||
		p.KeyFingerprint != leaf.KeyFingerprints[0] || p.Timestamp != "2026-11-21T10:20:30Z" ||
		p.LeafIndex != 5 || p.TreeSize != 13 || len(p.Inclusion) != 4 {
		t.Fatalf("NewProof filled %+v", p)
	}
	if _, err := proofs.NewProof([]byte("{}"), nil, 0, 1, nil, nil); err == nil {
		t.Fatal("NewProof accepted a bad leaf")
	}
	if _, err := proofs.NewProof(l.Leaves[0], l.Sigs[0], 0, 2, [][]byte{{1, 2}}, l.Checkpoint(2)); err == nil {
		t.Fatal("NewProof accepted a 2-byte inclusion hash")
	}
}

func TestProofJSONRoundTrip(t *testing.T) {
	_, p := sampleProof(t)
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"format":"lethe.proof/v1"`, `"count":3`, `"key_fingerprint":"`, `"timestamp":"2026-11-21T10:20:30Z"`,
		`"event_id":"`, `"leaf":"`, `"leaf_signature":"`, `"leaf_index":5`, `"tree_size":13`, `"inclusion":["`,
		`"checkpoint":"lethe.example/audit\n13\n`, `\n\n— lethe.example/audit `, `"consistency_from":6`, `"consistency":["`} {
		if !bytes.Contains(b, []byte(field)) {
			t.Errorf("proof JSON lacks %s", field)
		}
	}
	back, err := proofs.ParseProof(b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := back.Marshal()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("round trip:\n%s\n%s\n%v", b, again, err)
	}

	// Any JSON formatting parses to the same proof.
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	back, err = proofs.ParseProof(pretty.Bytes())
	if err != nil {
		t.Fatalf("ParseProof(indented) = %v", err)
	}
	if again, _ := back.Marshal(); !bytes.Equal(again, b) {
		t.Fatal("indented proof parsed differently")
	}

	// Without consistency fields, none are written; size 1 has "inclusion":[].
	l, _ := prooftest.SampleLog("one", "lethe.example/audit", 1)
	b, _ = l.Proof(0, 1).Marshal()
	if !bytes.Contains(b, []byte(`"inclusion":[]`)) || bytes.Contains(b, []byte("consistency")) {
		t.Fatalf("proof of size 1 = %s", b)
	}
}

func TestProofJSONEmbeds(t *testing.T) {
	_, p := sampleProof(t)
	canonical, _ := p.Marshal()
	resp := struct {
		Count int           `json:"count"`
		Proof *proofs.Proof `json:"proof"`
		Nonce string        `json:"subject_nonce"`
	}{1, p, "00"}
	b, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, canonical) {
		t.Fatalf("embedded proof is not in canonical form:\n%s", b)
	}
	var back struct {
		Proof proofs.Proof `json:"proof"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&back); err != nil {
		t.Fatal(err)
	}
	if again, _ := back.Proof.Marshal(); !bytes.Equal(again, canonical) {
		t.Fatal("UnmarshalJSON changed the proof")
	}
}

func TestParseProofStrict(t *testing.T) {
	_, p := sampleProof(t)
	b, _ := p.Marshal()
	good := string(b)
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ``},
		{"array", `[]`},
		{"unknown field", strings.Replace(good, `{"format"`, `{"subject_nonce":"00","format"`, 1)},
		{"duplicate field", strings.Replace(good, `{"format"`, `{"count":3,"format"`, 1)},
		{"missing field", strings.Replace(good, `"tree_size":13,`, ``, 1)},
		{"null inclusion", strings.Replace(good, `"inclusion":[`, `"inclusion":null,"x":[`, 1)},
		{"null leaf", strings.Replace(good, `"leaf":"`, `"leaf":null,"y":"`, 1)},
		{"count as string", strings.Replace(good, `"count":3`, `"count":"3"`, 1)},
		{"count float", strings.Replace(good, `"count":3`, `"count":3.0`, 1)},
		{"count exponent", strings.Replace(good, `"count":3`, `"count":3e0`, 1)},
		{"negative index", strings.Replace(good, `"leaf_index":5`, `"leaf_index":-5`, 1)},
		{"leading zero", strings.Replace(good, `"leaf_index":5`, `"leaf_index":05`, 1)},
		{"unpadded base64", strings.Replace(good, `=","leaf_signature"`, `","leaf_signature"`, 1)},
		{"url base64", strings.Replace(good, `"leaf":"`, `"leaf":"-_`, 1)},
		{"escaped newline in base64", strings.Replace(good, `"leaf":"ey`, `"leaf":"e\ny`, 1)},
		{"short inclusion hash", strings.Replace(good, `"inclusion":["`, `"inclusion":["AAAA","`, 1)},
		{"trailing data", good + `{}`},
		{"truncated", good[:len(good)-1]},
		{"invalid UTF-8", strings.Replace(good, `lethe.example/audit`, "lethe.example/\xffaudit", 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := proofs.ParseProof([]byte(tt.in))
			if err == nil {
				t.Fatalf("ParseProof accepted it: %+v", p)
			}
			if proofs.FailedCheck(err) != proofs.CheckFormat {
				t.Fatalf("ParseProof error %v is not a format error", err)
			}
		})
	}
}

func TestTlogProofRoundTrip(t *testing.T) {
	l, p := sampleProof(t)
	text, err := p.MarshalTlogProof()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	if lines[0] != "c2sp.org/tlog-proof@v1" || !strings.HasPrefix(lines[1], "extra ") || lines[2] != "index 5" || lines[7] != "" {
		t.Fatalf("tlog-proof layout:\n%s", text)
	}
	if !strings.HasSuffix(string(text), "\n\n"+string(l.Checkpoint(13))) {
		t.Fatal("tlog-proof does not end with the checkpoint verbatim")
	}
	back, err := proofs.ParseTlogProof(text)
	if err != nil {
		t.Fatal(err)
	}
	again, err := back.MarshalTlogProof()
	if err != nil || !bytes.Equal(again, text) {
		t.Fatalf("text round trip failed: %v", err)
	}
	wantJSON, _ := p.Marshal()
	if gotJSON, _ := back.Marshal(); !bytes.Equal(gotJSON, wantJSON) {
		t.Fatalf("text form lost data:\n%s\n%s", gotJSON, wantJSON)
	}
	if _, err := proofs.Verify(back, proofs.VerifyOptions{LogKey: l.VKey}); err != nil {
		t.Fatal(err)
	}
	for _, in := range [][]byte{text, wantJSON} {
		if q, err := proofs.ParseAnyProof(in); err != nil || q.LeafIndex != 5 {
			t.Fatalf("ParseAnyProof = %v", err)
		}
	}

	// A tree_size that differs from the checkpoint cannot be written.
	p.TreeSize++
	if _, err := p.MarshalTlogProof(); err == nil {
		t.Fatal("MarshalTlogProof wrote a proof whose tree_size is not its checkpoint's")
	}
}

func TestParseTlogProofStrict(t *testing.T) {
	_, p := sampleProof(t)
	b, _ := p.MarshalTlogProof()
	good := string(b)
	lines := strings.SplitAfter(good, "\n")
	extra := strings.TrimSuffix(strings.TrimPrefix(lines[1], "extra "), "\n")
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"other header", strings.Replace(good, "@v1", "@v2", 1)},
		{"CRLF header", strings.Replace(good, "@v1\n", "@v1\r\n", 1)},
		{"no extra", strings.Replace(good, lines[1], "", 1)},
		{"extra not base64", strings.Replace(good, extra, "!"+extra, 1)},
		{"extra not canonical JSON", strings.Replace(good, extra, b64s(" "+mustDecode(t, extra)), 1)},
		{"index leading zero", strings.Replace(good, "index 5\n", "index 05\n", 1)},
		{"index missing", strings.Replace(good, "index 5\n", "", 1)},
		{"index with space", strings.Replace(good, "index 5\n", "index  5\n", 1)},
		{"short hash", strings.Replace(good, lines[3], "AAAA\n", 1)},
		{"no blank line", strings.Replace(good, "\n\n", "\n", 1)},
		{"checkpoint not a note", strings.SplitAfter(good, "\n\n")[0] + "hello\n"},
		{"checkpoint with extension", strings.Replace(good, "\n13\n", "\n13\nextra\n", 1)},
		{"extra has leaf_index", strings.Replace(good, extra, b64s(strings.Replace(mustDecode(t, extra), `{"format"`, `{"leaf_index":5,"format"`, 1)), 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := proofs.ParseTlogProof([]byte(tt.in)); err == nil {
				t.Fatalf("ParseTlogProof accepted it: %+v", p)
			} else if proofs.FailedCheck(err) != proofs.CheckFormat {
				t.Fatalf("error %v is not a format error", err)
			}
		})
	}
}

func TestConsistencyProofRoundTrip(t *testing.T) {
	l, _ := sampleProof(t)
	c := &proofs.ConsistencyProof{From: 6, To: 13, Hashes: l.Consistency(6, 13)}
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"from":6,"to":13,"consistency":["`) {
		t.Fatalf("Marshal = %s", b)
	}
	back, err := proofs.ParseConsistencyProof(b)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := back.Marshal(); !bytes.Equal(again, b) {
		t.Fatal("round trip changed it")
	}
	for _, bad := range []string{`{"from":7,"to":6,"consistency":[]}`, `{"from":1,"to":2}`, `{"from":1,"to":2,"consistency":[],"x":1}`} {
		if _, err := proofs.ParseConsistencyProof([]byte(bad)); err == nil {
			t.Errorf("ParseConsistencyProof(%s) succeeded", bad)
		}
	}
}

func b64s(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func mustDecode(tb testing.TB, s string) string {
	tb.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}
