package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// Forgetter is what the forgetting-policy routes need of the library;
// *lethe.DB has it.
type Forgetter interface {
	ForceForget(ctx context.Context, sel lethe.Selector) (*lethe.ForgetResult, error)
	PurgeStale(ctx context.Context, opts lethe.PurgeOptions) (*lethe.PurgeResult, error)
	Archive(ctx context.Context, memory string, opts lethe.ArchiveOptions) (*lethe.ArchiveResult, error)
	ArchiveGrains(ctx context.Context, memory string, hashes []string) (*lethe.ArchiveResult, error)
	ShouldArchive(ctx context.Context, memory string) ([]string, error)
	RiskSweep(ctx context.Context, memory string, opts lethe.RiskOptions) (*lethe.RiskResult, error)
}

var _ Forgetter = (*lethe.DB)(nil)

// purgeStale runs the decay purge on the memory. It spans scopes, so a
// scope-limited token cannot.
func (s *Server) purgeStale(c *gin.Context, req *PurgeRequest) (reply, error) {
	if tokenOf(c).Scoped() {
		return nil, unscopedOnly("run the decay purge")
	}
	res, err := s.lib.PurgeStale(c.Request.Context(), req.Options(c.Param("memory")))
	if err != nil {
		return nil, err
	}
	return receiptReply{res.Receipt, res}, nil
}

// archive archives named grains ({"hashes": [...]}) or runs the archive
// ladder. A scope-limited token may archive grains within its scopes, not
// run the ladder.
func (s *Server) archive(c *gin.Context, req *ArchiveRequest) (reply, error) {
	memory, ctx, tok := c.Param("memory"), c.Request.Context(), tokenOf(c)
	var res *lethe.ArchiveResult
	var err error
	if req.Hashes != nil {
		if req.Trigger != "" || req.DryRun {
			return nil, grains.Errorf(lethe.CodeInvalidArgument, "archive hashes, or run the ladder with trigger and dry_run: not both")
		}
		if tok.Scoped() {
			if len(req.Hashes) > grains.MaxBatch {
				return nil, grains.FieldError(lethe.CodeTooLarge, "hashes", "at most 10000 hashes")
			}
			for _, h := range req.Hashes {
				g, err := s.lib.Get(ctx, memory, h)
				if code := lethe.ErrorCode(err); code == lethe.CodeNotFound {
					continue
				}
				if err != nil {
					return nil, err
				}
				if !tok.AllowsScope(g.Scope) {
					return nil, outOfScope("hashes")
				}
			}
		}
		res, err = s.lib.ArchiveGrains(ctx, memory, req.Hashes)
	} else {
		if tok.Scoped() {
			return nil, unscopedOnly("run the archive ladder")
		}
		res, err = s.lib.Archive(ctx, memory, lethe.ArchiveOptions{Trigger: lethe.Trigger(req.Trigger), DryRun: req.DryRun})
	}
	if err != nil {
		return nil, err
	}
	return receiptReply{res.Receipt, res}, nil
}

// archiveCandidates lists the grains whose retrieval score says they
// should be archived (changes nothing).
func (s *Server) archiveCandidates(c *gin.Context) {
	if tokenOf(c).Scoped() {
		s.fail(c, unscopedOnly("list archive candidates"))
		return
	}
	hs, err := s.lib.ShouldArchive(c.Request.Context(), c.Param("memory"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if hs == nil {
		hs = []string{}
	}
	c.JSON(http.StatusOK, HashList{Hashes: hs})
}

// riskSweep runs the risk sweep on the memory; a scope-limited token
// cannot.
func (s *Server) riskSweep(c *gin.Context, req *RiskSweepRequest) (reply, error) {
	if tokenOf(c).Scoped() {
		return nil, unscopedOnly("run the risk sweep")
	}
	res, err := s.lib.RiskSweep(c.Request.Context(), c.Param("memory"), lethe.RiskOptions{Batch: req.Batch, DryRun: req.DryRun})
	if err != nil {
		return nil, err
	}
	return receiptReply{res.Receipt, res}, nil
}
