package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// parseFields builds a grain from TYPE and field=value arguments, and
// returns the names of the fields given (a supersede sets them, empty
// included: content= clears the content).
func parseFields(typ string, args []string, createdAt string) (lethe.Grain, []string, error) {
	g := lethe.Grain{Type: typ}
	var set []string
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return g, nil, usagef("%q is not field=value", a)
		}
		if !strings.HasPrefix(k, "meta.") {
			set = append(set, k)
		} else if !slices.Contains(set, "metadata") {
			set = append(set, "metadata")
		}
		switch k {
		case "subject":
			g.Subject = v
		case "relation":
			g.Relation = v
		case "object":
			g.Object = v
		case "content":
			g.Content = v
		case "namespace":
			g.Namespace = v
		case "scope":
			g.Scope = v
		case "user_id":
			g.UserID = v
		case "tags":
			// Empty items are left out ("tags=" is no tag): the server
			// refuses an empty tag, which the library would drop.
			g.Tags = slices.DeleteFunc(strings.Split(v, ","), func(t string) bool { return strings.TrimSpace(t) == "" })
		case "embedding":
			if v == "" {
				g.Embedding = nil // embedding= clears it in a supersede
				continue
			}
			var err error
			if g.Embedding, err = parseVector(v); err != nil {
				return g, nil, usagef("embedding: %v", err)
			}
		case "importance", "confidence", "salience":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return g, nil, usagef("%s: not a number", k)
			}
			switch k {
			case "importance":
				g.Importance = f
			case "confidence":
				g.Confidence = f
			default:
				g.Salience = f
			}
		case "pinned":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return g, nil, usagef("pinned: not true or false")
			}
			g.Pinned = b
		default:
			if mk, ok := strings.CutPrefix(k, "meta."); ok && mk != "" {
				if g.Metadata == nil {
					g.Metadata = map[string]string{}
				}
				g.Metadata[mk] = v
				continue
			}
			return g, nil, usagef("unknown field %q (fields: subject relation object content namespace scope user_id tags importance confidence salience pinned meta.KEY)", k)
		}
	}
	if createdAt != "" {
		t, err := time.Parse(time.RFC3339Nano, createdAt)
		if err != nil {
			return g, nil, usagef("--created-at: not an RFC 3339 time")
		}
		g.CreatedAt = t
	}
	return g, set, nil
}

// grainArgs parses the arguments of add (TYPE field=value...) and
// supersede (HASH TYPE field=value...): the lead positional arguments
// before TYPE, then the grain in e's memory, and opens the backend.
// missing is the usage error when an argument is missing.
func grainArgs(ctx context.Context, e *env, name string, args []string, lead int, missing string) (backend, *grainCall, error) {
	fs := e.flags(name)
	createdAt := fs.String("created-at", "", "")
	pos, err := parse(fs, args)
	if err != nil {
		return nil, nil, err
	}
	if len(pos) < lead+1 {
		return nil, nil, usagef("%s: %s", name, missing)
	}
	g, set, err := parseFields(pos[lead], pos[lead+1:], *createdAt)
	if err != nil {
		return nil, nil, err
	}
	g.Memory = e.memory
	db, err := e.backend(ctx)
	return db, &grainCall{lead: pos[:lead], grain: g, set: set}, err
}

// grainCall is what grainArgs parsed: the lead arguments, the grain, and
// the names of the fields given.
type grainCall struct {
	lead  []string
	grain lethe.Grain
	set   []string
}

// printWritten prints the hash of a written grain, or out with it as JSON.
func (e *env) printWritten(hash string, out map[string]string) error {
	if e.json {
		out["hash"] = hash
		return e.printJSON(out)
	}
	printf(e.stdout, "%s\n", hash)
	return nil
}

func cmdAdd(ctx context.Context, e *env, args []string) error {
	db, call, err := grainArgs(ctx, e, "add", args, 0, "missing TYPE (lethe add TYPE field=value...)")
	if err != nil {
		return err
	}
	h, err := db.Add(ctx, call.grain)
	if err != nil {
		return err
	}
	return e.printWritten(h, map[string]string{})
}

func cmdSupersede(ctx context.Context, e *env, args []string) error {
	db, call, err := grainArgs(ctx, e, "supersede", args, 1, "need HASH and TYPE (lethe supersede HASH TYPE field=value...)")
	if err != nil {
		return err
	}
	// Every field given is set, empty included (content= clears it); the
	// others carry forward.
	h, err := db.Supersede(ctx, call.lead[0], call.grain, call.set...)
	if err != nil {
		return err
	}
	return e.printWritten(h, map[string]string{"superseded": call.lead[0]})
}

func cmdRecall(ctx context.Context, e *env, args []string) error {
	fs := e.flags("recall")
	var q lethe.Query
	var tags stringList
	fs.StringVar(&q.Subject, "subject", "", "")
	fs.StringVar(&q.Relation, "relation", "", "")
	fs.StringVar(&q.Object, "object", "", "")
	fs.StringVar(&q.UserID, "user", "", "")
	fs.StringVar(&q.Scope, "scope", "", "")
	fs.StringVar(&q.Namespace, "namespace", "", "")
	fs.StringVar(&q.Type, "type", "", "")
	fs.Var(&tags, "tag", "")
	fs.BoolVar(&q.IncludeSuperseded, "include-superseded", false, "")
	fs.BoolVar(&q.IncludeArchived, "include-archived", false, "")
	fs.IntVar(&q.Limit, "limit", 0, "")
	fs.StringVar(&q.Cursor, "cursor", "", "")
	fs.StringVar(&q.Text, "query", "", "")
	embedding := fs.String("embedding", "", "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("recall: unexpected argument %q (filters are flags: --subject S ...)", pos[0])
	}
	// A filter given empty is refused, as on the route: --subject "$S"
	// with $S unset never means every subject.
	var empty error
	fs.Visit(func(f *flag.Flag) {
		field := f.Name
		if field == "user" {
			field = "user_id"
		}
		if empty == nil && slices.Contains(grains.NonEmptyFilters, field) && strings.TrimSpace(f.Value.String()) == "" {
			if field == "query" {
				empty = usagef("recall: --query given empty: leave it out for no text search")
			} else {
				empty = usagef("recall: --%s given empty: leave it out to match every value", f.Name)
			}
		}
	})
	if empty != nil {
		return empty
	}
	q.Memory, q.Tags = e.memory, tags
	if *embedding != "" {
		if q.Embedding, err = parseVector(*embedding); err != nil {
			return usagef("--embedding: %v", err)
		}
	}
	db, err := e.backend(ctx)
	if err != nil {
		return err
	}
	page, err := db.Recall(ctx, q)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(page)
	}
	for _, g := range page.Grains {
		printf(e.stdout, "%s\n", line(&g))
	}
	if page.Next != "" {
		printf(e.stderr, "more: --cursor %s\n", page.Next)
	}
	return nil
}

// line renders a grain on one line: hash, type, triple, content, flags.
func line(g *lethe.Grain) string {
	if g.Erased {
		return g.Hash + " [erased]"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", g.Hash, g.Type)
	for _, v := range []string{g.Subject, g.Relation, g.Object} {
		if v != "" {
			fmt.Fprintf(&b, " %q", v)
		}
	}
	if g.Content != "" {
		fmt.Fprintf(&b, " content=%q", g.Content)
	}
	if g.Score != 0 {
		fmt.Fprintf(&b, " score=%.4g", g.Score)
	}
	if g.SupersededBy != "" {
		b.WriteString(" [superseded]")
	}
	if g.Archived {
		b.WriteString(" [archived]")
	}
	return b.String()
}

func oneHash(ctx context.Context, e *env, name string, args []string) (backend, string, error) {
	fs := e.flags(name)
	pos, err := parse(fs, args)
	if err != nil {
		return nil, "", err
	}
	if len(pos) != 1 {
		return nil, "", usagef("%s: need exactly one HASH", name)
	}
	db, err := e.backend(ctx)
	return db, pos[0], err
}

func cmdInspect(ctx context.Context, e *env, args []string) error {
	db, hash, err := oneHash(ctx, e, "inspect", args)
	if err != nil {
		return err
	}
	g, err := db.Get(ctx, e.memory, hash)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(g)
	}
	printf(e.stdout, "hash:       %s\nmemory:     %s\ntype:       %s\n", g.Hash, g.Memory, g.Type)
	for _, kv := range [][2]string{{"subject", g.Subject}, {"relation", g.Relation}, {"object", g.Object},
		{"content", g.Content}, {"namespace", g.Namespace}, {"scope", g.Scope}, {"user_id", g.UserID},
		{"tags", strings.Join(g.Tags, ",")}, {"supersedes", g.Supersedes}, {"superseded_by", g.SupersededBy}} {
		if kv[1] != "" {
			printf(e.stdout, "%-11s %s\n", kv[0]+":", kv[1])
		}
	}
	for k, v := range g.Metadata {
		printf(e.stdout, "meta.%s: %s\n", k, v)
	}
	printf(e.stdout, "importance: %g\nconfidence: %g\nsalience:   %g\npinned:     %t\narchived:   %t\ncreated_at: %s\n",
		g.Importance, g.Confidence, g.Salience, g.Pinned, g.Archived, g.CreatedAt.Format("2006-01-02T15:04:05.999999Z07:00"))
	return nil
}

func cmdHistory(ctx context.Context, e *env, args []string) error {
	db, hash, err := oneHash(ctx, e, "history", args)
	if err != nil {
		return err
	}
	chain, err := db.History(ctx, e.memory, hash)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(chain)
	}
	for _, g := range chain {
		printf(e.stdout, "%s\n", line(&g))
	}
	return nil
}

func cmdForget(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && (args[0] == "user" || args[0] == "scope" || args[0] == "memory") {
		return cmdErase(ctx, e, args[0], args[1:])
	}
	fs := e.flags("forget")
	subject := fs.String("subject", "", "")
	user := fs.String("user", "", "")
	force := fs.Bool("force", false, "")
	dryRun := fs.Bool("dry-run", false, "")
	var scopes stringList
	fs.Var(&scopes, "scope", "")
	namespace := fs.String("namespace", "", "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	sel := lethe.Selector{Memory: e.memory, DryRun: *dryRun, Namespace: *namespace}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["scope"] {
		// Checked by the library (an empty or malformed prefix is
		// invalid_scope), never dropped: an empty one is not "every scope".
		sel.Scopes = scopes
	}
	switch {
	case set["subject"] && *subject == "", set["user"] && *user == "":
		return &lethe.Error{Code: lethe.CodeEmptySelector, Message: "an empty --subject or --user selects nothing; it never means everything"}
	case set["namespace"] && *namespace == "":
		return &lethe.Error{Code: lethe.CodeInvalidArgument, Field: "namespace", Message: "an empty --namespace confines to nothing; leave it out for every namespace"}
	case len(pos) == 1:
		sel.Hash = pos[0]
	case len(pos) > 1:
		sel.Hashes = pos
	}
	sel.Subject, sel.UserID = *subject, *user
	if !*dryRun {
		if err := e.needYes("forget"); err != nil {
			return err
		}
	}
	db, err := e.backend(ctx)
	if err != nil {
		return err
	}
	forget := db.Forget
	if *force {
		// Overrides protection rules (pinned, protected types, importance),
		// never a legal hold; the event records the override.
		f, ok := db.(interface {
			ForceForget(context.Context, lethe.Selector) (*lethe.ForgetResult, error)
		})
		if !ok {
			return usagef("--force is not available here")
		}
		forget = f.ForceForget
	}
	res, err := forget(ctx, sel)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(res)
	}
	if !res.DryRun {
		printf(e.stdout, "forgot %d grain(s)\n", res.Count)
		return nil
	}
	switch res.Status {
	case "held":
		printf(e.stdout, "dry run: would be refused by legal hold %s (%d grain(s) selected)\n", res.HeldBy, res.Count)
	case "protected":
		printf(e.stdout, "dry run: would be refused, protected: %s (%d grain(s) selected)\n", res.Reason, res.Count)
	default:
		printf(e.stdout, "dry run: would forget %d grain(s)\n", res.Count)
	}
	for _, h := range res.Hashes {
		printf(e.stdout, "%s\n", h)
	}
	return nil
}

// parseVector parses comma-separated numbers.
func parseVector(v string) ([]float32, error) {
	var out []float32
	for _, x := range strings.Split(v, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", x)
		}
		out = append(out, float32(f))
	}
	return out, nil
}
