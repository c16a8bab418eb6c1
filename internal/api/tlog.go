package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/auth"
)

// TlogServer is what the tlog-tiles routes need of the library; *lethe.DB
// has it.
type TlogServer interface {
	Checkpoint(ctx context.Context) ([]byte, error)
	TlogTile(ctx context.Context, path string) (data []byte, full bool, err error)
}

var _ TlogServer = (*lethe.DB)(nil)

// tlogPrefix is where the audit log is served as a c2sp.org/tlog-tiles log.
const tlogPrefix = "/api/audit/log"

// Cache-Control values (c2sp.org/tlog-tiles): the checkpoint is mutable and
// must not be cached beyond a few seconds; a tile or bundle, full or
// partial, never changes once served.
const (
	checkpointCache = "no-cache"
	tileCache       = "max-age=31536000, immutable"
)

// tlogRoutes serves the audit log under /api/audit/log/ as a
// c2sp.org/tlog-tiles log: checkpoint, tile/<L>/<N>[.p/<W>] and
// tile/entries/<N>[.p/<W>]. The auditor role may read the checkpoint and
// the hash tiles; an entry bundle holds the leaves of every memory, so it
// needs a token that reads every leaf (leafFilter: memories * and no scope
// limit). With Config.PublicLog anyone may read all of it: the leaves hold
// no personal data, but they name every memory and the tokens that acted.
func (s *Server) tlogRoutes(e *gin.Engine, api *gin.RouterGroup) {
	var g *gin.RouterGroup
	if s.cfg.PublicLog {
		g = e.Group(tlogPrefix, s.deadline)
	} else {
		g = api.Group(strings.TrimPrefix(tlogPrefix, "/api"), s.allow(auth.Auditor))
	}
	g.GET("/checkpoint", s.tlogCheckpoint)
	g.GET("/tile/*tile", s.tlogTile)
}

func (s *Server) tlogCheckpoint(c *gin.Context) {
	note, err := s.lib.Checkpoint(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Cache-Control", checkpointCache)
	c.Data(http.StatusOK, "text/plain; charset=utf-8", note)
}

func (s *Server) tlogTile(c *gin.Context) {
	if !s.cfg.PublicLog && strings.HasPrefix(c.Param("tile"), "/entries/") && leafFilter(tokenOf(c)) != nil {
		s.fail(c, apiError(CodeForbidden, "an entry bundle holds the leaves of every memory",
			"it needs an auditor token for every memory (*) without a scope limit"))
		return
	}
	data, _, err := s.lib.TlogTile(c.Request.Context(), "tile"+c.Param("tile"))
	if err != nil {
		s.fail(c, err)
		return
	}
	cache := tileCache
	if s.cfg.PublicLog {
		cache = "public, " + cache
	}
	c.Header("Cache-Control", cache)
	c.Data(http.StatusOK, "application/octet-stream", data)
}
