package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/lethe-io/lethe/internal/grains"
)

func TestStatusTable(t *testing.T) {
	tests := []struct {
		code grains.Code
		want int
	}{
		{grains.CodeInvalidArgument, 400}, {grains.CodeEmptyGrain, 400}, {grains.CodeTooLarge, 400},
		{grains.CodeInvalidScope, 400}, {grains.CodeInvalidMemory, 400}, {grains.CodeEmptySelector, 400},
		{grains.CodeNotFound, 404}, {grains.CodeAlreadySuperseded, 409}, {grains.CodeConflict, 409},
		{grains.CodeErased, 404}, {grains.CodeHeld, 423}, {grains.CodeProtected, 409},
		{grains.CodeUnavailable, 503}, {grains.CodePending, 202}, {grains.CodeInternal, 500}, {grains.CodeDimensionMismatch, 400},
		{grains.CodeNoChain, 404}, {grains.CodeURLRefused, 400},
		{grains.CodeFourEyes, 403}, {grains.CodeInvalidState, 409},
		{CodeUnauthorized, 401}, {CodeForbidden, 403}, {CodePayloadTooLarge, 413},
		{CodeUnsupportedMediaType, 415}, {CodeMethodNotAllowed, 405}, {CodeRouteNotFound, 404},
		{CodeDeadlineExceeded, 504}, {"no_such_code", 500},
	}
	for _, tt := range tests {
		if got := Status(tt.code); got != tt.want {
			t.Errorf("Status(%s) = %d, want %d", tt.code, got, tt.want)
		}
	}
	if len(statuses) != len(tests)-1 {
		t.Errorf("the table has %d codes, the test %d: test the new ones", len(statuses), len(tests)-1)
	}
}

func TestResponse(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantBody   ErrorResponse
	}{
		{"domain", grains.FieldError(grains.CodeInvalidScope, "scope", "bad"), 400,
			ErrorResponse{Code: "invalid_scope", Message: "scope: bad", Field: "scope"}},
		{"cause hidden", grains.Wrap(grains.CodeUnavailable, "database unavailable", errors.New("dial 10.0.0.1: refused")), 503,
			ErrorResponse{Code: "unavailable", Message: "database unavailable"}},
		{"internal", grains.Wrap(grains.CodeInternal, "grain x does not decrypt", errors.New("boom")), 500,
			ErrorResponse{Code: "internal", Message: "internal error"}},
		{"foreign", errors.New("sql: something personal"), 500, ErrorResponse{Code: "internal", Message: "internal error"}},
		{"unmapped code", &grains.Error{Code: "brand_new", Message: "details"}, 500, ErrorResponse{Code: "internal", Message: "internal error"}},
		{"deadline", grains.Wrap(grains.CodeUnavailable, "read", fmt.Errorf("x: %w", context.DeadlineExceeded)), 504,
			ErrorResponse{Code: "deadline_exceeded", Message: "the request did not finish in time"}},
		{"hint", &grains.Error{Code: grains.CodeEmptySelector, Message: "m", Hint: "h"}, http.StatusBadRequest,
			ErrorResponse{Code: "empty_selector", Message: "m", Hint: "h"}},
		// An erased grain is answered as grains.NoGrain is.
		{"erased", grains.Erased("m", "ab12", errors.New("a key of this grain's chain was erased")), 404,
			ErrorResponse{Code: "not_found", Message: "no grain ab12 in memory m"}},
		{"no grain", grains.NoGrain("m", "ab12"), 404, ErrorResponse{Code: "not_found", Message: "no grain ab12 in memory m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := response(tt.err)
			if status != tt.wantStatus || body != tt.wantBody {
				t.Errorf("response = %d %+v, want %d %+v", status, body, tt.wantStatus, tt.wantBody)
			}
		})
	}
}
