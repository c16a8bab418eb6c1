package audit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"gorm.io/driver/postgres"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/lethe-io/lethe/internal/testenv"
)

// openSQLite opens a SQLite database in a temp dir the way internal/store
// does (WAL, immediate transactions, FULL sync).
func openSQLite(tb testing.TB) *gorm.DB {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "lethe.db")
	return openGorm(tb, sqlite.Open("file:"+path+"?_journal_mode=WAL&_busy_timeout=10000&_txlock=immediate&_synchronous=FULL"))
}

// openPostgres opens a fresh PostgreSQL database (see testenv.Postgres).
func openPostgres(tb testing.TB) *gorm.DB {
	tb.Helper()
	return openGorm(tb, postgres.Open(testenv.Postgres(tb)))
}

func openGorm(tb testing.TB, d gorm.Dialector) *gorm.DB {
	tb.Helper()
	db, err := gorm.Open(d, &gorm.Config{
		TranslateError:         true,
		PrepareStmt:            true,
		SkipDefaultTransaction: true,
		Logger:                 logger.Discard,
	})
	if err != nil {
		tb.Fatalf("open database: %v", err)
	}
	tb.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return db
}

func newEmbedded(tb testing.TB, db *gorm.DB) *EmbeddedLog {
	tb.Helper()
	l, err := NewEmbeddedLog(db, nil)
	if err != nil {
		tb.Fatalf("NewEmbeddedLog() = %v", err)
	}
	return l
}

var embeddedBackends = []struct {
	name string
	open func(testing.TB) *gorm.DB
}{
	{"SQLite", openSQLite},
	{"PostgreSQL", openPostgres},
}

func TestEmbeddedLog(t *testing.T) {
	for _, b := range embeddedBackends {
		t.Run(b.name, func(t *testing.T) {
			testLog(t, func(t *testing.T) (Log, func() Log) {
				db := b.open(t)
				return newEmbedded(t, db), func() Log { return newEmbedded(t, db) }
			})
		})
	}
}

// TestEmbeddedLogTamperedBorder modifies a node on the tree's right border:
// an instance without the border cached refuses to build on it.
func TestEmbeddedLogTamperedBorder(t *testing.T) {
	ctx := testContext(t)
	db := openSQLite(t)
	appendAndWait(t, newEmbedded(t, db), 0, testLeaves("border", 0, 45))
	// Border of 45 leaves: (5,0), (3,4), (2,10), (0,44).
	if err := db.Model(&logNode{}).Where("level = 3 AND idx = 4").Update("hash", make([]byte, 32)).Error; err != nil {
		t.Fatal(err)
	}
	err := newEmbedded(t, db).Append(ctx, 45, testLeaves("border", 45, 1))
	var verr *VerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("Append on a tampered border = %v, want a *VerificationError", err)
	}
	t.Log(err)
}

// TestEmbeddedLogUnrecordedSizes asks for proofs at sizes inside one append
// batch, for which no root was recorded: they are computed from the nodes
// and anchored to the current root through a consistency proof.
func TestEmbeddedLogUnrecordedSizes(t *testing.T) {
	l := newEmbedded(t, openSQLite(t))
	ref := &refTree{}
	batch := testLeaves("batch", 0, 100)
	appendAndWait(t, l, 0, batch[:37])
	appendAndWait(t, l, 37, batch[37:])
	ref.add(batch...)
	for _, size := range []uint64{1, 2, 3, 20, 36, 37, 38, 63, 64, 65, 99, 100} {
		for _, index := range []uint64{0, size / 2, size - 1} {
			assertInclusion(t, l, ref, index, size)
		}
		for _, to := range []uint64{size, size + 1, 64, 100} {
			if size <= to && to <= 100 {
				assertConsistency(t, l, ref, size, to)
			}
		}
	}
}

// TestEmbeddedLogTamper modifies one stored row at a time and checks that
// the proofs it touches no longer verify against the recorded root, that
// the log refuses to serve them, and that Verify names the row.
func TestEmbeddedLogTamper(t *testing.T) {
	const n = 45
	tests := []struct {
		name   string
		table  string
		where  string
		args   []any
		column string
		index  uint64 // a leaf whose inclusion proof at size n reads the row
		from   uint64 // a size whose consistency proof to n reads the row
		wantOp string
	}{
		{"node", "audit_log_nodes", "level = ? AND idx = ?", []any{3, 0}, "hash", 9, 9, "node"},
		{"leaf hash", "audit_log_leaves", "idx = ?", []any{4}, "hash", 5, 5, "leaf hash"},
		{"leaf bytes", "audit_log_leaves", "idx = ?", []any{4}, "leaf", 4, 0, "leaf hash"},
		{"recorded root", "audit_log_roots", "size = ?", []any{20}, "root", 3, 20, "root"},
		{"state root", "audit_log_state", "id = ?", []any{1}, "root", 30, 0, "root"},
	}
	for _, b := range embeddedBackends {
		for _, tt := range tests {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				ctx := testContext(t)
				db := b.open(t)
				l := newEmbedded(t, db)
				ref := &refTree{}
				for _, k := range []int{20, n - 20} {
					batch := testLeaves("tamper", int(ref.size()), k)
					appendAndWait(t, l, ref.size(), batch)
					ref.add(batch...)
				}
				if err := l.Verify(ctx); err != nil {
					t.Fatalf("Verify() before tampering = %v", err)
				}
				var old []byte
				if err := db.Table(tt.table).Where(tt.where, tt.args...).Select(tt.column).Row().Scan(&old); err != nil {
					t.Fatalf("read %s: %v", tt.table, err)
				}
				forged := append([]byte{}, old...)
				forged[len(forged)-1] ^= 1
				res := db.Table(tt.table).Where(tt.where, tt.args...).Update(tt.column, forged)
				if res.Error != nil || res.RowsAffected != 1 {
					t.Fatalf("tamper with %s: %v (%d rows)", tt.table, res.Error, res.RowsAffected)
				}

				// What the log now serves, or refuses to.
				var verr *VerificationError
				switch tt.name {
				case "leaf bytes":
					// Proofs use the stored hash; the leaf itself is refused.
					if _, err := l.Leaf(ctx, tt.index); !errors.As(err, &verr) {
						t.Errorf("Leaf(%d) = %v, want a *VerificationError", tt.index, err)
					}
				case "state root":
					// The current root itself is wrong: every proof at the
					// current size fails, and clients holding the real root
					// see the mismatch.
					_, root, _ := l.Root(ctx)
					p := ref.inclusion(tt.index, n)
					if err := proof.VerifyInclusion(hasher, tt.index, n, hasher.HashLeaf(ref.leaves[tt.index]), p, root[:]); err == nil {
						t.Errorf("the reference proof verifies against the forged root")
					}
					if _, err := l.InclusionProof(ctx, tt.index, n); !errors.As(err, &verr) {
						t.Errorf("InclusionProof(%d, %d) = %v, want a *VerificationError", tt.index, n, err)
					}
				case "recorded root":
					if _, err := l.InclusionProof(ctx, tt.index, 20); !errors.As(err, &verr) {
						t.Errorf("InclusionProof(%d, 20) = %v, want a *VerificationError", tt.index, err)
					}
					if _, err := l.ConsistencyProof(ctx, tt.from, n); !errors.As(err, &verr) {
						t.Errorf("ConsistencyProof(%d, %d) = %v, want a *VerificationError", tt.from, n, err)
					}
				default:
					// The proof built from the forged row does not verify
					// against the recorded root, so the log refuses it.
					p, err := l.InclusionProof(ctx, tt.index, n)
					if !errors.As(err, &verr) {
						t.Errorf("InclusionProof(%d, %d) = %x, %v; want a *VerificationError", tt.index, n, p, err)
					}
					forgedProof, leafHash, err := inclusion(db.WithContext(ctx), tt.index, n)
					if err != nil {
						t.Fatal(err)
					}
					if err := proof.VerifyInclusion(hasher, tt.index, n, leafHash, forgedProof, ref.rootAt(n)); err == nil {
						t.Errorf("a proof built from the tampered rows verifies against the recorded root")
					}
					if _, err := l.ConsistencyProof(ctx, tt.from, n); !errors.As(err, &verr) {
						t.Errorf("ConsistencyProof(%d, %d) = %v, want a *VerificationError", tt.from, n, err)
					}
				}

				err := l.Verify(ctx)
				if !errors.As(err, &verr) {
					t.Fatalf("Verify() after tampering with %s = %v, want a *VerificationError", tt.name, err)
				}
				if verr.Op != tt.wantOp {
					t.Errorf("Verify() = %v; want Op %q", err, tt.wantOp)
				}
				t.Logf("Verify() = %v", err)
			})
		}
	}
}

// TestEmbeddedLogVerifyExtraRows checks that Verify reports rows that should
// not exist.
func TestEmbeddedLogVerifyExtraRows(t *testing.T) {
	ctx := testContext(t)
	db := openSQLite(t)
	l := newEmbedded(t, db)
	appendAndWait(t, l, 0, testLeaves("extra", 0, 10))
	if err := db.Create(&logNode{Level: 5, Idx: 0, Hash: make([]byte, 32)}).Error; err != nil {
		t.Fatal(err)
	}
	var verr *VerificationError
	if err := l.Verify(ctx); !errors.As(err, &verr) {
		t.Fatalf("Verify() with an extra node row = %v, want a *VerificationError", err)
	}
	if err := db.Where("level = 5").Delete(&logNode{}).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Create(&logLeaf{Idx: 10, Leaf: []byte("x"), Hash: hasher.HashLeaf([]byte("x"))}).Error; err != nil {
		t.Fatal(err)
	}
	if err := l.Verify(ctx); !errors.As(err, &verr) {
		t.Fatalf("Verify() with a leaf row beyond the size = %v, want a *VerificationError", err)
	}
}

// BenchmarkEmbeddedAppend measures appends with proofs available (every
// Append integrates). Report: leaves/s.
func BenchmarkEmbeddedAppend(b *testing.B) {
	for _, backend := range embeddedBackends {
		for _, batch := range []int{1, 10, 100, 1000} {
			b.Run(fmt.Sprintf("%s/batch=%d", backend.name, batch), func(b *testing.B) {
				l := newEmbedded(b, backend.open(b))
				ctx := context.Background()
				leaves := testLeaves("bench", 0, 1<<14)
				var size uint64
				b.ResetTimer()
				start := time.Now()
				for b.Loop() {
					chunk := make([][]byte, batch)
					for i := range chunk {
						chunk[i] = leaves[(int(size)+i)%len(leaves)]
					}
					if err := l.Append(ctx, size, chunk); err != nil {
						b.Fatal(err)
					}
					size += uint64(batch)
				}
				b.ReportMetric(float64(size)/time.Since(start).Seconds(), "leaves/s")
			})
		}
	}
}

// BenchmarkEmbeddedProofs1M measures verified proofs in a tree of 2^20
// (1,048,576) leaves, on SQLite and on PostgreSQL: an inclusion proof at the
// recorded size, one at a size with no recorded root (proof + anchoring
// consistency proof), and a consistency proof. Each tree is built once (a
// benchmark with sub-benchmarks runs its body once): about 10 s on SQLite
// and 30 s on PostgreSQL here.
func BenchmarkEmbeddedProofs1M(b *testing.B) {
	if testing.Short() {
		b.Skip("builds 1M-leaf trees")
	}
	for _, backend := range embeddedBackends {
		b.Run(backend.name, func(b *testing.B) { benchmarkProofs1M(b, backend.open(b)) })
	}
}

func benchmarkProofs1M(b *testing.B, db *gorm.DB) {
	const n = 1 << 20
	ctx := context.Background()
	l := newEmbedded(b, db)
	built := time.Now()
	const batch = 1 << 14
	for start := 0; start < n; start += batch {
		if err := l.Append(ctx, uint64(start), testLeaves("1m", start, batch)); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built %d leaves in %v", n, time.Since(built).Round(time.Second))
	size, root, err := l.Root(ctx)
	if err != nil || size != n {
		b.Fatalf("Root() = %d, %v", size, err)
	}
	leaf := testLeaves("1m", 123457, 1)[0]
	b.Run("Inclusion", func(b *testing.B) {
		i := uint64(0)
		for b.Loop() {
			index := (i * 7919) % n
			i++
			p, err := l.InclusionProof(ctx, index, n)
			if err != nil {
				b.Fatal(err)
			}
			if index == 123457 {
				if err := proof.VerifyInclusion(hasher, index, n, hasher.HashLeaf(leaf), p, root[:]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("InclusionNonRecordedSize", func(b *testing.B) {
		i := uint64(0)
		for b.Loop() {
			index := (i * 7919) % (n - 1)
			i++
			if _, err := l.InclusionProof(ctx, index, n-1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Consistency", func(b *testing.B) {
		i := uint64(1)
		for b.Loop() {
			from := (i*7919)%(n-1) + 1
			i++
			if _, err := l.ConsistencyProof(ctx, from, n); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestViewConsistencyFromItsAppend checks that a view's consistency proof
// from the size its Append found to the size it left, the proof a
// sequencer step checks its new checkpoint with, is built from the nodes
// the Append knew and made: with every stored leaf and node deleted in
// the view's transaction, the proof is still there, and verifies between
// the two roots, for every old size up to 33 and several appended counts,
// on SQLite and PostgreSQL (whose append writes in one statement).
func TestViewConsistencyFromItsAppend(t *testing.T) {
	for _, b := range embeddedBackends {
		t.Run(b.name, func(t *testing.T) { testViewConsistency(t, b.open(t)) })
	}
}

func testViewConsistency(t *testing.T, db *gorm.DB) {
	ctx := context.Background()
	l := newEmbedded(t, db)
	errRollback := errors.New("roll back")
	for m := uint64(1); m <= 33; m++ {
		if err := l.Append(ctx, m-1, [][]byte{[]byte(fmt.Sprint("leaf ", m-1))}); err != nil {
			t.Fatal(err)
		}
		_, rootM, err := l.Root(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []uint64{1, 2, 3, 5, 8, 13, 21} {
			err := db.Transaction(func(tx *gorm.DB) error {
				v := l.In(tx)
				leaves := make([][]byte, k)
				for i := range leaves {
					leaves[i] = []byte(fmt.Sprint("new leaf ", m+uint64(i)))
				}
				if err := v.Append(ctx, m, leaves); err != nil {
					return err
				}
				for _, q := range []string{"DELETE FROM audit_log_nodes", "DELETE FROM audit_log_leaves"} {
					if err := tx.Exec(q).Error; err != nil {
						return err
					}
				}
				size, rootN, err := v.Root(ctx)
				if err != nil || size != m+k {
					return fmt.Errorf("view root: size %d, %v", size, err)
				}
				p, err := v.ConsistencyProof(ctx, m, m+k)
				if err != nil {
					return fmt.Errorf("consistency %d -> %d: %w", m, m+k, err)
				}
				if err := proof.VerifyConsistency(hasher, m, m+k, p, rootM[:], rootN[:]); err != nil {
					return fmt.Errorf("consistency %d -> %d does not verify: %w", m, m+k, err)
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				t.Fatal(err)
			}
		}
	}
}
