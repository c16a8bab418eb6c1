package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/cal"
	"github.com/lethe-io/lethe/internal/grains"
)

// calRole is the role each statement needs: the role of the route that
// does the same thing.
func calRole(st cal.Statement) auth.Role {
	switch st.(type) {
	case *cal.Forget:
		return auth.DPO // POST .../forget
	case *cal.Supersede:
		return auth.Writer // POST .../supersede
	}
	return auth.Reader // GET .../history, POST .../recall
}

// calStatement answers POST .../cal: one CAL statement in a text/cal body,
// answered in JSON. Each statement is checked and run exactly as the route
// that does the same thing: the same role, the same scope rules of a
// scope-limited token, the same library call with its holds and
// protection.
func (s *Server) calStatement(c *gin.Context) {
	src, err := readCAL(c, min(s.cfg.MaxBody, cal.MaxLen))
	if err != nil {
		s.fail(c, err)
		return
	}
	st, err := cal.Parse(src)
	if err != nil {
		s.fail(c, err)
		return
	}
	if role := calRole(st); !tokenOf(c).Has(role) {
		s.fail(c, apiError(CodeForbidden, "this token's roles do not allow this statement",
			"it needs the "+string(role)+" role"))
		return
	}
	res, err := cal.Exec(c.Request.Context(), calDB{s, c}, c.Param("memory"), st)
	if err != nil {
		s.fail(c, err)
		return
	}
	switch r := res.(type) {
	case *cal.ForgetResult:
		receiptReply{r.Receipt, r}.send(c)
	case *cal.SupersedeResult:
		c.JSON(http.StatusCreated, r)
	default:
		c.JSON(http.StatusOK, r)
	}
}

// readCAL reads a text/cal body of at most limit bytes: 415 for another
// media type, 413 past the limit.
func readCAL(c *gin.Context, limit int64) (string, error) {
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != "text/cal" {
		return "", apiError(CodeUnsupportedMediaType, "the body must be text/cal", "send Content-Type: text/cal")
	}
	tooBig := apiError(CodePayloadTooLarge, "a CAL statement is at most "+strconv.FormatInt(limit, 10)+" bytes", "")
	if c.Request.ContentLength > limit {
		return "", tooBig
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return "", tooBig
	case err != nil:
		return "", grains.Wrap(lethe.CodeInvalidArgument, "the body could not be read", err)
	case len(bytes.TrimSpace(b)) == 0:
		return "", grains.FieldError(lethe.CodeInvalidArgument, "cal", "a statement is required")
	}
	return string(b), nil
}

// calDB runs CAL's library calls through the routes' checks for the
// request's token.
type calDB struct {
	s *Server
	c *gin.Context
}

var _ cal.DB = calDB{}

func (d calDB) Get(_ context.Context, memory, hash string) (*lethe.Grain, error) {
	return d.s.grain(d.c, memory, hash)
}

func (d calDB) History(_ context.Context, memory, hash string) ([]lethe.Grain, error) {
	return d.s.chain(d.c, memory, hash)
}

func (d calDB) Recall(_ context.Context, q lethe.Query) (*lethe.Page, error) {
	return d.s.recallQuery(d.c, q)
}

func (d calDB) Forget(_ context.Context, sel lethe.Selector) (*lethe.ForgetResult, error) {
	return d.s.forgetSelected(d.c, sel, false)
}

func (d calDB) Supersede(_ context.Context, oldHash string, g lethe.Grain, set ...string) (string, error) {
	return d.s.supersedeGrain(d.c, g.Memory, oldHash, g, set...)
}
