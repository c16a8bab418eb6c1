package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/api"
)

// requester is what "lethe request" calls: the embedded store, or a
// server client that implements the same calls.
type requester interface {
	FileErasureRequest(ctx context.Context, spec lethe.RequestSpec) (*lethe.FiledRequest, error)
	ErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error)
	ErasureRequests(ctx context.Context, memory string, f lethe.RequestFilter) ([]lethe.ErasureRequest, error)
	ApproveErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error)
	RejectErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error)
	ExecuteErasureRequest(ctx context.Context, memory, id string) (*lethe.Erasure, error)
	ErasureCertificate(ctx context.Context, memory, id string) (*lethe.ErasureCertificate, error)
}

var (
	_ requester = (*lethe.DB)(nil)
	_ requester = (*client)(nil)
)

func (e *env) requester(ctx context.Context) (requester, error) {
	b, err := e.backend(ctx)
	if err != nil {
		return nil, err
	}
	if r, ok := b.(requester); ok {
		return r, nil
	}
	return nil, errRemote("erasure requests")
}

const requestUsage = "usage: lethe request create|list|show|approve|execute|reject|certificate (see 'lethe help')"

// cmdRequest runs "lethe request ...": the erasure request workflow.
func cmdRequest(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef(requestUsage)
	}
	sub := args[0]
	fs := e.flags("request " + sub)
	user := fs.String("user", "", "")
	scope := fs.String("scope", "", "")
	reason := fs.String("reason", "", "")
	reference := fs.String("reference", "", "")
	due := fs.String("due", "", "")
	status := fs.String("status", "", "")
	dueBefore := fs.String("due-before", "", "")
	overdue := fs.Bool("overdue", false, "")
	html := fs.Bool("html", false, "")
	out := fs.String("out", "", "")
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	oneID := func() (string, error) {
		if len(pos) != 1 {
			return "", usagef("usage: lethe request %s ID", sub)
		}
		return pos[0], nil
	}
	switch sub {
	case "create", "list":
		if len(pos) != 0 {
			return usagef("lethe request %s takes flags only", sub)
		}
	case "show", "approve", "execute", "reject", "certificate":
		if _, err := oneID(); err != nil {
			return err
		}
	default:
		return usagef("unknown request command %q (create, list, show, approve, execute, reject, certificate)", sub)
	}
	// Each subcommand's own flags: a sibling's is refused.
	switch sub {
	case "create":
		err = takesOnly(fs, "user", "scope", "reason", "reference", "due")
	case "list":
		err = takesOnly(fs, "status", "due-before", "overdue")
	case "certificate":
		err = takesOnly(fs, "html", "out")
	default:
		err = takesOnly(fs)
	}
	if err != nil {
		return err
	}
	switch sub {
	case "execute":
		if err := e.needYes("request execute (the erasure destroys keys)"); err != nil {
			return err
		}
	case "reject":
		if err := e.needYes("request reject (the request's sealed subject is destroyed)"); err != nil {
			return err
		}
	}
	rq, err := e.requester(ctx)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		spec := lethe.RequestSpec{Memory: e.memory, UserID: *user, Scope: *scope, Reason: lethe.RequestReason(*reason), Reference: *reference}
		if *due != "" {
			if spec.Due, err = time.Parse(time.RFC3339, *due); err != nil {
				return usagef("--due must be an RFC 3339 time, such as 2026-12-23T00:00:00Z")
			}
		}
		f, err := rq.FileErasureRequest(ctx, spec)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(f)
		}
		printf(e.stdout, "%s\n", f.ID)
		printf(e.stderr, "pending, due %s; would erase %d grain(s)%s\nsubject nonce: %s\n",
			f.Due.Format(time.RFC3339), f.Preview.Count, scopeCounts(f.Preview.Scopes), f.SubjectNonce)
		for _, h := range f.Preview.Holds {
			printf(e.stderr, "held: legal hold %s would refuse it\n", h)
		}
		return nil
	case "list":
		f := lethe.RequestFilter{Status: lethe.RequestStatus(*status), Overdue: *overdue}
		if *dueBefore != "" {
			if f.DueBefore, err = time.Parse(time.RFC3339, *dueBefore); err != nil {
				return usagef("--due-before must be an RFC 3339 time")
			}
		}
		rs, err := rq.ErasureRequests(ctx, e.memory, f)
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(rs)
		}
		for _, r := range rs {
			printRequestLine(e, &r)
		}
		return nil
	}
	id := pos[0]
	switch sub {
	case "show", "approve", "reject":
		var r *lethe.ErasureRequest
		switch sub {
		case "show":
			r, err = rq.ErasureRequest(ctx, e.memory, id)
		case "approve":
			r, err = rq.ApproveErasureRequest(ctx, e.memory, id)
		default:
			r, err = rq.RejectErasureRequest(ctx, e.memory, id)
		}
		if err != nil {
			return err
		}
		if e.json {
			return e.printJSON(r)
		}
		printRequest(e, r)
	case "execute":
		res, err := rq.ExecuteErasureRequest(ctx, e.memory, id)
		if err != nil {
			return err
		}
		return e.printErasure(res)
	case "certificate":
		c, err := rq.ErasureCertificate(ctx, e.memory, id)
		if err != nil {
			return err
		}
		var b []byte
		if *html {
			b, err = c.HTML()
		} else {
			b, err = jsonIndent(c)
		}
		if err != nil {
			return err
		}
		if *out != "" {
			return writePrivate(*out, b)
		}
		printf(e.stdout, "%s\n", b)
	}
	return nil
}

func jsonIndent(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

func scopeCounts(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := " ("
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s: %d", k, m[k])
	}
	return s + ")"
}

func printRequestLine(e *env, r *lethe.ErasureRequest) {
	target := "a user (not named)"
	if r.Kind == "scope" {
		target = "scope " + r.Scope
	}
	late := ""
	if r.Overdue {
		late = " OVERDUE"
	}
	printf(e.stdout, "%s %-8s due %s%s  %s  %s  ref %s\n", r.ID, r.Status, r.Due.Format("2006-01-02"), late, target, r.Reason, r.Reference)
}

func printRequest(e *env, r *lethe.ErasureRequest) {
	printRequestLine(e, r)
	printf(e.stdout, "requested by %s at %s\n", r.RequestedBy, r.CreatedAt.Format(time.RFC3339))
	if r.ApprovedAt != nil {
		printf(e.stdout, "approved by %s at %s\n", r.ApprovedBy, r.ApprovedAt.Format(time.RFC3339))
	}
	if r.RejectedAt != nil {
		printf(e.stdout, "rejected by %s at %s\n", r.RejectedBy, r.RejectedAt.Format(time.RFC3339))
	}
	if r.Hold != "" && r.Status == "blocked" {
		printf(e.stdout, "blocked by legal hold %s: it runs when the hold is released\n", r.Hold)
	}
	if r.ExecutedAt != nil {
		printf(e.stdout, "executed by %s at %s: %d grain(s)%s, event %s\n", r.ExecutedBy, r.ExecutedAt.Format(time.RFC3339), r.Count, scopeCounts(r.Scopes), r.EventID)
	}
	printf(e.stdout, "commitment %s\n", r.Commitment)
}

// Client side of the erasure request routes.

func requestPath(memory, id string) string {
	p := memoryPath(memory) + "/erasure-requests"
	if id != "" {
		p += "/" + url.PathEscape(id)
	}
	return p
}

func (c *client) FileErasureRequest(ctx context.Context, spec lethe.RequestSpec) (*lethe.FiledRequest, error) {
	body := api.ErasureRequestBody{Reason: string(spec.Reason), Reference: spec.Reference}
	if spec.Scope != "" {
		body.Scope = &spec.Scope
	}
	if spec.UserID != "" || spec.Scope == "" {
		body.UserID = &spec.UserID
	}
	if !spec.Due.IsZero() {
		body.Due = &spec.Due
	}
	var out lethe.FiledRequest
	if _, err := c.do(ctx, http.MethodPost, requestPath(spec.Memory, ""), body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) ErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error) {
	var out lethe.ErasureRequest
	if _, err := c.do(ctx, http.MethodGet, requestPath(memory, id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) ErasureRequests(ctx context.Context, memory string, f lethe.RequestFilter) ([]lethe.ErasureRequest, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", string(f.Status))
	}
	if !f.DueBefore.IsZero() {
		q.Set("due_before", f.DueBefore.UTC().Format(time.RFC3339))
	}
	if f.Overdue {
		q.Set("overdue", "true")
	}
	p := requestPath(memory, "")
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out api.ErasureRequestList
	if _, err := c.do(ctx, http.MethodGet, p, nil, &out); err != nil {
		return nil, err
	}
	return out.Requests, nil
}

func (c *client) decide(ctx context.Context, memory, id, action string) (*lethe.ErasureRequest, error) {
	var out lethe.ErasureRequest
	if _, err := c.do(ctx, http.MethodPost, requestPath(memory, id)+"/"+action, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) ApproveErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error) {
	return c.decide(ctx, memory, id, "approve")
}

func (c *client) RejectErasureRequest(ctx context.Context, memory, id string) (*lethe.ErasureRequest, error) {
	return c.decide(ctx, memory, id, "reject")
}

func (c *client) ExecuteErasureRequest(ctx context.Context, memory, id string) (*lethe.Erasure, error) {
	var out lethe.Erasure
	if _, err := c.do(ctx, http.MethodPost, requestPath(memory, id)+"/execute", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *client) ErasureCertificate(ctx context.Context, memory, id string) (*lethe.ErasureCertificate, error) {
	var out lethe.ErasureCertificate
	if _, err := c.do(ctx, http.MethodGet, requestPath(memory, id)+"/certificate", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
