package audit

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/trillian"
	"github.com/google/trillian/types"
	"github.com/transparency-dev/merkle/proof"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TrillianOptions configures a TrillianLog. The zero value is usable.
type TrillianOptions struct {
	// PollInterval is how often WaitIntegrated asks Trillian for its latest
	// root (default 10 ms). Waiters share one poller.
	PollInterval time.Duration
	// TrustedSize and TrustedRoot, when TrustedSize > 0, give a root the log
	// must be consistent with, such as the last checkpoint lethe signed.
	// Otherwise the first root the server returns is trusted.
	TrustedSize uint64
	TrustedRoot [32]byte
	// MaxBatch bounds the leaves sent in one AddSequencedLeaves call
	// (default 1000).
	MaxBatch int
}

// TrillianLog is a [Log] on a Trillian PREORDERED_LOG tree (Trillian v1.8,
// any storage). Leaves go in with AddSequencedLeaves at the indices lethe
// assigns; Trillian's signer integrates them asynchronously.
//
// Nothing the server says is taken on trust. The log keeps the latest root it
// has verified; a newer root is accepted only with a consistency proof from
// it, and every inclusion proof, consistency proof and leaf is verified
// against verified roots before it is returned. A server that is behind (its
// root smaller than the size asked for) gets ErrNotIntegrated, never an
// empty proof passed on. Failures carry a *VerificationError.
//
// Each leaf's identity hash (Trillian's deduplication key) binds its index
// and bytes, so re-sending a leaf already stored at its index is recognised
// as a duplicate and a different leaf at that index as a conflict.
//
// It uses the generated gRPC stubs directly (one connection, safe for
// concurrent use), not Trillian's client.LogClient, whose waiters can hang
// when shared between goroutines and whose AddLeaf waits about 150 ms.
type TrillianLog struct {
	log      trillian.TrillianLogClient
	treeID   int64
	poll     time.Duration
	maxBatch int

	appendMu  sync.Mutex
	next      uint64 // appended size as far as this process knows
	nextKnown bool

	verifyMu sync.Mutex // serializes accept: one consistency check at a time

	mu       sync.Mutex
	trusted  logRootV // latest verified root
	roots    map[uint64][32]byte
	rootFIFO []uint64
	changed  chan struct{} // closed after each poll and each advance of trusted
	pollErr  error
	waiters  int
	polling  bool
}

var _ Log = (*TrillianLog)(nil)

type logRootV struct {
	size uint64
	hash [32]byte
}

// rootCacheSize bounds how many verified roots (by size) are remembered, so
// that proofs at recently seen sizes cost one RPC.
const rootCacheSize = 4096

// pendingWait bounds how long Append waits, after a restart on an empty
// tree, for Trillian to integrate leaves it may already hold.
const pendingWait = 5 * time.Second

// NewTrillianLog returns a Log on tree treeID, reached through conn (which
// must serve Trillian's log and admin APIs, as trillian_log_server does). The
// tree must be an ACTIVE PREORDERED_LOG. It fetches and verifies the current
// root.
func NewTrillianLog(ctx context.Context, conn *grpc.ClientConn, treeID int64, opts TrillianOptions) (*TrillianLog, error) {
	tree, err := trillian.NewTrillianAdminClient(conn).GetTree(ctx, &trillian.GetTreeRequest{TreeId: treeID})
	if err != nil {
		return nil, trillianErr("GetTree", err)
	}
	if tree.TreeType != trillian.TreeType_PREORDERED_LOG {
		return nil, fmt.Errorf("audit: trillian tree %d is a %v, want PREORDERED_LOG", treeID, tree.TreeType)
	}
	if tree.TreeState != trillian.TreeState_ACTIVE {
		return nil, fmt.Errorf("audit: trillian tree %d is %v, want ACTIVE", treeID, tree.TreeState)
	}
	l := &TrillianLog{
		log:      trillian.NewTrillianLogClient(conn),
		treeID:   treeID,
		poll:     opts.PollInterval,
		maxBatch: opts.MaxBatch,
		trusted:  logRootV{size: 0, hash: emptyRoot},
		roots:    make(map[uint64][32]byte),
		changed:  make(chan struct{}),
	}
	if l.poll <= 0 {
		l.poll = 10 * time.Millisecond
	}
	if l.maxBatch <= 0 {
		l.maxBatch = 1000
	}
	if opts.TrustedSize > 0 {
		l.trusted = logRootV{size: opts.TrustedSize, hash: opts.TrustedRoot}
	}
	l.remember(l.trusted)
	if _, err := l.refresh(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// Append implements [Log.Append]. It returns once Trillian has stored the
// leaves; they are integrated by the signer later (see WaitIntegrated).
//
// The leaves below the appended size are re-sent first, alone: Trillian
// reports each as a duplicate (same leaf) or a conflict (different leaf), and
// only if all are duplicates are the new leaves sent.
func (l *TrillianLog) Append(ctx context.Context, start uint64, leaves [][]byte) error {
	if err := checkAppend(start, leaves); err != nil {
		return err
	}
	if len(leaves) == 0 {
		return nil
	}
	end := start + uint64(len(leaves))
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	cached := l.nextKnown
	next, err := l.appendedSize(ctx, start, end)
	if err != nil {
		return err
	}
	if start > next && cached {
		// Another process (a sequencer on another replica) may have
		// appended since: look again before calling it a gap.
		l.nextKnown = false
		if next, err = l.appendedSize(ctx, start, end); err != nil {
			return err
		}
	}
	if start > next {
		return fmt.Errorf("%w: append at %d, log size is %d", ErrGap, start, next)
	}
	split := min(end, next) - start
	for _, part := range [][][]byte{leaves[:split], leaves[split:]} {
		for off := 0; off < len(part); off += l.maxBatch {
			chunk := part[off:min(off+l.maxBatch, len(part))]
			if err := l.addSequenced(ctx, start, chunk); err != nil {
				l.nextKnown = false
				return err
			}
			start += uint64(len(chunk))
		}
	}
	l.next, l.nextKnown = max(next, end), true
	return nil
}

// addSequenced sends leaves at start, start+1, ... in one call and checks
// every per-leaf status.
func (l *TrillianLog) addSequenced(ctx context.Context, start uint64, leaves [][]byte) error {
	req := &trillian.AddSequencedLeavesRequest{LogId: l.treeID, Leaves: make([]*trillian.LogLeaf, len(leaves))}
	for i, v := range leaves {
		idx := start + uint64(i)
		req.Leaves[i] = &trillian.LogLeaf{LeafValue: v, LeafIndex: int64(idx), LeafIdentityHash: identityHash(idx, v)}
	}
	resp, err := l.log.AddSequencedLeaves(ctx, req)
	if err != nil {
		return trillianErr(fmt.Sprintf("AddSequencedLeaves at %d", start), err)
	}
	if got, want := len(resp.GetResults()), len(leaves); got != want {
		return fmt.Errorf("audit: trillian AddSequencedLeaves at %d: %d results for %d leaves", start, got, want)
	}
	for i, r := range resp.GetResults() {
		idx := start + uint64(i)
		st := r.GetStatus()
		code := codes.Code(st.GetCode())
		switch {
		case code == codes.OK:
		case code == codes.AlreadyExists,
			code == codes.FailedPrecondition && strings.Contains(st.GetMessage(), "LeafIdentityHash"):
			// The identity hash binds index and leaf: this very leaf is
			// already at this index.
		case code == codes.FailedPrecondition && strings.Contains(st.GetMessage(), "LeafIndex"):
			return fmt.Errorf("%w: index %d", ErrConflict, idx)
		default:
			return fmt.Errorf("audit: trillian AddSequencedLeaves: leaf %d: %v: %s", idx, code, st.GetMessage())
		}
	}
	return nil
}

// identityHash is the Trillian leaf identity of leaf at idx:
// SHA-256("lethe/audit/leaf-identity/v1" || uint64 idx || leaf).
func identityHash(idx uint64, leaf []byte) []byte {
	h := sha256.New()
	h.Write([]byte("lethe/audit/leaf-identity/v1"))
	h.Write(binary.BigEndian.AppendUint64(nil, idx))
	h.Write(leaf)
	return h.Sum(nil)
}

// appendedSize returns the number of leaves Trillian holds contiguously from
// 0, as far as it matters for an append of [start, end): remembered from
// earlier appends, or found from the integrated size plus the pending leaves
// after it (read back with GetLeavesByRange, up to end).
func (l *TrillianLog) appendedSize(ctx context.Context, start, end uint64) (uint64, error) {
	if l.nextKnown {
		return l.next, nil
	}
	cur, err := l.refresh(ctx)
	if err != nil {
		return 0, err
	}
	if cur.size == 0 && start > 0 {
		// Pending leaves cannot be read before something is integrated.
		wctx, cancel := context.WithTimeout(ctx, pendingWait)
		werr := l.WaitIntegrated(wctx, 1)
		cancel()
		if werr != nil {
			if ctx.Err() != nil {
				return 0, werr
			}
			return 0, fmt.Errorf("%w: append at %d, tree %d integrated nothing within %v", ErrGap, start, l.treeID, pendingWait)
		}
		if cur, err = l.refresh(ctx); err != nil {
			return 0, err
		}
	}
	n := cur.size
	for n > 0 && n < end {
		// Reading from n-1 (< the server's tree size) returns the
		// contiguous sequenced leaves from there, integrated or not.
		count := min(end-n+1, uint64(l.maxBatch))
		resp, err := l.log.GetLeavesByRange(ctx, &trillian.GetLeavesByRangeRequest{
			LogId: l.treeID, StartIndex: int64(n - 1), Count: int64(count),
		})
		if err != nil {
			return 0, trillianErr("GetLeavesByRange", err)
		}
		got := uint64(0)
		for i, leaf := range resp.GetLeaves() {
			if leaf.GetLeafIndex() != int64(n-1)+int64(i) {
				break
			}
			got++
		}
		if got <= 1 {
			break
		}
		n += got - 1
		if got < count {
			break
		}
	}
	l.next, l.nextKnown = n, true
	return n, nil
}

// Root implements [Log.Root]. The returned root has been verified consistent
// with every root this log accepted before, and never shrinks: if the server
// reports a smaller tree (a lagging replica, or lost data), Root keeps
// returning the larger verified root, and proofs beyond the server's size
// fail with ErrNotIntegrated.
func (l *TrillianLog) Root(ctx context.Context) (uint64, [32]byte, error) {
	r, err := l.refresh(ctx)
	return r.size, r.hash, err
}

// WaitIntegrated implements [Log.WaitIntegrated]. Waiters share one poller,
// which asks for the latest root every PollInterval while anyone waits.
func (l *TrillianLog) WaitIntegrated(ctx context.Context, size uint64) error {
	l.mu.Lock()
	l.waiters++
	if !l.polling {
		l.polling = true
		go l.pollRoots()
	}
	defer func() {
		l.mu.Lock()
		l.waiters--
		l.mu.Unlock()
	}()
	for {
		cur, ch, perr := l.trusted, l.changed, l.pollErr
		l.mu.Unlock()
		if cur.size >= size {
			return nil
		}
		var verr *VerificationError
		if errors.As(perr, &verr) {
			return perr
		}
		select {
		case <-ctx.Done():
			if perr != nil {
				return fmt.Errorf("audit: wait for tree size %d (at %d): %w (last error: %w)", size, cur.size, ctx.Err(), perr)
			}
			return fmt.Errorf("audit: wait for tree size %d (at %d): %w", size, cur.size, ctx.Err())
		case <-ch:
		}
		l.mu.Lock()
	}
}

// pollRoots refreshes the verified root every poll interval while there are
// waiters, waking them after each attempt.
func (l *TrillianLog) pollRoots() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := l.refresh(ctx)
		cancel()
		l.mu.Lock()
		l.pollErr = err
		close(l.changed)
		l.changed = make(chan struct{})
		if l.waiters == 0 {
			l.polling = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		time.Sleep(l.poll)
	}
}

// refresh fetches the latest root and accepts it if consistent.
func (l *TrillianLog) refresh(ctx context.Context) (logRootV, error) {
	resp, err := l.log.GetLatestSignedLogRoot(ctx, &trillian.GetLatestSignedLogRootRequest{LogId: l.treeID})
	if err != nil {
		return logRootV{}, trillianErr("GetLatestSignedLogRoot", err)
	}
	r, err := parseRoot(resp.GetSignedLogRoot())
	if err != nil {
		return logRootV{}, err
	}
	return l.accept(ctx, r)
}

// accept makes r the trusted root if it is consistent with the trusted one,
// and returns the trusted root. A root older than the trusted one (a lagging
// replica) is checked against remembered roots and otherwise ignored.
func (l *TrillianLog) accept(ctx context.Context, r logRootV) (logRootV, error) {
	l.verifyMu.Lock()
	defer l.verifyMu.Unlock()
	t := l.current()
	if r.size <= t.size {
		if h, ok := l.remembered(r.size); ok && h != r.hash {
			return t, &VerificationError{Op: "root", Size: r.size, Want: h[:], Got: r.hash[:],
				Err: errors.New("trillian returned two different roots for one tree size")}
		}
		return t, nil
	}
	if t.size > 0 {
		p, err := l.consistencyFromServer(ctx, t.size, r.size)
		if err != nil {
			return t, err
		}
		if err := proof.VerifyConsistency(hasher, t.size, r.size, p, t.hash[:], r.hash[:]); err != nil {
			return t, &VerificationError{Op: "consistency", Index: t.size, Size: r.size, Err: err}
		}
	}
	l.mu.Lock()
	if r.size > l.trusted.size {
		l.trusted = r
		close(l.changed)
		l.changed = make(chan struct{})
	}
	l.mu.Unlock()
	l.remember(r)
	return r, nil
}

func (l *TrillianLog) current() logRootV {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.trusted
}

func (l *TrillianLog) remember(r logRootV) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.roots[r.size]; ok {
		return
	}
	if len(l.rootFIFO) >= rootCacheSize {
		delete(l.roots, l.rootFIFO[0])
		l.rootFIFO = l.rootFIFO[1:]
	}
	l.roots[r.size] = r.hash
	l.rootFIFO = append(l.rootFIFO, r.size)
}

func (l *TrillianLog) remembered(size uint64) ([32]byte, bool) {
	if size == 0 {
		return emptyRoot, true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h, ok := l.roots[size]
	return h, ok
}

// rootAt returns the verified root at size: remembered, the trusted one, or
// derived from the inclusion proof of leaf size-1 and checked by a
// consistency proof up to the trusted root.
func (l *TrillianLog) rootAt(ctx context.Context, size uint64) ([32]byte, error) {
	if h, ok := l.remembered(size); ok {
		return h, nil
	}
	cur := l.current()
	if cur.size < size {
		var err error
		if cur, err = l.refresh(ctx); err != nil {
			return [32]byte{}, err
		}
		if cur.size < size {
			return [32]byte{}, fmt.Errorf("%w: tree size %d, trillian tree %d is at %d", ErrNotIntegrated, size, l.treeID, cur.size)
		}
	}
	if cur.size == size {
		return cur.hash, nil
	}
	leaf, p, err := l.entryAndProof(ctx, size-1, size)
	if err != nil {
		return [32]byte{}, err
	}
	derived, err := proof.RootFromInclusionProof(hasher, size-1, size, hasher.HashLeaf(leaf), p)
	if err != nil {
		return [32]byte{}, &VerificationError{Op: "inclusion", Index: size - 1, Size: size, Err: err}
	}
	cp, err := l.consistencyFromServer(ctx, size, cur.size)
	if err != nil {
		return [32]byte{}, err
	}
	if err := proof.VerifyConsistency(hasher, size, cur.size, cp, derived, cur.hash[:]); err != nil {
		return [32]byte{}, &VerificationError{Op: "consistency", Index: size, Size: cur.size, Err: err}
	}
	h, _ := to32(derived)
	l.remember(logRootV{size: size, hash: h})
	return h, nil
}

// InclusionProof implements [Log.InclusionProof] with one GetEntryAndProof
// call when the root at size is known (sizes returned by Root and
// WaitIntegrated are).
func (l *TrillianLog) InclusionProof(ctx context.Context, index, size uint64) ([][]byte, error) {
	if err := checkInclusion(index, size); err != nil {
		return nil, err
	}
	root, err := l.rootAt(ctx, size)
	if err != nil {
		return nil, err
	}
	leaf, p, err := l.entryAndProof(ctx, index, size)
	if err != nil {
		return nil, err
	}
	if err := proof.VerifyInclusion(hasher, index, size, hasher.HashLeaf(leaf), p, root[:]); err != nil {
		return nil, &VerificationError{Op: "inclusion", Index: index, Size: size, Err: err}
	}
	return p, nil
}

// ConsistencyProof implements [Log.ConsistencyProof].
func (l *TrillianLog) ConsistencyProof(ctx context.Context, from, to uint64) ([][]byte, error) {
	if err := checkConsistency(from, to); err != nil {
		return nil, err
	}
	root2, err := l.rootAt(ctx, to)
	if err != nil {
		return nil, err
	}
	if from == to {
		return [][]byte{}, nil
	}
	root1, err := l.rootAt(ctx, from)
	if err != nil {
		return nil, err
	}
	p, err := l.consistencyFromServer(ctx, from, to)
	if err != nil {
		return nil, err
	}
	if err := proof.VerifyConsistency(hasher, from, to, p, root1[:], root2[:]); err != nil {
		return nil, &VerificationError{Op: "consistency", Index: from, Size: to, Err: err}
	}
	return p, nil
}

// Leaf implements [Log.Leaf]: the leaf comes with its inclusion proof in the
// trusted root, which is checked.
func (l *TrillianLog) Leaf(ctx context.Context, index uint64) ([]byte, error) {
	cur := l.current()
	if index >= cur.size {
		var err error
		if cur, err = l.refresh(ctx); err != nil {
			return nil, err
		}
		if index >= cur.size {
			return nil, fmt.Errorf("%w: leaf %d, trillian tree %d is at %d", ErrNotIntegrated, index, l.treeID, cur.size)
		}
	}
	leaf, p, err := l.entryAndProof(ctx, index, cur.size)
	if err != nil {
		return nil, err
	}
	if err := proof.VerifyInclusion(hasher, index, cur.size, hasher.HashLeaf(leaf), p, cur.hash[:]); err != nil {
		return nil, &VerificationError{Op: "leaf", Index: index, Size: cur.size, Err: err}
	}
	return leaf, nil
}

// entryAndProof fetches the leaf at index and its (unverified) inclusion
// proof in the tree of size. Trillian answers a request beyond its tree size
// with a proof for a smaller tree, or none: both are refused here.
func (l *TrillianLog) entryAndProof(ctx context.Context, index, size uint64) ([]byte, [][]byte, error) {
	resp, err := l.log.GetEntryAndProof(ctx, &trillian.GetEntryAndProofRequest{
		LogId: l.treeID, LeafIndex: int64(index), TreeSize: int64(size),
	})
	if err != nil {
		return nil, nil, trillianErr("GetEntryAndProof", err)
	}
	sr, err := parseRoot(resp.GetSignedLogRoot())
	if err != nil {
		return nil, nil, err
	}
	if sr.size < size {
		return nil, nil, fmt.Errorf("%w: trillian server is at tree size %d, asked for %d", ErrNotIntegrated, sr.size, size)
	}
	if resp.GetProof() == nil || resp.GetLeaf() == nil {
		return nil, nil, fmt.Errorf("audit: trillian GetEntryAndProof(%d, %d): no proof or leaf in the response", index, size)
	}
	if got := resp.GetLeaf().GetLeafIndex(); got != int64(index) {
		return nil, nil, fmt.Errorf("audit: trillian GetEntryAndProof(%d, %d): got leaf %d", index, size, got)
	}
	return resp.GetLeaf().GetLeafValue(), resp.GetProof().GetHashes(), nil
}

// consistencyFromServer fetches the (unverified) consistency proof between
// from and to, refusing the empty answer of a server that is behind.
func (l *TrillianLog) consistencyFromServer(ctx context.Context, from, to uint64) ([][]byte, error) {
	resp, err := l.log.GetConsistencyProof(ctx, &trillian.GetConsistencyProofRequest{
		LogId: l.treeID, FirstTreeSize: int64(from), SecondTreeSize: int64(to),
	})
	if err != nil {
		return nil, trillianErr("GetConsistencyProof", err)
	}
	sr, err := parseRoot(resp.GetSignedLogRoot())
	if err != nil {
		return nil, err
	}
	if sr.size < to {
		return nil, fmt.Errorf("%w: trillian server is at tree size %d, asked for %d", ErrNotIntegrated, sr.size, to)
	}
	if resp.GetProof() == nil {
		return nil, fmt.Errorf("audit: trillian GetConsistencyProof(%d, %d): no proof in the response", from, to)
	}
	return resp.GetProof().GetHashes(), nil
}

func parseRoot(slr *trillian.SignedLogRoot) (logRootV, error) {
	if slr == nil {
		return logRootV{}, errors.New("audit: trillian returned no log root")
	}
	var r types.LogRootV1
	if err := r.UnmarshalBinary(slr.GetLogRoot()); err != nil {
		return logRootV{}, fmt.Errorf("audit: trillian log root: %w", err)
	}
	h, ok := to32(r.RootHash)
	if !ok || r.TreeSize > maxIndex {
		return logRootV{}, fmt.Errorf("audit: trillian log root: size %d, %d-byte hash", r.TreeSize, len(r.RootHash))
	}
	return logRootV{size: r.TreeSize, hash: h}, nil
}

// trillianErr wraps a gRPC error; the codes a retry may cure also wrap
// ErrUnavailable.
func trillianErr(op string, err error) error {
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return fmt.Errorf("%w: trillian %s: %w", ErrUnavailable, op, err)
	}
	return fmt.Errorf("audit: trillian %s: %w", op, err)
}

// Leaves implements [Log.Leaves] with GetLeavesByRange, MaxBatch leaves per
// call. The leaves are not checked against the trusted root here: tlog-tiles
// clients check the bundles they fetch against a signed checkpoint.
func (l *TrillianLog) Leaves(ctx context.Context, start, end uint64) ([][]byte, error) {
	if err := checkRange(0, start, end); err != nil {
		return nil, err
	}
	if cur := l.current(); end > cur.size {
		if cur, err := l.refresh(ctx); err != nil {
			return nil, err
		} else if end > cur.size {
			return nil, fmt.Errorf("%w: leaves up to %d, trillian tree %d is at %d", ErrNotIntegrated, end, l.treeID, cur.size)
		}
	}
	out := make([][]byte, 0, end-start)
	for n := start; n < end; {
		count := min(end-n, uint64(l.maxBatch))
		resp, err := l.log.GetLeavesByRange(ctx, &trillian.GetLeavesByRangeRequest{
			LogId: l.treeID, StartIndex: int64(n), Count: int64(count),
		})
		if err != nil {
			return nil, trillianErr("GetLeavesByRange", err)
		}
		got := resp.GetLeaves()
		if len(got) == 0 {
			return nil, fmt.Errorf("audit: trillian GetLeavesByRange(%d, %d): no leaves", n, count)
		}
		for _, leaf := range got[:min(len(got), int(count))] {
			if leaf.GetLeafIndex() != int64(n) {
				return nil, fmt.Errorf("audit: trillian GetLeavesByRange: got leaf %d, want %d", leaf.GetLeafIndex(), n)
			}
			out = append(out, leaf.GetLeafValue())
			n++
		}
	}
	return out, nil
}

// NodeHashes implements [Log.NodeHashes]. Trillian's API serves no
// internal nodes, so they are hashed up from the 2^level leaves under each:
// a full tile at tlog-tiles level 1 reads 65,536 leaves.
func (l *TrillianLog) NodeHashes(ctx context.Context, level uint, start, end uint64) ([][]byte, error) {
	if err := checkRange(level, start, end); err != nil {
		return nil, err
	}
	leaves, err := l.Leaves(ctx, start<<level, end<<level)
	if err != nil {
		return nil, err
	}
	hashes := make([][]byte, len(leaves))
	for i, leaf := range leaves {
		hashes[i] = hasher.HashLeaf(leaf)
	}
	return hashUp(hashes, level), nil
}
