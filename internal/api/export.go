package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
)

// Exporter makes subject access exports.
type Exporter interface {
	ExportUser(ctx context.Context, memory, userID, recipient string) (*lethe.SubjectExport, error)
}

var _ Exporter = (*lethe.DB)(nil)

// The headers of an export's answer: its subject.export audit event, and
// the nonce that opens the event's subject commitment (for the caller
// alone).
const (
	HeaderEventID      = "Lethe-Event-Id"
	HeaderSubjectNonce = "Lethe-Subject-Nonce"
)

// exportReply answers an export: the age file, with its event id and
// subject nonce in headers.
type exportReply struct{ x *lethe.SubjectExport }

func (r exportReply) send(c *gin.Context) {
	c.Header("Content-Disposition", `attachment; filename="export.age"`)
	c.Header(HeaderEventID, r.x.EventID)
	c.Header(HeaderSubjectNonce, r.x.SubjectNonce)
	c.Data(http.StatusOK, "text/plain; charset=utf-8", r.x.Data)
}

// exportUser answers everything the memory holds about a user, as an
// ASCII-armored age file encrypted to the recipient the requester names.
// The server keeps no copy. A scope-limited token cannot: the user spans
// scopes.
func (s *Server) exportUser(c *gin.Context, req *ExportRequest) (reply, error) {
	user, err := required("user_id", req.UserID)
	if err != nil {
		return nil, err
	}
	if req.Recipient == nil || strings.TrimSpace(*req.Recipient) == "" {
		return nil, &lethe.Error{Code: lethe.CodeInvalidArgument, Field: "recipient", Message: "name the age recipient to encrypt the export to"}
	}
	if tokenOf(c).Scoped() {
		return nil, unscopedOnly("export a user")
	}
	x, err := s.lib.ExportUser(c.Request.Context(), c.Param("memory"), user, *req.Recipient)
	if err != nil {
		return nil, err
	}
	return exportReply{x}, nil
}
