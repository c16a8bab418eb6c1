package requests

import (
	"bytes"
	"html/template"
	"slices"
	"time"

	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/proofs"
)

// CertificateFormat names the erasure certificate document.
const CertificateFormat = "lethe.erasure-certificate/v1"

// Certificate states that an executed request's erasure happened: what,
// when, under which keys, and where in the audit log, with the proof that
// anyone verifies offline with the log's public key. It never names the
// subject: a user request shows only the subject commitment, which the
// holder of the nonce (returned when the request was filed) can open.
type Certificate struct {
	Format    string `json:"format"`
	RequestID string `json:"request_id"`
	Memory    string `json:"memory"`
	Reference string `json:"reference"`
	Reason    Reason `json:"reason"`
	Kind      Kind   `json:"kind"`
	// Scope is the erased scope path of a scope request.
	Scope      string `json:"scope,omitempty"`
	Commitment string `json:"commitment"`

	RequestedAt time.Time `json:"requested_at"`
	RequestedBy string    `json:"requested_by"`
	ApprovedAt  time.Time `json:"approved_at"`
	ApprovedBy  string    `json:"approved_by"`
	ExecutedAt  time.Time `json:"executed_at"`
	ExecutedBy  string    `json:"executed_by"`
	Due         time.Time `json:"due"`

	// Count is the number of grains made unreadable, Scopes the same per
	// scope path.
	Count  int64            `json:"count"`
	Scopes map[string]int64 `json:"scopes"`
	// KeyFingerprints are the destroyed data keys (the named key first);
	// SealKey the destroyed key that sealed the request's subject.
	KeyFingerprints []string `json:"key_fingerprints"`
	SealKey         string   `json:"seal_key_fingerprint"`
	KEKVersion      uint64   `json:"kek_version,omitempty"`

	// EventID, LeafIndex, TreeSize and Checkpoint place the key.erase
	// event in the audit log; Proof is its whole lethe.proof/v1 proof.
	EventID    string        `json:"event_id"`
	LeafIndex  uint64        `json:"leaf_index"`
	TreeSize   uint64        `json:"tree_size"`
	Checkpoint string        `json:"checkpoint"`
	LogKey     string        `json:"log_key"`
	Proof      *proofs.Proof `json:"proof"`
	// Verify says how anyone checks the certificate.
	Verify []string `json:"verify"`
}

// NewCertificate returns the certificate of executed request r, whose
// key.erase event has proof p in the log with public key logKey.
func NewCertificate(r *Request, p *proofs.Proof, logKey string) (*Certificate, error) {
	if r.Status != Executed || r.ExecutedAt == nil || r.ApprovedAt == nil {
		return nil, &grains.Error{Code: grains.CodeInvalidState, Field: "status", Message: "a certificate is issued for executed requests only; this one is " + string(r.Status),
			Err: ErrNotExecuted}
	}
	c := &Certificate{Format: CertificateFormat, RequestID: r.ID, Memory: r.Memory, Reference: r.Reference, Reason: r.Reason,
		Kind: r.Kind, Scope: r.Scope, Commitment: r.Commitment,
		RequestedAt: r.CreatedAt, RequestedBy: r.RequestedBy, ApprovedAt: *r.ApprovedAt, ApprovedBy: r.ApprovedBy,
		ExecutedAt: *r.ExecutedAt, ExecutedBy: r.ExecutedBy, Due: r.Due,
		Count: r.Count, Scopes: r.Scopes, KeyFingerprints: slices.Clone(r.KeyFingerprints), SealKey: r.SealKey, KEKVersion: r.KEKVersion,
		EventID: r.EventID, LeafIndex: p.LeafIndex, TreeSize: p.TreeSize, Checkpoint: p.Checkpoint, LogKey: logKey, Proof: p}
	if c.Scopes == nil {
		c.Scopes = map[string]int64{}
	}
	c.Verify = []string{
		"Save the proof (the \"proof\" field, or GET /api/audit/proof?event=" + r.EventID + ") as proof.json and run: lethe verify proof.json --log-key '" + logKey + "'",
		"The same proof as a c2sp.org/tlog-proof file (GET /api/audit/proof?event=" + r.EventID + "&format=tlog-proof) verifies with any tlog tool against the log's public key.",
		"Whoever holds the user id (or scope path) and the nonce returned when the request was filed checks the commitment: lethe verify proof.json --log-key KEY --subject ID --nonce HEX",
		"The proof's leaf is a key.erase event naming this request (\"request\":\"" + r.ID + "\") and the destroyed keys' fingerprints listed here.",
	}
	return c, nil
}

var certTemplate = template.Must(template.New("certificate").Funcs(template.FuncMap{
	"date": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Erasure certificate {{.RequestID}}</title>
<style>
body { font-family: serif; max-width: 48em; margin: 2em auto; color: #000; }
h1 { font-size: 1.5em; border-bottom: 2px solid #000; }
table { border-collapse: collapse; width: 100%; margin: 1em 0; }
th, td { text-align: left; vertical-align: top; padding: .3em .5em; border-bottom: 1px solid #999; }
th { width: 14em; }
code, pre { font-family: monospace; font-size: .85em; word-break: break-all; white-space: pre-wrap; }
@media print { body { margin: 0; } }
</style>
</head>
<body>
<h1>Erasure certificate</h1>
<p>lethe erased the data below on {{date .ExecutedAt}}, by destroying the data keys it was encrypted under
(crypto-erasure). The erasure is an event in lethe's append-only audit log; the proof below lets anyone check it
offline with the log's public key.</p>
<table>
<tr><th>Request</th><td><code>{{.RequestID}}</code></td></tr>
<tr><th>Reference</th><td><code>{{.Reference}}</code></td></tr>
<tr><th>Reason</th><td>{{.Reason}}</td></tr>
<tr><th>Memory</th><td><code>{{.Memory}}</code></td></tr>
<tr><th>Erased</th><td>{{if eq .Kind "scope"}}scope <code>{{.Scope}}</code> and everything below it{{else}}every grain of one user (the subject commitment below names them){{end}}</td></tr>
<tr><th>Subject commitment</th><td><code>{{.Commitment}}</code></td></tr>
<tr><th>Grains made unreadable</th><td>{{.Count}}</td></tr>
<tr><th>Per scope</th><td>{{range $s, $n := .Scopes}}<code>{{$s}}</code>: {{$n}}<br>{{else}}none{{end}}</td></tr>
<tr><th>Destroyed keys</th><td>{{range .KeyFingerprints}}<code>{{.}}</code><br>{{end}}</td></tr>
<tr><th>Request's sealing key (destroyed)</th><td><code>{{.SealKey}}</code></td></tr>
{{if .KEKVersion}}<tr><th>KEK version</th><td>{{.KEKVersion}}</td></tr>{{end}}
<tr><th>Requested</th><td>{{date .RequestedAt}} by token <code>{{.RequestedBy}}</code></td></tr>
<tr><th>Approved</th><td>{{date .ApprovedAt}} by token <code>{{.ApprovedBy}}</code></td></tr>
<tr><th>Executed</th><td>{{date .ExecutedAt}} by token <code>{{.ExecutedBy}}</code></td></tr>
<tr><th>Due</th><td>{{date .Due}}</td></tr>
<tr><th>Audit event</th><td><code>{{.EventID}}</code>, leaf index {{.LeafIndex}} of a tree of {{.TreeSize}}</td></tr>
<tr><th>Log public key</th><td><code>{{.LogKey}}</code></td></tr>
</table>
<h2>Checkpoint</h2>
<pre>{{.Checkpoint}}</pre>
<h2>How to verify</h2>
<ol>{{range .Verify}}<li>{{.}}</li>{{end}}</ol>
</body>
</html>
`))

// HTML renders c as a printable HTML page; every value is escaped.
func (c *Certificate) HTML() ([]byte, error) {
	var b bytes.Buffer
	if err := certTemplate.Execute(&b, c); err != nil {
		return nil, grains.Wrap(grains.CodeInternal, "render certificate", err)
	}
	return b.Bytes(), nil
}
