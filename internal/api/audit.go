package api

import (
	"context"
	"math"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/proofs"
)

// Auditor is what the audit routes need of the library; *lethe.DB has it.
type Auditor interface {
	AuditKey() string
	Checkpoint(ctx context.Context) ([]byte, error)
	AuditEntry(ctx context.Context, index uint64) (*lethe.AuditEntry, error)
	Proof(ctx context.Context, index, size uint64) (*lethe.Proof, error)
	ProofByEvent(ctx context.Context, eventID string) (*lethe.Proof, error)
	Consistency(ctx context.Context, from, to uint64) (*proofs.ConsistencyProof, error)
}

var _ Auditor = (*lethe.DB)(nil)

// AuditKeyResponse answers GET /api/audit/key.
type AuditKeyResponse struct {
	// Key is the log's note verifier key, for "lethe verify --log-key".
	Key string `json:"key"`
}

func (s *Server) auditKey(c *gin.Context) {
	c.JSON(http.StatusOK, AuditKeyResponse{Key: s.lib.AuditKey()})
}

// auditCheckpoint answers the latest signed checkpoint as its note text
// (c2sp.org/tlog-checkpoint), text/plain like a tlog's /checkpoint.
func (s *Server) auditCheckpoint(c *gin.Context) {
	note, err := s.lib.Checkpoint(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.Data(http.StatusOK, "text/plain; charset=utf-8", note)
}

func uintParam(field, v string) (uint64, error) {
	// Indexes and sizes are stored as signed 64-bit integers.
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > math.MaxInt64 {
		return 0, grains.FieldError(lethe.CodeInvalidArgument, field, "must be an integer in [0, 2^63-1]")
	}
	return n, nil
}

func (s *Server) auditEntry(c *gin.Context) {
	i, err := uintParam("index", c.Param("index"))
	if err != nil {
		s.fail(c, err)
		return
	}
	e, err := s.lib.AuditEntry(c.Request.Context(), i)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, e)
}

// auditProof answers GET /api/audit/proof?event=ID, or ?index=N[&size=S]
// (size 0 or absent: the latest checkpoint), as lethe.proof/v1 JSON or,
// with format=tlog-proof, as a c2sp.org/tlog-proof@v1 text file. An event
// not yet covered by a signed checkpoint answers 202 with code pending.
func (s *Server) auditProof(c *gin.Context) {
	ctx := c.Request.Context()
	format := c.DefaultQuery("format", "json")
	if format != "json" && format != "tlog-proof" {
		s.fail(c, grains.FieldError(lethe.CodeInvalidArgument, "format", "json or tlog-proof"))
		return
	}
	event, hasEvent := c.GetQuery("event")
	index, hasIndex := c.GetQuery("index")
	size, hasSize := c.GetQuery("size")
	var p *lethe.Proof
	var err error
	switch {
	case hasEvent && (hasIndex || hasSize):
		err = grains.Errorf(lethe.CodeInvalidArgument, "give event, or index (and size), not both")
	case hasEvent:
		p, err = s.lib.ProofByEvent(ctx, event) // a malformed id is invalid_argument, unquoted
	case hasIndex:
		var i, n uint64
		if i, err = uintParam("index", index); err != nil {
			break
		}
		if hasSize {
			if n, err = uintParam("size", size); err != nil {
				break
			}
		}
		p, err = s.lib.Proof(ctx, i, n)
	default:
		err = grains.Errorf(lethe.CodeInvalidArgument, "give event=ID, or index=N (and size=S)")
	}
	if err != nil {
		s.fail(c, err)
		return
	}
	if format == "tlog-proof" {
		b, err := p.MarshalTlogProof()
		if err != nil {
			s.fail(c, grains.Wrap(lethe.CodeInternal, "encode the proof as a tlog-proof", err))
			return
		}
		c.Data(http.StatusOK, "text/plain; charset=utf-8", b)
		return
	}
	c.JSON(http.StatusOK, p)
}

func (s *Server) auditConsistency(c *gin.Context) {
	from, err := uintParam("from", c.Query("from"))
	if err != nil {
		s.fail(c, err)
		return
	}
	to, err := uintParam("to", c.Query("to"))
	if err != nil {
		s.fail(c, err)
		return
	}
	p, err := s.lib.Consistency(c.Request.Context(), from, to)
	if err != nil {
		s.fail(c, err)
		return
	}
	b, err := p.Marshal()
	if err != nil {
		s.fail(c, grains.Wrap(lethe.CodeInternal, "marshal consistency proof", err))
		return
	}
	c.Data(http.StatusOK, "application/json", b)
}
