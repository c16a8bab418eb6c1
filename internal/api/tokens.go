package api

import (
	"math"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe/internal/auth"
)

// TokenInfoOf describes t for the wire.
func TokenInfoOf(t *auth.Token) TokenInfo {
	info := TokenInfo{ID: t.ID, Memories: t.Memories, Scopes: t.Scopes, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt,
		ExpiresAt: t.ExpiresAt}
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

// Spec is the token the request asks for. Its expiry is checked when the
// token is made (auth.Store.Create), by the store's clock.
func (r *TokenRequest) Spec() auth.Spec {
	spec := auth.Spec{Memories: r.Memories, Scopes: r.Scopes, ExpiresAt: r.ExpiresAt}
	for _, role := range r.Roles {
		spec.Roles = append(spec.Roles, auth.Role(role))
	}
	if r.ExpiresIn != nil {
		d := seconds(*r.ExpiresIn)
		spec.ExpiresIn = &d
	}
	return spec
}

// seconds is n seconds, held at the bounds of time.Duration: a count too
// large for one stays out of any bound instead of wrapping into it.
func seconds(n int64) time.Duration {
	const most = int64(math.MaxInt64 / time.Second)
	switch {
	case n > most:
		return math.MaxInt64
	case n < -most:
		return math.MinInt64
	}
	return time.Duration(n) * time.Second
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
