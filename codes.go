package lethe

import "github.com/lethe-io/lethe/internal/grains"

// The error codes. [ErrorCode] returns one of them for any error of the
// library; callers branch on the code, never on the message. A code never
// changes meaning once published. The HTTP API answers each with the status
// listed in docs/api.md; the command line prints it on a "code:" line and
// exits with status 1.
const (
	// CodeInvalidArgument is returned when a field is malformed or out of
	// range: a bad hash, a time in the future, a cursor from elsewhere, a
	// batch that mixes memories.
	CodeInvalidArgument = grains.CodeInvalidArgument
	// CodeEmptyGrain is returned by Add and Supersede for a grain with
	// neither a triple part nor content.
	CodeEmptyGrain = grains.CodeEmptyGrain
	// CodeTooLarge is returned when a value or a list exceeds its limit
	// (content, tags, a batch).
	CodeTooLarge = grains.CodeTooLarge
	// CodeInvalidScope is returned for a malformed scope path.
	CodeInvalidScope = grains.CodeInvalidScope
	// CodeInvalidMemory is returned for a malformed memory name.
	CodeInvalidMemory = grains.CodeInvalidMemory
	// CodeEmptySelector is returned when a forget, erasure or hold names
	// nothing: an empty selector never means everything.
	CodeEmptySelector = grains.CodeEmptySelector
	// CodeNotFound is returned when no grain, event, hold or checkpoint has
	// the given name in this memory.
	CodeNotFound = grains.CodeNotFound
	// CodeAlreadySuperseded is returned by Supersede when the grain already
	// has a newer version.
	CodeAlreadySuperseded = grains.CodeAlreadySuperseded
	// CodeConflict is returned when a write would duplicate a live grain,
	// when the version chains a forget deletes kept gaining versions
	// while it ran (it tried five times), or when PostgreSQL aborted the
	// call's transaction in a deadlock (a delete tries five times first):
	// nothing was changed; try again.
	CodeConflict = grains.CodeConflict
	// CodeErased is returned by Get, History and Supersede when a key in
	// the chain of the grain named was destroyed (crypto-erased), until the
	// cleaner deletes its row (then CodeNotFound). Its message is that of
	// a hash that names no grain; Forget and ArchiveGrains pass over such
	// a hash as one. lethe's surfaces answer it as CodeNotFound: see
	// [HideErasure].
	CodeErased = grains.CodeErased
	// CodeHeld is returned when a legal hold forbids a destructive call;
	// the refusal is audited.
	CodeHeld = grains.CodeHeld
	// CodeProtected is returned when a policy protects the grain from the
	// call; the error's Hint says which rule.
	CodeProtected = grains.CodeProtected
	// CodeUnavailable is returned when a dependency (the store, the KEK,
	// the audit log) cannot be reached, or a lock was not available in
	// time (SQLite busy, a PostgreSQL lock_timeout).
	CodeUnavailable = grains.CodeUnavailable
	// CodePending is returned by the proof calls when the event is
	// committed and audited but no signed checkpoint covers it yet.
	CodePending = grains.CodePending
	// CodeInternal is returned for a bug or a broken invariant, and by
	// [ErrorCode] for any error that is not lethe's; the details are in the
	// error's cause, never in its message.
	CodeInternal = grains.CodeInternal
	// CodeDimensionMismatch is returned by Add, AddBatch, Supersede and
	// Recall when an embedding's dimension differs from its memory's (fixed
	// by the first embedding written there).
	CodeDimensionMismatch = grains.CodeDimensionMismatch
	// CodeNoChain is returned by ExportHistory when neither the store nor
	// the audit log knows a version chain matching the selector (the HTTP
	// API answers 404).
	CodeNoChain = grains.CodeNoChain
	// CodeURLRefused is returned by AddHook for a URL whose host is, or
	// resolves to, a loopback, private, link-local, metadata or other
	// internal address (unless HooksConfig.AllowPrivate).
	CodeURLRefused = grains.CodeURLRefused
	// CodeFourEyes is returned when the token that filed an erasure request
	// tries to approve it: approval needs a second token (four eyes).
	CodeFourEyes = grains.CodeFourEyes
	// CodeInvalidState is returned when an erasure request's status does
	// not allow the call: approving a rejected request, executing one not
	// approved, executing or rejecting one already executed.
	CodeInvalidState = grains.CodeInvalidState
	// CodeForbidden is returned when the call's own confinement does not
	// allow it: a Forget whose Selector.Scopes or Selector.Namespace do not
	// hold every version of a chain it would delete. Nothing was changed or
	// audited. The HTTP API also answers it to a token without the role,
	// memory or scope.
	CodeForbidden = grains.CodeForbidden
)
