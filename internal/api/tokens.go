package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe/internal/auth"
)

// TokenInfoOf describes t for the wire.
func TokenInfoOf(t *auth.Token) TokenInfo {
	info := TokenInfo{ID: t.ID, Memories: t.Memories, Scopes: t.Scopes, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt}
	for _, r := range t.Roles {
		info.Roles = append(info.Roles, string(r))
	}
	if info.Memories == nil {
		info.Memories = []string{}
	}
	if info.Roles == nil {
		info.Roles = []string{}
	}
	return info
}

// Spec is the token the request asks for.
func (r *TokenRequest) Spec() auth.Spec {
	spec := auth.Spec{Memories: r.Memories, Scopes: r.Scopes}
	for _, role := range r.Roles {
		spec.Roles = append(spec.Roles, auth.Role(role))
	}
	return spec
}

func (s *Server) listTokens(c *gin.Context) {
	ts, err := s.tokens.List(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	out := TokenList{Tokens: make([]TokenInfo, len(ts))}
	for i := range ts {
		out.Tokens[i] = TokenInfoOf(&ts[i])
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) createToken(c *gin.Context, req *TokenRequest) (reply, error) {
	secret, t, err := s.tokens.Create(c.Request.Context(), req.Spec())
	if err != nil {
		return nil, err
	}
	return jsonReply{http.StatusCreated, TokenCreated{Token: secret, TokenInfo: TokenInfoOf(t)}}, nil
}

func (s *Server) revokeToken(c *gin.Context) {
	if err := s.tokens.Revoke(c.Request.Context(), c.Param("id")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}
