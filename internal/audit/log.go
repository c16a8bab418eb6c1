// Package audit keeps lethe's tamper-evident record of forgets and erasures.
//
// # Log backends
//
// A [Log] is an append-only RFC 6962 Merkle tree whose leaf indices lethe
// assigns (the leaf bytes come from proofs; the outbox sequencer
// numbers them). [EmbeddedLog] keeps the tree in lethe's own database through
// gorm; [TrillianLog] uses a Trillian PREORDERED_LOG tree. Every proof either
// backend returns has been verified against that backend's root first.
package audit

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Log is an append-only [RFC 6962] Merkle log whose leaf indices lethe
// assigns. Two implementations exist: [EmbeddedLog] (nodes kept in lethe's own
// database) and [TrillianLog] (a Trillian PREORDERED_LOG tree). Both hash with
// RFC 6962 SHA-256, so one stream of leaves gives byte-identical roots and
// proofs on either.
//
// The "appended size" is the number of leaves the log has accepted; the
// "integrated size" is the number covered by its latest root. The embedded log
// integrates during Append; Trillian integrates asynchronously (its signer
// runs every sequencer interval), so the integrated size may lag.
//
// [RFC 6962]: https://www.rfc-editor.org/rfc/rfc6962#section-2.1
type Log interface {
	// Append appends leaves at indices start, start+1, ... and returns once
	// they are durably accepted (not necessarily integrated). start must not
	// exceed the appended size (else an error wrapping ErrGap). Indices below
	// the appended size must hold byte-identical leaves, which makes a retry
	// after a crash a no-op for the part already appended; a different leaf at
	// an existing index fails with an error wrapping ErrConflict and appends
	// nothing past it. Leaves must be non-empty. Concurrent Appends are
	// serialized, but callers are expected to be a single sequencer.
	Append(ctx context.Context, start uint64, leaves [][]byte) error
	// Root returns the integrated size and the root hash at that size. The
	// root of the empty log is SHA-256 of the empty string.
	Root(ctx context.Context) (size uint64, root [32]byte, err error)
	// WaitIntegrated blocks until the integrated size is >= size, and returns
	// nil, or returns a non-nil error once ctx ends.
	WaitIntegrated(ctx context.Context, size uint64) error
	// InclusionProof returns the RFC 6962 audit path for the leaf at index in
	// the tree of the given size, 0 <= index < size (else ErrInvalidArgument),
	// after checking it against the backend's root at that size. It fails
	// with ErrNotIntegrated if size exceeds the integrated size.
	InclusionProof(ctx context.Context, index, size uint64) ([][]byte, error)
	// ConsistencyProof returns the RFC 6962 consistency proof between the trees
	// of sizes from and to, 0 < from <= to (else ErrInvalidArgument), after
	// checking it against the roots at both sizes. from == to gives an empty
	// proof. It fails with ErrNotIntegrated if to exceeds the integrated size.
	ConsistencyProof(ctx context.Context, from, to uint64) ([][]byte, error)
	// Leaf returns the leaf at index, which must be below the integrated size
	// (else ErrNotIntegrated).
	Leaf(ctx context.Context, index uint64) ([]byte, error)
	// Leaves returns the leaves at indices [start, end), start < end (else
	// ErrInvalidArgument), all below the integrated size (else
	// ErrNotIntegrated). It serves tlog-tiles entry bundles (see
	// [ReadEntryBundle]), which clients check against a signed checkpoint.
	Leaves(ctx context.Context, start, end uint64) ([][]byte, error)
	// NodeHashes returns the RFC 6962 hashes of the perfect subtrees at
	// level (0: leaf hashes) with indices [start, end): node i covers leaves
	// [i<<level, (i+1)<<level), which must all be below the integrated size
	// (else ErrNotIntegrated); start < end (else ErrInvalidArgument). It
	// serves tlog-tiles tiles (see [ReadTile]).
	NodeHashes(ctx context.Context, level uint, start, end uint64) ([][]byte, error)
}

// Errors the callers of a Log branch on. Returned errors wrap them.
var (
	// ErrGap means Append was called with start beyond the appended size.
	ErrGap = errors.New("audit: append would leave a gap in the log")
	// ErrConflict means a different leaf is already stored at an index.
	ErrConflict = errors.New("audit: a different leaf exists at this index")
	// ErrNotIntegrated means a size or index beyond the integrated size was
	// asked for; waiting (WaitIntegrated) and retrying may succeed.
	ErrNotIntegrated = errors.New("audit: not integrated into the log yet")
	// ErrInvalidArgument means the request can never succeed as asked (index
	// not below size, from == 0, from > to, empty leaf).
	ErrInvalidArgument = errors.New("audit: invalid argument")
	// ErrUnavailable means the log backend could not be reached; the call may
	// be retried. The backend's own error is wrapped beside it.
	ErrUnavailable = errors.New("audit: log backend unavailable")
)

// VerificationError reports a root or proof that does not verify: a log
// backend returned something inconsistent with what it returned before, or
// stored data was modified. It carries the evidence.
type VerificationError struct {
	// Op names what was checked: "inclusion", "consistency", "root", "leaf",
	// "node", "leaf hash", "size".
	Op string
	// Index and Size locate the checked object: a leaf index and tree size for
	// inclusion, the two sizes (Index = from, Size = to) for consistency, a
	// node's level (Level) and index for a node.
	Level       uint
	Index, Size uint64
	// Want and Got are the expected and found hashes, when known.
	Want, Got []byte
	// Err is the underlying error (a proof.RootMismatchError or similar).
	Err error
}

func (e *VerificationError) Error() string {
	msg := fmt.Sprintf("audit: %s verification failed", e.Op)
	switch e.Op {
	case "inclusion":
		msg += fmt.Sprintf(" for leaf %d in tree size %d", e.Index, e.Size)
	case "consistency":
		msg += fmt.Sprintf(" between tree sizes %d and %d", e.Index, e.Size)
	case "node":
		msg += fmt.Sprintf(" for node (level %d, index %d)", e.Level, e.Index)
	case "leaf", "leaf hash":
		msg += fmt.Sprintf(" for leaf %d", e.Index)
	default:
		msg += fmt.Sprintf(" at tree size %d", e.Size)
	}
	want, got := e.Want, e.Got
	var mismatch proof.RootMismatchError
	if errors.As(e.Err, &mismatch) && want == nil && got == nil {
		// Its own message prints the roots as decimal byte lists.
		want, got = mismatch.ExpectedRoot, mismatch.CalculatedRoot
		msg += ": proof does not lead to the root"
	} else if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if want != nil || got != nil {
		msg += fmt.Sprintf(" (want %x, got %x)", want, got)
	}
	return msg
}

func (e *VerificationError) Unwrap() error { return e.Err }

// hasher is the RFC 6962 SHA-256 tree hasher both backends use.
var hasher = rfc6962.DefaultHasher

// emptyRoot is the root of the empty tree, SHA-256("").
var emptyRoot = sha256.Sum256(nil)

// maxIndex bounds sizes so they fit the int64 columns and Trillian's API.
const maxIndex = 1<<63 - 1

func checkAppend(start uint64, leaves [][]byte) error {
	if uint64(len(leaves)) > maxIndex-start {
		return fmt.Errorf("%w: %d leaves from index %d overflow the log", ErrInvalidArgument, len(leaves), start)
	}
	for i, l := range leaves {
		if len(l) == 0 {
			return fmt.Errorf("%w: leaf %d is empty", ErrInvalidArgument, start+uint64(i))
		}
	}
	return nil
}

func checkInclusion(index, size uint64) error {
	if index >= size || size > maxIndex {
		return fmt.Errorf("%w: inclusion of leaf %d in tree size %d", ErrInvalidArgument, index, size)
	}
	return nil
}

func checkConsistency(from, to uint64) error {
	switch {
	case from == 0:
		return &argError{"from", "must be at least 1: the empty tree is consistent with every tree"}
	case to > maxIndex:
		return &argError{"to", "past the largest tree size"}
	case from > to:
		return &argError{"from", "must not exceed to"}
	}
	return nil
}

// argError is an ErrInvalidArgument about one argument of a Log method,
// named as the method (and the HTTP API's parameter) names it, with a
// message that quotes no value; DomainError makes it a field error.
type argError struct {
	field, msg string
}

func (e *argError) Error() string        { return "audit: invalid argument: " + e.field + ": " + e.msg }
func (e *argError) Is(target error) bool { return target == ErrInvalidArgument }

func to32(b []byte) ([32]byte, bool) {
	var h [32]byte
	if len(b) != len(h) {
		return h, false
	}
	copy(h[:], b)
	return h, true
}
