package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/grains"
)

// Exporter makes subject access exports and version-chain audit exports.
type Exporter interface {
	ExportUser(ctx context.Context, memory, userID, recipient string) (*lethe.SubjectExport, error)
	ExportHistory(ctx context.Context, req lethe.HistoryRequest) (*lethe.HistoryExport, error)
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

// historyReply answers a version-chain export: the age file, with its
// event id (and, for a subject, the nonce of its commitment) in headers.
type historyReply struct{ x *lethe.HistoryExport }

func (r historyReply) send(c *gin.Context) {
	c.Header("Content-Disposition", `attachment; filename="history.age"`)
	c.Header(HeaderEventID, r.x.EventID)
	if r.x.SubjectNonce != "" {
		c.Header(HeaderSubjectNonce, r.x.SubjectNonce)
	}
	c.Data(http.StatusOK, "text/plain; charset=utf-8", r.x.Data)
}

// exportHistory answers every version of the chains a hash or a subject
// selects, with the proofs of their audit events, as an ASCII-armored age
// file encrypted to the recipient the requester names. A dpo token gets
// the versions' fields; an auditor token (never grain content) gets the
// chains without them. A scope-limited token cannot: a chain's versions may
// lie in other scopes.
func (s *Server) exportHistory(c *gin.Context, req *HistoryExportRequest) (reply, error) {
	if req.Hash != nil && req.Subject != nil {
		return nil, grains.FieldError(lethe.CodeInvalidArgument, "subject", "give hash or subject, not both")
	}
	if req.Recipient == nil || strings.TrimSpace(*req.Recipient) == "" {
		return nil, &lethe.Error{Code: lethe.CodeInvalidArgument, Field: "recipient", Message: "name the age recipient to encrypt the export to"}
	}
	tok := tokenOf(c)
	if tok.Scoped() {
		return nil, unscopedOnly("export version chains")
	}
	hr := lethe.HistoryRequest{Memory: c.Param("memory"), Recipient: *req.Recipient, WithholdFields: !tok.Has(auth.DPO)}
	if req.Hash != nil {
		hr.Hash = *req.Hash
	}
	if req.Subject != nil {
		hr.Subject = *req.Subject
	}
	x, err := s.lib.ExportHistory(c.Request.Context(), hr)
	if err != nil {
		return nil, err
	}
	return historyReply{x}, nil
}
