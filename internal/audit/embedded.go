package audit

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// EmbeddedLog is a [Log] kept in lethe's own database (SQLite or PostgreSQL)
// through gorm. It stores, in tables prefixed audit_log_:
//
//   - leaves: index, leaf bytes, RFC 6962 leaf hash;
//   - nodes: every perfect subtree root above the leaves (level >= 1, index);
//     ephemeral nodes on the right border are never stored but recomputed
//     from the perfect nodes under them (a [compact.Range]);
//   - state: the current size and root, one row;
//   - roots: the size and root after every Append (the history of roots).
//
// An inclusion or consistency proof reads only the O(log n) nodes
// [proof.Inclusion] or [proof.Consistency] name, so proofs cost the same at
// any size. Append writes leaves, new nodes, state and root history in one
// transaction; leaves are integrated when Append returns.
//
// Every proof and leaf it returns is first checked against the recorded root,
// so a modified row surfaces as a *VerificationError instead of a bad proof;
// [EmbeddedLog.Verify] rechecks the whole store.
//
// Several processes may share the database: Append locks the state row (FOR
// UPDATE on PostgreSQL; SQLite serializes writers) and revalidates what it has
// cached.
type EmbeddedLog struct {
	db  *gorm.DB
	now func() time.Time // dates the stored roots
	// inTx says db is a transaction (a view made by In): Append writes in
	// it as it is, without a savepoint of its own.
	inTx bool
	// locked is the log's state once an Append through this view has
	// taken the state row's lock: nothing else can change it before the
	// transaction ends, so the view's reads use it instead of reading the
	// row again (three round trips of a sequencer step).
	locked *state
	// prior is the state that Append found, before its leaves, and known
	// the hashes of the nodes it knew then (the range's) and made (see
	// nodesIn).
	prior *state
	known map[compact.NodeID][]byte
	*embeddedShared
}

// embeddedShared is what an EmbeddedLog and its views in transactions
// (see [EmbeddedLog.In]) share.
type embeddedShared struct {
	mu sync.Mutex // serializes Append in this process
	// rng is [0, size) after our last Append, nil if unknown. It may be
	// ahead of the database when the transaction of a view's Append rolled
	// back: rangeAt uses it only when the stored size and root match it.
	rng *compact.Range

	notifyMu sync.Mutex
	notify   chan struct{} // closed (and replaced) after each Append
}

var _ Log = (*EmbeddedLog)(nil)

// embeddedPoll is how often WaitIntegrated looks at the database for appends
// made by other processes; appends made by this process wake it at once.
const embeddedPoll = 20 * time.Millisecond

// insertBatch bounds rows per INSERT (3 parameters each: below SQLite's and
// PostgreSQL's parameter limits).
const insertBatch = 1000

const stateID = 1

var rangeFactory = &compact.RangeFactory{Hash: hasher.HashChildren}

type logLeaf struct {
	Idx  uint64 `gorm:"column:idx;primaryKey;autoIncrement:false"`
	Leaf []byte `gorm:"column:leaf;not null"`
	Hash []byte `gorm:"column:hash;not null"`
}

func (logLeaf) TableName() string { return "audit_log_leaves" }

type logNode struct {
	Level uint8  `gorm:"column:level;primaryKey;autoIncrement:false"`
	Idx   uint64 `gorm:"column:idx;primaryKey;autoIncrement:false"`
	Hash  []byte `gorm:"column:hash;not null"`
}

func (logNode) TableName() string { return "audit_log_nodes" }

type logState struct {
	ID   int    `gorm:"column:id;primaryKey;autoIncrement:false"`
	Size uint64 `gorm:"column:size;not null"`
	Root []byte `gorm:"column:root;not null"`
}

func (logState) TableName() string { return "audit_log_state" }

type logRoot struct {
	Size      uint64    `gorm:"column:size;primaryKey;autoIncrement:false"`
	Root      []byte    `gorm:"column:root;not null"`
	CreatedAt time.Time `gorm:"column:created_at;not null"`
}

func (logRoot) TableName() string { return "audit_log_roots" }

// NewEmbeddedLog creates the log's tables in db if they do not exist and
// returns the log. db should be opened with TranslateError; on SQLite, WAL
// mode and a busy timeout let readers run beside the appender. now dates
// the roots it stores (nil: time.Now).
func NewEmbeddedLog(db *gorm.DB, now func() time.Time) (*EmbeddedLog, error) {
	if now == nil {
		now = time.Now
	}
	if err := db.AutoMigrate(&logLeaf{}, &logNode{}, &logState{}, &logRoot{}); err != nil {
		return nil, fmt.Errorf("audit: create embedded log tables: %w", err)
	}
	st := logState{ID: stateID, Size: 0, Root: emptyRoot[:]}
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&st).Error; err != nil {
		return nil, fmt.Errorf("audit: create embedded log state: %w", err)
	}
	return &EmbeddedLog{db: db, now: now, embeddedShared: &embeddedShared{notify: make(chan struct{})}}, nil
}

// In returns the log read and written in tx, a transaction on the log's
// database: an Append through it writes in tx (no savepoint of its own)
// and commits, or rolls back, with it. The sequencer uses it to number,
// append and checkpoint in one transaction (see [AtomicOutbox]).
func (l *EmbeddedLog) In(tx *gorm.DB) *EmbeddedLog {
	return &EmbeddedLog{db: tx, now: l.now, inTx: true, embeddedShared: l.embeddedShared}
}

// Append implements [Log.Append]. Leaves are integrated when it returns.
func (l *EmbeddedLog) Append(ctx context.Context, start uint64, leaves [][]byte) error {
	if err := checkAppend(start, leaves); err != nil {
		return err
	}
	if len(leaves) == 0 {
		return nil
	}
	hashes := make([][]byte, len(leaves))
	for i, leaf := range leaves {
		hashes[i] = hasher.HashLeaf(leaf)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	var appended *compact.Range
	write := func(tx *gorm.DB) error {
		var st logState
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Take(&st, "id = ?", stateID).Error; err != nil {
			return fmt.Errorf("read state: %w", err)
		}
		size, end := st.Size, start+uint64(len(leaves))
		if start > size {
			return fmt.Errorf("%w: append at %d, log size is %d", ErrGap, start, size)
		}
		if start < size {
			if err := compareStored(tx, start, leaves[:min(end, size)-start]); err != nil {
				return err
			}
			if end <= size {
				return nil // a retry of leaves already appended
			}
		}
		rng, err := l.rangeAt(tx, size, st.Root)
		if err != nil {
			return err
		}
		skip := size - start
		rows := make([]logLeaf, 0, uint64(len(leaves))-skip)
		nodes := make([]logNode, 0, len(rows)+64)
		var known map[compact.NodeID][]byte
		if l.inTx {
			known = make(map[compact.NodeID][]byte, 2*len(leaves)+64)
			for i, id := range compact.RangeNodes(0, size, nil) {
				known[id] = rng.Hashes()[i]
			}
		}
		visit := func(id compact.NodeID, h []byte) {
			if id.Level > 0 {
				nodes = append(nodes, logNode{Level: uint8(id.Level), Idx: id.Index, Hash: h})
			}
			if known != nil {
				known[id] = h
			}
		}
		for i := skip; i < uint64(len(leaves)); i++ {
			if err := rng.Append(hashes[i], visit); err != nil {
				return err
			}
			rows = append(rows, logLeaf{Idx: start + i, Leaf: leaves[i], Hash: hashes[i]})
		}
		root, err := rng.GetRootHash(nil)
		if err != nil {
			return err
		}
		if tx.Dialector.Name() == "postgres" {
			if err := appendPG(ctx, tx, rows, nodes, size, end, root, l.now().UTC()); err != nil {
				return err
			}
		} else if err := appendRows(tx, rows, nodes, size, end, root, l.now().UTC()); err != nil {
			return err
		}
		appended = rng
		if l.inTx {
			l.locked = &state{Size: end}
			copy(l.locked.root[:], root)
			l.prior = &state{Size: size}
			copy(l.prior.root[:], st.Root) // rangeAt checked it is the range's root
			l.known = known
		}
		return nil
	}
	var err error
	if l.inTx {
		err = write(l.db.WithContext(ctx)) // the caller's transaction: a failure rolls all of it back
	} else {
		err = l.db.WithContext(ctx).Transaction(write)
	}
	if err != nil {
		l.rng = nil
		var verr *VerificationError
		if errors.Is(err, ErrGap) || errors.Is(err, ErrConflict) || errors.As(err, &verr) {
			return err
		}
		return fmt.Errorf("audit: embedded log append at %d: %w", start, err)
	}
	if appended != nil {
		l.rng = appended
		l.notifyMu.Lock()
		close(l.notify)
		l.notify = make(chan struct{})
		l.notifyMu.Unlock()
	}
	return nil
}

// appendRows writes an append's leaves, nodes, state and root through
// gorm (SQLite): four statements.
func appendRows(tx *gorm.DB, rows []logLeaf, nodes []logNode, size, end uint64, root []byte, now time.Time) error {
	if err := tx.CreateInBatches(rows, insertBatch).Error; err != nil {
		return fmt.Errorf("insert leaves: %w", err)
	}
	if len(nodes) > 0 {
		if err := tx.CreateInBatches(nodes, insertBatch).Error; err != nil {
			return fmt.Errorf("insert nodes: %w", err)
		}
	}
	res := tx.Model(&logState{}).Where("id = ? AND size = ?", stateID, size).
		Updates(map[string]any{"size": end, "root": root})
	if res.Error != nil {
		return fmt.Errorf("update state: %w", res.Error)
	}
	if res.RowsAffected != 1 {
		return fmt.Errorf("update state: size changed under the lock")
	}
	if err := tx.Create(&logRoot{Size: end, Root: root, CreatedAt: now}).Error; err != nil {
		return fmt.Errorf("insert root: %w", err)
	}
	return nil
}

// Deferrer is a transaction that queues writes to send them with its next
// read or its commit, in one round trip (store.DB.InAuditTx on
// PostgreSQL). A view whose transaction (In) has a Deferrer as its
// connection hands it an append's write instead of running it.
type Deferrer interface {
	Defer(sql string, args ...any)
}

// appendPG writes an append's leaves, nodes, state and root in one
// statement (PostgreSQL): a sequencer step's round trips are most of its
// time. The root row is inserted only if the state still had size, and the
// statement fails otherwise (the cast of the message to an integer is the
// error), so that a deferred write (Deferrer) fails its transaction's
// commit, as a write run here fails at once.
func appendPG(ctx context.Context, tx *gorm.DB, rows []logLeaf, nodes []logNode, size, end uint64, root []byte, now time.Time) error {
	li, ll, lh := make([]int64, len(rows)), make([][]byte, len(rows)), make([][]byte, len(rows))
	for i, r := range rows {
		li[i], ll[i], lh[i] = int64(r.Idx), r.Leaf, r.Hash
	}
	nl, ni, nh := make([]int16, len(nodes)), make([]int64, len(nodes)), make([][]byte, len(nodes))
	for i, n := range nodes {
		nl[i], ni[i], nh[i] = int16(n.Level), int64(n.Idx), n.Hash
	}
	const q = `WITH
  lv AS (INSERT INTO audit_log_leaves (idx, leaf, hash) SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[])),
  nd AS (INSERT INTO audit_log_nodes (level, idx, hash) SELECT * FROM unnest($4::smallint[], $5::bigint[], $6::bytea[])),
  st AS (UPDATE audit_log_state SET size = $7, root = $8 WHERE id = $9 AND size = $10 RETURNING 1),
  rt AS (INSERT INTO audit_log_roots (size, root, created_at) SELECT $7, $8, $11 FROM st RETURNING 1)
SELECT (CASE WHEN count(*) = 1 THEN '1' ELSE 'audit log state changed under its lock' END)::int FROM rt`
	args := []any{li, ll, lh, nl, ni, nh, int64(end), root, stateID, int64(size), now}
	if d, ok := tx.Statement.ConnPool.(Deferrer); ok {
		d.Defer(q, args...)
		return nil
	}
	// Past gorm's statement builder, which would spell a slice out as a
	// list: pgx sends each as an array.
	if _, err := tx.Statement.ConnPool.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("write leaves, nodes, state and root: %w", err)
	}
	return nil
}

// compareStored checks that the stored leaves from start on equal leaves.
func compareStored(tx *gorm.DB, start uint64, leaves [][]byte) error {
	var old []logLeaf
	err := tx.Where("idx >= ? AND idx < ?", start, start+uint64(len(leaves))).Order("idx").Find(&old).Error
	if err != nil {
		return fmt.Errorf("read leaves: %w", err)
	}
	for i, leaf := range leaves {
		idx := start + uint64(i)
		if i >= len(old) || old[i].Idx != idx {
			return &VerificationError{Op: "leaf", Index: idx, Err: errors.New("leaf row missing")}
		}
		if !bytes.Equal(old[i].Leaf, leaf) {
			return fmt.Errorf("%w: index %d", ErrConflict, idx)
		}
	}
	return nil
}

// rangeAt returns a compact range [0, size) the caller may extend: a copy of
// the cached one, or one read from the stored nodes and checked against the
// stored root, so that a modified border node is not built upon.
func (l *EmbeddedLog) rangeAt(db *gorm.DB, size uint64, root []byte) (*compact.Range, error) {
	if l.rng != nil && l.rng.End() == size && size > 0 {
		// The cached range may be one a rolled-back transaction built:
		// trust it only if it hashes to the stored root.
		if got, err := l.rng.GetRootHash(nil); err == nil && bytes.Equal(got, root) {
			return rangeFactory.NewRange(0, size, slices.Clone(l.rng.Hashes()))
		}
	}
	hashes, err := fetchNodes(db, compact.RangeNodes(0, size, nil))
	if err != nil {
		return nil, err
	}
	rng, err := rangeFactory.NewRange(0, size, hashes)
	if err != nil {
		return nil, err
	}
	got := emptyRoot[:]
	if size > 0 {
		if got, err = rng.GetRootHash(nil); err != nil {
			return nil, err
		}
	}
	if !bytes.Equal(got, root) {
		return nil, &VerificationError{Op: "root", Size: size, Want: root, Got: got,
			Err: errors.New("stored border nodes do not hash to the stored root")}
	}
	return rng, nil
}

// AppendedNodes returns what this view's last Append knew of the tree: the
// size it found (from), the size it left (end), and the hashes of the
// nodes it knew then (the range's) and made. The audit path of a leaf it
// appended, in the tree of size end, is made of them only (every sibling on
// the path is a node the Append made, or a node of the range it started
// from): after the step's transaction commits, the sequencer keeps them so
// that a receipt's proof reads nothing (see Sequencer.ProveAppended). nodes
// is nil when the view appended nothing; the map is not written to again.
func (l *EmbeddedLog) AppendedNodes() (from, end uint64, nodes map[compact.NodeID][]byte) {
	if l.prior == nil || l.locked == nil || l.known == nil {
		return 0, 0, nil
	}
	return l.prior.Size, l.locked.Size, l.known
}

// pathFrom builds the audit path of leaf index in the tree of size from
// nodes, or reports false when a node it needs is not there.
func pathFrom(nodes map[compact.NodeID][]byte, index, size uint64) ([][]byte, bool) {
	ns, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, false
	}
	hashes := make([][]byte, len(ns.IDs))
	for i, id := range ns.IDs {
		h, ok := nodes[id]
		if !ok {
			return nil, false
		}
		hashes[i] = h
	}
	p, err := ns.Rehash(hashes, hasher.HashChildren)
	return p, err == nil
}

// Root implements [Log.Root].
func (l *EmbeddedLog) Root(ctx context.Context) (uint64, [32]byte, error) {
	st, err := l.state(l.db.WithContext(ctx))
	if err != nil {
		return 0, [32]byte{}, err
	}
	return st.Size, st.root, nil
}

// WaitIntegrated implements [Log.WaitIntegrated].
func (l *EmbeddedLog) WaitIntegrated(ctx context.Context, size uint64) error {
	t := time.NewTimer(embeddedPoll)
	defer t.Stop()
	for {
		l.notifyMu.Lock()
		ch := l.notify
		l.notifyMu.Unlock()
		st, err := l.state(l.db.WithContext(ctx))
		if err != nil {
			return err
		}
		if st.Size >= size {
			return nil
		}
		t.Reset(embeddedPoll)
		select {
		case <-ctx.Done():
			return fmt.Errorf("audit: wait for tree size %d (at %d): %w", size, st.Size, ctx.Err())
		case <-ch:
		case <-t.C:
		}
	}
}

// InclusionProof implements [Log.InclusionProof].
func (l *EmbeddedLog) InclusionProof(ctx context.Context, index, size uint64) ([][]byte, error) {
	if err := checkInclusion(index, size); err != nil {
		return nil, err
	}
	db := l.db.WithContext(ctx)
	st, err := l.state(db)
	if err != nil {
		return nil, err
	}
	if size > st.Size {
		return nil, fmt.Errorf("%w: tree size %d, log size %d", ErrNotIntegrated, size, st.Size)
	}
	p, leafHash, err := inclusion(db, index, size)
	if err != nil {
		return nil, err
	}
	if err := l.verifyInclusion(db, st, index, size, leafHash, p); err != nil {
		return nil, err
	}
	return p, nil
}

// storedInclusionProof is InclusionProof without the check against the
// stored roots: the audit path as the stored nodes give it, in one read,
// for a caller that verifies it against a root it holds (see
// Sequencer.ProveAppended).
func (l *EmbeddedLog) storedInclusionProof(ctx context.Context, index, size uint64) ([][]byte, error) {
	if err := checkInclusion(index, size); err != nil {
		return nil, err
	}
	p, _, err := inclusion(l.db.WithContext(ctx), index, size)
	return p, err
}

// inclusion builds the inclusion proof for index in the tree of size from
// stored nodes, and returns it with the stored leaf hash.
func inclusion(db *gorm.DB, index, size uint64) ([][]byte, []byte, error) {
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	ids := append(slices.Clip(nodes.IDs), compact.NewNodeID(0, index))
	hashes, err := fetchNodes(db, ids)
	if err != nil {
		return nil, nil, err
	}
	n := len(hashes) - 1
	p, err := nodes.Rehash(hashes[:n], hasher.HashChildren)
	if err != nil {
		return nil, nil, err
	}
	return p, hashes[n], nil
}

// verifyInclusion checks p against the recorded root at size or, when no root
// was recorded at that size, against the current root through a consistency
// proof from the root p implies.
func (l *EmbeddedLog) verifyInclusion(db *gorm.DB, st state, index, size uint64, leafHash []byte, p [][]byte) error {
	root, recorded, err := recordedRoot(db, st, size)
	if err != nil {
		return err
	}
	if recorded {
		if err := proof.VerifyInclusion(hasher, index, size, leafHash, p, root); err != nil {
			return &VerificationError{Op: "inclusion", Index: index, Size: size, Err: err}
		}
		return nil
	}
	derived, err := proof.RootFromInclusionProof(hasher, index, size, leafHash, p)
	if err != nil {
		return &VerificationError{Op: "inclusion", Index: index, Size: size, Err: err}
	}
	return anchor(db, st, size, derived)
}

// anchor checks that root, a root at size not recorded in the roots table,
// is consistent with the current root.
func anchor(db *gorm.DB, st state, size uint64, root []byte) error {
	if size == st.Size {
		if !bytes.Equal(root, st.root[:]) {
			return &VerificationError{Op: "root", Size: size, Want: st.root[:], Got: root}
		}
		return nil
	}
	p, err := consistency(stored(db), size, st.Size)
	if err != nil {
		return err
	}
	if err := proof.VerifyConsistency(hasher, size, st.Size, p, root, st.root[:]); err != nil {
		return &VerificationError{Op: "consistency", Index: size, Size: st.Size, Err: err}
	}
	return nil
}

// ConsistencyProof implements [Log.ConsistencyProof].
func (l *EmbeddedLog) ConsistencyProof(ctx context.Context, from, to uint64) ([][]byte, error) {
	if err := checkConsistency(from, to); err != nil {
		return nil, err
	}
	db := l.db.WithContext(ctx)
	st, err := l.state(db)
	if err != nil {
		return nil, err
	}
	if to > st.Size {
		return nil, fmt.Errorf("%w: tree size %d, log size %d", ErrNotIntegrated, to, st.Size)
	}
	if from == to {
		return [][]byte{}, nil
	}
	p, err := consistency(l.nodesIn(db), from, to)
	if err != nil {
		return nil, err
	}
	var root1 []byte
	if l.prior != nil && from == l.prior.Size {
		root1 = l.prior.root[:] // the usual step: from the last checkpoint, the size Append found
	} else if root1, _, err = rootAt(db, st, from); err != nil {
		return nil, err
	}
	root2, recorded, err := rootAt(db, st, to)
	if err != nil {
		return nil, err
	}
	if !recorded {
		if err := anchor(db, st, to, root2); err != nil {
			return nil, err
		}
	}
	if err := proof.VerifyConsistency(hasher, from, to, p, root1, root2); err != nil {
		return nil, &VerificationError{Op: "consistency", Index: from, Size: to, Err: err}
	}
	return p, nil
}

// nodesIn returns a source of node hashes: those the view's Append knew
// and made when every one asked for is among them (a perfect subtree's
// hash never changes, so they hold in any later tree), else the stored
// ones in db. The sequencer's consistency proof from its last checkpoint
// needs no read.
func (l *EmbeddedLog) nodesIn(db *gorm.DB) func([]compact.NodeID) ([][]byte, error) {
	return func(ids []compact.NodeID) ([][]byte, error) {
		if l.known != nil {
			hashes := make([][]byte, len(ids))
			ok := true
			for i, id := range ids {
				if hashes[i], ok = l.known[id]; !ok {
					break
				}
			}
			if ok {
				return hashes, nil
			}
		}
		return fetchNodes(db, ids)
	}
}

// stored is the source of the nodes stored in db.
func stored(db *gorm.DB) func([]compact.NodeID) ([][]byte, error) {
	return func(ids []compact.NodeID) ([][]byte, error) { return fetchNodes(db, ids) }
}

// consistency builds the consistency proof from size from to size to
// from the node hashes nodes returns.
func consistency(nodes func([]compact.NodeID) ([][]byte, error), from, to uint64) ([][]byte, error) {
	ids, err := proof.Consistency(from, to)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	hashes, err := nodes(ids.IDs)
	if err != nil {
		return nil, err
	}
	return ids.Rehash(hashes, hasher.HashChildren)
}

// rootAt returns the root at size: the recorded one if there is one, else one
// computed from the stored nodes (recorded == false: not yet checked).
func rootAt(db *gorm.DB, st state, size uint64) (root []byte, recorded bool, err error) {
	root, recorded, err = recordedRoot(db, st, size)
	if err != nil || recorded {
		return root, recorded, err
	}
	hashes, err := fetchNodes(db, compact.RangeNodes(0, size, nil))
	if err != nil {
		return nil, false, err
	}
	rng, err := rangeFactory.NewRange(0, size, hashes)
	if err != nil {
		return nil, false, err
	}
	root, err = rng.GetRootHash(nil)
	return root, false, err
}

// recordedRoot returns the root recorded at size, if any.
func recordedRoot(db *gorm.DB, st state, size uint64) ([]byte, bool, error) {
	switch size {
	case 0:
		return emptyRoot[:], true, nil
	case st.Size:
		return st.root[:], true, nil
	}
	var roots []logRoot
	if err := db.Where("size = ?", size).Limit(1).Find(&roots).Error; err != nil {
		return nil, false, fmt.Errorf("audit: read root at size %d: %w", size, err)
	}
	if len(roots) == 0 {
		return nil, false, nil
	}
	return roots[0].Root, true, nil
}

// Leaf implements [Log.Leaf]. The leaf is checked against the current root
// through its inclusion proof before it is returned.
func (l *EmbeddedLog) Leaf(ctx context.Context, index uint64) ([]byte, error) {
	db := l.db.WithContext(ctx)
	st, err := readState(db)
	if err != nil {
		return nil, err
	}
	if index >= st.Size {
		return nil, fmt.Errorf("%w: leaf %d, log size %d", ErrNotIntegrated, index, st.Size)
	}
	var rows []logLeaf
	if err := db.Where("idx = ?", index).Limit(1).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("audit: read leaf %d: %w", index, err)
	}
	if len(rows) == 0 {
		return nil, &VerificationError{Op: "leaf", Index: index, Err: errors.New("leaf row missing")}
	}
	leaf := rows[0].Leaf
	p, _, err := inclusion(db, index, st.Size)
	if err != nil {
		return nil, err
	}
	if err := proof.VerifyInclusion(hasher, index, st.Size, hasher.HashLeaf(leaf), p, st.root[:]); err != nil {
		return nil, &VerificationError{Op: "leaf", Index: index, Size: st.Size, Err: err}
	}
	return leaf, nil
}

type state struct {
	Size uint64
	root [32]byte
}

// state is the log's state: the one the view's Append locked, or read.
func (l *EmbeddedLog) state(db *gorm.DB) (state, error) {
	if l.locked != nil {
		return *l.locked, nil
	}
	return readState(db)
}

func readState(db *gorm.DB) (state, error) {
	var st logState
	if err := db.Take(&st, "id = ?", stateID).Error; err != nil {
		return state{}, fmt.Errorf("audit: read embedded log state: %w", err)
	}
	root, ok := to32(st.Root)
	if !ok {
		return state{}, &VerificationError{Op: "root", Size: st.Size, Got: st.Root, Err: errors.New("stored root is not 32 bytes")}
	}
	return state{Size: st.Size, root: root}, nil
}

// fetchNodes returns the hashes of ids, in order, from one query: level 0
// from the leaves table, higher levels from the nodes table.
func fetchNodes(db *gorm.DB, ids []compact.NodeID) ([][]byte, error) {
	if len(ids) == 0 {
		return [][]byte{}, nil
	}
	var q strings.Builder
	args := make([]any, 0, 2*len(ids))
	var leafIDs, nodeIDs int
	for _, id := range ids {
		if id.Level == 0 {
			leafIDs++
		} else {
			nodeIDs++
		}
	}
	if leafIDs > 0 {
		q.WriteString("SELECT 0, idx, hash FROM audit_log_leaves WHERE idx IN (")
		first := true
		for _, id := range ids {
			if id.Level == 0 {
				if !first {
					q.WriteByte(',')
				}
				first = false
				q.WriteByte('?')
				args = append(args, id.Index)
			}
		}
		q.WriteByte(')')
	}
	if nodeIDs > 0 {
		if leafIDs > 0 {
			q.WriteString(" UNION ALL ")
		}
		q.WriteString("SELECT level, idx, hash FROM audit_log_nodes WHERE ")
		first := true
		for _, id := range ids {
			if id.Level > 0 {
				if !first {
					q.WriteString(" OR ")
				}
				first = false
				q.WriteString("(level = ? AND idx = ?)")
				args = append(args, id.Level, id.Index)
			}
		}
	}
	rows, err := db.Raw(q.String(), args...).Rows()
	if err != nil {
		return nil, fmt.Errorf("audit: read tree nodes: %w", err)
	}
	defer rows.Close()
	found := make(map[compact.NodeID][]byte, len(ids))
	for rows.Next() {
		var level uint
		var idx uint64
		var hash []byte
		if err := rows.Scan(&level, &idx, &hash); err != nil {
			return nil, fmt.Errorf("audit: read tree nodes: %w", err)
		}
		found[compact.NewNodeID(level, idx)] = hash
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: read tree nodes: %w", err)
	}
	hashes := make([][]byte, len(ids))
	for i, id := range ids {
		h, ok := found[id]
		if !ok {
			return nil, &VerificationError{Op: "node", Level: id.Level, Index: id.Index, Err: errors.New("node row missing")}
		}
		if len(h) != 32 {
			return nil, &VerificationError{Op: "node", Level: id.Level, Index: id.Index, Got: h, Err: errors.New("stored hash is not 32 bytes")}
		}
		hashes[i] = h
	}
	return hashes, nil
}

// verifyChunk is how many leaves Verify reads per query.
const verifyChunk = 4096

// Verify recomputes the whole tree from the stored leaves and checks every
// stored leaf hash, node, recorded root and the current state against it. It
// returns nil or the first discrepancy as a *VerificationError (other errors
// are read failures). It reads every row: O(n), for audits and tests.
func (l *EmbeddedLog) Verify(ctx context.Context) error {
	db := l.db.WithContext(ctx)
	st, err := readState(db)
	if err != nil {
		return err
	}
	rng := rangeFactory.NewEmptyRange(0)
	var nodeCount uint64
	for a := uint64(0); a < st.Size; a += verifyChunk {
		b := min(a+verifyChunk, st.Size)
		var leaves []logLeaf
		if err := db.Where("idx >= ? AND idx < ?", a, b).Order("idx").Find(&leaves).Error; err != nil {
			return fmt.Errorf("audit: verify: read leaves: %w", err)
		}
		stored, err := nodesCreatedIn(db, a, b)
		if err != nil {
			return err
		}
		var roots []logRoot
		if err := db.Where("size > ? AND size <= ?", a, b).Order("size").Find(&roots).Error; err != nil {
			return fmt.Errorf("audit: verify: read roots: %w", err)
		}
		var bad error
		visit := func(id compact.NodeID, h []byte) {
			if id.Level == 0 || bad != nil {
				return
			}
			nodeCount++
			got, ok := stored[id]
			switch {
			case !ok:
				bad = &VerificationError{Op: "node", Level: id.Level, Index: id.Index, Want: h, Err: errors.New("node row missing")}
			case !bytes.Equal(got, h):
				bad = &VerificationError{Op: "node", Level: id.Level, Index: id.Index, Want: h, Got: got}
			}
			delete(stored, id)
		}
		for i := a; i < b; i++ {
			k := i - a
			if k >= uint64(len(leaves)) || leaves[k].Idx != i {
				return &VerificationError{Op: "leaf", Index: i, Err: errors.New("leaf row missing")}
			}
			h := hasher.HashLeaf(leaves[k].Leaf)
			if !bytes.Equal(h, leaves[k].Hash) {
				return &VerificationError{Op: "leaf hash", Index: i, Want: h, Got: leaves[k].Hash}
			}
			if err := rng.Append(h, visit); err != nil {
				return err
			}
			if bad != nil {
				return bad
			}
			for len(roots) > 0 && roots[0].Size == i+1 {
				root, err := rng.GetRootHash(nil)
				if err != nil {
					return err
				}
				if !bytes.Equal(root, roots[0].Root) {
					return &VerificationError{Op: "root", Size: i + 1, Want: root, Got: roots[0].Root}
				}
				roots = roots[1:]
			}
		}
		if len(stored) > 0 {
			id := slices.MinFunc(slices.Collect(maps.Keys(stored)), func(x, y compact.NodeID) int {
				return cmp.Or(cmp.Compare(x.Level, y.Level), cmp.Compare(x.Index, y.Index))
			})
			return &VerificationError{Op: "node", Level: id.Level, Index: id.Index, Got: stored[id], Err: errors.New("unexpected node row")}
		}
	}
	root := emptyRoot[:]
	if st.Size > 0 {
		if root, err = rng.GetRootHash(nil); err != nil {
			return err
		}
	}
	if !bytes.Equal(root, st.root[:]) {
		return &VerificationError{Op: "root", Size: st.Size, Want: root, Got: st.root[:]}
	}
	var counts struct{ Leaves, Nodes, Roots uint64 }
	err = db.Raw(`SELECT
		(SELECT COUNT(*) FROM audit_log_leaves) AS leaves,
		(SELECT COUNT(*) FROM audit_log_nodes) AS nodes,
		(SELECT COUNT(*) FROM audit_log_roots WHERE size > ?) AS roots`, st.Size).Scan(&counts).Error
	if err != nil {
		return fmt.Errorf("audit: verify: count rows: %w", err)
	}
	switch {
	case counts.Leaves != st.Size:
		return &VerificationError{Op: "size", Size: st.Size, Err: fmt.Errorf("%d leaf rows", counts.Leaves)}
	case counts.Nodes != nodeCount:
		return &VerificationError{Op: "size", Size: st.Size, Err: fmt.Errorf("%d node rows, want %d", counts.Nodes, nodeCount)}
	case counts.Roots != 0:
		return &VerificationError{Op: "size", Size: st.Size, Err: fmt.Errorf("%d roots recorded beyond the log size", counts.Roots)}
	}
	return nil
}

// nodesCreatedIn returns the stored nodes that appending leaves [a, b)
// creates: node (L, i) appears with leaf (i+1)*2^L - 1.
func nodesCreatedIn(db *gorm.DB, a, b uint64) (map[compact.NodeID][]byte, error) {
	var q strings.Builder
	var args []any
	q.WriteString("SELECT level, idx, hash FROM audit_log_nodes WHERE ")
	n := 0
	for level := uint(1); level < 64 && b>>level > 0; level++ {
		lo, hi := a>>level, b>>level-1
		if lo > hi {
			continue
		}
		if n > 0 {
			q.WriteString(" OR ")
		}
		n++
		q.WriteString("(level = ? AND idx >= ? AND idx <= ?)")
		args = append(args, level, lo, hi)
	}
	out := make(map[compact.NodeID][]byte)
	if n == 0 {
		return out, nil
	}
	rows, err := db.Raw(q.String(), args...).Rows()
	if err != nil {
		return nil, fmt.Errorf("audit: verify: read nodes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var level uint
		var idx uint64
		var hash []byte
		if err := rows.Scan(&level, &idx, &hash); err != nil {
			return nil, fmt.Errorf("audit: verify: read nodes: %w", err)
		}
		out[compact.NewNodeID(level, idx)] = hash
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: verify: read nodes: %w", err)
	}
	return out, nil
}

// Leaves implements [Log.Leaves] with one query.
func (l *EmbeddedLog) Leaves(ctx context.Context, start, end uint64) ([][]byte, error) {
	if err := checkRange(0, start, end); err != nil {
		return nil, err
	}
	db := l.db.WithContext(ctx)
	st, err := readState(db)
	if err != nil {
		return nil, err
	}
	if end > st.Size {
		return nil, fmt.Errorf("%w: leaves up to %d, log size %d", ErrNotIntegrated, end, st.Size)
	}
	var rows []logLeaf
	if err := db.Where("idx >= ? AND idx < ?", start, end).Order("idx").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("audit: read leaves [%d, %d): %w", start, end, err)
	}
	out := make([][]byte, end-start)
	for i := range out {
		idx := start + uint64(i)
		if i >= len(rows) || rows[i].Idx != idx {
			return nil, &VerificationError{Op: "leaf", Index: idx, Err: errors.New("leaf row missing")}
		}
		out[i] = rows[i].Leaf
	}
	return out, nil
}

// NodeHashes implements [Log.NodeHashes] with one query: level 0 from the
// leaves' stored hashes, higher levels from the stored nodes (every perfect
// subtree is stored).
func (l *EmbeddedLog) NodeHashes(ctx context.Context, level uint, start, end uint64) ([][]byte, error) {
	if err := checkRange(level, start, end); err != nil {
		return nil, err
	}
	db := l.db.WithContext(ctx)
	st, err := readState(db)
	if err != nil {
		return nil, err
	}
	if end<<level > st.Size {
		return nil, fmt.Errorf("%w: nodes up to %d at level %d, log size %d", ErrNotIntegrated, end, level, st.Size)
	}
	q := db.Table(logNode{}.TableName()).Where("level = ? AND idx >= ? AND idx < ?", level, start, end)
	if level == 0 {
		q = db.Table(logLeaf{}.TableName()).Where("idx >= ? AND idx < ?", start, end)
	}
	var rows []struct {
		Idx  uint64
		Hash []byte
	}
	if err := q.Select("idx, hash").Order("idx").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("audit: read nodes [%d, %d) at level %d: %w", start, end, level, err)
	}
	out := make([][]byte, end-start)
	for _, r := range rows {
		if r.Idx < start || r.Idx >= end {
			continue
		}
		if len(r.Hash) != 32 {
			return nil, &VerificationError{Op: "node", Level: level, Index: r.Idx, Got: r.Hash, Err: errors.New("stored hash is not 32 bytes")}
		}
		out[r.Idx-start] = r.Hash
	}
	for i, h := range out {
		if h == nil {
			return nil, &VerificationError{Op: "node", Level: level, Index: start + uint64(i), Err: errors.New("node row missing")}
		}
	}
	return out, nil
}
