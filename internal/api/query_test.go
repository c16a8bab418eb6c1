package api_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/lethe-io/lethe/internal/api"
)

// TestRepeatedQueryParameter: a query parameter given twice is 400
// invalid_argument naming it, as a key repeated in a JSON body is: it was
// read as its first value, so ?status=pending&status=executed listed the
// pending requests only, as if the second were not there.
func TestRepeatedQueryParameter(t *testing.T) {
	f := newFixture(t, sqliteBackend, nil)
	admin := f.token("admin", []string{"*"})
	f.add(admin, "default", api.GrainInput{Type: "fact", Subject: alice})
	event := strings.Repeat("a", 32)
	m := "/api/memories/default"
	for _, c := range []struct{ path, field string }{
		{"/api/audit/proof?index=0&index=1", "index"},
		{"/api/audit/proof?index=0&size=1&size=2", "size"},
		{"/api/audit/proof?event=" + event + "&event=" + event, "event"},
		{"/api/audit/proof?index=0&format=json&format=tlog-proof", "format"},
		{"/api/audit/consistency?from=1&to=1&from=1", "from"},
		{m + "/erasure-requests?status=pending&status=executed", "status"},
		{m + "/erasure-requests?due_before=" + url.QueryEscape("2030-01-01T00:00:00Z") + "&due_before=" + url.QueryEscape("2031-01-01T00:00:00Z"), "due_before"},
		{m + "/erasure-requests?overdue=true&overdue=false", "overdue"},
		{m + "/erasure-requests/" + strings.Repeat("0", 32) + "/certificate?format=json&format=html", "format"},
		{m + "/hooks/hk_0000000000000000/deliveries?state=dead&state=pending", "state"},
	} {
		f.wantField(f.call(admin, "GET", c.path, nil), 400, "invalid_argument", c.field)
	}
	// Given once, each is read: the routes answer past their parameters.
	f.want(f.call(admin, "GET", m+"/erasure-requests?status=pending&overdue=false", nil), 200, "")
	f.want(f.call(admin, "GET", m+"/hooks/hk_0000000000000000/deliveries?state=dead", nil), 404, "not_found")
}
