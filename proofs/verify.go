package proofs

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// VerifyOptions are what an auditor brings to [Verify].
type VerifyOptions struct {
	// LogKey is the log's note verifier key,
	// "<name>+<hash>+<base64 of 0x01 || Ed25519 public key>". Required.
	LogKey string
	// Origin is the checkpoint origin expected. When empty, the
	// checkpoint's origin must equal the key's name.
	Origin string
	// Pinned is an older signed checkpoint note the auditor trusts, if any.
	// The proof's checkpoint must then be shown to extend it: equal sizes
	// need equal roots, a larger size needs the proof's consistency proof
	// from Pinned's size.
	Pinned []byte
	// Subject is the user id or scope path an erasure concerns, and Nonce
	// the 32-byte nonce returned with the erasure. Give both or neither;
	// with both, the leaf's commitment must be Commitment(Nonce, Subject).
	Subject string
	Nonce   []byte
	// Witnesses are witness verifier keys (c2sp.org/tlog-cosignature,
	// "<name>+<hash>+<base64 of 0x04 || public key>"), and WitnessThreshold
	// how many of them must have cosigned the proof's checkpoint.
	Witnesses        []string
	WitnessThreshold int
}

// Verified is what a successful [Verify] established.
type Verified struct {
	// Leaf is the parsed event.
	Leaf *Leaf
	// LeafHash is the RFC 6962 leaf hash, SHA-256(0x00 || leaf).
	LeafHash [32]byte
	// Checkpoint is the checkpoint the leaf is included in.
	Checkpoint Checkpoint
	// KeyName is the name of the log key that signed leaf and checkpoint.
	KeyName string
	// Pinned is the pinned checkpoint shown to be a prefix of Checkpoint,
	// or nil when none was given.
	Pinned *Checkpoint
	// SubjectChecked reports that the subject commitment was checked.
	SubjectChecked bool
	// Cosignatures are the valid cosignatures on the checkpoint by the
	// witnesses given in the options.
	Cosignatures []Cosignature
}

// Verify checks a proof offline, in this order, and returns the first
// failure as a [CheckError] of a distinct type carrying its evidence:
//
//  1. options: the log key parses; Subject and Nonce come together and
//     Nonce is [NonceSize] bytes ([*OptionsError]);
//  2. format: Format is [ProofFormat] ([*FormatError]);
//  3. leaf_format: the leaf parses ([*LeafFormatError]);
//  4. summary_mismatch: count, key_fingerprint, timestamp and event_id
//     equal the leaf's ([*SummaryMismatchError]);
//  5. leaf_signature: the Ed25519 signature over the leaf bytes verifies
//     under the log key ([*LeafSignatureError]);
//  6. the leaf hash is computed as SHA-256(0x00 || leaf); it is not carried
//     in the proof, so a wrong leaf fails at step 5 or 9;
//  7. checkpoint_signature, checkpoint_origin: the checkpoint note is signed
//     by the log key and names the expected origin
//     ([*CheckpointSignatureError], [*CheckpointOriginError], or
//     [*FormatError] for a signed but malformed body);
//  8. tree_size: tree_size equals the checkpoint's size ([*TreeSizeError]);
//  9. inclusion: the inclusion proof leads from the leaf hash at leaf_index
//     to the checkpoint's root ([*InclusionError]);
//  10. pinned_checkpoint, consistency: with Pinned, it opens like the
//     checkpoint ([*PinnedCheckpointError]) and the checkpoint extends it
//     ([*ConsistencyError]);
//  11. subject_commitment: with Subject and Nonce, the leaf's commitment
//     matches ([*SubjectCommitmentError]);
//  12. witness_cosignatures: at least WitnessThreshold of Witnesses
//     cosigned the checkpoint ([*WitnessError]).
func Verify(p *Proof, opts VerifyOptions) (*Verified, error) {
	v, err := NewVerifier(opts)
	if err != nil {
		return nil, err
	}
	return v.Verify(p)
}

// maxCachedCheckpoints bounds a Verifier's memory of opened checkpoints.
const maxCachedCheckpoints = 64

// Verifier verifies many proofs with the same options. It is [Verify] with
// the log key parsed once and a memory of the checkpoint notes it has
// already opened: proofs that share a checkpoint (a batch fetched together)
// cost one Ed25519 verification each instead of two. Only checkpoints that
// verified are remembered, by their exact bytes, so the result of every
// check is the same as [Verify]'s. A Verifier is safe for concurrent use.
type Verifier struct {
	key       *logKey
	witnesses *WitnessPolicy
	opts      VerifyOptions
	mu        sync.Mutex
	cache     map[string]Checkpoint
}

// NewVerifier checks the options (step 1 of [Verify]) and returns a
// Verifier. The pinned checkpoint is opened on first use, so that errors
// keep [Verify]'s order.
func NewVerifier(opts VerifyOptions) (*Verifier, error) {
	k, err := parseLogKey(opts.LogKey)
	if err != nil {
		return nil, &OptionsError{Err: err}
	}
	if (opts.Subject == "") != (opts.Nonce == nil) {
		return nil, &OptionsError{Err: errors.New("give both the subject and the nonce, or neither")}
	}
	if opts.Nonce != nil && len(opts.Nonce) != NonceSize {
		return nil, &OptionsError{Err: fmt.Errorf("nonce is %d bytes, want %d", len(opts.Nonce), NonceSize)}
	}
	w, err := ParseWitnessPolicy(opts.Witnesses, opts.WitnessThreshold)
	if err != nil {
		return nil, &OptionsError{Err: err}
	}
	opts.Pinned = bytes.Clone(opts.Pinned)
	opts.Nonce = bytes.Clone(opts.Nonce)
	return &Verifier{key: k, witnesses: w, opts: opts, cache: make(map[string]Checkpoint)}, nil
}

// open opens a checkpoint note, from memory when it opened before.
func (v *Verifier) open(text string) (Checkpoint, error) {
	v.mu.Lock()
	c, ok := v.cache[text]
	v.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := openCheckpoint([]byte(text), v.key, v.opts.Origin)
	if err != nil {
		return c, err
	}
	v.mu.Lock()
	if len(v.cache) >= maxCachedCheckpoints {
		clear(v.cache)
	}
	v.cache[text] = c
	v.mu.Unlock()
	return c, nil
}

// Verify checks p as [Verify] does, with the Verifier's options.
func (v *Verifier) Verify(p *Proof) (*Verified, error) {
	k, opts := v.key, v.opts
	if p == nil {
		return nil, &FormatError{Field: "document", Err: errors.New("no proof")}
	}
	if p.Format != ProofFormat {
		return nil, &FormatError{Field: "format", Err: fmt.Errorf("%q is not %q", p.Format, ProofFormat)}
	}

	leaf, err := ParseLeaf(p.Leaf)
	if err != nil {
		return nil, &LeafFormatError{Err: err}
	}
	for _, f := range [...]struct{ name, proof, leaf string }{
		{"event_id", p.EventID, leaf.ID},
		{"timestamp", p.Timestamp, leaf.Timestamp()},
		{"count", strconv.FormatUint(p.Count, 10), strconv.FormatUint(leaf.GrainCount(), 10)},
		{"key_fingerprint", p.KeyFingerprint, leaf.FirstKeyFingerprint()},
	} {
		if f.proof != f.leaf {
			return nil, &SummaryMismatchError{Field: f.name, Proof: f.proof, Leaf: f.leaf}
		}
	}
	if !k.Verify(p.Leaf, p.LeafSignature) {
		return nil, &LeafSignatureError{Key: k.id()}
	}
	out := &Verified{Leaf: leaf, KeyName: k.Name()}
	copy(out.LeafHash[:], rfc6962.DefaultHasher.HashLeaf(p.Leaf))

	if out.Checkpoint, err = v.open(p.Checkpoint); err != nil {
		return nil, err
	}
	if p.TreeSize != out.Checkpoint.Size {
		return nil, &TreeSizeError{Proof: p.TreeSize, Checkpoint: out.Checkpoint.Size}
	}
	if err := verifyInclusion(p, out); err != nil {
		return nil, err
	}

	if opts.Pinned != nil {
		pinned, err := v.open(string(opts.Pinned))
		if err != nil {
			return nil, &PinnedCheckpointError{Err: err}
		}
		if err := verifyConsistency(p, pinned, out.Checkpoint); err != nil {
			return nil, err
		}
		out.Pinned = &pinned
	}

	if opts.Nonce != nil {
		got := Commitment(opts.Nonce, opts.Subject)
		if leaf.Commitment == "" || subtle.ConstantTimeCompare([]byte(got), []byte(leaf.Commitment)) != 1 {
			return nil, &SubjectCommitmentError{Leaf: leaf.Commitment, Computed: got}
		}
		out.SubjectChecked = true
	}

	if len(v.witnesses.Keys) > 0 {
		if out.Cosignatures, err = v.witnesses.Check([]byte(p.Checkpoint)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// verifyInclusion checks the inclusion proof against v's leaf hash and
// checkpoint.
func verifyInclusion(p *Proof, v *Verified) error {
	return VerifyInclusion(p.LeafIndex, p.TreeSize, v.LeafHash[:], p.Inclusion, v.Checkpoint.Hash[:])
}

// VerifyInclusion checks an RFC 6962 inclusion proof (section 2.1.1): that
// the leaf with hash leafHash is at index in the tree of size leaves whose
// root is root. Every proof hash must be 32 bytes. Errors are
// [*InclusionError]; Computed is set when a well-formed proof leads to
// another root.
func VerifyInclusion(index, size uint64, leafHash []byte, inclusion [][]byte, root []byte) error {
	e := &InclusionError{Index: index, Size: size, LeafHash: leafHash, Root: root}
	if err := checkHashes(inclusion, maxInclusion); err != nil {
		e.Err = err
		return e
	}
	got, err := proof.RootFromInclusionProof(rfc6962.DefaultHasher, index, size, leafHash, inclusion)
	if err != nil {
		e.Err = err
		return e
	}
	if !bytes.Equal(got, root) {
		e.Computed = got
		return e
	}
	return nil
}

// verifyConsistency checks that cur extends pinned, using p's consistency
// proof when the sizes differ.
func verifyConsistency(p *Proof, pinned, cur Checkpoint) error {
	e := &ConsistencyError{From: pinned.Size, To: cur.Size, FromRoot: pinned.Hash[:], ToRoot: cur.Hash[:]}
	var hashes [][]byte
	switch {
	case pinned.Size == 0:
		// Every tree extends the empty tree; there is nothing to prove,
		// but a size-0 checkpoint must have the empty tree's root.
		if !bytes.Equal(pinned.Hash[:], rfc6962.DefaultHasher.EmptyRoot()) {
			e.Err = errors.New("the pinned checkpoint has size 0 but not the empty tree's root")
			return e
		}
		return nil
	case pinned.Size >= cur.Size:
		// Equal sizes need equal roots and no proof; a larger pinned size
		// fails in VerifyConsistency.
	case !p.hasConsistency():
		e.Err = fmt.Errorf("the proof carries no consistency proof from size %d", pinned.Size)
		return e
	case p.ConsistencyFrom != pinned.Size:
		e.Err = fmt.Errorf("the proof's consistency proof starts at size %d, not %d", p.ConsistencyFrom, pinned.Size)
		return e
	default:
		hashes = p.Consistency
	}
	return VerifyConsistency(pinned.Size, cur.Size, hashes, pinned.Hash[:], cur.Hash[:])
}

// VerifyConsistency checks an RFC 6962 consistency proof (section 2.1.2):
// that the tree of size to with root toRoot extends the tree of size from
// with root fromRoot. Equal sizes need equal roots and an empty proof.
// A proof from size 0 is refused, as it proves nothing (any tree extends
// the empty tree); [Verify] handles a pinned empty tree itself. Every proof
// hash must be 32 bytes. Errors are [*ConsistencyError].
func VerifyConsistency(from, to uint64, consistency [][]byte, fromRoot, toRoot []byte) error {
	e := &ConsistencyError{From: from, To: to, FromRoot: fromRoot, ToRoot: toRoot}
	switch {
	case from > to:
		e.Err = errors.New("the pinned checkpoint is larger: the log shrank")
	case from == 0:
		e.Err = errors.New("a consistency proof from the empty tree proves nothing")
	case from == to && len(consistency) == 0 && !bytes.Equal(fromRoot, toRoot):
		e.Err = errors.New("equal sizes with different roots: the log forked")
	default:
		if err := checkHashes(consistency, maxConsistency); err != nil {
			e.Err = err
		} else if err := proof.VerifyConsistency(rfc6962.DefaultHasher, from, to, consistency, fromRoot, toRoot); err != nil {
			e.Err = err
		}
	}
	if e.Err != nil {
		return e
	}
	return nil
}
