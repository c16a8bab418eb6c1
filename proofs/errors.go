package proofs

import (
	"encoding/base64"
	"errors"
	"fmt"
)

// Check names one verification step. Its value is stable: tools and tests
// may match on it, and every error text starts with it.
type Check string

// The checks, in the order [Verify] performs them.
const (
	CheckOptions             Check = "options"              // the verifier's inputs (key, nonce) are unusable
	CheckFormat              Check = "format"               // the proof document is malformed or of another version
	CheckLeafFormat          Check = "leaf_format"          // the leaf is not a canonical lethe leaf
	CheckSummary             Check = "summary_mismatch"     // a top-level field differs from the leaf's value
	CheckLeafSignature       Check = "leaf_signature"       // the leaf signature does not verify
	CheckCheckpointSignature Check = "checkpoint_signature" // the checkpoint note is not validly signed by the log key
	CheckCheckpointOrigin    Check = "checkpoint_origin"    // the checkpoint names another log
	CheckTreeSize            Check = "tree_size"            // tree_size differs from the checkpoint's size
	CheckInclusion           Check = "inclusion"            // the leaf is not in the checkpointed tree
	CheckPinned              Check = "pinned_checkpoint"    // the pinned checkpoint does not open
	CheckConsistency         Check = "consistency"          // the checkpoint does not extend the pinned one
	CheckSubject             Check = "subject_commitment"   // the subject and nonce do not give the leaf's commitment
	CheckWitness             Check = "witness_cosignatures" // fewer witnesses than required cosigned the checkpoint
	CheckFinality            Check = "finality"             // an erasure and a trim event do not show the erased keys dead
	CheckChain               Check = "chain"                // a history export's version chain is not consistent
	CheckExportSignature     Check = "export_signature"     // a history export is not signed by the log key
)

// CheckError is implemented by every error [Verify] returns.
type CheckError interface {
	error
	// Check returns the step that failed.
	Check() Check
}

// FailedCheck returns the check named by the first [CheckError] in err's
// chain, or "" if there is none.
func FailedCheck(err error) Check {
	var ce CheckError
	if errors.As(err, &ce) {
		return ce.Check()
	}
	return ""
}

// b64 renders a hash for an error message the way checkpoints show it.
func b64(h []byte) string { return base64.StdEncoding.EncodeToString(h) }

// OptionsError reports verifier inputs that cannot be used: a malformed log
// key, a subject without a nonce, a nonce of the wrong size.
type OptionsError struct {
	Err error
}

func (e *OptionsError) Error() string { return fmt.Sprintf("%s: %v", e.Check(), e.Err) }
func (e *OptionsError) Unwrap() error { return e.Err }

// Check returns [CheckOptions].
func (e *OptionsError) Check() Check { return CheckOptions }

// FormatError reports a proof document, or a part of one, that is malformed
// or of an unknown version.
type FormatError struct {
	// Field names the offending part ("format", "inclusion", "checkpoint",
	// "document", ...).
	Field string
	Err   error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Check(), e.Field, e.Err)
}
func (e *FormatError) Unwrap() error { return e.Err }

// Check returns [CheckFormat].
func (e *FormatError) Check() Check { return CheckFormat }

// LeafFormatError reports a leaf that [ParseLeaf] rejects.
type LeafFormatError struct {
	Err error
}

func (e *LeafFormatError) Error() string { return fmt.Sprintf("%s: %v", e.Check(), e.Err) }
func (e *LeafFormatError) Unwrap() error { return e.Err }

// Check returns [CheckLeafFormat].
func (e *LeafFormatError) Check() Check { return CheckLeafFormat }

// SummaryMismatchError reports a top-level proof field (count,
// key_fingerprint, timestamp, event_id) that differs from the leaf.
type SummaryMismatchError struct {
	Field string // the proof document's field name
	Proof string // its value in the proof document
	Leaf  string // the value the leaf gives
}

func (e *SummaryMismatchError) Error() string {
	return fmt.Sprintf("%s: %s is %q in the proof but %q in the leaf", e.Check(), e.Field, e.Proof, e.Leaf)
}

// Check returns [CheckSummary].
func (e *SummaryMismatchError) Check() Check { return CheckSummary }

// LeafSignatureError reports a leaf signature that does not verify.
type LeafSignatureError struct {
	Key string // "<name>+<hash>" of the log key used
}

func (e *LeafSignatureError) Error() string {
	return fmt.Sprintf("%s: signature does not verify over the leaf bytes with key %s", e.Check(), e.Key)
}

// Check returns [CheckLeafSignature].
func (e *LeafSignatureError) Check() Check { return CheckLeafSignature }

// CheckpointSignatureError reports a checkpoint note that does not open: it
// is malformed, unsigned by the key, or its signature is invalid.
type CheckpointSignatureError struct {
	Key string // "<name>+<hash>" of the log key used
	Err error  // from golang.org/x/mod/sumdb/note, or a strictness check
}

func (e *CheckpointSignatureError) Error() string {
	return fmt.Sprintf("%s: checkpoint is not validly signed by %s: %v", e.Check(), e.Key, e.Err)
}
func (e *CheckpointSignatureError) Unwrap() error { return e.Err }

// Check returns [CheckCheckpointSignature].
func (e *CheckpointSignatureError) Check() Check { return CheckCheckpointSignature }

// CheckpointOriginError reports a checkpoint for another log.
type CheckpointOriginError struct {
	Want, Got string
}

func (e *CheckpointOriginError) Error() string {
	return fmt.Sprintf("%s: checkpoint origin is %q, want %q", e.Check(), e.Got, e.Want)
}

// Check returns [CheckCheckpointOrigin].
func (e *CheckpointOriginError) Check() Check { return CheckCheckpointOrigin }

// TreeSizeError reports a proof whose tree_size is not its checkpoint's.
type TreeSizeError struct {
	Proof, Checkpoint uint64
}

func (e *TreeSizeError) Error() string {
	return fmt.Sprintf("%s: proof says tree size %d but the checkpoint says %d", e.Check(), e.Proof, e.Checkpoint)
}

// Check returns [CheckTreeSize].
func (e *TreeSizeError) Check() Check { return CheckTreeSize }

// InclusionError reports an inclusion proof that does not lead from the
// leaf hash to the checkpoint's root.
type InclusionError struct {
	Index, Size uint64
	LeafHash    []byte
	// Computed is the root the proof leads to, nil when the proof is
	// malformed (see Err).
	Computed []byte
	Root     []byte // the checkpoint's root
	Err      error  // set when the proof is malformed
}

func (e *InclusionError) Error() string {
	if e.Computed != nil {
		return fmt.Sprintf("%s: computed root %s does not match checkpoint root %s (leaf hash %s at index %d of %d)",
			e.Check(), b64(e.Computed), b64(e.Root), b64(e.LeafHash), e.Index, e.Size)
	}
	return fmt.Sprintf("%s: leaf %d of tree size %d: %v", e.Check(), e.Index, e.Size, e.Err)
}
func (e *InclusionError) Unwrap() error { return e.Err }

// Check returns [CheckInclusion].
func (e *InclusionError) Check() Check { return CheckInclusion }

// PinnedCheckpointError reports a pinned (older) checkpoint that does not
// open with the log key and origin.
type PinnedCheckpointError struct {
	Err error // a CheckError from [OpenCheckpoint]
}

func (e *PinnedCheckpointError) Error() string {
	return fmt.Sprintf("%s: %v", e.Check(), e.Err)
}
func (e *PinnedCheckpointError) Unwrap() error { return e.Err }

// Check returns [CheckPinned].
func (e *PinnedCheckpointError) Check() Check { return CheckPinned }

// ConsistencyError reports that the proof's checkpoint is not shown to
// extend the pinned checkpoint: the log was rolled back or forked, or the
// consistency proof is missing or wrong.
type ConsistencyError struct {
	From, To         uint64 // pinned size, checkpoint size
	FromRoot, ToRoot []byte
	Err              error
}

func (e *ConsistencyError) Error() string {
	return fmt.Sprintf("%s: tree size %d (root %s) is not shown to extend pinned size %d (root %s): %v",
		e.Check(), e.To, b64(e.ToRoot), e.From, b64(e.FromRoot), e.Err)
}
func (e *ConsistencyError) Unwrap() error { return e.Err }

// Check returns [CheckConsistency].
func (e *ConsistencyError) Check() Check { return CheckConsistency }

// SubjectCommitmentError reports that the given subject and nonce do not
// produce the leaf's commitment. It holds the commitments only, never the
// subject.
type SubjectCommitmentError struct {
	Leaf     string // the leaf's commitment, "" if it has none
	Computed string
}

func (e *SubjectCommitmentError) Error() string {
	if e.Leaf == "" {
		return fmt.Sprintf("%s: the leaf carries no subject commitment", e.Check())
	}
	return fmt.Sprintf("%s: subject and nonce give %s but the leaf commits to %s", e.Check(), e.Computed, e.Leaf)
}

// Check returns [CheckSubject].
func (e *SubjectCommitmentError) Check() Check { return CheckSubject }

// FinalityError reports that an erasure proof and a KEK trim proof, each
// valid, do not together show that every copy of the erased keys is dead:
// a wrong event type, a missing KEK version, another KEK, a trim logged
// before the erasure, or a trim that keeps the erasure's KEK version.
type FinalityError struct {
	// Reason says which condition failed.
	Reason string
	// ErasureKEKVersion and TrimMinVersion are the versions compared, 0
	// when absent.
	ErasureKEKVersion, TrimMinVersion uint64
}

func (e *FinalityError) Error() string {
	return fmt.Sprintf("%s: %s (erasure kek_version %d, trim kek_min_version %d)", e.Check(), e.Reason, e.ErasureKEKVersion, e.TrimMinVersion)
}

// Check returns [CheckFinality].
func (e *FinalityError) Check() Check { return CheckFinality }

// WitnessError reports a checkpoint that fewer witnesses cosigned than the
// policy requires (c2sp.org/tlog-cosignature).
type WitnessError struct {
	// Threshold is how many were required; Got how many of the Of
	// configured witnesses had a valid cosignature.
	Threshold, Got, Of int
	// Err is set when the note could not be read at all.
	Err error
}

func (e *WitnessError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Check(), e.Err)
	}
	return fmt.Sprintf("%s: %d of %d witnesses cosigned the checkpoint, %d required", e.Check(), e.Got, e.Of, e.Threshold)
}
func (e *WitnessError) Unwrap() error { return e.Err }

// Check implements [CheckError].
func (e *WitnessError) Check() Check { return CheckWitness }
