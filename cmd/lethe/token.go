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
  lethe token create --role R[,R...] [--memory M[,M...]|*] [--scope P]... [--json]
  lethe token list [--json]
  lethe token revoke ID

Roles: writer (add, supersede), reader (get, recall, history), dpo (forget,
erase, holds), auditor (audit log and proofs, never content), admin (tokens
and everything). --memory defaults to "default"; "*" means every memory.
--scope limits the token to grains under a scope prefix (repeatable).

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
	printf(e.stderr, "token %s created: roles %s, memories %s%s; the secret above is shown only once\n",
		out.ID, strings.Join(out.Roles, ","), strings.Join(out.Memories, ","), scopeNote(out.Scopes))
	return nil
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
	for _, t := range infos {
		state := "live"
		if t.RevokedAt != nil {
			state = "revoked " + t.RevokedAt.Format(time.RFC3339)
		}
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
