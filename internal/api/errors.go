package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lethe-io/lethe"
	"github.com/lethe-io/lethe/internal/grains"
)

// Codes the API adds to lethe's domain codes. Like those, they are stable.
const (
	CodeUnauthorized         lethe.Code = "unauthorized"           // no bearer token, or an unknown, revoked or expired one
	CodePayloadTooLarge      lethe.Code = "payload_too_large"      // the body exceeds the route's limit
	CodeUnsupportedMediaType lethe.Code = "unsupported_media_type" // a body that is not application/json
	CodeMethodNotAllowed     lethe.Code = "method_not_allowed"     // the route exists with other methods
	CodeRouteNotFound        lethe.Code = "route_not_found"        // no such route
	CodeDeadlineExceeded     lethe.Code = "deadline_exceeded"      // the request ran out of time
)

// CodeForbidden is answered to a valid token without the right: the
// library's code for a forget outside its selector's scopes.
const CodeForbidden = lethe.CodeForbidden

// statuses is THE table from error code to HTTP status. Every error the API
// answers goes through it; a code missing here is answered as internal.
var statuses = map[lethe.Code]int{
	lethe.CodeInvalidArgument:   http.StatusBadRequest,
	lethe.CodeEmptyGrain:        http.StatusBadRequest,
	lethe.CodeTooLarge:          http.StatusBadRequest, // a field over its limit; a body over its limit is payload_too_large
	lethe.CodeInvalidScope:      http.StatusBadRequest,
	lethe.CodeInvalidMemory:     http.StatusBadRequest,
	lethe.CodeEmptySelector:     http.StatusBadRequest,
	lethe.CodeNotFound:          http.StatusNotFound,
	lethe.CodeAlreadySuperseded: http.StatusConflict,
	lethe.CodeConflict:          http.StatusConflict,
	lethe.CodeErased:            http.StatusNotFound, // answered as not_found (grains.HideErasure): see response
	lethe.CodeHeld:              http.StatusLocked,   // 423: a legal hold locks the data against destruction
	lethe.CodeProtected:         http.StatusConflict,
	lethe.CodeUnavailable:       http.StatusServiceUnavailable,
	lethe.CodePending:           http.StatusAccepted, // committed and audited; no signed checkpoint covers it yet
	lethe.CodeInternal:          http.StatusInternalServerError,
	lethe.CodeDimensionMismatch: http.StatusBadRequest,
	lethe.CodeNoChain:           http.StatusNotFound,
	lethe.CodeURLRefused:        http.StatusBadRequest,
	lethe.CodeFourEyes:          http.StatusForbidden, // the same token cannot file and approve an erasure request
	lethe.CodeInvalidState:      http.StatusConflict,
	lethe.CodeForbidden:         http.StatusForbidden,
	CodeUnauthorized:            http.StatusUnauthorized,
	CodePayloadTooLarge:         http.StatusRequestEntityTooLarge,
	CodeUnsupportedMediaType:    http.StatusUnsupportedMediaType,
	CodeMethodNotAllowed:        http.StatusMethodNotAllowed,
	CodeRouteNotFound:           http.StatusNotFound,
	CodeDeadlineExceeded:        http.StatusGatewayTimeout,
}

// Status returns the HTTP status of code (500 for a code not in the table).
func Status(code lethe.Code) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// apiError returns an *lethe.Error with one of the API's codes.
func apiError(code lethe.Code, message, hint string) error {
	return &lethe.Error{Code: code, Message: message, Hint: hint}
}

// response returns the status and body for err. Internal errors, and codes
// the table does not know, get a fixed message: their text stays in the
// log.
//
// A grain whose key was destroyed is gone: the API says so as it says it
// of a hash that names nothing, in the same words (the library's erased
// error of a grain carries grains.NoGrain's message), so an erasure leaves
// no trace.
func response(err error) (int, ErrorResponse) {
	err = grains.HideErasure(err)
	code := lethe.ErrorCode(err)
	if errors.Is(err, context.DeadlineExceeded) {
		code = CodeDeadlineExceeded
	}
	status := Status(code)
	if code == CodeDeadlineExceeded {
		return status, ErrorResponse{Code: string(code), Message: "the request did not finish in time"}
	}
	if status == http.StatusInternalServerError {
		return status, ErrorResponse{Code: string(lethe.CodeInternal), Message: "internal error"}
	}
	body := ErrorResponse{Code: string(code), Message: publicMessage(err)}
	var le *lethe.Error
	if errors.As(err, &le) {
		body.Field, body.Hint = le.Field, le.Hint
	}
	return status, body
}

// publicMessage is the domain message with its field, without the cause.
func publicMessage(err error) string {
	var le *lethe.Error
	if !errors.As(err, &le) {
		return "internal error"
	}
	if le.Field != "" {
		return le.Field + ": " + le.Message
	}
	return le.Message
}

// fail answers err and aborts the chain. 5xx answers are logged with the
// error (whose causes never hold personal data); 4xx answers are not.
func (s *Server) fail(c *gin.Context, err error) {
	status, body := response(err)
	if body.Code == string(lethe.CodePending) {
		c.Header("Retry-After", "1")
	}
	if status >= 500 {
		level := slog.LevelError
		if status != http.StatusInternalServerError {
			level = slog.LevelWarn
		}
		s.log.LogAttrs(c.Request.Context(), level, "request failed",
			slog.String("route", routeOf(c)), slog.Int("status", status),
			slog.String("code", body.Code), slog.Any("error", err))
	}
	c.AbortWithStatusJSON(status, body)
}
