package api

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// handle returns the handler of a route with a JSON body: it decodes the
// body into a Req (at most Config.MaxBody bytes), calls do with it, and
// answers do's error through fail, or its reply.
func handle[Req any](s *Server, do func(c *gin.Context, req *Req) (reply, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		var req Req
		b, err := decode(c, s.cfg.MaxBody, &req)
		if err != nil {
			s.fail(c, err)
			return
		}
		if k, ok := any(&req).(keysReader); ok {
			k.readKeys(b)
		}
		if e, ok := any(&req).(emptyRefuser); ok {
			if err := refuseEmpty(b, e.refusedEmpty()); err != nil {
				s.fail(c, err)
				return
			}
		}
		r, err := do(c, &req)
		if err != nil {
			s.fail(c, err)
			return
		}
		r.send(c)
	}
}

// queryParam returns the query parameter name, "" when it is left out. A
// parameter given empty (?status=) is 400 invalid_argument naming it: an
// empty value is never "every value", as an empty recall filter is not.
func queryParam(c *gin.Context, name string) (string, error) {
	v, ok := c.GetQuery(name)
	if ok && v == "" {
		return "", grains.FieldError(lethe.CodeInvalidArgument, name, "empty: leave the parameter out")
	}
	return v, nil
}

// keysReader is a request that also needs the keys its body gives, not
// only their values (a supersede tells "content": "" from no content).
type keysReader interface {
	readKeys(body []byte)
}

// emptyRefuser is a request whose fields refusedEmpty names are refused
// when the body gives them as "", not read as left out: an enum's or a
// namespace's empty value is never a default.
type emptyRefuser interface {
	refusedEmpty() []string
}

// refuseEmpty answers 400 invalid_argument naming the first of fields the
// JSON object body gives as "".
func refuseEmpty(body []byte, fields []string) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	for _, f := range fields {
		if string(m[f]) == `""` {
			return grains.FieldError(lethe.CodeInvalidArgument, f, "empty: leave the field out")
		}
	}
	return nil
}

// A reply is the answer to a request a handler served.
type reply interface {
	send(c *gin.Context)
}

// jsonReply answers body as JSON with status.
type jsonReply struct {
	status int
	body   any
}

func (r jsonReply) send(c *gin.Context) { c.JSON(r.status, r.body) }

// receiptReply answers body, a destructive call's result: 200 with the
// proof, or 202 with the signed receipt and the link to the proof while no
// signed checkpoint covers the event yet.
type receiptReply struct {
	receipt *lethe.Receipt
	body    any
}

func (r receiptReply) send(c *gin.Context) {
	if r.receipt != nil && r.receipt.Pending {
		c.Header("Location", "/api/audit/proof?event="+url.QueryEscape(r.receipt.EventID))
		c.Header("Retry-After", "1")
		c.JSON(http.StatusAccepted, r.body)
		return
	}
	c.JSON(http.StatusOK, r.body)
}
