package api

import (
	"context"
	"math"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/proofs"
)

// Auditor is what the audit routes need of the library; *lethe.DB has it.
type Auditor interface {
	AuditKey() string
	Checkpoint(ctx context.Context) ([]byte, error)
	// AuditView reads entries and proofs of the leaves visible accepts
	// (nil: every leaf); any other leaf answers as one that does not exist.
	AuditView(visible func(*proofs.Leaf) bool) *lethe.AuditView
	Consistency(ctx context.Context, from, to uint64) (*proofs.ConsistencyProof, error)
}

// leafFilter says which audit leaves tok may read, nil for every leaf. A
// leaf names its memory and its actor (the token that caused it), never a
// scope:
//
//   - a token for every memory, without a scope limit, reads every leaf;
//   - a leaf that names no memory (kek.rotate, kek.trim) is read by every
//     token the route allows: it names a key-encryption key's versions, no
//     memory and no grain, and it is what shows an erasure's keys dead in
//     every copy (lethe verify --finality);
//   - a leaf of a memory the token may not use is hidden;
//   - a scope-limited token reads, of its memories' leaves, those it caused:
//     the hashes in the others may name grains outside its scopes, which it
//     never learns (docs/api.md).
//
// A hidden leaf answers as one that does not exist (lethe.AuditView).
func leafFilter(tok *auth.Token) func(*proofs.Leaf) bool {
	if tok.AllowsMemory(auth.AllMemories) && !tok.Scoped() {
		return nil
	}
	return func(l *proofs.Leaf) bool {
		switch {
		case l.Memory == "":
			return true
		case !tok.AllowsMemory(l.Memory):
			return false
		}
		return !tok.Scoped() || l.Actor == tok.ID
	}
}

// auditView is the audit log as the request's token may read it.
func (s *Server) auditView(c *gin.Context) *lethe.AuditView {
	return s.lib.AuditView(leafFilter(tokenOf(c)))
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

// uintParam reads an audit log index or size: a decimal integer in
// [0, 2^63-1] (they are stored as signed 64-bit integers), written as
// strconv writes it: 00001 or +1 would be a second name for leaf 1.
func uintParam(field, v string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > math.MaxInt64 || v != strconv.FormatUint(n, 10) {
		return 0, grains.FieldError(lethe.CodeInvalidArgument, field,
			"must be an integer in [0, 2^63-1], in decimal without leading zeros")
	}
	return n, nil
}

func (s *Server) auditEntry(c *gin.Context) {
	i, err := uintParam("index", c.Param("index"))
	if err != nil {
		s.fail(c, err)
		return
	}
	e, err := s.auditView(c).AuditEntry(c.Request.Context(), i)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, e)
}

// auditProof answers GET /api/audit/proof?event=ID, or ?index=N[&size=S]
// (size 0 or absent: the latest checkpoint), as lethe.proof/v1 JSON or,
// with format=tlog-proof, as a c2sp.org/tlog-proof@v1 text file. An event
// not yet covered by a signed checkpoint answers 202 with code pending. A
// leaf the token may not read (leafFilter) answers 404 as one that does
// not exist, pending or not.
func (s *Server) auditProof(c *gin.Context) {
	ctx := c.Request.Context()
	view := s.auditView(c)
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
		p, err = view.ProofByEvent(ctx, event) // a malformed id is invalid_argument, unquoted
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
		p, err = view.Proof(ctx, i, n)
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
