package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// Exporter makes subject access exports.
type Exporter interface {
	ExportUser(ctx context.Context, memory, userID, recipient string) ([]byte, error)
}

var _ Exporter = (*lethe.DB)(nil)

// exportUser answers everything the memory holds about a user, as an
// ASCII-armored age file encrypted to the recipient the requester names.
// The server keeps no copy. A scope-limited token cannot: the user spans
// scopes.
func (s *Server) exportUser(c *gin.Context) {
	var req ExportRequest
	if _, err := decode(c, s.cfg.MaxBody, &req); err != nil {
		s.fail(c, err)
		return
	}
	user, err := required("user_id", req.UserID)
	if err != nil {
		s.fail(c, err)
		return
	}
	if req.Recipient == nil || strings.TrimSpace(*req.Recipient) == "" {
		s.fail(c, &lethe.Error{Code: grains.CodeInvalidArgument, Field: "recipient", Message: "name the age recipient to encrypt the export to"})
		return
	}
	if tokenOf(c).Scoped() {
		s.fail(c, unscopedOnly("export a user"))
		return
	}
	b, err := s.lib.ExportUser(c.Request.Context(), c.Param("memory"), user, *req.Recipient)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Header("Content-Disposition", `attachment; filename="export.age"`)
	c.Data(http.StatusOK, "text/plain; charset=utf-8", b)
}
