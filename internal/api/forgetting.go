package api

import (
	"context"
	"net/http"
	"slices"

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
		hashes := req.Hashes
		if tok.Scoped() {
			if hashes, err = s.visibleHashes(c, memory, req.Hashes); err != nil {
				return nil, err
			}
		}
		res, err = s.lib.ArchiveGrains(ctx, memory, hashes)
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

// visibleHashes returns the hashes of an archive by a scope-limited token
// that name grains within its scopes. A hash outside them is no grain to
// the token: passed over as a missing one is, and when none is left the
// answer is the library's for a list that names no grain. A list the
// library refuses whatever it holds (empty, too long, malformed) is
// returned as it is, for the library's refusal.
func (s *Server) visibleHashes(c *gin.Context, memory string, hashes []string) ([]string, error) {
	if len(hashes) == 0 || len(hashes) > grains.MaxBatch || slices.ContainsFunc(hashes, func(h string) bool { return !grains.ValidHash(h) }) {
		return hashes, nil
	}
	var kept []string
	v := s.view(c, memory)
	for _, h := range hashes {
		_, err := v.Grain(c.Request.Context(), h) // outside the token's scopes: not found
		if code := lethe.ErrorCode(err); code == lethe.CodeNotFound || code == lethe.CodeErased {
			continue
		}
		if err != nil {
			return nil, err
		}
		kept = append(kept, h)
	}
	if kept == nil {
		return nil, grains.NoGrains(memory)
	}
	return kept, nil
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
