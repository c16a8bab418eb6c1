package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lethe-io/lethe/internal/api"
	"github.com/lethe-io/lethe/internal/auth"
)

const tokenUsage = `Usage:
  lethe token create --role R[,R...] [--memory M[,M...]|*] [--scope P]...
                     [--expires-in DURATION | --expires-at TIME] [--json]
  lethe token list [--json]
  lethe token revoke ID

Roles: writer (add, supersede), reader (get, recall, history), dpo (forget,
erase, holds), auditor (audit log and proofs, never content), admin (tokens
and everything). --memory defaults to "default"; "*" means every memory.
--scope limits the token to grains under a scope prefix (repeatable).
--expires-in (30m, 8h, 720h: whole seconds) or --expires-at (RFC 3339,
2026-07-01T00:00:00Z) makes the token stop working then, a minute to 366
days from now; without either it works until revoked. An expired token
answers as an unknown one and stays listed.

create prints the secret once: it is stored only hashed. Without --server
these work on the store of --data / --postgres; with --server, through the
server's admin routes (the token file must hold an admin token).
`

func cmdToken(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		printf(e.stderr, "%s", tokenUsage)
		return usagef("token: name a subcommand: create, list or revoke")
	}
	switch args[0] {
	case "create":
		return tokenCreate(ctx, e, args[1:])
	case "list":
		return tokenList(ctx, e, args[1:])
	case "revoke":
		return tokenRevoke(ctx, e, args[1:])
	case "help", "-h", "--help":
		printf(e.stdout, "%s", tokenUsage)
		return nil
	}
	return usagef("token: unknown subcommand %q (create, list, revoke)", args[0])
}

// tokenStore opens the token table of the store the global flags name.
func (e *env) tokenStore(ctx context.Context) (*auth.Store, error) {
	cfg := auth.Config{PostgresDSN: e.postgres}
	if e.postgres == "" {
		cfg.SQLitePath = filepath.Join(e.data, "lethe.db")
		if err := os.MkdirAll(e.data, 0o700); err != nil {
			return nil, err
		}
	}
	return auth.Open(ctx, cfg)
}

// tokenAdmin is where the token commands act: the server's admin routes
// (*client), or the token table of the local store (localTokens).
type tokenAdmin interface {
	CreateToken(ctx context.Context, req api.TokenRequest) (*api.TokenCreated, error)
	ListTokens(ctx context.Context) ([]api.TokenInfo, error)
	RevokeToken(ctx context.Context, id string) error
	Close() error
}

var (
	_ tokenAdmin = (*client)(nil)
	_ tokenAdmin = localTokens{}
)

// tokenAdmin returns the server's admin routes with --server, the local
// token table otherwise. The caller closes it.
func (e *env) tokenAdmin(ctx context.Context) (tokenAdmin, error) {
	if e.server != "" {
		return e.client()
	}
	st, err := e.tokenStore(ctx)
	if err != nil {
		return nil, err
	}
	return localTokens{st}, nil
}

// localTokens is the local token table as the server's admin routes
// answer it.
type localTokens struct{ *auth.Store }

func (l localTokens) CreateToken(ctx context.Context, req api.TokenRequest) (*api.TokenCreated, error) {
	secret, t, err := l.Create(ctx, req.Spec())
	if err != nil {
		return nil, err
	}
	return &api.TokenCreated{Token: secret, TokenInfo: api.TokenInfoOf(t)}, nil
}

func (l localTokens) ListTokens(ctx context.Context) ([]api.TokenInfo, error) {
	ts, err := l.List(ctx)
	if err != nil {
		return nil, err
	}
	var infos []api.TokenInfo
	for i := range ts {
		infos = append(infos, api.TokenInfoOf(&ts[i]))
	}
	return infos, nil
}

func (l localTokens) RevokeToken(ctx context.Context, id string) error { return l.Revoke(ctx, id) }

func tokenCreate(ctx context.Context, e *env, args []string) error {
	fs := e.flags("token create")
	roles := fs.String("role", "", "")
	var scopes stringList
	fs.Var(&scopes, "scope", "")
	expiresIn := fs.String("expires-in", "", "")
	expiresAt := fs.String("expires-at", "", "")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("token create: unexpected argument %q", pos[0])
	}
	if *roles == "" {
		return usagef("token create: --role is required (writer, reader, dpo, auditor, admin)")
	}
	req := api.TokenRequest{Memories: strings.Split(e.memory, ","), Scopes: scopes}
	if req.ExpiresIn, req.ExpiresAt, err = tokenExpiry(*expiresIn, *expiresAt); err != nil {
		return err
	}
	for _, r := range auth.ParseRoles(*roles) {
		req.Roles = append(req.Roles, string(r))
	}
	admin, err := e.tokenAdmin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close()
	out, err := admin.CreateToken(ctx, req)
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(out)
	}
	printf(e.stdout, "%s\n", out.Token)
	printf(e.stderr, "token %s created: roles %s, memories %s%s%s; the secret above is shown only once\n",
		out.ID, strings.Join(out.Roles, ","), strings.Join(out.Memories, ","), scopeNote(out.Scopes), expiryNote(out.ExpiresAt))
	return nil
}

// tokenExpiry reads --expires-in and --expires-at into a request's
// expires_in and expires_at. Their bounds are the server's (or the local
// store's) to check, by its clock.
func tokenExpiry(in, at string) (*int64, *time.Time, error) {
	switch {
	case in != "" && at != "":
		return nil, nil, usagef("token create: give --expires-in or --expires-at, not both")
	case in != "":
		d, err := time.ParseDuration(in)
		if err != nil || d%time.Second != 0 {
			return nil, nil, &usageError{msg: "token create: --expires-in must be a duration in whole seconds",
				hint: "such as 30m, 8h or 720h (30 days)"}
		}
		n := int64(d / time.Second)
		return &n, nil, nil
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return nil, nil, &usageError{msg: "token create: --expires-at must be an RFC 3339 time",
				hint: "such as 2026-07-01T00:00:00Z"}
		}
		return nil, &t, nil
	}
	return nil, nil, nil
}

func expiryNote(at *time.Time) string {
	if at == nil {
		return ""
	}
	return ", expires " + at.Format(time.RFC3339)
}

// tokenState is a listed token's state at now: live, live until its
// expiry, expired or revoked.
func tokenState(t api.TokenInfo, now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return "revoked " + t.RevokedAt.Format(time.RFC3339)
	case t.ExpiresAt == nil:
		return "live"
	case now.Before(*t.ExpiresAt):
		return "live, expires " + t.ExpiresAt.Format(time.RFC3339)
	}
	return "expired " + t.ExpiresAt.Format(time.RFC3339)
}

func scopeNote(scopes []string) string {
	if len(scopes) == 0 {
		return ""
	}
	return ", scopes " + strings.Join(scopes, ",")
}

func tokenList(ctx context.Context, e *env, args []string) error {
	fs := e.flags("token list")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("token list: unexpected argument %q", pos[0])
	}
	admin, err := e.tokenAdmin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close()
	infos, err := admin.ListTokens(ctx)
	if err != nil {
		return err
	}
	if e.json {
		if infos == nil {
			infos = []api.TokenInfo{}
		}
		return e.printJSON(api.TokenList{Tokens: infos})
	}
	now := time.Now()
	for _, t := range infos {
		state := tokenState(t, now)
		scopes := strings.Join(t.Scopes, ",")
		if scopes == "" {
			scopes = "-"
		}
		printf(e.stdout, "%s  %s  memories=%s  scopes=%s  created=%s  %s\n", t.ID, strings.Join(t.Roles, ","),
			strings.Join(t.Memories, ","), scopes, t.CreatedAt.Format(time.RFC3339), state)
	}
	return nil
}

func tokenRevoke(ctx context.Context, e *env, args []string) error {
	fs := e.flags("token revoke")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("token revoke: need exactly one token ID (see 'lethe token list')")
	}
	admin, err := e.tokenAdmin(ctx)
	if err != nil {
		return err
	}
	defer admin.Close()
	if err := admin.RevokeToken(ctx, pos[0]); err != nil {
		return err
	}
	if e.json {
		return e.printJSON(map[string]any{"id": pos[0], "revoked": true})
	}
	printf(e.stdout, "revoked %s\n", pos[0])
	return nil
}
