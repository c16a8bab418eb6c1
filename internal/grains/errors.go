package grains

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error code. Codes are part of lethe's
// public contract: the HTTP API sends them, the CLI prints them, and callers
// branch on them. A code never changes meaning once published.
type Code string

// The codes. Their HTTP statuses live in one table in internal/api.
const (
	CodeInvalidArgument   Code = "invalid_argument"   // a field is malformed or out of range
	CodeEmptyGrain        Code = "empty_grain"        // neither a triple part nor content
	CodeTooLarge          Code = "too_large"          // a value exceeds its size limit
	CodeInvalidScope      Code = "invalid_scope"      // a scope path is malformed
	CodeInvalidMemory     Code = "invalid_memory"     // a memory name is malformed
	CodeEmptySelector     Code = "empty_selector"     // a forget names nothing to forget
	CodeNotFound          Code = "not_found"          // no such grain in this memory
	CodeAlreadySuperseded Code = "already_superseded" // the grain already has a newer version
	CodeConflict          Code = "conflict"           // the write would duplicate a live grain, or a forget's chains kept changing
	CodeErased            Code = "erased"             // a key in the grain's chain was destroyed
	CodeHeld              Code = "held"               // a legal hold forbids this destructive call
	CodeProtected         Code = "protected"          // a policy protects the grain from this call
	CodeUnavailable       Code = "unavailable"        // a dependency (store, KEK, log) cannot be reached
	CodePending           Code = "pending"            // committed and audited, but no signed checkpoint covers it yet
	CodeInternal          Code = "internal"           // a bug or an invariant broken; details are logged, not returned
	CodeDimensionMismatch Code = "dimension_mismatch" // an embedding's dimension differs from its memory's
	CodeNoChain           Code = "no_chain"           // a history export's selector matches no version chain
	CodeURLRefused        Code = "url_refused"        // a hook URL names or resolves to an internal address
	CodeFourEyes          Code = "four_eyes"          // an erasure request's requester tried to approve it
	CodeInvalidState      Code = "invalid_state"      // an erasure request's status does not allow the call
	CodeForbidden         Code = "forbidden"          // the call's own confinement (a forget's Selector.Scopes or Namespace) does not allow it
)

// Error is a domain error: a stable Code, the field it concerns (if any),
// and a message that is safe to show to a client. Messages never contain
// personal data (user ids, subjects, objects, content, tags, metadata).
type Error struct {
	Code    Code
	Field   string
	Message string
	Hint    string
	Err     error // the cause, for logs; never shown to clients
}

func (e *Error) Error() string {
	msg := e.Message
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted message. The arguments
// must not be personal data.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NoGrain is the not_found error for a hash that names no grain of memory
// ("" means the default memory). Every path that must not tell a hidden
// grain from a missing one (a scope-limited token, a locked MCP session)
// answers with it, so the answers stay identical.
func NoGrain(memory, hash string) *Error {
	if memory == "" {
		memory = DefaultMemory
	}
	return Errorf(CodeNotFound, "no grain %s in memory %s", hash, memory)
}

// NoAuditEvent is the not_found error for an event id that names no
// committed audit event. A reader that may not see the event's leaf (see
// lethe.AuditView) hears it too, pending or not, so the answers stay
// identical.
func NoAuditEvent(id string) *Error {
	return Errorf(CodeNotFound, "no audit event %s", id)
}

// NoAuditLeaf is the not_found error for an index the audit log holds no
// leaf at (at or beyond the size of the tree asked about). A reader that
// may not see the leaf at index hears it too, so the answers stay
// identical.
func NoAuditLeaf(index uint64) *Error {
	return Errorf(CodeNotFound, "no audit event at index %d", index)
}

// Erased is the error of a call that names, by hash, a grain of memory
// ("" means the default memory) whose key was destroyed: code erased, for
// library callers that branch on it, with NoGrain's message and no field
// or hint, so that a surface that answers it as not_found (see
// HideErasure) says what it says of a hash that names nothing. cause is
// kept for logs.
func Erased(memory, hash string, cause error) *Error {
	e := NoGrain(memory, hash)
	e.Code, e.Err = CodeErased, cause
	return e
}

// HideErasure returns err as lethe's wire surfaces (the HTTP API, CAL, MCP,
// the command line) report it: an error with code erased becomes a
// not_found error with the same message, field and hint, without its
// cause; any other error is returned as it is. A grain is erased for
// every client as if it never was.
func HideErasure(err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeErased {
		return err
	}
	return &Error{Code: CodeNotFound, Field: e.Field, Message: e.Message, Hint: e.Hint}
}

// NoHold is the not_found error for a hold id that names no active hold of
// memory: what a scope-limited token hears of a hold it cannot see, too.
func NoHold(memory, id string) *Error {
	if memory == "" {
		memory = DefaultMemory
	}
	return Errorf(CodeNotFound, "no active hold %s in memory %s", id, memory)
}

// NoGrains is the not_found error for a list of hashes none of which names
// a grain of memory ("" means the default memory): what an archive of
// such a list answers, and what a scope-limited token hears of a list
// whose grains are all outside its scopes.
func NoGrains(memory string) *Error {
	if memory == "" {
		memory = DefaultMemory
	}
	return Errorf(CodeNotFound, "no such grain in memory %s", memory)
}

// FieldError returns an *Error about one field.
func FieldError(code Code, field, message string) *Error {
	return &Error{Code: code, Field: field, Message: message}
}

// Wrap returns an *Error with code and message that carries err as its
// cause. The cause is for logs only.
func Wrap(code Code, message string, err error) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, CodeInternal
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// PublicMessage returns what may be shown to a client for err: the domain
// message (without the cause) for an *Error, a fixed text otherwise.
func PublicMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != CodeInternal {
		if e.Field != "" {
			return e.Field + ": " + e.Message
		}
		return e.Message
	}
	return "internal error"
}

// AtIndex names the position of a grain's error in a batch of n: its
// field becomes grains[i].field, or grains[i] if it had none. A batch of one, or an error that is not
// an *Error, is returned as it is.
func AtIndex(err error, i, n int) error {
	var e *Error
	if n > 1 && errors.As(err, &e) {
		c := *e
		c.Field = fmt.Sprintf("grains[%d]", i)
		if e.Field != "" {
			c.Field += "." + e.Field
		}
		return &c
	}
	return err
}
