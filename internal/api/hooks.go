package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/auth"
	"github.com/lethe-io/lethe/internal/grains"
	"github.com/lethe-io/lethe/internal/hooks"
)

// Hooker is what the webhook routes need of the library; *lethe.DB has it.
type Hooker interface {
	AddHook(ctx context.Context, spec lethe.HookSpec) (*lethe.HookSecret, error)
	Hooks(ctx context.Context, memory string) ([]lethe.Hook, error)
	RemoveHook(ctx context.Context, memory, id string) error
	RotateHookSecret(ctx context.Context, memory, id string, overlap time.Duration) (*lethe.HookSecret, error)
	HookDeliveries(ctx context.Context, memory, id, state string) ([]lethe.HookDelivery, error)
	Redeliver(ctx context.Context, memory, id string, delivery int64) (int64, error)
	HookStats(ctx context.Context) (lethe.HookStats, error)
}

var _ Hooker = (*lethe.DB)(nil)

// HookRequest is the body of POST .../hooks.
type HookRequest struct {
	URL    string   `json:"url"`
	Events []string `json:"events"`
}

// HookList answers GET .../hooks.
type HookList struct {
	Hooks []lethe.Hook `json:"hooks"`
}

// RotateHookRequest is the body of POST .../hooks/{id}/rotate: how long
// the previous secret keeps signing (default 86400).
type RotateHookRequest struct {
	OverlapSeconds int64 `json:"overlap_seconds"`
}

// DeliveryList answers GET .../hooks/{id}/deliveries.
type DeliveryList struct {
	Deliveries []lethe.HookDelivery `json:"deliveries"`
}

// RedeliverRequest is the body of POST .../hooks/{id}/redeliver: one dead
// delivery by id, or every dead delivery of the hook when 0 or absent.
type RedeliverRequest struct {
	DeliveryID int64 `json:"delivery_id"`
}

// Redelivered answers POST .../hooks/{id}/redeliver.
type Redelivered struct {
	Redelivered int64 `json:"redelivered"`
}

// hookRoutes adds the webhook routes under a memory: admin or dpo, with
// a token not limited to scopes (a hook sees the whole memory's events).
func (s *Server) hookRoutes(m *gin.RouterGroup) {
	h := m.Group("/hooks", s.allow(auth.DPO), s.unscoped)
	h.GET("", s.listHooks)
	h.POST("", handle(s, s.addHook))
	h.GET("/:id", s.getHook)
	h.DELETE("/:id", s.removeHook)
	h.POST("/:id/rotate", handle(s, s.rotateHook))
	h.GET("/:id/deliveries", s.hookDeliveries)
	h.POST("/:id/redeliver", handle(s, s.redeliver))
}

// unscoped refuses a token limited to scopes.
func (s *Server) unscoped(c *gin.Context) {
	if tokenOf(c).Scoped() {
		s.fail(c, unscopedOnly("manage hooks"))
		c.Abort()
	}
}

func (s *Server) addHook(c *gin.Context, req *HookRequest) (reply, error) {
	h, err := s.lib.AddHook(c.Request.Context(), lethe.HookSpec{Memory: c.Param("memory"), URL: req.URL, Events: req.Events})
	if err != nil {
		return nil, err
	}
	return jsonReply{http.StatusCreated, h}, nil
}

func (s *Server) listHooks(c *gin.Context) {
	hs, err := s.lib.Hooks(c.Request.Context(), c.Param("memory"))
	if err != nil {
		s.fail(c, err)
		return
	}
	if hs == nil {
		hs = []lethe.Hook{}
	}
	c.JSON(http.StatusOK, HookList{Hooks: hs})
}

// getHook answers one hook as the list shows it (no secret); an id that
// names no hook of the memory is answered as the other hook routes answer
// it.
func (s *Server) getHook(c *gin.Context) {
	memory, id := c.Param("memory"), c.Param("id")
	if err := hooks.CheckID(id); err != nil {
		s.fail(c, err)
		return
	}
	hs, err := s.lib.Hooks(c.Request.Context(), memory)
	if err != nil {
		s.fail(c, err)
		return
	}
	for _, h := range hs {
		if h.ID == id {
			c.JSON(http.StatusOK, h)
			return
		}
	}
	s.fail(c, grains.Errorf(lethe.CodeNotFound, "no hook %s in memory %s", id, memory))
}

func (s *Server) removeHook(c *gin.Context) {
	if err := s.lib.RemoveHook(c.Request.Context(), c.Param("memory"), c.Param("id")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) rotateHook(c *gin.Context, req *RotateHookRequest) (reply, error) {
	if req.OverlapSeconds < 0 || req.OverlapSeconds > 30*86400 {
		return nil, grains.FieldError(lethe.CodeInvalidArgument, "overlap_seconds", "must be between 0 and 2592000 (30 days)")
	}
	h, err := s.lib.RotateHookSecret(c.Request.Context(), c.Param("memory"), c.Param("id"), time.Duration(req.OverlapSeconds)*time.Second)
	if err != nil {
		return nil, err
	}
	return jsonReply{http.StatusOK, h}, nil
}

func (s *Server) hookDeliveries(c *gin.Context) {
	state, err := queryParam(c, "state")
	if err != nil {
		s.fail(c, err)
		return
	}
	ds, err := s.lib.HookDeliveries(c.Request.Context(), c.Param("memory"), c.Param("id"), state)
	if err != nil {
		s.fail(c, err)
		return
	}
	if ds == nil {
		ds = []lethe.HookDelivery{}
	}
	c.JSON(http.StatusOK, DeliveryList{Deliveries: ds})
}

func (s *Server) redeliver(c *gin.Context, req *RedeliverRequest) (reply, error) {
	if req.DeliveryID < 0 {
		return nil, grains.FieldError(lethe.CodeInvalidArgument, "delivery_id", "must be positive, or 0 for every dead delivery")
	}
	n, err := s.lib.Redeliver(c.Request.Context(), c.Param("memory"), c.Param("id"), req.DeliveryID)
	if err != nil {
		return nil, err
	}
	return jsonReply{http.StatusOK, Redelivered{Redelivered: n}}, nil
}

// hookCollector exports the webhook metrics at scrape time: deliveries
// accepted, attempts failed, deliveries dead-lettered and hooks paused by
// this process, and the shared queue's depth, dead letters, oldest pending
// age and paused hooks. No label carries a memory, a URL or anything
// personal.
type hookCollector struct {
	lib                                  Hooker
	delivered, failed, deadTotal, pauses *prometheus.Desc
	pending, dead, oldest, paused        *prometheus.Desc
}

func newHookCollector(lib Hooker) *hookCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &hookCollector{lib: lib,
		delivered: d("lethe_hook_deliveries_total", "Webhook deliveries a receiver accepted (this process)."),
		failed:    d("lethe_hook_failures_total", "Webhook delivery attempts that failed (this process)."),
		deadTotal: d("lethe_hook_dead_letters_total", "Webhook deliveries moved to the dead-letter state (this process)."),
		pending:   d("lethe_hook_queue_depth", "Webhook deliveries pending, all replicas."),
		dead:      d("lethe_hook_dead_letters", "Webhook deliveries in the dead-letter state, all replicas."),
		oldest:    d("lethe_hook_oldest_pending_seconds", "Age of the oldest pending webhook delivery (0 if none)."),
		pauses:    d("lethe_hook_pauses_total", "Failed webhook attempts that paused their hook, or paused it again (this process)."),
		paused:    d("lethe_hook_paused", "Webhooks paused after consecutive failed attempts, or probing once the pause ended, all replicas."),
	}
}

func (h *hookCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{h.delivered, h.failed, h.deadTotal, h.pauses, h.pending, h.dead, h.oldest, h.paused} {
		ch <- d
	}
}

func (h *hookCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := h.lib.HookStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(h.pending, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(h.delivered, prometheus.CounterValue, float64(st.Delivered))
	ch <- prometheus.MustNewConstMetric(h.failed, prometheus.CounterValue, float64(st.Failed))
	ch <- prometheus.MustNewConstMetric(h.deadTotal, prometheus.CounterValue, float64(st.DeadLettered))
	ch <- prometheus.MustNewConstMetric(h.pending, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(h.dead, prometheus.GaugeValue, float64(st.Dead))
	ch <- prometheus.MustNewConstMetric(h.oldest, prometheus.GaugeValue, st.OldestPending.Seconds())
	ch <- prometheus.MustNewConstMetric(h.pauses, prometheus.CounterValue, float64(st.Pauses))
	ch <- prometheus.MustNewConstMetric(h.paused, prometheus.GaugeValue, float64(st.Paused))
}
